/*
 * reader_int.h - what the two halves of the trace reader share: the reader's
 * state and the helpers both use. reader.c opens a file (header checks, keep
 * area, ring index), reader_stream.c streams and decodes its records; the API
 * is reader.h.
 */
#ifndef STEPPROF_READER_INT_H
#define STEPPROF_READER_INT_H

#include "reader.h"

#include <stddef.h>
#include <stdint.h>
#include <string.h>


struct str_ent {
	uint32_t id;
	uint32_t off;	/* into pool */
	uint64_t order; /* keep-area position: the first of duplicate ids wins */
};

/*
 * A run of ring chunks to read: 16 bytes. The index is the one part of the
 * reader's memory that grows with the file, so it holds no more than the order
 * needs: the thread as an index into the file's table of (pid, tid), the seq as
 * a 32-bit key relative to the header's ring_next_seq (seq_key), the ring
 * position as 32 bits. One entry holds up to RUN_MAX chunks of one thread at
 * consecutive positions with consecutive seqs, all full but the last: what a
 * process with one busy thread leaves (a data loader worker's file: one entry
 * per 64 MiB). Threads that take turns (a trainer's launches and GPU spans) take
 * one entry a chunk: 16 bytes, 390 KB for a 1.6 GB trace of 50 M records.
 */
struct chunk_ref {
	uint32_t thread; /* index into the thread table; once sorted, the rank of its (pid, tid) */
	uint32_t order;	 /* seq_key(seq) of the first chunk */
	uint32_t pos;	 /* ring position of the first chunk */
	uint32_t run;	 /* RUN_SLOTS: record slots to read in the last chunk, min(used, what the
			    file holds); RUN_CUT: the file ends inside it; >> RUN_SHIFT: chunks - 1 */
};
#define RUN_SLOT_BITS 21u /* a chunk's record slots: < SP_CHUNK_SIZE_MAX / SP_SLOT_SIZE */
#define RUN_SLOTS     ((1u << RUN_SLOT_BITS) - 1)
#define RUN_CUT	      (1u << RUN_SLOT_BITS)
#define RUN_SHIFT     (RUN_SLOT_BITS + 1)
#define RUN_MAX	      (1u << (32 - RUN_SHIFT)) /* 1024 chunks: 64 MiB of 64 KiB chunks */
_Static_assert(SP_CHUNK_SIZE_MAX / SP_SLOT_SIZE <= RUN_SLOTS + 1, "a chunk's slot count fits RUN_SLOTS");

struct stream {
	int32_t pid, tid;
	size_t first, count; /* range of r->chunks, seq order; count 0 for the keep stream */
	size_t next;	     /* next entry of r->chunks to load from */
	uint32_t sub;	     /* its next chunk, from 0 */
	struct sp_slot *buf; /* current chunk's record slots (or the kept records) */
	uint32_t nslots, off;
	int cut;  /* the current chunk was cut short by the end of the file */
	int keep; /* the keep area's non-string records */
	int had_records;
	const struct sp_slot *pending; /* the stream's next record, validated, in buf */
	uint64_t key;		       /* its begin time */
	int second;		       /* pending is a GPU_SPAN2 whose first span was returned */
	/* sp_reader_resume: where a previous reader of the file stopped in this thread */
	int marked;
	uint64_t mark_seq; /* the chunk it read last (absolute seq) */
	uint32_t mark_slots; /* the slots of it that it consumed (the keep stream: of the kept records) */
	/* for sp_reader_marks: the chunk loaded last and the slots skipped at its start */
	int loaded;
	uint64_t cur_seq;
	uint32_t cur_base;
};

struct heap_ent {
	uint64_t key;
	size_t idx;
};

/* Per-kind field layout of the fast decoder; kinds longer than LAYOUT_MAX_SLOTS use none (!ok). */
#define LAYOUT_MAX_SLOTS 5u
struct kind_layout {
	uint8_t ok, nslots, nfields;
	uint8_t field[SP_F__COUNT], off[SP_F__COUNT], width[SP_F__COUNT], sign[SP_F__COUNT];
};

struct sp_reader {
	int fd;
	char *path;
	struct sp_file_header hdr;
	uint64_t fsize;
	uint64_t ring_off;
	uint32_t chunk_slots; /* record slots per chunk */

	char *pool;
	size_t pool_len;
	struct str_ent *strs;
	size_t nstrs;

	struct sp_slot *kept; /* non-string records of the keep area */
	uint32_t nkept;
	struct sp_slot *sums; /* SUMMARY and SUMMARY_DEVICE records of the keep area, file order */
	size_t nsums;

	struct chunk_ref *chunks;
	size_t nchunks;
	const struct sp_reader_follow *only; /* sp_reader_open_follow: the chunks to index (NULL: all) */
	struct sp_reader_follow follow;      /* sp_reader_follow: what a later read must index */

	struct stream *streams;
	size_t nstreams;
	struct heap_ent *heap; /* one per unfinished stream, min begin_ns on top */
	size_t nheap;
	int started;
	int newer_minor; /* the file's minor version is newer than this reader's */
	struct kind_layout lay[SP_K__COUNT];

	struct sp_reader_stats st;
};

/* What validate() and decode_newer() return for a newer minor's kind: a record to skip. */
#define NEWER_KIND 0xffffu

/*
 * Move element i of a binary heap of n elements of `size` bytes (at most 16)
 * down to its place, `above(a, b)` saying that a belongs above b. Shared by the
 * chunk index's heapsort and the merge's min-heap; always inlined, so `above`
 * and `size` are constants there and the merge's hot path makes no indirect call.
 */
static inline __attribute__((always_inline)) void sift_down(void *base, size_t size, size_t n, size_t i,
							    int (*above)(const void *, const void *))
{
	char *v = base, t[16];
	for (;;) {
		size_t l = 2 * i + 1, m = i;
		if (l < n && above(v + l * size, v + m * size))
			m = l;
		if (l + 1 < n && above(v + (l + 1) * size, v + m * size))
			m = l + 1;
		if (m == i)
			return;
		memcpy(t, v + i * size, size);
		memcpy(v + i * size, v + m * size, size);
		memcpy(v + m * size, t, size);
		i = m;
	}
}

/*
 * A chunk's seq as a 32-bit key: the distance from the header's ring_next_seq,
 * seq - ring_next_seq + 2^31, clamped to [0, 2^32 - 1]. Non-decreasing in seq,
 * so the order of any two chunks is the order of their seqs, or a tie (broken
 * by ring position) when both lie 2^31 chunks or more (128 TiB of 64 KiB
 * chunks) from the counter, on the same side: a damaged seq or counter can
 * misplace a chunk, never make the sort loop or the reader fail.
 */
static inline uint32_t seq_key(uint64_t seq, uint64_t next)
{
	const uint64_t half = 1ull << 31;
	if (seq < next)
		return next - seq >= half ? 0 : (uint32_t)(half - (next - seq));
	return seq - next >= half ? UINT32_MAX : (uint32_t)(half + (seq - next));
}

/* The absolute seq of a chunk from its key (seq_key); 0 when the key was clamped (unknown). */
static inline int seq_of_key(uint32_t key, uint64_t next, uint64_t *seq)
{
	const uint64_t half = 1ull << 31;
	if (key == 0 || key == UINT32_MAX || next + key < half)
		return 0;
	*seq = next + key - half;
	return 1;
}

/* reader.c */
size_t pread_full(int fd, void *buf, size_t n, uint64_t off);
void layouts_init(struct kind_layout *lay); /* every kind of this version's format */
void registry_remove(struct sp_reader *r);

#endif /* STEPPROF_READER_INT_H */
