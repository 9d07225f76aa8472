/*
 * test_analyze_cli.c - `stepprof analyze` as a command on trace files written by
 * tracegen: a multi-process run (trainer, loader worker, an eBPF collector file
 * holding a third process) merged onto one timeline, the JSON schema, --help,
 * and every bad input with its one-line message and exit code
 * (docs/analysis-json.md: 0 ok, 1 usage, 2 unreadable input, 3 damaged, 4 internal).
 *
 * Divided into: 1. writing a run, 2. merging and the schema, 3. bad input, 4. the
 * bottleneck's threshold and trace strings in the report.
 */
#include <criterion/criterion.h>
#include <errno.h>
#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "analyze.h"
#include "testlib.h"
#include "tracegen.h"

/* ----------------------------------------------------- 1. writing a run */

#define T0	   2000000000ull
#define ITER_NS	   10000000ull /* 10 ms */
#define NITER	   12
#define TRAINER	   4100
#define WORKER	   4200
#define GRANDCHILD 4300

/*
 * The trainer marks each iteration with stepprof_step() and waits 4 ms for its
 * batch, then copies, launches a 5 ms kernel and syncs. The worker opens and
 * reads 3 files of 64 KiB during each wait; a collector file (SP_FEAT_BPF) holds
 * a grandchild's 2 stats per iteration. Worker and grandchild start later than the
 * trainer's first record, so a merge by file order instead of time would show.
 */
/* Iterations write_run writes (NITER unless a test asks for more). */
static int run_iters = NITER;
/* What the collector file's header counts as lost (calls of no known process). */
static uint64_t bpf_header_lost;

/* The six categories' numbers at <prefix><category> in j, summed (dflt for one that is missing). */
static double sum_of_cats(const struct sp_json *j, const char *prefix, double dflt)
{
	static const char *const cats[] = {
	#define SP_CATEGORY(id, name) name,
	#include "stepprof/categories.def"
	#undef SP_CATEGORY
	};
	double sum = 0;
	for (int c = 0; c < (int)(sizeof(cats) / sizeof(cats[0])); c++) {
		char key[96];
		snprintf(key, sizeof(key), "%s%s", prefix, cats[c]);
		sum += sp_json_num(j, key, dflt);
	}
	return sum;
}

static void write_run(const char *dir, int truncate_trainer)
{
	char path[512];
	snprintf(path, sizeof(path), "%s/trainer.sptrace", dir);
	struct sp_tg *g = sp_tg_create(path, TRAINER, 1, 0);
	uint32_t kname = sp_tg_intern(g, "gemm");
	SP_TG_ADD(g, TRAINER, SP_K_FORK, 0, T0 - 1000, T0 - 1000, {SP_F_PID, WORKER});
	for (int i = 0; i < run_iters; i++) {
		uint64_t t = T0 + (uint64_t)i * ITER_NS;
		SP_TG_ADD(g, TRAINER, SP_K_STEP, SP_API_stepprof_step, t, t, {SP_F_VALUE, i});
		SP_TG_ADD(g, TRAINER, SP_K_LOADER_WAIT, SP_API_read, t, t + 4000000, {SP_F_FD_TYPE, SP_FDTYPE_PIPE},
			  {SP_F_BYTES, 8});
		SP_TG_ADD(g, TRAINER, SP_K_COPY, SP_API_cudaMemcpyAsync, t + 4000000, t + 4010000,
			  {SP_F_DIRECTION, SP_DIR_H2D}, {SP_F_BYTES, 1 << 20}, {SP_F_OP, 2 * i + 1},
			  {SP_F_HOST_MEMORY, SP_HOSTMEM_PINNED});
		SP_TG_ADD(g, TRAINER, SP_K_LAUNCH, SP_API_cudaLaunchKernel, t + 4010000, t + 4015000,
			  {SP_F_NAME, kname}, {SP_F_OP, 2 * i + 2});
		SP_TG_ADD(g, TRAINER, SP_K_SYNC, SP_API_cudaStreamSynchronize, t + 4015000, t + 9500000);
		/* GPU spans read back at the sync: written after it, begin earlier */
		SP_TG_ADD(g, TRAINER, SP_K_GPU_SPAN, 0, t + 4000000, t + 4500000, {SP_F_OP, 2 * i + 1});
		SP_TG_ADD(g, TRAINER, SP_K_GPU_SPAN, 0, t + 4500000, t + 9500000, {SP_F_OP, 2 * i + 2});
	}
	if (truncate_trainer) {
		size_t len;
		uint8_t *img = sp_tg_image(g, &len);
		FILE *f = fopen(path, "w");
		cr_assert(f);
		/*
		 * The trainer's one ring chunk is the file's last 64 KiB; keep its header
		 * and 41 slots: the FORK record and five iterations of 8 slots, the sixth cut.
		 */
		size_t keep = len - 65536 + (SP_CHUNK_HDR_SLOTS + 41) * SP_SLOT_SIZE;
		cr_assert_eq(fwrite(img, 1, keep, f), keep);
		fclose(f);
		free(img);
	} else {
		cr_assert_eq(sp_tg_finish(g), 0);
	}

	snprintf(path, sizeof(path), "%s/worker.sptrace", dir);
	g = sp_tg_create(path, WORKER, TRAINER, -1);
	uint32_t file = sp_tg_intern(g, "/data/set/img.jpg");
	for (int i = 0; i < run_iters; i++) {
		uint64_t t = T0 + (uint64_t)i * ITER_NS + 100000;
		for (int k = 0; k < 3; k++, t += 1000000) {
			SP_TG_ADD(g, WORKER, SP_K_OPEN, SP_API_open, t, t + 10000, {SP_F_PATH, file}, {SP_F_FD, 5});
			SP_TG_ADD(g, WORKER, SP_K_READ, SP_API_read, t + 10000, t + 500000, {SP_F_FD, 5},
				  {SP_F_BYTES, 65536}, {SP_F_FD_TYPE, SP_FDTYPE_FILE});
			SP_TG_ADD(g, WORKER, SP_K_CLOSE, SP_API_close, t + 500000, t + 510000, {SP_F_FD, 5});
		}
	}
	cr_assert_eq(sp_tg_finish(g), 0);

	snprintf(path, sizeof(path), "%s/bpf.sptrace", dir);
	struct sp_tg_opts o = {.pid = 9999, .ppid = 1, .rank = -1};
	g = sp_tg_create_opts(path, &o);
	sp_tg_header(g)->features = SP_FEAT_BPF;
	sp_tg_header(g)->lost_records = bpf_header_lost;
	for (int i = 0; i < run_iters; i++) {
		uint64_t t = T0 + (uint64_t)i * ITER_NS + 3500000;
		struct sp_event ev = {.kind = SP_K_STAT, .api = SP_API_stat, .pid = GRANDCHILD, .tid = GRANDCHILD};
		for (int k = 0; k < 2; k++) {
			ev.begin_ns = t + (uint64_t)k * 1000;
			ev.end_ns = ev.begin_ns + 500;
			ev.f[SP_F_SOURCE] = SP_SOURCE_BPF;
			sp_tg_add_event(g, &ev);
		}
	}
	cr_assert_eq(sp_tg_finish(g), 0);
}

/* `stepprof analyze DIR --json [--threshold T]`, which must exit want_status: its JSON, parsed. */
static struct sp_json *analyze_json_thr(const char *dir, const char *threshold, int want_status,
					struct sp_t_result *r)
{
	char *argv[] = {(char *)sp_t_build("bin/stepprof"), "analyze", (char *)dir, "--json",
			threshold ? "--threshold" : NULL, (char *)threshold, NULL};
	sp_t_run(r, argv, NULL, NULL, 60);
	cr_assert_eq(r->status, want_status, "exit %d, stderr: %s", r->status, r->err);
	struct sp_json *j = sp_json_parse(r->out);
	cr_assert_not_null(j, "not JSON: %s", r->out);
	return j;
}

static struct sp_json *analyze_json(const char *dir, int want_status, struct sp_t_result *r)
{
	return analyze_json_thr(dir, NULL, want_status, r);
}

/* ----------------------------------------------- 2. merging, the schema */

