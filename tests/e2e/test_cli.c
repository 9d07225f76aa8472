/*
 * test_cli.c - the `stepprof` command (build/bin/stepprof): --help/--version,
 * `info` and `dump` on files written by tracegen (the expected values are what
 * the test wrote), and the error contract: one line `stepprof: <file>: <what>`
 * on stderr and a documented non-zero exit (docs/cli.md).
 *
 * Divided into: 1. helpers, 2. help/version/usage, 3. info, 4. dump, 5. damaged
 * and foreign inputs; 6. `make deps` (scripts/install-deps.sh, suite `deps`).
 */
#include <criterion/criterion.h>
#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "stepprof/stepprof.h"
#include "testlib.h"
#include "tracegen.h"

/* ----------------------------------------------------------- 1. helpers */

static int stepprof(struct sp_t_result *r, ...)
{
	char *argv[16];
	int n = 0;
	argv[n++] = (char *)sp_t_build("bin/stepprof");
	va_list ap;
	va_start(ap, r);
	const char *a;
	while ((a = va_arg(ap, const char *)) && n < 15)
		argv[n++] = (char *)a;
	va_end(ap);
	argv[n] = NULL;
	char *env[] = {"LD_PRELOAD=", NULL};
	int st = sp_t_run(r, argv, env, NULL, 60);
	free(argv[0]);
	return st;
}

static size_t count_lines(const char *s)
{
	size_t n = 0;
	for (; *s; s++)
		n += *s == '\n';
	return n;
}

/* Exactly one line on stderr, naming `what`, containing `needle`. */
static void assert_one_error_line(const struct sp_t_result *r, const char *what, const char *needle)
{
	cr_assert_eq(count_lines(r->err), 1, "stderr: %s", r->err);
	char prefix[600];
	snprintf(prefix, sizeof(prefix), "stepprof: %s: ", what);
	cr_assert_eq(strncmp(r->err, prefix, strlen(prefix)), 0, "stderr: %s", r->err);
	if (needle)
		cr_assert(strstr(r->err, needle), "stderr lacks '%s': %s", needle, r->err);
}

/*
 * The reference trace: pid 4242 (ppid 4000, rank 1) on "node1", two threads,
 * 2 marks, 3 steps, one copy with its GPU span, a launch, an open, a read from
 * a pipe, a sync, a lost record; the header counts 4 more lost records.
 */
#define T0 1000000000000ull

static void write_reference(const char *path)
{
	struct sp_tg_opts o = {
	    .pid = 4242, .ppid = 4000, .rank = 1, .host = "node1", .cmdline = "python train.py --epochs 1"};
	struct sp_tg *g = sp_tg_create_opts(path, &o);
	uint32_t nm = sp_tg_intern(g, "train_step");
	uint32_t kn = sp_tg_intern(g, "void gemm<float>(float*, \"q\")");
	uint32_t pth = sp_tg_intern(g, "/data/shard 0001.bin");
	SP_TG_ADD(g, 4242, SP_K_MARK, SP_API_stepprof_mark, T0 + 100, T0 + 100, {SP_F_NAME, nm});
	for (int i = 0; i < 3; i++)
		SP_TG_ADD(g, 4242, SP_K_STEP, SP_API_stepprof_step, T0 + 1000 + 1000 * i, T0 + 1000 + 1000 * i,
			  {SP_F_VALUE, (uint64_t)i});
	SP_TG_ADD(g, 4242, SP_K_COPY, 0, T0 + 1100, T0 + 1300, {SP_F_STREAM, 0x7f0000001000ull},
		  {SP_F_PTR, 0x55550000ull}, {SP_F_DPTR, 0x7f1200000000ull}, {SP_F_BYTES, 1048576}, {SP_F_OP, 17},
		  {SP_F_RESULT, 0}, {SP_F_DEVICE, 0}, {SP_F_DIRECTION, SP_DIR_H2D},
		  {SP_F_HOST_MEMORY, SP_HOSTMEM_PAGEABLE});
	SP_TG_ADD(g, 4242, SP_K_LAUNCH, 0, T0 + 1400, T0 + 1405, {SP_F_NAME, kn}, {SP_F_OP, 18});
	SP_TG_ADD(g, 4242, SP_K_SYNC, 0, T0 + 1500, T0 + 1900, {SP_F_STREAM, 0}, {SP_F_EVENT, 0xabcdefull},
		  {SP_F_RESULT, 0});
	SP_TG_ADD(g, 4242, SP_K_GPU_SPAN, 0, T0 + 1320, T0 + 1480, {SP_F_OP, 17});
	SP_TG_ADD(g, 4243, SP_K_OPEN, 0, T0 + 200, T0 + 250, {SP_F_PATH, pth}, {SP_F_FD, 7}, {SP_F_RESULT, 0},
		  {SP_F_SOURCE, SP_SOURCE_LIBC});
	SP_TG_ADD(g, 4243, SP_K_READ, 0, T0 + 300, T0 + 900, {SP_F_PATH, 0}, {SP_F_BYTES, 4096}, {SP_F_FD, -1},
		  {SP_F_RESULT, (uint64_t)-11}, {SP_F_FD_TYPE, SP_FDTYPE_PIPE}, {SP_F_SOURCE, SP_SOURCE_LIBC});
	SP_TG_ADD(g, 4243, SP_K_MARK, SP_API_stepprof_mark, T0 + 950, T0 + 950, {SP_F_NAME, 999});
	SP_TG_ADD(g, 4243, SP_K_LOST, 0, T0 + 5000, T0 + 5000, {SP_F_COUNT, 2});
	sp_tg_header(g)->lost_records = 4;
	sp_tg_header(g)->features = SP_FEAT_CUDA | SP_FEAT_LIBC_IO;
	cr_assert_eq(sp_tg_finish(g), 0);
}
#define REF_RECORDS 12

static void write_small(const char *path, int32_t pid, int nmarks)
{
	struct sp_tg *g = sp_tg_create(path, pid, 4242, -1);
	uint32_t nm = sp_tg_intern(g, "m");
	for (int i = 0; i < nmarks; i++)
		SP_TG_ADD(g, pid, SP_K_MARK, SP_API_stepprof_mark, T0 + (uint64_t)i, T0 + (uint64_t)i, {SP_F_NAME, nm});
	cr_assert_eq(sp_tg_finish(g), 0);
}

static char *path_in(const char *dir, const char *name)
{
	size_t n = strlen(dir) + strlen(name) + 2;
	char *p = malloc(n);
	snprintf(p, n, "%s/%s", dir, name);
	return p;
}

/* The test's directory removed, then it and the paths made in it (a NULL-terminated list) freed. */
static void rmrf_and_free(char *dir, ...)
{
	sp_t_rmrf(dir);
	free(dir);
	va_list ap;
	va_start(ap, dir);
	for (char *p; (p = va_arg(ap, char *));)
		free(p);
	va_end(ap);
}

/* ------------------------------------------------ 2. help, version, usage */

Test(cli, help_version_and_usage_errors)
{
	struct sp_t_result r;
	cr_assert_eq(stepprof(&r, "--help", NULL), 0);
	cr_assert(strstr(r.out, "usage: stepprof"));
	cr_assert(strstr(r.out, "stepprof help <verb>"), "--help names `help <verb>`, docs/cli.md's way too: %s", r.out);
	const char *verbs[] = {"analyze", "run", "info", "dump"};
	for (int i = 0; i < 4; i++)
		cr_assert(strstr(r.out, verbs[i]), "--help lists %s", verbs[i]);
	sp_t_result_free(&r);

	cr_assert_eq(stepprof(&r, "--version", NULL), 0);
	cr_assert(strstr(r.out, "stepprof " STEPPROF_VERSION), "%s", r.out);
	sp_t_result_free(&r);

	const char *own[] = {"info", "dump"};
	for (int i = 0; i < 2; i++) {
		cr_assert_eq(stepprof(&r, own[i], "--help", NULL), 0);
		char want[64];
		snprintf(want, sizeof(want), "usage: stepprof %s", own[i]);
		cr_assert(strstr(r.out, want), "%s", r.out);
		cr_assert(strstr(r.out, "--json"));
		cr_assert_eq(r.errlen, 0);
		sp_t_result_free(&r);
	}

	cr_assert_eq(stepprof(&r, NULL), 1, "no verb");
	cr_assert(strstr(r.err, "usage"));
	sp_t_result_free(&r);
	cr_assert_eq(stepprof(&r, "frobnicate", NULL), 1);
	assert_one_error_line(&r, "frobnicate", "unknown verb");
	sp_t_result_free(&r);
	cr_assert_eq(stepprof(&r, "help", "frobnicate", NULL), 1, "help of no verb: %s", r.out);
	assert_one_error_line(&r, "frobnicate", "unknown verb");
	cr_assert_eq(r.outlen, 0, "%s", r.out);
	sp_t_result_free(&r);
	cr_assert_eq(stepprof(&r, "help", "dump", NULL), 0);
	cr_assert(strstr(r.out, "usage: stepprof dump"), "%s", r.out);
	sp_t_result_free(&r);
	cr_assert_eq(stepprof(&r, "info", NULL), 1, "info needs an operand");
	sp_t_result_free(&r);
	cr_assert_eq(stepprof(&r, "info", "--bogus", "/tmp", NULL), 1);
	assert_one_error_line(&r, "info", "--bogus");
	sp_t_result_free(&r);
	cr_assert_eq(stepprof(&r, "dump", "a", "b", NULL), 1, "dump takes one file");
	sp_t_result_free(&r);
}

