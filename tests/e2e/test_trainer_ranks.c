/*
 * test_trainer_ranks.c - the synthetic trainer with --ranks N: N rank processes
 * (torchrun's RANK/WORLD_SIZE), an all-reduce per step through the simulated NCCL
 * (build/simgpu/libnccl.so.2), --slow-rank and --overlap. Checked against what
 * the options told the workload to do (the slow rank's extra input time, the
 * overlapped kernel), never against the truth's own sums alone.
 */
#include <criterion/criterion.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "testlib.h"

#define NO_PRELOAD "LD_PRELOAD=", "STEPPROF_DIR=", "NVTX_INJECTION64_PATH="

struct ranks_run {
	struct sp_t_result res;
	struct sp_json **j;
	size_t n;
};

/* build/tests/bin/trainer with args; exit 0 and one JSON line per rank, in rank order */
static void run_ranks(struct ranks_run *r, const char *const *args, char *const *env, size_t nranks)
{
	const char *path = sp_t_build("tests/bin/trainer");
	char *argv[64];
	int n = 0;
	cr_assert(access(path, X_OK) == 0, "%s is not built", path);
	argv[n++] = (char *)path;
	for (; args && *args && n < 63; args++)
		argv[n++] = (char *)*args;
	argv[n] = NULL;
	memset(r, 0, sizeof(*r));
	int st = sp_t_run(&r->res, argv, env, NULL, 120);
	cr_assert_eq(st, 0, "trainer exited %d; stderr:\n%s", st, r->res.err);
	r->n = sp_json_parse_lines(r->res.out, &r->j);
	cr_assert_eq(r->n, nranks, "%zu JSON lines, not %zu:\n%s", r->n, nranks, r->res.out);
	for (size_t k = 0; k < r->n; k++) {
		cr_assert_eq(sp_json_u64(r->j[k], "rank.rank", 99), k, "line %zu is not rank %zu", k, k);
		cr_assert_eq(sp_json_u64(r->j[k], "rank.world_size", 0), nranks);
	}
}

static void ranks_free(struct ranks_run *r)
{
	for (size_t k = 0; k < r->n; k++)
		sp_json_free(r->j[k]);
	free(r->j);
	sp_t_result_free(&r->res);
}

static uint64_t cu(const struct sp_json *j, size_t i, const char *field)
{
	char path[128];
	snprintf(path, sizeof(path), "iterations.%zu.comm.%s", i, field);
	struct sp_json *v = sp_json_path(j, path);
	cr_assert(v && v->type == SPJ_NUM, "missing %s", path);
	return sp_json_u64(j, path, 0);
}

static int cmp_u64(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
	return x < y ? -1 : x > y;
}

/* the median over iterations 1 .. iters-1 (the first has the ranks' start-up skew) of field */
static uint64_t median_after_first(const struct sp_json *j, size_t iters, const char *field)
{
	uint64_t v[64];
	size_t n = 0;
	for (size_t i = 1; i < iters && n < 64; i++)
		v[n++] = cu(j, i, field);
	qsort(v, n, sizeof(v[0]), cmp_u64);
	return v[n / 2];
}

/*
 * every all-reduce: its times in order; exposed + overlapped within its span
 * (overlapped counts only the all-reduce's GPU time under the backward kernel,
 * exposed the span's time outside that kernel), and the span exactly without overlap
 */
static void check_comm(const struct sp_json *j, size_t iters, uint64_t bytes)
{
	for (size_t i = 0; i < iters; i++) {
		cr_expect_eq(cu(j, i, "allreduce_bytes"), bytes);
		cr_expect_leq(cu(j, i, "call_begin_ns"), cu(j, i, "call_end_ns"));
		cr_expect_leq(cu(j, i, "call_begin_ns"), cu(j, i, "start_ns"));
		cr_expect_leq(cu(j, i, "start_ns"), cu(j, i, "end_ns"));
		uint64_t span = cu(j, i, "end_ns") - cu(j, i, "start_ns");
		cr_expect_leq(cu(j, i, "exposed_ns") + cu(j, i, "overlapped_ns"), span);
		if (!cu(j, i, "overlapped_ns"))
			cr_expect_eq(cu(j, i, "exposed_ns"), span);
		/* the host saw it end no earlier than its transfer took after its call */
		cr_expect_geq(cu(j, i, "end_ns") - cu(j, i, "call_begin_ns"), cu(j, i, "transfer_ns"));
	}
}

