/*
 * comm_match.c - collectives matched across ranks (comm_match.h): the hosts'
 * clocks aligned on the completions, then each collective's arrivals.
 *
 * A collective completes on every rank of its communicator within
 * microseconds (a ring or tree's last step reaches all of them together),
 * whatever their clocks say: the median difference between a host's
 * completions and host 0's over the collectives they share is that host's
 * clock offset. Arrivals are the GPU starts of the collectives' kernels when
 * every rank's is known (a fast rank's kernel starts and waits for the slow
 * one), else the host calls. The last rank's lateness is the others' mean wait
 * for it: its arrival minus theirs, averaged over them (its arrival minus the
 * one before it would shrink by the others' own spread).
 */
#include "comm_match.h"

#include <stdlib.h>
#include <string.h>

static int cmp_call(const void *a, const void *b)
{
	const struct cm_call *x = a, *y = b;
	if (x->ident != y->ident)
		return x->ident < y->ident ? -1 : 1;
	if (x->seq != y->seq)
		return x->seq < y->seq ? -1 : 1;
	if (x->crank != y->crank)
		return x->crank < y->crank ? -1 : 1;
	return 0;
}

static int cmp_i64(const void *a, const void *b)
{
	int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
	return x < y ? -1 : x > y;
}

static int cmp_i32(const void *a, const void *b)
{
	int32_t x = *(const int32_t *)a, y = *(const int32_t *)b;
	return x < y ? -1 : x > y;
}

/*
 * Wrapping arithmetic: times and offsets come from files (a rank summary may say
 * anything), and a signed overflow must not be undefined behaviour.
 */
static inline int64_t wsub(int64_t a, int64_t b)
{
	return (int64_t)((uint64_t)a - (uint64_t)b);
}

static inline uint64_t wadd(uint64_t a, int64_t b)
{
	return a + (uint64_t)b;
}

/* A growable array of int64 (one per host, or per rank). */
struct vec {
	int64_t *v;
	size_t n, cap;
};

static int vec_push(struct vec *a, int64_t x)
{
	if (a->n == a->cap) {
		size_t cap = a->cap ? 2 * a->cap : 16;
		int64_t *v = realloc(a->v, cap * sizeof(*v));
		if (!v)
			return -1;
		a->v = v;
		a->cap = cap;
	}
	a->v[a->n++] = x;
	return 0;
}

/* Median of v[0..n) (sorted in place), 0 when empty. */
static int64_t median_i64(int64_t *v, size_t n)
{
	if (!n)
		return 0;
	qsort(v, n, sizeof(*v), cmp_i64);
	return n % 2 ? v[n / 2] : (int64_t)((uint64_t)v[n / 2 - 1] + (uint64_t)(wsub(v[n / 2], v[n / 2 - 1]) / 2));
}

/* The group of calls [i, j): one collective, complete when its ranks 0..nranks-1 are there once each. */
static int group_complete(const struct cm_call *c, size_t i, size_t j)
{
	uint32_t nranks = c[i].nranks;
	if (!nranks || j - i != nranks)
		return 0;
	for (size_t k = i; k < j; k++)
		if (c[k].crank != (int32_t)(k - i) || c[k].nranks != nranks)
			return 0;
	return 1;
}

static int group_timed(const struct cm_call *c, size_t i, size_t j)
{
	for (size_t k = i; k < j; k++)
		if (!c[k].gpu_begin_ns || c[k].gpu_end_ns < c[k].gpu_begin_ns)
			return 0;
	return 1;
}

