/*
 * test_export.c - the Perfetto/Chrome trace export (analyzer/export_perfetto.c)
 * on traces built with tracegen: the ground truth is the records the test wrote.
 *
 *   1. helpers: export to memory, parse, find events
 *   2. one process: every record becomes exactly the expected event (ts/dur in
 *      microseconds to the nanosecond, names, tracks), GPU spans joined to their
 *      calls by op id on the "GPU 0" track, flows, counter, metadata
 *   3. GPU lanes, a span before its call, a span without a call
 *   4. several files: processes, hosts' ids and clocks, two processes of one pid,
 *      a foreign file
 */
#include <criterion/criterion.h>
#include <math.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "export_perfetto.h"
#include "merge.h"
#include "testlib.h"
#include "tracegen.h"
#include "util.h"

/* ----------------------------------------------------------- 1. helpers */

#define T0 1000000000ull /* tracegen's default start_mono_ns: ts 0 of the document */

struct doc {
	char *text;
	size_t len;
	int rc;
	struct export_stats st;
	struct sp_json *j, *ev; /* the document, its traceEvents */
};

static void export_opts_to(struct doc *d, char *const *paths, size_t n, const struct export_opts *o)
{
	memset(d, 0, sizeof(*d));
	FILE *f = open_memstream(&d->text, &d->len);
	cr_assert_not_null(f);
	d->rc = export_perfetto(paths, n, f, o, &d->st);
	fclose(f);
	d->j = sp_json_parse(d->text);
	cr_assert_not_null(d->j, "the export is not JSON:\n%.2000s", d->text);
	d->ev = sp_json_get(d->j, "traceEvents");
	cr_assert(d->ev && d->ev->type == SPJ_ARR, "no traceEvents array");
}

static void export_to(struct doc *d, char *const *paths, size_t n)
{
	export_opts_to(d, paths, n, NULL);
}

static void doc_free(struct doc *d)
{
	sp_json_free(d->j);
	free(d->text);
}

static const char *s_of(const struct sp_json *e, const char *k)
{
	const char *s = sp_json_str(e, k);
	return s ? s : "";
}

/* The number's literal text: ts and dur must be exact decimals of microseconds. */
static const char *num_text(const struct sp_json *e, const char *k)
{
	const struct sp_json *v = sp_json_get(e, k);
	return v && v->type == SPJ_NUM ? v->str : "(none)";
}

/* Events with phase ph (and name, when not NULL). */
static size_t count(const struct doc *d, const char *ph, const char *name)
{
	size_t n = 0;
	for (size_t i = 0; i < d->ev->n; i++) {
		const struct sp_json *e = &d->ev->kids[i];
		if (!strcmp(s_of(e, "ph"), ph) && (!name || !strcmp(s_of(e, "name"), name)))
			n++;
	}
	return n;
}

/* Events that have the member key. */
static size_t count_key(const struct doc *d, const char *key)
{
	size_t n = 0;
	for (size_t i = 0; i < d->ev->n; i++)
		n += sp_json_get(&d->ev->kids[i], key) != NULL;
	return n;
}

/* The one event of phase ph named name (asserts there is exactly one). */
static const struct sp_json *one(const struct doc *d, const char *ph, const char *name)
{
	const struct sp_json *found = NULL;
	for (size_t i = 0; i < d->ev->n; i++) {
		const struct sp_json *e = &d->ev->kids[i];
		if (strcmp(s_of(e, "ph"), ph) || strcmp(s_of(e, "name"), name))
			continue;
		cr_assert_null(found, "more than one %s event named %s", ph, name);
		found = e;
	}
	cr_assert_not_null(found, "no %s event named %s", ph, name);
	return found;
}

/* The name metadata (process_name/thread_name) of (pid, tid). */
static const char *meta_name(const struct doc *d, const char *what, uint64_t pid, uint64_t tid)
{
	for (size_t i = 0; i < d->ev->n; i++) {
		const struct sp_json *e = &d->ev->kids[i];
		if (!strcmp(s_of(e, "ph"), "M") && !strcmp(s_of(e, "name"), what) && sp_json_u64(e, "pid", 0) == pid &&
		    sp_json_u64(e, "tid", 0) == tid)
			return sp_json_str(e, "args.name");
	}
	return NULL;
}

/* An event's tid: left out for a process's main thread, whose tid is its pid (as Perfetto reads it). */
static uint64_t tid_of(const struct sp_json *e)
{
	return sp_json_u64(e, "tid", sp_json_u64(e, "pid", 0));
}

