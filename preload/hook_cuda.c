/*
 * hook_cuda.c - the CUDA wrappers of libstepprof.so (design.md §3).
 *
 * Divided into:
 *   1. the call descriptor and the family handlers (what a COPY, LAUNCH,
 *      ALLOC... records): sp_pre runs before the real call, sp_post after;
 *      SYNC and LAUNCH, the families of the hot loops, have their own inlined
 *      handlers (sync_pre/post, launch_pre/post) instead;
 *   2. the SP_SPEC_* macros: the last column of api_cuda[_late].def, turning a
 *      function's arguments into a descriptor;
 *   3. the generated wrappers, one per GEN line of api_cuda[_late].def, each an
 *      exported front (pass through, or tail-call) and a name__rec that records;
 *   4. the doors written by hand: cuGetProcAddress[_v2] and
 *      cudaGetDriverEntryPoint[ByVersion][_ptsz];
 *   5. the wrapper and real-function tables (shared with hook_dlsym.c).
 *
 * The driver API is the source of truth; the runtime wrappers record the call
 * the program made and raise sp_hook_depth, so the driver calls the runtime
 * makes underneath are passed through unrecorded. With a statically linked
 * runtime only the driver wrappers are reached, and they record.
 * Hot path: no lock, no malloc, no syscall but the clock; errno is kept (by
 * touching it nowhere on the fast path: see poll_end).
 */
#define __CUDA_API_VERSION_INTERNAL 1
#include <cuda.h>
#include <cuda_runtime_api.h>

#include <dlfcn.h>
#include <errno.h>
#include <pthread.h>
#include <string.h>

/* NOTE: cudaGetDriverEntryPoint[_ptsz] are deprecated in CUDA 13 but still
 * exported and called by older code: they are wrapped all the same. */
#pragma GCC diagnostic ignored "-Wdeprecated-declarations"

#include "cuda_drv.h"
#include "cuda_gpu.h"
#include "cuda_hooks.h"
#include "cuda_mem.h"
#include "cuda_sites.h"
#include "recorder.h"

#define SP_EXPORT __attribute__((visibility("default")))

/* ------------------------------------------- 1. descriptor and handlers */

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
	const void *caller;   /* the caller's return address (call sites) */
	int dev;              /* -1: the current device */
	uint32_t op;
	struct sp_gtim tim;
};

/* 1 for the *Async* functions of the table, and for the *FromPool* ones (filled at load). */
static uint8_t sp_api_async[SP_API__COUNT], sp_api_pool[SP_API__COUNT];

static inline int sp_should_record(void)
{
	return sp_active && !sp_hook_depth;
}

static void site_and_dev(struct sp_call *c, uint64_t *f)
{
	f[SP_F_DEVICE] = c->dev >= 0 ? (unsigned)c->dev : sp_gpu_device();
}

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

static __thread struct sp_poll t_poll;

#define SP_NOT_READY 600 /* CUDA_ERROR_NOT_READY == cudaErrorNotReady */
#define SP_OUT_OF_MEMORY 2 /* CUDA_ERROR_OUT_OF_MEMORY == cudaErrorMemoryAllocation */
_Static_assert(CUDA_ERROR_OUT_OF_MEMORY == SP_OUT_OF_MEMORY && cudaErrorMemoryAllocation == SP_OUT_OF_MEMORY,
	       "the driver's and the runtime's out-of-memory codes");

static void poll_flush(void)
{
	uint64_t f[SP_F__COUNT];
	f[SP_F_STREAM] = t_poll.stream;
	f[SP_F_EVENT] = t_poll.event;
	f[SP_F_RESULT] = SP_NOT_READY;
	f[SP_F_DEVICE] = t_poll.dev;
	t_poll.active = 0;
	sp_emit(SP_K_SYNC, t_poll.api, t_poll.t_first, t_poll.t_last, f);
}

/* recorder.c, at this thread's exit and at the process's: a run never answered is a record too;
 * the thread's timing state is handed on. */
SP_HIDDEN void sp_cuda_thread_flush(void);
void sp_cuda_thread_flush(void)
{
	if (t_poll.active)
		poll_flush();
	sp_gpu_thread_exit();
}

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
static inline __attribute__((always_inline)) uint64_t launch_pre(struct sp_gtim *tim, uint64_t stream, int ptds)
{
	poll_end();
	uint64_t t0 = sp_now();
	tim->t0 = t0;
	sp_gpu_begin(tim, stream, ptds, 1);
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
	f[SP_F_NAME] = sp_gpu_kernel_name(stub, func);
	f[SP_F_OP] = op;
	f[SP_F_DEVICE] = dev;
	sp_emit(SP_K_LAUNCH, api, t0, t1, f);
}

static void copy_unified_again(struct sp_call *c);
static void batch_post(struct sp_call *c, int r, uint64_t t1, uint64_t *f);

/* A pinned range into the map; one that does not fit is said once (its copies read "unknown"). */
static void pinned_add(uint64_t p, uint64_t size)
{
	if (sp_pinned_add(p, size) != 0)
		sp_warn_once("pinned_map", "a pinned host range does not fit in the map (at most %u ranges, or no "
					   "memory to grow it): copies from host memory it does not hold are recorded "
					   "with host_memory unknown",
			     (unsigned)SP_PINNED_MAX);
}

static void sp_pre(struct sp_call *c)
{
	if (!(c->fam == FAM_SYNC && c->sync == SP_SYNC_QUERY))
		poll_end();
	c->t0 = sp_now();
	switch (c->fam) {
	case FAM_COPY:
	case FAM_MEMSET:
		sp_gpu_begin(&c->tim, c->stream, c->ptds, 0);
		break;
	case FAM_RESET:
		if (c->dev < 0) /* the runtime's: the current device, as it is before the call */
			c->dev = (int)sp_gpu_device();
		/* the ops finished so far: their events are gone with the reset */
		sp_gpu_sync_point(0, 0, SP_SYNC_EVENT, 1);
		break;
	default:
		break;
	}
}

/* A free record (f holds the result and the stream already); a host_free one for VMM host memory. */
static void free_record(struct sp_call *c, uint64_t *f, uint64_t t1, uint64_t dptr, uint64_t size, unsigned dev,
			uint64_t left)
{
	if (dev == SP_DALLOC_HOST) {
		f[SP_F_PTR] = 0;
		f[SP_F_BYTES] = size;
		sp_emit(SP_K_HOST_FREE, c->api, c->t0, t1, f);
		return;
	}
	f[SP_F_DPTR] = dptr;
	f[SP_F_BYTES] = size;
	f[SP_F_LIVE] = left;
	f[SP_F_DEVICE] = dev;
	sp_emit(SP_K_FREE, c->api, c->t0, t1, f);
}

