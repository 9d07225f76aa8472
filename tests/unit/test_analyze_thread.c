/*
 * test_analyze_thread.c - which thread of the trainer is its training thread
 * (docs/definitions.md): the thread that runs the loop, when the kernels are
 * launched from several threads. Trace files written with tracegen and read as
 * `stepprof analyze` reads them (merge.c, the unordered first-pass scan of
 * analyze_scan.c included), for a loop whose timeline the test chooses:
 *
 *   - the loop's thread (MAIN, tid = pid): waits for its batch (a pipe read from a
 *     loader process, or stat/open/read/close of files), copies it in, launches the
 *     forward kernels, hands the backward over and waits (a condition variable: no
 *     record), copies a 4-byte loss out and synchronises;
 *   - PyTorch's autograd engine thread (AG): launches the backward kernels, twice as
 *     many; reads a kernel cache at its first launch (input at start-up only);
 *   - a loader thread that decodes on the GPU (DEC): reads files, copies them in,
 *     launches more kernels than the loop, synchronises its stream.
 *
 * Ground truth: the loop's thread is MAIN; each iteration starts at its wait,
 * which lasts WAIT; nothing else of the trainer blocks MAIN for input.
 */
#include <criterion/criterion.h>
#include <stdlib.h>
#include <string.h>

#include "analyze.h"
#include "merge.h"
#include "testlib.h"
#include "tracegen.h"

#define US    1000ull
#define PID   300
#define MAIN  PID
#define AG    301
#define DEC   302
#define ITERS 16
#define WAIT  (4000 * US)

enum input { IN_PIPE, IN_FILES, IN_NONE };

struct loop {
	enum input input;  /* how MAIN gets its batch */
	int markers;	   /* 0 none, 1 NVTX train_step, 2 stepprof_step(), on MAIN */
	unsigned fwd, bwd; /* kernels per iteration: MAIN's, AG's */
	unsigned dec;	   /* kernels per iteration of DEC (0: no DEC thread) */
	int copies;	   /* MAIN copies the batch in and the loss out */
	int ag_waits;	   /* AG after each launch: 0 nothing, 1 cudaStreamWaitEvent, 2 cudaStreamSynchronize */
};

/* analyze_loop writes GPU spans two to a record (GPU_SPAN2), as the recorder does */
static int pair_spans;

struct gen {
	struct sp_tg *g;
	uint64_t gpu; /* when the stream is free */
	uint32_t op, kname, path;
	uint64_t starts[ITERS];
	int pair;			/* pair_spans */
	int held;			/* a span waiting for a second one (pair) */
	uint64_t held_b, held_e, held_op;
};

static void gpu_span_flush(struct gen *x)
{
	if (x->held)
		SP_TG_ADD(x->g, MAIN, SP_K_GPU_SPAN, 0, x->held_b, x->held_e, {SP_F_OP, x->held_op});
	x->held = 0;
}

static void gpu_span(struct gen *x, uint64_t b, uint64_t dur)
{
	uint64_t gb = b > x->gpu ? b : x->gpu;
	x->gpu = gb + dur;
	if (!x->pair) {
		SP_TG_ADD(x->g, MAIN, SP_K_GPU_SPAN, 0, gb, gb + dur, {SP_F_OP, x->op});
	} else if (!x->held) {
		x->held = 1;
		x->held_b = gb;
		x->held_e = gb + dur;
		x->held_op = x->op;
	} else {
		SP_TG_ADD(x->g, MAIN, SP_K_GPU_SPAN2, 0, x->held_b, x->held_e, {SP_F_OP, x->held_op},
			  {SP_F_OP_DELTA, x->op - x->held_op}, {SP_F_BEGIN_DELTA, gb - x->held_b}, {SP_F_DUR2, dur});
		x->held = 0;
	}
}

/* A kernel launch of tid at t (5 us), running dur on the GPU; returns the call's end. */
static uint64_t launch(struct gen *x, int32_t tid, uint64_t t, uint64_t dur)
{
	x->op++;
	SP_TG_ADD(x->g, tid, SP_K_LAUNCH, SP_API_cudaLaunchKernel, t, t + 5 * US, {SP_F_NAME, x->kname},
		  {SP_F_OP, x->op});
	gpu_span(x, t + 5 * US, dur);
	return t + 5 * US;
}

/* A pinned async copy (host_sync 0: returns in 10 us) or a pageable one (returns when done). */
static uint64_t copy(struct gen *x, int32_t tid, uint64_t t, unsigned dir, uint64_t bytes, uint64_t dur, int host_sync)
{
	x->op++;
	uint64_t gb = t > x->gpu ? t : x->gpu, e = host_sync ? gb + dur : t + 10 * US;
	SP_TG_ADD(x->g, tid, SP_K_COPY, SP_API_cudaMemcpyAsync, t, e, {SP_F_DIRECTION, dir}, {SP_F_BYTES, bytes},
		  {SP_F_OP, x->op},
		  {SP_F_HOST_MEMORY, host_sync ? (uint64_t)SP_HOSTMEM_PAGEABLE : (uint64_t)SP_HOSTMEM_PINNED});
	gpu_span(x, t, dur);
	return e;
}

