/*
 * cuda_probe_nocuda.c - a program that never calls CUDA, for the test that the
 * CUDA hooks leave such a process alone (tests/e2e/test_cuda_doors.c): it
 * prints whether any CUDA library is mapped (/proc/self/maps), the results and
 * errno of a few failing libc calls and of a dlsym lookup of a CUDA name that
 * cannot be found, then does the same in a forked child. Its stdout must be
 * the same with and without LD_PRELOAD=libstepprof.so.
 */
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

static void probe(const char *who)
{
	char line[512];
	int cuda = 0;
	FILE *f = fopen("/proc/self/maps", "r");
	while (f && fgets(line, sizeof(line), f))
		if (strstr(line, "libcuda") || strstr(line, "libcudart"))
			cuda = 1;
	if (f)
		fclose(f);
	printf("%s: cuda_mapped=%d\n", who, cuda);
	errno = 0;
	int fd = open("/nonexistent/stepprof/probe", O_RDONLY);
	printf("%s: open rc=%d errno=%d\n", who, fd, errno);
	errno = 0;
	dlerror();
	void *p = dlsym(RTLD_DEFAULT, "cuMemAlloc_v2");
	/* a failed lookup leaves a message for dlerror (programs print it), a found one none */
	printf("%s: dlsym(cuMemAlloc_v2) found=%d dlerror=%d\n", who, p != NULL, dlerror() != NULL);
	void *q = dlsym(RTLD_NEXT, "no_such_symbol_stepprof");
	printf("%s: dlsym(RTLD_NEXT, missing) found=%d dlerror=%d\n", who, q != NULL, dlerror() != NULL);
	q = dlsym(RTLD_NEXT, "open");
	printf("%s: dlsym(RTLD_NEXT, open) found=%d dlerror=%d\n", who, q != NULL, dlerror() != NULL);
	/*
	 * RTLD_NEXT from the program finds the first definition after the
	 * program, which is also what RTLD_DEFAULT finds, whatever is preloaded.
	 */
	printf("%s: dlsym(RTLD_NEXT, open) == dlsym(RTLD_DEFAULT, open): %d\n", who,
	       dlsym(RTLD_NEXT, "open") == dlsym(RTLD_DEFAULT, "open"));
	fflush(stdout);
}

int main(void)
{
	probe("parent");
	pid_t pid = fork();
	if (pid == 0) {
		probe("child");
		_exit(7);
	}
	int st = 0;
	waitpid(pid, &st, 0);
	printf("child exit=%d\n", WIFEXITED(st) ? WEXITSTATUS(st) : -1);
	return 0;
}
