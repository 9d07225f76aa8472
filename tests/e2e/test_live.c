/*
 * test_live.c - reading a trace while its process writes it: the recorder's
 * ring wraps and reuses chunks under the reader (docs/trace-format.md section
 * 8, step 6), and every read must still be whole: no "corrupt", no "truncated",
 * exit 0.
 *
 * Divided into: 1. the writer (markgen under LD_PRELOAD, in the background),
 * 2. the tests.
 */
#include <criterion/criterion.h>
#include <dirent.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "stepprof/trace.h"
#include "testlib.h"

/* ------------------------------------------------------------ 1. the writer */

/* markgen writing marks on two threads until killed, into dir, a ring of max_mb MiB. */
static pid_t start_writer(const char *dir, const char *max_mb)
{
	char *bin = (char *)sp_t_build("tests/bin/markgen");
	char *lib = (char *)sp_t_build("lib/libstepprof.so");
	pid_t pid = fork();
	cr_assert_geq(pid, 0);
	if (pid == 0) {
		setenv("LD_PRELOAD", lib, 1);
		setenv("STEPPROF_DIR", dir, 1);
		setenv("STEPPROF_MAX_MB", max_mb, 1);
		int null = open("/dev/null", O_WRONLY);
		dup2(null, 1);
		execl(bin, bin, "-t", "2", "-n", "4000000000", "-P", "16", (char *)NULL);
		_exit(127);
	}
	free(bin);
	free(lib);
	return pid;
}

/* The writer's trace file once its ring has wrapped (a chunk reused); NULL after 30 s. */
static char *wrapped_file(const char *dir)
{
	for (int tries = 0; tries < 3000; tries++) {
		DIR *d = opendir(dir);
		struct dirent *e;
		char *path = NULL;
		while (d && !path && (e = readdir(d)))
			if (strstr(e->d_name, ".sptrace")) {
				size_t n = strlen(dir) + strlen(e->d_name) + 2;
				path = malloc(n);
				snprintf(path, n, "%s/%s", dir, e->d_name);
			}
		if (d)
			closedir(d);
		if (path) {
			struct sp_file_header h;
			int fd = open(path, O_RDONLY);
			int ok = fd >= 0 && pread(fd, &h, sizeof(h), 0) == (ssize_t)sizeof(h) &&
				 !memcmp(h.magic, SP_MAGIC, 8) && __atomic_load_n(&h.overwritten_chunks, __ATOMIC_RELAXED) > 0;
			if (fd >= 0)
				close(fd);
			if (ok)
				return path;
			free(path);
		}
		usleep(10000);
	}
	return NULL;
}

/* ------------------------------------------------------------- 2. the tests */

/*
 * 100 reads (info --json, analyze --json, dump) of a 4 MiB ring that wraps
 * every few milliseconds while they run. A chunk reused under the reader is
 * skipped as overwritten; none of the reads may call the file damaged.
 */
Test(live, a_wrapping_trace_being_written_reads_whole, .timeout = 300)
{
	char *dir = sp_t_tmpdir("live");
	pid_t w = start_writer(dir, "4");
	char *file = wrapped_file(dir);
	if (!file) {
		kill(w, SIGKILL);
		waitpid(w, NULL, 0);
		cr_assert_fail("markgen wrote no wrapping trace in %s", dir);
	}
	char *bin = (char *)sp_t_build("bin/stepprof");
	char *env[] = {"LD_PRELOAD=", NULL};
	int bad = 0, reads = 0;
	char first_bad[1024] = "";
	for (int i = 0; i < 100; i++) {
		char *info[] = {bin, "info", "--json", file, NULL};
		char *analyze[] = {bin, "analyze", "--json", file, NULL};
		char *dump[] = {bin, "dump", file, NULL};
		char **argv = i % 5 == 3 ? analyze : i % 5 == 4 ? dump : info;
		struct sp_t_result r;
		int st = sp_t_run(&r, argv, env, NULL, 60);
		reads++;
		if (st != 0 || strstr(r.err, "corrupt") || strstr(r.err, "truncated") ||
		    (argv == info && (strstr(r.out, "\"corrupt\":true") || strstr(r.out, "\"truncated\":true")))) {
			if (!bad++)
				snprintf(first_bad, sizeof(first_bad), "%s: exit %d, stderr: %s", argv[1], st, r.err);
		}
		sp_t_result_free(&r);
	}
	int alive = waitpid(w, NULL, WNOHANG) == 0;
	kill(w, SIGKILL);
	waitpid(w, NULL, 0);
	sp_t_note("live reads: %d of %d called the file damaged", bad, reads);
	cr_assert(alive, "the writer ended before the reads did: they did not race with it");
	cr_assert_eq(bad, 0, "%d of %d reads of a healthy file being written called it damaged; first: %s", bad, reads,
		     first_bad);

	/* killed: a crash's file, whole */
	char *info[] = {bin, "info", "--json", file, NULL};
	struct sp_t_result r;
	cr_assert_eq(sp_t_run(&r, info, env, NULL, 60), 0, "stderr: %s", r.err);
	sp_t_result_free(&r);
	free(bin);
	free(file);
	sp_t_rmrf(dir);
	free(dir);
}
