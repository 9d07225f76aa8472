/*
 * test_analysis_doc.c - docs/analysis-json.md against real `stepprof analyze
 * --json` output, both ways: every member written is in the page, and every field
 * the page's tables list is written.
 *
 * The lists come from the page itself (the backticked names of the first cell of
 * each table row, under each section's heading; the evidence keys of each finding
 * from its "Evidence keys" bullet), never a copy of them here. The output comes
 * from the trainer's scenarios on the simulated GPU, one for each finding (so
 * that each finding's evidence is seen), two ranks (`ranks[]`), and one trace
 * written with tracegen whose ring wrapped, where memory_growth is fitted over the
 * summary windows and adds its `history` evidence.
 *
 * Divided into: 1. the page's lists, 2. the runs, 3. the comparison.
 */
#include <criterion/criterion.h>
#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "stepprof/trace.h"
#include "testlib.h"
#include "tracegen.h"
#include "trainerlib.h"

TestSuite(analysis_doc, .fini = sp_t_remove_cur_dir);

/* ------------------------------------------------------ 1. the page's lists */

#define MAXN 64

struct names {
	char v[MAXN][48];
	int seen[MAXN]; /* written by some run */
	size_t n;
};

static void names_add(struct names *l, const char *s, size_t len)
{
	if (!len || len >= sizeof(l->v[0]) || l->n == MAXN)
		return;
	for (size_t i = 0; i < len; i++)
		if (!(islower((unsigned char)s[i]) || isdigit((unsigned char)s[i]) || s[i] == '_'))
			return; /* `-1`, `"x"`, `module!symbol`: prose, not a member */
	for (size_t i = 0; i < l->n; i++)
		if (strlen(l->v[i]) == len && !strncmp(l->v[i], s, len))
			return;
	memcpy(l->v[l->n], s, len);
	l->v[l->n++][len] = 0;
}

static int names_has(struct names *l, const char *s, int mark)
{
	for (size_t i = 0; i < l->n; i++)
		if (!strcmp(l->v[i], s)) {
			l->seen[i] |= mark;
			return 1;
		}
	return 0;
}

/* Every `word` of [b, e) into l. */
static void backticked(struct names *l, const char *b, const char *e)
{
	for (const char *p = b; p < e && (p = memchr(p, '`', (size_t)(e - p)));) {
		const char *q = memchr(p + 1, '`', (size_t)(e - p - 1));
		if (!q)
			break;
		names_add(l, p + 1, (size_t)(q - p - 1));
		p = q + 1;
	}
}

/* The section whose "## " heading line contains head: [*b, *e), up to the next "## ". */
static void section(const char *doc, const char *head, const char **b, const char **e)
{
	const char *p = doc;
	for (; (p = strstr(p, "\n## ")); p++) {
		const char *eol = strchr(p + 1, '\n');
		if (eol && memmem(p, (size_t)(eol - p), head, strlen(head)))
			break;
	}
	cr_assert_not_null(p, "docs/analysis-json.md has no heading with %s", head);
	*b = p + 1;
	const char *next = strstr(*b, "\n## ");
	*e = next ? next : *b + strlen(*b);
}

/* The fields of a section's table: the backticked names in the first cell of each row. */
static void table_fields(const char *doc, const char *head, struct names *l)
{
	const char *b, *e;
	section(doc, head, &b, &e);
	for (const char *p = b; p && p < e; p = strchr(p, '\n'), p = p ? p + 1 : NULL) {
		if (strncmp(p, "| `", 3))
			continue;
		const char *cell_end = strstr(p + 1, " |");
		cr_assert(cell_end && cell_end < e);
		backticked(l, p + 1, cell_end);
	}
	cr_assert(l->n > 0, "no table under %s", head);
}

/* The evidence keys of finding kind: the backticked names of its "- `kind`" bullet. */
static void evidence_keys(const char *doc, const char *kind, struct names *l)
{
	char bullet[96];
	snprintf(bullet, sizeof(bullet), "\n- `%s`", kind);
	const char *b = strstr(strstr(doc, "Evidence keys:"), bullet);
	cr_assert_not_null(b, "docs/analysis-json.md has no evidence bullet for %s", kind);
	b += strlen(bullet);
	const char *e1 = strstr(b, "\n- "), *e2 = strstr(b, "\n\n");
	const char *e = e1 && (!e2 || e1 < e2) ? e1 : e2;
	backticked(l, b, e ? e : b + strlen(b));
}

/* ---------------------------------------------------------------- 2. the runs */

#define NRUNS 7

