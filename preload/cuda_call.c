/*
 * cuda_call.c - what each family of CUDA calls records (see cuda_call.h):
 *   1. the family handlers: sp_pre runs before the real call, sp_post after
 *      (COPY, MEMSET, ALLOC, FREE, VMM, HOST*, MEMINFO, RESET), and the flush
 *      of a run of query polls;
 *   2. the copy descriptors: a copy's direction and host memory, from the
 *      kind the program named, the driver's memory types or unified addressing;
 *   3. batches of copies (cuMemcpyBatchAsync, cuMemcpy3DBatchAsync).
 * The SYNC and LAUNCH families are inlined into their wrappers (cuda_call.h).
 */
#include "cuda_call.h"

#include <cuda_runtime_api.h>
#include <errno.h>
#include <string.h>

#include "cuda_drv.h"
#include "cuda_mem.h"
#include "cuda_sites.h"

/* ------------------------------------------------------ 1. handlers */

uint8_t sp_api_async[SP_API__COUNT], sp_api_pool[SP_API__COUNT];

static void site_and_dev(struct sp_call *c, uint64_t *f)
{
	f[SP_F_DEVICE] = c->dev >= 0 ? (unsigned)c->dev : sp_gpu_device();
}

__thread struct sp_poll t_poll;

#define SP_OUT_OF_MEMORY 2 /* CUDA_ERROR_OUT_OF_MEMORY == cudaErrorMemoryAllocation */
_Static_assert(CUDA_ERROR_OUT_OF_MEMORY == SP_OUT_OF_MEMORY && cudaErrorMemoryAllocation == SP_OUT_OF_MEMORY,
	       "the driver's and the runtime's out-of-memory codes");

void poll_flush(void)
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

void sp_pre(struct sp_call *c)
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

/*
 * The record of a call of the memory families (allocations, frees, VMM, pinned
 * host memory, resets), which reach sp_post outside the capture range too
 * (STEPPROF_CAPTURE: hook_cuda.c's SP_BOOKS_*) to keep the books of device and
 * pinned memory: there the books change and nothing is recorded.
 */
#define book_emit(kind, api, t0, t1, f)                                                                             \
	do {                                                                                                          \
		if (sp_cap.on)                                                                                            \
			sp_emit(kind, api, t0, t1, f);                                                                \
	} while (0)

/* A free record (f holds the result and the stream already); a host_free one for VMM host memory. */
static void free_record(struct sp_call *c, uint64_t *f, uint64_t t1, uint64_t dptr, uint64_t size, unsigned dev,
			uint64_t left)
{
	if (dev == SP_DALLOC_HOST) {
		f[SP_F_PTR] = 0;
		f[SP_F_BYTES] = size;
		book_emit(SP_K_HOST_FREE, c->api, c->t0, t1, f);
		return;
	}
	f[SP_F_DPTR] = dptr;
	f[SP_F_BYTES] = size;
	f[SP_F_LIVE] = left;
	f[SP_F_DEVICE] = dev;
	book_emit(SP_K_FREE, c->api, c->t0, t1, f);
}

void sp_post(struct sp_call *c, int r)
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
		 * idle (cuda_timing.c). A pageable H2D may return once staged, with the
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
		f[SP_F_SITE] = (sp_cap.on ? sp_cuda_site(c->caller) : 0);
		if (r != 0 && r != SP_OUT_OF_MEMORY) {
			/*
			 * Refused for its arguments (a NULL pointer, a size that is not
			 * a multiple of the VMM granularity...): not a shortage of
			 * memory, so not an alloc_failed (which feeds the fragmentation
			 * finding), but the call, with its result; nothing was allocated.
			 */
			f[SP_F_DPTR] = 0;
			f[SP_F_LIVE] = sp_dev_live((unsigned)f[SP_F_DEVICE]);
			book_emit(SP_K_ALLOC, c->api, c->t0, t1, f);
			break;
		}
		if (r != 0 && !sp_cap.on)
			break; /* outside the capture range: nothing booked, no query */
		if (r != 0) {
			int e = errno; /* the real function's, kept from the driver call below */
			const struct sp_drv *d = sp_drv();
			size_t fr = 0, to = 0;
			if (!d || !d->MemGetInfo || d->MemGetInfo(&fr, &to) != CUDA_SUCCESS)
				fr = to = 0;
			errno = e;
			f[SP_F_FREE] = fr;
			f[SP_F_TOTAL] = to;
			book_emit(SP_K_ALLOC_FAILED, c->api, c->t0, t1, f);
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
		book_emit(SP_K_ALLOC, c->api, c->t0, t1, f);
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
		f[SP_F_SITE] = (sp_cap.on ? sp_cuda_site(c->caller) : 0);
		book_emit(SP_K_HOST_ALLOC, c->api, c->t0, t1, f);
		sp_gpu_header_once();
		break;
	}
	case FAM_HOSTREG:
		if (r == 0)
			pinned_add(c->ptr, c->bytes);
		f[SP_F_PTR] = c->ptr;
		f[SP_F_BYTES] = c->bytes;
		book_emit(SP_K_HOST_REGISTER, c->api, c->t0, t1, f);
		break;
	case FAM_HOSTFREE:
	case FAM_HOSTUNREG:
		f[SP_F_BYTES] = r == 0 ? sp_pinned_remove(c->ptr) : 0;
		f[SP_F_PTR] = c->ptr;
		if (r == 0)
			sp_gpu_ptr_cache_flush();
		book_emit(c->fam == FAM_HOSTFREE ? SP_K_HOST_FREE : SP_K_HOST_UNREGISTER, c->api, c->t0, t1, f);
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
		book_emit(SP_K_FREE, c->api, c->t0, t1, f);
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

