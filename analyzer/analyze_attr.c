/*
 * analyze_attr.c - pass 2 of the analysis (see analyze_int.h): each record of
 * the merged stream is given to the iterations it overlaps. The training
 * thread's spans of each open iteration (a time window of open iterations) are
 * partitioned into input, h2d, compute, comm, d2h, sync and other (breakdown.h) once
 * the iteration is final; the counters of every iteration and the evidence of
 * the findings are collected on the way, with bounded tables of open files and
 * live allocations.
 */
#include "analyze_int.h"
#include "breakdown.h"
#include "gpu_model.h"

#include <stdlib.h>
#include <string.h>

#define OP_RING 65536u
enum { OPC_NONE, OPC_COMPUTE, OPC_H2D, OPC_D2H, OPC_COMM };

/*
 * Communication (docs/definitions.md, "Breakdown"): a launch is a collective's
 * when its kernel has an NCCL name, or when the trainer's thread made it inside
 * one of its COMM records (an NCCL call). A call's record is written when it
 * returns, after the launches it made, so both orders are met: the last COMM
 * records of the trainer (COMM_CALLS) classify the launches that come after
 * them, and the trainer's last launches (COMM_LAUNCHES) are classified again
 * when a COMM record holding them arrives (before their GPU spans, which are
 * read back later: a span already counted would stay compute).
 */
#define COMM_CALLS    16u
#define COMM_LAUNCHES 256u
/* The last op of each stream (and device) of the trainer: what a sync of it waits for. */
#define LAST_OPS 64u

struct openfile {
	int32_t pid, fd;
	long iter;
	uint64_t bytes;
	int used;
	int read; /* a read of it was recorded (not a file opened to be written: a checkpoint) */
};
#define OPENFILES 4096u

struct liveblk {
	uint64_t dptr;
	uint64_t bytes;
	uint32_t site;
	uint32_t dev, gen; /* its device, and the device's reset count when it was allocated */
	int used;
	int in_iteration; /* allocated inside an iteration: can hold a growth */
};
#define LIVEBLKS 65536u

/*
 * The input split (docs/definitions.md, "Input split"). A loader worker's time
 * is cut into segments at its CPU_TIME records; each segment's shares of file
 * I/O (its file calls), CPU work (its CPU time outside them) and neither come
 * from its totals. The training thread's exposed input outside its own file
 * calls (espans, kept per iteration as iterations close) is shared among the
 * workers' segments that overlap it, once the pass has seen them all.
 */
struct wseg {
	uint64_t b, e;
	double fio, fcpu; /* shares of [b, e) outside the worker's waits; the rest is neither */
};

/*
 * A gap of at most this between two file calls of a worker is file I/O too:
 * the code around back-to-back calls (libc's, the language runtime's, the
 * wrappers' own) belongs to reading the file, not to the worker's CPU work.
 */
#define WK_IO_GLUE_NS 5000u

struct wstate {
	uint64_t t0, c0; /* the last CPU sample: time, CPU ns (before the first: its start, 0) */
	uint64_t io, wt; /* its file calls' and its waits' time since t0 */
	uint64_t io_end; /* the end of its last file call */
	struct wseg *seg;
	size_t nseg, cap;
	struct bd_list waits; /* its loader and lock waits, in time order (overlaps merged) */
};

struct espan {
	uint64_t b, e;
	size_t iter;
	double acc[AN_SPLIT__COUNT], cov; /* the overlapping segments' shares, times the overlap; the overlap */
	double waited;			  /* of acc[AN_SPLIT_WAIT]: workers in one of their waits */
};

struct pass2 {
	struct state *s;
	struct an_analysis *a;
	/*
	 * Span lists of the open iterations, a ring indexed by iteration % wcap that
	 * covers [first_open, first_open + wcap): memory follows the window, not the run.
	 */
	struct bd_list (*lists)[BD__COUNT];
	size_t wcap;
	size_t first_open, hint;
	uint64_t maxbegin, maxlate;
	struct {
		uint32_t op;
		uint8_t cls;
		uint64_t sync_end; /* a host-synchronous copy's return: its GPU work ended by then */
		long pg_iter;	   /* an H2D/D2H copy: its iteration (-1: none), */
		uint64_t pg_ns;	   /* the call's duration counted in its pageable_ns or pinned_ns, */
		uint8_t pg_pinned; /* and which (1 pinned_ns; 0 pageable_ns, 2 pageable_ns and pageable_small_ns) */
	} * ring;
	struct openfile *files;
	struct liveblk *live;
	size_t nlive;
	uint32_t dev_resets[SP_MAX_DEVICES]; /* a block of an older count was released by a reset */
	uint64_t live_now[SP_MAX_DEVICES], live_total;
	long live_iter;
	int live_file;
	/* allocator flush detection */
	uint64_t burst_n, burst_first, burst_bytes, burst_live_before, last_fail_ns;
	/* the trainer's Async pageable copies not yet known to be awaited at once (async_settle) */
	struct pend_async {
		int32_t tid;
		uint64_t stream;
		long iter;
	} pend_async[16];
	unsigned npend_async;
	struct gmodel *gm; /* the trainer's untimed launches, modelled (gpu_model.h) */
	struct {
		int32_t tid;
		uint64_t b, e;
	} comm_call[COMM_CALLS]; /* the trainer's last COMM records (a ring) */
	unsigned ncomm_call;
	struct {
		int32_t tid;
		uint32_t op;
		uint64_t t;
	} comm_launch[COMM_LAUNCHES]; /* the trainer's last launches (a ring) */
	unsigned ncomm_launch;
	struct {
		unsigned dev;
		int is_dev; /* the device's last op (any stream), else the stream's */
		uint64_t stream;
		uint32_t op;
	} last_op[LAST_OPS];
	unsigned nlast_op;
	struct {
		uint32_t name;
		int32_t file; /* + 1: 0 an empty entry */
		uint8_t comm;
	} name_verdict[256]; /* kernel names already looked up (a binary search in the file's strings) */
	struct hashmap wk; /* a worker's pid -> struct wstate * (the input split) */
	struct espan *esp; /* the training thread's exposed input not in its own file calls, in time order */
	size_t nesp, capesp;
	int oom;
};

/* The first iteration whose start (by_end: end) is after t, a->nit when none (both are sorted). */
static size_t iter_first_after(const struct an_analysis *a, uint64_t t, int by_end)
{
	size_t lo = 0, hi = a->nit;
	while (lo < hi) {
		size_t mid = (lo + hi) / 2;
		if ((by_end ? a->it[mid].end_ns : a->it[mid].start_ns) <= t)
			lo = mid + 1;
		else
			hi = mid;
	}
	return lo;
}

/* The iteration holding t, -1 when none. */
static long iter_at(const struct an_analysis *a, uint64_t t)
{
	size_t lo = iter_first_after(a, t, 0);
	if (!lo)
		return -1;
	return t < a->it[lo - 1].end_ns ? (long)lo - 1 : -1;
}

/* The first iteration that starts after t, -1 when none. */
static long iter_after(const struct an_analysis *a, uint64_t t)
{
	size_t lo = iter_first_after(a, t, 0);
	return lo < a->nit ? (long)lo : -1;
}

/* The span lists of open iteration i (>= first_open), growing the ring when needed; NULL when out of memory. */
static struct bd_list *win_lists(struct pass2 *p, size_t i)
{
	if (i - p->first_open >= p->wcap) {
		size_t cap = p->wcap ? p->wcap : 16;
		while (i - p->first_open >= cap)
			cap *= 2;
		struct bd_list(*n)[BD__COUNT] = calloc(cap, sizeof(*n));
		if (!n)
			return NULL;
		for (size_t k = p->first_open; k < p->first_open + p->wcap; k++)
			memcpy(n[k % cap], p->lists[k % p->wcap], sizeof(n[0]));
		free(p->lists);
		p->lists = n;
		p->wcap = cap;
	}
	return p->lists[i % p->wcap];
}

