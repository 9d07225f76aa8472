/*
 * test_cuda_edges.c - edge cases of the CUDA hooks end to end, on the
 * simulated GPU: tests/workloads/cuda/cuda_edges.c runs one scenario under
 * LD_PRELOAD=libstepprof.so (and without it, for stdout), and the test reads
 * `stepprof dump --json` (and `stepprof analyze --json` where a finding is
 * at stake). Each scenario's comment in cuda_edges.c says what it does.
 *
 *   1. helpers: run a scenario, read its records, find them
 *   2. the scenarios, one test each
 */
#include <criterion/criterion.h>

#include <math.h>
#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "testlib.h"

/* ---------------------------------------------------------- 1. helpers */

struct edge {
	char *dir;
	struct sp_t_result res;
	struct sp_json **rec; /* every record of every trace file of the run */
	size_t nrec;
};

static int str_eq(const struct sp_json *j, const char *key, const char *v)
{
	const char *s = sp_json_str(j, key);
	return s && !strcmp(s, v);
}

static void read_traces(struct edge *e)
{
	DIR *dir = opendir(e->dir);
	cr_assert(dir, "no trace directory %s", e->dir);
	struct dirent *de;
	while ((de = readdir(dir))) {
		if (!strstr(de->d_name, ".sptrace"))
			continue;
		char path[1024];
		snprintf(path, sizeof(path), "%s/%s", e->dir, de->d_name);
		char *argv[] = {(char *)sp_t_build("bin/stepprof"), "dump", "--json", path, NULL};
		struct sp_t_result r;
		cr_assert_eq(sp_t_run(&r, argv, NULL, NULL, 60), 0, "stepprof dump %s: %s", path, r.err);
		struct sp_json **lines = NULL;
		size_t n = sp_json_parse_lines(r.out, &lines);
		e->rec = realloc(e->rec, (e->nrec + n) * sizeof(*e->rec));
		memcpy(e->rec + e->nrec, lines, n * sizeof(*lines));
		e->nrec += n;
		free(lines);
		sp_t_result_free(&r);
	}
	closedir(dir);
}

/* Run build/<bin> SCENARIO (preload=0: without the preload); env: extra entries. */
static void edge_run(struct edge *e, const char *bin, const char *scenario, int preload, const char *const *env)
{
	memset(e, 0, sizeof(*e));
	const char *path = sp_t_build(bin);
	cr_assert(access(path, X_OK) == 0, "%s is not built (make; it needs the simulated GPU)", path);
	e->dir = sp_t_tmpdir("cudaedge");
	char dirv[1100], pre[1100];
	snprintf(dirv, sizeof(dirv), "STEPPROF_DIR=%s", e->dir);
	snprintf(pre, sizeof(pre), "LD_PRELOAD=%s", preload ? sp_t_build("lib/libstepprof.so") : "");
	char *argv[] = {(char *)path, (char *)scenario, NULL}, *envv[32];
	int m = 0;
	envv[m++] = pre;
	envv[m++] = dirv;
	envv[m++] = "STEPPROF_QUIET=0";
	for (; env && *env && m < 30; env++)
		envv[m++] = (char *)*env;
	/* these tests check the timing events of each launch: every launch timed, unless a test says otherwise */
	if (!sp_t_env_has(env, "STEPPROF_KERNEL_TIMING"))
		envv[m++] = "STEPPROF_KERNEL_TIMING=all";
	envv[m] = NULL;
	int st = sp_t_run(&e->res, argv, envv, NULL, 60);
	cr_assert_eq(st, 0, "%s %s exited %d; stderr:\n%s", path, scenario, st, e->res.err);
	if (preload)
		read_traces(e);
}

static void edge_free(struct edge *e)
{
	for (size_t i = 0; i < e->nrec; i++)
		sp_json_free(e->rec[i]);
	free(e->rec);
	sp_t_result_free(&e->res);
	sp_t_rmrf(e->dir);
	free(e->dir);
}

/* The n-th record (from 0) of that kind, and api when not NULL; NULL when there are fewer. */
static const struct sp_json *nth(const struct edge *e, const char *kind, const char *api, unsigned n)
{
	for (size_t i = 0; i < e->nrec; i++)
		if (str_eq(e->rec[i], "kind", kind) && (!api || str_eq(e->rec[i], "api", api)) && !n--)
			return e->rec[i];
	return NULL;
}

static unsigned count(const struct edge *e, const char *kind, const char *api)
{
	unsigned n = 0;
	for (size_t i = 0; i < e->nrec; i++)
		n += str_eq(e->rec[i], "kind", kind) && (!api || str_eq(e->rec[i], "api", api));
	return n;
}

/* The same scenario without the preload prints the same thing. */
static void expect_same_stdout(const struct edge *pre, const char *bin, const char *scenario, const char *const *env)
{
	struct edge bare;
	edge_run(&bare, bin, scenario, 0, env);
	cr_expect_str_eq(pre->res.out, bare.res.out, "%s %s: stdout differs under the preload", bin, scenario);
	edge_free(&bare);
}

/* `stepprof analyze --json` of the run's directory: 1 when it has a finding of that kind. */
static int has_finding(const struct edge *e, const char *kind)
{
	char *argv[] = {(char *)sp_t_build("bin/stepprof"), "analyze", e->dir, "--json", NULL};
	struct sp_t_result r;
	cr_assert_eq(sp_t_run(&r, argv, NULL, NULL, 60), 0, "stepprof analyze: %s", r.err);
	struct sp_json *j = sp_json_parse(r.out);
	cr_assert(j, "analyze --json is not JSON:\n%s", r.out);
	struct sp_json *f = sp_json_get(j, "findings");
	int found = 0;
	for (size_t i = 0; f && i < f->n; i++)
		found |= str_eq(sp_json_at(f, i), "kind", kind);
	sp_json_free(j);
	sp_t_result_free(&r);
	return found;
}

/* ------------------------------------------------------- 2. scenarios */

Test(cuda_edges, argument_errors_are_allocs_with_their_result_not_alloc_failed, .timeout = 60)
{
	struct edge e;
	edge_run(&e, "tests/bin/cuda_edges", "argerr", 1, NULL);
	/* only the out-of-memory answer is a failed allocation */
	cr_expect_eq(count(&e, "alloc_failed", NULL), 1, "%u alloc_failed records", count(&e, "alloc_failed", NULL));
	const struct sp_json *oom = nth(&e, "alloc_failed", NULL, 0);
	cr_expect(oom && str_eq(oom, "api", "cudaMalloc") && sp_json_u64(oom, "bytes", 0) == 4096ull << 20,
		  "the 4 GiB cudaMalloc is not the alloc_failed");
	cr_expect_eq(sp_json_num(oom, "result", 0), 2);
	/* the refused ones: plain alloc records with their result; live bytes stay at the 1 MiB held */
	const struct sp_json *vmm = nth(&e, "alloc", "cuMemCreate", 0), *null = nth(&e, "alloc", "cudaMalloc", 1);
	cr_assert(vmm, "no alloc record of the refused cuMemCreate");
	cr_assert(null, "no alloc record of cudaMalloc(NULL, 100)");
	cr_expect_eq(sp_json_num(vmm, "result", 0), 1);	 /* CUDA_ERROR_INVALID_VALUE */
	cr_expect_eq(sp_json_num(null, "result", 0), 1); /* cudaErrorInvalidValue */
	cr_expect_eq(sp_json_u64(vmm, "bytes", 0), 1000);
	cr_expect_eq(sp_json_u64(null, "bytes", 0), 100);
	cr_expect_eq(sp_json_u64(vmm, "live_bytes", 0), 1 << 20);
	cr_expect_eq(sp_json_u64(null, "live_bytes", 0), 1 << 20);
	cr_expect(str_eq(vmm, "dptr", "0x0"), "dptr %s", sp_json_str(vmm, "dptr"));
	const struct sp_json *fr = nth(&e, "free", "cudaFree", 0);
	cr_assert(fr);
	cr_expect_eq(sp_json_u64(fr, "live_bytes", 1), 0, "the free left %llu live bytes",
		     (unsigned long long)sp_json_u64(fr, "live_bytes", 1));
	/* no false fragmentation: the only failure had less free memory than it asked for */
	cr_expect(!has_finding(&e, "alloc_fragmentation"), "alloc_fragmentation raised for argument errors");
	expect_same_stdout(&e, "tests/bin/cuda_edges", "argerr", NULL);
	edge_free(&e);
}

