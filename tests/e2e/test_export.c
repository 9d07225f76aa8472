/*
 * test_export.c - `stepprof export` end to end: a real capture of the synthetic
 * trainer on the simulated GPU (its own JSON is the ground truth), the output
 * file and stdout, bad input, damaged input, and memory that does not grow with
 * the trace.
 *
 *   1. helpers: run stepprof export, parse the document, count events
 *   2. a real capture: launches, copies, steps, GPU spans joined, memory counter,
 *      modelled kernel slices under STEPPROF_KERNEL_TIMING=auto
 *   3. command line: default file, -o FILE, -o -, errors and exit codes, a failed write
 *   4. bounded memory (gentrace traces of 20 k and 400 k records)
 */
#include <criterion/criterion.h>
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "testlib.h"
#include "tracegen.h"
#include "trainerlib.h"

/* ----------------------------------------------------------- 1. helpers */

static int export_run(struct sp_t_result *res, const char *a1, const char *a2, const char *a3, const char *a4)
{
	char *argv[] = {
	    (char *)sp_t_build("bin/stepprof"), "export", (char *)a1, (char *)a2, (char *)a3, (char *)a4, NULL};
	return sp_t_run(res, argv, NULL, NULL, 120);
}

static size_t lines_of(const char *s)
{
	size_t n = 0;
	for (; *s; s++)
		n += *s == '\n';
	return n;
}

static const char *s_of(const struct sp_json *e, const char *k)
{
	const char *s = sp_json_str(e, k);
	return s ? s : "";
}

/* Events of phase ph whose key equals val (any when key is NULL). */
static size_t count(const struct sp_json *doc, const char *ph, const char *key, const char *val)
{
	const struct sp_json *ev = sp_json_get(doc, "traceEvents");
	size_t n = 0;
	for (size_t i = 0; ev && i < ev->n; i++)
		if (!strcmp(s_of(&ev->kids[i], "ph"), ph) && (!key || !strcmp(s_of(&ev->kids[i], key), val)))
			n++;
	return n;
}

/* Events of phase ph whose name begins with prefix. */
static size_t count_prefix(const struct sp_json *doc, const char *ph, const char *prefix)
{
	const struct sp_json *ev = sp_json_get(doc, "traceEvents");
	size_t n = 0;
	for (size_t i = 0; ev && i < ev->n; i++)
		n += !strcmp(s_of(&ev->kids[i], "ph"), ph) &&
		     !strncmp(s_of(&ev->kids[i], "name"), prefix, strlen(prefix));
	return n;
}

/* GPU slices: on the GPU track's pseudo thread (tids from 2^31), without a category */
static size_t count_gpu(const struct sp_json *doc)
{
	const struct sp_json *ev = sp_json_get(doc, "traceEvents");
	size_t n = 0;
	for (size_t i = 0; ev && i < ev->n; i++) {
		const struct sp_json *e = &ev->kids[i];
		if (!strcmp(s_of(e, "ph"), "X") && sp_json_u64(e, "tid", 0) >= 0x80000000ull &&
		    strncmp(s_of(e, "name"), "iteration ", 10)) {
			cr_expect_null(sp_json_get(e, "cat"), "%s", s_of(e, "name"));
			n++;
		}
	}
	return n;
}

/* GPU slices (flow_in) whose bind_id a call's slice (flow_out) carries. */
static size_t flows_bound(const struct sp_json *doc)
{
	const struct sp_json *ev = sp_json_get(doc, "traceEvents");
	size_t n = 0;
	for (size_t i = 0; ev && i < ev->n; i++) {
		const struct sp_json *in = &ev->kids[i];
		if (!sp_json_get(in, "flow_in"))
			continue;
		uint64_t id = sp_json_u64(in, "bind_id", 0);
		for (size_t k = 0; k < ev->n; k++)
			if (sp_json_get(&ev->kids[k], "flow_out") && sp_json_u64(&ev->kids[k], "bind_id", 1) == id) {
				n++;
				break;
			}
	}
	return n;
}

static struct sp_json *load(const char *path)
{
	char *text = sp_t_read_file(path, NULL);
	cr_assert_not_null(text, "%s was not written", path);
	struct sp_json *j = sp_json_parse(text);
	cr_assert_not_null(j, "%s is not JSON", path);
	free(text);
	return j;
}

/* ------------------------------------------------------- 2. real capture */

