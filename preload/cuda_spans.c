/*
 * cuda_spans.c - GPU time from CUDA events, the reading half (see cuda_gpu.h,
 * section 2, and cuda_timing.h): the ops whose end event the GPU has reached
 * become GPU_SPAN records, converted to host CLOCK_MONOTONIC through an
 * anchor event:
 *   1. span emission (two close spans share a GPU_SPAN2) and the read-back,
 *   2. anchors, and the reclaim of a thread whose pending ops are full,
 *   3. the application's sync points,
 *   4. the read-back at exit (exit, _exit).
 */
#include "cuda_timing.h"

#include <errno.h>
#include <time.h>

#include "recorder.h"

/* ---------------------------------------------------- 1. the read-back */

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

/* ------------------------------------------------ 2. anchors, reclaim */

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
int reclaim(struct tstate *S, const struct sp_drv *d)
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
		 * of launches). One on stepprof's private stream, idle: otherwise the
		 * ops past PEND_MAX would go untimed until the first sync (2,048 of
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

/* ------------------------------------------------------ 3. sync points */

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
		tstate_bind(S, c); /* a thread that only synchronises: its anchors serve the others */
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

/* ------------------------------------------------------------ 4. exit */

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

void read_back_at_exit(void)
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