Test(analyze_cli, merges_processes_and_collector_file_on_one_timeline)
{
	char *dir = sp_t_tmpdir("analyze-merge");
	write_run(dir, 0);
	struct sp_t_result r;
	struct sp_json *j = analyze_json(dir, 0, &r);
	cr_expect_str_eq(sp_json_str(j, "schema"), "stepprof.analysis/2");
	cr_expect_str_eq(sp_json_str(j, "iteration_source"), "api");
	struct sp_json *procs = sp_json_get(j, "processes");
	cr_assert_not_null(procs);
	cr_expect_eq(procs->n, 3);
	int seen = 0;
	for (size_t i = 0; i < procs->n; i++) {
		struct sp_json *p = sp_json_at(procs, i);
		int pid = (int)sp_json_num(p, "pid", 0);
		const char *role = sp_json_str(p, "role");
		if (pid == TRAINER) {
			cr_expect_str_eq(role, "trainer");
			cr_expect_eq(sp_json_num(p, "rank", -9), 0);
			cr_expect_eq(sp_json_num(p, "records", 0), 1 + NITER * 7);
			seen |= 1;
		} else if (pid == WORKER) {
			cr_expect_str_eq(role, "worker");
			cr_expect_eq(sp_json_num(p, "records", 0), NITER * 9);
			seen |= 2;
		} else if (pid == GRANDCHILD) {
			/* seen only by the collector, which follows the job's process tree */
			cr_expect_str_eq(role, "worker");
			cr_expect_eq(sp_json_num(p, "records", 0), NITER * 2);
			seen |= 4;
		}
	}
	cr_expect_eq(seen, 7);
	cr_assert_eq(sp_json_num(j, "summary.iterations", 0), NITER);
	for (int i = 0; i < NITER; i++) {
		char key[64];
		snprintf(key, sizeof(key), "iterations.%d", i);
		struct sp_json *it = sp_json_path(j, key);
		cr_assert_not_null(it);
		uint64_t wall = (uint64_t)sp_json_num(it, "wall_ns", 0);
		cr_expect_eq((uint64_t)sp_json_num(it, "start_ns", 0), T0 + (uint64_t)i * ITER_NS);
		/* the last iteration ends with the trainer's last sync */
		cr_expect_eq(wall, i + 1 < NITER ? ITER_NS : 9500000);
		cr_expect_eq(sp_json_num(it, "breakdown_ns.input", 0), 4000000);
		cr_expect_eq(sp_json_num(it, "breakdown_ns.h2d", 0), 500000);
		cr_expect_eq(sp_json_num(it, "breakdown_ns.compute", 0), 5000000);
		cr_expect_eq(sp_json_num(it, "breakdown_ns.sync", 0), 0);
		cr_expect_eq((uint64_t)sum_of_cats(it, "breakdown_ns.", -1e18), wall);
		/* the worker's files, attributed by time; the collector's stats too */
		cr_expect_eq(sp_json_num(it, "files_opened", 0), 3);
		cr_expect_eq(sp_json_num(it, "metadata_ops", 0), 3 + 2);
		cr_expect_eq(sp_json_num(it, "bytes_read", 0), 3 * 65536);
		cr_expect_eq(sp_json_num(it, "h2d_bytes", 0), 1 << 20);
		cr_expect_eq(sp_json_num(it, "host_blocked_ns.input", 0), 4000000);
		cr_expect_eq(sp_json_num(it, "host_blocked_ns.sync", 0), 9500000 - 4015000);
	}
	cr_expect_str_eq(sp_json_str(j, "summary.bottleneck"), "input");
	struct sp_json *f = sp_json_get(j, "findings");
	cr_assert_not_null(f);
	cr_expect_eq(f->type, SPJ_ARR);
	cr_expect_eq(f->n, 0, "no finding on a run of pinned copies and few files");
	sp_json_free(j);
	sp_t_result_free(&r);

	/* the text report names the bottleneck in a sentence */
	char *argv[] = {(char *)sp_t_build("bin/stepprof"), "analyze", dir, NULL};
	sp_t_run(&r, argv, NULL, NULL, 60);
	cr_expect_eq(r.status, 0);
	cr_expect_not_null(strstr(r.out, "Bottleneck: input"), "%s", r.out);
	cr_expect_not_null(strstr(r.out, "iterations: 12 (source: api"), "%s", r.out);
	sp_t_result_free(&r);
	sp_t_rmrf(dir);
	free(dir);
}

/*
 * A collector's file holds many processes: the calls its header counts as lost
 * (a fork, exec or exit event that did not fit the ring, records a full disk
 * refused) are no process's, but they are the run's: `lost`, and "(N lost)".
 */
Test(analyze_cli, a_collector_files_header_losses_are_the_runs)
{
	char *dir = sp_t_tmpdir("analyze-bpflost");
	bpf_header_lost = 11;
	write_run(dir, 0);
	bpf_header_lost = 0;
	struct sp_t_result r;
	struct sp_json *j = analyze_json(dir, 0, &r);
	cr_expect_eq(sp_json_num(j, "summary.lost", -1), 11);
	struct sp_json *procs = sp_json_get(j, "processes");
	cr_assert_not_null(procs);
	for (size_t i = 0; i < procs->n; i++)
		cr_expect_eq(sp_json_num(sp_json_at(procs, i), "lost", -1), 0, "no process's");
	sp_json_free(j);
	sp_t_result_free(&r);
	char *argv[] = {(char *)sp_t_build("bin/stepprof"), "analyze", dir, NULL};
	sp_t_run(&r, argv, NULL, NULL, 60);
	cr_expect_eq(r.status, 0, "%s", r.err);
	cr_expect(strstr(r.out, "(11 lost)") != NULL, "%s", r.out);
	sp_t_result_free(&r);
	sp_t_rmrf(dir);
	free(dir);
}

Test(analyze_cli, help_lists_every_threshold_with_its_default)
{
	struct sp_t_result r;
	char *argv[] = {(char *)sp_t_build("bin/stepprof"), "analyze", "--help", NULL};
	sp_t_run(&r, argv, NULL, NULL, 30);
	cr_assert_eq(r.status, 0);
	static const char *const want[] = {"small_file_storm.min_metadata_ops",
					   "100",
					   "unpinned_copy.min_copies",
					   "alloc_fragmentation.flush_min_frees",
					   "memory_growth.min_r2",
					   "0.8",
					   "memory_growth.critical_horizon",
					   "--step-regex",
					   "ProfilerStep"};
	for (size_t i = 0; i < sizeof(want) / sizeof(want[0]); i++)
		cr_expect_not_null(strstr(r.out, want[i]), "--help lacks %s", want[i]);
	/* every threshold of findings.def, on a line with its default */
	for (int i = 0; i < AN_T__COUNT; i++) {
		const char *l = strstr(r.out, an_threshold_name[i]);
		cr_expect_not_null(l, "--help lacks %s", an_threshold_name[i]);
		if (l)
			cr_expect_eq(strtod(l + strlen(an_threshold_name[i]), NULL), an_threshold_default[i],
				     "%s: default %.40s", an_threshold_name[i], l + strlen(an_threshold_name[i]));
	}
	sp_t_result_free(&r);
}

Test(analyze_cli, threshold_override_changes_the_verdict)
{
	char *dir = sp_t_tmpdir("analyze-thr");
	write_run(dir, 0);
	struct sp_t_result r;
	struct sp_json *j = analyze_json_thr(dir, "small_file_storm.min_metadata_ops=5", 0, &r);
	cr_expect_str_eq(sp_json_str(j, "findings.0.kind"), "small_file_storm");
	cr_expect_eq(sp_json_num(j, "findings.0.first_iteration", -1), 0);
	cr_expect_eq(sp_json_num(j, "findings.0.last_iteration", -1), NITER - 1);
	sp_json_free(j);
	sp_t_result_free(&r);
	sp_t_rmrf(dir);
	free(dir);
}

/*
 * A trainer that synchronises every 12th iteration (a loss logged every 12
 * steps): the GPU spans of 12 iterations are written at that sync, after it in
 * its chunk, as the hooks read them back there. 24 iterations of 2 ms from step
 * marks: a 1 ms wait, a 5 us launch whose 600 us kernel runs at once. Each
 * iteration's kernel is its compute, the first ones' included, read from files
 * through the real reader's merge.
 */