static void sp_post(struct sp_call *c, int r)
{
	uint64_t t1 = sp_now();
	uint64_t f[SP_F__COUNT];
	f[SP_F_RESULT] = (uint64_t)(int64_t)r;
	f[SP_F_STREAM] = c->stream;
	switch (c->fam) {
	case FAM_COPY:
		if (c->batch) {
			batch_post(c, r, t1, f);
			break;
		}
		if (c->again == 1)
			copy_unified_again(c);
		else if (c->again == 2 && sp_gpu_host_kind(c->usrc, 1) == SP_HOSTMEM_MANAGED)
			c->hostmem = SP_HOSTMEM_MANAGED;
		c->op = sp_next_op();
		f[SP_F_PTR] = c->ptr;
		f[SP_F_DPTR] = c->dptr;
		f[SP_F_BYTES] = c->bytes;
		f[SP_F_OP] = c->op;
		f[SP_F_DIRECTION] = c->dir;
		f[SP_F_HOST_MEMORY] = c->hostmem;
		f[SP_F_SITE] = c->hostmem == SP_HOSTMEM_PAGEABLE ? sp_cuda_site(c->caller) : 0;
		site_and_dev(c, f);
		/*
		 * A synchronous copy is complete when it returns, as CUDA documents,
		 * for device-to-host, pinned host-to-device and host-to-host copies:
		 * its end event goes to stepprof's private stream, its own is left
		 * idle (cuda_gpu.c). A pageable H2D may return once staged, with the
		 * DMA in flight, a D2D or peer copy does not wait: their end event
		 * is ordered after them on their stream.
		 */
		int done = !sp_api_async[c->api] &&
			   (c->dir == SP_DIR_D2H || c->dir == SP_DIR_H2H ||
			    (c->dir == SP_DIR_H2D && c->hostmem == SP_HOSTMEM_PINNED));
		sp_gpu_end(&c->tim, r == 0, c->op, c->api, (unsigned)f[SP_F_DEVICE], done);
		sp_emit(SP_K_COPY, c->api, c->t0, t1, f);
		/*
		 * A synchronous copy is one of the program's sync points: finished ops
		 * can be read back; where it is complete, an anchor can be taken.
		 */
		if (!sp_api_async[c->api])
			sp_gpu_sync_point(c->stream, c->ptds, done ? SP_SYNC_DONE : SP_SYNC_EVENT, r == 0);
		break;
	case FAM_MEMSET:
		c->op = sp_next_op();
		f[SP_F_DPTR] = c->dptr;
		f[SP_F_BYTES] = c->bytes;
		f[SP_F_OP] = c->op;
		site_and_dev(c, f);
		sp_gpu_end(&c->tim, r == 0, c->op, c->api, (unsigned)f[SP_F_DEVICE], 0);
		sp_emit(SP_K_MEMSET, c->api, c->t0, t1, f);
		break;
	case FAM_LAUNCH: /* the wrappers take launch_pre/launch_post instead */
	case FAM_SYNC:   /* and sync_pre/sync_post */
		break;
	case FAM_ALLOC: {
		uint64_t p = 0;
		if (r == 0 && c->out)
			memcpy(&p, c->out, sizeof(p));
		if (c->out2) { /* pitched: pitch * height, or what was asked for (width * height) */
			size_t pitch = 0;
			if (r == 0)
				memcpy(&pitch, c->out2, sizeof(pitch));
			c->bytes = (uint64_t)(r == 0 ? pitch : c->ptr) * c->bytes;
		}
		/*
		 * A stream-ordered allocation comes from the pool of its stream's
		 * device (or the pool named), which need not be the current one;
		 * the default streams (0, legacy, per-thread) are the current
		 * device's, which saves the driver query.
		 */
		if (r == 0 && p && sp_api_async[c->api] && c->dev < 0 && (c->stream > 2 || sp_api_pool[c->api]))
			c->dev = sp_gpu_ptr_device(p);
		site_and_dev(c, f);
		f[SP_F_BYTES] = c->bytes;
		f[SP_F_SITE] = sp_cuda_site(c->caller);
		if (r != 0 && r != SP_OUT_OF_MEMORY) {
			/*
			 * Refused for its arguments (a NULL pointer, a size that is not
			 * a multiple of the VMM granularity...): not a shortage of
			 * memory, so not an alloc_failed (which feeds the fragmentation
			 * finding), but the call, with its result; nothing was allocated.
			 */
			f[SP_F_DPTR] = 0;
			f[SP_F_LIVE] = sp_dev_live((unsigned)f[SP_F_DEVICE]);
			sp_emit(SP_K_ALLOC, c->api, c->t0, t1, f);
			break;
		}
		if (r != 0) {
			int e = errno; /* the real function's, kept from the driver call below */
			const struct sp_drv *d = sp_drv();
			size_t fr = 0, to = 0;
			if (!d || !d->MemGetInfo || d->MemGetInfo(&fr, &to) != CUDA_SUCCESS)
				fr = to = 0;
			errno = e;
			f[SP_F_FREE] = fr;
			f[SP_F_TOTAL] = to;
			sp_emit(SP_K_ALLOC_FAILED, c->api, c->t0, t1, f);
			break;
		}
		f[SP_F_DPTR] = p;
		/*
		 * cudaMalloc of 0 bytes succeeds with a NULL pointer, which no free
		 * gives back (cudaFree(NULL) is no free): nothing to book. Before,
		 * each took a slot of the table for good, every such call probed
		 * past all the earlier ones, and once the table was full no
		 * allocation was found at its free (66000 of them: the 1 MiB freed
		 * after them stayed live, and the run took 2.3 s instead of 7 ms).
		 */
		f[SP_F_LIVE] = p ? sp_dalloc_add(p, c->bytes, (unsigned)f[SP_F_DEVICE]) :
				   sp_dev_live((unsigned)f[SP_F_DEVICE]);
		sp_emit(SP_K_ALLOC, c->api, c->t0, t1, f);
		sp_gpu_header_once();
		break;
	}
	case FAM_FREE: {
		if (!c->dptr)
			break; /* cudaFree(0): the context-creation idiom, not a free */
		uint64_t size = 0;
		unsigned dev = 0;
		uint64_t left = UINT64_MAX;
		if (r == 0) {
			/*
			 * A VMM handle released while mapped keeps its memory until
			 * the unmap of its last mapping, as CUDA documents: nothing
			 * leaves the books now, and that cuMemUnmap is the free record.
			 */
			left = c->vmm ? sp_dalloc_drop(c->dptr, &size, &dev) : sp_dalloc_remove(c->dptr, &size, &dev);
			if (left == SP_DALLOC_HELD)
				break;
			sp_gpu_ptr_cache_flush();
		}
		if (left == UINT64_MAX) { /* unknown or failed: nothing leaves the books */
			dev = sp_gpu_device();
			left = sp_dev_live(dev);
		}
		free_record(c, f, t1, c->dptr, size, dev, left);
		break;
	}
	case FAM_VMMMAP: /* a mapping holds its handle's memory: no record */
		if (r == 0 && sp_vmap_add(c->dptr, c->bytes, c->ptr) == 0 && sp_dalloc_hold(c->ptr) != 0) {
			uint64_t sz, hd; /* a handle stepprof does not know: nothing to hold */
			sp_vmap_remove(c->dptr, &sz, &hd);
		}
		break;
	case FAM_VMMRETAIN: { /* one more reference to the handle, which cuMemRelease gives back */
		uint64_t h = 0;
		if (r == 0 && c->out) {
			memcpy(&h, c->out, sizeof(h));
			sp_dalloc_hold(h);
		}
		break;
	}
	case FAM_VMMUNMAP: {
		/*
		 * The mappings of [dptr, dptr+bytes), in address order: the last
		 * mapping of a released handle frees its memory (a free record).
		 */
		if (r != 0)
			break;
		uint64_t va = c->dptr, sz, hd;
		while (va - c->dptr < c->bytes && sp_vmap_remove(va, &sz, &hd) == 0 && sz) {
			uint64_t size = 0;
			unsigned dev = 0;
			uint64_t left = sp_dalloc_drop(hd, &size, &dev);
			if (left != SP_DALLOC_HELD && left != UINT64_MAX)
				free_record(c, f, t1, hd, size, dev, left);
			va += sz;
		}
		sp_gpu_ptr_cache_flush();
		break;
	}
	case FAM_HOSTALLOC: {
		uint64_t p = 0;
		if (r == 0 && c->out) {
			memcpy(&p, c->out, sizeof(p));
			if (c->vmm) { /* a VMM handle of host memory: no address until mapped */
				sp_dalloc_add(p, c->bytes, SP_DALLOC_HOST);
				p = 0;
			} else {
				pinned_add(p, c->bytes);
			}
		}
		f[SP_F_PTR] = p;
		f[SP_F_BYTES] = c->bytes;
		f[SP_F_SITE] = sp_cuda_site(c->caller);
		sp_emit(SP_K_HOST_ALLOC, c->api, c->t0, t1, f);
		sp_gpu_header_once();
		break;
	}
	case FAM_HOSTREG:
		if (r == 0)
			pinned_add(c->ptr, c->bytes);
		f[SP_F_PTR] = c->ptr;
		f[SP_F_BYTES] = c->bytes;
		sp_emit(SP_K_HOST_REGISTER, c->api, c->t0, t1, f);
		break;
	case FAM_HOSTFREE:
	case FAM_HOSTUNREG:
		f[SP_F_BYTES] = r == 0 ? sp_pinned_remove(c->ptr) : 0;
		f[SP_F_PTR] = c->ptr;
		if (r == 0)
			sp_gpu_ptr_cache_flush();
		sp_emit(c->fam == FAM_HOSTFREE ? SP_K_HOST_FREE : SP_K_HOST_UNREGISTER, c->api, c->t0, t1, f);
		break;
	case FAM_RESET: {
		/*
		 * Every allocation of the device is gone, and its primary context's
		 * streams and events with them: one free record of what was live
		 * (dptr 0: the whole device), the device's books start afresh.
		 */
		unsigned dev = (unsigned)c->dev;
		uint64_t gone = 0;
		if (r == 0) {
			gone = sp_dalloc_reset_dev(dev);
			sp_gpu_device_reset(dev);
			sp_gpu_ctx_changed();
			sp_gpu_ptr_cache_flush();
		}
		f[SP_F_DPTR] = 0;
		f[SP_F_BYTES] = gone;
		f[SP_F_LIVE] = sp_dev_live(dev);
		f[SP_F_DEVICE] = dev;
		sp_emit(SP_K_FREE, c->api, c->t0, t1, f);
		break;
	}
	case FAM_MEMINFO: {
		size_t fr = 0, to = 0;
		if (r == 0 && c->out)
			memcpy(&fr, c->out, sizeof(fr));
		if (r == 0 && c->out2)
			memcpy(&to, c->out2, sizeof(to));
		f[SP_F_FREE] = fr;
		f[SP_F_TOTAL] = to;
		site_and_dev(c, f);
		sp_emit(SP_K_MEM_INFO, c->api, c->t0, t1, f);
		break;
	}
	default:
		break;
	}
}

