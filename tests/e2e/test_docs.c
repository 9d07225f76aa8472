/*
 * test_docs.c - what users read must describe what exists (and only the project:
 * no development history, no design.md citations, no test turning a warning
 * into a failing exit status): every STEPPROF_*
 * variable of preload/config.def is in the README's table, every record kind
 * and field of the trace format is in docs/trace-format.md, and docs/cli.md and
 * docs/definitions.md name what the `stepprof` binary offers: each verb of
 * `stepprof --help` with every option of its own --help, every field and
 * feature of `info --json`, every kind of `dump` with its fields, and every
 * threshold of findings.def with its default; every wrapped libc function in
 * docs/input-capture.md; every SIMGPU_* variable in tests/simgpu/README.md;
 * every member of `analyze --json` in docs/analysis-json.md; every docs/ page
 * in the README's list.
 */
#include <criterion/criterion.h>
#include <ctype.h>
#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "analyze.h"
#include "stepprof/trace.h"
#include "testlib.h"
#include "tracegen.h"

static char *slurp(const char *path)
{
	FILE *f = fopen(path, "r");
	cr_assert_not_null(f, "cannot open %s", path);
	fseek(f, 0, SEEK_END);
	long n = ftell(f);
	fseek(f, 0, SEEK_SET);
	char *buf = malloc((size_t)n + 1);
	cr_assert_eq(fread(buf, 1, (size_t)n, f), (size_t)n);
	buf[n] = 0;
	fclose(f);
	return buf;
}

/* The README's row of a variable, as scripts/config-table.sh writes it: default and meaning included. */
Test(docs, readme_lists_every_config_variable)
{
	char *readme = slurp("README.md");
	static const char *const rows[][3] = {
#define SP_CONFIG(name, type, dflt, lo, hi, words, readers, help) {"STEPPROF_" #name, dflt, help},
#include "config.def"
#undef SP_CONFIG
	};
	for (size_t i = 0; i < sizeof(rows) / sizeof(rows[0]); i++) {
		char want[1024], dflt[64];
		if (*rows[i][1])
			snprintf(dflt, sizeof(dflt), "`%s`", rows[i][1]);
		else
			snprintf(dflt, sizeof(dflt), "(unset)");
		int n = snprintf(want, sizeof(want), "| `%s` | %s | ", rows[i][0], dflt);
		for (const char *h = rows[i][2]; *h && n < (int)sizeof(want) - 8; h++) {
			if (*h == '|')
				want[n++] = '\\';
			want[n++] = *h;
		}
		snprintf(want + n, sizeof(want) - (size_t)n, " |\n");
		cr_expect_not_null(strstr(readme, want),
				   "README.md does not document %s as config.def does (run scripts/update-readme.sh): %s",
				   rows[i][0], want);
	}
	free(readme);
}

/* `name`, in backquotes as the docs write code, occurs in text. */
static int names(const char *text, const char *name)
{
	char want[128];
	snprintf(want, sizeof(want), "`%s`", name);
	return strstr(text, want) != NULL;
}

Test(docs, trace_format_lists_every_kind_and_field)
{
	char *doc = slurp("docs/trace-format.md");
	for (int k = 1; k < SP_K__COUNT; k++)
		cr_expect(names(doc, sp_kind_name[k]), "docs/trace-format.md does not describe kind `%s`", sp_kind_name[k]);
	for (int f = 0; f < SP_F__COUNT; f++)
		cr_expect(names(doc, sp_field_name[f]), "docs/trace-format.md does not describe field `%s`",
			  sp_field_name[f]);
	free(doc);
}

/* ------------------------------------------- docs/cli.md against the binary */

static int run_stepprof(struct sp_t_result *r, const char *a1, const char *a2, const char *a3)
{
	char *argv[] = {(char *)sp_t_build("bin/stepprof"), (char *)a1, (char *)a2, (char *)a3, NULL};
	char *env[] = {"LD_PRELOAD=", NULL};
	int st = sp_t_run(r, argv, env, NULL, 60);
	free(argv[0]);
	return st;
}

/* A new trace of pid 4242 at <a fresh directory>/t.sptrace; *dir is that directory (malloc'd). */
static struct sp_tg *new_trace(char **dir, char *path, size_t len)
{
	*dir = sp_t_tmpdir("docs");
	snprintf(path, len, "%s/t.sptrace", *dir);
	return sp_tg_create(path, 4242, 1, 0);
}

