/*
 * test_simgpu.c - the simulated GPU's own semantics (tests/simgpu/), checked
 * against what CUDA documents and what the test itself does (sleeps, bytes,
 * addresses), never against the simulator's own reports alone.
 *
 *   1. loading: the simulator is dlopen'ed from build/simgpu at run time (the test
 *      binary does not link it); each Criterion test runs in its own process, so
 *      each gets a fresh simulated GPU configured by the SIMGPU_* set before init
 *   2. entry points: cuGetProcAddress against cuda.h's own #defines; the runtime's
 *      start-up requests against NVIDIA's list
 *   3. streams: FIFO order, legacy default stream ordering, non-blocking streams,
 *      cross-stream waits, device sync
 *   4. copies: pageable async is host-synchronous, bandwidths, data movement, 2D
 *   5. events: timing of a kernel that sleeps
 *   6. memory: first-fit fragmentation and OOM with free >= request, pointer attributes
 *   7. capture and graphs; lazy initialisation (no thread before CUDA is used)
 */
#include <criterion/criterion.h>

#include <cuda.h>
#include <cuda_runtime_api.h>
#include <dirent.h>
#include <dlfcn.h>
#include <pthread.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <sys/wait.h>
#include <unistd.h>

#include "../simgpu/simgpu.h"
#include "testlib.h"

/* ---------------------------------------------------------------- 1. loading */

static void *drv, *rt;

#define XSTR(x) STR(x)
#define STR(x)	#x
/* A driver or runtime function by the name cuda.h gives it (macros expanded, e.g.
 * cuMemAlloc -> cuMemAlloc_v2), typed with cuda.h's prototype. */
#define D(fn) ((__typeof__(&fn))dsym(drv, XSTR(fn)))
#define R(fn) ((__typeof__(&fn))dsym(rt, XSTR(fn)))

static void *dsym(void *h, const char *name)
{
	void *p = dlsym(h, name);

	cr_assert_not_null(p, "simulator lacks %s", name);
	return p;
}

static void load_driver(void)
{
	const char *path = sp_t_build("simgpu/libcuda.so.1");

	drv = dlopen(path, RTLD_NOW | RTLD_GLOBAL);
	cr_assert_not_null(drv, "dlopen %s: %s", path, dlerror());
}

/* The runtime finds libcuda.so.1 already loaded (same soname), so both share one GPU. */
static void load_runtime(void)
{
	const char *path = sp_t_build("simgpu/libcudart.so.12");

	load_driver();
	rt = dlopen(path, RTLD_NOW | RTLD_GLOBAL);
	cr_assert_not_null(rt, "dlopen %s: %s", path, dlerror());
}

/* Driver with a current context on device 0. */
static CUcontext drv_init(void)
{
	CUcontext c;

	load_driver();
	cr_assert_eq(D(cuInit)(0), CUDA_SUCCESS);
	cr_assert_eq(D(cuDevicePrimaryCtxRetain)(&c, 0), CUDA_SUCCESS);
	cr_assert_eq(D(cuCtxSetCurrent)(c), CUDA_SUCCESS);
	return c;
}

static uint64_t now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

/* Kernels: host functions run by the stream's worker. Arguments (NULL-terminated,
 * at most 8 bytes each) are copied at launch, so locals may be passed. */
static void k_sleep(void **args)
{
	int ms = *(int *)args[0];
	uint64_t *t = *(uint64_t **)args[1]; /* t[0] start, t[1] end */

	t[0] = now_ns();
	usleep((useconds_t)ms * 1000);
	t[1] = now_ns();
}

static void k_append(void **args)
{
	int *log = *(int **)args[0];
	int v = *(int *)args[1];

	log[++log[0]] = v;
}

static void launch_sleep(CUstream s, int ms, uint64_t *t)
{
	void *args[] = {&ms, &t, NULL};

	cr_assert_eq(D(cuLaunchKernel)((CUfunction)(void *)k_sleep, 1, 1, 1, 1, 1, 1, 0, s, args, NULL), CUDA_SUCCESS);
}

/* ---------------------------------------------------------------- 2. entry points */

static void *proc(const char *name, int ver, int flags, CUdriverProcAddressQueryResult *st)
{
	void *p = NULL;

	D(cuGetProcAddress)(name, &p, ver, (cuuint64_t)flags, st);
	return p;
}

/* cuda.h maps each API name to its current versioned symbol; the driver must hand
 * out that very symbol for a CUDA 13 request. The expected names come from
 * cuda.h's macros, expanded by the compiler, not from the simulator. */
Test(simgpu, proc_address_follows_cuda_h)
{
	/* Every name cuda.h #defines (but the texture references it no longer declares,
	 * and cuGraphInstantiate, an alias of another function), plus a few plain ones.
	 * (cuCtxSynchronize and cuCtxGetDevice are not #defined: a CUDA 13 request gets
	 * their _v2, whose prototype differs; see proc_address_versions_and_ptds.) */
	static const char *const pairs[][2] = {
		{"cuCtxCreate", XSTR(cuCtxCreate)},
		{"cuModuleGetGlobal", XSTR(cuModuleGetGlobal)},
		{"cuMemGetInfo", XSTR(cuMemGetInfo)},
		{"cuMemAlloc", XSTR(cuMemAlloc)},
		{"cuMemAllocPitch", XSTR(cuMemAllocPitch)},
		{"cuMemFree", XSTR(cuMemFree)},
		{"cuMemGetAddressRange", XSTR(cuMemGetAddressRange)},
		{"cuMemAllocHost", XSTR(cuMemAllocHost)},
		{"cuMemHostGetDevicePointer", XSTR(cuMemHostGetDevicePointer)},
		{"cuMemAdvise", XSTR(cuMemAdvise)},
		{"cuMemPrefetchAsync", XSTR(cuMemPrefetchAsync)},
		{"cuMemPrefetchBatchAsync", XSTR(cuMemPrefetchBatchAsync)},
		{"cuMemDiscardBatchAsync", XSTR(cuMemDiscardBatchAsync)},
		{"cuMemDiscardAndPrefetchBatchAsync", XSTR(cuMemDiscardAndPrefetchBatchAsync)},
		{"cuMemcpyHtoD", XSTR(cuMemcpyHtoD)},
		{"cuMemcpyDtoH", XSTR(cuMemcpyDtoH)},
		{"cuMemcpyDtoD", XSTR(cuMemcpyDtoD)},
		{"cuMemcpyDtoA", XSTR(cuMemcpyDtoA)},
		{"cuMemcpyAtoD", XSTR(cuMemcpyAtoD)},
		{"cuMemcpyHtoA", XSTR(cuMemcpyHtoA)},
		{"cuMemcpyAtoH", XSTR(cuMemcpyAtoH)},
		{"cuMemcpyAtoA", XSTR(cuMemcpyAtoA)},
		{"cuMemcpyHtoAAsync", XSTR(cuMemcpyHtoAAsync)},
		{"cuMemcpyAtoHAsync", XSTR(cuMemcpyAtoHAsync)},
		{"cuMemcpy2D", XSTR(cuMemcpy2D)},
		{"cuMemcpy2DUnaligned", XSTR(cuMemcpy2DUnaligned)},
		{"cuMemcpy3D", XSTR(cuMemcpy3D)},
		{"cuMemcpyHtoDAsync", XSTR(cuMemcpyHtoDAsync)},
		{"cuMemcpyDtoHAsync", XSTR(cuMemcpyDtoHAsync)},
		{"cuMemcpyDtoDAsync", XSTR(cuMemcpyDtoDAsync)},
		{"cuMemcpy2DAsync", XSTR(cuMemcpy2DAsync)},
		{"cuMemcpy3DAsync", XSTR(cuMemcpy3DAsync)},
		{"cuMemcpyBatchAsync", XSTR(cuMemcpyBatchAsync)},
		{"cuMemcpy3DBatchAsync", XSTR(cuMemcpy3DBatchAsync)},
		{"cuMemsetD8", XSTR(cuMemsetD8)},
		{"cuMemsetD16", XSTR(cuMemsetD16)},
		{"cuMemsetD32", XSTR(cuMemsetD32)},
		{"cuMemsetD2D8", XSTR(cuMemsetD2D8)},
		{"cuMemsetD2D16", XSTR(cuMemsetD2D16)},
		{"cuMemsetD2D32", XSTR(cuMemsetD2D32)},
		{"cuArrayCreate", XSTR(cuArrayCreate)},
		{"cuArrayGetDescriptor", XSTR(cuArrayGetDescriptor)},
		{"cuArray3DCreate", XSTR(cuArray3DCreate)},
		{"cuArray3DGetDescriptor", XSTR(cuArray3DGetDescriptor)},
		{"cuGraphicsResourceGetMappedPointer", XSTR(cuGraphicsResourceGetMappedPointer)},
		{"cuCtxDestroy", XSTR(cuCtxDestroy)},
		{"cuCtxPopCurrent", XSTR(cuCtxPopCurrent)},
		{"cuCtxPushCurrent", XSTR(cuCtxPushCurrent)},
		{"cuStreamDestroy", XSTR(cuStreamDestroy)},
		{"cuEventDestroy", XSTR(cuEventDestroy)},
		{"cuLinkCreate", XSTR(cuLinkCreate)},
		{"cuLinkAddData", XSTR(cuLinkAddData)},
		{"cuLinkAddFile", XSTR(cuLinkAddFile)},
		{"cuMemHostRegister", XSTR(cuMemHostRegister)},
		{"cuGraphicsResourceSetMapFlags", XSTR(cuGraphicsResourceSetMapFlags)},
		{"cuStreamBeginCapture", XSTR(cuStreamBeginCapture)},
		{"cuDevicePrimaryCtxRelease", XSTR(cuDevicePrimaryCtxRelease)},
		{"cuDevicePrimaryCtxReset", XSTR(cuDevicePrimaryCtxReset)},
		{"cuDevicePrimaryCtxSetFlags", XSTR(cuDevicePrimaryCtxSetFlags)},
		{"cuDeviceGetUuid", XSTR(cuDeviceGetUuid)},
		{"cuIpcOpenMemHandle", XSTR(cuIpcOpenMemHandle)},
		{"cuGraphExecUpdate", XSTR(cuGraphExecUpdate)},
		{"cuGetProcAddress", XSTR(cuGetProcAddress)},
		{"cuGraphAddKernelNode", XSTR(cuGraphAddKernelNode)},
		{"cuGraphKernelNodeGetParams", XSTR(cuGraphKernelNodeGetParams)},
		{"cuGraphKernelNodeSetParams", XSTR(cuGraphKernelNodeSetParams)},
		{"cuGraphExecKernelNodeSetParams", XSTR(cuGraphExecKernelNodeSetParams)},
		{"cuGraphGetEdges", XSTR(cuGraphGetEdges)},
		{"cuGraphNodeGetDependencies", XSTR(cuGraphNodeGetDependencies)},
		{"cuGraphNodeGetDependentNodes", XSTR(cuGraphNodeGetDependentNodes)},
		{"cuGraphAddDependencies", XSTR(cuGraphAddDependencies)},
		{"cuGraphRemoveDependencies", XSTR(cuGraphRemoveDependencies)},
		{"cuGraphAddNode", XSTR(cuGraphAddNode)},
		{"cuEventElapsedTime", XSTR(cuEventElapsedTime)},
		{"cuStreamWriteValue32", XSTR(cuStreamWriteValue32)},
		{"cuStreamWaitValue32", XSTR(cuStreamWaitValue32)},
		{"cuStreamWriteValue64", XSTR(cuStreamWriteValue64)},
		{"cuStreamWaitValue64", XSTR(cuStreamWaitValue64)},
		{"cuStreamBatchMemOp", XSTR(cuStreamBatchMemOp)},
		{"cuStreamGetCaptureInfo", XSTR(cuStreamGetCaptureInfo)},
		{"cuStreamUpdateCaptureDependencies", XSTR(cuStreamUpdateCaptureDependencies)},
		{"cuDeviceTotalMem", XSTR(cuDeviceTotalMem)},
		{"cuLaunchKernel", XSTR(cuLaunchKernel)},
		{"cuStreamSynchronize", XSTR(cuStreamSynchronize)},
		{"cuLaunchKernelEx", XSTR(cuLaunchKernelEx)},
		{"cuGraphLaunch", XSTR(cuGraphLaunch)},
		{"cuMemAllocAsync", XSTR(cuMemAllocAsync)},
		{"cuMemFreeAsync", XSTR(cuMemFreeAsync)},
	};
	CUdriverProcAddressQueryResult st;

	load_driver();
	for (size_t i = 0; i < sizeof(pairs) / sizeof(pairs[0]); i++) {
		void *want = dlsym(drv, pairs[i][1]);
		cr_assert_not_null(want, "%s not exported", pairs[i][1]);
		cr_expect_eq(proc(pairs[i][0], 13000, 0, &st), want, "%s -> %s", pairs[i][0], pairs[i][1]);
		cr_expect_eq(st, CU_GET_PROC_ADDRESS_SUCCESS);
	}
}

