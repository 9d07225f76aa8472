/*
 * findings.h - the findings of docs/definitions.md (findings.def lists them with their
 * thresholds): what the streaming pass collects for them beyond the per-iteration
 * counters (bounded "top N" tables, allocation failures, flushes, live allocations
 * by call site), and the evaluation that turns it into findings with severity,
 * iterations, evidence, call sites and advice.
 */
#ifndef STEPPROF_FINDINGS_H
#define STEPPROF_FINDINGS_H

#include <stddef.h>
#include <stdint.h>

#include "analyze.h"

/*
 * A bounded table of the most frequent keys (space-saving: when full, the least
 * counted entry is replaced and the newcomer inherits its count, so heavy hitters
 * are kept and counts are upper bounds).
 */
#define AN_TOP_CAP 64
struct an_top_entry {
	uint64_t hash, count, bytes, ns;
	char key[256];
};
struct an_top {
	struct an_top_entry e[AN_TOP_CAP];
	size_t n;
};
void an_top_add(struct an_top *t, const char *key, uint64_t count, uint64_t bytes, uint64_t ns);
/* Sort by count (by bytes when by_bytes) descending. */
void an_top_sort(struct an_top *t, int by_bytes);

#define AN_MAX_EVENTS 16

struct an_alloc_failure {
	long iteration;
	uint64_t ns, request, free, total;
	char site[256];
};

struct an_flush {
	long iteration;
	uint64_t ns, frees, freed_bytes, live_before;
	int after_failure;
};

/* Run-level evidence gathered by the streaming pass. */
struct an_collect {
	struct an_top dirs;		       /* opens by directory, across the process tree */
	struct an_top copy_sites;	       /* pageable copies by call site */
	struct an_top live_sites;	       /* device bytes still live at the end, by allocation site (trainer) */
	uint32_t fsize_hist[AN_FSIZE_BUCKETS]; /* bytes per opened file, whole run */
	uint64_t fsize_sum[AN_FSIZE_BUCKETS];  /* their bytes, per bucket (the evidence's median) */
	struct an_alloc_failure fail[AN_MAX_EVENTS];
	size_t nfail, nfail_total, nfail_with_free;
	struct an_flush flush[AN_MAX_EVENTS];
	size_t nflush, nflush_total;
	double link_gbps; /* PCIe bandwidth of the trainer's device from the header, 0 unknown */
};

/* Bucket of n bytes in AN_FSIZE_BUCKETS log2 buckets. */
unsigned an_fsize_bucket(uint64_t n);

/* Add a number or a string to a finding's evidence (ignored when it is full). */
void an_evidence_num(struct an_result_finding *f, const char *key, double v);
void an_evidence_str(struct an_result_finding *f, const char *key, const char *v);

/*
 * memory_growth's severity and its evidence from the line fitted to the device
 * peaks (slope, r2, growth, fitted start and end bytes): where the line meets the
 * device's capacity after x_last, the last point's iteration, sets the severity.
 * Shared by the raw iterations' fit and the summaries' (summary.c).
 */
void an_growth_evidence(struct an_result_finding *f, const double *th, double slope, double r2, double growth,
			double start, double end, double x_last, uint64_t capacity);

/* Evaluate every finding; fills a->fnd / a->nfnd. 0, or -1 when out of memory. */
int an_findings_eval(struct an_analysis *a, const struct an_collect *c);

/*
 * Put the findings in the order to fix them: the most severe first, then the
 * one that costs the most wall time (cost_ns), then findings.def's order.
 */
void an_findings_order(struct an_analysis *a);

#endif /* STEPPROF_FINDINGS_H */
