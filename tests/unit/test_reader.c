/*
 * test_reader.c - the streaming trace reader (libtrace/reader.c) on files built
 * by tracegen (tests/lib/tracegen.c), so the expected records are the ones the
 * test wrote.
 *
 * Divided into:
 *   1. helpers: an image in a memfd opened through /proc/self/fd, read-all,
 *   2. reading back: records, order, strings, stats, several threads and
 *      processes, ring wrap (overwritten), the chunk index (thousands of
 *      threads, seqs across 2^32, damaged seqs, its memory), kept records,
 *      active chunks,
 *   3. damage: truncation at every byte offset, 1,000 copies with random byte
 *      flips (fixed seed), targeted corruption, foreign and newer-major files.
 */
#include <criterion/criterion.h>
#include <malloc.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "reader.h"
#include "testlib.h"
#include "tracegen.h"

/* ----------------------------------------------------------- 1. helpers */

struct memfile {
	int fd;
	char path[64];
};

static void mf_open(struct memfile *m)
{
	m->fd = memfd_create("sptrace", MFD_CLOEXEC);
	cr_assert(m->fd >= 0);
	snprintf(m->path, sizeof(m->path), "/proc/self/fd/%d", m->fd);
}

/* Make the memfd hold exactly img[0..len). */
static void mf_set(struct memfile *m, const uint8_t *img, size_t len)
{
	cr_assert_eq(ftruncate(m->fd, 0), 0);
	size_t off = 0;
	while (off < len) {
		ssize_t w = pwrite(m->fd, img + off, len - off, (off_t)off);
		cr_assert(w > 0);
		off += (size_t)w;
	}
}

struct readout {
	int rc;
	char err[256];
	struct sp_event *ev;
	size_t n;
	struct sp_reader_stats st;
	struct sp_file_header hdr;
};

static void read_all(const char *path, struct readout *o)
{
	struct sp_reader *r;
	memset(o, 0, sizeof(*o));
	o->rc = sp_reader_open(path, &r, o->err, sizeof(o->err));
	if (o->rc)
		return;
	size_t cap = 1024;
	o->ev = malloc(cap * sizeof(*o->ev));
	struct sp_event ev;
	while (sp_reader_next(r, &ev)) {
		if (o->n == cap) {
			cap *= 2;
			o->ev = realloc(o->ev, cap * sizeof(*o->ev));
		}
		o->ev[o->n++] = ev;
	}
	cr_assert_eq(sp_reader_next(r, &ev), 0, "stays at the end");
	o->st = *sp_reader_stats(r);
	o->hdr = *sp_reader_header(r);
	sp_reader_close(r);
}

/* img[0..len) in a memfd, read whole (asserted readable). */
/* A reader open on a memfd holding img, left open (the test changes the file under it). */
static struct sp_reader *open_image(struct memfile *m, const uint8_t *img, size_t len)
{
	struct sp_reader *rd;
	char err[256];
	mf_open(m);
	mf_set(m, img, len);
	cr_assert_eq(sp_reader_open(m->path, &rd, err, sizeof(err)), 0, "%s", err);
	return rd;
}

static void read_image(const uint8_t *img, size_t len, struct readout *r)
{
	struct memfile m;
	mf_open(&m);
	mf_set(&m, img, len);
	read_all(m.path, r);
	cr_assert_eq(r->rc, 0, "%s", r->err);
	close(m.fd);
}

/* The image of g, read whole (asserted readable). */
static void read_tg(struct sp_tg *g, struct readout *r)
{
	size_t len;
	uint8_t *img = sp_tg_image(g, &len);
	read_image(img, len, r);
	free(img);
}

static void readout_free(struct readout *o)
{
	free(o->ev);
	o->ev = NULL;
}

/* ------------------------------------------------------- 2. reading back */

Test(reader, reads_back_records_strings_and_stats)
{
	char *dir = sp_t_tmpdir("rd");
	char path[512];
	snprintf(path, sizeof(path), "%s/host.4242.sptrace", dir);
	struct sp_tg_opts o = {.pid = 4242, .ppid = 77, .rank = 3, .host = "node7", .cmdline = "python train.py --x"};
	struct sp_tg *g = sp_tg_create_opts(path, &o);
	uint32_t a = sp_tg_intern(g, "alpha");
	uint32_t b = sp_tg_intern(g, "beta/with/a/longer/name/that/needs/continuation/slots");
	cr_assert_eq(sp_tg_intern(g, "alpha"), a, "interning deduplicates");
	uint64_t copyf[SP_F__COUNT] = {0};
	copyf[SP_F_BYTES] = 1 << 20;
	copyf[SP_F_DIRECTION] = SP_DIR_H2D;
	copyf[SP_F_HOST_MEMORY] = SP_HOSTMEM_PAGEABLE;
	copyf[SP_F_OP] = 9;
	/* Thread 10: 100..; thread 11: interleaved in time. */
	for (int i = 0; i < 50; i++) {
		SP_TG_ADD(g, 10, SP_K_MARK, SP_API_stepprof_mark, 1000 + 20 * i, 1000 + 20 * i, {SP_F_NAME, a});
		SP_TG_ADD(g, 11, SP_K_STEP, SP_API_stepprof_step, 1010 + 20 * i, 1010 + 20 * i, {SP_F_VALUE, i});
	}
	sp_tg_addv(g, 10, SP_K_COPY, 0, 5000, 7000, copyf);
	SP_TG_ADD(g, 11, SP_K_LOST, 0, 6000, 6000, {SP_F_COUNT, 5});
	SP_TG_ADD(g, 11, SP_K_OPEN, 0, 6100, 6400, {SP_F_PATH, b}, {SP_F_FD, (uint64_t)-1},
		  {SP_F_RESULT, (uint64_t)-2});
	sp_tg_header(g)->lost_records = 7;
	cr_assert_eq(sp_tg_finish(g), 0);

	struct readout r;
	read_all(path, &r);
	cr_assert_eq(r.rc, 0, "%s", r.err);
	cr_assert_eq(r.n, 103);
	cr_assert_eq(r.st.records, 103);
	cr_assert_eq(r.st.by_kind[SP_K_MARK], 50);
	cr_assert_eq(r.st.by_kind[SP_K_STEP], 50);
	cr_assert_eq(r.st.by_kind[SP_K_COPY], 1);
	cr_assert_eq(r.st.by_kind[SP_K_LOST], 1);
	cr_assert_eq(r.st.by_kind[SP_K_OPEN], 1);
	cr_assert_eq(r.st.lost, 12, "header 7 + LOST record 5");
	cr_assert_eq(r.st.threads, 2);
	cr_assert_eq(r.st.strings, 2);
	cr_assert_eq(r.st.corrupt, 0);
	cr_assert_eq(r.st.truncated, 0);
	cr_assert_eq(r.st.begin_ns, 1000);
	cr_assert_eq(r.st.end_ns, 7000);
	cr_assert_eq(r.hdr.pid, 4242);
	cr_assert_eq(r.hdr.ppid, 77);
	cr_assert_eq(r.hdr.rank, 3);
	cr_assert_str_eq(r.hdr.host, "node7");
	cr_assert_str_eq(r.hdr.cmdline, "python train.py --x");
	/* Merged by begin time: never decreasing, and the two threads alternate. */
	for (size_t i = 1; i < r.n; i++)
		cr_assert(r.ev[i].begin_ns >= r.ev[i - 1].begin_ns, "order at %zu", i);
	cr_assert_eq(r.ev[0].tid, 10);
	cr_assert_eq(r.ev[1].tid, 11);
	cr_assert_eq(r.ev[0].pid, 4242);
	int step = 0;
	for (size_t i = 0; i < r.n; i++) {
		const struct sp_event *e = &r.ev[i];
		if (e->kind == SP_K_STEP) {
			cr_assert_eq(e->f[SP_F_VALUE], (uint64_t)step++);
			cr_assert_eq(e->api, SP_API_stepprof_step);
		} else if (e->kind == SP_K_COPY) {
			cr_assert_eq(e->begin_ns, 5000);
			cr_assert_eq(e->end_ns, 7000);
			cr_assert_eq(e->f[SP_F_BYTES], 1 << 20);
			cr_assert_eq(e->f[SP_F_DIRECTION], SP_DIR_H2D);
			cr_assert_eq(e->f[SP_F_HOST_MEMORY], SP_HOSTMEM_PAGEABLE);
			cr_assert_eq(e->f[SP_F_OP], 9);
		} else if (e->kind == SP_K_OPEN) {
			cr_assert_eq((int64_t)e->f[SP_F_FD], -1);
			cr_assert_eq((int64_t)e->f[SP_F_RESULT], -2);
			cr_assert_eq(e->tid, 11);
		}
	}
	cr_assert_eq(step, 50);

	struct sp_reader *rd;
	char err[256];
	cr_assert_eq(sp_reader_open(path, &rd, err, sizeof(err)), 0);
	cr_assert_str_eq(sp_reader_string(rd, a), "alpha");
	cr_assert_str_eq(sp_reader_string(rd, b), "beta/with/a/longer/name/that/needs/continuation/slots");
	cr_assert_null(sp_reader_string(rd, 0));
	cr_assert_null(sp_reader_string(rd, 99));
	cr_assert_str_eq(sp_reader_path(rd), path);
	sp_reader_close(rd);
	readout_free(&r);
	sp_t_rmrf(dir);
	free(dir);
}