/* `stepprof analyze --json dir`: its one line, parsed (exit 0 asserted). */
static struct sp_json *analyze(const char *dir)
{
	char *argv[] = {(char *)sp_t_build("bin/stepprof"), "analyze", "--json", (char *)dir, NULL};
	struct sp_t_result r;
	cr_assert_eq(sp_t_run(&r, argv, NULL, NULL, 120), 0, "stepprof analyze %s: %s", dir, r.err);
	struct sp_json *j = sp_t_parse_last_line(r.out);
	cr_assert(j && r.out[r.outlen - 1] == '\n' && strchr(r.out, '\n') == r.out + r.outlen - 1,
		  "not one line of JSON: %.300s", r.out);
	sp_t_result_free(&r);
	return j;
}

static struct sp_json *scenario(const char *dir, const char *name)
{
	char tdir[1024];
	snprintf(tdir, sizeof(tdir), "%s/%s", dir, name);
	char *args[] = {"--scenario", (char *)name, NULL};
	struct sp_t_result r;
	sp_t_run_trainer(&r, tdir, args);
	sp_t_result_free(&r);
	return analyze(tdir);
}

/*
 * A trainer that leaked 4 MiB a step for 100 steps of 10 ms, whose ring kept the
 * last 20: its summary windows (one a step) hold the whole run.
 */
static struct sp_json *wrapped_leak(const char *dir)
{
	const uint64_t ms = 1000000, mib = 1 << 20, t0 = 1000 * ms;
	char tdir[1024], path[1100];
	snprintf(tdir, sizeof(tdir), "%s/wrapped", dir);
	cr_assert_eq(mkdir(tdir, 0700), 0);
	snprintf(path, sizeof(path), "%s/t.sptrace", tdir);
	struct sp_tg *g = sp_tg_create(path, 4242, 1, -1);
	uint32_t k = sp_tg_intern(g, "k");
	for (uint64_t i = 0; i < 100; i++) {
		uint64_t b = t0 + i * 10 * ms, live = 64 * mib + (i + 1) * 4 * mib, f[SP_F__COUNT] = {0};
		f[SP_F_STEPS] = i + 1;
		sp_tg_add_keep(g, SP_K_SUMMARY, 0, b, b + 10 * ms, f);
		memset(f, 0, sizeof(f));
		f[SP_F_LIVE] = f[SP_F_PEAK] = live;
		sp_tg_add_keep(g, SP_K_SUMMARY_DEVICE, 0, b, b + 10 * ms, f);
		if (i < 80)
			continue;
		SP_TG_ADD(g, 4242, SP_K_STEP, SP_API_stepprof_step, b, b, {SP_F_VALUE, i});
		SP_TG_ADD(g, 4242, SP_K_ALLOC, SP_API_cudaMalloc, b + ms, b + ms + 1000, {SP_F_BYTES, 4 * mib},
			  {SP_F_DPTR, 0x700000000000ull + i * 4 * mib}, {SP_F_LIVE, live});
		SP_TG_ADD(g, 4242, SP_K_LAUNCH, SP_API_cudaLaunchKernel, b + 2 * ms, b + 2 * ms + 5000, {SP_F_NAME, k});
	}
	sp_tg_header(g)->overwritten_records = 12345;
	sp_tg_header(g)->ndevices = 1;
	sp_tg_header(g)->devices[0].mem_bytes = 1ull << 34;
	cr_assert_eq(sp_tg_finish(g), 0);
	struct sp_json *j = analyze(tdir);
	cr_assert_str_eq(sp_json_str(j, "findings.0.evidence.history"), "summaries",
			 "the wrapped trace's memory_growth is not fitted over its summaries");
	return j;
}

/* ----------------------------------------------------------- 3. the comparison */

/* Each member of every element of the array (or of the object) at path must be in l; marks those seen. */
static void check_members(struct sp_json *j, const char *path, struct names *l, const char *run)
{
	struct sp_json *o = *path ? sp_json_path(j, path) : j;
	if (!o)
		return;
	size_t n = o->type == SPJ_ARR ? o->n : 1;
	for (size_t i = 0; i < n; i++) {
		struct sp_json *e = o->type == SPJ_ARR ? &o->kids[i] : o;
		cr_assert_eq(e->type, SPJ_OBJ, "%s: %s is not an object (of objects)", run, path);
		for (size_t m = 0; m < e->n; m++)
			cr_expect(names_has(l, e->kids[m].key, 1),
				  "%s: analyze --json writes %s%s%s, which docs/analysis-json.md does not list there",
				  run, path, *path ? "." : "", e->kids[m].key);
	}
}

