/*
 * cmd_export.c - `stepprof export [--perfetto] [-o FILE] DIR|FILE...`: the trace
 * files as one Chrome Trace Event Format JSON document that ui.perfetto.dev and
 * chrome://tracing open (export_perfetto.c builds it; docs/export.md for users).
 *
 * Divided into: usage, the output file (default DIR/trace.perfetto.json, written
 * to a temporary name and renamed, so a failed export never leaves half a
 * document under the real name), and the verb.
 */
#include "commands.h"

#include <errno.h>
#include <getopt.h>
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdio_ext.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zlib.h>

#include "export_perfetto.h"
#include "report.h"
#include "util.h"

#define EXPORT_DEFAULT_NAME "trace.perfetto.json"
/* Without -o, trace files larger than this in all are exported compressed (.json.gz). */
#define EXPORT_GZ_DEFAULT_BYTES (64ull << 20)

static void export_usage(FILE *f)
{
	fprintf(f, "usage: stepprof export [--perfetto] [-o FILE] [--from S] [--to S] [--pretty] [--merge-runs] DIR|FILE...\n\n"
		   "Write every trace file of the directories as one Chrome Trace Event Format JSON\n"
		   "document: open it at https://ui.perfetto.dev (Open trace file) or chrome://tracing.\n"
		   "One process per traced pid, one track per thread with every call as a slice,\n"
		   "marks and steps as instants, NVTX ranges, a \"GPU <device>\" track with the\n"
		   "GPU-side span of each kernel and copy (an arrow from its call), a counter\n"
		   "of live device memory, and an \"iterations\" track in the trainer's process:\n"
		   "one slice per iteration that `stepprof analyze` finds, its breakdown in the\n"
		   "args, and the findings as instants.\n\n"
		   "  --perfetto      the format (the default and only one)\n"
		   "  -o FILE         where to write it; '-' is stdout; a name ending in .gz is\n"
		   "                  written gzip-compressed (Perfetto opens it as it is)\n"
		   "                  default: DIR/" EXPORT_DEFAULT_NAME " for a DIR operand,\n"
		   "                  FILE.perfetto.json for a FILE operand (the first one that exists decides),\n"
		   "                  with .gz added when the trace files hold more than 64 MiB\n"
		   "  --from S, --to S  only what overlaps this window: seconds on the document's\n"
		   "                  timeline (0 = the earliest file's start; decimals allowed)\n"
		   "  --pretty        indent the JSON (larger; for reading by eye)\n"
		   "  --merge-runs    merge files of different runs (run ids); refused by default\n"
		   "  -h, --help\n\n"
		   "Exit status: 0 ok, 1 usage (also: files of more than one run without --merge-runs), 2 unreadable input (missing directory, no trace files,\n"
		   "not a trace or another format version), 3 written but a file was truncated or corrupt,\n"
		   "4 internal (output could not be written).\n");
}

/* The default output path for the first operand (malloc'd); ".gz" added when gz. */
static char *default_output(const char *first, int gz)
{
	struct stat st;
	size_t len = strlen(first) + sizeof(EXPORT_DEFAULT_NAME) + 5;
	char *p = malloc(len);
	if (!p)
		return NULL;
	if (stat(first, &st) == 0 && S_ISDIR(st.st_mode)) {
		size_t n = strlen(first);
		snprintf(p, len, "%s%s" EXPORT_DEFAULT_NAME "%s", first, n && first[n - 1] == '/' ? "" : "/",
			 gz ? ".gz" : "");
	} else {
		snprintf(p, len, "%s.perfetto.json%s", first, gz ? ".gz" : "");
	}
	return p;
}

/* The trace files' bytes in all: large ones are exported compressed by default. */
static unsigned long long bytes_of(char *const *paths, size_t n)
{
	unsigned long long sum = 0;
	struct stat st;
	for (size_t i = 0; i < n; i++)
		if (stat(paths[i], &st) == 0)
			sum += (unsigned long long)st.st_size;
	return sum;
}

