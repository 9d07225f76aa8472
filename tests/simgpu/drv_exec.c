/*
 * drv_exec.c - what runs on the simulated GPU, and when: the engine under every
 * driver call that queues work. The calls themselves are in their CUDA API
 * groups' files: drv_stream.c, drv_event.c, drv_memop.c, drv_copy.c,
 * drv_launch.c, drv_allocasync.c and drv_graph.c.
 *
 *   1. operations and streams: each stream is a FIFO served by its own worker
 *      thread; an operation may also wait for other streams (dependencies), which
 *      is how the legacy default stream, cuStreamWaitEvent and events work
 *   2. stream handles: legacy (0 / CU_STREAM_LEGACY), per-thread
 *      (CU_STREAM_PER_THREAD or the _ptds/_ptsz entry points), created streams
 *   3. the body of each operation (copies at a bandwidth, memsets, kernels, host
 *      functions, event timestamps, stream-ordered frees, graphs, stream memops)
 *
 * Semantics follow CUDA's documentation (see README.md for the deliberate
 * differences): an operation on the legacy stream starts after all earlier work
 * of the device's blocking streams and blocks later work on them; non-blocking
 * streams do not synchronise with it; copies touching pageable memory return to
 * the host only when done, even when called Async, except that one from pageable
 * memory to the device leaves its last 64 KiB in flight (staged).
 */
#include "sim.h"

#include <errno.h>
#include <sched.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>

/* ---------------------------------------------------------------- 1. operations and streams */

struct CUstream_st *sim_all_streams; /* every stream ever made, newest first */
static unsigned long long next_stream_id = 16;
static __thread struct CUstream_st *ptds[SIM_MAX_DEV];
static pthread_key_t ptds_key;
static pthread_once_t ptds_once = PTHREAD_ONCE_INIT;

static uint64_t op_run(struct sim_op *op, uint64_t start);
static void op_done_locked(struct sim_op *op, struct CUstream_st *s, uint64_t t);
static void event_reached_locked(struct CUstream_st *s, struct sim_op *op);

static int deps_met(const struct sim_op *op)
{
	for (int i = 0; i < op->ndeps; i++)
		if (op->deps[i].s->completed < op->deps[i].seq)
			return 0;
	return 1;
}

/* When operation seq of s ended on its timeline; 0 when too old to be known. */
static uint64_t end_of(const struct CUstream_st *s, uint64_t seq)
{
	return s->ends[seq % 64].seq == seq ? s->ends[seq % 64].end : 0;
}

/*
 * RATIONALE: each stream keeps a timeline, as a GPU would. An operation starts when
 * the stream reaches it: at the latest of its submission, the end of the stream's
 * previous operation and the ends of what it waits for; it lasts what its body takes
 * (bytes/bandwidth for a copy, the host function's run time for a kernel). Events
 * take that start time. So a worker thread woken late by a loaded machine shifts
 * nothing the program can measure: the timeline is never later than real time, and
 * the worker catches up by sleeping less.
 */
/*
 * RATIONALE: a GPU runs beside the host's CPUs, not on them. An idle worker is
 * SCHED_BATCH, so that waking it (work queued) never preempts the host thread
 * that queued the work: as SCHED_OTHER it did, on a loaded machine, and the
 * launching thread lost its CPU for milliseconds right after each launch, a
 * host delay no real launch causes. While it runs an operation it is
 * SCHED_OTHER again: a kernel's own sleep ends on time (as SCHED_BATCH, each
 * wake-up of a 50 us kernel waited for a busy CPU's slice: 2.3 ms a kernel).
 */
static void worker_batch(int on, int *cur)
{
	struct sched_param p = {0};
	if (*cur == on)
		return;
	pthread_setschedparam(pthread_self(), on ? SCHED_BATCH : SCHED_OTHER, &p);
	*cur = on;
}

