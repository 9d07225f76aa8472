/*
 * hook_nccl.c - the NCCL wrappers of libstepprof.so (docs/cuda-capture.md, "NCCL").
 *
 * Divided into:
 *   1. the real functions: NCCL is never linked; each wrapper's real function
 *      is looked up once (RTLD_NEXT, or what the dlsym door found for the
 *      program's own handle) and cached; the functions asked after a split
 *      (ncclCommCount, ncclCommUserRank) come from the object that defines
 *      the real function;
 *   2. communicator identities: FNV-1a of the ncclUniqueId (of the parent's
 *      identity and the color for a split), and a fixed lock-free table from
 *      handle to identity for the splits;
 *   3. the generated wrappers, one per line of api_nccl.def, by what they are:
 *      COLL and P2P (a COMM record each), GROUP_START and GROUP_END (a
 *      thread-local depth; the outermost end writes one COMM record for the
 *      group), INIT, INIT_ALL and SPLIT (COMM_INIT records), FINI (COMM);
 *   4. the wrapper table and the name lookup of the dlsym door.
 *
 * The CUDA launches NCCL makes inside a call are recorded by the CUDA hooks as
 * ever (no sp_hook_depth here): the analyzer gives them to the call by time.
 * NCCL calls made inside an NCCL call (a library's own ncclGroupStart/End
 * around its work) pass through unrecorded (t_depth).
 * STEPPROF_NCCL=0: every wrapper passes straight through.
 * Hot path (collectives, send/recv, groups): no lock, no malloc, no stdio, no
 * syscall but the clock; errno untouched.
 */
#include <dlfcn.h>
#include <errno.h>
#include <stdint.h>
#include <string.h>
#include <unistd.h>

#include "config.h"
#include "cuda_drv.h"
#include "cuda_gpu.h"
#include "nccl_hooks.h"
#include "recorder.h"

#include <nccl.h>

#define SP_EXPORT __attribute__((visibility("default")))

#define U64(x) ((uint64_t)(uintptr_t)(x))

/* ------------------------------------------------ 1. the real functions */

static void *nccl_real[SP_NCCL__COUNT];

static const char *const nccl_names[SP_NCCL__COUNT] = {
#define SP_API_NCCL(name, ...) [SP_NIDX_##name] = #name,
#include "stepprof/api_nccl.def"
#undef SP_API_NCCL
};

static __attribute__((noinline)) void *resolve_real(int i)
{
	sp_dlsym_fn rd = sp_real_dlsym();
	int e = errno;
	void *p = rd ? rd(RTLD_NEXT, nccl_names[i]) : NULL;
	errno = e;
	if (p && p != sp_nccl_wrapper[i])
		__atomic_store_n(&nccl_real[i], p, __ATOMIC_RELEASE);
	else
		p = NULL;
	return p;
}

static inline void *real_of(int i)
{
	void *p = __atomic_load_n(&nccl_real[i], __ATOMIC_ACQUIRE);
	return __builtin_expect(p != NULL, 1) ? p : resolve_real(i);
}

void *sp_nccl_adopt(int i, void *real)
{
	if (i < 0 || i >= SP_NCCL__COUNT || !real || real == sp_nccl_wrapper[i])
		return real;
	__atomic_store_n(&nccl_real[i], real, __ATOMIC_RELEASE);
	return sp_nccl_wrapper[i];
}

/*
 * A function NCCL exports that stepprof asks itself (after a split): from the
 * object that defines near (a real NCCL function), which a program that opened
 * NCCL RTLD_LOCAL reaches by no other way, else after us. Once per name.
 */
static void *nccl_lookup_near(void **slot, const char *name, const void *near)
{
	void *p = __atomic_load_n(slot, __ATOMIC_ACQUIRE);
	if (p)
		return p;
	sp_dlsym_fn rd = sp_real_dlsym();
	if (!rd)
		return NULL;
	Dl_info di;
	if (near && dladdr(near, &di) && di.dli_fname) {
		void *h = dlopen(di.dli_fname, RTLD_NOLOAD | RTLD_LAZY);
		if (h) {
			p = rd(h, name);
			dlclose(h);
		}
	}
	if (!p)
		p = rd(RTLD_NEXT, name);
	if (p)
		__atomic_store_n(slot, p, __ATOMIC_RELEASE);
	return p;
}

static void *h_count, *h_user_rank;

/* ------------------------------------------------- 2. identities */

