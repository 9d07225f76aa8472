/*
 * test_capture.c - the capture range (STEPPROF_CAPTURE, docs/recorder.md) on
 * the synthetic trainer: `--profiler-range 10-20` calls cudaProfilerStart
 * before iteration 10 and cudaProfilerStop before iteration 20 (of 30, marked
 * with stepprof_step), and `stepprof analyze --json` must give exactly
 * iterations 10..19: ten of them, beginning where the trainer's iteration 10
 * began and ending where its iteration 19 ended (its ground truth, within
 * 1 ms: an iteration lasts ~5 ms, so one more or one less is far outside).
 *
 *   - cudaProfilerApi through the PLT (the runtime, whose cudaProfilerStart
 *     calls the driver's), through dlsym (the driver's cuProfilerStart looked
 *     up by handle), through cudaGetDriverEntryPointByVersion, and with the static
 *     runtime (the driver's, reached through cuGetProcAddress);
 *   - steps:10-20 without any profiler call gives the same iterations;
 *   - without the variable, and with a bad value (one `stepprof:` warning),
 *     every iteration;
 *   - device memory allocated before the range is in the books inside it;
 *   - loader workers forked before the range record inside it.
 */
#include <criterion/criterion.h>

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "testlib.h"
#include "trainerlib.h"

TestSuite(capture, .fini = sp_t_remove_cur_dir);

#define ITERS  30
#define FROM   10
#define TO     20
#define TOL_NS 1000000.0

struct cap_run {
	struct sp_json *truth, *an;
	char err[4096]; /* the trainer's stderr (stepprof: warnings) */
};

/*
 * build/tests/bin/<bin> --iters 30 --markers step --profiler-range 10-20
 * --leak-bytes 1M [extra: options separated by spaces] under the preload with
 * STEPPROF_CAPTURE=capture (NULL: unset); the trainer's ground truth and the analysis.
 */
static void run(struct cap_run *c, const char *bin, const char *capture, const char *extra)
{
	sp_t_cur_dir = sp_t_tmpdir("capture");
	char tdir[4096], env_dir[4200], env_cap[128];
	snprintf(tdir, sizeof(tdir), "%s/trace", sp_t_cur_dir);
	snprintf(env_dir, sizeof(env_dir), "STEPPROF_DIR=%s", tdir);
	snprintf(env_cap, sizeof(env_cap), "STEPPROF_CAPTURE=%s", capture ? capture : "");
	char *pre = sp_t_preload_env();
	/* NULL: "STEPPROF_CAPTURE=", which sp_t_run takes as unset */
	char *env[] = {pre, env_dir, "STEPPROF_MAX_MB=64", env_cap, NULL};
	char *argv[16];
	int n = 0;
	argv[n++] = (char *)sp_t_build(bin);
	argv[n++] = "--iters";
	argv[n++] = "30";
	argv[n++] = "--markers";
	argv[n++] = "step";
	argv[n++] = "--profiler-range";
	argv[n++] = "10-20";
	argv[n++] = "--leak-bytes";
	argv[n++] = "1M";
	char words[256];
	snprintf(words, sizeof(words), "%s", extra ? extra : "");
	char *save = NULL;
	for (char *w = strtok_r(words, " ", &save); w && n < 15; w = strtok_r(NULL, " ", &save))
		argv[n++] = w;
	argv[n] = NULL;
	struct sp_t_result r;
	sp_t_run(&r, argv, env, NULL, 120);
	free(pre);
	cr_assert_eq(r.status, 0, "%s: exit %d: %s", bin, r.status, r.err);
	c->truth = sp_t_parse_last_line(r.out);
	cr_assert_not_null(c->truth, "no ground truth: %s", r.out);
	snprintf(c->err, sizeof(c->err), "%s", r.err ? r.err : "");
	sp_t_result_free(&r);

	char *av[] = {(char *)sp_t_build("bin/stepprof"), "analyze", "--json", tdir, NULL};
	sp_t_run(&r, av, NULL, NULL, 120);
	cr_assert_eq(r.status, 0, "stepprof analyze --json: exit %d: %s", r.status, r.err);
	c->an = sp_json_parse(r.out);
	cr_assert_not_null(c->an, "not JSON: %s", r.out);
	sp_t_result_free(&r);
}