/* Versions and the per-thread flag select among variants, as NVIDIA's runtime relies on. */
Test(simgpu, proc_address_versions_and_ptds)
{
	CUdriverProcAddressQueryResult st;

	load_driver();
	cr_expect_eq(proc("cuMemcpyHtoD", 3020, 0, &st), dlsym(drv, "cuMemcpyHtoD_v2"));
	cr_expect_eq(proc("cuMemcpyHtoD", 7000, 2, &st), dlsym(drv, "cuMemcpyHtoD_v2_ptds"));
	cr_expect_eq(proc("cuMemcpyHtoDAsync", 7000, 2, &st), dlsym(drv, "cuMemcpyHtoDAsync_v2_ptsz"));
	cr_expect_eq(proc("cuMemcpyHtoD", 2000, 0, &st), dlsym(drv, "cuMemcpyHtoD"));
	cr_expect_eq(proc("cuCtxSynchronize", 2000, 0, &st), dlsym(drv, "cuCtxSynchronize"));
	cr_expect_eq(proc("cuCtxSynchronize", 13000, 0, &st), dlsym(drv, "cuCtxSynchronize_v2"));
	cr_expect_eq(proc("cuLaunchKernel", 7000, 2, &st), dlsym(drv, "cuLaunchKernel_ptsz"));
	cr_expect_eq(proc("cuStreamGetCaptureInfo", 11030, 2, &st), dlsym(drv, "cuStreamGetCaptureInfo_v2_ptsz"));
	cr_expect_eq(proc("cuStreamGetCaptureInfo", 12030, 2, &st), dlsym(drv, "cuStreamGetCaptureInfo_v3_ptsz"));
	cr_expect_eq(proc("cuMemcpy", 7000, 2, &st), dlsym(drv, "cuMemcpy_ptds"));
	cr_expect_eq(proc("cuMemsetD8Async", 7000, 2, &st), dlsym(drv, "cuMemsetD8Async_ptsz"));
	cr_expect_eq(proc("cuMemAlloc", 3020, 2, &st), dlsym(drv, "cuMemAlloc_v2"), "no ptds flavour: plain one");

	cr_expect_null(proc("cuMemAllocAsync", 11000, 0, &st));
	cr_expect_eq(st, CU_GET_PROC_ADDRESS_VERSION_NOT_SUFFICIENT);
	cr_expect_null(proc("cuNoSuchFunction", 13000, 0, &st));
	cr_expect_eq(st, CU_GET_PROC_ADDRESS_SYMBOL_NOT_FOUND);
	cr_expect_null(proc("cuMemAllo", 13000, 0, &st), "exact names, never prefixes");
	cr_expect_null(proc("", 0, 0, &st));
}

/* The runtime's start-up asks exactly what NVIDIA's CUDA 13.0 runtime asks, in order
 * (tests/simgpu/cudart_entry_points.txt, observed from libcudart.so.13). */
Test(simgpu, runtime_requests_match_reference)
{
	char *dir = sp_t_tmpdir("simgpu-procs"), log[512], *got, *ref;
	int n = -1;

	snprintf(log, sizeof(log), "%s/procs.txt", dir);
	setenv("SIMGPU_LOG_PROCS", log, 1);
	load_runtime();
	cr_assert_eq(R(cudaGetDeviceCount)(&n), cudaSuccess);
	cr_assert_eq(n, 1);
	got = sp_t_read_file(log, NULL);
	ref = sp_t_read_file("tests/simgpu/cudart_entry_points.txt", NULL);
	cr_assert_not_null(got);
	cr_assert_not_null(ref);
	/* Compare line by line, skipping the reference's comment lines. */
	{
		char *rs = NULL, *gs = NULL, *rl = strtok_r(ref, "\n", &rs), *gl = strtok_r(got, "\n", &gs);
		int lines = 0;
		for (; rl; rl = strtok_r(NULL, "\n", &rs)) {
			if (rl[0] == '#')
				continue;
			cr_assert_not_null(gl, "runtime stopped after %d requests", lines);
			cr_assert_str_eq(gl, rl, "request %d", lines + 1);
			lines++;
			gl = strtok_r(NULL, "\n", &gs);
		}
		cr_expect_eq(lines, 440);
		cr_expect_null(gl, "extra request: %s", gl);
	}
	free(got);
	free(ref);
	sp_t_rmrf(dir);
}

Test(simgpu, export_table)
{
	static const char id[16] = "simgpu-export-v1";
	const void *t = NULL;
	CUuuid u;

	load_driver();
	memcpy(u.bytes, id, 16);
	cr_expect_eq(D(cuGetExportTable)(&t, &u), CUDA_SUCCESS);
	cr_expect_not_null(t);
	u.bytes[0] = 'X';
	cr_expect_eq(D(cuGetExportTable)(&t, &u), CUDA_ERROR_INVALID_VALUE);
}

/* ---------------------------------------------------------------- 3. streams */

Test(simgpu, stream_runs_in_fifo_order)
{
	int log[33] = {0};
	int *lp = log;
	CUstream s;

	drv_init();
	cr_assert_eq(D(cuStreamCreate)(&s, 0), CUDA_SUCCESS);
	for (int i = 1; i <= 32; i++) {
		void *args[] = {&lp, &i, NULL};
		cr_assert_eq(D(cuLaunchKernel)((CUfunction)(void *)k_append, 1, 1, 1, 1, 1, 1, 0, s, args, NULL),
			     CUDA_SUCCESS);
	}
	cr_assert_eq(D(cuStreamSynchronize)(s), CUDA_SUCCESS);
	cr_assert_eq(log[0], 32);
	for (int i = 1; i <= 32; i++)
		cr_expect_eq(log[i], i);
}

/* Work on the legacy default stream starts after earlier work of blocking streams,
 * and later work on a blocking stream waits for it. */
Test(simgpu, legacy_stream_orders_with_blocking_streams)
{
	uint64_t a[2] = {0}, b[2] = {0}, c[2] = {0};
	CUstream s;

	drv_init();
	cr_assert_eq(D(cuStreamCreate)(&s, CU_STREAM_DEFAULT), CUDA_SUCCESS);
	launch_sleep(s, 60, a);
	launch_sleep(NULL, 30, b); /* legacy */
	launch_sleep(s, 1, c);
	cr_assert_eq(D(cuCtxSynchronize)(), CUDA_SUCCESS);
	cr_expect_geq(b[0], a[1], "legacy kernel started before the blocking stream's earlier kernel ended");
	cr_expect_geq(c[0], b[1], "blocking stream's later kernel started before the legacy kernel ended");
}

Test(simgpu, nonblocking_stream_ignores_legacy)
{
	uint64_t a[2] = {0}, b[2] = {0};
	CUstream s;

	drv_init();
	cr_assert_eq(D(cuStreamCreate)(&s, CU_STREAM_NON_BLOCKING), CUDA_SUCCESS);
	launch_sleep(s, 200, a);
	launch_sleep(CU_STREAM_LEGACY, 1, b);
	cr_assert_eq(D(cuStreamSynchronize)(CU_STREAM_LEGACY), CUDA_SUCCESS);
	cr_expect_neq(b[1], 0, "legacy stream sync returned before its work ended");
	cr_assert_eq(D(cuCtxSynchronize)(), CUDA_SUCCESS);
	cr_expect_neq(a[1], 0, "context sync returned before all work ended");
	cr_expect_lt(b[0], a[1], "legacy work waited for a non-blocking stream");
}

/* The per-thread default stream (the _ptsz entry points with stream 0) is a stream
 * of its own: it does not wait for a non-blocking stream, and is not the legacy one. */
Test(simgpu, per_thread_stream_is_distinct)
{
	unsigned long long id_legacy = 0, id_pt = 0;
	uint64_t a[2] = {0}, b[2] = {0};
	int ms = 1;
	uint64_t *bp = b;
	void *args[] = {&ms, &bp, NULL};
	CUstream s;

	drv_init();
	cr_assert_eq(D(cuStreamGetId)(CU_STREAM_LEGACY, &id_legacy), CUDA_SUCCESS);
	cr_assert_eq(((__typeof__(&cuStreamGetId))dsym(drv, "cuStreamGetId_ptsz"))(NULL, &id_pt), CUDA_SUCCESS);
	cr_expect_neq(id_legacy, id_pt);
	cr_assert_eq(D(cuStreamCreate)(&s, CU_STREAM_NON_BLOCKING), CUDA_SUCCESS);
	launch_sleep(s, 150, a);
	cr_assert_eq(((__typeof__(&cuLaunchKernel))dsym(drv, "cuLaunchKernel_ptsz"))((CUfunction)(void *)k_sleep, 1, 1,
										     1, 1, 1, 1, 0, NULL, args, NULL),
		     CUDA_SUCCESS);
	cr_assert_eq(D(cuStreamSynchronize)(CU_STREAM_PER_THREAD), CUDA_SUCCESS);
	cr_expect_neq(b[1], 0);
	cr_assert_eq(D(cuCtxSynchronize)(), CUDA_SUCCESS);
	cr_expect_lt(b[0], a[1], "the per-thread stream waited for a non-blocking stream");
}

Test(simgpu, stream_wait_event_orders_streams)
{
	uint64_t a[2] = {0}, b[2] = {0};
	CUstream s1, s2;
	CUevent e;

	drv_init();
	cr_assert_eq(D(cuStreamCreate)(&s1, CU_STREAM_NON_BLOCKING), CUDA_SUCCESS);
	cr_assert_eq(D(cuStreamCreate)(&s2, CU_STREAM_NON_BLOCKING), CUDA_SUCCESS);
	cr_assert_eq(D(cuEventCreate)(&e, CU_EVENT_DISABLE_TIMING), CUDA_SUCCESS);
	launch_sleep(s1, 60, a);
	cr_assert_eq(D(cuEventRecord)(e, s1), CUDA_SUCCESS);
	cr_assert_eq(D(cuEventQuery)(e), CUDA_ERROR_NOT_READY);
	cr_assert_eq(D(cuStreamWaitEvent)(s2, e, 0), CUDA_SUCCESS);
	launch_sleep(s2, 1, b);
	cr_assert_eq(D(cuStreamSynchronize)(s2), CUDA_SUCCESS);
	cr_expect_geq(b[0], a[1]);
	cr_expect_eq(D(cuEventQuery)(e), CUDA_SUCCESS);
	cr_expect_eq(D(cuStreamQuery)(s1), CUDA_SUCCESS);
}

/* ---------------------------------------------------------------- 4. copies */

/* An Async copy from pageable memory returns only when done (staging), after the
 * work queued before it; one from pinned memory returns at once while the stream
 * still works. A kernel queued first makes both facts independent of host timing. */
Test(simgpu, pageable_async_copy_is_host_synchronous)
{
	size_t n = 16u << 20; /* 16 MiB at 0.5 GB/s: 33.5 ms */
	double want_ns = (double)n / 0.5;
	char *host = malloc(n), *pinned;
	CUdeviceptr d;
	CUstream s;
	uint64_t k[2] = {0, 0}, t1;

	setenv("SIMGPU_PAGEABLE_GBPS", "0.5", 1);
	setenv("SIMGPU_PINNED_GBPS", "0.5", 1);
	drv_init();
	memset(host, 7, n);
	cr_assert_eq(D(cuMemAlloc)(&d, n), CUDA_SUCCESS);
	cr_assert_eq(D(cuMemAllocHost)((void **)&pinned, n), CUDA_SUCCESS);
	memset(pinned, 9, n);
	cr_assert_eq(D(cuStreamCreate)(&s, CU_STREAM_NON_BLOCKING), CUDA_SUCCESS);

	/*
	 * Measured from before the launch, not from the kernel's own end: a
	 * worker woken late runs the kernel late, but the stream's timeline
	 * still starts it at its submission and the copy right after it (the
	 * timeline catches up, drv_exec.c), so the copy can end less than its
	 * duration after the kernel's late end (6.8 ms instead of 33.5 seen on a
	 * loaded machine). The call returns after both on the timeline.
	 */
	uint64_t t0 = now_ns();
	launch_sleep(s, 100, k);
	cr_assert_eq(D(cuMemcpyHtoDAsync)(d, host, n, s), CUDA_SUCCESS);
	t1 = now_ns();
	cr_assert_neq(k[1], 0, "pageable async returned before the kernel queued ahead of it ended");
	cr_expect_geq((double)(t1 - t0), 100e6 + want_ns * 0.95,
		      "pageable async returned %.1f ms after the 100 ms kernel's launch, want %.1f",
		      (double)(t1 - t0) / 1e6, (100e6 + want_ns) / 1e6);
	/* Its last 64 KiB may still be in flight: pageable_h2d_returns_once_staged. */

	k[0] = k[1] = 0;
	launch_sleep(s, 100, k);
	cr_assert_eq(D(cuMemcpyHtoDAsync)(d, pinned, n, s), CUDA_SUCCESS);
	cr_expect_eq(k[1], 0, "pinned async waited for the kernel queued ahead of it");
	cr_expect_eq(D(cuStreamQuery)(s), CUDA_ERROR_NOT_READY);
	cr_assert_eq(D(cuStreamSynchronize)(s), CUDA_SUCCESS);
	free(host);
}

