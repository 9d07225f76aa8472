/*
 * rt.h - internal declarations of the simulated CUDA runtime (libcudart.so.12 and
 * libcudart_static.a).
 *
 *   rt_core.c  start-up (dlopen the driver, request the entry points of
 *              cudart_entry_points.txt in order), per-thread device and error state,
 *              device management, versions, errors, driver entry points
 *   rt_api.c   memory, copies, memsets, streams, events, launches, graphs
 *
 * The runtime reaches the driver only through the pointers cuGetProcAddress gave
 * it: DRV(name, version) is the pointer requested as (name, version, flags 0),
 * typed with NVIDIA's PFN_name_vversion from cudaTypedefs.h; DRVP(name, version,
 * type_version) the one requested with flags 2 (per-thread default stream), used by
 * the _ptds/_ptsz runtime entry points.
 */
#ifndef SIMGPU_RT_H
#define SIMGPU_RT_H

#include <cuda.h>
#include <cudaTypedefs.h>
#include <cuda_runtime_api.h>

#pragma GCC visibility push(hidden)

enum simrt_entry {
#define SIM_ENTRY(id, name, ver, flags) SIMRT_E_##id,
#include "entries.def"
#undef SIM_ENTRY
	SIMRT_NENTRIES
};

extern void *simrt_drv[SIMRT_NENTRIES];

#define DRV(name, ver)	      ((PFN_##name##_v##ver)simrt_drv[SIMRT_E_##name##_##ver##_0])
#define DRVP(name, ver, tver) ((PFN_##name##_v##tver)simrt_drv[SIMRT_E_##name##_##ver##_2])

/* Initialise on first use (driver, then this thread's device context); returns the
 * error to report, already recorded as the thread's last error. */
cudaError_t simrt_enter(void);
/* Map a driver result to the runtime's and record it as the last error if it failed. */
cudaError_t simrt_ret(CUresult r);
cudaError_t simrt_err(cudaError_t e);
int simrt_device(void);
/* The CUkernel of a host function (the driver's export table), what NVIDIA's runtime
 * launches since CUDA 12.0; the function itself when the driver gives none. */
CUfunction simrt_kernel_of(const void *fn);

#define ENTER()                                                                                                        \
	do {                                                                                                           \
		cudaError_t e_ = simrt_enter();                                                                        \
		if (e_ != cudaSuccess)                                                                                 \
			return e_;                                                                                     \
	} while (0)

#pragma GCC visibility pop

#endif /* SIMGPU_RT_H */