/* Many small chunks, allocated alternately by 3 threads: each thread's records come back in its order. */
Test(reader, threads_span_many_chunks_in_seq_order)
{
	struct sp_tg_opts o = {.pid = 1, .chunk_size = 256, .keep_slots = 8};
	struct sp_tg *g = sp_tg_create_opts(NULL, &o);
	const int per = 500;
	for (int i = 0; i < per; i++)
		for (int t = 0; t < 3; t++)
			SP_TG_ADD(g, 100 + t, SP_K_STEP, 0, 1000000 + i * 10 + t, 1000000 + i * 10 + t,
				  {SP_F_VALUE, (uint64_t)(t * 100000 + i)});
	struct readout r;
	read_tg(g, &r);
	cr_assert_eq(r.n, 3 * per);
	cr_assert_eq(r.st.threads, 3);
	int next[3] = {0, 0, 0};
	for (size_t i = 0; i < r.n; i++) {
		int t = r.ev[i].tid - 100;
		cr_assert(t >= 0 && t < 3);
		cr_assert_eq(r.ev[i].f[SP_F_VALUE], (uint64_t)(t * 100000 + next[t]));
		next[t]++;
	}
	readout_free(&r);
}

Test(reader, ring_wrap_keeps_newest_and_counts_overwritten)
{
	/* 6 record slots per chunk, a ring of 4 chunks: 100 records leave the newest 4 chunks. */
	struct sp_tg_opts o = {.pid = 2, .chunk_size = 256, .ring_chunks = 4, .keep_slots = 8};
	struct sp_tg *g = sp_tg_create_opts(NULL, &o);
	for (int i = 0; i < 100; i++)
		SP_TG_ADD(g, 7, SP_K_STEP, 0, 1000 + i, 1000 + i, {SP_F_VALUE, (uint64_t)i});
	struct readout r;
	read_tg(g, &r);
	/* 100 = 16 full chunks of 6 + 4: the last 4 chunks hold 6+6+6+4 = 22 records (78..99). */
	cr_assert_eq(r.n, 22);
	cr_assert_eq(r.st.overwritten, 78);
	for (size_t i = 0; i < r.n; i++)
		cr_assert_eq(r.ev[i].f[SP_F_VALUE], 78 + i);
	cr_assert_eq(r.st.truncated, 0);
	cr_assert_eq(r.st.corrupt, 0);
	readout_free(&r);
}

/*
 * The chunk index keeps the order of many threads' chunks in a wrapped ring.
 * One record per chunk (96-byte chunks), 3,000 threads created in a scrambled
 * tid order, three rounds each, every record of a round at one timestamp (the
 * merge breaks ties by (pid, tid)), two pids; a ring of 5,000 chunks keeps the
 * newest 5,000 records, at positions out of seq order. The seqs and the header's
 * counter are then moved across 2^32 (a long run), which the index must not
 * confuse. Expected: the records the test wrote, the newest 5,000, sorted by
 * (time, pid, tid).
 */
struct wrec {
	uint64_t ts;
	int32_t pid, tid;
	uint64_t value;
};

static int wrec_cmp(const void *a, const void *b)
{
	const struct wrec *x = a, *y = b;
	if (x->ts != y->ts)
		return x->ts < y->ts ? -1 : 1;
	if (x->pid != y->pid)
		return x->pid < y->pid ? -1 : 1;
	return x->tid < y->tid ? -1 : x->tid > y->tid;
}

/* Add seq_shift to every chunk's seq and to the header's ring_next_seq of a tracegen image. */
static void shift_seqs(uint8_t *img, size_t len, uint64_t seq_shift)
{
	struct sp_file_header *h = (struct sp_file_header *)img;
	uint64_t ring_off = h->header_size + h->keep_slots * SP_SLOT_SIZE;
	for (uint64_t off = ring_off; off + sizeof(struct sp_chunk_header) <= len; off += h->chunk_size) {
		struct sp_chunk_header *c = (struct sp_chunk_header *)(img + off);
		if (c->magic == SP_CHUNK_MAGIC)
			c->seq += seq_shift;
	}
	h->ring_next_seq += seq_shift;
}

Test(reader, many_threads_in_a_wrapped_ring_come_out_in_write_order, .timeout = 60)
{
	enum { THREADS = 3000, ROUNDS = 3, RING = 5000 };
	struct sp_tg_opts o = {.pid = 10, .chunk_size = 96, .ring_chunks = RING, .keep_slots = 8};
	struct sp_tg *g = sp_tg_create_opts(NULL, &o);
	struct wrec *w = malloc(THREADS * ROUNDS * sizeof(*w));
	size_t nw = 0;
	for (int round = 0; round < ROUNDS; round++)
		for (int i = 0; i < THREADS; i++) {
			/* tids in a scrambled order (7919 is prime to 3000); every 7th thread in a second pid */
			int t = (i * 7919 + round * 1013) % THREADS;
			struct sp_event ev = {.kind = SP_K_STEP, .pid = t % 7 ? 10 : 9, .tid = 40000 - t};
			ev.begin_ns = ev.end_ns = 1000000 + (uint64_t)round * 1000;
			ev.f[SP_F_VALUE] = (uint64_t)round * 100000 + (uint64_t)t;
			sp_tg_add_event(g, &ev);
			w[nw++] = (struct wrec){ev.begin_ns, ev.pid, ev.tid, ev.f[SP_F_VALUE]};
		}
	size_t len;
	uint8_t *img = sp_tg_image(g, &len);
	shift_seqs(img, len, (1ull << 32) - 6000); /* seqs 2^32 - 6000 .. 2^32 + 3000 */
	struct readout r;
	read_image(img, len, &r);
	free(img);
	/* the ring kept the last RING records written */
	qsort(w + nw - RING, RING, sizeof(*w), wrec_cmp);
	cr_assert_eq(r.n, RING);
	cr_assert_eq(r.st.overwritten, nw - RING);
	cr_assert_eq(r.st.corrupt, 0);
	for (size_t i = 0; i < r.n; i++) {
		const struct wrec *e = &w[nw - RING + i];
		cr_assert(r.ev[i].begin_ns == e->ts && r.ev[i].pid == e->pid && r.ev[i].tid == e->tid &&
			      r.ev[i].f[SP_F_VALUE] == e->value,
			  "record %zu: got ts %llu pid %d tid %d value %llu, wrote ts %llu pid %d tid %d value %llu", i,
			  (unsigned long long)r.ev[i].begin_ns, r.ev[i].pid, r.ev[i].tid,
			  (unsigned long long)r.ev[i].f[SP_F_VALUE], (unsigned long long)e->ts, e->pid, e->tid,
			  (unsigned long long)e->value);
	}
	readout_free(&r);
	free(w);
}

/*
 * Damaged seqs: a chunk whose seq is far past the header's counter (UINT64_MAX)
 * sorts last in its thread, one far behind it (2^40 chunks) first; nothing is
 * lost, nothing is called corrupt (a seq cannot be checked), and the other
 * chunks keep their order. One thread, one record per chunk, values 0..9.
 */
Test(reader, a_damaged_seq_moves_its_chunk_and_nothing_else)
{
	struct sp_tg_opts o = {.pid = 3, .chunk_size = 96, .keep_slots = 8};
	struct sp_tg *g = sp_tg_create_opts(NULL, &o);
	for (int i = 0; i < 10; i++)
		SP_TG_ADD(g, 5, SP_K_STEP, 0, 1000, 1000, {SP_F_VALUE, (uint64_t)i});
	SP_TG_ADD(g, 6, SP_K_STEP, 0, 1000, 1000, {SP_F_VALUE, 99});
	size_t len;
	uint8_t *img = sp_tg_image(g, &len);
	shift_seqs(img, len, 1ull << 40);
	struct sp_file_header *h = (struct sp_file_header *)img;
	uint64_t ring_off = h->header_size + h->keep_slots * SP_SLOT_SIZE;
	/* tracegen gives chunk seq the position seq: the record of value v is at position v */
	((struct sp_chunk_header *)(img + ring_off + 3 * h->chunk_size))->seq = UINT64_MAX;
	((struct sp_chunk_header *)(img + ring_off + 7 * h->chunk_size))->seq = 0;
	((struct sp_chunk_header *)(img + ring_off + 10 * h->chunk_size))->seq = 12345; /* tid 6's only chunk */
	struct readout r;
	read_image(img, len, &r);
	free(img);
	static const uint64_t want[] = {7, 0, 1, 2, 4, 5, 6, 8, 9, 3};
	cr_assert_eq(r.n, 11);
	cr_assert_eq(r.st.corrupt, 0);
	/* all at one time: the stream of tid 5 first, in its chunks' order, then tid 6 */
	for (size_t i = 0; i < 10; i++) {
		cr_assert_eq(r.ev[i].tid, 5);
		cr_assert_eq(r.ev[i].f[SP_F_VALUE], want[i], "record %zu: value %llu, want %llu", i,
			     (unsigned long long)r.ev[i].f[SP_F_VALUE], (unsigned long long)want[i]);
	}
	cr_assert_eq(r.ev[10].tid, 6);
	readout_free(&r);
}

/*
 * A run of chunks (one index entry: a thread's chunks at consecutive positions
 * and seqs, full but the last) ends at a partial chunk and after 1,024 chunks.
 * One thread, 6 slots a chunk, 12,000 records (2,000 chunks); its thread exits
 * after record 2,500, which leaves a chunk of 4 records, and a second thread's
 * one record takes a position after record 2,600: 1,567 chunks follow. Read as full, the partial chunk
 * would give 2 slots of zeros (corrupt); a run past 1,024 would lose chunks.
 */
