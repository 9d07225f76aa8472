/*
 * gpu_model.c - modelled GPU time of untimed launches (gpu_model.h).
 *
 *   1. samples: each kernel's measured durations, by kernel name
 *   2. queues: the trainer's ops and syncs per (device, stream), in issue order
 *   3. resolution: placement, then the fit to the anchor that follows
 */
#include "gpu_model.h"

#include <stdlib.h>
#include <string.h>

#include "hashmap.h"

/*
 * A sync that took longer than this blocked: the stream was busy until it
 * returned. An op that began this long after its call returned waited for the
 * ops before it on its stream: they ended when it began.
 */
#define GM_TIGHT_NS 20000ull
#define GM_SAMPLES 32u /* kept per kernel, the newest */
#define GM_WIN 8u      /* samples averaged around a launch */
#define GM_QUEUES 64u  /* streams modelled (more: their launches stay unmodelled) */
#define GM_OPRING 65536u

/* ---------------------------------------------------------------- 1. samples */

struct kern {
	unsigned n, next; /* samples held (<= GM_SAMPLES), where the next one goes */
	uint64_t t[GM_SAMPLES], d[GM_SAMPLES]; /* the launch's return, the kernel's duration */
};

/*
 * The median duration of the GM_WIN samples nearest to t in launch order: the
 * samples of a kernel arrive nearly in launch order, so the nearest are around
 * the newest one launched before t. Centred, because the analysis is post
 * mortem: a kernel whose duration changes at t is modelled from both sides
 * only within GM_WIN / 2 samples of t. The median, not the mean: a sample
 * whose launch call was preempted (tens of microseconds instead of a few) has
 * its submission, and so its duration, far off.
 */
static uint64_t kern_predict(const struct kern *k, uint64_t t)
{
	unsigned n = k->n, first = k->n < GM_SAMPLES ? 0 : k->next; /* oldest */
#define AT(i) ((first + (i)) % GM_SAMPLES)
	unsigned j = n; /* the first sample launched after t */
	while (j > 0 && k->t[AT(j - 1)] > t)
		j--;
	unsigned lo = j > GM_WIN / 2 ? j - GM_WIN / 2 : 0, hi = lo + GM_WIN;
	if (hi > n) {
		hi = n;
		lo = hi > GM_WIN ? hi - GM_WIN : 0;
	}
	uint64_t v[GM_WIN];
	unsigned m = 0;
	for (unsigned i = lo; i < hi; i++) {
		uint64_t d = k->d[AT(i)], x = m;
		while (x > 0 && v[x - 1] > d) { /* insertion sort: GM_WIN values */
			v[x] = v[x - 1];
			x--;
		}
		v[x] = d;
		m++;
	}
#undef AT
	if (!m)
		return 0;
	return m % 2 ? v[m / 2] : (v[m / 2 - 1] + v[m / 2]) / 2;
}

/* ----------------------------------------------------------------- 2. queues */

/*
 * QE_SYNC: a sync of the stream; QE_DSYNC: of the device; QE_POINT: another
 * blocking sync of the trainer (an event's), which bounds nothing here but
 * reads timed ops back as the others do.
 */
enum { QE_LAUNCH, QE_OTHER, QE_SYNC, QE_DSYNC, QE_POINT };

struct qe {
	uint64_t t0, t1; /* the call (a sync: [s0, s1)) */
	uint64_t gb, ge; /* measured span */
	uint32_t op, name;
	uint8_t type, measured;
};

struct queue {
	unsigned dev;
	uint64_t stream;
	struct qe *v;
	size_t head, n, cap;
	uint64_t base;	  /* the sequence number of v[head] */
	uint64_t cur_end; /* where the stream's GPU work placed so far ends */
};

struct gmodel {
	struct queue q[GM_QUEUES];
	unsigned nq;
	struct hashmap kerns; /* name id -> struct kern * */
	struct opslot {
		uint32_t op;
		uint16_t q;
		uint8_t modelled; /* its launch got a modelled span */
		uint64_t seq;
	} *opr;
	struct gm_stats st;
};

struct gmodel *gm_new(void)
{
	struct gmodel *m = calloc(1, sizeof(*m));
	if (m && !(m->opr = calloc(GM_OPRING, sizeof(*m->opr)))) {
		free(m);
		m = NULL;
	}
	return m;
}

