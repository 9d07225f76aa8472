/*
 * test_codec.c - the record codec of include/stepprof/trace.h.
 *
 * Divided into:
 *   1. round trip of every record kind (iterating kinds.def and fields.def, so a
 *      kind or field appended later is covered without touching this file), field
 *      by field, with values at each field's width limits,
 *   2. the documented byte layout (fields packed little-endian in fields.def order
 *      after the 16-byte head; continuation slots start with 255),
 *   3. STRING records and the duration encoding,
 *   4. what the decoder must refuse (the reader counts those slots as corrupt).
 *
 * Expected values are the ones the test chose, never the codec's own output.
 */
#include <criterion/criterion.h>
#include <stdint.h>
#include <string.h>

#include "stepprof/trace.h"

/* ------------------------------------------------ 1. every kind, every field */

/* Values to try for a field: the width's limits and a pattern that differs per field. */
static unsigned field_values(unsigned field, uint64_t *v)
{
	unsigned w = sp_field_width[field];
	uint64_t all = w >= 8 ? ~0ull : (1ull << (8 * w)) - 1;
	unsigned n = 0;
	v[n++] = 0;
	v[n++] = 1;
	v[n++] = all;					      /* for I: -1 */
	v[n++] = (0x0102030405060708ull * (field + 1)) & all; /* distinct per field */
	if (sp_field_type[field] == SP_T_I) {
		v[n++] = 1ull << (8 * w - 1);	    /* most negative */
		v[n++] = (1ull << (8 * w - 1)) - 1; /* most positive */
	} else {
		v[n++] = all - 1;
		v[n++] = 1ull << (8 * w - 1);
	}
	return n;
}

/* What decode must give back for value v written to `field`: signed fields sign-extended. */
static uint64_t expect_value(unsigned field, uint64_t v)
{
	unsigned w = sp_field_width[field];
	if (w < 8)
		v &= (1ull << (8 * w)) - 1; /* only the field's width is stored */
	if (sp_field_type[field] == SP_T_I && w < 8 && ((v >> (8 * w - 1)) & 1))
		return v | (~0ull << (8 * w));
	return v;
}

static void roundtrip(unsigned kind, const uint64_t *f, uint64_t begin, uint64_t dur, unsigned api)
{
	struct sp_slot s[SP_MAX_RECORD_SLOTS + 1];
	memset(s, 0xAA, sizeof(s)); /* garbage beyond the record must not matter */
	unsigned n = sp_encode(s, kind, api, begin, dur, f);
	cr_assert_eq(n, sp_kind_slots(kind), "kind %s", sp_kind_name[kind]);
	cr_assert(n >= 1 && n <= SP_MAX_RECORD_SLOTS);
	cr_assert_eq(s[0].kind, 0, "encode leaves the kind for the commit");
	s[0].kind = (uint8_t)kind;
	struct sp_event ev;
	memset(&ev, 0x55, sizeof(ev));
	cr_assert_eq(sp_decode(s, n, &ev), n, "kind %s", sp_kind_name[kind]);
	cr_assert_eq(ev.kind, kind);
	cr_assert_eq(ev.api, api);
	cr_assert_eq(ev.begin_ns, begin);
	cr_assert_eq(ev.end_ns, begin + dur);
	cr_assert_eq(ev.mask, sp_kind_mask[kind]);
	for (unsigned i = 0; i < SP_F__COUNT; i++) {
		uint64_t want = (sp_kind_mask[kind] >> i) & 1 ? expect_value(i, f[i]) : 0;
		cr_assert_eq(ev.f[i], want, "kind %s field %s: got %#llx want %#llx", sp_kind_name[kind],
			     sp_field_name[i], (unsigned long long)ev.f[i], (unsigned long long)want);
	}
}

