/*
 * test_watch.c - `stepprof watch` on running jobs of the synthetic trainer
 * (simulated GPU), through `stepprof run --watch='... --json'` or beside a
 * preloaded job; the assertions read the watcher's JSON lines
 * (stepprof.watch/1) and compare them with what the job did:
 *   1. a leaking job: memory_runaway raised early, its projection against the
 *      iteration and the time at which the allocation really failed (the
 *      trainer's own message), the site; the job's stdout and exit status
 *      those of the bare run;
 *   2. jobs that must not alarm (clean, compute-bound, fragmenting, input-bound,
 *      ten times the leak's length): no memory_runaway, not stalled, no
 *      step_regression unless the trainer's own clock shows a sustained slowdown
 *      (a machine loaded by other tests); the fragmenting one raises alloc_retry_storm; a job whose steps
 *      slow down raises step_regression, one that hangs raises stalled;
 *   3. the watcher's own life: the iteration count equals the trainer's, it
 *      waits for a directory that does not exist yet, a damaged file is one
 *      warning, --once, bad options;
 *   4. faults while it watches: a job killed mid-write, a file cut and written
 *      over, workers that come and go every epoch; a two-minute soak through a
 *      wrapping ring.
 */
#include <criterion/criterion.h>
#include <dirent.h>
#include <fcntl.h>
#include <math.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "testlib.h"
#include "trainerlib.h"

TestSuite(watch, .fini = sp_t_remove_cur_dir);
/* the runs of a minute or more (left out of the sanitized runs, as the scenarios are) */
TestSuite(watch_long, .fini = sp_t_remove_cur_dir);

/* ------------------------------------------------------------ helpers */

struct ticks {
	struct sp_json **t;
	size_t n;
};

/* The watcher's JSON lines in text (one object per line, other lines ignored). */
static void parse_ticks(const char *text, struct ticks *k)
{
	memset(k, 0, sizeof(*k));
	const char *p = text;
	while (p && *p) {
		const char *nl = strchr(p, '\n');
		size_t len = nl ? (size_t)(nl - p) : strlen(p);
		if (len > 30 && !strncmp(p, "{\"schema\":\"stepprof.watch/1\"", 28)) {
			char *line = strndup(p, len);
			struct sp_json *j = sp_json_parse(line);
			free(line);
			cr_assert_not_null(j, "a watch line that is not JSON: %.*s", (int)len, p);
			k->t = realloc(k->t, (k->n + 1) * sizeof(*k->t));
			k->t[k->n++] = j;
		}
		p = nl ? nl + 1 : NULL;
	}
}

static void ticks_free(struct ticks *k)
{
	for (size_t i = 0; i < k->n; i++)
		sp_json_free(k->t[i]);
	free(k->t);
}

/* The first tick with an event (alert, state); its index, or -1. */
static long first_event(const struct ticks *k, const char *alert, const char *state)
{
	for (size_t i = 0; i < k->n; i++) {
		struct sp_json *ev = sp_json_get(k->t[i], "events");
		for (size_t e = 0; ev && e < ev->n; e++) {
			struct sp_json *x = sp_json_at(ev, e);
			const char *a = sp_json_str(x, "alert"), *s = sp_json_str(x, "state");
			if (a && s && !strcmp(a, alert) && !strcmp(s, state))
				return (long)i;
		}
	}
	return -1;
}

/* `stepprof run -o DIR --watch=WOPTS -- trainer ARGS` with env; the result in r. */
static void run_watched(struct sp_t_result *r, const char *dir, const char *wopts, char *const targs[],
			char *const env[], int timeout_s)
{
	char *argv[48], wo[256];
	int n = 0;
	snprintf(wo, sizeof(wo), "--watch=%s", wopts);
	argv[n++] = (char *)sp_t_build("bin/stepprof");
	argv[n++] = "run";
	argv[n++] = "--no-bpf";
	argv[n++] = "-o";
	argv[n++] = (char *)dir;
	argv[n++] = wo;
	argv[n++] = "--";
	argv[n++] = (char *)sp_t_build("tests/bin/trainer");
	for (int i = 0; targs[i] && n < 46; i++)
		argv[n++] = targs[i];
	argv[n] = NULL;
	sp_t_run(r, argv, env, NULL, timeout_s);
}

/* The bare trainer (no preload) with targs: its result. */
static void run_bare(struct sp_t_result *r, char *const targs[], char *const env[])
{
	char *argv[40];
	int n = 0;
	argv[n++] = (char *)sp_t_build("tests/bin/trainer");
	for (int i = 0; targs[i] && n < 38; i++)
		argv[n++] = targs[i];
	argv[n] = NULL;
	sp_t_run(r, argv, env, NULL, 300);
}

/* ------------------------------------------------------- 1. the leak */

/*
 * 8 MiB leaked per iteration on a 1 GiB device: the allocation fails near
 * iteration 127, after about 5 s. The alert must come in the first 75% of
 * the run, project the failing iteration within ±10% and the time left
 * within ±15%, and name the trainer's code as the site that holds the growth.
 */
