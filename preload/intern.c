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

static inline uint64_t load64(const char *p)
{
	uint64_t w;
	memcpy(&w, p, 8);
	return w;
}

static inline uint64_t load32(const char *p)
{
	uint32_t w;
	memcpy(&w, p, 4);
	return w;
}

/*
 * 64x64 -> 128-bit product, the halves xored: one multiply mixes 16 bytes.
 * It is zero when an operand is; fold_k's operand `w ^ K` is never zero for a
 * text string (every byte of K has its top bit set, so w would have to hold
 * exactly K's eight non-ASCII bytes), and the other operand, w ^ h, is zero
 * only when the running state equals the data (odds 2^-64).
 */
#define HASH_K1 0xcfab97ccd9d58ea3ull /* random, odd, every byte >= 0x80 */
#define HASH_K2 0x92c3e0d7bc99b481ull
#define HASH_K3 0x9fb21c651e98df25ull
static inline uint64_t fold(uint64_t a, uint64_t b)
{
	unsigned __int128 p = (unsigned __int128)a * b;
	return (uint64_t)p ^ (uint64_t)(p >> 64);
}

/*
 * RATIONALE: 16 bytes per multiply (the former loop took one multiply and a
 * shift per 8 bytes): a 30-byte path hashes in ~35 instructions instead of
 * ~60 (callgrind), and the hash is inlined into sp_intern_get. Its values
 * live only in this process's table: nothing stored depends on them.
 */
static inline __attribute__((always_inline)) uint64_t hash_inline(const char *s, size_t len)
{
	uint64_t h = 0x9e3779b97f4a7c15ull ^ (len * 0x100000001b3ull);
	size_t i = 0;
	for (; len - i > 16; i += 16)
		h = fold(load64(s + i) ^ h, load64(s + i + 8) ^ HASH_K1);
	/* the last 0..16 bytes in at most two fixed-size loads (overlapping when
	 * shorter), unambiguous because the length is in h */
	size_t r = len - i;
	uint64_t a = 0, b = 0;
	if (r > 8) {
		a = load64(s + i);
		b = load64(s + len - 8);
	} else if (r >= 4) {
		a = load32(s + i) | load32(s + len - 4) << 32;
	} else if (r) {
		a = (uint64_t)(uint8_t)s[i] | ((uint64_t)(uint8_t)s[i + r / 2] << 8) | ((uint64_t)(uint8_t)s[len - 1] << 16);
	}
	/* a second fold spreads the last block over every bit (the table index
	 * takes the low ones); murmur's finaliser did the same in ~12 instructions.
	 * NOTE: 0 (a free entry) becomes 1, rather than forcing the low bit on for
	 * every string, which left the even entries as the start of no probe. */
	h = fold(fold(a ^ h, b ^ HASH_K2), HASH_K3);
	return h + (h == 0);
}

uint64_t sp_intern_hash(const char *s, size_t len)
{
	return hash_inline(s, len);
}

/* ----------------------------------------------------------- set-up, reset */

static size_t table_bytes(const struct sp_intern *t, unsigned k)
{
	return ((size_t)t->mask[k] + 1) * sizeof(struct sp_intern_ent);
}