/*
 * CUDA Driver API, "API synchronization behavior", Memset: "The synchronous memset
 * functions are asynchronous with respect to the host except when the target is
 * pinned host memory or a Unified Memory region, in which case they are fully
 * synchronous. The Async versions are always asynchronous with respect to the host."
 * A 100 ms kernel queued first on a blocking stream (which the legacy stream of the
 * synchronous calls waits for) tells whether a call waited: k[1] is set at its end.
 */
Test(simgpu, memset_host_sync_follows_target_and_api)
{
	size_t n = 1u << 20;
	unsigned char *pinned;
	CUdeviceptr d, man;
	CUstream s;
	uint64_t k[2] = {0, 0};

	drv_init();
	cr_assert_eq(D(cuMemAllocHost)((void **)&pinned, n), CUDA_SUCCESS);
	cr_assert_eq(D(cuMemAlloc)(&d, n), CUDA_SUCCESS);
	cr_assert_eq(D(cuMemAllocManaged)(&man, n, CU_MEM_ATTACH_GLOBAL), CUDA_SUCCESS);
	cr_assert_eq(D(cuStreamCreate)(&s, CU_STREAM_DEFAULT), CUDA_SUCCESS);

	launch_sleep(s, 100, k);
	cr_assert_eq(D(cuMemsetD8Async)((CUdeviceptr)(uintptr_t)pinned, 1, n, s), CUDA_SUCCESS);
	cr_expect_eq(k[1], 0, "an Async memset on pinned memory waited for the stream");
	cr_assert_eq(D(cuCtxSynchronize)(), CUDA_SUCCESS);
	cr_expect_eq(pinned[n - 1], 1);

	k[0] = k[1] = 0;
	launch_sleep(s, 100, k);
	cr_assert_eq(D(cuMemsetD8)((CUdeviceptr)(uintptr_t)pinned, 2, n), CUDA_SUCCESS);
	cr_expect_neq(k[1], 0, "a synchronous memset on pinned memory returned before the work ahead ended");
	cr_expect_eq(pinned[0], 2, "a synchronous memset on pinned memory returned before it was done");

	k[0] = k[1] = 0;
	launch_sleep(s, 100, k);
	cr_assert_eq(D(cuMemsetD32)(man, 0x01020304, n / 4), CUDA_SUCCESS);
	cr_expect_neq(k[1], 0, "a synchronous memset on managed memory returned before the work ahead ended");
	cr_expect_eq(((uint32_t *)(uintptr_t)man)[n / 4 - 1], 0x01020304);

	k[0] = k[1] = 0;
	launch_sleep(s, 100, k);
	cr_assert_eq(D(cuMemsetD8)(d, 3, n), CUDA_SUCCESS);
	cr_expect_eq(k[1], 0, "a synchronous memset on device memory waited for the host");
	cr_assert_eq(D(cuCtxSynchronize)(), CUDA_SUCCESS);
}

/*
 * "API synchronization behavior", Memcpy, Asynchronous: "For transfers from any host
 * memory to any host memory, the function is fully synchronous with respect to the
 * host", pinned memory included. The copy returns after the kernel queued ahead of it
 * and with the data in place, through the driver and through the runtime.
 */
Test(simgpu, host_to_host_async_copy_is_synchronous)
{
	size_t n = 1u << 20;
	unsigned char *a, *b;
	CUstream s;
	uint64_t k[2] = {0, 0};

	load_runtime();
	cr_assert_eq(R(cudaMallocHost)((void **)&a, n), cudaSuccess);
	cr_assert_eq(R(cudaMallocHost)((void **)&b, n), cudaSuccess);
	memset(a, 5, n);
	cr_assert_eq(D(cuStreamCreate)(&s, CU_STREAM_NON_BLOCKING), CUDA_SUCCESS);

	launch_sleep(s, 100, k);
	cr_assert_eq(D(cuMemcpyAsync)((CUdeviceptr)(uintptr_t)b, (CUdeviceptr)(uintptr_t)a, n, s), CUDA_SUCCESS);
	cr_expect_neq(k[1], 0, "a pinned-to-pinned cuMemcpyAsync returned before the kernel ahead ended");
	cr_expect_eq(b[n - 1], 5, "a pinned-to-pinned cuMemcpyAsync returned before the data moved");

	k[0] = k[1] = 0;
	memset(a, 6, n);
	launch_sleep(s, 100, k);
	cr_assert_eq(R(cudaMemcpyAsync)(b, a, n, cudaMemcpyHostToHost, (cudaStream_t)s), cudaSuccess);
	cr_expect_neq(k[1], 0, "a pinned-to-pinned cudaMemcpyAsync returned before the kernel ahead ended");
	cr_expect_eq(b[0], 6, "a pinned-to-pinned cudaMemcpyAsync returned before the data moved");
}

/*
 * "API synchronization behavior", Memcpy, from pageable host memory to device memory:
 * "a stream sync is performed before the copy is initiated. The function will return
 * once the pageable buffer has been copied to the staging memory for DMA transfer to
 * device memory, but the DMA to final destination may not have completed"; Async, "the
 * driver may synchronize with the stream and stage the copy into pinned memory". So
 * the call returns after the work queued ahead of it, with the copy's end still to
 * come, and the program may reuse its buffer at once. At 0.5 MB/s, the 64 KiB that
 * the Programming Guide lets a host-to-device copy leave in flight take 131 ms: long
 * enough for a stream query right after the return to see the copy still running.
 */
Test(simgpu, pageable_h2d_returns_once_staged)
{
	size_t n = 256u << 10, tail = 64u << 10;
	double bw = 0.0005, tail_ns = (double)tail / bw, body_ns = (double)(n - tail) / bw;
	unsigned char *host = malloc(n), *back = malloc(n);
	CUdeviceptr d;
	CUstream s;
	uint64_t k[2] = {0, 0}, t0, t1;

	setenv("SIMGPU_PAGEABLE_GBPS", "0.0005", 1);
	drv_init();
	cr_assert_eq(D(cuMemAlloc)(&d, n), CUDA_SUCCESS);
	cr_assert_eq(D(cuStreamCreate)(&s, CU_STREAM_DEFAULT), CUDA_SUCCESS);

	/* Async, 64 KiB: after the kernel ahead, before the copy's end. */
	memset(host, 1, n);
	launch_sleep(s, 100, k);
	cr_assert_eq(D(cuMemcpyHtoDAsync)(d, host, tail, s), CUDA_SUCCESS);
	cr_expect_neq(k[1], 0, "the copy returned before the stream reached it");
	cr_expect_eq(D(cuStreamQuery)(s), CUDA_ERROR_NOT_READY, "the staged copy was complete at its return");
	memset(host, 0xee, n); /* the program reuses its buffer: the staged data must not change */
	cr_assert_eq(D(cuStreamSynchronize)(s), CUDA_SUCCESS);

	/* Synchronous, on the legacy stream (which waits for the blocking stream s),
	 * 256 KiB: returns once all but the last 64 KiB are across. */
	memset(host, 2, n);
	k[0] = k[1] = 0;
	t0 = now_ns();
	launch_sleep(s, 100, k);
	cr_assert_eq(D(cuMemcpyHtoD)(d + tail, host, n - tail), CUDA_SUCCESS);
	t1 = now_ns();
	cr_expect_neq(k[1], 0, "the copy returned before the stream reached it");
	cr_expect_eq(D(cuStreamQuery)(CU_STREAM_LEGACY), CUDA_ERROR_NOT_READY,
		     "the staged copy was complete at its return");
	cr_expect_geq((double)(t1 - t0), 100e6 + (body_ns - tail_ns) * 0.95,
		      "returned %.1f ms after the launch, want at least %.1f", (double)(t1 - t0) / 1e6,
		      (100e6 + body_ns - tail_ns) / 1e6);
	memset(host, 0xee, n);
	cr_assert_eq(D(cuCtxSynchronize)(), CUDA_SUCCESS);
	cr_assert_eq(D(cuMemcpyDtoH)(back, d, n), CUDA_SUCCESS);
	for (size_t i = 0; i < n; i++)
		if (back[i] != (i < tail ? 1 : 2))
			cr_assert_fail("byte %zu is %#x after staged copies of 1s then 2s", i, back[i]);
	free(host);
	free(back);
}

/* GPU-side duration of a copy, measured with events around it. A kernel queued first
 * keeps the stream busy while the host records the events and queues the copy, so a
 * host thread preempted in between (a loaded machine) does not widen the measure. */
static double copy_ms(CUstream s, CUdeviceptr d, void *h, size_t n)
{
	CUevent a, b;
	float ms = -1;
	uint64_t t[2];

	cr_assert_eq(D(cuEventCreate)(&a, 0), CUDA_SUCCESS);
	cr_assert_eq(D(cuEventCreate)(&b, 0), CUDA_SUCCESS);
	launch_sleep(s, 50, t);
	cr_assert_eq(D(cuEventRecord)(a, s), CUDA_SUCCESS);
	cr_assert_eq(D(cuMemcpyHtoDAsync)(d, h, n, s), CUDA_SUCCESS);
	cr_assert_eq(D(cuEventRecord)(b, s), CUDA_SUCCESS);
	cr_assert_eq(D(cuEventSynchronize)(b), CUDA_SUCCESS);
	cr_assert_eq(D(cuEventElapsedTime)(&ms, a, b), CUDA_SUCCESS);
	D(cuEventDestroy)(a);
	D(cuEventDestroy)(b);
	return ms;
}

/* Bandwidths are low enough that the host's own memcpy stays well inside them, and
 * copies long enough (134 and 268 ms) that a late wake-up on a loaded machine stays
 * inside the 10%. */
Test(simgpu, copy_bandwidth_within_10_percent)
{
	size_t n = 64u << 20;
	char *host = malloc(n), *pinned;
	CUdeviceptr d;
	CUstream s;
	double pin_ms, page_ms;

	setenv("SIMGPU_PINNED_GBPS", "0.5", 1);
	setenv("SIMGPU_PAGEABLE_GBPS", "0.25", 1);
	drv_init();
	memset(host, 1, n);
	cr_assert_eq(D(cuMemAlloc)(&d, n), CUDA_SUCCESS);
	cr_assert_eq(D(cuMemsetD8)(d, 0, n), CUDA_SUCCESS); /* first touch outside the measure */
	cr_assert_eq(D(cuMemHostAlloc)((void **)&pinned, n, 0), CUDA_SUCCESS);
	memset(pinned, 1, n);
	cr_assert_eq(D(cuStreamCreate)(&s, 0), CUDA_SUCCESS);
	pin_ms = copy_ms(s, d, pinned, n);
	page_ms = copy_ms(s, d, host, n);
	cr_expect(pin_ms > 134.2 * 0.9 && pin_ms < 134.2 * 1.1, "pinned copy took %.2f ms, want 134.2", pin_ms);
	cr_expect(page_ms > 268.4 * 0.9 && page_ms < 268.4 * 1.1, "pageable copy took %.2f ms, want 268.4", page_ms);
	free(host);
}

Test(simgpu, data_moves_through_device)
{
	size_t n = 1u << 20;
	unsigned char *src = malloc(n), *dst = malloc(n);
	uint32_t *w = malloc(n);
	CUdeviceptr a, b;

	drv_init();
	for (size_t i = 0; i < n; i++)
		src[i] = (unsigned char)(i * 31 + 7);
	cr_assert_eq(D(cuMemAlloc)(&a, n), CUDA_SUCCESS);
	cr_assert_eq(D(cuMemAlloc)(&b, n), CUDA_SUCCESS);
	cr_assert_eq(D(cuMemcpyHtoD)(a, src, n), CUDA_SUCCESS);
	cr_assert_eq(D(cuMemcpyDtoD)(b, a, n), CUDA_SUCCESS);
	cr_assert_eq(D(cuMemcpyDtoH)(dst, b, n), CUDA_SUCCESS);
	cr_expect_eq(memcmp(src, dst, n), 0);

	cr_assert_eq(D(cuMemsetD32)(a, 0xdeadbeef, n / 4), CUDA_SUCCESS);
	cr_assert_eq(D(cuMemcpyDtoH)(w, a, n), CUDA_SUCCESS);
	cr_expect_eq(w[0], 0xdeadbeef);
	cr_expect_eq(w[n / 4 - 1], 0xdeadbeef);

	/* 2D: a 16x8 window at (4, 2) of a 64-byte-pitch host image into a 16-byte-pitch buffer. */
	{
		unsigned char img[64 * 16], out[16 * 8];
		CUDA_MEMCPY2D c;
		for (size_t i = 0; i < sizeof(img); i++)
			img[i] = (unsigned char)i;
		memset(&c, 0, sizeof(c));
		c.srcMemoryType = CU_MEMORYTYPE_HOST;
		c.srcHost = img;
		c.srcPitch = 64;
		c.srcXInBytes = 4;
		c.srcY = 2;
		c.dstMemoryType = CU_MEMORYTYPE_DEVICE;
		c.dstDevice = b;
		c.dstPitch = 16;
		c.WidthInBytes = 16;
		c.Height = 8;
		cr_assert_eq(D(cuMemcpy2D)(&c), CUDA_SUCCESS);
		cr_assert_eq(D(cuMemcpyDtoH)(out, b, sizeof(out)), CUDA_SUCCESS);
		for (int y = 0; y < 8; y++)
			for (int x = 0; x < 16; x++)
				cr_expect_eq(out[y * 16 + x], img[(y + 2) * 64 + x + 4]);
	}
	/* A copy outside any allocation is refused, not performed. */
	cr_expect_eq(D(cuMemcpyHtoD)(a + n - 8, src, 64), CUDA_ERROR_INVALID_VALUE);
	free(src);
	free(dst);
	free(w);
}