Test(watch, a_leak_is_caught_before_the_oom_and_its_end_projected, .timeout = 240)
{
	char *tmp = sp_t_tmpdir("watch");
	sp_t_cur_dir = tmp;
	char dir[600];
	snprintf(dir, sizeof(dir), "%s/trace", tmp);
	/* the leak without the loader workers and large files: a pace set by the kernels' sleep, steady on a busy machine */
	char *targs[] = {"--scenario", "leaking", "--iters", "400", "--markers", "step", "--workers", "0",
			 "--files-per-iter", "0", "--h2d-bytes", "64K", "--d2h-bytes", "4K", NULL};
	char *env[] = {"STEPPROF_MAX_MB=64", NULL};
	struct sp_t_result r, bare;
	run_watched(&r, dir, "--interval 0.5 --json", targs, env, 240);
	run_bare(&bare, targs, env);
	/* the job as bare: its exit status and stdout */
	cr_expect_eq(r.status, bare.status, "exit %d watched, %d bare: %s", r.status, bare.status, r.err);
	cr_expect_str_eq(r.out, bare.out, "the job's stdout changed");
	cr_assert_neq(bare.status, 0, "the leak did not fail the job: %s", bare.err);
	const char *fail = strstr(r.err, "cudaMalloc failed: CUDA error 2 (iteration ");
	cr_assert_not_null(fail, "no out-of-memory failure: %s", r.err);
	long fail_iter = -1;
	unsigned long long fail_ns = 0;
	cr_assert_eq(sscanf(fail, "cudaMalloc failed: CUDA error 2 (iteration %ld, at %llu ns)", &fail_iter, &fail_ns),
		     2);
	struct ticks k;
	parse_ticks(r.err, &k);
	cr_assert_gt(k.n, 3, "too few watch ticks: %s", r.err);
	long at = first_event(&k, "memory_runaway", "raised");
	cr_assert_geq(at, 0, "memory_runaway never raised: %s", r.err);
	struct sp_json *rk = sp_json_at(sp_json_get(k.t[at], "ranks"), 0);
	double it_raise = sp_json_num(rk, "iterations", -1);
	double proj_iter = sp_json_num(rk, "memory_runaway.full_at_iteration", -1);
	/*
	 * The time left, as projected at the tick nearest the middle of the run (the
	 * window then holds 50 iterations of the job's present pace; at the raise it
	 * holds the first ones, whose pace a machine busy with other tests changes).
	 */
	long mid = at;
	for (size_t i = (size_t)at; i < k.n; i++) {
		struct sp_json *x = sp_json_at(sp_json_get(k.t[i], "ranks"), 0);
		if (sp_json_num(x, "iterations", 0) > 0.5 * (double)fail_iter || !sp_json_path(x, "memory_runaway"))
			break;
		mid = (long)i;
	}
	struct sp_json *rm = sp_json_at(sp_json_get(k.t[mid], "ranks"), 0);
	double proj_s = sp_json_num(rm, "memory_runaway.full_in_s", -1);
	double tick_ns = sp_json_num(k.t[mid], "time_mono_ns", 0);
	double left_s = ((double)fail_ns - tick_ns) / 1e9;
	sp_t_note("leak: raised after %.0f iterations, failed in iteration %ld; projected iteration %.1f; at iteration "
		  "%.0f, %.2f s left (really %.2f s)",
		  it_raise, fail_iter, proj_iter, sp_json_num(rm, "iterations", 0), proj_s, left_s);
	cr_expect_leq(it_raise, 0.75 * (double)fail_iter, "raised after %.0f of %ld iterations", it_raise, fail_iter);
	cr_expect(fabs(proj_iter - (double)fail_iter) <= 0.10 * (double)fail_iter,
		  "projected iteration %.1f, the allocation failed in %ld", proj_iter, fail_iter);
	/*
	 * The time left is the iterations left at the job's pace: right within 15%
	 * when the job keeps the pace it had. A machine busy with other tests can
	 * change it after the tick (the job's own pace before and after, from the
	 * ticks' counts and the trainer's failure line): then only the iterations
	 * are held to the projection.
	 */
	double it_mid = sp_json_num(rm, "iterations", 0), pace_before = 0;
	for (long i = mid; i >= 0; i--) {
		struct sp_json *x = sp_json_at(sp_json_get(k.t[i], "ranks"), 0);
		double n = sp_json_num(x, "iterations", 0), t = sp_json_num(k.t[i], "time_mono_ns", 0);
		if (it_mid - n >= 30 && tick_ns > t) {
			pace_before = (it_mid - n) / ((tick_ns - t) / 1e9);
			break;
		}
	}
	double pace_after = left_s > 0 ? ((double)fail_iter - it_mid) / left_s : 0;
	if (pace_before > 0 && fabs(pace_after / pace_before - 1) <= 0.10)
		cr_expect(fabs(proj_s - left_s) <= 0.15 * left_s,
			  "projected %.2f s left, it failed %.2f s after the tick (pace %.1f then %.1f it/s)", proj_s,
			  left_s, pace_before, pace_after);
	else
		sp_t_note("leak: the job's pace went from %.1f to %.1f it/s after the tick (a busy machine): the time "
			  "left (%.2f s projected, %.2f s) not held to 15%%",
			  pace_before, pace_after, proj_s, left_s);
	/* the end of the road is said too: memory high, then the failed allocation */
	long high = first_event(&k, "memory_high", "raised"), failed = first_event(&k, "alloc_failed", "raised");
	cr_expect_geq(high, at, "memory_high not raised after memory_runaway: %s", r.err);
	cr_expect_geq(failed, high, "alloc_failed not raised after memory_high: %s", r.err);
	struct sp_json *site = sp_json_at(sp_json_path(rk, "memory_runaway.sites"), 0);
	cr_assert_not_null(site, "no site for the growth");
	cr_expect(strstr(sp_json_str(site, "site"), "trainer!") != NULL, "the growth's site is not the trainer's: %s",
		  sp_json_str(site, "site"));
	/* the growth since the fit's first iteration is the leak's: 8 MiB an iteration, held live */
	cr_expect_geq(sp_json_num(site, "bytes", 0), 8.0 * 1048576 * (it_raise > 12 ? 8 : 1),
		      "the site holds %.0f bytes", sp_json_num(site, "bytes", 0));
	ticks_free(&k);
	sp_t_result_free(&r);
	sp_t_result_free(&bare);
}