void gm_free(struct gmodel *m)
{
	if (!m)
		return;
	for (unsigned i = 0; i < m->nq; i++)
		free(m->q[i].v);
	size_t pos = 0;
	union hashmap_val *v;
	while ((v = hashmap_next(&m->kerns, &pos, NULL)))
		free(v->p);
	hashmap_free(&m->kerns);
	free(m->opr);
	free(m);
}

const struct gm_stats *gm_stats(const struct gmodel *m)
{
	return &m->st;
}

static struct queue *queue_of(struct gmodel *m, unsigned dev, uint64_t stream, int make)
{
	for (unsigned i = 0; i < m->nq; i++)
		if (m->q[i].dev == dev && m->q[i].stream == stream)
			return &m->q[i];
	if (!make || m->nq == GM_QUEUES)
		return NULL;
	struct queue *q = &m->q[m->nq++];
	*q = (struct queue){.dev = dev, .stream = stream};
	return q;
}

static struct qe *at(struct queue *q, size_t i)
{
	return &q->v[(q->head + i) % q->cap];
}

static struct qe *push(struct queue *q)
{
	if (q->n == q->cap) {
		size_t cap = q->cap ? 2 * q->cap : 64;
		struct qe *v = malloc(cap * sizeof(*v));
		if (!v)
			return NULL;
		for (size_t i = 0; i < q->n; i++)
			v[i] = *at(q, i);
		free(q->v);
		q->v = v;
		q->head = 0;
		q->cap = cap;
	}
	struct qe *e = at(q, q->n++);
	memset(e, 0, sizeof(*e));
	return e;
}

static void pop(struct queue *q, size_t k)
{
	q->head = (q->head + k) % (q->cap ? q->cap : 1);
	q->n -= k;
	q->base += k;
}

int gm_op(struct gmodel *m, unsigned dev, uint64_t stream, uint32_t op, int launch, uint32_t name, uint64_t t0,
	  uint64_t t1)
{
	struct queue *q = queue_of(m, dev, stream, 1);
	struct qe *e = q ? push(q) : NULL;
	if (!e)
		return q ? -1 : 0; /* out of memory, or too many streams: not modelled */
	e->type = launch ? QE_LAUNCH : QE_OTHER;
	e->op = op;
	e->name = name;
	e->t0 = t0;
	e->t1 = t1;
	m->opr[op % GM_OPRING] = (struct opslot){.op = op, .q = (uint16_t)(q - m->q), .seq = q->base + q->n - 1};
	return 0;
}

int gm_sync(struct gmodel *m, unsigned dev, uint64_t stream, int kind, uint64_t s0, uint64_t s1)
{
	for (unsigned i = 0; i < m->nq; i++) {
		struct queue *q = &m->q[i];
		if (q->dev != dev || (kind == GM_SYNC_STREAM && q->stream != stream) || !q->n)
			continue; /* nothing queued: nothing it could bound */
		struct qe *e = push(q);
		if (!e)
			return -1;
		e->type = kind == GM_SYNC_STREAM ? QE_SYNC : kind == GM_SYNC_DEVICE ? QE_DSYNC : QE_POINT;
		e->t0 = s0;
		e->t1 = s1;
	}
	return 0;
}

int gm_sync_kind(const char *api)
{
	return strstr(api, "DeviceSynchronize") || strstr(api, "CtxSynchronize") ? GM_SYNC_DEVICE
	       : strstr(api, "StreamSynchronize")				  ? GM_SYNC_STREAM
										  : GM_SYNC_OTHER;
}

/*
 * When a launch call submitted its kernel to the GPU: somewhere inside the
 * call, taken as its midpoint, the rule the preload's anchors follow for the
 * event they record (cuda_spans.c): host and GPU times are compared at the
 * same point of a call. A kernel cannot begin before it.
 */
static uint64_t submitted(const struct qe *e)
{
	return e->t0 + (e->t1 - e->t0) / 2;
}

static int is_sync(const struct qe *x);

/*
 * Measured ops and syncs at the head of q have nothing left to model or to
 * bound before them: gone at once (a trace whose launches are all timed keeps
 * its queues as short as the spans are late), the stream's end moved to the
 * measured ones'.
 */
