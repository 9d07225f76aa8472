/*
 * analyze.c - the analysis driver: reads the merged stream of records two or
 * three times and fills struct an_analysis (see analyze.h).
 *
 * Divided into:
 *   1. names, options and thresholds;
 *   2. bounded tables: processes, threads, open files, live allocations;
 *   3. pass 1: processes, roles, the training thread, NVTX ranges and step marks;
 *   4. pass 1b (automatic detection only): the training thread's signatures, the
 *      period, the anchor and the iteration boundaries;
 *   5. pass 2: per-iteration spans (a time window of open iterations), counters
 *      and the evidence of the findings;
 *   6. the summary, the per-rank table (one more analysis per other trainer
 *      process, with that process forced) and an_analyze().
 *
 * RATIONALE: several passes over the files instead of buffering records: the
 * training thread and the iteration boundaries must be known before a record can
 * be attributed, and reading a file again costs less than holding it in memory
 * (the point of the bounded-memory budget).
 */
#include "analyze.h"
#include "breakdown.h"
#include "findings.h"
#include "iter.h"
#include "summary.h"

#include <math.h>
#include <regex.h>
#include <stdlib.h>
#include <string.h>

/* ------------------------------------------------ 1. names and options */

const char *const an_cat_name[AN_CAT__COUNT] = {"input", "h2d", "compute", "d2h", "sync", "other"};
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