/* Indentation of the line at p (spaces before its first other character). */
static size_t indent_of(const char *p)
{
	return strspn(p, " ");
}

/* Append the line at p (up to its newline) to buf, after a space, runs of spaces made one. */
static void append_words(char *buf, size_t cap, const char *p)
{
	size_t n = strlen(buf);
	for (; *p && *p != '\n' && n + 2 < cap; p++) {
		if (*p == ' ' && (n == 0 || buf[n - 1] == ' '))
			continue;
		buf[n++] = *p;
	}
	while (n && buf[n - 1] == ' ')
		n--;
	if (n && n + 1 < cap)
		buf[n++] = ' ';
	buf[n] = 0;
}

static void trim_end(char *buf)
{
	size_t n = strlen(buf);
	while (n && buf[n - 1] == ' ')
		buf[--n] = 0;
}

/*
 * The overview's synopsis of verb `verb` (`stepprof --help`, after its list of
 * verbs: an indented line "stepprof <verb> ..." and the lines indented deeper
 * under it) as one line into buf; 0, or -1 when the verb has none.
 */
static int overview_synopsis(const char *out, const char *verb, char *buf, size_t cap)
{
	buf[0] = 0;
	const char *p = strstr(out, "\nverbs:\n");
	char start[64];
	snprintf(start, sizeof(start), "stepprof %s ", verb);
	size_t syn_indent = 0;
	for (; p && p[1]; p = strchr(p + 1, '\n')) {
		const char *l = p + 1;
		size_t ind = indent_of(l);
		if (syn_indent && ind <= syn_indent)
			break;
		if (syn_indent || (ind && !strncmp(l + ind, start, strlen(start)))) {
			syn_indent = syn_indent ? syn_indent : ind;
			append_words(buf, cap, l);
		}
	}
	trim_end(buf);
	return buf[0] ? 0 : -1;
}

/* The synopsis of a verb's own --help: "usage: stepprof <verb> ..." and the lines indented under it. */
static int own_synopsis(const char *out, char *buf, size_t cap)
{
	buf[0] = 0;
	static const char u[] = "usage: ";
	if (strncmp(out, u, strlen(u)))
		return -1;
	append_words(buf, cap, out + strlen(u));
	for (const char *p = strchr(out, '\n'); p && p[1] && indent_of(p + 1) >= strlen("usage: stepprof ");
	     p = strchr(p + 1, '\n'))
		append_words(buf, cap, p + 1);
	trim_end(buf);
	return 0;
}

/* docs/cli.md's table row of the verb: "stepprof <verb> " + its operands column, \| read as |. */
static int doc_synopsis(const char *md, const char *verb, char *buf, size_t cap)
{
	char row[64];
	snprintf(row, sizeof(row), "\n| `%s` | `", verb);
	const char *p = strstr(md, row), *e = p ? strstr(p + strlen(row), "` |") : NULL;
	if (!e)
		return -1;
	int n = snprintf(buf, cap, "stepprof %s ", verb);
	for (p += strlen(row); p < e && (size_t)n + 1 < cap; p++)
		if (!(p[0] == '\\' && p[1] == '|'))
			buf[n++] = *p;
	buf[n] = 0;
	return 0;
}

/*
 * `stepprof --help` shows each verb's whole synopsis, the same as the verb's
 * own --help (and docs/cli.md's table), compared by parsing both outputs.
 * A short list of each verb's options in the overview would drift from the
 * verb's: dump without --summaries, analyze without --html or --rank, export
 * without --from/--to, run's options spelt otherwise.
 */
Test(cli, the_overview_shows_each_verbs_own_synopsis)
{
	struct sp_t_result all;
	cr_assert_eq(stepprof(&all, "--help", NULL), 0);
	size_t mdlen = 0;
	char *md = sp_t_read_file("docs/cli.md", &mdlen);
	static const char *const verbs[] = {"analyze", "run", "info", "dump", "export"};
	for (size_t i = 0; i < sizeof(verbs) / sizeof(verbs[0]); i++) {
		char over[1024], own[1024], doc[1024];
		cr_expect_eq(overview_synopsis(all.out, verbs[i], over, sizeof(over)), 0,
			     "stepprof --help has no synopsis of %s:\n%s", verbs[i], all.out);
		struct sp_t_result r;
		cr_assert_eq(stepprof(&r, verbs[i], "--help", NULL), 0, "%s --help: %s", verbs[i], r.err);
		cr_assert_eq(own_synopsis(r.out, own, sizeof(own)), 0, "%s --help: %s", verbs[i], r.out);
		sp_t_result_free(&r);
		cr_expect_str_eq(over, own, "%s: stepprof --help says\n  %s\nits own --help\n  %s", verbs[i], over,
				 own);
		if (md) {
			cr_expect_eq(doc_synopsis(md, verbs[i], doc, sizeof(doc)), 0, "docs/cli.md: no row of %s",
				     verbs[i]);
			cr_expect_str_eq(doc, own, "%s: docs/cli.md says\n  %s\nits --help\n  %s", verbs[i], doc, own);
		}
	}
	free(md);
	sp_t_result_free(&all);
}

/*
 * Every verb that reads traces takes its options before or after the operands (the
 * way analyze and export always did: `stepprof info DIR --json`), and a usage error
 * is one line naming the verb (docs/cli.md), never the usage text on stderr.
 */
Test(cli, options_after_operands_and_one_line_usage_errors)
{
	char *dir = sp_t_tmpdir("cli");
	char *ref = path_in(dir, "node1.4242.sptrace");
	write_reference(ref);
	struct sp_t_result r;

	cr_assert_eq(stepprof(&r, "info", ref, "--json", NULL), 0, "stderr: %s", r.err);
	cr_assert_eq(r.errlen, 0, "%s", r.err);
	struct sp_json *j = sp_json_parse(r.out);
	cr_assert_not_null(j, "not JSON: %s", r.out);
	cr_assert_eq(sp_json_i64(j, "files.0.pid", 0), 4242);
	sp_json_free(j);
	sp_t_result_free(&r);

	cr_assert_eq(stepprof(&r, "dump", ref, "--json", NULL), 0, "stderr: %s", r.err);
	cr_assert_eq(count_lines(r.out), REF_RECORDS, "%s", r.out);
	cr_assert_eq(r.out[0], '{', "%s", r.out);
	sp_t_result_free(&r);

	const char *verbs[] = {"analyze", "info", "dump", "export"};
	for (int i = 0; i < 4; i++) {
		cr_assert_eq(stepprof(&r, verbs[i], NULL), 1, "%s without an operand", verbs[i]);
		assert_one_error_line(&r, verbs[i], "--help");
		sp_t_result_free(&r);
		cr_assert_eq(stepprof(&r, verbs[i], ref, "--frobnicate", NULL), 1, "%s --frobnicate", verbs[i]);
		assert_one_error_line(&r, verbs[i], "--frobnicate");
		sp_t_result_free(&r);
		cr_assert_eq(stepprof(&r, verbs[i], "-Z", ref, NULL), 1, "%s -Z", verbs[i]);
		assert_one_error_line(&r, verbs[i], "-Z");
		sp_t_result_free(&r);
	}
	cr_assert_eq(stepprof(&r, "dump", ref, ref, NULL), 1, "dump takes one file");
	assert_one_error_line(&r, "dump", "one FILE");
	sp_t_result_free(&r);
	rmrf_and_free(dir, ref, NULL);
}

/* stepprof with its standard output on /dev/full (every write fails with ENOSPC). */
static int stepprof_full(struct sp_t_result *r, const char *const *args)
{
	char *argv[16] = {"/bin/sh", "-c", "exec \"$@\" >/dev/full", "sh", (char *)sp_t_build("bin/stepprof")};
	int n = 5;
	for (; *args && n < 15; args++)
		argv[n++] = (char *)*args;
	argv[n] = NULL;
	char *env[] = {"LD_PRELOAD=", NULL};
	int st = sp_t_run(r, argv, env, NULL, 60);
	free(argv[4]);
	return st;
}