/* ---------------------------------------------------------------- 5. events */

/* The events around a kernel span the kernel: at least its sleep and what its own
 * clock saw, at most that plus scheduling slack. A kernel queued first keeps the
 * stream busy while the host records the events, so host preemption does not count. */
Test(simgpu, event_times_a_sleeping_kernel)
{
	uint64_t t[2], busy[2];
	CUevent a, b;
	float ms = 0, own;

	drv_init();
	cr_assert_eq(D(cuEventCreate)(&a, 0), CUDA_SUCCESS);
	cr_assert_eq(D(cuEventCreate)(&b, 0), CUDA_SUCCESS);
	launch_sleep(NULL, 50, busy);
	cr_assert_eq(D(cuEventRecord)(a, NULL), CUDA_SUCCESS);
	launch_sleep(NULL, 50, t);
	cr_assert_eq(D(cuEventRecord)(b, NULL), CUDA_SUCCESS);
	cr_expect_eq(D(cuEventElapsedTime)(&ms, a, b), CUDA_ERROR_NOT_READY);
	cr_assert_eq(D(cuEventSynchronize)(b), CUDA_SUCCESS);
	cr_assert_eq(D(cuEventElapsedTime)(&ms, a, b), CUDA_SUCCESS);
	own = (float)(t[1] - t[0]) / 1e6f;
	cr_expect(ms >= 50.0f, "elapsed %.3f ms for a 50 ms kernel", ms);
	cr_expect(ms >= own && ms < own + 20.0f, "elapsed %.3f ms, the kernel's own clock %.3f ms", ms, own);
}

Test(simgpu, event_without_timing_refuses_elapsed)
{
	CUevent a, b;
	float ms;

	drv_init();
	cr_assert_eq(D(cuEventCreate)(&a, CU_EVENT_DISABLE_TIMING), CUDA_SUCCESS);
	cr_assert_eq(D(cuEventCreate)(&b, 0), CUDA_SUCCESS);
	cr_assert_eq(D(cuEventRecord)(a, NULL), CUDA_SUCCESS);
	cr_assert_eq(D(cuEventRecord)(b, NULL), CUDA_SUCCESS);
	cr_assert_eq(D(cuCtxSynchronize)(), CUDA_SUCCESS);
	cr_expect_eq(D(cuEventElapsedTime)(&ms, a, b), CUDA_ERROR_INVALID_HANDLE);
}

/* cuEventCreate: "CU_EVENT_INTERPROCESS must be specified along with
 * CU_EVENT_DISABLE_TIMING" (CUDA Driver API, cuEventCreate). */
Test(simgpu, interprocess_event_needs_disable_timing)
{
	CUevent e;

	drv_init();
	cr_expect_eq(D(cuEventCreate)(&e, CU_EVENT_INTERPROCESS), CUDA_ERROR_INVALID_VALUE);
	cr_expect_eq(D(cuEventCreate)(&e, CU_EVENT_INTERPROCESS | CU_EVENT_BLOCKING_SYNC), CUDA_ERROR_INVALID_VALUE);
	cr_expect_eq(D(cuEventCreate)(&e, CU_EVENT_INTERPROCESS | CU_EVENT_DISABLE_TIMING), CUDA_SUCCESS);
	cr_expect_eq(D(cuEventDestroy)(e), CUDA_SUCCESS);
}

/* ---------------------------------------------------------------- 6. memory */

/* 16 blocks of 4 MiB fill a 64 MiB device; freeing every other one leaves 32 MiB
 * free in 4 MiB holes: an 8 MiB request fails although free >= request, and a
 * 4 MiB one lands in the lowest hole (first fit). */
Test(simgpu, first_fit_fragmentation_oom_with_free_memory)
{
	CUdeviceptr p[16], q;
	size_t fr = 0, total = 0, blk = 4u << 20;

	setenv("SIMGPU_MEM_BYTES", "67108864", 1);
	drv_init();
	for (int i = 0; i < 16; i++)
		cr_assert_eq(D(cuMemAlloc)(&p[i], blk), CUDA_SUCCESS, "block %d", i);
	cr_expect_eq(D(cuMemAlloc)(&q, 512), CUDA_ERROR_OUT_OF_MEMORY, "device should be full");
	for (int i = 1; i < 16; i += 2)
		cr_assert_eq(D(cuMemFree)(p[i]), CUDA_SUCCESS);
	cr_assert_eq(D(cuMemGetInfo)(&fr, &total), CUDA_SUCCESS);
	cr_expect_eq(total, 64u << 20);
	cr_expect_eq(fr, 32u << 20);
	cr_expect_eq(D(cuMemAlloc)(&q, 2 * blk), CUDA_ERROR_OUT_OF_MEMORY);
	cr_assert_eq(D(cuMemGetInfo)(&fr, &total), CUDA_SUCCESS);
	cr_expect_geq(fr, 2 * blk, "free memory must still cover the failed request");
	cr_assert_eq(D(cuMemAlloc)(&q, blk), CUDA_SUCCESS);
	cr_expect_eq(q, p[1], "first fit takes the lowest hole");
	/* Alignment: every allocation starts on a 512-byte boundary. */
	cr_assert_eq(D(cuMemFree)(q), CUDA_SUCCESS);
	cr_assert_eq(D(cuMemAlloc)(&q, 100), CUDA_SUCCESS);
	cr_assert_eq(D(cuMemAlloc)(&p[1], 100), CUDA_SUCCESS);
	cr_expect_eq(p[1] - q, 512);
}

Test(simgpu, runtime_oom_is_memory_allocation_error)
{
	void *p = NULL;
	size_t fr = 0, total = 0;

	setenv("SIMGPU_MEM_BYTES", "33554432", 1);
	load_runtime();
	cr_expect_eq(R(cudaMalloc)(&p, 64u << 20), cudaErrorMemoryAllocation);
	cr_expect_eq(R(cudaGetLastError)(), cudaErrorMemoryAllocation);
	cr_expect_eq(R(cudaGetLastError)(), cudaSuccess);
	cr_assert_eq(R(cudaMemGetInfo)(&fr, &total), cudaSuccess);
	cr_expect_eq(fr, 32u << 20);
}

/*
 * Freeing pinned memory that queued work still writes (an Async copy into it behind a
 * 100 ms kernel) waits for that work, as cuMemFree does for device memory: CUDA does
 * not release memory in use, and the program must not crash where it would run on a
 * real GPU.
 */
Test(simgpu, free_host_waits_for_work_using_it)
{
	size_t n = 4u << 20;
	void *h;
	CUdeviceptr d;
	CUstream s;
	uint64_t k[2] = {0, 0};

	load_runtime();
	cr_assert_eq(R(cudaMallocHost)(&h, n), cudaSuccess);
	cr_assert_eq(R(cudaMalloc)((void **)&d, n), cudaSuccess);
	cr_assert_eq(D(cuStreamCreate)(&s, CU_STREAM_NON_BLOCKING), CUDA_SUCCESS);
	launch_sleep(s, 100, k);
	cr_assert_eq(D(cuMemcpyDtoHAsync)(h, d, n, s), CUDA_SUCCESS);
	cr_expect_eq(R(cudaFreeHost)(h), cudaSuccess);
	cr_expect_neq(k[1], 0, "cudaFreeHost returned while queued work still used the memory");
	cr_expect_eq(D(cuStreamSynchronize)(s), CUDA_SUCCESS);
}

/*
 * cuMemFree "will not perform any implicit synchronization when the pointer was
 * allocated with cuMemAllocAsync or cuMemAllocFromPoolAsync" (CUDA Driver API,
 * cuMemFree): freeing such a block (nothing uses it) while a 100 ms kernel runs on
 * another stream returns before that kernel ends.
 */
Test(simgpu, free_of_stream_ordered_block_does_not_synchronize)
{
	CUdeviceptr p;
	CUstream s, busy;
	uint64_t k[2] = {0, 0};

	drv_init();
	cr_assert_eq(D(cuStreamCreate)(&s, CU_STREAM_NON_BLOCKING), CUDA_SUCCESS);
	cr_assert_eq(D(cuStreamCreate)(&busy, CU_STREAM_NON_BLOCKING), CUDA_SUCCESS);
	cr_assert_eq(D(cuMemAllocAsync)(&p, 1u << 20, s), CUDA_SUCCESS);
	cr_assert_eq(D(cuStreamSynchronize)(s), CUDA_SUCCESS);
	launch_sleep(busy, 100, k);
	cr_expect_eq(D(cuMemFree)(p), CUDA_SUCCESS);
	cr_expect_eq(k[1], 0, "cuMemFree of a stream-ordered block waited for the device");
	cr_assert_eq(D(cuCtxSynchronize)(), CUDA_SUCCESS);
}

/*
 * An event whose stream has nothing before it is reached at once: a query right
 * after the record says so, as on a GPU, where it takes microseconds whatever
 * the host does (the simulator's worker thread may not have run yet: the query
 * does its part). The event's time is its record's, not the query's.
 */
Test(simgpu, event_on_an_idle_stream_is_reached_at_once)
{
	CUstream s;
	CUevent e[2];
	unsigned not_ready = 0;

	drv_init();
	cr_assert_eq(D(cuStreamCreate)(&s, CU_STREAM_NON_BLOCKING), CUDA_SUCCESS);
	cr_assert_eq(D(cuEventCreate)(&e[0], 0), CUDA_SUCCESS);
	cr_assert_eq(D(cuEventCreate)(&e[1], 0), CUDA_SUCCESS);
	for (int i = 0; i < 500; i++) {
		cr_assert_eq(D(cuStreamSynchronize)(s), CUDA_SUCCESS);
		cr_assert_eq(D(cuEventRecord)(e[0], s), CUDA_SUCCESS);
		not_ready += D(cuEventQuery)(e[0]) != CUDA_SUCCESS;
		cr_assert_eq(D(cuEventRecord)(e[1], s), CUDA_SUCCESS);
		not_ready += D(cuStreamQuery)(s) != CUDA_SUCCESS;
	}
	cr_expect_eq(not_ready, 0, "%u of 1000 queries right after the record said not ready", not_ready);
	/* two events recorded one after the other on an idle stream: their records' interval */
	struct timespec gap = {0, 2000000};
	cr_assert_eq(D(cuEventRecord)(e[0], s), CUDA_SUCCESS);
	nanosleep(&gap, NULL);
	cr_assert_eq(D(cuEventRecord)(e[1], s), CUDA_SUCCESS);
	cr_assert_eq(D(cuEventSynchronize)(e[1]), CUDA_SUCCESS);
	float ms = 0;
	cr_assert_eq(D(cuEventElapsedTime)(&ms, e[0], e[1]), CUDA_SUCCESS);
	cr_expect(ms >= 2.0f && ms < 50.0f, "%.3f ms between records 2 ms apart", ms);
	D(cuEventDestroy_v2)(e[0]);
	D(cuEventDestroy_v2)(e[1]);
	D(cuStreamDestroy_v2)(s);
}

/* A kernel that reads the GPU's clock and the host's when it starts. */
static uint64_t (*globaltimer)(void);
static void k_clocks(void **args)
{
	uint64_t *t = *(uint64_t **)args[0]; /* t[0] the GPU's clock, t[1] the host's */

	t[0] = globaltimer();
	t[1] = now_ns();
}

/*
 * Inside a kernel, simgpu_globaltimer_ns is the stream's timeline: a kernel
 * queued on an idle stream starts when it is queued, as on a GPU, even when the
 * worker thread that runs it gets a CPU later. Pinned to one CPU that this
 * thread keeps busy, the worker runs late (a worker never preempts the host
 * thread that fed it); the kernel's GPU clock still reads the launch's time.
 * NOTE: a tick may preempt the worker between the start of the operation and
 * the kernel's first read (its clock runs on meanwhile, as the kernel's time):
 * a launch counts once it was late by 1 ms and its clock read the launch.
 */