static void expect_x(const struct sp_json *e, uint64_t pid, uint64_t tid, const char *ts, const char *dur)
{
	cr_expect_eq(sp_json_u64(e, "pid", 0), pid, "%s: pid", s_of(e, "name"));
	if (tid)
		cr_expect_eq(tid_of(e), tid, "%s: tid", s_of(e, "name"));
	cr_expect_str_eq(num_text(e, "ts"), ts, "%s: ts", s_of(e, "name"));
	if (dur)
		cr_expect_str_eq(num_text(e, "dur"), dur, "%s: dur", s_of(e, "name"));
}

static char *tmpfile_path(const char *dir, const char *name)
{
	char *p = malloc(strlen(dir) + strlen(name) + 2);
	sprintf(p, "%s/%s", dir, name);
	return p;
}

/* ---------------------------------------------------- 2. one process */

/*
 * A training thread (4242) with a step, an NVTX range, file I/O, an H2D copy and two
 * launches whose GPU spans come back at its sync, device memory allocated and freed;
 * a loader thread (4300) with a name and a wait for a batch.
 */
static char *one_process(const char *dir)
{
	char *path = tmpfile_path(dir, "a.sptrace");
	struct sp_tg_opts o = {.pid = 4242, .ppid = 1, .rank = 1, .cmdline = "python train.py"};
	struct sp_tg *g = sp_tg_create_opts(path, &o);
	uint32_t step = sp_tg_intern(g, "train_step"), file = sp_tg_intern(g, "/data/a.bin");
	uint32_t gemm = sp_tg_intern(g, "gemm_kernel"), relu = sp_tg_intern(g, "relu_kernel");
	uint32_t wname = sp_tg_intern(g, "pt_data_worker"), epoch = sp_tg_intern(g, "epoch");

	SP_TG_ADD(g, 4242, SP_K_ALLOC, SP_API_cudaMalloc, T0 + 50000, T0 + 51000, {SP_F_DPTR, 0x7000},
		  {SP_F_BYTES, 1 << 20}, {SP_F_LIVE, 1 << 20});
	SP_TG_ADD(g, 4242, SP_K_STEP, SP_API_stepprof_step, T0 + 100000, T0 + 100000, {SP_F_VALUE, 7});
	SP_TG_ADD(g, 4242, SP_K_OPEN, SP_API_open, T0 + 200000, T0 + 201500, {SP_F_PATH, file}, {SP_F_FD, 3});
	SP_TG_ADD(g, 4242, SP_K_READ, SP_API_read, T0 + 202000, T0 + 212345, {SP_F_PATH, file}, {SP_F_BYTES, 4096},
		  {SP_F_FD, 3}, {SP_F_FD_TYPE, SP_FDTYPE_FILE});
	SP_TG_ADD(g, 4242, SP_K_COPY, SP_API_cudaMemcpyAsync, T0 + 300000, T0 + 300800, {SP_F_STREAM, 0x10},
		  {SP_F_BYTES, 1 << 20}, {SP_F_OP, 1}, {SP_F_DIRECTION, SP_DIR_H2D},
		  {SP_F_HOST_MEMORY, SP_HOSTMEM_PINNED});
	SP_TG_ADD(g, 4242, SP_K_LAUNCH, SP_API_cudaLaunchKernel, T0 + 301000, T0 + 301500, {SP_F_STREAM, 0x10},
		  {SP_F_NAME, gemm}, {SP_F_OP, 2});
	SP_TG_ADD(g, 4242, SP_K_LAUNCH, SP_API_cudaLaunchKernel, T0 + 302000, T0 + 302400, {SP_F_STREAM, 0x10},
		  {SP_F_NAME, relu}, {SP_F_OP, 3});
	SP_TG_ADD(g, 4242, SP_K_SYNC, SP_API_cudaStreamSynchronize, T0 + 400000, T0 + 600000, {SP_F_STREAM, 0x10});
	/* the spans are read back at the sync: written after it, in the same thread */
	SP_TG_ADD(g, 4242, SP_K_GPU_SPAN, SP_API_cudaMemcpyAsync, T0 + 300100, T0 + 400100, {SP_F_OP, 1});
	SP_TG_ADD(g, 4242, SP_K_GPU_SPAN, SP_API_cudaLaunchKernel, T0 + 400100, T0 + 500000, {SP_F_OP, 2});
	SP_TG_ADD(g, 4242, SP_K_GPU_SPAN, SP_API_cudaLaunchKernel, T0 + 500000, T0 + 550000, {SP_F_OP, 3});
	SP_TG_ADD(g, 4242, SP_K_RANGE, SP_API_nvtx, T0 + 100000, T0 + 900000, {SP_F_NAME, step}, {SP_F_VALUE, 0});
	SP_TG_ADD(g, 4242, SP_K_MARK, SP_API_stepprof_mark, T0 + 910000, T0 + 910000, {SP_F_NAME, epoch});
	SP_TG_ADD(g, 4242, SP_K_FREE, SP_API_cudaFree, T0 + 950000, T0 + 950250, {SP_F_DPTR, 0x7000},
		  {SP_F_BYTES, 1 << 20}, {SP_F_LIVE, 0});

	SP_TG_ADD(g, 4300, SP_K_THREAD, SP_API_NONE, T0 + 60000, T0 + 60000, {SP_F_NAME, wname});
	SP_TG_ADD(g, 4300, SP_K_LOADER_WAIT, SP_API_poll, T0 + 70000, T0 + 170000, {SP_F_FD, 9},
		  {SP_F_FD_TYPE, SP_FDTYPE_PIPE});
	cr_assert_eq(sp_tg_finish(g), 0);
	return path;
}

