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
 * that killed it (end_like); or one of the RUN_EXIT_* codes (cmd_run.h) with a
 * one-line error on stderr.
 *
 * Divided into: 1. usage, 2. locating files, 3. the trace directory,
 * 4. command_run. The job child, signals and waiting are cmd_run_job.c's, the
 * collector cmd_run_collector.c's.
 */
#include "cmd_run.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <poll.h>
#include <pwd.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "stepprof/trace.h"
#include "tracefile.h"
#include "util.h"

int command_run(int argc, char **argv);

/* ---------------------------------------------------------------- 1. usage */

static void run_usage(FILE *to)
{
	fprintf(to,
		"usage: stepprof run [--bpf|--no-bpf] [-o DIR] [--force] [--watch[=OPTIONS]] [--] CMD [ARGS...]\n"
		"  Run CMD with libstepprof.so preloaded; its trace goes to DIR\n"
		"  (default ./stepprof-YYYYmmdd-HHMMSS-PID). Every process of the job writes the\n"
		"  job's run id (STEPPROF_RUN_ID, made here unless set) in its trace file.\n"
		"  --bpf      also start the eBPF input collector (needs root); default when root\n"
		"  --no-bpf   capture input with the libc wrappers only\n"
		"  -o DIR     trace directory (created when missing); default $STEPPROF_DIR when set.\n"
		"             In DIR, %%p is this command's pid, %%h the host name, %%q{VAR} the value of\n"
		"             the environment variable VAR (unset: an error), %%%% a '%%'\n"
		"  --force    DIR holds trace files of another run: remove them (trace files only) and\n"
		"             run; without it such a DIR is refused\n"
		"  --watch[=OPTIONS]  run `stepprof watch OPTIONS DIR` beside the job, its output on\n"
		"             stderr, stopped after the job (OPTIONS: watch's, separated by spaces)\n"
		"  Exit status: CMD's (killed by signal N: dies of signal N too); 125 stepprof run failed\n"
		"  (usage, -o DIR, DIR holds another run's traces, libstepprof.so not found); 126 CMD not executable; 127 CMD not found.\n"
		"  Environment: STEPPROF_LIB (path of libstepprof.so), STEPPROF_ATTACH_S (how long the\n"
		"  collector may take to attach, default 30), STEPPROF_RUN_ID (the run id, e.g. one\n"
		"  for every node of a job), STEPPROF_* passed to the job.\n");
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

/* ---------------------------------------------------------------- config */

static struct sp_config run_cfg;

static const char *run_getenv(const char *name)
{
	return getenv(name);
}

static void run_config_warn(const char *var, const char *value, const char *expected)
{
	fprintf(stderr, "stepprof: run: warning: %s=\"%.80s\" is not valid (expected %s); using the default\n", var,
		value, expected);
}

const struct sp_config *run_config(void)
{
	return &run_cfg;
}

/* libstepprof.so: $STEPPROF_LIB, else ../lib/ next to this binary. Absolute. */
static int find_lib(char *out, size_t n)
{
	char cand[PATH_MAX + 32], dir[PATH_MAX];
	const char *env = run_cfg.LIB;
	if (*env) {
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
int is_binary(const char *path)
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



/* The name of a trace file: its magic, or the recorder's suffix (a file whose header never came). */
static bool is_trace(const char *dir, const char *name, char *path, size_t n)
{
	size_t len = strlen(name);
	if (snprintf(path, n, "%s/%s", dir, name) >= (int)n)
		return false;
	struct stat st;
	if (lstat(path, &st) != 0 || !S_ISREG(st.st_mode))
		return false;
	return util_is_trace_file(path) || (len > 8 && !strcmp(name + len - 8, ".sptrace"));
}

/*
 * The trace files in dir that are not of run id (an earlier job's, a file
 * without a run id): analysed with the new ones, they would be merged into
 * this job as its processes. Refused with one line, or with force removed
 * (trace files only; what else is there stays). 0 or RUN_EXIT_FAIL.
 */
static int other_runs(const char *dir, const char *id, int force)
{
	DIR *d = opendir(dir);
	if (!d)
		return 0; /* prepare_dir has just made or checked it: the recorder will say */
	char path[PATH_MAX], other[SP_RUN_ID_SIZE] = "", got[SP_RUN_ID_SIZE];
	size_t n = 0, removed = 0;
	int rc = 0;
	for (struct dirent *e; (e = readdir(d));) {
		if (!is_trace(dir, e->d_name, path, sizeof(path)))
			continue;
		if (util_run_id(path, got) == 0 && got[0] && !strcmp(got, id))
			continue; /* this run's (STEPPROF_RUN_ID given again, e.g. another node's) */
		if (!n++)
			snprintf(other, sizeof(other), "%s", got);
		if (force) {
			if (unlink(path) == 0)
				removed++;
			else if (!rc)
				rc = run_fail(RUN_EXIT_FAIL, "--force: cannot remove %s: %s", path, strerror(errno));
		}
	}
	closedir(d);
	if (!n || rc)
		return rc;
	if (!force)
		return run_fail(RUN_EXIT_FAIL, "-o %s holds %zu trace file%s of another run (%s): give another "
					       "directory, or --force to remove them",
				dir, n, n == 1 ? "" : "s", other[0] ? other : "no run id");
	if (!run_cfg.QUIET)
		fprintf(stderr, "stepprof: run: --force: removed %zu trace file%s of another run (%s) from %s\n",
			removed, removed == 1 ? "" : "s", other[0] ? other : "no run id", dir);
	return 0;
}

/* The job's run id, exported for every process of it (and the collector): STEPPROF_RUN_ID or a new one. */
static int choose_run_id(char *id)
{
	const char *have = run_cfg.RUN_ID;
	if (*have && !sp_run_id_valid(have))
		return run_fail(RUN_EXIT_FAIL, "STEPPROF_RUN_ID=\"%.40s\": not a run id (1 to 31 of A-Z a-z 0-9 . _ : -)",
				have);
	if (*have)
		snprintf(id, SP_RUN_ID_SIZE, "%s", have);
	else
		sp_tf_make_run_id(id);
	return setenv("STEPPROF_RUN_ID", id, 1) ? run_fail(RUN_EXIT_FAIL, "setenv: %s", strerror(errno)) : 0;
}

/* -------------------------------------------------------------- 4. command_run */

enum bpf_choice { BPF_DEFAULT, BPF_ON, BPF_OFF };

int command_run(int argc, char **argv)
{
	enum bpf_choice bpf = BPF_DEFAULT;
	const char *outdir = NULL, *watch = NULL;
	int i = 1, force = 0; /* argv[0] is "run" */
	bool pattern = false; /* outdir is -o's: %-substitutions */

	sp_config_parse(&run_cfg, SP_CFG_RUN, run_getenv, run_config_warn);

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
		else if (!strcmp(a, "--force"))
			force = 1;
		else if (!strcmp(a, "--watch"))
			watch = "";
		else if (!strncmp(a, "--watch=", 8))
			watch = a + 8;
		else if (!strcmp(a, "-o") || !strcmp(a, "--output")) {
			if (++i >= argc)
				return run_fail(RUN_EXIT_FAIL, "%s needs a directory", a);
			outdir = argv[i];
			pattern = true;
		} else if (!strncmp(a, "-o", 2)) {
			outdir = a + 2;
			pattern = true;
		} else if (!strncmp(a, "--output=", 9)) {
			outdir = a + 9;
			pattern = true;
		} else if (!strcmp(a, "-h") || !strcmp(a, "--help")) {
			run_usage(stdout);
			return 0;
		} else {
			return run_fail(RUN_EXIT_FAIL, "unknown option %s (stepprof run --help)", a);
		}
	}
	if (i >= argc)
		return run_fail(RUN_EXIT_FAIL, "no command given (stepprof run [--bpf|--no-bpf] [-o DIR] [--force] [--watch[=OPTIONS]] -- CMD ARGS...)");
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
	if (!outdir && *run_cfg.DIR)
		outdir = run_cfg.DIR;
	char expanded[PATH_MAX], host[256] = "localhost", why[600], run_id[SP_RUN_ID_SIZE];
	if (pattern) {
		gethostname(host, sizeof(host) - 1);
		if (util_expand_output(outdir, (long)getpid(), host, expanded, sizeof(expanded), why, sizeof(why)))
			return run_fail(RUN_EXIT_FAIL, "-o %s: %s", outdir, why);
		outdir = expanded;
	}
	rc = prepare_dir(outdir, dir, sizeof(dir), &j, j.drop, j.uid, j.gid);
	if (!rc)
		rc = choose_run_id(run_id);
	if (!rc)
		rc = other_runs(dir, run_id, force);
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
			int got = collector_start(&c, coll_path, j.pid, dir, (int)run_cfg.ATTACH_S, why, sizeof(why));
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

	pid_t watcher = watch ? watcher_start(dir, watch) : -1;

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
	watcher_stop(watcher);
	if (r == (ssize_t)sizeof(child_errno) && child_errno) {
		if (child_errno == ENOENT) /* it was there: what it needs is not (bash says the same) */
			return run_fail(RUN_EXIT_NOTFOUND, "%s: cannot execute: required file not found (its #! "
							   "interpreter or ELF loader)", cmd[0]);
		return run_fail(RUN_EXIT_NOEXEC, "%s: cannot execute: %s", cmd[0], strerror(child_errno));
	}
	if (!run_cfg.QUIET) {
		/*
		 * The line the preload's first process prints without `run` (hook_init.c); none
		 * when the job left no trace file: `stepprof analyze DIR` would only fail.
		 */
		unsigned n = util_traces_in(dir);
		if (n)
			fprintf(stderr, "stepprof: trace in %s (%u file%s) \u2014 stepprof analyze %s\n", dir, n,
				n == 1 ? "" : "s", dir);
		else
			fprintf(stderr, "stepprof: no trace in %s: the job made no call that stepprof records "
					"(CUDA, file input, steps)\n", dir);
	}
	return end_like(st);
}
