/*
 * drv_exec.c - what runs on the simulated GPU, and when.
 *
 *   1. operations and streams: each stream is a FIFO served by its own worker
 *      thread; an operation may also wait for other streams (dependencies), which
 *      is how the legacy default stream, cuStreamWaitEvent and events work
 *   2. stream handles: legacy (0 / CU_STREAM_LEGACY), per-thread
 *      (CU_STREAM_PER_THREAD or the _ptds/_ptsz entry points), created streams
 *   3. the body of each operation (copies at a bandwidth, memsets, kernels, host
 *      functions, event timestamps, stream-ordered frees, graphs, stream memops)
 *   4. stream and context API, synchronisation
 *   5. events
 *   6. copies and memsets (every driver variant)
 *   7. kernels: registration, names, launches
 *   8. stream-ordered allocation
 *   9. stream capture and graphs
 *  10. the rest of the stream API: old memop names, attributes, prefetch, batches
 *
 * Semantics follow CUDA's documentation (see README.md for the deliberate
 * differences): an operation on the legacy stream starts after all earlier work
 * of the device's blocking streams and blocks later work on them; non-blocking
 * streams do not synchronise with it; copies touching pageable memory return to
 * the host only when done, even when called Async, except that one from pageable
 * memory to the device leaves its last 64 KiB in flight (staged).
 */
#include "sim.h"
#include "simgpu.h"

#include <dlfcn.h>
#include <errno.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/uio.h>
#include <unistd.h>
#include <time.h>

/* ---------------------------------------------------------------- 1. operations and streams */

enum op_type { OP_NOP, OP_COPY, OP_MEMSET, OP_KERNEL, OP_HOST, OP_EVENT, OP_FREE, OP_GRAPH, OP_WRITE, OP_WAITVAL };

struct dep {
	struct CUstream_st *s;
	uint64_t seq;
};

struct op {
	enum op_type type;
	struct op *next;
	uint64_t seq;
	uint64_t submit_ns; /* host time at which it was queued */
	struct dep *deps;
	int ndeps;
	union {
		struct {
			char *dst;
			const char *src;
			size_t width, height, depth, dpitch, spitch, dslice, sslice;
			double gbps;
			struct CUstream_st *staged_on; /* pageable to device: the host waits for staging */
			size_t staged;		       /* bytes still in flight when the host returns */
		} copy;
		struct {
			char *dst;
			size_t pitch, width, height; /* width in elements */
			unsigned int elem;
			uint32_t value;
		} set;
		struct {
			void (*fn)(void **);
			void **args; /* points into store */
			size_t store_size;
		} kern;
		struct {
			CUhostFn fn;
			void *ud;
			CUstreamCallback cb;
			struct CUstream_st *cbs;
		} host;
		struct {
			struct CUevent_st *ev;
		} event;
		struct {
			CUdeviceptr p;
		} fr;
		struct {
			struct CUgraphExec_st *exec;
		} graph;
		struct {
			void *addr;
			uint64_t value;
			int is64;
			unsigned int flags;
		} val;
	} u;
};

enum stream_kind { ST_USER, ST_LEGACY, ST_PERTHREAD };

struct CUstream_st {
	int dev;
	enum stream_kind kind;
	unsigned int flags;
	int prio;
	unsigned long long id;
	pthread_t thr;
	int started, dying, exited;
	struct op *head, *tail;
	uint64_t submitted, completed;
	uint64_t released; /* the latest staged copy whose caller may return (section 6) */
	/* the stream's timeline: when its recent operations ended (see worker()) */
	uint64_t last_end;
	struct {
		uint64_t seq, end;
	} ends[64];
	/* capture */
	struct CUgraph_st *cgraph;
	struct CUstream_st *corigin; /* the stream that began the capture */
	CUstreamCaptureMode cmode;
	pthread_t cthread; /* the thread that began the capture */
	unsigned long long cid;
	int cinvalid;
	struct CUstream_st *next_all;
};

struct CUevent_st {
	unsigned int flags;
	struct CUstream_st *s; /* of the latest record, NULL: never recorded */
	uint64_t seq;
	uint64_t t_ns;
	int has_time, captured, refs;
};

struct CUgraph_st {
	struct op *head, *tail;
	size_t n;
};

struct CUgraphExec_st {
	struct op **nodes;
	size_t n;
	int refs;
};

static struct CUstream_st *all_streams; /* every stream ever made, newest first */
static unsigned long long next_stream_id = 16, next_capture_id = 1;
static __thread struct CUstream_st *ptds[SIM_MAX_DEV];
/* This thread's stream capture interaction mode (cuThreadExchangeStreamCaptureMode). */
static __thread CUstreamCaptureMode thread_cmode = CU_STREAM_CAPTURE_MODE_GLOBAL;
static pthread_key_t ptds_key;
static pthread_once_t ptds_once = PTHREAD_ONCE_INIT;

static void op_free(struct op *op);
static uint64_t op_run(struct op *op, uint64_t start);
static void op_done_locked(struct op *op, struct CUstream_st *s, uint64_t t);

static int deps_met(const struct op *op)
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
static void *worker(void *arg)
{
	struct CUstream_st *s = arg;

	pthread_mutex_lock(&sim_lock);
	for (;;) {
		struct op *op = s->head;
		uint64_t start, end;
		if (!op) {
			if (s->dying)
				break;
			pthread_cond_wait(&sim_cond, &sim_lock);
			continue;
		}
		if (!deps_met(op)) {
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
			end = op_run(op, start);
			pthread_mutex_lock(&sim_lock);
		}
		op_done_locked(op, s, start);
		s->last_end = end;
		s->ends[op->seq % 64].seq = op->seq;
		s->ends[op->seq % 64].end = end;
		s->completed = op->seq;
		pthread_cond_broadcast(&sim_cond);
		op_free(op);
	}
	/* A destroyed stream that has done all its work leaves the list that legacy
	 * work and context syncs walk; the struct itself stays (events may name it). */
	s->exited = 1;
	for (struct CUstream_st **pp = &all_streams; *pp; pp = &(*pp)->next_all)
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

static struct CUstream_st *stream_new_locked(int dev, enum stream_kind kind, unsigned int flags, int prio)
{
	struct CUstream_st *s = calloc(1, sizeof(*s));

	if (!s)
		return NULL;
	s->dev = dev;
	s->kind = kind;
	s->flags = flags;
	s->prio = prio;
	s->id = kind == ST_LEGACY ? 1 : kind == ST_PERTHREAD ? 2 + 16 * (next_stream_id++) : next_stream_id++;
	s->next_all = all_streams;
	all_streams = s;
	return s;
}

/* A blocking stream (not CU_STREAM_NON_BLOCKING) synchronises with the legacy stream. */
static int blocking(const struct CUstream_st *s)
{
	return s->kind == ST_PERTHREAD || (s->kind == ST_USER && !(s->flags & CU_STREAM_NON_BLOCKING));
}

static int add_dep(struct op *op, struct CUstream_st *s, uint64_t seq)
{
	struct dep *nd;

	if (s->completed >= seq)
		return 0;
	nd = realloc(op->deps, (size_t)(op->ndeps + 1) * sizeof(*nd));
	if (!nd)
		return -1;
	op->deps = nd;
	op->deps[op->ndeps++] = (struct dep){s, seq};
	return 0;
}

static void wait_seq_locked(struct CUstream_st *s, uint64_t seq)
{
	while (s->completed < seq)
		pthread_cond_wait(&sim_cond, &sim_lock);
}

static void graph_append(struct CUgraph_st *g, struct op *op)
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

#define HOST_STAGED 2
/* CUDA stages a pageable-to-device copy through pinned buffers; the Programming
 * Guide makes a host-to-device copy of 64 KB or less asynchronous for the host. */
#define SIM_STAGING (64u << 10)

/*
 * Queue op on s (or record it into s's capture graph). host_sync: return only once
 * it has run (1), or once its source is staged (HOST_STAGED: a pageable-to-device
 * copy, section 6). Takes ownership of op in every case.
 */
static CUresult enqueue(struct CUstream_st *s, struct op *op, int host_sync)
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
		graph_append(s->cgraph, op);
		pthread_mutex_unlock(&sim_lock);
		return CUDA_SUCCESS;
	}
	if (s->kind == ST_LEGACY) {
		/* Work on the legacy stream waits for every blocking stream of the device. */
		for (struct CUstream_st *o = all_streams; o; o = o->next_all) {
			if (o == s || o->dev != s->dev || !blocking(o))
				continue;
			if (o->cgraph && o->cmode != CU_STREAM_CAPTURE_MODE_RELAXED) {
				r = CUDA_ERROR_STREAM_CAPTURE_IMPLICIT;
				o->corigin->cinvalid = o->cinvalid = 1;
				goto fail;
			}
			if (add_dep(op, o, o->submitted))
				goto oom;
		}
	} else if (blocking(s)) {
		struct CUstream_st *l = sim_devs[s->dev].legacy;
		if (l && add_dep(op, l, l->submitted))
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
	if (s->tail) {
		s->tail->next = op; /* the worker is busy with the queue: no need to wake anyone */
	} else {
		s->head = op;
		pthread_cond_broadcast(&sim_cond);
	}
	s->tail = op;
	if (host_sync == HOST_STAGED)
		while (s->completed < op->seq && s->released < op->seq)
			pthread_cond_wait(&sim_cond, &sim_lock);
	else if (host_sync)
		wait_seq_locked(s, op->seq);
	pthread_mutex_unlock(&sim_lock);
	return CUDA_SUCCESS;
oom:
	r = CUDA_ERROR_OUT_OF_MEMORY;
fail:
	op_free(op);
	pthread_mutex_unlock(&sim_lock);
	return r;
}

static struct op *op_new(enum op_type type)
{
	struct op *op = calloc(1, sizeof(*op));

	if (op)
		op->type = type;
	return op;
}

/* ---------------------------------------------------------------- 2. stream handles */

static struct CUstream_st *legacy_locked(int dev)
{
	struct sim_dev *d = &sim_devs[dev];

	if (!d->legacy)
		d->legacy = stream_new_locked(dev, ST_LEGACY, 0, 0);
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
		ptds[dev] = stream_new_locked(dev, ST_PERTHREAD, 0, 0);
		pthread_setspecific(ptds_key, (void *)1);
	}
	return ptds[dev];
}

/* The stream a handle names; per_thread: the call came through a _ptds/_ptsz entry point. */
static CUresult stream_of(CUstream h, int per_thread, struct CUstream_st **out)
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

#define RESOLVE(h, pt, s)                                                                                              \
	struct CUstream_st *s;                                                                                         \
	do {                                                                                                           \
		CUresult r_ = stream_of(h, pt, &s);                                                                    \
		if (r_ != CUDA_SUCCESS)                                                                                \
			return r_;                                                                                     \
	} while (0)

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
static uint64_t body_copy(struct op *op, uint64_t start)
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
		 * has crossed the link (section 6). */
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

static uint64_t body_memset(struct op *op, uint64_t start)
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

static int waitval_ready(struct op *op)
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

