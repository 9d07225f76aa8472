/*
 * drv_mem.c - memory of the simulated GPU.
 *
 *   1. the device arena: SIMGPU_MEM_BYTES of reserved (not committed) address
 *      space per device; allocations are first-fit over an address-ordered segment list with
 *      512-byte alignment, so fragmentation really happens
 *   2. pinned host ranges (cuMemHostAlloc / cuMemHostRegister) and classification
 *      of any pointer as pageable, pinned, device or managed
 *   3. the allocation API: cuMemAlloc, cuMemFree, managed memory, mem-get-info,
 *      address ranges, pointer attributes, advice and prefetches
 *   4. pinned host memory API
 *   5. memory pools (the stream-ordered calls themselves are in drv_allocasync.c)
 *   6. virtual memory management: physical handles (accounted in the arena, backed
 *      by a memfd each), address reservations, maps of those memfds
 *
 * All state is guarded by sim_lock.
 */
#include "sim.h"

#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

/* ---------------------------------------------------------------- 1. arena */

int sim_mem_init_dev(struct sim_dev *d)
{
	void *p;

	/* Reserved, not committed: pages appear when first touched. Huge pages make
	 * that first touch (and large copies) much cheaper where THP is "madvise". */
	p = mmap(NULL, sim_cfg.mem_bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
	if (p == MAP_FAILED)
		return -1;
	madvise(p, sim_cfg.mem_bytes, MADV_HUGEPAGE);
	d->base = p;
	d->cap = sim_cfg.mem_bytes;
	d->segs = calloc(1, sizeof(*d->segs));
	if (!d->segs)
		return -1;
	d->segs->size = d->cap;
	d->segs->kind = SEG_FREE;
	return 0;
}

static struct sim_seg *seg_new(size_t off, size_t size)
{
	struct sim_seg *s = calloc(1, sizeof(*s));

	if (s) {
		s->off = off;
		s->size = size;
	}
	return s;
}

/* Split free segment s so that [off, off+size) becomes its own segment; returns it. */
static struct sim_seg *seg_carve(struct sim_dev *d, struct sim_seg *s, size_t off, size_t size)
{
	if (off > s->off) {
		struct sim_seg *pre = seg_new(s->off, off - s->off);
		if (!pre)
			return NULL;
		pre->prev = s->prev;
		pre->next = s;
		if (s->prev)
			s->prev->next = pre;
		else
			d->segs = pre;
		s->prev = pre;
		s->size -= off - s->off;
		s->off = off;
	}
	if (s->size > size) {
		struct sim_seg *post = seg_new(off + size, s->size - size);
		if (!post)
			return NULL;
		post->prev = s;
		post->next = s->next;
		if (s->next)
			s->next->prev = post;
		s->next = post;
		s->size = size;
	}
	return s;
}

static struct sim_seg *arena_alloc(struct sim_dev *d, size_t bytes, size_t align, enum sim_seg_kind kind)
{
	size_t size = (bytes + SIM_ALIGN - 1) & ~(size_t)(SIM_ALIGN - 1);

	if (bytes == 0 || size < bytes)
		return NULL;
	for (struct sim_seg *s = d->segs; s; s = s->next) {
		size_t start;
		if (s->kind != SEG_FREE)
			continue;
		start = (s->off + align - 1) & ~(align - 1);
		if (start + size > s->off + s->size || start < s->off)
			continue;
		s = seg_carve(d, s, start, size);
		if (!s)
			return NULL;
		s->kind = kind;
		s->request = bytes;
		s->pool = NULL;
		d->used += size;
		return s;
	}
	return NULL;
}

static void arena_release(struct sim_dev *d, struct sim_seg *s)
{
	d->used -= s->size;
	/* Give very large blocks' pages back; smaller ones stay committed for the next
	 * allocation that reuses the address (see sim_commit). */
	if (s->size > SIM_COMMIT_MAX && s->kind != SEG_PHYS)
		madvise(d->base + s->off, s->size, MADV_DONTNEED);
	s->kind = SEG_FREE;
	s->pool = NULL;
	if (s->next && s->next->kind == SEG_FREE) {
		struct sim_seg *n = s->next;
		s->size += n->size;
		s->next = n->next;
		if (n->next)
			n->next->prev = s;
		free(n);
	}
	if (s->prev && s->prev->kind == SEG_FREE) {
		struct sim_seg *p = s->prev;
		p->size += s->size;
		p->next = s->next;
		if (s->next)
			s->next->prev = p;
		free(s);
	}
}

/* The live segment holding p, or NULL; *dev gets the device. */
static struct sim_seg *seg_find(uintptr_t p, int *dev)
{
	for (int i = 0; i < sim_ndev; i++) {
		struct sim_dev *d = &sim_devs[i];
		uintptr_t b = (uintptr_t)d->base;
		if (p < b || p >= b + d->cap)
			continue;
		for (struct sim_seg *s = d->segs; s; s = s->next)
			if (p >= b + s->off && p < b + s->off + s->size) {
				if (dev)
					*dev = i;
				return s->kind == SEG_FREE ? NULL : s;
			}
	}
	return NULL;
}

/*
 * Like a GPU's, allocated memory is backed at once: blocks up to SIM_COMMIT_MAX are
 * faulted in when allocated (outside sim_lock), so that copies into them are not
 * slowed by first-touch page faults that a real device would not have. Larger ones
 * are committed as they are touched, keeping a test's footprint bounded.
 */
void sim_commit(const void *p, size_t n)
{
	uintptr_t pg = 4096, a = (uintptr_t)p & ~(pg - 1), b = ((uintptr_t)p + n + pg - 1) & ~(pg - 1);

	if (n && n <= SIM_COMMIT_MAX)
		madvise((void *)a, b - a, MADV_POPULATE_WRITE);
}

CUresult sim_alloc_locked(int dev, size_t bytes, enum sim_seg_kind kind, CUdeviceptr *out)
{
	struct sim_dev *d = &sim_devs[dev];
	struct sim_seg *s = arena_alloc(d, bytes, SIM_ALIGN, kind);

	if (!s)
		return CUDA_ERROR_OUT_OF_MEMORY;
	*out = (CUdeviceptr)(uintptr_t)(d->base + s->off);
	return CUDA_SUCCESS;
}

CUresult sim_free_locked(CUdeviceptr p, size_t *freed)
{
	int dev = -1;
	struct sim_seg *s = seg_find((uintptr_t)p, &dev);

	if (!s || s->kind == SEG_PHYS || (uintptr_t)p != (uintptr_t)sim_devs[dev].base + s->off)
		return CUDA_ERROR_INVALID_VALUE;
	if (freed)
		*freed = s->request;
	if (s->pool)
		s->pool->used -= s->size;
	arena_release(&sim_devs[dev], s);
	return CUDA_SUCCESS;
}

/* Free every allocation of dev (device reset). VMM handles stay: they are process
 * objects the program releases itself. */
void sim_mem_reset_locked(int dev)
{
	struct sim_dev *d = &sim_devs[dev];
	struct sim_seg *s;

again:
	for (s = d->segs; s; s = s->next)
		if (s->kind == SEG_DEVICE || s->kind == SEG_MANAGED) {
			if (s->pool)
				s->pool->used -= s->size;
			arena_release(d, s); /* may merge and free neighbours: walk again */
			goto again;
		}
}

/* ---------------------------------------------------------------- 2. pinned ranges, classification */

struct pin {
	uintptr_t base;
	size_t size;
	unsigned int flags;
	int allocated; /* by cuMemHostAlloc (freed with cuMemFreeHost) vs registered */
};

static struct pin *pins;
static size_t npins, cap_pins;

/* Index of the first range whose end is above p (ranges are sorted and disjoint). */
static size_t pin_lower(uintptr_t p)
{
	size_t lo = 0, hi = npins;

	while (lo < hi) {
		size_t mid = (lo + hi) / 2;
		if (pins[mid].base + pins[mid].size <= p)
			lo = mid + 1;
		else
			hi = mid;
	}
	return lo;
}

static struct pin *pin_find(uintptr_t p)
{
	size_t i = pin_lower(p);

	return i < npins && pins[i].base <= p ? &pins[i] : NULL;
}

static CUresult pin_add(uintptr_t base, size_t size, unsigned int flags, int allocated)
{
	size_t i = pin_lower(base);

	if (i < npins && pins[i].base < base + size)
		return CUDA_ERROR_HOST_MEMORY_ALREADY_REGISTERED;
	if (npins == cap_pins) {
		size_t nc = cap_pins ? cap_pins * 2 : 64;
		struct pin *np = realloc(pins, nc * sizeof(*np));
		if (!np)
			return CUDA_ERROR_OUT_OF_MEMORY;
		pins = np;
		cap_pins = nc;
	}
	memmove(&pins[i + 1], &pins[i], (npins - i) * sizeof(*pins));
	pins[i] = (struct pin){base, size, flags, allocated};
	npins++;
	return CUDA_SUCCESS;
}

static void pin_remove(struct pin *p)
{
	size_t i = (size_t)(p - pins);

	memmove(&pins[i], &pins[i + 1], (npins - i - 1) * sizeof(*pins));
	npins--;
}

/* VMM mappings are device memory too (section 6). */
static int vmm_classify(uintptr_t p, size_t n, int *dev);

int sim_classify(const void *ptr, size_t n, int *dev)
{
	uintptr_t p = (uintptr_t)ptr;
	struct sim_seg *s;
	struct pin *pn;
	int d = -1, k;

	for (int i = 0; i < sim_ndev; i++) {
		uintptr_t b = (uintptr_t)sim_devs[i].base;
		if (p >= b && p < b + sim_devs[i].cap) {
			s = seg_find(p, &d);
			if (!s || s->kind == SEG_PHYS || p + n > b + s->off + s->size)
				return -1;
			if (dev)
				*dev = d;
			return s->kind == SEG_MANAGED ? MEM_MANAGED : MEM_DEVICE;
		}
	}
	k = vmm_classify(p, n, dev);
	if (k != MEM_PAGEABLE)
		return k;
	pn = pin_find(p);
	if (pn && p + n <= pn->base + pn->size)
		return MEM_PINNED;
	return MEM_PAGEABLE;
}

/* ---------------------------------------------------------------- 3. allocation API */

#define CUR_DEV(dev)                                                                                                   \
	CUresult err_ = CUDA_SUCCESS;                                                                                  \
	int dev = sim_cur_dev(&err_);                                                                                  \
	if (dev < 0)                                                                                                   \
	return err_

CUresult cuMemAlloc_v2(CUdeviceptr *dptr, size_t bytesize)
{
	CUresult r;
	CUR_DEV(dev);

	if (!dptr || bytesize == 0)
		return CUDA_ERROR_INVALID_VALUE;
	if ((r = sim_refuse_unsafe()) != CUDA_SUCCESS) /* CUDA's example of an unsafe call */
		return r;
	pthread_mutex_lock(&sim_lock);
	r = sim_alloc_locked(dev, bytesize, SEG_DEVICE, dptr);
	pthread_mutex_unlock(&sim_lock);
	if (r == CUDA_SUCCESS)
		sim_commit((void *)(uintptr_t)*dptr, bytesize);
	return r;
}

CUresult cuMemAllocPitch_v2(CUdeviceptr *dptr, size_t *pPitch, size_t WidthInBytes, size_t Height,
			    unsigned int ElementSizeBytes)
{
	size_t pitch;

	if (!pPitch || !WidthInBytes || !Height)
		return CUDA_ERROR_INVALID_VALUE;
	pitch = (WidthInBytes + SIM_ALIGN - 1) & ~(size_t)(SIM_ALIGN - 1);
	*pPitch = pitch;
	return cuMemAlloc_v2(dptr, pitch * Height);
}

CUresult cuMemAllocManaged(CUdeviceptr *dptr, size_t bytesize, unsigned int flags)
{
	CUresult r;
	CUR_DEV(dev);

	/* "flags must be one of CU_MEM_ATTACH_GLOBAL or CU_MEM_ATTACH_HOST" */
	if (!dptr || bytesize == 0 || (flags != CU_MEM_ATTACH_GLOBAL && flags != CU_MEM_ATTACH_HOST))
		return CUDA_ERROR_INVALID_VALUE;
	pthread_mutex_lock(&sim_lock);
	r = sim_alloc_locked(dev, bytesize, SEG_MANAGED, dptr);
	pthread_mutex_unlock(&sim_lock);
	if (r == CUDA_SUCCESS)
		sim_commit((void *)(uintptr_t)*dptr, bytesize);
	return r;
}

CUresult cuMemFree_v2(CUdeviceptr dptr)
{
	CUresult r;
	struct sim_seg *s;
	int dev = -1, ordered;

	if (!sim_inited)
		return CUDA_ERROR_NOT_INITIALIZED;
	if (dptr == 0)
		return CUDA_SUCCESS;
	/*
	 * Like CUDA, freeing memory that work may still use waits for the device,
	 * except a stream-ordered allocation: cuMemFree "will not perform any implicit
	 * synchronization when the pointer was allocated with cuMemAllocAsync or
	 * cuMemAllocFromPoolAsync" (the caller must have finished with it).
	 */
	pthread_mutex_lock(&sim_lock);
	s = seg_find((uintptr_t)dptr, &dev);
	ordered = s && s->pool;
	pthread_mutex_unlock(&sim_lock);
	if (!ordered && dev >= 0)
		sim_ctx_sync_dev(dev);
	pthread_mutex_lock(&sim_lock);
	r = sim_free_locked(dptr, NULL);
	pthread_mutex_unlock(&sim_lock);
	return r;
}

CUresult cuMemGetInfo_v2(size_t *free, size_t *total)
{
	CUR_DEV(dev);

	if (!free || !total)
		return CUDA_ERROR_INVALID_VALUE;
	pthread_mutex_lock(&sim_lock);
	*free = sim_devs[dev].cap - sim_devs[dev].used;
	*total = sim_devs[dev].cap;
	pthread_mutex_unlock(&sim_lock);
	return CUDA_SUCCESS;
}

CUresult cuMemGetAddressRange_v2(CUdeviceptr *pbase, size_t *psize, CUdeviceptr dptr)
{
	struct sim_seg *s;
	int dev = -1;
	CUresult r = CUDA_ERROR_NOT_FOUND;

	if (!sim_inited)
		return CUDA_ERROR_NOT_INITIALIZED;
	pthread_mutex_lock(&sim_lock);
	s = seg_find((uintptr_t)dptr, &dev);
	if (s) {
		if (pbase)
			*pbase = (CUdeviceptr)(uintptr_t)(sim_devs[dev].base + s->off);
		if (psize)
			*psize = s->request;
		r = CUDA_SUCCESS;
	}
	pthread_mutex_unlock(&sim_lock);
	return r;
}

/* What CUDA knows about a pointer, for cuPointerGetAttribute(s). kind < 0: unknown. */
struct ptr_info {
	int kind, dev;
	uintptr_t start;
	size_t size;
	struct CUmemPoolHandle_st *pool;
};

static struct ptr_info ptr_info(uintptr_t p)
{
	struct ptr_info pi = {.kind = -1};
	struct sim_seg *s;
	struct pin *pn;
	int k;

	pthread_mutex_lock(&sim_lock);
	s = seg_find(p, &pi.dev);
	if (s && s->kind != SEG_PHYS) {
		pi.kind = s->kind == SEG_MANAGED ? MEM_MANAGED : MEM_DEVICE;
		pi.start = (uintptr_t)sim_devs[pi.dev].base + s->off;
		pi.size = s->request;
		pi.pool = s->pool;
	} else if ((k = vmm_classify(p, 1, &pi.dev)) == MEM_DEVICE || k == MEM_PINNED) {
		pi.kind = k;
		if (k == MEM_PINNED)
			pi.dev = 0;
		pi.start = p;
		pi.size = 1;
	} else if ((pn = pin_find(p))) {
		pi.kind = MEM_PINNED;
		pi.dev = 0;
		pi.start = pn->base;
		pi.size = pn->size;
	}
	pthread_mutex_unlock(&sim_lock);
	return pi;
}

static CUresult attr_one(const struct ptr_info *pi, CUpointer_attribute a, void *data, uintptr_t p)
{
	switch (a) {
	case CU_POINTER_ATTRIBUTE_CONTEXT:
		*(CUcontext *)data = pi->kind < 0 ? NULL : &sim_devs[pi->dev].primary;
		break;
	case CU_POINTER_ATTRIBUTE_MEMORY_TYPE:
		*(unsigned int *)data = pi->kind < 0		 ? 0
					: pi->kind == MEM_PINNED ? CU_MEMORYTYPE_HOST
								 : CU_MEMORYTYPE_DEVICE;
		break;
	case CU_POINTER_ATTRIBUTE_DEVICE_POINTER:
		*(CUdeviceptr *)data = pi->kind < 0 ? 0 : (CUdeviceptr)p;
		break;
	case CU_POINTER_ATTRIBUTE_HOST_POINTER:
		*(void **)data = pi->kind == MEM_PINNED || pi->kind == MEM_MANAGED ? (void *)p : NULL;
		break;
	case CU_POINTER_ATTRIBUTE_IS_MANAGED:
		*(unsigned int *)data = pi->kind == MEM_MANAGED;
		break;
	case CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL:
		*(int *)data = pi->kind < 0 ? -2 : pi->dev;
		break;
	case CU_POINTER_ATTRIBUTE_RANGE_START_ADDR:
		*(void **)data = (void *)pi->start;
		break;
	case CU_POINTER_ATTRIBUTE_RANGE_SIZE:
		*(size_t *)data = pi->size;
		break;
	case CU_POINTER_ATTRIBUTE_MAPPED:
		*(int *)data = pi->kind >= 0;
		break;
	case CU_POINTER_ATTRIBUTE_BUFFER_ID:
		*(unsigned long long *)data = pi->kind < 0 ? 0 : (unsigned long long)pi->start;
		break;
	case CU_POINTER_ATTRIBUTE_SYNC_MEMOPS:
		*(int *)data = 1;
		break;
	case CU_POINTER_ATTRIBUTE_MEMPOOL_HANDLE:
		*(CUmemoryPool *)data = pi->pool;
		break;
	case CU_POINTER_ATTRIBUTE_IS_LEGACY_CUDA_IPC_CAPABLE:
	case CU_POINTER_ATTRIBUTE_IS_GPU_DIRECT_RDMA_CAPABLE:
	case CU_POINTER_ATTRIBUTE_ACCESS_FLAGS:
		*(int *)data = 0;
		break;
	case CU_POINTER_ATTRIBUTE_ALLOWED_HANDLE_TYPES:
		*(unsigned long long *)data = 0;
		break;
	default:
		return CUDA_ERROR_INVALID_VALUE;
	}
	return CUDA_SUCCESS;
}

/* Like CUDA: a pointer CUDA does not know is an error for the single query... */
CUresult cuPointerGetAttribute(void *data, CUpointer_attribute attribute, CUdeviceptr ptr)
{
	struct ptr_info pi;

	if (!sim_inited)
		return CUDA_ERROR_NOT_INITIALIZED;
	if (!data)
		return CUDA_ERROR_INVALID_VALUE;
	pi = ptr_info((uintptr_t)ptr);
	if (pi.kind < 0)
		return CUDA_ERROR_INVALID_VALUE;
	return attr_one(&pi, attribute, data, (uintptr_t)ptr);
}

/* ...while the plural query answers defaults (NULL context, memory type 0) and succeeds. */
CUresult cuPointerGetAttributes(unsigned int numAttributes, CUpointer_attribute *attributes, void **data,
				CUdeviceptr ptr)
{
	struct ptr_info pi;

	if (!sim_inited)
		return CUDA_ERROR_NOT_INITIALIZED;
	if (!attributes || !data)
		return CUDA_ERROR_INVALID_VALUE;
	pi = ptr_info((uintptr_t)ptr);
	for (unsigned int i = 0; i < numAttributes; i++) {
		CUresult r = attr_one(&pi, attributes[i], data[i], (uintptr_t)ptr);
		if (r != CUDA_SUCCESS)
			return r;
	}
	return CUDA_SUCCESS;
}

/* Managed memory lives on the device arena already: advice and prefetches are
 * accepted and do nothing. */
CUresult cuMemAdvise(CUdeviceptr devPtr, size_t count, CUmem_advise advice, CUdevice device)
{
	return sim_inited ? CUDA_SUCCESS : CUDA_ERROR_NOT_INITIALIZED;
}
CUresult cuMemAdvise_v2(CUdeviceptr devPtr, size_t count, CUmem_advise advice, CUmemLocation location)
{
	return sim_inited ? CUDA_SUCCESS : CUDA_ERROR_NOT_INITIALIZED;
}
CUresult cuMemPrefetchAsync(CUdeviceptr devPtr, size_t count, CUdevice dstDevice, CUstream h)
{
	return sim_stream_check(h, 0);
}
CUresult cuMemPrefetchAsync_ptsz(CUdeviceptr devPtr, size_t count, CUdevice dstDevice, CUstream h)
{
	return sim_stream_check(h, 1);
}
CUresult cuMemPrefetchAsync_v2(CUdeviceptr devPtr, size_t count, CUmemLocation location, unsigned int flags, CUstream h)
{
	return sim_stream_check(h, 0);
}
CUresult cuMemPrefetchAsync_v2_ptsz(CUdeviceptr devPtr, size_t count, CUmemLocation location, unsigned int flags,
				    CUstream h)
{
	return sim_stream_check(h, 1);
}

/* ---------------------------------------------------------------- 4. pinned host memory */

CUresult cuMemHostAlloc(void **pp, size_t bytesize, unsigned int Flags)
{
	void *p;
	CUresult r;
	CUR_DEV(dev);

	(void)dev;
	if (!pp || bytesize == 0)
		return CUDA_ERROR_INVALID_VALUE;
	p = mmap(NULL, bytesize, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (p == MAP_FAILED)
		return CUDA_ERROR_OUT_OF_MEMORY;
	madvise(p, bytesize, MADV_HUGEPAGE);
	sim_commit(p, bytesize); /* page-locked memory is resident */
	pthread_mutex_lock(&sim_lock);
	r = pin_add((uintptr_t)p, bytesize, Flags, 1);
	pthread_mutex_unlock(&sim_lock);
	if (r != CUDA_SUCCESS) {
		munmap(p, bytesize);
		return r;
	}
	*pp = p;
	return CUDA_SUCCESS;
}

CUresult cuMemAllocHost_v2(void **pp, size_t bytesize)
{
	return cuMemHostAlloc(pp, bytesize, 0);
}

CUresult cuMemFreeHost(void *p)
{
	struct pin *pn;
	uintptr_t base = 0;
	size_t size = 0;
	int ours;

	if (!sim_inited)
		return CUDA_ERROR_NOT_INITIALIZED;
	if (!p)
		return CUDA_SUCCESS;
	/*
	 * Like cuMemFree, freeing memory that queued work may still read or write
	 * (an Async copy into pinned memory) waits for it first: CUDA never frees
	 * memory in use, and unmapping it under a worker would crash the program.
	 */
	pthread_mutex_lock(&sim_lock);
	pn = pin_find((uintptr_t)p);
	ours = pn && pn->allocated && pn->base == (uintptr_t)p;
	pthread_mutex_unlock(&sim_lock);
	for (int i = 0; ours && i < sim_ndev; i++)
		sim_ctx_sync_dev(i);
	pthread_mutex_lock(&sim_lock);
	pn = pin_find((uintptr_t)p);
	if (pn && pn->allocated && pn->base == (uintptr_t)p) {
		base = pn->base;
		size = pn->size;
		pin_remove(pn);
	}
	pthread_mutex_unlock(&sim_lock);
	if (!size)
		return CUDA_ERROR_INVALID_VALUE;
	munmap((void *)base, size);
	return CUDA_SUCCESS;
}

CUresult cuMemHostRegister_v2(void *p, size_t bytesize, unsigned int Flags)
{
	CUresult r;
	CUR_DEV(dev);

	(void)dev;
	if (!p || bytesize == 0)
		return CUDA_ERROR_INVALID_VALUE;
	pthread_mutex_lock(&sim_lock);
	r = pin_add((uintptr_t)p, bytesize, Flags, 0);
	pthread_mutex_unlock(&sim_lock);
	/* Registering pins the pages, so they are resident afterwards, as with CUDA. */
	if (r == CUDA_SUCCESS && !(Flags & CU_MEMHOSTREGISTER_READ_ONLY))
		sim_commit(p, bytesize);
	return r;
}

CUresult cuMemHostUnregister(void *p)
{
	struct pin *pn;
	CUresult r = CUDA_ERROR_HOST_MEMORY_NOT_REGISTERED;

	if (!sim_inited)
		return CUDA_ERROR_NOT_INITIALIZED;
	pthread_mutex_lock(&sim_lock);
	pn = pin_find((uintptr_t)p);
	if (pn && !pn->allocated && pn->base == (uintptr_t)p) {
		pin_remove(pn);
		r = CUDA_SUCCESS;
	}
	pthread_mutex_unlock(&sim_lock);
	return r;
}

CUresult cuMemHostGetDevicePointer_v2(CUdeviceptr *pdptr, void *p, unsigned int Flags)
{
	CUresult r = CUDA_ERROR_INVALID_VALUE;

	if (!sim_inited)
		return CUDA_ERROR_NOT_INITIALIZED;
	if (!pdptr || Flags)
		return CUDA_ERROR_INVALID_VALUE;
	pthread_mutex_lock(&sim_lock);
	if (pin_find((uintptr_t)p)) {
		*pdptr = (CUdeviceptr)(uintptr_t)p; /* unified addressing: the same address */
		r = CUDA_SUCCESS;
	}
	pthread_mutex_unlock(&sim_lock);
	return r;
}

CUresult cuMemHostGetFlags(unsigned int *pFlags, void *p)
{
	struct pin *pn;
	CUresult r = CUDA_ERROR_INVALID_VALUE;

	if (!sim_inited)
		return CUDA_ERROR_NOT_INITIALIZED;
	if (!pFlags)
		return CUDA_ERROR_INVALID_VALUE;
	pthread_mutex_lock(&sim_lock);
	pn = pin_find((uintptr_t)p);
	if (pn) {
		*pFlags = pn->flags;
		r = CUDA_SUCCESS;
	}
	pthread_mutex_unlock(&sim_lock);
	return r;
}

/* ---------------------------------------------------------------- 5. pools */

CUresult cuDeviceGetDefaultMemPool(CUmemoryPool *pool_out, CUdevice dev)
{
	if (!sim_inited)
		return CUDA_ERROR_NOT_INITIALIZED;
	if (dev < 0 || dev >= sim_ndev)
		return CUDA_ERROR_INVALID_DEVICE;
	if (!pool_out)
		return CUDA_ERROR_INVALID_VALUE;
	*pool_out = &sim_devs[dev].default_pool;
	return CUDA_SUCCESS;
}

CUresult cuDeviceGetMemPool(CUmemoryPool *pool, CUdevice dev)
{
	if (!sim_inited)
		return CUDA_ERROR_NOT_INITIALIZED;
	if (dev < 0 || dev >= sim_ndev)
		return CUDA_ERROR_INVALID_DEVICE;
	if (!pool)
		return CUDA_ERROR_INVALID_VALUE;
	*pool = sim_devs[dev].cur_pool;
	return CUDA_SUCCESS;
}

CUresult cuDeviceSetMemPool(CUdevice dev, CUmemoryPool pool)
{
	if (!sim_inited)
		return CUDA_ERROR_NOT_INITIALIZED;
	if (dev < 0 || dev >= sim_ndev)
		return CUDA_ERROR_INVALID_DEVICE;
	if (!pool || pool->device != dev)
		return CUDA_ERROR_INVALID_VALUE;
	sim_devs[dev].cur_pool = pool;
	return CUDA_SUCCESS;
}

CUresult cuMemPoolCreate(CUmemoryPool *pool, const CUmemPoolProps *poolProps)
{
	struct CUmemPoolHandle_st *p;

	if (!sim_inited)
		return CUDA_ERROR_NOT_INITIALIZED;
	if (!pool || !poolProps || poolProps->location.type != CU_MEM_LOCATION_TYPE_DEVICE ||
	    poolProps->location.id < 0 || poolProps->location.id >= sim_ndev)
		return CUDA_ERROR_INVALID_VALUE;
	p = calloc(1, sizeof(*p));
	if (!p)
		return CUDA_ERROR_OUT_OF_MEMORY;
	p->device = poolProps->location.id;
	*pool = p;
	return CUDA_SUCCESS;
}

CUresult cuMemPoolDestroy(CUmemoryPool pool)
{
	if (!pool || pool->is_default)
		return CUDA_ERROR_INVALID_VALUE;
	/* NOTE: kept allocated: blocks still carved from it point at it. */
	return CUDA_SUCCESS;
}

CUresult cuMemPoolTrimTo(CUmemoryPool pool, size_t minBytesToKeep)
{
	return pool ? CUDA_SUCCESS : CUDA_ERROR_INVALID_VALUE;
}

CUresult cuMemPoolSetAttribute(CUmemoryPool pool, CUmemPool_attribute attr, void *value)
{
	if (!pool || !value)
		return CUDA_ERROR_INVALID_VALUE;
	pthread_mutex_lock(&sim_lock);
	if (attr == CU_MEMPOOL_ATTR_USED_MEM_HIGH || attr == CU_MEMPOOL_ATTR_RESERVED_MEM_HIGH)
		pool->high = pool->used;
	pthread_mutex_unlock(&sim_lock);
	return CUDA_SUCCESS;
}

/* A pool holds exactly what is allocated from it: frees return memory at once. */
CUresult cuMemPoolGetAttribute(CUmemoryPool pool, CUmemPool_attribute attr, void *value)
{
	if (!pool || !value)
		return CUDA_ERROR_INVALID_VALUE;
	pthread_mutex_lock(&sim_lock);
	switch (attr) {
	case CU_MEMPOOL_ATTR_RESERVED_MEM_CURRENT:
	case CU_MEMPOOL_ATTR_USED_MEM_CURRENT:
		*(cuuint64_t *)value = pool->used;
		break;
	case CU_MEMPOOL_ATTR_RESERVED_MEM_HIGH:
	case CU_MEMPOOL_ATTR_USED_MEM_HIGH:
		*(cuuint64_t *)value = pool->high;
		break;
	case CU_MEMPOOL_ATTR_RELEASE_THRESHOLD:
		*(cuuint64_t *)value = 0;
		break;
	default:
		*(int *)value = 0;
		break;
	}
	pthread_mutex_unlock(&sim_lock);
	return CUDA_SUCCESS;
}

/* Used by the stream-ordered allocation calls in drv_allocasync.c. */
CUresult sim_pool_alloc_locked(struct CUmemPoolHandle_st *pool, size_t bytes, CUdeviceptr *out)
{
	struct sim_dev *d = &sim_devs[pool->device];
	struct sim_seg *s = arena_alloc(d, bytes, SIM_ALIGN, SEG_DEVICE);

	if (!s)
		return CUDA_ERROR_OUT_OF_MEMORY;
	s->pool = pool;
	pool->used += s->size;
	if (pool->used > pool->high)
		pool->high = pool->used;
	*out = (CUdeviceptr)(uintptr_t)(d->base + s->off);
	return CUDA_SUCCESS;
}

/* ---------------------------------------------------------------- 6. VMM */

/* A physical allocation: accounted in the device arena (so mem-get-info and
 * fragmentation see it) but backed by its own memfd, which cuMemMap maps.
 * A host allocation (location HOST or HOST_NUMA) is pinned host memory: dev
 * -1, no arena segment. */
struct phys {
	int dev;
	int fd;
	struct sim_seg *seg; /* NULL for host memory */
	size_t size;
	int refs; /* the handle itself + each mapping */
};

struct vrange {
	uintptr_t va;
	size_t size;
	struct phys *ph; /* NULL: a reservation */
	int access;
	struct vrange *next;
};

static struct vrange *reservations, *mappings;

static int vmm_classify(uintptr_t p, size_t n, int *dev)
{
	for (struct vrange *m = mappings; m; m = m->next)
		if (p >= m->va && p < m->va + m->size) {
			if (!m->access || p + n > m->va + m->size)
				return -1;
			if (m->ph->dev < 0) /* host memory, pinned */
				return MEM_PINNED;
			if (dev)
				*dev = m->ph->dev;
			return MEM_DEVICE;
		}
	return MEM_PAGEABLE;
}

static void phys_put(struct phys *ph)
{
	if (--ph->refs == 0) {
		if (ph->seg)
			arena_release(&sim_devs[ph->dev], ph->seg);
		close(ph->fd);
		free(ph);
	}
}

CUresult cuMemGetAllocationGranularity(size_t *granularity, const CUmemAllocationProp *prop,
				       CUmemAllocationGranularity_flags option)
{
	if (!granularity || !prop)
		return CUDA_ERROR_INVALID_VALUE;
	*granularity = SIM_VMM_GRAN;
	return CUDA_SUCCESS;
}

CUresult cuMemCreate(CUmemGenericAllocationHandle *handle, size_t size, const CUmemAllocationProp *prop,
		     unsigned long long flags)
{
	struct phys *ph;
	struct sim_seg *s = NULL;
	int dev;

	if (!sim_inited)
		return CUDA_ERROR_NOT_INITIALIZED;
	if (!handle || !prop || size == 0 || size % SIM_VMM_GRAN)
		return CUDA_ERROR_INVALID_VALUE;
	/*
	 * cuda.h: a CPU allocation has location HOST (id ignored, requestedHandleTypes
	 * 0) or HOST_NUMA (id: the NUMA node, 0 on a system without NUMA, as this
	 * simulated host is); HOST_NUMA_CURRENT gives CUDA_ERROR_INVALID_VALUE.
	 */
	switch (prop->location.type) {
	case CU_MEM_LOCATION_TYPE_DEVICE:
		dev = prop->location.id;
		if (dev < 0 || dev >= sim_ndev)
			return CUDA_ERROR_INVALID_DEVICE;
		break;
	case CU_MEM_LOCATION_TYPE_HOST:
		if (prop->requestedHandleTypes)
			return CUDA_ERROR_INVALID_VALUE;
		dev = -1;
		break;
	case CU_MEM_LOCATION_TYPE_HOST_NUMA:
		if (prop->location.id != 0)
			return CUDA_ERROR_INVALID_VALUE;
		dev = -1;
		break;
	default:
		return CUDA_ERROR_INVALID_VALUE;
	}
	ph = calloc(1, sizeof(*ph));
	if (!ph)
		return CUDA_ERROR_OUT_OF_MEMORY;
	ph->fd = memfd_create("simgpu-phys", MFD_CLOEXEC);
	if (ph->fd < 0 || ftruncate(ph->fd, (off_t)size) != 0) {
		if (ph->fd >= 0)
			close(ph->fd);
		free(ph);
		return CUDA_ERROR_OUT_OF_MEMORY;
	}
	if (dev >= 0) {
		pthread_mutex_lock(&sim_lock);
		s = arena_alloc(&sim_devs[dev], size, SIM_ALIGN, SEG_PHYS);
		pthread_mutex_unlock(&sim_lock);
	}
	if (dev >= 0 && !s) {
		close(ph->fd);
		free(ph);
		return CUDA_ERROR_OUT_OF_MEMORY;
	}
	ph->dev = dev;
	ph->seg = s;
	ph->size = size;
	ph->refs = 1;
	*handle = (CUmemGenericAllocationHandle)(uintptr_t)ph;
	return CUDA_SUCCESS;
}

CUresult cuMemRelease(CUmemGenericAllocationHandle handle)
{
	if (!handle)
		return CUDA_ERROR_INVALID_VALUE;
	pthread_mutex_lock(&sim_lock);
	phys_put((struct phys *)(uintptr_t)handle);
	pthread_mutex_unlock(&sim_lock);
	return CUDA_SUCCESS;
}

CUresult cuMemAddressReserve(CUdeviceptr *ptr, size_t size, size_t alignment, CUdeviceptr addr,
			     unsigned long long flags)
{
	struct vrange *v;
	size_t align = alignment ? alignment : SIM_VMM_GRAN;
	char *p, *a;

	if (!sim_inited)
		return CUDA_ERROR_NOT_INITIALIZED;
	if (!ptr || size == 0 || size % SIM_VMM_GRAN)
		return CUDA_ERROR_INVALID_VALUE;
	p = mmap(NULL, size + align, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
	if (p == MAP_FAILED)
		return CUDA_ERROR_OUT_OF_MEMORY;
	a = (char *)(((uintptr_t)p + align - 1) & ~(uintptr_t)(align - 1));
	if (a > p)
		munmap(p, (size_t)(a - p));
	if (a + size < p + size + align)
		munmap(a + size, (size_t)(p + size + align - (a + size)));
	v = calloc(1, sizeof(*v));
	if (!v) {
		munmap(a, size);
		return CUDA_ERROR_OUT_OF_MEMORY;
	}
	v->va = (uintptr_t)a;
	v->size = size;
	pthread_mutex_lock(&sim_lock);
	v->next = reservations;
	reservations = v;
	pthread_mutex_unlock(&sim_lock);
	*ptr = (CUdeviceptr)(uintptr_t)a;
	return CUDA_SUCCESS;
}

CUresult cuMemAddressFree(CUdeviceptr ptr, size_t size)
{
	CUresult r = CUDA_ERROR_INVALID_VALUE;

	pthread_mutex_lock(&sim_lock);
	for (struct vrange **pv = &reservations; *pv; pv = &(*pv)->next)
		if ((*pv)->va == (uintptr_t)ptr && (*pv)->size == size) {
			struct vrange *v = *pv;
			*pv = v->next;
			munmap((void *)v->va, v->size);
			free(v);
			r = CUDA_SUCCESS;
			break;
		}
	pthread_mutex_unlock(&sim_lock);
	return r;
}

CUresult cuMemMap(CUdeviceptr ptr, size_t size, size_t offset, CUmemGenericAllocationHandle handle,
		  unsigned long long flags)
{
	struct phys *ph = (struct phys *)(uintptr_t)handle;
	struct vrange *res = NULL, *m;
	CUresult r = CUDA_SUCCESS;

	if (!ph || size == 0 || offset + size > ph->size || flags)
		return CUDA_ERROR_INVALID_VALUE;
	pthread_mutex_lock(&sim_lock);
	for (struct vrange *v = reservations; v; v = v->next)
		if (ptr >= v->va && ptr + size <= v->va + v->size)
			res = v;
	for (m = mappings; m && res; m = m->next)
		if (ptr < m->va + m->size && m->va < ptr + size)
			res = NULL;
	if (!res) {
		r = CUDA_ERROR_INVALID_VALUE;
		goto out;
	}
	m = calloc(1, sizeof(*m));
	if (!m) {
		r = CUDA_ERROR_OUT_OF_MEMORY;
		goto out;
	}
	/* Inaccessible until cuMemSetAccess, as on a GPU. */
	if (mmap((void *)(uintptr_t)ptr, size, PROT_NONE, MAP_SHARED | MAP_FIXED, ph->fd, (off_t)offset) ==
	    MAP_FAILED) {
		free(m);
		r = CUDA_ERROR_OUT_OF_MEMORY;
		goto out;
	}
	m->va = (uintptr_t)ptr;
	m->size = size;
	m->ph = ph;
	ph->refs++;
	m->next = mappings;
	mappings = m;
out:
	pthread_mutex_unlock(&sim_lock);
	return r;
}

/*
 * cuMemRetainAllocationHandle: "Given an address addr, returns the allocation
 * handle of the backing memory allocation. The handle is guaranteed to be the
 * same handle value used to map the memory. If the address requested is not
 * mapped, the function will fail. The returned handle must be released with
 * corresponding number of calls to cuMemRelease" (any address of the mapping).
 */
CUresult cuMemRetainAllocationHandle(CUmemGenericAllocationHandle *handle, void *addr)
{
	CUresult r = CUDA_ERROR_INVALID_VALUE;

	if (!handle)
		return CUDA_ERROR_INVALID_VALUE;
	pthread_mutex_lock(&sim_lock);
	for (struct vrange *m = mappings; m; m = m->next)
		if ((uintptr_t)addr >= m->va && (uintptr_t)addr < m->va + m->size) {
			m->ph->refs++;
			*handle = (CUmemGenericAllocationHandle)(uintptr_t)m->ph;
			r = CUDA_SUCCESS;
			break;
		}
	pthread_mutex_unlock(&sim_lock);
	return r;
}

CUresult cuMemSetAccess(CUdeviceptr ptr, size_t size, const CUmemAccessDesc *desc, size_t count)
{
	int prot = PROT_NONE, found = 0;

	if (!desc || count == 0)
		return CUDA_ERROR_INVALID_VALUE;
	for (size_t i = 0; i < count; i++)
		if (desc[i].flags == CU_MEM_ACCESS_FLAGS_PROT_READWRITE)
			prot = PROT_READ | PROT_WRITE;
		else if (desc[i].flags == CU_MEM_ACCESS_FLAGS_PROT_READ && prot == PROT_NONE)
			prot = PROT_READ;
	pthread_mutex_lock(&sim_lock);
	for (struct vrange *m = mappings; m; m = m->next)
		if (m->va >= ptr && m->va + m->size <= ptr + size) {
			mprotect((void *)m->va, m->size, prot);
			m->access = prot != PROT_NONE;
			found = 1;
		}
	pthread_mutex_unlock(&sim_lock);
	return found ? CUDA_SUCCESS : CUDA_ERROR_INVALID_VALUE;
}

CUresult cuMemUnmap(CUdeviceptr ptr, size_t size)
{
	int found = 0;

	pthread_mutex_lock(&sim_lock);
	for (struct vrange **pm = &mappings; *pm;) {
		struct vrange *m = *pm;
		if (m->va >= ptr && m->va + m->size <= ptr + size) {
			*pm = m->next;
			mmap((void *)m->va, m->size, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED | MAP_NORESERVE,
			     -1, 0);
			phys_put(m->ph);
			free(m);
			found = 1;
		} else {
			pm = &m->next;
		}
	}
	pthread_mutex_unlock(&sim_lock);
	return found ? CUDA_SUCCESS : CUDA_ERROR_INVALID_VALUE;
}

CUresult cuMemGetAllocationPropertiesFromHandle(CUmemAllocationProp *prop, CUmemGenericAllocationHandle handle)
{
	struct phys *ph = (struct phys *)(uintptr_t)handle;

	if (!prop || !ph)
		return CUDA_ERROR_INVALID_VALUE;
	memset(prop, 0, sizeof(*prop));
	prop->type = CU_MEM_ALLOCATION_TYPE_PINNED;
	prop->location.type = CU_MEM_LOCATION_TYPE_DEVICE;
	prop->location.id = ph->dev;
	if (ph->dev < 0) {
		prop->location.type = CU_MEM_LOCATION_TYPE_HOST_NUMA;
		prop->location.id = 0;
	}
	return CUDA_SUCCESS;
}

/* CUDA 13's location-based pool calls: device locations only. */
static int loc_dev(const CUmemLocation *l)
{
	return l && l->type == CU_MEM_LOCATION_TYPE_DEVICE && l->id >= 0 && l->id < sim_ndev ? l->id : -1;
}

CUresult cuMemGetDefaultMemPool(CUmemoryPool *pool_out, CUmemLocation *location, CUmemAllocationType type)
{
	int dev = loc_dev(location);

	if (!sim_inited)
		return CUDA_ERROR_NOT_INITIALIZED;
	if (!pool_out || dev < 0)
		return CUDA_ERROR_INVALID_VALUE;
	*pool_out = &sim_devs[dev].default_pool;
	return CUDA_SUCCESS;
}

CUresult cuMemGetMemPool(CUmemoryPool *pool, CUmemLocation *location, CUmemAllocationType type)
{
	int dev = loc_dev(location);

	if (!sim_inited)
		return CUDA_ERROR_NOT_INITIALIZED;
	if (!pool || dev < 0)
		return CUDA_ERROR_INVALID_VALUE;
	*pool = sim_devs[dev].cur_pool;
	return CUDA_SUCCESS;
}

CUresult cuMemSetMemPool(CUmemLocation *location, CUmemAllocationType type, CUmemoryPool pool)
{
	int dev = loc_dev(location);

	if (dev < 0)
		return CUDA_ERROR_INVALID_VALUE;
	return cuDeviceSetMemPool(dev, pool);
}
