/*
 * trainer_truth.c - the synthetic trainer's ground truth: what it did, as it
 * measured it, printed as JSON at exit (schema stepprof.trainer/1,
 * docs/workloads.md).
 *
 *   1. state: per-iteration counters, the stream's ops in issue order, input calls,
 *      the loader workers' windows
 *   2. recording: the tr_* calls the loop makes (cheap appends, no I/O)
 *   3. resolution: GPU intervals of copies from the stream order, then a sweep that
 *      partitions each iteration with docs/definitions.md's priorities, and splits
 *      its input time into input_io, input_cpu, input_wait
 *   4. JSON output
 *
 * RATIONALE: resolution waits for exit because a kernel's interval is written
 * by the GPU worker and a pinned copy's end is only known from what follows it
 * on the stream; at exit every iteration has been synchronised. Likewise a
 * worker's window that overlaps a wait may reach the trainer iterations later.
 */
#include "trainer.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

/* ---- 1. state ---- */

struct counts {
	uint64_t files_opened, stats, bytes_read;
	uint64_t h2d_bytes, d2h_bytes, pageable_copies;
	uint64_t copies, launches, syncs, allocs, frees, alloc_failures;
};

enum op_type { OP_KERNEL, OP_COPY, OP_SYNC };

struct op {
	enum op_type type;
	enum tr_cat dir; /* OP_COPY: TR_H2D or TR_D2H */
	bool host_sync;	 /* OP_COPY: the call returned only once the copy was done (pageable) */
	uint64_t bytes;
	uint64_t cb, ce; /* host call begin/return (copies, syncs) */
	struct tr_kslot *k;
	unsigned iter;
};

struct span {
	uint64_t b, e;
	unsigned iter;
	unsigned wfirst, wk; /* a wait for workers wfirst .. wfirst + wk - 1; wk == 0: a file call */
};

/* One loader worker's window: what it did over [b, e] (tr_worker_window). */
struct window {
	unsigned worker;
	uint64_t b, e, io_ns, cpu_ns;
};

enum { SPLIT_IO, SPLIT_CPU, SPLIT_WAIT, NSPLIT };

struct iter {
	uint64_t start, end;
	struct counts c;
	uint64_t live_end, peak;
	int reader_pid;
	uint64_t read_begin, read_end, read_io, read_cpu;
	bool workers_started; /* a generation of loader workers was forked for this iteration's batch */
};

struct comm_rec {
	bool set;
	uint64_t bytes, cb, ce, end, gpu_ns;
	const struct tr_kslot *before, *overlap;
};

struct failure {
	unsigned iter;
	uint64_t request, free, total, flushed_bytes;
	unsigned flushed;
	bool retry_ok;
};

static struct {
	unsigned iters, cur; /* cur == iters: outside the loop (setup or teardown) */
	bool finished;
	double pinned_gbps, memcpy_gbps;
	struct iter *it;
	struct counts total;
	uint64_t by_api[TR_NAPI];
	uint64_t host_allocs, host_frees, files_created;
	uint64_t live;
	struct op *ops;
	size_t nops, capops;
	struct span *inputs;
	size_t ninputs, capinputs;
	struct failure *fails;
	size_t nfails, capfails;
	struct window *wins; /* sorted by (worker, b) at resolution; wins_of[w] .. wins_of[w + 1] - 1 */
	size_t nwins, capwins, *wins_of;
	unsigned nworkers; /* 1 + the highest worker number seen */
	bool comm_on;	   /* --ranks: every iteration has its all-reduce */
	double comm_gbps;
	struct comm_rec *comms; /* comms[i]: iteration i's all-reduce (set: bytes or cb non-zero) */
} T;

static const char *const cat_name[TR_NCAT + 1] = {"compute", "comm", "h2d", "d2h", "input", "sync", "other"};
static const char *const split_name[NSPLIT] = {"input_io", "input_cpu", "input_wait"};
static const char *const api_name[TR_NAPI] = {
#define TR_API_NAME(n) #n,
    TR_APIS(TR_API_NAME)
#undef TR_API_NAME
};

static void *grow(void *p, size_t *cap, size_t need, size_t size)
{
	if (need <= *cap)
		return p;
	size_t n = *cap ? *cap * 2 : 256;
	while (n < need)
		n *= 2;
	p = realloc(p, n * size);
	if (!p) {
		fprintf(stderr, "trainer: out of host memory for the ground truth\n");
		exit(1);
	}
	*cap = n;
	return p;
}

