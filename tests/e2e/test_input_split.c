/*
 * test_input_split.c - why the trainer waits for its batches: the split of
 * each iteration's input time into input_io (the loader's file calls),
 * input_cpu (its CPU work) and input_wait (the loader blocked or idle), by the
 * rule of docs/workloads.md, on the synthetic trainer's loader scenarios:
 *   - the ground truth alone (no preload): the split is a partition of the input
 *     time, bounded by what the workers' batches say they did, all input_io
 *     without workers, and each scenario's cause dominates: input_cpu for
 *     loader-cpu-bound, input_io for small-files, input_wait for loader-starved;
 *   - under LD_PRELOAD=libstepprof.so with stepprof_step() marks, analysed
 *     (`stepprof analyze --json`, docs/analysis-json.md): iterations[].input_split_ns
 *     and summary.input_split_fraction against the ground truth (run-level shares
 *     within 5 points, single iterations from the third on within 5 points for 80%
 *     of them), and the findings each cause calls for: loader_cpu_bound,
 *     small_file_storm, loader_starved, none of them on the clean scenario; the
 *     iteration count exact and the breakdown's shares within 3 points, so that
 *     the input time being split is the truth's.
 *
 * RATIONALE: input_cpu is CPU time, what the workers really got. On a machine
 * whose CPUs other jobs take, a worker that wants to spin is runnable but not
 * running: its batch takes longer and the time it waits for a CPU is
 * input_wait. The truth stays right, but loader-cpu-bound is then not
 * CPU-bound as run; its dominance and findings are checked only when the
 * workers got most of the CPU they asked for (a note says so otherwise).
 */
#include <criterion/criterion.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "testlib.h"
#include "trainerlib.h"

TestSuite(input_split, .fini = sp_t_remove_cur_dir);

enum { IO, CPU, WAIT, NSPLIT };
static const char *const cats[] = {
#define SP_CATEGORY(id, name) name,
#include "stepprof/categories.def"
#undef SP_CATEGORY
};
static const char *const split_key[NSPLIT] = {"input_io", "input_cpu", "input_wait"};

struct run {
	struct sp_json *truth, *an;
	struct sp_t_result tr, ar;
};

/* ---- 1. running ---- */

/*
 * The data of small-files (30,000 files of 2 KiB) in tmpfs when there is one:
 * creating them on a busy disk takes from seconds to a minute, reading them is
 * the same system calls either way.
 */
static const char *data_tmpdir(const char *scenario)
{
	return !strcmp(scenario, "small-files") && access("/dev/shm", W_OK) == 0 ? "TMPDIR=/dev/shm" : NULL;
}

/* The trainer alone, without the preload: its ground truth. extra: more options, separated by spaces. */
static void run_plain(struct run *r, const char *scenario, const char *extra)
{
	memset(r, 0, sizeof(*r));
	char more[256], *save = NULL;
	snprintf(more, sizeof(more), "%s", extra ? extra : "");
	char *argv[24] = {(char *)sp_t_build("tests/bin/trainer"), "--scenario", (char *)scenario};
	int n = 3;
	for (char *t = strtok_r(more, " ", &save); t && n < 23; t = strtok_r(NULL, " ", &save))
		argv[n++] = t;
	argv[n] = NULL;
	char *env[] = {"LD_PRELOAD=", "STEPPROF_DIR=", (char *)data_tmpdir(scenario), NULL};
	int st = sp_t_run(&r->tr, argv, env, NULL, 120);
	cr_assert_eq(st, 0, "trainer --scenario %s %s: exit %d: %s", scenario, extra ? extra : "", st, r->tr.err);
	r->truth = sp_t_parse_last_line(r->tr.out);
	cr_assert_not_null(r->truth, "no ground-truth JSON from the trainer: %s", r->tr.out);
}

/* The scenario under the preload with step marks (STEPPROF_KERNEL_TIMING as it comes), then analysed. */
static void run_profiled(struct run *r, const char *scenario)
{
	memset(r, 0, sizeof(*r));
	sp_t_cur_dir = sp_t_tmpdir("input-split");
	char tdir[512];
	snprintf(tdir, sizeof(tdir), "%s/trace", sp_t_cur_dir);
	char *args[] = {"--scenario", (char *)scenario, "--markers", "step", NULL};
	char *env[] = {(char *)data_tmpdir(scenario), NULL};
	sp_t_trainer_analyze(&r->tr, &r->ar, tdir, args, env, &r->truth, &r->an);
}

