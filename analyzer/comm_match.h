/*
 * comm_match.h - the collectives of a multi-GPU job matched across its ranks:
 * who arrived last at each, by how much, and the clock offsets between the
 * job's hosts (docs/definitions.md, "Stragglers").
 *
 * The caller gives one cm_call per collective call of every rank process (a
 * collective, or a group of grouped calls ended by ncclGroupEnd: one unit),
 * numbered per communicator in the order the process made them; the matcher
 * groups the calls of one communicator identity and sequence number, aligns the
 * hosts' clocks on the collectives' completions, then measures each one's
 * arrivals. Memory: the calls (sorted in place) and one lateness per
 * collective that a rank arrived last at.
 */
#ifndef STEPPROF_COMM_MATCH_H
#define STEPPROF_COMM_MATCH_H

#include <stddef.h>
#include <stdint.h>

struct cm_call {
	uint64_t ident;		/* the communicator's identity (comm_init value) */
	uint64_t seq;		/* the call's number among this process's calls on it, from 0 */
	uint32_t nranks;	/* ranks of the communicator */
	int32_t crank;		/* this process's rank in the communicator */
	int32_t rank;		/* the process's job rank (RANK): the straggler table's row */
	uint32_t host;		/* index of the host it ran on (0 .. nhosts-1) */
	int64_t to_real_ns;	/* its host's CLOCK_REALTIME minus CLOCK_MONOTONIC (its header's pair) */
	uint64_t call_ns;	/* the host call's begin */
	uint64_t gpu_begin_ns;	/* its kernels' GPU span; both 0 when unknown */
	uint64_t gpu_end_ns;
};

/* A rank's row of the straggler table. */
struct cm_rank {
	int32_t rank;
	uint64_t matched;	/* collectives it took part in that every rank of the communicator reached */
	uint64_t last;		/* of them, those it arrived last at (ties: none is last) */
	uint64_t late_sum_ns;	/* its lateness summed over those: the others' mean wait for it (its arrival minus theirs) */
	uint64_t late_mean_ns;	/* late_sum_ns / last */
	uint64_t late_p95_ns;	/* the 95th percentile of those latenesses */
	uint64_t caused_ns;	/* the others' waits for it: sum over those of (its arrival - each other's) */
};

/* One of the collectives with the largest skew (cm_match's worst_n): each rank's arrival. */
struct cm_arrival {
	int32_t rank;		/* the job rank */
	uint64_t call_ns;	/* its host call's begin */
	uint64_t gpu_begin_ns;	/* its kernels' GPU start, 0 when unknown */
};

struct cm_worst {
	uint64_t ident, seq;
	uint64_t skew_ns;	/* last arrival minus first */
	int32_t last_rank;	/* -1: a tie */
	int gpu;		/* arrivals are GPU starts (else host calls) */
	uint32_t nranks;
	struct cm_arrival *arr;	/* nranks of them, by rank in the communicator */
};

struct cm_result {
	uint64_t collectives;	/* matched: every rank of the communicator present */
	uint64_t incomplete;	/* some rank missing (a crash, a truncated or missing trace) */
	uint64_t gpu_timed;	/* of the matched, those whose arrivals are GPU starts (else host calls) */
	uint64_t skew_mean_ns;	/* last arrival minus first, over the matched */
	uint64_t skew_p95_ns;
	struct cm_rank *ranks;	/* by job rank, increasing */
	size_t nranks;
	/*
	 * Per host: the correction added to its times to read them on host 0's clock
	 * (from the collectives' completions), and the residual: the median absolute
	 * difference that remains between its completions and host 0's. offset 0 and
	 * residual -1 when the host shares no timed collective with host 0.
	 */
	int64_t *host_offset_ns;
	int64_t *host_residual_ns;
	size_t nhosts;
	/* the worst_n collectives of the largest skew, largest first */
	struct cm_worst *worst;
	size_t nworst;
};

/*
 * Match calls[0..n) (sorted in place; their times, CLOCK_MONOTONIC, read on
 * CLOCK_REALTIME through to_real_ns when nhosts > 1, then corrected by the host
 * offsets found) over nhosts hosts; the worst_n collectives of the largest
 * skew are kept with every rank's arrival. 0, or -1 when out of memory (*res
 * then holds nothing to free).
 */
int cm_match(struct cm_call *calls, size_t n, size_t nhosts, size_t worst_n, struct cm_result *res);
void cm_result_free(struct cm_result *res);

#endif /* STEPPROF_COMM_MATCH_H */