Test(export, every_record_becomes_its_event)
{
	char *dir = sp_t_tmpdir("export");
	char *path = one_process(dir);
	struct doc d;
	export_to(&d, &path, 1);
	cr_assert_eq(d.rc, SP_EXIT_OK);
	cr_expect_str_eq(sp_json_str(d.j, "displayTimeUnit"), "ns");
	cr_expect_eq(sp_json_u64(d.j, "otherData.ts_zero_mono_ns", 0), T0);
	cr_expect_eq(sp_json_u64(d.j, "otherData.records", 0), 16);

	/* calls: ts/dur are microseconds with exact nanoseconds, from the first file's start */
	expect_x(one(&d, "X", "cudaMalloc"), 4242, 4242, "50", "1");
	expect_x(one(&d, "X", "open /data/a.bin"), 4242, 4242, "200", "1.5");
	expect_x(one(&d, "X", "read /data/a.bin"), 4242, 4242, "202", "10.345");
	expect_x(one(&d, "X", "cudaMemcpyAsync"), 4242, 4242, "300", "0.8");
	expect_x(one(&d, "X", "cudaStreamSynchronize"), 4242, 4242, "400", "200");
	expect_x(one(&d, "X", "train_step"), 4242, 4242, "100", "800");
	expect_x(one(&d, "X", "cudaFree"), 4242, 4242, "950", "0.25");
	expect_x(one(&d, "X", "poll"), 4242, 4300, "70", "100");
	/* a launch is named by its call and kernel (as a read by its path), its category is in the name */
	const struct sp_json *l1 = one(&d, "X", "cudaLaunchKernel gemm_kernel");
	expect_x(l1, 4242, 4242, "301", "0.5");
	cr_expect_null(sp_json_get(l1, "cat"), "\"launch\" is in the name");
	cr_expect_null(sp_json_get(l1, "args.name"), "the kernel is in the name");
	cr_expect_eq(count(&d, "X", "cudaLaunchKernel relu_kernel"), 1);
	cr_expect_null(sp_json_get(one(&d, "X", "cudaStreamSynchronize"), "cat"), "\"sync\" is in the name");
	cr_expect_str_eq(s_of(one(&d, "X", "cudaMemcpyAsync"), "cat"), "copy");
	cr_expect_str_eq(s_of(one(&d, "X", "train_step"), "cat"), "nvtx");
	cr_expect_str_eq(s_of(one(&d, "X", "poll"), "cat"), "loader_wait");
	/* fields as args: strings resolved, enumerations by name */
	const struct sp_json *rd = one(&d, "X", "read /data/a.bin");
	cr_expect_eq(sp_json_u64(rd, "args.bytes", 0), 4096);
	cr_expect_null(sp_json_get(rd, "args.fd_type"), "the common fd type, file, is left out");
	cr_expect_null(sp_json_get(rd, "args.path"), "the path is in the name");
	cr_expect_null(sp_json_get(rd, "args.fd"), "a file's fd: its path is in the name");
	cr_expect_null(sp_json_get(rd, "args.api"), "the API is the name");
	cr_expect_eq(sp_json_u64(one(&d, "X", "poll"), "args.fd", 0), 9, "a pipe's fd is kept");
	cr_expect_str_eq(s_of(one(&d, "X", "poll"), "args.fd_type"), "pipe");
	cr_expect_str_eq(s_of(one(&d, "X", "cudaMemcpyAsync"), "args.host_memory"), "pinned");
	cr_expect_str_eq(s_of(one(&d, "X", "cudaMemcpyAsync"), "args.direction"), "h2d");
	cr_expect_str_eq(s_of(one(&d, "X", "train_step"), "args.api"), "nvtx", "a range's API is not its name");

	/* instants */
	const struct sp_json *st = one(&d, "i", "step 7");
	expect_x(st, 4242, 4242, "100", NULL);
	cr_expect_str_eq(s_of(st, "s"), "t");
	expect_x(one(&d, "i", "epoch"), 4242, 4242, "910", NULL);

	/* the GPU track: spans named by their call, on one pseudo thread of the process */
	const struct sp_json *h2d = one(&d, "X", "H2D 1 MiB"), *k1 = one(&d, "X", "gemm_kernel"),
			     *k2 = one(&d, "X", "relu_kernel");
	uint64_t gtid = sp_json_u64(h2d, "tid", 0);
	cr_expect_geq(gtid, 0x80000000ull, "GPU track tid %" PRIu64 " could be a real tid", gtid);
	expect_x(h2d, 4242, gtid, "300.1", "100");
	expect_x(k1, 4242, gtid, "400.1", "99.9");
	expect_x(k2, 4242, gtid, "500", "50");
	cr_expect_null(sp_json_get(k1, "cat"), "the track says GPU");
	cr_expect_eq(sp_json_u64(k1, "bind_id", 0), 2, "the op id binds the arrow (file 0)");
	/* what the call's slice and the arrow say is not repeated: bytes, queued time */
	cr_expect_null(sp_json_get(h2d, "args.bytes"));
	cr_expect_null(sp_json_get(h2d, "args.queued_us"));
	cr_expect_eq(sp_json_u64(h2d, "args.stream", 0), 0, "the default stream");
	cr_expect_str_eq(s_of(k1, "args.stream"), "0x10");
	cr_expect_str_eq(meta_name(&d, "thread_name", 4242, gtid), "GPU 0");
	cr_expect_eq(d.st.gpu_spans, 3);
	cr_expect_eq(d.st.gpu_unjoined, 0);

	/* an arrow per joined span: the call's slice flow_out, the span's flow_in, one bind_id */
	cr_expect_eq(count(&d, "s", NULL) + count(&d, "f", NULL), 0, "no flow events of their own");
	size_t arrows = 0;
	for (size_t i = 0; i < d.ev->n; i++) {
		const struct sp_json *s = &d.ev->kids[i];
		if (!sp_json_get(s, "flow_out"))
			continue;
		uint64_t id = sp_json_u64(s, "bind_id", 0);
		cr_expect_eq(tid_of(s), 4242);
		const struct sp_json *f = NULL;
		for (size_t k = 0; k < d.ev->n; k++)
			if (sp_json_get(&d.ev->kids[k], "flow_in") && sp_json_u64(&d.ev->kids[k], "bind_id", 0) == id)
				f = &d.ev->kids[k];
		cr_assert_not_null(f, "the arrow %" PRIu64 " leads nowhere", id);
		cr_expect_eq(tid_of(f), gtid);
		cr_expect_null(sp_json_get(f, "cat"));
		arrows++;
	}
	cr_expect_eq(arrows, 3);

	/* live device bytes: one counter point per alloc/free, at the call's end */
	cr_expect_eq(count(&d, "C", "GPU 0 memory"), 2);
	for (size_t i = 0; i < d.ev->n; i++) {
		const struct sp_json *c = &d.ev->kids[i];
		if (strcmp(s_of(c, "ph"), "C"))
			continue;
		const char *ts = num_text(c, "ts");
		uint64_t live = sp_json_u64(c, "args.live_bytes", 7);
		cr_expect((!strcmp(ts, "51") && live == 1 << 20) || (!strcmp(ts, "950.25") && live == 0),
			  "counter %s = %" PRIu64, ts, live);
	}

	/* metadata: the process by its command line and rank, threads by tid, the training thread */
	cr_expect_str_eq(meta_name(&d, "process_name", 4242, 4242), "python train.py [rank 1]");
	cr_expect_str_eq(meta_name(&d, "thread_name", 4242, 4242), "tid 4242 (training thread)");
	cr_expect_str_eq(meta_name(&d, "thread_name", 4242, 4300), "tid 4300 pt_data_worker");

	/* the NVTX range train_step is the one iteration: on an "iterations" track of the process */
	const struct sp_json *it = one(&d, "X", "iteration 0");
	expect_x(it, 4242, 0, "100", "800");
	cr_expect_str_eq(meta_name(&d, "thread_name", 4242, tid_of(it)), "iterations");
	cr_expect_eq(d.st.iterations, 1);

	/* nothing else: 10 calls + 3 GPU spans + the iteration, 2 instants and the findings, 2 counters */
	cr_expect_eq(count(&d, "X", NULL), 14);
	cr_expect_eq(count(&d, "i", NULL), 2 + d.st.findings);
	cr_expect_eq(count(&d, "M", "process_name"), 1);
	cr_expect_eq(count(&d, "M", "thread_name"), 4);
	cr_expect_eq(d.ev->n, 14 + 2 + d.st.findings + 2 + count(&d, "M", NULL));
	cr_expect_eq(d.st.events, d.ev->n);

	doc_free(&d);
	free(path);
	sp_t_rmrf(dir);
	free(dir);
}

