/*
 * test_cuda_table.c - the door tables of the CUDA hooks (preload/cuda_table.c):
 *   1. the driver functions the hooks must see, by the base name the runtime
 *      asks cuGetProcAddress for (docs/cuda-capture.md: copies, memsets, launches,
 *      syncs, device and pinned memory, memory info, the door itself);
 *   2. for every one of the 440 requests NVIDIA's CUDA 13.0 runtime makes
 *      (../shared/reference/cudart-13.0-driver-entry-points.txt, embedded
 *      below so the test needs nothing outside the repository), the hook hands
 *      back the exact variant cuda.h names for that request, or passes the
 *      request through when the function is not hooked;
 *   3. exact-name lookup for the dlsym door (no prefix matches).
 *
 * Ground truth: the names come from NVIDIA's cuda.h itself (its version macros
 * stringified here, and with CUDA_API_PER_THREAD_DEFAULT_STREAM in
 * test_cuda_ptds_names.c), never from the table under test.
 */
#ifndef SP_T_BASES_ONLY

#include <criterion/criterion.h>
#include <stdio.h>
#include <string.h>

/* Before cuda.h: its version macros (cuGetProcAddress -> cuGetProcAddress_v2)
 * would otherwise rename entries of the api list in trace.h. */
#include "cuda_table.h"

#include <cuda.h>

#endif

/* ----------------------------------------------------- 1. hooked bases */
#define SP_T_HOOKED_BASES(X)                                                                                          \
	X(cuMemcpy) X(cuMemcpyAsync) X(cuMemcpyPeer) X(cuMemcpyPeerAsync) X(cuMemcpyHtoD) X(cuMemcpyHtoDAsync)        \
	X(cuMemcpyDtoH) X(cuMemcpyDtoHAsync) X(cuMemcpyDtoD) X(cuMemcpyDtoDAsync) X(cuMemcpy2D)                       \
	X(cuMemcpy2DUnaligned) X(cuMemcpy2DAsync) X(cuMemcpy3D) X(cuMemcpy3DAsync) X(cuMemcpy3DPeer)                  \
	X(cuMemcpy3DPeerAsync) X(cuMemsetD8) X(cuMemsetD16) X(cuMemsetD32) X(cuMemsetD2D8) X(cuMemsetD2D16)           \
	X(cuMemsetD2D32) X(cuMemsetD8Async) X(cuMemsetD16Async) X(cuMemsetD32Async) X(cuMemsetD2D8Async)              \
	X(cuMemsetD2D16Async) X(cuMemsetD2D32Async) X(cuLaunchKernel) X(cuLaunchKernelEx)                             \
	X(cuLaunchCooperativeKernel) X(cuGraphLaunch) X(cuCtxSynchronize) X(cuStreamSynchronize)                      \
	X(cuEventSynchronize) X(cuStreamWaitEvent) X(cuStreamQuery) X(cuEventQuery) X(cuMemAlloc) X(cuMemAllocPitch)  \
	X(cuMemAllocManaged) X(cuMemFree) X(cuMemAllocAsync) X(cuMemAllocFromPoolAsync) X(cuMemFreeAsync)             \
	X(cuMemGetInfo) X(cuMemHostAlloc) X(cuMemAllocHost) X(cuMemFreeHost) X(cuMemHostRegister)                     \
	X(cuMemHostUnregister) X(cuCtxSetCurrent) X(cuCtxPushCurrent) X(cuCtxPopCurrent) X(cuGetProcAddress)          \
	X(cuMemCreate) X(cuMemRelease) X(cuMemMap) X(cuMemUnmap) X(cuInit) X(cuDevicePrimaryCtxRetain)          \
	X(cuModuleLoadData) X(cuDevicePrimaryCtxReset) X(cuCtxCreate) X(cuCtxDestroy) X(cuMemRetainAllocationHandle) \
	X(cuLaunchHostFunc) X(cuStreamAddCallback) X(cuStreamWaitValue32) X(cuStreamWaitValue64) X(cuStreamBatchMemOp)   \
	X(cuMemcpyBatchAsync) X(cuMemcpy3DBatchAsync) X(cuProfilerStart) X(cuProfilerStop)

#ifndef SP_T_BASES_ONLY

#define S2(x) #x
#define S(x) S2(x)

static const struct {
	const char *base, *name;
} plain_names[] = {
#define B(x) { #x, S(x) },
	SP_T_HOOKED_BASES(B)
#undef B
};

const char *sp_t_ptds_name(const char *base); /* test_cuda_ptds_names.c */

static const char *plain_name(const char *base)
{
	for (size_t i = 0; i < sizeof(plain_names) / sizeof(plain_names[0]); i++)
		if (!strcmp(plain_names[i].base, base))
			return plain_names[i].name;
	return NULL;
}

/*
 * The variant a request selects. cuda.h's macros name the newest variant; the
 * reference list asks for two bases at an older version too, where the older
 * variant is the answer (documented in cuda.h next to each declaration).
 */