/* ------------------------------------------------------ 2. the specs */

#define U64(x) ((uint64_t)(uintptr_t)(x))

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
	c->dev = -1;
	c->tim.b = NULL;
	c->again = 0;
	c->vmm = 0;
	c->batch = 0;
}

/*
 * The host side of a copy whose kind the program named: pinned (the map, or
 * the driver), managed (unified addressing lets managed memory pass for host
 * memory: the driver says so), else pageable. Without a context the driver
 * cannot be asked: pinned or pageable by the map, and again after the call
 * (the runtime makes the context current inside it).
 */
static uint8_t host_side(struct sp_call *c, uint64_t host)
{
	unsigned k = sp_gpu_host_kind(host, 1);
	if (k == SP_HOSTMEM_UNKNOWN) {
		c->again = 2;
		c->usrc = host;
	}
	if (k == SP_HOSTMEM_UNKNOWN || k == SP_HOSTMEM_DEVICE) /* device: the kind is the program's word */
		k = sp_gpu_host_kind(host, 0);
	return (uint8_t)k;
}

static void copy_known(struct sp_call *c, unsigned dir, uint64_t dev, uint64_t host, uint64_t n, uint64_t s)
{
	fam(c, FAM_COPY);
	c->dir = (uint8_t)dir;
	c->dptr = dev;
	c->ptr = host;
	c->bytes = n;
	c->stream = s;
	c->hostmem = dir == SP_DIR_D2D || dir == SP_DIR_PEER ? SP_HOSTMEM_DEVICE : host_side(c, host);
}

/* Both sides by their kinds (sp_gpu_host_kind's answers; SP_HOSTMEM_DEVICE for a CUDA array). */
static void copy_kinds(struct sp_call *c, uint64_t dst, unsigned dk, uint64_t src, unsigned sk, uint64_t n, uint64_t s)
{
	int dd = dk == SP_HOSTMEM_DEVICE || dk == SP_HOSTMEM_MANAGED;
	int sd = sk == SP_HOSTMEM_DEVICE || sk == SP_HOSTMEM_MANAGED;
	if (dd && sd)
		copy_known(c, SP_DIR_D2D, dst, 0, n, s);
	else if (dd)
		copy_known(c, SP_DIR_H2D, dst, src, n, s);
	else if (sd)
		copy_known(c, SP_DIR_D2H, src, dst, n, s);
	else
		copy_known(c, SP_DIR_H2H, 0, src, n, s);
	if (dd && !sd)
		c->hostmem = (uint8_t)sk;
	else if (sd && !dd)
		c->hostmem = (uint8_t)dk;
	else if (dk == SP_HOSTMEM_MANAGED || sk == SP_HOSTMEM_MANAGED)
		c->hostmem = SP_HOSTMEM_MANAGED;
	c->again = 0;
}

