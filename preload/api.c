/*
 * api.c - the public C API of include/stepprof/stepprof.h, exported by
 * libstepprof.so (default visibility; everything else in the library is hidden).
 *
 *   stepprof_step()      a STEP record whose value is the process's step index (0, 1, ...);
 *                        with STEPPROF_CAPTURE=steps:A-B the marks open and close the
 *                        capture range (capture.c)
 *   stepprof_mark(name)  a MARK record naming `name` (interned)
 *
 * Both are instants (begin = end) on the calling thread, lock-free, and keep errno.
 */
#include "stepprof/stepprof.h"

#include <string.h>

#include "config.h"
#include "recorder.h"

#define SP_EXPORT __attribute__((visibility("default")))

static uint64_t g_step; /* next step index of this process */

/*
 * The calling thread's last mark name and its id: a loop marking the same name
 * skips the hash and the table probe. Compared by content (the caller's buffer
 * may have changed), names up to 47 bytes. The cached name is stored with its
 * NUL and zero padding, so that the compare is 8 bytes at a time.
 */
#define MARK_CACHE_NAME 48
struct mark_cache {
	uint32_t id, nw;		 /* nw: words holding the name and its NUL */
	uint32_t busy;			 /* being rewritten (a signal handler marking meanwhile leaves it alone) */
	uint32_t gen;			 /* odd while rewritten, +2 a rewrite: mark_id's check that none came between */
	uint64_t w[MARK_CACHE_NAME / 8]; /* the name, NUL, zeros */
	uint64_t m[MARK_CACHE_NAME / 8]; /* per word: the bytes that belong to the name and its NUL */
};
static __thread struct mark_cache t_cache __attribute__((tls_model("initial-exec")));

void sp_api_fork_child(void)
{
	g_step = 0;
	t_cache.id = 0; /* the child's file has its own ids */
	t_cache.busy = 0;
}

/* A name other than the cached one: hash and probe, then cache it. Out of line,
 * so that the cached case keeps stepprof_mark's frame small. */
static __attribute__((noinline)) uint32_t mark_id_slow(const char *name)
{
	struct mark_cache *c = &t_cache;
	size_t len = strlen(name);
	uint32_t id = sp_intern(name, len);
	if (id && len < MARK_CACHE_NAME && !c->busy) {
		/* id 0 first: a signal handler marking meanwhile neither uses nor rewrites a half-written entry */
		c->busy = 1;
		c->gen++;
		c->id = 0;
		__atomic_signal_fence(__ATOMIC_SEQ_CST);
		memset(c->w, 0, sizeof(c->w));
		memcpy(c->w, name, len);
		unsigned n = (unsigned)len + 1; /* bytes compared: the NUL too */
		for (unsigned i = 0; i < MARK_CACHE_NAME / 8; i++)
			c->m[i] = n >= 8 * (i + 1) ? ~0ull : n > 8 * i ? (1ull << (8 * (n - 8 * i))) - 1 : 0;
		c->nw = (n + 7) / 8;
		__atomic_signal_fence(__ATOMIC_SEQ_CST);
		c->id = id;
		__atomic_signal_fence(__ATOMIC_SEQ_CST);
		c->gen++;
		c->busy = 0;
	}
	return id;
}

/*
 * Is `name` the cached name? Its bytes and its NUL against the cache, a word
 * at a time under the cached byte masks (little-endian: a word's first bytes
 * are its low bytes).
 *
 * RATIONALE: the word loads may read past the end of a shorter name. That is
 * safe only within the page holding name[0] (mapped, since the caller's string
 * starts there), so the word compare runs when the 48 bytes from name do not
 * cross a page boundary (4 KiB: the smallest page size of x86-64 and arm64
 * Linux); otherwise, bytes one by one, stopping at the first difference. The
 * bytes past a shorter name's NUL never decide: that NUL differs from the
 * cached name's byte at its place already.
 */
/* NOTE: no_sanitize: AddressSanitizer (tests built with -fsanitize=address) would report the in-page over-read */
__attribute__((no_sanitize("address"))) static inline int mark_cached(const struct mark_cache *c, const char *name)
{
	unsigned nw = c->nw;
	if (__builtin_expect(((uintptr_t)name & 4095) <= 4096 - MARK_CACHE_NAME, 1)) {
		/* the first word outside the loop: a cached name has one (nw >= 1), most have no other */
		uint64_t x;
		memcpy(&x, name, 8);
		if ((x ^ c->w[0]) & c->m[0])
			return 0;
		for (unsigned i = 1; i < nw; i++) {
			memcpy(&x, name + 8 * i, 8);
			if ((x ^ c->w[i]) & c->m[i])
				return 0;
		}
		return 1;
	}
	const char *cn = (const char *)c->w;
	for (unsigned i = 0; i < 8 * nw; i++) {
		if (name[i] != cn[i])
			return 0;
		if (!cn[i])
			return 1;
	}
	return 0;
}

/*
 * The cached id when name is the cached name. A signal handler's mark may
 * rewrite the cache while this compares (its generation then moved): the
 * words compared were then a mix of two names, which could match a third
 * (marks of "xxxxxxxxBBBBBBB" recorded as "xxxxxxxxAAAAAAA" under a handler
 * marking "yyyyyyyyBBBBBBB": 137 of 500,000), so the id and the generation
 * are read before the compare and the generation checked after it.
 */
static inline uint32_t mark_id(const char *name)
{
	const struct mark_cache *c = &t_cache;
	uint32_t gen = c->gen, id = c->id;
	__atomic_signal_fence(__ATOMIC_SEQ_CST);
	if (id && mark_cached(c, name)) {
		__atomic_signal_fence(__ATOMIC_SEQ_CST);
		if (__builtin_expect(c->gen == gen, 1))
			return id;
	}
	return mark_id_slow(name);
}

SP_EXPORT void stepprof_step(void)
{
	if (!sp_started())
		return;
	uint64_t f[SP_F__COUNT];
	uint64_t index = __atomic_fetch_add(&g_step, 1, __ATOMIC_RELAXED);
	/* STEPPROF_CAPTURE=steps:A-B: every mark counts, marks A to B are recorded */
	if (__builtin_expect(sp_capture_steps, 0)) {
		if (sp_capture_step_begin(index)) {
			uint64_t now = sp_now();
			f[SP_F_VALUE] = index;
			sp_emit(SP_K_STEP, SP_API_stepprof_step, now, now, f);
		}
		sp_capture_step_end(index);
		return;
	}
	if (!sp_cap.on)
		return;
	uint64_t now = sp_now();
	f[SP_F_VALUE] = index;
	sp_emit(SP_K_STEP, SP_API_stepprof_step, now, now, f);
}

SP_EXPORT void stepprof_mark(const char *name)
{
	if (!sp_started() || !sp_cap.on)
		return;
	/* NOTE: errno is kept by the recorder's every slow path, nothing to save here */
	uint64_t f[SP_F__COUNT];
	uint64_t now = sp_now();
	f[SP_F_NAME] = name ? mark_id(name) : 0;
	sp_emit(SP_K_MARK, SP_API_stepprof_mark, now, now, f);
}
