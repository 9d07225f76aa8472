/*
 * test_analyze.c - the analysis (analyzer/analyze.c, iter.c, findings.c) on records
 * built in memory (struct an_memsrc), the way the hooks would have written them
 * for a workload whose timeline the test chooses.
 *
 * Divided into:
 *   1. a tiny workload simulator: a training thread with a GPU stream (launches,
 *      copies, syncs, input waits), its records and GPU spans;
 *   2. iterations and breakdown: NVTX, step marks, automatic (with ±20% jitter),
 *      hand-computed breakdowns;
 *   3. findings: each fires at its threshold and stays silent just under it;
 *   4. several trainers (ranks): the default and --rank selection, ranks[].
 *
 * Ground truth is the timeline the simulator was told to produce (durations in
 * microseconds below), never a number the analyzer computed.
 */
#include <criterion/criterion.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "analyze.h"
#include "report.h"

/* ------------------------------------------------------- 1. simulator */

#define US   1000ull
#define PID  100
#define TID  101
#define WPID 200

struct sim {
	struct an_memsrc m;
	uint64_t t, gpu; /* host clock of the training thread; when the stream is free */
	uint32_t op, kname, kname2;
	double jitter;
	unsigned seed;
};

static void sim_init(struct sim *s)
{
	memset(s, 0, sizeof(*s));
	an_memsrc_init(&s->m, PID);
	s->t = s->gpu = 1000000000ull;
	s->kname = an_memsrc_string(&s->m, "trainer_kernel");
	s->kname2 = an_memsrc_string(&s->m, "other_kernel");
	s->seed = 7;
}

static uint64_t J(struct sim *s, uint64_t d)
{
	if (s->jitter <= 0)
		return d;
	double u = (double)rand_r(&s->seed) / RAND_MAX; /* [0, 1] */
	return (uint64_t)((double)d * (1.0 - s->jitter + 2 * s->jitter * u));
}

static struct sp_event *add(struct sim *s, unsigned kind, unsigned api, uint64_t b, uint64_t e)
{
	return an_memsrc_add(&s->m, kind, api, PID, TID, b, e);
}

static void sim_input(struct sim *s, uint64_t dur)
{
	struct sp_event *e = add(s, SP_K_LOADER_WAIT, SP_API_read, s->t, s->t + dur);
	e->f[SP_F_FD_TYPE] = SP_FDTYPE_PIPE;
	e->f[SP_F_BYTES] = 64;
	s->t += dur;
}

static void sim_copy(struct sim *s, unsigned dir, uint64_t bytes, uint64_t gpu_dur, int pageable)
{
	uint32_t op = ++s->op;
	uint64_t gb = s->t > s->gpu ? s->t : s->gpu, ge = gb + gpu_dur;
	s->gpu = ge;
	uint64_t he = pageable ? ge : s->t + 10 * US;
	struct sp_event *e = add(s, SP_K_COPY, SP_API_cudaMemcpyAsync, s->t, he);
	e->f[SP_F_DIRECTION] = dir;
	e->f[SP_F_BYTES] = bytes;
	e->f[SP_F_OP] = op;
	e->f[SP_F_HOST_MEMORY] = pageable ? SP_HOSTMEM_PAGEABLE : SP_HOSTMEM_PINNED;
	e = add(s, SP_K_GPU_SPAN, 0, gb, ge);
	e->f[SP_F_OP] = op;
	s->t = he;
}

static void sim_kernel(struct sim *s, uint32_t name, uint64_t dur)
{
	uint32_t op = ++s->op;
	struct sp_event *e = add(s, SP_K_LAUNCH, SP_API_cudaLaunchKernel, s->t, s->t + 5 * US);
	e->f[SP_F_NAME] = name;
	e->f[SP_F_OP] = op;
	s->t += 5 * US;
	uint64_t gb = s->t > s->gpu ? s->t : s->gpu;
	e = add(s, SP_K_GPU_SPAN, 0, gb, gb + dur);
	e->f[SP_F_OP] = op;
	s->gpu = gb + dur;
}

static void sim_sync(struct sim *s)
{
	uint64_t e = s->t > s->gpu ? s->t : s->gpu;
	add(s, SP_K_SYNC, SP_API_cudaStreamSynchronize, s->t, e);
	s->t = e;
}

/* An iteration's start as most findings' tests make it: a step mark, then dur of input wait. */
static void sim_step(struct sim *s, uint64_t dur)
{
	add(s, SP_K_STEP, SP_API_stepprof_step, s->t, s->t);
	sim_input(s, dur);
}

/* An iteration's end: one kernel of dur, then the sync that waits for it. */
static void sim_compute(struct sim *s, uint64_t dur)
{
	sim_kernel(s, s->kname, dur);
	sim_sync(s);
}

/*
 * The reference iteration (no jitter): input 4000, host 1000, H2D 2 MiB pinned
 * (GPU 2000), 4 kernels of 1000, D2H 4 KiB (GPU 100), sync. Timeline from its
 * start T: input [T, T+4000), host [4000, 5000), H2D on the GPU [5000, 7000),
 * kernels [7000, 11000), D2H [11000, 11100), the sync returns at 11100.
 */
static void sim_batch(struct sim *s);

static void sim_iteration(struct sim *s, int markers)
{
	uint64_t start = s->t;
	if (markers == 2)
		add(s, SP_K_STEP, SP_API_stepprof_step, s->t, s->t);
	sim_input(s, J(s, 4000 * US));
	sim_batch(s);
	if (markers == 1) {
		struct sp_event *e = add(s, SP_K_RANGE, SP_API_nvtx, start, s->t);
		e->f[SP_F_NAME] = an_memsrc_string(&s->m, "train_step");
	}
}

/* The reference iteration once its batch is there: host 1000, H2D, kernels, D2H, sync. */
static void sim_batch(struct sim *s)
{
	s->t += J(s, 1000 * US);
	sim_copy(s, SP_DIR_H2D, 2 << 20, J(s, 2000 * US), 0);
	for (int k = 0; k < 4; k++)
		sim_kernel(s, s->kname, J(s, 1000 * US));
	sim_copy(s, SP_DIR_D2H, 4096, J(s, 100 * US), 0);
	sim_sync(s);
}

/* Analyze what the simulator recorded with options o (NULL: the defaults); it must succeed. */
static void run(struct sim *s, const struct an_options *o, struct an_analysis *a)
{
	struct an_options dflt;
	struct an_source src;
	char err[256] = "";
	if (!o) {
		an_options_init(&dflt);
		o = &dflt;
	}
	an_memsrc_sort(&s->m);
	an_memsrc_source(&s->m, &src);
	cr_assert_eq(an_analyze(&src, o, a, err, sizeof(err)), 0, "%s", err);
}

/* run(), then the simulator is freed: how a scenario that needs nothing more of it ends. */
static void run_free(struct sim *s, const struct an_options *o, struct an_analysis *a)
{
	run(s, o, a);
	an_memsrc_free(&s->m);
}

/* Analyze with options o (NULL: the defaults): the iterations' source and their count. */
static void expect_source(struct sim *s, const struct an_options *o, int kind, size_t nit)
{
	struct an_analysis a;
	run(s, o, &a);
	cr_expect_eq(a.source_kind, kind, "iteration source %d, want %d", (int)a.source_kind, kind);
	cr_expect_eq(a.nit, nit, "%zu iterations, want %zu", a.nit, nit);
	an_analysis_free(&a);
}

/* Analyze with options o, which must fail: the error message, for the caller to check. */
static const char *run_fails(struct sim *s, const struct an_options *o)
{
	static char err[256];
	struct an_source src;
	struct an_analysis a;
	err[0] = 0;
	an_memsrc_source(&s->m, &src);
	cr_expect_eq(an_analyze(&src, o, &a, err, sizeof(err)), -1);
	return err;
}

/* A fresh simulator with n reference iterations (markers as sim_iteration takes them). */
static void sim_reference(struct sim *s, int n, int markers)
{
	sim_init(s);
	for (int i = 0; i < n; i++)
		sim_iteration(s, markers);
}

/* The trainer forks a loader worker (WPID) just before the first record. */
static void sim_fork_worker(struct sim *s)
{
	struct sp_event *e = add(s, SP_K_FORK, 0, s->t - 10, s->t - 10);
	e->f[SP_F_PID] = WPID;
}

/* The worker opens path as fd, reads bytes from the file and closes it: [t0, t1), [t1, t2), [t2, t3). */
static void worker_read_file(struct sim *s, uint32_t path, int fd, uint64_t bytes, uint64_t t0, uint64_t t1,
			     uint64_t t2, uint64_t t3)
{
	struct sp_event *e = an_memsrc_add(&s->m, SP_K_OPEN, SP_API_open, WPID, WPID, t0, t1);
	e->f[SP_F_PATH] = path;
	e->f[SP_F_FD] = (uint64_t)fd;
	e = an_memsrc_add(&s->m, SP_K_READ, SP_API_read, WPID, WPID, t1, t2);
	e->f[SP_F_FD] = (uint64_t)fd;
	e->f[SP_F_BYTES] = bytes;
	e->f[SP_F_FD_TYPE] = SP_FDTYPE_FILE;
	e = an_memsrc_add(&s->m, SP_K_CLOSE, SP_API_close, WPID, WPID, t2, t3);
	e->f[SP_F_FD] = (uint64_t)fd;
}

static void expect_reference(const struct an_analysis *a, size_t n)
{
	cr_assert_eq(a->nit, n);
	for (size_t i = 0; i < n; i++) {
		const struct an_iter *it = &a->it[i];
		cr_expect_eq(it->end_ns - it->start_ns, 11100 * US, "iteration %zu wall %lu", i,
			     (unsigned long)(it->end_ns - it->start_ns));
		cr_expect_eq(it->bd[AN_INPUT], 4000 * US);
		cr_expect_eq(it->bd[AN_OTHER], 1000 * US);
		cr_expect_eq(it->bd[AN_H2D], 2000 * US);
		cr_expect_eq(it->bd[AN_COMPUTE], 4000 * US);
		cr_expect_eq(it->bd[AN_D2H], 100 * US);
		cr_expect_eq(it->bd[AN_SYNC], 0);
		cr_expect_eq(it->blocked[AN_BLK_INPUT], 4000 * US);
		cr_expect_eq(it->blocked[AN_BLK_H2D], 10 * US);
		cr_expect_eq(it->blocked[AN_BLK_SYNC], 11100 * US - 5040 * US);
		cr_expect_eq(it->gpu_idle_ns, 5000 * US);
		cr_expect_eq(it->h2d_bytes, 2 << 20);
		cr_expect_eq(it->d2h_bytes, 4096);
		cr_expect_eq(it->pageable_copies, 0);
	}
}

/* ------------------------------------------- 2. iterations, breakdown */

Test(analyze, nvtx_ranges_give_iterations_and_exact_breakdown)
{
	struct sim s;
	sim_reference(&s, 20, 1);
	struct an_analysis a;
	run(&s, NULL, &a);
	cr_expect_eq(a.source_kind, AN_SRC_NVTX);
	cr_expect_eq(a.trainer_pid, PID);
	cr_expect_eq(a.training_tid, TID);
	expect_reference(&a, 20);
	an_analysis_free(&a);
	an_memsrc_free(&s.m);
}

Test(analyze, step_marks_give_iterations)
{
	struct sim s;
	sim_reference(&s, 20, 2);
	struct an_analysis a;
	run(&s, NULL, &a);
	cr_expect_eq(a.source_kind, AN_SRC_API);
	expect_reference(&a, 20);
	an_memsrc_free(&s.m);
	an_analysis_free(&a);
}

Test(analyze, automatic_detection_without_markers)
{
	struct sim s;
	sim_reference(&s, 20, 0);
	struct an_analysis a;
	run(&s, NULL, &a);
	cr_expect_eq(a.source_kind, AN_SRC_AUTO);
	cr_expect_eq(a.auto_period, 7); /* H2D, 4 launches, D2H, sync */
	expect_reference(&a, 20);
	an_memsrc_free(&s.m);
	an_analysis_free(&a);
}

Test(analyze, step_regex_is_case_insensitive_and_overridable)
{
	struct sim s;
	sim_init(&s);
	for (int i = 0; i < 12; i++) {
		uint64_t b = s.t;
		sim_iteration(&s, 0);
		struct sp_event *e = add(&s, SP_K_RANGE, SP_API_nvtx, b, s.t);
		e->f[SP_F_NAME] = an_memsrc_string(&s.m, i % 2 ? "Iteration 7" : "ProfilerStep#3");
		e = add(&s, SP_K_RANGE, SP_API_nvtx, b + 10, b + 20); /* nested, not an iteration */
		e->f[SP_F_NAME] = an_memsrc_string(&s.m, "step_forward");
	}
	struct an_options o;
	an_options_init(&o);
	expect_source(&s, &o, AN_SRC_NVTX, 12);
	o.step_regex = "^nomatch$";
	expect_source(&s, &o, AN_SRC_AUTO, 12);
	o.step_regex = "([";
	const char *err = run_fails(&s, &o);
	cr_expect(strstr(err, "--step-regex") != NULL, "%s", err);
	an_memsrc_free(&s.m);
}

/* Both markers: NVTX ranges win over stepprof_step() marks, which win over detection. */
Test(analyze, source_order_nvtx_then_step_marks_then_auto)
{
	struct sim s;
	sim_init(&s);
	for (int i = 0; i < 12; i++) {
		if (i % 3 == 0) /* a step mark every third iteration: 4 api iterations */
			add(&s, SP_K_STEP, SP_API_stepprof_step, s.t, s.t);
		sim_iteration(&s, 1);
	}
	struct an_options o;
	an_options_init(&o);
	expect_source(&s, &o, AN_SRC_NVTX, 12);
	o.step_regex = "^nomatch$";
	expect_source(&s, &o, AN_SRC_API, 4);
	an_memsrc_free(&s.m);
}

