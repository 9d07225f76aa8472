/*
 * rt_core.c - start-up and process/thread state of the simulated CUDA runtime.
 *
 *   1. start-up: dlopen("libcuda.so.1"), dlsym(handle, "cuGetProcAddress_v2"), then
 *      one cuGetProcAddress request per line of cudart_entry_points.txt, in that
 *      order, with its version and flags: exactly what NVIDIA's CUDA 13 runtime asks
 *      for; then cuInit(0). Nothing happens before the first runtime call.
 *   2. per-thread state: current device (and its primary context), last error
 *   3. device management, versions
 *   4. error names and strings
 *   5. driver entry points for the program (cudaGetDriverEntryPoint[ByVersion]) and
 *      kernel registration (forwarded through the driver's export table)
 */
#include "rt.h"
#include "simgpu.h"

#include <dlfcn.h>
#include <stddef.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>

/* ---------------------------------------------------------------- 1. start-up */

void *simrt_drv[SIMRT_NENTRIES];

static const struct {
	const char *name;
	int version;
	unsigned long long flags;
} entries[SIMRT_NENTRIES] = {
#define SIM_ENTRY(id, name, ver, flags) {name, ver, flags},
#include "entries.def"
#undef SIM_ENTRY
};

static pthread_once_t once = PTHREAD_ONCE_INIT;
static cudaError_t init_err = cudaErrorInitializationError;

static void rt_init(void)
{
	PFN_cuGetProcAddress_v12000 gpa;
	CUdriverProcAddressQueryResult st;
	void *h;
	CUresult r;

	/* Like NVIDIA's runtime: found through the library search path, never linked. */
	h = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
	if (!h) {
		init_err = cudaErrorInsufficientDriver;
		return;
	}
	gpa = (PFN_cuGetProcAddress_v12000)dlsym(h, "cuGetProcAddress_v2");
	if (!gpa) {
		init_err = cudaErrorInsufficientDriver;
		return;
	}
	for (int i = 0; i < SIMRT_NENTRIES; i++)
		if (gpa(entries[i].name, &simrt_drv[i], entries[i].version, entries[i].flags, &st) != CUDA_SUCCESS)
			simrt_drv[i] = NULL;
	if (!DRV(cuInit, 2000)) {
		init_err = cudaErrorInsufficientDriver;
		return;
	}
	r = DRV(cuInit, 2000)(0);
	init_err = r == CUDA_SUCCESS	       ? cudaSuccess
		   : r == CUDA_ERROR_NO_DEVICE ? cudaErrorNoDevice
					       : cudaErrorInitializationError;
}

/* ---------------------------------------------------------------- 2. per-thread state */

static __thread cudaError_t last_err;
static __thread int cur_dev;
static __thread int ctx_ready; /* this thread's context is set up */

cudaError_t simrt_err(cudaError_t e)
{
	if (e != cudaSuccess)
		last_err = e;
	return e;
}

/* CUresult and cudaError_t share their numbers for every code the simulator returns. */
cudaError_t simrt_ret(CUresult r)
{
	return simrt_err((cudaError_t)r);
}

int simrt_device(void)
{
	return cur_dev;
}

/* A thread uses the context current in the driver if there is one (a program mixing
 * driver and runtime calls), else its device's primary context, as CUDA does. */
static cudaError_t bind_ctx(int dev, int force)
{
	CUcontext c = NULL;
	CUresult r;

	if (!force) {
		r = DRV(cuCtxGetCurrent, 4000)(&c);
		if (r != CUDA_SUCCESS)
			return simrt_ret(r);
		if (c) {
			CUdevice d;
			if (DRV(cuCtxGetDevice, 2000)(&d) == CUDA_SUCCESS)
				cur_dev = d;
			ctx_ready = 1;
			return cudaSuccess;
		}
	}
	r = DRV(cuDevicePrimaryCtxRetain, 7000)(&c, dev);
	if (r == CUDA_SUCCESS)
		r = DRV(cuCtxSetCurrent, 4000)(c);
	if (r != CUDA_SUCCESS)
		return simrt_ret(r);
	cur_dev = dev;
	ctx_ready = 1;
	return cudaSuccess;
}

