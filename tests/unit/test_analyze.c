/*
 * test_analyze.c - the analysis (analyzer/analyze.c, analyze_iters.c,
 * analyze_attr.c, iter.c) on records built in memory by the workload simulator
 * (worksim.h), the way the hooks would have written them for a workload whose
 * timeline the test chooses.
 *
 * Divided into:
 *   1. checks of the simulator's runs: the iterations' source, a run that must
 *      fail, the reference iterations;
 *   2. iterations and breakdown: NVTX, step marks, automatic (with ±20% jitter),
 *      hand-computed breakdowns;
 *   3. several trainers (ranks): the default and --rank selection, ranks[].
 *
 * Ground truth is the timeline the simulator was told to produce (durations in
 * microseconds below), never a number the analyzer computed.
 */
#include <criterion/criterion.h>
#include <stdlib.h>
#include <string.h>

#include "analyze.h"
#include "worksim.h"

/* ------------------------------------------ 1. checks of simulated runs */

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
	/* input, h2d, compute, comm, d2h, sync, other */
	static const uint64_t bd[2][AN_CAT__COUNT] = {{2000, 0, 7995, 0, 0, 0, 5}, {0, 500, 5005, 0, 0, 0, 4495}};
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
 * iteration begins where its wait begins (docs/definitions.md: at the wait before its
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
 * Communication (times in us; two NVTX iterations of 10 ms). Iteration 0: a
 * kernel on stream 0, GPU [5, 3005); an all-reduce call [3100, 3200) that
 * launches [3150, 3160) a kernel of no NCCL name on stream 0 (communication by
 * the call: its record comes first here, by begin time), GPU [3160, 6160); a
 * compute kernel on stream 1 under it, GPU [4160, 5160); a stream sync of
 * stream 0 [3300, 6200), whose last op is the all-reduce's: its tail
 * [6160, 6200) is comm. Iteration 1: a send call [10000, 10100) launching an
 * NCCL kernel [10010, 10020) never timed (no GPU span), then a device sync
 * [10100, 12100) waiting for it: comm; an event sync [13000, 13500): sync (no
 * stream named); a kernel on stream 0, GPU [14005, 15005), and a stream sync
 * [14010, 15005): compute.
 */
Test(analyze, communication_kernels_and_the_syncs_that_wait_for_them)
{
	struct sim s;
	sim_init(&s);
	uint64_t T = s.t;
	uint32_t name = an_memsrc_string(&s.m, "train_step"), gemm = an_memsrc_string(&s.m, "gemm"),
		 ring = an_memsrc_string(&s.m, "allreduce_ring"),
		 nccl = an_memsrc_string(&s.m, "ncclDevKernel_SendRecv");
	for (int i = 0; i < 2; i++) {
		struct sp_event *r =
		    call_us(&s, T, SP_K_RANGE, SP_API_nvtx, 10000 * (uint64_t)i, 10000 * (uint64_t)i + 10000);
		r->f[SP_F_NAME] = name;
	}
	struct sp_event *x = call_us(&s, T, SP_K_LAUNCH, SP_API_cudaLaunchKernel, 0, 5);
	x->f[SP_F_OP] = 1;
	x->f[SP_F_NAME] = gemm;
	span_us(&s, T, 1, 5, 3005);
	x = call_us(&s, T, SP_K_COMM, SP_API_ncclAllReduce, 3100, 3200);
	x->f[SP_F_BYTES] = 64 << 20;
	x = call_us(&s, T, SP_K_LAUNCH, SP_API_cuLaunchKernel, 3150, 3160);
	x->f[SP_F_OP] = 2;
	x->f[SP_F_NAME] = ring;
	span_us(&s, T, 2, 3160, 6160);
	x = call_us(&s, T, SP_K_LAUNCH, SP_API_cudaLaunchKernel, 3200, 3205);
	x->f[SP_F_OP] = 3;
	x->f[SP_F_NAME] = gemm;
	x->f[SP_F_STREAM] = 1;
	span_us(&s, T, 3, 4160, 5160);
	call_us(&s, T, SP_K_SYNC, SP_API_cudaStreamSynchronize, 3300, 6200);
	call_us(&s, T, SP_K_COMM, SP_API_ncclSend, 10000, 10100);
	x = call_us(&s, T, SP_K_LAUNCH, SP_API_cuLaunchKernel, 10010, 10020);
	x->f[SP_F_OP] = 4;
	x->f[SP_F_NAME] = nccl;
	call_us(&s, T, SP_K_SYNC, SP_API_cudaDeviceSynchronize, 10100, 12100);
	call_us(&s, T, SP_K_SYNC, SP_API_cudaEventSynchronize, 13000, 13500);
	x = call_us(&s, T, SP_K_LAUNCH, SP_API_cudaLaunchKernel, 14000, 14005);
	x->f[SP_F_OP] = 5;
	x->f[SP_F_NAME] = gemm;
	span_us(&s, T, 5, 14005, 15005);
	call_us(&s, T, SP_K_SYNC, SP_API_cudaStreamSynchronize, 14010, 15005);
	struct an_analysis a;
	run_free(&s, NULL, &a);
	cr_assert_eq(a.nit, 2);
	/* input, h2d, compute, comm, d2h, sync, other; schema 1: comm in compute, the wait in sync */
	static const uint64_t bd[2][AN_CAT__COUNT] = {{0, 0, 4000, 2040, 0, 0, 3960}, {0, 0, 1000, 2000, 0, 500, 6500}};
	static const uint64_t bd1[2][AN_CAT__COUNT] = {{0, 0, 6000, 0, 0, 40, 3960}, {0, 0, 1000, 0, 0, 2500, 6500}};
	static const uint64_t overlapped[2] = {1000, 0};
	for (int i = 0; i < 2; i++) {
		for (int c = 0; c < AN_CAT__COUNT; c++) {
			cr_expect_eq(a.it[i].bd[c], bd[i][c] * US, "iteration %d %s: %lu ns", i, an_cat_name[c],
				     (unsigned long)a.it[i].bd[c]);
			cr_expect_eq(a.it[i].bd1[c], bd1[i][c] * US, "schema 1, iteration %d %s: %lu ns", i,
				     an_cat_name[c], (unsigned long)a.it[i].bd1[c]);
		}
		cr_expect_eq(a.it[i].comm_overlapped_ns, overlapped[i] * US, "iteration %d overlapped %lu ns", i,
			     (unsigned long)a.it[i].comm_overlapped_ns);
	}
	cr_expect_eq(a.bd_total[AN_COMM], 4040 * US);
	cr_expect_eq(a.bd1_total[AN_COMPUTE], 7000 * US);
	cr_expect_eq(a.comm_overlapped_ns, 1000 * US);
	cr_assert_eq(a.nranks, 1);
	cr_expect_eq(a.ranks[0].bd_total[AN_COMM], 4040 * US);
	cr_expect_eq(a.ranks[0].bd1_total[AN_SYNC], 2540 * US);
	cr_expect_eq(a.ranks[0].comm_overlapped_ns, 1000 * US);
	an_analysis_free(&a);
}

/* ------------------------------------------------ 3. several trainers (ranks) */

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
	static const uint64_t want[AN_CAT__COUNT] = {4000, 2000, 4000, 0, 100, 0, 1000};
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
