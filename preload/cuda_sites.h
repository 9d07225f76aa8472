/*
 * cuda_sites.h - call sites of allocations and pageable copies: the program's
 * frames above the CUDA call, unwound with libgcc's unwinder once per distinct
 * return address and kept as an interned string "module!symbol+0xoff <- ...". When
 * that address is the CUDA runtime's own (a statically linked cudart calling
 * the driver wrapper), the site is the program's first frame above the
 * runtime, found by a short unwind on each such call.
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

/*
 * 1 when `name` (a symbol, mangled or not) is the CUDA runtime's: "cuda" then a
 * capital letter (the API), "__cuda..." (registration, older static cudarts'
 * internal __cudartNNN), "libcudart..." (CUDA 13's static cudart names its
 * internal functions libcudart_static_<sha1>), "cudart...", cudart:: C++ names.
 */
int sp_cuda_runtime_name(const char *name);

/* Format one frame as "module!symbol+0xoff" (module basename); returns length. */
size_t sp_cuda_format_frame(const void *pc, char *buf, size_t len);

#endif /* STEPPROF_CUDA_SITES_H */