/* ------------------------------------------------- 2. must stay silent */

static int cmp_dbl(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;
	return x < y ? -1 : x > y;
}

static double median_of(const double *v, size_t n)
{
	double *c = malloc(n * sizeof(*c));
	memcpy(c, v, n * sizeof(*c));
	qsort(c, n, sizeof(*c), cmp_dbl);
	double m = c[(n + 1) / 2 - 1];
	free(c);
	return m;
}

/*
 * Did the job itself slow down, by the trainer's own clock? The watcher's rule
 * on the trainer's per-iteration wall times: the median of the last `window`
 * iterations at least `share` over the first window's, held for a window of
 * iterations and min_s seconds. A machine busy with other tests can slow a
 * job for that long: step_regression is then right to say so.
 */
static int truth_slowed(const struct sp_json *truth, size_t window, double share, double min_s)
{
	const struct sp_json *its = sp_json_get(truth, "iterations");
	size_t n = its ? its->n : 0;
	if (n < 2 * window)
		return 0;
	double *wall = malloc(n * sizeof(*wall)), m0;
	for (size_t i = 0; i < n; i++)
		wall[i] = sp_json_num(sp_json_at(its, i), "wall_ns", 0);
	m0 = median_of(wall, window);
	long since = -1;
	double since_ns = 0;
	int held = 0;
	for (size_t i = window; i < n && !held; i++) {
		double m = median_of(wall + i + 1 - window, window);
		double end = sp_json_num(sp_json_at(its, i), "end_ns", 0);
		if (m / m0 - 1 < share) {
			since = -1;
			continue;
		}
		if (since < 0) {
			since = (long)i;
			since_ns = end;
		}
		held = i - (size_t)since >= window && (end - since_ns) / 1e9 >= min_s;
	}
	free(wall);
	return held;
}

/* Ten times the leak's 127 iterations (the clean scenario's 1,300 take about 70 s). */
static void silent(const char *scenario, const char *markers, const char *alert_wanted)
{
	char *tmp = sp_t_tmpdir("watch");
	sp_t_cur_dir = tmp;
	char dir[600];
	snprintf(dir, sizeof(dir), "%s/trace", tmp);
	char *targs[] = {"--scenario", (char *)scenario, "--iters", "1300", "--markers", (char *)markers, NULL};
	char *env[] = {"STEPPROF_MAX_MB=64", NULL};
	struct sp_t_result r;
	run_watched(&r, dir, "--interval 1 --json", targs, env, 600);
	cr_assert_eq(r.status, 0, "%s: exit %d: %s", scenario, r.status, r.err);
	struct ticks k;
	parse_ticks(r.err, &k);
	cr_assert_gt(k.n, 2, "too few watch ticks: %s", r.err);
	struct sp_json *last = sp_json_at(sp_json_get(k.t[k.n - 1], "ranks"), 0);
	struct sp_json *truth = sp_t_parse_last_line(r.out);
	cr_assert_not_null(truth);
	cr_expect_eq(sp_json_num(last, "iterations", -1), sp_json_num(truth, "totals.iterations", -2),
		     "%s: the watcher counted %.0f iterations, the trainer ran %.0f", scenario,
		     sp_json_num(last, "iterations", -1), sp_json_num(truth, "totals.iterations", -2));
	cr_expect_lt(first_event(&k, "memory_runaway", "raised"), 0, "%s: memory_runaway raised", scenario);
	/* silent unless the job really slowed down (a machine loaded by other tests): then it must be so */
	if (first_event(&k, "step_regression", "raised") >= 0) {
		cr_expect(truth_slowed(truth, 50, 0.15, 8), "%s: step_regression raised, the trainer's own steps "
			  "did not slow down by 15%% for a window and 8 s:\n%s", scenario, r.err);
		sp_t_note("watch: %s slowed down on this machine (the trainer's own steps): step_regression raised",
			  scenario);
	} else {
		cr_expect(!truth_slowed(truth, 50, 0.3, 12), "%s: the trainer's steps slowed down by 30%% for 12 s, "
			  "no step_regression", scenario);
	}
	cr_expect_lt(first_event(&k, "stalled", "raised"), 0, "%s: stalled raised", scenario);
	if (!alert_wanted) { /* the fragmenting job's OOM is on purpose: alloc_failed is right there */
		static const char *const quiet[] = {"memory_high", "alloc_failed", "alloc_retry_storm"};
		for (size_t a = 0; a < 3; a++)
			cr_expect_lt(first_event(&k, quiet[a], "raised"), 0, "%s: %s raised", scenario, quiet[a]);
	}
	if (alert_wanted)
		cr_expect_geq(first_event(&k, alert_wanted, "raised"), 0, "%s: %s not raised: %s", scenario,
			      alert_wanted, r.err);
	sp_json_free(truth);
	ticks_free(&k);
	sp_t_result_free(&r);
}

