/*
 * analyze_iters.c - the iterations of the training thread (see analyze_int.h):
 * from its NVTX ranges, else its stepprof_step() marks, else detected
 * automatically (iter.h).
 *
 * Divided into:
 *   1. marked iterations: NVTX ranges and step marks (collected by pass 1);
 *   2. pass 1b (automatic detection only): the training thread's signatures, the
 *      period, the anchor and the iteration boundaries.
 */
#include "analyze_int.h"
#include "iter.h"

#include <stdlib.h>

/* ------------------------------------ 1. marked: NVTX ranges, step marks */

static int set_iterations(struct an_analysis *a, const struct iter_range *r, size_t n)
{
	a->it = calloc(n ? n : 1, sizeof(*a->it));
	if (!a->it)
		return -1;
	a->nit = n;
	for (size_t i = 0; i < n; i++) {
		a->it[i].start_ns = r[i].b;
		a->it[i].end_ns = r[i].e;
		/* disjoint: an iteration ends at the latest where the next begins */
		if (i + 1 < n && a->it[i].end_ns > r[i + 1].b)
			a->it[i].end_ns = r[i + 1].b;
	}
	return 0;
}

/* The end of the training thread's work: its last CUDA call or its process's last GPU span. */
static uint64_t trainer_end(struct state *s)
{
	struct an_analysis *a = s->a;
	uint64_t e = thr_get(s, a->trainer_pid, a->training_tid)->last_sig_end;
	struct an_proc *p = proc_find(a, a->trainer_pid);
	if (p && s->gpu_end[p - a->procs] > e)
		e = s->gpu_end[p - a->procs];
	return e;
}

/* Iterations from NVTX ranges of the trainer (its training thread's, when it has any). */
int iterations_nvtx(struct state *s)
{
	struct an_analysis *a = s->a;
	size_t n = 0, on_t = 0;
	for (size_t i = 0; i < s->nranges; i++)
		if (s->ranges[i].pid == a->trainer_pid && s->ranges[i].tid == a->training_tid)
			on_t++;
	struct iter_range *r = malloc((s->nranges + 1) * sizeof(*r));
	if (!r)
		return -1;
	for (size_t i = 0; i < s->nranges; i++) {
		struct mark *m = &s->ranges[i];
		if (m->pid != a->trainer_pid || (on_t && m->tid != a->training_tid))
			continue;
		r[n].b = m->b;
		r[n].e = m->e;
		n++;
	}
	n = iter_outermost(r, n);
	int rc = 0;
	if (n) {
		a->source_kind = AN_SRC_NVTX;
		rc = set_iterations(a, r, n);
	}
	free(r);
	return rc;
}

static int cmp_mark_b(const void *x, const void *y)
{
	const struct mark *a = x, *b = y;
	return a->b < b->b ? -1 : a->b > b->b;
}

/*
 * Iterations from stepprof_step() marks: each mark starts an iteration that lasts
 * until the next; the last lasts until the training thread's last CUDA work when
 * there is any after it (otherwise it only closed the previous iteration).
 */
int iterations_steps(struct state *s)
{
	struct an_analysis *a = s->a;
	size_t n = 0, on_t = 0;
	for (size_t i = 0; i < s->nsteps; i++)
		if (s->steps[i].pid == a->trainer_pid && s->steps[i].tid == a->training_tid)
			on_t++;
	for (size_t i = 0; i < s->nsteps; i++) {
		struct mark *m = &s->steps[i];
		if (m->pid == a->trainer_pid && (!on_t || m->tid == a->training_tid))
			s->steps[n++] = *m;
	}
	if (!n)
		return 0;
	qsort(s->steps, n, sizeof(*s->steps), cmp_mark_b);
	struct iter_range *r = malloc(n * sizeof(*r));
	if (!r)
		return -1;
	size_t k = 0;
	for (size_t i = 0; i + 1 < n; i++)
		if (s->steps[i + 1].b > s->steps[i].b)
			r[k++] = (struct iter_range){s->steps[i].b, s->steps[i + 1].b};
	uint64_t end = trainer_end(s);
	if (end > s->steps[n - 1].b)
		r[k++] = (struct iter_range){s->steps[n - 1].b, end};
	int rc = 0;
	if (k) {
		a->source_kind = AN_SRC_API;
		rc = set_iterations(a, r, k);
	}
	free(r);
	return rc;
}

