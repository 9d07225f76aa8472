/*
 * alert.h - the in-job alert of libstepprof.so: one `stepprof:` line on the
 * job's own stderr when its device memory runs away, while the job still runs
 * (before it dies of an out-of-memory error), with no watcher process.
 *
 * Fed by the summaries (recorder.c, section 6): at each summary window's end,
 * the window's peak device bytes of every device that ever held memory. So it
 * costs nothing on the wrappers' path, and nothing at all to a process that
 * never allocates device memory (no device in the summaries, no call here).
 * STEPPROF_ALERTS=0 (or STEPPROF_QUIET=1) turns it off; STEPPROF_SUMMARY_MS=0,
 * which turns the summaries off, turns it off too.
 *
 * The rule (docs/recorder.md, "The in-job alert"), per device: a least-squares
 * fit of the last SP_ALERT_POINTS peaks against time with
 *   slope > 0, R^2 >= SP_ALERT_MIN_R2,
 *   the peak higher than the one before in at least half of the steps,
 *   growth over the fit (slope x its span) >= SP_ALERT_MIN_BYTES and
 *   >= SP_ALERT_MIN_SHARE of the device's capacity.
 * The fit is made at several time scales: the windows themselves (level 0),
 * and groups of SP_ALERT_GROUP points of a level (their highest peak) for the
 * next, so that a slow leak is fitted over a span long enough for its growth
 * to count (with 1 s windows: 9 s, 72 s, 9.6 min, 77 min, 10 h).
 * The line gives the rate, the span of the fit, the last peak, the capacity and
 * the time until the fitted peak reaches the capacity, as a duration and a
 * time of day. Without a known capacity there is no line.
 *
 * Edge-triggered, at most SP_ALERT_MAX_LINES lines per device and process: once
 * raised, the alert clears only when a fit at the level that raised it shows
 * less than half the minimum growth (the memory stopped growing), and may then
 * be raised once more.
 */
#ifndef STEPPROF_ALERT_H
#define STEPPROF_ALERT_H

#include <stddef.h>
#include <stdint.h>

#include "recorder.h"

#define SP_ALERT_POINTS	   10 /* points of one fit */
#define SP_ALERT_GROUP	   8  /* points of a level that make one point of the next */
#define SP_ALERT_LEVELS	   5
#define SP_ALERT_MIN_R2	   0.9
#define SP_ALERT_MIN_BYTES (32ull << 20)
#define SP_ALERT_MIN_SHARE 0.05
#define SP_ALERT_MAX_LINES 2

/* One point: a window's end (CLOCK_MONOTONIC ns) and the highest device bytes within it. */
struct sp_alert_pt {
	uint64_t t_ns;
	uint64_t peak;
};

/* The least-squares line of peak (bytes) against time (s) over n points. */
struct sp_alert_fit {
	double slope;	  /* bytes per second */
	double r2;	  /* coefficient of determination */
	double growth;	  /* slope x span: bytes gained over the fit */
	double end;	  /* the line's value at the last point, bytes */
	uint64_t span_ns; /* last point's time - first's */
	unsigned rises;	  /* steps whose peak is above the one before */
	unsigned n;
};

/* Fit p[0..n) (oldest first): 0, or -1 when time or the peaks do not vary (no line to fit). */
SP_HIDDEN int sp_alert_fit(const struct sp_alert_pt *p, unsigned n, struct sp_alert_fit *f);

/* 1 when the fit is a runaway on a device of `capacity` bytes (0: unknown, never a runaway). */
SP_HIDDEN int sp_alert_runaway(const struct sp_alert_fit *f, uint64_t capacity);

/* 1 when a fit shows the memory has stopped growing: a raised alert clears. */
SP_HIDDEN int sp_alert_cleared(const struct sp_alert_fit *f, uint64_t capacity);

/* What one line says. */
struct sp_alert_msg {
	unsigned dev;
	double rate;	   /* bytes per second */
	uint64_t span_ns;  /* of the fit */
	uint64_t peak;	   /* the last window's peak */
	uint64_t capacity; /* > 0 */
	double to_full_s;  /* seconds from now until full (<= 0: full now) */
	int64_t now_s;	   /* CLOCK_REALTIME seconds now (< 0: no time of day) */
	long gmtoff;	   /* local time's offset from UTC, seconds */
	const char *zone;  /* local time's abbreviation, "" when unknown */
	const char *dir;   /* the trace directory */
	int sites;	   /* call sites are recorded (STEPPROF_SITES) */
};

/*
 * The line, "stepprof: ...\n", into buf (NUL-terminated, cut to cap); returns
 * its length. Integer formatting only (no float conversion, no malloc).
 */
SP_HIDDEN size_t sp_alert_format(char *buf, size_t cap, const struct sp_alert_msg *m);

/*
 * The recorder's side. Called by the one thread that writes a summary (under
 * the summaries' busy flag: one caller at a time), for each device in it:
 * dev's peak over the window ending at t_end_ns, its capacity (0: unknown),
 * now (CLOCK_MONOTONIC ns) and the trace directory. Writes the line when the
 * rule holds; returns 1 then, else 0.
 */
SP_HIDDEN int sp_alert_window(unsigned dev, uint64_t t_end_ns, uint64_t peak, uint64_t capacity, uint64_t now_ns,
			      const char *dir);

/* Forget every device's history and lines (process start, a forked child's own start). */
SP_HIDDEN void sp_alert_reset(void);

/*
 * Learn the local time zone (offset and abbreviation) for the line's time of
 * day: localtime_r, which may read /etc/localtime and takes glibc's lock, so
 * never on the summaries' path (which may run in a signal handler). Called
 * once, where a device allocation is recorded (cuda_gpu.c's header fill): a
 * CUDA call's context, never a handler's, and only in processes that use a
 * device. Without it, the time of day is UTC.
 */
SP_HIDDEN void sp_alert_clock_prepare(void);

#endif /* STEPPROF_ALERT_H */
