/*
 * cuda_call.h - the call descriptor of the CUDA wrappers (hook_cuda.c):
 *   1. struct sp_call, filled by a wrapper's SP_SPEC_* macro from its
 *      arguments (fam, copy_*, batch_spec), then handed to sp_pre before the
 *      real call and to sp_post after it (cuda_call.c);
 *   2. the runs of query polls (t_poll), and the inlined handlers of the SYNC
 *      and LAUNCH families, the families of the hot loops: sync_pre/post,
 *      launch_pre/post, which take no descriptor.
 * Hot path: no lock, no malloc, no syscall but the clock; errno is kept (by
 * touching it nowhere on the fast path: see poll_end).
 */
#ifndef STEPPROF_CUDA_CALL_H
#define STEPPROF_CUDA_CALL_H

#include <stddef.h>
#include <stdint.h>

#include "cuda_gpu.h"
#include "recorder.h"

/* ------------------------------------------------ 1. the descriptor */

enum sp_fam { FAM_NONE, FAM_COPY, FAM_MEMSET, FAM_LAUNCH, FAM_SYNC, FAM_ALLOC, FAM_FREE, FAM_HOSTALLOC, FAM_HOSTFREE,
	      FAM_HOSTREG, FAM_HOSTUNREG, FAM_MEMINFO, FAM_RESET, FAM_VMMMAP, FAM_VMMUNMAP, FAM_VMMRETAIN };

struct sp_call {
	uint8_t fam, ptds, dir, hostmem, sync, timed;
	uint8_t again;        /* told apart without a context, again after the call: 1 unified, 2 host side */
	uint8_t vmm;          /* free: a VMM handle's release (its memory may outlive it, mapped);
				 host alloc: a VMM handle of host memory */
	uint8_t batch;        /* copy: 0 one copy, 1 a cuMemcpyBatchAsync, 2 a cuMemcpy3DBatchAsync */
	const void *bops;     /* batch: dsts (1) or the operations (2) */
	const void *bsrc;     /* batch 1: srcs */
	const size_t *bsize;  /* batch 1: sizes */
	size_t bcount;        /* batch: copies */
	uint64_t udst, usrc;  /* its pointers (2: usrc, the host side) */
	uint16_t api;
	uint64_t t0;
	uint64_t stream, ptr, dptr, bytes, event;
	void *out;            /* alloc: where the new pointer goes; meminfo: free */
	void *out2;           /* alloc pitch: the pitch; meminfo: total */
	const void *stub;     /* runtime launch: host stub */
	CUfunction func;      /* driver launch */
	uint64_t shape;       /* launch: its configuration, folded (SP_SHAPE) */
	const void *caller;   /* the caller's return address (call sites) */
	int dev;              /* -1: the current device */
	uint32_t op;
	struct sp_gtim tim;
};

/* 1 for the *Async* functions of the table, and for the *FromPool* ones (filled at load). */
SP_HIDDEN extern uint8_t sp_api_async[SP_API__COUNT], sp_api_pool[SP_API__COUNT];

static inline void fam(struct sp_call *c, unsigned f)
{
	c->fam = (uint8_t)f;
	c->stream = 0;
	c->ptr = c->dptr = c->bytes = c->event = 0;
	c->dir = 0;
	c->hostmem = 0;
	c->out = c->out2 = NULL;
	c->stub = NULL;
	c->func = NULL;
	c->shape = 0;
	c->dev = -1;
	c->tim.b = NULL;
	c->again = 0;
	c->vmm = 0;
	c->batch = 0;
}

/* Copies and batches (the other families are filled by their SP_SPEC_* macros). */
void copy_known(struct sp_call *c, unsigned dir, uint64_t dev, uint64_t host, uint64_t n, uint64_t s);
void copy_unified(struct sp_call *c, uint64_t dst, uint64_t src, uint64_t n, uint64_t s);
void copy_rt(struct sp_call *c, int kind, uint64_t dst, uint64_t src, uint64_t n, uint64_t s);
void copy_typed(struct sp_call *c, unsigned st, uint64_t sh, uint64_t sdv, unsigned dt, uint64_t dh, uint64_t ddv,
		uint64_t n, uint64_t s);
void batch_spec(struct sp_call *c, unsigned kind, const void *ops, const void *src, const size_t *size, size_t count,
		uint64_t stream);

/* Before the real call, and after it with its result: the record of every family but SYNC and LAUNCH. */
void sp_pre(struct sp_call *c);
void sp_post(struct sp_call *c, int r);

/* ---------------------------------------- 2. polls, SYNC and LAUNCH */

/*
 * Query polling: a loop of cudaStreamQuery / cuEventQuery that answers "not
 * ready" (NCCL's watchdog, PyTorch's event.query()) becomes ONE sync record
 * from the first poll to the answer, not one record per poll: the thread was
 * waiting for the GPU all along, and a trace must not fill with polls. A run
 * of polls ends with the answer, another target, or any other CUDA call.
 */
struct sp_poll {
	int active;
	uint16_t api;
	uint64_t stream, event, t_first, t_last;
	unsigned dev;
};

SP_HIDDEN extern __thread struct sp_poll t_poll __attribute__((tls_model("initial-exec")));

#define SP_NOT_READY 600 /* CUDA_ERROR_NOT_READY == cudaErrorNotReady */

