/*
 * export_perfetto_events.c - the records of a trace as trace events of the
 * Perfetto export (export_perfetto_int.h): host calls as X slices, marks and
 * steps as instants, the device memory counter, and the GPU spans joined to
 * the launch, copy or memset that queued them, with a flow arrow between.
 *
 * Divided into:
 *   1. writing one trace event (common members, args from fields.def),
 *   2. host records: calls as X slices, marks/steps as instants, the memory counter,
 *   3. the GPU track: joining gpu_span to its op, flow arrows, the modelled spans
 *      of untimed launches (gpu_model.h), slices written in begin order.
 */
#include "export_perfetto_int.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "gpu_model.h"
#include "util.h"

/* ------------------------------------------------------ 1. one event */

int64_t rel(const struct ex *x, uint64_t ns)
{
	return sat_sub(sat_add(clamp_ns(ns), x->hosts[x->fi->host].offset_ns), x->zero);
}

/* Does [b, e] (document time) overlap the window? */
int in_window(const struct ex *x, int64_t b, int64_t e)
{
	return e >= x->from && b <= x->to;
}

/* Microseconds with exact nanoseconds: ns / 1000 has at most 15 digits below 11 days from ts 0. */
void export_put_us(struct jsonw *w, const char *key, int64_t ns)
{
	jw_key(w, key);
	if (ns % 1000 == 0)
		jw_i64(w, ns / 1000);
	else
		jw_double(w, (double)ns / 1000.0);
}

/* Does name begin with word, followed by its end or a space? */
static int first_word_is(const char *name, const char *word)
{
	size_t n = strlen(word);
	return !strncmp(name, word, n) && (name[n] == 0 || name[n] == ' ');
}

/*
 * Does the name's first word hold the category, case aside ("cudaLaunchKernel"
 * holds "launch", "cudaStreamSynchronize" "sync")? Then the category says nothing
 * the name does not: left out (15 bytes a launch, the commonest record).
 */
static int cat_in_name(const char *name, const char *cat)
{
	size_t n = strlen(cat), len = strcspn(name, " ");
	for (size_t i = 0; i + n <= len; i++)
		if (!strncasecmp(name + i, cat, n))
			return 1;
	return 0;
}

/*
 * Opens the event object: ph, name, cat, pid, tid, ts; the caller adds the rest and
 * closes it. Left out, as a reader takes them to be (docs/export.md, "Size"): the
 * category when the name's first word holds it ("read /data/x": cat "read";
 * "cudaLaunchKernel k": "launch"), the tid of a process's main thread (Perfetto
 * takes the pid).
 */
static void ev_open(struct ex *x, const char *ph, const char *name, const char *cat, uint32_t pid, uint32_t tid,
		    int64_t ts)
{
	struct jsonw *w = &x->w;
	jw_obj_begin(w);
	jw_kstr(w, "ph", ph);
	if (name)
		jw_kstr(w, "name", name);
	if (cat && !(name && cat_in_name(name, cat)))
		jw_kstr(w, "cat", cat);
	jw_ku64(w, "pid", pid);
	if (tid != pid)
		jw_ku64(w, "tid", tid);
	export_put_us(w, "ts", ts);
	x->st->events++;
}

/*
 * Is the field worth its bytes? A document is mostly args, so what a reader can
 * take as known is left out (docs/export.md, "Arguments"): a number or pointer
 * that is 0, a string the trace does not have, a copy direction or host memory
 * kind that is unknown, the fd type "file" and the source "libc" (the common
 * cases), and the path when the slice's name already holds it.
 */
/* Launches, copies and memsets: the kinds whose op id binds an arrow to their GPU slice. */
static int flow_kind(unsigned kind)
{
	return kind == SP_K_LAUNCH || kind == SP_K_COPY || kind == SP_K_MEMSET;
}

/* Did call_name put the record's path in its name ("<call> <path>")? */
static int path_in(const struct sp_event *ev, const char *name)
{
	return (ev->mask >> SP_F_PATH) & 1 && ev->f[SP_F_PATH] && strchr(name, ' ') &&
	       ev->kind != SP_K_RANGE && ev->kind != SP_K_MARK && ev->kind != SP_K_NVTX_MARK &&
	       ev->kind != SP_K_STEP && ev->kind != SP_K_FORK && ev->kind != SP_K_LOST && ev->kind != SP_K_ALLOC_FAILED;
}