/* ±20% jitter on every duration, 25 iterations: the count and the starts are exact. */
Test(analyze, automatic_detection_is_exact_under_jitter)
{
	for (unsigned seed = 1; seed <= 5; seed++) {
		struct sim s;
		sim_init(&s);
		s.jitter = 0.20;
		s.seed = seed;
		uint64_t starts[25];
		for (int i = 0; i < 25; i++) {
			starts[i] = s.t;
			sim_iteration(&s, 0);
		}
		struct an_options o;
		an_options_init(&o);
		struct an_analysis a;
		run(&s, &o, &a);
		cr_expect_eq(a.source_kind, AN_SRC_AUTO);
		cr_assert_eq(a.nit, 25, "seed %u: %zu iterations", seed, a.nit);
		for (int i = 0; i < 25; i++) {
			cr_expect_eq(a.it[i].start_ns, starts[i]);
			uint64_t sum = 0;
			for (int c = 0; c < AN_CAT__COUNT; c++)
				sum += a.it[i].bd[c];
			cr_expect_eq(sum, a.it[i].end_ns - a.it[i].start_ns);
		}
		cr_expect_eq(a.it[24].end_ns, s.t);
		an_analysis_free(&a);
		an_memsrc_free(&s.m);
	}
}

/*
 * A sync-heavy loop: inside the iteration the triple (kernel, 4-byte D2H, sync)
 * repeats 39 times, a strong sub-period; the iteration is still found.
 */
Test(analyze, automatic_detection_prefers_the_iteration_over_a_sub_pattern)
{
	struct sim s;
	sim_init(&s);
	s.jitter = 0.2;
	for (int i = 0; i < 22; i++) {
		sim_input(&s, J(&s, 300 * US));
		sim_copy(&s, SP_DIR_H2D, 1 << 20, J(&s, 125 * US), 0);
		for (int k = 0; k < 39; k++) {
			sim_kernel(&s, s.kname, J(&s, 250 * US));
			sim_copy(&s, SP_DIR_D2H, 4, J(&s, 2 * US), 0);
			sim_sync(&s);
		}
		sim_kernel(&s, s.kname, J(&s, 250 * US));
		sim_copy(&s, SP_DIR_D2H, 4096, J(&s, 3 * US), 0);
		sim_sync(&s);
	}
	struct an_analysis a;
	run(&s, NULL, &a);
	cr_expect_eq(a.source_kind, AN_SRC_AUTO);
	cr_expect_eq(a.nit, 22);
	cr_expect_eq(a.auto_period, 1 + 39 * 3 + 3);
	an_analysis_free(&a);
	an_memsrc_free(&s.m);
}

/*
 * n reference iterations (11100 us each), then what happens once at the run's
 * end: with `checkpoint`, the model's three tensors copied out (3, 5 and 7 MiB,
 * 100 us each on the GPU) and a sync, as torch.save(model.state_dict()) does;
 * with `log`, a loss printed every `every` iterations (a 4-byte D2H and a sync),
 * the last one after the last iteration. The iterations are the n steps (the
 * last one runs to the end of the run's CUDA work), whatever the prefix's last
 * period holds.
 */
static void expect_auto_steps_before_an_end(int n, int checkpoint, int every)
{
	struct sim s;
	sim_init(&s);
	uint64_t starts[100];
	cr_assert_leq(n, 100);
	for (int i = 0; i < n; i++) {
		starts[i] = s.t;
		sim_iteration(&s, 0);
		if (every && i % every == every - 1) {
			sim_copy(&s, SP_DIR_D2H, 4, 10 * US, 1);
			sim_sync(&s);
		}
	}
	if (checkpoint) {
		sim_copy(&s, SP_DIR_D2H, 3 << 20, 100 * US, 1);
		sim_copy(&s, SP_DIR_D2H, 5 << 20, 100 * US, 1);
		sim_copy(&s, SP_DIR_D2H, 7 << 20, 100 * US, 1);
		sim_sync(&s);
	}
	struct an_analysis a;
	run(&s, NULL, &a);
	cr_expect_eq(a.source_kind, AN_SRC_AUTO);
	cr_assert_eq(a.nit, (size_t)n, "%d steps, then a %s: %zu iterations of %u calls", n,
		     checkpoint ? "checkpoint" : "log line", a.nit, a.auto_period);
	for (int i = 0; i < n; i++)
		cr_expect_eq(a.it[i].start_ns, starts[i], "iteration %d", i);
	cr_expect_eq(a.it[n - 1].end_ns, s.t, "the last iteration runs to the run's last CUDA work");
	an_analysis_free(&a);
	an_memsrc_free(&s.m);
}

Test(analyze, automatic_iterations_of_a_run_that_ends_with_a_checkpoint_or_a_log_line)
{
	expect_auto_steps_before_an_end(20, 1, 0);
	expect_auto_steps_before_an_end(100, 1, 0);
	expect_auto_steps_before_an_end(80, 0, 40);
}

Test(analyze, no_gpu_work_and_no_markers_gives_no_iterations)
{
	struct sim s;
	sim_init(&s);
	for (int i = 0; i < 10; i++)
		sim_input(&s, 1000 * US);
	struct an_analysis a;
	run(&s, NULL, &a);
	cr_expect_eq(a.source_kind, AN_SRC_NONE);
	cr_expect_eq(a.nit, 0);
	cr_expect_eq(a.nfnd, 0);
	/* ranks[]: the process selected all the same (the one with the most records) */
	cr_assert_eq(a.nranks, 1);
	cr_expect_eq(a.ranks[0].pid, PID);
	cr_expect(a.ranks[0].selected);
	cr_expect_eq(a.ranks[0].nit, 0);
	an_analysis_free(&a);
	an_memsrc_free(&s.m);
}

/* The report's median and p95: nearest rank, input unsorted and left alone. */
Test(analyze, quantiles_are_nearest_rank)
{
	uint64_t v[100];
	for (int i = 0; i < 100; i++)
		v[i] = (uint64_t)((i * 37) % 100 + 1); /* 1..100, shuffled */
	uint64_t first = v[0];
	cr_expect_eq(an_quantile_u64(v, 100, 0.5), 50);
	cr_expect_eq(an_quantile_u64(v, 100, 0.95), 95);
	cr_expect_eq(an_quantile_u64(v, 100, 1.0), 100);
	cr_expect_eq(an_quantile_u64(v, 100, 0.0), 1);
	cr_expect_eq(v[0], first);
	uint64_t w[20];
	for (int i = 0; i < 20; i++)
		w[i] = (uint64_t)(200 - 10 * i); /* 200, 190, ..., 10 */
	cr_expect_eq(an_quantile_u64(w, 20, 0.5), 100);
	cr_expect_eq(an_quantile_u64(w, 20, 0.95), 190);
	cr_expect_eq(an_quantile_u64(w, 0, 0.5), 0);
}

/*
 * The iterations are NVTX ranges of another thread of the trainer (its main
 * thread, MTID), 10 ms long with 1 ms gaps; the training thread's wait for its
 * batch begins 500 us before each range and ends 2 ms into it, then a 5 us
 * launch and a sync on a 5 ms kernel. The part of each wait inside its
 * iteration is host-blocked input, as it is the input category: the call
 * began outside every iteration, which is no reason to drop it.
 */
#define MTID 102
Test(analyze, a_call_begun_before_its_iteration_is_host_blocked_in_it)
{
	struct sim s;
	sim_init(&s);
	uint32_t name = an_memsrc_string(&s.m, "train_step");
	for (int i = 0; i < 12; i++) {
		uint64_t r = s.t + 500 * US;
		struct sp_event *e = an_memsrc_add(&s.m, SP_K_RANGE, SP_API_nvtx, PID, MTID, r, r + 10000 * US);
		e->f[SP_F_NAME] = name;
		sim_input(&s, 2500 * US);
		sim_compute(&s, 5000 * US);
		s.t = r + 10500 * US; /* 3 ms of host time, then the gap */
	}
	struct an_analysis a;
	run_free(&s, NULL, &a);
	cr_assert_eq(a.source_kind, AN_SRC_NVTX);
	cr_assert_eq(a.training_tid, TID);
	cr_assert_eq(a.nit, 12);
	for (size_t i = 0; i < a.nit; i++) {
		const struct an_iter *it = &a.it[i];
		cr_expect_eq(it->end_ns - it->start_ns, 10000 * US);
		cr_expect_eq(it->bd[AN_INPUT], 2000 * US, "iteration %zu", i);
		cr_expect_eq(it->blocked[AN_BLK_INPUT], 2000 * US, "iteration %zu: input blocked %lu ns", i,
			     (unsigned long)it->blocked[AN_BLK_INPUT]);
		cr_expect_eq(it->bd[AN_COMPUTE], 5000 * US);
		cr_expect_eq(it->blocked[AN_BLK_SYNC], 5000 * US);
	}
	an_analysis_free(&a);
}

/* A GPU span of op on the trainer's thread TID's stream(s): [b, e) in us from T. */
static void span_us(struct sim *s, uint64_t T, uint32_t op, uint64_t b, uint64_t e)
{
	struct sp_event *x = add(s, SP_K_GPU_SPAN, 0, T + b * US, T + e * US);
	x->f[SP_F_OP] = op;
}

/* A call of the training thread, [b, e) in us from T. */
static struct sp_event *call_us(struct sim *s, uint64_t T, unsigned kind, unsigned api, uint64_t b, uint64_t e)
{
	return add(s, kind, api, T + b * US, T + e * US);
}

static void copy_us(struct sim *s, uint64_t T, unsigned api, unsigned dir, uint32_t op, uint64_t b, uint64_t e)
{
	struct sp_event *x = call_us(s, T, SP_K_COPY, api, b, e);
	x->f[SP_F_DIRECTION] = dir;
	x->f[SP_F_BYTES] = 1 << 20;
	x->f[SP_F_OP] = op;
	x->f[SP_F_HOST_MEMORY] = SP_HOSTMEM_PINNED;
}

/*
 * Two NVTX iterations of 10 ms (times in us). Iteration 0: a wait [0, 2000), a
 * launch [2000, 2005) of a 10 ms kernel on stream 1, GPU [2005, 12005), which
 * straddles into iteration 1; a synchronous H2D call [3000, 4000) whose copy
 * runs on stream 2 at [3000, 3990) while the kernel computes. Iteration 1: a
 * sync [10000, 12005) for that kernel; a launch [12005, 12010) of a kernel on
 * stream 2, GPU [12010, 15010); an async D2H call [12010, 12020) on stream 1,
 * GPU [12020, 12520), under that kernel; a sync [12020, 15010); an H2D call
 * [16000, 16500), GPU [16000, 16400), with the GPU otherwise idle.
 */
Test(analyze, breakdown_of_spans_across_iterations_and_streams)
{
	struct sim s;
	sim_init(&s);
	uint64_t T = s.t;
	uint32_t name = an_memsrc_string(&s.m, "train_step");
	for (int i = 0; i < 2; i++) {
		struct sp_event *r =
		    call_us(&s, T, SP_K_RANGE, SP_API_nvtx, 10000 * (uint64_t)i, 10000 * (uint64_t)i + 10000);
		r->f[SP_F_NAME] = name;
	}
	struct sp_event *w = call_us(&s, T, SP_K_LOADER_WAIT, SP_API_read, 0, 2000);
	w->f[SP_F_FD_TYPE] = SP_FDTYPE_PIPE;
	call_us(&s, T, SP_K_LAUNCH, SP_API_cudaLaunchKernel, 2000, 2005)->f[SP_F_OP] = 1;
	span_us(&s, T, 1, 2005, 12005);
	copy_us(&s, T, SP_API_cudaMemcpy, SP_DIR_H2D, 2, 3000, 4000);
	span_us(&s, T, 2, 3000, 3990);
	call_us(&s, T, SP_K_SYNC, SP_API_cudaStreamSynchronize, 10000, 12005);
	call_us(&s, T, SP_K_LAUNCH, SP_API_cudaLaunchKernel, 12005, 12010)->f[SP_F_OP] = 3;
	span_us(&s, T, 3, 12010, 15010);
	copy_us(&s, T, SP_API_cudaMemcpyAsync, SP_DIR_D2H, 4, 12010, 12020);
	span_us(&s, T, 4, 12020, 12520);
	call_us(&s, T, SP_K_SYNC, SP_API_cudaStreamSynchronize, 12020, 15010);
	copy_us(&s, T, SP_API_cudaMemcpy, SP_DIR_H2D, 5, 16000, 16500);
	span_us(&s, T, 5, 16000, 16400);
	struct an_analysis a;
	run_free(&s, NULL, &a);
	cr_assert_eq(a.source_kind, AN_SRC_NVTX);
	cr_assert_eq(a.nit, 2);
	/* input, h2d, compute, d2h, sync, other */
	static const uint64_t bd[2][AN_CAT__COUNT] = {{2000, 0, 7995, 0, 0, 5}, {0, 500, 5005, 0, 0, 4495}};
	static const uint64_t blk[2][AN_BLK__COUNT] = {{2000, 1000, 0, 0}, {0, 500, 10, 4995}};
	static const uint64_t idle[2] = {2005, 4595};
	for (int i = 0; i < 2; i++) {
		for (int c = 0; c < AN_CAT__COUNT; c++)
			cr_expect_eq(a.it[i].bd[c], bd[i][c] * US, "iteration %d %s: %lu ns", i, an_cat_name[c],
				     (unsigned long)a.it[i].bd[c]);
		for (int k = 0; k < AN_BLK__COUNT; k++)
			cr_expect_eq(a.it[i].blocked[k], blk[i][k] * US, "iteration %d blocked %s: %lu ns", i,
				     an_blk_name[k], (unsigned long)a.it[i].blocked[k]);
		cr_expect_eq(a.it[i].gpu_idle_ns, idle[i] * US, "iteration %d idle %lu", i,
			     (unsigned long)a.it[i].gpu_idle_ns);
	}
	an_analysis_free(&a);
}

