/*
 * test_install.c - stepprof installed like a tool: the man pages and shell
 * completions that the build generates from the command's --help texts
 * (scripts/cli-gen.sh), and `make install` / `make uninstall` (suite `install`).
 *
 * The verbs and options expected are read from the built command's own --help,
 * the truth the generated files must follow: every verb of `stepprof --help` has
 * a page that man renders without a warning, naming each option of the verb's
 * usage line (and stepprof(1) each variable of preload/config.def); bash completes each verb and each option; an installed tree runs
 * (its `stepprof run` preloads the installed library and records a trace) and
 * `make uninstall` leaves no file behind.
 *
 * Divided into: 1. helpers (the verbs and options of the help texts), 2. man
 * pages, 3. completions, 4. make install / uninstall.
 */
#include <criterion/criterion.h>
#include <ftw.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "testlib.h"

/* ----------------------------------------------------------- 1. helpers */

#define MAX_WORDS 64

/* A program's stdout (malloc'd), run with env, asserting exit 0. */
static char *output_of(char *const argv[], char *const env[])
{
	struct sp_t_result r;
	int st = sp_t_run(&r, argv, env, NULL, 120);
	cr_assert_eq(st, 0, "%s %s: exit %d: %s", argv[0], argv[1] ? argv[1] : "", st, r.err);
	char *out = r.out;
	r.out = NULL;
	sp_t_result_free(&r);
	return out;
}

static char *help_of(const char *verb)
{
	char *bin = (char *)sp_t_build("bin/stepprof");
	char *argv[] = {bin, verb ? (char *)verb : "--help", verb ? "--help" : NULL, NULL};
	char *env[] = {"LD_PRELOAD=", NULL};
	char *out = output_of(argv, env);
	free(bin);
	return out;
}

/* The verbs of `stepprof --help` (its "verbs:" block); their count. */
static size_t verbs_of_help(char *verbs[MAX_WORDS])
{
	char *help = help_of(NULL), *p = strstr(help, "\nverbs:\n");
	cr_assert_not_null(p, "no verbs: block in stepprof --help:\n%s", help);
	size_t n = 0;
	for (p += strlen("\nverbs:\n"); *p == ' ' && n < MAX_WORDS; p = strchr(p, '\n') + 1) {
		p += strspn(p, " ");
		verbs[n++] = strndup(p, strcspn(p, " \n"));
	}
	free(help);
	cr_assert_gt(n, 5, "too few verbs in stepprof --help");
	return n;
}

/*
 * The options of a verb's usage line (its first line and the continuation lines
 * under it): each word starting with '-' after a space, '[' or '|', up to a
 * character that is not a letter, digit or '-' ("--watch[=OPTIONS]" is --watch).
 */
static size_t options_of_usage(const char *verb, char *opts[MAX_WORDS])
{
	char *help = help_of(verb);
	char *end = strchr(help, '\n');
	while (end && !strncmp(end + 1, "          ", 10))
		end = strchr(end + 1, '\n');
	size_t n = 0;
	for (char *p = help; end && p < end && n < MAX_WORDS; p++) {
		if (*p != '-' || (p[-1] != ' ' && p[-1] != '[' && p[-1] != '|'))
			continue;
		size_t len = strspn(p, "-abcdefghijklmnopqrstuvwxyz0123456789");
		if (len > 1 && strspn(p, "-") < len)
			opts[n++] = strndup(p, len);
		p += len;
	}
	free(help);
	cr_assert_gt(n, 0, "no option in the usage line of stepprof %s", verb);
	return n;
}

static void free_words(char *w[], size_t n)
{
	for (size_t i = 0; i < n; i++)
		free(w[i]);
}

/* Whether the word stands alone in text (between spaces, brackets, newlines). */
static int has_word(const char *text, const char *w)
{
	size_t len = strlen(w);
	for (const char *p = text; (p = strstr(p, w)); p++) {
		char before = p == text ? ' ' : p[-1], after = p[len];
		if (strchr(" \n[|,", before) && (!after || strchr(" \n]|=[,", after)))
			return 1;
	}
	return 0;
}

