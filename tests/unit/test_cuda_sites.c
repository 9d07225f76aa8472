/*
 * test_cuda_sites.c - call-site formatting and caching of the CUDA hooks
 * (preload/cuda_sites.c):
 *   1. one frame: "module!symbol+0xoff" for a named function of a library,
 *      "module!+0xoff" from the module's base for an unnamed one, "?!0x..."
 *      for an address in no module, truncation to the buffer;
 *   2. sp_cuda_site: STEPPROF_SITES=0 turns sites off.
 * Ground truth: the offsets each test adds to an address, and the module base
 * read from /proc/self/maps (not from dladdr, which the code itself uses).
 */
#include <criterion/criterion.h>

#include <dlfcn.h>
#include <errno.h>
#include <execinfo.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cuda_sites.h"

/*
 * NOTE: the test binary is not linked with libunwind (tests/module.mk is not
 * this part's); cuda_sites.o needs unw_backtrace for its slow path, which
 * these tests do not reach. A weak stand-in with the same contract (glibc's
 * backtrace) satisfies the link and yields to libunwind if it is ever linked.
 */
__attribute__((weak)) int unw_backtrace(void **buf, int size)
{
	return backtrace(buf, size);
}

/* ---------------------------------------------------------- 1. one frame */

Test(cuda_sites, named_library_function_with_offset)
{
	char buf[256];
	void *libc = dlopen("libc.so.6", RTLD_NOW | RTLD_NOLOAD);
	cr_assert(libc);
	/* the function itself, not a PLT stub of the test binary; +1 stays inside it (qsort is short) */
	const char *pc = (const char *)dlsym(libc, "qsort") + 1;
	size_t n = sp_cuda_format_frame(pc, buf, sizeof(buf));
	cr_expect_eq(n, strlen(buf));
	cr_expect_str_eq(buf, "libc.so.6!qsort+0x1");
	dlclose(libc);
}

/* The start of the executable's first mapping (its load base), from /proc/self/maps. */
static uintptr_t exe_base(char *name, size_t len)
{
	char exe[256], line[2048];
	ssize_t k = readlink("/proc/self/exe", exe, sizeof(exe) - 1);
	cr_assert_gt(k, 0);
	exe[k] = 0;
	const char *b = strrchr(exe, '/');
	snprintf(name, len, "%s", b ? b + 1 : exe);
	FILE *f = fopen("/proc/self/maps", "r");
	cr_assert(f);
	uintptr_t base = 0;
	while (!base && fgets(line, sizeof(line), f)) {
		unsigned long lo;
		char path[1024] = "";
		if (sscanf(line, "%lx-%*x %*s %*x %*s %*u %1023s", &lo, path) == 2 && !strcmp(path, exe))
			base = lo;
	}
	fclose(f);
	cr_assert(base, "%s not in /proc/self/maps", exe);
	return base;
}

/* A static function has no dynamic symbol: its frame is the module and the offset from the base. */
static __attribute__((noinline)) int unnamed_function(int x)
{
	return x * 3 + 1;
}

Test(cuda_sites, unnamed_function_is_module_and_offset_from_base)
{
	char name[256], want[512], buf[512];
	uintptr_t base = exe_base(name, sizeof(name));
	const char *pc = (const char *)(uintptr_t)&unnamed_function + 7;
	cr_expect_eq(unnamed_function(1), 4);
	sp_cuda_format_frame(pc, buf, sizeof(buf));
	/* the module: the executable as the loader names it (argv[0]: Criterion's workers rename it) */
	snprintf(want, sizeof(want), "!+0x%lx", (unsigned long)((uintptr_t)pc - base));
	const char *bang = strchr(buf, '!');
	cr_assert(bang, "%s", buf);
	cr_expect_str_eq(bang, want);
	size_t m = (size_t)(bang - buf);
	cr_expect((m == strlen(name) && !strncmp(buf, name, m)) ||
			  (m == strlen(program_invocation_short_name) && !strncmp(buf, program_invocation_short_name, m)),
		  "%s: the module is neither %s nor %s", buf, name, program_invocation_short_name);
}

Test(cuda_sites, address_in_no_module)
{
	char buf[64];
	size_t n = sp_cuda_format_frame((const void *)(uintptr_t)0x10, buf, sizeof(buf));
	cr_expect_str_eq(buf, "?!0x10");
	cr_expect_eq(n, 6);
}

Test(cuda_sites, truncated_to_the_buffer)
{
	char full[256], small[8];
	const char *pc = (const char *)(uintptr_t)&unnamed_function + 1;
	size_t n = sp_cuda_format_frame(pc, full, sizeof(full));
	cr_assert_gt(n, sizeof(small));
	memset(small, 'x', sizeof(small));
	cr_expect_eq(sp_cuda_format_frame(pc, small, sizeof(small)), sizeof(small) - 1);
	cr_expect_eq(small[sizeof(small) - 1], '\0');
	cr_expect(!strncmp(small, full, sizeof(small) - 1));
	/* an empty buffer: nothing written, length 0 */
	cr_expect_eq(sp_cuda_format_frame(pc, small, 0), 0);
	cr_expect_eq(small[0], full[0]);
}

/* ------------------------------------------------------------- 2. sites */

Test(cuda_sites, sites_off_gives_no_site)
{
	/* each Criterion test runs in its own process: the setting is read once there */
	setenv("STEPPROF_SITES", "0", 1);
	cr_expect_eq(sp_cuda_site(__builtin_return_address(0)), 0);
	cr_expect_eq(sp_cuda_site(NULL), 0);
}