Test(simgpu, a_kernel_clock_is_the_timeline_even_when_its_worker_is_late)
{
	cpu_set_t one;
	uint64_t t[2] = {0}, *tp = t, before, after, late = 0;
	int seen = 0, host_clock = 0;
	void *args[] = {&tp, NULL};

	drv_init();
	globaltimer = (uint64_t (*)(void))dsym(drv, "simgpu_globaltimer_ns");
	uint64_t host = now_ns(), g = globaltimer();
	cr_expect(g >= host && g - host < 1000000, "outside a kernel: the host's clock (%llu vs %llu)",
		  (unsigned long long)g, (unsigned long long)host);
	CPU_ZERO(&one);
	CPU_SET(sched_getcpu(), &one);
	cr_assert_eq(sched_setaffinity(0, sizeof(one), &one), 0);
	cr_assert_eq(D(cuStreamSynchronize)(NULL), CUDA_SUCCESS); /* the worker exists, idle */
	for (int i = 0; i < 50 && !seen; i++) {
		before = now_ns();
		cr_assert_eq(D(cuLaunchKernel)((CUfunction)(void *)k_clocks, 1, 1, 1, 1, 1, 1, 0, NULL, args, NULL),
			     CUDA_SUCCESS);
		after = now_ns();
		while (now_ns() - after < 5000000) /* keep the CPU 5 ms */
			;
		cr_assert_eq(D(cuStreamSynchronize)(NULL), CUDA_SUCCESS);
		late = t[1] - after;
		cr_expect_geq(t[0], before, "the kernel's GPU clock before its launch");
		if (late >= 1000000) {
			seen = t[0] <= after + 200000;
			host_clock += t[0] + 500000 > t[1]; /* read the host's clock, not the timeline */
		}
	}
	cr_expect(seen, "in 50 launches, none whose worker ran 1 ms late had its GPU clock at the launch "
			"(%d of the late ones read the host's clock)", host_clock);
}

static void k_policy(void **args)
{
	int *p = *(int **)args[0];

	p[0] = sched_getscheduler(0);
	p[1] = (int)gettid();
}

/* The scheduling policy of thread tid of this process (field 41 of its stat). */
static int thread_policy(int tid)
{
	char path[64], buf[1024];
	snprintf(path, sizeof(path), "/proc/self/task/%d/stat", tid);
	FILE *f = fopen(path, "r");
	cr_assert_not_null(f, "%s", path);
	size_t n = fread(buf, 1, sizeof(buf) - 1, f);
	fclose(f);
	buf[n] = 0;
	char *p = strrchr(buf, ')'); /* after the command name, which may hold spaces */
	cr_assert_not_null(p);
	int field = 2, policy = -1;
	for (char *t = strtok(p + 1, " "); t; t = strtok(NULL, " "))
		if (++field == 41)
			policy = atoi(t);
	return policy;
}

/*
 * A GPU runs beside the host's CPUs: an idle worker is SCHED_BATCH, so that
 * waking it never preempts the host thread that queued the work; while it runs
 * a kernel it is SCHED_OTHER, so that the kernel's own sleeps end on time.
 */
Test(simgpu, a_worker_never_preempts_the_host_thread_that_fed_it)
{
	int got[2] = {-1, 0}, *pp = got;
	void *args[] = {&pp, NULL};

	drv_init();
	cr_assert_eq(D(cuLaunchKernel)((CUfunction)(void *)k_policy, 1, 1, 1, 1, 1, 1, 0, NULL, args, NULL),
		     CUDA_SUCCESS);
	cr_assert_eq(D(cuStreamSynchronize)(NULL), CUDA_SUCCESS);
	cr_expect_eq(got[0], SCHED_OTHER, "running a kernel, the worker's policy is %d, not SCHED_OTHER", got[0]);
	int idle = -1;
	for (int i = 0; i < 200 && idle != SCHED_BATCH; i++) { /* it goes idle just after the sync returns */
		idle = thread_policy(got[1]);
		if (idle != SCHED_BATCH)
			usleep(1000);
	}
	cr_expect_eq(idle, SCHED_BATCH, "the idle worker's policy is %d, not SCHED_BATCH (%d)", idle, SCHED_BATCH);
	cr_expect_eq(sched_getscheduler(0), SCHED_OTHER, "the host thread's policy changed");
}

/* cudaMallocManaged: "flags must be one of cudaMemAttachGlobal or cudaMemAttachHost";
 * a size of 0 is cudaErrorInvalidValue too (CUDA Runtime API, cudaMallocManaged). */
Test(simgpu, managed_allocation_flags)
{
	void *p = NULL;

	load_runtime();
	cr_expect_eq(R(cudaMallocManaged)(&p, 4096, 0), cudaErrorInvalidValue);
	cr_expect_eq(R(cudaMallocManaged)(&p, 4096, cudaMemAttachGlobal | cudaMemAttachHost), cudaErrorInvalidValue);
	cr_expect_eq(R(cudaMallocManaged)(&p, 0, cudaMemAttachGlobal), cudaErrorInvalidValue);
	cr_expect_eq(R(cudaMallocManaged)(&p, 4096, cudaMemAttachHost), cudaSuccess);
	cr_expect_eq(R(cudaFree)(p), cudaSuccess);
	cr_expect_eq(R(cudaMallocManaged)(&p, 4096, cudaMemAttachGlobal), cudaSuccess);
	cr_expect_eq(R(cudaFree)(p), cudaSuccess);
}

/* cudaPointerGetAttributes as CUDA 11+ documents it. */
Test(simgpu, pointer_attributes)
{
	struct cudaPointerAttributes a;
	size_t n = 1u << 20;
	char *m = malloc(n), *h, *mh, *reg = malloc(n), *d, *man;

	load_runtime();
	cr_assert_eq(R(cudaHostAlloc)((void **)&h, n, cudaHostAllocDefault), cudaSuccess);
	cr_assert_eq(R(cudaMallocHost)((void **)&mh, n), cudaSuccess);
	cr_assert_eq(R(cudaHostRegister)(reg, n, cudaHostRegisterDefault), cudaSuccess);
	cr_assert_eq(R(cudaMalloc)((void **)&d, n), cudaSuccess);
	cr_assert_eq(R(cudaMallocManaged)((void **)&man, n, cudaMemAttachGlobal), cudaSuccess);

	cr_assert_eq(R(cudaPointerGetAttributes)(&a, m), cudaSuccess);
	cr_expect_eq(a.type, cudaMemoryTypeUnregistered);
	cr_assert_eq(R(cudaPointerGetAttributes)(&a, h), cudaSuccess);
	cr_expect_eq(a.type, cudaMemoryTypeHost);
	cr_assert_eq(R(cudaPointerGetAttributes)(&a, mh + 12345), cudaSuccess);
	cr_expect_eq(a.type, cudaMemoryTypeHost, "a pointer inside a pinned range is pinned");
	cr_assert_eq(R(cudaPointerGetAttributes)(&a, reg + n - 1), cudaSuccess);
	cr_expect_eq(a.type, cudaMemoryTypeHost);
	cr_assert_eq(R(cudaPointerGetAttributes)(&a, reg + n), cudaSuccess);
	cr_expect_eq(a.type, cudaMemoryTypeUnregistered, "one past the registered range");
	cr_assert_eq(R(cudaPointerGetAttributes)(&a, d + 100), cudaSuccess);
	cr_expect_eq(a.type, cudaMemoryTypeDevice);
	cr_expect_eq(a.device, 0);
	cr_assert_eq(R(cudaPointerGetAttributes)(&a, man), cudaSuccess);
	cr_expect_eq(a.type, cudaMemoryTypeManaged);

	cr_expect_eq(R(cudaHostRegister)(reg + 4096, 4096, 0), cudaErrorHostMemoryAlreadyRegistered);
	cr_assert_eq(R(cudaHostUnregister)(reg), cudaSuccess);
	cr_assert_eq(R(cudaPointerGetAttributes)(&a, reg), cudaSuccess);
	cr_expect_eq(a.type, cudaMemoryTypeUnregistered, "after cudaHostUnregister");
	cr_expect_eq(R(cudaHostUnregister)(reg), cudaErrorHostMemoryNotRegistered);
	cr_assert_eq(R(cudaFreeHost)(h), cudaSuccess);
	cr_assert_eq(R(cudaPointerGetAttributes)(&a, mh), cudaSuccess);
	cr_expect_eq(a.type, cudaMemoryTypeHost);

	/* The driver's single query refuses memory it does not know. */
	{
		unsigned int t;
		cr_expect_eq(D(cuPointerGetAttribute)(&t, CU_POINTER_ATTRIBUTE_MEMORY_TYPE, (CUdeviceptr)(uintptr_t)m),
			     CUDA_ERROR_INVALID_VALUE);
		cr_expect_eq(D(cuPointerGetAttribute)(&t, CU_POINTER_ATTRIBUTE_MEMORY_TYPE, (CUdeviceptr)(uintptr_t)d),
			     CUDA_SUCCESS);
		cr_expect_eq(t, CU_MEMORYTYPE_DEVICE);
	}
	free(m);
	free(reg);
}

Test(simgpu, vmm_maps_memory_that_holds_data)
{
	CUmemAllocationProp prop = {0};
	CUmemAccessDesc acc = {0};
	CUmemGenericAllocationHandle hdl;
	CUdeviceptr va;
	size_t gran = 0, fr0, fr1, total;
	char buf[64] = "vmm data", out[64] = {0};

	drv_init();
	prop.type = CU_MEM_ALLOCATION_TYPE_PINNED;
	prop.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
	prop.location.id = 0;
	cr_assert_eq(D(cuMemGetAllocationGranularity)(&gran, &prop, CU_MEM_ALLOC_GRANULARITY_MINIMUM), CUDA_SUCCESS);
	cr_assert_gt(gran, 0);
	cr_assert_eq(D(cuMemGetInfo)(&fr0, &total), CUDA_SUCCESS);
	cr_assert_eq(D(cuMemCreate)(&hdl, 2 * gran, &prop, 0), CUDA_SUCCESS);
	cr_assert_eq(D(cuMemGetInfo)(&fr1, &total), CUDA_SUCCESS);
	cr_expect_eq(fr0 - fr1, 2 * gran, "physical memory counts against the device");
	cr_assert_eq(D(cuMemAddressReserve)(&va, 2 * gran, 0, 0, 0), CUDA_SUCCESS);
	cr_assert_eq(D(cuMemMap)(va, 2 * gran, 0, hdl, 0), CUDA_SUCCESS);
	acc.location = prop.location;
	acc.flags = CU_MEM_ACCESS_FLAGS_PROT_READWRITE;
	cr_assert_eq(D(cuMemSetAccess)(va, 2 * gran, &acc, 1), CUDA_SUCCESS);
	cr_assert_eq(D(cuMemcpyHtoD)(va + gran, buf, sizeof(buf)), CUDA_SUCCESS);
	cr_assert_eq(D(cuMemcpyDtoH)(out, va + gran, sizeof(out)), CUDA_SUCCESS);
	cr_expect_str_eq(out, "vmm data");
	cr_assert_eq(D(cuMemUnmap)(va, 2 * gran), CUDA_SUCCESS);
	cr_assert_eq(D(cuMemRelease)(hdl), CUDA_SUCCESS);
	cr_assert_eq(D(cuMemAddressFree)(va, 2 * gran), CUDA_SUCCESS);
	cr_assert_eq(D(cuMemGetInfo)(&fr1, &total), CUDA_SUCCESS);
	cr_expect_eq(fr1, fr0);
}

/* cuMemRelease: the memory "will be freed when all outstanding mappings to the memory are unmapped and
 * when all outstanding references to the handle ... are also released" (cuMemRetainAllocationHandle adds one). */
Test(simgpu, vmm_memory_outlives_its_handle_while_mapped_or_retained)
{
	CUmemAllocationProp prop = {0};
	CUmemGenericAllocationHandle hdl, again = 0;
	CUdeviceptr va;
	size_t gran = 0, fr0, fr1, total;

	drv_init();
	prop.type = CU_MEM_ALLOCATION_TYPE_PINNED;
	prop.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
	prop.location.id = 0;
	cr_assert_eq(D(cuMemGetAllocationGranularity)(&gran, &prop, CU_MEM_ALLOC_GRANULARITY_MINIMUM), CUDA_SUCCESS);
	cr_assert_eq(D(cuMemGetInfo)(&fr0, &total), CUDA_SUCCESS);
	cr_assert_eq(D(cuMemCreate)(&hdl, gran, &prop, 0), CUDA_SUCCESS);
	cr_assert_eq(D(cuMemAddressReserve)(&va, gran, 0, 0, 0), CUDA_SUCCESS);
	cr_assert_eq(D(cuMemMap)(va, gran, 0, hdl, 0), CUDA_SUCCESS);
	cr_expect_neq(D(cuMemRetainAllocationHandle)(&again, (void *)(uintptr_t)(va + gran)), CUDA_SUCCESS,
		      "an address that is not mapped");
	cr_assert_eq(D(cuMemRetainAllocationHandle)(&again, (void *)(uintptr_t)(va + 100)), CUDA_SUCCESS);
	cr_expect_eq(again, hdl, "the handle that was mapped there");
	cr_assert_eq(D(cuMemRelease)(hdl), CUDA_SUCCESS);
	cr_assert_eq(D(cuMemUnmap)(va, gran), CUDA_SUCCESS);
	cr_assert_eq(D(cuMemGetInfo)(&fr1, &total), CUDA_SUCCESS);
	cr_expect_eq(fr0 - fr1, gran, "released and unmapped, but still retained");
	cr_assert_eq(D(cuMemRelease)(again), CUDA_SUCCESS);
	cr_assert_eq(D(cuMemGetInfo)(&fr1, &total), CUDA_SUCCESS);
	cr_expect_eq(fr1, fr0, "the last reference gone");
	cr_assert_eq(D(cuMemAddressFree)(va, gran), CUDA_SUCCESS);
}