static const char *expected(const char *base, int ver, int flags)
{
	if (!plain_name(base))
		return NULL;
	if (!strcmp(base, "cuCtxSynchronize"))
		return ver >= 13000 ? "cuCtxSynchronize_v2" : "cuCtxSynchronize";
	if (!strcmp(base, "cuGetProcAddress"))
		return ver >= 12000 ? "cuGetProcAddress_v2" : "cuGetProcAddress";
	if (!strcmp(base, "cuDevicePrimaryCtxReset")) /* the runtime asks at 7000 */
		return ver >= 11000 ? "cuDevicePrimaryCtxReset_v2" : "cuDevicePrimaryCtxReset";
	if (!strcmp(base, "cuCtxCreate")) /* at 3020 */
		return ver >= 12050 ? "cuCtxCreate_v4" : ver >= 11040 ? "cuCtxCreate_v3" : "cuCtxCreate_v2";
	/* the stream memory operations: at 8000 and 9000, before their _v2 (11070) */
	if (ver < 11070 && (!strcmp(base, "cuStreamWaitValue32") || !strcmp(base, "cuStreamWaitValue64") ||
			    !strcmp(base, "cuStreamBatchMemOp"))) {
		static char v1[64];
		snprintf(v1, sizeof(v1), "%s%s", base, (flags & 2) ? "_ptsz" : "");
		return v1;
	}
	/* the batches: at 12080 too, before their _v2 (13000, which drops failIdx) */
	if (ver < 13000 && (!strcmp(base, "cuMemcpyBatchAsync") || !strcmp(base, "cuMemcpy3DBatchAsync"))) {
		static char v1[64];
		snprintf(v1, sizeof(v1), "%s%s", base, (flags & 2) ? "_ptsz" : "");
		return v1;
	}
	return (flags & 2) ? sp_t_ptds_name(base) : plain_name(base);
}

/* ------------------------------------------- 2. the runtime's requests */

