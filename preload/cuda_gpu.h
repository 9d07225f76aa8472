/*
 * cuda_gpu.h - what the CUDA wrappers ask of the GPU side, off their fast path:
 *   1. the current device (per-thread cache, dropped when the context changes),
 *   2. GPU time from pooled timing events (begin/end around an op on its
 *      stream, or the end on a private stream of stepprof's own when the op is
 *      complete at return; read back at the application's own sync points,
 *      converted to host CLOCK_MONOTONIC through an anchor event, emitted as
 *      GPU_SPAN: cuda_timing.c and cuda_spans.c),
 *   3. kernel names (dladdr of a runtime stub, cuFuncGetName of a driver function),
 *   4. the kind of a copy's host pointer (pinned map, then a cached
 *      cuPointerGetAttribute),
 *   5. the trace header's device and driver info, once.
 * Every driver call here goes to the real driver (cuda_drv.h), never to a wrapper.
 * Every function here leaves errno as it found it (the slow paths save it
 * themselves), so that a wrapper's fast path needs no errno of its own.
 */
#ifndef STEPPROF_CUDA_GPU_H
#define STEPPROF_CUDA_GPU_H

#include <stdint.h>

#include "cuda_drv.h"

/* ---- 1. device ---- */
#include "recorder.h"
SP_HIDDEN extern __thread int sp_gpu_tdev __attribute__((tls_model("initial-exec"))); /* -1: ask the driver */
unsigned sp_gpu_device_slow(void);
static inline unsigned sp_gpu_device(void)
{
	int d = sp_gpu_tdev;
	return d >= 0 ? (unsigned)d : sp_gpu_device_slow();
}
void sp_gpu_ctx_changed(void); /* cuCtxSetCurrent, cudaSetDevice...: forget the cache */
/* The thread's current context, cached while ctx_gen stays (a device reset bumps it: cuda_timing.c). */
SP_HIDDEN extern unsigned ctx_gen;
CUcontext cur_ctx(const struct sp_drv *d);
void sp_gpu_forget_thread(void); /* fork child: drop the thread's timing state and caches */
void sp_gpu_thread_exit(void);   /* the thread exits: its timing state goes to the next thread that needs one */
void sp_gpu_quick_exit(void);    /* _exit: read back what the GPU has finished, as at exit() */
/*
 * After a reset of dev (cudaDeviceReset, cuDevicePrimaryCtxReset): its
 * streams and events are gone. Forgets the private streams of dev, every
 * thread's cached context; each thread's timing state bound to dev is
 * dropped at its next use.
 */
void sp_gpu_device_reset(unsigned dev);
/* ctx is being destroyed (cuCtxDestroy): the same for the streams and events of that context. */
void sp_gpu_ctx_gone(CUcontext ctx);

/* ---- 2. timing ---- */
/* SP_SYNC_DONE: a synchronous copy that CUDA documents as complete when it returns. */
enum sp_sync_kind { SP_SYNC_ALL, SP_SYNC_STREAM, SP_SYNC_EVENT, SP_SYNC_WAIT, SP_SYNC_QUERY, SP_SYNC_DONE };

struct sp_gtim {
	CUevent b;   /* begin event, NULL when this op is not timed, SP_GTIM_CHAIN (launches) */
	CUstream s;  /* the stream the events go to */
	void *st;    /* the timing state (cuda_timing.c) that holds b */
	uint64_t t0; /* launches: the host time the call began (set by the caller) */
	uint64_t key; /* launches: launch_key() (set by the caller) */
};
/*
 * b of a launch timed by its end event alone: its stream's previous op is
 * this thread's last timed one (cuda_timing.c, "Launch chains").
 */
#define SP_GTIM_CHAIN ((CUevent)(uintptr_t)1)

/* STEPPROF_KERNEL_TIMING: 0 = off, 1 = every launch, N = one launch in N, SP_KT_AUTO = samples per kernel. */
#define SP_KT_AUTO 0xFFFFFFFEu
unsigned sp_gpu_kernel_timing(void);
/* Its value once read (~0u: not read yet), for the inline test below. */
SP_HIDDEN extern unsigned sp_gpu_ktiming;
/* How many threads ever timed an op (0: no sync point has anything to read back). */
SP_HIDDEN extern unsigned sp_gpu_nregistry;

/*
 * Before an op on stream s (ptds: the per-thread-default-stream variant, for
 * which stream 0 means CU_STREAM_PER_THREAD). Records the begin event unless
 * the stream is capturing, no context is current or the pool is exhausted;
 * launch: the launch's key (launch_key(): its function and shape; 0 for any
 * other op), to apply the kernel timing policy.
 * RATIONALE for the inline parts: a launch with STEPPROF_KERNEL_TIMING=off and
 * a sync in a process that never timed an op are the common calls of the hot
 * path; their test costs a load, not a call.
 */
void sp_gpu_begin_slow(struct sp_gtim *t, uint64_t s, int ptds, uint64_t launch);

/*
 * Samples (cuda_timing.c, "Samples"): whether this launch of kernel key is
 * one the policy times with a begin and an end event, from which the analyzer
 * learns the kernel's duration: the first SP_SAMPLE_LEARN launches of a key,
 * then one in SP_SAMPLE_EVERY at random (xorshift, per thread: a period that
 * a training step's own pattern could alias with would time the same one of
 * several equal launches every step). Per thread, no lock, no call.
 */
