/*
 * nccl_door.c - a two-rank NCCL job for the NCCL hooks' tests
 * (tests/e2e/test_nccl_capture.c). One source, two programs (doors.mk):
 *   nccl_plt     linked to libnccl.so.2: NCCL calls through the PLT
 *   nccl_dlsym   links no NCCL (-DNCCL_DLSYM): dlopens libnccl.so.2 RTLD_LOCAL
 *                and looks every function up by handle
 * Both link the CUDA runtime (libcudart.so.12).
 *
 * The parent forks the ranks and touches neither CUDA nor NCCL (a child forked
 * after cuInit cannot use CUDA); rank 0 makes the ncclUniqueId and hands it to
 * the other through a shared mapping, as torchrun's store would. Each rank selects
 * device = rank, makes a stream, ncclCommInitRank, K all-reduces of COUNT
 * float32, one group of ncclSend + ncclRecv of P2P int64 to and from the
 * other rank, with --split a ncclCommSplit (color 0, key = rank) and an
 * all-reduce on the child communicator, then ncclCommDestroy of each.
 *
 * --all: no fork; one process drives both ranks: ncclCommInitAll on devices 0
 * and 1 (a stream each), then one group per collective holding both ranks'
 * call: all-reduce f16, reduce f64 to root 1, broadcast i8 from root 0, bcast
 * bf16 from root 1, all-gather u32, reduce-scatter i64, each of COUNT elements
 * (the per-rank count); then ncclCommFinalize of both, ncclCommDestroy of the
 * first and ncclCommAbort of the second. Its truth:
 *   {"all":1,"count":N,"pid":P,"comms":["0x...","0x..."],"streams":["0x...","0x..."]}
 *
 * --probe (nccl_dlsym): before loading NCCL, dlsym(RTLD_DEFAULT, "ncclAllReduce")
 * and dlsym(RTLD_NEXT, "ncclAllReduce") must find nothing, as in a process
 * without NCCL (exit status 1 when either found something); then, when the weak
 * references to ncclAllReduce and ncclGroupStart are bound (to an interposer's
 * definitions: there is no NCCL), both are called with errno 4242. Truth:
 *   {"probe":1,"weak":0|1,"all_reduce":RESULT,"group_start":RESULT,"errno":E}
 *
 * usage: nccl_door --truth FILE [--k K] [--count N] [--p2p M] [--split | --all | --probe]
 * Ground truth, one JSON line in FILE (written by the parent after the ranks):
 *   {"nranks":2,"k":K,"count":N,"p2p":M,"split":0|1,"uid":"<256 hex digits>",
 *    "ranks":[{"rank":R,"pid":P,"stream":"0x...","comm":"0x...","split_comm":"0x..."},...]}
 * Exit status 0 when every NCCL and CUDA call of every rank succeeded.
 */
#include <cuda_runtime_api.h>
#include <dlfcn.h>
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#include <nccl.h>

#define NRANKS 2

/* ------------------------------------------------------------- NCCL */

/* clang-format off */
#define NCCL_LIST(X)                                                                                                   \
	X(ncclGetUniqueId) X(ncclCommInitRank) X(ncclAllReduce) X(ncclGroupStart) X(ncclGroupEnd) X(ncclSend)           \
	X(ncclRecv) X(ncclCommSplit) X(ncclCommDestroy) X(ncclGetErrorString) X(ncclCommInitAll) X(ncclReduce)         \
	X(ncclBroadcast) X(ncclBcast) X(ncclAllGather) X(ncclReduceScatter) X(ncclCommFinalize) X(ncclCommAbort)
/* clang-format on */

#ifdef NCCL_DLSYM
#define NDECL(f) static __typeof__(&f) p_##f;
NCCL_LIST(NDECL)
#undef NDECL

