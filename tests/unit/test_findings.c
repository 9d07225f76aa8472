/*
 * test_findings.c - the findings (analyzer/findings.c) of the analysis of records
 * built in memory by the workload simulator (worksim.h): each fires at its
 * threshold and stays silent just under it.
 *
 * Ground truth is the timeline the simulator was told to produce (durations in
 * microseconds below), never a number the analyzer computed.
 */
#include <criterion/criterion.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "analyze.h"
#include "report.h"
#include "worksim.h"

/*
 * A loader worker (forked by the trainer) stats and opens files during each
 * input wait: `stats` + `opens` metadata operations; the first `nsmall` files
 * opened have `small` bytes, the others `size` bytes. Options o (NULL: the defaults).
 */
static void storm_run_mixed(struct an_analysis *a, const struct an_options *o, int opens, int stats, uint64_t size,
			    int nsmall, uint64_t small)
{
	struct sim s;
	sim_init(&s);
	sim_fork_worker(&s);
	uint32_t path = an_memsrc_string(&s.m, "/data/train/shard/sample.jpg");
	for (int i = 0; i < 12; i++) {
		uint64_t t = s.t + 10 * US;
		for (int k = 0; k < stats; k++, t += 5 * US) {
			struct sp_event *e = an_memsrc_add(&s.m, SP_K_STAT, SP_API_stat, WPID, WPID, t, t + 3 * US);
			e->f[SP_F_PATH] = path;
			e->f[SP_F_BYTES] = size;
		}
		for (int k = 0; k < opens; k++, t += 6 * US)
			worker_read_file(&s, path, 5, k < nsmall ? small : size, t, t + 2 * US, t + 4 * US, t + 5 * US);
		sim_iteration(&s, 2);
	}
	run_free(&s, o, a);
}

/* Same, every file of `size` bytes, default options. */
static void storm_run(struct an_analysis *a, int opens, int stats, uint64_t size)
{
	storm_run_mixed(a, NULL, opens, stats, size, 0, 0);
}

Test(findings, small_file_storm_fires_at_100_metadata_ops)
{
	struct an_analysis a;
	storm_run(&a, 50, 50, 16384);
	cr_assert_eq(a.nit, 12);
	cr_expect_eq(a.it[3].files_opened, 50);
	cr_expect_eq(a.it[3].metadata_ops, 100);
	cr_expect_eq(a.it[3].bytes_read, 50 * 16384);
	const struct an_result_finding *f = find(&a, AN_F_SMALL_FILE_STORM, NULL);
	cr_assert(f);
	cr_expect_eq(f->first_iteration, 0);
	cr_expect_eq(f->last_iteration, 11);
	cr_expect_eq(f->severity, 2); /* input is 4000 of 11100 us: 36% >= 30% */
	cr_expect(strlen(f->advice) > 100);
	int dirs = 0;
	for (int i = 0; i < f->nev; i++)
		if (f->ev[i].is_str && strstr(f->ev[i].str, "/data/train/shard"))
			dirs = 1;
	cr_expect(dirs, "top directory in the evidence");
	int med = 0;
	for (int i = 0; i < f->nev; i++)
		if (!strcmp(f->ev[i].key, "median_file_bytes")) {
			med = 1;
			cr_expect_eq(f->ev[i].num, 16384, "median file %g bytes, the files have 16384", f->ev[i].num);
		}
	cr_expect(med);
	cr_expect_eq(a.procs[1].role == AN_ROLE_WORKER || a.procs[0].role == AN_ROLE_WORKER, 1);
	an_analysis_free(&a);
}

Test(findings, small_file_storm_silent_at_99_metadata_ops)
{
	struct an_analysis a;
	storm_run(&a, 49, 50, 16384);
	cr_expect_null(find(&a, AN_F_SMALL_FILE_STORM, NULL));
	an_analysis_free(&a);
}

Test(findings, small_file_storm_silent_for_256k_files)
{
	struct an_analysis a;
	storm_run(&a, 50, 50, 262143);
	cr_expect_not_null(find(&a, AN_F_SMALL_FILE_STORM, NULL));
	an_analysis_free(&a);
	storm_run(&a, 50, 50, 262144);
	cr_expect_null(find(&a, AN_F_SMALL_FILE_STORM, NULL));
	an_analysis_free(&a);
}

/* 50 opens and 50 stats per iteration, files of `size` bytes: is there a storm under max_median_file_bytes=max? */
static int storm_under(uint64_t size, double max)
{
	struct an_options o;
	an_options_init(&o);
	o.threshold[AN_T_SFS_MAX_FILE] = max;
	struct an_analysis a;
	storm_run_mixed(&a, &o, 50, 50, size, 0, 0);
	const struct an_result_finding *f = find(&a, AN_F_SMALL_FILE_STORM, NULL);
	int fired = f != NULL;
	if (f) {
		cr_expect_eq(f->first_iteration, 0);
		cr_expect_eq(f->last_iteration, 11);
	}
	an_analysis_free(&a);
	return fired;
}

/*
 * The median file size against any max_median_file_bytes, not only a power of
 * two: files of 70,000 bytes are under 100,000 (a bound a user types) and under
 * 70,001, not under 70,000.
 */
Test(findings, small_file_storm_median_is_exact_at_any_threshold)
{
	cr_expect(storm_under(70000, 100000), "70000-byte files, max 100000");
	cr_expect(storm_under(70000, 70001), "70000-byte files, max 70001");
	cr_expect(!storm_under(70000, 70000), "70000-byte files, max 70000: not under");
	cr_expect(storm_under(1000000, 1000001), "1 MB files, max 1000001");
	cr_expect(!storm_under(1000000, 524288), "1 MB files, max 512 KiB");
	cr_expect(!storm_under(100, 0), "max 0: no file is under it");
}

/*
 * The median of the files of an iteration (the lower one of an even count): 50
 * files, 25 of 16 KiB and 25 of 1 MiB, have a median of 16 KiB; 24 and 26, of 1 MiB.
 */
Test(findings, small_file_storm_median_of_mixed_sizes)
{
	struct an_analysis a;
	storm_run_mixed(&a, NULL, 50, 50, 1 << 20, 25, 16384);
	cr_expect_not_null(find(&a, AN_F_SMALL_FILE_STORM, NULL), "25 of 50 files under 256 KiB");
	an_analysis_free(&a);
	storm_run_mixed(&a, NULL, 50, 50, 1 << 20, 24, 16384);
	cr_expect_null(find(&a, AN_F_SMALL_FILE_STORM, NULL), "24 of 50 files under 256 KiB");
	an_analysis_free(&a);
}

/*
 * Severity by the exposed input share: 12 iterations of a storm (100 metadata
 * ops of 16 KiB files by a worker) where the training thread waits `wait_us`,
 * launches (5 us) and syncs on a kernel of `kernel_us`; the GPU is idle while it
 * waits, so the input share is wait / (wait + 5 + kernel), known exactly here.
 */
/*
 * 12 iterations, each: a step mark, the worker's 50 stats and 50 reads of 16 KiB
 * files in the next 200 ns, the training thread's wait of `wait_us`, a pageable
 * cudaMemcpyAsync H2D of `copy_us` on the GPU when not 0 (the host blocks for
 * it), a launch (5 us) and the sync on its kernel of `kernel_us`.
 */
static void sim_storm(struct sim *s, uint64_t wait_us, uint64_t copy_us, uint64_t kernel_us)
{
	sim_init(s);
	sim_fork_worker(s);
	for (int i = 0; i < 12; i++) {
		add(s, SP_K_STEP, SP_API_stepprof_step, s->t, s->t);
		uint64_t t = s->t + 1;
		for (int k = 0; k < 50; k++, t += 4) {
			an_memsrc_add(&s->m, SP_K_STAT, SP_API_stat, WPID, WPID, t, t + 1);
			worker_read_file(s, 0, 5, 16384, t + 1, t + 2, t + 3, t + 4); /* no path recorded */
		}
		sim_input(s, wait_us * US);
		if (copy_us)
			sim_copy(s, SP_DIR_H2D, 1 << 20, copy_us * US, 1);
		sim_compute(s, kernel_us * US);
	}
}

static void storm_share_run(struct an_analysis *a, uint64_t wait_us, uint64_t kernel_us, double warn, double crit)
{
	struct sim s;
	sim_storm(&s, wait_us, 0, kernel_us);
	struct an_options o;
	an_options_init(&o);
	o.threshold[AN_T_SFS_WARN] = warn;
	o.threshold[AN_T_SFS_CRIT] = crit;
	run_free(&s, &o, a);
}

static int storm_severity(uint64_t wait_us, uint64_t kernel_us, double warn, double crit)
{
	struct an_analysis a;
	storm_share_run(&a, wait_us, kernel_us, warn, crit);
	const struct an_result_finding *f = find(&a, AN_F_SMALL_FILE_STORM, NULL);
	cr_assert_not_null(f, "the storm is there whatever its share");
	cr_expect_eq(f->first_iteration, 0);
	cr_expect_eq(f->last_iteration, 11);
	int sev = f->severity;
	an_analysis_free(&a);
	return sev;
}

