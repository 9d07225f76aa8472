/*
 * analyze_comm.c - the job's collectives across its ranks: one pass over every
 * rank's records turns NCCL calls (COMM, COMM_INIT records) into the units the
 * matcher compares (comm_match.h), then the straggler table.
 *
 * A unit is a collective called outside a group, or a group (ncclGroupStart ..
 * the outermost ncclGroupEnd) holding at least one collective, counted on the
 * communicator of its first collective; point-to-point groups are not
 * collectives of the whole communicator and are left out. A unit's GPU span is
 * that of the kernels launched on the calling thread within its host call (a
 * group's: within ncclGroupEnd). Its number is its rank in the process's units
 * on that communicator: NCCL requires every rank to call a communicator's
 * collectives in the same order.
 *
 * Times: each file's CLOCK_MONOTONIC, with its header's pair of clock
 * readings for the matcher, which reads them on each host's CLOCK_REALTIME when
 * the files come from more than one host (their headers' host names, in the
 * order of the names: host 0, the reference, is the first), then refines.
 * The units are kept as found (a->comm_calls) for the rank summaries.
 */
#include <stdlib.h>
#include <string.h>

#include "analyze_int.h"
#include "hashmap.h"

#define RECENT 32 /* launches a thread keeps until the NCCL call around them is read */

struct cthr {		   /* a thread's current NCCL call */
	uint64_t end_ns;   /* the call's end; launches begun before it are its */
	int64_t unit;	   /* its unit, -1 none */
	/*
	 * Its last launches: a wrapper writes its record when the call returns, after
	 * those of the launches made inside, and a file's records come in the order
	 * written; the call claims them when it is read.
	 */
	uint64_t recent_b[RECENT];
	uint32_t recent_op[RECENT];
	unsigned nrecent;
	uint64_t group_comm; /* the first collective's communicator of the open group, 0 none */
	uint32_t ngrouped;   /* grouped calls since the last group end */
};

struct ccomm {		   /* a communicator of a process */
	uint64_t ident;
	uint64_t seq;	   /* units so far */
	int32_t crank;
	uint32_t nranks;
};

struct cstate {
	struct an_source *src;
	struct cm_call *c;
	size_t n, cap;
	struct hashmap thr;   /* pid << 32 | tid -> struct cthr * */
	struct hashmap comms; /* hash(pid, handle) -> struct ccomm * */
	struct hashmap ops;   /* pid << 32 | op -> unit + 1 */
	int64_t *to_real;     /* per file: CLOCK_REALTIME - CLOCK_MONOTONIC of its header */
	uint32_t *host;	      /* per file: its host's index */
	char (*names)[64];    /* the hosts' names, in order */
	int32_t *rank;	      /* per file: RANK, -1 unset */
	size_t nhosts;
};

static int is_collective(unsigned api)
{
	switch (api) {
	case SP_API_ncclAllReduce:
	case SP_API_ncclReduce:
	case SP_API_ncclBroadcast:
	case SP_API_ncclBcast:
	case SP_API_ncclAllGather:
	case SP_API_ncclReduceScatter:
		return 1;
	default:
		return 0;
	}
}

/* Keys by process (pids are unique across the files of a merge, hosts included), not by file: a
 * collector's file holds many processes. */
static uint64_t comm_key(int32_t pid, uint64_t handle)
{
	return hashmap_hash(handle ^ ((uint64_t)(uint32_t)pid << 48)) | 1;
}

static uint64_t pid_key(int32_t pid, uint64_t x)
{
	return (uint64_t)(uint32_t)pid << 32 | (uint32_t)x;
}

static struct cthr *thr_of(struct cstate *s, int32_t pid, int32_t tid)
{
	union hashmap_val *v = hashmap_slot(&s->thr, pid_key(pid, (uint32_t)tid), true);
	if (!v)
		return NULL;
	if (!v->p) {
		struct cthr *t = calloc(1, sizeof(*t));
		if (!t)
			return NULL;
		t->unit = -1;
		v->p = t;
	}
	return v->p;
}

