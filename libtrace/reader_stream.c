/*
 * reader_stream.c - the records of an open trace (reader_int.h): its streams
 * merged by a min-heap on begin time, and the fast decoder.
 *
 * Divided into:
 *   1. streams: one per (pid, tid), its chunks in seq order, one chunk buffer,
 *   2. the public API: next/string/summary/stats/close.
 *
 * RATIONALE: a chunk's records are its first `used` slots (the recorder's commit);
 * slots past `used` are ignored even when they look valid, because a reused ring
 * chunk may still hold an older chunk's records there.
 */
#include "reader_int.h"

#include <stdlib.h>
#include <unistd.h>

/* ------------------------------------------------------------ 1. streams */

/*
 * The second read of a seqlock: the chunk's header read again after its slots.
 * A live writer that reuses a chunk (tf_chunks.c, claim) stores its state, then
 * used = 0, then the new seq, before it writes any slot; a chunk whose header
 * still has the seq the index saw and at least the `want` slots committed held
 * those slots, as committed, while they were read. 0 when it was reused since.
 */
static int chunk_unchanged(const struct sp_reader *r, uint64_t chunk_off, uint32_t key, uint32_t want)
{
	struct sp_chunk_header ch;
	__atomic_thread_fence(__ATOMIC_ACQUIRE); /* the slots before the header, as the writer's release orders them */
	if (pread_full(r->fd, &ch, sizeof(ch), chunk_off) < sizeof(ch))
		return 1; /* the file shrank since: the read of the slots says so */
	return ch.magic == SP_CHUNK_MAGIC && seq_key(ch.seq, r->hdr.ring_next_seq) == key && ch.used >= want;
}

/* Load the stream's next chunk; 0 when it has none left. */
static int stream_load(struct sp_reader *r, struct stream *s)
{
	while (s->next < s->first + s->count) {
		const struct chunk_ref *c = &r->chunks[s->next];
		uint32_t k = s->sub, last = k == c->run >> RUN_SHIFT;
		s->sub = last ? 0 : k + 1;
		s->next += last;
		uint32_t want = last ? c->run & RUN_SLOTS : r->chunk_slots, base = 0;
		uint64_t seq = 0;
		int known = seq_of_key(c->order + k, r->hdr.ring_next_seq, &seq);
		if (s->marked && known) {
			/* a follower's earlier reader consumed the chunks before its mark, and part of the mark's */
			if (seq < s->mark_seq)
				continue;
			if (seq == s->mark_seq)
				base = s->mark_slots;
			if (base >= want)
				continue;
		}
		if (!s->buf) {
			s->buf = malloc((size_t)r->chunk_slots * SP_SLOT_SIZE);
			if (!s->buf)
				return 0;
		}
		uint64_t chunk_off = r->ring_off + ((uint64_t)c->pos + k) * r->hdr.chunk_size;
		size_t got = pread_full(r->fd, s->buf, (size_t)(want - base) * SP_SLOT_SIZE,
					chunk_off + (SP_CHUNK_HDR_SLOTS + (uint64_t)base) * SP_SLOT_SIZE);
		s->nslots = (uint32_t)(got / SP_SLOT_SIZE);
		s->off = 0;
		s->cut = last && (c->run & RUN_CUT);
		if (s->nslots < want - base) {
			r->st.truncated = 1; /* the file shrank since open */
			s->cut = 1;
		}
		if (!chunk_unchanged(r, chunk_off, c->order + k, want)) {
			/* reused by the writer since the index: its records are overwritten ones, not damage */
			r->st.reused_chunks++;
			s->nslots = 0;
		}
		if (s->nslots) {
			s->loaded = known;
			s->cur_seq = seq;
			s->cur_base = base;
			return 1;
		}
	}
	return 0;
}

/*
 * Check the record at sl without decoding it: its slot count when it is a whole
 * record of a known kind (the same checks as sp_decode), NEWER_KIND for a newer
 * minor's kind to skip, 0 when the slots do not hold a record.
 */
