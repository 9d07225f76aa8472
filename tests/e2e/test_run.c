/*
 * test_run.c - `stepprof run`: the job's environment (LD_PRELOAD prepended,
 * STEPPROF_DIR, NVTX_INJECTION64_PATH), its exit status passed through (and
 * its death by a signal), SIGTERM and SIGINT forwarded (also during the collector's attach;
 * ignored ones left ignored), the default trace directory, input captured
 * whether or not BPF is available, and bad input (no command, command not
 * found, not executable, unusable -o) as one-line errors with documented codes
 * (125, 127, 126, 125).
 */
#include "test_io_helpers.h"

#include <fcntl.h>
#include <poll.h>
#include <pwd.h>
#include <signal.h>
#include <spawn.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <termios.h>
#include <time.h>

extern char **environ;

static int count_lines(const char *s)
{
	int n = 0;
	for (; s && *s; s++)
		n += *s == '\n';
	return n;
}

/* stepprof run ARGS... with STEPPROF_QUIET=1 (no closing "trace in" line). */
static int run_stepprof(struct sp_t_result *res, char *const *args)
{
	char *stepprof = io_t_abs("bin/stepprof");
	char *argv[32] = { stepprof, "run" };
	int n = 2;
	for (; args[n - 2] && n < 31; n++)
		argv[n] = args[n - 2];
	argv[n] = NULL;
	char *env[] = { "STEPPROF_QUIET=1", NULL };
	int st = sp_t_run(res, argv, env, NULL, 60);
	free(stepprof);
	return st;
}

Test(run, job_gets_preload_dir_and_nvtx_path)
{
	char *tmp = sp_t_tmpdir("run-env");
	char out[PATH_MAX];
	snprintf(out, sizeof(out), "%s/trace", tmp);
	char *lib = io_t_abs("lib/libstepprof.so"), *stepprof = io_t_abs("bin/stepprof");
	char *argv[] = { stepprof, "run", "--no-bpf", "-o", out, "--", "/bin/sh", "-c",
			 "echo \"$LD_PRELOAD\"; echo \"$STEPPROF_DIR\"; echo \"$NVTX_INJECTION64_PATH\"", NULL };
	/* What was in LD_PRELOAD stays, after libstepprof.so. */
	char *env[] = { "LD_PRELOAD=libm.so.6", "NVTX_INJECTION64_PATH=", "STEPPROF_QUIET=1", NULL };
	struct sp_t_result res;
	cr_assert_eq(sp_t_run(&res, argv, env, NULL, 30), 0, "%s", res.err);
	char want[3 * PATH_MAX];
	char *abs_out = realpath(out, NULL);
	cr_assert_not_null(abs_out, "-o %s was not created", out);
	snprintf(want, sizeof(want), "%s:libm.so.6\n%s\n%s\n", lib, abs_out, lib);
	cr_expect_str_eq(res.out, want);
	struct stat st;
	cr_expect_eq(stat(out, &st), 0);
	cr_expect(S_ISDIR(st.st_mode));
	sp_t_result_free(&res);
	free(abs_out), free(lib), free(stepprof);
	sp_t_rmrf(tmp);
	free(tmp);
}

/*
 * LD_PRELOAD already naming libstepprof.so as one of its entries is kept as it is;
 * an entry that merely contains its path (a copy beside it, "/x" + its path) is
 * another library: libstepprof.so is still prepended.
 */
static char *job_preload(const char *preload)
{
	char *tmp = sp_t_tmpdir("run-preload");
	char *stepprof = io_t_abs("bin/stepprof");
	char *argv[] = { stepprof, "run", "--no-bpf", "-o", tmp, "--", "/bin/sh", "-c", "echo \"$LD_PRELOAD\"", NULL };
	char env_preload[3 * PATH_MAX];
	snprintf(env_preload, sizeof(env_preload), "LD_PRELOAD=%s", preload);
	char *env[] = { env_preload, "STEPPROF_QUIET=1", NULL };
	struct sp_t_result res;
	cr_assert_eq(sp_t_run(&res, argv, env, NULL, 30), 0, "%s", res.err);
	char *out = strdup(res.out);
	sp_t_result_free(&res);
	free(stepprof);
	sp_t_rmrf(tmp);
	free(tmp);
	return out;
}

Test(run, preload_entries_are_matched_whole)
{
	char *lib = io_t_abs("lib/libstepprof.so");
	char have[3 * PATH_MAX], want[4 * PATH_MAX];
	const char *kept[] = { "libm.so.6:%s", "libm.so.6 %s", "%s" };
	for (size_t i = 0; i < sizeof(kept) / sizeof(kept[0]); i++) {
		snprintf(have, sizeof(have), kept[i], lib);
		snprintf(want, sizeof(want), "%s\n", have);
		char *out = job_preload(have);
		cr_expect_str_eq(out, want, "LD_PRELOAD=%s", have);
		free(out);
	}
	const char *other[] = { "/x%s", "%s.old", "%s.old:libm.so.6" };
	for (size_t i = 0; i < sizeof(other) / sizeof(other[0]); i++) {
		snprintf(have, sizeof(have), other[i], lib);
		snprintf(want, sizeof(want), "%s:%s\n", lib, have);
		char *out = job_preload(have);
		cr_expect_str_eq(out, want, "LD_PRELOAD=%s", have);
		free(out);
	}
	free(lib);
}

Test(run, exit_status_is_the_jobs)
{
	char *tmp = sp_t_tmpdir("run-status");
	struct sp_t_result res;
	char *a1[] = { "--no-bpf", "-o", tmp, "--", "/bin/sh", "-c", "exit 7", NULL };
	cr_expect_eq(run_stepprof(&res, a1), 7);
	sp_t_result_free(&res);
	/* --force: the same directory again (test_runs.c has what it does) */
	char *a2[] = { "--no-bpf", "--force", "-o", tmp, "/bin/sh", "-c", "kill -KILL $$", NULL };
	cr_expect_eq(run_stepprof(&res, a2), 128 + SIGKILL);
	sp_t_result_free(&res);
	char *a3[] = { "--no-bpf", "--force", "-o", tmp, "--", "/bin/true", NULL };
	cr_expect_eq(run_stepprof(&res, a3), 0);
	sp_t_result_free(&res);
	sp_t_rmrf(tmp);
	free(tmp);
}

/*
 * stepprof run passes sig on to the job, which traps it and exits 3 at once, long
 * before its 30 s: what stepprof run then ends with is the job's 3. Killed by sig
 * itself instead of forwarding, stepprof run would die of it, and the job run on.
 */
static void expect_forwarded(int sig)
{
	char *tmp = sp_t_tmpdir("run-sig");
	char *stepprof = io_t_abs("bin/stepprof");
	char ready[PATH_MAX + 8], script[2 * PATH_MAX];
	snprintf(ready, sizeof(ready), "%s/ready", tmp);
	snprintf(script, sizeof(script), "trap 'kill $! 2>/dev/null; exit 3' %d; touch '%s'; sleep 30 & wait", sig, ready);
	char *argv[] = { stepprof, "run", "--no-bpf", "-o", tmp, "--", "/bin/sh", "-c", script, NULL };
	pid_t pid;
	setenv("STEPPROF_QUIET", "1", 1); /* this test's own process: no closing line */
	cr_assert_eq(posix_spawn(&pid, stepprof, NULL, NULL, argv, environ), 0);
	/* Once the job runs, stepprof run forwards (its handlers are set before the fork). */
	for (int i = 0; i < 1000 && access(ready, F_OK) != 0; i++) {
		struct timespec ts = { 0, 10 * 1000000L };
		nanosleep(&ts, NULL);
	}
	cr_assert_eq(access(ready, F_OK), 0, "the job did not start within 10 s");
	time_t t0 = time(NULL);
	cr_assert_eq(kill(pid, sig), 0);
	int st = 0;
	cr_assert_eq(waitpid(pid, &st, 0), pid);
	cr_expect(WIFEXITED(st), "stepprof run itself was killed (signal %d) instead of forwarding",
		  WIFSIGNALED(st) ? WTERMSIG(st) : 0);
	cr_expect_eq(WEXITSTATUS(st), 3, "signal %d: status %d, not the job's trap's", sig, WEXITSTATUS(st));
	cr_expect_lt(time(NULL) - t0, 20, "the job did not get the signal (it ran its 30 s)");
	free(stepprof);
	sp_t_rmrf(tmp);
	free(tmp);
}

Test(run, sigterm_is_forwarded_to_the_job, .timeout = 60)
{
	expect_forwarded(SIGTERM);
}

/* kill -INT from another process (a scheduler, a script): not the terminal's Ctrl-C, which reaches the job itself. */
Test(run, sigint_is_forwarded_to_the_job, .timeout = 60)
{
	expect_forwarded(SIGINT);
}

/*
 * Any signal sent to stepprof run is the job's: SIGUSR1 (Slurm's --signal=USR1@60,
 * a trainer's "checkpoint now", faulthandler's stack dump), SIGALRM, a real-time
 * signal. Were they to kill stepprof run itself, the job would run on, orphaned.
 */
Test(run, every_signal_sent_is_forwarded_to_the_job, .timeout = 120)
{
	const int sigs[] = { SIGUSR1, SIGUSR2, SIGALRM, SIGRTMIN + 2 };
	for (size_t i = 0; i < sizeof(sigs) / sizeof(sigs[0]); i++)
		expect_forwarded(sigs[i]);
}