Test(findings, small_file_storm_severity_follows_the_exposed_input_share)
{
	/* the defaults: < 10% info, >= 10% warning, >= 30% critical */
	cr_expect_eq(storm_severity(500, 9495, 0.10, 0.30), 0);	 /* 5% */
	cr_expect_eq(storm_severity(2000, 7995, 0.10, 0.30), 1); /* 20% */
	cr_expect_eq(storm_severity(4000, 5995, 0.10, 0.30), 2); /* 40% */
	/* each bound, just above and just below the share this timeline has: 2000 / 10000 */
	cr_expect_eq(storm_severity(2000, 7995, 0.2001, 0.9), 0);
	cr_expect_eq(storm_severity(2000, 7995, 0.1999, 0.9), 1);
	cr_expect_eq(storm_severity(2000, 7995, 0.1, 0.2001), 1);
	cr_expect_eq(storm_severity(2000, 7995, 0.1, 0.1999), 2);
}

/* Exactly at each bound, and one microsecond of wait under it: input / wall = wait / 10000 us. */
Test(findings, small_file_storm_severity_at_its_exact_bounds)
{
	cr_expect_eq(storm_severity(1000, 8995, 0.10, 0.30), 1, "input share 10%% exactly: warning");
	cr_expect_eq(storm_severity(999, 8996, 0.10, 0.30), 0, "9.99%%: info");
	cr_expect_eq(storm_severity(3000, 6995, 0.10, 0.30), 2, "30%% exactly: critical");
	cr_expect_eq(storm_severity(2999, 6996, 0.10, 0.30), 1, "29.99%%: warning");
}

/*
 * NVTX ranges leave gaps (a pop, then the next push): a loader worker's file read
 * in the gap before an iteration feeds that iteration and is counted in it.
 */
Test(findings, worker_reads_between_nvtx_ranges_count_in_the_next_iteration)
{
	struct sim s;
	sim_init(&s);
	sim_fork_worker(&s);
	uint32_t path = an_memsrc_string(&s.m, "/data/a.bin");
	for (int i = 0; i < 12; i++) {
		uint64_t t = s.t + 10 * US;
		worker_read_file(&s, path, 7, 1000 + (uint64_t)i, t, t + US, t + 2 * US, t + 3 * US);
		s.t += 100 * US; /* the gap */
		sim_iteration(&s, 1);
	}
	struct an_analysis a;
	run_free(&s, NULL, &a);
	cr_assert_eq(a.source_kind, AN_SRC_NVTX);
	cr_assert_eq(a.nit, 12);
	for (size_t i = 0; i < a.nit; i++) {
		cr_expect_eq(a.it[i].files_opened, 1, "iteration %zu", i);
		cr_expect_eq(a.it[i].bytes_read, 1000 + i, "iteration %zu", i);
		cr_expect_eq(a.it[i].end_ns - a.it[i].start_ns, 11100 * US, "the range, not the gap");
	}
	an_analysis_free(&a);
}

static void copy_run(struct an_analysis *a, int pageable_iter)
{
	struct sim s;
	sim_init(&s);
	for (int i = 0; i < 12; i++) {
		sim_step(&s, 1000 * US);
		sim_copy(&s, SP_DIR_H2D, 32 << 20, 16000 * US, i == pageable_iter);
		sim_compute(&s, 4000 * US);
	}
	run_free(&s, NULL, a);
}

Test(findings, unpinned_copy_fires_on_one_pageable_async_copy)
{
	struct an_analysis a;
	copy_run(&a, 5);
	const struct an_result_finding *f = find(&a, AN_F_UNPINNED_COPY, NULL);
	cr_assert(f);
	cr_expect_eq(f->first_iteration, 5);
	cr_expect_eq(f->last_iteration, 5);
	cr_expect_eq(f->severity, 1, "async from pageable memory is at least a warning");
	cr_expect_eq(a.it[5].pageable_copies, 1);
	cr_expect_eq(a.it[5].blocked[AN_BLK_H2D], 16000 * US);
	/* against the pinned copies' speed: 32 MiB in 16 ms on the GPU (their calls return after 10 us) */
	int seen = 0;
	for (int k = 0; k < f->nev; k++) {
		if (!strcmp(f->ev[k].key, "pinned_gbps") || !strcmp(f->ev[k].key, "achieved_gbps")) {
			seen++;
			cr_expect(fabs(f->ev[k].num - (double)(32 << 20) / 16e6) < 1e-6, "%s %g", f->ev[k].key,
				  f->ev[k].num);
		}
	}
	cr_expect_eq(seen, 2);
	an_analysis_free(&a);
}

Test(findings, unpinned_copy_silent_with_pinned_copies)
{
	struct an_analysis a;
	copy_run(&a, -1);
	cr_expect_null(find(&a, AN_F_UNPINNED_COPY, NULL));
	an_analysis_free(&a);
}

/*
 * Severity of unpinned_copy: 12 iterations (input 1 ms, H2D of 32 MiB on the GPU
 * for `copy_us`, a 4 ms kernel, sync); the iterations in [from, to] copy from
 * pageable memory with `api` (a pageable copy returns when it is done).
 */
static int upc_severity(unsigned api, int from, int to, uint64_t copy_us)
{
	struct sim s;
	sim_init(&s);
	for (int i = 0; i < 12; i++) {
		sim_step(&s, 1000 * US);
		int pageable = i >= from && i <= to;
		sim_copy(&s, SP_DIR_H2D, 32 << 20, copy_us * US, pageable);
		s.m.ev[s.m.n - 2].api = api; /* the COPY record just added, before its GPU span */
		sim_compute(&s, 4000 * US);
	}
	struct an_analysis a;
	run_free(&s, NULL, &a);
	const struct an_result_finding *f = find(&a, AN_F_UNPINNED_COPY, NULL);
	cr_assert_not_null(f);
	cr_expect_eq(f->first_iteration, from);
	cr_expect_eq(f->last_iteration, to);
	cr_expect_eq(f->iterations, to - from + 1);
	int sev = f->severity;
	an_analysis_free(&a);
	return sev;
}

Test(findings, unpinned_copy_severity_by_time_share_and_async)
{
	/* one 1 ms pageable copy in a run of ~72 ms: under 5% of wall time */
	cr_expect_eq(upc_severity(SP_API_cudaMemcpy, 5, 5, 1000), 0, "a rare synchronous pageable copy is info");
	cr_expect_eq(upc_severity(SP_API_cudaMemcpyAsync, 5, 5, 1000), 1,
		     "an async copy from pageable memory silently serialises: at least a warning");
	/* 16 ms of copy in iterations of 21 ms: 76% of wall time */
	cr_expect_eq(upc_severity(SP_API_cudaMemcpy, 0, 11, 16000), 2);
	/* 4 of 12 iterations of 6 ms with a 1 ms copy: 4 / 72 = 5.6% >= 5% */
	cr_expect_eq(upc_severity(SP_API_cudaMemcpy, 2, 5, 1000), 1);
}

/*
 * `loss.item()` as PyTorch makes it: a 4-byte cudaMemcpyAsync D2H into pageable
 * memory after the step's kernels, then what the thread calls next: 0 a sync of
 * the copy's stream, 1 cudaDeviceSynchronize, 2 a launch (then the sync), 3 a
 * sync of another stream. Returns the finding's severity; *async its
 * async_copies evidence. The copies' 10 us in iterations of ~5 ms: under 5%.
 */
/* An iteration of 1 ms of input and a 4 ms kernel, then its loss.item(): 4 bytes D2H to pageable memory. */
static void sim_item_step(struct sim *s)
{
	sim_step(s, 1000 * US);
	sim_kernel(s, s->kname, 4000 * US);
	sim_copy(s, SP_DIR_D2H, 4, 10 * US, 1);
}

static int upc_item(int then, double *async)
{
	struct sim s;
	sim_init(&s);
	for (int i = 0; i < 12; i++) {
		sim_item_step(&s);
		if (then == 2)
			sim_kernel(&s, s.kname, 100 * US);
		uint64_t e = s.t > s.gpu ? s.t : s.gpu;
		struct sp_event *ev = add(&s, SP_K_SYNC,
					  then == 1 ? SP_API_cudaDeviceSynchronize : SP_API_cudaStreamSynchronize, s.t, e);
		ev->f[SP_F_STREAM] = then == 3 ? 7 : 0;
		s.t = e;
	}
	struct an_analysis a;
	run_free(&s, NULL, &a);
	const struct an_result_finding *f = find(&a, AN_F_UNPINNED_COPY, NULL);
	cr_assert_not_null(f, "pageable copies are reported, whatever their severity");
	cr_expect_eq(f->iterations, 12);
	*async = -1;
	for (int k = 0; k < f->nev; k++)
		if (!strcmp(f->ev[k].key, "async_copies"))
			*async = f->ev[k].num;
	int sev = f->severity;
	an_analysis_free(&a);
	return sev;
}