static unsigned validate(const struct sp_reader *r, const struct sp_slot *sl, unsigned avail)
{
	unsigned kind = sl->kind, n;
	if (kind < SP_K__COUNT && r->lay[kind].ok) {
		n = r->lay[kind].nslots;
		if (sl->nslots != n || n > avail || (sl->api >= SP_API__COUNT && !r->newer_minor))
			return 0;
	} else if (r->newer_minor && kind >= SP_K__COUNT && kind != SP_K_CONT) {
		n = sl->nslots;
		if (n < 1 || n > SP_MAX_RECORD_SLOTS || n > avail)
			return 0;
	} else {
		return 0;
	}
	for (unsigned i = 1; i < n; i++)
		if (((const uint8_t *)&sl[i])[0] != SP_K_CONT)
			return 0;
	return kind < SP_K__COUNT ? n : NEWER_KIND;
}

/*
 * Decode a record validate() accepted. Same result as trace.h's sp_decode (a
 * unit test compares them on every kind), with the kind's field list, offsets
 * and widths precomputed: the reader spends its time here.
 */
static inline __attribute__((always_inline)) void decode_into(const struct kind_layout *lay, const struct sp_slot *sl,
								       struct sp_event *ev, int reuse)
{
	const struct kind_layout *L = &lay[sl->kind];
	uint8_t buf[SP_HEAD_PAYLOAD + (LAYOUT_MAX_SLOTS - 1) * SP_CONT_PAYLOAD + 8];
	unsigned len = SP_HEAD_PAYLOAD;
	memcpy(buf, sl->p, SP_HEAD_PAYLOAD);
	for (unsigned i = 1; i < L->nslots; i++, len += SP_CONT_PAYLOAD)
		memcpy(buf + len, (const uint8_t *)&sl[i] + 1, SP_CONT_PAYLOAD);
	memset(buf + len, 0, 8); /* fields are loaded 8 bytes at a time, then masked */
	ev->kind = sl->kind;
	ev->nslots = sl->nslots;
	ev->api = sl->api < SP_API__COUNT ? sl->api : 0; /* a newer minor's api reads as none */
	ev->begin_ns = sl->ts;
	ev->end_ns = sl->ts + sp_dur_decode(sl->dur);
	if (reuse) /* ev holds a decoded record: only its fields are not zero */
		for (uint64_t m = ev->mask; m; m &= m - 1)
			ev->f[__builtin_ctzll(m)] = 0;
	else
		memset(ev->f, 0, sizeof(ev->f));
	ev->mask = sp_kind_mask[sl->kind];
	for (unsigned j = 0; j < L->nfields; j++) {
		uint64_t v;
		unsigned w = L->width[j];
		memcpy(&v, buf + L->off[j], 8);
		if (w < 8) {
			v &= (1ull << (8 * w)) - 1;
			if (L->sign[j] && ((v >> (8 * w - 1)) & 1))
				v |= ~0ull << (8 * w);
		}
		ev->f[L->field[j]] = v;
	}
}

static inline __attribute__((always_inline)) void decode_with(const struct kind_layout *lay, const struct sp_slot *sl,
								       struct sp_event *ev)
{
	decode_into(lay, sl, ev, 0);
}

static void decode(const struct sp_reader *r, const struct sp_slot *sl, struct sp_event *ev)
{
	decode_with(r->lay, sl, ev);
}

/* Find the stream's next record (s->pending, s->key); 0 when the stream is finished. */
static int stream_advance(struct sp_reader *r, struct stream *s)
{
	for (;;) {
		while (s->buf && s->off < s->nslots) {
			const struct sp_slot *sl = &s->buf[s->off];
			unsigned avail = s->nslots - s->off;
			unsigned k;
			if (sl->kind == SP_K_STRING) {
				/* Strings live in the keep area; one in a chunk is skipped whole. */
				uint32_t id;
				unsigned len;
				char tmp[SP_MAX_STRING + 1];
				k = sp_string_decode(sl, avail, &id, tmp, &len);
				if (k) {
					s->off += k;
					continue;
				}
			} else {
				k = validate(r, sl, avail);
				if (k == NEWER_KIND) {
					s->off += sl->nslots;
					continue;
				}
				if (k) {
					s->pending = sl;
					s->key = sl->ts;
					s->off += k;
					return 1;
				}
			}
			if (s->cut && sl->nslots > avail) {
				s->off = s->nslots; /* the record the file was cut in */
				continue;
			}
			r->st.corrupt_slots++;
			r->st.corrupt = 1;
			s->off++;
		}
		if (s->keep || !stream_load(r, s)) {
			if (!s->keep)
				free(s->buf);
			s->buf = NULL;
			return 0;
		}
	}
}