Test(run, default_directory_is_created_in_the_cwd)
{
	char *tmp = sp_t_tmpdir("run-default");
	char *stepprof = io_t_abs("bin/stepprof"), *iogen = io_t_abs("tests/bin/iogen");
	char cmd[4 * PATH_MAX];
	snprintf(cmd, sizeof(cmd), "cd '%s' && '%s' run --no-bpf -- '%s' pipe 1 1", tmp, stepprof, iogen);
	char *argv[] = { "/bin/sh", "-c", cmd, NULL };
	char *env[] = { "STEPPROF_DIR=", NULL }; /* unset: an exported one would be used instead */
	struct sp_t_result res;
	cr_assert_eq(sp_t_run(&res, argv, env, NULL, 30), 0, "%s", res.err);
	/* The closing line names it. */
	cr_expect_not_null(strstr(res.where, "stepprof: trace in "), "%s", res.err);
	sp_t_result_free(&res);
	DIR *d = opendir(tmp);
	cr_assert_not_null(d);
	struct dirent *e;
	char found[PATH_MAX] = "";
	while ((e = readdir(d)))
		if (!strncmp(e->d_name, "stepprof-", 9))
			snprintf(found, sizeof(found), "%s/%s", tmp, e->d_name);
	closedir(d);
	cr_assert(found[0], "no ./stepprof-YYYYmmdd-HHMMSS-PID directory");
	/* stepprof-YYYYmmdd-HHMMSS-PID */
	const char *name = strrchr(found, '/') + 1;
	cr_expect_eq(strlen(name) > 25 && name[17] == '-' && name[24] == '-', 1, "odd name %s", name);
	struct io_recs rs;
	io_t_load_dir(found, &rs);
	cr_expect_gt(io_t_count(&rs, (struct io_filter){ .kind = "loader_wait" }, NULL), 0,
		     "the job wrote no trace into %s", found);
	io_t_free(&rs);
	free(stepprof), free(iogen);
	sp_t_rmrf(tmp);
	free(tmp);
}

Test(run, input_is_captured_with_or_without_bpf, .timeout = 60)
{
	char *tmp = sp_t_tmpdir("run-bpf");
	char data[PATH_MAX], out[PATH_MAX];
	snprintf(data, sizeof(data), "%s/data", tmp);
	snprintf(out, sizeof(out), "%s/trace", tmp);
	char *iogen = io_t_abs("tests/bin/iogen");
	struct sp_t_result res;
	char *setup[] = { iogen, "setup", data, "4", NULL };
	cr_assert_eq(sp_t_run(&res, setup, NULL, NULL, 30), 0);
	sp_t_result_free(&res);
	char *args[] = { "--bpf", "-o", out, "--", iogen, "run", data, "4", "1", "1", NULL };
	cr_assert_eq(run_stepprof(&res, args), 0, "%s", res.err);
	/* Where BPF is refused: exactly one line saying why and that libc captures input. */
	int fallback = strstr(res.err, "eBPF collector unavailable") != NULL;
	if (fallback) {
		cr_expect_eq(count_lines(res.err), 1, "%s", res.err);
		cr_expect_not_null(strstr(res.err, "libc wrappers"), "%s", res.err);
	}
	sp_t_result_free(&res);
	struct io_recs rs;
	io_t_load_dir(out, &rs);
	char prefix[PATH_MAX + 4];
	snprintf(prefix, sizeof(prefix), "%s/f", data);
	cr_expect_eq(io_t_count(&rs, (struct io_filter){ .kind = "open", .prefix = prefix }, NULL), 8,
		     "4 files opened with open and fopen (%s mode)", fallback ? "libc" : "bpf");
	cr_expect_eq(io_t_count(&rs, (struct io_filter){ .prefix = prefix, .source = fallback ? "bpf" : "libc" }, NULL), 0,
		     "records from the source that should have stood down");
	io_t_free(&rs);
	free(iogen);
	sp_t_rmrf(tmp);
	free(tmp);
}

/* Without --bpf or --no-bpf, root gets the collector (or one line saying why not), and input is counted once. */
Test(run, as_root_the_collector_is_the_default, .timeout = 60)
{
	const char *why;
	if (!io_t_bpf_possible(&why))
		cr_skip_test("the default is the libc wrappers here: %s", why);
	char *tmp = sp_t_tmpdir("run-default-bpf");
	char data[PATH_MAX], out[PATH_MAX], prefix[PATH_MAX + 4];
	snprintf(data, sizeof(data), "%s/data", tmp);
	snprintf(out, sizeof(out), "%s/trace", tmp);
	snprintf(prefix, sizeof(prefix), "%s/f", data);
	char *iogen = io_t_abs("tests/bin/iogen");
	struct sp_t_result res;
	char *setup[] = { iogen, "setup", data, "4", NULL };
	cr_assert_eq(sp_t_run(&res, setup, NULL, NULL, 30), 0);
	sp_t_result_free(&res);
	char *args[] = { "-o", out, "--", iogen, "run", data, "4", "1", "1", NULL };
	cr_assert_eq(run_stepprof(&res, args), 0, "%s", res.err);
	int fallback = strstr(res.err, "eBPF collector unavailable") != NULL;
	sp_t_result_free(&res);
	if (fallback) {
		free(iogen);
		sp_t_rmrf(tmp);
		free(tmp);
		cr_skip_test("BPF refused here: the default fell back to the libc wrappers");
	}
	struct io_recs rs;
	io_t_load_dir(out, &rs);
	cr_expect_eq(io_t_count(&rs, (struct io_filter){ .kind = "open", .prefix = prefix, .source = "bpf" }, NULL), 8,
		     "4 files opened with open and fopen, seen by the collector");
	cr_expect_eq(io_t_count(&rs, (struct io_filter){ .prefix = prefix, .source = "libc" }, NULL), 0,
		     "the libc wrappers should have stood down");
	io_t_free(&rs);
	free(iogen);
	sp_t_rmrf(tmp);
	free(tmp);
}

/*
 * stepprof run --bpf -o OUT -- ARGS..., which must exit 0: its stderr in res. 0 when the
 * collector ran, 1 when BPF was refused here (res freed, the caller skips).
 */
static int run_with_collector(struct sp_t_result *res, const char *out, char *const *job)
{
	/* --force: the tests run it again into one directory; only the last run's traces are read */
	char *args[16] = { "--bpf", "--force", "-o", (char *)out, "--" };
	int n = 5;
	for (; job[n - 5] && n < 15; n++)
		args[n] = job[n - 5];
	args[n] = NULL;
	cr_assert_eq(run_stepprof(res, args), 0, "%s", res->err);
	if (strstr(res->err, "eBPF collector unavailable")) {
		sp_t_result_free(res);
		return 1;
	}
	return 0;
}

/*
 * The collector leaves once the traced tree has exited, at the last thread's exit
 * tracepoint; the job is reaped only after its exit has unmapped its memory. A job
 * with 256 MiB still mapped loses that race every time (5 of 5): the collector is not
 * "exited early" then (every run of a PyTorch job would say so), and nothing is lost.
 */
Test(run, a_slow_exit_is_not_a_collector_gone_early, .timeout = 60)
{
	const char *why;
	if (!io_t_bpf_possible(&why))
		cr_skip_test("no collector here: %s", why);
	char *tmp = sp_t_tmpdir("run-slow-exit");
	char out[PATH_MAX];
	snprintf(out, sizeof(out), "%s/trace", tmp);
	char *markgen = io_t_abs("tests/bin/markgen");
	char *job[] = { markgen, "-n", "10", "-M", "256", "-K", NULL };
	struct sp_t_result res;
	for (int i = 0; i < 3; i++) {
		if (run_with_collector(&res, out, job)) {
			free(markgen);
			sp_t_rmrf(tmp);
			free(tmp);
			cr_skip_test("BPF refused here");
		}
		cr_expect_null(strstr(res.err, "exited early"), "run %d: %s", i, res.err);
		cr_expect_not_null(strstr(res.out, "alloc=ok"), "run %d: %s", i, res.out);
		sp_t_result_free(&res);
	}
	free(markgen);
	sp_t_rmrf(tmp);
	free(tmp);
}

/* ... and a collector that does leave while the job runs is reported, once. */
Test(run, a_collector_gone_while_the_job_runs_is_reported, .timeout = 60)
{
	const char *why;
	if (!io_t_bpf_possible(&why))
		cr_skip_test("no collector here: %s", why);
	char *tmp = sp_t_tmpdir("run-collector-gone");
	char out[PATH_MAX];
	snprintf(out, sizeof(out), "%s/trace", tmp);
	/* The job's parent is `stepprof run`: SIGTERM its child stepprof-bpf, then go on for a second. */
	char *job[] = { "/bin/sh", "-c",
			"for d in /proc/[0-9]*; do"
			"  [ \"$(cat $d/comm 2>/dev/null)\" = stepprof-bpf ] || continue;"
			"  set -- $(cat $d/stat 2>/dev/null); [ \"$4\" = \"$PPID\" ] && kill -TERM ${d#/proc/} && echo killed;"
			"done; sleep 1",
			NULL };
	struct sp_t_result res;
	if (run_with_collector(&res, out, job)) {
		sp_t_rmrf(tmp);
		free(tmp);
		cr_skip_test("BPF refused here");
	}
	cr_expect_not_null(strstr(res.out, "killed"), "the job found no collector to stop: %s", res.out);
	const char *w = strstr(res.err, "exited early (status 0)");
	cr_expect_not_null(w, "no warning: %s", res.err);
	cr_expect(!w || !strstr(w + 1, "exited early"), "warned twice: %s", res.err);
	sp_t_result_free(&res);
	sp_t_rmrf(tmp);
	free(tmp);
}

/*
 * A job whose main thread calls pthread_exit while another thread works on: its
 * main thread is a zombie ('Z' in /proc/PID/stat) for the 3 s the other one reads.
 * The collector took that for the job's end and stopped within 500 ms (its file
 * had the first round's 4 opens of 120, over ~1 ms).
 */
