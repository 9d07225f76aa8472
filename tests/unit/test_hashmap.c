/*
 * test_hashmap.c - the u64-keyed map of libtrace/hashmap.c.
 *
 * Divided into: 1. single operations (insert, find, overwrite, delete, the
 * keys 0 and UINT64_MAX, free), 2. thousands of random keys against a
 * brute-force array of (key, value) pairs, through growth and deletion.
 */
#include <criterion/criterion.h>
#include <stdint.h>
#include <stdlib.h>

#include "hashmap.h"

/* ------------------------------------------------- 1. single operations */

Test(hashmap, insert_find_overwrite)
{
	struct hashmap m = {0};
	cr_assert_null(hashmap_find(&m, 7));
	cr_assert_null(hashmap_get(&m, 7));
	union hashmap_val *v = hashmap_slot(&m, 7, true);
	cr_assert_not_null(v);
	cr_assert_eq(v->u, 0, "a new entry's value is 0");
	v->u = 70;
	cr_assert_eq(m.n, 1);
	cr_assert_eq(hashmap_find(&m, 7)->u, 70);
	hashmap_slot(&m, 7, true)->u = 71; /* the same key: the same entry */
	cr_assert_eq(m.n, 1);
	cr_assert_eq(hashmap_find(&m, 7)->u, 71);
	cr_assert_null(hashmap_slot(&m, 8, false), "no insert: absent stays absent");
	cr_assert_eq(m.n, 1);
	int x;
	hashmap_slot(&m, 9, true)->p = &x;
	cr_assert_eq(hashmap_get(&m, 9), &x);
	hashmap_free(&m);
	cr_assert_eq(m.n, 0);
	cr_assert_null(hashmap_find(&m, 7));
	hashmap_free(&m); /* an empty map frees too */
}

Test(hashmap, keys_zero_and_max)
{
	struct hashmap m = {0};
	hashmap_slot(&m, 0, true)->u = 1;
	hashmap_slot(&m, UINT64_MAX, true)->u = 2;
	cr_assert_eq(m.n, 2);
	cr_assert_eq(hashmap_find(&m, 0)->u, 1);
	cr_assert_eq(hashmap_find(&m, UINT64_MAX)->u, 2);
	size_t pos = 0, seen = 0;
	uint64_t k, sum = 0;
	for (union hashmap_val *v; (v = hashmap_next(&m, &pos, &k)); seen++)
		sum += v->u + (k == 0) * 10 + (k == UINT64_MAX) * 100;
	cr_assert_eq(seen, 2);
	cr_assert_eq(sum, 113, "the walk gives each key with its value");
	hashmap_del(&m, 0);
	cr_assert_null(hashmap_find(&m, 0));
	cr_assert_eq(m.n, 1);
	hashmap_del(&m, 0); /* absent: nothing */
	hashmap_del(&m, 12345);
	cr_assert_eq(m.n, 1);
	hashmap_del(&m, UINT64_MAX);
	cr_assert_eq(m.n, 0);
	pos = 0;
	cr_assert_null(hashmap_next(&m, &pos, NULL));
	hashmap_free(&m);
}

Test(hashmap, grows_through_many_keys)
{
	struct hashmap m = {0};
	const uint64_t n = 100000;
	/* keys that share their low bits: the hash, not the key, spreads them */
	for (uint64_t i = 1; i <= n; i++)
		hashmap_slot(&m, i << 20, true)->u = i;
	cr_assert_eq(m.n, n);
	cr_assert_geq(m.cap, 2 * n, "never over half full");
	for (uint64_t i = 1; i <= n; i++)
		cr_assert_eq(hashmap_find(&m, i << 20)->u, i);
	cr_assert_null(hashmap_find(&m, (n + 1) << 20));
	hashmap_free(&m);
}

/* ------------------------------------------- 2. against a brute-force array */

struct pair {
	uint64_t key, val;
};

static struct pair *brute_find(struct pair *v, size_t n, uint64_t key)
{
	for (size_t i = 0; i < n; i++)
		if (v[i].key == key)
			return &v[i];
	return NULL;
}

/* Small keys (so that many repeat), 0 and UINT64_MAX among them, and wide ones. */
static uint64_t random_key(void)
{
	uint64_t r = (uint64_t)random() << 32 ^ (uint64_t)random();
	switch (random() % 4) {
	case 0:
		return r % 3000;
	case 1:
		return UINT64_MAX - r % 4;
	default:
		return r;
	}
}

static void check_same(const struct hashmap *m, struct pair *v, size_t n)
{
	cr_assert_eq(m->n, n);
	for (size_t i = 0; i < n; i++) {
		union hashmap_val *h = hashmap_find(m, v[i].key);
		cr_assert_not_null(h, "key %llu lost", (unsigned long long)v[i].key);
		cr_assert_eq(h->u, v[i].val);
	}
	size_t pos = 0, seen = 0;
	uint64_t k;
	for (union hashmap_val *h; (h = hashmap_next(m, &pos, &k)); seen++) {
		struct pair *p = brute_find(v, n, k);
		cr_assert_not_null(p, "the walk gives key %llu, never inserted", (unsigned long long)k);
		cr_assert_eq(h->u, p->val);
	}
	cr_assert_eq(seen, n, "the walk visits each entry once");
}

Test(hashmap, random_keys_match_brute_force)
{
	enum { OPS = 6000 };
	struct pair *v = calloc(OPS, sizeof(*v));
	size_t n = 0;
	struct hashmap m = {0};
	srandom(12345);
	for (int op = 0; op < OPS; op++) {
		uint64_t key = random_key();
		struct pair *p = brute_find(v, n, key);
		if (random() % 4 == 0) { /* delete, present or not */
			hashmap_del(&m, key);
			if (p)
				*p = v[--n];
		} else {
			uint64_t val = (uint64_t)op + 1;
			hashmap_slot(&m, key, true)->u = val;
			if (!p)
				p = &v[n++];
			*p = (struct pair){key, val};
		}
		cr_assert_eq(hashmap_find(&m, key) != NULL, brute_find(v, n, key) != NULL);
		if (op % 500 == 0)
			check_same(&m, v, n);
	}
	check_same(&m, v, n);
	/* delete everything, in insertion-independent order: the map empties */
	while (n) {
		hashmap_del(&m, v[n - 1].key);
		n--;
		if (n % 256 == 0)
			check_same(&m, v, n);
	}
	cr_assert_eq(m.n, 0);
	hashmap_free(&m);
	free(v);
}
