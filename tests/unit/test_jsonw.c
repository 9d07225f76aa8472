/*
 * test_jsonw.c - JSON on both sides: the tests' parser (tests/lib/testlib.c)
 * and the analyzer's streaming writer (analyzer/jsonw.c).
 *
 * Divided into: 1. the parser on hand-written documents (ground truth is the
 * literal text), 2. the writer, checked by parsing its output back and by exact
 * expected text for escaping and number formats.
 */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "jsonw.h"
#include "testlib.h"

/* ------------------------------------------------------------ 1. parser */

Test(json_parse, objects_arrays_and_path_lookup)
{
	struct sp_json *j = sp_json_parse(" {\"a\": {\"b\": [1, 2.5, {\"c\": \"x\"}]}, \"t\": true, \"f\": false, "
					  "\"n\": null, \"neg\": -3e2} ");
	cr_assert_not_null(j);
	cr_assert_eq(j->type, SPJ_OBJ);
	cr_assert_eq(j->n, 5);
	cr_assert_eq(sp_json_num(j, "a.b.0", -1), 1);
	cr_assert_eq(sp_json_num(j, "a.b.1", -1), 2.5);
	cr_assert_str_eq(sp_json_str(j, "a.b.2.c"), "x");
	cr_assert_eq(sp_json_num(j, "t", -1), 1);
	cr_assert_eq(sp_json_num(j, "f", -1), 0);
	cr_assert_eq(sp_json_path(j, "n")->type, SPJ_NULL);
	cr_assert_eq(sp_json_num(j, "neg", 0), -300);
	cr_assert_null(sp_json_path(j, "a.b.3"));
	cr_assert_null(sp_json_path(j, "a.x"));
	cr_assert_null(sp_json_str(j, "a.b.0"), "a number is not a string");
	cr_assert_eq(sp_json_num(j, "missing", 42), 42);
	cr_assert_eq(sp_json_at(sp_json_path(j, "a.b"), 1)->num, 2.5);
	sp_json_free(j);
}

Test(json_parse, string_escapes_and_unicode)
{
	struct sp_json *j = sp_json_parse("[\"q\\\"b\\\\s\\/n\\n t\\t u\\u00e9 \\ud83d\\ude00 c\\u0001\"]");
	cr_assert_not_null(j);
	cr_assert_str_eq(sp_json_str(j, "0"), "q\"b\\s/n\n t\t u\xc3\xa9 \xf0\x9f\x98\x80 c\x01");
	sp_json_free(j);
}

Test(json_parse, big_integers_are_exact)
{
	struct sp_json *j = sp_json_parse("{\"u\": 18446744073709551615, \"i\": -9223372036854775808, \"s\": 1}");
	cr_assert_not_null(j);
	cr_assert_eq(sp_json_u64(j, "u", 0), UINT64_MAX);
	cr_assert_eq(sp_json_i64(j, "i", 0), INT64_MIN);
	cr_assert_eq(sp_json_u64(j, "s", 0), 1);
	cr_assert_eq(sp_json_u64(j, "nope", 7), 7);
	sp_json_free(j);
}

Test(json_parse, rejects_invalid_documents)
{
	const char *bad[] = {"",	  "{",	  "[1,]", "{\"a\" 1}", "{\"a\":1,}", "\"unterminated", "01",
			     "1.",	  "-",	  "tru",  "[1] [2]",   "{'a':1}",    "\"ctl\x01\"",    "nul",
			     "[\"\\x\"]", "{1:2}"};
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		struct sp_json *j = sp_json_parse(bad[i]);
		cr_expect_null(j, "accepted invalid JSON: %s", bad[i]);
		sp_json_free(j);
	}
	/* Deep nesting is refused rather than overflowing the stack. */
	char deep[20001];
	memset(deep, '[', 20000);
	deep[20000] = 0;
	cr_assert_null(sp_json_parse(deep));
}

Test(json_parse, lines_one_object_each)
{
	struct sp_json **v;
	size_t n = sp_json_parse_lines("{\"k\":1}\n\n{\"k\":2}\nnot json\n{\"k\":3}", &v);
	cr_assert_eq(n, 4);
	cr_assert_eq(sp_json_num(v[0], "k", 0), 1);
	cr_assert_eq(sp_json_num(v[1], "k", 0), 2);
	cr_assert_null(v[2]);
	cr_assert_eq(sp_json_num(v[3], "k", 0), 3);
	sp_json_free_lines(v, n);
}

