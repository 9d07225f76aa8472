/*
 * test_trainer.c - the synthetic trainer (tests/workloads/cuda/trainer.c) and
 * its ground truth, on the simulated GPU, without and with the preload.
 *
 *   1. helpers: run the trainer, parse its one JSON line
 *   2. the invariants every scenario's ground truth must meet, checked against
 *      the options (what the workload was told to do), not against itself
 *   3. one test per scenario, with what makes that scenario what it is
 *   4. variants: static runtime, markers, jitter, the preload, bad options
 *
 * Runs are shortened (--iters 8) to keep the suite fast; the scenario accuracy
 * tests (test_scenarios.c) run them at full length.
 */
#include <criterion/criterion.h>

#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "reader.h"
#include "testlib.h"

/* ---- 1. helpers ---- */

#define NO_PRELOAD "LD_PRELOAD=", "STEPPROF_DIR=", "NVTX_INJECTION64_PATH="

struct run {
	struct sp_t_result res;
	struct sp_json *j;
};

/* Run build/<bin> (tests/bin/...) with args (NULL-terminated) and env; expects exit 0 and one JSON line. */
static void run_trainer(struct run *r, const char *bin, const char *const *args, char *const *env)
{
	const char *path = sp_t_build(bin);
	char *argv[64];
	int n = 0;

	cr_assert(access(path, X_OK) == 0, "%s is not built (make; it needs the simulated GPU)", path);
	argv[n++] = (char *)path;
	for (; args && *args && n < 63; args++)
		argv[n++] = (char *)*args;
	argv[n] = NULL;
	memset(r, 0, sizeof(*r));
	int st = sp_t_run(&r->res, argv, env, NULL, 120);
	cr_assert_eq(st, 0, "%s exited %d; stderr:\n%s", path, st, r->res.err);
	size_t lines = 0;
	for (size_t i = 0; i < r->res.outlen; i++)
		lines += r->res.out[i] == '\n';
	cr_assert_eq(lines, 1, "expected one line of JSON on stdout, got %zu:\n%s", lines, r->res.out);
	r->j = sp_json_parse(r->res.out);
	cr_assert(r->j, "ground truth is not JSON:\n%s", r->res.out);
	cr_assert_str_eq(sp_json_str(r->j, "schema"), "stepprof.trainer/1");
}

static void run_free(struct run *r)
{
	sp_json_free(r->j);
	sp_t_result_free(&r->res);
}

static uint64_t u(const struct sp_json *j, const char *path)
{
	struct sp_json *v = sp_json_path(j, path);
	cr_assert(v && v->type == SPJ_NUM, "missing number %s", path);
	return sp_json_u64(j, path, 0);
}

static uint64_t iu(const struct sp_json *j, size_t i, const char *field)
{
	char path[128];
	snprintf(path, sizeof(path), "iterations.%zu.%s", i, field);
	return u(j, path);
}

static const char *const cats[] = {
#define SP_CATEGORY(id, name) name,
#include "stepprof/categories.def"
#undef SP_CATEGORY
};

/* ---- 2. invariants of every ground truth, against the options it ran with ---- */

