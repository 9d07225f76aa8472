/*
 * lazymap.h - the preload's big tables (device allocations, mappings, the fd
 * table, kernel names, call sites, open NVTX ranges, pinned ranges), mapped
 * at their first use rather than held in .bss.
 *
 * RATIONALE: .bss is address space from the moment the library is loaded:
 * 6.5 MiB of tables counted against `ulimit -v` in every process, with
 * STEPPROF_DISABLE=1 or in a program that never calls CUDA. A table mapped
 * where it is first needed (MAP_NORESERVE: it takes no commit charge either)
 * costs nothing to a process that never needs it. A mapping that fails (the
 * address space limit) gives one warning; the table stays absent and its
 * users record less (no path of a descriptor, no call site...), never fail.
 */
#ifndef STEPPROF_LAZYMAP_H
#define STEPPROF_LAZYMAP_H

#include <stddef.h>

#include "recorder.h"

struct sp_lazy {
	void *p;	  /* the table (zeros at first), NULL until mapped */
	int failed;	  /* the mapping failed: not tried again */
	size_t size;	  /* bytes */
	const char *what; /* what it holds, for the warning */
};

#define SP_LAZY_INIT(bytes, name)                                                                                      \
	{                                                                                                              \
		NULL, 0, (bytes), (name)                                                                               \
	}

/* The mapping, made now by the first caller (once: a one-time slow path), or NULL. */
SP_HIDDEN void *sp_lazy_map(struct sp_lazy *l);

/* The table to fill: mapped at the first call; NULL when it cannot be. */
static inline void *sp_lazy_get(struct sp_lazy *l)
{
	void *p = __atomic_load_n(&l->p, __ATOMIC_ACQUIRE);
	return __builtin_expect(p != NULL, 1) ? p : sp_lazy_map(l);
}

/* The table to read: NULL when nothing was ever put in it (nothing is mapped). */
static inline void *sp_lazy_peek(struct sp_lazy *l)
{
	return __atomic_load_n(&l->p, __ATOMIC_ACQUIRE);
}

#endif
