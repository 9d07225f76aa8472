/*
 * drv_copy.c - Memory Management of CUDA's Driver API, the calls that move data:
 * copies (cuMemcpy*, every driver variant), memsets (cuMemset*) and batches of
 * copies. Each is an operation of a stream (drv_exec.c); allocation is in drv_mem.c.
 *
 *   1. one copy: its bandwidth and how long the host waits for it
 *   2. linear, 2D and 3D copies
 *   3. memsets
 *   4. batches of copies
 */
#include "sim.h"

/* ---------------------------------------------------------------- 1. one copy */

/* CUDA stages a pageable-to-device copy through pinned buffers; the Programming
 * Guide makes a host-to-device copy of 64 KB or less asynchronous for the host. */
#define SIM_STAGING (64u << 10)

/*
 * One copy of depth x height rows of width bytes. sync: the API is a synchronous
 * one (the host waits, except for device-to-device copies, which CUDA runs
 * asynchronously). Any copy touching pageable memory, and any host-to-host copy,
 * makes the host wait; from pageable memory to the device (*host_sync ==
 * SIM_HOST_STAGED), only until the source is staged.
 */
CUresult sim_copy_op(struct sim_span dst, struct sim_span src, size_t width, size_t height, size_t depth, int sync,
		     int need, struct sim_op **out, int *host_sync)
{
	size_t dlen, slen;
	int dk, sk, ddev = -1, sdev = -1, pageable, host;
	struct sim_op *op;

	*out = NULL;
	if (width == 0 || height == 0 || depth == 0)
		return CUDA_SUCCESS;
	if (!dst.p || !src.p)
		return CUDA_ERROR_INVALID_VALUE;
	dlen = (depth - 1) * dst.slice + (height - 1) * dst.pitch + width;
	slen = (depth - 1) * src.slice + (height - 1) * src.pitch + width;
	pthread_mutex_lock(&sim_lock);
	dk = sim_classify(dst.p, dlen, &ddev);
	sk = sim_classify(src.p, slen, &sdev);
	pthread_mutex_unlock(&sim_lock);
	if (dk < 0 || sk < 0)
		return CUDA_ERROR_INVALID_VALUE;
	if (((need & 1) && dk != MEM_DEVICE && dk != MEM_MANAGED) ||
	    ((need & 2) && sk != MEM_DEVICE && sk != MEM_MANAGED))
		return CUDA_ERROR_INVALID_VALUE;
	op = sim_op_new(OP_COPY);
	if (!op)
		return CUDA_ERROR_OUT_OF_MEMORY;
	pageable = dk == MEM_PAGEABLE || sk == MEM_PAGEABLE;
	if (pageable)
		op->u.copy.gbps = sim_cfg.pageable_gbps;
	else if (dk == MEM_PINNED || sk == MEM_PINNED)
		op->u.copy.gbps = sim_cfg.pinned_gbps;
	else if (ddev != sdev)
		op->u.copy.gbps = sim_cfg.pinned_gbps; /* peer: over the (simulated) PCIe link */
	else
		op->u.copy.gbps = sim_cfg.device_gbps;
	op->u.copy.dst = dst.p;
	op->u.copy.src = src.p;
	op->u.copy.width = width;
	op->u.copy.height = height;
	op->u.copy.depth = depth;
	op->u.copy.dpitch = dst.pitch;
	op->u.copy.spitch = src.pitch;
	op->u.copy.dslice = dst.slice;
	op->u.copy.sslice = src.slice;
	/* "API synchronization behavior": a copy between two host buffers (pageable or
	 * pinned) is fully synchronous, Async or not. */
	host = (dk == MEM_PAGEABLE || dk == MEM_PINNED) && (sk == MEM_PAGEABLE || sk == MEM_PINNED);
	*host_sync = pageable || host || (sync && (dk == MEM_PINNED || sk == MEM_PINNED));
	/*
	 * "API synchronization behavior": from pageable memory to the device, "a stream
	 * sync is performed before the copy is initiated. The function will return once
	 * the pageable buffer has been copied to the staging memory [...], but the DMA
	 * to final destination may not have completed"; Async, "the driver may
	 * synchronize with the stream and stage the copy". The caller returns when the
	 * stream has reached the copy and all but its last SIM_STAGING bytes are across.
	 */
	if (sk == MEM_PAGEABLE && dk == MEM_DEVICE) {
		size_t bytes = width * height * depth;
		*host_sync = SIM_HOST_STAGED;
		op->u.copy.staged = bytes < SIM_STAGING ? bytes : SIM_STAGING;
	}
	*out = op;
	return CUDA_SUCCESS;
}

