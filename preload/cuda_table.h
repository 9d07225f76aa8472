/*
 * cuda_table.h - the table of hooked CUDA functions (api_cuda.def) as data:
 * exact-name lookup for the dlsym door, and the variant choice of the
 * cuGetProcAddress / cudaGetDriverEntryPoint doors (base name + cudaVersion +
 * per-thread-default-stream flag -> the exact versioned function).
 *
 * Core (no CUDA types, no interposed symbols): unit-tested on its own. The
 * wrappers and real-function slots indexed by the same ids are in hook_cuda.c.
 */
#ifndef STEPPROF_CUDA_TABLE_H
#define STEPPROF_CUDA_TABLE_H

#include <stdint.h>

#include "stepprof/trace.h"

/* Index of a hooked function in the table: 0..SP_CUDA__COUNT-1. */
enum sp_cuda_idx {
#define SP_API_CUDA(name, ...) SP_CIDX_##name,
#include "stepprof/api_cuda.def"
#undef SP_API_CUDA
	SP_CUDA__COUNT
};

struct sp_cuda_entry {
	const char *name; /* exported, exact */
	const char *base; /* what cuGetProcAddress is asked for */
	int ver;          /* smallest cudaVersion that selects it; 0: runtime, never by cuGetProcAddress */
	uint8_t ptds;     /* the per-thread default stream variant */
	uint16_t api;     /* enum sp_api */
};

extern const struct sp_cuda_entry sp_cuda_table[SP_CUDA__COUNT];

/*
 * The newest cudaVersion the table knows the variants of. A request above the
 * next major passes through untouched: a newer driver may hand out a variant
 * with another signature under the same base name.
 */
#define SP_CUDA_MAX_VERSION 13999

/* Exact name -> index, -1 when the name is not hooked. */
int sp_cuda_find_name(const char *name);

/*
 * cuGetProcAddress(symbol, cudaVersion, flags) -> index of the variant the
 * driver hands out for that request, -1 when none of ours (pass through).
 * flags & 2 (CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM) prefers the _ptds /
 * _ptsz variant; bases without one fall back to the plain variant, as the
 * driver does.
 */
int sp_cuda_find_proc(const char *symbol, int cuda_version, uint64_t flags);

#endif /* STEPPROF_CUDA_TABLE_H */