static void *worker(void *arg)
{
	struct CUstream_st *s = arg;
	int batch = -1;

	pthread_mutex_lock(&sim_lock);
	for (;;) {
		struct sim_op *op = s->head;
		uint64_t start, end;
		if (!op) {
			if (s->dying)
				break;
			worker_batch(1, &batch);
			pthread_cond_wait(&sim_cond, &sim_lock);
			continue;
		}
		if (!deps_met(op)) {
			worker_batch(1, &batch);
			pthread_cond_wait(&sim_cond, &sim_lock);
			continue;
		}
		s->head = op->next;
		if (!s->head)
			s->tail = NULL;
		start = op->submit_ns > s->last_end ? op->submit_ns : s->last_end;
		for (int i = 0; i < op->ndeps; i++) {
			uint64_t e = end_of(op->deps[i].s, op->deps[i].seq);
			if (e > start)
				start = e;
		}
		if (op->type == OP_EVENT) {
			end = start; /* reached, under the lock: a query never sees it taken but not done */
		} else {
			pthread_mutex_unlock(&sim_lock);
			worker_batch(0, &batch);
			end = op_run(op, start);
			pthread_mutex_lock(&sim_lock);
		}
		op_done_locked(op, s, start);
		s->last_end = end;
		s->ends[op->seq % 64].seq = op->seq;
		s->ends[op->seq % 64].end = end;
		s->completed = op->seq;
		pthread_cond_broadcast(&sim_cond);
		sim_op_free(op);
	}
	/* A destroyed stream that has done all its work leaves the list that legacy
	 * work and context syncs walk; the struct itself stays (events may name it). */
	s->exited = 1;
	for (struct CUstream_st **pp = &sim_all_streams; *pp; pp = &(*pp)->next_all)
		if (*pp == s) {
			*pp = s->next_all;
			break;
		}
	pthread_mutex_unlock(&sim_lock);
	return NULL;
}

/* Workers run with every signal blocked, so the program's handlers run on its own threads. */
static int stream_start_locked(struct CUstream_st *s)
{
	sigset_t all, old;
	pthread_attr_t a;
	int rc;

	sigfillset(&all);
	pthread_sigmask(SIG_SETMASK, &all, &old);
	pthread_attr_init(&a);
	pthread_attr_setdetachstate(&a, PTHREAD_CREATE_DETACHED);
	rc = pthread_create(&s->thr, &a, worker, s);
	pthread_attr_destroy(&a);
	pthread_sigmask(SIG_SETMASK, &old, NULL);
	if (rc == 0)
		s->started = 1;
	return rc;
}

struct CUstream_st *sim_stream_new_locked(int dev, enum sim_stream_kind kind, unsigned int flags, int prio)
{
	struct CUstream_st *s = calloc(1, sizeof(*s));

	if (!s)
		return NULL;
	s->dev = dev;
	s->kind = kind;
	s->flags = flags;
	s->prio = prio;
	s->id = kind == ST_LEGACY ? 1 : kind == ST_PERTHREAD ? 2 + 16 * (next_stream_id++) : next_stream_id++;
	s->next_all = sim_all_streams;
	sim_all_streams = s;
	return s;
}

/* A blocking stream (not CU_STREAM_NON_BLOCKING) synchronises with the legacy stream. */
int sim_stream_blocking(const struct CUstream_st *s)
{
	return s->kind == ST_PERTHREAD || (s->kind == ST_USER && !(s->flags & CU_STREAM_NON_BLOCKING));
}

int sim_add_dep(struct sim_op *op, struct CUstream_st *s, uint64_t seq)
{
	struct sim_dep *nd;

	if (s->completed >= seq)
		return 0;
	nd = realloc(op->deps, (size_t)(op->ndeps + 1) * sizeof(*nd));
	if (!nd)
		return -1;
	op->deps = nd;
	op->deps[op->ndeps++] = (struct sim_dep){s, seq};
	return 0;
}

void sim_wait_seq_locked(struct CUstream_st *s, uint64_t seq)
{
	while (s->completed < seq)
		pthread_cond_wait(&sim_cond, &sim_lock);
}

void sim_graph_append(struct CUgraph_st *g, struct sim_op *op)
{
	op->next = NULL;
	if (g->tail)
		g->tail->next = op;
	else
		g->head = op;
	g->tail = op;
	g->n++;
}

