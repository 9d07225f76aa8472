/*
 * gen_corpus.c - the fuzzers' seed corpus: small valid traces written with
 * tests/lib/tracegen, one file per shape the reader and the analysis
 * distinguish, into the directory given (build/fuzz/corpus by `make fuzz`).
 *
 * Divided into: one writer per seed (a training loop with input, copies, kernels
 * and syncs; NVTX ranges with strings; a wrapped ring with small chunks; a crash
 * with active chunks; several pids as the eBPF collector writes; summaries in the
 * keep area), and main. Seeds stay a few KiB: the fuzzers mutate small inputs faster.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tracegen.h"

#define T0 1000000000ull

static const char *dir;

static char *seed_path(const char *name)
{
	static char p[4096];
	snprintf(p, sizeof(p), "%s/%s.sptrace", dir, name);
	return p;
}

/* Small chunks and keep area: the seeds stay a few KiB, under -max_len. */
static struct sp_tg *small(const char *name, int32_t pid, int32_t rank)
{
	struct sp_tg_opts o = {.pid = pid, .ppid = 1, .rank = rank, .chunk_size = 1024, .keep_slots = 128};
	return sp_tg_create_opts(seed_path(name), &o);
}

static int finish(struct sp_tg *g, const char *name)
{
	if (sp_tg_finish(g)) {
		perror(name);
		return 1;
	}
	return 0;
}

/* A trainer: steps, a read per step, H2D copy, kernel, its GPU span, sync, a worker thread. */
static void add_loop(struct sp_tg *g, int32_t pid, int iters, uint64_t t0)
{
	uint32_t file = sp_tg_intern(g, "/data/shard-0001.bin");
	uint32_t kn = sp_tg_intern(g, "volta_sgemm_128x64_nn");
	uint32_t wname = sp_tg_intern(g, "pt_data_worker");
	SP_TG_ADD(g, pid + 1, SP_K_THREAD, SP_API_NONE, t0, t0, {SP_F_NAME, wname});
	SP_TG_ADD(g, pid, SP_K_ALLOC, SP_API_cudaMalloc, t0 + 10, t0 + 20, {SP_F_DPTR, 0x7000}, {SP_F_BYTES, 1 << 20},
		  {SP_F_LIVE, 1 << 20});
	for (int i = 0; i < iters; i++) {
		uint64_t t = t0 + 1000 + (uint64_t)i * 100000;
		uint64_t op = (uint64_t)i * 2 + 1;
		SP_TG_ADD(g, pid, SP_K_STEP, SP_API_stepprof_step, t, t, {SP_F_VALUE, (uint64_t)i});
		SP_TG_ADD(g, pid + 1, SP_K_OPEN, SP_API_open, t + 100, t + 300, {SP_F_PATH, file}, {SP_F_FD, 7});
		SP_TG_ADD(g, pid + 1, SP_K_READ, SP_API_read, t + 400, t + 20000, {SP_F_PATH, file},
			  {SP_F_BYTES, 65536}, {SP_F_FD, 7});
		SP_TG_ADD(g, pid + 1, SP_K_CLOSE, SP_API_close, t + 20100, t + 20200, {SP_F_PATH, file}, {SP_F_FD, 7});
		SP_TG_ADD(g, pid, SP_K_LOADER_WAIT, SP_API_poll, t + 200, t + 21000, {SP_F_FD, 9}, {SP_F_BYTES, 64});
		SP_TG_ADD(g, pid, SP_K_COPY, SP_API_cudaMemcpyAsync, t + 21000, t + 21500, {SP_F_STREAM, 0x10},
			  {SP_F_DPTR, 0x7000}, {SP_F_BYTES, 65536}, {SP_F_OP, op}, {SP_F_DIRECTION, 1});
		SP_TG_ADD(g, pid, SP_K_LAUNCH, SP_API_cudaLaunchKernel, t + 22000, t + 22400, {SP_F_STREAM, 0x10},
			  {SP_F_NAME, kn}, {SP_F_OP, op + 1});
		SP_TG_ADD(g, pid, SP_K_SYNC, SP_API_cudaStreamSynchronize, t + 23000, t + 80500, {SP_F_STREAM, 0x10});
		/* the spans, read back at the sync: one to a record, or two (GPU_SPAN2) as the recorder writes them */
		if (i % 2) {
			SP_TG_ADD(g, pid, SP_K_GPU_SPAN2, SP_API_cudaMemcpyAsync, t + 21200, t + 25000, {SP_F_OP, op},
				  {SP_F_OP_DELTA, 1}, {SP_F_API2, SP_API_cudaLaunchKernel}, {SP_F_BEGIN_DELTA, 3800},
				  {SP_F_DUR2, 55000});
		} else {
			SP_TG_ADD(g, pid, SP_K_GPU_SPAN, SP_API_cudaMemcpyAsync, t + 21200, t + 25000, {SP_F_OP, op});
			SP_TG_ADD(g, pid, SP_K_GPU_SPAN, SP_API_cudaLaunchKernel, t + 25000, t + 80000, {SP_F_OP, op + 1});
		}
	}
	SP_TG_ADD(g, pid, SP_K_FREE, SP_API_cudaFree, t0 + 1000 + (uint64_t)iters * 100000, 0, {SP_F_DPTR, 0x7000},
		  {SP_F_BYTES, 1 << 20});
}

