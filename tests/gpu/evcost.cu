// evcost.cu - what the calls stepprof adds cost on this GPU's driver, in host
// time (tests/gpu/overhead.sh): N empty kernel launches, N cudaEventRecord on
// the same stream, N cudaEventQuery of a completed event, N cuEventRecord
// through the driver API, and the driver queries a timed op makes
// (cuStreamIsCapturing, cuCtxGetCurrent, cuEventElapsedTime), a direct
// cuLaunchKernel; each the best of 5 rounds, in ns per call.
#include <cuda.h>
#include <cuda_runtime.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

__global__ void empty(void) {}

static double now_ns(void)
{
	struct timespec t;
	clock_gettime(CLOCK_MONOTONIC, &t);
	return t.tv_sec * 1e9 + t.tv_nsec;
}

#define BEST(label, ...)                                                     \
	do {                                                                   \
		double best = 1e30;                                            \
		for (int r = 0; r < 5; r++) {                                  \
			cudaStreamSynchronize(s);                              \
			double t0 = now_ns();                                  \
			for (int i = 0; i < n; i++) {                          \
				__VA_ARGS__;                                        \
			}                                                      \
			double t = (now_ns() - t0) / n;                        \
			if (t < best)                                          \
				best = t;                                      \
		}                                                              \
		printf("\"%s\": %.1f, ", label, best);                         \
	} while (0)

int main(int argc, char **argv)
{
	int n = argc > 1 ? atoi(argv[1]) : 20000;
	cudaStream_t s;
	cudaEvent_t ev[64];
	if (cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking) != cudaSuccess)
		return 1;
	for (int i = 0; i < 64; i++)
		cudaEventCreate(&ev[i]);
	cudaEvent_t done;
	cudaEventCreate(&done);
	empty<<<1, 1, 0, s>>>();
	cudaEventRecord(done, s);
	cudaStreamSynchronize(s);
	printf("{");
	BEST("launch_ns", empty<<<1, 1, 0, s>>>());
	BEST("launch_plus_event_ns", (empty<<<1, 1, 0, s>>>(), cudaEventRecord(ev[i & 63], s)));
	BEST("event_record_ns", cudaEventRecord(ev[i & 63], s));
	BEST("event_query_done_ns", cudaEventQuery(done));
	BEST("cu_event_record_ns", cuEventRecord((CUevent)ev[i & 63], (CUstream)s));
	BEST("stream_query_ns", cudaStreamQuery(s));
	CUstreamCaptureStatus cs;
	BEST("cu_stream_is_capturing_ns", cuStreamIsCapturing((CUstream)s, &cs));
	CUcontext cx;
	BEST("cu_ctx_get_current_ns", cuCtxGetCurrent(&cx));
	float ms;
	cudaEventRecord(ev[0], s);
	cudaEventRecord(ev[1], s);
	cudaStreamSynchronize(s);
	BEST("cu_event_elapsed_ns", cuEventElapsedTime(&ms, (CUevent)ev[0], (CUevent)ev[1]));
	int dv;
	BEST("cuda_get_device_ns", cudaGetDevice(&dv));
	CUfunction fn;
	if (cudaGetFuncBySymbol((cudaFunction_t *)&fn, (const void *)empty) == cudaSuccess) {
		void *noargs[1] = { 0 };
		BEST("cu_launch_kernel_ns", cuLaunchKernel(fn, 1, 1, 1, 1, 1, 1, 0, (CUstream)s, noargs, NULL));
	}
	cudaStreamSynchronize(s);
	printf("\"n\": %d}\n", n);
	return 0;
}