static uint64_t sync_stream(struct gen *x, int32_t tid, uint64_t t)
{
	uint64_t e = (t > x->gpu ? t : x->gpu) + 10 * US;
	SP_TG_ADD(x->g, tid, SP_K_SYNC, SP_API_cudaStreamSynchronize, t, e);
	return e;
}

/* stat, open, read, close of one file: 4 calls in dur. */
static uint64_t read_file(struct gen *x, int32_t tid, uint64_t t, int fd, uint64_t dur)
{
	uint64_t q = dur / 4;
	SP_TG_ADD(x->g, tid, SP_K_STAT, SP_API_stat, t, t + q, {SP_F_PATH, x->path}, {SP_F_BYTES, 65536});
	SP_TG_ADD(x->g, tid, SP_K_OPEN, SP_API_open, t + q, t + 2 * q, {SP_F_PATH, x->path}, {SP_F_FD, (uint64_t)fd});
	SP_TG_ADD(x->g, tid, SP_K_READ, SP_API_read, t + 2 * q, t + 3 * q, {SP_F_FD, (uint64_t)fd}, {SP_F_BYTES, 65536},
		  {SP_F_FD_TYPE, SP_FDTYPE_FILE});
	SP_TG_ADD(x->g, tid, SP_K_CLOSE, SP_API_close, t + 3 * q, t + dur, {SP_F_FD, (uint64_t)fd});
	return t + dur;
}

/* One iteration from t: MAIN's wait, copy, forward; AG's backward; MAIN's loss and sync. */
static uint64_t iteration(struct gen *x, const struct loop *l, unsigned i, uint64_t t)
{
	uint64_t start = t;
	x->starts[i] = t;
	if (l->markers == 2)
		SP_TG_ADD(x->g, MAIN, SP_K_STEP, SP_API_stepprof_step, t, t, {SP_F_VALUE, i});
	if (l->dec) { /* the loader decodes the next batch meanwhile, its GPU work before the loop's */
		uint64_t d = read_file(x, DEC, t + 100 * US, 9, 200 * US);
		d = copy(x, DEC, d, SP_DIR_H2D, 65536, 50 * US, 0);
		for (unsigned k = 0; k < l->dec; k++)
			d = launch(x, DEC, d, 20 * US);
		sync_stream(x, DEC, d);
	}
	if (l->input == IN_PIPE)
		SP_TG_ADD(x->g, MAIN, SP_K_LOADER_WAIT, SP_API_read, t, t + WAIT, {SP_F_FD, 5}, {SP_F_BYTES, 48},
			  {SP_F_FD_TYPE, SP_FDTYPE_PIPE});
	else if (l->input == IN_FILES)
		read_file(x, MAIN, t, 7, WAIT);
	t += WAIT + 500 * US; /* collate */
	if (l->copies)
		t = copy(x, MAIN, t, SP_DIR_H2D, 1 << 20, 200 * US, 0);
	for (unsigned k = 0; k < l->fwd; k++)
		t = launch(x, MAIN, t, 300 * US);
	t += 20 * US; /* loss.backward(): the engine thread takes over */
	for (unsigned k = 0; k < l->bwd; k++) {
		t = launch(x, AG, t, 300 * US);
		if (l->ag_waits == 1) {
			SP_TG_ADD(x->g, AG, SP_K_SYNC, SP_API_cudaStreamWaitEvent, t, t + 2 * US);
			t += 2 * US;
		} else if (l->ag_waits == 2) {
			t = sync_stream(x, AG, t);
		}
	}
	t += 20 * US; /* the loop's thread wakes up */
	if (l->copies)
		t = copy(x, MAIN, t, SP_DIR_D2H, 4, 5 * US, 1); /* loss.item() */
	t = sync_stream(x, MAIN, t);
	gpu_span_flush(x); /* the recorder reads spans back at syncs */
	if (l->markers == 1)
		SP_TG_ADD(x->g, MAIN, SP_K_RANGE, SP_API_nvtx, start, t, {SP_F_NAME, sp_tg_intern(x->g, "train_step")},
			  {SP_F_VALUE, 1});
	return t + 50 * US;
}

