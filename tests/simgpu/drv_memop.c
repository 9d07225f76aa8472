/*
 * drv_memop.c - Stream Memory Operations of CUDA's Driver API: a stream writes a
 * value to memory, or waits for one there (cuStreamWriteValue*, cuStreamWaitValue*).
 * The stream's worker (drv_exec.c) does the write or the wait in stream order.
 */
#include "sim.h"

static CUresult memop(CUstream h, CUdeviceptr addr, uint64_t value, int is64, unsigned int flags, int wait, int pt)
{
	struct sim_op *op;
	SIM_RESOLVE(h, pt, s);

	if (!addr)
		return CUDA_ERROR_INVALID_VALUE;
	op = sim_op_new(wait ? OP_WAITVAL : OP_WRITE);
	if (!op)
		return CUDA_ERROR_OUT_OF_MEMORY;
	op->u.val.addr = (void *)(uintptr_t)addr;
	op->u.val.value = value;
	op->u.val.is64 = is64;
	op->u.val.flags = flags;
	return sim_enqueue(s, op, 0);
}

/* Each stream memory operation under its CUDA 13 name (_v2) and its older one,
 * which the CUDA 13 runtime still requests (cudart_entry_points.txt asks for the
 * 8000 versions). */
#define MEMOP(name, type, is64, wait)                                                                                  \
	CUresult name(CUstream s, CUdeviceptr a, type v, unsigned int f)                                               \
	{                                                                                                              \
		return memop(s, a, v, is64, f, wait, 0);                                                               \
	}                                                                                                              \
	CUresult name##_ptsz(CUstream s, CUdeviceptr a, type v, unsigned int f)                                        \
	{                                                                                                              \
		return memop(s, a, v, is64, f, wait, 1);                                                               \
	}                                                                                                              \
	CUresult name##_v2(CUstream s, CUdeviceptr a, type v, unsigned int f)                                          \
	{                                                                                                              \
		return memop(s, a, v, is64, f, wait, 0);                                                               \
	}                                                                                                              \
	CUresult name##_v2_ptsz(CUstream s, CUdeviceptr a, type v, unsigned int f)                                     \
	{                                                                                                              \
		return memop(s, a, v, is64, f, wait, 1);                                                               \
	}
MEMOP(cuStreamWriteValue32, cuuint32_t, 0, 0)
MEMOP(cuStreamWriteValue64, cuuint64_t, 1, 0)
MEMOP(cuStreamWaitValue32, cuuint32_t, 0, 1)
MEMOP(cuStreamWaitValue64, cuuint64_t, 1, 1)