/*
 * Output that cannot be written is one line and exit 4, whichever layer notices it
 * first (the report, the exporter, the verb or main's final flush).
 */
Test(cli, unwritable_stdout_is_one_line_and_exit_4)
{
	char *dir = sp_t_tmpdir("cli");
	char *ref = path_in(dir, "node1.4242.sptrace");
	write_reference(ref);
	const char *runs[][6] = {
	    {"analyze", "--json", dir, NULL},	 {"analyze", dir, NULL},	   {"analyze", "--html", "-", dir, NULL},
	    {"export", "-o", "-", dir, NULL},	 {"info", "--json", dir, NULL}, {"info", dir, NULL},
	    {"dump", "--json", ref, NULL},	 {"dump", ref, NULL},
	};
	for (size_t i = 0; i < sizeof(runs) / sizeof(runs[0]); i++) {
		struct sp_t_result r;
		cr_assert_eq(stepprof_full(&r, runs[i]), 4, "%s %s: stderr %s", runs[i][0], runs[i][1], r.err);
		cr_assert_eq(count_lines(r.err), 1, "%s %s: stderr %s", runs[i][0], runs[i][1], r.err);
		cr_assert(strstr(r.err, "stepprof: cannot write the output"), "%s", r.err);
		sp_t_result_free(&r);
	}
	rmrf_and_free(dir, ref, NULL);
}

/*
 * The same for what reads no trace: `stepprof --help >/dev/full` and `--version`
 * exited 0 with nothing written, and `help VERB` 0 where `VERB --help` gave 4.
 */
Test(cli, help_and_version_to_an_unwritable_stdout_exit_4)
{
	const char *runs[][3] = {{"--help", NULL}, {"-h", NULL},      {"help", NULL},	      {"--version", NULL},
				 {"-V", NULL},	   {"version", NULL}, {"help", "info", NULL}, {"help", "run", NULL}};
	for (size_t i = 0; i < sizeof(runs) / sizeof(runs[0]); i++) {
		struct sp_t_result r;
		int st = stepprof_full(&r, runs[i]);
		cr_expect_eq(st, 4, "stepprof %s %s >/dev/full: exit %d, stderr %s", runs[i][0],
			     runs[i][1] ? runs[i][1] : "", st, r.err);
		cr_expect_str_eq(r.err, "stepprof: cannot write the output\n", "stepprof %s", runs[i][0]);
		sp_t_result_free(&r);
	}
}

/* ------------------------------------------------------------------ 3. info */

Test(cli, info_json_reports_what_was_written)
{
	char *dir = sp_t_tmpdir("cli");
	char *ref = path_in(dir, "node1.4242.sptrace");
	char *other = path_in(dir, "node1.4300.x"); /* any name: found by its magic */
	char *notes = path_in(dir, "notes.txt");
	write_reference(ref);
	write_small(other, 4300, 1000);
	cr_assert_eq(sp_t_write_file(notes, "not a trace", 11), 0);

	struct sp_t_result r;
	cr_assert_eq(stepprof(&r, "info", "--json", dir, NULL), 0, "stderr: %s", r.err);
	cr_assert_eq(r.errlen, 0, "%s", r.err);
	struct sp_json *j = sp_json_parse(r.out);
	cr_assert_not_null(j, "not JSON: %s", r.out);
	cr_assert_eq(sp_json_path(j, "files")->n, 2, "the text file is not a trace");
	cr_assert_str_eq(sp_json_str(j, "files.0.path"), ref);
	cr_assert_str_eq(sp_json_str(j, "files.1.path"), other);
	cr_assert_eq(sp_json_i64(j, "files.0.pid", 0), 4242);
	cr_assert_eq(sp_json_i64(j, "files.0.ppid", 0), 4000);
	cr_assert_eq(sp_json_i64(j, "files.0.rank", 0), 1);
	cr_assert_str_eq(sp_json_str(j, "files.0.host"), "node1");
	cr_assert_str_eq(sp_json_str(j, "files.0.cmdline"), "python train.py --epochs 1");
	cr_assert_eq(sp_json_u64(j, "files.0.begin_ns", 0), T0 + 100);
	cr_assert_eq(sp_json_u64(j, "files.0.end_ns", 0), T0 + 5000);
	cr_assert_eq(sp_json_u64(j, "files.0.threads", 0), 2);
	cr_assert_eq(sp_json_u64(j, "files.0.records", 0), REF_RECORDS);
	cr_assert_eq(sp_json_u64(j, "files.0.lost", 0), 6, "4 in the header + a LOST record of 2");
	cr_assert_eq(sp_json_u64(j, "files.0.overwritten", 9), 0);
	cr_assert_eq(sp_json_u64(j, "files.0.strings", 0), 3);
	cr_assert_eq(sp_json_u64(j, "files.0.records_by_kind.mark", 0), 2);
	cr_assert_eq(sp_json_u64(j, "files.0.records_by_kind.step", 0), 3);
	cr_assert_eq(sp_json_u64(j, "files.0.records_by_kind.copy", 0), 1);
	cr_assert_eq(sp_json_u64(j, "files.0.records_by_kind.gpu_span", 0), 1);
	cr_assert_eq(sp_json_u64(j, "files.0.records_by_kind.read", 0), 1);
	cr_assert_eq(sp_json_u64(j, "files.0.records_by_kind.lost", 0), 1);
	cr_assert_eq(sp_json_u64(j, "files.0.records_by_kind.alloc", 9), 0, "absent kinds are listed as 0");
	cr_assert_eq(sp_json_path(j, "files.0.truncated")->num, 0);
	cr_assert_eq(sp_json_path(j, "files.0.corrupt")->num, 0);
	cr_assert_str_eq(sp_json_str(j, "files.0.features.0"), "cuda");
	cr_assert_str_eq(sp_json_str(j, "files.0.features.1"), "libc_io");
	cr_assert_eq(sp_json_u64(j, "files.1.records_by_kind.mark", 0), 1000);
	cr_assert_eq(sp_json_u64(j, "files.1.threads", 0), 1);
	cr_assert_eq(sp_json_i64(j, "files.1.rank", 0), -1);
	sp_json_free(j);
	sp_t_result_free(&r);

	/* The same through FILE operands, and in text. */
	cr_assert_eq(stepprof(&r, "info", ref, NULL), 0, "%s", r.err);
	cr_assert(strstr(r.out, "node1"));
	cr_assert(strstr(r.out, "pid 4242, ppid 4000, rank 1"), "%s", r.out);
	cr_assert(strstr(r.out, "records     12"), "%s", r.out);
	cr_assert(strstr(r.out, "mark 2"), "%s", r.out);
	cr_assert(strstr(r.out, "status      ok"), "%s", r.out);
	sp_t_result_free(&r);

	rmrf_and_free(dir, ref, other, notes, NULL);
}

/*
 * A trace's strings reach the terminal: none of its bytes may act on it. C0/C1
 * controls, DEL and bytes that are not UTF-8 are shown as \xNN, in info's text, in
 * dump's text and in an error line naming a file.
 */
#define EVIL "\x1b]0;owned\x07\x1b[2J\r\n\xc2\x9b" "31m\x7f\xff\xfe<end"

static void assert_inert(const struct sp_t_result *r, const char *what)
{
	const unsigned char *o[2] = {(const unsigned char *)r->out, (const unsigned char *)r->err};
	size_t n[2] = {r->outlen, r->errlen};
	for (int k = 0; k < 2; k++)
		for (size_t i = 0; i < n[k]; i++) {
			unsigned c = o[k][i];
			cr_assert(!(c < 0x20 && c != '\n') && c != 0x7f && c != 0xff && c != 0xfe &&
					  !(c == 0xc2 && i + 1 < n[k] && o[k][i + 1] < 0xa0),
				  "%s: byte 0x%02x at %zu of std%s: %s", what, c, i, k ? "err" : "out", o[k]);
		}
}

