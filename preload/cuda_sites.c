/*
 * cuda_sites.c - call sites (see cuda_sites.h):
 *   1. frame formatting with dladdr,
 *   2. whose frame is it: the CUDA runtime's (by module or symbol name) or the
 *      program's,
 *   3. the site string: up to three of the program's frames, interned,
 *   4. the cache: address -> string id (or "a runtime frame"), open
 *      addressing, CAS-claimed,
 *   5. sp_cuda_site: the fast path (one probe), the walk that fills the cache,
 *      and the runtime path (one short unwind, probes).
 *
 * RATIONALE: the stack is walked with libgcc's _Unwind_Backtrace (linked
 * statically: -static-libgcc; cuda_unwind.c), not libunwind. libunwind 1.6
 * validates addresses through a pipe it opens at its first unwind, at the
 * lowest free descriptor numbers: a job that closes those numbers and reuses
 * them gets its own files read and written by the unwinder when a frame
 * without unwind info makes it guess the next frame. libgcc's unwinder reads
 * only .eh_frame (found through _dl_find_object), opens nothing and never
 * guesses: a frame without unwind info ends the walk there. Frames that
 * dladdr cannot name are named from the module's .symtab (sp_symtab_name,
 * cuda_symtab.c).
 *
 * RATIONALE: a driver wrapper called by a statically linked cudart (nvcc's
 * default) returns into cudart's own code inside the program: that address is
 * the same for every cudaMalloc of the program. Such an address is cached as
 * "runtime", and its calls unwind to the first frame outside the runtime, whose
 * address keys the site. A wrapper called by the program itself (a runtime
 * wrapper behind the PLT, a driver call of the program) keeps the one-probe path.
 */
#include "cuda_sites.h"

#include <dlfcn.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/auxv.h>

#include "cuda_symtab.h"
#include "cuda_unwind.h"
#include "lazymap.h"
#include "recorder.h"

/* ---------------------------------------------------------- 1. one frame */

size_t sp_cuda_format_frame(const void *pc, char *buf, size_t len)
{
	Dl_info di;
	if (!len)
		return 0; /* nothing fits (len - 1 below would wrap) */
	memset(&di, 0, sizeof(di));
	if (!dladdr(pc, &di) || !di.dli_fname) {
		int n = snprintf(buf, len, "?!%p", pc);
		return n < 0 ? 0 : (size_t)n < len ? (size_t)n : len - 1;
	}
	const char *mod = strrchr(di.dli_fname, '/');
	mod = mod ? mod + 1 : di.dli_fname;
	if (!*mod)
		mod = "?";
	int n;
	if (di.dli_sname && di.dli_saddr)
		n = snprintf(buf, len, "%s!%s+0x%lx", mod, di.dli_sname,
			     (unsigned long)((const char *)pc - (const char *)di.dli_saddr));
	else
		n = snprintf(buf, len, "%s!+0x%lx", mod,
			     (unsigned long)((const char *)pc - (const char *)di.dli_fbase));
	return n < 0 ? 0 : (size_t)n < len ? (size_t)n : len - 1;
}

/* ------------------------------------------------------ 2. whose frame */

int sp_cuda_runtime_name(const char *s)
{
	if (!s)
		return 0;
	/* the runtime API (cudaMalloc...): "cuda" then a capital, not a program's cuda_helper */
	if (!strncmp(s, "cuda", 4) && s[4] >= 'A' && s[4] <= 'Z')
		return 1;
	/*
	 * __cudaRegisterFatBinary..., static cudart's internal functions (CUDA 13:
	 * libcudart_static_<sha1>; older ones: __cudart123, cudart::...).
	 */
	return !strncmp(s, "__cuda", 6) || !strncmp(s, "cudart", 6) || !strncmp(s, "libcudart", 9) ||
	       !strncmp(s, "_ZN6cudart", 10) || !strncmp(s, "_ZNK6cudart", 11);
}

enum frame_class { FR_PROGRAM, FR_RUNTIME, FR_SELF };

static const void *self_base;

