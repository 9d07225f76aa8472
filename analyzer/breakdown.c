/*
 * breakdown.c - the partition of an iteration's wall time (see breakdown.h).
 *
 * Divided into: span lists (push, normalise), the union of two normalised lists,
 * the input of lock waits (an intersection: bd_lock_input), and bd_partition(),
 * which accumulates the union of the conditions in priority order: the time a
 * condition adds to the union of those before it is its share (bd_partition_v1:
 * the same in schema 1's order, communication as compute).
 *
 * RATIONALE: a sweep over begin/end points with per-category counters would do
 * the same, but spans mostly arrive sorted, so sorting each list alone (skipped
 * when already sorted) and merging is linear in practice.
 */
#include "breakdown.h"

#include <stdlib.h>
#include <string.h>

int bd_push(struct bd_list *l, uint64_t b, uint64_t e)
{
	if (e <= b)
		return 0;
	/* back-to-back kernels and copies arrive in order: extend the last span (memory stays small) */
	if (l->n && b >= l->v[l->n - 1].b && b <= l->v[l->n - 1].e) {
		if (e > l->v[l->n - 1].e)
			l->v[l->n - 1].e = e;
		return 0;
	}
	if (l->n == l->cap) {
		size_t cap = l->cap ? l->cap * 2 : 64;
		struct bd_span *v = realloc(l->v, cap * sizeof(*v));
		if (!v)
			return -1;
		l->v = v;
		l->cap = cap;
	}
	l->v[l->n].b = b;
	l->v[l->n].e = e;
	l->n++;
	return 0;
}

static int span_cmp(const void *a, const void *b)
{
	const struct bd_span *x = a, *y = b;
	if (x->b != y->b)
		return x->b < y->b ? -1 : 1;
	return x->e < y->e ? -1 : x->e > y->e;
}

void bd_normalise(struct bd_list *l, uint64_t lo, uint64_t hi)
{
	size_t k = 0;
	int sorted = 1;
	for (size_t i = 0; i < l->n; i++) {
		struct bd_span s = l->v[i];
		if (s.b < lo)
			s.b = lo;
		if (s.e > hi)
			s.e = hi;
		if (s.e <= s.b)
			continue;
		if (k && s.b < l->v[k - 1].b)
			sorted = 0;
		l->v[k++] = s;
	}
	l->n = k;
	if (!sorted)
		qsort(l->v, l->n, sizeof(*l->v), span_cmp);
	k = 0;
	for (size_t i = 0; i < l->n; i++) {
		if (k && l->v[i].b <= l->v[k - 1].e) {
			if (l->v[i].e > l->v[k - 1].e)
				l->v[k - 1].e = l->v[i].e;
			continue;
		}
		l->v[k++] = l->v[i];
	}
	l->n = k;
}

uint64_t bd_total(const struct bd_list *l)
{
	uint64_t t = 0;
	for (size_t i = 0; i < l->n; i++)
		t += l->v[i].e - l->v[i].b;
	return t;
}

void bd_list_free(struct bd_list *l)
{
	free(l->v);
	memset(l, 0, sizeof(*l));
}

/* out = a ∪ b, both normalised; out has room for a->n + b->n spans. Returns out's count. */
static size_t span_union(const struct bd_span *a, size_t na, const struct bd_span *b, size_t nb, struct bd_span *out)
{
	size_t i = 0, j = 0, k = 0;
	while (i < na || j < nb) {
		struct bd_span s;
		if (j >= nb || (i < na && a[i].b <= b[j].b))
			s = a[i++];
		else
			s = b[j++];
		if (k && s.b <= out[k - 1].e) {
			if (s.e > out[k - 1].e)
				out[k - 1].e = s.e;
		} else {
			out[k++] = s;
		}
	}
	return k;
}

int bd_lock_input(struct bd_list lists[BD__COUNT], uint64_t start, uint64_t end, uint64_t *added)
{
	struct bd_list *l = &lists[BD_LOCK], *w = &lists[BD_PEER_WAIT];
	*added = 0;
	bd_normalise(l, start, end);
	bd_normalise(w, start, end);
	/* both sorted and disjoint: one merge-like walk, the span that ends first moves on */
	for (size_t i = 0, j = 0; i < l->n && j < w->n;) {
		uint64_t b = l->v[i].b > w->v[j].b ? l->v[i].b : w->v[j].b;
		uint64_t e = l->v[i].e < w->v[j].e ? l->v[i].e : w->v[j].e;
		if (e > b) {
			if (bd_push(&lists[BD_INPUT], b, e))
				return -1;
			*added += e - b;
		}
		if (l->v[i].e < w->v[j].e)
			i++;
		else
			j++;
	}
	return 0;
}

/*
 * The union of the n conditions order[] accumulated in that order, each one's
 * addition to out[cat[k]] (lists normalised); the rest of [start, end) to other.
 */
