/*
 * recorder.h - the in-process recorder of libstepprof.so: what every hook calls.
 *
 * The record path (sp_emit, sp_intern on a known string, sp_now) takes no lock,
 * calls no malloc, no stdio and no syscall other than the vDSO clock (sp_now,
 * clock.h: the TSC scaled to CLOCK_MONOTONIC where that is safe); it writes a
 * fixed-size record into the calling thread's chunk of the file-backed MAP_SHARED
 * trace, so what is written survives _exit, SIGKILL and the OOM killer. When a
 * record cannot be written it is counted (a LOST record follows as soon as space
 * is available again) instead of blocking. Opening a new chunk (once per ~2000
 * records) may reserve its disk space (one write of 64 KiB of zeros): the
 * amortised slow path.
 *
 * The trace file is created lazily, at the process's first record, so a process
 * that records nothing leaves no file. After fork() the child gets its own file
 * and fresh per-thread state (pthread_atfork).
 */
#ifndef STEPPROF_RECORDER_H
#define STEPPROF_RECORDER_H

#include <stddef.h>
#include <stdint.h>
#include <time.h>

#include "stepprof/trace.h"
#include "clock.h"
#include "tracefile.h"

#define SP_HIDDEN __attribute__((visibility("hidden")))

/* Nonzero once the recorder is initialised and not disabled (STEPPROF_DISABLE). */
SP_HIDDEN extern volatile int sp_active;

/*
 * The capture range (STEPPROF_CAPTURE, capture.c). on: nonzero while the
 * process records, sp_active and inside the range (always, with the default
 * `all`); the one flag the wrappers test: outside the range a wrapper costs
 * what it costs with STEPPROF_DISABLE=1, one predictable branch on a global.
 * in: inside the range. A page of its own: with a range, it is shared with
 * every process forked afterwards (MAP_SHARED), so that a DataLoader's workers
 * forked before cudaProfilerStart record inside the range their trainer opens.
 */
struct sp_cap_page {
	volatile int on;
	int in;
	char pad[4096 - 2 * sizeof(int)];
} __attribute__((aligned(4096)));
SP_HIDDEN extern struct sp_cap_page sp_cap;

/*
 * The capture range (capture.c). sp_capture_init reads STEPPROF_CAPTURE
 * (config.c parsed it) once the recorder is active; sp_capture_stop when this
 * process stops recording (sp_cap.on 0 from then on, for this process only:
 * async-signal-safe); sp_capture_fork_child in a forked child (fork()'s
 * handlers). sp_capture_profiler(on): cudaProfilerStart (1)
 * or cudaProfilerStop (0) was called, through any door. sp_capture_steps is
 * nonzero with STEPPROF_CAPTURE=steps:A-B, where stepprof_step calls
 * sp_capture_step_begin with the mark's index before its record (1: record
 * it) and sp_capture_step_end after.
 */
SP_HIDDEN void sp_capture_init(void);
SP_HIDDEN void sp_capture_stop(void);
SP_HIDDEN void sp_capture_fork_child(void);
SP_HIDDEN void sp_capture_profiler(int on);
SP_HIDDEN extern int sp_capture_steps;
SP_HIDDEN int sp_capture_step_begin(uint64_t index);
SP_HIDDEN void sp_capture_step_end(uint64_t index);

/* 1 when this process's trace file could not be made: it records nothing, ever. */
SP_HIDDEN int sp_recorder_failed(void);

/*
 * Start the recorder now if the constructor has not run yet (hook_init.c);
 * returns sp_active. Weak: the recorder's core is also linked without the
 * constructor (unit tests), where there is nothing to start.
 */
SP_HIDDEN int sp_start(void) __attribute__((weak));

static inline int sp_started(void)
{
	return __builtin_expect(sp_active, 1) || (sp_start && sp_start());
}