static void run_free(struct run *r)
{
	sp_t_trainer_run_free(r->truth, r->an, &r->tr, &r->ar);
	sp_t_remove_cur_dir();
}

/* ---- 2. the ground truth ---- */

static uint64_t u(const struct sp_json *j, const char *path)
{
	struct sp_json *v = sp_json_path(j, path);
	cr_assert(v && v->type == SPJ_NUM, "ground truth: no number %s", path);
	return sp_json_u64(j, path, 0);
}

static uint64_t split_of(const struct sp_json *obj, int k)
{
	char path[64];
	snprintf(path, sizeof(path), "input_split_ns.%s", split_key[k]);
	return u(obj, path);
}

/* The run's split as shares of its wall time, from the truth's totals. */
static void truth_shares(const struct sp_json *truth, double *share)
{
	struct sp_json *tot = sp_json_get(truth, "totals");
	double wall = (double)u(truth, "totals.wall_ns");
	for (int k = 0; k < NSPLIT; k++)
		share[k] = wall > 0 ? (double)split_of(tot, k) / wall : 0;
}

/*
 * What the truth must be whatever the scenario: per iteration a partition of
 * the input time; the totals the sums; the summary's fractions the totals over
 * the wall time; and no more io or cpu in an iteration than the batches whose
 * windows meet it can give (each worker's 1/K share of their io_ns, cpu_ns).
 */
static void check_truth(const struct sp_json *truth)
{
	struct sp_json *its = sp_json_get(truth, "iterations");
	cr_assert(its && its->type == SPJ_ARR && its->n > 0);
	cr_assert_eq(its->n, u(truth, "config.iters"), "iterations: %zu, --iters %llu", its->n,
		     (unsigned long long)u(truth, "config.iters"));
	uint64_t sum[NSPLIT] = {0};
	double k = (double)u(truth, "config.workers");
	for (size_t i = 0; i < its->n; i++) {
		struct sp_json *it = sp_json_at(its, i);
		uint64_t in = u(it, "breakdown_ns.input"), s = 0, b = u(it, "start_ns"), e = u(it, "end_ns");
		for (int c = 0; c < NSPLIT; c++)
			s += split_of(it, c), sum[c] += split_of(it, c);
		cr_assert_eq(s, in, "iteration %zu: input_split_ns sums to %llu, input %llu", i, (unsigned long long)s,
			     (unsigned long long)in);
		if (k == 0)
			continue;
		double io = 0, cpu = 0;
		for (size_t j = 0; j < its->n; j++) {
			struct sp_json *bj = sp_json_at(its, j);
			uint64_t rb = u(bj, "batch.read_begin_ns"), re = u(bj, "batch.read_end_ns");
			uint64_t bio = u(bj, "batch.io_ns"), bcpu = u(bj, "batch.cpu_ns");
			cr_assert_leq(bio + bcpu, re - rb,
				      "batch of iteration %zu: io %llu + cpu %llu over a %llu ns window", j,
				      (unsigned long long)bio, (unsigned long long)bcpu, (unsigned long long)(re - rb));
			if (rb < e && re > b)
				io += (double)bio / k, cpu += (double)bcpu / k;
		}
		/* + 0.1 ms: a worker's start-up window (empty without --worker-start-us) is no batch */
		cr_assert_leq((double)split_of(it, IO), io + 1e5, "iteration %zu: input_io %llu, its batches' io %.0f",
			      i, (unsigned long long)split_of(it, IO), io);
		cr_assert_leq((double)split_of(it, CPU), cpu + 1e5,
			      "iteration %zu: input_cpu %llu, its batches' cpu %.0f", i,
			      (unsigned long long)split_of(it, CPU), cpu);
	}
	struct sp_json *tot = sp_json_get(truth, "totals");
	uint64_t tsum = 0;
	for (int c = 0; c < NSPLIT; c++) {
		cr_assert_eq(split_of(tot, c), sum[c], "totals.%s %llu, the iterations sum to %llu", split_key[c],
			     (unsigned long long)split_of(tot, c), (unsigned long long)sum[c]);
		tsum += sum[c];
	}
	cr_assert_eq(tsum, u(truth, "totals.breakdown_ns.input"));
	double share[NSPLIT];
	truth_shares(truth, share);
	for (int c = 0; c < NSPLIT; c++) {
		char path[96];
		snprintf(path, sizeof(path), "summary.input_split_fraction.%s", split_key[c]);
		cr_assert(fabs(sp_json_num(truth, path, -1) - share[c]) < 1e-5, "%s %.6f, totals give %.6f", path,
			  sp_json_num(truth, path, -1), share[c]);
	}
}

