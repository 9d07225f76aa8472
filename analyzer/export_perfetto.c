/*
 * export_perfetto.c - stepprof traces as Chrome Trace Event Format JSON for
 * ui.perfetto.dev (export_perfetto.h, docs/export.md).
 *
 * Divided into:
 *   1. state: files, hosts, processes, threads, GPU lanes, the op window,
 *   2. the header pass: every file's header, the hosts' clocks and ts 0,
 *   3. writing one trace event (common members, args from fields.def),
 *   4. host records: calls as X slices, marks/steps as instants, the memory counter,
 *   5. the GPU track: joining gpu_span to its op, lanes, flow arrows,
 *   6. metadata: process and thread names (written last: they need the whole pass),
 *   7. the export.
 *
 * Ids: Perfetto keys threads by tid alone (and a tid seen under another pid starts
 * a new thread), so every track id written must be unique in the document. Pids
 * and tids are numbered as the analysis numbers pids (merge_pid_spaces, merge.h):
 * those of the first host as they are, those of the n-th further host with
 * n << 22 added (pid_max is at most 2^22), and a later process of a pid already
 * seen on its host (another pid namespace, a reused pid) in a space of its own,
 * so that `analyze` and `export` tell the same processes apart; the GPU tracks
 * take pseudo tids from 0x80000000 up.
 *
 * Time: ts and dur are microseconds with three decimals (exact nanoseconds),
 * counted from ts 0 = the earliest file start, so that the numbers stay short
 * and exact whatever the machine's uptime (otherData.ts_zero_mono_ns gives it
 * back). The files of another host are moved onto the first host's
 * CLOCK_MONOTONIC by the difference of the hosts' realtime-monotonic offsets
 * (as good as the hosts' NTP); the files of one host share one offset, so their
 * relative timing stays exact.
 */
#include "export_perfetto.h"

#include <errno.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include "jsonw.h"
#include "merge.h"
#include "reader.h"
#include "util.h"

/* ------------------------------------------------------------- 1. state */

#define MAX_HOSTS	512 /* clocks: hosts past it share the last one's offset */
#define PSEUDO_TID_BASE 0x80000000u
#define MAX_LANES	16
_Static_assert((uint64_t)MERGE_PID_SPACES << MERGE_PID_SHIFT <= PSEUDO_TID_BASE,
	       "the processes' ids stay below the GPU tracks' pseudo tids");

struct file_info {
	const char *path;
	int ok;
	int bpf;
	uint32_t host;		    /* its clock: x->hosts[host] */
	int32_t pid_off;	    /* added to its pids and tids (merge_pid_spaces) */
	struct sp_file_header *hdr; /* copy; strings made to end */
};

struct host {
	char name[64];
	int64_t offset_ns; /* add to this host's CLOCK_MONOTONIC to get the first host's */
};

/* A process: named from its file header, or "pid N" when only seen in records. */
struct proc {
	uint32_t opid; /* output pid (0 too: a damaged file's) */
	int used;      /* 0 = empty slot */
	int has_hdr;
	int32_t pid, ppid, rank;
	uint32_t host;
	char *cmdline;	    /* of its last image (a process that execs has a file per image) */
	uint64_t cmd_start; /* that image's start_mono_ns */
};

struct thread {
	uint32_t opid, otid; /* 0 too: a damaged file's */
	int used;	     /* 0 = empty slot */
	int32_t tid;
	uint64_t launches;
	char *name; /* from a THREAD record */
};

/* The GPU slices of one (process, device), spread over lanes so none overlap. */
struct lanes {
	uint32_t opid;
	uint32_t device;
	unsigned n;
	int64_t end[MAX_LANES];
	uint32_t tid[MAX_LANES];
};

/* A recent op (launch/copy/memset) waiting for its gpu_span, or a span waiting for its op. */
enum { OP_EMPTY, OP_CALL, OP_SPAN };
struct op {
	uint32_t op;
	int32_t pid, tid;
	uint8_t state, kind, dir, hostmem, device;
	uint16_t api;
	uint32_t name;
	uint64_t bytes, stream;
	uint64_t b, e; /* OP_CALL: the host call; OP_SPAN: the GPU span */
};

