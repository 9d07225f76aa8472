/*
 * test_intern.c - the intern table (preload/intern.c) and the trace-file writer
 * it stores into (libtrace/tracefile.c), checked through the analyzer's reader:
 * what the reader finds in the file is the ground truth, not the table.
 *
 * Divided into: helpers; ids; concurrency; limits (keep area full, long
 * strings); the writer's streams (ring accounting, lost records on a full disk).
 */
#include <criterion/criterion.h>
#include <pthread.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>
#include <unistd.h>

#include "intern.h"
#include "reader.h"
#include "testlib.h"
#include "tracefile.h"

/* ------------------------------------------------------------------ helpers */

struct fixture {
	char *dir;
	struct sp_tf tf;
	struct sp_intern t;
};

static int warnings;
static void count_warn(const char *key, const char *msg)
{
	warnings++;
}

static void open_fixture(struct fixture *x, uint64_t max_bytes)
{
	char err[256];
	x->dir = sp_t_tmpdir("intern");
	warnings = 0;
	struct sp_tf_opts o = {.dir = x->dir, .max_bytes = max_bytes, .cmdline = "test", .warn = count_warn};
	cr_assert_eq(sp_tf_create(&x->tf, &o, err, sizeof(err)), 0, "%s", err);
	cr_assert_eq(sp_intern_init(&x->t, 16), 0);
}

static void close_fixture(struct fixture *x)
{
	sp_intern_free(&x->t);
	sp_tf_release(&x->tf);
	sp_t_rmrf(x->dir);
}

/* Open the file with the reader and drain it (strings are read at open or while reading). */
static struct sp_reader *reread(struct fixture *x)
{
	struct sp_reader *r;
	char err[256];
	cr_assert_eq(sp_reader_open(x->tf.path, &r, err, sizeof(err)), 0, "%s", err);
	struct sp_event ev;
	while (sp_reader_next(r, &ev))
		;
	return r;
}

/* ---------------------------------------------------------------------- ids */

Test(intern, same_string_same_id_and_readable)
{
	struct fixture x;
	open_fixture(&x, 4 << 20);
	const char *words[] = {"a",	   "ab",	"abc",	       "abcd",	     "abcde", "abcdefg",
			       "abcdefgh", "abcdefghi", "/data/x.bin", "train_step", ""};
	uint32_t ids[11];
	for (int i = 0; i < 11; i++) {
		ids[i] = sp_intern_get(&x.t, &x.tf, words[i], strlen(words[i]));
		cr_assert_gt(ids[i], 0, "%s", words[i]);
		for (int k = 0; k < i; k++)
			cr_assert_neq(ids[i], ids[k], "%s and %s share an id", words[i], words[k]);
	}
	for (int i = 0; i < 11; i++)
		cr_expect_eq(sp_intern_get(&x.t, &x.tf, words[i], strlen(words[i])), ids[i]);
	cr_expect_eq(ids[0], 1, "ids start at 1");
	struct sp_reader *r = reread(&x);
	cr_expect_eq(sp_reader_stats(r)->strings, 11, "one STRING record per distinct string");
	for (int i = 0; i < 11; i++) {
		const char *s = sp_reader_string(r, ids[i]);
		cr_assert(s, "id %u not in the file", ids[i]);
		cr_expect_str_eq(s, words[i]);
	}
	sp_reader_close(r);
	close_fixture(&x);
}

Test(intern, length_counts_not_the_nul)
{
	struct fixture x;
	open_fixture(&x, 4 << 20);
	uint32_t a = sp_intern_get(&x.t, &x.tf, "step_one", 4), b = sp_intern_get(&x.t, &x.tf, "step", 4);
	uint32_t c = sp_intern_get(&x.t, &x.tf, "step_one", 8);
	cr_expect_eq(a, b, "a prefix of the given length is the string");
	cr_expect_neq(a, c);
	close_fixture(&x);
}

static int cmp(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
	return x < y ? -1 : x > y;
}

