/*
 * cmd_merge.c - `stepprof merge [--json] [--threshold NAME=VALUE]... FILE...`:
 * the job's report from the rank summaries its nodes wrote (`stepprof analyze
 * --rank-summary -o FILE DIR`): the per-rank table, the job's breakdown, the
 * straggler table and straggler_rank, as one `analyze` of every directory
 * gives them (docs/multi-node.md).
 */
#include "commands.h"

#include <errno.h>
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "rank_summary.h"
#include "report.h"
#include "util.h"

static void merge_usage(FILE *f)
{
	fprintf(f, "usage: stepprof merge [--json] [--threshold NAME=VALUE]... [--collectives N] FILE...\n\n"
		   "Combine the rank summaries of a job's nodes (stepprof analyze --rank-summary -o FILE DIR,\n"
		   "one per node or per group of ranks) into the job's report: every rank's breakdown, the\n"
		   "job's breakdown (the sum of the ranks' iterations), the NCCL collectives matched across\n"
		   "the ranks (who arrives last, by how much; hosts' clocks aligned) and straggler_rank.\n"
		   "The same numbers as one stepprof analyze of all the trace directories.\n\n"
		   "  --json             the JSON document (schema stepprof.job/1, docs/multi-node.md)\n"
		   "  --threshold N=V    override a threshold (stepprof analyze --help lists them; the\n"
		   "                     bottleneck's and straggler_rank's apply here)\n"
		   "  --collectives N    list the N collectives of the largest skew, each rank's arrival\n"
		   "  -h, --help\n\n"
		   "Exit status: 0 ok, 1 usage, 2 a summary could not be read or does not parse, 4 internal.\n");
}

int command_merge(int argc, char **argv)
{
	static const struct option longopts[] = {
	    {"json", no_argument, NULL, 'j'},
	    {"threshold", required_argument, NULL, 't'},
	    {"collectives", required_argument, NULL, 'C'},
	    {"help", no_argument, NULL, 'h'},
	    {NULL, 0, NULL, 0},
	};
	struct an_analysis a;
	memset(&a, 0, sizeof(a));
	an_options_init(&a.opt);
	int json = 0, c;
	char err[1024];
	optind = 1;
	opterr = 0;
	while ((c = getopt_long(argc, argv, "hjt:C:", longopts, NULL)) != -1) {
		switch (c) {
		case 'j':
			json = 1;
			break;
		case 't':
			if (an_options_set_threshold(&a.opt, optarg, err, sizeof(err))) {
				util_err("merge", "%s", err);
				return SP_EXIT_USAGE;
			}
			break;
		case 'C': {
			char *end;
			long v = strtol(optarg, &end, 10);
			if (end == optarg || *end || v < 0 || v > 10000) {
				util_err("merge", "--collectives %s: not an integer from 0 to 10000", optarg);
				return SP_EXIT_USAGE;
			}
			a.opt.collectives = v;
			break;
		}
		case 'h':
			merge_usage(stdout);
			return SP_EXIT_OK;
		default:
			return util_bad_option("merge", argv[optind - 1]);
		}
	}
	if (optind >= argc)
		return util_no_operand("merge");
	int rc = SP_EXIT_OK;
	for (int i = optind; i < argc && !rc; i++) {
		FILE *f = strcmp(argv[i], "-") ? fopen(argv[i], "r") : stdin;
		if (!f) {
			util_err(argv[i], "%s", strerror(errno));
			rc = SP_EXIT_INPUT;
			break;
		}
		if (rs_read(f, argv[i], &a, err, sizeof(err))) {
			util_err("merge", "%s", err);
			rc = SP_EXIT_INPUT;
		}
		if (f != stdin)
			fclose(f);
	}
	if (!rc && rs_finish(&a)) {
		util_err("merge", "out of memory");
		rc = SP_EXIT_INTERNAL;
	}
	if (!rc) {
		int wr = json ? report_job_json(stdout, &a) : report_job_text(stdout, &a);
		if (fflush(stdout) || wr)
			rc = util_stdout_failed();
	}
	an_analysis_free(&a);
	return rc;
}