#define FNV_OFFSET 0xcbf29ce484222325ull
#define FNV_PRIME  0x100000001b3ull

static uint64_t fnv1a(uint64_t h, const void *p, size_t n)
{
	const unsigned char *b = p;
	for (size_t i = 0; i < n; i++) {
		h ^= b[i];
		h *= FNV_PRIME;
	}
	return h;
}

/* (a, b) as 8 then 4 little-endian bytes: a split's (parent identity, color), InitAll's (pid, counter) */
static uint64_t fnv_pair(uint64_t a, uint32_t b)
{
	unsigned char x[12];
	for (int i = 0; i < 8; i++)
		x[i] = (unsigned char)(a >> (8 * i));
	for (int i = 0; i < 4; i++)
		x[8 + i] = (unsigned char)(b >> (8 * i));
	return fnv1a(FNV_OFFSET, x, sizeof(x));
}

/*
 * Handle -> identity, for the parent of a split. Open addressing, the key
 * claimed by CAS, never removed: a handle NCCL hands out again after a destroy
 * finds its slot and takes the new identity. Full: the split's parent is
 * unknown (identity 0 hashed with the color).
 */
#define ID_SLOTS 1024u

static struct {
	uintptr_t key;
	uint64_t id;
} ids[ID_SLOTS];

static unsigned id_home(uintptr_t k)
{
	return (unsigned)((k * 0x9E3779B97F4A7C15ull) >> 54) & (ID_SLOTS - 1);
}

static void id_put(const void *comm, uint64_t id)
{
	uintptr_t k = (uintptr_t)comm;
	if (!k)
		return;
	for (unsigned n = 0, h = id_home(k); n < ID_SLOTS; n++, h = (h + 1) & (ID_SLOTS - 1)) {
		uintptr_t cur = __atomic_load_n(&ids[h].key, __ATOMIC_ACQUIRE);
		if (!cur && __atomic_compare_exchange_n(&ids[h].key, &cur, k, 0, __ATOMIC_ACQ_REL, __ATOMIC_ACQUIRE))
			cur = k;
		if (cur == k) {
			__atomic_store_n(&ids[h].id, id, __ATOMIC_RELEASE);
			return;
		}
	}
}

static uint64_t id_get(const void *comm)
{
	uintptr_t k = (uintptr_t)comm;
	if (!k)
		return 0;
	for (unsigned n = 0, h = id_home(k); n < ID_SLOTS; n++, h = (h + 1) & (ID_SLOTS - 1)) {
		uintptr_t cur = __atomic_load_n(&ids[h].key, __ATOMIC_ACQUIRE);
		if (!cur)
			return 0;
		if (cur == k)
			return __atomic_load_n(&ids[h].id, __ATOMIC_ACQUIRE);
	}
	return 0;
}

/* ------------------------------------------------------ 3. the wrappers */

/*
 * NCCL calls made inside one of ours (the library's own): passed through. Also
 * read by the GPU timing (cuda_gpu.h): the kernels launched inside are timed.
 */
__thread int sp_nccl_depth __attribute__((tls_model("initial-exec")));
#define t_depth sp_nccl_depth
/* ncclGroupStart/End depth of the program's calls, and the open group's sums */
static __thread int t_group __attribute__((tls_model("initial-exec")));
static __thread uint32_t t_gops __attribute__((tls_model("initial-exec")));
static __thread uint64_t t_gbytes __attribute__((tls_model("initial-exec")));
static __thread uint64_t t_gstream __attribute__((tls_model("initial-exec")));

/* The wrappers keep their books (groups, identities): STEPPROF_NCCL and not nested. */
static inline int nccl_tracks(void)
{
	return sp_cfg.NCCL && !t_depth && !sp_hook_depth;
}

/* ... and record: inside the capture range too */
static inline int nccl_records(void)
{
	return sp_cap.on && nccl_tracks();
}

/* ncclDataType_t -> bytes; 0: a type this table does not know */
static const uint8_t dt_bytes[] = {
    [ncclInt8] = 1,    [ncclUint8] = 1,	   [ncclInt32] = 4,	 [ncclUint32] = 4,
    [ncclInt64] = 8,   [ncclUint64] = 8,   [ncclFloat16] = 2,	 [ncclFloat32] = 4,
    [ncclFloat64] = 8, [ncclBfloat16] = 2, [ncclFloat8e4m3] = 1, [ncclFloat8e5m2] = 1,
};