static struct CUstream_st *legacy_locked(int dev);

/*
 * Queue op on s (or record it into s's capture graph). host_sync: return only once
 * it has run (1), or once its source is staged (SIM_HOST_STAGED: a pageable-to-device
 * copy, drv_copy.c). Takes ownership of op in every case.
 */
CUresult sim_enqueue(struct CUstream_st *s, struct sim_op *op, int host_sync)
{
	CUresult r = CUDA_SUCCESS;

	pthread_mutex_lock(&sim_lock);
	if (s->cgraph) {
		if (s->cinvalid) {
			r = CUDA_ERROR_STREAM_CAPTURE_INVALIDATED;
			goto fail;
		}
		if (op->type == OP_FREE || op->type == OP_WAITVAL) {
			r = CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED;
			s->corigin->cinvalid = s->cinvalid = 1;
			goto fail;
		}
		sim_graph_append(s->cgraph, op);
		pthread_mutex_unlock(&sim_lock);
		return CUDA_SUCCESS;
	}
	if (s->kind == ST_LEGACY) {
		/* Work on the legacy stream waits for every blocking stream of the device. */
		for (struct CUstream_st *o = sim_all_streams; o; o = o->next_all) {
			if (o == s || o->dev != s->dev || !sim_stream_blocking(o))
				continue;
			if (o->cgraph && o->cmode != CU_STREAM_CAPTURE_MODE_RELAXED) {
				r = CUDA_ERROR_STREAM_CAPTURE_IMPLICIT;
				o->corigin->cinvalid = o->cinvalid = 1;
				goto fail;
			}
			if (sim_add_dep(op, o, o->submitted))
				goto oom;
		}
	} else if (sim_stream_blocking(s)) {
		struct CUstream_st *l = sim_devs[s->dev].legacy;
		if (l && sim_add_dep(op, l, l->submitted))
			goto oom;
	}
	if (!s->started && stream_start_locked(s) != 0)
		goto oom;
	op->seq = ++s->submitted;
	op->submit_ns = sim_now_ns();
	if (op->type == OP_EVENT) {
		struct CUevent_st *ev = op->u.event.ev;
		ev->s = s;
		ev->seq = op->seq;
		ev->has_time = 0;
		ev->captured = 0;
	}
	op->next = NULL;
	/*
	 * An event recorded on an idle stream is reached at once, as a GPU reaches it
	 * within microseconds, and without waking anyone: nothing can wait for it yet
	 * (its sequence number is new). RATIONALE: waking the stream's worker here let
	 * a loaded machine's scheduler preempt the recording thread before its next
	 * call (a launch) reached the stream, a host delay no GPU adds.
	 */
	if (op->type == OP_EVENT && !s->tail && s->completed + 1 == op->seq && deps_met(op)) {
		event_reached_locked(s, op);
		pthread_mutex_unlock(&sim_lock);
		return CUDA_SUCCESS;
	}
	if (s->tail) {
		s->tail->next = op; /* the worker is busy with the queue: no need to wake anyone */
	} else {
		s->head = op;
		pthread_cond_broadcast(&sim_cond);
	}
	s->tail = op;
	if (host_sync == SIM_HOST_STAGED)
		while (s->completed < op->seq && s->released < op->seq)
			pthread_cond_wait(&sim_cond, &sim_lock);
	else if (host_sync)
		sim_wait_seq_locked(s, op->seq);
	pthread_mutex_unlock(&sim_lock);
	return CUDA_SUCCESS;
oom:
	r = CUDA_ERROR_OUT_OF_MEMORY;
fail:
	sim_op_free(op);
	pthread_mutex_unlock(&sim_lock);
	return r;
}

struct sim_op *sim_op_new(enum sim_op_type type)
{
	struct sim_op *op = calloc(1, sizeof(*op));

	if (op)
		op->type = type;
	return op;
}

/* ---------------------------------------------------------------- 2. stream handles */

static struct CUstream_st *legacy_locked(int dev)
{
	struct sim_dev *d = &sim_devs[dev];

