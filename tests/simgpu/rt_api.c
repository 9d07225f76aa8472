/*
 * rt_api.c - the simulated CUDA runtime's work API, each call one (or a few)
 * driver calls through the pointers cuGetProcAddress handed to rt_core.c.
 *
 *   1. device memory, pools, managed memory, mem-get-info
 *   2. pinned host memory, pointer attributes
 *   3. copies (1D, 2D, 3D, peer; sync and async; _ptds/_ptsz flavours)
 *   4. memsets
 *   5. streams
 *   6. events
 *   7. launches and kernel names
 *   8. stream capture and graphs
 *   9. symbols (host variables: there is no nvcc)
 *  10. small calls programs expect (attributes, occupancy, prefetch, profiler)
 *
 * Which driver function each runtime call uses follows NVIDIA's runtime, as far as
 * its request list shows (e.g. cudaMemcpy2D uses cuMemcpy2DUnaligned, cudaMallocHost
 * uses cuMemHostAlloc); the _ptds/_ptsz entry points use the pointers requested with
 * the per-thread-default-stream flag.
 */
#include "rt.h"
#include <cudaProfilerTypedefs.h>

#include <string.h>

#define DP(p) ((CUdeviceptr)(uintptr_t)(p))

/*
 * A runtime call that is one driver call, and its per-thread twin name_pt (pt:
 * ptds or ptsz), which calls the pointer requested with the per-thread flag at
 * version ptver (typed like the plain one). params and args are the parenthesised
 * parameter and driver argument lists.
 * NOTE: a macro, as C has no other way to give one body two names.
 */
#define RT_CALL_PT(name, pt, params, drv, ver, ptver, args)                                                            \
	cudaError_t name params                                                                                        \
	{                                                                                                              \
		ENTER();                                                                                               \
		return simrt_ret(DRV(drv, ver) args);                                                                  \
	}                                                                                                              \
	cudaError_t name##_##pt params                                                                                 \
	{                                                                                                              \
		ENTER();                                                                                               \
		return simrt_ret(DRVP(drv, ptver, ver) args);                                                          \
	}

/* ---------------------------------------------------------------- 1. device memory */

/* Hands the driver's allocation to the caller: *p, or NULL when it failed. */
static cudaError_t give_ptr(void **out, const CUdeviceptr *p, CUresult r)
{
	*out = r == CUDA_SUCCESS ? (void *)(uintptr_t)*p : NULL;
	return simrt_ret(r);
}

cudaError_t cudaMalloc(void **devPtr, size_t size)
{
	CUdeviceptr p = 0;

	ENTER();
	if (!devPtr)
		return simrt_err(cudaErrorInvalidValue);
	if (size == 0) {
		*devPtr = NULL;
		return cudaSuccess;
	}
	return give_ptr(devPtr, &p, DRV(cuMemAlloc, 3020)(&p, size));
}

cudaError_t cudaMallocPitch(void **devPtr, size_t *pitch, size_t width, size_t height)
{
	CUdeviceptr p = 0;

	ENTER();
	if (!devPtr)
		return simrt_err(cudaErrorInvalidValue);
	return give_ptr(devPtr, &p, DRV(cuMemAllocPitch, 3020)(&p, pitch, width, height, 4));
}

cudaError_t cudaMallocManaged(void **devPtr, size_t size, unsigned int flags)
{
	CUdeviceptr p = 0;

	ENTER();
	if (!devPtr)
		return simrt_err(cudaErrorInvalidValue);
	return give_ptr(devPtr, &p, DRV(cuMemAllocManaged, 6000)(&p, size, flags));
}

cudaError_t cudaFree(void *devPtr)
{
	ENTER();
	if (!devPtr)
		return cudaSuccess; /* cudaFree(0): the classic way to initialise the context */
	return simrt_ret(DRV(cuMemFree, 3020)(DP(devPtr)));
}

cudaError_t cudaMemGetInfo(size_t *free, size_t *total)
{
	ENTER();
	return simrt_ret(DRV(cuMemGetInfo, 3020)(free, total));
}

cudaError_t cudaMallocAsync(void **devPtr, size_t size, cudaStream_t hStream)
{
	CUdeviceptr p = 0;

	ENTER();
	if (!devPtr)
		return simrt_err(cudaErrorInvalidValue);
	return give_ptr(devPtr, &p, DRV(cuMemAllocAsync, 11020)(&p, size, hStream));
}

cudaError_t cudaMallocAsync_ptsz(void **devPtr, size_t size, cudaStream_t hStream)
{
	CUdeviceptr p = 0;

	ENTER();
	if (!devPtr)
		return simrt_err(cudaErrorInvalidValue);
	return give_ptr(devPtr, &p, DRVP(cuMemAllocAsync, 11020, 11020)(&p, size, hStream));
}

cudaError_t cudaMallocFromPoolAsync(void **ptr, size_t size, cudaMemPool_t memPool, cudaStream_t stream)
{
	CUdeviceptr p = 0;

	ENTER();
	if (!ptr)
		return simrt_err(cudaErrorInvalidValue);
	return give_ptr(ptr, &p, DRV(cuMemAllocFromPoolAsync, 11020)(&p, size, memPool, stream));
}

cudaError_t cudaMallocFromPoolAsync_ptsz(void **ptr, size_t size, cudaMemPool_t memPool, cudaStream_t stream)
{
	CUdeviceptr p = 0;

	ENTER();
	if (!ptr)
		return simrt_err(cudaErrorInvalidValue);
	return give_ptr(ptr, &p, DRVP(cuMemAllocFromPoolAsync, 11020, 11020)(&p, size, memPool, stream));
}

RT_CALL_PT(cudaFreeAsync, ptsz, (void *devPtr, cudaStream_t hStream), cuMemFreeAsync, 11020, 11020,
	   (DP(devPtr), hStream))