Test(watch_long, a_clean_job_raises_nothing, .timeout = 600)
{
	silent("clean", "nvtx", NULL);
}

Test(watch_long, a_compute_bound_job_raises_nothing, .timeout = 600)
{
	silent("compute-bound", "none", NULL);
}

Test(watch_long, a_fragmenting_job_raises_the_retry_storm_and_no_runaway, .timeout = 600)
{
	silent("fragmenting", "step", "alloc_retry_storm");
}

Test(watch_long, an_input_bound_job_raises_nothing, .timeout = 600)
{
	silent("input-bound", "step", NULL);
}

/*
 * From iteration 100 on, 30 ms more host time per iteration (about +50%): a
 * slowdown held (here for 3 s, not the default 10, and a window of 50
 * iterations) raises step_regression, after the slowdown began, naming
 * "other" (host time outside any call) as what grew.
 */
Test(watch, a_step_slowdown_raises_step_regression, .timeout = 300)
{
	char *tmp = sp_t_tmpdir("watch");
	sp_t_cur_dir = tmp;
	char dir[600];
	snprintf(dir, sizeof(dir), "%s/trace", tmp);
	char *targs[] = {"--scenario", "clean", "--iters", "260", "--markers", "step",
			 "--slow-from", "100", "--slow-host-us", "30000", NULL};
	struct sp_t_result r;
	run_watched(&r, dir, "--interval 0.5 --json --threshold step_regression.min_seconds=3", targs, NULL, 300);
	cr_assert_eq(r.status, 0, "exit %d: %s", r.status, r.err);
	struct ticks k;
	parse_ticks(r.err, &k);
	long at = first_event(&k, "step_regression", "raised");
	cr_assert_geq(at, 0, "step_regression not raised: %s", r.err);
	double it = sp_json_num(sp_json_at(sp_json_get(k.t[at], "ranks"), 0), "iterations", -1);
	cr_expect_geq(it, 150, "raised after %.0f iterations: before the slowdown held a window", it);
	cr_expect(strstr(r.err, "other grew the most") != NULL, "the grown category is not named: %s", r.err);
	ticks_free(&k);
	sp_t_result_free(&r);
}

/* A step that hangs 4 s without a call: stalled raised during it, cleared after. */
Test(watch, a_hung_step_raises_stalled_then_clears_it, .timeout = 120)
{
	char *tmp = sp_t_tmpdir("watch");
	sp_t_cur_dir = tmp;
	char dir[600];
	snprintf(dir, sizeof(dir), "%s/trace", tmp);
	char *targs[] = {"--scenario", "clean", "--iters", "60", "--pause-at", "30", "--pause-ms", "4000", NULL};
	struct sp_t_result r;
	run_watched(&r, dir, "--interval 0.5 --json", targs, NULL, 120);
	cr_assert_eq(r.status, 0, "exit %d: %s", r.status, r.err);
	struct ticks k;
	parse_ticks(r.err, &k);
	long up = first_event(&k, "stalled", "raised"), down = first_event(&k, "stalled", "cleared");
	cr_assert_geq(up, 0, "stalled not raised: %s", r.err);
	cr_expect_gt(down, up, "stalled not cleared after the pause: %s", r.err);
	ticks_free(&k);
	sp_t_result_free(&r);
}

/* ------------------------------------------------- 3. the watcher's life */

