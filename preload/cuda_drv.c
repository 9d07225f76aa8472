/*
 * cuda_drv.c - the driver functions stepprof calls itself (see cuda_drv.h):
 * the real dlsym, then one resolution of every helper from the loaded
 * libcuda.so.1, by exported name first and through its cuGetProcAddress_v2
 * for a driver that only hands them out that way.
 */
#include "cuda_drv.h"

#include <dlfcn.h>
#include <errno.h>
#include <stddef.h>
#include <string.h>

#include "recorder.h"

sp_dlsym_fn sp_real_dlsym(void)
{
	static sp_dlsym_fn fn;
	sp_dlsym_fn f = __atomic_load_n(&fn, __ATOMIC_ACQUIRE);
	if (!f) {
		f = (sp_dlsym_fn)dlvsym(RTLD_NEXT, "dlsym", "GLIBC_2.2.5");
		if (!f) /* a libc without the old version: the default one */
			f = (sp_dlsym_fn)dlvsym(RTLD_NEXT, "dlsym", "GLIBC_2.34");
		__atomic_store_n(&fn, f, __ATOMIC_RELEASE);
	}
	return f;
}

static struct sp_drv drv;
static int drv_state; /* 0 not tried, 1 ready, 2 libcuda absent (retry later) */

typedef CUresult (*getproc_fn)(const char *, void **, int, cuuint64_t, CUdriverProcAddressQueryResult *);

static void *resolve(void *h, getproc_fn gp, const char *exact, const char *base, int ver)
{
	sp_dlsym_fn rd = sp_real_dlsym();
	void *p = rd ? rd(h, exact) : NULL;
	if (!p && gp) {
		CUdriverProcAddressQueryResult st;
		if (gp(base, &p, ver, 0, &st) != CUDA_SUCCESS)
			p = NULL;
	}
	return p;
}

static const struct sp_drv *drv_load(void);

const struct sp_drv *sp_drv(void)
{
	if (__atomic_load_n(&drv_state, __ATOMIC_ACQUIRE) == 1)
		return &drv;
	int e = errno; /* errno-neutral, as every helper a wrapper calls */
	const struct sp_drv *r = drv_load();
	errno = e;
	return r;
}

static const struct sp_drv *drv_load(void)
{
	/* RTLD_NOLOAD: only a libcuda the program loaded itself. */
	void *h = dlopen("libcuda.so.1", RTLD_NOLOAD | RTLD_LAZY);
	if (!h)
		return NULL;
	sp_dlsym_fn rd = sp_real_dlsym();
	getproc_fn gp = rd ? (getproc_fn)rd(h, "cuGetProcAddress_v2") : NULL;
	struct sp_drv d;
	memset(&d, 0, sizeof(d));
#define R(field, exact, base, ver) d.field = (__typeof__(d.field))resolve(h, gp, exact, base, ver)
	R(EventCreate, "cuEventCreate", "cuEventCreate", 2000);
	R(EventRecord, "cuEventRecord", "cuEventRecord", 2000);
	R(EventQuery, "cuEventQuery", "cuEventQuery", 2000);
	R(EventElapsedTime, "cuEventElapsedTime_v2", "cuEventElapsedTime", 12080);
	if (!d.EventElapsedTime)
		R(EventElapsedTime, "cuEventElapsedTime", "cuEventElapsedTime", 2000);
	R(EventDestroy, "cuEventDestroy_v2", "cuEventDestroy", 4000);
	R(StreamIsCapturing, "cuStreamIsCapturing", "cuStreamIsCapturing", 10000);
	R(StreamCreate, "cuStreamCreate", "cuStreamCreate", 2000);
	R(CtxGetCurrent, "cuCtxGetCurrent", "cuCtxGetCurrent", 4000);
	R(CtxGetDevice, "cuCtxGetDevice", "cuCtxGetDevice", 2000);
	R(MemGetInfo, "cuMemGetInfo_v2", "cuMemGetInfo", 3020);
	R(PointerGetAttribute, "cuPointerGetAttribute", "cuPointerGetAttribute", 4000);
	R(FuncGetName, "cuFuncGetName", "cuFuncGetName", 12030);
	R(KernelGetName, "cuKernelGetName", "cuKernelGetName", 12030);
	R(DeviceGetCount, "cuDeviceGetCount", "cuDeviceGetCount", 2000);
	R(DeviceGet, "cuDeviceGet", "cuDeviceGet", 2000);
	R(DeviceGetName, "cuDeviceGetName", "cuDeviceGetName", 2000);
	R(DeviceTotalMem, "cuDeviceTotalMem_v2", "cuDeviceTotalMem", 3020);
	R(DeviceGetPCIBusId, "cuDeviceGetPCIBusId", "cuDeviceGetPCIBusId", 4010);
	R(DriverGetVersion, "cuDriverGetVersion", "cuDriverGetVersion", 2020);
#undef R
	int expect = 0;
	if (__atomic_compare_exchange_n(&drv_state, &expect, 3, 0, __ATOMIC_ACQ_REL, __ATOMIC_ACQUIRE)) {
		drv = d;
		__atomic_store_n(&drv_state, 1, __ATOMIC_RELEASE);
	}
	/* NOTE: the handle from RTLD_NOLOAD holds a reference: libcuda is never
	 * unloaded under our resolved pointers. */
	return __atomic_load_n(&drv_state, __ATOMIC_ACQUIRE) == 1 ? &drv : NULL;
}
