/*
 * reader.c - the streaming reader of one trace file (reader.h): opening it.
 * Streaming and decoding its records is reader_stream.c's; the state both
 * share is in reader_int.h.
 *
 * Divided into:
 *   1. helpers,
 *   2. open: header checks (foreign, newer major, geometry), the keep area
 *      (strings and kept records), the ring's chunk index (at most 16 bytes a
 *      chunk: the one part of the reader's memory that grows with the file),
 *      one stream per (pid, tid).
 *
 * Every byte of the file is untrusted. Sizes and counts from the file are
 * clamped to what the file holds, so a corrupt header cannot make the reader
 * allocate or loop beyond the file's length; all reads are pread() of one chunk
 * (or one 64 KiB block of the keep area) at a time, never a whole-file mapping.
 */
#include "reader_int.h"
#include "hashmap.h"

#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

/* ------------------------------------------------------------- 1. helpers */

#define KEEP_BLOCK_SLOTS 2048u /* keep area read 64 KiB at a time */
#define MAX_HEADER_SIZE (1u << 20)

/* The (pid, tid) of the ring's chunks while they are indexed, hashed: thousands of threads stay fast. */
struct thread_ent {
	int32_t pid, tid;
	uint32_t idx; /* its index in the table before sorting */
};
struct thread_tab {
	struct thread_ent *t;
	uint32_t n, cap;
	struct hashmap map; /* (pid << 32 | tid) -> table index + 1 */
};