/* Add [b, e) to condition c of every iteration it overlaps. */
static void add_span(struct pass2 *p, int c, uint64_t b, uint64_t e)
{
	struct an_analysis *a = p->a;
	if (e <= b || !a->nit)
		return;
	size_t lo;
	/* records mostly arrive in time order: try the iteration of the previous span first */
	if (p->hint < a->nit && a->it[p->hint].end_ns > b && (p->hint == 0 || a->it[p->hint - 1].end_ns <= b))
		lo = p->hint;
	else
		lo = iter_first_after(a, b, 1);
	p->hint = lo;
	for (size_t i = lo; i < a->nit && a->it[i].start_ns < e; i++) {
		if (a->it[i].finalized) {
			a->late_events++;
			continue;
		}
		uint64_t cb = b > a->it[i].start_ns ? b : a->it[i].start_ns;
		uint64_t ce = e < a->it[i].end_ns ? e : a->it[i].end_ns;
		struct bd_list *l = win_lists(p, i);
		if (!l || bd_push(&l[c], cb, ce))
			p->oom = 1;
	}
}

/*
 * Host-blocked time: the call's overlap with each iteration (overlap between calls
 * allowed), also when the call began before the iteration: before the first one,
 * or in a gap between NVTX ranges or marks of another thread.
 */
static void add_blocked(struct pass2 *p, int k, uint64_t b, uint64_t e)
{
	struct an_analysis *a = p->a;
	for (size_t i = iter_first_after(a, b, 1); i < a->nit && a->it[i].start_ns < e; i++) {
		uint64_t cb = b > a->it[i].start_ns ? b : a->it[i].start_ns;
		uint64_t ce = e < a->it[i].end_ns ? e : a->it[i].end_ns;
		if (ce > cb)
			a->it[i].blocked[k] += ce - cb;
	}
}

/*
 * Iteration i's exposed input (the partition's, lists normalised): what falls in
 * the training thread's own file calls is input_io at once; the rest waits in
 * p->esp for the loader workers' segments (split_resolve). 0, or -1 (memory).
 */
static int split_exposed(struct pass2 *p, size_t i, struct bd_list *l)
{
	struct an_iter *it = &p->a->it[i];
	struct bd_list ex = {0}, rest = {0};
	int rc = -1;
	if (bd_exposed(l, BD_INPUT, &ex))
		goto out;
	bd_normalise(&l[BD_SELF_IO], it->start_ns, it->end_ns);
	if (bd_minus(&ex, &l[BD_SELF_IO], &rest))
		goto out;
	uint64_t own = bd_total(&ex) - bd_total(&rest);
	it->split[AN_SPLIT_IO] += own;
	for (size_t k = 0; k < rest.n; k++) {
		if (p->nesp == p->capesp) {
			size_t cap = p->capesp ? 2 * p->capesp : 256;
			struct espan *v = realloc(p->esp, cap * sizeof(*v));
			if (!v)
				goto out;
			p->esp = v;
			p->capesp = cap;
		}
		p->esp[p->nesp++] = (struct espan){.b = rest.v[k].b, .e = rest.v[k].e, .iter = i};
	}
	rc = 0;
out:
	bd_list_free(&ex);
	bd_list_free(&rest);
	return rc;
}

static void finalize(struct pass2 *p, size_t i)
{
	struct an_iter *it = &p->a->it[i];
	uint64_t busy = 0;
	uint64_t lock_input = 0;
	struct bd_list *l = win_lists(p, i);
	if (!l || bd_lock_input(l, it->start_ns, it->end_ns, &lock_input) ||
	    bd_partition(l, it->start_ns, it->end_ns, it->bd, &busy) ||
	    bd_partition_v1(l, it->start_ns, it->end_ns, it->bd1))
		p->oom = 1;
	if (l)
		it->comm_overlapped_ns = bd_overlap(&l[BD_COMM], &l[BD_COMPUTE]);
	it->blocked[AN_BLK_INPUT] += lock_input;
	it->gpu_idle_ns = (it->end_ns - it->start_ns) - busy;
	if (l && split_exposed(p, i, l))
		p->oom = 1;
	for (int c = 0; l && c < BD__COUNT; c++)
		bd_list_free(&l[c]);
	it->finalized = 1;
}

static void note_size(struct an_iter *it, uint64_t bytes)
{
	for (uint32_t i = 0; i < it->nsizes && i < AN_SIZESET; i++)
		if (it->sizes[i] == bytes)
			return;
	if (it->nsizes < AN_SIZESET)
		it->sizes[it->nsizes] = bytes;
	if (it->nsizes <= AN_SIZESET)
		it->nsizes++;
}

static struct openfile *file_slot(struct pass2 *p, int32_t pid, int32_t fd)
{
	size_t h = hash64(((uint64_t)(uint32_t)pid << 32) | (uint32_t)fd) & (OPENFILES - 1);
	for (size_t k = 0; k < 16; k++, h = (h + 1) & (OPENFILES - 1))
		if (!p->files[h].used || (p->files[h].pid == pid && p->files[h].fd == fd))
			return &p->files[h];
	return NULL; /* full neighbourhood: this file is not sized (bounded table) */
}

static void file_done(struct pass2 *p, struct openfile *f)
{
	if (!f || !f->used)
		return;
	if (!f->read) {
		/* opened, never read: written (OPEN records have no access mode), not input */
		if (f->iter >= 0 && (size_t)f->iter < p->a->nit)
			p->a->it[f->iter].files_unread++;
		else if (!p->a->nit)
			p->a->run_input.files_unread++;
		f->used = 0;
		return;
	}
	unsigned b = an_fsize_bucket(f->bytes);
	p->s->col.fsize_hist[b]++;
	p->s->col.fsize_sum[b] += f->bytes;
	struct an_iter *it = f->iter >= 0 && (size_t)f->iter < p->a->nit ? &p->a->it[f->iter]
			     : p->a->nit				  ? NULL
									  : &p->a->run_input;
	if (it) {
		it->files_sized++;
		if ((double)f->bytes < p->a->opt.threshold[AN_T_SFS_MAX_FILE])
			it->files_small++;
	}
	f->used = 0;
}

static void dir_of(const char *path, char *out, size_t len)
{
	const char *sl = strrchr(path, '/');
	if (!sl)
		snprintf(out, len, ".");
	else if (sl == path)
		snprintf(out, len, "/");
	else
		snprintf(out, len, "%.*s", (int)(sl - path), path);
}

static const char *str_of(struct pass2 *p, int file, uint64_t id)
{
	const char *s = id ? p->s->src->string(p->s->src->ctx, file, (uint32_t)id) : NULL;
	return s;
}

static unsigned dev_index(uint64_t dev)
{
	return dev < SP_MAX_DEVICES ? (unsigned)dev : 0;
}

/* A block a device reset released since it was allocated (a free record with dptr 0). */
static int live_stale(const struct pass2 *p, const struct liveblk *b)
{
	return b->gen != p->dev_resets[dev_index(b->dev)];
}

/*
 * Live allocations of the trainer, by device pointer (bounded; the overflow is
 * not attributed to a site). A block a reset released (live_stale) stays in
 * its slot until an insert reuses it or its address is freed: a reset costs
 * one count, not a scan.
 */
static struct liveblk *live_slot(struct pass2 *p, uint64_t dptr, int insert)
{
	size_t h = hash64(dptr) & (LIVEBLKS - 1);
	struct liveblk *reuse = NULL;
	for (size_t k = 0; k < 64; k++, h = (h + 1) & (LIVEBLKS - 1)) {
		if (p->live[h].used && p->live[h].dptr == dptr)
			return &p->live[h];
		if (!p->live[h].used)
			return insert ? (reuse ? reuse : &p->live[h]) : NULL;
		if (!reuse && live_stale(p, &p->live[h]))
			reuse = &p->live[h];
	}
	return insert ? reuse : NULL;
}

