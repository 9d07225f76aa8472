/*
 * test_real_cudart.c - NVIDIA's real CUDA 13 runtime (libcudart.so.13 and
 * libcudart_static.a from the toolkit) under LD_PRELOAD=libstepprof.so, on the
 * simulated driver (build/simgpu/libcuda.so.1 through LD_LIBRARY_PATH).
 *
 * What the real runtime does here: it makes all its cuGetProcAddress requests
 * (440 in 13.0), then asks the driver for NVIDIA's private export tables, which
 * the simulator does not have, and every later runtime call fails
 * (cudaErrorInvalidValue). So:
 *
 *   1. helpers: skip reasons, runs, logs
 *   2. the door: for every request of the real runtime, the pointer it RECEIVED
 *      (seen above stepprof by build/tests/bin/real_spy.so) is stepprof's wrapper of
 *      exactly the variant the driver hands out for that request (the one
 *      cuda.h names), or the driver's own pointer for an unhooked name
 *   3. the program is unchanged (stdout, exit status), and its runtime calls
 *      are recorded once each with the code it got (shared); with the static
 *      runtime, nothing reaches the driver wrappers, and nothing is invented
 *
 * Every test skips with a printed reason when the toolkit's runtime is absent.
 */
#include <criterion/criterion.h>

#include <dirent.h>
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "testlib.h"

/* ---------------------------------------------------------- 1. helpers */

static const char *cuda_lib(void)
{
	static const char *path;
	if (!path)
		path = sp_t_cuda("lib64/libcudart.so.13");
	return path;
}

/* Skips the test (with the reason printed) when something it needs is absent. */
static void need(const char *prog)
{
	if (access(cuda_lib(), R_OK) != 0)
		cr_skip_test("NVIDIA's runtime %s is absent (install the CUDA 13 toolkit)", cuda_lib());
	const char *b = sp_t_build(prog);
	if (access(b, X_OK) != 0)
		cr_skip_test("%s was not built (tests/workloads/cuda/real.mk builds it when %s exists)", b, cuda_lib());
	if (access(sp_t_build("simgpu/libcuda.so.1"), R_OK) != 0)
		cr_skip_test("the simulated driver build/simgpu/libcuda.so.1 was not built");
}

static char *absolute(const char *rel)
{
	char *r = realpath(rel, NULL);
	cr_assert(r, "no %s", rel);
	return r;
}

struct real_run {
	char *dir; /* scratch: trace directory, logs */
	struct sp_t_result res;
	char *spy;    /* what the runtime received, one line per request */
	char *driver; /* what the driver was asked (SIMGPU_LOG_PROCS) */
};

/* prog under the simulated driver; preload: libstepprof.so; spy: real_spy.so first. */
static void run_real(struct real_run *r, const char *prog, int preload, int spy)
{
	memset(r, 0, sizeof(*r));
	r->dir = sp_t_tmpdir("real_cudart");
	char *simgpu = absolute(sp_t_build("simgpu")), *sp = absolute(sp_t_build("lib/libstepprof.so"));
	char *spylib = spy ? absolute(sp_t_build("tests/bin/real_spy.so")) : NULL;
	char e_ld[PATH_MAX + 32], e_pre[3 * PATH_MAX], e_next[PATH_MAX + 32], e_log[PATH_MAX + 32],
	    e_drv[PATH_MAX + 32], e_dir[PATH_MAX + 32];
	snprintf(e_ld, sizeof(e_ld), "LD_LIBRARY_PATH=%s", simgpu);
	snprintf(e_pre, sizeof(e_pre), "LD_PRELOAD=%s%s%s", spy ? spylib : "", spy && preload ? ":" : "",
		 preload ? sp : "");
	snprintf(e_next, sizeof(e_next), "REAL_SPY_NEXT=%s", sp);
	snprintf(e_log, sizeof(e_log), "REAL_SPY_LOG=%s/spy.log", r->dir);
	snprintf(e_drv, sizeof(e_drv), "SIMGPU_LOG_PROCS=%s/driver.log", r->dir);
	snprintf(e_dir, sizeof(e_dir), "STEPPROF_DIR=%s/trace", r->dir);
	char *env[] = {e_ld, e_pre, e_next, e_log, e_drv, e_dir, NULL};
	char *argv[] = {(char *)sp_t_build(prog), NULL};
	int st = sp_t_run(&r->res, argv, env, NULL, 60);
	cr_assert_eq(st, 0, "%s exited %d: %s", prog, st, r->res.err);
	char p[PATH_MAX + 16];
	snprintf(p, sizeof(p), "%s/spy.log", r->dir);
	r->spy = sp_t_read_file(p, NULL);
	snprintf(p, sizeof(p), "%s/driver.log", r->dir);
	r->driver = sp_t_read_file(p, NULL);
	free(simgpu);
	free(sp);
	free(spylib);
}

