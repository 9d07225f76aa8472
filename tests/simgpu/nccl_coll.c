/*
 * nccl_coll.c - the simulated NCCL's operations: collectives, send/recv and
 * groups. A call (or a group, at its outermost ncclGroupEnd) becomes one kernel
 * per stream, launched with cuLaunchKernel and registered under an NCCL-style
 * name (ncclDevKernel_AllReduce_Sum_f32_RING_LL ...). On the stream's worker the
 * kernel marks this rank's arrival at each of its operations in the shared
 * segment, waits for the other ranks, moves the data where it fits the staging
 * area, then sleeps bytes / SIMNCCL_GBPS.
 *
 * Matching: a collective by (communicator, its sequence number on that
 * communicator); a send or recv by (communicator, peer, sequence number per
 * direction). Numbers are taken at the call, in the program's order, as NCCL
 * requires every rank to issue its operations in the same order.
 */
#include "nccl_sim.h"

#include <errno.h>
#include <limits.h>
#include <linux/futex.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

enum sn_kind { OP_ALLREDUCE, OP_REDUCE, OP_REDUCESCATTER, OP_ALLGATHER, OP_BROADCAST, OP_SEND, OP_RECV };

struct sn_op {
	enum sn_kind kind;
	ncclComm_t comm;
	const void *send;
	void *recv;
	size_t count; /* per rank: allreduce/reduce/broadcast count, allgather sendcount, reducescatter recvcount */
	ncclDataType_t dt;
	ncclRedOp_t op;
	int peer; /* root or peer; -1 */
	uint64_t seq;
	CUstream stream;
	int stage, done;
	uint64_t ready; /* when every rank it needs had begun its kernel (timeline) */
};

struct sn_batch {
	int n;
	uint64_t begin; /* the kernel's begin on its stream's timeline */
	struct sn_op ops[];
};

static size_t dt_size(ncclDataType_t t)
{
	switch (t) {
	case ncclInt8:
	case ncclUint8:
	case ncclFloat8e4m3:
	case ncclFloat8e5m2:
		return 1;
	case ncclFloat16:
	case ncclBfloat16:
		return 2;
	case ncclInt32:
	case ncclUint32:
	case ncclFloat32:
		return 4;
	default:
		return 8;
	}
}

/* ---- the kernels: one host function per name ---- */

static void run_batch(void **args, const char *name);

#define SN_TYPES(X, c, o)                                                                                              \
	X(c, o, i8)                                                                                                    \
	X(c, o, u8) X(c, o, i32) X(c, o, u32) X(c, o, i64) X(c, o, u64) X(c, o, f16) X(c, o, f32) X(c, o, f64)         \
	    X(c, o, bf16) X(c, o, f8e4m3) X(c, o, f8e5m2)
#define SN_OPS(X, c)	SN_TYPES(X, c, Sum) SN_TYPES(X, c, Prod) SN_TYPES(X, c, MinMax) SN_TYPES(X, c, SumPostDiv)
#define SN_RED_COLLS(X) SN_OPS(X, AllReduce) SN_OPS(X, Reduce) SN_OPS(X, ReduceScatter)
#define SN_NTYPES	12
#define SN_NOPS		4