/* The part of the run's input time that k takes. */
static double part_of_input(const struct sp_json *truth, int k)
{
	double in = (double)u(truth, "totals.breakdown_ns.input");
	return in > 0 ? (double)split_of(sp_json_get(truth, "totals"), k) / in : 0;
}

static void note_truth(const char *scenario, const struct sp_json *truth)
{
	double share[NSPLIT];
	truth_shares(truth, share);
	sp_t_note("input_split: %s: ground truth: input %.3f of wall = io %.3f + cpu %.3f + wait %.3f "
		  "(of input: io %.0f%%, cpu %.0f%%, wait %.0f%%)",
		  scenario, sp_json_num(truth, "summary.breakdown_fraction.input", -1), share[IO], share[CPU],
		  share[WAIT], 100 * part_of_input(truth, IO), 100 * part_of_input(truth, CPU),
		  100 * part_of_input(truth, WAIT));
}

/*
 * The CPU the workers got over what their windows needed besides their file
 * calls: Σ cpu_ns / Σ (window − io_ns) over the batches. Near 1 when nothing
 * else wanted the CPUs; 0.5 when each worker shared a CPU with another job.
 */
static double cpu_got(const struct sp_json *truth)
{
	struct sp_json *its = sp_json_get(truth, "iterations");
	double cpu = 0, need = 0;
	for (size_t i = 0; i < its->n; i++) {
		struct sp_json *it = sp_json_at(its, i);
		cpu += (double)u(it, "batch.cpu_ns");
		need += (double)(u(it, "batch.read_end_ns") - u(it, "batch.read_begin_ns") - u(it, "batch.io_ns"));
	}
	return need > 0 ? cpu / need : 0;
}

/* The workers got the CPUs they asked for (see RATIONALE): 3/4 of it at least. */
#define CPU_GOT_MIN 0.75

/*
 * The scenario's cause, from its truth: for loader-cpu-bound input_cpu, for
 * small-files input_io (over 60% of input), for loader-starved input_wait;
 * false when loader-cpu-bound ran on CPUs too busy to be CPU-bound (noted).
 */
static bool expect_cause(const char *scenario, const struct sp_json *truth)
{
	double io = part_of_input(truth, IO), cpu = part_of_input(truth, CPU), wait = part_of_input(truth, WAIT);
	cr_assert_gt(sp_json_num(truth, "summary.breakdown_fraction.input", 0), 0.3, "%s: the trainer hardly waits",
		     scenario);
	if (!strcmp(scenario, "loader-cpu-bound")) {
		double got = cpu_got(truth);
		cr_assert_gt(cpu, 5 * io, "%s: cpu %.3f, io %.3f of input", scenario, cpu, io);
		if (got < CPU_GOT_MIN) {
			sp_t_note(
			    "input_split: %s: the workers got %.2f of the CPU their transform asked for (other jobs "
			    "on the CPUs): not CPU-bound as run, its cause and findings not checked",
			    scenario, got);
			return false;
		}
		cr_assert_gt(cpu, 0.6, "%s: cpu %.3f of input (io %.3f, wait %.3f), workers got %.2f of their CPU",
			     scenario, cpu, io, wait, got);
	} else if (!strcmp(scenario, "small-files")) {
		cr_assert_gt(io, 0.6, "%s: io %.3f of input (cpu %.3f, wait %.3f)", scenario, io, cpu, wait);
		cr_assert_eq(u(truth, "totals.input_split_ns.input_cpu"), 0);
	} else if (!strcmp(scenario, "loader-starved")) {
		cr_assert_gt(wait, 0.8, "%s: wait %.3f of input (io %.3f, cpu %.3f)", scenario, wait, io, cpu);
		cr_assert_eq(u(truth, "totals.input_split_ns.input_cpu"), 0);
	}
	return true;
}

