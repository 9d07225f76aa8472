/*
 * tracefile.h - the writer of one trace file (format v1, include/stepprof/trace.h).
 *
 * Used by the preload's recorder (one file per process) and by programs that
 * produce traces themselves (the eBPF collector, trace generators): it needs no
 * global state, only the struct sp_tf the caller provides. Divided into:
 *   1. the open file (create, header, close, detach after fork),
 *   2. the keep area: records that are never overwritten (interned strings),
 *   3. streams: one writer per (pid, tid) appending to its own ring chunk, with
 *      the inline hot path (reserve, commit) and the slow path (a new chunk).
 *
 * Concurrency: any number of threads (and forked processes sharing the mapping)
 * may write at once. Nothing blocks: chunks are claimed with a CAS on their
 * state, keep slots with a CAS on the header's counter. A stream belongs to one
 * thread at a time.
 *
 * File I/O goes through raw syscall(SYS_...) only, so that the libc I/O hooks of
 * the preload never see stepprof's own I/O; errno is preserved by every function.
 * Disk space is reserved before a page of the mapping is first written (a ring
 * chunk: its zeros written; the keep area: fallocate), so a full disk gives lost
 * records and one warning, never SIGBUS; and the file stays under the program's
 * file size and address space limits (SIGXFSZ, ENOMEM in the program otherwise).
 */
#ifndef STEPPROF_TRACEFILE_H
#define STEPPROF_TRACEFILE_H

#include <stddef.h>
#include <stdint.h>

#include "stepprof/trace.h"

/* Trace files are named <host>.<pid>.sptrace, or <host>.<pid>.<n>.sptrace when
 * that exists (an exec'd image keeps its pid). Readers go by the magic, not the name. */
#define SP_TF_SUFFIX	 ".sptrace"
#define SP_TF_CHUNK_SIZE 65536u
#define SP_TF_AS_SHARE 16 /* under an address space limit, the trace maps at most 1/16 of it */
#define SP_TF_RESERVING 0xffffffffu /* chunk_info: disk space being reserved by one thread */
#define SP_TF_MIN_BYTES	 (4ull << 20)
#define SP_TF_PATH_MAX	 1024
/* the longest directory a file's path leaves room for: "/" + host (64) + ".pid.k" + ".sptrace" */
#define SP_TF_DIR_MAX (SP_TF_PATH_MAX - 96)

/* ------------------------------------------------------------- 1. the file */

struct sp_tf {
	int fd;			     /* -1 after the mapping, unless opts.keep_fd (see tf_space.c) */
	int keep_fd;		     /* opts.keep_fd: fd moved high, reopened if the program closes it */
	uint64_t dev, ino;	     /* identity of the file, to notice a closed-and-reused fd */
	uint8_t *base;		     /* the MAP_SHARED mapping of the whole file */
	struct sp_file_header *hdr;  /* == base */
	uint64_t size;		     /* mapped bytes == hdr->file_size */
	uint64_t keep_off, ring_off; /* byte offsets of the keep area and the ring */
	uint64_t keep_slots;
	uint32_t chunk_size, ring_chunks;
	uint64_t keep_reserved; /* bytes [0, keep_reserved) have disk space (atomic) */
	int no_populate;	/* the kernel has no MADV_POPULATE_WRITE: space is reserved through a fd */
	int no_fallocate;	/* the file system has no fallocate: space is reserved by writing zeros */
	int keep_busy;		/* with no_fallocate: a thread writes the keep area's zeros (atomic) */
	/* Keep slots strings may take (0: all of them); the recorder leaves the other
	 * half to the summaries, whose windows double to fit in it. */
	uint64_t keep_string_max;
	uint64_t keep_string_used; /* (atomic) */
	/* Per chunk (anonymous mmap): 0 = no disk space reserved yet, SP_TF_RESERVING = a
	 * thread reserves it now, else 1 + the records it held when last closed, so that
	 * reuse counts overwritten records without a walk. */
	uint32_t *chunk_info;
	uint64_t closed_records; /* records of chunks closed so far (atomic; summaries report it) */
	/* One warning per kind of trouble (disk full, keep area full); NULL: stderr. */
	void (*warn)(const char *key, const char *msg);
	const char *prog; /* who says the stderr warnings: NULL for "stepprof" */
	unsigned dir_flags; /* SP_TF_DIR_ANY_OWNER when the directory may be another user's */
	unsigned dir_mode;  /* the directory's permission bits when the file was made */
	unsigned name_off;  /* path + name_off: the file's name in its directory */
	char path[SP_TF_PATH_MAX];
};

