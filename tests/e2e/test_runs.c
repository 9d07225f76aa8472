/*
 * test_runs.c - run ids: every process of a job writes the same one (forked
 * workers, exec'd programs), a second job into the same `stepprof run -o DIR`
 * is refused before it runs (exit 125, one line, the first job's files intact)
 * unless --force removes the old files, analyze/export/watch refuse files of
 * two runs unless --merge-runs, -o's %p %h %q{VAR} %% substitutions, and a
 * trace without a run id (before format 1.4) still read and merged.
 */
#include "test_io_helpers.h"

#include <limits.h>
#include <stddef.h>
#include <sys/stat.h>
#include <unistd.h>

#include "stepprof/trace.h"

#define RUNS_MAX 64

/* What `stepprof info --json` says of each file of a directory. */
struct runs_info {
	size_t n;
	char id[RUNS_MAX][32];
	int64_t pid[RUNS_MAX];
	char path[RUNS_MAX][PATH_MAX];
};

static int count_lines(const char *s)
{
	int n = 0;
	for (; s && *s; s++)
		n += *s == '\n';
	return n;
}

static void runs_info(const char *dir, struct runs_info *in)
{
	char *stepprof = io_t_abs("bin/stepprof");
	char *argv[] = { stepprof, "info", "--json", (char *)dir, NULL };
	struct sp_t_result res;
	cr_assert_eq(sp_t_run(&res, argv, NULL, NULL, 60), 0, "info %s: %s", dir, res.err);
	struct sp_json *j = sp_json_parse(res.out);
	cr_assert_not_null(j, "info --json: %s", res.out);
	struct sp_json *files = sp_json_get(j, "files");
	cr_assert_not_null(files);
	memset(in, 0, sizeof(*in));
	for (size_t i = 0; i < files->n && i < RUNS_MAX; i++) {
		struct sp_json *f = sp_json_at(files, i);
		const char *id = sp_json_str(f, "run_id");
		cr_assert_not_null(id, "info --json has no run_id: %s", res.out);
		snprintf(in->id[i], sizeof(in->id[i]), "%s", id);
		snprintf(in->path[i], sizeof(in->path[i]), "%s", sp_json_str(f, "path"));
		in->pid[i] = sp_json_i64(f, "pid", -1);
		in->n++;
	}
	sp_json_free(j);
	sp_t_result_free(&res);
	free(stepprof);
}

/* Every file of in has the one run id *id (non-empty). */
static const char *runs_one_id(const struct runs_info *in, const char *what)
{
	cr_assert_gt(in->n, 0, "%s: no trace files", what);
	for (size_t i = 0; i < in->n; i++) {
		cr_expect_eq(strlen(in->id[i]), 16, "%s: run id \"%s\" of %s is not 16 hex digits", what, in->id[i],
			     in->path[i]);
		cr_expect_str_eq(in->id[i], in->id[0], "%s: %s has run %s, %s has %s", what, in->path[i], in->id[i],
				 in->path[0], in->id[0]);
	}
	return in->id[0];
}

/* stepprof run --no-bpf [--force] -o DIR -- trainer --iters 3 (quiet) */
static int runs_trainer(struct sp_t_result *res, const char *dir, int force)
{
	char *stepprof = io_t_abs("bin/stepprof"), *trainer = io_t_abs("tests/bin/trainer");
	char *argv[] = { stepprof, "run", "--no-bpf", "-o", (char *)dir, "--force", "--", trainer, "--iters", "3", NULL };
	if (!force)
		argv[5] = "--no-bpf"; /* the same option again: no --force */
	char *env[] = { "STEPPROF_QUIET=1", "STEPPROF_RUN_ID=", NULL };
	int st = sp_t_run(res, argv, env, NULL, 60);
	free(stepprof);
	free(trainer);
	return st;
}

/* stepprof VERB ARGS... (at most 6) */
static int runs_verb(struct sp_t_result *res, const char *verb, const char *a1, const char *a2, const char *a3,
		     const char *a4)
{
	char *stepprof = io_t_abs("bin/stepprof");
	char *argv[] = { stepprof, (char *)verb, (char *)a1, (char *)a2, (char *)a3, (char *)a4, NULL };
	int st = sp_t_run(res, argv, NULL, NULL, 60);
	free(stepprof);
	return st;
}