static void live_remove(struct pass2 *p, struct liveblk *b)
{
	/* backward-shift deletion keeps linear probing correct without tombstones */
	size_t i = (size_t)(b - p->live);
	p->live[i].used = 0;
	p->nlive--;
	for (size_t j = (i + 1) & (LIVEBLKS - 1); p->live[j].used; j = (j + 1) & (LIVEBLKS - 1)) {
		size_t h = hash64(p->live[j].dptr) & (LIVEBLKS - 1);
		/* can j's entry move to the hole at i? only if i lies cyclically in [h, j) */
		if ((j > i && (h <= i || h > j)) || (j < i && h <= i && h > j)) {
			p->live[i] = p->live[j];
			p->live[j].used = 0;
			i = j;
		}
	}
}

/* Iteration it held the trainer's present device memory (the total and each device's). */
static void iter_held(struct an_iter *it, const struct pass2 *p)
{
	if (it->device_bytes_peak < p->live_total)
		it->device_bytes_peak = p->live_total;
	for (unsigned d = 0; d < SP_MAX_DEVICES; d++)
		if (it->dev_peak[d] < p->live_now[d])
			it->dev_peak[d] = p->live_now[d];
}

/* Device memory of the trainer changed: carry the level into iterations without events, then the peak. */
static void live_update(struct pass2 *p, uint64_t t, unsigned dev, uint64_t live_after)
{
	struct an_analysis *a = p->a;
	long i = iter_at(a, t);
	/*
	 * The iterations before t that saw no memory event held the level until now.
	 * NOTE: also when t is in no iteration (the frees of a teardown after the last
	 * one): otherwise those iterations would take the level after the teardown.
	 */
	long before = i;
	if (i < 0) {
		before = p->live_iter + 1; /* the iterations up to live_iter are done: O(1) after the first */
		while ((size_t)before < a->nit && a->it[before].end_ns <= t)
			before++;
	}
	for (long k = p->live_iter + 1; k < before; k++)
		iter_held(&a->it[k], p);
	if (before - 1 > p->live_iter)
		p->live_iter = before - 1;
	if (i >= 0) {
		if (i > p->live_iter)
			p->live_iter = i;
		iter_held(&a->it[i], p);
	}
	if (dev >= SP_MAX_DEVICES)
		dev = 0;
	p->live_total = p->live_total - p->live_now[dev] + live_after;
	p->live_now[dev] = live_after;
	if (i >= 0)
		iter_held(&a->it[i], p);
	if (a->device_bytes_peak < p->live_total)
		a->device_bytes_peak = p->live_total;
}

static void on_alloc_events(struct pass2 *p, const struct sp_event *ev, int file, long i)
{
	struct an_analysis *a = p->a;
	const double *th = a->opt.threshold;
	struct an_collect *col = &p->s->col;
	switch (ev->kind) {
	case SP_K_ALLOC: {
		if ((int64_t)ev->f[SP_F_RESULT] != 0)
			break;
		a->dev_used |= 1u << dev_index(ev->f[SP_F_DEVICE]);
		if (i >= 0) {
			a->it[i].allocs++;
			note_size(&a->it[i], ev->f[SP_F_BYTES]);
		}
		if (p->burst_n >= th[AN_T_AF_FLUSH_FREES] &&
		    ev->begin_ns - p->burst_first <= (uint64_t)(th[AN_T_AF_FLUSH_WINDOW] * 1e6)) {
			int after_fail = p->last_fail_ns && p->burst_first >= p->last_fail_ns &&
					 p->burst_first - p->last_fail_ns <= (uint64_t)(th[AN_T_AF_FLUSH_WINDOW] * 1e6);
			if (after_fail ||
			    (p->burst_live_before &&
			     (double)p->burst_bytes >= th[AN_T_AF_FLUSH_FRACTION] * (double)p->burst_live_before)) {
				if (i >= 0)
					a->it[i].flushes++;
				if (col->nflush < AN_MAX_EVENTS)
					col->flush[col->nflush++] = (struct an_flush){
					    i,	       ev->begin_ns, p->burst_n, p->burst_bytes, p->burst_live_before,
					    after_fail};
				col->nflush_total++;
			}
		}
		p->burst_n = 0;
		live_update(p, ev->begin_ns, (unsigned)ev->f[SP_F_DEVICE], ev->f[SP_F_LIVE]);
		struct liveblk *b = live_slot(p, ev->f[SP_F_DPTR], 1);
		if (b && !b->used) {
			b->used = 1;
			p->nlive++;
		}
		if (b) {
			b->dptr = ev->f[SP_F_DPTR];
			b->bytes = ev->f[SP_F_BYTES];
			b->dev = (uint32_t)ev->f[SP_F_DEVICE];
			b->gen = p->dev_resets[dev_index(ev->f[SP_F_DEVICE])];
			b->site = (uint32_t)ev->f[SP_F_SITE];
			b->in_iteration = i >= 0;
			p->live_file = file;
		}
		break;
	}
	case SP_K_FREE: {
		if ((int64_t)ev->f[SP_F_RESULT] != 0)
			break;
		if (i >= 0)
			a->it[i].frees++;
		if (!ev->f[SP_F_DPTR]) {
			/*
			 * A device reset released everything on its device (a free
			 * of NULL leaves no record): the program's doing, not an
			 * allocator's flush, so it ends any burst of frees.
			 */
			p->burst_n = 0;
			p->dev_resets[dev_index(ev->f[SP_F_DEVICE])]++;
			live_update(p, ev->begin_ns, (unsigned)ev->f[SP_F_DEVICE], ev->f[SP_F_LIVE]);
			break;
		}
		if (!p->burst_n) {
			p->burst_first = ev->begin_ns;
			p->burst_bytes = 0;
			p->burst_live_before = p->live_total;
		}
		p->burst_n++;
		struct liveblk *b = live_slot(p, ev->f[SP_F_DPTR], 0);
		uint64_t bytes = ev->f[SP_F_BYTES] ? ev->f[SP_F_BYTES] : (b && !live_stale(p, b) ? b->bytes : 0);
		p->burst_bytes += bytes;
		if (b)
			live_remove(p, b);
		live_update(p, ev->begin_ns, (unsigned)ev->f[SP_F_DEVICE], ev->f[SP_F_LIVE]);
		break;
	}
	case SP_K_ALLOC_FAILED: {
		if (i >= 0)
			a->it[i].alloc_failed++;
		p->last_fail_ns = ev->end_ns;
		p->burst_n = 0;
		if (ev->f[SP_F_TOTAL] && !a->device_capacity)
			a->device_capacity = ev->f[SP_F_TOTAL];
		if (!a->dev_capacity[dev_index(ev->f[SP_F_DEVICE])])
			a->dev_capacity[dev_index(ev->f[SP_F_DEVICE])] = ev->f[SP_F_TOTAL];
		col->nfail_total++;
		if (ev->f[SP_F_FREE] >= ev->f[SP_F_BYTES])
			col->nfail_with_free++;
		if (col->nfail < AN_MAX_EVENTS) {
			struct an_alloc_failure *f = &col->fail[col->nfail++];
			memset(f, 0, sizeof(*f));
			f->iteration = i;
			f->ns = ev->begin_ns;
			f->request = ev->f[SP_F_BYTES];
			f->free = ev->f[SP_F_FREE];
			f->total = ev->f[SP_F_TOTAL];
			const char *site = str_of(p, file, ev->f[SP_F_SITE]);
			snprintf(f->site, sizeof(f->site), "%s", site ? site : "");
		}
		break;
	}
	case SP_K_MEM_INFO:
		if (ev->f[SP_F_TOTAL]) {
			a->device_capacity = ev->f[SP_F_TOTAL];
			a->dev_capacity[dev_index(ev->f[SP_F_DEVICE])] = ev->f[SP_F_TOTAL];
		}
		break;
	}
}

/* ---- the input split: the loader workers' segments ---- */

