/*
 * cuda_mem.c - memory bookkeeping of the CUDA hooks (see cuda_mem.h):
 *   1. pinned ranges: a sorted array under a sequence lock. Writers (pinned
 *      alloc/free/register, rare and slow calls already) take a mutex and bump
 *      the sequence around their change; readers (every copy) binary-search
 *      and retry if the sequence moved. No malloc: the array grows by mmap in
 *      the writers, and readers take no lock.
 *   2. device allocations: an open-addressing hash of address -> (size, dev)
 *      with CAS-claimed keys and tombstones; live/peak bytes per device as atomics;
 *   3. VMM mappings: a second table of the same kind, virtual address -> (size, handle).
 */
#include "cuda_mem.h"
#include "lazymap.h"

#include <errno.h>
#include <pthread.h>
#include <string.h>
#include <sys/mman.h>

/* ------------------------------------------------------ 1. pinned ranges */

struct range {
	uint64_t lo, hi; /* [lo, hi) */
};

/*
 * The array is mapped at the first pinned range (SP_PINNED_INITIAL ranges) and
 * replaced by one twice its size when full (in sp_pinned_add, under the lock and the sequence: never on a copy's
 * path). A replaced array is never unmapped: a reader may still be reading it
 * (it retries, since the sequence moved), and the ones left behind add up to
 * less than the current one.
 */
static struct range *pinned;
static unsigned pinned_cap, pinned_limit = SP_PINNED_MAX;
static unsigned npinned;
static unsigned pinned_missing; /* ranges added that the map could not hold, not removed since */
static unsigned pinned_seq;     /* odd while a writer changes the array */
static pthread_mutex_t pinned_lock = PTHREAD_MUTEX_INITIALIZER;

static void seq_begin(void)
{
	__atomic_add_fetch(&pinned_seq, 1, __ATOMIC_RELEASE);
	__atomic_thread_fence(__ATOMIC_SEQ_CST);
}

static void seq_end(void)
{
	__atomic_add_fetch(&pinned_seq, 1, __ATOMIC_RELEASE);
}

/* First index of a[0..n) whose lo > p (caller holds the lock or the seq). */
static unsigned upper(const struct range *a, uint64_t p, unsigned n)
{
	unsigned lo = 0, hi = n;
	while (lo < hi) {
		unsigned m = (lo + hi) / 2;
		if (__atomic_load_n(&a[m].lo, __ATOMIC_RELAXED) <= p)
			lo = m + 1;
		else
			hi = m;
	}
	return lo;
}

/* Lock held, the array full: double it. 0, or -1 (at the limit, or no memory). */
static int grow(void)
{
	unsigned cap = pinned_cap ? pinned_cap * 2 : SP_PINNED_INITIAL;
	if (pinned_cap >= pinned_limit)
		return -1;
	if (cap > pinned_limit)
		cap = pinned_limit;
	int e = errno; /* errno-neutral, as every helper a wrapper calls */
	void *m = mmap(NULL, (size_t)cap * sizeof(struct range), PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE,
		       -1, 0);
	if (m == MAP_FAILED) {
		sp_warn_once("pinnedmap", "cannot map %zu KiB for the pinned memory map (%s): fewer records",
			     (size_t)cap * sizeof(struct range) >> 10, strerror(errno));
		errno = e;
		return -1;
	}
	errno = e;
	if (npinned)
		memcpy(m, pinned, (size_t)npinned * sizeof(struct range));
	seq_begin();
	__atomic_store_n(&pinned, (struct range *)m, __ATOMIC_RELEASE);
	__atomic_store_n(&pinned_cap, cap, __ATOMIC_RELAXED);
	seq_end();
	return 0;
}