static int seed_loop(void)
{
	struct sp_tg *g = small("loop", 4242, 0);
	sp_tg_header(g)->features = SP_FEAT_CUDA | SP_FEAT_LIBC_IO;
	add_loop(g, 4242, 6, T0);
	return finish(g, "loop");
}

/* NVTX ranges and marks, a LOST record, a fork: the string-heavy path. */
static int seed_nvtx(void)
{
	struct sp_tg *g = small("nvtx", 5000, -1);
	uint32_t step = sp_tg_intern(g, "train_step");
	uint32_t fwd = sp_tg_intern(g, "forward");
	uint32_t dom = sp_tg_intern(g, "torch");
	uint32_t mk = sp_tg_intern(g, "epoch");
	for (int i = 0; i < 5; i++) {
		uint64_t t = T0 + (uint64_t)i * 50000;
		SP_TG_ADD(g, 5000, SP_K_RANGE, SP_API_nvtx, t, t + 40000, {SP_F_NAME, step}, {SP_F_DOMAIN, dom},
			  {SP_F_VALUE, 0});
		SP_TG_ADD(g, 5000, SP_K_RANGE, SP_API_nvtx, t + 100, t + 20000, {SP_F_NAME, fwd}, {SP_F_DOMAIN, dom},
			  {SP_F_VALUE, 1});
		SP_TG_ADD(g, 5000, SP_K_NVTX_MARK, SP_API_nvtx, t + 50, t + 50, {SP_F_NAME, mk}, {SP_F_DOMAIN, dom});
	}
	SP_TG_ADD(g, 5000, SP_K_MARK, SP_API_stepprof_mark, T0 + 300000, T0 + 300000, {SP_F_NAME, mk});
	SP_TG_ADD(g, 5001, SP_K_LOST, 0, T0 + 300100, T0 + 300100, {SP_F_COUNT, 4});
	SP_TG_ADD(g, 5000, SP_K_FORK, SP_API_NONE, T0 + 300200, T0 + 300200, {SP_F_PID, 5002});
	sp_tg_string(g, 40, "an odd id", 9);
	return finish(g, "nvtx");
}

/* Small chunks in a fixed ring that wraps: overwritten chunks, sequence numbers out of position. */
static int seed_ring(void)
{
	struct sp_tg_opts o = {.pid = 6000, .ppid = 1, .rank = 1, .chunk_size = 256, .ring_chunks = 6,
			       .keep_slots = 64};
	struct sp_tg *g = sp_tg_create_opts(seed_path("ring"), &o);
	add_loop(g, 6000, 8, T0);
	sp_tg_close_thread(g, 6000, 6001);
	return finish(g, "ring");
}

/* A process that died: chunks left ACTIVE, lost records in the header. */
static int seed_crash(void)
{
	struct sp_tg_opts o = {.pid = 7000, .ppid = 1, .rank = -1, .chunk_size = 512, .keep_slots = 128,
			       .leave_active = 1};
	struct sp_tg *g = sp_tg_create_opts(seed_path("crash"), &o);
	add_loop(g, 7000, 3, T0);
	sp_tg_header(g)->lost_records = 3;
	return finish(g, "crash");
}

/* The eBPF collector's file: records of several pids in one file. */
static int seed_bpf(void)
{
	struct sp_tg *g = small("bpf", 8000, -1);
	sp_tg_header(g)->features = SP_FEAT_BPF;
	uint32_t p = sp_tg_intern(g, "/data/x");
	for (int i = 0; i < 4; i++) {
		struct sp_event ev = {.kind = SP_K_READ, .api = SP_API_read, .pid = 8100 + i, .tid = 8100 + i};
		ev.begin_ns = T0 + (uint64_t)i * 1000;
		ev.end_ns = ev.begin_ns + 500;
		ev.f[SP_F_PATH] = p;
		ev.f[SP_F_BYTES] = 4096;
		ev.f[SP_F_FD] = 5;
		sp_tg_add_event(g, &ev);
	}
	return finish(g, "bpf");
}

/* Summaries (format 1.1) in the keep area, beside a short loop. */
static int seed_summary(void)
{
	struct sp_tg *g = small("summary", 9000, 0);
	add_loop(g, 9000, 2, T0);
	uint64_t f[SP_F__COUNT] = {0};
	f[SP_F_STEPS] = 2;
	f[SP_F_RECORDS] = 40;
	f[SP_F_LOST] = 1;
	sp_tg_add_keep(g, SP_K_SUMMARY, SP_API_NONE, T0, T0 + 300000, f);
	memset(f, 0, sizeof(f));
	f[SP_F_LIVE] = 1 << 20;
	f[SP_F_DEVICE] = 0;
	f[SP_F_PEAK] = 2 << 20;
	sp_tg_add_keep(g, SP_K_SUMMARY_DEVICE, SP_API_NONE, T0, T0 + 300000, f);
	return finish(g, "summary");
}

int main(int argc, char **argv)
{
	if (argc != 2) {
		fprintf(stderr, "usage: %s DIR\n", argv[0]);
		return 2;
	}
	dir = argv[1];
	return seed_loop() | seed_nvtx() | seed_ring() | seed_crash() | seed_bpf() | seed_summary();
}