/* Every option of the verb's usage line is a word of text (`where` names it in a failure). */
static void expect_every_option(const char *verb, const char *text, const char *where)
{
	char *opts[MAX_WORDS];
	size_t n = options_of_usage(verb, opts);
	for (size_t k = 0; k < n; k++)
		cr_expect(has_word(text, opts[k]), "%s: no %s in:\n%s", where, opts[k], text);
	free_words(opts, n);
}

/* Whether a program is on PATH. */
static int have(const char *prog)
{
	char cmd[128];
	snprintf(cmd, sizeof(cmd), "command -v %s >/dev/null 2>&1", prog);
	char *argv[] = {"/bin/sh", "-c", cmd, NULL};
	struct sp_t_result r;
	int st = sp_t_run(&r, argv, NULL, NULL, 30);
	sp_t_result_free(&r);
	return st == 0;
}

/* ------------------------------------------------------- 2. man pages */

/* `man -l PAGE` at 80 columns: rendered, no warning, what it says (malloc'd). */
static char *man_render(const char *page)
{
	char *argv[] = {"man", "--warnings", "-l", (char *)page, NULL};
	char *env[] = {"MANWIDTH=80", "LC_ALL=C.UTF-8", "MANPAGER=cat", "PAGER=cat", "MAN_KEEP_FORMATTING=", NULL};
	struct sp_t_result r;
	int st = sp_t_run(&r, argv, env, NULL, 60);
	cr_assert_eq(st, 0, "man -l %s: exit %d: %s", page, st, r.err);
	cr_assert_eq(r.errlen, 0, "man -l %s warns: %s", page, r.err);
	char *out = r.out;
	r.out = NULL;
	sp_t_result_free(&r);
	return out;
}

Test(install, a_man_page_per_verb_that_man_renders_with_every_option)
{
	if (!have("man"))
		cr_skip_test("no man command here (Debian: man-db); the pages are built, not rendered");
	char *verbs[MAX_WORDS];
	size_t nv = verbs_of_help(verbs);
	const char *top = sp_t_build("share/man/man1/stepprof.1");
	char *text = man_render(top);
	cr_expect(strstr(text, "NAME") && strstr(text, "SYNOPSIS") && strstr(text, "EXIT STATUS"), "%s", text);
	for (size_t i = 0; i < nv; i++) {
		char ref[64];
		snprintf(ref, sizeof(ref), "stepprof-%s(1)", verbs[i]);
		cr_expect(strstr(text, ref), "stepprof(1) does not name %s:\n%s", ref, text);
	}
	/* every variable of preload/config.def in its ENVIRONMENT section */
	char *def = sp_t_read_file("preload/config.def", NULL), *env = strstr(text, "\nENVIRONMENT\n");
	cr_assert(def && env, "no preload/config.def, or no ENVIRONMENT in stepprof(1):\n%s", text);
	int nvars = 0;
	for (char *p = def; (p = strstr(p, "\nSP_CONFIG(")); nvars++) {
		p += strlen("\nSP_CONFIG(");
		char var[96];
		snprintf(var, sizeof(var), "STEPPROF_%.*s", (int)strcspn(p, ","), p);
		cr_expect(has_word(env, var), "stepprof(1) lacks %s", var);
	}
	cr_expect_gt(nvars, 5, "too few SP_CONFIG lines in preload/config.def");
	free(def);
	free(text);
	free((char *)top);
	for (size_t i = 0; i < nv; i++) {
		char rel[128], name[96];
		snprintf(rel, sizeof(rel), "share/man/man1/stepprof-%s.1", verbs[i]);
		snprintf(name, sizeof(name), "NAME\n       stepprof-%s ", verbs[i]);
		const char *page = sp_t_build(rel);
		text = man_render(page);
		cr_expect(strstr(text, name), "%s: no NAME line '%s':\n%s", page, name, text);
		expect_every_option(verbs[i], text, page);
		free(text);
		free((char *)page);
	}
	free_words(verbs, nv);
}