Test(export_cli, a_trainer_capture_shows_its_launches_copies_and_gpu_spans, .timeout = 180)
{
	const char *lib = sp_t_build("lib/libstepprof.so");
	cr_assert(access(lib, R_OK) == 0, "%s is not built", lib);
	char *dir = sp_t_tmpdir("export");
	char pre[512], sd[600], tdir[512], out[600];
	snprintf(pre, sizeof(pre), "LD_PRELOAD=%s", lib);
	snprintf(tdir, sizeof(tdir), "%s/trace", dir);
	snprintf(sd, sizeof(sd), "STEPPROF_DIR=%s", tdir);
	char *env[] = {pre, sd, "NVTX_INJECTION64_PATH=", NULL};
	char *argv[] = {
	    (char *)sp_t_build("tests/bin/trainer"), "--scenario", "clean", "--iters", "3", "--markers", "step", NULL};
	struct sp_t_result tr;
	cr_assert_eq(sp_t_run(&tr, argv, env, NULL, 120), 0, "trainer: %s", tr.err);
	struct sp_json *truth = sp_json_parse(tr.out);
	cr_assert_not_null(truth, "trainer output: %s", tr.out);
	uint64_t launches = sp_json_u64(truth, "totals.launches", 0), copies = sp_json_u64(truth, "totals.copies", 0);
	cr_assert(launches > 0 && copies > 0);

	struct sp_t_result r;
	cr_assert_eq(export_run(&r, tdir, NULL, NULL, NULL), 0, "export: %s", r.err);
	snprintf(out, sizeof(out), "%s/trace.perfetto.json", tdir);
	cr_expect(strstr(r.out, out), "stdout names the file: %s", r.out);
	cr_expect_eq(r.errlen, 0, "stderr: %s", r.err);
	struct sp_json *j = load(out);

	/* every call of the trainer is a slice, each step an instant */
	cr_expect_eq(count_prefix(j, "X", "cudaLaunchKernel ") + count_prefix(j, "X", "cuLaunchKernel "), launches,
		     "launches, named by their kernel");
	cr_expect_eq(count(j, "X", "cat", "copy"), copies);
	cr_expect_eq(count_prefix(j, "i", "step "), 3);
	cr_expect_eq(count(j, "i", "name", "step 0") + count(j, "i", "name", "step 1"), 2);
	cr_expect_geq(count_prefix(j, "X", "read "), 1, "the loader workers' reads, named with their path");
	/* the GPU track: kernels by name, all joined to their calls, with their arrows */
	uint64_t spans = sp_json_u64(j, "otherData.gpu_spans", 0);
	cr_expect_gt(spans, 0);
	cr_expect_leq(spans, launches + copies);
	cr_expect_eq(sp_json_u64(j, "otherData.gpu_spans_unjoined", 1), 0);
	cr_expect_eq(count_gpu(j), spans);
	cr_expect_gt(count(j, "X", "name", "trainer_kernel"), 0, "kernel spans are named by the kernel");
	/* each GPU slice's arrow: its bind_id is on a call's slice (flow_out) too */
	cr_expect_eq(flows_bound(j), spans);
	cr_expect_eq(count(j, "f", NULL, NULL) + count(j, "s", NULL, NULL), 0, "arrows are bound on the slices");
	cr_expect_eq(count(j, "M", "args.name", "GPU 0"), 1);
	/* live device memory, and the trainer named by its command line */
	cr_expect_gt(count(j, "C", "name", "GPU 0 memory"), 0);
	const struct sp_json *ev = sp_json_get(j, "traceEvents");
	int named = 0;
	for (size_t i = 0; i < ev->n; i++)
		named |= !strcmp(s_of(&ev->kids[i], "name"), "process_name") &&
			 strstr(s_of(&ev->kids[i], "args.name"), "trainer --scenario clean");
	cr_expect(named, "no process named by the trainer's command line");

	sp_t_trainer_run_free(truth, j, &tr, &r);
	sp_t_rmrf(dir);
	free(dir);
}

/*
 * The GPU track under STEPPROF_KERNEL_TIMING: each launch of the trainer (its
 * own count, the ground truth) has one kernel slice, joined to it by the
 * arrow's bind_id; under auto most are modelled ("modelled": true), placed on
 * the lanes of the measured ones without overlapping; under all none are.
 */
struct gpu_count {
	size_t launches; /* launch calls' slices in the document */
	size_t kernels;	 /* GPU slices bound to one of them */
	size_t modelled; /* of which "modelled": true */
	size_t twice;	 /* launches with more than one kernel slice */
	size_t overlaps; /* slices that overlap the one before them on their lane without nesting */
	size_t foreign;	 /* modelled slices on a lane without a measured kernel slice */
};

static int cmp_u64(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
	return x < y ? -1 : x > y;
}

static int is_gpu_slice(const struct sp_json *e)
{
	return !strcmp(s_of(e, "ph"), "X") && sp_json_u64(e, "tid", 0) >= 0x80000000ull &&
	       strncmp(s_of(e, "name"), "iteration ", 10);
}

static int is_modelled(const struct sp_json *e)
{
	const struct sp_json *m = sp_json_path(e, "args.modelled");
	return m && m->type == SPJ_BOOL && m->num;
}

static struct gpu_count gpu_count(const struct sp_json *doc)
{
	const struct sp_json *ev = sp_json_get(doc, "traceEvents");
	struct gpu_count c = {0};
	uint64_t *ids = calloc(ev->n + 1, sizeof(*ids)), *seen = calloc(ev->n + 1, sizeof(*seen));
	uint64_t *lanes = calloc(ev->n + 1, sizeof(*lanes)); /* tids of measured kernel slices */
	cr_assert(ids && seen && lanes);
	size_t nl = 0, ns = 0, nlanes = 0;
	for (size_t i = 0; i < ev->n; i++) {
		const struct sp_json *e = &ev->kids[i];
		if (!strcmp(s_of(e, "ph"), "X") && sp_json_get(e, "flow_out") &&
		    (!strncmp(s_of(e, "name"), "cudaLaunchKernel ", 17) ||
		     !strncmp(s_of(e, "name"), "cuLaunchKernel ", 15)))
			ids[nl++] = sp_json_u64(e, "bind_id", 0);
	}
	c.launches = nl;
	qsort(ids, nl, sizeof(*ids), cmp_u64);
	for (size_t i = 0; i < ev->n; i++) {
		const struct sp_json *e = &ev->kids[i];
		uint64_t id = sp_json_u64(e, "bind_id", 0);
		if (!is_gpu_slice(e) || !sp_json_get(e, "flow_in") || !bsearch(&id, ids, nl, sizeof(*ids), cmp_u64))
			continue;
		c.kernels++;
		seen[ns++] = id;
		if (is_modelled(e))
			c.modelled++;
		else
			lanes[nlanes++] = sp_json_u64(e, "tid", 0);
	}
	qsort(seen, ns, sizeof(*seen), cmp_u64);
	for (size_t i = 1; i < ns; i++)
		c.twice += seen[i] == seen[i - 1];
	qsort(lanes, nlanes, sizeof(*lanes), cmp_u64);
	/* per lane, in document order (a lane is written in begin order): each slice nests in or follows the last */
	for (size_t i = 0; i < ev->n; i++) {
		const struct sp_json *e = &ev->kids[i];
		if (!is_gpu_slice(e))
			continue;
		uint64_t tid = sp_json_u64(e, "tid", 0);
		if (is_modelled(e) && !bsearch(&tid, lanes, nlanes, sizeof(*lanes), cmp_u64))
			c.foreign++;
		double b = sp_json_num(e, "ts", 0), d = sp_json_num(e, "dur", 0);
		for (size_t k = i; k-- > 0;) {
			const struct sp_json *p = &ev->kids[k];
			if (!is_gpu_slice(p) || sp_json_u64(p, "tid", 0) != tid)
				continue;
			double pb = sp_json_num(p, "ts", 0), pe = pb + sp_json_num(p, "dur", 0);
			/* 1 ns of slack: ts and dur are printed as microseconds with three decimals */
			c.overlaps += b < pe - 0.001 && b + d > pe + 0.001;
			break;
		}
	}
	free(ids);
	free(seen);
	free(lanes);
	return c;
}

