/*
 * cuda_edges.c - one short scenario per edge case of the CUDA hooks
 * (tests/e2e/test_cuda_edges.c), on the simulated GPU. Built twice
 * (tests/workloads/cuda/doors.mk): build/tests/bin/cuda_edges, linked to the
 * runtime and the driver, and build/tests/bin/cuda_edges_ptds, the same compiled
 * with CUDA_API_PER_THREAD_DEFAULT_STREAM.
 *
 *   cuda_edges SCENARIO      one of the table at the end (`cuda_edges` alone lists them)
 *
 * stdout is what the program itself sees (return codes, errno, its own
 * counts), the same with and without the preload; the tests compare it and
 * read the trace for the rest. Each scenario's comment says what the
 * test expects of the trace.
 */
#include <cuda.h>
#include <cudaTypedefs.h>
#include <cuda_runtime_api.h>
#include <errno.h>
#include <nvtx3/nvToolsExt.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "show.h"

/*
 * argerr: allocations refused for their arguments are plain alloc records
 * with their result (no alloc_failed, live bytes unchanged); an out-of-memory
 * answer is an alloc_failed. In order: cudaMalloc 1 MiB (ok), cuMemCreate of
 * 1000 bytes (not a multiple of the granularity: CUDA_ERROR_INVALID_VALUE),
 * cudaMalloc(NULL, 100) (cudaErrorInvalidValue), cudaMalloc 4 GiB (more
 * than the device: cudaErrorMemoryAllocation), cudaFree.
 */
static int argerr(void)
{
	void *d = NULL, *x = NULL;
	SHOW("cudaMalloc 1MiB", cudaMalloc(&d, MiB));
	CUmemAllocationProp prop;
	memset(&prop, 0, sizeof(prop));
	prop.type = CU_MEM_ALLOCATION_TYPE_PINNED;
	prop.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
	prop.location.id = 0;
	CUmemGenericAllocationHandle h = 0;
	SHOW("cuMemCreate 1000 bytes", cuMemCreate(&h, 1000, &prop, 0));
	SHOW("cudaMalloc(NULL, 100)", cudaMalloc(NULL, 100));
	SHOW("cudaMalloc 4GiB", cudaMalloc(&x, 4096 * MiB));
	SHOW("cudaGetLastError", cudaGetLastError());
	SHOW("cudaFree", cudaFree(d));
	return 0;
}

/*
 * query: a synchronous copy that CUDA documents as complete when it returns
 * (device to pageable or pinned host, pinned host to device, host to host)
 * leaves its stream idle: a cudaStreamQuery / cuStreamQuery right after it
 * answers success, 500 times each, with or without the preload. stdout: the
 * "not ready" counts (all 0). A pageable host-to-device copy may return with
 * its DMA in flight (CUDA's documented behaviour), so its count goes to
 * stderr only.
 */
static int query(void)
{
	enum { N = 500, B = 4096 };
	void *d = NULL, *pin = NULL;
	static char pg[B], pg2[B];
	SHOW("cudaMalloc", cudaMalloc(&d, B));
	SHOW("cudaMallocHost", cudaMallocHost(&pin, B));
	unsigned nr[6] = {0}, pageable_h2d = 0;
	for (int i = 0; i < N; i++) {
		cudaMemcpy(pg, d, B, cudaMemcpyDeviceToHost);
		nr[0] += cudaStreamQuery(0) != cudaSuccess;
		cudaMemcpy(pin, d, B, cudaMemcpyDeviceToHost);
		nr[1] += cudaStreamQuery(0) != cudaSuccess;
		cudaMemcpy(d, pin, B, cudaMemcpyHostToDevice);
		nr[2] += cudaStreamQuery(0) != cudaSuccess;
		cudaMemcpy(pg2, pg, B, cudaMemcpyHostToHost);
		nr[3] += cudaStreamQuery(0) != cudaSuccess;
		cuMemcpyDtoH(pg, (CUdeviceptr)(uintptr_t)d, B);
		nr[4] += cuStreamQuery(NULL) != CUDA_SUCCESS;
		cuMemcpyHtoD((CUdeviceptr)(uintptr_t)d, pin, B);
		nr[5] += cuStreamQuery(NULL) != CUDA_SUCCESS;
		cudaMemcpy(d, pg, B, cudaMemcpyHostToDevice);
		pageable_h2d += cudaStreamQuery(0) != cudaSuccess;
	}
	printf("not ready after %d of each: d2h pageable %u, d2h pinned %u, h2d pinned %u, h2h %u, "
	       "cuMemcpyDtoH %u, cuMemcpyHtoD pinned %u\n",
	       N, nr[0], nr[1], nr[2], nr[3], nr[4], nr[5]);
	fprintf(stderr, "not ready after a pageable h2d: %u of %d\n", pageable_h2d, N);
	SHOW("cudaDeviceSynchronize", cudaDeviceSynchronize());
	SHOW("cudaFreeHost", cudaFreeHost(pin));
	SHOW("cudaFree", cudaFree(d));
	return 0;
}

/*
 * reset (SIMGPU_DEVICES=2): device resets start the device's books afresh.
 * Device 1 holds 2 MiB throughout. On device 0: cudaMalloc 100 MiB,
 * cudaDeviceReset (the 100 MiB are gone), cudaMalloc 10 MiB, cudaFree of it;
 * cuMemAlloc 8 MiB, cuDevicePrimaryCtxReset(0), cudaMalloc 1 MiB, cudaFree;
 * a reset of device 1 last.
 */
static int reset(void)
{
	void *a = NULL, *b = NULL, *c = NULL, *p1 = NULL;
	CUdeviceptr dd = 0;
	static char h[4096];
	SHOW("cudaSetDevice 1", cudaSetDevice(1));
	SHOW("cudaMalloc dev1 2MiB", cudaMalloc(&p1, 2 * MiB));
	SHOW("cudaSetDevice 0", cudaSetDevice(0));
	SHOW("cudaMalloc 100MiB", cudaMalloc(&a, 100 * MiB));
	SHOW("cudaMemcpy h2d", cudaMemcpy(a, h, sizeof(h), cudaMemcpyHostToDevice));
	SHOW("cudaDeviceReset", cudaDeviceReset());
	size_t fr = 0, to = 0;
	SHOW("cudaMemGetInfo", cudaMemGetInfo(&fr, &to));
	printf("device 0 used after the reset: %zu\n", to - fr);
	SHOW("cudaMalloc 10MiB", cudaMalloc(&b, 10 * MiB));
	SHOW("cudaMemcpy d2h", cudaMemcpy(h, b, sizeof(h), cudaMemcpyDeviceToHost));
	SHOW("cudaFree 10MiB", cudaFree(b));
	SHOW("cuMemAlloc 8MiB", cuMemAlloc(&dd, 8 * MiB));
	SHOW("cuDevicePrimaryCtxReset 0", cuDevicePrimaryCtxReset(0));
	SHOW("cudaMalloc 1MiB", cudaMalloc(&c, MiB));
	SHOW("cudaFree 1MiB", cudaFree(c));
	SHOW("cudaSetDevice 1", cudaSetDevice(1));
	SHOW("cudaDeviceReset dev1", cudaDeviceReset());
	return 0;
}

