/*
 * trace.h - the stepprof trace file format, version 1.
 *
 * Shared by the recorder (preload/), the eBPF collector (bpf/) and the reader
 * (analyzer/). docs/trace-format.md explains it for humans; this header is the
 * definition. It is divided into:
 *   1. the file header (one 4 KiB page),
 *   2. the chunk header (per-thread blocks of fixed-size slots),
 *   3. the 32-byte slot and the record kinds/fields (kinds.def, fields.def),
 *   4. the codec: encode/decode of a record to/from the wide struct sp_event.
 *
 * File layout:
 *   [ header: 4096 bytes ][ keep area: keep_slots slots ][ ring: ring_chunks chunks ]
 * The keep area holds records that must never be overwritten (interned strings,
 * summaries), appended slot by slot with an atomic counter. The ring holds raw
 * events in per-thread chunks; when the file cap is reached the oldest chunk is
 * reused ("flight recorder") and its records are counted as overwritten.
 *
 * Everything is little-endian, CLOCK_MONOTONIC nanoseconds.
 */
#ifndef STEPPROF_TRACE_H
#define STEPPROF_TRACE_H

#include <stdint.h>
#include <string.h>

#define SP_MAGIC "STEPPROF"
#define SP_VERSION_MAJOR 1
#define SP_VERSION_MINOR 6 /* 1: SUMMARY, SUMMARY_DEVICE records in the keep area; 2: LOCK_WAIT, apis appended;
                              3: GPU_SPAN2 (two GPU spans in one slot), apis appended; 4: run_id;
                              5: CPU_TIME records, online_cpus and the CPU affinity;
                              6: COMM, COMM_INIT records (NCCL), apis appended */
#define SP_ENDIAN_TAG 0x01020304u
#define SP_HEADER_SIZE 4096u
#define SP_SLOT_SIZE 32u
#define SP_CHUNK_MAGIC 0x4b434853u /* "SHCK" */
#define SP_CHUNK_HDR_SLOTS 2u      /* the chunk header takes the first two slots */
#define SP_MAX_RECORD_SLOTS 40u    /* longest record: a 1 KiB string */
/*
 * The geometry a reader accepts (docs/trace-format.md section 3): a chunk of
 * at least one record slot and at most 1 MiB (the recorder uses 64 KiB; a
 * reader holds one chunk per thread in memory), at most 2^40 keep slots.
 */
#define SP_CHUNK_SIZE_MIN ((SP_CHUNK_HDR_SLOTS + 1) * SP_SLOT_SIZE)
#define SP_CHUNK_SIZE_MAX (1u << 20)
#define SP_KEEP_SLOTS_MAX (1ull << 40)
#define SP_MAX_STRING 1024u
/*
 * A run id: 1..31 characters of [A-Za-z0-9._:-], NUL-padded (the recorder makes
 * 16 hex digits). The first process of a job makes it and exports it as
 * STEPPROF_RUN_ID, so every process of the job writes the same one.
 */
#define SP_RUN_ID_SIZE 32u
/* CPUs 0..1023 of a process's affinity mask are kept in the header (a bit per CPU). */
#define SP_CPU_AFFINITY_WORDS 16u