/* Both sides by kind (unified addressing: cuMemcpy, cudaMemcpyDefault). */
static void copy_unified(struct sp_call *c, uint64_t dst, uint64_t src, uint64_t n, uint64_t s)
{
	unsigned dk = sp_gpu_host_kind(dst, 1), sk = sp_gpu_host_kind(src, 1);
	copy_kinds(c, dst, dk, src, sk, n, s);
	if (dk == SP_HOSTMEM_UNKNOWN || sk == SP_HOSTMEM_UNKNOWN) {
		/* no context yet: the runtime call about to be made makes one current */
		c->again = 1;
		c->udst = dst;
		c->usrc = src;
	}
}

/*
 * After the call: a unified copy made before the thread had a current
 * context (the first call of a new thread: the runtime makes the context
 * current inside it) is told apart now that there is one.
 * RATIONALE: the pointers cannot be asked about without a context, and the
 * driver's answer holds for interior and managed pointers alike, which an
 * exact lookup in stepprof's allocation table would not.
 */
static void copy_unified_again(struct sp_call *c)
{
	struct sp_call u;
	copy_unified(&u, c->udst, c->usrc, c->bytes, c->stream);
	c->dir = u.dir;
	c->dptr = u.dptr;
	c->ptr = u.ptr;
	c->hostmem = u.hostmem;
}

static void copy_rt(struct sp_call *c, int kind, uint64_t dst, uint64_t src, uint64_t n, uint64_t s)
{
	switch (kind) {
	case cudaMemcpyHostToDevice: copy_known(c, SP_DIR_H2D, dst, src, n, s); break;
	case cudaMemcpyDeviceToHost: copy_known(c, SP_DIR_D2H, src, dst, n, s); break;
	case cudaMemcpyDeviceToDevice: copy_known(c, SP_DIR_D2D, dst, 0, n, s); break;
	case cudaMemcpyHostToHost: copy_known(c, SP_DIR_H2H, 0, src, n, s); break;
	default: copy_unified(c, dst, src, n, s); break;
	}
}

/* A driver CUmemorytype pair (2D/3D descriptors). */
static void copy_typed(struct sp_call *c, unsigned st, uint64_t sh, uint64_t sdv, unsigned dt, uint64_t dh, uint64_t ddv,
		       uint64_t n, uint64_t s)
{
	uint64_t src = st == CU_MEMORYTYPE_HOST ? sh : sdv, dst = dt == CU_MEMORYTYPE_HOST ? dh : ddv;
	int sdev = st == CU_MEMORYTYPE_DEVICE || st == CU_MEMORYTYPE_ARRAY;
	int ddev = dt == CU_MEMORYTYPE_DEVICE || dt == CU_MEMORYTYPE_ARRAY;
	if (st == CU_MEMORYTYPE_UNIFIED || dt == CU_MEMORYTYPE_UNIFIED)
		copy_unified(c, dst, src, n, s);
	else if (sdev && ddev)
		copy_known(c, SP_DIR_D2D, dst, 0, n, s);
	else if (ddev)
		copy_known(c, SP_DIR_H2D, dst, src, n, s);
	else if (sdev)
		copy_known(c, SP_DIR_D2H, src, dst, n, s);
	else
		copy_known(c, SP_DIR_H2H, 0, src, n, s);
}

/*
 * A batch of copies (cuMemcpyBatchAsync, cuMemcpy3DBatchAsync), after the call
 * (the context is current then). Each copy is told apart as a unified copy is
 * (sp_gpu_host_kind: stepprof's pinned map, then the driver's answer, cached
 * per page; a CUDA array operand is device memory), and the batch's copies are
 * grouped by direction and host memory: one `copy` record per group (at most
 * BATCH_GROUPS; a copy of a fifth kind counts in the fourth), in the order of
 * their first copy, with the group's bytes summed and its first copy's
 * pointers. The batch's GPU time is one span (a begin and an end event around
 * the whole batch: CUDA runs its copies in any order), given to the group of
 * the most bytes; the other groups' records have no op, their time is their
 * call's. A batch the driver refused is one record without direction or bytes,
 * with its result, as a 2D copy without its descriptor is: its arrays are not
 * read (the program may have named more copies than they hold, which is why
 * it was refused).
 * A 3D copy's bytes are its width x height x depth: exact for pointer
 * operands (one-byte elements), its elements for a CUDA array operand.
 * RATIONALE: per group, not per copy: a batch moves hundreds to thousands of
 * blocks (KV caches, offloaded weights) in one call, and what the analysis
 * needs of them is their direction, bytes and host memory; a record per copy
 * would cost 64 bytes of trace each.
 */
#define BATCH_GROUPS 4

struct batch_group {
	uint8_t dir, hostmem;
	uint64_t bytes, dptr, ptr;
};

static void batch_add(struct batch_group *g, unsigned *n, const struct sp_call *u)
{
	unsigned k = 0;
	while (k < *n && (g[k].dir != u->dir || g[k].hostmem != u->hostmem))
		k++;
	if (k == *n) {
		if (*n == BATCH_GROUPS) {
			k = BATCH_GROUPS - 1;
		} else {
			g[k] = (struct batch_group){u->dir, u->hostmem, 0, u->dptr, u->ptr};
			(*n)++;
		}
	}
	g[k].bytes += u->bytes;
}

/* One side of a 3D batch copy: its address (0 for an array) and kind. */
static unsigned operand_kind(const CUmemcpy3DOperand *x, uint64_t *addr)
{
	if (x->type == CU_MEMCPY_OPERAND_TYPE_ARRAY) {
		*addr = 0;
		return SP_HOSTMEM_DEVICE;
	}
	*addr = (uint64_t)x->op.ptr.ptr;
	return sp_gpu_host_kind(*addr, 1);
}

static unsigned batch_groups(const struct sp_call *c, int r, struct batch_group *g)
{
	unsigned n = 0;
	struct sp_call u;
	/* Only a batch the driver accepted has been read by it whole: a refused one
	 * may name more copies than its arrays hold (count is what it refused). */
	if (r == 0 && c->batch == 1 && c->bops && c->bsrc && c->bsize) {
		const CUdeviceptr *dst = c->bops, *src = c->bsrc;
		for (size_t i = 0; i < c->bcount; i++) {
			copy_unified(&u, (uint64_t)dst[i], (uint64_t)src[i], (uint64_t)c->bsize[i], c->stream);
			batch_add(g, &n, &u);
		}
	} else if (r == 0 && c->batch == 2 && c->bops) {
		const CUDA_MEMCPY3D_BATCH_OP *op = c->bops;
		for (size_t i = 0; i < c->bcount; i++) {
			uint64_t d, s;
			unsigned dk = operand_kind(&op[i].dst, &d), sk = operand_kind(&op[i].src, &s);
			copy_kinds(&u, d, dk, s, sk,
				   (uint64_t)op[i].extent.width * op[i].extent.height * op[i].extent.depth, c->stream);
			batch_add(g, &n, &u);
		}
	}
	if (!n)
		g[n++] = (struct batch_group){SP_DIR_NONE, SP_HOSTMEM_UNKNOWN, 0, 0, 0};
	return n;
}

