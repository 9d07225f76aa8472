/*
 * test_nccl.c - the simulated NCCL (tests/simgpu/nccl_*.c) with ranks as forked
 * processes, as torchrun runs them: the rendezvous of ncclCommInitRank, the
 * data and the timing of an all-reduce (its kernel ends only after the last rank
 * arrived, a time the test itself chose by sleeping), send/recv, groups, splits
 * and the time-out of a rank that never comes.
 *
 * Each rank dlopens the simulated runtime and libnccl.so.2 itself (after the
 * fork: a child forked after cuInit cannot use CUDA). Ranks report through a
 * shared anonymous mapping made before the fork; a failing rank writes its
 * message there and exits 1.
 */
#include <criterion/criterion.h>

#include <dlfcn.h>
#include <nccl.h>
#include <signal.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "testlib.h"

#define MAXR 4

struct shared {
	_Atomic int id_ready;
	ncclUniqueId id;
	uint64_t t[MAXR][4]; /* per rank: times the test reads */
	int v[MAXR][4];	     /* per rank: values */
	char err[MAXR][256];
};

static struct shared *S;
static void *rt, *nc;

static uint64_t now_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

static int my_rank;

static void __attribute__((noreturn, format(printf, 1, 2))) fail(const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(S->err[my_rank], sizeof(S->err[my_rank]), fmt, ap);
	va_end(ap);
	_exit(1);
}