Test(findings, unpinned_copy_awaited_at_once_does_not_serialise_silently)
{
	double async;
	cr_expect_eq(upc_item(0, &async), 0, "an .item() copy synchronised at once: info");
	cr_expect_eq(async, 0);
	cr_expect_eq(upc_item(1, &async), 0, "the device synchronised at once: info");
	cr_expect_eq(async, 0);
	cr_expect_eq(upc_item(2, &async), 1, "work queued after it: the copy serialised it silently");
	cr_expect_eq(async, 12);
	cr_expect_eq(upc_item(3, &async), 1, "another stream synchronised: not this copy's wait");
	cr_expect_eq(async, 12);
}

/*
 * Which advice unpinned_copy gives: 12 iterations of 1 ms of input and a 4 ms
 * kernel, then per iteration `items` 4-byte loss.item() reads (D2H to pageable
 * memory, 10 us on the GPU, each synchronised at once) and `big` 8 MiB pageable
 * H2D copies of big_us on the GPU. Returns the finding's small_copies and
 * small_copies_time_share evidence and its advice (static).
 */
static const char *upc_advice_of(int items, int big, uint64_t big_us, const struct an_options *o, double *nsmall,
				 double *share)
{
	static char advice[1024];
	struct sim s;
	sim_init(&s);
	for (int i = 0; i < 12; i++) {
		sim_step(&s, 1000 * US);
		for (int b = 0; b < big; b++)
			sim_copy(&s, SP_DIR_H2D, 8 << 20, big_us * US, 1);
		sim_kernel(&s, s.kname, 4000 * US);
		for (int k = 0; k < items; k++) {
			sim_copy(&s, SP_DIR_D2H, 4, 10 * US, 1);
			uint64_t e = s.t > s.gpu ? s.t : s.gpu;
			add(&s, SP_K_SYNC, SP_API_cudaStreamSynchronize, s.t, e);
			s.t = e;
		}
	}
	struct an_analysis a;
	run_free(&s, o, &a);
	const struct an_result_finding *f = find(&a, AN_F_UNPINNED_COPY, NULL);
	cr_assert_not_null(f);
	*nsmall = *share = -1;
	for (int k = 0; k < f->nev; k++) {
		if (!strcmp(f->ev[k].key, "small_copies"))
			*nsmall = f->ev[k].num;
		if (!strcmp(f->ev[k].key, "small_copies_time_share"))
			*share = f->ev[k].num;
	}
	snprintf(advice, sizeof(advice), "%s", f->advice);
	an_analysis_free(&a);
	return advice;
}

/*
 * Copies of a few bytes that hold half the pageable copies' time or more are
 * scalar reads: the advice is to read back less often (pinning cannot help a
 * loss.item()), with the pinning advice added for larger pageable copies; below
 * half, or with unpinned_copy.small_copy_bytes under their size, the pinning
 * advice alone: not every pageable copy gets the pinning advice.
 */
Test(findings, unpinned_copy_of_scalars_advises_fewer_reads_not_pinning)
{
	double n, share;
	const char *adv = upc_advice_of(3, 0, 0, NULL, &n, &share);
	cr_expect_eq(n, 36);
	cr_expect_float_eq(share, 1.0, 1e-9);
	cr_expect(strstr(adv, "less often") && !strstr(adv, "larger copies"), "%s", adv);
	/* 36 x 10 us of items against 12 x 200 us of 8 MiB copies: the big ones dominate */
	adv = upc_advice_of(3, 1, 200, NULL, &n, &share);
	cr_expect_eq(n, 36);
	cr_expect_float_eq(share, 360.0 / (360 + 2400), 1e-6);
	cr_expect(!strstr(adv, "less often") && strstr(adv, "pinned"), "%s", adv);
	/* 12 x 20 us of 8 MiB copies: the items dominate, both remedies */
	adv = upc_advice_of(3, 1, 20, NULL, &n, &share);
	cr_expect_float_eq(share, 360.0 / (360 + 240), 1e-6);
	cr_expect(strstr(adv, "less often") && strstr(adv, "larger copies"), "%s", adv);
	/* exactly half: fewer reads */
	adv = upc_advice_of(3, 1, 30, NULL, &n, &share);
	cr_expect_float_eq(share, 0.5, 1e-9);
	cr_expect(strstr(adv, "less often"), "%s", adv);
	/* 4-byte copies above a small_copy_bytes of 2: not scalar reads */
	struct an_options o;
	an_options_init(&o);
	o.threshold[AN_T_UPC_SMALL] = 2;
	adv = upc_advice_of(3, 0, 0, &o, &n, &share);
	cr_expect_eq(n, 0);
	cr_expect(!strstr(adv, "less often") && strstr(adv, "pinned"), "%s", adv);
}

/*
 * Exactly at each bound: 12 iterations of 5985 us (a 1 ms wait, a 5 us launch,
 * a 4980 us kernel, its sync), the first k of which first copy from pageable
 * memory for c us with cudaMemcpy (synchronous: only the share decides), a
 * share of k c / (12 x 5985 + k c): 5% for k c = 3780, 30% for k c = 30780.
 */
static int upc_share_severity(int k, uint64_t copy_us)
{
	struct sim s;
	sim_init(&s);
	for (int i = 0; i < 12; i++) {
		sim_step(&s, 1000 * US);
		if (i < k) {
			sim_copy(&s, SP_DIR_H2D, 32 << 20, copy_us * US, 1);
			s.m.ev[s.m.n - 2].api = SP_API_cudaMemcpy;
		}
		sim_compute(&s, 4980 * US);
	}
	struct an_analysis a;
	run_free(&s, NULL, &a);
	const struct an_result_finding *f = find(&a, AN_F_UNPINNED_COPY, NULL);
	cr_assert_not_null(f);
	cr_expect_eq(a.wall_total, (12 * 5985 + (uint64_t)k * copy_us) * US);
	int sev = f->severity;
	an_analysis_free(&a);
	return sev;
}

Test(findings, unpinned_copy_severity_at_its_exact_bounds)
{
	cr_expect_eq(upc_share_severity(2, 1890), 1, "5%% exactly: warning");
	cr_expect_eq(upc_share_severity(2, 1889), 0, "just under 5%%: info");
	cr_expect_eq(upc_share_severity(4, 7695), 2, "30%% exactly: critical");
	cr_expect_eq(upc_share_severity(4, 7694), 1, "just under 30%%: warning");
}

/*
 * A 4-byte pageable D2H copy behind a 4 ms kernel (PyTorch's .item()): the call
 * lasts the kernel plus the copy's 10 us, but the copy costs 10 us; the kernel's
 * time is not the copy's (its time share and GB/s would be absurd, its severity
 * critical).
 */
Test(findings, unpinned_copy_time_is_the_copy_not_the_wait_before_it)
{
	struct sim s;
	sim_init(&s);
	for (int i = 0; i < 12; i++) {
		sim_item_step(&s);
		s.m.ev[s.m.n - 2].api = SP_API_cudaMemcpy;
		cr_assert_geq(s.m.ev[s.m.n - 2].end_ns - s.m.ev[s.m.n - 2].begin_ns, 4000 * US, "the call waits");
		sim_sync(&s);
	}
	struct an_analysis a;
	run_free(&s, NULL, &a);
	cr_assert_eq(a.nit, 12);
	for (size_t i = 0; i < a.nit; i++) {
		cr_expect_eq(a.it[i].pageable_copies, 1);
		cr_expect_eq(a.it[i].pageable_ns, 10 * US, "iteration %zu: %lu ns", i,
			     (unsigned long)a.it[i].pageable_ns);
		cr_expect_geq(a.it[i].blocked[AN_BLK_D2H], 4000 * US, "the host was blocked in the call all along");
	}
	const struct an_result_finding *f = find(&a, AN_F_UNPINNED_COPY, NULL);
	cr_assert_not_null(f);
	cr_expect_eq(f->severity, 0, "10 us in 5 ms iterations, synchronous: info");
	for (int k = 0; k < f->nev; k++)
		if (!strcmp(f->ev[k].key, "achieved_gbps"))
			cr_expect(fabs(f->ev[k].num - 4.0 / 10000) < 1e-9, "achieved %g GB/s", f->ev[k].num);
	an_analysis_free(&a);
}

/*
 * sim_storm with a pageable copy: the input share is wait / wall, the copies'
 * share copy / wall, with wall = wait + copy + 5 + kernel (us). Returns the
 * kinds of the findings in their order, and the text report's.
 */
static void order_run(uint64_t wait_us, uint64_t copy_us, uint64_t kernel_us, int kinds[2], int text_kinds[2])
{
	struct sim s;
	sim_storm(&s, wait_us, copy_us, kernel_us);
	struct an_analysis a;
	run_free(&s, NULL, &a);
	cr_assert_eq(a.nfnd, 2);
	for (int k = 0; k < 2; k++)
		kinds[k] = a.fnd[k].kind;
	char *text = NULL;
	size_t len = 0;
	FILE *f = open_memstream(&text, &len);
	cr_assert_eq(report_text(f, &a, 0), 0);
	fclose(f);
	const char *sfs = strstr(text, "] small_file_storm"), *upc = strstr(text, "] unpinned_copy");
	cr_assert(sfs && upc, "%s", text);
	text_kinds[0] = sfs < upc ? AN_F_SMALL_FILE_STORM : AN_F_UNPINNED_COPY;
	text_kinds[1] = sfs < upc ? AN_F_UNPINNED_COPY : AN_F_SMALL_FILE_STORM;
	free(text);
	an_analysis_free(&a);
}

