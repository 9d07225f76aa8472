/*
 * dlshim.c - a program that uses dlsym the ways libraries do, for
 * tests/e2e/test_dlsym.c: it must behave the same with and without the
 * preload, whose dlsym override sees every lookup.
 *
 *   dlshim malloc      its own malloc resolves the real one lazily with
 *                      dlsym(RTLD_NEXT, "malloc") (a malloc shim, as leak
 *                      checkers do; libc's free takes its blocks back); a
 *                      recursion in there exits 99
 * (dlscope.c: the lookups' scope, without a malloc of its own.)
 * Prints one JSON line.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static void *(*real_malloc)(size_t);
static int depth;
static unsigned long nmalloc;

void *malloc(size_t n)
{
	if (!real_malloc) {
		if (depth++ > 50) {
			static const char msg[] = "dlshim: malloc recursion\n";
			if (write(2, msg, sizeof(msg) - 1) < 0) {
				/* exiting all the same */
			}
			_exit(99);
		}
		real_malloc = (void *(*)(size_t))dlsym(RTLD_NEXT, "malloc");
		depth--;
	}
	nmalloc++;
	return real_malloc(n);
}

int main(int argc, char **argv)
{
	if (argc < 2)
		return 2;
	if (!strcmp(argv[1], "malloc")) {
		char *p = malloc(100);
		strcpy(p, "hello");
		printf("{\"mode\":\"malloc\",\"text\":\"%s\",\"shim_used\":%d}\n", p, nmalloc > 0);
		free(p);
		return 0;
	}
	return 2;
}
