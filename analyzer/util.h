/*
 * util.h - small helpers shared by the `stepprof` verbs: exit codes, the one
 * error-line format, finding the trace files of a directory, and human-readable
 * numbers.
 *
 * Errors: every verb reports a problem as one line on stderr,
 *   stepprof: <file>: <what is wrong>
 * and exits with the worst of the codes below (docs/cli.md lists them).
 */
#ifndef STEPPROF_UTIL_H
#define STEPPROF_UTIL_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "reader.h"

#define SP_EXIT_OK	 0
#define SP_EXIT_USAGE	 1 /* bad command line */
#define SP_EXIT_INPUT	 2 /* a file could not be read at all (missing, not a trace, newer format) */
#define SP_EXIT_DAMAGED	 3 /* read, but truncated or corrupt: the output covers what was whole */
#define SP_EXIT_INTERNAL 4 /* out of memory, output not written */

/* "stepprof: <what>: <message>\n" on stderr (what may be NULL: "stepprof: <message>"). */
void util_err(const char *what, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/*
 * The two command-line errors of the verbs that take trace operands, in one wording:
 * "stepprof: <verb>: <arg>: unknown option or missing value (stepprof <verb> --help)" and
 * "stepprof: <verb>: no trace directory given (stepprof <verb> --help)". Both return
 * SP_EXIT_USAGE.
 */
int util_bad_option(const char *verb, const char *arg);
int util_no_operand(const char *verb);

/* A flag of a verb whose options are all flags (info, dump, compact). */
struct util_flag {
	const char *name; /* the long option, without "--" */
	char letter;	  /* its short form, 0 for none */
	int *set;	  /* set to 1 when given */
};

/*
 * Parse the options of such a verb, anywhere among its operands, and -h/--help:
 * -1 when the verb goes on with its operands from optind; else the exit code
 * to return (its usage printed for --help, util_bad_option's line for anything
 * else).
 */
int util_parse_flags(int argc, char **argv, const char *verb, const struct util_flag *flags, size_t n,
		     void (*usage)(FILE *));

/*
 * Standard output could not be written (a full disk, `stepprof ... | head` with SIGPIPE
 * ignored): "stepprof: cannot write the output" once per process, however many layers
 * notice it. Returns SP_EXIT_INTERNAL.
 */
int util_stdout_failed(void);

/* The worse (larger) of two exit codes. */
static inline int util_worse(int a, int b)
{
	return a > b ? a : b;
}

/*
 * After a full pass of the reader: print the damage line of a truncated or corrupt
 * file ("stepprof: <path>: truncated: ...; read what is whole") and return
 * SP_EXIT_DAMAGED, or return 0 for a whole file.
 */
int util_report_damage(const char *path, const struct sp_reader_stats *st);

/* Nonzero when path is a regular file starting with the trace magic "STEPPROF". */
int util_is_trace_file(const char *path);

/*
 * Expand command-line operands into trace file paths: a FILE is taken as given
 * (the reader says later if it is not a trace), a DIR gives every trace file
 * directly inside it, sorted by name, whatever the file names' extension, plus
 * every *.sptrace file even with a damaged magic (the reader reports it). Errors
 * (missing operand, directory without traces) are printed with util_err; *rc gets
 * the worst exit code. A file named twice (by two operands, or a DIR and a FILE in
 * it) is listed once, where it was first named. Returns the malloc'd array (NULL-terminated, free with
 * util_free_paths) and its length in *n.
 */
char **util_trace_paths(char *const *args, int nargs, size_t *n, int *rc);
void util_free_paths(char **paths);

/*
 * util_trace_paths for a verb that needs every operand readable and at least one
 * trace: the paths, or NULL (nothing to free) once the problem is printed, with *rc
 * the exit code to return ("<verb>: no trace files" when no operand named one).
 */
char **util_verb_trace_paths(const char *verb, char *const *args, int nargs, size_t *n, int *rc);
/* Trace files directly in dir (by their magic, or by the recorder's *.sptrace name). */
unsigned util_traces_in(const char *dir);
/*
 * The subdirectories of dir that hold trace files (named prefix*, when prefix is
 * not NULL): their number; the newest (by modification time) into newest when
 * not NULL; one line each on list when not NULL ("  path  (N files, modified ...)").
 */
unsigned util_trace_dirs(const char *dir, const char *prefix, char *newest, size_t len, FILE *list);

/*
 * The run id in path's header (trace.h, SP_RUN_ID_SIZE) into out: "" for a file
 * written before format 1.4 (no run id). 0, or -1 when path is not a readable
 * trace file of this major version (the reader says why later).
 */
int util_run_id(const char *path, char *out);
/* The same from a header already read: out (SP_RUN_ID_SIZE bytes), "" when it has none. */
const char *util_header_run_id(const struct sp_file_header *h, char *out);
/*
 * The header's CPU affinity (format 1.5) as a list of CPU numbers and ranges,
 * "0-3,8,10-11", into out (cut short with "..." when it does not fit); "" when
 * the header has none (a file of format 1.4 or older, or an unknown affinity).
 */
const char *util_header_cpu_list(const struct sp_file_header *h, char *out, size_t len);

/*
 * Files of one run only: the files of analyze, export and watch are merged as one
 * job's processes, and files of another job in the same directory (an earlier run
 * into the same -o DIR) or named beside it would be merged into it. Files without
 * a run id (before format 1.4, or damaged) go with any run, as before run ids:
 * nothing tells them apart. With more than one
 * run and without merge_runs: one line naming each run's id and its directory (or
 * file), "stepprof: <verb>: ... (--merge-runs merges them)", and SP_EXIT_USAGE;
 * else 0. Unreadable files are left to the reader.
 */
int util_check_runs(const char *verb, char *const *paths, size_t n, int merge_runs);

/*
 * `stepprof run -o PATTERN`: PATTERN with %p the pid given, %h the host name
 * given, %q{VAR} the value of the environment variable VAR and %% a '%', into
 * out. 0, or -1 with the reason in err (an unset VAR, an unknown or unfinished
 * %, a result longer than n - 1 bytes).
 */
int util_expand_output(const char *pat, long pid, const char *host, char *out, size_t n, char *err,
		       size_t errlen);

/*
 * sp_reader_open, printing the reader's reason as "stepprof: <path>: <reason>":
 * 0 with *r open, or SP_EXIT_INPUT. A file that never got its header (empty or
 * zeros: its process died while creating it, or is still starting) holds no record:
 * "stepprof: <path>: truncated: no header (...): no records" and SP_EXIT_DAMAGED,
 * the caller leaving it out (docs/trace-format.md §8), the same in every verb.
 */
int util_reader_open(const char *path, struct sp_reader **r);

/*
 * An output file written whole or not at all: util_out_open creates a temporary
 * DEST.tmp.PID beside it (a device or a FIFO, -o /dev/null, is written in place);
 * util_out_close closes it and, with keep, renames it over DEST, else removes it, so
 * a failed write never leaves half a document under the real name nor destroys the
 * one there. Both print their error as "<dest>: <what>: <reason>" and return -1
 * (util_out_close without keep only returns it: the caller has said why it drops it).
 */
struct util_out {
	FILE *f;
	char *dest, *tmp;
	const char *what; /* "cannot write", "cannot write the HTML report" */
	int direct;
};
int util_out_open(struct util_out *o, const char *dest, const char *what);
int util_out_close(struct util_out *o, int keep);

/* "12.3 ms", "4.56 s", "870 ns"... into buf. */
const char *util_fmt_ns(uint64_t ns, char *buf, size_t len);
/* "1.5 GiB", "312 KiB", "17 B" into buf. */
const char *util_fmt_bytes(uint64_t bytes, char *buf, size_t len);

/*
 * Untrusted text (a trace's host, command line, names; a file name) for a terminal or
 * a text report: printable UTF-8 as it is; C0 and C1 control characters, DEL and
 * bytes that are not UTF-8 as \xNN, so that nothing from a trace can move the
 * cursor, retitle the window or break the line; a backslash as \\, so that text
 * that spells \xNN is told from an escaped byte. quoted: also \" (the caller
 * writes the quotes around it).
 */
void util_put_text(FILE *f, const char *s, int quoted);

/*
 * The character at p (n bytes left, n >= 1) as util_put_text shows it when it is one
 * to hide (a control character or a byte that is not UTF-8): writes \xNN for each of
 * its bytes and returns how many; 0 (nothing written) for a printable character.
 */
size_t util_put_unsafe(FILE *f, const unsigned char *p, size_t n);

/* Length of the valid UTF-8 sequence at p (n bytes left, n >= 1): 1..4, 0 when invalid. */
size_t util_utf8_len(const unsigned char *p, size_t n);

#endif /* STEPPROF_UTIL_H */