static int has_pid(const struct runs_info *in, int64_t pid)
{
	for (size_t i = 0; i < in->n; i++)
		if (in->pid[i] == pid)
			return 1;
	return 0;
}

/*
 * A second job into one -o DIR: refused before it runs, one line, exit 125, the
 * first job's files as they were. With --force the old files (and only trace
 * files) go, and analyze sees only the new job's processes.
 */
Test(runs, a_second_run_into_one_directory_is_refused_unless_forced, .timeout = 120)
{
	char *tmp = sp_t_tmpdir("runs-again");
	char dir[PATH_MAX], note[PATH_MAX + 16];
	snprintf(dir, sizeof(dir), "%s/trace", tmp);
	struct sp_t_result res;
	cr_assert_eq(runs_trainer(&res, dir, 0), 0, "%s", res.err);
	sp_t_result_free(&res);
	struct runs_info first, again, second;
	runs_info(dir, &first);
	const char *id1 = runs_one_id(&first, "first run");
	snprintf(note, sizeof(note), "%s/notes.txt", dir);
	cr_assert_eq(sp_t_write_file(note, "mine\n", 5), 0);

	/* must not: a second job merged into the first one's directory */
	cr_expect_eq(runs_trainer(&res, dir, 0), 125, "a second run into %s: %s", dir, res.err);
	cr_expect_eq(count_lines(res.err), 1, "one line: %s", res.err);
	cr_expect(strstr(res.err, "another run") && strstr(res.err, id1) && strstr(res.err, "--force"), "%s",
		  res.err);
	cr_expect_eq(res.outlen, 0, "the job must not have run: %s", res.out);
	sp_t_result_free(&res);
	runs_info(dir, &again);
	cr_expect_eq(again.n, first.n, "the first run's files must stay");
	for (size_t i = 0; i < again.n; i++) {
		cr_expect_str_eq(again.path[i], first.path[i]);
		cr_expect_str_eq(again.id[i], id1);
	}

	/* must: --force replaces them, and only the new run is analysed */
	cr_expect_eq(runs_trainer(&res, dir, 1), 0, "%s", res.err);
	sp_t_result_free(&res);
	runs_info(dir, &second);
	const char *id2 = runs_one_id(&second, "forced run");
	cr_expect_str_neq(id2, id1, "a new run id per run");
	struct stat st;
	cr_expect_eq(stat(note, &st), 0, "--force removes trace files only: %s is gone", note);
	cr_assert_eq(runs_verb(&res, "analyze", "--json", dir, NULL, NULL), 0, "%s", res.err);
	struct sp_json *j = sp_json_parse(res.out);
	cr_assert_not_null(j);
	struct sp_json *procs = sp_json_get(j, "processes");
	cr_assert_not_null(procs);
	cr_expect_eq(procs->n, second.n, "analyze: %zu processes, the second run has %zu files", procs->n, second.n);
	for (size_t i = 0; i < procs->n; i++) {
		int64_t pid = sp_json_i64(sp_json_at(procs, i), "pid", -1);
		cr_expect(has_pid(&second, pid) && !has_pid(&first, pid), "pid %lld is not the second run's",
			  (long long)pid);
	}
	sp_json_free(j);
	sp_t_result_free(&res);
	sp_t_rmrf(tmp);
	free(tmp);
}

/*
 * Two runs' directories given together: analyze, export and watch refuse them
 * with one line naming both run ids; --merge-runs merges them. One run's
 * directory alone is no refusal.
 */