Test(cuda_edges, stream_is_idle_after_a_synchronous_copy_complete_at_return, .timeout = 60)
{
	struct edge e;
	edge_run(&e, "tests/bin/cuda_edges", "query", 1, NULL);
	/* 500 of each: D2H pageable and pinned, H2D pinned, H2H, cuMemcpyDtoH, cuMemcpyHtoD pinned */
	cr_expect(strstr(e.res.out, "not ready after 500 of each: d2h pageable 0, d2h pinned 0, h2d pinned 0, h2h 0, "
				    "cuMemcpyDtoH 0, cuMemcpyHtoD pinned 0\n"),
		  "a stream query right after a complete synchronous copy said not ready:\n%s", e.res.out);
	/* and every copy is still timed, its end no earlier than its begin */
	unsigned copies = 0, timed = 0;
	for (size_t i = 0; i < e.nrec; i++) {
		if (!str_eq(e.rec[i], "kind", "copy"))
			continue;
		copies++;
		struct sp_json *gb = sp_json_get(e.rec[i], "gpu_begin_ns"), *ge = sp_json_get(e.rec[i], "gpu_end_ns");
		timed += gb && ge && ge->num >= gb->num;
	}
	cr_expect_eq(copies, 7 * 500);
	cr_expect_eq(timed, copies, "%u of %u copies timed", timed, copies);
	expect_same_stdout(&e, "tests/bin/cuda_edges", "query", NULL);
	edge_free(&e);
}

/* One alloc or free record the program's calls must leave, in order. */
struct want_mem {
	const char *kind, *api;
	unsigned dev;
	uint64_t bytes, live;
};

/* The alloc and free records of e are exactly want[0..n), in order. */
static void expect_alloc_free(const struct edge *e, const struct want_mem *want, size_t n)
{
	size_t k = 0;
	for (size_t i = 0; i < e->nrec; i++) {
		if (!str_eq(e->rec[i], "kind", "alloc") && !str_eq(e->rec[i], "kind", "free"))
			continue;
		cr_assert_lt(k, n, "more alloc/free records than the program's calls (%s %s)", sp_json_str(e->rec[i], "kind"),
			     sp_json_str(e->rec[i], "api"));
		const struct sp_json *r = e->rec[i];
		cr_expect(str_eq(r, "kind", want[k].kind) && str_eq(r, "api", want[k].api),
			  "record %zu: %s %s, expected %s %s", k, sp_json_str(r, "kind"), sp_json_str(r, "api"),
			  want[k].kind, want[k].api);
		cr_expect_eq(sp_json_u64(r, "device", 99), want[k].dev, "record %zu (%s): device", k, want[k].api);
		cr_expect_eq(sp_json_u64(r, "bytes", 0), want[k].bytes, "record %zu (%s): bytes %llu", k, want[k].api,
			     (unsigned long long)sp_json_u64(r, "bytes", 0));
		cr_expect_eq(sp_json_u64(r, "live_bytes", 1), want[k].live, "record %zu (%s): live_bytes %llu", k,
			     want[k].api, (unsigned long long)sp_json_u64(r, "live_bytes", 1));
		cr_expect_eq(sp_json_num(r, "result", -1), 0);
		k++;
	}
	cr_expect_eq(k, n, "%zu alloc/free records, the program made %zu calls", k, n);
}

Test(cuda_edges, device_reset_starts_the_device_books_afresh, .timeout = 60)
{
	static const struct want_mem want[] = {
	    {"alloc", "cudaMalloc", 1, 2 << 20, 2 << 20},    {"alloc", "cudaMalloc", 0, 100 << 20, 100 << 20},
	    {"free", "cudaDeviceReset", 0, 100 << 20, 0}, /* everything of device 0 */
	    {"alloc", "cudaMalloc", 0, 10 << 20, 10 << 20},  {"free", "cudaFree", 0, 10 << 20, 0},
	    {"alloc", "cuMemAlloc_v2", 0, 8 << 20, 8 << 20}, {"free", "cuDevicePrimaryCtxReset_v2", 0, 8 << 20, 0},
	    {"alloc", "cudaMalloc", 0, 1 << 20, 1 << 20},    {"free", "cudaFree", 0, 1 << 20, 0},
	    {"free", "cudaDeviceReset", 1, 2 << 20, 0}, /* device 1's, kept through device 0's resets */
	};
	const char *env[] = {"SIMGPU_DEVICES=2", NULL};
	struct edge e;
	edge_run(&e, "tests/bin/cuda_edges", "reset", 1, env);
	expect_alloc_free(&e, want, sizeof(want) / sizeof(want[0]));
	/* the copy after the reset is timed (the timing state of the reset device starts afresh too) */
	const struct sp_json *cp = nth(&e, "copy", "cudaMemcpy", 1);
	cr_assert(cp);
	cr_expect(sp_json_get(cp, "gpu_begin_ns"), "the copy after the reset has no GPU time");
	expect_same_stdout(&e, "tests/bin/cuda_edges", "reset", env);
	edge_free(&e);
}

/*
 * cuMemRelease must not take a VMM handle's bytes off the books while it is
 * mapped: after A's release the live bytes would read 0 with 4 MiB in use, and
 * 9 MiB instead of 13 once all three and the cudaMalloc are held.
 */
Test(cuda_edges, vmm_memory_lives_until_its_last_mapping_and_handle_are_gone, .timeout = 60)
{
	static const struct want_mem want[] = {
	    {"alloc", "cuMemCreate", 0, 4 << 20, 4 << 20},  /* A */
	    {"alloc", "cuMemCreate", 0, 4 << 20, 8 << 20},  /* B (A released, still mapped) */
	    {"alloc", "cuMemCreate", 0, 4 << 20, 12 << 20}, /* C */
	    {"alloc", "cudaMalloc", 0, 1 << 20, 13 << 20},
	    {"free", "cuMemUnmap", 0, 4 << 20, 9 << 20},   /* A's last mapping */
	    {"free", "cuMemRelease", 0, 4 << 20, 5 << 20}, /* B, unmapped before */
	    {"free", "cuMemRelease", 0, 4 << 20, 1 << 20}, /* C's own handle, after the retained one and the unmap */
	    {"free", "cudaFree", 0, 1 << 20, 0},
	};
	struct edge e;
	edge_run(&e, "tests/bin/cuda_edges", "vmm", 1, NULL);
	cr_assert(strstr(e.res.out, "C: the same handle: 1"), "%s", e.res.out);
	expect_alloc_free(&e, want, sizeof(want) / sizeof(want[0]));
	expect_same_stdout(&e, "tests/bin/cuda_edges", "vmm", NULL);
	edge_free(&e);
}

