/*
 * cmd_compact.c - `stepprof compact [--force] DIR|FILE...`: trace files the size
 * of what they hold.
 *
 * A trace file has its full geometry from the start (1 GiB by default) and is
 * sparse: the recorder compacts it at a clean exit, but a file left by a crash
 * or a kill keeps its apparent size, which tar without -S, scp, zip or an
 * object-store upload copy as zeros. This verb rewrites each file in place,
 * atomically (libtrace/compact.c), and refuses a file that is still being
 * written. The records, and so every analysis, stay the same.
 */
#include "commands.h"

#include <errno.h>
#include <getopt.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>

#include "tracefile.h"
#include "util.h"

static void compact_usage(FILE *f)
{
	fprintf(f, "usage: stepprof compact [--force] DIR|FILE...\n\n"
		   "Rewrite each trace file (a DIR means every trace file directly in it) without\n"
		   "its unused space, in place and atomically: its apparent size becomes what it\n"
		   "holds (a clean exit does this already; a crash or a kill leaves the file at\n"
		   "its full size, 1 GiB by default). The records are unchanged. A file whose\n"
		   "process still writes it is refused.\n\n"
		   "  --force   also a file with no clean exit whose writer ran on another host\n"
		   "            (its process cannot be checked from here)\n"
		   "  -h, --help\n");
}

int command_compact(int argc, char **argv)
{
	int force = 0;
	const struct util_flag flags[] = {{"force", 0, &force}};
	int done = util_parse_flags(argc, argv, "compact", flags, 1, compact_usage);
	if (done >= 0)
		return done;
	if (optind >= argc)
		return util_no_operand("compact");
	size_t n;
	int rc = 0;
	char **paths = util_verb_trace_paths("compact", argv + optind, argc - optind, &n, &rc);
	if (!paths)
		return rc;
	for (size_t i = 0; i < n; i++) {
		struct stat before;
		char err[1200], a[32], b[32];
		if (stat(paths[i], &before) != 0) {
			util_err(paths[i], "%s", strerror(errno));
			rc = util_worse(rc, SP_EXIT_INPUT);
			continue;
		}
		int got = sp_tf_compact_file(paths[i], force, err, sizeof(err));
		if (got < 0) {
			util_err(paths[i], "%s", err);
			rc = util_worse(rc, got == -EINVAL ? SP_EXIT_DAMAGED : SP_EXIT_INPUT);
			continue;
		}
		struct stat after;
		if (stat(paths[i], &after) != 0)
			after = before;
		util_fmt_bytes((uint64_t)before.st_size, a, sizeof(a));
		util_fmt_bytes((uint64_t)after.st_size, b, sizeof(b));
		if (printf("%s: %s -> %s%s\n", paths[i], a, b, got ? "" : " (compact already)") < 0) {
			rc = util_worse(rc, util_stdout_failed());
			break;
		}
	}
	util_free_paths(paths);
	if (fflush(stdout) != 0)
		rc = util_worse(rc, util_stdout_failed());
	return rc;
}