int sp_pinned_add(uint64_t p, uint64_t size)
{
	if (!size)
		size = 1;
	int rc = 0;
	pthread_mutex_lock(&pinned_lock);
	if ((npinned >= pinned_cap || npinned >= pinned_limit) && (npinned >= pinned_limit || grow() != 0)) {
		seq_begin(); /* readers see the map incomplete from now on */
		__atomic_store_n(&pinned_missing, pinned_missing + 1, __ATOMIC_RELAXED);
		seq_end();
		rc = -1;
	} else {
		unsigned i = upper(pinned, p, npinned);
		seq_begin();
		memmove(&pinned[i + 1], &pinned[i], (npinned - i) * sizeof(pinned[0]));
		pinned[i].lo = p;
		pinned[i].hi = p + size;
		__atomic_store_n(&npinned, npinned + 1, __ATOMIC_RELAXED);
		seq_end();
	}
	pthread_mutex_unlock(&pinned_lock);
	return rc;
}

uint64_t sp_pinned_remove(uint64_t p)
{
	uint64_t size = 0;
	pthread_mutex_lock(&pinned_lock);
	unsigned i = upper(pinned, p, npinned);
	if (i > 0 && pinned[i - 1].lo == p) {
		i--;
		size = pinned[i].hi - pinned[i].lo;
		seq_begin();
		memmove(&pinned[i], &pinned[i + 1], (npinned - i - 1) * sizeof(pinned[0]));
		__atomic_store_n(&npinned, npinned - 1, __ATOMIC_RELAXED);
		seq_end();
	} else if (pinned_missing) {
		/* NOTE: taken for one of the ranges the map could not hold */
		__atomic_store_n(&pinned_missing, pinned_missing - 1, __ATOMIC_RELAXED);
	}
	pthread_mutex_unlock(&pinned_lock);
	return size;
}

int sp_pinned_lookup(uint64_t p)
{
	for (;;) {
		unsigned s = __atomic_load_n(&pinned_seq, __ATOMIC_ACQUIRE);
		if (s & 1)
			continue;
		const struct range *a = __atomic_load_n(&pinned, __ATOMIC_ACQUIRE);
		unsigned n = __atomic_load_n(&npinned, __ATOMIC_RELAXED);
		unsigned cap = __atomic_load_n(&pinned_cap, __ATOMIC_RELAXED);
		int hit = 0;
		if (n) {
			if (n > cap)
				n = cap;
			unsigned i = upper(a, p, n);
			hit = i > 0 && p < __atomic_load_n(&a[i - 1].hi, __ATOMIC_RELAXED);
		}
		if (!hit && __atomic_load_n(&pinned_missing, __ATOMIC_RELAXED))
			hit = -1;
		__atomic_thread_fence(__ATOMIC_ACQUIRE);
		if (__atomic_load_n(&pinned_seq, __ATOMIC_RELAXED) == s)
			return hit;
	}
}

int sp_pinned_contains(uint64_t p)
{
	return sp_pinned_lookup(p) > 0;
}

void sp_pinned_reset(void)
{
	pthread_mutex_lock(&pinned_lock);
	seq_begin();
	npinned = 0;
	pinned_missing = 0;
	pinned_limit = SP_PINNED_MAX;
	seq_end();
	pthread_mutex_unlock(&pinned_lock);
}

void sp_pinned_set_limit(unsigned limit)
{
	pthread_mutex_lock(&pinned_lock);
	pinned_limit = limit ? limit : SP_PINNED_MAX;
	pthread_mutex_unlock(&pinned_lock);
}

/* ------------------------------------------------- 2. device allocations */

#define KEY_EMPTY 0ull
#define KEY_TOMB 1ull
#define KEY_BUSY 2ull /* claimed by an add that is filling it in */

/* A slot of the allocation table (key: device address) or of the mapping table (key: virtual address). */
struct dslot {
	uint64_t key; /* 0 empty, 1 tombstone, 2 being filled */
	uint64_t size;
	uint64_t handle; /* mappings: the VMM handle mapped there */
	uint32_t dev;
	uint32_t holds; /* allocations: references (see sp_dalloc_hold) */
};

static struct sp_lazy dtab = SP_LAZY_INIT(SP_DALLOC_SLOTS * sizeof(struct dslot), "device allocation table");
static uint64_t live[SP_DEV_MAX], peak[SP_DEV_MAX];

static unsigned hash64(uint64_t k)
{
	k ^= k >> 33;
	k *= 0xff51afd7ed558ccdull;
	k ^= k >> 33;
	return (unsigned)k & (SP_DALLOC_SLOTS - 1);
}

