/*
 * analyze.c - the analysis driver: reads the merged stream of records two or
 * three times and fills struct an_analysis (see analyze.h).
 *
 * Divided into:
 *   1. names, options and thresholds;
 *   2. bounded tables: processes, threads;
 *   3. pass 1: processes, roles, the training thread, NVTX ranges and step marks;
 *   4. the summary, the per-rank table (one more analysis per other trainer
 *      process, with that process forced) and an_analyze().
 * The iterations come from analyze_iters.c (pass 1b for automatic detection),
 * the attribution of their wall time from analyze_attr.c (pass 2).
 *
 * RATIONALE: several passes over the files instead of buffering records: the
 * training thread and the iteration boundaries must be known before a record can
 * be attributed, and reading a file again costs less than holding it in memory
 * (the point of the bounded-memory budget).
 */
#include "analyze.h"
#include "analyze_int.h"
#include "findings.h"
#include "summary.h"

#include <errno.h>
#include <math.h>
#include <pthread.h>
#include <regex.h>
#include <stdlib.h>
#include <string.h>

/* ------------------------------------------------ 1. names and options */

const char *const an_cat_name[AN_CAT__COUNT] = {
#define SP_CATEGORY(id, name) name,
#include "stepprof/categories.def"
#undef SP_CATEGORY
};
const char *const an_split_name[AN_SPLIT__COUNT] = {"input_io", "input_cpu", "input_wait"};
const char *const an_blk_name[AN_BLK__COUNT] = {"input", "h2d", "d2h", "sync"};
const char *const an_role_name[3] = {"trainer", "worker", "other"};
const char *const an_source_name[4] = {"none", "nvtx", "api", "auto"};
const char *const an_severity_name[3] = {"info", "warning", "critical"};

const char *const an_finding_name[AN_F__COUNT] = {
#define SP_FINDING(id, name) [AN_F_##id] = name,
#include "findings.def"
#undef SP_FINDING
};
const char *const an_threshold_name[AN_T__COUNT] = {
#define SP_THRESHOLD(id, name, dflt, help) [AN_T_##id] = name,
#include "findings.def"
#undef SP_THRESHOLD
};
const char *const an_threshold_help[AN_T__COUNT] = {
#define SP_THRESHOLD(id, name, dflt, help) [AN_T_##id] = help,
#include "findings.def"
#undef SP_THRESHOLD
};
const double an_threshold_default[AN_T__COUNT] = {
#define SP_THRESHOLD(id, name, dflt, help) [AN_T_##id] = (dflt),
#include "findings.def"
#undef SP_THRESHOLD
};

void an_options_init(struct an_options *o)
{
	memset(o, 0, sizeof(*o));
	for (int i = 0; i < AN_T__COUNT; i++)
		o->threshold[i] = an_threshold_default[i];
}

int an_parse_threshold(const char *arg, const char *const *names, int n, double *values, const char *verb, char *err,
		       size_t errlen)
{
	const char *eq = strchr(arg, '=');
	if (!eq) {
		snprintf(err, errlen, "--threshold %s: expected NAME=VALUE", arg);
		return -1;
	}
	size_t len = (size_t)(eq - arg);
	for (int i = 0; i < n; i++) {
		if (strlen(names[i]) != len || strncmp(arg, names[i], len))
			continue;
		char *end;
		double v = strtod(eq + 1, &end);
		if (end == eq + 1 || *end || !isfinite(v) || v < 0) {
			snprintf(err, errlen, "--threshold %s: not a non-negative number", arg);
			return -1;
		}
		values[i] = v;
		return 0;
	}
	snprintf(err, errlen, "--threshold %.*s: unknown threshold (see stepprof %s --help)", (int)len, arg, verb);
	return -1;
}

int an_options_set_threshold(struct an_options *o, const char *arg, char *err, size_t errlen)
{
	return an_parse_threshold(arg, an_threshold_name, AN_T__COUNT, o->threshold, "analyze", err, errlen);
}

static int cmp_u64(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
	return x < y ? -1 : x > y;
}

uint64_t an_quantile_u64(const uint64_t *v, size_t n, double q)
{
	if (!n)
		return 0;
	uint64_t *c = malloc(n * sizeof(*c));
	if (!c)
		return 0;
	memcpy(c, v, n * sizeof(*c));
	qsort(c, n, sizeof(*c), cmp_u64);
	/* nearest rank: the smallest value with at least q of the values at or below it */
	size_t k = (size_t)ceil(q * (double)n);
	if (k < 1)
		k = 1;
	if (k > n)
		k = n;
	uint64_t r = c[k - 1];
	free(c);
	return r;
}

/* -------------------------------------------------- 2. bounded tables */

uint64_t hash64(uint64_t x)
{
	x ^= x >> 33;
	x *= 0xff51afd7ed558ccdull;
	x ^= x >> 33;
	x *= 0xc4ceb9fe1a85ec53ull;
	x ^= x >> 33;
	return x;
}