static void check_invariants(const struct sp_json *j)
{
	uint64_t iters = u(j, "config.iters"), kernels = u(j, "config.kernels"), syncs = u(j, "config.syncs");
	uint64_t h2d = u(j, "config.h2d_bytes"), d2h = u(j, "config.d2h_bytes"), item = u(j, "config.item_bytes");
	uint64_t files = u(j, "config.files_per_iter"), fsize = u(j, "config.file_size");
	uint64_t kernel_us = u(j, "config.kernel_us");
	/* --kernel-step-at N --kernel-step-us U: each kernel's time from iteration N on */
	uint64_t step_at = u(j, "config.kernel_step_at"), step_us = u(j, "config.kernel_step_us");
	/* every N-th iteration: a logged loss (4-byte pageable D2H, sync), a checkpoint's files written */
	uint64_t log_every = u(j, "config.log_every"), ck_every = u(j, "config.checkpoint_every");
	double jit = sp_json_num(j, "config.jitter_pct", 0) / 100.0;
	struct sp_json *its = sp_json_get(j, "iterations");
	bool pageable = sp_json_path(j, "config.pinned")->num == 0;

	cr_assert(its && its->type == SPJ_ARR);
	cr_assert_eq(its->n, iters, "iterations: %zu, --iters %llu", its->n, (unsigned long long)iters);
	for (size_t i = 0; i < its->n; i++) {
		uint64_t start = iu(j, i, "start_ns"), end = iu(j, i, "end_ns"), wall = iu(j, i, "wall_ns");
		cr_assert_gt(end, start);
		cr_assert_eq(wall, end - start);
		if (i + 1 < its->n)
			cr_assert_eq(end, iu(j, i + 1, "start_ns"), "iterations %zu and %zu do not tile", i, i + 1);

		/* a partition: the six categories sum to the wall time */
		uint64_t sum = 0;
		for (int c = 0; c < (int)(sizeof(cats) / sizeof(cats[0])); c++) {
			char f[64];
			snprintf(f, sizeof(f), "breakdown_ns.%s", cats[c]);
			sum += iu(j, i, f);
		}
		cr_assert_eq(sum, wall, "iteration %zu: categories sum to %llu, wall %llu", i, (unsigned long long)sum,
			     (unsigned long long)wall);
		/* why the trainer waited: a partition of its input time, all file calls without workers */
		uint64_t in = iu(j, i, "breakdown_ns.input"), io = iu(j, i, "input_split_ns.input_io");
		cr_assert_eq(io + iu(j, i, "input_split_ns.input_cpu") + iu(j, i, "input_split_ns.input_wait"), in,
			     "iteration %zu: input_split_ns does not sum to input %llu", i, (unsigned long long)in);
		if (!u(j, "config.workers"))
			cr_assert_eq(io, in, "iteration %zu: input_io %llu of input %llu without workers", i,
				     (unsigned long long)io, (unsigned long long)in);
		/* input and sync are low in the priority order: never more than the blocked time */
		cr_assert_leq(iu(j, i, "breakdown_ns.input"), iu(j, i, "host_blocked_ns.input"));
		cr_assert_leq(iu(j, i, "breakdown_ns.sync"), iu(j, i, "host_blocked_ns.sync"));
		cr_assert_eq(iu(j, i, "gpu_busy_ns") + iu(j, i, "gpu_idle_ns"), wall);

		/* every kernel slept at least its (jittered) duration, on one stream: back to back at most */
		uint64_t k_us = step_at && i >= step_at ? step_us : kernel_us;
		uint64_t slept_min = (uint64_t)((double)kernels * (double)k_us * 1000.0 * (1.0 - jit));
		cr_assert_geq(iu(j, i, "kernel_ns"), slept_min, "iteration %zu: kernels ran %llu ns < %llu", i,
			      (unsigned long long)iu(j, i, "kernel_ns"), (unsigned long long)slept_min);
		cr_assert_geq(iu(j, i, "breakdown_ns.compute"), slept_min);
		cr_assert_leq(iu(j, i, "breakdown_ns.compute"), iu(j, i, "kernel_ns"));

		/* what the iteration issued, from the options */
		uint64_t lg = log_every && (i + 1) % log_every == 0, ck = ck_every && (i + 1) % ck_every == 0;
		cr_assert_eq(iu(j, i, "launches"), kernels);
		cr_assert_eq(iu(j, i, "syncs"), syncs + 1 + lg);
		cr_assert_eq(iu(j, i, "copies"), (h2d > 0) + syncs * (item > 0) + (d2h > 0) + lg);
		cr_assert_eq(iu(j, i, "h2d_bytes"), h2d);
		cr_assert_eq(iu(j, i, "d2h_bytes"), d2h + syncs * item + 4 * lg);
		/* .item() copies go to pageable memory whatever --pinned says */
		cr_assert_eq(iu(j, i, "pageable_copies"), pageable ? iu(j, i, "copies") : syncs * (item > 0) + lg);
		/* a checkpoint's files are written: output, no files of the iteration */
		cr_assert_eq(iu(j, i, "files_opened"), files, "ck %d", (int)ck);
		cr_assert_eq(iu(j, i, "stats"), files);
		cr_assert_eq(iu(j, i, "metadata_ops"), 2 * files);
		cr_assert_eq(iu(j, i, "bytes_read"), files * fsize);
		cr_assert_geq(iu(j, i, "device_bytes_peak"), iu(j, i, "device_bytes_live"));
		if (files) {
			uint64_t rb = iu(j, i, "batch.read_begin_ns"), re = iu(j, i, "batch.read_end_ns");
			/* every file is read inside the run: after the first iteration began */
			cr_assert(rb >= iu(j, 0, "start_ns") && re >= rb && re <= end,
				  "iteration %zu: batch read [%llu, %llu]", i, (unsigned long long)rb,
				  (unsigned long long)re);
		}
	}
	/* totals: the loop's calls plus setup (buffers, stream) and teardown */
	cr_assert_eq(u(j, "totals.iterations"), iters);
	cr_assert_eq(u(j, "totals.launches"), iters * kernels);
	cr_assert_eq(u(j, "totals.by_api.cudaLaunchKernel"), iters * kernels);
	uint64_t logs = log_every ? iters / log_every : 0;
	cr_assert_eq(u(j, "totals.syncs"), iters * (syncs + 1) + logs);
	cr_assert_eq(u(j, "totals.by_api.cudaDeviceSynchronize"), iters * (syncs / 2));
	cr_assert_eq(u(j, "totals.copies"), iters * ((h2d > 0) + syncs * (item > 0) + (d2h > 0)) + logs);
	cr_assert_eq(u(j, "totals.files_opened"), iters * files);
	cr_assert_eq(u(j, "totals.bytes_read"), iters * files * fsize);
	cr_assert_eq(u(j, "totals.wall_ns"), iu(j, iters - 1, "end_ns") - iu(j, 0, "start_ns"));
	cr_assert_eq(u(j, "totals.by_api.cudaStreamCreate"), 1);
	cr_assert_eq(u(j, "totals.by_api.cudaStreamDestroy"), 1);
	cr_assert_eq(u(j, "totals.host_allocs"), u(j, "totals.host_frees"));
	cr_assert_eq(u(j, "totals.by_api.cudaHostAlloc"), pageable ? 0 : u(j, "totals.host_allocs"));
}

