/*
 * test_comm_match.c - collectives matched across ranks (analyzer/comm_match.c):
 * generated jobs whose arrivals, stragglers and host clock offsets are known by
 * construction (the generator's own numbers, not the matcher's), checked
 * against the straggler table and the alignment the matcher finds.
 */
#include <criterion/criterion.h>
#include <stdlib.h>
#include <string.h>

#include "comm_match.h"

#define NR 4
#define NC 200

/* xorshift: reproducible jitter */
static uint64_t rng = 88172645463325252ull;
static uint64_t rnd(uint64_t n)
{
	rng ^= rng << 13;
	rng ^= rng >> 7;
	rng ^= rng << 17;
	return rng % n;
}

struct job {
	struct cm_call c[NR * NC];
	uint64_t late_truth[NC]; /* the others' mean wait for the last rank (its arrival minus theirs), when it is last */
	int last_truth[NC];	 /* the rank arriving last, -1 on a tie */
};

/*
 * NC all-reduces over NR ranks, one every 10 ms. Every rank arrives within
 * jitter_us of the collective's nominal time; in a fraction slow_pct of them
 * rank slow arrives slow_us later. All complete together (to within 2 us),
 * 300 us after the last arrival. Ranks >= NR/2 run on host 1, whose clock
 * reads offset_ns more than host 0's.
 */
static void make_job(struct job *j, int slow, int slow_pct, uint64_t slow_us, uint64_t jitter_us, int64_t offset_ns,
		     int timed)
{
	memset(j, 0, sizeof(*j));
	for (int s = 0; s < NC; s++) {
		uint64_t t0 = 1000000000ull + (uint64_t)s * 10000000ull, arr[NR], max = 0;
		for (int r = 0; r < NR; r++) {
			arr[r] = t0 + rnd(jitter_us * 1000 + 1);
			if (r == slow && (int)rnd(100) < slow_pct)
				arr[r] += slow_us * 1000;
			if (arr[r] > max)
				max = arr[r];
		}
		uint64_t second = 0;
		int who = -1, ties = 0;
		for (int r = 0; r < NR; r++) {
			if (arr[r] == max) {
				who = r;
				ties++;
			} else if (arr[r] > second) {
				second = arr[r];
			}
		}
		j->last_truth[s] = ties == 1 ? who : -1;
		uint64_t wait = 0;
		for (int r = 0; r < NR; r++)
			wait += max - arr[r];
		j->late_truth[s] = ties == 1 ? wait / (NR - 1) : 0;
		for (int r = 0; r < NR; r++) {
			struct cm_call *c = &j->c[s * NR + r];
			int host = r >= NR / 2;
			int64_t off = host ? offset_ns : 0;
			c->ident = 0xabcdefull;
			c->seq = (uint64_t)s;
			c->nranks = NR;
			c->crank = r;
			c->rank = r;
			c->host = (uint32_t)host;
			c->call_ns = (uint64_t)((int64_t)(arr[r] - 50000) + off); /* launched 50 us before */
			if (timed) {
				c->gpu_begin_ns = (uint64_t)((int64_t)arr[r] + off);
				c->gpu_end_ns = (uint64_t)((int64_t)(max + 300000 + rnd(2001)) + off);
			}
		}
	}
	/* the matcher must not depend on the order given */
	for (size_t k = NR * NC - 1; k > 0; k--) {
		size_t o = rnd(k + 1);
		struct cm_call t = j->c[k];
		j->c[k] = j->c[o];
		j->c[o] = t;
	}
}

static void truth_of(const struct job *j, int rank, uint64_t *last, uint64_t *late_sum)
{
	*last = *late_sum = 0;
	for (int s = 0; s < NC; s++)
		if (j->last_truth[s] == rank) {
			(*last)++;
			*late_sum += j->late_truth[s];
		}
}