struct thr *thr_get(struct state *s, int32_t pid, int32_t tid)
{
	uint64_t key = (uint64_t)(uint32_t)pid << 32 | (uint32_t)tid;
	union hashmap_val *v = hashmap_slot(&s->thr, key, true);
	if (!v || v->p)
		return v ? v->p : NULL;
	struct thr *t = calloc(1, sizeof(*t));
	if (!t) {
		hashmap_del(&s->thr, key);
		return NULL;
	}
	t->pid = pid;
	t->tid = tid;
	v->p = t;
	return t;
}

struct an_proc *proc_find(struct an_analysis *a, int32_t pid)
{
	/* processes are few (ranks and loader workers): a linear scan with a one-entry cache */
	static __thread size_t last;
	if (last < a->nprocs && a->procs[last].pid == pid)
		return &a->procs[last];
	for (size_t i = 0; i < a->nprocs; i++)
		if (a->procs[i].pid == pid) {
			last = i;
			return &a->procs[i];
		}
	return NULL;
}

static struct an_proc *proc_get(struct state *s, int32_t pid)
{
	struct an_analysis *a = s->a;
	struct an_proc *p = proc_find(a, pid);
	if (p)
		return p;
	struct an_proc *v = realloc(a->procs, (a->nprocs + 1) * sizeof(*v));
	if (!v)
		return NULL;
	a->procs = v;
	uint64_t *g = realloc(s->gpu_end, (a->nprocs + 1) * sizeof(*g));
	if (!g)
		return NULL;
	s->gpu_end = g;
	g[a->nprocs] = 0;
	p = &a->procs[a->nprocs++];
	memset(p, 0, sizeof(*p));
	p->pid = pid;
	p->ppid = -1;
	p->rank = p->local_rank = p->world_size = -1;
	p->file = -1;
	p->role = AN_ROLE_OTHER;
	p->begin_ns = UINT64_MAX;
	/*
	 * A process that execs keeps its pid and writes a file per image (a pyenv
	 * shim: bash, then bash again, then python3): the process is described
	 * by its last image, the one that ran last (its name, rank, devices), and
	 * its first image's command line is kept beside (images > 1). The first file
	 * found would name a trainer started through a shell script "bash
	 * ./shim.sh". The merge already made the images one pid (merge.c).
	 */
	const struct sp_file_header *first = NULL, *last = NULL;
	for (size_t f = 0; f < s->src->nfiles; f++) {
		const struct sp_file_header *h = s->src->header(s->src->ctx, (int)f);
		if (!h || h->pid != pid || (h->features & SP_FEAT_BPF))
			continue;
		p->images++;
		p->lost += h->lost_records; /* plus the LOST records read later */
		a->lost += h->lost_records;
		if (!first || h->start_mono_ns < first->start_mono_ns)
			first = h;
		if (!last || h->start_mono_ns >= last->start_mono_ns) {
			last = h;
			p->file = (int)f;
		}
	}
	if (last) {
		p->ppid = last->ppid;
		p->rank = last->rank;
		p->local_rank = last->local_rank;
		p->world_size = last->world_size;
		snprintf(p->cmdline, sizeof(p->cmdline), "%.*s", (int)sizeof(p->cmdline) - 1, last->cmdline);
		snprintf(p->first_cmdline, sizeof(p->first_cmdline), "%.*s", (int)sizeof(p->first_cmdline) - 1,
			 first->cmdline);
	}
	return p;
}

/* Does the NVTX name (file, id) match --step-regex? Cached per file and id. */
static int name_matches(struct state *s, int file, uint32_t id)
{
	if (!s->re_ok || !id || file < 0 || (size_t)file >= s->src->nfiles)
		return 0;
	if (id >= s->nverdict[file]) {
		uint32_t n = id + 1 > 2 * s->nverdict[file] ? id + 1 : 2 * s->nverdict[file];
		if (n > 0x1000000u)
			return 0;
		uint8_t *v = realloc(s->verdict[file], n);
		if (!v)
			return 0;
		memset(v + s->nverdict[file], 0, n - s->nverdict[file]);
		s->verdict[file] = v;
		s->nverdict[file] = n;
	}
	uint8_t *v = &s->verdict[file][id];
	if (!*v) {
		const char *name = s->src->string(s->src->ctx, file, id);
		*v = name && regexec(&s->re, name, 0, NULL, 0) == 0 ? 2 : 1;
	}
	return *v == 2;
}

static int push_mark(struct mark **v, size_t *n, size_t *cap, const struct sp_event *ev)
{
	if (*n == *cap) {
		size_t c = *cap ? *cap * 2 : 256;
		struct mark *m = realloc(*v, c * sizeof(*m));
		if (!m)
			return -1;
		*v = m;
		*cap = c;
	}
	(*v)[*n] = (struct mark){ev->pid, ev->tid, ev->begin_ns, ev->end_ns};
	(*n)++;
	return 0;
}

int is_sig_kind(unsigned k)
{
	return k == SP_K_COPY || k == SP_K_MEMSET || k == SP_K_LAUNCH || k == SP_K_SYNC;
}

