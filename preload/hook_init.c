/*
 * hook_init.c - the constructor and destructor of libstepprof.so.
 *
 * Constructor (or the first stepprof_mark/step, when a library's constructor
 * calls one before ours has run): read the configuration (config.def), choose the trace
 * directory and start the recorder; the directory itself and the process's
 * file are created at its first record (a process that records nothing leaves
 * nothing behind). Destructor: mark the file as cleanly ended.
 *
 * The directory: $STEPPROF_DIR when set, else ./stepprof-YYYYmmdd-HHMMSS-PID
 * (absolute) chosen by the first process and exported as STEPPROF_DIR, so that
 * forked and exec'd children and torchrun's ranks all write beside it.
 *
 * The run id: $STEPPROF_RUN_ID when set (and valid), else 16 hex digits made
 * by the first process and exported the same way, so that every process of the
 * job writes the same one in its file's header and the analyzer can tell the
 * job's files from another job's in the same directory.
 *
 * Where the trace went: the job's first process (the one that made the run id;
 * after an exec, the same pid: STEPPROF_FIRST_PID) prints one line on stderr at
 * its exit, `stepprof: trace in DIR (N files) — stepprof analyze DIR`, unless
 * STEPPROF_QUIET=1 (from _exit and _Exit too: a shell ends with them, hook_proc.c).
 * Its forked workers, the programs it runs and torchrun's ranks
 * inherit the run id and never print it; under `stepprof run`, which sets the run
 * id itself, the command prints the line.
 *
 * NVTX: NVTX_INJECTION64_PATH is pointed at this library when unset, so that
 * NVTX v3 in the program loads it as its tool (hook_nvtx.c).
 */
#include <dirent.h>
#include <fcntl.h>
#include <limits.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "config.h"
#include "nvtx_inject.h"
#include "recorder.h"

/* 0: not started, 1: a thread is starting the recorder, 2: done (recording or not) */
static int g_started;
/* The job's first process (its pid; 0: another one): it says where the trace is, at its exit. */
static pid_t g_first_pid;

/*
 * stepprof's own programs (the analyzer and `stepprof run`, the eBPF collector)
 * are not the job: under an LD_PRELOAD exported in the shell, `stepprof analyze`
 * recorded its reads of the traces into the directory it was reading, and
 * `stepprof run` wrote a file of its own beside its job's.
 */
static int our_own_program(void)
{
	extern char *program_invocation_short_name;
	const char *n = program_invocation_short_name;
	return n && (!strcmp(n, "stepprof") || !strcmp(n, "stepprof-bpf"));
}

/*
 * The working directory lets other users make names in it (/tmp, mode 1777 or
 * o+w, g+w, or another user's): the predictable default name could be taken
 * there first. The directory is then opened without following links and
 * checked (tracefile.c), so a name taken by another user is refused, never
 * followed; a random suffix keeps it from being taken at all.
 */
static int shared_dir(const char *path)
{
	struct stat st;
	if (syscall(SYS_newfstatat, AT_FDCWD, path, &st, 0) != 0)
		return 0;
	return (st.st_mode & (S_IWGRP | S_IWOTH)) || (st.st_uid != 0 && st.st_uid != geteuid());
}

/* "-" and 8 characters of [a-z0-9] from the kernel's random pool (the clock when it has none). */
static void random_suffix(char *out)
{
	static const char set[] = "abcdefghijklmnopqrstuvwxyz0123456789";
	uint64_t r = 0;
	if (syscall(SYS_getrandom, &r, sizeof(r), GRND_NONBLOCK) != (long)sizeof(r)) {
		struct timespec ts;
		clock_gettime(CLOCK_MONOTONIC, &ts);
		r = (uint64_t)ts.tv_nsec * 0x9e3779b97f4a7c15ull ^ (uint64_t)getpid() << 32;
	}
	out[0] = '-';
	for (int i = 1; i <= 8; i++, r /= 36)
		out[i] = set[r % 36];
	out[9] = 0;
}

/* The job's run id: the inherited one, or a new one exported to our children. */
static void choose_run_id(void)
{
	char id[SP_RUN_ID_SIZE];
	const char *have = sp_cfg.RUN_ID;
	if (have && *have && sp_run_id_valid(have)) {
		sp_recorder_set_run_id(have);
		/* the first process again, after an exec (`sh -c 'exec python ...'`) */
		const char *first = getenv("STEPPROF_FIRST_PID");
		if (first && atol(first) == (long)getpid())
			g_first_pid = getpid();
		return;
	}
	sp_tf_make_run_id(id);
	if (have && *have)
		sp_warn_once("runid", "STEPPROF_RUN_ID=\"%.40s\" is not a run id (1 to 31 of A-Z a-z 0-9 . _ : -); "
				      "this job's is %s",
			     have, id);
	setenv("STEPPROF_RUN_ID", id, 1);
	sp_recorder_set_run_id(id);
	char pid[24];
	snprintf(pid, sizeof(pid), "%ld", (long)getpid());
	setenv("STEPPROF_FIRST_PID", pid, 1);
	g_first_pid = getpid();
}