Test(intern, hash_has_no_collisions_on_near_strings)
{
	/* distinct inputs: every 1- and 2-byte string, then zero-padded counters of
	 * lengths 3..24 (neighbours differ in one or two bytes): no equal hashes */
	size_t n = 0, cap = 256 + 65536 + 22 * 10000;
	uint64_t *h = malloc(cap * sizeof(*h));
	char buf[32];
	for (unsigned v = 0; v < 256; v++) {
		buf[0] = (char)v;
		h[n++] = sp_intern_hash(buf, 1);
	}
	for (unsigned v = 0; v < 65536; v++) {
		buf[0] = (char)(v & 0xff), buf[1] = (char)(v >> 8);
		h[n++] = sp_intern_hash(buf, 2);
	}
	for (int len = 3; len <= 24; len++)
		for (unsigned v = 0; v < (len == 3 ? 1000u : 10000u); v++) {
			snprintf(buf, sizeof(buf), "%0*u", len, v);
			h[n++] = sp_intern_hash(buf, (size_t)len);
		}
	qsort(h, n, sizeof(*h), cmp);
	size_t dups = 0;
	for (size_t i = 1; i < n; i++)
		if (h[i] == h[i - 1])
			dups++;
	cr_expect_eq(dups, 0, "%zu equal hashes among %zu distinct strings", dups, n);
	free(h);
}

Test(intern, reset_restarts_ids)
{
	struct fixture x;
	open_fixture(&x, 4 << 20);
	sp_intern_get(&x.t, &x.tf, "one", 3);
	sp_intern_get(&x.t, &x.tf, "two", 3);
	sp_intern_reset(&x.t);
	cr_expect_eq(sp_intern_get(&x.t, &x.tf, "two", 3), 1, "after reset the first string gets id 1 again");
	close_fixture(&x);
}

/*
 * A dataset of many files (ImageNet: 1.28 M paths) in one process: the table
 * grows by adding tables instead of storing every path again on each sight.
 * Here from a first table of 2^10 entries: 200,000 strings take 4 more tables,
 * every string is written once to the keep area, and a second pass finds
 * every one of them (in whichever table it went) without writing anything.
 */
#define NGROW 200000
static uint32_t grow_ids[NGROW];

Test(intern, grows_by_tables_each_string_stored_once, .timeout = 120)
{
	struct fixture x;
	open_fixture(&x, 256ull << 20);
	sp_intern_free(&x.t);
	cr_assert_eq(sp_intern_init(&x.t, 10), 0);
	char s[32];
	for (int i = 0; i < NGROW; i++) {
		int n = snprintf(s, sizeof(s), "d%03d/f%07d", i % 1000, i); /* 13 bytes: one slot */
		grow_ids[i] = sp_intern_get(&x.t, &x.tf, s, (size_t)n);
		cr_assert_eq(grow_ids[i], (uint32_t)i + 1, "string %d got id %u", i, grow_ids[i]);
	}
	cr_expect_eq(x.t.ntab, SP_INTERN_TABLES, "2^10 + 2^12 + 2^14 + 2^16 half full: the fifth table holds the rest");
	uint64_t slots = x.tf.hdr->keep_next_slot;
	cr_expect_eq(slots, NGROW, "one STRING record per string: %lu slots", (unsigned long)slots);
	for (int i = NGROW - 1; i >= 0; i--) {
		int n = snprintf(s, sizeof(s), "d%03d/f%07d", i % 1000, i);
		uint32_t id = sp_intern_get(&x.t, &x.tf, s, (size_t)n);
		cr_assert_eq(id, grow_ids[i], "second sight of string %d: id %u, first %u", i, id, grow_ids[i]);
	}
	cr_expect_eq(x.tf.hdr->keep_next_slot, slots, "the second pass wrote nothing");
	struct sp_reader *r = reread(&x);
	for (int i = 0; i < NGROW; i += 997) {
		snprintf(s, sizeof(s), "d%03d/f%07d", i % 1000, i);
		cr_assert_str_eq(sp_reader_string(r, grow_ids[i]), s);
	}
	sp_reader_close(r);
	/* a forked child's reset drops the added tables: ids restart at 1 */
	sp_intern_reset(&x.t);
	cr_expect_eq(x.t.ntab, 1);
	cr_expect_eq(sp_intern_get(&x.t, &x.tf, "d000/f0000000", 13), 1);
	close_fixture(&x);
}