/* Does call_name put the launch's kernel in its name ("<call> <kernel>")? */
static int kernel_in(const struct ex *x, const struct sp_event *ev)
{
	return ev->kind == SP_K_LAUNCH && (ev->mask >> SP_F_NAME) & 1 && str_or(x, ev->f[SP_F_NAME], NULL);
}

static int field_shown(struct ex *x, const struct sp_event *ev, unsigned f, const char *name)
{
	uint64_t v = ev->f[f];
	const char *str;
	if (f == SP_F_FD) /* -1: the call has none (stat); a file's is its path, in the name */
		return (int64_t)v >= 0 && !path_in(ev, name);
	if (f == SP_F_OP) /* the flow's bind_id holds it */
		return v && !flow_kind(ev->kind);
	switch (sp_field_type[f]) {
	case SP_T_STR:
		str = v ? sp_reader_string(x->r, (uint32_t)v) : NULL;
		if (!str)
			return 0;
		if (f == SP_F_NAME && kernel_in(x, ev))
			return 0;
		return f != SP_F_PATH || !path_in(ev, name);
	case SP_T_FDTYPE:
		return v != SP_FDTYPE_FILE;
	case SP_T_SOURCE:
		return v != SP_SOURCE_LIBC;
	default:
		return v != 0;
	}
}

/* A record's fields as args, by fields.def: strings resolved, enumerations by name. */
static void put_field(struct ex *x, const struct sp_event *ev, unsigned f)
{
	struct jsonw *w = &x->w;
	uint64_t v = ev->f[f];
	jw_key(w, sp_field_name[f]);
	switch (sp_field_type[f]) {
	case SP_T_I:
		jw_i64(w, (int64_t)v);
		break;
	case SP_T_HEX:
		jw_hex(w, v);
		break;
	case SP_T_STR: {
		const char *s = v ? sp_reader_string(x->r, (uint32_t)v) : NULL;
		jw_str(w, s); /* null: no string, or one the trace lost */
		break;
	}
	case SP_T_DIR:
		jw_str(w, v < SP_DIR__COUNT ? sp_dir_name[v] : "?");
		break;
	case SP_T_HOSTMEM:
		jw_str(w, v < SP_HOSTMEM__COUNT ? sp_hostmem_name[v] : "?");
		break;
	case SP_T_FDTYPE:
		jw_str(w, v < SP_FDTYPE__COUNT ? sp_fdtype_name[v] : "?");
		break;
	case SP_T_SOURCE:
		jw_str(w, v < SP_SOURCE__COUNT ? sp_source_name[v] : "?");
		break;
	default:
		jw_u64(w, v);
	}
}

/* The args of a host record named name: the API when the name does not say it, the fields shown. */
static void put_args(struct ex *x, const struct sp_event *ev, const char *name)
{
	struct jsonw *w = &x->w;
	int open = 0;
	if (ev->api && ev->api < SP_API__COUNT && !first_word_is(name, sp_api_name[ev->api])) {
		jw_kobj_begin(w, "args");
		open = 1;
		jw_kstr(w, "api", sp_api_name[ev->api]);
	}
	for (unsigned f = 0; f < SP_F__COUNT; f++) {
		if (!((ev->mask >> f) & 1) || !field_shown(x, ev, f, name))
			continue;
		if (!open++)
			jw_kobj_begin(w, "args");
		put_field(x, ev, f);
	}
	if (open)
		jw_obj_end(w);
}

const char *str_or(const struct ex *x, uint64_t id, const char *dflt)
{
	const char *s = id ? sp_reader_string(x->r, (uint32_t)id) : NULL;
	return s && *s ? s : dflt;
}

/* ------------------------------------------------------ 2. host records */

static int is_instant_kind(unsigned kind)
{
	return kind == SP_K_MARK || kind == SP_K_STEP || kind == SP_K_NVTX_MARK || kind == SP_K_FORK ||
	       kind == SP_K_LOST;
}

