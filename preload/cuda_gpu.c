/*
 * cuda_gpu.c - the GPU side of the CUDA wrappers (see cuda_gpu.h):
 *   1. current device cache,
 *   2. timing events: per-thread pool, pending ops, anchor, GPU_SPAN emission,
 *   3. kernel names,
 *   4. host pointer kinds,
 *   5. trace header device info.
 *
 * Per-thread state is reached through an initial-exec TLS pointer and mmap'd at
 * the thread's first timed op (the slow path): no malloc, no lock afterwards.
 * RATIONALE for per-thread pools: events belong to a context and the ops are
 * issued by the thread; a per-thread pool needs no lock. A thread has one
 * state (pool, pending ops, anchor) per context it works in, up to
 * TS_PER_THREAD; an op in a context beyond those is not timed (lost timing,
 * not a wrong time).
 */
#include "cuda_gpu.h"

#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "config.h"
#include "cuda_mem.h"
#include "recorder.h"

/* ------------------------------------------------------------ 1. device */

__thread int sp_gpu_tdev __attribute__((tls_model("initial-exec"))) = -1;
static __thread CUcontext t_ctx;
/*
 * t_ctx is good while t_ctx_gen == ctx_gen: a device reset (any thread)
 * bumps ctx_gen, since the context handles every thread cached may be gone.
 */
static __thread unsigned t_ctx_gen;
static unsigned ctx_gen = 1;

void sp_gpu_ctx_changed(void)
{
	sp_gpu_tdev = -1;
	t_ctx_gen = 0;
}

static CUcontext cur_ctx(const struct sp_drv *d)
{
	unsigned g = __atomic_load_n(&ctx_gen, __ATOMIC_ACQUIRE);
	if (t_ctx_gen != g) {
		CUcontext c = NULL;
		if (!d->CtxGetCurrent || d->CtxGetCurrent(&c) != CUDA_SUCCESS)
			c = NULL;
		t_ctx = c;
		t_ctx_gen = c ? g : 0; /* no context yet: ask again next time */
	}
	return t_ctx;
}

unsigned sp_gpu_device_slow(void)
{
	if (sp_gpu_tdev >= 0)
		return (unsigned)sp_gpu_tdev;
	int e = errno; /* sp_drv's dlopen, the driver's calls */
	const struct sp_drv *d = sp_drv();
	CUdevice dev = 0;
	if (d && d->CtxGetDevice && cur_ctx(d) && d->CtxGetDevice(&dev) == CUDA_SUCCESS && dev >= 0)
		sp_gpu_tdev = dev < SP_DEV_MAX ? dev : SP_DEV_MAX - 1;
	errno = e;
	return sp_gpu_tdev >= 0 ? (unsigned)sp_gpu_tdev : 0;
}

/* ------------------------------------------------------------ 2. timing */

/*
 * A training step may launch a few thousand kernels between two syncs. A
 * thread holds PEND_MAX ops pending; when they are all pending, the finished
 * ones are read back before the next op (reclaim), else that op is not timed
 * (STEPPROF_KERNEL_TIMING=N thins launches out). 2 events per op, plus anchors.
 */
#define POOL_MAX 4160
#define POOL_BATCH 64
#define PEND_MAX 2048
/* A reclaim stops after this many unfinished ops, and is not tried again for as many ops. */
#define RECLAIM_SPAN 64
#define ANCHOR_REFRESH_NS 1000000000ull

/* pend.flags */
#define PF_PRIV 1   /* e was recorded on the context's private stream (sp_gpu_end_slow) */
#define PF_CHAIN 2  /* a chained launch: no begin event, its GPU begin is lo_ns at least */
#define PF_LINKED 4 /* the entry before it is its chain's predecessor, not read back yet */

struct pend {
	uint32_t op;
	uint16_t api;
	uint8_t dev;
	uint8_t flags;
	CUevent b, e; /* b: NULL for a chained launch */
	uint64_t lo_ns; /* PF_CHAIN: the launch's host begin, then its predecessor's GPU end if later */
};

/*
 * Launch chains.
 * RATIONALE: on NVIDIA's driver an event record costs the host ~1.25 us, and
 * a kernel launch ~3.3 us (an H200, driver 580: tests/gpu/evcost.cu); a
 * launch timed with a begin and an end event took 6.3 us instead of 3.4. A
 * launch queued right behind this thread's last timed op on the same stream,
 * with nothing else queued there since, cannot start before that op's end
 * event is reached, nor before the launch was called: its GPU begin is the
 * later of the two, and its end event alone times it. Where the stream is
 * busy (the GPU behind the host) that is exact; where it is idle, the begin
 * is the host's call time, early by the launch's own latency (a few us on a
 * GPU), as a begin event recorded before the call is. Anything else queued on
 * the stream meanwhile (another thread's op, an untimed op, a wait on an
 * event) breaks the chain: the next launch records a begin event.
 * stream_tok[] holds, per stream (hashed), the token of the last op queued
 * there through a wrapper; a launch chains only if it is still the token of
 * its thread's last timed op. A collision or an op of a door stepprof does
 * not wrap (cuLaunchHostFunc) can only break a chain or, for the latter, make
 * a span start early.
 */
#define STREAM_TOK_SLOTS 256u
static uint64_t stream_tok[STREAM_TOK_SLOTS];

static inline unsigned stream_slot(CUstream st)
{
	return (unsigned)((((uintptr_t)st >> 3) * 0x9E3779B97F4A7C15ull) >> 56) & (STREAM_TOK_SLOTS - 1);
}

static inline void stream_break(CUstream st)
{
	__atomic_store_n(&stream_tok[stream_slot(st)], 0, __ATOMIC_RELAXED);
}

struct tstate {
	int busy;      /* taken (never waited for) by whoever touches the pool or the pending ops */
	CUcontext ctx; /* the context of every event below */
	unsigned dev, resets; /* ctx's device, and its count of resets when ctx was bound */
	int gone;             /* set by another thread: ctx was destroyed */
	unsigned nfree, created;
	CUevent freev[POOL_MAX];
	unsigned npend;
	struct pend pend[PEND_MAX];
	CUevent anchor, cand; /* anchor: finished, its GPU time is anchor_ns */
	uint64_t anchor_ns, cand_ns;
	int cand_late;        /* the candidate was not reached in time: recycle it, never use it */
	unsigned reclaim_wait; /* ops to let go untimed before the next reclaim */
	uint64_t tok_base, seq; /* tokens of this state's ops: tok_base | ++seq (launch chains) */
	uint64_t last_tok;      /* the token of its last timed op, on last_s, op id last_op */
	CUstream last_s;
	uint32_t last_op;
	int orphan; /* its thread exited: the next thread of its context that needs a state adopts it */
};

