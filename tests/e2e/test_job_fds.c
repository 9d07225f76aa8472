/*
 * test_job_fds.c - the preload never touches the job's descriptors: a job
 * that closes every descriptor above 2 and reuses the low numbers for its own
 * files, then makes CUDA calls from frames without unwind info
 * (tests/workloads/cuda/jobfds.c), gets the same files and holds the same
 * descriptors with and without libstepprof.so; under strace, no read or write
 * on its descriptors but its own.
 */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "testlib.h"

static char *run_jobfds(const char *dir, const char *out, int preload, const char *strace_log)
{
	char in[1024], outp[1024], pre[1100], sdir[1100];
	snprintf(in, sizeof(in), "%s/in", dir);
	snprintf(outp, sizeof(outp), "%s/%s", dir, out);
	snprintf(pre, sizeof(pre), "LD_PRELOAD=%s", preload ? sp_t_build("lib/libstepprof.so") : "");
	snprintf(sdir, sizeof(sdir), "STEPPROF_DIR=%s/traces", dir);
	char *env[] = {strace_log ? "LD_PRELOAD=" : pre, sdir, NULL};
	char epre[1200];
	snprintf(epre, sizeof(epre), "%s", pre);
	char *plain[] = {(char *)sp_t_build("tests/bin/jobfds"), in, outp, NULL};
	char *traced[] = {"strace", "-f", "-E", epre, "-e", "trace=openat,read,write", "-o", (char *)strace_log,
			  (char *)sp_t_build("tests/bin/jobfds"), in, outp, NULL};
	struct sp_t_result r;
	int st = sp_t_run(&r, strace_log ? traced : plain, env, NULL, 60);
	cr_assert_eq(st, 0, "jobfds (preload %d) exited %d: %s", preload, st, r.err);
	char *fds = strdup(r.out);
	sp_t_result_free(&r);
	return fds;
}

Test(job_fds, a_job_reusing_low_fds_keeps_its_files_and_fds, .timeout = 120)
{
	char *dir = sp_t_tmpdir("jobfds");
	char path[1024];
	char data[3000];
	for (size_t i = 0; i < sizeof(data); i++)
		data[i] = (char)('A' + i % 26);
	snprintf(path, sizeof(path), "%s/in", dir);
	cr_assert_eq(sp_t_write_file(path, data, sizeof(data)), 0);
	char *bare = run_jobfds(dir, "out.bare", 0, NULL);
	char *pre = run_jobfds(dir, "out.pre", 1, NULL);
	cr_expect_str_eq(pre, bare, "the job's descriptors preloaded: %s, bare: %s", pre, bare);
	size_t nb, np;
	snprintf(path, sizeof(path), "%s/out.bare", dir);
	char *ob = sp_t_read_file(path, &nb);
	snprintf(path, sizeof(path), "%s/out.pre", dir);
	char *op = sp_t_read_file(path, &np);
	cr_assert(ob && op);
	cr_expect(nb == np && !memcmp(ob, op, nb), "the job's output differs under the preload (%zu vs %zu bytes)",
		  np, nb);
	if (system("strace -V >/dev/null 2>&1") == 0) {
		char log[1100];
		snprintf(log, sizeof(log), "%s/strace.log", dir);
		free(run_jobfds(dir, "out.strace", 1, log));
		size_t n;
		char *s = sp_t_read_file(log, &n);
		cr_assert(s);
		/* after the job opened its input at 3: its one read of 3 and one write of 4, nothing else on 3 or 4 */
		char *from = strstr(s, "/in\", O_RDONLY) = 3");
		cr_assert(from, "the job's open of its input is not in the strace log");
		int io = 0;
		for (char *l = strchr(from, '\n'); l; l = strchr(l + 1, '\n')) {
			int len = (int)strcspn(l + 1, "\n");
			char line[256];
			snprintf(line, sizeof(line), "%.*s", len, l + 1);
			if (strstr(line, "read(3,") || strstr(line, "read(4,") || strstr(line, "write(3,") ||
			    strstr(line, "write(4,"))
				io++;
		}
		cr_expect_eq(io, 2, "reads and writes on the job's fds 3 and 4 after it opened them: %d, not its own 2",
			     io);
		free(s);
	} else {
		sp_t_note("strace is not installed: the syscall check is skipped");
	}
	free(ob);
	free(op);
	free(bare);
	free(pre);
	sp_t_rmrf(dir);
}