static void cap_free(struct cap_run *c)
{
	sp_json_free(c->truth);
	sp_json_free(c->an);
}

static double num(const struct sp_json *j, const char *arr, size_t i, const char *field)
{
	char path[96];
	snprintf(path, sizeof(path), "%s.%zu.%s", arr, i, field);
	struct sp_json *v = sp_json_path(j, path);
	cr_assert(v && v->type == SPJ_NUM, "missing number %s", path);
	return v->num;
}

/* The analysis holds the trainer's iterations first..last-1, no more, no fewer. */
static void expect_iterations(const struct cap_run *c, unsigned first, unsigned last, const char *what)
{
	struct sp_json *its = sp_json_get(c->an, "iterations");
	cr_assert_not_null(its, "%s: no iterations[]", what);
	cr_assert_eq(its->n, last - first, "%s: %zu iterations analysed, the range holds %u (%u..%u)", what, its->n,
		     last - first, first, last - 1);
	double s = num(c->an, "iterations", 0, "start_ns"), e = num(c->an, "iterations", its->n - 1, "end_ns");
	double ts = num(c->truth, "iterations", first, "start_ns"),
	       te = num(c->truth, "iterations", last - 1, "end_ns");
	sp_t_note("%s: analysed %.3f..%.3f ms, the trainer's iterations %u..%u %.3f..%.3f ms", what, s / 1e6, e / 1e6,
		  first, last - 1, ts / 1e6, te / 1e6);
	cr_expect(fabs(s - ts) <= TOL_NS, "%s: the first iteration begins %.3f ms from the trainer's iteration %u",
		  what, (s - ts) / 1e6, first);
	cr_expect(fabs(e - te) <= TOL_NS,
		  "%s: the last iteration ends %.3f ms from the end of the trainer's iteration %u", what,
		  (e - te) / 1e6, last - 1);
}

/* Run the trainer (bin) with STEPPROF_CAPTURE=capture and extra options: the analysis holds its iterations
 * first..last-1. */
static void expect_range(const char *bin, const char *capture, const char *extra, unsigned first, unsigned last,
			 const char *what)
{
	struct cap_run c;
	run(&c, bin, capture, extra);
	expect_iterations(&c, first, last, what);
	cap_free(&c);
}

Test(capture, cuda_profiler_api_through_the_plt_records_only_the_range, .timeout = 180)
{
	expect_range("tests/bin/trainer", "cudaProfilerApi", NULL, FROM, TO, "cudaProfilerStart/Stop (PLT)");
}

Test(capture, cuda_profiler_api_through_dlsym_records_only_the_range, .timeout = 180)
{
	expect_range("tests/bin/trainer", "cudaProfilerApi", "--profiler-dlsym", FROM, TO,
		     "cuProfilerStart/Stop (dlsym)");
}

Test(capture, cuda_profiler_api_through_the_runtimes_entry_point_records_only_the_range, .timeout = 180)
{
	expect_range("tests/bin/trainer", "cudaProfilerApi", "--profiler-entry-point", FROM, TO,
		     "cuProfilerStart/Stop (cudaGetDriverEntryPointByVersion)");
}

Test(capture, cuda_profiler_api_of_a_static_runtime_records_only_the_range, .timeout = 180)
{
	expect_range("tests/bin/trainer-static", "cudaProfilerApi", NULL, FROM, TO,
		     "static runtime (cuGetProcAddress)");
}

/* NVTX step ranges (train_step) inside the range: the ranges of iterations 10..19, no other */
Test(capture, cuda_profiler_api_around_nvtx_steps_records_only_the_range, .timeout = 180)
{
	struct cap_run c;
	run(&c, "tests/bin/trainer", "cudaProfilerApi", "--markers nvtx");
	expect_iterations(&c, FROM, TO, "NVTX steps, cudaProfilerStart/Stop");
	cr_expect_str_eq(sp_json_str(c.an, "iteration_source"), "nvtx");
	cap_free(&c);
}