struct ex {
	struct jsonw w;
	struct export_stats *st;
	struct file_info *files;
	size_t nfiles;
	struct host hosts[MAX_HOSTS];
	unsigned nhosts;
	int64_t zero;	  /* first-host CLOCK_MONOTONIC of ts 0 */
	int64_t from, to; /* the window, relative to zero */

	/* the file being read */
	struct sp_reader *r;
	struct file_info *fi;

	struct proc *procs;
	size_t procs_cap, nprocs;
	struct thread *threads;
	size_t threads_cap, nthreads;
	struct lanes *lanes;
	size_t nlanes, lanes_cap;
	uint32_t next_pseudo;
	struct op *ops; /* EXPORT_OP_WINDOW entries */
	int ops_dirty;
	uint64_t next_flow;
	int werr; /* errno of the first failed write to the output, 0 none */
};

static void *xcalloc(size_t n, size_t sz)
{
	void *p = calloc(n ? n : 1, sz);
	if (!p) {
		util_err(NULL, "out of memory");
		exit(SP_EXIT_INTERNAL);
	}
	return p;
}

static char *xstrdup(const char *s)
{
	char *p = strdup(s ? s : "");
	if (!p) {
		util_err(NULL, "out of memory");
		exit(SP_EXIT_INTERNAL);
	}
	return p;
}

static uint64_t mix(uint64_t k)
{
	k *= 0x9e3779b97f4a7c15ull;
	return k ^ (k >> 29);
}

static uint32_t out_id(const struct ex *x, int32_t id)
{
	/* NOTE: a negative or huge id (untrusted bytes) is folded, never trusted to be small. */
	return ((uint32_t)id & (MERGE_PID_SPAN - 1)) + (uint32_t)x->fi->pid_off;
}

/* Open-addressed tables grown at half load: sizes follow processes and threads. */
static struct proc *proc_get(struct ex *x, uint32_t opid)
{
	if (2 * (x->nprocs + 1) > x->procs_cap) {
		size_t cap = x->procs_cap ? 2 * x->procs_cap : 64;
		struct proc *t = xcalloc(cap, sizeof(*t));
		for (size_t i = 0; i < x->procs_cap; i++) {
			if (!x->procs[i].used)
				continue;
			size_t j = mix(x->procs[i].opid) & (cap - 1);
			while (t[j].used)
				j = (j + 1) & (cap - 1);
			t[j] = x->procs[i];
		}
		free(x->procs);
		x->procs = t;
		x->procs_cap = cap;
	}
	size_t j = mix(opid) & (x->procs_cap - 1);
	while (x->procs[j].used && x->procs[j].opid != opid)
		j = (j + 1) & (x->procs_cap - 1);
	if (!x->procs[j].used) {
		x->procs[j].used = 1;
		x->procs[j].opid = opid;
		x->procs[j].rank = -1;
		x->nprocs++;
	}
	return &x->procs[j];
}

static struct thread *thread_get(struct ex *x, uint32_t opid, uint32_t otid, int32_t tid)
{
	if (2 * (x->nthreads + 1) > x->threads_cap) {
		size_t cap = x->threads_cap ? 2 * x->threads_cap : 256;
		struct thread *t = xcalloc(cap, sizeof(*t));
		for (size_t i = 0; i < x->threads_cap; i++) {
			if (!x->threads[i].used)
				continue;
			size_t j = mix((uint64_t)x->threads[i].opid << 32 | x->threads[i].otid) & (cap - 1);
			while (t[j].used)
				j = (j + 1) & (cap - 1);
			t[j] = x->threads[i];
		}
		free(x->threads);
		x->threads = t;
		x->threads_cap = cap;
	}
	size_t j = mix((uint64_t)opid << 32 | otid) & (x->threads_cap - 1);
	while (x->threads[j].used && !(x->threads[j].otid == otid && x->threads[j].opid == opid))
		j = (j + 1) & (x->threads_cap - 1);
	if (!x->threads[j].used) {
		x->threads[j].used = 1;
		x->threads[j].opid = opid;
		x->threads[j].otid = otid;
		x->threads[j].tid = tid;
		x->nthreads++;
		proc_get(x, opid); /* every thread's process gets a name */
	}
	return &x->threads[j];
}

