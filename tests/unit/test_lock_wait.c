/*
 * test_lock_wait.c - the training thread's semaphore waits (lock_wait records)
 * in the breakdown (analyzer/analyze.c, breakdown.c): input only for their
 * overlap with a loader_wait of another thread of the same process (a
 * pin-memory thread receiving the batch), other otherwise.
 *
 * Each scenario is 12 iterations of 10 ms, each begun by a stepprof_step mark,
 * whose timeline (microseconds from the iteration's start) the test chooses:
 * the training thread TID launches one kernel at 4000 (a 5 us call) that runs
 * [4005, 9005) and synchronises with it [4005, 9005). Ground truth is that
 * timeline, computed by hand below.
 */
#include <criterion/criterion.h>
#include <string.h>

#include "analyze.h"

#define US    1000ull
#define PID   100
#define TID   101 /* the training thread: it launches the kernels */
#define PIN   102 /* a pin-memory thread of the same process */
#define WPID  200 /* a loader worker process */
#define NITER 12
#define ITER  10000ull
#define T0    1000000000ull

/* A span [b, e) of the iteration starting at t, in us. */
struct span {
	uint64_t b, e;
};

struct scenario {
	struct span lock;   /* the training thread's lock_wait; empty: none */
	struct span pin;    /* the pin thread's loader_wait; empty: none */
	struct span worker; /* a worker process's loader_wait; empty: none */
};

static struct sp_event *add(struct an_memsrc *m, unsigned kind, unsigned api, int32_t pid, int32_t tid, uint64_t t,
			    struct span s)
{
	return an_memsrc_add(m, kind, api, pid, tid, t + s.b * US, t + s.e * US);
}

static void loader_wait(struct an_memsrc *m, int32_t pid, int32_t tid, uint64_t t, struct span s)
{
	if (s.e <= s.b)
		return;
	struct sp_event *e = add(m, SP_K_LOADER_WAIT, SP_API_read, pid, tid, t, s);
	e->f[SP_F_FD_TYPE] = SP_FDTYPE_PIPE;
	e->f[SP_F_BYTES] = 64;
}

static void run(const struct scenario *sc, struct an_analysis *a)
{
	struct an_memsrc m;
	an_memsrc_init(&m, PID);
	uint32_t kname = an_memsrc_string(&m, "trainer_kernel");
	struct sp_event *e = an_memsrc_add(&m, SP_K_FORK, 0, PID, TID, T0 - 10, T0 - 10);
	e->f[SP_F_PID] = WPID;
	for (unsigned i = 0; i < NITER; i++) {
		uint64_t t = T0 + i * ITER * US;
		an_memsrc_add(&m, SP_K_STEP, SP_API_stepprof_step, PID, TID, t, t)->f[SP_F_VALUE] = i;
		if (sc->lock.e > sc->lock.b)
			add(&m, SP_K_LOCK_WAIT, SP_API_sem_clockwait, PID, TID, t, sc->lock);
		loader_wait(&m, PID, PIN, t, sc->pin);
		loader_wait(&m, WPID, WPID, t, sc->worker);
		e = add(&m, SP_K_LAUNCH, SP_API_cudaLaunchKernel, PID, TID, t, (struct span){4000, 4005});
		e->f[SP_F_NAME] = kname;
		e->f[SP_F_OP] = i + 1;
		add(&m, SP_K_GPU_SPAN, 0, PID, TID, t, (struct span){4005, 9005})->f[SP_F_OP] = i + 1;
		add(&m, SP_K_SYNC, SP_API_cudaStreamSynchronize, PID, TID, t, (struct span){4005, 9005});
	}
	/* the last iteration ends at the next mark */
	an_memsrc_add(&m, SP_K_STEP, SP_API_stepprof_step, PID, TID, T0 + NITER * ITER * US, T0 + NITER * ITER * US);
	struct an_options o;
	struct an_source src;
	char err[256] = "";
	an_options_init(&o);
	an_memsrc_sort(&m);
	an_memsrc_source(&m, &src);
	cr_assert_eq(an_analyze(&src, &o, a, err, sizeof(err)), 0, "%s", err);
	an_memsrc_free(&m);
	cr_assert_eq(a->source_kind, AN_SRC_API);
	cr_assert_eq(a->training_tid, TID);
	cr_assert_geq(a->nit, NITER - 1);
}