cudaError_t cudaDeviceGetDefaultMemPool(cudaMemPool_t *memPool, int device)
{
	ENTER();
	return simrt_ret(DRV(cuDeviceGetDefaultMemPool, 11020)(memPool, device));
}

cudaError_t cudaDeviceGetMemPool(cudaMemPool_t *memPool, int device)
{
	ENTER();
	return simrt_ret(DRV(cuDeviceGetMemPool, 11020)(memPool, device));
}

cudaError_t cudaDeviceSetMemPool(int device, cudaMemPool_t memPool)
{
	ENTER();
	return simrt_ret(DRV(cuDeviceSetMemPool, 11020)(device, memPool));
}

/* cudaMemPoolProps and CUmemPoolProps have the same layout. */
cudaError_t cudaMemPoolCreate(cudaMemPool_t *memPool, const struct cudaMemPoolProps *poolProps)
{
	ENTER();
	return simrt_ret(DRV(cuMemPoolCreate, 11020)(memPool, (const CUmemPoolProps *)poolProps));
}

cudaError_t cudaMemPoolDestroy(cudaMemPool_t memPool)
{
	ENTER();
	return simrt_ret(DRV(cuMemPoolDestroy, 11020)(memPool));
}

cudaError_t cudaMemPoolTrimTo(cudaMemPool_t memPool, size_t minBytesToKeep)
{
	ENTER();
	return simrt_ret(DRV(cuMemPoolTrimTo, 11020)(memPool, minBytesToKeep));
}

cudaError_t cudaMemPoolSetAttribute(cudaMemPool_t memPool, enum cudaMemPoolAttr attr, void *value)
{
	ENTER();
	return simrt_ret(DRV(cuMemPoolSetAttribute, 11020)(memPool, (CUmemPool_attribute)attr, value));
}

cudaError_t cudaMemPoolGetAttribute(cudaMemPool_t memPool, enum cudaMemPoolAttr attr, void *value)
{
	ENTER();
	return simrt_ret(DRV(cuMemPoolGetAttribute, 11020)(memPool, (CUmemPool_attribute)attr, value));
}

/* ---------------------------------------------------------------- 2. pinned host memory */

cudaError_t cudaHostAlloc(void **pHost, size_t size, unsigned int flags)
{
	ENTER();
	if (!pHost)
		return simrt_err(cudaErrorInvalidValue);
	/* cudaHostAlloc* flags have the values of CU_MEMHOSTALLOC_*. */
	return simrt_ret(DRV(cuMemHostAlloc, 2020)(pHost, size, flags));
}

cudaError_t cudaMallocHost(void **ptr, size_t size)
{
	return cudaHostAlloc(ptr, size, cudaHostAllocDefault);
}

cudaError_t cudaFreeHost(void *ptr)
{
	ENTER();
	return simrt_ret(DRV(cuMemFreeHost, 2000)(ptr));
}

cudaError_t cudaHostRegister(void *ptr, size_t size, unsigned int flags)
{
	ENTER();
	return simrt_ret(DRV(cuMemHostRegister, 6050)(ptr, size, flags));
}

cudaError_t cudaHostUnregister(void *ptr)
{
	ENTER();
	return simrt_ret(DRV(cuMemHostUnregister, 4000)(ptr));
}

cudaError_t cudaHostGetDevicePointer(void **pDevice, void *pHost, unsigned int flags)
{
	CUdeviceptr p = 0;
	CUresult r;

	ENTER();
	if (!pDevice)
		return simrt_err(cudaErrorInvalidValue);
	r = DRV(cuMemHostGetDevicePointer, 3020)(&p, pHost, flags);
	*pDevice = (void *)(uintptr_t)p;
	return simrt_ret(r);
}

cudaError_t cudaHostGetFlags(unsigned int *pFlags, void *pHost)
{
	ENTER();
	return simrt_ret(DRV(cuMemHostGetFlags, 2030)(pFlags, pHost));
}

/* As CUDA 11+: memory CUDA does not know is cudaMemoryTypeUnregistered, not an error. */
cudaError_t cudaPointerGetAttributes(struct cudaPointerAttributes *attributes, const void *ptr)
{
	CUpointer_attribute q[] = {CU_POINTER_ATTRIBUTE_MEMORY_TYPE, CU_POINTER_ATTRIBUTE_IS_MANAGED,
				   CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL, CU_POINTER_ATTRIBUTE_DEVICE_POINTER,
				   CU_POINTER_ATTRIBUTE_HOST_POINTER};
	unsigned int type = 0, managed = 0;
	int ordinal = -2;
	CUdeviceptr dptr = 0;
	void *hptr = NULL;
	void *data[] = {&type, &managed, &ordinal, &dptr, &hptr};
	CUresult r;

	ENTER();
	if (!attributes)
		return simrt_err(cudaErrorInvalidValue);
	r = DRV(cuPointerGetAttributes, 7000)(5, q, data, DP(ptr));
	if (r != CUDA_SUCCESS)
		return simrt_ret(r);
	memset(attributes, 0, sizeof(*attributes));
	if (managed) {
		attributes->type = cudaMemoryTypeManaged;
	} else if (type == CU_MEMORYTYPE_DEVICE) {
		attributes->type = cudaMemoryTypeDevice;
	} else if (type == CU_MEMORYTYPE_HOST) {
		attributes->type = cudaMemoryTypeHost;
	} else {
		attributes->type = cudaMemoryTypeUnregistered;
		attributes->device = -2;
		attributes->hostPointer = (void *)ptr;
		return cudaSuccess;
	}
	attributes->device = ordinal;
	attributes->devicePointer = (void *)(uintptr_t)dptr;
	attributes->hostPointer = hptr;
	return cudaSuccess;
}

/* ---------------------------------------------------------------- 3. copies */

