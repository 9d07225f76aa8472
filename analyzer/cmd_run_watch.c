/*
 * cmd_run_watch.c - `stepprof run --watch[=OPTIONS]`: `stepprof watch` started
 * beside the job (after the eBPF collector, if any) on the job's trace
 * directory, its output on stderr, stopped once the job has ended (SIGTERM:
 * it reads what is left and prints its last tick). The job's exit status is
 * not touched.
 */
#include "cmd_run.h"

#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define WATCH_MAX_ARGS 64

pid_t watcher_start(const char *dir, const char *opts)
{
	char self[PATH_MAX];
	ssize_t n = readlink("/proc/self/exe", self, sizeof(self) - 1);
	if (n <= 0) {
		fprintf(stderr, "stepprof: run: --watch: cannot find the stepprof binary: %s\n", strerror(errno));
		return -1;
	}
	self[n] = 0;
	/* OPTIONS: watch's options separated by spaces (no quoting) */
	char *copy = strdup(opts ? opts : ""), *save = NULL;
	char *argv[WATCH_MAX_ARGS + 4];
	int k = 0;
	argv[k++] = "stepprof";
	argv[k++] = "watch";
	for (char *t = copy ? strtok_r(copy, " ", &save) : NULL; t && k < WATCH_MAX_ARGS; t = strtok_r(NULL, " ", &save))
		argv[k++] = t;
	argv[k++] = (char *)dir;
	argv[k] = NULL;
	fflush(NULL);
	pid_t p = fork();
	if (p == 0) {
		dup2(2, 1); /* the job's stdout stays the job's */
		execv(self, argv);
		fprintf(stderr, "stepprof: run: --watch: %s: %s\n", self, strerror(errno));
		_exit(127);
	}
	free(copy);
	if (p < 0)
		fprintf(stderr, "stepprof: run: --watch: fork: %s\n", strerror(errno));
	return p;
}

void watcher_stop(pid_t pid)
{
	if (pid <= 0)
		return;
	kill(pid, SIGTERM);
	for (int i = 0; i < 200; i++) { /* 20 s for its last tick */
		int st;
		pid_t r = waitpid(pid, &st, WNOHANG);
		if (r == pid || (r < 0 && errno != EINTR))
			return;
		struct timespec d = {0, 100000000};
		nanosleep(&d, NULL);
	}
	fprintf(stderr, "stepprof: run: the watcher did not stop; killed\n");
	kill(pid, SIGKILL);
	waitpid(pid, NULL, 0);
}