Test(runs, files_of_two_runs_are_merged_only_when_asked, .timeout = 120)
{
	char *tmp = sp_t_tmpdir("runs-two");
	char a[PATH_MAX], b[PATH_MAX], out[PATH_MAX + 16];
	snprintf(a, sizeof(a), "%s/a", tmp);
	snprintf(b, sizeof(b), "%s/b", tmp);
	struct sp_t_result res;
	cr_assert_eq(runs_trainer(&res, a, 0), 0, "%s", res.err);
	sp_t_result_free(&res);
	cr_assert_eq(runs_trainer(&res, b, 0), 0, "%s", res.err);
	sp_t_result_free(&res);
	struct runs_info ia, ib;
	runs_info(a, &ia);
	runs_info(b, &ib);
	const char *ida = runs_one_id(&ia, "a"), *idb = runs_one_id(&ib, "b");
	cr_assert_str_neq(ida, idb);

	/* must not */
	cr_expect_eq(runs_verb(&res, "analyze", a, b, NULL, NULL), 1, "%s", res.err);
	cr_expect_eq(count_lines(res.err), 1, "one line: %s", res.err);
	cr_expect(strstr(res.err, ida) && strstr(res.err, idb) && strstr(res.err, a) && strstr(res.err, b) &&
			  strstr(res.err, "--merge-runs"),
		  "the line names both runs and their directories: %s", res.err);
	cr_expect_eq(res.outlen, 0, "no report: %s", res.out);
	sp_t_result_free(&res);
	snprintf(out, sizeof(out), "%s/x.json", tmp);
	cr_expect_eq(runs_verb(&res, "export", "-o", out, a, b), 1, "%s", res.err);
	cr_expect(strstr(res.err, ida) && strstr(res.err, idb), "%s", res.err);
	sp_t_result_free(&res);
	/* one directory holding both runs' files: watch names a file of each */
	char both[PATH_MAX], cmd[5 * PATH_MAX];
	snprintf(both, sizeof(both), "%s/both", tmp);
	snprintf(cmd, sizeof(cmd), "mkdir %s && cp %s/* %s/* %s/", both, a, b, both);
	cr_assert_eq(system(cmd), 0);
	cr_expect_eq(runs_verb(&res, "watch", "--once", both, NULL, NULL), 1, "%s", res.err);
	cr_expect(strstr(res.err, ida) && strstr(res.err, idb) && strstr(res.err, ".sptrace"), "%s", res.err);
	sp_t_result_free(&res);

	/* must */
	cr_expect_eq(runs_verb(&res, "analyze", "--json", "--merge-runs", a, b), 0, "%s", res.err);
	struct sp_json *j = sp_json_parse(res.out);
	cr_assert_not_null(j);
	cr_expect_eq(sp_json_get(j, "processes")->n, ia.n + ib.n, "merged: every process of both runs");
	sp_json_free(j);
	sp_t_result_free(&res);
	cr_expect_eq(runs_verb(&res, "export", "--merge-runs", "-o", out, both), 0, "%s", res.err);
	sp_t_result_free(&res);
	cr_expect_eq(runs_verb(&res, "watch", "--once", "--merge-runs", both, NULL), 0, "%s", res.err);
	sp_t_result_free(&res);
	cr_expect_eq(runs_verb(&res, "analyze", b, NULL, NULL, NULL), 0, "one run: %s", res.err);
	sp_t_result_free(&res);
	sp_t_rmrf(tmp);
	free(tmp);
}

/*
 * Under LD_PRELOAD alone (no stepprof run): the first process makes the id, its
 * forked loader workers and the programs its shell execs write the same one; a
 * job started apart gets another.
 */