/* each passes its own name, so no two are identical functions (an address names a kernel) */
#define KFN(c, o, t)                                                                                                   \
	static void k_##c##_##o##_##t(void **a)                                                                        \
	{                                                                                                              \
		run_batch(a, #c #o #t);                                                                                \
	}
SN_RED_COLLS(KFN)
static void k_AllGather(void **a)
{
	run_batch(a, "AllGather");
}
static void k_Broadcast(void **a)
{
	run_batch(a, "Broadcast");
}
static void k_SendRecv(void **a)
{
	run_batch(a, "SendRecv");
}

static const struct kent {
	void (*fn)(void **);
	const char *name;
} ktab[] = {
#define KENT(c, o, t) {k_##c##_##o##_##t, "ncclDevKernel_" #c "_" #o "_" #t "_RING_LL"},
    SN_RED_COLLS(KENT)
#undef KENT
	{k_AllGather, "ncclDevKernel_AllGather_RING_LL"},
    {k_Broadcast, "ncclDevKernel_Broadcast_RING_LL"},
    {k_SendRecv, "ncclDevKernel_SendRecv"},
};
#define K_ALLGATHER (3 * SN_NOPS * SN_NTYPES)
#define K_BROADCAST (K_ALLGATHER + 1)
#define K_SENDRECV  (K_ALLGATHER + 2)
_Static_assert(sizeof(ktab) / sizeof(ktab[0]) == K_SENDRECV + 1, "kernel table");

ncclResult_t sn_register_kernels(void)
{
	size_t sz = sizeof(struct sn_batch *);
	for (size_t i = 0; i < sizeof(ktab) / sizeof(ktab[0]); i++)
		if (sn_drv.register_kernel((const void *)ktab[i].fn, ktab[i].name, 1, &sz)) {
			sn_set_error("cannot register %s", ktab[i].name);
			return ncclUnhandledCudaError;
		}
	return ncclSuccess;
}

static int op_index(ncclRedOp_t op)
{
	switch (op) {
	case ncclSum:
		return 0;
	case ncclProd:
		return 1;
	case ncclMax:
	case ncclMin:
		return 2;
	default:
		return 3; /* ncclAvg */
	}
}

static int kernel_of(const struct sn_op *o)
{
	switch (o->kind) {
	case OP_ALLREDUCE:
	case OP_REDUCE:
	case OP_REDUCESCATTER:
		return ((int)o->kind * SN_NOPS + op_index(o->op)) * SN_NTYPES + (int)o->dt;
	case OP_ALLGATHER:
		return K_ALLGATHER;
	case OP_BROADCAST:
		return K_BROADCAST;
	default:
		return K_SENDRECV;
	}
}

/* ---- reductions (integer and 32/64-bit float types; others keep the rank's own data) ---- */

#define RED_LOOP(T)                                                                                                    \
	do {                                                                                                           \
		T *d = dst;                                                                                            \
		const T *s = src;                                                                                      \
		for (size_t i = 0; i < n; i++)                                                                         \
			switch (op) {                                                                                  \
			case ncclProd:                                                                                 \
				d[i] = (T)(d[i] * s[i]);                                                               \
				break;                                                                                 \
			case ncclMax:                                                                                  \
				d[i] = s[i] > d[i] ? s[i] : d[i];                                                      \
				break;                                                                                 \
			case ncclMin:                                                                                  \
				d[i] = s[i] < d[i] ? s[i] : d[i];                                                      \
				break;                                                                                 \
			default:                                                                                       \
				d[i] = (T)(d[i] + s[i]);                                                               \
			}                                                                                              \
	} while (0)

static int reducible(ncclDataType_t t)
{
	return t != ncclFloat16 && t != ncclBfloat16 && t != ncclFloat8e4m3 && t != ncclFloat8e5m2;
}

static void combine(void *dst, const void *src, size_t n, ncclDataType_t t, ncclRedOp_t op)
{
	switch (t) {
	case ncclInt8:
		RED_LOOP(int8_t);
		break;
	case ncclUint8:
		RED_LOOP(uint8_t);
		break;
	case ncclInt32:
		RED_LOOP(int32_t);
		break;
	case ncclUint32:
		RED_LOOP(uint32_t);
		break;
	case ncclInt64:
		RED_LOOP(int64_t);
		break;
	case ncclUint64:
		RED_LOOP(uint64_t);
		break;
	case ncclFloat32:
		RED_LOOP(float);
		break;
	case ncclFloat64:
		RED_LOOP(double);
		break;
	default:
		break;
	}
}

#define AVG_LOOP(T)                                                                                                    \
	do {                                                                                                           \
		T *d = dst;                                                                                            \
		for (size_t i = 0; i < n; i++)                                                                         \
			d[i] = (T)(d[i] / (T)k);                                                                       \
	} while (0)

static void divide(void *dst, size_t n, ncclDataType_t t, int k)
{
	switch (t) {
	case ncclInt8:
		AVG_LOOP(int8_t);
		break;
	case ncclUint8:
		AVG_LOOP(uint8_t);
		break;
	case ncclInt32:
		AVG_LOOP(int32_t);
		break;
	case ncclUint32:
		AVG_LOOP(uint32_t);
		break;
	case ncclInt64:
		AVG_LOOP(int64_t);
		break;
	case ncclUint64:
		AVG_LOOP(uint64_t);
		break;
	case ncclFloat32:
		AVG_LOOP(float);
		break;
	case ncclFloat64:
		AVG_LOOP(double);
		break;
	default:
		break;
	}
}

/* dst = op over the ranks' staged pieces at offset off (bytes) of their slots */
static void reduce_slots(struct ncclComm *c, void *dst, size_t off, size_t n, ncclDataType_t t, ncclRedOp_t op)
{
	size_t len = n * dt_size(t);
	memcpy(dst, sn_slot(c, 0) + off, len);
	for (int q = 1; q < c->nranks; q++)
		combine(dst, sn_slot(c, q) + off, n, t, op);
	if (op == ncclAvg)
		divide(dst, n, t, c->nranks);
}

/* ---- progress: one step of an operation, when the other ranks allow it ---- */

static int all_at_least(struct ncclComm *c, _Atomic uint64_t *a, uint64_t v)
{
	for (int q = 0; q < c->nranks; q++)
		if (atomic_load(&a[q]) < v)
			return 0;
	return 1;
}

/* what this rank stages for a collective (bytes), from where */
static size_t staged_len(const struct sn_op *o, const void **from)
{
	size_t len = o->count * dt_size(o->dt);
	*from = o->send;
	switch (o->kind) {
	case OP_REDUCESCATTER:
		return len * (size_t)o->comm->nranks;
	case OP_BROADCAST:
		return o->comm->rank == o->peer ? len : 0;
	default:
		return len;
	}
}

static void coll_result(struct sn_op *o)
{
	struct ncclComm *c = o->comm;
	struct sn_shm *sh = c->sh;
	size_t len = o->count * dt_size(o->dt);
	const void *from;
	size_t mine = staged_len(o, &from);
	int all = 1;
	for (int q = 0; q < c->nranks; q++) {
		size_t want = o->kind == OP_BROADCAST ? (q == o->peer ? len : 0) : mine;
		if (want && sh->coll_bytes[q] != want)
			all = 0;
	}
	switch (o->kind) {
	case OP_ALLREDUCE:
	case OP_REDUCE:
		if (o->kind == OP_REDUCE && c->rank != o->peer)
			break;
		if (all && reducible(o->dt))
			reduce_slots(c, o->recv, 0, o->count, o->dt, o->op);
		else if (o->recv != o->send)
			memmove(o->recv, o->send, len);
		break;
	case OP_REDUCESCATTER:
		if (all && reducible(o->dt))
			reduce_slots(c, o->recv, (size_t)c->rank * len, o->count, o->dt, o->op);
		else
			memmove(o->recv, (const uint8_t *)o->send + (size_t)c->rank * len, len);
		break;
	case OP_ALLGATHER:
		for (int q = 0; q < c->nranks; q++) {
			uint8_t *d = (uint8_t *)o->recv + (size_t)q * len;
			if (all)
				memcpy(d, sn_slot(c, q), len);
			else if (q == c->rank && d != o->send)
				memmove(d, o->send, len);
		}
		break;
	case OP_BROADCAST:
		if (all)
			memcpy(o->recv, sn_slot(c, o->peer), len);
		else if (c->rank == o->peer && o->recv != o->send)
			memmove(o->recv, o->send, len);
		break;
	default:
		break;
	}
}

/* 1: it moved */
static int step(struct sn_batch *b, struct sn_op *o)
{
	struct ncclComm *c = o->comm;
	struct sn_shm *sh = c->sh;
	int r = c->rank, p = o->peer;
	size_t len = o->count * dt_size(o->dt);
	switch (o->kind) {
	case OP_SEND:
		if (o->stage == 0 && atomic_load(&sh->chan_taken[r][p]) >= o->seq - 1) {
			int fits = len <= c->chan_cap;
			if (fits && len)
				memcpy(sn_chan(c, r, p), o->send, len);
			sh->chan_bytes[r][p] = fits ? len : UINT64_MAX;
			sh->chan_sent_t[r][p] = b->begin;
			atomic_store(&sh->chan_sent[r][p], o->seq);
			sn_bump(sh);
			o->stage = 1;
			return 1;
		}
		if (o->stage == 1 && atomic_load(&sh->chan_taken[r][p]) >= o->seq) {
			o->ready = sh->chan_taken_t[r][p] > b->begin ? sh->chan_taken_t[r][p] : b->begin;
			o->done = 1;
			return 1;
		}
		return 0;
	case OP_RECV:
		if (atomic_load(&sh->chan_sent[p][r]) >= o->seq) {
			if (len && sh->chan_bytes[p][r] == len)
				memcpy(o->recv, sn_chan(c, p, r), len);
			o->ready = sh->chan_sent_t[p][r] > b->begin ? sh->chan_sent_t[p][r] : b->begin;
			sh->chan_taken_t[p][r] = b->begin;
			atomic_store(&sh->chan_taken[p][r], o->seq);
			sn_bump(sh);
			o->done = 1;
			return 1;
		}
		return 0;
	default:
		if (o->stage == 0 && all_at_least(c, sh->coll_done, o->seq - 1)) {
			const void *from;
			size_t n = staged_len(o, &from);
			int fits = n <= SN_SLOT_BYTES;
			if (fits && n)
				memcpy(sn_slot(c, r), from, n);
			sh->coll_bytes[r] = fits ? n : 0;
			sh->coll_t[r] = b->begin;
			atomic_store(&sh->coll_arrived[r], o->seq); /* this rank has arrived */
			sn_bump(sh);
			o->stage = 1;
			return 1;
		}
		if (o->stage == 1 && all_at_least(c, sh->coll_arrived, o->seq)) {
			coll_result(o);
			o->ready = 0;
			for (int q = 0; q < c->nranks; q++)
				o->ready = sh->coll_t[q] > o->ready ? sh->coll_t[q] : o->ready;
			atomic_store(&sh->coll_done[r], o->seq);
			sn_bump(sh);
			o->done = 1;
			return 1;
		}
		return 0;
	}
}

static int comm_failed(struct ncclComm *c)
{
	return atomic_load(&c->async_err) != ncclSuccess || atomic_load(&c->local_abort) ||
	       atomic_load(&c->sh->aborted);
}

/*
 * The kernel: every operation of the batch to completion, then the transfer time.
 * An operation that cannot move for SIMNCCL_TIMEOUT_MS (a rank that never came)
 * gives up: its communicator's async error becomes ncclRemoteError.
 */
static void run_batch(void **args, const char *name)
{
	(void)name;
	struct sn_batch *b = *(struct sn_batch **)args[0];
	b->begin = sn_drv.globaltimer_ns();
	uint64_t bytes = 0, deadline = sn_now() + sn_timeout_ns, ready = b->begin;
	int left = b->n;
	for (int i = 0; i < b->n; i++) {
		bytes += b->ops[i].count * dt_size(b->ops[i].dt);
		if (comm_failed(b->ops[i].comm))
			b->ops[i].done = -1, left--;
	}
	while (left > 0) {
		struct sn_shm *wsh = NULL;
		uint32_t g = 0;
		int progress = 0, shms = 0;
		for (int i = 0; i < b->n; i++) {
			struct sn_op *o = &b->ops[i];
			if (o->done)
				continue;
			if (!wsh)
				wsh = o->comm->sh, g = atomic_load(&wsh->gen);
			if (o->comm->sh != wsh)
				shms = 1;
		}
		for (int i = 0; i < b->n; i++) {
			struct sn_op *o = &b->ops[i];
			if (o->done)
				continue;
			if (comm_failed(o->comm)) {
				o->done = -1, left--;
				continue;
			}
			if (step(b, o)) {
				progress = 1;
				if (o->done)
					left--;
			}
		}
		if (left <= 0)
			break;
		if (progress) {
			deadline = sn_now() + sn_timeout_ns;
			continue;
		}
		if (sn_now() >= deadline) {
			for (int i = 0; i < b->n; i++)
				if (!b->ops[i].done) {
					int ok = ncclSuccess;
					atomic_compare_exchange_strong(&b->ops[i].comm->async_err, &ok,
								       ncclRemoteError);
					b->ops[i].done = -1;
				}
			break;
		}
		/* several segments: none of them alone wakes us for the others */
		sn_wait(wsh, g, shms ? sn_now() + 1000000 : deadline);
	}
	/*
	 * The transfer starts once every rank had begun (the latest begin on the ranks'
	 * timelines) and takes bytes / SIMNCCL_GBPS; the data moved above (the host's
	 * memcpy) is part of it, as the simulated GPU's copies sleep out only the rest.
	 */
	for (int i = 0; i < b->n; i++)
		if (b->ops[i].done > 0 && b->ops[i].ready > ready)
			ready = b->ops[i].ready;
	/*
	 * On the timeline the kernel ends at ready + ns on every rank alike, however
	 * late each worker thread woke (kernel_end_at); not before that on the host's
	 * clock either.
	 */
	uint64_t ns = (uint64_t)((double)bytes / sn_gbps); /* GB/s = bytes per ns */
	uint64_t end = ready + ns;
	if (ns) {
		struct timespec ts = {(time_t)(end / 1000000000ull), (long)(end % 1000000000ull)};
		while (clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &ts, NULL) == EINTR)
			;
	}
	if (sn_drv.kernel_end_at && b->n && b->ops[0].done > 0)
		sn_drv.kernel_end_at(end > b->begin ? end : b->begin);
	for (int i = 0; i < b->n; i++) {
		struct ncclComm *c = b->ops[i].comm;
		if (atomic_fetch_sub(&c->pending, 1) == 1)
			syscall(SYS_futex, &c->pending, FUTEX_WAKE, INT_MAX, NULL, NULL, 0);
	}
	free(b);
}

