/*
 * test_nocuda.c - jobs that never call CUDA and jobs without iterations, end to
 * end with C workloads under the preload (fast; the same for a CPU-only
 * PyTorch DataLoader job is in test_torch.c):
 *   - iogen forkio: forked children read small files, nothing calls CUDA: the
 *     report says so (text, JSON summary.cuda_calls 0), the children are workers,
 *     the whole-run input summary gives each one's files and bytes, and
 *     small_file_storm fires over the whole run; a job of two files stays silent;
 *   - markgen with stepprof_step() marks and no GPU work: iterations, and a
 *     bottleneck sentence that does not speak of an idle GPU (text and HTML);
 *   - a trace with CUDA records (gentrace): no such line, cuda_calls > 0.
 *
 * Ground truth: iogen's own JSON lines (per child: opens, fopens, bytes read),
 * markgen's step count.
 */
#include <criterion/criterion.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "testlib.h"

TestSuite(nocuda, .timeout = 120);

/* Run argv under the preload into trace; fails the test on a non-zero exit; the result in r. */
static void run_preloaded(struct sp_t_result *r, char *const argv[], const char *trace)
{
	char pre[4200], dir[4200];
	snprintf(pre, sizeof(pre), "LD_PRELOAD=%s", sp_t_build("lib/libstepprof.so"));
	snprintf(dir, sizeof(dir), "STEPPROF_DIR=%s", trace);
	char *env[] = {pre, dir, "STEPPROF_IO=libc", NULL};
	int rc = sp_t_run(r, argv, env, NULL, 60);
	cr_assert_eq(rc, 0, "%s: exit %d: %s", argv[0], rc, r->err);
}

/* stepprof analyze [--json] trace: its output (malloc'd). */
static char *analyze(const char *trace, int json)
{
	char *argv[] = {(char *)sp_t_build("bin/stepprof"), "analyze", json ? "--json" : (char *)trace,
			json ? (char *)trace : NULL, NULL};
	struct sp_t_result r;
	sp_t_run(&r, argv, NULL, NULL, 60);
	cr_assert_eq(r.status, 0, "stepprof analyze: exit %d: %s", r.status, r.err);
	char *out = r.out;
	r.out = NULL;
	sp_t_result_free(&r);
	return out;
}

/* The trace analysed three ways: the text report, the JSON (parsed), the HTML report. */
struct reports {
	char *text, *html;
	struct sp_json *j;
};

static void analyze_all(const char *trace, struct reports *o)
{
	o->text = analyze(trace, 0);
	char *js = analyze(trace, 1);
	o->j = sp_json_parse(js);
	cr_assert_not_null(o->j, "%s", js);
	free(js);
	char *argv[] = {(char *)sp_t_build("bin/stepprof"), "analyze", "--html", "-", (char *)trace, NULL};
	struct sp_t_result r;
	sp_t_run(&r, argv, NULL, NULL, 60);
	cr_assert_eq(r.status, 0, "stepprof analyze --html -: %s", r.err);
	o->html = r.out;
	r.out = NULL;
	sp_t_result_free(&r);
}

/* Free the reports, remove the test's directory. */
static void reports_done(struct reports *o, char *tmp)
{
	free(o->text);
	free(o->html);
	sp_json_free(o->j);
	sp_t_rmrf(tmp);
	free(tmp);
}

/* The process of pid in the JSON's array arr (processes, input.processes), or NULL. */
static struct sp_json *proc_of(const struct sp_json *j, const char *arr, long pid)
{
	struct sp_json *a = sp_json_path(j, arr);
	for (size_t i = 0; a && i < a->n; i++)
		if (sp_json_i64(sp_json_at(a, i), "pid", -1) == pid)
			return sp_json_at(a, i);
	return NULL;
}

static int has_finding(const struct sp_json *j, const char *kind)
{
	struct sp_json *f = sp_json_get(j, "findings");
	for (size_t i = 0; f && i < f->n; i++)
		if (!strcmp(sp_json_str(sp_json_at(f, i), "kind") ? sp_json_str(sp_json_at(f, i), "kind") : "", kind))
			return 1;
	return 0;
}

/*
 * iogen forkio DATA n 3 under the preload: its children's lines (ground truth)
 * in *lines (*nlines), the trace's reports in *o.
 */