/*
 * ctx (SIMGPU_DEVICES=2): every call that changes the thread's current
 * context changes the device of the records after it. cuCtxCreate on device
 * 0, then on device 1 (current), cuCtxPopCurrent (device 0 again),
 * cuCtxPushCurrent of the device-1 context, cuCtxDestroy of it (device 0
 * again), cuCtxSetCurrent(NULL) and back. Each step allocates, copies or sets
 * memory; the "(dev N)" in a label is the device it runs on.
 */
static int ctx(void)
{
	CUcontext c0 = NULL, c1 = NULL, popped = NULL;
	CUdevice d0 = 0, d1 = 0;
	CUdeviceptr p0 = 0, p1 = 0, q0 = 0;
	static char h[4096];
	SHOW("cuInit", cuInit(0));
	SHOW("cuDeviceGet 0", cuDeviceGet(&d0, 0));
	SHOW("cuDeviceGet 1", cuDeviceGet(&d1, 1));
	CUctxCreateParams cp;
	memset(&cp, 0, sizeof(cp));
	SHOW("cuCtxCreate dev 0", cuCtxCreate(&c0, &cp, 0, d0));
	SHOW("cuMemAlloc 1MiB (dev 0)", cuMemAlloc(&p0, MiB));
	SHOW("cuMemcpyHtoD (dev 0)", cuMemcpyHtoD(p0, h, sizeof(h)));
	SHOW("cuCtxCreate dev 1", cuCtxCreate(&c1, &cp, 0, d1));
	SHOW("cuMemAlloc 2MiB (dev 1)", cuMemAlloc(&p1, 2 * MiB));
	SHOW("cuMemcpyHtoD (dev 1)", cuMemcpyHtoD(p1, h, sizeof(h)));
	SHOW("cuCtxPopCurrent", cuCtxPopCurrent(&popped));
	printf("popped the device 1 context: %d\n", popped == c1);
	SHOW("cuMemsetD8 (dev 0)", cuMemsetD8(p0, 0, MiB));
	SHOW("cuCtxPushCurrent dev 1", cuCtxPushCurrent(c1));
	SHOW("cuMemsetD8 (dev 1)", cuMemsetD8(p1, 0, MiB));
	SHOW("cuCtxSynchronize (dev 1)", cuCtxSynchronize());
	SHOW("cuMemFree (dev 1)", cuMemFree(p1));
	SHOW("cuCtxDestroy dev 1", cuCtxDestroy(c1));
	SHOW("cuMemcpyDtoH (dev 0)", cuMemcpyDtoH(h, p0, sizeof(h)));
	SHOW("cuCtxSetCurrent NULL", cuCtxSetCurrent(NULL));
	SHOW("cuCtxSetCurrent dev 0", cuCtxSetCurrent(c0));
	SHOW("cuMemAlloc 4KiB (dev 0)", cuMemAlloc(&q0, 4096));
	SHOW("cuMemcpyHtoD (dev 0)", cuMemcpyHtoD(q0, h, sizeof(h)));
	SHOW("cuCtxSynchronize (dev 0)", cuCtxSynchronize());
	SHOW("cuMemFree (dev 0)", cuMemFree(q0));
	SHOW("cuMemFree (dev 0)", cuMemFree(p0));
	SHOW("cuCtxDestroy dev 0", cuCtxDestroy(c0));
	return 0;
}

/*
 * newthread: a cudaMemcpyDefault copy as the first CUDA call of a new thread
 * (no current context until the runtime makes one inside the call), three
 * threads one after the other: pageable to an interior device pointer (h2d),
 * device to pageable (d2h), pinned to device (h2d, pinned).
 */
static void *nt_dev, *nt_pin;
static char nt_host[8192];

static void *nt_h2d(void *arg)
{
	SHOW("thread: default pageable->dev+4096", cudaMemcpy((char *)nt_dev + 4096, nt_host, 4096, cudaMemcpyDefault));
	return arg;
}

static void *nt_d2h(void *arg)
{
	SHOW("thread: default dev->pageable", cudaMemcpy(nt_host, nt_dev, 4096, cudaMemcpyDefault));
	return arg;
}

static void *nt_pinned(void *arg)
{
	SHOW("thread: default pinned->dev", cudaMemcpy(nt_dev, nt_pin, 4096, cudaMemcpyDefault));
	return arg;
}

static int newthread(void)
{
	void *(*fn[])(void *) = {nt_h2d, nt_d2h, nt_pinned};
	SHOW("cudaMalloc 1MiB", cudaMalloc(&nt_dev, MiB));
	SHOW("cudaMallocHost 4KiB", cudaMallocHost(&nt_pin, 4096));
	for (int i = 0; i < 3; i++) {
		pthread_t t;
		pthread_create(&t, NULL, fn[i], NULL);
		pthread_join(t, NULL);
	}
	SHOW("cudaFreeHost", cudaFreeHost(nt_pin));
	SHOW("cudaFree", cudaFree(nt_dev));
	return 0;
}

/*
 * pinmax: 5000 pinned allocations of 256 bytes (more than the pinned map's
 * first array of 4096), copies from the 1st, 4096th, 4097th and 5000th (all
 * pinned), then every one freed.
 */
static int pinmax(void)
{
	enum { N = 5000 };
	static void *hp[N];
	void *d = NULL;
	unsigned failed = 0;
	SHOW("cudaMalloc 1MiB", cudaMalloc(&d, MiB));
	for (int i = 0; i < N; i++)
		failed += cudaHostAlloc(&hp[i], 256, 0) != cudaSuccess;
	printf("cudaHostAlloc x%d: %u failed\n", N, failed);
	SHOW("h2d from #0", cudaMemcpy(d, hp[0], 256, cudaMemcpyHostToDevice));
	SHOW("h2d from #4095", cudaMemcpy(d, hp[4095], 256, cudaMemcpyHostToDevice));
	SHOW("h2d from #4096", cudaMemcpy(d, hp[4096], 256, cudaMemcpyHostToDevice));
	SHOW("d2h to #4999", cudaMemcpy(hp[N - 1], d, 256, cudaMemcpyDeviceToHost));
	for (int i = 0; i < N; i++)
		failed += cudaFreeHost(hp[i]) != cudaSuccess;
	printf("cudaFreeHost x%d: %u failed\n", N, failed);
	SHOW("cudaFree", cudaFree(d));
	return 0;
}