struct sp_tf_opts {
	const char *dir;     /* existing directory owned by the caller's euid */
	uint64_t max_bytes;  /* cap of the file (>= SP_TF_MIN_BYTES; smaller values are raised) */
	int32_t pid, ppid;   /* 0: getpid() / getppid() */
	uint32_t features;   /* SP_FEAT_* */
	const char *cmdline; /* NULL: /proc/self/cmdline */
	const char *run_id;  /* the job's run id (trace.h); NULL: $STEPPROF_RUN_ID; "" or invalid: none */
	void (*warn)(const char *key, const char *msg);
	const char *prog; /* the producer's name in its warnings (NULL: "stepprof"), a static string */
	unsigned dir_flags; /* SP_TF_DIR_*: make the directory, accept another user's */
	int keep_fd;	  /* keep a descriptor of the file (a collector's own process); 0: closed once mapped */
	int cpus;	  /* 1: the header's online_cpus and cpu_affinity are the calling process's (1.5) */
};

/*
 * Create a new file in o->dir (O_CREAT|O_EXCL|O_NOFOLLOW, mode 0600), fill the
 * header, map it. Returns 0, or -errno with a one-line reason in err.
 */
int sp_tf_create(struct sp_tf *tf, const struct sp_tf_opts *o, char *err, size_t errlen);

/*
 * A new run id (trace.h, SP_RUN_ID_SIZE): 16 hex digits into out. Made once per
 * job by its first process (the preload) or by `stepprof run`.
 */
void sp_tf_make_run_id(char *out);

/* A warning line to stderr, never raising SIGPIPE or SIGXFSZ in the program (tracefile.c). */
void sp_tf_write_stderr(const char *line, size_t len);

/* Make `dir` (and missing parents, mode 0700) and check that it is a directory
 * owned by the effective user. Returns 0 or -errno with a reason in err. */
int sp_tf_mkdir(const char *dir, char *err, size_t errlen);

#define SP_TF_DIR_CREATE    1u /* make the directory and its missing parents, mode 0700 */
#define SP_TF_DIR_ANY_OWNER 2u /* accept a directory of another user (the collector as root) */

/*
 * The directory `dir` as a descriptor (O_PATH, close-on-exec), walked one
 * component at a time from / (or the working directory), each opened
 * O_NOFOLLOW relative to the one before: a symbolic link is followed only in a
 * directory that no other user can write (owned by root or the effective user,
 * no group or other write bit), so another user can never point a component
 * elsewhere. The last one is checked through the descriptor: a directory,
 * owned by the effective user (unless SP_TF_DIR_ANY_OWNER). Returns the fd
 * (its permission bits in *mode when mode is not NULL), or -errno with a
 * reason in err. Files are then made relative to it, so nothing is resolved
 * twice.
 */
int sp_tf_open_dir(const char *dir, unsigned flags, unsigned *mode, char *err, size_t errlen);

/* Clean end: end_mono_ns = end_ns. The mapping and fd stay, other threads may still write. */
void sp_tf_finish(struct sp_tf *tf, uint64_t end_ns);

/* The file has no name any more (removed, or its directory deleted): 1, else 0. */
int sp_tf_removed(const struct sp_tf *tf);

/* Unmap and close without touching the file: a producer done with it (collector),
 * or a forked child dropping its parent's file. */
void sp_tf_release(struct sp_tf *tf);

/*
 * A forked child's copy of the parent's file that code interrupted by the fork
 * may still use (a signal handler forked while its thread was inside the
 * writer): the mapping becomes private zeros at the same address, so that
 * code's stores stay in the child's memory; the descriptor is closed and the
 * path forgotten, so nothing reaches the parent's file. The geometry stays.
 */
void sp_tf_orphan(struct sp_tf *tf);

/* ------------------------------------------------------- compaction (compact.c) */