static const struct {
	const char *name;
	int ver, flags;
} reference[] = {
	{ "", 0, 0 },
	{ "cuInit", 2000, 0 },
	{ "cuGetProcAddress", 11030, 0 },
	{ "cuGetProcAddress", 12000, 0 },
	{ "cuDeviceGet", 2000, 0 },
	{ "cuDeviceGetCount", 2000, 0 },
	{ "cuDeviceGetName", 2000, 0 },
	{ "cuDeviceTotalMem", 3020, 0 },
	{ "cuDeviceGetAttribute", 2000, 0 },
	{ "cuDeviceGetP2PAttribute", 8000, 0 },
	{ "cuDeviceGetHostAtomicCapabilities", 13000, 0 },
	{ "cuDeviceGetP2PAtomicCapabilities", 13000, 0 },
	{ "cuDriverGetVersion", 2020, 0 },
	{ "cuDeviceGetByPCIBusId", 4010, 0 },
	{ "cuDeviceGetPCIBusId", 4010, 0 },
	{ "cuDeviceGetUuid", 9020, 0 },
	{ "cuDeviceGetTexture1DLinearMaxWidth", 11010, 0 },
	{ "cuDeviceGetDefaultMemPool", 11020, 0 },
	{ "cuDeviceSetMemPool", 11020, 0 },
	{ "cuDeviceGetMemPool", 11020, 0 },
	{ "cuFlushGPUDirectRDMAWrites", 11030, 0 },
	{ "cuDevicePrimaryCtxRetain", 7000, 0 },
	{ "cuDevicePrimaryCtxRelease", 7000, 0 },
	{ "cuDevicePrimaryCtxSetFlags", 11000, 0 },
	{ "cuDevicePrimaryCtxGetState", 7000, 0 },
	{ "cuDevicePrimaryCtxReset", 7000, 0 },
	{ "cuCtxCreate", 3020, 0 },
	{ "cuCtxGetFlags", 7000, 0 },
	{ "cuCtxSetCurrent", 4000, 0 },
	{ "cuCtxGetCurrent", 4000, 0 },
	{ "cuCtxDetach", 2000, 0 },
	{ "cuCtxGetApiVersion", 3020, 0 },
	{ "cuCtxGetDevice", 2000, 0 },
	{ "cuCtxGetDevice", 13000, 0 },
	{ "cuCtxGetLimit", 3010, 0 },
	{ "cuCtxSetLimit", 3010, 0 },
	{ "cuCtxGetCacheConfig", 3020, 0 },
	{ "cuCtxSetCacheConfig", 3020, 0 },
	{ "cuCtxGetSharedMemConfig", 4020, 0 },
	{ "cuCtxGetStreamPriorityRange", 5050, 0 },
	{ "cuCtxSetSharedMemConfig", 4020, 0 },
	{ "cuCtxSynchronize", 2000, 0 },
	{ "cuCtxSynchronize", 13000, 0 },
	{ "cuCtxResetPersistingL2Cache", 11000, 0 },
	{ "cuCtxPopCurrent", 4000, 0 },
	{ "cuCtxPushCurrent", 4000, 0 },
	{ "cuModuleLoad", 2000, 0 },
	{ "cuModuleLoadData", 2000, 0 },
	{ "cuModuleLoadFatBinary", 2000, 0 },
	{ "cuModuleUnload", 2000, 0 },
	{ "cuModuleGetFunction", 2000, 0 },
	{ "cuModuleGetGlobal", 3020, 0 },
	{ "cuModuleGetTexRef", 2000, 0 },
	{ "cuModuleGetSurfRef", 3000, 0 },
	{ "cuModuleGetLoadingMode", 11070, 0 },
	{ "cuLibraryLoadData", 12000, 0 },
	{ "cuLibraryLoadFromFile", 12000, 0 },
	{ "cuLibraryUnload", 12000, 0 },
	{ "cuLibraryGetKernel", 12000, 0 },
	{ "cuLibraryGetModule", 12000, 0 },
	{ "cuKernelGetFunction", 12000, 0 },
	{ "cuLibraryGetGlobal", 12000, 0 },
	{ "cuLibraryGetManaged", 12000, 0 },
	{ "cuLibraryGetUnifiedFunction", 12000, 0 },
	{ "cuLibraryGetKernelCount", 12040, 0 },
	{ "cuLibraryEnumerateKernels", 12040, 0 },
	{ "cuKernelGetAttribute", 12000, 0 },
	{ "cuKernelSetAttribute", 12000, 0 },
	{ "cuKernelSetCacheConfig", 12000, 0 },
	{ "cuKernelGetName", 12030, 0 },
	{ "cuKernelGetParamInfo", 12040, 0 },
	{ "cuLinkCreate", 5050, 0 },
	{ "cuLinkAddData", 5050, 0 },
	{ "cuLinkAddFile", 5050, 0 },
	{ "cuLinkComplete", 5050, 0 },
	{ "cuLinkDestroy", 5050, 0 },
	{ "cuMemGetInfo", 3020, 0 },
	{ "cuMemAllocManaged", 6000, 0 },
	{ "cuMemAlloc", 3020, 0 },
	{ "cuMemAllocPitch", 3020, 0 },
	{ "cuMemFree", 3020, 0 },
	{ "cuMemGetAddressRange", 3020, 0 },
	{ "cuMemFreeHost", 2000, 0 },
	{ "cuMemHostAlloc", 2020, 0 },
	{ "cuMemHostGetDevicePointer", 3020, 0 },
	{ "cuMemHostGetFlags", 2030, 0 },
	{ "cuMemHostRegister", 6050, 0 },
	{ "cuMemHostUnregister", 4000, 0 },
	{ "cuPointerGetAttribute", 4000, 0 },
	{ "cuPointerGetAttributes", 7000, 0 },
	{ "cuMemAllocAsync", 11020, 0 },
	{ "cuMemAllocAsync", 11020, 2 },
	{ "cuMemAllocFromPoolAsync", 11020, 0 },
	{ "cuMemAllocFromPoolAsync", 11020, 2 },
	{ "cuMemFreeAsync", 11020, 0 },
	{ "cuMemFreeAsync", 11020, 2 },
	{ "cuMemPoolTrimTo", 11020, 0 },
	{ "cuMemPoolSetAttribute", 11020, 0 },
	{ "cuMemPoolGetAttribute", 11020, 0 },
	{ "cuMemPoolSetAccess", 11020, 0 },
	{ "cuMemPoolGetAccess", 11020, 0 },
	{ "cuMemPoolCreate", 11020, 0 },
	{ "cuMemPoolDestroy", 11020, 0 },
	{ "cuMemPoolExportToShareableHandle", 11020, 0 },
	{ "cuMemPoolImportFromShareableHandle", 11020, 0 },
	{ "cuMemPoolExportPointer", 11020, 0 },
	{ "cuMemPoolImportPointer", 11020, 0 },
	{ "cuMemGetDefaultMemPool", 13000, 0 },
	{ "cuMemGetMemPool", 13000, 0 },
	{ "cuMemSetMemPool", 13000, 0 },
	{ "cuMemcpy", 4000, 0 },
	{ "cuMemcpy", 7000, 2 },
	{ "cuMemcpyAsync", 4000, 0 },
	{ "cuMemcpyAsync", 7000, 2 },
	{ "cuMemcpyPeer", 4000, 0 },
	{ "cuMemcpyPeer", 7000, 2 },
	{ "cuMemcpyPeerAsync", 4000, 0 },
	{ "cuMemcpyPeerAsync", 7000, 2 },
	{ "cuMemcpyHtoD", 3020, 0 },
	{ "cuMemcpyHtoD", 7000, 2 },
	{ "cuMemcpyHtoDAsync", 3020, 0 },
	{ "cuMemcpyHtoDAsync", 7000, 2 },
	{ "cuMemcpyDtoH", 3020, 0 },
	{ "cuMemcpyDtoH", 7000, 2 },
	{ "cuMemcpyDtoHAsync", 3020, 0 },
	{ "cuMemcpyDtoHAsync", 7000, 2 },
	{ "cuMemcpyDtoD", 3020, 0 },
	{ "cuMemcpyDtoD", 7000, 2 },
	{ "cuMemcpyDtoDAsync", 3020, 0 },
	{ "cuMemcpyDtoDAsync", 7000, 2 },
	{ "cuMemcpy2DUnaligned", 3020, 0 },
	{ "cuMemcpy2DUnaligned", 7000, 2 },
	{ "cuMemcpy2DAsync", 3020, 0 },
	{ "cuMemcpy2DAsync", 7000, 2 },
	{ "cuMemcpy3D", 3020, 0 },
	{ "cuMemcpy3D", 7000, 2 },
	{ "cuMemcpy3DAsync", 3020, 0 },
	{ "cuMemcpy3DAsync", 7000, 2 },
	{ "cuMemcpy3DPeer", 4000, 0 },
	{ "cuMemcpy3DPeer", 7000, 2 },
	{ "cuMemcpy3DPeerAsync", 4000, 0 },
	{ "cuMemcpy3DPeerAsync", 7000, 2 },
	{ "cuMemcpyBatchAsync", 13000, 0 },
	{ "cuMemcpyBatchAsync", 13000, 2 },
	{ "cuMemcpy3DBatchAsync", 13000, 0 },
	{ "cuMemcpy3DBatchAsync", 13000, 2 },
	{ "cuMemcpyBatchAsync", 12080, 0 },
	{ "cuMemcpyBatchAsync", 12080, 2 },
	{ "cuMemcpy3DBatchAsync", 12080, 0 },
	{ "cuMemcpy3DBatchAsync", 12080, 2 },
	{ "cuMemsetD8", 3020, 0 },
	{ "cuMemsetD8", 7000, 2 },
	{ "cuMemsetD8Async", 3020, 0 },
	{ "cuMemsetD8Async", 7000, 2 },
	{ "cuMemsetD2D8", 3020, 0 },
	{ "cuMemsetD2D8", 7000, 2 },
	{ "cuMemsetD2D8Async", 3020, 0 },
	{ "cuMemsetD2D8Async", 7000, 2 },
	{ "cuFuncSetCacheConfig", 3000, 0 },
	{ "cuFuncSetSharedMemConfig", 4020, 0 },
	{ "cuFuncGetAttribute", 2020, 0 },
	{ "cuFuncSetAttribute", 9000, 0 },
	{ "cuFuncGetName", 12030, 0 },
	{ "cuFuncGetParamInfo", 12040, 0 },
	{ "cuArrayCreate", 3020, 0 },
	{ "cuArrayGetDescriptor", 3020, 0 },
	{ "cuArrayGetSparseProperties", 11010, 0 },
	{ "cuArrayGetPlane", 11020, 0 },
	{ "cuArray3DCreate", 3020, 0 },
	{ "cuArray3DGetDescriptor", 3020, 0 },
	{ "cuArrayDestroy", 2000, 0 },
	{ "cuMipmappedArrayCreate", 5000, 0 },
	{ "cuMipmappedArrayGetLevel", 5000, 0 },
	{ "cuMipmappedArrayGetSparseProperties", 11010, 0 },
	{ "cuMipmappedArrayDestroy", 5000, 0 },
	{ "cuArrayGetMemoryRequirements", 11060, 0 },
	{ "cuMipmappedArrayGetMemoryRequirements", 11060, 0 },
	{ "cuTexObjectCreate", 5000, 0 },
	{ "cuTexObjectDestroy", 5000, 0 },
	{ "cuTexObjectGetResourceDesc", 5000, 0 },
	{ "cuTexObjectGetTextureDesc", 5000, 0 },
	{ "cuTexObjectGetResourceViewDesc", 5000, 0 },
	{ "cuSurfObjectCreate", 5000, 0 },
	{ "cuSurfObjectDestroy", 5000, 0 },
	{ "cuSurfObjectGetResourceDesc", 5000, 0 },
	{ "cuImportExternalMemory", 10000, 0 },
	{ "cuExternalMemoryGetMappedBuffer", 10000, 0 },
	{ "cuExternalMemoryGetMappedMipmappedArray", 10000, 0 },
	{ "cuDestroyExternalMemory", 10000, 0 },
	{ "cuImportExternalSemaphore", 10000, 0 },
	{ "cuSignalExternalSemaphoresAsync", 10000, 0 },
	{ "cuSignalExternalSemaphoresAsync", 10000, 2 },
	{ "cuWaitExternalSemaphoresAsync", 10000, 0 },
	{ "cuWaitExternalSemaphoresAsync", 10000, 2 },
	{ "cuDestroyExternalSemaphore", 10000, 0 },
	{ "cuDeviceGetNvSciSyncAttributes", 10020, 0 },
	{ "cuLaunchKernel", 4000, 0 },
	{ "cuLaunchKernel", 7000, 2 },
	{ "cuLaunchCooperativeKernel", 9000, 0 },
	{ "cuLaunchCooperativeKernel", 9000, 2 },
	{ "cuLaunchHostFunc", 10000, 0 },
	{ "cuLaunchHostFunc", 10000, 2 },
	{ "cuLaunchKernelEx", 11060, 0 },
	{ "cuLaunchKernelEx", 11060, 2 },
	{ "cuEventCreate", 2000, 0 },
	{ "cuEventRecord", 2000, 0 },
	{ "cuEventRecord", 7000, 2 },
	{ "cuEventRecordWithFlags", 11010, 0 },
	{ "cuEventRecordWithFlags", 11010, 2 },
	{ "cuEventQuery", 2000, 0 },
	{ "cuEventSynchronize", 2000, 0 },
	{ "cuEventDestroy", 4000, 0 },
	{ "cuEventElapsedTime", 2000, 0 },
	{ "cuEventElapsedTime", 12080, 0 },
	{ "cuStreamWaitValue32", 8000, 0 },
	{ "cuStreamWaitValue32", 8000, 2 },
	{ "cuStreamWriteValue32", 8000, 0 },
	{ "cuStreamWriteValue32", 8000, 2 },
	{ "cuStreamWaitValue64", 9000, 0 },
	{ "cuStreamWaitValue64", 9000, 2 },
	{ "cuStreamWriteValue64", 9000, 0 },
	{ "cuStreamWriteValue64", 9000, 2 },
	{ "cuStreamBatchMemOp", 8000, 0 },
	{ "cuStreamBatchMemOp", 8000, 2 },
	{ "cuStreamCreate", 2000, 0 },
	{ "cuStreamCreateWithPriority", 5050, 0 },
	{ "cuStreamGetPriority", 5050, 0 },
	{ "cuStreamGetPriority", 7000, 2 },
	{ "cuStreamGetFlags", 5050, 0 },
	{ "cuStreamGetDevice", 12080, 0 },
	{ "cuStreamGetDevice", 12080, 2 },
	{ "cuStreamGetCtx", 9020, 0 },
	{ "cuStreamGetFlags", 7000, 2 },
	{ "cuStreamGetId", 12000, 0 },
	{ "cuStreamGetId", 12000, 2 },
	{ "cuStreamDestroy", 4000, 0 },
	{ "cuStreamWaitEvent", 3020, 0 },
	{ "cuStreamWaitEvent", 7000, 2 },
	{ "cuStreamAddCallback", 5000, 0 },
	{ "cuStreamAddCallback", 7000, 2 },
	{ "cuStreamSynchronize", 2000, 0 },
	{ "cuStreamSynchronize", 7000, 2 },
	{ "cuStreamQuery", 2000, 0 },
	{ "cuStreamQuery", 7000, 2 },
	{ "cuStreamAttachMemAsync", 6000, 0 },
	{ "cuStreamAttachMemAsync", 7000, 2 },
	{ "cuStreamCopyAttributes", 11000, 0 },
	{ "cuStreamCopyAttributes", 11000, 2 },
	{ "cuStreamGetAttribute", 11000, 0 },
	{ "cuStreamGetAttribute", 11000, 2 },
	{ "cuStreamSetAttribute", 11000, 0 },
	{ "cuStreamSetAttribute", 11000, 2 },
	{ "cuDeviceCanAccessPeer", 4000, 0 },
	{ "cuCtxEnablePeerAccess", 4000, 0 },
	{ "cuCtxDisablePeerAccess", 4000, 0 },
	{ "cuIpcGetEventHandle", 4010, 0 },
	{ "cuIpcOpenEventHandle", 4010, 0 },
	{ "cuIpcGetMemHandle", 4010, 0 },
	{ "cuIpcOpenMemHandle", 4010, 0 },
	{ "cuIpcOpenMemHandle", 11000, 0 },
	{ "cuIpcCloseMemHandle", 4010, 0 },
	{ "cuGLCtxCreate", 3020, 0 },
	{ "cuGLInit", 2000, 0 },
	{ "cuGLGetDevices", 4010, 0 },
	{ "cuGLRegisterBufferObject", 2000, 0 },
	{ "cuGLMapBufferObject", 3020, 0 },
	{ "cuGLMapBufferObject", 7000, 2 },
	{ "cuGLMapBufferObjectAsync", 3020, 0 },
	{ "cuGLMapBufferObjectAsync", 7000, 2 },
	{ "cuGLUnmapBufferObject", 2000, 0 },
	{ "cuGLUnmapBufferObjectAsync", 2030, 0 },
	{ "cuGLUnregisterBufferObject", 2000, 0 },
	{ "cuGLSetBufferObjectMapFlags", 2030, 0 },
	{ "cuGraphicsGLRegisterImage", 3000, 0 },
	{ "cuGraphicsGLRegisterBuffer", 3000, 0 },
	{ "cuGraphicsEGLRegisterImage", 7000, 0 },
	{ "cuEGLStreamConsumerConnect", 7000, 0 },
	{ "cuEGLStreamConsumerDisconnect", 7000, 0 },
	{ "cuEGLStreamConsumerAcquireFrame", 7000, 0 },
	{ "cuEGLStreamConsumerReleaseFrame", 7000, 0 },
	{ "cuEGLStreamProducerConnect", 7000, 0 },
	{ "cuEGLStreamProducerDisconnect", 7000, 0 },
	{ "cuEGLStreamProducerPresentFrame", 7000, 0 },
	{ "cuEGLStreamProducerReturnFrame", 7000, 0 },
	{ "cuGraphicsResourceGetMappedEglFrame", 7000, 0 },
	{ "cuEGLStreamConsumerConnectWithFlags", 8000, 0 },
	{ "cuGraphicsUnregisterResource", 3000, 0 },
	{ "cuGraphicsMapResources", 3000, 0 },
	{ "cuGraphicsMapResources", 7000, 2 },
	{ "cuGraphicsUnmapResources", 3000, 0 },
	{ "cuGraphicsUnmapResources", 7000, 2 },
	{ "cuGraphicsResourceSetMapFlags", 6050, 0 },
	{ "cuGraphicsSubResourceGetMappedArray", 3000, 0 },
	{ "cuGraphicsResourceGetMappedMipmappedArray", 5000, 0 },
	{ "cuGraphicsResourceGetMappedPointer", 3020, 0 },
	{ "cuProfilerInitialize", 4000, 0 },
	{ "cuProfilerStart", 4000, 0 },
	{ "cuProfilerStop", 4000, 0 },
	{ "cuVDPAUGetDevice", 3010, 0 },
	{ "cuVDPAUCtxCreate", 3020, 0 },
	{ "cuGraphicsVDPAURegisterVideoSurface", 3010, 0 },
	{ "cuGraphicsVDPAURegisterOutputSurface", 3010, 0 },
	{ "cuGetExportTable", 3000, 0 },
	{ "cuOccupancyMaxActiveBlocksPerMultiprocessorWithFlags", 7000, 0 },
	{ "cuOccupancyAvailableDynamicSMemPerBlock", 10020, 0 },
	{ "cuOccupancyMaxPotentialClusterSize", 11070, 0 },
	{ "cuOccupancyMaxActiveClusters", 11070, 0 },
	{ "cuMemAdvise", 8000, 0 },
	{ "cuMemPrefetchAsync", 8000, 0 },
	{ "cuMemPrefetchAsync", 8000, 2 },
	{ "cuMemAdvise", 12020, 0 },
	{ "cuMemPrefetchAsync", 12020, 0 },
	{ "cuMemPrefetchAsync", 12020, 2 },
	{ "cuMemPrefetchBatchAsync", 13000, 0 },
	{ "cuMemPrefetchBatchAsync", 13000, 2 },
	{ "cuMemDiscardBatchAsync", 13000, 0 },
	{ "cuMemDiscardBatchAsync", 13000, 2 },
	{ "cuMemDiscardAndPrefetchBatchAsync", 13000, 0 },
	{ "cuMemDiscardAndPrefetchBatchAsync", 13000, 2 },
	{ "cuMemRangeGetAttribute", 8000, 0 },
	{ "cuMemRangeGetAttributes", 8000, 0 },
	{ "cuGetErrorString", 6000, 0 },
	{ "cuGetErrorName", 6000, 0 },
	{ "cuGraphCreate", 10000, 0 },
	{ "cuGraphAddKernelNode", 12000, 0 },
	{ "cuGraphKernelNodeGetParams", 12000, 0 },
	{ "cuGraphKernelNodeSetParams", 12000, 0 },
	{ "cuGraphAddMemcpyNode", 10000, 0 },
	{ "cuGraphMemcpyNodeGetParams", 10000, 0 },
	{ "cuGraphMemcpyNodeSetParams", 10000, 0 },
	{ "cuGraphAddMemsetNode", 10000, 0 },
	{ "cuGraphMemsetNodeGetParams", 10000, 0 },
	{ "cuGraphMemsetNodeSetParams", 10000, 0 },
	{ "cuGraphAddHostNode", 10000, 0 },
	{ "cuGraphHostNodeGetParams", 10000, 0 },
	{ "cuGraphHostNodeSetParams", 10000, 0 },
	{ "cuGraphAddChildGraphNode", 10000, 0 },
	{ "cuGraphChildGraphNodeGetGraph", 10000, 0 },
	{ "cuGraphAddEmptyNode", 10000, 0 },
	{ "cuGraphAddEventRecordNode", 11010, 0 },
	{ "cuGraphEventRecordNodeGetEvent", 11010, 0 },
	{ "cuGraphEventRecordNodeSetEvent", 11010, 0 },
	{ "cuGraphAddEventWaitNode", 11010, 0 },
	{ "cuGraphEventWaitNodeGetEvent", 11010, 0 },
	{ "cuGraphEventWaitNodeSetEvent", 11010, 0 },
	{ "cuGraphAddExternalSemaphoresSignalNode", 11020, 0 },
	{ "cuGraphExternalSemaphoresSignalNodeGetParams", 11020, 0 },
	{ "cuGraphExternalSemaphoresSignalNodeSetParams", 11020, 0 },
	{ "cuGraphAddExternalSemaphoresWaitNode", 11020, 0 },
	{ "cuGraphExternalSemaphoresWaitNodeGetParams", 11020, 0 },
	{ "cuGraphExternalSemaphoresWaitNodeSetParams", 11020, 0 },
	{ "cuGraphExecExternalSemaphoresSignalNodeSetParams", 11020, 0 },
	{ "cuGraphExecExternalSemaphoresWaitNodeSetParams", 11020, 0 },
	{ "cuGraphAddMemAllocNode", 11040, 0 },
	{ "cuGraphMemAllocNodeGetParams", 11040, 0 },
	{ "cuGraphAddMemFreeNode", 11040, 0 },
	{ "cuGraphMemFreeNodeGetParams", 11040, 0 },
	{ "cuDeviceGraphMemTrim", 11040, 0 },
	{ "cuDeviceGetGraphMemAttribute", 11040, 0 },
	{ "cuDeviceSetGraphMemAttribute", 11040, 0 },
	{ "cuGraphClone", 10000, 0 },
	{ "cuGraphNodeFindInClone", 10000, 0 },
	{ "cuGraphNodeGetType", 10000, 0 },
	{ "cuGraphGetNodes", 10000, 0 },
	{ "cuGraphGetRootNodes", 10000, 0 },
	{ "cuGraphGetEdges", 10000, 0 },
	{ "cuGraphGetEdges", 12030, 0 },
	{ "cuGraphNodeGetDependencies", 10000, 0 },
	{ "cuGraphNodeGetDependencies", 12030, 0 },
	{ "cuGraphNodeGetDependentNodes", 10000, 0 },
	{ "cuGraphNodeGetDependentNodes", 12030, 0 },
	{ "cuGraphAddDependencies", 10000, 0 },
	{ "cuGraphAddDependencies", 12030, 0 },
	{ "cuGraphRemoveDependencies", 10000, 0 },
	{ "cuGraphRemoveDependencies", 12030, 0 },
	{ "cuGraphDestroyNode", 10000, 0 },
	{ "cuGraphInstantiate", 10000, 0 },
	{ "cuGraphInstantiate", 11000, 0 },
	{ "cuGraphInstantiateWithFlags", 11040, 0 },
	{ "cuGraphUpload", 11010, 0 },
	{ "cuGraphUpload", 11010, 2 },
	{ "cuGraphLaunch", 10000, 0 },
	{ "cuGraphLaunch", 10000, 2 },
	{ "cuGraphExecDestroy", 10000, 0 },
	{ "cuGraphDestroy", 10000, 0 },
	{ "cuStreamBeginCapture", 10000, 0 },
	{ "cuStreamBeginCapture", 10000, 2 },
	{ "cuStreamBeginCapture", 10010, 0 },
	{ "cuStreamBeginCapture", 10010, 2 },
	{ "cuStreamBeginCaptureToGraph", 12030, 0 },
	{ "cuStreamBeginCaptureToGraph", 12030, 2 },
	{ "cuStreamEndCapture", 10000, 0 },
	{ "cuStreamEndCapture", 10000, 2 },
	{ "cuStreamIsCapturing", 10000, 0 },
	{ "cuStreamIsCapturing", 10000, 2 },
	{ "cuStreamGetCaptureInfo", 10010, 0 },
	{ "cuStreamGetCaptureInfo", 10010, 2 },
	{ "cuStreamGetCaptureInfo", 11030, 0 },
	{ "cuStreamGetCaptureInfo", 11030, 2 },
	{ "cuStreamGetCaptureInfo", 12030, 0 },
	{ "cuStreamGetCaptureInfo", 12030, 2 },
	{ "cuStreamUpdateCaptureDependencies", 11030, 0 },
	{ "cuStreamUpdateCaptureDependencies", 11030, 2 },
	{ "cuStreamUpdateCaptureDependencies", 12030, 0 },
	{ "cuStreamUpdateCaptureDependencies", 12030, 2 },
	{ "cuGraphExecKernelNodeSetParams", 12000, 0 },
	{ "cuGraphExecMemcpyNodeSetParams", 10020, 0 },
	{ "cuGraphExecMemsetNodeSetParams", 10020, 0 },
	{ "cuGraphExecHostNodeSetParams", 10020, 0 },
	{ "cuGraphExecChildGraphNodeSetParams", 11010, 0 },
	{ "cuGraphExecEventRecordNodeSetEvent", 11010, 0 },
	{ "cuGraphExecEventWaitNodeSetEvent", 11010, 0 },
	{ "cuThreadExchangeStreamCaptureMode", 10010, 0 },
	{ "cuGraphExecUpdate", 12000, 0 },
	{ "cuGraphKernelNodeCopyAttributes", 11000, 0 },
	{ "cuGraphKernelNodeGetAttribute", 11000, 0 },
	{ "cuGraphKernelNodeSetAttribute", 11000, 0 },
	{ "cuGraphDebugDotPrint", 11030, 0 },
	{ "cuUserObjectCreate", 11030, 0 },
	{ "cuUserObjectRetain", 11030, 0 },
	{ "cuUserObjectRelease", 11030, 0 },
	{ "cuGraphRetainUserObject", 11030, 0 },
	{ "cuGraphReleaseUserObject", 11030, 0 },
	{ "cuGraphNodeSetEnabled", 11060, 0 },
	{ "cuGraphNodeGetEnabled", 11060, 0 },
	{ "cuGraphInstantiateWithParams", 12000, 0 },
	{ "cuGraphInstantiateWithParams", 12000, 2 },
	{ "cuGraphExecGetFlags", 12000, 0 },
	{ "cuGraphAddNode", 12020, 0 },
	{ "cuGraphAddNode", 12030, 0 },
	{ "cuGraphNodeSetParams", 12020, 0 },
	{ "cuGraphExecNodeSetParams", 12020, 0 },
	{ "cuGraphConditionalHandleCreate", 12030, 0 },
	{ "cuDeviceRegisterAsyncNotification", 12040, 0 },
	{ "cuDeviceUnregisterAsyncNotification", 12040, 0 },
	{ "cuLogsRegisterCallback", 12090, 0 },
	{ "cuLogsUnregisterCallback", 12090, 0 },
	{ "cuLogsCurrent", 12090, 0 },
	{ "cuLogsDumpToFile", 12090, 0 },
	{ "cuLogsDumpToMemory", 12090, 0 },
};