/*
 * managed: managed memory passed where the program names the host side
 * (an explicit copy kind; unified addressing lets it through): h2d and d2h
 * with cudaMemcpy, cudaMemcpyAsync, cuMemcpyHtoD, then h2d as the first call
 * of a new thread; a malloc'd buffer last, still pageable.
 */
static void *mg_dev, *mg_man;

static void *mg_thread(void *arg)
{
	SHOW("thread: h2d from managed", cudaMemcpy(mg_dev, mg_man, 4096, cudaMemcpyHostToDevice));
	return arg;
}

static int managed(void)
{
	static char pg[4096];
	SHOW("cudaMalloc 1MiB", cudaMalloc(&mg_dev, MiB));
	SHOW("cudaMallocManaged 1MiB", cudaMallocManaged(&mg_man, MiB, cudaMemAttachGlobal));
	SHOW("h2d from managed", cudaMemcpy(mg_dev, (char *)mg_man + 8192, 4096, cudaMemcpyHostToDevice));
	SHOW("d2h to managed", cudaMemcpy(mg_man, mg_dev, 4096, cudaMemcpyDeviceToHost));
	SHOW("async h2d from managed", cudaMemcpyAsync(mg_dev, mg_man, 4096, cudaMemcpyHostToDevice, 0));
	SHOW("cuMemcpyHtoD from managed", cuMemcpyHtoD((CUdeviceptr)(uintptr_t)mg_dev, mg_man, 4096));
	pthread_t t;
	pthread_create(&t, NULL, mg_thread, NULL);
	pthread_join(t, NULL);
	SHOW("h2d from malloc'd", cudaMemcpy(mg_dev, pg, 4096, cudaMemcpyHostToDevice));
	SHOW("cudaDeviceSynchronize", cudaDeviceSynchronize());
	SHOW("cudaFree managed", cudaFree(mg_man));
	SHOW("cudaFree", cudaFree(mg_dev));
	return 0;
}

/*
 * symbols: the four symbol copies, synchronous and async (on the default
 * stream of the build: legacy, or per-thread in cuda_edges_ptds), h2d then
 * d2h, after the context-creation idiom.
 */
static int sym_var[1024];

static int symbols(void)
{
	static char h[4096] = {1};
	SHOW("cudaFree(NULL)", cudaFree(NULL)); /* a context first: the first call of a thread is not timed */
	SHOW("cudaMemcpyToSymbol", cudaMemcpyToSymbol(sym_var, h, 4096, 0, cudaMemcpyHostToDevice));
	SHOW("cudaMemcpyFromSymbol", cudaMemcpyFromSymbol(h, sym_var, 4096, 0, cudaMemcpyDeviceToHost));
	SHOW("cudaMemcpyToSymbolAsync", cudaMemcpyToSymbolAsync(sym_var, h, 1024, 0, cudaMemcpyHostToDevice, 0));
	SHOW("cudaMemcpyFromSymbolAsync", cudaMemcpyFromSymbolAsync(h, sym_var, 1024, 0, cudaMemcpyDeviceToHost, 0));
	SHOW("cudaStreamSynchronize", cudaStreamSynchronize(0));
	return 0;
}

/*
 * pollexit: runs of query polls that never get their answer: a thread polls a
 * stream busy with a 300 ms kernel 3 times ("not ready") and exits; then the
 * main thread polls an event recorded after another one 3 times and returns.
 */
void edges_sleep_kernel(void **args)
{
	(void)args;
	struct timespec ts = {0, 300 * 1000 * 1000};
	while (nanosleep(&ts, &ts) == -1 && errno == EINTR)
		;
}

static cudaStream_t pe_stream;

static void *pe_thread(void *arg)
{
	for (int i = 0; i < 3; i++)
		SHOW("thread: cudaStreamQuery", cudaStreamQuery(pe_stream));
	return arg; /* no other CUDA call: the run ends with the thread */
}

static int pollexit(void)
{
	cudaEvent_t ev;
	SHOW("cudaStreamCreate", cudaStreamCreate(&pe_stream));
	SHOW("cudaLaunchKernel", cudaLaunchKernel((const void *)edges_sleep_kernel, (dim3){1, 1, 1}, (dim3){1, 1, 1},
						  NULL, 0, pe_stream));
	pthread_t t;
	pthread_create(&t, NULL, pe_thread, NULL);
	pthread_join(t, NULL);
	SHOW("cudaEventCreate", cudaEventCreate(&ev));
	SHOW("cudaLaunchKernel", cudaLaunchKernel((const void *)edges_sleep_kernel, (dim3){1, 1, 1}, (dim3){1, 1, 1},
						  NULL, 0, pe_stream));
	SHOW("cudaEventRecord", cudaEventRecord(ev, pe_stream));
	for (int i = 0; i < 3; i++)
		SHOW("cudaEventQuery", cudaEventQuery(ev));
	return 0; /* the run ends with the process */
}

void edges_2ms_kernel(void **args)
{
	(void)args;
	struct timespec ts = {0, 2000 * 1000};
	while (nanosleep(&ts, &ts) == -1 && errno == EINTR)
		;
}

void edges_100ms_kernel(void **args)
{
	(void)args;
	struct timespec ts = {0, 100 * 1000 * 1000};
	while (nanosleep(&ts, &ts) == -1 && errno == EINTR)
		;
}

void edges_tiny_kernel(void **args)
{
	(void)args;
}

void edges_short_kernel(void **args)
{
	(void)args;
	struct timespec ts = {0, 1000 * 1000};
	while (nanosleep(&ts, &ts) == -1 && errno == EINTR)
		;
}

/*
 * lastcopy: the program's last CUDA calls are synchronous copies, complete when
 * they return (device-to-host into malloc'd memory, then pinned host-to-device),
 * and nothing synchronises after them: the process ends. Before them, five
 * rounds of a 1 ms kernel and a device sync (the syncs give the profiler its
 * time anchor; the kernels show that it got one).
 */
static int lastcopy(void)
{
	static char h[65536];
	void *dev = NULL, *pin = NULL;
	SHOW("cudaMalloc", cudaMalloc(&dev, sizeof(h)));
	SHOW("cudaMallocHost", cudaMallocHost(&pin, sizeof(h)));
	for (int i = 0; i < 5; i++) {
		SHOW("cudaLaunchKernel",
		     cudaLaunchKernel((const void *)edges_short_kernel, (dim3){1, 1, 1}, (dim3){1, 1, 1}, NULL, 0, 0));
		SHOW("cudaDeviceSynchronize", cudaDeviceSynchronize());
	}
	SHOW("cudaMemcpy", cudaMemcpy(h, dev, sizeof(h), cudaMemcpyDeviceToHost));
	SHOW("cudaMemcpy", cudaMemcpy(dev, pin, sizeof(h), cudaMemcpyHostToDevice));
	return 0; /* the run ends with the process */
}