static void forkio(const char *tmp, const char *files, struct reports *o, struct sp_json ***lines, size_t *nlines)
{
	char data[4200], trace[4200];
	snprintf(data, sizeof(data), "%s/data", tmp);
	snprintf(trace, sizeof(trace), "%s/trace", tmp);
	struct sp_t_result r;
	char *setup[] = {(char *)sp_t_build("tests/bin/iogen"), "setup", data, (char *)files, NULL};
	cr_assert_eq(sp_t_run(&r, setup, NULL, NULL, 60), 0, "iogen setup: %s", r.err);
	sp_t_result_free(&r);
	char *argv[] = {(char *)sp_t_build("tests/bin/iogen"), "forkio", data, (char *)files, "3", NULL};
	run_preloaded(&r, argv, trace);
	*nlines = sp_json_parse_lines(r.out, lines);
	sp_t_result_free(&r);
	analyze_all(trace, o);
}

Test(nocuda, forked_readers_without_cuda_are_workers_with_a_whole_run_input_summary)
{
	char *tmp = sp_t_tmpdir("nocuda");
	struct sp_json **lines;
	struct reports o;
	size_t n;
	forkio(tmp, "40", &o, &lines, &n);
	const char *text = o.text;
	struct sp_json *j = o.j;
	cr_expect(strstr(text, "No CUDA call: no process made a CUDA call"), "%s", text);
	cr_expect(strstr(text, "CPU-only build") && strstr(text, "LD_PRELOAD"), "what it suggests: %s", text);
	cr_expect(strstr(text, "Input over the whole run: "), "%s", text);
	cr_expect_eq(sp_json_u64(j, "summary.cuda_calls", 99), 0);
	cr_expect_eq(sp_json_u64(j, "summary.iterations", 99), 0);
	cr_expect_str_eq(sp_json_str(j, "input.scope") ? sp_json_str(j, "input.scope") : "", "whole_run");
	/* each child: a worker, its opens (open + fopen) and bytes (read, pread, fread) as it counted them */
	uint64_t opens_all = 0;
	size_t kids = 0;
	for (size_t i = 0; i < n; i++) {
		if (!lines[i])
			continue;
		long pid = sp_json_i64(lines[i], "pid", -1);
		uint64_t opens = 0, bytes = 0;
		int first = 1;
		for (size_t k = 0; k < n; k++) {
			if (!lines[k] || sp_json_i64(lines[k], "pid", -2) != pid)
				continue;
			first &= k >= i;
			opens += sp_json_u64(lines[k], "open", 0) + sp_json_u64(lines[k], "fopen", 0);
			bytes += sp_json_u64(lines[k], "read_bytes", 0) + sp_json_u64(lines[k], "pread_bytes", 0) +
				 sp_json_u64(lines[k], "fread_bytes", 0);
		}
		if (!first)
			continue; /* counted at its first line */
		kids++;
		opens_all += opens;
		struct sp_json *p = proc_of(j, "processes", pid), *in = proc_of(j, "input.processes", pid);
		cr_assert(p && in, "child %ld: in processes and input.processes", pid);
		cr_expect_str_eq(sp_json_str(p, "role"), "worker", "child %ld, forked by the main process", pid);
		cr_expect_eq(sp_json_u64(in, "files_opened", 0), opens, "child %ld: files", pid);
		cr_expect_eq(sp_json_u64(in, "bytes_read", 0), bytes, "child %ld: bytes", pid);
		cr_expect_gt(sp_json_u64(in, "io_ns", 0), 0);
	}
	cr_expect_eq(kids, 3, "three children");
	cr_expect_eq(sp_json_u64(j, "input.files_opened", 0), opens_all);
	char data[4200];
	snprintf(data, sizeof(data), "%s/data", tmp);
	cr_expect_str_eq(sp_json_str(j, "input.top_directories.0.path"), data);
	cr_expect_eq(sp_json_u64(j, "input.top_directories.0.opens", 0), opens_all);
	/* the storm over the whole run: 40 files of 1-5 KiB, ~14 metadata ops each, 6 times */
	struct sp_json *f = sp_json_get(j, "findings");
	cr_assert(f && f->n >= 1 && has_finding(j, "small_file_storm"), "small_file_storm over the whole run");
	cr_expect_str_eq(sp_json_str(sp_json_at(f, 0), "evidence.scope"), "whole_run");
	cr_expect_eq(sp_json_i64(sp_json_at(f, 0), "first_iteration", 0), -1);
	cr_expect(strstr(text, "small_file_storm, over the whole run (no iterations)"), "%s", text);
	sp_json_free_lines(lines, n);
	reports_done(&o, tmp);
}