Test(run, the_collector_follows_a_job_whose_main_thread_exited, .timeout = 60)
{
	const char *why;
	if (!io_t_bpf_possible(&why))
		cr_skip_test("no collector here: %s", why);
	char *tmp = sp_t_tmpdir("run-mainexit");
	char data[PATH_MAX], out[PATH_MAX], prefix[PATH_MAX + 4];
	snprintf(data, sizeof(data), "%s/data", tmp);
	snprintf(out, sizeof(out), "%s/trace", tmp);
	snprintf(prefix, sizeof(prefix), "%s/f", data);
	char *iogen = io_t_abs("tests/bin/iogen");
	struct sp_t_result res;
	char *setup[] = { iogen, "setup", data, "4", NULL };
	cr_assert_eq(sp_t_run(&res, setup, NULL, NULL, 30), 0);
	sp_t_result_free(&res);
	char *job[] = { iogen, "mainexit", data, "4", "30", NULL };
	if (run_with_collector(&res, out, job)) {
		free(iogen);
		sp_t_rmrf(tmp);
		free(tmp);
		cr_skip_test("BPF refused here");
	}
	cr_expect_null(strstr(res.err, "exited early"), "%s", res.err);
	struct sp_json *truth = io_t_truth(res.out);
	long opens = (long)sp_json_i64(truth, "open", 0), reads = (long)sp_json_i64(truth, "read_calls", 0);
	cr_assert_eq(opens, 120, "%s", res.out);
	sp_json_free(truth);
	sp_t_result_free(&res);
	struct io_recs rs;
	io_t_load_dir(out, &rs);
	struct io_filter bpf = { .prefix = prefix, .source = "bpf" };
	long n;
	bpf.kind = "open";
	cr_expect_eq(n = io_t_count(&rs, bpf, NULL), opens, "the collector saw %ld opens of %ld", n, opens);
	bpf.kind = "read";
	cr_expect_eq(n = io_t_count(&rs, bpf, NULL), reads, "the collector saw %ld reads of %ld", n, reads);
	bpf.kind = "close";
	cr_expect_eq(n = io_t_count(&rs, bpf, NULL), opens, "the collector saw %ld closes of %ld", n, opens);
	cr_expect_eq(io_t_count(&rs, (struct io_filter){ .prefix = prefix, .source = "libc" }, NULL), 0,
		     "the libc wrappers should have stood down");
	io_t_free(&rs);
	free(iogen);
	sp_t_rmrf(tmp);
	free(tmp);
}

/* The pid of parent's child named comm (/proc/PID/comm), 0 when none. */
static pid_t child_named(pid_t parent, const char *comm)
{
	DIR *d = opendir("/proc");
	cr_assert_not_null(d);
	pid_t found = 0;
	for (struct dirent *e; !found && (e = readdir(d));) {
		char path[PATH_MAX], buf[512];
		int pid = atoi(e->d_name);
		if (pid <= 0)
			continue;
		snprintf(path, sizeof(path), "/proc/%d/stat", pid);
		FILE *f = fopen(path, "r");
		if (!f)
			continue;
		size_t n = fread(buf, 1, sizeof(buf) - 1, f);
		fclose(f);
		buf[n] = 0;
		char *open = strchr(buf, '('), *close = strrchr(buf, ')');
		int ppid = 0;
		if (open && close && sscanf(close + 1, " %*c %d", &ppid) == 1 && ppid == parent &&
		    (size_t)(close - open - 1) == strlen(comm) && !strncmp(open + 1, comm, strlen(comm)))
			found = pid;
	}
	closedir(d);
	return found;
}

/*
 * ... and a collector stopped while such a job runs on is "exited early": the
 * job's zombie main thread is not the job leaving (taken for that, it would leave
 * stepprof run saying nothing).
 */
Test(run, a_collector_gone_after_the_main_thread_exited_is_reported, .timeout = 60)
{
	const char *why;
	if (!io_t_bpf_possible(&why))
		cr_skip_test("no collector here: %s", why);
	char *tmp = sp_t_tmpdir("run-mainexit-gone");
	char data[PATH_MAX], out[PATH_MAX], errf[PATH_MAX];
	snprintf(data, sizeof(data), "%s/data", tmp);
	snprintf(out, sizeof(out), "%s/trace", tmp);
	snprintf(errf, sizeof(errf), "%s/err", tmp);
	char *iogen = io_t_abs("tests/bin/iogen"), *stepprof = io_t_abs("bin/stepprof");
	struct sp_t_result res;
	char *setup[] = { iogen, "setup", data, "2", NULL };
	cr_assert_eq(sp_t_run(&res, setup, NULL, NULL, 30), 0);
	sp_t_result_free(&res);
	char *argv[] = { stepprof, "run", "--bpf", "-o", out, "--", iogen, "mainexit", data, "2", "10", NULL };
	int po[2];
	cr_assert_eq(pipe2(po, O_CLOEXEC), 0);
	posix_spawn_file_actions_t fa;
	posix_spawn_file_actions_init(&fa);
	posix_spawn_file_actions_adddup2(&fa, po[1], 1);
	posix_spawn_file_actions_addopen(&fa, 2, errf, O_WRONLY | O_CREAT | O_TRUNC, 0600);
	setenv("STEPPROF_QUIET", "1", 1);
	pid_t pid;
	cr_assert_eq(posix_spawn(&pid, stepprof, &fa, NULL, argv, environ), 0);
	posix_spawn_file_actions_destroy(&fa);
	close(po[1]);
	FILE *f = fdopen(po[0], "r");
	char line[256] = "";
	/* The job's first line: its main thread has exited (the collector is attached: the job runs). */
	cr_assert_not_null(fgets(line, sizeof(line), f), "the job said nothing");
	cr_assert(strstr(line, "main_exited"), "%s", line);
	size_t len;
	char *err = sp_t_read_file(errf, &len);
	if (err && strstr(err, "eBPF collector unavailable")) { /* said before the job was released */
		while (fgets(line, sizeof(line), f))
			;
		waitpid(pid, NULL, 0);
		fclose(f);
		free(err), free(iogen), free(stepprof);
		sp_t_rmrf(tmp);
		free(tmp);
		cr_skip_test("BPF refused here");
	}
	free(err);
	pid_t coll = child_named(pid, "stepprof-bpf");
	cr_assert_gt(coll, 0, "no collector among stepprof run's children");
	cr_assert_eq(kill(coll, SIGTERM), 0);
	while (fgets(line, sizeof(line), f))
		;
	fclose(f);
	int st = 0;
	cr_assert_eq(waitpid(pid, &st, 0), pid);
	cr_expect(WIFEXITED(st) && WEXITSTATUS(st) == 0, "status %d", st);
	err = sp_t_read_file(errf, &len);
	cr_assert_not_null(err);
	const char *w = strstr(err, "exited early (status 0)");
	cr_expect_not_null(w, "no warning: %s", err);
	cr_expect(!w || !strstr(w + 1, "exited early"), "warned twice: %s", err);
	free(err);
	free(iogen), free(stepprof);
	sp_t_rmrf(tmp);
	free(tmp);
}

Test(run, bad_input_is_a_one_line_error)
{
	char *tmp = sp_t_tmpdir("run-bad");
	char file[PATH_MAX], under[PATH_MAX + 8];
	snprintf(file, sizeof(file), "%s/plain", tmp);
	snprintf(under, sizeof(under), "%s/sub", file);
	cr_assert_eq(sp_t_write_file(file, "x\n", 2), 0);
	chmod(file, 0644);
	struct {
		char *args[8];
		int code;
		const char *says;
	} cases[] = {
		{ { "--no-bpf", "-o", tmp, NULL }, 125, "no command" },
		{ { "--no-bpf", "-o", tmp, "--", NULL }, 125, "no command" },
		{ { "--frobnicate", "--", "/bin/true", NULL }, 125, "unknown option" },
		{ { "--no-bpf", "-o", tmp, "--", "stepprof-no-such-command-xyz", NULL }, 127, "not found" },
		{ { "--no-bpf", "-o", tmp, "--", file, NULL }, 126, "cannot execute" },
		{ { "--no-bpf", "-o", tmp, "--", tmp, NULL }, 126, "cannot execute" },
		{ { "--no-bpf", "-o", under, "--", "/bin/true", NULL }, 125, "-o" },
		{ { "--no-bpf", "-o", file, "--", "/bin/true", NULL }, 125, "not a directory" },
	};
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		struct sp_t_result res;
		int st = run_stepprof(&res, cases[i].args);
		cr_expect_eq(st, cases[i].code, "case %zu: status %d, expected %d (%s)", i, st, cases[i].code, res.err);
		cr_expect_eq(count_lines(res.err), 1, "case %zu: not one line: %s", i, res.err);
		cr_expect_not_null(strstr(res.err, cases[i].says), "case %zu: %s", i, res.err);
		cr_expect_eq(strncmp(res.err, "stepprof: ", 10), 0, "case %zu: %s", i, res.err);
		sp_t_result_free(&res);
	}
	sp_t_rmrf(tmp);
	free(tmp);
}

/*
 * Commands that exist but do not run, as a shell tells them: a binary of another
 * kind (another architecture's ELF) is "Exec format error", 126 (execvp had
 * /bin/sh read it as a script: "ELF...: not found", 127); a script whose #!
 * interpreter is missing is not "command not found" (it is there), 127 as in bash.
 * A script without #! still runs, by /bin/sh, with its arguments.
 */
Test(run, a_command_that_cannot_run_is_told_as_a_shell_does)
{
	char *tmp = sp_t_tmpdir("run-exec");
	char elf[PATH_MAX + 16], noint[PATH_MAX + 16], plain[PATH_MAX + 16];
	snprintf(elf, sizeof(elf), "%s/foreign", tmp);
	snprintf(noint, sizeof(noint), "%s/nointerp", tmp);
	snprintf(plain, sizeof(plain), "%s/plain.sh", tmp);
	static const char foreign[] = "\177ELF\002\001\001\000\000\000\000\000\000\000\000\000\002\000\267\000";
	cr_assert_eq(sp_t_write_file(elf, foreign, sizeof(foreign) - 1), 0);
	const char *s1 = "#!/nonexistent/python3\nprint(1)\n", *s2 = "echo \"plain $1\"\n";
	cr_assert_eq(sp_t_write_file(noint, s1, strlen(s1)), 0);
	cr_assert_eq(sp_t_write_file(plain, s2, strlen(s2)), 0);
	cr_assert_eq(chmod(elf, 0755) | chmod(noint, 0755) | chmod(plain, 0755), 0);
	struct sp_t_result res;
	char *a1[] = { "--no-bpf", "-o", tmp, "--", elf, NULL };
	cr_expect_eq(run_stepprof(&res, a1), 126, "%s%s", res.out, res.err);
	cr_expect_not_null(strstr(res.err, "Exec format error"), "%s", res.err);
	cr_expect_eq(count_lines(res.err), 1, "%s", res.err);
	sp_t_result_free(&res);
	char *a2[] = { "--no-bpf", "-o", tmp, "--", noint, NULL };
	cr_expect_eq(run_stepprof(&res, a2), 127, "%s", res.err);
	cr_expect_null(strstr(res.err, "command not found"), "%s", res.err);
	cr_expect_not_null(strstr(res.err, "required file not found"), "%s", res.err);
	cr_expect_eq(count_lines(res.err), 1, "%s", res.err);
	sp_t_result_free(&res);
	char *a3[] = { "--no-bpf", "-o", tmp, "--", plain, "arg", NULL };
	cr_expect_eq(run_stepprof(&res, a3), 0, "%s", res.err);
	cr_expect_str_eq(res.out, "plain arg\n");
	sp_t_result_free(&res);
	sp_t_rmrf(tmp);
	free(tmp);
}

