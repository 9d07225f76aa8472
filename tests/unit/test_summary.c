/*
 * test_summary.c - the per-window summary records (format 1.1) on the reading
 * side, on files and records the test builds itself:
 *   1. the reader keeps them apart from the event stream, in the order written,
 *      and finds an open reader by a copy of its header;
 *   2. the analysis fits memory_growth on them when the raw ring lost the
 *      run's beginning, and leaves the raw verdict when it did not.
 * Ground truth is what the test wrote (steps, live and peak bytes per window).
 */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "analyze.h"
#include "reader.h"
#include "summary.h"
#include "testlib.h"
#include "tracegen.h"

#define PID 4242
#define TID 4243
#define MS  1000000ull
#define MiB (1ull << 20)

static void add_summary(struct sp_tg *g, uint64_t b, uint64_t e, uint64_t steps, uint64_t records)
{
	uint64_t f[SP_F__COUNT] = {0};
	f[SP_F_STEPS] = steps;
	f[SP_F_RECORDS] = records;
	f[SP_F_LOST] = 2;
	sp_tg_add_keep(g, SP_K_SUMMARY, 0, b, e, f);
}

static void add_device(struct sp_tg *g, uint64_t b, uint64_t e, unsigned dev, uint64_t live, uint64_t peak)
{
	uint64_t f[SP_F__COUNT] = {0};
	f[SP_F_DEVICE] = dev;
	f[SP_F_LIVE] = live;
	f[SP_F_PEAK] = peak;
	sp_tg_add_keep(g, SP_K_SUMMARY_DEVICE, 0, b, e, f);
}

/* ---- 1. the reader ---- */

Test(summary_reader, apart_from_events_in_order_and_found_by_header)
{
	char *dir = sp_t_tmpdir("summary_reader");
	char path[1024];
	snprintf(path, sizeof(path), "%s/t.sptrace", dir);
	struct sp_tg *g = sp_tg_create(path, PID, 1, -1);
	for (unsigned i = 0; i < 3; i++)
		SP_TG_ADD(g, TID, SP_K_STEP, SP_API_stepprof_step, 1500 * MS + i, 1500 * MS + i, {SP_F_VALUE, i});
	add_summary(g, 1000 * MS, 2000 * MS, 3, 10);
	add_device(g, 1000 * MS, 2000 * MS, 0, 100, 150);
	add_device(g, 1000 * MS, 2000 * MS, 1, 7, 9);
	add_summary(g, 2000 * MS, 4000 * MS, 5, 20);
	add_device(g, 2000 * MS, 4000 * MS, 0, 300, 400);
	cr_assert_eq(sp_tg_finish(g), 0);

	struct sp_reader *r;
	char err[256];
	cr_assert_eq(sp_reader_open(path, &r, err, sizeof(err)), 0, "%s", err);
	cr_assert_eq(sp_reader_stats(r)->summaries, 2, "known at open");
	/* the summaries, in the order written, SUMMARY before its devices */
	static const unsigned kinds[] = {SP_K_SUMMARY, SP_K_SUMMARY_DEVICE, SP_K_SUMMARY_DEVICE, SP_K_SUMMARY,
					 SP_K_SUMMARY_DEVICE};
	struct sp_event ev;
	size_t pos = 0, n = 0;
	while (sp_reader_summary(r, &pos, &ev)) {
		cr_assert_lt(n, 5);
		cr_assert_eq(ev.kind, kinds[n], "summary %zu: kind %u", n, ev.kind);
		cr_assert_eq(ev.pid, PID);
		cr_assert_eq(ev.tid, 0);
		if (n == 2) {
			cr_assert_eq(ev.f[SP_F_DEVICE], 1);
			cr_assert_eq(ev.f[SP_F_LIVE], 7);
			cr_assert_eq(ev.f[SP_F_PEAK], 9);
			cr_assert_eq(ev.begin_ns, 1000 * MS);
			cr_assert_eq(ev.end_ns, 2000 * MS);
		}
		if (n == 3) {
			cr_assert_eq(ev.f[SP_F_STEPS], 5);
			cr_assert_eq(ev.f[SP_F_RECORDS], 20);
			cr_assert_eq(ev.f[SP_F_LOST], 2);
		}
		n++;
	}
	cr_assert_eq(n, 5);
	/* the event stream holds the steps only */
	size_t steps = 0;
	while (sp_reader_next(r, &ev)) {
		cr_assert_eq(ev.kind, SP_K_STEP, "a %s record in the event stream", sp_kind_name[ev.kind]);
		steps++;
	}
	cr_assert_eq(steps, 3);
	cr_assert_eq(sp_reader_stats(r)->records, 3);

	/* found by a copy of its header; windows summed over devices */
	struct sp_file_header h = *sp_reader_header(r);
	cr_assert_eq(sp_reader_find(&h), r);
	struct sm_window *w;
	cr_assert_eq(sm_windows(&h, &w), 2);
	cr_assert_eq(w[0].peak_bytes, 159);
	cr_assert_eq(w[0].live_bytes, 107);
	cr_assert_eq(w[0].steps, 3);
	cr_assert_eq(w[1].peak_bytes, 400);
	cr_assert_eq(w[1].end_ns, 4000 * MS);
	free(w);
	/* the merge may renumber a copy's pid (processes of two hosts sharing one): still this file */
	struct sp_file_header renumbered = h;
	renumbered.pid += 1 << 22;
	cr_assert_eq(sp_reader_find(&renumbered), r);
	/* another process: other start clocks */
	struct sp_file_header other = h;
	other.start_mono_ns++;
	cr_assert_null(sp_reader_find(&other));
	other = h;
	other.host[0] ^= 1;
	cr_assert_null(sp_reader_find(&other));
	sp_reader_close(r);
	cr_assert_null(sp_reader_find(&h), "a closed reader is still found");
	sp_t_rmrf(dir);
	free(dir);
}