/*
 * A thread's states, one per context it timed an op or synchronised in (a
 * thread that drives several devices, as a single-process multi-GPU loop
 * does), TS_PER_THREAD at most; ts is the one it used last.
 */
#define TS_PER_THREAD 8
static __thread struct tstate *ts;
static __thread struct tstate *t_states[TS_PER_THREAD];
static __thread uint32_t t_launches; /* STEPPROF_KERNEL_TIMING=N: this thread's launches */
unsigned sp_gpu_ktiming = ~0u;

/*
 * Every thread's timing state, so that one thread's sync point reads back
 * the ops other threads issued: PyTorch's backward kernels are launched by
 * autograd threads that never synchronise themselves. Append-only.
 */
#define MAX_THREADS 512
static struct tstate *registry[MAX_THREADS];
unsigned sp_gpu_nregistry;

static int try_take(struct tstate *S)
{
	int z = 0;
	return __atomic_compare_exchange_n(&S->busy, &z, 1, 0, __ATOMIC_ACQUIRE, __ATOMIC_RELAXED);
}

static void give_back(struct tstate *S)
{
	__atomic_store_n(&S->busy, 0, __ATOMIC_RELEASE);
}

/*
 * STEPPROF_KERNEL_TIMING as the configuration parsed it (config.c: a bad
 * value was warned about there, once, and is the default, all).
 * RATIONALE: this read the variable again with rules of its own, which took
 * "0", "none" and "+5" (refused by the configuration, whose warning said
 * "using the default") as off, off and 5.
 */
unsigned sp_gpu_kernel_timing(void)
{
	unsigned k = __atomic_load_n(&sp_gpu_ktiming, __ATOMIC_RELAXED);
	if (k != ~0u)
		return k;
	const char *v = sp_cfg.KERNEL_TIMING;
	k = 1;
	if (v && !strcmp(v, "off")) {
		k = 0;
	} else if (v && strcmp(v, "all")) {
		int e = errno;
		unsigned long long n = strtoull(v, NULL, 10); /* a positive number: config.c checked it */
		errno = e;
		k = n == 0 ? 1 : n >= ~0u ? ~0u - 1 : (unsigned)n;
	}
	__atomic_store_n(&sp_gpu_ktiming, k, __ATOMIC_RELAXED);
	return k;
}

/*
 * The private stream of each context: a non-blocking stream of stepprof's
 * own, created the first time it is needed in that context, on which only
 * stepprof records events (never captured, never waiting for anything). A
 * synchronous copy that CUDA documents as complete when it returns
 * (device-to-host, pinned host-to-device, host-to-host) gets its begin event
 * on its own stream (when the copy started on the GPU, after earlier work)
 * and its end event here, right after the call returned: reached at once, so
 * its time is the copy's end within the return's latency, and the program's
 * stream is left idle, as it would be without stepprof (a cudaStreamQuery
 * right after the copy says so). Its anchor is taken here too.
 * RATIONALE: an end event on the program's stream after the call returned
 * was still pending when the program queried the stream (464 of 500
 * cudaStreamQuery right after a cudaMemcpy D2H said "not ready").
 * One slot per context, claimed once (CAS on the key) and never given to
 * another context; PRIV_MAX contexts at most (past that: the program's stream,
 * as before). Lookups take no lock.
 */
#define PRIV_MAX 64
enum { PRIV_NONE, PRIV_MAKING, PRIV_READY, PRIV_FAILED };

struct priv {
	CUcontext ctx; /* the slot's context, for good once set */
	CUstream s;    /* valid when state is PRIV_READY */
	int state;
	unsigned dev; /* ctx's device (a reset of it destroys s) */
};

static struct priv privs[PRIV_MAX];

/* The private stream of context c (current on this thread), or NULL. */
static CUstream priv_stream(const struct sp_drv *d, CUcontext c)
{
	if (!c || !d->StreamCreate)
		return NULL;
	for (unsigned i = 0; i < PRIV_MAX; i++) {
		struct priv *p = &privs[i];
		CUcontext k = __atomic_load_n(&p->ctx, __ATOMIC_ACQUIRE);
		if (!k && !__atomic_compare_exchange_n(&p->ctx, &k, c, 0, __ATOMIC_ACQ_REL, __ATOMIC_ACQUIRE) && k != c)
			continue; /* another context took this free slot: look further */
		if (k && k != c)
			continue;
		int st = __atomic_load_n(&p->state, __ATOMIC_ACQUIRE);
		if (st == PRIV_READY)
			return p->s;
		if (st != PRIV_NONE ||
		    !__atomic_compare_exchange_n(&p->state, &st, PRIV_MAKING, 0, __ATOMIC_ACQ_REL, __ATOMIC_RELAXED))
			return NULL; /* being made by another thread, or the driver refused */
		CUstream s = NULL;
		if (cur_ctx(d) != c) { /* a stream is created in the current context */
			__atomic_store_n(&p->state, PRIV_NONE, __ATOMIC_RELEASE);
			return NULL;
		}
		if (d->StreamCreate(&s, CU_STREAM_NON_BLOCKING) != CUDA_SUCCESS || !s) {
			__atomic_store_n(&p->state, PRIV_FAILED, __ATOMIC_RELEASE);
			return NULL;
		}
		p->s = s;
		p->dev = sp_gpu_device();
		__atomic_store_n(&p->state, PRIV_READY, __ATOMIC_RELEASE);
		return s;
	}
	return NULL;
}

/*
 * Device resets, per device: a reset destroys every stream and event of the
 * device's primary context (cuDevicePrimaryCtxReset), and the context handle
 * itself may come back another. A thread's timing state bound to a context of
 * a device reset since is dropped at its next use (stale()), its events
 * forgotten (they died with the context), and bound again.
 */
static unsigned dev_resets[SP_DEV_MAX];

static unsigned resets_of(unsigned dev)
{
	return __atomic_load_n(&dev_resets[dev < SP_DEV_MAX ? dev : SP_DEV_MAX - 1], __ATOMIC_ACQUIRE);
}

void sp_gpu_device_reset(unsigned dev)
{
	if (dev >= SP_DEV_MAX)
		dev = SP_DEV_MAX - 1;
	for (unsigned i = 0; i < PRIV_MAX; i++) {
		struct priv *p = &privs[i];
		int st = __atomic_load_n(&p->state, __ATOMIC_ACQUIRE);
		if ((st == PRIV_READY && p->dev == dev) || st == PRIV_FAILED)
			__atomic_compare_exchange_n(&p->state, &st, PRIV_NONE, 0, __ATOMIC_ACQ_REL, __ATOMIC_RELAXED);
	}
	__atomic_add_fetch(&dev_resets[dev], 1, __ATOMIC_ACQ_REL);
	__atomic_add_fetch(&ctx_gen, 1, __ATOMIC_ACQ_REL);
}

