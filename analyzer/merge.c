/*
 * merge.c - the merged record stream of several trace files (see merge.h).
 *
 * Divided into: opening/reopening the readers (a file that never got its
 * header is reported and left out), the pids of processes that share a number
 * (other hosts, pid namespaces), the heap of pending records (one per file,
 * keyed by begin time), and the an_source callbacks.
 *
 * NOTE: each reader already merges its threads by begin time; this merges the
 * files the same way. Records of one thread keep their write order, so the stream
 * is sorted by begin time except for bounded lateness (a call written after the
 * calls it made, GPU spans read back later): the analysis allows for it.
 */
#include "merge.h"
#include "util.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

/* Pid spaces (merge.h): space k adds k << MERGE_PID_SHIFT. */
#define PID_SHIFT  MERGE_PID_SHIFT
#define PID_SPAN   MERGE_PID_SPAN
#define PID_SPACES MERGE_PID_SPACES

struct mfile {
	char *path;
	struct sp_reader *r;
	struct sp_file_header hdr;
	struct sp_event cur;
	int has;
	int reported;
	int off;		   /* left out of the passes (restrict_files) */
	int32_t pid_off;	   /* added to the pids of this file (merge_pids) */
	struct sp_reader_stats st; /* of the last complete pass */
};

struct merge {
	struct mfile *f;
	size_t n;
	size_t *pending; /* the file whose record was returned last: advanced at the next call */
	size_t *heap;	 /* file indexes with a pending record, min-heap on cur.begin_ns */
	size_t nheap;
	int refused; /* SP_EXIT_DAMAGED when a file without a header was left out */
};

static int before(const struct merge *m, size_t a, size_t b)
{
	const struct sp_event *x = &m->f[a].cur, *y = &m->f[b].cur;
	if (x->begin_ns != y->begin_ns)
		return x->begin_ns < y->begin_ns;
	return a < b;
}

static void sift_down(struct merge *m, size_t i)
{
	for (;;) {
		size_t l = 2 * i + 1, r = l + 1, s = i;
		if (l < m->nheap && before(m, m->heap[l], m->heap[s]))
			s = l;
		if (r < m->nheap && before(m, m->heap[r], m->heap[s]))
			s = r;
		if (s == i)
			return;
		size_t t = m->heap[i];
		m->heap[i] = m->heap[s];
		m->heap[s] = t;
		i = s;
	}
}

/* A record's pids in the file's pid space (merge_pids); a pid no Linux gives stays as it is. */
static void renumber(struct sp_event *e, int32_t off)
{
	if (e->pid > 0 && e->pid < PID_SPAN)
		e->pid += off;
	if (e->kind == SP_K_FORK && (e->mask >> SP_F_PID & 1) && e->f[SP_F_PID] > 0 && e->f[SP_F_PID] < PID_SPAN)
		e->f[SP_F_PID] += (uint64_t)off;
}

/* The file's next record, its pids renumbered. */
static int file_next(struct mfile *f)
{
	if (!sp_reader_next(f->r, &f->cur))
		return 0;
	if (f->pid_off)
		renumber(&f->cur, f->pid_off);
	return 1;
}

static void heap_build(struct merge *m)
{
	m->nheap = 0;
	m->pending = NULL;
	for (size_t i = 0; i < m->n; i++) {
		m->f[i].has = !m->f[i].off && file_next(&m->f[i]);
		if (m->f[i].has)
			m->heap[m->nheap++] = i;
		else if (!m->f[i].off)
			m->f[i].st = *sp_reader_stats(m->f[i].r);
	}
	for (size_t i = m->nheap / 2; i-- > 0;)
		sift_down(m, i);
}

/*
 * The header as the analysis sees it: pid and ppid renumbered with the file's
 * offset (a ppid of 0, outside the process's pid namespace, stays 0).
 */
static void set_header(struct mfile *f)
{
	f->hdr = *sp_reader_header(f->r);
	if (f->pid_off) {
		if (f->hdr.pid > 0 && f->hdr.pid < PID_SPAN)
			f->hdr.pid += f->pid_off;
		if (f->hdr.ppid > 0 && f->hdr.ppid < PID_SPAN)
			f->hdr.ppid += f->pid_off;
	}
}

/* Reopen every file from its start (a new pass); -1 when one cannot be read any more. */
static int open_all(struct merge *m)
{
	int ok = 1;
	for (size_t i = 0; i < m->n; i++) {
		char err[256] = "";
		if (m->f[i].r) {
			sp_reader_close(m->f[i].r);
			m->f[i].r = NULL;
		}
		if (m->f[i].off)
			continue; /* left out: no reader, its memory neither (the per-rank passes) */
		if (sp_reader_open(m->f[i].path, &m->f[i].r, err, sizeof(err))) {
			ok = 0;
			continue;
		}
		set_header(&m->f[i]);
	}
	if (!ok)
		return -1;
	heap_build(m);
	return 0;
}

/*
 * The first opening. A file that never got its header (a process killed while
 * it created its file; it must not stop the analysis of the whole directory)
 * holds no record: one line, left out, exit status 3, the others
 * analysed. Any other file that cannot be read (not a trace, a newer major)
 * refuses the whole set, as an analysis of part of a job could mislead: one line
 * per such file, -1.
 */