/* The heap holds (key, stream) pairs: comparisons touch no stream. Ties: lower stream first. */
static int heap_less(const void *x, const void *y)
{
	const struct heap_ent *a = x, *b = y;
	return a->key != b->key ? a->key < b->key : a->idx < b->idx;
}

static inline __attribute__((always_inline)) void heap_down(struct sp_reader *r, size_t i)
{
	_Static_assert(sizeof(*r->heap) <= 16, "sift_down swaps through 16 bytes");
	sift_down(r->heap, sizeof(*r->heap), r->nheap, i, heap_less);
}

static void heap_up(struct sp_reader *r, size_t i)
{
	struct heap_ent *h = r->heap;
	while (i > 0) {
		size_t p = (i - 1) / 2;
		if (!heap_less(&h[i], &h[p]))
			return;
		struct heap_ent t = h[i];
		h[i] = h[p];
		h[p] = t;
		i = p;
	}
}

/* ------------------------------------------------------ 2. the public API */

/* A record returned: the stats (a LOST's count is the caller's). */
static inline __attribute__((always_inline)) void account_head(struct sp_reader *r, struct stream *s, unsigned kind,
								 unsigned nslots, uint64_t begin, uint64_t end)
{
	struct sp_reader_stats *st = &r->st;
	if (!st->records || begin < st->begin_ns)
		st->begin_ns = begin;
	if (end > st->end_ns)
		st->end_ns = end;
	st->records++;
	st->slots += nslots;
	st->by_kind[kind]++;
	if (!s->had_records && !s->keep) {
		s->had_records = 1;
		st->threads++;
	}
}

static inline __attribute__((always_inline)) void account(struct sp_reader *r, struct stream *s, const struct sp_event *ev)
{
	account_head(r, s, ev->kind, ev->nslots, ev->begin_ns, ev->end_ns);
	if (ev->kind == SP_K_LOST)
		r->st.lost += ev->f[SP_F_COUNT];
}

/* The stream on top of the heap (s) past its record: its next one keys it, or it leaves the heap. */
static inline __attribute__((always_inline)) void advance_top(struct sp_reader *r, struct stream *s)
{
	if (stream_advance(r, s)) {
		r->heap[0].key = s->key;
	} else {
		r->heap[0] = r->heap[--r->nheap];
	}
	if (r->nheap > 1)
		heap_down(r, 0);
}

/*
 * A GPU_SPAN2 at the top of the heap, decoded in *ev: its first span (1: the
 * stream stays at the record, keyed by the second span's begin) or its second
 * (0: the caller accounts it and advances).
 * RATIONALE: out of line, so that sp_reader_next keeps account and heap_down
 * inlined (with this in it the compiler called both: +4.6% instructions for
 * the analysis of a trace without any GPU_SPAN2, callgrind).
 */
static __attribute__((noinline)) int span2_half(struct sp_reader *r, struct stream *s, struct sp_event *ev)
{
	struct sp_event a, b;
	sp_span2_split(ev, &a, &b);
	*ev = s->second ? b : a;
	s->second = !s->second;
	if (!s->second)
		return 0;
	account(r, s, ev);
	r->heap[0].key = s->key = b.begin_ns;
	if (r->nheap > 1)
		heap_down(r, 0);
	return 1;
}

int sp_reader_next(struct sp_reader *r, struct sp_event *ev)
{
	if (!r->started) {
		r->started = 1;
		for (size_t i = 0; i < r->nstreams; i++)
			if (stream_advance(r, &r->streams[i])) {
				r->heap[r->nheap++] = (struct heap_ent){.key = r->streams[i].key, .idx = i};
				heap_up(r, r->nheap - 1);
			}
	}
	if (!r->nheap)
		return 0;
	struct stream *s = &r->streams[r->heap[0].idx];
	/* Decode before advancing: the next chunk may replace the buffer. */
	decode(r, s->pending, ev);
	ev->pid = s->pid;
	ev->tid = s->tid;
	if (__builtin_expect(ev->kind == SP_K_GPU_SPAN2, 0) && span2_half(r, s, ev))
		return 1;
	account(r, s, ev);
	advance_top(r, s);
	return 1;
}