void sn_wait_pending(struct ncclComm *c)
{
	uint32_t v;
	while ((v = atomic_load(&c->pending)) != 0) {
		struct timespec ts = {0, 100000000};
		syscall(SYS_futex, &c->pending, FUTEX_WAIT, v, &ts, NULL, 0);
	}
}

/* ---- enqueueing: groups ---- */

static __thread int group_depth;
static __thread struct sn_op *gq;
static __thread int gn, gcap;

static ncclResult_t launch(struct sn_op *ops, int n)
{
	struct sn_batch *b = malloc(sizeof(*b) + (size_t)n * sizeof(*ops));
	if (!b)
		return ncclSystemError;
	b->n = n;
	memcpy(b->ops, ops, (size_t)n * sizeof(*ops));
	int k = kernel_of(&ops[0]), p2p = 1;
	for (int i = 0; i < n; i++)
		if (ops[i].kind != OP_SEND && ops[i].kind != OP_RECV) {
			p2p = 0;
			if (n > 1)
				k = kernel_of(&ops[i]);
			break;
		}
	if (n > 1 && p2p)
		k = K_SENDRECV;
	for (int i = 0; i < n; i++)
		atomic_fetch_add(&ops[i].comm->pending, 1);
	/* on the communicator's device: a group may hold comms of several devices (ncclCommInitAll) */
	CUcontext cur = NULL, want = ops[0].comm->ctx;
	sn_drv.cuCtxGetCurrent(&cur);
	int pushed = cur != want && sn_drv.cuCtxPushCurrent(want) == CUDA_SUCCESS;
	void *args[] = {&b};
	CUresult r =
	    sn_drv.cuLaunchKernel((CUfunction)(void *)ktab[k].fn, 1, 1, 1, 1, 1, 1, 0, ops[0].stream, args, NULL);
	if (pushed)
		sn_drv.cuCtxPopCurrent(&cur);
	if (r != CUDA_SUCCESS) {
		for (int i = 0; i < n; i++)
			atomic_fetch_sub(&ops[i].comm->pending, 1);
		free(b);
		sn_set_error("cuLaunchKernel: CUDA error %d", (int)r);
		return ncclUnhandledCudaError;
	}
	return ncclSuccess;
}