int an_options_set_threshold(struct an_options *o, const char *arg, char *err, size_t errlen)
{
	const char *eq = strchr(arg, '=');
	if (!eq) {
		snprintf(err, errlen, "--threshold %s: expected NAME=VALUE", arg);
		return -1;
	}
	size_t len = (size_t)(eq - arg);
	for (int i = 0; i < AN_T__COUNT; i++) {
		if (strlen(an_threshold_name[i]) != len || strncmp(arg, an_threshold_name[i], len))
			continue;
		char *end;
		double v = strtod(eq + 1, &end);
		if (end == eq + 1 || *end || !isfinite(v) || v < 0) {
			snprintf(err, errlen, "--threshold %s: not a non-negative number", arg);
			return -1;
		}
		o->threshold[i] = v;
		return 0;
	}
	snprintf(err, errlen, "--threshold %.*s: unknown threshold (see stepprof analyze --help)", (int)len, arg);
	return -1;
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

/* The calls of a kind a thread made: how many, and from the first one's begin to the last one's end. */
struct callspan {
	uint64_t n, b, e;
};

struct thr {
	int32_t pid, tid;
	uint64_t launches, records, last_sig_end;
	uint64_t marks, inputs; /* iteration marks (matching NVTX ranges, steps) and input calls */
	/*
	 * Which of the threads that launch runs the loop (thr_trains_more): its
	 * launches, its waits for batches from loader processes, the calls that
	 * feed a loop (input, H2D and D2H copies) and its blocking syncs.
	 */
	struct callspan launch, batch, feed, wait;
	int used;
};

struct state {
	struct an_analysis *a;
	struct an_source *src;
	regex_t re;
	int re_ok;
	/* threads: open addressing, grows (threads are few) */
	struct thr *thr;
	size_t nthr, capthr;
	/* regex verdicts per (file, name id): 0 unknown, 1 no, 2 yes */
	uint8_t **verdict;
	uint32_t *nverdict;
	/* NVTX ranges and step marks of every process (per-iteration state) */
	struct mark {
		int32_t pid, tid;
		uint64_t b, e;
	} * ranges, *steps;
	size_t nranges, capranges, nsteps, capsteps;
	uint64_t *gpu_end; /* per proc index: last GPU span end */
	struct an_collect col;
};

static uint64_t hash64(uint64_t x)
{
	x ^= x >> 33;
	x *= 0xff51afd7ed558ccdull;
	x ^= x >> 33;
	x *= 0xc4ceb9fe1a85ec53ull;
	x ^= x >> 33;
	return x;
}

static struct thr *thr_get(struct state *s, int32_t pid, int32_t tid)
{
	if (s->nthr * 2 >= s->capthr) {
		size_t cap = s->capthr ? s->capthr * 2 : 64;
		struct thr *t = calloc(cap, sizeof(*t));
		if (!t)
			return NULL;
		for (size_t i = 0; i < s->capthr; i++) {
			if (!s->thr[i].used)
				continue;
			size_t h =
			    hash64(((uint64_t)(uint32_t)s->thr[i].pid << 32) | (uint32_t)s->thr[i].tid) & (cap - 1);
			while (t[h].used)
				h = (h + 1) & (cap - 1);
			t[h] = s->thr[i];
		}
		free(s->thr);
		s->thr = t;
		s->capthr = cap;
	}
	size_t h = hash64(((uint64_t)(uint32_t)pid << 32) | (uint32_t)tid) & (s->capthr - 1);
	while (s->thr[h].used && (s->thr[h].pid != pid || s->thr[h].tid != tid))
		h = (h + 1) & (s->capthr - 1);
	if (!s->thr[h].used) {
		s->thr[h] = (struct thr){.pid = pid, .tid = tid, .used = 1};
		s->nthr++;
	}
	return &s->thr[h];
}

static struct an_proc *proc_find(struct an_analysis *a, int32_t pid)
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
	 * its first image's command line is kept beside (images > 1). Before, the
	 * first file found was taken: with three images, the trainer was named
	 * "bash ./shim.sh". The merge already made the images one pid (merge.c).
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

static int is_sig_kind(unsigned k)
{
	return k == SP_K_COPY || k == SP_K_MEMSET || k == SP_K_LAUNCH || k == SP_K_SYNC;
}

static int is_input_kind(unsigned k)
{
	return k == SP_K_OPEN || k == SP_K_STAT || k == SP_K_READ || k == SP_K_LISTDIR || k == SP_K_LOADER_WAIT;
}

/* Records that are not calls of the thread, or are part of a file's read (close). */
static int is_passive_kind(unsigned k)
{
	return k == SP_K_CLOSE || k == SP_K_GPU_SPAN || k == SP_K_LOST || k == SP_K_THREAD || k == SP_K_MARK ||
	       k == SP_K_STEP || k == SP_K_RANGE || k == SP_K_NVTX_MARK;
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
static int is_blocking_sync(const struct sp_event *ev)
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
	case SP_K_LAUNCH:
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
	/* without launches, the process that marked steps, if any */
	if (best && !best->launches && s->nsteps)
		best = proc_find(a, s->steps[0].pid);
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
 * blocking syncs recur; then the most launches (design.md's rule); then
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
	for (size_t i = 0; i < s->capthr; i++)
		if (s->thr[i].used && s->thr[i].pid == best->pid && s->thr[i].launches > top)
			top = s->thr[i].launches;
	struct thr *bt = NULL;
	for (size_t i = 0; i < s->capthr; i++) {
		struct thr *t = &s->thr[i];
		if (t->used && t->pid == best->pid && t->launches * LAUNCH_SHARE_DIV >= top &&
		    (!bt || thr_trains_more(t, bt)))
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
		if (p->role == AN_ROLE_TRAINER)
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
			if (q->role == AN_ROLE_TRAINER) {
				p->role = AN_ROLE_WORKER;
				p->trainer = q->pid;
				break;
			}
			pp = q->ppid;
		}
	}
	return 0;
}

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
static int iterations_nvtx(struct state *s)
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
static int iterations_steps(struct state *s)
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

/* ------------------------------------------------- 4. pass 1b: automatic */

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

static int iterations_auto(struct state *s)
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

/* --------------------------------------------------------------- 5. pass 2 */

#define OP_RING 65536u
enum { OPC_NONE, OPC_COMPUTE, OPC_H2D, OPC_D2H };

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

static void finalize(struct pass2 *p, size_t i)
{
	struct an_iter *it = &p->a->it[i];
	uint64_t busy = 0;
	uint64_t lock_input = 0;
	struct bd_list *l = win_lists(p, i);
	if (!l || bd_lock_input(l, it->start_ns, it->end_ns, &lock_input) ||
	    bd_partition(l, it->start_ns, it->end_ns, it->bd, &busy))
		p->oom = 1;
	it->blocked[AN_BLK_INPUT] += lock_input;
	it->gpu_idle_ns = (it->end_ns - it->start_ns) - busy;
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
		f->used = 0;
		return;
	}
	unsigned b = an_fsize_bucket(f->bytes);
	p->s->col.fsize_hist[b]++;
	p->s->col.fsize_sum[b] += f->bytes;
	if (f->iter >= 0 && (size_t)f->iter < p->a->nit) {
		p->a->it[f->iter].files_sized++;
		if ((double)f->bytes < p->a->opt.threshold[AN_T_SFS_MAX_FILE])
			p->a->it[f->iter].files_small++;
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
			p->ring[op % OP_RING].cls = OPC_COMPUTE;
			p->ring[op % OP_RING].sync_end = 0;
			p->ring[op % OP_RING].pg_iter = -1;
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
		/*
		 * A copy from or to pageable memory, or one without "Async" in its name,
		 * returns only when the data has moved (CUDA's semantics): its GPU span
		 * cannot end later than the call, whatever the timing events say.
		 */
		int host_sync = ev->f[SP_F_HOST_MEMORY] == SP_HOSTMEM_PAGEABLE ||
				!strstr(sp_api_name[ev->api < SP_API__COUNT ? ev->api : 0], "Async");
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
		else if (cls == OPC_H2D)
			add_span(p, BD_H2D, gb, ge);
		else if (cls == OPC_D2H)
			add_span(p, BD_D2H, gb, ge);
		break;
	}
	case SP_K_SYNC:
		if (is_t) {
			add_span(p, BD_SYNC, ev->begin_ns, ev->end_ns);
			add_blocked(p, AN_BLK_SYNC, ev->begin_ns, ev->end_ns);
		}
		break;
	case SP_K_ALLOC:
	case SP_K_FREE:
	case SP_K_ALLOC_FAILED:
	case SP_K_MEM_INFO:
		if (is_p)
			on_alloc_events(p, ev, file, ITER());
		break;
	case SP_K_LOCK_WAIT:
		/* input only while another thread of the process waits for a batch (finalize) */
		if (is_t)
			add_span(p, BD_LOCK, ev->begin_ns, ev->end_ns);
		break;
	case SP_K_OPEN:
	case SP_K_STAT:
	case SP_K_READ:
	case SP_K_LISTDIR:
	case SP_K_LOADER_WAIT:
	case SP_K_CLOSE: {
		if (is_t) { /* close included: the thread is blocked in file I/O */
			add_span(p, BD_INPUT, ev->begin_ns, ev->end_ns);
			add_blocked(p, AN_BLK_INPUT, ev->begin_ns, ev->end_ns);
		} else if (is_p && ev->kind == SP_K_LOADER_WAIT) {
			/* a pin-memory thread receiving the batch the training thread may be waiting for */
			add_span(p, BD_PEER_WAIT, ev->begin_ns, ev->end_ns);
		}
		/* counters across the process tree; other trainers (ranks) and their workers count for themselves */
		struct an_proc *pr = proc_find(a, ev->pid);
		if (!is_p && pr &&
		    (pr->role == AN_ROLE_TRAINER ||
		     (pr->role == AN_ROLE_WORKER && pr->trainer && pr->trainer != a->trainer_pid)))
			break;
		int32_t fd = (int32_t)ev->f[SP_F_FD];
		int ok = (int64_t)ev->f[SP_F_RESULT] >= 0;
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
		struct an_iter *it = i >= 0 ? &a->it[i] : NULL;
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
	p.ring = calloc(OP_RING, sizeof(*p.ring));
	p.files = calloc(OPENFILES, sizeof(*p.files));
	p.live = calloc(LIVEBLKS, sizeof(*p.live));
	int rc = -1;
	if (!p.lists || !p.ring || !p.files || !p.live || s->src->rewind(s->src->ctx))
		goto out;
	/*
	 * An unused slot (op 0, zeroed) must not read as a copy of iteration 0: a GPU
	 * span of an op nothing launched (a damaged trace) would move copy time into
	 * iteration 0, or index a->it when there are no iterations (found by make fuzz).
	 */
	for (size_t k = 0; k < OP_RING; k++)
		p.ring[k].pg_iter = -1;
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
			finalize(&p, p.first_open);
			p.first_open++;
		}
	}
	while (p.npend_async) /* never awaited: the trace ends first */
		async_count(&p, 0);
	while (p.first_open < a->nit) {
		finalize(&p, p.first_open);
		p.first_open++;
	}
	if (p.oom)
		goto out;
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
	free(p.ring);
	free(p.files);
	free(p.live);
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
static int pass2(struct state *s)
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