Test(cuda_edges, context_changes_change_the_device_of_the_records, .timeout = 60)
{
	/* the records in order, and the device each call ran on (cuda_edges.c ctx) */
	static const struct {
		const char *kind, *api;
		unsigned dev;
	} want[] = {
	    {"alloc", "cuMemAlloc_v2", 0},   {"copy", "cuMemcpyHtoD_v2", 0},  /* cuCtxCreate dev 0 */
	    {"alloc", "cuMemAlloc_v2", 1},   {"copy", "cuMemcpyHtoD_v2", 1},  /* cuCtxCreate dev 1 */
	    {"memset", "cuMemsetD8_v2", 0},				      /* cuCtxPopCurrent */
	    {"memset", "cuMemsetD8_v2", 1},  {"sync", "cuCtxSynchronize", 1}, /* cuCtxPushCurrent */
	    {"free", "cuMemFree_v2", 1},     {"copy", "cuMemcpyDtoH_v2", 0},  /* cuCtxDestroy dev 1 */
	    {"alloc", "cuMemAlloc_v2", 0},   {"copy", "cuMemcpyHtoD_v2", 0},  /* cuCtxSetCurrent */
	    {"sync", "cuCtxSynchronize", 0}, {"free", "cuMemFree_v2", 0},     {"free", "cuMemFree_v2", 0},
	};
	const char *env[] = {"SIMGPU_DEVICES=2", NULL};
	struct edge e;
	edge_run(&e, "tests/bin/cuda_edges", "ctx", 1, env);
	size_t k = 0, n = sizeof(want) / sizeof(want[0]);
	for (size_t i = 0; i < e.nrec; i++) {
		const char *kind = sp_json_str(e.rec[i], "kind");
		if (!kind || (strcmp(kind, "alloc") && strcmp(kind, "free") && strcmp(kind, "copy") &&
			      strcmp(kind, "memset") && strcmp(kind, "sync")))
			continue;
		cr_assert_lt(k, n, "more records than the program's calls");
		cr_expect(str_eq(e.rec[i], "kind", want[k].kind) && str_eq(e.rec[i], "api", want[k].api),
			  "record %zu: %s %s, expected %s %s", k, kind, sp_json_str(e.rec[i], "api"), want[k].kind,
			  want[k].api);
		cr_expect_eq(sp_json_u64(e.rec[i], "device", 99), want[k].dev,
			     "record %zu (%s %s): device %llu, ran on %u", k, want[k].kind, want[k].api,
			     (unsigned long long)sp_json_u64(e.rec[i], "device", 99), want[k].dev);
		k++;
	}
	cr_expect_eq(k, n, "%zu records, the program made %zu calls", k, n);
	/* the thread times the ops of its first context: the copies back in it after the others are timed */
	const struct sp_json *back = nth(&e, "copy", "cuMemcpyDtoH_v2", 0),
			     *last = nth(&e, "copy", "cuMemcpyHtoD_v2", 2);
	cr_assert(back && last);
	cr_expect(sp_json_get(back, "gpu_begin_ns"), "the copy after cuCtxDestroy has no GPU time");
	cr_expect(sp_json_get(last, "gpu_begin_ns"), "the copy after cuCtxSetCurrent has no GPU time");
	expect_same_stdout(&e, "tests/bin/cuda_edges", "ctx", env);
	edge_free(&e);
}

Test(cuda_edges, unified_copy_first_in_a_new_thread_is_told_apart, .timeout = 60)
{
	static const struct {
		const char *dir, *mem;
		uint64_t dptr_off; /* from the 1 MiB allocation */
	} want[] = {{"h2d", "pageable", 4096}, {"d2h", "pageable", 0}, {"h2d", "pinned", 0}};
	struct edge e;
	edge_run(&e, "tests/bin/cuda_edges", "newthread", 1, NULL);
	const struct sp_json *al = nth(&e, "alloc", "cudaMalloc", 0);
	cr_assert(al);
	uint64_t base = strtoull(sp_json_str(al, "dptr"), NULL, 16);
	cr_expect_eq(count(&e, "copy", NULL), 3);
	for (unsigned k = 0; k < 3; k++) {
		const struct sp_json *c = nth(&e, "copy", "cudaMemcpy", k);
		cr_assert(c);
		cr_expect(str_eq(c, "direction", want[k].dir), "copy %u: direction %s, expected %s", k,
			  sp_json_str(c, "direction"), want[k].dir);
		cr_expect(str_eq(c, "host_memory", want[k].mem), "copy %u: host memory %s, expected %s", k,
			  sp_json_str(c, "host_memory"), want[k].mem);
		const char *dp = sp_json_str(c, "dptr");
		cr_expect(dp && strtoull(dp, NULL, 16) == base + want[k].dptr_off,
			  "copy %u: dptr %s, expected base+%llu", k, dp ? dp : "(none)",
			  (unsigned long long)want[k].dptr_off);
		/* a pageable copy names its site, in the program */
		if (!strcmp(want[k].mem, "pageable"))
			cr_expect(sp_json_str(c, "site") && strstr(sp_json_str(c, "site"), "cuda_edges!"),
				  "copy %u: site %s", k, sp_json_str(c, "site") ? sp_json_str(c, "site") : "(none)");
	}
	expect_same_stdout(&e, "tests/bin/cuda_edges", "newthread", NULL);
	edge_free(&e);
}

Test(cuda_edges, pinned_ranges_beyond_4096_are_still_pinned, .timeout = 60)
{
	struct edge e;
	edge_run(&e, "tests/bin/cuda_edges", "pinmax", 1, NULL);
	cr_expect(strstr(e.res.out, "cudaHostAlloc x5000: 0 failed"), "%s", e.res.out);
	cr_expect_eq(count(&e, "copy", NULL), 4);
	for (unsigned k = 0; k < 4; k++) {
		const struct sp_json *c = nth(&e, "copy", NULL, k);
		cr_expect(str_eq(c, "host_memory", "pinned"), "copy %u (%s): host memory %s", k, k < 3 ? "h2d" : "d2h",
			  sp_json_str(c, "host_memory"));
	}
	/* every release knows its range */
	unsigned frees = 0, sized = 0;
	for (size_t i = 0; i < e.nrec; i++)
		if (str_eq(e.rec[i], "kind", "host_free")) {
			frees++;
			sized += sp_json_u64(e.rec[i], "bytes", 0) == 256;
		}
	cr_expect_eq(frees, 5000);
	cr_expect_eq(sized, 5000, "%u of 5000 host_free records have the range's 256 bytes", sized);
	cr_expect(!strstr(e.res.err, "pinned host range"), "a warning although the map grew:\n%s", e.res.err);
	cr_expect(!has_finding(&e, "unpinned_copy"), "unpinned_copy raised for pinned copies");
	expect_same_stdout(&e, "tests/bin/cuda_edges", "pinmax", NULL);
	edge_free(&e);
}