static void export_kernels(const char *scenario, const char *timing, struct gpu_count *c, uint64_t *launches,
			   uint64_t *stat_modelled)
{
	char *dir = sp_t_tmpdir("export");
	char tdir[512], out[600], env_t[64];
	snprintf(tdir, sizeof(tdir), "%s/trace", dir);
	snprintf(env_t, sizeof(env_t), "STEPPROF_KERNEL_TIMING=%s", timing);
	char *env[] = {env_t, "NVTX_INJECTION64_PATH=", NULL};
	char *args[] = {"--scenario", (char *)scenario, "--iters", "4", "--markers", "step", NULL};
	struct sp_t_result tr, r;
	sp_t_run_trainer_env(&tr, tdir, args, env);
	struct sp_json *truth = sp_t_parse_last_line(tr.out);
	cr_assert_not_null(truth, "trainer output: %s", tr.out);
	*launches = sp_json_u64(truth, "totals.launches", 0);
	cr_assert_gt(*launches, 0);
	snprintf(out, sizeof(out), "%s/x.json", dir);
	cr_assert_eq(export_run(&r, "-o", out, tdir, NULL), 0, "export: %s", r.err);
	struct sp_json *j = load(out);
	*c = gpu_count(j);
	*stat_modelled = sp_json_u64(j, "otherData.gpu_spans_modelled", UINT64_MAX);
	sp_t_note("export (%s, %s): %llu launches, %zu kernel slices, %zu modelled, %zu measured", scenario, timing,
		  (unsigned long long)*launches, c->kernels, c->modelled, c->kernels - c->modelled);
	cr_expect_eq(c->launches, *launches, "%s: every launch call is a slice", scenario);
	cr_expect_eq(c->twice, 0, "%s, %s: %zu launches with two kernel slices", scenario, timing, c->twice);
	cr_expect_eq(c->overlaps, 0, "%s, %s: %zu slices overlap on a lane", scenario, timing, c->overlaps);
	if (c->foreign)
		sp_t_note("export (%s, %s): %zu modelled slices moved to a lane of their own", scenario, timing,
			  c->foreign);
	cr_expect_eq(*stat_modelled, c->modelled, "otherData.gpu_spans_modelled");
	sp_t_trainer_run_free(truth, j, &tr, &r);
	sp_t_rmrf(dir);
	free(dir);
}

Test(export_cli, under_auto_timing_every_launch_has_a_kernel_slice_most_modelled, .timeout = 240)
{
	static const char *const scenarios[] = {"launch-bound", "gpu-bound"};
	for (size_t k = 0; k < sizeof(scenarios) / sizeof(scenarios[0]); k++) {
		struct gpu_count c;
		uint64_t launches, st;
		export_kernels(scenarios[k], "auto", &c, &launches, &st);
		/* a kernel never sampled cannot be placed: a few at most (the trainer's kernels are all sampled) */
		cr_expect_leq(c.kernels, launches, "%s", scenarios[k]);
		cr_expect_geq(c.kernels, launches - launches / 50, "%s: %zu kernel slices for %llu launches",
			      scenarios[k], c.kernels, (unsigned long long)launches);
		cr_expect_gt(c.modelled, c.kernels / 2, "%s: %zu of %zu kernel slices modelled", scenarios[k],
			     c.modelled, c.kernels);
		cr_expect_lt(c.modelled, c.kernels, "%s: some launches are measured", scenarios[k]);
		/*
		 * On the measured slices' lane: all but the few the model places over a
		 * measured span of their stream (a run pulled back to fit its anchor,
		 * past the work before it), which the lanes then move aside.
		 */
		cr_expect_leq(c.foreign, c.modelled / 10, "%s: %zu of %zu modelled slices on a lane of their own",
			      scenarios[k], c.foreign, c.modelled);
	}
}

Test(export_cli, under_all_timing_no_kernel_slice_is_modelled, .timeout = 120)
{
	struct gpu_count c;
	uint64_t launches, st;
	export_kernels("launch-bound", "all", &c, &launches, &st);
	cr_expect_eq(c.kernels, launches);
	cr_expect_eq(c.modelled, 0);
	cr_expect_eq(st, 0);
}

/* ------------------------------------------------------- 3. command line */

/* A fresh directory (returned) holding a trace directory made by gentrace: its path into tdir unless NULL. */
static char *gen(const char *records, char tdir[512])
{
	char *dir = sp_t_tmpdir("export");
	char t[512];
	if (!tdir)
		tdir = t;
	snprintf(tdir, 512, "%s/t", dir);
	char *argv[] = {(char *)sp_t_build("tests/bin/gentrace"), tdir, (char *)records, "--iters", "50", NULL};
	struct sp_t_result r;
	cr_assert_eq(sp_t_run(&r, argv, NULL, NULL, 120), 0, "gentrace: %s", r.err);
	sp_t_result_free(&r);
	return dir;
}

Test(export_cli, output_to_a_file_or_stdout, .timeout = 60)
{
	char tdir[512], out[600];
	char *dir = gen("2000", tdir);
	snprintf(out, sizeof(out), "%s/x.json", dir);
	struct sp_t_result a, b;
	cr_assert_eq(export_run(&a, "--perfetto", "-o", out, tdir), 0, "%s", a.err);
	cr_assert_eq(export_run(&b, "-o", "-", tdir, NULL), 0, "%s", b.err);
	struct sp_json *fj = load(out), *sj = sp_json_parse(b.out);
	cr_assert_not_null(sj, "stdout is not JSON");
	cr_expect_eq(b.errlen, 0);
	cr_expect_eq(sp_json_u64(fj, "otherData.records", 0), 2000);
	cr_expect_eq(sp_json_get(fj, "traceEvents")->n, sp_json_get(sj, "traceEvents")->n);
	/* no temporary file left beside it, nothing written into the trace directory */
	char tmp[700];
	snprintf(tmp, sizeof(tmp), "%s/trace.perfetto.json", tdir);
	cr_expect_neq(access(tmp, F_OK), 0);
	sp_json_free(fj);
	sp_json_free(sj);
	sp_t_result_free(&a);
	sp_t_result_free(&b);
	sp_t_rmrf(dir);
	free(dir);
}

