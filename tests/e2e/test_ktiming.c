/*
 * test_ktiming.c - the kernel-timing policy STEPPROF_KERNEL_TIMING=auto (it
 * times a small sample of the kernel launches and models the others from each
 * kernel's learned duration) against `all` (every launch timed) and against the
 * ground truth the synthetic trainer measures itself (docs/workloads.md), on the
 * simulated GPU:
 *   - the two ends of the policy's range: a launch-bound loop of hundreds of
 *     15 µs kernels (the GPU waits for the host) and a deep queue (the host waits
 *     for the GPU): compute share within ±3 points of the truth under both;
 *   - every scenario of the trainer under auto as under all: the breakdown, the
 *     iteration count, the findings;
 *   - a kernel whose duration changes mid-run is learned again;
 *   - what auto is for: far fewer GPU spans in the trace, and the analysis says
 *     how much of the GPU time it modelled (summary.gpu_modelled_share, and the
 *     text report).
 *
 * Markers `step` throughout: iteration i of the analysis is the trainer's i.
 * Divided into: 1. running a scenario under a policy, 2. the tests.
 */
#include <criterion/criterion.h>
#include <dirent.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "testlib.h"
#include "trainerlib.h"

TestSuite(ktiming, .fini = sp_t_remove_cur_dir);

/* ------------------------------------------- 1. a scenario under a policy */

static const char *const cats[] = {
#define SP_CATEGORY(id, name) name,
#include "stepprof/categories.def"
#undef SP_CATEGORY
};
#define NCATS (sizeof(cats) / sizeof(cats[0]))

struct krun {
	char tdir[600];
	const char *scenario, *timing;
	struct sp_json *truth, *an;
	struct sp_t_result tr, ar;
};

/* The test's directory (sp_t_cur_dir, removed by the suite's .fini): every run's trace goes below it. */
static const char *test_dir(void)
{
	if (!sp_t_cur_dir)
		sp_t_cur_dir = sp_t_tmpdir("ktiming");
	return sp_t_cur_dir;
}

static void krun_free(struct krun *r)
{
	sp_json_free(r->truth);
	sp_json_free(r->an);
	sp_t_result_free(&r->tr);
	sp_t_result_free(&r->ar);
	r->truth = r->an = NULL;
}

static double share(const struct sp_json *j, const char *cat)
{
	char key[96];
	snprintf(key, sizeof(key), "summary.breakdown_fraction.%s", cat);
	return sp_json_num(j, key, -1);
}

/* The run's iteration count is the truth's and every breakdown share within tol of it. */
static int within_truth(const struct krun *r, double tol)
{
	if (sp_json_num(r->an, "summary.iterations", -2) != sp_json_num(r->truth, "totals.iterations", -1))
		return 0;
	for (size_t c = 0; c < NCATS; c++)
		if (fabs(share(r->an, cats[c]) - share(r->truth, cats[c])) > tol)
			return 0;
	return 1;
}

/*
 * `trainer --scenario S --markers step EXTRA` under the preload with
 * STEPPROF_KERNEL_TIMING=timing, into <test dir>/<timing>-<S>-<n>, then
 * `stepprof analyze --json` of it. NOTE: up to three runs while the breakdown is
 * more than tol off the truth, as test_scenarios.c does: on a loaded machine the
 * simulated GPU's stream thread wakes late and its spans stretch
 * (docs/definitions.md, Limits); a wrong analysis is wrong in every run.
 * tol <= 0: one run.
 */
