/*
 * test_analyze_comm.c - the straggler analysis end to end on records built in
 * memory: four rank processes, each step an all-reduce whose kernel starts when
 * the rank reaches it and ends when the last rank has (plus a fixed transfer),
 * one rank optionally late by a known delay in its input. The table and
 * straggler_rank must name that rank, by that delay, and stay silent without it.
 */
#include <criterion/criterion.h>
#include <stdlib.h>
#include <string.h>

#include "analyze.h"

#define US 1000ull
#define MS 1000000ull
#define NRANK 4
#define NSTEP 40

static uint64_t rng = 0x9e3779b97f4a7c15ull;
static uint64_t rnd(uint64_t n)
{
	rng ^= rng << 13;
	rng ^= rng >> 7;
	rng ^= rng << 17;
	return rng % n;
}

/*
 * The job: step s of rank r starts at s * 20 ms; its input takes 1 ms (+ up to
 * 50 us), slow_ms more on rank `slow`; then a 5 ms compute kernel, then the
 * all-reduce, called 10 us after the compute launch and lasting 20 us on the
 * host, its kernel launched 5 us into the call. The kernel runs from the end of
 * the compute kernel to 300 us after the last rank's compute ended.
 */
static void build(struct an_memsrc *m, int slow, uint64_t slow_ms, uint64_t late_truth[NRANK])
{
	an_memsrc_init(m, 100);
	uint32_t kname = an_memsrc_string(m, "gemm_kernel");
	uint32_t cname = an_memsrc_string(m, "ncclDevKernel_AllReduce_Sum_f32_RING_LL");
	uint64_t base = 1000 * MS;
	memset(late_truth, 0, NRANK * sizeof(*late_truth));
	for (int r = 0; r < NRANK; r++) {
		struct sp_event *e = an_memsrc_add(m, SP_K_COMM_INIT, SP_API_ncclCommInitRank, 100 + r, 100 + r,
						   base - 10 * MS, base - 9 * MS);
		e->f[SP_F_COMM] = 0x5000 + (uint64_t)r;
		e->f[SP_F_VALUE] = 0x1234567890abcdefull;
		e->f[SP_F_RANK] = (uint64_t)r;
		e->f[SP_F_NRANKS] = NRANK;
	}
	uint64_t op[NRANK] = {0};
	for (int s = 0; s < NSTEP; s++) {
		uint64_t t0 = base + (uint64_t)s * 20 * MS, ready[NRANK], last = 0;
		for (int r = 0; r < NRANK; r++) {
			uint64_t in = 1 * MS + rnd(50 * US + 1) + (r == slow ? slow_ms * MS : 0);
			ready[r] = t0 + in + 5 * MS;
			if (ready[r] > last)
				last = ready[r];
		}
		uint64_t second = 0;
		int who = 0;
		for (int r = 0; r < NRANK; r++)
			if (ready[r] == last)
				who = r;
		for (int r = 0; r < NRANK; r++)
			if (r != who && ready[r] > second)
				second = ready[r];
		uint64_t wait = 0;
		for (int r = 0; r < NRANK; r++)
			wait += last - ready[r];
		late_truth[who] += wait / (NRANK - 1);
		for (int r = 0; r < NRANK; r++) {
			int32_t pid = 100 + r;
			uint64_t launch = ready[r] - 5 * MS;
			struct sp_event *e = an_memsrc_add(m, SP_K_STEP, SP_API_stepprof_step, pid, pid, t0, t0);
			e->f[SP_F_VALUE] = (uint64_t)s;
			e = an_memsrc_add(m, SP_K_LAUNCH, SP_API_cudaLaunchKernel, pid, pid, launch, launch + 5 * US);
			e->f[SP_F_NAME] = kname;
			e->f[SP_F_OP] = ++op[r];
			e = an_memsrc_add(m, SP_K_GPU_SPAN, SP_API_cudaLaunchKernel, pid, pid, launch, ready[r]);
			e->f[SP_F_OP] = op[r];
			e = an_memsrc_add(m, SP_K_COMM, SP_API_ncclAllReduce, pid, pid, launch + 10 * US, launch + 30 * US);
			e->f[SP_F_COMM] = 0x5000 + (uint64_t)r;
			e->f[SP_F_BYTES] = 64 << 20;
			e->f[SP_F_PEER] = (uint64_t)-1;
			e = an_memsrc_add(m, SP_K_LAUNCH, SP_API_cuLaunchKernel, pid, pid, launch + 15 * US,
					  launch + 18 * US);
			e->f[SP_F_NAME] = cname;
			e->f[SP_F_OP] = ++op[r];
			e = an_memsrc_add(m, SP_K_GPU_SPAN, SP_API_cuLaunchKernel, pid, pid, ready[r], last + 300 * US);
			e->f[SP_F_OP] = op[r];
		}
	}
	an_memsrc_sort(m);
}

