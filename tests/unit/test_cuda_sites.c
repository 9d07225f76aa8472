/*
 * test_cuda_sites.c - call-site formatting and caching of the CUDA hooks
 * (preload/cuda_sites.c):
 *   1. one frame: "module!symbol+0xoff" for a named function of a library,
 *      "module!+0xoff" from the module's base for an unnamed one, "?!0x..."
 *      for an address in no module, truncation to the buffer;
 *   2. sp_cuda_site: STEPPROF_SITES=0 turns sites off;
 *   3. whose frame: the runtime's symbol names, every function of NVIDIA's
 *      static runtime where it is installed;
 *   4. the site of a stack given by a scripted unwinder: a wrapper called by
 *      the program (dynamic runtime) is the program's frame; one called from
 *      inside a static runtime is the program's first frame above it, per
 *      program call site, and the runtime path is cached (no naming again).
 * Ground truth: the offsets each test adds to an address, the module base
 * read from /proc/self/maps (not from dladdr, which the code itself uses), and
 * the stacks the tests script.
 */
#include <criterion/criterion.h>

#include <dirent.h>
#include <dlfcn.h>
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "config.h"
#include "cuda_sites.h"
#include "reader.h"
#include "testlib.h"

/*
 * A scripted unwinder: stand-ins for cuda_unwind.c's sp_unwind_pcs and
 * cuda_symtab.c's sp_symtab_name (the archive's members are not linked when
 * the test defines their one symbol), over a stack the test writes
 * (fake_ip[0] innermost) with names for the frames (NULL: no name); 0 frames:
 * unwinding fails, as without unwind tables.
 */
#define FAKE_MAX 16
static uintptr_t fake_ip[FAKE_MAX];
static const char *fake_name[FAKE_MAX];
static int fake_n, fake_unwinds, fake_namings;

static void fake_stack(int n, const uintptr_t *ip, const char *const *name)
{
	fake_n = n;
	for (int i = 0; i < n; i++) {
		fake_ip[i] = ip[i];
		fake_name[i] = name[i];
	}
}

int sp_unwind_pcs(void **pcs, int max)
{
	fake_unwinds++;
	int n = fake_n < max ? fake_n : max;
	for (int i = 0; i < n; i++)
		pcs[i] = (void *)fake_ip[i];
	return n;
}