Test(analyze_cli, gpu_spans_written_twelve_iterations_late_are_counted)
{
	char *dir = sp_t_tmpdir("analyze-latespans");
	char path[512];
	snprintf(path, sizeof(path), "%s/trainer.sptrace", dir);
	struct sp_tg *g = sp_tg_create(path, TRAINER, 1, -1);
	uint32_t kname = sp_tg_intern(g, "gemm");
	const uint64_t it_ns = 2000000;
	for (int i = 0; i < 24; i++) {
		uint64_t t = T0 + (uint64_t)i * it_ns;
		SP_TG_ADD(g, TRAINER, SP_K_STEP, SP_API_stepprof_step, t, t, {SP_F_VALUE, i});
		SP_TG_ADD(g, TRAINER, SP_K_LOADER_WAIT, SP_API_read, t, t + 1000000, {SP_F_FD_TYPE, SP_FDTYPE_PIPE},
			  {SP_F_BYTES, 8});
		SP_TG_ADD(g, TRAINER, SP_K_LAUNCH, SP_API_cudaLaunchKernel, t + 1000000, t + 1005000,
			  {SP_F_NAME, kname}, {SP_F_OP, i + 1});
		if (i % 12 != 11)
			continue;
		SP_TG_ADD(g, TRAINER, SP_K_SYNC, SP_API_cudaStreamSynchronize, t + 1990000, t + 2000000);
		for (int k = i - 11; k <= i; k++) {
			uint64_t b = T0 + (uint64_t)k * it_ns + 1005000;
			SP_TG_ADD(g, TRAINER, SP_K_GPU_SPAN, SP_API_cudaLaunchKernel, b, b + 600000, {SP_F_OP, k + 1});
		}
	}
	cr_assert_eq(sp_tg_finish(g), 0);
	struct sp_t_result r;
	struct sp_json *j = analyze_json(dir, 0, &r);
	cr_expect_str_eq(sp_json_str(j, "iteration_source"), "api");
	cr_assert_eq(sp_json_num(j, "summary.iterations", 0), 24);
	cr_expect_eq(sp_json_num(j, "summary.late_records", -1), 0);
	for (int i = 0; i < 24; i++) {
		char key[64];
		snprintf(key, sizeof(key), "iterations.%d", i);
		struct sp_json *it = sp_json_path(j, key);
		cr_assert_not_null(it);
		cr_expect_eq(sp_json_num(it, "wall_ns", 0), it_ns, "iteration %d", i);
		cr_expect_eq(sp_json_num(it, "breakdown_ns.compute", 0), 600000, "iteration %d: compute %.0f", i,
			     sp_json_num(it, "breakdown_ns.compute", 0));
		cr_expect_eq(sp_json_num(it, "breakdown_ns.input", 0), 1000000);
		cr_expect_eq(sp_json_num(it, "gpu_idle_ns", 0), it_ns - 600000);
	}
	sp_json_free(j);
	sp_t_result_free(&r);
	sp_t_rmrf(dir);
	free(dir);
}

/* Milliseconds per unit of the text report's durations. */
static double unit_ms(const char *u)
{
	return !strcmp(u, "s") ? 1e3 : !strcmp(u, "ms") ? 1 : !strcmp(u, "us") ? 1e-3 : 1e-6;
}

/*
 * The text report: the run, the six categories with median, p95 and
 * share, the bottleneck sentence, and the per-iteration table: the first and last
 * 10 iterations of a longer run, every one with --all. 25 iterations of 10 ms:
 * input 4 ms, h2d 0.5 ms, compute 5 ms, other 0.5 ms (the last ends at its sync).
 */
Test(analyze_cli, text_report_categories_and_iteration_table)
{
	char *dir = sp_t_tmpdir("analyze-text");
	run_iters = 25;
	write_run(dir, 0);
	run_iters = NITER;
	struct sp_t_result r;
	char *argv[] = {(char *)sp_t_build("bin/stepprof"), "analyze", dir, NULL};
	sp_t_run(&r, argv, NULL, NULL, 60);
	cr_assert_eq(r.status, 0, "%s", r.err);
	cr_expect_not_null(strstr(r.out, "3 processes (1 trainer, 2 workers, 0 other)"), "%s", r.out);
	cr_expect_not_null(strstr(r.out, "iterations: 25 (source: api"), "%s", r.out);
	/* category lines: name, median, p95, share of the whole wall time (25 x 10 ms - 0.5 ms) */
	static const struct {
		const char *name;
		double ms, share;
	} want[] = {{"input", 4, 100.0 * 25 * 4 / 249.5},
		    {"h2d", 0.5, 100.0 * 25 * 0.5 / 249.5},
		    {"compute", 5, 100.0 * 25 * 5 / 249.5},
		    {"d2h", 0, 0},
		    {"sync", 0, 0}};
	for (size_t k = 0; k < sizeof(want) / sizeof(want[0]); k++) {
		char key[32];
		snprintf(key, sizeof(key), "\n  %s ", want[k].name);
		const char *line = strstr(r.out, key);
		cr_assert_not_null(line, "no line for %s: %s", want[k].name, r.out);
		char name[16], mu[8], pu[8];
		double med, p95, share = -1;
		cr_assert_eq(sscanf(line, " %15s %lf %7s %lf %7s %lf%%", name, &med, mu, &p95, pu, &share), 6, "%.80s",
			     line);
		cr_expect(fabs(share - want[k].share) < 0.06, "%s share %.1f%%, want %.1f%%", name, share,
			  want[k].share);
		/* every iteration is alike: median = p95 = the timeline's duration */
		cr_expect(fabs(med * unit_ms(mu) - want[k].ms) < 1e-9 && fabs(p95 * unit_ms(pu) - want[k].ms) < 1e-9,
			  "%s: median %g %s, p95 %g %s, want %g ms", name, med, mu, p95, pu, want[k].ms);
	}
	cr_expect_not_null(strstr(r.out, "Bottleneck: input"), "%s", r.out);
	/* the table: rows 0-9 and 15-24, "..." between, then the same with --all */
	int rows = 0, seen[25] = {0};
	const char *t = strstr(r.out, "\nIterations");
	cr_assert_not_null(t);
	cr_expect_not_null(strstr(t, "first and last 10"));
	for (const char *l = strchr(t + 1, '\n'); l && l[1]; l = strchr(l + 1, '\n')) {
		int idx;
		char unit[8];
		if (sscanf(l + 1, " %d %*s%7s", &idx, unit) >= 1 && idx >= 0 && idx < 25) {
			seen[idx]++;
			rows++;
		}
	}
	cr_expect_eq(rows, 20, "%s", t);
	for (int i = 0; i < 25; i++)
		cr_expect_eq(seen[i], i < 10 || i >= 15, "row %d", i);
	cr_expect_not_null(strstr(t, "..."));
	sp_t_result_free(&r);

	char *all[] = {(char *)sp_t_build("bin/stepprof"), "analyze", "--all", dir, NULL};
	sp_t_run(&r, all, NULL, NULL, 60);
	cr_assert_eq(r.status, 0, "%s", r.err);
	t = strstr(r.out, "\nIterations");
	cr_assert_not_null(t);
	memset(seen, 0, sizeof(seen));
	rows = 0;
	for (const char *l = strchr(t + 1, '\n'); l && l[1]; l = strchr(l + 1, '\n')) {
		int idx;
		if (sscanf(l + 1, " %d", &idx) == 1 && idx >= 0 && idx < 25) {
			seen[idx]++;
			rows++;
		}
	}
	cr_expect_eq(rows, 25, "%s", t);
	for (int i = 0; i < 25; i++)
		cr_expect_eq(seen[i], 1, "row %d with --all", i);
	sp_t_result_free(&r);
	sp_t_rmrf(dir);
	free(dir);
}

/*
 * `make bench`'s analyzer figures (scripts/bench.d/50-analyzer.sh) on a small
 * trace: each printed with its budget and a verdict. The rates of such a short run
 * on a loaded machine are not judged here (make bench does that). What the bench
 * analyses must be a real analysis: gentrace's 1000 iterations are found, in each
 * marker mode, and every record it wrote is read.
 */