static const char *call_name(const struct ex *x, const struct sp_event *ev, char *buf, size_t len)
{
	const char *base = ev->api && ev->api < SP_API__COUNT ? sp_api_name[ev->api] : sp_kind_name[ev->kind];
	switch (ev->kind) {
	case SP_K_RANGE:
		return str_or(x, ev->f[SP_F_NAME], "range");
	case SP_K_MARK:
	case SP_K_NVTX_MARK:
		return str_or(x, ev->f[SP_F_NAME], sp_kind_name[ev->kind]);
	case SP_K_STEP:
		snprintf(buf, len, "step %" PRIu64, ev->f[SP_F_VALUE]);
		return buf;
	case SP_K_FORK:
		snprintf(buf, len, "fork: child %" PRId64, (int64_t)ev->f[SP_F_PID]);
		return buf;
	case SP_K_LOST:
		snprintf(buf, len, "lost %" PRIu64 " records", ev->f[SP_F_COUNT]);
		return buf;
	case SP_K_ALLOC_FAILED: {
		/* the one call a user looks for after an OOM: it must stand out by name */
		char b[32];
		snprintf(buf, len, "%s failed (%s)", base, util_fmt_bytes(ev->f[SP_F_BYTES], b, sizeof(b)));
		return buf;
	}
	default:
		break;
	}
	if (kernel_in(x, ev)) {
		/* as a path: the kernel in the name, not in an arg (about 26 bytes a launch) */
		snprintf(buf, len, "%s %s", base, str_or(x, ev->f[SP_F_NAME], ""));
		return buf;
	}
	if ((ev->mask >> SP_F_PATH) & 1) {
		const char *p = str_or(x, ev->f[SP_F_PATH], NULL);
		if (p) {
			snprintf(buf, len, "%s %s", base, p);
			return buf;
		}
	}
	return base;
}

/* The slice's category: what a user filters on (the kind; NVTX ranges "nvtx"). */
static const char *call_cat(unsigned kind)
{
	return kind == SP_K_RANGE || kind == SP_K_NVTX_MARK ? "nvtx" : sp_kind_name[kind];
}

static void memory_counter(struct ex *x, const struct sp_event *ev, uint32_t opid, uint32_t otid)
{
	char name[48];
	snprintf(name, sizeof(name), "GPU %u memory", (unsigned)ev->f[SP_F_DEVICE]);
	ev_open(x, "C", name, "memory", opid, otid, rel(x, ev->end_ns));
	jw_kobj_begin(&x->w, "args");
	jw_ku64(&x->w, "live_bytes", ev->f[SP_F_LIVE]);
	jw_obj_end(&x->w);
	jw_obj_end(&x->w);
}

/*
 * The arrow from a call to its GPU slice: Perfetto's flow events of version 2, a
 * "bind_id" on both slices ("flow_out" on the call's, "flow_in" on the GPU one's),
 * not two flow events of their own (about 190 bytes an op less). The id is the
 * file's index and the op id: a call and its span are in the same file.
 */
static uint64_t flow_id(const struct ex *x, uint32_t op)
{
	return (uint64_t)(x->fi - x->files) << 32 | op;
}

static void flow_bind(struct ex *x, const struct sp_event *ev)
{
	if (!flow_kind(ev->kind) || !ev->f[SP_F_OP])
		return;
	jw_ku64(&x->w, "bind_id", flow_id(x, (uint32_t)ev->f[SP_F_OP]));
	jw_kbool(&x->w, "flow_out", 1);
}

void host_record(struct ex *x, const struct sp_event *ev, uint32_t opid, uint32_t otid)
{
	char buf[SP_MAX_STRING + 64];
	const char *name = call_name(x, ev, buf, sizeof(buf));
	if (is_instant_kind(ev->kind)) {
		ev_open(x, "i", name, call_cat(ev->kind), opid, otid, rel(x, ev->begin_ns));
		jw_kstr(&x->w, "s", "t");
	} else {
		ev_open(x, "X", name, call_cat(ev->kind), opid, otid, rel(x, ev->begin_ns));
		export_put_us(&x->w, "dur", (int64_t)(ev->end_ns - ev->begin_ns));
	}
	put_args(x, ev, name);
	flow_bind(x, ev);
	jw_obj_end(&x->w);
	if ((ev->kind == SP_K_ALLOC || ev->kind == SP_K_FREE) && ((ev->mask >> SP_F_LIVE) & 1))
		memory_counter(x, ev, opid, otid);
}