/*
 * One copy of depth x height rows of width bytes. sync: the API is a synchronous
 * one (the host waits, except for device-to-device copies, which CUDA runs
 * asynchronously). Any copy touching pageable memory makes the host wait.
 */
static CUresult copy(struct CUstream_st *s, struct sim_span dst, struct sim_span src, size_t width, size_t height,
		     size_t depth, int sync, int need)
{
	struct sim_op *op;
	int host_sync = 0;
	CUresult r = sim_copy_op(dst, src, width, height, depth, sync, need, &op, &host_sync);

	if (r != CUDA_SUCCESS || !op)
		return r;
	if (host_sync == SIM_HOST_STAGED && !s->cgraph)
		op->u.copy.staged_on = s;
	return sim_enqueue(s, op, s->cgraph ? 0 : host_sync);
}

static struct sim_span lin(const void *p)
{
	return (struct sim_span){(char *)p, 0, 0};
}

/* ---------------------------------------------------------------- 2. linear, 2D and 3D copies */

/* Linear copies: name(+_ptds) synchronous, name(+_ptsz) asynchronous; need: which
 * sides must be device memory (1 dst, 2 src). */
#define COPY_LINEAR(name, ptname, params, dst, src, n, h, sync, need)                                                  \
	CUresult name params                                                                                           \
	{                                                                                                              \
		SIM_RESOLVE(h, 0, s);                                                                                  \
		return copy(s, lin(dst), lin(src), n, 1, 1, sync, need);                                               \
	}                                                                                                              \
	CUresult ptname params                                                                                         \
	{                                                                                                              \
		SIM_RESOLVE(h, 1, s);                                                                                  \
		return copy(s, lin(dst), lin(src), n, 1, 1, sync, need);                                               \
	}
#define COPY_SYNC(name, ptname, params, dst, src, n, need) COPY_LINEAR(name, ptname, params, dst, src, n, NULL, 1, need)
#define COPY_ASYNC(name, ptname, params, dst, src, n, h, need)                                                         \
	COPY_LINEAR(name, ptname, params, dst, src, n, h, 0, need)

COPY_SYNC(cuMemcpyHtoD_v2, cuMemcpyHtoD_v2_ptds, (CUdeviceptr d, const void *h, size_t n), SIM_PTR(d), h, n, 1)
COPY_SYNC(cuMemcpyDtoH_v2, cuMemcpyDtoH_v2_ptds, (void *h, CUdeviceptr d, size_t n), h, SIM_PTR(d), n, 2)
COPY_SYNC(cuMemcpyDtoD_v2, cuMemcpyDtoD_v2_ptds, (CUdeviceptr d, CUdeviceptr s_, size_t n), SIM_PTR(d), SIM_PTR(s_), n,
	  3)
COPY_SYNC(cuMemcpy, cuMemcpy_ptds, (CUdeviceptr d, CUdeviceptr s_, size_t n), SIM_PTR(d), SIM_PTR(s_), n, 0)
COPY_ASYNC(cuMemcpyHtoDAsync_v2, cuMemcpyHtoDAsync_v2_ptsz, (CUdeviceptr d, const void *h, size_t n, CUstream st),
	   SIM_PTR(d), h, n, st, 1)
COPY_ASYNC(cuMemcpyDtoHAsync_v2, cuMemcpyDtoHAsync_v2_ptsz, (void *h, CUdeviceptr d, size_t n, CUstream st), h,
	   SIM_PTR(d), n, st, 2)