/* ----------------------------------------------------- 3. completions */

/*
 * What a completion script offers for a command line (the word under the cursor
 * is the last one, "" after a trailing space), one per line: `shell -c program
 * SCRIPT LINE`, where program loads the script the way the shell's completion
 * system would and prints what it offered.
 */
static char *complete_in(const char *shell, const char *script_rel, const char *program, const char *line)
{
	char *script = (char *)sp_t_build(script_rel);
	char *argv[] = {(char *)shell, "-f", "-c", (char *)program, script, (char *)line, NULL};
	char *out = output_of(argv, NULL);
	free(script);
	return out;
}

/* bash: the function `complete -p stepprof` names, called as bash calls it; COMPREPLY. */
static char *bash_complete(const char *line)
{
	return complete_in("bash", "share/bash-completion/completions/stepprof",
			   "source \"$0\" || exit 9; f=$(complete -p stepprof) || exit 8; f=${f#*-F }; f=${f%% *};"
			   "read -ra COMP_WORDS <<<\"$1\"; [[ $1 == *' ' ]] && COMP_WORDS+=('');"
			   "COMP_CWORD=$((${#COMP_WORDS[@]} - 1)); COMP_LINE=$1; COMP_POINT=${#1};"
			   "\"$f\" stepprof \"${COMP_WORDS[COMP_CWORD]}\" \"${COMP_WORDS[COMP_CWORD - 1]}\" || exit 7;"
			   "printf '%s\\n' \"${COMPREPLY[@]}\"",
			   line);
}

/*
 * zsh: its completion builtins and helpers replaced by functions that print what
 * they are given (compadd its words, _describe the names of its list, _files and
 * _normal their arguments), words/CURRENT/PREFIX set as the completion system sets them.
 */
static char *zsh_complete(const char *line)
{
	return complete_in(
	    "zsh", "share/zsh/site-functions/_stepprof",
	    "compadd() { if [[ $1 == -a ]]; then print -l -- ${(P)2}; else print -l -- ${@[${@[(i)--]}+1,-1]}; fi };"
	    "_describe() { print -l -- ${${(P)${@[-1]}}%%:*} };"
	    "_files() { print -- _files $@ }; _message() { print -- _message };"
	    "_command_names() { print -- _command_names }; _normal() { print -- _normal $words };"
	    "words=(${=1}); [[ $1 == *' ' ]] && words+=(''); CURRENT=${#words}; PREFIX=$words[CURRENT];"
	    "source $0",
	    line);
}

/* What complete offers for line is exactly `expected`. */
static void expect_completion(char *(*complete)(const char *), const char *line, const char *expected)
{
	char *out = complete(line);
	cr_expect_str_eq(out, expected, "'%s<TAB>'", line);
	free(out);
}

/* `stepprof <TAB>` offers every verb, `stepprof VERB -<TAB>` every option of the verb. */
static void expect_verbs_and_options(char *(*complete)(const char *))
{
	char *verbs[MAX_WORDS];
	size_t nv = verbs_of_help(verbs);
	char *out = complete("stepprof ");
	for (size_t i = 0; i < nv; i++)
		cr_expect(has_word(out, verbs[i]), "stepprof <TAB> lacks %s: %s", verbs[i], out);
	free(out);
	for (size_t i = 0; i < nv; i++) {
		char line[128];
		snprintf(line, sizeof(line), "stepprof %s -", verbs[i]);
		out = complete(line);
		expect_every_option(verbs[i], out, line);
		free(out);
	}
	free_words(verbs, nv);
}