/* ------------------------------------------------------ 2. header pass */

/*
 * Times are untrusted (a damaged file's can be anything up to 2^64-1): document time
 * is computed with saturating arithmetic, never a signed overflow.
 */
static int64_t sat_add(int64_t a, int64_t b)
{
	int64_t r;
	if (__builtin_add_overflow(a, b, &r))
		return b > 0 ? INT64_MAX : INT64_MIN;
	return r;
}

static int64_t sat_sub(int64_t a, int64_t b)
{
	int64_t r;
	if (__builtin_sub_overflow(a, b, &r))
		return b < 0 ? INT64_MAX : INT64_MIN;
	return r;
}

static int64_t clamp_ns(uint64_t ns)
{
	return ns > INT64_MAX ? INT64_MAX : (int64_t)ns;
}

static void header_pass(struct ex *x, int *rc)
{
	int64_t first_off = 0;
	int have_zero = 0;
	for (size_t i = 0; i < x->nfiles; i++) {
		struct file_info *fi = &x->files[i];
		struct sp_reader *r;
		int orc = util_reader_open(fi->path, &r);
		if (orc) { /* one line; a file never written (exit 3) is left out as analyze does */
			*rc = util_worse(*rc, orc);
			continue;
		}
		fi->ok = 1;
		fi->hdr = xcalloc(1, sizeof(*fi->hdr));
		*fi->hdr = *sp_reader_header(r);
		/*
		 * The file is created by the first record's call, which began before the header's
		 * start: the reader returns the earliest record first (threads merged by begin), so
		 * ts 0 is taken before it and the document's times are not negative.
		 */
		struct sp_event ev;
		uint64_t first = fi->hdr->start_mono_ns;
		if (sp_reader_next(r, &ev) && ev.begin_ns && ev.begin_ns < first)
			first = ev.begin_ns;
		sp_reader_close(r);
		struct sp_file_header *h = fi->hdr;
		h->host[sizeof(h->host) - 1] = 0;
		h->cmdline[sizeof(h->cmdline) - 1] = 0;
		fi->bpf = !!(h->features & SP_FEAT_BPF);

		/* realtime - monotonic of this file: the same for every file of a host, up to NTP slew */
		int64_t off = (int64_t)(h->start_real_ns - h->start_mono_ns);
		unsigned k = 0;
		while (k < x->nhosts && strcmp(x->hosts[k].name, h->host))
			k++;
		if (k == x->nhosts) {
			if (x->nhosts == MAX_HOSTS) {
				k = MAX_HOSTS - 1; /* NOTE: the clock of hosts past 512 may be off; ids stay apart */
			} else {
				x->nhosts++;
				snprintf(x->hosts[k].name, sizeof(x->hosts[k].name), "%s", h->host);
				if (k == 0)
					first_off = off;
				/* Only clocks that were both read: a header without realtime keeps its monotonic. */
				x->hosts[k].offset_ns =
				    k && h->start_real_ns && off != first_off ? sat_sub(off, first_off) : 0;
			}
		}
		fi->host = k;
		int64_t start = sat_add(clamp_ns(first), x->hosts[k].offset_ns);
		if (!have_zero || start < x->zero) {
			x->zero = start;
			have_zero = 1;
		}
	}
	x->st->ts_zero_ns = (uint64_t)x->zero;

	/* the pid spaces of the files read, numbered as the analysis numbers them */
	const struct sp_file_header **hdr = xcalloc(x->nfiles, sizeof(*hdr));
	int32_t *off = xcalloc(x->nfiles, sizeof(*off));
	size_t n = 0;
	for (size_t i = 0; i < x->nfiles; i++)
		if (x->files[i].ok)
			hdr[n++] = x->files[i].hdr;
	if (merge_pid_spaces(hdr, n, off)) {
		util_err(NULL, "out of memory");
		exit(SP_EXIT_INTERNAL);
	}
	for (size_t i = 0, k = 0; i < x->nfiles; i++)
		if (x->files[i].ok)
			x->files[i].pid_off = off[k++];
	free(hdr);
	free(off);
}

