/*
 * test_cuda_ptds_names.c - helper of test_cuda_table.c: the names NVIDIA's
 * cuda.h gives the hooked driver functions when a program is compiled with
 * CUDA_API_PER_THREAD_DEFAULT_STREAM (the _ptds/_ptsz variants). A separate
 * file because cuda.h can be included only once per translation unit, and the
 * plain names come from the other setting. No tests of its own.
 */
#define CUDA_API_PER_THREAD_DEFAULT_STREAM 1
#include <cuda.h>
#include <stddef.h>
#include <string.h>

/* the list of hooked bases, from test_cuda_table.c */
#define SP_T_BASES_ONLY 1
#include "test_cuda_table.c"

#define S2(x) #x
#define S(x) S2(x)

static const struct {
	const char *base, *name;
} ptds_names[] = {
#define B(x) { #x, S(x) },
	SP_T_HOOKED_BASES(B)
#undef B
};

const char *sp_t_ptds_name(const char *base)
{
	for (size_t i = 0; i < sizeof(ptds_names) / sizeof(ptds_names[0]); i++)
		if (!strcmp(ptds_names[i].base, base))
			return ptds_names[i].name;
	return NULL;
}