static void batch_post(struct sp_call *c, int r, uint64_t t1, uint64_t *f)
{
	struct batch_group g[BATCH_GROUPS];
	unsigned n = batch_groups(c, r, g), lead = 0;
	for (unsigned k = 1; k < n; k++)
		if (g[k].bytes > g[lead].bytes)
			lead = k;
	site_and_dev(c, f);
	uint64_t site = 0;
	for (unsigned k = 0; k < n; k++) {
		if (g[k].hostmem == SP_HOSTMEM_PAGEABLE && !site)
			site = sp_cuda_site(c->caller);
		f[SP_F_PTR] = g[k].ptr;
		f[SP_F_DPTR] = g[k].dptr;
		f[SP_F_BYTES] = g[k].bytes;
		f[SP_F_DIRECTION] = g[k].dir;
		f[SP_F_HOST_MEMORY] = g[k].hostmem;
		f[SP_F_SITE] = g[k].hostmem == SP_HOSTMEM_PAGEABLE ? site : 0;
		f[SP_F_OP] = 0;
		if (k == lead) {
			c->op = sp_next_op();
			f[SP_F_OP] = c->op;
			sp_gpu_end(&c->tim, r == 0, c->op, c->api, (unsigned)f[SP_F_DEVICE], 0);
		}
		sp_emit(SP_K_COPY, c->api, c->t0, t1, f);
	}
}

/* A batch's descriptor (kind 1: cuMemcpyBatchAsync's arrays, 2: cuMemcpy3DBatchAsync's operations). */
static void batch_spec(struct sp_call *c, unsigned kind, const void *ops, const void *src, const size_t *size,
		       size_t count, uint64_t stream)
{
	fam(c, FAM_COPY);
	c->stream = stream;
	c->batch = (uint8_t)kind;
	c->bops = ops;
	c->bsrc = src;
	c->bsize = size;
	c->bcount = count;
}

#define SP_SPEC_BATCH(d, s_, n, cnt, st) batch_spec(&c, 1, (d), (s_), (n), (cnt), U64(st))
#define SP_SPEC_BATCH3D(cnt, ops, st) batch_spec(&c, 2, (ops), NULL, NULL, (cnt), U64(st))
#define SP_SPEC_COPY(d, dev, host, n, s) copy_known(&c, SP_DIR_##d, U64(dev), U64(host), (uint64_t)(n), U64(s))
#define SP_SPEC_COPYU(dst, src, n, s) copy_unified(&c, U64(dst), U64(src), (uint64_t)(n), U64(s))
#define SP_SPEC_COPYRT(k, dst, src, n, s) copy_rt(&c, (int)(k), U64(dst), U64(src), (uint64_t)(n), U64(s))
#define SP_SPEC_COPY2D(p, s)                                                                                          \
	do {                                                                                                          \
		if (p)                                                                                                \
			copy_typed(&c, p->srcMemoryType, U64(p->srcHost), U64(p->srcDevice), p->dstMemoryType,       \
				   U64(p->dstHost), U64(p->dstDevice), (uint64_t)p->WidthInBytes * p->Height, U64(s)); \
		else                                                                                                  \
			copy_known(&c, SP_DIR_NONE, 0, 0, 0, U64(s));                                                 \
	} while (0)
#define SP_SPEC_COPY3D(p, s)                                                                                          \
	do {                                                                                                          \
		if (p)                                                                                                \
			copy_typed(&c, p->srcMemoryType, U64(p->srcHost), U64(p->srcDevice), p->dstMemoryType,       \
				   U64(p->dstHost), U64(p->dstDevice),                                                \
				   (uint64_t)p->WidthInBytes * p->Height * (p->Depth ? p->Depth : 1), U64(s));         \
		else                                                                                                  \
			copy_known(&c, SP_DIR_NONE, 0, 0, 0, U64(s));                                                 \
	} while (0)
#define SP_SPEC_COPY3DPEER(p, s)                                                                                      \
	do {                                                                                                          \
		SP_SPEC_COPY3D(p, s);                                                                                 \
		if (c.dir == SP_DIR_D2D)                                                                              \
			c.dir = SP_DIR_PEER;                                                                          \
	} while (0)
#define SP_SPEC_COPYRT3D(p, s)                                                                                        \
	do {                                                                                                          \
		if (p)                                                                                                \
			copy_rt(&c, p->kind, U64(p->dstPtr.ptr), U64(p->srcPtr.ptr),                                  \
				(uint64_t)p->extent.width * (p->extent.height ? p->extent.height : 1) *               \
					(p->extent.depth ? p->extent.depth : 1),                                      \
				U64(s));                                                                              \
		else                                                                                                  \
			copy_known(&c, SP_DIR_NONE, 0, 0, 0, U64(s));                                                 \
	} while (0)
#define SP_SPEC_PEER(dst, src, n, s) copy_known(&c, SP_DIR_PEER, U64(dst), 0, (uint64_t)(n), U64(s))
#define SP_SPEC_MEMSET(p, n, s)                                                                                       \
	do {                                                                                                          \
		fam(&c, FAM_MEMSET);                                                                                  \
		c.dptr = U64(p);                                                                                      \
		c.bytes = (uint64_t)(n);                                                                              \
		c.stream = U64(s);                                                                                    \
	} while (0)
#define SP_SPEC_LAUNCH(f, stubp, s)                                                                                   \
	do {                                                                                                          \
		fam(&c, FAM_LAUNCH);                                                                                  \
		c.func = (CUfunction)(f);                                                                             \
		c.stub = (const void *)(stubp);                                                                       \
		c.stream = U64(s);                                                                                    \
	} while (0)
#define SP_SPEC_SYNC(s, ev, kind)                                                                                     \
	do {                                                                                                          \
		fam(&c, FAM_SYNC);                                                                                    \
		c.stream = U64(s);                                                                                    \
		c.event = U64(ev);                                                                                    \
		c.sync = kind;                                                                                        \
	} while (0)
#define SP_SPEC_ALLOC(outp, n, s)                                                                                     \
	do {                                                                                                          \
		fam(&c, FAM_ALLOC);                                                                                   \
		c.out = (void *)(outp);                                                                               \
		c.bytes = (uint64_t)(n);                                                                              \
		c.stream = U64(s);                                                                                    \
	} while (0)
