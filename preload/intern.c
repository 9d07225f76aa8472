/*
 * intern.c - lock-free table of interned strings (see intern.h).
 *
 * Divided into: the hash (the length is mixed in, so the tail loads need not
 * be unambiguous on their own); table set-up and reset; lookup-or-insert.
 *
 * Insert protocol: claim a free entry by CAS of its hash from 0; the winner
 * takes the next id, writes the STRING record into the keep area, then
 * publishes the id with release. A thread that finds the hash while the id is
 * still 0 (being written) does not wait: it writes its own copy of the string
 * under a fresh id (two ids for one string are harmless to a reader).
 */
#include "intern.h"

#include <errno.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "stepprof/trace.h"
#include "tracefile.h"

#define MAX_PROBE 64

/* ------------------------------------------------------------------ hash */

static inline uint64_t mix(uint64_t h)
{
	h ^= h >> 33;
	h *= 0xff51afd7ed558ccdull;
	h ^= h >> 33;
	h *= 0xc4ceb9fe1a85ec53ull;
	h ^= h >> 33;
	return h;
}

uint64_t sp_intern_hash(const char *s, size_t len)
{
	uint64_t h = 0x9e3779b97f4a7c15ull ^ (len * 0x100000001b3ull);
	size_t i = 0;
	for (; i + 8 <= len; i += 8) {
		uint64_t w;
		memcpy(&w, s + i, 8);
		h = (h ^ w) * 0x9fb21c651e98df25ull;
		h ^= h >> 29;
	}
	size_t r = len - i;
	if (r) {
		/* 1..7 tail bytes in at most two fixed-size loads (overlapping when r is 5..7) */
		uint64_t w;
		if (r >= 4) {
			uint32_t a, b;
			memcpy(&a, s + i, 4);
			memcpy(&b, s + len - 4, 4);
			w = (uint64_t)a | ((uint64_t)b << 32);
		} else {
			w = (uint64_t)(uint8_t)s[i] | ((uint64_t)(uint8_t)s[i + r / 2] << 8) |
			    ((uint64_t)(uint8_t)s[len - 1] << 16);
		}
		h = (h ^ w) * 0x9fb21c651e98df25ull;
	}
	return mix(h) | 1;
}

/* ----------------------------------------------------------- set-up, reset */

int sp_intern_init(struct sp_intern *t, unsigned bits)
{
	size_t n = (size_t)1 << bits;
	void *p = (void *)syscall(SYS_mmap, NULL, n * sizeof(struct sp_intern_ent), PROT_READ | PROT_WRITE,
				  MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
	if (p == MAP_FAILED) {
		int e = errno;
		t->ent = NULL;
		return -e;
	}
	t->ent = p;
	t->mask = (uint32_t)(n - 1);
	t->next_id = 0;
	return 0;
}

void sp_intern_reset(struct sp_intern *t)
{
	if (t->ent) {
		int saved = errno;
		/* private anonymous pages read back as zeros after MADV_DONTNEED: no memset of untouched pages */
		if (madvise(t->ent, ((size_t)t->mask + 1) * sizeof(*t->ent), MADV_DONTNEED) != 0)
			memset(t->ent, 0, ((size_t)t->mask + 1) * sizeof(*t->ent));
		errno = saved;
	}
	__atomic_store_n(&t->next_id, 0, __ATOMIC_RELEASE);
}

void sp_intern_free(struct sp_intern *t)
{
	if (t->ent)
		syscall(SYS_munmap, t->ent, ((size_t)t->mask + 1) * sizeof(*t->ent));
	t->ent = NULL;
}

/* --------------------------------------------------------- lookup, insert */

static uint32_t new_id(struct sp_intern *t)
{
	uint32_t id = __atomic_add_fetch(&t->next_id, 1, __ATOMIC_RELAXED);
	return id <= SP_INTERN_MAX_ID ? id : 0;
}

static uint32_t store(struct sp_intern *t, struct sp_tf *tf, const char *s, size_t len)
{
	uint32_t id = new_id(t);
	if (!id || sp_tf_keep_string(tf, id, s, (unsigned)len) != 0)
		return 0;
	return id;
}

uint32_t sp_intern_get(struct sp_intern *t, struct sp_tf *tf, const char *s, size_t len)
{
	if (!t->ent || !tf)
		return 0;
	if (!s)
		s = "", len = 0;
	if (len > SP_MAX_STRING)
		len = SP_MAX_STRING;
	uint64_t h = sp_intern_hash(s, len);
	for (uint32_t i = 0; i < MAX_PROBE; i++) {
		struct sp_intern_ent *e = &t->ent[(h + i) & t->mask];
		uint64_t eh = __atomic_load_n(&e->hash, __ATOMIC_ACQUIRE);
		if (eh == h) {
			uint32_t id = __atomic_load_n(&e->id, __ATOMIC_ACQUIRE);
			if (id == SP_INTERN_FAILED)
				return 0;
			return id ? id : store(t, tf, s, len);
		}
		if (eh != 0)
			continue;
		if (!__atomic_compare_exchange_n(&e->hash, &eh, h, 0, __ATOMIC_ACQ_REL, __ATOMIC_ACQUIRE)) {
			if (eh != h)
				continue; /* another string took it: keep probing */
			uint32_t id = __atomic_load_n(&e->id, __ATOMIC_ACQUIRE);
			if (id == SP_INTERN_FAILED)
				return 0;
			return id ? id : store(t, tf, s, len);
		}
		uint32_t id = store(t, tf, s, len);
		__atomic_store_n(&e->id, id ? id : SP_INTERN_FAILED, __ATOMIC_RELEASE);
		return id;
	}
	/* a long probe chain: the table is nearly full; the string is stored without dedup */
	return store(t, tf, s, len);
}