static int partition_in(const struct bd_list *lists, const int *order, const int *cat, int n, uint64_t start,
			uint64_t end, uint64_t out[AN_CAT__COUNT])
{
	size_t total = 0;
	memset(out, 0, AN_CAT__COUNT * sizeof(out[0]));
	for (int k = 0; k < n; k++)
		total += lists[order[k]].n;
	struct bd_span *acc = malloc((total + 1) * sizeof(*acc));
	struct bd_span *tmp = malloc((total + 1) * sizeof(*tmp));
	if (!acc || !tmp) {
		free(acc);
		free(tmp);
		return -1;
	}
	size_t nacc = 0;
	uint64_t covered = 0;
	for (int k = 0; k < n; k++) {
		const struct bd_list *l = &lists[order[k]];
		size_t m = span_union(acc, nacc, l->v, l->n, tmp);
		struct bd_span *sw = acc;
		acc = tmp;
		tmp = sw;
		nacc = m;
		uint64_t now = 0;
		for (size_t i = 0; i < nacc; i++)
			now += acc[i].e - acc[i].b;
		out[cat[k]] += now - covered;
		covered = now;
	}
	out[AN_OTHER] = (end - start) - covered;
	free(acc);
	free(tmp);
	return 0;
}

int bd_partition(struct bd_list lists[BD__COUNT], uint64_t start, uint64_t end, uint64_t out[AN_CAT__COUNT],
		 uint64_t *gpu_busy)
{
	static const int order[] = {BD_COMPUTE, BD_COMM, BD_H2D, BD_D2H, BD_INPUT, BD_COMM_SYNC, BD_SYNC};
	static const int cat[] = {AN_COMPUTE, AN_COMM, AN_H2D, AN_D2H, AN_INPUT, AN_COMM, AN_SYNC};
	if (end < start)
		end = start;
	for (int c = 0; c < BD__COUNT; c++)
		bd_normalise(&lists[c], start, end);
	if (partition_in(lists, order, cat, (int)(sizeof(order) / sizeof(order[0])), start, end, out))
		return -1;
	if (gpu_busy)
		*gpu_busy = bd_total(&lists[BD_GPU]);
	return 0;
}

int bd_partition_v1(const struct bd_list lists[BD__COUNT], uint64_t start, uint64_t end, uint64_t out[AN_CAT__COUNT])
{
	static const int order[] = {BD_COMPUTE, BD_COMM, BD_H2D, BD_D2H, BD_INPUT, BD_SYNC};
	static const int cat[] = {AN_COMPUTE, AN_COMPUTE, AN_H2D, AN_D2H, AN_INPUT, AN_SYNC};
	if (end < start)
		end = start;
	return partition_in(lists, order, cat, (int)(sizeof(order) / sizeof(order[0])), start, end, out);
}

uint64_t bd_overlap(const struct bd_list *a, const struct bd_list *b)
{
	uint64_t t = 0;
	for (size_t i = 0, j = 0; i < a->n && j < b->n;) {
		uint64_t lo = a->v[i].b > b->v[j].b ? a->v[i].b : b->v[j].b;
		uint64_t hi = a->v[i].e < b->v[j].e ? a->v[i].e : b->v[j].e;
		if (hi > lo)
			t += hi - lo;
		if (a->v[i].e < b->v[j].e)
			i++;
		else
			j++;
	}
	return t;
}

int bd_minus(const struct bd_list *a, const struct bd_list *b, struct bd_list *out)
{
	out->n = 0;
	size_t j = 0;
	for (size_t i = 0; i < a->n; i++) {
		uint64_t cb = a->v[i].b, ce = a->v[i].e;
		while (j < b->n && b->v[j].e <= cb)
			j++;
		/* the spans of b within [cb, ce) cut it; b is sorted and disjoint */
		for (size_t k = j; k < b->n && b->v[k].b < ce && cb < ce; k++) {
			if (b->v[k].b > cb && bd_push(out, cb, b->v[k].b))
				return -1;
			if (b->v[k].e > cb)
				cb = b->v[k].e;
		}
		if (ce > cb && bd_push(out, cb, ce))
			return -1;
	}
	return 0;
}

int bd_exposed(const struct bd_list lists[BD__COUNT], int c, struct bd_list *out)
{
	struct bd_list cur = {0}, next = {0};
	out->n = 0;
	if (c < 0 || c >= BD_GPU)
		return 0;
	for (size_t i = 0; i < lists[c].n; i++)
		if (bd_push(&cur, lists[c].v[i].b, lists[c].v[i].e))
			goto oom;
	for (int k = 0; k < c; k++) {
		if (bd_minus(&cur, &lists[k], &next))
			goto oom;
		struct bd_list t = cur;
		cur = next;
		next = t;
	}
	for (size_t i = 0; i < cur.n; i++)
		if (bd_push(out, cur.v[i].b, cur.v[i].e))
			goto oom;
	bd_list_free(&cur);
	bd_list_free(&next);
	return 0;
oom:
	bd_list_free(&cur);
	bd_list_free(&next);
	return -1;
}