/* ------------------------------------------------------ 3. one event */

static int64_t rel(const struct ex *x, uint64_t ns)
{
	return sat_sub(sat_add(clamp_ns(ns), x->hosts[x->fi->host].offset_ns), x->zero);
}

/* Does [b, e] (document time) overlap the window? */
static int in_window(const struct ex *x, int64_t b, int64_t e)
{
	return e >= x->from && b <= x->to;
}

/* Microseconds with exact nanoseconds: ns / 1000 has at most 15 digits below 11 days from ts 0. */
static void put_us(struct jsonw *w, const char *key, int64_t ns)
{
	jw_key(w, key);
	if (ns % 1000 == 0)
		jw_i64(w, ns / 1000);
	else
		jw_double(w, (double)ns / 1000.0);
}

/* Opens the event object: ph, name, cat, pid, tid, ts; the caller adds the rest and closes it. */
static void ev_open(struct ex *x, const char *ph, const char *name, const char *cat, uint32_t pid, uint32_t tid,
		    int64_t ts)
{
	struct jsonw *w = &x->w;
	jw_obj_begin(w);
	jw_kstr(w, "ph", ph);
	if (name)
		jw_kstr(w, "name", name);
	if (cat)
		jw_kstr(w, "cat", cat);
	jw_ku64(w, "pid", pid);
	jw_ku64(w, "tid", tid);
	put_us(w, "ts", ts);
	x->st->events++;
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

static void put_args(struct ex *x, const struct sp_event *ev)
{
	struct jsonw *w = &x->w;
	jw_kobj_begin(w, "args");
	if (ev->api && ev->api < SP_API__COUNT)
		jw_kstr(w, "api", sp_api_name[ev->api]);
	for (unsigned f = 0; f < SP_F__COUNT; f++)
		if ((ev->mask >> f) & 1)
			put_field(x, ev, f);
	jw_obj_end(w);
}

static const char *str_or(const struct ex *x, uint64_t id, const char *dflt)
{
	const char *s = id ? sp_reader_string(x->r, (uint32_t)id) : NULL;
	return s && *s ? s : dflt;
}

/* ------------------------------------------------------ 4. host records */

static int is_instant(unsigned kind)
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

static void host_record(struct ex *x, const struct sp_event *ev, uint32_t opid, uint32_t otid)
{
	char buf[SP_MAX_STRING + 64];
	const char *name = call_name(x, ev, buf, sizeof(buf));
	if (is_instant(ev->kind)) {
		ev_open(x, "i", name, call_cat(ev->kind), opid, otid, rel(x, ev->begin_ns));
		jw_kstr(&x->w, "s", "t");
	} else {
		ev_open(x, "X", name, call_cat(ev->kind), opid, otid, rel(x, ev->begin_ns));
		put_us(&x->w, "dur", (int64_t)(ev->end_ns - ev->begin_ns));
	}
	put_args(x, ev);
	jw_obj_end(&x->w);
	if ((ev->kind == SP_K_ALLOC || ev->kind == SP_K_FREE) && ((ev->mask >> SP_F_LIVE) & 1))
		memory_counter(x, ev, opid, otid);
}

/* --------------------------------------------------------- 5. GPU track */

/* The pseudo tid of a lane of (process, device) where [b, e) overlaps nothing already placed. */
static uint32_t gpu_lane(struct ex *x, uint32_t opid, uint32_t device, int64_t b, int64_t e)
{
	struct lanes *L = NULL;
	for (size_t i = 0; i < x->nlanes; i++)
		if (x->lanes[i].opid == opid && x->lanes[i].device == device) {
			L = &x->lanes[i];
			break;
		}
	if (!L) {
		if (x->nlanes == x->lanes_cap) {
			size_t cap = x->lanes_cap ? 2 * x->lanes_cap : 16;
			struct lanes *t = xcalloc(cap, sizeof(*t));
			if (x->nlanes)
				memcpy(t, x->lanes, x->nlanes * sizeof(*t));
			free(x->lanes);
			x->lanes = t;
			x->lanes_cap = cap;
		}
		L = &x->lanes[x->nlanes++];
		L->opid = opid;
		L->device = device;
		proc_get(x, opid);
	}
	/*
	 * Slices on one track must nest; spans of concurrent streams overlap. The first lane
	 * whose last span ended by b takes it (spans come roughly in begin order, so lanes
	 * stay few); past MAX_LANES the last lane takes it regardless.
	 */
	unsigned k = 0;
	while (k < L->n && L->end[k] > b)
		k++;
	if (k == MAX_LANES)
		k = MAX_LANES - 1;
	if (k == L->n) {
		L->tid[k] = x->next_pseudo++;
		L->n++;
		L->end[k] = e;
	} else if (e > L->end[k]) {
		L->end[k] = e;
	}
	return L->tid[k];
}

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
 * Write the GPU slice [sb, se) of op on device; call is its launch/copy/memset (or
 * NULL when unknown). A flow arrow goes from the middle of the call to the middle
 * of the span: Perfetto binds a flow end to the slice enclosing its time.
 */
static void gpu_slice(struct ex *x, int32_t pid, uint32_t op, unsigned device, uint64_t sb, uint64_t se,
		      const struct op *call)
{
	struct jsonw *w = &x->w;
	char buf[SP_MAX_STRING + 64];
	struct op anon = {.op = op};
	const struct op *o = call ? call : &anon;
	uint32_t opid = out_id(x, pid);
	/* the span's length from the record (se - sb wraps back to it), not from two clamped ends */
	int64_t b = rel(x, sb), e = sat_add(b, clamp_ns(se - sb));
	if (!in_window(x, b, e))
		return;
	uint32_t tid = gpu_lane(x, opid, device, b, e);

	ev_open(x, "X", gpu_name(x, o, buf, sizeof(buf)), "gpu", opid, tid, b);
	put_us(w, "dur", e - b);
	jw_kobj_begin(w, "args");
	jw_ku64(w, "op", op);
	jw_ku64(w, "device", device);
	if (call) {
		jw_kstr(w, "kind", sp_kind_name[o->kind]);
		if (o->api && o->api < SP_API__COUNT)
			jw_kstr(w, "api", sp_api_name[o->api]);
		jw_khex(w, "stream", o->stream);
		if (o->kind != SP_K_LAUNCH)
			jw_ku64(w, "bytes", o->bytes);
		if (o->kind == SP_K_COPY) {
			jw_kstr(w, "direction", o->dir < SP_DIR__COUNT ? sp_dir_name[o->dir] : "?");
			jw_kstr(w, "host_memory", o->hostmem < SP_HOSTMEM__COUNT ? sp_hostmem_name[o->hostmem] : "?");
		}
		jw_ku64(w, "host_tid", out_id(x, o->tid));
		put_us(w, "queued_us", sat_sub(b, rel(x, o->b))); /* from the call's begin to the GPU's */
	}
	jw_obj_end(w);
	jw_obj_end(w);
	x->st->gpu_spans++;
	if (!call) {
		x->st->gpu_unjoined++;
		return;
	}
	if (!in_window(x, rel(x, o->b), rel(x, o->e)))
		return; /* its call is not in the document: no arrow from nowhere */
	const char *fname = sp_kind_name[o->kind];
	uint64_t id = ++x->next_flow;
	ev_open(x, "s", fname, "flow", opid, out_id(x, o->tid), rel(x, o->b + (o->e - o->b) / 2));
	jw_ku64(w, "id", id);
	jw_obj_end(w);
	ev_open(x, "f", fname, "flow", opid, tid, b + (e - b) / 2);
	jw_ku64(w, "id", id);
	jw_kstr(w, "bp", "e");
	jw_obj_end(w);
}

static struct op *op_slot(struct ex *x, int32_t pid, uint32_t op)
{
	x->ops_dirty = 1;
	return &x->ops[(op ^ (uint32_t)mix((uint32_t)pid)) & (EXPORT_OP_WINDOW - 1)];
}

/* A launch/copy/memset with an op id: its span may already wait, else remember it. */
static void gpu_call(struct ex *x, const struct sp_event *ev)
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
		gpu_slice(x, s->pid, op, s->device, s->b, s->e, &c);
		s->state = OP_EMPTY;
		return;
	}
	if (s->state == OP_SPAN) /* a span whose op fell out of the window: shown unnamed */
		gpu_slice(x, s->pid, s->op, s->device, s->b, s->e, NULL);
	*s = c;
}