Test(export_cli, bad_input_is_one_line_and_a_nonzero_exit, .timeout = 60)
{
	char *dir = sp_t_tmpdir("export");
	char foreign[512], empty[512], out[600];
	snprintf(foreign, sizeof(foreign), "%s/notes.txt", dir);
	snprintf(empty, sizeof(empty), "%s/empty", dir);
	cr_assert_eq(sp_t_write_file(foreign, "just some notes\n", 16), 0);
	cr_assert_eq(mkdir(empty, 0700), 0);
	struct sp_t_result r;

	cr_expect_eq(export_run(&r, "/nonexistent/stepprof-dir", NULL, NULL, NULL), 2);
	cr_expect_eq(lines_of(r.err), 1, "%s", r.err);
	cr_expect(strstr(r.err, "stepprof: /nonexistent/stepprof-dir: "), "%s", r.err);
	sp_t_result_free(&r);

	cr_expect_eq(export_run(&r, foreign, NULL, NULL, NULL), 2);
	cr_expect_eq(lines_of(r.err), 1, "%s", r.err);
	cr_expect(strstr(r.err, "notes.txt: not a stepprof trace"), "%s", r.err);
	snprintf(out, sizeof(out), "%s.perfetto.json", foreign);
	cr_expect_neq(access(out, F_OK), 0, "nothing is written for nothing readable");
	sp_t_result_free(&r);

	cr_expect_eq(export_run(&r, empty, NULL, NULL, NULL), 2);
	cr_expect(strstr(r.err, "no stepprof trace files"), "%s", r.err);
	sp_t_result_free(&r);

	cr_expect_eq(export_run(&r, NULL, NULL, NULL, NULL), 1);
	cr_expect_eq(lines_of(r.err), 1, "%s", r.err);
	sp_t_result_free(&r);
	cr_expect_eq(export_run(&r, "--bogus", dir, NULL, NULL), 1);
	cr_expect_eq(lines_of(r.err), 1, "%s", r.err);
	sp_t_result_free(&r);
	cr_expect_eq(export_run(&r, "--from", "1s", dir, NULL), 1);
	cr_expect(strstr(r.err, "--from 1s: not a number of seconds"), "%s", r.err);
	sp_t_result_free(&r);
	const char *not_seconds[] = {"0x10", " 1", "1 ", "", "1e", "nan", "-inf", "1.5s"};
	for (size_t i = 0; i < sizeof(not_seconds) / sizeof(not_seconds[0]); i++) {
		char want[64];
		snprintf(want, sizeof(want), "--to %s: not a number of seconds", not_seconds[i]);
		cr_expect_eq(export_run(&r, "--to", not_seconds[i], dir, NULL), 1, "--to '%s'", not_seconds[i]);
		cr_expect(strstr(r.err, want), "%s", r.err);
		cr_expect_eq(lines_of(r.err), 1, "%s", r.err);
		sp_t_result_free(&r);
	}
	cr_expect_eq(export_run(&r, "--from=2", "--to=1.5", dir, NULL), 1);
	cr_expect(strstr(r.err, "empty window"), "%s", r.err);
	sp_t_result_free(&r);

	sp_t_rmrf(dir);
	free(dir);

	/* an output that cannot be written: exit 4, one line */
	char tdir[512];
	char *g = gen("1000", tdir);
	cr_expect_eq(export_run(&r, "-o", "/nonexistent/dir/out.json", tdir, NULL), 4);
	cr_expect_eq(lines_of(r.err), 1, "%s", r.err);
	cr_expect(strstr(r.err, "stepprof: /nonexistent/dir/out.json: cannot write"), "%s", r.err);
	sp_t_result_free(&r);
	sp_t_rmrf(g);
	free(g);
}

/*
 * An operand that cannot be read (missing, a directory without traces) is one line
 * each and exit 2, and the other operands are still exported (docs/export.md), into
 * the default file of the first operand that exists: one bad operand must not leave
 * nothing written.
 */
Test(export_cli, an_unreadable_operand_leaves_the_others_exported, .timeout = 60)
{
	char tdir[512], empty[600], missing[600], out[700];
	char *dir = gen("1000", tdir);
	snprintf(empty, sizeof(empty), "%s/empty", dir);
	snprintf(missing, sizeof(missing), "%s/missing", dir);
	cr_assert_eq(mkdir(empty, 0700), 0);
	struct sp_t_result r;
	cr_expect_eq(export_run(&r, missing, tdir, empty, NULL), 2, "%s", r.err);
	cr_expect_eq(lines_of(r.err), 2, "%s", r.err);
	cr_expect(strstr(r.err, "missing: No such file or directory"), "%s", r.err);
	cr_expect(strstr(r.err, "empty: no stepprof trace files"), "%s", r.err);
	sp_t_result_free(&r);
	snprintf(out, sizeof(out), "%s/trace.perfetto.json", tdir);
	struct sp_json *j = load(out);
	cr_expect_eq(sp_json_u64(j, "otherData.records", 0), 1000, "gentrace wrote 1000 records");
	sp_json_free(j);
	snprintf(out, sizeof(out), "%s/x.json", dir);
	cr_expect_eq(export_run(&r, "-o", out, tdir, missing), 2, "%s", r.err);
	cr_expect_eq(lines_of(r.err), 1, "%s", r.err);
	sp_t_result_free(&r);
	j = load(out);
	cr_expect_eq(sp_json_u64(j, "otherData.records", 0), 1000);
	sp_json_free(j);
	sp_t_rmrf(dir);
	free(dir);
}