static void run_free(struct real_run *r)
{
	sp_t_rmrf(r->dir);
	free(r->dir);
	free(r->spy);
	free(r->driver);
	sp_t_result_free(&r->res);
}

/* Split text into lines in place; returns the count, *out malloc'd. */
static size_t lines_of(char *text, char ***out)
{
	size_t n = 0, cap = 64;
	char **v = malloc(cap * sizeof(*v));
	for (char *s = text, *nl; s && *s; s = nl ? nl + 1 : NULL) {
		nl = strchr(s, '\n');
		if (nl)
			*nl = 0;
		if (n == cap)
			v = realloc(v, (cap *= 2) * sizeof(*v));
		v[n++] = s;
	}
	*out = v;
	return n;
}

/* ---------------------------------------------------------- 2. the door */

/* The cu* names libstepprof.so exports (its hooks), one per line, from nm -D. */
static char *stepprof_exports(void)
{
	char *argv[] = {"nm", "-D", "--defined-only", (char *)sp_t_build("lib/libstepprof.so"), NULL};
	struct sp_t_result r;
	int st = sp_t_run(&r, argv, NULL, NULL, 30);
	if (st != 0)
		cr_skip_test("nm could not list libstepprof.so's exports: %s", r.err);
	char *out = r.out;
	r.out = NULL;
	sp_t_result_free(&r);
	return out;
}

static int exported(const char *nm_out, const char *sym)
{
	size_t n = strlen(sym);
	for (const char *p = nm_out; (p = strstr(p, sym)); p += n)
		if (p > nm_out && p[-1] == ' ' && (p[n] == '\n' || p[n] == '@' || p[n] == 0))
			return 1;
	return 0;
}

/* "req ver=V flags=F r=R -> lib sym": the request part and the answer part. */
static void split_answer(const char *line, char *req, size_t rn, char *lib, char *sym)
{
	const char *arrow = strstr(line, " -> ");
	cr_assert(arrow, "spy line without an answer: %s", line);
	snprintf(req, rn, "%.*s", (int)(arrow - line), line);
	cr_assert_eq(sscanf(arrow + 4, "%255s %255s", lib, sym), 2, "spy line: %s", line);
}

/*
 * From cuda.h: the variant a CUDA 13 runtime must receive for these requests
 * (cuda.h #defines cuMemcpyHtoD as cuMemcpyHtoD_v2, and as
 * __CUDA_API_PTDS(cuMemcpyHtoD_v2) = cuMemcpyHtoD_v2_ptds for the per-thread
 * default stream; cuMemcpyHtoDAsync as ..._v2_ptsz, etc.), each one a hook.
 */
static const char *const from_cuda_h[][2] = {
    {"cuMemcpyHtoD ver=3020 flags=0", "cuMemcpyHtoD_v2"},
    {"cuMemcpyHtoD ver=7000 flags=2", "cuMemcpyHtoD_v2_ptds"},
    {"cuMemcpyHtoDAsync ver=3020 flags=0", "cuMemcpyHtoDAsync_v2"},
    {"cuMemcpyHtoDAsync ver=7000 flags=2", "cuMemcpyHtoDAsync_v2_ptsz"},
    {"cuMemcpyDtoH ver=7000 flags=2", "cuMemcpyDtoH_v2_ptds"},
    {"cuMemAlloc ver=3020 flags=0", "cuMemAlloc_v2"},
    {"cuMemFree ver=3020 flags=0", "cuMemFree_v2"},
    {"cuStreamSynchronize ver=7000 flags=2", "cuStreamSynchronize_ptsz"},
    {"cuLaunchKernel ver=7000 flags=2", "cuLaunchKernel_ptsz"},
    {"cuCtxSynchronize ver=2000 flags=0", "cuCtxSynchronize"},
    {"cuGetProcAddress ver=12000 flags=0", "cuGetProcAddress_v2"},
};

