/*
 * hashmap.h - the u64-keyed hash map of the user-space tools: the analyzer's
 * threads, dump's GPU spans, the reader's threads while it indexes the ring, the
 * eBPF collector's processes, streams, held calls and strings.
 *
 * Open addressing with linear probing; the table doubles (from 64 slots) when an
 * insertion would fill it past one half, and deletion shifts entries back, so
 * probe chains stay whole without tombstones. Memory comes from calloc; a map
 * that cannot grow says so (hashmap_slot returns NULL) and stays as it was.
 *
 * Every key is allowed. Key 0 marks an empty slot in keys[], so an entry with key
 * 0 lives beside the array (has_zero, zero). hashmap_next visits every entry:
 * the slots i in [0, cap) with keys[i] != 0, in slot order (which depends only
 * on the keys inserted and deleted, and in what order), then key 0. A walk that
 * deletes reads keys[] itself: hashmap_del may move a later entry into the slot
 * it just emptied, so such a walk visits that slot again.
 *
 * Not for the preload's tables (they must not allocate, and are read without
 * locks) nor for the fixed-size tables that drop entries when full (the
 * analyzer's open files and live blocks, the exporter's op window).
 */
#ifndef STEPPROF_HASHMAP_H
#define STEPPROF_HASHMAP_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* A value: a pointer or a number, as the map's user chooses; 0 / NULL when new. */
union hashmap_val {
	void *p;
	uint64_t u;
};

struct hashmap {
	uint64_t *keys; /* cap slots, 0 empty */
	union hashmap_val *vals;
	size_t cap, n; /* cap: 0 or a power of two; n: entries, key 0 included */
	bool has_zero;
	union hashmap_val zero; /* the value of key 0 when has_zero */
};

/* The slot hash: a 64-bit finaliser whose low bits depend on every key bit. */
uint64_t hashmap_hash(uint64_t k);

/*
 * The value of key; with insert, key is added (value 0) when absent. NULL when
 * absent without insert, or when the map could not grow (out of memory). The
 * pointer is valid until the next insertion or deletion.
 */
union hashmap_val *hashmap_slot(struct hashmap *m, uint64_t key, bool insert);

/* The value of key, NULL when absent. */
union hashmap_val *hashmap_find(const struct hashmap *m, uint64_t key);

/* The pointer value of key, NULL when absent. */
void *hashmap_get(const struct hashmap *m, uint64_t key);

/* Remove key (nothing when absent). */
void hashmap_del(struct hashmap *m, uint64_t key);

/*
 * The entry at or after walk position *pos (0 to start): its value, its key in
 * *key (may be NULL), *pos moved past it; NULL after the last entry.
 */
union hashmap_val *hashmap_next(const struct hashmap *m, size_t *pos, uint64_t *key);

/* Free the map's memory (not what its values point to); the map is empty after. */
void hashmap_free(struct hashmap *m);

#endif