/*
 * lastcopy, then a kernel and an async copy that nobody waits for, finished by
 * the GPU when the program ends with _exit, as Python's os._exit ends a script
 * (no atexit handler runs).
 */
static int lastcopyexit(void)
{
	static char h[4096];
	void *dev = NULL, *pin = NULL;
	lastcopy();
	SHOW("cudaMalloc", cudaMalloc(&dev, sizeof(h)));
	SHOW("cudaMallocHost", cudaMallocHost(&pin, sizeof(h)));
	SHOW("cudaLaunchKernel",
	     cudaLaunchKernel((const void *)edges_short_kernel, (dim3){1, 1, 1}, (dim3){1, 1, 1}, NULL, 0, 0));
	SHOW("cudaMemcpyAsync", cudaMemcpyAsync(pin, dev, sizeof(h), cudaMemcpyDeviceToHost, 0));
	usleep(100000); /* the GPU is done long before: no sync, as a script that exits without one */
	fflush(stdout);
	_exit(0);
}

/*
 * vmm: the physical memory of a VMM handle lives while it is mapped or its
 * handle is held, whichever ends last (CUDA: "The memory allocation will be
 * freed when all outstanding mappings to the memory are unmapped and when all
 * outstanding references to the handle ... are also released"). Three 4 MiB
 * handles in one reservation, released three ways: A right after its mapping
 * (NVIDIA's samples), then unmapped; B unmapped, then released (PyTorch's
 * expandable segments); C retained through its address, that reference
 * released, unmapped, then released (NCCL's free). A 1 MiB cudaMalloc holds
 * on meanwhile, freed last.
 */
/* The properties of a VMM allocation at a location of that type, id 0. */
static CUmemAllocationProp vmm_prop(CUmemLocationType type)
{
	CUmemAllocationProp prop;
	memset(&prop, 0, sizeof(prop));
	prop.type = CU_MEM_ALLOCATION_TYPE_PINNED;
	prop.location.type = type;
	prop.location.id = 0;
	return prop;
}

static int vmm_create(CUmemGenericAllocationHandle *h, CUdeviceptr va, const char *what)
{
	CUmemAllocationProp prop = vmm_prop(CU_MEM_LOCATION_TYPE_DEVICE);
	CUmemAccessDesc acc = {{CU_MEM_LOCATION_TYPE_DEVICE, 0}, CU_MEM_ACCESS_FLAGS_PROT_READWRITE};
	char l[3][64];
	snprintf(l[0], sizeof(l[0]), "%s: cuMemCreate 4MiB", what);
	snprintf(l[1], sizeof(l[1]), "%s: cuMemMap", what);
	snprintf(l[2], sizeof(l[2]), "%s: cuMemSetAccess", what);
	SHOW(l[0], cuMemCreate(h, 4 * MiB, &prop, 0));
	SHOW(l[1], cuMemMap(va, 4 * MiB, 0, *h, 0));
	SHOW(l[2], cuMemSetAccess(va, 4 * MiB, &acc, 1));
	return 0;
}

static int vmm(void)
{
	void *d = NULL;
	CUdeviceptr va = 0;
	CUmemGenericAllocationHandle a = 0, b = 0, c = 0, c2 = 0;
	SHOW("cudaFree(NULL)", cudaFree(NULL));
	SHOW("cuMemAddressReserve 12MiB", cuMemAddressReserve(&va, 12 * MiB, 0, 0, 0));
	vmm_create(&a, va, "A");
	SHOW("A: cuMemRelease (mapped)", cuMemRelease(a));
	vmm_create(&b, va + 4 * MiB, "B");
	vmm_create(&c, va + 8 * MiB, "C");
	SHOW("cudaMalloc 1MiB", cudaMalloc(&d, MiB));
	memset((void *)(uintptr_t)va, 1, 12 * MiB); /* all three are there to use */
	SHOW("A: cuMemUnmap", cuMemUnmap(va, 4 * MiB));
	SHOW("B: cuMemUnmap", cuMemUnmap(va + 4 * MiB, 4 * MiB));
	SHOW("B: cuMemRelease", cuMemRelease(b));
	SHOW("C: cuMemRetainAllocationHandle", cuMemRetainAllocationHandle(&c2, (void *)(uintptr_t)(va + 9 * MiB)));
	printf("C: the same handle: %d\n", c2 == c);
	SHOW("C: cuMemRelease (retained)", cuMemRelease(c2));
	SHOW("C: cuMemUnmap", cuMemUnmap(va + 8 * MiB, 4 * MiB));
	SHOW("C: cuMemRelease", cuMemRelease(c));
	SHOW("cuMemAddressFree", cuMemAddressFree(va, 12 * MiB));
	SHOW("cudaFree", cudaFree(d));
	return 0;
}

/*
 * threads: 700 threads one after the other, each makes the device current and
 * launches one kernel on a shared stream, then exits; the main thread joins it
 * and synchronises the stream. stdout: how many launches failed (0).
 */
static cudaStream_t th_stream;

static void *th_launch(void *arg)
{
	int *bad = arg;
	*bad += cudaSetDevice(0) != cudaSuccess;
	*bad += cudaLaunchKernel((const void *)edges_tiny_kernel, (dim3){1, 1, 1}, (dim3){1, 1, 1}, NULL, 0,
				 th_stream) != cudaSuccess;
	return NULL;
}

static int threads(void)
{
	int bad = 0;
	SHOW("cudaStreamCreate", cudaStreamCreate(&th_stream));
	for (int i = 0; i < 700; i++) {
		pthread_t t;
		if (pthread_create(&t, NULL, th_launch, &bad) != 0) {
			bad++;
			continue;
		}
		pthread_join(t, NULL);
		bad += cudaStreamSynchronize(th_stream) != cudaSuccess;
	}
	printf("threads: %d calls failed\n", bad);
	return 0;
}

/*
 * devloop (SIMGPU_DEVICES=2): one thread drives both devices, as a
 * single-process multi-GPU loop does (DataParallel's scatter and gather):
 * 3 rounds of, per device, cudaSetDevice, a 64 KiB pinned h2d cudaMemcpyAsync
 * and a 2 ms kernel on the legacy stream, then per device cudaSetDevice and
 * cudaDeviceSynchronize.
 */
static int devloop(void)
{
	void *d[2] = {NULL, NULL}, *pin = NULL;
	SHOW("cudaMallocHost", cudaMallocHost(&pin, 65536));
	for (int dev = 0; dev < 2; dev++) {
		SHOW("cudaSetDevice", cudaSetDevice(dev));
		SHOW("cudaMalloc", cudaMalloc(&d[dev], 65536));
	}
	for (int round = 0; round < 3; round++) {
		for (int dev = 0; dev < 2; dev++) {
			SHOW("cudaSetDevice", cudaSetDevice(dev));
			SHOW("cudaMemcpyAsync", cudaMemcpyAsync(d[dev], pin, 65536, cudaMemcpyHostToDevice, 0));
			SHOW("cudaLaunchKernel", cudaLaunchKernel((const void *)edges_2ms_kernel, (dim3){1, 1, 1},
								  (dim3){1, 1, 1}, NULL, 0, 0));
		}
		for (int dev = 0; dev < 2; dev++) {
			SHOW("cudaSetDevice", cudaSetDevice(dev));
			SHOW("cudaDeviceSynchronize", cudaDeviceSynchronize());
		}
	}
	return 0;
}