COPY_ASYNC(cuMemcpyDtoDAsync_v2, cuMemcpyDtoDAsync_v2_ptsz, (CUdeviceptr d, CUdeviceptr s_, size_t n, CUstream st),
	   SIM_PTR(d), SIM_PTR(s_), n, st, 3)
COPY_ASYNC(cuMemcpyAsync, cuMemcpyAsync_ptsz, (CUdeviceptr d, CUdeviceptr s_, size_t n, CUstream st), SIM_PTR(d),
	   SIM_PTR(s_), n, st, 0)
COPY_SYNC(cuMemcpyPeer, cuMemcpyPeer_ptds, (CUdeviceptr d, CUcontext dc, CUdeviceptr s_, CUcontext sc, size_t n),
	  SIM_PTR(d), SIM_PTR(s_), n, 3)
COPY_ASYNC(cuMemcpyPeerAsync, cuMemcpyPeerAsync_ptsz,
	   (CUdeviceptr d, CUcontext dc, CUdeviceptr s_, CUcontext sc, size_t n, CUstream st), SIM_PTR(d), SIM_PTR(s_),
	   n, st, 3)

static CUresult span2d(struct sim_span *sp, CUmemorytype t, const void *host, CUdeviceptr dev, CUarray arr,
		       size_t pitch, size_t x, size_t y, size_t height, size_t z)
{
	char *base;

	if (arr || t == CU_MEMORYTYPE_ARRAY)
		return CUDA_ERROR_NOT_SUPPORTED; /* CUDA arrays are not simulated */
	base = t == CU_MEMORYTYPE_HOST ? (char *)host : (char *)SIM_PTR(dev);
	sp->pitch = pitch;
	sp->slice = pitch * height;
	sp->p = base + (z * height + y) * pitch + x;
	return CUDA_SUCCESS;
}

static CUresult copy2d(const CUDA_MEMCPY2D *c, CUstream h, int pt, int sync)
{
	struct sim_span d, s_;
	CUresult r;
	SIM_RESOLVE(h, pt, s);

	if (!c)
		return CUDA_ERROR_INVALID_VALUE;
	if ((r = span2d(&d, c->dstMemoryType, c->dstHost, c->dstDevice, c->dstArray, c->dstPitch, c->dstXInBytes,
			c->dstY, c->Height, 0)) ||
	    (r = span2d(&s_, c->srcMemoryType, c->srcHost, c->srcDevice, c->srcArray, c->srcPitch, c->srcXInBytes,
			c->srcY, c->Height, 0)))
		return r;
	if ((c->Height > 1 && (c->dstPitch < c->WidthInBytes || c->srcPitch < c->WidthInBytes)))
		return CUDA_ERROR_INVALID_VALUE;
	return copy(s, d, s_, c->WidthInBytes, c->Height, 1, sync, 0);
}

/* The four entry points of a copy described by a struct: synchronous (and its
 * _ptds flavour) and asynchronous (and its _ptsz flavour). */
#define COPY_ENTRIES(fn, type, name, ptname, aname, aptname)                                                           \
	CUresult name(const type *c)                                                                                   \
	{                                                                                                              \
		return fn(c, NULL, 0, 1);                                                                              \
	}                                                                                                              \
	CUresult ptname(const type *c)                                                                                 \
	{                                                                                                              \
		return fn(c, NULL, 1, 1);                                                                              \
	}                                                                                                              \
	CUresult aname(const type *c, CUstream h)                                                                      \
	{                                                                                                              \
		return fn(c, h, 0, 0);                                                                                 \
	}                                                                                                              \
	CUresult aptname(const type *c, CUstream h)                                                                    \
	{                                                                                                              \
		return fn(c, h, 1, 0);                                                                                 \
	}

COPY_ENTRIES(copy2d, CUDA_MEMCPY2D, cuMemcpy2D_v2, cuMemcpy2D_v2_ptds, cuMemcpy2DAsync_v2, cuMemcpy2DAsync_v2_ptsz)
CUresult cuMemcpy2DUnaligned_v2(const CUDA_MEMCPY2D *c)
{
	return copy2d(c, NULL, 0, 1);
}
CUresult cuMemcpy2DUnaligned_v2_ptds(const CUDA_MEMCPY2D *c)
{
	return copy2d(c, NULL, 1, 1);
}