static cudaError_t memcpy_(void *dst, const void *src, size_t count, enum cudaMemcpyKind kind, int pt)
{
	CUresult r;

	ENTER();
	if (count == 0)
		return cudaSuccess;
	switch (kind) {
	case cudaMemcpyHostToDevice:
		r = pt ? DRVP(cuMemcpyHtoD, 7000, 3020)(DP(dst), src, count)
		       : DRV(cuMemcpyHtoD, 3020)(DP(dst), src, count);
		break;
	case cudaMemcpyDeviceToHost:
		r = pt ? DRVP(cuMemcpyDtoH, 7000, 3020)(dst, DP(src), count)
		       : DRV(cuMemcpyDtoH, 3020)(dst, DP(src), count);
		break;
	case cudaMemcpyDeviceToDevice:
		r = pt ? DRVP(cuMemcpyDtoD, 7000, 3020)(DP(dst), DP(src), count)
		       : DRV(cuMemcpyDtoD, 3020)(DP(dst), DP(src), count);
		break;
	case cudaMemcpyHostToHost:
	case cudaMemcpyDefault:
		r = pt ? DRVP(cuMemcpy, 7000, 4000)(DP(dst), DP(src), count)
		       : DRV(cuMemcpy, 4000)(DP(dst), DP(src), count);
		break;
	default:
		return simrt_err(cudaErrorInvalidMemcpyDirection);
	}
	return simrt_ret(r);
}

cudaError_t cudaMemcpy(void *dst, const void *src, size_t count, enum cudaMemcpyKind kind)
{
	return memcpy_(dst, src, count, kind, 0);
}

cudaError_t cudaMemcpy_ptds(void *dst, const void *src, size_t count, enum cudaMemcpyKind kind)
{
	return memcpy_(dst, src, count, kind, 1);
}

static cudaError_t memcpy_async(void *dst, const void *src, size_t count, enum cudaMemcpyKind kind, cudaStream_t s,
				int pt)
{
	CUresult r;

	ENTER();
	if (count == 0)
		return cudaSuccess;
	switch (kind) {
	case cudaMemcpyHostToDevice:
		r = pt ? DRVP(cuMemcpyHtoDAsync, 7000, 3020)(DP(dst), src, count, s)
		       : DRV(cuMemcpyHtoDAsync, 3020)(DP(dst), src, count, s);
		break;
	case cudaMemcpyDeviceToHost:
		r = pt ? DRVP(cuMemcpyDtoHAsync, 7000, 3020)(dst, DP(src), count, s)
		       : DRV(cuMemcpyDtoHAsync, 3020)(dst, DP(src), count, s);
		break;
	case cudaMemcpyDeviceToDevice:
		r = pt ? DRVP(cuMemcpyDtoDAsync, 7000, 3020)(DP(dst), DP(src), count, s)
		       : DRV(cuMemcpyDtoDAsync, 3020)(DP(dst), DP(src), count, s);
		break;
	case cudaMemcpyHostToHost:
	case cudaMemcpyDefault:
		r = pt ? DRVP(cuMemcpyAsync, 7000, 4000)(DP(dst), DP(src), count, s)
		       : DRV(cuMemcpyAsync, 4000)(DP(dst), DP(src), count, s);
		break;
	default:
		return simrt_err(cudaErrorInvalidMemcpyDirection);
	}
	return simrt_ret(r);
}

cudaError_t cudaMemcpyAsync(void *dst, const void *src, size_t count, enum cudaMemcpyKind kind, cudaStream_t stream)
{
	return memcpy_async(dst, src, count, kind, stream, 0);
}

cudaError_t cudaMemcpyAsync_ptsz(void *dst, const void *src, size_t count, enum cudaMemcpyKind kind,
				 cudaStream_t stream)
{
	return memcpy_async(dst, src, count, kind, stream, 1);
}

/* Memory types of the two sides of a copy of the given kind. */
static void kind_types(enum cudaMemcpyKind kind, CUmemorytype *dt, CUmemorytype *st)
{
	*dt = kind == cudaMemcpyHostToDevice || kind == cudaMemcpyDeviceToDevice ? CU_MEMORYTYPE_DEVICE
	      : kind == cudaMemcpyDefault					 ? CU_MEMORYTYPE_UNIFIED
										 : CU_MEMORYTYPE_HOST;
	*st = kind == cudaMemcpyDeviceToHost || kind == cudaMemcpyDeviceToDevice ? CU_MEMORYTYPE_DEVICE
	      : kind == cudaMemcpyDefault					 ? CU_MEMORYTYPE_UNIFIED
										 : CU_MEMORYTYPE_HOST;
}

static cudaError_t memcpy2d(void *dst, size_t dpitch, const void *src, size_t spitch, size_t width, size_t height,
			    enum cudaMemcpyKind kind, cudaStream_t s, int async, int pt)
{
	CUDA_MEMCPY2D c;
	CUresult r;

	ENTER();
	if (kind > cudaMemcpyDefault)
		return simrt_err(cudaErrorInvalidMemcpyDirection);
	memset(&c, 0, sizeof(c));
	kind_types(kind, &c.dstMemoryType, &c.srcMemoryType);
	c.dstHost = dst;
	c.dstDevice = DP(dst);
	c.dstPitch = dpitch;
	c.srcHost = src;
	c.srcDevice = DP(src);
	c.srcPitch = spitch;
	c.WidthInBytes = width;
	c.Height = height;
	if (async)
		r = pt ? DRVP(cuMemcpy2DAsync, 7000, 3020)(&c, s) : DRV(cuMemcpy2DAsync, 3020)(&c, s);
	else
		r = pt ? DRVP(cuMemcpy2DUnaligned, 7000, 3020)(&c) : DRV(cuMemcpy2DUnaligned, 3020)(&c);
	return simrt_ret(r);
}

cudaError_t cudaMemcpy2D(void *dst, size_t dpitch, const void *src, size_t spitch, size_t width, size_t height,
			 enum cudaMemcpyKind kind)
{
	return memcpy2d(dst, dpitch, src, spitch, width, height, kind, NULL, 0, 0);
}