/* `stepprof VERB --json OPERAND`, which must succeed, parsed; r keeps the output. */
static struct sp_json *json_of(struct sp_t_result *r, const char *verb, const char *operand)
{
	cr_assert_eq(run_stepprof(r, verb, "--json", operand), 0, "%s", r->err);
	struct sp_json *j = sp_json_parse(r->out);
	cr_assert_not_null(j, "%s", r->out);
	return j;
}

/* The table row of docs/cli.md whose first cell names `name` (a malloc'd line), or NULL. */
static char *table_row(const char *doc, const char *name)
{
	char want[128];
	snprintf(want, sizeof(want), "`%s`", name);
	for (const char *l = doc; l && *l; l = strchr(l, '\n') ? strchr(l, '\n') + 1 : NULL) {
		const char *eol = strchr(l, '\n');
		size_t len = eol ? (size_t)(eol - l) : strlen(l);
		if (len < 2 || l[0] != '|')
			continue;
		const char *cell_end = strstr(l + 1, " | ");
		if (!cell_end || cell_end > l + len)
			continue;
		const char *hit = strstr(l, want);
		if (hit && hit < cell_end)
			return strndup(l, len);
	}
	return NULL;
}

/* `opt` occurs in s as a whole option (not as the start of a longer one). */
static int has_option(const char *s, const char *opt)
{
	size_t n = strlen(opt);
	for (const char *p = strstr(s, opt); p; p = strstr(p + 1, opt))
		if (!isalnum((unsigned char)p[n]) && p[n] != '-' && p[n] != '_')
			return 1;
	return 0;
}

Test(docs, cli_names_every_verb_and_each_of_its_options)
{
	char *doc = slurp("docs/cli.md");
	struct sp_t_result top, r;
	cr_assert_eq(run_stepprof(&top, "--help", NULL, NULL), 0, "%s", top.err);
	const char *v = strstr(top.out, "\nverbs:\n");
	cr_assert_not_null(v, "stepprof --help lists no verbs: %s", top.out);
	int verbs = 0;
	for (const char *l = v + 8; *l == ' '; l = strchr(l, '\n') + 1) {
		char verb[32];
		cr_assert_eq(sscanf(l, " %31s", verb), 1);
		verbs++;
		char *row = table_row(doc, verb);
		cr_expect_not_null(row, "docs/cli.md has no table row for the verb `%s`", verb);
		cr_assert_eq(run_stepprof(&r, verb, "--help", NULL), 0, "%s --help: %s", verb, r.err);
		/* every -x or --xyz of the verb's usage, after a blank, '[', '|' or '(' */
		for (const char *p = r.out; row && (p = strchr(p, '-')); p++) {
			if (p > r.out && !strchr(" [|(\n", p[-1]))
				continue;
			size_t n = p[1] == '-' ? 2 : 1;
			if (!isalpha((unsigned char)p[n]))
				continue;
			while (isalnum((unsigned char)p[n]) || p[n] == '-')
				n++;
			char opt[64];
			snprintf(opt, sizeof(opt), "%.*s", (int)n, p);
			if (!strcmp(opt, "-h") || !strcmp(opt, "--help"))
				continue; /* said once for every verb */
			cr_expect(has_option(row, opt), "docs/cli.md's row of `%s` lacks its option %s: %s", verb, opt, row);
		}
		free(row);
		sp_t_result_free(&r);
	}
	cr_assert_geq(verbs, 5, "%s", top.out);
	sp_t_result_free(&top);
	free(doc);
}