Test(comm_match, a_slow_rank_is_last_by_its_delay)
{
	static struct job j;
	make_job(&j, 2, 95, 5000, 100, 0, 1);
	struct cm_result r;
	cr_assert_eq(cm_match(j.c, NR * NC, 1, 0, &r), 0); /* one host: no alignment, exact sums */
	cr_expect_eq(r.collectives, NC);
	cr_expect_eq(r.incomplete, 0);
	cr_expect_eq(r.gpu_timed, NC);
	cr_assert_eq(r.nranks, NR);
	for (int k = 0; k < NR; k++) {
		uint64_t last, late;
		truth_of(&j, k, &last, &late);
		cr_expect_eq(r.ranks[k].rank, k);
		cr_expect_eq(r.ranks[k].matched, NC);
		cr_expect_eq(r.ranks[k].last, last, "rank %d last %lu, truth %lu", k, (unsigned long)r.ranks[k].last,
			     (unsigned long)last);
		cr_expect_eq(r.ranks[k].late_sum_ns, late);
	}
	/* the slow rank: last in about 95%, late by about 5 ms less the others' jitter */
	cr_expect_geq(r.ranks[2].last, NC * 88 / 100);
	cr_expect(r.ranks[2].late_mean_ns > 4850000 && r.ranks[2].late_mean_ns <= 5100000, "mean %lu",
		  (unsigned long)r.ranks[2].late_mean_ns);
	cr_expect(r.ranks[2].late_p95_ns >= r.ranks[2].late_mean_ns && r.ranks[2].late_p95_ns <= 5100000);
	cr_expect_geq(r.ranks[2].caused_ns, 3 * r.ranks[2].late_sum_ns);
	cr_expect(r.skew_mean_ns > 4500000 && r.skew_mean_ns < 5100000);
	cm_result_free(&r);
}

Test(comm_match, no_rank_stands_out_without_a_straggler)
{
	static struct job j;
	make_job(&j, -1, 0, 0, 200, 0, 1);
	struct cm_result r;
	cr_assert_eq(cm_match(j.c, NR * NC, 1, 0, &r), 0);
	cr_assert_eq(r.nranks, NR);
	for (int k = 0; k < NR; k++) {
		cr_expect_lt(r.ranks[k].last, NC / 2, "rank %d last in %lu of %d", k, (unsigned long)r.ranks[k].last,
			     NC);
		cr_expect_leq(r.ranks[k].late_mean_ns, 200000);
	}
	cr_expect_leq(r.skew_mean_ns, 200000);
	cm_result_free(&r);
}

Test(comm_match, hosts_are_aligned_on_the_completions)
{
	static struct job a, b;
	const int64_t offset = 12345678; /* host 1's clock 12.3 ms ahead */
	rng = 7;
	make_job(&a, 3, 92, 5000, 100, 0, 1);
	rng = 7;
	make_job(&b, 3, 92, 5000, 100, offset, 1);
	struct cm_result ra, rb;
	cr_assert_eq(cm_match(a.c, NR * NC, 2, 0, &ra), 0);
	cr_assert_eq(cm_match(b.c, NR * NC, 2, 0, &rb), 0);
	cr_assert_eq(rb.nhosts, 2);
	cr_expect_eq(rb.host_offset_ns[0], 0);
	int64_t err = rb.host_offset_ns[1] + offset;
	cr_expect(err > -50000 && err < 50000, "offset found %ld, truth %ld", (long)rb.host_offset_ns[1],
		  (long)-offset);
	cr_expect(rb.host_residual_ns[1] >= 0 && rb.host_residual_ns[1] < 50000);
	/* the straggler table is the one without the offset */
	cr_assert_eq(ra.nranks, rb.nranks);
	for (size_t k = 0; k < ra.nranks; k++) {
		cr_expect_eq(ra.ranks[k].last, rb.ranks[k].last, "rank %zu", k);
		uint64_t d = ra.ranks[k].late_mean_ns > rb.ranks[k].late_mean_ns
				     ? ra.ranks[k].late_mean_ns - rb.ranks[k].late_mean_ns
				     : rb.ranks[k].late_mean_ns - ra.ranks[k].late_mean_ns;
		cr_expect_leq(d, 50000, "rank %zu: %lu vs %lu", k, (unsigned long)ra.ranks[k].late_mean_ns,
			      (unsigned long)rb.ranks[k].late_mean_ns);
	}
	cr_expect_geq(rb.ranks[3].last, NC * 85 / 100);
	cm_result_free(&ra);
	cm_result_free(&rb);
}

