/*
 * cuda_timing.h - what the two halves of the GPU timing share (its interface
 * for the wrappers is cuda_gpu.h, section 2): cuda_timing.c records the events
 * (per-thread states, event pool, private streams, an op's begin and end
 * events); cuda_spans.c reads the finished ops back as GPU_SPAN records
 * (anchors, reclaim, sync points, exit).
 */
#ifndef STEPPROF_CUDA_TIMING_H
#define STEPPROF_CUDA_TIMING_H

#include <stdint.h>

#include "cuda_gpu.h"

/*
 * A training step may launch a few thousand kernels between two syncs. A
 * thread holds PEND_MAX ops pending; when they are all pending, the finished
 * ones are read back before the next op (reclaim), else that op is not timed
 * (STEPPROF_KERNEL_TIMING=N thins launches out). 2 events per op, plus anchors.
 */
#define POOL_MAX 4160
#define POOL_BATCH 64
#define PEND_MAX 2048
/* A reclaim stops after this many unfinished ops, and is not tried again for as many ops. */
#define RECLAIM_SPAN 64
#define ANCHOR_REFRESH_NS 1000000000ull

/* pend.flags */
#define PF_PRIV 1   /* e was recorded on the context's private stream (sp_gpu_end_slow) */
#define PF_CHAIN 2  /* a chained launch: no begin event, its GPU begin is lo_ns at least */
#define PF_LINKED 4 /* the entry before it is its chain's predecessor, not read back yet */

struct pend {
	uint32_t op;
	uint16_t api;
	uint8_t dev;
	uint8_t flags;
	CUevent b, e; /* b: NULL for a chained launch */
	uint64_t lo_ns; /* PF_CHAIN: the launch's host begin, then its predecessor's GPU end if later */
};

/* The token of the last op queued on each stream, hashed (cuda_timing.c, "Launch chains"). */
#define STREAM_TOK_SLOTS 256u
SP_HIDDEN extern uint64_t stream_tok[STREAM_TOK_SLOTS];

static inline unsigned stream_slot(CUstream st)
{
	return (unsigned)((((uintptr_t)st >> 3) * 0x9E3779B97F4A7C15ull) >> 56) & (STREAM_TOK_SLOTS - 1);
}

static inline void stream_break(CUstream st)
{
	__atomic_store_n(&stream_tok[stream_slot(st)], 0, __ATOMIC_RELAXED);
}

struct tstate {
	int busy;      /* taken (never waited for) by whoever touches the pool or the pending ops */
	CUcontext ctx; /* the context of every event below */
	unsigned dev, resets; /* ctx's device, and its count of resets when ctx was bound */
	int gone;             /* set by another thread: ctx was destroyed */
	unsigned nfree, created;
	CUevent freev[POOL_MAX];
	unsigned npend;
	struct pend pend[PEND_MAX];
	CUevent anchor, cand; /* anchor: finished, its GPU time is anchor_ns */
	uint64_t anchor_ns, cand_ns;
	int cand_late;        /* the candidate was not reached in time: recycle it, never use it */
	unsigned reclaim_wait; /* ops to let go untimed before the next reclaim */
	uint64_t tok_base, seq; /* tokens of this state's ops: tok_base | ++seq (launch chains) */
	uint64_t last_tok;      /* the token of its last timed op, on last_s, op id last_op */
	CUstream last_s;
	uint32_t last_op;
	int orphan; /* its thread exited: the next thread of its context that needs a state adopts it */
};

/*
 * Every thread's timing state, so that one thread's sync point reads back
 * the ops other threads issued: PyTorch's backward kernels are launched by
 * autograd threads that never synchronise themselves. Append-only.
 */
#define MAX_THREADS 512
SP_HIDDEN extern struct tstate *registry[MAX_THREADS];

static inline int try_take(struct tstate *S)
{
	int z = 0;
	return __atomic_compare_exchange_n(&S->busy, &z, 1, 0, __ATOMIC_ACQUIRE, __ATOMIC_RELAXED);
}

static inline void give_back(struct tstate *S)
{
	__atomic_store_n(&S->busy, 0, __ATOMIC_RELEASE);
}

/* cuda_timing.c */
CUstream priv_stream(const struct sp_drv *d, CUcontext c);
/* NOTE: not plain bind, which as a global would stand in for libc's bind() wherever the core archive is linked. */
void tstate_bind(struct tstate *S, CUcontext c);
int dead(const struct tstate *T);
void drop_if_stale(struct tstate *S);
struct tstate *tstate_get(CUcontext c);
CUevent pool_get(struct tstate *S, const struct sp_drv *d);
void pool_put(struct tstate *S, CUevent e);
CUstream map_stream(uint64_t s, int ptds);
int capturing(const struct sp_drv *d, CUstream st);
const struct sp_drv *timing_drv(void);

/* cuda_spans.c */
int reclaim(struct tstate *S, const struct sp_drv *d);
void read_back_at_exit(void);

#endif /* STEPPROF_CUDA_TIMING_H */
