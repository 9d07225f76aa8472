/*
 * cuda_mem.h - memory bookkeeping of the CUDA hooks, lock-free on the read side:
 *   1. the pinned host ranges (pinned allocations and registrations), asked by
 *      every copy to classify its host side as pinned or pageable;
 *   2. the live device allocations (address -> size, device) and the live and
 *      peak bytes per device, for alloc/free records;
 *   3. the VMM mappings (virtual address -> handle), so that a handle's
 *      physical memory leaves the books when CUDA frees it: at its release
 *      or at the unmap of its last mapping, whichever comes last.
 * Core: no CUDA calls, unit-tested on its own.
 */
#ifndef STEPPROF_CUDA_MEM_H
#define STEPPROF_CUDA_MEM_H

#include <stdint.h>

/* ---- 1. pinned host ranges ---- */
/*
 * The map is mapped at the first range, with room for SP_PINNED_INITIAL, and doubles (mmap'd,
 * in sp_pinned_add: never on a copy's path) up to SP_PINNED_MAX ranges.
 */
#define SP_PINNED_INITIAL 4096
#define SP_PINNED_MAX (1u << 24)

/*
 * Add [p, p+size). Returns 0, or -1 when the map cannot hold it (its limit
 * reached, or no memory to grow): the map is then incomplete, and says so
 * (sp_pinned_lookup) until as many unknown ranges have been removed.
 */
int sp_pinned_add(uint64_t p, uint64_t size);
/* Remove the range that starts at p; returns its size, 0 when unknown. */
uint64_t sp_pinned_remove(uint64_t p);
/* 1 when p lies inside a pinned range. No lock, no syscall. */
int sp_pinned_contains(uint64_t p);
/* 1: inside a pinned range; 0: in none; -1: in none of an incomplete map (unknown). */
int sp_pinned_lookup(uint64_t p);
/* Forget everything (tests); limit: the most ranges the map may grow to (0: SP_PINNED_MAX). */
void sp_pinned_reset(void);
void sp_pinned_set_limit(unsigned limit);

/* ---- 2. device allocations ---- */
#define SP_DEV_MAX 64
#define SP_DALLOC_SLOTS (1u << 16)

/* The dev of a host allocation (VMM host memory): held and freed like the others, never in a device's bytes. */
#define SP_DALLOC_HOST 0xffffffffu

/* Record a live allocation; returns the device's live bytes after it (0 for SP_DALLOC_HOST). */
uint64_t sp_dalloc_add(uint64_t dptr, uint64_t size, unsigned dev);
/*
 * Forget the allocation at dptr: *size and *dev get what it was; returns the
 * device's live bytes after it, or UINT64_MAX when dptr was not known (an
 * allocation made before stepprof saw it, or a double free).
 */
uint64_t sp_dalloc_remove(uint64_t dptr, uint64_t *size, unsigned *dev);
/*
 * A device reset: every allocation of dev is gone. Forgets them and sets the
 * device's live bytes to 0; returns the bytes that were live.
 */
uint64_t sp_dalloc_reset_dev(unsigned dev);
uint64_t sp_dev_live(unsigned dev);
/*
 * References to an allocation (VMM): the handle itself holds one from its
 * add; each mapping and each cuMemRetainAllocationHandle one more.
 * sp_dalloc_hold takes one (0, or -1 when dptr is unknown); sp_dalloc_drop
 * gives one back: the last one frees it as sp_dalloc_remove does (same
 * returns), else it returns SP_DALLOC_HELD and nothing leaves the books.
 */
#define SP_DALLOC_HELD (UINT64_MAX - 1)
int sp_dalloc_hold(uint64_t dptr);
uint64_t sp_dalloc_drop(uint64_t dptr, uint64_t *size, unsigned *dev);
uint64_t sp_dev_peak(unsigned dev);
void sp_dalloc_reset(void);

/* ---- 3. VMM mappings ---- */
#define SP_VMAP_SLOTS (1u << 16)

/* [va, va+size) maps handle. 0, or -1 when the table is full (the mapping is not followed). */
int sp_vmap_add(uint64_t va, uint64_t size, uint64_t handle);
/* Forget the mapping that starts at va: 0 with its *size and *handle, -1 when unknown. */
int sp_vmap_remove(uint64_t va, uint64_t *size, uint64_t *handle);
void sp_vmap_reset(void);

#endif /* STEPPROF_CUDA_MEM_H */