#define SP_SPEC_ALLOCPITCH(outp, pitchp, w, h)                                                                        \
	do {                                                                                                          \
		fam(&c, FAM_ALLOC);                                                                                   \
		c.out = (void *)(outp);                                                                               \
		c.out2 = (void *)(pitchp);                                                                            \
		c.ptr = (uint64_t)(w);                                                                                \
		c.bytes = (uint64_t)(h);                                                                              \
	} while (0)
/* VMM memory on a device, or on the host (pinned host memory: NCCL's host buffers) */
#define SP_SPEC_VMMCREATE(hp, n, prop)                                                                                \
	do {                                                                                                          \
		int host_ = (prop) && ((prop)->location.type == CU_MEM_LOCATION_TYPE_HOST ||                         \
				       (prop)->location.type == CU_MEM_LOCATION_TYPE_HOST_NUMA ||                    \
				       (prop)->location.type == CU_MEM_LOCATION_TYPE_HOST_NUMA_CURRENT);             \
		fam(&c, host_ ? FAM_HOSTALLOC : FAM_ALLOC);                                                           \
		c.vmm = (uint8_t)host_;                                                                               \
		c.out = (void *)(hp);                                                                                 \
		c.bytes = (uint64_t)(n);                                                                              \
		if ((prop) && (prop)->location.type == CU_MEM_LOCATION_TYPE_DEVICE && (prop)->location.id >= 0)      \
			c.dev = (prop)->location.id < SP_DEV_MAX ? (prop)->location.id : SP_DEV_MAX - 1;              \
	} while (0)
#define SP_SPEC_FREE(p, s)                                                                                            \
	do {                                                                                                          \
		fam(&c, FAM_FREE);                                                                                    \
		c.dptr = U64(p);                                                                                      \
		c.stream = U64(s);                                                                                    \
	} while (0)
#define SP_SPEC_VMMFREE(h)                                                                                            \
	do {                                                                                                          \
		fam(&c, FAM_FREE);                                                                                    \
		c.dptr = U64(h);                                                                                      \
		c.vmm = 1;                                                                                            \
	} while (0)
#define SP_SPEC_VMMMAP(va, n, h)                                                                                      \
	do {                                                                                                          \
		fam(&c, FAM_VMMMAP);                                                                                  \
		c.dptr = U64(va);                                                                                     \
		c.bytes = (uint64_t)(n);                                                                              \
		c.ptr = U64(h);                                                                                       \
	} while (0)
#define SP_SPEC_VMMUNMAP(va, n)                                                                                       \
	do {                                                                                                          \
		fam(&c, FAM_VMMUNMAP);                                                                                \
		c.dptr = U64(va);                                                                                     \
		c.bytes = (uint64_t)(n);                                                                              \
	} while (0)
#define SP_SPEC_VMMRETAIN(hp)                                                                                         \
	do {                                                                                                          \
		fam(&c, FAM_VMMRETAIN);                                                                               \
		c.out = (void *)(hp);                                                                                 \
	} while (0)
#define SP_SPEC_HOSTALLOC(pp, n)                                                                                      \
	do {                                                                                                          \
		fam(&c, FAM_HOSTALLOC);                                                                               \
		c.out = (void *)(pp);                                                                                 \
		c.bytes = (uint64_t)(n);                                                                              \
	} while (0)
#define SP_SPEC_HOSTFREE(p)                                                                                           \
	do {                                                                                                          \
		fam(&c, FAM_HOSTFREE);                                                                                \
		c.ptr = U64(p);                                                                                       \
	} while (0)
#define SP_SPEC_HOSTREG(p, n)                                                                                         \
	do {                                                                                                          \
		fam(&c, FAM_HOSTREG);                                                                                 \
		c.ptr = U64(p);                                                                                       \
		c.bytes = (uint64_t)(n);                                                                              \
	} while (0)
#define SP_SPEC_HOSTUNREG(p)                                                                                          \
	do {                                                                                                          \
		fam(&c, FAM_HOSTUNREG);                                                                               \
		c.ptr = U64(p);                                                                                       \
	} while (0)
#define SP_SPEC_MEMINFO(fp, tp)                                                                                       \
	do {                                                                                                          \
		fam(&c, FAM_MEMINFO);                                                                                 \
		c.out = (void *)(fp);                                                                                 \
		c.out2 = (void *)(tp);                                                                                \
	} while (0)
#define SP_SPEC_RESET(d)                                                                                              \
	do {                                                                                                          \
		fam(&c, FAM_RESET);                                                                                   \
		c.dev = (d) < 0 ? -1 : (d) < SP_DEV_MAX ? (d) : SP_DEV_MAX - 1;                                      \
	} while (0)
#define SP_SPEC_CTX() fam(&c, FAM_NONE)
#define SP_SPEC_CTXGONE(ctx) fam(&c, FAM_NONE)
#define SP_SPEC_NOTE() fam(&c, FAM_NONE)

/* 1: the record names a call site (sp_post reads c->caller). */
#define SP_CALLER_CTX() 0
#define SP_CALLER_CTXGONE(...) 0
#define SP_CALLER_NOTE() 0
#define SP_CALLER_COPY(...) 1
#define SP_CALLER_COPYU(...) 1
#define SP_CALLER_COPYRT(...) 1
#define SP_CALLER_COPY2D(...) 1
#define SP_CALLER_COPY3D(...) 1
#define SP_CALLER_COPY3DPEER(...) 1
#define SP_CALLER_COPYRT3D(...) 1
#define SP_CALLER_PEER(...) 1
#define SP_CALLER_BATCH(...) 1
#define SP_CALLER_BATCH3D(...) 1
#define SP_CALLER_MEMSET(...) 0
#define SP_CALLER_LAUNCH(...) 0
#define SP_CALLER_SYNC(...) 0
#define SP_CALLER_ALLOC(...) 1
#define SP_CALLER_ALLOCPITCH(...) 1
#define SP_CALLER_VMMCREATE(...) 1
#define SP_CALLER_FREE(...) 0
#define SP_CALLER_VMMFREE(...) 0
#define SP_CALLER_VMMMAP(...) 0
#define SP_CALLER_VMMUNMAP(...) 0
#define SP_CALLER_VMMRETAIN(...) 0
#define SP_CALLER_HOSTALLOC(...) 1
#define SP_CALLER_HOSTFREE(...) 0
#define SP_CALLER_HOSTREG(...) 0
#define SP_CALLER_HOSTUNREG(...) 0
#define SP_CALLER_MEMINFO(...) 0
#define SP_CALLER_RESET(...) 0

