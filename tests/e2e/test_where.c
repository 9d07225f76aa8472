/*
 * test_where.c - a job run with LD_PRELOAD alone says where its trace went: one
 * line on stderr at the exit of its first process (hook_init.c), never from a
 * forked worker or an exec'd program, none with STEPPROF_QUIET=1; under
 * `stepprof run`, the command's line alone; `run` gives the job an absolute
 * LD_PRELOAD however it was invoked.
 */
#include <criterion/criterion.h>
#include <dirent.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "testlib.h"

/* Occurrences of needle in hay. */
static unsigned occurrences(const char *hay, const char *needle)
{
	unsigned n = 0;
	for (const char *p = hay; (p = strstr(p, needle)); p += strlen(needle))
		n++;
	return n;
}

/* Files named *.sptrace in dir. */
static unsigned traces_in(const char *dir)
{
	DIR *d = opendir(dir);
	cr_assert_not_null(d, "%s", dir);
	unsigned n = 0;
	for (struct dirent *e; (e = readdir(d));) {
		size_t len = strlen(e->d_name);
		n += len > 8 && !strcmp(e->d_name + len - 8, ".sptrace");
	}
	closedir(d);
	return n;
}

/* argv under LD_PRELOAD into dir/trace (quiet: STEPPROF_QUIET=1); its trace-location lines (malloc'd). */
static char *preloaded(const char *dir, char *const argv[], int quiet)
{
	char pre[PATH_MAX + 16], sd[PATH_MAX + 16];
	snprintf(pre, sizeof(pre), "LD_PRELOAD=%s", sp_t_build("lib/libstepprof.so"));
	snprintf(sd, sizeof(sd), "STEPPROF_DIR=%s/trace", dir);
	char *env[] = {pre, sd, quiet ? "STEPPROF_QUIET=1" : "STEPPROF_QUIET=0", "STEPPROF_RUN_ID=",
		       "STEPPROF_FIRST_PID=", NULL};
	struct sp_t_result r;
	cr_assert_eq(sp_t_run(&r, argv, env, NULL, 120), 0, "%s: %s", argv[0], r.err);
	cr_expect_null(strstr(r.err, "stepprof: "), "no other stepprof: line: %s", r.err);
	char *where = strdup(r.where);
	sp_t_result_free(&r);
	return where;
}

/* The line a job whose trace is dir/trace (n files) must print. */
static void expected_line(char *buf, size_t len, const char *dir, unsigned n)
{
	snprintf(buf, len, "stepprof: trace in %s/trace (%u file%s) \u2014 stepprof analyze %s/trace\n", dir, n,
		 n == 1 ? "" : "s", dir);
}

Test(where, the_first_process_says_where_its_trace_is_once)
{
	char *dir = sp_t_tmpdir("where");
	char *markgen[] = {(char *)sp_t_build("tests/bin/markgen"), "-n", "10", NULL};
	char *err = preloaded(dir, markgen, 0), want[2 * PATH_MAX + 96], tdir[PATH_MAX];
	expected_line(want, sizeof(want), dir, 1);
	cr_expect_str_eq(err, want, "one line, nothing else");
	free(err);
	sp_t_rmrf(dir);

	/* a trainer with two forked loader workers: one line, from the parent, counting every file */
	char *trainer[] = {(char *)sp_t_build("tests/bin/trainer"), "--scenario", "clean", "--iters", "3",
			   "--workers", "2", NULL};
	err = preloaded(dir, trainer, 0);
	snprintf(tdir, sizeof(tdir), "%s/trace", dir);
	unsigned files = traces_in(tdir);
	cr_expect_geq(files, 3, "the trainer and its two workers");
	expected_line(want, sizeof(want), dir, files);
	cr_expect_eq(occurrences(err, "stepprof: trace in "), 1, "%s", err);
	cr_expect(strstr(err, want), "%s", err);
	free(err);
	sp_t_rmrf(dir);

	/* the first process exec'd into the job (`sh -c 'exec ...'`): still one line, from the job */
	char script[PATH_MAX + 32];
	snprintf(script, sizeof(script), "exec %s -n 5", sp_t_build("tests/bin/markgen"));
	char *sh[] = {"/bin/sh", "-c", script, NULL};
	err = preloaded(dir, sh, 0);
	cr_expect_eq(occurrences(err, "stepprof: trace in "), 1, "%s", err);
	free(err);
	sp_t_rmrf(dir);

	/* a shell that runs two programs: its children never say it, the shell does at its end */
	snprintf(script, sizeof(script), "%s -n 5; %s -n 5", sp_t_build("tests/bin/markgen"),
		 sp_t_build("tests/bin/markgen"));
	err = preloaded(dir, sh, 0);
	cr_expect_eq(occurrences(err, "stepprof: trace in "), 1, "%s", err);
	cr_expect_eq(err[strlen(err) - 1], '\n');
	free(err);
	sp_t_rmrf(dir);
	free(dir);
}

