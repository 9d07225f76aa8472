/*
 * test_analyze_ranks.c - `stepprof analyze` on a multi-rank job: two synthetic
 * trainers (docs/workloads.md) run at the same time under LD_PRELOAD with
 * RANK=0/1, LOCAL_RANK=0/1, WORLD_SIZE=2 into one STEPPROF_DIR, as torchrun
 * starts the ranks of a node: rank 0 compute-bound, rank 1 input-bound (4 loader
 * workers, which inherit RANK=1). Ground truth: each trainer's own JSON line.
 *   - ranks[] holds both ranks, each with its pid, iteration count, bottleneck and
 *     its six shares within ±3 points of that trainer's ground truth;
 *   - by default the main report is rank 0's (the lowest), with --rank 1 rank 1's:
 *     trainer_pid, shares, bottleneck, and files opened counted only for that rank
 *     (rank 1's loader workers do not count in rank 0's iterations);
 *   - the text report has the per-rank table, names the slower rank and says which
 *     rank is broken down;
 *   - --rank 5 (no such rank) is a usage error (exit 1) naming the ranks present;
 *   - a single-process run has a one-element ranks[] equal to its summary, and no
 *     per-rank table in the text;
 *   - processes of several files that share a pid (ranks on two nodes, or in two
 *     pid namespaces: markgen's files retagged as such) stay apart, each with its
 *     rank, records and steps; a program that execs itself stays one process;
 *   - a file whose process died before writing its header (empty, or zeros) is
 *     one line and exit 3, and the other files are still analysed.
 *
 * Divided into: 1. running the job, 2. the checks, 3. the tests, 4. processes of
 * several files sharing a pid, unreadable files.
 */
#include <criterion/criterion.h>
#include <dirent.h>
#include <fcntl.h>
#include <math.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "stepprof/trace.h"
#include "testlib.h"
#include "trainerlib.h"

/* ----------------------------------------------------- 1. running */

TestSuite(analyze_ranks, .fini = sp_t_remove_cur_dir);

static const char *const cats[] = {
#define SP_CATEGORY(id, name) name,
#include "stepprof/categories.def"
#undef SP_CATEGORY
};

/* Run `scenarios[k]` as rank k (k < n; n == 1: no RANK variables at all) at the
 * same time into <dir>/trace; truth[k] gets each trainer's JSON line. */
static char *run_job(int n, const char *const *scenarios, struct sp_json **truth)
{
	sp_t_cur_dir = sp_t_tmpdir("ranks");
	return sp_t_run_ranks(sp_t_cur_dir, "trace", n, scenarios, 20, truth);
}

/* stepprof analyze [--json] [extra] DIR: stdout, exit status in *status. */
static char *analyze(const char *tdir, int json, const char *extra, int *status, char **err)
{
	/* stepprof analyze [--json] [a1 a2] tdir NULL: seven at most */
	char *argv[7];
	int k = 0;
	argv[k++] = (char *)sp_t_build("bin/stepprof");
	argv[k++] = "analyze";
	if (json)
		argv[k++] = "--json";
	char a1[64] = "", a2[64] = "";
	if (extra) {
		sscanf(extra, "%63s %63s", a1, a2);
		argv[k++] = a1;
		argv[k++] = a2;
	}
	argv[k++] = (char *)tdir;
	argv[k] = NULL;
	struct sp_t_result r;
	sp_t_run(&r, argv, NULL, NULL, 120);
	*status = r.status;
	char *out = strdup(r.out ? r.out : "");
	if (err)
		*err = strdup(r.err ? r.err : "");
	sp_t_result_free(&r);
	return out;
}

static struct sp_json *analyze_json(const char *tdir, const char *extra)
{
	int st;
	char *err;
	char *out = analyze(tdir, 1, extra, &st, &err);
	cr_assert_eq(st, 0, "stepprof analyze --json %s: exit %d: %s", extra ? extra : "", st, err);
	struct sp_json *j = sp_json_parse(out);
	cr_assert_not_null(j, "not JSON: %s", out);
	free(out);
	free(err);
	return j;
}

