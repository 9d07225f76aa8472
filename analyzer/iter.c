/*
 * iter.c - iteration detection helpers (see iter.h): the period search over a
 * signature prefix, the choice of the anchor, and NVTX range nesting.
 *
 * RATIONALE: signatures carry no durations, so jitter on durations does not move
 * them; what varies between iterations is the number of polls or reads of the
 * input wait, which is why input records are not signatures but a flag on the
 * signature that follows them.
 */
#include "iter.h"

#include <stdlib.h>
#include <string.h>

/* Compare at most this many positions per candidate period: bounded cost. */
#define ITER_SAMPLES 4096u
/* A longer period must explain this much more of the sequence to be preferred. */
#define ITER_MARGIN 0.01

uint32_t iter_find_period(const uint32_t *sig, size_t n, double min_match)
{
	if (n < 2)
		return 0;
	/* Skip a warm-up: the first iteration often allocates or copies weights. */
	size_t skip = n / 8;
	uint32_t best = 0;
	double best_score = 0;
	for (uint32_t p = 1; (size_t)p * 2 <= n - skip; p++) {
		size_t lo = skip, hi = n - p; /* compare sig[i] with sig[i + p], i in [lo, hi) */
		if (hi <= lo)
			break;
		size_t span = hi - lo;
		size_t step = span > ITER_SAMPLES ? span / ITER_SAMPLES : 1;
		size_t total = (span + step - 1) / step;
		/* a period must beat the best so far by a margin: give up once it cannot */
		double need = best ? best_score + ITER_MARGIN : min_match;
		size_t max_miss = need >= 1.0 ? 0 : (size_t)((1.0 - need) * (double)total);
		size_t cmp = 0, miss = 0;
		for (size_t i = lo; i < hi; i += step) {
			cmp++;
			if (sig[i] != sig[i + p] && ++miss > max_miss)
				break;
		}
		if (miss > max_miss || !cmp)
			continue;
		double score = (double)(cmp - miss) / (double)cmp;
		if (score >= need) {
			best = p;
			best_score = score;
			if (miss == 0)
				break; /* an exact repetition: a multiple of it cannot do better */
		}
	}
	return best;
}

size_t iter_period_base(const uint32_t *sig, size_t n, uint32_t period)
{
	size_t P = period;
	if (!P || n < 2 * P)
		return n >= P ? n - P : 0;
	/* m: positions of the window [b, b + P) equal to the one a period before, slid from the end */
	size_t best = n - P, m = 0, best_m;
	for (size_t i = n - P; i < n; i++)
		m += sig[i] == sig[i - P];
	best_m = m;
	for (size_t b = n - P; b > P && best_m < P;) {
		b--;
		m = m + (sig[b] == sig[b - P]) - (sig[b + P] == sig[b]);
		if (m > best_m) {
			best_m = m;
			best = b;
		}
	}
	return best;
}

int iter_choose_anchor(const uint32_t *sig, const uint8_t *flags, size_t n, uint32_t period, uint32_t *anchor,
		       uint32_t *every)
{
	if (period == 0 || n < 2 * (size_t)period)
		return -1;
	size_t base = iter_period_base(sig, n, period); /* the last clean period */
	int best = -1, best_score = -1;
	uint32_t min_count = UINT32_MAX;
	int min_at = 0;
	for (uint32_t i = 0; i < period; i++) {
		uint32_t s = sig[base + i], count = 0;
		unsigned inputs = 0;
		for (uint32_t j = 0; j < period; j++)
			if (sig[base + j] == s)
				count++;
		if (count < min_count) {
			min_count = count;
			min_at = (int)i;
		}
		if (count != 1)
			continue;
		/* how often this signature followed an input wait across the prefix */
		unsigned seen = 0;
		for (size_t k = 0; k < n; k++)
			if (sig[k] == s) {
				seen++;
				if (flags[k] & ITER_SIG_AFTER_INPUT)
					inputs++;
			}
		uint8_t prev = flags[base + (i + period - 1) % period];
		int score = 0;
		if (seen && inputs * 2 >= seen)
			score += 4;
		if (flags[base + i] & ITER_SIG_H2D)
			score += 2;
		if (prev & ITER_SIG_SYNC)
			score += 1;
		if (score > best_score) {
			best_score = score;
			best = (int)i;
		}
	}
	if (best >= 0) {
		*anchor = sig[base + best];
		*every = 1;
	} else {
		*anchor = sig[base + min_at];
		*every = min_count;
	}
	return 0;
}

static int range_cmp(const void *a, const void *b)
{
	const struct iter_range *x = a, *y = b;
	if (x->b != y->b)
		return x->b < y->b ? -1 : 1;
	/* same begin: the longer first, so that it is the one kept */
	return x->e > y->e ? -1 : x->e < y->e;
}

size_t iter_outermost(struct iter_range *r, size_t n)
{
	qsort(r, n, sizeof(*r), range_cmp);
	size_t k = 0;
	for (size_t i = 0; i < n; i++) {
		if (k && r[i].e <= r[k - 1].e)
			continue; /* inside the last kept range */
		r[k++] = r[i];
	}
	return k;
}
