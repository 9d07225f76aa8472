/*
 * test_comm.c - the comm category (docs/definitions.md, "Breakdown") and the
 * documents of schema 2 and --schema 1 (docs/analysis-json.md), end to end
 * through `stepprof analyze --json`:
 *   - traces written by gentrace --comm (tests/workloads/gentrace.c), whose
 *     all-reduce kernel runs a known time per iteration: found by its NCCL call
 *     (COMM records), by its kernel's name alone, hidden in part under a compute
 *     kernel (comm_overlapped_ns), untimed, where only the sync that waits for it
 *     shows it, and sampled, where the analysis models it; compute never holds it;
 *   - --schema 1 is --json without the comm keys and with the old schema string,
 *     on gentrace's traces and on the trainer's scenarios (single-GPU jobs).
 *
 * The expected times come from gentrace's options (--comm-us, --overlap-us) and
 * its own line (kernels per iteration, each 100 ns on the GPU), not from the
 * analysis. Divided into: 1. running gentrace and the analysis, 2. the tests.
 */
#include <criterion/criterion.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "testlib.h"
#include "trainerlib.h"

TestSuite(comm, .fini = sp_t_remove_cur_dir);

/* ---------------------------------------- 1. gentrace and the analysis */

#define ITERS	 20
#define KERNEL_NS 100 /* gentrace's kernels: 100 ns each on the GPU */

struct gen {
	char tdir[600];
	unsigned long long kernels; /* per iteration, from gentrace's line */
};

static const char *test_dir(void)
{
	if (!sp_t_cur_dir)
		sp_t_cur_dir = sp_t_tmpdir("comm");
	return sp_t_cur_dir;
}

/* gentrace <dir>/<name> 2000 --iters ITERS --markers step EXTRA (options separated by spaces). */
static void gentrace(struct gen *g, const char *name, const char *extra)
{
	snprintf(g->tdir, sizeof(g->tdir), "%s/%s", test_dir(), name);
	char more[256], *save = NULL;
	snprintf(more, sizeof(more), "%s", extra ? extra : "");
	char iters[16];
	snprintf(iters, sizeof(iters), "%d", ITERS);
	char *argv[24] = {(char *)sp_t_build("tests/bin/gentrace"), g->tdir, "2000", "--iters", iters, "--markers",
			  "step"};
	int n = 7;
	for (char *t = strtok_r(more, " ", &save); t && n < 23; t = strtok_r(NULL, " ", &save))
		argv[n++] = t;
	struct sp_t_result r;
	sp_t_run(&r, argv, NULL, NULL, 60);
	cr_assert_eq(r.status, 0, "gentrace %s: exit %d: %s", extra ? extra : "", r.status, r.err);
	const char *k = strstr(r.out, "iterations, ");
	cr_assert(k && sscanf(k, "iterations, %llu kernels", &g->kernels) == 1, "gentrace said: %s", r.out);
	sp_t_result_free(&r);
}

/* `stepprof analyze --json [--schema N] dir`, its text (malloc'd); schema 0: no option. */
static char *analyze_text(const char *dir, int schema)
{
	struct sp_t_result r;
	char s[8];
	snprintf(s, sizeof(s), "%d", schema);
	char *argv[] = {(char *)sp_t_build("bin/stepprof"), "analyze", "--json", schema ? "--schema" : (char *)dir,
			schema ? s : NULL, schema ? (char *)dir : NULL, NULL};
	sp_t_run(&r, argv, NULL, NULL, 120);
	cr_assert_eq(r.status, 0, "stepprof analyze --json%s%s %s: exit %d: %s", schema ? " --schema " : "",
		     schema ? s : "", dir, r.status, r.err);
	char *out = r.out;
	r.out = NULL;
	sp_t_result_free(&r);
	return out;
}

static struct sp_json *analyze(const char *dir, int schema)
{
	char *t = analyze_text(dir, schema);
	struct sp_json *j = sp_json_parse(t);
	cr_assert_not_null(j, "not JSON: %s", t);
	free(t);
	return j;
}