Test(cli, trace_strings_cannot_drive_the_terminal)
{
	char *dir = sp_t_tmpdir("cli");
	char *ref = path_in(dir, "node1.77.sptrace");
	char *junk = path_in(dir, "x\x1b[2Jy.sptrace");
	struct sp_tg_opts o = {.pid = 77, .ppid = 1, .rank = -1, .host = "node" EVIL, .cmdline = "python " EVIL};
	struct sp_tg *g = sp_tg_create_opts(ref, &o);
	uint32_t nm = sp_tg_intern(g, "mark " EVIL);
	SP_TG_ADD(g, 77, SP_K_MARK, SP_API_stepprof_mark, T0, T0, {SP_F_NAME, nm});
	snprintf(sp_tg_header(g)->devices[0].name, sizeof(sp_tg_header(g)->devices[0].name), "GPU %s", EVIL);
	sp_tg_header(g)->ndevices = 1;
	cr_assert_eq(sp_tg_finish(g), 0);
	struct sp_t_result r;

	cr_assert_eq(stepprof(&r, "info", ref, NULL), 0, "stderr: %s", r.err);
	assert_inert(&r, "info");
	cr_assert(strstr(r.out, "  cmdline     python \\x1b]0;owned\\x07\\x1b[2J\\x0d\\x0a\\xc2\\x9b31m\\x7f\\xff\\xfe<end\n"),
		  "%s", r.out);
	cr_assert(strstr(r.out, "  host        node\\x1b]0;owned"), "%s", r.out);
	cr_assert(strstr(r.out, "GPU \\x1b]0;owned"), "%s", r.out);
	sp_t_result_free(&r);

	cr_assert_eq(stepprof(&r, "dump", ref, NULL), 0, "stderr: %s", r.err);
	assert_inert(&r, "dump");
	cr_assert(strstr(r.out, "name=\"mark \\x1b]0;owned\\x07\\x1b[2J\\x0d\\x0a\\xc2\\x9b31m\\x7f\\xff\\xfe<end\"\n"),
		  "%s", r.out);
	sp_t_result_free(&r);

	cr_assert_eq(sp_t_write_file(junk, "junk", 4), 0);
	cr_assert_eq(stepprof(&r, "info", dir, NULL), 2, "stderr: %s", r.err);
	assert_inert(&r, "info with a junk file");
	cr_assert(strstr(r.err, "x\\x1b[2Jy.sptrace: not a stepprof trace"), "%s", r.err);
	cr_assert_eq(count_lines(r.err), 1, "%s", r.err);
	sp_t_result_free(&r);
	rmrf_and_free(dir, ref, junk, NULL);
}

/*
 * One file named several times (a DIR and a FILE in it, the DIR spelt twice, a
 * link to it) is read once by every verb: read twice, its calls, bytes and
 * records counted double in the analysis and the export.
 */
Test(cli, a_file_named_twice_is_read_once)
{
	char *dir = sp_t_tmpdir("cli");
	char *other = sp_t_tmpdir("cli");
	char *ref = path_in(dir, "node1.4242.sptrace");
	char *link = path_in(other, "alias.sptrace");
	char *dot = path_in(dir, ".");
	write_reference(ref);
	cr_assert_eq(symlink(ref, link), 0);
	struct sp_t_result r;

	cr_assert_eq(stepprof(&r, "analyze", "--json", dir, ref, dot, other, NULL), 0, "stderr: %s", r.err);
	struct sp_json *j = sp_json_parse(r.out);
	cr_assert_not_null(j, "not JSON: %s", r.out);
	cr_expect_eq(sp_json_path(j, "processes")->n, 1);
	cr_expect_eq(sp_json_u64(j, "processes.0.records", 0), REF_RECORDS);
	cr_expect_eq(sp_json_u64(j, "summary.records", 0), REF_RECORDS);
	sp_json_free(j);
	sp_t_result_free(&r);

	cr_assert_eq(stepprof(&r, "export", "-o", "-", dir, ref, dot, other, NULL), 0, "stderr: %s", r.err);
	j = sp_json_parse(r.out);
	cr_assert_not_null(j, "not JSON");
	cr_expect_eq(sp_json_u64(j, "otherData.files", 0), 1);
	cr_expect_eq(sp_json_u64(j, "otherData.records", 0), REF_RECORDS);
	cr_expect_eq(sp_json_u64(j, "otherData.gpu_spans", 0), 1, "the one copy's span, once");
	sp_json_free(j);
	sp_t_result_free(&r);

	cr_assert_eq(stepprof(&r, "info", "--json", dir, ref, dot, other, NULL), 0, "stderr: %s", r.err);
	j = sp_json_parse(r.out);
	cr_assert_not_null(j, "not JSON: %s", r.out);
	cr_expect_eq(sp_json_path(j, "files")->n, 1);
	cr_expect_str_eq(sp_json_str(j, "files.0.path"), ref, "the first name stays");
	sp_json_free(j);
	sp_t_result_free(&r);
	sp_t_rmrf(other);
	free(other);
	rmrf_and_free(dir, ref, link, dot, NULL);
}

/* ------------------------------------------------------------------ 4. dump */

static struct sp_json *find_kind(struct sp_json **v, size_t n, const char *kind, int nth)
{
	for (size_t i = 0; i < n; i++)
		if (v[i] && sp_json_str(v[i], "kind") && !strcmp(sp_json_str(v[i], "kind"), kind) && nth-- == 0)
			return v[i];
	return NULL;
}

Test(cli, dump_json_one_object_per_record)
{
	char *dir = sp_t_tmpdir("cli");
	char *ref = path_in(dir, "ref.sptrace");
	write_reference(ref);
	struct sp_t_result r;
	cr_assert_eq(stepprof(&r, "dump", "--json", ref, NULL), 0, "%s", r.err);
	struct sp_json **v;
	size_t n = sp_json_parse_lines(r.out, &v);
	cr_assert_eq(n, REF_RECORDS);
	/* Each thread's records in the order it wrote them (the GPU span comes late, as in the recorder). */
	const char *order4242[] = {"mark", "step", "step", "step", "copy", "launch", "sync", "gpu_span"};
	const char *order4243[] = {"open", "read", "mark", "lost"};
	size_t k1 = 0, k2 = 0;
	for (size_t i = 0; i < n; i++) {
		cr_assert_not_null(v[i], "line %zu is not JSON", i);
		cr_assert_eq(sp_json_i64(v[i], "pid", 0), 4242);
		const char *kind = sp_json_str(v[i], "kind");
		if (sp_json_i64(v[i], "tid", 0) == 4242)
			cr_assert_str_eq(kind, order4242[k1++], "line %zu", i);
		else
			cr_assert_str_eq(kind, order4243[k2++], "line %zu", i);
	}
	cr_assert_eq(k1, 8);
	cr_assert_eq(k2, 4);
	/* Threads merged by begin time: the other thread's open (T0+200) comes before the first step (T0+1000). */
	cr_assert_str_eq(sp_json_str(v[1], "kind"), "open");

	struct sp_json *e = find_kind(v, n, "mark", 0);
	cr_assert_not_null(e);
	cr_assert_str_eq(sp_json_str(e, "api"), "stepprof_mark");
	cr_assert_str_eq(sp_json_str(e, "name"), "train_step");
	cr_assert_eq(sp_json_i64(e, "tid", 0), 4242);
	cr_assert_eq(sp_json_u64(e, "ts_ns", 0), T0 + 100);
	cr_assert_null(sp_json_get(e, "end_ns"), "an instant has no end");
	e = find_kind(v, n, "mark", 1);
	cr_assert_eq(sp_json_path(e, "name")->type, SPJ_NULL, "an id without a string is null");

	e = find_kind(v, n, "step", 2);
	cr_assert_eq(sp_json_u64(e, "value", 9), 2);

	e = find_kind(v, n, "copy", 0);
	cr_assert_not_null(e);
	cr_assert_null(sp_json_get(e, "api"), "no api: omitted");
	cr_assert_eq(sp_json_u64(e, "begin_ns", 0), T0 + 1100);
	cr_assert_eq(sp_json_u64(e, "end_ns", 0), T0 + 1300);
	cr_assert_str_eq(sp_json_str(e, "stream"), "0x7f0000001000");
	cr_assert_str_eq(sp_json_str(e, "ptr"), "0x55550000");
	cr_assert_str_eq(sp_json_str(e, "dptr"), "0x7f1200000000");
	cr_assert_eq(sp_json_u64(e, "bytes", 0), 1048576);
	cr_assert_str_eq(sp_json_str(e, "direction"), "h2d");
	cr_assert_str_eq(sp_json_str(e, "host_memory"), "pageable");
	cr_assert_eq(sp_json_u64(e, "op", 0), 17);
	cr_assert_eq(sp_json_u64(e, "gpu_begin_ns", 0), T0 + 1320, "joined with its gpu_span");
	cr_assert_eq(sp_json_u64(e, "gpu_end_ns", 0), T0 + 1480);

	e = find_kind(v, n, "launch", 0);
	cr_assert_str_eq(sp_json_str(e, "name"), "void gemm<float>(float*, \"q\")");
	cr_assert_null(sp_json_get(e, "gpu_begin_ns"), "no span for op 18");

	e = find_kind(v, n, "sync", 0);
	cr_assert_str_eq(sp_json_str(e, "stream"), "0x0");
	cr_assert_str_eq(sp_json_str(e, "event"), "0xabcdef");
	cr_assert_eq(sp_json_u64(e, "dur_ns", 0), 400);

	e = find_kind(v, n, "open", 0);
	cr_assert_str_eq(sp_json_str(e, "path"), "/data/shard 0001.bin");
	cr_assert_eq(sp_json_i64(e, "fd", 0), 7);
	cr_assert_str_eq(sp_json_str(e, "source"), "libc");
	cr_assert_eq(sp_json_i64(e, "tid", 0), 4243);

	e = find_kind(v, n, "read", 0);
	cr_assert_eq(sp_json_i64(e, "fd", 0), -1);
	cr_assert_eq(sp_json_i64(e, "result", 0), -11);
	cr_assert_str_eq(sp_json_str(e, "fd_type"), "pipe");

	e = find_kind(v, n, "gpu_span", 0);
	cr_assert_eq(sp_json_u64(e, "op", 0), 17);
	e = find_kind(v, n, "lost", 0);
	cr_assert_eq(sp_json_u64(e, "count", 0), 2);
	sp_json_free_lines(v, n);
	sp_t_result_free(&r);

	/* Text: a header line and one line per record. */
	cr_assert_eq(stepprof(&r, "dump", ref, NULL), 0, "%s", r.err);
	cr_assert_eq(count_lines(r.out), REF_RECORDS + 1);
	cr_assert(strstr(r.out, "name=train_step"), "%s", r.out);
	cr_assert(strstr(r.out, "path=\"/data/shard 0001.bin\""), "%s", r.out);
	cr_assert(strstr(r.out, "direction=h2d"));
	cr_assert(strstr(r.out, "gpu=1000000001320+160"), "%s", r.out);
	sp_t_result_free(&r);
	rmrf_and_free(dir, ref, NULL);
}