/* --------------------------------------------------- 2. the checks */

/* j's member key is the JSON boolean v. */
static int is_bool(const struct sp_json *j, const char *key, int v)
{
	const struct sp_json *b = j ? sp_json_get(j, key) : NULL;
	return b && b->type == SPJ_BOOL && (b->num != 0) == (v != 0);
}

/* The entry of ranks[] with this rank, NULL when absent. */
static struct sp_json *rank_entry(struct sp_json *an, int rank)
{
	struct sp_json *rs = sp_json_get(an, "ranks");
	for (size_t i = 0; rs && i < rs->n; i++)
		if (sp_json_num(sp_json_at(rs, i), "rank", -2) == rank)
			return sp_json_at(rs, i);
	return NULL;
}

/* `x` (a ranks[] entry or the document's summary) against a trainer's ground truth: shares ±3 points. */
static void expect_shares(struct sp_json *x, const char *prefix, struct sp_json *truth, const char *what)
{
	for (int c = 0; c < (int)(sizeof(cats) / sizeof(cats[0])); c++) {
		char key[96], tkey[96];
		snprintf(key, sizeof(key), "%sbreakdown_fraction.%s", prefix, cats[c]);
		snprintf(tkey, sizeof(tkey), "summary.breakdown_fraction.%s", cats[c]);
		double got = sp_json_num(x, key, -1), want = sp_json_num(truth, tkey, -1);
		cr_expect(fabs(got - want) <= 0.03, "%s: %s share %.4f, ground truth %.4f (±0.03)", what, cats[c], got,
			  want);
	}
}

static int cmp_dbl(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;
	return (x > y) - (x < y);
}

/* The nearest-rank median of the trainer's iterations[].wall_ns (0 if none). */
static double truth_median(struct sp_json *truth)
{
	struct sp_json *its = sp_json_get(truth, "iterations");
	size_t n = its ? its->n : 0;
	if (!n)
		return 0;
	double *w = calloc(n, sizeof(*w));
	cr_assert_not_null(w);
	for (size_t i = 0; i < n; i++)
		w[i] = sp_json_num(sp_json_at(its, i), "wall_ns", 0);
	qsort(w, n, sizeof(*w), cmp_dbl);
	double m = w[(n + 1) / 2 - 1]; /* the smallest value with at least half at or below it */
	free(w);
	return m;
}

/* The main report is that of the trainer `truth` describes. */
static void expect_main(struct sp_json *an, struct sp_json *truth, const char *what)
{
	cr_expect_eq(sp_json_num(an, "summary.trainer_pid", -1), sp_json_num(truth, "pid", -2),
		     "%s: the breakdown is of pid %g, not %g", what, sp_json_num(an, "summary.trainer_pid", -1),
		     sp_json_num(truth, "pid", -2));
	cr_expect_eq(sp_json_num(an, "summary.iterations", -1), sp_json_num(truth, "totals.iterations", -2), "%s",
		     what);
	expect_shares(an, "summary.", truth, what);
	cr_expect_str_eq(sp_json_str(an, "summary.bottleneck"), sp_json_str(truth, "summary.bottleneck"), "%s", what);
	/* file opens across this rank's process tree only: rank 1's workers read 2560 files */
	double opened = 0;
	struct sp_json *its = sp_json_get(an, "iterations");
	for (size_t i = 0; its && i < its->n; i++)
		opened += sp_json_num(sp_json_at(its, i), "files_opened", 0);
	cr_expect_eq(opened, sp_json_num(truth, "totals.files_opened", -1), "%s: files opened %g, the trainer's %g",
		     what, opened, sp_json_num(truth, "totals.files_opened", -1));
}

/* ----------------------------------------------------- 3. the tests */

