/*
 * export_perfetto_tracks.c - the tracks of the Perfetto export
 * (export_perfetto_int.h): the tables of processes and threads, keyed by their
 * output ids (export_perfetto.c says how ids are numbered), the GPU lanes of a
 * (process, device), and the metadata that names and orders them all, written
 * once the records have been read.
 *
 * Divided into:
 *   1. processes and threads,
 *   2. GPU lanes,
 *   3. metadata: process and thread names (written last: they need the whole pass).
 */
#include "export_perfetto_int.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "util.h"

/* --------------------------------------------- 1. processes and threads */

void *xcalloc(size_t n, size_t sz)
{
	void *p = calloc(n ? n : 1, sz);
	if (!p) {
		util_err(NULL, "out of memory");
		exit(SP_EXIT_INTERNAL);
	}
	return p;
}

char *xstrdup(const char *s)
{
	char *p = strdup(s ? s : "");
	if (!p) {
		util_err(NULL, "out of memory");
		exit(SP_EXIT_INTERNAL);
	}
	return p;
}

uint64_t mix(uint64_t k)
{
	k *= 0x9e3779b97f4a7c15ull;
	return k ^ (k >> 29);
}

uint32_t out_id(const struct ex *x, int32_t id)
{
	/* NOTE: a negative or huge id (untrusted bytes) is folded, never trusted to be small. */
	return ((uint32_t)id & (MERGE_PID_SPAN - 1)) + (uint32_t)x->fi->pid_off;
}

/* Open-addressed tables grown at half load: sizes follow processes and threads. */
struct proc *proc_get(struct ex *x, uint32_t opid)
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

struct thread *thread_get(struct ex *x, uint32_t opid, uint32_t otid, int32_t tid)
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

/* --------------------------------------------------------- 2. GPU lanes */

/* The pseudo tid of a lane of (process, device) where [b, e) overlaps nothing already placed. */
uint32_t gpu_lane(struct ex *x, uint32_t opid, uint32_t device, int64_t b, int64_t e)
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

/* ---------------------------------------------------------- 3. metadata */

void export_meta(struct ex *x, const char *what, uint32_t pid, uint32_t tid, const char *key, const char *sval,
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

void write_metadata(struct ex *x)
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
		export_meta(x, "process_name", p->opid, p->opid, "name", name, 0);
		/* chrome://tracing orders processes by it (Perfetto ignores it): ranks first, in order */
		export_meta(x, "process_sort_index", p->opid, p->opid, "sort_index", NULL, p->rank >= 0 ? p->rank : 1 << 20);
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
		export_meta(x, "thread_name", t->opid, t->otid, "name", name, 0);
		if (training)
			export_meta(x, "thread_sort_index", t->opid, t->otid, "sort_index", NULL, -1);
	}
	for (size_t i = 0; i < x->nlanes; i++) {
		struct lanes *L = &x->lanes[i];
		for (unsigned k = 0; k < L->n; k++) {
			if (k)
				snprintf(name, sizeof(name), "GPU %u (%u)", L->device, k + 1);
			else
				snprintf(name, sizeof(name), "GPU %u", L->device);
			export_meta(x, "thread_name", L->opid, L->tid[k], "name", name, 0);
			export_meta(x, "thread_sort_index", L->opid, L->tid[k], "sort_index", NULL, -2);
		}
	}
}
