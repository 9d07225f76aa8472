/*
 * cmd_run.c - `stepprof run [--bpf|--no-bpf] [-o DIR] [--] CMD ARGS...`: run a
 * job under the profiler.
 *
 * The job gets LD_PRELOAD (libstepprof.so prepended, what was there kept),
 * STEPPROF_DIR (absolute) and NVTX_INJECTION64_PATH. With the eBPF collector
 * (--bpf; by default when root and it loads), the order is:
 *
 *   fork the job child ── it blocks on a pipe before exec
 *   start stepprof-bpf --pid CHILD -o DIR ── it prints "ready" once attached,
 *                                           or exits non-zero, reason on stderr
 *   release the child ── with STEPPROF_IO=bpf when the collector is ready, so
 *                        the preload's libc I/O wrappers stand down (no double
 *                        count); else the libc wrappers capture input
 *   wait for the job ── signals sent to us (SIGINT, SIGTERM, SIGUSR1, ...) are forwarded
 *                       (from the fork on: one sent during the attach ends the job)
 *   SIGTERM the collector, wait for it ── it flushes its trace file
 *
 * Started through sudo, the job runs as SUDO_UID/SUDO_GID; only the collector
 * keeps root. The job's end is ours: its exit status, or death by the signal
 * that killed it (end_like); or one of the RUN_EXIT_* codes below with a
 * one-line error on stderr.
 *
 * Divided into: 1. usage and exit codes, 2. locating files, 3. the trace
 * directory, 4. the job child, 5. the collector, 6. waiting, 7. command_run.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <limits.h>
#include <poll.h>
#include <pwd.h>
#include <signal.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "util.h"

int command_run(int argc, char **argv);

/* ---------------------------------------------------- 1. usage, exit codes */

/* Like env(1) and timeout(1): codes a job rarely uses itself. */
#define RUN_EXIT_FAIL 125   /* stepprof run itself failed: usage, -o DIR, libstepprof.so */
#define RUN_EXIT_NOEXEC 126 /* the command exists but cannot be executed */
#define RUN_EXIT_NOTFOUND 127 /* the command was not found */

#define COLLECTOR_READY_S 30 /* how long the collector may take to attach (STEPPROF_ATTACH_S) */
#define COLLECTOR_STOP_S 10  /* how long it may take to flush after SIGTERM */

static void run_usage(FILE *to)
{
	fprintf(to,
		"usage: stepprof run [--bpf|--no-bpf] [-o DIR] [--] CMD [ARGS...]\n"
		"  Run CMD with libstepprof.so preloaded; its trace goes to DIR\n"
		"  (default ./stepprof-YYYYmmdd-HHMMSS-PID).\n"
		"  --bpf      also start the eBPF input collector (needs root); default when root\n"
		"  --no-bpf   capture input with the libc wrappers only\n"
		"  -o DIR     trace directory (created when missing); default $STEPPROF_DIR when set\n"
		"  Exit status: CMD's (killed by signal N: dies of signal N too); 125 stepprof run failed\n"
		"  (usage, -o DIR, libstepprof.so not found); 126 CMD not executable; 127 CMD not found.\n"
		"  Environment: STEPPROF_LIB (path of libstepprof.so), STEPPROF_ATTACH_S (how long the\n"
		"  collector may take to attach, default 30), STEPPROF_* passed to the job.\n");
}

