/*
 * procs.h - the table behind cuGetProcAddress, shared by the file that generates it
 * (drv_procs.c) and the one that searches it (drv_core.c).
 *
 * NOTE: no cuda.h here: drv_procs.c must not see the driver's prototypes.
 */
#ifndef SIMGPU_PROCS_H
#define SIMGPU_PROCS_H

#include <stddef.h>

/* One versioned symbol of the CUDA 13 headers; the table is sorted by base name then version. */
struct sim_proc {
	const char *base;
	int version;
	int ptds;
	void *fn;
};

#pragma GCC visibility push(hidden)
extern const struct sim_proc sim_procs[];
extern const size_t sim_nprocs;
#pragma GCC visibility pop

#endif /* SIMGPU_PROCS_H */