	if (!d->legacy)
		d->legacy = sim_stream_new_locked(dev, ST_LEGACY, 0, 0);
	return d->legacy;
}

static void ptds_exit(void *unused)
{
	sim_exec_thread_exit();
}

static void ptds_key_init(void)
{
	pthread_key_create(&ptds_key, ptds_exit);
}

/* A thread's per-thread default streams end with the thread (after draining). */
void sim_exec_thread_exit(void)
{
	pthread_mutex_lock(&sim_lock);
	for (int i = 0; i < SIM_MAX_DEV; i++)
		if (ptds[i]) {
			ptds[i]->dying = 1;
			ptds[i] = NULL;
		}
	pthread_cond_broadcast(&sim_cond);
	pthread_mutex_unlock(&sim_lock);
}

static struct CUstream_st *perthread_locked(int dev)
{
	if (!ptds[dev]) {
		pthread_once(&ptds_once, ptds_key_init);
		ptds[dev] = sim_stream_new_locked(dev, ST_PERTHREAD, 0, 0);
		pthread_setspecific(ptds_key, (void *)1);
	}
	return ptds[dev];
}

/* The stream a handle names; per_thread: the call came through a _ptds/_ptsz entry point. */
CUresult sim_stream_of(CUstream h, int per_thread, struct CUstream_st **out)
{
	CUresult err = CUDA_SUCCESS;
	int dev;

	if (!sim_inited) /* also in a forked child: its parent's workers do not exist there */
		return CUDA_ERROR_NOT_INITIALIZED;
	if (h && h != CU_STREAM_LEGACY && h != CU_STREAM_PER_THREAD) {
		if (h->dying)
			return CUDA_ERROR_INVALID_HANDLE;
		*out = h;
		return CUDA_SUCCESS;
	}
	dev = sim_cur_dev(&err);
	if (dev < 0)
		return err;
	pthread_mutex_lock(&sim_lock);
	if (h == CU_STREAM_PER_THREAD || (!h && per_thread))
		*out = perthread_locked(dev);
	else
		*out = legacy_locked(dev);
	pthread_mutex_unlock(&sim_lock);
	return *out ? CUDA_SUCCESS : CUDA_ERROR_OUT_OF_MEMORY;
}

/* ---------------------------------------------------------------- 3. operation bodies */

static void sleep_until(uint64_t t)
{
	struct timespec ts = {(time_t)(t / 1000000000ull), (long)(t % 1000000000ull)};

	while (clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &ts, NULL) == EINTR)
		;
}

/*
 * Fault in [p, p+n) before a copy is timed: the first touch of fresh memory (page
 * zeroing) is the host's cost, not the link's, and on a loaded machine it can exceed
 * the whole modelled copy time. Errors (an unmapped hole, a read-only page) are left
 * for the copy itself to meet, as it would without this.
 */
static void prefault(const void *p, size_t n, int write)
{
	uintptr_t pg = 4096, a = (uintptr_t)p & ~(pg - 1), b = ((uintptr_t)p + n + pg - 1) & ~(pg - 1);

	if (n)
		madvise((void *)a, b - a, write ? MADV_POPULATE_WRITE : MADV_POPULATE_READ);
}

/*
 * Copies and memsets last exactly bytes/bandwidth on the stream's timeline (1 GB/s is
 * one byte per nanosecond): the worker moves the data, then sleeps out the rest.
 * NOTE: when the host's memcpy is slower than the model (a loaded machine, a high
 * SIMGPU_*_GBPS), the data is in place later than the timeline says; the stream
 * then lags behind its timeline until an idle moment, but every duration the
 * program can measure with events stays bytes/bandwidth.
 */