Test(reader, runs_of_chunks_end_at_a_partial_chunk_and_at_1024, .timeout = 30)
{
	struct sp_tg_opts o = {.pid = 8, .chunk_size = 256, .keep_slots = 8};
	struct sp_tg *g = sp_tg_create_opts(NULL, &o);
	for (int i = 0; i < 12000; i++) {
		SP_TG_ADD(g, 80, SP_K_STEP, 0, 1000 + i, 1000 + i, {SP_F_VALUE, (uint64_t)i});
		if (i == 2499)
			sp_tg_close_thread(g, 8, 80);
		if (i == 2600)
			SP_TG_ADD(g, 81, SP_K_STEP, 0, 1000 + i, 1000 + i, {SP_F_VALUE, 99999});
	}
	struct readout r;
	read_tg(g, &r);
	cr_assert_eq(r.st.corrupt, 0);
	cr_assert_eq(r.n, 12001);
	uint64_t next = 0;
	for (size_t i = 0; i < r.n; i++) {
		if (r.ev[i].tid == 81)
			continue;
		cr_assert_eq(r.ev[i].f[SP_F_VALUE], next, "record %zu: value %llu, want %llu", i,
			     (unsigned long long)r.ev[i].f[SP_F_VALUE], (unsigned long long)next);
		next++;
	}
	cr_assert_eq(next, 12000);
	readout_free(&r);
}

/* Bytes the heap grew by while the reader opened the image, the reader left open in *out. */
static size_t open_growth(struct memfile *m, const uint8_t *img, size_t len, struct sp_reader **out)
{
	mf_set(m, img, len);
	struct mallinfo2 before = mallinfo2();
	char err[256];
	cr_assert_eq(sp_reader_open(m->path, out, err, sizeof(err)), 0, "%s", err);
	struct mallinfo2 after = mallinfo2();
	return (after.uordblks + after.hblkhd) - (before.uordblks + before.hblkhd);
}

/*
 * What grows with the file is the chunk index (docs/architecture.md's budgets: memory independent
 * of the trace's length). 50,000 chunks of one record: four threads that take
 * turns cost at most 16 bytes a chunk, one thread's runs almost nothing (64 KiB
 * in all: streams, path, thread table). 32 bytes a chunk in an array grown by
 * doubling would be 2 MiB for both.
 */
Test(reader, the_chunk_index_takes_16_bytes_a_chunk_and_runs_less, .timeout = 60)
{
	enum { CHUNKS = 50000 };
	struct memfile m;
	mf_open(&m);
	for (int threads = 4; threads >= 1; threads -= 3) {
		struct sp_tg_opts o = {.pid = 4, .chunk_size = 96, .keep_slots = 8};
		struct sp_tg *g = sp_tg_create_opts(NULL, &o);
		for (int i = 0; i < CHUNKS; i++)
			SP_TG_ADD(g, 100 + i % threads, SP_K_STEP, 0, 1000 + i, 1000 + i, {SP_F_VALUE, (uint64_t)i});
		size_t len;
		uint8_t *img = sp_tg_image(g, &len);
		struct sp_reader *r;
		size_t grew = open_growth(&m, img, len, &r);
		free(img);
		size_t limit = threads > 1 ? (size_t)CHUNKS * 16 + 65536 : 65536;
		cr_assert(grew <= limit, "%d threads: the open reader holds %zu bytes for %d chunks", threads, grew,
			  CHUNKS);
		struct sp_event ev;
		uint64_t n = 0;
		while (sp_reader_next(r, &ev))
			cr_assert_eq(ev.f[SP_F_VALUE], n++);
		cr_assert_eq(n, CHUNKS);
		sp_reader_close(r);
	}
	close(m.fd);
}

Test(reader, active_chunks_kept_records_and_several_pids)
{
	struct sp_tg_opts o = {.pid = 50, .chunk_size = 512, .keep_slots = 32, .leave_active = 1};
	struct sp_tg *g = sp_tg_create_opts(NULL, &o);
	uint64_t f[SP_F__COUNT] = {0};
	f[SP_F_FREE] = 123;
	f[SP_F_TOTAL] = 456;
	sp_tg_add_keep(g, SP_K_MEM_INFO, 0, 500, 500, f);
	struct sp_event ev = {.kind = SP_K_READ, .pid = 51, .tid = 51, .begin_ns = 600, .end_ns = 650};
	ev.f[SP_F_BYTES] = 4096;
	sp_tg_add_event(g, &ev);
	ev.pid = 52;
	ev.tid = 53;
	ev.begin_ns = 700;
	ev.end_ns = 800;
	sp_tg_add_event(g, &ev);
	struct readout r;
	read_tg(g, &r);
	cr_assert_eq(r.n, 3);
	cr_assert_eq(r.ev[0].kind, SP_K_MEM_INFO);
	cr_assert_eq(r.ev[0].pid, 50);
	cr_assert_eq(r.ev[0].tid, 0, "kept records have no thread");
	cr_assert_eq(r.ev[0].f[SP_F_FREE], 123);
	cr_assert_eq(r.ev[1].pid, 51);
	cr_assert_eq(r.ev[2].pid, 52);
	cr_assert_eq(r.ev[2].tid, 53);
	cr_assert_eq(r.ev[2].end_ns, 800);
	cr_assert_eq(r.st.threads, 2);
	readout_free(&r);
}

Test(reader, duplicate_string_ids_first_wins)
{
	struct sp_tg *g = sp_tg_create(NULL, 1, 0, -1);
	sp_tg_string(g, 5, "first", 5);
	sp_tg_string(g, 5, "second", 6);
	sp_tg_string(g, 3, "three", 5);
	SP_TG_ADD(g, 1, SP_K_MARK, 0, 10, 10, {SP_F_NAME, 5});
	size_t len;
	uint8_t *img = sp_tg_image(g, &len);
	struct memfile m;
	mf_open(&m);
	mf_set(&m, img, len);
	struct sp_reader *rd;
	char err[256];
	cr_assert_eq(sp_reader_open(m.path, &rd, err, sizeof(err)), 0, "%s", err);
	cr_assert_str_eq(sp_reader_string(rd, 5), "first");
	cr_assert_str_eq(sp_reader_string(rd, 3), "three");
	sp_reader_close(rd);
	free(img);
	close(m.fd);
}

/* ------------------------------------------------------------- 3. damage */

/*
 * One thread of one-slot STEP records with value = index, chunk of 256 bytes
 * (6 record slots), a small keep area with strings: where record k ends is known,
 * so the records a cut file must give back are exactly those that end before the cut.
 */
#define CUT_RECORDS 40u
#define CUT_CHUNK   256u
#define CUT_KEEP    16u

static uint8_t *cut_image(size_t *len, uint64_t *ring_off)
{
	struct sp_tg_opts o = {.pid = 9, .chunk_size = CUT_CHUNK, .keep_slots = CUT_KEEP};
	struct sp_tg *g = sp_tg_create_opts(NULL, &o);
	sp_tg_intern(g, "a string that takes three slots in the keep area....");
	for (unsigned k = 0; k < CUT_RECORDS; k++)
		SP_TG_ADD(g, 9, SP_K_STEP, 0, 5000 + k, 5000 + k, {SP_F_VALUE, k});
	*ring_off = SP_HEADER_SIZE + CUT_KEEP * SP_SLOT_SIZE;
	return sp_tg_image(g, len);
}

Test(reader, truncated_at_every_byte_offset)
{
	size_t len;
	uint64_t ring_off;
	uint8_t *img = cut_image(&len, &ring_off);
	const unsigned per_chunk = CUT_CHUNK / SP_SLOT_SIZE - SP_CHUNK_HDR_SLOTS;
	cr_assert_eq(len, ring_off + (CUT_RECORDS + per_chunk - 1) / per_chunk * CUT_CHUNK);
	struct memfile m;
	mf_open(&m);
	for (size_t cut = 0; cut <= len; cut++) {
		mf_set(&m, img, cut);
		struct readout r;
		read_all(m.path, &r);
		if (cut < sizeof(struct sp_file_header)) {
			cr_assert_eq(r.rc, -1, "cut %zu opened", cut);
			cr_assert(r.err[0] && !strchr(r.err, '\n'), "cut %zu: one-line reason", cut);
			if (cut >= 1)
				cr_assert(strstr(r.err, "truncated"), "cut %zu: %s", cut, r.err);
			continue;
		}
		cr_assert_eq(r.rc, 0, "cut %zu: %s", cut, r.err);
		unsigned expect = 0;
		for (unsigned k = 0; k < CUT_RECORDS; k++) {
			uint64_t end = ring_off + (k / per_chunk) * CUT_CHUNK +
				       (SP_CHUNK_HDR_SLOTS + k % per_chunk + 1) * SP_SLOT_SIZE;
			if (end <= cut)
				expect++;
		}
		cr_assert_eq(r.n, expect, "cut %zu: %zu records, expected %u", cut, r.n, expect);
		for (size_t i = 0; i < r.n; i++)
			cr_assert_eq(r.ev[i].f[SP_F_VALUE], i, "cut %zu", cut);
		cr_assert_eq(r.st.truncated, cut < len, "cut %zu of %zu: truncated flag", cut, len);
		cr_assert_eq(r.st.corrupt, 0, "cut %zu: a cut is not corruption", cut);
		readout_free(&r);
	}
	free(img);
	close(m.fd);
}

static uint64_t xorshift(uint64_t *s)
{
	*s ^= *s << 13;
	*s ^= *s >> 7;
	*s ^= *s << 17;
	return *s;
}