/* What the workers did per batch, from the options: CPU work, no CPU work, a sleep. */
static void expect_batches(const char *scenario, const struct sp_json *truth)
{
	struct sp_json *its = sp_json_get(truth, "iterations");
	double jit = sp_json_num(truth, "config.jitter_pct", 0) / 100.0;
	uint64_t cpu_us = u(truth, "config.worker_cpu_us"), sleep_us = u(truth, "config.worker_us");
	for (size_t i = 0; i < its->n; i++) {
		struct sp_json *it = sp_json_at(its, i);
		uint64_t cpu = u(it, "batch.cpu_ns"), win = u(it, "batch.read_end_ns") - u(it, "batch.read_begin_ns");
		/* each file's share is burnt to the nanosecond at least (one clock read of CPU time past it) */
		cr_assert_geq((double)cpu, (double)cpu_us * 1000 * (1 - jit) - 1000,
			      "%s: batch of iteration %zu: cpu %llu", scenario, i, (unsigned long long)cpu);
		if (!cpu_us)
			cr_assert_eq(cpu, 0, "%s: batch of iteration %zu: cpu %llu without --worker-cpu-us", scenario,
				     i, (unsigned long long)cpu);
		cr_assert_geq((double)win, (double)(cpu_us + sleep_us) * 1000 * (1 - jit),
			      "%s: batch of iteration %zu: a %llu ns window", scenario, i, (unsigned long long)win);
	}
}

static void truth_only(const char *scenario)
{
	struct run r;
	run_plain(&r, scenario, NULL);
	cr_assert_str_eq(sp_json_str(r.truth, "config.scenario"), scenario);
	check_truth(r.truth);
	expect_batches(scenario, r.truth);
	note_truth(scenario, r.truth);
	expect_cause(scenario, r.truth);
	run_free(&r);
}

Test(input_split, truth_loader_cpu_bound_waits_on_the_workers_cpu, .timeout = 120)
{
	truth_only("loader-cpu-bound");
}

Test(input_split, truth_small_files_waits_on_the_workers_file_calls, .timeout = 120)
{
	truth_only("small-files");
}

Test(input_split, truth_loader_starved_waits_on_blocked_workers, .timeout = 120)
{
	truth_only("loader-starved");
}

/* Without workers the trainer's own file calls are its input: all input_io. */
Test(input_split, truth_main_thread_reads_are_all_io, .timeout = 120)
{
	struct run r;
	run_plain(&r, "loader-cpu-bound", "--workers 0 --iters 6");
	check_truth(r.truth);
	struct sp_json *its = sp_json_get(r.truth, "iterations");
	for (size_t i = 0; i < its->n; i++) {
		struct sp_json *it = sp_json_at(its, i);
		cr_assert_gt(u(it, "breakdown_ns.input"), 0, "iteration %zu: no input", i);
		cr_assert_eq(split_of(it, IO), u(it, "breakdown_ns.input"), "iteration %zu", i);
		cr_assert_eq(split_of(it, CPU) + split_of(it, WAIT), 0, "iteration %zu", i);
	}
	run_free(&r);
}

/* ---- 3. the analysis against it ---- */

static double iter_share(const struct sp_json *it, int k)
{
	char path[64];
	snprintf(path, sizeof(path), "input_split_ns.%s", split_key[k]);
	double wall = sp_json_num(it, "wall_ns", 0);
	return wall > 0 ? sp_json_num(it, path, 0) / wall : 0;
}

/* The analysis's split: present, its parts summing to its own input (iterations and summary). */
static void check_contract(struct run *r)
{
	struct sp_json *its = sp_json_get(r->an, "iterations");
	cr_assert_not_null(its, "no iterations in the analysis");
	for (size_t i = 0; i < its->n; i++) {
		struct sp_json *it = sp_json_at(its, i);
		struct sp_json *sp = sp_json_get(it, "input_split_ns");
		cr_assert(sp && sp->type == SPJ_OBJ, "iteration %zu: no input_split_ns", i);
		double s = 0, in = sp_json_num(it, "breakdown_ns.input", -1);
		for (int k = 0; k < NSPLIT; k++) {
			struct sp_json *v = sp_json_get(sp, split_key[k]);
			cr_assert(v && v->type == SPJ_NUM && v->num >= 0, "iteration %zu: input_split_ns.%s", i,
				  split_key[k]);
			s += v->num;
		}
		cr_expect(fabs(s - in) <= 1000 + 1e-3 * in, "iteration %zu: input_split_ns sums to %.0f, input %.0f", i,
			  s, in);
	}
	double s = 0;
	for (int k = 0; k < NSPLIT; k++) {
		char path[96];
		snprintf(path, sizeof(path), "summary.input_split_fraction.%s", split_key[k]);
		struct sp_json *v = sp_json_path(r->an, path);
		cr_assert(v && v->type == SPJ_NUM && v->num >= 0, "no %s", path);
		s += v->num;
	}
	double in = sp_json_num(r->an, "summary.breakdown_fraction.input", -1);
	cr_expect(fabs(s - in) <= 0.001, "summary.input_split_fraction sums to %.4f, breakdown_fraction.input %.4f", s,
		  in);
}