Test(analyze_ranks, two_ranks_each_with_its_own_breakdown, .timeout = 240)
{
	static const char *const sc[2] = {"compute-bound", "input-bound"};
	struct sp_json *truth[2];
	char *tdir = run_job(2, sc, truth);
	cr_assert_str_eq(sp_json_str(truth[0], "summary.bottleneck"), "compute");
	cr_assert_str_eq(sp_json_str(truth[1], "summary.bottleneck"), "input");

	struct sp_json *an = analyze_json(tdir, NULL);
	cr_expect_str_eq(sp_json_str(an, "schema"), "stepprof.analysis/2");
	struct sp_json *rs = sp_json_get(an, "ranks");
	cr_assert_not_null(rs, "no ranks[]");
	cr_expect_eq(rs->n, 2, "ranks[] has %zu entries, the job has 2 trainer processes", rs->n);
	for (int k = 0; k < 2; k++) {
		struct sp_json *r = rank_entry(an, k);
		cr_assert_not_null(r, "rank %d missing from ranks[]", k);
		char what[32];
		snprintf(what, sizeof(what), "ranks[] rank %d", k);
		cr_expect_eq(sp_json_num(r, "pid", -1), sp_json_num(truth[k], "pid", -2), "%s: pid", what);
		cr_expect_eq(sp_json_num(r, "local_rank", -2), k);
		cr_expect_eq(sp_json_num(r, "world_size", -2), 2);
		cr_expect_eq(sp_json_num(r, "iterations", -1), sp_json_num(truth[k], "totals.iterations", -2), "%s",
			     what);
		cr_expect_str_eq(sp_json_str(r, "bottleneck"), sp_json_str(truth[k], "summary.bottleneck"), "%s", what);
		expect_shares(r, "", truth[k], what);
		/*
		 * The median iteration time by the analyzer's definition (nearest rank,
		 * docs/analysis-json.md) over the trainer's own per-iteration walls, ±2%.
		 * NOTE: not the trainer's summary.wall_ns_median (the mean of the two middle
		 * values of 20): under load the 11th iteration can be 10% slower than the
		 * 10th, and the two definitions then differ by more than any bound worth keeping.
		 */
		double wm = sp_json_num(r, "wall_ns_median", -1), tm = truth_median(truth[k]);
		cr_expect(tm > 0 && fabs(wm - tm) <= 0.02 * tm, "%s: median wall %.0f, ground truth %.0f", what, wm, tm);
		cr_expect(is_bool(r, "selected", k == 0), "%s: selected should be %s", what, k == 0 ? "true" : "false");
	}
	/* default: the lowest rank is broken down */
	expect_main(an, truth[0], "default (rank 0)");
	sp_json_free(an);

	an = analyze_json(tdir, "--rank 1");
	expect_main(an, truth[1], "--rank 1");
	cr_expect(is_bool(rank_entry(an, 1), "selected", 1));
	cr_expect(is_bool(rank_entry(an, 0), "selected", 0));
	/* rank 1's loader workers: its small_file_storm; rank 0 reads 2 large files per iteration */
	struct sp_json *f = sp_json_get(an, "findings");
	int storm = 0;
	for (size_t i = 0; f && i < f->n; i++)
		storm |= !strcmp(sp_json_str(sp_json_at(f, i), "kind"), "small_file_storm");
	cr_expect(storm, "--rank 1: no small_file_storm finding");
	sp_json_free(an);

	/* the text: the table, and which rank the breakdown is */
	int st;
	char *out = analyze(tdir, 0, "--rank 1", &st, NULL);
	cr_expect_eq(st, 0);
	cr_expect_not_null(strstr(out, "Ranks: 2 trainer processes"), "no per-rank table: %s", out);
	char sel[96];
	snprintf(sel, sizeof(sel), "(*: rank 1, pid %.0f)", sp_json_num(truth[1], "pid", -1));
	cr_expect_not_null(strstr(out, sel), "the text does not say rank 1 is broken down (%s): %s", sel, out);
	char tline[96];
	snprintf(tline, sizeof(tline), "training thread %.0f of pid %.0f", sp_json_num(truth[1], "pid", -1),
		 sp_json_num(truth[1], "pid", -1));
	cr_expect_not_null(strstr(out, tline), "--rank 1: %s", out);
	/* the slower rank by the trainers' own medians (44 ms compute-bound vs 5.5 ms) is named */
	int slow =
	    sp_json_num(truth[1], "summary.wall_ns_median", 0) > sp_json_num(truth[0], "summary.wall_ns_median", 0);
	char sline[96];
	snprintf(sline, sizeof(sline), "slowest median wall: rank %d (pid %.0f)", slow,
		 sp_json_num(truth[slow], "pid", -1));
	cr_expect_not_null(strstr(out, sline), "no '%s': %s", sline, out);
	free(out);

	char *err;
	out = analyze(tdir, 0, "--rank 5", &st, &err);
	cr_expect_eq(st, 1, "--rank 5: exit %d, want 1 (usage)", st);
	cr_expect_not_null(strstr(err, "--rank 5: no process has this rank (ranks: 0 1)"), "stderr: %s", err);
	free(out);
	free(err);

	for (int k = 0; k < 2; k++)
		sp_json_free(truth[k]);
	free(tdir);
	sp_t_remove_cur_dir();
}

