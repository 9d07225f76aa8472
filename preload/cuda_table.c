/*
 * cuda_table.c - the hooked CUDA functions as data (see cuda_table.h):
 *   1. the table, generated from api_cuda.def,
 *   2. exact-name lookup (hash of the names, built once),
 *   3. the cuGetProcAddress variant choice.
 */
#include "cuda_table.h"

#include <string.h>

/* ------------------------------------------------------------- 1. table */

const struct sp_cuda_entry sp_cuda_table[SP_CUDA__COUNT] = {
#define SP_API_CUDA(name, id, how, ret, params, args, base, ver, ptds, spec)                                           \
	[SP_CIDX_##name] = { #name, #base, ver, ptds, SP_API_##name },
#include "stepprof/api_cuda.def"
#undef SP_API_CUDA
};

/* --------------------------------------------------------- 2. by name */

/*
 * Linear scan over ~160 short names. RATIONALE: both doors that use it (dlsym,
 * cuGetProcAddress) run once per symbol at start-up, never per CUDA call, so a
 * hash would only add code. strcmp, not a prefix: cuMemcpy must not match
 * cuMemcpyAsync.
 */
int sp_cuda_find_name(const char *name)
{
	if (!name || name[0] != 'c' || name[1] != 'u')
		return -1;
	for (int i = 0; i < SP_CUDA__COUNT; i++)
		if (strcmp(sp_cuda_table[i].name, name) == 0)
			return i;
	return -1;
}

/* ---------------------------------------------------- 3. by proc request */

static int best_variant(const char *symbol, int ver, int ptds)
{
	int best = -1;
	for (int i = 0; i < SP_CUDA__COUNT; i++) {
		const struct sp_cuda_entry *e = &sp_cuda_table[i];
		if (e->ver <= 0 || e->ptds != ptds || e->ver > ver || strcmp(e->base, symbol) != 0)
			continue;
		if (best < 0 || e->ver > sp_cuda_table[best].ver)
			best = i;
	}
	return best;
}

int sp_cuda_find_proc(const char *symbol, int cuda_version, uint64_t flags)
{
	if (!symbol || symbol[0] != 'c' || symbol[1] != 'u' || cuda_version > SP_CUDA_MAX_VERSION)
		return -1;
	if (flags & 2) {
		int i = best_variant(symbol, cuda_version, 1);
		if (i >= 0)
			return i;
		/* A base that has a per-thread variant, asked below its version, or
		 * one that has none (cuEventQuery, cuMemAlloc): the plain one. */
	}
	return best_variant(symbol, cuda_version, 0);
}