Test(runs, forked_and_execd_children_share_the_run_id, .timeout = 120)
{
	char *tmp = sp_t_tmpdir("runs-children");
	char *lib = io_t_abs("lib/libstepprof.so"), *trainer = io_t_abs("tests/bin/trainer");
	char *markgen = io_t_abs("tests/bin/markgen");
	char dir[PATH_MAX], other[PATH_MAX], pre[PATH_MAX + 16], edir[PATH_MAX + 16], script[4 * PATH_MAX];
	snprintf(dir, sizeof(dir), "%s/job", tmp);
	snprintf(other, sizeof(other), "%s/other", tmp);
	snprintf(pre, sizeof(pre), "LD_PRELOAD=%s", lib);
	snprintf(edir, sizeof(edir), "STEPPROF_DIR=%s", dir);
	/* the trainer forks 4 loader workers; the shell execs the trainer and markgen */
	snprintf(script, sizeof(script), "%s --scenario input-bound --iters 3 >/dev/null && %s -n 10 >/dev/null",
		 trainer, markgen);
	char *argv[] = { "/bin/sh", "-c", script, NULL };
	char *env[] = { pre, edir, "STEPPROF_RUN_ID=", "STEPPROF_QUIET=1", NULL };
	struct sp_t_result res;
	cr_assert_eq(sp_t_run(&res, argv, env, NULL, 90), 0, "%s", res.err);
	sp_t_result_free(&res);
	struct runs_info in, io;
	runs_info(dir, &in);
	cr_expect_geq(in.n, 6, "the trainer, its 4 workers and markgen: %zu files", in.n);
	const char *id = runs_one_id(&in, "one job");

	snprintf(edir, sizeof(edir), "STEPPROF_DIR=%s", other);
	char *argv2[] = { markgen, "-n", "10", NULL };
	cr_assert_eq(sp_t_run(&res, argv2, env, NULL, 60), 0, "%s", res.err);
	sp_t_result_free(&res);
	runs_info(other, &io);
	cr_expect_str_neq(runs_one_id(&io, "another job"), id, "a job started apart has its own run id");
	free(lib);
	free(trainer);
	free(markgen);
	sp_t_rmrf(tmp);
	free(tmp);
}

/* STEPPROF_RUN_ID given to stepprof run is the job's (e.g. one per Slurm job); a bad one is refused. */
Test(runs, a_given_run_id_is_the_jobs, .timeout = 60)
{
	char *tmp = sp_t_tmpdir("runs-given");
	char dir[PATH_MAX];
	snprintf(dir, sizeof(dir), "%s/t", tmp);
	char *stepprof = io_t_abs("bin/stepprof"), *markgen = io_t_abs("tests/bin/markgen");
	char *argv[] = { stepprof, "run", "--no-bpf", "-o", dir, "--", markgen, "-n", "10", NULL };
	char *env[] = { "STEPPROF_QUIET=1", "STEPPROF_RUN_ID=job-4242.n1", NULL };
	struct sp_t_result res;
	cr_assert_eq(sp_t_run(&res, argv, env, NULL, 60), 0, "%s", res.err);
	sp_t_result_free(&res);
	struct runs_info in;
	runs_info(dir, &in);
	cr_assert_eq(in.n, 1);
	cr_expect_str_eq(in.id[0], "job-4242.n1");
	/* the same id again into the same directory: the same run (another node's), not refused */
	cr_expect_eq(sp_t_run(&res, argv, env, NULL, 60), 0, "%s", res.err);
	sp_t_result_free(&res);
	char *bad[] = { "STEPPROF_QUIET=1", "STEPPROF_RUN_ID=a b", NULL };
	cr_expect_eq(sp_t_run(&res, argv, bad, NULL, 60), 125, "%s", res.err);
	cr_expect_eq(count_lines(res.err), 1, "%s", res.err);
	cr_expect(strstr(res.err, "STEPPROF_RUN_ID"), "%s", res.err);
	sp_t_result_free(&res);
	free(stepprof);
	free(markgen);
	sp_t_rmrf(tmp);
	free(tmp);
}