Test(capture, steps_range_records_from_mark_a_to_mark_b, .timeout = 180)
{
	expect_range("tests/bin/trainer", "steps:10-20", NULL, FROM, TO, "steps:10-20");
	expect_range("tests/bin/trainer", "steps:0-3", NULL, 0, 3, "steps:0-3");
}

Test(capture, without_the_variable_every_iteration_is_recorded, .timeout = 180)
{
	expect_range("tests/bin/trainer", NULL, NULL, 0, ITERS, "no STEPPROF_CAPTURE");
	expect_range("tests/bin/trainer", "all", NULL, 0, ITERS, "STEPPROF_CAPTURE=all");
}

/*
 * Two loader workers forked at set-up, before the range: they record inside
 * the range their trainer opens (the files of iterations 10..19, 4 each, as
 * the ground truth counts them) and are workers of the analysis.
 */
Test(capture, workers_forked_before_the_range_record_inside_it, .timeout = 180)
{
	struct cap_run c;
	run(&c, "tests/bin/trainer", "cudaProfilerApi", "--workers 2 --files-per-iter 4 --file-size 64K");
	expect_iterations(&c, FROM, TO, "workers, cudaProfilerStart/Stop");
	double got = 0, want = 0, workers = 0;
	for (unsigned i = 0; i < TO - FROM; i++)
		got += num(c.an, "iterations", i, "files_opened");
	for (unsigned i = FROM; i < TO; i++)
		want += num(c.truth, "iterations", i, "files_opened");
	struct sp_json *ps = sp_json_get(c.an, "processes");
	for (size_t i = 0; ps && i < ps->n; i++) {
		const char *role = sp_json_str(sp_json_at(ps, i), "role");
		workers += role && !strcmp(role, "worker");
	}
	cr_expect_gt(want, 0, "the trainer read no file in iterations %d..%d", FROM, TO - 1);
	cr_expect_eq(got, want, "files opened in the range: %.0f, the trainer's iterations %d..%d opened %.0f", got,
		     FROM, TO - 1, want);
	cr_expect_eq(workers, 2, "%.0f worker processes analysed, the trainer forked 2", workers);
	cap_free(&c);
}

static int stepprof_lines(const char *err)
{
	int n = 0;
	for (const char *p = err; (p = strstr(p, "stepprof: ")); p++)
		n++;
	return n;
}

Test(capture, a_bad_value_warns_once_and_records_everything, .timeout = 300)
{
	static const char *const bad[] = {"steps:20-10", "steps:10", "cudaprofilerapi", "steps:-1-5"};
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		struct cap_run c;
		run(&c, "tests/bin/trainer", bad[i], NULL);
		cr_expect_eq(stepprof_lines(c.err), 1, "STEPPROF_CAPTURE=%s: expected one stepprof: line:\n%s", bad[i],
			     c.err);
		cr_expect_not_null(strstr(c.err, "STEPPROF_CAPTURE"), "the warning names the variable:\n%s", c.err);
		expect_iterations(&c, 0, ITERS, bad[i]);
		cap_free(&c);
	}
}

/*
 * The trainer allocates its buffers, then 1 MiB a step (--leak-bytes 1M): at
 * iteration 10, the first of the range, 11 MiB were leaked and the buffers
 * live. Booked only inside the range, the peak would be 1 MiB.
 */
Test(capture, memory_allocated_before_the_range_is_counted_inside_it, .timeout = 180)
{
	struct cap_run c;
	run(&c, "tests/bin/trainer", "cudaProfilerApi", NULL);
	double h2d = sp_json_num(c.truth, "config.h2d_bytes", -1);
	cr_assert(h2d >= 0, "the ground truth has no config.h2d_bytes");
	double want = h2d + (FROM + 1) * (double)(1 << 20);
	double peak = num(c.an, "iterations", 0, "device_bytes_peak");
	cr_expect(peak >= want, "device peak of the range's first iteration %.0f B, at least %.0f B were live", peak,
		  want);
	cap_free(&c);
}