/* When process pr started: its file header's clock, else its first record. */
static uint64_t proc_start(const struct pass2 *p, const struct an_proc *pr)
{
	const struct sp_file_header *h = pr->file >= 0 ? p->s->src->header(p->s->src->ctx, pr->file) : NULL;
	if (h && h->start_mono_ns && h->start_mono_ns <= pr->begin_ns)
		return h->start_mono_ns;
	return pr->begin_ns;
}

/* The split state of pr when it is one of the trainer's loader workers, else NULL. */
static struct wstate *wk_of(struct pass2 *p, const struct an_proc *pr)
{
	if (!pr || pr->role != AN_ROLE_WORKER || !p->a->trainer_pid || pr->trainer != p->a->trainer_pid)
		return NULL;
	union hashmap_val *v = hashmap_slot(&p->wk, (uint64_t)(uint32_t)pr->pid, true);
	if (!v) {
		p->oom = 1;
		return NULL;
	}
	if (!v->p) {
		struct wstate *w = calloc(1, sizeof(*w));
		if (!w) {
			p->oom = 1;
			return NULL;
		}
		/* a forked process's CPU clock starts at 0 (an exec'd one's holds its start-up: a little too much) */
		w->t0 = proc_start(p, pr);
		v->p = w;
	}
	return v->p;
}

/* Worker w waited over [b, e): a loader or lock wait (merged with the one before when they overlap). */
static void wk_wait(struct pass2 *p, struct wstate *w, uint64_t b, uint64_t e)
{
	if (e <= b)
		return;
	struct bd_list *l = &w->waits;
	uint64_t from = b; /* the part not already counted: an overlapping wait of another thread */
	if (l->n && b < l->v[l->n - 1].e)
		from = e > l->v[l->n - 1].e ? l->v[l->n - 1].e : e;
	w->wt += e - from;
	if (bd_push(l, b, e))
		p->oom = 1;
}

/* The part of [b, e) inside the waits of w. */
static uint64_t wk_waited(const struct wstate *w, uint64_t b, uint64_t e)
{
	const struct bd_list *l = &w->waits;
	size_t lo = 0, hi = l->n;
	while (lo < hi) { /* the first wait that ends after b */
		size_t mid = (lo + hi) / 2;
		if (l->v[mid].e <= b)
			lo = mid + 1;
		else
			hi = mid;
	}
	uint64_t t = 0;
	for (size_t k = lo; k < l->n && l->v[k].b < e; k++) {
		uint64_t cb = l->v[k].b > b ? l->v[k].b : b, ce = l->v[k].e < e ? l->v[k].e : e;
		if (ce > cb)
			t += ce - cb;
	}
	return t;
}

/* Worker w's CPU clock read c at t: the segment since the last sample ends. */
static void wk_sample(struct pass2 *p, struct wstate *w, uint64_t t, uint64_t c)
{
	if (t <= w->t0 || c < w->c0) { /* out of order, or another image's clock: start over */
		w->t0 = t > w->t0 ? t : w->t0;
		w->c0 = c;
		w->io = w->wt = 0;
		return;
	}
	uint64_t len = t - w->t0;
	uint64_t io = w->io < len ? w->io : len;
	uint64_t wt = w->wt < len - io ? w->wt : len - io;
	uint64_t cpu_time = c - w->c0;
	/* file calls on the page cache are CPU time too: the CPU work is what is left outside them */
	uint64_t cpu = cpu_time > io ? cpu_time - io : 0;
	if (cpu > len - io - wt)
		cpu = len - io - wt; /* other threads of the worker, or a clock read late: at most all of its free time */
	if (w->nseg == w->cap) {
		size_t cap = w->cap ? 2 * w->cap : 64;
		struct wseg *v = realloc(w->seg, cap * sizeof(*v));
		if (!v) {
			p->oom = 1;
			return;
		}
		w->seg = v;
		w->cap = cap;
	}
	uint64_t busy = len - wt; /* the shares are of the time it did not wait: its waits are known instants */
	w->seg[w->nseg++] = (struct wseg){w->t0, t, busy ? (double)io / (double)busy : 0, busy ? (double)cpu / (double)busy : 0};
	struct an_loaders *ld = &p->a->loaders;
	ld->seg_ns += len;
	ld->io_ns += io;
	ld->cpu_ns += cpu;
	ld->wait_ns += len - io - cpu;
	ld->cpu_time_ns += cpu_time < len ? cpu_time : len;
	w->t0 = t;
	w->c0 = c;
	w->io = w->wt = 0;
}

/* The first exposed-input span that ends after t (p->esp is in time order). */
static size_t esp_first_after(const struct pass2 *p, uint64_t t)
{
	size_t lo = 0, hi = p->nesp;
	while (lo < hi) {
		size_t mid = (lo + hi) / 2;
		if (p->esp[mid].e <= t)
			lo = mid + 1;
		else
			hi = mid;
	}
	return lo;
}

/*
 * The pass is over: every segment of every worker is shared out to the exposed
 * input it overlaps, then each span's time is split in the mean shares of the
 * segments over it (weighted by their overlap); a span no segment covers (no
 * worker traced, or none had sampled its CPU time then) is neither: input_wait.
 */
static void split_resolve(struct pass2 *p)
{
	struct an_analysis *a = p->a;
	union hashmap_val *v;
	for (size_t pos = 0; (v = hashmap_next(&p->wk, &pos, NULL));) {
		const struct wstate *w = v->p;
		if (w->nseg)
			a->loaders.workers++;
		for (size_t k = 0; k < w->nseg; k++) {
			const struct wseg *g = &w->seg[k];
			for (size_t j = esp_first_after(p, g->b); j < p->nesp && p->esp[j].b < g->e; j++) {
				struct espan *x = &p->esp[j];
				uint64_t ob = g->b > x->b ? g->b : x->b, oe = g->e < x->e ? g->e : x->e;
				uint64_t ov = oe - ob, waited = wk_waited(w, ob, oe), rest = ov - (waited < ov ? waited : ov);
				x->acc[AN_SPLIT_IO] += (double)rest * g->fio;
				x->acc[AN_SPLIT_CPU] += (double)rest * g->fcpu;
				x->acc[AN_SPLIT_WAIT] += (double)(ov - rest) + (double)rest * (1.0 - g->fio - g->fcpu);
				x->waited += (double)(ov - rest);
				x->cov += (double)ov;
			}
		}
	}
	for (size_t j = 0; j < p->nesp; j++) {
		const struct espan *x = &p->esp[j];
		struct an_iter *it = &a->it[x->iter];
		uint64_t dt = x->e - x->b, io = 0, cpu = 0;
		if (x->cov > 0) {
			io = (uint64_t)((double)dt * x->acc[AN_SPLIT_IO] / x->cov + 0.5);
			io = io < dt ? io : dt;
			cpu = (uint64_t)((double)dt * x->acc[AN_SPLIT_CPU] / x->cov + 0.5);
			cpu = cpu < dt - io ? cpu : dt - io;
		}
		it->split[AN_SPLIT_IO] += io;
		it->split[AN_SPLIT_CPU] += cpu;
		it->split[AN_SPLIT_WAIT] += dt - io - cpu;
		if (x->cov <= 0)
			it->split_unsampled += dt;
		else {
			uint64_t wd = (uint64_t)((double)dt * x->waited / x->cov + 0.5);
			it->split_waited += wd < dt - io - cpu ? wd : dt - io - cpu;
		}
	}
	for (size_t k = 0; k < a->nprocs; k++)
		a->loaders.cpu_total_ns += a->procs[k].cpu_ns;
	a->loaders.span_ns = a->run_end_ns > a->run_begin_ns ? a->run_end_ns - a->run_begin_ns : 0;
	const struct an_proc *tp = a->trainer_pid ? proc_find(a, a->trainer_pid) : NULL;
	const struct sp_file_header *h = tp && tp->file >= 0 ? p->s->src->header(p->s->src->ctx, tp->file) : NULL;
	if (h) {
		a->loaders.online_cpus = h->online_cpus;
		a->loaders.affinity_cpus = h->cpu_affinity_count;
	}
}

