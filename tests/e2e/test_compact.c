/*
 * test_compact.c - trace files the size of what they hold: after a clean exit
 * (the recorder compacts its file), and after a SIGKILL with `stepprof
 * compact`, whose analysis must be the original's, byte for byte; a file still
 * being written is refused; `stepprof info` says both sizes.
 */
#include <criterion/criterion.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <dirent.h>
#include <unistd.h>

#include "testlib.h"
#include "tracefile.h"

extern char **environ;

/* Sum of apparent sizes (st_size) and of allocated bytes (st_blocks) of a directory's files. */
static void dir_sizes(const char *dir, uint64_t *apparent, uint64_t *allocated, int *files)
{
	*apparent = *allocated = 0;
	*files = 0;
	DIR *d = opendir(dir);
	cr_assert_not_null(d, "%s", dir);
	for (struct dirent *e; (e = readdir(d));) {
		char p[1024];
		struct stat st;
		snprintf(p, sizeof(p), "%s/%s", dir, e->d_name);
		if (e->d_name[0] == '.' || stat(p, &st) != 0 || !S_ISREG(st.st_mode))
			continue;
		*apparent += (uint64_t)st.st_size;
		*allocated += (uint64_t)st.st_blocks * 512;
		(*files)++;
	}
	closedir(d);
}

static struct sp_json *info_json(const char *stepprof, const char *dir)
{
	char *argv[] = {(char *)stepprof, "info", "--json", (char *)dir, NULL};
	struct sp_t_result r;
	int st = sp_t_run(&r, argv, NULL, NULL, 60);
	cr_assert(st == 0 || st == 3, "info exited %d: %s", st, r.err);
	struct sp_json *j = sp_json_parse(r.out);
	cr_assert_not_null(j, "info --json: %s", r.out);
	sp_t_result_free(&r);
	return j;
}

/* Every file of info --json: apparent_bytes at most used_bytes plus a chunk. */
static void expect_compact(const struct sp_json *j, const char *when)
{
	const struct sp_json *files = sp_json_get(j, "files");
	cr_assert(files && files->n > 0, "%s: no files", when);
	for (size_t i = 0; i < files->n; i++) {
		const struct sp_json *f = sp_json_at(files, i);
		uint64_t used = sp_json_u64(f, "used_bytes", 0), app = sp_json_u64(f, "apparent_bytes", 0);
		cr_expect(used > 0 && app <= used + SP_TF_CHUNK_SIZE, "%s: %s holds %llu bytes but its size is %llu",
			  when, sp_json_str(f, "path"), (unsigned long long)used, (unsigned long long)app);
	}
}

static char *run_out(char *const argv[], int want)
{
	struct sp_t_result r;
	int st = sp_t_run(&r, argv, NULL, NULL, 120);
	cr_assert_eq(st, want, "%s %s exited %d (want %d): %s", argv[1], argv[2], st, want, r.err);
	char *out = r.out;
	r.out = NULL;
	sp_t_result_free(&r);
	return out;
}

Test(compact, a_clean_exit_leaves_files_the_size_of_what_they_hold, .timeout = 120)
{
	const char *trainer = sp_t_build("tests/bin/trainer"), *stepprof = sp_t_build("bin/stepprof");
	const char *lib = sp_t_build("lib/libstepprof.so");
	char *dir = sp_t_tmpdir("compact-clean");
	char ld[1100], sd[1100];
	snprintf(ld, sizeof(ld), "LD_PRELOAD=%s", realpath(lib, NULL));
	snprintf(sd, sizeof(sd), "STEPPROF_DIR=%s", dir);
	char *argv[] = {(char *)trainer, "--scenario", "input-bound", "--iters", "6", NULL};
	char *env[] = {ld, sd, NULL};
	struct sp_t_result r;
	cr_assert_eq(sp_t_run(&r, argv, env, NULL, 100), 0, "trainer: %s", r.err);
	sp_t_result_free(&r);

	uint64_t app, alloc;
	int files;
	dir_sizes(dir, &app, &alloc, &files);
	cr_assert_gt(files, 1, "the trainer and its loader workers each have a file");
	/* not 1 GiB apparent per file, for a few hundred KiB of records */
	cr_expect_leq(app, 2 * alloc + 4096 * (uint64_t)files, "apparent %llu bytes for %llu allocated",
		      (unsigned long long)app, (unsigned long long)alloc);
	struct sp_json *j = info_json(stepprof, dir);
	expect_compact(j, "after a clean exit");
	sp_json_free(j);
	/* compact has nothing left to do */
	char *cargv[] = {(char *)stepprof, "compact", dir, NULL};
	char *out = run_out(cargv, 0);
	cr_expect_not_null(strstr(out, "(compact already)"), "%s", out);
	free(out);
	sp_t_rmrf(dir);
	free(dir);
}