/* Run op's body; start: its start on the stream's timeline; returns its end there. */
static uint64_t op_run(struct op *op, uint64_t start)
{
	uint64_t t0 = sim_now_ns();

	switch (op->type) {
	case OP_COPY:
		return body_copy(op, start);
	case OP_MEMSET:
		return body_memset(op, start);
	case OP_KERNEL:
		op->u.kern.fn(op->u.kern.args);
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

static void event_put_locked(struct CUevent_st *ev)
{
	if (--ev->refs == 0)
		free(ev);
}

static void exec_put_locked(struct CUgraphExec_st *e);

/* Completion, under sim_lock: what must be visible together with s->completed. */
static void op_done_locked(struct op *op, struct CUstream_st *s, uint64_t t)
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

static void op_free(struct op *op)
{
	if (!op)
		return;
	free(op->deps);
	if (op->type == OP_KERNEL)
		free(op->u.kern.args);
	else if (op->type == OP_EVENT)
		event_put_locked(op->u.event.ev); /* callers hold sim_lock */
	else if (op->type == OP_GRAPH)
		exec_put_locked(op->u.graph.exec);
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
static void reach_events_locked(struct CUstream_st *s)
{
	struct op *op;
	int done = 0;
	while ((op = s->head) && op->type == OP_EVENT && s->completed + 1 == op->seq && deps_met(op)) {
		uint64_t start = op->submit_ns > s->last_end ? op->submit_ns : s->last_end;
		for (int i = 0; i < op->ndeps; i++) {
			uint64_t e = end_of(op->deps[i].s, op->deps[i].seq);
			if (e > start)
				start = e;
		}
		s->head = op->next;
		if (!s->head)
			s->tail = NULL;
		op_done_locked(op, s, start);
		s->last_end = start;
		s->ends[op->seq % 64].seq = op->seq;
		s->ends[op->seq % 64].end = start;
		s->completed = op->seq;
		op_free(op);
		done = 1;
	}
	if (done)
		pthread_cond_broadcast(&sim_cond);
}

/* ---------------------------------------------------------------- 4. streams, contexts, sync */

static CUresult stream_create(CUstream *phStream, unsigned int Flags, int prio)
{
	CUresult err = CUDA_SUCCESS;
	int dev = sim_cur_dev(&err);
	struct CUstream_st *s;

	if (dev < 0)
		return err;
	if (!phStream || (Flags & ~CU_STREAM_NON_BLOCKING))
		return CUDA_ERROR_INVALID_VALUE;
	pthread_mutex_lock(&sim_lock);
	s = stream_new_locked(dev, ST_USER, Flags, prio);
	pthread_mutex_unlock(&sim_lock);
	if (!s)
		return CUDA_ERROR_OUT_OF_MEMORY;
	*phStream = s;
	return CUDA_SUCCESS;
}

CUresult cuStreamCreate(CUstream *phStream, unsigned int Flags)
{
	return stream_create(phStream, Flags, 0);
}

CUresult cuStreamCreateWithPriority(CUstream *phStream, unsigned int flags, int priority)
{
	return stream_create(phStream, flags, priority < -5 ? -5 : priority > 0 ? 0 : priority);
}

/* Like CUDA: returns at once; queued work still completes, then the worker ends. */
CUresult cuStreamDestroy_v2(CUstream hStream)
{
	if (!sim_inited)
		return CUDA_ERROR_NOT_INITIALIZED;
	if (!hStream || hStream == CU_STREAM_LEGACY || hStream == CU_STREAM_PER_THREAD)
		return CUDA_ERROR_INVALID_HANDLE;
	pthread_mutex_lock(&sim_lock);
	hStream->dying = 1;
	pthread_cond_broadcast(&sim_cond);
	pthread_mutex_unlock(&sim_lock);
	/* NOTE: the struct is never freed: events and dependencies may still point at it. */
	return CUDA_SUCCESS;
}

/*
 * cuThreadExchangeStreamCaptureMode: in the GLOBAL mode (the default) a thread "is
 * prohibited from potentially unsafe API calls" when it has an ongoing capture not
 * begun in RELAXED mode or another thread has one begun in GLOBAL mode; in the
 * THREAD_LOCAL mode only its own captures count; RELAXED prohibits nothing. Such a
 * call (cuMemAlloc is CUDA's example; querying or waiting for work, which PyTorch
 * met as a watchdog's cudaEventQuery breaking another thread's capture) fails with
 * CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED and invalidates the captures it conflicts with.
 */
static CUresult refuse_unsafe_locked(void)
{
	CUresult r = CUDA_SUCCESS;
	pthread_t self = pthread_self();

	if (thread_cmode == CU_STREAM_CAPTURE_MODE_RELAXED)
		return CUDA_SUCCESS;
	for (struct CUstream_st *o = all_streams; o; o = o->next_all) {
		int local;
		if (!o->cgraph || o->corigin != o)
			continue;
		local = pthread_equal(o->cthread, self);
		if ((local && o->cmode != CU_STREAM_CAPTURE_MODE_RELAXED) ||
		    (!local && thread_cmode == CU_STREAM_CAPTURE_MODE_GLOBAL &&
		     o->cmode == CU_STREAM_CAPTURE_MODE_GLOBAL)) {
			o->cinvalid = 1;
			r = CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED;
		}
	}
	return r;
}

CUresult sim_refuse_unsafe(void)
{
	CUresult r;

	pthread_mutex_lock(&sim_lock);
	r = refuse_unsafe_locked();
	pthread_mutex_unlock(&sim_lock);
	return r;
}

/* Synchronising or querying a capturing stream is refused and invalidates the
 * capture. Returns the error, or CUDA_SUCCESS when s is not capturing. */
static CUresult refuse_capture_locked(struct CUstream_st *s)
{
	if (!s->cgraph)
		return CUDA_SUCCESS;
	s->corigin->cinvalid = s->cinvalid = 1;
	return CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED;
}

static CUresult stream_sync(CUstream h, int pt)
{
	CUresult r;
	RESOLVE(h, pt, s);

	pthread_mutex_lock(&sim_lock);
	r = refuse_capture_locked(s);
	if (r == CUDA_SUCCESS)
		r = refuse_unsafe_locked();
	if (r == CUDA_SUCCESS)
		wait_seq_locked(s, s->submitted);
	pthread_mutex_unlock(&sim_lock);
	return r;
}

CUresult cuStreamSynchronize(CUstream hStream)
{
	return stream_sync(hStream, 0);
}

CUresult cuStreamSynchronize_ptsz(CUstream hStream)
{
	return stream_sync(hStream, 1);
}

static CUresult stream_query(CUstream h, int pt)
{
	CUresult r;
	RESOLVE(h, pt, s);

	pthread_mutex_lock(&sim_lock);
	r = refuse_capture_locked(s);
	if (r == CUDA_SUCCESS)
		r = refuse_unsafe_locked();
	if (r == CUDA_SUCCESS) {
		reach_events_locked(s);
		r = s->completed >= s->submitted ? CUDA_SUCCESS : CUDA_ERROR_NOT_READY;
	}
	pthread_mutex_unlock(&sim_lock);
	return r;
}

CUresult cuStreamQuery(CUstream hStream)
{
	return stream_query(hStream, 0);
}

CUresult cuStreamQuery_ptsz(CUstream hStream)
{
	return stream_query(hStream, 1);
}

/* Wait for everything queued so far on every stream of dev. */
CUresult sim_ctx_sync_dev(int dev)
{
	struct CUstream_st *s;
	size_t n = 0, i = 0;
	struct dep *snap;

	if (!sim_inited)
		return CUDA_ERROR_NOT_INITIALIZED;
	pthread_mutex_lock(&sim_lock);
	for (s = all_streams; s; s = s->next_all)
		if (s->dev == dev) {
			if (s->cgraph && s->cmode == CU_STREAM_CAPTURE_MODE_GLOBAL) {
				pthread_mutex_unlock(&sim_lock);
				return CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED;
			}
			n++;
		}
	snap = malloc((n ? n : 1) * sizeof(*snap));
	if (!snap) {
		pthread_mutex_unlock(&sim_lock);
		return CUDA_ERROR_OUT_OF_MEMORY;
	}
	for (s = all_streams; s; s = s->next_all)
		if (s->dev == dev)
			snap[i++] = (struct dep){s, s->submitted};
	for (i = 0; i < n; i++)
		wait_seq_locked(snap[i].s, snap[i].seq);
	pthread_mutex_unlock(&sim_lock);
	free(snap);
	return CUDA_SUCCESS;
}

CUresult cuCtxSynchronize(void)
{
	CUresult err = CUDA_SUCCESS;
	int dev = sim_cur_dev(&err);

	return dev < 0 ? err : sim_ctx_sync_dev(dev);
}

CUresult cuCtxSynchronize_v2(CUcontext ctx)
{
	if (!sim_inited)
		return CUDA_ERROR_NOT_INITIALIZED;
	if (!ctx)
		return cuCtxSynchronize();
	if (!sim_inited)
		return CUDA_ERROR_NOT_INITIALIZED;
	return sim_ctx_sync_dev(ctx->device);
}

#define STREAM_GETTER(name, ptname, type, expr)                                                                        \
	static CUresult name##_impl(CUstream h, type *out, int pt)                                                     \
	{                                                                                                              \
		RESOLVE(h, pt, s);                                                                                     \
		if (!out)                                                                                              \
			return CUDA_ERROR_INVALID_VALUE;                                                               \
		*out = (expr);                                                                                         \
		return CUDA_SUCCESS;                                                                                   \
	}                                                                                                              \
	CUresult name(CUstream h, type *out)                                                                           \
	{                                                                                                              \
		return name##_impl(h, out, 0);                                                                         \
	}                                                                                                              \
	CUresult ptname(CUstream h, type *out)                                                                         \
	{                                                                                                              \
		return name##_impl(h, out, 1);                                                                         \
	}

STREAM_GETTER(cuStreamGetFlags, cuStreamGetFlags_ptsz, unsigned int, s->flags)
STREAM_GETTER(cuStreamGetPriority, cuStreamGetPriority_ptsz, int, s->prio)
STREAM_GETTER(cuStreamGetId, cuStreamGetId_ptsz, unsigned long long, s->id)
STREAM_GETTER(cuStreamGetDevice, cuStreamGetDevice_ptsz, CUdevice, s->dev)
STREAM_GETTER(cuStreamGetCtx, cuStreamGetCtx_ptsz, CUcontext, &sim_devs[s->dev].primary)

static CUresult stream_wait_event(CUstream h, CUevent ev, unsigned int flags, int pt)
{
	struct op *op;
	RESOLVE(h, pt, s);

	if (!ev)
		return CUDA_ERROR_INVALID_HANDLE;
	pthread_mutex_lock(&sim_lock);
	if (ev->captured && ev->s && ev->s->cgraph) {
		/* Joining a capture (fork/join pattern): s records into the same graph. */
		if (!s->cgraph) {
			s->cgraph = ev->s->cgraph;
			s->corigin = ev->s->corigin;
			s->cmode = ev->s->cmode;
			s->cid = ev->s->cid;
		}
		pthread_mutex_unlock(&sim_lock);
		return CUDA_SUCCESS;
	}
	pthread_mutex_unlock(&sim_lock);
	op = op_new(OP_NOP);
	if (!op)
		return CUDA_ERROR_OUT_OF_MEMORY;
	pthread_mutex_lock(&sim_lock);
	if (ev->s && !s->cgraph && add_dep(op, ev->s, ev->seq)) {
		pthread_mutex_unlock(&sim_lock);
		op_free(op);
		return CUDA_ERROR_OUT_OF_MEMORY;
	}
	pthread_mutex_unlock(&sim_lock);
	if (s->cgraph) {
		op_free(op);
		return CUDA_SUCCESS;
	}
	return enqueue(s, op, 0);
}

CUresult cuStreamWaitEvent(CUstream hStream, CUevent hEvent, unsigned int Flags)
{
	return stream_wait_event(hStream, hEvent, Flags, 0);
}

CUresult cuStreamWaitEvent_ptsz(CUstream hStream, CUevent hEvent, unsigned int Flags)
{
	return stream_wait_event(hStream, hEvent, Flags, 1);
}

static CUresult host_fn(CUstream h, CUhostFn fn, CUstreamCallback cb, void *ud, int pt)
{
	struct op *op;
	RESOLVE(h, pt, s);

	if (!fn && !cb)
		return CUDA_ERROR_INVALID_VALUE;
	op = op_new(OP_HOST);
	if (!op)
		return CUDA_ERROR_OUT_OF_MEMORY;
	op->u.host.fn = fn;
	op->u.host.cb = cb;
	op->u.host.ud = ud;
	op->u.host.cbs = h;
	return enqueue(s, op, 0);
}

CUresult cuLaunchHostFunc(CUstream hStream, CUhostFn fn, void *userData)
{
	return host_fn(hStream, fn, NULL, userData, 0);
}

CUresult cuLaunchHostFunc_ptsz(CUstream hStream, CUhostFn fn, void *userData)
{
	return host_fn(hStream, fn, NULL, userData, 1);
}

CUresult cuStreamAddCallback(CUstream hStream, CUstreamCallback callback, void *userData, unsigned int flags)
{
	return host_fn(hStream, NULL, callback, userData, 0);
}

CUresult cuStreamAddCallback_ptsz(CUstream hStream, CUstreamCallback callback, void *userData, unsigned int flags)
{
	return host_fn(hStream, NULL, callback, userData, 1);
}

static CUresult memop(CUstream h, CUdeviceptr addr, uint64_t value, int is64, unsigned int flags, int wait, int pt)
{
	struct op *op;
	RESOLVE(h, pt, s);

	if (!addr)
		return CUDA_ERROR_INVALID_VALUE;
	op = op_new(wait ? OP_WAITVAL : OP_WRITE);
	if (!op)
		return CUDA_ERROR_OUT_OF_MEMORY;
	op->u.val.addr = (void *)(uintptr_t)addr;
	op->u.val.value = value;
	op->u.val.is64 = is64;
	op->u.val.flags = flags;
	return enqueue(s, op, 0);
}

/* Each stream memory operation under its CUDA 13 name (_v2) and its older one,
 * which the CUDA 13 runtime still requests (cudart_entry_points.txt asks for the
 * 8000 versions). */
#define MEMOP(name, type, is64, wait)                                                                                  \
	CUresult name(CUstream s, CUdeviceptr a, type v, unsigned int f)                                               \
	{                                                                                                              \
		return memop(s, a, v, is64, f, wait, 0);                                                               \
	}                                                                                                              \
	CUresult name##_ptsz(CUstream s, CUdeviceptr a, type v, unsigned int f)                                        \
	{                                                                                                              \
		return memop(s, a, v, is64, f, wait, 1);                                                               \
	}                                                                                                              \
	CUresult name##_v2(CUstream s, CUdeviceptr a, type v, unsigned int f)                                          \
	{                                                                                                              \
		return memop(s, a, v, is64, f, wait, 0);                                                               \
	}                                                                                                              \
	CUresult name##_v2_ptsz(CUstream s, CUdeviceptr a, type v, unsigned int f)                                     \
	{                                                                                                              \
		return memop(s, a, v, is64, f, wait, 1);                                                               \
	}
MEMOP(cuStreamWriteValue32, cuuint32_t, 0, 0)
MEMOP(cuStreamWriteValue64, cuuint64_t, 1, 0)
MEMOP(cuStreamWaitValue32, cuuint32_t, 0, 1)
MEMOP(cuStreamWaitValue64, cuuint64_t, 1, 1)

/* ---------------------------------------------------------------- 5. events */

CUresult cuEventCreate(CUevent *phEvent, unsigned int Flags)
{
	struct CUevent_st *ev;

	if (!sim_inited)
		return CUDA_ERROR_NOT_INITIALIZED;
	if (!sim_cur_ctx())
		return CUDA_ERROR_INVALID_CONTEXT;
	/* "CU_EVENT_INTERPROCESS must be specified along with CU_EVENT_DISABLE_TIMING" */
	if (!phEvent || ((Flags & CU_EVENT_INTERPROCESS) && !(Flags & CU_EVENT_DISABLE_TIMING)))
		return CUDA_ERROR_INVALID_VALUE;
	ev = calloc(1, sizeof(*ev));
	if (!ev)
		return CUDA_ERROR_OUT_OF_MEMORY;
	ev->flags = Flags;
	ev->refs = 1;
	*phEvent = ev;
	return CUDA_SUCCESS;
}

CUresult cuEventDestroy_v2(CUevent hEvent)
{
	if (!sim_inited)
		return CUDA_ERROR_NOT_INITIALIZED;
	if (!hEvent)
		return CUDA_ERROR_INVALID_HANDLE;
	pthread_mutex_lock(&sim_lock);
	event_put_locked(hEvent);
	pthread_mutex_unlock(&sim_lock);
	return CUDA_SUCCESS;
}

unsigned long sim_event_records;

static CUresult event_record(CUevent ev, CUstream h, int pt)
{
	struct op *op;
	RESOLVE(h, pt, s);

	if (!ev)
		return CUDA_ERROR_INVALID_HANDLE;
	__atomic_add_fetch(&sim_event_records, 1, __ATOMIC_RELAXED);
	pthread_mutex_lock(&sim_lock);
	if (s->cgraph) {
		/*
		 * SIMGPU_CAPTURE_NO_EVENTS (tests of a program that records no event
		 * while capturing): any event record into the capture is someone
		 * else's, the profiler's; it invalidates the capture, so that the
		 * program sees it (its cuStreamEndCapture fails).
		 */
		if (sim_cfg.capture_no_events) {
			s->corigin->cinvalid = s->cinvalid = 1;
			pthread_mutex_unlock(&sim_lock);
			return CUDA_ERROR_STREAM_CAPTURE_INVALIDATED;
		}
		/* Recorded into a capture: marks a fork/join point, runs nothing. */
		ev->s = s;
		ev->captured = 1;
		pthread_mutex_unlock(&sim_lock);
		return CUDA_SUCCESS;
	}
	ev->refs++;
	pthread_mutex_unlock(&sim_lock);
	op = op_new(OP_EVENT);
	if (!op) {
		cuEventDestroy_v2(ev);
		return CUDA_ERROR_OUT_OF_MEMORY;
	}
	op->u.event.ev = ev;
	return enqueue(s, op, 0);
}

CUresult cuEventRecord(CUevent hEvent, CUstream hStream)
{
	return event_record(hEvent, hStream, 0);
}

CUresult cuEventRecord_ptsz(CUevent hEvent, CUstream hStream)
{
	return event_record(hEvent, hStream, 1);
}

CUresult cuEventRecordWithFlags(CUevent hEvent, CUstream hStream, unsigned int flags)
{
	return event_record(hEvent, hStream, 0);
}

CUresult cuEventRecordWithFlags_ptsz(CUevent hEvent, CUstream hStream, unsigned int flags)
{
	return event_record(hEvent, hStream, 1);
}

CUresult cuEventQuery(CUevent ev)
{
	CUresult r;

	if (!sim_inited)
		return CUDA_ERROR_NOT_INITIALIZED;
	if (!ev)
		return CUDA_ERROR_INVALID_HANDLE;
	pthread_mutex_lock(&sim_lock);
	if (ev->captured)
		r = CUDA_ERROR_CAPTURED_EVENT;
	else if ((r = refuse_unsafe_locked()) == CUDA_SUCCESS) {
		if (ev->s && ev->s->completed < ev->seq)
			reach_events_locked(ev->s);
		r = !ev->s || ev->s->completed >= ev->seq ? CUDA_SUCCESS : CUDA_ERROR_NOT_READY;
	}
	pthread_mutex_unlock(&sim_lock);
	return r;
}

CUresult cuEventSynchronize(CUevent ev)
{
	CUresult r = CUDA_SUCCESS;

	if (!sim_inited)
		return CUDA_ERROR_NOT_INITIALIZED;
	if (!ev)
		return CUDA_ERROR_INVALID_HANDLE;
	pthread_mutex_lock(&sim_lock);
	if (ev->captured)
		r = CUDA_ERROR_CAPTURED_EVENT;
	else if ((r = refuse_unsafe_locked()) == CUDA_SUCCESS && ev->s)
		wait_seq_locked(ev->s, ev->seq);
	pthread_mutex_unlock(&sim_lock);
	return r;
}

/* Milliseconds between the instants the streams reached the two events. */
CUresult cuEventElapsedTime_v2(float *pMilliseconds, CUevent hStart, CUevent hEnd)
{
	CUresult r = CUDA_SUCCESS;

	if (!pMilliseconds)
		return CUDA_ERROR_INVALID_VALUE;
	if (!hStart || !hEnd)
		return CUDA_ERROR_INVALID_HANDLE;
	pthread_mutex_lock(&sim_lock);
	if ((hStart->flags | hEnd->flags) & CU_EVENT_DISABLE_TIMING || !hStart->s || !hEnd->s)
		r = CUDA_ERROR_INVALID_HANDLE;
	else if (hStart->captured || hEnd->captured)
		r = CUDA_ERROR_CAPTURED_EVENT;
	else if (!hStart->has_time || !hEnd->has_time)
		r = CUDA_ERROR_NOT_READY;
	else
		*pMilliseconds = (float)((double)((int64_t)(hEnd->t_ns - hStart->t_ns)) / 1e6);
	pthread_mutex_unlock(&sim_lock);
	return r;
}

CUresult cuEventElapsedTime(float *pMilliseconds, CUevent hStart, CUevent hEnd)
{
	return cuEventElapsedTime_v2(pMilliseconds, hStart, hEnd);
}

/* ---------------------------------------------------------------- 6. copies and memsets */

struct span {
	char *p;
	size_t pitch, slice;
};

/*
 * One copy of depth x height rows of width bytes. sync: the API is a synchronous
 * one (the host waits, except for device-to-device copies, which CUDA runs
 * asynchronously). Any copy touching pageable memory, and any host-to-host copy,
 * makes the host wait; from pageable memory to the device (*host_sync ==
 * HOST_STAGED), only until the source is staged.
 */
static CUresult copy_op(struct span dst, struct span src, size_t width, size_t height, size_t depth, int sync, int need,
			struct op **out, int *host_sync)
{
	size_t dlen, slen;
	int dk, sk, ddev = -1, sdev = -1, pageable, host;
	struct op *op;

	*out = NULL;
	if (width == 0 || height == 0 || depth == 0)
		return CUDA_SUCCESS;
	if (!dst.p || !src.p)
		return CUDA_ERROR_INVALID_VALUE;
	dlen = (depth - 1) * dst.slice + (height - 1) * dst.pitch + width;
	slen = (depth - 1) * src.slice + (height - 1) * src.pitch + width;
	pthread_mutex_lock(&sim_lock);
	dk = sim_classify(dst.p, dlen, &ddev);
	sk = sim_classify(src.p, slen, &sdev);
	pthread_mutex_unlock(&sim_lock);
	if (dk < 0 || sk < 0)
		return CUDA_ERROR_INVALID_VALUE;
	if (((need & 1) && dk != MEM_DEVICE && dk != MEM_MANAGED) ||
	    ((need & 2) && sk != MEM_DEVICE && sk != MEM_MANAGED))
		return CUDA_ERROR_INVALID_VALUE;
	op = op_new(OP_COPY);
	if (!op)
		return CUDA_ERROR_OUT_OF_MEMORY;
	pageable = dk == MEM_PAGEABLE || sk == MEM_PAGEABLE;
	if (pageable)
		op->u.copy.gbps = sim_cfg.pageable_gbps;
	else if (dk == MEM_PINNED || sk == MEM_PINNED)
		op->u.copy.gbps = sim_cfg.pinned_gbps;
	else if (ddev != sdev)
		op->u.copy.gbps = sim_cfg.pinned_gbps; /* peer: over the (simulated) PCIe link */
	else
		op->u.copy.gbps = sim_cfg.device_gbps;
	op->u.copy.dst = dst.p;
	op->u.copy.src = src.p;
	op->u.copy.width = width;
	op->u.copy.height = height;
	op->u.copy.depth = depth;
	op->u.copy.dpitch = dst.pitch;
	op->u.copy.spitch = src.pitch;
	op->u.copy.dslice = dst.slice;
	op->u.copy.sslice = src.slice;
	/* "API synchronization behavior": a copy between two host buffers (pageable or
	 * pinned) is fully synchronous, Async or not. */
	host = (dk == MEM_PAGEABLE || dk == MEM_PINNED) && (sk == MEM_PAGEABLE || sk == MEM_PINNED);
	*host_sync = pageable || host || (sync && (dk == MEM_PINNED || sk == MEM_PINNED));
	/*
	 * "API synchronization behavior": from pageable memory to the device, "a stream
	 * sync is performed before the copy is initiated. The function will return once
	 * the pageable buffer has been copied to the staging memory [...], but the DMA
	 * to final destination may not have completed"; Async, "the driver may
	 * synchronize with the stream and stage the copy". The caller returns when the
	 * stream has reached the copy and all but its last SIM_STAGING bytes are across.
	 */
	if (sk == MEM_PAGEABLE && dk == MEM_DEVICE) {
		size_t bytes = width * height * depth;
		*host_sync = HOST_STAGED;
		op->u.copy.staged = bytes < SIM_STAGING ? bytes : SIM_STAGING;
	}
	*out = op;
	return CUDA_SUCCESS;
}

/*
 * One copy of depth x height rows of width bytes. sync: the API is a synchronous
 * one (the host waits, except for device-to-device copies, which CUDA runs
 * asynchronously). Any copy touching pageable memory makes the host wait.
 */
static CUresult copy(struct CUstream_st *s, struct span dst, struct span src, size_t width, size_t height, size_t depth,
		     int sync, int need)
{
	struct op *op;
	int host_sync = 0;
	CUresult r = copy_op(dst, src, width, height, depth, sync, need, &op, &host_sync);

	if (r != CUDA_SUCCESS || !op)
		return r;
	if (host_sync == HOST_STAGED && !s->cgraph)
		op->u.copy.staged_on = s;
	return enqueue(s, op, s->cgraph ? 0 : host_sync);
}

static struct span lin(const void *p)
{
	return (struct span){(char *)p, 0, 0};
}

#define PTR(d) ((void *)(uintptr_t)(d))

/* Linear copies: name(+_ptds) synchronous, name(+_ptsz) asynchronous; need: which
 * sides must be device memory (1 dst, 2 src). */
#define COPY_LINEAR(name, ptname, params, dst, src, n, h, sync, need)                                                  \
	CUresult name params                                                                                           \
	{                                                                                                              \
		RESOLVE(h, 0, s);                                                                                      \
		return copy(s, lin(dst), lin(src), n, 1, 1, sync, need);                                               \
	}                                                                                                              \
	CUresult ptname params                                                                                         \
	{                                                                                                              \
		RESOLVE(h, 1, s);                                                                                      \
		return copy(s, lin(dst), lin(src), n, 1, 1, sync, need);                                               \
	}
#define COPY_SYNC(name, ptname, params, dst, src, n, need) COPY_LINEAR(name, ptname, params, dst, src, n, NULL, 1, need)
#define COPY_ASYNC(name, ptname, params, dst, src, n, h, need)                                                         \
	COPY_LINEAR(name, ptname, params, dst, src, n, h, 0, need)

COPY_SYNC(cuMemcpyHtoD_v2, cuMemcpyHtoD_v2_ptds, (CUdeviceptr d, const void *h, size_t n), PTR(d), h, n, 1)
COPY_SYNC(cuMemcpyDtoH_v2, cuMemcpyDtoH_v2_ptds, (void *h, CUdeviceptr d, size_t n), h, PTR(d), n, 2)
COPY_SYNC(cuMemcpyDtoD_v2, cuMemcpyDtoD_v2_ptds, (CUdeviceptr d, CUdeviceptr s_, size_t n), PTR(d), PTR(s_), n, 3)
COPY_SYNC(cuMemcpy, cuMemcpy_ptds, (CUdeviceptr d, CUdeviceptr s_, size_t n), PTR(d), PTR(s_), n, 0)
COPY_ASYNC(cuMemcpyHtoDAsync_v2, cuMemcpyHtoDAsync_v2_ptsz, (CUdeviceptr d, const void *h, size_t n, CUstream st),
	   PTR(d), h, n, st, 1)
COPY_ASYNC(cuMemcpyDtoHAsync_v2, cuMemcpyDtoHAsync_v2_ptsz, (void *h, CUdeviceptr d, size_t n, CUstream st), h, PTR(d),
	   n, st, 2)
COPY_ASYNC(cuMemcpyDtoDAsync_v2, cuMemcpyDtoDAsync_v2_ptsz, (CUdeviceptr d, CUdeviceptr s_, size_t n, CUstream st),
	   PTR(d), PTR(s_), n, st, 3)
COPY_ASYNC(cuMemcpyAsync, cuMemcpyAsync_ptsz, (CUdeviceptr d, CUdeviceptr s_, size_t n, CUstream st), PTR(d), PTR(s_),
	   n, st, 0)
COPY_SYNC(cuMemcpyPeer, cuMemcpyPeer_ptds, (CUdeviceptr d, CUcontext dc, CUdeviceptr s_, CUcontext sc, size_t n),
	  PTR(d), PTR(s_), n, 3)
COPY_ASYNC(cuMemcpyPeerAsync, cuMemcpyPeerAsync_ptsz,
	   (CUdeviceptr d, CUcontext dc, CUdeviceptr s_, CUcontext sc, size_t n, CUstream st), PTR(d), PTR(s_), n, st,
	   3)

static CUresult span2d(struct span *sp, CUmemorytype t, const void *host, CUdeviceptr dev, CUarray arr, size_t pitch,
		       size_t x, size_t y, size_t height, size_t z)
{
	char *base;

	if (arr || t == CU_MEMORYTYPE_ARRAY)
		return CUDA_ERROR_NOT_SUPPORTED; /* CUDA arrays are not simulated */
	base = t == CU_MEMORYTYPE_HOST ? (char *)host : (char *)PTR(dev);
	sp->pitch = pitch;
	sp->slice = pitch * height;
	sp->p = base + (z * height + y) * pitch + x;
	return CUDA_SUCCESS;
}

static CUresult copy2d(const CUDA_MEMCPY2D *c, CUstream h, int pt, int sync)
{
	struct span d, s_;
	CUresult r;
	RESOLVE(h, pt, s);

	if (!c)
		return CUDA_ERROR_INVALID_VALUE;
	if ((r = span2d(&d, c->dstMemoryType, c->dstHost, c->dstDevice, c->dstArray, c->dstPitch, c->dstXInBytes,
			c->dstY, c->Height, 0)) ||
	    (r = span2d(&s_, c->srcMemoryType, c->srcHost, c->srcDevice, c->srcArray, c->srcPitch, c->srcXInBytes,
			c->srcY, c->Height, 0)))
		return r;
	if ((c->Height > 1 && (c->dstPitch < c->WidthInBytes || c->srcPitch < c->WidthInBytes)))
		return CUDA_ERROR_INVALID_VALUE;
	return copy(s, d, s_, c->WidthInBytes, c->Height, 1, sync, 0);
}

/* The four entry points of a copy described by a struct: synchronous (and its
 * _ptds flavour) and asynchronous (and its _ptsz flavour). */
#define COPY_ENTRIES(fn, type, name, ptname, aname, aptname)                                                           \
	CUresult name(const type *c)                                                                                   \
	{                                                                                                              \
		return fn(c, NULL, 0, 1);                                                                              \
	}                                                                                                              \
	CUresult ptname(const type *c)                                                                                 \
	{                                                                                                              \
		return fn(c, NULL, 1, 1);                                                                              \
	}                                                                                                              \
	CUresult aname(const type *c, CUstream h)                                                                      \
	{                                                                                                              \
		return fn(c, h, 0, 0);                                                                                 \
	}                                                                                                              \
	CUresult aptname(const type *c, CUstream h)                                                                    \
	{                                                                                                              \
		return fn(c, h, 1, 0);                                                                                 \
	}

COPY_ENTRIES(copy2d, CUDA_MEMCPY2D, cuMemcpy2D_v2, cuMemcpy2D_v2_ptds, cuMemcpy2DAsync_v2, cuMemcpy2DAsync_v2_ptsz)
CUresult cuMemcpy2DUnaligned_v2(const CUDA_MEMCPY2D *c)
{
	return copy2d(c, NULL, 0, 1);
}
CUresult cuMemcpy2DUnaligned_v2_ptds(const CUDA_MEMCPY2D *c)
{
	return copy2d(c, NULL, 1, 1);
}

/*
 * CUDA_MEMCPY3D and CUDA_MEMCPY3D_PEER name their fields alike, and a peer copy's
 * contexts change nothing under unified addressing: one body serves both.
 * NOTE: a macro, as C has no other way to write one body for two struct types.
 */
#define COPY3D(type, spans, copy3)                                                                                     \
	static CUresult spans(const type *c, struct span *d, struct span *s_)                                          \
	{                                                                                                              \
		CUresult r;                                                                                            \
                                                                                                                       \
		if (!c)                                                                                                \
			return CUDA_ERROR_INVALID_VALUE;                                                               \
		if ((r = span2d(d, c->dstMemoryType, c->dstHost, c->dstDevice, c->dstArray, c->dstPitch,               \
				c->dstXInBytes, c->dstY, c->dstHeight, c->dstZ)) ||                                    \
		    (r = span2d(s_, c->srcMemoryType, c->srcHost, c->srcDevice, c->srcArray, c->srcPitch,              \
				c->srcXInBytes, c->srcY, c->srcHeight, c->srcZ)))                                      \
			return r;                                                                                      \
		return CUDA_SUCCESS;                                                                                   \
	}                                                                                                              \
	static CUresult copy3(const type *c, CUstream h, int pt, int sync)                                             \
	{                                                                                                              \
		struct span d, s_;                                                                                     \
		CUresult r;                                                                                            \
		RESOLVE(h, pt, s);                                                                                     \
                                                                                                                       \
		if ((r = spans(c, &d, &s_)))                                                                           \
			return r;                                                                                      \
		return copy(s, d, s_, c->WidthInBytes, c->Height, c->Depth, sync, 0);                                  \
	}

COPY3D(CUDA_MEMCPY3D, spans3d, copy3d)
COPY3D(CUDA_MEMCPY3D_PEER, spans3dpeer, copy3dpeer)
COPY_ENTRIES(copy3d, CUDA_MEMCPY3D, cuMemcpy3D_v2, cuMemcpy3D_v2_ptds, cuMemcpy3DAsync_v2, cuMemcpy3DAsync_v2_ptsz)
COPY_ENTRIES(copy3dpeer, CUDA_MEMCPY3D_PEER, cuMemcpy3DPeer, cuMemcpy3DPeer_ptds, cuMemcpy3DPeerAsync,
	     cuMemcpy3DPeerAsync_ptsz)

/*
 * sync: a "synchronous" entry point. CUDA's "API synchronization behavior", Memset:
 * the synchronous memsets are asynchronous for the host except when the target is
 * pinned host memory or a Unified Memory region, where they are fully synchronous;
 * the Async versions are always asynchronous for the host.
 */
static CUresult memset_(CUstream h, int pt, int sync, CUdeviceptr dst, size_t pitch, uint32_t value, unsigned int elem,
			size_t width, size_t height)
{
	int k;
	struct op *op;
	RESOLVE(h, pt, s);

	if (width == 0 || height == 0)
		return CUDA_SUCCESS;
	if (height > 1 && pitch < width * elem)
		return CUDA_ERROR_INVALID_VALUE;
	if (elem > 1 && dst % elem)
		return CUDA_ERROR_INVALID_VALUE;
	pthread_mutex_lock(&sim_lock);
	k = sim_classify(PTR(dst), (height - 1) * pitch + width * elem, NULL);
	pthread_mutex_unlock(&sim_lock);
	if (k < 0 || k == MEM_PAGEABLE)
		return CUDA_ERROR_INVALID_VALUE;
	op = op_new(OP_MEMSET);
	if (!op)
		return CUDA_ERROR_OUT_OF_MEMORY;
	op->u.set.dst = PTR(dst);
	op->u.set.pitch = pitch;
	op->u.set.width = width;
	op->u.set.height = height;
	op->u.set.elem = elem;
	op->u.set.value = value;
	return enqueue(s, op, sync && (k == MEM_PINNED || k == MEM_MANAGED) && !s->cgraph);
}

#define MEMSET1(name, type, elem)                                                                                      \
	CUresult name##_v2(CUdeviceptr d, type v, size_t n)                                                            \
	{                                                                                                              \
		return memset_(NULL, 0, 1, d, 0, v, elem, n, 1);                                                       \
	}                                                                                                              \
	CUresult name##_v2_ptds(CUdeviceptr d, type v, size_t n)                                                       \
	{                                                                                                              \
		return memset_(NULL, 1, 1, d, 0, v, elem, n, 1);                                                       \
	}                                                                                                              \
	CUresult name##Async(CUdeviceptr d, type v, size_t n, CUstream h)                                              \
	{                                                                                                              \
		return memset_(h, 0, 0, d, 0, v, elem, n, 1);                                                          \
	}                                                                                                              \
	CUresult name##Async_ptsz(CUdeviceptr d, type v, size_t n, CUstream h)                                         \
	{                                                                                                              \
		return memset_(h, 1, 0, d, 0, v, elem, n, 1);                                                          \
	}
#define MEMSET2(name, type, elem)                                                                                      \
	CUresult name##_v2(CUdeviceptr d, size_t p, type v, size_t w, size_t hh)                                       \
	{                                                                                                              \
		return memset_(NULL, 0, 1, d, p, v, elem, w, hh);                                                      \
	}                                                                                                              \
	CUresult name##_v2_ptds(CUdeviceptr d, size_t p, type v, size_t w, size_t hh)                                  \
	{                                                                                                              \
		return memset_(NULL, 1, 1, d, p, v, elem, w, hh);                                                      \
	}                                                                                                              \
	CUresult name##Async(CUdeviceptr d, size_t p, type v, size_t w, size_t hh, CUstream h)                         \
	{                                                                                                              \
		return memset_(h, 0, 0, d, p, v, elem, w, hh);                                                         \
	}                                                                                                              \
	CUresult name##Async_ptsz(CUdeviceptr d, size_t p, type v, size_t w, size_t hh, CUstream h)                    \
	{                                                                                                              \
		return memset_(h, 1, 0, d, p, v, elem, w, hh);                                                         \
	}
MEMSET1(cuMemsetD8, unsigned char, 1)
MEMSET1(cuMemsetD16, unsigned short, 2)
MEMSET1(cuMemsetD32, unsigned int, 4)
MEMSET2(cuMemsetD2D8, unsigned char, 1)
MEMSET2(cuMemsetD2D16, unsigned short, 2)
MEMSET2(cuMemsetD2D32, unsigned int, 4)

/* ---------------------------------------------------------------- 7. kernels */

struct kreg {
	const void *fn;
	char *name;
	int nargs;
	size_t *sizes;
};

static struct kreg *kregs;
static size_t nkregs;

int simgpu_register_kernel(const void *fn, const char *name, int nargs, const size_t *argsizes)
{
	struct kreg *k = NULL, *nk;
	char *nm = name ? strdup(name) : NULL;
	size_t *sz = nargs > 0 ? malloc((size_t)nargs * sizeof(*sz)) : NULL;

	if (!fn || (nargs > 0 && (!argsizes || !sz)) || (name && !nm)) {
		free(nm);
		free(sz);
		return -1;
	}
	if (nargs > 0)
		memcpy(sz, argsizes, (size_t)nargs * sizeof(*sz));
	pthread_mutex_lock(&sim_lock);
	for (size_t i = 0; i < nkregs; i++)
		if (kregs[i].fn == fn)
			k = &kregs[i];
	if (!k) {
		nk = realloc(kregs, (nkregs + 1) * sizeof(*nk));
		if (!nk) {
			pthread_mutex_unlock(&sim_lock);
			free(nm);
			free(sz);
			return -1;
		}
		kregs = nk;
		k = &kregs[nkregs++];
	} else {
		free(k->name);
		free(k->sizes);
	}
	*k = (struct kreg){fn, nm, nargs, sz};
	pthread_mutex_unlock(&sim_lock);
	return 0;
}

static struct kreg *kreg_find_locked(const void *fn)
{
	for (size_t i = 0; i < nkregs; i++)
		if (kregs[i].fn == fn)
			return &kregs[i];
	return NULL;
}

/*
 * CUkernel handles. Since CUDA 12.0 NVIDIA's runtime loads its programs'
 * kernels as a library (cuLibraryLoadData) and launches the CUkernel that
 * cuLibraryGetKernel gives (cudart_entry_points.txt: both requested), which
 * cuLaunchKernel takes in place of a CUfunction; cuFuncGetName does not name
 * it (on an H200, CUDA 13.0: 10 of PyTorch's 12 most-launched kernels, all
 * but a cuBLAS one launched from its module's CUfunction, went unnamed), and
 * cuKernelGetName and cuKernelGetFunction take it. Here a CUkernel is an entry
 * of this table, never a host function: a tool that takes it for a CUfunction
 * is told apart, as on a GPU. Entries are never freed (a library's kernels
 * live as long as the library, and the simulated one is never unloaded).
 */
#define MAX_KERNELS 4096
static const void *kernel_fn[MAX_KERNELS]; /* a CUkernel is &kernel_fn[i] */
static unsigned nkernels;

static int is_kernel(const void *h)
{
	const void *const *p = (const void *const *)h;
	return p >= kernel_fn && p < kernel_fn + __atomic_load_n(&nkernels, __ATOMIC_ACQUIRE);
}

/* The host function behind a CUfunction or a CUkernel. */
static const void *fn_of(const void *h)
{
	return is_kernel(h) ? *(const void *const *)h : h;
}

void *simgpu_kernel_of(const void *fn)
{
	void *k = NULL;

	if (!fn)
		return NULL;
	pthread_mutex_lock(&sim_lock);
	for (unsigned i = 0; i < nkernels && !k; i++)
		if (kernel_fn[i] == fn)
			k = (void *)&kernel_fn[i];
	if (!k && nkernels < MAX_KERNELS) {
		kernel_fn[nkernels] = fn;
		k = (void *)&kernel_fn[nkernels];
		__atomic_store_n(&nkernels, nkernels + 1, __ATOMIC_RELEASE);
	}
	pthread_mutex_unlock(&sim_lock);
	return k;
}

CUresult cuFuncGetName(const char **name, CUfunction hfunc)
{
	struct kreg *k;
	Dl_info info;

	if (!name || !hfunc)
		return CUDA_ERROR_INVALID_VALUE;
	if (is_kernel(hfunc))
		return CUDA_ERROR_INVALID_HANDLE; /* a CUkernel: cuKernelGetName names it */
	pthread_mutex_lock(&sim_lock);
	k = kreg_find_locked(hfunc);
	*name = k ? k->name : NULL;
	pthread_mutex_unlock(&sim_lock);
	if (*name)
		return CUDA_SUCCESS;
	if (dladdr((void *)hfunc, &info) && info.dli_saddr == (void *)hfunc && info.dli_sname) {
		*name = info.dli_sname;
		return CUDA_SUCCESS;
	}
	return CUDA_ERROR_NOT_FOUND;
}

CUresult cuFuncGetAttribute(int *pi, CUfunction_attribute attrib, CUfunction hfunc)
{
	if (!pi || !hfunc)
		return CUDA_ERROR_INVALID_VALUE;
	*pi = attrib == CU_FUNC_ATTRIBUTE_MAX_THREADS_PER_BLOCK					      ? 1024
	      : attrib == CU_FUNC_ATTRIBUTE_PTX_VERSION || attrib == CU_FUNC_ATTRIBUTE_BINARY_VERSION ? 80
												      : 0;
	return CUDA_SUCCESS;
}

CUresult cuFuncSetAttribute(CUfunction hfunc, CUfunction_attribute attrib, int value)
{
	return hfunc ? CUDA_SUCCESS : CUDA_ERROR_INVALID_HANDLE;
}

CUresult cuFuncSetCacheConfig(CUfunction hfunc, CUfunc_cache config)
{
	return hfunc ? CUDA_SUCCESS : CUDA_ERROR_INVALID_HANDLE;
}

CUresult cuFuncGetParamInfo(CUfunction func, size_t paramIndex, size_t *paramOffset, size_t *paramSize)
{
	struct kreg *k;
	CUresult r = CUDA_ERROR_INVALID_VALUE;

	pthread_mutex_lock(&sim_lock);
	k = kreg_find_locked(func);
	if (k && k->nargs >= 0 && paramIndex < (size_t)k->nargs) {
		size_t off = 0;
		for (size_t i = 0; i < paramIndex; i++)
			off += k->sizes[i];
		if (paramOffset)
			*paramOffset = off;
		if (paramSize)
			*paramSize = k->sizes[paramIndex];
		r = CUDA_SUCCESS;
	}
	pthread_mutex_unlock(&sim_lock);
	return r;
}

/*
 * Read n bytes at src without faulting: 0 when they are not all readable. Used on
 * the arguments of unregistered kernels, whose count and sizes are guessed (a
 * program written for a real GPU does not NULL-terminate its argument array).
 */
static int safe_read(void *dst, const void *src, size_t n)
{
	struct iovec l = {dst, n}, r = {(void *)src, n};
	ssize_t got = process_vm_readv(getpid(), &l, 1, &r, 1, 0);

	if (got == (ssize_t)n)
		return 1;
	if (got < 0 && (errno == ENOSYS || errno == EPERM)) {
		/* NOTE: no process_vm_readv here (seccomp): trust the documented convention. */
		memcpy(dst, src, n);
		return 1;
	}
	return 0;
}

/*
 * Copy the launch's arguments, as CUDA does at launch: one block holding the
 * pointer array then the values. Registered kernels have known sizes; others
 * pass a NULL-terminated array of arguments of at most 8 bytes each.
 */
static void **pack_args(const void *fn, void **params, void **extra, size_t *store_size, int *fail)
{
	size_t n = 0, total, sizes_local[64], *sizes = sizes_local;
	struct kreg *k;
	char *vals;
	void **out;

	*fail = 0;
	if (!params && extra) {
		/* CU_LAUNCH_PARAM_BUFFER_POINTER / _SIZE: the kernel gets args[0] = the buffer. */
		void *buf = NULL;
		size_t bsz = 0;
		for (size_t i = 0; extra[i] != CU_LAUNCH_PARAM_END; i += 2) {
			if (extra[i] == CU_LAUNCH_PARAM_BUFFER_POINTER)
				buf = extra[i + 1];
			else if (extra[i] == CU_LAUNCH_PARAM_BUFFER_SIZE)
				bsz = *(size_t *)extra[i + 1];
			else
				break;
		}
		out = malloc(2 * sizeof(void *) + bsz);
		if (!out) {
			*fail = 1;
			return NULL;
		}
		memcpy(out + 2, buf, bsz);
		out[0] = out + 2;
		out[1] = NULL;
		*store_size = 2 * sizeof(void *) + bsz;
		return out;
	}
	if (!params)
		return NULL;
	pthread_mutex_lock(&sim_lock);
	k = kreg_find_locked(fn);
	if (k && k->nargs < 0)
		k = NULL; /* registered for its name only */
	if (k) {
		n = (size_t)k->nargs;
		if (n > 64)
			n = 64;
		memcpy(sizes, k->sizes, n * sizeof(*sizes));
	}
	pthread_mutex_unlock(&sim_lock);
	if (!k) {
		void *pv;
		while (n < 64 && safe_read(&pv, &params[n], sizeof(pv)) && pv)
			sizes[n++] = 8;
	}
	total = (n + 1) * sizeof(void *);
	for (size_t i = 0; i < n; i++)
		total += (sizes[i] + 15) & ~(size_t)15;
	out = malloc(total);
	if (!out) {
		*fail = 1;
		return NULL;
	}
	vals = (char *)(out + n + 1);
	for (size_t i = 0; i < n; i++) {
		if (k)
			memcpy(vals, params[i], sizes[i]);
		else if (!safe_read(vals, params[i], sizes[i]))
			memset(vals, 0, sizes[i]); /* an 8-byte read past a small last argument's page */
		out[i] = vals;
		vals += (sizes[i] + 15) & ~(size_t)15;
	}
	out[n] = NULL;
	*store_size = total;
	return out;
}

static CUresult launch(CUfunction f, CUstream h, int pt, void **params, void **extra)
{
	struct op *op;
	int fail;
	RESOLVE(h, pt, s);

	if (!f)
		return CUDA_ERROR_INVALID_HANDLE;
	op = op_new(OP_KERNEL);
	if (!op)
		return CUDA_ERROR_OUT_OF_MEMORY;
	f = (CUfunction)(void *)fn_of(f); /* a CUkernel runs its function */
	op->u.kern.fn = (void (*)(void **))(void *)f;
	op->u.kern.args = pack_args(f, params, extra, &op->u.kern.store_size, &fail);
	if (fail) {
		free(op);
		return CUDA_ERROR_OUT_OF_MEMORY;
	}
	return enqueue(s, op, 0);
}

#define GRID_OK(gx, gy, gz, bx, by, bz) ((gx) && (gy) && (gz) && (bx) && (by) && (bz) && (bx) * (by) * (bz) <= 1024)

CUresult cuLaunchKernel(CUfunction f, unsigned int gx, unsigned int gy, unsigned int gz, unsigned int bx,
			unsigned int by, unsigned int bz, unsigned int shmem, CUstream h, void **params, void **extra)
{
	if (!GRID_OK(gx, gy, gz, bx, by, bz))
		return CUDA_ERROR_INVALID_VALUE;
	return launch(f, h, 0, params, extra);
}

CUresult cuLaunchKernel_ptsz(CUfunction f, unsigned int gx, unsigned int gy, unsigned int gz, unsigned int bx,
			     unsigned int by, unsigned int bz, unsigned int shmem, CUstream h, void **params,
			     void **extra)
{
	if (!GRID_OK(gx, gy, gz, bx, by, bz))
		return CUDA_ERROR_INVALID_VALUE;
	return launch(f, h, 1, params, extra);
}

CUresult cuLaunchCooperativeKernel(CUfunction f, unsigned int gx, unsigned int gy, unsigned int gz, unsigned int bx,
				   unsigned int by, unsigned int bz, unsigned int shmem, CUstream h, void **params)
{
	if (!GRID_OK(gx, gy, gz, bx, by, bz))
		return CUDA_ERROR_INVALID_VALUE;
	return launch(f, h, 0, params, NULL);
}

CUresult cuLaunchCooperativeKernel_ptsz(CUfunction f, unsigned int gx, unsigned int gy, unsigned int gz,
					unsigned int bx, unsigned int by, unsigned int bz, unsigned int shmem,
					CUstream h, void **params)
{
	if (!GRID_OK(gx, gy, gz, bx, by, bz))
		return CUDA_ERROR_INVALID_VALUE;
	return launch(f, h, 1, params, NULL);
}

CUresult cuLaunchKernelEx(const CUlaunchConfig *c, CUfunction f, void **params, void **extra)
{
	if (!c || !GRID_OK(c->gridDimX, c->gridDimY, c->gridDimZ, c->blockDimX, c->blockDimY, c->blockDimZ))
		return CUDA_ERROR_INVALID_VALUE;
	return launch(f, c->hStream, 0, params, extra);
}

CUresult cuLaunchKernelEx_ptsz(const CUlaunchConfig *c, CUfunction f, void **params, void **extra)
{
	if (!c || !GRID_OK(c->gridDimX, c->gridDimY, c->gridDimZ, c->blockDimX, c->blockDimY, c->blockDimZ))
		return CUDA_ERROR_INVALID_VALUE;
	return launch(f, c->hStream, 1, params, extra);
}

/* ---------------------------------------------------------------- 8. stream-ordered allocation */

/* The block is carved at once (the pointer is usable by later work in stream order);
 * cuMemFreeAsync returns it when the stream reaches the free. */
static CUresult alloc_async(CUdeviceptr *dptr, size_t bytes, struct CUmemPoolHandle_st *pool, CUstream h, int pt)
{
	CUresult r;
	RESOLVE(h, pt, s);

	if (!dptr || bytes == 0)
		return CUDA_ERROR_INVALID_VALUE;
	pthread_mutex_lock(&sim_lock);
	if (!pool)
		pool = sim_devs[s->dev].cur_pool;
	r = sim_pool_alloc_locked(pool, bytes, dptr);
	pthread_mutex_unlock(&sim_lock);
	if (r == CUDA_SUCCESS)
		sim_commit((void *)(uintptr_t)*dptr, bytes);
	return r;
}

CUresult cuMemAllocAsync(CUdeviceptr *dptr, size_t bytesize, CUstream hStream)
{
	return alloc_async(dptr, bytesize, NULL, hStream, 0);
}

CUresult cuMemAllocAsync_ptsz(CUdeviceptr *dptr, size_t bytesize, CUstream hStream)
{
	return alloc_async(dptr, bytesize, NULL, hStream, 1);
}

CUresult cuMemAllocFromPoolAsync(CUdeviceptr *dptr, size_t bytesize, CUmemoryPool pool, CUstream hStream)
{
	if (!pool)
		return CUDA_ERROR_INVALID_VALUE;
	return alloc_async(dptr, bytesize, pool, hStream, 0);
}

CUresult cuMemAllocFromPoolAsync_ptsz(CUdeviceptr *dptr, size_t bytesize, CUmemoryPool pool, CUstream hStream)
{
	if (!pool)
		return CUDA_ERROR_INVALID_VALUE;
	return alloc_async(dptr, bytesize, pool, hStream, 1);
}

static CUresult free_async(CUdeviceptr p, CUstream h, int pt)
{
	struct op *op;
	int k;
	RESOLVE(h, pt, s);

	pthread_mutex_lock(&sim_lock);
	k = sim_classify(PTR(p), 1, NULL);
	pthread_mutex_unlock(&sim_lock);
	if (k != MEM_DEVICE)
		return CUDA_ERROR_INVALID_VALUE;
	op = op_new(OP_FREE);
	if (!op)
		return CUDA_ERROR_OUT_OF_MEMORY;
	op->u.fr.p = p;
	return enqueue(s, op, 0);
}

CUresult cuMemFreeAsync(CUdeviceptr dptr, CUstream hStream)
{
	return free_async(dptr, hStream, 0);
}

CUresult cuMemFreeAsync_ptsz(CUdeviceptr dptr, CUstream hStream)
{
	return free_async(dptr, hStream, 1);
}

/* ---------------------------------------------------------------- 9. capture and graphs */

static CUresult begin_capture(CUstream h, CUstreamCaptureMode mode, int pt)
{
	struct CUgraph_st *g;
	CUresult r = CUDA_SUCCESS;
	RESOLVE(h, pt, s);

	if (s->kind == ST_LEGACY)
		return CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED;
	g = calloc(1, sizeof(*g));
	if (!g)
		return CUDA_ERROR_OUT_OF_MEMORY;
	pthread_mutex_lock(&sim_lock);
	if (s->cgraph) {
		r = CUDA_ERROR_ILLEGAL_STATE;
		free(g);
	} else {
		s->cgraph = g;
		s->corigin = s;
		s->cmode = mode;
		s->cthread = pthread_self();
		s->cinvalid = 0;
		s->cid = next_capture_id++;
	}
	pthread_mutex_unlock(&sim_lock);
	return r;
}

CUresult cuStreamBeginCapture(CUstream hStream)
{
	return begin_capture(hStream, CU_STREAM_CAPTURE_MODE_GLOBAL, 0);
}
CUresult cuStreamBeginCapture_ptsz(CUstream hStream)
{
	return begin_capture(hStream, CU_STREAM_CAPTURE_MODE_GLOBAL, 1);
}
CUresult cuStreamBeginCapture_v2(CUstream hStream, CUstreamCaptureMode mode)
{
	return begin_capture(hStream, mode, 0);
}
CUresult cuStreamBeginCapture_v2_ptsz(CUstream hStream, CUstreamCaptureMode mode)
{
	return begin_capture(hStream, mode, 1);
}

static void graph_free(struct CUgraph_st *g)
{
	for (struct op *op = g->head, *n; op; op = n) {
		n = op->next;
		op_free(op);
	}
	free(g);
}

static CUresult end_capture(CUstream h, CUgraph *phGraph, int pt)
{
	struct CUgraph_st *g;
	int invalid;
	RESOLVE(h, pt, s);

	if (!phGraph)
		return CUDA_ERROR_INVALID_VALUE;
	pthread_mutex_lock(&sim_lock);
	if (!s->cgraph) {
		pthread_mutex_unlock(&sim_lock);
		return CUDA_ERROR_ILLEGAL_STATE;
	}
	if (s->corigin != s) {
		pthread_mutex_unlock(&sim_lock);
		return CUDA_ERROR_STREAM_CAPTURE_UNMATCHED;
	}
	g = s->cgraph;
	invalid = s->cinvalid;
	for (struct CUstream_st *o = all_streams; o; o = o->next_all)
		if (o->cgraph == g) {
			o->cgraph = NULL;
			o->corigin = NULL;
			o->cinvalid = 0;
		}
	pthread_mutex_unlock(&sim_lock);
	if (invalid) {
		pthread_mutex_lock(&sim_lock);
		graph_free(g);
		pthread_mutex_unlock(&sim_lock);
		*phGraph = NULL;
		return CUDA_ERROR_STREAM_CAPTURE_INVALIDATED;
	}
	*phGraph = g;
	return CUDA_SUCCESS;
}

CUresult cuStreamEndCapture(CUstream hStream, CUgraph *phGraph)
{
	return end_capture(hStream, phGraph, 0);
}
CUresult cuStreamEndCapture_ptsz(CUstream hStream, CUgraph *phGraph)
{
	return end_capture(hStream, phGraph, 1);
}

static CUresult is_capturing(CUstream h, CUstreamCaptureStatus *st, cuuint64_t *id, CUgraph *g, int pt)
{
	CUresult r = CUDA_SUCCESS;
	RESOLVE(h, pt, s);

	if (!st)
		return CUDA_ERROR_INVALID_VALUE;
	pthread_mutex_lock(&sim_lock);
	*st = !s->cgraph    ? CU_STREAM_CAPTURE_STATUS_NONE
	      : s->cinvalid ? CU_STREAM_CAPTURE_STATUS_INVALIDATED
			    : CU_STREAM_CAPTURE_STATUS_ACTIVE;
	if (id && s->cgraph)
		*id = s->cid;
	if (g)
		*g = s->cgraph;
	/* The legacy stream cannot be asked while a blocking stream of its device captures
	 * in a mode other than relaxed (CUDA's documented rule). */
	if (s->kind == ST_LEGACY)
		for (struct CUstream_st *o = all_streams; o; o = o->next_all)
			if (o->dev == s->dev && blocking(o) && o->cgraph && o->cmode != CU_STREAM_CAPTURE_MODE_RELAXED)
				r = CUDA_ERROR_STREAM_CAPTURE_IMPLICIT;
	pthread_mutex_unlock(&sim_lock);
	return r;
}

CUresult cuStreamIsCapturing(CUstream hStream, CUstreamCaptureStatus *captureStatus)
{
	return is_capturing(hStream, captureStatus, NULL, NULL, 0);
}
CUresult cuStreamIsCapturing_ptsz(CUstream hStream, CUstreamCaptureStatus *captureStatus)
{
	return is_capturing(hStream, captureStatus, NULL, NULL, 1);
}
CUresult cuStreamGetCaptureInfo(CUstream h, CUstreamCaptureStatus *st, cuuint64_t *id)
{
	return is_capturing(h, st, id, NULL, 0);
}
CUresult cuStreamGetCaptureInfo_ptsz(CUstream h, CUstreamCaptureStatus *st, cuuint64_t *id)
{
	return is_capturing(h, st, id, NULL, 1);
}
CUresult cuStreamGetCaptureInfo_v2(CUstream h, CUstreamCaptureStatus *st, cuuint64_t *id, CUgraph *g,
				   const CUgraphNode **deps, size_t *ndeps)
{
	if (deps)
		*deps = NULL;
	if (ndeps)
		*ndeps = 0;
	return is_capturing(h, st, id, g, 0);
}
CUresult cuStreamGetCaptureInfo_v2_ptsz(CUstream h, CUstreamCaptureStatus *st, cuuint64_t *id, CUgraph *g,
					const CUgraphNode **deps, size_t *ndeps)
{
	if (deps)
		*deps = NULL;
	if (ndeps)
		*ndeps = 0;
	return is_capturing(h, st, id, g, 1);
}
CUresult cuStreamGetCaptureInfo_v3(CUstream h, CUstreamCaptureStatus *st, cuuint64_t *id, CUgraph *g,
				   const CUgraphNode **deps, const CUgraphEdgeData **edges, size_t *ndeps)
{
	if (edges)
		*edges = NULL;
	return cuStreamGetCaptureInfo_v2(h, st, id, g, deps, ndeps);
}
CUresult cuStreamGetCaptureInfo_v3_ptsz(CUstream h, CUstreamCaptureStatus *st, cuuint64_t *id, CUgraph *g,
					const CUgraphNode **deps, const CUgraphEdgeData **edges, size_t *ndeps)
{
	if (edges)
		*edges = NULL;
	return cuStreamGetCaptureInfo_v2_ptsz(h, st, id, g, deps, ndeps);
}

CUresult cuThreadExchangeStreamCaptureMode(CUstreamCaptureMode *mode)
{
	CUstreamCaptureMode old = thread_cmode;

	if (!mode || (unsigned)*mode > CU_STREAM_CAPTURE_MODE_RELAXED)
		return CUDA_ERROR_INVALID_VALUE;
	thread_cmode = *mode;
	*mode = old;
	return CUDA_SUCCESS;
}

CUresult cuGraphCreate(CUgraph *phGraph, unsigned int flags)
{
	struct CUgraph_st *g;

	if (!phGraph || flags)
		return CUDA_ERROR_INVALID_VALUE;
	g = calloc(1, sizeof(*g));
	if (!g)
		return CUDA_ERROR_OUT_OF_MEMORY;
	*phGraph = g;
	return CUDA_SUCCESS;
}

CUresult cuGraphDestroy(CUgraph hGraph)
{
	if (!hGraph)
		return CUDA_ERROR_INVALID_VALUE;
	pthread_mutex_lock(&sim_lock);
	graph_free(hGraph);
	pthread_mutex_unlock(&sim_lock);
	return CUDA_SUCCESS;
}

CUresult cuGraphGetNodes(CUgraph hGraph, CUgraphNode *nodes, size_t *numNodes)
{
	size_t i = 0;

	if (!hGraph || !numNodes)
		return CUDA_ERROR_INVALID_VALUE;
	if (nodes)
		for (struct op *op = hGraph->head; op && i < *numNodes; op = op->next)
			nodes[i++] = (CUgraphNode)op;
	else
		i = hGraph->n;
	*numNodes = i;
	return CUDA_SUCCESS;
}

/* Manually built graphs run their nodes in the order they were added, which is
 * always a valid order since a node's dependencies must exist before it. op is
 * NULL when it could not be allocated. */
static CUresult graph_add(CUgraph g, struct op *op, CUgraphNode *node)
{
	if (!op)
		return CUDA_ERROR_OUT_OF_MEMORY;
	graph_append(g, op);
	*node = (CUgraphNode)op;
	return CUDA_SUCCESS;
}

CUresult cuGraphAddKernelNode_v2(CUgraphNode *phGraphNode, CUgraph hGraph, const CUgraphNode *dependencies,
				 size_t numDependencies, const CUDA_KERNEL_NODE_PARAMS *p)
{
	struct op *op;
	int fail;

	if (!phGraphNode || !hGraph || !p || !p->func)
		return CUDA_ERROR_INVALID_VALUE;
	op = op_new(OP_KERNEL);
	if (!op)
		return CUDA_ERROR_OUT_OF_MEMORY;
	op->u.kern.fn = (void (*)(void **))(void *)p->func;
	op->u.kern.args = pack_args(p->func, p->kernelParams, p->extra, &op->u.kern.store_size, &fail);
	if (fail) {
		free(op);
		return CUDA_ERROR_OUT_OF_MEMORY;
	}
	return graph_add(hGraph, op, phGraphNode);
}

CUresult cuGraphAddEmptyNode(CUgraphNode *phGraphNode, CUgraph hGraph, const CUgraphNode *dependencies,
			     size_t numDependencies)
{
	if (!phGraphNode || !hGraph)
		return CUDA_ERROR_INVALID_VALUE;
	return graph_add(hGraph, op_new(OP_NOP), phGraphNode);
}

CUresult cuGraphAddHostNode(CUgraphNode *phGraphNode, CUgraph hGraph, const CUgraphNode *dependencies,
			    size_t numDependencies, const CUDA_HOST_NODE_PARAMS *p)
{
	struct op *op;

	if (!phGraphNode || !hGraph || !p || !p->fn)
		return CUDA_ERROR_INVALID_VALUE;
	op = op_new(OP_HOST);
	if (!op)
		return CUDA_ERROR_OUT_OF_MEMORY;
	op->u.host.fn = p->fn;
	op->u.host.ud = p->userData;
	return graph_add(hGraph, op, phGraphNode);
}

/* A deep copy of a graph's node, so an executable graph outlives its graph. */
static struct op *op_clone(const struct op *src)
{
	struct op *op = malloc(sizeof(*op));

	if (!op)
		return NULL;
	*op = *src;
	op->next = NULL;
	op->deps = NULL;
	op->ndeps = 0;
	if (src->type == OP_KERNEL && src->u.kern.args) {
		char *dst = malloc(src->u.kern.store_size);
		ptrdiff_t delta;
		if (!dst) {
			free(op);
			return NULL;
		}
		memcpy(dst, src->u.kern.args, src->u.kern.store_size);
		delta = dst - (char *)src->u.kern.args;
		op->u.kern.args = (void **)dst;
		for (size_t i = 0; op->u.kern.args[i]; i++)
			op->u.kern.args[i] = (char *)op->u.kern.args[i] + delta;
	}
	return op;
}

static CUresult instantiate(CUgraphExec *phGraphExec, CUgraph g)
{
	struct CUgraphExec_st *e;
	size_t i = 0;

	if (!phGraphExec || !g)
		return CUDA_ERROR_INVALID_VALUE;
	e = calloc(1, sizeof(*e));
	if (!e)
		return CUDA_ERROR_OUT_OF_MEMORY;
	e->nodes = calloc(g->n ? g->n : 1, sizeof(*e->nodes));
	e->refs = 1;
	if (!e->nodes)
		goto oom;
	for (struct op *op = g->head; op; op = op->next, i++)
		if (!(e->nodes[i] = op_clone(op)))
			goto oom;
	e->n = g->n;
	*phGraphExec = e;
	return CUDA_SUCCESS;
oom:
	e->n = i;
	pthread_mutex_lock(&sim_lock);
	exec_put_locked(e);
	pthread_mutex_unlock(&sim_lock);
	return CUDA_ERROR_OUT_OF_MEMORY;
}

static void exec_put_locked(struct CUgraphExec_st *e)
{
	if (--e->refs)
		return;
	for (size_t i = 0; i < e->n; i++)
		op_free(e->nodes[i]);
	free(e->nodes);
	free(e);
}

CUresult cuGraphInstantiateWithFlags(CUgraphExec *phGraphExec, CUgraph hGraph, unsigned long long flags)
{
	return instantiate(phGraphExec, hGraph);
}

CUresult cuGraphInstantiate(CUgraphExec *phGraphExec, CUgraph hGraph, CUgraphNode *phErrorNode, char *logBuffer,
			    size_t bufferSize)
{
	return instantiate(phGraphExec, hGraph);
}

CUresult cuGraphInstantiate_v2(CUgraphExec *phGraphExec, CUgraph hGraph, CUgraphNode *phErrorNode, char *logBuffer,
			       size_t bufferSize)
{
	return instantiate(phGraphExec, hGraph);
}

CUresult cuGraphInstantiateWithParams(CUgraphExec *phGraphExec, CUgraph hGraph, CUDA_GRAPH_INSTANTIATE_PARAMS *p)
{
	CUresult r = instantiate(phGraphExec, hGraph);

	if (p)
		p->result_out = r == CUDA_SUCCESS ? CUDA_GRAPH_INSTANTIATE_SUCCESS : CUDA_GRAPH_INSTANTIATE_ERROR;
	return r;
}

CUresult cuGraphInstantiateWithParams_ptsz(CUgraphExec *phGraphExec, CUgraph hGraph, CUDA_GRAPH_INSTANTIATE_PARAMS *p)
{
	return cuGraphInstantiateWithParams(phGraphExec, hGraph, p);
}

CUresult cuGraphExecDestroy(CUgraphExec hGraphExec)
{
	if (!hGraphExec)
		return CUDA_ERROR_INVALID_VALUE;
	pthread_mutex_lock(&sim_lock);
	exec_put_locked(hGraphExec);
	pthread_mutex_unlock(&sim_lock);
	return CUDA_SUCCESS;
}

/* The whole graph is one operation of the stream: its nodes run back to back. */
static CUresult graph_launch(CUgraphExec e, CUstream h, int pt)
{
	struct op *op;
	RESOLVE(h, pt, s);

	if (!e)
		return CUDA_ERROR_INVALID_VALUE;
	op = op_new(OP_GRAPH);
	if (!op)
		return CUDA_ERROR_OUT_OF_MEMORY;
	pthread_mutex_lock(&sim_lock);
	e->refs++;
	pthread_mutex_unlock(&sim_lock);
	op->u.graph.exec = e;
	if (s->cgraph) {
		/* Capturing a graph launch would need child graphs: not simulated. */
		pthread_mutex_lock(&sim_lock);
		op_free(op);
		pthread_mutex_unlock(&sim_lock);
		return CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED;
	}
	return enqueue(s, op, 0);
}

CUresult cuGraphLaunch(CUgraphExec hGraphExec, CUstream hStream)
{
	return graph_launch(hGraphExec, hStream, 0);
}

CUresult cuGraphLaunch_ptsz(CUgraphExec hGraphExec, CUstream hStream)
{
	return graph_launch(hGraphExec, hStream, 1);
}

CUresult cuGraphUpload(CUgraphExec hGraphExec, CUstream hStream)
{
	return hGraphExec ? CUDA_SUCCESS : CUDA_ERROR_INVALID_VALUE;
}

CUresult cuGraphUpload_ptsz(CUgraphExec hGraphExec, CUstream hStream)
{
	return cuGraphUpload(hGraphExec, hStream);
}

/* ---------------------------------------------------------------- 10. the rest of the stream API */

static CUresult stream_attr(CUstream h, int pt)
{
	RESOLVE(h, pt, s);
	(void)s;
	return CUDA_SUCCESS;
}

CUresult cuStreamGetAttribute(CUstream h, CUstreamAttrID attr, CUstreamAttrValue *value)
{
	if (!value)
		return CUDA_ERROR_INVALID_VALUE;
	memset(value, 0, sizeof(*value));
	return stream_attr(h, 0);
}
CUresult cuStreamGetAttribute_ptsz(CUstream h, CUstreamAttrID attr, CUstreamAttrValue *value)
{
	if (!value)
		return CUDA_ERROR_INVALID_VALUE;
	memset(value, 0, sizeof(*value));
	return stream_attr(h, 1);
}
CUresult cuStreamSetAttribute(CUstream h, CUstreamAttrID attr, const CUstreamAttrValue *param)
{
	return stream_attr(h, 0);
}
CUresult cuStreamSetAttribute_ptsz(CUstream h, CUstreamAttrID attr, const CUstreamAttrValue *param)
{
	return stream_attr(h, 1);
}
CUresult cuStreamCopyAttributes(CUstream dst, CUstream src)
{
	return stream_attr(dst, 0);
}
CUresult cuStreamCopyAttributes_ptsz(CUstream dst, CUstream src)
{
	return stream_attr(dst, 1);
}
CUresult cuStreamAttachMemAsync(CUstream h, CUdeviceptr dptr, size_t length, unsigned int flags)
{
	return stream_attr(h, 0);
}
CUresult cuStreamAttachMemAsync_ptsz(CUstream h, CUdeviceptr dptr, size_t length, unsigned int flags)
{
	return stream_attr(h, 1);
}

/* Managed memory lives on the device arena already: advice and prefetches are
 * accepted and do nothing. */
CUresult cuMemAdvise(CUdeviceptr devPtr, size_t count, CUmem_advise advice, CUdevice device)
{
	return sim_inited ? CUDA_SUCCESS : CUDA_ERROR_NOT_INITIALIZED;
}
CUresult cuMemAdvise_v2(CUdeviceptr devPtr, size_t count, CUmem_advise advice, CUmemLocation location)
{
	return sim_inited ? CUDA_SUCCESS : CUDA_ERROR_NOT_INITIALIZED;
}
CUresult cuMemPrefetchAsync(CUdeviceptr devPtr, size_t count, CUdevice dstDevice, CUstream h)
{
	return stream_attr(h, 0);
}
CUresult cuMemPrefetchAsync_ptsz(CUdeviceptr devPtr, size_t count, CUdevice dstDevice, CUstream h)
{
	return stream_attr(h, 1);
}
CUresult cuMemPrefetchAsync_v2(CUdeviceptr devPtr, size_t count, CUmemLocation location, unsigned int flags, CUstream h)
{
	return stream_attr(h, 0);
}
CUresult cuMemPrefetchAsync_v2_ptsz(CUdeviceptr devPtr, size_t count, CUmemLocation location, unsigned int flags,
				    CUstream h)
{
	return stream_attr(h, 1);
}

/*
 * A batch is its copies, queued in order on the stream (CUDA runs them in any
 * order; in order is one of those). What cuMemcpyBatchAsync documents: the
 * legacy NULL stream is refused; every copy needs attributes: attrsIdxs[0] is
 * 0, the indices increase and stay below count, numAttrs <= count, and each
 * srcAccessOrder is one of the three (else CUDA_ERROR_INVALID_VALUE). A copy
 * whose source is to be read "during the API call" returns once it has run:
 * its source is read before the call returns, as the order requires (the
 * driver may read it out of stream order; waiting for the stream is the
 * stricter way to meet it).
 */
static int batch_order_ok(CUmemcpySrcAccessOrder o)
{
	return o == CU_MEMCPY_SRC_ACCESS_ORDER_STREAM || o == CU_MEMCPY_SRC_ACCESS_ORDER_DURING_API_CALL ||
	       o == CU_MEMCPY_SRC_ACCESS_ORDER_ANY;
}

/* The stream of a batch: any but the legacy NULL stream ("Must not be legacy NULL stream"). */
static CUresult batch_stream(CUstream h, int pt, struct CUstream_st **out)
{
	CUresult r = stream_of(h, pt, out);
	if (r == CUDA_SUCCESS && (*out)->kind == ST_LEGACY)
		return CUDA_ERROR_INVALID_VALUE;
	return r;
}

/* One copy of a batch: queued, and waited for when its source must be read by the return. */
static CUresult batch_copy(struct CUstream_st *s, struct span dst, struct span src, size_t w, size_t h, size_t d,
			   CUmemcpySrcAccessOrder order)
{
	struct op *op;
	int host_sync = 0;
	CUresult r = copy_op(dst, src, w, h, d, 0, 0, &op, &host_sync);

	if (r != CUDA_SUCCESS || !op)
		return r;
	if (host_sync == HOST_STAGED && !s->cgraph)
		op->u.copy.staged_on = s;
	if (order == CU_MEMCPY_SRC_ACCESS_ORDER_DURING_API_CALL && !host_sync)
		host_sync = 1;
	return enqueue(s, op, s->cgraph ? 0 : host_sync);
}

static CUresult batch(CUdeviceptr *dsts, CUdeviceptr *srcs, size_t *sizes, size_t count, CUmemcpyAttributes *attrs,
		      size_t *attrsIdxs, size_t numAttrs, size_t *failIdx, CUstream h, int pt)
{
	struct CUstream_st *s;
	CUresult r = batch_stream(h, pt, &s);

	if (r != CUDA_SUCCESS)
		return r;
	if (!dsts || !srcs || !sizes || count == 0 || !attrs || !attrsIdxs || numAttrs == 0 || numAttrs > count ||
	    attrsIdxs[0] != 0)
		return CUDA_ERROR_INVALID_VALUE;
	for (size_t k = 0; k < numAttrs; k++)
		if (!batch_order_ok(attrs[k].srcAccessOrder) || attrsIdxs[k] >= count ||
		    (k && attrsIdxs[k] <= attrsIdxs[k - 1]))
			return CUDA_ERROR_INVALID_VALUE;
	for (size_t i = 0, k = 0; i < count; i++) {
		while (k + 1 < numAttrs && attrsIdxs[k + 1] <= i)
			k++;
		r = batch_copy(s, lin(PTR(dsts[i])), lin(PTR(srcs[i])), sizes[i], 1, 1, attrs[k].srcAccessOrder);
		if (r != CUDA_SUCCESS) {
			if (failIdx)
				*failIdx = i;
			return r;
		}
	}
	if (failIdx)
		*failIdx = SIZE_MAX;
	return CUDA_SUCCESS;
}

CUresult cuMemcpyBatchAsync(CUdeviceptr *dsts, CUdeviceptr *srcs, size_t *sizes, size_t count,
			    CUmemcpyAttributes *attrs, size_t *attrsIdxs, size_t numAttrs, size_t *failIdx, CUstream h)
{
	return batch(dsts, srcs, sizes, count, attrs, attrsIdxs, numAttrs, failIdx, h, 0);
}
CUresult cuMemcpyBatchAsync_ptsz(CUdeviceptr *dsts, CUdeviceptr *srcs, size_t *sizes, size_t count,
				 CUmemcpyAttributes *attrs, size_t *attrsIdxs, size_t numAttrs, size_t *failIdx,
				 CUstream h)
{
	return batch(dsts, srcs, sizes, count, attrs, attrsIdxs, numAttrs, failIdx, h, 1);
}
CUresult cuMemcpyBatchAsync_v2(CUdeviceptr *dsts, CUdeviceptr *srcs, size_t *sizes, size_t count,
			       CUmemcpyAttributes *attrs, size_t *attrsIdxs, size_t numAttrs, CUstream h)
{
	return batch(dsts, srcs, sizes, count, attrs, attrsIdxs, numAttrs, NULL, h, 0);
}
CUresult cuMemcpyBatchAsync_v2_ptsz(CUdeviceptr *dsts, CUdeviceptr *srcs, size_t *sizes, size_t count,
				    CUmemcpyAttributes *attrs, size_t *attrsIdxs, size_t numAttrs, CUstream h)
{
	return batch(dsts, srcs, sizes, count, attrs, attrsIdxs, numAttrs, NULL, h, 1);
}

CUresult cuKernelGetFunction(CUfunction *pFunc, CUkernel kernel)
{
	if (!pFunc || !kernel)
		return CUDA_ERROR_INVALID_VALUE;
	if (!is_kernel(kernel))
		return CUDA_ERROR_INVALID_HANDLE;
	*pFunc = (CUfunction)(void *)fn_of(kernel); /* the context's function is the kernel's host function */
	return CUDA_SUCCESS;
}

CUresult cuKernelGetName(const char **name, CUkernel hfunc)
{
	if (!name || !hfunc)
		return CUDA_ERROR_INVALID_VALUE;
	if (!is_kernel(hfunc))
		return CUDA_ERROR_INVALID_HANDLE;
	return cuFuncGetName(name, (CUfunction)(void *)fn_of(hfunc));
}

CUresult cuOccupancyMaxActiveBlocksPerMultiprocessorWithFlags(int *numBlocks, CUfunction func, int blockSize,
							      size_t dynamicSMemSize, unsigned int flags)
{
	if (!numBlocks || blockSize <= 0)
		return CUDA_ERROR_INVALID_VALUE;
	*numBlocks = 2048 / blockSize > 32 ? 32 : 2048 / blockSize;
	return CUDA_SUCCESS;
}

CUresult cuOccupancyAvailableDynamicSMemPerBlock(size_t *dynamicSmemSize, CUfunction func, int numBlocks, int blockSize)
{
	if (!dynamicSmemSize)
		return CUDA_ERROR_INVALID_VALUE;
	*dynamicSmemSize = 49152;
	return CUDA_SUCCESS;
}

/*
 * 3D batches: pointer operands only (CUDA arrays are not simulated); extents in
 * elements of one byte (pointer to pointer). Refused as cuMemcpy3DBatchAsync
 * documents: the default NULL stream, flags other than 0, a zero extent, a row
 * length or layer height below the extent, an invalid srcAccessOrder.
 */
static CUresult batch3d(size_t numOps, CUDA_MEMCPY3D_BATCH_OP *ops, size_t *failIdx, unsigned long long flags,
			CUstream h, int pt)
{
	struct CUstream_st *s;
	CUresult r = batch_stream(h, pt, &s);

	if (r != CUDA_SUCCESS)
		return r;
	if (!ops || numOps == 0 || flags != 0)
		return CUDA_ERROR_INVALID_VALUE;
	for (size_t i = 0; i < numOps; i++) {
		const CUDA_MEMCPY3D_BATCH_OP *o = &ops[i];
		if (!batch_order_ok(o->srcAccessOrder) || !o->extent.width || !o->extent.height || !o->extent.depth)
			return CUDA_ERROR_INVALID_VALUE;
		for (int side = 0; side < 2; side++) {
			const CUmemcpy3DOperand *x = side ? &o->dst : &o->src;
			if (x->type == CU_MEMCPY_OPERAND_TYPE_POINTER &&
			    ((x->op.ptr.rowLength && x->op.ptr.rowLength < o->extent.width) ||
			     (x->op.ptr.layerHeight && x->op.ptr.layerHeight < o->extent.height)))
				return CUDA_ERROR_INVALID_VALUE;
		}
	}
	for (size_t i = 0; i < numOps; i++) {
		const CUDA_MEMCPY3D_BATCH_OP *o = &ops[i];
		struct span d, s_;
		size_t w = o->extent.width, hh = o->extent.height, dd = o->extent.depth;
		if (o->src.type != CU_MEMCPY_OPERAND_TYPE_POINTER || o->dst.type != CU_MEMCPY_OPERAND_TYPE_POINTER) {
			r = CUDA_ERROR_NOT_SUPPORTED;
		} else {
			d.p = PTR(o->dst.op.ptr.ptr);
			d.pitch = o->dst.op.ptr.rowLength ? o->dst.op.ptr.rowLength : w;
			d.slice = d.pitch * (o->dst.op.ptr.layerHeight ? o->dst.op.ptr.layerHeight : hh);
			s_.p = PTR(o->src.op.ptr.ptr);
			s_.pitch = o->src.op.ptr.rowLength ? o->src.op.ptr.rowLength : w;
			s_.slice = s_.pitch * (o->src.op.ptr.layerHeight ? o->src.op.ptr.layerHeight : hh);
			r = batch_copy(s, d, s_, w, hh, dd, o->srcAccessOrder);
		}
		if (r != CUDA_SUCCESS) {
			if (failIdx)
				*failIdx = i;
			return r;
		}
	}
	if (failIdx)
		*failIdx = SIZE_MAX;
	return CUDA_SUCCESS;
}

CUresult cuMemcpy3DBatchAsync(size_t numOps, CUDA_MEMCPY3D_BATCH_OP *opList, size_t *failIdx, unsigned long long flags,
			      CUstream h)
{
	return batch3d(numOps, opList, failIdx, flags, h, 0);
}
CUresult cuMemcpy3DBatchAsync_ptsz(size_t numOps, CUDA_MEMCPY3D_BATCH_OP *opList, size_t *failIdx,
				   unsigned long long flags, CUstream h)
{
	return batch3d(numOps, opList, failIdx, flags, h, 1);
}
CUresult cuMemcpy3DBatchAsync_v2(size_t numOps, CUDA_MEMCPY3D_BATCH_OP *opList, unsigned long long flags, CUstream h)
{
	return batch3d(numOps, opList, NULL, flags, h, 0);
}
CUresult cuMemcpy3DBatchAsync_v2_ptsz(size_t numOps, CUDA_MEMCPY3D_BATCH_OP *opList, unsigned long long flags,
				      CUstream h)
{
	return batch3d(numOps, opList, NULL, flags, h, 1);
}

static CUresult update_deps(CUstream h, int pt)
{
	RESOLVE(h, pt, s);
	return s->cgraph ? CUDA_SUCCESS : CUDA_ERROR_ILLEGAL_STATE;
}

CUresult cuStreamUpdateCaptureDependencies(CUstream h, CUgraphNode *deps, size_t n, unsigned int flags)
{
	return update_deps(h, 0);
}
CUresult cuStreamUpdateCaptureDependencies_ptsz(CUstream h, CUgraphNode *deps, size_t n, unsigned int flags)
{
	return update_deps(h, 1);
}
CUresult cuStreamUpdateCaptureDependencies_v2(CUstream h, CUgraphNode *deps, const CUgraphEdgeData *data, size_t n,
					      unsigned int flags)
{
	return update_deps(h, 0);
}
CUresult cuStreamUpdateCaptureDependencies_v2_ptsz(CUstream h, CUgraphNode *deps, const CUgraphEdgeData *data, size_t n,
						   unsigned int flags)
{
	return update_deps(h, 1);
}

CUresult cuStreamGetCtx_v2(CUstream h, CUcontext *pCtx, CUgreenCtx *pGreenCtx)
{
	if (pGreenCtx)
		*pGreenCtx = NULL;
	return cuStreamGetCtx(h, pCtx);
}
CUresult cuStreamGetCtx_v2_ptsz(CUstream h, CUcontext *pCtx, CUgreenCtx *pGreenCtx)
{
	if (pGreenCtx)
		*pGreenCtx = NULL;
	return cuStreamGetCtx_ptsz(h, pCtx);
}

/* Graph nodes built by hand: copies and memsets become the same operations a
 * stream would run (host-synchronous behaviour does not apply inside a graph). */
CUresult cuGraphAddMemcpyNode(CUgraphNode *phGraphNode, CUgraph hGraph, const CUgraphNode *dependencies,
			      size_t numDependencies, const CUDA_MEMCPY3D *c, CUcontext ctx)
{
	struct span d, s_;
	struct op *op;
	int hs;
	CUresult r;

	if (!phGraphNode || !hGraph)
		return CUDA_ERROR_INVALID_VALUE;
	if ((r = spans3d(c, &d, &s_)) || (r = copy_op(d, s_, c->WidthInBytes, c->Height, c->Depth, 0, 0, &op, &hs)))
		return r;
	return graph_add(hGraph, op ? op : op_new(OP_NOP), phGraphNode);
}

CUresult cuGraphAddMemsetNode(CUgraphNode *phGraphNode, CUgraph hGraph, const CUgraphNode *dependencies,
			      size_t numDependencies, const CUDA_MEMSET_NODE_PARAMS *p, CUcontext ctx)
{
	struct op *op;

	if (!phGraphNode || !hGraph || !p || !p->dst || !p->width || !p->height ||
	    (p->elementSize != 1 && p->elementSize != 2 && p->elementSize != 4))
		return CUDA_ERROR_INVALID_VALUE;
	op = op_new(OP_MEMSET);
	if (!op)
		return CUDA_ERROR_OUT_OF_MEMORY;
	op->u.set.dst = PTR(p->dst);
	op->u.set.pitch = p->pitch;
	op->u.set.width = p->width;
	op->u.set.height = p->height;
	op->u.set.elem = p->elementSize;
	op->u.set.value = p->value;
	return graph_add(hGraph, op, phGraphNode);
}