static void krun(struct krun *r, const char *scenario, const char *timing, const char *extra, double tol)
{
	static int seq;
	for (int attempt = 1;; attempt++) {
		memset(r, 0, sizeof(*r));
		r->scenario = scenario;
		r->timing = timing;
		snprintf(r->tdir, sizeof(r->tdir), "%s/%s-%s-%d", test_dir(), timing, scenario, ++seq);
		char more[256], *save = NULL, env_t[64];
		snprintf(more, sizeof(more), "%s", extra ? extra : "");
		char *args[24] = {"--scenario", (char *)scenario, "--markers", "step"};
		int n = 4;
		for (char *t = strtok_r(more, " ", &save); t && n < 23; t = strtok_r(NULL, " ", &save))
			args[n++] = t;
		snprintf(env_t, sizeof(env_t), "STEPPROF_KERNEL_TIMING=%s", timing);
		char *env[] = {env_t, NULL};
		sp_t_run_trainer_env(&r->tr, r->tdir, args, env);
		r->truth = sp_t_parse_last_line(r->tr.out);
		cr_assert_not_null(r->truth, "no ground truth from the trainer: %s", r->tr.out);
		char *aargv[] = {(char *)sp_t_build("bin/stepprof"), "analyze", "--json", r->tdir, NULL};
		sp_t_run(&r->ar, aargv, NULL, NULL, 120);
		cr_assert_eq(r->ar.status, 0, "stepprof analyze: exit %d: %s", r->ar.status, r->ar.err);
		r->an = sp_json_parse(r->ar.out);
		cr_assert_not_null(r->an, "stepprof analyze --json is not JSON: %s", r->ar.out);
		if (tol <= 0 || attempt == 3 || within_truth(r, tol))
			return;
		sp_t_note("ktiming: %s under %s: breakdown off its ground truth, run %d of 3", scenario, timing,
			  attempt);
		krun_free(r);
	}
}

/* The iteration count is exact (markers: iteration i is the trainer's i). */
static void expect_iterations(const struct krun *r)
{
	double n = sp_json_num(r->an, "summary.iterations", -1), want = sp_json_num(r->truth, "totals.iterations", -2);
	cr_expect_eq(n, want, "%s under %s: %g iterations, the trainer ran %g", r->scenario, r->timing, n, want);
}

/* The compute share within tol of the trainer's; the figures in the log. */
static void expect_compute(const struct krun *r, double tol)
{
	double got = share(r->an, "compute"), want = share(r->truth, "compute");
	sp_t_note("ktiming: %s under %s: compute %.4f, ground truth %.4f, modelled share %.3f", r->scenario, r->timing,
		  got, want, sp_json_num(r->an, "summary.gpu_modelled_share", -1));
	cr_expect(fabs(got - want) <= tol, "%s under %s: compute share %.4f, ground truth %.4f (±%.2f)", r->scenario,
		  r->timing, got, want, tol);
}

static int severity(const struct sp_json *f)
{
	const char *s = sp_json_str(f, "severity");
	return !s ? 0 : !strcmp(s, "critical") ? 2 : !strcmp(s, "warning") ? 1 : 0;
}

/* The kinds of the warning and critical findings, sorted, comma-separated, into buf. */
static const char *serious_kinds(const struct krun *r, char *buf, size_t len)
{
	const char *kinds[64];
	size_t n = 0;
	struct sp_json *f = sp_json_get(r->an, "findings");
	for (size_t i = 0; f && i < f->n && n < 64; i++) {
		struct sp_json *x = sp_json_at(f, i);
		const char *k = sp_json_str(x, "kind");
		if (!k || severity(x) < 1)
			continue;
		size_t at = 0;
		while (at < n && strcmp(kinds[at], k) < 0)
			at++;
		if (at < n && !strcmp(kinds[at], k))
			continue; /* a kind twice (two signals): once */
		memmove(kinds + at + 1, kinds + at, (n - at) * sizeof(*kinds));
		kinds[at] = k;
		n++;
	}
	buf[0] = '\0';
	for (size_t i = 0, used = 0; i < n; i++)
		used += (size_t)snprintf(buf + used, used < len ? len - used : 0, "%s%s", i ? "," : "", kinds[i]);
	return buf;
}