static void set_err(char *err, size_t errlen, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static void set_err(char *err, size_t errlen, const char *fmt, ...)
{
	if (!err || !errlen)
		return;
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(err, errlen, fmt, ap);
	va_end(ap);
}

/* pread all of n bytes, or as many as the file has; returns bytes read. */
size_t pread_full(int fd, void *buf, size_t n, uint64_t off)
{
	size_t got = 0;
	while (got < n) {
		ssize_t r = pread(fd, (char *)buf + got, n - got, (off_t)(off + got));
		if (r < 0 && errno == EINTR)
			continue;
		if (r <= 0)
			break;
		got += (size_t)r;
	}
	return got;
}

/* ------------------------------------------------------------- 2. open */

static int check_header(struct sp_reader *r, size_t got, char *err, size_t errlen)
{
	const struct sp_file_header *h = &r->hdr;
	if (got < sizeof(h->magic) && got > 0 && memcmp(h->magic, SP_MAGIC, got) == 0) {
		set_err(err, errlen, "truncated: the file header is incomplete (%zu bytes)", got);
		return -1;
	}
	if (got < sizeof(h->magic) || memcmp(h->magic, SP_MAGIC, sizeof(h->magic)) != 0) {
		set_err(err, errlen, "not a stepprof trace (no STEPPROF magic)");
		return -1;
	}
	if (got < offsetof(struct sp_file_header, header_size)) {
		set_err(err, errlen, "truncated: the file header is incomplete (%zu bytes)", got);
		return -1;
	}
	if (h->version_major > SP_VERSION_MAJOR) {
		set_err(err, errlen, "trace format version %u.%u is newer than this reader (%u.%u); update stepprof",
			h->version_major, h->version_minor, SP_VERSION_MAJOR, SP_VERSION_MINOR);
		return -1;
	}
	if (h->version_major < 1) {
		set_err(err, errlen, "unsupported trace format version %u.%u", h->version_major, h->version_minor);
		return -1;
	}
	if (got < sizeof(*h)) {
		set_err(err, errlen, "truncated: the file header is incomplete (%zu of %u bytes)", got, SP_HEADER_SIZE);
		return -1;
	}
	if (h->endian != SP_ENDIAN_TAG) {
		if (h->endian == __builtin_bswap32(SP_ENDIAN_TAG))
			set_err(err, errlen, "written with the other byte order (big-endian producer): not supported");
		else
			set_err(err, errlen, "corrupt header: bad byte-order tag 0x%08x", h->endian);
		return -1;
	}
	if (h->header_size < sizeof(*h) || h->header_size > MAX_HEADER_SIZE || h->header_size % SP_SLOT_SIZE) {
		set_err(err, errlen, "corrupt header: header_size %u", h->header_size);
		return -1;
	}
	if (h->chunk_size % SP_SLOT_SIZE || h->chunk_size < SP_CHUNK_SIZE_MIN || h->chunk_size > SP_CHUNK_SIZE_MAX) {
		set_err(err, errlen, "corrupt header: chunk_size %u (a multiple of %u from %u to %u)", h->chunk_size,
			SP_SLOT_SIZE, SP_CHUNK_SIZE_MIN, SP_CHUNK_SIZE_MAX);
		return -1;
	}
	if (h->keep_slots > SP_KEEP_SLOTS_MAX) {
		set_err(err, errlen, "corrupt header: keep_slots %llu (at most %llu)", (unsigned long long)h->keep_slots,
			(unsigned long long)SP_KEEP_SLOTS_MAX);
		return -1;
	}
	/* no overflow: header_size < 2^21, keep_slots * 32 <= 2^45, ring_chunks * chunk_size < 2^52 */
	uint64_t ring_off = h->header_size + h->keep_slots * SP_SLOT_SIZE;
	uint64_t size = ring_off + (uint64_t)h->ring_chunks * h->chunk_size;
	if (h->file_size != size) {
		set_err(err, errlen,
			"corrupt header: file_size %llu, but its geometry (header %u + keep_slots %llu x %u + "
			"ring_chunks %u x chunk_size %u) makes %llu",
			(unsigned long long)h->file_size, h->header_size, (unsigned long long)h->keep_slots, SP_SLOT_SIZE,
			h->ring_chunks, h->chunk_size, (unsigned long long)size);
		return -1;
	}
	return 0;
}

static int str_cmp(const void *a, const void *b)
{
	const struct str_ent *x = a, *y = b;
	if (x->id != y->id)
		return x->id < y->id ? -1 : 1;
	return x->order < y->order ? -1 : x->order > y->order;
}

static void add_string(struct sp_reader *r, uint32_t id, const char *s, unsigned len, uint64_t order, size_t *cap,
		       size_t *pcap)
{
	if (r->nstrs == *cap) {
		size_t nc = *cap ? *cap * 2 : 256;
		struct str_ent *n = realloc(r->strs, nc * sizeof(*n));
		if (!n)
			return;
		r->strs = n;
		*cap = nc;
	}
	if (r->pool_len + len + 1 > *pcap) {
		size_t nc = (*pcap ? *pcap : 4096);
		while (nc < r->pool_len + len + 1)
			nc *= 2;
		char *n = realloc(r->pool, nc);
		if (!n)
			return;
		r->pool = n;
		*pcap = nc;
	}
	memcpy(r->pool + r->pool_len, s, len);
	r->pool[r->pool_len + len] = 0;
	r->strs[r->nstrs++] = (struct str_ent){.id = id, .off = (uint32_t)r->pool_len, .order = order};
	r->pool_len += len + 1;
	r->st.strings++;
}

/*
 * A record a newer minor version may hold: a kind appended to kinds.def after
 * this reader was built (skipped whole, not corruption), or a known kind whose
 * api was appended to apis.def (decoded with api 0). Returns NEWER_KIND for a
 * record to skip, the slot count for a decoded one, 0 when it is corrupt anyway.
 */
static unsigned decode_newer(const struct sp_slot *sl, unsigned avail, struct sp_event *ev)
{
	unsigned n = sl->nslots;
	if (sl->kind == SP_K_NONE || sl->kind == SP_K_CONT || n < 1 || n > SP_MAX_RECORD_SLOTS || n > avail)
		return 0;
	for (unsigned i = 1; i < n; i++)
		if (((const uint8_t *)&sl[i])[0] != SP_K_CONT)
			return 0;
	if (sl->kind >= SP_K__COUNT)
		return NEWER_KIND;
	if (sl->api < SP_API__COUNT)
		return 0;
	struct sp_slot tmp[SP_MAX_RECORD_SLOTS];
	memcpy(tmp, sl, n * SP_SLOT_SIZE);
	tmp[0].api = 0;
	return sp_decode(tmp, n, ev);
}

/*
 * The keep area: strings into the table, other records kept raw (their bytes are
 * bounded by the keep area, like the strings). Read in blocks that overlap by
 * one record's worth so a record never straddles a block boundary.
 */
static void load_keep(struct sp_reader *r)
{
	const struct sp_file_header *h = &r->hdr;
	uint64_t n = h->keep_next_slot;
	if (n > h->keep_slots) {
		r->st.corrupt = 1;
		n = h->keep_slots;
	}
	uint64_t avail = r->fsize > h->header_size ? (r->fsize - h->header_size) / SP_SLOT_SIZE : 0;
	int cut = 0;
	if (n > avail) {
		r->st.truncated = 1;
		cut = 1;
		n = avail;
	}
	if (!n)
		return;
	size_t scap = 0, pcap = 0, kcap = 0, scap2 = 0;
	struct sp_slot *blk = malloc((KEEP_BLOCK_SLOTS + SP_MAX_RECORD_SLOTS) * SP_SLOT_SIZE);
	if (!blk)
		return;
	char str[SP_MAX_STRING + 1];
	uint64_t i = 0; /* current slot of the keep area */
	int after_hole = 0;
	while (i < n) {
		uint64_t want =
		    n - i < KEEP_BLOCK_SLOTS + SP_MAX_RECORD_SLOTS ? n - i : KEEP_BLOCK_SLOTS + SP_MAX_RECORD_SLOTS;
		size_t got = pread_full(r->fd, blk, (size_t)want * SP_SLOT_SIZE, h->header_size + i * SP_SLOT_SIZE);
		uint32_t have = (uint32_t)(got / SP_SLOT_SIZE);
		if (!have) {
			r->st.truncated = 1;
			break;
		}
		/* Consume records that start in the first KEEP_BLOCK_SLOTS (or all, at the end). */
		uint32_t limit = i + have >= n ? have : (have < KEEP_BLOCK_SLOTS ? have : KEEP_BLOCK_SLOTS);
		uint32_t j = 0;
		while (j < limit) {
			const struct sp_slot *s = &blk[j];
			uint32_t id;
			unsigned len, k;
			if (s->kind == SP_K_NONE) {
				/* A reserved slot whose record was never committed (crash): not corruption. */
				after_hole = 1;
				j++;
				continue;
			}
			if (s->kind == SP_K_STRING) {
				k = sp_string_decode(s, have - j, &id, str, &len);
				if (k) {
					add_string(r, id, str, len, i + j, &scap, &pcap);
					after_hole = 0;
					j += k;
					continue;
				}
			} else if (s->kind != SP_K_CONT) {
				struct sp_event ev;
				k = sp_decode(s, have - j, &ev);
				if (!k && r->newer_minor)
					k = decode_newer(s, have - j, &ev);
				if (k == NEWER_KIND) {
					after_hole = 0;
					j += s->nslots;
					continue;
				}
				if (k && (s->kind == SP_K_SUMMARY || s->kind == SP_K_SUMMARY_DEVICE)) {
					/* summaries are read apart (sp_reader_summary), not merged as events */
					if (r->nsums + k > scap2) {
						size_t nc = scap2 ? scap2 * 2 : 64;
						struct sp_slot *ns = realloc(r->sums, nc * sizeof(*ns));
						if (ns) {
							r->sums = ns;
							scap2 = nc;
						}
					}
					if (r->nsums + k <= scap2) {
						memcpy(&r->sums[r->nsums], s, k * SP_SLOT_SIZE);
						r->nsums += k;
						r->st.summaries += s->kind == SP_K_SUMMARY;
					}
					after_hole = 0;
					j += k;
					continue;
				}
				if (k) {
					if (r->nkept + k > kcap) {
						size_t nc = kcap ? kcap * 2 : 64;
						while (nc < r->nkept + k)
							nc *= 2;
						struct sp_slot *nk = realloc(r->kept, nc * sizeof(*nk));
						if (nk) {
							r->kept = nk;
							kcap = nc;
						}
					}
					if (r->nkept + k <= kcap) {
						memcpy(&r->kept[r->nkept], s, k * SP_SLOT_SIZE);
						r->nkept += k;
					}
					after_hole = 0;
					j += k;
					continue;
				}
			} else if (after_hole) {
				/* Continuation of an uncommitted record. */
				j++;
				continue;
			}
			if (cut && i + have >= n && s->nslots > have - j)
				break; /* the record the file was cut in: truncation, not corruption */
			r->st.corrupt_slots++;
			r->st.corrupt = 1;
			j++;
		}
		if (j < limit)
			break;
		i += j;
	}
	free(blk);
	if (r->nstrs > 1)
		qsort(r->strs, r->nstrs, sizeof(*r->strs), str_cmp);
}

void layouts_init(struct kind_layout *lay)
{
	for (unsigned k = 1; k < SP_K__COUNT; k++) {
		struct kind_layout *L = &lay[k];
		unsigned off = 0, n = 0;
		if (k == SP_K_STRING)
			continue;
		for (unsigned i = 0; i < SP_F__COUNT; i++)
			if ((sp_kind_mask[k] >> i) & 1) {
				L->field[n] = (uint8_t)i;
				L->off[n] = (uint8_t)off;
				L->width[n] = sp_field_width[i];
				L->sign[n] = sp_field_type[i] == SP_T_I;
				off += sp_field_width[i];
				n++;
			}
		L->nfields = (uint8_t)n;
		L->nslots = (uint8_t)sp_slots_for_payload(off);
		L->ok = L->nslots <= LAYOUT_MAX_SLOTS;
	}
}

static int is_zero(const void *p, size_t n)
{
	const uint8_t *b = p;
	for (size_t i = 0; i < n; i++)
		if (b[i])
			return 0;
	return 1;
}

/* The index of (pid, tid) in the table, added when new; UINT32_MAX when out of memory. */
static uint32_t thread_find(struct thread_tab *tt, int32_t pid, int32_t tid)
{
	uint64_t key = (uint64_t)(uint32_t)pid << 32 | (uint32_t)tid;
	union hashmap_val *v = hashmap_slot(&tt->map, key, true);
	if (!v)
		return UINT32_MAX;
	if (v->u)
		return (uint32_t)v->u - 1;
	if (tt->n == tt->cap) {
		uint32_t nc = tt->cap ? 2 * tt->cap : 16;
		struct thread_ent *n = realloc(tt->t, nc * sizeof(*n));
		if (!n) {
			hashmap_del(&tt->map, key);
			return UINT32_MAX;
		}
		tt->t = n;
		tt->cap = nc;
	}
	tt->t[tt->n] = (struct thread_ent){.pid = pid, .tid = tid, .idx = tt->n};
	v->u = ++tt->n;
	return tt->n - 1;
}

static int thread_cmp(const void *a, const void *b)
{
	const struct thread_ent *x = a, *y = b;
	if (x->pid != y->pid)
		return x->pid < y->pid ? -1 : 1;
	return x->tid < y->tid ? -1 : x->tid > y->tid;
}

/* The sort's order (greatest on top): by thread, by seq, then by position (equal seqs: a damaged file). */
static int ref_after(const void *x, const void *y)
{
	const struct chunk_ref *a = x, *b = y;
	if (a->thread != b->thread)
		return a->thread > b->thread;
	if (a->order != b->order)
		return a->order > b->order;
	return a->pos > b->pos;
}

/* RATIONALE: heapsort, in place: qsort (glibc's merge sort) would take a second index's worth of memory. */
static void sort_refs(struct chunk_ref *v, size_t n)
{
	_Static_assert(sizeof(*v) <= 16, "sift_down swaps through 16 bytes");
	for (size_t i = n / 2; i-- > 0;)
		sift_down(v, sizeof(*v), n, i, ref_after);
	for (size_t end = n; end-- > 1;) {
		struct chunk_ref t = v[0];
		v[0] = v[end];
		v[end] = t;
		sift_down(v, sizeof(*v), end, 0, ref_after);
	}
}

/*
 * Index the ring: one pread of a chunk header per position the file holds. The
 * index is sized at once from the chunks the header says were handed out, up
 * to 2^20 (an upper bound unless the counter is damaged; pages never written
 * take no memory), so it does not grow by copies; the threads get their (pid, tid)
 * order as ranks and the index is sorted in place.
 */
static int u64_cmp(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
	return x < y ? -1 : x > y;
}

/* A chunk still written: listed by its seq, or (the list full) folded into from_seq. */
static void follow_add(struct sp_reader_follow *f, uint64_t seq)
{
	if (f->n < SP_FOLLOW_MAX)
		f->seq[f->n++] = seq;
	else if (seq < f->from_seq)
		f->from_seq = seq;
}

static int index_ring(struct sp_reader *r, struct thread_tab *tt)
{
	const struct sp_file_header *h = &r->hdr;
	r->ring_off = h->header_size + h->keep_slots * SP_SLOT_SIZE;
	r->chunk_slots = h->chunk_size / SP_SLOT_SIZE - SP_CHUNK_HDR_SLOTS;
	uint64_t handed = h->ring_next_seq < h->ring_chunks ? h->ring_next_seq : h->ring_chunks;
	uint64_t in_file = r->fsize > r->ring_off ? (r->fsize - r->ring_off + h->chunk_size - 1) / h->chunk_size : 0;
	if (in_file < handed)
		r->st.truncated = 1;
	uint64_t npos = in_file < h->ring_chunks ? in_file : h->ring_chunks; /* < 2^32: ring_chunks is 32 bits */
	size_t cap = handed < npos ? handed : npos;
	cap = cap < 16 ? 16 : cap > (1u << 20) ? (1u << 20) : cap;
	r->chunks = malloc(cap * sizeof(*r->chunks));
	if (!r->chunks)
		return -1;
	uint64_t next = h->ring_next_seq;
	r->follow.from_seq = next;
	r->follow.n = 0;
	/*
	 * sp_reader_open_follow: the positions of seqs from_seq..next-1 and of the
	 * chunks still written at the last read (ring_chunks positions hold the
	 * last ring_chunks seqs), visited in position order.
	 */
	const struct sp_reader_follow *only = r->only;
	uint64_t oldest = next > h->ring_chunks ? next - h->ring_chunks : 0;
	int partial = only && h->ring_chunks && only->from_seq > oldest;
	uint64_t apos[SP_FOLLOW_MAX];
	size_t na = 0, ja = 0;
	if (partial) {
		for (uint32_t i = 0; i < only->n && i < SP_FOLLOW_MAX; i++)
			if (only->seq[i] >= oldest && only->seq[i] < next)
				apos[na++] = only->seq[i] % h->ring_chunks;
		qsort(apos, na, sizeof(apos[0]), u64_cmp);
	}
	for (uint64_t pos = 0; pos < npos; pos++) {
		if (partial) {
			/* the newest seq handed out at pos: next-1 less its distance to pos, modulo the ring */
			uint64_t last = next ? next - 1 : 0;
			uint64_t d = (last % h->ring_chunks + h->ring_chunks - pos) % h->ring_chunks;
			while (ja < na && apos[ja] < pos)
				ja++;
			int active = ja < na && apos[ja] == pos;
			if (!next || last < d || (last - d < only->from_seq && !active))
				continue;
		}
		uint64_t off = r->ring_off + pos * h->chunk_size;
		struct sp_chunk_header ch;
		size_t got = pread_full(r->fd, &ch, sizeof(ch), off);
		r->st.indexed_chunks++;
		if (got < sizeof(ch)) {
			if (!is_zero(&ch, got) || pos < handed)
				r->st.truncated = 1;
			break;
		}
		if (is_zero(&ch, sizeof(ch))) {
			/*
			 * Never used. Chunks are handed out in position order until the ring
			 * wraps, so past ring_next_seq the rest is unused too: stop there
			 * rather than read a header per 64 KiB of a mostly sparse file. The
			 * scan goes on past the counter while headers are non-zero, in case
			 * the counter itself is damaged.
			 */
			if (pos >= handed)
				break;
			/*
			 * Before the counter (damaged, or chunks that were never written):
			 * skip a hole of the file to its next data at once, so that a sparse
			 * file whose header claims billions of chunks is not read header by
			 * header. A hole reads as zeros; where SEEK_DATA is not supported the
			 * whole file is data and nothing is skipped.
			 */
			uint64_t next = pos + 1;
			off_t d = lseek(r->fd, (off_t)(off + sizeof(ch)), SEEK_DATA);
			if (d < 0 && errno == ENXIO)
				next = npos - 1; /* holes up to the end: the last position only (cut short?) */
			else if (d > 0 && (uint64_t)d > off + sizeof(ch))
				next = ((uint64_t)d - r->ring_off) / h->chunk_size;
			if (next > pos + 1)
				pos = next - 1;
			continue;
		}
		if (ch.magic != SP_CHUNK_MAGIC || ch.state > SP_CHUNK_CLOSED) {
			r->st.corrupt = 1;
			r->st.corrupt_slots += SP_CHUNK_HDR_SLOTS;
			continue;
		}
		if (ch.state == SP_CHUNK_ACTIVE && ch.seq < next)
			follow_add(&r->follow, ch.seq); /* still written (empty ones too): a later read must index it */
		if (ch.state == SP_CHUNK_FREE || !ch.used)
			continue;
		uint32_t used = ch.used;
		if (used > r->chunk_slots) {
			r->st.corrupt = 1;
			r->st.corrupt_slots++;
			used = r->chunk_slots;
		}
		uint64_t whole = r->fsize > off ? (r->fsize - off) / SP_SLOT_SIZE : 0;
		whole = whole > SP_CHUNK_HDR_SLOTS ? whole - SP_CHUNK_HDR_SLOTS : 0;
		int cut = 0;
		if (used > whole) {
			r->st.truncated = 1;
			cut = 1;
			used = (uint32_t)whole;
		}
		if (!used)
			continue;
		uint32_t t = thread_find(tt, ch.pid, ch.tid);
		if (t == UINT32_MAX)
			return -1;
		uint32_t key = seq_key(ch.seq, h->ring_next_seq);
		struct chunk_ref *last = r->nchunks ? &r->chunks[r->nchunks - 1] : NULL;
		if (last && last->thread == t && (last->run & (RUN_SLOTS | RUN_CUT)) == r->chunk_slots) {
			/* the next chunk of the previous entry's run: its position and seq follow */
			uint32_t more = (last->run >> RUN_SHIFT) + 1;
			if (more < RUN_MAX && (uint64_t)last->pos + more == pos &&
			    (uint64_t)last->order + more == key && key != UINT32_MAX) {
				last->run = more << RUN_SHIFT | used | (cut ? RUN_CUT : 0);
				continue;
			}
		}
		if (r->nchunks == cap) {
			/* more than 2^20 chunks, or more than handed out (a damaged counter) */
			struct chunk_ref *n = realloc(r->chunks, 2 * cap * sizeof(*n));
			if (!n)
				return -1;
			r->chunks = n;
			cap *= 2;
		}
		r->chunks[r->nchunks++] = (struct chunk_ref){
		    .thread = t, .order = key, .pos = (uint32_t)pos, .run = used | (cut ? RUN_CUT : 0)};
	}
	if (r->nchunks < cap) {
		struct chunk_ref *n = realloc(r->chunks, (r->nchunks ? r->nchunks : 1) * sizeof(*n));
		if (n)
			r->chunks = n;
	}
	/* the threads in (pid, tid) order: each chunk's thread becomes its rank */
	uint32_t *rank = malloc((tt->n ? tt->n : 1) * sizeof(*rank));
	if (!rank)
		return -1;
	if (tt->n > 1)
		qsort(tt->t, tt->n, sizeof(*tt->t), thread_cmp);
	for (uint32_t i = 0; i < tt->n; i++)
		rank[tt->t[i].idx] = i;
	for (size_t i = 0; i < r->nchunks; i++)
		r->chunks[i].thread = rank[r->chunks[i].thread];
	free(rank);
	sort_refs(r->chunks, r->nchunks);
	return 0;
}

/* One stream per thread of the index (tt, sorted by index_ring), after the keep area's. */
static int make_streams(struct sp_reader *r, const struct thread_tab *tt)
{
	size_t n = (r->nkept ? 1 : 0) + tt->n;
	r->streams = calloc(n ? n : 1, sizeof(*r->streams));
	r->heap = calloc(n ? n : 1, sizeof(*r->heap));
	if (!r->streams || !r->heap)
		return -1;
	size_t k = 0;
	if (r->nkept) {
		struct stream *s = &r->streams[k++];
		s->pid = r->hdr.pid;
		s->tid = 0;
		s->keep = 1;
		s->buf = r->kept;
		s->nslots = r->nkept;
	}
	for (size_t i = 0; i < r->nchunks; i++) {
		if (i == 0 || r->chunks[i].thread != r->chunks[i - 1].thread) {
			struct stream *s = &r->streams[k++];
			s->pid = tt->t[r->chunks[i].thread].pid;
			s->tid = tt->t[r->chunks[i].thread].tid;
			s->first = i;
			s->next = i;
		}
		r->streams[k - 1].count++;
	}
	r->nstreams = k;
	return 0;
}

/*
 * The open readers, for sp_reader_find: the analysis holds copies of the headers,
 * not the readers. NOTE: not thread-safe; the analyzer opens and closes readers
 * from one thread.
 */
static struct sp_reader **g_open;
static size_t g_nopen, g_capopen;

static void registry_add(struct sp_reader *r)
{
	if (g_nopen == g_capopen) {
		size_t nc = g_capopen ? g_capopen * 2 : 16;
		struct sp_reader **v = realloc(g_open, nc * sizeof(*v));
		if (!v)
			return; /* not findable: its summaries are not used, nothing else changes */
		g_open = v;
		g_capopen = nc;
	}
	g_open[g_nopen++] = r;
}

void registry_remove(struct sp_reader *r)
{
	for (size_t i = 0; i < g_nopen; i++)
		if (g_open[i] == r) {
			g_open[i] = g_open[--g_nopen];
			return;
		}
}

const struct sp_reader *sp_reader_find(const struct sp_file_header *h)
{
	for (size_t i = 0; i < g_nopen; i++) {
		const struct sp_file_header *x = &g_open[i]->hdr;
		/* NOTE: not the pid: the merge may renumber it (processes of several hosts sharing one) */
		if (x->start_mono_ns == h->start_mono_ns && x->start_real_ns == h->start_real_ns &&
		    !memcmp(x->host, h->host, sizeof(x->host)) && !memcmp(x->cmdline, h->cmdline, sizeof(x->cmdline)))
			return g_open[i];
	}
	return NULL;
}

int sp_reader_open(const char *path, struct sp_reader **out, char *err, size_t errlen)
{
	return sp_reader_open_follow(path, NULL, out, err, errlen);
}

void sp_reader_follow(const struct sp_reader *r, struct sp_reader_follow *out)
{
	*out = r->follow;
}

int sp_reader_open_follow(const char *path, const struct sp_reader_follow *follow, struct sp_reader **out, char *err,
			  size_t errlen)
{
	*out = NULL;
	/* O_NONBLOCK: opening a FIFO nobody writes to must not hang (regular files ignore it) */
	int fd = open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK);
	if (fd < 0) {
		set_err(err, errlen, "%s", strerror(errno));
		return -1;
	}
	struct stat sb;
	if (fstat(fd, &sb) < 0) {
		set_err(err, errlen, "%s", strerror(errno));
		close(fd);
		return -1;
	}
	if (S_ISDIR(sb.st_mode)) {
		set_err(err, errlen, "is a directory, not a trace file");
		close(fd);
		return -1;
	}
	if (!S_ISREG(sb.st_mode)) {
		/* a trace is read with pread at offsets: a pipe, socket or device cannot be one */
		set_err(err, errlen, "not a regular file (a trace is read at offsets: copy it to a file first)");
		close(fd);
		return -1;
	}
	struct sp_reader *r = calloc(1, sizeof(*r));
	if (!r) {
		set_err(err, errlen, "out of memory");
		close(fd);
		return -1;
	}
	r->fd = fd;
	r->fsize = (uint64_t)sb.st_size;
	r->only = follow;
	size_t got = pread_full(fd, &r->hdr, sizeof(r->hdr), 0);
	if (check_header(r, got, err, errlen)) {
		sp_reader_close(r);
		return -1;
	}
	/* 1.5's CPU fields: unknown (0) in an older file, whatever its bytes there */
	if (r->hdr.version_major == 1 && r->hdr.version_minor < 5) {
		r->hdr.online_cpus = r->hdr.cpu_affinity_count = 0;
		memset(r->hdr.cpu_affinity, 0, sizeof(r->hdr.cpu_affinity));
	}
	r->path = strdup(path);
	layouts_init(r->lay);
	r->newer_minor = r->hdr.version_major == SP_VERSION_MAJOR && r->hdr.version_minor > SP_VERSION_MINOR;
	r->st.lost = r->hdr.lost_records;
	r->st.overwritten = r->hdr.overwritten_records;
	if (r->fsize < r->hdr.header_size || r->fsize < r->hdr.file_size)
		r->st.truncated = 1;
	load_keep(r);
	struct thread_tab tt = {0};
	int bad = index_ring(r, &tt) || make_streams(r, &tt) || !r->path;
	r->only = NULL; /* the caller's, for the index only */
	free(tt.t);
	hashmap_free(&tt.map);
	if (bad) {
		set_err(err, errlen, "out of memory");
		sp_reader_close(r);
		return -1;
	}
	registry_add(r);
	*out = r;
	return 0;
}

const struct sp_file_header *sp_reader_header(const struct sp_reader *r)
{
	return &r->hdr;
}

const char *sp_reader_path(const struct sp_reader *r)
{
	return r->path;
}
