/*
 * nccl_hooks.h - what the NCCL wrappers (hook_nccl.c) share with the dlsym
 * door (hook_dlsym.c): the wrapper of every function of api_nccl.def and the
 * slot of its real function, indexed by enum sp_nccl_idx. No NCCL types here.
 */
#ifndef STEPPROF_NCCL_HOOKS_H
#define STEPPROF_NCCL_HOOKS_H

#include "recorder.h"

/* Index of a hooked NCCL function: 0..SP_NCCL__COUNT-1. */
enum sp_nccl_idx {
#define SP_API_NCCL(name, ...) SP_NIDX_##name,
#include "stepprof/api_nccl.def"
#undef SP_API_NCCL
	SP_NCCL__COUNT
};

SP_HIDDEN extern void *const sp_nccl_wrapper[SP_NCCL__COUNT];

/* Exact name -> index, -1 when the name is not a hooked NCCL function. */
SP_HIDDEN int sp_nccl_find_name(const char *name);

/*
 * Store the real function a lookup found for entry i and return what the
 * program gets instead: our wrapper (unless the lookup found the wrapper itself).
 */
SP_HIDDEN void *sp_nccl_adopt(int i, void *real);

#endif /* STEPPROF_NCCL_HOOKS_H */