/* -o's substitutions: %p (stepprof run's pid), %h, %q{VAR}, %%; an unset VAR or an unknown % is refused. */
Test(runs, output_substitutions, .timeout = 60)
{
	char *tmp = sp_t_tmpdir("runs-subst");
	char pat[PATH_MAX], want[PATH_MAX + 300], host[256] = "";
	gethostname(host, sizeof(host) - 1);
	snprintf(pat, sizeof(pat), "%s/t-%%h-%%q{SP_T_RUNS_VAR}-%%%%-%%p", tmp);
	char *stepprof = io_t_abs("bin/stepprof");
	char *argv[] = { stepprof, "run", "--no-bpf", "-o", pat, "--", "/bin/sh", "-c", "echo $STEPPROF_DIR", NULL };
	char *env[] = { "STEPPROF_QUIET=1", "SP_T_RUNS_VAR=job7", NULL };
	struct sp_t_result res;
	cr_assert_eq(sp_t_run(&res, argv, env, NULL, 60), 0, "%s", res.err);
	snprintf(want, sizeof(want), "%s/t-%s-job7-%%-", tmp, host);
	cr_expect_eq(strncmp(res.out, want, strlen(want)), 0, "the job's directory %s is not %s<pid>", res.out, want);
	char *end;
	long pid = strtol(res.out + strlen(want), &end, 10);
	cr_expect(pid > 0 && *end == '\n', "%%p: %s", res.out);
	struct stat st;
	res.out[strcspn(res.out, "\n")] = 0;
	cr_expect(stat(res.out, &st) == 0 && S_ISDIR(st.st_mode), "%s was not made", res.out);
	sp_t_result_free(&res);

	const char *bad[] = { "%q{SP_T_RUNS_UNSET}", "%z", "%q{", "%" };
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		snprintf(pat, sizeof(pat), "%s/u%s", tmp, bad[i]);
		char *env2[] = { "STEPPROF_QUIET=1", "SP_T_RUNS_UNSET=", NULL };
		cr_expect_eq(sp_t_run(&res, argv, env2, NULL, 60), 125, "-o %s: %s", pat, res.err);
		cr_expect_eq(count_lines(res.err), 1, "%s", res.err);
		cr_expect_eq(res.outlen, 0, "the job must not run: %s", res.out);
		sp_t_result_free(&res);
	}
	free(stepprof);
	sp_t_rmrf(tmp);
	free(tmp);
}

/*
 * A trace written before format 1.4 has no run id: it is still read, info says
 * "", and it goes with a run that has one (nothing tells them apart) rather than
 * being refused.
 */
Test(runs, a_trace_without_a_run_id_still_analyses, .timeout = 120)
{
	char *tmp = sp_t_tmpdir("runs-old");
	char dir[PATH_MAX], old[PATH_MAX], cmd[3 * PATH_MAX];
	snprintf(dir, sizeof(dir), "%s/new", tmp);
	snprintf(old, sizeof(old), "%s/old", tmp);
	struct sp_t_result res;
	cr_assert_eq(runs_trainer(&res, dir, 0), 0, "%s", res.err);
	sp_t_result_free(&res);
	snprintf(cmd, sizeof(cmd), "cp -r %s %s", dir, old);
	cr_assert_eq(system(cmd), 0);
	/* the old files as a 1.3 writer left them: minor 3, no run id (zeros) */
	struct runs_info in;
	runs_info(old, &in);
	for (size_t i = 0; i < in.n; i++) {
		FILE *f = fopen(in.path[i], "r+b");
		cr_assert_not_null(f);
		uint16_t minor = 3;
		char zero[SP_RUN_ID_SIZE] = { 0 };
		fseek(f, 10, SEEK_SET);
		fwrite(&minor, 2, 1, f);
		fseek(f, (long)offsetof(struct sp_file_header, run_id), SEEK_SET);
		fwrite(zero, sizeof(zero), 1, f);
		fclose(f);
	}
	runs_info(old, &in);
	for (size_t i = 0; i < in.n; i++)
		cr_expect_str_eq(in.id[i], "", "%s", in.path[i]);
	cr_expect_eq(runs_verb(&res, "analyze", "--json", old, NULL, NULL), 0, "%s", res.err);
	struct sp_json *j = sp_json_parse(res.out);
	cr_assert_not_null(j);
	cr_expect_eq(sp_json_get(j, "processes")->n, in.n);
	sp_json_free(j);
	sp_t_result_free(&res);
	/* with a run of 1.4: merged, not refused */
	cr_expect_eq(runs_verb(&res, "analyze", old, dir, NULL, NULL), 0, "%s", res.err);
	sp_t_result_free(&res);
	/* must not: such files in a stepprof run -o DIR are another run's */
	cr_expect_eq(runs_trainer(&res, old, 0), 125, "%s", res.err);
	cr_expect(strstr(res.err, "no run id"), "%s", res.err);
	sp_t_result_free(&res);
	sp_t_rmrf(tmp);
	free(tmp);
}