Test(export, a_window_keeps_what_overlaps_it)
{
	char *dir = sp_t_tmpdir("export");
	char *path = one_process(dir);
	struct export_opts o = {.from_ns = 300000, .to_ns = 450000};
	struct doc d;
	export_opts_to(&d, &path, 1, &o);
	cr_assert_eq(d.rc, SP_EXIT_OK);
	/* the copy, both launches, the sync, the range and its iteration overlap [300, 450] us; the H2D and gemm spans too */
	cr_expect_eq(count(&d, "X", NULL), 8);
	cr_expect_eq(count(&d, "X", "cudaLaunchKernel gemm_kernel") + count(&d, "X", "cudaLaunchKernel relu_kernel"), 2);
	expect_x(one(&d, "X", "train_step"), 4242, 4242, "100", "800");
	expect_x(one(&d, "X", "cudaStreamSynchronize"), 4242, 4242, "400", "200");
	cr_expect_eq(count(&d, "X", "H2D 1 MiB") + count(&d, "X", "gemm_kernel"), 2);
	cr_expect_eq(count(&d, "X", "relu_kernel") + count(&d, "X", "read /data/a.bin"), 0);
	cr_expect_eq(count(&d, "i", NULL) + count(&d, "C", NULL), 0);
	cr_expect_eq(count_key(&d, "flow_in"), 2);
	/* the times are those of the whole document: ts 0 does not move */
	expect_x(one(&d, "X", "gemm_kernel"), 4242, 0, "400.1", "99.9");
	doc_free(&d);
	free(path);
	sp_t_rmrf(dir);
	free(dir);
}

