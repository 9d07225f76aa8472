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
	const char *bad[] = { "", "{", "[1,]", "{\"a\" 1}", "{\"a\":1,}", "\"unterminated", "01", "1.", "-", "tru",
			      "[1] [2]", "{'a':1}", "\"ctl\x01\"", "nul", "[\"\\x\"]", "{1:2}" };
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
	char *argv[] = { "sh", "-c", "echo out:$FOO:${HOME:-unset}; cat; echo err >&2; exit 3", NULL };
	char *env[] = { "FOO=bar", "HOME=", NULL };
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
	char *argv[] = { "sleep", "30", NULL };
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