/* cuda.h, cuMemCreate: "To create a CPU allocation targeting a specific host NUMA node ... type to
 * CU_MEM_LOCATION_TYPE_HOST_NUMA ... On systems where NUMA is not available ... id must be set to 0.
 * Specifying CU_MEM_LOCATION_TYPE_HOST_NUMA_CURRENT ... will result in CUDA_ERROR_INVALID_VALUE." */
Test(simgpu, vmm_host_memory_is_host_memory)
{
	CUmemAllocationProp prop = {0};
	CUmemAccessDesc acc = {0};
	CUmemGenericAllocationHandle hdl;
	CUdeviceptr va;
	size_t gran = 0, fr0, fr1, total;
	unsigned int mtype = 0;
	int yes = 0;

	drv_init();
	cr_assert_eq(D(cuDeviceGetAttribute)(&yes, CU_DEVICE_ATTRIBUTE_HOST_NUMA_VIRTUAL_MEMORY_MANAGEMENT_SUPPORTED, 0),
		     CUDA_SUCCESS);
	cr_expect_eq(yes, 1);
	prop.type = CU_MEM_ALLOCATION_TYPE_PINNED;
	prop.location.type = CU_MEM_LOCATION_TYPE_HOST_NUMA_CURRENT;
	cr_assert_eq(D(cuMemGetAllocationGranularity)(&gran, &prop, CU_MEM_ALLOC_GRANULARITY_MINIMUM), CUDA_SUCCESS);
	cr_expect_eq(D(cuMemCreate)(&hdl, gran, &prop, 0), CUDA_ERROR_INVALID_VALUE);
	prop.location.type = CU_MEM_LOCATION_TYPE_HOST_NUMA;
	prop.location.id = 0;
	cr_assert_eq(D(cuMemGetInfo)(&fr0, &total), CUDA_SUCCESS);
	cr_assert_eq(D(cuMemCreate)(&hdl, gran, &prop, 0), CUDA_SUCCESS);
	cr_assert_eq(D(cuMemGetInfo)(&fr1, &total), CUDA_SUCCESS);
	cr_expect_eq(fr1, fr0, "host memory is not the device's");
	cr_assert_eq(D(cuMemAddressReserve)(&va, gran, 0, 0, 0), CUDA_SUCCESS);
	cr_assert_eq(D(cuMemMap)(va, gran, 0, hdl, 0), CUDA_SUCCESS);
	acc.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
	acc.flags = CU_MEM_ACCESS_FLAGS_PROT_READWRITE;
	cr_assert_eq(D(cuMemSetAccess)(va, gran, &acc, 1), CUDA_SUCCESS);
	cr_assert_eq(D(cuPointerGetAttribute)(&mtype, CU_POINTER_ATTRIBUTE_MEMORY_TYPE, va + 64), CUDA_SUCCESS);
	cr_expect_eq(mtype, CU_MEMORYTYPE_HOST);
	cr_assert_eq(D(cuMemUnmap)(va, gran), CUDA_SUCCESS);
	cr_assert_eq(D(cuMemRelease)(hdl), CUDA_SUCCESS);
	cr_assert_eq(D(cuMemAddressFree)(va, gran), CUDA_SUCCESS);
}

Test(simgpu, stream_ordered_free_happens_in_stream_order)
{
	CUdeviceptr p;
	CUstream s;
	uint64_t t[2];
	size_t fr0, fr1, total;

	drv_init();
	cr_assert_eq(D(cuStreamCreate)(&s, 0), CUDA_SUCCESS);
	cr_assert_eq(D(cuMemGetInfo)(&fr0, &total), CUDA_SUCCESS);
	cr_assert_eq(D(cuMemAllocAsync)(&p, 1u << 20, s), CUDA_SUCCESS);
	launch_sleep(s, 80, t);
	cr_assert_eq(D(cuMemFreeAsync)(p, s), CUDA_SUCCESS);
	cr_assert_eq(D(cuMemGetInfo)(&fr1, &total), CUDA_SUCCESS);
	cr_expect_eq(fr0 - fr1, 1u << 20, "freed before the stream reached the free");
	cr_assert_eq(D(cuStreamSynchronize)(s), CUDA_SUCCESS);
	cr_assert_eq(D(cuMemGetInfo)(&fr1, &total), CUDA_SUCCESS);
	cr_expect_eq(fr1, fr0);
}

/* ---------------------------------------------------------------- 7. capture, graphs, laziness */

Test(simgpu, capture_records_and_graph_replays)
{
	int log[16] = {0};
	int *lp = log;
	CUstream s;
	CUgraph g;
	CUgraphExec e;
	CUstreamCaptureStatus st;

	drv_init();
	cr_assert_eq(D(cuStreamCreate)(&s, CU_STREAM_NON_BLOCKING), CUDA_SUCCESS);
	cr_assert_eq(D(cuStreamBeginCapture)(s, CU_STREAM_CAPTURE_MODE_GLOBAL), CUDA_SUCCESS);
	cr_assert_eq(D(cuStreamIsCapturing)(s, &st), CUDA_SUCCESS);
	cr_expect_eq(st, CU_STREAM_CAPTURE_STATUS_ACTIVE);
	for (int i = 1; i <= 3; i++) {
		void *args[] = {&lp, &i, NULL};
		cr_assert_eq(D(cuLaunchKernel)((CUfunction)(void *)k_append, 1, 1, 1, 1, 1, 1, 0, s, args, NULL),
			     CUDA_SUCCESS);
	}
	usleep(20000);
	cr_expect_eq(log[0], 0, "captured work must not run");
	cr_assert_eq(D(cuStreamEndCapture)(s, &g), CUDA_SUCCESS);
	cr_assert_eq(D(cuGraphInstantiate)(&e, g, 0), CUDA_SUCCESS);
	cr_assert_eq(D(cuGraphDestroy)(g), CUDA_SUCCESS);
	cr_assert_eq(D(cuGraphLaunch)(e, s), CUDA_SUCCESS);
	cr_assert_eq(D(cuGraphLaunch)(e, s), CUDA_SUCCESS);
	cr_assert_eq(D(cuStreamSynchronize)(s), CUDA_SUCCESS);
	cr_assert_eq(log[0], 6);
	for (int i = 0; i < 6; i++)
		cr_expect_eq(log[1 + i], 1 + i % 3);
	cr_assert_eq(D(cuGraphExecDestroy)(e), CUDA_SUCCESS);
}

Test(simgpu, sync_in_capture_is_refused)
{
	CUstream s;
	CUgraph g;

	drv_init();
	cr_assert_eq(D(cuStreamCreate)(&s, 0), CUDA_SUCCESS);
	cr_assert_eq(D(cuStreamBeginCapture)(s, CU_STREAM_CAPTURE_MODE_GLOBAL), CUDA_SUCCESS);
	cr_expect_eq(D(cuStreamSynchronize)(s), CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED);
	cr_expect_eq(D(cuStreamEndCapture)(s, &g), CUDA_ERROR_STREAM_CAPTURE_INVALIDATED);
	cr_expect_null(g);
}

static int thread_count(void)
{
	DIR *d = opendir("/proc/self/task");
	struct dirent *e;
	int n = 0;

	cr_assert_not_null(d);
	while ((e = readdir(d)))
		if (e->d_name[0] != '.')
			n++;
	closedir(d);
	return n;
}

/* Loading both libraries and even initialising starts nothing; the first stream work does. */
Test(simgpu, lazy_until_work)
{
	int n0 = thread_count(), n = 0;
	uint64_t t[2];
	CUstream s;

	load_runtime();
	cr_expect_eq(thread_count(), n0, "loading the libraries started a thread");
	cr_assert_eq(R(cudaGetDeviceCount)(&n), cudaSuccess);
	cr_assert_eq(R(cudaStreamCreate)(&s), cudaSuccess);
	cr_expect_eq(thread_count(), n0, "initialising started a thread");
	launch_sleep(s, 1, t);
	cr_expect_gt(thread_count(), n0);
	cr_assert_eq(R(cudaStreamSynchronize)(s), cudaSuccess);
}

/* The runtime's kernels: cudaLaunchKernel runs the host function with the arguments
 * copied at launch; registration names it. */
Test(simgpu, runtime_launch_and_kernel_name)
{
	int log[4] = {0};
	int *lp = log, v = 5;
	void *args[] = {&lp, &v, NULL};
	const char *name = NULL;
	int (*reg)(const void *, const char *, int, const size_t *);
	size_t sizes[] = {sizeof(int *), sizeof(int)};

	load_runtime();
	cr_assert_eq(R(cudaLaunchKernel)((const void *)k_append, (dim3){1, 1, 1}, (dim3){32, 1, 1}, args, 0, NULL),
		     cudaSuccess);
	v = 99; /* the launch copied the value */
	cr_assert_eq(R(cudaDeviceSynchronize)(), cudaSuccess);
	cr_expect_eq(log[0], 1);
	cr_expect_eq(log[1], 5);
	cr_expect_eq(R(cudaLaunchKernel)((const void *)k_append, (dim3){1, 1, 1}, (dim3){2048, 1, 1}, args, 0, NULL),
		     cudaErrorInvalidConfiguration);
	reg = (__typeof__(reg))dsym(rt, "simgpu_register_kernel");
	cr_assert_eq(reg((const void *)k_append, "k_append", 2, sizes), 0);
	cr_assert_eq(D(cuFuncGetName)(&name, (CUfunction)(void *)k_append), CUDA_SUCCESS);
	cr_expect_str_eq(name, "k_append");
	cr_expect_eq(D(cuFuncGetName)(&name, (CUfunction)(void *)k_sleep), CUDA_ERROR_NOT_FOUND,
		     "a static, unregistered kernel has no name");
}

/*
 * CUkernel handles, as NVIDIA's runtime launches them since CUDA 12.0 (from
 * cuLibraryGetKernel; here the export table's kernel_of): not the host
 * function, refused by cuFuncGetName, named by cuKernelGetName, mapped to the
 * function by cuKernelGetFunction, launched by cuLaunchKernel. A CUfunction is
 * no CUkernel.
 */
Test(simgpu, kernel_handles_are_not_functions)
{
	static const char id[16] = "simgpu-export-v1";
	const struct simgpu_export_table *t = NULL;
	CUuuid u;
	int log[4] = {0};
	int *lp = log, v = 7;
	void *args[] = {&lp, &v, NULL};
	size_t sizes[] = {sizeof(int *), sizeof(int)};
	const char *name = NULL;
	CUfunction f = NULL;

	drv_init();
	memcpy(u.bytes, id, 16);
	cr_assert_eq(D(cuGetExportTable)((const void **)&t, &u), CUDA_SUCCESS);
	cr_assert(t && t->size >= sizeof(*t));
	cr_assert_eq(t->register_kernel((const void *)k_append, "k_append", 2, sizes), 0);
	CUkernel k = (CUkernel)t->kernel_of((const void *)k_append);
	cr_assert_not_null(k);
	cr_assert_neq((void *)k, (void *)k_append);
	cr_expect_eq((void *)t->kernel_of((const void *)k_append), (void *)k, "one handle per function");
	cr_expect_eq(D(cuFuncGetName)(&name, (CUfunction)(void *)k), CUDA_ERROR_INVALID_HANDLE);
	cr_assert_eq(D(cuKernelGetName)(&name, k), CUDA_SUCCESS);
	cr_expect_str_eq(name, "k_append");
	cr_assert_eq(D(cuKernelGetFunction)(&f, k), CUDA_SUCCESS);
	cr_assert_eq(D(cuFuncGetName)(&name, f), CUDA_SUCCESS);
	cr_expect_str_eq(name, "k_append");
	cr_expect_eq(D(cuKernelGetName)(&name, (CUkernel)(void *)k_append), CUDA_ERROR_INVALID_HANDLE);
	cr_expect_eq(D(cuKernelGetFunction)(&f, (CUkernel)(void *)k_append), CUDA_ERROR_INVALID_HANDLE);
	cr_assert_eq(D(cuLaunchKernel)((CUfunction)(void *)k, 1, 1, 1, 1, 1, 1, 0, NULL, args, NULL), CUDA_SUCCESS);
	cr_assert_eq(D(cuCtxSynchronize)(), CUDA_SUCCESS);
	cr_expect_eq(log[0], 1);
	cr_expect_eq(log[1], 7);
}

