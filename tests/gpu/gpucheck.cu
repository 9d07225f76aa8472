/*
 * gpucheck.cu - the CUDA program of scripts/gpu-check.sh: a known number of
 * copies, kernel launches, syncs and allocations, with its own ground truth.
 *
 * Built two ways from this one file:
 *   - by nvcc (a GPU machine): a real spin kernel of N clock cycles, linked
 *     with -cudart shared (libcudart.so.13) and static (nvcc's default);
 *   - by cc as C (--dry-run, no GPU): the kernel is a host function that
 *     sleeps, launched through cudaLaunchKernel on the simulated GPU
 *     (build/simgpu), so that the script's whole logic runs without a GPU.
 *
 * Per iteration, on one stream: H2D from pinned memory (async, timed by the
 * program's own events), H2D from pageable memory (sync), the spin kernel
 * (timed by the program's own events), D2H into pinned memory (async), one
 * cudaStreamSynchronize. Around the loop: 2 cudaMalloc + 1 cudaHostAlloc, and
 * 2 cudaFree + 1 cudaFreeHost + 1 cudaDeviceSynchronize at the end.
 *
 * Output: "checksum <n>" (identical with and without the preload), then one
 * JSON line of ground truth: the counts of each kind of call it made and the
 * per-iteration GPU durations its events measured. Exit 0, or 1 with a message
 * at the first failing call.
 *
 * Usage: gpucheck [ITERS [BYTES [SPIN_US]]]   (defaults 20, 8 MiB, 2000 us)
 */
#include <cuda_runtime_api.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#define MAXIT 20000