/*
 * CUDA_MEMCPY3D and CUDA_MEMCPY3D_PEER name their fields alike, and a peer copy's
 * contexts change nothing under unified addressing: one body serves both.
 * NOTE: a macro, as C has no other way to write one body for two struct types.
 */
#define COPY3D(type, spans, copy3)                                                                                     \
	CUresult spans(const type *c, struct sim_span *d, struct sim_span *s_)                                         \
	{                                                                                                              \
		CUresult r;                                                                                            \
                                                                                                                       \
		if (!c)                                                                                                \
			return CUDA_ERROR_INVALID_VALUE;                                                               \
		if ((r = span2d(d, c->dstMemoryType, c->dstHost, c->dstDevice, c->dstArray, c->dstPitch,               \
				c->dstXInBytes, c->dstY, c->dstHeight, c->dstZ)) ||                                    \
		    (r = span2d(s_, c->srcMemoryType, c->srcHost, c->srcDevice, c->srcArray, c->srcPitch,              \
				c->srcXInBytes, c->srcY, c->srcHeight, c->srcZ)))                                      \
			return r;                                                                                      \
		return CUDA_SUCCESS;                                                                                   \
	}                                                                                                              \
	static CUresult copy3(const type *c, CUstream h, int pt, int sync)                                             \
	{                                                                                                              \
		struct sim_span d, s_;                                                                                 \
		CUresult r;                                                                                            \
		SIM_RESOLVE(h, pt, s);                                                                                 \
                                                                                                                       \
		if ((r = spans(c, &d, &s_)))                                                                           \
			return r;                                                                                      \
		return copy(s, d, s_, c->WidthInBytes, c->Height, c->Depth, sync, 0);                                  \
	}

COPY3D(CUDA_MEMCPY3D, sim_spans3d, copy3d)
COPY3D(CUDA_MEMCPY3D_PEER, sim_spans3dpeer, copy3dpeer)
COPY_ENTRIES(copy3d, CUDA_MEMCPY3D, cuMemcpy3D_v2, cuMemcpy3D_v2_ptds, cuMemcpy3DAsync_v2, cuMemcpy3DAsync_v2_ptsz)
COPY_ENTRIES(copy3dpeer, CUDA_MEMCPY3D_PEER, cuMemcpy3DPeer, cuMemcpy3DPeer_ptds, cuMemcpy3DPeerAsync,
	     cuMemcpy3DPeerAsync_ptsz)

/* ---------------------------------------------------------------- 3. memsets */

/*
 * sync: a "synchronous" entry point. CUDA's "API synchronization behavior", Memset:
 * the synchronous memsets are asynchronous for the host except when the target is
 * pinned host memory or a Unified Memory region, where they are fully synchronous;
 * the Async versions are always asynchronous for the host.
 */
static CUresult memset_(CUstream h, int pt, int sync, CUdeviceptr dst, size_t pitch, uint32_t value, unsigned int elem,
			size_t width, size_t height)
{
	int k;
	struct sim_op *op;
	SIM_RESOLVE(h, pt, s);

	if (width == 0 || height == 0)
		return CUDA_SUCCESS;
	if (height > 1 && pitch < width * elem)
		return CUDA_ERROR_INVALID_VALUE;
	if (elem > 1 && dst % elem)
		return CUDA_ERROR_INVALID_VALUE;
	pthread_mutex_lock(&sim_lock);
	k = sim_classify(SIM_PTR(dst), (height - 1) * pitch + width * elem, NULL);
	pthread_mutex_unlock(&sim_lock);
	if (k < 0 || k == MEM_PAGEABLE)
		return CUDA_ERROR_INVALID_VALUE;
	op = sim_op_new(OP_MEMSET);
	if (!op)
		return CUDA_ERROR_OUT_OF_MEMORY;
	op->u.set.dst = SIM_PTR(dst);
	op->u.set.pitch = pitch;
	op->u.set.width = width;
	op->u.set.height = height;
	op->u.set.elem = elem;
	op->u.set.value = value;
	return sim_enqueue(s, op, sync && (k == MEM_PINNED || k == MEM_MANAGED) && !s->cgraph);
}

