/*
 * test_dlsym.c - the preload overrides dlsym (a CUDA door, docs/cuda-capture.md),
 * so it sees every lookup of every program: those of names it does not hook
 * must be glibc's own, made from the caller, with and without the preload:
 * the scope of RTLD_NEXT and RTLD_DEFAULT and the dlerror() text come from
 * the caller's address (tests/workloads/dlshim.c, dlscope.c, so/dllocal.c).
 */
#include <criterion/criterion.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "testlib.h"

/* argv run plainly, then under the preload: both must exit 0 with the same stdout. */
static void same_with_and_without(char *const argv[], const char *what)
{
	char pre[PATH_MAX + 16];
	snprintf(pre, sizeof(pre), "LD_PRELOAD=%s", sp_t_build("lib/libstepprof.so"));
	char *tmp = sp_t_tmpdir("dlsym");
	char dir[PATH_MAX + 16];
	snprintf(dir, sizeof(dir), "STEPPROF_DIR=%s/t", tmp);
	char *env[] = { pre, dir, NULL };
	struct sp_t_result a, b;
	int sa = sp_t_run(&a, argv, NULL, NULL, 30), sb = sp_t_run(&b, argv, env, NULL, 30);
	cr_assert_eq(sa, 0, "%s without the preload: status %d: %s", what, sa, a.err);
	cr_expect_eq(sb, 0, "%s under the preload: status %d: %s", what, sb, b.err);
	cr_expect_str_eq(b.out, a.out, "%s: stdout differs under the preload", what);
	sp_t_result_free(&a);
	sp_t_result_free(&b);
	sp_t_rmrf(tmp);
	free(tmp);
}

/* A malloc of the program's own that finds the real one with dlsym(RTLD_NEXT): it recursed without end (99). */
Test(dlsym, a_malloc_shim_that_looks_up_the_real_malloc_works)
{
	char *argv[] = { (char *)sp_t_build("tests/bin/dlshim"), "malloc", NULL };
	same_with_and_without(argv, "dlshim malloc");
}

/* A library opened RTLD_LOCAL finds its own symbol with dlsym(RTLD_DEFAULT) (probe 42; it got -1). */
Test(dlsym, a_local_library_finds_its_own_symbols)
{
	char lib[PATH_MAX];
	char *abs = realpath(sp_t_build("tests/lib/libdllocal.so"), NULL);
	cr_assert(abs, "build/tests/lib/libdllocal.so missing");
	snprintf(lib, sizeof(lib), "%s", abs);
	free(abs);
	char *argv[] = { (char *)sp_t_build("tests/bin/dlscope"), "local", lib, NULL };
	same_with_and_without(argv, "dlscope local");
}

/* A failed lookup's dlerror() names the caller's object, not libstepprof.so. */
Test(dlsym, a_failed_lookup_says_what_glibc_says)
{
	char *argv[] = { (char *)sp_t_build("tests/bin/dlscope"), "dlerror", NULL };
	same_with_and_without(argv, "dlscope dlerror");
}