/*
 * Per-thread hook depth. A wrapper increments it around the real call, so that
 * work the real function does through other hooked functions (the runtime
 * calling the driver, fopen calling open, the recorder's own file I/O) is not
 * recorded twice. Initial-exec TLS: no allocation, no lock.
 */
SP_HIDDEN extern __thread int sp_hook_depth __attribute__((tls_model("initial-exec")));

/*
 * Record one event of `kind` (enum sp_kind) on the calling thread. f[] is indexed
 * by enum sp_field; only the kind's fields are read (kinds.def). Never fails
 * visibly: a record that cannot be stored is counted as lost.
 *
 * Three layers, all with the same effect:
 *   sp_emit       inline; a one-slot kind named by a compile-time constant is
 *                 recorded right there (sp_emit_k), any other goes to sp_emit_slow;
 *   sp_emit_slow  any kind: a switch whose every case is that kind's sp_emit_k;
 *   sp_emit_rare  the whole path, for what sp_emit_k does not do itself: the
 *                 thread's first record, a full chunk, a summary window's end,
 *                 the kinds that feed the summaries (STEP, ALLOC, FREE).
 */
SP_HIDDEN void sp_emit_slow(unsigned kind, unsigned api, uint64_t begin_ns, uint64_t end_ns, const uint64_t *f);
SP_HIDDEN void sp_emit_rare(unsigned kind, unsigned api, uint64_t begin_ns, uint64_t end_ns, const uint64_t *f);

/* The calling thread's writer stream (recorder.c; cur == end == NULL: no chunk yet). */
SP_HIDDEN extern __thread struct sp_tf_stream sp_rec_stream __attribute__((tls_model("initial-exec")));

/*
 * What the record path reads that a child made without fork()'s handlers (a
 * raw clone(SIGCHLD), which runs no pthread_atfork handler) must not take from
 * its parent: one page of its own, MADV_WIPEONFORK, which such a child finds
 * zeroed. sum_next is the summary window's end (UINT64_MAX: summaries off): a
 * record ending at or after it takes the rare path, which writes the summary;
 * at 0 every record of the child takes the rare path, which sees alive == 0
 * and gives the child its own file, as fork does. So the check costs the hot
 * path nothing: the compare it made anyway.
 */
struct sp_proc_page {
	uint64_t sum_next;
	uint64_t *op_counter; /* sp_next_op: the file header's counter (NULL: none yet) */
	int state;	      /* the file: recorder.c's FILE_* */
	int alive;	      /* 1 in the process that set the page up; 0 in a child not told of the fork */
	char pad[4096 - 24];
} __attribute__((aligned(4096)));
SP_HIDDEN extern struct sp_proc_page sp_proc;

/* Kinds whose records update the summaries' running values (rare path only). */
#define SP_SUM_KINDS ((1ull << SP_K_STEP) | (1ull << SP_K_ALLOC) | (1ull << SP_K_FREE))

/*
 * sp_emit_rare given a copy of the kind's own fields of f[], for sp_emit_k.
 * RATIONALE: the caller's f[] is a local array that the inline path turns into
 * registers, but only while its address goes nowhere: passed to sp_emit_rare
 * itself, the array escaped, so every field was stored to the stack before the
 * record and, past sp_emit_k's signal fences (a compiler barrier for escaped
 * memory), loaded back for the encoding (objdump of read: five stores and five
 * loads). The copy is made on the rare path only.
 */