/* --------------------------------------------------------- 3. GPU track */

static const char *gpu_name(const struct ex *x, const struct op *o, char *buf, size_t len)
{
	char b[32];
	switch (o->kind) {
	case SP_K_LAUNCH:
		return str_or(x, o->name, o->api < SP_API__COUNT && o->api ? sp_api_name[o->api] : "kernel");
	case SP_K_COPY: {
		const char *d = o->dir && o->dir < SP_DIR__COUNT ? sp_dir_name[o->dir] : "copy";
		char up[8];
		size_t i = 0;
		for (; d[i] && i < sizeof(up) - 1; i++)
			up[i] = (char)(d[i] >= 'a' && d[i] <= 'z' ? d[i] - 32 : d[i]);
		up[i] = 0;
		snprintf(buf, len, "%s %s", up, util_fmt_bytes(o->bytes, b, sizeof(b)));
		return buf;
	}
	case SP_K_MEMSET:
		snprintf(buf, len, "memset %s", util_fmt_bytes(o->bytes, b, sizeof(b)));
		return buf;
	default:
		snprintf(buf, len, "op %" PRIu32, o->op);
		return buf;
	}
}

/*
 * Write the GPU slice g: [b, e) of op on device, call its launch/copy/memset
 * (has_call: else unknown). A flow arrow goes from the middle of the call to the
 * middle of the span: Perfetto binds a flow end to the slice enclosing its time.
 */
static void slice_write(struct ex *x, const struct gslice *g)
{
	struct jsonw *w = &x->w;
	char buf[SP_MAX_STRING + 64];
	struct op anon = {.op = g->op};
	const struct op *call = g->has_call ? &g->call : NULL;
	const struct op *o = call ? call : &anon;
	uint32_t opid = out_id(x, g->pid);
	/* the span's length from the record (se - sb wraps back to it), not from two clamped ends */
	int64_t b = rel(x, g->b), e = sat_add(b, clamp_ns(g->e - g->b));
	if (!in_window(x, b, e))
		return;
	uint32_t tid = gpu_lane(x, opid, g->device, b, e);

	/* no category: the track, "GPU <device>", holds nothing else (12 bytes a slice) */
	ev_open(x, "X", gpu_name(x, o, buf, sizeof(buf)), NULL, opid, tid, b);
	export_put_us(w, "dur", e - b);
	/*
	 * What the call's slice does not already say: the op of a span without a call
	 * (else the flow's bind_id holds it) and the stream. A copy's bytes are on
	 * the call and in the name, the time the op queued is the arrow's gap: left
	 * out, as they cost a quarter of a kernel's slice. A modelled span says so.
	 */
	if (!call || o->stream || g->modelled) {
		jw_kobj_begin(w, "args");
		if (!call)
			jw_ku64(w, "op", g->op);
		else if (o->stream)
			jw_khex(w, "stream", o->stream);
		if (g->modelled)
			jw_kbool(w, "modelled", 1);
		jw_obj_end(w);
	}
	x->st->gpu_spans++;
	x->st->gpu_modelled += g->modelled;
	if (call) {
		jw_ku64(w, "bind_id", flow_id(x, g->op));
		jw_kbool(w, "flow_in", 1);
	} else {
		x->st->gpu_unjoined++;
	}
	jw_obj_end(w);
}

/* By begin; of two with one begin the longer first, so that it encloses the other on a lane. */
static int slice_cmp(const void *pa, const void *pb)
{
	const struct gslice *a = pa, *b = pb;
	if (a->b != b->b)
		return a->b < b->b ? -1 : 1;
	return a->e > b->e ? -1 : a->e < b->e;
}

/* Write the held-back slices that begin before bound (all: every one), in begin order; keep the others. */
static void slices_write(struct ex *x, uint64_t bound, int all)
{
	if (!x->npend)
		return;
	qsort(x->pend, x->npend, sizeof(*x->pend), slice_cmp);
	size_t k = 0;
	while (k < x->npend && (all || x->pend[k].b < bound))
		slice_write(x, &x->pend[k++]);
	memmove(x->pend, x->pend + k, (x->npend - k) * sizeof(*x->pend));
	x->npend -= k;
}