Test(testlib, run_captures_output_env_stdin_and_status)
{
	struct sp_t_result r;
	char *argv[] = {"sh", "-c", "echo out:$FOO:${HOME:-unset}; cat; echo err >&2; exit 3", NULL};
	char *env[] = {"FOO=bar", "HOME=", NULL};
	int st = sp_t_run(&r, argv, env, "from-stdin\n", 10);
	cr_assert_eq(st, 3);
	cr_assert_eq(r.status, 3);
	cr_assert_str_eq(r.out, "out:bar:unset\nfrom-stdin\n");
	cr_assert_str_eq(r.err, "err\n");
	sp_t_result_free(&r);
}

Test(testlib, run_timeout_kills)
{
	struct sp_t_result r;
	char *argv[] = {"sleep", "30", NULL};
	sp_t_run(&r, argv, NULL, NULL, 1);
	cr_assert_eq(r.status, 137);
	sp_t_result_free(&r);
}

Test(testlib, tmpdir_and_rmrf)
{
	char *d = sp_t_tmpdir("tl");
	char p[512];
	snprintf(p, sizeof(p), "%s/sub", d);
	cr_assert_eq(mkdir(p, 0700), 0);
	snprintf(p, sizeof(p), "%s/sub/f", d);
	cr_assert_eq(sp_t_write_file(p, "abc", 3), 0);
	size_t len;
	char *s = sp_t_read_file(p, &len);
	cr_assert_eq(len, 3);
	cr_assert_str_eq(s, "abc");
	free(s);
	sp_t_rmrf(d);
	cr_assert_eq(access(d, F_OK), -1);
	free(d);
}

/* ------------------------------------------------------------- 2. writer */

struct membuf {
	char *buf;
	size_t len;
	FILE *f;
};

static void mb_open(struct membuf *m)
{
	m->buf = NULL;
	m->len = 0;
	m->f = open_memstream(&m->buf, &m->len);
	cr_assert_not_null(m->f);
}

static void mb_close(struct membuf *m)
{
	fclose(m->f);
}

Test(jsonw, nested_document_reads_back)
{
	for (int pretty = 0; pretty <= 1; pretty++) {
		struct membuf m;
		struct jsonw w;
		mb_open(&m);
		jw_init(&w, m.f, pretty);
		jw_obj_begin(&w);
		jw_kstr(&w, "schema", "stepprof.analysis/1");
		jw_karr_begin(&w, "iterations");
		for (int i = 0; i < 3; i++) {
			jw_obj_begin(&w);
			jw_ku64(&w, "index", (uint64_t)i);
			jw_kobj_begin(&w, "breakdown_ns");
			jw_ku64(&w, "input", 1000u * (unsigned)i);
			jw_obj_end(&w);
			jw_obj_end(&w);
		}
		jw_arr_end(&w);
		jw_karr_begin(&w, "empty");
		jw_arr_end(&w);
		jw_kobj_begin(&w, "eo");
		jw_obj_end(&w);
		jw_ku64(&w, "max", UINT64_MAX);
		jw_ki64(&w, "min", INT64_MIN);
		jw_kdouble(&w, "frac", 0.1);
		jw_kdouble(&w, "third", 1.0 / 3.0);
		jw_kdouble(&w, "nan", 0.0 / 0.0);
		jw_kbool(&w, "yes", 1);
		jw_knull(&w, "none");
		jw_khex(&w, "ptr", 0x7f00deadbeefull);
		jw_kstr(&w, "nullstr", NULL);
		jw_obj_end(&w);
		cr_assert_eq(jw_error(&w), 0);
		mb_close(&m);
		cr_assert_eq(m.buf[m.len - 1], '\n', "a document ends its line");
		struct sp_json *j = sp_json_parse(m.buf);
		cr_assert_not_null(j, "not JSON: %s", m.buf);
		cr_assert_str_eq(sp_json_str(j, "schema"), "stepprof.analysis/1");
		cr_assert_eq(sp_json_path(j, "iterations")->n, 3);
		cr_assert_eq(sp_json_u64(j, "iterations.2.breakdown_ns.input", 0), 2000);
		cr_assert_eq(sp_json_path(j, "empty")->n, 0);
		cr_assert_eq(sp_json_path(j, "eo")->type, SPJ_OBJ);
		cr_assert_eq(sp_json_u64(j, "max", 0), UINT64_MAX);
		cr_assert_eq(sp_json_i64(j, "min", 0), INT64_MIN);
		cr_assert_eq(sp_json_num(j, "frac", 0), 0.1, "doubles read back exactly");
		cr_assert_eq(sp_json_num(j, "third", 0), 1.0 / 3.0);
		cr_assert_eq(sp_json_path(j, "nan")->type, SPJ_NULL);
		cr_assert_eq(sp_json_num(j, "yes", 0), 1);
		cr_assert_eq(sp_json_path(j, "none")->type, SPJ_NULL);
		cr_assert_str_eq(sp_json_str(j, "ptr"), "0x7f00deadbeef");
		cr_assert_eq(sp_json_path(j, "nullstr")->type, SPJ_NULL);
		sp_json_free(j);
		if (!pretty)
			cr_assert_null(strchr(m.buf, ' '), "compact output has no spaces: %s", m.buf);
		free(m.buf);
	}
}