/* Host offsets from the completions of the timed complete collectives. -1 when out of memory. */
static int align_hosts(struct cm_call *c, size_t n, struct cm_result *res)
{
	size_t nh = res->nhosts;
	struct vec *d = calloc(nh ? nh : 1, sizeof(*d));
	int64_t *ends = malloc((n ? n : 1) * sizeof(*ends));
	if (!d || !ends) {
		free(d);
		free(ends);
		return -1;
	}
	int rc = 0;
	for (size_t i = 0, j; i < n && !rc; i = j) {
		for (j = i + 1; j < n && c[j].ident == c[i].ident && c[j].seq == c[i].seq; j++)
			;
		if (!group_complete(c, i, j) || !group_timed(c, i, j))
			continue;
		/* host 0's median completion, then each other host's against it */
		size_t m = 0;
		for (size_t k = i; k < j; k++)
			if (c[k].host == 0)
				ends[m++] = (int64_t)c[k].gpu_end_ns;
		if (!m)
			continue;
		int64_t ref = median_i64(ends, m);
		for (uint32_t h = 1; h < nh && !rc; h++) {
			m = 0;
			for (size_t k = i; k < j; k++)
				if (c[k].host == h)
					ends[m++] = (int64_t)c[k].gpu_end_ns;
			if (m)
				rc = vec_push(&d[h], wsub(ref, median_i64(ends, m)));
		}
	}
	for (size_t h = 0; h < nh; h++) {
		res->host_offset_ns[h] = 0;
		res->host_residual_ns[h] = h ? -1 : 0;
		if (h == 0 || !d[h].n)
			continue;
		int64_t off = median_i64(d[h].v, d[h].n);
		for (size_t k = 0; k < d[h].n; k++)
			d[h].v[k] = d[h].v[k] > off ? wsub(d[h].v[k], off) : wsub(off, d[h].v[k]);
		res->host_offset_ns[h] = off;
		res->host_residual_ns[h] = median_i64(d[h].v, d[h].n);
	}
	for (size_t h = 0; h < nh; h++)
		free(d[h].v);
	free(d);
	free(ends);
	if (rc)
		return -1;
	for (size_t k = 0; k < n; k++) {
		int64_t off = c[k].host < nh ? res->host_offset_ns[c[k].host] : 0;
		c[k].call_ns = wadd(c[k].call_ns, off);
		if (c[k].gpu_begin_ns)
			c[k].gpu_begin_ns = wadd(c[k].gpu_begin_ns, off);
		if (c[k].gpu_end_ns)
			c[k].gpu_end_ns = wadd(c[k].gpu_end_ns, off);
	}
	return 0;
}

static struct cm_rank *rank_row(struct cm_result *res, int32_t rank)
{
	size_t lo = 0, hi = res->nranks;
	while (lo < hi) {
		size_t mid = (lo + hi) / 2;
		if (res->ranks[mid].rank < rank)
			lo = mid + 1;
		else
			hi = mid;
	}
	return lo < res->nranks && res->ranks[lo].rank == rank ? &res->ranks[lo] : NULL;
}

/* Keep group [i, j) among the worst (top[], k of them kept, sorted by skew, largest first). */
struct top {
	uint64_t skew;
	size_t i, j;
	int gpu;
	int32_t last;
};

static void top_add(struct top *top, size_t *k, size_t cap, struct top t)
{
	if (!cap || (*k == cap && top[cap - 1].skew >= t.skew))
		return;
	size_t p = *k < cap ? (*k)++ : cap - 1;
	while (p > 0 && top[p - 1].skew < t.skew) {
		top[p] = top[p - 1];
		p--;
	}
	top[p] = t;
}

static int keep_worst(const struct cm_call *c, const struct top *top, size_t k, struct cm_result *res)
{
	res->worst = calloc(k ? k : 1, sizeof(*res->worst));
	if (!res->worst)
		return -1;
	for (size_t w = 0; w < k; w++) {
		struct cm_worst *x = &res->worst[w];
		size_t i = top[w].i, nr = top[w].j - top[w].i;
		x->ident = c[i].ident;
		x->seq = c[i].seq;
		x->skew_ns = top[w].skew;
		x->last_rank = top[w].last;
		x->gpu = top[w].gpu;
		x->nranks = (uint32_t)nr;
		if (!(x->arr = calloc(nr, sizeof(*x->arr))))
			return -1;
		res->nworst = w + 1;
		for (size_t r = 0; r < nr; r++)
			x->arr[r] = (struct cm_arrival){c[i + r].rank, c[i + r].call_ns, c[i + r].gpu_begin_ns};
	}
	return 0;
}