/*
 * dump joins each op's record to its gpu_span through a window of records, not
 * a table of every span of the file: its peak memory for 2 M ops is that for
 * 500 K. The spans come 1,000 records after their launches (within the window).
 */
static void write_ops(const char *path, uint32_t nops)
{
	struct sp_tg *g = sp_tg_create(path, 4242, 1, -1);
	uint32_t k = sp_tg_intern(g, "kernel");
	for (uint32_t i = 0; i < nops + 500; i++) {
		uint64_t t = T0 + 1000ull * i;
		if (i < nops)
			SP_TG_ADD(g, 4242, SP_K_LAUNCH, SP_API_cuLaunchKernel, t, t + 400, {SP_F_STREAM, 7},
				  {SP_F_NAME, k}, {SP_F_OP, i + 1});
		if (i >= 500)
			SP_TG_ADD(g, 4242, SP_K_GPU_SPAN, SP_API_NONE, t + 500, t + 900, {SP_F_OP, i - 500 + 1});
	}
	cr_assert_eq(sp_tg_finish(g), 0);
}

static long dump_peak_kb(const char *file, const char *check_line)
{
	char *bin = (char *)sp_t_build("bin/stepprof");
	char *argv[] = {"sh", "-c", "exec \"$0\" dump \"$1\" >\"$1.out\"", bin, (char *)file, NULL};
	char *env[] = {"LD_PRELOAD=", NULL};
	struct sp_t_result r;
	cr_assert_eq(sp_t_run(&r, argv, env, NULL, 300), 0, "stderr: %s", r.err);
	long kb = r.maxrss_kb;
	sp_t_result_free(&r);
	free(bin);
	char out[4096];
	snprintf(out, sizeof(out), "%s.out", file);
	FILE *f = fopen(out, "r");
	cr_assert_not_null(f);
	char line[512];
	int found = 0;
	while (!found && fgets(line, sizeof(line), f))
		found = strstr(line, check_line) != NULL;
	fclose(f);
	cr_assert(found, "no line with '%s' in the dump of %s", check_line, file);
	unlink(out);
	return kb;
}

Test(cli, dump_memory_does_not_grow_with_gpu_spans, .timeout = 600)
{
	char *dir = sp_t_tmpdir("cli");
	char *small = path_in(dir, "small.sptrace"), *big = path_in(dir, "big.sptrace");
	const uint32_t n = 500000;
	write_ops(small, n);
	long kb1 = dump_peak_kb(small, "op=250000 result=0 device=0 gpu=1000250499500+400");
	unlink(small);
	write_ops(big, 4 * n);
	long kb4 = dump_peak_kb(big, "op=1999999 result=0 device=0 gpu=1002000498500+400");
	sp_t_note("dump peak RSS: %ld KB for %u ops, %ld KB for %u", kb1, n, kb4, 4 * n);
	cr_assert_lt(kb4, kb1 + kb1 / 4, "peak RSS grew from %ld KB to %ld KB with 4x the GPU spans", kb1, kb4);
	rmrf_and_free(dir, small, big, NULL);
}

/* ------------------------------------------------- 5. damaged and foreign */

Test(cli, foreign_newer_missing_files_one_line_and_exit_2)
{
	char *dir = sp_t_tmpdir("cli");
	char *foreign = path_in(dir, "foreign.bin");
	char *newer = path_in(dir, "newer.sptrace");
	char *missing = path_in(dir, "missing");
	char *empty = path_in(dir, "emptydir");
	cr_assert_eq(sp_t_write_file(foreign,
				     "\x7f"
				     "ELF and then some bytes",
				     24),
		     0);
	struct sp_tg *g = sp_tg_create(newer, 1, 0, -1);
	sp_tg_header(g)->version_major = SP_VERSION_MAJOR + 1;
	cr_assert_eq(sp_tg_finish(g), 0);
	cr_assert_eq(mkdir(empty, 0700), 0);

	struct sp_t_result r;
	const char *verbs[] = {"info", "dump"};
	for (int i = 0; i < 2; i++) {
		cr_assert_eq(stepprof(&r, verbs[i], foreign, NULL), 2);
		assert_one_error_line(&r, foreign, "not a stepprof trace");
		sp_t_result_free(&r);
		cr_assert_eq(stepprof(&r, verbs[i], "--json", newer, NULL), 2);
		assert_one_error_line(&r, newer, "newer");
		sp_t_result_free(&r);
		cr_assert_eq(stepprof(&r, verbs[i], missing, NULL), 2);
		assert_one_error_line(&r, missing, "No such file");
		sp_t_result_free(&r);
	}
	cr_assert_eq(stepprof(&r, "info", empty, NULL), 2);
	assert_one_error_line(&r, empty, "no stepprof trace files");
	sp_t_result_free(&r);
	rmrf_and_free(dir, foreign, newer, missing, empty, NULL);
}

/*
 * In a directory, a file named like the recorder's (*.sptrace) whose magic is
 * damaged is reported, not skipped in silence; the whole files are still read.
 */
Test(cli, damaged_magic_in_a_directory_is_reported)
{
	char *dir = sp_t_tmpdir("cli");
	char *good = path_in(dir, "host.1.sptrace");
	char *bad = path_in(dir, "host.2.sptrace");
	char *other = path_in(dir, "notes.txt");
	write_small(good, 1, 5);
	write_small(bad, 2, 5);
	size_t len;
	char *bytes = sp_t_read_file(bad, &len);
	cr_assert_not_null(bytes);
	memcpy(bytes, "XTEPPROF", 8);
	cr_assert_eq(sp_t_write_file(bad, bytes, len), 0);
	free(bytes);
	cr_assert_eq(sp_t_write_file(other, "not a trace\n", 12), 0);

	struct sp_t_result r;
	const char *verbs[] = {"info", "analyze", "export"};
	for (int i = 0; i < 3; i++) {
		int st = i == 2 ? stepprof(&r, verbs[i], "-o", "/dev/null", dir, NULL) : stepprof(&r, verbs[i], dir, NULL);
		cr_assert_eq(st, 2, "%s: exit %d, stderr: %s", verbs[i], st, r.err);
		cr_assert(strstr(r.err, bad) && strstr(r.err, "not a stepprof trace"), "%s: stderr: %s", verbs[i], r.err);
		cr_assert_null(strstr(r.err, "notes.txt"), "%s: stderr: %s", verbs[i], r.err);
		sp_t_result_free(&r);
	}
	cr_assert_eq(stepprof(&r, "info", "--json", dir, NULL), 2);
	cr_assert(strstr(r.out, "host.1.sptrace"), "the whole file is still reported: %s", r.out);
	sp_t_result_free(&r);
	rmrf_and_free(dir, good, bad, other, NULL);
}