#define MEMSET1(name, type, elem)                                                                                      \
	CUresult name##_v2(CUdeviceptr d, type v, size_t n)                                                            \
	{                                                                                                              \
		return memset_(NULL, 0, 1, d, 0, v, elem, n, 1);                                                       \
	}                                                                                                              \
	CUresult name##_v2_ptds(CUdeviceptr d, type v, size_t n)                                                       \
	{                                                                                                              \
		return memset_(NULL, 1, 1, d, 0, v, elem, n, 1);                                                       \
	}                                                                                                              \
	CUresult name##Async(CUdeviceptr d, type v, size_t n, CUstream h)                                              \
	{                                                                                                              \
		return memset_(h, 0, 0, d, 0, v, elem, n, 1);                                                          \
	}                                                                                                              \
	CUresult name##Async_ptsz(CUdeviceptr d, type v, size_t n, CUstream h)                                         \
	{                                                                                                              \
		return memset_(h, 1, 0, d, 0, v, elem, n, 1);                                                          \
	}
#define MEMSET2(name, type, elem)                                                                                      \
	CUresult name##_v2(CUdeviceptr d, size_t p, type v, size_t w, size_t hh)                                       \
	{                                                                                                              \
		return memset_(NULL, 0, 1, d, p, v, elem, w, hh);                                                      \
	}                                                                                                              \
	CUresult name##_v2_ptds(CUdeviceptr d, size_t p, type v, size_t w, size_t hh)                                  \
	{                                                                                                              \
		return memset_(NULL, 1, 1, d, p, v, elem, w, hh);                                                      \
	}                                                                                                              \
	CUresult name##Async(CUdeviceptr d, size_t p, type v, size_t w, size_t hh, CUstream h)                         \
	{                                                                                                              \
		return memset_(h, 0, 0, d, p, v, elem, w, hh);                                                         \
	}                                                                                                              \
	CUresult name##Async_ptsz(CUdeviceptr d, size_t p, type v, size_t w, size_t hh, CUstream h)                    \
	{                                                                                                              \
		return memset_(h, 1, 0, d, p, v, elem, w, hh);                                                         \
	}
MEMSET1(cuMemsetD8, unsigned char, 1)
MEMSET1(cuMemsetD16, unsigned short, 2)
MEMSET1(cuMemsetD32, unsigned int, 4)
MEMSET2(cuMemsetD2D8, unsigned char, 1)
MEMSET2(cuMemsetD2D16, unsigned short, 2)
MEMSET2(cuMemsetD2D32, unsigned int, 4)

/* ---------------------------------------------------------------- 4. batches of copies */

/*
 * A batch is its copies, queued in order on the stream (CUDA runs them in any
 * order; in order is one of those). What cuMemcpyBatchAsync documents: the
 * legacy NULL stream is refused; every copy needs attributes: attrsIdxs[0] is
 * 0, the indices increase and stay below count, numAttrs <= count, and each
 * srcAccessOrder is one of the three (else CUDA_ERROR_INVALID_VALUE). A copy
 * whose source is to be read "during the API call" returns once it has run:
 * its source is read before the call returns, as the order requires (the
 * driver may read it out of stream order; waiting for the stream is the
 * stricter way to meet it).
 */
static int batch_order_ok(CUmemcpySrcAccessOrder o)
{
	return o == CU_MEMCPY_SRC_ACCESS_ORDER_STREAM || o == CU_MEMCPY_SRC_ACCESS_ORDER_DURING_API_CALL ||
	       o == CU_MEMCPY_SRC_ACCESS_ORDER_ANY;
}

/* The stream of a batch: any but the legacy NULL stream ("Must not be legacy NULL stream"). */
static CUresult batch_stream(CUstream h, int pt, struct CUstream_st **out)
{
	CUresult r = sim_stream_of(h, pt, out);
	if (r == CUDA_SUCCESS && (*out)->kind == ST_LEGACY)
		return CUDA_ERROR_INVALID_VALUE;
	return r;
}