/*
 * The GPU slice [sb, se) of op on device, call its record (NULL when unknown):
 * held back, so that the modelled spans placed later take their place among
 * the measured ones in begin order, as a track's lanes want them (gpu_lane).
 */
static void gpu_slice(struct ex *x, int32_t pid, uint32_t op, unsigned device, uint64_t sb, uint64_t se,
		      const struct op *call, int modelled)
{
	if (!x->pend)
		x->pend = xcalloc(EXPORT_PENDING, sizeof(*x->pend));
	if (x->npend == EXPORT_PENDING) { /* a lag longer than the buffer: its older half goes out now */
		qsort(x->pend, x->npend, sizeof(*x->pend), slice_cmp);
		uint64_t mid = x->pend[EXPORT_PENDING / 2].b;
		slices_write(x, mid ? mid : 1, 0); /* one begin throughout (a damaged file's): some go all the same */
		if (x->npend == EXPORT_PENDING)
			slices_write(x, 0, 1);
	}
	struct gslice *g = &x->pend[x->npend++];
	x->held++;
	*g = (struct gslice){.b = sb,
			     .e = se,
			     .pid = pid,
			     .op = op,
			     .device = (uint8_t)device,
			     .has_call = call != NULL,
			     .modelled = (uint8_t)modelled};
	if (call)
		g->call = *call;
}

/*
 * The model of the untimed launches (gpu_model.h), fed as the analysis feeds
 * it (analyze_attr.c): with STEPPROF_KERNEL_TIMING=auto only a sample of
 * launches has a measured span, every other one is drawn where the model
 * places it, marked "modelled". One model per process of the file that
 * queues GPU work (EXPORT_MODELS at most).
 */
static struct xmodel *xmodel_of(struct ex *x, int32_t pid, int make)
{
	for (unsigned i = 0; i < x->nmodels; i++)
		if (x->models[i].pid == pid)
			return &x->models[i];
	if (!make || x->nmodels == EXPORT_MODELS)
		return NULL;
	struct gmodel *m = gm_new();
	if (!m) {
		util_err(NULL, "out of memory");
		exit(SP_EXIT_INTERNAL);
	}
	struct xmodel *xm = &x->models[x->nmodels++];
	memset(xm, 0, sizeof(*xm));
	xm->pid = pid;
	xm->m = m;
	return xm;
}

static struct gmodel *model_of(struct ex *x, int32_t pid, int make)
{
	struct xmodel *xm = xmodel_of(x, pid, make);
	return xm ? xm->m : NULL;
}

/*
 * Where to cut the model's queues for a horizon: just after the latest sync of
 * the process that returned by then. A run of untimed launches is fitted to
 * the anchor that follows it (gm_resolve): cut at a sync, each run has its
 * anchor; cut anywhere, the run in progress would be placed without it and may
 * overlap the measured span that bounds it. No such sync: the horizon.
 */
static uint64_t model_force(const struct xmodel *xm, uint64_t horizon)
{
	if (horizon == UINT64_MAX)
		return horizon;
	uint64_t best = 0;
	unsigned n = xm->nsync < XMODEL_SYNCS ? xm->nsync : XMODEL_SYNCS;
	for (unsigned i = 0; i < n; i++)
		if (xm->sync_end[i] < horizon && xm->sync_end[i] >= best)
			best = xm->sync_end[i] + 1;
	return best ? best : horizon;
}

/* The begin of a measured span to show: the model's correction (gm_span), the one the analysis counts. */
static uint64_t model_span(struct ex *x, int32_t pid, uint32_t op, uint64_t gb, uint64_t ge)
{
	struct gmodel *m = model_of(x, pid, 0);
	return m ? gm_span(m, op, gb, ge) : gb;
}

struct emit_ctx {
	struct ex *x;
	int32_t pid;
};

