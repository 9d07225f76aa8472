/*
 * test_alert.c - the in-job runaway-memory alert end to end: the synthetic
 * trainer (docs/workloads.md) under LD_PRELOAD=libstepprof.so alone, on a
 * simulated GPU sized so that a leak of 1 MiB per iteration exhausts it about
 * 21 s into the run (768 MiB; OOM at iteration ~760 of ~27 ms), with the
 * default summary windows (1 s: the alert can speak after ten, ~10 s in):
 *   1. the job fails with its own out-of-memory error, and before it its stderr
 *      has exactly one `stepprof:` runaway line, whose projected time to full
 *      is within 25% of when the failure came after the line (the times at
 *      which the test read the two lines);
 *   2. STEPPROF_ALERTS=0: the same job, no line;
 *   3. clean, compute-bound and fragmenting trainers (memory bounded; the
 *      fragmenting one's device nearly full for one window, after ten) over
 *      more than ten summary windows: no line;
 *   4. the leaking job's stdout (one line per iteration done) and exit status
 *      are the same with and without the preload (the two run at once).
 * Ground truth: the trainer's own output (its iterations, its error line) and
 * the clock of the test, never what stepprof wrote but for the summaries
 * counted in 3 (how many windows the alert had to judge).
 */
#include <criterion/criterion.h>
#include <dirent.h>
#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "testlib.h"
#include "trainerlib.h"

TestSuite(runaway_alert, .fini = sp_t_remove_cur_dir);

/*
 * 1 MiB leaked per iteration of ~27 ms: ~37 MiB/s. Iterations made of one
 * 25 ms kernel (a sleep on the stream's thread) and little CPU work keep their
 * pace on a loaded machine: the projection assumes the rate stays.
 */
#define LEAK_ARGS "--iters 3000 --kernels 1 --kernel-us 25000 --leak-bytes 1M --print-iters"
#define LEAK_MEM  "768M"
#define OOM_LINE  "trainer: cudaMalloc failed: CUDA error 2"

/* ------------------------------------------------------------- helpers */

/*
 * build/tests/bin/trainer with args (space separated) on a device of mem bytes,
 * under the preload into <sp_t_cur_dir>/trace (preload 0: bare), extra: one
 * more environment entry or NULL. STEPPROF_ALERTS and STEPPROF_QUIET are unset
 * unless extra sets one.
 */
static void trainer(struct sp_t_result *r, int preload, const char *args, const char *mem, const char *extra)
{
	char buf[512], e_dir[1024], e_mem[64], *argv[32];
	int n = 0;
	char *bin = (char *)sp_t_build("tests/bin/trainer"); /* freed here: a thread's leak has no test main */
	argv[n++] = bin;
	snprintf(buf, sizeof(buf), "%s", args);
	for (char *save = NULL, *t = strtok_r(buf, " ", &save); t && n < 31; t = strtok_r(NULL, " ", &save))
		argv[n++] = t;
	argv[n] = NULL;
	snprintf(e_dir, sizeof(e_dir), "STEPPROF_DIR=%s/trace", sp_t_cur_dir);
	snprintf(e_mem, sizeof(e_mem), "SIMGPU_MEM_BYTES=%s", mem);
	char *e_pre = preload ? sp_t_preload_env() : strdup("LD_PRELOAD=");
	char *env[] = {
	    e_pre, e_dir, e_mem, "STEPPROF_MAX_MB=64", "STEPPROF_ALERTS=", "STEPPROF_QUIET=", (char *)extra, NULL};
	sp_t_run(r, argv, env, NULL, 100);
	free(e_pre);
	free(bin);
}

/* The index of the first line of text that contains what, or -1. */
static long line_with(const char *text, const char *what, const char **line)
{
	long i = 0;
	for (const char *p = text; *p; i++) {
		const char *nl = strchr(p, '\n'), *hit = strstr(p, what);
		if (hit && (!nl || hit < nl)) {
			if (line)
				*line = p;
			return i;
		}
		if (!nl)
			break;
		p = nl + 1;
	}
	return -1;
}

/* The runaway lines of stderr: their count; the first's index and text in *idx, *line. */
static unsigned runaway_lines(const char *err, long *idx, const char **line)
{
	unsigned n = 0;
	long i = 0;
	*idx = -1;
	for (const char *p = err; *p; i++) {
		const char *nl = strchr(p, '\n');
		size_t len = nl ? (size_t)(nl - p) : strlen(p);
		const char *g = strstr(p, " memory grows ");
		if (!strncmp(p, "stepprof: device ", 17) && g && g < p + len && !n++) {
			*idx = i;
			*line = p;
		}
		if (!nl)
			break;
		p = nl + 1;
	}
	return n;
}