cudaError_t cudaMemcpy2D_ptds(void *dst, size_t dpitch, const void *src, size_t spitch, size_t width, size_t height,
			      enum cudaMemcpyKind kind)
{
	return memcpy2d(dst, dpitch, src, spitch, width, height, kind, NULL, 0, 1);
}

cudaError_t cudaMemcpy2DAsync(void *dst, size_t dpitch, const void *src, size_t spitch, size_t width, size_t height,
			      enum cudaMemcpyKind kind, cudaStream_t stream)
{
	return memcpy2d(dst, dpitch, src, spitch, width, height, kind, stream, 1, 0);
}

cudaError_t cudaMemcpy2DAsync_ptsz(void *dst, size_t dpitch, const void *src, size_t spitch, size_t width,
				   size_t height, enum cudaMemcpyKind kind, cudaStream_t stream)
{
	return memcpy2d(dst, dpitch, src, spitch, width, height, kind, stream, 1, 1);
}

static cudaError_t memcpy3d(const struct cudaMemcpy3DParms *p, cudaStream_t s, int async, int pt)
{
	CUDA_MEMCPY3D c;
	CUresult r;

	ENTER();
	if (!p || p->kind > cudaMemcpyDefault)
		return simrt_err(cudaErrorInvalidValue);
	if (p->srcArray || p->dstArray)
		return simrt_err(cudaErrorNotSupported); /* CUDA arrays are not simulated */
	memset(&c, 0, sizeof(c));
	kind_types(p->kind, &c.dstMemoryType, &c.srcMemoryType);
	c.srcXInBytes = p->srcPos.x;
	c.srcY = p->srcPos.y;
	c.srcZ = p->srcPos.z;
	c.srcHost = p->srcPtr.ptr;
	c.srcDevice = DP(p->srcPtr.ptr);
	c.srcPitch = p->srcPtr.pitch;
	c.srcHeight = p->srcPtr.ysize;
	c.dstXInBytes = p->dstPos.x;
	c.dstY = p->dstPos.y;
	c.dstZ = p->dstPos.z;
	c.dstHost = p->dstPtr.ptr;
	c.dstDevice = DP(p->dstPtr.ptr);
	c.dstPitch = p->dstPtr.pitch;
	c.dstHeight = p->dstPtr.ysize;
	c.WidthInBytes = p->extent.width;
	c.Height = p->extent.height;
	c.Depth = p->extent.depth;
	if (async)
		r = pt ? DRVP(cuMemcpy3DAsync, 7000, 3020)(&c, s) : DRV(cuMemcpy3DAsync, 3020)(&c, s);
	else
		r = pt ? DRVP(cuMemcpy3D, 7000, 3020)(&c) : DRV(cuMemcpy3D, 3020)(&c);
	return simrt_ret(r);
}

cudaError_t cudaMemcpy3D(const struct cudaMemcpy3DParms *p)
{
	return memcpy3d(p, NULL, 0, 0);
}

cudaError_t cudaMemcpy3D_ptds(const struct cudaMemcpy3DParms *p)
{
	return memcpy3d(p, NULL, 0, 1);
}

cudaError_t cudaMemcpy3DAsync(const struct cudaMemcpy3DParms *p, cudaStream_t stream)
{
	return memcpy3d(p, stream, 1, 0);
}

cudaError_t cudaMemcpy3DAsync_ptsz(const struct cudaMemcpy3DParms *p, cudaStream_t stream)
{
	return memcpy3d(p, stream, 1, 1);
}

static cudaError_t peer(void *dst, int dstDevice, const void *src, int srcDevice, size_t count, cudaStream_t s,
			int async)
{
	CUcontext dc, sc;
	CUresult r;

	ENTER();
	if ((r = DRV(cuDevicePrimaryCtxRetain, 7000)(&dc, dstDevice)) != CUDA_SUCCESS ||
	    (r = DRV(cuDevicePrimaryCtxRetain, 7000)(&sc, srcDevice)) != CUDA_SUCCESS)
		return simrt_ret(r);
	if (async)
		r = DRV(cuMemcpyPeerAsync, 4000)(DP(dst), dc, DP(src), sc, count, s);
	else
		r = DRV(cuMemcpyPeer, 4000)(DP(dst), dc, DP(src), sc, count);
	return simrt_ret(r);
}

cudaError_t cudaMemcpyPeer(void *dst, int dstDevice, const void *src, int srcDevice, size_t count)
{
	return peer(dst, dstDevice, src, srcDevice, count, NULL, 0);
}

cudaError_t cudaMemcpyPeerAsync(void *dst, int dstDevice, const void *src, int srcDevice, size_t count,
				cudaStream_t stream)
{
	return peer(dst, dstDevice, src, srcDevice, count, stream, 1);
}

/*
 * Batches (CUDA 13's signature: no failIdx): the attributes converted to the
 * driver's, the copies handed to cuMemcpyBatchAsync as requested at 13000.
 * A batch of more than 64 attribute sets is refused here (the simulator's
 * bound, not CUDA's).
 */