Test(where, quiet_jobs_and_jobs_without_a_trace_say_nothing)
{
	char *dir = sp_t_tmpdir("where");
	char *markgen[] = {(char *)sp_t_build("tests/bin/markgen"), "-n", "10", NULL};
	char *err = preloaded(dir, markgen, 1);
	cr_expect_str_empty(err, "STEPPROF_QUIET=1: %s", err);
	free(err);
	sp_t_rmrf(dir);
	/* a job that records nothing leaves no file, and no advice to analyze nothing */
	char *t[] = {"/bin/true", NULL};
	err = preloaded(dir, t, 0);
	cr_expect_null(strstr(err, "stepprof: trace in"), "%s", err);
	free(err);
	sp_t_rmrf(dir);
	free(dir);
}

Test(where, under_stepprof_run_the_command_says_it_alone)
{
	char *dir = sp_t_tmpdir("where"), tdir[PATH_MAX], want[2 * PATH_MAX + 96];
	snprintf(tdir, sizeof(tdir), "%s/trace", dir);
	char *argv[] = {(char *)sp_t_build("bin/stepprof"), "run", "--no-bpf", "-o", tdir, "--",
			(char *)sp_t_build("tests/bin/trainer"), "--scenario", "clean", "--iters", "3", "--workers", "2",
			NULL};
	char *env[] = {"STEPPROF_QUIET=0", "STEPPROF_RUN_ID=", "STEPPROF_FIRST_PID=", "LD_PRELOAD=", NULL};
	struct sp_t_result r;
	cr_assert_eq(sp_t_run(&r, argv, env, NULL, 120), 0, "%s", r.err);
	cr_expect_eq(occurrences(r.where, "stepprof: trace in "), 1, "%s", r.where);
	expected_line(want, sizeof(want), dir, traces_in(tdir));
	cr_expect_str_eq(r.where, want);
	sp_t_result_free(&r);
	sp_t_rmrf(dir);
	free(dir);
}

/*
 * The dynamic loader resolves a relative LD_PRELOAD against each new program's
 * working directory: `stepprof run` run by a relative path from elsewhere still
 * gives its job the library's absolute path, which a job that changes directory
 * and runs another program keeps finding.
 */
Test(where, run_by_a_relative_path_preloads_an_absolute_one)
{
	char *dir = sp_t_tmpdir("where");
	char root[PATH_MAX], rel[3 * PATH_MAX];
	char *bin = realpath(sp_t_build("bin/stepprof"), NULL);
	cr_assert_not_null(bin);
	/* from the directory above the build's bin/: "bin/stepprof" */
	snprintf(root, sizeof(root), "%s", bin);
	*strrchr(root, '/') = 0;
	*strrchr(root, '/') = 0;
	snprintf(rel, sizeof(rel), "cd '%s' && exec bin/stepprof run --no-bpf -o '%s/trace' -- sh -c 'cd / && printenv LD_PRELOAD'",
		 root, dir);
	char *argv[] = {"/bin/sh", "-c", rel, NULL};
	char *env[] = {"STEPPROF_QUIET=1", "LD_PRELOAD=", "STEPPROF_LIB=", NULL};
	struct sp_t_result r;
	cr_assert_eq(sp_t_run(&r, argv, env, NULL, 60), 0, "%s", r.err);
	cr_expect_eq(r.out[0], '/', "the job's LD_PRELOAD is not absolute: %s", r.out);
	cr_expect(strstr(r.out, "libstepprof.so"), "%s", r.out);
	sp_t_result_free(&r);
	free(bin);
	sp_t_rmrf(dir);
	free(dir);
}