static void run_scenario(struct run *r, const char *name, const char *const *extra)
{
	const char *args[32] = {"--scenario", name, "--iters", "8"};
	int n = 4;
	for (; extra && *extra && n < 31; extra++)
		args[n++] = *extra;
	args[n] = NULL;
	char *env[] = {NO_PRELOAD, NULL};
	run_trainer(r, "tests/bin/trainer", args, env);
	cr_assert_str_eq(sp_json_str(r->j, "config.scenario"), name);
	check_invariants(r->j);
}

static double frac(const struct sp_json *j, const char *cat)
{
	char path[64];
	snprintf(path, sizeof(path), "summary.breakdown_fraction.%s", cat);
	return sp_json_num(j, path, -1);
}

/* ---- 3. scenarios ---- */

Test(trainer, input_bound_waits_for_loader_workers, .timeout = 120)
{
	struct run r;
	run_scenario(&r, "input-bound", NULL);
	struct sp_json *pids = sp_json_get(r.j, "worker_pids");
	cr_assert_eq(pids->n, 4);
	/* the batches were read by the workers, not the trainer */
	for (size_t i = 0; i < 8; i++) {
		uint64_t reader = iu(r.j, i, "batch.reader_pid");
		bool found = false;
		for (size_t w = 0; w < pids->n; w++)
			found |= (uint64_t)sp_json_at(pids, w)->num == reader;
		cr_assert(found && reader != u(r.j, "pid"), "batch %zu read by pid %llu", i,
			  (unsigned long long)reader);
	}
	/* 4 workers each taking >= 100 ms per batch: >= 25 ms per batch in the steady state, the trainer
	 * needs ~6 ms; so it waits for most of each iteration */
	cr_assert_str_eq(sp_json_str(r.j, "summary.bottleneck"), "input");
	cr_assert_gt(frac(r.j, "input"), 0.5, "input share %.3f", frac(r.j, "input"));
	cr_assert_eq(u(r.j, "totals.metadata_ops"), 8 * 256);
	run_free(&r);
}

Test(trainer, pageable_h2d_bound_blocks_in_the_copy, .timeout = 120)
{
	struct run r;
	run_scenario(&r, "pageable-h2d-bound", NULL);
	cr_assert_str_eq(sp_json_str(r.j, "summary.bottleneck"), "h2d");
	/* 32 MiB at the simulated 2 GB/s pageable bandwidth: >= 16.7 ms blocked in each H2D call */
	for (size_t i = 0; i < 8; i++)
		cr_assert_geq(iu(r.j, i, "host_blocked_ns.h2d"), 32ull * 1048576 / 2 * 95 / 100, "iteration %zu", i);
	cr_assert_eq(u(r.j, "totals.pageable_copies"), 8 * 2);
	run_free(&r);
}

Test(trainer, compute_bound_is_mostly_kernels, .timeout = 120)
{
	struct run r;
	run_scenario(&r, "compute-bound", NULL);
	double c = frac(r.j, "compute");
	for (int k = 0; k < (int)(sizeof(cats) / sizeof(cats[0])); k++)
		if (strcmp(cats[k], "compute"))
			cr_assert_gt(c, frac(r.j, cats[k]), "compute %.3f <= %s %.3f", c, cats[k], frac(r.j, cats[k]));
	cr_assert_gt(c, 0.6, "compute share %.3f", c);
	run_free(&r);
}

/* The kernels' mean measured duration in iteration i, in µs. */
static double mean_kernel_us(const struct sp_json *j, size_t i)
{
	return (double)iu(j, i, "kernel_ns") / (double)iu(j, i, "launches") / 1000.0;
}

/*
 * Hundreds of 15 µs kernels, each after 25 µs of host work (--launch-host-us):
 * the GPU waits for the launches. Each short kernel takes about its 15 µs (it
 * spins: a sleep would overshoot by the timer slack, ~65 µs, and the loop would
 * be GPU-bound), the host spins at least its 25 µs per launch, and compute is a
 * minority share of the wall time.
 */
/* The first of r's 8 iterations whose kernels took twice their --kernel-us or more on average, -1 when none. */
static long slow_kernel_iteration(const struct run *r)
{
	for (size_t i = 0; i < 8; i++)
		if (mean_kernel_us(r->j, i) >= 2.0 * (double)u(r->j, "config.kernel_us"))
			return (long)i;
	return -1;
}