static cudaError_t batch(void *const *dsts, const void *const *srcs, const size_t *sizes, size_t count,
			 struct cudaMemcpyAttributes *attrs, size_t *attrsIdxs, size_t numAttrs, cudaStream_t stream,
			 int pt)
{
	CUmemcpyAttributes a[64];

	ENTER();
	if (numAttrs > 64 || (numAttrs && !attrs))
		return simrt_err(cudaErrorInvalidValue);
	for (size_t k = 0; k < numAttrs; k++) {
		memset(&a[k], 0, sizeof(a[k]));
		a[k].srcAccessOrder = (CUmemcpySrcAccessOrder)attrs[k].srcAccessOrder;
		a[k].srcLocHint.type = (CUmemLocationType)attrs[k].srcLocHint.type;
		a[k].srcLocHint.id = attrs[k].srcLocHint.id;
		a[k].dstLocHint.type = (CUmemLocationType)attrs[k].dstLocHint.type;
		a[k].dstLocHint.id = attrs[k].dstLocHint.id;
		a[k].flags = attrs[k].flags;
	}
	CUdeviceptr *d = (CUdeviceptr *)(uintptr_t)dsts, *s = (CUdeviceptr *)(uintptr_t)srcs;
	size_t *n = (size_t *)(uintptr_t)sizes;
	_Static_assert(sizeof(CUdeviceptr) == sizeof(void *), "a device pointer is a pointer");
	CUresult r = pt ? DRVP(cuMemcpyBatchAsync, 13000, 13000)(d, s, n, count, numAttrs ? a : NULL, attrsIdxs,
								   numAttrs, stream)
			: DRV(cuMemcpyBatchAsync, 13000)(d, s, n, count, numAttrs ? a : NULL, attrsIdxs, numAttrs,
							 stream);
	return simrt_ret(r);
}

cudaError_t cudaMemcpyBatchAsync(void *const *dsts, const void *const *srcs, const size_t *sizes, size_t count,
				 struct cudaMemcpyAttributes *attrs, size_t *attrsIdxs, size_t numAttrs,
				 cudaStream_t stream)
{
	return batch(dsts, srcs, sizes, count, attrs, attrsIdxs, numAttrs, stream, 0);
}

cudaError_t cudaMemcpyBatchAsync_ptsz(void *const *dsts, const void *const *srcs, const size_t *sizes, size_t count,
				      struct cudaMemcpyAttributes *attrs, size_t *attrsIdxs, size_t numAttrs,
				      cudaStream_t stream)
{
	return batch(dsts, srcs, sizes, count, attrs, attrsIdxs, numAttrs, stream, 1);
}

/* ---------------------------------------------------------------- 4. memsets */

RT_CALL_PT(cudaMemset, ptds, (void *devPtr, int value, size_t count), cuMemsetD8, 3020, 7000,
	   (DP(devPtr), (unsigned char)value, count))

RT_CALL_PT(cudaMemsetAsync, ptsz, (void *devPtr, int value, size_t count, cudaStream_t stream), cuMemsetD8Async, 3020,
	   7000, (DP(devPtr), (unsigned char)value, count, stream))

RT_CALL_PT(cudaMemset2D, ptds, (void *devPtr, size_t pitch, int value, size_t width, size_t height), cuMemsetD2D8, 3020,
	   7000, (DP(devPtr), pitch, (unsigned char)value, width, height))

RT_CALL_PT(cudaMemset2DAsync, ptsz,
	   (void *devPtr, size_t pitch, int value, size_t width, size_t height, cudaStream_t stream), cuMemsetD2D8Async,
	   3020, 7000, (DP(devPtr), pitch, (unsigned char)value, width, height, stream))

/* ---------------------------------------------------------------- 5. streams */

cudaError_t cudaStreamCreate(cudaStream_t *pStream)
{
	ENTER();
	return simrt_ret(DRV(cuStreamCreate, 2000)(pStream, CU_STREAM_DEFAULT));
}

cudaError_t cudaStreamCreateWithFlags(cudaStream_t *pStream, unsigned int flags)
{
	ENTER();
	return simrt_ret(DRV(cuStreamCreate, 2000)(pStream, flags));
}

cudaError_t cudaStreamCreateWithPriority(cudaStream_t *pStream, unsigned int flags, int priority)
{
	ENTER();
	return simrt_ret(DRV(cuStreamCreateWithPriority, 5050)(pStream, flags, priority));
}

cudaError_t cudaStreamDestroy(cudaStream_t stream)
{
	ENTER();
	return simrt_ret(DRV(cuStreamDestroy, 4000)(stream));
}

RT_CALL_PT(cudaStreamSynchronize, ptsz, (cudaStream_t stream), cuStreamSynchronize, 2000, 7000, (stream))

/* cudaErrorNotReady is an answer, not an error: it does not become the last error. */
static cudaError_t query_ret(CUresult r)
{
	return r == CUDA_ERROR_NOT_READY ? cudaErrorNotReady : simrt_ret(r);
}

cudaError_t cudaStreamQuery(cudaStream_t stream)
{
	ENTER();
	return query_ret(DRV(cuStreamQuery, 2000)(stream));
}

cudaError_t cudaStreamQuery_ptsz(cudaStream_t stream)
{
	ENTER();
	return query_ret(DRVP(cuStreamQuery, 7000, 2000)(stream));
}

RT_CALL_PT(cudaStreamWaitEvent, ptsz, (cudaStream_t stream, cudaEvent_t event, unsigned int flags), cuStreamWaitEvent,
	   3020, 7000, (stream, event, flags))

/* Same ABI: (stream, status, userData) with enum statuses of equal values. */
RT_CALL_PT(cudaStreamAddCallback, ptsz,
	   (cudaStream_t stream, cudaStreamCallback_t callback, void *userData, unsigned int flags),
	   cuStreamAddCallback, 5000, 7000, (stream, (CUstreamCallback)(void *)callback, userData, flags))

RT_CALL_PT(cudaLaunchHostFunc, ptsz, (cudaStream_t stream, cudaHostFn_t fn, void *userData), cuLaunchHostFunc, 10000,
	   10000, (stream, fn, userData))

RT_CALL_PT(cudaStreamGetFlags, ptsz, (cudaStream_t hStream, unsigned int *flags), cuStreamGetFlags, 5050, 7000,
	   (hStream, flags))

RT_CALL_PT(cudaStreamGetPriority, ptsz, (cudaStream_t hStream, int *priority), cuStreamGetPriority, 5050, 7000,
	   (hStream, priority))

RT_CALL_PT(cudaStreamGetId, ptsz, (cudaStream_t hStream, unsigned long long *streamId), cuStreamGetId, 12000, 12000,
	   (hStream, streamId))