/*
 * longstep: steps of more ops between two syncs than a thread holds pending
 * (3000 launches each), at the pace of a host that spends ~20 us per launch
 * (the GPU keeps up: the kernel does nothing). One launch and a sync first,
 * then a step on the main thread, then a step on a second thread that never
 * synchronises (PyTorch's autograd thread), which the main thread joins and
 * synchronises after. stdout: the launches that failed (0).
 */
static cudaStream_t ls_stream;

static void *ls_step(void *arg)
{
	int *bad = arg;
	*bad += cudaSetDevice(0) != cudaSuccess;
	for (int i = 0; i < 3000; i++) {
		struct timespec ts = {0, 20 * 1000};
		*bad += cudaLaunchKernel((const void *)edges_tiny_kernel, (dim3){1, 1, 1}, (dim3){1, 1, 1}, NULL, 0,
					 ls_stream) != cudaSuccess;
		nanosleep(&ts, NULL);
	}
	return NULL;
}

static int longstep(void)
{
	int bad = 0;
	pthread_t t;
	SHOW("cudaStreamCreate", cudaStreamCreate(&ls_stream));
	bad += cudaLaunchKernel((const void *)edges_tiny_kernel, (dim3){1, 1, 1}, (dim3){1, 1, 1}, NULL, 0,
				ls_stream) != cudaSuccess;
	SHOW("cudaStreamSynchronize", cudaStreamSynchronize(ls_stream));
	ls_step(&bad);
	SHOW("cudaStreamSynchronize", cudaStreamSynchronize(ls_stream));
	if (pthread_create(&t, NULL, ls_step, &bad) == 0)
		pthread_join(t, NULL);
	else
		bad++;
	SHOW("cudaStreamSynchronize", cudaStreamSynchronize(ls_stream));
	printf("longstep: %d calls failed\n", bad);
	return 0;
}

/*
 * firststep: a step of 3000 launches (at longstep's pace) before the program's
 * first sync, then the sync: no anchor exists while they are queued.
 * stdout: the launches that failed (0).
 */
static int firststep(void)
{
	int bad = 0;
	SHOW("cudaStreamCreate", cudaStreamCreate(&ls_stream));
	ls_step(&bad);
	SHOW("cudaStreamSynchronize", cudaStreamSynchronize(ls_stream));
	printf("firststep: %d calls failed\n", bad);
	return 0;
}

/*
 * pooldev (SIMGPU_DEVICES=2): a stream-ordered allocation comes from the pool
 * of its stream's device, as CUDA documents for cudaMallocAsync, whatever the
 * current device. With device 0 current: cudaMallocAsync 8 MiB on a stream of
 * device 1, cudaMalloc 1 MiB, cuMemAllocAsync 2 MiB on the device-1 stream;
 * cudaFreeAsync and cuMemFreeAsync of them on that stream, its sync, cudaFree.
 */
static int pooldev(void)
{
	cudaStream_t s1;
	void *a = NULL, *b = NULL;
	CUdeviceptr c = 0;
	SHOW("cudaSetDevice 1", cudaSetDevice(1));
	SHOW("cudaStreamCreate (dev 1)", cudaStreamCreate(&s1));
	SHOW("cudaSetDevice 0", cudaSetDevice(0));
	SHOW("cudaMallocAsync 8MiB on s1", cudaMallocAsync(&a, 8 * MiB, s1));
	SHOW("cudaMalloc 1MiB", cudaMalloc(&b, MiB));
	SHOW("cuMemAllocAsync 2MiB on s1", cuMemAllocAsync(&c, 2 * MiB, (CUstream)s1));
	SHOW("cudaFreeAsync on s1", cudaFreeAsync(a, s1));
	SHOW("cuMemFreeAsync on s1", cuMemFreeAsync(c, (CUstream)s1));
	SHOW("cudaStreamSynchronize s1", cudaStreamSynchronize(s1));
	SHOW("cudaFree", cudaFree(b));
	return 0;
}

/*
 * nvtxdomains: NVTX ranges of two domains that interleave, as a library's
 * prefetch range started in a step and ended after it: 3 times, push "step"
 * (the default domain), push "prefetch" in domain "lib", sleep 2 ms, pop the
 * default domain's range, sleep 1 ms, pop lib's. NVTX: "Each domain maintains
 * its own nvtxRangePush and nvtxRangePop stack". stdout: the levels the calls
 * returned (without a tool NVTX tracks none and returns a negative number).
 */
static void sleep_ms(long ms)
{
	struct timespec ts = {0, ms * 1000 * 1000};
	while (nanosleep(&ts, &ts) == -1 && errno == EINTR)
		;
}

static int nvtxdomains(void)
{
	nvtxDomainHandle_t lib = nvtxDomainCreateA("lib");
	nvtxEventAttributes_t a;
	memset(&a, 0, sizeof(a));
	a.version = NVTX_VERSION;
	a.size = NVTX_EVENT_ATTRIB_STRUCT_SIZE;
	a.messageType = NVTX_MESSAGE_TYPE_ASCII;
	a.message.ascii = "prefetch";
	for (int i = 0; i < 3; i++) {
		int l0 = nvtxRangePushA("step");
		int l1 = nvtxDomainRangePushEx(lib, &a);
		sleep_ms(2);
		int l2 = nvtxRangePop();
		sleep_ms(1);
		int l3 = nvtxDomainRangePop(lib);
		printf("levels: push step %d, push lib prefetch %d, pop %d, pop lib %d\n", l0, l1, l2, l3);
	}
	return 0;
}

/*
 * vmmhost: VMM memory on the host (cuda.h: location HOST_NUMA, id 0 on a
 * system without NUMA), as NCCL allocates its host buffers: cuMemCreate 4 MiB,
 * reserve, map, set access, a cudaMalloc of 1 MiB (the only device memory),
 * a 64 KiB copy from the host VMM memory to the device, unmap, release,
 * cudaFree.
 */
