/*
 * simgpu.h - the few things a workload needs beyond the CUDA API to run on the
 * simulated GPU (tests/simgpu/): how a kernel is written and how it is registered.
 *
 * A kernel is a host function `void fn(void **args)`. It is launched like a CUDA
 * kernel stub (cudaLaunchKernel(fn, grid, block, args, shmem, stream), or
 * cuLaunchKernel((CUfunction)fn, ...)) and runs on the stream's worker thread, in
 * stream order; it may sleep (to stand for GPU time) or compute on device memory,
 * which is ordinary host memory in the simulation.
 *
 * Arguments are copied at launch, as CUDA does, so the caller's locals may die:
 *   - a registered kernel (simgpu_register_kernel) has `nargs` arguments of the
 *     given sizes, each copied in full;
 *   - an unregistered kernel's `args` array must end with a NULL entry; each
 *     argument is copied as 8 bytes (enough for pointers, ints, floats, size_t).
 * Registration also gives the kernel its name (cuFuncGetName); an unregistered
 * kernel's name is found with dladdr when the symbol is exported, else not at all.
 */
#ifndef SIMGPU_H
#define SIMGPU_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Exported by libcudart.so.12 / libcudart_static.a (forwarded to the driver through
 * cuGetExportTable) and by libcuda.so.1 itself. Returns 0 on success. `name` is
 * copied; `argsizes` may be NULL when nargs is 0; nargs < 0 registers the name only
 * (arguments then follow the NULL-terminated rule). Registering again replaces. */
int simgpu_register_kernel(const void *fn, const char *name, int nargs, const size_t *argsizes);

/*
 * The GPU's clock, as a kernel reads %globaltimer on a real GPU (CLOCK_MONOTONIC
 * nanoseconds). Inside a kernel it is the time on the stream's timeline
 * (drv_exec.c): the kernel started when the stream reached it, even if the
 * worker thread that runs it was scheduled later on a loaded machine, and its
 * clock runs from there at the host's pace. Elsewhere it is the host's clock.
 * A kernel that times itself reads this, not the host's clock.
 */
uint64_t simgpu_globaltimer_ns(void);

/*
 * Inside a kernel: its end on the stream's timeline is t (CLOCK_MONOTONIC ns, not
 * before its start), whenever its worker thread returns, as a copy lasts exactly
 * bytes / bandwidth there. For a kernel whose GPU time is a model rather than the
 * time its host function takes: the simulated NCCL's collectives, which end on
 * every rank together, bytes / bandwidth after the last rank arrived, as NCCL's
 * kernels leave a ring within microseconds; the trainer's sleeping kernels, which
 * last their duration on the timeline however late their worker woke up. The runtime
 * exports it too (through the driver's export table), for kernels of programs
 * that link the runtime only. The kernel must not return before t
 * on the host's clock (the timeline is never ahead of real time). Elsewhere:
 * nothing.
 */
void simgpu_kernel_end_at(uint64_t t);

/* The id of the driver's export table (cuGetExportTable) that holds the registration:
 * struct simgpu_export_table below. Any other id gives CUDA_ERROR_INVALID_VALUE. */
#define SIMGPU_EXPORT_TABLE_ID                                                                                         \
	{                                                                                                              \
		's', 'i', 'm', 'g', 'p', 'u', '-', 'e', 'x', 'p', 'o', 'r', 't', '-', 'v', '1'                         \
	}

struct simgpu_export_table {
	size_t size; /* sizeof(struct simgpu_export_table) */
	int (*register_kernel)(const void *fn, const char *name, int nargs, const size_t *argsizes);
	/* the CUkernel of a host function, what NVIDIA's runtime gets from cuLibraryGetKernel; NULL: none left */
	void *(*kernel_of)(const void *fn);
	uint64_t (*globaltimer_ns)(void); /* simgpu_globaltimer_ns */
	void (*kernel_end_at)(uint64_t t); /* simgpu_kernel_end_at (absent from a table of a smaller size) */
};

#ifdef __cplusplus
}
#endif
#endif /* SIMGPU_H */