int is_input_kind(unsigned k)
{
	return k == SP_K_OPEN || k == SP_K_STAT || k == SP_K_READ || k == SP_K_LISTDIR || k == SP_K_LOADER_WAIT;
}

/* ---------------------------------------------------------- 3. pass 1 */

static void callspan_add(struct callspan *c, const struct sp_event *ev)
{
	if (!c->n++ || ev->begin_ns < c->b)
		c->b = ev->begin_ns;
	if (ev->end_ns > c->e)
		c->e = ev->end_ns;
}

/* A call that blocks the host until the GPU is done (a *Synchronize, not a wait-event or a query). */
int is_blocking_sync(const struct sp_event *ev)
{
	static __thread uint8_t verdict[SP_API__COUNT]; /* 0 unknown, 1 no, 2 yes */
	if (ev->kind != SP_K_SYNC || ev->api >= SP_API__COUNT)
		return 0;
	if (!verdict[ev->api])
		verdict[ev->api] = strstr(sp_api_name[ev->api], "Synchronize") ? 2 : 1;
	return verdict[ev->api] == 2;
}

struct pass1 {
	struct state *s;
	struct thr *t;
	struct an_proc *p;
	int err;
};

static void pass1_record(void *arg, const struct sp_event *e, int file)
{
	struct pass1 *c = arg;
	struct state *s = c->s;
	struct an_analysis *a = s->a;
	if (c->err)
		return;
#define ev (*e)
	/* consecutive records mostly come from the same thread: skip the lookups */
	if (!c->t || c->t->pid != ev.pid || c->t->tid != ev.tid) {
		c->p = proc_get(s, ev.pid);
		c->t = thr_get(s, ev.pid, ev.tid);
		if (!c->p || !c->t) {
			c->err = 1;
			return;
		}
	}
	struct thr *t = c->t;
	struct an_proc *p = c->p;
	a->records++;
	p->records++;
	a->comm_records += ev.kind == SP_K_COMM || ev.kind == SP_K_COMM_INIT;
	t->records++;
	if (ev.begin_ns < p->begin_ns)
		p->begin_ns = ev.begin_ns;
	if (ev.end_ns > p->end_ns)
		p->end_ns = ev.end_ns;
	if (ev.begin_ns < a->run_begin_ns)
		a->run_begin_ns = ev.begin_ns;
	if (ev.end_ns > a->run_end_ns)
		a->run_end_ns = ev.end_ns;
	switch (ev.kind) {
	case SP_K_LOST:
		p->lost += ev.f[SP_F_COUNT];
		a->lost += ev.f[SP_F_COUNT];
		break;
	case SP_K_FORK: {
		int32_t parent = ev.pid;
		struct an_proc *ch = proc_get(s, (int32_t)ev.f[SP_F_PID]);
		if (!ch) {
			c->err = 1;
			return;
		}
		if (ch->ppid < 0)
			ch->ppid = parent;
		c->t = NULL; /* the process table may have moved */
		break;
	}
	case SP_K_COPY:
	case SP_K_MEMSET:
	case SP_K_SYNC:
	case SP_K_ALLOC:
	case SP_K_FREE:
	case SP_K_ALLOC_FAILED:
	case SP_K_HOST_ALLOC:
	case SP_K_HOST_FREE:
	case SP_K_HOST_REGISTER:
	case SP_K_HOST_UNREGISTER:
	case SP_K_MEM_INFO:
	case SP_K_GPU_SPAN2:
		p->cuda_calls++;
		a->cuda_calls++;
		break;
	default:
		break;
	}
	switch (ev.kind) {
	case SP_K_LAUNCH:
		p->cuda_calls++;
		a->cuda_calls++;
		t->launches++;
		p->launches++;
		callspan_add(&t->launch, &ev);
		break;
	case SP_K_COPY:
		if (ev.f[SP_F_DIRECTION] == SP_DIR_H2D || ev.f[SP_F_DIRECTION] == SP_DIR_D2H)
			callspan_add(&t->feed, &ev);
		break;
	case SP_K_RANGE:
		if (!name_matches(s, file, (uint32_t)ev.f[SP_F_NAME]))
			break;
		t->marks++;
		if (push_mark(&s->ranges, &s->nranges, &s->capranges, &ev))
			c->err = 1;
		break;
	case SP_K_STEP:
		t->marks++;
		if (push_mark(&s->steps, &s->nsteps, &s->capsteps, &ev))
			c->err = 1;
		break;
	case SP_K_GPU_SPAN: {
		size_t pi = (size_t)(p - a->procs);
		p->cuda_calls++;
		a->cuda_calls++;
		if (ev.end_ns > s->gpu_end[pi])
			s->gpu_end[pi] = ev.end_ns;
		break;
	}
	}
	if (is_sig_kind(ev.kind) && ev.end_ns > t->last_sig_end)
		t->last_sig_end = ev.end_ns;
	if (is_input_kind(ev.kind)) {
		t->inputs++;
		callspan_add(&t->feed, &ev);
		if (ev.kind == SP_K_LOADER_WAIT)
			callspan_add(&t->batch, &ev);
	}
	if (is_blocking_sync(&ev))
		callspan_add(&t->wait, &ev);
#undef ev
}