static int vmmhost(void)
{
	CUmemAllocationProp prop = vmm_prop(CU_MEM_LOCATION_TYPE_HOST_NUMA);
	CUmemAccessDesc acc = {{CU_MEM_LOCATION_TYPE_DEVICE, 0}, CU_MEM_ACCESS_FLAGS_PROT_READWRITE};
	CUmemGenericAllocationHandle h = 0;
	CUdeviceptr va = 0;
	void *d = NULL;
	SHOW("cudaFree(NULL)", cudaFree(NULL));
	SHOW("cuMemCreate host 4MiB", cuMemCreate(&h, 4 * MiB, &prop, 0));
	SHOW("cuMemAddressReserve", cuMemAddressReserve(&va, 4 * MiB, 0, 0, 0));
	SHOW("cuMemMap", cuMemMap(va, 4 * MiB, 0, h, 0));
	SHOW("cuMemSetAccess", cuMemSetAccess(va, 4 * MiB, &acc, 1));
	SHOW("cudaMalloc 1MiB", cudaMalloc(&d, MiB));
	memset((void *)(uintptr_t)va, 7, 65536);
	SHOW("cudaMemcpy h2d 64KiB", cudaMemcpy(d, (void *)(uintptr_t)va, 65536, cudaMemcpyHostToDevice));
	SHOW("cuMemUnmap", cuMemUnmap(va, 4 * MiB));
	SHOW("cuMemRelease", cuMemRelease(h));
	SHOW("cuMemAddressFree", cuMemAddressFree(va, 4 * MiB));
	SHOW("cudaFree", cudaFree(d));
	return 0;
}

/*
 * pollfork: a fork while the thread polls: a 100 ms kernel, one
 * cudaStreamQuery ("not ready"), fork; the child reads a file, makes no CUDA
 * call and exits; the parent waits for it and synchronises the stream.
 */
static int pollfork(void)
{
	cudaStream_t s;
	SHOW("cudaStreamCreate", cudaStreamCreate(&s));
	SHOW("cudaLaunchKernel", cudaLaunchKernel((const void *)edges_100ms_kernel, (dim3){1, 1, 1}, (dim3){1, 1, 1},
						  NULL, 0, s));
	int q = cudaStreamQuery(s);
	fflush(stdout);
	pid_t p = fork();
	if (p == 0) { /* a loader worker: reads a file, makes no CUDA call */
		char buf[64];
		FILE *f = fopen("/proc/self/stat", "r");
		if (f) {
			if (!fgets(buf, sizeof(buf), f))
				buf[0] = 0;
			fclose(f);
		}
		exit(0);
	}
	int st = -1;
	if (p > 0)
		waitpid(p, &st, 0);
	printf("cudaStreamQuery before the fork: %s; child exited %d\n", q == cudaErrorNotReady ? "not ready" : "ready",
	       p > 0 && WIFEXITED(st) ? WEXITSTATUS(st) : -1);
	SHOW("cudaStreamSynchronize", cudaStreamSynchronize(s));
	return 0;
}

/*
 * malloczero: cudaMalloc of 0 bytes succeeds with a NULL pointer (a library's
 * empty workspace, every step), and cudaFree(NULL) frees nothing: 66000
 * times each, then a cudaMalloc of 1 MiB and its cudaFree. stdout: the calls
 * that failed, the NULL pointers.
 */
static int malloczero(void)
{
	unsigned bad = 0, null = 0;
	void *p = NULL;
	for (int i = 0; i < 66000; i++) {
		p = &p;
		bad += cudaMalloc(&p, 0) != cudaSuccess;
		null += p == NULL;
		bad += cudaFree(p) != cudaSuccess;
	}
	printf("malloczero: %u calls failed, %u NULL pointers\n", bad, null);
	SHOW("cudaMalloc 1MiB", cudaMalloc(&p, MiB));
	SHOW("cudaFree", cudaFree(p));
	return 0;
}

/*
 * chain: launches timed by their end event alone where they follow this
 * thread's last timed op on the same stream (cuda_gpu.c, "Launch chains").
 * Each kernel sleeps its argument's milliseconds and writes its own start and
 * end (CLOCK_MONOTONIC) to the file CHAIN_TRUTH at exit, one "start end" line
 * per launch, in launch order:
 *   1. busy: a kernel and a sync, then 30 kernels of 3 ms queued at once on one
 *      stream (the host far ahead of the GPU), a sync;
 *   2. idle: 8 kernels of 5 ms, each followed by 10 ms of host sleep (the
 *      stream idle when the next one comes), a sync;
 *   3. two threads taking turns on one stream, 12 kernels of 3 ms each (the
 *      stream busy with the other thread's kernel when a launch comes), a sync;
 *   4. a 10 ms kernel and an event record on a second stream, a 1 ms kernel on
 *      the first, cudaStreamWaitEvent of the first on that event, a 3 ms
 *      kernel on the first (it starts when the 10 ms one ends), a device sync;
 *   5. a 1 ms kernel, a host function of 15 ms (cudaLaunchHostFunc), a 2 ms
 *      kernel (it starts when the host function returns), a stream callback
 *      of 15 ms (cudaStreamAddCallback), a 2 ms kernel, a device sync.
 * stdout: the launches that failed (0).
 */
#define CHAIN_MAX 128
static struct timespec chain_t[CHAIN_MAX][2];
static cudaStream_t chain_s;
static pthread_mutex_t chain_mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t chain_cv = PTHREAD_COND_INITIALIZER;
static int chain_next, chain_turn, chain_bad;

void edges_chain_kernel(void **args)
{
	long i = *(long *)args[0], ms = *(long *)args[1];
	clock_gettime(CLOCK_MONOTONIC, &chain_t[i][0]);
	struct timespec ts = {ms / 1000, (ms % 1000) * 1000000};
	while (nanosleep(&ts, &ts) == -1 && errno == EINTR)
		;
	clock_gettime(CLOCK_MONOTONIC, &chain_t[i][1]);
}

static void chain_launch_on(long ms, cudaStream_t st)
{
	long i = chain_next++;
	void *args[] = {&i, &ms, NULL};
	chain_bad += cudaLaunchKernel((const void *)edges_chain_kernel, (dim3){1, 1, 1}, (dim3){1, 1, 1}, args, 0,
				      st) != cudaSuccess;
}

static void chain_launch(long ms)
{
	chain_launch_on(ms, chain_s);
}

/* Host work the stream waits for (phase 5): 15 ms. */
static void chain_host_sleep(void *arg)
{
	(void)arg;
	struct timespec ts = {0, 15 * 1000 * 1000};
	while (nanosleep(&ts, &ts) == -1 && errno == EINTR)
		;
}

static void chain_callback(cudaStream_t s, cudaError_t st, void *arg)
{
	(void)s;
	(void)st;
	chain_host_sleep(arg);
}

static void *chain_turns(void *arg)
{
	int me = (int)(intptr_t)arg;
	chain_bad += cudaSetDevice(0) != cudaSuccess;
	for (int k = 0; k < 12; k++) {
		pthread_mutex_lock(&chain_mu);
		while (chain_turn != me)
			pthread_cond_wait(&chain_cv, &chain_mu);
		chain_launch(3);
		chain_turn = !me;
		pthread_cond_broadcast(&chain_cv);
		pthread_mutex_unlock(&chain_mu);
	}
	return NULL;
}

