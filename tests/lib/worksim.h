/*
 * worksim.h - a tiny workload simulator for the analysis's unit tests
 * (test_analyze.c, test_findings.c): a training thread with a GPU stream
 * (launches, copies, syncs, input waits), its records and GPU spans, in memory
 * (struct an_memsrc), the way the hooks would have written them; the analysis
 * of what it recorded, and a finding of that analysis.
 */
#ifndef STEPPROF_WORKSIM_H
#define STEPPROF_WORKSIM_H

#include <stddef.h>
#include <stdint.h>

#include "analyze.h"

#define US   1000ull
#define PID  100
#define TID  101
#define WPID 200
#define MiB  (1024ull * 1024)

struct sim {
	struct an_memsrc m;
	uint64_t t, gpu; /* host clock of the training thread; when the stream is free */
	uint32_t op, kname, kname2;
	double jitter;
	unsigned seed;
};

void sim_init(struct sim *s);
uint64_t J(struct sim *s, uint64_t d);
struct sp_event *add(struct sim *s, unsigned kind, unsigned api, uint64_t b, uint64_t e);
void sim_input(struct sim *s, uint64_t dur);
void sim_copy(struct sim *s, unsigned dir, uint64_t bytes, uint64_t gpu_dur, int pageable);
void sim_kernel(struct sim *s, uint32_t name, uint64_t dur);
void sim_sync(struct sim *s);
void sim_step(struct sim *s, uint64_t dur);
void sim_compute(struct sim *s, uint64_t dur);
void sim_iteration(struct sim *s, int markers);
void sim_batch(struct sim *s);
void sim_fork_worker(struct sim *s);
void worker_read_file(struct sim *s, uint32_t path, int fd, uint64_t bytes, uint64_t t0, uint64_t t1, uint64_t t2,
		      uint64_t t3);
void alloc_ev(struct sim *s, unsigned kind, uint64_t dptr, uint64_t bytes, uint64_t *live);

void run(struct sim *s, const struct an_options *o, struct an_analysis *a);
void run_free(struct sim *s, const struct an_options *o, struct an_analysis *a);
const struct an_result_finding *find(const struct an_analysis *a, int kind, const char *signal);

#endif