/* Counts and markers: the unordered scan when the source has one, else the merged stream. */
static int pass1(struct state *s)
{
	struct an_analysis *a = s->a;
	struct pass1 c = {.s = s};
	a->run_begin_ns = UINT64_MAX;
	if (s->src->scan) {
		if (s->src->scan(s->src->ctx, pass1_record, &c))
			return -1;
	} else {
		/* from the start: a per-rank pass follows a finished analysis of the same source */
		const struct sp_event *e;
		int file;
		if (s->src->rewind(s->src->ctx))
			return -1;
		while (!c.err && (e = s->src->next(s->src->ctx, &file)))
			pass1_record(&c, e, file);
	}
	if (c.err)
		return -1;
	if (a->run_begin_ns == UINT64_MAX)
		a->run_begin_ns = 0;
	return 0;
}

/*
 * The process analysed (analyze.h, an_options): NULL with a reason in err when
 * --rank names a rank no process has.
 */
static struct an_proc *select_trainer(struct state *s, char *err, size_t errlen)
{
	struct an_analysis *a = s->a;
	const struct an_options *o = &a->opt;
	struct an_proc *best = NULL;
	if (o->rank_given) {
		/* loader workers inherit RANK: the process of that rank that launched the most */
		for (size_t i = 0; i < a->nprocs; i++) {
			struct an_proc *p = &a->procs[i];
			if (p->rank == o->rank && (!best || p->launches > best->launches ||
						   (p->launches == best->launches && p->records > best->records)))
				best = p;
		}
		if (!best) {
			int n = snprintf(err, errlen, "--rank %d: no process has this rank (ranks:", o->rank);
			int any = 0;
			for (size_t i = 0; i < a->nprocs && n > 0 && (size_t)n < errlen; i++)
				if (a->procs[i].launches && a->procs[i].rank >= 0) {
					n += snprintf(err + n, errlen - (size_t)n, " %d", a->procs[i].rank);
					any = 1;
				}
			if (n > 0 && (size_t)n < errlen)
				snprintf(err + n, errlen - (size_t)n, "%s)", any ? "" : " none");
		}
		return best;
	}
	if (o->pid)
		return proc_find(a, o->pid);
	/* default: the lowest rank among the processes that launched kernels */
	for (size_t i = 0; i < a->nprocs; i++) {
		struct an_proc *p = &a->procs[i];
		if (p->launches && p->rank >= 0 &&
		    (!best || p->rank < best->rank || (p->rank == best->rank && p->launches > best->launches)))
			best = p;
	}
	if (best)
		return best;
	/* no ranks: the most launches; without any launch, the most records */
	for (size_t i = 0; i < a->nprocs; i++) {
		struct an_proc *p = &a->procs[i];
		if (!best || p->launches > best->launches ||
		    (!p->launches && !best->launches && p->records > best->records))
			best = p;
	}
	/*
	 * Without launches, the process that marked steps, if any; else the
	 * busiest process that no other process of the trace started (a CPU-only
	 * DataLoader job: the main process, whose forked workers read the files
	 * and may well record more than it).
	 */
	if (best && !best->launches && s->nsteps)
		return proc_find(a, s->steps[0].pid);
	if (best && !best->launches) {
		struct an_proc *root = NULL;
		for (size_t i = 0; i < a->nprocs; i++) {
			struct an_proc *p = &a->procs[i];
			if (p->file >= 0 && !proc_find(a, p->ppid) && (!root || p->records > root->records))
				root = p;
		}
		if (root)
			best = root;
	}
	return best;
}

/*
 * Do the calls c recur while thread t launches (over half of the time from its
 * first launch to its last), rather than once, at start-up (a helper thread's
 * first launch can read a kernel cache)?
 */
static int recurs(const struct callspan *c, const struct thr *t)
{
	return c->n >= 2 && 2 * (c->e - c->b) >= t->launch.e - t->launch.b;
}

/*
 * Is t rather than u the training thread? Both are among the threads that
 * launch a substantial share (choose_trainer): the thread that runs the loop,
 * which need not launch the most (PyTorch launches the backward kernels from its
 * autograd engine's thread while the loop waits for it): first the one that
 * marks the iterations (the user said where the loop is); then one whose waits
 * for batches from loader processes recur over the run (a loader thread that
 * reads and decodes files on the GPU does not wait for them); then one whose
 * input calls or H2D/D2H copies recur (the loop waits for batches, copies them
 * in and reads results back; an engine thread only launches); then one whose
 * blocking syncs recur; then the most launches (the base rule); then
 * the most input calls, the most records, the lowest id: never the hash table's
 * order. docs/definitions.md has the rule and its reasons.
 */