/* ---------------------------------------- 6. summary, ranks, entry */

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
	uint64_t *w = x->nit ? malloc(x->nit * sizeof(*w)) : NULL;
	if (w) {
		for (size_t i = 0; i < x->nit; i++)
			w[i] = x->it[i].end_ns - x->it[i].start_ns;
		r->wall_median = an_quantile_u64(w, x->nit, 0.5);
		free(w);
	}
}

static int cmp_rank(const void *x, const void *y)
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
 * ranks[]: the selected process from this analysis, every other trainer
 * process from an analysis of its own (the same options, the process forced),
 * run and freed one at a time.
 */
static int an_ranks(struct an_source *src, struct an_analysis *a, char *err, size_t errlen)
{
	size_t n = 0;
	for (size_t i = 0; i < a->nprocs; i++)
		n += a->procs[i].role == AN_ROLE_TRAINER || a->procs[i].pid == a->trainer_pid;
	if (!n)
		return 0;
	a->ranks = calloc(n, sizeof(*a->ranks));
	if (!a->ranks) {
		snprintf(err, errlen, "out of memory");
		return -1;
	}
	uint8_t *keep = src->restrict_files ? malloc(src->nfiles + 1) : NULL;
	int rc = 0;
	for (size_t i = 0; i < a->nprocs && !rc; i++) {
		const struct an_proc *p = &a->procs[i];
		if (p->pid == a->trainer_pid) {
			rank_fill(&a->ranks[a->nranks], a, p);
			a->ranks[a->nranks++].selected = 1;
			continue;
		}
		if (p->role != AN_ROLE_TRAINER)
			continue;
		/*
		 * Its analysis ignores the other trainers and their workers but for their
		 * presence: leave their files out (time ~ its own records, not the job's).
		 */
		if (keep) {
			for (size_t f = 0; f < src->nfiles; f++) {
				const struct sp_file_header *h = src->header(src->ctx, (int)f);
				const struct an_proc *q = h && !(h->features & SP_FEAT_BPF) ? proc_find(a, h->pid) : NULL;
				keep[f] = !q || q->pid == p->pid ||
					  (q->role == AN_ROLE_WORKER && (!q->trainer || q->trainer == p->pid)) ||
					  q->role == AN_ROLE_OTHER;
			}
			src->restrict_files(src->ctx, keep);
		}
		struct an_options o = a->opt;
		o.rank_given = 0;
		o.pid = p->pid;
		o.no_ranks = 1;
		struct an_analysis x;
		if (an_analyze(src, &o, &x, err, errlen)) {
			rc = -1;
			break;
		}
		rank_fill(&a->ranks[a->nranks++], &x, p);
		an_analysis_free(&x);
	}
	if (keep)
		src->restrict_files(src->ctx, NULL);
	free(keep);
	qsort(a->ranks, a->nranks, sizeof(*a->ranks), cmp_rank);
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
		for (int c = 0; c < AN_CAT__COUNT; c++)
			a->bd_total[c] += a->it[i].bd[c];
	}
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
	free(s.thr);
	free(s.ranges);
	free(s.steps);
	free(s.gpu_end);
	/* after this analysis's tables are freed: one analysis's memory at a time */
	if (!rc && !opt->no_ranks && an_ranks(src, a, err, errlen))
		rc = -1;
	if (rc)
		an_analysis_free(a);
	return rc;
}

void an_analysis_free(struct an_analysis *a)
{
	free(a->ranks);
	a->ranks = NULL;
	a->nranks = 0;
	free(a->procs);
	free(a->it);
	free(a->fnd);
	a->procs = NULL;
	a->it = NULL;
	a->fnd = NULL;
	a->nprocs = a->nit = a->nfnd = 0;
}