static inline uint64_t dt_size(int dt)
{
	return dt >= 0 && (size_t)dt < sizeof(dt_bytes) ? dt_bytes[dt] : 0;
}

static inline void comm_emit(unsigned api, uint64_t t0, ncclResult_t r, uint64_t bytes, int peer, uint64_t comm,
			     uint64_t stream, unsigned flags)
{
	uint64_t t1 = sp_now();
	uint64_t f[SP_F__COUNT];
	f[SP_F_STREAM] = stream;
	f[SP_F_BYTES] = bytes;
	f[SP_F_RESULT] = (uint64_t)(int64_t)r;
	f[SP_F_FLAGS] = flags;
	f[SP_F_COMM] = comm;
	f[SP_F_PEER] = (uint64_t)(int64_t)peer;
	sp_emit(SP_K_COMM, api, t0, t1, f);
}

/* After a collective or a send/recv: its record; inside a group, its share of the group's. */
static void op_post(unsigned api, uint64_t t0, ncclResult_t r, uint64_t count, int dt, int peer, uint64_t comm,
		    uint64_t stream)
{
	uint64_t bytes = count * dt_size(dt);
	unsigned flags = 0;
	if (t_group > 0) {
		flags = SP_COMM_F_GROUPED;
		if (!t_gops++)
			t_gstream = stream;
		t_gbytes += bytes;
	}
	comm_emit(api, t0, r, bytes, peer, comm, stream, flags);
}

/*
 * The current CUDA device (the CUDA hooks' per-thread cache, else cuCtxGetDevice
 * through cuda_drv.h), 255 when none is known (no context yet). errno kept.
 */
static unsigned cur_device(void)
{
	if (sp_gpu_tdev < 0)
		sp_gpu_device_slow();
	return sp_gpu_tdev >= 0 ? (unsigned)sp_gpu_tdev : 255u;
}

static void init_emit(unsigned api, uint64_t t0, ncclResult_t r, const void *comm, uint64_t id, int rank, int nranks,
		      unsigned dev)
{
	uint64_t f[SP_F__COUNT];
	f[SP_F_VALUE] = id;
	f[SP_F_RESULT] = (uint64_t)(int64_t)r;
	f[SP_F_DEVICE] = dev;
	f[SP_F_COMM] = U64(comm);
	f[SP_F_RANK] = (uint64_t)(int64_t)rank;
	f[SP_F_NRANKS] = nranks > 0 ? (uint64_t)nranks : 0;
	sp_emit(SP_K_COMM_INIT, api, t0, sp_now(), f);
}

/* A handle NCCL made: on success, or in progress (a non-blocking communicator). */
static inline const void *made(ncclResult_t r, ncclComm_t *out)
{
	return (r == ncclSuccess || r == ncclInProgress) && out ? (const void *)*out : NULL;
}

/* After ncclCommInitRank[Config]: the identity from the unique id. */
static void init_post(unsigned api, int rec, uint64_t t0, unsigned dev, ncclResult_t r, ncclComm_t *newcomm, int nranks,
		      const ncclUniqueId *uid, int rank)
{
	int e = errno;
	const void *c = made(r, newcomm);
	uint64_t id = fnv1a(FNV_OFFSET, uid, sizeof(*uid));
	id_put(c, id);
	if (rec)
		init_emit(api, t0, r, c, id, rank, nranks, dev);
	errno = e;
}

/* After ncclCommInitAll: one record per communicator made, the identity this process's own. */
static void init_all_post(unsigned api, int rec, uint64_t t0, ncclResult_t r, ncclComm_t *comms, int ndev,
			  const int *devlist)
{
	static uint32_t calls;
	int e = errno;
	uint64_t id = fnv_pair((uint64_t)getpid(), __atomic_add_fetch(&calls, 1, __ATOMIC_RELAXED));
	for (int i = 0; comms && i < ndev; i++) {
		const void *c = r == ncclSuccess || r == ncclInProgress ? (const void *)comms[i] : NULL;
		id_put(c, id);
		if (rec)
			init_emit(api, t0, r, c, id, i, ndev,
				  devlist ? (unsigned)devlist[i] & 255u : (unsigned)i & 255u);
	}
	if (rec && (!comms || ndev <= 0))
		init_emit(api, t0, r, NULL, id, -1, ndev, 255u);
	errno = e;
}