Test(cuda_edges, managed_memory_named_host_is_managed, .timeout = 60)
{
	static const struct {
		const char *api, *dir, *mem;
	} want[] = {
	    {"cudaMemcpy", "h2d", "managed"},	   {"cudaMemcpy", "d2h", "managed"},
	    {"cudaMemcpyAsync", "h2d", "managed"}, {"cuMemcpyHtoD_v2", "h2d", "managed"},
	    {"cudaMemcpy", "h2d", "managed"}, /* first call of a new thread */
	    {"cudaMemcpy", "h2d", "pageable"},
	};
	struct edge e;
	edge_run(&e, "tests/bin/cuda_edges", "managed", 1, NULL);
	size_t n = sizeof(want) / sizeof(want[0]);
	cr_expect_eq(count(&e, "copy", NULL), n);
	for (unsigned k = 0; k < n; k++) {
		const struct sp_json *c = nth(&e, "copy", NULL, k);
		cr_assert(c);
		cr_expect(str_eq(c, "api", want[k].api) && str_eq(c, "direction", want[k].dir), "copy %u: %s %s", k,
			  sp_json_str(c, "api"), sp_json_str(c, "direction"));
		cr_expect(str_eq(c, "host_memory", want[k].mem), "copy %u (%s %s): host memory %s, expected %s", k,
			  want[k].api, want[k].dir, sp_json_str(c, "host_memory"), want[k].mem);
	}
	expect_same_stdout(&e, "tests/bin/cuda_edges", "managed", NULL);
	edge_free(&e);
}

/* The symbol copies as recorded from bin (suffix "" or the per-thread ones): api, direction, bytes. */
static void expect_symbol_copies(const char *bin, const char *sync_suffix, const char *async_suffix)
{
	static const struct {
		const char *api;
		int async;
		const char *dir;
		uint64_t bytes;
	} want[] = {{"cudaMemcpyToSymbol", 0, "h2d", 4096},
		    {"cudaMemcpyFromSymbol", 0, "d2h", 4096},
		    {"cudaMemcpyToSymbolAsync", 1, "h2d", 1024},
		    {"cudaMemcpyFromSymbolAsync", 1, "d2h", 1024}};
	struct edge e;
	edge_run(&e, bin, "symbols", 1, NULL);
	cr_expect_eq(count(&e, "copy", NULL), 4, "%s: %u copy records for 4 symbol copies", bin,
		     count(&e, "copy", NULL));
	for (unsigned k = 0; k < 4; k++) {
		char api[64];
		snprintf(api, sizeof(api), "%s%s", want[k].api, want[k].async ? async_suffix : sync_suffix);
		const struct sp_json *c = nth(&e, "copy", NULL, k);
		cr_assert(c, "%s: no record of %s", bin, api);
		cr_expect(str_eq(c, "api", api), "%s: copy %u recorded as %s, the program called %s", bin, k,
			  sp_json_str(c, "api"), api);
		cr_expect(str_eq(c, "direction", want[k].dir), "%s: %s direction %s", bin, api,
			  sp_json_str(c, "direction"));
		cr_expect_eq(sp_json_u64(c, "bytes", 0), want[k].bytes);
		cr_expect(sp_json_get(c, "gpu_begin_ns"), "%s: %s has no GPU time", bin, api);
	}
	expect_same_stdout(&e, bin, "symbols", NULL);
	edge_free(&e);
}

Test(cuda_edges, symbol_copies_are_runtime_copies_in_both_builds, .timeout = 60)
{
	expect_symbol_copies("tests/bin/cuda_edges", "", "");
	expect_symbol_copies("tests/bin/cuda_edges_ptds", "_ptds", "_ptsz");
}

/*
 * A run of query polls held back for its answer is written when its thread exits
 * or the process ends without one (result 600): otherwise a thread that polls a
 * busy stream and exits, and a main thread that polls an event and returns,
 * leave no record of their waits.
 */
Test(cuda_edges, polls_never_answered_are_recorded_at_exit, .timeout = 60)
{
	struct edge e;
	edge_run(&e, "tests/bin/cuda_edges", "pollexit", 1, NULL);
	const struct sp_json *q = nth(&e, "sync", "cudaStreamQuery", 0), *v = nth(&e, "sync", "cudaEventQuery", 0);
	cr_assert(q, "no record of the thread's 3 cudaStreamQuery polls");
	cr_assert(v, "no record of the main thread's 3 cudaEventQuery polls");
	cr_expect_eq(count(&e, "sync", "cudaStreamQuery"), 1, "one record for a run of polls");
	cr_expect_eq(count(&e, "sync", "cudaEventQuery"), 1);
	cr_expect_eq(sp_json_i64(q, "result", 0), 600);
	cr_expect_eq(sp_json_i64(v, "result", 0), 600);
	cr_expect_neq(sp_json_i64(q, "tid", 0), sp_json_i64(q, "pid", 0), "the polling thread's own record");
	cr_expect_eq(sp_json_i64(v, "tid", 0), sp_json_i64(v, "pid", 0), "the main thread's own record");
	expect_same_stdout(&e, "tests/bin/cuda_edges", "pollexit", NULL);
	edge_free(&e);
}

/*
 * The last copies of a run, complete when they returned, with no sync after
 * them: their end events (on stepprof's private stream) are read back at exit,
 * which waits for those events only (the GPU reaches them at once; the
 * simulated GPU's stream thread may take a moment on a loaded machine).
 */
/*
 * lastcopy's five launches, each followed by a sync: how many got GPU time.
 * Precondition of the tests below: GPU timing worked in this run at all. A time
 * anchor is an event the GPU must reach within 2 ms of its record
 * (docs/cuda-capture.md); on a machine so loaded that the simulated GPU's thread
 * never ran in time at any of the five syncs, no op has GPU time and these
 * tests have nothing to check.
 */
static unsigned synced_launches_timed(const struct edge *e)
{
	unsigned timed = 0;
	for (unsigned k = 0; k < 5; k++)
		timed += sp_json_get(nth(e, "launch", NULL, k), "gpu_begin_ns") != NULL;
	return timed;
}

Test(cuda_edges, the_last_copies_before_exit_get_their_gpu_time, .timeout = 60)
{
	struct edge e;
	edge_run(&e, "tests/bin/cuda_edges", "lastcopy", 1, NULL);
	cr_assert_eq(count(&e, "copy", NULL), 2);
	cr_assert_eq(count(&e, "launch", NULL), 5);
	if (!synced_launches_timed(&e)) {
		edge_free(&e);
		cr_skip_test("no kernel got GPU time: no time anchor on this loaded machine");
	}
	for (unsigned k = 0; k < 2; k++) {
		const struct sp_json *c = nth(&e, "copy", NULL, k);
		cr_assert(c);
		cr_expect(sp_json_get(c, "gpu_begin_ns"), "copy %u (%s) has no GPU time", k,
			  sp_json_str(c, "direction"));
	}
	expect_same_stdout(&e, "tests/bin/cuda_edges", "lastcopy", NULL);
	edge_free(&e);
}

