/*
 * test_cuda_sites.c - allocation and pageable-copy call sites end to end, on
 * the simulated GPU: a program with two functions that call cudaMalloc and two
 * that make a pageable cudaMemcpy, built against the shared runtime (the
 * runtime wrappers behind the PLT see the program's return address) and the
 * static one (nvcc's default: only the driver wrappers are reached, from
 * inside cudart), each with and without -rdynamic, runs under
 * LD_PRELOAD=libstepprof.so; every alloc and pageable copy of
 * `stepprof dump --json` must name, as its site's first frame, the function
 * that made the call.
 *
 * Ground truth: the program's own functions, told apart by the bytes each one
 * asks for, and their address ranges from `nm -S` (the site of a program that
 * is not -rdynamic is "module!+0xoffset", from the load address of a PIE).
 *
 *   1. the program and its build; nm
 *   2. run, dump, check every record
 *   3. the four builds
 */
#include <criterion/criterion.h>

#include <dirent.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "testlib.h"

/* ------------------------------------------------ 1. program, build, nm */

/*
 * alloc_a/alloc_b and copy_a/copy_b: one call each, told apart by size. -O0:
 * no inlining, no tail call (which would take the caller's frame off the stack).
 * The order changes between rounds so that no site can be right by order alone.
 */
static const char prog[] =
    "#include <cuda_runtime_api.h>\n"
    "#include <stdio.h>\n"
    "#include <stdlib.h>\n"
    "void *alloc_a(void) { void *p = 0; if (cudaMalloc(&p, 4096)) return 0; return p; }\n"
    "void *alloc_b(void) { void *p = 0; if (cudaMalloc(&p, 8192)) return 0; return p; }\n"
    "int copy_a(void *d, const void *h) { return cudaMemcpy(d, h, 1024, cudaMemcpyHostToDevice); }\n"
    "int copy_b(void *d, const void *h) { return cudaMemcpy(d, h, 2048, cudaMemcpyHostToDevice); }\n"
    "int main(void) {\n"
    "  char *h = calloc(1, 4096);\n"
    "  for (int i = 0; i < 3; i++) {\n"
    "    void *a, *b;\n"
    "    if (i == 1) { b = alloc_b(); a = alloc_a(); } else { a = alloc_a(); b = alloc_b(); }\n"
    "    if (!a || !b) return 2;\n"
    "    if (i == 1 ? copy_b(b, h) || copy_a(a, h) : copy_a(a, h) || copy_b(b, h)) return 3;\n"
    "    cudaFree(a); cudaFree(b);\n"
    "  }\n"
    "  printf(\"ok\\n\"); free(h); return 0; }\n";

struct fn_range {
	const char *name;
	unsigned long lo, hi; /* [lo, hi): offsets in the executable, from nm -S */
	uint64_t bytes;	      /* what its call asks for */
	const char *kind;     /* its record: alloc or copy */
};

static struct fn_range fns[] = {
    {"alloc_a", 0, 0, 4096, "alloc"},
    {"alloc_b", 0, 0, 8192, "alloc"},
    {"copy_a", 0, 0, 1024, "copy"},
    {"copy_b", 0, 0, 2048, "copy"},
};
#define NFNS (sizeof(fns) / sizeof(fns[0]))

static char *build_prog(const char *dir, int static_rt, int rdynamic)
{
	char src[512], lib[PATH_MAX + 32], rp[PATH_MAX + 32], simgpu[PATH_MAX], inc[PATH_MAX + 8];
	char *exe = malloc(512);
	struct sp_t_result r;

	snprintf(inc, sizeof(inc), "-I%s", sp_t_cuda("include"));

	snprintf(src, sizeof(src), "%s/prog.c", dir);
	snprintf(exe, 512, "%s/prog", dir);
	cr_assert_eq(sp_t_write_file(src, prog, strlen(prog)), 0);
	cr_assert(realpath(sp_t_build("simgpu"), simgpu), "no %s", sp_t_build("simgpu"));
	snprintf(rp, sizeof(rp), "-Wl,-rpath,%s", simgpu);
	if (static_rt)
		snprintf(lib, sizeof(lib), "%s/libcudart_static.a", simgpu);
	else
		snprintf(lib, sizeof(lib), "-L%s", simgpu);
	char *argv[] = {"cc",
			"-O0",
			"-fPIE",
			"-pie",
			inc,
			"-o",
			exe,
			src,
			lib,
			static_rt ? "-lrt" : "-l:libcudart.so.12",
			rp,
			"-ldl",
			"-lpthread",
			rdynamic ? "-rdynamic" : NULL,
			NULL};
	cr_assert_eq(sp_t_run(&r, argv, NULL, NULL, 60), 0, "cc failed: %s", r.err);
	sp_t_result_free(&r);
	return exe;
}

/* The four functions' ranges from `nm -S` (PIE or not: offsets from the first mapping, as in a site). */
static void read_nm(const char *exe)
{
	struct sp_t_result r;
	char *argv[] = {"nm", "-S", "--defined-only", (char *)exe, NULL};
	cr_assert_eq(sp_t_run(&r, argv, NULL, NULL, 30), 0, "nm: %s", r.err);
	for (size_t i = 0; i < NFNS; i++)
		fns[i].lo = fns[i].hi = 0;
	char *save = NULL;
	for (char *line = strtok_r(r.out, "\n", &save); line; line = strtok_r(NULL, "\n", &save)) {
		unsigned long addr, size;
		char type, name[256];
		if (sscanf(line, "%lx %lx %c %255s", &addr, &size, &type, name) != 4)
			continue;
		for (size_t i = 0; i < NFNS; i++)
			if (!strcmp(name, fns[i].name)) {
				fns[i].lo = addr;
				fns[i].hi = addr + size;
			}
	}
	sp_t_result_free(&r);
	for (size_t i = 0; i < NFNS; i++)
		cr_assert(fns[i].hi > fns[i].lo, "nm shows no %s in %s", fns[i].name, exe);
}