/* ------------------------------------------------- 2. pass 1b: automatic */

/* Records that are not calls of the thread, or are part of a file's read (close). */
static int is_passive_kind(unsigned k)
{
	return k == SP_K_CLOSE || k == SP_K_GPU_SPAN || k == SP_K_LOST || k == SP_K_THREAD || k == SP_K_MARK ||
	       k == SP_K_STEP || k == SP_K_RANGE || k == SP_K_NVTX_MARK;
}

static uint32_t signature(const struct sp_event *ev)
{
	uint64_t h = ev->kind;
	h = iter_sig_mix(h, ev->f[SP_F_DIRECTION]);
	if (ev->kind == SP_K_COPY || ev->kind == SP_K_MEMSET)
		h = iter_sig_mix(h, ev->f[SP_F_BYTES]);
	if (ev->kind == SP_K_LAUNCH)
		h = iter_sig_mix(h, ev->f[SP_F_NAME]);
	return (uint32_t)h;
}

struct autostate {
	/* per signature: the prefix, then a ring of the last ITER_PREFIX_MAX once detected */
	uint32_t *sig;
	uint8_t *flags;
	uint64_t *cut; /* the boundary the signature would give */
	size_t n;      /* signatures in the prefix */
	uint64_t count; /* signatures seen */
	int detected;
	uint32_t period, anchor, every;
	/*
	 * back > 0: the iteration's first wait for a batch is not the anchor's but
	 * the one before start_sig, back positions earlier in the period, with
	 * skip more occurrences of start_sig after a wait between them.
	 */
	uint32_t back, start_sig, skip;
	uint64_t occ, prev; /* anchor occurrences; the index of the last one + 1 (0: none) */
	uint64_t *bnd;
	size_t nbnd, capbnd;
};

static int auto_boundary(struct autostate *as, uint64_t t)
{
	if (as->nbnd == as->capbnd) {
		size_t c = as->capbnd ? as->capbnd * 2 : 1024;
		uint64_t *v = realloc(as->bnd, c * sizeof(*v));
		if (!v)
			return -1;
		as->bnd = v;
		as->capbnd = c;
	}
	if (as->nbnd && t <= as->bnd[as->nbnd - 1])
		return 0; /* never a zero-length iteration */
	as->bnd[as->nbnd++] = t;
	return 0;
}

/*
 * Where the iteration of the anchor at index idx begins: at the signature back
 * positions earlier when it is start_sig; else (an iteration whose first calls
 * differ: a first iteration that tunes its kernels) at the wait before the
 * (skip + 1)-th last start_sig that followed one since the previous anchor;
 * else at the anchor.
 */
static uint64_t auto_start(const struct autostate *as, uint64_t idx)
{
	if (!as->back)
		return as->cut[idx % ITER_PREFIX_MAX];
	uint64_t lo = as->prev;
	if (idx >= ITER_PREFIX_MAX && lo <= idx - ITER_PREFIX_MAX)
		lo = idx - ITER_PREFIX_MAX + 1; /* what the ring still holds */
	if (idx >= as->back && idx - as->back >= lo && as->sig[(idx - as->back) % ITER_PREFIX_MAX] == as->start_sig)
		return as->cut[(idx - as->back) % ITER_PREFIX_MAX];
	uint32_t skip = as->skip;
	for (uint64_t k = idx; k-- > lo;) {
		size_t r = k % ITER_PREFIX_MAX;
		if (as->sig[r] == as->start_sig && (as->flags[r] & ITER_SIG_AFTER_INPUT) && !skip--)
			return as->cut[r];
	}
	return as->cut[idx % ITER_PREFIX_MAX];
}

/* The signature at index idx (in the ring) was seen: a boundary when it is the anchor. */
static int auto_cut(struct autostate *as, uint64_t idx)
{
	if (as->sig[idx % ITER_PREFIX_MAX] != as->anchor)
		return 0;
	uint64_t t = auto_start(as, idx);
	as->prev = idx + 1;
	if (as->occ++ % as->every)
		return 0;
	return auto_boundary(as, t);
}