static void gpu_span(struct ex *x, const struct sp_event *ev)
{
	uint32_t op = (uint32_t)ev->f[SP_F_OP];
	unsigned dev = (unsigned)ev->f[SP_F_DEVICE];
	struct op *s = op_slot(x, ev->pid, op);
	if (s->state == OP_CALL && s->op == op && s->pid == ev->pid) {
		gpu_slice(x, ev->pid, op, dev, ev->begin_ns, ev->end_ns, s);
		s->state = OP_EMPTY;
		return;
	}
	if (s->state == OP_SPAN)
		gpu_slice(x, s->pid, s->op, s->device, s->b, s->e, NULL);
	/* Its call may come later (another thread's record merged after it): wait in the window. */
	*s = (struct op){
	    .op = op, .pid = ev->pid, .state = OP_SPAN, .device = (uint8_t)dev, .b = ev->begin_ns, .e = ev->end_ns};
}

/* End of a file: spans whose call never came are shown unnamed; the window is cleared. */
static void gpu_flush(struct ex *x)
{
	if (!x->ops_dirty)
		return;
	for (size_t i = 0; i < EXPORT_OP_WINDOW; i++)
		if (x->ops[i].state == OP_SPAN)
			gpu_slice(x, x->ops[i].pid, x->ops[i].op, x->ops[i].device, x->ops[i].b, x->ops[i].e, NULL);
	memset(x->ops, 0, EXPORT_OP_WINDOW * sizeof(*x->ops));
	x->ops_dirty = 0;
}