static void nccl_load(void)
{
	void *h = dlopen("libnccl.so.2", RTLD_NOW | RTLD_LOCAL);
	if (!h) {
		fprintf(stderr, "nccl_door: dlopen libnccl.so.2: %s\n", dlerror());
		exit(2);
	}
#define NLOAD(f)                                                                                                       \
	if (!(p_##f = (__typeof__(&f))dlsym(h, #f))) {                                                                 \
		fprintf(stderr, "nccl_door: dlsym %s: %s\n", #f, dlerror());                                           \
		exit(2);                                                                                               \
	}
	NCCL_LIST(NLOAD)
#undef NLOAD
}
#define N(f) p_##f
/* --probe: bound only when something defines them (no NCCL is linked) */
#pragma weak ncclAllReduce
#pragma weak ncclGroupStart
#else
static void nccl_load(void)
{
}
#define N(f) f
#endif

static int failed;

#define NCHECK(what, call)                                                                                             \
	do {                                                                                                           \
		ncclResult_t r_ = (call);                                                                              \
		if (r_ != ncclSuccess) {                                                                               \
			fprintf(stderr, "nccl_door rank %d: %s: %d %s\n", rank, what, (int)r_,                         \
				N(ncclGetErrorString)(r_));                                                            \
			failed = 1;                                                                                    \
		}                                                                                                      \
	} while (0)
#define CCHECK(what, call)                                                                                             \
	do {                                                                                                           \
		cudaError_t e_ = (call);                                                                               \
		if (e_ != cudaSuccess) {                                                                               \
			fprintf(stderr, "nccl_door rank %d: %s: cuda error %d\n", rank, what, (int)e_);                \
			failed = 1;                                                                                    \
		}                                                                                                      \
	} while (0)

/* ------------------------------------------------------------- a rank */

struct opts {
	int k, split;
	size_t count, p2p;
};

/* What rank 0 hands the others (a MAP_SHARED page made before the fork). */
struct shared {
	ncclUniqueId uid;
	volatile int ready; /* 1: uid set; -1: rank 0 failed */
};

static int rank_main(int rank, struct shared *sh, const struct opts *o, const char *out)
{
	const ncclUniqueId *uid = &sh->uid;
	cudaStream_t s = NULL;
	ncclComm_t comm = NULL, sub = NULL;
	float *a = NULL;
	int64_t *sb = NULL, *rb = NULL;
	CCHECK("cudaSetDevice", cudaSetDevice(rank));
	CCHECK("cudaStreamCreate", cudaStreamCreate(&s));
	CCHECK("cudaMalloc", cudaMalloc((void **)&a, o->count * sizeof(float)));
	CCHECK("cudaMalloc", cudaMalloc((void **)&sb, o->p2p * sizeof(int64_t)));
	CCHECK("cudaMalloc", cudaMalloc((void **)&rb, o->p2p * sizeof(int64_t)));
	if (rank == 0) {
		NCHECK("ncclGetUniqueId", N(ncclGetUniqueId)(&sh->uid));
		__atomic_store_n(&sh->ready, failed ? -1 : 1, __ATOMIC_RELEASE);
	}
	if (failed)
		return 1;
	int ready;
	while (!(ready = __atomic_load_n(&sh->ready, __ATOMIC_ACQUIRE)))
		usleep(1000);
	if (ready < 0)
		return 1;
	NCHECK("ncclCommInitRank", N(ncclCommInitRank)(&comm, NRANKS, *uid, rank));
	if (failed)
		return 1;
	for (int i = 0; i < o->k; i++)
		NCHECK("ncclAllReduce", N(ncclAllReduce)(a, a, o->count, ncclFloat32, ncclSum, comm, s));
	int peer = (rank + 1) % NRANKS;
	NCHECK("ncclGroupStart", N(ncclGroupStart)());
	NCHECK("ncclSend", N(ncclSend)(sb, o->p2p, ncclInt64, peer, comm, s));
	NCHECK("ncclRecv", N(ncclRecv)(rb, o->p2p, ncclInt64, peer, comm, s));
	NCHECK("ncclGroupEnd", N(ncclGroupEnd)());
	if (o->split) {
		NCHECK("ncclCommSplit", N(ncclCommSplit)(comm, 0, rank, &sub, NULL));
		if (sub)
			NCHECK("ncclAllReduce (split)", N(ncclAllReduce)(a, a, o->count, ncclFloat32, ncclSum, sub, s));
	}
	CCHECK("cudaStreamSynchronize", cudaStreamSynchronize(s));
	if (sub)
		NCHECK("ncclCommDestroy (split)", N(ncclCommDestroy)(sub));
	NCHECK("ncclCommDestroy", N(ncclCommDestroy)(comm));
	FILE *f = fopen(out, "w");
	if (!f)
		return 1;
	fprintf(f, "{\"rank\":%d,\"pid\":%d,\"stream\":\"0x%llx\",\"comm\":\"0x%llx\",\"split_comm\":\"0x%llx\"}", rank,
		(int)getpid(), (unsigned long long)(uintptr_t)s, (unsigned long long)(uintptr_t)comm,
		(unsigned long long)(uintptr_t)sub);
	fclose(f);
	return failed;
}

/* ------------------------------------------------------ --all: one process */

static int all_main(const struct opts *o, const char *out)
{
	int rank = -1, devs[NRANKS];
	ncclComm_t c[NRANKS] = {NULL};
	cudaStream_t s[NRANKS] = {NULL};
	void *a[NRANKS] = {NULL}, *b[NRANKS] = {NULL};
	for (int d = 0; d < NRANKS; d++) {
		devs[d] = d;
		CCHECK("cudaSetDevice", cudaSetDevice(d));
		CCHECK("cudaStreamCreate", cudaStreamCreate(&s[d]));
		CCHECK("cudaMalloc", cudaMalloc(&a[d], o->count * NRANKS * 8));
		CCHECK("cudaMalloc", cudaMalloc(&b[d], o->count * NRANKS * 8));
	}
	CCHECK("cudaSetDevice", cudaSetDevice(0));
	if (failed)
		return 1;
	NCHECK("ncclCommInitAll", N(ncclCommInitAll)(c, NRANKS, devs));
	if (failed)
		return 1;
#define EACH(what, call)                                                                                               \
	do {                                                                                                           \
		NCHECK("ncclGroupStart", N(ncclGroupStart)());                                                         \
		for (int d = 0; d < NRANKS; d++)                                                                       \
			NCHECK(what, call);                                                                            \
		NCHECK("ncclGroupEnd", N(ncclGroupEnd)());                                                             \
	} while (0)
	size_t n = o->count;
	EACH("ncclAllReduce", N(ncclAllReduce)(a[d], a[d], n, ncclFloat16, ncclSum, c[d], s[d]));
	EACH("ncclReduce", N(ncclReduce)(a[d], b[d], n, ncclFloat64, ncclMax, 1, c[d], s[d]));
	EACH("ncclBroadcast", N(ncclBroadcast)(a[d], b[d], n, ncclInt8, 0, c[d], s[d]));
	EACH("ncclBcast", N(ncclBcast)(a[d], n, ncclBfloat16, 1, c[d], s[d]));
	EACH("ncclAllGather", N(ncclAllGather)(a[d], b[d], n, ncclUint32, c[d], s[d]));
	EACH("ncclReduceScatter", N(ncclReduceScatter)(b[d], a[d], n, ncclInt64, ncclSum, c[d], s[d]));
#undef EACH
	for (int d = 0; d < NRANKS; d++)
		CCHECK("cudaStreamSynchronize", cudaStreamSynchronize(s[d]));
	for (int d = 0; d < NRANKS; d++)
		NCHECK("ncclCommFinalize", N(ncclCommFinalize)(c[d]));
	NCHECK("ncclCommDestroy", N(ncclCommDestroy)(c[0]));
	NCHECK("ncclCommAbort", N(ncclCommAbort)(c[1]));
	FILE *f = fopen(out, "w");
	if (!f)
		return 1;
	fprintf(f,
		"{\"all\":1,\"count\":%zu,\"pid\":%d,\"comms\":[\"0x%llx\",\"0x%llx\"],\"streams\":[\"0x%llx\",\"0x%"
		"llx\"]}\n",
		n, (int)getpid(), (unsigned long long)(uintptr_t)c[0], (unsigned long long)(uintptr_t)c[1],
		(unsigned long long)(uintptr_t)s[0], (unsigned long long)(uintptr_t)s[1]);
	fclose(f);
	return failed;
}

/* ------------------------------------------------------------- main */

int main(int argc, char **argv)
{
	const char *truth = NULL;
	int all = 0, probe = 0;
	struct opts o = {.k = 4, .count = 1 << 16, .p2p = 1 << 12, .split = 0};
	for (int i = 1; i < argc; i++) {
		if (!strcmp(argv[i], "--truth") && i + 1 < argc)
			truth = argv[++i];
		else if (!strcmp(argv[i], "--k") && i + 1 < argc)
			o.k = atoi(argv[++i]);
		else if (!strcmp(argv[i], "--count") && i + 1 < argc)
			o.count = strtoull(argv[++i], NULL, 10);
		else if (!strcmp(argv[i], "--p2p") && i + 1 < argc)
			o.p2p = strtoull(argv[++i], NULL, 10);
		else if (!strcmp(argv[i], "--split"))
			o.split = 1;
		else if (!strcmp(argv[i], "--all"))
			all = 1;
		else if (!strcmp(argv[i], "--probe"))
			probe = 1;
		else {
			fprintf(stderr, "usage: nccl_door --truth FILE [--k K] [--count N] [--p2p M] [--split | --all "
					"| --probe]\n");
			return 2;
		}
	}
	if (!truth) {
		fprintf(stderr, "nccl_door: --truth FILE is required\n");
		return 2;
	}
	if (probe) {
		void *d = dlsym(RTLD_DEFAULT, "ncclAllReduce"), *n = dlsym(RTLD_NEXT, "ncclAllReduce");
		if (d || n)
			fprintf(stderr, "nccl_door: NCCL not loaded, yet RTLD_DEFAULT found %p, RTLD_NEXT %p\n", d, n);
		int weak = 0, ar = -1, gs = -1, e = 0;
#ifdef NCCL_DLSYM
		if (ncclAllReduce && ncclGroupStart) {
			weak = 1;
			errno = 4242;
			ar = ncclAllReduce(NULL, NULL, 1, ncclFloat32, ncclSum, NULL, NULL);
			gs = ncclGroupStart();
			e = errno;
		}
#endif
		FILE *f = fopen(truth, "w");
		if (!f)
			return 1;
		fprintf(f, "{\"probe\":1,\"weak\":%d,\"all_reduce\":%d,\"group_start\":%d,\"errno\":%d}\n", weak, ar,
			gs, e);
		fclose(f);
		return d || n;
	}
	nccl_load();
	if (all)
		return all_main(&o, truth);
	struct shared *sh = mmap(NULL, sizeof(*sh), PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
	if (sh == MAP_FAILED)
		return 1;
	memset(sh, 0, sizeof(*sh));
	char part[NRANKS][4096];
	pid_t pid[NRANKS];
	for (int r = 0; r < NRANKS; r++) {
		snprintf(part[r], sizeof(part[r]), "%s.rank%d", truth, r);
		fflush(NULL);
		pid[r] = fork();
		if (pid[r] < 0)
			return 1;
		if (pid[r] == 0)
			exit(rank_main(r, sh, &o, part[r]));
	}
	int bad = 0;
	for (int r = 0; r < NRANKS; r++) {
		int st = 0;
		if (waitpid(pid[r], &st, 0) != pid[r] || !WIFEXITED(st) || WEXITSTATUS(st) != 0) {
			fprintf(stderr, "nccl_door: rank %d failed (status 0x%x)\n", r, st);
			bad = 1;
		}
	}
	if (bad) {
		if (sh->ready != 1) /* rank 0 never made the id: rank 1 waits for nothing */
			fprintf(stderr, "nccl_door: no unique id\n");
		return 1;
	}
	FILE *f = fopen(truth, "w");
	if (!f)
		return 1;
	fprintf(f, "{\"nranks\":%d,\"k\":%d,\"count\":%zu,\"p2p\":%zu,\"split\":%d,\"uid\":\"", NRANKS, o.k, o.count,
		o.p2p, o.split);
	for (size_t i = 0; i < sizeof(sh->uid.internal); i++)
		fprintf(f, "%02x", (unsigned char)sh->uid.internal[i]);
	fprintf(f, "\",\"ranks\":[");
	for (int r = 0; r < NRANKS; r++) {
		FILE *p = fopen(part[r], "r");
		char line[1024] = "";
		if (!p || !fgets(line, sizeof(line), p))
			return 1;
		fclose(p);
		unlink(part[r]);
		fprintf(f, "%s%s", r ? "," : "", line);
	}
	fprintf(f, "]}\n");
	fclose(f);
	return 0;
}
