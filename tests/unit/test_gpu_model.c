/*
 * test_gpu_model.c - the modelled GPU time of untimed launches (analyzer/gpu_model.c):
 * each kernel's duration learned from its timed samples (median of the nearest),
 * placed on its stream after its launch call's submission, fitted to the anchor
 * that follows; a chained span on an idle stream begins at its end less the
 * kernel's duration; a sample's begin event is never taken before the call
 * submitted the kernel.
 */
#include <criterion/criterion.h>
#include <stdlib.h>

#include "gpu_model.h"

#define US 1000ull

struct spans {
	uint64_t b[4096], e[4096];
	size_t n;
};

static void collect(void *arg, const struct gm_modelled *m)
{
	struct spans *s = arg;
	if (s->n < 4096) {
		s->b[s->n] = m->b;
		s->e[s->n] = m->e;
		s->n++;
	}
}

static uint32_t op;

/* A launch of kernel name on stream 1 at t (a 4 us call); returns its op. */
static uint32_t launch(struct gmodel *m, uint32_t name, uint64_t t)
{
	cr_assert_eq(gm_op(m, 0, 1, ++op, 1, name, t, t + 4 * US), 0);
	return op;
}

/* A timed sample: launched at t on an idle stream, its kernel running d from the call's end. */
static void sample(struct gmodel *m, uint32_t name, uint64_t t, uint64_t d)
{
	uint32_t o = launch(m, name, t);
	uint64_t gb = gm_span(m, o, t + 4 * US, t + 4 * US + d);
	cr_assert_eq(gb, t + 4 * US);
}

Test(gpu_model, untimed_launches_take_the_median_duration_of_their_kernels_samples)
{
	struct gmodel *m = gm_new();
	struct spans s = {0};
	uint64_t t = 1000 * US;
	for (int i = 0; i < 7; i++, t += 100 * US)
		sample(m, 7, t, 10 * US);
	sample(m, 7, t, 300 * US); /* a preempted launch call: far off, and outvoted */
	t += 400 * US;
	for (int i = 0; i < 20; i++, t += 100 * US)
		launch(m, 7, t);
	gm_resolve(m, UINT64_MAX, collect, &s);
	cr_assert_eq(s.n, 20);
	for (size_t i = 0; i < s.n; i++) {
		cr_expect_eq(s.e[i] - s.b[i], 10 * US, "span %zu: %llu ns", i, (unsigned long long)(s.e[i] - s.b[i]));
		cr_expect_geq(s.b[i], s.b[0] + i * 100 * US, "after its own launch");
	}
	const struct gm_stats *st = gm_stats(m);
	cr_expect_eq(st->modelled, 20);
	cr_expect_eq(st->measured, 8);
	cr_expect_eq(st->modelled_ns, 200 * US);
	gm_free(m);
}

Test(gpu_model, a_kernel_never_sampled_is_not_modelled)
{
	struct gmodel *m = gm_new();
	struct spans s = {0};
	sample(m, 1, 1000 * US, 10 * US);
	launch(m, 2, 2000 * US);
	launch(m, 1, 3000 * US);
	gm_resolve(m, UINT64_MAX, collect, &s);
	cr_expect_eq(s.n, 1);
	cr_expect_eq(gm_stats(m)->unknown, 1);
	gm_free(m);
}

/* A begin event recorded before the call, on an idle stream: the kernel began at the call's midpoint at the earliest. */
Test(gpu_model, a_sample_never_begins_before_its_call_submitted_the_kernel)
{
	struct gmodel *m = gm_new();
	uint32_t o = launch(m, 3, 1000 * US); /* call [1000, 1004) us */
	uint64_t gb = gm_span(m, o, 1000 * US + 100, 1016 * US);
	cr_expect_eq(gb, 1002 * US, "begin %llu", (unsigned long long)gb);
	/* on a busy stream the begin event waited for the ops before it: the kernel began there */
	o = launch(m, 3, 2000 * US);
	gb = gm_span(m, o, 2010 * US, 2024 * US);
	cr_expect_eq(gb, 2010 * US);
	gm_free(m);
}

/*
 * A launch chained behind an op that had ended (STEPPROF_KERNEL_TIMING=all on
 * an idle stream) has the call's begin as its span's begin: it begins at its
 * measured end less its kernel's sampled duration, not at the call.
 */
Test(gpu_model, a_chained_span_on_an_idle_stream_begins_at_its_end_less_the_kernels_duration)
{
	struct gmodel *m = gm_new();
	for (int i = 0; i < 3; i++)
		sample(m, 5, (1000 + 100 * (uint64_t)i) * US, 12 * US);
	uint32_t o = launch(m, 5, 2000 * US);
	uint64_t gb = gm_span(m, o, 2000 * US, 2020 * US); /* begin = the call's begin: chained */
	cr_expect_eq(gb, 2008 * US, "begin %llu", (unsigned long long)gb);
	/* no sample yet: the call's midpoint */
	o = launch(m, 6, 3000 * US);
	gb = gm_span(m, o, 3000 * US, 3020 * US);
	cr_expect_eq(gb, 3002 * US);
	gm_free(m);
}