Test(docs, cli_names_every_field_and_feature_of_info_json)
{
	char *dir, path[512];
	struct sp_tg *g = new_trace(&dir, path, sizeof(path));
	uint32_t nm = sp_tg_intern(g, "m");
	SP_TG_ADD(g, 4242, SP_K_MARK, SP_API_stepprof_mark, 1000, 1000, {SP_F_NAME, nm});
	sp_tg_header(g)->features = ~0u; /* every feature this build can name */
	cr_assert_eq(sp_tg_finish(g), 0);
	struct sp_t_result r;
	struct sp_json *j = json_of(&r, "info", path);
	struct sp_json *f = sp_json_path(j, "files.0");
	cr_assert(f && f->type == SPJ_OBJ, "%s", r.out);
	char *doc = slurp("docs/cli.md");
	for (size_t i = 0; i < f->n; i++)
		cr_expect(names(doc, f->kids[i].key), "docs/cli.md does not describe info --json's `%s`", f->kids[i].key);
	struct sp_json *feat = sp_json_get(f, "features");
	cr_assert(feat && feat->type == SPJ_ARR && feat->n >= 4, "%s", r.out);
	char *row = table_row(doc, "features");
	cr_assert_not_null(row, "docs/cli.md has no row for `features`");
	for (size_t i = 0; i < feat->n; i++)
		cr_expect(names(row, feat->kids[i].str), "docs/cli.md's `features` row lacks `%s`: %s", feat->kids[i].str,
			  row);
	free(row);
	free(doc);
	sp_json_free(j);
	sp_t_result_free(&r);
	sp_t_rmrf(dir);
	free(dir);
}

Test(docs, cli_dump_table_lists_every_kind_with_its_fields)
{
	char *doc = slurp("docs/cli.md");
	char *table = strstr(doc, "Fields per kind:");
	cr_assert_not_null(table, "docs/cli.md has no \"Fields per kind:\" table");
	char *end = strstr(table, "\n\n|");
	end = end ? strstr(end + 2, "\n\n") : NULL;
	if (end)
		*end = 0;
	for (int k = 1; k < SP_K__COUNT; k++) {
		if (k == SP_K_STRING || k == SP_K_GPU_SPAN2)
			continue; /* never dumped: strings are resolved into the fields, a pair of spans read as two */
		char *row = table_row(table, sp_kind_name[k]);
		cr_expect_not_null(row, "docs/cli.md's dump table has no row for the kind `%s`", sp_kind_name[k]);
		if (!row)
			continue;
		for (int fld = 0; fld < SP_F__COUNT; fld++)
			cr_expect(!(sp_kind_mask[k] & (1ull << fld)) || names(row, sp_field_name[fld]),
				  "docs/cli.md's dump row of `%s` lacks its field `%s`: %s", sp_kind_name[k], sp_field_name[fld],
				  row);
		free(row);
	}
	free(doc);
}

/* -------------------------------- docs/definitions.md against findings.def */

Test(docs, definitions_lists_every_threshold_with_its_default)
{
	char *doc = slurp("docs/definitions.md");
	char want[160];
	for (int i = 0; i < AN_T__COUNT; i++) {
		snprintf(want, sizeof(want), "| `%s` | ", an_threshold_name[i]);
		const char *row = strstr(doc, want);
		cr_expect_not_null(row, "docs/definitions.md's threshold table lacks %s", an_threshold_name[i]);
		if (!row)
			continue;
		char *num_end;
		double v = strtod(row + strlen(want), &num_end);
		cr_expect(num_end != row + strlen(want) && v == an_threshold_default[i],
			  "docs/definitions.md gives %s the default %.20s, stepprof analyze --help %g", an_threshold_name[i],
			  row + strlen(want), an_threshold_default[i]);
	}
	cr_expect_not_null(strstr(doc, "`" AN_DEFAULT_STEP_REGEX "`"),
			   "docs/definitions.md does not give --step-regex's default %s", AN_DEFAULT_STEP_REGEX);
	free(doc);
}

/* --------------------------- docs/input-capture.md against the io wrappers */

Test(docs, input_capture_names_every_wrapped_libc_function)
{
	static const char *const fns[] = {
#define SP_API_IO(name, ...) #name,
#include "stepprof/api_io.def"
#undef SP_API_IO
	};
	char *doc = slurp("docs/input-capture.md");
	char stem[64];
	for (size_t i = 0; i < sizeof(fns) / sizeof(fns[0]); i++) {
		/* `stat64` and the like: documented as "their *64 names" of `stat` */
		size_t n = strlen(fns[i]);
		snprintf(stem, sizeof(stem), "%.*s", (int)(n > 2 ? n - 2 : n), fns[i]);
		int is64 = n > 2 && !strcmp(fns[i] + n - 2, "64");
		cr_expect(names(doc, fns[i]) || (is64 && names(doc, stem)),
			  "docs/input-capture.md does not name the wrapped function `%s`", fns[i]);
	}
	free(doc);
}