Test(cuda_table, reference_has_every_request)
{
	cr_assert_eq(sizeof(reference) / sizeof(reference[0]), 440);
}

Test(cuda_table, every_runtime_request_gets_the_right_variant_or_passes_through)
{
	unsigned hooked = 0, passed = 0;
	for (size_t k = 0; k < sizeof(reference) / sizeof(reference[0]); k++) {
		const char *want = expected(reference[k].name, reference[k].ver, reference[k].flags);
		int i = sp_cuda_find_proc(reference[k].name, reference[k].ver, (uint64_t)reference[k].flags);
		if (!want) {
			cr_expect_lt(i, 0, "%s ver=%d flags=%d: not hooked, must pass through, got %s", reference[k].name,
				     reference[k].ver, reference[k].flags, i >= 0 ? sp_cuda_table[i].name : "");
			passed++;
			continue;
		}
		cr_expect_geq(i, 0, "%s ver=%d flags=%d: hooked, but no wrapper handed out", reference[k].name,
			      reference[k].ver, reference[k].flags);
		if (i >= 0)
			cr_expect_str_eq(sp_cuda_table[i].name, want, "%s ver=%d flags=%d", reference[k].name,
					 reference[k].ver, reference[k].flags);
		hooked++;
	}
	/* the families of docs/cuda-capture.md are all requested by the runtime */
	cr_expect_geq(hooked, 70);
	cr_expect_geq(passed, 300);
}