cudaError_t simrt_enter(void)
{
	pthread_once(&once, rt_init);
	if (init_err != cudaSuccess)
		return simrt_err(init_err);
	if (!ctx_ready)
		return bind_ctx(cur_dev, 0);
	return cudaSuccess;
}

cudaError_t cudaGetLastError(void)
{
	cudaError_t e = last_err;

	last_err = cudaSuccess;
	return e;
}

cudaError_t cudaPeekAtLastError(void)
{
	return last_err;
}

/* ---------------------------------------------------------------- 3. devices, versions */

cudaError_t cudaGetDeviceCount(int *count)
{
	pthread_once(&once, rt_init);
	if (init_err != cudaSuccess) {
		if (count)
			*count = 0;
		return simrt_err(init_err);
	}
	if (!count)
		return simrt_err(cudaErrorInvalidValue);
	return simrt_ret(DRV(cuDeviceGetCount, 2000)(count));
}

cudaError_t cudaSetDevice(int device)
{
	int n = 0;

	pthread_once(&once, rt_init);
	if (init_err != cudaSuccess)
		return simrt_err(init_err);
	DRV(cuDeviceGetCount, 2000)(&n);
	if (device < 0 || device >= n)
		return simrt_err(cudaErrorInvalidDevice);
	return bind_ctx(device, 1);
}

cudaError_t cudaInitDevice(int device, unsigned int deviceFlags, unsigned int flags)
{
	return cudaSetDevice(device);
}

cudaError_t cudaGetDevice(int *device)
{
	ENTER();
	if (!device)
		return simrt_err(cudaErrorInvalidValue);
	*device = cur_dev;
	return cudaSuccess;
}

cudaError_t cudaSetDeviceFlags(unsigned int flags)
{
	ENTER();
	return simrt_ret(DRV(cuDevicePrimaryCtxSetFlags, 11000)(cur_dev, flags & ~cudaDeviceMapHost));
}

cudaError_t cudaGetDeviceFlags(unsigned int *flags)
{
	ENTER();
	if (!flags)
		return simrt_err(cudaErrorInvalidValue);
	return simrt_ret(DRV(cuCtxGetFlags, 7000)(flags));
}

cudaError_t cudaDeviceGetAttribute(int *value, enum cudaDeviceAttr attr, int device)
{
	ENTER();
	/* The runtime's attribute numbers are the driver's. */
	return simrt_ret(DRV(cuDeviceGetAttribute, 2000)(value, (CUdevice_attribute)attr, device));
}

