/*
 * report_html.h - the HTML report of `stepprof analyze --html FILE`: one
 * self-contained file (inline CSS and SVG; no script, no network access) made
 * from the same analysis results as the text and JSON reports (report.h).
 */
#ifndef STEPPROF_REPORT_HTML_H
#define STEPPROF_REPORT_HTML_H

#include <stddef.h>
#include <stdio.h>

#include "analyze.h"

/* Bars of the per-iteration chart: beyond this many iterations, consecutive ones share a bar. */
#define REPORT_HTML_MAX_BARS 2000

struct report_html_opts {
	const char *const *inputs; /* the trace directories or files analysed (shown in the title), may be NULL */
	size_t ninputs;
	int all; /* every iteration in the table (else the first and last 10) */
};

/* 0, or -1 on a write error. */
int report_html(FILE *f, const struct an_analysis *a, const struct report_html_opts *o);

/* Write the report to path ("-": stdout); 0, or -1 after printing the one error line. */
int report_html_file(const char *path, const struct an_analysis *a, const struct report_html_opts *o);

#endif /* STEPPROF_REPORT_HTML_H */