Test(install, bash_completes_verbs_and_each_verbs_options)
{
	if (!have("bash"))
		cr_skip_test("no bash here");
	expect_completion(bash_complete, "stepprof an", "analyze\n");
	expect_completion(bash_complete, "stepprof watch --in", "--interval\n");
	expect_completion(bash_complete, "stepprof help ex", "export\n");
	expect_verbs_and_options(bash_complete);
}

Test(install, zsh_completes_verbs_and_each_verbs_options)
{
	if (!have("zsh"))
		cr_skip_test("no zsh here; its completion is generated from the same help texts as bash's");
	char *script = (char *)sp_t_build("share/zsh/site-functions/_stepprof");
	char *argv[] = {"zsh", "-n", script, NULL};
	free(output_of(argv, NULL));
	char *text = sp_t_read_file(script, NULL);
	cr_assert_not_null(text);
	cr_expect_eq(strncmp(text, "#compdef stepprof\n", 18), 0);
	free(text);
	free(script);
	expect_verbs_and_options(zsh_complete);
	expect_completion(zsh_complete, "stepprof run -o ", "_files -/\n");
	expect_completion(zsh_complete, "stepprof run --no-bpf -- ls -l", "_normal ls -l\n");
}

/* -------------------------------------------- 4. make install / uninstall */

/* `make TARGET VAR=...` from the repository root, for this build directory. What
 * is installed is what this build directory holds: `-o build-all` keeps make from
 * rebuilding it with its default compiler and flags (a sanitizer build tree would
 * be half rebuilt without the sanitizer, and the tests after this one broken). */
static void make(const char *target, const char *var1, const char *var2)
{
	char build[PATH_MAX + 8];
	const char *b = getenv("STEPPROF_BUILD");
	snprintf(build, sizeof(build), "BUILD=%s", b && *b ? b : "build");
	char *argv[] = {"make",	     "-s",  "--no-print-directory", "-o", "build-all", (char *)target, build,
			(char *)var1, (char *)var2, NULL};
	/* not the jobserver of a make this test may run under */
	char *env[] = {"MAKEFLAGS=", "MAKELEVEL=", "MFLAGS=", "LD_PRELOAD=", NULL};
	free(output_of(argv, env));
}

static char leftover[PATH_MAX];

static int note_file(const char *path, const struct stat *st, int type, struct FTW *ftw)
{
	if (type != FTW_D && type != FTW_DP) {
		snprintf(leftover, sizeof(leftover), "%s", path);
		return 1;
	}
	return 0;
}

/* The first thing under root that is not a directory ("" when none). */
static const char *first_file_under(const char *root)
{
	leftover[0] = 0;
	nftw(root, note_file, 16, FTW_PHYS);
	return leftover;
}

/* malloc'd here, not by asprintf: a leak report of a failed test then has this
 * test's frames (libc's vasprintf has no frame pointer to walk), which the
 * sanitizer run's suppression of the test binary's own strings matches. */
static char *path_in(const char *dir, const char *rel)
{
	size_t n = strlen(dir) + strlen(rel) + 2;
	char *p = malloc(n);
	cr_assert_not_null(p);
	snprintf(p, n, "%s/%s", dir, rel);
	return p;
}

static off_t size_of(const char *path)
{
	struct stat st;
	cr_assert_eq(stat(path, &st), 0, "%s is missing", path);
	return st.st_size;
}