/* NOTE: up to three runs, as gpu_bound_keeps_the_gpu_busy: a loaded machine stretches the spun kernels. */
Test(trainer, launch_bound_waits_for_the_host, .timeout = 240)
{
	struct run r;
	for (int attempt = 1;; attempt++) {
		run_scenario(&r, "launch-bound", NULL);
		if (attempt == 3 || slow_kernel_iteration(&r) < 0)
			break;
		sp_t_note("trainer: launch-bound: iteration %ld's kernels took twice their time: run %d of 3",
			  slow_kernel_iteration(&r), attempt);
		run_free(&r);
	}
	uint64_t kernels = u(r.j, "config.kernels"), launch_us = u(r.j, "config.launch_host_us");
	cr_assert_geq(kernels, 100);
	cr_assert_gt(launch_us, u(r.j, "config.kernel_us"));
	for (size_t i = 0; i < 8; i++) {
		double k = mean_kernel_us(r.j, i);
		cr_assert(k < 2.0 * (double)u(r.j, "config.kernel_us"), "iteration %zu: kernels of %.1f µs on average",
			  i, k);
		cr_assert_geq(iu(r.j, i, "wall_ns"), kernels * launch_us * 1000, "iteration %zu", i);
		/* one stream, every kernel done by the iteration's sync: compute is the kernels' sum */
		cr_assert_eq(iu(r.j, i, "breakdown_ns.compute"), iu(r.j, i, "kernel_ns"), "iteration %zu", i);
	}
	double c = frac(r.j, "compute");
	cr_assert(c > 0.1 && c < 0.5, "compute share %.3f", c);
	cr_assert_gt(frac(r.j, "other"), c, "the host's launches are the larger share");
	run_free(&r);
}

/* Every iteration of r keeps the GPU busy 80% of its wall time at least (the first such that does not, or -1). */
static long gpu_idle_iteration(const struct run *r)
{
	for (size_t i = 0; i < 8; i++)
		if (iu(r->j, i, "gpu_busy_ns") < iu(r->j, i, "wall_ns") * 8 / 10)
			return (long)i;
	return -1;
}

/*
 * A deep queue: the host launches a step's 100 kernels at once and waits at the sync.
 * NOTE: up to three runs, as the suite's other timing tests: on a loaded machine the
 * simulated GPU's stream thread wakes late between two kernels, and an iteration of
 * 30 ms sleeps can fall under 80% busy; a trainer that did not queue its kernels
 * would leave the GPU idle in every run.
 */
Test(trainer, gpu_bound_keeps_the_gpu_busy, .timeout = 240)
{
	struct run r;
	for (int attempt = 1;; attempt++) {
		run_scenario(&r, "gpu-bound", NULL);
		if (attempt == 3 || (frac(r.j, "compute") > 0.8 && gpu_idle_iteration(&r) < 0))
			break;
		sp_t_note("trainer: gpu-bound: compute %.3f, iteration %ld under 80%% busy: run %d of 3",
			  frac(r.j, "compute"), gpu_idle_iteration(&r), attempt);
		run_free(&r);
	}
	cr_assert_gt(frac(r.j, "compute"), 0.8, "compute share %.3f", frac(r.j, "compute"));
	cr_assert_str_eq(sp_json_str(r.j, "summary.bottleneck"), "compute");
	cr_assert_lt(gpu_idle_iteration(&r), 0, "iteration %ld: the GPU busy under 80%% of it",
		     gpu_idle_iteration(&r));
	run_free(&r);
}

static int cmp_double(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;
	return x < y ? -1 : x > y;
}

/*
 * --kernel-step-at 4 --kernel-step-us 40: the same kernel takes 15 µs in
 * iterations 0-3 and 40 µs from iteration 4 on, each as measured by the kernel.
 * A loaded machine stretches a simulated kernel (its stream's worker thread is
 * preempted): the means are compared with each other, by the medians of the
 * iterations before and after the step (25 µs apart, at least 15 here), and
 * each is at least what the kernel was told.
 */
Test(trainer, kernel_step_changes_the_kernels_duration, .timeout = 120)
{
	struct run r;
	const char *more[] = {"--kernel-step-at", "4", "--kernel-step-us", "40", NULL};
	run_scenario(&r, "launch-bound", more);
	cr_assert_eq(u(r.j, "config.kernel_step_at"), 4);
	cr_assert_eq(u(r.j, "config.kernel_step_us"), 40);
	double before[4], after[4];
	for (size_t i = 0; i < 8; i++) {
		double k = mean_kernel_us(r.j, i);
		cr_expect_geq(k, i < 4 ? 15 : 40, "iteration %zu: %.1f µs", i, k);
		(i < 4 ? before : after)[i % 4] = k;
	}
	qsort(before, 4, sizeof(double), cmp_double);
	qsort(after, 4, sizeof(double), cmp_double);
	double mb = (before[1] + before[2]) / 2, ma = (after[1] + after[2]) / 2;
	cr_expect_geq(ma - mb, 15, "median kernel %.1f µs before the step, %.1f µs after", mb, ma);
	run_free(&r);
}