/* The recorder's strings stop at their half of the keep area; the other half stays for the summaries. */
Test(intern, strings_leave_the_summaries_half_of_the_keep_area)
{
	struct fixture x;
	open_fixture(&x, 4 << 20);
	x.tf.keep_string_max = x.tf.keep_slots - x.tf.keep_slots / 2;
	char s[32];
	unsigned ok = 0, zeros = 0;
	for (unsigned i = 0; i < x.tf.keep_slots; i++) {
		int n = snprintf(s, sizeof(s), "s%u", i);
		if (sp_intern_get(&x.t, &x.tf, s, (size_t)n))
			ok++;
		else
			zeros++;
	}
	cr_expect_eq(ok, x.tf.keep_string_max, "one-slot strings: exactly the strings' half fits");
	cr_expect_eq(zeros, x.tf.keep_slots - ok);
	cr_expect_geq(warnings, 1, "the writer says the strings' half is full");
	cr_expect_not_null(sp_tf_keep_reserve(&x.tf, (unsigned)(x.tf.keep_slots / 2)),
			   "the summaries' half is still free");
	close_fixture(&x);
}

/* ------------------------------------------------------------- concurrency */

#define NSTR 2000
#define NTHR 4
static struct fixture cx;
static uint32_t got[NTHR][NSTR];

static void *interner(void *arg)
{
	long t = (long)arg;
	char s[32];
	for (int k = 0; k < NSTR; k++) {
		int i = (int)((k * 7 + t * 501) % NSTR); /* each thread in its own order */
		int n = snprintf(s, sizeof(s), "str-%d", i);
		got[t][i] = sp_intern_get(&cx.t, &cx.tf, s, (size_t)n);
	}
	return NULL;
}

Test(intern, concurrent_inserts_all_readable)
{
	open_fixture(&cx, 4 << 20);
	pthread_t th[NTHR];
	for (long t = 0; t < NTHR; t++)
		pthread_create(&th[t], NULL, interner, (void *)t);
	for (long t = 0; t < NTHR; t++)
		pthread_join(th[t], NULL);
	struct sp_reader *r = reread(&cx);
	char s[32];
	for (int i = 0; i < NSTR; i++) {
		snprintf(s, sizeof(s), "str-%d", i);
		/* every id any thread got names the right string (a race may give two ids to one string) */
		for (int t = 0; t < NTHR; t++) {
			const char *back = sp_reader_string(r, got[t][i]);
			cr_assert(back, "thread %d's id %u for %s is not in the file", t, got[t][i], s);
			cr_assert_str_eq(back, s);
		}
		/* once settled, the table answers one id */
		uint32_t a = sp_intern_get(&cx.t, &cx.tf, s, strlen(s)), b = sp_intern_get(&cx.t, &cx.tf, s, strlen(s));
		cr_assert_eq(a, b);
	}
	cr_expect_lt(sp_reader_stats(r)->strings, NSTR + NSTR / 10, "few duplicates: %lu strings for %d",
		     (unsigned long)sp_reader_stats(r)->strings, NSTR);
	sp_reader_close(r);
	close_fixture(&cx);
}

/* ------------------------------------------------------------------ limits */

Test(intern, keep_area_full_gives_zero_not_a_crash)
{
	struct fixture x;
	open_fixture(&x, 4 << 20);
	char big[SP_MAX_STRING];
	uint64_t slots = x.tf.keep_slots, per = sp_string_slots(SP_MAX_STRING), fits = slots / per;
	uint32_t last = 0;
	unsigned zeros = 0;
	for (unsigned i = 0; i < fits + 10; i++) {
		memset(big, 'a' + (int)(i % 26), sizeof(big));
		snprintf(big, 16, "%u-", i);
		uint32_t id = sp_intern_get(&x.t, &x.tf, big, sizeof(big));
		if (id)
			last = id;
		else
			zeros++;
	}
	cr_expect_eq(last, fits, "%lu strings of 1 KiB fit in %lu keep slots", (unsigned long)fits,
		     (unsigned long)slots);
	cr_expect_eq(zeros, 10);
	cr_expect_eq(x.tf.hdr->keep_next_slot, fits * per, "the counter never passes the area");
	cr_expect_geq(warnings, 1, "the writer says the area is full");
	close_fixture(&x);
}

