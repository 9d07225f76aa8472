/*
 * rank_summary.h - the map-reduce path of a job on many machines: each node's
 * `stepprof analyze --rank-summary -o FILE DIR` writes what its ranks' analyses
 * found (one row per rank: the per-rank table's numbers) and their
 * collectives as found (the straggler matcher's units); `stepprof merge
 * FILE...` reads them back into one analysis holding the rows and the units,
 * and matches the units across all ranks as one `analyze` of every directory
 * would (docs/multi-node.md).
 *
 * The file is text, one record per line (docs/multi-node.md, "The rank
 * summary format"): a version line, the category names, then `rank` and
 * `call` lines. Host names are percent-encoded.
 */
#ifndef STEPPROF_RANK_SUMMARY_H
#define STEPPROF_RANK_SUMMARY_H

#include <stdio.h>

#include "analyze.h"

#define RS_MAGIC "stepprof-rank-summary 1"

/* Write a's ranks[] and its NCCL units: 0, or -1 on a write error. */
int rs_write(FILE *f, const struct an_analysis *a);

/*
 * Add the ranks and units of one summary file (name: for messages) to a, which
 * starts zeroed (an_options set in a->opt): 0, or -1 with a one-line reason in
 * err ("FILE:LINE: what").
 */
int rs_read(FILE *f, const char *name, struct an_analysis *a, char *err, size_t errlen);

/*
 * After the last rs_read: the ranks sorted (rank, then pid), the lowest selected,
 * the units matched across ranks and hosts, straggler_rank evaluated. 0, or -1
 * when out of memory.
 */
int rs_finish(struct an_analysis *a);

#endif /* STEPPROF_RANK_SUMMARY_H */
