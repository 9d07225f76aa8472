/*
 * drv_allocasync.c - Stream Ordered Memory Allocator of CUDA's Driver API: the calls
 * that take a stream (cuMemAllocAsync, cuMemAllocFromPoolAsync, cuMemFreeAsync).
 * The pools themselves are in drv_mem.c.
 */
#include "sim.h"

/* The block is carved at once (the pointer is usable by later work in stream order);
 * cuMemFreeAsync returns it when the stream reaches the free. */
static CUresult alloc_async(CUdeviceptr *dptr, size_t bytes, struct CUmemPoolHandle_st *pool, CUstream h, int pt)
{
	CUresult r;
	SIM_RESOLVE(h, pt, s);

	if (!dptr || bytes == 0)
		return CUDA_ERROR_INVALID_VALUE;
	pthread_mutex_lock(&sim_lock);
	if (!pool)
		pool = sim_devs[s->dev].cur_pool;
	r = sim_pool_alloc_locked(pool, bytes, dptr);
	pthread_mutex_unlock(&sim_lock);
	if (r == CUDA_SUCCESS)
		sim_commit((void *)(uintptr_t)*dptr, bytes);
	return r;
}

CUresult cuMemAllocAsync(CUdeviceptr *dptr, size_t bytesize, CUstream hStream)
{
	return alloc_async(dptr, bytesize, NULL, hStream, 0);
}

CUresult cuMemAllocAsync_ptsz(CUdeviceptr *dptr, size_t bytesize, CUstream hStream)
{
	return alloc_async(dptr, bytesize, NULL, hStream, 1);
}

CUresult cuMemAllocFromPoolAsync(CUdeviceptr *dptr, size_t bytesize, CUmemoryPool pool, CUstream hStream)
{
	if (!pool)
		return CUDA_ERROR_INVALID_VALUE;
	return alloc_async(dptr, bytesize, pool, hStream, 0);
}

CUresult cuMemAllocFromPoolAsync_ptsz(CUdeviceptr *dptr, size_t bytesize, CUmemoryPool pool, CUstream hStream)
{
	if (!pool)
		return CUDA_ERROR_INVALID_VALUE;
	return alloc_async(dptr, bytesize, pool, hStream, 1);
}

static CUresult free_async(CUdeviceptr p, CUstream h, int pt)
{
	struct sim_op *op;
	int k;
	SIM_RESOLVE(h, pt, s);

	pthread_mutex_lock(&sim_lock);
	k = sim_classify(SIM_PTR(p), 1, NULL);
	pthread_mutex_unlock(&sim_lock);
	if (k != MEM_DEVICE)
		return CUDA_ERROR_INVALID_VALUE;
	op = sim_op_new(OP_FREE);
	if (!op)
		return CUDA_ERROR_OUT_OF_MEMORY;
	op->u.fr.p = p;
	return sim_enqueue(s, op, 0);
}

CUresult cuMemFreeAsync(CUdeviceptr dptr, CUstream hStream)
{
	return free_async(dptr, hStream, 0);
}

CUresult cuMemFreeAsync_ptsz(CUdeviceptr dptr, CUstream hStream)
{
	return free_async(dptr, hStream, 1);
}