/* "full in about 1 min 27 s" (also "N s", "H h M min", "D d H h") in seconds; -1 when absent. */
static double full_in(const char *line)
{
	const char *p = strstr(line, "full in about ");
	const char *end = strchr(line, '\n');
	if (!p || (end && p > end))
		return -1;
	p += strlen("full in about ");
	double s = 0;
	for (;;) {
		char *q;
		double v = strtod(p, &q);
		if (q == p || *q != ' ')
			break;
		q++;
		if (!strncmp(q, "min", 3))
			s += 60 * v, q += 3;
		else if (*q == 's')
			s += v, q += 1;
		else if (*q == 'h')
			s += 3600 * v, q += 1;
		else if (*q == 'd')
			s += 86400 * v, q += 1;
		else
			return -1;
		p = q;
		if (*p != ' ' || p[1] == '(')
			break;
		p++;
	}
	return s > 0 ? s : -1;
}

/* The last "iteration N" of stdout (--print-iters), -1 when none. */
static long last_iteration(const char *out)
{
	long last = -1;
	for (const char *p = out; (p = strstr(p, "iteration ")); p++)
		last = strtol(p + 10, NULL, 10);
	return last;
}

/* ------------------------------------------- 1, 2, 4: the leaking job */

Test(runaway_alert, a_leak_is_announced_once_before_its_oom, .timeout = 120)
{
	sp_t_cur_dir = sp_t_tmpdir("alert");
	struct sp_t_result r;
	trainer(&r, 1, LEAK_ARGS, LEAK_MEM, NULL);
	cr_assert_eq(r.status, 1, "the leaking trainer must fail of its out-of-memory error: exit %d: %s", r.status,
		     r.err);
	const char *oom_text, *line = NULL;
	long oom = line_with(r.err, OOM_LINE, &oom_text), a;
	cr_assert_geq(oom, 0, "no out-of-memory error: %s", r.err);
	cr_assert_eq(runaway_lines(r.err, &a, &line), 1, "runaway lines: %s", r.err);
	cr_assert_lt(a, oom, "the line came after the failure: %s", r.err);
	cr_assert_gt(r.err_lines, (size_t)oom);
	/* device, capacity and the directory that `stepprof analyze` wants */
	char want[1100];
	snprintf(want, sizeof(want), "; stepprof analyze %s/trace names the allocation sites\n", sp_t_cur_dir);
	cr_expect(!strncmp(line, "stepprof: device 0 memory grows ", 32), "%s", line);
	cr_expect(strstr(line, " of 768 MiB); at this rate it is full in about "), "%s", line);
	cr_expect(strstr(line, want) && strstr(line, want) < oom_text, "%s", line);

	double projected = full_in(line), actual = r.err_line_s[oom] - r.err_line_s[a];
	cr_assert_gt(projected, 0, "no time to full in: %.*s", (int)(strchr(line, '\n') - line), line);
	long iters = last_iteration(r.out);
	sp_t_note("runaway_alert: the line came %.1f s before the out-of-memory error (after iteration %ld), "
		  "projected %.0f s (%+.0f%%)",
		  actual, iters, projected, 100 * (projected - actual) / actual);
	/* the line must come early enough to be of use, and its projection must be about right */
	cr_assert_geq(actual, 4.0, "the line came %.1f s before the failure", actual);
	cr_expect_leq(fabs(projected - actual), 0.25 * actual,
		      "projected %.0f s, the failure came %.1f s after the line", projected, actual);
	sp_t_result_free(&r);
}

Test(runaway_alert, alerts_off_say_nothing, .timeout = 120)
{
	sp_t_cur_dir = sp_t_tmpdir("alert");
	struct sp_t_result r;
	trainer(&r, 1, LEAK_ARGS, LEAK_MEM, "STEPPROF_ALERTS=0");
	cr_assert_eq(r.status, 1, "exit %d: %s", r.status, r.err);
	cr_assert_geq(line_with(r.err, OOM_LINE, NULL), 0, "no out-of-memory error: %s", r.err);
	/* the same run that is announced with alerts on (above), as long */
	cr_assert_gt(last_iteration(r.out), 600, "the run ended early: %s", r.err);
	long a;
	const char *line = NULL;
	cr_expect_eq(runaway_lines(r.err, &a, &line), 0, "STEPPROF_ALERTS=0, yet: %s", r.err);
	cr_expect_null(strstr(r.err, "stepprof: "), "%s", r.err);
	sp_t_result_free(&r);
}

/* The bare job, on a thread of its own (sp_t_run waits for its own child only): both jobs run at once. */
static void *bare_run(void *res)
{
	trainer(res, 0, LEAK_ARGS, LEAK_MEM, NULL);
	return NULL;
}

Test(runaway_alert, the_jobs_stdout_and_exit_status_are_its_own, .timeout = 120)
{
	sp_t_cur_dir = sp_t_tmpdir("alert");
	struct sp_t_result bare, pre;
	pthread_t th;
	cr_assert_eq(pthread_create(&th, NULL, bare_run, &bare), 0);
	trainer(&pre, 1, LEAK_ARGS, LEAK_MEM, NULL);
	pthread_join(th, NULL);
	long it = last_iteration(bare.out);
	cr_assert(bare.status == 1 && it > 600, "the bare run must get far and fail: exit %d, iteration %ld, %s",
		  bare.status, it, bare.err);
	cr_expect_eq(pre.status, bare.status, "exit %d under the preload, %d bare", pre.status, bare.status);
	cr_expect_eq(pre.outlen, bare.outlen, "stdout: %zu bytes under the preload, %zu bare", pre.outlen, bare.outlen);
	cr_expect(pre.outlen == bare.outlen && !memcmp(pre.out, bare.out, bare.outlen),
		  "stdout differs: bare ends at iteration %ld, under the preload at %ld", it, last_iteration(pre.out));
	/* the preloaded run is the one that was announced */
	long a;
	const char *line = NULL;
	cr_expect_eq(runaway_lines(pre.err, &a, &line), 1, "%s", pre.err);
	cr_expect_eq(runaway_lines(bare.err, &a, &line), 0, "%s", bare.err);
	sp_t_result_free(&bare);
	sp_t_result_free(&pre);
}