static struct counts *cur_counts(void)
{
	return T.cur < T.iters ? &T.it[T.cur].c : NULL;
}

/* ---- 2. recording ---- */

void tr_truth_init(unsigned iters, double pinned_gbps, double memcpy_gbps)
{
	T.memcpy_gbps = memcpy_gbps;
	T.iters = iters;
	T.cur = iters;
	T.pinned_gbps = pinned_gbps > 0 ? pinned_gbps : 8.0;
	T.it = calloc(iters ? iters : 1, sizeof(*T.it));
	if (!T.it) {
		fprintf(stderr, "trainer: out of host memory\n");
		exit(1);
	}
	/* Sized for the common case up front so that the loop rarely reallocates. */
	T.ops = grow(NULL, &T.capops, (size_t)iters * 64 + 64, sizeof(*T.ops));
	T.inputs = grow(NULL, &T.capinputs, (size_t)iters * 16 + 64, sizeof(*T.inputs));
}

void tr_iter_begin(unsigned i, uint64_t t)
{
	if (T.cur < T.iters)
		T.it[T.cur].end = t;
	T.cur = i;
	T.it[i].start = t;
	T.it[i].peak = T.live;
	T.it[i].live_end = T.live;
}

void tr_iter_finish(uint64_t t)
{
	if (T.cur < T.iters)
		T.it[T.cur].end = t;
	T.cur = T.iters;
	T.finished = true;
}

void tr_api(enum tr_api api)
{
	struct counts *c = cur_counts();
	uint64_t *tot = NULL, *per = NULL;

	T.by_api[api]++;
	switch (api) {
	case TR_API_cudaMemcpyAsync:
	case TR_API_cudaMemcpyBatchAsync:
		tot = &T.total.copies, per = c ? &c->copies : NULL;
		break;
	case TR_API_cudaLaunchKernel:
		tot = &T.total.launches, per = c ? &c->launches : NULL;
		break;
	case TR_API_cudaStreamSynchronize:
	case TR_API_cudaDeviceSynchronize:
		tot = &T.total.syncs, per = c ? &c->syncs : NULL;
		break;
	case TR_API_cudaMalloc:
		tot = &T.total.allocs, per = c ? &c->allocs : NULL;
		break;
	case TR_API_cudaFree:
		tot = &T.total.frees, per = c ? &c->frees : NULL;
		break;
	default:
		break;
	}
	if (tot)
		(*tot)++;
	if (per)
		(*per)++;
}

void tr_input(uint64_t b, uint64_t e)
{
	tr_input_wait(b, e, 0, 0);
}

void tr_input_wait(uint64_t b, uint64_t e, unsigned first, unsigned k)
{
	if (T.cur >= T.iters)
		return;
	T.inputs = grow(T.inputs, &T.capinputs, T.ninputs + 1, sizeof(*T.inputs));
	T.inputs[T.ninputs++] = (struct span){b, e, T.cur, first, k};
}

void tr_worker_window(unsigned worker, uint64_t b, uint64_t e, uint64_t io_ns, uint64_t cpu_ns)
{
	if (e <= b)
		return;
	T.wins = grow(T.wins, &T.capwins, T.nwins + 1, sizeof(*T.wins));
	T.wins[T.nwins++] = (struct window){worker, b, e, io_ns, cpu_ns};
	if (worker + 1 > T.nworkers)
		T.nworkers = worker + 1;
}

void tr_files(unsigned opened, unsigned stats, uint64_t bytes)
{
	struct counts *c = cur_counts();

	T.total.files_opened += opened, T.total.stats += stats, T.total.bytes_read += bytes;
	if (c)
		c->files_opened += opened, c->stats += stats, c->bytes_read += bytes;
}

void tr_batch_reader(int pid, uint64_t read_begin, uint64_t read_end, uint64_t io_ns, uint64_t cpu_ns)
{
	if (T.cur >= T.iters)
		return;
	T.it[T.cur].reader_pid = pid;
	T.it[T.cur].read_begin = read_begin;
	T.it[T.cur].read_end = read_end;
	T.it[T.cur].read_io = io_ns;
	T.it[T.cur].read_cpu = cpu_ns;
}

static struct op *new_op(enum op_type type)
{
	T.ops = grow(T.ops, &T.capops, T.nops + 1, sizeof(*T.ops));
	struct op *o = &T.ops[T.nops++];
	memset(o, 0, sizeof(*o));
	o->type = type;
	o->iter = T.cur;
	return o;
}

