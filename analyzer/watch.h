/*
 * watch.h - `stepprof watch`: following a running job's trace directory
 * (docs/watch.md). Three parts:
 *   1. watch_follow.c: the files of the directory, read incrementally at each
 *      tick (sp_reader_resume), each trainer's recent records in a buffer
 *      (encoded slots: 32 bytes a slot, not decoded events), its strings and its
 *      live device allocations;
 *   2. watch_eval.c: each tick, the trainer's buffer analysed as a trace of its
 *      own (an_analyze over an an_source of the buffer): the iterations that
 *      completed since the last tick join its history, the buffer keeps only
 *      what the next analysis needs; then the alerts;
 *   3. cmd_watch.c: options, the loop, the text and JSON lines, the metrics.
 *
 * Memory: per trainer, the records since its last complete iteration (bounded
 * by WATCH_BUF_MAX_SLOTS), the per-iteration history (bounded: the first window
 * and the last max(window, WATCH_HIST_MIN) iterations), and the live allocations.
 */
#ifndef STEPPROF_WATCH_H
#define STEPPROF_WATCH_H

#include <stddef.h>
#include <stdint.h>

#include "analyze.h"
#include "hashmap.h"
#include "reader.h"
#include "watch_metrics.h"

#define WATCH_BUF_MAX_SLOTS (2u << 20) /* 64 MiB of records without an iteration: the older half goes */
#define WATCH_BATCH_SLOTS   (256u << 10) /* a backlog is analysed every 8 MiB of records read */
#define WATCH_HIST_MIN	    256	       /* iterations kept at least (the window, if larger) */
#define WATCH_MAX_SITES	    3

/* One complete iteration of a trainer. */
struct watch_iter {
	uint64_t index; /* 0 for the first the watcher saw complete */
	uint64_t start_ns, end_ns;
	uint64_t bd[AN_CAT__COUNT];
	uint64_t dev_peak[SP_MAX_DEVICES];
	uint32_t alloc_failed, flushes;
};

/* A live device allocation (for the sites that hold a growth). */
struct watch_alloc {
	uint64_t bytes, t_ns;
	uint32_t site; /* string id in the file */
	uint8_t device;
};

/* Thresholds of the alerts (`--threshold NAME=VALUE`), in watch_eval.c's table. */
#define WATCH_THRESHOLDS(X)                                                                                            \
	X(RUNAWAY_MIN_ITERS, "memory_runaway.min_iterations", 10, "iterations in the fit (>=)")                       \
	X(RUNAWAY_MIN_R2, "memory_runaway.min_r2", 0.8, "R^2 of the fit of per-iteration peak memory (>=)")           \
	X(RUNAWAY_MIN_BYTES, "memory_runaway.min_growth_bytes", 16777216, "growth over the fit in bytes (>=)")        \
	X(RUNAWAY_MIN_FRACTION, "memory_runaway.min_growth_fraction", 0.05,                                            \
	  "growth over the fit relative to its start (>=)")                                                            \
	X(MEMORY_HIGH_SHARE, "memory_high.share", 0.9, "live or peak device memory as a share of capacity (>=)")       \
	X(REGRESSION_SHARE, "step_regression.share", 0.2,                                                              \
	  "median step time of the window over the first window's, minus 1 (>=)")                                      \
	X(REGRESSION_MIN_S, "step_regression.min_seconds", 10,                                                         \
	  "the slowdown held for this long and a window of iterations (>=)")                                           \
	X(STALLED_INTERVALS, "stalled.intervals", 3, "intervals without a record while the process lives (>=)")        \
	X(ALLOC_FAILED_CLEAR, "alloc_failed.clear_intervals", 3, "intervals without a failure before it clears")

enum watch_threshold {
#define WATCH_T_ENUM(id, name, dflt, help) WATCH_T_##id,
	WATCH_THRESHOLDS(WATCH_T_ENUM)
#undef WATCH_T_ENUM
	    WATCH_T__COUNT
};
extern const char *const watch_threshold_name[WATCH_T__COUNT];
extern const char *const watch_threshold_help[WATCH_T__COUNT];
extern const double watch_threshold_default[WATCH_T__COUNT];

/* One trace file of the directory. */
struct watch_file {
	char *path;
	uint64_t dev, ino;
	int warned;   /* unreadable: said once, skipped until readable */
	int ended;    /* its process exited (clean end, or no longer alive) and it was read to its end */
	int have_hdr;
	int run_checked; /* its run id was compared with the others' (util_check_runs) */
	struct sp_file_header hdr;
	struct sp_reader_mark *marks;
	size_t nmarks;
	uint64_t records, overwritten, lost;
	uint64_t next_seq;	/* the ring's counter at the last read */
	struct sp_reader_follow follow; /* the chunks the next read indexes (sp_reader_follow) */
	uint64_t missed_chunks; /* chunks the ring reused before a tick read them */
	int missed_warned;
	uint64_t last_record_ns; /* newest end time read */
	uint64_t quiet_ticks;	 /* ticks in a row without a new record */
	struct hashmap strings;	 /* id -> char * */
	struct hashmap allocs;	 /* device pointer -> struct watch_alloc * */
	uint64_t dev_live[SP_MAX_DEVICES], dev_capacity[SP_MAX_DEVICES];
	uint32_t dev_seen;
	uint64_t launches, steps, alloc_failures;
	/* the record buffer: entries of [int32 tid][uint32 nslots][slots], in arrival order */
	uint8_t *buf;
	size_t buf_len, buf_cap;
	uint64_t buf_slots, buf_entries;
	uint64_t buf_last_begin; /* begin of the newest entry */
	int buf_unsorted;	 /* an entry begins before the one added before it */
	struct watch_trainer *tr; /* set once it is a trainer (watch_is_trainer) */
};