Test(analyze_cli, bench_figures_and_the_generated_trace_they_analyse, .timeout = 120)
{
	if (access("scripts/bench.d/50-analyzer.sh", R_OK) || access(sp_t_build("tests/bin/gentrace"), X_OK) ||
	    access("/usr/bin/time", X_OK))
		cr_skip_test("needs scripts/bench.d/50-analyzer.sh (run from the repository root), build/tests/bin/gentrace "
			     "and /usr/bin/time");
	char *argv[] = {"/bin/bash", "scripts/bench.d/50-analyzer.sh", NULL};
	char *env[] = {"ANALYZER_BENCH_RECORDS=1000000", NULL};
	struct sp_t_result r;
	sp_t_run(&r, argv, env, NULL, 100);
	cr_assert_eq(r.status, 0, "%s%s", r.out, r.err);
	static const char *const figs[][2] = {{"BENCH analyzer_throughput: ", "(budget >= 10)"},
					      {"BENCH analyzer_rss_ratio: ", "(budget <= 1.2)"}};
	for (int k = 0; k < 2; k++) {
		const char *l = strstr(r.out, figs[k][0]);
		cr_assert_not_null(l, "no %s in: %s", figs[k][0], r.out);
		char line[256];
		snprintf(line, sizeof(line), "%.*s", (int)strcspn(l, "\n"), l);
		cr_expect_gt(strtod(l + strlen(figs[k][0]), NULL), 0, "%s", line);
		cr_expect_not_null(strstr(line, figs[k][1]), "%s", line);
		cr_expect(strstr(line, " ok") || strstr(line, " OVER"), "%s", line);
	}
	sp_t_result_free(&r);

	static const char *const modes[][2] = {{"none", "auto"}, {"step", "api"}, {"nvtx", "nvtx"}};
	for (int m = 0; m < 3; m++) {
		char *dir = sp_t_tmpdir("analyze-gen");
		char tdir[512];
		snprintf(tdir, sizeof(tdir), "%s/t", dir);
		char *gargv[] = {
		    (char *)sp_t_build("tests/bin/gentrace"), tdir, "200000", "--markers", (char *)modes[m][0], NULL};
		sp_t_run(&r, gargv, NULL, NULL, 60);
		cr_assert_eq(r.status, 0, "%s", r.err);
		unsigned long long recs = 0, iters = 0;
		cr_assert_eq(sscanf(r.out, "gentrace: %llu records, %llu iterations", &recs, &iters), 2, "%s", r.out);
		sp_t_result_free(&r);
		struct sp_json *j = analyze_json(tdir, 0, &r);
		cr_expect_str_eq(sp_json_str(j, "iteration_source"), modes[m][1]);
		cr_expect_eq(sp_json_num(j, "summary.iterations", -1), (double)iters, "--markers %s", modes[m][0]);
		double read = 0;
		struct sp_json *procs = sp_json_get(j, "processes");
		for (size_t i = 0; procs && i < procs->n; i++)
			read += sp_json_num(sp_json_at(procs, i), "records", 0);
		cr_expect_eq(read, (double)recs, "--markers %s: %.0f records read of %llu", modes[m][0], read, recs);
		sp_json_free(j);
		sp_t_result_free(&r);
		sp_t_rmrf(dir);
		free(dir);
	}
}

/* Every member of the schema stepprof.analysis/2 is there, with its type. */
static void expect_member(struct sp_json *j, const char *path, int type)
{
	struct sp_json *m = sp_json_path(j, path);
	cr_expect_not_null(m, "no %s", path);
	if (m)
		cr_expect_eq(m->type, type, "%s: type %d, want %d", path, m->type, type);
}

Test(analyze_cli, json_has_every_member_of_the_schema)
{
	char *dir = sp_t_tmpdir("analyze-schema");
	write_run(dir, 0);
	struct sp_t_result r;
	struct sp_json *j = analyze_json_thr(dir, "small_file_storm.min_metadata_ops=5", 0, &r);
	static const char *const top_str[] = {"schema", "iteration_source", "summary.bottleneck"};
	for (size_t k = 0; k < sizeof(top_str) / sizeof(top_str[0]); k++)
		expect_member(j, top_str[k], SPJ_STR);
	static const char *const arrs[] = {"processes", "iterations", "findings", "findings.0.sites"};
	for (size_t k = 0; k < sizeof(arrs) / sizeof(arrs[0]); k++)
		expect_member(j, arrs[k], SPJ_ARR);
	static const char *const nums[] = {"processes.0.pid",
					   "processes.0.rank",
					   "processes.0.records",
					   "processes.0.lost",
					   "iterations.0.index",
					   "iterations.0.start_ns",
					   "iterations.0.end_ns",
					   "iterations.0.wall_ns",
					   "iterations.0.breakdown_ns.input",
					   "iterations.0.breakdown_ns.h2d",
					   "iterations.0.breakdown_ns.compute",
					   "iterations.0.breakdown_ns.comm",
					   "iterations.0.breakdown_ns.d2h",
					   "iterations.0.breakdown_ns.sync",
					   "iterations.0.breakdown_ns.other",
					   "iterations.0.host_blocked_ns.input",
					   "iterations.0.host_blocked_ns.h2d",
					   "iterations.0.host_blocked_ns.d2h",
					   "iterations.0.host_blocked_ns.sync",
					   "iterations.0.gpu_idle_ns",
					   "iterations.0.files_opened",
					   "iterations.0.metadata_ops",
					   "iterations.0.bytes_read",
					   "iterations.0.h2d_bytes",
					   "iterations.0.d2h_bytes",
					   "iterations.0.pageable_copies",
					   "iterations.0.device_bytes_peak",
					   "iterations.0.comm_overlapped_ns",
					   "summary.iterations",
					   "summary.wall_ns_median",
					   "summary.breakdown_fraction.input",
					   "summary.breakdown_fraction.h2d",
					   "summary.breakdown_fraction.compute",
					   "summary.breakdown_fraction.comm",
					   "summary.breakdown_fraction.d2h",
					   "summary.breakdown_fraction.sync",
					   "summary.breakdown_fraction.other",
					   "summary.device_bytes_peak",
					   "summary.comm_overlapped_ns",
					   "findings.0.first_iteration",
					   "findings.0.last_iteration"};
	for (size_t k = 0; k < sizeof(nums) / sizeof(nums[0]); k++)
		expect_member(j, nums[k], SPJ_NUM);
	expect_member(j, "processes.0.role", SPJ_STR);
	expect_member(j, "findings.0.kind", SPJ_STR);
	expect_member(j, "findings.0.severity", SPJ_STR);
	expect_member(j, "findings.0.advice", SPJ_STR);
	expect_member(j, "findings.0.evidence", SPJ_OBJ);
	/* the fractions are a partition of the run's wall time */
	double sum = sum_of_cats(j, "summary.breakdown_fraction.", -10);
	cr_expect(fabs(sum - 1) < 1e-6, "fractions sum to %.9f", sum);
	/* wall_ns_median of 11 iterations of 10 ms and one of 9.5 ms */
	cr_expect_eq(sp_json_num(j, "summary.wall_ns_median", -1), ITER_NS);
	sp_json_free(j);
	sp_t_result_free(&r);
	sp_t_rmrf(dir);
	free(dir);
}

/* --------------------------------------------------------- 3. bad input */

static void expect_error(char *const argv[], int status, const char *needle)
{
	struct sp_t_result r;
	sp_t_run(&r, argv, NULL, NULL, 30);
	cr_expect_eq(r.status, status, "exit %d (want %d), stderr: %s", r.status, status, r.err);
	cr_expect_not_null(strstr(r.err, needle), "stderr lacks '%s': %s", needle, r.err);
	cr_expect_eq(strncmp(r.err, "stepprof: ", 10), 0, "%s", r.err);
	/* one line */
	const char *nl = strchr(r.err, '\n');
	cr_expect(nl && nl[1] == 0, "not one line: %s", r.err);
	sp_t_result_free(&r);
}

Test(analyze_cli, missing_directory)
{
	char *argv[] = {(char *)sp_t_build("bin/stepprof"), "analyze", "/nonexistent/stepprof-dir", NULL};
	expect_error(argv, 2, "No such file or directory");
}

Test(analyze_cli, empty_directory_and_no_trace_files)
{
	char *dir = sp_t_tmpdir("analyze-empty");
	char *argv[] = {(char *)sp_t_build("bin/stepprof"), "analyze", dir, NULL};
	expect_error(argv, 2, "no stepprof trace files");
	char path[512];
	snprintf(path, sizeof(path), "%s/notes.txt", dir);
	FILE *f = fopen(path, "w");
	cr_assert(f);
	fputs("not a trace\n", f);
	fclose(f);
	expect_error(argv, 2, "no stepprof trace files");
	sp_t_rmrf(dir);
	free(dir);
}

