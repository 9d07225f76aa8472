/*
 * test_analyze_fuzz.c - regression tests for the inputs `make fuzz`
 * (tests/fuzz/) found to crash or mislead the analysis, each rebuilt in memory
 * (struct an_memsrc) as the smallest timeline that shows the fault, so they run
 * without libFuzzer.
 *
 * Divided by finding; each test says what the damaged trace held.
 */
#include <criterion/criterion.h>
#include <string.h>

#include "analyze.h"

#define PID 300
#define T0  1000000000ull

/* A trainer (it launches a kernel) whose records the test completes. */
static void trainer(struct an_memsrc *m)
{
	an_memsrc_init(m, PID);
	uint32_t k = an_memsrc_string(m, "kernel");
	struct sp_event *e = an_memsrc_add(m, SP_K_LAUNCH, SP_API_cudaLaunchKernel, PID, PID, T0, T0 + 100);
	e->f[SP_F_NAME] = k;
	e->f[SP_F_OP] = 5;
	an_memsrc_add(m, SP_K_GPU_SPAN, SP_API_cudaLaunchKernel, PID, PID, T0 + 200, T0 + 1000)->f[SP_F_OP] = 5;
}

static void analyze(struct an_memsrc *m, struct an_analysis *a)
{
	an_memsrc_sort(m);
	struct an_source src;
	an_memsrc_source(m, &src);
	struct an_options o;
	an_options_init(&o);
	char err[256];
	cr_assert_eq(an_analyze(&src, &o, a, err, sizeof(err)), 0, "%s", err);
}

/*
 * fuzz_analyze crash 8d616273: a GPU span whose op no launch or copy named (op 0
 * after a corrupt copy slot was skipped) in a trace without iterations. The op
 * ring's unused slots looked like a pageable copy of iteration 0, and the span
 * "corrected" iteration 0 of an empty iteration array: SIGSEGV.
 */
Test(analyze_fuzz, gpu_span_of_unknown_op_without_iterations)
{
	struct an_memsrc m;
	trainer(&m);
	an_memsrc_add(&m, SP_K_GPU_SPAN, SP_API_cudaMemcpyAsync, PID, PID, T0 + 2000, T0 + 5000)->f[SP_F_OP] = 0;
	struct an_analysis a;
	analyze(&m, &a);
	cr_expect_eq(a.nit, 0, "no step marks, ranges or repeated launches: no iterations");
	cr_expect_eq(a.trainer_pid, PID);
	an_analysis_free(&a);
	an_memsrc_free(&m);
}

/* The same span with iterations: iteration 0 had no copy, so no copy time may appear in it. */
Test(analyze_fuzz, gpu_span_of_unknown_op_leaves_copy_time_alone)
{
	struct an_memsrc m;
	trainer(&m);
	for (int i = 0; i < 3; i++)
		an_memsrc_add(&m, SP_K_STEP, SP_API_stepprof_step, PID, PID, T0 + 10000 * (uint64_t)(i + 1),
			      T0 + 10000 * (uint64_t)(i + 1))
		    ->f[SP_F_VALUE] = (uint64_t)i;
	an_memsrc_add(&m, SP_K_GPU_SPAN, SP_API_cudaMemcpyAsync, PID, PID, T0 + 12000, T0 + 15000)->f[SP_F_OP] = 0;
	struct an_analysis a;
	analyze(&m, &a);
	cr_assert_geq(a.nit, 1);
	for (size_t i = 0; i < a.nit; i++) {
		cr_expect_eq(a.it[i].pageable_ns, 0, "iteration %zu: pageable copy time without a copy", i);
		cr_expect_eq(a.it[i].pinned_ns, 0, "iteration %zu: pinned copy time without a copy", i);
	}
	an_analysis_free(&a);
	an_memsrc_free(&m);
}
