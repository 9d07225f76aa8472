/*
 * test_io_bench.c - `make bench` reports the small-file loop of docs/architecture.md's budgets
 * plain, under the libc wrappers (budget 1.15x; and callgrind's instructions
 * per file, plain and wrapped), under the eBPF collector (budget 1.5x) and
 * under strace -f: scripts/bench.d/30-io.sh and 40-bpf.sh
 * run here with tiny loops, and each figure must be printed in the BENCH
 * format, from a run that really recorded. The ratios of such short runs on a
 * loaded machine mean nothing, so their values are not judged here (make
 * bench does that); only that each is a positive number with its budget.
 */
#include "test_io_helpers.h"

/* The value of "BENCH name: VALUE ..." in out, or -1 when the line is missing; *line gets the line. */
static double bench_value(const char *out, const char *name, char *line, size_t n)
{
	char key[128];
	snprintf(key, sizeof(key), "BENCH %s: ", name);
	const char *p = strstr(out, key);
	if (!p)
		return -1;
	snprintf(line, n, "%.*s", (int)strcspn(p, "\n"), p);
	return strtod(p + strlen(key), NULL);
}

static void expect_figure(const char *out, const char *name, const char *budget)
{
	char line[512] = "";
	double v = bench_value(out, name, line, sizeof(line));
	cr_expect_gt(v, 0, "no positive figure for %s in:\n%s", name, out);
	if (budget)
		cr_expect_not_null(strstr(line, budget), "%s: \"%s\" does not state %s", name, line, budget);
	cr_expect(strstr(line, " ok") || strstr(line, " OVER"), "%s: no verdict in \"%s\"", name, line);
}

Test(io_bench, small_file_loop_plain_libc_and_strace, .timeout = 120)
{
	if (access("scripts/bench.d/30-io.sh", R_OK) != 0)
		cr_skip_test("run from the repository root");
	char *argv[] = {"/bin/bash", "scripts/bench.d/30-io.sh", NULL};
	char *env[] = {"IO_BENCH_ITERS=3",    "IO_BENCH_ROUNDS=1",  "IO_BENCH_STRACE_ITERS=1",
		       "IO_BENCH_CG_SHORT=1", "IO_BENCH_CG_LONG=3", NULL};
	struct sp_t_result res;
	cr_assert_eq(sp_t_run(&res, argv, env, NULL, 100), 0, "30-io.sh: %s", res.err);
	cr_expect_null(strstr(res.out, "wrote no trace file"), "the libc run recorded nothing: %s", res.out);
	expect_figure(res.out, "io_small_file_loop_plain", NULL);
	expect_figure(res.out, "io_small_file_loop_libc", "(budget 1.15)");
	expect_figure(res.out, "io_small_file_loop_libc_paired", NULL);
	expect_figure(res.out, "io_small_file_loop_libc_ring", "(budget n/a, 4 MiB ring reused");
	if (access("/usr/bin/strace", X_OK) == 0)
		expect_figure(res.out, "io_small_file_loop_strace", NULL);
	else
		sp_t_note("strace not installed: no comparison figure");
	if (access("/usr/bin/valgrind", X_OK) == 0) {
		/* Instructions per file: the wrappers add some, whatever the load. */
		char line[512] = "";
		double x = bench_value(res.out, "io_small_file_loop_libc_instructions", line, sizeof(line));
		cr_expect_gt(x, 1.0, "the wrappers add no instructions? \"%s\" in:\n%s", line, res.out);
		cr_expect_not_null(strstr(line, "instructions per file"), "%s", line);
	} else {
		sp_t_note("valgrind not installed: no instruction figure");
	}
	sp_t_result_free(&res);
}

Test(io_bench, small_file_loop_under_the_collector, .timeout = 120)
{
	const char *why;
	if (!io_t_bpf_possible(&why))
		cr_skip_test("no eBPF figure: %s", why);
	if (access("scripts/bench.d/40-bpf.sh", R_OK) != 0)
		cr_skip_test("run from the repository root");
	char *argv[] = {"/bin/bash", "scripts/bench.d/40-bpf.sh", NULL};
	char *env[] = {"BPF_BENCH_ROUNDS=1", "BPF_BENCH_OPS=2000", NULL};
	struct sp_t_result res;
	cr_assert_eq(sp_t_run(&res, argv, env, NULL, 100), 0, "40-bpf.sh: %s", res.err);
	if (strstr(res.out, "skipped")) {
		char why[512];
		snprintf(why, sizeof(why), "%s", res.out);
		why[strcspn(why, "\n")] = '\0';
		sp_t_result_free(&res);
		cr_skip_test("%s", why);
	}
	cr_expect_null(strstr(res.err, "wrote no trace file"), "the collector recorded nothing: %s", res.err);
	expect_figure(res.out, "bpf_small_file_loop", "(budget 1.5)");
	sp_t_result_free(&res);
}
