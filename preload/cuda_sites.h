/*
 * cuda_sites.h - call sites of allocations and pageable copies: the program's
 * frames above the CUDA call, unwound with libunwind once per distinct return
 * address and kept as an interned string "module!symbol+0xoff <- ...".
 */
#ifndef STEPPROF_CUDA_SITES_H
#define STEPPROF_CUDA_SITES_H

#include <stddef.h>
#include <stdint.h>

/*
 * The interned site string id of the call whose wrapper was called from `ret`
 * (its __builtin_return_address(0)); 0 when sites are off (STEPPROF_SITES=0)
 * or cannot be had. The first call per address unwinds (slow path); later
 * calls are one lock-free table probe.
 */
uint32_t sp_cuda_site(const void *ret);

/* Format one frame as "module!symbol+0xoff" (module basename); returns length. */
size_t sp_cuda_format_frame(const void *pc, char *buf, size_t len);

#endif /* STEPPROF_CUDA_SITES_H */
