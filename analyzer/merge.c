/*
 * merge.c - the merged record stream of several trace files (see merge.h).
 *
 * Divided into: opening/reopening the readers, the heap of pending records
 * (one per file, keyed by begin time), and the an_source callbacks.
 *
 * NOTE: each reader already merges its threads by begin time; this merges the
 * files the same way. Records of one thread keep their write order, so the stream
 * is sorted by begin time except for bounded lateness (a call written after the
 * calls it made, GPU spans read back later): the analysis allows for it.
 */
#include "merge.h"
#include "util.h"

#include <stdlib.h>
#include <string.h>

struct mfile {
	char *path;
	struct sp_reader *r;
	struct sp_file_header hdr;
	struct sp_event cur;
	int has;
	int reported;
	int off;		   /* left out of the passes (restrict_files) */
	struct sp_reader_stats st; /* of the last complete pass */
};

struct merge {
	struct mfile *f;
	size_t n;
	size_t *pending; /* the file whose record was returned last: advanced at the next call */
	size_t *heap;	 /* file indexes with a pending record, min-heap on cur.begin_ns */
	size_t nheap;
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

static void heap_build(struct merge *m)
{
	m->nheap = 0;
	m->pending = NULL;
	for (size_t i = 0; i < m->n; i++) {
		m->f[i].has = !m->f[i].off && sp_reader_next(m->f[i].r, &m->f[i].cur);
		if (m->f[i].has)
			m->heap[m->nheap++] = i;
		else if (!m->f[i].off)
			m->f[i].st = *sp_reader_stats(m->f[i].r);
	}
	for (size_t i = m->nheap / 2; i-- > 0;)
		sift_down(m, i);
}

static int open_all(struct merge *m, int report)
{
	int ok = 1;
	for (size_t i = 0; i < m->n; i++) {
		char err[256] = "";
		if (m->f[i].r) {
			sp_reader_close(m->f[i].r);
			m->f[i].r = NULL;
		}
		if (sp_reader_open(m->f[i].path, &m->f[i].r, err, sizeof(err))) {
			if (report)
				util_err(m->f[i].path, "%s", err);
			ok = 0;
			continue;
		}
		m->f[i].hdr = *sp_reader_header(m->f[i].r);
	}
	if (!ok)
		return -1;
	heap_build(m);
	return 0;
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
	if (open_all(m, 1)) {
		merge_close(m);
		return NULL;
	}
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
		m->f[i].has = sp_reader_next(m->f[i].r, &m->f[i].cur);
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
	return open_all(ctx, 0);
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

static int m_scan(void *ctx, an_scan_fn fn, void *arg)
{
	struct merge *m = ctx;
	for (size_t i = 0; i < m->n; i++)
		if (!m->f[i].off && an_scan_file(m->f[i].path, (int)i, fn, arg))
			return -1;
	return 0;
}

/* A file left out keeps the damage statistics of its last complete pass. */
static void m_restrict(void *ctx, const uint8_t *keep)
{
	struct merge *m = ctx;
	for (size_t i = 0; i < m->n; i++)
		m->f[i].off = keep && !keep[i];
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
}

int merge_report_damage(struct merge *m)
{
	int rc = SP_EXIT_OK;
	for (size_t i = 0; i < m->n; i++) {
		if (m->f[i].reported)
			continue;
		m->f[i].reported = 1;
		rc = util_worse(rc, util_report_damage(m->f[i].path, &m->f[i].st));
	}
	return rc;
}

const struct sp_reader_stats *merge_stats(struct merge *m, size_t i)
{
	return i < m->n ? &m->f[i].st : NULL;
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