/* Started before its directory exists: it waits, says so once, then follows the job. */
Test(watch, waits_for_a_directory_that_does_not_exist_yet, .timeout = 120)
{
	char *tmp = sp_t_tmpdir("watch");
	sp_t_cur_dir = tmp;
	char dir[600], out[700], err[700];
	snprintf(dir, sizeof(dir), "%s/later", tmp);
	snprintf(out, sizeof(out), "%s/watch.out", tmp);
	snprintf(err, sizeof(err), "%s/watch.err", tmp);
	pid_t w = fork();
	if (w == 0) {
		freopen(out, "w", stdout);
		freopen(err, "w", stderr);
		execl(sp_t_build("bin/stepprof"), "stepprof", "watch", "--interval", "0.3", "--json", dir, (char *)NULL);
		_exit(127);
	}
	struct timespec d = {1, 0};
	nanosleep(&d, NULL);
	char *targs[] = {"--scenario", "clean", "--iters", "30", NULL};
	struct sp_t_result r;
	sp_t_run_trainer(&r, dir, targs);
	int st = -1;
	for (int i = 0; i < 100; i++) { /* it ends by itself once the job has ended */
		if (waitpid(w, &st, WNOHANG) == w)
			break;
		nanosleep(&(struct timespec){0, 100000000}, NULL);
	}
	if (!WIFEXITED(st)) {
		kill(w, SIGKILL);
		waitpid(w, &st, 0);
		cr_assert_fail("the watcher did not end after the job");
	}
	cr_expect_eq(WEXITSTATUS(st), 0);
	char *e = sp_t_read_file(err, NULL), *o = sp_t_read_file(out, NULL);
	cr_assert(e && o);
	const char *wait_line = strstr(e, "waiting for it to appear");
	cr_expect_not_null(wait_line, "no word that it waits: %s", e);
	cr_expect_null(wait_line ? strstr(wait_line + 1, "waiting for it to appear") : NULL, "said more than once: %s",
		       e);
	struct ticks k;
	parse_ticks(o, &k);
	cr_assert_gt(k.n, 0);
	struct sp_json *last = sp_json_at(sp_json_get(k.t[k.n - 1], "ranks"), 0);
	cr_expect_eq(sp_json_num(last, "iterations", -1), 30, "iterations %.0f", sp_json_num(last, "iterations", -1));
	cr_expect(sp_json_num(k.t[k.n - 1], "ended", 0) == 1, "the last tick does not say the job ended");
	ticks_free(&k);
	free(e);
	free(o);
	sp_t_result_free(&r);
}

/* A file of garbage in the directory: one warning, and the watcher carries on with the rest. */
Test(watch, a_damaged_file_is_one_warning_and_the_rest_is_followed, .timeout = 120)
{
	char *tmp = sp_t_tmpdir("watch");
	sp_t_cur_dir = tmp;
	char dir[600], bad[700];
	snprintf(dir, sizeof(dir), "%s/trace", tmp);
	char *targs[] = {"--scenario", "clean", "--iters", "20", NULL};
	struct sp_t_result r;
	sp_t_run_trainer(&r, dir, targs);
	sp_t_result_free(&r);
	snprintf(bad, sizeof(bad), "%s/other.1.sptrace", dir);
	char junk[8192];
	for (size_t i = 0; i < sizeof(junk); i++)
		junk[i] = (char)(i * 131 + 7);
	memcpy(junk, "STEPPROF", 8);
	cr_assert_eq(sp_t_write_file(bad, junk, sizeof(junk)), 0);
	char *argv[] = {(char *)sp_t_build("bin/stepprof"), "watch", "--once", "--json", dir, NULL};
	sp_t_run(&r, argv, NULL, NULL, 60);
	cr_expect_eq(r.status, 0, "exit %d: %s", r.status, r.err);
	struct ticks k;
	parse_ticks(r.out, &k);
	cr_assert_eq(k.n, 1, "--once: one tick");
	cr_expect_eq(sp_json_num(sp_json_at(sp_json_get(k.t[0], "ranks"), 0), "iterations", -1), 20);
	ticks_free(&k);
	sp_t_result_free(&r);
}

Test(watch, bad_options_are_one_line_and_exit_1)
{
	static const char *const bad[][3] = {
	    {"--interval", "0", NULL}, {"--window", "x", NULL}, {"--threshold", "nope=1", NULL},
	    {"--threshold", "memory_high.share=-1", NULL}, {"--frobnicate", NULL, NULL},
	};
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		char *argv[6] = {(char *)sp_t_build("bin/stepprof"), "watch", (char *)bad[i][0]};
		int n = 3;
		if (bad[i][1])
			argv[n++] = (char *)bad[i][1];
		argv[n++] = "/nonexistent";
		argv[n] = NULL;
		struct sp_t_result r;
		sp_t_run(&r, argv, NULL, NULL, 20);
		cr_expect_eq(r.status, 1, "%s %s: exit %d", bad[i][0], bad[i][1] ? bad[i][1] : "", r.status);
		cr_expect(r.err && strchr(r.err, '\n') == r.err + strlen(r.err) - 1, "not one line: %s", r.err);
		sp_t_result_free(&r);
	}
}

/* VmRSS of pid in kB, -1 when gone. */
static long rss_kb(pid_t pid)
{
	char path[64];
	snprintf(path, sizeof(path), "/proc/%d/status", (int)pid);
	char *s = sp_t_read_file(path, NULL);
	const char *v = s ? strstr(s, "VmRSS:") : NULL;
	long kb = v ? strtol(v + 6, NULL, 10) : -1;
	free(s);
	return kb;
}