/* Every iteration: input and other as given (us), compute and sync 5000 and 0, blocked input as input. */
static void expect(const struct an_analysis *a, uint64_t input, uint64_t other)
{
	for (size_t i = 0; i < a->nit; i++) {
		const struct an_iter *it = &a->it[i];
		cr_expect_eq(it->end_ns - it->start_ns, ITER * US, "iteration %zu wall %lu", i,
			     (unsigned long)(it->end_ns - it->start_ns));
		cr_expect_eq(it->bd[AN_INPUT], input * US, "iteration %zu input %lu ns, want %lu us", i,
			     (unsigned long)it->bd[AN_INPUT], (unsigned long)input);
		cr_expect_eq(it->bd[AN_COMPUTE], 5000 * US, "iteration %zu compute %lu", i,
			     (unsigned long)it->bd[AN_COMPUTE]);
		cr_expect_eq(it->bd[AN_OTHER], other * US, "iteration %zu other %lu ns, want %lu us", i,
			     (unsigned long)it->bd[AN_OTHER], (unsigned long)other);
		cr_expect_eq(it->blocked[AN_BLK_INPUT], input * US, "iteration %zu blocked input %lu ns", i,
			     (unsigned long)it->blocked[AN_BLK_INPUT]);
		cr_expect_eq(it->blocked[AN_BLK_SYNC], 5000 * US);
	}
}

/*
 * The training thread waits [0, 4000) for its batch; the pin thread receives it
 * from the worker [500, 4200) (it started after the previous hand-over and
 * finishes pinning after the wake-up). Input is the overlap [500, 4000); the
 * first 500 us (the lock wait alone) and the 5 us launch and [9005, 10000) are other.
 */
Test(lock_wait, the_training_threads_wait_for_a_pin_thread_in_a_loader_wait_is_input)
{
	struct an_analysis a;
	run(&(struct scenario){.lock = {0, 4000}, .pin = {500, 4200}}, &a);
	expect(&a, 3500, 500 + 5 + 995);
	an_analysis_free(&a);
}

/*
 * Prefetch: the pin thread waits for the workers [4005, 9900) while the training
 * thread computes; the training thread's own short wait [0, 300) for the batch
 * already received overlaps no loader wait. No input at all: a pin thread's
 * waits are not the training thread's.
 */
Test(lock_wait, a_pin_thread_waiting_while_the_training_thread_computes_is_not_input)
{
	struct an_analysis a;
	run(&(struct scenario){.lock = {0, 300}, .pin = {4005, 9900}}, &a);
	expect(&a, 0, 4000 + 5 + 995);
	an_analysis_free(&a);
}

/*
 * The training thread blocks on a semaphore [0, 4000) while no thread of its
 * process waits for a batch; a worker process is in a loader wait meanwhile
 * (another process: not this one's hand-over). It stays other.
 */
Test(lock_wait, a_lock_wait_without_a_loader_wait_of_its_process_stays_other)
{
	struct an_analysis a;
	run(&(struct scenario){.lock = {0, 4000}, .worker = {0, 3000}}, &a);
	expect(&a, 0, 4000 + 5 + 995);
	an_analysis_free(&a);
}

/* The pin thread's loader waits alone (the training thread never blocks on a lock) are no input either. */
Test(lock_wait, a_pin_threads_loader_wait_alone_is_not_input)
{
	struct an_analysis a;
	run(&(struct scenario){.pin = {0, 3000}}, &a);
	expect(&a, 0, 4000 + 5 + 995);
	an_analysis_free(&a);
}
