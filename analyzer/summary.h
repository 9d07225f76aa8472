/*
 * summary.h - the per-window summaries of a trace (format 1.1: SUMMARY and
 * SUMMARY_DEVICE records in the keep area, never overwritten) in the analysis:
 * when the trainer's ring wrapped and its raw records no longer cover the run,
 * memory_growth and the run's device memory peak are taken over the whole run
 * from the summaries (docs/definitions.md, "Summaries").
 */
#ifndef STEPPROF_SUMMARY_H
#define STEPPROF_SUMMARY_H

#include <stddef.h>
#include <stdint.h>

#include "analyze.h"
#include "findings.h"

/* One window of one process: its totals at the end and its device peak (all devices). */
struct sm_window {
	uint64_t begin_ns, end_ns, steps;
	uint64_t peak_bytes; /* sum over devices of each device's peak in the window */
	uint64_t live_bytes; /* sum over devices of the live bytes at the window's end */
	int has_device;	     /* a SUMMARY_DEVICE record came with it */
};

/*
 * The windows of the file whose header is h, if a reader of it is open
 * (sp_reader_find). Returns the count, *out malloc'd (NULL when 0).
 */
size_t sm_windows(const struct sp_file_header *h, struct sm_window **out);

/*
 * After the findings (an_findings_eval): when the trainer's file lost records to
 * the ring and its summaries span the iterations it lost, raise the run's device
 * peak to the summaries' and, when the whole-run fit meets memory_growth's
 * thresholds, replace the finding by the whole-run one (evidence "history":
 * "summaries"). 0, or -1 when out of memory.
 */
int sm_apply(struct an_source *src, struct an_analysis *a, const struct an_collect *c);

#endif /* STEPPROF_SUMMARY_H */
