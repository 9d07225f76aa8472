/*
 * analyze_src.c - an in-memory event source for the analysis (struct an_memsrc):
 * unit tests build the records a workload would have produced, with their
 * strings, and run the same analysis as on trace files.
 *
 * Divided into: building (init, add, string, sort) and the an_source callbacks.
 */
#include "analyze.h"

#include <stdlib.h>
#include <string.h>

void an_memsrc_init(struct an_memsrc *m, int32_t pid)
{
	memset(m, 0, sizeof(*m));
	memcpy(m->hdr.magic, SP_MAGIC, 8);
	m->hdr.version_major = SP_VERSION_MAJOR;
	m->hdr.version_minor = SP_VERSION_MINOR;
	m->hdr.header_size = SP_HEADER_SIZE;
	m->hdr.endian = SP_ENDIAN_TAG;
	m->hdr.pid = pid;
	m->hdr.ppid = 1;
	m->hdr.rank = m->hdr.local_rank = m->hdr.world_size = -1;
	snprintf(m->hdr.cmdline, sizeof(m->hdr.cmdline), "memsrc");
}

struct sp_event *an_memsrc_add(struct an_memsrc *m, unsigned kind, unsigned api, int32_t pid, int32_t tid,
			       uint64_t begin, uint64_t end)
{
	if (m->n == m->cap) {
		size_t cap = m->cap ? m->cap * 2 : 1024;
		struct sp_event *v = realloc(m->ev, cap * sizeof(*v));
		if (!v)
			abort(); /* test fixture: out of memory is fatal */
		m->ev = v;
		m->cap = cap;
	}
	struct sp_event *e = &m->ev[m->n++];
	memset(e, 0, sizeof(*e));
	e->kind = (uint8_t)kind;
	e->api = (uint16_t)api;
	e->pid = pid;
	e->tid = tid;
	e->begin_ns = begin;
	e->end_ns = end;
	e->mask = kind < SP_K__COUNT ? sp_kind_mask[kind] : 0;
	return e;
}

uint32_t an_memsrc_string(struct an_memsrc *m, const char *s)
{
	for (uint32_t i = 1; i < m->nstr; i++)
		if (m->str[i] && !strcmp(m->str[i], s))
			return i;
	if (!m->nstr)
		m->nstr = 1;
	char **v = realloc(m->str, (m->nstr + 1) * sizeof(*v));
	if (!v)
		abort();
	m->str = v;
	v[0] = NULL;
	v[m->nstr] = strdup(s);
	return m->nstr++;
}

static int ev_cmp(const void *a, const void *b)
{
	const struct sp_event *x = a, *y = b;
	if (x->begin_ns != y->begin_ns)
		return x->begin_ns < y->begin_ns ? -1 : 1;
	return 0;
}

void an_memsrc_sort(struct an_memsrc *m)
{
	/* stable: merge sort through a copy indexed by position */
	struct sp_event *tmp = malloc(m->n * sizeof(*tmp));
	if (!tmp)
		abort();
	for (size_t w = 1; w < m->n; w *= 2) {
		for (size_t lo = 0; lo < m->n; lo += 2 * w) {
			size_t mid = lo + w < m->n ? lo + w : m->n, hi = lo + 2 * w < m->n ? lo + 2 * w : m->n;
			size_t i = lo, j = mid, k = lo;
			while (i < mid || j < hi)
				tmp[k++] = (j >= hi || (i < mid && ev_cmp(&m->ev[i], &m->ev[j]) <= 0)) ? m->ev[i++]
												       : m->ev[j++];
		}
		memcpy(m->ev, tmp, m->n * sizeof(*tmp));
	}
	free(tmp);
}

static const struct sp_event *mem_next(void *ctx, int *file)
{
	struct an_memsrc *m = ctx;
	if (m->pos >= m->n)
		return NULL;
	*file = 0;
	return &m->ev[m->pos++];
}

static int mem_rewind(void *ctx)
{
	((struct an_memsrc *)ctx)->pos = 0;
	return 0;
}

static const char *mem_string(void *ctx, int file, uint32_t id)
{
	struct an_memsrc *m = ctx;
	return id && id < m->nstr ? m->str[id] : NULL;
}

static const struct sp_file_header *mem_header(void *ctx, int file)
{
	return file == 0 ? &((struct an_memsrc *)ctx)->hdr : NULL;
}

void an_memsrc_source(struct an_memsrc *m, struct an_source *src)
{
	src->ctx = m;
	src->nfiles = 1;
	src->next = mem_next;
	src->rewind = mem_rewind;
	src->string = mem_string;
	src->header = mem_header;
	src->scan = NULL;
	src->restrict_files = NULL; /* one file */
	m->pos = 0;
}

void an_memsrc_free(struct an_memsrc *m)
{
	for (uint32_t i = 0; i < m->nstr; i++)
		free(m->str[i]);
	free(m->str);
	free(m->ev);
	memset(m, 0, sizeof(*m));
}