/* pc: a return address - 1, as cuda_sites.c asks */
int sp_symtab_name(const void *pc, char *buf, size_t len)
{
	fake_namings++;
	for (int i = 0; i < fake_n; i++)
		if (fake_ip[i] == (uintptr_t)pc + 1 && fake_name[i]) {
			snprintf(buf, len, "%s", fake_name[i]);
			return 0;
		}
	return -1;
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

/* ------------------------------------------------------- 3. whose frame */

Test(cuda_sites, runtime_names)
{
	static const char *const rt[] = {
	    "cudaMalloc",
	    "cudaMemcpyAsync",
	    "__cudaRegisterFatBinary",
	    "__cudart1052",
	    "libcudart_static_0053c1d33059ebe986009dc8a76c61eb6412a2c3",
	    "cudart_internal",
	    "_ZN6cudart13cudaApiMallocEPPvm",
	    "_ZNK6cudart9configData3getEv",
	};
	static const char *const prog[] = {
	    "cuda_alloc_helper",       "cudamalloc", "cuda", "alloc_a", "main", "cuMemAlloc_v2",
	    "_ZN5torch4cuda6mallocEm", "",
	};
	for (size_t i = 0; i < sizeof(rt) / sizeof(rt[0]); i++)
		cr_expect(sp_cuda_runtime_name(rt[i]), "%s is the runtime's", rt[i]);
	for (size_t i = 0; i < sizeof(prog) / sizeof(prog[0]); i++)
		cr_expect(!sp_cuda_runtime_name(prog[i]), "%s is not the runtime's", prog[i]);
	cr_expect(!sp_cuda_runtime_name(NULL));
}

/*
 * NVIDIA's own static runtime, where installed: every function it defines
 * must be taken for the runtime's, or a static-cudart program's sites would
 * name one of them. Ground truth: nm of the archive.
 */
Test(cuda_sites, every_function_of_the_real_static_runtime)
{
	const char *a = "/usr/local/cuda/lib64/libcudart_static.a";
	if (access(a, R_OK) != 0)
		cr_skip_test("no %s", a);
	struct sp_t_result r;
	char *argv[] = {"nm", "--defined-only", (char *)a, NULL};
	cr_assert_eq(sp_t_run(&r, argv, NULL, NULL, 60), 0, "nm: %s", r.err);
	size_t fns = 0, missed = 0;
	char *save = NULL;
	for (char *line = strtok_r(r.out, "\n", &save); line; line = strtok_r(NULL, "\n", &save)) {
		char type, name[512];
		if (sscanf(line, "%*x %c %511s", &type, name) != 2 || (type != 'T' && type != 't'))
			continue;
		fns++;
		if (!sp_cuda_runtime_name(name) && missed++ < 5)
			cr_expect_fail("%s is cudart's own function", name);
	}
	sp_t_result_free(&r);
	cr_expect_gt(fns, 100, "only %zu functions in %s", fns, a);
	cr_expect_eq(missed, 0, "%zu of %zu functions not taken for the runtime's", missed, fns);
}

/* ------------------------------------------------- 4. scripted stacks */

/*
 * Frames of the scripted stacks: functions of this program, which has no
 * dynamic symbols for them (dladdr names none, so the unwinder's name for the
 * frame decides). Each return address is the function's start + 4.
 */
#define FRAME(fn)                                                                                                      \
	static __attribute__((noinline)) int fn(int x)                                                                 \
	{                                                                                                              \
		__asm__ volatile("" : "+r"(x));                                                                        \
		return x * 7 + __LINE__;                                                                               \
	}
FRAME(fr_wrapper)
FRAME(fr_rt_inner)
FRAME(fr_rt_api)
FRAME(fr_user_a)
FRAME(fr_user_b)
FRAME(fr_main)

#define RA(fn) ((uintptr_t)&fn + 4)

struct site_fx {
	char *dir;
	char name[256];
	uintptr_t base;
};

static void site_start(struct site_fx *x)
{
	x->dir = sp_t_tmpdir("cudasites");
	x->base = exe_base(x->name, sizeof(x->name));
	sp_recorder_init(x->dir, 8u << 20);
	cr_assert_eq(fr_wrapper(1) + fr_rt_inner(1) + fr_rt_api(1) + fr_user_a(1) + fr_user_b(1) + fr_main(1) > 0, 1);
}

/* The interned string `id`, read back from the trace file by the analyzer's reader. */
static char *site_text(struct site_fx *x, uint32_t id)
{
	DIR *d = opendir(x->dir);
	struct dirent *de;
	char path[1024] = "", err[256];
	cr_assert(d);
	while ((de = readdir(d)))
		if (strstr(de->d_name, ".sptrace"))
			snprintf(path, sizeof(path), "%s/%s", x->dir, de->d_name);
	closedir(d);
	cr_assert(path[0], "no trace in %s", x->dir);
	struct sp_reader *r;
	cr_assert_eq(sp_reader_open(path, &r, err, sizeof(err)), 0, "%s", err);
	struct sp_event ev;
	while (sp_reader_next(r, &ev) > 0)
		;
	const char *s = sp_reader_string(r, id);
	char *copy = s ? strdup(s) : NULL;
	sp_reader_close(r);
	cr_assert(copy, "string %u not in the trace", id);
	return copy;
}

/* The site's first frame is the call inside fn (its return address - 1), as "!+0xoff" from the module base. */
static void expect_first_frame(struct site_fx *x, uint32_t id, uintptr_t ra, const char *what)
{
	char want[64];
	cr_assert_neq(id, 0, "%s: no site", what);
	char *s = site_text(x, id);
	snprintf(want, sizeof(want), "!+0x%lx", (unsigned long)(ra - 1 - x->base));
	const char *bang = strchr(s, '!'), *arrow = strstr(s, " <- ");
	cr_assert(bang, "%s: %s", what, s);
	size_t n = arrow ? (size_t)(arrow - bang) : strlen(bang);
	cr_expect(n == strlen(want) && !strncmp(bang, want, n), "%s: site %s, its first frame should end %s", what, s,
		  want);
	free(s);
}

Test(cuda_sites, program_caller_is_its_own_site)
{
	/* a runtime wrapper behind the PLT: the caller is the program's frame */
	struct site_fx x;
	site_start(&x);
	uintptr_t a[] = {RA(fr_wrapper), RA(fr_user_a), RA(fr_main)};
	const char *an[] = {NULL, "alloc_a", "main"};
	fake_stack(3, a, an);
	uint32_t id = sp_cuda_site((const void *)RA(fr_user_a));
	expect_first_frame(&x, id, RA(fr_user_a), "program's caller");
	char *s = site_text(&x, id);
	cr_expect(strstr(s, " <- "), "the site has the caller's caller too: %s", s);
	free(s);
	/* cached by the return address: no unwinding the second time */
	int unwinds = fake_unwinds;
	fake_stack(2, a, an);
	cr_expect_eq(sp_cuda_site((const void *)RA(fr_user_a)), id);
	cr_expect_eq(fake_unwinds, unwinds);
	sp_t_rmrf(x.dir);
}

Test(cuda_sites, static_runtime_caller_is_the_program_frame_above_it)
{
	struct site_fx x;
	site_start(&x);
	/* cudaMalloc -> cudart's internal function -> driver wrapper, from two program functions */
	uintptr_t a[] = {RA(fr_wrapper), RA(fr_rt_inner), RA(fr_rt_api), RA(fr_user_a), RA(fr_main)};
	uintptr_t b[] = {RA(fr_wrapper), RA(fr_rt_inner), RA(fr_rt_api), RA(fr_user_b), RA(fr_main)};
	const char *names[] = {NULL, "__cudart512", "cudaMalloc", NULL, "main"};
	const void *ret = (const void *)RA(fr_rt_inner);

	fake_stack(5, a, names);
	uint32_t ida = sp_cuda_site(ret);
	expect_first_frame(&x, ida, RA(fr_user_a), "first site");
	fake_stack(5, b, names);
	uint32_t idb = sp_cuda_site(ret);
	expect_first_frame(&x, idb, RA(fr_user_b), "second site");
	cr_expect_neq(ida, idb);

	/* again, both: the runtime path, one short unwind and probes, no walk and no naming */
	int unwinds = fake_unwinds, namings = fake_namings;
	fake_stack(5, a, names);
	cr_expect_eq(sp_cuda_site(ret), ida);
	fake_stack(5, b, names);
	cr_expect_eq(sp_cuda_site(ret), idb);
	cr_expect_eq(fake_unwinds, unwinds + 2, "one unwind a call, no walk after it");
	cr_expect_eq(fake_namings, namings);
	sp_t_rmrf(x.dir);
}

Test(cuda_sites, no_unwinding_gives_the_immediate_caller)
{
	struct site_fx x;
	site_start(&x);
	fake_stack(0, NULL, NULL);
	uint32_t id = sp_cuda_site((const void *)RA(fr_user_b));
	expect_first_frame(&x, id, RA(fr_user_b), "no unwind tables");
	sp_t_rmrf(x.dir);
}
