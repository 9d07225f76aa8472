/*
 * cmd_analyze.c - `stepprof analyze DIR|FILE... [--json [--schema N]|--csv] [--all] [--rank N] [--step-regex RE]
 * [--threshold NAME=VALUE]...`: the per-iteration breakdown and the findings of a
 * run (docs/definitions.md and docs/analysis-json.md).
 *
 * Divided into: usage (with the thresholds of findings.def and their defaults),
 * option parsing, and the run: trace files → merged stream → analysis → report.
 *
 * Exit codes (util.h, docs/analysis-json.md): 0 ok; 1 bad command line (option,
 * regex, threshold, a --rank no process has); 2 input unreadable (missing directory, no trace files, a
 * file that is not a trace or has another major version); 3 the report was made
 * but a file was truncated or corrupt (read up to its last whole record, one
 * warning line per file on stderr); 4 internal (out of memory, output not written).
 */
#include "analyze.h"
#include "commands.h"
#include "merge.h"
#include "report.h"
#include "report_html.h"
#include "rank_summary.h"
#include "util.h"

#include <errno.h>
#include <getopt.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static void analyze_usage(FILE *f)
{
	fprintf(f,
		"usage: stepprof analyze [--json [--schema N]|--csv] [--all] [--html FILE] [--rank N] [--step-regex RE]\n"
		"                        [--threshold NAME=VALUE]... [--merge-runs] [--rank-summary -o FILE]\n"
		"                        [--jobs N] [--collectives N] [DIR|FILE...]\n\n"
		"Merge every trace file of the directories (all processes and the eBPF collector's file),\n"
		"find the training iterations and give each one's wall time to input, h2d, compute, comm,\n"
		"d2h, sync or other; name the bottleneck and report findings with evidence and advice.\n\n"
		"  --json               the JSON document (schema stepprof.analysis/2, docs/analysis-json.md)\n"
		"  --schema N           with --json: 2 (the default), or 1: the document of stepprof.analysis/1,\n"
		"                       without the comm category (communication counted in compute)\n"
		"  --csv                the per-iteration table as CSV: a header line, one row per iteration\n"
		"  --all                every iteration in the text table (default: first and last 10)\n"
		"  --html FILE          also write a self-contained HTML report to FILE ('-': stdout, instead of text)\n"
		"  --rank N             break down the trainer process of rank N (RANK); default: the lowest\n"
		"                       rank, or the process with the most launches. With several trainer\n"
		"                       processes the report also has a per-rank table\n"
		"  --step-regex RE      NVTX range names that are iterations (case-insensitive POSIX ERE)\n"
		"                       default: %s\n"
		"  --threshold N=V      override a threshold: the bottleneck's or a finding's (repeatable)\n"
		"  --merge-runs         merge files of different runs (run ids); refused by default\n"
		"  --rank-summary       write the rank summary of the ranks found, for stepprof merge\n"
		"                       (a job on many nodes: one per node, docs/multi-node.md), to -o FILE\n"
		"  -o FILE              where --rank-summary writes ('-': stdout)\n"
		"  --jobs N             analyse the ranks in N threads (default 1)\n"
		"  --collectives N      list the N NCCL collectives of the largest skew, each rank's arrival\n\n"
		"Iterations: NVTX ranges matching RE, else stepprof_step() marks, else the automatically\n"
		"detected period of the training thread's CUDA calls.\n\n"
		"With no DIR|FILE: the newest ./stepprof-* trace directory (by modification time), named on\n"
		"stderr. A DIR without trace files but with trace directories in it: they are listed.\n\n"
		"Thresholds (default):\n",
		AN_DEFAULT_STEP_REGEX);
	for (int i = 0; i < AN_T__COUNT; i++)
		fprintf(f, "  %-42s %-10.10g %s\n", an_threshold_name[i], an_threshold_default[i],
			an_threshold_help[i]);
	fprintf(f,
		"\nExit status: 0 ok, 1 usage (also: files of more than one run without --merge-runs), 2 unreadable input (missing directory, no trace files, not a\n"
		"trace or another format version), 3 report made but a file was truncated or corrupt, 4 internal.\n");
}