Test(cli, truncated_and_corrupt_files_read_what_is_whole_exit_3)
{
	char *dir = sp_t_tmpdir("cli");
	char *full = path_in(dir, "full.sptrace");
	char *cut = path_in(dir, "cut.sptrace");
	char *bad = path_in(dir, "bad.sptrace");
	/* 1000 one-slot marks on one thread, chunks of 64 KiB (2046 records): cut after record 500. */
	write_small(full, 77, 1000);
	size_t len;
	char *img = sp_t_read_file(full, &len);
	struct sp_file_header *h = (struct sp_file_header *)img;
	uint64_t ring = h->header_size + h->keep_slots * SP_SLOT_SIZE;
	size_t cutlen = (size_t)(ring + (SP_CHUNK_HDR_SLOTS + 500) * SP_SLOT_SIZE + 7);
	cr_assert_eq(sp_t_write_file(cut, img, cutlen), 0);
	/* Two records' kind bytes broken in the middle of the chunk. */
	img[ring + (SP_CHUNK_HDR_SLOTS + 10) * SP_SLOT_SIZE] = (char)0xfe;
	img[ring + (SP_CHUNK_HDR_SLOTS + 20) * SP_SLOT_SIZE] = 0;
	cr_assert_eq(sp_t_write_file(bad, img, len), 0);
	free(img);

	struct sp_t_result r;
	cr_assert_eq(stepprof(&r, "info", "--json", cut, NULL), 3);
	assert_one_error_line(&r, cut, "truncated");
	struct sp_json *j = sp_json_parse(r.out);
	cr_assert_not_null(j, "the whole part is still reported: %s", r.out);
	cr_assert_eq(sp_json_u64(j, "files.0.records", 0), 500);
	cr_assert_eq(sp_json_num(j, "files.0.truncated", 0), 1);
	sp_json_free(j);
	sp_t_result_free(&r);

	cr_assert_eq(stepprof(&r, "dump", "--json", cut, NULL), 3);
	assert_one_error_line(&r, cut, "truncated");
	cr_assert_eq(count_lines(r.out), 500);
	sp_t_result_free(&r);

	cr_assert_eq(stepprof(&r, "info", "--json", bad, NULL), 3);
	assert_one_error_line(&r, bad, "corrupt");
	j = sp_json_parse(r.out);
	cr_assert_eq(sp_json_u64(j, "files.0.records", 0), 998);
	cr_assert_eq(sp_json_u64(j, "files.0.corrupt_slots", 0), 2);
	sp_json_free(j);
	sp_t_result_free(&r);

	/* Several operands: the good one is reported, the exit code is the worst. */
	cr_assert_eq(stepprof(&r, "info", "--json", full, cut, NULL), 3);
	j = sp_json_parse(r.out);
	cr_assert_eq(sp_json_path(j, "files")->n, 2);
	cr_assert_eq(sp_json_u64(j, "files.0.records", 0), 1000);
	sp_json_free(j);
	sp_t_result_free(&r);
	rmrf_and_free(dir, full, cut, bad, NULL);
}

/*
 * A file that never got its header (empty, or a header of zeros: its process died
 * while creating it, or is still starting) holds no record. Every verb leaves it out
 * as analyze does: one line, once, exit 3, the other files read; alone, exit 2.
 * Export and info must not say "not a stepprof trace" and exit 2.
 */
Test(cli, a_file_never_written_is_left_out_by_every_verb)
{
	char *dir = sp_t_tmpdir("cli");
	static char z[8192];
	char *good = path_in(dir, "node1.77.sptrace");
	write_small(good, 77, 10);
	char *empty = path_in(dir, "node1.78.sptrace"), *zeros = path_in(dir, "node1.79.sptrace");
	cr_assert_eq(sp_t_write_file(empty, "", 0), 0);
	cr_assert_eq(sp_t_write_file(zeros, z, sizeof(z)), 0);
	char *out = path_in(dir, "out.json");

	const char *never[] = {empty, zeros};
	struct sp_t_result r;
	for (int k = 0; k < 2; k++) {
		/* the good file and one never written: the directory holds both (name order) */
		cr_assert_eq(unlink(never[1 - k]), 0);
		const char *verbs[] = {"info", "analyze", "export"};
		for (int i = 0; i < 3; i++) {
			int st =
			    i == 2 ? stepprof(&r, "export", "-o", out, dir, NULL) : stepprof(&r, verbs[i], dir, NULL);
			cr_expect_eq(st, 3, "%s: exit %d, stderr: %s", verbs[i], st, r.err);
			cr_expect_eq(count_lines(r.err), 1, "%s: stderr: %s", verbs[i], r.err);
			cr_expect(strstr(r.err, never[k]) && strstr(r.err, ": truncated: no header"), "%s: stderr: %s",
				  verbs[i], r.err);
			sp_t_result_free(&r);
		}
		cr_assert_eq(stepprof(&r, "info", "--json", dir, NULL), 3);
		struct sp_json *j = sp_json_parse(r.out);
		cr_assert_not_null(j, "not JSON: %s", r.out);
		cr_expect_eq(sp_json_path(j, "files")->n, 1, "the good file only: %s", r.out);
		cr_expect_eq(sp_json_u64(j, "files.0.records", 0), 10);
		sp_json_free(j);
		sp_t_result_free(&r);
		char *text = sp_t_read_file(out, NULL);
		j = text ? sp_json_parse(text) : NULL;
		cr_expect_eq(sp_json_u64(j, "otherData.records", 0), 10, "the good file exported");
		sp_json_free(j);
		free(text);

		/* alone: nothing to read, exit 2, the same line */
		for (int i = 0; i < 3; i++) {
			int st = i == 2 ? stepprof(&r, "export", "-o", out, never[k], NULL)
					: stepprof(&r, verbs[i], never[k], NULL);
			cr_expect_eq(st, 2, "%s alone: exit %d, stderr: %s", verbs[i], st, r.err);
			cr_expect_eq(count_lines(r.err), 1, "%s alone: stderr: %s", verbs[i], r.err);
			cr_expect(strstr(r.err, ": truncated: no header"), "%s alone: stderr: %s", verbs[i], r.err);
			sp_t_result_free(&r);
		}
		cr_assert_eq(sp_t_write_file(never[1 - k], k ? "" : z, k ? 0 : sizeof(z)), 0);
	}
	rmrf_and_free(dir, good, empty, zeros, out, NULL);
}

/* The command on a sample of cut points and byte flips: never killed by a signal, never silent. */
Test(cli, damaged_copies_never_crash_the_command, .timeout = 120)
{
	char *dir = sp_t_tmpdir("cli");
	char *ref = path_in(dir, "ref.sptrace");
	char *dmg = path_in(dir, "damaged.sptrace");
	write_reference(ref);
	size_t len;
	char *img = sp_t_read_file(ref, &len);
	char *copy = malloc(len);
	uint64_t seed = 42;
	for (int c = 0; c < 60; c++) {
		size_t n = len;
		memcpy(copy, img, len);
		if (c % 2) {
			n = (size_t)((seed = seed * 6364136223846793005ull + 1442695040888963407ull) >> 33) % len;
		} else {
			for (int k = 0; k < 4; k++) {
				seed = seed * 6364136223846793005ull + 1442695040888963407ull;
				size_t at = (size_t)(seed >> 33) % (SP_HEADER_SIZE + 4096);
				copy[at] ^= (char)(1 + (seed >> 20) % 255);
			}
		}
		cr_assert_eq(sp_t_write_file(dmg, copy, n), 0);
		struct sp_t_result r;
		const char *verb = c % 3 ? "dump" : "info";
		int st = stepprof(&r, verb, "--json", dmg, NULL);
		cr_assert(st == 0 || st == 2 || st == 3, "copy %d: %s exit %d, stderr %s", c, verb, st, r.err);
		if (st)
			assert_one_error_line(&r, dmg, NULL);
		sp_t_result_free(&r);
	}
	free(copy);
	free(img);
	rmrf_and_free(dir, ref, dmg, NULL);
}

/* docs/architecture.md's budgets: the reader's memory does not depend on the trace's length. */
static void write_threads(const char *path, int threads, int per_thread)
{
	struct sp_tg *g = sp_tg_create(path, 900, 1, 0);
	uint32_t nm = sp_tg_intern(g, "m");
	for (int i = 0; i < per_thread; i++)
		for (int t = 0; t < threads; t++)
			SP_TG_ADD(g, 900 + t, SP_K_MARK, SP_API_stepprof_mark, T0 + (uint64_t)i * 10 + (uint64_t)t,
				  T0 + (uint64_t)i * 10 + (uint64_t)t, {SP_F_NAME, nm});
	cr_assert_eq(sp_tg_finish(g), 0);
}