/* One copy of a batch: queued, and waited for when its source must be read by the return. */
static CUresult batch_copy(struct CUstream_st *s, struct sim_span dst, struct sim_span src, size_t w, size_t h,
			   size_t d, CUmemcpySrcAccessOrder order)
{
	struct sim_op *op;
	int host_sync = 0;
	CUresult r = sim_copy_op(dst, src, w, h, d, 0, 0, &op, &host_sync);

	if (r != CUDA_SUCCESS || !op)
		return r;
	if (host_sync == SIM_HOST_STAGED && !s->cgraph)
		op->u.copy.staged_on = s;
	if (order == CU_MEMCPY_SRC_ACCESS_ORDER_DURING_API_CALL && !host_sync)
		host_sync = 1;
	return sim_enqueue(s, op, s->cgraph ? 0 : host_sync);
}

static CUresult batch(CUdeviceptr *dsts, CUdeviceptr *srcs, size_t *sizes, size_t count, CUmemcpyAttributes *attrs,
		      size_t *attrsIdxs, size_t numAttrs, size_t *failIdx, CUstream h, int pt)
{
	struct CUstream_st *s;
	CUresult r = batch_stream(h, pt, &s);

	if (r != CUDA_SUCCESS)
		return r;
	if (!dsts || !srcs || !sizes || count == 0 || !attrs || !attrsIdxs || numAttrs == 0 || numAttrs > count ||
	    attrsIdxs[0] != 0)
		return CUDA_ERROR_INVALID_VALUE;
	for (size_t k = 0; k < numAttrs; k++)
		if (!batch_order_ok(attrs[k].srcAccessOrder) || attrsIdxs[k] >= count ||
		    (k && attrsIdxs[k] <= attrsIdxs[k - 1]))
			return CUDA_ERROR_INVALID_VALUE;
	for (size_t i = 0, k = 0; i < count; i++) {
		while (k + 1 < numAttrs && attrsIdxs[k + 1] <= i)
			k++;
		r = batch_copy(s, lin(SIM_PTR(dsts[i])), lin(SIM_PTR(srcs[i])), sizes[i], 1, 1,
			       attrs[k].srcAccessOrder);
		if (r != CUDA_SUCCESS) {
			if (failIdx)
				*failIdx = i;
			return r;
		}
	}
	if (failIdx)
		*failIdx = SIZE_MAX;
	return CUDA_SUCCESS;
}

CUresult cuMemcpyBatchAsync(CUdeviceptr *dsts, CUdeviceptr *srcs, size_t *sizes, size_t count,
			    CUmemcpyAttributes *attrs, size_t *attrsIdxs, size_t numAttrs, size_t *failIdx, CUstream h)
{
	return batch(dsts, srcs, sizes, count, attrs, attrsIdxs, numAttrs, failIdx, h, 0);
}
CUresult cuMemcpyBatchAsync_ptsz(CUdeviceptr *dsts, CUdeviceptr *srcs, size_t *sizes, size_t count,
				 CUmemcpyAttributes *attrs, size_t *attrsIdxs, size_t numAttrs, size_t *failIdx,
				 CUstream h)
{
	return batch(dsts, srcs, sizes, count, attrs, attrsIdxs, numAttrs, failIdx, h, 1);
}
CUresult cuMemcpyBatchAsync_v2(CUdeviceptr *dsts, CUdeviceptr *srcs, size_t *sizes, size_t count,
			       CUmemcpyAttributes *attrs, size_t *attrsIdxs, size_t numAttrs, CUstream h)
{
	return batch(dsts, srcs, sizes, count, attrs, attrsIdxs, numAttrs, NULL, h, 0);
}
CUresult cuMemcpyBatchAsync_v2_ptsz(CUdeviceptr *dsts, CUdeviceptr *srcs, size_t *sizes, size_t count,
				    CUmemcpyAttributes *attrs, size_t *attrsIdxs, size_t numAttrs, CUstream h)
{
	return batch(dsts, srcs, sizes, count, attrs, attrsIdxs, numAttrs, NULL, h, 1);
}