/*
 * A deep queue: ten kernels launched at once, modelled at 10 us each, and a
 * stream sync that blocked until 150 us after the first began: the stream was
 * busy all along, so the back-to-back run is stretched to end there, the
 * model's error (12 us each, not 10) spread over the run, nothing left over.
 */
/* A sample of kernel 9 (10 us), then ten launches of it from t, 5 us apart: calls [t + 5i, t + 5i + 4). */
static struct gmodel *deep_queue(uint64_t t)
{
	struct gmodel *m = gm_new();
	sample(m, 9, 1000 * US, 10 * US);
	for (int i = 0; i < 10; i++)
		launch(m, 9, t + (uint64_t)i * 5 * US);
	return m;
}

Test(gpu_model, a_run_is_fitted_to_a_sync_that_blocked)
{
	struct spans s = {0};
	uint64_t t = 2000 * US;
	struct gmodel *m = deep_queue(t);
	uint64_t first = t + 2 * US; /* the first call's midpoint */
	cr_assert_eq(gm_sync(m, 0, 1, GM_SYNC_STREAM, t + 50 * US, first + 120 * US), 0);
	gm_resolve(m, UINT64_MAX, collect, &s);
	cr_assert_eq(s.n, 10);
	cr_expect_eq(s.b[0], first);
	cr_expect_eq(s.e[9], first + 120 * US, "the run ends where the sync returned");
	for (size_t i = 1; i < s.n; i++)
		cr_expect_eq(s.b[i], s.e[i - 1], "back to back at %zu", i);
	gm_free(m);
}

/*
 * A run that cannot fit between the stream's earlier work and the next op's
 * measured begin: it shares that interval in proportion to the model, never
 * overlapping the measured op before it (a stream runs one op at a time).
 */
Test(gpu_model, a_run_squeezed_between_two_measured_ops_shares_the_gap)
{
	struct gmodel *m = gm_new();
	struct spans s = {0};
	sample(m, 9, 1000 * US, 10 * US);
	uint64_t t = 2000 * US;
	uint32_t o = launch(m, 9, t); /* measured: runs [t + 4, t + 40) */
	gm_span(m, o, t + 4 * US, t + 40 * US);
	launch(m, 9, t + 5 * US);
	launch(m, 9, t + 10 * US);
	o = launch(m, 9, t + 15 * US); /* measured, its begin event waited: began at t + 50 */
	gm_span(m, o, t + 50 * US, t + 60 * US);
	gm_resolve(m, UINT64_MAX, collect, &s);
	cr_assert_eq(s.n, 2);
	cr_expect_eq(s.b[0], t + 40 * US, "begins where the measured op before it ended");
	cr_expect_eq(s.e[0], t + 45 * US);
	cr_expect_eq(s.b[1], t + 45 * US);
	cr_expect_eq(s.e[1], t + 50 * US, "ends where the next began");
	gm_free(m);
}

/* The same run followed by the next op's measured begin earlier than the model's end: nothing ends after it. */
Test(gpu_model, a_run_never_ends_after_the_next_measured_op_begins)
{
	struct spans s = {0};
	uint64_t t = 2000 * US;
	struct gmodel *m = deep_queue(t);
	uint32_t o = launch(m, 9, t + 50 * US);
	uint64_t A = t + 80 * US; /* the model says the ten end at t + 102 us */
	gm_span(m, o, A, A + 10 * US);
	gm_resolve(m, UINT64_MAX, collect, &s);
	cr_assert_eq(s.n, 10);
	for (size_t i = 0; i < s.n; i++) {
		cr_expect_leq(s.e[i], A, "span %zu ends at %+lld us from the next op's begin", i,
			      (long long)(s.e[i] - A) / 1000);
		cr_expect_leq(s.b[i], s.e[i]);
		if (i)
			cr_expect_geq(s.b[i], s.e[i - 1]);
	}
	cr_expect_eq(s.e[9], A);
	gm_free(m);
}

/* A kernel whose duration doubles at some launch: the launches well before and well after it take their side's. */
Test(gpu_model, a_duration_change_is_followed_within_half_a_window_of_samples)
{
	struct gmodel *m = gm_new();
	struct spans s = {0};
	uint64_t t = 1000 * US;
	for (int i = 0; i < 60; i++, t += 100 * US) {
		if (i % 3 == 0)
			sample(m, 4, t, i < 30 ? 10 * US : 20 * US);
		else
			launch(m, 4, t);
	}
	gm_resolve(m, UINT64_MAX, collect, &s);
	cr_assert_eq(s.n, 40);
	/* untimed launches 1, 2, 4, 5, ...: the 7th (i = 10) and the 34th (i = 50) */
	cr_expect_eq(s.e[6] - s.b[6], 10 * US);
	cr_expect_eq(s.e[33] - s.b[33], 20 * US);
	gm_free(m);
}
