/*
 * analyze_int.h - what the files of one analysis share, inside the analyzer:
 * its state (struct state, filled by the driver's pass 1 in analyze.c), the
 * look-ups of its tables, the kinds of records, and the passes the driver runs
 * after pass 1: finding the iterations (analyze_iters.c) and giving each
 * iteration's wall time to its categories (analyze_attr.c).
 */
#ifndef STEPPROF_ANALYZE_INT_H
#define STEPPROF_ANALYZE_INT_H

#include <regex.h>
#include <stddef.h>
#include <stdint.h>

#include "analyze.h"
#include "hashmap.h"
#include "findings.h"

/* The calls of a kind a thread made: how many, and from the first one's begin to the last one's end. */
struct callspan {
	uint64_t n, b, e;
};

struct thr {
	int32_t pid, tid;
	uint64_t launches, records, last_sig_end;
	uint64_t marks, inputs; /* iteration marks (matching NVTX ranges, steps) and input calls */
	/*
	 * Which of the threads that launch runs the loop (thr_trains_more): its
	 * launches, its waits for batches from loader processes, the calls that
	 * feed a loop (input, H2D and D2H copies) and its blocking syncs.
	 */
	struct callspan launch, batch, feed, wait;
};

struct state {
	struct an_analysis *a;
	struct an_source *src;
	regex_t re;
	int re_ok;
	struct hashmap thr; /* (pid << 32 | tid) -> struct thr * */
	/* regex verdicts per (file, name id): 0 unknown, 1 no, 2 yes */
	uint8_t **verdict;
	uint32_t *nverdict;
	/* NVTX ranges and step marks of every process (per-iteration state) */
	struct mark {
		int32_t pid, tid;
		uint64_t b, e;
	} * ranges, *steps;
	size_t nranges, capranges, nsteps, capsteps;
	uint64_t *gpu_end; /* per proc index: last GPU span end */
	struct an_collect col;
};

/* analyze.c: the tables and the kinds of records */
uint64_t hash64(uint64_t x);
struct thr *thr_get(struct state *s, int32_t pid, int32_t tid);
struct an_proc *proc_find(struct an_analysis *a, int32_t pid);
int is_sig_kind(unsigned k);
int is_input_kind(unsigned k);
int is_blocking_sync(const struct sp_event *ev);

/*
 * analyze_iters.c: the trainer's iterations into a->it, from its NVTX ranges,
 * its step marks, or automatic detection (pass 1b); 0 with none found, -1 when
 * out of memory or the files could not be read again.
 */
int iterations_nvtx(struct state *s);
int iterations_steps(struct state *s);
int iterations_auto(struct state *s);

/* analyze_attr.c: pass 2, the iterations' breakdowns, counters and the findings' evidence. 0, or -1. */
int pass2(struct state *s);
/* The straggler analysis of the job (a->comm): 0, or -1 when out of memory or the files cannot be read again. */
int an_comm(struct an_source *src, struct an_analysis *a);
/* a->comm from a->comm_calls (a copy is matched): 0 or -1 when out of memory. */
int an_comm_match(struct an_analysis *a);
/* straggler_rank, from a->comm and a->ranks (findings.c): 0 or -1 when out of memory. */
int an_findings_straggler(struct an_analysis *a);

#endif