/* Start the trainer under the preload in its own process group; its pid. */
static pid_t start_job(const char *trainer, const char *lib, const char *dir, const char *iters)
{
	pid_t pid = fork();
	cr_assert_geq(pid, 0);
	if (pid == 0) {
		setpgid(0, 0);
		char *abs = realpath(lib, NULL);
		setenv("LD_PRELOAD", abs ? abs : lib, 1);
		setenv("STEPPROF_DIR", dir, 1);
		if (!freopen("/dev/null", "w", stdout))
			_exit(126);
		execl(trainer, trainer, "--scenario", "clean", "--iters", iters, (char *)NULL);
		_exit(127);
	}
	setpgid(pid, pid);
	return pid;
}

/* Wait until the job's files hold records (at most ~20 s). */
static void wait_records(const char *stepprof, const char *dir)
{
	for (int i = 0; i < 200; i++) {
		usleep(100 * 1000);
		DIR *d = opendir(dir);
		int any = 0;
		for (struct dirent *e; d && (e = readdir(d));)
			any |= e->d_name[0] != '.';
		if (d)
			closedir(d);
		if (!any)
			continue;
		struct sp_json *j = info_json(stepprof, dir);
		uint64_t rec = sp_json_u64(j, "files.0.records", 0);
		sp_json_free(j);
		if (rec > 200)
			return;
	}
	cr_assert_fail("the job wrote no records in 20 s");
}