void tr_kernel(struct tr_kslot *k)
{
	if (T.cur < T.iters) {
		struct op *o = new_op(OP_KERNEL);
		o->k = k;
		o->cb = tr_now();
	}
}

void tr_copy(enum tr_cat dir, uint64_t bytes, bool pageable, uint64_t cb, uint64_t ce)
{
	struct counts *c = cur_counts();

	if (dir == TR_H2D)
		T.total.h2d_bytes += bytes;
	else
		T.total.d2h_bytes += bytes;
	T.total.pageable_copies += pageable;
	if (!c)
		return;
	if (dir == TR_H2D)
		c->h2d_bytes += bytes;
	else
		c->d2h_bytes += bytes;
	c->pageable_copies += pageable;

	struct op *o = new_op(OP_COPY);
	o->dir = dir;
	o->host_sync = pageable;
	o->bytes = bytes;
	o->cb = cb;
	o->ce = ce;
}

void tr_sync(uint64_t cb, uint64_t ce)
{
	if (T.cur >= T.iters)
		return;
	struct op *o = new_op(OP_SYNC);
	o->cb = cb;
	o->ce = ce;
}

void tr_dev_alloc(uint64_t bytes)
{
	T.live += bytes;
	if (T.cur < T.iters && T.live > T.it[T.cur].peak)
		T.it[T.cur].peak = T.live;
	if (T.cur < T.iters)
		T.it[T.cur].live_end = T.live;
}

void tr_dev_free(uint64_t bytes)
{
	T.live -= bytes < T.live ? bytes : T.live;
	if (T.cur < T.iters)
		T.it[T.cur].live_end = T.live;
}

void tr_alloc_failure(uint64_t request, uint64_t free, uint64_t total, unsigned flushed, uint64_t flushed_bytes,
		      bool retry_ok)
{
	struct counts *c = cur_counts();

	T.total.alloc_failures++;
	if (c)
		c->alloc_failures++;
	T.fails = grow(T.fails, &T.capfails, T.nfails + 1, sizeof(*T.fails));
	T.fails[T.nfails++] =
	    (struct failure){T.cur < T.iters ? T.cur : 0, request, free, total, flushed_bytes, flushed, retry_ok};
}

void tr_host_alloc(void)
{
	T.host_allocs++;
}

void tr_host_free(void)
{
	T.host_frees++;
}

void tr_workers_started(unsigned i)
{
	if (i < T.iters)
		T.it[i].workers_started = true;
}

void tr_data_file_created(void)
{
	T.files_created++;
}

void tr_comm_enable(double gbps)
{
	T.comm_on = true;
	T.comm_gbps = gbps;
	T.comms = calloc(T.iters ? T.iters : 1, sizeof(*T.comms));
}

void tr_comm(unsigned iter, uint64_t bytes, uint64_t cb, uint64_t ce, const struct tr_kslot *before,
	     const struct tr_kslot *overlap, uint64_t end, uint64_t gpu_ns)
{
	if (!T.comms || iter >= T.iters)
		return;
	T.comms[iter] = (struct comm_rec){true, bytes, cb, ce, end, gpu_ns, before, overlap};
}

/*
 * An all-reduce's times, from the trainer's own clocks: it can start once its call
 * was made and the compute before it ended (start); it ended when the host saw it
 * (end). overlapped: the part of its GPU time (from start, as long as the events
 * around it on its stream say: gpu_ns, else up to end) the overlapped kernel ran
 * in; exposed: the part of [start, end] the overlapped kernel did not run in,
 * the wait for communication that no compute hid (as the breakdown sweeps it).
 */
struct comm_times {
	uint64_t start, end, exposed, overlapped, transfer;
};

static struct comm_times comm_times(const struct comm_rec *c)
{
	struct comm_times t = {0};
	t.start = c->cb;
	if (c->before && c->before->end > t.start)
		t.start = c->before->end;
	t.end = c->end > t.start ? c->end : t.start;
	uint64_t hidden = 0; /* of [start, end]: under the overlapped kernel */
	if (c->overlap) {
		uint64_t gend = c->gpu_ns && t.start + c->gpu_ns < t.end ? t.start + c->gpu_ns : t.end;
		uint64_t b = c->overlap->begin > t.start ? c->overlap->begin : t.start;
		uint64_t e = c->overlap->end < gend ? c->overlap->end : gend;
		t.overlapped = e > b ? e - b : 0;
		e = c->overlap->end < t.end ? c->overlap->end : t.end;
		hidden = e > b ? e - b : 0;
	}
	t.exposed = t.end - t.start - hidden;
	t.transfer = T.comm_gbps > 0 ? (uint64_t)((double)c->bytes / T.comm_gbps) : 0;
	return t;
}