/* A new unit of communicator handle for this file's process; -1 when none (unknown communicator), -2 OOM. */
static int64_t unit_new(struct cstate *s, int file, int32_t pid, uint64_t handle, uint64_t call_ns)
{
	struct ccomm *cc = hashmap_get(&s->comms, comm_key(pid, handle));
	if (!cc || !cc->nranks)
		return -1;
	if (s->n == s->cap) {
		size_t cap = s->cap ? 2 * s->cap : 256;
		struct cm_call *c = realloc(s->c, cap * sizeof(*c));
		if (!c)
			return -2;
		s->c = c;
		s->cap = cap;
	}
	struct cm_call *u = &s->c[s->n];
	memset(u, 0, sizeof(*u));
	u->ident = cc->ident;
	u->seq = cc->seq++;
	u->nranks = cc->nranks;
	u->crank = cc->crank;
	u->rank = s->rank[file] >= 0 ? s->rank[file] : cc->crank;
	u->host = s->host[file];
	u->to_real_ns = s->to_real[file];
	u->call_ns = call_ns;
	return (int64_t)s->n++;
}

static int on_record(struct cstate *s, const struct sp_event *e, int file)
{
	switch (e->kind) {
	case SP_K_COMM_INIT: {
		if ((int64_t)e->f[SP_F_RESULT] != 0 || !e->f[SP_F_COMM])
			return 0;
		union hashmap_val *v = hashmap_slot(&s->comms, comm_key(e->pid, e->f[SP_F_COMM]), true);
		if (!v)
			return -1;
		if (!v->p && !(v->p = calloc(1, sizeof(struct ccomm))))
			return -1;
		struct ccomm *cc = v->p;
		cc->ident = e->f[SP_F_VALUE];
		cc->crank = (int32_t)e->f[SP_F_RANK];
		cc->nranks = (uint32_t)e->f[SP_F_NRANKS];
		cc->seq = 0;
		return 0;
	}
	case SP_K_COMM: {
		struct cthr *t = thr_of(s, e->pid, e->tid);
		if (!t)
			return -1;
		if (e->f[SP_F_FLAGS] & SP_COMM_F_GROUPED) {
			if (is_collective(e->api) && !t->group_comm)
				t->group_comm = e->f[SP_F_COMM];
			t->ngrouped++;
			return 0;
		}
		int64_t u = -1;
		if (e->api == SP_API_ncclGroupEnd) {
			if (t->group_comm)
				u = unit_new(s, file, e->pid, t->group_comm, e->begin_ns);
			t->group_comm = 0;
			t->ngrouped = 0;
		} else if (is_collective(e->api)) {
			u = unit_new(s, file, e->pid, e->f[SP_F_COMM], e->begin_ns);
		}
		if (u == -2)
			return -1;
		t->unit = u;
		t->end_ns = e->end_ns;
		for (unsigned k = 0; u >= 0 && k < t->nrecent && k < RECENT; k++) {
			if (t->recent_b[k] < e->begin_ns || t->recent_b[k] >= e->end_ns)
				continue;
			union hashmap_val *v = hashmap_slot(&s->ops, pid_key(e->pid, t->recent_op[k]), true);
			if (!v)
				return -1;
			v->u = (uint64_t)u + 1;
		}
		t->nrecent = 0;
		return 0;
	}
	case SP_K_LAUNCH: {
		if (!e->f[SP_F_OP])
			return 0;
		struct cthr *t = thr_of(s, e->pid, e->tid);
		if (!t)
			return -1;
		if (t->unit < 0 || e->begin_ns >= t->end_ns) {
			t->recent_b[t->nrecent % RECENT] = e->begin_ns;
			t->recent_op[t->nrecent % RECENT] = (uint32_t)e->f[SP_F_OP];
			t->nrecent++;
			return 0;
		}
		union hashmap_val *v = hashmap_slot(&s->ops, pid_key(e->pid, e->f[SP_F_OP]), true);
		if (!v)
			return -1;
		v->u = (uint64_t)t->unit + 1;
		return 0;
	}
	case SP_K_GPU_SPAN: {
		uint64_t key = pid_key(e->pid, e->f[SP_F_OP]);
		union hashmap_val *v = hashmap_find(&s->ops, key);
		if (!v || !v->u)
			return 0;
		struct cm_call *u = &s->c[v->u - 1];
		if (!u->gpu_begin_ns || e->begin_ns < u->gpu_begin_ns)
			u->gpu_begin_ns = e->begin_ns;
		if (e->end_ns > u->gpu_end_ns)
			u->gpu_end_ns = e->end_ns;
		hashmap_del(&s->ops, key);
		return 0;
	}
	default:
		return 0;
	}
}