Test(analyze_ranks, single_process_one_rank_entry_no_table, .timeout = 120)
{
	/*
	 * A scenario with a clear bottleneck (h2d ~75%): sync-heavy sits at compute
	 * ~0.80, the bottleneck rule's threshold, so its name flips from run to run.
	 */
	static const char *const sc[1] = {"pageable-h2d-bound"};
	struct sp_json *truth[1];
	char *tdir = run_job(1, sc, truth);
	struct sp_json *an = analyze_json(tdir, NULL);
	struct sp_json *rs = sp_json_get(an, "ranks");
	cr_assert_not_null(rs, "no ranks[]");
	cr_assert_eq(rs->n, 1, "ranks[] of a single process: %zu entries", rs->n);
	struct sp_json *r = sp_json_at(rs, 0);
	cr_expect_eq(sp_json_num(r, "rank", 0), -1, "no RANK: rank -1");
	cr_expect_eq(sp_json_num(r, "pid", -1), sp_json_num(truth[0], "pid", -2));
	cr_expect(is_bool(r, "selected", 1));
	cr_expect_eq(sp_json_num(r, "iterations", -1), sp_json_num(truth[0], "totals.iterations", -2));
	expect_shares(r, "", truth[0], "single process");
	expect_main(an, truth[0], "single process");
	sp_json_free(an);
	int st;
	char *out = analyze(tdir, 0, NULL, &st, NULL);
	cr_expect_eq(st, 0);
	cr_expect_null(strstr(out, "Ranks:"), "a per-rank table for one process: %s", out);
	free(out);
	/* --rank on a job without ranks: a usage error that says there are none */
	char *err;
	out = analyze(tdir, 0, "--rank 0", &st, &err);
	cr_expect_eq(st, 1);
	cr_expect_not_null(strstr(err, "(ranks: none)"), "stderr: %s", err);
	free(out);
	free(err);
	sp_json_free(truth[0]);
	free(tdir);
	sp_t_remove_cur_dir();
}

/* -------------------------------- 4. processes of several files sharing a pid */

/*
 * markgen (docs/workloads.md) under the preload into dir, with RANK=rank and
 * WORLD_SIZE=2 (rank < 0: neither): its marks and steps are the ground truth.
 * Returns its stdout (malloc'd).
 */