static void *sym(void *h, const char *name)
{
	void *p = dlsym(h, name);
	if (!p)
		fail("no %s", name);
	return p;
}
#define N(fn) ((__typeof__(&fn))sym(nc, #fn))
#define R(fn) ((__typeof__(&fn))sym(rt, #fn))
#define NOK(call)                                                                                                      \
	do {                                                                                                           \
		ncclResult_t r_ = (call);                                                                              \
		if (r_ != ncclSuccess)                                                                                 \
			fail("%s: %d (%s)", #call, (int)r_, N(ncclGetLastError)(NULL));                                \
	} while (0)
#define COK(call)                                                                                                      \
	do {                                                                                                           \
		cudaError_t r_ = (call);                                                                               \
		if (r_ != cudaSuccess)                                                                                 \
			fail("%s: CUDA error %d", #call, (int)r_);                                                     \
	} while (0)
#define EXPECT(cond, ...)                                                                                              \
	do {                                                                                                           \
		if (!(cond))                                                                                           \
			fail(__VA_ARGS__);                                                                             \
	} while (0)

/* In a rank: load the libraries, get the unique id from rank 0, join. */
static ncclComm_t join(int rank, int n)
{
	/* The driver first, by path: the libraries' dlopen("libcuda.so.1") then finds it loaded
	 * (a sanitizer's dlopen interceptor hides their RUNPATH from the search). */
	if (!dlopen(sp_t_build("simgpu/libcuda.so.1"), RTLD_NOW | RTLD_GLOBAL))
		fail("dlopen: %s", dlerror());
	rt = dlopen(sp_t_build("simgpu/libcudart.so.12"), RTLD_NOW | RTLD_GLOBAL);
	nc = dlopen(sp_t_build("simgpu/libnccl.so.2"), RTLD_NOW | RTLD_GLOBAL);
	if (!rt || !nc)
		fail("dlopen: %s", dlerror());
	COK(R(cudaSetDevice)(0));
	if (rank == 0) {
		NOK(N(ncclGetUniqueId)(&S->id));
		atomic_store(&S->id_ready, 1);
	}
	while (!atomic_load(&S->id_ready))
		usleep(1000);
	ncclComm_t c = NULL;
	NOK(N(ncclCommInitRank)(&c, n, S->id, rank));
	return c;
}

/* Fork n ranks running fn, wait for them (killed after timeout_s); every rank must exit 0. */
static void run_ranks(int n, void (*fn)(int rank, int n), int timeout_s)
{
	S = mmap(NULL, sizeof(*S), PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
	cr_assert_neq(S, MAP_FAILED);
	memset(S, 0, sizeof(*S));
	pid_t pid[MAXR];
	for (int r = 0; r < n; r++) {
		fflush(NULL);
		pid[r] = fork();
		cr_assert_geq(pid[r], 0);
		if (pid[r] == 0) {
			my_rank = r;
			fn(r, n);
			_exit(0);
		}
	}
	uint64_t deadline = now_ns() + (uint64_t)timeout_s * 1000000000ull;
	int status[MAXR], left = n;
	for (int r = 0; r < n; r++)
		status[r] = -1;
	while (left) {
		for (int r = 0; r < n; r++) {
			int st;
			if (status[r] == -1 && waitpid(pid[r], &st, WNOHANG) == pid[r]) {
				status[r] = WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
				left--;
			}
		}
		if (left && now_ns() > deadline) {
			for (int r = 0; r < n; r++)
				if (status[r] == -1) {
					kill(pid[r], SIGKILL);
					waitpid(pid[r], NULL, 0);
					status[r] = 137;
					left--;
				}
		}
		usleep(2000);
	}
	for (int r = 0; r < n; r++)
		cr_expect_eq(status[r], 0, "rank %d: exit %d: %s", r, status[r], S->err[r]);
}

/* ---- init ---- */

#define LATE_MS 300

static void rank_init(int rank, int n)
{
	if (rank == n - 1)
		usleep(LATE_MS * 1000);
	S->t[rank][0] = now_ns(); /* the call */
	ncclComm_t c = join(rank, n);
	S->t[rank][1] = now_ns(); /* its return */
	int cnt = -1, ur = -1, dev = -1, ver = 0;
	NOK(N(ncclCommCount)(c, &cnt));
	NOK(N(ncclCommUserRank)(c, &ur));
	NOK(N(ncclCommCuDevice)(c, &dev));
	NOK(N(ncclGetVersion)(&ver));
	EXPECT(cnt == n && ur == rank && dev == 0, "count %d rank %d device %d", cnt, ur, dev);
	EXPECT(ver == NCCL_VERSION_CODE, "version %d", ver);
	NOK(N(ncclCommDestroy)(c));
}

/* No rank's ncclCommInitRank returns before the last rank called it (LATE_MS after the others). */
Test(nccl, init_rank_waits_for_every_rank, .timeout = 60)
{
	run_ranks(3, rank_init, 30);
	uint64_t last_call = S->t[2][0];
	for (int r = 0; r < 3; r++)
		cr_expect_geq(S->t[r][1], last_call, "rank %d returned %.1f ms before the last rank called", r,
			      (double)(last_call - S->t[r][1]) / 1e6);
	cr_expect_geq(S->t[2][0] - S->t[0][0], (uint64_t)(LATE_MS - 50) * 1000000ull);
}

/* ---- all-reduce ---- */

#define AR_COUNT 4096

static void rank_allreduce(int rank, int n)
{
	ncclComm_t c = join(rank, n);
	float *h = malloc(AR_COUNT * sizeof(float)), *d = NULL;
	for (int i = 0; i < AR_COUNT; i++)
		h[i] = (float)(rank + 1) + (float)i;
	cudaStream_t s;
	cudaEvent_t e0, e1;
	COK(R(cudaStreamCreate)(&s));
	COK(R(cudaEventCreate)(&e0));
	COK(R(cudaEventCreate)(&e1));
	COK(R(cudaMalloc)((void **)&d, AR_COUNT * sizeof(float)));
	COK(R(cudaMemcpy)(d, h, AR_COUNT * sizeof(float), cudaMemcpyHostToDevice));
	if (rank == n - 1)
		usleep(LATE_MS * 1000); /* the last rank arrives late */
	COK(R(cudaEventRecord)(e0, s));
	S->t[rank][0] = now_ns(); /* the call */
	NOK(N(ncclAllReduce)(d, d, AR_COUNT, ncclFloat, ncclSum, c, s));
	S->t[rank][1] = now_ns(); /* the call returned */
	COK(R(cudaEventRecord)(e1, s));
	COK(R(cudaStreamSynchronize)(s));
	S->t[rank][2] = now_ns(); /* the host saw the end */
	float ms = 0;
	COK(R(cudaEventElapsedTime)(&ms, e0, e1));
	S->t[rank][3] = (uint64_t)((double)ms * 1e6);
	COK(R(cudaMemcpy)(h, d, AR_COUNT * sizeof(float), cudaMemcpyDeviceToHost));
	float base = (float)(n * (n + 1) / 2);
	for (int i = 0; i < AR_COUNT; i++)
		EXPECT(h[i] == base + (float)(n * i), "element %d: %g, not %g", i, h[i], base + (float)(n * i));
	ncclResult_t ae = ncclInternalError;
	NOK(N(ncclCommGetAsyncError)(c, &ae));
	EXPECT(ae == ncclSuccess, "async error %d", (int)ae);
	NOK(N(ncclCommFinalize)(c));
	NOK(N(ncclCommDestroy)(c));
}

/* The sum is right everywhere; the early ranks' calls return at once, their kernels end after the late one came. */
Test(nccl, allreduce_sums_and_waits_for_the_last_rank, .timeout = 60)
{
	run_ranks(3, rank_allreduce, 30);
	uint64_t last = S->t[2][0];
	for (int r = 0; r < 2; r++) {
		cr_expect_lt(S->t[r][1] - S->t[r][0], 100000000ull, "rank %d: the call blocked %.1f ms", r,
			     (double)(S->t[r][1] - S->t[r][0]) / 1e6);
		cr_expect_geq(S->t[r][2], last, "rank %d: done %.1f ms before the last rank arrived", r,
			      (double)(last - S->t[r][2]) / 1e6);
		/* the GPU's own timing of the kernel covers the wait for the late rank */
		cr_expect_geq(S->t[r][3], (uint64_t)(LATE_MS - 60) * 1000000ull, "rank %d: kernel %.1f ms", r,
			      (double)S->t[r][3] / 1e6);
	}
}

/* bytes / SIMNCCL_GBPS on the stream's timeline: 1 MiB at 0.0125 GB/s is 84 ms */
static void rank_bandwidth(int rank, int n)
{
	setenv("SIMNCCL_GBPS", "0.0125", 1);
	ncclComm_t c = join(rank, n);
	size_t count = 1u << 18;
	int32_t *d = NULL;
	cudaStream_t s;
	cudaEvent_t e0, e1;
	COK(R(cudaStreamCreate)(&s));
	COK(R(cudaEventCreate)(&e0));
	COK(R(cudaEventCreate)(&e1));
	COK(R(cudaMalloc)((void **)&d, count * 4));
	int32_t *h = malloc(count * 4);
	for (size_t i = 0; i < count; i++)
		h[i] = rank ? 1 : 2;
	COK(R(cudaMemcpy)(d, h, count * 4, cudaMemcpyHostToDevice));
	NOK(N(ncclAllReduce)(d, d, count, ncclInt32, ncclSum, c, s)); /* warm: both ranks are there afterwards */
	COK(R(cudaStreamSynchronize)(s));
	COK(R(cudaEventRecord)(e0, s));
	NOK(N(ncclAllReduce)(d, d, count, ncclInt32, ncclSum, c, s));
	COK(R(cudaEventRecord)(e1, s));
	COK(R(cudaStreamSynchronize)(s));
	float ms = 0;
	COK(R(cudaEventElapsedTime)(&ms, e0, e1));
	S->t[rank][0] = (uint64_t)((double)ms * 1e6);
	COK(R(cudaMemcpy)(h, d, count * 4, cudaMemcpyDeviceToHost));
	EXPECT(h[0] == 6 && h[count - 1] == 6, "sum %d %d, not 6", h[0], h[count - 1]);
	NOK(N(ncclCommDestroy)(c));
}

Test(nccl, allreduce_takes_bytes_over_gbps, .timeout = 60)
{
	run_ranks(2, rank_bandwidth, 30);
	double want = (double)(1u << 20) / 0.0125; /* ns */
	for (int r = 0; r < 2; r++) {
		cr_expect_geq((double)S->t[r][0], want * 0.98, "rank %d: %.1f ms, want %.1f", r, S->t[r][0] / 1e6,
			      want / 1e6);
		cr_expect_leq((double)S->t[r][0], want + 250e6, "rank %d: %.1f ms, want %.1f", r, S->t[r][0] / 1e6,
			      want / 1e6);
	}
}

/* ---- point-to-point and groups ---- */

static void rank_sendrecv(int rank, int n)
{
	ncclComm_t c = join(rank, n);
	int *d = NULL, h[256];
	cudaStream_t s;
	COK(R(cudaStreamCreate)(&s));
	COK(R(cudaMalloc)((void **)&d, sizeof(h)));
	if (rank == 0) {
		for (int i = 0; i < 256; i++)
			h[i] = 1000 + i;
		COK(R(cudaMemcpy)(d, h, sizeof(h), cudaMemcpyHostToDevice));
		usleep(200000); /* the receiver waits for the sender */
		S->t[0][0] = now_ns();
		NOK(N(ncclSend)(d, 256, ncclInt32, 1, c, s));
	} else {
		NOK(N(ncclRecv)(d, 256, ncclInt32, 0, c, s));
	}
	COK(R(cudaStreamSynchronize)(s));
	S->t[rank][1] = now_ns();
	if (rank == 1) {
		COK(R(cudaMemcpy)(h, d, sizeof(h), cudaMemcpyDeviceToHost));
		for (int i = 0; i < 256; i++)
			EXPECT(h[i] == 1000 + i, "element %d: %d", i, h[i]);
	}
	NOK(N(ncclCommDestroy)(c));
}

Test(nccl, send_recv_moves_the_data, .timeout = 60)
{
	run_ranks(2, rank_sendrecv, 30);
	cr_expect_geq(S->t[1][1], S->t[0][0], "the receive completed before the send was issued");
}

/*
 * A ring exchange and an all-reduce in one group: every rank sends to the next and
 * receives from the previous. Issued one by one on one stream, each rank's send
 * would wait for a receive queued behind the peer's own send; a group launches
 * them together.
 */
static void rank_group(int rank, int n)
{
	setenv("SIMNCCL_TIMEOUT_MS", "5000", 1);
	ncclComm_t c = join(rank, n);
	int *d = NULL, h[3 * 64];
	cudaStream_t s;
	COK(R(cudaStreamCreate)(&s));
	COK(R(cudaMalloc)((void **)&d, sizeof(h)));
	for (int i = 0; i < 64; i++)
		h[i] = rank * 100 + i, h[64 + i] = -1, h[128 + i] = rank;
	COK(R(cudaMemcpy)(d, h, sizeof(h), cudaMemcpyHostToDevice));
	NOK(N(ncclGroupStart)());
	NOK(N(ncclGroupStart)()); /* nested: only the outermost end launches */
	NOK(N(ncclSend)(d, 64, ncclInt32, (rank + 1) % n, c, s));
	NOK(N(ncclRecv)(d + 64, 64, ncclInt32, (rank + n - 1) % n, c, s));
	NOK(N(ncclGroupEnd)());
	NOK(N(ncclAllReduce)(d + 128, d + 128, 64, ncclInt32, ncclMax, c, s));
	NOK(N(ncclGroupEnd)());
	COK(R(cudaStreamSynchronize)(s));
	COK(R(cudaMemcpy)(h, d, sizeof(h), cudaMemcpyDeviceToHost));
	int prev = (rank + n - 1) % n;
	for (int i = 0; i < 64; i++) {
		EXPECT(h[64 + i] == prev * 100 + i, "received %d at %d, not %d", h[64 + i], i, prev * 100 + i);
		EXPECT(h[128 + i] == n - 1, "max %d, not %d", h[128 + i], n - 1);
	}
	ncclResult_t ae;
	NOK(N(ncclCommGetAsyncError)(c, &ae));
	EXPECT(ae == ncclSuccess, "async error %d", (int)ae);
	EXPECT(N(ncclGroupEnd)() == ncclInvalidUsage, "an unmatched ncclGroupEnd was accepted");
	NOK(N(ncclCommDestroy)(c));
}

Test(nccl, group_ring_exchange_and_allreduce, .timeout = 60)
{
	run_ranks(4, rank_group, 30);
}

/* ---- split ---- */

/* color = rank % 2, key = -rank: within a color the higher parent rank comes first */
static void rank_split(int rank, int n)
{
	ncclComm_t c = join(rank, n), sub = NULL;
	NOK(N(ncclCommSplit)(c, rank % 2, -rank, &sub, NULL));
	EXPECT(sub, "no communicator");
	int cnt = -1, ur = -1;
	NOK(N(ncclCommCount)(sub, &cnt));
	NOK(N(ncclCommUserRank)(sub, &ur));
	S->v[rank][0] = cnt, S->v[rank][1] = ur;
	int *d = NULL, h = rank;
	cudaStream_t s;
	COK(R(cudaStreamCreate)(&s));
	COK(R(cudaMalloc)((void **)&d, sizeof(int)));
	COK(R(cudaMemcpy)(d, &h, sizeof(int), cudaMemcpyHostToDevice));
	NOK(N(ncclAllReduce)(d, d, 1, ncclInt32, ncclSum, sub, s));
	COK(R(cudaStreamSynchronize)(s));
	COK(R(cudaMemcpy)(&h, d, sizeof(int), cudaMemcpyDeviceToHost));
	S->v[rank][2] = h;
	/* NCCL_SPLIT_NOCOLOR: no communicator, but the split still needs every rank */
	ncclComm_t none = (ncclComm_t)1;
	NOK(N(ncclCommSplit)(c, rank == 0 ? NCCL_SPLIT_NOCOLOR : 0, rank, &none, NULL));
	EXPECT((rank == 0) == (none == NULL), "rank %d: communicator %p", rank, (void *)none);
	if (none) {
		NOK(N(ncclCommCount)(none, &cnt));
		EXPECT(cnt == n - 1, "%d ranks, not %d", cnt, n - 1);
		NOK(N(ncclCommDestroy)(none));
	}
	NOK(N(ncclCommDestroy)(sub));
	NOK(N(ncclCommDestroy)(c));
}

Test(nccl, split_by_color_and_key, .timeout = 60)
{
	run_ranks(4, rank_split, 30);
	/* parent ranks 0,2 (color 0) and 1,3 (color 1); keys -rank put 2 before 0, 3 before 1 */
	static const int want_rank[4] = {1, 1, 0, 0}, want_sum[4] = {2, 4, 2, 4};
	for (int r = 0; r < 4; r++) {
		cr_expect_eq(S->v[r][0], 2, "rank %d: %d ranks", r, S->v[r][0]);
		cr_expect_eq(S->v[r][1], want_rank[r], "rank %d: new rank %d", r, S->v[r][1]);
		cr_expect_eq(S->v[r][2], want_sum[r], "rank %d: sum %d", r, S->v[r][2]);
	}
}

/* ---- a rank that never comes ---- */

static void rank_absent(int rank, int n)
{
	setenv("SIMNCCL_TIMEOUT_MS", "500", 1);
	ncclComm_t c = join(rank, n);
	if (rank == 1) { /* joined, but never takes part in the all-reduce */
		usleep(1500000);
		_exit(0);
	}
	int *d = NULL;
	cudaStream_t s;
	COK(R(cudaStreamCreate)(&s));
	COK(R(cudaMalloc)((void **)&d, 64));
	uint64_t t0 = now_ns();
	NOK(N(ncclAllReduce)(d, d, 16, ncclInt32, ncclSum, c, s));
	COK(R(cudaStreamSynchronize)(s));
	S->t[0][0] = now_ns() - t0;
	ncclResult_t ae = ncclSuccess;
	NOK(N(ncclCommGetAsyncError)(c, &ae));
	S->v[0][0] = (int)ae;
	NOK(N(ncclCommAbort)(c));
}

Test(nccl, absent_rank_times_out_with_a_remote_error, .timeout = 60)
{
	run_ranks(2, rank_absent, 30);
	cr_expect_eq(S->v[0][0], (int)ncclRemoteError, "async error %d", S->v[0][0]);
	cr_expect_geq(S->t[0][0], 450000000ull, "gave up after %.1f ms", S->t[0][0] / 1e6);
	cr_expect_lt(S->t[0][0], 5000000000ull, "gave up after %.1f ms", S->t[0][0] / 1e6);
}

/* ---- one process, two devices ---- */

/* ncclCommInitAll: the communicators of one process, one per device, driven in one group */
static void rank_init_all(int rank, int n)
{
	(void)n;
	setenv("SIMGPU_DEVICES", "2", 1);
	/* The driver first, by path: the libraries' dlopen("libcuda.so.1") then finds it loaded
	 * (a sanitizer's dlopen interceptor hides their RUNPATH from the search). */
	if (!dlopen(sp_t_build("simgpu/libcuda.so.1"), RTLD_NOW | RTLD_GLOBAL))
		fail("dlopen: %s", dlerror());
	rt = dlopen(sp_t_build("simgpu/libcudart.so.12"), RTLD_NOW | RTLD_GLOBAL);
	nc = dlopen(sp_t_build("simgpu/libnccl.so.2"), RTLD_NOW | RTLD_GLOBAL);
	if (!rt || !nc)
		fail("dlopen: %s", dlerror());
	ncclComm_t c[2];
	int devs[2] = {1, 0};
	NOK(N(ncclCommInitAll)(c, 2, devs));
	cudaStream_t s[2];
	int *d[2];
	for (int k = 0; k < 2; k++) {
		int ur = -1, dev = -1;
		NOK(N(ncclCommUserRank)(c[k], &ur));
		NOK(N(ncclCommCuDevice)(c[k], &dev));
		EXPECT(ur == k && dev == devs[k], "comm %d: rank %d device %d", k, ur, dev);
		int h[8];
		for (int i = 0; i < 8; i++)
			h[i] = (k + 1) * 10 + i;
		COK(R(cudaSetDevice)(devs[k]));
		COK(R(cudaStreamCreate)(&s[k]));
		COK(R(cudaMalloc)((void **)&d[k], sizeof(h)));
		COK(R(cudaMemcpy)(d[k], h, sizeof(h), cudaMemcpyHostToDevice));
	}
	NOK(N(ncclGroupStart)());
	for (int k = 0; k < 2; k++)
		NOK(N(ncclAllReduce)(d[k], d[k], 8, ncclInt32, ncclSum, c[k], s[k]));
	NOK(N(ncclGroupEnd)());
	for (int k = 0; k < 2; k++) {
		int h[8];
		COK(R(cudaSetDevice)(devs[k]));
		COK(R(cudaStreamSynchronize)(s[k]));
		COK(R(cudaMemcpy)(h, d[k], sizeof(h), cudaMemcpyDeviceToHost));
		for (int i = 0; i < 8; i++)
			EXPECT(h[i] == 30 + 2 * i, "comm %d element %d: %d", k, i, h[i]);
		NOK(N(ncclCommDestroy)(c[k]));
	}
	EXPECT(N(ncclAllReduce)(d[0], d[0], 8, ncclInt32, ncclSum, NULL, s[0]) == ncclInvalidArgument,
	       "a NULL communicator was accepted");
	EXPECT(!strcmp(N(ncclGetErrorString)(ncclRemoteError), "remote process exited or there was a network error"),
	       "error string");
	(void)rank;
}

Test(nccl, init_all_drives_two_devices_in_one_group, .timeout = 60)
{
	run_ranks(1, rank_init_all, 30);
}