static void expect_order(uint64_t wait_us, uint64_t copy_us, uint64_t kernel_us, int first, const char *why)
{
	int kinds[2], text[2];
	order_run(wait_us, copy_us, kernel_us, kinds, text);
	int second = first == AN_F_SMALL_FILE_STORM ? AN_F_UNPINNED_COPY : AN_F_SMALL_FILE_STORM;
	cr_expect(kinds[0] == first && kinds[1] == second, "%s: findings %s, %s", why, an_finding_name[kinds[0]],
		  an_finding_name[kinds[1]]);
	cr_expect(text[0] == first && text[1] == second, "%s: text report %s, %s", why, an_finding_name[text[0]],
		  an_finding_name[text[1]]);
}

/*
 * What to fix first comes first, in the JSON and the text report: the most
 * severe finding, then the one that costs the most wall time.
 */
Test(findings, findings_come_in_the_order_to_fix_them)
{
	/* input 500 of 9705 us (5%: info); an Async copy from pageable memory: warning */
	expect_order(500, 200, 9000, AN_F_UNPINNED_COPY, "info storm, warning copy");
	/* both warnings: input 2000 of 9205 us (22%) against copies of 200 us (2%) */
	expect_order(2000, 200, 7000, AN_F_SMALL_FILE_STORM, "storm costs 2000 us, copies 200");
	/* both warnings: input 1200 of 10205 us (12%) against copies of 3000 us (29%) */
	expect_order(1200, 3000, 6000, AN_F_UNPINNED_COPY, "storm costs 1200 us, copies 3000");
	/* critical storm, input 4000 of 7205 us (56%), against copies of 3000 (42%: critical too) */
	expect_order(4000, 3000, 200, AN_F_SMALL_FILE_STORM, "both critical, storm costs more");
}

/* Iteration 6 fails an allocation (free given), then frees `nfree` 24 MiB segments and retries. */
static void frag_run(struct an_analysis *a, uint64_t request, uint64_t free_at_fail, int nfree)
{
	struct sim s;
	sim_init(&s);
	uint64_t live = 0;
	for (int k = 0; k < 16; k++)
		alloc_ev(&s, SP_K_ALLOC, 0x1000 + (uint64_t)k, 24 * MiB, &live);
	for (int i = 0; i < 12; i++) {
		sim_step(&s, 1000 * US);
		if (i == 6) {
			struct sp_event *e = add(&s, SP_K_ALLOC_FAILED, SP_API_cudaMalloc, s.t, s.t + US);
			e->f[SP_F_BYTES] = request;
			e->f[SP_F_FREE] = free_at_fail;
			e->f[SP_F_TOTAL] = 1024 * MiB;
			e->f[SP_F_SITE] = an_memsrc_string(&s.m, "trainer!fragment+0x42");
			s.t += 2 * US;
			for (int k = 0; k < nfree; k++)
				alloc_ev(&s, SP_K_FREE, 0x1000 + (uint64_t)k, 24 * MiB, &live);
			alloc_ev(&s, SP_K_ALLOC, 0x9000, request, &live);
			alloc_ev(&s, SP_K_FREE, 0x9000, request, &live);
			for (int k = 0; k < nfree; k++)
				alloc_ev(&s, SP_K_ALLOC, 0x1000 + (uint64_t)k, 24 * MiB, &live);
		}
		sim_copy(&s, SP_DIR_H2D, 1 << 20, 500 * US, 0);
		sim_compute(&s, 2000 * US);
	}
	run_free(&s, NULL, a);
}

Test(findings, alloc_fragmentation_failure_with_free_memory_is_critical)
{
	struct an_analysis a;
	frag_run(&a, 33 * MiB, 33 * MiB, 0);
	const struct an_result_finding *f = find(&a, AN_F_ALLOC_FRAGMENTATION, "failed_with_free_memory");
	cr_assert(f);
	cr_expect_eq(f->severity, 2);
	cr_expect_eq(f->first_iteration, 6);
	cr_expect_eq(f->nsites, 1);
	cr_expect_str_eq(f->sites[0], "trainer!fragment+0x42");
	cr_expect_null(find(&a, AN_F_ALLOC_FRAGMENTATION, "allocator_flush"));
	an_analysis_free(&a);
}

Test(findings, alloc_fragmentation_silent_when_free_is_below_the_request)
{
	struct an_analysis a;
	frag_run(&a, 33 * MiB, 33 * MiB - 1, 0);
	cr_expect_null(find(&a, AN_F_ALLOC_FRAGMENTATION, "failed_with_free_memory"));
	an_analysis_free(&a);
}

Test(findings, alloc_fragmentation_flush_fires_at_8_frees)
{
	struct an_analysis a;
	frag_run(&a, 33 * MiB, 0, 8);
	const struct an_result_finding *f = find(&a, AN_F_ALLOC_FRAGMENTATION, "allocator_flush");
	cr_assert(f);
	cr_expect_eq(f->first_iteration, 6);
	cr_expect_eq(f->last_iteration, 6);
	an_analysis_free(&a);
	frag_run(&a, 33 * MiB, 0, 7);
	cr_expect_null(find(&a, AN_F_ALLOC_FRAGMENTATION, "allocator_flush"));
	an_analysis_free(&a);
}

/*
 * (b) without a failed allocation: in iteration 6 the allocator releases 8 of its
 * `segments` cached 24 MiB segments at once and allocates again. A flush when
 * the burst releases >= half the live bytes (flush_min_fraction).
 */
static const struct an_result_finding *flush_run(struct an_analysis *a, int segments)
{
	struct sim s;
	sim_init(&s);
	uint64_t live = 0;
	for (int k = 0; k < segments; k++)
		alloc_ev(&s, SP_K_ALLOC, 0x1000 + (uint64_t)k, 24 * MiB, &live);
	for (int i = 0; i < 12; i++) {
		sim_step(&s, 1000 * US);
		if (i == 6) {
			for (int k = 0; k < 8; k++)
				alloc_ev(&s, SP_K_FREE, 0x1000 + (uint64_t)k, 24 * MiB, &live);
			for (int k = 0; k < 8; k++)
				alloc_ev(&s, SP_K_ALLOC, 0x1000 + (uint64_t)k, 24 * MiB, &live);
		}
		sim_compute(&s, 2000 * US);
	}
	run_free(&s, NULL, a);
	return find(a, AN_F_ALLOC_FRAGMENTATION, "allocator_flush");
}

Test(findings, alloc_fragmentation_flush_without_failure_needs_half_the_live_bytes)
{
	struct an_analysis a;
	const struct an_result_finding *f = flush_run(&a, 16); /* 8 of 16: 50% */
	cr_assert_not_null(f);
	cr_expect_eq(f->first_iteration, 6);
	cr_expect_eq(f->last_iteration, 6);
	cr_expect_null(find(&a, AN_F_ALLOC_FRAGMENTATION, "failed_with_free_memory"));
	an_analysis_free(&a);
	cr_expect_null(flush_run(&a, 17), "8 of 17 segments: 47%"); /* just under */
	an_analysis_free(&a);
}

/* A device reset as the preload records it: one free of everything on dev (dptr 0), live bytes 0. */
static void reset_ev(struct sim *s, unsigned dev, uint64_t *live)
{
	struct sp_event *e = add(s, SP_K_FREE, SP_API_cudaDeviceReset, s->t, s->t + US);
	e->f[SP_F_DPTR] = 0;
	e->f[SP_F_BYTES] = *live;
	e->f[SP_F_LIVE] = 0;
	e->f[SP_F_DEVICE] = dev;
	*live = 0;
	s->t += 2 * US;
}

/*
 * As flush_run(16) (8 of 16 segments released, then allocations again), but
 * the 8th release is a device reset after 7 frees: the program's doing, not
 * an allocator's flush.
 */
Test(findings, device_reset_is_no_allocator_flush)
{
	struct sim s;
	sim_init(&s);
	uint64_t live = 0;
	for (int k = 0; k < 16; k++)
		alloc_ev(&s, SP_K_ALLOC, 0x1000 + (uint64_t)k, 24 * MiB, &live);
	for (int i = 0; i < 12; i++) {
		sim_step(&s, 1000 * US);
		if (i == 6) {
			for (int k = 0; k < 7; k++)
				alloc_ev(&s, SP_K_FREE, 0x1000 + (uint64_t)k, 24 * MiB, &live);
			reset_ev(&s, 0, &live);
			for (int k = 0; k < 8; k++)
				alloc_ev(&s, SP_K_ALLOC, 0x1000 + (uint64_t)k, 24 * MiB, &live);
		}
		sim_compute(&s, 2000 * US);
	}
	struct an_analysis a;
	run_free(&s, NULL, &a);
	cr_expect_null(find(&a, AN_F_ALLOC_FRAGMENTATION, "allocator_flush"), "a device reset taken for a flush");
	cr_assert_eq(a.nit, 12);
	cr_expect_eq(a.it[5].device_bytes_peak, 16 * 24 * MiB);
	cr_expect_eq(a.it[7].device_bytes_peak, 8 * 24 * MiB, "after the reset: the 8 segments allocated again");
	an_analysis_free(&a);
}

