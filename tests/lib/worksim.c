/*
 * worksim.c - the workload simulator of the analysis's unit tests (see
 * worksim.h): its records, the analysis of what it recorded, and a finding of
 * that analysis.
 */
#include "worksim.h"

#include <criterion/criterion.h>
#include <stdlib.h>
#include <string.h>

void sim_init(struct sim *s)
{
	memset(s, 0, sizeof(*s));
	an_memsrc_init(&s->m, PID);
	s->t = s->gpu = 1000000000ull;
	s->kname = an_memsrc_string(&s->m, "trainer_kernel");
	s->kname2 = an_memsrc_string(&s->m, "other_kernel");
	s->seed = 7;
}

uint64_t J(struct sim *s, uint64_t d)
{
	if (s->jitter <= 0)
		return d;
	double u = (double)rand_r(&s->seed) / RAND_MAX; /* [0, 1] */
	return (uint64_t)((double)d * (1.0 - s->jitter + 2 * s->jitter * u));
}

struct sp_event *add(struct sim *s, unsigned kind, unsigned api, uint64_t b, uint64_t e)
{
	return an_memsrc_add(&s->m, kind, api, PID, TID, b, e);
}

void sim_input(struct sim *s, uint64_t dur)
{
	struct sp_event *e = add(s, SP_K_LOADER_WAIT, SP_API_read, s->t, s->t + dur);
	e->f[SP_F_FD_TYPE] = SP_FDTYPE_PIPE;
	e->f[SP_F_BYTES] = 64;
	s->t += dur;
}

void sim_copy(struct sim *s, unsigned dir, uint64_t bytes, uint64_t gpu_dur, int pageable)
{
	uint32_t op = ++s->op;
	uint64_t gb = s->t > s->gpu ? s->t : s->gpu, ge = gb + gpu_dur;
	s->gpu = ge;
	uint64_t he = pageable ? ge : s->t + 10 * US;
	struct sp_event *e = add(s, SP_K_COPY, SP_API_cudaMemcpyAsync, s->t, he);
	e->f[SP_F_DIRECTION] = dir;
	e->f[SP_F_BYTES] = bytes;
	e->f[SP_F_OP] = op;
	e->f[SP_F_HOST_MEMORY] = pageable ? SP_HOSTMEM_PAGEABLE : SP_HOSTMEM_PINNED;
	e = add(s, SP_K_GPU_SPAN, 0, gb, ge);
	e->f[SP_F_OP] = op;
	s->t = he;
}

void sim_kernel(struct sim *s, uint32_t name, uint64_t dur)
{
	uint32_t op = ++s->op;
	struct sp_event *e = add(s, SP_K_LAUNCH, SP_API_cudaLaunchKernel, s->t, s->t + 5 * US);
	e->f[SP_F_NAME] = name;
	e->f[SP_F_OP] = op;
	s->t += 5 * US;
	uint64_t gb = s->t > s->gpu ? s->t : s->gpu;
	e = add(s, SP_K_GPU_SPAN, 0, gb, gb + dur);
	e->f[SP_F_OP] = op;
	s->gpu = gb + dur;
}

void sim_sync(struct sim *s)
{
	uint64_t e = s->t > s->gpu ? s->t : s->gpu;
	add(s, SP_K_SYNC, SP_API_cudaStreamSynchronize, s->t, e);
	s->t = e;
}

/* An iteration's start as most findings' tests make it: a step mark, then dur of input wait. */
void sim_step(struct sim *s, uint64_t dur)
{
	add(s, SP_K_STEP, SP_API_stepprof_step, s->t, s->t);
	sim_input(s, dur);
}

/* An iteration's end: one kernel of dur, then the sync that waits for it. */
void sim_compute(struct sim *s, uint64_t dur)
{
	sim_kernel(s, s->kname, dur);
	sim_sync(s);
}

/*
 * The reference iteration (no jitter): input 4000, host 1000, H2D 2 MiB pinned
 * (GPU 2000), 4 kernels of 1000, D2H 4 KiB (GPU 100), sync. Timeline from its
 * start T: input [T, T+4000), host [4000, 5000), H2D on the GPU [5000, 7000),
 * kernels [7000, 11000), D2H [11000, 11100), the sync returns at 11100.
 */