static int chain(void)
{
	SHOW("cudaStreamCreate", cudaStreamCreate(&chain_s));
	chain_launch(1);
	SHOW("cudaStreamSynchronize", cudaStreamSynchronize(chain_s));
	for (int k = 0; k < 30; k++)
		chain_launch(3);
	SHOW("cudaStreamSynchronize", cudaStreamSynchronize(chain_s));
	for (int k = 0; k < 8; k++) {
		chain_launch(5);
		struct timespec ts = {0, 10 * 1000 * 1000};
		while (nanosleep(&ts, &ts) == -1 && errno == EINTR)
			;
	}
	SHOW("cudaStreamSynchronize", cudaStreamSynchronize(chain_s));
	pthread_t t[2];
	for (int k = 0; k < 2; k++)
		if (pthread_create(&t[k], NULL, chain_turns, (void *)(intptr_t)k) != 0)
			return 1;
	for (int k = 0; k < 2; k++)
		pthread_join(t[k], NULL);
	SHOW("cudaStreamSynchronize", cudaStreamSynchronize(chain_s));
	cudaStream_t s2;
	cudaEvent_t ev;
	SHOW("cudaStreamCreate", cudaStreamCreate(&s2));
	SHOW("cudaEventCreate", cudaEventCreate(&ev));
	chain_launch_on(10, s2);
	SHOW("cudaEventRecord", cudaEventRecord(ev, s2));
	chain_launch(1);
	SHOW("cudaStreamWaitEvent", cudaStreamWaitEvent(chain_s, ev, 0));
	chain_launch(3);
	SHOW("cudaDeviceSynchronize", cudaDeviceSynchronize());
	chain_launch(1);
	SHOW("cudaLaunchHostFunc", cudaLaunchHostFunc(chain_s, chain_host_sleep, NULL));
	chain_launch(2);
	SHOW("cudaStreamAddCallback", cudaStreamAddCallback(chain_s, chain_callback, NULL, 0));
	chain_launch(2);
	SHOW("cudaDeviceSynchronize", cudaDeviceSynchronize());
	printf("chain: %d launches failed\n", chain_bad);
	const char *path = getenv("CHAIN_TRUTH");
	FILE *f = path ? fopen(path, "we") : NULL;
	for (int i = 0; f && i < chain_next; i++)
		fprintf(f, "%lld %lld\n", (long long)chain_t[i][0].tv_sec * 1000000000LL + chain_t[i][0].tv_nsec,
			(long long)chain_t[i][1].tv_sec * 1000000000LL + chain_t[i][1].tv_nsec);
	if (f)
		fclose(f);
	return 0;
}

/*
 * batch: batches of copies on a stream of the program, each checked by its
 * data (stdout). Expected of the trace: one `copy` record per direction and
 * host memory of a batch, in the order of their first copy, the batch's GPU
 * span on the group of the most bytes, the others without op:
 *   1. cudaMemcpyBatchAsync, 4 x 256 KiB pinned -> device: h2d pinned 1 MiB, timed;
 *   2. cudaMemcpyBatchAsync, 2 x 128 KiB pageable -> device (source read during
 *      the call) and 1 x 64 KiB device -> pinned (stream order): h2d pageable
 *      256 KiB timed, then d2h pinned 64 KiB without op;
 *   3. cuMemcpyBatchAsync (CUDA 13's: _v2), 2 x 512 KiB device -> device: d2d 1 MiB;
 *   4. cuMemcpy3DBatchAsync (_v2), one 1024 x 16 x 2 pinned -> device: h2d pinned 32 KiB;
 *   5. CUDA 12.8's cuMemcpyBatchAsync (with failIdx) through cuGetProcAddress at
 *      12080, 1 x 4 KiB pinned -> device: h2d pinned 4 KiB; failIdx SIZE_MAX;
 *   6. cudaMemcpyBatchAsync on the legacy stream, 1 x 4 KiB pinned -> device:
 *      refused (CUDA_ERROR_INVALID_VALUE, 1): one record with its result, no
 *      direction, no bytes (a refused batch's arrays are not read);
 *   7. cuMemcpyBatchAsync naming 2^40 copies with arrays of one and no
 *      attributes: refused; the program goes on (reading its arrays as far as
 *      it said would have crashed it).
 * The data checks copy back with cudaMemcpy (records of their own api).
 */
static unsigned long long sum_bytes(const unsigned char *p, size_t n)
{
	unsigned long long s = 0;
	for (size_t i = 0; i < n; i++)
		s = s * 131 + p[i];
	return s;
}

