/*
 * analyze.h - `stepprof analyze`: iterations, the per-iteration breakdown and the
 * findings of a set of trace files (docs/definitions.md holds the definitions).
 *
 * Divided into:
 *   1. event sources: the merged stream of records the analysis reads, twice or
 *      three times (merge.c over trace files; analyze_src.c over an array built by
 *      a unit test);
 *   2. options and thresholds (findings.def);
 *   3. the results: processes, iterations, findings;
 *   4. the entry point.
 *
 * Memory: per-iteration results (a few hundred bytes each), the open iterations'
 * interval buffers (a time window, not the trace), and bounded tables (threads,
 * open files, top directories, call sites, live allocations). Nothing grows with
 * the number of records.
 */
#ifndef STEPPROF_ANALYZE_H
#define STEPPROF_ANALYZE_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "comm_match.h"
#include "stepprof/trace.h"

/* ------------------------------------------------------------ 1. sources */

/* Receives the records of an unordered scan (only kind, api, pid, tid, times; and
 * the fields of RANGE, STEP, FORK, LOST and COPY records). */
typedef void (*an_scan_fn)(void *arg, const struct sp_event *ev, int file);
/* Scan one trace file's ring in file order (analyze_scan.c). 0, or -1 when it cannot be read. */
int an_scan_file(const char *path, int file, an_scan_fn fn, void *arg);
/* A kind whose fields a scan decodes (the others: kind, api, times only). */
int an_scan_needs_fields(unsigned kind);

/*
 * A stream of records from several files, merged by begin time. file indexes
 * which header describes the record's producer and whose string table resolves
 * its string ids.
 */
struct an_source {
	void *ctx;
	size_t nfiles;
	/* The next record (valid until the next call), NULL at the end. */
	const struct sp_event *(*next)(void *ctx, int *file);
	int (*rewind)(void *ctx);				 /* 0 or -1 */
	const char *(*string)(void *ctx, int file, uint32_t id); /* NULL when unknown */
	const struct sp_file_header *(*header)(void *ctx, int file);
	/* Optional: every record once, in any order, fields as an_scan_fn says (NULL: use next). */
	int (*scan)(void *ctx, an_scan_fn fn, void *arg);
	/*
	 * Optional: from the next rewind or scan on, read only the files f with
	 * keep[f] (NULL: every file again); headers and strings of all stay available.
	 * The per-rank passes leave out the other ranks' files.
	 */
	void (*restrict_files)(void *ctx, const uint8_t *keep);
	/*
	 * Optional: a new source over the same files into *out, independent of this
	 * one (another thread may read it while this one is read), its context
	 * returned (NULL when out of memory) and freed by out->close.
	 */
	void *(*clone)(void *ctx, struct an_source *out);
	void (*close)(void *ctx);
};

/* An in-memory source (unit tests): events in the order given, one file. */
struct an_memsrc {
	struct sp_file_header hdr;
	struct sp_event *ev;
	size_t n, cap, pos;
	char **str; /* str[id] */
	uint32_t nstr;
};
void an_memsrc_init(struct an_memsrc *m, int32_t pid);
/* Append an event; its fields are zero except those given afterwards through the returned pointer. */
struct sp_event *an_memsrc_add(struct an_memsrc *m, unsigned kind, unsigned api, int32_t pid, int32_t tid,
			       uint64_t begin, uint64_t end);
uint32_t an_memsrc_string(struct an_memsrc *m, const char *s);
/* Sort by begin time (stable), as the merged stream of real files is. */
void an_memsrc_sort(struct an_memsrc *m);
void an_memsrc_source(struct an_memsrc *m, struct an_source *src);
void an_memsrc_free(struct an_memsrc *m);

/* ------------------------------------------------ 2. options, thresholds */

enum an_finding {
#define SP_FINDING(id, name) AN_F_##id,
#include "findings.def"
#undef SP_FINDING
	AN_F__COUNT
};

enum an_threshold {
#define SP_THRESHOLD(id, name, dflt, help) AN_T_##id,
#include "findings.def"
#undef SP_THRESHOLD
	AN_T__COUNT
};

extern const char *const an_finding_name[AN_F__COUNT];
extern const char *const an_threshold_name[AN_T__COUNT];
extern const char *const an_threshold_help[AN_T__COUNT];
extern const double an_threshold_default[AN_T__COUNT];