int cm_match(struct cm_call *calls, size_t n, size_t nhosts, size_t worst_n, struct cm_result *res)
{
	memset(res, 0, sizeof(*res));
	res->nhosts = nhosts ? nhosts : 1;
	res->host_offset_ns = calloc(res->nhosts, sizeof(int64_t));
	res->host_residual_ns = calloc(res->nhosts, sizeof(int64_t));
	int32_t *rk = malloc((n ? n : 1) * sizeof(*rk));
	struct vec *late = NULL;
	struct vec skew = {0};
	struct top *top = calloc(worst_n ? worst_n : 1, sizeof(*top));
	size_t ntop = 0;
	if (!res->host_offset_ns || !res->host_residual_ns || !rk || !top)
		goto oom;
	if (n)
		qsort(calls, n, sizeof(*calls), cmp_call);
	/* one host: one monotonic clock; several: their realtime clocks, then aligned */
	for (size_t k = 0; k < n && nhosts > 1; k++) {
		calls[k].call_ns = wadd(calls[k].call_ns, calls[k].to_real_ns);
		if (calls[k].gpu_begin_ns)
			calls[k].gpu_begin_ns = wadd(calls[k].gpu_begin_ns, calls[k].to_real_ns);
		if (calls[k].gpu_end_ns)
			calls[k].gpu_end_ns = wadd(calls[k].gpu_end_ns, calls[k].to_real_ns);
	}
	if (align_hosts(calls, n, res))
		goto oom;

	/* the rows: the job ranks seen, increasing */
	for (size_t k = 0; k < n; k++)
		rk[k] = calls[k].rank;
	qsort(rk, n, sizeof(*rk), cmp_i32);
	size_t nr = 0;
	for (size_t k = 0; k < n; k++)
		if (!nr || rk[nr - 1] != rk[k])
			rk[nr++] = rk[k];
	res->ranks = calloc(nr ? nr : 1, sizeof(*res->ranks));
	late = calloc(nr ? nr : 1, sizeof(*late));
	if (!res->ranks || !late)
		goto oom;
	res->nranks = nr;
	for (size_t k = 0; k < nr; k++)
		res->ranks[k].rank = rk[k];

	uint64_t skew_sum = 0;
	for (size_t i = 0, j; i < n; i = j) {
		for (j = i + 1; j < n && calls[j].ident == calls[i].ident && calls[j].seq == calls[i].seq; j++)
			;
		if (!group_complete(calls, i, j)) {
			res->incomplete++;
			continue;
		}
		int timed = group_timed(calls, i, j);
		res->collectives++;
		res->gpu_timed += (uint64_t)timed;
		uint64_t first = UINT64_MAX, max = 0, second = 0;
		size_t who = i;
		for (size_t k = i; k < j; k++) {
			uint64_t a = timed ? calls[k].gpu_begin_ns : calls[k].call_ns;
			struct cm_rank *r = rank_row(res, calls[k].rank);
			if (r)
				r->matched++;
			if (a < first)
				first = a;
			if (k == i || a > max) {
				second = k == i ? 0 : max;
				max = a;
				who = k;
			} else if (a > second) {
				second = a;
			}
		}
		uint64_t sk = max - first;
		skew_sum += sk;
		if (vec_push(&skew, (int64_t)sk))
			goto oom;
		int tie = j - i < 2 || max == second;
		top_add(top, &ntop, worst_n, (struct top){sk, i, j, timed, tie ? -1 : calls[who].rank});
		if (tie)
			continue; /* nobody was last */
		struct cm_rank *r = rank_row(res, calls[who].rank);
		if (!r)
			continue;
		/* the others' mean wait for it: what this collective's lateness cost each of them */
		uint64_t caused = 0;
		for (size_t k = i; k < j; k++)
			caused += max - (timed ? calls[k].gpu_begin_ns : calls[k].call_ns);
		uint64_t lateness = caused / (j - i - 1);
		r->last++;
		r->caused_ns += caused;
		r->late_sum_ns += lateness;
		if (vec_push(&late[r - res->ranks], (int64_t)lateness))
			goto oom;
	}
	if (res->collectives) {
		res->skew_mean_ns = skew_sum / res->collectives;
		qsort(skew.v, skew.n, sizeof(*skew.v), cmp_i64);
		res->skew_p95_ns = (uint64_t)skew.v[(size_t)((double)(skew.n - 1) * 0.95 + 0.5)];
	}
	for (size_t k = 0; k < nr; k++) {
		struct cm_rank *r = &res->ranks[k];
		if (!r->last)
			continue;
		r->late_mean_ns = r->late_sum_ns / r->last;
		qsort(late[k].v, late[k].n, sizeof(int64_t), cmp_i64);
		r->late_p95_ns = (uint64_t)late[k].v[(size_t)((double)(late[k].n - 1) * 0.95 + 0.5)];
	}
	if (keep_worst(calls, top, ntop, res))
		goto oom;
	for (size_t k = 0; k < nr; k++)
		free(late[k].v);
	free(late);
	free(skew.v);
	free(rk);
	free(top);
	return 0;
oom:
	if (late)
		for (size_t k = 0; k < res->nranks; k++)
			free(late[k].v);
	free(late);
	free(skew.v);
	free(rk);
	free(top);
	cm_result_free(res);
	return -1;
}

void cm_result_free(struct cm_result *res)
{
	for (size_t w = 0; w < res->nworst; w++)
		free(res->worst[w].arr);
	free(res->worst);
	free(res->ranks);
	free(res->host_offset_ns);
	free(res->host_residual_ns);
	memset(res, 0, sizeof(*res));
}