Test(run, through_sudo_the_job_runs_as_the_invoking_user)
{
	if (geteuid() != 0)
		cr_skip_test("not root: sudo's hand-over cannot be simulated");
	char *tmp = sp_t_tmpdir("run-sudo");
	cr_assert_eq(chmod(tmp, 0755), 0); /* the user gets through it to the trace directory */
	char out[PATH_MAX];
	snprintf(out, sizeof(out), "%s/trace", tmp);
	char *stepprof = io_t_abs("bin/stepprof");
	/* What sudo leaves in the environment of a root process it started for "nobody". */
	char *env[] = { "SUDO_UID=65534", "SUDO_GID=65534", "SUDO_USER=nobody", "STEPPROF_QUIET=1", NULL };
	char *argv[] = { stepprof, "run", "--no-bpf", "-o", out, "--", "/bin/sh", "-c", "id -u; id -g", NULL };
	struct sp_t_result res;
	cr_assert_eq(sp_t_run(&res, argv, env, NULL, 30), 0, "%s", res.err);
	cr_expect_str_eq(res.out, "65534\n65534\n");
	/* The directory it created belongs to that user, who must write the trace there. */
	struct stat st;
	cr_assert_eq(stat(out, &st), 0);
	cr_expect_eq(st.st_uid, 65534u);
	cr_expect_eq(st.st_gid, 65534u);
	sp_t_result_free(&res);
	free(stepprof);
	sp_t_rmrf(tmp);
	free(tmp);
}

/*
 * Through sudo, the job finds the user's HOME, USER and LOGNAME, as the user's own
 * job would (sudo -u does the same): it had root's, and a job writing ~/.cache
 * (torch, pip, matplotlib) failed on /root or wrote elsewhere than the user's.
 */
Test(run, through_sudo_the_job_has_the_users_home)
{
	if (geteuid() != 0)
		cr_skip_test("not root: sudo's hand-over cannot be simulated");
	struct passwd *pw = getpwuid(65534);
	if (!pw)
		cr_skip_test("no user 65534 in the password database");
	char want[PATH_MAX + 600];
	snprintf(want, sizeof(want), "%s %s %s\n", pw->pw_dir, pw->pw_name, pw->pw_name);
	char *tmp = sp_t_tmpdir("run-sudo-home");
	cr_assert_eq(chmod(tmp, 0755), 0); /* the user gets through it to the trace directory */
	char out[PATH_MAX];
	snprintf(out, sizeof(out), "%s/trace", tmp);
	char *stepprof = io_t_abs("bin/stepprof");
	/* What sudo leaves for a root process it started for "nobody", HOME and USER root's. */
	char *env[] = { "SUDO_UID=65534", "SUDO_GID=65534", "SUDO_USER=nobody", "HOME=/root", "USER=root",
			"LOGNAME=root",	  "STEPPROF_QUIET=1", NULL };
	char *argv[] = { stepprof, "run", "--no-bpf", "-o", out, "--", "/bin/sh", "-c",
			 "echo \"$HOME $USER $LOGNAME\"", NULL };
	struct sp_t_result res;
	cr_assert_eq(sp_t_run(&res, argv, env, NULL, 30), 0, "%s", res.err);
	cr_expect_str_eq(res.out, want);
	sp_t_result_free(&res);
	free(stepprof);
	sp_t_rmrf(tmp);
	free(tmp);
}

/*
 * Through sudo, every level of -o that stepprof run creates is the user's: with only
 * the last one given, the user could not get to it (the preload recorded nothing),
 * and "DIR/" (its last mkdir said EEXIST) was refused as not writable.
 */
Test(run, through_sudo_every_level_created_is_the_users, .timeout = 60)
{
	if (geteuid() != 0)
		cr_skip_test("not root: sudo's hand-over cannot be simulated");
	char *tmp = sp_t_tmpdir("run-sudo-levels");
	cr_assert_eq(chmod(tmp, 0755), 0);
	char data[PATH_MAX], prefix[PATH_MAX + 4];
	snprintf(data, sizeof(data), "%s/data", tmp);
	snprintf(prefix, sizeof(prefix), "%s/f", data);
	char *stepprof = io_t_abs("bin/stepprof"), *iogen = io_t_abs("tests/bin/iogen");
	struct sp_t_result res;
	char *setup[] = { iogen, "setup", data, "2", NULL };
	cr_assert_eq(sp_t_run(&res, setup, NULL, NULL, 30), 0);
	sp_t_result_free(&res);
	char *env[] = { "SUDO_UID=65534", "SUDO_GID=65534", "SUDO_USER=nobody", "STEPPROF_QUIET=1", NULL };
	/* -o as given, the levels it creates, the trace directory */
	const char *cases[][4] = { { "su2/", "su2", NULL }, { "su4/a/b", "su4", "su4/a", "su4/a/b" } };
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		char out[PATH_MAX + 16], level[PATH_MAX + 16];
		snprintf(out, sizeof(out), "%s/%s", tmp, cases[i][0]);
		char *argv[] = { stepprof, "run", "--no-bpf", "-o", out, "--", iogen, "run", data, "2", "1", "1", NULL };
		cr_expect_eq(sp_t_run(&res, argv, env, NULL, 30), 0, "-o %s: %s", cases[i][0], res.err);
		sp_t_result_free(&res);
		for (int k = 1; k < 4 && cases[i][k]; k++) {
			struct stat st;
			snprintf(level, sizeof(level), "%s/%s", tmp, cases[i][k]);
			cr_assert_eq(stat(level, &st), 0, "%s", level);
			cr_expect_eq(st.st_uid, 65534u, "-o %s: %s belongs to uid %u", cases[i][0], cases[i][k],
				     (unsigned)st.st_uid);
			cr_expect_eq(st.st_gid, 65534u, "-o %s: %s belongs to gid %u", cases[i][0], cases[i][k],
				     (unsigned)st.st_gid);
		}
		/* The job could write its trace there: its 2 open + 2 fopen. */
		struct io_recs rs;
		io_t_load_dir(out, &rs);
		cr_expect_eq(io_t_count(&rs, (struct io_filter){ .kind = "open", .prefix = prefix }, NULL), 4,
			     "-o %s: the job's opens were not recorded", cases[i][0]);
		io_t_free(&rs);
	}
	/* What was there already is left as it was. */
	struct stat st;
	cr_assert_eq(stat(tmp, &st), 0);
	cr_expect_eq(st.st_uid, 0u, "%s was given away", tmp);
	free(stepprof), free(iogen);
	sp_t_rmrf(tmp);
	free(tmp);
}

/*
 * An existing -o the job's recorder cannot use is one line and 125, before the job
 * runs: owned by someone else (the recorder writes only into a directory of its
 * own user) or not writable by the job's user (asked of the kernel as that user:
 * mode, groups, ACLs). Both ran the job unrecorded, each process saying so, and
 * ended with "trace in DIR"; through sudo, a directory owned by the user without
 * write permission was taken the same way.
 */
Test(run, an_existing_directory_the_job_cannot_use_is_refused, .timeout = 30)
{
	if (geteuid() != 0)
		cr_skip_test("not root: no other user to give the directories to");
	char *tmp = sp_t_tmpdir("run-existing");
	cr_assert_eq(chmod(tmp, 0755), 0);
	char other[PATH_MAX + 16], group[PATH_MAX + 16], ro[PATH_MAX + 16];
	snprintf(other, sizeof(other), "%s/other", tmp);
	snprintf(group, sizeof(group), "%s/group", tmp);
	snprintf(ro, sizeof(ro), "%s/readonly", tmp);
	/* (modes by chmod, not through mkdir: the umask) */
	cr_assert_eq(mkdir(other, 0700), 0); /* 65534's, writable by all */
	cr_assert_eq(chown(other, 65534, 65534), 0);
	cr_assert_eq(chmod(other, 0777), 0);
	cr_assert_eq(mkdir(group, 0700), 0); /* root's, writable by group 65534 */
	cr_assert_eq(chown(group, 0, 65534), 0);
	cr_assert_eq(chmod(group, 0770), 0);
	cr_assert_eq(mkdir(ro, 0700), 0); /* 65534's, read and search only */
	cr_assert_eq(chown(ro, 65534, 65534), 0);
	cr_assert_eq(chmod(ro, 0500), 0);
	char *stepprof = io_t_abs("bin/stepprof");
	char *root[] = { "STEPPROF_QUIET=1", NULL };
	char *sudo[] = { "SUDO_UID=65534", "SUDO_GID=65534", "SUDO_USER=nobody", "STEPPROF_QUIET=1", NULL };
	struct {
		char *dir, **env;
		const char *says;
	} cases[] = { { other, root, "not owned by uid 0" },
		      { group, sudo, "not owned by uid 65534" },
		      { ro, sudo, "not writable" } };
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		char *argv[] = { stepprof, "run", "--no-bpf", "-o", cases[i].dir, "--", "/bin/sh", "-c", "echo ran", NULL };
		struct sp_t_result res;
		cr_expect_eq(sp_t_run(&res, argv, cases[i].env, NULL, 30), 125, "case %zu: %s", i, res.err);
		cr_expect_str_eq(res.out, "", "case %zu: the job ran, unrecorded", i);
		cr_expect_not_null(strstr(res.err, cases[i].says), "case %zu: %s", i, res.err);
		cr_expect_eq(count_lines(res.err), 1, "case %zu: %s", i, res.err);
		sp_t_result_free(&res);
	}
	free(stepprof);
	sp_t_rmrf(tmp);
	free(tmp);
}

