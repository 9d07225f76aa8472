/*
 * cmd_run_job.c - the job of `stepprof run`: the child that waits for the
 * collector's attach and becomes CMD (LD_PRELOAD, STEPPROF_DIR, the user under
 * sudo), the signals forwarded to it, waiting for it (its stops followed) and
 * ending as it ended.
 *
 * Divided into: 1. the job child, 2. waiting.
 */
#include "cmd_run.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

/* ------------------------------------------------------------ 1. the job child */
static void restore_signals(void);

/*
 * Can the job write into dir: 0, or the errno it would get. Under sudo, asked of
 * the kernel as the user, in a child that becomes the user (mode bits, groups,
 * ACLs, a read-only mount): root's own access() says yes to nearly anything, and
 * guessing from the owner and mode refused a directory the user may write through
 * a group and took one owned by the user but not writable (the trace was lost).
 */
int writable_by_job(const struct job *j, const char *dir)
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

void job_child(struct job *j)
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
		if (!strcmp(run_config()->IO, "bpf"))
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

/* ---------------------------------------------------------------- 2. waiting */

volatile pid_t run_job_pid;

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
struct sigaction run_pipe_old;	   /* SIGPIPE: ignored by us, the job gets this back */
struct sigaction run_chld_old;	   /* SIGCHLD: the default for us, the job gets this back */

/* Every signal forwarded, whatever its disposition. */
void forwardable(sigset_t *set)
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
void install_forwarding(void)
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
int end_like(int st)
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
void follow_stop(pid_t job, int sig)
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
int wait_job(pid_t job, struct collector *c)
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