static uint64_t body_copy(struct sim_op *op, uint64_t start)
{
	size_t w = op->u.copy.width, bytes = w * op->u.copy.height * op->u.copy.depth;
	size_t dl = (op->u.copy.depth - 1) * op->u.copy.dslice + (op->u.copy.height - 1) * op->u.copy.dpitch + w;
	size_t sl = (op->u.copy.depth - 1) * op->u.copy.sslice + (op->u.copy.height - 1) * op->u.copy.spitch + w;
	uint64_t end;

	prefault(op->u.copy.dst, dl, 1);
	prefault(op->u.copy.src, sl, 0);

	for (size_t z = 0; z < op->u.copy.depth; z++)
		for (size_t y = 0; y < op->u.copy.height; y++)
			memmove(op->u.copy.dst + z * op->u.copy.dslice + y * op->u.copy.dpitch,
				op->u.copy.src + z * op->u.copy.sslice + y * op->u.copy.spitch, w);
	if (op->u.copy.staged_on) {
		/* The source is read: the caller may return once all but the staged tail
		 * has crossed the link (drv_copy.c). */
		sleep_until(start + (uint64_t)((double)(bytes - op->u.copy.staged) / op->u.copy.gbps));
		pthread_mutex_lock(&sim_lock);
		op->u.copy.staged_on->released = op->seq;
		pthread_cond_broadcast(&sim_cond);
		pthread_mutex_unlock(&sim_lock);
	}
	end = start + (uint64_t)((double)bytes / op->u.copy.gbps);
	sleep_until(end);
	return end;
}

static uint64_t body_memset(struct sim_op *op, uint64_t start)
{
	size_t bytes = op->u.set.width * op->u.set.elem * op->u.set.height;
	uint64_t end;

	prefault(op->u.set.dst, (op->u.set.height - 1) * op->u.set.pitch + op->u.set.width * op->u.set.elem, 1);

	for (size_t y = 0; y < op->u.set.height; y++) {
		char *row = op->u.set.dst + y * op->u.set.pitch;
		if (op->u.set.elem == 1) {
			memset(row, (int)(op->u.set.value & 0xff), op->u.set.width);
		} else if (op->u.set.elem == 2) {
			uint16_t v = (uint16_t)op->u.set.value;
			for (size_t i = 0; i < op->u.set.width; i++)
				memcpy(row + 2 * i, &v, 2);
		} else {
			uint32_t v = op->u.set.value;
			for (size_t i = 0; i < op->u.set.width; i++)
				memcpy(row + 4 * i, &v, 4);
		}
	}
	end = start + (uint64_t)((double)bytes / sim_cfg.device_gbps);
	sleep_until(end);
	return end;
}

static int waitval_ready(struct sim_op *op)
{
	uint64_t v = op->u.val.is64 ? *(volatile uint64_t *)op->u.val.addr : *(volatile uint32_t *)op->u.val.addr;
	uint64_t want = op->u.val.value;

	switch (op->u.val.flags & 0xf) {
	case CU_STREAM_WAIT_VALUE_GEQ:
		return op->u.val.is64 ? (int64_t)(v - want) >= 0 : (int32_t)(uint32_t)(v - want) >= 0;
	case CU_STREAM_WAIT_VALUE_EQ:
		return v == want;
	case CU_STREAM_WAIT_VALUE_AND:
		return (v & want) != 0;
	case CU_STREAM_WAIT_VALUE_NOR:
		return ~(v | want) != 0;
	}
	return 1;
}

/* While this worker runs a kernel: how far its timeline is behind the host's clock. */
static __thread uint64_t kernel_lag_ns;
static __thread int in_kernel;
static __thread uint64_t kernel_end_ns; /* simgpu_kernel_end_at, 0: the time the function takes */

void simgpu_kernel_end_at(uint64_t t)
{
	if (in_kernel)
		kernel_end_ns = t;
}

uint64_t simgpu_globaltimer_ns(void)
{
	return sim_now_ns() - (in_kernel ? kernel_lag_ns : 0);
}