/*
 * 3D batches: pointer operands only (CUDA arrays are not simulated); extents in
 * elements of one byte (pointer to pointer). Refused as cuMemcpy3DBatchAsync
 * documents: the default NULL stream, flags other than 0, a zero extent, a row
 * length or layer height below the extent, an invalid srcAccessOrder.
 */
static CUresult batch3d(size_t numOps, CUDA_MEMCPY3D_BATCH_OP *ops, size_t *failIdx, unsigned long long flags,
			CUstream h, int pt)
{
	struct CUstream_st *s;
	CUresult r = batch_stream(h, pt, &s);

	if (r != CUDA_SUCCESS)
		return r;
	if (!ops || numOps == 0 || flags != 0)
		return CUDA_ERROR_INVALID_VALUE;
	for (size_t i = 0; i < numOps; i++) {
		const CUDA_MEMCPY3D_BATCH_OP *o = &ops[i];
		if (!batch_order_ok(o->srcAccessOrder) || !o->extent.width || !o->extent.height || !o->extent.depth)
			return CUDA_ERROR_INVALID_VALUE;
		for (int side = 0; side < 2; side++) {
			const CUmemcpy3DOperand *x = side ? &o->dst : &o->src;
			if (x->type == CU_MEMCPY_OPERAND_TYPE_POINTER &&
			    ((x->op.ptr.rowLength && x->op.ptr.rowLength < o->extent.width) ||
			     (x->op.ptr.layerHeight && x->op.ptr.layerHeight < o->extent.height)))
				return CUDA_ERROR_INVALID_VALUE;
		}
	}
	for (size_t i = 0; i < numOps; i++) {
		const CUDA_MEMCPY3D_BATCH_OP *o = &ops[i];
		struct sim_span d, s_;
		size_t w = o->extent.width, hh = o->extent.height, dd = o->extent.depth;
		if (o->src.type != CU_MEMCPY_OPERAND_TYPE_POINTER || o->dst.type != CU_MEMCPY_OPERAND_TYPE_POINTER) {
			r = CUDA_ERROR_NOT_SUPPORTED;
		} else {
			d.p = SIM_PTR(o->dst.op.ptr.ptr);
			d.pitch = o->dst.op.ptr.rowLength ? o->dst.op.ptr.rowLength : w;
			d.slice = d.pitch * (o->dst.op.ptr.layerHeight ? o->dst.op.ptr.layerHeight : hh);
			s_.p = SIM_PTR(o->src.op.ptr.ptr);
			s_.pitch = o->src.op.ptr.rowLength ? o->src.op.ptr.rowLength : w;
			s_.slice = s_.pitch * (o->src.op.ptr.layerHeight ? o->src.op.ptr.layerHeight : hh);
			r = batch_copy(s, d, s_, w, hh, dd, o->srcAccessOrder);
		}
		if (r != CUDA_SUCCESS) {
			if (failIdx)
				*failIdx = i;
			return r;
		}
	}
	if (failIdx)
		*failIdx = SIZE_MAX;
	return CUDA_SUCCESS;
}

CUresult cuMemcpy3DBatchAsync(size_t numOps, CUDA_MEMCPY3D_BATCH_OP *opList, size_t *failIdx, unsigned long long flags,
			      CUstream h)
{
	return batch3d(numOps, opList, failIdx, flags, h, 0);
}
CUresult cuMemcpy3DBatchAsync_ptsz(size_t numOps, CUDA_MEMCPY3D_BATCH_OP *opList, size_t *failIdx,
				   unsigned long long flags, CUstream h)
{
	return batch3d(numOps, opList, failIdx, flags, h, 1);
}
CUresult cuMemcpy3DBatchAsync_v2(size_t numOps, CUDA_MEMCPY3D_BATCH_OP *opList, unsigned long long flags, CUstream h)
{
	return batch3d(numOps, opList, NULL, flags, h, 0);
}
CUresult cuMemcpy3DBatchAsync_v2_ptsz(size_t numOps, CUDA_MEMCPY3D_BATCH_OP *opList, unsigned long long flags,
				      CUstream h)
{
	return batch3d(numOps, opList, NULL, flags, h, 1);
}
