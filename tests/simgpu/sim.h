/*
 * sim.h - internal declarations of the simulated CUDA driver (libcuda.so.1).
 *
 * The driver is three files sharing this header:
 *   drv_core.c  process state, lazy init, configuration (SIMGPU_*), devices,
 *               contexts, error strings, cuGetProcAddress and cuGetExportTable;
 *   drv_mem.c   device memory (a first-fit arena per device), pinned host ranges,
 *               pointer classification and attributes, async pools, VMM;
 *   drv_exec.c  streams (one FIFO worker thread each), the operations they run
 *               (copies, memsets, kernels, host functions, event records, waits,
 *               graphs), events, synchronisation and stream capture.
 *
 * RATIONALE: one process-wide mutex (sim_lock) guards every piece of simulator
 * state and one condition variable (sim_cond) is broadcast whenever any operation
 * completes or is queued. The simulator is a test fixture: the simplicity of a
 * single lock is worth far more than the throughput it costs, since the operations
 * themselves (sleeps standing for GPU time) dominate.
 */
#ifndef SIMGPU_SIM_H
#define SIMGPU_SIM_H

#include <cuda.h>
#include <pthread.h>
#include <stddef.h>
#include <stdint.h>

/* Everything declared here is internal to libcuda.so.1: only cu* names and
 * simgpu_register_kernel are exported. */
#pragma GCC visibility push(hidden)

#define SIM_MAX_DEV	8
#define SIM_ALIGN	512u	    /* first-fit allocation granularity */
#define SIM_VMM_GRAN	(2u << 20)  /* cuMemGetAllocationGranularity */
#define SIM_COMMIT_MAX	(64u << 20) /* allocations up to this are backed at once */
#define SIM_VERSION	13000	    /* cuDriverGetVersion */
#define SIM_DEVICE_NAME "Simulated GPU"

/* --- configuration, read once at cuInit (drv_core.c) --- */
struct sim_config {
	double pinned_gbps;   /* SIMGPU_PINNED_GBPS, H2D/D2H from pinned memory, peer copies */
	double pageable_gbps; /* SIMGPU_PAGEABLE_GBPS, H2D/D2H touching pageable memory */
	double device_gbps;   /* SIMGPU_DEVICE_GBPS, D2D copies and memsets */
	size_t mem_bytes;     /* SIMGPU_MEM_BYTES per device */
	int devices;	      /* SIMGPU_DEVICES */
	int capture_no_events; /* SIMGPU_CAPTURE_NO_EVENTS: an event record invalidates a capture */
};

/* --- device memory segments: one doubly linked list per device, in address order --- */
enum sim_seg_kind { SEG_FREE, SEG_DEVICE, SEG_MANAGED, SEG_PHYS };

struct sim_seg {
	size_t off, size; /* within the device arena */
	size_t request;	  /* bytes the caller asked for */
	enum sim_seg_kind kind;
	struct CUmemPoolHandle_st *pool; /* stream-ordered allocations only */
	struct sim_seg *prev, *next;
};

struct CUmemPoolHandle_st {
	int device;
	size_t used, high;
	int is_default;
};

struct CUctx_st {
	int device;
	unsigned int flags;
	int refs;
	int primary;
};

struct sim_dev {
	int ordinal;
	char *base;
	size_t cap, used;
	struct sim_seg *segs;
	struct CUctx_st primary;
	int primary_active;
	struct CUstream_st *legacy; /* created at first use */
	struct CUmemPoolHandle_st default_pool;
	struct CUmemPoolHandle_st *cur_pool;
	int peer[SIM_MAX_DEV];
};

/* --- process state (drv_core.c) --- */
extern pthread_mutex_t sim_lock;
extern pthread_cond_t sim_cond;
extern struct sim_config sim_cfg;
extern struct sim_dev sim_devs[SIM_MAX_DEV];
extern int sim_ndev;
extern int sim_inited;
/* cuEventRecord[WithFlags] calls, for SIMGPU_COUNT_FILE (what a profiler costs in records) */
extern unsigned long sim_event_records;

CUresult sim_check_init(void);
CUcontext sim_cur_ctx(void);
/* The device of the current context, or -1 (with *err set) when there is none. */
int sim_cur_dev(CUresult *err);
uint64_t sim_now_ns(void);

/* --- memory (drv_mem.c) --- */
enum sim_mem { MEM_PAGEABLE, MEM_PINNED, MEM_DEVICE, MEM_MANAGED };
/* Kind of the memory at [p, p+n); *dev gets the device for device/managed memory.
 * Caller holds sim_lock. Device memory outside any live allocation gives -1. */
int sim_classify(const void *p, size_t n, int *dev);
int sim_mem_init_dev(struct sim_dev *d);
/* Allocate/free in the arena; caller holds sim_lock. */
CUresult sim_alloc_locked(int dev, size_t bytes, enum sim_seg_kind kind, CUdeviceptr *out);
CUresult sim_free_locked(CUdeviceptr p, size_t *freed);
void sim_commit(const void *p, size_t n);
void sim_mem_reset_locked(int dev);
CUresult sim_pool_alloc_locked(struct CUmemPoolHandle_st *pool, size_t bytes, CUdeviceptr *out);

/* --- execution (drv_exec.c) --- */
CUresult sim_ctx_sync_dev(int dev);
/* CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED for a call a capture prohibits (drv_exec.c). */
CUresult sim_refuse_unsafe(void);
void sim_exec_thread_exit(void);

#pragma GCC visibility pop

#endif /* SIMGPU_SIM_H */