static uint64_t norm_key(uint64_t k)
{
	/* 0, 1 and 2 are reserved: a (never valid) allocation there gets a stand-in. */
	return k <= KEY_BUSY ? k + 3 : k;
}

/*
 * A free slot of tab for key k, claimed as BUSY (the caller fills it in and
 * publishes the key), or NULL when the table is full.
 * RATIONALE: claimed as BUSY, not TOMB: two adds that both saw this tombstone
 * would both succeed a TOMB -> TOMB exchange and share the slot (one entry lost).
 */
static struct dslot *slot_claim(struct sp_lazy *t, uint64_t k)
{
	struct dslot *tab = sp_lazy_get(t);
	if (!tab)
		return NULL;
	unsigned h = hash64(k);
	for (unsigned n = 0; n < SP_DALLOC_SLOTS; n++) {
		struct dslot *s = &tab[(h + n) & (SP_DALLOC_SLOTS - 1)];
		uint64_t cur = __atomic_load_n(&s->key, __ATOMIC_ACQUIRE);
		if (cur != KEY_EMPTY && cur != KEY_TOMB)
			continue;
		if (__atomic_compare_exchange_n(&s->key, &cur, KEY_BUSY, 0, __ATOMIC_ACQ_REL, __ATOMIC_RELAXED))
			return s;
	}
	return NULL;
}

/* The slot of tab holding key k, or NULL. */
static struct dslot *slot_find(struct sp_lazy *t, uint64_t k)
{
	struct dslot *tab = sp_lazy_peek(t);
	if (!tab)
		return NULL;
	unsigned h = hash64(k);
	for (unsigned n = 0; n < SP_DALLOC_SLOTS; n++) {
		struct dslot *s = &tab[(h + n) & (SP_DALLOC_SLOTS - 1)];
		uint64_t cur = __atomic_load_n(&s->key, __ATOMIC_ACQUIRE);
		if (cur == KEY_EMPTY)
			return NULL;
		if (cur == k)
			return s;
	}
	return NULL;
}

/* Empty slot s of key k: 0, or -1 when a concurrent remover of the same key won. */
static int slot_release(struct dslot *s, uint64_t k)
{
	return __atomic_compare_exchange_n(&s->key, &k, KEY_TOMB, 0, __ATOMIC_ACQ_REL, __ATOMIC_RELAXED) ? 0 : -1;
}

uint64_t sp_dalloc_add(uint64_t dptr, uint64_t size, unsigned dev)
{
	if (dev >= SP_DEV_MAX && dev != SP_DALLOC_HOST)
		dev = SP_DEV_MAX - 1;
	uint64_t k = norm_key(dptr);
	struct dslot *s = slot_claim(&dtab, k);
	if (s) { /* size/dev/holds are written before the key is published */
		s->size = size;
		s->dev = dev;
		__atomic_store_n(&s->holds, 1, __ATOMIC_RELAXED);
		__atomic_store_n(&s->key, k, __ATOMIC_RELEASE);
	}
	if (dev == SP_DALLOC_HOST)
		return 0;
	/* Full table: the bytes still count, the free will not find them. */
	uint64_t now = __atomic_add_fetch(&live[dev], size, __ATOMIC_RELAXED);
	uint64_t p = __atomic_load_n(&peak[dev], __ATOMIC_RELAXED);
	while (now > p && !__atomic_compare_exchange_n(&peak[dev], &p, now, 1, __ATOMIC_RELAXED, __ATOMIC_RELAXED))
		;
	return now;
}

/* Take the allocation of slot s (key k) off the books. */
static uint64_t dalloc_take(struct dslot *s, uint64_t k, uint64_t *size, unsigned *dev)
{
	uint64_t sz = s->size;
	unsigned d = s->dev;
	if (slot_release(s, k) != 0)
		return UINT64_MAX; /* a concurrent free of the same address won */
	*size = sz;
	*dev = d;
	return d == SP_DALLOC_HOST ? 0 : __atomic_sub_fetch(&live[d], sz, __ATOMIC_RELAXED);
}