/* ------------------------------------------- 3. lanes, early and orphan spans */

Test(export, overlapping_spans_take_another_lane_and_late_calls_still_join)
{
	char *dir = sp_t_tmpdir("export");
	char *path = tmpfile_path(dir, "b.sptrace");
	struct sp_tg *g = sp_tg_create(path, 500, 1, -1);
	uint32_t k = sp_tg_intern(g, "k");
	/* op 1 on stream A [10, 110) us; op 2 on stream B [50, 150) overlaps it; op 3 after both */
	SP_TG_ADD(g, 500, SP_K_LAUNCH, SP_API_cuLaunchKernel, T0 + 1000, T0 + 2000, {SP_F_NAME, k}, {SP_F_OP, 1});
	SP_TG_ADD(g, 500, SP_K_COPY, SP_API_cuMemcpyDtoHAsync_v2, T0 + 3000, T0 + 4000, {SP_F_OP, 2},
		  {SP_F_DIRECTION, SP_DIR_D2H}, {SP_F_BYTES, 512});
	SP_TG_ADD(g, 500, SP_K_GPU_SPAN, 0, T0 + 10000, T0 + 110000, {SP_F_OP, 1});
	SP_TG_ADD(g, 500, SP_K_GPU_SPAN, 0, T0 + 50000, T0 + 150000, {SP_F_OP, 2});
	/* a span read back on another thread before its launch record (merged by begin time) */
	SP_TG_ADD(g, 501, SP_K_GPU_SPAN, 0, T0 + 160000, T0 + 170000, {SP_F_OP, 3});
	SP_TG_ADD(g, 500, SP_K_MEMSET, SP_API_cuMemsetD8_v2, T0 + 160500, T0 + 161000, {SP_F_OP, 3},
		  {SP_F_BYTES, 2048});
	/* an allocation failure stands out by its name */
	SP_TG_ADD(g, 500, SP_K_ALLOC_FAILED, SP_API_cuMemAlloc_v2, T0 + 180000, T0 + 181000, {SP_F_BYTES, 3 << 20},
		  {SP_F_FREE, 8 << 20}, {SP_F_RESULT, 2});
	/* a span whose call the trace does not have (lost to the ring) */
	SP_TG_ADD(g, 501, SP_K_GPU_SPAN, 0, T0 + 200000, T0 + 201000, {SP_F_OP, 99});
	cr_assert_eq(sp_tg_finish(g), 0);

	struct doc d;
	export_to(&d, &path, 1);
	cr_assert_eq(d.rc, SP_EXIT_OK);
	const struct sp_json *a = one(&d, "X", "k"), *b = one(&d, "X", "D2H 512 B"), *c = one(&d, "X", "memset 2 KiB"),
			     *o = one(&d, "X", "op 99");
	uint64_t ta = sp_json_u64(a, "tid", 0), tb = sp_json_u64(b, "tid", 0);
	cr_expect_neq(ta, tb, "overlapping spans on one track would not nest");
	cr_expect_eq(sp_json_u64(c, "tid", 0), ta, "the first free lane is reused");
	cr_expect_eq(sp_json_u64(o, "tid", 0), ta);
	expect_x(a, 500, 0, "10", "100");
	expect_x(b, 500, 0, "50", "100");
	expect_x(c, 500, 0, "160", "10");
	expect_x(o, 500, 0, "200", "1");
	const struct sp_json *af = one(&d, "X", "cuMemAlloc_v2 failed (3 MiB)");
	expect_x(af, 500, 500, "180", "1");
	cr_expect_eq(sp_json_u64(af, "args.free", 0), 8 << 20);
	cr_expect_str_eq(meta_name(&d, "thread_name", 500, ta), "GPU 0");
	cr_expect_str_eq(meta_name(&d, "thread_name", 500, tb), "GPU 0 (2)");
	cr_expect_eq(d.st.gpu_spans, 4);
	cr_expect_eq(d.st.gpu_unjoined, 1);
	cr_expect_eq(sp_json_u64(d.j, "otherData.gpu_spans_unjoined", 0), 1);
	cr_expect_eq(count_key(&d, "flow_in"), 3, "arrows for the joined spans only");
	cr_expect_eq(sp_json_u64(o, "args.op", 0), 99, "an unjoined span says its op id");
	doc_free(&d);
	free(path);
	sp_t_rmrf(dir);
	free(dir);
}