/* Iteration 5 allocates `extra` bytes in `sizes` distinct sizes above a steady 64 MiB and frees them. */
static void peak_run(struct an_analysis *a, uint64_t extra, int sizes)
{
	struct sim s;
	sim_init(&s);
	uint64_t live = 0;
	alloc_ev(&s, SP_K_ALLOC, 0x10, 64 * MiB, &live);
	for (int i = 0; i < 12; i++) {
		sim_step(&s, 1000 * US);
		if (i == 5) {
			uint64_t left = extra, b[8];
			for (int k = 0; k < sizes; k++) {
				b[k] = k + 1 < sizes ? extra / (uint64_t)sizes + (uint64_t)k * 512 : left;
				alloc_ev(&s, SP_K_ALLOC, 0x100 + (uint64_t)k, b[k], &live);
				left -= b[k];
			}
			for (int k = 0; k < sizes; k++)
				alloc_ev(&s, SP_K_FREE, 0x100 + (uint64_t)k, b[k], &live);
		}
		sim_compute(&s, 2000 * US);
	}
	run_free(&s, NULL, a);
}

Test(findings, fragmentation_peak_fires_at_1_5x_with_churn)
{
	struct an_analysis a;
	peak_run(&a, 32 * MiB, 4);
	cr_assert_eq(a.nit, 12);
	cr_expect_eq(a.it[5].device_bytes_peak, 96 * MiB);
	cr_expect_eq(a.it[4].device_bytes_peak, 64 * MiB);
	const struct an_result_finding *f = find(&a, AN_F_ALLOC_FRAGMENTATION, "fragmentation_peak");
	cr_assert(f);
	cr_expect_eq(f->first_iteration, 5);
	cr_expect_eq(f->last_iteration, 5);
	an_analysis_free(&a);
}

Test(findings, fragmentation_peak_silent_just_under)
{
	struct an_analysis a;
	peak_run(&a, 32 * MiB - 4096, 4); /* 1.4999x */
	cr_expect_null(find(&a, AN_F_ALLOC_FRAGMENTATION, "fragmentation_peak"));
	an_analysis_free(&a);
	peak_run(&a, 32 * MiB, 3); /* only 3 sizes: no churn */
	cr_expect_null(find(&a, AN_F_ALLOC_FRAGMENTATION, "fragmentation_peak"));
	an_analysis_free(&a);
}

/*
 * `iters` iterations each leaking `leak` bytes above a `base` allocated before
 * them, on a device of `capacity` bytes; odd iterations also hold a temporary
 * block of `wobble` bytes, freed within the iteration (noise on the peak).
 * Per-iteration peak: base + (i + 1) * leak + (i odd ? wobble : 0).
 */
static void growth_run(struct an_analysis *a, const struct an_options *o, int iters, uint64_t base, uint64_t leak,
		       uint64_t wobble, uint64_t capacity)
{
	struct sim s;
	sim_init(&s);
	s.m.hdr.ndevices = 1;
	s.m.hdr.devices[0].mem_bytes = capacity;
	uint64_t live = 0;
	alloc_ev(&s, SP_K_ALLOC, 0x10, base, &live);
	uint32_t site = an_memsrc_string(&s.m, "trainer!leak+0x10");
	for (int i = 0; i < iters; i++) {
		sim_step(&s, 1000 * US);
		live += leak;
		struct sp_event *e = add(&s, SP_K_ALLOC, SP_API_cudaMalloc, s.t, s.t + US);
		e->f[SP_F_DPTR] = 0x1000 + (uint64_t)i;
		e->f[SP_F_BYTES] = leak;
		e->f[SP_F_LIVE] = live;
		e->f[SP_F_SITE] = site;
		s.t += 2 * US;
		if (i % 2 && wobble) {
			alloc_ev(&s, SP_K_ALLOC, 0x100000 + (uint64_t)i, wobble, &live);
			alloc_ev(&s, SP_K_FREE, 0x100000 + (uint64_t)i, wobble, &live);
		}
		sim_compute(&s, 2000 * US);
	}
	run_free(&s, o, a);
}

static void leak_run(struct an_analysis *a, int iters, uint64_t leak, uint64_t capacity)
{
	growth_run(a, NULL, iters, 200 * MiB, leak, 0, capacity);
}

/* R^2 of the least-squares line through growth_run's peaks, computed here from their formula. */
static double growth_r2(int n, uint64_t base, uint64_t leak, uint64_t wobble)
{
	double y[64], mx = 0, my = 0, sxx = 0, sxy = 0, syy = 0;
	for (int i = 0; i < n; i++) {
		y[i] = (double)(base + (uint64_t)(i + 1) * leak + (i % 2 ? wobble : 0));
		mx += i;
		my += y[i];
	}
	mx /= n;
	my /= n;
	for (int i = 0; i < n; i++) {
		sxx += (i - mx) * (i - mx);
		sxy += (i - mx) * (y[i] - my);
		syy += (y[i] - my) * (y[i] - my);
	}
	return sxy * sxy / (sxx * syy);
}

Test(findings, memory_growth_fires_and_is_critical_near_capacity)
{
	struct an_analysis a;
	/* 10 iterations of +2 MiB: growth 18 MiB over the fit (>= 16 MiB, >= 5% of 202 MiB)... */
	leak_run(&a, 10, 2 * MiB, 1024 * MiB);
	const struct an_result_finding *f = find(&a, AN_F_MEMORY_GROWTH, NULL);
	cr_assert(f);
	cr_expect_eq(f->first_iteration, 0);
	cr_expect_eq(f->last_iteration, 9);
	/* ...and 1 GiB is ~400 iterations away: critical */
	cr_expect_eq(f->severity, 2);
	cr_expect_eq(f->nsites, 1);
	cr_expect_str_eq(f->sites[0], "trainer!leak+0x10");
	an_analysis_free(&a);
}

/*
 * A leak on device 0 (as leak_run) while device 1 gets a block in iteration
 * 3 that a reset of device 1 releases: the growth's sites are the leak's
 * only, and device 0's books are untouched by device 1's reset.
 */
Test(findings, device_reset_releases_the_blocks_of_its_device_only)
{
	struct sim s;
	sim_init(&s);
	s.m.hdr.ndevices = 2;
	s.m.hdr.devices[0].mem_bytes = s.m.hdr.devices[1].mem_bytes = 1024 * MiB;
	uint64_t live = 0, live1 = 0;
	alloc_ev(&s, SP_K_ALLOC, 0x10, 200 * MiB, &live);
	uint32_t site = an_memsrc_string(&s.m, "trainer!leak+0x10"), gone = an_memsrc_string(&s.m, "trainer!gone+0x20");
	for (int i = 0; i < 10; i++) {
		sim_step(&s, 1000 * US);
		live += 2 * MiB;
		struct sp_event *e = add(&s, SP_K_ALLOC, SP_API_cudaMalloc, s.t, s.t + US);
		e->f[SP_F_DPTR] = 0x1000 + (uint64_t)i;
		e->f[SP_F_BYTES] = 2 * MiB;
		e->f[SP_F_LIVE] = live;
		e->f[SP_F_SITE] = site;
		s.t += 2 * US;
		if (i == 3) {
			live1 = 4096;
			e = add(&s, SP_K_ALLOC, SP_API_cudaMalloc, s.t, s.t + US);
			e->f[SP_F_DPTR] = 0x900000;
			e->f[SP_F_BYTES] = live1;
			e->f[SP_F_LIVE] = live1;
			e->f[SP_F_SITE] = gone;
			e->f[SP_F_DEVICE] = 1;
			s.t += 2 * US;
			reset_ev(&s, 1, &live1);
		}
		sim_compute(&s, 2000 * US);
	}
	struct an_analysis a;
	run_free(&s, NULL, &a);
	const struct an_result_finding *f = find(&a, AN_F_MEMORY_GROWTH, NULL);
	cr_assert(f);
	cr_expect_eq(f->nsites, 1, "%d sites: the reset's block is still live", f->nsites);
	cr_expect_str_eq(f->sites[0], "trainer!leak+0x10");
	cr_expect_eq(a.it[9].device_bytes_peak, 220 * MiB);
	an_analysis_free(&a);
}