Test(cuda_table, export_table_and_empty_name_pass_through)
{
	cr_expect_lt(sp_cuda_find_proc("cuGetExportTable", 3000, 0), 0);
	cr_expect_lt(sp_cuda_find_proc("", 0, 0), 0);
	cr_expect_lt(sp_cuda_find_proc(NULL, 13000, 0), 0);
}

Test(cuda_table, legacy_versions_pass_through)
{
	/* below 3020 cuMemcpyHtoD is the 32-bit variant, which we do not wrap */
	cr_expect_lt(sp_cuda_find_proc("cuMemcpyHtoD", 2000, 0), 0);
	cr_expect_lt(sp_cuda_find_proc("cuMemAlloc", 3010, 0), 0);
	/* an unknown next major may change signatures */
	cr_expect_lt(sp_cuda_find_proc("cuMemAlloc", 14000, 0), 0);
}

Test(cuda_table, per_thread_flag_falls_back_when_no_variant)
{
	int i = sp_cuda_find_proc("cuMemAlloc", 13000, 2);
	cr_assert_geq(i, 0);
	cr_expect_str_eq(sp_cuda_table[i].name, "cuMemAlloc_v2");
	i = sp_cuda_find_proc("cuEventQuery", 13000, 2);
	cr_assert_geq(i, 0);
	cr_expect_str_eq(sp_cuda_table[i].name, "cuEventQuery");
}