static int open_first(struct merge *m)
{
	size_t k = 0;
	int ok = 1;
	for (size_t i = 0; i < m->n; i++) {
		struct mfile f = m->f[i];
		int rc = util_reader_open(f.path, &f.r);
		if (rc == SP_EXIT_DAMAGED) { /* never written: its line is printed */
			m->refused = SP_EXIT_DAMAGED;
			free(f.path);
			continue;
		}
		if (rc) {
			ok = 0;
		} else {
			set_header(&f);
		}
		m->f[k++] = f;
	}
	m->n = k;
	return ok && k ? 0 : -1;
}

/* ------------------------------------------------ pids that several files share */

static int same_host(const struct sp_file_header *a, const struct sp_file_header *b)
{
	return !memcmp(a->host, b->host, sizeof(a->host));
}

/* Is file j (started after file i, same host, same pid) the same process, exec'd? */
static int same_process(const struct sp_file_header *i, const struct sp_file_header *j)
{
	/* exec ends a file without a clean exit; the new image keeps the pid and the parent */
	return !i->end_mono_ns && i->ppid == j->ppid && j->start_mono_ns >= i->start_mono_ns;
}

/*
 * The analysis tells processes apart by pid, and processes of other hosts (a job
 * over several nodes, Kubernetes pods: every rank may be pid 1) or of other pid
 * namespaces on one host (containers, `unshare --pid`) can share one: before,
 * their records became one process (two ranks of pid 1: one process of rank 1
 * with both ranks' records and steps, rank 0 gone).
 *
 * Each host is a pid space, numbered by first appearance in the file list: the
 * pids of the n-th further host get n << 22 added (pid 1 of the second node
 * shows as 4194305; `stepprof export` numbers its tracks the same), its pids, ppids and fork records
 * alike, the eBPF collector's file included. On one host, two processes' files
 * of one pid are one process when the earlier ended by exec (no clean exit, same
 * parent); otherwise the later one (another pid namespace, or the pid reused)
 * gets a pid space of its own, after the hosts'. Thread ids are kept.
 */
int merge_pid_spaces(const struct sp_file_header *const *hdr, size_t n, int32_t *off)
{
	for (size_t i = 0; i < n; i++)
		off[i] = 0;
	uint8_t *done = calloc(n ? n : 1, 1);
	size_t *host = calloc(n ? n : 1, sizeof(*host));
	if (!done || !host) {
		free(done);
		free(host);
		return -1; /* pids as written */
	}
	/* the hosts, by first appearance */
	unsigned nhosts = 0;
	for (size_t i = 0; i < n; i++) {
		size_t k = 0;
		while (k < i && !same_host(hdr[k], hdr[i]))
			k++;
		host[i] = k < i ? host[k] : (nhosts < PID_SPACES ? nhosts++ : PID_SPACES - 1);
		off[i] = (int32_t)(host[i] << PID_SHIFT);
	}
	/* per host, its processes' files in start order: an exec chain follows its first file */
	unsigned next = nhosts;
	for (;;) {
		size_t best = n;
		for (size_t i = 0; i < n; i++)
			if (!done[i] && !(hdr[i]->features & SP_FEAT_BPF) &&
			    (best == n || hdr[i]->start_mono_ns < hdr[best]->start_mono_ns))
				best = i;
		if (best == n)
			break;
		const struct sp_file_header *b = hdr[best];
		/* the latest file so far of this pid on this host */
		size_t prev = n;
		for (size_t i = 0; i < n; i++) {
			const struct sp_file_header *h = hdr[i];
			if (done[i] && host[i] == host[best] && h->pid == b->pid &&
			    (prev == n || h->start_mono_ns >= hdr[prev]->start_mono_ns))
				prev = i;
		}
		if (prev != n) {
			if (same_process(hdr[prev], b))
				off[best] = off[prev];
			else if (next < PID_SPACES)
				off[best] = (int32_t)(next++ << PID_SHIFT);
		}
		done[best] = 1;
	}
	free(done);
	free(host);
	return 0;
}

/* The files' pid offsets (merge_pid_spaces) and their headers renumbered. */
static void merge_pids(struct merge *m)
{
	const struct sp_file_header **hdr = calloc(m->n ? m->n : 1, sizeof(*hdr));
	int32_t *off = calloc(m->n ? m->n : 1, sizeof(*off));
	if (hdr && off) {
		for (size_t i = 0; i < m->n; i++)
			hdr[i] = sp_reader_header(m->f[i].r);
		merge_pid_spaces(hdr, m->n, off);
		for (size_t i = 0; i < m->n; i++) {
			m->f[i].pid_off = off[i];
			set_header(&m->f[i]);
		}
	} /* else pids as written */
	free(hdr);
	free(off);
}