/*
 * The geometry of a file cut to what it holds: the keep area to its used slots
 * (rounded up to 4 KiB), the ring to the chunks handed out.
 */
struct sp_tf_compact_plan {
	uint64_t keep_slots, ring_off, ring_chunks, size; /* the compact file */
	uint64_t old_ring_off, old_size;
};
struct sp_tf_compact_opts {
	uint32_t uid, gid; /* owner to give the new file, (uint32_t)-1: the caller's */
	int sync;	   /* fsync before the rename */
};
/* A file above this many bytes, at least half full, is not compacted at exit. */
#define SP_TF_COMPACT_EXIT_MAX (256ull << 20)

/*
 * Plan the compaction of a file of fsize bytes with header h: 1 when it would
 * shrink by more than a chunk, 0 when it is compact already, -EINVAL (a reason
 * in err) when its header does not describe a file this build can rewrite.
 */
int sp_tf_compact_plan(const struct sp_file_header *h, uint64_t fsize, struct sp_tf_compact_plan *p, char *err,
		       size_t errlen);

/*
 * Write the compact image of the file mapped at base to a hidden sibling of
 * path, header last, and rename it over path. 0, or -errno with a reason in
 * err. Raw syscalls, no malloc.
 */
int sp_tf_compact_image(const uint8_t *base, const struct sp_tf_compact_plan *p, const char *path,
			const struct sp_tf_compact_opts *o, char *err, size_t errlen);

/*
 * The writer's clean exit (after sp_tf_finish): compact its own file unless it
 * is large and mostly full (SP_TF_COMPACT_EXIT_MAX). Records that other threads
 * write after the copy go to the old file, which is gone. 1 compacted, 0 not
 * needed, -errno (one warning through tf->warn).
 */
int sp_tf_compact(struct sp_tf *tf);

/*
 * `stepprof compact`: the file at path, in place. Refuses (-EBUSY, reason in
 * err) a file whose writer still maps it, or one with no clean exit whose
 * writer cannot be checked (another host) unless force. 1 compacted, 0
 * compact already, -errno.
 */
int sp_tf_compact_file(const char *path, int force, char *err, size_t errlen);

/* ------------------------------------------------------- 2. the keep area */

/*
 * Reserve nslots consecutive keep slots, disk space included. Returns the first
 * slot, or NULL when the area or the disk is full (one warning). The caller
 * encodes the record and stores its kind byte last (sp_tf_publish).
 */
struct sp_slot *sp_tf_keep_reserve(struct sp_tf *tf, unsigned nslots);

static inline void sp_tf_publish(struct sp_slot *slot, unsigned kind)
{
	__atomic_store_n(&slot->kind, (uint8_t)kind, __ATOMIC_RELEASE);
}

/* Write a STRING record with this id into the keep area; 0 or -1 when full. */
int sp_tf_keep_string(struct sp_tf *tf, uint32_t id, const char *s, unsigned len);

/* ------------------------------------------------------------ 3. streams */

struct sp_tf_stream {
	struct sp_slot *cur, *end;     /* free slots of the current chunk (both NULL when none) */
	struct sp_chunk_header *chunk; /* current chunk, NULL when none */
	struct sp_tf *tf;
	int32_t pid, tid;
	uint32_t lost;	   /* dropped records not yet reported by a LOST record */
	uint32_t nrec;	   /* records committed in the current chunk (a GPU_SPAN2 counts two) */
	uint64_t retry_ns; /* after a failed claim: no new attempt before this time */
};

void sp_tf_stream_init(struct sp_tf_stream *s, struct sp_tf *tf, int32_t pid, int32_t tid);

/*
 * A record in progress on a stream hides the stream's room (end = the slot being
 * written, until the commit): a signal handler that records on the same thread
 * meanwhile finds no room instead of the same slot, and its record is counted
 * lost (sp_tf_drop), never written over the interrupted one.
 */
static inline int sp_tf_stream_busy(const struct sp_tf_stream *s)
{
	return s->chunk && (const uint8_t *)s->end != (const uint8_t *)s->chunk + s->tf->chunk_size;
}

/*
 * The stream's room shown again (end = its chunk's end, NULL without a chunk):
 * for a writer that hid it and then found that a signal handler had recorded
 * between its read of `cur` and the hiding (cur moved on: its slot is not free).
 */