static int cmp_name(const void *a, const void *b)
{
	return strcmp(a, b);
}

/* Hosts by header name, in the names' order; each file's clock pair. */
static int clocks(struct cstate *s)
{
	size_t nf = s->src->nfiles;
	s->to_real = calloc(nf + 1, sizeof(*s->to_real));
	s->host = calloc(nf + 1, sizeof(*s->host));
	s->rank = calloc(nf + 1, sizeof(*s->rank));
	s->names = calloc(nf + 1, sizeof(*s->names));
	if (!s->to_real || !s->host || !s->rank || !s->names)
		return -1;
	for (size_t f = 0; f < nf; f++) {
		const struct sp_file_header *h = s->src->header(s->src->ctx, (int)f);
		char name[64] = "";
		if (h)
			memcpy(name, h->host, sizeof(name) - 1);
		size_t k = 0;
		while (k < s->nhosts && strcmp(s->names[k], name))
			k++;
		if (k == s->nhosts)
			memcpy(s->names[s->nhosts++], name, sizeof(name));
	}
	qsort(s->names, s->nhosts, sizeof(*s->names), cmp_name);
	for (size_t f = 0; f < nf; f++) {
		const struct sp_file_header *h = s->src->header(s->src->ctx, (int)f);
		char name[64] = "";
		if (h) {
			memcpy(name, h->host, sizeof(name) - 1);
			s->rank[f] = h->rank;
			s->to_real[f] = (int64_t)h->start_real_ns - (int64_t)h->start_mono_ns;
		} else {
			s->rank[f] = -1;
		}
		char (*p)[64] = bsearch(name, s->names, s->nhosts, sizeof(*s->names), cmp_name);
		s->host[f] = p ? (uint32_t)(p - s->names) : 0;
	}
	return 0;
}

int an_comm_match(struct an_analysis *a)
{
	if (!a->ncomm_calls)
		return 0;
	struct cm_call *c = malloc(a->ncomm_calls * sizeof(*c));
	if (!c)
		return -1;
	memcpy(c, a->comm_calls, a->ncomm_calls * sizeof(*c));
	int rc = cm_match(c, a->ncomm_calls, a->comm_hosts, a->opt.collectives > 0 ? (size_t)a->opt.collectives : 0,
			  &a->comm);
	free(c);
	return rc;
}

int an_comm(struct an_source *src, struct an_analysis *a)
{
	struct cstate s = {.src = src};
	int rc = -1;
	if (clocks(&s) || src->rewind(src->ctx))
		goto out;
	const struct sp_event *e;
	int file;
	while ((e = src->next(src->ctx, &file)))
		if (e->kind >= SP_K_LAUNCH && on_record(&s, e, file))
			goto out;
	a->comm_hosts = (uint32_t)s.nhosts;
	a->comm_host_names = s.names;
	a->comm_calls = s.c;
	a->ncomm_calls = s.n;
	s.names = NULL;
	s.c = NULL;
	rc = an_comm_match(a);
out:;
	union hashmap_val *v;
	for (size_t i = 0; (v = hashmap_next(&s.thr, &i, NULL));)
		free(v->p);
	for (size_t i = 0; (v = hashmap_next(&s.comms, &i, NULL));)
		free(v->p);
	hashmap_free(&s.thr);
	hashmap_free(&s.comms);
	hashmap_free(&s.ops);
	free(s.c);
	free(s.names);
	free(s.to_real);
	free(s.host);
	free(s.rank);
	return rc;
}