/* Every share of a off its truth by what b's is off its own, within tol. */
static int same_error(const struct krun *a, const struct krun *b, double tol)
{
	for (size_t c = 0; c < NCATS; c++)
		if (fabs((share(a->an, cats[c]) - share(a->truth, cats[c])) -
			 (share(b->an, cats[c]) - share(b->truth, cats[c]))) > tol)
			return 0;
	return 1;
}

/* ------------------------------------------------------------- 2. the tests */

/*
 * A launch-bound loop (200 kernels of 15 µs a step, 25 µs of host work before
 * each launch): the GPU idles between kernels, so compute is the kernels' sum
 * over the wall time (~0.3). Under auto most launches are untimed and modelled;
 * their sum must still be the kernels' (within 3 points), as under all, where
 * every launch is timed. Proves the model's per-kernel duration is the kernel's
 * (not the launch interval) on an idle stream.
 */
Test(ktiming, launch_bound_compute_matches_truth_under_auto_and_all, .timeout = 240)
{
	static const char *const timings[] = {"auto", "all"};
	for (size_t k = 0; k < 2; k++) {
		struct krun r;
		krun(&r, "launch-bound", timings[k], NULL, 0.03);
		expect_iterations(&r);
		expect_compute(&r, 0.03);
		krun_free(&r);
	}
}

/*
 * A deep queue (100 kernels of 300 µs queued at once, then a sync): the GPU is
 * never idle within a step, compute > 0.8. Under auto the modelled kernels fill
 * the queue back to back as the measured ones do: compute within 3 points of
 * the truth, and the time the host waits at the sync stays sync.
 */
Test(ktiming, gpu_bound_deep_queue_matches_truth_under_auto, .timeout = 180)
{
	struct krun r;
	krun(&r, "gpu-bound", "auto", NULL, 0.03);
	expect_iterations(&r);
	expect_compute(&r, 0.03);
	cr_expect_gt(share(r.truth, "compute"), 0.8, "the scenario is GPU-bound: compute %.3f",
		     share(r.truth, "compute"));
	cr_expect_str_eq(sp_json_str(r.an, "summary.bottleneck"), "compute");
	krun_free(&r);
}

/*
 * Every scenario of the trainer under auto and under all: auto changes none of
 * the analysis's answers. For each, under each policy, every breakdown share
 * within 2 points of that run's own ground truth (launch-bound: 3, as in the
 * test above: a kernel on an idle stream begins somewhere inside its launch
 * call, taken as its midpoint, which is worth ~1.4 us of each 15 us kernel on
 * the simulated GPU) and the iteration count exact;
 * auto's error within 2 points of all's (launch-bound: 3, its midpoint bias grows
 * with the launch call's length on a loaded machine; auto - its truth against
 * all - its truth: two runs' truths differ by the machine's noise, which is
 * neither policy's); the same kinds of warning and critical findings. The pair
 * runs again (three times at most) while the two errors differ by more than
 * that, as a run does while off its truth: a loaded machine stretches one
 * run's launch calls and not the other's.
 */