Test(trainer, clean_has_steady_memory_and_pinned_copies, .timeout = 120)
{
	struct run r;
	run_scenario(&r, "clean", NULL);
	cr_assert_eq(u(r.j, "totals.pageable_copies"), 0);
	cr_assert_eq(u(r.j, "totals.alloc_failures"), 0);
	uint64_t live0 = iu(r.j, 0, "device_bytes_live");
	cr_assert_eq(live0, u(r.j, "config.h2d_bytes") + u(r.j, "config.d2h_bytes"), "setup buffers: h2d + d2h");
	cr_assert_eq(live0, 4ull * 1048576 + 1048576, "the clean scenario: 4 MiB h2d + 1 MiB d2h buffers");
	for (size_t i = 0; i < 8; i++) {
		cr_assert_eq(iu(r.j, i, "device_bytes_live"), live0);
		cr_assert_eq(iu(r.j, i, "allocs"), 0);
	}
	run_free(&r);
}

Test(trainer, fragmenting_fails_with_enough_free_then_flushes, .timeout = 120)
{
	struct run r;
	run_scenario(&r, "fragmenting", NULL);
	uint64_t fi = u(r.j, "config.fragment_iter");
	cr_assert_eq(fi, 4);
	struct sp_json *f = sp_json_get(r.j, "alloc_failures");
	cr_assert_eq(f->n, 1, "failures: %zu", f->n);
	cr_assert_eq(u(r.j, "alloc_failures.0.iteration"), fi);
	uint64_t req = u(r.j, "alloc_failures.0.request"), fr = u(r.j, "alloc_failures.0.free");
	cr_assert_geq(fr, req, "free %llu < request %llu: not fragmentation", (unsigned long long)fr,
		      (unsigned long long)req);
	cr_assert_gt(req, 8ull << 20, "the request must be larger than an 8 MiB hole");
	cr_assert_gt(u(r.j, "alloc_failures.0.flushed_segments"), 1);
	cr_assert(sp_json_path(r.j, "alloc_failures.0.retry_ok")->num == 1);
	cr_assert_eq(iu(r.j, fi, "alloc_failures"), 1);
	for (size_t i = 0; i < 8; i++) {
		if (i != fi)
			cr_assert_eq(iu(r.j, i, "allocs"), 0);
		/* everything the pattern took is given back within the iteration */
		cr_assert_eq(iu(r.j, i, "device_bytes_live"), iu(r.j, 0, "device_bytes_live"));
	}
	cr_assert_eq(iu(r.j, fi, "allocs"), iu(r.j, fi, "frees") + 1, "allocs = frees + the failed one");
	cr_assert_gt(iu(r.j, fi, "device_bytes_peak"), u(r.j, "device.total_bytes") / 2);
	run_free(&r);
}

Test(trainer, leaking_grows_by_the_leak_each_iteration, .timeout = 120)
{
	struct run r;
	run_scenario(&r, "leaking", NULL);
	for (size_t i = 1; i < 8; i++)
		cr_assert_eq(iu(r.j, i, "device_bytes_live") - iu(r.j, i - 1, "device_bytes_live"), 8ull << 20);
	for (size_t i = 0; i < 8; i++)
		cr_assert_eq(iu(r.j, i, "allocs"), 1);
	cr_assert_eq(u(r.j, "summary.device_bytes_peak"), iu(r.j, 7, "device_bytes_peak"));
	run_free(&r);
}

Test(trainer, sync_heavy_syncs_after_each_kernel, .timeout = 120)
{
	struct run r;
	run_scenario(&r, "sync-heavy", NULL);
	/* 19 extra syncs alternate stream (even) and device (odd), plus the final stream sync */
	cr_assert_eq(u(r.j, "totals.by_api.cudaStreamSynchronize"), 8 * (10 + 1));
	cr_assert_eq(u(r.j, "totals.by_api.cudaDeviceSynchronize"), 8 * 9);
	cr_assert_eq(u(r.j, "totals.pageable_copies"), 8 * 19);
	for (size_t i = 0; i < 8; i++)
		cr_assert_gt(iu(r.j, i, "host_blocked_ns.sync"), 0);
	run_free(&r);
}

/*
 * --log-every 4: after iterations 3 and 7, one more 4-byte pageable D2H and one
 * more stream sync; --checkpoint-every 4 --checkpoint-files 3: three files
 * written there too, output, not input (no files of the iteration), and removed
 * at exit.
 */
Test(trainer, log_every_and_checkpoint_every_act_every_n_iterations, .timeout = 120)
{
	char *tmp = sp_t_tmpdir("trainer-ckpt");
	char env_tmp[600];
	snprintf(env_tmp, sizeof(env_tmp), "TMPDIR=%s", tmp);
	struct run r;
	const char *args[] = {
	    "--scenario",	  "clean", "--iters", "8", "--log-every", "4", "--checkpoint-every", "4",
	    "--checkpoint-files", "3",	   NULL};
	char *env[] = {NO_PRELOAD, env_tmp, NULL};
	run_trainer(&r, "tests/bin/trainer", args, env);
	check_invariants(r.j);
	cr_expect_eq(iu(r.j, 3, "pageable_copies"), 1);
	cr_expect_eq(iu(r.j, 7, "files_opened"), 2, "the batch's: the checkpoint's files are written");
	cr_expect_eq(iu(r.j, 7, "bytes_read"), 2 * (2u << 20), "the batch's: the checkpoint's files are not read");
	DIR *d = opendir(tmp);
	cr_assert_not_null(d);
	int left = 0;
	for (struct dirent *de; (de = readdir(d));)
		left += de->d_name[0] != '.';
	closedir(d);
	cr_expect_eq(left, 0, "the data and checkpoint directories are removed at exit");
	run_free(&r);
	sp_t_rmrf(tmp);
	free(tmp);
}