static inline __attribute__((always_inline)) void sp_emit_rare_copy(unsigned kind, unsigned api, uint64_t begin_ns,
								    uint64_t end_ns, const uint64_t *f)
{
	const uint64_t m = sp_kind_mask[kind];
	uint64_t g[SP_F__COUNT];
#define SP_FIELD(id, num, name, width, type)                                                                           \
	if ((m >> SP_F_##id) & 1)                                                                                      \
		g[SP_F_##id] = f[SP_F_##id];
#include "stepprof/fields.def"
#undef SP_FIELD
	sp_emit_rare(kind, api, begin_ns, end_ns, g);
}

/*
 * A record of a kind known at compile time (a valid kind other than STRING).
 * RATIONALE: with the kind constant the encoder folds to straight-line shifts
 * and stores of the caller's f[] values (sp_tf_encode_k), with no field loop
 * and no layout table: about 30 instructions from the TLS load to the commit,
 * against ~130 through a generic encoder.
 */
static inline __attribute__((always_inline)) void sp_emit_k(unsigned kind, unsigned api, uint64_t begin_ns,
							    uint64_t end_ns, const uint64_t *f)
{
	/*
	 * RATIONALE: no test of sp_active here; sp_emit_rare makes it. Its callers
	 * tested it already (io_enter, sp_started, the CUDA hooks), and a stream
	 * with room exists only once the recorder is active: STEPPROF_DISABLE and a
	 * failed start leave every stream without a chunk (end - slot == 0: the rare
	 * path), and the one process whose sp_active goes back to 0, a child forked
	 * by a signal handler in the middle of a record (fork_child_mid_record),
	 * keeps its stream in a mapping turned into private zeros: what it writes
	 * there reaches no file. sp_active is volatile: tested here too, every
	 * record read and tested it twice (3 instructions a record).
	 */
	const unsigned n = sp_tf_kind_slots(kind);
	struct sp_tf_stream *st = &sp_rec_stream;
	struct sp_slot *slot = st->cur;
	/*
	 * cur read before end: a signal handler that records (or forks: the child
	 * clears the stream) after the read of cur moves cur, which the check after
	 * the hiding sees. Read the other way round, a handler that took a new chunk
	 * between the reads paired the old chunk's end with the new cur (restored
	 * after the commit: records past the chunk, or none at all again), and a
	 * child forked there wrote at cur NULL (SIGSEGV).
	 */
	__atomic_signal_fence(__ATOMIC_SEQ_CST);
	struct sp_slot *end = st->end;
	/*
	 * Room: the record's end (slot + n, the commit's next cur: one lea for
	 * both) not past end. As addresses: cur and end are NULL without a chunk.
	 * `end - slot < n` took a subtraction, a test and a copy more.
	 */
	if (__builtin_expect(((SP_SUM_KINDS >> kind) & 1) || (uintptr_t)slot + n * sizeof(*slot) > (uintptr_t)end ||
				 end_ns >= __atomic_load_n(&sp_proc.sum_next, __ATOMIC_RELAXED),
			     0)) {
		sp_emit_rare_copy(kind, api, begin_ns, end_ns, f);
		return;
	}
	/* busy until the commit: a signal handler recording meanwhile takes the rare path (sp_tf_stream_busy) */
	st->end = slot;
	__atomic_signal_fence(__ATOMIC_SEQ_CST);
	if (__builtin_expect(st->cur != slot, 0)) {
		/* a handler recorded between the loads above and the hiding: the slot is its record */
		sp_tf_stream_unhide(st);
		sp_emit_rare_copy(kind, api, begin_ns, end_ns, f);
		return;
	}
	sp_tf_encode_k(slot, kind, api, begin_ns, sp_tf_dur_ns(begin_ns, end_ns), f);
	sp_tf_commit_n(st, slot, kind, n);
	__atomic_signal_fence(__ATOMIC_SEQ_CST);
	st->end = end;
}

/* A variable kind, or a multi-slot one, costs one call more: sp_emit_slow. */
static inline __attribute__((always_inline)) void sp_emit(unsigned kind, unsigned api, uint64_t begin_ns,
							  uint64_t end_ns, const uint64_t *f)
{
	if (__builtin_constant_p(kind) && kind != SP_K_NONE && kind < SP_K__COUNT && kind != SP_K_STRING &&
	    !((SP_SUM_KINDS >> kind) & 1) && sp_tf_kind_slots(kind) == 1)
		sp_emit_k(kind, api, begin_ns, end_ns, f);
	else
		sp_emit_slow(kind, api, begin_ns, end_ns, f);
}

/*
 * CPU_TIME samples (docs/input-capture.md, "CPU time at hand-offs"): the
 * process's CPU time (CLOCK_PROCESS_CPUTIME_ID, a real syscall) after a
 * LOADER_WAIT record, at most one per SP_CPU_SAMPLE_MIN_NS per thread, and
 * at each summary window and the clean exit (recorder.c). sp_cpu_samples:
 * STEPPROF_CPU_SAMPLES. sp_cpu_last: when this thread took its last sample
 * (its own sp_now; 0: none yet). sp_cpu_handoff(t): a wait that handed a
 * batch over ended at t; the check is a TLS load and a compare, the sample
 * (out of line) leaves errno as it finds it and writes nothing when the clock
 * fails. No lock, no atomic, no malloc.
 */
#define SP_CPU_SAMPLE_MIN_NS 1000000ull
SP_HIDDEN extern int sp_cpu_samples;
SP_HIDDEN extern __thread uint64_t sp_cpu_last __attribute__((tls_model("initial-exec")));
SP_HIDDEN void sp_cpu_sample(void);

static inline __attribute__((always_inline)) void sp_cpu_handoff(uint64_t t)
{
	/* signed: a sample a signal handler took after t was read is newer than t */
	if (__builtin_expect((int64_t)(t - sp_cpu_last) >= (int64_t)SP_CPU_SAMPLE_MIN_NS, 0) && sp_cpu_samples)
		sp_cpu_sample();
}

/*
 * Intern a string for this process's trace; returns its id (> 0), stable for the
 * life of the file, or 0 when it cannot be stored. Lock-free; a string already
 * interned costs one hash and one table probe. len is clipped to SP_MAX_STRING.
 */
SP_HIDDEN uint32_t sp_intern(const char *s, size_t len);
SP_HIDDEN uint32_t sp_intern_cstr(const char *s);

/*
 * The next per-process GPU op id (joins an op's record with its gpu_span); 0
 * when there is no trace. Inline: one atomic add on the file header's counter
 * once the file exists (sp_proc.op_counter, NULL before and in a forked child
 * until its own file), the slow path otherwise.
 */
SP_HIDDEN uint32_t sp_next_op_slow(void);
static inline uint32_t sp_next_op(void)
{
	uint64_t *c = __atomic_load_n(&sp_proc.op_counter, __ATOMIC_ACQUIRE);
	if (__builtin_expect(c != NULL, 1))
		return (uint32_t)__atomic_add_fetch(c, 1, __ATOMIC_RELAXED);
	return sp_next_op_slow();
}

/*
 * The mapped file header of this process's trace, creating the file if needed,
 * for filling device/driver info; NULL when there is no trace. Not hot-path.
 */
SP_HIDDEN struct sp_file_header *sp_trace_header(void);

/* One warning per `key` on stderr, prefixed "stepprof: ", unless STEPPROF_QUIET. */
SP_HIDDEN void sp_warn_once(const char *key, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* Flush the calling thread's state (thread exit) and the process's (exit). */
SP_HIDDEN void sp_recorder_thread_exit(void);
/* This thread holds records back (cuda_call.c's poll runs): call its flush at the thread's exit. */
SP_HIDDEN void sp_recorder_thread_watch(void);
SP_HIDDEN void sp_recorder_shutdown(void);
/* _exit/_Exit: the clean exit's end, in the process that owns the file only (not a vfork()ed child) */
SP_HIDDEN void sp_recorder_quick_exit(void);
/* 1 when this process's _exit should end its file (not a vfork()ed child, whose memory is its parent's) */
SP_HIDDEN int sp_recorder_quick_exit_due(void);

#endif /* STEPPROF_RECORDER_H */