Test(cli, info_memory_does_not_grow_with_the_trace, .timeout = 120)
{
	char *dir = sp_t_tmpdir("cli");
	char *small = path_in(dir, "small.sptrace");
	char *big = path_in(dir, "big.sptrace");
	write_threads(small, 8, 5000); /* 40,000 records, 1.3 MB */
	write_threads(big, 8, 150000); /* 1,200,000 records, 38 MB */
	struct sp_t_result r;
	cr_assert_eq(stepprof(&r, "info", "--json", small, NULL), 0, "%s", r.err);
	long rss_small = r.maxrss_kb;
	sp_t_result_free(&r);
	cr_assert_eq(stepprof(&r, "info", "--json", big, NULL), 0, "%s", r.err);
	long rss_big = r.maxrss_kb;
	struct sp_json *j = sp_json_parse(r.out);
	cr_assert_eq(sp_json_u64(j, "files.0.records_by_kind.mark", 0), 1200000);
	cr_assert_eq(sp_json_u64(j, "files.0.threads", 0), 8);
	sp_json_free(j);
	sp_t_result_free(&r);
	cr_log_info("info peak RSS: %ld KiB on 40k records, %ld KiB on 1.2M records", rss_small, rss_big);
	cr_assert(rss_small > 0 && rss_big > 0);
	/* 30x the records, 36 MB more file: the peak may differ by allocator noise only. */
	cr_assert(rss_big - rss_small < 2048, "peak RSS grew from %ld to %ld KiB", rss_small, rss_big);
	rmrf_and_free(dir, small, big, NULL);
}

/*
 * A header whose geometry cannot be (docs/trace-format.md section 8, step 1) is
 * refused by every verb alike: one line "corrupt header: ...", exit 2. A chunk
 * size the reader accepts, up to 1 MiB, is read by all of them.
 */
static void write_geometry(const char *path, uint32_t chunk_size)
{
	struct sp_tg_opts o = {.pid = 4242, .ppid = 1, .rank = -1, .chunk_size = chunk_size};
	struct sp_tg *g = sp_tg_create_opts(path, &o);
	uint32_t nm = sp_tg_intern(g, "m");
	for (int i = 0; i < 100; i++)
		SP_TG_ADD(g, 4242, SP_K_MARK, SP_API_stepprof_mark, T0 + 1000ull * i, T0 + 1000ull * i, {SP_F_NAME, nm});
	cr_assert_eq(sp_tg_finish(g), 0);
}

static int run_verb(struct sp_t_result *r, int verb, const char *file)
{
	switch (verb) {
	case 0:
		return stepprof(r, "info", "--json", file, NULL);
	case 1:
		return stepprof(r, "dump", file, NULL);
	case 2:
		return stepprof(r, "export", "-o", "/dev/null", file, NULL);
	default:
		return stepprof(r, "analyze", "--json", file, NULL);
	}
}

Test(cli, an_impossible_geometry_is_refused_by_every_verb, .timeout = 120)
{
	static const char *const verbs[] = {"info", "dump", "export", "analyze"};
	char *dir = sp_t_tmpdir("cli");
	char *good = path_in(dir, "good.sptrace"), *bad = path_in(dir, "bad.sptrace");
	for (uint32_t cs = SP_CHUNK_SIZE_MIN; cs <= SP_CHUNK_SIZE_MAX; cs = cs == 96 ? 65536 : cs * 16) {
		write_geometry(good, cs);
		for (int v = 0; v < 4; v++) {
			struct sp_t_result r;
			int st = run_verb(&r, v, good);
			cr_assert_eq(st, 0, "chunk_size %u: %s: exit %d, stderr: %s", cs, verbs[v], st, r.err);
			sp_t_result_free(&r);
		}
	}
	write_geometry(good, 65536);
	size_t len;
	char *img = sp_t_read_file(good, &len);
	cr_assert_not_null(img);
	const struct sp_file_header h0 = *(struct sp_file_header *)img;
	struct {
		const char *what;
		uint32_t chunk_size, ring_chunks;
		uint64_t keep_slots, file_size;
	} cases[] = {
	    {"ring_chunks 0xffffffff", 0, 0xffffffffu, 0, 0},
	    {"file_size 4096", 0, 0, 0, 4096},
	    {"chunk_size not a multiple of 32", 65536 + 16, 0, 0, 0},
	    {"chunk_size 4 MiB", 4u << 20, 0, 0, 0},
	    {"chunk_size 64 MiB", 64u << 20, 0, 0, 0},
	    {"chunk_size 32", 32, 0, 0, 0},
	    {"keep_slots beyond the file", 0, 0, 1ull << 30, 0},
	    {"keep_slots beyond 2^40", 0, 0, (1ull << 40) + 1, 0},
	};
	for (size_t c = 0; c < sizeof(cases) / sizeof(cases[0]); c++) {
		struct sp_file_header *h = (struct sp_file_header *)img;
		*h = h0;
		if (cases[c].chunk_size)
			h->chunk_size = cases[c].chunk_size;
		if (cases[c].ring_chunks)
			h->ring_chunks = cases[c].ring_chunks;
		if (cases[c].keep_slots)
			h->keep_slots = cases[c].keep_slots;
		if (cases[c].file_size)
			h->file_size = cases[c].file_size;
		cr_assert_eq(sp_t_write_file(bad, img, len), 0);
		for (int v = 0; v < 4; v++) {
			struct sp_t_result r;
			int st = run_verb(&r, v, bad);
			cr_assert_eq(st, 2, "%s: %s: exit %d, stderr: %s", cases[c].what, verbs[v], st, r.err);
			assert_one_error_line(&r, bad, "corrupt header: ");
			sp_t_result_free(&r);
		}
	}
	free(img);
	rmrf_and_free(dir, good, bad, NULL);
}

/* ------------------------------------------------ 6. make deps (install-deps.sh) */

/*
 * scripts/install-deps.sh with stand-ins for dpkg-query (says which packages are
 * missing), id (root or not) and apt-get (logs its arguments) first in PATH:
 * what the script does is checked without touching the machine's packages.
 */
struct deps_run {
	struct sp_t_result r;
	char *log; /* what the stand-in apt-get was asked, "" when never called */
};

static void deps_run(struct deps_run *d, const char *missing, int uid, const char *cuda_home)
{
	if (access("scripts/install-deps.sh", X_OK) != 0)
		cr_skip_test("scripts/install-deps.sh not found (tests run from the repository root)");
	char *dir = sp_t_tmpdir("deps");
	char p[700], body[600];
	snprintf(p, sizeof(p), "%s/dpkg-query", dir);
	snprintf(body, sizeof(body),
		 "#!/bin/sh\nfor m in %s; do [ \"$3\" = \"$m\" ] && exit 1; done\nprintf 'install ok installed'\n",
		 missing);
	cr_assert_eq(sp_t_write_file(p, body, strlen(body)), 0);
	chmod(p, 0755);
	snprintf(p, sizeof(p), "%s/id", dir);
	snprintf(body, sizeof(body), "#!/bin/sh\necho %d\n", uid);
	cr_assert_eq(sp_t_write_file(p, body, strlen(body)), 0);
	chmod(p, 0755);
	snprintf(p, sizeof(p), "%s/apt-get", dir);
	snprintf(body, sizeof(body), "#!/bin/sh\necho \"$*\" >> %s/apt.log\n", dir);
	cr_assert_eq(sp_t_write_file(p, body, strlen(body)), 0);
	chmod(p, 0755);
	char path[1200], cuda[700];
	snprintf(path, sizeof(path), "PATH=%s:%s", dir, getenv("PATH") ? getenv("PATH") : "/usr/bin:/bin");
	snprintf(cuda, sizeof(cuda), "CUDA_HOME=%s", cuda_home);
	char *env[] = {path, cuda, NULL};
	char *argv[] = {"/bin/bash", "scripts/install-deps.sh", NULL};
	sp_t_run(&d->r, argv, env, NULL, 60);
	snprintf(p, sizeof(p), "%s/apt.log", dir);
	size_t len;
	d->log = sp_t_read_file(p, &len);
	if (!d->log)
		d->log = strdup("");
	sp_t_rmrf(dir);
	free(dir);
}

static void deps_free(struct deps_run *d)
{
	sp_t_result_free(&d->r);
	free(d->log);
}

Test(deps, as_root_installs_exactly_what_is_missing)
{
	struct deps_run d;
	deps_run(&d, "libbpf-dev libcriterion-dev", 0, "/usr/local/cuda");
	cr_expect(strstr(d.log, "update"), "apt-get update first: [%s]", d.log);
	cr_expect(strstr(d.log, "install -y -q --no-install-recommends libbpf-dev libcriterion-dev\n"),
		  "apt-get install of the two missing packages: [%s]", d.log);
	if (access("/usr/local/cuda/include/cuda.h", R_OK) == 0)
		cr_expect_eq(d.r.status, 0, "%s", d.r.err);
	deps_free(&d);

	deps_run(&d, "none-missing", 0, "/usr/local/cuda");
	cr_expect_str_eq(d.log, "", "nothing missing: apt-get is not called");
	deps_free(&d);
}