/* The run of polls as one sync record; the run is over. */
void poll_flush(void);

/* A query's record: 1 = emitted by the caller with *begin, 0 = held back. */
static inline int poll_step(unsigned api, uint64_t stream, uint64_t event, uint64_t t0, int r, uint64_t t1,
			    uint64_t *begin)
{
	int same = 0;
	if (__builtin_expect(t_poll.active, 0)) {
		same = t_poll.api == api && t_poll.stream == stream && t_poll.event == event;
		if (!same)
			poll_flush();
	}
	if (r == SP_NOT_READY) {
		if (!same) {
			sp_recorder_thread_watch(); /* so that a thread that exits before the answer flushes it */
			t_poll.active = 1;
			t_poll.api = (uint16_t)api;
			t_poll.stream = stream;
			t_poll.event = event;
			t_poll.t_first = t0;
			t_poll.dev = sp_gpu_device();
		}
		t_poll.t_last = t1;
		return 0;
	}
	if (same) { /* the answer ends the run: one record from its first poll */
		*begin = t_poll.t_first;
		t_poll.active = 0;
	}
	return 1;
}

/*
 * errno: nothing on the record path sets it (sp_now reads the TSC or a
 * clock_gettime(CLOCK_MONOTONIC) that cannot fail; the recorder and the
 * cuda_*.c helpers save it on their own slow paths), so the
 * wrappers neither save nor restore it: the program sees the errno it set
 * before the call, or the one the real function left.
 * RATIONALE: saving and restoring it around sp_pre and sp_post cost four
 * __errno_location calls per wrapped call.
 */

/* Any other CUDA call ends a run of polls (before the call: its record is first). */
static inline void poll_end(void)
{
	if (__builtin_expect(t_poll.active, 0))
		poll_flush();
}

/*
 * The SYNC family (device/context/stream/event syncs, stream-wait-event,
 * queries), inlined into its wrappers with the kind a constant: no descriptor,
 * no family switch, the record's fields straight from the arguments.
 */
static inline __attribute__((always_inline)) uint64_t sync_pre(unsigned kind)
{
	if (kind != SP_SYNC_QUERY)
		poll_end();
	return sp_now();
}

static inline __attribute__((always_inline)) void sync_post(unsigned api, int ptds, unsigned kind, uint64_t stream,
							    uint64_t event, uint64_t t0, int r)
{
	uint64_t t1 = sp_now();
	uint64_t begin = t0;
	if (kind != SP_SYNC_QUERY || poll_step(api, stream, event, t0, r, t1, &begin)) {
		uint64_t f[SP_F__COUNT];
		f[SP_F_RESULT] = (uint64_t)(int64_t)r;
		f[SP_F_STREAM] = stream;
		f[SP_F_EVENT] = event;
		f[SP_F_DEVICE] = sp_gpu_device();
		sp_emit(SP_K_SYNC, api, begin, t1, f);
	}
	sp_gpu_sync_point(stream, ptds, (enum sp_sync_kind)kind, r == 0);
	sp_gpu_header_once();
}

/*
 * The LAUNCH family, inlined into its wrappers as SYNC is: no descriptor, no
 * family switch. Same steps as sp_pre/sp_post would take, in the same order.
 */
/* What identifies a launch's work: its function or stub and its shape; never 0 (0: not a launch). */
static inline uint64_t launch_key(CUfunction f, const void *stub, uint64_t shape)
{
	uint64_t k = (uint64_t)(uintptr_t)(f ? (const void *)f : stub);
	return ((k * 0x9E3779B97F4A7C15ull) ^ shape) | 1u;
}

static inline __attribute__((always_inline)) uint64_t launch_pre(struct sp_gtim *tim, uint64_t stream, int ptds,
								  uint64_t key)
{
	poll_end();
	uint64_t t0 = sp_now();
	tim->t0 = t0;
	tim->key = key;
	sp_gpu_begin(tim, stream, ptds, key);
	return t0;
}

static inline __attribute__((always_inline)) void launch_post(unsigned api, struct sp_gtim *tim, uint64_t stream,
							      const void *stub, CUfunction func, uint64_t t0, int r)
{
	uint64_t t1 = sp_now();
	uint32_t op = sp_next_op();
	unsigned dev = sp_gpu_device();
	/*
	 * The end event first: where the kernel is done before it is recorded
	 * (an idle stream, a short kernel), its time is the record's, and the
	 * first launch of each kernel looks its name up (dladdr, interning).
	 */
	sp_gpu_end(tim, r == 0, op, api, dev, 0);
	uint64_t f[SP_F__COUNT];
	f[SP_F_RESULT] = (uint64_t)(int64_t)r;
	f[SP_F_STREAM] = stream;
	uint32_t name = sp_gpu_kernel_name_flags(stub, func);
	if (__builtin_expect(name & SP_NAME_COMM, 0))
		sp_gpu_sample_always(tim->key); /* NCCL's, by its name: every later launch timed */
	f[SP_F_NAME] = name & ~SP_NAME_COMM;
	f[SP_F_OP] = op;
	f[SP_F_DEVICE] = dev;
	sp_emit(SP_K_LAUNCH, api, t0, t1, f);
}

#endif /* STEPPROF_CUDA_CALL_H */