/* ------------------------------------------------------ 4. several files */

Test(export, hosts_keep_their_pids_apart_and_share_one_clock)
{
	char *dir = sp_t_tmpdir("export");
	char *pa = tmpfile_path(dir, "a.sptrace"), *pb = tmpfile_path(dir, "b.sptrace"),
	     *pc = tmpfile_path(dir, "c.sptrace");
	/* the same pid on two hosts; host B's monotonic clock is 2 s ahead and it started 1 ms later */
	struct sp_tg_opts oa = {.pid = 77, .rank = 0, .host = "nodeA", .cmdline = "train"};
	struct sp_tg_opts ob = {.pid = 77, .rank = 1, .host = "nodeB", .cmdline = "train", .start_mono_ns = 3 * T0};
	struct sp_tg_opts oc = {
	    .pid = 78, .ppid = 77, .rank = -1, .host = "nodeA", .cmdline = "worker", .start_mono_ns = T0 + 5000};
	struct sp_tg *g = sp_tg_create_opts(pa, &oa);
	sp_tg_header(g)->start_real_ns = 1700000000000000000ull;
	SP_TG_ADD(g, 77, SP_K_SYNC, SP_API_cudaDeviceSynchronize, T0 + 1000, T0 + 2000);
	cr_assert_eq(sp_tg_finish(g), 0);
	g = sp_tg_create_opts(pb, &ob);
	sp_tg_header(g)->start_real_ns = 1700000000000000000ull + 1000000;
	SP_TG_ADD(g, 77, SP_K_SYNC, SP_API_cudaDeviceSynchronize, 3 * T0 + 500000, 3 * T0 + 501000);
	cr_assert_eq(sp_tg_finish(g), 0);
	g = sp_tg_create_opts(pc, &oc);
	/* same host, its own realtime reading a little off: the host's first file's offset is used */
	sp_tg_header(g)->start_real_ns = 1700000000000000000ull + 5000 + 37;
	SP_TG_ADD(g, 78, SP_K_READ, SP_API_read, T0 + 6000, T0 + 7000, {SP_F_BYTES, 1});
	cr_assert_eq(sp_tg_finish(g), 0);

	char *paths[] = {pa, pb, pc};
	struct doc d;
	export_to(&d, paths, 3);
	cr_assert_eq(d.rc, SP_EXIT_OK);
	const struct sp_json *sa = NULL, *sb = NULL;
	for (size_t i = 0; i < d.ev->n; i++) {
		const struct sp_json *e = &d.ev->kids[i];
		if (!strcmp(s_of(e, "ph"), "X") && !strcmp(s_of(e, "name"), "cudaDeviceSynchronize")) {
			if (sp_json_u64(e, "pid", 0) == 77)
				sa = e;
			else
				sb = e;
		}
	}
	cr_assert(sa && sb);
	uint64_t pid_b = 77 + (1u << 22);
	expect_x(sa, 77, 77, "1", "1");
	/* B's 500 us after its start, which was 1 ms after A's: 1500 us on A's clock */
	expect_x(sb, pid_b, pid_b, "1500", "1");
	expect_x(one(&d, "X", "read"), 78, 78, "6", "1");
	cr_expect_str_eq(meta_name(&d, "process_name", 77, 77), "train [rank 0] @nodeA");
	cr_expect_str_eq(meta_name(&d, "process_name", pid_b, pid_b), "train [rank 1] @nodeB");
	cr_expect_str_eq(meta_name(&d, "process_name", 78, 78), "worker @nodeA");
	doc_free(&d);
	free(pa);
	free(pb);
	free(pc);
	sp_t_rmrf(dir);
	free(dir);
}