/* Automatic iterations of what s recorded (then freed): n, beginning at starts[], with input[] ns of input. */
static void expect_auto(struct sim *s, const uint64_t *starts, const uint64_t *input, size_t n)
{
	struct an_analysis a;
	run_free(s, NULL, &a);
	cr_expect_eq(a.source_kind, AN_SRC_AUTO);
	cr_assert_eq(a.nit, n);
	for (size_t i = 0; i < a.nit; i++) {
		cr_expect_eq(a.it[i].start_ns, starts[i], "iteration %zu begins %+ld ns off", i,
			     (long)(a.it[i].start_ns - starts[i]));
		cr_expect_eq(a.it[i].bd[AN_INPUT], input[i], "iteration %zu input %lu ns, want %lu", i,
			     (unsigned long)a.it[i].bd[AN_INPUT], (unsigned long)input[i]);
	}
	an_analysis_free(&a);
}

/* The same, each with `input` ns of input. */
static void expect_auto_starts(struct sim *s, const uint64_t *starts, size_t n, uint64_t input)
{
	uint64_t in[64];
	cr_assert_leq(n, 64);
	for (size_t i = 0; i < n; i++)
		in[i] = input;
	expect_auto(s, starts, in, n);
}

/*
 * A batch of three equal-sized tensors (three H2D copies of 1 MiB: none occurs
 * once per iteration) after a 3 ms wait, an "embed" kernel, three kernels, a
 * 4 KiB D2H copy, a sync and 200 us of host time. The first iteration also
 * tunes: five more kernels of their own between its copies and "embed". Each
 * iteration begins where its wait begins (design.md: at the wait before its
 * first H2D copy), the first one with the first load, whatever is anchored.
 */
Test(analyze, automatic_iterations_begin_at_the_wait_when_the_anchor_does_not_follow_it)
{
	struct sim s;
	sim_init(&s);
	uint32_t embed = an_memsrc_string(&s.m, "embed"), tune = an_memsrc_string(&s.m, "tune");
	uint64_t starts[20];
	for (int i = 0; i < 20; i++) {
		starts[i] = s.t;
		sim_input(&s, 3000 * US);
		for (int k = 0; k < 3; k++)
			sim_copy(&s, SP_DIR_H2D, 1 << 20, 100 * US, 0);
		for (int k = 0; !i && k < 5; k++)
			sim_kernel(&s, tune, 100 * US);
		sim_kernel(&s, embed, 500 * US);
		for (int k = 0; k < 3; k++)
			sim_kernel(&s, s.kname, 1000 * US);
		sim_copy(&s, SP_DIR_D2H, 4096, 10 * US, 0);
		sim_sync(&s);
		s.t += 200 * US;
	}
	expect_auto_starts(&s, starts, 20, 3000 * US);
}

/*
 * Gradient accumulation: each step waits for two micro-batches, each a 2 ms wait,
 * a 1 MiB H2D copy, a "fwd" and a "bwd" kernel; then an "opt" kernel, a 4-byte
 * D2H copy and a sync. The only signatures once per step are the last three:
 * the step (the iteration) begins at the wait for its first micro-batch.
 */
Test(analyze, automatic_iterations_begin_at_the_first_of_two_waits)
{
	struct sim s;
	sim_init(&s);
	uint32_t fwd = an_memsrc_string(&s.m, "fwd"), bwd = an_memsrc_string(&s.m, "bwd"),
		 opt = an_memsrc_string(&s.m, "opt");
	uint64_t starts[20];
	for (int i = 0; i < 20; i++) {
		starts[i] = s.t;
		for (int m = 0; m < 2; m++) {
			sim_input(&s, 2000 * US);
			sim_copy(&s, SP_DIR_H2D, 1 << 20, 100 * US, 0);
			sim_kernel(&s, fwd, 300 * US);
			sim_kernel(&s, bwd, 600 * US);
			sim_sync(&s);
		}
		sim_kernel(&s, opt, 200 * US);
		sim_copy(&s, SP_DIR_D2H, 4, 5 * US, 1);
		sim_sync(&s);
	}
	expect_auto_starts(&s, starts, 20, 4000 * US);
}

/*
 * Two threads of the trainer launch as many kernels: the reference thread TID
 * (input waits, copies, NVTX ranges when `markers`) and MTID, which polls its
 * stream with more sync calls than TID has records. The training thread is the
 * one that marks the iterations, else the one that waits for input: the
 * breakdown's input is that thread's wait (4000 us), not nothing.
 */
static void two_equal_launchers(struct sim *s, int markers)
{
	sim_reference(s, 12, markers);
	size_t n = s->m.n;
	for (size_t k = 0; k < n; k++) {
		const struct sp_event *l = &s->m.ev[k];
		if (l->kind != SP_K_LAUNCH)
			continue;
		uint64_t b = l->begin_ns + 1, e = l->end_ns + 1;
		struct sp_event *x = an_memsrc_add(&s->m, SP_K_LAUNCH, SP_API_cudaLaunchKernel, PID, MTID, b, e);
		x->f[SP_F_NAME] = s->kname2;
		x->f[SP_F_OP] = 100000 + (uint32_t)k;
		for (int q = 0; q < 4; q++)
			an_memsrc_add(&s->m, SP_K_SYNC, SP_API_cudaStreamQuery, PID, MTID, e + (uint64_t)q,
				      e + (uint64_t)q);
	}
}

Test(analyze, the_training_thread_of_equal_launchers_marks_or_waits_for_input)
{
	for (int markers = 0; markers <= 2; markers++) {
		struct sim s;
		two_equal_launchers(&s, markers);
		struct an_analysis a;
		run_free(&s, NULL, &a);
		cr_expect_eq(a.training_tid, TID, "markers %d: training thread %d", markers, a.training_tid);
		cr_expect_eq(a.nit, 12, "markers %d: %zu iterations", markers, a.nit);
		for (size_t i = 0; i < a.nit; i++)
			cr_expect_eq(a.it[i].bd[AN_INPUT], 4000 * US, "markers %d, iteration %zu", markers, i);
		an_analysis_free(&a);
	}
}

/* Two threads alike in everything but their ids: the lower id, whatever the order they appear in. */
Test(analyze, the_training_thread_of_identical_threads_is_the_lowest_id)
{
	static const int32_t tids[][2] = {{7, 9}, {9, 7}, {1000, 3}, {3, 1000}, {65, 1}, {1, 65}};
	for (size_t c = 0; c < sizeof(tids) / sizeof(tids[0]); c++) {
		struct an_memsrc m;
		an_memsrc_init(&m, PID);
		for (int i = 0; i < 20; i++)
			for (int k = 0; k < 2; k++) {
				uint64_t t = 1000000000ull + (uint64_t)i * 1000 * US + (uint64_t)k * 10;
				struct sp_event *e =
				    an_memsrc_add(&m, SP_K_LAUNCH, SP_API_cudaLaunchKernel, PID, tids[c][k], t, t + 5);
				e->f[SP_F_OP] = (uint64_t)(2 * i + k + 1);
			}
		struct an_source src;
		struct an_options o;
		struct an_analysis a;
		char err[256] = "";
		an_options_init(&o);
		an_memsrc_source(&m, &src);
		cr_assert_eq(an_analyze(&src, &o, &a, err, sizeof(err)), 0, "%s", err);
		int32_t low = tids[c][0] < tids[c][1] ? tids[c][0] : tids[c][1];
		cr_expect_eq(a.training_tid, low, "threads %d and %d: %d", tids[c][0], tids[c][1], a.training_tid);
		an_analysis_free(&a);
		an_memsrc_free(&m);
	}
}

/*
 * A loop that synchronises every `every` iterations (the loss logged every so
 * often): the hooks read GPU spans back only at a sync, so each one is written
 * after the sync, up to `every` iterations after it began. The records are
 * given in that write order (as a thread's chunk holds them), not sorted. Each
 * iteration (a step mark): a 1000 us wait for the batch, 4 launches of 5 us,
 * their kernels of 200 us back to back from the first launch's return, then
 * host time up to 2020 us; the sync, at the end of every `every`-th iteration,
 * finds the GPU idle and returns in 10 us. Breakdown: input 1000, compute 800,
 * other 220 (the sync's 10 us ends the iteration with the GPU idle: sync).
 */
static void rare_sync_run(struct an_analysis *a, int iters, int every)
{
	struct an_memsrc m;
	an_memsrc_init(&m, PID);
	uint32_t kname = an_memsrc_string(&m, "trainer_kernel"), op = 0;
	struct {
		uint32_t op;
		uint64_t b, e;
	} pending[64];
	int npend = 0;
	uint64_t t = 1000000000ull;
	for (int i = 0; i < iters; i++) {
		an_memsrc_add(&m, SP_K_STEP, SP_API_stepprof_step, PID, TID, t, t);
		struct sp_event *e = an_memsrc_add(&m, SP_K_LOADER_WAIT, SP_API_read, PID, TID, t, t + 1000 * US);
		e->f[SP_F_FD_TYPE] = SP_FDTYPE_PIPE;
		uint64_t h = t + 1000 * US, g = h + 5 * US;
		for (int k = 0; k < 4; k++, h += 5 * US, g += 200 * US) {
			e = an_memsrc_add(&m, SP_K_LAUNCH, SP_API_cudaLaunchKernel, PID, TID, h, h + 5 * US);
			e->f[SP_F_NAME] = kname;
			e->f[SP_F_OP] = ++op;
			cr_assert_lt(npend, 64);
			pending[npend].op = op;
			pending[npend].b = g;
			pending[npend++].e = g + 200 * US;
		}
		if (i % every == every - 1 || i == iters - 1) {
			an_memsrc_add(&m, SP_K_SYNC, SP_API_cudaStreamSynchronize, PID, TID, t + 2010 * US,
				      t + 2020 * US);
			for (int k = 0; k < npend; k++) {
				e = an_memsrc_add(&m, SP_K_GPU_SPAN, SP_API_cudaLaunchKernel, PID, TID, pending[k].b,
						  pending[k].e);
				e->f[SP_F_OP] = pending[k].op;
			}
			npend = 0;
		}
		t += 2020 * US;
	}
	struct an_options o;
	struct an_source src;
	char err[256] = "";
	an_options_init(&o);
	an_memsrc_source(&m, &src);
	cr_assert_eq(an_analyze(&src, &o, a, err, sizeof(err)), 0, "%s", err);
	an_memsrc_free(&m);
}

Test(analyze, gpu_spans_read_back_iterations_later_are_counted)
{
	static const int every[] = {1, 4, 12};
	for (size_t c = 0; c < sizeof(every) / sizeof(every[0]); c++) {
		struct an_analysis a;
		rare_sync_run(&a, 14, every[c]);
		cr_assert_eq(a.nit, 14);
		cr_expect_eq(a.late_events, 0, "a sync every %d: %lu late records", every[c],
			     (unsigned long)a.late_events);
		for (size_t i = 0; i < a.nit; i++) {
			const struct an_iter *it = &a.it[i];
			int synced = (int)i % every[c] == every[c] - 1 || i == a.nit - 1;
			cr_expect_eq(it->bd[AN_COMPUTE], 800 * US, "a sync every %d, iteration %zu: compute %lu",
				     every[c], i, (unsigned long)it->bd[AN_COMPUTE]);
			cr_expect_eq(it->bd[AN_INPUT], 1000 * US);
			cr_expect_eq(it->bd[AN_SYNC], synced ? 10 * US : 0);
			cr_expect_eq(it->gpu_idle_ns, (2020 - 800) * US);
		}
		an_analysis_free(&a);
	}
}

/* ---------------------------------------------------------- 3. findings */

static const struct an_result_finding *find(const struct an_analysis *a, int kind, const char *signal)
{
	for (size_t i = 0; i < a->nfnd; i++)
		if (a->fnd[i].kind == kind && (!signal || (a->fnd[i].signal && !strcmp(a->fnd[i].signal, signal))))
			return &a->fnd[i];
	return NULL;
}

/*
 * A loader worker (forked by the trainer) stats and opens files during each
 * input wait: `stats` + `opens` metadata operations; the first `nsmall` files
 * opened have `small` bytes, the others `size` bytes. Options o (NULL: the defaults).
 */
static void storm_run_mixed(struct an_analysis *a, const struct an_options *o, int opens, int stats, uint64_t size,
			    int nsmall, uint64_t small)
{
	struct sim s;
	sim_init(&s);
	sim_fork_worker(&s);
	uint32_t path = an_memsrc_string(&s.m, "/data/train/shard/sample.jpg");
	for (int i = 0; i < 12; i++) {
		uint64_t t = s.t + 10 * US;
		for (int k = 0; k < stats; k++, t += 5 * US) {
			struct sp_event *e = an_memsrc_add(&s.m, SP_K_STAT, SP_API_stat, WPID, WPID, t, t + 3 * US);
			e->f[SP_F_PATH] = path;
			e->f[SP_F_BYTES] = size;
		}
		for (int k = 0; k < opens; k++, t += 6 * US)
			worker_read_file(&s, path, 5, k < nsmall ? small : size, t, t + 2 * US, t + 4 * US, t + 5 * US);
		sim_iteration(&s, 2);
	}
	run_free(&s, o, a);
}

/* Same, every file of `size` bytes, default options. */
static void storm_run(struct an_analysis *a, int opens, int stats, uint64_t size)
{
	storm_run_mixed(a, NULL, opens, stats, size, 0, 0);
}