/* Does the signature at prefix position j follow an input wait in most of its occurrences (a period apart)? */
static int auto_after_input(const struct autostate *as, size_t j)
{
	size_t P = as->period, skip = as->n / 8;
	unsigned seen = 0, inputs = 0;
	for (size_t k = j; k >= skip; k -= P) {
		seen++;
		inputs += (as->flags[k] & ITER_SIG_AFTER_INPUT) != 0;
		if (k < P)
			break;
	}
	return seen && 2 * inputs >= seen;
}

/*
 * The design's start of an iteration is the wait before its first H2D copy.
 * The anchor is a signature occurring once per period, which need not follow
 * that wait (a batch of equal-sized tensors gives no unique copy), nor the
 * first one (two micro-batches per step, each waited for). Of the period's
 * signatures that mostly follow an input wait, H2D copies first, the first
 * after the previous anchor (the farthest before this one) gives the start.
 */
static void auto_start_phase(struct autostate *as)
{
	as->back = as->skip = 0;
	size_t P = as->period, base = iter_period_base(as->sig, as->n, as->period);
	uint32_t ia = 0;
	while (ia < P && as->sig[base + ia] != as->anchor)
		ia++;
	if (as->every != 1 || ia == P)
		return;
	for (int h2d = 1; h2d >= 0; h2d--)
		for (uint32_t d = (uint32_t)P; d-- > 0;) {
			size_t j = base + (ia + P - d) % P;
			if ((h2d && !(as->flags[j] & ITER_SIG_H2D)) || !auto_after_input(as, j))
				continue;
			as->back = d;
			as->start_sig = as->sig[j];
			for (uint32_t e = d; e-- > 1;) { /* the same signature after a wait, later in the period */
				size_t k = base + (ia + P - e) % P;
				as->skip += as->sig[k] == as->start_sig && (as->flags[k] & ITER_SIG_AFTER_INPUT);
			}
			return;
		}
}

static int auto_detect(struct autostate *as)
{
	as->detected = -1;
	as->period = iter_find_period(as->sig, as->n, 0.9);
	if (!as->period || iter_choose_anchor(as->sig, as->flags, as->n, as->period, &as->anchor, &as->every))
		return 0;
	as->detected = 1;
	auto_start_phase(as);
	for (size_t i = 0; i < as->n; i++)
		if (auto_cut(as, i))
			return -1;
	return 0;
}

/*
 * Where the training thread's wait for its batch begins, as it calls: an input
 * call begins a wait unless one is open, and any other call of the thread (an
 * allocation, a pinned alloc) separates two waits: the files a setup phase reads
 * before its first cudaMalloc are not the first batch's wait, which begins
 * again at the next input call. Without one, the wait stands: a caching
 * allocator's cudaMalloc between the wait for the first batch and its copy does
 * not move the first load out of the first iteration.
 */
struct autowait {
	int in_wait, after_call;
	int own; /* the open wait began at an input call of the thread itself, not at a lock wait */
	uint64_t start;
	/*
	 * A lock wait of the training thread is input where another thread of its
	 * process is in a loader wait (the breakdown's rule, bd_lock_input): a
	 * pin-memory thread receiving the batch. The records of those waits that
	 * overlap it come after it in the stream (by begin time), up to the
	 * thread's next call, which decides: lock_in, the first instant of the
	 * overlap (UINT64_MAX: none yet). peer_b, peer_e: the other threads' loader
	 * wait seen that ends last.
	 */
	int lock;
	uint64_t lock_b, lock_e, lock_in, peer_b, peer_e;
};

static void autowait_input(struct autowait *w, uint64_t t, int own)
{
	if (!w->in_wait || w->after_call) {
		w->in_wait = 1;
		w->after_call = 0;
		w->own = own;
		w->start = t;
	}
}

/*
 * Another thread of the trainer is in a loader wait [b, e). Begun after a call
 * that followed the training thread's own input calls, it receives the batch
 * those calls were not the wait for: a pin-memory thread's first batch, handed
 * over without a lock wait long enough to be recorded, after a set-up phase that
 * wrote the data set and allocated. The iteration then begins at its first call.
 */
static void autowait_peer(struct autowait *w, uint64_t b, uint64_t e)
{
	if (w->in_wait && w->after_call && w->own)
		w->in_wait = 0;
	if (w->lock && b < w->lock_e && e > w->lock_b) {
		uint64_t t = b > w->lock_b ? b : w->lock_b;
		if (t < w->lock_in)
			w->lock_in = t;
	}
	if (e > w->peer_e) {
		w->peer_b = b;
		w->peer_e = e;
	}
}

