/*
 * dlscope.c - the scope of a dlsym lookup, for tests/e2e/test_dlsym.c: glibc
 * chooses it (and words dlerror()) from the address its caller returns to, so
 * the preload's dlsym override must leave it the caller's.
 *
 *   dlscope local LIB   dlopen(LIB, RTLD_LOCAL), then LIB's sp_local_probe(),
 *                       which finds LIB's own symbol with dlsym(RTLD_DEFAULT)
 *   dlscope dlerror     dlerror() after a failed lookup of a name nobody defines
 * Prints one JSON line.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <dlfcn.h>
#include <stdio.h>
#include <string.h>

int main(int argc, char **argv)
{
	if (argc > 2 && !strcmp(argv[1], "local")) {
		void *h = dlopen(argv[2], RTLD_NOW | RTLD_LOCAL);
		if (!h) {
			fprintf(stderr, "dlscope: %s\n", dlerror());
			return 1;
		}
		int (*probe)(void) = (int (*)(void))dlsym(h, "sp_local_probe");
		printf("{\"mode\":\"local\",\"probe\":%d}\n", probe ? probe() : -2);
		return 0;
	}
	if (argc > 1 && !strcmp(argv[1], "dlerror")) {
		dlerror();
		void *p = dlsym(RTLD_DEFAULT, "sp_no_such_symbol_anywhere");
		const char *e = dlerror();
		printf("{\"mode\":\"dlerror\",\"found\":%d,\"error\":\"%s\"}\n", p != NULL, e ? e : "");
		return 0;
	}
	return 2;
}