/* Two simulated devices: separate memories, peer access, data moves between them. */
Test(simgpu, peer_copy_between_two_devices)
{
	CUcontext c0, c1;
	CUdeviceptr a, b;
	int can = 0, n = 0;
	char in[4096], out[4096];
	CUdevice dev = -1;

	setenv("SIMGPU_DEVICES", "2", 1);
	c0 = drv_init();
	cr_assert_eq(D(cuDeviceGetCount)(&n), CUDA_SUCCESS);
	cr_assert_eq(n, 2);
	cr_assert_eq(D(cuDeviceCanAccessPeer)(&can, 0, 1), CUDA_SUCCESS);
	cr_expect_eq(can, 1);
	cr_assert_eq(D(cuMemAlloc)(&a, sizeof(in)), CUDA_SUCCESS);
	cr_assert_eq(D(cuDevicePrimaryCtxRetain)(&c1, 1), CUDA_SUCCESS);
	cr_assert_eq(D(cuCtxPushCurrent)(c1), CUDA_SUCCESS);
	cr_assert_eq(D(cuCtxGetDevice)(&dev), CUDA_SUCCESS);
	cr_expect_eq(dev, 1);
	cr_assert_eq(D(cuMemAlloc)(&b, sizeof(in)), CUDA_SUCCESS);
	cr_assert_eq(D(cuCtxPopCurrent)(NULL), CUDA_SUCCESS);
	cr_assert_eq(D(cuCtxEnablePeerAccess)(c1, 0), CUDA_SUCCESS);
	cr_expect_eq(D(cuCtxEnablePeerAccess)(c1, 0), CUDA_ERROR_PEER_ACCESS_ALREADY_ENABLED);
	for (size_t i = 0; i < sizeof(in); i++)
		in[i] = (char)(i * 7);
	cr_assert_eq(D(cuMemcpyHtoD)(a, in, sizeof(in)), CUDA_SUCCESS);
	cr_assert_eq(D(cuMemcpyPeer)(b, c1, a, c0, sizeof(in)), CUDA_SUCCESS);
	cr_assert_eq(D(cuMemcpyDtoH)(out, b, sizeof(out)), CUDA_SUCCESS);
	cr_expect_eq(memcmp(in, out, sizeof(in)), 0);
	{
		int ord = -1;
		cr_assert_eq(D(cuPointerGetAttribute)(&ord, CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL, b), CUDA_SUCCESS);
		cr_expect_eq(ord, 1);
	}
}

/* A child forked after initialisation cannot use CUDA and fails cleanly (no hang). */
Test(simgpu, forked_child_gets_errors_not_hangs)
{
	CUstream s;
	pid_t pid;
	int st = 0;

	drv_init();
	cr_assert_eq(D(cuStreamCreate)(&s, 0), CUDA_SUCCESS);
	pid = fork();
	cr_assert_geq(pid, 0);
	if (pid == 0) {
		CUdeviceptr p;
		int bad = D(cuStreamSynchronize)(s) != CUDA_ERROR_NOT_INITIALIZED ||
			  D(cuMemAlloc)(&p, 4096) != CUDA_ERROR_NOT_INITIALIZED ||
			  D(cuCtxSynchronize)() != CUDA_ERROR_NOT_INITIALIZED ||
			  D(cuInit)(0) != CUDA_ERROR_NOT_INITIALIZED;
		_exit(bad);
	}
	cr_assert_eq(waitpid(pid, &st, 0), pid);
	cr_expect(WIFEXITED(st) && WEXITSTATUS(st) == 0, "child status %#x", st);
	cr_expect_eq(D(cuStreamSynchronize)(s), CUDA_SUCCESS, "the parent is unaffected");
}

/* The runtime's _ptsz entry points take stream 0 as the calling thread's own
 * stream, the one cudaStreamPerThread names, not the legacy stream. */
Test(simgpu, runtime_ptsz_uses_per_thread_stream)
{
	unsigned long long id_legacy = 0, id_pt = 0;
	__typeof__(&cudaStreamGetId) get_pt;

	load_runtime();
	get_pt = (__typeof__(&cudaStreamGetId))dsym(rt, "cudaStreamGetId_ptsz");
	cr_assert_eq(R(cudaStreamGetId)(NULL, &id_legacy), cudaSuccess);
	cr_assert_eq(get_pt(NULL, &id_pt), cudaSuccess);
	cr_expect_neq(id_legacy, id_pt);
	cr_assert_eq(R(cudaStreamGetId)(cudaStreamPerThread, &id_legacy), cudaSuccess);
	cr_expect_eq(id_legacy, id_pt, "cudaStreamPerThread is the _ptsz stream 0");
}

static void k_add(void **args)
{
	int *p = *(int **)args[0];
	int n = *(int *)args[1], v = *(int *)args[2];

	for (int i = 0; i < n; i++)
		p[i] += v;
}

static void CUDART_CB host_inc(void *ud)
{
	(*(int *)ud)++;
}

static void CUDART_CB cb_inc(cudaStream_t s, cudaError_t st, void *ud)
{
	if (st == cudaSuccess)
		(*(int *)ud) += 10;
}

/* Every family of the runtime does what CUDA says, checked on the data it moves. */
Test(simgpu, runtime_families_move_the_data)
{
	enum { N = 1024 };
	int h[N], out[N], *d, *d2, *pin, n = N, one = 1, hostcount = 0;
	cudaStream_t s;
	cudaEvent_t e;
	cudaGraph_t g;
	cudaGraphExec_t ge;

	load_runtime();
	for (int i = 0; i < N; i++)
		h[i] = i;
	cr_assert_eq(R(cudaStreamCreateWithFlags)(&s, cudaStreamNonBlocking), cudaSuccess);
	cr_assert_eq(R(cudaEventCreateWithFlags)(&e, cudaEventDisableTiming), cudaSuccess);
	cr_assert_eq(R(cudaMallocAsync)((void **)&d, sizeof(h), s), cudaSuccess);
	cr_assert_eq(R(cudaMalloc)((void **)&d2, sizeof(h)), cudaSuccess);
	cr_assert_eq(R(cudaHostAlloc)((void **)&pin, sizeof(h), cudaHostAllocMapped), cudaSuccess);

	/* async copy, kernel, host function, callback, event, copy back */
	memcpy(pin, h, sizeof(h));
	cr_assert_eq(R(cudaMemcpyAsync)(d, pin, sizeof(h), cudaMemcpyHostToDevice, s), cudaSuccess);
	{
		void *args[] = {&d, &n, &one, NULL};
		cudaLaunchConfig_t cfg = {.gridDim = {1, 1, 1}, .blockDim = {1, 1, 1}, .stream = s};
		cr_assert_eq(R(cudaLaunchKernelExC)(&cfg, (const void *)k_add, args), cudaSuccess);
		cr_assert_eq(R(cudaLaunchCooperativeKernel)((const void *)k_add, (dim3){1, 1, 1}, (dim3){1, 1, 1}, args,
							    0, s),
			     cudaSuccess);
	}
	cr_assert_eq(R(cudaLaunchHostFunc)(s, host_inc, &hostcount), cudaSuccess);
	cr_assert_eq(R(cudaStreamAddCallback)(s, cb_inc, &hostcount, 0), cudaSuccess);
	cr_assert_eq(R(cudaEventRecord)(e, s), cudaSuccess);
	cr_assert_eq(R(cudaStreamWaitEvent)(NULL, e, 0), cudaSuccess);
	cr_assert_eq(R(cudaMemcpy)(out, d, sizeof(out), cudaMemcpyDeviceToHost), cudaSuccess);
	for (int i = 0; i < N; i++)
		cr_assert_eq(out[i], i + 2, "element %d", i);
	cr_expect_eq(hostcount, 11);

	/* memset, D2D, 2D and 3D copies */
	cr_assert_eq(R(cudaMemset)(d2, 0x01, sizeof(h)), cudaSuccess);
	cr_assert_eq(R(cudaMemcpy)(out, d2, sizeof(out), cudaMemcpyDeviceToHost), cudaSuccess);
	cr_expect_eq(out[5], 0x01010101);
	cr_assert_eq(R(cudaMemcpy)(d2, d, sizeof(h), cudaMemcpyDeviceToDevice), cudaSuccess);
	cr_assert_eq(R(cudaMemset2D)(d2, 64, 0, 16, 4), cudaSuccess); /* zero 16 bytes of 4 rows of 64 */
	cr_assert_eq(R(cudaMemcpy2D)(out, 64, d2, 64, 64, 8, cudaMemcpyDeviceToHost), cudaSuccess);
	cr_expect_eq(out[0], 0);
	cr_expect_eq(out[3], 0);
	cr_expect_eq(out[4], 6, "past the 16 zeroed bytes of row 0");
	cr_expect_eq(out[16 * 3 + 3], 0);
	cr_expect_eq(out[16 * 4], 16 * 4 + 2, "row 4 untouched");
	{
		struct cudaMemcpy3DParms p = {0};
		memset(out, 0, sizeof(out));
		p.srcPtr = (struct cudaPitchedPtr){d, 64, 16, 4};
		p.dstPtr = (struct cudaPitchedPtr){out, 64, 16, 4};
		p.extent = (struct cudaExtent){64, 4, 2};
		p.kind = cudaMemcpyDeviceToHost;
		cr_assert_eq(R(cudaMemcpy3D)(&p), cudaSuccess);
		cr_expect_eq(out[16 * 4 * 2 - 1], 16 * 4 * 2 - 1 + 2);
		cr_expect_eq(out[16 * 4 * 2], 0, "beyond the extent");
	}
	/* a captured graph launched twice adds twice */
	cr_assert_eq(R(cudaStreamBeginCapture)(s, cudaStreamCaptureModeGlobal), cudaSuccess);
	{
		void *args[] = {&d, &n, &one, NULL};
		cr_assert_eq(R(cudaLaunchKernel)((const void *)k_add, (dim3){1, 1, 1}, (dim3){1, 1, 1}, args, 0, s),
			     cudaSuccess);
	}
	cr_assert_eq(R(cudaStreamEndCapture)(s, &g), cudaSuccess);
	cr_assert_eq(R(cudaGraphInstantiate)(&ge, g, 0), cudaSuccess);
	cr_assert_eq(R(cudaGraphLaunch)(ge, s), cudaSuccess);
	cr_assert_eq(R(cudaGraphLaunch)(ge, s), cudaSuccess);
	cr_assert_eq(R(cudaFreeAsync)(d2, s), cudaSuccess);
	cr_assert_eq(R(cudaStreamSynchronize)(s), cudaSuccess);
	cr_assert_eq(R(cudaMemcpy)(out, d, sizeof(out), cudaMemcpyDeviceToHost), cudaSuccess);
	cr_expect_eq(out[100], 104);
	cr_assert_eq(R(cudaFree)(d), cudaSuccess);
	cr_assert_eq(R(cudaFreeHost)(pin), cudaSuccess);
	cr_expect_eq(R(cudaGetLastError)(), cudaSuccess);
}

/* cudaGetDriverEntryPoint[ByVersion] answer through the driver's cuGetProcAddress. */
Test(simgpu, runtime_driver_entry_points)
{
	enum cudaDriverEntryPointQueryResult st;
	void *fn = NULL;

	load_runtime();
	cr_assert_eq(R(cudaGetDriverEntryPointByVersion)("cuMemAlloc", &fn, 12000, cudaEnableDefault, &st),
		     cudaSuccess);
	cr_expect_eq(st, cudaDriverEntryPointSuccess);
	cr_expect_eq(fn, dlsym(drv, "cuMemAlloc_v2"));
	cr_assert_eq(R(cudaGetDriverEntryPointByVersion)("cuLaunchKernel", &fn, 12000,
							 cudaEnablePerThreadDefaultStream, &st),
		     cudaSuccess);
	cr_expect_eq(fn, dlsym(drv, "cuLaunchKernel_ptsz"));
	cr_assert_eq(R(cudaGetDriverEntryPointByVersion)("cuNoSuchThing", &fn, 12000, cudaEnableDefault, &st),
		     cudaSuccess);
	cr_expect_eq(st, cudaDriverEntryPointSymbolNotFound);
	cr_expect_null(fn);
}

/* An argument array that is not NULL-terminated where the simulator expects it (a
 * program written for a real GPU) must not crash the launch: an entry that points
 * nowhere is copied as zeros, the real arguments still arrive. */
Test(simgpu, unreadable_guessed_argument_does_not_crash)
{
	int log[4] = {0};
	int *lp = log, v = 7;
	void *args[] = {&lp, &v, (void *)16, NULL};

	drv_init();
	cr_assert_eq(D(cuLaunchKernel)((CUfunction)(void *)k_append, 1, 1, 1, 1, 1, 1, 0, NULL, args, NULL),
		     CUDA_SUCCESS);
	cr_assert_eq(D(cuCtxSynchronize)(), CUDA_SUCCESS);
	cr_expect_eq(log[0], 1);
	cr_expect_eq(log[1], 7);
}

/* Asking the legacy stream while a blocking stream captures is an error (the legacy
 * stream would depend on the capture); a non-blocking stream's capture does not matter. */
