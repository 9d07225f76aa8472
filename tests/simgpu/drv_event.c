/*
 * drv_event.c - Event Management of CUDA's Driver API. A record is an operation of
 * its stream (drv_exec.c) that takes the time the stream reaches it on its timeline;
 * recorded into a capture it only marks a fork or join point (drv_stream.c).
 */
#include "sim.h"

#include <stdlib.h>

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
	sim_event_put_locked(hEvent);
	pthread_mutex_unlock(&sim_lock);
	return CUDA_SUCCESS;
}

unsigned long sim_event_records;

static CUresult event_record(CUevent ev, CUstream h, int pt)
{
	struct sim_op *op;
	SIM_RESOLVE(h, pt, s);

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
	op = sim_op_new(OP_EVENT);
	if (!op) {
		cuEventDestroy_v2(ev);
		return CUDA_ERROR_OUT_OF_MEMORY;
	}
	op->u.event.ev = ev;
	return sim_enqueue(s, op, 0);
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
	else if ((r = sim_refuse_unsafe_locked()) == CUDA_SUCCESS) {
		if (ev->s && ev->s->completed < ev->seq)
			sim_reach_events_locked(ev->s);
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
	else if ((r = sim_refuse_unsafe_locked()) == CUDA_SUCCESS && ev->s)
		sim_wait_seq_locked(ev->s, ev->seq);
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