/* ------------------- tests/simgpu/README.md against the simulator's sources */

/* Every "SIMGPU_*" variable the simulated GPU reads has a row in its README's table;
 * a rate read with env_double("SIMGPU_X", D) has D as its documented default. */
Test(docs, simgpu_readme_lists_every_variable_with_its_default)
{
	char *doc = slurp("tests/simgpu/README.md");
	DIR *d = opendir("tests/simgpu");
	cr_assert_not_null(d);
	int seen = 0;
	for (struct dirent *e; (e = readdir(d));) {
		size_t len = strlen(e->d_name);
		if (len < 3 || strcmp(e->d_name + len - 2, ".c"))
			continue;
		char path[300];
		snprintf(path, sizeof(path), "tests/simgpu/%s", e->d_name);
		char *src = slurp(path);
		for (char *p = strstr(src, "\"SIMGPU_"); p; p = strstr(p + 1, "\"SIMGPU_")) {
			size_t n = strspn(p + 1, "ABCDEFGHIJKLMNOPQRSTUVWXYZ_0123456789");
			char row[96];
			snprintf(row, sizeof(row), "| `%.*s` | ", (int)n, p + 1);
			const char *r = strstr(doc, row);
			cr_expect_not_null(r, "tests/simgpu/README.md's table lacks %.*s", (int)n, p + 1);
			seen++;
			if (r && p - src > 11 && !strncmp(p - 11, "env_double(", 11)) {
				double want = strtod(p + 1 + n + 2, NULL), got = strtod(r + strlen(row), NULL);
				cr_expect_eq(got, want, "tests/simgpu/README.md gives %.*s the default %g, the code %g", (int)n,
					     p + 1, got, want);
			}
		}
		free(src);
	}
	closedir(d);
	cr_expect_geq(seen, 5);
	free(doc);
}

/* The bullet of docs/cli.md's "Field values by type" that starts with `head`, on one line (malloc'd). */
static char *type_bullet(const char *doc, const char *head)
{
	const char *sec = strstr(doc, "Field values by type:");
	cr_assert_not_null(sec, "docs/cli.md has no \"Field values by type:\" list");
	char want[64];
	snprintf(want, sizeof(want), "\n- %s", head);
	const char *b = strstr(sec, want);
	cr_assert_not_null(b, "docs/cli.md's \"Field values by type\" has no bullet \"%s\"", head);
	const char *e = strstr(b + 1, "\n- "), *para = strstr(b + 1, "\n\n");
	if (!e || (para && para < e))
		e = para;
	char *copy = strndup(b + 1, e ? (size_t)(e - b - 1) : strlen(b + 1)), *w = copy;
	for (const char *r = copy; *r; r++) /* a line break and its indent: one blank */
		if (!isspace((unsigned char)*r) || (w > copy && w[-1] != ' '))
			*w++ = isspace((unsigned char)*r) ? ' ' : *r;
	*w = 0;
	return copy;
}

/* An enumeration's values as docs/cli.md writes them: `none|h2d|...`. */
static void expect_enum(const char *bullet, const char *field, const char *const *vals, int n)
{
	char want[160];
	int len = snprintf(want, sizeof(want), "`%s` `", field);
	for (int i = 0; i < n; i++)
		len += snprintf(want + len, sizeof(want) - (size_t)len, "%s%s", i ? "|" : "", vals[i]);
	snprintf(want + len, sizeof(want) - (size_t)len, "`");
	cr_expect_not_null(strstr(bullet, want), "docs/cli.md does not give %s's values as %s: %s", field, want, bullet);
}