Test(codec, every_kind_every_field_at_width_limits)
{
	unsigned kinds_tested = 0;
	for (unsigned kind = 1; kind < SP_K__COUNT; kind++) {
		if (kind == SP_K_STRING)
			continue;
		kinds_tested++;
		/* Each field on its own through all its values, the others at a distinct pattern. */
		for (unsigned fld = 0; fld < SP_F__COUNT; fld++) {
			if (!((sp_kind_mask[kind] >> fld) & 1))
				continue;
			uint64_t vals[8];
			unsigned nv = field_values(fld, vals);
			for (unsigned k = 0; k < nv; k++) {
				uint64_t f[SP_F__COUNT];
				for (unsigned i = 0; i < SP_F__COUNT; i++) {
					uint64_t v[8];
					field_values(i, v);
					f[i] = v[3];
				}
				f[fld] = vals[k];
				roundtrip(kind, f, 123456789012345ull + k, 1000 + k, (kind + k) % SP_API__COUNT);
			}
		}
		/* All fields at their maximum together, and all at zero. */
		uint64_t f[SP_F__COUNT];
		for (unsigned i = 0; i < SP_F__COUNT; i++)
			f[i] = ~0ull;
		roundtrip(kind, f, ~0ull - 5000, 0, SP_API__COUNT - 1);
		memset(f, 0, sizeof(f));
		roundtrip(kind, f, 0, 0, 0);
	}
	cr_assert_eq(kinds_tested, SP_K__COUNT - 2);
}

Test(codec, kind_and_field_tables_are_consistent)
{
	for (unsigned kind = 1; kind < SP_K__COUNT; kind++) {
		cr_assert_not_null(sp_kind_name[kind]);
		cr_assert(sp_kind_slots(kind) <= SP_MAX_RECORD_SLOTS, "kind %s too long", sp_kind_name[kind]);
		cr_assert_eq(sp_kind_mask[kind] >> SP_F__COUNT, 0, "kind %s names an unknown field",
			     sp_kind_name[kind]);
		for (unsigned k2 = 1; k2 < kind; k2++)
			cr_assert_str_neq(sp_kind_name[kind], sp_kind_name[k2]);
	}
	for (unsigned i = 0; i < SP_F__COUNT; i++) {
		cr_assert(sp_field_width[i] >= 1 && sp_field_width[i] <= 8, "field %s width", sp_field_name[i]);
		for (unsigned j = 0; j < i; j++)
			cr_assert_str_neq(sp_field_name[i], sp_field_name[j]);
	}
	cr_assert(SP_K__COUNT < SP_K_CONT);
	/* The frequent records fit one slot (fields.def's promise). */
	unsigned one_slot[] = {SP_K_MARK, SP_K_STEP, SP_K_LAUNCH, SP_K_SYNC,
			       SP_K_OPEN, SP_K_STAT, SP_K_READ,	  SP_K_LOADER_WAIT};
	for (unsigned i = 0; i < sizeof(one_slot) / sizeof(one_slot[0]); i++)
		cr_assert_eq(sp_kind_slots(one_slot[i]), 1, "%s", sp_kind_name[one_slot[i]]);
	cr_assert_eq(sizeof(struct sp_slot), SP_SLOT_SIZE);
	cr_assert_eq(sizeof(struct sp_chunk_header), SP_CHUNK_HDR_SLOTS * SP_SLOT_SIZE);
	cr_assert(sizeof(struct sp_file_header) <= SP_HEADER_SIZE);
}

/* ----------------------------------------------------------- 2. byte layout */