/* The queued operations, one kernel per stream, each in the order of the calls. */
static ncclResult_t flush_group(void)
{
	ncclResult_t res = ncclSuccess;
	struct sn_op *tmp = malloc((size_t)(gn ? gn : 1) * sizeof(*tmp));
	if (!tmp) {
		gn = 0;
		return ncclSystemError;
	}
	for (int i = 0; i < gn; i++) {
		if (gq[i].done == 2)
			continue; /* already launched with an earlier stream's batch */
		int n = 0;
		for (int j = i; j < gn; j++)
			if (gq[j].done != 2 && gq[j].stream == gq[i].stream && gq[j].comm->ctx == gq[i].comm->ctx) {
				tmp[n] = gq[j];
				tmp[n++].done = 0;
				gq[j].done = 2;
			}
		ncclResult_t r = launch(tmp, n);
		if (r != ncclSuccess)
			res = r;
	}
	free(tmp);
	gn = 0;
	return res;
}

static ncclResult_t enqueue(struct sn_op *o)
{
	ncclResult_t r = sn_init();
	if (r != ncclSuccess)
		return r;
	struct ncclComm *c = o->comm;
	if (!sn_comm_ok(c) || (int)o->dt < 0 || o->dt >= ncclNumTypes || (int)o->op < 0 || o->op >= ncclNumOps) {
		sn_set_error("invalid communicator, datatype or reduction");
		return ncclInvalidArgument;
	}
	if (o->peer != -1 && (o->peer < 0 || o->peer >= c->nranks)) {
		sn_set_error("root or peer %d outside 0..%d", o->peer, c->nranks - 1);
		return ncclInvalidArgument;
	}
	if (o->count && ((o->kind != OP_RECV && !o->send && !(o->kind == OP_BROADCAST && c->rank != o->peer)) ||
			 (o->kind != OP_SEND && !o->recv && !(o->kind == OP_REDUCE && c->rank != o->peer)))) {
		sn_set_error("NULL buffer");
		return ncclInvalidArgument;
	}
	switch (o->kind) {
	case OP_SEND:
		o->seq = ++c->send_seq[o->peer];
		break;
	case OP_RECV:
		o->seq = ++c->recv_seq[o->peer];
		break;
	default:
		o->seq = ++c->coll_seq;
	}
	if (!group_depth)
		return launch(o, 1);
	if (gn == gcap) {
		int ncap = gcap ? 2 * gcap : 16;
		struct sn_op *nq = realloc(gq, (size_t)ncap * sizeof(*nq));
		if (!nq)
			return ncclSystemError;
		gq = nq, gcap = ncap;
	}
	gq[gn++] = *o;
	return ncclSuccess;
}