cudaError_t cudaGetDeviceProperties(struct cudaDeviceProp *prop, int device)
{
	PFN_cuDeviceGetAttribute_v2000 ga;
	CUresult r;

	ENTER();
	if (!prop)
		return simrt_err(cudaErrorInvalidValue);
	ga = DRV(cuDeviceGetAttribute, 2000);
	memset(prop, 0, sizeof(*prop));
	r = DRV(cuDeviceGetName, 2000)(prop->name, sizeof(prop->name), device);
	if (r != CUDA_SUCCESS)
		return simrt_ret(r);
	DRV(cuDeviceGetUuid, 9020)((CUuuid *)&prop->uuid, device);
	DRV(cuDeviceTotalMem, 3020)(&prop->totalGlobalMem, device);
#define A(field, attr)                                                                                                 \
	do {                                                                                                           \
		int v_ = 0;                                                                                            \
		ga(&v_, attr, device);                                                                                 \
		prop->field = v_;                                                                                      \
	} while (0)
	A(sharedMemPerBlock, CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK);
	A(regsPerBlock, CU_DEVICE_ATTRIBUTE_MAX_REGISTERS_PER_BLOCK);
	A(warpSize, CU_DEVICE_ATTRIBUTE_WARP_SIZE);
	A(memPitch, CU_DEVICE_ATTRIBUTE_MAX_PITCH);
	A(maxThreadsPerBlock, CU_DEVICE_ATTRIBUTE_MAX_THREADS_PER_BLOCK);
	A(maxThreadsDim[0], CU_DEVICE_ATTRIBUTE_MAX_BLOCK_DIM_X);
	A(maxThreadsDim[1], CU_DEVICE_ATTRIBUTE_MAX_BLOCK_DIM_Y);
	A(maxThreadsDim[2], CU_DEVICE_ATTRIBUTE_MAX_BLOCK_DIM_Z);
	A(maxGridSize[0], CU_DEVICE_ATTRIBUTE_MAX_GRID_DIM_X);
	A(maxGridSize[1], CU_DEVICE_ATTRIBUTE_MAX_GRID_DIM_Y);
	A(maxGridSize[2], CU_DEVICE_ATTRIBUTE_MAX_GRID_DIM_Z);
	A(totalConstMem, CU_DEVICE_ATTRIBUTE_TOTAL_CONSTANT_MEMORY);
	A(major, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR);
	A(minor, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR);
	A(textureAlignment, CU_DEVICE_ATTRIBUTE_TEXTURE_ALIGNMENT);
	A(multiProcessorCount, CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT);
	A(integrated, CU_DEVICE_ATTRIBUTE_INTEGRATED);
	A(canMapHostMemory, CU_DEVICE_ATTRIBUTE_CAN_MAP_HOST_MEMORY);
	A(concurrentKernels, CU_DEVICE_ATTRIBUTE_CONCURRENT_KERNELS);
	A(ECCEnabled, CU_DEVICE_ATTRIBUTE_ECC_ENABLED);
	A(pciBusID, CU_DEVICE_ATTRIBUTE_PCI_BUS_ID);
	A(pciDeviceID, CU_DEVICE_ATTRIBUTE_PCI_DEVICE_ID);
	A(pciDomainID, CU_DEVICE_ATTRIBUTE_PCI_DOMAIN_ID);
	A(asyncEngineCount, CU_DEVICE_ATTRIBUTE_ASYNC_ENGINE_COUNT);
	A(unifiedAddressing, CU_DEVICE_ATTRIBUTE_UNIFIED_ADDRESSING);
	A(memoryBusWidth, CU_DEVICE_ATTRIBUTE_GLOBAL_MEMORY_BUS_WIDTH);
	A(l2CacheSize, CU_DEVICE_ATTRIBUTE_L2_CACHE_SIZE);
	A(maxThreadsPerMultiProcessor, CU_DEVICE_ATTRIBUTE_MAX_THREADS_PER_MULTIPROCESSOR);
	A(streamPrioritiesSupported, CU_DEVICE_ATTRIBUTE_STREAM_PRIORITIES_SUPPORTED);
	A(sharedMemPerMultiprocessor, CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_MULTIPROCESSOR);
	A(regsPerMultiprocessor, CU_DEVICE_ATTRIBUTE_MAX_REGISTERS_PER_MULTIPROCESSOR);
	A(managedMemory, CU_DEVICE_ATTRIBUTE_MANAGED_MEMORY);
	A(concurrentManagedAccess, CU_DEVICE_ATTRIBUTE_CONCURRENT_MANAGED_ACCESS);
	A(cooperativeLaunch, CU_DEVICE_ATTRIBUTE_COOPERATIVE_LAUNCH);
	A(sharedMemPerBlockOptin, CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN);
	A(memoryPoolsSupported, CU_DEVICE_ATTRIBUTE_MEMORY_POOLS_SUPPORTED);
	A(hostRegisterSupported, CU_DEVICE_ATTRIBUTE_HOST_REGISTER_SUPPORTED);
#undef A
	return cudaSuccess;
}

cudaError_t cudaDeviceGetPCIBusId(char *pciBusId, int len, int device)
{
	ENTER();
	return simrt_ret(DRV(cuDeviceGetPCIBusId, 4010)(pciBusId, len, device));
}

cudaError_t cudaDeviceSynchronize(void)
{
	ENTER();
	return simrt_ret(DRV(cuCtxSynchronize, 2000)());
}