#define AN_DEFAULT_STEP_REGEX "^(train_?)?(step|iter|iteration)([^a-z]|$)|ProfilerStep"

struct an_options {
	const char *step_regex; /* NULL: AN_DEFAULT_STEP_REGEX */
	double threshold[AN_T__COUNT];
	/*
	 * The trainer analysed. rank_given: the process whose header has RANK == rank
	 * (--rank); else pid when not 0 (the per-rank passes); else the default: the
	 * lowest rank among the processes that launched kernels, or the one with the
	 * most launches when none has a rank.
	 */
	int rank_given, rank;
	int32_t pid;
	/* Set by the per-rank passes: do not compute the ranks[] of a sub-analysis. */
	int no_ranks;
	/* The per-rank analyses in up to this many threads (--jobs; <= 1: in turn, in this one). */
	long jobs;
	/* The collectives of the largest skew listed with every rank's arrival (--collectives; 0: none). */
	long collectives;
};
void an_options_init(struct an_options *o);
/* "name=value": 0, or -1 with a one-line reason in err. */
int an_options_set_threshold(struct an_options *o, const char *arg, char *err, size_t errlen);
/* "name=value" into values[i] for names[i] (n of them; verb for the reason's --help); 0 or -1 with err. */
int an_parse_threshold(const char *arg, const char *const *names, int n, double *values, const char *verb, char *err,
		       size_t errlen);

/* ----------------------------------------------------------- 3. results */

/* The breakdown categories, in the JSON's order. */
enum an_cat {
#define SP_CATEGORY(id, name) AN_##id,
#include "stepprof/categories.def"
#undef SP_CATEGORY
	AN_CAT__COUNT
};
extern const char *const an_cat_name[AN_CAT__COUNT];
/* host_blocked_ns members */
enum an_blk { AN_BLK_INPUT, AN_BLK_H2D, AN_BLK_D2H, AN_BLK_SYNC, AN_BLK__COUNT };
extern const char *const an_blk_name[AN_BLK__COUNT];

enum an_role { AN_ROLE_TRAINER, AN_ROLE_WORKER, AN_ROLE_OTHER };
extern const char *const an_role_name[3];

enum an_source_kind { AN_SRC_NONE, AN_SRC_NVTX, AN_SRC_API, AN_SRC_AUTO };
extern const char *const an_source_name[4];

struct an_proc {
	int32_t pid, ppid, rank, local_rank, world_size;
	int role;
	int file;	 /* file whose header describes it, -1 for pids seen only in a collector file */
	int32_t trainer; /* a worker: the trainer it descends from (0 unknown: a collector-only process) */
	uint64_t records, lost, launches;
	uint64_t begin_ns, end_ns;
	uint32_t images;	 /* its trace files: 1 + the execs recorded (0: seen only by the collector) */
	char cmdline[128];	 /* of its last image (what it ran last) */
	char first_cmdline[128]; /* of its first image (the same when images is 1) */
	/* added: CUDA records (copies, launches, syncs, allocations, GPU spans...); its input over the whole run */
	uint64_t cuda_calls;
	uint64_t in_files, in_bytes, in_meta, in_ns, in_wait_ns; /* files opened, bytes read, metadata ops, ns */
	uint64_t cpu_ns; /* its CPU time at its last CPU_TIME record (user + system, since it started), 0 when none */
};

/*
 * What the trainer's loader workers did, from their CPU_TIME records (the
 * input split's segments, docs/definitions.md): for loader_cpu_bound and
 * loader_starved.
 */
struct an_loaders {
	uint32_t workers;			  /* workers of the trainer with at least one segment */
	uint64_t seg_ns, cpu_ns, io_ns, wait_ns;  /* their segments' wall time: CPU work, file calls, neither */
	uint64_t cpu_time_ns;			  /* their CPU time in those segments (file calls' included) */
	uint64_t cpu_total_ns;			  /* CPU time of every process of the tree (last samples) */
	uint64_t span_ns;			  /* from the first record of the tree to its last */
	uint32_t online_cpus, affinity_cpus;	  /* the trainer's header's (0: unknown, a trace before 1.5) */
};

#define AN_FSIZE_BUCKETS 41 /* log2 buckets of bytes per opened file: 0, 1, 2-3, ... */
#define AN_SIZESET	 8