#define CK(call)                                                                                                      \
	do {                                                                                                          \
		cudaError_t e_ = (call);                                                                              \
		if (e_ != cudaSuccess) {                                                                              \
			fprintf(stderr, "gpucheck: %s failed: %s (%d)\n", #call, cudaGetErrorString(e_), (int)e_);  \
			exit(1);                                                                                      \
		}                                                                                                     \
	} while (0)

#ifdef __CUDACC__
/* Spins for `cycles` SM clock cycles: a kernel of known duration. */
__global__ void gpucheck_spin(long long cycles, unsigned *out)
{
	long long t0 = clock64();
	while (clock64() - t0 < cycles) {
	}
	if (threadIdx.x == 0)
		atomicAdd(out, 1u);
}

static void launch_spin(long long cycles, unsigned *dcount, cudaStream_t s)
{
	gpucheck_spin<<<1, 32, 0, s>>>(cycles, dcount);
	CK(cudaGetLastError());
}

static long long spin_cycles(int spin_us)
{
	int khz = 0;
	CK(cudaDeviceGetAttribute(&khz, cudaDevAttrClockRate, 0));
	return (long long)khz * spin_us / 1000;
}
#else
/* The simulated GPU: a kernel is a host function run on the stream's worker. */
static void gpucheck_spin(void **args)
{
	long long us = *(long long *)args[0];
	unsigned *out = *(unsigned **)args[1];
	struct timespec ts = { (time_t)(us / 1000000), (long)(us % 1000000) * 1000 };
	nanosleep(&ts, NULL);
	(*out)++;
}

static void launch_spin(long long us, unsigned *dcount, cudaStream_t s)
{
	void *args[] = { &us, &dcount, NULL };
	dim3 g = { 1, 1, 1 }, b = { 32, 1, 1 };
	CK(cudaLaunchKernel((const void *)gpucheck_spin, g, b, args, 0, s));
}

static long long spin_cycles(int spin_us)
{
	return spin_us;
}
#endif

int main(int argc, char **argv)
{
	int iters = argc > 1 ? atoi(argv[1]) : 20;
	size_t bytes = argc > 2 ? (size_t)strtoull(argv[2], NULL, 0) : (size_t)8 << 20;
	int spin_us = argc > 3 ? atoi(argv[3]) : 2000;
	if (iters < 1 || iters > MAXIT || bytes < 4 || spin_us < 1) {
		fprintf(stderr, "usage: gpucheck [ITERS(1..%d) [BYTES [SPIN_US]]]\n", MAXIT);
		return 2;
	}
	static float kernel_ms[MAXIT], copy_ms[MAXIT];
	unsigned char *pageable = (unsigned char *)malloc(bytes), *pinned = NULL;
	void *dbuf = NULL, *dcount = NULL;
	cudaStream_t s;
	cudaEvent_t ev[4];
	if (!pageable)
		return 1;
	for (size_t i = 0; i < bytes; i++)
		pageable[i] = (unsigned char)(i * 13 + 5);

	CK(cudaMalloc(&dbuf, bytes));
	CK(cudaMalloc(&dcount, sizeof(unsigned)));
	CK(cudaHostAlloc((void **)&pinned, bytes, cudaHostAllocDefault));
	CK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
	for (int i = 0; i < 4; i++)
		CK(cudaEventCreate(&ev[i]));
	CK(cudaMemsetAsync(dcount, 0, sizeof(unsigned), s));
	CK(cudaStreamSynchronize(s));
	long long cycles = spin_cycles(spin_us);
	memcpy(pinned, pageable, bytes);

	unsigned long long checksum = 0;
	for (int it = 0; it < iters; it++) {
		CK(cudaEventRecord(ev[0], s));
		CK(cudaMemcpyAsync(dbuf, pinned, bytes, cudaMemcpyHostToDevice, s));
		CK(cudaEventRecord(ev[1], s));
		CK(cudaMemcpy(dbuf, pageable, bytes, cudaMemcpyHostToDevice));
		CK(cudaEventRecord(ev[2], s));
		launch_spin(cycles, (unsigned *)dcount, s);
		CK(cudaEventRecord(ev[3], s));
		CK(cudaMemcpyAsync(pinned, dbuf, bytes, cudaMemcpyDeviceToHost, s));
		CK(cudaStreamSynchronize(s));
		CK(cudaEventElapsedTime(&copy_ms[it], ev[0], ev[1]));
		CK(cudaEventElapsedTime(&kernel_ms[it], ev[2], ev[3]));
		for (size_t i = 0; i < bytes; i += 4096)
			checksum += pinned[i];
	}
	unsigned count = 0;
	CK(cudaMemcpy(&count, dcount, sizeof(count), cudaMemcpyDeviceToHost));
	CK(cudaDeviceSynchronize());
	for (int i = 0; i < 4; i++)
		CK(cudaEventDestroy(ev[i]));
	CK(cudaStreamDestroy(s));
	CK(cudaFree(dbuf));
	CK(cudaFree(dcount));
	CK(cudaFreeHost(pinned));
	free(pageable);

	printf("checksum %llu kernels %u\n", checksum, count);
	/* Counts as stepprof must record them (a sync copy and a sync are both calls of the program). */
	printf("{\"iters\":%d,\"bytes\":%zu,\"spin_us\":%d,"
	       "\"copies_h2d_pinned\":%d,\"copies_h2d_pageable\":%d,\"copies_d2h_pinned\":%d,\"copies_d2h_pageable\":1,"
	       "\"memsets\":1,\"launches\":%d,\"syncs\":%d,\"allocs\":2,\"frees\":2,\"host_allocs\":1,\"host_frees\":1,"
	       "\"kernel_ms\":[",
	       iters, bytes, spin_us, iters, iters, iters, iters, iters + 2);
	for (int i = 0; i < iters; i++)
		printf("%s%.4f", i ? "," : "", kernel_ms[i]);
	printf("],\"copy_h2d_pinned_ms\":[");
	for (int i = 0; i < iters; i++)
		printf("%s%.4f", i ? "," : "", copy_ms[i]);
	printf("]}\n");
	return count == (unsigned)iters ? 0 : 1;
}