/*
 * A write that fails mid-document (a file size limit, a full disk) is one line naming
 * the file and the reason, exit 4, and no file left under the name nor a temporary one
 * beside it; not "stepprof: cannot write the trace", which says neither which file
 * nor why.
 */
Test(export_cli, a_failed_write_names_the_file_and_the_reason, .timeout = 60)
{
	char tdir[512], out[600];
	char *dir = gen("20000", tdir); /* a document of some MiB: the limit is met mid-write */
	snprintf(out, sizeof(out), "%s/x.json", dir);
	char *sb = (char *)sp_t_build("bin/stepprof");
	/* a 100-block file size limit, SIGXFSZ ignored (it survives the exec): write(2) fails with EFBIG */
	const char *sh = "ulimit -f 100 && trap '' XFSZ && exec \"$0\" export -o \"$1\" \"$2\"";
	char *argv[] = {"/bin/sh", "-c", (char *)sh, sb, out, tdir, NULL};
	struct sp_t_result r;
	cr_assert_eq(sp_t_run(&r, argv, NULL, NULL, 60), 4, "stderr: %s", r.err);
	char want[700];
	snprintf(want, sizeof(want), "stepprof: %s: cannot write: %s\n", out, strerror(EFBIG));
	cr_expect_str_eq(r.err, want);
	cr_expect_neq(access(out, F_OK), 0, "no half document under the name");
	sp_t_result_free(&r);
	char *ls[] = {"/bin/sh", "-c", "ls \"$0\"", dir, NULL};
	cr_assert_eq(sp_t_run(&r, ls, NULL, NULL, 10), 0);
	cr_expect_str_eq(r.out, "t\n", "nothing left beside it: %s", r.out);
	sp_t_result_free(&r);

	/* a full disk: a device is written in place */
	cr_assert_eq(export_run(&r, "-o", "/dev/full", tdir, NULL), 4, "stderr: %s", r.err);
	snprintf(want, sizeof(want), "stepprof: /dev/full: cannot write: %s\n", strerror(ENOSPC));
	cr_expect_str_eq(r.err, want);
	sp_t_result_free(&r);
	free(sb);
	sp_t_rmrf(dir);
	free(dir);
}

/*
 * A damaged file's times can be anything up to 2^64-1: past 2^63 the document's
 * arithmetic overflowed int64 (undefined behaviour; `make sanitize` aborts on it).
 * The sane records keep their exact times, the others are pinned at the end of the
 * timeline, and a GPU span keeps its own length, so no slice is negative.
 */
Test(export_cli, timestamps_past_2_63_neither_overflow_nor_go_negative, .timeout = 60)
{
	char *dir = sp_t_tmpdir("export");
	char file[600];
	snprintf(file, sizeof(file), "%s/h.9.sptrace", dir);
	const uint64_t t0 = 1000000000000ull, far = 0x8000000000000000ull;
	struct sp_tg_opts o = {.pid = 9, .ppid = 1, .rank = -1, .start_mono_ns = 1000000000ull};
	struct sp_tg *g = sp_tg_create_opts(file, &o);
	uint32_t nm = sp_tg_intern(g, "sane");
	SP_TG_ADD(g, 9, SP_K_MARK, SP_API_stepprof_mark, t0, t0, {SP_F_NAME, nm});
	SP_TG_ADD(g, 9, SP_K_COPY, 0, t0 + 1000, t0 + 3000, {SP_F_BYTES, 4096}, {SP_F_OP, 7},
		  {SP_F_DIRECTION, SP_DIR_H2D});
	SP_TG_ADD(g, 9, SP_K_GPU_SPAN, 0, far - 100, far + 900, {SP_F_OP, 7});
	SP_TG_ADD(g, 9, SP_K_STEP, SP_API_stepprof_step, far + 5, far + 5, {SP_F_VALUE, 1});
	cr_assert_eq(sp_tg_finish(g), 0);

	struct sp_t_result r;
	cr_assert_eq(export_run(&r, "-o", "-", file, NULL), 0, "stderr: %s", r.err);
	struct sp_json *doc = sp_json_parse(r.out);
	cr_assert_not_null(doc, "not JSON: %s", r.out);
	const struct sp_json *ev = sp_json_get(doc, "traceEvents");
	int seen_sane = 0, seen_gpu = 0;
	for (size_t i = 0; ev && i < ev->n; i++) {
		const struct sp_json *e = &ev->kids[i];
		const char *ph = s_of(e, "ph"), *name = s_of(e, "name");
		double ts = sp_json_num(e, "ts", -1);
		cr_expect_geq(ts, 0, "%s %s at ts %f", ph, name, ts);
		if (!strcmp(ph, "X"))
			cr_expect_geq(sp_json_num(e, "dur", -1), 0, "%s: negative dur", name);
		if (!strcmp(name, "sane")) {
			seen_sane = 1;
			cr_expect_eq(ts, (double)(t0 - 1000000000ull) / 1000, "the sane mark moved: %f", ts);
		}
		if (!strcmp(ph, "X") && sp_json_get(e, "flow_in")) {
			seen_gpu = 1;
			cr_expect_eq(sp_json_num(e, "dur", -1), 1.0, "the span lasted 1000 ns");
		}
	}
	cr_expect(seen_sane && seen_gpu, "sane mark %d, GPU slice %d", seen_sane, seen_gpu);
	sp_json_free(doc);
	sp_t_result_free(&r);
	sp_t_rmrf(dir);
	free(dir);
}

Test(export_cli, a_truncated_file_exports_what_is_whole_with_exit_3, .timeout = 60)
{
	char *dir = gen("5000", NULL);
	char file[600], out[600];
	snprintf(file, sizeof(file), "%s/t/trainer.sptrace", dir);
	snprintf(out, sizeof(out), "%s/cut.json", dir);
	struct stat st;
	cr_assert_eq(stat(file, &st), 0);
	cr_assert_eq(truncate(file, st.st_size - 40000), 0);
	struct sp_t_result r;
	cr_expect_eq(export_run(&r, "-o", out, file, NULL), 3);
	cr_expect(strstr(r.err, "truncated"), "%s", r.err);
	cr_expect_eq(lines_of(r.err), 1, "%s", r.err);
	struct sp_json *j = load(out);
	uint64_t rec = sp_json_u64(j, "otherData.records", 0);
	cr_expect(rec > 0 && rec < 5000, "records %llu", (unsigned long long)rec);
	sp_json_free(j);
	sp_t_result_free(&r);
	sp_t_rmrf(dir);
	free(dir);
}