RT_CALL_PT(cudaStreamGetDevice, ptsz, (cudaStream_t hStream, int *device), cuStreamGetDevice, 12080, 12080,
	   (hStream, device))

/* ---------------------------------------------------------------- 6. events */

cudaError_t cudaEventCreate(cudaEvent_t *event)
{
	ENTER();
	return simrt_ret(DRV(cuEventCreate, 2000)(event, CU_EVENT_DEFAULT));
}

cudaError_t cudaEventCreateWithFlags(cudaEvent_t *event, unsigned int flags)
{
	ENTER();
	return simrt_ret(DRV(cuEventCreate, 2000)(event, flags));
}

cudaError_t cudaEventDestroy(cudaEvent_t event)
{
	ENTER();
	return simrt_ret(DRV(cuEventDestroy, 4000)(event));
}

RT_CALL_PT(cudaEventRecord, ptsz, (cudaEvent_t event, cudaStream_t stream), cuEventRecord, 2000, 7000, (event, stream))

RT_CALL_PT(cudaEventRecordWithFlags, ptsz, (cudaEvent_t event, cudaStream_t stream, unsigned int flags),
	   cuEventRecordWithFlags, 11010, 11010, (event, stream, flags))

cudaError_t cudaEventQuery(cudaEvent_t event)
{
	ENTER();
	return query_ret(DRV(cuEventQuery, 2000)(event));
}

cudaError_t cudaEventSynchronize(cudaEvent_t event)
{
	ENTER();
	return simrt_ret(DRV(cuEventSynchronize, 2000)(event));
}

cudaError_t cudaEventElapsedTime(float *ms, cudaEvent_t start, cudaEvent_t end)
{
	ENTER();
	return simrt_ret(DRV(cuEventElapsedTime, 12080)(ms, start, end));
}

/* ---------------------------------------------------------------- 7. launches */

/* A kernel runs its host function: the runtime launches the stub's CUkernel, as
 * NVIDIA's launches the kernel cuLibraryGetKernel gave for the stub's registered
 * device function (drv_launch.c, CUkernel handles). */
static cudaError_t launch(const void *func, dim3 g, dim3 b, void **args, size_t shmem, cudaStream_t s, int coop, int pt)
{
	CUfunction f;
	CUresult r;

	ENTER();
	if (!func)
		return simrt_err(cudaErrorInvalidDeviceFunction);
	f = simrt_kernel_of(func);
	if (coop)
		r = pt ? DRVP(cuLaunchCooperativeKernel, 9000, 9000)(f, g.x, g.y, g.z, b.x, b.y, b.z,
								     (unsigned int)shmem, s, args)
		       : DRV(cuLaunchCooperativeKernel, 9000)(f, g.x, g.y, g.z, b.x, b.y, b.z, (unsigned int)shmem, s,
							      args);
	else
		r = pt ? DRVP(cuLaunchKernel, 7000, 4000)(f, g.x, g.y, g.z, b.x, b.y, b.z, (unsigned int)shmem, s, args,
							  NULL)
		       : DRV(cuLaunchKernel, 4000)(f, g.x, g.y, g.z, b.x, b.y, b.z, (unsigned int)shmem, s, args, NULL);
	if (r == CUDA_ERROR_INVALID_VALUE)
		return simrt_err(cudaErrorInvalidConfiguration);
	return simrt_ret(r);
}

cudaError_t cudaLaunchKernel(const void *func, dim3 gridDim, dim3 blockDim, void **args, size_t sharedMem,
			     cudaStream_t stream)
{
	return launch(func, gridDim, blockDim, args, sharedMem, stream, 0, 0);
}

cudaError_t cudaLaunchKernel_ptsz(const void *func, dim3 gridDim, dim3 blockDim, void **args, size_t sharedMem,
				  cudaStream_t stream)
{
	return launch(func, gridDim, blockDim, args, sharedMem, stream, 0, 1);
}

cudaError_t cudaLaunchCooperativeKernel(const void *func, dim3 gridDim, dim3 blockDim, void **args, size_t sharedMem,
					cudaStream_t stream)
{
	return launch(func, gridDim, blockDim, args, sharedMem, stream, 1, 0);
}

cudaError_t cudaLaunchCooperativeKernel_ptsz(const void *func, dim3 gridDim, dim3 blockDim, void **args,
					     size_t sharedMem, cudaStream_t stream)
{
	return launch(func, gridDim, blockDim, args, sharedMem, stream, 1, 1);
}

static cudaError_t launch_ex(const cudaLaunchConfig_t *config, const void *func, void **args, int pt)
{
	CUlaunchConfig c;
	CUresult r;

	ENTER();
	if (!config || !func)
		return simrt_err(cudaErrorInvalidValue);
	memset(&c, 0, sizeof(c));
	c.gridDimX = config->gridDim.x;
	c.gridDimY = config->gridDim.y;
	c.gridDimZ = config->gridDim.z;
	c.blockDimX = config->blockDim.x;
	c.blockDimY = config->blockDim.y;
	c.blockDimZ = config->blockDim.z;
	c.sharedMemBytes = (unsigned int)config->dynamicSmemBytes;
	c.hStream = config->stream;
	/* cudaLaunchAttribute and CUlaunchAttribute have the same layout. */
	c.attrs = (CUlaunchAttribute *)config->attrs;
	c.numAttrs = config->numAttrs;
	r = pt ? DRVP(cuLaunchKernelEx, 11060, 11060)(&c, simrt_kernel_of(func), args, NULL)
	       : DRV(cuLaunchKernelEx, 11060)(&c, simrt_kernel_of(func), args, NULL);
	if (r == CUDA_ERROR_INVALID_VALUE)
		return simrt_err(cudaErrorInvalidConfiguration);
	return simrt_ret(r);
}

cudaError_t cudaLaunchKernelExC(const cudaLaunchConfig_t *config, const void *func, void **args)
{
	return launch_ex(config, func, args, 0);
}