Test(cuda_table, exact_names_never_prefixes)
{
	int a = sp_cuda_find_name("cuMemcpy"), b = sp_cuda_find_name("cuMemcpyAsync");
	cr_assert_geq(a, 0);
	cr_assert_geq(b, 0);
	cr_expect_neq(a, b);
	cr_expect_str_eq(sp_cuda_table[a].name, "cuMemcpy");
	cr_expect_lt(sp_cuda_find_name("cuMemcp"), 0);
	cr_expect_lt(sp_cuda_find_name("cuMemcpyX"), 0);
	cr_expect_lt(sp_cuda_find_name("cudaMemcpy "), 0);
	cr_expect_lt(sp_cuda_find_name("cuGetExportTable"), 0);
	cr_expect_geq(sp_cuda_find_name("cudaMemcpyAsync_ptsz"), 0);
	cr_expect_geq(sp_cuda_find_name("cuMemcpyHtoD_v2_ptds"), 0);
}

/* What PyTorch's expandable segments and NCCL ask cudaGetDriverEntryPoint / cuGetProcAddress for. */
Test(cuda_table, vmm_entry_points_get_their_wrappers)
{
	static const char *const names[] = {"cuMemCreate", "cuMemMap", "cuMemUnmap", "cuMemRelease",
					    "cuMemRetainAllocationHandle"};
	for (size_t k = 0; k < sizeof(names) / sizeof(names[0]); k++)
		for (int ver = 12000; ver <= 13000; ver += 1000) {
			int i = sp_cuda_find_proc(names[k], ver, 0);
			cr_expect(i >= 0 && !strcmp(sp_cuda_table[i].name, names[k]), "%s at %d: %s", names[k], ver,
				  i >= 0 ? sp_cuda_table[i].name : "not hooked");
		}
}

Test(cuda_table, every_entry_has_its_api_name)
{
	for (int i = 0; i < SP_CUDA__COUNT; i++) {
		cr_expect_str_eq(sp_api_name[sp_cuda_table[i].api], sp_cuda_table[i].name);
		cr_expect_eq(sp_cuda_find_name(sp_cuda_table[i].name), i);
	}
}

#endif /* SP_T_BASES_ONLY */