/* ------------------------------------------------------ 4. bounded memory */

Test(export_cli, memory_does_not_grow_with_the_trace, .timeout = 180)
{
	char ts[512], tb[512];
	char *small = gen("20000", ts), *big = gen("400000", tb);
	struct sp_t_result a, b;
	cr_assert_eq(export_run(&a, "-o", "/dev/null", ts, NULL), 0, "%s", a.err);
	cr_assert_eq(export_run(&b, "-o", "/dev/null", tb, NULL), 0, "%s", b.err);
	/* 20 times the records (and about 20 times the GPU spans): same memory, within 4 MiB */
	cr_expect_leq(b.maxrss_kb, a.maxrss_kb + 4096, "20k records: %ld KiB, 400k records: %ld KiB", a.maxrss_kb,
		      b.maxrss_kb);
	sp_t_result_free(&a);
	sp_t_result_free(&b);
	sp_t_rmrf(small);
	sp_t_rmrf(big);
	free(small);
	free(big);
}

/* ------------------------------------- 5. what analyze finds; gzip; size */

/* The trainer (scenario, markers, iterations) traced into DIR/trace; the trace directory. */
static char *trainer_trace(const char *dir, const char *scenario, const char *markers, const char *iters)
{
	char pre[512], sd[600];
	char *tdir = malloc(600);
	cr_assert_not_null(tdir);
	snprintf(tdir, 600, "%s/trace", dir);
	snprintf(pre, sizeof(pre), "LD_PRELOAD=%s", sp_t_build("lib/libstepprof.so"));
	snprintf(sd, sizeof(sd), "STEPPROF_DIR=%s", tdir);
	char *env[] = {pre, sd, "NVTX_INJECTION64_PATH=", "STEPPROF_QUIET=1", NULL};
	char *argv[] = {(char *)sp_t_build("tests/bin/trainer"), "--scenario", (char *)scenario, "--iters",
			(char *)iters, "--markers", (char *)markers, NULL};
	struct sp_t_result tr;
	cr_assert_eq(sp_t_run(&tr, argv, env, NULL, 120), 0, "trainer: %s", tr.err);
	sp_t_result_free(&tr);
	return tdir;
}

/* `stepprof analyze --json` of tdir. */
static struct sp_json *analysis_of(const char *tdir)
{
	char *argv[] = {(char *)sp_t_build("bin/stepprof"), "analyze", "--json", (char *)tdir, NULL};
	struct sp_t_result r;
	cr_assert_eq(sp_t_run(&r, argv, NULL, NULL, 120), 0, "analyze: %s", r.err);
	struct sp_json *a = sp_json_parse(r.out);
	cr_assert_not_null(a, "%s", r.out);
	sp_t_result_free(&r);
	return a;
}

/*
 * The iterations track holds one slice per iteration of `analyze`, at its times,
 * its args the breakdown that sums to its length; findings are the analysis's.
 */
static void expect_iterations_track(const struct sp_json *j, const struct sp_json *a, const char *what)
{
	const struct sp_json *its = sp_json_get(a, "iterations"), *ev = sp_json_get(j, "traceEvents");
	cr_assert(its && its->n > 0, "%s: analyze found no iterations", what);
	cr_expect_eq(sp_json_u64(j, "otherData.iterations", 0), its->n, "%s", what);
	static const char *const cat[] = {"input", "h2d", "compute", "d2h", "sync", "other"};
	uint64_t zero = sp_json_u64(j, "otherData.ts_zero_mono_ns", 0);
	size_t seen = 0;
	for (size_t i = 0; i < ev->n; i++) {
		const struct sp_json *e = &ev->kids[i];
		if (strcmp(s_of(e, "ph"), "X") || strncmp(s_of(e, "name"), "iteration ", 10))
			continue;
		size_t k = strtoul(s_of(e, "name") + 10, NULL, 10);
		cr_assert_lt(k, its->n, "%s: %s", what, s_of(e, "name"));
		const struct sp_json *it = &its->kids[k];
		double ts = sp_json_num(e, "ts", -1), dur = sp_json_num(e, "dur", -1);
		double begin = (double)(sp_json_u64(it, "start_ns", 0) - zero) / 1e3;
		double len = (double)(sp_json_u64(it, "end_ns", 0) - sp_json_u64(it, "start_ns", 0)) / 1e3;
		cr_expect(fabs(ts - begin) < 0.002, "%s: iteration %zu at %.3f us, analyze %.3f", what, k, ts, begin);
		cr_expect(fabs(dur - len) < 0.002, "%s: iteration %zu lasts %.3f us, analyze %.3f", what, k, dur, len);
		double sum = 0, top = -1;
		const char *bottleneck = NULL;
		for (size_t c = 0; c < 6; c++) {
			char key[40];
			snprintf(key, sizeof(key), "args.%s_ms", cat[c]);
			double v = sp_json_num(e, key, -1);
			cr_expect_geq(v, 0, "%s: iteration %zu has no %s", what, k, key);
			sum += v;
			if (v > top)
				top = v, bottleneck = cat[c];
		}
		cr_expect(fabs(sum * 1e3 - dur) < 0.01 + dur * 1e-6, "%s: iteration %zu: parts %.3f us, slice %.3f us",
			  what, k, sum * 1e3, dur);
		cr_expect_str_eq(s_of(e, "args.bottleneck"), bottleneck, "%s: iteration %zu", what, k);
		seen++;
	}
	cr_expect_eq(seen, its->n, "%s: %zu iteration slices, analyze has %zu", what, seen, its->n);
	/* the findings, by id, as instants */
	const struct sp_json *fnd = sp_json_get(a, "findings");
	size_t nf = fnd ? fnd->n : 0;
	cr_expect_eq(count(j, "i", "cat", "finding"), nf, "%s", what);
	for (size_t i = 0; i < nf; i++)
		cr_expect_eq(count(j, "i", "args.finding", s_of(&fnd->kids[i], "kind")), 1, "%s: %s", what,
			     s_of(&fnd->kids[i], "kind"));
	/* each with its severity and a one-line message: the first sentence of its advice */
	for (size_t i = 0; i < ev->n; i++) {
		const struct sp_json *e = &ev->kids[i];
		if (strcmp(s_of(e, "ph"), "i") || strcmp(s_of(e, "cat"), "finding"))
			continue;
		const char *msg = s_of(e, "args.message"), *adv = s_of(e, "args.advice");
		cr_expect(*s_of(e, "args.severity"), "%s: %s has no severity", what, s_of(e, "name"));
		cr_expect(*msg && !strchr(msg, '\n') && msg[strlen(msg) - 1] == '.', "%s: message \"%s\"", what, msg);
		cr_expect(!strncmp(adv, msg, strlen(msg)) && strlen(msg) < strlen(adv), "%s: \"%s\"", what, msg);
	}
}