Test(compact, a_killed_jobs_trace_is_compacted_with_the_same_analysis, .timeout = 180)
{
	const char *trainer = sp_t_build("tests/bin/trainer"), *stepprof = sp_t_build("bin/stepprof");
	const char *lib = sp_t_build("lib/libstepprof.so");
	char *dir = sp_t_tmpdir("compact-kill");
	char trace[1024], copy[1100];
	snprintf(trace, sizeof(trace), "%s/trace", dir);
	snprintf(copy, sizeof(copy), "%s/copy", dir);
	cr_assert_eq(mkdir(trace, 0700), 0);
	pid_t job = start_job(trainer, lib, trace, "100000");
	wait_records(stepprof, trace);

	/* while it runs: refused, and the file is left as it is */
	char *cargv[] = {(char *)stepprof, "compact", trace, NULL};
	struct sp_t_result r;
	int st = sp_t_run(&r, cargv, NULL, NULL, 60);
	cr_expect_neq(st, 0, "compact of a file being written succeeded: %s", r.out);
	cr_expect_not_null(strstr(r.err, "still being written by process"), "%s", r.err);
	sp_t_result_free(&r);

	usleep(1500 * 1000); /* a few iterations more */
	kill(-job, SIGKILL);
	int ws;
	waitpid(job, &ws, 0);
	cr_assert(WIFSIGNALED(ws) && WTERMSIG(ws) == SIGKILL);

	char cp[3000];
	snprintf(cp, sizeof(cp), "cp -a --sparse=always %s %s", trace, copy);
	cr_assert_eq(system(cp), 0);
	uint64_t app, alloc;
	int files;
	dir_sizes(trace, &app, &alloc, &files);
	cr_assert_gt(app, 4 * alloc, "a killed job's files are sparse: %llu apparent, %llu allocated",
		     (unsigned long long)app, (unsigned long long)alloc);

	char *out = run_out(cargv, 0);
	cr_expect_not_null(strstr(out, " -> "), "%s", out);
	free(out);
	dir_sizes(trace, &app, &alloc, &files);
	cr_expect_leq(app, 2 * alloc + 4096 * (uint64_t)files, "after compact: %llu apparent, %llu allocated",
		      (unsigned long long)app, (unsigned long long)alloc);
	struct sp_json *j = info_json(stepprof, trace);
	expect_compact(j, "after stepprof compact");
	cr_expect(!sp_json_path(j, "files.0.truncated") || !sp_json_path(j, "files.0.truncated")->num,
		  "a compact file reads as truncated");
	sp_json_free(j);

	/* the same analysis and export, byte for byte */
	static const char *const verbs[][3] = {{"analyze", "--json", NULL}, {"analyze", "--all", NULL},
					       {"export", "-o", "-"}};
	for (size_t v = 0; v < 3; v++) {
		char *a1[] = {(char *)stepprof, (char *)verbs[v][0], (char *)verbs[v][1], (char *)verbs[v][2], copy,
			      NULL};
		char *a2[] = {(char *)stepprof, (char *)verbs[v][0], (char *)verbs[v][1], (char *)verbs[v][2], trace,
			      NULL};
		if (!verbs[v][2]) {
			a1[3] = copy, a1[4] = NULL;
			a2[3] = trace, a2[4] = NULL;
		}
		struct sp_t_result r1, r2;
		int s1 = sp_t_run(&r1, a1, NULL, NULL, 120), s2 = sp_t_run(&r2, a2, NULL, NULL, 120);
		cr_expect_eq(s1, s2, "%s %s: exit %d before, %d after", verbs[v][0], verbs[v][1], s1, s2);
		/* the paths differ: compare with the directory's name replaced */
		char *o1 = r1.out, *o2 = r2.out;
		for (char *p; (p = strstr(o1, "/copy"));)
			memcpy(p, "/XXXX", 5);
		for (char *p; (p = strstr(o2, "/trace"));)
			memmove(p + 5, p + 6, strlen(p + 6) + 1), memcpy(p, "/XXXX", 5);
		cr_expect(r1.outlen > 100 && strcmp(o1, o2) == 0, "%s %s differs after compact", verbs[v][0],
			  verbs[v][1]);
		sp_t_result_free(&r1);
		sp_t_result_free(&r2);
	}
	sp_t_rmrf(dir);
	free(dir);
}

Test(compact, bad_input_is_refused_with_one_line)
{
	const char *stepprof = sp_t_build("bin/stepprof");
	char *dir = sp_t_tmpdir("compact-bad");
	char path[1024];
	snprintf(path, sizeof(path), "%s/x.sptrace", dir);
	/* a header with the magic and nonsense geometry */
	static uint8_t buf[SP_HEADER_SIZE + 4096];
	memset(buf, 0x5a, sizeof(buf));
	memcpy(buf, SP_MAGIC, 8);
	cr_assert_eq(sp_t_write_file(path, buf, sizeof(buf)), 0);
	char *argv[] = {(char *)stepprof, "compact", path, NULL};
	struct sp_t_result r;
	int st = sp_t_run(&r, argv, NULL, NULL, 30);
	cr_expect(st == 2 || st == 3, "exit %d", st);
	cr_expect_not_null(strstr(r.err, "stepprof: "), "%s", r.err);
	cr_expect_eq(strchr(r.err, '\n') - r.err + 1, (long)strlen(r.err), "one line: %s", r.err);
	sp_t_result_free(&r);
	struct stat sb;
	cr_expect(stat(path, &sb) == 0 && sb.st_size == (off_t)sizeof(buf), "the file was changed");
	char *argv2[] = {(char *)stepprof, "compact", NULL};
	cr_expect_eq(sp_t_run(&r, argv2, NULL, NULL, 30), 1);
	sp_t_result_free(&r);
	sp_t_rmrf(dir);
	free(dir);
}