Test(install, install_runs_from_its_prefix_and_uninstall_leaves_no_file, .timeout = 300)
{
	char *tmp = sp_t_tmpdir("install");
	char *prefix = path_in(tmp, "prefix"), *trace = path_in(tmp, "trace");
	char var[PATH_MAX + 16];
	snprintf(var, sizeof(var), "PREFIX=%s", prefix);
	make("install", var, NULL);

	/* the library stripped, its debug info beside it by build id */
	char *lib = path_in(prefix, "lib/libstepprof.so"), *built = (char *)sp_t_build("lib/libstepprof.so");
	sp_t_note("libstepprof.so: %lld bytes built, %lld installed (stripped)", (long long)size_of(built),
		  (long long)size_of(lib));
	cr_expect_lt(size_of(lib), size_of(built) / 2, "the installed library is not stripped");
	char *debug = path_in(prefix, "lib/debug/.build-id");
	cr_expect_eq(access(debug, R_OK), 0, "no debug info under %s", debug);
	const char *installed[] = {"bin/stepprof",
				   "share/man/man1/stepprof.1",
				   "share/man/man1/stepprof-analyze.1",
				   "share/bash-completion/completions/stepprof",
				   "share/zsh/site-functions/_stepprof",
				   "share/doc/stepprof/README.md",
				   "share/doc/stepprof/docs/cli.md",
				   "include/stepprof/stepprof.h"};
	for (size_t i = 0; i < sizeof(installed) / sizeof(installed[0]); i++) {
		char *p = path_in(prefix, installed[i]);
		cr_expect_eq(access(p, R_OK), 0, "make install left out %s", p);
		free(p);
	}

	/* the installed command runs, and its `run` preloads the installed library */
	char *bin = path_in(prefix, "bin/stepprof");
	char *env[] = {"LD_PRELOAD=", "STEPPROF_LIB=", "STEPPROF_DIR=", "STEPPROF_QUIET=1", NULL};
	char *version[] = {bin, "--version", NULL};
	char *out = output_of(version, env);
	cr_expect_eq(strncmp(out, "stepprof ", 9), 0, "%s", out);
	free(out);
	char *printenv[] = {bin, "run", "--no-bpf", "-o", trace, "--", "printenv", "LD_PRELOAD", NULL};
	out = output_of(printenv, env);
	char *real_lib = realpath(lib, NULL);
	cr_assert_not_null(real_lib);
	cr_expect_eq(strncmp(out, real_lib, strlen(real_lib)), 0, "the job's LD_PRELOAD is %s, not %s", out,
		     real_lib);
	free(out);
	sp_t_rmrf(trace);
	char *markgen = (char *)sp_t_build("tests/bin/markgen");
	char *run[] = {bin, "run", "--no-bpf", "-o", trace, "--", markgen, "-n", "50", NULL};
	free(output_of(run, env));
	char *info[] = {bin, "info", "--json", trace, NULL};
	out = output_of(info, env);
	struct sp_json *j = sp_json_parse(out);
	cr_assert_not_null(j, "%s", out);
	cr_expect_eq(sp_json_get(j, "files") ? sp_json_get(j, "files")->n : 0, 1, "%s", out);
	sp_json_free(j);
	free(out);
	if (have("man")) {
		char *page = path_in(prefix, "share/man/man1/stepprof-run.1");
		char *text = man_render(page);
		cr_expect(strstr(text, "/share/doc/stepprof"), "stepprof-run(1) names no installed docs:\n%s", text);
		free(text);
		free(page);
	}

	make("uninstall", var, NULL);
	const char *left = first_file_under(prefix);
	cr_expect_str_empty(left, "make uninstall left %s", left);

	/* DESTDIR: staged under it, removed from it */
	char *stage = path_in(tmp, "stage"), dest[PATH_MAX + 16];
	snprintf(dest, sizeof(dest), "DESTDIR=%s", stage);
	make("install", dest, "PREFIX=/usr");
	char *staged = path_in(stage, "usr/bin/stepprof");
	cr_expect_eq(access(staged, X_OK), 0, "DESTDIR: no %s", staged);
	make("uninstall", dest, "PREFIX=/usr");
	left = first_file_under(stage);
	cr_expect_str_empty(left, "make uninstall DESTDIR= left %s", left);

	free(staged);
	free(stage);
	free(markgen);
	free(real_lib);
	free(bin);
	free(debug);
	free(built);
	free(lib);
	sp_t_rmrf(tmp);
	free(trace);
	free(prefix);
	free(tmp);
}