Test(export_cli, the_iterations_track_holds_analyzes_iterations_and_findings, .timeout = 240)
{
	char *dir = sp_t_tmpdir("export");
	struct {
		const char *scenario, *markers, *iters;
		int findings; /* 1: at least one, 0: none */
	} runs[] = {
	    {"input-bound", "step", "12", 1}, /* the demo's: small_file_storm */
	    {"clean", "none", "12", 0},	      /* iterations found by the automatic detection */
	    {"clean", "nvtx", "6", 0},
	};
	for (size_t r = 0; r < sizeof(runs) / sizeof(runs[0]); r++) {
		char sub[600], out[700], what[96];
		snprintf(sub, sizeof(sub), "%s/%zu", dir, r);
		cr_assert_eq(mkdir(sub, 0700), 0);
		snprintf(what, sizeof(what), "%s, markers %s", runs[r].scenario, runs[r].markers);
		char *tdir = trainer_trace(sub, runs[r].scenario, runs[r].markers, runs[r].iters);
		struct sp_json *a = analysis_of(tdir);
		snprintf(out, sizeof(out), "%s/x.json", sub);
		struct sp_t_result e;
		cr_assert_eq(export_run(&e, "-o", out, tdir, NULL), 0, "%s: %s", what, e.err);
		sp_t_result_free(&e);
		struct sp_json *j = load(out);
		cr_expect_eq(count(j, "M", "args.name", "iterations"), 1, "%s: one iterations track", what);
		expect_iterations_track(j, a, what);
		const struct sp_json *fnd = sp_json_get(a, "findings");
		if (runs[r].findings)
			cr_expect(fnd && fnd->n > 0, "%s: the scenario's finding", what);
		else
			cr_expect(!fnd || fnd->n == 0, "%s: no finding", what);
		if (!strcmp(runs[r].markers, "none"))
			cr_expect_str_eq(s_of(a, "iteration_source"), "auto", "%s", what);
		sp_json_free(j);
		sp_json_free(a);
		free(tdir);
	}
	sp_t_rmrf(dir);
	free(dir);
}

/* -o NAME.gz: gzip, readable by Python's gzip and json, the same document. */
Test(export_cli, a_gz_name_is_written_compressed, .timeout = 120)
{
	char *dir = sp_t_tmpdir("export");
	char *tdir = trainer_trace(dir, "input-bound", "step", "8");
	char plain[700], gz[700];
	snprintf(plain, sizeof(plain), "%s/x.json", dir);
	snprintf(gz, sizeof(gz), "%s/x.json.gz", dir);
	struct sp_t_result e;
	cr_assert_eq(export_run(&e, "-o", plain, tdir, NULL), 0, "%s", e.err);
	sp_t_result_free(&e);
	cr_assert_eq(export_run(&e, "-o", gz, tdir, NULL), 0, "%s", e.err);
	cr_expect(strstr(e.out, gz), "%s", e.out);
	sp_t_result_free(&e);
	struct stat a, b;
	cr_assert_eq(stat(plain, &a), 0);
	cr_assert_eq(stat(gz, &b), 0);
	cr_expect_lt(b.st_size * 5, a.st_size, "gzip: %lld bytes for %lld", (long long)b.st_size,
		     (long long)a.st_size);
	/* python3: the document through gzip + json, compared with the plain one's events and iterations */
	const char *py = "import gzip, json, sys\n"
			 "z = json.load(gzip.open(sys.argv[1], 'rt'))\n"
			 "p = json.load(open(sys.argv[2]))\n"
			 "its = [e for e in z['traceEvents'] if e['ph'] == 'X' and e['name'].startswith('iteration ')]\n"
			 "assert z == p, 'not the same document'\n"
			 "assert its and len(its) == z['otherData']['iterations'], len(its)\n"
			 "print(len(z['traceEvents']), len(its))\n";
	char *argv[] = {"python3", "-c", (char *)py, gz, plain, NULL};
	struct sp_t_result r;
	cr_expect_eq(sp_t_run(&r, argv, NULL, NULL, 60), 0, "python3: %s%s", r.out, r.err);
	r.out[strcspn(r.out, "\n")] = 0;
	sp_t_note("export: %lld bytes plain, %lld gzip (events, iterations: %s)", (long long)a.st_size,
		  (long long)b.st_size, r.out);
	sp_t_result_free(&r);
	free(tdir);
	sp_t_rmrf(dir);
	free(dir);
}

/*
 * Without -o, trace files of more than 64 MiB are exported compressed: a user of a
 * long run does not get a document of gigabytes by default. Below it, plain.
 */