Test(intern, long_string_clipped)
{
	struct fixture x;
	open_fixture(&x, 4 << 20);
	char big[3000];
	memset(big, 'z', sizeof(big));
	uint32_t id = sp_intern_get(&x.t, &x.tf, big, sizeof(big));
	cr_assert_gt(id, 0);
	struct sp_reader *r = reread(&x);
	cr_expect_eq(strlen(sp_reader_string(r, id)), SP_MAX_STRING);
	sp_reader_close(r);
	close_fixture(&x);
}

/* ----------------------------------------------------------- writer streams */

Test(tracefile, stream_records_ring_and_overwritten_exact)
{
	struct fixture x;
	open_fixture(&x, 4 << 20);
	struct sp_tf_stream s;
	sp_tf_stream_init(&s, &x.tf, 1234, 1235);
	uint64_t f[SP_F__COUNT] = {0};
	const unsigned total = 500000; /* 16 MB of one-slot records through a 4 MiB file */
	for (unsigned i = 0; i < total; i++) {
		f[SP_F_VALUE] = i;
		cr_assert_eq(sp_tf_write(&s, SP_K_STEP, 0, 1000 + i, 1000 + i, f), 0);
	}
	sp_tf_stream_close(&s);
	struct sp_reader *r;
	char err[256];
	cr_assert_eq(sp_reader_open(x.tf.path, &r, err, sizeof(err)), 0, "%s", err);
	struct sp_event ev;
	uint64_t n = 0, prev = 0, first = 0;
	while (sp_reader_next(r, &ev)) {
		cr_assert_eq(ev.kind, SP_K_STEP);
		cr_assert_eq(ev.pid, 1234);
		cr_assert_eq(ev.tid, 1235);
		if (n == 0)
			first = ev.f[SP_F_VALUE];
		else
			cr_assert_eq(ev.f[SP_F_VALUE], prev + 1, "records in order, no gap");
		prev = ev.f[SP_F_VALUE];
		n++;
	}
	cr_expect_eq(prev, total - 1, "the newest record is kept");
	cr_expect_eq(first + n, total, "what is kept is the newest suffix");
	cr_expect_eq(sp_reader_stats(r)->overwritten, first, "overwritten counts exactly the older records");
	sp_reader_close(r);
	close_fixture(&x);
}

/* A full disk costs records, counted exactly; when space returns a LOST record says how many. */
Test(tracefile, lost_record_when_space_returns)
{
	struct fixture x = {0};
	x.dir = sp_t_tmpdir("full");
	/* a mount namespace of the test's own: a test killed by its timeout leaves no mount behind */
	if (unshare(CLONE_NEWNS) == 0)
		mount(NULL, "/", NULL, MS_REC | MS_PRIVATE, NULL);
	if (mount("tmpfs", x.dir, "tmpfs", 0, "size=1m") != 0) {
		sp_t_rmrf(x.dir);
		cr_skip_test("mount -t tmpfs refused (not root?)");
	}
	char filler[600], err[256];
	snprintf(filler, sizeof(filler), "%s/filler", x.dir);
	static char blob[700 << 10];
	cr_assert_eq(sp_t_write_file(filler, blob, sizeof(blob)), 0);
	warnings = 0;
	struct sp_tf_opts o = {.dir = x.dir, .max_bytes = 4 << 20, .cmdline = "test", .warn = count_warn};
	cr_assert_eq(sp_tf_create(&x.tf, &o, err, sizeof(err)), 0, "%s", err);

	struct sp_tf_stream s;
	sp_tf_stream_init(&s, &x.tf, 7, 8);
	uint64_t f[SP_F__COUNT] = {0}, t = 1000000, ok = 0, lost = 0;
	/* synthetic clock, 1 ns per record: no retry before space returns */
	for (unsigned i = 0; i < 100000; i++, t++) {
		f[SP_F_VALUE] = i;
		if (sp_tf_write(&s, SP_K_STEP, 0, t, t, f) == 0)
			ok++;
		else
			lost++;
	}
	cr_assert_gt(ok, 0);
	cr_assert_gt(lost, 0, "1 MiB of tmpfs cannot hold 100,000 records");
	cr_expect_eq(x.tf.hdr->lost_records, lost, "counted in the header at once");
	cr_expect_geq(warnings, 1);

	unlink(filler);
	t += 2000000; /* past the retry delay */
	f[SP_F_VALUE] = 999999;
	cr_assert_eq(sp_tf_write(&s, SP_K_STEP, 0, t, t, f), 0, "space is back");
	cr_expect_eq(x.tf.hdr->lost_records, 0, "moved to the LOST record");
	sp_tf_stream_close(&s);

	struct sp_reader *r;
	cr_assert_eq(sp_reader_open(x.tf.path, &r, err, sizeof(err)), 0, "%s", err);
	struct sp_event ev;
	uint64_t steps = 0, lost_rec = 0, lost_count = 0;
	while (sp_reader_next(r, &ev)) {
		if (ev.kind == SP_K_STEP)
			steps++;
		if (ev.kind == SP_K_LOST) {
			lost_rec++;
			lost_count += ev.f[SP_F_COUNT];
		}
	}
	cr_expect_eq(steps, ok + 1);
	cr_expect_eq(lost_rec, 1);
	cr_expect_eq(lost_count, lost);
	cr_expect_eq(sp_reader_stats(r)->lost, lost, "the reader reports exactly the lost records");
	sp_reader_close(r);
	sp_intern_free(&x.t);
	sp_tf_release(&x.tf);
	umount(x.dir);
	sp_t_rmrf(x.dir);
}