/* ---- 2. the analysis ---- */

/*
 * A trainer that leaks LEAK per step for 100 steps of 10 ms; the raw records
 * hold only the last 20 (the ring lost the others), the summaries (10 ms
 * windows, one step each) the whole run.
 */
#define STEPS 100
#define RAW   20
#define LEAK  (4 * MiB)
#define BASE  (64 * MiB)

static struct an_analysis *analyze_leak_marked(int wrapped, int nvtx, struct sp_reader **rp, char **dirp)
{
	char *dir = sp_t_tmpdir("summary_an");
	char path[1024];
	snprintf(path, sizeof(path), "%s/t.sptrace", dir);
	struct sp_tg *g = sp_tg_create(path, PID, 1, -1);
	uint64_t t0 = 1000 * MS;
	for (uint64_t i = 0; i < STEPS; i++) {
		uint64_t b = t0 + i * 10 * MS;
		add_summary(g, b, b + 10 * MS, i + 1, 0);
		add_device(g, b, b + 10 * MS, 0, BASE + (i + 1) * LEAK, BASE + (i + 1) * LEAK);
	}
	SP_TG_ADD(g, TID, SP_K_STEP, SP_API_stepprof_step, t0, t0, {SP_F_VALUE, 0});
	sp_tg_header(g)->overwritten_records = wrapped ? 12345 : 0;
	cr_assert_eq(sp_tg_finish(g), 0);
	cr_assert_eq(sp_reader_open(path, rp, NULL, 0), 0);

	struct an_memsrc *m = calloc(1, sizeof(*m));
	an_memsrc_init(m, PID);
	m->hdr = *sp_reader_header(*rp); /* the file the analysis reads, as merge.c copies it */
	m->hdr.ndevices = 1;
	m->hdr.devices[0].mem_bytes = 1ull << 34;
	uint32_t kn = an_memsrc_string(m, "k"), step = an_memsrc_string(m, "train_step");
	for (uint64_t i = STEPS - RAW; i < STEPS; i++) {
		uint64_t b = t0 + i * 10 * MS;
		an_memsrc_add(m, SP_K_STEP, SP_API_stepprof_step, PID, TID, b, b)->f[SP_F_VALUE] = i;
		if (nvtx) /* NVTX ranges too, around each step: the iterations are theirs */
			an_memsrc_add(m, SP_K_RANGE, SP_API_nvtx, PID, TID, b, b + 9 * MS)->f[SP_F_NAME] = step;
		struct sp_event *e = an_memsrc_add(m, SP_K_ALLOC, SP_API_cudaMalloc, PID, TID, b + MS, b + MS + 1000);
		e->f[SP_F_BYTES] = LEAK;
		e->f[SP_F_DPTR] = 0x700000000000ull + i * LEAK;
		e->f[SP_F_LIVE] = BASE + (i + 1) * LEAK;
		e = an_memsrc_add(m, SP_K_LAUNCH, SP_API_cudaLaunchKernel, PID, TID, b + 2 * MS, b + 2 * MS + 5000);
		e->f[SP_F_NAME] = kn;
	}
	an_memsrc_sort(m);
	struct an_source src;
	an_memsrc_source(m, &src);
	struct an_options o;
	an_options_init(&o);
	struct an_analysis *a = calloc(1, sizeof(*a));
	char err[256];
	cr_assert_eq(an_analyze(&src, &o, a, err, sizeof(err)), 0, "%s", err);
	an_memsrc_free(m);
	free(m);
	*dirp = dir;
	return a;
}