/* Nonzero when s is a valid run id (see SP_RUN_ID_SIZE). */
static inline int sp_run_id_valid(const char *s)
{
	size_t n = 0;
	if (!s)
		return 0;
	for (; s[n]; n++) {
		char c = s[n];
		if (n >= SP_RUN_ID_SIZE - 1 ||
		    !((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '.' ||
		      c == '_' || c == ':' || c == '-'))
			return 0;
	}
	return n > 0;
}

/* Feature bits of sp_file_header.features. */
#define SP_FEAT_CUDA 0x1u  /* CUDA hooks were active */
#define SP_FEAT_LIBC_IO 0x2u /* libc I/O wrappers were active */
#define SP_FEAT_BPF 0x4u   /* written by the eBPF collector (records of many pids) */
#define SP_FEAT_TSC 0x8u   /* timestamps from the TSC, scaled to CLOCK_MONOTONIC by the recorder (STEPPROF_CLOCK) */

/* Chunk states. */
#define SP_CHUNK_FREE 0u
#define SP_CHUNK_ACTIVE 1u /* a thread is appending to it */
#define SP_CHUNK_CLOSED 2u /* complete, or its thread exited */

/* ---------------------------------------------------------------- 1. header */

struct sp_device_info {
	char name[96];           /* GPU name, "" when unknown */
	uint64_t mem_bytes;      /* total device memory */
	uint16_t pcie_gen_cur, pcie_width_cur, pcie_gen_max, pcie_width_max;
	int32_t ordinal;
	uint32_t reserved;
};

#define SP_MAX_DEVICES 8

struct sp_file_header {
	/* identification: never moves, whatever the version */
	char magic[8];           /* "STEPPROF" */
	uint16_t version_major;  /* a reader rejects a newer major */
	uint16_t version_minor;  /* minor: fields added, readers ignore them */
	uint32_t header_size;    /* SP_HEADER_SIZE */
	uint32_t endian;         /* SP_ENDIAN_TAG as written by the producer */
	uint32_t features;       /* SP_FEAT_* */

	/* geometry */
	uint32_t chunk_size;     /* bytes per ring chunk, a multiple of SP_SLOT_SIZE */
	uint32_t ring_chunks;    /* chunks in the ring */
	uint64_t keep_slots;     /* slots in the keep area */
	uint64_t file_size;      /* header + keep + ring, bytes */

	/* the process */
	int32_t pid, ppid;
	int32_t rank, local_rank, world_size; /* -1 when not set */
	uint32_t reserved0;
	uint64_t start_mono_ns;  /* CLOCK_MONOTONIC and CLOCK_REALTIME read together */
	uint64_t start_real_ns;
	char host[64];
	char cmdline[1024];      /* arguments separated by single spaces, truncated */

	/* devices and versions, filled when CUDA is first seen (0/"" otherwise) */
	int32_t driver_version, runtime_version;
	uint32_t ndevices;
	uint32_t reserved1;
	struct sp_device_info devices[SP_MAX_DEVICES];

	/* live counters, updated atomically by the producer */
	uint64_t ring_next_seq;      /* next chunk sequence number to hand out */
	uint64_t keep_next_slot;     /* next free keep slot */
	uint64_t lost_records;       /* records that could not be written at all */
	uint64_t overwritten_records; /* committed records lost to ring reuse */
	uint64_t overwritten_chunks;
	uint64_t end_mono_ns;        /* set at a clean exit, 0 otherwise */
	uint64_t next_op;            /* per-process GPU op id counter */

	/* 1.4: the job's run id, shared by all its processes (STEPPROF_RUN_ID); "" before 1.4 */
	char run_id[SP_RUN_ID_SIZE];

	/* 1.5: the machine's online CPUs and the CPUs the process may run on (its affinity when it
	   started: a bit per CPU number, cpu_affinity_count of them set); 0 before 1.5 or unknown */
	uint32_t online_cpus;
	uint32_t cpu_affinity_count;
	uint64_t cpu_affinity[SP_CPU_AFFINITY_WORDS];
};
_Static_assert(sizeof(struct sp_file_header) <= SP_HEADER_SIZE, "the file header outgrew its page");
_Static_assert(__builtin_offsetof(struct sp_file_header, run_id) == 2208, "run_id moved (docs/trace-format.md)");
_Static_assert(__builtin_offsetof(struct sp_file_header, cpu_affinity) == 2248, "cpu_affinity moved (docs/trace-format.md)");

/* ----------------------------------------------------------------- 2. chunk */

struct sp_chunk_header {          /* 64 bytes = SP_CHUNK_HDR_SLOTS slots */
	uint32_t magic;           /* SP_CHUNK_MAGIC */
	uint32_t state;           /* SP_CHUNK_* */
	uint64_t seq;             /* allocation order; a thread's chunks in seq order are its records in order */
	int32_t pid, tid;         /* who wrote the records */
	uint32_t used;            /* committed record slots after the header (release store = commit) */
	uint32_t lost;            /* records this thread dropped while this chunk was its current one */
	uint64_t first_ns;        /* timestamp of the first record, 0 if none */
	uint64_t reserved[3];
};

/* ------------------------------------------------------------- 3. records */

/* A 32-byte slot. A record is one head slot and nslots-1 continuation slots. */
struct sp_slot {
	uint8_t kind;    /* enum sp_kind; 0 = never committed */
	uint8_t nslots;  /* slots of this record, head included (1..SP_MAX_RECORD_SLOTS) */
	uint16_t api;    /* enum sp_api */
	uint32_t dur;    /* duration, sp_dur_encode() */
	uint64_t ts;     /* begin, CLOCK_MONOTONIC ns (STRING: the string id) */
	uint8_t p[16];   /* first 16 payload bytes */
};
#define SP_HEAD_PAYLOAD 16u
#define SP_CONT_PAYLOAD 31u
#define SP_K_CONT 255u /* continuation slot: kind byte then 31 payload bytes */

/*
 * Kinds and fields carry their wire number in the .def list's second column, and
 * stand in the list in that order (a field's number is also its bit in a kind's
 * mask and its place in the payload): the build fails when one does not, and
 * tests/unit/test_wire_ids.c pins every released number.
 */
enum sp_kind {
	SP_K_NONE = 0,
#define SP_KIND(id, num, name, mask) SP_K_##id = (num),
#include "kinds.def"
#undef SP_KIND
	SP_K__COUNT
};
enum sp_kind_pos_ {
	SP_KPOS_NONE_ = 0,
#define SP_KIND(id, num, name, mask) SP_KPOS_##id,
#include "kinds.def"
#undef SP_KIND
};
#define SP_KIND(id, num, name, mask) \
	_Static_assert(SP_KPOS_##id == (num), "kinds.def: " #id "'s number is not its place in the list");
#include "kinds.def"
#undef SP_KIND

enum sp_field {
#define SP_FIELD(id, num, name, width, type) SP_F_##id = (num),
#include "fields.def"
#undef SP_FIELD
	SP_F__COUNT
};
enum sp_field_pos_ {
#define SP_FIELD(id, num, name, width, type) SP_FPOS_##id,
#include "fields.def"
#undef SP_FIELD
};
#define SP_FIELD(id, num, name, width, type) \
	_Static_assert(SP_FPOS_##id == (num), "fields.def: " #id "'s number is not its place in the list");
#include "fields.def"
#undef SP_FIELD

enum sp_field_type { SP_T_U, SP_T_I, SP_T_HEX, SP_T_STR, SP_T_DIR, SP_T_HOSTMEM, SP_T_FDTYPE, SP_T_SOURCE };

/* The one-byte enumerations (value 0 = unknown/none) and their dump names. Append only. */
/* COMM record flags */
enum {
	SP_COMM_F_GROUPED = 1u, /* issued inside ncclGroupStart/End: its work is launched by the outermost ncclGroupEnd */
};

enum sp_dir { SP_DIR_NONE, SP_DIR_H2D, SP_DIR_D2H, SP_DIR_D2D, SP_DIR_H2H, SP_DIR_PEER, SP_DIR__COUNT };
static const char *const sp_dir_name[SP_DIR__COUNT] = { "none", "h2d", "d2h", "d2d", "h2h", "peer" };

enum sp_hostmem { SP_HOSTMEM_UNKNOWN, SP_HOSTMEM_PINNED, SP_HOSTMEM_PAGEABLE, SP_HOSTMEM_DEVICE, SP_HOSTMEM_MANAGED,
		  SP_HOSTMEM__COUNT };
static const char *const sp_hostmem_name[SP_HOSTMEM__COUNT] = { "unknown", "pinned", "pageable", "device", "managed" };

enum sp_fdtype { SP_FDTYPE_OTHER, SP_FDTYPE_FILE, SP_FDTYPE_PIPE, SP_FDTYPE_SOCKET, SP_FDTYPE_DIR, SP_FDTYPE__COUNT };
static const char *const sp_fdtype_name[SP_FDTYPE__COUNT] = { "other", "file", "pipe", "socket", "dir" };

enum sp_source { SP_SOURCE_NONE, SP_SOURCE_LIBC, SP_SOURCE_BPF, SP_SOURCE__COUNT };
static const char *const sp_source_name[SP_SOURCE__COUNT] = { "none", "libc", "bpf" };

/* Api ids: each list's id column (apis.def); dense up to SP_API_NEXT_ID - 1. */
enum sp_api {
	SP_API_NONE = 0,
#define SP_API(name, id) SP_API_##name = (id),
#include "apis.def"
#undef SP_API
	SP_API__COUNT = SP_API_NEXT_ID
};

#define F(x) (1ull << SP_F_##x)
static const uint64_t sp_kind_mask[SP_K__COUNT] = {
#define SP_KIND(id, num, name, mask) [SP_K_##id] = (mask),
#include "kinds.def"
#undef SP_KIND
};
#undef F

static const char *const sp_kind_name[SP_K__COUNT] = {
	[SP_K_NONE] = "none",
#define SP_KIND(id, num, name, mask) [SP_K_##id] = name,
#include "kinds.def"
#undef SP_KIND
};

static const uint8_t sp_field_width[SP_F__COUNT] = {
#define SP_FIELD(id, num, name, width, type) [SP_F_##id] = width,
#include "fields.def"
#undef SP_FIELD
};

static const uint8_t sp_field_type[SP_F__COUNT] = {
#define SP_FIELD(id, num, name, width, type) [SP_F_##id] = SP_T_##type,
#include "fields.def"
#undef SP_FIELD
};

static const char *const sp_field_name[SP_F__COUNT] = {
#define SP_FIELD(id, num, name, width, type) [SP_F_##id] = name,
#include "fields.def"
#undef SP_FIELD
};

static const char *const sp_api_name[SP_API__COUNT] = {
	[SP_API_NONE] = "",
#define SP_API(name, id) [SP_API_##name] = #name,
#include "apis.def"
#undef SP_API
};

/* Payload bytes of a kind's fields; folds to a constant for a constant mask. */
static inline unsigned sp_payload_bytes(uint64_t m)
{
	return 0
#define SP_FIELD(id, num, name, width, type) +(unsigned)(((m) >> SP_F_##id) & 1u) * (width)
#include "fields.def"
#undef SP_FIELD
		;
}

static inline unsigned sp_slots_for_payload(unsigned bytes)
{
	return bytes <= SP_HEAD_PAYLOAD ? 1u : 1u + (bytes - SP_HEAD_PAYLOAD + SP_CONT_PAYLOAD - 1) / SP_CONT_PAYLOAD;
}

static inline unsigned sp_kind_slots(unsigned kind)
{
	return kind < SP_K__COUNT ? sp_slots_for_payload(sp_payload_bytes(sp_kind_mask[kind])) : 0;
}

/*
 * Durations: exact nanoseconds below 2^31 ns (2.1 s), then microseconds with the
 * top bit set (up to 35 minutes), then saturated.
 */
static inline uint32_t sp_dur_encode(uint64_t ns)
{
	if (ns < 0x80000000ull)
		return (uint32_t)ns;
	uint64_t us = ns / 1000;
	return us < 0x7fffffffull ? (uint32_t)(0x80000000ull | us) : 0xffffffffu;
}

static inline uint64_t sp_dur_decode(uint32_t d)
{
	return (d & 0x80000000u) ? (uint64_t)(d & 0x7fffffffu) * 1000 : d;
}

/* ------------------------------------------------------------ 4. the codec */

/* A decoded record: the wide form every consumer works with. */
struct sp_event {
	uint8_t kind;
	uint8_t nslots;
	uint16_t api;
	int32_t pid, tid;        /* from the chunk header */
	uint64_t begin_ns, end_ns;
	uint64_t mask;           /* fields present (sp_kind_mask[kind]) */
	uint64_t f[SP_F__COUNT]; /* by enum sp_field; signed fields sign-extended */
};

static inline void sp_put_payload(struct sp_slot *s, unsigned nslots, const uint8_t *buf, unsigned len)
{
	unsigned n = len < SP_HEAD_PAYLOAD ? len : SP_HEAD_PAYLOAD;
	memcpy(s->p, buf, n);
	if (n < SP_HEAD_PAYLOAD)
		memset(s->p + n, 0, SP_HEAD_PAYLOAD - n);
	for (unsigned i = 1; i < nslots; i++) {
		uint8_t *c = (uint8_t *)&s[i];
		unsigned off = SP_HEAD_PAYLOAD + (i - 1) * SP_CONT_PAYLOAD;
		unsigned k = len > off ? len - off : 0;
		if (k > SP_CONT_PAYLOAD)
			k = SP_CONT_PAYLOAD;
		c[0] = SP_K_CONT;
		memcpy(c + 1, buf + off, k);
		memset(c + 1 + k, 0, SP_CONT_PAYLOAD - k);
	}
}

static inline void sp_get_payload(const struct sp_slot *s, unsigned nslots, uint8_t *buf, unsigned len)
{
	unsigned n = len < SP_HEAD_PAYLOAD ? len : SP_HEAD_PAYLOAD;
	memcpy(buf, s->p, n);
	for (unsigned i = 1; i < nslots; i++) {
		const uint8_t *c = (const uint8_t *)&s[i];
		unsigned off = SP_HEAD_PAYLOAD + (i - 1) * SP_CONT_PAYLOAD;
		if (off >= len)
			break;
		unsigned k = len - off < SP_CONT_PAYLOAD ? len - off : SP_CONT_PAYLOAD;
		memcpy(buf + off, c + 1, k);
	}
}

/*
 * Encode a record of `kind` into s[0..n). f[] is indexed by enum sp_field; only the
 * kind's fields are read. Returns the slot count. The kind byte is written last
 * by sp_commit-style callers: this function leaves s->kind = 0, the caller stores
 * the kind with release semantics when the record is complete.
 */
static inline unsigned sp_encode(struct sp_slot *s, unsigned kind, unsigned api, uint64_t begin_ns, uint64_t dur_ns,
				 const uint64_t *f)
{
	uint64_t m = sp_kind_mask[kind];
	uint8_t buf[SP_HEAD_PAYLOAD + 4 * SP_CONT_PAYLOAD];
	unsigned len = 0;
	for (unsigned i = 0; i < SP_F__COUNT; i++) {
		if (!((m >> i) & 1))
			continue;
		uint64_t v = f[i];
		memcpy(buf + len, &v, sp_field_width[i]); /* little-endian: low bytes first */
		len += sp_field_width[i];
	}
	unsigned n = sp_slots_for_payload(len);
	s->kind = 0;
	s->nslots = (uint8_t)n;
	s->api = (uint16_t)api;
	s->dur = sp_dur_encode(dur_ns);
	s->ts = begin_ns;
	sp_put_payload(s, n, buf, len);
	return n;
}

/*
 * Decode the record at s (n slots available from s). Returns the record's slot
 * count, or 0 if the slots do not hold a valid record of a known kind (a reader
 * treats that as corruption). STRING records are not decoded here (sp_string_get).
 */
static inline unsigned sp_decode(const struct sp_slot *s, unsigned avail, struct sp_event *ev)
{
	unsigned kind = s->kind;
	if (kind == SP_K_NONE || kind >= SP_K__COUNT || kind == SP_K_STRING)
		return 0;
	uint64_t m = sp_kind_mask[kind];
	unsigned len = sp_payload_bytes(m);
	unsigned n = sp_slots_for_payload(len);
	if (s->nslots != n || n > avail || s->api >= SP_API__COUNT)
		return 0;
	for (unsigned i = 1; i < n; i++)
		if (((const uint8_t *)&s[i])[0] != SP_K_CONT)
			return 0;
	uint8_t buf[SP_HEAD_PAYLOAD + 4 * SP_CONT_PAYLOAD];
	sp_get_payload(s, n, buf, len);
	ev->kind = (uint8_t)kind;
	ev->nslots = (uint8_t)n;
	ev->api = s->api;
	ev->begin_ns = s->ts;
	ev->end_ns = s->ts + sp_dur_decode(s->dur);
	ev->mask = m;
	unsigned off = 0;
	for (unsigned i = 0; i < SP_F__COUNT; i++) {
		if (!((m >> i) & 1)) {
			ev->f[i] = 0;
			continue;
		}
		unsigned w = sp_field_width[i];
		uint64_t v = 0;
		memcpy(&v, buf + off, w);
		if (sp_field_type[i] == SP_T_I && w < 8 && (v >> (w * 8 - 1)) & 1)
			v |= ~0ull << (w * 8);
		ev->f[i] = v;
		off += w;
	}
	return n;
}

/* Records a stored record stands for: two for a GPU_SPAN2, else one (the counts of lost and overwritten records). */
static inline unsigned sp_kind_records(unsigned kind)
{
	return kind == SP_K_GPU_SPAN2 ? 2u : 1u;
}

/*
 * GPU_SPAN2 (1.3): two GPU spans in one slot. Fills *a and *b with the two
 * GPU_SPAN records it stands for (a may be the pair itself; pid and tid are
 * copied; nslots is 1 for the first and 0 for the second, which shares its
 * slot). An api2 this reader does not know reads as none, as the head's api of
 * a newer minor does.
 *
 * RATIONALE: a GPU span is a third of a compute-bound trace's records (one per
 * timed launch or copy) and needs 5 payload bytes of its slot's 16; spans are
 * read back in batches at sync points, so two consecutive ones of a device
 * share a slot: the budget of <= 32 bytes per raw event (docs/architecture.md), which copies and
 * allocations (two slots each) otherwise exceed.
 */
static inline void sp_span2_split(const struct sp_event *pair, struct sp_event *a, struct sp_event *b)
{
	const struct sp_event pc = *pair, *p = &pc; /* a may be pair */
	*a = *p;
	a->kind = SP_K_GPU_SPAN;
	a->mask = sp_kind_mask[SP_K_GPU_SPAN];
	a->f[SP_F_OP_DELTA] = a->f[SP_F_API2] = a->f[SP_F_BEGIN_DELTA] = a->f[SP_F_DUR2] = 0;
	*b = *a;
	b->nslots = 0;
	b->api = p->f[SP_F_API2] < SP_API__COUNT ? (uint16_t)p->f[SP_F_API2] : 0;
	b->f[SP_F_OP] = (p->f[SP_F_OP] + p->f[SP_F_OP_DELTA]) & 0xffffffffu; /* the op field's 4 bytes */
	int64_t d = (int64_t)p->f[SP_F_BEGIN_DELTA];
	b->begin_ns = d < 0 && 0 - (uint64_t)d > p->begin_ns ? 0 : p->begin_ns + (uint64_t)d;
	b->end_ns = b->begin_ns + sp_dur_decode((uint32_t)p->f[SP_F_DUR2]);
}

/*
 * STRING records: ts = string id, dur = length, payload = the bytes (no NUL).
 * Ids start at 1; 0 means "no string".
 */
static inline unsigned sp_string_slots(unsigned len)
{
	return sp_slots_for_payload(len);
}

static inline unsigned sp_string_encode(struct sp_slot *s, uint32_t id, const char *str, unsigned len)
{
	unsigned n = sp_slots_for_payload(len);
	s->kind = 0;
	s->nslots = (uint8_t)n;
	s->api = 0;
	s->dur = len;
	s->ts = id;
	sp_put_payload(s, n, (const uint8_t *)str, len);
	return n;
}

/* Returns the slot count, 0 if not a valid STRING record; out gets len+1 bytes. */
static inline unsigned sp_string_decode(const struct sp_slot *s, unsigned avail, uint32_t *id, char *out,
					unsigned *len)
{
	if (s->kind != SP_K_STRING || s->dur > SP_MAX_STRING || s->ts == 0 || s->ts > 0xffffffu)
		return 0;
	unsigned n = sp_slots_for_payload(s->dur);
	if (s->nslots != n || n > avail)
		return 0;
	for (unsigned i = 1; i < n; i++)
		if (((const uint8_t *)&s[i])[0] != SP_K_CONT)
			return 0;
	sp_get_payload(s, n, (uint8_t *)out, s->dur);
	out[s->dur] = 0;
	*id = (uint32_t)s->ts;
	*len = s->dur;
	return n;
}

#endif /* STEPPROF_TRACE_H */