/* ---- 3. resolution ---- */

struct ival {
	uint64_t b, e;
	int cat;	     /* enum tr_cat */
	bool gpu;	     /* a GPU-side interval (counts as GPU busy) */
	bool host;	     /* a host call (counts as host blocked) */
	unsigned wfirst, wk; /* input: the workers waited for (wk == 0: a file call of the trainer's) */
};

struct ev {
	uint64_t t;
	int delta;
	int cat;
	bool gpu;
	unsigned wfirst, wk;
};

static int ev_cmp(const void *a, const void *b)
{
	const struct ev *x = a, *y = b;
	return x->t < y->t ? -1 : x->t > y->t;
}

struct result {
	uint64_t cat_ns[TR_NCAT + 1];
	uint64_t blocked_ns[TR_NCAT];
	uint64_t gpu_busy, kernel_ns;
	uint64_t split_ns[NSPLIT]; /* cat_ns[TR_INPUT] split: input_io + input_cpu + input_wait */
};

/* Slack of the simulated GPU's copy timer (a sleep) over bytes/bandwidth. */
#define COPY_MARGIN_NS 100000ull

/* How long an async copy takes: bytes at the link's bandwidth, or the host's own
 * memcpy speed when that is slower (the simulated GPU really moves the data). */
static uint64_t copy_ns(uint64_t bytes)
{
	double gbps = T.memcpy_gbps > 0 && T.memcpy_gbps < T.pinned_gbps ? T.memcpy_gbps : T.pinned_gbps;
	return (uint64_t)((double)bytes / gbps);
}

/*
 * The GPU interval of a copy from the stream order: it starts when both the
 * call was made and the previous op on the stream finished; a host-synchronous
 * copy ends when its call returns. An async copy's end is seen through what
 * follows it: when the next kernel was launched (or the next sync called) before
 * the copy could have finished (bytes/bandwidth after its call returned), that op waited
 * for it, so the copy ended where the kernel began (FIFO) or where the sync
 * returned, but no later than the copy's time after its call returned (on a
 * loaded machine the stream's worker thread may start the next op late: the GPU
 * idles meanwhile); otherwise the stream idled after the copy, which took its
 * time (e.g. the kernels launched after the fragmentation pattern).
 */
/*
 * The first index of a list whose entries carry an iteration, in the order
 * they were recorded (iterations only increase), at or after iteration i.
 * RATIONALE: resolving each iteration by a scan of every op made the trainer's
 * exit quadratic: 27,000 iterations took minutes to print their truth.
 */
#define FIRST_OF(arr, n, i)                                                                                            \
	({                                                                                                             \
		size_t lo_ = 0, hi_ = (n);                                                                             \
		while (lo_ < hi_) {                                                                                    \
			size_t mid_ = lo_ + (hi_ - lo_) / 2;                                                           \
			if ((arr)[mid_].iter < (i))                                                                    \
				lo_ = mid_ + 1;                                                                        \
			else                                                                                           \
				hi_ = mid_;                                                                            \
		}                                                                                                      \
		lo_;                                                                                                   \
	})

