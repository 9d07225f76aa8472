/*
 * trainerlib.c - running the trainer workload under the preload for the e2e
 * tests (see trainerlib.h): the test's directory, the environment entry, its
 * ground truth, a job of several ranks. Failures are Criterion assertions:
 * they end the calling test.
 */
#include <criterion/criterion.h>
#include <dirent.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "trainerlib.h"

char *sp_t_cur_dir;

void sp_t_remove_cur_dir(void)
{
	if (sp_t_cur_dir) {
		sp_t_rmrf(sp_t_cur_dir);
		free(sp_t_cur_dir);
		sp_t_cur_dir = NULL;
	}
}

char *sp_t_preload_env(void)
{
	char *lib = realpath(sp_t_build("lib/libstepprof.so"), NULL);
	cr_assert_not_null(lib, "build/lib/libstepprof.so is not built");
	char *e = malloc(strlen(lib) + 16);
	cr_assert_not_null(e);
	sprintf(e, "LD_PRELOAD=%s", lib);
	free(lib);
	return e;
}

void sp_t_run_trainer(struct sp_t_result *r, const char *tdir, char *const args[])
{
	sp_t_run_trainer_env(r, tdir, args, NULL);
}

void sp_t_run_trainer_env(struct sp_t_result *r, const char *tdir, char *const args[], char *const more_env[])
{
	char *argv[32], cmd[1024], env_dir[PATH_MAX + 16];
	int n = 0, len = snprintf(cmd, sizeof(cmd), "trainer");
	argv[n++] = (char *)sp_t_build("tests/bin/trainer");
	for (; args[n - 1] && n < 31; n++) {
		argv[n] = args[n - 1];
		len += snprintf(cmd + len, sizeof(cmd) - (size_t)len, " %s", args[n - 1]);
		if (len >= (int)sizeof(cmd))
			len = (int)sizeof(cmd) - 1;
	}
	argv[n] = NULL;
	snprintf(env_dir, sizeof(env_dir), "STEPPROF_DIR=%s", tdir);
	char *env_pre = sp_t_preload_env();
	char *env[16] = {env_pre, env_dir, "STEPPROF_MAX_MB=64", NULL};
	for (int k = 3; more_env && more_env[k - 3] && k < 15; k++)
		env[k] = more_env[k - 3], env[k + 1] = NULL;
	sp_t_run(r, argv, env, NULL, 120);
	free(env_pre);
	cr_assert_eq(r->status, 0, "%s: exit %d: %s", cmd, r->status, r->err);
}

struct sp_json *sp_t_parse_last_line(const char *text)
{
	const char *line = text, *nl;
	while ((nl = strchr(line, '\n')) && nl[1])
		line = nl + 1;
	return sp_json_parse(line);
}

struct sp_json *sp_t_truth_file(const char *path)
{
	char *text = sp_t_read_file(path, NULL);
	cr_assert_not_null(text, "%s: no trainer output", path);
	struct sp_json *j = sp_t_parse_last_line(text);
	cr_assert_not_null(j, "%s: no ground-truth JSON line: %s", path, text);
	free(text);
	return j;
}

