/*
 * fuzz_reader.c - libFuzzer target: the input bytes are one trace file, read the
 * way `stepprof info` and `dump` read it: open, every record, the strings each
 * record names, the keep area's summaries, the statistics; then the way
 * `stepprof watch` follows it: opened again and resumed from the first read's
 * marks (it may return no more records than the first read did), and once
 * more from marks made of the input's own bytes.
 *
 * The reader promises (reader.h) that every byte is untrusted: a bad file is
 * refused at open with a one-line reason, or read with bad slots skipped and
 * counted. Anything the sanitizers report here breaks that promise.
 */
#include "fuzz_common.h"

#include <string.h>

#include "reader.h"

/* Touch every byte of a string the reader hands out, so ASan sees a bad one. */
static size_t touch(const char *s)
{
	return s ? strlen(s) : 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	char path[64], err[256];
	int fd = fuzz_memfd(data, size, path, sizeof(path));
	if (fd < 0)
		return 0;
	struct sp_reader *r = NULL;
	if (sp_reader_open(path, &r, err, sizeof(err))) {
		/* The refusal must be one line. */
		if (!err[0] || strchr(err, '\n'))
			abort();
		close(fd);
		return 0;
	}
	volatile size_t sink = 0;
	const struct sp_file_header *h = sp_reader_header(r);
	sink += h->pid;
	sink += touch(sp_reader_path(r));
	struct sp_event ev;
	while (sp_reader_next(r, &ev) == 1) {
		sink += ev.kind + ev.api;
		/* Any field may be a string id: resolve each as one. */
		for (int f = 0; f < SP_F__COUNT; f++)
			sink += touch(sp_reader_string(r, (uint32_t)ev.f[f]));
	}
	size_t pos = 0;
	while (sp_reader_summary(r, &pos, &ev) == 1)
		sink += ev.kind;
	const struct sp_reader_stats *st = sp_reader_stats(r);
	sink += st->records + st->strings + st->corrupt_slots;
	if (sp_reader_find(h) != r)
		abort();
	uint64_t first = st->records;
	struct sp_reader_mark mk[64];
	size_t nm = sp_reader_marks(r, mk, 64);
	struct sp_reader_follow follow;
	sp_reader_follow(r, &follow);
	sp_reader_close(r);
	for (int round = 0; round < 2; round++) {
		/* as the watcher opens it again: what the first read said to follow; then what the input holds */
		if (round == 1) {
			memset(&follow, 0, sizeof(follow));
			memcpy(&follow, data, size < sizeof(follow) ? size : sizeof(follow));
		}
		if (sp_reader_open_follow(path, &follow, &r, err, sizeof(err)))
			abort(); /* it opened a moment ago, unchanged */
		if (round == 1) {
			/* marks from the input's bytes: any pid, tid, seq and slot count */
			nm = size / sizeof(mk[0]) < 64 ? size / sizeof(mk[0]) : 64;
			memcpy(mk, data, nm * sizeof(mk[0]));
		}
		if (sp_reader_resume(r, mk, nm < 64 ? nm : 64))
			abort();
		/* as the watcher reads: records as slots (each must decode), and decoded, in turn */
		uint64_t again = 0;
		struct sp_slot sl[SP_MAX_RECORD_SLOTS];
		struct sp_event dec;
		memset(&dec, 0, sizeof(dec));
		for (;; again++) {
			int32_t tid;
			uint64_t end;
			if (again % 3 == 2) {
				if (sp_reader_next(r, &ev) != 1)
					break;
				continue;
			}
			unsigned k = sp_reader_next_raw(r, sl, &tid, &end);
			if (!k)
				break;
			if (sp_decode_again(sl, k, &dec) != k || dec.end_ns != end)
				abort();
			sink += dec.kind;
		}
		uint32_t id;
		const char *str;
		for (size_t i = 0; sp_reader_strings(r, i, &id, &str); i++)
			sink += touch(str);
		if (again > first)
			abort();
		sp_reader_close(r);
	}
	(void)sink;
	close(fd);
	return 0;
}