static size_t resolve_iter(unsigned i, struct ival **out, size_t *cap)
{
	size_t n = 0;
	uint64_t prev_end = T.it[i].start;

	for (size_t j = FIRST_OF(T.ops, T.nops, i); j < T.nops; j++) {
		struct op *o = &T.ops[j];
		if (o->iter != i)
			break;
		*out = grow(*out, cap, n + 2, sizeof(**out));
		if (o->type == OP_KERNEL) {
			(*out)[n++] = (struct ival){o->k->begin, o->k->end, TR_COMPUTE, true, false, 0, 0};
			prev_end = o->k->end;
		} else if (o->type == OP_SYNC) {
			(*out)[n++] = (struct ival){o->cb, o->ce, TR_SYNC, false, true, 0, 0};
		} else {
			uint64_t b = o->cb > prev_end ? o->cb : prev_end, e;
			if (o->host_sync) {
				e = o->ce;
			} else {
				uint64_t dur = copy_ns(o->bytes);
				uint64_t est = b + dur;
				/* queued at the latest when its call returned; done by then + dur + margin */
				uint64_t latest =
				    (o->ce > prev_end ? o->ce : prev_end) + dur + COPY_MARGIN_NS + dur / 5;
				e = UINT64_MAX;
				for (size_t m = j + 1; m < T.nops; m++) {
					struct op *q = &T.ops[m];
					if (q->iter != i)
						break;
					/* q's kernel start, or the return of the sync or copy call q */
					uint64_t bound = q->type == OP_KERNEL ? q->k->begin : q->ce;
					if (q->cb <=
					    latest) /* q was queued behind the copy: it went on when the copy ended, */
						e = bound < latest ? bound
								   : latest; /* unless the stream's worker was late */
					else
						e = bound < est ? bound : est; /* the stream idled after the copy */
					break;
				}
				if (e ==
				    UINT64_MAX) /* nothing after it: cannot happen, the iteration ends with a sync */
					e = o->ce;
			}
			if (e < b)
				e = b;
			(*out)[n++] = (struct ival){b, e, o->dir, true, false, 0, 0};
			(*out)[n++] = (struct ival){o->cb, o->ce, o->dir, false, true, 0, 0};
			prev_end = e;
		}
	}
	/* the all-reduce: communication from when it could start to when the host saw it end */
	if (T.comms && T.comms[i].set) {
		struct comm_times ct = comm_times(&T.comms[i]);
		*out = grow(*out, cap, n + 1, sizeof(**out));
		(*out)[n++] = (struct ival){ct.start, ct.end, TR_COMM, true, false, 0, 0};
	}
	for (size_t j = FIRST_OF(T.inputs, T.ninputs, i); j < T.ninputs; j++) {
		if (T.inputs[j].iter != i)
			break;
		*out = grow(*out, cap, n + 1, sizeof(**out));
		(*out)[n++] = (struct ival){T.inputs[j].b, T.inputs[j].e, TR_INPUT, false, true, T.inputs[j].wfirst,
					    T.inputs[j].wk};
	}
	return n;
}

static int win_cmp(const void *a, const void *b)
{
	const struct window *x = a, *y = b;
	if (x->worker != y->worker)
		return x->worker < y->worker ? -1 : 1;
	return x->b < y->b ? -1 : x->b > y->b;
}

/* Once, before the first split: the windows by worker, then by time. */
static void windows_index(void)
{
	if (T.wins_of)
		return;
	qsort(T.wins, T.nwins, sizeof(*T.wins), win_cmp);
	T.wins_of = calloc((size_t)T.nworkers + 1, sizeof(*T.wins_of));
	if (!T.wins_of) {
		fprintf(stderr, "trainer: out of host memory for the ground truth\n");
		exit(1);
	}
	size_t j = 0;
	for (unsigned w = 0; w <= T.nworkers; w++) {
		while (j < T.nwins && T.wins[j].worker < w)
			j++;
		T.wins_of[w] = j;
	}
}

/*
 * The input instants [a, t) of a wait for workers first .. first + k - 1 (k > 0),
 * split as docs/workloads.md says: each worker takes 1/k of it; the part its
 * windows cover goes by their proportions (io_ns, cpu_ns and the rest of the
 * window), the part they do not is wait (the worker waiting for an index).
 */
static void split_wait(uint64_t a, uint64_t t, unsigned first, unsigned k, double *split)
{
	windows_index();
	for (unsigned w = first; w < first + k; w++) {
		double io = 0, cpu = 0;
		if (w < T.nworkers) {
			size_t lo = T.wins_of[w], hi = T.wins_of[w + 1];
			while (lo < hi) { /* the first window ending after a: one worker's windows do not overlap */
				size_t mid = lo + (hi - lo) / 2;
				if (T.wins[mid].e <= a)
					lo = mid + 1;
				else
					hi = mid;
			}
			for (size_t j = lo; j < T.wins_of[w + 1] && T.wins[j].b < t; j++) {
				const struct window *x = &T.wins[j];
				uint64_t b = x->b > a ? x->b : a, e = x->e < t ? x->e : t;
				if (e <= b)
					continue;
				double len = (double)(x->e - x->b), ov = (double)(e - b);
				double xio = (double)x->io_ns < len ? (double)x->io_ns : len;
				double xcpu = (double)x->cpu_ns < len - xio ? (double)x->cpu_ns : len - xio;
				io += ov * xio / len;
				cpu += ov * xcpu / len;
			}
		}
		split[SPLIT_IO] += io / k;
		split[SPLIT_CPU] += cpu / k;
		split[SPLIT_WAIT] += ((double)(t - a) - io - cpu) / k;
	}
}

