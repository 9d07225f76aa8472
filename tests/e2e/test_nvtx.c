/*
 * test_nvtx.c - NVTX v3 through injection, end to end: marknvtx (header-only
 * NVTX, no stepprof code) runs under LD_PRELOAD=libstepprof.so alone, and
 * `stepprof dump --json` must show exactly the ranges and marks it made, with
 * their names, domains, levels and durations (at least what it slept); and
 * every NVTX call leaves errno as it was.
 */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "testlib.h"

struct run {
	char *dir;
	long pid, child;
	struct sp_json *info;
	struct sp_json **l; /* the parent's records */
	size_t n;
};

static void run_marknvtx(struct run *r, const char *args, char *const extra_env)
{
	r->dir = sp_t_tmpdir("nvtx");
	char pre[600], dir[600];
	snprintf(pre, sizeof(pre), "LD_PRELOAD=%s", sp_t_build("lib/libstepprof.so"));
	snprintf(dir, sizeof(dir), "STEPPROF_DIR=%s", r->dir);
	/* no CPU time samples: the tests count the ranges' records, and the exit's sample would be one more */
	char *env[] = {pre, dir, "STEPPROF_CPU_SAMPLES=0", extra_env ? extra_env : "NVTX_INJECTION64_PATH=", NULL};
	char *argv[16], *copy = strdup(args), *save;
	int a = 0;
	argv[a++] = (char *)sp_t_build("tests/bin/marknvtx");
	for (char *w = strtok_r(copy, " ", &save); w && a < 15; w = strtok_r(NULL, " ", &save))
		argv[a++] = w;
	argv[a] = NULL;
	struct sp_t_result res;
	cr_assert_eq(sp_t_run(&res, argv, env, NULL, 60), 0, "marknvtx: %s", res.err);
	const char *p = strstr(res.out, "marknvtx pid="), *c = strstr(res.out, "child=");
	r->pid = p ? atol(p + 13) : -1;
	r->child = c ? atol(c + 6) : -1;
	/* the hooks leave errno alone (marknvtx counts every call that changed it) */
	cr_expect_not_null(strstr(res.out, "errno_changed=0\n"), "%s", res.out);
	sp_t_result_free(&res);

	struct sp_t_result ir;
	char *iargv[] = {(char *)sp_t_build("bin/stepprof"), "info", "--json", r->dir, NULL};
	/* no file at all is a valid outcome when nothing was recorded: file_of() then finds none */
	r->info = sp_t_run(&ir, iargv, NULL, NULL, 60) == 0 ? sp_json_parse(ir.out) : NULL;
	sp_t_result_free(&ir);
	r->l = NULL;
	r->n = 0;
}

static struct sp_json *file_of(struct run *r, long pid)
{
	struct sp_json *files = r->info ? sp_json_get(r->info, "files") : NULL;
	for (size_t i = 0; files && i < files->n; i++)
		if (sp_json_i64(&files->kids[i], "pid", -1) == pid)
			return &files->kids[i];
	return NULL;
}

static size_t dump(const char *path, struct sp_json ***l)
{
	struct sp_t_result d;
	char *argv[] = {(char *)sp_t_build("bin/stepprof"), "dump", "--json", (char *)path, NULL};
	cr_assert_eq(sp_t_run(&d, argv, NULL, NULL, 60), 0, "dump: %s", d.err);
	size_t n = sp_json_parse_lines(d.out, l);
	sp_t_result_free(&d);
	return n;
}

static void done(struct run *r)
{
	sp_json_free_lines(r->l, r->n);
	if (r->info)
		sp_json_free(r->info);
	sp_t_rmrf(r->dir);
}

/* The records of `kind` named `name`; the first in *first. */
static size_t find(struct run *r, const char *kind, const char *name, struct sp_json **first)
{
	size_t c = 0;
	for (size_t i = 0; i < r->n; i++) {
		const char *k = sp_json_str(r->l[i], "kind"), *nm = sp_json_str(r->l[i], "name");
		if (k && nm && strcmp(k, kind) == 0 && strcmp(nm, name) == 0) {
			if (c++ == 0 && first)
				*first = r->l[i];
		}
	}
	return c;
}