static void emit_modelled(void *arg, const struct gm_modelled *s)
{
	struct emit_ctx *c = arg;
	struct op call = {.op = s->op,
			  .pid = c->pid,
			  .state = OP_CALL,
			  .kind = SP_K_LAUNCH,
			  .device = (uint8_t)s->dev,
			  .name = s->name,
			  .stream = s->stream};
	gpu_slice(c->x, c->pid, s->op, s->dev, s->b, s->e, &call, 1);
}

/*
 * Model the launches issued before force, then write the slices that begin well
 * before it: a span measured later than that (its launch issued about force) is
 * rare, and would only take a lane of its own.
 */
static void models_resolve(struct ex *x, uint64_t force, uint64_t slack)
{
	uint64_t low = force; /* the earliest cut: a slice may still come from past it */
	for (unsigned i = 0; i < x->nmodels; i++) {
		struct emit_ctx c = {x, x->models[i].pid};
		uint64_t f = model_force(&x->models[i], force);
		gm_resolve(x->models[i].m, f, emit_modelled, &c);
		if (f < low)
			low = f;
	}
	slices_write(x, low > slack ? low - slack : 0, force == UINT64_MAX);
	x->resolved = force;
	x->held = 0;
}

/*
 * Records come by begin time but for a bounded lateness (GPU spans read back at
 * the program's syncs), and a span comes after its call by the GPU's backlog
 * too (gpu_span): a launch is modelled once the newest begin is past it by the
 * larger of EXPORT_MODEL_LAG_NS and four times the worst of both seen, so that
 * its measured span, if it has one, has come.
 */
void gpu_model_record(struct ex *x, const struct sp_event *ev)
{
	if (ev->begin_ns > x->maxbegin)
		x->maxbegin = ev->begin_ns;
	else if (x->maxbegin - ev->begin_ns > x->maxlate)
		x->maxlate = x->maxbegin - ev->begin_ns;
	uint32_t op = (uint32_t)ev->f[SP_F_OP];
	switch (ev->kind) {
	case SP_K_LAUNCH:
	case SP_K_MEMSET:
	case SP_K_COPY: {
		if (!op || (int64_t)ev->f[SP_F_RESULT] != 0)
			break;
		/* a copy queued before the first launch bounds where that launch can begin: fed too */
		struct gmodel *m = model_of(x, ev->pid, 1);
		x->held += m != NULL;
		if (m && gm_op(m, (unsigned)ev->f[SP_F_DEVICE], ev->f[SP_F_STREAM], op, ev->kind == SP_K_LAUNCH,
			       (uint32_t)ev->f[SP_F_NAME], ev->begin_ns, ev->end_ns)) {
			util_err(NULL, "out of memory");
			exit(SP_EXIT_INTERNAL);
		}
		break;
	}
	case SP_K_SYNC: {
		const char *api = ev->api < SP_API__COUNT ? sp_api_name[ev->api] : "";
		struct xmodel *xm = strstr(api, "Synchronize") ? xmodel_of(x, ev->pid, 0) : NULL;
		int kind = gm_sync_kind(api);
		if (xm &&
		    gm_sync(xm->m, (unsigned)ev->f[SP_F_DEVICE], ev->f[SP_F_STREAM], kind, ev->begin_ns, ev->end_ns)) {
			util_err(NULL, "out of memory");
			exit(SP_EXIT_INTERNAL);
		}
		if (xm && kind != GM_SYNC_OTHER) /* an event's sync bounds no stream: no cut there */
			xm->sync_end[xm->nsync++ % XMODEL_SYNCS] = ev->end_ns;
		break;
	}
	default:
		break;
	}
	/*
	 * Every quarter lag; or sooner, when more than EXPORT_MODEL_HELD ops came
	 * since (a launch-bound program, 200 k launches a second), with the lag the
	 * lateness seen asks for: memory follows the lateness, not the launch rate.
	 */
	uint64_t late = x->maxlate > UINT64_MAX / 4 ? UINT64_MAX : 4 * x->maxlate; /* a damaged file's: at its end */
	uint64_t lag = late > EXPORT_MODEL_LAG_NS ? late : EXPORT_MODEL_LAG_NS;
	if (x->maxbegin > lag && x->maxbegin - lag >= x->resolved + lag / 4)
		models_resolve(x, x->maxbegin - lag, lag / 4);
	else if (x->held > EXPORT_MODEL_HELD && x->maxbegin > late && x->maxbegin - late > x->resolved)
		models_resolve(x, x->maxbegin - late, 0);
}