/*
 * Whether the truth has a measure of the workers' CPU work: their spun transform
 * (--worker-cpu-us) or start-up. Without one (small-files, loader-starved) the
 * few microseconds of a worker's own loop between its calls are CPU work to the
 * analysis and wait to the truth: cpu and wait are compared as one share then.
 */
static bool truth_has_cpu(const struct sp_json *truth)
{
	return u(truth, "totals.input_split_ns.input_cpu") > 0;
}

/* Share k of an analysis's or a truth's split (shares[NSPLIT]), cpu folded into wait when !cpu. */
static double fold(const double *shares, int k, bool cpu)
{
	if (cpu)
		return shares[k];
	return k == CPU ? 0 : k == WAIT ? shares[CPU] + shares[WAIT] : shares[k];
}

/* The summary's shares, each within 5 points of the truth's (totals over wall). */
static bool summary_within(struct run *r, bool expect)
{
	double truth[NSPLIT], an[NSPLIT];
	truth_shares(r->truth, truth);
	for (int k = 0; k < NSPLIT; k++) {
		char path[96];
		snprintf(path, sizeof(path), "summary.input_split_fraction.%s", split_key[k]);
		an[k] = sp_json_num(r->an, path, -1);
	}
	bool ok = true, cpu = truth_has_cpu(r->truth);
	for (int k = 0; k < NSPLIT; k++) {
		char path[96];
		snprintf(path, sizeof(path), "summary.input_split_fraction.%s%s", split_key[k],
			 !cpu && k == WAIT ? " + input_cpu" : "");
		double got = fold(an, k, cpu), want = fold(truth, k, cpu);
		ok &= fabs(got - want) <= 0.05;
		if (expect)
			cr_expect(fabs(got - want) <= 0.05, "%s %.4f, ground truth %.4f (±0.05)", path, got, want);
	}
	return ok;
}

/* Iterations 2.. each within 5 points of their truth (shares of their walls), for 80% of them at least. */
static void iterations_within(struct run *r, const char *scenario)
{
	struct sp_json *its = sp_json_get(r->an, "iterations"), *tits = sp_json_get(r->truth, "iterations");
	size_t n = its->n < tits->n ? its->n : tits->n, ok = 0, all = 0;
	for (size_t i = 2; i < n; i++) {
		struct sp_json *a = sp_json_at(its, i), *t = sp_json_at(tits, i);
		bool good = true, cpu = truth_has_cpu(r->truth);
		double as[NSPLIT], ts[NSPLIT];
		for (int k = 0; k < NSPLIT; k++)
			as[k] = iter_share(a, k), ts[k] = iter_share(t, k);
		for (int k = 0; k < NSPLIT; k++)
			good &= fabs(fold(as, k, cpu) - fold(ts, k, cpu)) <= 0.05;
		ok += good, all++;
	}
	bool pass = all && ok * 5 >= all * 4;
	if (!pass)
		for (size_t i = 2; i < n; i++) {
			struct sp_json *a = sp_json_at(its, i), *t = sp_json_at(tits, i);
			sp_t_note(
			    "input_split: %s: iteration %zu: io %.3f cpu %.3f wait %.3f, ground truth io %.3f cpu "
			    "%.3f wait %.3f (shares of wall)",
			    scenario, i, iter_share(a, IO), iter_share(a, CPU), iter_share(a, WAIT), iter_share(t, IO),
			    iter_share(t, CPU), iter_share(t, WAIT));
		}
	cr_expect(pass, "%s: %zu of %zu iterations (from the third) within 5 points of their ground truth", scenario,
		  ok, all);
}

static struct sp_json *finding(struct run *r, const char *kind)
{
	struct sp_json *f = sp_json_get(r->an, "findings");
	for (size_t i = 0; f && i < f->n; i++) {
		const char *k = sp_json_str(sp_json_at(f, i), "kind") ?: sp_json_str(sp_json_at(f, i), "name");
		if (k && !strcmp(k, kind))
			return sp_json_at(f, i);
	}
	return NULL;
}

static bool at_least_warning(const struct sp_json *f)
{
	const char *sev = f ? sp_json_str(f, "severity") ?: "" : "";
	return !strcmp(sev, "warning") || !strcmp(sev, "critical");
}