Test(findings, small_file_storm_fires_at_100_metadata_ops)
{
	struct an_analysis a;
	storm_run(&a, 50, 50, 16384);
	cr_assert_eq(a.nit, 12);
	cr_expect_eq(a.it[3].files_opened, 50);
	cr_expect_eq(a.it[3].metadata_ops, 100);
	cr_expect_eq(a.it[3].bytes_read, 50 * 16384);
	const struct an_result_finding *f = find(&a, AN_F_SMALL_FILE_STORM, NULL);
	cr_assert(f);
	cr_expect_eq(f->first_iteration, 0);
	cr_expect_eq(f->last_iteration, 11);
	cr_expect_eq(f->severity, 2); /* input is 4000 of 11100 us: 36% >= 30% */
	cr_expect(strlen(f->advice) > 100);
	int dirs = 0;
	for (int i = 0; i < f->nev; i++)
		if (f->ev[i].is_str && strstr(f->ev[i].str, "/data/train/shard"))
			dirs = 1;
	cr_expect(dirs, "top directory in the evidence");
	int med = 0;
	for (int i = 0; i < f->nev; i++)
		if (!strcmp(f->ev[i].key, "median_file_bytes")) {
			med = 1;
			cr_expect_eq(f->ev[i].num, 16384, "median file %g bytes, the files have 16384", f->ev[i].num);
		}
	cr_expect(med);
	cr_expect_eq(a.procs[1].role == AN_ROLE_WORKER || a.procs[0].role == AN_ROLE_WORKER, 1);
	an_analysis_free(&a);
}

Test(findings, small_file_storm_silent_at_99_metadata_ops)
{
	struct an_analysis a;
	storm_run(&a, 49, 50, 16384);
	cr_expect_null(find(&a, AN_F_SMALL_FILE_STORM, NULL));
	an_analysis_free(&a);
}

Test(findings, small_file_storm_silent_for_256k_files)
{
	struct an_analysis a;
	storm_run(&a, 50, 50, 262143);
	cr_expect_not_null(find(&a, AN_F_SMALL_FILE_STORM, NULL));
	an_analysis_free(&a);
	storm_run(&a, 50, 50, 262144);
	cr_expect_null(find(&a, AN_F_SMALL_FILE_STORM, NULL));
	an_analysis_free(&a);
}

/* 50 opens and 50 stats per iteration, files of `size` bytes: is there a storm under max_median_file_bytes=max? */
static int storm_under(uint64_t size, double max)
{
	struct an_options o;
	an_options_init(&o);
	o.threshold[AN_T_SFS_MAX_FILE] = max;
	struct an_analysis a;
	storm_run_mixed(&a, &o, 50, 50, size, 0, 0);
	const struct an_result_finding *f = find(&a, AN_F_SMALL_FILE_STORM, NULL);
	int fired = f != NULL;
	if (f) {
		cr_expect_eq(f->first_iteration, 0);
		cr_expect_eq(f->last_iteration, 11);
	}
	an_analysis_free(&a);
	return fired;
}

/*
 * The median file size against any max_median_file_bytes, not only a power of
 * two: files of 70,000 bytes are under 100,000 (a bound a user types) and under
 * 70,001, not under 70,000.
 */
Test(findings, small_file_storm_median_is_exact_at_any_threshold)
{
	cr_expect(storm_under(70000, 100000), "70000-byte files, max 100000");
	cr_expect(storm_under(70000, 70001), "70000-byte files, max 70001");
	cr_expect(!storm_under(70000, 70000), "70000-byte files, max 70000: not under");
	cr_expect(storm_under(1000000, 1000001), "1 MB files, max 1000001");
	cr_expect(!storm_under(1000000, 524288), "1 MB files, max 512 KiB");
	cr_expect(!storm_under(100, 0), "max 0: no file is under it");
}

/*
 * The median of the files of an iteration (the lower one of an even count): 50
 * files, 25 of 16 KiB and 25 of 1 MiB, have a median of 16 KiB; 24 and 26, of 1 MiB.
 */
Test(findings, small_file_storm_median_of_mixed_sizes)
{
	struct an_analysis a;
	storm_run_mixed(&a, NULL, 50, 50, 1 << 20, 25, 16384);
	cr_expect_not_null(find(&a, AN_F_SMALL_FILE_STORM, NULL), "25 of 50 files under 256 KiB");
	an_analysis_free(&a);
	storm_run_mixed(&a, NULL, 50, 50, 1 << 20, 24, 16384);
	cr_expect_null(find(&a, AN_F_SMALL_FILE_STORM, NULL), "24 of 50 files under 256 KiB");
	an_analysis_free(&a);
}

/*
 * Severity by the exposed input share: 12 iterations of a storm (100 metadata
 * ops of 16 KiB files by a worker) where the training thread waits `wait_us`,
 * launches (5 us) and syncs on a kernel of `kernel_us`; the GPU is idle while it
 * waits, so the input share is wait / (wait + 5 + kernel), known exactly here.
 */
/*
 * 12 iterations, each: a step mark, the worker's 50 stats and 50 reads of 16 KiB
 * files in the next 200 ns, the training thread's wait of `wait_us`, a pageable
 * cudaMemcpyAsync H2D of `copy_us` on the GPU when not 0 (the host blocks for
 * it), a launch (5 us) and the sync on its kernel of `kernel_us`.
 */
static void sim_storm(struct sim *s, uint64_t wait_us, uint64_t copy_us, uint64_t kernel_us)
{
	sim_init(s);
	sim_fork_worker(s);
	for (int i = 0; i < 12; i++) {
		add(s, SP_K_STEP, SP_API_stepprof_step, s->t, s->t);
		uint64_t t = s->t + 1;
		for (int k = 0; k < 50; k++, t += 4) {
			an_memsrc_add(&s->m, SP_K_STAT, SP_API_stat, WPID, WPID, t, t + 1);
			worker_read_file(s, 0, 5, 16384, t + 1, t + 2, t + 3, t + 4); /* no path recorded */
		}
		sim_input(s, wait_us * US);
		if (copy_us)
			sim_copy(s, SP_DIR_H2D, 1 << 20, copy_us * US, 1);
		sim_compute(s, kernel_us * US);
	}
}

static void storm_share_run(struct an_analysis *a, uint64_t wait_us, uint64_t kernel_us, double warn, double crit)
{
	struct sim s;
	sim_storm(&s, wait_us, 0, kernel_us);
	struct an_options o;
	an_options_init(&o);
	o.threshold[AN_T_SFS_WARN] = warn;
	o.threshold[AN_T_SFS_CRIT] = crit;
	run_free(&s, &o, a);
}

static int storm_severity(uint64_t wait_us, uint64_t kernel_us, double warn, double crit)
{
	struct an_analysis a;
	storm_share_run(&a, wait_us, kernel_us, warn, crit);
	const struct an_result_finding *f = find(&a, AN_F_SMALL_FILE_STORM, NULL);
	cr_assert_not_null(f, "the storm is there whatever its share");
	cr_expect_eq(f->first_iteration, 0);
	cr_expect_eq(f->last_iteration, 11);
	int sev = f->severity;
	an_analysis_free(&a);
	return sev;
}

Test(findings, small_file_storm_severity_follows_the_exposed_input_share)
{
	/* the defaults: < 10% info, >= 10% warning, >= 30% critical */
	cr_expect_eq(storm_severity(500, 9495, 0.10, 0.30), 0);	 /* 5% */
	cr_expect_eq(storm_severity(2000, 7995, 0.10, 0.30), 1); /* 20% */
	cr_expect_eq(storm_severity(4000, 5995, 0.10, 0.30), 2); /* 40% */
	/* each bound, just above and just below the share this timeline has: 2000 / 10000 */
	cr_expect_eq(storm_severity(2000, 7995, 0.2001, 0.9), 0);
	cr_expect_eq(storm_severity(2000, 7995, 0.1999, 0.9), 1);
	cr_expect_eq(storm_severity(2000, 7995, 0.1, 0.2001), 1);
	cr_expect_eq(storm_severity(2000, 7995, 0.1, 0.1999), 2);
}

/* Exactly at each bound, and one microsecond of wait under it: input / wall = wait / 10000 us. */
Test(findings, small_file_storm_severity_at_its_exact_bounds)
{
	cr_expect_eq(storm_severity(1000, 8995, 0.10, 0.30), 1, "input share 10%% exactly: warning");
	cr_expect_eq(storm_severity(999, 8996, 0.10, 0.30), 0, "9.99%%: info");
	cr_expect_eq(storm_severity(3000, 6995, 0.10, 0.30), 2, "30%% exactly: critical");
	cr_expect_eq(storm_severity(2999, 6996, 0.10, 0.30), 1, "29.99%%: warning");
}

/*
 * NVTX ranges leave gaps (a pop, then the next push): a loader worker's file read
 * in the gap before an iteration feeds that iteration and is counted in it.
 */
Test(findings, worker_reads_between_nvtx_ranges_count_in_the_next_iteration)
{
	struct sim s;
	sim_init(&s);
	sim_fork_worker(&s);
	uint32_t path = an_memsrc_string(&s.m, "/data/a.bin");
	for (int i = 0; i < 12; i++) {
		uint64_t t = s.t + 10 * US;
		worker_read_file(&s, path, 7, 1000 + (uint64_t)i, t, t + US, t + 2 * US, t + 3 * US);
		s.t += 100 * US; /* the gap */
		sim_iteration(&s, 1);
	}
	struct an_analysis a;
	run_free(&s, NULL, &a);
	cr_assert_eq(a.source_kind, AN_SRC_NVTX);
	cr_assert_eq(a.nit, 12);
	for (size_t i = 0; i < a.nit; i++) {
		cr_expect_eq(a.it[i].files_opened, 1, "iteration %zu", i);
		cr_expect_eq(a.it[i].bytes_read, 1000 + i, "iteration %zu", i);
		cr_expect_eq(a.it[i].end_ns - a.it[i].start_ns, 11100 * US, "the range, not the gap");
	}
	an_analysis_free(&a);
}

static void copy_run(struct an_analysis *a, int pageable_iter)
{
	struct sim s;
	sim_init(&s);
	for (int i = 0; i < 12; i++) {
		sim_step(&s, 1000 * US);
		sim_copy(&s, SP_DIR_H2D, 32 << 20, 16000 * US, i == pageable_iter);
		sim_compute(&s, 4000 * US);
	}
	run_free(&s, NULL, a);
}

Test(findings, unpinned_copy_fires_on_one_pageable_async_copy)
{
	struct an_analysis a;
	copy_run(&a, 5);
	const struct an_result_finding *f = find(&a, AN_F_UNPINNED_COPY, NULL);
	cr_assert(f);
	cr_expect_eq(f->first_iteration, 5);
	cr_expect_eq(f->last_iteration, 5);
	cr_expect_eq(f->severity, 1, "async from pageable memory is at least a warning");
	cr_expect_eq(a.it[5].pageable_copies, 1);
	cr_expect_eq(a.it[5].blocked[AN_BLK_H2D], 16000 * US);
	/* against the pinned copies' speed: 32 MiB in 16 ms on the GPU (their calls return after 10 us) */
	int seen = 0;
	for (int k = 0; k < f->nev; k++) {
		if (!strcmp(f->ev[k].key, "pinned_gbps") || !strcmp(f->ev[k].key, "achieved_gbps")) {
			seen++;
			cr_expect(fabs(f->ev[k].num - (double)(32 << 20) / 16e6) < 1e-6, "%s %g", f->ev[k].key,
				  f->ev[k].num);
		}
	}
	cr_expect_eq(seen, 2);
	an_analysis_free(&a);
}

Test(findings, unpinned_copy_silent_with_pinned_copies)
{
	struct an_analysis a;
	copy_run(&a, -1);
	cr_expect_null(find(&a, AN_F_UNPINNED_COPY, NULL));
	an_analysis_free(&a);
}

/*
 * Severity of unpinned_copy: 12 iterations (input 1 ms, H2D of 32 MiB on the GPU
 * for `copy_us`, a 4 ms kernel, sync); the iterations in [from, to] copy from
 * pageable memory with `api` (a pageable copy returns when it is done).
 */
static int upc_severity(unsigned api, int from, int to, uint64_t copy_us)
{
	struct sim s;
	sim_init(&s);
	for (int i = 0; i < 12; i++) {
		sim_step(&s, 1000 * US);
		int pageable = i >= from && i <= to;
		sim_copy(&s, SP_DIR_H2D, 32 << 20, copy_us * US, pageable);
		s.m.ev[s.m.n - 2].api = api; /* the COPY record just added, before its GPU span */
		sim_compute(&s, 4000 * US);
	}
	struct an_analysis a;
	run_free(&s, NULL, &a);
	const struct an_result_finding *f = find(&a, AN_F_UNPINNED_COPY, NULL);
	cr_assert_not_null(f);
	cr_expect_eq(f->first_iteration, from);
	cr_expect_eq(f->last_iteration, to);
	cr_expect_eq(f->iterations, to - from + 1);
	int sev = f->severity;
	an_analysis_free(&a);
	return sev;
}

Test(findings, unpinned_copy_severity_by_time_share_and_async)
{
	/* one 1 ms pageable copy in a run of ~72 ms: under 5% of wall time */
	cr_expect_eq(upc_severity(SP_API_cudaMemcpy, 5, 5, 1000), 0, "a rare synchronous pageable copy is info");
	cr_expect_eq(upc_severity(SP_API_cudaMemcpyAsync, 5, 5, 1000), 1,
		     "an async copy from pageable memory silently serialises: at least a warning");
	/* 16 ms of copy in iterations of 21 ms: 76% of wall time */
	cr_expect_eq(upc_severity(SP_API_cudaMemcpy, 0, 11, 16000), 2);
	/* 4 of 12 iterations of 6 ms with a 1 ms copy: 4 / 72 = 5.6% >= 5% */
	cr_expect_eq(upc_severity(SP_API_cudaMemcpy, 2, 5, 1000), 1);
}

/*
 * `loss.item()` as PyTorch makes it: a 4-byte cudaMemcpyAsync D2H into pageable
 * memory after the step's kernels, then what the thread calls next: 0 a sync of
 * the copy's stream, 1 cudaDeviceSynchronize, 2 a launch (then the sync), 3 a
 * sync of another stream. Returns the finding's severity; *async its
 * async_copies evidence. The copies' 10 us in iterations of ~5 ms: under 5%.
 */
/* An iteration of 1 ms of input and a 4 ms kernel, then its loss.item(): 4 bytes D2H to pageable memory. */
static void sim_item_step(struct sim *s)
{
	sim_step(s, 1000 * US);
	sim_kernel(s, s->kname, 4000 * US);
	sim_copy(s, SP_DIR_D2H, 4, 10 * US, 1);
}