static const struct an_result_finding *find(const struct an_analysis *a, int kind)
{
	for (size_t i = 0; i < a->nfnd; i++)
		if (a->fnd[i].kind == kind)
			return &a->fnd[i];
	return NULL;
}

static double evidence(const struct an_result_finding *f, const char *key)
{
	for (int i = 0; i < f->nev; i++)
		if (!strcmp(f->ev[i].key, key))
			return f->ev[i].num;
	return -1;
}

Test(analyze_comm, a_rank_late_in_its_input_is_the_straggler)
{
	struct an_memsrc m;
	struct an_source src;
	struct an_options o;
	struct an_analysis a;
	char err[256];
	uint64_t late[NRANK];
	build(&m, 2, 5, late);
	an_memsrc_source(&m, &src);
	an_options_init(&o);
	cr_assert_eq(an_analyze(&src, &o, &a, err, sizeof(err)), 0, "%s", err);
	cr_expect_eq(a.nranks, NRANK);
	cr_expect_eq(a.comm.collectives, NSTEP);
	cr_expect_eq(a.comm.gpu_timed, NSTEP);
	cr_assert_eq(a.comm.nranks, NRANK);
	const struct cm_rank *r = &a.comm.ranks[2];
	cr_expect_eq(r->rank, 2);
	cr_expect_eq(r->last, NSTEP);
	cr_expect_eq(r->late_sum_ns, late[2]);
	cr_expect(r->late_mean_ns >= 4950 * US && r->late_mean_ns <= 5050 * US, "lateness %lu",
		  (unsigned long)r->late_mean_ns);
	const struct an_result_finding *f = find(&a, AN_F_STRAGGLER_RANK);
	cr_assert(f, "straggler_rank did not fire");
	cr_expect_eq(evidence(f, "rank"), 2);
	cr_expect_eq(evidence(f, "last_share"), 1.0);
	cr_expect_geq(f->severity, 1);
	an_analysis_free(&a);
	an_memsrc_free(&m);
}

Test(analyze_comm, no_straggler_no_finding)
{
	struct an_memsrc m;
	struct an_source src;
	struct an_options o;
	struct an_analysis a;
	char err[256];
	uint64_t late[NRANK];
	build(&m, -1, 0, late);
	an_memsrc_source(&m, &src);
	an_options_init(&o);
	cr_assert_eq(an_analyze(&src, &o, &a, err, sizeof(err)), 0, "%s", err);
	cr_expect_eq(a.comm.collectives, NSTEP);
	cr_expect_eq(a.comm.gpu_timed, NSTEP);
	for (size_t k = 0; k < a.comm.nranks; k++) {
		cr_expect_eq(a.comm.ranks[k].late_sum_ns, late[k]);
		cr_expect_leq(a.comm.ranks[k].late_mean_ns, 50 * US);
	}
	cr_expect_null(find(&a, AN_F_STRAGGLER_RANK));
	an_analysis_free(&a);
	an_memsrc_free(&m);
}