cudaError_t cudaDeviceReset(void)
{
	ENTER();
	DRV(cuCtxSynchronize, 2000)();
	return simrt_ret(DRV(cuDevicePrimaryCtxReset, 7000)(cur_dev));
}

cudaError_t cudaDeviceGetStreamPriorityRange(int *leastPriority, int *greatestPriority)
{
	ENTER();
	return simrt_ret(DRV(cuCtxGetStreamPriorityRange, 5050)(leastPriority, greatestPriority));
}

cudaError_t cudaDeviceGetLimit(size_t *pValue, enum cudaLimit limit)
{
	ENTER();
	return simrt_ret(DRV(cuCtxGetLimit, 3010)(pValue, (CUlimit)limit));
}

cudaError_t cudaDeviceSetLimit(enum cudaLimit limit, size_t value)
{
	ENTER();
	return simrt_ret(DRV(cuCtxSetLimit, 3010)((CUlimit)limit, value));
}

cudaError_t cudaDeviceCanAccessPeer(int *canAccessPeer, int device, int peerDevice)
{
	ENTER();
	return simrt_ret(DRV(cuDeviceCanAccessPeer, 4000)(canAccessPeer, device, peerDevice));
}

/* Peer access is set on the peer device's primary context, retained for it;
 * enabling keeps the retain (the access lasts), disabling gives it back. */
static cudaError_t peer_access(int peerDevice, unsigned int flags, int enable)
{
	CUcontext peer;
	CUresult r;

	ENTER();
	r = DRV(cuDevicePrimaryCtxRetain, 7000)(&peer, peerDevice);
	if (r != CUDA_SUCCESS)
		return simrt_ret(r);
	if (enable)
		return simrt_ret(DRV(cuCtxEnablePeerAccess, 4000)(peer, flags));
	r = DRV(cuCtxDisablePeerAccess, 4000)(peer);
	DRV(cuDevicePrimaryCtxRelease, 7000)(peerDevice);
	return simrt_ret(r);
}

cudaError_t cudaDeviceEnablePeerAccess(int peerDevice, unsigned int flags)
{
	return peer_access(peerDevice, flags, 1);
}

cudaError_t cudaDeviceDisablePeerAccess(int peerDevice)
{
	return peer_access(peerDevice, 0, 0);
}

cudaError_t cudaDriverGetVersion(int *driverVersion)
{
	pthread_once(&once, rt_init);
	if (!driverVersion)
		return simrt_err(cudaErrorInvalidValue);
	if (!DRV(cuDriverGetVersion, 2020)) {
		*driverVersion = 0;
		return cudaSuccess;
	}
	return simrt_ret(DRV(cuDriverGetVersion, 2020)(driverVersion));
}

cudaError_t cudaRuntimeGetVersion(int *runtimeVersion)
{
	if (!runtimeVersion)
		return simrt_err(cudaErrorInvalidValue);
	*runtimeVersion = CUDART_VERSION;
	return cudaSuccess;
}

/* ---------------------------------------------------------------- 4. errors */