/*
 * Two processes of one pid on one host (two pid namespaces: `unshare --pid` gives each
 * pid 1; or a pid reused), each exited cleanly: two processes, each named with its
 * rank, numbered as the analysis numbers them (merge_pid_spaces: the later one in a
 * pid space of its own, 1 + (1 << 22)), not one process (pid 1, named with the rank
 * of the file read last) with the records of the two mixed on thread 1.
 */
Test(export, two_processes_of_one_pid_on_one_host_stay_apart)
{
	char *dir = sp_t_tmpdir("export");
	char *pa = tmpfile_path(dir, "a.sptrace"), *pb = tmpfile_path(dir, "b.sptrace");
	struct sp_tg_opts oa = {.pid = 1, .rank = 1, .host = "node", .cmdline = "train", .start_mono_ns = T0 + 500};
	struct sp_tg_opts ob = {.pid = 1, .rank = 0, .host = "node", .cmdline = "train"};
	struct sp_tg *g = sp_tg_create_opts(pa, &oa);
	SP_TG_ADD(g, 1, SP_K_SYNC, SP_API_cudaDeviceSynchronize, T0 + 3000, T0 + 4000);
	sp_tg_header(g)->end_mono_ns = T0 + 9000; /* a clean exit: not an exec of the other */
	cr_assert_eq(sp_tg_finish(g), 0);
	g = sp_tg_create_opts(pb, &ob);
	SP_TG_ADD(g, 1, SP_K_SYNC, SP_API_cudaStreamSynchronize, T0 + 1000, T0 + 2000);
	sp_tg_header(g)->end_mono_ns = T0 + 8000;
	cr_assert_eq(sp_tg_finish(g), 0);

	char *paths[] = {pa, pb};
	/* the analysis's pids: rank 0 started first and keeps pid 1 */
	struct merge *m = merge_open(paths, 2);
	cr_assert_not_null(m);
	struct an_source src;
	merge_source(m, &src);
	int32_t apid[2] = {src.header(src.ctx, 0)->pid, src.header(src.ctx, 1)->pid};
	merge_close(m);
	cr_assert_eq(apid[1], 1, "rank 0's file, started first");
	cr_assert_eq(apid[0], 1 + (1 << 22), "rank 1's file, a pid space of its own");

	struct doc d;
	export_to(&d, paths, 2);
	cr_assert_eq(d.rc, SP_EXIT_OK);
	expect_x(one(&d, "X", "cudaStreamSynchronize"), (uint64_t)apid[1], (uint64_t)apid[1], "1", "1");
	expect_x(one(&d, "X", "cudaDeviceSynchronize"), (uint64_t)apid[0], (uint64_t)apid[0], "3", "1");
	cr_expect_str_eq(meta_name(&d, "process_name", (uint64_t)apid[1], (uint64_t)apid[1]), "train [rank 0]");
	cr_expect_str_eq(meta_name(&d, "process_name", (uint64_t)apid[0], (uint64_t)apid[0]), "train [rank 1]");
	cr_expect_eq(count(&d, "M", "process_name"), 2, "two processes");
	cr_expect_eq(count(&d, "M", "thread_name"), 2, "a thread each");
	doc_free(&d);
	free(pa);
	free(pb);
	sp_t_rmrf(dir);
	free(dir);
}

Test(export, a_foreign_file_is_reported_and_the_others_exported)
{
	char *dir = sp_t_tmpdir("export");
	char *good = one_process(dir), *bad = tmpfile_path(dir, "notes.txt");
	cr_assert_eq(sp_t_write_file(bad, "hello, not a trace\n", 19), 0);
	char *paths[] = {bad, good};
	struct doc d;
	export_to(&d, paths, 2);
	cr_expect_eq(d.rc, SP_EXIT_INPUT);
	cr_expect_eq(d.st.files, 1);
	cr_expect_eq(count(&d, "X", "train_step"), 1);
	doc_free(&d);

	/* only foreign files: nothing is written */
	char *text = NULL;
	size_t len = 0;
	FILE *f = open_memstream(&text, &len);
	cr_assert_eq(export_perfetto(paths, 1, f, NULL, NULL), SP_EXIT_INPUT);
	fclose(f);
	cr_expect_eq(len, 0);
	free(text);
	free(good);
	free(bad);
	sp_t_rmrf(dir);
	free(dir);
}

