/*
 * sim.h - internal declarations of the simulated CUDA driver (libcuda.so.1).
 *
 * The driver is these files sharing this header, most of them one group of
 * CUDA's Driver API reference:
 *   drv_core.c       process state, lazy init, configuration (SIMGPU_*), devices,
 *                    contexts, error strings, cuGetProcAddress and cuGetExportTable;
 *   drv_mem.c        device memory (a first-fit arena per device), pinned host ranges,
 *                    pointer classification and attributes, async pools, VMM;
 *   drv_exec.c       the engine: streams (one FIFO worker thread each) and the
 *                    operations they run (copies, memsets, kernels, host functions,
 *                    event records, waits, graphs);
 *   drv_stream.c     stream management: create, synchronise, query, wait for an
 *                    event, attributes, stream capture;
 *   drv_event.c      event management;
 *   drv_memop.c      stream memory operations (write and wait for a value);
 *   drv_copy.c       copies and memsets, batches of copies;
 *   drv_allocasync.c the stream-ordered memory allocator's calls;
 *   drv_launch.c     execution control: kernels, launches, host functions;
 *   drv_graph.c      graph management;
 *   drv_procs.c      the table behind cuGetProcAddress (procs.h).
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

/* --- execution: operations, streams, events, graphs (drv_exec.c) --- */
enum sim_op_type { OP_NOP, OP_COPY, OP_MEMSET, OP_KERNEL, OP_HOST, OP_EVENT, OP_FREE, OP_GRAPH, OP_WRITE, OP_WAITVAL };

struct sim_dep {
	struct CUstream_st *s;
	uint64_t seq;
};

struct sim_op {
	enum sim_op_type type;
	struct sim_op *next;
	uint64_t seq;
	uint64_t submit_ns; /* host time at which it was queued */
	struct sim_dep *deps;
	int ndeps;
	union {
		struct {
			char *dst;
			const char *src;
			size_t width, height, depth, dpitch, spitch, dslice, sslice;
			double gbps;
			struct CUstream_st *staged_on; /* pageable to device: the host waits for staging */
			size_t staged;		       /* bytes still in flight when the host returns */
		} copy;
		struct {
			char *dst;
			size_t pitch, width, height; /* width in elements */
			unsigned int elem;
			uint32_t value;
		} set;
		struct {
			void (*fn)(void **);
			void **args; /* points into store */
			size_t store_size;
		} kern;
		struct {
			CUhostFn fn;
			void *ud;
			CUstreamCallback cb;
			struct CUstream_st *cbs;
		} host;
		struct {
			struct CUevent_st *ev;
		} event;
		struct {
			CUdeviceptr p;
		} fr;
		struct {
			struct CUgraphExec_st *exec;
		} graph;
		struct {
			void *addr;
			uint64_t value;
			int is64;
			unsigned int flags;
		} val;
	} u;
};

enum sim_stream_kind { ST_USER, ST_LEGACY, ST_PERTHREAD };

struct CUstream_st {
	int dev;
	enum sim_stream_kind kind;
	unsigned int flags;
	int prio;
	unsigned long long id;
	pthread_t thr;
	int started, dying, exited;
	struct sim_op *head, *tail;
	uint64_t submitted, completed;
	uint64_t released; /* the latest staged copy whose caller may return (drv_copy.c) */
	/* the stream's timeline: when its recent operations ended (see worker() in drv_exec.c) */
	uint64_t last_end;
	struct {
		uint64_t seq, end;
	} ends[64];
	/* capture */
	struct CUgraph_st *cgraph;
	struct CUstream_st *corigin; /* the stream that began the capture */
	CUstreamCaptureMode cmode;
	pthread_t cthread; /* the thread that began the capture */
	unsigned long long cid;
	int cinvalid;
	struct CUstream_st *next_all;
};

struct CUevent_st {
	unsigned int flags;
	struct CUstream_st *s; /* of the latest record, NULL: never recorded */
	uint64_t seq;
	uint64_t t_ns;
	int has_time, captured, refs;
};

struct CUgraph_st {
	struct sim_op *head, *tail;
	size_t n;
};

struct CUgraphExec_st {
	struct sim_op **nodes;
	size_t n;
	int refs;
};

/* Every stream ever made, newest first; a stream leaves it when its worker ends. */
extern struct CUstream_st *sim_all_streams;

/* SIM_HOST_STAGED as sim_enqueue's host_sync: return once the source is staged. */
#define SIM_HOST_STAGED 2

struct CUstream_st *sim_stream_new_locked(int dev, enum sim_stream_kind kind, unsigned int flags, int prio);
int sim_stream_blocking(const struct CUstream_st *s);
int sim_add_dep(struct sim_op *op, struct CUstream_st *s, uint64_t seq);
void sim_wait_seq_locked(struct CUstream_st *s, uint64_t seq);
void sim_graph_append(struct CUgraph_st *g, struct sim_op *op);
CUresult sim_enqueue(struct CUstream_st *s, struct sim_op *op, int host_sync);
struct sim_op *sim_op_new(enum sim_op_type type);
/* Callers hold sim_lock when op may be an event record or a graph launch. */
void sim_op_free(struct sim_op *op);
CUresult sim_stream_of(CUstream h, int per_thread, struct CUstream_st **out);
void sim_event_put_locked(struct CUevent_st *ev);
void sim_reach_events_locked(struct CUstream_st *s);
void sim_exec_thread_exit(void);

/* Declares s, the stream handle h names (pt: a _ptds/_ptsz entry point), or returns the error. */
#define SIM_RESOLVE(h, pt, s)                                                                                          \
	struct CUstream_st *s;                                                                                         \
	do {                                                                                                           \
		CUresult r_ = sim_stream_of(h, pt, &s);                                                                \
		if (r_ != CUDA_SUCCESS)                                                                                \
			return r_;                                                                                     \
	} while (0)

#define SIM_PTR(d) ((void *)(uintptr_t)(d))

/* --- streams (drv_stream.c) --- */
CUresult sim_ctx_sync_dev(int dev);
/* CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED for a call a capture prohibits. */
CUresult sim_refuse_unsafe(void);
CUresult sim_refuse_unsafe_locked(void);
/* CUDA_SUCCESS when h names a usable stream. */
CUresult sim_stream_check(CUstream h, int pt);

/* --- copies (drv_copy.c) --- */
struct sim_span {
	char *p;
	size_t pitch, slice;
};

CUresult sim_copy_op(struct sim_span dst, struct sim_span src, size_t width, size_t height, size_t depth, int sync,
		     int need, struct sim_op **out, int *host_sync);
CUresult sim_spans3d(const CUDA_MEMCPY3D *c, struct sim_span *d, struct sim_span *s_);
CUresult sim_spans3dpeer(const CUDA_MEMCPY3D_PEER *c, struct sim_span *d, struct sim_span *s_);

/* --- kernels (drv_launch.c) --- */
void **sim_pack_args(const void *fn, void **params, void **extra, size_t *store_size, int *fail);

/* --- graphs (drv_graph.c) --- */
void sim_graph_free(struct CUgraph_st *g);
void sim_exec_put_locked(struct CUgraphExec_st *e);

#pragma GCC visibility pop

#endif /* SIMGPU_SIM_H */
