/*
 * cuda_hooks.h - what the two hook files share (libstepprof.so only):
 * the wrapper of every hooked CUDA function and the slot of its real function,
 * both indexed by enum sp_cuda_idx (cuda_table.h). hook_cuda.c defines them;
 * hook_dlsym.c and the cuGetProcAddress doors fill the real slots with what a
 * lookup found, and hand out the wrapper instead.
 */
#ifndef STEPPROF_CUDA_HOOKS_H
#define STEPPROF_CUDA_HOOKS_H

#include "cuda_table.h"
#include "recorder.h"

SP_HIDDEN extern void *const sp_cuda_wrapper[SP_CUDA__COUNT];
SP_HIDDEN extern void *sp_cuda_real[SP_CUDA__COUNT];

/*
 * Store the real function a door found for entry i and return what the
 * program gets instead: our wrapper (unless the lookup found the wrapper itself).
 */
SP_HIDDEN void *sp_cuda_adopt(int i, void *real);

#endif /* STEPPROF_CUDA_HOOKS_H */