static int run_fail(int code, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

static int run_fail(int code, const char *fmt, ...)
{
	va_list ap;
	fputs("stepprof: run: ", stderr);
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fputc('\n', stderr);
	return code;
}

/* ---------------------------------------------------------- 2. locating files */

/* The directory of the running stepprof binary, "" when unknown. */
static void self_dir(char *out, size_t n)
{
	char buf[PATH_MAX];
	ssize_t len = readlink("/proc/self/exe", buf, sizeof(buf) - 1);
	out[0] = 0;
	if (len <= 0)
		return;
	buf[len] = 0;
	char *slash = strrchr(buf, '/');
	if (slash)
		*slash = 0;
	snprintf(out, n, "%s", buf);
}

/* libstepprof.so: $STEPPROF_LIB, else ../lib/ next to this binary. Absolute. */
static int find_lib(char *out, size_t n)
{
	char cand[PATH_MAX + 32], dir[PATH_MAX];
	const char *env = getenv("STEPPROF_LIB");
	if (env && *env) {
		snprintf(cand, sizeof(cand), "%s", env);
	} else {
		self_dir(dir, sizeof(dir));
		snprintf(cand, sizeof(cand), "%s/../lib/libstepprof.so", dir);
	}
	char *abs = realpath(cand, NULL);
	if (!abs || access(abs, R_OK) != 0) {
		free(abs);
		return run_fail(RUN_EXIT_FAIL, "cannot find libstepprof.so (looked for %s; set STEPPROF_LIB)", cand);
	}
	snprintf(out, n, "%s", abs);
	free(abs);
	return 0;
}

/* stepprof-bpf next to this binary; 0 when present and executable. */
static int find_collector(char *out, size_t n)
{
	char dir[PATH_MAX];
	self_dir(dir, sizeof(dir));
	snprintf(out, n, "%s/stepprof-bpf", dir);
	return access(out, X_OK) == 0 ? 0 : -1;
}

/*
 * What execvp would find for cmd: 0 with its path in out, or the errno it would
 * fail with (ENOENT: nowhere on PATH; EACCES: found but not executable or a
 * directory).
 */
static int check_command(const char *cmd, char *out, size_t n)
{
	struct stat st;
	if (strchr(cmd, '/')) {
		if (stat(cmd, &st) != 0)
			return errno;
		snprintf(out, n, "%s", cmd);
		return S_ISREG(st.st_mode) && access(cmd, X_OK) == 0 ? 0 : EACCES;
	}
	const char *path = getenv("PATH");
	if (!path || !*path)
		path = "/usr/local/bin:/usr/bin:/bin";
	int seen = ENOENT;
	char buf[PATH_MAX];
	for (const char *p = path;; p++) {
		const char *end = strchr(p, ':');
		size_t len = end ? (size_t)(end - p) : strlen(p);
		snprintf(buf, sizeof(buf), "%.*s%s%s", (int)len, p, len ? "/" : "", cmd);
		if (stat(buf, &st) == 0) {
			if (S_ISREG(st.st_mode) && access(buf, X_OK) == 0) {
				snprintf(out, n, "%s", buf);
				return 0;
			}
			seen = EACCES;
		}
		if (!end)
			break;
		p = end;
	}
	return seen;
}

/*
 * Is the file a binary (a shell would not run it as a script): ELF, or a NUL
 * before the first newline of its first 80 bytes, as bash decides.
 */
static int is_binary(const char *path)
{
	unsigned char buf[80];
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return 0;
	ssize_t n = read(fd, buf, sizeof(buf));
	close(fd);
	if (n >= 4 && !memcmp(buf, "\177ELF", 4))
		return 1;
	for (ssize_t i = 0; i < n && buf[i] != '\n'; i++)
		if (!buf[i])
			return 1;
	return 0;
}

/* ------------------------------------------------------- 3. trace directory */

/*
 * mkdir -p, mode 0700 for what it creates; returns 0 or an errno, with the level
 * that failed in failed (and *chowning set when it was the chown). With give,
 * each level it creates is given to uid/gid: under sudo the user must get
 * through every one of them to the trace directory.
 */
static int mkdirs(const char *path, int give, uid_t uid, gid_t gid, char *failed, size_t n, int *chowning)
{
	char buf[PATH_MAX];
	if (snprintf(buf, sizeof(buf), "%s", path) >= (int)sizeof(buf))
		return ENAMETOOLONG;
	*chowning = 0;
	for (char *p = buf + 1;; p++) {
		if (*p != '/' && *p != 0)
			continue;
		/* "a/" or "a//b": no level ends here (the mkdir's EEXIST said the last one was not ours) */
		if (p[-1] == '/') {
			if (!*p)
				break;
			continue;
		}
		char c = *p;
		*p = 0;
		if (mkdir(buf, 0700) == 0) {
			if (give && chown(buf, uid, gid) != 0) {
				*chowning = 1;
				snprintf(failed, n, "%s", buf);
				return errno;
			}
		} else if (errno != EEXIST) {
			snprintf(failed, n, "%s", buf);
			return errno;
		}
		*p = c;
		if (!c)
			break;
	}
	return 0;
}

struct job;
static int writable_by_job(const struct job *j, const char *dir);

/* The job's trace directory: made if missing, checked, returned absolute in out. */
static int prepare_dir(const char *want, char *out, size_t n, const struct job *j, int give, uid_t uid, gid_t gid)
{
	char def[64];
	if (!want) {
		time_t t = time(NULL);
		struct tm tm;
		localtime_r(&t, &tm);
		snprintf(def, sizeof(def), "stepprof-%04d%02d%02d-%02d%02d%02d-%d", tm.tm_year + 1900, tm.tm_mon + 1,
			 tm.tm_mday, tm.tm_hour, tm.tm_min, tm.tm_sec, (int)getpid());
		want = def;
	}
	if (!*want)
		return run_fail(RUN_EXIT_FAIL, "-o: empty directory name");
	char failed[PATH_MAX];
	int chowning = 0;
	int e = mkdirs(want, give, uid, gid, failed, sizeof(failed), &chowning);
	struct stat st;
	if (e && chowning)
		return run_fail(RUN_EXIT_FAIL, "-o %s: cannot give %s to uid %d: %s", want, failed, (int)uid,
				strerror(e));
	if (e)
		return run_fail(RUN_EXIT_FAIL, "-o %s: cannot create directory: %s", want, strerror(e));
	if (stat(want, &st) != 0)
		return run_fail(RUN_EXIT_FAIL, "-o %s: %s", want, strerror(errno));
	if (!S_ISDIR(st.st_mode))
		return run_fail(RUN_EXIT_FAIL, "-o %s: not a directory", want);
	/* The recorder writes only into a directory of its own user (docs/recorder.md): the job ran
	 * unrecorded, each process said so, and our last line named the directory all the same. */
	if (st.st_uid != uid)
		return run_fail(RUN_EXIT_FAIL, "-o %s: not owned by uid %d, who runs the job (the recorder writes only "
					       "into its user's own directory)", want, (int)uid);
	char *abs = realpath(want, NULL);
	if (!abs)
		return run_fail(RUN_EXIT_FAIL, "-o %s: %s", want, strerror(errno));
	snprintf(out, n, "%s", abs);
	free(abs);
	/* absolute, as the job gets it: every level from / must let it through */
	e = writable_by_job(j, out);
	if (e)
		return run_fail(RUN_EXIT_FAIL, "-o %s: not writable: %s", want, strerror(e));
	return 0;
}

/* ------------------------------------------------------------ 4. the job child */

struct job {
	char **argv;
	const char *path; /* argv[0] found on PATH */
	char **sh_argv;	  /* /bin/sh path argv[1..]: a script without #! */
	const char *lib, *dir;
	uid_t uid; /* run as (SUDO_UID when started through sudo as root) */
	gid_t gid;
	int drop;  /* change to uid/gid before exec */
	gid_t groups[64]; /* the user's supplementary groups, looked up by the parent */
	int ngroups;
	char home[PATH_MAX], user[256]; /* the user's HOME and name (USER, LOGNAME), "" when unknown */
	int go_rd, go_wr;   /* parent -> child: 'b' (collector ready), 'f' (it failed: libc) or 'l' (libc) */
	int err_rd, err_wr; /* child -> parent: errno of a failed exec (close-on-exec) */
	pid_t parent;	    /* stepprof run */
	sigset_t mask;	    /* the signal mask stepprof run was started with */
	pid_t pid;
};

static void restore_signals(void);

/*
 * Can the job write into dir: 0, or the errno it would get. Under sudo, asked of
 * the kernel as the user, in a child that becomes the user (mode bits, groups,
 * ACLs, a read-only mount): root's own access() says yes to nearly anything, and
 * guessing from the owner and mode refused a directory the user may write through
 * a group and took one owned by the user but not writable (the trace was lost).
 */
static int writable_by_job(const struct job *j, const char *dir)
{
	if (!j->drop)
		return access(dir, W_OK | X_OK) == 0 ? 0 : errno;
	pid_t pid = fork();
	if (pid < 0)
		return errno;
	if (pid == 0) {
		if (setgroups((size_t)j->ngroups, j->groups) != 0 || setgid(j->gid) != 0 || setuid(j->uid) != 0)
			_exit(EPERM);
		_exit(access(dir, W_OK | X_OK) == 0 ? 0 : errno);
	}
	int st = 0;
	while (waitpid(pid, &st, 0) < 0 && errno == EINTR)
		;
	return WIFEXITED(st) ? WEXITSTATUS(st) : EACCES;
}

static void child_fail(struct job *j, int e)
{
	if (write(j->err_wr, &e, sizeof(e)) < 0) {
		/* nothing more to do: the parent sees the exit status */
	}
	_exit(e == ENOENT ? RUN_EXIT_NOTFOUND : RUN_EXIT_NOEXEC);
}

/* LD_PRELOAD with lib first, keeping what was there (once). */
/* Is lib one of the entries of an LD_PRELOAD list (separated by ':' or spaces)? */
static bool preload_has(const char *list, const char *lib)
{
	size_t n = strlen(lib);
	for (const char *p = list; (p = strstr(p, lib)) != NULL; p++) {
		bool starts = p == list || p[-1] == ':' || p[-1] == ' ' || p[-1] == '\t';
		char end = p[n];
		if (starts && (end == '\0' || end == ':' || end == ' ' || end == '\t'))
			return true;
	}
	return false;
}

static void set_preload(const char *lib)
{
	const char *old = getenv("LD_PRELOAD");
	if (!old || !*old) {
		setenv("LD_PRELOAD", lib, 1);
		return;
	}
	if (preload_has(old, lib))
		return;
	size_t n = strlen(lib) + strlen(old) + 2;
	char *v = malloc(n);
	if (!v)
		return;
	snprintf(v, n, "%s:%s", lib, old);
	setenv("LD_PRELOAD", v, 1);
	free(v);
}

static void job_child(struct job *j)
{
	close(j->go_wr);
	close(j->err_rd);
	/*
	 * What stepprof run inherited, before waiting: a signal forwarded to us (or a
	 * Ctrl-C) while the collector attaches ends the job as it would have ended
	 * CMD. Until now they were blocked: our handlers would have dropped them here.
	 */
	restore_signals();
	sigprocmask(SIG_SETMASK, &j->mask, NULL);
	char go = 0;
	ssize_t r;
	do
		r = read(j->go_rd, &go, 1);
	while (r < 0 && errno == EINTR);
	if (r != 1)
		_exit(RUN_EXIT_FAIL); /* the parent went away before releasing us */
	/* NOTE: go_rd is left to close-on-exec: between release and exec the child
	 * makes no file syscall the collector would attribute to the job. */

	set_preload(j->lib);
	setenv("STEPPROF_DIR", j->dir, 1);
	setenv("NVTX_INJECTION64_PATH", j->lib, 0);
	if (go == 'b') {
		setenv("STEPPROF_IO", "bpf", 1);
	} else {
		/* No collector ('f': it failed, as the line we printed says; 'l': --no-bpf, or not
		 * root): an inherited STEPPROF_IO=bpf would leave file input captured by no one. */
		const char *io = getenv("STEPPROF_IO");
		if (io && !strcmp(io, "bpf"))
			setenv("STEPPROF_IO", "libc", 1);
	}

	if (j->drop && *j->user) {
		/* sudo set them for root: the job, the user's, finds its ~/.cache, ~/.config as without sudo */
		setenv("HOME", j->home, 1);
		setenv("USER", j->user, 1);
		setenv("LOGNAME", j->user, 1);
	}
	if (j->drop) {
		if (setgroups((size_t)j->ngroups, j->groups) != 0 || setgid(j->gid) != 0 || setuid(j->uid) != 0)
			child_fail(j, errno ? errno : EPERM);
	}
	/*
	 * stepprof run killed (SIGKILL: every other signal is forwarded) kills the job
	 * alike: it would have been the job's end had the job been run by itself, and
	 * an orphan would train on unseen. After the setuid, which clears it.
	 */
	prctl(PR_SET_PDEATHSIG, SIGKILL);
	if (getppid() != j->parent)
		raise(SIGKILL); /* killed before the prctl */
	/*
	 * Found by the parent (its stats are not the job's input). ENOEXEC: no #!, a
	 * script run by /bin/sh as execvp and shells do, unless a binary of another
	 * kind (another architecture's ELF): that is "Exec format error", 126, where
	 * execvp had sh read it as a script and say something about its bytes.
	 */
	execv(j->path, j->argv);
	int e = errno;
	if (e == ENOEXEC && !is_binary(j->path)) {
		execv("/bin/sh", j->sh_argv);
		e = errno;
	}
	child_fail(j, e);
}

/* ------------------------------------------------------------ 5. the collector */

struct collector {
	pid_t pid;
	int out, err; /* its stdout and stderr, read by us */
};

static void collector_stop(struct collector *c);

/*
 * Has the job (our child) ended, killed by a signal while it waited for the
 * attach? Not reaped: wait_job does that.
 */
static int job_gone(pid_t job)
{
	siginfo_t si;
	si.si_pid = 0;
	return waitid(P_PID, (id_t)job, &si, WEXITED | WNOHANG | WNOWAIT) == 0 && si.si_pid == job;
}

/* First line of text, trimmed, for a one-line reason. */
static void first_line(char *s)
{
	char *nl = strchr(s, '\n');
	if (nl)
		*nl = 0;
	size_t n = strlen(s);
	while (n && (s[n - 1] == '\r' || s[n - 1] == ' '))
		s[--n] = 0;
}

/*
 * Start the collector on the job child and wait until it says "ready". Returns
 * 0 when attached; 1 when the job died meanwhile (a signal forwarded to it:
 * nothing left to trace, the collector is stopped); otherwise -1 with the
 * reason in why.
 */
static int collector_start(struct collector *c, const char *path, pid_t job, const char *dir, int ready_s, char *why,
			   size_t whylen)
{
	int out[2], err[2];
	char pidbuf[16];
	c->pid = -1;
	c->out = c->err = -1;
	if (pipe2(out, O_CLOEXEC) != 0)
		goto fail_errno;
	if (pipe2(err, O_CLOEXEC) != 0) {
		close(out[0]);
		close(out[1]);
		goto fail_errno;
	}
	snprintf(pidbuf, sizeof(pidbuf), "%d", (int)job);
	pid_t parent = getpid();
	c->pid = fork();
	if (c->pid < 0) {
		close(out[0]), close(out[1]), close(err[0]), close(err[1]);
		goto fail_errno;
	}
	if (c->pid == 0) {
		/* Its own process group: a Ctrl-C at the terminal stops the job, not the collector. */
		setpgid(0, 0);
		/* Should stepprof run be killed, the collector flushes and leaves (not tracing on, orphaned). */
		prctl(PR_SET_PDEATHSIG, SIGTERM);
		if (getppid() != parent)
			_exit(1);
		dup2(out[1], 1);
		dup2(err[1], 2);
		execl(path, "stepprof-bpf", "--pid", pidbuf, "-o", dir, (char *)NULL);
		fprintf(stderr, "cannot execute %s: %s\n", path, strerror(errno));
		_exit(1);
	}
	close(out[1]);
	close(err[1]);
	c->out = out[0];
	c->err = err[0];

	char obuf[256] = "", ebuf[512] = "";
	size_t olen = 0, elen = 0;
	int open_fds = 2;
	time_t deadline = time(NULL) + ready_s;
	while (open_fds > 0 && !strstr(obuf, "ready\n")) {
		struct pollfd p[2] = { { c->out, POLLIN, 0 }, { c->err, POLLIN, 0 } };
		int left = (int)(deadline - time(NULL));
		if (left <= 0) {
			snprintf(why, whylen, "the collector did not attach within %d s", ready_s);
			/* Reaped and forgotten here: left to wait_job, it was "exited early (status 137)". */
			kill(c->pid, SIGKILL);
			waitpid(c->pid, NULL, 0);
			c->pid = -1;
			if (c->out >= 0)
				close(c->out);
			if (c->err >= 0)
				close(c->err);
			c->out = c->err = -1;
			return -1;
		}
		if (job_gone(job)) {
			/* What it would still say (a late "ready", "no process") is of no use now. */
			if (c->out >= 0)
				close(c->out);
			if (c->err >= 0)
				close(c->err);
			c->out = c->err = -1;
			collector_stop(c);
			return 1;
		}
		/* Woken at least every 100 ms to look at the job: its death makes no noise here. */
		if (poll(p, 2, left > 1 ? 100 : left * 1000) < 0) {
			if (errno == EINTR)
				continue;
			break;
		}
		if (p[0].revents && c->out >= 0) {
			ssize_t r = olen < sizeof(obuf) - 1 ? read(c->out, obuf + olen, sizeof(obuf) - 1 - olen) : 0;
			if (r <= 0) {
				close(c->out);
				c->out = -1;
				open_fds--;
			} else {
				olen += (size_t)r;
				obuf[olen] = 0;
			}
		}
		if (p[1].revents && c->err >= 0) {
			ssize_t r = elen < sizeof(ebuf) - 1 ? read(c->err, ebuf + elen, sizeof(ebuf) - 1 - elen) : 0;
			if (r <= 0) {
				close(c->err);
				c->err = -1;
				open_fds--;
			} else {
				elen += (size_t)r;
				ebuf[elen] = 0;
			}
		}
		if (c->out < 0)
			p[0].fd = -1;
	}
	if (strstr(obuf, "ready\n")) {
		/* Anything it said on stderr while starting is passed on. */
		if (elen)
			fputs(ebuf, stderr);
		return 0;
	}
	int st = 0;
	waitpid(c->pid, &st, 0);
	c->pid = -1;
	first_line(ebuf);
	if (*ebuf)
		snprintf(why, whylen, "%s", ebuf);
	else if (WIFSIGNALED(st))
		snprintf(why, whylen, "the collector was killed by signal %d", WTERMSIG(st));
	else
		snprintf(why, whylen, "the collector exited with status %d", WEXITSTATUS(st));
	return -1;

fail_errno:
	snprintf(why, whylen, "cannot start the collector: %s", strerror(errno));
	return -1;
}

/*
 * How long the collector may take to attach: STEPPROF_ATTACH_S seconds (1..3600),
 * else COLLECTOR_READY_S. Loading takes well under a second on an idle machine; a
 * loaded one, or a test of the timeout, may want another figure.
 */
static int attach_timeout_s(void)
{
	const char *v = getenv("STEPPROF_ATTACH_S");
	char *end;
	long n = v && *v ? strtol(v, &end, 10) : COLLECTOR_READY_S;
	if (v && *v && (*end || n < 1 || n > 3600)) {
		fprintf(stderr, "stepprof: run: warning: STEPPROF_ATTACH_S=%s is not a number of seconds in 1..3600; "
				"using %d\n", v, COLLECTOR_READY_S);
		n = COLLECTOR_READY_S;
	}
	return (int)n;
}

/* Pass on what the collector prints; close a side at EOF. */
static void collector_drain(struct collector *c, int timeout_ms)
{
	struct pollfd p[2] = { { c->out, POLLIN, 0 }, { c->err, POLLIN, 0 } };
	if (c->out < 0 && c->err < 0) {
		if (timeout_ms > 0)
			poll(NULL, 0, timeout_ms);
		return;
	}
	if (poll(p, 2, timeout_ms) <= 0)
		return;
	for (int i = 0; i < 2; i++) {
		int *fd = i ? &c->err : &c->out;
		if (*fd < 0 || !p[i].revents)
			continue;
		char buf[4096];
		ssize_t r = read(*fd, buf, sizeof(buf));
		if (r <= 0) {
			close(*fd);
			*fd = -1;
		} else if (fwrite(buf, 1, (size_t)r, stderr) != (size_t)r) {
			/* our stderr is gone: keep draining so the collector never blocks */
		}
	}
}

/* SIGTERM, then wait (draining) for it to flush; SIGKILL after COLLECTOR_STOP_S. */
static void collector_stop(struct collector *c)
{
	if (c->pid <= 0) {
		/* Already gone: pass on its last words. */
		while (c->out >= 0 || c->err >= 0)
			collector_drain(c, 100);
		return;
	}
	kill(c->pid, SIGTERM);
	time_t deadline = time(NULL) + COLLECTOR_STOP_S;
	int st;
	for (;;) {
		pid_t r = waitpid(c->pid, &st, WNOHANG);
		if (r == c->pid || (r < 0 && errno != EINTR))
			break;
		if (time(NULL) >= deadline) {
			fprintf(stderr, "stepprof: run: the eBPF collector did not stop within %d s; killed\n",
				COLLECTOR_STOP_S);
			kill(c->pid, SIGKILL);
			waitpid(c->pid, &st, 0);
			break;
		}
		collector_drain(c, 50);
	}
	while (c->out >= 0 || c->err >= 0)
		collector_drain(c, 100);
	c->pid = -1;
}

/* ---------------------------------------------------------------- 6. waiting */

static volatile pid_t run_job_pid;

/*
 * The signals passed on to the job: every one that someone may send to stepprof
 * run (kill, a terminal, a scheduler: Slurm's --signal=USR1@60, a SIGUSR1 that
 * asks a trainer to checkpoint or faulthandler to dump its stacks) and that
 * would otherwise end stepprof run alone, leaving the job orphaned, or be lost.
 * SIGTSTP too: the job stops (or not, as it chooses), and stepprof run stops
 * after it (follow_stop). Not: SIGKILL and SIGSTOP (they cannot be caught),
 * SIGCHLD (ours), SIGPIPE (ignored by us: our own writes), SIGCONT (passed on
 * by follow_stop), SIGTTIN and SIGTTOU (about our own terminal I/O), and the
 * signals of our own faults and limits
 * (SIGSEGV, SIGBUS, SIGFPE, SIGILL, SIGTRAP, SIGSYS, SIGABRT, SIGXCPU, SIGXFSZ).
 * The real-time signals as well (SIGRTMIN..SIGRTMAX, all of them ending a
 * process by default).
 */
static const int run_fwd_sig[] = { SIGHUP,    SIGINT, SIGQUIT,   SIGUSR1, SIGUSR2,  SIGALRM, SIGTERM, SIGTSTP,
				   SIGSTKFLT, SIGURG, SIGVTALRM, SIGPROF, SIGWINCH, SIGIO,   SIGPWR };
static struct sigaction run_fwd_old[NSIG]; /* what stepprof run inherited for each */
static sigset_t run_fwd_set;		   /* those we handle: not the ones inherited ignored */
static struct sigaction run_pipe_old;	   /* SIGPIPE: ignored by us, the job gets this back */
static struct sigaction run_chld_old;	   /* SIGCHLD: the default for us, the job gets this back */

/* Every signal forwarded, whatever its disposition. */
static void forwardable(sigset_t *set)
{
	sigemptyset(set);
	for (size_t i = 0; i < sizeof(run_fwd_sig) / sizeof(run_fwd_sig[0]); i++)
		sigaddset(set, run_fwd_sig[i]);
	for (int sig = SIGRTMIN; sig <= SIGRTMAX; sig++)
		sigaddset(set, sig);
}

/*
 * Forward a signal sent to us to the job. A terminal's Ctrl-C (si_code
 * SI_KERNEL) already reached the job through its process group: not twice.
 */
static void run_forward(int sig, siginfo_t *si, void *uc)
{
	(void)uc;
	if (si && si->si_code == SI_KERNEL)
		return;
	if (run_job_pid > 0)
		kill(run_job_pid, sig);
}

/*
 * Handle the forwarded signals, which the caller has blocked until the job's
 * pid is known. One inherited ignored (nohup's SIGHUP; SIGINT and SIGQUIT of a
 * background job started by a non-interactive shell) stays ignored, here and in
 * the job: forwarding it would kill a job its user meant to survive it.
 */
static void install_forwarding(void)
{
	struct sigaction sa;
	memset(&sa, 0, sizeof(sa));
	sa.sa_sigaction = run_forward;
	sa.sa_flags = SA_SIGINFO | SA_RESTART;
	sigemptyset(&sa.sa_mask);
	sigset_t all;
	forwardable(&all);
	sigemptyset(&run_fwd_set);
	for (int sig = 1; sig < NSIG; sig++) {
		if (!sigismember(&all, sig) || sigaction(sig, NULL, &run_fwd_old[sig]) != 0)
			continue;
		if (run_fwd_old[sig].sa_handler == SIG_IGN)
			continue;
		sigaction(sig, &sa, NULL);
		sigaddset(&run_fwd_set, sig);
	}
}

/* In the job child: the dispositions stepprof run was started with. */
static void restore_signals(void)
{
	for (int sig = 1; sig < NSIG; sig++)
		if (sigismember(&run_fwd_set, sig))
			sigaction(sig, &run_fwd_old[sig], NULL);
	sigaction(SIGPIPE, &run_pipe_old, NULL);
	sigaction(SIGCHLD, &run_chld_old, NULL);
}

static int exit_code(int st)
{
	if (WIFEXITED(st))
		return WEXITSTATUS(st);
	if (WIFSIGNALED(st))
		return 128 + WTERMSIG(st);
	return RUN_EXIT_FAIL;
}

/*
 * End as the job ended: exit with its status, or die of the signal that killed
 * it, so that our parent sees what it would have seen of CMD itself. An exit
 * with 128+N is not the same: bash ends a script after a foreground command died
 * of SIGINT, not after one that exited 130 (a Ctrl-C in a loop of `stepprof run`
 * stopped one iteration only); a shell prints "Segmentation fault"; Slurm and
 * waitpid callers record a signal. Our own core is of no use and could overwrite
 * the job's ("core" in the same cwd): not dumpable, RLIMIT_CORE 0.
 */
static int end_like(int st)
{
	if (WIFSIGNALED(st)) {
		int sig = WTERMSIG(st);
		struct rlimit none = { 0, 0 };
		prctl(PR_SET_DUMPABLE, 0);
		setrlimit(RLIMIT_CORE, &none);
		signal(sig, SIG_DFL);
		sigset_t one;
		sigemptyset(&one);
		sigaddset(&one, sig);
		fflush(NULL);
		sigprocmask(SIG_UNBLOCK, &one, NULL);
		raise(sig);
		/* NOTE: still here only if sig cannot kill us; then the shell's convention. */
	}
	return exit_code(st);
}

/* The state letter and flags of a thread (its /proc/.../stat); -1 when it cannot be read. */
static int task_stat(const char *stat_path, char *state, unsigned long *flags)
{
	char buf[1024];
	int fd = open(stat_path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return -1;
	ssize_t n = read(fd, buf, sizeof(buf) - 1);
	close(fd);
	if (n <= 0)
		return -1;
	buf[n] = 0;
	/* the command name may hold anything, ')' included: the fields start after the last one */
	const char *p = strrchr(buf, ')');
	if (!p || sscanf(p + 1, " %c %*d %*d %*d %*d %*d %lu", state, flags) != 2)
		return -1;
	return 0;
}

/*
 * Is a thread leaving: a zombie, or in the kernel's exit path (PF_EXITING, 0x4,
 * in the flags field, proc(5))? 1 also when it cannot be read: then there is
 * nothing left to warn about.
 */
static int task_exiting(const char *stat_path)
{
	char state;
	unsigned long flags;
	if (task_stat(stat_path, &state, &flags) != 0)
		return 1;
	return state == 'Z' || state == 'X' || (flags & 0x4);
}

/*
 * The job has stopped, of sig: stop as it did, so that the shell that started us
 * sees it (job control: "Stopped", fg, bg), whatever stopped it: a SIGSTOP or
 * SIGTSTP sent to its pid alone, one it sent itself, a `kill -TSTP` sent to us
 * and forwarded. (The terminal's own stops, Ctrl-Z and SIGTTIN, go to the whole
 * process group, us included.) Left running, we kept the shell waiting in the
 * foreground on a job that would never go on. Once continued, we
 * continue the job: SIGCONT may have been sent to us alone. Not when the job runs
 * again already (a Ctrl-Z stopped both of us, `fg` continued both, and its stop
 * is only now reported).
 */
static void follow_stop(pid_t job, int sig)
{
	char path[64], state = 0;
	unsigned long flags;
	snprintf(path, sizeof(path), "/proc/%d/stat", (int)job);
	if (task_stat(path, &state, &flags) != 0 || state != 'T')
		return;
	/* The kernel drops these in an orphaned process group: the job stopped of it in ours, so shall we. */
	if ((sig == SIGTSTP || sig == SIGTTIN || sig == SIGTTOU) && getpgid(job) == getpgrp()) {
		struct sigaction dfl, old;
		memset(&dfl, 0, sizeof(dfl));
		dfl.sa_handler = SIG_DFL;
		sigemptyset(&dfl.sa_mask);
		sigaction(sig, &dfl, &old);
		sigset_t one;
		sigemptyset(&one);
		sigaddset(&one, sig);
		sigprocmask(SIG_UNBLOCK, &one, NULL);
		kill(getpid(), sig);
		sigaction(sig, &old, NULL);
	} else {
		kill(getpid(), SIGSTOP);
	}
	kill(job, SIGCONT);
}

/*
 * Is pid (our unreaped child) leaving: every thread of it leaving? Its main
 * thread alone does not say: after pthread_exit it is a zombie (with PF_EXITING)
 * while the other threads work on (/proc/PID/task lists them beside it).
 */
static int job_exiting(pid_t pid)
{
	char path[64], tpath[64 + 256 + 8]; /* + d_name + "/stat" */
	snprintf(path, sizeof(path), "/proc/%d/stat", (int)pid);
	if (!task_exiting(path))
		return 0;
	snprintf(path, sizeof(path), "/proc/%d/task", (int)pid);
	DIR *d = opendir(path);
	if (!d)
		return 1;
	int exiting = 1;
	for (struct dirent *de; exiting && (de = readdir(d));) {
		if (de->d_name[0] == '.')
			continue;
		snprintf(tpath, sizeof(tpath), "%s/%s/stat", path, de->d_name);
		exiting = task_exiting(tpath);
	}
	closedir(d);
	return exiting;
}

/*
 * Wait for the job; with a collector, keep its pipes drained and notice if it dies early.
 *
 * The collector also leaves on its own, status 0, once the whole traced tree
 * has exited: it sees the last thread's sched_process_exit, and the job is a
 * zombie only later, after its exit has unmapped its memory and closed its files
 * (measured here: 7.6 ms for 256 MiB touched, 132 ms for 4 GiB; before this
 * test, every `stepprof run` of a PyTorch job warned). So a collector gone
 * before the job is only "early" when the job is not leaving.
 */
static int wait_job(pid_t job, struct collector *c)
{
	int st = 0;
	for (;;) {
		pid_t r = waitpid(job, &st, WUNTRACED | (c->pid > 0 ? WNOHANG : 0));
		if (r == job && WIFSTOPPED(st)) {
			follow_stop(job, WSTOPSIG(st));
			continue;
		}
		if (r == job)
			return st;
		if (r < 0 && errno != EINTR)
			return 0;
		if (c->pid > 0) {
			int cst;
			if (waitpid(c->pid, &cst, WNOHANG) == c->pid) {
				c->pid = -1;
				if (WIFEXITED(cst) && WEXITSTATUS(cst) == 0 && job_exiting(job))
					continue; /* the tree's end: the blocking wait above reaps the job */
				if (waitpid(job, &st, WNOHANG) == job)
					return st;
				fprintf(stderr, "stepprof: run: the eBPF collector exited early (status %d); input from "
						"then on is not captured\n", exit_code(cst));
			}
			collector_drain(c, 100);
		}
	}
}

/*
 * Whether the job left a trace file in dir: a process that records nothing leaves
 * no file (docs/recorder.md), and `stepprof analyze DIR` of a directory without one
 * (or of none at all) only fails, so the closing line must not advise it.
 */
static bool dir_has_trace(const char *dir)
{
	DIR *d = opendir(dir);
	if (!d)
		return false;
	bool found = false;
	char path[PATH_MAX];
	for (struct dirent *e; !found && (e = readdir(d));)
		found = snprintf(path, sizeof(path), "%s/%s", dir, e->d_name) < (int)sizeof(path) &&
			util_is_trace_file(path);
	closedir(d);
	return found;
}

/* -------------------------------------------------------------- 7. command_run */

enum bpf_choice { BPF_DEFAULT, BPF_ON, BPF_OFF };

int command_run(int argc, char **argv)
{
	enum bpf_choice bpf = BPF_DEFAULT;
	const char *outdir = NULL;
	int i = 1; /* argv[0] is "run" */

	/*
	 * Our exit status is the job's: a line of ours to a stderr that is a closed pipe
	 * (`stepprof run ... 2>&1 | head`) must not turn it into 141, nor the go byte to
	 * a job that died during the attach kill us. The job gets back what we inherited.
	 */
	struct sigaction ign;
	memset(&ign, 0, sizeof(ign));
	ign.sa_handler = SIG_IGN;
	sigemptyset(&ign.sa_mask);
	sigaction(SIGPIPE, &ign, &run_pipe_old);
	/*
	 * Started with SIGCHLD ignored (some launchers leave it so), our children would
	 * be reaped by the kernel: waitpid fails with ECHILD and the job's status is
	 * lost (every job "exited 0"). The default for us, the inherited one for the job.
	 */
	struct sigaction dfl;
	memset(&dfl, 0, sizeof(dfl));
	dfl.sa_handler = SIG_DFL;
	sigemptyset(&dfl.sa_mask);
	sigaction(SIGCHLD, &dfl, &run_chld_old);
	for (; i < argc; i++) {
		const char *a = argv[i];
		if (!strcmp(a, "--")) {
			i++;
			break;
		}
		if (a[0] != '-')
			break;
		if (!strcmp(a, "--bpf"))
			bpf = BPF_ON;
		else if (!strcmp(a, "--no-bpf"))
			bpf = BPF_OFF;
		else if (!strcmp(a, "-o") || !strcmp(a, "--output")) {
			if (++i >= argc)
				return run_fail(RUN_EXIT_FAIL, "%s needs a directory", a);
			outdir = argv[i];
		} else if (!strncmp(a, "-o", 2))
			outdir = a + 2;
		else if (!strncmp(a, "--output=", 9))
			outdir = a + 9;
		else if (!strcmp(a, "-h") || !strcmp(a, "--help")) {
			run_usage(stdout);
			return 0;
		} else {
			return run_fail(RUN_EXIT_FAIL, "unknown option %s (stepprof run --help)", a);
		}
	}
	if (i >= argc)
		return run_fail(RUN_EXIT_FAIL, "no command given (stepprof run [--bpf|--no-bpf] [-o DIR] -- CMD ARGS...)");
	char **cmd = argv + i;

	/* Who the job runs as: the invoking user when root came from sudo. */
	struct job j;
	memset(&j, 0, sizeof(j));
	j.argv = cmd;
	j.uid = geteuid();
	j.gid = getegid();
	const char *su = getenv("SUDO_UID"), *sg = getenv("SUDO_GID");
	if (geteuid() == 0 && su && sg && atoi(su) > 0) {
		j.uid = (uid_t)strtoul(su, NULL, 10);
		j.gid = (gid_t)strtoul(sg, NULL, 10);
		j.drop = 1;
		/* Looked up here (they read /etc/passwd, /etc/group), not in the child the collector watches. */
		struct passwd *pw = getpwuid(j.uid);
		if (pw && strlen(pw->pw_dir) < sizeof(j.home) && strlen(pw->pw_name) < sizeof(j.user)) {
			snprintf(j.home, sizeof(j.home), "%s", pw->pw_dir);
			snprintf(j.user, sizeof(j.user), "%s", pw->pw_name);
		}
		const char *user = getenv("SUDO_USER");
		j.ngroups = 64;
		if (!user || getgrouplist(user, j.gid, j.groups, &j.ngroups) < 0) {
			j.groups[0] = j.gid;
			j.ngroups = 1;
		}
	}

	char cmd_path[PATH_MAX];
	int e = check_command(cmd[0], cmd_path, sizeof(cmd_path));
	if (e == ENOENT)
		return run_fail(RUN_EXIT_NOTFOUND, "%s: command not found", cmd[0]);
	if (e)
		return run_fail(RUN_EXIT_NOEXEC, "%s: cannot execute: %s", cmd[0], strerror(e));

	char lib[PATH_MAX], dir[PATH_MAX], coll_path[PATH_MAX + 16];
	int rc = find_lib(lib, sizeof(lib));
	if (rc)
		return rc;
	/* Without -o, a STEPPROF_DIR the user exported is the directory (as for LD_PRELOAD alone). */
	if (!outdir && getenv("STEPPROF_DIR") && *getenv("STEPPROF_DIR"))
		outdir = getenv("STEPPROF_DIR");
	rc = prepare_dir(outdir, dir, sizeof(dir), &j, j.drop, j.uid, j.gid);
	if (rc)
		return rc;
	j.lib = lib;
	j.dir = dir;
	j.path = cmd_path;
	int argc_cmd = argc - i;
	j.sh_argv = calloc((size_t)argc_cmd + 2, sizeof(char *));
	if (!j.sh_argv)
		return run_fail(RUN_EXIT_FAIL, "out of memory");
	j.sh_argv[0] = "/bin/sh";
	j.sh_argv[1] = cmd_path;
	for (int k = 1; k < argc_cmd; k++)
		j.sh_argv[k + 1] = cmd[k];

	int go[2], err[2];
	if (pipe2(go, O_CLOEXEC) != 0 || pipe2(err, O_CLOEXEC) != 0)
		return run_fail(RUN_EXIT_FAIL, "pipe: %s", strerror(errno));
	j.go_rd = go[0], j.go_wr = go[1], j.err_rd = err[0], j.err_wr = err[1];

	fflush(NULL);
	/*
	 * Blocked from before our handlers until the job's pid is known: a signal sent
	 * meanwhile waits, then is forwarded. The child restores the dispositions and
	 * the mask before it waits for the attach, so it dies of one sent then.
	 */
	sigset_t all;
	forwardable(&all);
	sigprocmask(SIG_BLOCK, &all, &j.mask);
	install_forwarding();
	j.parent = getpid();
	j.pid = fork();
	if (j.pid == 0)
		job_child(&j);
	run_job_pid = j.pid;
	sigprocmask(SIG_SETMASK, &j.mask, NULL);
	free(j.sh_argv);
	if (j.pid < 0)
		return run_fail(RUN_EXIT_FAIL, "fork: %s", strerror(errno));
	close(j.go_rd);
	close(j.err_wr);

	/* The collector, attached before the job runs a single instruction of CMD. */
	struct collector c = { -1, -1, -1 };
	char go_byte = 'l';
	int want = bpf == BPF_ON || (bpf == BPF_DEFAULT && geteuid() == 0);
	if (want) {
		char why[600];
		int have = find_collector(coll_path, sizeof(coll_path)) == 0;
		if (!have && bpf == BPF_ON) {
			fprintf(stderr, "stepprof: eBPF collector unavailable: %s not found (not built?); input is "
					"captured by the libc wrappers instead\n", coll_path);
			go_byte = 'f';
		} else if (have) {
			int got = collector_start(&c, coll_path, j.pid, dir, attach_timeout_s(), why, sizeof(why));
			if (got == 0) {
				go_byte = 'b';
			} else if (got < 0 && !job_gone(j.pid)) {
				/* (a job already dead makes the collector say "no process": not worth a line) */
				fprintf(stderr, "stepprof: eBPF collector unavailable: %s; input is captured by the "
						"libc wrappers instead\n", why);
				go_byte = 'f';
			}
		}
	}

	/* (A job that died of a signal during the attach has closed its end: EPIPE, no SIGPIPE.) */
	ssize_t w;
	do
		w = write(j.go_wr, &go_byte, 1);
	while (w < 0 && errno == EINTR);
	close(j.go_wr);

	/*
	 * exec succeeded when the close-on-exec pipe closes without a word. A job child
	 * stopped before its exec (a Ctrl-Z or SIGTSTP during the attach) is followed:
	 * waited on here, it left the shell waiting on a job that never went on.
	 */
	int child_errno = 0;
	ssize_t r = -1;
	for (;;) {
		struct pollfd p = { j.err_rd, POLLIN, 0 };
		if (poll(&p, 1, 100) > 0) {
			r = read(j.err_rd, &child_errno, sizeof(child_errno));
			if (r >= 0 || errno != EINTR)
				break;
			continue;
		}
		siginfo_t si;
		si.si_pid = 0;
		if (waitid(P_PID, (id_t)j.pid, &si, WSTOPPED | WNOHANG) == 0 && si.si_pid == j.pid)
			follow_stop(j.pid, si.si_status);
	}
	close(j.err_rd);

	int st = wait_job(j.pid, &c);
	run_job_pid = 0;
	collector_stop(&c);
	if (r == (ssize_t)sizeof(child_errno) && child_errno) {
		if (child_errno == ENOENT) /* it was there: what it needs is not (bash says the same) */
			return run_fail(RUN_EXIT_NOTFOUND, "%s: cannot execute: required file not found (its #! "
							   "interpreter or ELF loader)", cmd[0]);
		return run_fail(RUN_EXIT_NOEXEC, "%s: cannot execute: %s", cmd[0], strerror(child_errno));
	}
	const char *quiet = getenv("STEPPROF_QUIET");
	if (!quiet || !*quiet || !strcmp(quiet, "0")) {
		if (dir_has_trace(dir))
			fprintf(stderr, "stepprof: trace in %s (stepprof analyze %s)\n", dir, dir);
		else
			fprintf(stderr, "stepprof: no trace in %s: the job made no call that stepprof records "
					"(CUDA, file input, steps)\n", dir);
	}
	return end_like(st);
}
