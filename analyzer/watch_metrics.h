/*
 * watch_metrics.h - what `stepprof watch` exposes at each tick, independent of
 * how it was computed: the snapshot that the Prometheus exposition
 * (watch_prom.c: GET /metrics and the node_exporter textfile) and the watcher's
 * text and JSON lines are written from (docs/watch.md).
 *
 * Labels are bounded: job, host, rank, device, phase, state, alert, quantile.
 * Never a pid or a step value.
 */
#ifndef STEPPROF_WATCH_METRICS_H
#define STEPPROF_WATCH_METRICS_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "stepprof/trace.h" /* SP_MAX_DEVICES */

/* The alerts, in their documented order. */
#define WATCH_ALERTS(X)                                                                                                \
	X(MEMORY_RUNAWAY, "memory_runaway")                                                                            \
	X(MEMORY_HIGH, "memory_high")                                                                                  \
	X(ALLOC_FAILED, "alloc_failed")                                                                                \
	X(ALLOC_RETRY_STORM, "alloc_retry_storm")                                                                      \
	X(STEP_REGRESSION, "step_regression")                                                                          \
	X(STALLED, "stalled")

enum watch_alert {
#define WATCH_ALERT_ENUM(id, name) WATCH_A_##id,
	WATCH_ALERTS(WATCH_ALERT_ENUM)
#undef WATCH_ALERT_ENUM
	    WATCH_A__COUNT
};
extern const char *const watch_alert_name[WATCH_A__COUNT];

/* The seven phases of the breakdown, in categories.def's order (input, h2d, compute, comm, d2h, sync, other). */
#define WATCH_PHASES 7

/* The step-time quantiles of the window that a summary exposes. */
#define WATCH_NQ 3
extern const double watch_quantiles[WATCH_NQ]; /* 0.5, 0.9, 0.99 */

/* One trainer process (a rank). */
struct watch_rank_metrics {
	int rank;			   /* the RANK of its header, 0 when it has none */
	uint64_t iterations;		   /* complete iterations so far (a counter) */
	double step_seconds_sum;	   /* sum of those iterations' wall times (the summary's _sum) */
	double step_quantile[WATCH_NQ];	   /* over the window; NaN when no iteration yet */
	double phase_seconds[WATCH_PHASES]; /* totals over all iterations (counters) */
	uint32_t dev_mask;		   /* bit d: device d is described below */
	uint64_t dev_live[SP_MAX_DEVICES], dev_peak[SP_MAX_DEVICES], dev_capacity[SP_MAX_DEVICES]; /* capacity 0: unknown */
	uint64_t lost_records;	     /* a counter */
	uint8_t alert[WATCH_A__COUNT]; /* 1 while the alert is active */
};

struct watch_metrics {
	const char *job;  /* the job's label (the trace directory's base name) */
	const char *host; /* the host name of the trace files */
	const char *version;
	size_t nranks;
	const struct watch_rank_metrics *ranks;
	double scrape_lag_seconds; /* the oldest a record can be when a tick reports it: interval + the tick's own time (a gauge) */
};

/* The text exposition format 0.0.4 of m into f. 0, or -1 on a write error. */
int watch_prom_write(FILE *f, const struct watch_metrics *m);

/*
 * The same into path for node_exporter's textfile collector, atomically: a
 * temporary file in path's directory, then rename(2). 0, or -1 with a one-line
 * reason in err.
 */
int watch_prom_file(const char *path, const struct watch_metrics *m, char *err, size_t errlen);

/*
 * A small HTTP/1.x server for GET /metrics, single-threaded: the watcher serves
 * between ticks. Binds addr ("127.0.0.1:9464", "[::1]:9464", ":9464" for every
 * address, which the caller must have asked for explicitly). Bounded: at most
 * WATCH_HTTP_MAX_CONN connections at once, requests of at most 8 KiB, a
 * connection idle for 5 s is closed. Any path but /metrics is 404, any method
 * but GET and HEAD 405.
 */
#define WATCH_HTTP_MAX_CONN 16
struct watch_httpd;
int watch_httpd_open(const char *addr, struct watch_httpd **out, char *err, size_t errlen);
/* The port actually bound (addr may say port 0: any). */
int watch_httpd_port(const struct watch_httpd *h);
/*
 * Serve requests for up to timeout_ms (returns earlier on a signal: EINTR),
 * answering /metrics with body[0..len). 0, or -1 on a fatal error of the
 * listening socket (a client's error is that client's only).
 */
int watch_httpd_serve(struct watch_httpd *h, int timeout_ms, const char *body, size_t len);
void watch_httpd_close(struct watch_httpd *h);

#endif /* STEPPROF_WATCH_METRICS_H */
