/*
 * breakdown.h - the partition of one iteration's wall time into the seven categories
 * of docs/definitions.md, by set arithmetic on sorted disjoint spans (a sweep line).
 *
 * The caller collects, per iteration, the spans during which each condition holds
 * (a GPU span of a kernel, the training thread inside an H2D call, ...) in one
 * list per condition; bd_partition() clips them to [start, end), merges each list
 * and gives every instant to the first condition that holds, in priority order
 * compute > comm > h2d > d2h > input > sync, the rest to other (a sync that
 * waits for communication is comm where it would be sync). The seven results
 * sum to end - start exactly (integer arithmetic, no rounding).
 */
#ifndef STEPPROF_BREAKDOWN_H
#define STEPPROF_BREAKDOWN_H

#include <stddef.h>
#include <stdint.h>

#include "analyze.h"

struct bd_span {
	uint64_t b, e;
};

struct bd_list {
	struct bd_span *v;
	size_t n, cap;
};

/*
 * The conditions, in priority order (BD_COMM: a GPU span of a communication
 * kernel; BD_COMM_SYNC: the training thread blocked in a synchronisation whose
 * awaited work is a communication kernel, comm where it would be sync: also
 * inside BD_SYNC, so that the schema-1 partition, bd_partition_v1, counts it as
 * sync as before), then
 * the "GPU busy" list (any GPU span),
 * then the two lists whose intersection is input too (bd_lock_input): the
 * training thread blocked in a semaphore wait (LOCK_WAIT), and another thread
 * of its process waiting for a batch from the loader workers (LOADER_WAIT); last
 * the training thread's own file calls (BD_SELF_IO, a part of BD_INPUT: the
 * input split's input_io, whatever the loader workers do).
 */
enum bd_cond {
	BD_COMPUTE,
	BD_COMM,
	BD_H2D,
	BD_D2H,
	BD_INPUT,
	BD_COMM_SYNC,
	BD_SYNC,
	BD_GPU,
	BD_LOCK,
	BD_PEER_WAIT,
	BD_SELF_IO,
	BD__COUNT
};

/* Append [b, e); empty spans are ignored. 0, or -1 when out of memory. */
int bd_push(struct bd_list *l, uint64_t b, uint64_t e);
/* Clip to [lo, hi), sort by begin and merge overlapping or touching spans. */
void bd_normalise(struct bd_list *l, uint64_t lo, uint64_t hi);
/* Sum of the lengths of a normalised list. */
uint64_t bd_total(const struct bd_list *l);
void bd_list_free(struct bd_list *l);

/*
 * The training thread's lock waits while another thread of its process waits
 * for a batch (BD_LOCK ∩ BD_PEER_WAIT, within [start, end)) are added to
 * BD_INPUT; *added gets their length (host-blocked input). Both lists are
 * normalised in place. 0, or -1 when out of memory.
 */
int bd_lock_input(struct bd_list lists[BD__COUNT], uint64_t start, uint64_t end, uint64_t *added);

/*
 * Partition [start, end) (lists[] indexed by enum bd_cond; they are normalised in
 * place). out[] is indexed by enum an_cat; *gpu_busy gets the length of the union
 * of lists[BD_GPU] within [start, end) (NULL: not wanted). 0, or -1 when out of memory.
 */
int bd_partition(struct bd_list lists[BD__COUNT], uint64_t start, uint64_t end, uint64_t out[AN_CAT__COUNT],
		 uint64_t *gpu_busy);

/*
 * The partition of schema 1 (stepprof.analysis/1), after bd_partition has
 * normalised lists[]: communication kernels are compute, a synchronisation
 * waiting for one is sync (BD_COMM_SYNC is left out), out[AN_COMM] is 0;
 * compute > h2d > d2h > input > sync as before the comm category. 0, or -1
 * when out of memory.
 */
int bd_partition_v1(const struct bd_list lists[BD__COUNT], uint64_t start, uint64_t end, uint64_t out[AN_CAT__COUNT]);

/* The length of a ∩ b, both normalised (comm_overlapped_ns: BD_COMM ∩ BD_COMPUTE). */
uint64_t bd_overlap(const struct bd_list *a, const struct bd_list *b);

/*
 * The instants of condition c that the partition gives to c (no condition before
 * it holds) into *out (emptied first), after bd_partition has normalised lists[].
 * 0, or -1 when out of memory.
 */
int bd_exposed(const struct bd_list lists[BD__COUNT], int c, struct bd_list *out);

/* *a minus *b, both normalised, into *out (emptied first; normalised). 0, or -1 when out of memory. */
int bd_minus(const struct bd_list *a, const struct bd_list *b, struct bd_list *out);

#endif /* STEPPROF_BREAKDOWN_H */