static int upc_item(int then, double *async)
{
	struct sim s;
	sim_init(&s);
	for (int i = 0; i < 12; i++) {
		sim_item_step(&s);
		if (then == 2)
			sim_kernel(&s, s.kname, 100 * US);
		uint64_t e = s.t > s.gpu ? s.t : s.gpu;
		struct sp_event *ev = add(&s, SP_K_SYNC,
					  then == 1 ? SP_API_cudaDeviceSynchronize : SP_API_cudaStreamSynchronize, s.t, e);
		ev->f[SP_F_STREAM] = then == 3 ? 7 : 0;
		s.t = e;
	}
	struct an_analysis a;
	run_free(&s, NULL, &a);
	const struct an_result_finding *f = find(&a, AN_F_UNPINNED_COPY, NULL);
	cr_assert_not_null(f, "pageable copies are reported, whatever their severity");
	cr_expect_eq(f->iterations, 12);
	*async = -1;
	for (int k = 0; k < f->nev; k++)
		if (!strcmp(f->ev[k].key, "async_copies"))
			*async = f->ev[k].num;
	int sev = f->severity;
	an_analysis_free(&a);
	return sev;
}

Test(findings, unpinned_copy_awaited_at_once_does_not_serialise_silently)
{
	double async;
	cr_expect_eq(upc_item(0, &async), 0, "an .item() copy synchronised at once: info");
	cr_expect_eq(async, 0);
	cr_expect_eq(upc_item(1, &async), 0, "the device synchronised at once: info");
	cr_expect_eq(async, 0);
	cr_expect_eq(upc_item(2, &async), 1, "work queued after it: the copy serialised it silently");
	cr_expect_eq(async, 12);
	cr_expect_eq(upc_item(3, &async), 1, "another stream synchronised: not this copy's wait");
	cr_expect_eq(async, 12);
}

/*
 * Which advice unpinned_copy gives: 12 iterations of 1 ms of input and a 4 ms
 * kernel, then per iteration `items` 4-byte loss.item() reads (D2H to pageable
 * memory, 10 us on the GPU, each synchronised at once) and `big` 8 MiB pageable
 * H2D copies of big_us on the GPU. Returns the finding's small_copies and
 * small_copies_time_share evidence and its advice (static).
 */
static const char *upc_advice_of(int items, int big, uint64_t big_us, const struct an_options *o, double *nsmall,
				 double *share)
{
	static char advice[1024];
	struct sim s;
	sim_init(&s);
	for (int i = 0; i < 12; i++) {
		sim_step(&s, 1000 * US);
		for (int b = 0; b < big; b++)
			sim_copy(&s, SP_DIR_H2D, 8 << 20, big_us * US, 1);
		sim_kernel(&s, s.kname, 4000 * US);
		for (int k = 0; k < items; k++) {
			sim_copy(&s, SP_DIR_D2H, 4, 10 * US, 1);
			uint64_t e = s.t > s.gpu ? s.t : s.gpu;
			add(&s, SP_K_SYNC, SP_API_cudaStreamSynchronize, s.t, e);
			s.t = e;
		}
	}
	struct an_analysis a;
	run_free(&s, o, &a);
	const struct an_result_finding *f = find(&a, AN_F_UNPINNED_COPY, NULL);
	cr_assert_not_null(f);
	*nsmall = *share = -1;
	for (int k = 0; k < f->nev; k++) {
		if (!strcmp(f->ev[k].key, "small_copies"))
			*nsmall = f->ev[k].num;
		if (!strcmp(f->ev[k].key, "small_copies_time_share"))
			*share = f->ev[k].num;
	}
	snprintf(advice, sizeof(advice), "%s", f->advice);
	an_analysis_free(&a);
	return advice;
}

/*
 * Copies of a few bytes that hold half the pageable copies' time or more are
 * scalar reads: the advice is to read back less often (pinning cannot help a
 * loss.item()), with the pinning advice added for larger pageable copies; below
 * half, or with unpinned_copy.small_copy_bytes under their size, the pinning
 * advice alone. Before, every pageable copy got the pinning advice.
 */
Test(findings, unpinned_copy_of_scalars_advises_fewer_reads_not_pinning)
{
	double n, share;
	const char *adv = upc_advice_of(3, 0, 0, NULL, &n, &share);
	cr_expect_eq(n, 36);
	cr_expect_float_eq(share, 1.0, 1e-9);
	cr_expect(strstr(adv, "less often") && !strstr(adv, "larger copies"), "%s", adv);
	/* 36 x 10 us of items against 12 x 200 us of 8 MiB copies: the big ones dominate */
	adv = upc_advice_of(3, 1, 200, NULL, &n, &share);
	cr_expect_eq(n, 36);
	cr_expect_float_eq(share, 360.0 / (360 + 2400), 1e-6);
	cr_expect(!strstr(adv, "less often") && strstr(adv, "pinned"), "%s", adv);
	/* 12 x 20 us of 8 MiB copies: the items dominate, both remedies */
	adv = upc_advice_of(3, 1, 20, NULL, &n, &share);
	cr_expect_float_eq(share, 360.0 / (360 + 240), 1e-6);
	cr_expect(strstr(adv, "less often") && strstr(adv, "larger copies"), "%s", adv);
	/* exactly half: fewer reads */
	adv = upc_advice_of(3, 1, 30, NULL, &n, &share);
	cr_expect_float_eq(share, 0.5, 1e-9);
	cr_expect(strstr(adv, "less often"), "%s", adv);
	/* 4-byte copies above a small_copy_bytes of 2: not scalar reads */
	struct an_options o;
	an_options_init(&o);
	o.threshold[AN_T_UPC_SMALL] = 2;
	adv = upc_advice_of(3, 0, 0, &o, &n, &share);
	cr_expect_eq(n, 0);
	cr_expect(!strstr(adv, "less often") && strstr(adv, "pinned"), "%s", adv);
}

/*
 * Exactly at each bound: 12 iterations of 5985 us (a 1 ms wait, a 5 us launch,
 * a 4980 us kernel, its sync), the first k of which first copy from pageable
 * memory for c us with cudaMemcpy (synchronous: only the share decides), a
 * share of k c / (12 x 5985 + k c): 5% for k c = 3780, 30% for k c = 30780.
 */
static int upc_share_severity(int k, uint64_t copy_us)
{
	struct sim s;
	sim_init(&s);
	for (int i = 0; i < 12; i++) {
		sim_step(&s, 1000 * US);
		if (i < k) {
			sim_copy(&s, SP_DIR_H2D, 32 << 20, copy_us * US, 1);
			s.m.ev[s.m.n - 2].api = SP_API_cudaMemcpy;
		}
		sim_compute(&s, 4980 * US);
	}
	struct an_analysis a;
	run_free(&s, NULL, &a);
	const struct an_result_finding *f = find(&a, AN_F_UNPINNED_COPY, NULL);
	cr_assert_not_null(f);
	cr_expect_eq(a.wall_total, (12 * 5985 + (uint64_t)k * copy_us) * US);
	int sev = f->severity;
	an_analysis_free(&a);
	return sev;
}

Test(findings, unpinned_copy_severity_at_its_exact_bounds)
{
	cr_expect_eq(upc_share_severity(2, 1890), 1, "5%% exactly: warning");
	cr_expect_eq(upc_share_severity(2, 1889), 0, "just under 5%%: info");
	cr_expect_eq(upc_share_severity(4, 7695), 2, "30%% exactly: critical");
	cr_expect_eq(upc_share_severity(4, 7694), 1, "just under 30%%: warning");
}

/*
 * A 4-byte pageable D2H copy behind a 4 ms kernel (PyTorch's .item()): the call
 * lasts the kernel plus the copy's 10 us, but the copy costs 10 us; the kernel's
 * time is not the copy's (its time share and GB/s would be absurd, its severity
 * critical).
 */
Test(findings, unpinned_copy_time_is_the_copy_not_the_wait_before_it)
{
	struct sim s;
	sim_init(&s);
	for (int i = 0; i < 12; i++) {
		sim_item_step(&s);
		s.m.ev[s.m.n - 2].api = SP_API_cudaMemcpy;
		cr_assert_geq(s.m.ev[s.m.n - 2].end_ns - s.m.ev[s.m.n - 2].begin_ns, 4000 * US, "the call waits");
		sim_sync(&s);
	}
	struct an_analysis a;
	run_free(&s, NULL, &a);
	cr_assert_eq(a.nit, 12);
	for (size_t i = 0; i < a.nit; i++) {
		cr_expect_eq(a.it[i].pageable_copies, 1);
		cr_expect_eq(a.it[i].pageable_ns, 10 * US, "iteration %zu: %lu ns", i,
			     (unsigned long)a.it[i].pageable_ns);
		cr_expect_geq(a.it[i].blocked[AN_BLK_D2H], 4000 * US, "the host was blocked in the call all along");
	}
	const struct an_result_finding *f = find(&a, AN_F_UNPINNED_COPY, NULL);
	cr_assert_not_null(f);
	cr_expect_eq(f->severity, 0, "10 us in 5 ms iterations, synchronous: info");
	for (int k = 0; k < f->nev; k++)
		if (!strcmp(f->ev[k].key, "achieved_gbps"))
			cr_expect(fabs(f->ev[k].num - 4.0 / 10000) < 1e-9, "achieved %g GB/s", f->ev[k].num);
	an_analysis_free(&a);
}

#define MiB (1024ull * 1024)

static void alloc_ev(struct sim *s, unsigned kind, uint64_t dptr, uint64_t bytes, uint64_t *live)
{
	if (kind == SP_K_ALLOC)
		*live += bytes;
	else
		*live -= bytes;
	struct sp_event *e = add(s, kind, kind == SP_K_ALLOC ? SP_API_cudaMalloc : SP_API_cudaFree, s->t, s->t + US);
	e->f[SP_F_DPTR] = dptr;
	e->f[SP_F_BYTES] = bytes;
	e->f[SP_F_LIVE] = *live;
	s->t += 2 * US;
}

/*
 * sim_storm with a pageable copy: the input share is wait / wall, the copies'
 * share copy / wall, with wall = wait + copy + 5 + kernel (us). Returns the
 * kinds of the findings in their order, and the text report's.
 */
static void order_run(uint64_t wait_us, uint64_t copy_us, uint64_t kernel_us, int kinds[2], int text_kinds[2])
{
	struct sim s;
	sim_storm(&s, wait_us, copy_us, kernel_us);
	struct an_analysis a;
	run_free(&s, NULL, &a);
	cr_assert_eq(a.nfnd, 2);
	for (int k = 0; k < 2; k++)
		kinds[k] = a.fnd[k].kind;
	char *text = NULL;
	size_t len = 0;
	FILE *f = open_memstream(&text, &len);
	cr_assert_eq(report_text(f, &a, 0), 0);
	fclose(f);
	const char *sfs = strstr(text, "] small_file_storm"), *upc = strstr(text, "] unpinned_copy");
	cr_assert(sfs && upc, "%s", text);
	text_kinds[0] = sfs < upc ? AN_F_SMALL_FILE_STORM : AN_F_UNPINNED_COPY;
	text_kinds[1] = sfs < upc ? AN_F_UNPINNED_COPY : AN_F_SMALL_FILE_STORM;
	free(text);
	an_analysis_free(&a);
}

static void expect_order(uint64_t wait_us, uint64_t copy_us, uint64_t kernel_us, int first, const char *why)
{
	int kinds[2], text[2];
	order_run(wait_us, copy_us, kernel_us, kinds, text);
	int second = first == AN_F_SMALL_FILE_STORM ? AN_F_UNPINNED_COPY : AN_F_SMALL_FILE_STORM;
	cr_expect(kinds[0] == first && kinds[1] == second, "%s: findings %s, %s", why, an_finding_name[kinds[0]],
		  an_finding_name[kinds[1]]);
	cr_expect(text[0] == first && text[1] == second, "%s: text report %s, %s", why, an_finding_name[text[0]],
		  an_finding_name[text[1]]);
}

/*
 * What to fix first comes first, in the JSON and the text report: the most
 * severe finding, then the one that costs the most wall time.
 */
Test(findings, findings_come_in_the_order_to_fix_them)
{
	/* input 500 of 9705 us (5%: info); an Async copy from pageable memory: warning */
	expect_order(500, 200, 9000, AN_F_UNPINNED_COPY, "info storm, warning copy");
	/* both warnings: input 2000 of 9205 us (22%) against copies of 200 us (2%) */
	expect_order(2000, 200, 7000, AN_F_SMALL_FILE_STORM, "storm costs 2000 us, copies 200");
	/* both warnings: input 1200 of 10205 us (12%) against copies of 3000 us (29%) */
	expect_order(1200, 3000, 6000, AN_F_UNPINNED_COPY, "storm costs 1200 us, copies 3000");
	/* critical storm, input 4000 of 7205 us (56%), against copies of 3000 (42%: critical too) */
	expect_order(4000, 3000, 200, AN_F_SMALL_FILE_STORM, "both critical, storm costs more");
}

/*
 * Automatic detection, where an iteration begins. A setup phase reads 20 files
 * on the training thread, then allocates device memory (cudaMalloc); then the
 * reference iterations, where the first one, after its wait for the batch,
 * allocates (a caching allocator's first use: cudaMalloc between the wait and
 * the H2D copy). The first iteration begins where its wait begins, so it
 * holds the first load; the setup's reads are in no iteration.
 */