static char *run_markgen(const char *dir, int rank, const char *args)
{
	char pre[600], d[600], rk[32], *argv[32], *save;
	snprintf(pre, sizeof(pre), "LD_PRELOAD=%s", sp_t_build("lib/libstepprof.so"));
	snprintf(d, sizeof(d), "STEPPROF_DIR=%s", dir);
	snprintf(rk, sizeof(rk), "RANK=%d", rank);
	/*
	 * Ranks started apart (as on two nodes) are one job by the run id it gives them
	 * all (docs/cli.md, "Runs"). No CPU time samples: the tests count its records,
	 * the marks and steps it made, and the exit's sample would be one more.
	 */
	char *env[] = {pre, d, rank < 0 ? "RANK=" : rk, rank < 0 ? "WORLD_SIZE=" : "WORLD_SIZE=2",
		       "STEPPROF_RUN_ID=stepprof-test-job", "STEPPROF_CPU_SAMPLES=0", NULL};
	char *copy = strdup(args);
	int a = 0;
	argv[a++] = (char *)sp_t_build("tests/bin/markgen");
	for (char *w = strtok_r(copy, " ", &save); w && a < 31; w = strtok_r(NULL, " ", &save))
		argv[a++] = w;
	argv[a] = NULL;
	struct sp_t_result r;
	cr_assert_eq(sp_t_run(&r, argv, env, NULL, 60), 0, "markgen %s: %s", args, r.err);
	char *out = strdup(r.out ? r.out : "");
	sp_t_result_free(&r);
	free(copy);
	return out;
}

/* run_markgen, then the path of the one trace file it wrote (malloc'd). */
static char *markgen_file(const char *dir, int rank, const char *args)
{
	free(run_markgen(dir, rank, args));
	DIR *dd = opendir(dir);
	cr_assert_not_null(dd, "%s", dir);
	struct dirent *e;
	char *path = NULL;
	int n = 0;
	while ((e = readdir(dd)))
		if (e->d_name[0] != '.' && ++n == 1) {
			path = malloc(strlen(dir) + strlen(e->d_name) + 2);
			sprintf(path, "%s/%s", dir, e->d_name);
		}
	closedir(dd);
	cr_assert_eq(n, 1, "markgen %s wrote %d files into %s", args, n, dir);
	return path;
}

/*
 * Make the trace file `path` look written by process `pid` (ppid `ppid`) on host
 * `host` (NULL: its own): the header and every chunk's pid, what a process of
 * another node or pid namespace with the same number writes. Then move it to `to`.
 */
static void retag(const char *path, const char *host, int32_t pid, int32_t ppid, const char *to)
{
	int fd = open(path, O_RDWR);
	cr_assert(fd >= 0, "%s", path);
	struct sp_file_header h;
	cr_assert_eq(pread(fd, &h, sizeof(h), 0), (ssize_t)sizeof(h));
	if (host) {
		memset(h.host, 0, sizeof(h.host));
		snprintf(h.host, sizeof(h.host), "%s", host);
	}
	h.pid = pid;
	h.ppid = ppid;
	cr_assert_eq(pwrite(fd, &h, sizeof(h), 0), (ssize_t)sizeof(h));
	uint64_t ring = h.header_size + h.keep_slots * SP_SLOT_SIZE;
	uint64_t n = h.ring_next_seq < h.ring_chunks ? h.ring_next_seq : h.ring_chunks;
	for (uint64_t k = 0; k < n; k++) {
		struct sp_chunk_header c;
		off_t off = (off_t)(ring + k * h.chunk_size);
		cr_assert_eq(pread(fd, &c, sizeof(c), off), (ssize_t)sizeof(c));
		if (c.magic != SP_CHUNK_MAGIC)
			continue;
		c.pid = pid;
		cr_assert_eq(pwrite(fd, &c, sizeof(c), off), (ssize_t)sizeof(c));
	}
	close(fd);
	cr_assert_eq(rename(path, to), 0, "%s -> %s", path, to);
}

