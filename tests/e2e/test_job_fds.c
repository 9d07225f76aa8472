/*
 * test_job_fds.c - the preload never touches the job's descriptors and holds
 * none once recording:
 *   1. a job that closes every descriptor above 2 and reuses the low numbers
 *      for its own files, then makes CUDA calls from frames without unwind
 *      info (tests/workloads/cuda/jobfds.c), gets the same files and holds the
 *      same descriptors with and without libstepprof.so; under strace, no
 *      read or write on its descriptors but its own;
 *   2. a recorded job holds the descriptors it holds without the preload;
 *   3. the trainer runs under `ulimit -n` at the lowest limit it runs at bare.
 */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "testlib.h"

static char *run_jobfds(const char *dir, const char *out, int preload, const char *strace_log)
{
	char in[1024], outp[1024], pre[1100], sdir[1100];
	snprintf(in, sizeof(in), "%s/in", dir);
	snprintf(outp, sizeof(outp), "%s/%s", dir, out);
	snprintf(pre, sizeof(pre), "LD_PRELOAD=%s", preload ? sp_t_build("lib/libstepprof.so") : "");
	snprintf(sdir, sizeof(sdir), "STEPPROF_DIR=%s/traces", dir);
	char *env[] = {strace_log ? "LD_PRELOAD=" : pre, sdir, NULL};
	char epre[1200];
	snprintf(epre, sizeof(epre), "%s", pre);
	char *plain[] = {(char *)sp_t_build("tests/bin/jobfds"), in, outp, NULL};
	char *traced[] = {"strace",
			  "-f",
			  "-E",
			  epre,
			  "-e",
			  "trace=openat,read,write",
			  "-o",
			  (char *)strace_log,
			  (char *)sp_t_build("tests/bin/jobfds"),
			  in,
			  outp,
			  NULL};
	struct sp_t_result r;
	int st = sp_t_run(&r, strace_log ? traced : plain, env, NULL, 60);
	cr_assert_eq(st, 0, "jobfds (preload %d) exited %d: %s", preload, st, r.err);
	char *fds = strdup(r.out);
	sp_t_result_free(&r);
	return fds;
}

Test(job_fds, a_job_reusing_low_fds_keeps_its_files_and_fds, .timeout = 120)
{
	char *dir = sp_t_tmpdir("jobfds");
	char path[1024];
	char data[3000];
	for (size_t i = 0; i < sizeof(data); i++)
		data[i] = (char)('A' + i % 26);
	snprintf(path, sizeof(path), "%s/in", dir);
	cr_assert_eq(sp_t_write_file(path, data, sizeof(data)), 0);
	char *bare = run_jobfds(dir, "out.bare", 0, NULL);
	char *pre = run_jobfds(dir, "out.pre", 1, NULL);
	cr_expect_str_eq(pre, bare, "the job's descriptors preloaded: %s, bare: %s", pre, bare);
	size_t nb, np;
	snprintf(path, sizeof(path), "%s/out.bare", dir);
	char *ob = sp_t_read_file(path, &nb);
	snprintf(path, sizeof(path), "%s/out.pre", dir);
	char *op = sp_t_read_file(path, &np);
	cr_assert(ob && op);
	cr_expect(nb == np && !memcmp(ob, op, nb), "the job's output differs under the preload (%zu vs %zu bytes)", np,
		  nb);
	if (system("strace -V >/dev/null 2>&1") == 0) {
		char log[1100];
		snprintf(log, sizeof(log), "%s/strace.log", dir);
		free(run_jobfds(dir, "out.strace", 1, log));
		size_t n;
		char *s = sp_t_read_file(log, &n);
		cr_assert(s);
		/* after the job opened its input at 3: its one read of 3 and one write of 4, nothing else on 3 or 4 */
		char *from = strstr(s, "/in\", O_RDONLY) = 3");
		cr_assert(from, "the job's open of its input is not in the strace log");
		int io = 0;
		for (char *l = strchr(from, '\n'); l; l = strchr(l + 1, '\n')) {
			int len = (int)strcspn(l + 1, "\n");
			char line[256];
			snprintf(line, sizeof(line), "%.*s", len, l + 1);
			if (strstr(line, "read(3,") || strstr(line, "read(4,") || strstr(line, "write(3,") ||
			    strstr(line, "write(4,"))
				io++;
		}
		cr_expect_eq(io, 2, "reads and writes on the job's fds 3 and 4 after it opened them: %d, not its own 2",
			     io);
		free(s);
	} else {
		sp_t_note("strace is not installed: the syscall check is skipped");
	}
	free(ob);
	free(op);
	free(bare);
	free(pre);
	sp_t_rmrf(dir);
}

