/*
 * test_simgpu_static.c - the simulated runtime as real programs use it: linked
 * statically (libcudart_static.a) or dynamically (libcudart.so.12), reaching the
 * driver only through dlopen("libcuda.so.1") + cuGetProcAddress, never by linking.
 *
 * The test compiles a small CUDA program with the system compiler, runs it and
 * checks its output (what the program computed on the simulated GPU), its ELF
 * dependencies and the driver's log of cuGetProcAddress requests.
 */
#include <criterion/criterion.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "testlib.h"

static const char prog[] = "#include <cuda_runtime_api.h>\n"
			   "#include <stdio.h>\n"
			   "static void add1(void **a) { int *p = *(int **)a[0]; int n = *(int *)a[1];\n"
			   "  for (int i = 0; i < n; i++) p[i] += 1; }\n"
			   "int main(void) {\n"
			   "  int n = -1, h[256], *d; cudaError_t e = cudaGetDeviceCount(&n);\n"
			   "  if (e != cudaSuccess) { printf(\"error %s\\n\", cudaGetErrorName(e)); return 3; }\n"
			   "  for (int i = 0; i < 256; i++) h[i] = i;\n"
			   "  if (cudaMalloc((void **)&d, sizeof(h))) return 4;\n"
			   "  cudaMemcpy(d, h, sizeof(h), cudaMemcpyHostToDevice);\n"
			   "  int cnt = 256; void *args[] = {&d, &cnt, NULL};\n"
			   "  cudaLaunchKernel((const void *)add1, (dim3){1,1,1}, (dim3){256,1,1}, args, 0, 0);\n"
			   "  cudaMemcpy(h, d, sizeof(h), cudaMemcpyDeviceToHost);\n"
			   "  long sum = 0; for (int i = 0; i < 256; i++) sum += h[i];\n"
			   "  printf(\"devices %d sum %ld\\n\", n, sum); return 0; }\n";

/* Build prog in dir as dir/prog, statically or dynamically linked; returns its path. */
static char *build_prog(const char *dir, int static_rt)
{
	char src[512], *exe = malloc(512), lib[512], inc[512];
	struct sp_t_result r;

	snprintf(inc, sizeof(inc), "-I%s", sp_t_cuda("include"));

	snprintf(src, sizeof(src), "%s/prog.c", dir);
	snprintf(exe, 512, "%s/prog", dir);
	cr_assert_eq(sp_t_write_file(src, prog, strlen(prog)), 0);
	if (static_rt) {
		snprintf(lib, sizeof(lib), "%s", sp_t_build("simgpu/libcudart_static.a"));
		char *argv[] = {"cc", inc, "-o", exe, src, lib, "-ldl", "-lpthread", NULL};
		cr_assert_eq(sp_t_run(&r, argv, NULL, NULL, 60), 0, "cc failed: %s", r.err);
	} else {
		snprintf(lib, sizeof(lib), "-L%s", sp_t_build("simgpu"));
		char *argv[] = {"cc", inc, "-o", exe, src, lib, "-l:libcudart.so.12", NULL};
		cr_assert_eq(sp_t_run(&r, argv, NULL, NULL, 60), 0, "cc failed: %s", r.err);
	}
	sp_t_result_free(&r);
	return exe;
}

/* NEEDED entries of an ELF file, as readelf prints them. */
static char *needed(const char *file)
{
	struct sp_t_result r;
	char *argv[] = {"readelf", "-d", (char *)file, NULL};

	cr_assert_eq(sp_t_run(&r, argv, NULL, NULL, 30), 0, "readelf: %s", r.err);
	free(r.err);
	return r.out;
}

static int count_requests(const char *text)
{
	int n = 0;

	for (const char *p = text; (p = strchr(p, '\n')); p++)
		n++;
	return n;
}

