/*
 * cuda_timing.c - GPU time from CUDA events, the recording half (see
 * cuda_gpu.h, section 2, and cuda_timing.h):
 *   1. launch chains and the per-thread timing states,
 *   2. the private stream of each context; device resets and context ends,
 *   3. a thread's state for its current context (bound, adopted or new),
 *   4. the event pool, and the begin and end events around an op.
 * cuda_spans.c reads the finished ops back.
 *
 * Per-thread state is reached through an initial-exec TLS pointer and mmap'd at
 * the thread's first timed op (the slow path): no malloc, no lock afterwards.
 * RATIONALE for per-thread pools: events belong to a context and the ops are
 * issued by the thread; a per-thread pool needs no lock. A thread has one
 * state (pool, pending ops, anchor) per context it works in, up to
 * TS_PER_THREAD; an op in a context beyond those is not timed (lost timing,
 * not a wrong time).
 */
#include "cuda_timing.h"

#include <errno.h>
#include <sched.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#include "config.h"
#include "cuda_mem.h"
#include "recorder.h"

/* ------------------------------------------------------ 1. thread states */

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
uint64_t stream_tok[STREAM_TOK_SLOTS];

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
__thread struct sp_sample_slot sp_samples[SP_SAMPLE_SLOTS] __attribute__((tls_model("initial-exec")));
__thread uint64_t sp_sample_rng __attribute__((tls_model("initial-exec")));

struct tstate *registry[MAX_THREADS];
unsigned sp_gpu_nregistry;

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
	k = SP_KT_AUTO;
	if (v && !strcmp(v, "off")) {
		k = 0;
	} else if (v && !strcmp(v, "all")) {
		k = 1;
	} else if (v && strcmp(v, "auto")) {
		int e = errno;
		unsigned long long n = strtoull(v, NULL, 10); /* a positive number: config.c checked it */
		errno = e;
		k = n == 0 ? 1 : n >= SP_KT_AUTO ? SP_KT_AUTO - 1 : (unsigned)n;
	}
	__atomic_store_n(&sp_gpu_ktiming, k, __ATOMIC_RELAXED);
	return k;
}

/* ------------------------------------------ 2. private streams, resets */

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
CUstream priv_stream(const struct sp_drv *d, CUcontext c)
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
void tstate_bind(struct tstate *S, CUcontext c)
{
	S->ctx = c;
	S->dev = sp_gpu_device();
	S->resets = resets_of(S->dev);
	__atomic_store_n(&S->gone, 0, __ATOMIC_RELEASE);
}

/* The context T's events belong to was destroyed or its device reset since T was bound. */
int dead(const struct tstate *T)
{
	return T->ctx && (T->resets != resets_of(T->dev) || __atomic_load_n(&T->gone, __ATOMIC_ACQUIRE));
}

/* S is taken: if its events died with their context, forget them (their handles are gone). */
void drop_if_stale(struct tstate *S)
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

/* ------------------------------------------- 3. the state of a context */

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
struct tstate *tstate_get(CUcontext c)
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

CUevent pool_get(struct tstate *S, const struct sp_drv *d)
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

void pool_put(struct tstate *S, CUevent e)
{
	if (e && S->nfree < POOL_MAX)
		S->freev[S->nfree++] = e;
}

CUstream map_stream(uint64_t s, int ptds)
{
	if (!s && ptds)
		return CU_STREAM_PER_THREAD;
	return (CUstream)(uintptr_t)s;
}

int capturing(const struct sp_drv *d, CUstream st)
{
	CUstreamCaptureStatus cs = CU_STREAM_CAPTURE_STATUS_NONE;
	if (!d->StreamIsCapturing)
		return 0;
	if (d->StreamIsCapturing(st, &cs) != CUDA_SUCCESS)
		return 1; /* e.g. the legacy stream during a global capture: stay out */
	return cs != CU_STREAM_CAPTURE_STATUS_NONE;
}

const struct sp_drv *timing_drv(void)
{
	const struct sp_drv *d = sp_drv();
	if (!d || !d->EventCreate || !d->EventRecord || !d->EventQuery || !d->EventElapsedTime || !d->CtxGetCurrent)
		return NULL;
	return d;
}

/* ------------------------------------------------- 4. begin and end */

void sp_gpu_begin_slow(struct sp_gtim *t, uint64_t s, int ptds, uint64_t launch)
{
	t->b = NULL;
	unsigned k = launch ? sp_gpu_kernel_timing() : 1;
	if (!k)
		return;
	/*
	 * sample: this launch takes a begin event even where it could chain, so
	 * that the analyzer learns the kernel's duration from it (a chained
	 * launch on an idle stream has no begin of its own: "Samples").
	 */
	int sample = launch == SP_LAUNCH_SAMPLED || launch == SP_LAUNCH_NCCL;
	if (launch && !sample) {
		sample = sp_gpu_sample(launch);
		if (k == SP_KT_AUTO && !sample)
			return; /* auto: no chain to break, a sample never chains */
	}
	CUstream st = map_stream(s, ptds);
	if (k > 1 && k != SP_KT_AUTO && launch != SP_LAUNCH_NCCL && (t_launches++ % k) != 0) {
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
		tstate_bind(S, c);
	if (capturing(d, st))
		goto out_give;
	if (launch && !sample && S->npend && S->last_s == st && S->pend[S->npend - 1].op == S->last_op &&
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