/* ---- 4. variants ---- */

/* Counters that must not depend on how the trainer was linked, marked or profiled. */
static void assert_same_counts(const struct sp_json *a, const struct sp_json *b)
{
	static const char *const fields[] = {"files_opened",
					     "stats",
					     "bytes_read",
					     "h2d_bytes",
					     "d2h_bytes",
					     "pageable_copies",
					     "copies",
					     "launches",
					     "syncs",
					     "allocs",
					     "frees",
					     "alloc_failures",
					     "device_bytes_live",
					     "device_bytes_peak"};
	struct sp_json *ia = sp_json_get(a, "iterations"), *ib = sp_json_get(b, "iterations");
	cr_assert_eq(ia->n, ib->n);
	for (size_t i = 0; i < ia->n; i++)
		for (size_t k = 0; k < sizeof(fields) / sizeof(fields[0]); k++)
			cr_assert_eq(iu(a, i, fields[k]), iu(b, i, fields[k]), "iteration %zu: %s differs", i,
				     fields[k]);
	struct sp_json *ta = sp_json_path(a, "totals.by_api"), *tb = sp_json_path(b, "totals.by_api");
	cr_assert_eq(ta->n, tb->n);
	for (size_t k = 0; k < ta->n; k++)
		cr_assert_eq(ta->kids[k].num, tb->kids[k].num, "by_api.%s differs", ta->kids[k].key);
}

Test(trainer, static_runtime_variant_does_the_same, .timeout = 120)
{
	struct run d, s;
	const char *args[] = {"--scenario", "fragmenting", "--iters", "6", NULL};
	const char *sargs[] = {"--static", "--scenario", "fragmenting", "--iters", "6", NULL};
	char *env[] = {NO_PRELOAD, NULL};
	run_trainer(&d, "tests/bin/trainer", args, env);
	run_trainer(&s, "tests/bin/trainer", sargs, env); /* execs trainer-static */
	cr_assert(sp_json_path(s.j, "config.static")->num == 1, "--static did not run trainer-static");
	cr_assert(sp_json_path(d.j, "config.static")->num == 0);
	check_invariants(s.j);
	assert_same_counts(d.j, s.j);
	run_free(&d);
	run_free(&s);

	run_trainer(&s, "tests/bin/trainer-static", args, env);
	cr_assert(sp_json_path(s.j, "config.static")->num == 1);
	run_free(&s);
}

Test(trainer, markers_are_noops_without_the_preload, .timeout = 120)
{
	struct run none, nvtx, step;
	const char *a0[] = {"--scenario", "sync-heavy", "--iters", "4", "--markers", "none", NULL};
	const char *a1[] = {"--scenario", "sync-heavy", "--iters", "4", "--markers", "nvtx", NULL};
	const char *a2[] = {"--scenario", "sync-heavy", "--iters", "4", "--markers", "step", NULL};
	char *env[] = {NO_PRELOAD, NULL};
	run_trainer(&none, "tests/bin/trainer", a0, env);
	run_trainer(&nvtx, "tests/bin/trainer", a1, env);
	run_trainer(&step, "tests/bin/trainer", a2, env);
	cr_assert_str_eq(sp_json_str(nvtx.j, "config.markers"), "nvtx");
	cr_assert_str_eq(sp_json_str(step.j, "config.markers"), "step");
	assert_same_counts(none.j, nvtx.j);
	assert_same_counts(none.j, step.j);
	run_free(&none);
	run_free(&nvtx);
	run_free(&step);
}

Test(trainer, jitter_spreads_durations_within_its_bounds, .timeout = 120)
{
	struct run r;
	const char *args[] = {"--iters",     "20", "--kernels",	  "1", "--kernel-us", "5000",
			      "--h2d-bytes", "0",  "--d2h-bytes", "0", "--host-us",   "0",
			      "--jitter",    "20", "--seed",	  "7", NULL};
	char *env[] = {NO_PRELOAD, NULL};
	run_trainer(&r, "tests/bin/trainer", args, env);
	check_invariants(r.j); /* every kernel slept >= 4 ms (5 ms - 20%) */
	/* A loaded machine only lengthens sleeps: a kernel shorter than its nominal 5 ms can only
	 * come from the jitter. Each of the 20 draws is below 4.9 ms with probability 0.45. */
	uint64_t lo = UINT64_MAX;
	for (size_t i = 0; i < 20; i++) {
		uint64_t k = iu(r.j, i, "kernel_ns");
		lo = k < lo ? k : lo;
	}
	cr_assert_lt(lo, 4900000ull, "no kernel shorter than nominal: jitter not applied (shortest %llu ns)",
		     (unsigned long long)lo);
	run_free(&r);
}