/*
 * stepprof's own module, or NULL when this code is linked into the program
 * itself (the unit tests): then its frames are the program's.
 */
static const void *self_module(void)
{
	const void *b = __atomic_load_n(&self_base, __ATOMIC_RELAXED);
	if (!b) {
		Dl_info me, exe;
		const void *phdr = (const void *)getauxval(AT_PHDR);
		b = (const void *)1;
		if (dladdr((void *)self_module, &me) && !(phdr && dladdr(phdr, &exe) && exe.dli_fbase == me.dli_fbase))
			b = me.dli_fbase;
		__atomic_store_n(&self_base, b, __ATOMIC_RELAXED);
	}
	return b;
}

static int module_is_cuda(const char *fname)
{
	const char *mod = strrchr(fname, '/');
	mod = mod ? mod + 1 : fname;
	return !strncmp(mod, "libcuda.so", 10) || !strncmp(mod, "libcudart", 9);
}

/*
 * The class of the frame at pc. dladdr knows only exported names: a static
 * cudart inside a program that is not -rdynamic has none there, so a frame
 * without one is named from the module's symbol table (symtab: 1; 0: dladdr
 * only).
 */
static enum frame_class frame_class(const void *pc, int symtab)
{
	Dl_info di;
	memset(&di, 0, sizeof(di));
	if (!dladdr(pc, &di) || !di.dli_fname)
		return FR_PROGRAM; /* unknown: the program's, as far as one can tell */
	if (di.dli_fbase == self_module())
		return FR_SELF;
	if (module_is_cuda(di.dli_fname))
		return FR_RUNTIME;
	if (di.dli_sname)
		return sp_cuda_runtime_name(di.dli_sname) ? FR_RUNTIME : FR_PROGRAM;
	char name[256];
	/* a return address points after the call: -1 lands in the caller's function */
	if (symtab && sp_symtab_name((const char *)pc - 1, name, sizeof(name)) == 0)
		return sp_cuda_runtime_name(name) ? FR_RUNTIME : FR_PROGRAM;
	return FR_PROGRAM;
}

/* ------------------------------------------------------- 3. site string */

/*
 * Intern "frame <- caller <- caller" from pcs[0] (a return address) on: the
 * first is kept as is, the callers skip stepprof's and CUDA's own frames
 * (dladdr only: they are named there or lie in a CUDA module).
 */
static uint32_t site_string(void *const *pcs, int n)
{
	char buf[SP_MAX_STRING];
	size_t used = 0;
	int kept = 0;
	for (int i = 0; i < n && kept < 3; i++) {
		if (kept && frame_class(pcs[i], 0) != FR_PROGRAM)
			continue;
		if (kept && used + 5 < sizeof(buf)) {
			memcpy(buf + used, " <- ", 4);
			used += 4;
		}
		/* A return address points after the call: -1 lands in the call. */
		used += sp_cuda_format_frame((const char *)pcs[i] - 1, buf + used, sizeof(buf) - used);
		kept++;
	}
	return used ? sp_intern(buf, used) : 0;
}

/* ------------------------------------------------------------- 4. cache */

#define SITE_SLOTS   4096u
#define SITE_PROBES  64u
#define SITE_RUNTIME UINT32_MAX /* id of a runtime frame: look further out */

struct site_slot {
	uintptr_t key; /* return address; 0 empty, 1 being filled */
	uint32_t id;
};

static struct sp_lazy sites = SP_LAZY_INIT(SITE_SLOTS * sizeof(struct site_slot), "call site cache");
static int sites_on = -1;

static int sites_enabled(void)
{
	int on = __atomic_load_n(&sites_on, __ATOMIC_RELAXED);
	if (on < 0) {
		const char *v = getenv("STEPPROF_SITES");
		on = !(v &&
		       (!strcmp(v, "0") || !strcasecmp(v, "no") || !strcasecmp(v, "off") || !strcasecmp(v, "false")));
		__atomic_store_n(&sites_on, on, __ATOMIC_RELAXED);
	}
	return on;
}