static struct sp_intern_ent *map_table(size_t entries)
{
	void *p = (void *)syscall(SYS_mmap, NULL, entries * sizeof(struct sp_intern_ent), PROT_READ | PROT_WRITE,
				  MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
	return p == MAP_FAILED ? NULL : p;
}

int sp_intern_init(struct sp_intern *t, unsigned bits)
{
	memset(t, 0, sizeof(*t));
	size_t n = (size_t)1 << bits;
	t->tab[0] = map_table(n);
	if (!t->tab[0])
		return -errno;
	t->mask[0] = (uint32_t)(n - 1);
	t->bits0 = bits;
	t->ntab = 1;
	return 0;
}

void sp_intern_reset(struct sp_intern *t)
{
	int saved = errno;
	unsigned n = __atomic_load_n(&t->ntab, __ATOMIC_ACQUIRE);
	for (unsigned k = 1; k < n && k < SP_INTERN_TABLES; k++) {
		if (t->tab[k])
			syscall(SYS_munmap, t->tab[k], table_bytes(t, k));
		t->tab[k] = NULL;
	}
	if (t->tab[0]) {
		/* private anonymous pages read back as zeros after MADV_DONTNEED: no memset of untouched pages */
		if (madvise(t->tab[0], table_bytes(t, 0), MADV_DONTNEED) != 0)
			memset(t->tab[0], 0, table_bytes(t, 0));
	}
	__atomic_store_n(&t->used, 0, __ATOMIC_RELAXED);
	__atomic_store_n(&t->growing, 0, __ATOMIC_RELAXED); /* a parent's thread may have been growing it */
	__atomic_store_n(&t->ntab, t->tab[0] ? 1 : 0, __ATOMIC_RELEASE);
	__atomic_store_n(&t->next_id, 0, __ATOMIC_RELEASE);
	errno = saved;
}

void sp_intern_free(struct sp_intern *t)
{
	for (unsigned k = 0; k < SP_INTERN_TABLES; k++)
		if (t->tab[k])
			syscall(SYS_munmap, t->tab[k], table_bytes(t, k));
	memset(t, 0, sizeof(*t));
}

/* The newest table is half full: one thread maps the next, 4x larger. */
static void grow(struct sp_intern *t, unsigned n)
{
	uint32_t z = 0;
	if (n >= SP_INTERN_TABLES || !__atomic_compare_exchange_n(&t->growing, &z, 1, 0, __ATOMIC_ACQ_REL, __ATOMIC_RELAXED))
		return;
	if (__atomic_load_n(&t->ntab, __ATOMIC_ACQUIRE) == n) {
		int saved = errno;
		size_t entries = (size_t)1 << (t->bits0 + 2 * n);
		struct sp_intern_ent *p = map_table(entries);
		errno = saved;
		if (p) {
			t->mask[n] = (uint32_t)(entries - 1);
			__atomic_store_n(&t->tab[n], p, __ATOMIC_RELEASE);
			__atomic_store_n(&t->used, 0, __ATOMIC_RELAXED);
			__atomic_store_n(&t->ntab, n + 1, __ATOMIC_RELEASE);
		}
	}
	__atomic_store_n(&t->growing, 0, __ATOMIC_RELEASE);
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

/* The entry of hash h in table k, or NULL when it is not there (an empty entry ends the probe). */
static struct sp_intern_ent *find(struct sp_intern_ent *tab, uint32_t mask, uint64_t h)
{
	for (uint32_t i = 0; i < MAX_PROBE; i++) {
		struct sp_intern_ent *e = &tab[(h + i) & mask];
		uint64_t eh = __atomic_load_n(&e->hash, __ATOMIC_ACQUIRE);
		if (eh == h)
			return e;
		if (eh == 0)
			return NULL;
	}
	return NULL;
}

/*
 * The id of an entry whose first writer has not published it yet: waited for a
 * little (the writer copies the string into the keep area: about a microsecond),
 * then a copy of the string of our own. RATIONALE: not for ever, the writer may be
 * this very thread, interrupted by the signal handler that interns now; before,
 * never: 8 threads interning the same 2,000 names made 11.6% duplicates under
 * AddressSanitizer (intern::concurrent_inserts_all_readable).
 */
static __attribute__((noinline)) uint32_t found_wait(struct sp_intern *t, struct sp_tf *tf, struct sp_intern_ent *e,
						     const char *s, size_t len)
{
	for (unsigned spin = 0; spin < (1u << 14); spin++) {
		uint32_t id = __atomic_load_n(&e->id, __ATOMIC_ACQUIRE);
		if (id)
			return id == SP_INTERN_FAILED ? 0 : id;
#if defined(__x86_64__) || defined(__i386__)
		__builtin_ia32_pause();
#endif
	}
	return store(t, tf, s, len);
}

/* An entry found: its id, or (its first writer not done) found_wait's. */
static inline __attribute__((always_inline)) uint32_t found(struct sp_intern *t, struct sp_tf *tf, struct sp_intern_ent *e, const char *s, size_t len)
{
	uint32_t id = __atomic_load_n(&e->id, __ATOMIC_ACQUIRE);
	if (id == SP_INTERN_FAILED)
		return 0;
	return id ? id : found_wait(t, tf, e, s, len);
}

/* sp_intern_get past the first place probed in the newest table: the probes, the older tables, the insert. */
static __attribute__((noinline)) uint32_t get_probe(struct sp_intern *t, struct sp_tf *tf, const char *s, size_t len,
						    uint64_t h, unsigned n)
{
	struct sp_intern_ent *tab = __atomic_load_n(&t->tab[n - 1], __ATOMIC_ACQUIRE);
	uint32_t mask = t->mask[n - 1];
	if (n > 1) {
		/* newest to oldest: the newest holds most of the strings (each table is 4x the last) */
		for (unsigned k = n; k-- > 0;) {
			struct sp_intern_ent *e = find(__atomic_load_n(&t->tab[k], __ATOMIC_ACQUIRE), t->mask[k], h);
			if (e)
				return found(t, tf, e, s, len);
		}
	}
	/* lookup-or-insert in the newest (with one table, the only lookup) */
	for (uint32_t i = 0; i < MAX_PROBE; i++) {
		struct sp_intern_ent *e = &tab[(h + i) & mask];
		uint64_t eh = __atomic_load_n(&e->hash, __ATOMIC_ACQUIRE);
		if (eh == h)
			return found(t, tf, e, s, len);
		if (eh != 0)
			continue;
		if (!__atomic_compare_exchange_n(&e->hash, &eh, h, 0, __ATOMIC_ACQ_REL, __ATOMIC_ACQUIRE)) {
			if (eh != h)
				continue; /* another string took it: keep probing */
			return found(t, tf, e, s, len);
		}
		uint32_t id = store(t, tf, s, len);
		__atomic_store_n(&e->id, id ? id : SP_INTERN_FAILED, __ATOMIC_RELEASE);
		if (__atomic_add_fetch(&t->used, 1, __ATOMIC_RELAXED) > (mask >> 1))
			grow(t, n);
		return id;
	}
	/* a long probe chain: the newest table is crowded; the string is stored without dedup */
	grow(t, n);
	return store(t, tf, s, len);
}

/*
 * RATIONALE: a known string is most often at the first place its hash probes
 * in the newest table (a table is at most half full; the lookup tries the
 * newest first): its id is taken there, in a path that saves three
 * callee-saved registers, and everything else goes on to get_probe (its own
 * frame). One function would save and restore six registers and make a stack
 * frame for every lookup (callgrind, small-file loop, whose stat of each file
 * looks up a path seen already: 18 more instructions per file).
 */
uint32_t sp_intern_get(struct sp_intern *t, struct sp_tf *tf, const char *s, size_t len)
{
	unsigned n = __atomic_load_n(&t->ntab, __ATOMIC_ACQUIRE);
	if (!n || !tf)
		return 0;
	if (!s)
		s = "", len = 0;
	if (len > SP_MAX_STRING)
		len = SP_MAX_STRING;
	uint64_t h = hash_inline(s, len);
	struct sp_intern_ent *e =
	    &__atomic_load_n(&t->tab[n - 1], __ATOMIC_ACQUIRE)[h & t->mask[n - 1]];
	if (__builtin_expect(__atomic_load_n(&e->hash, __ATOMIC_ACQUIRE) == h, 1)) {
		uint32_t id = __atomic_load_n(&e->id, __ATOMIC_ACQUIRE);
		if (__builtin_expect(id != 0 && id != SP_INTERN_FAILED, 1))
			return id;
	}
	return get_probe(t, tf, s, len, h, n);
}