/* The thread state's context is bound to c, on the current device. */
static void bind(struct tstate *S, CUcontext c)
{
	S->ctx = c;
	S->dev = sp_gpu_device();
	S->resets = resets_of(S->dev);
	__atomic_store_n(&S->gone, 0, __ATOMIC_RELEASE);
}

/* The context T's events belong to was destroyed or its device reset since T was bound. */
static int dead(const struct tstate *T)
{
	return T->ctx && (T->resets != resets_of(T->dev) || __atomic_load_n(&T->gone, __ATOMIC_ACQUIRE));
}

/* S is taken: if its events died with their context, forget them (their handles are gone). */
static void drop_if_stale(struct tstate *S)
{
	if (!dead(S))
		return;
	S->ctx = NULL;
	S->nfree = S->created = S->npend = 0;
	S->anchor = S->cand = NULL;
}

void sp_gpu_ctx_gone(CUcontext ctx)
{
	if (!ctx)
		return;
	for (unsigned i = 0; i < PRIV_MAX; i++) {
		struct priv *p = &privs[i];
		int st = PRIV_READY;
		if (__atomic_load_n(&p->ctx, __ATOMIC_ACQUIRE) == ctx)
			__atomic_compare_exchange_n(&p->state, &st, PRIV_NONE, 0, __ATOMIC_ACQ_REL, __ATOMIC_RELAXED);
	}
	unsigned n = __atomic_load_n(&sp_gpu_nregistry, __ATOMIC_ACQUIRE);
	for (unsigned i = 0; i < n && i < MAX_THREADS; i++) {
		struct tstate *T = __atomic_load_n(&registry[i], __ATOMIC_ACQUIRE);
		if (T && __atomic_load_n(&T->ctx, __ATOMIC_RELAXED) == ctx)
			__atomic_store_n(&T->gone, 1, __ATOMIC_RELEASE);
	}
}

void sp_gpu_forget_thread(void)
{
	/*
	 * The parent's events are left mapped and never touched again; the
	 * registry forgets every thread (the child has only this one).
	 */
	ts = NULL;
	memset(t_states, 0, sizeof(t_states));
	__atomic_store_n(&sp_gpu_nregistry, 0, __ATOMIC_RELEASE);
	memset(privs, 0, sizeof(privs)); /* the parent's streams, as its events */
	sp_gpu_ctx_changed();
}

static void read_back_at_exit(void);

/*
 * An exited thread's state, for a new thread whose current context is c:
 * one bound to c (its events are c's), to none, or to a context gone since.
 * RATIONALE: a state is never freed (another thread may be reading it back),
 * and the registry holds MAX_THREADS: without adoption, a process whose
 * threads come and go (a thread per batch, per request) filled it, after
 * which no sync point of another thread read back a new thread's ops (511 of
 * 700 one-launch threads timed), and each thread left ~82 KB and its events.
 */
static struct tstate *adopt(CUcontext c)
{
	unsigned n = __atomic_load_n(&sp_gpu_nregistry, __ATOMIC_ACQUIRE);
	if (n > MAX_THREADS)
		n = MAX_THREADS;
	for (unsigned i = 0; i < n; i++) {
		struct tstate *T = __atomic_load_n(&registry[i], __ATOMIC_ACQUIRE);
		int one = 1;
		if (!T || !__atomic_load_n(&T->orphan, __ATOMIC_ACQUIRE))
			continue;
		CUcontext tc = __atomic_load_n(&T->ctx, __ATOMIC_RELAXED);
		if ((tc == c || !tc || dead(T)) &&
		    __atomic_compare_exchange_n(&T->orphan, &one, 0, 0, __ATOMIC_ACQ_REL, __ATOMIC_RELAXED))
			return T;
	}
	return NULL;
}

void sp_gpu_thread_exit(void)
{
	for (unsigned i = 0; i < TS_PER_THREAD; i++) {
		if (t_states[i])
			__atomic_store_n(&t_states[i]->orphan, 1, __ATOMIC_RELEASE);
		t_states[i] = NULL;
	}
	ts = NULL;
}