static inline unsigned site_hash(uintptr_t k)
{
	return (unsigned)((k >> 4) ^ (k >> 17)) & (SITE_SLOTS - 1);
}

/* 1 and *id when k is cached. */
static inline int cache_get(uintptr_t k, uint32_t *id)
{
	unsigned h = site_hash(k);
	struct site_slot *tab = sp_lazy_peek(&sites);
	for (unsigned n = 0; tab && n < SITE_PROBES; n++) {
		struct site_slot *s = &tab[(h + n) & (SITE_SLOTS - 1)];
		uintptr_t cur = __atomic_load_n(&s->key, __ATOMIC_ACQUIRE);
		if (cur == k) {
			*id = __atomic_load_n(&s->id, __ATOMIC_ACQUIRE);
			return 1;
		}
		if (cur == 0)
			return 0;
		/* cur == 1: another thread is filling this slot; probe on. */
	}
	return 0;
}

/*
 * Find k, or claim an empty slot for it (key 1 until cache_fill): returns the
 * claimed slot, or NULL with *found set (1: *id is k's) when k is there or the
 * neighbourhood is full (0).
 */
static struct site_slot *cache_claim(uintptr_t k, uint32_t *id, int *found)
{
	unsigned h = site_hash(k);
	*found = 0;
	struct site_slot *tab = sp_lazy_get(&sites);
	for (unsigned n = 0; tab && n < SITE_PROBES; n++) {
		struct site_slot *s = &tab[(h + n) & (SITE_SLOTS - 1)];
		uintptr_t cur = __atomic_load_n(&s->key, __ATOMIC_ACQUIRE);
		if (cur == k) { /* the common case first: one load, one compare */
			*id = __atomic_load_n(&s->id, __ATOMIC_ACQUIRE);
			*found = 1;
			return NULL;
		}
		if (cur == 0 &&
		    __atomic_compare_exchange_n(&s->key, &cur, (uintptr_t)1, 0, __ATOMIC_ACQ_REL, __ATOMIC_RELAXED))
			return s;
		if (cur == k) { /* there, or put there by another thread as we tried to claim */
			*id = __atomic_load_n(&s->id, __ATOMIC_ACQUIRE);
			*found = 1;
			return NULL;
		}
		/* cur == 1: another thread is filling this slot; probe on. */
	}
	return NULL;
}

static void cache_fill(struct site_slot *s, uintptr_t k, uint32_t id)
{
	__atomic_store_n(&s->id, id, __ATOMIC_RELEASE);
	__atomic_store_n(&s->key, k, __ATOMIC_RELEASE);
}

/* Cache k -> id unless it is there already (a thread beside us filled it). */
static void cache_put(uintptr_t k, uint32_t id)
{
	uint32_t old;
	int found;
	struct site_slot *s = cache_claim(k, &old, &found);
	if (s)
		cache_fill(s, k, id);
}

/* ------------------------------------------------------- 5. the lookups */

#define WALK_FRAMES  64
#define SITE_CALLERS 8 /* K and its callers as unwound; site_string keeps 3 of the program's */

/*
 * The slow path, once per new address: walk the stack up to the frame that
 * returns to `ret`, class it and, if it is the runtime's, the frames beyond it
 * (caching each runtime frame), until the program's first frame K; the site is
 * K and its callers, cached under K. *ret_class says what `ret` was. Raises
 * sp_hook_depth: naming a frame maps the module's file, which the input
 * wrappers must not record.
 */