/* The parts of the input category (docs/definitions.md, "Input split"), in the JSON's order. */
enum an_split { AN_SPLIT_IO, AN_SPLIT_CPU, AN_SPLIT_WAIT, AN_SPLIT__COUNT };
extern const char *const an_split_name[AN_SPLIT__COUNT];

struct an_iter {
	uint64_t start_ns, end_ns;
	uint64_t bd[AN_CAT__COUNT];
	uint64_t bd1[AN_CAT__COUNT];	 /* schema 1's breakdown: communication in compute, bd1[AN_COMM] 0 */
	uint64_t comm_overlapped_ns;	 /* a communication kernel runs while a compute kernel runs */
	uint64_t split[AN_SPLIT__COUNT]; /* bd[AN_INPUT] split: file I/O, loaders' CPU work, neither */
	uint64_t split_unsampled;	 /* of split[AN_SPLIT_WAIT]: no sampled loader worker to explain it */
	uint64_t split_waited;		 /* of split[AN_SPLIT_WAIT]: the workers in their own (recorded) waits */
	uint64_t blocked[AN_BLK__COUNT];
	uint64_t gpu_idle_ns;
	uint64_t files_opened, metadata_ops, bytes_read, h2d_bytes, d2h_bytes, pageable_copies, device_bytes_peak;
	uint64_t dev_peak[SP_MAX_DEVICES]; /* device_bytes_peak of each device (memory_growth's projection) */
	/* for the findings */
	uint64_t opens, stats, meta_ns, data_ns;
	uint64_t pageable_bytes, pageable_ns, pageable_async, pinned_bytes, pinned_ns, pinned_copies;
	uint64_t pageable_small, pageable_small_ns; /* pageable copies of at most unpinned_copy.small_copy_bytes */
	/*
	 * Files opened in the iteration and sized at their close; of them, those under
	 * small_file_storm.max_median_file_bytes: the median is under it when they are
	 * half or more (exact at any threshold, in two counters).
	 */
	uint32_t files_sized, files_small;
	uint32_t files_unread; /* opened and closed without a read: written files (a checkpoint), not sized */
	uint32_t allocs, frees, alloc_failed, flushes;
	uint32_t nsizes; /* distinct allocation sizes, saturates at AN_SIZESET + 1 */
	uint64_t sizes[AN_SIZESET];
	int finalized;
};

#define AN_MAX_SITES	8
#define AN_MAX_EVIDENCE 16

struct an_evidence {
	const char *key;
	int is_str;
	double num;
	char str[256];
};

struct an_result_finding {
	int kind; /* enum an_finding */
	const char
	    *signal;  /* alloc_fragmentation: "failed_with_free_memory" | "allocator_flush" | "fragmentation_peak" */
	int severity; /* 0 info, 1 warning, 2 critical */
	long first_iteration, last_iteration, iterations;
	struct an_evidence ev[AN_MAX_EVIDENCE];
	int nev;
	char sites[AN_MAX_SITES][256];
	int nsites;
	char advice[1024];
	uint64_t cost_ns; /* wall time the finding explains (input, pageable copies), 0 when none: its rank */
	/*
	 * The concerned iterations in increasing order (malloc'd, freed with the
	 * analysis), niter of them; NULL when the finding spans first..last whole
	 * (memory_growth) or concerns none. The HTML strip marks exactly these.
	 */
	long *iter;
	size_t niter, iter_cap;
};
extern const char *const an_severity_name[3];

/*
 * One trainer process (a rank of a torchrun/DDP job) summarised by its own
 * analysis: the numbers of the per-rank table and of the JSON's ranks[].
 */
struct an_rank {
	int32_t pid, rank, local_rank, world_size; /* -1: unset */
	int selected;				   /* the process the rest of the analysis describes */
	int source_kind;
	uint64_t launches;
	uint64_t nit, wall_median, wall_total;
	uint64_t bd_total[AN_CAT__COUNT];
	int top_finding; /* its analysis's first finding of warning severity or worse (enum an_finding), -1 none */
	uint64_t bd1_total[AN_CAT__COUNT]; /* schema 1's (an_iter.bd1) */
	uint64_t comm_overlapped_ns;
};

#define AN_INPUT_DIRS 5