static void expect_finding(struct run *r, const char *kind)
{
	struct sp_json *f = finding(r, kind);
	cr_expect(at_least_warning(f), "%s: %s: %s", kind, f ? sp_json_str(f, "severity") : "absent", r->ar.out);
}

static void expect_no_finding(struct run *r, const char *kind, bool info_ok)
{
	struct sp_json *f = finding(r, kind);
	if (info_ok)
		cr_expect(!at_least_warning(f), "%s at %s: %s", kind, sp_json_str(f, "severity"), r->ar.out);
	else
		cr_expect_null(f, "%s where it should not be: %s", kind, r->ar.out);
}

/*
 * The scenario profiled and analysed; the truth checked; the analysis's split
 * against it. NOTE: a second run when the summary's shares are off, as
 * test_scenarios.c retries: on a loaded machine the simulated GPU's stream
 * thread wakes late and a run drifts; a wrong analysis is wrong every time.
 * Returns whether the scenario's cause held in the truth (expect_cause).
 */
static bool profiled(struct run *r, const char *scenario)
{
	for (int attempt = 1;; attempt++) {
		run_profiled(r, scenario);
		check_truth(r->truth);
		note_truth(scenario, r->truth);
		cr_assert_eq(sp_json_num(r->an, "summary.iterations", -2),
			     sp_json_num(r->truth, "totals.iterations", -1), "iterations: %g, the trainer ran %g",
			     sp_json_num(r->an, "summary.iterations", -2),
			     sp_json_num(r->truth, "totals.iterations", -1));
		check_contract(r);
		if (attempt == 2 || summary_within(r, false))
			break;
		sp_t_note("input_split: %s: the summary's split off its ground truth, run %d of 2", scenario, attempt);
		run_free(r);
	}
	/* the input time being split is the truth's: every category within 3 points, as test_scenarios.c checks */
	for (int c = 0; c < (int)(sizeof(cats) / sizeof(cats[0])); c++) {
		char key[96];
		snprintf(key, sizeof(key), "summary.breakdown_fraction.%s", cats[c]);
		double got = sp_json_num(r->an, key, -1), want = sp_json_num(r->truth, key, -1);
		cr_expect(fabs(got - want) <= 0.03, "%s share %.4f, ground truth %.4f (±0.03)", cats[c], got, want);
	}
	bool cause = strcmp(scenario, "clean") ? expect_cause(scenario, r->truth) : true;
	/*
	 * The small-files worker preempted (other jobs on the CPUs) between its
	 * recorded calls is neither in the analysis (docs/definitions.md, "Input
	 * split") but file I/O in the ground truth, which times the calls from
	 * outside the wrappers: the shares are not comparable then, the cause is.
	 */
	double ran = sp_json_num(r->an, "summary.loaders.cpu_utilisation", -1);
	if (!strcmp(scenario, "small-files") && ran < CPU_GOT_MIN) {
		sp_t_note("input_split: %s: the worker ran %.2f of its time (other jobs on the CPUs): its split not "
			  "compared with the ground truth, its cause and findings are",
			  scenario, ran);
		cr_expect_gt(sp_json_num(r->an, "summary.input_split_fraction.input_io", 0),
			     sp_json_num(r->an, "summary.input_split_fraction.input_cpu", 1), "%s: io leads cpu", scenario);
		return cause;
	}
	summary_within(r, true);
	iterations_within(r, scenario);
	return cause;
}

Test(input_split, loader_cpu_bound, .timeout = 120)
{
	struct run r;
	if (profiled(&r, "loader-cpu-bound")) {
		expect_finding(&r, "loader_cpu_bound");
		expect_no_finding(&r, "loader_starved", false);
	}
	expect_no_finding(&r, "small_file_storm", true);
	run_free(&r);
}

Test(input_split, small_files, .timeout = 120)
{
	struct run r;
	profiled(&r, "small-files");
	expect_finding(&r, "small_file_storm");
	expect_no_finding(&r, "loader_cpu_bound", false);
	run_free(&r);
}

Test(input_split, loader_starved, .timeout = 120)
{
	struct run r;
	profiled(&r, "loader-starved");
	expect_finding(&r, "loader_starved");
	expect_no_finding(&r, "loader_cpu_bound", false);
	run_free(&r);
}

/* The silent case: large files, a loader that keeps up: neither loader finding. */
Test(input_split, clean_is_silent, .timeout = 120)
{
	struct run r;
	profiled(&r, "clean");
	expect_no_finding(&r, "loader_cpu_bound", false);
	expect_no_finding(&r, "loader_starved", false);
	run_free(&r);
}