static uint32_t walk_site(const void *ret, enum frame_class *ret_class)
{
	void *walk[WALK_FRAMES];
	void *pcs[SITE_CALLERS];
	int kept = 0, found = 0;
	*ret_class = FR_PROGRAM;
	sp_hook_depth++;
	int nwalk = sp_unwind_pcs(walk, WALK_FRAMES);
	for (int i = 0; i < nwalk && kept < SITE_CALLERS; i++) {
		uintptr_t ip = (uintptr_t)walk[i];
		if (!found) {
			if ((const void *)ip != ret)
				continue; /* stepprof's own frames, below the wrapper's caller */
			found = 1;
		}
		if (kept) { /* K's callers: site_string sorts them */
			pcs[kept++] = (void *)ip;
			continue;
		}
		uint32_t id;
		enum frame_class c;
		if ((const void *)ip != ret && cache_get(ip, &id))
			c = id == SITE_RUNTIME ? FR_RUNTIME : FR_PROGRAM;
		else
			c = frame_class((const void *)ip, 1);
		if ((const void *)ip == ret)
			*ret_class = c;
		if (c == FR_PROGRAM) {
			pcs[kept++] = (void *)ip;
		} else if ((const void *)ip != ret && c == FR_RUNTIME) {
			cache_put(ip, SITE_RUNTIME);
		}
	}
	uint32_t id;
	if (!kept) { /* no unwinding, or no frame of the program: at least the immediate caller */
		pcs[kept++] = (void *)ret;
		*ret_class = FR_PROGRAM;
	} else if (pcs[0] != ret && cache_get((uintptr_t)pcs[0], &id) && id != SITE_RUNTIME) {
		sp_hook_depth--;
		return id; /* K was known: reached before from elsewhere */
	}
	id = site_string(pcs, kept);
	if (pcs[0] != ret)
		cache_put((uintptr_t)pcs[0], id);
	sp_hook_depth--;
	return id;
}

#define FAST_FRAMES 16

/*
 * A call whose caller `ret` is a runtime frame: unwind to `ret`, then on
 * through frames cached as runtime to the first one cached as the program's;
 * a frame not cached yet falls back to the walk.
 */
static __attribute__((noinline)) uint32_t runtime_site(const void *ret)
{
	void *pcs[FAST_FRAMES];
	int n = sp_unwind_pcs(pcs, FAST_FRAMES);
	int i = 0;
	while (i < n && pcs[i] != ret)
		i++;
	for (i++; i < n; i++) {
		uint32_t id;
		if (!cache_get((uintptr_t)pcs[i], &id))
			break;
		if (id != SITE_RUNTIME)
			return id;
	}
	enum frame_class c;
	return walk_site(ret, &c);
}

/* First call from `ret` (or a crowded neighbourhood): claim its slot, walk, fill. */
static __attribute__((noinline)) uint32_t new_site(const void *ret)
{
	uintptr_t k = (uintptr_t)ret;
	uint32_t id;
	int found;
	struct site_slot *s = cache_claim(k, &id, &found);
	if (found) /* another thread filled it meanwhile */
		return id != SITE_RUNTIME ? id : runtime_site(ret);
	enum frame_class c;
	id = walk_site(ret, &c);
	if (s)
		cache_fill(s, k, c == FR_RUNTIME ? SITE_RUNTIME : id);
	return id;
}

/* The slow paths (unwinding, dladdr, interning) leave errno as they found it. */
static __attribute__((noinline)) uint32_t site_slow(const void *ret, int runtime)
{
	int e = errno;
	uint32_t id = runtime ? runtime_site(ret) : new_site(ret);
	errno = e;
	return id;
}

uint32_t sp_cuda_site(const void *ret)
{
	if (!ret || !sites_enabled())
		return 0;
	/* the common case, kept to one probe and two compares: the address is cached, not the runtime's */
	uintptr_t k = (uintptr_t)ret;
	unsigned h = site_hash(k);
	struct site_slot *tab = sp_lazy_peek(&sites);
	for (unsigned n = 0; tab && n < SITE_PROBES; n++) {
		struct site_slot *s = &tab[(h + n) & (SITE_SLOTS - 1)];
		uintptr_t cur = __atomic_load_n(&s->key, __ATOMIC_ACQUIRE);
		if (cur == k) {
			uint32_t id = __atomic_load_n(&s->id, __ATOMIC_ACQUIRE);
			return __builtin_expect(id != SITE_RUNTIME, 1) ? id : site_slow(ret, 1);
		}
		if (cur == 0)
			break;
	}
	return site_slow(ret, 0);
}
