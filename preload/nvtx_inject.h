/*
 * nvtx_inject.h - NVTX v3 markers through NVTX's injection interface
 * (hook_nvtx.c): the program's NVTX calls become RANGE and NVTX_MARK records.
 *
 * NVTX v3 is header-only: on its first call, each module using it reads
 * NVTX_INJECTION64_PATH, dlopens that library and calls its exported
 * InitializeInjectionNvtx2, which fills NVTX's function tables. libstepprof.so
 * is that library: its constructor points NVTX_INJECTION64_PATH at itself when
 * unset, so LD_PRELOAD alone is enough.
 */
#ifndef STEPPROF_NVTX_INJECT_H
#define STEPPROF_NVTX_INJECT_H

#include "recorder.h"

/* Constructor: set NVTX_INJECTION64_PATH to this library's path unless already set. */
SP_HIDDEN void sp_nvtx_setup(void);

/* In a forked child: the thread's range stack belongs to the parent's file. */
SP_HIDDEN void sp_nvtx_fork_child(void);

#endif /* STEPPROF_NVTX_INJECT_H */