/*
 * A soak of a compressed long job: a trainer writing 50,000-100,000 records a
 * second (100 small files and 3 ms of host time an iteration) through an 8 MiB
 * ring, which wraps every 2-5 seconds, for two minutes or more, watched at
 * 0.5 s: the watcher keeps up (each tick less than two intervals behind the
 * newest record, no chunk overwritten unread), its resident memory is flat
 * (the last quarter's median within 10% of the first quarter's), and it counts
 * every iteration the trainer ran.
 */
Test(watch_long, a_two_minute_soak_through_a_wrapping_ring, .timeout = 600)
{
	char *tmp = sp_t_tmpdir("watch");
	sp_t_cur_dir = tmp;
	char dir[600], out[700], tout[700];
	snprintf(dir, sizeof(dir), "%s/trace", tmp);
	snprintf(out, sizeof(out), "%s/watch.out", tmp);
	snprintf(tout, sizeof(tout), "%s/trainer.out", tmp);
	cr_assert_eq(mkdir(dir, 0700), 0);
	pid_t w = fork();
	if (w == 0) {
		freopen(out, "w", stdout);
		execl(sp_t_build("bin/stepprof"), "stepprof", "watch", "--interval", "0.5", "--json", dir, (char *)NULL);
		_exit(127);
	}
	char *pre = sp_t_preload_env(), envdir[700];
	snprintf(envdir, sizeof(envdir), "STEPPROF_DIR=%s", dir);
	pid_t t = fork();
	if (t == 0) {
		putenv(pre);
		putenv(envdir);
		putenv("STEPPROF_MAX_MB=8");
		freopen(tout, "w", stdout);
		execl(sp_t_build("tests/bin/trainer"), "trainer", "--iters", "27000", "--kernels", "4", "--kernel-us", "100",
		      "--files-per-iter", "100", "--file-size", "1K", "--dataset-files", "100", "--h2d-bytes", "4K",
		      "--d2h-bytes", "4K", "--host-us", "3000", "--markers", "step", (char *)NULL);
		_exit(127);
	}
	long rss[1024];
	size_t nrss = 0;
	int st;
	struct timespec t0, t1;
	clock_gettime(CLOCK_MONOTONIC, &t0);
	while (waitpid(t, &st, WNOHANG) == 0) {
		nanosleep(&(struct timespec){1, 0}, NULL);
		long kb = rss_kb(w);
		if (kb > 0 && nrss < sizeof(rss) / sizeof(rss[0]))
			rss[nrss++] = kb;
	}
	clock_gettime(CLOCK_MONOTONIC, &t1);
	double secs = (double)(t1.tv_sec - t0.tv_sec) + (double)(t1.tv_nsec - t0.tv_nsec) / 1e9;
	int wst = -1;
	for (int i = 0; i < 300 && waitpid(w, &wst, WNOHANG) == 0; i++)
		nanosleep(&(struct timespec){0, 100000000}, NULL);
	if (wst == -1) {
		kill(w, SIGKILL);
		waitpid(w, &wst, 0);
		cr_assert_fail("the watcher did not end after the job");
	}
	cr_assert(WIFEXITED(st) && WEXITSTATUS(st) == 0, "the trainer failed");
	char *o = sp_t_read_file(out, NULL), *to = sp_t_read_file(tout, NULL);
	cr_assert(o && to);
	struct ticks k;
	parse_ticks(o, &k);
	cr_assert_gt(k.n, 10);
	/* a record is reported at most interval + tick_s after it was written */
	double lag_max = 0;
	for (size_t i = 0; i < k.n; i++)
		if (0.5 + sp_json_num(k.t[i], "tick_s", 0) > lag_max)
			lag_max = 0.5 + sp_json_num(k.t[i], "tick_s", 0);
	struct sp_json *last = sp_json_at(sp_json_get(k.t[k.n - 1], "ranks"), 0);
	struct sp_json *truth = sp_t_parse_last_line(to);
	cr_assert_not_null(truth);
	double over = sp_json_num(last, "overwritten_records", 0), read = sp_json_num(last, "records", 0);
	/*
	 * Medians of the quarters: a sample taken during a tick holds that tick's
	 * records (a buffer of a few MiB at most, given back after), which a mean lets
	 * a busy quarter's larger ticks move; growth moves the median too.
	 */
	size_t q = nrss / 4;
	double fq[256], lq[256];
	for (size_t i = 0; i < q && i < 256; i++) {
		fq[i] = (double)rss[i];
		lq[i] = (double)rss[nrss - q + i];
	}
	double first = q ? median_of(fq, q < 256 ? q : 256) : 0, lastq = q ? median_of(lq, q < 256 ? q : 256) : 0;
	sp_t_note("watch soak: %.0f s, %zu ticks, %.0f records read, %.0f overwritten by the ring, lag at most %.2f s, "
		  "RSS %.0f kB (first quarter) -> %.0f kB (last)",
		  secs, k.n, read, over, lag_max, first, lastq);
	cr_expect_geq(secs, 100, "the soak ran %.0f s", secs);
	cr_expect_geq(over, 20 * 200000.0, "the ring wrapped less than 20 times (%.0f records overwritten)", over);
	cr_expect_lt(lag_max, 1.0, "a record was reported up to %.2f s after it was written (interval 0.5 s)", lag_max);
	cr_expect_eq(sp_json_num(last, "missed_chunks", -1), 0, "the watcher fell behind the ring");
	cr_assert_geq(q, 5, "too few RSS samples");
	cr_expect(fabs(lastq - first) <= 0.10 * first, "RSS %.0f kB in the first quarter, %.0f kB in the last", first,
		  lastq);
	cr_expect_eq(sp_json_num(last, "iterations", -1), sp_json_num(truth, "totals.iterations", -2),
		     "the watcher counted %.0f iterations, the trainer ran %.0f", sp_json_num(last, "iterations", -1),
		     sp_json_num(truth, "totals.iterations", -2));
	sp_json_free(truth);
	ticks_free(&k);
	free(o);
	free(to);
	free(pre);
}

