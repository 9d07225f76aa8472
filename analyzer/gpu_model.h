/*
 * gpu_model.h - the GPU time of launches that were not timed (docs/definitions.md,
 * "Modelled GPU time"): with STEPPROF_KERNEL_TIMING=auto the preload times a
 * sample of each kernel's launches; every other launch gets a modelled span
 * here, placed on its stream from the launch times, stream order and each
 * kernel's duration learned from the samples, then fitted to the anchors that
 * bound it (the next measured op of the stream, the stream's synchronisations),
 * so that a model error never outlives one anchor.
 *
 * Streaming, as pass 2 is: ops enter in record order, measured spans join
 * their op when they arrive (late: read back at the program's syncs), and a
 * launch is resolved once the stream of records has moved past it by the
 * pass's lateness window (gm_resolve). Memory follows that window.
 */
#ifndef STEPPROF_GPU_MODEL_H
#define STEPPROF_GPU_MODEL_H

#include <stdint.h>

struct gmodel;

/* Counters of what the model placed (summary.gpu_time). */
struct gm_stats {
	uint64_t measured_ns;  /* kernel GPU time from timing events (sum of spans) */
	uint64_t modelled_ns;  /* kernel GPU time placed by the model */
	uint64_t measured, modelled, unknown; /* launches: timed, modelled, neither (a kernel never sampled) */
};

struct gmodel *gm_new(void);
void gm_free(struct gmodel *m);
/* A launch (launch = 1: name is its kernel's string id) or another GPU op (copy, memset) of the trainer. 0, or -1. */
int gm_op(struct gmodel *m, unsigned dev, uint64_t stream, uint32_t op, int launch, uint32_t name, uint64_t t0,
	  uint64_t t1);
/*
 * The measured span of op, as it will be counted. For a launch, its begin is
 * moved to the call's return when the span's begin is the call's begin (a
 * launch chained behind an op that had ended: its begin event is the host's
 * call time, before the kernel was even submitted). Returns the begin to use.
 */
uint64_t gm_span(struct gmodel *m, uint32_t op, uint64_t gb, uint64_t ge);
/*
 * What gm_span returns for the span of a launch that was modelled already (its
 * span came later than the window its iteration was closed with): left out, so
 * that the launch's GPU time is not counted twice.
 */
#define GM_SPAN_DROP UINT64_MAX
/* A blocking synchronisation of the trainer, [s0, s1): of one stream, of every stream of dev, or another (an event's). */
enum { GM_SYNC_STREAM, GM_SYNC_DEVICE, GM_SYNC_OTHER };
int gm_sync(struct gmodel *m, unsigned dev, uint64_t stream, int kind, uint64_t s0, uint64_t s1);
/*
 * The kind of sync a blocking synchronisation call is, by its API name: a
 * device's or context's, a stream's, or another (an event's).
 */
int gm_sync_kind(const char *api);
/* A modelled span [b, e) of the launch op of kernel name (gm_op's), on (dev, stream). */
struct gm_modelled {
	uint64_t b, e;
	uint64_t stream;
	uint32_t op, name;
	unsigned dev;
};
/* Place every untimed launch issued before force; emit(arg, span) for each modelled span. */
typedef void (*gm_emit_fn)(void *arg, const struct gm_modelled *s);
void gm_resolve(struct gmodel *m, uint64_t force, gm_emit_fn emit, void *arg);
const struct gm_stats *gm_stats(const struct gmodel *m);

#endif