/* The loop l written to a trace file and analysed as `stepprof analyze` does; x gets the starts. */
static void analyze_loop(const struct loop *l, struct gen *x, struct an_analysis *a)
{
	char *dir = sp_t_tmpdir("analyze_thread"), path[1024];
	snprintf(path, sizeof(path), "%s/t.sptrace", dir);
	memset(x, 0, sizeof(*x));
	x->pair = pair_spans;
	x->g = sp_tg_create(path, PID, 1, -1);
	x->kname = sp_tg_intern(x->g, "trainer_kernel");
	x->path = sp_tg_intern(x->g, "/data/f000001.bin");
	uint64_t t = 1000000000ull;
	/* the engine thread's first launch reads a kernel cache: input, at start-up only */
	for (int k = 0; k < 3; k++)
		read_file(x, AG, t + (uint64_t)k * 100 * US, 11 + k, 80 * US);
	t += 1000 * US;
	for (unsigned i = 0; i < ITERS; i++)
		t = iteration(x, l, i, t);
	gpu_span_flush(x);
	cr_assert_eq(sp_tg_finish(x->g), 0);

	char *paths[1] = {path};
	struct merge *m = merge_open(paths, 1);
	cr_assert_not_null(m);
	struct an_source src;
	merge_source(m, &src);
	struct an_options o;
	an_options_init(&o);
	char err[256] = "";
	cr_assert_eq(an_analyze(&src, &o, a, err, sizeof(err)), 0, "%s", err);
	merge_close(m);
	sp_t_rmrf(dir);
	free(dir);
}

/* The analysis describes MAIN's loop: ITERS iterations from its waits, each WAIT of input. */
static void expect_loop(const struct loop *l, const char *what)
{
	struct gen x;
	struct an_analysis a;
	analyze_loop(l, &x, &a);
	static const int want_src[] = {AN_SRC_AUTO, AN_SRC_NVTX, AN_SRC_API};
	cr_expect_eq(a.training_tid, MAIN, "%s, markers %d: training thread %d", what, l->markers, a.training_tid);
	cr_expect_eq(a.source_kind, want_src[l->markers], "%s, markers %d: source %d", what, l->markers, a.source_kind);
	cr_expect_eq(a.nit, ITERS, "%s, markers %d: %zu iterations", what, l->markers, a.nit);
	for (size_t i = 0; i < a.nit && i < ITERS; i++) {
		cr_expect_eq(a.it[i].start_ns, x.starts[i], "%s, markers %d: iteration %zu starts %lu, not at its wait",
			     what, l->markers, i, (unsigned long)(a.it[i].start_ns - x.starts[i]));
		if (l->input != IN_NONE)
			cr_expect_eq(a.it[i].blocked[AN_BLK_INPUT], WAIT, "%s, markers %d: iteration %zu input %lu us",
				     what, l->markers, i, (unsigned long)(a.it[i].blocked[AN_BLK_INPUT] / US));
		if (!l->dec && l->input != IN_NONE) /* no GPU work under the wait: all of it is input */
			cr_expect_eq(a.it[i].bd[AN_INPUT], WAIT, "%s, markers %d: iteration %zu", what, l->markers, i);
	}
	an_analysis_free(&a);
}

/*
 * GPU spans stored two to a slot (GPU_SPAN2, format 1.3) are analysed as the
 * same spans one to a record: the same iterations, breakdown and blocked times,
 * through the first pass's unordered scan and the merged stream alike.
 */
Test(analyze_thread, gpu_spans_two_to_a_record_give_the_same_analysis)
{
	static const struct loop loops[] = {
	    {IN_PIPE, 0, 3, 6, 0, 1, 0},
	    {IN_FILES, 1, 5, 6, 12, 1, 0},
	    {IN_NONE, 2, 4, 8, 0, 1, 2},
	};
	for (size_t k = 0; k < sizeof(loops) / sizeof(loops[0]); k++) {
		struct gen x, y;
		struct an_analysis a, b;
		pair_spans = 0;
		analyze_loop(&loops[k], &x, &a);
		pair_spans = 1;
		analyze_loop(&loops[k], &y, &b);
		pair_spans = 0;
		cr_assert_gt(a.nit, 0, "loop %zu", k);
		cr_assert_eq(b.records, a.records, "loop %zu: %llu records paired, %llu single", k,
			     (unsigned long long)b.records, (unsigned long long)a.records);
		cr_assert_eq(b.training_tid, a.training_tid, "loop %zu", k);
		cr_assert_eq(b.nit, a.nit, "loop %zu: %zu iterations paired, %zu single", k, b.nit, a.nit);
		for (size_t i = 0; i < a.nit; i++) {
			cr_assert_eq(b.it[i].start_ns, a.it[i].start_ns, "loop %zu iteration %zu", k, i);
			cr_assert_eq(b.it[i].end_ns, a.it[i].end_ns, "loop %zu iteration %zu", k, i);
			for (int c = 0; c < AN_CAT__COUNT; c++)
				cr_assert_eq(b.it[i].bd[c], a.it[i].bd[c], "loop %zu iteration %zu part %d: %llu paired, %llu single",
					     k, i, c, (unsigned long long)b.it[i].bd[c], (unsigned long long)a.it[i].bd[c]);
			cr_assert_eq(memcmp(b.it[i].blocked, a.it[i].blocked, sizeof(a.it[i].blocked)), 0,
				     "loop %zu iteration %zu", k, i);
		}
		/* what the loop's kernels ran: compute time in every iteration */
		cr_assert_gt(a.it[a.nit / 2].bd[AN_COMPUTE], 0, "loop %zu", k);
		an_analysis_free(&a);
		an_analysis_free(&b);
	}
}

