/*
 * report_html_int.h - what the files of the HTML report share, inside the
 * analyzer: the category colours and the output helpers (report_html.c), and
 * the sections that the document writes in order (report_html_tables.c,
 * report_html_charts.c).
 */
#ifndef STEPPROF_REPORT_HTML_INT_H
#define STEPPROF_REPORT_HTML_INT_H

#include <stdint.h>
#include <stdio.h>

#include "report_html.h"

/* report_html.c: colours and output helpers */
extern const char *const cat_color[AN_CAT__COUNT];
void esc(FILE *f, const char *str);
const char *fns(uint64_t ns, char *buf, size_t len);
const char *fbytes(uint64_t b, char *buf, size_t len);

/* report_html_tables.c: the sections of facts and tables */
void html_run(FILE *f, const struct an_analysis *a);
void html_ranks(FILE *f, const struct an_analysis *a);
void html_bottleneck(FILE *f, const struct an_analysis *a);
void html_categories(FILE *f, const struct an_analysis *a);
void html_findings(FILE *f, const struct an_analysis *a);
void html_table(FILE *f, const struct an_analysis *a, int all);

/* report_html_charts.c: the per-iteration charts */
void html_iter_chart(FILE *f, const struct an_analysis *a);
void html_mem_chart(FILE *f, const struct an_analysis *a);

#endif /* STEPPROF_REPORT_HTML_INT_H */