/* The process of processes[] whose rank is `rank`, and how many have it. */
static struct sp_json *proc_of_rank(const struct sp_json *an, int rank, int *count)
{
	struct sp_json *ps = sp_json_get(an, "processes"), *found = NULL;
	*count = 0;
	for (size_t i = 0; ps && i < ps->n; i++)
		if (sp_json_num(sp_json_at(ps, i), "rank", -9) == rank) {
			found = sp_json_at(ps, i);
			++*count;
		}
	return found;
}

static int32_t header_pid(const char *path, char host[64], int32_t *ppid)
{
	struct sp_file_header h;
	int fd = open(path, O_RDONLY);
	cr_assert(fd >= 0 && pread(fd, &h, sizeof(h), 0) == (ssize_t)sizeof(h), "%s", path);
	close(fd);
	memcpy(host, h.host, 64);
	*ppid = h.ppid;
	return h.pid;
}

/*
 * Two ranks in one directory whose processes have the same pid: rank 0 and
 * rank 1 on two nodes (other = 1), or in two pid namespaces of one host
 * (other = 0: `unshare --pid`, containers; rank 1's pid-1 process has ppid 0).
 * Each must stay a process of its own: its rank, its records (marks + steps
 * it was asked for), its iterations (steps - 1). Made one process, they would
 * put 2 ranks' records and steps under one pid, one rank gone.
 */
static void two_ranks_one_pid(int other_host)
{
	sp_t_cur_dir = sp_t_tmpdir("samepid");
	char da[600], db[600], to[700];
	snprintf(da, sizeof(da), "%s/job", sp_t_cur_dir);
	snprintf(db, sizeof(db), "%s/other", sp_t_cur_dir);
	char *fa = markgen_file(da, 0, "-n 50 -s 10 -m rank0");
	char *fb = markgen_file(db, 1, "-n 80 -s 15 -m rank1");
	char host[64];
	int32_t ppid, pid = header_pid(fa, host, &ppid);
	snprintf(to, sizeof(to), "%s/%s.%d%s.sptrace", da, other_host ? "stepprof-test-node-b" : host, pid,
		 other_host ? "" : ".1");
	retag(fb, other_host ? "stepprof-test-node-b" : NULL, pid, other_host ? ppid : 0, to);
	struct sp_json *an = analyze_json(da, NULL);
	struct sp_json *ps = sp_json_get(an, "processes");
	cr_assert_not_null(ps);
	cr_expect_eq(ps->n, 2, "two processes of pid %d: %zu in processes[]", pid, ps->n);
	int n0, n1;
	struct sp_json *p0 = proc_of_rank(an, 0, &n0), *p1 = proc_of_rank(an, 1, &n1);
	cr_assert(p0 && p1 && n0 == 1 && n1 == 1, "rank 0: %d processes, rank 1: %d", n0, n1);
	cr_expect_eq(sp_json_num(p0, "records", -1), 50 + 10, "rank 0's records");
	cr_expect_eq(sp_json_num(p1, "records", -1), 80 + 15, "rank 1's records");
	cr_expect_neq(sp_json_num(p0, "pid", -1), sp_json_num(p1, "pid", -1), "one pid for two processes");
	/* one keeps its pid, the other is in the next pid space (n << 22, as stepprof export numbers hosts) */
	double a = sp_json_num(p0, "pid", -1), b = sp_json_num(p1, "pid", -1);
	cr_expect((a == pid && b == pid + (1 << 22)) || (b == pid && a == pid + (1 << 22)),
		  "pids %.0f and %.0f for two processes of pid %d", a, b, pid);
	sp_json_free(an);
	an = analyze_json(da, "--rank 0");
	cr_expect_eq(sp_json_num(an, "summary.iterations", -1), 10 - 1, "rank 0: 10 steps");
	sp_json_free(an);
	an = analyze_json(da, "--rank 1");
	cr_expect_eq(sp_json_num(an, "summary.iterations", -1), 15 - 1, "rank 1: 15 steps");
	sp_json_free(an);
	free(fa);
	free(fb);
	sp_t_remove_cur_dir();
}