Test(analyze, automatic_iterations_begin_at_the_wait_also_before_an_allocation)
{
	struct sim s;
	sim_init(&s);
	uint64_t live = 0;
	uint32_t path = an_memsrc_string(&s.m, "/etc/config.yaml");
	for (int k = 0; k < 20; k++, s.t += 100 * US) {
		struct sp_event *e = add(&s, SP_K_OPEN, SP_API_open, s.t, s.t + 50 * US);
		e->f[SP_F_PATH] = path;
		e->f[SP_F_FD] = 3;
	}
	alloc_ev(&s, SP_K_ALLOC, 0x10, 64 * MiB, &live); /* setup: the model's weights */
	s.t += 500 * US;
	uint64_t starts[20];
	for (int i = 0; i < 20; i++) {
		starts[i] = s.t;
		if (i) {
			sim_iteration(&s, 0);
			continue;
		}
		/* the reference iteration with an allocation after its wait */
		sim_input(&s, 4000 * US);
		alloc_ev(&s, SP_K_ALLOC, 0x20, 2 * MiB, &live);
		s.t += 1000 * US - 2 * US; /* the allocation took 2 us of the host's 1000 */
		sim_copy(&s, SP_DIR_H2D, 2 << 20, 2000 * US, 0);
		for (int k = 0; k < 4; k++)
			sim_kernel(&s, s.kname, 1000 * US);
		sim_copy(&s, SP_DIR_D2H, 4096, 100 * US, 0);
		sim_sync(&s);
	}
	struct an_analysis a;
	run_free(&s, NULL, &a);
	cr_expect_eq(a.source_kind, AN_SRC_AUTO);
	expect_reference(&a, 20);
	for (size_t i = 0; i < a.nit; i++)
		cr_expect_eq(a.it[i].start_ns, starts[i], "iteration %zu begins %+ld ns off", i,
			     (long)(a.it[i].start_ns - starts[i]));
	an_analysis_free(&a);
}

/*
 * DataLoader(pin_memory=True): a pin thread PIN of the trainer receives the
 * batches from the workers (its loader waits) and hands them to the training
 * thread, which waits in a lock (lock_wait) only when the batch is not there.
 * Before the loop, a set-up phase writes the data set (20 opens on the training
 * thread) and allocates.
 */
#define PIN 103

static void pin_wait(struct sim *s, uint64_t b, uint64_t e)
{
	struct sp_event *x = an_memsrc_add(&s->m, SP_K_LOADER_WAIT, SP_API_read, PID, PIN, b, e);
	x->f[SP_F_FD_TYPE] = SP_FDTYPE_PIPE;
	x->f[SP_F_BYTES] = 48;
}

static void pin_setup(struct sim *s)
{
	uint64_t live = 0;
	sim_init(s);
	uint32_t path = an_memsrc_string(&s->m, "/tmp/data/f0.bin");
	for (int k = 0; k < 20; k++, s->t += 100 * US) {
		struct sp_event *e = add(s, SP_K_OPEN, SP_API_open, s->t, s->t + 50 * US);
		e->f[SP_F_PATH] = path;
		e->f[SP_F_FD] = 3;
	}
	alloc_ev(s, SP_K_ALLOC, 0x10, 64 * MiB, &live);
	s->t += 500 * US;
}

/*
 * Automatic iterations begin where the training thread's input begins, in the
 * breakdown's sense: its lock wait while the pin thread waits for the workers.
 * Every 4th iteration the training thread waits 4050 us for its batch, which
 * the pin thread has waited for since 2 ms before (iteration 0: since 300 us
 * after the lock wait began, the pin thread's start): the iteration begins at
 * the overlap, which is its input. The others find their batch there (no
 * record) and begin at their H2D copy, after the host's 1000 us; in those
 * i = 2 (mod 4) the training thread also waits 500 us on another lock while no
 * thread waits for a worker (other, not input). Iteration 0 allocates after its
 * wait (a caching allocator's first cudaMalloc) while the pin thread begins its
 * wait for the next batch: the iteration still begins at its wait, and the
 * set-up's opens are in no iteration.
 */
Test(analyze, automatic_iterations_of_a_pin_thread_begin_at_the_input_of_the_lock_wait)
{
	struct sim s;
	pin_setup(&s);
	uint64_t starts[20], input[20], live = 0;
	for (int i = 0; i < 20; i++) {
		uint64_t t = s.t;
		input[i] = 0;
		starts[i] = t + 1000 * US;
		if (i % 4 == 0) {
			uint64_t pb = i ? t - 2000 * US : t + 300 * US;
			pin_wait(&s, pb, t + 4000 * US);
			add(&s, SP_K_LOCK_WAIT, SP_API_sem_clockwait, t, t + 4050 * US);
			s.t += 4050 * US;
			starts[i] = i ? t : pb;
			input[i] = t + 4000 * US - starts[i];
			if (!i) {
				alloc_ev(&s, SP_K_ALLOC, 0x20, 2 * MiB, &live);
				pin_wait(&s, s.t + 20 * US, s.t + 9000 * US);
			}
		} else if (i % 4 == 2) {
			add(&s, SP_K_LOCK_WAIT, SP_API_sem_clockwait, t, t + 500 * US);
			s.t += 500 * US;
			starts[i] += 500 * US;
		} else {
			pin_wait(&s, t + 6000 * US, t + 6100 * US); /* prefetch while the kernels run */
		}
		sim_batch(&s);
	}
	expect_auto(&s, starts, input, 20);
}

/*
 * The pin thread hands over the first batch before the training thread waits
 * for it (no lock wait at all, as in a clean run): the training thread's last
 * input calls, the set-up's opens, are not the wait for that batch, which
 * another thread received after the set-up's allocation. Every iteration
 * begins at its H2D copy; the set-up is in none.
 */
Test(analyze, automatic_iterations_of_a_pin_thread_without_lock_waits_leave_the_setup_out)
{
	struct sim s;
	pin_setup(&s);
	uint64_t starts[20];
	for (int i = 0; i < 20; i++) {
		pin_wait(&s, s.t + 100 * US, s.t + 150 * US);
		starts[i] = s.t + 1000 * US;
		sim_batch(&s);
	}
	expect_auto_starts(&s, starts, 20, 0);
}

/* Iteration 6 fails an allocation (free given), then frees `nfree` 24 MiB segments and retries. */
static void frag_run(struct an_analysis *a, uint64_t request, uint64_t free_at_fail, int nfree)
{
	struct sim s;
	sim_init(&s);
	uint64_t live = 0;
	for (int k = 0; k < 16; k++)
		alloc_ev(&s, SP_K_ALLOC, 0x1000 + (uint64_t)k, 24 * MiB, &live);
	for (int i = 0; i < 12; i++) {
		sim_step(&s, 1000 * US);
		if (i == 6) {
			struct sp_event *e = add(&s, SP_K_ALLOC_FAILED, SP_API_cudaMalloc, s.t, s.t + US);
			e->f[SP_F_BYTES] = request;
			e->f[SP_F_FREE] = free_at_fail;
			e->f[SP_F_TOTAL] = 1024 * MiB;
			e->f[SP_F_SITE] = an_memsrc_string(&s.m, "trainer!fragment+0x42");
			s.t += 2 * US;
			for (int k = 0; k < nfree; k++)
				alloc_ev(&s, SP_K_FREE, 0x1000 + (uint64_t)k, 24 * MiB, &live);
			alloc_ev(&s, SP_K_ALLOC, 0x9000, request, &live);
			alloc_ev(&s, SP_K_FREE, 0x9000, request, &live);
			for (int k = 0; k < nfree; k++)
				alloc_ev(&s, SP_K_ALLOC, 0x1000 + (uint64_t)k, 24 * MiB, &live);
		}
		sim_copy(&s, SP_DIR_H2D, 1 << 20, 500 * US, 0);
		sim_compute(&s, 2000 * US);
	}
	run_free(&s, NULL, a);
}

Test(findings, alloc_fragmentation_failure_with_free_memory_is_critical)
{
	struct an_analysis a;
	frag_run(&a, 33 * MiB, 33 * MiB, 0);
	const struct an_result_finding *f = find(&a, AN_F_ALLOC_FRAGMENTATION, "failed_with_free_memory");
	cr_assert(f);
	cr_expect_eq(f->severity, 2);
	cr_expect_eq(f->first_iteration, 6);
	cr_expect_eq(f->nsites, 1);
	cr_expect_str_eq(f->sites[0], "trainer!fragment+0x42");
	cr_expect_null(find(&a, AN_F_ALLOC_FRAGMENTATION, "allocator_flush"));
	an_analysis_free(&a);
}

Test(findings, alloc_fragmentation_silent_when_free_is_below_the_request)
{
	struct an_analysis a;
	frag_run(&a, 33 * MiB, 33 * MiB - 1, 0);
	cr_expect_null(find(&a, AN_F_ALLOC_FRAGMENTATION, "failed_with_free_memory"));
	an_analysis_free(&a);
}

Test(findings, alloc_fragmentation_flush_fires_at_8_frees)
{
	struct an_analysis a;
	frag_run(&a, 33 * MiB, 0, 8);
	const struct an_result_finding *f = find(&a, AN_F_ALLOC_FRAGMENTATION, "allocator_flush");
	cr_assert(f);
	cr_expect_eq(f->first_iteration, 6);
	cr_expect_eq(f->last_iteration, 6);
	an_analysis_free(&a);
	frag_run(&a, 33 * MiB, 0, 7);
	cr_expect_null(find(&a, AN_F_ALLOC_FRAGMENTATION, "allocator_flush"));
	an_analysis_free(&a);
}

/*
 * (b) without a failed allocation: in iteration 6 the allocator releases 8 of its
 * `segments` cached 24 MiB segments at once and allocates again. A flush when
 * the burst releases >= half the live bytes (flush_min_fraction).
 */
static const struct an_result_finding *flush_run(struct an_analysis *a, int segments)
{
	struct sim s;
	sim_init(&s);
	uint64_t live = 0;
	for (int k = 0; k < segments; k++)
		alloc_ev(&s, SP_K_ALLOC, 0x1000 + (uint64_t)k, 24 * MiB, &live);
	for (int i = 0; i < 12; i++) {
		sim_step(&s, 1000 * US);
		if (i == 6) {
			for (int k = 0; k < 8; k++)
				alloc_ev(&s, SP_K_FREE, 0x1000 + (uint64_t)k, 24 * MiB, &live);
			for (int k = 0; k < 8; k++)
				alloc_ev(&s, SP_K_ALLOC, 0x1000 + (uint64_t)k, 24 * MiB, &live);
		}
		sim_compute(&s, 2000 * US);
	}
	run_free(&s, NULL, a);
	return find(a, AN_F_ALLOC_FRAGMENTATION, "allocator_flush");
}

Test(findings, alloc_fragmentation_flush_without_failure_needs_half_the_live_bytes)
{
	struct an_analysis a;
	const struct an_result_finding *f = flush_run(&a, 16); /* 8 of 16: 50% */
	cr_assert_not_null(f);
	cr_expect_eq(f->first_iteration, 6);
	cr_expect_eq(f->last_iteration, 6);
	cr_expect_null(find(&a, AN_F_ALLOC_FRAGMENTATION, "failed_with_free_memory"));
	an_analysis_free(&a);
	cr_expect_null(flush_run(&a, 17), "8 of 17 segments: 47%"); /* just under */
	an_analysis_free(&a);
}

/* A device reset as the preload records it: one free of everything on dev (dptr 0), live bytes 0. */
static void reset_ev(struct sim *s, unsigned dev, uint64_t *live)
{
	struct sp_event *e = add(s, SP_K_FREE, SP_API_cudaDeviceReset, s->t, s->t + US);
	e->f[SP_F_DPTR] = 0;
	e->f[SP_F_BYTES] = *live;
	e->f[SP_F_LIVE] = 0;
	e->f[SP_F_DEVICE] = dev;
	*live = 0;
	s->t += 2 * US;
}

/*
 * As flush_run(16) (8 of 16 segments released, then allocations again), but
 * the 8th release is a device reset after 7 frees: the program's doing, not
 * an allocator's flush.
 */
Test(findings, device_reset_is_no_allocator_flush)
{
	struct sim s;
	sim_init(&s);
	uint64_t live = 0;
	for (int k = 0; k < 16; k++)
		alloc_ev(&s, SP_K_ALLOC, 0x1000 + (uint64_t)k, 24 * MiB, &live);
	for (int i = 0; i < 12; i++) {
		sim_step(&s, 1000 * US);
		if (i == 6) {
			for (int k = 0; k < 7; k++)
				alloc_ev(&s, SP_K_FREE, 0x1000 + (uint64_t)k, 24 * MiB, &live);
			reset_ev(&s, 0, &live);
			for (int k = 0; k < 8; k++)
				alloc_ev(&s, SP_K_ALLOC, 0x1000 + (uint64_t)k, 24 * MiB, &live);
		}
		sim_compute(&s, 2000 * US);
	}
	struct an_analysis a;
	run_free(&s, NULL, &a);
	cr_expect_null(find(&a, AN_F_ALLOC_FRAGMENTATION, "allocator_flush"), "a device reset taken for a flush");
	cr_assert_eq(a.nit, 12);
	cr_expect_eq(a.it[5].device_bytes_peak, 16 * 24 * MiB);
	cr_expect_eq(a.it[7].device_bytes_peak, 8 * 24 * MiB, "after the reset: the 8 segments allocated again");
	an_analysis_free(&a);
}

/* Iteration 5 allocates `extra` bytes in `sizes` distinct sizes above a steady 64 MiB and frees them. */
static void peak_run(struct an_analysis *a, uint64_t extra, int sizes)
{
	struct sim s;
	sim_init(&s);
	uint64_t live = 0;
	alloc_ev(&s, SP_K_ALLOC, 0x10, 64 * MiB, &live);
	for (int i = 0; i < 12; i++) {
		sim_step(&s, 1000 * US);
		if (i == 5) {
			uint64_t left = extra, b[8];
			for (int k = 0; k < sizes; k++) {
				b[k] = k + 1 < sizes ? extra / (uint64_t)sizes + (uint64_t)k * 512 : left;
				alloc_ev(&s, SP_K_ALLOC, 0x100 + (uint64_t)k, b[k], &live);
				left -= b[k];
			}
			for (int k = 0; k < sizes; k++)
				alloc_ev(&s, SP_K_FREE, 0x100 + (uint64_t)k, b[k], &live);
		}
		sim_compute(&s, 2000 * US);
	}
	run_free(&s, NULL, a);
}