static inline void sp_tf_stream_unhide(struct sp_tf_stream *s)
{
	s->end = s->chunk ? (struct sp_slot *)((uint8_t *)s->chunk + s->tf->chunk_size) : NULL;
}

/* Count one record of the stream as lost (a LOST record reports it in the stream's next chunk). */
void sp_tf_drop(struct sp_tf_stream *s);

/* Slow path of sp_tf_reserve: close the full chunk, claim a new one, write the
 * pending LOST record. NULL (and the record counted lost) when there is no space. */
struct sp_slot *sp_tf_refill(struct sp_tf_stream *s, unsigned nslots, uint64_t now_ns);

/* Close the stream's chunk (thread exit, collector's end). */
void sp_tf_stream_close(struct sp_tf_stream *s);

/*
 * Room for a record of nslots slots, or NULL (counted lost). now_ns paces the
 * retries after a failure (0: read the clock). The returned slots belong to the
 * stream until sp_tf_commit.
 */
static inline struct sp_slot *sp_tf_reserve(struct sp_tf_stream *s, unsigned nslots, uint64_t now_ns)
{
	if (__builtin_expect(s->end - s->cur >= (long)nslots, 1))
		return s->cur;
	return sp_tf_refill(s, nslots, now_ns);
}

/*
 * The codec of trace.h (sp_encode) specialised per kind: the field list of each
 * kind is precomputed (sp_tf_layout_init, run by sp_tf_create), so a record
 * costs its own fields, not a scan of every field. Same bytes as sp_encode
 * (a test compares them for every kind); the kind byte is left 0.
 */
struct sp_tf_layout {
	uint8_t nslots, nfields, len;
	uint8_t field[SP_F__COUNT];
};
extern struct sp_tf_layout sp_tf_layout[SP_K__COUNT];
void sp_tf_layout_init(void);

/* The payload of a record of two slots or more (out of line: its buffer would
 * weigh on the frame of every caller of the one-slot path). */
void sp_tf_encode_payload(struct sp_slot *s, unsigned kind, const uint64_t *f);

static inline void sp_tf_encode(struct sp_slot *s, unsigned kind, unsigned api, uint64_t begin_ns, uint64_t dur_ns,
				const uint64_t *f)
{
	const struct sp_tf_layout *l = &sp_tf_layout[kind];
	s->kind = 0;
	s->nslots = l->nslots;
	s->api = (uint16_t)api;
	s->dur = sp_dur_encode(dur_ns);
	s->ts = begin_ns;
	if (l->nslots == 1) {
		/*
		 * RATIONALE: the payload (<= 16 bytes) is assembled in registers and
		 * stored once. Building it in a stack buffer of overlapping 8-byte
		 * stores and copying that out costs a failed store-to-load forward
		 * (several ns) on every record.
		 */
		unsigned __int128 v = 0;
		unsigned off = 0;
		for (unsigned i = 0; i < l->nfields; i++) {
			unsigned w = sp_field_width[l->field[i]];
			uint64_t x = f[l->field[i]];
			if (w < 8)
				x &= (1ull << (8 * w)) - 1;
			v |= (unsigned __int128)x << (8 * off);
			off += w;
		}
		memcpy(s->p, &v, SP_HEAD_PAYLOAD); /* little-endian host, as the format */
		return;
	}
	sp_tf_encode_payload(s, kind, f);
}

/*
 * The same encoder for a kind known at compile time: sp_kind_mask[kind] folds to
 * a constant, so the field list, the offsets and the masks fold away and a
 * one-slot record becomes a few shifts and ors of the caller's f[] values (no
 * loop, no layout table, and the caller's f[] array itself usually vanishes
 * into registers). The kind MUST be a compile-time constant at every use (after
 * inlining): sp_tf_encode_any dispatches a variable kind to it through a switch.
 * Same bytes as sp_encode (tested for every kind); the kind byte is left 0.
 */
#define SP_TF_INLINE static inline __attribute__((always_inline))

/* trace.h's sp_payload_bytes, always inlined: GCC may leave that one out of line
 * (a call and ~90 instructions per record) even for a constant mask. */