void sim_iteration(struct sim *s, int markers)
{
	uint64_t start = s->t;
	if (markers == 2)
		add(s, SP_K_STEP, SP_API_stepprof_step, s->t, s->t);
	sim_input(s, J(s, 4000 * US));
	sim_batch(s);
	if (markers == 1) {
		struct sp_event *e = add(s, SP_K_RANGE, SP_API_nvtx, start, s->t);
		e->f[SP_F_NAME] = an_memsrc_string(&s->m, "train_step");
	}
}

/* The reference iteration once its batch is there: host 1000, H2D, kernels, D2H, sync. */
void sim_batch(struct sim *s)
{
	s->t += J(s, 1000 * US);
	sim_copy(s, SP_DIR_H2D, 2 << 20, J(s, 2000 * US), 0);
	for (int k = 0; k < 4; k++)
		sim_kernel(s, s->kname, J(s, 1000 * US));
	sim_copy(s, SP_DIR_D2H, 4096, J(s, 100 * US), 0);
	sim_sync(s);
}

/* Analyze what the simulator recorded with options o (NULL: the defaults); it must succeed. */
void run(struct sim *s, const struct an_options *o, struct an_analysis *a)
{
	struct an_options dflt;
	struct an_source src;
	char err[256] = "";
	if (!o) {
		an_options_init(&dflt);
		o = &dflt;
	}
	an_memsrc_sort(&s->m);
	an_memsrc_source(&s->m, &src);
	cr_assert_eq(an_analyze(&src, o, a, err, sizeof(err)), 0, "%s", err);
}

/* run(), then the simulator is freed: how a scenario that needs nothing more of it ends. */
void run_free(struct sim *s, const struct an_options *o, struct an_analysis *a)
{
	run(s, o, a);
	an_memsrc_free(&s->m);
}

/* The trainer forks a loader worker (WPID) just before the first record. */
void sim_fork_worker(struct sim *s)
{
	struct sp_event *e = add(s, SP_K_FORK, 0, s->t - 10, s->t - 10);
	e->f[SP_F_PID] = WPID;
}

/* The worker opens path as fd, reads bytes from the file and closes it: [t0, t1), [t1, t2), [t2, t3). */
void worker_read_file(struct sim *s, uint32_t path, int fd, uint64_t bytes, uint64_t t0, uint64_t t1, uint64_t t2,
		      uint64_t t3)
{
	struct sp_event *e = an_memsrc_add(&s->m, SP_K_OPEN, SP_API_open, WPID, WPID, t0, t1);
	e->f[SP_F_PATH] = path;
	e->f[SP_F_FD] = (uint64_t)fd;
	e = an_memsrc_add(&s->m, SP_K_READ, SP_API_read, WPID, WPID, t1, t2);
	e->f[SP_F_FD] = (uint64_t)fd;
	e->f[SP_F_BYTES] = bytes;
	e->f[SP_F_FD_TYPE] = SP_FDTYPE_FILE;
	e = an_memsrc_add(&s->m, SP_K_CLOSE, SP_API_close, WPID, WPID, t2, t3);
	e->f[SP_F_FD] = (uint64_t)fd;
}

void alloc_ev(struct sim *s, unsigned kind, uint64_t dptr, uint64_t bytes, uint64_t *live)
{
	if (kind == SP_K_ALLOC)
		*live += bytes;
	else
		*live -= bytes;
	struct sp_event *e = add(s, kind, kind == SP_K_ALLOC ? SP_API_cudaMalloc : SP_API_cudaFree, s->t, s->t + US);
	e->f[SP_F_DPTR] = dptr;
	e->f[SP_F_BYTES] = bytes;
	e->f[SP_F_LIVE] = *live;
	s->t += 2 * US;
}

const struct an_result_finding *find(const struct an_analysis *a, int kind, const char *signal)
{
	for (size_t i = 0; i < a->nfnd; i++)
		if (a->fnd[i].kind == kind && (!signal || (a->fnd[i].signal && !strcmp(a->fnd[i].signal, signal))))
			return &a->fnd[i];
	return NULL;
}