Test(findings, fragmentation_peak_fires_at_1_5x_with_churn)
{
	struct an_analysis a;
	peak_run(&a, 32 * MiB, 4);
	cr_assert_eq(a.nit, 12);
	cr_expect_eq(a.it[5].device_bytes_peak, 96 * MiB);
	cr_expect_eq(a.it[4].device_bytes_peak, 64 * MiB);
	const struct an_result_finding *f = find(&a, AN_F_ALLOC_FRAGMENTATION, "fragmentation_peak");
	cr_assert(f);
	cr_expect_eq(f->first_iteration, 5);
	cr_expect_eq(f->last_iteration, 5);
	an_analysis_free(&a);
}

Test(findings, fragmentation_peak_silent_just_under)
{
	struct an_analysis a;
	peak_run(&a, 32 * MiB - 4096, 4); /* 1.4999x */
	cr_expect_null(find(&a, AN_F_ALLOC_FRAGMENTATION, "fragmentation_peak"));
	an_analysis_free(&a);
	peak_run(&a, 32 * MiB, 3); /* only 3 sizes: no churn */
	cr_expect_null(find(&a, AN_F_ALLOC_FRAGMENTATION, "fragmentation_peak"));
	an_analysis_free(&a);
}

/*
 * Memory allocated before the first iteration and freed after the last (a
 * teardown): every iteration held it, although none saw a memory event.
 */
Test(analyze, device_peak_of_iterations_without_memory_events)
{
	struct sim s;
	sim_init(&s);
	uint64_t live = 0;
	alloc_ev(&s, SP_K_ALLOC, 0x10, 200 * MiB, &live);
	alloc_ev(&s, SP_K_ALLOC, 0x20, 4096, &live);
	for (int i = 0; i < 12; i++)
		sim_iteration(&s, 2);
	s.t += 1000 * US;
	alloc_ev(&s, SP_K_FREE, 0x10, 200 * MiB, &live);
	alloc_ev(&s, SP_K_FREE, 0x20, 4096, &live);
	struct an_analysis a;
	run(&s, NULL, &a);
	cr_assert_eq(a.nit, 12);
	for (size_t i = 0; i < a.nit; i++)
		cr_expect_eq(a.it[i].device_bytes_peak, 200 * MiB + 4096, "iteration %zu: peak %lu", i,
			     (unsigned long)a.it[i].device_bytes_peak);
	cr_expect_eq(a.device_bytes_peak, 200 * MiB + 4096);
	an_analysis_free(&a);
	an_memsrc_free(&s.m);
}

/*
 * `iters` iterations each leaking `leak` bytes above a `base` allocated before
 * them, on a device of `capacity` bytes; odd iterations also hold a temporary
 * block of `wobble` bytes, freed within the iteration (noise on the peak).
 * Per-iteration peak: base + (i + 1) * leak + (i odd ? wobble : 0).
 */
static void growth_run(struct an_analysis *a, const struct an_options *o, int iters, uint64_t base, uint64_t leak,
		       uint64_t wobble, uint64_t capacity)
{
	struct sim s;
	sim_init(&s);
	s.m.hdr.ndevices = 1;
	s.m.hdr.devices[0].mem_bytes = capacity;
	uint64_t live = 0;
	alloc_ev(&s, SP_K_ALLOC, 0x10, base, &live);
	uint32_t site = an_memsrc_string(&s.m, "trainer!leak+0x10");
	for (int i = 0; i < iters; i++) {
		sim_step(&s, 1000 * US);
		live += leak;
		struct sp_event *e = add(&s, SP_K_ALLOC, SP_API_cudaMalloc, s.t, s.t + US);
		e->f[SP_F_DPTR] = 0x1000 + (uint64_t)i;
		e->f[SP_F_BYTES] = leak;
		e->f[SP_F_LIVE] = live;
		e->f[SP_F_SITE] = site;
		s.t += 2 * US;
		if (i % 2 && wobble) {
			alloc_ev(&s, SP_K_ALLOC, 0x100000 + (uint64_t)i, wobble, &live);
			alloc_ev(&s, SP_K_FREE, 0x100000 + (uint64_t)i, wobble, &live);
		}
		sim_compute(&s, 2000 * US);
	}
	run_free(&s, o, a);
}

static void leak_run(struct an_analysis *a, int iters, uint64_t leak, uint64_t capacity)
{
	growth_run(a, NULL, iters, 200 * MiB, leak, 0, capacity);
}

/* R^2 of the least-squares line through growth_run's peaks, computed here from their formula. */
static double growth_r2(int n, uint64_t base, uint64_t leak, uint64_t wobble)
{
	double y[64], mx = 0, my = 0, sxx = 0, sxy = 0, syy = 0;
	for (int i = 0; i < n; i++) {
		y[i] = (double)(base + (uint64_t)(i + 1) * leak + (i % 2 ? wobble : 0));
		mx += i;
		my += y[i];
	}
	mx /= n;
	my /= n;
	for (int i = 0; i < n; i++) {
		sxx += (i - mx) * (i - mx);
		sxy += (i - mx) * (y[i] - my);
		syy += (y[i] - my) * (y[i] - my);
	}
	return sxy * sxy / (sxx * syy);
}

Test(findings, memory_growth_fires_and_is_critical_near_capacity)
{
	struct an_analysis a;
	/* 10 iterations of +2 MiB: growth 18 MiB over the fit (>= 16 MiB, >= 5% of 202 MiB)... */
	leak_run(&a, 10, 2 * MiB, 1024 * MiB);
	const struct an_result_finding *f = find(&a, AN_F_MEMORY_GROWTH, NULL);
	cr_assert(f);
	cr_expect_eq(f->first_iteration, 0);
	cr_expect_eq(f->last_iteration, 9);
	/* ...and 1 GiB is ~400 iterations away: critical */
	cr_expect_eq(f->severity, 2);
	cr_expect_eq(f->nsites, 1);
	cr_expect_str_eq(f->sites[0], "trainer!leak+0x10");
	an_analysis_free(&a);
}

/*
 * A leak on device 0 (as leak_run) while device 1 gets a block in iteration
 * 3 that a reset of device 1 releases: the growth's sites are the leak's
 * only, and device 0's books are untouched by device 1's reset.
 */
Test(findings, device_reset_releases_the_blocks_of_its_device_only)
{
	struct sim s;
	sim_init(&s);
	s.m.hdr.ndevices = 2;
	s.m.hdr.devices[0].mem_bytes = s.m.hdr.devices[1].mem_bytes = 1024 * MiB;
	uint64_t live = 0, live1 = 0;
	alloc_ev(&s, SP_K_ALLOC, 0x10, 200 * MiB, &live);
	uint32_t site = an_memsrc_string(&s.m, "trainer!leak+0x10"), gone = an_memsrc_string(&s.m, "trainer!gone+0x20");
	for (int i = 0; i < 10; i++) {
		sim_step(&s, 1000 * US);
		live += 2 * MiB;
		struct sp_event *e = add(&s, SP_K_ALLOC, SP_API_cudaMalloc, s.t, s.t + US);
		e->f[SP_F_DPTR] = 0x1000 + (uint64_t)i;
		e->f[SP_F_BYTES] = 2 * MiB;
		e->f[SP_F_LIVE] = live;
		e->f[SP_F_SITE] = site;
		s.t += 2 * US;
		if (i == 3) {
			live1 = 4096;
			e = add(&s, SP_K_ALLOC, SP_API_cudaMalloc, s.t, s.t + US);
			e->f[SP_F_DPTR] = 0x900000;
			e->f[SP_F_BYTES] = live1;
			e->f[SP_F_LIVE] = live1;
			e->f[SP_F_SITE] = gone;
			e->f[SP_F_DEVICE] = 1;
			s.t += 2 * US;
			reset_ev(&s, 1, &live1);
		}
		sim_compute(&s, 2000 * US);
	}
	struct an_analysis a;
	run_free(&s, NULL, &a);
	const struct an_result_finding *f = find(&a, AN_F_MEMORY_GROWTH, NULL);
	cr_assert(f);
	cr_expect_eq(f->nsites, 1, "%d sites: the reset's block is still live", f->nsites);
	cr_expect_str_eq(f->sites[0], "trainer!leak+0x10");
	cr_expect_eq(a.it[9].device_bytes_peak, 220 * MiB);
	an_analysis_free(&a);
}

Test(findings, memory_growth_silent_just_under)
{
	struct an_analysis a;
	leak_run(&a, 9, 4 * MiB, 1024 * MiB); /* 9 iterations */
	cr_expect_null(find(&a, AN_F_MEMORY_GROWTH, NULL));
	an_analysis_free(&a);
	leak_run(&a, 10, 16 * MiB / 9 - 4096, 1024 * MiB); /* growth just under 16 MiB */
	cr_expect_null(find(&a, AN_F_MEMORY_GROWTH, NULL));
	an_analysis_free(&a);
}

/* A noisy rise: silent when R^2 is under min_r2, on each side of the R^2 this data has. */
Test(findings, memory_growth_silent_when_r2_is_just_under)
{
	struct an_analysis a;
	double r2 = growth_r2(20, 200 * MiB, 2 * MiB, 13 * MiB);
	cr_assert(r2 > 0.7 && r2 < 0.8, "the test's data: R^2 %.4f", r2);
	growth_run(&a, NULL, 20, 200 * MiB, 2 * MiB, 13 * MiB, 1024 * MiB); /* default min_r2 0.8 */
	cr_expect_null(find(&a, AN_F_MEMORY_GROWTH, NULL), "R^2 %.4f < 0.8", r2);
	an_analysis_free(&a);
	struct an_options o;
	an_options_init(&o);
	o.threshold[AN_T_MG_MIN_R2] = r2 - 0.001;
	growth_run(&a, &o, 20, 200 * MiB, 2 * MiB, 13 * MiB, 1024 * MiB);
	const struct an_result_finding *f = find(&a, AN_F_MEMORY_GROWTH, NULL);
	cr_assert_not_null(f, "R^2 %.4f >= %.4f", r2, r2 - 0.001);
	for (int k = 0; k < f->nev; k++)
		if (!strcmp(f->ev[k].key, "r2"))
			cr_expect(fabs(f->ev[k].num - r2) < 1e-6, "evidence r2 %.6f, the data's %.6f", f->ev[k].num,
				  r2);
	an_analysis_free(&a);
	o.threshold[AN_T_MG_MIN_R2] = r2 + 0.001;
	growth_run(&a, &o, 20, 200 * MiB, 2 * MiB, 13 * MiB, 1024 * MiB);
	cr_expect_null(find(&a, AN_F_MEMORY_GROWTH, NULL));
	an_analysis_free(&a);
}

/* Growth of 18 MiB (>= 16 MiB) over 10 iterations: it must also be >= 5% of where it started. */
Test(findings, memory_growth_silent_under_5_percent_of_the_start)
{
	struct an_analysis a;
	/* starts at 300 + 2 MiB: 5% is 15.1 MiB */
	growth_run(&a, NULL, 10, 300 * MiB, 2 * MiB, 0, 65536 * MiB);
	cr_expect_not_null(find(&a, AN_F_MEMORY_GROWTH, NULL));
	an_analysis_free(&a);
	/* starts at 400 + 2 MiB: 5% is 20.1 MiB */
	growth_run(&a, NULL, 10, 400 * MiB, 2 * MiB, 0, 65536 * MiB);
	cr_expect_null(find(&a, AN_F_MEMORY_GROWTH, NULL));
	an_analysis_free(&a);
}

/* Is there a memory_growth finding, and of which severity (-1: none)? */
static int growth_severity(int iters, uint64_t base, uint64_t leak, uint64_t capacity)
{
	struct an_analysis a;
	growth_run(&a, NULL, iters, base, leak, 0, capacity);
	const struct an_result_finding *f = find(&a, AN_F_MEMORY_GROWTH, NULL);
	int sev = f ? f->severity : -1;
	an_analysis_free(&a);
	return sev;
}

/*
 * Exactly at each bound, and just under it. Peaks base + (i + 1) leak, i < n:
 * the fitted growth is (n - 1) leak, from a fitted start of base + leak, and the
 * last fitted point, base + n leak, reaches the capacity after (capacity - base -
 * n leak) / leak more iterations.
 */
Test(findings, memory_growth_at_its_exact_bounds)
{
	/* growth 16 MiB exactly (17 iterations of 1 MiB), then 16 MiB - 16 bytes */
	cr_expect_eq(growth_severity(17, 200 * MiB, MiB, 65536 * MiB), 1);
	cr_expect_eq(growth_severity(17, 200 * MiB, MiB - 1, 65536 * MiB), -1);
	/* growth 18 MiB, 5% of a start of 360 MiB exactly; then of 360 MiB + 4 KiB */
	cr_expect_eq(growth_severity(10, 358 * MiB, 2 * MiB, 65536 * MiB), 1);
	cr_expect_eq(growth_severity(10, 358 * MiB + 4096, 2 * MiB, 65536 * MiB), -1);
	/* 10 iterations of 2 MiB end at 220 MiB: capacity 1000 iterations away exactly, then 1001 */
	cr_expect_eq(growth_severity(10, 200 * MiB, 2 * MiB, 2220 * MiB), 2);
	cr_expect_eq(growth_severity(10, 200 * MiB, 2 * MiB, 2222 * MiB), 1);
}

/*
 * A trainer on two devices of 64 GiB each: `held` MiB on device 0, `base` MiB on
 * device 1 where 24 MiB leak in each of 100 iterations. The peaks are the two
 * devices' sum; the leak exhausts device 1 after (65536 - base - 2400) / 24
 * more iterations, whatever device 0 holds: its memory_growth finding (-1: none),
 * and the projected exhaustion in *exhaust.
 */