Test(reader, random_byte_flips_never_crash, .timeout = 60)
{
	/* Several threads, multi-slot records, strings and a LOST record: every part of the format. */
	struct sp_tg_opts o = {.pid = 3, .chunk_size = 512, .keep_slots = 64};
	struct sp_tg *g = sp_tg_create_opts(NULL, &o);
	uint32_t s1 = sp_tg_intern(g, "/data/train/00001.jpg");
	uint32_t s2 = sp_tg_intern(g, "kernel_name_of_some_length<float, 128>");
	uint64_t f[SP_F__COUNT] = {0};
	for (int i = 0; i < 120; i++) {
		int tid = 30 + i % 3;
		f[SP_F_NAME] = s2;
		f[SP_F_PATH] = s1;
		f[SP_F_BYTES] = 1000 + (uint64_t)i;
		f[SP_F_OP] = (uint64_t)i;
		sp_tg_addv(g, tid, (unsigned[]){SP_K_COPY, SP_K_LAUNCH, SP_K_READ, SP_K_ALLOC}[i % 4], 0, 100 * i,
			   100 * i + 50, f);
	}
	SP_TG_ADD(g, 30, SP_K_LOST, 0, 99999, 99999, {SP_F_COUNT, 2});
	const size_t written = 121;
	size_t len;
	uint8_t *img = sp_tg_image(g, &len);
	uint8_t *copy = malloc(len);
	/*
	 * "Reads what is whole": the records of every ring chunk that no flip
	 * touched, found by walking the undamaged image with trace.h's structs
	 * (their begin times are unique: 100 * i, and 99999 for the LOST record).
	 */
	const uint64_t ring_off = SP_HEADER_SIZE + 64 * SP_SLOT_SIZE;
	const size_t nchunks = (len - ring_off) / 512;
	cr_assert(nchunks >= 3 && nchunks <= 64);
	uint64_t chunk_ts[64][16];
	unsigned chunk_n[64] = {0}, in_chunks = 0;
	for (size_t c = 0; c < nchunks; c++) {
		const struct sp_chunk_header *ch = (const void *)(img + ring_off + c * 512);
		cr_assert_eq(ch->magic, SP_CHUNK_MAGIC);
		const struct sp_slot *sl = (const void *)(ch + 1);
		for (uint32_t k = 0; k < ch->used; k += sl[k].nslots) {
			cr_assert(sl[k].nslots >= 1 && chunk_n[c] < 16);
			chunk_ts[c][chunk_n[c]++] = sl[k].ts;
		}
		in_chunks += chunk_n[c];
	}
	cr_assert_eq(in_chunks, written, "the walk finds every record written");
	struct memfile m;
	mf_open(&m);
	uint64_t seed = 0x5eed5eed12345678ull;
	unsigned refused = 0, flagged = 0, clean = 0, whole_checked = 0;
	for (int c = 0; c < 1000; c++) {
		memcpy(copy, img, len);
		unsigned flips = 1 + (unsigned)(xorshift(&seed) % 8);
		int header_hit = 0;
		char hit[64] = {0};
		for (unsigned k = 0; k < flips; k++) {
			/* Half the flips land in the header and keep area, where fewer bytes matter more. */
			size_t at = (xorshift(&seed) & 1) ? xorshift(&seed) % (SP_HEADER_SIZE + 64 * SP_SLOT_SIZE)
							  : xorshift(&seed) % len;
			copy[at] ^= (uint8_t)(1 + xorshift(&seed) % 255);
			if (at < SP_HEADER_SIZE)
				header_hit = 1;
			else if (at >= ring_off)
				hit[(at - ring_off) / 512] = 1;
		}
		mf_set(&m, copy, len);
		struct readout r;
		read_all(m.path, &r);
		if (r.rc) {
			cr_assert(r.err[0] && !strchr(r.err, '\n'), "copy %d: one-line reason", c);
			refused++;
			continue;
		}
		uint64_t sum = 0;
		for (unsigned k = 0; k < SP_K__COUNT; k++)
			sum += r.st.by_kind[k];
		cr_assert_eq(sum, r.n, "copy %d", c);
		cr_assert_eq(r.st.records, r.n);
		/* Never more records than slots were written (a flip cannot create data). */
		cr_assert(r.n <= 4 * written, "copy %d: %zu records", c, r.n);
		/* With the file header intact, every untouched chunk is read back whole. */
		if (!header_hit) {
			whole_checked++;
			for (size_t ck = 0; ck < nchunks; ck++) {
				if (hit[ck])
					continue;
				for (unsigned k = 0; k < chunk_n[ck]; k++) {
					size_t i;
					for (i = 0; i < r.n && r.ev[i].begin_ns != chunk_ts[ck][k]; i++)
						;
					cr_assert_lt(i, r.n, "copy %d: record at %lu of untouched chunk %zu not read",
						     c, (unsigned long)chunk_ts[ck][k], ck);
				}
			}
		}
		if (r.st.corrupt || r.st.truncated)
			flagged++;
		else
			clean++;
		readout_free(&r);
	}
	cr_log_info("byte flips: %u refused, %u flagged corrupt/truncated, %u read clean; %u checked whole", refused,
		    flagged, clean, whole_checked);
	cr_assert_gt(whole_checked, 100);
	cr_assert(refused > 0 && flagged > 0, "flips must be noticed (%u refused, %u flagged)", refused, flagged);
	free(copy);
	free(img);
	close(m.fd);
}

Test(reader, corrupt_record_is_skipped_and_counted)
{
	size_t len;
	uint64_t ring_off;
	uint8_t *img = cut_image(&len, &ring_off);
	/* Record 2 (third slot of the first chunk): kind byte of a head becomes garbage. */
	img[ring_off + (SP_CHUNK_HDR_SLOTS + 2) * SP_SLOT_SIZE] = 0xfe;
	/* Record 7 (second slot of the second chunk): uncommitted-looking slot inside `used`. */
	img[ring_off + CUT_CHUNK + (SP_CHUNK_HDR_SLOTS + 1) * SP_SLOT_SIZE] = 0;
	struct memfile m;
	mf_open(&m);
	mf_set(&m, img, len);
	struct readout r;
	read_all(m.path, &r);
	cr_assert_eq(r.rc, 0, "%s", r.err);
	cr_assert_eq(r.n, CUT_RECORDS - 2);
	cr_assert_eq(r.st.corrupt, 1);
	cr_assert_eq(r.st.corrupt_slots, 2);
	for (size_t i = 0; i < r.n; i++)
		cr_assert(r.ev[i].f[SP_F_VALUE] != 2 && r.ev[i].f[SP_F_VALUE] != 7);
	readout_free(&r);
	/* A chunk header with a bad magic: its records are skipped, the rest read. */
	mf_set(&m, img, len);
	memcpy(img + ring_off + 2 * CUT_CHUNK, "XXXX", 4);
	mf_set(&m, img, len);
	read_all(m.path, &r);
	cr_assert_eq(r.rc, 0);
	cr_assert_eq(r.n, CUT_RECORDS - 2 - 6);
	cr_assert_eq(r.st.corrupt, 1);
	readout_free(&r);
	free(img);
	close(m.fd);
}

Test(reader, refuses_foreign_newer_and_odd_files)
{
	struct memfile m;
	mf_open(&m);
	char err[256];
	struct sp_reader *rd;

	/* A text file, an ELF binary, an empty file. */
	const char *text = "hello, this is not a trace\n";
	mf_set(&m, (const uint8_t *)text, strlen(text));
	cr_assert_eq(sp_reader_open(m.path, &rd, err, sizeof(err)), -1);
	cr_assert(strstr(err, "not a stepprof trace"), "%s", err);
	cr_assert_null(strchr(err, '\n'));
	cr_assert_eq(sp_reader_open("/bin/sh", &rd, err, sizeof(err)), -1);
	cr_assert(strstr(err, "not a stepprof trace"), "%s", err);
	mf_set(&m, NULL, 0);
	cr_assert_eq(sp_reader_open(m.path, &rd, err, sizeof(err)), -1);
	cr_assert(err[0]);

	/* Newer major version. */
	struct sp_tg *g = sp_tg_create(NULL, 1, 0, -1);
	SP_TG_ADD(g, 1, SP_K_STEP, 0, 1, 1, {SP_F_VALUE, 1});
	sp_tg_header(g)->version_major = SP_VERSION_MAJOR + 1;
	sp_tg_header(g)->version_minor = 3;
	size_t len;
	uint8_t *img = sp_tg_image(g, &len);
	mf_set(&m, img, len);
	cr_assert_eq(sp_reader_open(m.path, &rd, err, sizeof(err)), -1);
	cr_assert(strstr(err, "newer"), "%s", err);
	cr_assert(strstr(err, "2.3"), "%s", err);
	cr_assert_null(strchr(err, '\n'));
	free(img);

	/* A newer minor version is read. */
	g = sp_tg_create(NULL, 1, 0, -1);
	SP_TG_ADD(g, 1, SP_K_STEP, 0, 1, 1, {SP_F_VALUE, 1});
	sp_tg_header(g)->version_minor = SP_VERSION_MINOR + 1;
	img = sp_tg_image(g, &len);
	mf_set(&m, img, len);
	struct readout r;
	read_all(m.path, &r);
	cr_assert_eq(r.rc, 0, "%s", r.err);
	cr_assert_eq(r.n, 1);
	readout_free(&r);

	/* The other byte order. */
	struct sp_file_header *h = (struct sp_file_header *)img;
	h->endian = __builtin_bswap32(SP_ENDIAN_TAG);
	mf_set(&m, img, len);
	cr_assert_eq(sp_reader_open(m.path, &rd, err, sizeof(err)), -1);
	cr_assert(strstr(err, "byte order"), "%s", err);
	h->endian = SP_ENDIAN_TAG;

	/* Geometry that cannot be. */
	h->chunk_size = 100;
	mf_set(&m, img, len);
	cr_assert_eq(sp_reader_open(m.path, &rd, err, sizeof(err)), -1);
	cr_assert(strstr(err, "chunk_size"), "%s", err);
	free(img);

	/* Missing file and directory. */
	cr_assert_eq(sp_reader_open("/nonexistent/trace", &rd, err, sizeof(err)), -1);
	cr_assert(strstr(err, "No such file"), "%s", err);
	cr_assert_eq(sp_reader_open("/tmp", &rd, err, sizeof(err)), -1);
	cr_assert(strstr(err, "directory"), "%s", err);
	close(m.fd);
}

