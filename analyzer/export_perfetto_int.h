/*
 * export_perfetto_int.h - what the files of the Perfetto export share, inside
 * the analyzer: the export's state (struct ex: files, hosts, processes,
 * threads, GPU lanes, the op window), its tracks (export_perfetto_tracks.c),
 * its events (export_perfetto_events.c) and the document-time arithmetic of
 * the header pass (export_perfetto.c).
 */
#ifndef STEPPROF_EXPORT_PERFETTO_INT_H
#define STEPPROF_EXPORT_PERFETTO_INT_H

#include <stddef.h>
#include <stdint.h>

#include "export_perfetto.h"
#include "jsonw.h"
#include "merge.h"
#include "reader.h"

#define MAX_HOSTS	512 /* clocks: hosts past it share the last one's offset */
#define PSEUDO_TID_BASE 0x80000000u
#define MAX_LANES	16
_Static_assert((uint64_t)MERGE_PID_SPACES << MERGE_PID_SHIFT <= PSEUDO_TID_BASE,
	       "the processes' ids stay below the GPU tracks' pseudo tids");

struct file_info {
	const char *path;
	int ok;
	int bpf;
	uint32_t host;		    /* its clock: x->hosts[host] */
	int32_t pid_off;	    /* added to its pids and tids (merge_pid_spaces) */
	struct sp_file_header *hdr; /* copy; strings made to end */
};

struct host {
	char name[64];
	int64_t offset_ns; /* add to this host's CLOCK_MONOTONIC to get the first host's */
};

/* A process: named from its file header, or "pid N" when only seen in records. */
struct proc {
	uint32_t opid; /* output pid (0 too: a damaged file's) */
	int used;      /* 0 = empty slot */
	int has_hdr;
	int32_t pid, ppid, rank;
	uint32_t host;
	char *cmdline;	    /* of its last image (a process that execs has a file per image) */
	uint64_t cmd_start; /* that image's start_mono_ns */
};

struct thread {
	uint32_t opid, otid; /* 0 too: a damaged file's */
	int used;	     /* 0 = empty slot */
	int32_t tid;
	uint64_t launches;
	char *name; /* from a THREAD record */
};

/* The GPU slices of one (process, device), spread over lanes so none overlap. */
struct lanes {
	uint32_t opid;
	uint32_t device;
	unsigned n;
	int64_t end[MAX_LANES];
	uint32_t tid[MAX_LANES];
};

/* A recent op (launch/copy/memset) waiting for its gpu_span, or a span waiting for its op. */
enum { OP_EMPTY, OP_CALL, OP_SPAN };
struct op {
	uint32_t op;
	int32_t pid, tid;
	uint8_t state, kind, dir, hostmem, device;
	uint16_t api;
	uint32_t name;
	uint64_t bytes, stream;
	uint64_t b, e; /* OP_CALL: the host call; OP_SPAN: the GPU span */
};

/* A GPU slice held back (EXPORT_PENDING): call is its op's record when has_call. */
struct gslice {
	uint64_t b, e;
	int32_t pid;
	uint32_t op;
	uint8_t device, has_call, modelled;
	struct op call;
};

/* The GPU model of one process of the file being read (gpu_model.h), and the ends of its latest syncs. */
#define XMODEL_SYNCS 64
struct xmodel {
	int32_t pid;
	struct gmodel *m;
	uint64_t sync_end[XMODEL_SYNCS]; /* a ring: the newest XMODEL_SYNCS */
	unsigned nsync;
};

struct ex {
	struct jsonw w;
	struct export_stats *st;
	struct file_info *files;
	size_t nfiles;
	struct host hosts[MAX_HOSTS];
	unsigned nhosts;
	int64_t zero;	  /* first-host CLOCK_MONOTONIC of ts 0 */
	int64_t from, to; /* the window, relative to zero */

	/* the file being read */
	struct sp_reader *r;
	struct file_info *fi;

	struct proc *procs;
	size_t procs_cap, nprocs;
	struct thread *threads;
	size_t threads_cap, nthreads;
	struct lanes *lanes;
	size_t nlanes, lanes_cap;
	uint32_t next_pseudo;
	struct op *ops; /* EXPORT_OP_WINDOW entries */
	int ops_dirty;
	/* the file's GPU models, and its slices held back (export_perfetto_events.c, section 3) */
	struct xmodel models[EXPORT_MODELS];
	unsigned nmodels;
	struct gslice *pend;
	size_t npend;
	uint64_t maxbegin, maxlate, resolved; /* the newest record's begin, the worst lateness, the last force */
	size_t held;			      /* GPU ops and slices taken in since that resolution */
	int werr; /* errno of the first failed write to the output, 0 none */
};

/* export_perfetto.c: document time, saturating */
int64_t sat_add(int64_t a, int64_t b);
int64_t sat_sub(int64_t a, int64_t b);
int64_t clamp_ns(uint64_t ns);

/* export_perfetto_tracks.c: allocation, processes, threads, GPU lanes, their names */
void *xcalloc(size_t n, size_t sz);
char *xstrdup(const char *s);
uint64_t mix(uint64_t k);
uint32_t out_id(const struct ex *x, int32_t id);
struct proc *proc_get(struct ex *x, uint32_t opid);
struct thread *thread_get(struct ex *x, uint32_t opid, uint32_t otid, int32_t tid);
uint32_t gpu_lane(struct ex *x, uint32_t opid, uint32_t device, int64_t b, int64_t e);
void write_metadata(struct ex *x);
/* One metadata event (process/thread name or sort index): sval, else ival. */
void export_meta(struct ex *x, const char *what, uint32_t pid, uint32_t tid, const char *key, const char *sval,
		 int64_t ival);

/* export_perfetto_events.c: host records and GPU slices as trace events */
int64_t rel(const struct ex *x, uint64_t ns);
int in_window(const struct ex *x, int64_t b, int64_t e);
const char *str_or(const struct ex *x, uint64_t id, const char *dflt);
void host_record(struct ex *x, const struct sp_event *ev, uint32_t opid, uint32_t otid);
void gpu_call(struct ex *x, const struct sp_event *ev);
void gpu_span(struct ex *x, const struct sp_event *ev);
void gpu_flush(struct ex *x);
/* Every record of the file, in order: the GPU models' ops and syncs, and their periodic resolution. */
void gpu_model_record(struct ex *x, const struct sp_event *ev);
/* Nanoseconds as microseconds with exact nanoseconds (the "ts" and "dur" members). */
void export_put_us(struct jsonw *w, const char *key, int64_t ns);

/* export_perfetto_iters.c: the analysis's iterations (a track) and findings (instants) */
void export_analysis(struct ex *x);

#endif /* STEPPROF_EXPORT_PERFETTO_INT_H */