static void split_free(struct pass2 *p)
{
	union hashmap_val *v;
	for (size_t pos = 0; (v = hashmap_next(&p->wk, &pos, NULL));) {
		struct wstate *w = v->p;
		if (w) {
			free(w->seg);
			bd_list_free(&w->waits);
		}
		free(w);
	}
	hashmap_free(&p->wk);
	free(p->esp);
	p->esp = NULL;
	p->nesp = p->capesp = 0;
}

/* A pending Async pageable copy settles as one that does serialise silently: counted. */
static void async_count(struct pass2 *p, unsigned k)
{
	long it = p->pend_async[k].iter;
	if (it >= 0 && (size_t)it < p->a->nit)
		p->a->it[it].pageable_async++;
	p->pend_async[k] = p->pend_async[--p->npend_async];
}

/*
 * An Async copy from pageable memory is at least a warning because it
 * serialises silently: the program believes it overlaps. Not when the
 * thread's very next CUDA call is a blocking sync of its stream or of the
 * device: the program waits for it at once anyway. That is how PyTorch
 * makes every blocking copy to or from pageable memory (`loss.item()`,
 * `.cpu()`, `.to("cuda")` without non_blocking): cudaMemcpyAsync, then
 * cudaStreamSynchronize. ev is a CUDA call of thread ev->tid of the trainer.
 */
static void async_settle(struct pass2 *p, const struct sp_event *ev)
{
	for (unsigned k = 0; k < p->npend_async; k++) {
		if (p->pend_async[k].tid != ev->tid)
			continue;
		const char *api = sp_api_name[ev->api < SP_API__COUNT ? ev->api : 0];
		if (is_blocking_sync(ev) && (ev->f[SP_F_STREAM] == p->pend_async[k].stream ||
					     strstr(api, "DeviceSynchronize") || strstr(api, "CtxSynchronize")))
			p->pend_async[k] = p->pend_async[--p->npend_async]; /* awaited at once */
		else
			async_count(p, k);
		return;
	}
}

/*
 * Whether an op or sync of the trainer can still give an iteration GPU time:
 * not after the last iteration's end (a modelled span there counts nowhere),
 * so that the model holds nothing for a run without iterations or for the
 * launches of a long tail after them (its memory follows the open iterations).
 */
static int may_model(const struct pass2 *p, const struct sp_event *ev)
{
	return p->a->nit && ev->begin_ns < p->a->it[p->a->nit - 1].end_ns;
}

/* ---- communication: which launches are a collective's, which syncs wait for one ---- */

static int comm_name(const char *n)
{
	return n && (!strncmp(n, "ncclKernel_", 11) || !strncmp(n, "ncclDevKernel_", 14));
}

/* A launch of the trainer (ev) is communication: by its kernel's name, or made inside a COMM record seen already. */
static int launch_is_comm(struct pass2 *p, const struct sp_event *ev, int file)
{
	unsigned k = p->ncomm_launch++ % COMM_LAUNCHES;
	p->comm_launch[k].tid = ev->tid;
	p->comm_launch[k].op = (uint32_t)ev->f[SP_F_OP];
	p->comm_launch[k].t = ev->begin_ns;
	uint32_t name = (uint32_t)ev->f[SP_F_NAME];
	unsigned h = (name * 2654435761u + (unsigned)file) >> 24;
	if (p->name_verdict[h].file != file + 1 || p->name_verdict[h].name != name) {
		p->name_verdict[h].file = file + 1;
		p->name_verdict[h].name = name;
		p->name_verdict[h].comm = (uint8_t)comm_name(str_of(p, file, name));
	}
	if (p->name_verdict[h].comm)
		return 1;
	unsigned n = p->ncomm_call < COMM_CALLS ? p->ncomm_call : COMM_CALLS;
	for (unsigned j = 0; j < n; j++)
		if (p->comm_call[j].tid == ev->tid && ev->begin_ns >= p->comm_call[j].b &&
		    ev->begin_ns < p->comm_call[j].e)
			return 1;
	return 0;
}

/* A COMM record of the trainer: kept for the launches after it, and its launches already seen are its own. */
static void comm_call(struct pass2 *p, const struct sp_event *ev)
{
	unsigned k = p->ncomm_call++ % COMM_CALLS;
	p->comm_call[k].tid = ev->tid;
	p->comm_call[k].b = ev->begin_ns;
	p->comm_call[k].e = ev->end_ns;
	unsigned n = p->ncomm_launch < COMM_LAUNCHES ? p->ncomm_launch : COMM_LAUNCHES;
	for (unsigned j = 0; j < n; j++) {
		uint32_t op = p->comm_launch[j].op;
		if (p->comm_launch[j].tid == ev->tid && p->comm_launch[j].t >= ev->begin_ns &&
		    p->comm_launch[j].t < ev->end_ns && p->ring[op % OP_RING].op == op &&
		    p->ring[op % OP_RING].cls == OPC_COMPUTE)
			p->ring[op % OP_RING].cls = OPC_COMM;
	}
}

/* The slot of the last op of (dev, stream), or of dev when is_dev; LAST_OPS when none (insert: the table is full). */
static unsigned last_op_slot(struct pass2 *p, unsigned dev, int is_dev, uint64_t stream, int insert)
{
	for (unsigned k = 0; k < p->nlast_op; k++)
		if (p->last_op[k].dev == dev && p->last_op[k].is_dev == is_dev &&
		    (is_dev || p->last_op[k].stream == stream))
			return k;
	if (!insert || p->nlast_op == LAST_OPS)
		return LAST_OPS;
	unsigned k = p->nlast_op++;
	p->last_op[k].dev = dev;
	p->last_op[k].is_dev = is_dev;
	p->last_op[k].stream = is_dev ? 0 : stream;
	return k;
}

/* ev (a launch, memset or copy of the trainer, op) is now the last op of its stream and its device. */
static void last_op_set(struct pass2 *p, const struct sp_event *ev, uint32_t op)
{
	unsigned dev = (unsigned)ev->f[SP_F_DEVICE];
	unsigned k = last_op_slot(p, dev, 0, ev->f[SP_F_STREAM], 1);
	if (k < LAST_OPS)
		p->last_op[k].op = op;
	k = last_op_slot(p, dev, 1, 0, 1);
	if (k < LAST_OPS)
		p->last_op[k].op = op;
}

/*
 * A blocking sync of the training thread waits for communication: the last op
 * before it of the stream it synchronises (of the device, for a device or
 * context sync) is a collective's launch. An event's sync names no stream: not known.
 */
static int sync_awaits_comm(struct pass2 *p, const struct sp_event *ev)
{
	int kind = gm_sync_kind(sp_api_name[ev->api < SP_API__COUNT ? ev->api : 0]);
	if (kind == GM_SYNC_OTHER)
		return 0;
	unsigned k = last_op_slot(p, (unsigned)ev->f[SP_F_DEVICE], kind == GM_SYNC_DEVICE, ev->f[SP_F_STREAM], 0);
	if (k >= LAST_OPS)
		return 0;
	uint32_t op = p->last_op[k].op;
	return p->ring[op % OP_RING].op == op && p->ring[op % OP_RING].cls == OPC_COMM;
}