/* A run directory named as the recorder names them, under parent, holding markgen's trace; its path. */
static char *run_dir(const char *parent, const char *name, int marks)
{
	char *d = malloc(PATH_MAX);
	cr_assert_not_null(d);
	snprintf(d, PATH_MAX, "%s/%s", parent, name);
	char pre[PATH_MAX + 16], sd[PATH_MAX + 16], n[16];
	snprintf(pre, sizeof(pre), "LD_PRELOAD=%s", sp_t_build("lib/libstepprof.so"));
	snprintf(sd, sizeof(sd), "STEPPROF_DIR=%s", d);
	snprintf(n, sizeof(n), "%d", marks);
	char *env[] = {pre, sd, "STEPPROF_QUIET=1", "STEPPROF_RUN_ID=", NULL};
	char *argv[] = {(char *)sp_t_build("tests/bin/markgen"), "-n", n, NULL};
	struct sp_t_result r;
	cr_assert_eq(sp_t_run(&r, argv, env, NULL, 60), 0, "%s", r.err);
	sp_t_result_free(&r);
	return d;
}

/* `stepprof analyze ARGS` run in cwd; its result. */
static void analyze_in(struct sp_t_result *r, const char *cwd, const char *arg)
{
	char cmd[3 * PATH_MAX];
	snprintf(cmd, sizeof(cmd), "cd '%s' && exec '%s' analyze --json %s", cwd, realpath(sp_t_build("bin/stepprof"), NULL),
		 arg ? arg : "");
	char *argv[] = {"/bin/sh", "-c", cmd, NULL};
	sp_t_run(r, argv, NULL, NULL, 60);
}

Test(where, analyze_with_no_operand_takes_the_newest_run)
{
	char *dir = sp_t_tmpdir("where");
	struct sp_t_result r;
	/* none here: one line, exit 1 */
	analyze_in(&r, dir, NULL);
	cr_expect_eq(r.status, 1, "%s", r.err);
	cr_expect_str_eq(r.err, "stepprof: analyze: no DIR|FILE given, and no ./stepprof-* trace directory here (stepprof analyze "
				  "--help)\n");
	sp_t_result_free(&r);
	/* two runs, the second written later (and named earlier: the time decides, not the name) */
	char *a = run_dir(dir, "stepprof-20991231-235959-1", 10);
	sleep(1);
	char *b = run_dir(dir, "stepprof-20000101-000000-2", 30);
	char other[PATH_MAX];
	snprintf(other, sizeof(other), "%s/stepprof-notes", dir);
	cr_assert_eq(mkdir(other, 0700), 0, "a stepprof-* directory without trace files is no run");
	analyze_in(&r, dir, NULL);
	cr_expect_eq(r.status, 0, "%s", r.err);
	cr_expect_str_eq(r.err, "stepprof: analyzing ./stepprof-20000101-000000-2 (the newest of 2 trace directories here)\n");
	struct sp_json *j = sp_json_parse(r.out);
	cr_assert_not_null(j, "%s", r.out);
	cr_expect_eq(sp_json_u64(j, "processes.0.records", 0) >= 30, 1, "the newer run's 30 marks: %s", r.out);
	sp_json_free(j);
	sp_t_result_free(&r);
	free(a);
	free(b);
	sp_t_rmrf(dir);
	free(dir);
}

Test(where, a_directory_of_runs_lists_them)
{
	char *dir = sp_t_tmpdir("where");
	char *a = run_dir(dir, "stepprof-1", 5), *b = run_dir(dir, "job-b", 5);
	struct sp_t_result r;
	analyze_in(&r, dir, ".");
	cr_expect_eq(r.status, 2, "%s", r.err);
	cr_expect(strstr(r.err, "stepprof: .: no stepprof trace files in this directory, but 2 trace directories in it"),
		  "%s", r.err);
	cr_expect(strstr(r.err, "  ./stepprof-1  (1 file, modified ") && strstr(r.err, "  ./job-b  (1 file, modified "),
		  "both listed, whatever their names: %s", r.err);
	sp_t_result_free(&r);
	/* an empty directory: the plain line, nothing listed */
	char empty[PATH_MAX];
	snprintf(empty, sizeof(empty), "%s/empty", dir);
	cr_assert_eq(mkdir(empty, 0700), 0);
	analyze_in(&r, empty, ".");
	cr_expect_eq(r.status, 2);
	cr_expect_str_eq(r.err, "stepprof: .: no stepprof trace files in this directory\n");
	sp_t_result_free(&r);
	free(a);
	free(b);
	sp_t_rmrf(dir);
	free(dir);
}