/* ---------------------------------------------------------- 6. metadata */

static void meta(struct ex *x, const char *what, uint32_t pid, uint32_t tid, const char *key, const char *sval,
		 int64_t ival)
{
	struct jsonw *w = &x->w;
	jw_obj_begin(w);
	jw_kstr(w, "ph", "M");
	jw_kstr(w, "name", what);
	jw_ku64(w, "pid", pid);
	jw_ku64(w, "tid", tid);
	jw_ku64(w, "ts", 0);
	jw_kobj_begin(w, "args");
	if (sval)
		jw_kstr(w, key, sval);
	else
		jw_ki64(w, key, ival);
	jw_obj_end(w);
	jw_obj_end(w);
	x->st->events++;
}

static void write_metadata(struct ex *x)
{
	char name[1200];
	for (size_t i = 0; i < x->procs_cap; i++) {
		struct proc *p = &x->procs[i];
		if (!p->used)
			continue;
		if (!p->has_hdr) {
			snprintf(name, sizeof(name), "pid %" PRIu32, p->opid);
		} else {
			int n = snprintf(name, sizeof(name), "%s", p->cmdline[0] ? p->cmdline : "?");
			if (p->rank >= 0 && n >= 0 && (size_t)n < sizeof(name))
				n += snprintf(name + n, sizeof(name) - (size_t)n, " [rank %d]", p->rank);
			if (x->nhosts > 1 && n >= 0 && (size_t)n < sizeof(name))
				snprintf(name + n, sizeof(name) - (size_t)n, " @%s", x->hosts[p->host].name);
		}
		meta(x, "process_name", p->opid, p->opid, "name", name, 0);
		/* chrome://tracing orders processes by it (Perfetto ignores it): ranks first, in order */
		meta(x, "process_sort_index", p->opid, p->opid, "sort_index", NULL, p->rank >= 0 ? p->rank : 1 << 20);
	}

	/* The training thread of a process: the one with the most kernel launches (docs/definitions.md). */
	for (size_t i = 0; i < x->threads_cap; i++) {
		struct thread *t = &x->threads[i];
		if (!t->used)
			continue;
		int training = t->launches > 0;
		for (size_t j = 0; j < x->threads_cap && training; j++) {
			struct thread *u = &x->threads[j];
			if (u->used && u->opid == t->opid && u != t &&
			    (u->launches > t->launches || (u->launches == t->launches && u->otid < t->otid)))
				training = 0;
		}
		int n = snprintf(name, sizeof(name), "tid %" PRId32, t->tid);
		if (t->name && n >= 0 && (size_t)n < sizeof(name))
			n += snprintf(name + n, sizeof(name) - (size_t)n, " %s", t->name);
		if (training && n >= 0 && (size_t)n < sizeof(name))
			snprintf(name + n, sizeof(name) - (size_t)n, " (training thread)");
		meta(x, "thread_name", t->opid, t->otid, "name", name, 0);
		if (training)
			meta(x, "thread_sort_index", t->opid, t->otid, "sort_index", NULL, -1);
	}
	for (size_t i = 0; i < x->nlanes; i++) {
		struct lanes *L = &x->lanes[i];
		for (unsigned k = 0; k < L->n; k++) {
			if (k)
				snprintf(name, sizeof(name), "GPU %u (%u)", L->device, k + 1);
			else
				snprintf(name, sizeof(name), "GPU %u", L->device);
			meta(x, "thread_name", L->opid, L->tid[k], "name", name, 0);
			meta(x, "thread_sort_index", L->opid, L->tid[k], "sort_index", NULL, -2);
		}
	}
}

