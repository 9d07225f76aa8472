/*
 * reader.h - streaming reader of one stepprof trace file.
 *
 * Memory is bounded and independent of the file's length: the reader keeps the
 * interned strings (bounded by the keep area), an index of the ring's chunks
 * (at most 16 bytes per 64 KiB chunk: 390 KB for a 1.6 GB trace of 50 M
 * records) and one chunk buffer per thread being merged.
 * Every byte is untrusted: a file cut short is read up to its last whole record
 * and flagged truncated; slots that do not decode are skipped and counted as
 * corrupt; a foreign file or a newer major version is refused at open with a
 * one-line reason.
 *
 * Order: each thread's records come in the order the thread wrote them (a record
 * is written when its call returns, so a nested call precedes its caller); the
 * threads are merged by begin timestamp.
 */
#ifndef STEPPROF_READER_H
#define STEPPROF_READER_H

#include <stddef.h>
#include <stdint.h>

#include "stepprof/trace.h"

struct sp_reader;

struct sp_reader_stats {
	uint64_t records;             /* records returned by sp_reader_next (strings excluded) */
	uint64_t slots;               /* 32-byte slots those records take (a GPU_SPAN2's two spans: one) */
	uint64_t by_kind[SP_K__COUNT];
	uint64_t strings;
	uint64_t lost;                /* header lost_records + LOST records' counts */
	uint64_t overwritten;         /* header overwritten_records */
	uint64_t corrupt_slots;       /* slots skipped because they did not decode */
	uint32_t threads;             /* distinct (pid, tid) with records */
	uint64_t reused_chunks;       /* chunks a live writer reused while the file was read: skipped */
	int truncated;                /* the file is shorter than its header says */
	int corrupt;                  /* something did not decode (see corrupt_slots) */
	uint64_t begin_ns, end_ns;    /* first begin and last end among records */
	uint64_t summaries;           /* SUMMARY records of the keep area (known at open) */
	uint64_t indexed_chunks;      /* chunk headers read to index the ring at open */
};

/* Open path. On failure returns -1 and writes a one-line reason (no file name) to err. */
int sp_reader_open(const char *path, struct sp_reader **out, char *err, size_t errlen);

const struct sp_file_header *sp_reader_header(const struct sp_reader *r);
const char *sp_reader_path(const struct sp_reader *r);

/* Next record: 1 and *ev filled, 0 at the end. Never fails: bad data is skipped and counted. */
int sp_reader_next(struct sp_reader *r, struct sp_event *ev);

/* An interned string by id, NULL when unknown (0, never interned, or lost). */
const char *sp_reader_string(const struct sp_reader *r, uint32_t id);

/* Statistics; complete once sp_reader_next has returned 0. */
const struct sp_reader_stats *sp_reader_stats(const struct sp_reader *r);

/*
 * The per-window summaries of the keep area (format 1.1), which sp_reader_next
 * does not return: each SUMMARY record followed by the SUMMARY_DEVICE records of
 * its window, in the order the process wrote them (window begin order). *pos
 * starts at 0; 1 and *ev filled (pid from the header, tid 0), 0 at the end.
 * Available right after open, independent of sp_reader_next.
 */
int sp_reader_summary(const struct sp_reader *r, size_t *pos, struct sp_event *ev);

/*
 * The open reader of the file this header describes (same host, start clocks
 * and command line; not the pid, which the merge may renumber), NULL when none
 * is open: for code that holds a copy of a header (the analysis, through struct
 * an_source) and wants the file's summaries.
 */
const struct sp_reader *sp_reader_find(const struct sp_file_header *h);

/*
 * Following a file while it is written (stepprof watch): read it to its end,
 * keep the marks (one per thread: the chunk read last, by seq, and the slots of
 * it consumed; the keep area's records consumed), close; later open it again,
 * resume from the marks before the first sp_reader_next, and only records
 * committed since are returned. Chunks the ring reused in between are gone
 * (the header's overwritten_records counts them).
 * sp_reader_resume: 0, or -1 (records already read, out of memory).
 * sp_reader_marks: once sp_reader_next has returned 0; writes up to max marks,
 * returns how many there are.
 */
struct sp_reader_mark {
	int32_t pid, tid; /* tid 0: the keep area */
	uint32_t slots;
	uint64_t seq;
};
int sp_reader_resume(struct sp_reader *r, const struct sp_reader_mark *m, size_t n);
/*
 * The open of a file followed this way costs its chunk index, a read per chunk
 * of the ring. sp_reader_follow says which chunks can hold records written
 * after this reader's open: those handed out from from_seq on (the header's
 * counter at open) and those a thread was still writing (seq[], the oldest
 * ones in from_seq when there are more than SP_FOLLOW_MAX); sp_reader_open_follow
 * indexes only these, so a tick costs what is new, not the file. A NULL
 * follow, or from_seq 0: the whole ring (sp_reader_open). Stats then count the
 * indexed chunks only.
 */
#define SP_FOLLOW_MAX 64
struct sp_reader_follow {
	uint64_t from_seq;
	uint32_t n;
	uint64_t seq[SP_FOLLOW_MAX];
};
void sp_reader_follow(const struct sp_reader *r, struct sp_reader_follow *out);
int sp_reader_open_follow(const char *path, const struct sp_reader_follow *follow, struct sp_reader **out, char *err,
			  size_t errlen);
size_t sp_reader_marks(const struct sp_reader *r, struct sp_reader_mark *out, size_t max);

/*
 * sp_decode's result, with the reader's precomputed field layouts (several
 * times faster): for code that keeps records as slots and decodes them again
 * (stepprof watch). The record's slot count, or 0 when it does not decode.
 */
unsigned sp_decode_fast(const struct sp_slot *sl, unsigned avail, struct sp_event *ev);
/*
 * The same into an ev that holds a record decoded before (by these two
 * functions or sp_decode) or zeros, unchanged since: only that record's fields
 * are cleared, not all of ev->f.
 */
unsigned sp_decode_again(const struct sp_slot *sl, unsigned avail, struct sp_event *ev);
/* The record of ev (as sp_reader_next returned it) into s (SP_MAX_RECORD_SLOTS slots), kind
 * byte included, with the same layouts; its slot count, 0 for a kind that has no record. */
unsigned sp_encode_fast(struct sp_slot *s, const struct sp_event *ev);

/*
 * sp_reader_next's record as its slots, not decoded: copied into out
 * (SP_MAX_RECORD_SLOTS slots), the writer's thread in *tid and its end time in
 * *end_ns; the slot count, 0 at the end. Same records, order and stats as
 * sp_reader_next (a GPU_SPAN2 comes as its two spans, each a GPU_SPAN); the two
 * may be mixed. For code that keeps records as slots (stepprof watch).
 */
unsigned sp_reader_next_raw(struct sp_reader *r, struct sp_slot *out, int32_t *tid, uint64_t *end_ns);
/* String i of the file's table (from 0): 1 with its id and text, 0 past the last. */
size_t sp_reader_strings(const struct sp_reader *r, size_t i, uint32_t *id, const char **str);

void sp_reader_close(struct sp_reader *r);

#endif /* STEPPROF_READER_H */
