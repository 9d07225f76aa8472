/*
 * test_job_memory.c - the address space the preload takes in a job that it
 * does not record (STEPPROF_DISABLE=1): its tables are mapped at their first
 * use, never by a process that records nothing (preload/lazymap.h), so such a
 * job has all but the library's own mapping (< 1 MiB) of what it has bare:
 *   1. VmSize of cat(1) with the preload disabled, against bare;
 *   2. a job that mallocs 48 MiB under `ulimit -v` at its bare need + 1 MiB.
 */
#include <criterion/criterion.h>
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
static int malloc48_at(long kb, int preload)
{
	char lim[24], pre[1100];
	snprintf(lim, sizeof(lim), "%ld", kb);
	snprintf(pre, sizeof(pre), "LD_PRELOAD=%s", preload ? sp_t_build("lib/libstepprof.so") : "");
	char *env[] = {"LD_PRELOAD=", NULL};
	char *argv[] = {"/bin/sh",
			"-c",
			"ulimit -v \"$0\" && exec env \"$@\"",
			lim,
			pre,
			"STEPPROF_DISABLE=1",
			(char *)sp_t_build("tests/bin/markgen"),
			"-n",
			"10",
			"-M",
			"48",
			NULL};
	struct sp_t_result r;
	sp_t_run(&r, argv, env, NULL, 60);
	int ok = r.out && strstr(r.out, "alloc=ok") != NULL;
	sp_t_result_free(&r);
	return ok;
}

Test(job_memory, a_48_mib_malloc_needs_1_mib_more_with_the_preload_disabled, .timeout = 120)
{
	/* the lowest limit at which it allocates bare (51,652 kB on the development machine) */
	long lo = 1024, hi = 1l << 20;
	cr_assert(malloc48_at(hi, 0), "48 MiB fail bare under ulimit -v %ld", hi);
	while (hi - lo > 16) {
		long mid = (lo + hi) / 2;
		if (malloc48_at(mid, 0))
			hi = mid;
		else
			lo = mid;
	}
	cr_expect(malloc48_at(hi + 1024, 1),
		  "48 MiB fail preloaded (STEPPROF_DISABLE=1) under ulimit -v %ld kB, bare need %ld kB + 1 MiB",
		  hi + 1024, hi);
}