Test(comm_match, untimed_collectives_use_the_host_calls)
{
	static struct job j;
	make_job(&j, 1, 100, 3000, 50, 0, 0);
	struct cm_result r;
	cr_assert_eq(cm_match(j.c, NR * NC, 1, 0, &r), 0);
	cr_expect_eq(r.gpu_timed, 0);
	cr_expect_eq(r.ranks[1].last, NC);
	cr_expect(r.ranks[1].late_mean_ns > 2950000 && r.ranks[1].late_mean_ns <= 3050000);
	/* no completions: nothing to align a second host on */
	cm_result_free(&r);
	cr_assert_eq(cm_match(j.c, NR * NC, 2, 0, &r), 0);
	cr_expect_eq(r.host_residual_ns[1], -1);
	cr_expect_eq(r.host_offset_ns[1], 0);
	cm_result_free(&r);
}

Test(comm_match, a_missing_rank_leaves_the_collective_incomplete)
{
	static struct job j;
	make_job(&j, 0, 100, 1000, 10, 0, 1);
	/* rank 3's trace lost its last 10 collectives; a duplicate rank in one more */
	size_t n = 0;
	for (size_t k = 0; k < NR * NC; k++) {
		if (j.c[k].crank == 3 && j.c[k].seq >= NC - 10)
			continue;
		if (j.c[k].crank == 3 && j.c[k].seq == 0)
			j.c[k].crank = 2;
		j.c[n++] = j.c[k];
	}
	struct cm_result r;
	cr_assert_eq(cm_match(j.c, n, 1, 0, &r), 0);
	cr_expect_eq(r.collectives, NC - 11);
	cr_expect_eq(r.incomplete, 11);
	cr_expect_eq(r.ranks[0].last, NC - 11);
	cm_result_free(&r);
}

Test(comm_match, ties_make_no_straggler_and_nothing_breaks_on_empty_input)
{
	struct cm_call c[3] = {
		{.ident = 1, .seq = 0, .nranks = 3, .crank = 0, .rank = 0, .call_ns = 100},
		{.ident = 1, .seq = 0, .nranks = 3, .crank = 1, .rank = 1, .call_ns = 200},
		{.ident = 1, .seq = 0, .nranks = 3, .crank = 2, .rank = 2, .call_ns = 200},
	};
	struct cm_result r;
	cr_assert_eq(cm_match(c, 3, 1, 0, &r), 0);
	cr_expect_eq(r.collectives, 1);
	for (size_t k = 0; k < r.nranks; k++)
		cr_expect_eq(r.ranks[k].last, 0);
	cr_expect_eq(r.skew_mean_ns, 100);
	cm_result_free(&r);
	cr_assert_eq(cm_match(NULL, 0, 0, 0, &r), 0);
	cr_expect_eq(r.collectives, 0);
	cr_expect_eq(r.nranks, 0);
	cm_result_free(&r);
}

Test(comm_match, the_worst_collectives_keep_every_arrival)
{
	static struct job j;
	make_job(&j, 1, 30, 4000, 100, 0, 1);
	struct cm_result r;
	cr_assert_eq(cm_match(j.c, NR * NC, 1, 5, &r), 0);
	cr_assert_eq(r.nworst, 5);
	/* the truth's five largest skews, from the generator's own numbers: every slow one is larger than any other */
	for (size_t w = 0; w < r.nworst; w++) {
		const struct cm_worst *x = &r.worst[w];
		cr_expect_eq(x->nranks, NR);
		cr_expect(x->gpu);
		cr_expect_eq(x->last_rank, 1, "worst %zu: last rank %d", w, x->last_rank);
		cr_expect_geq(x->skew_ns, 4000000);
		if (w)
			cr_expect_leq(x->skew_ns, r.worst[w - 1].skew_ns);
		uint64_t lo = UINT64_MAX, hi = 0;
		for (uint32_t k = 0; k < x->nranks; k++) {
			cr_expect_eq(x->arr[k].rank, (int32_t)k);
			lo = x->arr[k].gpu_begin_ns < lo ? x->arr[k].gpu_begin_ns : lo;
			hi = x->arr[k].gpu_begin_ns > hi ? x->arr[k].gpu_begin_ns : hi;
			cr_expect_eq(x->arr[k].call_ns + 50000, x->arr[k].gpu_begin_ns); /* launched 50 us before */
		}
		cr_expect_eq(hi - lo, x->skew_ns);
		cr_expect_eq(j.last_truth[x->seq], 1);
	}
	cm_result_free(&r);
}