/* A new state, zeroed and in the registry, or NULL. */
static struct tstate *tstate_new(void)
{
	static int exit_hooked;
	int e = errno;
	struct tstate *S = mmap(NULL, sizeof(struct tstate), PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	errno = e;
	if (S == MAP_FAILED)
		return NULL;
	if (!__atomic_exchange_n(&exit_hooked, 1, __ATOMIC_ACQ_REL))
		atexit(read_back_at_exit); /* inherited by a forked child, whose registry starts empty */
	errno = e;
	unsigned i = __atomic_fetch_add(&sp_gpu_nregistry, 1, __ATOMIC_ACQ_REL);
	if (i < MAX_THREADS)
		__atomic_store_n(&registry[i], S, __ATOMIC_RELEASE);
	S->tok_base = (uint64_t)(i + 1) << 40; /* a token is never 0 */
	return S;
}

/*
 * This thread's timing state for its current context c: the one bound to c,
 * else one bound to none or to a context gone since (drop_if_stale empties
 * it), else an exited thread's, else a new one. With every slot bound to a
 * live context, the last one used (c's ops then go untimed, as before).
 */
static struct tstate *tstate_get(CUcontext c)
{
	if (ts && ts->ctx == c)
		return ts;
	int free_slot = -1, unbound = -1;
	for (int i = 0; i < TS_PER_THREAD; i++) {
		struct tstate *S = t_states[i];
		if (!S) {
			if (free_slot < 0)
				free_slot = i;
		} else if (S->ctx == c) {
			return ts = S;
		} else if (unbound < 0 && (!S->ctx || dead(S))) {
			unbound = i;
		}
	}
	if (unbound >= 0)
		return ts = t_states[unbound];
	if (free_slot < 0)
		return ts;
	struct tstate *S = adopt(c);
	if (!S && !(S = tstate_new()))
		return ts;
	return ts = t_states[free_slot] = S;
}

static CUevent pool_get(struct tstate *S, const struct sp_drv *d)
{
	if (!S->nfree && S->created < POOL_MAX) {
		for (unsigned i = 0; i < POOL_BATCH && S->created < POOL_MAX; i++) {
			CUevent e;
			if (d->EventCreate(&e, CU_EVENT_DEFAULT) != CUDA_SUCCESS)
				break;
			S->freev[S->nfree++] = e;
			S->created++;
		}
	}
	return S->nfree ? S->freev[--S->nfree] : NULL;
}

static void pool_put(struct tstate *S, CUevent e)
{
	if (e && S->nfree < POOL_MAX)
		S->freev[S->nfree++] = e;
}

static CUstream map_stream(uint64_t s, int ptds)
{
	if (!s && ptds)
		return CU_STREAM_PER_THREAD;
	return (CUstream)(uintptr_t)s;
}

static int capturing(const struct sp_drv *d, CUstream st)
{
	CUstreamCaptureStatus cs = CU_STREAM_CAPTURE_STATUS_NONE;
	if (!d->StreamIsCapturing)
		return 0;
	if (d->StreamIsCapturing(st, &cs) != CUDA_SUCCESS)
		return 1; /* e.g. the legacy stream during a global capture: stay out */
	return cs != CU_STREAM_CAPTURE_STATUS_NONE;
}

static const struct sp_drv *timing_drv(void)
{
	const struct sp_drv *d = sp_drv();
	if (!d || !d->EventCreate || !d->EventRecord || !d->EventQuery || !d->EventElapsedTime || !d->CtxGetCurrent)
		return NULL;
	return d;
}

static int reclaim(struct tstate *S, const struct sp_drv *d);

void sp_gpu_begin_slow(struct sp_gtim *t, uint64_t s, int ptds, int launch)
{
	t->b = NULL;
	unsigned k = launch ? sp_gpu_kernel_timing() : 1;
	if (!k)
		return;
	CUstream st = map_stream(s, ptds);
	if (k > 1 && (t_launches++ % k) != 0) {
		stream_break(st); /* an untimed launch on st: the next one there needs its begin event */
		return;
	}
	int e = errno;
	/*
	 * The trace file is made at the first record (recorder.c), i.e. at the
	 * op id the end takes: made there, between the op and its end event, its
	 * 10-20 ms were the first op's GPU time. Made before the begin event.
	 */
	(void)sp_trace_header();
	const struct sp_drv *d = timing_drv();
	CUcontext c = d ? cur_ctx(d) : NULL;
	struct tstate *S = c ? tstate_get(c) : NULL;
	if (!S || !try_take(S)) /* another thread is reading our ops back: this one goes untimed */
		goto out_break;
	drop_if_stale(S);
	if ((S->ctx && S->ctx != c) || (S->npend >= PEND_MAX && !reclaim(S, d)))
		goto out_give;
	if (!S->ctx)
		bind(S, c);
	if (capturing(d, st))
		goto out_give;
	if (launch && S->npend && S->last_s == st && S->pend[S->npend - 1].op == S->last_op &&
	    !(S->pend[S->npend - 1].flags & PF_PRIV) &&
	    __atomic_load_n(&stream_tok[stream_slot(st)], __ATOMIC_RELAXED) == S->last_tok) {
		t->b = SP_GTIM_CHAIN; /* launch chains: the end event alone */
		t->s = st;
		t->st = S;
		give_back(S);
		errno = e;
		return;
	}
	CUevent b = pool_get(S, d);
	if (!b)
		goto out_give;
	if (S->nfree == 0 && S->created >= POOL_MAX) { /* no end event would be left */
		pool_put(S, b);
		goto out_give;
	}
	if (d->EventRecord(b, st) != CUDA_SUCCESS) {
		pool_put(S, b);
		goto out_give;
	}
	t->b = b;
	t->s = st;
	t->st = S;
	give_back(S);
	errno = e;
	return;
out_give:
	give_back(S);
out_break:
	stream_break(st); /* this op goes untimed */
	errno = e;
}

void sp_gpu_end_slow(struct sp_gtim *t, int ok, uint32_t op, unsigned api, unsigned dev, int done)
{
	if (!t->b)
		return;
	int e = errno;
	struct tstate *S = t->st; /* the begin event's */
	const struct sp_drv *d = sp_drv();
	/*
	 * The begin event is ours until it is queued: wait for a reader to
	 * finish with the pending list (it never blocks, so this is short).
	 */
	while (!try_take(S))
		sched_yield();
	int chain = t->b == SP_GTIM_CHAIN;
	CUevent b = chain ? NULL : t->b;
	CUevent en = ok ? pool_get(S, d) : NULL;
	CUstream es = done && en ? priv_stream(d, S->ctx) : NULL; /* the begin event's context */
	if (!es)
		es = t->s;
	if (!en || S->npend >= PEND_MAX || d->EventRecord(en, es) != CUDA_SUCCESS) {
		pool_put(S, en);
		pool_put(S, b);
		if (ok)
			stream_break(t->s); /* queued, untimed */
	} else {
		struct pend *p = &S->pend[S->npend++];
		p->op = op;
		p->api = (uint16_t)api;
		p->dev = (uint8_t)dev;
		p->flags = (uint8_t)((es != t->s ? PF_PRIV : 0) | (chain ? PF_CHAIN | PF_LINKED : 0));
		p->b = b;
		p->e = en;
		p->lo_ns = chain ? t->t0 : 0;
		if (p->flags & PF_PRIV) {
			stream_break(t->s);
		} else {
			S->last_tok = S->tok_base | (++S->seq & ((1ull << 40) - 1));
			S->last_s = t->s;
			S->last_op = op;
			__atomic_store_n(&stream_tok[stream_slot(t->s)], S->last_tok, __ATOMIC_RELAXED);
		}
	}
	give_back(S);
	errno = e;
}

static void promote_candidate(struct tstate *S, const struct sp_drv *d)
{
	if (S->cand && d->EventQuery(S->cand) == CUDA_SUCCESS) {
		if (S->cand_late) {
			pool_put(S, S->cand);
		} else {
			pool_put(S, S->anchor);
			S->anchor = S->cand;
			S->anchor_ns = S->cand_ns;
		}
		S->cand = NULL;
	}
}

/*
 * GPU spans on their way to the trace: one is held back so that the next, when
 * close enough (same device, op ids within 255, begins within 2^31 ns), shares
 * its slot as a GPU_SPAN2 (trace.h, sp_span2_split). Flushed at the end of each
 * read-back: a span is never held past it.
 */
struct span_out {
	int held;
	uint16_t api;
	uint8_t dev;
	uint32_t op;
	uint64_t b, e;
};

static void span_flush(struct span_out *o)
{
	if (!o->held)
		return;
	uint64_t f[SP_F__COUNT];
	f[SP_F_OP] = o->op;
	f[SP_F_DEVICE] = o->dev;
	sp_emit(SP_K_GPU_SPAN, o->api, o->b, o->e, f);
	o->held = 0;
}

static void span_out(struct span_out *o, unsigned api, unsigned dev, uint32_t op, uint64_t b, uint64_t e)
{
	if (o->held) {
		int64_t db = (int64_t)(b - o->b);
		uint32_t dop = op - o->op;
		if (dev == o->dev && dop >= 1 && dop <= 255 && db >= INT32_MIN && db <= INT32_MAX) {
			uint64_t f[SP_F__COUNT];
			f[SP_F_OP] = o->op;
			f[SP_F_DEVICE] = o->dev;
			f[SP_F_OP_DELTA] = dop;
			f[SP_F_API2] = api;
			f[SP_F_BEGIN_DELTA] = (uint64_t)db;
			f[SP_F_DUR2] = sp_dur_encode(e - b);
			sp_emit(SP_K_GPU_SPAN2, o->api, o->b, o->e, f);
			o->held = 0;
			return;
		}
		span_flush(o);
	}
	*o = (struct span_out){.held = 1, .api = (uint16_t)api, .dev = (uint8_t)dev, .op = op, .b = b, .e = e};
}

/*
 * Emit the GPU spans of T's finished ops against the anchor A (same context);
 * after give_up unfinished ones, keep the rest unasked.
 */
static void read_back_some(struct tstate *T, const struct sp_drv *d, CUevent A, uint64_t A_ns, unsigned give_up)
{
	unsigned keep = 0, unfinished = 0;
	struct span_out out = {0};
	for (unsigned i = 0; i < T->npend; i++) {
		struct pend *p = &T->pend[i];
		float ms0 = 0, ms1 = 0;
		if (unfinished >= give_up || d->EventQuery(p->e) != CUDA_SUCCESS ||
		    d->EventElapsedTime(&ms0, A, p->b ? p->b : p->e) != CUDA_SUCCESS ||
		    (p->b && d->EventElapsedTime(&ms1, p->b, p->e) != CUDA_SUCCESS)) {
			unfinished++;
			T->pend[keep++] = *p;
			continue;
		}
		double gb = (double)A_ns + (double)ms0 * 1e6;
		double dur = (double)ms1 * 1e6;
		if (p->flags & PF_CHAIN) { /* ms0 is its end: its begin is lo_ns */
			double ge = gb;
			gb = (double)p->lo_ns < ge ? (double)p->lo_ns : ge;
			dur = ge - gb;
		}
		if (gb < 0)
			gb = 0;
		if (dur < 0)
			dur = 0;
		if (i + 1 < T->npend && (T->pend[i + 1].flags & PF_LINKED)) {
			/* its chained successor cannot have begun before this op ended */
			struct pend *q = &T->pend[i + 1];
			if ((uint64_t)(gb + dur) > q->lo_ns)
				q->lo_ns = (uint64_t)(gb + dur);
			q->flags &= (uint8_t)~PF_LINKED;
		}
		span_out(&out, p->api, p->dev, p->op, (uint64_t)gb, (uint64_t)gb + (uint64_t)dur);
		pool_put(T, p->b);
		pool_put(T, p->e);
	}
	span_flush(&out);
	T->npend = keep;
}

static void read_back(struct tstate *T, const struct sp_drv *d, CUevent A, uint64_t A_ns)
{
	read_back_some(T, d, A, A_ns, ~0u);
}

/*
 * S (taken): a candidate anchor recorded on st, a stream that should be idle,
 * polled for a short while (2 ms for a thread's first anchor, 0.5 ms to
 * refresh one) and promoted only if it was reached within that bound, which
 * is then its accuracy (sp_gpu_sync_point_slow).
 */
static void anchor_try(struct tstate *S, const struct sp_drv *d, CUstream st)
{
	CUevent a = capturing(d, st) ? NULL : pool_get(S, d);
	if (!a)
		return;
	uint64_t h0 = sp_now();
	if (d->EventRecord(a, st) != CUDA_SUCCESS) {
		pool_put(S, a);
		return;
	}
	uint64_t h1 = sp_now(), limit = S->anchor ? 500000 : 2000000;
	S->cand = a;
	S->cand_ns = h0 + (h1 - h0) / 2;
	S->cand_late = 0;
	while (S->cand) {
		int done = d->EventQuery(a) == CUDA_SUCCESS;
		if (sp_now() - h0 > limit) {
			S->cand_late = 1; /* reached too late (or not yet): unusable */
			if (done)
				promote_candidate(S, d);
			break;
		}
		if (done) {
			promote_candidate(S, d);
			break;
		}
		struct timespec ts1 = {0, 1000};
		nanosleep(&ts1, NULL);
	}
}

/*
 * S (taken) has PEND_MAX ops pending: read back those the GPU has finished,
 * with queries only (the program's stream is never waited for), against S's
 * anchor or that of another thread of its context (a thread that launches but
 * never synchronises: PyTorch's autograd threads). 1 when room was made.
 * RATIONALE: ops were read back only at sync points, so a step of more than
 * PEND_MAX ops between two syncs had its later ops untimed, and their GPU
 * time went to "sync" (3000 back-to-back kernels per step read 67% compute).
 * A GPU's queue of launches is bounded, so when the host is this far ahead
 * most of the oldest ops are done; when none are, the next RECLAIM_SPAN ops
 * go untimed before trying again, so the cost stays a few queries an op.
 */
static int reclaim(struct tstate *S, const struct sp_drv *d)
{
	if (S->reclaim_wait) {
		S->reclaim_wait--;
		return 0;
	}
	promote_candidate(S, d);
	if (S->anchor) {
		read_back_some(S, d, S->anchor, S->anchor_ns, RECLAIM_SPAN);
	} else {
		unsigned n = __atomic_load_n(&sp_gpu_nregistry, __ATOMIC_ACQUIRE);
		if (n > MAX_THREADS)
			n = MAX_THREADS;
		for (unsigned i = 0; i < n && S->npend >= PEND_MAX; i++) {
			struct tstate *U = __atomic_load_n(&registry[i], __ATOMIC_ACQUIRE);
			if (!U || U == S || U->ctx != S->ctx || !try_take(U))
				continue;
			if (U->ctx == S->ctx && !dead(U) && U->anchor) /* U's, now that it is taken */
				read_back_some(S, d, U->anchor, U->anchor_ns, RECLAIM_SPAN);
			give_back(U);
		}
		/*
		 * No thread of the context has an anchor: the program has not
		 * synchronised since its first timed op (a first step of thousands
		 * of launches). One on stepprof's private stream, idle: before, the
		 * ops past PEND_MAX went untimed until the first sync (2,048 of
		 * 3,000 launches timed).
		 */
		CUstream p = S->npend >= PEND_MAX && !S->cand && !S->cand_late ? priv_stream(d, S->ctx) : NULL;
		if (p) {
			anchor_try(S, d, p);
			if (S->anchor)
				read_back_some(S, d, S->anchor, S->anchor_ns, RECLAIM_SPAN);
		}
	}
	if (S->npend < PEND_MAX)
		return 1;
	S->reclaim_wait = RECLAIM_SPAN;
	return 0;
}

void sp_gpu_sync_point_slow(uint64_t s, int ptds, enum sp_sync_kind kind, int ok)
{
	if (!__atomic_load_n(&sp_gpu_nregistry, __ATOMIC_ACQUIRE))
		return; /* nothing was ever timed in this process */
	int e = errno;
	if (kind == SP_SYNC_WAIT) /* the stream's next op may wait for another stream's: no chain across it */
		stream_break(map_stream(s, ptds));
	const struct sp_drv *d = timing_drv();
	CUcontext c = d ? cur_ctx(d) : NULL;
	struct tstate *S = c ? tstate_get(c) : NULL;
	if (!S || !try_take(S))
		goto out;
	drop_if_stale(S);
	if (!S->ctx)
		bind(S, c); /* a thread that only synchronises: its anchors serve the others */
	promote_candidate(S, d);
	uint64_t now = sp_now();
	if (ok && !S->cand && (kind == SP_SYNC_ALL || kind == SP_SYNC_STREAM || kind == SP_SYNC_DONE) &&
	    (!S->anchor || now - S->anchor_ns > ANCHOR_REFRESH_NS) && c == S->ctx) {
		/*
		 * The stream (every stream for a device sync) has just drained: an
		 * event recorded now should be reached by the GPU at once, its GPU
		 * time being the host time of the record. "Should": a stream that
		 * waits for others (the legacy stream, a blocking stream behind
		 * legacy work) may hold it back. So the candidate is polled for a
		 * short while (2 ms for a thread's first anchor, 0.5 ms to refresh
		 * one, once a second at most) and used only if it was reached
		 * within that bound, which is then its accuracy.
		 */
		CUstream st = kind == SP_SYNC_ALL ? NULL : map_stream(s, ptds);
		if (kind == SP_SYNC_DONE) { /* the copy's stream is idle, and ours always is */
			CUstream p = priv_stream(d, c);
			if (p)
				st = p;
		}
		anchor_try(S, d, st);
	}
	CUevent A = S->anchor;
	uint64_t A_ns = S->anchor_ns;
	CUcontext actx = S->ctx;
	if (A && S->npend)
		read_back(S, d, A, A_ns);
	give_back(S);
	if (!A)
		goto out;
	/* the other threads' finished ops in the same context, if nobody holds them */
	unsigned n = __atomic_load_n(&sp_gpu_nregistry, __ATOMIC_ACQUIRE);
	if (n > MAX_THREADS)
		n = MAX_THREADS;
	for (unsigned i = 0; i < n; i++) {
		struct tstate *T = __atomic_load_n(&registry[i], __ATOMIC_ACQUIRE);
		if (!T || T == S || T->ctx != actx || !__atomic_load_n(&T->npend, __ATOMIC_RELAXED) || !try_take(T))
			continue;
		if (dead(T)) { /* its events are gone: its own thread drops them */
			give_back(T);
			continue;
		}
		read_back(T, d, A, A_ns);
		give_back(T);
	}
out:
	errno = e;
}

/*
 * At exit: the ops that finished after the program's last sync point (the
 * last copy of a run, kernels nobody waited for) would be lost with their
 * events. Read back what the GPU has finished, with cuEventQuery only (not a
 * sync: what is still running stays unknown), against the thread's own
 * anchor or one of another thread of the same context. An atexit handler
 * runs before the libraries' destructors, while the driver is still there;
 * _exit and _Exit run it too (sp_gpu_quick_exit); a signal or an OOM kill
 * skips it (those ops stay without GPU time).
 */
/* The ops of every thread that the GPU has finished, read back at exit; returns
 * how many ops whose end event is on a private stream are left pending. */
static unsigned exit_pass(const struct sp_drv *d)
{
	unsigned left = 0, n = __atomic_load_n(&sp_gpu_nregistry, __ATOMIC_ACQUIRE);
	if (n > MAX_THREADS)
		n = MAX_THREADS;
	for (unsigned i = 0; i < n; i++) {
		struct tstate *T = __atomic_load_n(&registry[i], __ATOMIC_ACQUIRE);
		if (!T || !__atomic_load_n(&T->npend, __ATOMIC_RELAXED) || !try_take(T))
			continue;
		if (dead(T)) { /* its events died with their context */
			give_back(T);
			continue;
		}
		promote_candidate(T, d);
		if (T->anchor) {
			read_back(T, d, T->anchor, T->anchor_ns);
		} else {
			for (unsigned j = 0; j < n && T->npend; j++) {
				struct tstate *U = __atomic_load_n(&registry[j], __ATOMIC_ACQUIRE);
				if (!U || U == T || U->ctx != T->ctx || !try_take(U))
					continue;
				if (dead(U)) {
					give_back(U);
					continue;
				}
				promote_candidate(U, d);
				if (U->anchor)
					read_back(T, d, U->anchor, U->anchor_ns);
				give_back(U);
			}
		}
		for (unsigned k = 0; k < T->npend; k++)
			left += T->pend[k].flags & PF_PRIV;
		give_back(T);
	}
	return left;
}

/*
 * How long the exit waits at most for the end events stepprof recorded on its
 * private streams: those streams hold nothing but stepprof's own event records
 * and wait for no other stream, so the GPU reaches them at once (microseconds);
 * a loaded machine may take longer to run the simulated GPU's stream thread.
 * The program's own work still running is never waited for.
 */
#define EXIT_PRIV_WAIT_NS 200000000ull

static void read_back_at_exit(void)
{
	unsigned n = __atomic_load_n(&sp_gpu_nregistry, __ATOMIC_ACQUIRE);
	if (!n)
		return;
	const struct sp_drv *d = timing_drv();
	if (!d)
		return;
	int e = errno;
	/*
	 * First as a device-wide sync point of the exiting thread: where it has
	 * no anchor yet (its syncs' candidates came too late on a loaded machine,
	 * or it never synchronised), one is tried now, under the same bound: an
	 * event on the legacy stream is reached at once only if the device is
	 * idle, else it is not used. This reads back its context's ops too.
	 */
	sp_gpu_sync_point(0, 0, SP_SYNC_ALL, 1);
	uint64_t t0 = sp_now();
	while (exit_pass(d) && sp_now() - t0 < EXIT_PRIV_WAIT_NS) {
		struct timespec ts1 = {0, 100000};
		nanosleep(&ts1, NULL);
	}
	errno = e;
}

/*
 * _exit and _Exit (hook_proc.c): what the atexit handler above does, which
 * they skip. Python's os._exit ends training scripts that would rather not
 * wait for NCCL's and the driver's teardown: their last step's ops lost their
 * GPU time. Not when this thread is inside a CUDA call of its own (a signal
 * handler that calls _exit, interrupting it: the driver may hold a lock there
 * that a query would wait for). A forked child's registry is empty: nothing.
 */
void sp_gpu_quick_exit(void)
{
	if (!sp_hook_depth)
		read_back_at_exit();
}

/* ------------------------------------------------------ 3. kernel names */

#define NAME_SLOTS 4096u

struct name_slot {
	uintptr_t key; /* 0 empty, 1 being filled */
	uint32_t id;
};

static struct name_slot names[NAME_SLOTS];

static uint32_t name_of(const void *stub, CUfunction f)
{
	char buf[512];
	if (!stub && !f)
		return sp_intern_cstr("graph");
	if (f) {
		const struct sp_drv *d = sp_drv();
		const char *n = NULL;
		if (d && d->FuncGetName && d->FuncGetName(&n, f) == CUDA_SUCCESS && n && *n)
			return sp_intern_cstr(n);
		/*
		 * cuLaunchKernel takes a CUkernel too (CUDA >= 12.0), and the CUDA
		 * 12/13 runtime launches its programs' kernels through those
		 * (cuLibraryGetKernel): cuFuncGetName does not name them. On the
		 * H200 run, 10 of PyTorch's 12 most-launched kernels read
		 * kernel@0x...; only the cuBLAS one, a module's CUfunction, had its
		 * name. NOTE: not yet checked on a GPU (gpu-check reports the
		 * share of named launches).
		 */
		if (d && d->KernelGetName && d->KernelGetName(&n, (CUkernel)(void *)f) == CUDA_SUCCESS && n && *n)
			return sp_intern_cstr(n);
		/* the simulator's CUfunction is a host function: dladdr may name it */
		stub = (const void *)f;
	}
	Dl_info di;
	if (dladdr(stub, &di) && di.dli_sname && di.dli_saddr == stub)
		return sp_intern_cstr(di.dli_sname);
	snprintf(buf, sizeof(buf), "kernel@%p", stub);
	return sp_intern_cstr(buf);
}

static inline uintptr_t name_key(const void *stub, CUfunction f)
{
	uintptr_t k = f ? (uintptr_t)f : (uintptr_t)stub;
	return k <= 1 ? 2 : k; /* graph launches share one name */
}

static inline unsigned name_hash(uintptr_t k)
{
	return (unsigned)((k >> 4) ^ (k >> 16)) & (NAME_SLOTS - 1);
}

/* Not at its first slot: probe on, or name it and fill a slot. */
static __attribute__((noinline)) uint32_t name_slow(const void *stub, CUfunction f, uintptr_t k)
{
	unsigned h = name_hash(k);
	for (unsigned n = 0; n < 32; n++) {
		struct name_slot *s = &names[(h + n) & (NAME_SLOTS - 1)];
		uintptr_t cur = __atomic_load_n(&s->key, __ATOMIC_ACQUIRE);
		if (cur == k)
			return __atomic_load_n(&s->id, __ATOMIC_ACQUIRE);
		if (cur == 0) {
			if (!__atomic_compare_exchange_n(&s->key, &cur, (uintptr_t)1, 0, __ATOMIC_ACQ_REL, __ATOMIC_RELAXED))
				continue;
			int e = errno;
			uint32_t id = name_of(stub, f);
			errno = e;
			__atomic_store_n(&s->id, id, __ATOMIC_RELEASE);
			__atomic_store_n(&s->key, k, __ATOMIC_RELEASE);
			return id;
		}
	}
	int e = errno;
	uint32_t id = name_of(stub, f);
	errno = e;
	return id;
}

/* RATIONALE: the common case, a kernel met before at its first slot, is one
 * load and one compare, with no frame: the rest lives in name_slow. */
uint32_t sp_gpu_kernel_name(const void *stub, CUfunction f)
{
	uintptr_t k = name_key(stub, f);
	struct name_slot *s = &names[name_hash(k)];
	if (__builtin_expect(__atomic_load_n(&s->key, __ATOMIC_ACQUIRE) == k, 1))
		return __atomic_load_n(&s->id, __ATOMIC_ACQUIRE);
	return name_slow(stub, f, k);
}

/* ------------------------------------------------------ 4. host kinds */

#define PTR_CACHE 1024u

/*
 * One word per slot, (page << 16 | generation) << 8 | kind, stored and loaded
 * whole: with the kind beside the key, a reader that saw one thread's key
 * could read another thread's kind for another page of the same slot.
 * NOTE: 48-bit user addresses (36-bit pages) fit; above that the top page
 * bits are lost, so two pages 2^52 bytes apart could share an answer.
 */
struct ptr_slot {
	uint64_t word; /* 0 empty */
};

static struct ptr_slot ptr_cache[PTR_CACHE];
static unsigned ptr_gen = 1;

void sp_gpu_ptr_cache_flush(void)
{
	unsigned g = __atomic_add_fetch(&ptr_gen, 1, __ATOMIC_RELAXED);
	if ((g & 0xffff) == 0)
		__atomic_add_fetch(&ptr_gen, 1, __ATOMIC_RELAXED);
}

unsigned sp_gpu_host_kind(uint64_t p, int may_be_device)
{
	int pin = sp_pinned_lookup(p);
	if (pin > 0)
		return SP_HOSTMEM_PINNED;
	if (!may_be_device || !p) /* in no range of an incomplete map: pinned or not, unknown */
		return pin < 0 ? SP_HOSTMEM_UNKNOWN : SP_HOSTMEM_PAGEABLE;
	uint64_t key = ((p >> 12) << 16) | (__atomic_load_n(&ptr_gen, __ATOMIC_RELAXED) & 0xffff);
	struct ptr_slot *s = &ptr_cache[(p >> 12) & (PTR_CACHE - 1)];
	uint64_t w = __atomic_load_n(&s->word, __ATOMIC_RELAXED);
	if (w >> 8 == (key & (UINT64_MAX >> 8)))
		return (unsigned)(w & 0xff);
	int e = errno;
	const struct sp_drv *d = sp_drv();
	/* Only where a context exists: never initialise CUDA ourselves. */
	if (!d || !d->PointerGetAttribute || !cur_ctx(d)) {
		errno = e;
		return SP_HOSTMEM_UNKNOWN;
	}
	unsigned kind = SP_HOSTMEM_PAGEABLE;
	unsigned int managed = 0, mtype = 0;
	if (d->PointerGetAttribute(&managed, CU_POINTER_ATTRIBUTE_IS_MANAGED, (CUdeviceptr)p) == CUDA_SUCCESS && managed)
		kind = SP_HOSTMEM_MANAGED;
	else if (d->PointerGetAttribute(&mtype, CU_POINTER_ATTRIBUTE_MEMORY_TYPE, (CUdeviceptr)p) == CUDA_SUCCESS)
		kind = mtype == CU_MEMORYTYPE_DEVICE ? SP_HOSTMEM_DEVICE :
		       mtype == CU_MEMORYTYPE_HOST   ? SP_HOSTMEM_PINNED :
						       SP_HOSTMEM_PAGEABLE;
	errno = e;
	__atomic_store_n(&s->word, key << 8 | (kind & 0xff), __ATOMIC_RELAXED);
	return kind;
}

static int ndevices; /* 0: not asked yet */

int sp_gpu_ptr_device(uint64_t p)
{
	int e = errno;
	const struct sp_drv *d = sp_drv();
	int n = __atomic_load_n(&ndevices, __ATOMIC_RELAXED), dev = -1;
	if (!n && d && d->DeviceGetCount && d->DeviceGetCount(&n) == CUDA_SUCCESS && n > 0)
		__atomic_store_n(&ndevices, n, __ATOMIC_RELAXED);
	if (n > 1 && d && d->PointerGetAttribute &&
	    d->PointerGetAttribute(&dev, CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL, (CUdeviceptr)p) != CUDA_SUCCESS)
		dev = -1;
	errno = e;
	return dev < 0 ? -1 : dev < SP_DEV_MAX ? dev : SP_DEV_MAX - 1;
}

/* ------------------------------------------------------ 5. the header */

static int read_small(const char *path, char *buf, size_t len)
{
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return -1;
	ssize_t n = read(fd, buf, len - 1);
	close(fd);
	if (n <= 0)
		return -1;
	buf[n] = 0;
	return 0;
}

static uint16_t pcie_gen(const char *speed)
{
	double gt = atof(speed); /* "16.0 GT/s PCIe" */
	return gt >= 60 ? 6 : gt >= 30 ? 5 : gt >= 15 ? 4 : gt >= 7 ? 3 : gt >= 4 ? 2 : gt > 0 ? 1 : 0;
}

static void pcie_info(struct sp_device_info *di, const char *busid)
{
	char path[256], buf[64], id[32];
	size_t i;
	for (i = 0; busid[i] && i < sizeof(id) - 1; i++)
		id[i] = (char)(busid[i] >= 'A' && busid[i] <= 'F' ? busid[i] - 'A' + 'a' : busid[i]);
	id[i] = 0;
	static const struct {
		const char *file;
		int what;
	} f[] = { { "current_link_speed", 0 }, { "current_link_width", 1 }, { "max_link_speed", 2 }, { "max_link_width", 3 } };
	const char *dom = id;
	if (strlen(id) > 12 && id[8] == ':') /* 8-digit domain from the driver */
		dom = id + 4;
	for (unsigned k = 0; k < 4; k++) {
		snprintf(path, sizeof(path), "/sys/bus/pci/devices/%s/%s", dom, f[k].file);
		if (read_small(path, buf, sizeof(buf)) < 0)
			continue;
		switch (f[k].what) {
		case 0: di->pcie_gen_cur = pcie_gen(buf); break;
		case 1: di->pcie_width_cur = (uint16_t)atoi(buf); break;
		case 2: di->pcie_gen_max = pcie_gen(buf); break;
		default: di->pcie_width_max = (uint16_t)atoi(buf); break;
		}
	}
}

int sp_gpu_header_done;

void sp_gpu_header_slow(void)
{
	int e = errno;
	const struct sp_drv *d = sp_drv();
	int expect = 0;
	struct sp_file_header *h;
	if (!d || !cur_ctx(d) || /* else later, once the program has a context */
	    !__atomic_compare_exchange_n(&sp_gpu_header_done, &expect, 1, 0, __ATOMIC_ACQ_REL, __ATOMIC_RELAXED) ||
	    !(h = sp_trace_header())) {
		errno = e;
		return;
	}
	sp_hook_depth++; /* our own sysfs reads and driver queries are not the program's */
	__atomic_or_fetch(&h->features, SP_FEAT_CUDA, __ATOMIC_RELAXED);
	int v = 0;
	if (d->DriverGetVersion && d->DriverGetVersion(&v) == CUDA_SUCCESS)
		h->driver_version = v;
	const char *rt[] = { "libcudart.so.13", "libcudart.so.12", NULL };
	for (int i = 0; rt[i]; i++) {
		void *lh = dlopen(rt[i], RTLD_NOLOAD | RTLD_LAZY);
		sp_dlsym_fn rd = sp_real_dlsym();
		if (!lh || !rd)
			continue;
		int (*rgv)(int *) = (int (*)(int *))rd(lh, "cudaRuntimeGetVersion");
		if (rgv && rgv(&v) == 0)
			h->runtime_version = v;
		dlclose(lh);
		break;
	}
	int n = 0;
	if (d->DeviceGetCount && d->DeviceGetCount(&n) == CUDA_SUCCESS) {
		if (n > (int)SP_MAX_DEVICES)
			n = SP_MAX_DEVICES;
		for (int i = 0; i < n; i++) {
			struct sp_device_info *di = &h->devices[i];
			CUdevice dev = i;
			if (d->DeviceGet && d->DeviceGet(&dev, i) != CUDA_SUCCESS)
				continue;
			di->ordinal = i;
			if (d->DeviceGetName)
				d->DeviceGetName(di->name, sizeof(di->name) - 1, dev);
			size_t mem = 0;
			if (d->DeviceTotalMem && d->DeviceTotalMem(&mem, dev) == CUDA_SUCCESS)
				di->mem_bytes = mem;
			char bus[64] = "";
			if (d->DeviceGetPCIBusId && d->DeviceGetPCIBusId(bus, sizeof(bus), dev) == CUDA_SUCCESS)
				pcie_info(di, bus);
		}
		h->ndevices = (uint32_t)n;
	}
	sp_hook_depth--;
	errno = e;
}
