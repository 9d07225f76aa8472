/*
 * iter.h - iteration boundaries: from NVTX ranges, from stepprof_step() marks, or
 * detected automatically from the period of the training thread's call sequence.
 *
 * The automatic detection works on a bounded prefix of signatures (a 32-bit hash
 * of API kind + direction + byte size + kernel id per CUDA call of the training
 * thread): it finds the period P (signatures per iteration) and an anchor, a
 * signature that occurs once per period (preferably the iteration's first H2D
 * copy, right after the wait for the batch); the caller then cuts the whole run
 * at every anchor occurrence, in a streaming pass.
 */
#ifndef STEPPROF_ITER_H
#define STEPPROF_ITER_H

#include <stddef.h>
#include <stdint.h>

/* Signature flags, one byte per signature of the prefix. */
#define ITER_SIG_H2D	     0x1u /* an H2D copy */
#define ITER_SIG_SYNC	     0x2u /* a synchronisation */
#define ITER_SIG_AFTER_INPUT 0x4u /* the training thread waited for input just before it */

#define ITER_PREFIX_MAX 16384u /* signatures kept for the period search */

/*
 * The period P >= 1 that best explains the sequence: the fraction of positions i
 * (after a warm-up eighth) with sig[i] == sig[i + P] is at least min_match and the
 * highest, the smallest P winning unless a longer one does better by a margin
 * (so a sub-pattern inside an iteration, e.g. 39 kernel/item/sync triples, does not
 * beat the iteration's exact repetition). At least two periods must fit. 0 when none.
 */
uint32_t iter_find_period(const uint32_t *sig, size_t n, double min_match);

/*
 * Where the prefix's last clean period begins: the latest window of `period`
 * signatures that repeats the period before it, or the one that repeats most of
 * it (the latest of those). The prefix's last period need not be clean: a run
 * shorter than the prefix ends with a final checkpoint's copies, an evaluation
 * or a log line, which occur once. n - period when n < 2 period.
 */
size_t iter_period_base(const uint32_t *sig, size_t n, uint32_t period);

/*
 * Choose the anchor among the last clean period of the prefix: a signature that
 * occurs once per period, preferring one after an input wait, then an H2D copy,
 * then one that follows a sync. *every is 1 then; when every signature repeats
 * within the period, the least frequent one is used and *every is its count
 * (an iteration starts at every *every-th occurrence). Returns 0, -1 when n < 2P.
 */
int iter_choose_anchor(const uint32_t *sig, const uint8_t *flags, size_t n, uint32_t period, uint32_t *anchor,
		       uint32_t *every);

/* A closed range [b, e). */
struct iter_range {
	uint64_t b, e;
};

/*
 * Sort ranges by begin and keep only outermost ones (a range inside another kept
 * range is dropped: a nested "step_forward" inside "train_step"). Returns the new count.
 */
size_t iter_outermost(struct iter_range *r, size_t n);

/* djb2-like mixing of 64-bit words into a signature. */
static inline uint32_t iter_sig_mix(uint64_t h, uint64_t v)
{
	h ^= v + 0x9e3779b97f4a7c15ull + (h << 6) + (h >> 2);
	return (uint32_t)(h ^ (h >> 32));
}

#endif /* STEPPROF_ITER_H */
