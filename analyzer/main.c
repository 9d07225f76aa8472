/*
 * main.c - the `stepprof` command: a table of verbs (commands.def), each in its
 * own file analyzer/cmd_<verb>.c, in the manner of uftrace.
 *
 * Divided into: 1. the verb table, 2. --help/--version, 3. dispatch.
 */
#include "commands.h"

#include <stdio.h>
#include <string.h>

#include "stepprof/stepprof.h"
#include "stepprof/trace.h"
#include "util.h"

/* -------------------------------------------------------------- 1. verbs */

struct verb {
	const char *name, *operands, *summary;
	int (*fn)(int argc, char **argv);
};

static const struct verb verbs[] = {
#define SP_COMMAND(verb, operands, summary) {#verb, operands, summary, command_##verb},
#include "commands.def"
#undef SP_COMMAND
};
#define NVERBS (sizeof(verbs) / sizeof(verbs[0]))

/* ---------------------------------------------------------- 2. help text */

#define HELP_WIDTH 80 /* columns of the synopses' lines */

/* Length of the synopsis's item at w: up to a space outside brackets ("[--threshold NAME=VALUE]..." is one). */
static size_t item_len(const char *w)
{
	size_t n = 0;
	for (int depth = 0; w[n] && (depth > 0 || w[n] != ' '); n++)
		depth += (w[n] == '[') - (w[n] == ']');
	return n;
}

/*
 * "stepprof <verb> <synopsis>" from column `indent`, wrapped between items at
 * HELP_WIDTH, the continuation lines under the first item (the way the verbs'
 * own usage lines wrap).
 */
static void synopsis(FILE *f, int indent, const struct verb *v)
{
	int col = fprintf(f, "%*sstepprof %s", indent, "", v->name);
	int first = col + 1;
	for (const char *w = v->operands; *w;) {
		size_t n = item_len(w);
		if (col + 1 + (int)n > HELP_WIDTH && col > first)
			col = fprintf(f, "\n%*s", first - 1, "") - 1;
		col += fprintf(f, " %.*s", (int)n, w);
		w += n + strspn(w + n, " ");
	}
	fputc('\n', f);
}

static void usage(FILE *f)
{
	fprintf(f, "usage: stepprof <verb> [options] [operands]\n"
		   "       stepprof <verb> --help | stepprof help <verb> | --help | --version\n\n"
		   "A profiler for GPU training jobs: capture with LD_PRELOAD=libstepprof.so, then\n"
		   "ask where each iteration's time went.\n\nverbs:\n");
	for (size_t i = 0; i < NVERBS; i++)
		fprintf(f, "  %-8s %s\n", verbs[i].name, verbs[i].summary);
	fprintf(f, "\nthe options and operands of each (stepprof <verb> --help says what they do):\n");
	for (size_t i = 0; i < NVERBS; i++)
		synopsis(f, 2, &verbs[i]);
	fprintf(f, "\nexit status: 0 ok, 1 usage, 2 unreadable input, 3 damaged input (truncated or\n"
		   "corrupt; what was whole is reported), 4 internal error.\n"
		   "See docs/cli.md and docs/trace-format.md.\n");
}

static void version(void)
{
	printf("stepprof %s (trace format %u.%u)\n", STEPPROF_VERSION, SP_VERSION_MAJOR, SP_VERSION_MINOR);
}

/* ------------------------------------------------------------ 3. dispatch */

/* The verb, --help, --version or `help VERB` named by argv[1]; its exit status. */
static int dispatch(int argc, char **argv)
{
	const char *a = argv[1];
	if (!strcmp(a, "--help") || !strcmp(a, "-h") || !strcmp(a, "help")) {
		if (!strcmp(a, "help") && argc > 2) {
			/* `stepprof help VERB` is `stepprof VERB --help` */
			char *sub[] = {argv[2], "--help", NULL};
			for (size_t i = 0; i < NVERBS; i++) {
				if (strcmp(verbs[i].name, argv[2]))
					continue;
				return verbs[i].fn(2, sub);
			}
			util_err(argv[2], "unknown verb (stepprof --help lists them)");
			return SP_EXIT_USAGE;
		}
		usage(stdout);
		return SP_EXIT_OK;
	}
	if (!strcmp(a, "--version") || !strcmp(a, "-V") || !strcmp(a, "version")) {
		version();
		return SP_EXIT_OK;
	}
	for (size_t i = 0; i < NVERBS; i++) {
		if (strcmp(verbs[i].name, a))
			continue;
		return verbs[i].fn(argc - 1, argv + 1);
	}
	util_err(a, "unknown verb (stepprof --help lists them)");
	return SP_EXIT_USAGE;
}

int main(int argc, char **argv)
{
	if (argc < 2) {
		usage(stderr);
		return SP_EXIT_USAGE;
	}
	int rc = dispatch(argc, argv);
	/* --help, --version and `help VERB` too: a full disk is exit 4, not a silent 0 (docs/cli.md) */
	if (fflush(stdout) || ferror(stdout))
		rc = util_worse(rc, util_stdout_failed());
	return rc;
}
