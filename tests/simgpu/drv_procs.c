/*
 * drv_procs.c - the table behind cuGetProcAddress, and a stub for every driver
 * function the simulator does not implement.
 *
 * procmap.def is generated at build time from NVIDIA's cuda*Typedefs.h
 * (gen_procmap.sh): one row per versioned symbol. Each symbol gets a weak
 * definition here returning CUDA_ERROR_NOT_SUPPORTED (801); the real
 * implementations in the other drv_*.c files are strong and win at link time.
 * So every name a CUDA 13 program can ask for resolves, as on a real driver, and
 * an unimplemented call fails cleanly instead of crashing.
 *
 * NOTE: this file must not include cuda.h: the stubs are declared without their
 * prototypes (only their addresses and a return code matter), which would clash
 * with the header's declarations.
 */
#include "procs.h"

#define SIM_NOT_SUPPORTED 801 /* CUDA_ERROR_NOT_SUPPORTED */

#define SIM_PROC(base, ver, ptds, sym)                                                                                 \
	int sym(void) __attribute__((weak));                                                                           \
	int sym(void)                                                                                                  \
	{                                                                                                              \
		return SIM_NOT_SUPPORTED;                                                                              \
	}
#include "procmap.def"
#undef SIM_PROC

const struct sim_proc sim_procs[] = {
#define SIM_PROC(base, ver, ptds, sym) {#base, ver, ptds, (void *)sym},
#include "procmap.def"
#undef SIM_PROC
};
const size_t sim_nprocs = sizeof(sim_procs) / sizeof(sim_procs[0]);