/* The "fds: ..." line of jobfds --keep-fds, bare or preloaded (a trace recorded in dir/traces). */
static char *keep_fds_line(const char *dir, int preload)
{
	char in[1024], outp[1024], pre[1100], sdir[1100];
	snprintf(in, sizeof(in), "%s/in", dir);
	snprintf(outp, sizeof(outp), "%s/out.%d", dir, preload);
	snprintf(pre, sizeof(pre), "LD_PRELOAD=%s", preload ? sp_t_build("lib/libstepprof.so") : "");
	snprintf(sdir, sizeof(sdir), "STEPPROF_DIR=%s/traces", dir);
	char *env[] = {pre, sdir, "STEPPROF_IO=libc", NULL};
	char *argv[] = {(char *)sp_t_build("tests/bin/jobfds"), in, outp, "--keep-fds", NULL};
	struct sp_t_result r;
	int st = sp_t_run(&r, argv, env, NULL, 60);
	cr_assert_eq(st, 0, "jobfds --keep-fds (preload %d) exited %d: %s", preload, st, r.err);
	char *line = strdup(r.out);
	sp_t_result_free(&r);
	return line;
}

/* How many trace files dir holds (0: none, or no directory). */
static int trace_files(const char *dir)
{
	char cmd[1200];
	snprintf(cmd, sizeof(cmd), "ls %s 2>/dev/null | grep -c '\\.sptrace$'", dir);
	FILE *p = popen(cmd, "r");
	int n = 0;
	if (p) {
		if (fscanf(p, "%d", &n) != 1)
			n = 0;
		pclose(p);
	}
	return n;
}

Test(job_fds, a_recorded_job_holds_no_descriptor_of_the_preloads, .timeout = 120)
{
	char *dir = sp_t_tmpdir("jobfdskeep");
	char path[1024], traces[1100];
	snprintf(path, sizeof(path), "%s/in", dir);
	cr_assert_eq(sp_t_write_file(path, "0123456789", 10), 0);
	char *bare = keep_fds_line(dir, 0);
	char *pre = keep_fds_line(dir, 1);
	snprintf(traces, sizeof(traces), "%s/traces", dir);
	cr_assert_eq(trace_files(traces), 1, "the preloaded job was recorded");
	cr_expect_str_eq(pre, bare, "descriptors at the end, preloaded: %s, bare: %s", pre, bare);
	free(bare);
	free(pre);
	sp_t_rmrf(dir);
}

/*
 * The trainer's exit status under `ulimit -n n`, set by a shell that then
 * execs it (the test's own process keeps its limit: it needs descriptors to
 * run the command); preloaded, recording into dir, when dir is not NULL.
 */
static int trainer_at(int n, const char *dir)
{
	char lim[16], pre[1100], sdir[1100];
	snprintf(lim, sizeof(lim), "%d", n);
	snprintf(pre, sizeof(pre), "LD_PRELOAD=%s", dir ? sp_t_build("lib/libstepprof.so") : "");
	snprintf(sdir, sizeof(sdir), "STEPPROF_DIR=%s", dir ? dir : "/nonexistent");
	char *env[] = {"LD_PRELOAD=", NULL};
	char *argv[] = {"/bin/sh",     "-c", "ulimit -n \"$0\" && exec env \"$@\"",   lim,
			pre,	       sdir, (char *)sp_t_build("tests/bin/trainer"), "--scenario",
			"input-bound", NULL};
	struct sp_t_result r;
	int st = sp_t_run(&r, argv, env, NULL, 120);
	if (st != 0 && dir)
		sp_t_note("trainer under ulimit -n %d, preloaded: exit %d: %s", n, st, r.err);
	sp_t_result_free(&r);
	return st;
}

Test(job_fds, the_trainer_runs_at_its_bare_descriptor_limit, .timeout = 300)
{
	/* the lowest limit at which it runs bare (14 on the development machine) */
	int lo = 3, hi = 256;
	cr_assert_eq(trainer_at(hi, NULL), 0, "the trainer fails bare under ulimit -n %d", hi);
	while (lo + 1 < hi) {
		int mid = (lo + hi) / 2;
		if (trainer_at(mid, NULL) == 0)
			hi = mid;
		else
			lo = mid;
	}
	char *dir = sp_t_tmpdir("jobfdstrainer");
	char traces[1100];
	snprintf(traces, sizeof(traces), "%s/traces", dir);
	cr_expect_eq(trainer_at(hi, traces), 0, "the trainer fails preloaded under ulimit -n %d, its bare need", hi);
	cr_expect_gt(trace_files(traces), 0, "the trainer was recorded");
	sp_t_rmrf(dir);
}