Test(docs, cli_dump_gives_every_field_its_json_type)
{
	char *doc = slurp("docs/cli.md");
	static const char *const head[] = {[SP_T_U] = "unsigned",      [SP_T_I] = "signed",
					   [SP_T_HEX] = "pointers",     [SP_T_STR] = "strings",
					   [SP_T_DIR] = "enumerations", [SP_T_HOSTMEM] = "enumerations",
					   [SP_T_FDTYPE] = "enumerations", [SP_T_SOURCE] = "enumerations"};
	uint64_t dumped = 0; /* the fields of the kinds dump prints (not GPU_SPAN2's own: read as two gpu_span) */
	for (int k = 1; k < SP_K__COUNT; k++)
		if (k != SP_K_GPU_SPAN2)
			dumped |= sp_kind_mask[k];
	for (int f = 0; f < SP_F__COUNT; f++) {
		if (!((dumped >> f) & 1))
			continue;
		char *b = type_bullet(doc, head[sp_field_type[f]]);
		cr_expect(names(b, sp_field_name[f]), "docs/cli.md's \"%s\" bullet lacks the field `%s`: %s",
			  head[sp_field_type[f]], sp_field_name[f], b);
		free(b);
	}
	char *b = type_bullet(doc, "enumerations");
	expect_enum(b, "direction", sp_dir_name, SP_DIR__COUNT);
	expect_enum(b, "host_memory", sp_hostmem_name, SP_HOSTMEM__COUNT);
	expect_enum(b, "fd_type", sp_fdtype_name, SP_FDTYPE__COUNT);
	expect_enum(b, "source", sp_source_name, SP_SOURCE__COUNT);
	free(b);
	free(doc);
}

/* ----------------------- docs/analysis-json.md against analyze --json */

/* Every member of each object at `paths` in j is named in doc. */
static void expect_members_named(const char *doc, const struct sp_json *j, const char *const *paths, size_t n)
{
	for (size_t p = 0; p < n; p++) {
		const struct sp_json *o = *paths[p] ? sp_json_path(j, paths[p]) : j;
		cr_assert(o && o->type == SPJ_OBJ, "analyze --json has no object at \"%s\"", paths[p]);
		for (size_t i = 0; i < o->n; i++) {
			char arr[96]; /* an array is documented as `name[]` */
			snprintf(arr, sizeof(arr), "%s[]", o->kids[i].key);
			cr_expect(names(doc, o->kids[i].key) || names(doc, arr),
				  "docs/analysis-json.md does not describe %s%s`%s`", paths[p], *paths[p] ? "." : "",
				  o->kids[i].key);
		}
	}
}

/* A trainer of 12 steps of 10 ms, each with a 5 ms pageable H2D copy: unpinned_copy fires. */
Test(docs, analysis_json_describes_every_member_analyze_writes)
{
	char *dir, path[512];
	struct sp_tg *g = new_trace(&dir, path, sizeof(path));
	uint32_t k = sp_tg_intern(g, "gemm");
	for (uint64_t i = 0; i < 12; i++) {
		uint64_t t = 1000000000 + i * 10000000;
		SP_TG_ADD(g, 4242, SP_K_STEP, SP_API_stepprof_step, t, t, {SP_F_VALUE, i});
		SP_TG_ADD(g, 4242, SP_K_COPY, SP_API_cudaMemcpy, t + 1000, t + 5001000, {SP_F_DIRECTION, SP_DIR_H2D},
			  {SP_F_BYTES, 4 << 20}, {SP_F_OP, 2 * i + 1}, {SP_F_HOST_MEMORY, SP_HOSTMEM_PAGEABLE});
		SP_TG_ADD(g, 4242, SP_K_LAUNCH, SP_API_cudaLaunchKernel, t + 5002000, t + 5003000, {SP_F_NAME, k},
			  {SP_F_OP, 2 * i + 2});
		SP_TG_ADD(g, 4242, SP_K_SYNC, SP_API_cudaStreamSynchronize, t + 5004000, t + 9000000);
		SP_TG_ADD(g, 4242, SP_K_GPU_SPAN, 0, t + 1000, t + 5000000, {SP_F_OP, 2 * i + 1});
		SP_TG_ADD(g, 4242, SP_K_GPU_SPAN, 0, t + 5003000, t + 9000000, {SP_F_OP, 2 * i + 2});
	}
	cr_assert_eq(sp_tg_finish(g), 0);
	struct sp_t_result r;
	struct sp_json *j = json_of(&r, "analyze", dir);
	cr_assert_str_eq(sp_json_str(j, "findings.0.kind"), "unpinned_copy", "%s", r.out);
	char *doc = slurp("docs/analysis-json.md");
	static const char *const paths[] = {"",		  "processes.0", "iterations.0",      "summary",
					    "findings.0", "ranks.0",	    "findings.0.evidence"};
	expect_members_named(doc, j, paths, sizeof(paths) / sizeof(paths[0]));
	free(doc);
	sp_json_free(j);
	sp_t_result_free(&r);
	sp_t_rmrf(dir);
	free(dir);
}