unsigned sp_reader_next_raw(struct sp_reader *r, struct sp_slot *out, int32_t *tid, uint64_t *end_ns)
{
	if (!r->started || !r->nheap || r->streams[r->heap[0].idx].pending->kind == SP_K_GPU_SPAN2 ||
	    r->streams[r->heap[0].idx].pending->kind == SP_K_LOST) {
		/* the first record, a GPU_SPAN2's halves (re-keyed in the merge), a LOST's count: decoded */
		struct sp_event ev;
		if (!sp_reader_next(r, &ev))
			return 0;
		*tid = ev.tid;
		*end_ns = ev.end_ns;
		return sp_encode_fast(out, &ev);
	}
	struct stream *s = &r->streams[r->heap[0].idx];
	const struct sp_slot *sl = s->pending;
	unsigned n = sl->nslots; /* validate() accepted it: n slots of this kind, in buf */
	switch (n) { /* records are short: struct copies, not a string instruction's start-up (a tenth of a read) */
	case 4:
		out[3] = sl[3];
		/* fall through */
	case 3:
		out[2] = sl[2];
		/* fall through */
	case 2:
		out[1] = sl[1];
		/* fall through */
	case 1:
		out[0] = sl[0];
		break;
	default:
		memcpy(out, sl, (size_t)n * SP_SLOT_SIZE);
	}
	if (out->api >= SP_API__COUNT)
		out->api = 0; /* a newer minor's api reads as none, as decoded */
	*tid = s->tid;
	*end_ns = sl->ts + sp_dur_decode(sl->dur);
	account_head(r, s, sl->kind, n, sl->ts, *end_ns); /* validate() accepted it: a kind of this version */
	advance_top(r, s);
	return n;
}

size_t sp_reader_strings(const struct sp_reader *r, size_t i, uint32_t *id, const char **str)
{
	if (i >= r->nstrs)
		return 0;
	*id = r->strs[i].id;
	*str = r->pool + r->strs[i].off;
	return 1;
}

const char *sp_reader_string(const struct sp_reader *r, uint32_t id)
{
	size_t lo = 0, hi = r->nstrs;
	if (!id)
		return NULL;
	/* Lower bound: the first entry of this id (the first written wins). */
	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;
		if (r->strs[mid].id < id)
			lo = mid + 1;
		else
			hi = mid;
	}
	return lo < r->nstrs && r->strs[lo].id == id ? r->pool + r->strs[lo].off : NULL;
}

int sp_reader_summary(const struct sp_reader *r, size_t *pos, struct sp_event *ev)
{
	while (*pos < r->nsums) {
		const struct sp_slot *sl = &r->sums[*pos];
		unsigned k = sp_decode(sl, (unsigned)(r->nsums - *pos), ev);
		*pos += k ? k : 1;
		if (k) {
			ev->pid = r->hdr.pid;
			ev->tid = 0;
			return 1;
		}
	}
	return 0;
}

static int mark_cmp(const void *x, const void *y)
{
	const struct sp_reader_mark *a = x, *b = y;
	if (a->pid != b->pid)
		return a->pid < b->pid ? -1 : 1;
	return a->tid < b->tid ? -1 : a->tid > b->tid;
}

int sp_reader_resume(struct sp_reader *r, const struct sp_reader_mark *m, size_t n)
{
	if (r->started)
		return -1;
	struct sp_reader_mark *v = malloc((n ? n : 1) * sizeof(*v));
	if (!v)
		return -1;
	memcpy(v, m, n * sizeof(*v));
	qsort(v, n, sizeof(*v), mark_cmp);
	for (size_t i = 0; i < r->nstreams; i++) {
		struct stream *s = &r->streams[i];
		struct sp_reader_mark key = {.pid = s->pid, .tid = s->keep ? 0 : s->tid};
		const struct sp_reader_mark *f = bsearch(&key, v, n, sizeof(*v), mark_cmp);
		if (!f)
			continue;
		if (s->keep) {
			/* the keep area only grows: the records the earlier reader had are its first ones */
			s->off = f->slots < s->nslots ? f->slots : s->nslots;
			s->mark_slots = f->slots;
			s->marked = 1;
			continue;
		}
		s->marked = 1;
		s->mark_seq = f->seq;
		s->mark_slots = f->slots;
	}
	free(v);
	return 0;
}

