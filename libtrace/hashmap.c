/*
 * hashmap.c - the u64-keyed open-addressing map of hashmap.h.
 *
 *   1. hashing and growth
 *   2. lookup, insertion, deletion, walks
 */
#include "hashmap.h"

#include <stdlib.h>

/* ---------------------------------------------------- 1. hashing and growth */

uint64_t hashmap_hash(uint64_t k)
{
	k ^= k >> 33;
	k *= 0xff51afd7ed558ccdull;
	k ^= k >> 33;
	return k;
}

/* The free slot for key in a table that does not hold it. */
static size_t free_slot(const struct hashmap *m, uint64_t key)
{
	size_t i = hashmap_hash(key) & (m->cap - 1);
	while (m->keys[i])
		i = (i + 1) & (m->cap - 1);
	return i;
}

static int grow(struct hashmap *m)
{
	struct hashmap g = *m;
	g.cap = m->cap ? m->cap * 2 : 64;
	g.keys = calloc(g.cap, sizeof(*g.keys));
	g.vals = calloc(g.cap, sizeof(*g.vals));
	if (!g.keys || !g.vals) {
		free(g.keys);
		free(g.vals);
		return -1;
	}
	for (size_t i = 0; i < m->cap; i++)
		if (m->keys[i]) {
			size_t j = free_slot(&g, m->keys[i]);
			g.keys[j] = m->keys[i];
			g.vals[j] = m->vals[i];
		}
	free(m->keys);
	free(m->vals);
	*m = g;
	return 0;
}

/* -------------------------------------- 2. lookup, insertion, deletion, walks */

/* The slot of key, or of the empty slot that ends its probe chain; cap > 0. */
static size_t probe(const struct hashmap *m, uint64_t key)
{
	size_t i = hashmap_hash(key) & (m->cap - 1);
	while (m->keys[i] && m->keys[i] != key)
		i = (i + 1) & (m->cap - 1);
	return i;
}

union hashmap_val *hashmap_slot(struct hashmap *m, uint64_t key, bool insert)
{
	/* NOTE: grows before looking, even for a key it holds: slot order depends on the calls alone */
	if (insert && (m->n + 1) * 2 > m->cap && grow(m))
		return NULL;
	if (!key) {
		if (!m->has_zero) {
			if (!insert)
				return NULL;
			m->has_zero = true;
			m->zero.u = 0;
			m->n++;
		}
		return &m->zero;
	}
	if (!m->cap)
		return NULL;
	size_t i = probe(m, key);
	if (!m->keys[i]) {
		if (!insert)
			return NULL;
		m->keys[i] = key;
		m->vals[i].u = 0;
		m->n++;
	}
	return &m->vals[i];
}

union hashmap_val *hashmap_find(const struct hashmap *m, uint64_t key)
{
	return hashmap_slot((struct hashmap *)m, key, false);
}

void *hashmap_get(const struct hashmap *m, uint64_t key)
{
	union hashmap_val *v = hashmap_find(m, key);
	return v ? v->p : NULL;
}

void hashmap_del(struct hashmap *m, uint64_t key)
{
	if (!key) {
		if (m->has_zero) {
			m->has_zero = false;
			m->zero.u = 0;
			m->n--;
		}
		return;
	}
	if (!m->cap)
		return;
	size_t mask = m->cap - 1, i = probe(m, key);
	if (!m->keys[i])
		return;
	m->n--;
	for (size_t j = (i + 1) & mask; m->keys[j]; j = (j + 1) & mask) {
		size_t home = hashmap_hash(m->keys[j]) & mask;
		/* j's entry may move to the hole i when its home is not within (i, j] cyclically. */
		if (((j - home) & mask) >= ((j - i) & mask)) {
			m->keys[i] = m->keys[j];
			m->vals[i] = m->vals[j];
			i = j;
		}
	}
	m->keys[i] = 0;
	m->vals[i].u = 0;
}

union hashmap_val *hashmap_next(const struct hashmap *m, size_t *pos, uint64_t *key)
{
	while (*pos < m->cap) {
		size_t i = (*pos)++;
		if (m->keys[i]) {
			if (key)
				*key = m->keys[i];
			return &m->vals[i];
		}
	}
	if (*pos > m->cap || !m->has_zero)
		return NULL;
	(*pos)++;
	if (key)
		*key = 0;
	return (union hashmap_val *)&m->zero;
}

void hashmap_free(struct hashmap *m)
{
	free(m->keys);
	free(m->vals);
	*m = (struct hashmap){0};
}