ncclResult_t ncclGroupStart(void)
{
	group_depth++;
	return ncclSuccess;
}

ncclResult_t ncclGroupEnd(void)
{
	if (group_depth <= 0) {
		sn_set_error("ncclGroupEnd without ncclGroupStart");
		return ncclInvalidUsage;
	}
	if (--group_depth > 0)
		return ncclSuccess;
	return flush_group();
}

#define OP(...) (&(struct sn_op){__VA_ARGS__, .stream = (CUstream)stream})

ncclResult_t ncclAllReduce(const void *sendbuff, void *recvbuff, size_t count, ncclDataType_t datatype, ncclRedOp_t op,
			   ncclComm_t comm, cudaStream_t stream)
{
	return enqueue(OP(.kind = OP_ALLREDUCE, .comm = comm, .send = sendbuff, .recv = recvbuff, .count = count,
			  .dt = datatype, .op = op, .peer = -1));
}

ncclResult_t ncclReduce(const void *sendbuff, void *recvbuff, size_t count, ncclDataType_t datatype, ncclRedOp_t op,
			int root, ncclComm_t comm, cudaStream_t stream)
{
	return enqueue(OP(.kind = OP_REDUCE, .comm = comm, .send = sendbuff, .recv = recvbuff, .count = count,
			  .dt = datatype, .op = op, .peer = root));
}

