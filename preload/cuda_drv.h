/*
 * cuda_drv.h - the driver functions stepprof itself calls (timing events and
 * their private streams, capture status, memory info, pointer attributes,
 * kernel and device names), resolved from an already loaded libcuda.so.1 and
 * called directly, never through our own wrappers (so they are not recorded).
 *
 * Never loads or initialises CUDA: sp_drv() returns NULL until the process has
 * loaded libcuda itself. Also holds the real dlsym (every door needs it).
 */
#ifndef STEPPROF_CUDA_DRV_H
#define STEPPROF_CUDA_DRV_H

#define __CUDA_API_VERSION_INTERNAL 1
#include <cuda.h>

struct sp_drv {
	CUresult (*EventCreate)(CUevent *, unsigned int);
	CUresult (*EventRecord)(CUevent, CUstream);
	CUresult (*EventQuery)(CUevent);
	CUresult (*EventElapsedTime)(float *, CUevent, CUevent);
	CUresult (*EventDestroy)(CUevent);
	CUresult (*StreamIsCapturing)(CUstream, CUstreamCaptureStatus *);
	CUresult (*StreamCreate)(CUstream *, unsigned int);
	CUresult (*CtxGetCurrent)(CUcontext *);
	CUresult (*CtxGetDevice)(CUdevice *);
	CUresult (*MemGetInfo)(size_t *, size_t *);
	CUresult (*PointerGetAttribute)(void *, CUpointer_attribute, CUdeviceptr);
	CUresult (*FuncGetName)(const char **, CUfunction);
	CUresult (*KernelGetName)(const char **, CUkernel);
	CUresult (*DeviceGetCount)(int *);
	CUresult (*DeviceGet)(CUdevice *, int);
	CUresult (*DeviceGetName)(char *, int, CUdevice);
	CUresult (*DeviceTotalMem)(size_t *, CUdevice);
	CUresult (*DeviceGetPCIBusId)(char *, int, CUdevice);
	CUresult (*DriverGetVersion)(int *);
};

/* The driver's functions, or NULL when libcuda.so.1 is not loaded (yet). */
const struct sp_drv *sp_drv(void);

/* glibc's dlsym, found with dlvsym(RTLD_NEXT, "dlsym", "GLIBC_2.2.5"). */
typedef void *(*sp_dlsym_fn)(void *, const char *);
sp_dlsym_fn sp_real_dlsym(void);

#endif /* STEPPROF_CUDA_DRV_H */
