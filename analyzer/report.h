/*
 * report.h - the outputs of `stepprof analyze`: the text report for people and
 * the JSON document (schema stepprof.analysis/2, or /1 for older consumers;
 * docs/analysis-json.md).
 */
#ifndef STEPPROF_REPORT_H
#define STEPPROF_REPORT_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "analyze.h"

/*
 * The bottleneck of the run (docs/definitions.md): compute when it takes at least
 * compute_share of the wall time (threshold bottleneck.compute_share, findings.def),
 * else the largest other category; "none" without iterations.
 */
const char *report_bottleneck_of(uint64_t nit, uint64_t wall_total, const uint64_t *bd_total, double compute_share);
/* report_bottleneck_of for the analysis, or one of its ranks (x), with a's threshold. */
const char *report_bottleneck(const struct an_analysis *a);
const char *report_rank_bottleneck(const struct an_analysis *a, const struct an_rank *x);
/*
 * One clause saying what the bottleneck `b` (report_bottleneck's word) means; the
 * compute clause states a's threshold, written into buf (len bytes).
 */
/* The per-iteration table as CSV (analyze --csv): a header line, one row per iteration; 0 or -1. */
int report_csv(FILE *f, const struct an_analysis *a);
/* Said when no process made a CUDA call (a->cuda_calls 0): what it suggests. */
extern const char report_no_cuda[];
const char *report_bottleneck_sentence(const struct an_analysis *a, const char *b, char *buf, size_t len);
/* part / whole, 0 when whole is 0: a category's share of a wall time. */
double report_fraction(uint64_t part, uint64_t whole);
/* Share of the run's wall time in category c. */
double report_share(const struct an_analysis *a, int c);
/* The input split's parts in words, for the text and HTML reports (an_split_name's order). */
extern const char *const report_split_words[AN_SPLIT__COUNT];
/* The share of the trainer's kernel GPU time that was modelled, not measured (0 when none). */
double report_modelled_share(const struct an_analysis *a);
/* Quantile q over the iterations of category c (AN_CAT__COUNT: the wall time). */
uint64_t report_cat_quantile(const struct an_analysis *a, int c, double q);

/*
 * The ranks that the per-rank table of both reports names: the selected one,
 * and the slowest and fastest by median wall among those with iterations (NULL
 * where none). spread: there are two to compare, the slowest `over` percent
 * above the fastest (below 10%, the spread of one rank's own iterations: no
 * rank stands out).
 */
struct report_rank_pick {
	const struct an_rank *sel, *slow, *fast;
	int spread;
	double over;
};
void report_rank_pick(const struct an_analysis *a, struct report_rank_pick *p);

/*
 * Whether dest (an output file: --html, export's -o) is one of the n trace files
 * read (the same file, by device and inode, whatever the spelling or a link): then
 * one line naming it and 1; writing there would replace a trace, the only copy of a
 * job's record, with the report on it. 0 otherwise (stdout "-", a new file, a device).
 */
int report_output_is_input(const char *verb, const char *option, const char *dest, char *const *paths,
			   size_t n);

/* 0, or -1 on a write error. all: every iteration in the text table (else first and last 10). */
int report_text(FILE *f, const struct an_analysis *a, int all);
/* The JSON document of schema REPORT_SCHEMA (2). */
int report_json(FILE *f, const struct an_analysis *a);
/* The job of `stepprof merge` (rank summaries): findings, ranks[], job, stragglers; 0 or -1. */
int report_job_json(FILE *f, const struct an_analysis *a);
int report_job_text(FILE *f, const struct an_analysis *a);
/*
 * The JSON document of schema 1 or 2 (analyze --schema N). Schema 1 is the
 * document before the comm category: no comm keys, no comm_overlapped_ns,
 * communication kernels in compute and a sync waiting for one in sync
 * (an_iter.bd1); 2 adds them.
 */
#define REPORT_SCHEMA 2
int report_json_schema(FILE *f, const struct an_analysis *a, int schema);

#endif /* STEPPROF_REPORT_H */
