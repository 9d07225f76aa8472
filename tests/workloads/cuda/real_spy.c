/*
 * real_spy.c - build/tests/bin/real_spy.so, a test fixture that watches what NVIDIA's
 * real runtime RECEIVES from cuGetProcAddress, above stepprof's door.
 *
 * The runtime reaches the driver by dlsym(handle, "cuGetProcAddress_v2") and then
 * one cuGetProcAddress request per entry point. Preloaded BEFORE libstepprof.so
 * (LD_PRELOAD=real_spy.so:libstepprof.so), this library answers the runtime's
 * dlsym: it forwards to the next dlsym (stepprof's door, or glibc's without the
 * preload), and for cuGetProcAddress[_v2] hands back a logging twin that calls
 * what the door returned and writes, per request, the pointer the runtime got,
 * named by dladdr:
 *
 *   <symbol> ver=<V> flags=<F> r=<result> -> <file basename> <symbol name>
 *
 * to $REAL_SPY_LOG (an empty symbol written "", as SIMGPU_LOG_PROCS does). Only observation: the runtime calls exactly
 * what it would have called. Divided into: 1. the log, 2. the twins, 3. dlsym.
 */
#include <cuda.h>
#include <dlfcn.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define EXPORT __attribute__((visibility("default")))

typedef void *(*dlsym_fn)(void *, const char *);
typedef CUresult (*gpa2_fn)(const char *, void **, int, cuuint64_t, CUdriverProcAddressQueryResult *);
typedef CUresult (*gpa1_fn)(const char *, void **, int, cuuint64_t);

static gpa2_fn next_gpa2;
static gpa1_fn next_gpa1;

/* ------------------------------------------------------------- 1. log */

static void log_answer(const char *symbol, int ver, unsigned long long flags, int r, void *fn)
{
	const char *path = getenv("REAL_SPY_LOG");
	if (!path)
		return;
	Dl_info di;
	const char *file = "-", *sym = "-";
	if (r == 0 && fn && dladdr(fn, &di)) {
		file = di.dli_fname ? di.dli_fname : "?";
		const char *b = strrchr(file, '/');
		file = b ? b + 1 : file;
		/* dladdr names the nearest symbol below: only an exact match names the function. */
		sym = di.dli_sname && di.dli_saddr == fn ? di.dli_sname : "?";
	}
	char line[512];
	int n = snprintf(line, sizeof(line), "%s ver=%d flags=%llu r=%d -> %s %s\n",
			 !symbol   ? "(null)"
			 : *symbol ? symbol
				   : "\"\"",
			 ver, flags, r, file, sym);
	int fd = open(path, O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC, 0600);
	if (fd < 0)
		return;
	if (n > 0 && write(fd, line, (size_t)n < sizeof(line) ? (size_t)n : sizeof(line) - 1) < 0)
		n = 0;
	close(fd);
}

/* ---------------------------------------------------------- 2. twins */

static CUresult spy_gpa2(const char *symbol, void **pfn, int ver, cuuint64_t flags,
			 CUdriverProcAddressQueryResult *status);
static CUresult spy_gpa1(const char *symbol, void **pfn, int ver, cuuint64_t flags);

/*
 * The runtime asks for cuGetProcAddress itself and makes its later requests
 * through what it got: watch that one too. Which signature it has is told by
 * the exported name of the pointer (_v2: five arguments).
 */
static void *watch(const char *symbol, void *fn)
{
	Dl_info di;
	if (!fn || strcmp(symbol, "cuGetProcAddress") != 0 || !dladdr(fn, &di) || !di.dli_sname || di.dli_saddr != fn)
		return fn;
	if (!strcmp(di.dli_sname, "cuGetProcAddress_v2")) {
		next_gpa2 = (gpa2_fn)fn;
		return (void *)spy_gpa2;
	}
	if (!strcmp(di.dli_sname, "cuGetProcAddress")) {
		next_gpa1 = (gpa1_fn)fn;
		return (void *)spy_gpa1;
	}
	return fn;
}

static CUresult spy_gpa2(const char *symbol, void **pfn, int ver, cuuint64_t flags,
			 CUdriverProcAddressQueryResult *status)
{
	CUresult r = next_gpa2(symbol, pfn, ver, flags, status);
	log_answer(symbol, ver, (unsigned long long)flags, (int)r, pfn ? *pfn : NULL);
	if (r == CUDA_SUCCESS && symbol && pfn)
		*pfn = watch(symbol, *pfn);
	return r;
}

static CUresult spy_gpa1(const char *symbol, void **pfn, int ver, cuuint64_t flags)
{
	CUresult r = next_gpa1(symbol, pfn, ver, flags);
	log_answer(symbol, ver, (unsigned long long)flags, (int)r, pfn ? *pfn : NULL);
	if (r == CUDA_SUCCESS && symbol && pfn)
		*pfn = watch(symbol, *pfn);
	return r;
}

/* ------------------------------------------------------------ 3. dlsym */

/* The dlsym after ours: libstepprof.so's export when it is loaded, else glibc's. */
static dlsym_fn next_dlsym(void)
{
	static dlsym_fn next;
	if (next)
		return next;
	dlsym_fn libc = (dlsym_fn)dlvsym(RTLD_NEXT, "dlsym", "GLIBC_2.2.5");
	dlsym_fn n = libc;
	const char *sp = getenv("REAL_SPY_NEXT"); /* path of libstepprof.so */
	void *h = sp && libc ? dlopen(sp, RTLD_NOLOAD | RTLD_LAZY) : NULL;
	if (h) {
		dlsym_fn s = (dlsym_fn)libc(h, "dlsym");
		if (s)
			n = s;
	}
	next = n;
	return next;
}

EXPORT void *dlsym(void *handle, const char *name)
{
	dlsym_fn n = next_dlsym();
	if (!n)
		return NULL;
	if (handle == RTLD_NEXT)
		return n(handle, name); /* a tail call (-O2): the next dlsym sees the caller's address */
	void *p = n(handle, name);
	__asm__("" : "+r"(name)); /* declared nonnull; a program may still pass NULL */
	if (!p || !name)
		return p;
	if (!strcmp(name, "cuGetProcAddress_v2")) {
		next_gpa2 = (gpa2_fn)p;
		log_answer("dlsym:cuGetProcAddress_v2", 0, 0, 0, p);
		return (void *)spy_gpa2;
	}
	if (!strcmp(name, "cuGetProcAddress")) {
		next_gpa1 = (gpa1_fn)p;
		log_answer("dlsym:cuGetProcAddress", 0, 0, 0, p);
		return (void *)spy_gpa1;
	}
	return p;
}