static const struct {
	cudaError_t code;
	const char *name, *text;
} errors[] = {
    {cudaSuccess, "cudaSuccess", "no error"},
    {cudaErrorInvalidValue, "cudaErrorInvalidValue", "invalid argument"},
    {cudaErrorMemoryAllocation, "cudaErrorMemoryAllocation", "out of memory"},
    {cudaErrorInitializationError, "cudaErrorInitializationError", "initialization error"},
    {cudaErrorCudartUnloading, "cudaErrorCudartUnloading", "driver shutting down"},
    {cudaErrorInvalidConfiguration, "cudaErrorInvalidConfiguration", "invalid configuration argument"},
    {cudaErrorInvalidSymbol, "cudaErrorInvalidSymbol", "invalid device symbol"},
    {cudaErrorInvalidMemcpyDirection, "cudaErrorInvalidMemcpyDirection", "invalid copy direction for memcpy"},
    {cudaErrorInsufficientDriver, "cudaErrorInsufficientDriver",
     "CUDA driver version is insufficient for CUDA runtime version"},
    {cudaErrorInvalidDeviceFunction, "cudaErrorInvalidDeviceFunction", "invalid device function"},
    {cudaErrorNoDevice, "cudaErrorNoDevice", "no CUDA-capable device is detected"},
    {cudaErrorInvalidDevice, "cudaErrorInvalidDevice", "invalid device ordinal"},
    {cudaErrorDeviceUninitialized, "cudaErrorDeviceUninitialized", "invalid device context"},
    {cudaErrorInvalidResourceHandle, "cudaErrorInvalidResourceHandle", "invalid resource handle"},
    {cudaErrorIllegalState, "cudaErrorIllegalState", "the operation is not permitted in this state"},
    {cudaErrorSymbolNotFound, "cudaErrorSymbolNotFound", "named symbol not found"},
    {cudaErrorNotReady, "cudaErrorNotReady", "device not ready"},
    {cudaErrorIllegalAddress, "cudaErrorIllegalAddress", "an illegal memory access was encountered"},
    {cudaErrorPeerAccessAlreadyEnabled, "cudaErrorPeerAccessAlreadyEnabled", "peer access is already enabled"},
    {cudaErrorPeerAccessNotEnabled, "cudaErrorPeerAccessNotEnabled", "peer access has not been enabled"},
    {cudaErrorHostMemoryAlreadyRegistered, "cudaErrorHostMemoryAlreadyRegistered",
     "part or all of the requested memory range is already mapped"},
    {cudaErrorHostMemoryNotRegistered, "cudaErrorHostMemoryNotRegistered",
     "pointer does not correspond to a registered memory region"},
    {cudaErrorNotPermitted, "cudaErrorNotPermitted", "operation not permitted"},
    {cudaErrorNotSupported, "cudaErrorNotSupported", "operation not supported"},
    {cudaErrorStreamCaptureUnsupported, "cudaErrorStreamCaptureUnsupported",
     "operation not permitted when stream is capturing"},
    {cudaErrorStreamCaptureInvalidated, "cudaErrorStreamCaptureInvalidated",
     "operation failed due to a previous error during capture"},
    {cudaErrorStreamCaptureUnmatched, "cudaErrorStreamCaptureUnmatched", "capture was not initiated in this stream"},
    {cudaErrorStreamCaptureImplicit, "cudaErrorStreamCaptureImplicit",
     "operation would make the legacy stream depend on a capturing blocking stream"},
    {cudaErrorCapturedEvent, "cudaErrorCapturedEvent",
     "operation not permitted on an event last recorded in a capturing stream"},
    {cudaErrorUnknown, "cudaErrorUnknown", "unknown error"},
};

/* The row of error, or -1 for a code not listed. */
static int error_index(cudaError_t error)
{
	for (size_t i = 0; i < sizeof(errors) / sizeof(errors[0]); i++)
		if (errors[i].code == error)
			return (int)i;
	return -1;
}

/* CUDA's runtime API, Error Handling: for a code it does not recognise, both
 * functions return "unrecognized error code" (not cudaErrorUnknown's strings). */
const char *cudaGetErrorName(cudaError_t error)
{
	int i = error_index(error);

	return i < 0 ? "unrecognized error code" : errors[i].name;
}

const char *cudaGetErrorString(cudaError_t error)
{
	int i = error_index(error);

	return i < 0 ? "unrecognized error code" : errors[i].text;
}

/* ---------------------------------------------------------------- 5. entry points, registration */

static cudaError_t entry_point(const char *symbol, void **funcPtr, int version, unsigned long long flags,
			       enum cudaDriverEntryPointQueryResult *status, int ptsz)
{
	CUdriverProcAddressQueryResult st = CU_GET_PROC_ADDRESS_SYMBOL_NOT_FOUND;
	CUresult r;