static double num(const struct sp_json *j, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static double num(const struct sp_json *j, const char *fmt, ...)
{
	char key[160];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(key, sizeof(key), fmt, ap);
	va_end(ap);
	return sp_json_num(j, key, -1);
}

/*
 * Every iteration but the first and the last (whose bounds are the trace's own:
 * the run's first marker, the last CUDA work) has comm, overlapped and compute
 * as given (ns), and sync 0; the summary's comm_overlapped_ns is their sum.
 */
static void expect_iterations(const struct sp_json *an, const char *what, double comm, double overlapped,
			      double compute)
{
	cr_assert_eq(num(an, "summary.iterations"), ITERS, "%s: iterations", what);
	cr_expect_str_eq(sp_json_str(an, "schema"), "stepprof.analysis/2", "%s", what);
	for (int i = 1; i < ITERS - 1; i++) {
		cr_expect_eq(num(an, "iterations.%d.breakdown_ns.comm", i), comm, "%s: iteration %d comm %.0f, want %.0f",
			     what, i, num(an, "iterations.%d.breakdown_ns.comm", i), comm);
		cr_expect_eq(num(an, "iterations.%d.comm_overlapped_ns", i), overlapped,
			     "%s: iteration %d comm_overlapped_ns %.0f, want %.0f", what, i,
			     num(an, "iterations.%d.comm_overlapped_ns", i), overlapped);
		cr_expect_eq(num(an, "iterations.%d.breakdown_ns.compute", i), compute,
			     "%s: iteration %d compute %.0f, want %.0f (no communication in it)", what, i,
			     num(an, "iterations.%d.breakdown_ns.compute", i), compute);
		cr_expect_eq(num(an, "iterations.%d.breakdown_ns.sync", i), 0, "%s: iteration %d sync", what, i);
	}
	double sum = 0;
	for (int i = 0; i < ITERS; i++)
		sum += num(an, "iterations.%d.comm_overlapped_ns", i);
	cr_expect_eq(num(an, "summary.comm_overlapped_ns"), sum, "%s: summary.comm_overlapped_ns", what);
	cr_expect_eq(num(an, "summary.breakdown_fraction.comm"),
		     num(an, "summary.breakdown_ns.comm") / num(an, "summary.wall_ns_total"), "%s: comm fraction", what);
	cr_expect_eq(num(an, "ranks.0.breakdown_ns.comm"), num(an, "summary.breakdown_ns.comm"), "%s: ranks[0] comm",
		     what);
}

/*
 * text with every "comm" member of the breakdowns and every comm_overlapped_ns
 * taken out, and the schema string of schema 1 (malloc'd): what --schema 1 must
 * write for a job without communication. The document is one line of compact
 * JSON: a breakdown's "comm" is never its last member (other is), and
 * comm_overlapped_ns is never the first of its object.
 */
static char *strip_comm(const char *text)
{
	char *o = malloc(strlen(text) + 1), *w = o;
	cr_assert_not_null(o);
	for (const char *p = text; *p;) {
		if (!strncmp(p, "\"comm\":", 7)) {
			p += 7;
			while (*p && *p != ',')
				p++;
			p += *p == ',';
			continue;
		}
		if (!strncmp(p, ",\"comm_overlapped_ns\":", 22)) {
			p += 22;
			while (*p >= '0' && *p <= '9')
				p++;
			continue;
		}
		if (!strncmp(p, "\"stepprof.analysis/2\"", 21)) {
			memcpy(w, "\"stepprof.analysis/1\"", 21);
			w += 21;
			p += 21;
			continue;
		}
		*w++ = *p++;
	}
	*w = 0;
	return o;
}

/* --schema 1 of dir equals --json of it without the comm keys; what: for messages. */
static void expect_schema1_is_stripped(const char *dir, const char *what)
{
	char *two = analyze_text(dir, 0), *one = analyze_text(dir, 1), *want = strip_comm(two);
	cr_expect(strstr(two, "\"comm\":") && strstr(two, "\"comm_overlapped_ns\":"), "%s: no comm keys in --json",
		  what);
	cr_expect(!strstr(one, "\"comm\":") && !strstr(one, "comm_overlapped_ns"), "%s: comm keys in --schema 1",
		  what);
	cr_expect(!strcmp(one, want), "%s: --schema 1 is not --json without its comm keys:\n%s\n%s", what, one, want);
	char *two2 = analyze_text(dir, 2);
	cr_expect(!strcmp(two, two2), "%s: --schema 2 is not the default", what);
	free(two);
	free(two2);
	free(one);
	free(want);
}

/* ------------------------------------------------------------ 2. tests */

/* An all-reduce found by its NCCL call: comm is its kernel's time, compute is the other kernels'. */
Test(comm, an_allreduce_found_by_its_call_is_comm_not_compute, .timeout = 120)
{
	struct gen base, g;
	gentrace(&base, "none", NULL);
	gentrace(&g, "calls", "--comm calls --comm-us 3000");
	cr_assert_eq(base.kernels, g.kernels);
	struct sp_json *b = analyze(base.tdir, 0), *a = analyze(g.tdir, 0);
	expect_iterations(a, "calls", 3000000, 0, (double)(g.kernels * KERNEL_NS));
	/* the job without the all-reduce: the same compute, no comm */
	expect_iterations(b, "none", 0, 0, (double)(base.kernels * KERNEL_NS));
	cr_expect_eq(num(a, "summary.breakdown_ns.compute"), num(b, "summary.breakdown_ns.compute"));
	cr_expect_str_eq(sp_json_str(a, "summary.bottleneck"), "comm");
	sp_json_free(a);
	sp_json_free(b);
}

/* The name-only door (no COMM record: NCCL's API unseen) gives the same breakdown as the call. */
Test(comm, the_kernel_name_alone_gives_the_same_comm, .timeout = 120)
{
	struct gen c, n;
	gentrace(&c, "calls", "--comm calls --comm-us 2000");
	gentrace(&n, "names", "--comm names --comm-us 2000");
	struct sp_json *a = analyze(c.tdir, 0), *b = analyze(n.tdir, 0);
	expect_iterations(b, "names", 2000000, 0, (double)(n.kernels * KERNEL_NS));
	static const char *const cats[] = {
#define SP_CATEGORY(id, name) name,
#include "stepprof/categories.def"
#undef SP_CATEGORY
	};
	for (int i = 0; i < ITERS; i++)
		for (size_t k = 0; k < sizeof(cats) / sizeof(cats[0]); k++)
			cr_expect_eq(num(a, "iterations.%d.breakdown_ns.%s", i, cats[k]),
				     num(b, "iterations.%d.breakdown_ns.%s", i, cats[k]), "iteration %d %s: call %.0f, name %.0f",
				     i, cats[k], num(a, "iterations.%d.breakdown_ns.%s", i, cats[k]),
				     num(b, "iterations.%d.breakdown_ns.%s", i, cats[k]));
	sp_json_free(a);
	sp_json_free(b);
}

/* Communication under a compute kernel stays compute and is comm_overlapped_ns; the rest is comm. */
Test(comm, communication_under_compute_is_compute_and_overlapped, .timeout = 120)
{
	struct gen g;
	gentrace(&g, "overlap", "--comm calls --comm-us 3000 --overlap-us 1000");
	struct sp_json *a = analyze(g.tdir, 0);
	expect_iterations(a, "overlap", 2000000, 1000000, (double)(g.kernels * KERNEL_NS) + 1000000);
	cr_expect_eq(num(a, "summary.comm_overlapped_ns"), ITERS * 1000000.0);
	cr_expect_eq(num(a, "ranks.0.comm_overlapped_ns"), ITERS * 1000000.0);
	/* schema 1: compute held all of it, as before the category */
	struct sp_json *one = analyze(g.tdir, 1);
	for (int i = 1; i < ITERS - 1; i++)
		cr_expect_eq(num(one, "iterations.%d.breakdown_ns.compute", i), (double)(g.kernels * KERNEL_NS) + 3000000,
			     "schema 1, iteration %d", i);
	sp_json_free(one);
	sp_json_free(a);
}

/*
 * An untimed all-reduce (no GPU span, as under STEPPROF_KERNEL_TIMING=off): the
 * sync that waits for it, its stream's last op, is comm, not sync; schema 1
 * keeps it in sync as before.
 */
Test(comm, a_sync_waiting_for_an_untimed_collective_is_comm, .timeout = 120)
{
	struct gen g;
	gentrace(&g, "untimed", "--comm untimed --comm-us 3000");
	struct sp_json *a = analyze(g.tdir, 0), *one = analyze(g.tdir, 1);
	expect_iterations(a, "untimed", 3000000, 0, (double)(g.kernels * KERNEL_NS));
	for (int i = 1; i < ITERS - 1; i++) {
		cr_expect_eq(num(one, "iterations.%d.breakdown_ns.sync", i), 3000000, "schema 1, iteration %d sync", i);
		cr_expect_eq(num(one, "iterations.%d.breakdown_ns.compute", i), (double)(g.kernels * KERNEL_NS),
			     "schema 1, iteration %d compute", i);
		cr_expect_eq(num(one, "iterations.%d.breakdown_ns.comm", i), -1, "schema 1 has no comm");
	}
	cr_expect_str_eq(sp_json_str(one, "schema"), "stepprof.analysis/1");
	cr_expect_str_eq(sp_json_str(one, "summary.bottleneck"), "sync");
	sp_json_free(one);
	sp_json_free(a);
}

/*
 * An all-reduce timed in the first two iterations only (as STEPPROF_KERNEL_TIMING=auto
 * samples a kernel): the other launches get modelled spans, comm as the measured
 * ones; schema 1 has them in compute (GPU time), not in sync.
 */
Test(comm, modelled_spans_of_a_collective_are_comm, .timeout = 120)
{
	struct gen g;
	gentrace(&g, "sampled", "--comm sampled --comm-us 3000");
	struct sp_json *a = analyze(g.tdir, 0), *one = analyze(g.tdir, 1);
	cr_expect_gt(num(a, "summary.gpu_time.launches_modelled"), 0, "the untimed all-reduces are modelled");
	expect_iterations(a, "sampled", 3000000, 0, (double)(g.kernels * KERNEL_NS));
	for (int i = 1; i < ITERS - 1; i++)
		cr_expect_eq(num(one, "iterations.%d.breakdown_ns.compute", i), (double)(g.kernels * KERNEL_NS) + 3000000,
			     "schema 1, iteration %d compute", i);
	sp_json_free(one);
	sp_json_free(a);
}

/* --schema 1 of a job with communication: no comm keys, comm folded into compute. */
Test(comm, schema_1_folds_comm_into_compute, .timeout = 120)
{
	struct gen g;
	gentrace(&g, "calls", "--comm calls --comm-us 3000 --overlap-us 500");
	struct sp_json *a = analyze(g.tdir, 0), *one = analyze(g.tdir, 1);
	cr_expect_str_eq(sp_json_str(one, "schema"), "stepprof.analysis/1");
	cr_expect_eq(num(one, "summary.comm_overlapped_ns"), -1);
	cr_expect_eq(num(one, "summary.breakdown_fraction.comm"), -1);
	cr_expect_eq(num(one, "ranks.0.breakdown_ns.comm"), -1);
	for (int i = 0; i < ITERS; i++) {
		cr_expect_eq(num(one, "iterations.%d.breakdown_ns.compute", i),
			     num(a, "iterations.%d.breakdown_ns.compute", i) + num(a, "iterations.%d.breakdown_ns.comm", i),
			     "iteration %d", i);
		cr_expect_eq(num(one, "iterations.%d.comm_overlapped_ns", i), -1);
	}
	cr_expect_eq(num(one, "summary.breakdown_ns.compute"),
		     num(a, "summary.breakdown_ns.compute") + num(a, "summary.breakdown_ns.comm"));
	sp_json_free(one);
	sp_json_free(a);
}

/*
 * A job without communication: --schema 1 is --json with the comm keys taken
 * out and the schema string changed, on gentrace's traces of every marker mode
 * and on the trainer's scenarios on the simulated GPU.
 */
Test(comm, schema_1_is_schema_2_without_comm_on_the_e2e_workloads, .timeout = 600)
{
	static const char *const markers[] = {"none", "step", "nvtx"};
	for (size_t m = 0; m < sizeof(markers) / sizeof(markers[0]); m++) {
		char tdir[700];
		snprintf(tdir, sizeof(tdir), "%s/gentrace-%s", test_dir(), markers[m]);
		char *argv[] = {(char *)sp_t_build("tests/bin/gentrace"), tdir, "20000", "--iters", "50", "--markers",
				(char *)markers[m], NULL};
		struct sp_t_result r;
		sp_t_run(&r, argv, NULL, NULL, 60);
		cr_assert_eq(r.status, 0, "gentrace: %s", r.err);
		sp_t_result_free(&r);
		expect_schema1_is_stripped(tdir, markers[m]);
	}
	static const char *const scen[][2] = {{"clean", "step"}, {"input-bound", "none"}, {"sync-heavy", "nvtx"}};
	for (size_t s = 0; s < sizeof(scen) / sizeof(scen[0]); s++) {
		char tdir[700];
		snprintf(tdir, sizeof(tdir), "%s/%s-%s", test_dir(), scen[s][0], scen[s][1]);
		char *args[] = {"--scenario", (char *)scen[s][0], "--markers", (char *)scen[s][1], "--iters", "8", NULL};
		struct sp_t_result r;
		sp_t_run_trainer(&r, tdir, args);
		sp_t_result_free(&r);
		expect_schema1_is_stripped(tdir, scen[s][0]);
	}
}

/* --schema: 1 or 2, with --json only. */
Test(comm, schema_option_usage_errors)
{
	struct gen g;
	gentrace(&g, "none", NULL);
	static const char *const bad[][3] = {{"--json", "--schema", "3"}, {"--json", "--schema", "x"}, {"--schema", "1", ""}};
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		struct sp_t_result r;
		char *argv[] = {(char *)sp_t_build("bin/stepprof"), "analyze", (char *)bad[i][0], (char *)bad[i][1],
				*bad[i][2] ? (char *)bad[i][2] : g.tdir, *bad[i][2] ? g.tdir : NULL, NULL};
		sp_t_run(&r, argv, NULL, NULL, 60);
		cr_expect_eq(r.status, 1, "%s %s %s: exit %d", bad[i][0], bad[i][1], bad[i][2], r.status);
		cr_expect(strstr(r.err, "--schema"), "the message names --schema: %s", r.err);
		sp_t_result_free(&r);
	}
}