/*
 * A kernel and an async copy that the GPU finished but nobody waited for, then
 * _exit (Python's os._exit): read back as at exit(). _exit skips the atexit
 * handlers: read back in one only, both would have no GPU time.
 */
Test(cuda_edges, ops_left_unwaited_before_an_os_exit_get_their_gpu_time, .timeout = 60)
{
	/* NOTE: up to three runs, as the timing tests above, for the precondition */
	for (int attempt = 0; attempt < 3; attempt++) {
		struct edge e;
		edge_run(&e, "tests/bin/cuda_edges", "lastcopyexit", 1, NULL);
		cr_assert_eq(count(&e, "launch", NULL), 6);
		cr_assert_eq(count(&e, "copy", NULL), 3);
		if (synced_launches_timed(&e)) {
			const struct sp_json *l = nth(&e, "launch", NULL, 5), *c = nth(&e, "copy", NULL, 2);
			cr_assert(l && c);
			cr_expect(sp_json_get(l, "gpu_begin_ns"), "the last launch has no GPU time");
			cr_expect(sp_json_get(c, "gpu_begin_ns"), "the last copy (%s) has no GPU time",
				  sp_json_str(c, "direction"));
			edge_free(&e);
			return;
		}
		edge_free(&e);
	}
	cr_skip_test("no kernel got GPU time: no time anchor on this loaded machine");
}

/*
 * An exited thread's timing state is adopted. Kept for good in a registry of
 * 512, the states would leave a new thread's ops past that read back by no
 * other thread's sync point (511 of 700 launches timed), and each exited
 * thread would keep its ~82 KB and its events.
 */
Test(cuda_edges, ops_of_short_lived_threads_are_timed_past_512_threads, .timeout = 120)
{
	struct edge e;
	edge_run(&e, "tests/bin/cuda_edges", "threads", 1, NULL);
	cr_assert(strstr(e.res.out, "threads: 0 calls failed"), "%s", e.res.out);
	unsigned n = count(&e, "launch", "cudaLaunchKernel"), timed = 0;
	cr_assert_eq(n, 700, "%u launch records for 700 launches", n);
	for (unsigned i = 0; i < n; i++)
		timed += sp_json_get(nth(&e, "launch", "cudaLaunchKernel", i), "gpu_begin_ns") != NULL;
	cr_expect_eq(timed, n, "%u of %u launches have their GPU time", timed, n);
	edge_free(&e);
}

/*
 * A thread keeps a timing state per context. Timed only in the context of its
 * first timed op, devloop's device 1 copies and kernels (6 of 12 ops) would
 * have no GPU time. Each kernel sleeps 2 ms;
 * its GPU span lies between its launch and the device sync after it.
 */
Test(cuda_edges, a_thread_driving_two_devices_times_the_ops_of_both, .timeout = 60)
{
	const char *env[] = {"SIMGPU_DEVICES=2", NULL};
	struct edge e;
	edge_run(&e, "tests/bin/cuda_edges", "devloop", 1, env);
	unsigned timed[2][2] = {{0}}, n = 0;
	const struct sp_json *last_launch[2] = {NULL, NULL};
	for (size_t i = 0; i < e.nrec; i++) {
		const struct sp_json *r = e.rec[i];
		unsigned dev = (unsigned)sp_json_u64(r, "device", 9);
		int launch = str_eq(r, "kind", "launch");
		if (dev > 1)
			continue;
		if (str_eq(r, "kind", "sync") && last_launch[dev]) {
			/* the kernel before this sync of its device ran between its launch and the sync's return */
			const struct sp_json *l = last_launch[dev];
			uint64_t gb = sp_json_u64(l, "gpu_begin_ns", 0), ge = sp_json_u64(l, "gpu_end_ns", 0);
			cr_expect_geq(ge - gb, 1900000, "device %u: a 2 ms kernel took %llu ns on the GPU", dev,
				      (unsigned long long)(ge - gb));
			cr_expect_geq(gb + 2000000, sp_json_u64(l, "begin_ns", 0), "device %u: GPU begin before the launch",
				      dev);
			cr_expect_leq(ge, sp_json_u64(r, "end_ns", 0) + 2000000, "device %u: GPU end after the sync", dev);
			last_launch[dev] = NULL;
		}
		if (!launch && !str_eq(r, "kind", "copy"))
			continue;
		n++;
		timed[dev][launch] += sp_json_get(r, "gpu_begin_ns") != NULL;
		if (launch && sp_json_get(r, "gpu_begin_ns"))
			last_launch[dev] = r;
	}
	cr_assert_eq(n, 12, "%u copy and launch records for 12 calls", n);
	for (unsigned dev = 0; dev < 2; dev++)
		cr_expect(timed[dev][0] == 3 && timed[dev][1] == 3, "device %u: %u of 3 copies and %u of 3 launches timed",
			  dev, timed[dev][0], timed[dev][1]);
	expect_same_stdout(&e, "tests/bin/cuda_edges", "devloop", env);
	edge_free(&e);
}

/*
 * The finished ops are read back when a thread's pending list is full (the
 * second thread with the main thread's anchor). Read back only at sync points,
 * a thread would hold at most 2048 ops pending: in longstep, 2049 of the 3001
 * main-thread launches and 2048 of the second thread's 3000 would have a GPU time.
 */
Test(cuda_edges, steps_longer_than_the_pending_list_are_timed_throughout, .timeout = 120)
{
	struct edge e;
	edge_run(&e, "tests/bin/cuda_edges", "longstep", 1, NULL);
	cr_assert(strstr(e.res.out, "longstep: 0 calls failed"), "%s", e.res.out);
	unsigned timed[2] = {0, 0}, all[2] = {0, 0};
	long main_tid = -1;
	for (size_t i = 0; i < e.nrec; i++) {
		const struct sp_json *r = e.rec[i];
		if (!str_eq(r, "kind", "launch"))
			continue;
		long tid = (long)sp_json_u64(r, "tid", 0);
		if (main_tid < 0)
			main_tid = tid;
		all[tid != main_tid]++;
		timed[tid != main_tid] += sp_json_get(r, "gpu_begin_ns") != NULL;
	}
	cr_assert(all[0] == 3001 && all[1] == 3000, "%u and %u launch records for 3001 and 3000 launches", all[0],
		  all[1]);
	cr_expect_eq(timed[0], all[0], "main thread: %u of %u launches have their GPU time", timed[0], all[0]);
	cr_expect_eq(timed[1], all[1], "second thread: %u of %u launches have their GPU time", timed[1], all[1]);
	edge_free(&e);
}

/*
 * A stream-ordered allocation is booked on its stream's device, not the current
 * one: otherwise, with device 0 current, 8 MiB allocated on a device-1 stream
 * would read live 8 MiB on device 0, and the cudaMalloc after it 9 MiB.
 */