cudaError_t cudaLaunchKernelExC_ptsz(const cudaLaunchConfig_t *config, const void *func, void **args)
{
	return launch_ex(config, func, args, 1);
}

cudaError_t cudaFuncGetName(const char **name, const void *func)
{
	ENTER();
	return simrt_ret(DRV(cuFuncGetName, 12030)(name, (CUfunction)(uintptr_t)func));
}

/* ---------------------------------------------------------------- 8. capture and graphs */

RT_CALL_PT(cudaStreamBeginCapture, ptsz, (cudaStream_t stream, enum cudaStreamCaptureMode mode), cuStreamBeginCapture,
	   10010, 10010, (stream, (CUstreamCaptureMode)mode))

RT_CALL_PT(cudaStreamEndCapture, ptsz, (cudaStream_t stream, cudaGraph_t *pGraph), cuStreamEndCapture, 10000, 10000,
	   (stream, pGraph))

RT_CALL_PT(cudaStreamIsCapturing, ptsz, (cudaStream_t stream, enum cudaStreamCaptureStatus *pCaptureStatus),
	   cuStreamIsCapturing, 10000, 10000, (stream, (CUstreamCaptureStatus *)pCaptureStatus))

RT_CALL_PT(cudaStreamGetCaptureInfo, ptsz,
	   (cudaStream_t stream, enum cudaStreamCaptureStatus *captureStatus_out, unsigned long long *id_out,
	    cudaGraph_t *graph_out, const cudaGraphNode_t **dependencies_out, const cudaGraphEdgeData **edgeData_out,
	    size_t *numDependencies_out),
	   cuStreamGetCaptureInfo, 12030, 12030,
	   (stream, (CUstreamCaptureStatus *)captureStatus_out, (cuuint64_t *)id_out, graph_out, dependencies_out,
	    (const CUgraphEdgeData **)edgeData_out, numDependencies_out))

cudaError_t cudaGraphCreate(cudaGraph_t *pGraph, unsigned int flags)
{
	ENTER();
	return simrt_ret(DRV(cuGraphCreate, 10000)(pGraph, flags));
}

cudaError_t cudaGraphDestroy(cudaGraph_t graph)
{
	ENTER();
	return simrt_ret(DRV(cuGraphDestroy, 10000)(graph));
}

cudaError_t cudaGraphInstantiate(cudaGraphExec_t *pGraphExec, cudaGraph_t graph, unsigned long long flags)
{
	ENTER();
	return simrt_ret(DRV(cuGraphInstantiateWithFlags, 11040)(pGraphExec, graph, flags));
}

cudaError_t cudaGraphInstantiateWithFlags(cudaGraphExec_t *pGraphExec, cudaGraph_t graph, unsigned long long flags)
{
	ENTER();
	return simrt_ret(DRV(cuGraphInstantiateWithFlags, 11040)(pGraphExec, graph, flags));
}

cudaError_t cudaGraphExecDestroy(cudaGraphExec_t graphExec)
{
	ENTER();
	return simrt_ret(DRV(cuGraphExecDestroy, 10000)(graphExec));
}

RT_CALL_PT(cudaGraphLaunch, ptsz, (cudaGraphExec_t graphExec, cudaStream_t stream), cuGraphLaunch, 10000, 10000,
	   (graphExec, stream))

RT_CALL_PT(cudaGraphUpload, ptsz, (cudaGraphExec_t graphExec, cudaStream_t stream), cuGraphUpload, 11010, 11010,
	   (graphExec, stream))

/* ---------------------------------------------------------------- 9. symbols */

/*
 * Without nvcc there are no __device__ variables: a "symbol" is a host variable,
 * and copies to and from it go through cuMemcpy on unified addresses (so the
 * driver sees host-to-host copies at the pageable rate). Data still moves, in
 * stream order.
 */
static cudaError_t symbol_copy(void *dst, const void *src, size_t count, cudaStream_t s, int async, int pt)
{
	CUresult r;

	ENTER();
	if (!dst || !src)
		return simrt_err(cudaErrorInvalidSymbol);
	if (count == 0)
		return cudaSuccess;
	if (async)
		r = pt ? DRVP(cuMemcpyAsync, 7000, 4000)(DP(dst), DP(src), count, s)
		       : DRV(cuMemcpyAsync, 4000)(DP(dst), DP(src), count, s);
	else
		r = pt ? DRVP(cuMemcpy, 7000, 4000)(DP(dst), DP(src), count)
		       : DRV(cuMemcpy, 4000)(DP(dst), DP(src), count);
	return simrt_ret(r);
}

cudaError_t cudaMemcpyToSymbol(const void *symbol, const void *src, size_t count, size_t offset,
			       enum cudaMemcpyKind kind)
{
	return symbol_copy((char *)symbol + offset, src, count, NULL, 0, 0);
}

cudaError_t cudaMemcpyToSymbol_ptds(const void *symbol, const void *src, size_t count, size_t offset,
				    enum cudaMemcpyKind kind)
{
	return symbol_copy((char *)symbol + offset, src, count, NULL, 0, 1);
}

cudaError_t cudaMemcpyFromSymbol(void *dst, const void *symbol, size_t count, size_t offset, enum cudaMemcpyKind kind)
{
	return symbol_copy(dst, (const char *)symbol + offset, count, NULL, 0, 0);
}

cudaError_t cudaMemcpyFromSymbol_ptds(void *dst, const void *symbol, size_t count, size_t offset,
				      enum cudaMemcpyKind kind)
{
	return symbol_copy(dst, (const char *)symbol + offset, count, NULL, 0, 1);
}

cudaError_t cudaMemcpyToSymbolAsync(const void *symbol, const void *src, size_t count, size_t offset,
				    enum cudaMemcpyKind kind, cudaStream_t stream)
{
	return symbol_copy((char *)symbol + offset, src, count, stream, 1, 0);
}