/* After ncclCommSplit: the child's rank and size from NCCL itself. */
static void split_post(unsigned api, int rec, uint64_t t0, unsigned dev, ncclResult_t r, const void *real,
		       ncclComm_t parent, int color, ncclComm_t *newcomm)
{
	int e = errno;
	const void *c = made(r, newcomm);
	uint64_t id = fnv_pair(id_get(parent), (uint32_t)color);
	int rank = -1, n = 0;
	if (c) {
		ncclResult_t (*count)(const ncclComm_t, int *) =
		    (ncclResult_t(*)(const ncclComm_t, int *))nccl_lookup_near(&h_count, "ncclCommCount", real);
		ncclResult_t (*urank)(const ncclComm_t, int *) =
		    (ncclResult_t(*)(const ncclComm_t, int *))nccl_lookup_near(&h_user_rank, "ncclCommUserRank", real);
		t_depth++;
		if (!count || count((ncclComm_t)c, &n) != ncclSuccess)
			n = 0;
		if (!urank || urank((ncclComm_t)c, &rank) != ncclSuccess)
			rank = -1;
		t_depth--;
		id_put(c, id);
	}
	if (rec)
		init_emit(api, t0, r, c, c ? id : 0, rank, n, dev);
	errno = e;
}

#define SP_NOFN ncclInternalError