struct an_analysis {
	struct an_options opt;
	int source_kind;
	struct an_proc *procs;
	size_t nprocs;
	int32_t trainer_pid, training_tid; /* 0 when none */
	uint64_t run_begin_ns, run_end_ns;
	uint64_t records, lost, late_events;
	/*
	 * The trainer's kernel GPU time (gpu_model.h): measured by timing events,
	 * modelled from the samples; launches timed, modelled, and neither.
	 */
	uint64_t gpu_measured_ns, gpu_modelled_ns;
	uint64_t launches_timed, launches_modelled, launches_unmodelled;
	uint64_t device_capacity; /* of the devices the trainer allocated on (their sum), else of device 0 */
	uint64_t dev_capacity[SP_MAX_DEVICES]; /* per device: mem-info, a failed allocation, the header (0 unknown) */
	uint32_t dev_used;		       /* bit d: the trainer allocated on device d */
	struct an_iter *it;
	size_t nit;
	struct an_result_finding *fnd;
	size_t nfnd;
	/* run-wide, for the report */
	uint64_t wall_total;
	uint64_t bd_total[AN_CAT__COUNT];
	uint64_t bd1_total[AN_CAT__COUNT]; /* schema 1's (an_iter.bd1) */
	uint64_t comm_overlapped_ns;	   /* the iterations' comm_overlapped_ns, summed */
	uint64_t split_total[AN_SPLIT__COUNT]; /* the iterations' input split, summed */
	uint64_t split_unsampled_total;	       /* and their split_unsampled */
	struct an_loaders loaders;
	uint64_t device_bytes_peak;
	uint32_t auto_period; /* signatures per iteration (auto) */
	uint64_t cuda_calls;  /* CUDA records of every process: 0, no process made a CUDA call */
	/*
	 * Without iterations, the input of the whole run as one span (start and end
	 * the run's; bd[AN_INPUT] the main process's time in input calls and waits
	 * for loader workers): small_file_storm is evaluated on it, the report gives
	 * it with the busiest directories (opens, most first).
	 */
	struct an_iter run_input;
	char input_dirs[AN_INPUT_DIRS][256];
	uint64_t input_dir_opens[AN_INPUT_DIRS];
	size_t ninput_dirs;
	/*
	 * Every trainer process (it launched kernels) and the selected one, by rank
	 * then pid: one analysis each (the selected one's is this one), so memory
	 * stays that of one analysis and time is linear in the ranks.
	 */
	struct an_rank *ranks;
	size_t nranks;
	/*
	 * The job's collectives matched across its ranks (analyze_comm.c): empty
	 * when no process made an NCCL collective through the API; comm_hosts =
	 * the hosts the trace files come from.
	 */
	struct cm_result comm;
	struct cm_call *comm_calls; /* the units as found, before matching (rank summaries) */
	size_t ncomm_calls;
	char (*comm_host_names)[64]; /* comm_hosts of them, in order: host 0 first */
	uint32_t comm_hosts;
	uint64_t comm_records; /* COMM and COMM_INIT records of every process */
};

/*
 * How busy the job's CPUs were: the CPU time of every traced process (their
 * last CPU_TIME records) over the run's span times the CPUs it could use (its
 * affinity, else the online CPUs); 0 to 1, 0 when unknown (a trace before 1.5).
 * Untraced processes of the machine are not in it.
 */
double an_cores_busy(const struct an_analysis *a);

/* ------------------------------------------------------- 4. entry point */

/*
 * Run the analysis; 0, or -1 with a one-line reason in err (bad regex, --rank
 * that no process has: both start with the option's name; out of memory, rewind failed).
 */
int an_analyze(struct an_source *src, const struct an_options *opt, struct an_analysis *a, char *err, size_t errlen);
void an_analysis_free(struct an_analysis *a);
/* Free the tables an analysis keeps for the next one in this thread (an_analyze reuses them). */
void an_scratch_free(void);

/* ranks[]'s order (qsort): by rank, the processes without one after them, then by pid. */
int an_rank_cmp(const void *x, const void *y);

/* Helpers shared with report.c and the tests. */
uint64_t an_quantile_u64(const uint64_t *v, size_t n, double q); /* v is copied, not modified */

#endif /* STEPPROF_ANALYZE_H */