Test(analysis_doc, every_member_written_is_documented_and_every_documented_field_written, .timeout = 240)
{
	char *doc = sp_t_read_file("docs/analysis-json.md", NULL);
	cr_assert_not_null(doc);
	/* the document's sections: heading, path in the JSON */
	static const char *const sections[][2] = {
	    {"Document", ""},	      {"`processes[]`", "processes"}, {"`iterations[]`", "iterations"},
	    {"`summary`", "summary"}, {"`findings[]`", "findings"},   {"`ranks[]`", "ranks"},
	    {"`job`", "job"},	      {"`stragglers`", "stragglers"}, {"`stragglers.ranks[]`", "stragglers.ranks"}};
	enum { NSEC = sizeof(sections) / sizeof(sections[0]) };
	struct names *fields = calloc(NSEC, sizeof(*fields));
	for (size_t s = 0; s < NSEC; s++) {
		table_fields(doc, sections[s][0], &fields[s]);
		if (s && !strchr(sections[s][1], '.')) /* the top level's members are the sections too */
			names_add(&fields[0], sections[s][1], strlen(sections[s][1]));
	}
	static const char *const kinds[] = {"small_file_storm", "unpinned_copy", "alloc_fragmentation", "memory_growth",
					    "loader_starved", "straggler_rank"};
	enum { NKINDS = sizeof(kinds) / sizeof(kinds[0]) };
	struct names *ev = calloc(NKINDS, sizeof(*ev));
	for (size_t k = 0; k < NKINDS; k++)
		evidence_keys(doc, kinds[k], &ev[k]);

	sp_t_cur_dir = sp_t_tmpdir("analysis_doc");
	const char *names[NRUNS] = {"input-bound", "pageable-h2d-bound", "fragmenting", "leaking", "ranks", "wrapped",
				    "nccl"};
	struct sp_json *runs[NRUNS];
	for (int i = 0; i < 4; i++)
		runs[i] = scenario(sp_t_cur_dir, names[i]);
	static const char *const two_clean[] = {"clean", "clean"};
	struct sp_json *truth[2];
	char *rdir = sp_t_run_ranks(sp_t_cur_dir, "ranks", 2, two_clean, 12, truth);
	runs[4] = analyze(rdir);
	runs[5] = wrapped_leak(sp_t_cur_dir);
	/* two NCCL ranks, the second 5 ms late at each all-reduce: stragglers and straggler_rank */
	char ndir[1024];
	snprintf(ndir, sizeof(ndir), "%s/nccl", sp_t_cur_dir);
	char *nargs[] = {"--ranks", "2", "--iters", "15", "--slow-rank", "1", "--slow-us", "5000", NULL};
	struct sp_t_result nr;
	sp_t_run_trainer(&nr, ndir, nargs);
	sp_t_result_free(&nr);
	runs[6] = analyze(ndir);

	int kind_seen[NKINDS] = {0};
	for (int i = 0; i < NRUNS; i++) {
		for (size_t s = 0; s < NSEC; s++)
			check_members(runs[i], sections[s][1], &fields[s], names[i]);
		struct sp_json *fnd = sp_json_get(runs[i], "findings");
		for (size_t f = 0; fnd && f < fnd->n; f++) {
			const char *kind = sp_json_str(&fnd->kids[f], "kind");
			size_t k = 0;
			while (k < NKINDS && strcmp(kinds[k], kind))
				k++;
			cr_assert_lt(k, NKINDS, "%s: a finding of kind %s, not in this test's list", names[i], kind);
			kind_seen[k] = 1;
			char path[64];
			snprintf(path, sizeof(path), "findings.%zu.evidence", f);
			check_members(runs[i], path, &ev[k], names[i]);
		}
	}
	/* the other way: each field a table lists is written by one run at least */
	for (size_t s = 0; s < NSEC; s++)
		for (size_t i = 0; i < fields[s].n; i++)
			cr_expect(fields[s].seen[i], "docs/analysis-json.md lists %s%s%s, which no run wrote",
				  sections[s][1], *sections[s][1] ? "." : "", fields[s].v[i]);
	for (size_t k = 0; k < NKINDS; k++)
		cr_expect(kind_seen[k], "no run had a %s finding: its evidence went unchecked", kinds[k]);

	for (int i = 0; i < NRUNS; i++)
		sp_json_free(runs[i]);
	for (int k = 0; k < 2; k++)
		sp_json_free(truth[k]);
	free(rdir);
	free(ev);
	free(fields);
	free(doc);
	sp_t_remove_cur_dir();
}