/* Run op's body; start: its start on the stream's timeline; returns its end there. */
static uint64_t op_run(struct sim_op *op, uint64_t start)
{
	uint64_t t0 = sim_now_ns();

	switch (op->type) {
	case OP_COPY:
		return body_copy(op, start);
	case OP_MEMSET:
		return body_memset(op, start);
	case OP_KERNEL:
		kernel_lag_ns = t0 > start ? t0 - start : 0;
		kernel_end_ns = 0;
		in_kernel = 1;
		op->u.kern.fn(op->u.kern.args);
		in_kernel = 0;
		if (kernel_end_ns)
			return kernel_end_ns > start ? kernel_end_ns : start;
		return start + (sim_now_ns() - t0);
	case OP_HOST:
		if (op->u.host.cb)
			op->u.host.cb(op->u.host.cbs, CUDA_SUCCESS, op->u.host.ud);
		else
			op->u.host.fn(op->u.host.ud);
		return start + (sim_now_ns() - t0);
	case OP_GRAPH:
		for (size_t i = 0; i < op->u.graph.exec->n; i++)
			start = op_run(op->u.graph.exec->nodes[i], start);
		return start;
	case OP_WRITE:
		if (op->u.val.is64)
			__atomic_store_n((uint64_t *)op->u.val.addr, op->u.val.value, __ATOMIC_SEQ_CST);
		else
			__atomic_store_n((uint32_t *)op->u.val.addr, (uint32_t)op->u.val.value, __ATOMIC_SEQ_CST);
		return start;
	case OP_WAITVAL:
		while (!waitval_ready(op)) {
			struct timespec ts = {0, 50000};
			nanosleep(&ts, NULL);
		}
		/* It ended when the value appeared: real time, not before its start. */
		t0 = sim_now_ns();
		return t0 > start ? t0 : start;
	default:
		return start;
	}
}

void sim_event_put_locked(struct CUevent_st *ev)
{
	if (--ev->refs == 0)
		free(ev);
}

/* Completion, under sim_lock: what must be visible together with s->completed. */
static void op_done_locked(struct sim_op *op, struct CUstream_st *s, uint64_t t)
{
	if (op->type == OP_EVENT) {
		struct CUevent_st *ev = op->u.event.ev;
		if (ev->s == s && ev->seq == op->seq) {
			ev->t_ns = t;
			ev->has_time = 1;
		}
	} else if (op->type == OP_FREE) {
		sim_free_locked(op->u.fr.p, NULL);
	}
}

void sim_op_free(struct sim_op *op)
{
	if (!op)
		return;
	free(op->deps);
	if (op->type == OP_KERNEL)
		free(op->u.kern.args);
	else if (op->type == OP_EVENT)
		sim_event_put_locked(op->u.event.ev); /* callers hold sim_lock */
	else if (op->type == OP_GRAPH)
		sim_exec_put_locked(op->u.graph.exec);
	free(op);
}

/*
 * Events at the head of s whose predecessors are all complete are reached: a GPU
 * reaches such an event within microseconds of its predecessors' end, whatever
 * the host is doing. The worker thread of s may not have run yet on a loaded
 * machine, so a query completes them itself, under sim_lock, exactly as the
 * worker would (their time on the timeline: the latest of their submission, the
 * end of the stream's previous op and the ends of what they wait for). Without
 * this a query on an idle stream answered "not ready" until the host scheduled
 * the worker (milliseconds on a loaded machine).
 */
/* Complete the event op at the head of s, or just submitted to an idle s (not queued). */
static void event_reached_locked(struct CUstream_st *s, struct sim_op *op)
{
	uint64_t start = op->submit_ns > s->last_end ? op->submit_ns : s->last_end;
	for (int i = 0; i < op->ndeps; i++) {
		uint64_t e = end_of(op->deps[i].s, op->deps[i].seq);
		if (e > start)
			start = e;
	}
	op_done_locked(op, s, start);
	s->last_end = start;
	s->ends[op->seq % 64].seq = op->seq;
	s->ends[op->seq % 64].end = start;
	s->completed = op->seq;
	sim_op_free(op);
}

void sim_reach_events_locked(struct CUstream_st *s)
{
	struct sim_op *op;
	int done = 0;
	while ((op = s->head) && op->type == OP_EVENT && s->completed + 1 == op->seq && deps_met(op)) {
		s->head = op->next;
		if (!s->head)
			s->tail = NULL;
		event_reached_locked(s, op);
		done = 1;
	}
	if (done)
		pthread_cond_broadcast(&sim_cond);
}