Test(findings, memory_growth_silent_just_under)
{
	struct an_analysis a;
	leak_run(&a, 9, 4 * MiB, 1024 * MiB); /* 9 iterations */
	cr_expect_null(find(&a, AN_F_MEMORY_GROWTH, NULL));
	an_analysis_free(&a);
	leak_run(&a, 10, 16 * MiB / 9 - 4096, 1024 * MiB); /* growth just under 16 MiB */
	cr_expect_null(find(&a, AN_F_MEMORY_GROWTH, NULL));
	an_analysis_free(&a);
}

/* A noisy rise: silent when R^2 is under min_r2, on each side of the R^2 this data has. */
Test(findings, memory_growth_silent_when_r2_is_just_under)
{
	struct an_analysis a;
	double r2 = growth_r2(20, 200 * MiB, 2 * MiB, 13 * MiB);
	cr_assert(r2 > 0.7 && r2 < 0.8, "the test's data: R^2 %.4f", r2);
	growth_run(&a, NULL, 20, 200 * MiB, 2 * MiB, 13 * MiB, 1024 * MiB); /* default min_r2 0.8 */
	cr_expect_null(find(&a, AN_F_MEMORY_GROWTH, NULL), "R^2 %.4f < 0.8", r2);
	an_analysis_free(&a);
	struct an_options o;
	an_options_init(&o);
	o.threshold[AN_T_MG_MIN_R2] = r2 - 0.001;
	growth_run(&a, &o, 20, 200 * MiB, 2 * MiB, 13 * MiB, 1024 * MiB);
	const struct an_result_finding *f = find(&a, AN_F_MEMORY_GROWTH, NULL);
	cr_assert_not_null(f, "R^2 %.4f >= %.4f", r2, r2 - 0.001);
	for (int k = 0; k < f->nev; k++)
		if (!strcmp(f->ev[k].key, "r2"))
			cr_expect(fabs(f->ev[k].num - r2) < 1e-6, "evidence r2 %.6f, the data's %.6f", f->ev[k].num,
				  r2);
	an_analysis_free(&a);
	o.threshold[AN_T_MG_MIN_R2] = r2 + 0.001;
	growth_run(&a, &o, 20, 200 * MiB, 2 * MiB, 13 * MiB, 1024 * MiB);
	cr_expect_null(find(&a, AN_F_MEMORY_GROWTH, NULL));
	an_analysis_free(&a);
}

/* Growth of 18 MiB (>= 16 MiB) over 10 iterations: it must also be >= 5% of where it started. */
Test(findings, memory_growth_silent_under_5_percent_of_the_start)
{
	struct an_analysis a;
	/* starts at 300 + 2 MiB: 5% is 15.1 MiB */
	growth_run(&a, NULL, 10, 300 * MiB, 2 * MiB, 0, 65536 * MiB);
	cr_expect_not_null(find(&a, AN_F_MEMORY_GROWTH, NULL));
	an_analysis_free(&a);
	/* starts at 400 + 2 MiB: 5% is 20.1 MiB */
	growth_run(&a, NULL, 10, 400 * MiB, 2 * MiB, 0, 65536 * MiB);
	cr_expect_null(find(&a, AN_F_MEMORY_GROWTH, NULL));
	an_analysis_free(&a);
}

/* Is there a memory_growth finding, and of which severity (-1: none)? */
static int growth_severity(int iters, uint64_t base, uint64_t leak, uint64_t capacity)
{
	struct an_analysis a;
	growth_run(&a, NULL, iters, base, leak, 0, capacity);
	const struct an_result_finding *f = find(&a, AN_F_MEMORY_GROWTH, NULL);
	int sev = f ? f->severity : -1;
	an_analysis_free(&a);
	return sev;
}

/*
 * Exactly at each bound, and just under it. Peaks base + (i + 1) leak, i < n:
 * the fitted growth is (n - 1) leak, from a fitted start of base + leak, and the
 * last fitted point, base + n leak, reaches the capacity after (capacity - base -
 * n leak) / leak more iterations.
 */
Test(findings, memory_growth_at_its_exact_bounds)
{
	/* growth 16 MiB exactly (17 iterations of 1 MiB), then 16 MiB - 16 bytes */
	cr_expect_eq(growth_severity(17, 200 * MiB, MiB, 65536 * MiB), 1);
	cr_expect_eq(growth_severity(17, 200 * MiB, MiB - 1, 65536 * MiB), -1);
	/* growth 18 MiB, 5% of a start of 360 MiB exactly; then of 360 MiB + 4 KiB */
	cr_expect_eq(growth_severity(10, 358 * MiB, 2 * MiB, 65536 * MiB), 1);
	cr_expect_eq(growth_severity(10, 358 * MiB + 4096, 2 * MiB, 65536 * MiB), -1);
	/* 10 iterations of 2 MiB end at 220 MiB: capacity 1000 iterations away exactly, then 1001 */
	cr_expect_eq(growth_severity(10, 200 * MiB, 2 * MiB, 2220 * MiB), 2);
	cr_expect_eq(growth_severity(10, 200 * MiB, 2 * MiB, 2222 * MiB), 1);
}

/*
 * A trainer on two devices of 64 GiB each: `held` MiB on device 0, `base` MiB on
 * device 1 where 24 MiB leak in each of 100 iterations. The peaks are the two
 * devices' sum; the leak exhausts device 1 after (65536 - base - 2400) / 24
 * more iterations, whatever device 0 holds: its memory_growth finding (-1: none),
 * and the projected exhaustion in *exhaust.
 */
static int two_device_growth(uint64_t held, uint64_t base, double *exhaust)
{
	struct sim s;
	sim_init(&s);
	s.m.hdr.ndevices = 2;
	s.m.hdr.devices[0].mem_bytes = s.m.hdr.devices[1].mem_bytes = 65536 * MiB;
	uint64_t live0 = 0, live1 = 0;
	alloc_ev(&s, SP_K_ALLOC, 0x10, held * MiB, &live0);
	alloc_ev(&s, SP_K_ALLOC, 0x20, base * MiB, &live1);
	s.m.ev[s.m.n - 1].f[SP_F_DEVICE] = 1;
	for (int i = 0; i < 100; i++) {
		sim_step(&s, 1000 * US);
		alloc_ev(&s, SP_K_ALLOC, 0x1000 + (uint64_t)i, 24 * MiB, &live1);
		s.m.ev[s.m.n - 1].f[SP_F_DEVICE] = 1;
		sim_compute(&s, 2000 * US);
	}
	struct an_analysis a;
	run_free(&s, NULL, &a);
	cr_expect_eq(a.device_capacity, 2 * 65536 * MiB, "the two devices' memory");
	cr_assert_eq(a.nit, 100);
	cr_expect_eq(a.it[99].device_bytes_peak, (held + base + 2400) * MiB);
	const struct an_result_finding *f = find(&a, AN_F_MEMORY_GROWTH, NULL);
	int sev = f ? f->severity : -1;
	*exhaust = -2;
	for (int k = 0; f && k < f->nev; k++)
		if (!strcmp(f->ev[k].key, "projected_exhaustion_iteration"))
			*exhaust = f->ev[k].num;
	an_analysis_free(&a);
	return sev;
}

Test(findings, memory_growth_projection_on_the_device_that_grows)
{
	double x;
	/* 30 GiB on device 0 + 12.3 GiB on device 1 exceed one device's 64 GiB sooner, not device 1 */
	cr_expect_eq(two_device_growth(30720, 10240, &x), 1, "device 1 is 2204 iterations from full: warning");
	cr_expect_eq(x, 99 + 2204, "exhaustion at %g", x);
	/* 1 GiB on device 0, device 1 fills in 924 iterations although 84 GiB of 128 are free */
	cr_expect_eq(two_device_growth(1024, 40960, &x), 2, "device 1 is 924 iterations from full: critical");
	cr_expect_eq(x, 99 + 924, "exhaustion at %g", x);
}

Test(findings, memory_growth_warning_when_capacity_is_far)
{
	struct an_analysis a;
	/* 20 iterations of +1 MiB: growth 19 MiB; 64 GiB is ~65000 iterations away */
	leak_run(&a, 20, 1 * MiB, 65536 * MiB);
	const struct an_result_finding *f = find(&a, AN_F_MEMORY_GROWTH, NULL);
	cr_assert(f);
	cr_expect_eq(f->severity, 1);
	an_analysis_free(&a);
}

Test(findings, thresholds_are_overridable_and_validated)
{
	struct an_options o;
	char err[256];
	an_options_init(&o);
	cr_expect_eq(o.threshold[AN_T_SFS_MIN_META], 100);
	cr_expect_eq(an_options_set_threshold(&o, "small_file_storm.min_metadata_ops=20", err, sizeof(err)), 0);
	cr_expect_eq(o.threshold[AN_T_SFS_MIN_META], 20);
	cr_expect_eq(an_options_set_threshold(&o, "nope=1", err, sizeof(err)), -1);
	cr_expect(strstr(err, "unknown threshold"));
	cr_expect_eq(an_options_set_threshold(&o, "memory_growth.min_r2=abc", err, sizeof(err)), -1);
	cr_expect_eq(an_options_set_threshold(&o, "memory_growth.min_r2", err, sizeof(err)), -1);
}