/*
 * Degenerate runs give a report, exit 0 and no invented numbers: a file of a
 * process that wrote nothing; only a loader-like process reading 300 small
 * files (no CUDA, no marks: no iterations, no findings); one iteration (a
 * step mark, a 100 ns launch, its kernel and a sync: 5000 ns, 4800 of compute).
 */
static void degenerate_dir(const char *dir, int which)
{
	char path[512];
	snprintf(path, sizeof(path), "%s/p.sptrace", dir);
	struct sp_tg *g = sp_tg_create(path, TRAINER, 1, -1);
	if (which == 1) {
		uint32_t f = sp_tg_intern(g, "/data/small.bin");
		for (int i = 0; i < 300; i++) {
			uint64_t t = T0 + (uint64_t)i * 1000000;
			SP_TG_ADD(g, TRAINER, SP_K_OPEN, SP_API_open, t, t + 1000, {SP_F_PATH, f}, {SP_F_FD, 5});
			SP_TG_ADD(g, TRAINER, SP_K_READ, SP_API_read, t + 1000, t + 2000, {SP_F_FD, 5},
				  {SP_F_BYTES, 100}, {SP_F_FD_TYPE, SP_FDTYPE_FILE});
			SP_TG_ADD(g, TRAINER, SP_K_CLOSE, SP_API_close, t + 2000, t + 3000, {SP_F_FD, 5});
		}
	} else if (which == 2) {
		uint32_t k = sp_tg_intern(g, "gemm");
		SP_TG_ADD(g, TRAINER, SP_K_STEP, SP_API_stepprof_step, T0, T0, {SP_F_VALUE, 0});
		SP_TG_ADD(g, TRAINER, SP_K_LAUNCH, SP_API_cudaLaunchKernel, T0 + 100, T0 + 200, {SP_F_NAME, k},
			  {SP_F_OP, 1});
		SP_TG_ADD(g, TRAINER, SP_K_SYNC, SP_API_cudaStreamSynchronize, T0 + 200, T0 + 5000);
		SP_TG_ADD(g, TRAINER, SP_K_GPU_SPAN, 0, T0 + 200, T0 + 5000, {SP_F_OP, 1});
	}
	cr_assert_eq(sp_tg_finish(g), 0);
}

Test(analyze_cli, degenerate_runs_give_a_report)
{
	static const char *const source[] = {"none", "none", "api"};
	static const char *const bottleneck[] = {"none", "none", "compute"};
	static const double nit[] = {0, 0, 1}, nproc[] = {0, 1, 1}, nranks[] = {0, 1, 1};
	for (int which = 0; which < 3; which++) {
		char *dir = sp_t_tmpdir("analyze-degenerate");
		degenerate_dir(dir, which);
		struct sp_t_result r;
		struct sp_json *j = analyze_json(dir, 0, &r);
		cr_expect_str_eq(sp_json_str(j, "iteration_source"), source[which], "run %d", which);
		cr_expect_eq(sp_json_num(j, "summary.iterations", -1), nit[which], "run %d", which);
		cr_expect_str_eq(sp_json_str(j, "summary.bottleneck"), bottleneck[which], "run %d", which);
		cr_expect_eq(sp_json_get(j, "processes")->n, nproc[which], "run %d", which);
		cr_expect_eq(sp_json_get(j, "ranks")->n, nranks[which], "run %d", which);
		/* 300 opens of 100-byte files and no iterations: a storm over the whole run */
		cr_expect_eq(sp_json_get(j, "findings")->n, which == 1, "run %d", which);
		if (which == 1) {
			cr_expect_str_eq(sp_json_str(j, "findings.0.kind"), "small_file_storm");
			cr_expect_str_eq(sp_json_str(j, "findings.0.evidence.scope"), "whole_run");
			cr_expect_eq(sp_json_u64(j, "input.files_opened", 0), 300);
			cr_expect_eq(sp_json_u64(j, "input.bytes_read", 0), 300 * 100);
			cr_expect_eq(sp_json_u64(j, "input.processes.0.io_ns", 0), 300 * 3000);
			cr_expect_str_eq(sp_json_str(j, "input.top_directories.0.path"), "/data");
		}
		if (which == 2) {
			cr_expect_eq(sp_json_num(j, "iterations.0.wall_ns", 0), 5000);
			cr_expect_eq(sp_json_num(j, "iterations.0.breakdown_ns.compute", 0), 4800);
			cr_expect_eq(sp_json_num(j, "iterations.0.breakdown_ns.other", 0), 200);
		}
		sp_json_free(j);
		sp_t_result_free(&r);
		char *argv[] = {(char *)sp_t_build("bin/stepprof"), "analyze", dir, NULL};
		sp_t_run(&r, argv, NULL, NULL, 60);
		cr_expect_eq(r.status, 0, "run %d: text report, exit %d: %s", which, r.status, r.err);
		cr_expect_not_null(strstr(r.out, which < 2 ? "No iterations" : "Bottleneck: compute"), "%s", r.out);
		sp_t_result_free(&r);
		sp_t_rmrf(dir);
		free(dir);
	}
}

Test(analyze_cli, usage_errors)
{
	/* no operand, and no ./stepprof-* run in the working directory (the repository's root) */
	char *a1[] = {(char *)sp_t_build("bin/stepprof"), "analyze", NULL};
	expect_error(a1, 1, "no ./stepprof-* trace directory here");
	char *a2[] = {(char *)sp_t_build("bin/stepprof"), "analyze", "--bogus", "/tmp", NULL};
	expect_error(a2, 1, "unknown option");
	char *a3[] = {(char *)sp_t_build("bin/stepprof"), "analyze", "--threshold", "x.y=1", "/tmp", NULL};
	expect_error(a3, 1, "unknown threshold");
	char *dir = sp_t_tmpdir("analyze-re");
	write_run(dir, 0);
	char *a4[] = {(char *)sp_t_build("bin/stepprof"), "analyze", "--step-regex", "([", dir, NULL};
	expect_error(a4, 1, "--step-regex");
	/* an empty --html name is a usage error before any work, not a report then exit 4 */
	char *a5[] = {(char *)sp_t_build("bin/stepprof"), "analyze", "--html", "", dir, NULL};
	expect_error(a5, 1, "--html: empty file name");
	struct sp_t_result r;
	sp_t_run(&r, a5, NULL, NULL, 30);
	cr_expect_eq(r.outlen, 0, "no report for a usage error: %s", r.out);
	sp_t_result_free(&r);
	/* --csv writes to stdout, as --json and --html - do: one of them */
	char *a6[] = {(char *)sp_t_build("bin/stepprof"), "analyze", "--csv", "--json", dir, NULL};
	expect_error(a6, 1, "--csv: not with --json");
	char *a7[] = {(char *)sp_t_build("bin/stepprof"), "analyze", "--csv", "--html", "-", dir, NULL};
	expect_error(a7, 1, "--csv: not with --html -");
	sp_t_rmrf(dir);
	free(dir);
}

Test(analyze_cli, truncated_file_is_read_up_to_its_last_whole_record)
{
	char *dir = sp_t_tmpdir("analyze-trunc");
	write_run(dir, 1);
	struct sp_t_result r;
	struct sp_json *j = analyze_json(dir, 3, &r);
	cr_expect_not_null(strstr(r.err, "truncated"), "%s", r.err);
	cr_expect_not_null(strstr(r.err, "trainer.sptrace"), "%s", r.err);
	/* what is whole is analysed: the trainer's iterations up to the cut */
	double n = sp_json_num(j, "summary.iterations", -1);
	cr_expect(n >= 5 && n <= 6, "%g iterations", n);
	cr_expect_eq(sp_json_num(j, "iterations.0.breakdown_ns.compute", -1), 5000000);
	sp_json_free(j);
	sp_t_result_free(&r);
	sp_t_rmrf(dir);
	free(dir);
}

/* A whole run written into dir, and its file name opened with mode (to damage it in place). */
static FILE *write_run_open(const char *dir, const char *name, const char *mode)
{
	write_run(dir, 0);
	char path[512];
	snprintf(path, sizeof(path), "%s/%s", dir, name);
	FILE *f = fopen(path, mode);
	cr_assert(f, "%s: %s", path, strerror(errno));
	return f;
}