Test(simgpu, legacy_stream_query_during_capture)
{
	CUstream nb, bl;
	CUgraph g;
	CUstreamCaptureStatus st;

	drv_init();
	cr_assert_eq(D(cuStreamCreate)(&nb, CU_STREAM_NON_BLOCKING), CUDA_SUCCESS);
	cr_assert_eq(D(cuStreamCreate)(&bl, CU_STREAM_DEFAULT), CUDA_SUCCESS);
	cr_assert_eq(D(cuStreamBeginCapture)(nb, CU_STREAM_CAPTURE_MODE_GLOBAL), CUDA_SUCCESS);
	cr_expect_eq(D(cuStreamIsCapturing)(CU_STREAM_LEGACY, &st), CUDA_SUCCESS);
	cr_expect_eq(st, CU_STREAM_CAPTURE_STATUS_NONE);
	cr_assert_eq(D(cuStreamEndCapture)(nb, &g), CUDA_SUCCESS);
	cr_assert_eq(D(cuStreamBeginCapture)(bl, CU_STREAM_CAPTURE_MODE_GLOBAL), CUDA_SUCCESS);
	cr_expect_eq(D(cuStreamIsCapturing)(CU_STREAM_LEGACY, &st), CUDA_ERROR_STREAM_CAPTURE_IMPLICIT);
	cr_expect_eq(D(cuStreamIsCapturing)(bl, &st), CUDA_SUCCESS);
	cr_expect_eq(st, CU_STREAM_CAPTURE_STATUS_ACTIVE);
	cr_assert_eq(D(cuStreamEndCapture)(bl, &g), CUDA_SUCCESS);
	cr_expect_eq(D(cuStreamIsCapturing)(CU_STREAM_LEGACY, &st), CUDA_SUCCESS);
}

/*
 * CUDA Runtime API, Error Handling: cudaGetErrorName gives the enum name of an error
 * code, and "unrecognized error code" (for both name and string) for a code it does
 * not recognise. The expected names are the enum identifiers of driver_types.h,
 * stringified; the codes are those the runtime returns for a NULL kernel and for a
 * symbol that is no variable.
 */
#define NAMED(code) {code, #code}
Test(simgpu, runtime_error_names)
{
	static const struct {
		cudaError_t code;
		const char *name;
	} want[] = {NAMED(cudaErrorInvalidDeviceFunction), NAMED(cudaErrorInvalidSymbol),
		    NAMED(cudaErrorInvalidConfiguration), NAMED(cudaErrorMemoryAllocation), NAMED(cudaErrorUnknown)};
	dim3 one = {1, 1, 1};

	load_runtime();
	for (size_t i = 0; i < sizeof(want) / sizeof(want[0]); i++)
		cr_expect_str_eq(R(cudaGetErrorName)(want[i].code), want[i].name);
	cr_expect_eq(R(cudaLaunchKernel)(NULL, one, one, NULL, 0, NULL), cudaErrorInvalidDeviceFunction);
	cr_expect_str_eq(R(cudaGetErrorName)((cudaError_t)12345), "unrecognized error code");
	cr_expect_str_eq(R(cudaGetErrorString)((cudaError_t)12345), "unrecognized error code");
}
#undef NAMED

/* Another thread's calls during a capture: query an event, allocate, in a mode. */
struct other_thread {
	CUcontext ctx;
	CUevent e;
	CUstreamCaptureMode mode;
	CUresult query, alloc;
};

static void *other_thread_calls(void *arg)
{
	struct other_thread *o = arg;
	CUstreamCaptureMode m = o->mode;
	CUdeviceptr p = 0;

	D(cuCtxSetCurrent)(o->ctx);
	D(cuThreadExchangeStreamCaptureMode)(&m);
	o->query = D(cuEventQuery)(o->e);
	o->alloc = D(cuMemAlloc)(&p, 4096);
	if (o->alloc == CUDA_SUCCESS)
		D(cuMemFree)(p);
	D(cuThreadExchangeStreamCaptureMode)(&m);
	return NULL;
}

/* Begins a capture of one kernel on cap in mode cmode, runs the other thread in its
 * own mode o->mode: its calls must all give want. The capture is left open. */
static void capture_and_other_thread(CUstream cap, CUstreamCaptureMode cmode, struct other_thread *o, CUresult want)
{
	pthread_t th;
	uint64_t t[2];

	cr_assert_eq(D(cuStreamBeginCapture)(cap, cmode), CUDA_SUCCESS);
	launch_sleep(cap, 1, t);
	cr_assert_eq(pthread_create(&th, NULL, other_thread_calls, o), 0);
	pthread_join(th, NULL);
	cr_expect_eq(o->query, want, "capture mode %d, thread mode %d: event query gave %d", cmode, o->mode, o->query);
	cr_expect_eq(o->alloc, want, "capture mode %d, thread mode %d: allocation gave %d", cmode, o->mode, o->alloc);
}

/*
 * cuThreadExchangeStreamCaptureMode / cuStreamBeginCapture: in the GLOBAL mode a thread
 * "is prohibited from potentially unsafe API calls" while it has a capture not begun
 * RELAXED or another thread has one begun GLOBAL; THREAD_LOCAL ignores other threads'
 * captures; RELAXED prohibits nothing. cudaMalloc is CUDA's example of such a call;
 * a cudaEventQuery on an event recorded before the capture is the one PyTorch met
 * (its NCCL watchdog thread broke graph captures). A prohibited call fails with
 * CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED and the capture ends invalidated.
 */
Test(simgpu, unsafe_calls_during_capture_follow_thread_mode)
{
	CUcontext ctx = drv_init();
	CUstream cap;
	CUevent e;
	CUgraph g = NULL;
	CUdeviceptr p;
	uint64_t t[2];
	struct other_thread o = {.ctx = ctx};

	cr_assert_eq(D(cuStreamCreate)(&cap, CU_STREAM_NON_BLOCKING), CUDA_SUCCESS);
	cr_assert_eq(D(cuEventCreate)(&e, 0), CUDA_SUCCESS);
	cr_assert_eq(D(cuEventRecord)(e, cap), CUDA_SUCCESS);
	cr_assert_eq(D(cuStreamSynchronize)(cap), CUDA_SUCCESS);
	o.e = e;

	/* GLOBAL capture: another thread in the GLOBAL mode may not query or allocate. */
	o.mode = CU_STREAM_CAPTURE_MODE_GLOBAL;
	capture_and_other_thread(cap, CU_STREAM_CAPTURE_MODE_GLOBAL, &o, CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED);
	cr_expect_eq(D(cuStreamEndCapture)(cap, &g), CUDA_ERROR_STREAM_CAPTURE_INVALIDATED);

	/* GLOBAL capture: a RELAXED thread may; the capture survives. */
	o.mode = CU_STREAM_CAPTURE_MODE_RELAXED;
	capture_and_other_thread(cap, CU_STREAM_CAPTURE_MODE_GLOBAL, &o, CUDA_SUCCESS);
	cr_expect_eq(D(cuStreamEndCapture)(cap, &g), CUDA_SUCCESS);

	/* THREAD_LOCAL capture: other threads are ignored, the capturing one is not. */
	o.mode = CU_STREAM_CAPTURE_MODE_GLOBAL;
	capture_and_other_thread(cap, CU_STREAM_CAPTURE_MODE_THREAD_LOCAL, &o, CUDA_SUCCESS);
	cr_expect_eq(D(cuMemAlloc)(&p, 4096), CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED);
	cr_expect_eq(D(cuStreamEndCapture)(cap, &g), CUDA_ERROR_STREAM_CAPTURE_INVALIDATED);

	/* RELAXED capture: the capturing thread may query an event recorded before it. */
	cr_assert_eq(D(cuStreamBeginCapture)(cap, CU_STREAM_CAPTURE_MODE_RELAXED), CUDA_SUCCESS);
	launch_sleep(cap, 1, t);
	cr_expect_eq(D(cuEventQuery)(e), CUDA_SUCCESS);
	cr_expect_eq(D(cuStreamEndCapture)(cap, &g), CUDA_SUCCESS);
}

/* cudaDeviceReset frees everything allocated on the device. */
Test(simgpu, device_reset_frees_allocations)
{
	void *a, *b;
	size_t fr0, fr1, total;

	load_runtime();
	cr_assert_eq(R(cudaMemGetInfo)(&fr0, &total), cudaSuccess);
	cr_assert_eq(R(cudaMalloc)(&a, 3u << 20), cudaSuccess);
	cr_assert_eq(R(cudaMallocManaged)(&b, 1u << 20, cudaMemAttachGlobal), cudaSuccess);
	cr_assert_eq(R(cudaMemGetInfo)(&fr1, &total), cudaSuccess);
	cr_expect_eq(fr0 - fr1, 4u << 20);
	cr_assert_eq(R(cudaDeviceReset)(), cudaSuccess);
	cr_assert_eq(R(cudaMemGetInfo)(&fr1, &total), cudaSuccess);
	cr_expect_eq(fr1, fr0);
}

/*
 * Batches (cuMemcpyBatchAsync): refused as cuda.h documents them (the legacy
 * stream; every copy needs attributes: attrsIdxs from 0, increasing, below count,
 * numAttrs <= count; a valid srcAccessOrder); the per-thread stream is allowed.
 * A copy in stream order is queued (the call returns before the kernel ahead of
 * it ends); one whose source is read "during the API call" has read it by the
 * return (the kernel ahead has ended, and the source can be overwritten at once).
 */
Test(simgpu, batch_copies_follow_their_attributes)
{
	size_t n = 4096;
	unsigned char *pin = NULL, back[4096];
	CUdeviceptr d;
	CUstream s;
	uint64_t k[2] = {0, 0};

	drv_init();
	cr_assert_eq(D(cuMemAllocHost)((void **)&pin, 2 * n), CUDA_SUCCESS);
	cr_assert_eq(D(cuMemAlloc)(&d, 2 * n), CUDA_SUCCESS);
	cr_assert_eq(D(cuStreamCreate)(&s, CU_STREAM_NON_BLOCKING), CUDA_SUCCESS);
	CUdeviceptr dst[2] = {d, d + n}, src[2] = {(CUdeviceptr)(uintptr_t)pin, (CUdeviceptr)(uintptr_t)(pin + n)};
	size_t sz[2] = {n, n}, idx[2] = {0, 1}, from1[1] = {1}, same[2] = {0, 0};
	CUmemcpyAttributes a[3];
	memset(a, 0, sizeof(a));
	cr_expect_eq(D(cuMemcpyBatchAsync)(dst, src, sz, 2, a, idx, 1, s), CUDA_ERROR_INVALID_VALUE, "order INVALID");
	a[0].srcAccessOrder = a[1].srcAccessOrder = a[2].srcAccessOrder = CU_MEMCPY_SRC_ACCESS_ORDER_STREAM;
	cr_expect_eq(D(cuMemcpyBatchAsync)(dst, src, sz, 2, a, idx, 1, CU_STREAM_LEGACY), CUDA_ERROR_INVALID_VALUE);
	cr_expect_eq(D(cuMemcpyBatchAsync)(dst, src, sz, 2, a, idx, 1, NULL), CUDA_ERROR_INVALID_VALUE,
		     "NULL is the legacy stream outside the _ptsz variant");
	cr_expect_eq(D(cuMemcpyBatchAsync)(dst, src, sz, 2, NULL, idx, 1, s), CUDA_ERROR_INVALID_VALUE);
	cr_expect_eq(D(cuMemcpyBatchAsync)(dst, src, sz, 2, a, idx, 0, s), CUDA_ERROR_INVALID_VALUE);
	cr_expect_eq(D(cuMemcpyBatchAsync)(dst, src, sz, 2, a, from1, 1, s), CUDA_ERROR_INVALID_VALUE);
	cr_expect_eq(D(cuMemcpyBatchAsync)(dst, src, sz, 2, a, same, 2, s), CUDA_ERROR_INVALID_VALUE);
	cr_expect_eq(D(cuMemcpyBatchAsync)(dst, src, sz, 2, a, idx, 3, s), CUDA_ERROR_INVALID_VALUE);
	cr_expect_eq(D(cuMemcpyBatchAsync)(dst, src, sz, 0, a, idx, 1, s), CUDA_ERROR_INVALID_VALUE);
	cr_expect_eq(D(cuMemcpyBatchAsync)(dst, src, sz, 2, a, idx, 2, CU_STREAM_PER_THREAD), CUDA_SUCCESS);
	cr_assert_eq(D(cuCtxSynchronize)(), CUDA_SUCCESS);

	memset(pin, 1, n);
	launch_sleep(s, 100, k);
	cr_assert_eq(D(cuMemcpyBatchAsync)(dst, src, sz, 1, a, idx, 1, s), CUDA_SUCCESS);
	cr_expect_eq(k[1], 0, "a copy in stream order waited for the kernel ahead of it");
	cr_assert_eq(D(cuStreamSynchronize)(s), CUDA_SUCCESS);

	memset(pin, 2, n);
	k[0] = k[1] = 0;
	a[0].srcAccessOrder = CU_MEMCPY_SRC_ACCESS_ORDER_DURING_API_CALL;
	launch_sleep(s, 100, k);
	cr_assert_eq(D(cuMemcpyBatchAsync)(dst, src, sz, 1, a, idx, 1, s), CUDA_SUCCESS);
	cr_expect_neq(k[1], 0, "the source was not read by the return");
	memset(pin, 0xee, n);
	cr_assert_eq(D(cuStreamSynchronize)(s), CUDA_SUCCESS);
	cr_assert_eq(D(cuMemcpyDtoH)(back, d, n), CUDA_SUCCESS);
	for (size_t i = 0; i < n; i++)
		if (back[i] != 2)
			cr_assert_fail("byte %zu is %#x, the source as it was at the call is 2", i, back[i]);
	D(cuStreamDestroy)(s);
	D(cuMemFree)(d);
	D(cuMemFreeHost)(pin);
}