/* ------------------------------------------------------- worker_restart */

/*
 * 12 iterations, epochs of 4; each epoch served by 2 loader workers forked at
 * its start (restart = 1: new workers every epoch, whose first batch takes
 * `startup` us of input wait instead of 4000) or by the same 2 workers all run
 * long (restart = 0). Each worker reads one file per iteration.
 */
static void restart_run_old(struct an_analysis *a, int restart, uint64_t startup, int old_linger)
{
	struct sim s;
	sim_init(&s);
	uint32_t path = an_memsrc_string(&s.m, "/data/train/sample.bin");
	int32_t pids[2] = {0, 0};
	for (int i = 0; i < 12; i++) {
		if (i == 0 || (restart && i % 4 == 0)) {
			for (int k = 0; old_linger && i && k < 2; k++) /* the old workers' last record, after the new ones start */
				an_memsrc_add(&s.m, SP_K_LOADER_WAIT, SP_API_read, pids[k], pids[k], s.t + 1000 * US,
					      s.t + 2000 * US)
				    ->f[SP_F_FD_TYPE] = SP_FDTYPE_PIPE;
			for (int k = 0; k < 2; k++) {
				pids[k] = WPID + 10 * (i / 4) + k;
				struct sp_event *e = add(&s, SP_K_FORK, 0, s.t - 10, s.t - 10);
				e->f[SP_F_PID] = (uint64_t)pids[k];
			}
		}
		uint64_t start = s.t;
		add(&s, SP_K_STEP, SP_API_stepprof_step, s.t, s.t);
		uint64_t wait = restart && i % 4 == 0 && i ? startup * US : 4000 * US;
		for (int k = 0; k < 2; k++) {
			uint64_t t = start + 100 * US + (uint64_t)k * 300 * US;
			struct sp_event *e = an_memsrc_add(&s.m, SP_K_OPEN, SP_API_open, pids[k], pids[k], t, t + 50 * US);
			e->f[SP_F_PATH] = path;
			e->f[SP_F_FD] = 5;
			e = an_memsrc_add(&s.m, SP_K_READ, SP_API_read, pids[k], pids[k], t + 50 * US, t + 150 * US);
			e->f[SP_F_FD] = 5;
			e->f[SP_F_BYTES] = 65536;
			e->f[SP_F_FD_TYPE] = SP_FDTYPE_FILE;
			e = an_memsrc_add(&s.m, SP_K_CLOSE, SP_API_close, pids[k], pids[k], t + 150 * US, t + 160 * US);
			e->f[SP_F_FD] = 5;
		}
		sim_input(&s, wait);
		sim_batch(&s);
	}
	run_free(&s, NULL, a);
}

static void restart_run(struct an_analysis *a, int restart, uint64_t startup)
{
	restart_run_old(a, restart, startup, 0);
}

Test(findings, worker_restart_fires_when_each_epoch_forks_new_workers)
{
	struct an_analysis a;
	restart_run(&a, 1, 40000); /* 36 ms more at iterations 4 and 8, over a ~12 ms median */
	cr_assert_eq(a.nit, 12);
	const struct an_result_finding *f = find(&a, AN_F_WORKER_RESTART, NULL);
	cr_assert(f, "no worker_restart");
	cr_expect_eq(f->first_iteration, 4);
	cr_expect_eq(f->last_iteration, 8);
	cr_expect_eq(f->iterations, 2);
	double ep = -1, rs = -1, wpe = -1, ms = -1, share = -1;
	const char *list = NULL;
	for (int k = 0; k < f->nev; k++) {
		const struct an_evidence *e = &f->ev[k];
		if (!strcmp(e->key, "epochs"))
			ep = e->num;
		else if (!strcmp(e->key, "restarts"))
			rs = e->num;
		else if (!strcmp(e->key, "workers_per_epoch"))
			wpe = e->num;
		else if (!strcmp(e->key, "startup_ms"))
			ms = e->num;
		else if (!strcmp(e->key, "time_share"))
			share = e->num;
		else if (!strcmp(e->key, "restart_iterations"))
			list = e->str;
	}
	cr_expect_eq(ep, 3);
	cr_expect_eq(rs, 2);
	cr_expect_eq(wpe, 2);
	cr_expect(fabs(ms - 36.0) < 0.5, "startup_ms %.3f, the restarts' extra input wait is 36 ms", ms);
	/* 72 ms more over 12 iterations of ~12.1 ms plus those 72: ~33% */
	cr_expect(share > 0.30 && share < 0.36, "time_share %.3f", share);
	cr_expect_eq(f->severity, 2, "critical from 20%%");
	cr_expect_str_eq(list ? list : "", "4,8");
	cr_expect(strstr(f->advice, "persistent_workers=True"), "%s", f->advice);
	an_analysis_free(&a);
}

Test(findings, worker_restart_silent_with_persistent_workers)
{
	struct an_analysis a;
	restart_run(&a, 0, 40000);
	cr_assert_eq(a.nit, 12);
	cr_expect_null(find(&a, AN_F_WORKER_RESTART, NULL));
	an_analysis_free(&a);
}

/* New workers every epoch that cost nothing visible: said, as info only. */
Test(findings, worker_restart_is_info_when_the_restarts_cost_little)
{
	struct an_analysis a;
	restart_run(&a, 1, 4300); /* 0.3 ms more: 0.4% of the wall time */
	const struct an_result_finding *f = find(&a, AN_F_WORKER_RESTART, NULL);
	cr_assert(f, "no worker_restart");
	cr_expect_eq(f->severity, 0);
	an_analysis_free(&a);
}

/*
 * A new iterator's workers forked while the old iterator's still run (an
 * iterator dropped before its end, replaced by the next): a new generation all
 * the same, the new workers starting an epoch after the ones before them.
 */
Test(findings, worker_restart_fires_when_new_workers_start_before_the_old_ones_end)
{
	struct an_analysis a;
	restart_run_old(&a, 1, 40000, 1);
	const struct an_result_finding *f = find(&a, AN_F_WORKER_RESTART, NULL);
	cr_assert(f, "no worker_restart");
	cr_expect_eq(f->first_iteration, 4);
	cr_expect_eq(f->last_iteration, 8);
	an_analysis_free(&a);
}

/* ---------------------------------- the input split, loader_cpu_bound, loader_starved */

/*
 * 12 reference iterations (wall 11100 us, the first 4000 of them the training
 * thread's wait for a batch, the GPU idle) and one loader worker whose time
 * over each iteration is known: a wait for its next index of wt_us from the
 * iteration's start, then `stats` stat calls of io_us / stats each (file I/O),
 * cpu_us of CPU time outside them, and a CPU_TIME sample at each iteration's
 * end (none when !samples). Each iteration is one segment: the training
 * thread's wait is the worker's wait where they overlap, the rest is split in
 * io_us, cpu_us and what is left over 11100 - wt_us.
 */
static void split_run(struct an_analysis *a, uint64_t io_us, int stats, uint64_t cpu_us, uint64_t wt_us, int samples)
{
	struct sim s;
	sim_init(&s);
	sim_fork_worker(&s);
	uint32_t path = an_memsrc_string(&s.m, "/data/train/sample.jpg");
	uint64_t cpu = 0;
	if (samples)
		an_memsrc_add(&s.m, SP_K_CPU_TIME, 0, WPID, WPID, s.t, s.t)->f[SP_F_VALUE] = 0;
	for (int i = 0; i < 12; i++) {
		uint64_t t0 = s.t;
		sim_iteration(&s, 2);
		cr_assert_eq(s.t - t0, 11100 * US);
		for (int k = 0; k < stats; k++) {
			uint64_t b = t0 + wt_us * US + (uint64_t)k * io_us * US / (uint64_t)stats;
			struct sp_event *e = an_memsrc_add(&s.m, SP_K_STAT, SP_API_stat, WPID, WPID, b,
							   b + io_us * US / (uint64_t)stats);
			e->f[SP_F_PATH] = path;
			e->f[SP_F_BYTES] = 16384;
		}
		if (wt_us)
			an_memsrc_add(&s.m, SP_K_LOADER_WAIT, SP_API_read, WPID, WPID, t0, t0 + wt_us * US)
			    ->f[SP_F_FD_TYPE] = SP_FDTYPE_PIPE;
		cpu += (io_us + cpu_us) * US; /* file calls on the page cache burn CPU time too */
		if (samples)
			an_memsrc_add(&s.m, SP_K_CPU_TIME, 0, WPID, WPID, s.t, s.t)->f[SP_F_VALUE] = cpu;
	}
	run_free(&s, NULL, a);
}

static double evidence(const struct an_result_finding *f, const char *key)
{
	for (int k = 0; f && k < f->nev; k++)
		if (!strcmp(f->ev[k].key, key))
			return f->ev[k].num;
	return -1;
}

/*
 * Every iteration's 4000 us of input: 2220 of the worker's wait, then 1780 in
 * the worker's shares of its 8880 us outside it: 1110 of I/O, 5550 of CPU work.
 */