static int batch(void)
{
	cudaStream_t s = NULL;
	unsigned char *pin = NULL, *back = NULL, *d = NULL, *d2 = NULL;
	unsigned char *pg = malloc(256 * 1024);
	SHOW("cudaStreamCreate", cudaStreamCreate(&s));
	SHOW("cudaMallocHost pin", cudaMallocHost((void **)&pin, 2 * MiB));
	SHOW("cudaMallocHost back", cudaMallocHost((void **)&back, 2 * MiB));
	SHOW("cudaMalloc d", cudaMalloc((void **)&d, 2 * MiB));
	SHOW("cudaMalloc d2", cudaMalloc((void **)&d2, 2 * MiB));
	if (!pg || !pin || !back || !d || !d2)
		return 1;
	for (size_t i = 0; i < 2 * MiB; i++)
		pin[i] = (unsigned char)(i * 7 + 3);
	for (size_t i = 0; i < 256 * 1024; i++)
		pg[i] = (unsigned char)(i * 13 + 1);
	struct cudaMemcpyAttributes at[2];
	memset(at, 0, sizeof(at));
	at[0].srcAccessOrder = cudaMemcpySrcAccessOrderStream;
	size_t idx0 = 0;

	/* 1 */
	void *dst[4];
	const void *src[4];
	size_t sz[4];
	for (int i = 0; i < 4; i++) {
		dst[i] = d + i * 256 * 1024;
		src[i] = pin + i * 256 * 1024;
		sz[i] = 256 * 1024;
	}
	SHOW("1 cudaMemcpyBatchAsync h2d pinned", cudaMemcpyBatchAsync(dst, src, sz, 4, at, &idx0, 1, s));
	SHOW("1 cudaStreamSynchronize", cudaStreamSynchronize(s));
	SHOW("1 cudaMemcpy back", cudaMemcpy(back, d, MiB, cudaMemcpyDeviceToHost));
	printf("1 data %s\n", memcmp(back, pin, MiB) ? "differs" : "ok");

	/* 2 */
	at[0].srcAccessOrder = cudaMemcpySrcAccessOrderDuringApiCall;
	at[1].srcAccessOrder = cudaMemcpySrcAccessOrderStream;
	size_t idx2[2] = {0, 2};
	dst[0] = d2, src[0] = pg, sz[0] = 128 * 1024;
	dst[1] = d2 + 128 * 1024, src[1] = pg + 128 * 1024, sz[1] = 128 * 1024;
	dst[2] = back + MiB, src[2] = d, sz[2] = 64 * 1024;
	SHOW("2 cudaMemcpyBatchAsync mixed", cudaMemcpyBatchAsync(dst, src, sz, 3, at, idx2, 2, s));
	SHOW("2 cudaStreamSynchronize", cudaStreamSynchronize(s));
	printf("2 d2h data %s\n", memcmp(back + MiB, pin, 64 * 1024) ? "differs" : "ok");
	SHOW("2 cudaMemcpy back", cudaMemcpy(back, d2, 256 * 1024, cudaMemcpyDeviceToHost));
	printf("2 h2d data %s\n", memcmp(back, pg, 256 * 1024) ? "differs" : "ok");

	/* 3 */
	CUdeviceptr dd[2] = {(CUdeviceptr)(uintptr_t)(d2 + MiB), (CUdeviceptr)(uintptr_t)(d2 + MiB + 512 * 1024)};
	CUdeviceptr ds[2] = {(CUdeviceptr)(uintptr_t)d, (CUdeviceptr)(uintptr_t)(d + 512 * 1024)};
	size_t dz[2] = {512 * 1024, 512 * 1024};
	CUmemcpyAttributes ca;
	memset(&ca, 0, sizeof(ca));
	ca.srcAccessOrder = CU_MEMCPY_SRC_ACCESS_ORDER_STREAM;
	SHOW("3 cuMemcpyBatchAsync d2d", cuMemcpyBatchAsync(dd, ds, dz, 2, &ca, &idx0, 1, (CUstream)s));
	SHOW("3 cuStreamSynchronize", cuStreamSynchronize((CUstream)s));
	SHOW("3 cudaMemcpy back", cudaMemcpy(back, d2 + MiB, MiB, cudaMemcpyDeviceToHost));
	printf("3 data %s\n", memcmp(back, pin, MiB) ? "differs" : "ok");

	/* 4 */
	CUDA_MEMCPY3D_BATCH_OP op;
	memset(&op, 0, sizeof(op));
	op.src.type = CU_MEMCPY_OPERAND_TYPE_POINTER;
	op.src.op.ptr.ptr = (CUdeviceptr)(uintptr_t)(pin + 4096);
	op.dst.type = CU_MEMCPY_OPERAND_TYPE_POINTER;
	op.dst.op.ptr.ptr = (CUdeviceptr)(uintptr_t)d;
	op.extent.width = 1024;
	op.extent.height = 16;
	op.extent.depth = 2;
	op.srcAccessOrder = CU_MEMCPY_SRC_ACCESS_ORDER_STREAM;
	SHOW("4 cuMemcpy3DBatchAsync h2d", cuMemcpy3DBatchAsync(1, &op, 0, (CUstream)s));
	SHOW("4 cuStreamSynchronize", cuStreamSynchronize((CUstream)s));
	SHOW("4 cudaMemcpy back", cudaMemcpy(back, d, 32 * 1024, cudaMemcpyDeviceToHost));
	printf("4 data %s\n", memcmp(back, pin + 4096, 32 * 1024) ? "differs" : "ok");

	/* 5 */
	void *fn = NULL;
	CUdriverProcAddressQueryResult q;
	SHOW("5 cuGetProcAddress 12080",
	     cuGetProcAddress("cuMemcpyBatchAsync", &fn, 12080, CU_GET_PROC_ADDRESS_DEFAULT, &q));
	size_t fail = 0;
	CUdeviceptr d5 = (CUdeviceptr)(uintptr_t)(d + MiB), s5 = (CUdeviceptr)(uintptr_t)(pin + 8192);
	size_t z5 = 4096;
	if (fn)
		SHOW("5 cuMemcpyBatchAsync 12.8",
		     ((PFN_cuMemcpyBatchAsync_v12080)fn)(&d5, &s5, &z5, 1, &ca, &idx0, 1, &fail, (CUstream)s));
	printf("5 failIdx %s\n", fail == SIZE_MAX ? "SIZE_MAX" : "set");
	SHOW("5 cuStreamSynchronize", cuStreamSynchronize((CUstream)s));
	SHOW("5 cudaMemcpy back", cudaMemcpy(back, d + MiB, 4096, cudaMemcpyDeviceToHost));
	printf("5 data %s\n", memcmp(back, pin + 8192, 4096) ? "differs" : "ok");

	/* 6 */
	at[0].srcAccessOrder = cudaMemcpySrcAccessOrderStream;
	dst[0] = d, src[0] = pin, sz[0] = 4096;
	SHOW("6 cudaMemcpyBatchAsync legacy stream", cudaMemcpyBatchAsync(dst, src, sz, 1, at, &idx0, 1, cudaStreamLegacy));
	/* 7 */
	SHOW("7 cuMemcpyBatchAsync 2^40 copies", cuMemcpyBatchAsync(dd, ds, dz, (size_t)1 << 40, &ca, &idx0, 0, (CUstream)s));
	printf("batch: sums %llx %llx\n", sum_bytes(pin, 4096), sum_bytes(pg, 4096));
	cudaFree(d);
	cudaFree(d2);
	cudaFreeHost(pin);
	cudaFreeHost(back);
	cudaStreamDestroy(s);
	free(pg);
	return 0;
}

static const struct {
	const char *name;
	int (*fn)(void);
} scenarios[] = {
    {"lastcopy", lastcopy}, {"pollexit", pollexit},   {"argerr", argerr}, {"query", query},	{"reset", reset},
    {"ctx", ctx},	    {"newthread", newthread}, {"pinmax", pinmax}, {"managed", managed}, {"symbols", symbols},
    {"vmm", vmm},	    {"threads", threads},     {"devloop", devloop},
    {"longstep", longstep}, {"pooldev", pooldev},	      {"nvtxdomains", nvtxdomains},
    {"vmmhost", vmmhost},	    {"pollfork", pollfork},
    {"malloczero", malloczero}, {"chain", chain}, {"firststep", firststep}, {"lastcopyexit", lastcopyexit},
    {"batch", batch},
};

int main(int argc, char **argv)
{
	setvbuf(stdout, NULL, _IOLBF, 0);
	for (size_t i = 0; argc == 2 && i < sizeof(scenarios) / sizeof(scenarios[0]); i++)
		if (!strcmp(argv[1], scenarios[i].name))
			return scenarios[i].fn();
	fprintf(stderr, "usage: cuda_edges SCENARIO, one of:");
	for (size_t i = 0; i < sizeof(scenarios) / sizeof(scenarios[0]); i++)
		fprintf(stderr, " %s", scenarios[i].name);
	fprintf(stderr, "\n");
	return 2;
}