/* The real function (resolved the first time) into real, or return SP_NOFN. */
#define SP_NREAL(name)                                                                                                 \
	__typeof__(&name) real = (__typeof__(&name))real_of(SP_NIDX_##name);                                           \
	do {                                                                                                           \
		if (__builtin_expect(!real, 0))                                                                        \
			return SP_NOFN;                                                                                \
	} while (0)

/* COLL, P2P: (count, datatype, peer, comm, stream) */
#define SP_NOP_ARGS(count, dt, peer, comm, stream) (uint64_t)(count), (int)(dt), (peer), U64(comm), U64(stream)

#define SP_NWRAP_OP(name, params, args, spec)                                                                          \
	SP_EXPORT ncclResult_t name params                                                                             \
	{                                                                                                              \
		SP_NREAL(name);                                                                                        \
		if (!nccl_records())                                                                                   \
			return real args;                                                                              \
		uint64_t t0_ = sp_now();                                                                               \
		t_depth++;                                                                                             \
		ncclResult_t r_ = real args;                                                                           \
		t_depth--;                                                                                             \
		op_post(SP_API_##name, t0_, r_, SP_NOP_ARGS spec);                                                     \
		return r_;                                                                                             \
	}
#define SP_NWRAP_COLL(name, params, args, spec) SP_NWRAP_OP(name, params, args, spec)
#define SP_NWRAP_P2P(name, params, args, spec)	SP_NWRAP_OP(name, params, args, spec)

/* The group opens at the outermost start: its sums begin. */
#define SP_NWRAP_GROUP_START(name, params, args, spec)                                                                 \
	SP_EXPORT ncclResult_t name params                                                                             \
	{                                                                                                              \
		SP_NREAL(name);                                                                                        \
		if (!nccl_tracks())                                                                                    \
			return real args;                                                                              \
		t_depth++;                                                                                             \
		ncclResult_t r_ = real args;                                                                           \
		t_depth--;                                                                                             \
		if (r_ == ncclSuccess && t_group++ == 0) {                                                             \
			t_gops = 0;                                                                                    \
			t_gbytes = 0;                                                                                  \
			t_gstream = 0;                                                                                 \
		}                                                                                                      \
		return r_;                                                                                             \
	}

/* The outermost end launches the group's work: one record for the group. */
#define SP_NWRAP_GROUP_END(name, params, args, spec)                                                                   \
	SP_EXPORT ncclResult_t name params                                                                             \
	{                                                                                                              \
		SP_NREAL(name);                                                                                        \
		if (!nccl_tracks())                                                                                    \
			return real args;                                                                              \
		int outer_ = t_group == 1, rec_ = outer_ && sp_cap.on;                                                 \
		uint64_t t0_ = rec_ ? sp_now() : 0;                                                                    \
		t_depth++;                                                                                             \
		ncclResult_t r_ = real args;                                                                           \
		t_depth--;                                                                                             \
		if (t_group > 0)                                                                                       \
			t_group--;                                                                                     \
		if (rec_)                                                                                              \
			comm_emit(SP_API_##name, t0_, r_, t_gbytes, -1, 0, t_gstream, 0);                              \
		return r_;                                                                                             \
	}

/*
 * A communicator made (INIT, SPLIT): the device current before the call, or
 * the one NCCL made current when there was no context before it; post(...)
 * writes its record.
 */
#define SP_NWRAP_MADE(name, params, args, post)                                                                        \
	SP_EXPORT ncclResult_t name params                                                                             \
	{                                                                                                              \
		SP_NREAL(name);                                                                                        \
		if (!nccl_tracks())                                                                                    \
			return real args;                                                                              \
		int rec_ = sp_cap.on;                                                                                  \
		unsigned dev_ = rec_ ? cur_device() : 255u;                                                            \
		uint64_t t0_ = rec_ ? sp_now() : 0;                                                                    \
		t_depth++;                                                                                             \
		ncclResult_t r_ = real args;                                                                           \
		t_depth--;                                                                                             \
		if (rec_ && dev_ == 255u) /* no context before the call: the one NCCL made current */                  \
			dev_ = cur_device();                                                                           \
		post;                                                                                                  \
		return r_;                                                                                             \
	}

/* INIT: (newcomm, nranks, commId, rank) */
#define SP_NINIT_ARGS(newcomm, nranks, id, rank) (newcomm), (nranks), &(id), (rank)
#define SP_NWRAP_INIT(name, params, args, spec)                                                                        \
	SP_NWRAP_MADE(name, params, args, init_post(SP_API_##name, rec_, t0_, dev_, r_, SP_NINIT_ARGS spec))

/* INIT_ALL: (comms, ndev, devlist) */
#define SP_NWRAP_INIT_ALL(name, params, args, spec)                                                                    \
	SP_EXPORT ncclResult_t name params                                                                             \
	{                                                                                                              \
		SP_NREAL(name);                                                                                        \
		if (!nccl_tracks())                                                                                    \
			return real args;                                                                              \
		int rec_ = sp_cap.on;                                                                                  \
		uint64_t t0_ = rec_ ? sp_now() : 0;                                                                    \
		t_depth++;                                                                                             \
		ncclResult_t r_ = real args;                                                                           \
		t_depth--;                                                                                             \
		init_all_post(SP_API_##name, rec_, t0_, r_, SP_NALL_ARGS spec);                                        \
		return r_;                                                                                             \
	}
#define SP_NALL_ARGS(comms, ndev, devlist) (comms), (ndev), (devlist)

/* SPLIT: (comm, color, key, newcomm) */
#define SP_NSPLIT_ARGS(comm, color, key, newcomm) (comm), (color), (newcomm)
#define SP_NWRAP_SPLIT(name, params, args, spec)                                                                       \
	SP_NWRAP_MADE(name, params, args,                                                                              \
		      split_post(SP_API_##name, rec_, t0_, dev_, r_, (const void *)real, SP_NSPLIT_ARGS spec))

/* FINI: (comm) */
#define SP_NFINI_ARG(comm) U64(comm)
#define SP_NWRAP_FINI(name, params, args, spec)                                                                        \
	SP_EXPORT ncclResult_t name params                                                                             \
	{                                                                                                              \
		SP_NREAL(name);                                                                                        \
		if (!nccl_records())                                                                                   \
			return real args;                                                                              \
		uint64_t t0_ = sp_now();                                                                               \
		t_depth++;                                                                                             \
		ncclResult_t r_ = real args;                                                                           \
		t_depth--;                                                                                             \
		comm_emit(SP_API_##name, t0_, r_, 0, -1, SP_NFINI_ARG spec, 0, t_group > 0 ? SP_COMM_F_GROUPED : 0);   \
		return r_;                                                                                             \
	}

#define SP_API_NCCL(name, id, what, params, args, spec) SP_NWRAP_##what(name, params, args, spec)
#include "stepprof/api_nccl.def"
#undef SP_API_NCCL

/* ------------------------------------------------------ 4. the tables */

void *const sp_nccl_wrapper[SP_NCCL__COUNT] = {
#define SP_API_NCCL(name, ...) [SP_NIDX_##name] = (void *)name,
#include "stepprof/api_nccl.def"
#undef SP_API_NCCL
};

/* Linear scan over 17 names, once per symbol looked up (the dlsym door). */
int sp_nccl_find_name(const char *name)
{
	if (!name || name[0] != 'n' || name[1] != 'c' || name[2] != 'c' || name[3] != 'l')
		return -1;
	for (int i = 0; i < SP_NCCL__COUNT; i++)
		if (strcmp(nccl_names[i], name) == 0)
			return i;
	return -1;
}
