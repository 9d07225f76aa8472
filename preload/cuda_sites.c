/*
 * cuda_sites.c - call sites (see cuda_sites.h):
 *   1. frame formatting with dladdr,
 *   2. the slow path: unw_backtrace, skip stepprof's and CUDA's own frames,
 *      keep up to three of the program's, intern the joined string,
 *   3. the cache: return address -> string id, open addressing, CAS-claimed.
 */
#include "cuda_sites.h"

#include <dlfcn.h>
#include <libunwind.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

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
		n = snprintf(buf, len, "%s!+0x%lx", mod, (unsigned long)((const char *)pc - (const char *)di.dli_fbase));
	return n < 0 ? 0 : (size_t)n < len ? (size_t)n : len - 1;
}

/* ------------------------------------------------------------ 2. unwind */

static int skip_module(const void *pc)
{
	static const void *self_base;
	Dl_info di;
	if (!self_base) {
		Dl_info me;
		if (dladdr((void *)skip_module, &me))
			self_base = me.dli_fbase;
	}
	if (!dladdr(pc, &di) || !di.dli_fname)
		return 0;
	if (di.dli_fbase == self_base)
		return 1;
	const char *mod = strrchr(di.dli_fname, '/');
	mod = mod ? mod + 1 : di.dli_fname;
	return strncmp(mod, "libcuda.so", 10) == 0 || strncmp(mod, "libcudart.so", 12) == 0;
}

static uint32_t unwind_site(const void *ret)
{
	void *pcs[24];
	int n = unw_backtrace(pcs, 24);
	char buf[SP_MAX_STRING];
	size_t used = 0;
	int kept = 0;
	for (int i = 0; i < n && kept < 3; i++) {
		if (skip_module(pcs[i]))
			continue;
		if (kept && used + 5 < sizeof(buf)) {
			memcpy(buf + used, " <- ", 4);
			used += 4;
		}
		/* A return address points after the call: -1 lands in the call. */
		used += sp_cuda_format_frame((const char *)pcs[i] - (i ? 1 : 0), buf + used, sizeof(buf) - used);
		kept++;
	}
	if (!kept) /* no unwinding possible: at least the immediate caller */
		used = sp_cuda_format_frame((const char *)ret - 1, buf, sizeof(buf));
	return sp_intern(buf, used);
}

/* ------------------------------------------------------------- 3. cache */

#define SITE_SLOTS 4096u

struct site_slot {
	uintptr_t key; /* return address; 0 empty, 1 being filled */
	uint32_t id;
};

static struct site_slot sites[SITE_SLOTS];
static int sites_on = -1;

static int sites_enabled(void)
{
	int on = __atomic_load_n(&sites_on, __ATOMIC_RELAXED);
	if (on < 0) {
		const char *v = getenv("STEPPROF_SITES");
		on = !(v && (!strcmp(v, "0") || !strcasecmp(v, "no") || !strcasecmp(v, "off") ||
			     !strcasecmp(v, "false")));
		__atomic_store_n(&sites_on, on, __ATOMIC_RELAXED);
	}
	return on;
}

uint32_t sp_cuda_site(const void *ret)
{
	if (!ret || !sites_enabled())
		return 0;
	uintptr_t k = (uintptr_t)ret;
	unsigned h = (unsigned)((k >> 4) ^ (k >> 17)) & (SITE_SLOTS - 1);
	for (unsigned n = 0; n < 64; n++) {
		struct site_slot *s = &sites[(h + n) & (SITE_SLOTS - 1)];
		uintptr_t cur = __atomic_load_n(&s->key, __ATOMIC_ACQUIRE);
		if (cur == k)
			return __atomic_load_n(&s->id, __ATOMIC_ACQUIRE);
		if (cur == 0) {
			if (!__atomic_compare_exchange_n(&s->key, &cur, (uintptr_t)1, 0, __ATOMIC_ACQ_REL,
							 __ATOMIC_RELAXED)) {
				if (cur == k)
					return __atomic_load_n(&s->id, __ATOMIC_ACQUIRE);
				continue;
			}
			uint32_t id = unwind_site(ret);
			__atomic_store_n(&s->id, id, __ATOMIC_RELEASE);
			__atomic_store_n(&s->key, k, __ATOMIC_RELEASE);
			return id;
		}
		/* cur == 1: another thread is filling this slot; probe on. */
	}
	return unwind_site(ret); /* crowded neighbourhood: pay the unwind */
}