Test(nocuda, two_files_are_no_storm)
{
	char *tmp = sp_t_tmpdir("nocuda");
	struct sp_json **lines;
	struct reports o;
	size_t n;
	forkio(tmp, "2", &o, &lines, &n);
	const char *text = o.text;
	struct sp_json *j = o.j;
	cr_expect(strstr(text, "No CUDA call"), "%s", text);
	cr_expect(!has_finding(j, "small_file_storm"), "2 files per child: no storm: %s", text);
	cr_expect_gt(sp_json_u64(j, "input.files_opened", 0), 0);
	sp_json_free_lines(lines, n);
	reports_done(&o, tmp);
}

/* stepprof_step() marks without any GPU work: iterations, bottleneck other, and no idle GPU in the sentence. */
Test(nocuda, marks_without_gpu_work_speak_of_no_gpu)
{
	char *tmp = sp_t_tmpdir("nocuda"), trace[4200];
	snprintf(trace, sizeof(trace), "%s/trace", tmp);
	struct sp_t_result r;
	char *argv[] = {(char *)sp_t_build("tests/bin/markgen"), "-n", "10", "-s", "21", NULL};
	run_preloaded(&r, argv, trace);
	sp_t_result_free(&r);
	struct reports o;
	analyze_all(trace, &o);
	cr_expect_eq(sp_json_u64(o.j, "summary.iterations", 0), 20, "21 marks, 20 iterations between them");
	cr_expect_eq(sp_json_u64(o.j, "summary.cuda_calls", 99), 0);
	const char *bn = strstr(o.text, "\nBottleneck: ");
	cr_assert_not_null(bn, "%s", o.text);
	const char *eol = strchr(bn + 1, '\n');
	char line[512];
	snprintf(line, sizeof(line), "%.*s", (int)(eol ? eol - bn - 1 : 200), bn + 1);
	cr_expect(!strstr(line, "GPU idle") && !strstr(line, "GPU is idle"), "%s", line);
	cr_expect(strstr(line, "no process made a CUDA call"), "%s", line);
	cr_expect(strstr(o.text, "No CUDA call:"), "%s", o.text);
	/* the HTML report says it in its opening banner too */
	const char *nc = strstr(o.html, "<p id=\"no-cuda\"><strong>No CUDA call:</strong> no process made a CUDA call");
	cr_expect(nc && nc > strstr(o.html, "<section id=\"bottleneck\""), "the banner's no-CUDA line");
	cr_expect(!strstr(o.html, "leaves the GPU idle"), "no idle GPU in the HTML either");
	reports_done(&o, tmp);
}

/* A trace with CUDA records: no such line, and the count in the JSON. */
Test(nocuda, a_cuda_job_is_not_told_it_made_no_cuda_call)
{
	char *tmp = sp_t_tmpdir("nocuda"), trace[4200];
	snprintf(trace, sizeof(trace), "%s/trace", tmp);
	struct sp_t_result r;
	char *argv[] = {(char *)sp_t_build("tests/bin/gentrace"), trace, "20000", "--iters", "50", "--markers",
			"step", NULL};
	cr_assert_eq(sp_t_run(&r, argv, NULL, NULL, 60), 0, "gentrace: %s", r.err);
	sp_t_result_free(&r);
	struct reports o;
	analyze_all(trace, &o);
	cr_expect_gt(sp_json_u64(o.j, "summary.cuda_calls", 0), 0);
	cr_expect(!strstr(o.text, "No CUDA call"), "%s", o.text);
	cr_expect(!sp_json_get(o.j, "input"), "the whole-run input only without iterations");
	cr_expect(!strstr(o.html, "id=\"no-cuda\""), "no no-CUDA line in the HTML of a CUDA job");
	reports_done(&o, tmp);
}