Test(analyze_ranks, ranks_of_two_hosts_with_one_pid_stay_apart, .timeout = 120)
{
	two_ranks_one_pid(1);
}

Test(analyze_ranks, ranks_of_two_pid_namespaces_with_one_pid_stay_apart, .timeout = 120)
{
	two_ranks_one_pid(0);
}

/* A program that execs itself keeps its pid: its two files stay one process (not renumbered). */
Test(analyze_ranks, a_program_that_execs_itself_stays_one_process, .timeout = 120)
{
	sp_t_cur_dir = sp_t_tmpdir("execself");
	char d[600];
	snprintf(d, sizeof(d), "%s/job", sp_t_cur_dir);
	char *out = run_markgen(d, -1, "-n 30 -s 4 -x 5");
	long pid = atol(strstr(out, "pid=") + 4);
	free(out);
	struct sp_json *an = analyze_json(d, NULL);
	struct sp_json *ps = sp_json_get(an, "processes");
	cr_assert_not_null(ps);
	cr_expect_eq(ps->n, 1, "one process that exec'd itself: %zu in processes[]", ps->n);
	cr_expect_eq(sp_json_num(sp_json_at(ps, 0), "pid", -1), pid);
	/* 30 marks and 4 steps, then 5 marks "exec" in the new image */
	cr_expect_eq(sp_json_num(sp_json_at(ps, 0), "records", -1), 30 + 4 + 5);
	sp_json_free(an);
	sp_t_remove_cur_dir();
}

/*
 * A directory with files whose processes died while creating them (killed between
 * the file's creation and its header): an empty *.sptrace, and one of 1 MiB of
 * zeros (after its ftruncate). They hold no record: each gets its one line, the
 * exit status is 3 (damaged input), and the other process is still analysed
 * (not exit 2 and nothing but the error line, the whole job unreadable).
 */
Test(analyze_ranks, a_file_killed_before_its_header_leaves_the_others_analysed, .timeout = 120)
{
	sp_t_cur_dir = sp_t_tmpdir("badfile");
	char d[600], empty[700], zeros[700];
	snprintf(d, sizeof(d), "%s/job", sp_t_cur_dir);
	char *fa = markgen_file(d, -1, "-n 40 -s 6");
	snprintf(empty, sizeof(empty), "%s/node.1.sptrace", d);
	cr_assert_eq(sp_t_write_file(empty, "", 0), 0);
	snprintf(zeros, sizeof(zeros), "%s/node.2.sptrace", d);
	int fd = open(zeros, O_CREAT | O_EXCL | O_WRONLY, 0600);
	cr_assert(fd >= 0 && ftruncate(fd, 1 << 20) == 0, "%s", zeros);
	close(fd);
	int st;
	char *err;
	char *out = analyze(d, 1, NULL, &st, &err);
	cr_expect_eq(st, 3, "exit status %d (stderr: %s)", st, err);
	cr_expect_not_null(strstr(err, "node.1.sptrace: truncated"), "no line for the empty file: %s", err);
	cr_expect_not_null(strstr(err, "node.2.sptrace: truncated"), "no line for the file of zeros: %s", err);
	int lines = 0;
	for (const char *p = err; *p; p++)
		lines += *p == '\n';
	cr_expect_eq(lines, 2, "one line per file without a header: %s", err);
	struct sp_json *an = sp_json_parse(out);
	cr_assert_not_null(an, "no analysis of the readable file: stdout \"%s\"", out);
	struct sp_json *ps = sp_json_get(an, "processes");
	cr_assert(ps && ps->n == 1, "processes of the readable file: %zu", ps ? ps->n : 0);
	cr_expect_eq(sp_json_num(sp_json_at(ps, 0), "records", -1), 40 + 6);
	cr_expect_eq(sp_json_num(an, "summary.iterations", -1), 6 - 1);
	sp_json_free(an);
	free(out);
	free(err);
	free(fa);
	sp_t_remove_cur_dir();
}