/* ------------------------------------------------------------ 7. export */

/*
 * Has writing the document failed? The errno of the first failure is kept for the
 * error line: what runs after it (reading, formatting) may change errno.
 */
static int out_failed(struct ex *x)
{
	if (!ferror(x->w.f))
		return 0;
	if (!x->werr)
		x->werr = errno ? errno : EIO;
	return 1;
}

static int export_file(struct ex *x, struct file_info *fi)
{
	int orc = util_reader_open(fi->path, &x->r);
	if (orc)
		return orc; /* it opened at the header pass: changed under us */
	x->fi = fi;
	x->st->files++;
	if (!fi->bpf) {
		/* the collector's header names the collector, not the pids it saw */
		struct proc *p = proc_get(x, out_id(x, fi->hdr->pid));
		/* named by what it ran last, as stepprof analyze does, whatever the files' order */
		if (!p->has_hdr || fi->hdr->start_mono_ns >= p->cmd_start) {
			p->pid = fi->hdr->pid;
			p->ppid = fi->hdr->ppid;
			p->rank = fi->hdr->rank;
			p->host = fi->host;
			free(p->cmdline);
			p->cmdline = xstrdup(fi->hdr->cmdline);
			p->cmd_start = fi->hdr->start_mono_ns;
		}
		p->has_hdr = 1;
	}
	struct sp_event ev;
	/* A reader gone (export -o - | head, SIGPIPE ignored): the rest would go nowhere. */
	while (!out_failed(x) && sp_reader_next(x->r, &ev)) {
		x->st->records++;
		uint32_t opid = out_id(x, ev.pid), otid = out_id(x, ev.tid);
		struct thread *t = thread_get(x, opid, otid ? otid : opid, ev.tid);
		switch (ev.kind) {
		case SP_K_THREAD: {
			const char *s = str_or(x, ev.f[SP_F_NAME], NULL);
			if (s) {
				free(t->name);
				t->name = xstrdup(s);
			}
			continue;
		}
		case SP_K_GPU_SPAN:
			if (ev.f[SP_F_OP])
				gpu_span(x, &ev);
			continue;
		case SP_K_LAUNCH:
			t->launches++;
			/* fall through */
		case SP_K_COPY:
		case SP_K_MEMSET:
			if (ev.f[SP_F_OP])
				gpu_call(x, &ev);
			break;
		default:
			break;
		}
		if (in_window(x, rel(x, ev.begin_ns), rel(x, ev.end_ns)))
			host_record(x, &ev, opid, otid ? otid : opid);
	}
	gpu_flush(x);
	int rc = util_report_damage(fi->path, sp_reader_stats(x->r));
	sp_reader_close(x->r);
	x->r = NULL;
	return rc;
}