Test(ktiming, every_scenario_under_auto_matches_all, .timeout = 600)
{
	static const char *const scen[] = {"input-bound", "pageable-h2d-bound", "compute-bound",
					   "clean",	  "fragmenting",	"leaking",
					   "sync-heavy",  "launch-bound",	"gpu-bound"};
	for (size_t s = 0; s < sizeof(scen) / sizeof(scen[0]); s++) {
		struct krun a, b;
		double tol = strcmp(scen[s], "launch-bound") ? 0.02 : 0.03;
		for (int attempt = 1;; attempt++) { /* the pair again while their errors differ: as krun, noise */
			krun(&a, scen[s], "auto", NULL, tol);
			krun(&b, scen[s], "all", NULL, tol);
			if (attempt == 3 || same_error(&a, &b, tol))
				break;
			sp_t_note("ktiming: %s: auto's error and all's differ by more than %.2f, pair %d of 3", scen[s], tol,
				  attempt);
			krun_free(&a);
			krun_free(&b);
		}
		expect_iterations(&a);
		expect_iterations(&b);
		for (size_t c = 0; c < NCATS; c++) {
			double ga = share(a.an, cats[c]), ta = share(a.truth, cats[c]);
			double gb = share(b.an, cats[c]), tb = share(b.truth, cats[c]);
			cr_expect(fabs(ga - ta) <= tol, "%s under auto: %s %.4f, ground truth %.4f (±%.2f)", scen[s],
				  cats[c], ga, ta, tol);
			cr_expect(fabs(gb - tb) <= tol, "%s under all: %s %.4f, ground truth %.4f (±%.2f)", scen[s],
				  cats[c], gb, tb, tol);
			cr_expect(fabs((ga - ta) - (gb - tb)) <= tol,
				  "%s: %s off its truth by %+.4f under auto, %+.4f under all (±%.2f)", scen[s], cats[c],
				  ga - ta, gb - tb, tol);
		}
		sp_t_note("ktiming: %s: compute %.4f (truth %.4f) under auto, %.4f (truth %.4f) under all", scen[s],
			  share(a.an, "compute"), share(a.truth, "compute"), share(b.an, "compute"),
			  share(b.truth, "compute"));
		char ka[512], kb[512];
		cr_expect_str_eq(serious_kinds(&a, ka, sizeof(ka)), serious_kinds(&b, kb, sizeof(kb)),
				 "%s: warning/critical findings under auto [%s], under all [%s]", scen[s], ka, kb);
		krun_free(&a);
		krun_free(&b);
	}
}

/* Compute over wall of iterations [from, n) of j (an analysis or a ground truth), from breakdown_ns. */
static double compute_share_from(const struct sp_json *j, size_t from)
{
	struct sp_json *its = sp_json_get(j, "iterations");
	cr_assert_not_null(its);
	double comp = 0, wall = 0;
	for (size_t i = from; i < its->n; i++) {
		comp += sp_json_num(sp_json_at(its, i), "breakdown_ns.compute", 0);
		wall += sp_json_num(sp_json_at(its, i), "wall_ns", 0);
	}
	cr_assert_gt(wall, 0, "no iterations from %zu on", from);
	return comp / wall;
}

/*
 * The same kernel, launched the same way, takes 15 µs up to iteration 9 and
 * 40 µs from iteration 10 on (--kernel-step-at 10 --kernel-step-us 40). A model
 * that kept the duration it learned first would read the later kernels at
 * 15 µs, compute about 2.5 times too low; re-sampled, the compute share of
 * iterations 12 to 19 (two iterations to learn) is within 5 points of the
 * trainer's for the same iterations (3 on a quiet machine; the suite's other
 * processes lengthen the launch calls, and the midpoint bias with them).
 */
Test(ktiming, a_kernel_whose_duration_changes_is_relearned, .timeout = 180)
{
	const size_t from = 12;
	struct krun r;
	for (int attempt = 1;; attempt++) {
		krun(&r, "launch-bound", "auto", "--kernel-step-at 10 --kernel-step-us 40", 0);
		cr_assert_eq(sp_json_num(r.an, "summary.iterations", -1),
			     sp_json_num(r.truth, "totals.iterations", -2));
		cr_assert_gt(sp_json_num(r.truth, "totals.iterations", 0), from);
		/* a loaded machine stretches spans: up to three runs, as krun does */
		if (attempt == 3 || fabs(compute_share_from(r.an, from) - compute_share_from(r.truth, from)) <= 0.05)
			break;
		sp_t_note("ktiming: kernel step: compute off its ground truth, run %d of 3", attempt);
		krun_free(&r);
	}
	expect_iterations(&r);
	double got = compute_share_from(r.an, from), want = compute_share_from(r.truth, from);
	double before = compute_share_from(r.truth, 0);
	sp_t_note("ktiming: kernel step: iterations %zu.. compute %.4f, ground truth %.4f (whole run's truth %.4f)",
		  from, got, want, before);
	cr_expect(fabs(got - want) <= 0.05, "iterations %zu..: compute %.4f, ground truth %.4f (±0.05)", from, got,
		  want);
	krun_free(&r);
}