static struct op *op_slot(struct ex *x, int32_t pid, uint32_t op)
{
	x->ops_dirty = 1;
	return &x->ops[(op ^ (uint32_t)mix((uint32_t)pid)) & (EXPORT_OP_WINDOW - 1)];
}

/* A launch/copy/memset with an op id: its span may already wait, else remember it. */
void gpu_call(struct ex *x, const struct sp_event *ev)
{
	uint32_t op = (uint32_t)ev->f[SP_F_OP];
	struct op *s = op_slot(x, ev->pid, op);
	struct op c = {.op = op,
		       .pid = ev->pid,
		       .tid = ev->tid,
		       .state = OP_CALL,
		       .kind = ev->kind,
		       .dir = (uint8_t)ev->f[SP_F_DIRECTION],
		       .hostmem = (uint8_t)ev->f[SP_F_HOST_MEMORY],
		       .device = (uint8_t)ev->f[SP_F_DEVICE],
		       .api = ev->api,
		       .name = (uint32_t)ev->f[SP_F_NAME],
		       .bytes = ev->f[SP_F_BYTES],
		       .stream = ev->f[SP_F_STREAM],
		       .b = ev->begin_ns,
		       .e = ev->end_ns};
	if (s->state == OP_SPAN && s->op == op && s->pid == ev->pid) {
		gpu_slice(x, s->pid, op, s->device, model_span(x, s->pid, op, s->b, s->e), s->e, &c, 0);
		s->state = OP_EMPTY;
		return;
	}
	if (s->state == OP_SPAN) /* a span whose op fell out of the window: shown unnamed */
		gpu_slice(x, s->pid, s->op, s->device, s->b, s->e, NULL, 0);
	*s = c;
}

void gpu_span(struct ex *x, const struct sp_event *ev)
{
	uint32_t op = (uint32_t)ev->f[SP_F_OP];
	unsigned dev = (unsigned)ev->f[SP_F_DEVICE];
	struct op *s = op_slot(x, ev->pid, op);
	if (s->state == OP_CALL && s->op == op && s->pid == ev->pid) {
		/*
		 * How long after its call a span comes, in the records' time: the GPU's
		 * backlog and the readback's delay. A launch is modelled only past that
		 * (gpu_model_record), else its span, still to come, would be drawn twice.
		 */
		if (x->maxbegin > s->e && x->maxbegin - s->e > x->maxlate)
			x->maxlate = x->maxbegin - s->e;
		gpu_slice(x, ev->pid, op, dev, model_span(x, ev->pid, op, ev->begin_ns, ev->end_ns), ev->end_ns, s, 0);
		s->state = OP_EMPTY;
		return;
	}
	if (s->state == OP_SPAN)
		gpu_slice(x, s->pid, s->op, s->device, s->b, s->e, NULL, 0);
	/* Its call may come later (another thread's record merged after it): wait in the window. */
	*s = (struct op){
	    .op = op, .pid = ev->pid, .state = OP_SPAN, .device = (uint8_t)dev, .b = ev->begin_ns, .e = ev->end_ns};
}

/*
 * End of a file: spans whose call never came are shown unnamed; the window is
 * cleared; every launch left is modelled, every slice written, the models freed.
 */
void gpu_flush(struct ex *x)
{
	if (x->ops_dirty) {
		for (size_t i = 0; i < EXPORT_OP_WINDOW; i++)
			if (x->ops[i].state == OP_SPAN)
				gpu_slice(x, x->ops[i].pid, x->ops[i].op, x->ops[i].device, x->ops[i].b, x->ops[i].e,
					  NULL, 0);
		memset(x->ops, 0, EXPORT_OP_WINDOW * sizeof(*x->ops));
		x->ops_dirty = 0;
	}
	models_resolve(x, UINT64_MAX, 0);
	for (unsigned i = 0; i < x->nmodels; i++)
		gm_free(x->models[i].m);
	x->nmodels = 0;
	x->maxbegin = x->maxlate = x->resolved = 0;
}