static void pop_measured(struct queue *q)
{
	while (q->n && (at(q, 0)->measured || is_sync(at(q, 0)))) {
		if (at(q, 0)->measured && at(q, 0)->ge > q->cur_end)
			q->cur_end = at(q, 0)->ge;
		pop(q, 1);
	}
}

uint64_t gm_span(struct gmodel *m, uint32_t op, uint64_t gb, uint64_t ge)
{
	struct opslot *o = &m->opr[op % GM_OPRING];
	if (o->op != op || o->q >= m->nq)
		return gb;
	struct queue *q = &m->q[o->q];
	if (o->seq < q->base || o->seq - q->base >= q->n)
		return o->modelled ? GM_SPAN_DROP : gb; /* resolved already: a span later than the window */
	struct qe *e = at(q, o->seq - q->base);
	if (e->op != op || e->measured)
		return gb;
	if (ge < gb)
		ge = gb;
	if (e->type != QE_LAUNCH) {
		e->measured = 1;
		e->gb = gb;
		e->ge = ge;
		pop_measured(q);
		return gb;
	}
	union hashmap_val *v = hashmap_slot(&m->kerns, e->name, 1);
	struct kern *k = v ? v->p : NULL;
	if (v && !k)
		k = v->p = calloc(1, sizeof(*k));
	uint64_t sub = submitted(e);
	if (gb == e->t0) {
		/*
		 * A launch chained behind an op that had ended (an idle stream): its
		 * begin is the host's call, not the kernel's, which started once the
		 * call had submitted it. Its end is measured: its begin is that end
		 * less the kernel's duration (the samples'), never before the call;
		 * without samples yet, its submission. Not a sample itself.
		 */
		uint64_t d = k && k->n ? kern_predict(k, e->t1) : 0;
		uint64_t b = d ? (ge - e->t0 > d ? ge - d : e->t0) : sub;
		gb = b < ge ? b : ge;
	} else {
		/*
		 * A begin event recorded before the call, on an idle stream, is
		 * reached before the call has even submitted the kernel: the kernel
		 * began at its submission, unless the begin event waited for the ops
		 * before it past that (a busy stream: the kernel began where they
		 * ended).
		 */
		if (gb < sub)
			gb = sub < ge ? sub : ge;
		if (k) {
			k->t[k->next] = e->t1;
			k->d[k->next] = ge - gb;
			k->next = (k->next + 1) % GM_SAMPLES;
			if (k->n < GM_SAMPLES)
				k->n++;
		}
	}
	e->measured = 1;
	e->gb = gb;
	e->ge = ge;
	m->st.measured++;
	m->st.measured_ns += ge - gb;
	pop_measured(q);
	return gb;
}

/* ------------------------------------------------------------- 3. resolution */

/*
 * Fit the placed run [b[i], e[i]) to the anchor A that follows it: nothing
 * may end after A (the next op began there, or the sync returned); when A is
 * tight (the stream was busy up to it) the run's back-to-back tail is
 * stretched to end there, so that the stream's work between two anchors adds
 * up to what the anchors say, whatever the model's error.
 */
static void fit(uint64_t *b, uint64_t *e, const uint64_t *ready, size_t n, uint64_t floor, uint64_t A, int tight)
{
	if (!n)
		return;
	if (e[n - 1] > A) {
		uint64_t bound = A, d0[256], total = 0;
		for (size_t i = 0; i < n && i < 256; i++)
			total += d0[i] = e[i] - b[i];
		for (size_t i = n; i-- > 0;) {
			if (e[i] <= bound)
				break;
			uint64_t d = e[i] - b[i];
			e[i] = bound;
			b[i] = e[i] > d && e[i] - d > ready[i] ? e[i] - d : ready[i] < e[i] ? ready[i] : e[i];
			bound = b[i];
		}
		/*
		 * The run does not fit between where the stream's earlier work ended
		 * and the anchor: a stream runs one op at a time, so the run shares
		 * that interval, each op in proportion to its modelled duration.
		 */
		if (b[0] < floor && n <= 256 && total) {
			uint64_t avail = A > floor ? A - floor : 0, t = floor;
			for (size_t i = 0; i < n; i++) {
				b[i] = t;
				t = i + 1 < n ? t + (uint64_t)((double)d0[i] * (double)avail / (double)total) : floor + avail;
				e[i] = t;
			}
		}
		return;
	}
	if (!tight || e[n - 1] == A)
		return;
	size_t k = n - 1; /* the back-to-back tail: [k, n) */
	while (k > 0 && b[k] == e[k - 1])
		k--;
	uint64_t S = b[k], span = e[n - 1] - S;
	if (!span)
		return;
	double f = (double)(A - S) / (double)span;
	for (size_t i = k; i < n; i++) {
		b[i] = S + (uint64_t)((double)(b[i] - S) * f);
		e[i] = i + 1 < n ? S + (uint64_t)((double)(e[i] - S) * f) : A;
	}
	for (size_t i = k + 1; i < n; i++)
		b[i] = e[i - 1];
}