static void on_event(struct pass2 *p, const struct sp_event *ev, int file)
{
	struct an_analysis *a = p->a;
	struct an_collect *col = &p->s->col;
	int is_p = ev->pid == a->trainer_pid;
	int is_t = is_p && ev->tid == a->training_tid;
	long i = -2; /* the iteration of the record's begin, computed on demand */
#define ITER() (i == -2 ? (i = iter_at(a, ev->begin_ns)) : i)
	uint64_t dur = ev->end_ns - ev->begin_ns;

	if (p->npend_async && is_p &&
	    (ev->kind == SP_K_LAUNCH || ev->kind == SP_K_MEMSET || ev->kind == SP_K_COPY || ev->kind == SP_K_SYNC ||
	     ev->kind == SP_K_ALLOC || ev->kind == SP_K_FREE))
		async_settle(p, ev);

	switch (ev->kind) {
	case SP_K_LAUNCH:
	case SP_K_MEMSET:
		if (is_p) {
			uint32_t op = (uint32_t)ev->f[SP_F_OP];
			p->ring[op % OP_RING].op = op;
			p->ring[op % OP_RING].cls =
			    ev->kind == SP_K_LAUNCH && launch_is_comm(p, ev, file) ? OPC_COMM : OPC_COMPUTE;
			p->ring[op % OP_RING].sync_end = 0;
			p->ring[op % OP_RING].pg_iter = -1;
			last_op_set(p, ev, op);
			if ((int64_t)ev->f[SP_F_RESULT] == 0 && may_model(p, ev) &&
			    gm_op(p->gm, (unsigned)ev->f[SP_F_DEVICE], ev->f[SP_F_STREAM], op, ev->kind == SP_K_LAUNCH,
				  (uint32_t)ev->f[SP_F_NAME], ev->begin_ns, ev->end_ns))
				p->oom = 1;
		}
		break;
	case SP_K_COPY: {
		if (!is_p)
			break;
		unsigned dir = (unsigned)ev->f[SP_F_DIRECTION];
		uint8_t cls = dir == SP_DIR_H2D				  ? OPC_H2D
			      : dir == SP_DIR_D2H			  ? OPC_D2H
			      : (dir == SP_DIR_D2D || dir == SP_DIR_PEER) ? OPC_COMPUTE
									  : OPC_NONE;
		uint32_t op = (uint32_t)ev->f[SP_F_OP];
		p->ring[op % OP_RING].op = op;
		p->ring[op % OP_RING].cls = cls;
		last_op_set(p, ev, op);
		/*
		 * A copy from or to pageable memory, or one without "Async" in its name,
		 * returns only when the data has moved (CUDA's semantics): its GPU span
		 * cannot end later than the call, whatever the timing events say.
		 */
		int host_sync = ev->f[SP_F_HOST_MEMORY] == SP_HOSTMEM_PAGEABLE ||
				!strstr(sp_api_name[ev->api < SP_API__COUNT ? ev->api : 0], "Async");
		if ((int64_t)ev->f[SP_F_RESULT] == 0 && may_model(p, ev) &&
		    gm_op(p->gm, (unsigned)ev->f[SP_F_DEVICE], ev->f[SP_F_STREAM], op, 0, 0, ev->begin_ns, ev->end_ns))
			p->oom = 1;
		p->ring[op % OP_RING].sync_end = host_sync && (cls == OPC_H2D || cls == OPC_D2H) ? ev->end_ns : 0;
		p->ring[op % OP_RING].pg_iter = -1;
		if (cls != OPC_H2D && cls != OPC_D2H)
			break;
		if (is_t) {
			add_span(p, cls == OPC_H2D ? BD_H2D : BD_D2H, ev->begin_ns, ev->end_ns);
			add_blocked(p, cls == OPC_H2D ? AN_BLK_H2D : AN_BLK_D2H, ev->begin_ns, ev->end_ns);
		}
		if (ITER() < 0)
			break;
		struct an_iter *it = &a->it[i];
		if (cls == OPC_H2D)
			it->h2d_bytes += ev->f[SP_F_BYTES];
		else
			it->d2h_bytes += ev->f[SP_F_BYTES];
		if (ev->f[SP_F_HOST_MEMORY] == SP_HOSTMEM_PAGEABLE) {
			it->pageable_copies++;
			it->pageable_bytes += ev->f[SP_F_BYTES];
			it->pageable_ns += dur;
			int small = (double)ev->f[SP_F_BYTES] <= p->a->opt.threshold[AN_T_UPC_SMALL];
			if (small) {
				it->pageable_small++;
				it->pageable_small_ns += dur;
			}
			p->ring[op % OP_RING].pg_iter = i;
			p->ring[op % OP_RING].pg_ns = dur;
			p->ring[op % OP_RING].pg_pinned = small ? 2 : 0;
			if (strstr(sp_api_name[ev->api < SP_API__COUNT ? ev->api : 0], "Async")) {
				if (p->npend_async == sizeof(p->pend_async) / sizeof(p->pend_async[0]))
					async_count(p, 0);
				p->pend_async[p->npend_async++] =
				    (struct pend_async){.tid = ev->tid, .stream = ev->f[SP_F_STREAM], .iter = i};
			}
			const char *site = str_of(p, file, ev->f[SP_F_SITE]);
			if (site)
				an_top_add(&col->copy_sites, site, 1, ev->f[SP_F_BYTES], dur);
		} else if (ev->f[SP_F_HOST_MEMORY] == SP_HOSTMEM_PINNED) {
			it->pinned_copies++;
			it->pinned_bytes += ev->f[SP_F_BYTES];
			it->pinned_ns += dur;
			p->ring[op % OP_RING].pg_iter = i;
			p->ring[op % OP_RING].pg_ns = dur;
			p->ring[op % OP_RING].pg_pinned = 1;
		}
		break;
	}
	case SP_K_GPU_SPAN: {
		if (!is_p)
			break;
		uint32_t op = (uint32_t)ev->f[SP_F_OP];
		int known = p->ring[op % OP_RING].op == op;
		uint8_t cls = known ? p->ring[op % OP_RING].cls : OPC_NONE;
		uint64_t gb = ev->begin_ns, ge = ev->end_ns;
		if (known && p->ring[op % OP_RING].sync_end && ge > p->ring[op % OP_RING].sync_end)
			ge = p->ring[op % OP_RING].sync_end;
		if (known && (gb = gm_span(p->gm, op, gb, ge)) == GM_SPAN_DROP)
			break;
		/*
		 * A copy's time is the copy's own, on the GPU, once known: a pageable copy's
		 * call also waits for the work queued before it (a 4-byte .item() copy behind
		 * a kernel) and a pinned Async call returns before the copy ran; either way
		 * the call's duration is not the copy's cost and its GB/s would be absurd.
		 */
		if (known && p->ring[op % OP_RING].pg_iter >= 0 && ge >= gb) {
			struct an_iter *cit = &a->it[p->ring[op % OP_RING].pg_iter];
			uint8_t kind = p->ring[op % OP_RING].pg_pinned;
			uint64_t *ns = kind == 1 ? &cit->pinned_ns : &cit->pageable_ns;
			*ns = *ns - p->ring[op % OP_RING].pg_ns + (ge - gb);
			if (kind == 2)
				cit->pageable_small_ns = cit->pageable_small_ns - p->ring[op % OP_RING].pg_ns + (ge - gb);
			p->ring[op % OP_RING].pg_iter = -1;
		}
		add_span(p, BD_GPU, gb, ge);
		if (cls == OPC_COMPUTE)
			add_span(p, BD_COMPUTE, gb, ge);
		else if (cls == OPC_COMM)
			add_span(p, BD_COMM, gb, ge);
		else if (cls == OPC_H2D)
			add_span(p, BD_H2D, gb, ge);
		else if (cls == OPC_D2H)
			add_span(p, BD_D2H, gb, ge);
		break;
	}
	case SP_K_SYNC:
		if (is_p && is_blocking_sync(ev) && may_model(p, ev)) { /* an anchor of the modelled GPU time */
			int kind = gm_sync_kind(sp_api_name[ev->api]);
			if (gm_sync(p->gm, (unsigned)ev->f[SP_F_DEVICE], ev->f[SP_F_STREAM], kind, ev->begin_ns,
				    ev->end_ns))
				p->oom = 1;
		}
		if (is_t) {
			add_span(p, BD_SYNC, ev->begin_ns, ev->end_ns);
			add_blocked(p, AN_BLK_SYNC, ev->begin_ns, ev->end_ns);
			if (is_blocking_sync(ev) && sync_awaits_comm(p, ev))
				add_span(p, BD_COMM_SYNC, ev->begin_ns, ev->end_ns);
		}
		break;
	case SP_K_COMM:
		if (is_p)
			comm_call(p, ev);
		break;
	case SP_K_ALLOC:
	case SP_K_FREE:
	case SP_K_ALLOC_FAILED:
	case SP_K_MEM_INFO:
		if (is_p)
			on_alloc_events(p, ev, file, ITER());
		break;
	case SP_K_LOCK_WAIT: {
		/* input only while another thread of the process waits for a batch (finalize) */
		if (is_t)
			add_span(p, BD_LOCK, ev->begin_ns, ev->end_ns);
		/* a worker's loop is its main thread: another thread's wait (a queue's feeder) is not the worker's */
		struct wstate *w = is_p || ev->tid != ev->pid ? NULL : wk_of(p, proc_find(a, ev->pid));
		if (w)
			wk_wait(p, w, ev->begin_ns, ev->end_ns);
		break;
	}
	case SP_K_CPU_TIME: {
		struct an_proc *pr = proc_find(a, ev->pid);
		if (!pr)
			break;
		uint64_t c = ev->f[SP_F_VALUE];
		if (c > pr->cpu_ns)
			pr->cpu_ns = c;
		struct wstate *w = is_p ? NULL : wk_of(p, pr);
		if (w)
			wk_sample(p, w, ev->begin_ns, c);
		break;
	}
	case SP_K_OPEN:
	case SP_K_STAT:
	case SP_K_READ:
	case SP_K_LISTDIR:
	case SP_K_LOADER_WAIT:
	case SP_K_CLOSE: {
		int is_file = ev->kind != SP_K_LOADER_WAIT &&
			      ((ev->kind != SP_K_READ && ev->kind != SP_K_CLOSE) ||
			       ((unsigned)ev->f[SP_F_FD_TYPE] != SP_FDTYPE_PIPE &&
				(unsigned)ev->f[SP_F_FD_TYPE] != SP_FDTYPE_SOCKET));
		if (is_t) { /* close included: the thread is blocked in file I/O */
			add_span(p, BD_INPUT, ev->begin_ns, ev->end_ns);
			add_blocked(p, AN_BLK_INPUT, ev->begin_ns, ev->end_ns);
			if (is_file)
				add_span(p, BD_SELF_IO, ev->begin_ns, ev->end_ns);
		} else if (is_p && ev->kind == SP_K_LOADER_WAIT) {
			/* a pin-memory thread receiving the batch the training thread may be waiting for */
			add_span(p, BD_PEER_WAIT, ev->begin_ns, ev->end_ns);
		}
		/* counters across the process tree; other trainers (ranks) and their workers count for themselves */
		struct an_proc *pr = proc_find(a, ev->pid);
		struct wstate *w = is_p || ev->tid != ev->pid ? NULL : wk_of(p, pr);
		if (w && is_file) {
			if (ev->begin_ns >= w->io_end && ev->begin_ns - w->io_end <= WK_IO_GLUE_NS &&
			    w->io_end > w->t0)
				w->io += ev->begin_ns - w->io_end;
			w->io += dur;
			if (ev->end_ns > w->io_end)
				w->io_end = ev->end_ns;
		}
		else if (w && ev->kind == SP_K_LOADER_WAIT)
			wk_wait(p, w, ev->begin_ns, ev->end_ns);
		if (!is_p && pr &&
		    (pr->role == AN_ROLE_TRAINER ||
		     (pr->role == AN_ROLE_WORKER && pr->trainer && pr->trainer != a->trainer_pid)))
			break;
		int32_t fd = (int32_t)ev->f[SP_F_FD];
		int ok = (int64_t)ev->f[SP_F_RESULT] >= 0;
		/* the process's input over the whole run (the report's input summary) */
		if (pr) {
			if (ev->kind == SP_K_LOADER_WAIT)
				pr->in_wait_ns += dur;
			else if (is_file) { /* files, not pipes */
				pr->in_ns += dur;
				pr->in_files += ev->kind == SP_K_OPEN && ok;
				pr->in_meta += ev->kind == SP_K_OPEN || ev->kind == SP_K_STAT || ev->kind == SP_K_LISTDIR;
				pr->in_bytes += ev->kind == SP_K_READ && ok ? ev->f[SP_F_BYTES] : 0;
			}
		}
		if (ev->kind == SP_K_CLOSE) {
			struct openfile *f = file_slot(p, ev->pid, fd);
			if (f && f->used)
				file_done(p, f);
			break;
		}
		if (ev->kind == SP_K_LOADER_WAIT)
			break;
		ITER();
		/*
		 * Loader workers start reading the first batches as soon as they are
		 * forked, before the training thread first waits: those reads belong to
		 * the first iteration (the first load). Likewise a read between two
		 * iterations (NVTX ranges leave a gap between a pop and the next push)
		 * feeds the next one: every file a loader reads counts in some iteration.
		 */
		if (i < 0 && pr && pr->role == AN_ROLE_WORKER)
			i = iter_after(a, ev->begin_ns);
		/* no iterations: every input record counts in the whole run's span */
		struct an_iter *it = i >= 0 ? &a->it[i] : a->nit ? NULL : &a->run_input;
		if (ev->kind == SP_K_OPEN) {
			if (it) {
				it->opens++;
				it->metadata_ops++;
				it->meta_ns += dur;
				if (ok)
					it->files_opened++;
			}
			if (ok && fd >= 0) {
				struct openfile *f = file_slot(p, ev->pid, fd);
				if (f) {
					file_done(p, f); /* an fd reused without a recorded close */
					*f = (struct openfile){ev->pid, fd, i, 0, 1, 0};
				}
			}
			if (it) {
				const char *path = str_of(p, file, ev->f[SP_F_PATH]);
				if (path) {
					char dir[256];
					dir_of(path, dir, sizeof(dir));
					an_top_add(&col->dirs, dir, 1, 0, dur);
				}
			}
		} else if (ev->kind == SP_K_STAT || ev->kind == SP_K_LISTDIR) {
			if (it) {
				if (ev->kind == SP_K_STAT)
					it->stats++;
				it->metadata_ops++;
				it->meta_ns += dur;
			}
		} else if (ev->kind == SP_K_READ) {
			unsigned ft = (unsigned)ev->f[SP_F_FD_TYPE];
			if (ft == SP_FDTYPE_PIPE || ft == SP_FDTYPE_SOCKET)
				break;
			uint64_t bytes = ok ? ev->f[SP_F_BYTES] : 0;
			if (it) {
				it->bytes_read += bytes;
				it->data_ns += dur;
			}
			struct openfile *f = file_slot(p, ev->pid, fd);
			if (f && f->used) {
				f->bytes += bytes;
				f->read = 1;
			}
		}
		break;
	}
	}
#undef ITER
}