/*
 * PyTorch's layout: the engine thread launches two thirds of the kernels; the loop
 * waits for batches from loader processes or reads files itself, copies, syncs.
 * In every marker mode (automatic detection on MAIN's calls alone included).
 */
Test(analyze_thread, the_autograd_engine_thread_is_not_the_loop)
{
	for (int markers = 0; markers <= 2; markers++) {
		struct loop pipe = {IN_PIPE, markers, 3, 6, 0, 1, 0};
		expect_loop(&pipe, "batches from loader processes");
		struct loop files = {IN_FILES, markers, 3, 6, 0, 1, 0};
		expect_loop(&files, "files read by the loop");
		struct loop nocopy = {IN_FILES, markers, 3, 6, 0, 0, 0};
		expect_loop(&nocopy, "files, no copies");
	}
}

/*
 * A loop that waits for no recorded input (its batches come from a thread, through
 * a queue): what else it blocks in tells it from the engine thread. Its copies
 * (the batch in, the loss out) when the engine thread synchronises too; its syncs
 * alone (synthetic data, no copies) when the engine thread only waits on events
 * (cudaStreamWaitEvent is no blocking sync).
 */
Test(analyze_thread, a_loop_without_input_is_told_by_its_copies_then_its_syncs)
{
	static const struct loop loops[] = {
	    {IN_NONE, 0, 3, 6, 0, 1, 2}, /* copies; both sync */
	    {IN_NONE, 0, 3, 6, 0, 0, 1}, /* only MAIN syncs */
	};
	for (size_t k = 0; k < sizeof(loops) / sizeof(loops[0]); k++) {
		struct gen x;
		struct an_analysis a;
		analyze_loop(&loops[k], &x, &a);
		cr_expect_eq(a.training_tid, MAIN, "loop %zu: training thread %d", k, a.training_tid);
		cr_expect_eq(a.nit, ITERS, "loop %zu: %zu iterations", k, a.nit);
		an_analysis_free(&a);
	}
}

/*
 * A loader thread that reads files, copies them in and launches more kernels than
 * anyone (GPU decoding): not the loop when the loop receives batches from loader
 * processes, or marks its steps.
 */
Test(analyze_thread, a_gpu_decoding_loader_thread_is_not_the_loop)
{
	struct loop pipe = {IN_PIPE, 0, 3, 6, 12, 1, 0};
	expect_loop(&pipe, "decoder, batches from loader processes");
	for (int markers = 1; markers <= 2; markers++) {
		struct loop marked = {IN_NONE, markers, 3, 6, 12, 1, 0};
		expect_loop(&marked, "decoder, marked steps");
	}
}

/*
 * Only one thread launches (or launches 8 times more than any other): the base
 * rule, the most launches, whatever another thread marks or waits for. A loop's
 * thread with 1 kernel per iteration against the engine thread's 8 launches 1/8 as
 * much: still a candidate, the loop. Against 9: no longer a candidate, the engine
 * thread is taken (the documented limit of the share).
 */
Test(analyze_thread, the_most_launches_where_one_thread_launches)
{
	struct gen x;
	struct an_analysis a;
	struct loop only_main = {IN_PIPE, 1, 8, 0, 0, 1, 0};
	analyze_loop(&only_main, &x, &a);
	cr_expect_eq(a.training_tid, MAIN);
	an_analysis_free(&a);

	struct loop only_engine = {IN_PIPE, 1, 0, 8, 0, 1, 0}; /* MAIN marks and waits, launches nothing */
	analyze_loop(&only_engine, &x, &a);
	cr_expect_eq(a.training_tid, AG, "no launch on MAIN: the launching thread, %d", a.training_tid);
	an_analysis_free(&a);

	struct loop share = {IN_PIPE, 0, 1, 8, 0, 1, 0};
	analyze_loop(&share, &x, &a);
	cr_expect_eq(a.training_tid, MAIN, "1/8 of the launches: %d", a.training_tid);
	an_analysis_free(&a);

	struct loop under = {IN_PIPE, 0, 1, 9, 0, 1, 0};
	analyze_loop(&under, &x, &a);
	cr_expect_eq(a.training_tid, AG, "under 1/8 of the launches: %d", a.training_tid);
	an_analysis_free(&a);
}
