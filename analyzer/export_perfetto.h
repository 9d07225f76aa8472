/*
 * export_perfetto.h - stepprof traces as one Chrome Trace Event Format JSON
 * document, the format ui.perfetto.dev and chrome://tracing open
 * (`stepprof export`, docs/export.md).
 *
 * One process per traced pid (named by its command line and rank), one thread
 * track per tid with an X slice for every call, instants for marks and steps,
 * NVTX ranges as slices, a "GPU <device>" track per process with the GPU-side
 * span of each op joined to its launch/copy by op id (and a flow arrow from the
 * call), and a counter of live device bytes.
 *
 * Streaming: records are written as the reader returns them, GPU slices a
 * little later (the modelled spans of untimed launches are placed once the
 * records have moved past them, and every slice of a track is written in begin
 * order); memory is the reader's, a fixed window of recent GPU ops
 * (EXPORT_OP_WINDOW), the GPU model's and the slices of that lag (a few
 * seconds, or EXPORT_MODEL_HELD ops when they come faster, as long as the GPU
 * spans' lateness allows; EXPORT_PENDING slices at most), and tables whose size
 * follows the number of processes and threads, never the trace's length.
 */
#ifndef STEPPROF_EXPORT_PERFETTO_H
#define STEPPROF_EXPORT_PERFETTO_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

/* Ops remembered per file while waiting for their gpu_span (a power of two). */
#define EXPORT_OP_WINDOW (1u << 17)
/* GPU slices held back to be written in begin order (past it, the oldest half is written). */
#define EXPORT_PENDING (1u << 15)
/* Processes of one file whose untimed launches are modelled (more: shown measured only). */
#define EXPORT_MODELS 8u
/* The lag behind the newest record at which launches are modelled and slices written, at the least. */
#define EXPORT_MODEL_LAG_NS 2000000000ull
/* GPU ops and slices taken in since the last resolution past which the lag is the lateness seen only. */
#define EXPORT_MODEL_HELD (1u << 14)

struct export_stats {
	uint64_t files;	       /* files read (at least partly) */
	uint64_t records;      /* records read */
	uint64_t events;       /* trace events written (metadata included) */
	uint64_t gpu_spans;    /* GPU slices written */
	uint64_t gpu_unjoined; /* of which no launch/copy/memset record was found for the op */
	uint64_t gpu_modelled; /* of which modelled: launches without timing events (gpu_model.h) */
	uint64_t iterations;   /* slices of the iterations track */
	uint64_t findings;     /* findings written as instants */
	uint64_t ts_zero_ns;   /* CLOCK_MONOTONIC (of the first host) of ts 0 */
};

/*
 * What to export. A window keeps the records that overlap [from_ns, to_ns], in
 * nanoseconds of the document's own timeline (ts 0 = the earliest file's start).
 */
struct export_opts {
	int pretty;		/* indent the document (tests, reading by eye) */
	int64_t from_ns, to_ns; /* INT64_MIN / INT64_MAX: no bound */
	const char *out_name;	/* the output's name in its write error line (NULL: none given) */
};

/*
 * Read the n trace files and write the JSON document to out. Problems of a file
 * are printed as `stepprof: <file>: <what>` (util.h), a write error as
 * `stepprof: <out_name>: cannot write: <reason>` (stdout: util_stdout_failed's
 * line), once; the return value is the worst exit code (SP_EXIT_*). When no file can be opened nothing is written and
 * SP_EXIT_INPUT is returned. opts NULL: everything, compact; st may be NULL.
 */
int export_perfetto(char *const *paths, size_t n, FILE *out, const struct export_opts *opts, struct export_stats *st);

#endif /* STEPPROF_EXPORT_PERFETTO_H */