static int thr_trains_more(const struct thr *t, const struct thr *u)
{
	if (t->marks != u->marks)
		return t->marks > u->marks;
	if (recurs(&t->batch, t) != recurs(&u->batch, u))
		return recurs(&t->batch, t);
	if (recurs(&t->feed, t) != recurs(&u->feed, u))
		return recurs(&t->feed, t);
	if (recurs(&t->wait, t) != recurs(&u->wait, u))
		return recurs(&t->wait, t);
	if (t->launches != u->launches)
		return t->launches > u->launches;
	if (t->inputs != u->inputs)
		return t->inputs > u->inputs;
	if (t->records != u->records)
		return t->records > u->records;
	return t->tid < u->tid;
}

/* The share of the process's top launching thread's launches that makes a thread a candidate: 1/8. */
#define LAUNCH_SHARE_DIV 8

/* The trainer process and its training thread; roles of every process. 0, or -1 (err). */
static int choose_trainer(struct state *s, char *err, size_t errlen)
{
	struct an_analysis *a = s->a;
	int any_launches = 0;
	for (size_t i = 0; i < a->nprocs; i++)
		if (a->procs[i].launches) {
			a->procs[i].role = AN_ROLE_TRAINER;
			any_launches = 1;
		}
	struct an_proc *best = select_trainer(s, err, errlen);
	if (!best)
		return a->opt.rank_given ? -1 : 0;
	a->trainer_pid = best->pid;
	/*
	 * The candidates: the threads with at least 1/LAUNCH_SHARE_DIV of the top
	 * thread's launches (every thread when none launches). A thread that launches
	 * little (a loader's pinned copies, a logger's sync) is never the loop's.
	 */
	uint64_t top = 0;
	union hashmap_val *v;
	for (size_t i = 0; (v = hashmap_next(&s->thr, &i, NULL));) {
		const struct thr *t = v->p;
		if (t->pid == best->pid && t->launches > top)
			top = t->launches;
	}
	struct thr *bt = NULL;
	/* NOTE: in the map's order: thr_trains_more orders the threads of a process totally (tid last) */
	for (size_t i = 0; (v = hashmap_next(&s->thr, &i, NULL));) {
		struct thr *t = v->p;
		if (t->pid == best->pid && t->launches * LAUNCH_SHARE_DIV >= top && (!bt || thr_trains_more(t, bt)))
			bt = t;
	}
	a->training_tid = bt ? bt->tid : best->pid;
	/*
	 * A loader worker may launch kernels too (a spawned DataLoader worker that
	 * decodes on the GPU): a descendant of a trainer that launches less than half
	 * of what that trainer launches, without a rank of its own (RANK unset or
	 * inherited, as workers inherit it), is its worker, not another rank: its
	 * file input is in the trainer's process tree. Ranks launch alike (each runs
	 * the same step), so a rank is never half of another.
	 */
	for (size_t i = 0; i < a->nprocs; i++) {
		struct an_proc *p = &a->procs[i];
		if (p->role != AN_ROLE_TRAINER || p == best)
			continue;
		const struct an_proc *q = proc_find(a, p->ppid);
		for (int depth = 0; q && !q->launches && q->ppid > 0 && depth < 64; depth++)
			q = proc_find(a, q->ppid);
		if (q && q->launches && p->launches * 2 < q->launches && (p->rank < 0 || p->rank == q->rank))
			p->role = AN_ROLE_WORKER;
	}
	/*
	 * Workers: descendants of a trainer (parent links from headers and FORK
	 * records), each tied to the trainer it descends from (its rank). A process
	 * seen only in an eBPF collector's file (no file of its own, so no header) is
	 * a descendant of the job the collector followed: a worker when the job has a
	 * trainer, of no known rank.
	 */
	for (size_t i = 0; i < a->nprocs; i++) {
		struct an_proc *p = &a->procs[i];
		if (p->role == AN_ROLE_TRAINER || p == best)
			continue;
		if (p->file < 0 && p->ppid < 0 && any_launches) {
			p->role = AN_ROLE_WORKER;
			continue;
		}
		int32_t pp = p->ppid;
		for (int depth = 0; pp > 0 && depth < 64; depth++) {
			struct an_proc *q = proc_find(a, pp);
			if (!q)
				break;
			/* no process launched: the descendants of the main process are its loader workers */
			if (q->role == AN_ROLE_TRAINER || (!any_launches && q == best)) {
				p->role = AN_ROLE_WORKER;
				p->trainer = q->pid;
				break;
			}
			pp = q->ppid;
		}
	}
	return 0;
}

/* ---------------------------------------- 4. summary, ranks, entry */