static void check_door(const char *prog)
{
	need(prog);
	need("tests/bin/real_spy.so");
	struct real_run bare, pre;
	run_real(&bare, prog, 0, 1);
	run_real(&pre, prog, 1, 1);
	cr_assert(bare.spy && pre.spy && bare.driver && pre.driver, "no spy or driver log (%s)", pre.res.err);
	char *nm = stepprof_exports();
	char **b, **p, **db, **dp;
	size_t nb = lines_of(bare.spy, &b), np = lines_of(pre.spy, &p);
	size_t ndb = lines_of(bare.driver, &db), ndp = lines_of(pre.driver, &dp);

	/* Line 0: what dlsym(handle, "cuGetProcAddress_v2") gave the runtime. */
	cr_assert(nb > 1 && np > 1, "the runtime made no request");
	cr_expect(strstr(b[0], "-> libcuda.so.1 cuGetProcAddress_v2"), "without stepprof: %s", b[0]);
	cr_expect(strstr(p[0], "-> libstepprof.so cuGetProcAddress_v2"), "through the dlsym door: %s", p[0]);

	/* The spy saw every request the driver received, in the driver's order. */
	cr_assert_eq(nb - 1, ndb, "spy saw %zu requests, the driver %zu (without stepprof)", nb - 1, ndb);
	cr_assert_eq(np - 1, ndp, "spy saw %zu requests, the driver %zu (with stepprof)", np - 1, ndp);
	cr_assert_eq(nb, np, "the runtime made %zu requests without stepprof, %zu with it", nb - 1, np - 1);

	size_t hooked = 0, matched_cuda_h = 0;
	for (size_t i = 1; i < nb; i++) {
		char rq_b[512], rq_p[512], lib_b[256], sym_b[256], lib_p[256], sym_p[256];
		split_answer(b[i], rq_b, sizeof(rq_b), lib_b, sym_b);
		split_answer(p[i], rq_p, sizeof(rq_p), lib_p, sym_p);
		cr_assert_str_eq(rq_b, rq_p, "request %zu differs with stepprof", i);
		cr_assert(!strncmp(dp[i - 1], rq_p, strlen(dp[i - 1])), "request %zu: driver log %s, spy %s", i,
			  dp[i - 1], rq_p);
		if (!strcmp(lib_b, "-")) { /* the driver refused it: so must the door */
			cr_expect_str_eq(lib_p, "-", "request %s: refused by the driver, answered with stepprof (%s)",
					 rq_p, sym_p);
			continue;
		}
		cr_assert_str_eq(lib_b, "libcuda.so.1", "without stepprof, %s answered from %s", rq_b, lib_b);
		if (exported(nm, sym_b)) {
			hooked++;
			cr_expect(!strcmp(lib_p, "libstepprof.so") && !strcmp(sym_p, sym_b),
				  "%s: the driver hands out %s, the runtime received %s %s instead of stepprof's", rq_p,
				  sym_b, lib_p, sym_p);
		} else {
			cr_expect(!strcmp(lib_p, "libcuda.so.1") && !strcmp(sym_p, sym_b),
				  "%s (not hooked): the runtime received %s %s, not the driver's %s", rq_p, lib_p,
				  sym_p, sym_b);
		}
		for (size_t k = 0; k < sizeof(from_cuda_h) / sizeof(from_cuda_h[0]); k++)
			if (!strncmp(rq_p, from_cuda_h[k][0], strlen(from_cuda_h[k][0])) &&
			    rq_p[strlen(from_cuda_h[k][0])] == ' ') {
				matched_cuda_h++;
				cr_expect(!strcmp(lib_p, "libstepprof.so") && !strcmp(sym_p, from_cuda_h[k][1]),
					  "%s: cuda.h names %s, the runtime received %s %s", rq_p, from_cuda_h[k][1],
					  lib_p, sym_p);
			}
	}
	cr_log_info("%s: %zu requests, %zu answered with stepprof's wrapper", prog, nb - 1, hooked);
	cr_expect_geq(hooked, 40, "only %zu of the runtime's requests reach a wrapper", hooked);
	cr_expect_eq(matched_cuda_h, sizeof(from_cuda_h) / sizeof(from_cuda_h[0]),
		     "the runtime asked for %zu of the %zu requests checked against cuda.h", matched_cuda_h,
		     sizeof(from_cuda_h) / sizeof(from_cuda_h[0]));
	free(b);
	free(p);
	free(db);
	free(dp);
	free(nm);
	run_free(&bare);
	run_free(&pre);
}

Test(real_cudart, every_request_of_the_shared_runtime_gets_the_right_wrapper, .timeout = 120)
{
	check_door("tests/bin/real_cudart");
}

Test(real_cudart, every_request_of_the_static_runtime_gets_the_right_wrapper, .timeout = 120)
{
	check_door("tests/bin/real_cudart_static");
}

/* ------------------------------------------- 3. program and its records */