/* What a wrapper does even when it does not record (nested or inactive). */
#define SP_EARLY_CTX() sp_gpu_ctx_changed()
/*
 * RATIONALE: before the call, as the wrapper has no after for a call it does
 * not record; if the destruction fails, stepprof has only forgotten events and
 * a stream of a live context, and makes new ones.
 */
#define SP_EARLY_CTXGONE(ctx)                                                                                         \
	do {                                                                                                          \
		sp_gpu_ctx_changed();                                                                                 \
		sp_gpu_ctx_gone(ctx);                                                                                 \
	} while (0)
#define SP_EARLY_NOTE()
#define SP_EARLY_COPY(...)
#define SP_EARLY_COPYU(...)
#define SP_EARLY_COPYRT(...)
#define SP_EARLY_COPY2D(...)
#define SP_EARLY_COPY3D(...)
#define SP_EARLY_COPY3DPEER(...)
#define SP_EARLY_COPYRT3D(...)
#define SP_EARLY_PEER(...)
#define SP_EARLY_BATCH(...)
#define SP_EARLY_BATCH3D(...)
#define SP_EARLY_MEMSET(...)
#define SP_EARLY_LAUNCH(...)
#define SP_EARLY_SYNC(...)
#define SP_EARLY_ALLOC(...)
#define SP_EARLY_ALLOCPITCH(...)
#define SP_EARLY_VMMCREATE(...)
#define SP_EARLY_FREE(...)
#define SP_EARLY_VMMFREE(...)
#define SP_EARLY_VMMMAP(...)
#define SP_EARLY_VMMUNMAP(...)
#define SP_EARLY_VMMRETAIN(...)
#define SP_EARLY_HOSTALLOC(...)
#define SP_EARLY_HOSTFREE(...)
#define SP_EARLY_HOSTREG(...)
#define SP_EARLY_HOSTUNREG(...)
#define SP_EARLY_MEMINFO(...)
#define SP_EARLY_RESET(...)

/* ------------------------------------------------- 3. the wrappers */

void *sp_cuda_real[SP_CUDA__COUNT];

static void *resolve_real(int i)
{
	sp_dlsym_fn rd = sp_real_dlsym();
	void *p = rd ? rd(RTLD_NEXT, sp_cuda_table[i].name) : NULL;
	if (p && p != sp_cuda_wrapper[i])
		__atomic_store_n(&sp_cuda_real[i], p, __ATOMIC_RELEASE);
	else
		p = NULL;
	return p;
}

static inline void *real_of(int i)
{
	void *p = __atomic_load_n(&sp_cuda_real[i], __ATOMIC_ACQUIRE);
	return p ? p : resolve_real(i);
}

#define SP_NOFN_CUresult CUDA_ERROR_NOT_FOUND
#define SP_NOFN_cudaError_t cudaErrorSymbolNotFound

/*
 * Each wrapper is two functions: the exported one tests whether to record
 * and else jumps to the real function; name__rec, reached by a tail call with
 * the same arguments, records (and resolves the real function the first time).
 * RATIONALE: with the record path in the same function, every call paid its
 * frame (six callee-saved registers and the descriptor) before the test, the
 * nested driver call under a runtime wrapper too: 29 instructions to pass a
 * cuStreamQuery through, against about 10 now.
 * The program's return address (call sites) travels in t_caller: a tail call
 * keeps it as name__rec's own, but nothing guarantees the tail call.
 */
static __thread const void *t_caller;

