/*
 * show.h - what the CUDA workloads that compare a program with and without the
 * preload print: each call's result and errno as the program sees them
 * (door_cuda.c, cuda_edges.c).
 */
#ifndef STEPPROF_WORKLOAD_SHOW_H
#define STEPPROF_WORKLOAD_SHOW_H

#include <errno.h>
#include <stdio.h>

#define MiB (1024ull * 1024)

/* Print a call's result and errno as the program sees them. */
#define SHOW(what, rc)                                                                                                 \
	do {                                                                                                           \
		errno = 4242;                                                                                          \
		int r_ = (int)(rc);                                                                                    \
		printf("%-40s rc=%d errno=%d\n", what, r_, errno);                                                     \
	} while (0)

#endif