/*
 * One pass 2 with a lateness of *maxlate assumed from the start: 0, -1 (out of
 * memory, rewind failed), or when may_retry and a record came too late for an
 * iteration already finalized, 1 with its lateness in *maxlate (a pass over
 * with that window would have kept the iteration open for it).
 */
/*
 * The pass's fixed tables (5 MiB), kept for the next pass of this thread.
 * RATIONALE: `stepprof watch` analyses a trainer's records many times a tick;
 * tables allocated and freed each time were fresh pages each time, and their
 * page faults were a tenth of the watcher's CPU. Zeroing a warm table costs
 * less than faulting a cold one in.
 */
static __thread struct {
	void *ring, *files, *live;
} g_scratch;

static void scratch_take(struct pass2 *p)
{
	size_t nr = OP_RING * sizeof(*p->ring), nf = OPENFILES * sizeof(*p->files), nl = LIVEBLKS * sizeof(*p->live);
	if (g_scratch.ring && g_scratch.files && g_scratch.live) {
		p->ring = memset(g_scratch.ring, 0, nr);
		p->files = memset(g_scratch.files, 0, nf);
		p->live = memset(g_scratch.live, 0, nl);
	} else {
		p->ring = calloc(1, nr);
		p->files = calloc(1, nf);
		p->live = calloc(1, nl);
	}
	memset(&g_scratch, 0, sizeof(g_scratch));
}