Test(simgpu_e2e, static_runtime_reaches_driver_by_dlopen_only)
{
	char *dir = sp_t_tmpdir("simgpu-static"), *exe, *deps, log[512], env_log[600], env_lib[600], *got;
	struct sp_t_result r;

	exe = build_prog(dir, 1);
	deps = needed(exe);
	cr_expect_null(strstr(deps, "libcuda"), "statically linked program depends on the driver:\n%s", deps);
	cr_expect_null(strstr(deps, "libcudart"), "statically linked program depends on a shared runtime:\n%s", deps);
	free(deps);

	snprintf(log, sizeof(log), "%s/procs.txt", dir);
	snprintf(env_log, sizeof(env_log), "SIMGPU_LOG_PROCS=%s", log);
	snprintf(env_lib, sizeof(env_lib), "LD_LIBRARY_PATH=%s", sp_t_build("simgpu"));
	{
		char *argv[] = {exe, NULL};
		char *env[] = {env_log, env_lib, NULL};
		cr_assert_eq(sp_t_run(&r, argv, env, NULL, 30), 0, "program failed: %s%s", r.out, r.err);
	}
	/* 256 values i+1: sum = 256*255/2 + 256. */
	cr_expect_str_eq(r.out, "devices 1 sum 32896\n");
	sp_t_result_free(&r);
	got = sp_t_read_file(log, NULL);
	cr_assert_not_null(got, "the driver logged no cuGetProcAddress request");
	cr_expect_eq(count_requests(got), 440, "requests:\n%s", got);
	cr_expect_eq(strncmp(got, "\"\" ver=0 flags=0\ncuInit ver=2000 flags=0\n", 40), 0);
	free(got);
	sp_t_rmrf(dir);
}

/* Without a driver to load the runtime fails cleanly: an error, not a crash. */
Test(simgpu_e2e, static_runtime_without_driver_reports_error)
{
	char *dir = sp_t_tmpdir("simgpu-nodrv"), *exe;
	struct sp_t_result r;
	char *argv[2], *env[] = {"LD_LIBRARY_PATH=/nonexistent", NULL};

	{
		/* A machine with a real driver installed would find it on the default path. */
		char *sh[] = {"sh", "-c", "ldconfig -p 2>/dev/null | grep -q 'libcuda\\.so\\.1 '", NULL};
		if (sp_t_run(&r, sh, NULL, NULL, 30) == 0)
			cr_skip_test("a system libcuda.so.1 is installed");
		sp_t_result_free(&r);
	}
	exe = build_prog(dir, 1);
	argv[0] = exe;
	argv[1] = NULL;
	cr_assert_eq(sp_t_run(&r, argv, env, NULL, 30), 3, "status %d: %s%s", r.status, r.out, r.err);
	cr_expect_str_eq(r.out, "error cudaErrorInsufficientDriver\n");
	sp_t_result_free(&r);
	sp_t_rmrf(dir);
}

Test(simgpu_e2e, shared_runtime_links_no_driver)
{
	char *dir = sp_t_tmpdir("simgpu-shared"), *exe, *deps;
	struct sp_t_result r;
	char *argv[2];

	deps = needed(sp_t_build("simgpu/libcudart.so.12"));
	cr_expect_null(strstr(deps, "libcuda.so"), "libcudart.so.12 links the driver:\n%s", deps);
	cr_expect_not_null(strstr(deps, "$ORIGIN"), "libcudart.so.12 has no $ORIGIN runpath:\n%s", deps);
	free(deps);
	exe = build_prog(dir, 0);
	argv[0] = exe;
	argv[1] = NULL;
	{
		char env_lib[600];
		char *env[] = {env_lib, NULL};
		snprintf(env_lib, sizeof(env_lib), "LD_LIBRARY_PATH=%s", sp_t_build("simgpu"));
		cr_assert_eq(sp_t_run(&r, argv, env, NULL, 30), 0, "program failed: %s%s", r.out, r.err);
	}
	cr_expect_str_eq(r.out, "devices 1 sum 32896\n");
	sp_t_result_free(&r);
	sp_t_rmrf(dir);
}