/* Trace files in dir (names ending in .sptrace), read with getdents64: no allocation, no hook. */
static unsigned count_traces(const char *dir)
{
	int fd = (int)syscall(SYS_openat, AT_FDCWD, dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (fd < 0)
		return 0;
	unsigned n = 0;
	char buf[4096] __attribute__((aligned(8)));
	long got;
	while ((got = syscall(SYS_getdents64, fd, buf, sizeof(buf))) > 0) {
		for (long off = 0; off < got;) {
			struct dirent64 *d = (struct dirent64 *)(buf + off);
			size_t len = strlen(d->d_name);
			n += len > 8 && !strcmp(d->d_name + len - 8, ".sptrace");
			off += d->d_reclen;
		}
	}
	syscall(SYS_close, fd);
	return n;
}

/*
 * At the first process's exit: where the trace is, one line on stderr (written as
 * the warnings are: no stdio, whose buffers may be gone; no SIGPIPE or SIGXFSZ
 * from a closed pipe or a file size limit; nothing when no process of the job
 * recorded anything and the directory holds no trace).
 */
void sp_say_where(void)
{
	static int said;
	if (!g_first_pid || getpid() != g_first_pid || sp_cfg.QUIET || __atomic_exchange_n(&said, 1, __ATOMIC_ACQ_REL))
		return;
	const char *dir = sp_recorder_dir();
	unsigned n = count_traces(dir);
	if (!n)
		return;
	char line[2 * PATH_MAX + 96];
	int len = snprintf(line, sizeof(line), "stepprof: trace in %s (%u file%s) \xe2\x80\x94 stepprof analyze %s\n", dir,
			   n, n == 1 ? "" : "s", dir);
	if (len > 0 && (size_t)len < sizeof(line))
		sp_tf_write_stderr(line, (size_t)len); /* as the warnings: no SIGPIPE, no SIGXFSZ */
}

static void start(void)
{
	if (our_own_program())
		return;
	sp_config_load();
	if (sp_cfg.DISABLE)
		return;
	char dir[PATH_MAX];
	int len;
	if (sp_cfg.DIR && sp_cfg.DIR[0] == '/') {
		len = snprintf(dir, sizeof(dir), "%s", sp_cfg.DIR);
	} else if (sp_cfg.DIR && sp_cfg.DIR[0]) {
		/* relative: made absolute and exported, so children that chdir write beside us */
		char cwd[PATH_MAX];
		if (getcwd(cwd, sizeof(cwd)))
			len = snprintf(dir, sizeof(dir), "%s/%s", cwd, sp_cfg.DIR);
		else
			len = snprintf(dir, sizeof(dir), "%s", sp_cfg.DIR);
	} else {
		char cwd[PATH_MAX - 64];
		time_t t = time(NULL);
		struct tm tm;
		localtime_r(&t, &tm);
		if (!getcwd(cwd, sizeof(cwd)))
			snprintf(cwd, sizeof(cwd), "/tmp");
		len = snprintf(dir, sizeof(dir), "%s/stepprof-%04d%02d%02d-%02d%02d%02d-%d", cwd, tm.tm_year + 1900,
			       tm.tm_mon + 1, tm.tm_mday, tm.tm_hour, tm.tm_min, tm.tm_sec, (int)getpid());
		if (len > 0 && (size_t)len + 10 < sizeof(dir) && shared_dir(cwd)) {
			random_suffix(dir + len);
			len += 9;
			sp_warn_once("shareddir",
				     "%s is writable by other users: the trace directory's name has a random "
				     "suffix there: %s",
				     cwd, dir);
		}
	}
	/*
	 * A path cut short would be another directory (the traces would go to,
	 * and children be told, a prefix of it): refused whole.
	 */
	if (len < 0 || len > SP_TF_DIR_MAX) {
		sp_warn_once("dirlen",
			     "the trace directory's path (STEPPROF_DIR, made absolute) is %d bytes long, more than "
			     "the %d a trace file's path leaves it; this process is not recorded",
			     len, SP_TF_DIR_MAX);
		return;
	}
	if (!(sp_cfg.DIR && sp_cfg.DIR[0] == '/'))
		setenv("STEPPROF_DIR", dir, 1);
	/* our own look-ups (getcwd, realpath of this library) are not the program's input */
	sp_hook_depth++;
	const char *why = NULL;
	if (sp_clock_init(sp_cfg.CLOCK, &why) != SP_CLK_TSC && sp_cfg.CLOCK && strcmp(sp_cfg.CLOCK, "tsc") == 0)
		sp_warn_once("clock", "STEPPROF_CLOCK=tsc: %s; using clock_gettime", why ? why : "refused");
	choose_run_id();
	sp_recorder_init(dir, (uint64_t)sp_cfg.MAX_MB << 20);
	sp_nvtx_setup();
	sp_hook_depth--;
}

static void start_once(void)
{
	int s = 0;
	if (!__atomic_compare_exchange_n(&g_started, &s, 1, 0, __ATOMIC_ACQ_REL, __ATOMIC_ACQUIRE))
		return;
	start();
	__atomic_store_n(&g_started, 2, __ATOMIC_RELEASE);
}

__attribute__((constructor)) static void sp_init(void)
{
	start_once();
}

/*
 * The recorder for a call that may come before the constructor: a shared
 * library's constructor (run before ours when the program links it) calling
 * stepprof_mark/stepprof_step: those are recorded, not dropped.
 */
int sp_start(void)
{
	if (__builtin_expect(__atomic_load_n(&g_started, __ATOMIC_ACQUIRE) == 0, 0))
		start_once();
	return __atomic_load_n(&sp_active, __ATOMIC_ACQUIRE);
}

__attribute__((destructor)) static void sp_fini(void)
{
	sp_recorder_shutdown();
	sp_say_where();
}