/* Records of the CUDA kinds in the run's trace files, as "kind api result" lines. */
static size_t cuda_records(const char *dir, char ***out)
{
	static const char *const kinds[] = {"copy", "memset",	  "launch",    "sync",		"alloc", "alloc_failed",
					    "free", "host_alloc", "host_free", "host_register", NULL};
	size_t n = 0;
	char **v = calloc(1024, sizeof(*v));
	char tdir[PATH_MAX];
	snprintf(tdir, sizeof(tdir), "%s/trace", dir);
	DIR *d = opendir(tdir);
	/* A run that recorded nothing makes no directory: the static runtime's calls all
	 * fail on the simulated driver, and the driver's log, opened for appending, is
	 * output, not input (docs/input-capture.md): no record at all. */
	if (!d && errno == ENOENT) {
		*out = v;
		return 0;
	}
	cr_assert(d, "no trace directory %s", tdir);
	struct dirent *de;
	while ((de = readdir(d))) {
		if (!strstr(de->d_name, ".sptrace"))
			continue;
		char path[PATH_MAX + 256];
		snprintf(path, sizeof(path), "%s/%s", tdir, de->d_name);
		char *argv[] = {(char *)sp_t_build("bin/stepprof"), "dump", "--json", path, NULL};
		struct sp_t_result r;
		cr_assert_eq(sp_t_run(&r, argv, NULL, NULL, 60), 0, "stepprof dump %s: %s", path, r.err);
		struct sp_json **lines;
		size_t nl = sp_json_parse_lines(r.out, &lines);
		for (size_t i = 0; i < nl; i++) {
			const char *k = lines[i] ? sp_json_str(lines[i], "kind") : NULL;
			int cuda = 0;
			for (int j = 0; k && kinds[j]; j++)
				cuda |= !strcmp(k, kinds[j]);
			if (!cuda || n == 1023)
				continue;
			char buf[256];
			snprintf(buf, sizeof(buf), "%s %s %lld", k, sp_json_str(lines[i], "api"),
				 (long long)sp_json_i64(lines[i], "result", -999));
			v[n++] = strdup(buf);
		}
		sp_json_free_lines(lines, nl);
		sp_t_result_free(&r);
	}
	closedir(d);
	*out = v;
	return n;
}

static int cmp_str(const void *a, const void *b)
{
	return strcmp(*(char *const *)a, *(char *const *)b);
}

static void check_program(const char *prog, int is_static)
{
	need(prog);
	struct real_run bare, pre;
	run_real(&bare, prog, 0, 0);
	run_real(&pre, prog, 1, 0);
	cr_expect_str_eq(pre.res.out, bare.res.out, "stdout differs under the preload");
	cr_expect_eq(pre.res.status, bare.res.status);

	/* What the program says it called: "call <api> <kind> <result>". */
	char *text = strdup(bare.res.out), **l, **want = calloc(256, sizeof(char *));
	size_t nl = lines_of(text, &l), nwant = 0, ncalls = 0, nok = 0;
	for (size_t i = 0; i < nl; i++) {
		char api[128], kind[64];
		int res;
		if (sscanf(l[i], "call %127s %63s %d", api, kind, &res) != 3)
			continue;
		ncalls++;
		nok += res == 0;
		if (!strcmp(kind, "-") || nwant == 255)
			continue;
		/* The static runtime is invisible: a call is seen only as the driver call it makes. */
		if (is_static && res != 0)
			continue;
		char buf[256];
		if (is_static)
			snprintf(buf, sizeof(buf), "%s", kind);
		else
			snprintf(buf, sizeof(buf), "%s %s %d", kind, api, res);
		want[nwant++] = strdup(buf);
	}
	cr_log_info("%s: %zu runtime calls, %zu succeeded on the simulated driver", prog, ncalls, nok);
	cr_assert_gt(ncalls, 10, "the program printed no calls: %s", bare.res.out);

	char **got;
	size_t ngot = cuda_records(pre.dir, &got);
	if (is_static) /* only the kinds: the api is the driver function */
		for (size_t i = 0; i < ngot; i++)
			*strchr(got[i], ' ') = 0;
	qsort(want, nwant, sizeof(*want), cmp_str);
	qsort(got, ngot, sizeof(*got), cmp_str);
	cr_expect_eq(ngot, nwant, "%zu CUDA records, the program made %zu recordable calls", ngot, nwant);
	for (size_t i = 0; i < ngot && i < nwant; i++)
		cr_expect_str_eq(got[i], want[i], "record %zu (sorted)", i);
	for (size_t i = 0; i < ngot; i++)
		free(got[i]);
	for (size_t i = 0; i < nwant; i++)
		free(want[i]);
	free(got);
	free(want);
	free(l);
	free(text);
	run_free(&bare);
	run_free(&pre);
}

Test(real_cudart, shared_runtime_program_unchanged_and_each_call_recorded_once, .timeout = 120)
{
	check_program("tests/bin/real_cudart", 0);
}

Test(real_cudart, static_runtime_program_unchanged_and_only_driver_calls_recorded, .timeout = 120)
{
	check_program("tests/bin/real_cudart_static", 1);
}