Test(codec, byte_layout_is_little_endian_in_field_order)
{
	/* A copy record: stream(6) ptr(6) dptr(6) bytes(5) ... crosses into continuation slots. */
	uint64_t f[SP_F__COUNT] = {0};
	f[SP_F_STREAM] = 0x0000112233445566ull;
	f[SP_F_PTR] = 0x0000a1a2a3a4a5a6ull;
	f[SP_F_DPTR] = 0x0000b1b2b3b4b5b6ull;
	f[SP_F_BYTES] = 0x000000c1c2c3c4c5ull;
	struct sp_slot s[4];
	memset(s, 0, sizeof(s));
	unsigned n = sp_encode(s, SP_K_COPY, 7, 0x1122334455667788ull, 42, f);
	cr_assert(n >= 2);
	const uint8_t *b = (const uint8_t *)s;
	cr_assert_eq(b[0], 0);
	cr_assert_eq(b[1], n);
	cr_assert_eq(b[2] | b[3] << 8, 7);
	cr_assert_eq(b[4], 42);
	cr_assert_eq(b[8], 0x88);
	cr_assert_eq(b[15], 0x11);
	/* stream at payload 0..5, ptr at 6..11, dptr at 12..15 then continuation */
	cr_assert_eq(b[16], 0x66);
	cr_assert_eq(b[21], 0x11);
	cr_assert_eq(b[22], 0xa6);
	cr_assert_eq(b[27], 0xa1);
	cr_assert_eq(b[28], 0xb6);
	cr_assert_eq(b[31], 0xb3);
	cr_assert_eq(b[32], SP_K_CONT);
	cr_assert_eq(b[33], 0xb2);
	cr_assert_eq(b[34], 0xb1);
	cr_assert_eq(b[35], 0xc5);
	cr_assert_eq(b[39], 0xc1);
	/* A mark: name is a 3-byte string id in the first payload bytes, one slot. */
	memset(f, 0, sizeof(f));
	f[SP_F_NAME] = 0xabcdef;
	cr_assert_eq(sp_encode(s, SP_K_MARK, 0, 5, 0, f), 1);
	cr_assert_eq(b[16], 0xef);
	cr_assert_eq(b[17], 0xcd);
	cr_assert_eq(b[18], 0xab);
	cr_assert_eq(b[19], 0);
}

/* ------------------------------------------------- 3. strings and durations */

Test(codec, string_records_round_trip)
{
	unsigned lens[] = {0, 1, 15, 16, 17, 46, 47, 48, 200, SP_MAX_STRING - 1, SP_MAX_STRING};
	char text[SP_MAX_STRING + 1];
	for (unsigned i = 0; i < SP_MAX_STRING; i++)
		text[i] = (char)(i * 7 + 1); /* includes bytes >= 0x80, never NUL */
	for (unsigned li = 0; li < sizeof(lens) / sizeof(lens[0]); li++) {
		unsigned len = lens[li];
		struct sp_slot s[SP_MAX_RECORD_SLOTS];
		memset(s, 0xEE, sizeof(s));
		uint32_t id_in = 0xffffff - li;
		unsigned n = sp_string_encode(s, id_in, text, len);
		cr_assert_eq(n, sp_string_slots(len));
		cr_assert(n <= SP_MAX_RECORD_SLOTS);
		s[0].kind = SP_K_STRING;
		char out[SP_MAX_STRING + 1];
		uint32_t id = 0;
		unsigned olen = 0;
		cr_assert_eq(sp_string_decode(s, n, &id, out, &olen), n, "len %u", len);
		cr_assert_eq(id, id_in);
		cr_assert_eq(olen, len);
		cr_assert_eq(memcmp(out, text, len), 0, "len %u", len);
		cr_assert_eq(out[len], 0);
		if (n > 1)
			cr_assert_eq(sp_string_decode(s, n - 1, &id, out, &olen), 0, "needs all its slots");
		/* A string is not a decodable event. */
		struct sp_event ev;
		cr_assert_eq(sp_decode(s, n, &ev), 0);
	}
}