char *sp_t_run_ranks(const char *dir, const char *sub, int n, const char *const *scenarios, int iters,
		     struct sp_json **truth)
{
	char script[4096], env_dir[PATH_MAX + 16];
	int len = 0;
	for (int k = 0; k < n; k++) {
		if (n > 1)
			len += snprintf(script + len, sizeof(script) - (size_t)len,
					"RANK=%d LOCAL_RANK=%d WORLD_SIZE=%d ", k, k, n);
		len += snprintf(script + len, sizeof(script) - (size_t)len,
				"%s --scenario %s --iters %d > %s/truth%d.json 2> %s/err%d.txt & p%d=$!; ",
				sp_t_build("tests/bin/trainer"), scenarios[k], iters, dir, k, dir, k, k);
	}
	/* every rank's exit status: a failed trainer fails the test */
	len += snprintf(script + len, sizeof(script) - (size_t)len, "rc=0; ");
	for (int k = 0; k < n; k++)
		len += snprintf(script + len, sizeof(script) - (size_t)len, "wait $p%d || rc=1; ", k);
	snprintf(script + len, sizeof(script) - (size_t)len, "exit $rc");
	snprintf(env_dir, sizeof(env_dir), "STEPPROF_DIR=%s/%s", dir, sub);
	char *env_pre = sp_t_preload_env();
	/* the test's own RANK variables, if any, unset: only the script sets them */
	char *env[] = {env_pre, env_dir, "STEPPROF_MAX_MB=64", "RANK=", "LOCAL_RANK=", "WORLD_SIZE=", NULL};
	char *argv[] = {"/bin/sh", "-c", script, NULL};
	struct sp_t_result r;
	sp_t_run(&r, argv, env, NULL, 120);
	int status = r.status;
	sp_t_result_free(&r);
	free(env_pre);
	for (int k = 0; k < n; k++) {
		char p[PATH_MAX];
		snprintf(p, sizeof(p), "%s/err%d.txt", dir, k);
		char *e = sp_t_read_file(p, NULL);
		cr_assert_eq(status, 0, "trainers: exit %d; rank %d stderr: %s", status, k, e ? e : "");
		free(e);
		snprintf(p, sizeof(p), "%s/truth%d.json", dir, k);
		truth[k] = sp_t_truth_file(p);
	}
	char *tdir = malloc(strlen(dir) + strlen(sub) + 2);
	cr_assert_not_null(tdir);
	sprintf(tdir, "%s/%s", dir, sub);
	return tdir;
}

void sp_t_trainer_analyze(struct sp_t_result *tr, struct sp_t_result *ar, const char *tdir, char *const args[],
			  char *const more_env[], struct sp_json **truth, struct sp_json **an)
{
	sp_t_run_trainer_env(tr, tdir, args, more_env);
	*truth = sp_t_parse_last_line(tr->out);
	cr_assert_not_null(*truth, "no ground-truth JSON from the trainer: %s", tr->out);
	char *aargv[] = {(char *)sp_t_build("bin/stepprof"), "analyze", "--json", (char *)tdir, NULL};
	sp_t_run(ar, aargv, NULL, NULL, 120);
	cr_assert_eq(ar->status, 0, "stepprof analyze: exit %d: %s", ar->status, ar->err);
	*an = sp_json_parse(ar->out);
	cr_assert_not_null(*an, "stepprof analyze --json is not JSON: %s", ar->out);
}

void sp_t_trainer_run_free(struct sp_json *truth, struct sp_json *an, struct sp_t_result *tr, struct sp_t_result *ar)
{
	sp_json_free(truth);
	sp_json_free(an);
	sp_t_result_free(tr);
	sp_t_result_free(ar);
}

void sp_t_dump_dir(const char *dir, struct sp_json ***rec, size_t *nrec)
{
	DIR *d = opendir(dir);
	cr_assert(d, "no trace directory %s", dir);
	struct dirent *de;
	while ((de = readdir(d))) {
		if (!strstr(de->d_name, ".sptrace"))
			continue;
		char path[1024];
		snprintf(path, sizeof(path), "%s/%s", dir, de->d_name);
		char *argv[] = {(char *)sp_t_build("bin/stepprof"), "dump", "--json", path, NULL};
		struct sp_t_result r;
		int st = sp_t_run(&r, argv, NULL, NULL, 60);
		cr_assert_eq(st, 0, "stepprof dump %s: %s", path, r.err);
		struct sp_json **lines = NULL;
		size_t n = sp_json_parse_lines(r.out, &lines);
		*rec = realloc(*rec, (*nrec + n) * sizeof(**rec));
		memcpy(*rec + *nrec, lines, n * sizeof(*lines));
		*nrec += n;
		free(lines);
		sp_t_result_free(&r);
	}
	closedir(d);
}