/* ---------------------------------------------- 2. run, dump, check */

static struct sp_json **dump_all(const char *dir, size_t *n)
{
	DIR *d = opendir(dir);
	struct dirent *de;
	struct sp_json **all = NULL;
	*n = 0;
	cr_assert(d, "no trace directory %s", dir);
	while ((de = readdir(d))) {
		if (!strstr(de->d_name, ".sptrace"))
			continue;
		char path[1024];
		snprintf(path, sizeof(path), "%s/%s", dir, de->d_name);
		char *argv[] = {(char *)sp_t_build("bin/stepprof"), "dump", "--json", path, NULL};
		struct sp_t_result r;
		cr_assert_eq(sp_t_run(&r, argv, NULL, NULL, 60), 0, "stepprof dump %s: %s", path, r.err);
		struct sp_json **lines = NULL;
		size_t k = sp_json_parse_lines(r.out, &lines);
		all = realloc(all, (*n + k) * sizeof(*all));
		memcpy(all + *n, lines, k * sizeof(*lines));
		*n += k;
		free(lines);
		sp_t_result_free(&r);
	}
	closedir(d);
	return all;
}

/*
 * Does the site's first frame name fn? "prog!alloc_a+0x1b" (-rdynamic), or
 * "prog!+0x11a2" with the offset inside alloc_a's nm range. The frame is the
 * call instruction (return address - 1): inside the function.
 */
static int first_frame_is(const char *site, const struct fn_range *fn, int rdynamic)
{
	char frame[512];
	size_t len = strcspn(site, " ");
	if (len >= sizeof(frame))
		return 0;
	memcpy(frame, site, len);
	frame[len] = 0;
	if (strncmp(frame, "prog!", 5))
		return 0;
	const char *rest = frame + 5;
	if (rdynamic) {
		size_t m = strlen(fn->name);
		return !strncmp(rest, fn->name, m) && !strncmp(rest + m, "+0x", 3);
	}
	unsigned long off;
	char tail;
	if (sscanf(rest, "+0x%lx%c", &off, &tail) != 1)
		return 0;
	return off >= fn->lo && off < fn->hi;
}

static void check_build(int static_rt, int rdynamic)
{
	const char *what = static_rt ? (rdynamic ? "static runtime, -rdynamic" : "static runtime")
				     : (rdynamic ? "shared runtime, -rdynamic" : "shared runtime");
	char *dir = sp_t_tmpdir("cudasites"), tdir[600], env_dir[700], env_pre[PATH_MAX + 16], pre[PATH_MAX];
	char *exe = build_prog(dir, static_rt, rdynamic);
	read_nm(exe);
	snprintf(tdir, sizeof(tdir), "%s/trace", dir);
	snprintf(env_dir, sizeof(env_dir), "STEPPROF_DIR=%s", tdir);
	cr_assert(realpath(sp_t_build("lib/libstepprof.so"), pre), "libstepprof.so is not built");
	snprintf(env_pre, sizeof(env_pre), "LD_PRELOAD=%s", pre);
	char *argv[] = {exe, NULL};
	char *env[] = {env_pre, env_dir, "STEPPROF_SITES=1", NULL};
	struct sp_t_result r;
	cr_assert_eq(sp_t_run(&r, argv, env, NULL, 60), 0, "%s: the program failed: %s%s", what, r.out, r.err);
	cr_expect_str_eq(r.out, "ok\n");
	sp_t_result_free(&r);

	size_t n;
	struct sp_json **rec = dump_all(tdir, &n);
	size_t seen[NFNS] = {0};
	for (size_t i = 0; i < n; i++) {
		const char *kind = sp_json_str(rec[i], "kind");
		if (!kind || (strcmp(kind, "alloc") && strcmp(kind, "copy")))
			continue;
		const char *hm = sp_json_str(rec[i], "host_memory");
		if (!strcmp(kind, "copy") && !(hm && !strcmp(hm, "pageable")))
			continue;
		uint64_t bytes = sp_json_u64(rec[i], "bytes", 0);
		const struct fn_range *fn = NULL;
		for (size_t k = 0; k < NFNS; k++)
			if (!strcmp(fns[k].kind, kind) && fns[k].bytes == bytes)
				fn = &fns[k];
		if (!fn)
			continue; /* not one of the program's four calls */
		const char *site = sp_json_str(rec[i], "site");
		cr_expect(site && first_frame_is(site, fn, rdynamic), "%s: a %s of %lu bytes (%s) has site %s", what,
			  kind, (unsigned long)bytes, fn->name, site ? site : "(none)");
		seen[fn - fns]++;
	}
	for (size_t k = 0; k < NFNS; k++)
		cr_expect_eq(seen[k], 3, "%s: %zu records of %s's %s, 3 made", what, seen[k], fns[k].name, fns[k].kind);
	sp_json_free_lines(rec, n);
	free(exe);
	sp_t_rmrf(dir);
	free(dir);
}

/* ------------------------------------------------------ 3. the builds */

Test(cuda_sites_e2e, shared_runtime_sites_are_the_callers, .timeout = 120)
{
	check_build(0, 0);
	check_build(0, 1);
}

Test(cuda_sites_e2e, static_runtime_sites_are_the_callers, .timeout = 120)
{
	check_build(1, 0);
	check_build(1, 1);
}