Test(trainer, same_counts_under_the_preload, .timeout = 180)
{
	const char *lib = sp_t_build("lib/libstepprof.so");
	char *dir = sp_t_tmpdir("trainer");
	char pre[512], sd[512];
	snprintf(pre, sizeof(pre), "LD_PRELOAD=%s", lib);
	snprintf(sd, sizeof(sd), "STEPPROF_DIR=%s/trace", dir);
	cr_assert(access(lib, R_OK) == 0, "%s is not built", lib);

	/* loader workers and NVTX; the static runtime, the fragmentation OOM and stepprof_step */
	static const char *const scen[] = {"input-bound", "fragmenting"};
	static const char *const marks[] = {"nvtx", "step"};
	static const char *const bins[] = {"tests/bin/trainer", "tests/bin/trainer-static"};
	for (size_t k = 0; k < 2; k++) {
		struct run bare, pro;
		const char *args[] = {"--scenario", scen[k], "--iters", "6", "--markers", marks[k], NULL};
		char *env0[] = {NO_PRELOAD, NULL};
		char *env1[] = {pre, sd, "NVTX_INJECTION64_PATH=", NULL};
		run_trainer(&bare, bins[k], args, env0);
		run_trainer(&pro, bins[k], args, env1);
		check_invariants(pro.j);
		assert_same_counts(bare.j, pro.j);
		cr_assert_eq(sp_json_get(pro.j, "worker_pids")->n, sp_json_get(bare.j, "worker_pids")->n);
		run_free(&bare);
		run_free(&pro);
	}
	sp_t_rmrf(dir);
	free(dir);
}

/*
 * --backward-thread 2/3: the last round(kernels x 2/3) kernels of each iteration
 * are launched by a second thread, the others by the main thread (tid = pid), as
 * the trace says (its LAUNCH records by thread); the ground truth keeps its
 * invariants and counts every launch whichever thread made it.
 */
Test(trainer, backward_thread_launches_its_share, .timeout = 120)
{
	const char *lib = sp_t_build("lib/libstepprof.so");
	char *dir = sp_t_tmpdir("trainer");
	char pre[512], sd[600], tdir[512];
	snprintf(tdir, sizeof(tdir), "%s/trace", dir);
	snprintf(pre, sizeof(pre), "LD_PRELOAD=%s", lib);
	snprintf(sd, sizeof(sd), "STEPPROF_DIR=%s", tdir);
	struct run r;
	const char *args[] = {"--scenario", "sync-heavy", "--iters", "6", "--backward-thread", "2/3", NULL};
	char *env[] = {pre, sd, "NVTX_INJECTION64_PATH=", NULL};
	run_trainer(&r, "tests/bin/trainer", args, env);
	check_invariants(r.j);
	cr_assert_eq(u(r.j, "backward_thread.kernels"), 13, "round(20 x 2/3)");
	cr_assert_eq(u(r.j, "totals.by_api.cudaSetDevice"), 2, "the main thread's and the backward thread's");

	uint64_t pid = u(r.j, "pid"), mine = 0, other = 0;
	int64_t other_tid = -1;
	DIR *d = opendir(tdir);
	cr_assert_not_null(d, "no trace directory %s", tdir);
	for (struct dirent *de; (de = readdir(d));) {
		char path[1024];
		struct sp_reader *rd;
		snprintf(path, sizeof(path), "%s/%s", tdir, de->d_name);
		if (de->d_name[0] == '.' || sp_reader_open(path, &rd, NULL, 0))
			continue;
		struct sp_event ev;
		while (sp_reader_next(rd, &ev) > 0) {
			if (ev.kind != SP_K_LAUNCH || (uint64_t)ev.pid != pid)
				continue;
			if ((uint64_t)ev.tid == pid) {
				mine++;
			} else {
				cr_assert(other_tid < 0 || other_tid == ev.tid, "launches from threads %lld and %d",
					  (long long)other_tid, ev.tid);
				other_tid = ev.tid;
				other++;
			}
		}
		sp_reader_close(rd);
	}
	closedir(d);
	cr_assert_eq(mine, 6 * (20 - 13), "main thread: %llu launches", (unsigned long long)mine);
	cr_assert_eq(other, 6 * 13, "backward thread: %llu launches", (unsigned long long)other);
	run_free(&r);
	sp_t_rmrf(dir);
	free(dir);
}

Test(trainer, bad_options_exit_2_with_a_message)
{
	static const char *const bads[][3] = {{"--bogus", NULL},
					      {"--iters", "x"},
					      {"--markers", "all"},
					      {"--scenario", "nope"},
					      {"--file-size", "3Q"},
					      {"--backward-thread", "1.5"},
					      {"--backward-thread", "2/0"},
					      {"--backward-thread", NULL},
					      {"--pin-thread", NULL},  /* without --workers: no batches to hand over */
					      {"--epoch-iters", "4"}}; /* without --workers: no workers to restart */
	const char *path = sp_t_build("tests/bin/trainer");
	for (size_t k = 0; k < sizeof(bads) / sizeof(bads[0]); k++) {
		struct sp_t_result res;
		char *argv[] = {(char *)path, (char *)bads[k][0], (char *)bads[k][1], NULL};
		int st = sp_t_run(&res, argv, NULL, NULL, 30);
		cr_assert_eq(st, 2, "%s %s: exit %d", bads[k][0], bads[k][1] ? bads[k][1] : "", st);
		cr_assert(strstr(res.err, "trainer: bad"), "stderr: %s", res.err);
		cr_assert_eq(res.outlen, 0);
		sp_t_result_free(&res);
	}
}