struct merge *merge_open(char *const *paths, size_t n)
{
	struct merge *m = calloc(1, sizeof(*m));
	if (!m)
		return NULL;
	m->n = n;
	m->f = calloc(n ? n : 1, sizeof(*m->f));
	m->heap = calloc(n ? n : 1, sizeof(*m->heap));
	if (!m->f || !m->heap) {
		merge_close(m);
		return NULL;
	}
	for (size_t i = 0; i < n; i++)
		if (!(m->f[i].path = strdup(paths[i]))) {
			merge_close(m);
			return NULL;
		}
	if (open_first(m)) {
		merge_close(m);
		return NULL;
	}
	merge_pids(m);
	heap_build(m);
	/* mixed major versions cannot reach here (the reader refuses other majors); minor ones mix fine */
	return m;
}

/*
 * The record at the top of the heap is handed out in place (no copy of the wide
 * struct); its file is advanced at the next call, before the heap is consulted.
 */
static const struct sp_event *m_next(void *ctx, int *file)
{
	struct merge *m = ctx;
	if (m->pending) {
		size_t i = m->heap[0];
		m->pending = NULL;
		m->f[i].has = file_next(&m->f[i]);
		if (!m->f[i].has) {
			m->f[i].st = *sp_reader_stats(m->f[i].r);
			m->heap[0] = m->heap[--m->nheap];
		}
		if (m->nheap > 1)
			sift_down(m, 0);
	}
	if (!m->nheap)
		return NULL;
	size_t i = m->heap[0];
	*file = (int)i;
	m->pending = &m->heap[0];
	return &m->f[i].cur;
}

static int m_rewind(void *ctx)
{
	return open_all(ctx);
}

static const char *m_string(void *ctx, int file, uint32_t id)
{
	struct merge *m = ctx;
	if (file < 0 || (size_t)file >= m->n || !m->f[file].r)
		return NULL;
	return sp_reader_string(m->f[file].r, id);
}

static const struct sp_file_header *m_header(void *ctx, int file)
{
	struct merge *m = ctx;
	if (file < 0 || (size_t)file >= m->n)
		return NULL;
	return &m->f[file].hdr;
}

/* The scan of a renumbered file: its records' pids as file_next gives them. */
struct renumber {
	an_scan_fn fn;
	void *arg;
	int32_t off;
};

static void scan_renumbered(void *arg, const struct sp_event *ev, int file)
{
	const struct renumber *r = arg;
	struct sp_event e = *ev;
	renumber(&e, r->off);
	r->fn(r->arg, &e, file);
}

static int m_scan(void *ctx, an_scan_fn fn, void *arg)
{
	struct merge *m = ctx;
	for (size_t i = 0; i < m->n; i++) {
		struct renumber r = {fn, arg, m->f[i].pid_off};
		if (!m->f[i].off && (r.off ? an_scan_file(m->f[i].path, (int)i, scan_renumbered, &r)
					   : an_scan_file(m->f[i].path, (int)i, fn, arg)))
			return -1;
	}
	return 0;
}

/* A file left out keeps the damage statistics of its last complete pass. */
static void m_restrict(void *ctx, const uint8_t *keep)
{
	struct merge *m = ctx;
	for (size_t i = 0; i < m->n; i++)
		m->f[i].off = keep && !keep[i];
}

/*
 * A merge of the same files, independent of m (for another thread): paths,
 * headers and pid offsets copied, no reader open until its first rewind.
 */
static void *m_clone(void *ctx, struct an_source *out)
{
	const struct merge *m = ctx;
	struct merge *c = calloc(1, sizeof(*c));
	if (!c)
		return NULL;
	c->n = m->n;
	c->f = calloc(m->n ? m->n : 1, sizeof(*c->f));
	c->heap = calloc(m->n ? m->n : 1, sizeof(*c->heap));
	if (!c->f || !c->heap) {
		merge_close(c);
		return NULL;
	}
	for (size_t i = 0; i < m->n; i++) {
		c->f[i].hdr = m->f[i].hdr;
		c->f[i].pid_off = m->f[i].pid_off;
		c->f[i].st = m->f[i].st;
		if (!(c->f[i].path = strdup(m->f[i].path))) {
			merge_close(c);
			return NULL;
		}
	}
	merge_source(c, out);
	return c;
}

static void m_close(void *ctx)
{
	merge_close(ctx);
}

void merge_source(struct merge *m, struct an_source *src)
{
	src->ctx = m;
	src->nfiles = m->n;
	src->next = m_next;
	src->rewind = m_rewind;
	src->string = m_string;
	src->header = m_header;
	src->scan = m_scan;
	src->restrict_files = m_restrict;
	src->clone = m_clone;
	src->close = m_close;
}

int merge_report_damage(struct merge *m)
{
	int rc = m->refused;
	for (size_t i = 0; i < m->n; i++) {
		if (m->f[i].reported)
			continue;
		m->f[i].reported = 1;
		rc = util_worse(rc, util_report_damage(m->f[i].path, &m->f[i].st));
	}
	return rc;
}

void merge_close(struct merge *m)
{
	if (!m)
		return;
	for (size_t i = 0; m->f && i < m->n; i++) {
		if (m->f[i].r)
			sp_reader_close(m->f[i].r);
		free(m->f[i].path);
	}
	free(m->f);
	free(m->heap);
	free(m);
}