/* The trainer marks its steps with stepprof_step() only. */
static struct an_analysis *analyze_leak(int wrapped, struct sp_reader **rp, char **dirp)
{
	return analyze_leak_marked(wrapped, 0, rp, dirp);
}

static const struct an_result_finding *growth_finding(const struct an_analysis *a, size_t *count)
{
	const struct an_result_finding *f = NULL;
	*count = 0;
	for (size_t i = 0; i < a->nfnd; i++)
		if (a->fnd[i].kind == AN_F_MEMORY_GROWTH) {
			f = &a->fnd[i];
			(*count)++;
		}
	return f;
}

static double evidence(const struct an_result_finding *f, const char *key, int *is_str, const char **str)
{
	for (int i = 0; i < f->nev; i++)
		if (!strcmp(f->ev[i].key, key)) {
			if (is_str)
				*is_str = f->ev[i].is_str;
			if (str)
				*str = f->ev[i].str;
			return f->ev[i].num;
		}
	cr_assert_fail("no evidence %s", key);
	return 0;
}

static void done(struct an_analysis *a, struct sp_reader *r, char *dir)
{
	an_analysis_free(a);
	free(a);
	sp_reader_close(r);
	sp_t_rmrf(dir);
	free(dir);
}

Test(summary_analyze, wrapped_ring_fits_whole_run)
{
	struct sp_reader *r;
	char *dir;
	struct an_analysis *a = analyze_leak(1, &r, &dir);
	cr_assert_eq(a->nit, RAW, "raw iterations: %zu", a->nit);
	size_t n;
	const struct an_result_finding *f = growth_finding(a, &n);
	cr_assert_eq(n, 1, "%zu memory_growth findings", n);
	int is_str = 0;
	const char *hist = NULL;
	evidence(f, "history", &is_str, &hist);
	cr_assert(is_str);
	cr_assert_str_eq(hist, "summaries");
	double slope = evidence(f, "slope_bytes_per_iteration", NULL, NULL);
	cr_assert_float_eq(slope, (double)LEAK, 1.0, "slope %.1f", slope);
	double growth = evidence(f, "growth_bytes", NULL, NULL);
	cr_assert_float_eq(growth, (double)(STEPS - 1) * LEAK, 16.0, "growth %.1f: the whole run's", growth);
	cr_assert_float_eq(evidence(f, "summary_windows", NULL, NULL), STEPS, 0.5);
	cr_assert_eq(a->device_bytes_peak, BASE + STEPS * LEAK);
	done(a, r, dir);
}

Test(summary_analyze, unwrapped_ring_keeps_raw_verdict)
{
	struct sp_reader *r;
	char *dir;
	struct an_analysis *a = analyze_leak(0, &r, &dir);
	size_t n;
	const struct an_result_finding *f = growth_finding(a, &n);
	cr_assert_eq(n, 1, "the raw iterations leak too: %zu findings", n);
	for (int i = 0; i < f->nev; i++)
		cr_assert_neq(strcmp(f->ev[i].key, "history"), 0, "summaries used though nothing was overwritten");
	double growth = evidence(f, "growth_bytes", NULL, NULL);
	cr_assert_float_eq(growth, (double)(RAW - 1) * LEAK, 16.0, "growth %.1f over the raw iterations", growth);
	done(a, r, dir);
}

/*
 * The same trainer also marks each step with an NVTX range, which gives the
 * iterations (NVTX comes first): the ring lost 80 of its 100 steps all the
 * same, and the whole run's growth is the summaries' (99 steps of 4 MiB).
 */
Test(summary_analyze, wrapped_ring_of_nvtx_iterations_and_step_marks_fits_whole_run)
{
	struct sp_reader *r;
	char *dir;
	struct an_analysis *a = analyze_leak_marked(1, 1, &r, &dir);
	cr_assert_eq(a->source_kind, AN_SRC_NVTX);
	cr_assert_eq(a->nit, RAW, "raw iterations: %zu", a->nit);
	size_t n;
	const struct an_result_finding *f = growth_finding(a, &n);
	cr_assert_eq(n, 1, "%zu memory_growth findings", n);
	double growth = evidence(f, "growth_bytes", NULL, NULL);
	cr_expect_float_eq(growth, (double)(STEPS - 1) * LEAK, 16.0, "growth %.1f MiB, the run's is %llu MiB",
			   growth / MiB, (unsigned long long)((STEPS - 1) * LEAK / MiB));
	cr_expect_eq(a->device_bytes_peak, BASE + STEPS * LEAK);
	done(a, r, dir);
}