Test(trainer, lists_every_scenario)
{
	struct sp_t_result res;
	char *argv[] = {(char *)sp_t_build("tests/bin/trainer"), "--list-scenarios", NULL};
	cr_assert_eq(sp_t_run(&res, argv, NULL, NULL, 30), 0);
	static const char *const names[] = {
	    "input-bound",	"pageable-h2d-bound", "compute-bound", "clean",	    "fragmenting",
	    "leaking",		"sync-heavy",	      "launch-bound",  "gpu-bound", "worker-restart",
	    "loader-cpu-bound", "small-files",	      "loader-starved"};
	for (size_t k = 0; k < sizeof(names) / sizeof(names[0]); k++)
		cr_assert(strstr(res.out, names[k]), "%s missing from:\n%s", names[k], res.out);
	sp_t_result_free(&res);
}

Test(trainer, data_dir_is_reused_and_kept, .timeout = 120)
{
	char *dir = sp_t_tmpdir("trainer-data");
	char data[512];
	snprintf(data, sizeof(data), "%s/d", dir);
	const char *args[] = {"--iters", "2", "--files-per-iter", "3", "--file-size", "5000", "--data-dir", data, NULL};
	char *env[] = {NO_PRELOAD, NULL};
	struct run a, b;

	run_trainer(&a, "tests/bin/trainer", args, env);
	cr_assert_eq(u(a.j, "totals.data_files_created"), 6, "2 x files-per-iter distinct files by default");
	cr_assert_str_eq(sp_json_str(a.j, "config.data_dir"), data);
	check_invariants(a.j);
	char f[600];
	snprintf(f, sizeof(f), "%s/f000005.bin", data);
	cr_assert(access(f, R_OK) == 0, "a --data-dir is kept after the run");
	run_trainer(&b, "tests/bin/trainer", args, env);
	cr_assert_eq(u(b.j, "totals.data_files_created"), 0, "files of the right size are reused");
	cr_assert_eq(u(b.j, "totals.bytes_read"), 2 * 3 * 5000);
	run_free(&a);
	run_free(&b);
	sp_t_rmrf(dir);
	free(dir);
}

/* make demo: the first thing a new user sees runs, says where the trace is, and the trace holds the
 * trainer and its 4 loader workers. */
Test(trainer, demo_profiles_the_input_bound_scenario, .timeout = 180)
{
	char *dir = sp_t_tmpdir("demo");
	char dd[512], sb[512];
	snprintf(dd, sizeof(dd), "DEMO_DIR=%s", dir);
	const char *b = getenv("STEPPROF_BUILD");
	snprintf(sb, sizeof(sb), "STEPPROF_BUILD=%s", b && *b ? b : "build");
	char *argv[] = {"scripts/demo.sh", NULL};
	char *env[] = {NO_PRELOAD, dd, sb, "DEMO_SIMULATED=1", NULL};
	struct sp_t_result res;
	int st = sp_t_run(&res, argv, env, NULL, 150);
	cr_assert_eq(st, 0, "demo exited %d:\n%s\n%s", st, res.out, res.err);
	cr_assert(strstr(res.out, "input-bound"), "%s", res.out);
	char *t = strstr(res.out, "trace: ");
	cr_assert(t, "the demo must say where the trace is:\n%s", res.out);
	char trace[512];
	cr_assert_eq(sscanf(t, "trace: %511s", trace), 1);
	/* one file per process: the trainer and its 4 loader workers */
	DIR *d = opendir(trace);
	cr_assert(d, "no trace directory %s", trace);
	int files = 0;
	for (struct dirent *e; (e = readdir(d));)
		files += e->d_name[0] != '.';
	closedir(d);
	cr_assert_eq(files, 5, "%d files in %s", files, trace);
	cr_assert(strstr(t + 7 + strlen(trace), trace), "the report must be about that directory:\n%s", res.out);
	cr_assert(strstr(res.out, "ground truth measured by the trainer itself: input "), "%s", res.out);
	/* the hint analyses exactly this run: its directory, never a ./stepprof-* glob that takes in others */
	char hint[600];
	snprintf(hint, sizeof(hint), "analyze %s   (run ", trace);
	const char *again = strstr(res.out, "This run again: ");
	cr_expect(again && strstr(again, hint), "the closing hint must name %s and its run:\n%s", trace, res.out);
	cr_expect_null(strstr(res.out, "stepprof-*"), "%s", res.out);
	sp_t_result_free(&res);
	sp_t_rmrf(dir);
	free(dir);
}