static void link_speed(struct state *s)
{
	struct an_analysis *a = s->a;
	struct an_proc *p = proc_find(a, a->trainer_pid);
	if (!p || p->file < 0)
		return;
	const struct sp_file_header *h = s->src->header(s->src->ctx, p->file);
	if (!h || !h->ndevices)
		return;
	const struct sp_device_info *d = &h->devices[0];
	if (!a->device_capacity)
		a->device_capacity = d->mem_bytes;
	for (unsigned k = 0; k < h->ndevices && k < SP_MAX_DEVICES; k++)
		a->dev_capacity[k] = h->devices[k].mem_bytes;
	/* per-lane GB/s after encoding, PCIe gen 1..6 */
	static const double lane[] = {0, 0.25, 0.5, 0.985, 1.969, 3.938, 7.877};
	unsigned g = d->pcie_gen_cur;
	if (g >= 1 && g <= 6 && d->pcie_width_cur)
		s->col.link_gbps = lane[g] * d->pcie_width_cur;
}

/*
 * No iterations: the whole run's input as one span, for small_file_storm and the
 * report. Its exposed input is the main process's time in input calls and in
 * waits for its loader workers (at most the run's wall time); the directories
 * with the most opens are kept for the report.
 */
static void run_input_close(struct state *s)
{
	struct an_analysis *a = s->a;
	struct an_iter *r = &a->run_input;
	r->start_ns = a->records ? a->run_begin_ns : 0;
	r->end_ns = a->records ? a->run_end_ns : 0;
	const struct an_proc *m = proc_find(a, a->trainer_pid);
	uint64_t in = m ? m->in_ns + m->in_wait_ns : 0, wall = r->end_ns - r->start_ns;
	r->bd[AN_INPUT] = in < wall ? in : wall;
	r->bd1[AN_INPUT] = r->bd[AN_INPUT];
	struct an_top dirs = s->col.dirs;
	an_top_sort(&dirs, 0);
	for (size_t i = 0; i < dirs.n && a->ninput_dirs < AN_INPUT_DIRS; i++) {
		snprintf(a->input_dirs[a->ninput_dirs], sizeof(a->input_dirs[0]), "%s", dirs.e[i].key);
		a->input_dir_opens[a->ninput_dirs++] = dirs.e[i].count;
	}
}

static void rank_fill(struct an_rank *r, const struct an_analysis *x, const struct an_proc *p)
{
	memset(r, 0, sizeof(*r));
	r->pid = p->pid;
	r->rank = p->rank;
	r->local_rank = p->local_rank;
	r->world_size = p->world_size;
	r->launches = p->launches;
	r->source_kind = x->source_kind;
	r->nit = x->nit;
	r->wall_total = x->wall_total;
	memcpy(r->bd_total, x->bd_total, sizeof(r->bd_total));
	r->top_finding = -1;
	for (size_t i = 0; i < x->nfnd && r->top_finding < 0; i++)
		if (x->fnd[i].severity >= 1)
			r->top_finding = x->fnd[i].kind;
	memcpy(r->bd1_total, x->bd1_total, sizeof(r->bd1_total));
	r->comm_overlapped_ns = x->comm_overlapped_ns;
	uint64_t *w = x->nit ? malloc(x->nit * sizeof(*w)) : NULL;
	if (w) {
		for (size_t i = 0; i < x->nit; i++)
			w[i] = x->it[i].end_ns - x->it[i].start_ns;
		r->wall_median = an_quantile_u64(w, x->nit, 0.5);
		free(w);
	}
}

int an_rank_cmp(const void *x, const void *y)
{
	const struct an_rank *a = x, *b = y;
	/* ranks in order, processes without one after them, by pid */
	if ((a->rank < 0) != (b->rank < 0))
		return a->rank < 0 ? 1 : -1;
	if (a->rank != b->rank)
		return a->rank < b->rank ? -1 : 1;
	return a->pid < b->pid ? -1 : a->pid > b->pid;
}

/*
 * The analysis of trainer process p alone, with a's options, into row r. Its
 * analysis ignores the other trainers and their workers but for their
 * presence: their files are left out (time ~ its own records, not the job's).
 */
static int rank_one(struct an_source *src, struct an_analysis *a, const struct an_proc *p, uint8_t *keep,
		    struct an_rank *r, char *err, size_t errlen)
{
	if (keep) {
		for (size_t f = 0; f < src->nfiles; f++) {
			const struct sp_file_header *h = src->header(src->ctx, (int)f);
			const struct an_proc *q = h && !(h->features & SP_FEAT_BPF) ? proc_find(a, h->pid) : NULL;
			keep[f] = !q || q->pid == p->pid || (q->role == AN_ROLE_WORKER && (!q->trainer || q->trainer == p->pid)) ||
				  q->role == AN_ROLE_OTHER;
		}
		src->restrict_files(src->ctx, keep);
	}
	struct an_options o = a->opt;
	o.rank_given = 0;
	o.pid = p->pid;
	o.no_ranks = 1;
	struct an_analysis x;
	if (an_analyze(src, &o, &x, err, errlen))
		return -1;
	rank_fill(r, &x, p);
	an_analysis_free(&x);
	return 0;
}

/*
 * --jobs N: the ranks' analyses in N threads, each with its own clone of the
 * source (its readers: only the files of the rank it analyses) and its own
 * tables, taking the next rank as it finishes one. Memory: N analyses, not
 * one per rank.
 */