/* Partition [start, end) of iteration i: each elementary segment goes to the
 * highest-priority category active over it, or to "other" when none is. */
static void sweep_iter(unsigned i, struct result *r)
{
	static struct ival *iv;
	static size_t capiv;
	static struct ev *ev;
	static size_t capev;
	uint64_t S = T.it[i].start, E = T.it[i].end;
	size_t n = resolve_iter(i, &iv, &capiv), ne = 0;

	memset(r, 0, sizeof(*r));
	ev = grow(ev, &capev, 2 * n + 1, sizeof(*ev));
	for (size_t j = 0; j < n; j++) {
		uint64_t b = iv[j].b < S ? S : iv[j].b, e = iv[j].e > E ? E : iv[j].e;
		if (iv[j].cat == TR_COMPUTE && iv[j].gpu)
			r->kernel_ns += iv[j].e > iv[j].b ? iv[j].e - iv[j].b : 0;
		if (e <= b)
			continue;
		if (iv[j].host)
			r->blocked_ns[iv[j].cat] += e - b;
		ev[ne++] = (struct ev){b, +1, iv[j].cat, iv[j].gpu, iv[j].wfirst, iv[j].wk};
		ev[ne++] = (struct ev){e, -1, iv[j].cat, iv[j].gpu, iv[j].wfirst, iv[j].wk};
	}
	qsort(ev, ne, sizeof(*ev), ev_cmp);

	/* input: the trainer's own file calls are input_io; a wait goes by its workers (the latest begun) */
	int active[TR_NCAT] = {0}, gpu = 0, files = 0;
	unsigned wfirst = 0, wk = 0;
	double split[NSPLIT] = {0};
	uint64_t cur = S;
	for (size_t j = 0; j <= ne; j++) {
		uint64_t t = j < ne ? ev[j].t : E;
		if (t > cur) {
			int c = TR_OTHER;
			for (int k = 0; k < TR_NCAT; k++)
				if (active[k] > 0) {
					c = k;
					break;
				}
			r->cat_ns[c] += t - cur;
			if (gpu > 0)
				r->gpu_busy += t - cur;
			if (c == TR_INPUT && (files > 0 || !wk))
				split[SPLIT_IO] += (double)(t - cur);
			else if (c == TR_INPUT)
				split_wait(cur, t, wfirst, wk, split);
			cur = t;
		}
		if (j < ne) {
			active[ev[j].cat] += ev[j].delta;
			gpu += ev[j].gpu ? ev[j].delta : 0;
			if (ev[j].cat == TR_INPUT && !ev[j].wk)
				files += ev[j].delta;
			else if (ev[j].cat == TR_INPUT && ev[j].delta > 0)
				wfirst = ev[j].wfirst, wk = ev[j].wk;
		}
	}
	/* whole nanoseconds that sum to the input time exactly */
	uint64_t in = r->cat_ns[TR_INPUT];
	uint64_t io = (uint64_t)llround(split[SPLIT_IO] > 0 ? split[SPLIT_IO] : 0);
	uint64_t cpu = (uint64_t)llround(split[SPLIT_CPU] > 0 ? split[SPLIT_CPU] : 0);
	io = io < in ? io : in;
	cpu = cpu < in - io ? cpu : in - io;
	r->split_ns[SPLIT_IO] = io;
	r->split_ns[SPLIT_CPU] = cpu;
	r->split_ns[SPLIT_WAIT] = in - io - cpu;
}

/* ---- 4. JSON ---- */

static void write_counts(FILE *f, const struct counts *c)
{
	fprintf(f,
		"\"files_opened\":%llu,\"stats\":%llu,\"metadata_ops\":%llu,\"bytes_read\":%llu,"
		"\"h2d_bytes\":%llu,\"d2h_bytes\":%llu,\"pageable_copies\":%llu,\"copies\":%llu,\"launches\":%llu,"
		"\"syncs\":%llu,\"allocs\":%llu,\"frees\":%llu,\"alloc_failures\":%llu",
		(unsigned long long)c->files_opened, (unsigned long long)c->stats,
		(unsigned long long)(c->files_opened + c->stats), (unsigned long long)c->bytes_read,
		(unsigned long long)c->h2d_bytes, (unsigned long long)c->d2h_bytes,
		(unsigned long long)c->pageable_copies, (unsigned long long)c->copies, (unsigned long long)c->launches,
		(unsigned long long)c->syncs, (unsigned long long)c->allocs, (unsigned long long)c->frees,
		(unsigned long long)c->alloc_failures);
}