size_t sp_reader_marks(const struct sp_reader *r, struct sp_reader_mark *out, size_t max)
{
	size_t n = 0;
	for (size_t i = 0; i < r->nstreams; i++) {
		const struct stream *s = &r->streams[i];
		struct sp_reader_mark m = {.pid = s->pid, .tid = s->keep ? 0 : s->tid};
		if (s->keep) {
			m.slots = s->nslots > s->mark_slots ? s->nslots : s->mark_slots;
		} else if (s->loaded) {
			m.seq = s->cur_seq;
			m.slots = s->cur_base + s->off;
		} else if (s->marked) {
			m.seq = s->mark_seq; /* nothing newer: the earlier mark holds */
			m.slots = s->mark_slots;
		} else {
			continue; /* nothing read whose seq is known */
		}
		if (n < max)
			out[n] = m;
		n++;
	}
	return n;
}

/* The layouts of sp_decode_fast: made once (every thread makes the same, a race is harmless). */
static struct kind_layout g_lay[SP_K__COUNT];
static int g_lay_ready;

static inline __attribute__((always_inline)) unsigned decode_fast(const struct sp_slot *sl, unsigned avail,
								   struct sp_event *ev, int reuse)
{
	if (!__atomic_load_n(&g_lay_ready, __ATOMIC_ACQUIRE)) {
		layouts_init(g_lay);
		__atomic_store_n(&g_lay_ready, 1, __ATOMIC_RELEASE);
	}
	unsigned kind = sl->kind;
	if (kind == SP_K_NONE || kind >= SP_K__COUNT || kind == SP_K_STRING || !g_lay[kind].ok)
	{
		if (reuse) { /* sp_decode may fill part of ev before it fails: all of it cleared */
			memset(ev->f, 0, sizeof(ev->f));
			ev->mask = 0;
		}
		return sp_decode(sl, avail, ev);
	}
	unsigned n = g_lay[kind].nslots;
	if (sl->nslots != n || n > avail || sl->api >= SP_API__COUNT)
		return 0;
	for (unsigned i = 1; i < n; i++)
		if (((const uint8_t *)&sl[i])[0] != SP_K_CONT)
			return 0;
	decode_into(g_lay, sl, ev, reuse);
	return n;
}

unsigned sp_decode_fast(const struct sp_slot *sl, unsigned avail, struct sp_event *ev)
{
	return decode_fast(sl, avail, ev, 0);
}

unsigned sp_decode_again(const struct sp_slot *sl, unsigned avail, struct sp_event *ev)
{
	return decode_fast(sl, avail, ev, 1);
}

unsigned sp_encode_fast(struct sp_slot *s, const struct sp_event *ev)
{
	if (!__atomic_load_n(&g_lay_ready, __ATOMIC_ACQUIRE)) {
		layouts_init(g_lay);
		__atomic_store_n(&g_lay_ready, 1, __ATOMIC_RELEASE);
	}
	unsigned kind = ev->kind;
	if (kind == SP_K_NONE || kind >= SP_K__COUNT || kind == SP_K_STRING)
		return 0;
	const struct kind_layout *L = &g_lay[kind];
	if (!L->ok) {
		unsigned n = sp_encode(s, kind, ev->api, ev->begin_ns, ev->end_ns - ev->begin_ns, ev->f);
		s->kind = (uint8_t)kind;
		return n;
	}
	uint8_t buf[SP_HEAD_PAYLOAD + (LAYOUT_MAX_SLOTS - 1) * SP_CONT_PAYLOAD + 8];
	unsigned len = 0;
	for (unsigned j = 0; j < L->nfields; j++) {
		uint64_t v = ev->f[L->field[j]];
		memcpy(buf + L->off[j], &v, 8); /* little-endian: the low bytes; the next field overwrites the rest */
		len = L->off[j] + L->width[j];
	}
	s->kind = (uint8_t)kind;
	s->nslots = L->nslots;
	s->api = ev->api;
	s->dur = sp_dur_encode(ev->end_ns - ev->begin_ns);
	s->ts = ev->begin_ns;
	sp_put_payload(s, L->nslots, buf, len);
	return L->nslots;
}

const struct sp_reader_stats *sp_reader_stats(const struct sp_reader *r)
{
	return &r->st;
}

void sp_reader_close(struct sp_reader *r)
{
	if (!r)
		return;
	registry_remove(r);
	for (size_t i = 0; i < r->nstreams; i++)
		if (!r->streams[i].keep)
			free(r->streams[i].buf);
	free(r->streams);
	free(r->heap);
	free(r->chunks);
	free(r->kept);
	free(r->sums);
	free(r->strs);
	free(r->pool);
	free(r->path);
	if (r->fd >= 0)
		close(r->fd);
	free(r);
}