Test(cuda_edges, stream_ordered_allocations_are_booked_on_their_streams_device, .timeout = 60)
{
	static const struct want_mem want[] = {
	    {"alloc", "cudaMallocAsync", 1, 8 << 20, 8 << 20}, {"alloc", "cudaMalloc", 0, 1 << 20, 1 << 20},
	    {"alloc", "cuMemAllocAsync", 1, 2 << 20, 10 << 20}, {"free", "cudaFreeAsync", 1, 8 << 20, 2 << 20},
	    {"free", "cuMemFreeAsync", 1, 2 << 20, 0},          {"free", "cudaFree", 0, 1 << 20, 0},
	};
	const char *env[] = {"SIMGPU_DEVICES=2", NULL};
	struct edge e;
	edge_run(&e, "tests/bin/cuda_edges", "pooldev", 1, env);
	expect_alloc_free(&e, want, sizeof(want) / sizeof(want[0]));
	expect_same_stdout(&e, "tests/bin/cuda_edges", "pooldev", env);
	edge_free(&e);
}

/*
 * Each NVTX domain has its own range stack. With one shared stack, the default
 * domain's pop would end lib's "prefetch" (pushed last), and lib's pop "step",
 * 1 ms late (each step would read 3 ms instead of 2, ending after the prefetch).
 */
Test(cuda_edges, nvtx_domains_keep_their_own_range_stacks, .timeout = 60)
{
	struct edge e;
	edge_run(&e, "tests/bin/cuda_edges", "nvtxdomains", 1, NULL);
	const char *line = "levels: push step 0, push lib prefetch 0, pop 0, pop lib 0\n";
	char want[256];
	snprintf(want, sizeof(want), "%s%s%s", line, line, line);
	cr_expect_str_eq(e.res.out, want, "the levels NVTX calls returned, each within its domain");
	const struct sp_json *step[3], *pre[3];
	for (unsigned k = 0; k < 3; k++) {
		step[k] = pre[k] = NULL;
		for (size_t i = 0, ns = 0, np = 0; i < e.nrec; i++) {
			const struct sp_json *r = e.rec[i];
			if (!str_eq(r, "kind", "range"))
				continue;
			if (str_eq(r, "name", "step") && !sp_json_str(r, "domain") && ns++ == k)
				step[k] = r;
			if (str_eq(r, "name", "prefetch") && str_eq(r, "domain", "lib") && np++ == k)
				pre[k] = r;
		}
		cr_assert(step[k] && pre[k], "step %u: no step range (default domain) or prefetch range (lib)", k);
		uint64_t se = sp_json_u64(step[k], "end_ns", 0), pe = sp_json_u64(pre[k], "end_ns", 0);
		cr_expect_geq(sp_json_u64(step[k], "dur_ns", 0), 2000000, "step %u: slept 2 ms", k);
		cr_expect_geq(pe, se + 1000000, "step %u: the step ended %lld ns before the prefetch, which the program "
					       "ended 1 ms after it", k, (long long)(pe - se));
		cr_expect_eq(sp_json_u64(step[k], "value", 9), 0);
		cr_expect_eq(sp_json_u64(pre[k], "value", 9), 0, "the first range of its domain");
	}
	edge_free(&e);
}

/*
 * A cuMemCreate of host memory (NCCL's host buffers) is not device memory of the
 * current device: booked so, it would read 4 MiB live before the cudaMalloc,
 * 5 MiB after it, with 1 MiB of device memory in use.
 */
Test(cuda_edges, vmm_host_memory_is_pinned_host_memory_not_device_memory, .timeout = 60)
{
	static const struct want_mem want[] = {
	    {"alloc", "cudaMalloc", 0, 1 << 20, 1 << 20},
	    {"free", "cudaFree", 0, 1 << 20, 0},
	};
	struct edge e;
	edge_run(&e, "tests/bin/cuda_edges", "vmmhost", 1, NULL);
	unsigned ok = 0;
	for (const char *q = e.res.out; (q = strstr(q, "rc=0 ")); q++)
		ok++;
	cr_assert_eq(ok, 11, "every call succeeds:\n%s", e.res.out);
	expect_alloc_free(&e, want, sizeof(want) / sizeof(want[0]));
	const struct sp_json *ha = nth(&e, "host_alloc", "cuMemCreate", 0), *hf = nth(&e, "host_free", "cuMemRelease", 0);
	cr_expect(ha && sp_json_u64(ha, "bytes", 0) == 4 << 20, "no host_alloc record of 4 MiB for the cuMemCreate");
	cr_expect(hf && sp_json_u64(hf, "bytes", 0) == 4 << 20, "no host_free record of 4 MiB for the cuMemRelease");
	const struct sp_json *cp = nth(&e, "copy", "cudaMemcpy", 0);
	cr_assert(cp);
	cr_expect(str_eq(cp, "host_memory", "pinned"), "the copy from host VMM memory: %s", sp_json_str(cp, "host_memory"));
	expect_same_stdout(&e, "tests/bin/cuda_edges", "vmmhost", NULL);
	edge_free(&e);
}

/*
 * A forked child, which never calls CUDA, must not write the parent's run of
 * query polls as its own sync record at its exit (begun before the child
 * existed).
 */
Test(cuda_edges, a_forked_child_does_not_record_the_parents_polls, .timeout = 60)
{
	struct edge e;
	edge_run(&e, "tests/bin/cuda_edges", "pollfork", 1, NULL);
	cr_assert(strstr(e.res.out, "cudaStreamQuery before the fork: not ready; child exited 0"), "%s", e.res.out);
	const struct sp_json *l = nth(&e, "launch", NULL, 0);
	cr_assert(l, "no launch record");
	uint64_t parent = sp_json_u64(l, "pid", 0);
	unsigned polls = 0;
	for (size_t i = 0; i < e.nrec; i++) {
		const struct sp_json *r = e.rec[i];
		const char *k = sp_json_str(r, "kind");
		if (k && (!strcmp(k, "sync") || !strcmp(k, "copy") || !strcmp(k, "launch")))
			cr_expect_eq(sp_json_u64(r, "pid", 0), parent, "a %s record (%s) in the child, which made no CUDA call",
				     k, sp_json_str(r, "api"));
		polls += str_eq(r, "api", "cudaStreamQuery") && sp_json_u64(r, "pid", 0) == parent;
	}
	cr_expect_eq(polls, 1, "the parent's poll: %u records", polls);
	edge_free(&e);
}

/*
 * A cudaMalloc of 0 bytes (a NULL pointer, never freed) takes no slot of the
 * allocation table: were each to take one for good, after 66000 of them the
 * table would be full, and the 1 MiB allocated next not found at its free
 * (bytes 0, live 1 MiB).
 */
