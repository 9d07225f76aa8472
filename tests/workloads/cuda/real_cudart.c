/*
 * real_cudart.c - a plain C program (no device code) for NVIDIA's real CUDA
 * runtime: build/tests/bin/real_cudart links /usr/local/cuda/lib64/libcudart.so.13,
 * build/tests/bin/real_cudart_static links libcudart_static.a (tests/workloads/cuda/real.mk).
 *
 * It issues one of each call the hooks must see - device and pinned allocation,
 * H2D/D2H copies sync and async from pinned and pageable memory, a memset,
 * stream/event creation, event record and the three syncs, frees - and prints,
 * per call, the line
 *
 *   call <api> <kind> <result>
 *
 * where <kind> is what the trace must hold for it (copy, memset, sync, alloc,
 * alloc_failed, free, host_alloc, host_free; "-" for calls that record nothing)
 * and <result> the code the runtime returned. Then "data ok|bad|skipped" (the
 * bytes that went H2D came back D2H) and exits 0: a failing runtime (the
 * simulated driver lacks NVIDIA's private export tables) is an outcome to
 * report, not a crash. Pageable copies are 1 MiB from malloc'd memory, pinned
 * ones from cudaHostAlloc'd memory.
 */
#include <cuda_runtime_api.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define NB (1u << 20)

static int failures;

static cudaError_t note(const char *api, const char *kind, cudaError_t e)
{
	printf("call %s %s %d\n", api, kind, (int)e);
	if (e != cudaSuccess)
		failures++;
	return e;
}

int main(void)
{
	int ver = 0, ndev = 0;
	cudaRuntimeGetVersion(&ver);
	printf("runtime %d\n", ver);
	note("cudaGetDeviceCount", "-", cudaGetDeviceCount(&ndev));

	unsigned char *pinned = NULL, *pageable = malloc(NB), *back = malloc(NB);
	void *dev = NULL;
	cudaStream_t s = NULL;
	cudaEvent_t ev = NULL;
	if (!pageable || !back)
		return 1;
	for (unsigned i = 0; i < NB; i++)
		pageable[i] = (unsigned char)(i * 7 + 1);
	memset(back, 0, NB);

	cudaError_t e = cudaHostAlloc((void **)&pinned, NB, cudaHostAllocDefault);
	note("cudaHostAlloc", "host_alloc", e);
	e = cudaMalloc(&dev, NB);
	/* only an out-of-memory answer is an alloc_failed; other refusals are alloc records */
	note("cudaMalloc", e == cudaErrorMemoryAllocation ? "alloc_failed" : "alloc", e);
	note("cudaStreamCreate", "-", cudaStreamCreate(&s));
	note("cudaEventCreate", "-", cudaEventCreate(&ev));

	note("cudaMemcpy", "copy", cudaMemcpy(dev, pageable, NB, cudaMemcpyHostToDevice));
	if (pinned)
		memcpy(pinned, pageable, NB);
	note("cudaMemcpy", "copy", cudaMemcpy(dev, pinned ? pinned : pageable, NB, cudaMemcpyHostToDevice));
	note("cudaMemcpyAsync", "copy",
	     cudaMemcpyAsync(dev, pinned ? pinned : pageable, NB, cudaMemcpyHostToDevice, s));
	note("cudaMemcpyAsync", "copy", cudaMemcpyAsync(dev, pageable, NB, cudaMemcpyHostToDevice, s));
	/*
	 * A batch of two copies: the runtime hands it to the driver's
	 * cuMemcpyBatchAsync as requested at 13000 (_v2), which is where it is
	 * recorded; the runtime's own symbol is not wrapped (its signature changed
	 * in 13.0 under the same name). A batch the runtime refuses (on the
	 * simulated driver it cannot start) may never reach the driver: a record
	 * is expected only of one that succeeded.
	 */
	{
		const unsigned char *from = pinned ? pinned : pageable;
		void *d2[2] = {dev, (unsigned char *)dev + NB / 2};
		const void *s2[2] = {from, from + NB / 2};
		size_t z2[2] = {NB / 2, NB / 2}, first = 0;
		struct cudaMemcpyAttributes at;
		memset(&at, 0, sizeof(at));
		at.srcAccessOrder = cudaMemcpySrcAccessOrderStream;
		cudaError_t b = cudaMemcpyBatchAsync(d2, s2, z2, 2, &at, &first, 1, s);
		note("cuMemcpyBatchAsync_v2", b == cudaSuccess ? "copy" : "-", b);
	}
	note("cudaEventRecord", "-", cudaEventRecord(ev, s));
	note("cudaEventSynchronize", "sync", cudaEventSynchronize(ev));
	note("cudaStreamSynchronize", "sync", cudaStreamSynchronize(s));
	note("cudaMemcpy", "copy", cudaMemcpy(back, dev, NB, cudaMemcpyDeviceToHost));
	if (pinned)
		memset(pinned, 0, NB);
	note("cudaMemcpyAsync", "copy", cudaMemcpyAsync(pinned ? pinned : back, dev, NB, cudaMemcpyDeviceToHost, s));
	note("cudaDeviceSynchronize", "sync", cudaDeviceSynchronize());
	int fails_before = failures;
	int same = !memcmp(back, pageable, NB) && (!pinned || !memcmp(pinned, pageable, NB));
	note("cudaMemset", "memset", cudaMemset(dev, 0, NB));
	note("cudaDeviceSynchronize", "sync", cudaDeviceSynchronize());

	if (ev)
		note("cudaEventDestroy", "-", cudaEventDestroy(ev));
	if (s)
		note("cudaStreamDestroy", "-", cudaStreamDestroy(s));
	if (dev)
		note("cudaFree", "free", cudaFree(dev));
	if (pinned)
		note("cudaFreeHost", "host_free", cudaFreeHost(pinned));
	printf("data %s\n", fails_before ? "skipped" : same ? "ok" : "bad");
	printf("failures %d\n", failures);
	free(pageable);
	free(back);
	return 0;
}