Test(jsonw, escaping_exact_text)
{
	struct membuf m;
	struct jsonw w;
	mb_open(&m);
	jw_init(&w, m.f, 0);
	jw_str(&w, "a\"b\\c\nd\te\x01"
		   "f/\x7f");
	mb_close(&m);
	/* DEL escaped as the C0 controls are (a terminal control for a `cat` of the output) */
	cr_assert_str_eq(m.buf, "\"a\\\"b\\\\c\\nd\\te\\u0001f/\\u007f\"\n");
	free(m.buf);
}

/* One compact JSON string value of s, as jw_str writes it (the caller frees). */
static char *json_string_of(const char *s)
{
	struct membuf m;
	struct jsonw w;
	mb_open(&m);
	jw_init(&w, m.f, 0);
	jw_str(&w, s);
	mb_close(&m);
	return m.buf;
}

Test(jsonw, invalid_utf8_becomes_replacement_character)
{
	struct membuf m;
	/* valid é, a lone continuation byte, an overlong '/', a truncated 3-byte sequence, valid emoji */
	m.buf = json_string_of("\xc3\xa9|\x80|\xc0\xaf|\xe2\x82|\xf0\x9f\x98\x80");
	cr_assert_str_eq(
	    m.buf, "\"\xc3\xa9|\xef\xbf\xbd|\xef\xbf\xbd\xef\xbf\xbd|\xef\xbf\xbd\xef\xbf\xbd|\xf0\x9f\x98\x80\"\n");
	struct sp_json *j = sp_json_parse(m.buf);
	cr_assert_not_null(j);
	sp_json_free(j);
	free(m.buf);
}

/* C1 controls (U+0080-U+009F) escaped, the rest of non-ASCII UTF-8 as it is, the same string read back. */
Test(jsonw, c1_controls_are_escaped_other_characters_kept)
{
	struct membuf m;
	m.buf = json_string_of("a\xc2\x9b[2Jb\xc2\x80\xc2\x9f\xc2\xa0\xc3\xa9");
	cr_assert_str_eq(m.buf, "\"a\\u009b[2Jb\\u0080\\u009f\xc2\xa0\xc3\xa9\"\n");
	struct sp_json *j = sp_json_parse(m.buf);
	cr_assert_not_null(j);
	cr_assert_eq(j->type, SPJ_STR);
	cr_assert_str_eq(j->str, "a\xc2\x9b[2Jb\xc2\x80\xc2\x9f\xc2\xa0\xc3\xa9");
	sp_json_free(j);
	free(m.buf);
}

Test(jsonw, lines_of_objects)
{
	struct membuf m;
	struct jsonw w;
	mb_open(&m);
	jw_init(&w, m.f, 0);
	for (int i = 0; i < 3; i++) {
		jw_obj_begin(&w);
		jw_ku64(&w, "i", (uint64_t)i);
		jw_obj_end(&w);
	}
	cr_assert_eq(jw_error(&w), 0);
	mb_close(&m);
	cr_assert_str_eq(m.buf, "{\"i\":0}\n{\"i\":1}\n{\"i\":2}\n");
	free(m.buf);
}

Test(jsonw, misuse_is_reported_not_fatal)
{
	struct membuf m;
	struct jsonw w;
	mb_open(&m);
	jw_init(&w, m.f, 0);
	jw_obj_begin(&w);
	jw_u64(&w, 1); /* no key */
	cr_assert_neq(jw_error(&w), 0);
	jw_init(&w, m.f, 0);
	jw_arr_begin(&w);
	jw_obj_end(&w); /* wrong closer */
	cr_assert_neq(jw_error(&w), 0);
	jw_init(&w, m.f, 0);
	jw_obj_begin(&w);
	cr_assert_neq(jw_error(&w), 0, "unfinished");
	jw_init(&w, m.f, 0);
	for (int i = 0; i < JW_MAX_DEPTH + 5; i++)
		jw_arr_begin(&w);
	cr_assert_neq(jw_error(&w), 0, "too deep");
	jw_init(&w, m.f, 0);
	jw_key(&w, "top-level key");
	cr_assert_neq(jw_error(&w), 0);
	mb_close(&m);
	free(m.buf);
}