Test(cuda_edges, zero_byte_allocations_leave_the_books_alone, .timeout = 120)
{
	static const struct want_mem want[] = {
	    {"alloc", "cudaMalloc", 0, 1 << 20, 1 << 20},
	    {"free", "cudaFree", 0, 1 << 20, 0},
	};
	struct edge e;
	edge_run(&e, "tests/bin/cuda_edges", "malloczero", 1, NULL);
	cr_assert(strstr(e.res.out, "malloczero: 0 calls failed, 66000 NULL pointers"), "%s", e.res.out);
	cr_assert_eq(count(&e, "alloc", "cudaMalloc"), 66001);
	cr_expect_eq(count(&e, "free", NULL), 1, "cudaFree(NULL) is no free");
	/* the last alloc and free records are the 1 MiB's */
	struct edge tail = e;
	size_t skip = 0;
	for (size_t i = 0; i < e.nrec && skip < 66000; i++)
		skip += str_eq(e.rec[i], "kind", "alloc");
	while (skip < e.nrec && !str_eq(e.rec[skip], "kind", "alloc"))
		skip++;
	tail.rec = e.rec + skip;
	tail.nrec = e.nrec - skip;
	expect_alloc_free(&tail, want, sizeof(want) / sizeof(want[0]));
	for (unsigned k = 0; k < 3; k++) {
		const struct sp_json *z = nth(&e, "alloc", "cudaMalloc", k * 30000);
		cr_expect(z && sp_json_u64(z, "bytes", 1) == 0 && sp_json_u64(z, "live_bytes", 1) == 0,
			  "zero-byte allocation %u: bytes and live bytes 0", k * 30000);
	}
	edge_free(&e);
}

/*
 * Launch chains (cuda_gpu.c): a launch right behind this thread's last timed
 * op on its stream is timed by its end event alone. The scenario's kernels
 * write their own start and end; ground truth for each launch's GPU span:
 * its duration within 5% (at least 0.3 ms: the simulated stream's thread
 * wakes late on a loaded machine) of the kernel's own, its begin from 5 ms
 * before the kernel's own start to 1 ms after (as kernel_time_misses). The
 * 24 launches of two threads taking turns on one stream are where a chain
 * must break (timed from their own thread's previous kernel they read ~6 ms),
 * the last of phase 4, behind a wait for another stream's 10 ms kernel
 * (~12 ms), and the two of phase 5, each behind 15 ms of host function or
 * stream callback (~17 ms when the chain went through them).
 * Returns the misses, *why the first one.
 */
static unsigned chain_misses(const struct edge *e, const char *truth, char *why, size_t whylen)
{
	const struct sp_json *l[128];
	unsigned n = 0, miss = 0;
	for (size_t i = 0; i < e->nrec && n < 128; i++)
		if (str_eq(e->rec[i], "kind", "launch"))
			l[n++] = e->rec[i];
	cr_assert_eq(n, 69, "%u launch records for 69 launches", n);
	for (unsigned i = 1; i < n; i++) /* in call order (the two threads' calls are serialised) */
		for (unsigned j = i; j > 0 && sp_json_u64(l[j - 1], "begin_ns", 0) > sp_json_u64(l[j], "begin_ns", 0); j--) {
			const struct sp_json *t = l[j];
			l[j] = l[j - 1];
			l[j - 1] = t;
		}
	const char *p = truth;
	for (unsigned i = 0; i < n; i++) {
		long long ks, ke;
		int used = 0;
		cr_assert_eq(sscanf(p, "%lld %lld%n", &ks, &ke, &used), 2, "truth line %u missing", i);
		p += used;
		struct sp_json *gb = sp_json_get(l[i], "gpu_begin_ns"), *ge = sp_json_get(l[i], "gpu_end_ns");
		double slept = (double)(ke - ks), tol = slept * 0.05 > 3e5 ? slept * 0.05 : 3e5;
		const char *err = NULL;
		double gpu = 0;
		if (!gb || !ge)
			err = "no GPU time";
		else if (fabs((gpu = ge->num - gb->num) - slept) > tol)
			err = "GPU duration off";
		else if (gb->num - (double)ks > 1e6 || gb->num - (double)ks < -5e6)
			err = "GPU begin off";
		if (err && !miss++)
			snprintf(why, whylen, "launch %u: %s: GPU %.3f ms from %+.3f ms, the kernel's own %.3f ms", i, err,
				 gpu / 1e6, gb ? (gb->num - (double)ks) / 1e6 : 0, slept / 1e6);
	}
	return miss;
}

Test(cuda_edges, launches_behind_a_timed_op_take_one_event_and_keep_their_gpu_time, .timeout = 180)
{
	/* NOTE: up to three runs, as kernel_gpu_time_matches_the_kernels_own_clock: a late stream thread is not a hook's */
	char why[256] = "";
	unsigned miss = 1;
	unsigned long records = 0;
	for (int attempt = 0; attempt < 3 && miss; attempt++) {
		char *tmp = sp_t_tmpdir("chain");
		char tv[1100], cv[1100];
		snprintf(tv, sizeof(tv), "CHAIN_TRUTH=%s/truth", tmp);
		snprintf(cv, sizeof(cv), "SIMGPU_COUNT_FILE=%s/count", tmp);
		const char *env[] = {tv, cv, "STEPPROF_KERNEL_TIMING=all", NULL};
		struct edge e;
		edge_run(&e, "tests/bin/cuda_edges", "chain", 1, env);
		cr_assert(strstr(e.res.out, "chain: 0 launches failed"), "%s", e.res.out);
		char *truth = sp_t_read_file(tv + strlen("CHAIN_TRUTH="), NULL);
		char *cnt = sp_t_read_file(cv + strlen("SIMGPU_COUNT_FILE="), NULL);
		cr_assert(truth && cnt, "the scenario wrote no truth or the simulator no count");
		cr_assert_eq(sscanf(cnt, "event_records %lu", &records), 1, "%s", cnt);
		miss = chain_misses(&e, truth, why, sizeof(why));
		free(truth);
		free(cnt);
		edge_free(&e);
		sp_t_rmrf(tmp);
		free(tmp);
	}
	cr_expect_eq(miss, 0, "%s", why);
	/*
	 * One end event per launch (69), a begin event for each of the 24 whose
	 * chain the other thread broke, for the 3 of phase 4 (each on another
	 * stream than the one before, or behind a wait) and the 2 of phase 5
	 * behind a host function, the program's own record, at most 8 more for
	 * the first launch of the other phases and the anchors; a begin and an
	 * end event each would be 139 and more.
	 */
	cr_expect_leq(records, 69 + 24 + 3 + 2 + 1 + 8, "%lu event records for 69 launches", records);
}

/*
 * A first step of 3000 launches before the program's first sync: no thread
 * has an anchor, so the reclaim takes one on stepprof's private stream;
 * without it, past the pending list's 2048 ops the rest would go untimed
 * until that sync (2,048 of 3,000 timed; their GPU time read as sync).
 */
Test(cuda_edges, a_first_step_longer_than_the_pending_list_is_timed_before_any_sync, .timeout = 120)
{
	struct edge e;
	edge_run(&e, "tests/bin/cuda_edges", "firststep", 1, NULL);
	cr_assert(strstr(e.res.out, "firststep: 0 calls failed"), "%s", e.res.out);
	unsigned all = count(&e, "launch", NULL), timed = 0;
	for (size_t i = 0; i < e.nrec; i++)
		timed += str_eq(e.rec[i], "kind", "launch") && sp_json_get(e.rec[i], "gpu_begin_ns") != NULL;
	cr_assert_eq(all, 3000, "%u launch records for 3000 launches", all);
	cr_expect_eq(timed, 3000, "%u of 3000 launches timed", timed);
	edge_free(&e);
}

/*
 * GPU spans are read back in batches and written two to a 32-byte slot
 * (GPU_SPAN2, format 1.3): the first step's 3000 timed launches above leave
 * 3000 gpu_span records in at most 1500 + (one per batch) slots, not one
 * slot each: 3000.
 */