Test(findings, input_split_follows_the_worker_s_time)
{
	struct an_analysis a;
	split_run(&a, 1110, 10, 5550, 2220, 1);
	cr_assert_eq(a.nit, 12);
	for (size_t i = 0; i < a.nit; i++) {
		const struct an_iter *it = &a.it[i];
		cr_expect_eq(it->bd[AN_INPUT], 4000 * US);
		cr_expect_eq(it->split[AN_SPLIT_IO] + it->split[AN_SPLIT_CPU] + it->split[AN_SPLIT_WAIT], it->bd[AN_INPUT],
			     "iteration %zu: the split sums to the input", i);
		cr_expect(llabs((long long)it->split[AN_SPLIT_IO] - 222500) <= 1000, "iteration %zu: io %llu ns, 222.5 us",
			  i, (unsigned long long)it->split[AN_SPLIT_IO]);
		cr_expect(llabs((long long)it->split[AN_SPLIT_CPU] - 1112500) <= 1000,
			  "iteration %zu: cpu %llu ns, 1112.5 us", i, (unsigned long long)it->split[AN_SPLIT_CPU]);
		cr_expect_eq(it->split_unsampled, 0);
	}
	cr_expect_eq(a.loaders.workers, 1);
	an_analysis_free(&a);
}

/* The training thread reading its own files: that input is file I/O, whatever a worker does. */
Test(findings, input_split_of_the_training_thread_s_own_reads_is_io)
{
	struct sim s;
	struct an_analysis a;
	sim_init(&s);
	uint32_t path = an_memsrc_string(&s.m, "/data/train/sample.jpg");
	for (int i = 0; i < 6; i++) {
		add(&s, SP_K_STEP, SP_API_stepprof_step, s.t, s.t);
		struct sp_event *e = add(&s, SP_K_OPEN, SP_API_open, s.t, s.t + 1000 * US);
		e->f[SP_F_PATH] = path;
		e->f[SP_F_FD] = 7;
		s.t += 1000 * US;
		e = add(&s, SP_K_READ, SP_API_read, s.t, s.t + 2000 * US);
		e->f[SP_F_FD] = 7;
		e->f[SP_F_BYTES] = 1 << 20;
		e->f[SP_F_FD_TYPE] = SP_FDTYPE_FILE;
		s.t += 2000 * US;
		sim_batch(&s);
	}
	run_free(&s, NULL, &a);
	cr_assert_eq(a.nit, 6);
	for (size_t i = 0; i < a.nit; i++) {
		cr_expect_eq(a.it[i].bd[AN_INPUT], 3000 * US);
		cr_expect_eq(a.it[i].split[AN_SPLIT_IO], 3000 * US, "iteration %zu", i);
	}
	cr_expect_null(find(&a, AN_F_LOADER_CPU_BOUND, NULL));
	cr_expect_null(find(&a, AN_F_LOADER_STARVED, NULL));
	an_analysis_free(&a);
}

Test(findings, loader_cpu_bound_fires_when_workers_compute)
{
	struct an_analysis a;
	split_run(&a, 555, 5, 8880, 100, 1);
	const struct an_result_finding *f = find(&a, AN_F_LOADER_CPU_BOUND, NULL);
	cr_assert(f, "no loader_cpu_bound");
	cr_expect_eq(f->severity, 2, "input is 36%% of the wall time");
	/* 100 us of the worker's wait, then 3900 us of which 8880 / 11000 is CPU work */
	cr_expect(fabs(evidence(f, "input_cpu_fraction") - 3900 * 8880 / 11000.0 / 4000) < 0.01, "cpu %.3f",
		  evidence(f, "input_cpu_fraction"));
	cr_expect(fabs(evidence(f, "worker_cpu_utilisation") - (555 + 8880) / 11100.0) < 0.01);
	cr_expect(fabs(evidence(f, "cpu_ms_per_batch") - 9.435) < 0.01, "%.3f", evidence(f, "cpu_ms_per_batch"));
	cr_expect_eq(evidence(f, "workers"), 1);
	cr_expect_eq(f->iterations, 12);
	cr_expect_null(find(&a, AN_F_LOADER_STARVED, NULL));
	an_analysis_free(&a);
}

Test(findings, loader_starved_fires_when_workers_idle)
{
	struct an_analysis a;
	split_run(&a, 555, 5, 1110, 8000, 1);
	const struct an_result_finding *f = find(&a, AN_F_LOADER_STARVED, NULL);
	cr_assert(f, "no loader_starved");
	cr_expect_eq(f->severity, 2);
	/* the worker waits for an index through the whole of the training thread's wait */
	cr_expect(evidence(f, "input_wait_fraction") > 0.99, "wait %.3f", evidence(f, "input_wait_fraction"));
	cr_expect(strstr(f->advice, "prefetch_factor"), "%s", f->advice);
	cr_expect_null(find(&a, AN_F_LOADER_CPU_BOUND, NULL));
	an_analysis_free(&a);
}

/* Workers reading files most of the time: neither finding; an unsampled worker (a 1.4 trace): neither either. */
Test(findings, loader_findings_silent_when_io_leads_or_unsampled)
{
	struct an_analysis a;
	split_run(&a, 8880, 20, 555, 100, 1);
	cr_expect_null(find(&a, AN_F_LOADER_CPU_BOUND, NULL));
	cr_expect_null(find(&a, AN_F_LOADER_STARVED, NULL));
	cr_expect(a.split_total[AN_SPLIT_IO] > a.split_total[AN_SPLIT_CPU] + a.split_total[AN_SPLIT_WAIT]);
	an_analysis_free(&a);
	split_run(&a, 555, 5, 8880, 100, 0);
	cr_expect_null(find(&a, AN_F_LOADER_CPU_BOUND, NULL));
	cr_expect_null(find(&a, AN_F_LOADER_STARVED, NULL));
	cr_expect_eq(a.split_unsampled_total, a.bd_total[AN_INPUT], "no sample: all unexplained");
	an_analysis_free(&a);
}

/*
 * small_file_storm at warning or critical only when file I/O leads the split:
 * 100 stats a batch either way; the worker's time is file I/O (8880 us) or CPU
 * work (8880 us, its stats 555 us).
 */
static int split_storm_severity(uint64_t io_us, uint64_t cpu_us, int samples, int *cpu_bound)
{
	struct an_analysis a;
	split_run(&a, io_us, 100, cpu_us, 100, samples);
	const struct an_result_finding *f = find(&a, AN_F_SMALL_FILE_STORM, NULL);
	cr_assert(f, "no small_file_storm");
	int sev = f->severity;
	*cpu_bound = find(&a, AN_F_LOADER_CPU_BOUND, NULL) != NULL;
	an_analysis_free(&a);
	return sev;
}

Test(findings, small_file_storm_is_info_when_workers_compute)
{
	int cpu_bound;
	cr_expect_eq(split_storm_severity(8880, 555, 1, &cpu_bound), 2, "file I/O leads: critical");
	cr_expect_eq(split_storm_severity(555, 8880, 1, &cpu_bound), 0, "CPU work leads: info");
	cr_expect(cpu_bound, "CPU work leads: loader_cpu_bound");
	cr_expect_eq(split_storm_severity(555, 8880, 0, &cpu_bound), 2, "no sample: the size rule alone");
}

/*
 * Workers sharing their cores: 4000 us of CPU work in the 10445 us they spend
 * outside file calls and waits (38%: runnable the rest of it). CPU work is a
 * third of the input only, but it leads file I/O and they ran 38% of the time:
 * CPU-bound, and the advice is cheaper loading (more workers would share too).
 */
Test(findings, loader_cpu_bound_fires_when_workers_share_the_cores)
{
	struct an_analysis a;
	split_run(&a, 555, 5, 4000, 100, 1);
	const struct an_result_finding *f = find(&a, AN_F_LOADER_CPU_BOUND, NULL);
	cr_assert(f, "no loader_cpu_bound");
	cr_expect(fabs(evidence(f, "worker_running_fraction") - 4000 / 10445.0) < 0.01, "running %.3f",
		  evidence(f, "worker_running_fraction"));
	cr_expect(evidence(f, "input_cpu_fraction") < 0.5);
	cr_expect(strstr(f->advice, "cheaper") || strstr(f->advice, "lighter"), "%s", f->advice);
	cr_expect_null(find(&a, AN_F_LOADER_STARVED, NULL));
	an_analysis_free(&a);
}

/* A worker blocked outside its recorded calls (a sleep, a lock): 10% on the CPU is no CPU-bound loader. */
Test(findings, loader_starved_fires_when_workers_block_unrecorded)
{
	struct an_analysis a;
	split_run(&a, 555, 5, 1110, 0, 1);
	cr_expect_null(find(&a, AN_F_LOADER_CPU_BOUND, NULL));
	const struct an_result_finding *f = find(&a, AN_F_LOADER_STARVED, NULL);
	cr_assert(f, "no loader_starved");
	cr_expect(evidence(f, "worker_running_fraction") < 0.15, "running %.3f", evidence(f, "worker_running_fraction"));
	an_analysis_free(&a);
}