/* Through sudo with the collector: its file, written by root, belongs to the user who must analyze it. */
Test(run, through_sudo_the_collectors_file_is_the_users, .timeout = 60)
{
	const char *why;
	if (!io_t_bpf_possible(&why))
		cr_skip_test("no collector here: %s", why);
	char *tmp = sp_t_tmpdir("run-sudo-bpf");
	cr_assert_eq(chmod(tmp, 0755), 0);
	char out[PATH_MAX];
	snprintf(out, sizeof(out), "%s/trace", tmp);
	char *stepprof = io_t_abs("bin/stepprof");
	char *env[] = { "SUDO_UID=65534", "SUDO_GID=65534", "SUDO_USER=nobody", "STEPPROF_QUIET=1", NULL };
	char *argv[] = { stepprof, "run", "--bpf", "-o", out, "--", "/bin/cat", "/etc/hostname", NULL };
	struct sp_t_result res;
	cr_assert_eq(sp_t_run(&res, argv, env, NULL, 60), 0, "%s", res.err);
	int fallback = strstr(res.err, "eBPF collector unavailable") != NULL;
	sp_t_result_free(&res);
	if (fallback) {
		free(stepprof);
		sp_t_rmrf(tmp);
		free(tmp);
		cr_skip_test("BPF refused here");
	}
	DIR *d = opendir(out);
	cr_assert_not_null(d);
	int files = 0;
	for (struct dirent *e; (e = readdir(d));) {
		if (e->d_name[0] == '.')
			continue;
		char f[2 * PATH_MAX];
		snprintf(f, sizeof(f), "%s/%s", out, e->d_name);
		struct stat st;
		cr_assert_eq(stat(f, &st), 0);
		cr_expect_eq(st.st_uid, 65534u, "%s belongs to uid %u", f, (unsigned)st.st_uid);
		files++;
	}
	closedir(d);
	cr_expect_geq(files, 1, "the collector wrote no file in %s", out);
	free(stepprof);
	sp_t_rmrf(tmp);
	free(tmp);
}

/*
 * A copy of stepprof in TMP/bin, with collector (a shell script) as the
 * stepprof-bpf beside it, or none when NULL: a machine without the collector, or
 * one whose collector behaves as the test needs. Returns the copy's path; the
 * copy finds libstepprof.so through STEPPROF_LIB, written into libenv.
 */
static char *stepprof_copy(const char *tmp, const char *collector, char *libenv, size_t libenv_len)
{
	char bin[PATH_MAX], copy[PATH_MAX + 16], coll[PATH_MAX + 16];
	snprintf(bin, sizeof(bin), "%s/bin", tmp);
	snprintf(copy, sizeof(copy), "%s/stepprof", bin);
	snprintf(coll, sizeof(coll), "%s/stepprof-bpf", bin);
	char *stepprof = io_t_abs("bin/stepprof"), *lib = io_t_abs("lib/libstepprof.so");
	cr_assert_eq(mkdir(bin, 0755), 0);
	size_t len;
	char *exe = sp_t_read_file(stepprof, &len);
	cr_assert_not_null(exe);
	cr_assert_eq(sp_t_write_file(copy, exe, len), 0);
	free(exe);
	cr_assert_eq(chmod(copy, 0755), 0);
	if (collector) {
		cr_assert_eq(sp_t_write_file(coll, collector, strlen(collector)), 0);
		cr_assert_eq(chmod(coll, 0755), 0);
	}
	snprintf(libenv, libenv_len, "STEPPROF_LIB=%s", lib);
	free(stepprof), free(lib);
	return strdup(copy);
}

/*
 * When the collector cannot run, the line says the libc wrappers capture input:
 * they must, even when the job's environment already said STEPPROF_IO=bpf
 * (exported by hand, or left over from another launcher). A copy of stepprof
 * with no stepprof-bpf beside it stands for a machine without the collector.
 */
Test(run, without_the_collector_the_wrappers_capture_even_if_told_bpf, .timeout = 60)
{
	char *tmp = sp_t_tmpdir("run-nobpf");
	char data[PATH_MAX], out[PATH_MAX], prefix[PATH_MAX + 4], libenv[PATH_MAX + 16];
	snprintf(data, sizeof(data), "%s/data", tmp);
	snprintf(out, sizeof(out), "%s/trace", tmp);
	snprintf(prefix, sizeof(prefix), "%s/f", data);
	char *iogen = io_t_abs("tests/bin/iogen"), *copy = stepprof_copy(tmp, NULL, libenv, sizeof(libenv));
	struct sp_t_result res;
	char *setup[] = { iogen, "setup", data, "4", NULL };
	cr_assert_eq(sp_t_run(&res, setup, NULL, NULL, 30), 0);
	sp_t_result_free(&res);

	char *env[] = { libenv, "STEPPROF_IO=bpf", "STEPPROF_QUIET=1", NULL };
	char *argv[] = { copy, "run", "--bpf", "-o", out, "--", iogen, "run", data, "4", "1", "1", NULL };
	cr_assert_eq(sp_t_run(&res, argv, env, NULL, 60), 0, "%s", res.err);
	cr_expect_not_null(strstr(res.err, "eBPF collector unavailable"), "%s", res.err);
	cr_expect_eq(count_lines(res.err), 1, "%s", res.err);
	sp_t_result_free(&res);
	struct io_recs rs;
	io_t_load_dir(out, &rs);
	cr_expect_eq(io_t_count(&rs, (struct io_filter){ .kind = "open", .prefix = prefix, .source = "libc" }, NULL), 8,
		     "4 files opened with open and fopen, captured by the libc wrappers as the line says");
	io_t_free(&rs);
	free(iogen), free(copy);
	sp_t_rmrf(tmp);
	free(tmp);
}

/*
 * stepprof run --bpf -o TMP/trace -- /bin/sh -c 'exit 3', on a copy whose collector
 * takes its time to attach: it says so through the FIFO TMP/attaching, then waits
 * until stopped (SIGTERM), which it records in TMP/collector-stopped. Spawned with
 * attr and, when tty is not NULL, that terminal as stdin (after POSIX_SPAWN_SETSID:
 * its controlling terminal), stderr into TMP/err. Returns once the collector is
 * attaching: the job child is forked and waits to be released.
 */
static pid_t run_during_a_slow_attach(const char *tmp, posix_spawnattr_t *attr, const char *tty)
{
	char script[4 * PATH_MAX], fifo[PATH_MAX + 16], out[PATH_MAX + 16], err[PATH_MAX + 16], libenv[PATH_MAX + 16];
	snprintf(script, sizeof(script),
		 "#!/bin/sh\n"
		 "trap 'echo stopped > \"%s/collector-stopped\"; kill $! 2>/dev/null; exit 0' TERM\n"
		 "echo attaching > \"%s/attaching\"\n"
		 "sleep 60 & wait $!\n",
		 tmp, tmp);
	snprintf(fifo, sizeof(fifo), "%s/attaching", tmp);
	snprintf(out, sizeof(out), "%s/trace", tmp);
	snprintf(err, sizeof(err), "%s/err", tmp);
	cr_assert_eq(mkfifo(fifo, 0600), 0);
	char *copy = stepprof_copy(tmp, script, libenv, sizeof(libenv));
	char *argv[] = { copy, "run", "--bpf", "-o", out, "--", "/bin/sh", "-c", "exit 3", NULL };
	setenv("STEPPROF_LIB", strchr(libenv, '=') + 1, 1); /* this test's own process */
	setenv("STEPPROF_QUIET", "1", 1);
	posix_spawn_file_actions_t fa;
	posix_spawn_file_actions_init(&fa);
	posix_spawn_file_actions_addopen(&fa, 2, err, O_WRONLY | O_CREAT | O_TRUNC, 0600);
	if (tty)
		posix_spawn_file_actions_addopen(&fa, 0, tty, O_RDWR, 0);
	pid_t pid;
	cr_assert_eq(posix_spawn(&pid, copy, &fa, attr, argv, environ), 0);
	posix_spawn_file_actions_destroy(&fa);
	free(copy);
	/* Non-blocking: a FIFO nobody has opened yet polls as empty, not as hung up. */
	int fd = open(fifo, O_RDONLY | O_NONBLOCK);
	cr_assert_geq(fd, 0);
	struct pollfd p = { fd, POLLIN, 0 };
	cr_assert_eq(poll(&p, 1, 10000), 1, "the collector was not started within 10 s");
	char buf[32] = "";
	cr_assert_gt(read(fd, buf, sizeof(buf) - 1), 0);
	cr_assert_eq(strncmp(buf, "attaching", 9), 0, "%s", buf);
	close(fd);
	return pid;
}

/* ... and once stepprof run has had sig (sent at t0): the job died of it, at once, and so did stepprof run after
 * stopping the collector. */
static void expect_ended_by(const char *tmp, pid_t pid, int sig, time_t t0)
{
	int st = 0;
	cr_assert_eq(waitpid(pid, &st, 0), pid);
	cr_expect(WIFSIGNALED(st) && WTERMSIG(st) == sig, "stepprof run %s %d: the job did not die of signal %d",
		  WIFSIGNALED(st) ? "died of signal" : "exited", WIFSIGNALED(st) ? WTERMSIG(st) : WEXITSTATUS(st), sig);
	cr_expect_lt(time(NULL) - t0, 10, "it took the 30 s attach timeout");
	char f[PATH_MAX + 32];
	snprintf(f, sizeof(f), "%s/collector-stopped", tmp);
	cr_expect_eq(access(f, F_OK), 0, "the collector was not stopped (SIGTERM)");
	snprintf(f, sizeof(f), "%s/err", tmp);
	size_t len;
	char *err = sp_t_read_file(f, &len);
	cr_expect(err && !strstr(err, "unavailable"), "a line about a collector of a job already dead: %s", err);
	free(err);
}