Test(cuda_edges, gpu_spans_are_stored_two_to_a_slot, .timeout = 120)
{
	struct edge e;
	edge_run(&e, "tests/bin/cuda_edges", "firststep", 1, NULL);
	cr_assert(strstr(e.res.out, "firststep: 0 calls failed"), "%s", e.res.out);
	char *argv[] = {(char *)sp_t_build("bin/stepprof"), "info", "--json", e.dir, NULL};
	struct sp_t_result r;
	cr_assert_eq(sp_t_run(&r, argv, NULL, NULL, 60), 0, "stepprof info: %s", r.err);
	struct sp_json *j = sp_json_parse(r.out);
	cr_assert(j, "info --json is not JSON:\n%s", r.out);
	struct sp_json *files = sp_json_get(j, "files");
	uint64_t spans = 0, records = 0, slots = 0, multi = 0;
	for (size_t i = 0; files && i < files->n; i++) {
		const struct sp_json *f = sp_json_at(files, i);
		spans += sp_json_u64(f, "records_by_kind.gpu_span", 0);
		records += sp_json_u64(f, "records", 0);
		slots += sp_json_u64(f, "record_slots", 0);
		/* records of two slots: copies, memsets, allocations */
		static const char *const two[] = {"copy", "memset", "alloc", "free", "alloc_failed"};
		for (size_t k = 0; k < sizeof(two) / sizeof(two[0]); k++) {
			char key[64];
			snprintf(key, sizeof(key), "records_by_kind.%s", two[k]);
			multi += sp_json_u64(f, key, 0);
		}
	}
	cr_assert_eq(spans, 3000, "%llu gpu_span records for 3000 timed launches", (unsigned long long)spans);
	/* every record one slot, copies and allocations two, minus one per pair of spans */
	uint64_t pairs = records + multi - slots;
	cr_expect_leq(pairs, 1500, "%llu pairs of 3000 spans", (unsigned long long)pairs);
	cr_expect_geq(pairs, 1400, "%llu pairs of 3000 spans (records %llu, slots %llu)", (unsigned long long)pairs,
		      (unsigned long long)records, (unsigned long long)slots);
	sp_json_free(j);
	sp_t_result_free(&r);
	edge_free(&e);
}

/*
 * Batches of copies (cuda_edges batch): one copy record per direction and host
 * memory of a batch, bytes summed, the batch's GPU time on its group of the most
 * bytes, through every door the program takes (the runtime's driver table, the
 * driver by name, CUDA 12.8's variant through cuGetProcAddress), in both builds.
 * Unrecorded, an H2D that a loader moves with cudaMemcpyBatchAsync would be
 * missing from h2d altogether.
 */
static void batch_records(const char *bin, const char *sfx)
{
	char v1[64], v2[64], v2_3d[64];
	/* cuGetProcAddress's default mode is the build's: per-thread in the _ptds one (cuda.h) */
	snprintf(v1, sizeof(v1), "cuMemcpyBatchAsync%s", sfx);
	snprintf(v2, sizeof(v2), "cuMemcpyBatchAsync_v2%s", sfx);
	snprintf(v2_3d, sizeof(v2_3d), "cuMemcpy3DBatchAsync_v2%s", sfx);
	const struct {
		const char *api, *dir, *mem;
		uint64_t bytes;
		int timed, result;
	} want[] = {
	    {v2, "h2d", "pinned", 1 << 20, 1, 0},	  {v2, "h2d", "pageable", 256 << 10, 1, 0},
	    {v2, "d2h", "pinned", 64 << 10, 0, 0},	  {v2, "d2d", "device", 1 << 20, 1, 0},
	    {v2_3d, "h2d", "pinned", 32 << 10, 1, 0}, {v1, "h2d", "pinned", 4096, 1, 0},
	    {v2, "none", "unknown", 0, 0, 1}, /* refused: its arrays are not read */
	    {v2, "none", "unknown", 0, 0, 1}, /* refused, 2^40 copies named: read, they would crash it */
	};
	struct edge e;
	edge_run(&e, bin, "batch", 1, NULL);
	const struct sp_json *got[16];
	unsigned n = 0, other = 0;
	for (size_t i = 0; i < e.nrec; i++) {
		if (!str_eq(e.rec[i], "kind", "copy"))
			continue;
		const char *api = sp_json_str(e.rec[i], "api");
		if (api && strstr(api, "BatchAsync") && n < 16)
			got[n++] = e.rec[i];
		else
			other++;
	}
	size_t nw = sizeof(want) / sizeof(want[0]);
	cr_assert_eq(n, nw, "%s: %u batch copy records, expected %zu", bin, n, nw);
	cr_expect_eq(other, 5, "%s: %u other copies (the program's 5 cudaMemcpy checks)", bin, other);
	for (unsigned k = 0; k < nw; k++) {
		const struct sp_json *c = got[k];
		cr_expect(str_eq(c, "api", want[k].api) && str_eq(c, "direction", want[k].dir) &&
			      str_eq(c, "host_memory", want[k].mem),
			  "%s: batch copy %u is %s %s %s, expected %s %s %s", bin, k, sp_json_str(c, "api"),
			  sp_json_str(c, "direction"), sp_json_str(c, "host_memory"), want[k].api, want[k].dir,
			  want[k].mem);
		cr_expect_eq(sp_json_u64(c, "bytes", 0), want[k].bytes, "%s: batch copy %u: %llu bytes", bin, k,
			     (unsigned long long)sp_json_u64(c, "bytes", 0));
		cr_expect_eq(sp_json_num(c, "result", -1), want[k].result, "%s: batch copy %u: result", bin, k);
		int timed = sp_json_get(c, "gpu_begin_ns") != NULL;
		cr_expect_eq(timed, want[k].timed, "%s: batch copy %u %s GPU time", bin, k, timed ? "has" : "has no");
		cr_expect_eq(sp_json_u64(c, "op", 0) != 0, want[k].timed || want[k].result, "%s: batch copy %u: op",
			     bin, k);
		if (timed)
			cr_expect_gt(sp_json_u64(c, "gpu_end_ns", 0), sp_json_u64(c, "gpu_begin_ns", 0));
	}
	/* the mixed batch: one call, two records */
	cr_expect_eq(sp_json_u64(got[1], "begin_ns", 0), sp_json_u64(got[2], "begin_ns", 1));
	cr_expect_eq(sp_json_u64(got[1], "end_ns", 0), sp_json_u64(got[2], "end_ns", 1));
	/* a pageable group names its call site, in the program */
	const char *site = sp_json_str(got[1], "site");
	cr_expect(site && strstr(site, "cuda_edges"), "%s: pageable batch site %s", bin, site ? site : "(none)");
	cr_assert(strstr(e.res.out, "5 failIdx SIZE_MAX"), "%s", e.res.out);
	cr_assert(!strstr(e.res.out, "differs"), "%s", e.res.out);
	expect_same_stdout(&e, bin, "batch", NULL);
	edge_free(&e);
}

Test(cuda_edges, batches_of_copies_are_recorded_by_direction_and_host_memory, .timeout = 60)
{
	batch_records("tests/bin/cuda_edges", "");
	batch_records("tests/bin/cuda_edges_ptds", "_ptsz");
}