/* ------------------------------------------------ README's list of pages */

Test(docs, readme_lists_every_docs_page)
{
	char *readme = slurp("README.md");
	DIR *d = opendir("docs");
	cr_assert_not_null(d);
	for (struct dirent *e; (e = readdir(d));) {
		size_t len = strlen(e->d_name);
		if (len < 4 || strcmp(e->d_name + len - 3, ".md"))
			continue;
		char want[300];
		snprintf(want, sizeof(want), "- `docs/%s` — ", e->d_name);
		cr_expect_not_null(strstr(readme, want), "README.md's Documentation list lacks docs/%s", e->d_name);
	}
	closedir(d);
	free(readme);
}

/* ------------------------------------------------ the project speaks of itself */

/*
 * Every file of the tree that git tracks below the given roots, one per line
 * ("git ls-files"): what a user of a clone reads.
 */
static char *tracked_files(const char *roots)
{
	char cmd[256];
	snprintf(cmd, sizeof(cmd), "git ls-files -- %s 2>/dev/null", roots);
	FILE *p = popen(cmd, "r");
	cr_assert_not_null(p);
	size_t cap = 1 << 16, n = 0;
	char *buf = malloc(cap);
	for (size_t got; (got = fread(buf + n, 1, cap - n - 1, p)) > 0;) {
		n += got;
		if (cap - n < 2)
			buf = realloc(buf, cap *= 2);
	}
	buf[n] = 0;
	pclose(p);
	if (n == 0)
		cr_skip_test("not a git working tree: nothing to scan");
	return buf;
}

/* Case-insensitive: the line of text where needle first stands, or NULL. */
static const char *find_ci(const char *text, const char *needle)
{
	size_t k = strlen(needle);
	for (const char *t = text; *t; t++)
		if (!strncasecmp(t, needle, k))
			return t;
	return NULL;
}

static void expect_none_of(const char *path, const char *text, const char *const *words, size_t n)
{
	for (size_t i = 0; i < n; i++) {
		const char *at = find_ci(text, words[i]);
		if (!at)
			continue;
		const char *bol = at;
		while (bol > text && bol[-1] != '\n')
			bol--;
		int line = 1;
		for (const char *c = text; c < bol; c++)
			line += *c == '\n';
		cr_expect(0, "%s:%d speaks of \"%s\": %.*s", path, line, words[i], (int)strcspn(bol, "\n"), bol);
	}
}

/*
 * README, docs and scripts describe stepprof for its users and maintainers: no
 * development history ("the ninth session"), no instructions for the machines
 * it was developed with, no absolute paths of such a machine, no citation of
 * the design brief that is not part of the project.
 */
Test(docs, the_project_speaks_of_itself_only)
{
	static const char *const words[] = {" session", "session's", "device tool", "give_back", "carry=",
					    "/work/",	"/root/",    "design.md"};
	char *list = tracked_files("README.md docs scripts");
	for (char *path = strtok(list, "\n"); path; path = strtok(NULL, "\n")) {
		char *text = slurp(path);
		expect_none_of(path, text, words, sizeof(words) / sizeof(words[0]));
		free(text);
	}
	free(list);
}

/*
 * Criterion 2.4 exits 1 after any cr_log_warn, even when every test passed: a
 * test says what it could not check with sp_t_note and why it skips in the
 * cr_skip_test message, so that the exit status agrees with the summary.
 */
Test(docs, no_test_logs_a_criterion_warning)
{
	static const char *const words[] = {"cr_log_" "warn(", "cr_log_" "error("};
	char *list = tracked_files("tests");
	for (char *path = strtok(list, "\n"); path; path = strtok(NULL, "\n")) {
		size_t len = strlen(path);
		if (len < 2 || (strcmp(path + len - 2, ".c") && strcmp(path + len - 2, ".h")))
			continue;
		char *text = slurp(path);
		expect_none_of(path, text, words, sizeof(words) / sizeof(words[0]));
		free(text);
	}
	free(list);
}