/* ------------------------------------------------ 2. copy descriptors */

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

void copy_known(struct sp_call *c, unsigned dir, uint64_t dev, uint64_t host, uint64_t n, uint64_t s)
{
	fam(c, FAM_COPY);
	c->dir = (uint8_t)dir;
	c->dptr = dev;
	c->ptr = host;
	c->bytes = n;
	c->stream = s;
	c->hostmem = dir == SP_DIR_D2D || dir == SP_DIR_PEER ? SP_HOSTMEM_DEVICE : host_side(c, host);
}

/* The direction of a copy whose sides are known to be on the device or not. */
static void copy_sides(struct sp_call *c, int ddev, uint64_t dst, int sdev, uint64_t src, uint64_t n, uint64_t s)
{
	if (ddev && sdev)
		copy_known(c, SP_DIR_D2D, dst, 0, n, s);
	else if (ddev)
		copy_known(c, SP_DIR_H2D, dst, src, n, s);
	else if (sdev)
		copy_known(c, SP_DIR_D2H, src, dst, n, s);
	else
		copy_known(c, SP_DIR_H2H, 0, src, n, s);
}

/* Both sides by their kinds (sp_gpu_host_kind's answers; SP_HOSTMEM_DEVICE for a CUDA array). */
static void copy_kinds(struct sp_call *c, uint64_t dst, unsigned dk, uint64_t src, unsigned sk, uint64_t n, uint64_t s)
{
	int dd = dk == SP_HOSTMEM_DEVICE || dk == SP_HOSTMEM_MANAGED;
	int sd = sk == SP_HOSTMEM_DEVICE || sk == SP_HOSTMEM_MANAGED;
	copy_sides(c, dd, dst, sd, src, n, s);
	if (dd && !sd)
		c->hostmem = (uint8_t)sk;
	else if (sd && !dd)
		c->hostmem = (uint8_t)dk;
	else if (dk == SP_HOSTMEM_MANAGED || sk == SP_HOSTMEM_MANAGED)
		c->hostmem = SP_HOSTMEM_MANAGED;
	c->again = 0;
}

/* Both sides by kind (unified addressing: cuMemcpy, cudaMemcpyDefault). */
void copy_unified(struct sp_call *c, uint64_t dst, uint64_t src, uint64_t n, uint64_t s)
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

void copy_rt(struct sp_call *c, int kind, uint64_t dst, uint64_t src, uint64_t n, uint64_t s)
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
void copy_typed(struct sp_call *c, unsigned st, uint64_t sh, uint64_t sdv, unsigned dt, uint64_t dh, uint64_t ddv,
		uint64_t n, uint64_t s)
{
	uint64_t src = st == CU_MEMORYTYPE_HOST ? sh : sdv, dst = dt == CU_MEMORYTYPE_HOST ? dh : ddv;
	int sdev = st == CU_MEMORYTYPE_DEVICE || st == CU_MEMORYTYPE_ARRAY;
	int ddev = dt == CU_MEMORYTYPE_DEVICE || dt == CU_MEMORYTYPE_ARRAY;
	if (st == CU_MEMORYTYPE_UNIFIED || dt == CU_MEMORYTYPE_UNIFIED)
		copy_unified(c, dst, src, n, s);
	else
		copy_sides(c, ddev, dst, sdev, src, n, s);
}

/* ------------------------------------------------------- 3. batches */

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
void batch_spec(struct sp_call *c, unsigned kind, const void *ops, const void *src, const size_t *size, size_t count,
		uint64_t stream)
{
	fam(c, FAM_COPY);
	c->stream = stream;
	c->batch = (uint8_t)kind;
	c->bops = ops;
	c->bsrc = src;
	c->bsize = size;
	c->bcount = count;
}