Test(analyze_cli, corrupt_records_are_skipped_with_a_warning)
{
	char *dir = sp_t_tmpdir("analyze-corrupt");
	FILE *f = write_run_open(dir, "worker.sptrace", "r+b");
	/* the ring starts after the header and the keep area: damage a few record heads */
	struct sp_file_header h;
	cr_assert_eq(fread(&h, sizeof(h), 1, f), 1);
	long ring = (long)(SP_HEADER_SIZE + h.keep_slots * SP_SLOT_SIZE);
	for (int k = 0; k < 5; k++) {
		fseek(f, ring + (long)(SP_CHUNK_HDR_SLOTS + 3 * k) * SP_SLOT_SIZE, SEEK_SET);
		fputc(0x7f, f); /* an unknown kind */
	}
	fclose(f);
	struct sp_t_result r;
	struct sp_json *j = analyze_json(dir, 3, &r);
	cr_expect_not_null(strstr(r.err, "corrupt"), "%s", r.err);
	cr_expect_eq(sp_json_num(j, "summary.iterations", -1), NITER);
	sp_json_free(j);
	sp_t_result_free(&r);
	sp_t_rmrf(dir);
	free(dir);
}

Test(analyze_cli, mixed_format_versions_are_refused)
{
	char *dir = sp_t_tmpdir("analyze-mixed");
	FILE *f = write_run_open(dir, "worker.sptrace", "r+b");
	uint16_t major = SP_VERSION_MAJOR + 1;
	fseek(f, 8, SEEK_SET);
	fwrite(&major, 2, 1, f);
	fclose(f);
	char *argv[] = {(char *)sp_t_build("bin/stepprof"), "analyze", dir, NULL};
	expect_error(argv, 2, "worker.sptrace");
	struct sp_t_result r;
	sp_t_run(&r, argv, NULL, NULL, 30);
	cr_expect_not_null(strstr(r.err, "version"), "%s", r.err);
	cr_expect_eq(r.outlen, 0, "no report on a partial set of files");
	sp_t_result_free(&r);
	sp_t_rmrf(dir);
	free(dir);
}

/*
 * Every byte is untrusted: 100 copies of the run with random bytes of the trainer's
 * file overwritten (fixed seed) never crash or hang the analysis; each gives a
 * report (0), a damage warning (3) or a refusal of a bad header (2).
 */
Test(analyze_cli, random_damage_never_crashes, .timeout = 120)
{
	char *dir = sp_t_tmpdir("analyze-fuzz");
	write_run(dir, 0);
	char path[512];
	snprintf(path, sizeof(path), "%s/trainer.sptrace", dir);
	FILE *f = fopen(path, "rb");
	cr_assert(f);
	fseek(f, 0, SEEK_END);
	long len = ftell(f);
	uint8_t *orig = malloc((size_t)len);
	fseek(f, 0, SEEK_SET);
	cr_assert_eq(fread(orig, 1, (size_t)len, f), (size_t)len);
	fclose(f);
	/* the bytes that matter: the header's first fields, the keep area's first strings, the first chunk */
	long ring = (long)(SP_HEADER_SIZE + ((struct sp_file_header *)orig)->keep_slots * SP_SLOT_SIZE);
	unsigned seed = 4242;
	for (int round = 0; round < 100; round++) {
		uint8_t *img = malloc((size_t)len);
		memcpy(img, orig, (size_t)len);
		for (int k = 0; k < 8; k++) {
			long where;
			switch (rand_r(&seed) % 3) {
			case 0:
				where = rand_r(&seed) % 256;
				break;
			case 1:
				where = SP_HEADER_SIZE + rand_r(&seed) % 256;
				break;
			default:
				where = ring + rand_r(&seed) % 4096;
			}
			img[where] = (uint8_t)rand_r(&seed);
		}
		f = fopen(path, "wb");
		cr_assert(f);
		cr_assert_eq(fwrite(img, 1, (size_t)len, f), (size_t)len);
		fclose(f);
		free(img);
		struct sp_t_result r;
		char *argv[] = {(char *)sp_t_build("bin/stepprof"), "analyze", "--json", dir, NULL};
		sp_t_run(&r, argv, NULL, NULL, 30);
		cr_expect(r.status == 0 || r.status == 2 || r.status == 3, "round %d: exit %d: %s", round, r.status,
			  r.err);
		if (r.status == 0 || r.status == 3) {
			struct sp_json *j = sp_json_parse(r.out);
			cr_expect_not_null(j, "round %d: not JSON", round);
			sp_json_free(j);
		}
		sp_t_result_free(&r);
	}
	free(orig);
	sp_t_rmrf(dir);
	free(dir);
}

/* ------------------------------------- 4. the bottleneck's threshold, trace strings */

#define SHARE_ITERS   10
#define SHARE_TRAINER 5100
#define SHARE_WORKER  5200

/*
 * nranks trainers (ranks 0.., pids 5100..) whose 10 ms iterations (stepprof_step) are
 * a 2.5 ms wait for a batch, during which a 10 us pageable H2D copy is made at call
 * site `site`, then a 7.5 ms kernel: compute is 75% of the wall time, input 24.9%,
 * h2d 0.1%. A worker of rank 0's (pid 5200) opens and reads three 64 KiB files in
 * directory `files` during each wait.
 */
static void write_share_run(const char *dir, int nranks, const char *cmd, const char *site, const char *files)
{
	char path[512];
	for (int r = 0; r < nranks; r++) {
		snprintf(path, sizeof(path), "%s/trainer%d.sptrace", dir, r);
		struct sp_tg_opts o = {.pid = SHARE_TRAINER + r, .ppid = 1, .rank = r, .cmdline = cmd};
		struct sp_tg *g = sp_tg_create_opts(path, &o);
		int32_t pid = SHARE_TRAINER + r;
		uint32_t kname = sp_tg_intern(g, "gemm"), s = sp_tg_intern(g, site);
		for (int i = 0; i <= SHARE_ITERS; i++) {
			uint64_t t = T0 + (uint64_t)i * ITER_NS;
			SP_TG_ADD(g, pid, SP_K_STEP, SP_API_stepprof_step, t, t, {SP_F_VALUE, i});
			if (i == SHARE_ITERS)
				break; /* the last step ends the last iteration */
			SP_TG_ADD(g, pid, SP_K_LOADER_WAIT, SP_API_read, t, t + 2490000, {SP_F_FD_TYPE, SP_FDTYPE_PIPE},
				  {SP_F_BYTES, 8});
			SP_TG_ADD(g, pid, SP_K_COPY, SP_API_cudaMemcpy, t + 2490000, t + 2495000,
				  {SP_F_DIRECTION, SP_DIR_H2D}, {SP_F_BYTES, 4096}, {SP_F_SITE, s},
				  {SP_F_HOST_MEMORY, SP_HOSTMEM_PAGEABLE});
			/* the kernel starts as its launch call returns (a kernel never starts before it is submitted) */
			SP_TG_ADD(g, pid, SP_K_LAUNCH, SP_API_cudaLaunchKernel, t + 2495000, t + 2500000,
				  {SP_F_NAME, kname}, {SP_F_OP, i + 1});
			SP_TG_ADD(g, pid, SP_K_SYNC, SP_API_cudaStreamSynchronize, t + 2500000, t + ITER_NS);
			SP_TG_ADD(g, pid, SP_K_GPU_SPAN, 0, t + 2500000, t + ITER_NS, {SP_F_OP, i + 1});
		}
		cr_assert_eq(sp_tg_finish(g), 0);
	}
	snprintf(path, sizeof(path), "%s/worker.sptrace", dir);
	struct sp_tg *g = sp_tg_create(path, SHARE_WORKER, SHARE_TRAINER, -1);
	char fpath[256];
	snprintf(fpath, sizeof(fpath), "%s/img.jpg", files);
	uint32_t file = sp_tg_intern(g, fpath);
	for (int i = 0; i < SHARE_ITERS; i++) {
		uint64_t t = T0 + (uint64_t)i * ITER_NS + 100000;
		for (int k = 0; k < 3; k++, t += 700000) {
			SP_TG_ADD(g, SHARE_WORKER, SP_K_OPEN, SP_API_open, t, t + 10000, {SP_F_PATH, file},
				  {SP_F_FD, 5});
			SP_TG_ADD(g, SHARE_WORKER, SP_K_READ, SP_API_read, t + 10000, t + 500000, {SP_F_FD, 5},
				  {SP_F_BYTES, 65536}, {SP_F_FD_TYPE, SP_FDTYPE_FILE});
			SP_TG_ADD(g, SHARE_WORKER, SP_K_CLOSE, SP_API_close, t + 500000, t + 510000, {SP_F_FD, 5});
		}
	}
	cr_assert_eq(sp_tg_finish(g), 0);
}