struct rjobs {
	struct an_source *src;
	struct an_analysis *a;
	const size_t *todo;
	size_t ntodo;
	struct an_rank *rows;
	int *ok;
	size_t next; /* atomic */
	int failed;  /* atomic: stop taking ranks */
	char err[256];
	pthread_mutex_t err_lock; /* the first failure's message */
};

static void *rjob_main(void *arg)
{
	struct rjobs *j = arg;
	struct an_source src;
	char err[256];
	void *ctx = j->src->clone(j->src->ctx, &src);
	uint8_t *keep = ctx ? malloc(src.nfiles + 1) : NULL;
	int rc = ctx && keep ? 0 : -1;
	if (rc)
		snprintf(err, sizeof(err), "out of memory");
	while (!rc && !__atomic_load_n(&j->failed, __ATOMIC_RELAXED)) {
		size_t i = __atomic_fetch_add(&j->next, 1, __ATOMIC_RELAXED);
		if (i >= j->ntodo)
			break;
		rc = rank_one(&src, j->a, &j->a->procs[j->todo[i]], keep, &j->rows[i], err, sizeof(err));
		j->ok[i] = !rc;
	}
	if (rc && !__atomic_exchange_n(&j->failed, 1, __ATOMIC_RELAXED)) {
		pthread_mutex_lock(&j->err_lock);
		snprintf(j->err, sizeof(j->err), "%s", err);
		pthread_mutex_unlock(&j->err_lock);
	}
	free(keep);
	if (ctx)
		src.close(ctx);
	an_scratch_free();
	return NULL;
}

static int ranks_parallel(struct an_source *src, struct an_analysis *a, const size_t *todo, size_t ntodo, char *err,
			  size_t errlen)
{
	size_t nth = (size_t)a->opt.jobs < ntodo ? (size_t)a->opt.jobs : ntodo;
	struct rjobs j = {.src = src, .a = a, .todo = todo, .ntodo = ntodo};
	pthread_t *th = calloc(nth, sizeof(*th));
	j.rows = calloc(ntodo, sizeof(*j.rows));
	j.ok = calloc(ntodo, sizeof(*j.ok));
	if (!th || !j.rows || !j.ok) {
		free(th);
		free(j.rows);
		free(j.ok);
		snprintf(err, errlen, "out of memory");
		return -1;
	}
	pthread_mutex_init(&j.err_lock, NULL);
	size_t started = 0;
	for (; started < nth; started++)
		if (pthread_create(&th[started], NULL, rjob_main, &j))
			break;
	if (!started) /* no thread at all: in turn, here */
		rjob_main(&j);
	for (size_t t = 0; t < started; t++)
		pthread_join(th[t], NULL);
	int rc = j.failed ? -1 : 0;
	if (rc)
		snprintf(err, errlen, "%s", j.err);
	for (size_t i = 0; i < ntodo && !rc; i++)
		if (j.ok[i])
			a->ranks[a->nranks++] = j.rows[i];
	pthread_mutex_destroy(&j.err_lock);
	free(th);
	free(j.rows);
	free(j.ok);
	return rc;
}

/*
 * ranks[]: the selected process from this analysis, every other trainer
 * process from an analysis of its own (the same options, the process forced),
 * run and freed one at a time, or --jobs at a time in child processes.
 */
static int an_ranks(struct an_source *src, struct an_analysis *a, char *err, size_t errlen)
{
	size_t n = 0;
	for (size_t i = 0; i < a->nprocs; i++)
		n += a->procs[i].role == AN_ROLE_TRAINER || a->procs[i].pid == a->trainer_pid;
	if (!n)
		return 0;
	a->ranks = calloc(n, sizeof(*a->ranks));
	size_t *todo = calloc(n, sizeof(*todo)), ntodo = 0;
	uint8_t *keep = src->restrict_files ? malloc(src->nfiles + 1) : NULL;
	if (!a->ranks || !todo || (src->restrict_files && !keep)) {
		free(todo);
		free(keep);
		snprintf(err, errlen, "out of memory");
		return -1;
	}
	for (size_t i = 0; i < a->nprocs; i++) {
		const struct an_proc *p = &a->procs[i];
		if (p->pid == a->trainer_pid) {
			rank_fill(&a->ranks[a->nranks], a, p);
			a->ranks[a->nranks++].selected = 1;
		} else if (p->role == AN_ROLE_TRAINER) {
			todo[ntodo++] = i;
		}
	}
	int rc = 0;
	if (a->opt.jobs > 1 && ntodo > 1 && src->clone)
		rc = ranks_parallel(src, a, todo, ntodo, err, errlen);
	else
		for (size_t i = 0; i < ntodo && !rc; i++) {
			rc = rank_one(src, a, &a->procs[todo[i]], keep, &a->ranks[a->nranks], err, errlen);
			a->nranks += !rc;
		}
	if (keep)
		src->restrict_files(src->ctx, NULL);
	free(keep);
	free(todo);
	qsort(a->ranks, a->nranks, sizeof(*a->ranks), an_rank_cmp);
	return rc;
}