/*
 * A header whose geometry cannot be is refused at open with "corrupt header":
 * file_size that is not header + keep + ring, a chunk size out of range or not
 * a multiple of 32, keep slots beyond 2^40.
 */
Test(reader, impossible_geometry_is_refused_at_open)
{
	struct sp_tg *g = sp_tg_create(NULL, 1, 0, -1);
	SP_TG_ADD(g, 1, SP_K_STEP, 0, 1, 1, {SP_F_VALUE, 1});
	size_t len;
	uint8_t *img = sp_tg_image(g, &len);
	struct sp_file_header *h = (struct sp_file_header *)img;
	const struct sp_file_header h0 = *h;
	struct memfile m;
	mf_open(&m);
	char err[256];
	struct sp_reader *rd;
	for (int c = 0; c < 7; c++) {
		*h = h0;
		switch (c) {
		case 0: h->ring_chunks = 0xffffffffu; break;
		case 1: h->file_size = 4096; break;
		case 2: h->chunk_size = 65536 + 16; break;
		case 3: h->chunk_size = SP_CHUNK_SIZE_MAX + 32; break;
		case 4: h->chunk_size = 64; break;
		case 5: h->keep_slots = 1ull << 30; break;
		case 6: h->keep_slots = SP_KEEP_SLOTS_MAX + 1; break;
		}
		if (c != 1)
			h->file_size = h->header_size + h->keep_slots * SP_SLOT_SIZE + (uint64_t)h->ring_chunks * h->chunk_size;
		if (c == 0 || c == 5)
			h->file_size = h0.file_size; /* the geometry grew, the size did not */
		mf_set(&m, img, len);
		cr_assert_eq(sp_reader_open(m.path, &rd, err, sizeof(err)), -1, "case %d was opened", c);
		cr_assert_eq(strncmp(err, "corrupt header: ", 16), 0, "case %d: %s", c, err);
	}
	/* the largest chunk accepted is read */
	*h = h0;
	mf_set(&m, img, len);
	cr_assert_eq(sp_reader_open(m.path, &rd, err, sizeof(err)), 0, "%s", err);
	sp_reader_close(rd);
	free(img);
	close(m.fd);
}

/* A huge ring_chunks/keep_slots in a small file must not make the reader allocate or loop for them. */
Test(reader, lying_header_geometry_is_bounded, .timeout = 10)
{
	struct sp_tg *g = sp_tg_create(NULL, 1, 0, -1);
	SP_TG_ADD(g, 1, SP_K_STEP, 0, 1, 1, {SP_F_VALUE, 1});
	size_t len;
	uint8_t *img = sp_tg_image(g, &len);
	struct sp_file_header *h = (struct sp_file_header *)img;
	h->ring_chunks = 0xffffffffu;
	h->file_size = h->header_size + h->keep_slots * SP_SLOT_SIZE + (uint64_t)h->ring_chunks * h->chunk_size;
	h->ring_next_seq = ~0ull;
	h->keep_next_slot = ~0ull;
	struct readout r;
	read_image(img, len, &r);
	cr_assert_eq(r.n, 1);
	cr_assert(r.st.truncated || r.st.corrupt);
	readout_free(&r);
	free(img);
}

/* What a newer minor may add (a kind, an api) is skipped or read, not taken for corruption. */
/*
 * A sparse file whose header claims 4 billion chunks handed out (384 GB, 8 KiB
 * on disk: a damaged or hostile header) with records in its first and last
 * chunks: both are read, in well under the test's 10 s. Reading a header per
 * chunk of the holes would take hours.
 */
Test(reader, a_sparse_file_claiming_billions_of_chunks_is_read_in_seconds, .timeout = 10)
{
	struct sp_tg_opts o = {.pid = 3, .chunk_size = 96, .keep_slots = 8};
	struct sp_tg *g = sp_tg_create_opts(NULL, &o);
	SP_TG_ADD(g, 5, SP_K_STEP, 0, 1000, 1000, {SP_F_VALUE, 1});
	size_t len;
	uint8_t *img = sp_tg_image(g, &len);
	struct sp_file_header *h = (struct sp_file_header *)img;
	uint64_t ring_off = h->header_size + h->keep_slots * SP_SLOT_SIZE;
	h->ring_chunks = 4000000000u;
	h->ring_next_seq = 4000000000u;
	h->file_size = ring_off + (uint64_t)h->ring_chunks * h->chunk_size;
	struct memfile m;
	mf_open(&m);
	mf_set(&m, img, len);
	/* the same chunk at the last position, of another thread, with the last seq */
	struct sp_chunk_header *c = (struct sp_chunk_header *)(img + ring_off);
	c->tid = 6;
	c->seq = h->ring_chunks - 1;
	uint64_t last = ring_off + (uint64_t)(h->ring_chunks - 1) * h->chunk_size;
	cr_assert_eq(pwrite(m.fd, c, h->chunk_size, (off_t)last), (ssize_t)h->chunk_size);
	cr_assert_eq(ftruncate(m.fd, (off_t)h->file_size), 0);
	free(img);
	struct readout r;
	read_all(m.path, &r);
	cr_assert_eq(r.rc, 0, "%s", r.err);
	cr_assert_eq(r.n, 2);
	cr_assert_eq(r.ev[0].tid, 5);
	cr_assert_eq(r.ev[1].tid, 6);
	cr_assert_eq(r.st.truncated, 0);
	readout_free(&r);
	close(m.fd);
}

Test(reader, newer_minor_unknown_kind_and_api_are_not_corruption)
{
	for (int newer = 0; newer <= 1; newer++) {
		size_t len;
		uint64_t ring_off;
		uint8_t *img = cut_image(&len, &ring_off);
		struct sp_file_header *h = (struct sp_file_header *)img;
		h->version_minor = (uint16_t)(SP_VERSION_MINOR + newer);
		/* record 3: a kind this reader does not know; record 4: an api it does not know */
		img[ring_off + (SP_CHUNK_HDR_SLOTS + 3) * SP_SLOT_SIZE] = SP_K__COUNT + 3;
		struct sp_slot *s4 = (struct sp_slot *)(img + ring_off + (SP_CHUNK_HDR_SLOTS + 4) * SP_SLOT_SIZE);
		s4->api = SP_API__COUNT + 7;
		struct readout r;
		read_image(img, len, &r);
		if (newer) {
			cr_assert_eq(r.n, CUT_RECORDS - 1);
			cr_assert_eq(r.st.corrupt, 0);
			cr_assert_eq(r.ev[3].f[SP_F_VALUE], 4);
			cr_assert_eq(r.ev[3].api, 0, "an unknown api reads as none");
		} else {
			cr_assert_eq(r.n, CUT_RECORDS - 2);
			cr_assert_eq(r.st.corrupt_slots, 2, "same version: both are corrupt");
		}
		readout_free(&r);
		free(img);
	}
}

/* The reader's own decoder: every kind, random values at every width, back field by field. */
Test(reader, every_kind_reads_back_field_by_field)
{
	struct sp_tg_opts o = {.pid = 5, .chunk_size = 1024, .keep_slots = 8};
	struct sp_tg *g = sp_tg_create_opts(NULL, &o);
	uint64_t seed = 12345;
	enum { PER_KIND = 50 };
	static uint64_t want[SP_K__COUNT * PER_KIND][SP_F__COUNT];
	size_t n = 0;
	for (unsigned kind = 1; kind < SP_K__COUNT; kind++) {
		if (kind == SP_K_STRING || kind == SP_K_GPU_SPAN2) /* GPU_SPAN2: two records, the test below */
			continue;
		for (int i = 0; i < PER_KIND; i++, n++) {
			uint64_t f[SP_F__COUNT];
			for (unsigned fld = 0; fld < SP_F__COUNT; fld++) {
				unsigned w = sp_field_width[fld];
				uint64_t v = xorshift(&seed);
				f[fld] = v;
				if (w < 8)
					v &= (1ull << (8 * w)) - 1;
				if (sp_field_type[fld] == SP_T_I && w < 8 && ((v >> (8 * w - 1)) & 1))
					v |= ~0ull << (8 * w);
				want[n][fld] = (sp_kind_mask[kind] >> fld) & 1 ? v : 0;
			}
			sp_tg_addv(g, 5, kind, (unsigned)(n % SP_API__COUNT), 1000 + n, 1000 + n + i, f);
		}
	}
	struct readout r;
	read_tg(g, &r);
	cr_assert_eq(r.n, n);
	cr_assert_eq(r.st.corrupt, 0);
	for (size_t i = 0; i < n; i++) {
		const struct sp_event *e = &r.ev[i];
		cr_assert_eq(e->begin_ns, 1000 + i);
		cr_assert_eq(e->end_ns, 1000 + i + i % PER_KIND);
		cr_assert_eq(e->api, i % SP_API__COUNT);
		cr_assert_eq(e->mask, sp_kind_mask[e->kind]);
		for (unsigned fld = 0; fld < SP_F__COUNT; fld++)
			cr_assert_eq(e->f[fld], want[i][fld], "record %zu kind %s field %s", i, sp_kind_name[e->kind],
				     sp_field_name[fld]);
	}
	readout_free(&r);
}

