/*
 * dllocal.c - build/tests/lib/libdllocal.so, for tests/e2e/test_dlsym.c: a library
 * that a program opens RTLD_LOCAL (as Python opens its extension modules) and
 * that looks its own symbol up with dlsym(RTLD_DEFAULT, ...): glibc searches
 * the global scope and the caller's local scope, so it finds it.
 */
#include <dlfcn.h>

int sp_local_value(void)
{
	return 42;
}

int sp_local_probe(void)
{
	int (*f)(void) = (int (*)(void))dlsym(RTLD_DEFAULT, "sp_local_value");
	return f ? f() : -1;
}