/* The training thread's lock wait [b, e): input from lock_in once its overlaps are known. */
static void autowait_lock(struct autowait *w, uint64_t b, uint64_t e)
{
	w->lock = 1;
	w->lock_b = b;
	w->lock_e = e;
	w->lock_in = UINT64_MAX;
	if (w->peer_e > b && w->peer_b < e) /* a loader wait begun before it, still on */
		w->lock_in = w->peer_b > b ? w->peer_b : b;
}

/* The training thread's next call: its lock wait before it was an input wait, or another call. */
static void autowait_lock_done(struct autowait *w)
{
	if (!w->lock)
		return;
	w->lock = 0;
	if (w->lock_in != UINT64_MAX)
		autowait_input(w, w->lock_in, 0);
	else
		w->after_call = 1; /* a Thread.start(), another lock: a call, not a batch */
}

int iterations_auto(struct state *s)
{
	struct an_analysis *a = s->a;
	struct autostate as = {0};
	as.sig = malloc(ITER_PREFIX_MAX * sizeof(*as.sig));
	as.flags = malloc(ITER_PREFIX_MAX);
	as.cut = malloc(ITER_PREFIX_MAX * sizeof(*as.cut));
	int rc = -1;
	if (!as.sig || !as.flags || !as.cut || s->src->rewind(s->src->ctx))
		goto out;
	const struct sp_event *e;
	int file;
	struct autowait w = {0};
	while ((e = s->src->next(s->src->ctx, &file))) {
		const struct sp_event ev = *e;
		if (ev.pid != a->trainer_pid)
			continue;
		if (ev.tid != a->training_tid) {
			if (ev.kind == SP_K_LOADER_WAIT)
				autowait_peer(&w, ev.begin_ns, ev.end_ns);
			continue;
		}
		if (!is_passive_kind(ev.kind))
			autowait_lock_done(&w); /* not at a GPU span or a range written after it, begun before */
		if (ev.kind == SP_K_LOCK_WAIT) {
			autowait_lock(&w, ev.begin_ns, ev.end_ns);
			continue;
		}
		if (is_input_kind(ev.kind)) {
			autowait_input(&w, ev.begin_ns, 1);
			continue;
		}
		if (!is_sig_kind(ev.kind)) {
			if (!is_passive_kind(ev.kind))
				w.after_call = 1;
			continue;
		}
		uint32_t sg = signature(&ev);
		uint64_t cut = w.in_wait && w.start < ev.begin_ns ? w.start : ev.begin_ns;
		uint8_t fl = (w.in_wait ? ITER_SIG_AFTER_INPUT : 0) |
			     (ev.kind == SP_K_COPY && ev.f[SP_F_DIRECTION] == SP_DIR_H2D ? ITER_SIG_H2D : 0) |
			     (ev.kind == SP_K_SYNC ? ITER_SIG_SYNC : 0);
		w.in_wait = w.after_call = 0;
		if (as.detected < 0)
			continue;
		size_t r = as.count % ITER_PREFIX_MAX;
		as.sig[r] = sg;
		as.flags[r] = fl;
		as.cut[r] = cut;
		if (!as.detected) {
			as.n = (size_t)++as.count;
			if (as.n == ITER_PREFIX_MAX && auto_detect(&as))
				goto out;
		} else if (auto_cut(&as, as.count++)) {
			goto out;
		}
	}
	if (!as.detected && auto_detect(&as))
		goto out;
	rc = 0;
	if (as.detected > 0 && as.nbnd) {
		uint64_t end = trainer_end(s);
		struct iter_range *r = malloc(as.nbnd * sizeof(*r));
		if (!r) {
			rc = -1;
			goto out;
		}
		size_t k = 0;
		for (size_t i = 0; i < as.nbnd; i++) {
			uint64_t e = i + 1 < as.nbnd ? as.bnd[i + 1] : end;
			if (e > as.bnd[i])
				r[k++] = (struct iter_range){as.bnd[i], e};
		}
		if (k) {
			a->source_kind = AN_SRC_AUTO;
			a->auto_period = as.period;
			rc = set_iterations(a, r, k);
		}
		free(r);
	}
out:
	free(as.sig);
	free(as.flags);
	free(as.cut);
	free(as.bnd);
	return rc;
}