/*
 * sp_encode_fast and sp_decode_fast (the layouts stepprof watch keeps records
 * with) agree with trace.h's sp_encode and sp_decode on every kind, field by
 * field, random values of every width; a slot count that lies is refused.
 */
Test(reader, the_fast_codec_is_the_codec)
{
	uint64_t seed = 777;
	for (unsigned kind = 1; kind < SP_K__COUNT; kind++) {
		if (kind == SP_K_STRING)
			continue;
		for (int i = 0; i < 200; i++) {
			struct sp_event ev = {.kind = (uint8_t)kind, .api = (uint16_t)(i % SP_API__COUNT)};
			ev.begin_ns = xorshift(&seed) >> 8;
			ev.end_ns = ev.begin_ns + (xorshift(&seed) >> 40);
			for (unsigned fld = 0; fld < SP_F__COUNT; fld++)
				ev.f[fld] = xorshift(&seed);
			struct sp_slot a[SP_MAX_RECORD_SLOTS], b[SP_MAX_RECORD_SLOTS];
			memset(a, 0, sizeof(a));
			memset(b, 0, sizeof(b));
			unsigned na = sp_encode(a, kind, ev.api, ev.begin_ns, ev.end_ns - ev.begin_ns, ev.f);
			a[0].kind = (uint8_t)kind;
			unsigned nb = sp_encode_fast(b, &ev);
			cr_assert_eq(nb, na, "kind %s: %u slots, sp_encode %u", sp_kind_name[kind], nb, na);
			cr_assert_eq(memcmp(a, b, na * sizeof(a[0])), 0, "kind %s: the slots differ", sp_kind_name[kind]);
			struct sp_event da, db;
			memset(&da, 0, sizeof(da));
			memset(&db, 0, sizeof(db));
			cr_assert_eq(sp_decode(a, na, &da), na);
			cr_assert_eq(sp_decode_fast(b, nb, &db), nb);
			cr_assert_eq(memcmp(&da, &db, sizeof(da)), 0, "kind %s: decoded differently", sp_kind_name[kind]);
			cr_assert_eq(sp_decode_fast(b, nb - 1, &db), 0, "kind %s: read past what is there",
				     sp_kind_name[kind]);
		}
	}
}

/*
 * A GPU_SPAN2 (two GPU spans in one slot, format 1.3) reads as the two gpu_span
 * records it holds: the second's op, api, begin and duration from the deltas
 * (a begin before the first's too), in begin order with another thread's
 * records; counted as two records in one slot. A second span whose begin would
 * fall before 0 begins at 0; an api2 this reader does not know is none.
 */
Test(reader, a_gpu_span2_reads_as_two_gpu_spans)
{
	struct sp_tg_opts o = {.pid = 5, .chunk_size = 1024, .keep_slots = 8};
	struct sp_tg *g = sp_tg_create_opts(NULL, &o);
	/* thread 5: (op 7, 1000..1500) and (op 9, 3000..3250); then (op 10, 9000..9100) and (op 11, 8000..8040) */
	SP_TG_ADD(g, 5, SP_K_GPU_SPAN2, SP_API_cudaLaunchKernel, 1000, 1500, {SP_F_OP, 7}, {SP_F_DEVICE, 1},
		  {SP_F_OP_DELTA, 2}, {SP_F_API2, SP_API_cudaMemcpyAsync}, {SP_F_BEGIN_DELTA, 2000}, {SP_F_DUR2, 250});
	SP_TG_ADD(g, 5, SP_K_GPU_SPAN2, SP_API_cudaLaunchKernel, 9000, 9100, {SP_F_OP, 10}, {SP_F_DEVICE, 0},
		  {SP_F_OP_DELTA, 1}, {SP_F_API2, SP_API__COUNT + 7}, {SP_F_BEGIN_DELTA, (uint64_t)-1000},
		  {SP_F_DUR2, 40});
	/* thread 6: one record between the two spans of the first pair */
	SP_TG_ADD(g, 6, SP_K_SYNC, SP_API_cudaStreamSynchronize, 2000, 2100);
	/* a second span that would begin before 0, and one of over 2^31 ns (the head's encoding: microseconds) */
	SP_TG_ADD(g, 7, SP_K_GPU_SPAN2, SP_API_cuLaunchKernel, 100, 200, {SP_F_OP, 1}, {SP_F_DEVICE, 0},
		  {SP_F_OP_DELTA, 255}, {SP_F_API2, SP_API_cuLaunchKernel}, {SP_F_BEGIN_DELTA, (uint64_t)-500},
		  {SP_F_DUR2, sp_dur_encode(3000000000ull)});
	struct readout r;
	read_tg(g, &r);
	cr_assert_eq(r.st.corrupt, 0);
	cr_assert_eq(r.n, 7, "%zu records", r.n);
	cr_assert_eq(r.st.records, 7);
	cr_assert_eq(r.st.by_kind[SP_K_GPU_SPAN], 6);
	cr_assert_eq(r.st.by_kind[SP_K_GPU_SPAN2], 0);
	cr_assert_eq(r.st.slots, 4, "three pairs and a sync: 4 slots, %llu", (unsigned long long)r.st.slots);
	struct {
		int32_t tid;
		unsigned kind, api;
		uint64_t b, e, op, dev;
	} want[] = {
	    {7, SP_K_GPU_SPAN, SP_API_cuLaunchKernel, 100, 200, 1, 0},
	    {7, SP_K_GPU_SPAN, SP_API_cuLaunchKernel, 0, 3000000000ull, 256, 0},
	    {5, SP_K_GPU_SPAN, SP_API_cudaLaunchKernel, 1000, 1500, 7, 1},
	    {6, SP_K_SYNC, SP_API_cudaStreamSynchronize, 2000, 2100, 0, 0},
	    {5, SP_K_GPU_SPAN, SP_API_cudaMemcpyAsync, 3000, 3250, 9, 1},
	    {5, SP_K_GPU_SPAN, SP_API_cudaLaunchKernel, 9000, 9100, 10, 0},
	    {5, SP_K_GPU_SPAN, SP_API_NONE, 8000, 8040, 11, 0},
	};
	/* a pair's first span, then its second, whatever their begins: one thread's records keep their order */
	for (size_t i = 0; i < sizeof(want) / sizeof(want[0]); i++) {
		const struct sp_event *e = &r.ev[i];
		cr_assert_eq(e->tid, want[i].tid, "record %zu: tid %d", i, e->tid);
		cr_assert_eq(e->kind, want[i].kind, "record %zu: kind %s", i, sp_kind_name[e->kind]);
		cr_assert_eq(e->api, want[i].api, "record %zu: api %u", i, e->api);
		cr_assert_eq(e->begin_ns, want[i].b, "record %zu: begin %llu", i, (unsigned long long)e->begin_ns);
		cr_assert_eq(e->end_ns, want[i].e, "record %zu: end %llu", i, (unsigned long long)e->end_ns);
		if (e->kind == SP_K_GPU_SPAN) {
			cr_assert_eq(e->mask, sp_kind_mask[SP_K_GPU_SPAN]);
			cr_assert_eq(e->f[SP_F_OP], want[i].op, "record %zu: op %llu", i, (unsigned long long)e->f[SP_F_OP]);
			cr_assert_eq(e->f[SP_F_DEVICE], want[i].dev, "record %zu", i);
			cr_assert_eq(e->f[SP_F_OP_DELTA] | e->f[SP_F_API2] | e->f[SP_F_BEGIN_DELTA] | e->f[SP_F_DUR2], 0);
		}
	}
	readout_free(&r);
}

/* A FIFO, a device: refused at once with one line, never a hang on open or read. */
Test(reader, refuses_what_is_not_a_regular_file, .timeout = 20)
{
	char *dir = sp_t_tmpdir("rdfifo");
	char fifo[600];
	snprintf(fifo, sizeof(fifo), "%s/trace.sptrace", dir);
	cr_assert_eq(mkfifo(fifo, 0600), 0);
	const char *paths[] = {fifo, "/dev/zero", "/dev/null"};
	for (int i = 0; i < 3; i++) {
		struct readout r;
		read_all(paths[i], &r);
		cr_expect_eq(r.rc, -1, "%s opened", paths[i]);
		cr_expect(strstr(r.err, "not a regular file") && !strchr(r.err, '\n'), "%s: %s", paths[i], r.err);
	}
	sp_t_rmrf(dir);
	free(dir);
}

/*
 * A chunk a live writer reuses between the reader's index and its read of the
 * chunk (tf_chunks.c: state, used = 0, a new seq, then new records over the
 * old ones) is skipped as overwritten, not read as a mix of two chunks: no
 * corrupt slot, no record of the new chunk under the old one's thread.
 */