cudaError_t cudaMemcpyToSymbolAsync_ptsz(const void *symbol, const void *src, size_t count, size_t offset,
					 enum cudaMemcpyKind kind, cudaStream_t stream)
{
	return symbol_copy((char *)symbol + offset, src, count, stream, 1, 1);
}

cudaError_t cudaMemcpyFromSymbolAsync(void *dst, const void *symbol, size_t count, size_t offset,
				      enum cudaMemcpyKind kind, cudaStream_t stream)
{
	return symbol_copy(dst, (const char *)symbol + offset, count, stream, 1, 0);
}

cudaError_t cudaMemcpyFromSymbolAsync_ptsz(void *dst, const void *symbol, size_t count, size_t offset,
					   enum cudaMemcpyKind kind, cudaStream_t stream)
{
	return symbol_copy(dst, (const char *)symbol + offset, count, stream, 1, 1);
}

cudaError_t cudaGetSymbolAddress(void **devPtr, const void *symbol)
{
	ENTER();
	if (!devPtr || !symbol)
		return simrt_err(cudaErrorInvalidSymbol);
	*devPtr = (void *)symbol;
	return cudaSuccess;
}

/* ---------------------------------------------------------------- 10. small calls programs expect */

cudaError_t cudaFuncGetAttributes(struct cudaFuncAttributes *attr, const void *func)
{
	ENTER();
	if (!attr || !func)
		return simrt_err(cudaErrorInvalidValue);
	memset(attr, 0, sizeof(*attr));
	attr->maxThreadsPerBlock = 1024;
	attr->ptxVersion = 80;
	attr->binaryVersion = 80;
	return cudaSuccess;
}

cudaError_t cudaFuncSetAttribute(const void *func, enum cudaFuncAttribute attr, int value)
{
	ENTER();
	return simrt_ret(DRV(cuFuncSetAttribute, 9000)((CUfunction)(uintptr_t)func, (CUfunction_attribute)attr, value));
}

cudaError_t cudaFuncSetCacheConfig(const void *func, enum cudaFuncCache cacheConfig)
{
	ENTER();
	return simrt_ret(DRV(cuFuncSetCacheConfig, 3000)((CUfunction)(uintptr_t)func, (CUfunc_cache)cacheConfig));
}

cudaError_t cudaOccupancyMaxActiveBlocksPerMultiprocessorWithFlags(int *numBlocks, const void *func, int blockSize,
								   size_t dynamicSMemSize, unsigned int flags)
{
	ENTER();
	return simrt_ret(DRV(cuOccupancyMaxActiveBlocksPerMultiprocessorWithFlags, 7000)(
		numBlocks, (CUfunction)(uintptr_t)func, blockSize, dynamicSMemSize, flags));
}

cudaError_t cudaOccupancyMaxActiveBlocksPerMultiprocessor(int *numBlocks, const void *func, int blockSize,
							  size_t dynamicSMemSize)
{
	return cudaOccupancyMaxActiveBlocksPerMultiprocessorWithFlags(numBlocks, func, blockSize, dynamicSMemSize, 0);
}

cudaError_t cudaDeviceGetCacheConfig(enum cudaFuncCache *pCacheConfig)
{
	ENTER();
	return simrt_ret(DRV(cuCtxGetCacheConfig, 3020)((CUfunc_cache *)pCacheConfig));
}

cudaError_t cudaDeviceSetCacheConfig(enum cudaFuncCache cacheConfig)
{
	ENTER();
	return simrt_ret(DRV(cuCtxSetCacheConfig, 3020)((CUfunc_cache)cacheConfig));
}

cudaError_t cudaThreadExchangeStreamCaptureMode(enum cudaStreamCaptureMode *mode)
{
	ENTER();
	return simrt_ret(DRV(cuThreadExchangeStreamCaptureMode, 10010)((CUstreamCaptureMode *)mode));
}

RT_CALL_PT(cudaStreamAttachMemAsync, ptsz, (cudaStream_t stream, void *devPtr, size_t length, unsigned int flags),
	   cuStreamAttachMemAsync, 6000, 7000, (stream, DP(devPtr), length, flags))

/* cudaMemLocation and CUmemLocation have the same layout. */
static CUmemLocation mem_location(struct cudaMemLocation location)
{
	CUmemLocation l;

	memcpy(&l, &location, sizeof(l));
	return l;
}

RT_CALL_PT(cudaMemPrefetchAsync, ptsz,
	   (const void *devPtr, size_t count, struct cudaMemLocation location, unsigned int flags, cudaStream_t stream),
	   cuMemPrefetchAsync, 12020, 12020, (DP(devPtr), count, mem_location(location), flags, stream))

cudaError_t cudaMemAdvise(const void *devPtr, size_t count, enum cudaMemoryAdvise advice,
			  struct cudaMemLocation location)
{
	ENTER();
	return simrt_ret(DRV(cuMemAdvise, 12020)(DP(devPtr), count, (CUmem_advise)advice, mem_location(location)));
}

/* As NVIDIA's runtime: the driver's cuProfilerStart/Stop underneath (a static
 * runtime reaches them through cuGetProcAddress, as every driver call). */
cudaError_t cudaProfilerStart(void)
{
	ENTER();
	return simrt_ret(DRV(cuProfilerStart, 4000)());
}

cudaError_t cudaProfilerStop(void)
{
	ENTER();
	return simrt_ret(DRV(cuProfilerStop, 4000)());
}

/* CUDA 12 headers #define cudaGetDeviceProperties to this name: programs built with
 * them (PyTorch wheels) call it. */
cudaError_t cudaGetDeviceProperties_v2(struct cudaDeviceProp *prop, int device);
cudaError_t cudaGetDeviceProperties_v2(struct cudaDeviceProp *prop, int device)
{
	return cudaGetDeviceProperties(prop, device);
}