/* ------------------------------------------------------------ 4. faults */

/* `stepprof watch --interval 0.3 --json dir` started in the background: its pid; stdout to out, stderr to err. */
static pid_t watch_bg(const char *dir, const char *out, const char *err)
{
	pid_t w = fork();
	cr_assert_geq(w, 0);
	if (w == 0) {
		freopen(out, "w", stdout);
		freopen(err, "w", stderr);
		execl(sp_t_build("bin/stepprof"), "stepprof", "watch", "--interval", "0.3", "--json", dir, (char *)NULL);
		_exit(127);
	}
	return w;
}

/* A fault test's files: the trace directory (made), the watcher's stdout and stderr. */
struct fault {
	char dir[600], out[700], err[700];
};

/* The directory made, and the watcher started on it. */
static pid_t fault_start(struct fault *f)
{
	char *tmp = sp_t_tmpdir("watch");
	sp_t_cur_dir = tmp;
	snprintf(f->dir, sizeof(f->dir), "%s/trace", tmp);
	snprintf(f->out, sizeof(f->out), "%s/w.out", tmp);
	snprintf(f->err, sizeof(f->err), "%s/w.err", tmp);
	cr_assert_eq(mkdir(f->dir, 0700), 0);
	return watch_bg(f->dir, f->out, f->err);
}

/* Wait up to s seconds for pid to exit: its wait status, or -1 (then killed). */
static int wait_for(pid_t pid, int s)
{
	int st;
	for (int i = 0; i < s * 10; i++) {
		if (waitpid(pid, &st, WNOHANG) == pid)
			return st;
		nanosleep(&(struct timespec){0, 100000000}, NULL);
	}
	kill(pid, SIGKILL);
	waitpid(pid, &st, 0);
	return -1;
}

/* A job run by sh -c script with the preload and STEPPROF_DIR=dir: its pid. */
static pid_t job_bg(const char *dir, const char *script)
{
	char *pre = sp_t_preload_env(), envdir[700];
	snprintf(envdir, sizeof(envdir), "STEPPROF_DIR=%s", dir);
	pid_t j = fork();
	cr_assert_geq(j, 0);
	if (j == 0) {
		putenv(pre);
		putenv(envdir);
		int null = open("/dev/null", O_WRONLY);
		dup2(null, 1);
		dup2(null, 2);
		execl("/bin/sh", "sh", "-c", script, (char *)NULL);
		_exit(127);
	}
	free(pre);
	return j;
}

/*
 * A trainer killed with SIGKILL in the middle of its run: the watcher sees
 * its process gone, reads what it left, and ends by itself (exit 0) with the
 * iterations it had.
 */
Test(watch, a_job_killed_mid_write_ends_the_watch_cleanly, .timeout = 120)
{
	struct fault F;
	pid_t w = fault_start(&F);
	char *dir = F.dir, *out = F.out, *err = F.err, script[1200];
	snprintf(script, sizeof(script), "exec %s --scenario clean --iters 400 --markers step", sp_t_build("tests/bin/trainer"));
	pid_t j = job_bg(dir, script);
	nanosleep(&(struct timespec){3, 0}, NULL);
	kill(j, SIGKILL);
	int st;
	waitpid(j, &st, 0);
	int wst = wait_for(w, 30);
	char *o = sp_t_read_file(out, NULL), *e = sp_t_read_file(err, NULL);
	cr_assert(wst != -1, "the watcher did not end after the job was killed: %s", e);
	cr_expect(WIFEXITED(wst) && WEXITSTATUS(wst) == 0, "watcher status %d: %s", wst, e);
	struct ticks k;
	parse_ticks(o, &k);
	cr_assert_gt(k.n, 0);
	struct sp_json *last = sp_json_at(sp_json_get(k.t[k.n - 1], "ranks"), 0);
	cr_expect_gt(sp_json_num(last, "iterations", 0), 5, "iterations before the kill: %.0f",
		     sp_json_num(last, "iterations", 0));
	cr_expect_eq(sp_json_num(last, "ended", 0), 1);
	ticks_free(&k);
	free(o);
	free(e);
}