/* A trainer: a file whose process launched kernels, or marked steps (a loop on the CPU trains too). */
static inline int watch_is_trainer(const struct watch_file *f)
{
	return f->launches || f->steps;
}

/* What the watcher knows of a trainer. */

struct watch_trainer {
	int source_kind; /* enum an_source_kind of the last analysis */
	uint64_t iterations;
	uint64_t last_start_ns;	       /* start of the newest iteration in the history */
	struct watch_iter *first;      /* the first window's iterations (baseline) */
	size_t nfirst;
	struct watch_iter *hist;       /* the most recent ones, a ring of hist_cap */
	size_t nhist, hist_head, hist_cap;
	double step_sum_s, phase_s[AN_CAT__COUNT];
	uint64_t dev_peak[SP_MAX_DEVICES]; /* the highest per-iteration peak and live value so far */
	uint8_t alert[WATCH_A__COUNT];
	uint64_t alert_quiet[WATCH_A__COUNT]; /* ticks since the condition last held */
	char alert_msg[WATCH_A__COUNT][512];
	uint64_t failures_seen; /* alloc_failures at the last tick */
	uint64_t checked;	/* iterations already looked at for alloc_retry_storm */
	uint64_t slow_since_iter, slow_since_ns; /* step_regression: when the window's median went over (0: not) */
	/* the runaway projection, for the JSON */
	int runaway_dev;
	double runaway_slope, runaway_r2, runaway_full_iter, runaway_full_s;
	char sites[WATCH_MAX_SITES][256];
	uint64_t site_bytes[WATCH_MAX_SITES];
	int nsites;
};

struct watch_opts {
	double interval_s;
	unsigned window;
	double threshold[WATCH_T__COUNT];
	const char *step_regex;
	int merge_runs; /* follow files of different runs as one job (--merge-runs) */
};

struct watch {
	char *dir;
	struct watch_opts o;
	struct watch_file **files;
	size_t nfiles;
	int dir_seen;	  /* the directory existed at some tick */
	int dir_warned;	  /* "waiting for DIR" said */
	uint64_t tick;
	uint64_t now_ns;  /* CLOCK_MONOTONIC at the tick */
	char host[64];
	int have_run;	  /* run_id is the run of the first file read */
	char run_id[SP_RUN_ID_SIZE];
};

/* ---- watch_follow.c ---- */
int watch_init(struct watch *w, const char *dir, const struct watch_opts *o);
/*
 * List the directory, read what is new in every file; 0, -1 when out of memory,
 * or 1 (its line printed) when the directory holds files of more than one run
 * and o->merge_runs is not set.
 */
int watch_poll(struct watch *w);
/* Every process of the job has ended (and at least one file was seen). */
int watch_all_ended(const struct watch *w);
void watch_free(struct watch *w);
/* The string of id in f, NULL when unknown. */
const char *watch_string(const struct watch_file *f, uint32_t id);
/* An an_source over f's record buffer (valid until the next watch_poll). */
void watch_buffer_source(struct watch_file *f, struct an_source *src);
/* Drop the buffer's records that begin before t (keeps its order). */
void watch_buffer_trim(struct watch_file *f, uint64_t t);

/* ---- watch_eval.c ---- */
struct watch_event {
	const struct watch_file *f;
	int alert; /* enum watch_alert */
	int raised; /* 1 raised, 0 cleared */
	const char *msg;
};
/* Analyse f's buffer: its complete iterations into the history, the buffer trimmed (f a trainer). */
int watch_analyse(struct watch *w, struct watch_file *f);
/* Analyse each trainer's new records and update the alerts; *ev (malloc'd) the alerts raised or cleared. */
int watch_eval(struct watch *w, struct watch_event **ev, size_t *nev);
void watch_trainer_free(struct watch_trainer *t);
/* The last n iterations of the history (n <= window), oldest first, into out (caller's, n entries). */
size_t watch_recent(const struct watch_trainer *t, struct watch_iter *out, size_t n);
/* Quantile q of the wall times of the last `window` iterations; NaN when none. */
double watch_step_quantile(const struct watch_trainer *t, unsigned window, double q);
/* Median wall time of the first window; NaN when it is not complete. */
double watch_first_median(const struct watch_trainer *t, unsigned window);
/* "name=value" into o->threshold; 0, or -1 with err. */
int watch_set_threshold(struct watch_opts *o, const char *arg, char *err, size_t errlen);

#endif /* STEPPROF_WATCH_H */