Test(deps, not_root_prints_the_apt_get_line_and_fails)
{
	struct deps_run d;
	deps_run(&d, "clang bpftool", 1000, "/usr/local/cuda");
	cr_expect_eq(d.r.status, 1);
	cr_expect_str_eq(d.log, "", "apt-get is not run without root");
	cr_expect(strstr(d.r.err, "apt-get install -y clang bpftool\n"), "the exact line: %s", d.r.err);
	deps_free(&d);
}

Test(deps, no_cuda_headers_says_what_to_do)
{
	struct deps_run d;
	deps_run(&d, "none-missing", 0, "/nonexistent/cuda");
	cr_expect_eq(d.r.status, 1);
	cr_expect(strstr(d.r.err, "no CUDA headers in /nonexistent/cuda/include"), "%s", d.r.err);
	cr_expect(strstr(d.r.err, "CUDA_HOME"), "says to set CUDA_HOME: %s", d.r.err);
	deps_free(&d);
}

/*
 * stepprof's own programs are not the job: under LD_PRELOAD=libstepprof.so
 * exported in the shell, `stepprof info`, `analyze` and `run` record nothing
 * (recorded, each one would write a trace file of its own reads into STEPPROF_DIR:
 * the directory it was reading, or one beside its job's). The job of `stepprof run`
 * is still recorded.
 */
Test(cli, stepprofs_own_programs_are_not_recorded)
{
	char *dir = sp_t_tmpdir("cli-self"), *file = path_in(dir, "t.sptrace"), *own = path_in(dir, "own"),
	     *job = path_in(dir, "job");
	write_small(file, 4242, 10);
	char preload[PATH_MAX + 16], envdir[PATH_MAX + 16];
	snprintf(preload, sizeof(preload), "LD_PRELOAD=%s", sp_t_build("lib/libstepprof.so"));
	snprintf(envdir, sizeof(envdir), "STEPPROF_DIR=%s", own);
	char *env[] = {preload, envdir, "STEPPROF_QUIET=1", NULL};
	char *stepprof = (char *)sp_t_build("bin/stepprof");
	char *info[] = {stepprof, "info", file, NULL};
	char *analyze[] = {stepprof, "analyze", "--json", file, NULL};
	char *run[] = {stepprof, "run", "--no-bpf", "-o", job, "--", (char *)sp_t_build("tests/bin/markgen"), "-n", "5", NULL};
	char *const *cmds[] = {info, analyze, run};
	for (size_t i = 0; i < 3; i++) {
		struct sp_t_result r;
		sp_t_run(&r, cmds[i], env, NULL, 60);
		cr_expect_eq(r.status, 0, "stepprof %s: %s", cmds[i][1], r.err);
		sp_t_result_free(&r);
		struct stat st;
		cr_expect(stat(own, &st) != 0, "stepprof %s recorded itself into STEPPROF_DIR", cmds[i][1]);
	}
	/* the job's own file, and no other there */
	char *jobs[] = {stepprof, "info", "--json", job, NULL};
	struct sp_t_result r;
	cr_assert_eq(sp_t_run(&r, jobs, NULL, NULL, 60), 0, "%s", r.err);
	struct sp_json *j = sp_json_parse(r.out);
	cr_assert_not_null(j, "%s", r.out);
	const struct sp_json *files = sp_json_get(j, "files");
	cr_assert_not_null(files);
	cr_expect_eq(files->n, 1, "the job's file only");
	cr_expect(strstr(sp_json_str(sp_json_at(files, 0), "cmdline"), "markgen") != NULL);
	sp_json_free(j);
	sp_t_result_free(&r);
	rmrf_and_free(dir, file, own, job, NULL);
}

/*
 * `stepprof run`'s last line advises `stepprof analyze DIR` only when the job left a
 * trace there: a job that records nothing (no CUDA, no file input, no step) leaves
 * no file, and the advice was a command that fails ("no stepprof trace files in
 * this directory", exit 2).
 */
Test(cli, run_advises_analyze_only_when_the_job_left_a_trace)
{
	char *dir = sp_t_tmpdir("cli-run"), *none = path_in(dir, "none"), *some = path_in(dir, "some");
	char *stepprof = (char *)sp_t_build("bin/stepprof");
	char *env[] = {"LD_PRELOAD=", "STEPPROF_QUIET=", "STEPPROF_DIR=", NULL};
	char *quiet[] = {stepprof, "run", "--no-bpf", "-o", none, "--", "/bin/true", NULL};
	char *marks[] = {stepprof, "run", "--no-bpf", "-o", some, "--", (char *)sp_t_build("tests/bin/markgen"),
			 "-n",	   "5",	  NULL};
	char *const *runs[] = {quiet, marks};
	const char *dirs[] = {none, some};
	for (int i = 0; i < 2; i++) {
		struct sp_t_result r, a;
		cr_assert_eq(sp_t_run(&r, runs[i], env, NULL, 60), 0, "%s: %s", runs[i][6], r.err);
		char *analyze[] = {stepprof, "analyze", (char *)dirs[i], NULL};
		sp_t_run(&a, analyze, env, NULL, 60);
		char advice[PATH_MAX * 2 + 64];
		snprintf(advice, sizeof(advice), "stepprof: trace in %s (1 file) \u2014 stepprof analyze %s\n", dirs[i],
			 dirs[i]);
		if (i == 0) {
			cr_expect_eq(a.status, 2, "/bin/true left a trace: %s", a.err);
			cr_expect(!strstr(r.err, "stepprof analyze") && !*r.where,
				  "advice for a job that left no trace: %s%s", r.where, r.err);
			cr_expect(strstr(r.err, "stepprof: no trace in ") && count_lines(r.err) == 1, "%s", r.err);
		} else {
			cr_expect_eq(a.status, 0, "%s", a.err);
			cr_expect_str_eq(r.where, advice);
			cr_expect_str_empty(r.err);
		}
		sp_t_result_free(&r);
		sp_t_result_free(&a);
	}
	free(stepprof);
	rmrf_and_free(dir, none, some, NULL);
}

/*
 * An output file (`analyze --html F`, `export -o F`) that is one of the trace files
 * read, by any spelling or through a link, is refused (one line, exit 1) and the
 * trace left as it was: `stepprof analyze --html DIR/x.sptrace DIR` must not replace
 * the trace with its report (exit 0), leaving the next analysis no trace there.
 */
Test(cli, an_output_file_that_is_a_trace_read_is_refused)
{
	char *dir = sp_t_tmpdir("cli-out"), *ref = path_in(dir, "node1.4242.sptrace"), *link = path_in(dir, "out.json"),
	     *dotted = path_in(dir, "./node1.4242.sptrace");
	write_reference(ref);
	cr_assert_eq(symlink("node1.4242.sptrace", link), 0);
	size_t len0;
	char *before = sp_t_read_file(ref, &len0);
	const char *runs[][6] = {{"analyze", "--html", ref, dir, NULL},
				 {"analyze", "--json", "--html", dotted, ref, NULL},
				 {"export", "-o", ref, dir, NULL},
				 {"export", "-o", link, ref, NULL}};
	for (size_t i = 0; i < sizeof(runs) / sizeof(runs[0]); i++) {
		struct sp_t_result r;
		int st = stepprof(&r, runs[i][0], runs[i][1], runs[i][2], runs[i][3], runs[i][4], NULL);
		cr_expect_eq(st, 1, "%s %s %s: exit %d, %s", runs[i][0], runs[i][1], runs[i][2], st, r.err);
		cr_expect_eq(count_lines(r.err), 1, "%s", r.err);
		cr_expect(strstr(r.err, "would be overwritten"), "%s", r.err);
		sp_t_result_free(&r);
		size_t len;
		char *after = sp_t_read_file(ref, &len);
		cr_assert(after && len == len0 && !memcmp(after, before, len), "%s %s replaced the trace", runs[i][0],
			  runs[i][1]);
		free(after);
	}
	/* another file in the directory is an output like any other */
	char *html = path_in(dir, "report.html");
	struct sp_t_result r;
	cr_expect_eq(stepprof(&r, "analyze", "--html", html, dir, NULL), 0, "%s", r.err);
	sp_t_result_free(&r);
	free(before);
	rmrf_and_free(dir, ref, link, dotted, html, NULL);
}