uint64_t sp_dalloc_remove(uint64_t dptr, uint64_t *size, unsigned *dev)
{
	uint64_t k = norm_key(dptr);
	struct dslot *s = slot_find(&dtab, k);
	*size = 0;
	*dev = 0;
	return s ? dalloc_take(s, k, size, dev) : UINT64_MAX;
}

int sp_dalloc_hold(uint64_t dptr)
{
	struct dslot *s = slot_find(&dtab, norm_key(dptr));
	if (!s)
		return -1;
	__atomic_add_fetch(&s->holds, 1, __ATOMIC_ACQ_REL);
	return 0;
}

uint64_t sp_dalloc_drop(uint64_t dptr, uint64_t *size, unsigned *dev)
{
	uint64_t k = norm_key(dptr);
	struct dslot *s = slot_find(&dtab, k);
	*size = 0;
	*dev = 0;
	if (!s)
		return UINT64_MAX;
	uint32_t h = __atomic_load_n(&s->holds, __ATOMIC_ACQUIRE);
	while (h > 1)
		if (__atomic_compare_exchange_n(&s->holds, &h, h - 1, 0, __ATOMIC_ACQ_REL, __ATOMIC_ACQUIRE))
			return SP_DALLOC_HELD;
	return dalloc_take(s, k, size, dev);
}

uint64_t sp_dalloc_reset_dev(unsigned dev)
{
	if (dev >= SP_DEV_MAX)
		return 0;
	/* NOTE: a scan of the whole table; a reset is rare and slow itself. */
	struct dslot *tab = sp_lazy_peek(&dtab);
	for (unsigned i = 0; tab && i < SP_DALLOC_SLOTS; i++) {
		struct dslot *s = &tab[i];
		uint64_t cur = __atomic_load_n(&s->key, __ATOMIC_ACQUIRE);
		if (cur > KEY_BUSY && s->dev == dev)
			__atomic_compare_exchange_n(&s->key, &cur, KEY_TOMB, 0, __ATOMIC_ACQ_REL, __ATOMIC_RELAXED);
	}
	/* the live bytes include those a full table could not hold */
	return __atomic_exchange_n(&live[dev], 0, __ATOMIC_RELAXED);
}

uint64_t sp_dev_live(unsigned dev)
{
	return dev < SP_DEV_MAX ? __atomic_load_n(&live[dev], __ATOMIC_RELAXED) : 0;
}

uint64_t sp_dev_peak(unsigned dev)
{
	return dev < SP_DEV_MAX ? __atomic_load_n(&peak[dev], __ATOMIC_RELAXED) : 0;
}

void sp_dalloc_reset(void)
{
	struct dslot *tab = sp_lazy_peek(&dtab);
	if (tab)
		memset(tab, 0, dtab.size);
	memset(live, 0, sizeof(live));
	memset(peak, 0, sizeof(peak));
}

/* ------------------------------------------------------ 3. VMM mappings */

static struct sp_lazy vtab = SP_LAZY_INIT(SP_VMAP_SLOTS * sizeof(struct dslot), "device mapping table");
_Static_assert(SP_VMAP_SLOTS == SP_DALLOC_SLOTS, "one hash and probe length for both tables");

int sp_vmap_add(uint64_t va, uint64_t size, uint64_t handle)
{
	uint64_t k = norm_key(va);
	struct dslot *s = slot_claim(&vtab, k);
	if (!s)
		return -1;
	s->size = size;
	s->handle = handle;
	__atomic_store_n(&s->key, k, __ATOMIC_RELEASE);
	return 0;
}

int sp_vmap_remove(uint64_t va, uint64_t *size, uint64_t *handle)
{
	uint64_t k = norm_key(va);
	struct dslot *s = slot_find(&vtab, k);
	if (!s)
		return -1;
	uint64_t sz = s->size, hd = s->handle;
	if (slot_release(s, k) != 0)
		return -1;
	*size = sz;
	*handle = hd;
	return 0;
}

void sp_vmap_reset(void)
{
	struct dslot *tab = sp_lazy_peek(&vtab);
	if (tab)
		memset(tab, 0, vtab.size);
}