SP_TF_INLINE unsigned sp_tf_payload_len(uint64_t m)
{
	return 0
#define SP_FIELD(id, num, name, width, type) +(unsigned)((m >> SP_F_##id) & 1u) * (width)
#include "stepprof/fields.def"
#undef SP_FIELD
	    ;
}

/* Slots of a record of this kind (a constant for a constant kind). */
SP_TF_INLINE unsigned sp_tf_kind_slots(unsigned kind)
{
	return sp_slots_for_payload(sp_tf_payload_len(sp_kind_mask[kind]));
}

/*
 * A record's duration from its begin and end: end - begin, 0 when end is not
 * after begin (what sp_dur_encode is given).
 * RATIONALE: the subtraction's borrow is the test (a sub and a jump), and the
 * head word takes the common case of sp_dur_encode (under 2^31 ns: exact)
 * first. Written as `end > begin ? end - begin : 0` and encoded as such, a
 * record took a compare more, and GCC laid the exact case out of line (two
 * jumps): ~4 instructions a record.
 */
SP_TF_INLINE uint64_t sp_tf_dur_ns(uint64_t begin_ns, uint64_t end_ns)
{
	uint64_t d;
	if (__builtin_expect(__builtin_sub_overflow(end_ns, begin_ns, &d), 0))
		return 0;
	return d;
}

/* One 8-byte head word: kind 0, nslots, api, dur (little-endian, as struct sp_slot). */
SP_TF_INLINE uint64_t sp_tf_head_word(unsigned nslots, unsigned api, uint64_t dur_ns)
{
	uint32_t dur = __builtin_expect(dur_ns < 0x80000000ull, 1) ? (uint32_t)dur_ns : sp_dur_encode(dur_ns);
	return (uint64_t)nslots << 8 | (uint64_t)(uint16_t)api << 16 | (uint64_t)dur << 32;
}

/*
 * The payload of a kind whose fields fit the head slot's 16 bytes, as its two
 * little-endian words: w[0] = bytes 0-7, w[1] = bytes 8-15.
 * RATIONALE: each field is or-ed into the word(s) it lies in, by shifts of
 * 64-bit values. Built as one 128-bit value, every field below byte 8 was
 * shifted as 128 bits (a shld into a zeroed register and an or) although its
 * masked value never reaches the high word: READ's path (bytes 5-7), STAT's
 * and OPEN's, ~3 instructions a record. The shift counts are taken modulo 64:
 * only the one-slot kinds reach here with their fields, the others' code is
 * dead but compiled.
 */
