/*
 * merge.h - every trace file of a run (one per process, plus the eBPF collector's
 * file of many processes) as one stream of records merged by begin time, on the
 * one clock they share (CLOCK_MONOTONIC), for the analysis (struct an_source).
 *
 * Memory: one streaming reader per file (bounded, see reader.h) and a heap of one
 * pending record per file. Rewinding reopens the readers.
 */
#ifndef STEPPROF_MERGE_H
#define STEPPROF_MERGE_H

#include <stddef.h>

#include "analyze.h"
#include "reader.h"

struct merge;

/*
 * Open every path (trace files). On failure returns NULL after printing one
 * "stepprof: <file>: <reason>" line per file that cannot be read; a file that
 * never got its header (its process died creating it) is only reported and left
 * out (merge_report_damage then returns SP_EXIT_DAMAGED). Processes of several
 * files sharing a pid (other hosts, pid namespaces) are renumbered apart, a
 * pid space per host, and one per later process of a pid already seen on its host
 * (docs/trace-format.md, section 8).
 */
struct merge *merge_open(char *const *paths, size_t n);

/*
 * The numbering merge_open gives: pid_max is at most 2^22, so pid space k adds
 * k << MERGE_PID_SHIFT to the pids from 1 to MERGE_PID_SPAN - 1 (ppids and fork
 * records' child pids alike); at most MERGE_PID_SPACES keep an int32 positive.
 * merge_pid_spaces computes it for n headers as the files wrote them, in the order
 * of the file list (unreadable files left out): off[i] is file i's. `stepprof
 * export` numbers its tracks with it, so that both tell the same processes apart.
 * 0, or -1 when out of memory (every off[i] 0: pids as written).
 */
#define MERGE_PID_SHIFT	 22
#define MERGE_PID_SPAN	 (1 << MERGE_PID_SHIFT)
#define MERGE_PID_SPACES 512
int merge_pid_spaces(const struct sp_file_header *const *hdr, size_t n, int32_t *off);
void merge_source(struct merge *m, struct an_source *src);
/*
 * After a full pass: print the damage line of each truncated or corrupt file
 * (once) and return the worst exit code (util.h: SP_EXIT_OK or SP_EXIT_DAMAGED).
 */
int merge_report_damage(struct merge *m);
void merge_close(struct merge *m);

#endif /* STEPPROF_MERGE_H */