#define SLOW_US 30000

/* A slow rank: the others wait for it in the all-reduce (exposed), it does not. */
Test(trainer_ranks, slow_rank_makes_the_others_wait, .timeout = 180)
{
	static const char *const args[] = {"--iters",	  "8",	       "--ranks",   "2",	   "--allreduce-bytes",
					   "256K",	  "--kernels", "4",	    "--kernel-us", "2000",
					   "--slow-rank", "1",	       "--slow-us", "30000",	   NULL};
	char *env[] = {NO_PRELOAD, "SIMNCCL_GBPS=10", NULL};
	struct ranks_run r;
	run_ranks(&r, args, env, 2);
	cr_expect_neq(sp_json_u64(r.j[0], "pid", 0), sp_json_u64(r.j[1], "pid", 0), "one process for two ranks");
	cr_expect_eq(sp_json_u64(r.j[0], "rank.launcher_pid", 0), sp_json_u64(r.j[1], "rank.launcher_pid", 1));
	cr_expect_eq(sp_json_u64(r.j[0], "rank.nccl_calls.ncclGetUniqueId", 9), 1);
	cr_expect_eq(sp_json_u64(r.j[1], "rank.nccl_calls.ncclGetUniqueId", 9), 0);
	for (size_t k = 0; k < 2; k++) {
		cr_expect_eq(sp_json_u64(r.j[k], "rank.nccl_calls.ncclAllReduce", 0), 8);
		cr_expect_eq(sp_json_u64(r.j[k], "totals.comm.allreduces", 0), 8);
		cr_expect_eq(sp_json_u64(r.j[k], "totals.comm.overlapped_ns", 1), 0);
		check_comm(r.j[k], 8, 256 * 1024);
	}
	/* the slow rank's own input phase holds its extra time */
	cr_expect_geq(sp_json_u64(r.j[1], "totals.breakdown_ns.input", 0), 8ull * SLOW_US * 1000 * 95 / 100);
	uint64_t fast = median_after_first(r.j[0], 8, "exposed_ns");
	uint64_t slow = median_after_first(r.j[1], 8, "exposed_ns");
	cr_expect_geq(fast, (uint64_t)SLOW_US * 1000 * 8 / 10, "rank 0 waited %.1f ms, the slow rank is 30 ms late",
		      fast / 1e6);
	cr_expect_lt(slow, (uint64_t)SLOW_US * 1000 / 2, "the slow rank waited %.1f ms itself", slow / 1e6);
	sp_t_note("trainer --ranks 2 --slow-us 30000: median exposed all-reduce %.1f ms (rank 0), %.1f ms (rank 1)",
		  fast / 1e6, slow / 1e6);
	ranks_free(&r);
}

/* --overlap: a 5 ms backward kernel hides most of a ~2 ms all-reduce */
Test(trainer_ranks, overlap_hides_the_allreduce_behind_the_backward_kernel, .timeout = 180)
{
	static const char *const args[] = {"--iters",	"8", "--ranks",	    "2",    "--allreduce-bytes", "1M",
					   "--kernels", "4", "--kernel-us", "5000", "--overlap",	 NULL};
	char *env[] = {NO_PRELOAD, "SIMNCCL_GBPS=0.5", NULL};
	struct ranks_run r;
	run_ranks(&r, args, env, 2);
	for (size_t k = 0; k < 2; k++) {
		check_comm(r.j[k], 8, 1024 * 1024);
		cr_expect_eq(sp_json_u64(r.j[k], "totals.by_api.cudaStreamWaitEvent", 0), 8);
		cr_expect_eq(sp_json_u64(r.j[k], "totals.by_api.cudaStreamCreate", 0), 2);
		uint64_t ovl = median_after_first(r.j[k], 8, "overlapped_ns");
		uint64_t exp = median_after_first(r.j[k], 8, "exposed_ns");
		uint64_t transfer = cu(r.j[k], 1, "transfer_ns");
		cr_expect_geq(transfer, 2000000, "1 MiB at 0.5 GB/s is 2.1 ms, not %.2f", transfer / 1e6);
		cr_expect_gt(ovl, exp, "rank %zu: overlapped %.2f ms, exposed %.2f ms", k, ovl / 1e6, exp / 1e6);
		cr_expect_geq(ovl, transfer * 9 / 10, "rank %zu: overlapped %.2f ms", k, ovl / 1e6);
	}
	ranks_free(&r);
}