Test(export_cli, a_large_trace_is_exported_compressed_by_default, .timeout = 300)
{
	char tdir[512], out[700];
	char *dir = gen("2300000", tdir); /* 2.3 M records of 32 bytes: over 64 MiB */
	struct sp_t_result e;
	cr_assert_eq(export_run(&e, tdir, NULL, NULL, NULL), 0, "%s", e.err);
	snprintf(out, sizeof(out), "%s/trace.perfetto.json.gz", tdir);
	cr_expect(strstr(e.out, out), "%s", e.out);
	sp_t_result_free(&e);
	struct stat st;
	cr_expect_eq(stat(out, &st), 0, "no %s", out);
	snprintf(out, sizeof(out), "%s/trace.perfetto.json", tdir);
	cr_expect_neq(stat(out, &st), 0, "and no plain one");
	sp_t_rmrf(dir);
	free(dir);

	dir = gen("20000", tdir);
	cr_assert_eq(export_run(&e, tdir, NULL, NULL, NULL), 0, "%s", e.err);
	sp_t_result_free(&e);
	snprintf(out, sizeof(out), "%s/trace.perfetto.json", tdir);
	cr_expect_eq(stat(out, &st), 0, "a small trace: plain %s", out);
	sp_t_rmrf(dir);
	free(dir);
}

/*
 * Size: the demo's trace (the input-bound trainer: file reads, copies, launches)
 * costs at most 120 bytes a record uncompressed (docs/export.md, "Size"). A ratio
 * of bytes, not a time.
 */
Test(export_cli, the_demos_export_costs_at_most_120_bytes_a_record, .timeout = 120)
{
	char *dir = sp_t_tmpdir("export");
	char *tdir = trainer_trace(dir, "input-bound", "step", "24");
	char out[700];
	snprintf(out, sizeof(out), "%s/x.json", dir);
	struct sp_t_result e;
	cr_assert_eq(export_run(&e, "-o", out, tdir, NULL), 0, "%s", e.err);
	sp_t_result_free(&e);
	struct sp_json *j = load(out);
	struct stat st;
	cr_assert_eq(stat(out, &st), 0);
	uint64_t records = sp_json_u64(j, "otherData.records", 0);
	cr_assert_gt(records, 1000);
	double per = (double)st.st_size / (double)records;
	sp_t_note("export: %.1f bytes a record (%lld bytes, %llu records)", per, (long long)st.st_size,
		  (unsigned long long)records);
	cr_expect_leq(per, 120.0, "%.1f bytes a record", per);
	sp_json_free(j);
	free(tdir);
	sp_t_rmrf(dir);
	free(dir);
}

/*
 * Size on a launch-bound trace (gentrace: nearly every record a kernel launch or
 * its GPU span, two slices bound by an arrow): at most 120 bytes a record too. A
 * ratio of bytes, not a time; gentrace's output is the same on every machine.
 */
Test(export_cli, a_launch_bound_export_costs_at_most_120_bytes_a_record, .timeout = 120)
{
	char tdir[512], out[600];
	char *dir = gen("200000", tdir);
	snprintf(out, sizeof(out), "%s/x.json", dir);
	struct sp_t_result e;
	cr_assert_eq(export_run(&e, "-o", out, tdir, NULL), 0, "%s", e.err);
	sp_t_result_free(&e);
	struct sp_json *j = load(out);
	struct stat st;
	cr_assert_eq(stat(out, &st), 0);
	uint64_t records = sp_json_u64(j, "otherData.records", 0);
	cr_assert_geq(records, 190000, "%llu records", (unsigned long long)records);
	cr_expect_gt(count_gpu(j), records / 3, "a launch-bound trace: GPU spans are a third of the records or more");
	double per = (double)st.st_size / (double)records;
	sp_t_note("export (launch-bound): %.1f bytes a record (%lld bytes, %llu records)", per, (long long)st.st_size,
		  (unsigned long long)records);
	cr_expect_leq(per, 120.0, "%.1f bytes a record", per);
	sp_json_free(j);
	sp_t_rmrf(dir);
	free(dir);
}

/*
 * Several trainer processes (ranks): an iterations track in each, with as many
 * slices as analyze's ranks[] gives it; the findings and otherData.iterations
 * stay the selected trainer's (as analyze --json's). One process: one track.
 */
Test(export_cli, each_rank_has_its_iterations_track, .timeout = 240)
{
	char *dir = sp_t_tmpdir("export");
	static const char *const two_clean[] = {"clean", "clean"};
	struct sp_json *truth[2];
	char *tdir = sp_t_run_ranks(dir, "ranks", 2, two_clean, 12, truth);
	struct sp_json *a = analysis_of(tdir);
	const struct sp_json *ranks = sp_json_get(a, "ranks");
	cr_assert(ranks && ranks->n == 2, "analyze: two ranks");
	char out[700];
	snprintf(out, sizeof(out), "%s/x.json", dir);
	struct sp_t_result e;
	cr_assert_eq(export_run(&e, "-o", out, tdir, NULL), 0, "%s", e.err);
	sp_t_result_free(&e);
	struct sp_json *j = load(out);
	cr_expect_eq(count(j, "M", "args.name", "iterations"), 2, "one iterations track per rank");
	cr_expect_eq(sp_json_u64(j, "otherData.iterations", 0), sp_json_get(a, "iterations")->n);
	const struct sp_json *ev = sp_json_get(j, "traceEvents");
	for (size_t r = 0; r < ranks->n; r++) {
		uint64_t pid = sp_json_u64(&ranks->kids[r], "pid", 0), want = sp_json_u64(&ranks->kids[r], "iterations", 0);
		size_t n = 0;
		for (size_t i = 0; i < ev->n; i++) {
			const struct sp_json *s = &ev->kids[i];
			n += !strcmp(s_of(s, "ph"), "X") && !strncmp(s_of(s, "name"), "iteration ", 10) &&
			     sp_json_u64(s, "pid", 0) == pid;
		}
		cr_expect_gt(want, 0);
		cr_expect_eq(n, want, "pid %llu: %zu iteration slices, analyze %llu", (unsigned long long)pid, n,
			     (unsigned long long)want);
	}
	sp_json_free(j);
	sp_json_free(a);
	sp_json_free(truth[0]);
	sp_json_free(truth[1]);
	free(tdir);
	sp_t_rmrf(dir);
	free(dir);
}