Test(reader, a_chunk_reused_while_read_is_skipped_not_corrupt)
{
	const uint32_t cs = (SP_CHUNK_HDR_SLOTS + 10) * SP_SLOT_SIZE; /* 10 record slots: 5 copies */
	for (int stage = 0; stage < 2; stage++) {
		struct sp_tg_opts o = {.pid = 7, .chunk_size = cs};
		struct sp_tg *g = sp_tg_create_opts(NULL, &o);
		for (int i = 0; i < 10; i++)
			SP_TG_ADD(g, 10, SP_K_COPY, SP_API_cudaMemcpy, 1000 + 10 * i, 1005 + 10 * i, {SP_F_BYTES, i},
				  {SP_F_OP, i + 1});
		for (int i = 0; i < 3; i++)
			SP_TG_ADD(g, 20, SP_K_STEP, 0, 1001 + 10 * i, 1001 + 10 * i, {SP_F_VALUE, i});
		size_t len;
		uint8_t *img = sp_tg_image(g, &len);
		const struct sp_file_header *h = (const struct sp_file_header *)img;
		uint64_t ring_off = h->header_size + h->keep_slots * SP_SLOT_SIZE;
		struct memfile m;
		struct sp_reader *rd = open_image(&m, img, len);
		/* the writer takes chunk 0 (thread 10's first) for thread 11 */
		struct sp_chunk_header ch;
		memcpy(&ch, img + ring_off, sizeof(ch));
		ch.state = SP_CHUNK_ACTIVE;
		ch.used = 0;
		if (stage == 1) {
			/* its new seq and records: a step, then a copy astride the old copies */
			ch.seq = h->ring_next_seq;
			ch.tid = 11;
			ch.used = 3;
			uint8_t slots[3 * SP_SLOT_SIZE];
			memcpy(slots, img + ring_off + (SP_CHUNK_HDR_SLOTS + 2) * SP_SLOT_SIZE, 2 * SP_SLOT_SIZE);
			memcpy(slots + 2 * SP_SLOT_SIZE, slots + SP_SLOT_SIZE, SP_SLOT_SIZE);
			memcpy(slots + SP_SLOT_SIZE, slots, SP_SLOT_SIZE);
			memcpy(slots, img + ring_off + 2 * cs + SP_CHUNK_HDR_SLOTS * SP_SLOT_SIZE, SP_SLOT_SIZE);
			cr_assert_eq(pwrite(m.fd, slots, sizeof(slots), (off_t)(ring_off + SP_CHUNK_HDR_SLOTS * SP_SLOT_SIZE)),
				     (ssize_t)sizeof(slots));
		}
		cr_assert_eq(pwrite(m.fd, &ch, sizeof(ch), (off_t)ring_off), (ssize_t)sizeof(ch));
		struct sp_event ev;
		size_t n = 0, copies = 0;
		while (sp_reader_next(rd, &ev)) {
			n++;
			copies += ev.kind == SP_K_COPY;
			cr_assert(ev.tid == 10 || ev.tid == 20, "stage %d: a record of thread %d", stage, ev.tid);
			cr_assert(ev.kind != SP_K_COPY || ev.f[SP_F_BYTES] >= 5, "stage %d: copy %llu of the reused chunk",
				  stage, (unsigned long long)ev.f[SP_F_BYTES]);
		}
		const struct sp_reader_stats *st = sp_reader_stats(rd);
		cr_assert_eq(st->corrupt, 0, "stage %d: %llu corrupt slots", stage, (unsigned long long)st->corrupt_slots);
		cr_assert_eq(st->truncated, 0);
		cr_assert_eq(st->reused_chunks, 1, "stage %d", stage);
		cr_assert_eq(copies, 5, "stage %d", stage);
		cr_assert_eq(n, 8, "stage %d", stage);
		sp_reader_close(rd);
		free(img);
		close(m.fd);
	}
}

/* ------------------------------------------------ following a live file */

/*
 * Records value = t * 1000000 + i on threads 100..102, i from 0; phase a: i in
 * [0, a), the file then read to its end (marks kept); phase b: i in [a, b),
 * the file (the same writer, further on) opened again and resumed from the
 * marks. Returned: the second read's records.
 */
static int g_follow_from; /* the second read opened with the first's sp_reader_follow */

static void follow_two_reads(const struct sp_tg_opts *o, int a, int b, struct readout *second, uint64_t *last_first)
{
	struct sp_tg *g[2] = {sp_tg_create_opts(NULL, o), sp_tg_create_opts(NULL, o)};
	for (int k = 0; k < 2; k++)
		for (int i = 0; i < (k ? b : a); i++)
			for (int t = 0; t < 3; t++)
				SP_TG_ADD(g[k], 100 + t, SP_K_STEP, 0, 1000000 + i * 10 + t, 1000000 + i * 10 + t,
					  {SP_F_VALUE, (uint64_t)(t * 1000000 + i)});
	size_t len[2];
	uint8_t *img[2] = {sp_tg_image(g[0], &len[0]), sp_tg_image(g[1], &len[1])};
	struct memfile m[2];
	struct sp_reader *r = open_image(&m[0], img[0], len[0]);
	struct sp_event ev;
	last_first[0] = last_first[1] = last_first[2] = 0;
	while (sp_reader_next(r, &ev))
		last_first[ev.tid - 100] = ev.f[SP_F_VALUE];
	struct sp_reader_mark mk[8];
	size_t nm = sp_reader_marks(r, mk, 8);
	cr_assert_eq(nm, 3, "one mark per thread: %zu", nm);
	struct sp_reader_follow from;
	sp_reader_follow(r, &from);
	sp_reader_close(r);
	if (g_follow_from) {
		char err[256];
		mf_open(&m[1]);
		mf_set(&m[1], img[1], len[1]);
		cr_assert_eq(sp_reader_open_follow(m[1].path, &from, &r, err, sizeof(err)), 0, "%s", err);
	} else {
		r = open_image(&m[1], img[1], len[1]);
	}
	cr_assert_eq(sp_reader_resume(r, mk, nm), 0);
	memset(second, 0, sizeof(*second));
	size_t cap = 1024;
	second->ev = malloc(cap * sizeof(*second->ev));
	while (sp_reader_next(r, &ev)) {
		if (second->n == cap)
			second->ev = realloc(second->ev, (cap *= 2) * sizeof(*second->ev));
		second->ev[second->n++] = ev;
	}
	second->st = *sp_reader_stats(r);
	cr_expect_eq(sp_reader_resume(r, mk, nm), -1, "no resume once read");
	sp_reader_close(r);
	close(m[0].fd);
	close(m[1].fd);
	free(img[0]);
	free(img[1]);
}

Test(reader, a_resumed_reader_returns_only_what_was_written_since)
{
	/* 6 slots a chunk: phase a ends inside a chunk of each thread, which phase b fills */
	struct sp_tg_opts o = {.pid = 3, .chunk_size = 256, .keep_slots = 8, .leave_active = 1};
	struct readout r;
	uint64_t last[3];
	follow_two_reads(&o, 40, 100, &r, last);
	cr_assert_eq(r.n, 3 * 60, "records since the marks: %zu, written 180", r.n);
	int next[3] = {40, 40, 40};
	for (size_t i = 0; i < r.n; i++) {
		int t = r.ev[i].tid - 100;
		cr_assert_eq(r.ev[i].f[SP_F_VALUE], (uint64_t)(t * 1000000 + next[t]), "thread %d: %llu, expected %d", t,
			     (unsigned long long)r.ev[i].f[SP_F_VALUE], next[t]);
		next[t]++;
	}
	readout_free(&r);
}

Test(reader, a_resumed_reader_of_a_wrapped_ring_skips_what_is_gone_and_repeats_nothing)
{
	/* a ring of 12 chunks (72 slots): phase b writes 3 x 300 records, most overwritten */
	struct sp_tg_opts o = {.pid = 4, .chunk_size = 256, .ring_chunks = 12, .keep_slots = 8, .leave_active = 1};
	struct readout r;
	uint64_t last[3];
	follow_two_reads(&o, 10, 310, &r, last);
	cr_assert_gt(r.n, 0);
	cr_assert_lt(r.n, 3 * 300, "the ring kept %zu", r.n);
	uint64_t prev[3] = {last[0], last[1], last[2]};
	for (size_t i = 0; i < r.n; i++) {
		int t = r.ev[i].tid - 100;
		cr_assert_gt(r.ev[i].f[SP_F_VALUE], prev[t], "thread %d: %llu after %llu: repeated or out of order", t,
			     (unsigned long long)r.ev[i].f[SP_F_VALUE], (unsigned long long)prev[t]);
		prev[t] = r.ev[i].f[SP_F_VALUE];
	}
	for (int t = 0; t < 3; t++)
		cr_expect_eq(prev[t], (uint64_t)(t * 1000000 + 309), "thread %d ends at its last record", t);
	readout_free(&r);
}

/*
 * A reader opened with the previous one's sp_reader_follow (as stepprof watch
 * does at each tick) indexes only the chunks handed out since and those still
 * written then, and returns the same records as one that indexed the whole
 * ring: in a file that had grown well past the first read, and in a wrapped
 * ring.
 */
Test(reader, a_reader_opened_to_follow_indexes_less_and_returns_the_same)
{
	struct sp_tg_opts o[2] = {{.pid = 3, .chunk_size = 256, .keep_slots = 8, .leave_active = 1},
				  {.pid = 4, .chunk_size = 256, .ring_chunks = 12, .keep_slots = 8, .leave_active = 1}};
	int a[2] = {400, 10}, b[2] = {440, 310};
	for (int k = 0; k < 2; k++) {
		struct readout whole, from;
		uint64_t last[3], last2[3];
		g_follow_from = 0;
		follow_two_reads(&o[k], a[k], b[k], &whole, last);
		g_follow_from = 1;
		follow_two_reads(&o[k], a[k], b[k], &from, last2);
		g_follow_from = 0;
		cr_assert_eq(from.n, whole.n, "ring %d: %zu records, %zu from the whole index", k, from.n, whole.n);
		for (size_t i = 0; i < whole.n; i++)
			cr_assert(from.ev[i].tid == whole.ev[i].tid && from.ev[i].f[SP_F_VALUE] == whole.ev[i].f[SP_F_VALUE],
				  "ring %d: record %zu differs", k, i);
		cr_assert_gt(whole.n, 0);
		if (k == 0) /* 3 x 400 records in 6-slot chunks, then 3 x 40 more: the new chunks and the 3 still written */
			cr_assert_lt(from.st.indexed_chunks * 5, whole.st.indexed_chunks, "%llu chunks indexed, the whole ring %llu",
				     (unsigned long long)from.st.indexed_chunks, (unsigned long long)whole.st.indexed_chunks);
		readout_free(&whole);
		readout_free(&from);
	}
}