/*
 * A signal sent to stepprof run while the collector attaches (the job child waits on
 * its pipe) is the job's: it must not be dropped there, by our handler inherited by a
 * child that does not know the job's pid, leaving the job to run to its end.
 */
Test(run, a_signal_during_the_attach_ends_the_job, .timeout = 60)
{
	char *tmp = sp_t_tmpdir("run-attach-sig");
	pid_t pid = run_during_a_slow_attach(tmp, NULL, NULL);
	time_t t0 = time(NULL);
	cr_assert_eq(kill(pid, SIGTERM), 0);
	expect_ended_by(tmp, pid, SIGTERM, t0);
	sp_t_rmrf(tmp);
	free(tmp);
}

/* A Ctrl-C at the terminal during the attach: it reaches the job child itself (not forwarded), which must die of it. */
Test(run, a_ctrl_c_during_the_attach_ends_the_job, .timeout = 60)
{
	char *tmp = sp_t_tmpdir("run-attach-tty");
	int m = posix_openpt(O_RDWR | O_NOCTTY);
	cr_assert_geq(m, 0);
	cr_assert_eq(grantpt(m), 0);
	cr_assert_eq(unlockpt(m), 0);
	char tty[PATH_MAX];
	cr_assert_eq(ptsname_r(m, tty, sizeof(tty)), 0);
	struct termios t;
	cr_assert_eq(tcgetattr(m, &t), 0);
	t.c_lflag |= ISIG;
	t.c_cc[VINTR] = 3;
	cr_assert_eq(tcsetattr(m, TCSANOW, &t), 0);
	/* A session of its own, the terminal its controlling one: stepprof run's group is the foreground. */
	posix_spawnattr_t attr;
	posix_spawnattr_init(&attr);
	posix_spawnattr_setflags(&attr, POSIX_SPAWN_SETSID);
	pid_t pid = run_during_a_slow_attach(tmp, &attr, tty);
	posix_spawnattr_destroy(&attr);
	cr_assert_eq(tcgetpgrp(m), pid, "stepprof run's group is not the terminal's foreground");
	time_t t0 = time(NULL);
	cr_assert_eq(write(m, "\003", 1), 1);
	expect_ended_by(tmp, pid, SIGINT, t0);
	close(m);
	sp_t_rmrf(tmp);
	free(tmp);
}

/*
 * nohup stepprof run ...: a signal stepprof run was started with ignored stays
 * ignored, in stepprof run (not forwarded) and in the job (not reset to the default).
 */
Test(run, a_signal_inherited_ignored_stays_ignored, .timeout = 30)
{
	char *tmp = sp_t_tmpdir("run-nohup");
	char *stepprof = io_t_abs("bin/stepprof");
	/* The job says what it ignores, then waits for a line: the test's go after the SIGHUP. */
	char *argv[] = { stepprof, "run", "--no-bpf", "-o", tmp, "--", "/bin/sh", "-c",
			 "grep ^SigIgn: /proc/$$/status; read x; exit 5", NULL };
	int in[2], out[2];
	cr_assert_eq(pipe2(in, O_CLOEXEC), 0);
	cr_assert_eq(pipe2(out, O_CLOEXEC), 0);
	pid_t pid = fork();
	cr_assert_geq(pid, 0);
	if (pid == 0) {
		/* as nohup leaves SIGHUP, and a non-interactive shell's `&` SIGINT */
		signal(SIGHUP, SIG_IGN);
		signal(SIGINT, SIG_IGN);
		dup2(in[0], 0);
		dup2(out[1], 1);
		setenv("STEPPROF_QUIET", "1", 1);
		execv(stepprof, argv);
		_exit(127);
	}
	close(in[0]);
	close(out[1]);
	FILE *f = fdopen(out[0], "r");
	cr_assert_not_null(f);
	unsigned long long ign = 0;
	cr_assert_eq(fscanf(f, "SigIgn: %llx", &ign), 1, "the job did not start");
	cr_expect(ign & (1ull << (SIGHUP - 1)), "SIGHUP is no longer ignored in the job (SigIgn %llx)", ign);
	cr_expect(ign & (1ull << (SIGINT - 1)), "SIGINT is no longer ignored in the job (SigIgn %llx)", ign);
	cr_assert_eq(kill(pid, SIGHUP), 0);
	signal(SIGPIPE, SIG_IGN); /* the job may be gone: a failed write is reported below */
	cr_expect_eq(write(in[1], "\n", 1), 1, "the job died of the SIGHUP");
	close(in[1]);
	int st = 0;
	cr_assert_eq(waitpid(pid, &st, 0), pid);
	cr_expect(WIFEXITED(st), "stepprof run was killed by signal %d", WIFSIGNALED(st) ? WTERMSIG(st) : 0);
	cr_expect_eq(WEXITSTATUS(st), 5, "status %d, not the job's own", WEXITSTATUS(st));
	fclose(f);
	free(stepprof);
	sp_t_rmrf(tmp);
	free(tmp);
}

/*
 * --no-bpf captures input with the libc wrappers, as its usage says: an inherited
 * STEPPROF_IO=bpf (exported by hand, left by another launcher) made them stand
 * down with no collector there, and nothing at all was captured, without a word.
 */
Test(run, with_no_bpf_the_wrappers_capture_even_if_told_bpf, .timeout = 60)
{
	char *tmp = sp_t_tmpdir("run-nobpf-io");
	char data[PATH_MAX], out[PATH_MAX], prefix[PATH_MAX + 4];
	snprintf(data, sizeof(data), "%s/data", tmp);
	snprintf(out, sizeof(out), "%s/trace", tmp);
	snprintf(prefix, sizeof(prefix), "%s/f", data);
	char *iogen = io_t_abs("tests/bin/iogen"), *stepprof = io_t_abs("bin/stepprof");
	struct sp_t_result res;
	char *setup[] = { iogen, "setup", data, "4", NULL };
	cr_assert_eq(sp_t_run(&res, setup, NULL, NULL, 30), 0);
	sp_t_result_free(&res);
	char *env[] = { "STEPPROF_IO=bpf", "STEPPROF_QUIET=1", NULL };
	char *argv[] = { stepprof, "run", "--no-bpf", "-o", out, "--", iogen, "run", data, "4", "1", "1", NULL };
	cr_assert_eq(sp_t_run(&res, argv, env, NULL, 30), 0, "%s", res.err);
	sp_t_result_free(&res);
	struct io_recs rs;
	io_t_load_dir(out, &rs);
	long n = io_t_count(&rs, (struct io_filter){ .kind = "open", .prefix = prefix, .source = "libc" }, NULL);
	cr_expect_eq(n, 8, "%ld opens captured of 8 (open and fopen of 4 files)", n);
	io_t_free(&rs);
	free(iogen), free(stepprof);
	sp_t_rmrf(tmp);
	free(tmp);
}

/* stepprof run --no-bpf -o DIR -- /bin/sh -c script, spawned with fa and attr (NULL: none): its wait status. */
static int run_sh_spawned(const char *dir, const char *script, const posix_spawn_file_actions_t *fa,
			  const posix_spawnattr_t *attr)
{
	char *stepprof = io_t_abs("bin/stepprof");
	/* --force: run again into one directory (the status is the test, not the traces) */
	char *argv[] = { stepprof, "run", "--no-bpf", "--force", "-o", (char *)dir, "--", "/bin/sh", "-c", (char *)script,
			 NULL };
	pid_t pid;
	cr_assert_eq(posix_spawn(&pid, stepprof, fa, attr, argv, environ), 0);
	int st = 0;
	cr_assert_eq(waitpid(pid, &st, 0), pid);
	free(stepprof);
	return st;
}

/* ... its stderr a pipe nobody reads. */
static int run_with_stderr_closed(const char *dir, const char *script)
{
	int p[2];
	cr_assert_eq(pipe2(p, O_CLOEXEC), 0);
	close(p[0]);
	posix_spawn_file_actions_t fa;
	posix_spawn_file_actions_init(&fa);
	posix_spawn_file_actions_adddup2(&fa, p[1], 2);
	posix_spawn_file_actions_addopen(&fa, 1, "/dev/null", O_WRONLY, 0);
	posix_spawnattr_t attr; /* SIGPIPE as a shell leaves it, whatever the test runner does */
	sigset_t def;
	sigemptyset(&def);
	sigaddset(&def, SIGPIPE);
	posix_spawnattr_init(&attr);
	posix_spawnattr_setsigdefault(&attr, &def);
	posix_spawnattr_setflags(&attr, POSIX_SPAWN_SETSIGDEF);
	unsetenv("STEPPROF_QUIET"); /* the closing line is the write that failed */
	int st = run_sh_spawned(dir, script, &fa, &attr);
	posix_spawn_file_actions_destroy(&fa);
	posix_spawnattr_destroy(&attr);
	close(p[1]);
	return st;
}

/*
 * `stepprof run ... 2>&1 | head`: our closing line to a pipe closed by then killed
 * stepprof run with SIGPIPE (141), hiding the job's status. The job itself still
 * dies of a SIGPIPE of its own, as it would without stepprof run.
 */
Test(run, a_closed_stderr_does_not_change_the_exit_status, .timeout = 30)
{
	char *tmp = sp_t_tmpdir("run-epipe");
	int st = run_with_stderr_closed(tmp, "exit 7");
	cr_expect(WIFEXITED(st) && WEXITSTATUS(st) == 7, "status %#x", st);
	st = run_with_stderr_closed(tmp, "echo job >&2; exit 7");
	cr_expect(WIFSIGNALED(st) && WTERMSIG(st) == SIGPIPE, "the job did not die of its own SIGPIPE: status %#x", st);
	sp_t_rmrf(tmp);
	free(tmp);
}