/*
 * A damaged header's pid 0, and thread 0 (the keep area's records): named and
 * counted once like any other (fuzz_export found pid 0 taken for an empty slot:
 * its process was never named, each of its records added a thread and a
 * process to the tables, and its command line leaked).
 */
Test(export, pid_0_and_thread_0_are_a_process_and_a_thread_like_any_other)
{
	char *dir = sp_t_tmpdir("export");
	char *path = tmpfile_path(dir, "zero.sptrace");
	struct sp_tg_opts o = {.pid = 0, .ppid = 1, .rank = -1, .cmdline = "damaged"};
	struct sp_tg *g = sp_tg_create_opts(path, &o);
	for (int i = 0; i < 200; i++)
		SP_TG_ADD(g, 0, SP_K_STEP, SP_API_stepprof_step, T0 + 1000 * (uint64_t)i, T0 + 1000 * (uint64_t)i,
			  {SP_F_VALUE, (uint64_t)i});
	cr_assert_eq(sp_tg_finish(g), 0);
	struct doc d;
	export_to(&d, &path, 1);
	cr_assert_eq(d.rc, SP_EXIT_OK);
	cr_expect_eq(sp_json_u64(d.j, "otherData.records", 0), 200);
	cr_expect_str_eq(meta_name(&d, "process_name", 0, 0), "damaged");
	cr_expect_not_null(meta_name(&d, "thread_name", 0, 0), "thread 0 of pid 0 has no name");
	cr_expect_eq(count(&d, "M", "process_name"), 1, "%zu process names", count(&d, "M", "process_name"));
	cr_expect_eq(count(&d, "M", "thread_name"), 1, "%zu thread names", count(&d, "M", "thread_name"));
	doc_free(&d);
	free(path);
	sp_t_rmrf(dir);
	free(dir);
}

Test(export, collector_records_join_their_processes)
{
	char *dir = sp_t_tmpdir("export");
	char *pa = tmpfile_path(dir, "app.sptrace"), *pc = tmpfile_path(dir, "collector.sptrace");
	struct sp_tg_opts oa = {.pid = 600, .rank = -1, .cmdline = "python train.py"};
	struct sp_tg *g = sp_tg_create_opts(pa, &oa);
	SP_TG_ADD(g, 600, SP_K_SYNC, SP_API_cudaDeviceSynchronize, T0 + 1000, T0 + 2000);
	cr_assert_eq(sp_tg_finish(g), 0);

	/* the eBPF collector: its own pid (900) has no records; it saw the app and a worker */
	struct sp_tg_opts oc = {.pid = 900, .rank = -1, .cmdline = "stepprof-bpf"};
	g = sp_tg_create_opts(pc, &oc);
	sp_tg_header(g)->features = SP_FEAT_BPF;
	uint32_t p = sp_tg_intern(g, "/data/x");
	struct sp_event ev = {.kind = SP_K_OPEN, .api = SP_API_openat, .pid = 600, .tid = 600};
	ev.begin_ns = T0 + 3000;
	ev.end_ns = T0 + 4000;
	ev.f[SP_F_PATH] = p;
	ev.f[SP_F_SOURCE] = SP_SOURCE_BPF;
	sp_tg_add_event(g, &ev);
	ev.pid = 601;
	ev.tid = 602;
	ev.begin_ns = T0 + 5000;
	ev.end_ns = T0 + 7000;
	sp_tg_add_event(g, &ev);
	cr_assert_eq(sp_tg_finish(g), 0);

	char *paths[] = {pa, pc};
	struct doc d;
	export_to(&d, paths, 2);
	cr_assert_eq(d.rc, SP_EXIT_OK);
	cr_expect_eq(count(&d, "X", "openat /data/x"), 2);
	for (size_t i = 0; i < d.ev->n; i++) {
		const struct sp_json *e = &d.ev->kids[i];
		if (strcmp(s_of(e, "name"), "openat /data/x"))
			continue;
		if (sp_json_u64(e, "pid", 0) == 600)
			expect_x(e, 600, 600, "3", "1");
		else
			expect_x(e, 601, 602, "5", "2");
		cr_expect_str_eq(s_of(e, "args.source"), "bpf");
	}
	cr_expect_str_eq(meta_name(&d, "process_name", 600, 600), "python train.py");
	cr_expect_str_eq(meta_name(&d, "process_name", 601, 601), "pid 601");
	cr_expect_str_eq(meta_name(&d, "thread_name", 601, 602), "tid 602");
	cr_expect_null(meta_name(&d, "process_name", 900, 900), "the collector itself is not a process of the job");
	cr_expect_eq(count(&d, "M", "process_name"), 2);
	doc_free(&d);
	free(pa);
	free(pc);
	sp_t_rmrf(dir);
	free(dir);
}
