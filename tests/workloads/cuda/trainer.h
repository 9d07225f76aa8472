/*
 * trainer.h - shared between the synthetic trainer's loop (trainer.c) and its
 * ground-truth bookkeeping (trainer_truth.c).
 *
 *   - the categories of the breakdown, in docs/definitions.md's priority order
 *   - the CUDA runtime calls the trainer makes (one X-macro list, counted by name)
 *   - the record API the loop calls around every operation it measures
 *
 * Everything is measured with CLOCK_MONOTONIC (the trace's clock); the loop
 * records, the bookkeeping resolves and prints once, at exit (docs/workloads.md).
 */
#ifndef TRAINER_H
#define TRAINER_H

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <time.h>

/* Breakdown categories in priority order: an instant goes to the first that holds. */
enum tr_cat { TR_COMPUTE, TR_COMM, TR_H2D, TR_D2H, TR_INPUT, TR_SYNC, TR_NCAT };
#define TR_OTHER TR_NCAT

/* Every CUDA runtime function the trainer calls, counted by name in totals.by_api. */
#define TR_APIS(X)                                                                                                     \
	X(cudaGetDeviceCount)                                                                                          \
	X(cudaSetDevice)                                                                                               \
	X(cudaStreamCreate)                                                                                            \
	X(cudaStreamDestroy)                                                                                           \
	X(cudaMalloc)                                                                                                  \
	X(cudaFree)                                                                                                    \
	X(cudaHostAlloc)                                                                                               \
	X(cudaFreeHost)                                                                                                \
	X(cudaMemGetInfo)                                                                                              \
	X(cudaMemcpyAsync)                                                                                             \
	X(cudaMemcpyBatchAsync)                                                                                        \
	X(cudaLaunchKernel)                                                                                            \
	X(cudaStreamSynchronize)                                                                                       \
	X(cudaDeviceSynchronize)                                                                                       \
	X(cudaEventCreateWithFlags)                                                                                    \
	X(cudaEventRecord)                                                                                             \
	X(cudaEventElapsedTime)                                                                                        \
	X(cudaStreamWaitEvent)                                                                                         \
	X(cudaEventDestroy)

enum tr_api {
#define TR_API_ENUM(n) TR_API_##n,
	TR_APIS(TR_API_ENUM)
#undef TR_API_ENUM
	    TR_NAPI
};

/*
 * One kernel launch. The kernel (a host function run on the stream's worker)
 * finds its slot through its one argument, the pointer `self`: args[0] points
 * at it, and args[1] is NULL because the simulated GPU copies an unregistered
 * kernel's arguments (8 bytes each) up to a NULL entry (tests/simgpu/simgpu.h).
 * The slot lives until exit, so a runtime that kept the pointers would work too.
 */
struct tr_kslot {
	struct tr_kslot *self;
	void *args[2];
	uint64_t sleep_ns;
	uint64_t launch_host_ns;      /* host time spun before the launch (--launch-host-us) */
	volatile uint64_t begin, end; /* written by the kernel, read after a sync */
};

static inline uint64_t tr_now(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

/* ---- recording (trainer_truth.c) ---- */
/* pinned_gbps: the link ($SIMGPU_PINNED_GBPS); memcpy_gbps: the host's memcpy, measured */
void tr_truth_init(unsigned iters, double pinned_gbps, double memcpy_gbps);
void tr_iter_begin(unsigned i, uint64_t t); /* also ends the previous iteration at t */
void tr_iter_finish(uint64_t t);	    /* ends the last iteration; later calls count as teardown */

void tr_api(enum tr_api api);	       /* one call issued (per-iteration and totals) */
void tr_input(uint64_t b, uint64_t e); /* the trainer's own stat/open/read/close of a batch file (input_io) */
/* a wait for the loader workers (pipe read, queue): their global numbers first .. first + k - 1 are alive */
void tr_input_wait(uint64_t b, uint64_t e, unsigned first, unsigned k);
void tr_files(unsigned opened, unsigned stats, uint64_t bytes); /* batch consumed in this iteration */
/* who read the batch consumed in this iteration, when, and its file calls' and CPU work's time */
void tr_batch_reader(int pid, uint64_t read_begin, uint64_t read_end, uint64_t io_ns, uint64_t cpu_ns);
/*
 * What loader worker `worker` (its global number: generation x K + w) did over
 * [b, e]: io_ns in its file calls, cpu_ns of CPU spent in its transform (or its
 * start-up), the rest waiting. Any iteration, any order across workers; in order
 * for one worker.
 */
void tr_worker_window(unsigned worker, uint64_t b, uint64_t e, uint64_t io_ns, uint64_t cpu_ns);
void tr_kernel(struct tr_kslot *k); /* in stream order, before the launch */
void tr_copy(enum tr_cat dir, uint64_t bytes, bool pageable, uint64_t cb, uint64_t ce);
void tr_sync(uint64_t cb, uint64_t ce);
void tr_dev_alloc(uint64_t bytes);
void tr_dev_free(uint64_t bytes);
void tr_alloc_failure(uint64_t request, uint64_t free, uint64_t total, unsigned flushed, uint64_t flushed_bytes,
		      bool retry_ok);
void tr_host_alloc(void);
void tr_host_free(void);
void tr_data_file_created(void);
void tr_workers_started(unsigned i); /* loader workers forked for iteration i's batch (before it, or in it) */

/*
 * --ranks: iteration `iter`'s all-reduce of `bytes`, called over [cb, ce]; `before`: the
 * last kernel the main stream ran before it (NULL: none), `overlap`: the kernel it
 * overlapped (--overlap; NULL: none), both read at exit; `end`: when the host saw it
 * end (the return of the sync that waited for it). transfer_ns: bytes / SIMNCCL_GBPS.
 */
void tr_comm_enable(double gbps);
void tr_comm(unsigned iter, uint64_t bytes, uint64_t cb, uint64_t ce, const struct tr_kslot *before,
	     const struct tr_kslot *overlap, uint64_t end, uint64_t gpu_ns);

/* Writes "iterations", "alloc_failures", "totals", "summary" (members of the open object). */
void tr_truth_write(FILE *f);

#endif /* TRAINER_H */