static size_t count_kind(struct run *r, const char *kind)
{
	size_t c = 0;
	for (size_t i = 0; i < r->n; i++) {
		const char *k = sp_json_str(r->l[i], "kind");
		if (k && strcmp(k, kind) == 0)
			c++;
	}
	return c;
}

static uint64_t dur(struct sp_json *e)
{
	return sp_json_u64(e, "end_ns", 0) - sp_json_u64(e, "begin_ns", 0);
}

static int no_domain(struct sp_json *e)
{
	struct sp_json *d = sp_json_get(e, "domain");
	return !d || d->type == SPJ_NULL || (d->type == SPJ_STR && d->str[0] == 0);
}

Test(nvtx, push_pop_ranges_exact_with_levels_and_durations)
{
	struct run r;
	run_marknvtx(&r, "-n 20 -u 2000", NULL);
	struct sp_json *f = file_of(&r, r.pid);
	cr_assert(f, "no trace file for pid %ld", r.pid);
	r.n = dump(sp_json_str(f, "path"), &r.l);

	/* 20 steps of >= 2 ms at level 0 */
	size_t steps = 0;
	for (size_t i = 0; i < r.n; i++) {
		const char *k = sp_json_str(r.l[i], "kind"), *nm = sp_json_str(r.l[i], "name");
		if (!k || strcmp(k, "range") || !nm || strcmp(nm, "step"))
			continue;
		steps++;
		cr_expect_geq(dur(r.l[i]), 2000000, "a step slept 2 ms, lasted %lu ns", (unsigned long)dur(r.l[i]));
		cr_expect_eq(sp_json_u64(r.l[i], "value", 99), 0);
		cr_expect(no_domain(r.l[i]));
	}
	cr_expect_eq(steps, 20);

	struct sp_json *outer = NULL, *inner = NULL;
	cr_assert_eq(find(&r, "range", "outer", &outer), 1);
	cr_assert_eq(find(&r, "range", "inner", &inner), 1);
	cr_expect_eq(sp_json_u64(outer, "value", 99), 0);
	cr_expect_eq(sp_json_u64(inner, "value", 99), 1, "inner is nested one level down");
	cr_expect_geq(sp_json_u64(inner, "begin_ns", 0), sp_json_u64(outer, "begin_ns", 0));
	cr_expect_leq(sp_json_u64(inner, "end_ns", 0), sp_json_u64(outer, "end_ns", 0));
	cr_expect_geq(dur(inner), 1000000);

	struct sp_json *e = NULL;
	cr_expect_eq(find(&r, "range", "wide\xc3\xa9", NULL), 1, "the W string arrives as UTF-8");
	cr_expect_eq(find(&r, "range", "ex_push", NULL), 1, "pushEx with an ASCII message");
	cr_expect_eq(find(&r, "range", "registered", NULL), 1, "pushEx with a registered string");
	cr_expect_eq(find(&r, "range", "open_at_exit", NULL), 0, "a range never popped is not a record");
	cr_expect_eq(count_kind(&r, "range"), 20 + 2 + 1 + 1 + 1 + 1 + 1 + 1);
	cr_expect_eq(count_kind(&r, "nvtx_mark"), 3);
	cr_expect_eq(find(&r, "nvtx_mark", "hello", &e), 1);
	cr_expect(e && no_domain(e));
	cr_expect_eq(find(&r, "nvtx_mark", "wmark", NULL), 1);
	done(&r);
}