#define SP_SAMPLE_SLOTS 64u
#define SP_SAMPLE_LEARN 2u
#define SP_SAMPLE_EVERY 32u
struct sp_sample_slot {
	uint64_t key;
	uint64_t n; /* launches of key on this thread since it took the slot */
	int always; /* an NCCL kernel (by its name): every launch timed (sp_gpu_sample_always) */
};
SP_HIDDEN extern __thread struct sp_sample_slot sp_samples[SP_SAMPLE_SLOTS] __attribute__((tls_model("initial-exec")));
SP_HIDDEN extern __thread uint64_t sp_sample_rng __attribute__((tls_model("initial-exec")));
static inline int sp_gpu_sample(uint64_t key)
{
	struct sp_sample_slot *sl = &sp_samples[(key * 0x9E3779B97F4A7C15ull) >> 58 & (SP_SAMPLE_SLOTS - 1)];
	if (sl->key != key) { /* a new kernel, or one that lost its slot: learn it (again) */
		sl->key = key;
		sl->n = 0;
		sl->always = 0;
	}
	if (sl->n++ < SP_SAMPLE_LEARN || sl->always)
		return 1;
	uint64_t x = sp_sample_rng ? sp_sample_rng : (key | 1);
	x ^= x << 13;
	x ^= x >> 7;
	x ^= x << 17;
	sp_sample_rng = x;
	return (x >> 32) % SP_SAMPLE_EVERY == 0;
}
/* The launch argument of sp_gpu_begin_slow for a launch that sp_gpu_begin chose to sample (keys are odd). */
#define SP_LAUNCH_SAMPLED 2u
/*
 * ... and for a launch made inside an NCCL call (hook_nccl.c): timed whatever
 * the policy but off. Its duration is the wait for the other ranks, which no
 * model learns from samples, and its GPU start and end are the straggler
 * analysis's arrival and the hosts' clock alignment (docs/definitions.md).
 */
#define SP_LAUNCH_NCCL 4u
SP_HIDDEN extern __thread int sp_nccl_depth __attribute__((tls_model("initial-exec")));

static inline void sp_gpu_begin(struct sp_gtim *t, uint64_t s, int ptds, uint64_t launch)
{
	t->b = NULL;
	if (launch) {
		unsigned k = __atomic_load_n(&sp_gpu_ktiming, __ATOMIC_RELAXED);
		if (!k)
			return;
		if (__builtin_expect(sp_nccl_depth, 0))
			launch = SP_LAUNCH_NCCL;
		else if (k == SP_KT_AUTO) { /* the common case of the default policy: decided here, no call */
			if (!sp_gpu_sample(launch))
				return;
			launch = SP_LAUNCH_SAMPLED;
		}
	}
	sp_gpu_begin_slow(t, s, ptds, launch);
}
/*
 * After it: ok = the op was accepted; records the end event and queues the op.
 * done = the op is complete now (a synchronous copy that CUDA documents as
 * complete when it returns): the end event goes to the context's private
 * stream, reached at once, and the program's stream is left idle.
 */
void sp_gpu_end_slow(struct sp_gtim *t, int ok, uint32_t op, unsigned api, unsigned dev, int done);
static inline void sp_gpu_end(struct sp_gtim *t, int ok, uint32_t op, unsigned api, unsigned dev, int done)
{
	if (t->b)
		sp_gpu_end_slow(t, ok, op, api, dev, done);
}
/*
 * After a sync call returned (ok = success): anchor, then emit the finished ops'
 * GPU_SPANs. The anchor is taken after stream and device syncs on the stream
 * synchronised, after a SP_SYNC_DONE copy on the private stream.
 */
void sp_gpu_sync_point_slow(uint64_t s, int ptds, enum sp_sync_kind kind, int ok);
static inline void sp_gpu_sync_point(uint64_t s, int ptds, enum sp_sync_kind kind, int ok)
{
	if (__atomic_load_n(&sp_gpu_nregistry, __ATOMIC_ACQUIRE)) /* else nothing was ever timed here */
		sp_gpu_sync_point_slow(s, ptds, kind, ok);
}

/* ---- 3. kernel names ---- */
uint32_t sp_gpu_kernel_name(const void *stub, CUfunction f);
/*
 * Its name is NCCL's (ncclKernel_*, ncclDevKernel_*): bit 31 of what
 * sp_gpu_kernel_name_flags returns, the name's id in the low bits. Where
 * NCCL's API is invisible (linked statically, or STEPPROF_NCCL=0), its
 * kernels are still timed at every launch once their name is known
 * (sp_gpu_sample_always): the first launch of a kernel is always timed.
 */
#define SP_NAME_COMM 0x80000000u
uint32_t sp_gpu_kernel_name_flags(const void *stub, CUfunction f);
static inline void sp_gpu_sample_always(uint64_t key)
{
	struct sp_sample_slot *sl = &sp_samples[(key * 0x9E3779B97F4A7C15ull) >> 58 & (SP_SAMPLE_SLOTS - 1)];
	if (sl->key == key)
		sl->always = 1;
}

/* ---- 4. host memory kind (enum sp_hostmem) of a pointer ---- */
unsigned sp_gpu_host_kind(uint64_t p, int may_be_device);
/* The device of device memory at p, or -1 (also in a process that sees one device: never asked). */
int sp_gpu_ptr_device(uint64_t p);
void sp_gpu_ptr_cache_flush(void); /* an allocation went away: cached answers may be stale */

/* ---- 5. trace header ---- */
SP_HIDDEN extern int sp_gpu_header_done;
void sp_gpu_header_slow(void);
static inline void sp_gpu_header_once(void)
{
	if (!__atomic_load_n(&sp_gpu_header_done, __ATOMIC_RELAXED))
		sp_gpu_header_slow();
}

#endif /* STEPPROF_CUDA_GPU_H */