	ENTER();
	if (!symbol || !funcPtr)
		return simrt_err(cudaErrorInvalidValue);
	/* cudaEnableDefault: the flavour of the caller's compilation mode. */
	if ((flags & (cudaEnableLegacyStream | cudaEnablePerThreadDefaultStream)) == 0 && ptsz)
		flags |= cudaEnablePerThreadDefaultStream;
	r = DRV(cuGetProcAddress, 12000)(symbol, funcPtr, version, flags, &st);
	if (status)
		*status = st == CU_GET_PROC_ADDRESS_SUCCESS		     ? cudaDriverEntryPointSuccess
			  : st == CU_GET_PROC_ADDRESS_VERSION_NOT_SUFFICIENT ? cudaDriverEntryPointVersionNotSufficent
									     : cudaDriverEntryPointSymbolNotFound;
	/* As NVIDIA's runtime: a symbol that is not found is reported through the
	 * status, the call itself succeeds. */
	if (r == CUDA_ERROR_NOT_FOUND && status)
		return cudaSuccess;
	return simrt_ret(r);
}

cudaError_t cudaGetDriverEntryPoint(const char *symbol, void **funcPtr, unsigned long long flags,
				    enum cudaDriverEntryPointQueryResult *driverStatus)
{
	return entry_point(symbol, funcPtr, CUDART_VERSION, flags, driverStatus, 0);
}

cudaError_t cudaGetDriverEntryPoint_ptsz(const char *symbol, void **funcPtr, unsigned long long flags,
					 enum cudaDriverEntryPointQueryResult *driverStatus)
{
	return entry_point(symbol, funcPtr, CUDART_VERSION, flags, driverStatus, 1);
}

cudaError_t cudaGetDriverEntryPointByVersion(const char *symbol, void **funcPtr, unsigned int cudaVersion,
					     unsigned long long flags,
					     enum cudaDriverEntryPointQueryResult *driverStatus)
{
	return entry_point(symbol, funcPtr, (int)cudaVersion, flags, driverStatus, 0);
}

cudaError_t cudaGetDriverEntryPointByVersion_ptsz(const char *symbol, void **funcPtr, unsigned int cudaVersion,
						  unsigned long long flags,
						  enum cudaDriverEntryPointQueryResult *driverStatus)
{
	return entry_point(symbol, funcPtr, (int)cudaVersion, flags, driverStatus, 1);
}

/* The driver's export table (after simrt_enter), NULL when it has none. */
static const struct simgpu_export_table *export_table(void)
{
	static const char id[16] = SIMGPU_EXPORT_TABLE_ID;
	const struct simgpu_export_table *t = NULL;
	CUuuid uuid;

	memcpy(uuid.bytes, id, sizeof(id));
	if (DRV(cuGetExportTable, 3000)((const void **)&t, &uuid) != CUDA_SUCCESS || !t || t->size < sizeof(*t))
		return NULL;
	return t;
}

/* Kernel registration goes to the driver through its export table, the private
 * door NVIDIA's runtime uses too, so the runtime still links nothing of the driver. */
int simgpu_register_kernel(const void *fn, const char *name, int nargs, const size_t *argsizes)
{
	const struct simgpu_export_table *t;

	if (simrt_enter() != cudaSuccess || !(t = export_table()))
		return -1;
	return t->register_kernel(fn, name, nargs, argsizes);
}

uint64_t simgpu_globaltimer_ns(void)
{
	const struct simgpu_export_table *t;

	if (simrt_enter() != cudaSuccess || !(t = export_table()))
		return 0;
	return t->globaltimer_ns();
}

void simgpu_kernel_end_at(uint64_t t)
{
	const struct simgpu_export_table *et;

	if (simrt_enter() != cudaSuccess || !(et = export_table()))
		return;
	if (et->size >= offsetof(struct simgpu_export_table, kernel_end_at) + sizeof(et->kernel_end_at) &&
	    et->kernel_end_at)
		et->kernel_end_at(t);
}

CUfunction simrt_kernel_of(const void *fn)
{
	const struct simgpu_export_table *t = export_table();
	void *k = t ? t->kernel_of(fn) : NULL;
	return (CUfunction)(k ? k : (void *)(uintptr_t)fn);
}
