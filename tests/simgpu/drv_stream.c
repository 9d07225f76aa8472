/*
 * drv_stream.c - Stream Management of CUDA's Driver API.
 *
 *   1. creating and destroying streams, synchronising with and querying them,
 *      their properties, waiting for an event; the rules of capture modes for
 *      the calls that wait (cuThreadExchangeStreamCaptureMode)
 *   2. stream capture: a capturing stream records its operations into a graph
 *      (drv_graph.c) instead of queuing them
 *   3. attributes (accepted, none simulated), capture dependencies, cuStreamGetCtx_v2
 *
 * The streams themselves, their worker threads and what they run are in drv_exec.c.
 */
#include "sim.h"

#include <stdlib.h>
#include <string.h>

static unsigned long long next_capture_id = 1;
/* This thread's stream capture interaction mode (cuThreadExchangeStreamCaptureMode). */
static __thread CUstreamCaptureMode thread_cmode = CU_STREAM_CAPTURE_MODE_GLOBAL;

/* ---------------------------------------------------------------- 1. streams, synchronisation */

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
	s = sim_stream_new_locked(dev, ST_USER, Flags, prio);
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
CUresult sim_refuse_unsafe_locked(void)
{
	CUresult r = CUDA_SUCCESS;
	pthread_t self = pthread_self();

	if (thread_cmode == CU_STREAM_CAPTURE_MODE_RELAXED)
		return CUDA_SUCCESS;
	for (struct CUstream_st *o = sim_all_streams; o; o = o->next_all) {
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
	r = sim_refuse_unsafe_locked();
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
	SIM_RESOLVE(h, pt, s);

	pthread_mutex_lock(&sim_lock);
	r = refuse_capture_locked(s);
	if (r == CUDA_SUCCESS)
		r = sim_refuse_unsafe_locked();
	if (r == CUDA_SUCCESS)
		sim_wait_seq_locked(s, s->submitted);
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
	SIM_RESOLVE(h, pt, s);

	pthread_mutex_lock(&sim_lock);
	r = refuse_capture_locked(s);
	if (r == CUDA_SUCCESS)
		r = sim_refuse_unsafe_locked();
	if (r == CUDA_SUCCESS) {
		sim_reach_events_locked(s);
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
	struct sim_dep *snap;

	if (!sim_inited)
		return CUDA_ERROR_NOT_INITIALIZED;
	pthread_mutex_lock(&sim_lock);
	for (s = sim_all_streams; s; s = s->next_all)
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
	for (s = sim_all_streams; s; s = s->next_all)
		if (s->dev == dev)
			snap[i++] = (struct sim_dep){s, s->submitted};
	for (i = 0; i < n; i++)
		sim_wait_seq_locked(snap[i].s, snap[i].seq);
	pthread_mutex_unlock(&sim_lock);
	free(snap);
	return CUDA_SUCCESS;
}

#define STREAM_GETTER(name, ptname, type, expr)                                                                        \
	static CUresult name##_impl(CUstream h, type *out, int pt)                                                     \
	{                                                                                                              \
		SIM_RESOLVE(h, pt, s);                                                                                 \
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
	struct sim_op *op;
	SIM_RESOLVE(h, pt, s);

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
	op = sim_op_new(OP_NOP);
	if (!op)
		return CUDA_ERROR_OUT_OF_MEMORY;
	pthread_mutex_lock(&sim_lock);
	if (ev->s && !s->cgraph && sim_add_dep(op, ev->s, ev->seq)) {
		pthread_mutex_unlock(&sim_lock);
		sim_op_free(op);
		return CUDA_ERROR_OUT_OF_MEMORY;
	}
	pthread_mutex_unlock(&sim_lock);
	if (s->cgraph) {
		sim_op_free(op);
		return CUDA_SUCCESS;
	}
	return sim_enqueue(s, op, 0);
}

CUresult cuStreamWaitEvent(CUstream hStream, CUevent hEvent, unsigned int Flags)
{
	return stream_wait_event(hStream, hEvent, Flags, 0);
}

CUresult cuStreamWaitEvent_ptsz(CUstream hStream, CUevent hEvent, unsigned int Flags)
{
	return stream_wait_event(hStream, hEvent, Flags, 1);
}

/* ---------------------------------------------------------------- 2. stream capture */

static CUresult begin_capture(CUstream h, CUstreamCaptureMode mode, int pt)
{
	struct CUgraph_st *g;
	CUresult r = CUDA_SUCCESS;
	SIM_RESOLVE(h, pt, s);

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

static CUresult end_capture(CUstream h, CUgraph *phGraph, int pt)
{
	struct CUgraph_st *g;
	int invalid;
	SIM_RESOLVE(h, pt, s);

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
	for (struct CUstream_st *o = sim_all_streams; o; o = o->next_all)
		if (o->cgraph == g) {
			o->cgraph = NULL;
			o->corigin = NULL;
			o->cinvalid = 0;
		}
	pthread_mutex_unlock(&sim_lock);
	if (invalid) {
		pthread_mutex_lock(&sim_lock);
		sim_graph_free(g);
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
	SIM_RESOLVE(h, pt, s);

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
		for (struct CUstream_st *o = sim_all_streams; o; o = o->next_all)
			if (o->dev == s->dev && sim_stream_blocking(o) && o->cgraph &&
			    o->cmode != CU_STREAM_CAPTURE_MODE_RELAXED)
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

/* ---------------------------------------------------------------- 3. attributes, capture dependencies, green contexts
 */

CUresult sim_stream_check(CUstream h, int pt)
{
	SIM_RESOLVE(h, pt, s);
	(void)s;
	return CUDA_SUCCESS;
}

CUresult cuStreamGetAttribute(CUstream h, CUstreamAttrID attr, CUstreamAttrValue *value)
{
	if (!value)
		return CUDA_ERROR_INVALID_VALUE;
	memset(value, 0, sizeof(*value));
	return sim_stream_check(h, 0);
}
CUresult cuStreamGetAttribute_ptsz(CUstream h, CUstreamAttrID attr, CUstreamAttrValue *value)
{
	if (!value)
		return CUDA_ERROR_INVALID_VALUE;
	memset(value, 0, sizeof(*value));
	return sim_stream_check(h, 1);
}
CUresult cuStreamSetAttribute(CUstream h, CUstreamAttrID attr, const CUstreamAttrValue *param)
{
	return sim_stream_check(h, 0);
}
CUresult cuStreamSetAttribute_ptsz(CUstream h, CUstreamAttrID attr, const CUstreamAttrValue *param)
{
	return sim_stream_check(h, 1);
}
CUresult cuStreamCopyAttributes(CUstream dst, CUstream src)
{
	return sim_stream_check(dst, 0);
}
CUresult cuStreamCopyAttributes_ptsz(CUstream dst, CUstream src)
{
	return sim_stream_check(dst, 1);
}
CUresult cuStreamAttachMemAsync(CUstream h, CUdeviceptr dptr, size_t length, unsigned int flags)
{
	return sim_stream_check(h, 0);
}
CUresult cuStreamAttachMemAsync_ptsz(CUstream h, CUdeviceptr dptr, size_t length, unsigned int flags)
{
	return sim_stream_check(h, 1);
}

static CUresult update_deps(CUstream h, int pt)
{
	SIM_RESOLVE(h, pt, s);
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