/*
 * sp_reader_next_raw (stepprof watch keeps records as slots) returns what
 * sp_reader_next returns: the same records in the same order, each the slots
 * that decode to it, the writer's thread and end time, and the same stats;
 * a GPU_SPAN2 as its two spans, a LOST with its count; read raw, by
 * sp_reader_next, or the two mixed record by record.
 */
Test(reader, raw_records_are_the_records)
{
	struct sp_tg_opts o = {.pid = 5, .chunk_size = 1024, .keep_slots = 8};
	struct sp_tg *g = sp_tg_create_opts(NULL, &o);
	uint64_t seed = 4242;
	uint64_t t = 1000;
	for (int i = 0; i < 600; i++) {
		unsigned kind = 1 + (unsigned)(xorshift(&seed) % (SP_K__COUNT - 1));
		if (kind == SP_K_STRING)
			continue;
		uint64_t f[SP_F__COUNT];
		for (unsigned fld = 0; fld < SP_F__COUNT; fld++)
			f[fld] = xorshift(&seed) >> (xorshift(&seed) % 64);
		if (kind == SP_K_GPU_SPAN2) /* its second span a little after the first */
			f[SP_F_BEGIN_DELTA] = xorshift(&seed) % 5000;
		int32_t tid = 5 + i % 3;
		t += xorshift(&seed) % 100;
		sp_tg_addv(g, tid, kind, (unsigned)(i % SP_API__COUNT), t, t + xorshift(&seed) % 3000, f);
	}
	SP_TG_ADD(g, 6, SP_K_LOST, 0, t + 10, t + 20, {SP_F_COUNT, 17});
	uint32_t sid = sp_tg_intern(g, "a_kernel");
	SP_TG_ADD(g, 7, SP_K_LAUNCH, SP_API_cudaLaunchKernel, t + 30, t + 40, {SP_F_NAME, sid});
	size_t len;
	uint8_t *img = sp_tg_image(g, &len);
	struct readout want;
	read_image(img, len, &want);
	cr_assert_gt(want.n, 500);
	for (int mode = 0; mode < 2; mode++) { /* 0: raw only; 1: raw and sp_reader_next in turn */
		struct memfile m;
		struct sp_reader *r = open_image(&m, img, len);
		struct sp_slot sl[SP_MAX_RECORD_SLOTS];
		struct sp_event ev;
		size_t n = 0;
		for (;; n++) {
			int32_t tid = -1;
			uint64_t end = 0;
			if (mode == 1 && n % 2) {
				if (!sp_reader_next(r, &ev))
					break;
			} else {
				unsigned k = sp_reader_next_raw(r, sl, &tid, &end);
				if (!k)
					break;
				memset(&ev, 0, sizeof(ev));
				cr_assert_eq(sp_decode_fast(sl, k, &ev), k, "record %zu: its slots decode", n);
				cr_assert_eq(end, ev.end_ns, "record %zu: end time", n);
				ev.tid = tid;
				ev.pid = want.ev[n].pid;
			}
			cr_assert_lt(n, want.n, "more records than sp_reader_next returns");
			const struct sp_event *w = &want.ev[n];
			cr_assert_eq(ev.kind, w->kind, "record %zu: kind %u, not %u", n, ev.kind, w->kind);
			cr_assert_eq(ev.tid, w->tid, "record %zu: thread", n);
			cr_assert_eq(ev.begin_ns, w->begin_ns, "record %zu: begin", n);
			cr_assert_eq(ev.end_ns, w->end_ns, "record %zu: end", n);
			cr_assert_eq(ev.api, w->api, "record %zu: api", n);
			cr_assert_eq(memcmp(ev.f, w->f, sizeof(ev.f)), 0, "record %zu (%s): fields", n,
				     sp_kind_name[w->kind]);
		}
		cr_assert_eq(n, want.n, "mode %d: %zu records, sp_reader_next %zu", mode, n, want.n);
		cr_assert_eq(memcmp(sp_reader_stats(r), &want.st, sizeof(want.st)), 0, "mode %d: the stats differ", mode);
		/* the string table, entry by entry, as sp_reader_string resolves it */
		uint32_t id;
		const char *s;
		size_t ns = 0, found = 0;
		for (; sp_reader_strings(r, ns, &id, &s); ns++) {
			cr_assert_str_eq(s, sp_reader_string(r, id));
			found += id == sid && !strcmp(s, "a_kernel");
		}
		cr_assert_eq(found, 1, "the interned string is in the table once");
		cr_assert_eq(ns, want.st.strings);
		sp_reader_close(r);
		close(m.fd);
	}
	readout_free(&want);
	free(img);
}

/*
 * sp_decode_again (only the previous record's fields cleared) gives what a
 * decode into a zeroed event gives, record after record of every kind in any
 * order, with records that fail to decode in between.
 */
Test(reader, decoding_again_is_decoding_afresh)
{
	uint64_t seed = 99;
	struct sp_event again;
	memset(&again, 0, sizeof(again));
	for (int i = 0; i < 5000; i++) {
		unsigned kind = 1 + (unsigned)(xorshift(&seed) % (SP_K__COUNT - 1));
		if (kind == SP_K_STRING)
			continue;
		struct sp_event ev = {.kind = (uint8_t)kind, .api = (uint16_t)(i % SP_API__COUNT)};
		ev.begin_ns = xorshift(&seed) >> 8;
		ev.end_ns = ev.begin_ns + (xorshift(&seed) >> 40);
		for (unsigned fld = 0; fld < SP_F__COUNT; fld++)
			ev.f[fld] = xorshift(&seed);
		struct sp_slot s[SP_MAX_RECORD_SLOTS];
		memset(s, 0, sizeof(s));
		unsigned n = sp_encode_fast(s, &ev);
		cr_assert_gt(n, 0);
		struct sp_event fresh;
		memset(&fresh, 0, sizeof(fresh));
		cr_assert_eq(sp_decode_fast(s, n, &fresh), n);
		if (i % 7 == 3) /* a record cut short: refused, and what follows still decodes right */
			cr_assert_eq(sp_decode_again(s, n - 1, &again), 0);
		cr_assert_eq(sp_decode_again(s, n, &again), n);
		cr_assert_eq(again.kind, fresh.kind);
		cr_assert_eq(again.mask, fresh.mask);
		cr_assert_eq(again.begin_ns, fresh.begin_ns);
		cr_assert_eq(again.end_ns, fresh.end_ns);
		cr_assert_eq(memcmp(again.f, fresh.f, sizeof(fresh.f)), 0, "record %d (%s): fields differ", i,
			     sp_kind_name[kind]);
	}
}

/*
 * Format 1.5's CPU fields: read back from a 1.5 header; 0 from an older one,
 * even where its bytes there are not zero (they were no field of its format).
 */
Test(reader, the_cpu_fields_of_a_1_5_header_and_zeros_before)
{
	struct memfile m;
	mf_open(&m);
	char err[256];
	for (unsigned minor = 3; minor <= SP_VERSION_MINOR; minor++) {
		struct sp_tg *g = sp_tg_create(NULL, 1, 0, -1);
		SP_TG_ADD(g, 1, SP_K_CPU_TIME, 0, 5, 5, {SP_F_VALUE, 123456789});
		struct sp_file_header *h = sp_tg_header(g);
		h->version_minor = (uint16_t)minor;
		h->online_cpus = 192;
		h->cpu_affinity_count = 3;
		h->cpu_affinity[0] = 0x3;	     /* CPUs 0, 1 */
		h->cpu_affinity[15] = 1ull << 63; /* CPU 1023 */
		size_t len;
		uint8_t *img = sp_tg_image(g, &len);
		mf_set(&m, img, len);
		free(img);
		struct sp_reader *rd;
		cr_assert_eq(sp_reader_open(m.path, &rd, err, sizeof(err)), 0, "%s", err);
		const struct sp_file_header *got = sp_reader_header(rd);
		int known = minor >= 5;
		cr_expect_eq(got->online_cpus, known ? 192u : 0u, "1.%u: online_cpus %u", minor, got->online_cpus);
		cr_expect_eq(got->cpu_affinity_count, known ? 3u : 0u, "1.%u", minor);
		cr_expect_eq(got->cpu_affinity[0], known ? 0x3ull : 0ull, "1.%u", minor);
		cr_expect_eq(got->cpu_affinity[15], known ? 1ull << 63 : 0ull, "1.%u", minor);
		/* the record reads the same in any minor */
		struct sp_event ev;
		cr_assert(sp_reader_next(rd, &ev));
		cr_expect_eq(ev.kind, SP_K_CPU_TIME);
		cr_expect_eq(ev.f[SP_F_VALUE], 123456789ull);
		cr_expect_eq(ev.begin_ns, 5ull);
		cr_expect_eq(ev.end_ns, 5ull);
		sp_reader_close(rd);
	}
	close(m.fd);
}