#define SP_WRAP_HAND(name, ret, params, args, ptds_, spec)
#define SP_WRAP_GEN(name, ret, params, args, ptds_, spec)                                                             \
	static __attribute__((noinline)) ret name##__rec params;                                                      \
	SP_EXPORT ret name params                                                                                     \
	{                                                                                                             \
		__typeof__(&name) real =                                                                              \
			(__typeof__(&name))__atomic_load_n(&sp_cuda_real[SP_CIDX_##name], __ATOMIC_ACQUIRE);         \
		SP_EARLY_##spec;                                                                                      \
		if (__builtin_expect(real != NULL, 1) && !sp_should_record())                                        \
			return real args;                                                                             \
		if (SP_CALLER_##spec)                                                                                 \
			t_caller = __builtin_return_address(0);                                                       \
		return name##__rec args;                                                                              \
	}                                                                                                             \
	static ret name##__rec params                                                                                 \
	{                                                                                                             \
		__typeof__(&name) real =                                                                              \
			(__typeof__(&name))__atomic_load_n(&sp_cuda_real[SP_CIDX_##name], __ATOMIC_ACQUIRE);         \
		if (__builtin_expect(!real, 0)) { /* the first call: resolve it, then decide */                    \
			real = (__typeof__(&name))resolve_real(SP_CIDX_##name);                                      \
			if (!real)                                                                                    \
				return SP_NOFN_##ret;                                                                 \
			if (!sp_should_record())                                                                      \
				return real args;                                                                     \
		}                                                                                                     \
		struct sp_call c;                                                                                     \
		SP_SPEC_##spec;                                                                                       \
		if (c.fam == FAM_NONE) { /* no record; what it does inside is not the program's */                \
			sp_hook_depth++;                                                                              \
			ret r0 = real args;                                                                           \
			sp_hook_depth--;                                                                              \
			return r0;                                                                                    \
		}                                                                                                     \
		if (c.fam == FAM_SYNC) { /* known at compile time: the inlined path */                             \
			sp_hook_depth++;                                                                              \
			uint64_t t0_ = sync_pre(c.sync);                                                              \
			ret r1 = real args;                                                                           \
			sync_post(SP_API_##name, ptds_, c.sync, c.stream, c.event, t0_, (int)r1);                     \
			sp_hook_depth--;                                                                              \
			return r1;                                                                                    \
		}                                                                                                     \
		if (c.fam == FAM_LAUNCH) {                                                                            \
			sp_hook_depth++;                                                                              \
			struct sp_gtim tim_;                                                                          \
			uint64_t t0_ = launch_pre(&tim_, c.stream, ptds_);                                            \
			ret r2 = real args;                                                                           \
			launch_post(SP_API_##name, &tim_, c.stream, c.stub, c.func, t0_, (int)r2);                    \
			sp_hook_depth--;                                                                              \
			return r2;                                                                                    \
		}                                                                                                     \
		c.api = SP_API_##name;                                                                                \
		c.ptds = ptds_;                                                                                       \
		c.caller = SP_CALLER_##spec ? t_caller : NULL;                                                        \
		/* depth covers our own driver calls too: nothing they do is recorded */                          \
		sp_hook_depth++;                                                                                      \
		sp_pre(&c);                                                                                           \
		ret r = real args;                                                                                    \
		sp_post(&c, (int)r);                                                                                  \
		sp_hook_depth--;                                                                                      \
		return r;                                                                                             \
	}

#define SP_API_CUDA(name, how, ret, params, args, base, ver, ptds, spec) SP_WRAP_##how(name, ret, params, args, ptds, spec)
#include "stepprof/api_cuda.def"
#include "stepprof/api_cuda_late.def"
#undef SP_API_CUDA

/* ------------------------------------------------------ 4. the doors */

void *sp_cuda_adopt(int i, void *real)
{
	if (i < 0 || !real || real == sp_cuda_wrapper[i])
		return real;
	__atomic_store_n(&sp_cuda_real[i], real, __ATOMIC_RELEASE);
	return sp_cuda_wrapper[i];
}

/* After a successful driver lookup: our wrapper for a hooked variant. */
static void proc_answer(const char *symbol, void **pfn, int ver, uint64_t flags)
{
	if (!symbol || !pfn || !*pfn)
		return;
	int i;
	if (strcmp(symbol, "cuGetProcAddress") == 0)
		i = ver >= 12000 ? SP_CIDX_cuGetProcAddress_v2 : SP_CIDX_cuGetProcAddress;
	else
		i = sp_cuda_find_proc(symbol, ver, flags);
	if (i >= 0)
		*pfn = sp_cuda_adopt(i, *pfn);
}

SP_EXPORT CUresult cuGetProcAddress_v2(const char *symbol, void **pfn, int cudaVersion, cuuint64_t flags,
				       CUdriverProcAddressQueryResult *symbolStatus)
{
	__typeof__(&cuGetProcAddress_v2) real = (__typeof__(&cuGetProcAddress_v2))real_of(SP_CIDX_cuGetProcAddress_v2);
	if (!real)
		return CUDA_ERROR_NOT_FOUND;
	CUresult r = real(symbol, pfn, cudaVersion, flags, symbolStatus);
	if (r == CUDA_SUCCESS) {
		int e = errno;
		proc_answer(symbol, pfn, cudaVersion, flags);
		errno = e;
	}
	return r;
}

SP_EXPORT CUresult cuGetProcAddress(const char *symbol, void **pfn, int cudaVersion, cuuint64_t flags)
{
	__typeof__(&cuGetProcAddress) real = (__typeof__(&cuGetProcAddress))real_of(SP_CIDX_cuGetProcAddress);
	if (!real)
		return CUDA_ERROR_NOT_FOUND;
	CUresult r = real(symbol, pfn, cudaVersion, flags);
	if (r == CUDA_SUCCESS) {
		int e = errno;
		proc_answer(symbol, pfn, cudaVersion, flags);
		errno = e;
	}
	return r;
}

/* The cudaVersion cudaGetDriverEntryPoint asks the driver for: the runtime's own. */
static int runtime_version(void)
{
	static int v;
	if (!v) {
		sp_dlsym_fn rd = sp_real_dlsym();
		cudaError_t (*rgv)(int *) = rd ? (cudaError_t(*)(int *))rd(RTLD_NEXT, "cudaRuntimeGetVersion") : NULL;
		int x = 0;
		if (!rgv || rgv(&x) != cudaSuccess || x <= 0)
			x = CUDART_VERSION;
		v = x;
	}
	return v;
}

/* cudaEnablePerThreadDefaultStream, or the _ptsz entry with cudaEnableDefault. */
static uint64_t rt_flags(unsigned long long flags, int ptsz)
{
	return (flags & cudaEnablePerThreadDefaultStream) || (ptsz && !(flags & cudaEnableLegacyStream)) ? 2 : 0;
}

#define SP_DOOR_ENTRY(name, ptsz)                                                                                    \
	SP_EXPORT cudaError_t name(const char *symbol, void **funcPtr, unsigned long long flags,                       \
				   enum cudaDriverEntryPointQueryResult *driverStatus)                                 \
	{                                                                                                             \
		__typeof__(&name) real = (__typeof__(&name))real_of(SP_CIDX_##name);                                \
		if (!real)                                                                                            \
			return cudaErrorSymbolNotFound;                                                               \
		cudaError_t r = real(symbol, funcPtr, flags, driverStatus);                                           \
		if (r == cudaSuccess) {                                                                               \
			int e = errno;                                                                                \
			proc_answer(symbol, funcPtr, runtime_version(), rt_flags(flags, ptsz));                       \
			errno = e;                                                                                    \
		}                                                                                                     \
		return r;                                                                                             \
	}
#define SP_DOOR_VERSION(name, ptsz)                                                                                  \
	SP_EXPORT cudaError_t name(const char *symbol, void **funcPtr, unsigned int cudaVersion,                      \
				   unsigned long long flags, enum cudaDriverEntryPointQueryResult *driverStatus)       \
	{                                                                                                             \
		__typeof__(&name) real = (__typeof__(&name))real_of(SP_CIDX_##name);                                 \
		if (!real)                                                                                            \
			return cudaErrorSymbolNotFound;                                                               \
		cudaError_t r = real(symbol, funcPtr, cudaVersion, flags, driverStatus);                              \
		if (r == cudaSuccess) {                                                                               \
			int e = errno;                                                                                \
			proc_answer(symbol, funcPtr, (int)cudaVersion, rt_flags(flags, ptsz));                        \
			errno = e;                                                                                    \
		}                                                                                                     \
		return r;                                                                                             \
	}

SP_DOOR_ENTRY(cudaGetDriverEntryPoint, 0)
SP_DOOR_ENTRY(cudaGetDriverEntryPoint_ptsz, 1)
SP_DOOR_VERSION(cudaGetDriverEntryPointByVersion, 0)
SP_DOOR_VERSION(cudaGetDriverEntryPointByVersion_ptsz, 1)

/*
 * A forked child starts with the forking thread's timing state: events of the
 * parent's context, which mean nothing in the child. Forget them (the child
 * leaks nothing it could use), and the cached current device. A run of query
 * polls the thread was in is the parent's, which records it: before, the
 * child wrote it too, at its first CUDA call or its exit, though it never
 * called CUDA (a sync record in a DataLoader worker, begun before it existed).
 */
static void cuda_atfork_child(void)
{
	t_poll.active = 0;
	sp_gpu_forget_thread();
}

__attribute__((constructor)) static void cuda_hooks_init(void)
{
	for (int i = 0; i < SP_CUDA__COUNT; i++) {
		sp_api_async[sp_cuda_table[i].api] = strstr(sp_cuda_table[i].name, "Async") != NULL;
		sp_api_pool[sp_cuda_table[i].api] = strstr(sp_cuda_table[i].name, "FromPool") != NULL;
	}
	pthread_atfork(NULL, NULL, cuda_atfork_child);
}

/* ------------------------------------------------------ 5. the tables */

void *const sp_cuda_wrapper[SP_CUDA__COUNT] = {
#define SP_API_CUDA(name, ...) [SP_CIDX_##name] = (void *)name,
#include "stepprof/api_cuda.def"
#include "stepprof/api_cuda_late.def"
#undef SP_API_CUDA
};