/*
 * Records lost while every chunk was held, then the chunk holding their LOST
 * record overwritten by the ring: the loss must still be counted, and the LOST
 * record itself is not an overwritten event. Ground truth: what each stream was
 * asked to write and what sp_tf_write refused.
 */
Test(tracefile, losses_survive_the_ring_reusing_their_chunk)
{
	struct fixture x;
	open_fixture(&x, 4 << 20);
	const uint32_t nch = x.tf.ring_chunks;
	cr_assert_lt(nch, 200u);
	static struct sp_tf_stream s[201];
	uint64_t f[SP_F__COUNT] = {0}, t = 1000000, written = 0, refused = 0;
	/* one record per stream holds every chunk; the extra stream finds none */
	for (uint32_t i = 0; i <= nch; i++) {
		sp_tf_stream_init(&s[i], &x.tf, 1, (int32_t)(100 + i));
		f[SP_F_VALUE] = i;
		if (sp_tf_write(&s[i], SP_K_STEP, 0, t, t, f) == 0)
			written++;
		else
			refused++;
		t++;
	}
	cr_assert_eq(refused, 1, "%u chunks, %u streams", nch, nch + 1);
	cr_expect_geq(warnings, 1, "the full ring is warned about");
	/* still refused within the retry delay */
	cr_assert_neq(sp_tf_write(&s[nch], SP_K_STEP, 0, t, t, f), 0);
	refused++;
	/* a chunk is freed; past the delay the extra stream gets it, its LOST record first */
	sp_tf_stream_close(&s[0]);
	t += 2000000;
	cr_assert_eq(sp_tf_write(&s[nch], SP_K_STEP, 0, t, t, f), 0);
	written++;
	sp_tf_stream_close(&s[nch]);
	for (uint32_t i = 1; i < nch; i++)
		sp_tf_stream_close(&s[i]);
	/* one stream wraps the ring twice: every chunk, the LOST record's included, is reused */
	struct sp_tf_stream w;
	sp_tf_stream_init(&w, &x.tf, 1, 99);
	const uint64_t many = 2ull * nch * (SP_TF_CHUNK_SIZE / SP_SLOT_SIZE);
	for (uint64_t i = 0; i < many; i++, t++)
		cr_assert_eq(sp_tf_write(&w, SP_K_STEP, 0, t, t, f), 0);
	written += many;
	sp_tf_stream_close(&w);

	struct sp_reader *r = reread(&x);
	const struct sp_reader_stats *st = sp_reader_stats(r);
	cr_expect_eq(st->by_kind[SP_K_LOST], 0, "the LOST record was overwritten");
	cr_expect_eq(st->lost, refused, "lost %lu, refused %lu", (unsigned long)st->lost, (unsigned long)refused);
	cr_expect_eq(st->by_kind[SP_K_STEP] + st->overwritten, written, "kept %lu + overwritten %lu != written %lu",
		     (unsigned long)st->by_kind[SP_K_STEP], (unsigned long)st->overwritten, (unsigned long)written);
	sp_reader_close(r);
	close_fixture(&x);
}