SP_TF_INLINE void sp_tf_payload1(unsigned kind, const uint64_t *f, uint64_t w[2])
{
	const uint64_t m = sp_kind_mask[kind];
	uint64_t lo = 0, hi = 0;
	unsigned off = 0;
#define SP_FIELD(id, num, name, width, type)                                                                           \
	if ((m >> SP_F_##id) & 1) {                                                                                    \
		uint64_t x = f[SP_F_##id];                                                                             \
		if ((width) < 8)                                                                                       \
			x &= (1ull << (8 * ((width)&7))) - 1;                                                          \
		if (off < 8) {                                                                                         \
			lo |= x << ((8 * off) & 63);                                                                   \
			if (off + (width) > 8) /* the field's high bytes */                                            \
				hi |= x >> ((8 * (8 - off)) & 63);                                                     \
		} else {                                                                                               \
			hi |= x << ((8 * (off - 8)) & 63);                                                             \
		}                                                                                                      \
		off += (width);                                                                                        \
	}
#include "stepprof/fields.def"
#undef SP_FIELD
	w[0] = lo;
	w[1] = hi;
}

/*
 * A field of a multi-slot record, stored straight into its slots: payload byte
 * `off` is head byte 16 + off below 16, else byte 1 + (off - 16) % 31 of
 * continuation slot 1 + (off - 16) / 31. A field crossing a slot boundary is
 * stored in two pieces. All arguments are constants after inlining.
 */
SP_TF_INLINE void sp_tf_put_field(uint8_t *rec, unsigned off, unsigned w, uint64_t x)
{
	while (w) {
		unsigned pos, room;
		if (off < SP_HEAD_PAYLOAD) {
			pos = 16 + off;
			room = SP_HEAD_PAYLOAD - off;
		} else {
			unsigned c = (off - SP_HEAD_PAYLOAD) / SP_CONT_PAYLOAD,
				 b = (off - SP_HEAD_PAYLOAD) % SP_CONT_PAYLOAD;
			pos = SP_SLOT_SIZE * (1 + c) + 1 + b;
			room = SP_CONT_PAYLOAD - b;
		}
		unsigned n = w < room ? w : room;
		memcpy(rec + pos, &x, n); /* little-endian: the low bytes first */
		x = n < 8 ? x >> (8 * (n & 7)) : 0;
		off += n;
		w -= n;
	}
}

SP_TF_INLINE void sp_tf_encode_k(struct sp_slot *s, unsigned kind, unsigned api, uint64_t begin_ns, uint64_t dur_ns,
				 const uint64_t *f)
{
	const uint64_t m = sp_kind_mask[kind];
	const unsigned len = sp_tf_payload_len(m), n = sp_slots_for_payload(len);
	uint64_t head = sp_tf_head_word(n, api, dur_ns);
	memcpy(s, &head, 8);
	s->ts = begin_ns;
	if (n == 1) {
		uint64_t w[2];
		sp_tf_payload1(kind, f, w);
		memcpy(s->p, w, SP_HEAD_PAYLOAD);
		return;
	}
	/* continuation slots: their kind byte, zero padding; the fields overwrite the rest */
	uint8_t *rec = (uint8_t *)s;
	memset(s->p, 0, SP_HEAD_PAYLOAD);
	for (unsigned i = 1; i < n; i++) {
		uint64_t w0 = SP_K_CONT, z = 0;
		memcpy(rec + SP_SLOT_SIZE * i, &w0, 8);
		memcpy(rec + SP_SLOT_SIZE * i + 8, &z, 8);
		memcpy(rec + SP_SLOT_SIZE * i + 16, &z, 8);
		memcpy(rec + SP_SLOT_SIZE * i + 24, &z, 8);
	}
	unsigned off = 0;
#define SP_FIELD(id, num, name, width, type)                                                                           \
	if ((m >> SP_F_##id) & 1) {                                                                                    \
		sp_tf_put_field(rec, off, (width), f[SP_F_##id]);                                                      \
		off += (width);                                                                                        \
	}
#include "stepprof/fields.def"
#undef SP_FIELD
}

/* Any kind but STRING, through a switch on sp_tf_encode_k (one specialised encoder per kind). */
void sp_tf_encode_any(struct sp_slot *s, unsigned kind, unsigned api, uint64_t begin_ns, uint64_t dur_ns,
		      const uint64_t *f);

/* Commit the record of nslots slots encoded at slot (its kind byte still 0): kind
 * stored last with release, then the chunk's `used` count, so a reader never sees
 * half a record. */
static inline void sp_tf_commit_n(struct sp_tf_stream *s, struct sp_slot *slot, unsigned kind, unsigned nslots)
{
	struct sp_chunk_header *c = s->chunk;
	struct sp_slot *first = (struct sp_slot *)c + SP_CHUNK_HDR_SLOTS;
	if (slot == first)
		c->first_ns = slot->ts;
	__atomic_store_n(&slot->kind, (uint8_t)kind, __ATOMIC_RELEASE);
	s->nrec += sp_kind_records(kind); /* a constant where the kind is */
	s->cur = slot + nslots;
	/* the line a few records ahead: its read-for-ownership overlaps the caller's work */
	__builtin_prefetch(s->cur + 8, 1, 3);
	__atomic_store_n(&c->used, (uint32_t)(s->cur - first), __ATOMIC_RELEASE);
}

/* The same, nslots read back from the encoded head (a variable kind). */
static inline void sp_tf_commit(struct sp_tf_stream *s, struct sp_slot *slot, unsigned kind)
{
	sp_tf_commit_n(s, slot, kind, slot->nslots);
}

/* Encode (sp_tf_encode) and commit in one call; 0 or -1 when lost. */
int sp_tf_write(struct sp_tf_stream *s, unsigned kind, unsigned api, uint64_t begin_ns, uint64_t end_ns,
		const uint64_t *f);

#endif /* STEPPROF_TRACEFILE_H */
