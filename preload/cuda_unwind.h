/*
 * cuda_unwind.h - the return addresses of the calling thread's stack, walked
 * with libgcc's unwinder (cuda_sites.c's one way to unwind; the unit tests
 * give their own stacks in its place).
 */
#ifndef STEPPROF_CUDA_UNWIND_H
#define STEPPROF_CUDA_UNWIND_H

#include "recorder.h"

/*
 * At most max addresses into pcs, innermost first, from the frame of this
 * function on; the number stored. The walk ends at the first frame without
 * unwind info (.eh_frame), which is stored. Opens no file and takes no lock
 * (libgcc finds the FDEs through _dl_find_object).
 */
SP_HIDDEN int sp_unwind_pcs(void **pcs, int max);

#endif
