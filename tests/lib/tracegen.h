/*
 * tracegen.h - build trace files (format v1, include/stepprof/trace.h) in tests,
 * without the preload: the ground truth for the reader, `stepprof info/dump` and
 * the analyzer's unit tests is what the test asked tracegen to write.
 *
 * It lays records out the way the recorder does: interned strings in the keep
 * area; each (pid, tid) appends to its current ring chunk and takes the next
 * chunk (next sequence number) when it is full; with a fixed ring
 * (opts.ring_chunks > 0) chunk seq goes to ring position seq % ring_chunks and
 * the chunk it replaces is counted in the header as overwritten.
 *
 *   struct sp_tg *g = sp_tg_create(path, 4242, 1, 0);
 *   uint32_t step = sp_tg_intern(g, "train_step");
 *   SP_TG_ADD(g, 4243, SP_K_RANGE, SP_API_nvtx, 1000, 5000, { SP_F_NAME, step }, { SP_F_VALUE, 1 });
 *   SP_TG_ADD(g, 4243, SP_K_STEP, SP_API_stepprof_step, 6000, 6000, { SP_F_VALUE, 2 });
 *   sp_tg_header(g)->lost_records = 3;     // any header field, before finish
 *   sp_tg_finish(g);                         // writes path, frees g; 0 or -1
 *
 * Timestamps are whatever the test chooses (CLOCK_MONOTONIC-like ns); end < begin
 * is clamped to begin. Fields a kind does not carry are ignored (kinds.def).
 * Nothing here is thread-safe; everything aborts on malloc failure.
 */
#ifndef STEPPROF_TRACEGEN_H
#define STEPPROF_TRACEGEN_H

#include <stddef.h>
#include <stdint.h>

#include "stepprof/trace.h"

struct sp_tg;

struct sp_tg_opts {
	int32_t pid, ppid, rank; /* rank -1: not set */
	const char *host;	 /* NULL: "testhost" */
	const char *cmdline;	 /* NULL: "python train.py" */
	uint32_t chunk_size;	 /* bytes per ring chunk, multiple of 32, >= 96; 0: 65536 */
	uint32_t ring_chunks;	 /* 0: grow (never overwrite); else a fixed ring that wraps */
	uint64_t keep_slots;	 /* 0: 4096 */
	uint64_t start_mono_ns;	 /* 0: 1000000000 */
	int leave_active;	 /* 1: chunks still current at finish stay ACTIVE (a crash) */
};

/* Defaults as in struct sp_tg_opts. */
struct sp_tg *sp_tg_create(const char *path, int32_t pid, int32_t ppid, int32_t rank);
struct sp_tg *sp_tg_create_opts(const char *path, const struct sp_tg_opts *opts);

/* The header being built: edit any field (features, devices, counters...) before finish. */
struct sp_file_header *sp_tg_header(struct sp_tg *g);

/* Intern s (deduplicated, clipped to SP_MAX_STRING); returns its id (>= 1). */
uint32_t sp_tg_intern(struct sp_tg *g, const char *s);
/* A string with an id of the test's choosing (also to write duplicates or odd ids). */
void sp_tg_string(struct sp_tg *g, uint32_t id, const char *s, unsigned len);

/* One record on (pid of the file, tid); f[] indexed by enum sp_field, may be NULL. */
void sp_tg_addv(struct sp_tg *g, int32_t tid, unsigned kind, unsigned api, uint64_t begin_ns, uint64_t end_ns,
		const uint64_t *f);
/* Same from a decoded-style event: ev->pid/tid choose the stream (several pids: eBPF files). */
void sp_tg_add_event(struct sp_tg *g, const struct sp_event *ev);

struct sp_tg_field {
	int field; /* enum sp_field; -1 ends the list, -2 is skipped */
	uint64_t value;
};
void sp_tg_addf(struct sp_tg *g, int32_t tid, unsigned kind, unsigned api, uint64_t begin_ns, uint64_t end_ns,
		const struct sp_tg_field *fields);
/* SP_TG_ADD(g, tid, kind, api, begin, end, {SP_F_X, v}, ...): fields by name, any order. */
#define SP_TG_ADD(g, tid, kind, api, b, e, ...)                                                                        \
	sp_tg_addf((g), (tid), (kind), (api), (b), (e), (const struct sp_tg_field[]){{-2, 0}, ##__VA_ARGS__, {-1, 0}})

/* A non-string record in the keep area (summaries): never overwritten. */
void sp_tg_add_keep(struct sp_tg *g, unsigned kind, unsigned api, uint64_t begin_ns, uint64_t end_ns,
		    const uint64_t *f);

/* Thread exit: its current chunk is CLOSED, its next record starts a new chunk. */
void sp_tg_close_thread(struct sp_tg *g, int32_t pid, int32_t tid);

/* What has been added so far (ring records, strings excluded) and what the ring overwrote. */
uint64_t sp_tg_records(const struct sp_tg *g);
uint64_t sp_tg_overwritten(const struct sp_tg *g);

/*
 * Lay the file out. sp_tg_finish writes it to the path given at create (mode 0600,
 * replaced if present) and frees g: 0, or -1 with errno. sp_tg_image returns the
 * file's bytes (malloc'd, *len set) and frees g, for tests that corrupt in memory.
 */
int sp_tg_finish(struct sp_tg *g);
uint8_t *sp_tg_image(struct sp_tg *g, size_t *len);

#endif /* STEPPROF_TRACEGEN_H */