Test(nvtx, start_end_across_threads_and_domains)
{
	struct run r;
	run_marknvtx(&r, "-n 1 -u 100", NULL);
	struct sp_json *f = file_of(&r, r.pid);
	cr_assert(f);
	r.n = dump(sp_json_str(f, "path"), &r.l);

	struct sp_json *async = NULL, *dpush = NULL, *dmark = NULL, *drange = NULL;
	cr_assert_eq(find(&r, "range", "async", &async), 1);
	cr_expect_geq(dur(async), 3000000, "ended 3 ms later by another thread");
	cr_expect_neq(sp_json_i64(async, "tid", -1), r.pid, "recorded by the thread that ended it");
	cr_expect_gt(sp_json_u64(async, "value", 0), 0, "value = the range id");

	cr_assert_eq(find(&r, "range", "dpush", &dpush), 1);
	cr_assert_eq(find(&r, "nvtx_mark", "dmark", &dmark), 1);
	cr_assert_eq(find(&r, "range", "drange", &drange), 1);
	cr_expect_str_eq(sp_json_str(dpush, "domain"), "mydomain");
	cr_expect_str_eq(sp_json_str(dmark, "domain"), "mydomain");
	cr_expect_str_eq(sp_json_str(drange, "domain"), "mydomain");
	cr_expect_geq(dur(drange), 500000);
	cr_expect_neq(sp_json_u64(drange, "value", 0), sp_json_u64(async, "value", 0), "distinct range ids");
	done(&r);
}

Test(nvtx, forked_child_records_its_own_ranges)
{
	struct run r;
	run_marknvtx(&r, "-n 2 -u 100 -f", NULL);
	cr_assert_gt(r.child, 0);
	struct sp_json *cf = file_of(&r, r.child);
	cr_assert(cf, "no trace file for the child %ld", r.child);
	cr_expect_eq(sp_json_i64(cf, "ppid", -1), r.pid);
	r.n = dump(sp_json_str(cf, "path"), &r.l);
	cr_expect_eq(r.n, 1, "the child's file holds its one range");
	cr_expect_eq(find(&r, "range", "child_step", NULL), 1);
	done(&r);
}

Test(nvtx, user_injection_path_is_left_alone)
{
	/* another tool asked for: stepprof does not take NVTX over, the program still runs */
	struct run r;
	run_marknvtx(&r, "-n 3 -u 100", "NVTX_INJECTION64_PATH=/nonexistent/libother.so");
	struct sp_json *f = file_of(&r, r.pid);
	if (f) {
		r.n = dump(sp_json_str(f, "path"), &r.l);
		cr_expect_eq(count_kind(&r, "range"), 0);
	}
	done(&r);
}

Test(nvtx, runs_unchanged_without_the_preload)
{
	struct sp_t_result res;
	char *argv[] = {(char *)sp_t_build("tests/bin/marknvtx"), "-n", "2", "-u", "100", NULL};
	char *env[] = {"LD_PRELOAD=", "NVTX_INJECTION64_PATH=", NULL};
	cr_assert_eq(sp_t_run(&res, argv, env, NULL, 30), 0);
	cr_expect(strstr(res.out, "steps=2"));
	cr_expect_eq(res.errlen, 0, "%s", res.err);
	sp_t_result_free(&res);
}

/*
 * STEPPROF_CAPTURE=cudaProfilerApi: a range pushed inside the capture range and
 * popped outside it is not recorded, and leaves the thread's stack: "whole",
 * pushed and popped inside the next capture range, is at level 0 (left on the
 * stack, "cut" would make it level 1). Nothing outside the ranges: no "step".
 */
Test(nvtx, a_range_cut_by_the_capture_range_leaves_the_stack)
{
	struct run r;
	char args[600];
	snprintf(args, sizeof(args), "-c %s -n 3 -u 100", sp_t_build("simgpu/libcuda.so.1"));
	run_marknvtx(&r, args, "STEPPROF_CAPTURE=cudaProfilerApi");
	struct sp_json *f = file_of(&r, r.pid), *whole = NULL;
	cr_assert(f, "no trace file for pid %ld", r.pid);
	r.n = dump(sp_json_str(f, "path"), &r.l);
	cr_expect_eq(find(&r, "range", "cut", NULL), 0, "a range popped outside the capture range is recorded");
	cr_assert_eq(find(&r, "range", "whole", &whole), 1);
	cr_expect_eq(sp_json_u64(whole, "value", 99), 0, "\"whole\" is at level %lu, not 0",
		     (unsigned long)sp_json_u64(whole, "value", 99));
	cr_expect_eq(find(&r, "range", "step", NULL), 0, "the loop after the last stop is recorded");
	done(&r);
}