Test(codec, string_decode_refuses_bad_records)
{
	struct sp_slot s[4];
	char out[SP_MAX_STRING + 1];
	uint32_t id = 0;
	unsigned len = 0;
	sp_string_encode(s, 5, "hello world, a string of 40 bytes here!", 40);
	s[0].kind = SP_K_STRING;
	cr_assert_eq(sp_string_decode(s, 4, &id, out, &len), 2, "16 bytes in the head, 24 in one continuation");
	cr_assert_str_eq(out, "hello world, a string of 40 bytes here!");
	s[0].ts = 0;
	cr_assert_eq(sp_string_decode(s, 4, &id, out, &len), 0, "id 0 is no string");
	s[0].ts = 0x1000000;
	cr_assert_eq(sp_string_decode(s, 4, &id, out, &len), 0, "ids are 24-bit");
	s[0].ts = 5;
	s[0].dur = SP_MAX_STRING + 1;
	cr_assert_eq(sp_string_decode(s, 4, &id, out, &len), 0, "too long");
	s[0].dur = 40;
	((uint8_t *)&s[1])[0] = 0;
	cr_assert_eq(sp_string_decode(s, 4, &id, out, &len), 0, "continuation marker missing");
}

Test(codec, durations_exact_then_microseconds_then_saturated)
{
	uint64_t exact[] = {0, 1, 999, 1000000, 0x7fffffffull};
	for (unsigned i = 0; i < sizeof(exact) / sizeof(exact[0]); i++)
		cr_assert_eq(sp_dur_decode(sp_dur_encode(exact[i])), exact[i]);
	/* 2^31 ns and above: microsecond resolution. */
	cr_assert_eq(sp_dur_decode(sp_dur_encode(0x80000000ull)), 2147483000ull);
	cr_assert_eq(sp_dur_decode(sp_dur_encode(5000000999ull)), 5000000000ull);
	uint64_t thirty_min = 30ull * 60 * 1000000000ull;
	cr_assert_eq(sp_dur_decode(sp_dur_encode(thirty_min)), thirty_min);
	/* Beyond ~35 minutes: saturated at the largest encodable duration. */
	uint64_t sat = 0x7fffffffull * 1000;
	cr_assert_eq(sp_dur_decode(sp_dur_encode(3600ull * 1000000000ull)), sat);
	cr_assert_eq(sp_dur_decode(sp_dur_encode(~0ull)), sat);
	/* Monotonic: a longer call never encodes shorter. */
	uint64_t prev = 0;
	for (uint64_t ns = 1; ns < (1ull << 42); ns = ns * 3 + 1) {
		uint64_t d = sp_dur_decode(sp_dur_encode(ns));
		cr_assert(d >= prev && d <= ns);
		prev = d;
	}
}

/* ------------------------------------------------------- 4. refused records */

Test(codec, decode_refuses_what_is_not_a_whole_valid_record)
{
	uint64_t f[SP_F__COUNT] = {0};
	struct sp_slot s[4];
	struct sp_event ev;
	unsigned n = sp_encode(s, SP_K_COPY, 1, 10, 10, f);
	s[0].kind = SP_K_COPY;
	cr_assert_eq(sp_decode(s, n, &ev), n);
	cr_assert_eq(sp_decode(s, n - 1, &ev), 0, "cut short");
	s[0].nslots = (uint8_t)(n + 1);
	cr_assert_eq(sp_decode(s, 4, &ev), 0, "wrong slot count");
	s[0].nslots = (uint8_t)n;
	((uint8_t *)&s[1])[0] = 7;
	cr_assert_eq(sp_decode(s, n, &ev), 0, "continuation marker missing");
	((uint8_t *)&s[1])[0] = SP_K_CONT;
	s[0].api = SP_API__COUNT;
	cr_assert_eq(sp_decode(s, n, &ev), 0, "unknown api");
	s[0].api = 0;
	s[0].kind = 0;
	cr_assert_eq(sp_decode(s, n, &ev), 0, "uncommitted");
	s[0].kind = SP_K__COUNT;
	cr_assert_eq(sp_decode(s, n, &ev), 0, "unknown kind");
	s[0].kind = SP_K_CONT;
	cr_assert_eq(sp_decode(s, n, &ev), 0, "a continuation is not a head");
}