/* --------------------------------------------- 3. bounded memory: silence */

/* the alert fits ten windows; the exit's shorter one is not judged */
#define SP_T_MIN_WINDOWS 11

/*
 * scenario with args under the preload on a device of mem bytes: exit 0, no
 * line, and the trainer's summaries (its own file) count at least 11 windows
 * with a device (ten fitted, the exit's); the largest window peak in *max_peak,
 * the window it was in (0-based) in *max_at.
 */
static void bounded(const char *args, const char *mem, uint64_t *max_peak, long *max_at)
{
	sp_t_cur_dir = sp_t_tmpdir("alert");
	struct sp_t_result r;
	trainer(&r, 1, args, mem, NULL);
	cr_assert_eq(r.status, 0, "exit %d: %s", r.status, r.err);
	long a;
	const char *line = NULL;
	cr_expect_eq(runaway_lines(r.err, &a, &line), 0, "bounded memory, yet: %s", r.err);
	struct sp_json *truth = sp_t_parse_last_line(r.out);
	cr_assert_not_null(truth, "no ground truth: %s", r.out);
	long pid = (long)sp_json_num(truth, "pid", -1);
	sp_json_free(truth);
	sp_t_result_free(&r);

	char tdir[1024], path[1400] = "", suffix[32];
	snprintf(tdir, sizeof(tdir), "%s/trace", sp_t_cur_dir);
	snprintf(suffix, sizeof(suffix), ".%ld.sptrace", pid);
	DIR *d = opendir(tdir);
	cr_assert_not_null(d, "%s: no trace directory", tdir);
	for (struct dirent *e; (e = readdir(d));) {
		size_t l = strlen(e->d_name), s = strlen(suffix);
		if (l > s && !strcmp(e->d_name + l - s, suffix))
			snprintf(path, sizeof(path), "%s/%s", tdir, e->d_name);
	}
	closedir(d);
	cr_assert(path[0], "no trace file of the trainer (pid %ld) in %s", pid, tdir);
	char *argv[] = {(char *)sp_t_build("bin/stepprof"), "dump", "--summaries", "--json", path, NULL};
	sp_t_run(&r, argv, NULL, NULL, 60);
	cr_assert_eq(r.status, 0, "stepprof dump --summaries: %s", r.err);
	struct sp_json **rec;
	size_t n = sp_json_parse_lines(r.out, &rec);
	long windows = 0;
	*max_peak = 0;
	*max_at = -1;
	for (size_t i = 0; i < n; i++) {
		const char *k = rec[i] ? sp_json_str(rec[i], "kind") : NULL;
		if (!k || strcmp(k, "summary_device"))
			continue;
		uint64_t peak = sp_json_u64(rec[i], "peak_bytes", 0);
		if (peak > *max_peak) {
			*max_peak = peak;
			*max_at = windows;
		}
		windows++;
	}
	sp_json_free_lines(rec, n);
	sp_t_result_free(&r);
	cr_assert_geq(windows, SP_T_MIN_WINDOWS, "%ld windows with device memory: too few for the alert to judge",
		      windows);
}

Test(runaway_alert, clean_memory_says_nothing, .timeout = 90)
{
	uint64_t peak;
	long at;
	bounded("--scenario clean --iters 340", "1G", &peak, &at);
}

Test(runaway_alert, compute_bound_memory_says_nothing, .timeout = 90)
{
	uint64_t peak;
	long at;
	bounded("--scenario compute-bound --iters 260", "1G", &peak, &at);
}

Test(runaway_alert, a_fragmentation_peak_says_nothing, .timeout = 90)
{
	uint64_t peak;
	long at;
	/*
	 * The device filled then emptied in iteration 300, ~11 s in: the newest
	 * window of a full fit. RATIONALE: a device of 256 MiB, because the fill's
	 * time is the simulator backing the blocks with pages: 1 GiB of them took
	 * 7 s on a loaded machine, a steady climb toward capacity that the alert
	 * rightly calls a runaway; a quarter of that stays a spike.
	 */
	bounded("--scenario fragmenting --iters 340 --fragment-iter 300", "256M", &peak, &at);
	cr_expect_geq(peak, 128ull << 20, "the fragmentation pattern's peak: %llu bytes", (unsigned long long)peak);
	cr_expect_geq(at, 9, "the peak came in window %ld, before the alert had ten to fit", at);
}