int an_analyze(struct an_source *src, const struct an_options *opt, struct an_analysis *a, char *err, size_t errlen)
{
	struct state s = {0};
	memset(a, 0, sizeof(*a));
	a->opt = *opt;
	s.a = a;
	s.src = src;
	const char *re = opt->step_regex ? opt->step_regex : AN_DEFAULT_STEP_REGEX;
	int rc = regcomp(&s.re, re, REG_EXTENDED | REG_ICASE | REG_NOSUB);
	if (rc) {
		char msg[128];
		regerror(rc, &s.re, msg, sizeof(msg));
		snprintf(err, errlen, "--step-regex '%s': %s", re, msg);
		return -1;
	}
	s.re_ok = 1;
	rc = -1;
	s.verdict = calloc(src->nfiles + 1, sizeof(*s.verdict));
	s.nverdict = calloc(src->nfiles + 1, sizeof(*s.nverdict));
	if (!s.verdict || !s.nverdict)
		goto oom;
	if (pass1(&s))
		goto oom;
	/*
	 * A collector's file holds many processes: what its header counts as lost
	 * belongs to none of them (calls whose process is unknown, records a full
	 * disk refused), but it is the run's.
	 */
	for (size_t f = 0; f < src->nfiles; f++) {
		const struct sp_file_header *h = src->header(src->ctx, (int)f);
		if (h && (h->features & SP_FEAT_BPF))
			a->lost += h->lost_records;
	}
	if (choose_trainer(&s, err, errlen))
		goto out;
	link_speed(&s);
	if (a->trainer_pid) {
		if (iterations_nvtx(&s) || (!a->nit && iterations_steps(&s)) || (!a->nit && iterations_auto(&s)))
			goto oom;
	}
	if (pass2(&s))
		goto oom;
	for (size_t i = 0; i < a->nit; i++) {
		a->wall_total += a->it[i].end_ns - a->it[i].start_ns;
		for (int c = 0; c < AN_CAT__COUNT; c++) {
			a->bd_total[c] += a->it[i].bd[c];
			a->bd1_total[c] += a->it[i].bd1[c];
		}
		a->comm_overlapped_ns += a->it[i].comm_overlapped_ns;
		for (int c = 0; c < AN_SPLIT__COUNT; c++)
			a->split_total[c] += a->it[i].split[c];
		a->split_unsampled_total += a->it[i].split_unsampled;
	}
	if (!a->nit)
		run_input_close(&s);
	if (an_findings_eval(a, &s.col))
		goto oom;
	/* a ring that lost the run's beginning: memory_growth and the peak from the summaries */
	if (sm_apply(src, a, &s.col))
		goto oom;
	an_findings_order(a);
	rc = 0;
	goto out;
oom:
	snprintf(err, errlen, "out of memory or the trace files could not be read again");
out:
	regfree(&s.re);
	for (size_t f = 0; f < src->nfiles && s.verdict; f++)
		free(s.verdict[f]);
	free(s.verdict);
	free(s.nverdict);
	union hashmap_val *t;
	for (size_t i = 0; (t = hashmap_next(&s.thr, &i, NULL));)
		free(t->p);
	hashmap_free(&s.thr);
	free(s.ranges);
	free(s.steps);
	free(s.gpu_end);
	/* after this analysis's tables are freed: one analysis's memory at a time */
	if (!rc && !opt->no_ranks && an_ranks(src, a, err, errlen))
		rc = -1;
	if (!rc && !opt->no_ranks && a->comm_records) {
		if (an_comm(src, a) || an_findings_straggler(a)) {
			snprintf(err, errlen, "out of memory or the trace files could not be read again");
			rc = -1;
		} else {
			an_findings_order(a);
		}
	}
	if (rc)
		an_analysis_free(a);
	return rc;
}

void an_analysis_free(struct an_analysis *a)
{
	cm_result_free(&a->comm);
	free(a->comm_calls);
	free(a->comm_host_names);
	a->comm_calls = NULL;
	a->comm_host_names = NULL;
	a->ncomm_calls = 0;
	free(a->ranks);
	a->ranks = NULL;
	a->nranks = 0;
	free(a->procs);
	free(a->it);
	for (size_t i = 0; i < a->nfnd; i++)
		free(a->fnd[i].iter);
	free(a->fnd);
	a->procs = NULL;
	a->it = NULL;
	a->fnd = NULL;
	a->nprocs = a->nit = a->nfnd = 0;
}

double an_cores_busy(const struct an_analysis *a)
{
	const struct an_loaders *l = &a->loaders;
	uint32_t cores = l->affinity_cpus ? l->affinity_cpus : l->online_cpus;
	if (!cores || !l->span_ns)
		return 0;
	double b = (double)l->cpu_total_ns / ((double)l->span_ns * cores);
	return b < 1 ? b : 1;
}