/* One run of untimed ops at the head of q, n entries, all issued before horizon. */
static void place_run(struct gmodel *m, struct queue *q, size_t n, const struct qe *anchor, gm_emit_fn emit, void *arg)
{
	enum { CHUNK = 256 };
	uint64_t b[CHUNK], e[CHUNK], ready[CHUNK];
	const struct qe *src[CHUNK]; /* the launch placed at b[i] (the queue is popped after the run) */
	size_t done = 0;
	while (done < n) {
		size_t c = 0;
		uint64_t floor = q->cur_end; /* where the stream's earlier work ended */
		for (; done < n && c < CHUNK; done++) {
			struct qe *x = at(q, done);
			if (x->type != QE_LAUNCH)
				continue; /* an untimed copy or memset: counted through its call, as before */
			struct kern *k = hashmap_get(&m->kerns, x->name);
			uint64_t d = k ? kern_predict(k, x->t1) : 0;
			if (!d) {
				m->st.unknown++;
				continue;
			}
			src[c] = x;
			ready[c] = submitted(x);
			b[c] = ready[c] > q->cur_end ? ready[c] : q->cur_end;
			e[c] = b[c] + d;
			if (m->opr[x->op % GM_OPRING].op == x->op)
				m->opr[x->op % GM_OPRING].modelled = 1;
			q->cur_end = e[c];
			c++;
		}
		/* the anchor fits the last chunk only: the chunks before it ended before the next one's ops */
		if (done == n && anchor) {
			int tight = 0;
			uint64_t A;
			if (anchor->type == QE_POINT) {
				A = UINT64_MAX;
			} else if (anchor->type == QE_SYNC || anchor->type == QE_DSYNC) {
				A = anchor->t1;
				tight = anchor->type == QE_SYNC && anchor->t1 - anchor->t0 > GM_TIGHT_NS;
			} else {
				A = anchor->gb;
				tight = anchor->gb > anchor->t0 + GM_TIGHT_NS; /* its begin event, recorded before its call, waited */
			}
			fit(b, e, ready, c, floor, A, tight);
			if (c)
				q->cur_end = e[c - 1];
		}
		for (size_t i = 0; i < c; i++)
			if (e[i] > b[i]) {
				m->st.modelled++;
				m->st.modelled_ns += e[i] - b[i];
				struct gm_modelled s = {.b = b[i],
							.e = e[i],
							.stream = q->stream,
							.op = src[i]->op,
							.name = src[i]->name,
							.dev = q->dev};
				emit(arg, &s);
			}
	}
}

static int is_sync(const struct qe *x)
{
	return x->type == QE_SYNC || x->type == QE_DSYNC || x->type == QE_POINT;
}

void gm_resolve(struct gmodel *m, uint64_t force, gm_emit_fn emit, void *arg)
{
	for (unsigned qi = 0; qi < m->nq; qi++) {
		struct queue *q = &m->q[qi];
		while (q->n) {
			struct qe *h = at(q, 0);
			if (h->t1 >= force)
				break;
			if (is_sync(h) || h->measured) {
				if (h->measured && h->ge > q->cur_end)
					q->cur_end = h->ge;
				pop(q, 1);
				continue;
			}
			size_t n = 0;
			while (n < q->n) {
				struct qe *x = at(q, n);
				if (x->measured || is_sync(x) || x->t1 >= force)
					break;
				n++;
			}
			const struct qe *anchor = NULL;
			if (n < q->n) {
				struct qe *x = at(q, n);
				if (is_sync(x) || x->measured)
					anchor = x;
			}
			place_run(m, q, n, anchor, emit, arg);
			pop(q, n);
		}
	}
}
