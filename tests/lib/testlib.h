/*
 * testlib.h - helpers shared by the Criterion tests (unit and end-to-end).
 *
 *   sp_t_build(path)      "build/<path>" ($STEPPROF_BUILD, default "build")
 *   sp_t_tmpdir(tag)      a fresh empty directory under /tmp, removed by sp_t_rmrf
 *   sp_t_run(...)         run a command (argv) with extra environment entries,
 *                         capture stdout/stderr, wait, return exit status
 *   sp_json_parse(text)   a small JSON DOM (objects, arrays, strings, numbers,
 *                         true/false/null) with path lookups
 *
 * The e2e tests run the real programs: build/lib/libstepprof.so under LD_PRELOAD,
 * build/bin/stepprof on what they wrote, and assert on its JSON.
 */
#ifndef STEPPROF_TESTLIB_H
#define STEPPROF_TESTLIB_H

#include <stddef.h>
#include <stdint.h>

/* ---- paths and processes ---- */
const char *sp_t_build(const char *rel); /* static buffer per call site is NOT used: returns a malloc'd string */
const char *sp_t_cuda(const char *rel);  /* malloc'd $CUDA_HOME/rel (default /usr/local/cuda), as the Makefile's */
char *sp_t_tmpdir(const char *tag);	 /* malloc'd path of a new empty directory */
void sp_t_rmrf(const char *path);

struct sp_t_result {
	int status; /* exit code, or 128+signal when killed */
	char *out;  /* captured stdout, NUL-terminated (malloc'd) */
	size_t outlen;
	char *err; /* captured stderr */
	size_t errlen;
	double *err_line_s; /* CLOCK_MONOTONIC seconds at which the test read each line of err (its newline) */
	size_t err_lines;
	long maxrss_kb; /* peak resident memory of the command (getrusage of the child) */
	/*
	 * The "stepprof: trace in DIR ..." lines (where the trace went: the job's first
	 * process, or `stepprof run`), taken out of err and err_line_s; "" when none.
	 */
	char *where;
};

/*
 * Run argv[0] (PATH lookup) with the current environment plus env[] entries
 * ("NAME=value", NULL-terminated, may be NULL; "NAME=" with empty value unsets
 * NAME), optional stdin text, a timeout in seconds (killed after it: status 137).
 */
int sp_t_run(struct sp_t_result *res, char *const argv[], char *const env[], const char *stdin_text, int timeout_s);
/* Whether env[] (NULL-terminated, may be NULL) sets or unsets the variable name. */
int sp_t_env_has(const char *const env[], const char *name);
void sp_t_result_free(struct sp_t_result *res);

/*
 * A line on stderr for the reader of the test log ("note: ..."). Criterion 2.4
 * turns any cr_log_warn into a failing exit status even when every test passes:
 * tests say what they could not check with this, and why they skip in the
 * cr_skip_test message itself.
 */
void sp_t_note(const char *fmt, ...) __attribute__((format(printf, 1, 2)));


/*
 * The <text> labels of an SVG, [svg, end) of the document: how many pairs of
 * them on one line (y within 8 px) have boxes that overlap. A label's box: its x
 * and text-anchor, char_px per character of its text. *nlabels: how many labels.
 * In *zero_ns: whether a label reads "0 ns".
 */
size_t sp_t_svg_label_overlaps(const char *svg, const char *end, double char_px, size_t *nlabels, int *zero_ns);

/* Whole file into a malloc'd NUL-terminated buffer (NULL when unreadable); write one (0 or -1). */
char *sp_t_read_file(const char *path, size_t *len);
int sp_t_write_file(const char *path, const void *data, size_t len);

/* ---- JSON ---- */
enum sp_json_type { SPJ_NULL, SPJ_BOOL, SPJ_NUM, SPJ_STR, SPJ_ARR, SPJ_OBJ };

struct sp_json {
	enum sp_json_type type;
	double num; /* SPJ_NUM, SPJ_BOOL (0/1) */
	char *str;  /* SPJ_STR: the string; SPJ_NUM: the number's literal text (exact 64-bit values) */
	char *key;  /* member name when inside an object */
	size_t n;   /* SPJ_ARR/SPJ_OBJ: number of children */
	struct sp_json *kids;
};

struct sp_json *sp_json_parse(const char *text); /* NULL on a syntax error */
void sp_json_free(struct sp_json *j);
/* Member of an object by key, element of an array by index; NULL when absent. */
struct sp_json *sp_json_get(const struct sp_json *j, const char *key);
struct sp_json *sp_json_at(const struct sp_json *j, size_t i);
/* Path lookup: "summary.breakdown_fraction.input", "iterations.3.wall_ns". */
struct sp_json *sp_json_path(const struct sp_json *j, const char *path);
double sp_json_num(const struct sp_json *j, const char *path, double dflt);
const char *sp_json_str(const struct sp_json *j, const char *path); /* NULL when absent or not a string */
/* Integers exactly (a double loses bits above 2^53: timestamps, 8-byte values). */
uint64_t sp_json_u64(const struct sp_json *j, const char *path, uint64_t dflt);
int64_t sp_json_i64(const struct sp_json *j, const char *path, int64_t dflt);

/* Parse every line of text as JSON (dump --json output); returns count, *out malloc'd array. */
/* A line that is not valid JSON gives a NULL entry. */
size_t sp_json_parse_lines(const char *text, struct sp_json ***out);
void sp_json_free_lines(struct sp_json **arr, size_t n);

#endif /* STEPPROF_TESTLIB_H */