static void scratch_give(struct pass2 *p)
{
	free(g_scratch.ring);
	free(g_scratch.files);
	free(g_scratch.live);
	g_scratch.ring = p->ring;
	g_scratch.files = p->files;
	g_scratch.live = p->live;
}

void an_scratch_free(void)
{
	free(g_scratch.ring);
	free(g_scratch.files);
	free(g_scratch.live);
	memset(&g_scratch, 0, sizeof(g_scratch));
}

static void emit_modelled(void *arg, const struct gm_modelled *s)
{
	struct pass2 *p = arg; /* the breakdowns want the time and the class of the launch only */
	int comm = p->ring[s->op % OP_RING].op == s->op && p->ring[s->op % OP_RING].cls == OPC_COMM;
	add_span(p, BD_GPU, s->b, s->e);
	add_span(p, comm ? BD_COMM : BD_COMPUTE, s->b, s->e);
}

/* Model the untimed launches issued before force (an iteration about to be closed: its spans are in). */
static void model_resolve(struct pass2 *p, uint64_t force)
{
	gm_resolve(p->gm, force, emit_modelled, p);
}

static int pass2_once(struct state *s, uint64_t *maxlate, int may_retry)
{
	struct an_analysis *a = s->a;
	struct pass2 p = {0};
	p.s = s;
	p.a = a;
	p.maxlate = *maxlate;
	p.live_iter = -1;
	p.wcap = 16;
	p.lists = calloc(p.wcap, sizeof(*p.lists));
	p.gm = gm_new();
	scratch_take(&p);
	int rc = -1;
	if (!p.lists || !p.gm || !p.ring || !p.files || !p.live || s->src->rewind(s->src->ctx))
		goto out;
	/*
	 * An unused slot (op 0, zeroed) must not read as a copy of iteration 0: a GPU
	 * span of an op nothing launched (a damaged trace) would move copy time into
	 * iteration 0, or index a->it when there are no iterations (found by make fuzz).
	 */
	for (size_t k = 0; k < OP_RING; k++)
		p.ring[k].pg_iter = -1;
	a->run_input = (struct an_iter){0};
	for (size_t k = 0; k < a->nprocs; k++) {
		struct an_proc *pr = &a->procs[k];
		pr->in_files = pr->in_bytes = pr->in_meta = pr->in_ns = pr->in_wait_ns = pr->cpu_ns = 0;
	}
	a->loaders = (struct an_loaders){0};
	const struct sp_event *ev;
	int file;
	while ((ev = s->src->next(s->src->ctx, &file))) {
		if (ev->begin_ns > p.maxbegin)
			p.maxbegin = ev->begin_ns;
		else if (p.maxbegin - ev->begin_ns > p.maxlate)
			p.maxlate = p.maxbegin - ev->begin_ns;
		uint64_t late = a->late_events;
		on_event(&p, ev, file);
		if (p.oom)
			goto out;
		if (a->late_events != late && may_retry) {
			*maxlate = p.maxlate;
			rc = 1;
			goto out;
		}
		/*
		 * An iteration is final once the stream's begin times are well past its end:
		 * records arrive by begin time except for a bounded lateness (GPU spans read
		 * back at the next sync, a call written after the calls it made), which is
		 * measured as we go: the window is the larger of twice the iteration's wall
		 * time, four times the worst lateness seen and 1 ms. A record later than
		 * that starts the pass over with its lateness known (pass2()).
		 */
		while (p.first_open < a->nit) {
			const struct an_iter *it = &a->it[p.first_open];
			uint64_t window = 2 * (it->end_ns - it->start_ns);
			if (window < 4 * p.maxlate)
				window = 4 * p.maxlate;
			if (window < 1000000ull)
				window = 1000000ull;
			if (it->end_ns + window >= p.maxbegin)
				break;
			model_resolve(&p, it->end_ns); /* what it launched, modelled before it is closed */
			finalize(&p, p.first_open);
			p.first_open++;
		}
	}
	while (p.npend_async) /* never awaited: the trace ends first */
		async_count(&p, 0);
	model_resolve(&p, UINT64_MAX);
	{
		const struct gm_stats *g = gm_stats(p.gm);
		a->gpu_measured_ns = g->measured_ns;
		a->gpu_modelled_ns = g->modelled_ns;
		a->launches_timed = g->measured;
		a->launches_modelled = g->modelled;
		a->launches_unmodelled = g->unknown;
	}
	while (p.first_open < a->nit) {
		finalize(&p, p.first_open);
		p.first_open++;
	}
	if (p.oom)
		goto out;
	split_resolve(&p);
	/* iterations after the last memory event keep its level */
	for (long k = p.live_iter + 1; k >= 0 && (size_t)k < a->nit; k++)
		iter_held(&a->it[k], &p);
	for (size_t k = 0; k < OPENFILES; k++)
		file_done(&p, &p.files[k]);
	for (size_t k = 0; k < LIVEBLKS; k++)
		if (p.live[k].used && p.live[k].in_iteration && !live_stale(&p, &p.live[k])) {
			const char *site = p.live[k].site ? str_of(&p, p.live_file, p.live[k].site) : NULL;
			if (site)
				an_top_add(&s->col.live_sites, site, 1, p.live[k].bytes, 0);
		}
	rc = 0;
out:
	if (p.lists)
		for (size_t k = 0; k < p.wcap; k++)
			for (int c = 0; c < BD__COUNT; c++)
				bd_list_free(&p.lists[k][c]);
	free(p.lists);
	split_free(&p);
	gm_free(p.gm);
	scratch_give(&p);
	return rc;
}

/* Passes 2 over at most, each with a lateness 4 times the last one's at least: 4^8 ms is 65 s. */
#define PASS2_RETRIES 8

/*
 * Pass 2, started over when a record arrives after its iteration was
 * finalized: GPU spans are read back at the program's syncs, so a loop that
 * synchronises every N iterations (a loss logged every N steps) writes them
 * N iterations late, which the first iterations cannot have known. The pass
 * over assumes that lateness from the start; memory is still the window's (the
 * open iterations'), not the run's. After PASS2_RETRIES, late records are
 * counted (late_events), not added.
 */
int pass2(struct state *s)
{
	struct an_analysis *a = s->a;
	uint64_t maxlate = 0, capacity = a->device_capacity, dev_capacity[SP_MAX_DEVICES];
	double link_gbps = s->col.link_gbps;
	memcpy(dev_capacity, a->dev_capacity, sizeof(dev_capacity));
	for (int tries = 0;; tries++) {
		int rc = pass2_once(s, &maxlate, tries < PASS2_RETRIES);
		if (rc < 0)
			return rc;
		if (!rc) {
			/* the capacity of the devices the trainer used, when each one's is known */
			uint64_t sum = 0;
			for (unsigned d = 0; d < SP_MAX_DEVICES && sum != UINT64_MAX; d++)
				if (a->dev_used >> d & 1)
					sum = a->dev_capacity[d] ? sum + a->dev_capacity[d] : UINT64_MAX;
			if (sum && sum != UINT64_MAX)
				a->device_capacity = sum;
			return 0;
		}
		/* what the pass filled, as it was before it */
		for (size_t i = 0; i < a->nit; i++)
			a->it[i] = (struct an_iter){.start_ns = a->it[i].start_ns, .end_ns = a->it[i].end_ns};
		a->late_events = 0;
		a->device_bytes_peak = 0;
		a->device_capacity = capacity;
		memcpy(a->dev_capacity, dev_capacity, sizeof(dev_capacity));
		a->dev_used = 0;
		memset(&s->col, 0, sizeof(s->col));
		s->col.link_gbps = link_gbps;
	}
}