/* `stepprof analyze DIR [--threshold T] [more]` (text unless more says --json or --html -), exit 0. */
static void analyze_out(struct sp_t_result *r, const char *dir, const char *threshold, const char *more,
			const char *more2)
{
	char *argv[8] = {(char *)sp_t_build("bin/stepprof"), "analyze", (char *)dir};
	int k = 3;
	if (threshold) {
		argv[k++] = "--threshold";
		argv[k++] = (char *)threshold;
	}
	argv[k++] = (char *)more;
	argv[k++] = (char *)more2;
	argv[k] = NULL;
	sp_t_run(r, argv, NULL, NULL, 60);
	cr_assert_eq(r->status, 0, "exit %d, stderr: %s", r->status, r->err);
}

/*
 * docs/definitions.md: every threshold is overridable, the bottleneck's "compute under 80%
 * of the wall time" too. The workload computes 75% of each iteration: input by
 * default, compute with bottleneck.compute_share=0.7, in the summary, in each rank,
 * in the text and in the HTML. A value that is not a share is one line, exit 1.
 * It guards against bottleneck.compute_share being an unknown threshold.
 */
Test(analyze_cli, bottleneck_compute_share_is_a_threshold)
{
	char *dir = sp_t_tmpdir("analyze-bn");
	write_share_run(dir, 2, "python train.py", "train.py:12", "/data");
	struct sp_t_result r;
	struct sp_json *j = analyze_json_thr(dir, NULL, 0, &r);
	double comp = sp_json_num(j, "summary.breakdown_fraction.compute", -1);
	cr_assert(comp > 0.7499 && comp < 0.7501, "the workload computes 75%%: %f", comp);
	cr_expect_str_eq(sp_json_str(j, "summary.bottleneck"), "input");
	cr_expect_str_eq(sp_json_str(j, "ranks.0.bottleneck"), "input");
	cr_expect_str_eq(sp_json_str(j, "ranks.1.bottleneck"), "input");
	sp_json_free(j);
	sp_t_result_free(&r);

	j = analyze_json_thr(dir, "bottleneck.compute_share=0.7", 0, &r);
	cr_expect_str_eq(sp_json_str(j, "summary.bottleneck"), "compute");
	cr_expect_str_eq(sp_json_str(j, "ranks.0.bottleneck"), "compute");
	cr_expect_str_eq(sp_json_str(j, "ranks.1.bottleneck"), "compute");
	sp_json_free(j);
	sp_t_result_free(&r);

	analyze_out(&r, dir, "bottleneck.compute_share=0.7", NULL, NULL);
	cr_expect(strstr(r.out, "Bottleneck: compute (75% of wall time): the GPU computes at least 70% of the time"),
		  "%s", r.out);
	sp_t_result_free(&r);
	analyze_out(&r, dir, "bottleneck.compute_share=0.7", "--html", "-");
	cr_expect(strstr(r.out, "data-bottleneck=\"compute\""), "the HTML's bottleneck");
	sp_t_result_free(&r);
	analyze_out(&r, dir, NULL, NULL, NULL);
	cr_expect(strstr(r.out, "Bottleneck: input (25% of wall time)"), "%s", r.out);
	sp_t_result_free(&r);

	const char *bad[] = {"bottleneck.compute_share=80", "bottleneck.compute_share=x",
			     "bottleneck.compute_share=-1"};
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		char *argv[] = {
		    (char *)sp_t_build("bin/stepprof"), "analyze", "--threshold", (char *)bad[i], dir, NULL};
		expect_error(argv, 1, bad[i]);
	}
	sp_t_rmrf(dir);
	free(dir);
}

/*
 * The text report shows strings from the trace (a command line, a directory in the
 * evidence, a call site) with their control characters and bytes that are not UTF-8
 * as \xNN, as info and dump do: raw, they would reach the terminal (ESC [2J
 * clears it). The JSON escapes the C0 controls (and keeps the exact string), the
 * HTML shows them as \xNN too.
 */
#define EVIL                                                                                                           \
	"\x1b]0;owned\x07\x1b[2J\r\n\xc2\x9b"                                                                          \
	"31m\x7f\xff\xfe<end"
#define EVIL_SHOWN "\\x1b]0;owned\\x07\\x1b[2J\\x0d\\x0a\\xc2\\x9b31m\\x7f\\xff\\xfe<end"

/*
 * No byte of out that could act on a terminal: C0 but newline, DEL, C1, bytes that
 * are not UTF-8. c0_only: the C0 controls only (JSON escapes those; DEL and C1 are
 * valid JSON text as they are).
 */
static void expect_inert(const char *out, size_t n, const char *what, int c0_only)
{
	const unsigned char *o = (const unsigned char *)out;
	for (size_t i = 0; i < n; i++) {
		unsigned c = o[i];
		cr_expect(!(c < 0x20 && c != '\n') && (c0_only || (c != 0x7f && c != 0xff && c != 0xfe &&
								   !(c == 0xc2 && i + 1 < n && o[i + 1] < 0xa0))),
			  "%s: byte 0x%02x at %zu: %.200s", what, c, i, out + (i > 40 ? i - 40 : 0));
	}
}

Test(analyze_cli, trace_strings_in_the_report_cannot_drive_the_terminal)
{
	char *dir = sp_t_tmpdir("analyze-evil");
	write_share_run(dir, 1, "python " EVIL, "train.py " EVIL, "/data/" EVIL);
	struct sp_t_result r;
	analyze_out(&r, dir, "small_file_storm.min_metadata_ops=1", NULL, NULL);
	expect_inert(r.out, r.outlen, "text", 0);
	cr_expect(strstr(r.out, " python " EVIL_SHOWN "\n"), "the command line: %s", r.out);
	cr_expect(strstr(r.out, "top_directories=\"/data/" EVIL_SHOWN " (30 opens)\""), "the directory: %s", r.out);
	cr_expect(strstr(r.out, "    site: train.py " EVIL_SHOWN "\n"), "the call site: %s", r.out);
	sp_t_result_free(&r);

	analyze_out(&r, dir, "small_file_storm.min_metadata_ops=1", "--json", NULL);
	expect_inert(r.out, r.outlen, "JSON", 1);
	struct sp_json *j = sp_json_parse(r.out);
	cr_assert_not_null(j, "not JSON: %s", r.out);
	const char *cmd = sp_json_str(j, "processes.0.cmdline");
	cr_expect(cmd && !strncmp(cmd, "python \x1b]0;owned\x07\x1b[2J\r\n\xc2\x9b", 20), "the exact string: %s", cmd);
	sp_json_free(j);
	sp_t_result_free(&r);

	analyze_out(&r, dir, "small_file_storm.min_metadata_ops=1", "--html", "-");
	expect_inert(r.out, r.outlen, "HTML", 0);
	sp_t_result_free(&r);
	sp_t_rmrf(dir);
	free(dir);
}

/*
 * A literal backslash in a trace's string is shown doubled in the text report,
 * as info and dump show it: the text "\x1b" (four characters) in a command line
 * must not read as the escaped byte ESC. The JSON keeps the exact string.
 */
Test(analyze_cli, backslashes_in_the_text_report_are_escaped)
{
	char *dir = sp_t_tmpdir("analyze-bslash");
	write_share_run(dir, 1, "python C:\\x1b\\dir", "train.py \\x07", "/data/a\\b");
	struct sp_t_result r;
	analyze_out(&r, dir, "small_file_storm.min_metadata_ops=1", NULL, NULL);
	cr_expect(strstr(r.out, " python C:\\\\x1b\\\\dir\n"), "the command line: %s", r.out);
	cr_expect(strstr(r.out, "    site: train.py \\\\x07\n"), "the call site: %s", r.out);
	cr_expect(strstr(r.out, "top_directories=\"/data/a\\\\b (30 opens)\""), "the directory: %s", r.out);
	cr_expect(!strstr(r.out, "C:\\x1b\\dir"), "no backslash shown bare: %s", r.out);
	sp_t_result_free(&r);
	analyze_out(&r, dir, "small_file_storm.min_metadata_ops=1", "--json", NULL);
	struct sp_json *j = sp_json_parse(r.out);
	cr_assert_not_null(j, "not JSON: %s", r.out);
	cr_expect_str_eq(sp_json_str(j, "processes.0.cmdline"), "python C:\\x1b\\dir");
	sp_json_free(j);
	sp_t_result_free(&r);
	sp_t_rmrf(dir);
	free(dir);
}