/*
 * A collector that never says "ready" (stopped, stuck loading) is killed after the
 * attach timeout (STEPPROF_ATTACH_S, 1 s here instead of 30), and the job runs
 * with the libc wrappers: one line says so. The killed collector was left unreaped,
 * and wait_job then also said it had "exited early (status 137)".
 */
Test(run, a_collector_that_never_attaches_is_one_line, .timeout = 30)
{
	char *tmp = sp_t_tmpdir("run-attach-timeout");
	char out[PATH_MAX + 16], libenv[PATH_MAX + 16];
	snprintf(out, sizeof(out), "%s/trace", tmp);
	char *copy = stepprof_copy(tmp, "#!/bin/sh\nexec sleep 60\n", libenv, sizeof(libenv));
	char *env[] = { libenv, "STEPPROF_ATTACH_S=1", "STEPPROF_QUIET=1", NULL };
	/* The job runs a while: a dead collector still counted as running is noticed within 100 ms. */
	char *argv[] = { copy, "run", "--bpf", "-o", out, "--", "/bin/sh", "-c", "sleep 0.5; exit 3", NULL };
	struct sp_t_result res;
	time_t t0 = time(NULL);
	cr_assert_eq(sp_t_run(&res, argv, env, NULL, 25), 3, "%s", res.err);
	cr_expect_lt(time(NULL) - t0, 10, "STEPPROF_ATTACH_S=1 was not used");
	cr_expect_not_null(strstr(res.err, "eBPF collector unavailable: the collector did not attach within 1 s"), "%s",
			   res.err);
	cr_expect_null(strstr(res.err, "exited early"), "%s", res.err);
	cr_expect_eq(count_lines(res.err), 1, "%s", res.err);
	sp_t_result_free(&res);
	free(copy);
	sp_t_rmrf(tmp);
	free(tmp);
}

/*
 * ... with RLIMIT_CORE 0 inherited; with cores, the hard limit instead, in DIR as
 * its cwd (where a core_pattern "core" puts the job's).
 */
static int run_spawned(const char *dir, const char *script, int cores)
{
	struct rlimit old, lim;
	getrlimit(RLIMIT_CORE, &old);
	lim.rlim_cur = cores ? old.rlim_max : 0;
	lim.rlim_max = old.rlim_max;
	setrlimit(RLIMIT_CORE, &lim);
	setenv("STEPPROF_QUIET", "1", 1);
	posix_spawn_file_actions_t fa;
	posix_spawn_file_actions_init(&fa);
	posix_spawn_file_actions_addchdir_np(&fa, dir);
	int st = run_sh_spawned(dir, script, &fa, NULL);
	posix_spawn_file_actions_destroy(&fa);
	setrlimit(RLIMIT_CORE, &old);
	return st;
}

/*
 * A job killed by a signal: stepprof run dies of the same signal, as its parent
 * would have seen of the job itself. It exited 128+N: bash went on with a script
 * after a Ctrl-C that a foreground command died of (it stops only when the command
 * died of SIGINT), printed no "Segmentation fault", and Slurm recorded an exit code.
 */
Test(run, a_job_killed_by_a_signal_kills_stepprof_run_alike, .timeout = 30)
{
	char *tmp = sp_t_tmpdir("run-killed");
	const int sigs[] = { SIGINT, SIGTERM, SIGKILL, SIGSEGV };
	for (size_t i = 0; i < sizeof(sigs) / sizeof(sigs[0]); i++) {
		char script[64];
		snprintf(script, sizeof(script), "kill -%d $$; sleep 5", sigs[i]);
		int st = run_spawned(tmp, script, 0);
		cr_expect(WIFSIGNALED(st) && WTERMSIG(st) == sigs[i], "signal %d: stepprof run %s %d", sigs[i],
			  WIFSIGNALED(st) ? "was killed by signal" : "exited", WIFSIGNALED(st) ? WTERMSIG(st) : WEXITSTATUS(st));
	}
	/* Cores allowed: the job dumps its own, stepprof run none (it would be of no use, and could replace the job's). */
	int st = run_spawned(tmp, "kill -SEGV $$", 1);
	cr_expect(WIFSIGNALED(st) && WTERMSIG(st) == SIGSEGV, "status %#x", st);
	cr_expect(!WCOREDUMP(st), "stepprof run dumped a core of its own");
	/* An exit, 130 included, stays an exit. */
	st = run_spawned(tmp, "exit 130", 0);
	cr_expect(WIFEXITED(st) && WEXITSTATUS(st) == 130, "status %#x", st);
	sp_t_rmrf(tmp);
	free(tmp);
}

/*
 * stepprof run --no-bpf -o DIR -- CMD..., started with SIGCHLD ignored (and CMD's
 * stdout in *job_out, when not NULL): its wait status.
 */
static int run_with_sigchld_ignored(const char *dir, char *const *cmd, char *job_out, size_t len)
{
	char *stepprof = io_t_abs("bin/stepprof");
	/* --force: run again into one directory (the status is the test, not the traces) */
	char *argv[16] = { stepprof, "run", "--no-bpf", "--force", "-o", (char *)dir, "--" };
	for (int k = 0; cmd[k] && k < 8; k++)
		argv[7 + k] = cmd[k];
	int out[2];
	cr_assert_eq(pipe2(out, O_CLOEXEC), 0);
	pid_t pid = fork();
	cr_assert_geq(pid, 0);
	if (pid == 0) {
		signal(SIGCHLD, SIG_IGN);
		dup2(out[1], 1);
		setenv("STEPPROF_QUIET", "1", 1);
		execv(stepprof, argv);
		_exit(127);
	}
	close(out[1]);
	size_t n = 0;
	ssize_t r;
	char buf[256];
	while ((r = read(out[0], buf, sizeof(buf))) > 0)
		for (ssize_t k = 0; k < r && job_out && n + 1 < len; k++)
			job_out[n++] = buf[k];
	if (job_out)
		job_out[n] = 0;
	close(out[0]);
	int st = 0;
	cr_assert_eq(waitpid(pid, &st, 0), pid);
	free(stepprof);
	return st;
}

/*
 * Started with SIGCHLD ignored (a launcher that leaves it so: its children are
 * reaped by the kernel), stepprof run must still get the job's status: otherwise
 * waitpid says ECHILD, and every job "exited 0". The job still gets SIGCHLD
 * ignored, as it was given.
 */
Test(run, a_sigchld_inherited_ignored_keeps_the_status, .timeout = 30)
{
	char *tmp = sp_t_tmpdir("run-sigchld");
	char *exit7[] = { "/bin/sh", "-c", "exit 7", NULL };
	int st = run_with_sigchld_ignored(tmp, exit7, NULL, 0);
	cr_expect(WIFEXITED(st) && WEXITSTATUS(st) == 7, "status %#x, not the job's exit 7", st);
	/* grep itself, not a shell (dash resets SIGCHLD) */
	char *grep[] = { "/bin/grep", "^SigIgn:", "/proc/self/status", NULL };
	char out[256];
	st = run_with_sigchld_ignored(tmp, grep, out, sizeof(out));
	cr_expect(WIFEXITED(st) && WEXITSTATUS(st) == 0, "status %#x", st);
	unsigned long long ign = 0;
	cr_expect_eq(sscanf(out, "SigIgn: %llx", &ign), 1, "the job said %s", out);
	cr_expect(ign & (1ull << (SIGCHLD - 1)), "SIGCHLD is no longer ignored in the job (SigIgn %llx)", ign);
	sp_t_rmrf(tmp);
	free(tmp);
}

/* pid's state letter (/proc/PID/stat), 0 when gone. */
static char state_of(pid_t pid)
{
	char path[64], buf[512];
	snprintf(path, sizeof(path), "/proc/%d/stat", (int)pid);
	FILE *f = fopen(path, "r");
	if (!f)
		return 0;
	size_t n = fread(buf, 1, sizeof(buf) - 1, f);
	fclose(f);
	buf[n] = 0;
	const char *p = strrchr(buf, ')');
	return p ? p[2] : 0;
}

/* Is pid gone: no such process, or a zombie nobody has reaped yet? */
static int gone(pid_t pid)
{
	char c = state_of(pid);
	return !c || c == 'Z' || c == 'X';
}

/* The pid a job wrote into pidf (written whole: by a rename), waited for up to 10 s. */
static pid_t job_pid_from(const char *pidf)
{
	char *txt = NULL;
	size_t len;
	for (int i = 0; i < 1000 && !(txt = sp_t_read_file(pidf, &len)); i++) {
		struct timespec ts = { 0, 10 * 1000000L };
		nanosleep(&ts, NULL);
	}
	cr_assert_not_null(txt, "the job did not start within 10 s");
	pid_t pid = atoi(txt);
	free(txt);
	cr_assert_gt(pid, 0);
	return pid;
}

/*
 * A copy of stepprof (stepprof_copy) whose collector is ready once TMP/go exists,
 * having created TMP/attaching, and records its SIGTERM in TMP/collector-stopped.
 * Sets STEPPROF_LIB for the copy and STEPPROF_QUIET in this test's environment.
 */
static char *copy_with_a_held_collector(const char *tmp)
{
	char script[4 * PATH_MAX], libenv[PATH_MAX + 16];
	snprintf(script, sizeof(script),
		 "#!/bin/sh\n"
		 "trap 'echo stopped > \"%s/collector-stopped\"; kill $! 2>/dev/null; exit 0' TERM\n"
		 "touch \"%s/attaching\"\n"
		 "while [ ! -e \"%s/go\" ]; do sleep 0.05; done\n"
		 "echo ready\n"
		 "sleep 60 & wait $!\n",
		 tmp, tmp, tmp);
	char *copy = stepprof_copy(tmp, script, libenv, sizeof(libenv));
	setenv("STEPPROF_LIB", strchr(libenv, '=') + 1, 1);
	setenv("STEPPROF_QUIET", "1", 1);
	return copy;
}

/*
 * stepprof run killed (SIGKILL, which it cannot forward: kill -9, timeout
 * --foreground -s KILL) takes its job along, as killing the job itself would have,
 * and its collector flushes and leaves. Both were left running, orphaned: the job
 * to its end, the collector for as long as it did.
 */