int command_analyze(int argc, char **argv)
{
	static const struct option longopts[] = {
	    {"json", no_argument, NULL, 'j'},
	    {"csv", no_argument, NULL, 'c'},
	    {"all", no_argument, NULL, 'a'},
	    {"html", required_argument, NULL, 'H'},
	    {"step-regex", required_argument, NULL, 'r'},
	    {"threshold", required_argument, NULL, 't'},
	    {"rank", required_argument, NULL, 'R'},
	    {"merge-runs", no_argument, NULL, 'M'},
	    {"rank-summary", no_argument, NULL, 'U'},
	    {"jobs", required_argument, NULL, 'J'},
	    {"collectives", required_argument, NULL, 'C'},
	    {"schema", required_argument, NULL, 'S'},
	    {"help", no_argument, NULL, 'h'},
	    {NULL, 0, NULL, 0},
	};
	struct an_options opt;
	an_options_init(&opt);
	int json = 0, csv = 0, all = 0, merge_runs = 0, rank_summary = 0, schema = 0, c;
	const char *html = NULL, *out = NULL;
	char err[512];
	optind = 1;
	opterr = 0;
	while ((c = getopt_long(argc, argv, "hjar:t:H:R:o:", longopts, NULL)) != -1) {
		switch (c) {
		case 'j':
			json = 1;
			break;
		case 'c':
			csv = 1;
			break;
		case 'a':
			all = 1;
			break;
		case 'H':
			html = optarg;
			break;
		case 'M':
			merge_runs = 1;
			break;
		case 'S':
			if (strcmp(optarg, "1") && strcmp(optarg, "2")) {
				util_err("analyze", "--schema %s: 1 or 2", optarg);
				return SP_EXIT_USAGE;
			}
			schema = optarg[0] - '0';
			break;
		case 'U':
			rank_summary = 1;
			break;
		case 'o':
			out = optarg;
			break;
		case 'C': {
			char *end;
			long v = strtol(optarg, &end, 10);
			if (end == optarg || *end || v < 0 || v > 10000) {
				util_err("analyze", "--collectives %s: not an integer from 0 to 10000", optarg);
				return SP_EXIT_USAGE;
			}
			opt.collectives = v;
			break;
		}
		case 'J': {
			char *end;
			long v = strtol(optarg, &end, 10);
			if (end == optarg || *end || v < 1 || v > 1024) {
				util_err("analyze", "--jobs %s: not an integer from 1 to 1024", optarg);
				return SP_EXIT_USAGE;
			}
			opt.jobs = v;
			break;
		}
		case 'r':
			opt.step_regex = optarg;
			break;
		case 't':
			if (an_options_set_threshold(&opt, optarg, err, sizeof(err))) {
				util_err("analyze", "%s", err);
				return SP_EXIT_USAGE;
			}
			/* a share of the wall time: 80 for 80% would make compute never the bottleneck */
			if (opt.threshold[AN_T_BN_COMPUTE_SHARE] > 1.0) {
				util_err("analyze", "--threshold %s: a share of the wall time, from 0 to 1", optarg);
				return SP_EXIT_USAGE;
			}
			break;
		case 'R': {
			char *end;
			long v = strtol(optarg, &end, 10);
			if (end == optarg || *end || v < 0 || v > INT32_MAX) {
				util_err("analyze", "--rank %s: not a non-negative integer", optarg);
				return SP_EXIT_USAGE;
			}
			opt.rank_given = 1;
			opt.rank = (int)v;
			break;
		}
		case 'h':
			analyze_usage(stdout);
			return SP_EXIT_OK;
		default:
			return util_bad_option("analyze", argv[optind - 1]);
		}
	}
	/* no operand: the newest run directory here, said on stderr (the default name of the recorder's) */
	char newest[PATH_MAX];
	char *here[] = {newest, NULL};
	if (optind >= argc) {
		unsigned nd = util_trace_dirs(".", "stepprof-", newest, sizeof(newest), NULL);
		if (!nd) {
			util_err("analyze", "no DIR|FILE given, and no ./stepprof-* trace directory here (stepprof analyze --help)");
			return SP_EXIT_USAGE;
		}
		fprintf(stderr, "stepprof: analyzing %s (the newest of %u trace director%s here)\n", newest, nd,
			nd == 1 ? "y" : "ies");
		argv = here;
		argc = 1;
		optind = 0;
	}
	if (csv && (json || (html && !strcmp(html, "-")))) {
		util_err("analyze", "--csv: not with %s (both write to stdout)", json ? "--json" : "--html -");
		return SP_EXIT_USAGE;
	}
	if (rank_summary && (!out || !*out)) {
		util_err("analyze", "--rank-summary: -o FILE says where to write it");
		return SP_EXIT_USAGE;
	}
	if (out && !rank_summary) {
		util_err("analyze", "-o: only with --rank-summary");
		return SP_EXIT_USAGE;
	}
	if (rank_summary && (json || csv || html)) {
		util_err("analyze", "--rank-summary: not with %s", json ? "--json" : csv ? "--csv" : "--html");
		return SP_EXIT_USAGE;
	}
	if (schema && !json) {
		util_err("analyze", "--schema: only with --json");
		return SP_EXIT_USAGE;
	}
	if (html && !*html) {
		util_err("analyze", "--html: empty file name");
		return SP_EXIT_USAGE;
	}
	size_t n = 0;
	int rc = SP_EXIT_OK;
	char **paths = util_verb_trace_paths("analyze", argv + optind, argc - optind, &n, &rc);
	if (!paths)
		return rc;
	if ((html && report_output_is_input("analyze", "--html", html, paths, n)) ||
	    (out && strcmp(out, "-") && report_output_is_input("analyze", "-o", out, paths, n)) ||
	    util_check_runs("analyze", paths, n, merge_runs)) {
		util_free_paths(paths);
		return SP_EXIT_USAGE;
	}
	struct merge *m = merge_open(paths, n);
	util_free_paths(paths);
	if (!m)
		return SP_EXIT_INPUT;
	struct an_source src;
	merge_source(m, &src);
	struct an_analysis a;
	if (an_analyze(&src, &opt, &a, err, sizeof(err))) {
		util_err("analyze", "%s", err);
		merge_close(m);
		return strstr(err, "--step-regex") || strstr(err, "--rank") ? SP_EXIT_USAGE : SP_EXIT_INTERNAL;
	}
	rc = merge_report_damage(m);
	if (rank_summary) {
		FILE *f = strcmp(out, "-") ? fopen(out, "w") : stdout;
		if (!f) {
			util_err(out, "%s", strerror(errno));
			rc = SP_EXIT_INTERNAL;
		} else {
			int wr = rs_write(f, &a);
			if ((f == stdout ? fflush(f) : fclose(f)) || wr) {
				util_err(out, "write failed");
				rc = SP_EXIT_INTERNAL;
			}
		}
		an_analysis_free(&a);
		merge_close(m);
		return rc;
	}
	/*
	 * The HTML file first: `analyze --html F DIR | head` ends this process with SIGPIPE
	 * at its next write to stdout, and F is complete by then.
	 */
	struct report_html_opts ho = {(const char *const *)argv + optind, (size_t)(argc - optind), all};
	if (html && report_html_file(html, &a, &ho))
		rc = SP_EXIT_INTERNAL;
	int wr = html && !strcmp(html, "-") ? 0
		 : json			   ? report_json_schema(stdout, &a, schema ? schema : REPORT_SCHEMA)
		 : csv			   ? report_csv(stdout, &a)
					   : report_text(stdout, &a, all);
	if (fflush(stdout) || wr)
		rc = util_stdout_failed();
	an_analysis_free(&a);
	merge_close(m);
	return rc;
}