static int ends_with_gz(const char *name)
{
	size_t n = strlen(name);
	return n > 3 && !strcmp(name + n - 3, ".gz");
}

/*
 * A gzip stream as a stdio FILE (fopencookie): the document is written through
 * stdio as when plain, deflated on its way to the output file's descriptor.
 */
static ssize_t gz_write(void *c, const char *buf, size_t len)
{
	size_t done = 0;
	while (done < len) { /* gzwrite takes an unsigned: chunks well under it */
		unsigned part = len - done > (1u << 30) ? 1u << 30 : (unsigned)(len - done);
		int w = gzwrite((gzFile)c, buf + done, part);
		if (w <= 0) {
			if (!errno)
				errno = EIO;
			return done ? (ssize_t)done : -1;
		}
		done += (size_t)w;
	}
	return (ssize_t)done;
}

static int gz_close(void *c)
{
	int rc = gzclose((gzFile)c);
	if (rc != Z_OK && !errno)
		errno = EIO;
	return rc == Z_OK ? 0 : EOF;
}

/* The gzip FILE over f's descriptor (duplicated: f is closed after it), NULL with errno. */
static FILE *gz_over(FILE *f)
{
	int fd = dup(fileno(f));
	if (fd < 0)
		return NULL;
	gzFile gz = gzdopen(fd, "wb6");
	if (!gz) {
		close(fd);
		errno = ENOMEM;
		return NULL;
	}
	cookie_io_functions_t io = {.read = NULL, .write = gz_write, .seek = NULL, .close = gz_close};
	FILE *g = fopencookie(gz, "w", io);
	if (!g) {
		gzclose(gz);
		return NULL;
	}
	return g;
}

/*
 * The document is written in many small pieces by one thread: a large buffer and no
 * stdio locking per call (a quarter of the time otherwise).
 */
static void fast_stream(FILE *f)
{
	setvbuf(f, NULL, _IOFBF, 1 << 20);
	__fsetlocking(f, FSETLOCKING_BYCALLER);
}

/*
 * "12.5" seconds into nanoseconds (negative allowed: before ts 0); 0 or -1. Decimal
 * only: strtod alone would also take " 12", "0x10" (16 s) and "infinity".
 */
static int parse_seconds(const char *s, int64_t *ns)
{
	char *end;
	if (!*s || s[strspn(s, "0123456789.eE+-")])
		return -1;
	errno = 0;
	double v = strtod(s, &end);
	if (errno || end == s || *end || !isfinite(v) || v > 9e9 || v < -9e9)
		return -1;
	*ns = (int64_t)llround(v * 1e9);
	return 0;
}