/* ------------------------------------------------ a process that execs */

/*
 * A program that execs itself, as a pyenv shim does (`bash .../pyenv exec
 * python3 train.py`: bash, bash again, then python3, one pid): outer.sh execs
 * bash on inner.sh, which execs the trainer; each image reads its script or
 * its data, so each has its trace file. The process is named by what it ran
 * last, the trainer, with its first command line once beside it, not by
 * whichever file comes first in the directory ("/bin/bash DIR/inner.sh", the
 * middle image).
 */
Test(analyze_cli, a_process_that_execs_is_named_by_its_last_image, .timeout = 120)
{
	char *dir = sp_t_tmpdir("acexec");
	char trainer[PATH_MAX], lib[PATH_MAX], outer[600], inner[600], trace[600], data[600], text[PATH_MAX + 1400];
	cr_assert(realpath(sp_t_build("tests/bin/trainer"), trainer) && realpath(sp_t_build("lib/libstepprof.so"), lib));
	snprintf(outer, sizeof(outer), "%s/outer.sh", dir);
	snprintf(inner, sizeof(inner), "%s/inner.sh", dir);
	snprintf(trace, sizeof(trace), "%s/trace", dir);
	snprintf(data, sizeof(data), "%s/d", dir);
	snprintf(text, sizeof(text), "exec /bin/bash %s \"$@\"\n", inner);
	cr_assert_eq(sp_t_write_file(outer, text, strlen(text)), 0);
	snprintf(text, sizeof(text), "exec %s --iters 4 --data-dir %s\n", trainer, data);
	cr_assert_eq(sp_t_write_file(inner, text, strlen(text)), 0);
	/* what each image's command line is: the argv the test gave */
	char first[700], last[PATH_MAX + 700];
	snprintf(first, sizeof(first), "/bin/bash %s", outer);
	snprintf(last, sizeof(last), "%s --iters 4 --data-dir %s", trainer, data);

	char env_lib[PATH_MAX + 16], env_dir[700];
	snprintf(env_lib, sizeof(env_lib), "LD_PRELOAD=%s", lib);
	snprintf(env_dir, sizeof(env_dir), "STEPPROF_DIR=%s", trace);
	char *argv[] = {"/bin/bash", outer, NULL};
	char *env[] = {env_lib, env_dir, NULL};
	struct sp_t_result r;
	cr_assert_eq(sp_t_run(&r, argv, env, NULL, 100), 0, "%s", r.err);
	struct sp_json *truth = sp_json_parse(r.out);
	cr_assert_not_null(truth, "the trainer's ground truth: %s", r.out);
	int64_t pid = sp_json_i64(truth, "pid", -1);
	sp_json_free(truth);
	sp_t_result_free(&r);

	struct sp_json *j = analyze_json(trace, 0, &r);
	sp_t_result_free(&r);
	struct sp_json *procs = sp_json_get(j, "processes"), *p = NULL;
	for (size_t i = 0; procs && i < procs->n; i++)
		if (sp_json_i64(sp_json_at(procs, i), "pid", -1) == pid)
			p = sp_json_at(procs, i);
	cr_assert_not_null(p, "no process %ld", (long)pid);
	const char *cmd = sp_json_str(p, "cmdline"), *cmd0 = sp_json_str(p, "first_cmdline");
	/* a header holds 127 bytes of the command line */
	cr_expect(cmd && !strncmp(cmd, last, 127), "named by its last image: %s, not %s", last, cmd ? cmd : "(none)");
	cr_expect(cmd0 && !strcmp(cmd0, first), "its first image: %s, not %s", first, cmd0 ? cmd0 : "(none)");
	cr_expect_eq(sp_json_i64(p, "images", -1), 3, "outer.sh, inner.sh and the trainer");
	cr_expect_str_eq(sp_json_str(p, "role"), "trainer");
	sp_json_free(j);

	/* the text report says both, the first once; export names the process as analyze does */
	char *aargv[] = {(char *)sp_t_build("bin/stepprof"), "analyze", trace, NULL};
	cr_assert_eq(sp_t_run(&r, aargv, NULL, NULL, 60), 0, "%s", r.err);
	char want[1024];
	snprintf(want, sizeof(want), "(exec'd from %s, 3 images)", first);
	const char *line = strstr(r.out, want);
	cr_expect_not_null(line, "%s in:\n%s", want, r.out);
	sp_t_result_free(&r);
	char *eargv[] = {(char *)sp_t_build("bin/stepprof"), "export", "-o", "-", trace, NULL};
	cr_assert_eq(sp_t_run(&r, eargv, NULL, NULL, 60), 0, "%s", r.err);
	snprintf(want, sizeof(want), "\"process_name\",\"pid\":%ld,", (long)pid);
	const char *m = strstr(r.out, want);
	cr_assert_not_null(m, "no process_name of %ld", (long)pid);
	const char *nm = strstr(m, "\"name\":\"");
	cr_expect(nm && !strncmp(nm + 8, trainer, strlen(trainer)), "export names %ld: %.200s", (long)pid, m);
	sp_t_result_free(&r);
	sp_t_rmrf(dir);
	free(dir);
}

/*
 * --csv: a header line, then one row per iteration (every one, more than the
 * text's 20), each field the JSON's number for that iteration: the columns
 * named as the JSON's members, the breakdown's as <category>_ns.
 */
Test(analyze_cli, csv_rows_are_the_json_iterations)
{
	char *dir = sp_t_tmpdir("analyze-csv");
	run_iters = 25;
	write_run(dir, 0);
	run_iters = NITER;
	struct sp_t_result jr, cr;
	struct sp_json *j = analyze_json(dir, 0, &jr);
	char *argv[] = {(char *)sp_t_build("bin/stepprof"), "analyze", "--csv", dir, NULL};
	sp_t_run(&cr, argv, NULL, NULL, 60);
	cr_assert_eq(cr.status, 0, "exit %d: %s", cr.status, cr.err);
	struct sp_json *its = sp_json_get(j, "iterations");
	cr_assert(its && its->n == 25, "25 iterations in the JSON");
	char *save = NULL, *line = strtok_r(cr.out, "\n", &save);
	cr_assert_not_null(line);
	char *cols[32];
	size_t ncol = 0;
	for (char *s2 = NULL, *c = strtok_r(line, ",", &s2); c && ncol < 32; c = strtok_r(NULL, ",", &s2))
		cols[ncol++] = c;
	cr_assert_eq(ncol, 19, "19 columns in the header");
	cr_expect_str_eq(cols[0], "index");
	size_t rows = 0;
	for (line = strtok_r(NULL, "\n", &save); line; line = strtok_r(NULL, "\n", &save), rows++) {
		size_t k = 0;
		for (char *s2 = NULL, *c = strtok_r(line, ",", &s2); c; c = strtok_r(NULL, ",", &s2), k++) {
			cr_assert_lt(k, ncol, "row %zu has more fields than the header", rows);
			char path[96], *end;
			size_t len = strlen(cols[k]);
			int cat = k >= 4 && k < 11; /* input_ns .. other_ns */
			if (cat)
				snprintf(path, sizeof(path), "%zu.breakdown_ns.%.*s", rows, (int)(len - 3), cols[k]);
			else
				snprintf(path, sizeof(path), "%zu.%s", rows, cols[k]);
			unsigned long long v = strtoull(c, &end, 10);
			cr_expect(*end == 0 && end != c, "row %zu, %s: '%s' is not a number", rows, cols[k], c);
			cr_expect_eq(v, sp_json_u64(its, path, ~0ull), "row %zu, %s", rows, cols[k]);
		}
		cr_expect_eq(k, ncol, "row %zu: %zu fields", rows, k);
	}
	cr_expect_eq(rows, 25, "one row per iteration: %zu", rows);
	sp_json_free(j);
	sp_t_result_free(&jr);
	sp_t_result_free(&cr);
	sp_t_rmrf(dir);
	free(dir);
}