static void write_breakdown(FILE *f, const uint64_t *ns)
{
	/* the schema's order: input, h2d, compute, comm, d2h, sync, other */
	static const int order[] = {TR_INPUT, TR_H2D, TR_COMPUTE, TR_COMM, TR_D2H, TR_SYNC, TR_OTHER};
	fputc('{', f);
	for (int k = 0; k < 7; k++)
		fprintf(f, "%s\"%s\":%llu", k ? "," : "", cat_name[order[k]], (unsigned long long)ns[order[k]]);
	fputc('}', f);
}

static void write_split(FILE *f, const uint64_t *ns)
{
	fputs(",\"input_split_ns\":{", f);
	for (int k = 0; k < NSPLIT; k++)
		fprintf(f, "%s\"%s\":%llu", k ? "," : "", split_name[k], (unsigned long long)ns[k]);
	fputc('}', f);
}

static int u64_cmp(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
	return x < y ? -1 : x > y;
}

void tr_truth_write(FILE *f)
{
	uint64_t sum[TR_NCAT + 1] = {0}, split_sum[NSPLIT] = {0}, peak = 0;
	uint64_t *walls = calloc(T.iters ? T.iters : 1, sizeof(*walls));

	fputs("\"iterations\":[", f);
	for (unsigned i = 0; i < T.iters; i++) {
		struct iter *it = &T.it[i];
		struct result r;
		sweep_iter(i, &r);
		uint64_t wall = it->end - it->start;
		walls[i] = wall;
		for (int k = 0; k <= TR_NCAT; k++)
			sum[k] += r.cat_ns[k];
		for (int k = 0; k < NSPLIT; k++)
			split_sum[k] += r.split_ns[k];
		if (it->peak > peak)
			peak = it->peak;
		fprintf(f, "%s{\"index\":%u,\"start_ns\":%llu,\"end_ns\":%llu,\"wall_ns\":%llu,\"breakdown_ns\":",
			i ? "," : "", i, (unsigned long long)it->start, (unsigned long long)it->end,
			(unsigned long long)wall);
		write_breakdown(f, r.cat_ns);
		write_split(f, r.split_ns);
		fprintf(f, ",\"host_blocked_ns\":{\"input\":%llu,\"h2d\":%llu,\"d2h\":%llu,\"sync\":%llu}",
			(unsigned long long)r.blocked_ns[TR_INPUT], (unsigned long long)r.blocked_ns[TR_H2D],
			(unsigned long long)r.blocked_ns[TR_D2H], (unsigned long long)r.blocked_ns[TR_SYNC]);
		fprintf(f, ",\"gpu_busy_ns\":%llu,\"gpu_idle_ns\":%llu,\"kernel_ns\":%llu,",
			(unsigned long long)r.gpu_busy, (unsigned long long)(wall - r.gpu_busy),
			(unsigned long long)r.kernel_ns);
		write_counts(f, &it->c);
		fprintf(f,
			",\"batch\":{\"reader_pid\":%d,\"read_begin_ns\":%llu,\"read_end_ns\":%llu,\"io_ns\":%llu,"
			"\"cpu_ns\":%llu},\"workers_started\":%s,\"device_bytes_live\":%llu,\"device_bytes_peak\":%llu",
			it->reader_pid, (unsigned long long)it->read_begin, (unsigned long long)it->read_end,
			(unsigned long long)it->read_io, (unsigned long long)it->read_cpu,
			it->workers_started ? "true" : "false", (unsigned long long)it->live_end,
			(unsigned long long)it->peak);
		if (T.comm_on) {
			const struct comm_rec *c = &T.comms[i];
			struct comm_times t = comm_times(c);
			fprintf(f,
				",\"comm\":{\"allreduce_bytes\":%llu,\"call_begin_ns\":%llu,\"call_end_ns\":%llu,"
				"\"compute_end_ns\":%llu,\"start_ns\":%llu,\"end_ns\":%llu,\"exposed_ns\":%llu,"
				"\"overlapped_ns\":%llu,\"transfer_ns\":%llu}",
				(unsigned long long)c->bytes, (unsigned long long)c->cb, (unsigned long long)c->ce,
				(unsigned long long)(c->before ? c->before->end : 0), (unsigned long long)t.start,
				(unsigned long long)t.end, (unsigned long long)t.exposed,
				(unsigned long long)t.overlapped, (unsigned long long)t.transfer);
		}
		fputc('}', f);
	}
	fputs("],\"alloc_failures\":[", f);
	for (size_t j = 0; j < T.nfails; j++) {
		struct failure *x = &T.fails[j];
		fprintf(f,
			"%s{\"iteration\":%u,\"request\":%llu,\"free\":%llu,\"total\":%llu,\"flushed_segments\":%u,"
			"\"flushed_bytes\":%llu,\"retry_ok\":%s}",
			j ? "," : "", x->iter, (unsigned long long)x->request, (unsigned long long)x->free,
			(unsigned long long)x->total, x->flushed, (unsigned long long)x->flushed_bytes,
			x->retry_ok ? "true" : "false");
	}

	uint64_t wall = T.iters ? T.it[T.iters - 1].end - T.it[0].start : 0;
	fprintf(f, "],\"totals\":{\"iterations\":%u,\"wall_ns\":%llu,\"breakdown_ns\":", T.iters,
		(unsigned long long)wall);
	write_breakdown(f, sum);
	write_split(f, split_sum);
	fputc(',', f);
	write_counts(f, &T.total);
	fprintf(f, ",\"host_allocs\":%llu,\"host_frees\":%llu,\"data_files_created\":%llu,\"by_api\":{",
		(unsigned long long)T.host_allocs, (unsigned long long)T.host_frees,
		(unsigned long long)T.files_created);
	for (int a = 0; a < TR_NAPI; a++)
		fprintf(f, "%s\"%s\":%llu", a ? "," : "", api_name[a], (unsigned long long)T.by_api[a]);
	fputc('}', f);
	if (T.comm_on) {
		uint64_t n = 0, bytes = 0, exposed = 0, overlapped = 0, busy = 0;
		for (unsigned i = 0; i < T.iters; i++) {
			if (!T.comms[i].set)
				continue;
			struct comm_times t = comm_times(&T.comms[i]);
			n++, bytes += T.comms[i].bytes, exposed += t.exposed, overlapped += t.overlapped;
			busy += t.end - t.start;
		}
		fprintf(f,
			",\"comm\":{\"allreduces\":%llu,\"bytes\":%llu,\"comm_ns\":%llu,\"exposed_ns\":%llu,"
			"\"overlapped_ns\":%llu}",
			(unsigned long long)n, (unsigned long long)bytes, (unsigned long long)busy,
			(unsigned long long)exposed, (unsigned long long)overlapped);
	}
	fputc('}', f);

	/* summary: docs/definitions.md's bottleneck rule on the totals */
	qsort(walls, T.iters, sizeof(*walls), u64_cmp);
	uint64_t median = !T.iters	? 0
			  : T.iters % 2 ? walls[T.iters / 2]
					: (walls[T.iters / 2 - 1] + walls[T.iters / 2]) / 2;
	static const int order[] = {TR_INPUT, TR_H2D, TR_COMPUTE, TR_COMM, TR_D2H, TR_SYNC, TR_OTHER};
	fprintf(f, ",\"summary\":{\"wall_ns_median\":%llu,\"breakdown_fraction\":{", (unsigned long long)median);
	for (int k = 0; k < 7; k++)
		fprintf(f, "%s\"%s\":%.6f", k ? "," : "", cat_name[order[k]],
			wall ? (double)sum[order[k]] / (double)wall : 0.0);
	fputs("},\"input_split_fraction\":{", f);
	for (int k = 0; k < NSPLIT; k++)
		fprintf(f, "%s\"%s\":%.6f", k ? "," : "", split_name[k],
			wall ? (double)split_sum[k] / (double)wall : 0.0);
	const char *bottleneck = "compute";
	if (!wall || (double)sum[TR_COMPUTE] < 0.8 * (double)wall) {
		int best = -1;
		for (int k = 0; k < 7; k++) {
			int c = order[k];
			if (c != TR_COMPUTE && (best < 0 || sum[c] > sum[best]))
				best = c;
		}
		bottleneck = cat_name[best];
	}
	fprintf(f, "},\"bottleneck\":\"%s\",\"device_bytes_peak\":%llu}", bottleneck, (unsigned long long)peak);
	free(walls);
}