/* GPU spans in every trace file of tdir (`stepprof dump --json`; a gpu_span2 holds two). */
static long gpu_spans(const char *tdir)
{
	DIR *d = opendir(tdir);
	cr_assert_not_null(d, "no trace directory %s", tdir);
	long spans = 0;
	int files = 0;
	for (struct dirent *e; (e = readdir(d));) {
		if (e->d_name[0] == '.')
			continue;
		char path[1024];
		snprintf(path, sizeof(path), "%s/%s", tdir, e->d_name);
		char *argv[] = {(char *)sp_t_build("bin/stepprof"), "dump", "--json", path, NULL};
		struct sp_t_result res;
		sp_t_run(&res, argv, NULL, NULL, 120);
		cr_assert_eq(res.status, 0, "stepprof dump %s: exit %d: %s", path, res.status, res.err);
		files++;
		for (const char *p = res.out; (p = strstr(p, "\"kind\":\"gpu_span")); p++) {
			const char *q = p + strlen("\"kind\":\"gpu_span");
			spans += !strncmp(q, "2\"", 2) ? 2 : *q == '"' ? 1 : 0;
		}
		sp_t_result_free(&res);
	}
	closedir(d);
	cr_assert_gt(files, 0, "no trace file in %s", tdir);
	return spans;
}

/*
 * What auto is for: the launch-bound loop (2,000 launches in 10 iterations)
 * writes at most a fifth of the GPU spans under auto that it writes under all
 * (where every launch and copy has one: at least one per launch), and the
 * analysis says how much of the GPU's busy time it modelled rather than
 * measured: summary.gpu_modelled_share over one half under auto, at most 0.05
 * under all (an absent member reads 0 there: nothing modelled); the text report
 * says so too ("modelled").
 */
Test(ktiming, auto_writes_five_times_fewer_gpu_spans_and_reports_the_modelled_share, .timeout = 180)
{
	struct krun a, b;
	krun(&a, "launch-bound", "auto", "--iters 10", 0);
	krun(&b, "launch-bound", "all", "--iters 10", 0);
	long sa = gpu_spans(a.tdir), sb = gpu_spans(b.tdir);
	double launches = sp_json_num(b.truth, "totals.launches", -1);
	sp_t_note("ktiming: gpu spans: %ld under auto, %ld under all, %.0f launches", sa, sb, launches);
	cr_expect_geq((double)sb, launches, "under all every launch has its span: %ld spans, %.0f launches", sb,
		      launches);
	cr_expect_leq(sa * 5, sb, "auto: %ld GPU spans, all: %ld (at most a fifth)", sa, sb);

	struct sp_json *m = sp_json_path(a.an, "summary.gpu_modelled_share");
	cr_expect(m && m->type == SPJ_NUM, "summary.gpu_modelled_share missing under auto");
	double ma = sp_json_num(a.an, "summary.gpu_modelled_share", -1);
	double mb = sp_json_num(b.an, "summary.gpu_modelled_share", 0);
	cr_expect(ma > 0.5 && ma <= 1, "auto: modelled share %.3f (> 0.5)", ma);
	cr_expect(mb >= 0 && mb <= 0.05, "all: modelled share %.3f (<= 0.05)", mb);

	char *targv[] = {(char *)sp_t_build("bin/stepprof"), "analyze", a.tdir, NULL};
	struct sp_t_result t;
	sp_t_run(&t, targv, NULL, NULL, 120);
	cr_expect_eq(t.status, 0, "stepprof analyze: exit %d: %s", t.status, t.err);
	cr_expect_not_null(strstr(t.out, "modelled"), "the text report says what it modelled:\n%s", t.out);
	sp_t_result_free(&t);
	krun_free(&a);
	krun_free(&b);
}
