/*
 * test_job_memory.c - the address space the preload takes in a job: its
 * tables are mapped at their first use, never by a process that records
 * nothing (preload/lazymap.h; the string table with the trace file), so a job
 * it does not record has all but the library's own mapping (< 1 MiB) of what
 * it has bare:
 *   1. VmSize of cat(1) with the preload disabled, against bare;
 *   2. a job that mallocs 48 MiB under `ulimit -v` at its bare need + 1 MiB,
 *      with the preload disabled, and recording (where the limit leaves no room
 *      for a trace file, the job runs unrecorded, with one warning).
 */
#include <criterion/criterion.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "testlib.h"

/* VmSize in kB of cat reading its own /proc/self/status (preload: STEPPROF_DISABLE=1). */
static long cat_vmsize(int preload)
{
	char pre[1100];
	snprintf(pre, sizeof(pre), "LD_PRELOAD=%s", preload ? sp_t_build("lib/libstepprof.so") : "");
	char *env[] = {pre, "STEPPROF_DISABLE=1", NULL};
	char *argv[] = {"cat", "/proc/self/status", NULL};
	struct sp_t_result r;
	cr_assert_eq(sp_t_run(&r, argv, env, NULL, 30), 0, "cat: %s", r.err);
	const char *v = strstr(r.out, "VmSize:");
	cr_assert(v, "no VmSize in %s", r.out);
	long kb = strtol(v + 7, NULL, 10);
	sp_t_result_free(&r);
	return kb;
}

Test(job_memory, a_disabled_preload_maps_under_1_mib)
{
	long bare = cat_vmsize(0), pre = cat_vmsize(1);
	cr_expect_leq(pre - bare, 1024, "VmSize %ld kB preloaded with STEPPROF_DISABLE=1, %ld kB bare", pre, bare);
}

/* markgen mallocing 48 MiB under `ulimit -v kb`: 1 when the allocation succeeded. */
static int malloc48_at(long kb, int preload, int record, char **err)
{
	char lim[24], pre[1100], dir[PATH_MAX + 16];
	snprintf(lim, sizeof(lim), "%ld", kb);
	snprintf(pre, sizeof(pre), "LD_PRELOAD=%s", preload ? sp_t_build("lib/libstepprof.so") : "");
	char *tmp = record ? sp_t_tmpdir("jobmem") : NULL;
	snprintf(dir, sizeof(dir), "STEPPROF_DIR=%s/trace", tmp ? tmp : "/nonexistent");
	char *env[] = {"LD_PRELOAD=", NULL};
	char *argv[] = {"/bin/sh",
			"-c",
			"ulimit -v \"$0\" && exec env \"$@\"",
			lim,
			pre,
			record ? dir : "STEPPROF_DISABLE=1",
			(char *)sp_t_build("tests/bin/markgen"),
			"-n",
			"10",
			"-M",
			"48",
			NULL};
	struct sp_t_result r;
	sp_t_run(&r, argv, env, NULL, 60);
	int ok = r.out && strstr(r.out, "alloc=ok") != NULL;
	if (err)
		*err = strdup(r.err ? r.err : "");
	sp_t_result_free(&r);
	if (tmp) {
		sp_t_rmrf(tmp);
		free(tmp);
	}
	return ok;
}

/* The lowest `ulimit -v` (kB, within 16) at which markgen mallocs 48 MiB bare. */
static long bare_need(void)
{
	long lo = 1024, hi = 1l << 20;
	cr_assert(malloc48_at(hi, 0, 0, NULL), "48 MiB fail bare under ulimit -v %ld", hi);
	while (hi - lo > 16) {
		long mid = (lo + hi) / 2;
		if (malloc48_at(mid, 0, 0, NULL))
			hi = mid;
		else
			lo = mid;
	}
	return hi;
}

Test(job_memory, a_48_mib_malloc_needs_1_mib_more_with_the_preload_disabled, .timeout = 120)
{
	/* the lowest limit at which it allocates bare (51,654 kB on Debian 12, x86-64) */
	long hi = bare_need();
	cr_expect(malloc48_at(hi + 1024, 1, 0, NULL),
		  "48 MiB fail preloaded (STEPPROF_DISABLE=1) under ulimit -v %ld kB, bare need %ld kB + 1 MiB",
		  hi + 1024, hi);
}

/*
 * Recording: under the bare need + 1 MiB the job still gets its 48 MiB. There
 * is no room for a trace file (at most a 16th of the limit): it runs
 * unrecorded and says so once; nothing else was mapped before that decision.
 */
Test(job_memory, a_48_mib_malloc_needs_1_mib_more_with_the_preload_recording, .timeout = 120)
{
	long hi = bare_need();
	char *err = NULL;
	int ok = malloc48_at(hi + 1024, 1, 1, &err);
	cr_expect(ok, "48 MiB fail preloaded (recording) under ulimit -v %ld kB, bare need %ld kB + 1 MiB: %s",
		  hi + 1024, hi, err);
	cr_expect(strstr(err, "stepprof:") && strstr(err, "not recorded"), "no warning that it was not recorded: %s",
		  err);
	free(err);
}