static int two_device_growth(uint64_t held, uint64_t base, double *exhaust)
{
	struct sim s;
	sim_init(&s);
	s.m.hdr.ndevices = 2;
	s.m.hdr.devices[0].mem_bytes = s.m.hdr.devices[1].mem_bytes = 65536 * MiB;
	uint64_t live0 = 0, live1 = 0;
	alloc_ev(&s, SP_K_ALLOC, 0x10, held * MiB, &live0);
	alloc_ev(&s, SP_K_ALLOC, 0x20, base * MiB, &live1);
	s.m.ev[s.m.n - 1].f[SP_F_DEVICE] = 1;
	for (int i = 0; i < 100; i++) {
		sim_step(&s, 1000 * US);
		alloc_ev(&s, SP_K_ALLOC, 0x1000 + (uint64_t)i, 24 * MiB, &live1);
		s.m.ev[s.m.n - 1].f[SP_F_DEVICE] = 1;
		sim_compute(&s, 2000 * US);
	}
	struct an_analysis a;
	run_free(&s, NULL, &a);
	cr_expect_eq(a.device_capacity, 2 * 65536 * MiB, "the two devices' memory");
	cr_assert_eq(a.nit, 100);
	cr_expect_eq(a.it[99].device_bytes_peak, (held + base + 2400) * MiB);
	const struct an_result_finding *f = find(&a, AN_F_MEMORY_GROWTH, NULL);
	int sev = f ? f->severity : -1;
	*exhaust = -2;
	for (int k = 0; f && k < f->nev; k++)
		if (!strcmp(f->ev[k].key, "projected_exhaustion_iteration"))
			*exhaust = f->ev[k].num;
	an_analysis_free(&a);
	return sev;
}

Test(findings, memory_growth_projection_on_the_device_that_grows)
{
	double x;
	/* 30 GiB on device 0 + 12.3 GiB on device 1 exceed one device's 64 GiB sooner, not device 1 */
	cr_expect_eq(two_device_growth(30720, 10240, &x), 1, "device 1 is 2204 iterations from full: warning");
	cr_expect_eq(x, 99 + 2204, "exhaustion at %g", x);
	/* 1 GiB on device 0, device 1 fills in 924 iterations although 84 GiB of 128 are free */
	cr_expect_eq(two_device_growth(1024, 40960, &x), 2, "device 1 is 924 iterations from full: critical");
	cr_expect_eq(x, 99 + 924, "exhaustion at %g", x);
}

Test(findings, memory_growth_warning_when_capacity_is_far)
{
	struct an_analysis a;
	/* 20 iterations of +1 MiB: growth 19 MiB; 64 GiB is ~65000 iterations away */
	leak_run(&a, 20, 1 * MiB, 65536 * MiB);
	const struct an_result_finding *f = find(&a, AN_F_MEMORY_GROWTH, NULL);
	cr_assert(f);
	cr_expect_eq(f->severity, 1);
	an_analysis_free(&a);
}

Test(findings, thresholds_are_overridable_and_validated)
{
	struct an_options o;
	char err[256];
	an_options_init(&o);
	cr_expect_eq(o.threshold[AN_T_SFS_MIN_META], 100);
	cr_expect_eq(an_options_set_threshold(&o, "small_file_storm.min_metadata_ops=20", err, sizeof(err)), 0);
	cr_expect_eq(o.threshold[AN_T_SFS_MIN_META], 20);
	cr_expect_eq(an_options_set_threshold(&o, "nope=1", err, sizeof(err)), -1);
	cr_expect(strstr(err, "unknown threshold"));
	cr_expect_eq(an_options_set_threshold(&o, "memory_growth.min_r2=abc", err, sizeof(err)), -1);
	cr_expect_eq(an_options_set_threshold(&o, "memory_growth.min_r2", err, sizeof(err)), -1);
}

/* ------------------------------------------------ 4. several trainers (ranks) */

#define RPID 300 /* a second trainer, no header of its own in a memsrc: no rank */
#define RTID 301

/*
 * Beside the reference trainer (PID, header RANK=3, 20 iterations with step marks,
 * 4 launches each), a second trainer RPID with more launches: 20 iterations of
 * 10000 us from step marks (and a closing one), each 5 launches of 5 us at +0..+25
 * whose kernels run back to back on the GPU from +5 to +8005, a sync from +25 to
 * +8005: compute 8000 and other 2000 per iteration.
 */
static void two_trainers(struct sim *s)
{
	sim_init(s);
	s->m.hdr.rank = 3;
	s->m.hdr.local_rank = 3;
	s->m.hdr.world_size = 4;
	uint64_t t0 = s->t;
	for (int i = 0; i < 20; i++)
		sim_iteration(s, 2);
	uint32_t op = 1000000;
	for (int i = 0; i <= 20; i++) {
		uint64_t t = t0 + (uint64_t)i * 10000 * US;
		an_memsrc_add(&s->m, SP_K_STEP, SP_API_stepprof_step, RPID, RTID, t, t);
		if (i == 20)
			break;
		for (int k = 0; k < 5; k++) {
			struct sp_event *e = an_memsrc_add(&s->m, SP_K_LAUNCH, SP_API_cudaLaunchKernel, RPID, RTID,
							   t + k * 5 * US, t + (k + 1) * 5 * US);
			e->f[SP_F_NAME] = s->kname;
			e->f[SP_F_OP] = ++op;
			uint64_t gb = t + 5 * US + k * 1600 * US;
			e = an_memsrc_add(&s->m, SP_K_GPU_SPAN, 0, RPID, RTID, gb, gb + 1600 * US);
			e->f[SP_F_OP] = op;
		}
		an_memsrc_add(&s->m, SP_K_SYNC, SP_API_cudaStreamSynchronize, RPID, RTID, t + 25 * US, t + 8005 * US);
	}
}

static void expect_rank_entries(const struct an_analysis *a)
{
	cr_assert_eq(a->nranks, 2);
	/* by rank, processes without one last */
	const struct an_rank *r = &a->ranks[0], *q = &a->ranks[1];
	cr_expect_eq(r->pid, PID);
	cr_expect_eq(r->rank, 3);
	cr_expect_eq(r->local_rank, 3);
	cr_expect_eq(r->world_size, 4);
	cr_expect_eq(r->launches, 80);
	cr_expect_eq(r->nit, 20);
	cr_expect_eq(r->wall_median, 11100 * US);
	cr_expect_eq(r->bd_total[AN_INPUT], 20 * 4000 * US);
	cr_expect_eq(r->bd_total[AN_COMPUTE], 20 * 4000 * US);
	cr_expect_eq(r->bd_total[AN_H2D], 20 * 2000 * US);
	cr_expect_eq(q->pid, RPID);
	cr_expect_eq(q->rank, -1);
	cr_expect_eq(q->launches, 100);
	cr_expect_eq(q->source_kind, AN_SRC_API);
	cr_expect_eq(q->nit, 20);
	cr_expect_eq(q->wall_median, 10000 * US);
	cr_expect_eq(q->wall_total, 20 * 10000 * US);
	cr_expect_eq(q->bd_total[AN_COMPUTE], 20 * 8000 * US);
	cr_expect_eq(q->bd_total[AN_OTHER], 20 * 2000 * US, "other %llu", (unsigned long long)q->bd_total[AN_OTHER]);
	cr_expect_eq(q->bd_total[AN_SYNC], 0);
	cr_expect_eq(q->bd_total[AN_INPUT], 0);
}

Test(analyze, the_ranked_trainer_is_selected_and_every_trainer_has_a_rank_entry)
{
	struct sim s;
	two_trainers(&s);
	struct an_analysis a;
	run(&s, NULL, &a);
	/* the lowest rank wins over the most launches (RPID has none) */
	cr_expect_eq(a.trainer_pid, PID);
	cr_expect_eq(a.training_tid, TID);
	expect_reference(&a, 20);
	expect_rank_entries(&a);
	cr_expect(a.ranks[0].selected);
	cr_expect(!a.ranks[1].selected);
	an_analysis_free(&a);
	cr_expect_null(a.ranks);
	an_memsrc_free(&s.m);
}

Test(analyze, rank_option_selects_and_an_unknown_rank_is_refused)
{
	struct sim s;
	two_trainers(&s);
	struct an_options o;
	an_options_init(&o);
	o.rank_given = 1;
	o.rank = 3;
	struct an_analysis a;
	run(&s, &o, &a);
	cr_expect_eq(a.trainer_pid, PID);
	expect_rank_entries(&a);
	an_analysis_free(&a);

	/* the per-rank passes' forced pid: the other trainer's own analysis */
	an_options_init(&o);
	o.pid = RPID;
	run(&s, &o, &a);
	cr_expect_eq(a.trainer_pid, RPID);
	cr_expect_eq(a.training_tid, RTID);
	cr_expect_eq(a.nit, 20);
	cr_expect_eq(a.bd_total[AN_COMPUTE], 20 * 8000 * US);
	expect_rank_entries(&a);
	cr_expect(!a.ranks[0].selected);
	cr_expect(a.ranks[1].selected);
	an_analysis_free(&a);

	an_options_init(&o);
	o.rank_given = 1;
	o.rank = 5;
	cr_expect_str_eq(run_fails(&s, &o), "--rank 5: no process has this rank (ranks: 3)");
	an_memsrc_free(&s.m);
}

Test(analyze, a_single_trainer_has_one_rank_entry)
{
	struct sim s;
	sim_reference(&s, 20, 1);
	struct an_analysis a;
	run(&s, NULL, &a);
	cr_assert_eq(a.nranks, 1);
	cr_expect(a.ranks[0].selected);
	cr_expect_eq(a.ranks[0].pid, PID);
	cr_expect_eq(a.ranks[0].rank, -1);
	cr_expect_eq(a.ranks[0].nit, 20);
	cr_expect_eq(a.ranks[0].wall_total, 20 * 11100 * US);
	/* the reference iteration's partition (sim_iteration) */
	static const uint64_t want[AN_CAT__COUNT] = {4000, 2000, 4000, 100, 0, 1000};
	for (int c = 0; c < AN_CAT__COUNT; c++)
		cr_expect_eq(a.ranks[0].bd_total[c], 20 * want[c] * US, "%s", an_cat_name[c]);
	an_analysis_free(&a);
	an_memsrc_free(&s.m);
}

/*
 * A loader worker that decodes on the GPU (a spawned DataLoader worker may use
 * CUDA): forked by the trainer, it stats, opens and reads 50 files of 16 KiB
 * during each of the trainer's 12 input waits and launches `wlaunch` decode
 * kernels per batch; the trainer launches 4 kernels per iteration. Returns the
 * analysis of that run.
 */
static void gpu_worker_run(struct an_analysis *a, int wlaunch)
{
	struct sim s;
	sim_init(&s);
	sim_fork_worker(&s);
	uint32_t path = an_memsrc_string(&s.m, "/data/train/sample.jpg");
	uint32_t dec = an_memsrc_string(&s.m, "nvjpeg_decode");
	uint32_t wop = 1u << 20;
	for (int i = 0; i < 12; i++) {
		uint64_t t = s.t + 10 * US;
		for (int k = 0; k < 50; k++, t += 6 * US) {
			an_memsrc_add(&s.m, SP_K_STAT, SP_API_stat, WPID, WPID, t, t + US);
			worker_read_file(&s, path, 5, 16384, t + US, t + 2 * US, t + 4 * US, t + 5 * US);
		}
		for (int k = 0; k < wlaunch; k++, t += 2 * US) {
			struct sp_event *e =
			    an_memsrc_add(&s.m, SP_K_LAUNCH, SP_API_cudaLaunchKernel, WPID, WPID, t, t + US);
			e->f[SP_F_NAME] = dec;
			e->f[SP_F_OP] = ++wop;
		}
		sim_iteration(&s, 2);
	}
	run_free(&s, NULL, a);
}

static const struct an_proc *proc_of(const struct an_analysis *a, int32_t pid)
{
	for (size_t i = 0; i < a->nprocs; i++)
		if (a->procs[i].pid == pid)
			return &a->procs[i];
	return NULL;
}

/*
 * The worker's 100 metadata operations per iteration are in the trainer's
 * process tree whether or not the worker launches a kernel: it is the
 * trainer's worker, not a second rank, and the storm is reported. A child
 * that launches as much as the trainer (a rank started by it) stays a trainer.
 */
Test(analyze, a_loader_worker_that_launches_kernels_is_its_trainers_worker)
{
	static const int wlaunch[] = {0, 1};
	for (size_t c = 0; c < 2; c++) {
		struct an_analysis a;
		gpu_worker_run(&a, wlaunch[c]);
		cr_assert_eq(a.nit, 12);
		cr_expect_eq(a.trainer_pid, PID);
		const struct an_proc *w = proc_of(&a, WPID);
		cr_assert_not_null(w);
		cr_expect_eq(w->role, AN_ROLE_WORKER, "%d launches per batch: role %d", wlaunch[c], w->role);
		cr_expect_eq(w->trainer, PID);
		for (size_t i = 0; i < a.nit; i++) {
			cr_expect_eq(a.it[i].metadata_ops, 100,
				     "%d launches per batch, iteration %zu: %lu metadata ops", wlaunch[c], i,
				     (unsigned long)a.it[i].metadata_ops);
			cr_expect_eq(a.it[i].files_opened, 50);
			cr_expect_eq(a.it[i].bytes_read, 50 * 16384);
		}
		const struct an_result_finding *f = find(&a, AN_F_SMALL_FILE_STORM, NULL);
		cr_expect_not_null(f, "%d launches per batch: no small_file_storm", wlaunch[c]);
		cr_expect_eq(a.nranks, 1, "%d launches per batch: %zu ranks", wlaunch[c], a.nranks);
		an_analysis_free(&a);
	}
	struct an_analysis a;
	gpu_worker_run(&a, 4);
	cr_expect_eq(proc_of(&a, WPID)->role, AN_ROLE_TRAINER, "a child launching as much as its parent is a rank");
	cr_expect_eq(a.nranks, 2);
	an_analysis_free(&a);
}