Test(run, stepprof_run_killed_leaves_no_orphan, .timeout = 60)
{
	char *tmp = sp_t_tmpdir("run-orphan");
	char out[PATH_MAX + 16], pidf[PATH_MAX + 16], stopped[PATH_MAX + 32], go[PATH_MAX + 16];
	snprintf(out, sizeof(out), "%s/trace", tmp);
	snprintf(pidf, sizeof(pidf), "%s/job.pid", tmp);
	snprintf(stopped, sizeof(stopped), "%s/collector-stopped", tmp);
	snprintf(go, sizeof(go), "%s/go", tmp);
	cr_assert_eq(sp_t_write_file(go, "", 0), 0); /* it attaches at once */
	char *copy = copy_with_a_held_collector(tmp);
	char job[4 * PATH_MAX];
	snprintf(job, sizeof(job), "echo $$ > '%s.tmp'; mv '%s.tmp' '%s'; exec sleep 30", pidf, pidf, pidf);
	char *argv[] = { copy, "run", "--bpf", "-o", out, "--", "/bin/sh", "-c", job, NULL };
	pid_t pid;
	cr_assert_eq(posix_spawn(&pid, copy, NULL, NULL, argv, environ), 0);
	pid_t job_pid = job_pid_from(pidf);
	pid_t coll = child_named(pid, "stepprof-bpf");
	cr_assert_eq(kill(pid, SIGKILL), 0);
	cr_assert_eq(waitpid(pid, NULL, 0), pid);
	int i = 0;
	for (; i < 300 && (!gone(job_pid) || access(stopped, F_OK) != 0); i++) {
		struct timespec ts = { 0, 10 * 1000000L };
		nanosleep(&ts, NULL);
	}
	cr_expect(gone(job_pid), "the job (pid %d) runs on after stepprof run was killed", (int)job_pid);
	cr_expect_eq(access(stopped, F_OK), 0, "the collector was not stopped");
	if (!gone(job_pid))
		kill(job_pid, SIGKILL);
	if (coll > 0)
		kill(coll, SIGKILL); /* its sleep goes at its 60 s */
	free(copy);
	sp_t_rmrf(tmp);
	free(tmp);
}

/* Wait up to 5 s for pid's state to be (want) or not to be (!want) 'T'; the last state seen. */
static char wait_stopped(pid_t pid, int want)
{
	char c = state_of(pid);
	for (int i = 0; i < 500 && (c == 'T') != want; i++) {
		struct timespec ts = { 0, 10 * 1000000L };
		nanosleep(&ts, NULL);
		c = state_of(pid);
	}
	return c;
}

/*
 * stepprof run --no-bpf -o TMP/trace -- /bin/sh -c SCRIPT, in a process group of
 * its own (not orphaned: the test is its parent, in the same session); SCRIPT may
 * use $P, a file where the job writes its pid. Returns stepprof run's pid, the
 * job's in *job once it has written it.
 */
static pid_t run_in_a_group(const char *tmp, const char *script, pid_t *job)
{
	char *stepprof = io_t_abs("bin/stepprof");
	char out[PATH_MAX + 16], pidf[PATH_MAX + 16], sh[4 * PATH_MAX];
	snprintf(out, sizeof(out), "%s/trace", tmp);
	snprintf(pidf, sizeof(pidf), "%s/job.pid", tmp);
	snprintf(sh, sizeof(sh), "P='%s'; echo $$ > \"$P.tmp\"; mv \"$P.tmp\" \"$P\"; %s", pidf, script);
	char *argv[] = { stepprof, "run", "--no-bpf", "-o", out, "--", "/bin/sh", "-c", sh, NULL };
	posix_spawnattr_t attr;
	posix_spawnattr_init(&attr);
	posix_spawnattr_setpgroup(&attr, 0);
	posix_spawnattr_setflags(&attr, POSIX_SPAWN_SETPGROUP);
	setenv("STEPPROF_QUIET", "1", 1);
	pid_t pid;
	cr_assert_eq(posix_spawn(&pid, stepprof, NULL, &attr, argv, environ), 0);
	posix_spawnattr_destroy(&attr);
	*job = job_pid_from(pidf);
	free(stepprof);
	return pid;
}

/* pid's end (its wait status), waited for up to secs seconds; -1 (pid and job killed) when it did not come. */
static int end_within(pid_t pid, pid_t job, int secs)
{
	int st = 0;
	for (int i = 0; i < secs * 100; i++) {
		pid_t r = waitpid(pid, &st, WNOHANG);
		if (r == pid && (WIFEXITED(st) || WIFSIGNALED(st)))
			return st;
		struct timespec ts = { 0, 10 * 1000000L };
		nanosleep(&ts, NULL);
	}
	kill(job, SIGKILL);
	kill(pid, SIGKILL);
	waitpid(pid, &st, 0);
	return -1;
}

/* The job stops, and stepprof run after it, of sig; then stepprof run (alone) is continued. */
static void expect_stopped_alike(pid_t pid, pid_t job, int sig)
{
	cr_expect_eq(wait_stopped(job, 1), 'T', "the job did not stop");
	cr_expect_eq(wait_stopped(pid, 1), 'T', "stepprof run did not stop with its job");
	int st = 0;
	if (waitpid(pid, &st, WUNTRACED | WNOHANG) == pid)
		cr_expect(WIFSTOPPED(st) && WSTOPSIG(st) == sig, "status %#x, not stopped by %d", st, sig);
	cr_assert_eq(kill(pid, SIGCONT), 0);
}

/*
 * A job that stops (it stops itself, or a SIGSTOP is sent to its pid) stops
 * stepprof run alike, so that the shell sees it stopped ("Stopped", fg, bg);
 * continued, stepprof run continues the job. Left running, stepprof run would
 * keep the shell waiting, in the foreground, on a job that never goes on.
 */
Test(run, a_job_that_stops_stops_stepprof_run, .timeout = 60)
{
	char *tmp = sp_t_tmpdir("run-stop");
	pid_t job;
	pid_t pid = run_in_a_group(tmp, "kill -STOP $$; exit 4", &job);
	expect_stopped_alike(pid, job, SIGSTOP);
	/* (continued alone: the job goes on too, and ends) */
	int st = end_within(pid, job, 10);
	cr_expect(st != -1 && WIFEXITED(st) && WEXITSTATUS(st) == 4, "status %#x, not the job's 4 (-1: still there)", st);
	sp_t_rmrf(tmp);
	free(tmp);
}

/*
 * A SIGTSTP sent to stepprof run (kill -TSTP, not the terminal's Ctrl-Z, which
 * reaches the job itself) stops the job, and then stepprof run, not stepprof
 * run alone with the job running on.
 */
Test(run, a_sigtstp_sent_stops_the_job, .timeout = 60)
{
	char *tmp = sp_t_tmpdir("run-tstp");
	pid_t job;
	pid_t pid = run_in_a_group(tmp, "exec sleep 30", &job);
	cr_assert_eq(kill(pid, SIGTSTP), 0);
	expect_stopped_alike(pid, job, SIGTSTP);
	cr_expect_neq(wait_stopped(job, 0), 'T', "the job was not continued with stepprof run");
	cr_assert_eq(kill(pid, SIGTERM), 0);
	int st = end_within(pid, job, 10);
	cr_expect(st != -1 && WIFSIGNALED(st) && WTERMSIG(st) == SIGTERM, "status %#x (-1: still there)", st);
	sp_t_rmrf(tmp);
	free(tmp);
}

/*
 * A SIGTSTP while the collector attaches stops the job child before its exec:
 * stepprof run, which waited for that exec, stops too once the collector is
 * ready, and continued, continues the job, which runs and ends. (Forwarding
 * SIGTSTP and following the job's stops must not leave stepprof run blocked on
 * an exec that a stopped child never makes.)
 */
Test(run, a_sigtstp_during_the_attach_stops_both, .timeout = 60)
{
	char *tmp = sp_t_tmpdir("run-attach-tstp");
	char out[PATH_MAX + 16], attaching[PATH_MAX + 16], go[PATH_MAX + 16];
	snprintf(out, sizeof(out), "%s/trace", tmp);
	snprintf(attaching, sizeof(attaching), "%s/attaching", tmp);
	snprintf(go, sizeof(go), "%s/go", tmp);
	char *copy = copy_with_a_held_collector(tmp);
	char *argv[] = { copy, "run", "--bpf", "-o", out, "--", "/bin/sh", "-c", "exit 5", NULL };
	posix_spawnattr_t attr; /* a process group of its own, not orphaned */
	posix_spawnattr_init(&attr);
	posix_spawnattr_setpgroup(&attr, 0);
	posix_spawnattr_setflags(&attr, POSIX_SPAWN_SETPGROUP);
	pid_t pid;
	cr_assert_eq(posix_spawn(&pid, copy, NULL, &attr, argv, environ), 0);
	posix_spawnattr_destroy(&attr);
	for (int i = 0; i < 1000 && access(attaching, F_OK) != 0; i++) {
		struct timespec ts = { 0, 10 * 1000000L };
		nanosleep(&ts, NULL);
	}
	cr_assert_eq(access(attaching, F_OK), 0, "the collector was not started within 10 s");
	pid_t child = child_named(pid, "stepprof"); /* the job child, waiting to be released */
	cr_assert_gt(child, 0);
	cr_assert_eq(kill(pid, SIGTSTP), 0);
	cr_expect_eq(wait_stopped(child, 1), 'T', "the job child was not stopped");
	cr_assert_eq(sp_t_write_file(go, "", 0), 0);
	cr_expect_eq(wait_stopped(pid, 1), 'T', "stepprof run did not stop with its job child");
	cr_assert_eq(kill(pid, SIGCONT), 0);
	int st = end_within(pid, child, 10);
	cr_expect(st != -1 && WIFEXITED(st) && WEXITSTATUS(st) == 5, "status %#x, not the job's 5 (-1: still there)", st);
	free(copy);
	sp_t_rmrf(tmp);
	free(tmp);
}