ncclResult_t ncclBroadcast(const void *sendbuff, void *recvbuff, size_t count, ncclDataType_t datatype, int root,
			   ncclComm_t comm, cudaStream_t stream)
{
	return enqueue(OP(.kind = OP_BROADCAST, .comm = comm, .send = sendbuff, .recv = recvbuff, .count = count,
			  .dt = datatype, .peer = root));
}

ncclResult_t ncclBcast(void *buff, size_t count, ncclDataType_t datatype, int root, ncclComm_t comm,
		       cudaStream_t stream)
{
	return enqueue(OP(.kind = OP_BROADCAST, .comm = comm, .send = buff, .recv = buff, .count = count,
			  .dt = datatype, .peer = root));
}

ncclResult_t ncclAllGather(const void *sendbuff, void *recvbuff, size_t sendcount, ncclDataType_t datatype,
			   ncclComm_t comm, cudaStream_t stream)
{
	return enqueue(OP(.kind = OP_ALLGATHER, .comm = comm, .send = sendbuff, .recv = recvbuff, .count = sendcount,
			  .dt = datatype, .peer = -1));
}

ncclResult_t ncclReduceScatter(const void *sendbuff, void *recvbuff, size_t recvcount, ncclDataType_t datatype,
			       ncclRedOp_t op, ncclComm_t comm, cudaStream_t stream)
{
	return enqueue(OP(.kind = OP_REDUCESCATTER, .comm = comm, .send = sendbuff, .recv = recvbuff,
			  .count = recvcount, .dt = datatype, .op = op, .peer = -1));
}