/*
 * The trace file truncated to nothing, then written over with garbage, while
 * its job runs (the job stops recording, one warning of its own): the watcher
 * says so once, carries on, and ends with the job.
 */
Test(watch, a_file_cut_and_overwritten_while_watched_is_one_warning, .timeout = 120)
{
	struct fault F;
	pid_t w = fault_start(&F);
	char *dir = F.dir, *out = F.out, *err = F.err, script[1200];
	/* 8 s of marks at 100,000 a second, a step every 1,000 */
	snprintf(script, sizeof(script), "exec %s -n 800000 -r 100000 -E 1000", sp_t_build("tests/bin/markgen"));
	pid_t j = job_bg(dir, script);
	nanosleep(&(struct timespec){2, 0}, NULL);
	char path[1000] = "";
	DIR *d = opendir(dir);
	struct dirent *de;
	while (d && (de = readdir(d)))
		if (strstr(de->d_name, ".sptrace"))
			snprintf(path, sizeof(path), "%s/%s", dir, de->d_name);
	if (d)
		closedir(d);
	cr_assert(path[0], "no trace file after 2 s");
	cr_assert_eq(truncate(path, 0), 0);
	nanosleep(&(struct timespec){1, 0}, NULL);
	char junk[65536];
	for (size_t i = 0; i < sizeof(junk); i++)
		junk[i] = (char)(i * 7919 + 13);
	memcpy(junk, "STEPPROF", 8);
	cr_assert_eq(sp_t_write_file(path, junk, sizeof(junk)), 0);
	int st;
	waitpid(j, &st, 0);
	cr_expect(WIFEXITED(st) && WEXITSTATUS(st) == 0, "the job did not survive its file's truncation");
	int wst = wait_for(w, 30);
	char *e = sp_t_read_file(err, NULL), *o = sp_t_read_file(out, NULL);
	cr_assert(wst != -1, "the watcher did not end with the job: %s", e);
	cr_expect(WIFEXITED(wst) && WEXITSTATUS(wst) == 0, "watcher status %d: %s", wst, e);
	/* one warning for the file (said once while it stays unreadable), no crash */
	size_t warns = 0;
	for (const char *p = e; (p = strstr(p, path)); p++)
		warns++;
	cr_expect(warns >= 1 && warns <= 3, "%zu warnings about the file: %s", warns, e);
	struct ticks k;
	parse_ticks(o, &k);
	cr_expect_gt(k.n, 3);
	ticks_free(&k);
	free(e);
	free(o);
}

/*
 * A job whose worker processes come and go every epoch (five epochs of two
 * short-lived workers beside a long-lived trainer): every file is followed as
 * it appears, the workers' end does not end the watch, and it ends with the
 * trainer, which it counted whole.
 */
Test(watch, workers_that_come_and_go_every_epoch, .timeout = 120)
{
	struct fault F;
	pid_t w = fault_start(&F);
	char *dir = F.dir, *out = F.out, *err = F.err, script[2400];
	const char *mg = sp_t_build("tests/bin/markgen");
	/* the trainer: 5 s of marks, 50 steps of 10,000 marks; the workers: 5 epochs of two */
	snprintf(script, sizeof(script),
		 "%s -n 500000 -r 100000 -E 10000 & t=$!; "
		 "for e in 1 2 3 4 5; do %s -n 20000 -m worker & %s -n 20000 -m worker & wait %%2 %%3 2>/dev/null; "
		 "sleep 0.8; done; wait $t",
		 mg, mg, mg);
	pid_t j = job_bg(dir, script);
	int st;
	waitpid(j, &st, 0);
	int wst = wait_for(w, 30);
	char *e = sp_t_read_file(err, NULL), *o = sp_t_read_file(out, NULL);
	cr_assert(wst != -1, "the watcher did not end with the job: %s", e);
	cr_expect(WIFEXITED(wst) && WEXITSTATUS(wst) == 0, "watcher status %d: %s", wst, e);
	struct ticks k;
	parse_ticks(o, &k);
	cr_assert_gt(k.n, 3);
	struct sp_json *lastt = k.t[k.n - 1];
	cr_expect_geq(sp_json_num(lastt, "processes", 0), 11, "processes seen: %.0f (1 trainer, 10 workers)",
		      sp_json_num(lastt, "processes", 0));
	struct sp_json *rk = sp_json_at(sp_json_get(lastt, "ranks"), 0);
	/* 50 steps: 49 iterations between them and the one after the last */
	cr_expect_geq(sp_json_num(rk, "iterations", 0), 49, "the trainer's iterations: %.0f",
		      sp_json_num(rk, "iterations", 0));
	for (size_t i = 0; i + 1 < k.n; i++)
		cr_expect_eq(sp_json_num(k.t[i], "ended", 0), 0, "tick %zu said the job ended while it ran", i);
	ticks_free(&k);
	free(e);
	free(o);
}