int export_perfetto(char *const *paths, size_t n, FILE *out, const struct export_opts *opts, struct export_stats *st)
{
	struct export_stats dummy;
	struct ex *x = xcalloc(1, sizeof(*x));
	int rc = 0;
	memset(st ? st : &dummy, 0, sizeof(*st));
	x->st = st ? st : &dummy;
	x->nfiles = n;
	x->files = xcalloc(n, sizeof(*x->files));
	for (size_t i = 0; i < n; i++)
		x->files[i].path = paths[i];
	x->next_pseudo = PSEUDO_TID_BASE;
	x->from = opts ? opts->from_ns : INT64_MIN;
	x->to = opts ? opts->to_ns : INT64_MAX;

	header_pass(x, &rc);
	size_t ok = 0;
	for (size_t i = 0; i < n; i++)
		ok += x->files[i].ok;
	if (!ok)
		rc = SP_EXIT_INPUT; /* nothing to export, as when no file can be read (every one never written) */
	if (ok) {
		x->ops = xcalloc(EXPORT_OP_WINDOW, sizeof(*x->ops));
		struct jsonw *w = &x->w;
		jw_init(w, out, opts ? opts->pretty : 0);
		jw_obj_begin(w);
		/* Perfetto reads displayTimeUnit only before the events (and stops at a key it does not know) */
		jw_kstr(w, "displayTimeUnit", "ns");
		jw_karr_begin(w, "traceEvents");
		for (size_t i = 0; i < n; i++)
			if (x->files[i].ok)
				rc = util_worse(rc, export_file(x, &x->files[i]));
		write_metadata(x);
		jw_arr_end(w);
		jw_kobj_begin(w, "otherData");
		jw_kstr(w, "producer", "stepprof export");
		jw_kstr(w, "clock", "CLOCK_MONOTONIC");
		jw_ku64(w, "ts_zero_mono_ns", (uint64_t)x->zero);
		jw_ku64(w, "files", x->st->files);
		jw_ku64(w, "records", x->st->records);
		jw_ku64(w, "gpu_spans", x->st->gpu_spans);
		jw_ku64(w, "gpu_spans_unjoined", x->st->gpu_unjoined);
		jw_obj_end(w);
		jw_obj_end(w);
		int flushed = fflush(out) == 0;
		if (!flushed && !x->werr)
			x->werr = errno ? errno : EIO;
		if (!flushed || out_failed(x) || jw_error(w)) {
			if (out == stdout)
				util_stdout_failed();
			else /* which file and why: a full disk, a file size limit */
				util_err(opts ? opts->out_name : NULL, "cannot write%s%s",
					 x->werr ? ": " : " the trace", x->werr ? strerror(x->werr) : "");
			rc = util_worse(rc, SP_EXIT_INTERNAL);
		}
	}

	for (size_t i = 0; i < x->procs_cap; i++)
		free(x->procs[i].cmdline);
	for (size_t i = 0; i < x->threads_cap; i++)
		free(x->threads[i].name);
	for (size_t i = 0; i < n; i++)
		free(x->files[i].hdr);
	free(x->procs);
	free(x->threads);
	free(x->lanes);
	free(x->ops);
	free(x->files);
	free(x);
	return rc;
}