int command_export(int argc, char **argv)
{
	static const struct option longopts[] = {
	    {"perfetto", no_argument, NULL, 'p'},
	    {"output", required_argument, NULL, 'o'},
	    {"pretty", no_argument, NULL, 'P'},
	    {"from", required_argument, NULL, 'f'},
	    {"to", required_argument, NULL, 't'},
	    {"merge-runs", no_argument, NULL, 'M'},
	    {"help", no_argument, NULL, 'h'},
	    {NULL, 0, NULL, 0},
	};
	const char *output = NULL;
	struct export_opts opts = {.pretty = 0, .from_ns = INT64_MIN, .to_ns = INT64_MAX};
	int c, merge_runs = 0;
	optind = 1;
	opterr = 0;
	while ((c = getopt_long(argc, argv, "ho:", longopts, NULL)) != -1) {
		switch (c) {
		case 'p':
			break;
		case 'M':
			merge_runs = 1;
			break;
		case 'o':
			output = optarg;
			break;
		case 'P':
			opts.pretty = 1;
			break;
		case 'f':
		case 't':
			if (parse_seconds(optarg, c == 'f' ? &opts.from_ns : &opts.to_ns)) {
				util_err("export", "--%s %s: not a number of seconds", c == 'f' ? "from" : "to",
					 optarg);
				return SP_EXIT_USAGE;
			}
			break;
		case 'h':
			export_usage(stdout);
			return SP_EXIT_OK;
		default:
			return util_bad_option("export", argv[optind - 1]);
		}
	}
	if (optind >= argc)
		return util_no_operand("export");
	if (opts.from_ns > opts.to_ns) {
		util_err("export", "--from is after --to: an empty window");
		return SP_EXIT_USAGE;
	}
	if (output && !*output) {
		util_err("export", "-o: empty file name");
		return SP_EXIT_USAGE;
	}
	/*
	 * An operand that cannot be read (missing, a directory without traces) is one
	 * line and exit 2, and the others are exported all the same (docs/export.md), as
	 * `info` reports them; only when none is left is nothing written.
	 */
	size_t n = 0;
	int rc = SP_EXIT_OK;
	char **paths = util_trace_paths(argv + optind, argc - optind, &n, &rc);
	if (!n || rc == SP_EXIT_INTERNAL) {
		if (rc == SP_EXIT_OK) {
			util_err("export", "no trace files");
			rc = SP_EXIT_INPUT;
		}
		util_free_paths(paths);
		return rc;
	}
	int paths_rc = rc;
	if (util_check_runs("export", paths, n, merge_runs)) {
		util_free_paths(paths);
		return SP_EXIT_USAGE;
	}

	struct export_stats st;
	if (output && !strcmp(output, "-")) {
		fast_stream(stdout);
		rc = util_worse(paths_rc, export_perfetto(paths, n, stdout, &opts, &st));
		util_free_paths(paths);
		return rc;
	}

	/* the first operand that exists decides: not "MISSING.perfetto.json" */
	int first = optind;
	for (struct stat sb; first < argc - 1 && stat(argv[first], &sb) != 0;)
		first++;
	char *dest = output ? strdup(output) : default_output(argv[first], bytes_of(paths, n) > EXPORT_GZ_DEFAULT_BYTES);
	if (dest && report_output_is_input("export", "-o", dest, paths, n)) {
		free(dest);
		util_free_paths(paths);
		return SP_EXIT_USAGE;
	}
	struct util_out uo;
	if (!dest || util_out_open(&uo, dest, "cannot write")) {
		if (!dest)
			util_err("export", "out of memory");
		free(dest);
		util_free_paths(paths);
		return SP_EXIT_INTERNAL;
	}
	FILE *out = uo.f, *gz = NULL;
	if (ends_with_gz(dest)) {
		gz = out = gz_over(uo.f);
		if (!gz) {
			util_err(dest, "cannot write: %s", strerror(errno));
			util_out_close(&uo, 0);
			free(dest);
			util_free_paths(paths);
			return SP_EXIT_INTERNAL;
		}
	}
	fast_stream(out);
	opts.out_name = dest; /* a failed write names it, not the temporary file */
	rc = util_worse(paths_rc, export_perfetto(paths, n, out, &opts, &st));
	util_free_paths(paths);
	if (gz && fclose(gz) && rc != SP_EXIT_INTERNAL) { /* the gzip trailer, the last bytes */
		util_err(dest, "cannot write: %s", strerror(errno ? errno : EIO));
		rc = SP_EXIT_INTERNAL;
	}
	/* nothing whole to show: no half document under the real name */
	int whole = rc != SP_EXIT_INTERNAL && st.files;
	if (util_out_close(&uo, whole))
		rc = SP_EXIT_INTERNAL;
	else if (whole)
		printf("wrote %s: %" PRIu64 " events from %" PRIu64 " records of %" PRIu64 " files (%" PRIu64
		       " GPU spans); open it at https://ui.perfetto.dev\n",
		       dest, st.events, st.records, st.files, st.gpu_spans);
	free(dest);
	return rc;
}