ncclResult_t ncclSend(const void *sendbuff, size_t count, ncclDataType_t datatype, int peer, ncclComm_t comm,
		      cudaStream_t stream)
{
	return enqueue(
	    OP(.kind = OP_SEND, .comm = comm, .send = sendbuff, .count = count, .dt = datatype, .peer = peer));
}

ncclResult_t ncclRecv(void *recvbuff, size_t count, ncclDataType_t datatype, int peer, ncclComm_t comm,
		      cudaStream_t stream)
{
	return enqueue(
	    OP(.kind = OP_RECV, .comm = comm, .recv = recvbuff, .count = count, .dt = datatype, .peer = peer));
}

/* not simulated */
ncclResult_t ncclAlltoAll(const void *sendbuff, void *recvbuff, size_t count, ncclDataType_t datatype, ncclComm_t comm,
			  cudaStream_t stream)
{
	(void)sendbuff, (void)recvbuff, (void)count, (void)datatype, (void)comm, (void)stream;
	sn_set_error("not simulated");
	return ncclInvalidUsage;
}

ncclResult_t ncclGather(const void *sendbuff, void *recvbuff, size_t count, ncclDataType_t datatype, int root,
			ncclComm_t comm, cudaStream_t stream)
{
	(void)sendbuff, (void)recvbuff, (void)count, (void)datatype, (void)root, (void)comm, (void)stream;
	sn_set_error("not simulated");
	return ncclInvalidUsage;
}

ncclResult_t ncclScatter(const void *sendbuff, void *recvbuff, size_t count, ncclDataType_t datatype, int root,
			 ncclComm_t comm, cudaStream_t stream)
{
	(void)sendbuff, (void)recvbuff, (void)count, (void)datatype, (void)root, (void)comm, (void)stream;
	sn_set_error("not simulated");
	return ncclInvalidUsage;
}
