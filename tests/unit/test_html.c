/*
 * test_html.c - unit tests of the HTML report (analyzer/report_html.c) on
 * analysis results built by hand, so that every expected number is known by
 * construction:
 *   - strings from a trace (command line, evidence, call sites, advice) and the
 *     input paths are escaped; tags stay balanced (a small checker below);
 *   - shares and medians are the results' (known values), and agree with the
 *     text report's on the same results;
 *   - beyond REPORT_HTML_MAX_BARS iterations the chart aggregates into buckets and
 *     the output stays bounded; an outlier stays visible in its bucket's numbers;
 *   - no iterations: a report without charts; the table holds the first and last
 *     10 iterations, or all of them;
 *   - an unwritable file is an error;
 *   - the findings come first, above the bottleneck; the strip under the chart
 *     marks the concerned iterations only, in no category's colour; with 3,000
 *     iterations no two labels of the chart overlap (their boxes computed from
 *     the SVG's coordinates) and the time axis reads in one unit;
 *   - with 2 or more trainer processes, a per-rank table of the ranks' own numbers
 *     (shares as the exact doubles, the selected rank marked) and the text
 *     report's slowest/fastest line; none for one process.
 *
 * Divided into: 1. building results and checking tags, 2. the tests.
 */
#include <criterion/criterion.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "analyze.h"
#include "report.h"
#include "report_html.h"
#include "report_html_int.h"
#include "testlib.h"

/* ---------------------------------------- 1. results and a tag checker */

#define MS 1000000ull

/* n iterations of wall ms[i] milliseconds (1 ms when ms is NULL), split input half, compute half. */
static void build(struct an_analysis *a, size_t n, const uint64_t *ms)
{
	memset(a, 0, sizeof(*a));
	an_options_init(&a->opt); /* the thresholds an analysis has (bottleneck.compute_share) */
	a->source_kind = n ? AN_SRC_AUTO : AN_SRC_NONE;
	a->auto_period = 7;
	a->it = calloc(n ? n : 1, sizeof(*a->it));
	cr_assert_not_null(a->it);
	a->nit = n;
	uint64_t t = 1000 * MS;
	a->run_begin_ns = t - MS;
	for (size_t i = 0; i < n; i++) {
		uint64_t w = (ms ? ms[i] : 1) * MS;
		struct an_iter *it = &a->it[i];
		it->start_ns = t;
		it->end_ns = t + w;
		it->bd[AN_INPUT] = w / 2;
		it->bd[AN_COMPUTE] = w - w / 2;
		it->device_bytes_peak = (uint64_t)(i + 1) << 20;
		a->bd_total[AN_INPUT] += it->bd[AN_INPUT];
		a->bd_total[AN_COMPUTE] += it->bd[AN_COMPUTE];
		a->wall_total += w;
		t += w;
	}
	a->run_end_ns = t + MS;
	a->device_bytes_peak = (uint64_t)n << 20;
	a->device_capacity = 1ull << 30;
}

static void unbuild(struct an_analysis *a)
{
	free(a->it);
	free(a->procs);
	for (size_t i = 0; i < a->nfnd; i++)
		free(a->fnd[i].iter);
	free(a->fnd);
}

/* One finding of the given severity on the listed iterations (a copy of the list), as findings.c keeps it. */
static void add_finding(struct an_analysis *a, int kind, int sev, const long *iters, size_t n)
{
	a->fnd = realloc(a->fnd, (a->nfnd + 1) * sizeof(*a->fnd));
	cr_assert_not_null(a->fnd);
	struct an_result_finding *f = &a->fnd[a->nfnd++];
	memset(f, 0, sizeof(*f));
	f->kind = kind;
	f->severity = sev;
	f->first_iteration = n ? iters[0] : -1;
	f->last_iteration = n ? iters[n - 1] : -1;
	f->iterations = (long)n;
	f->iter = malloc((n ? n : 1) * sizeof(*f->iter));
	cr_assert_not_null(f->iter);
	memcpy(f->iter, iters, n * sizeof(*iters));
	f->niter = f->iter_cap = n;
	snprintf(f->advice, sizeof(f->advice), "fix it");
}

/* The rectangles of finding k's strip: their x and width, up to max; how many. */
static size_t strip_rects(const char *h, size_t k, double *x, double *w, size_t max)
{
	char key[80];
	snprintf(key, sizeof(key), "<a href=\"#finding-%zu\" class=\"strip\"", k);
	const char *p = strstr(h, key), *end = p ? strstr(p, "</a>") : NULL;
	cr_assert(p && end, "no strip for finding %zu", k);
	size_t n = 0;
	for (const char *r = strstr(p, "<rect "); r && r < end; r = strstr(r + 1, "<rect ")) {
		cr_assert_eq(sscanf(r, "<rect x=\"%lf\" y=\"%*f\" width=\"%lf\"", &x[n < max ? n : max - 1],
				    &w[n < max ? n : max - 1]),
			     2, "%.80s", r);
		n++;
	}
	return n;
}

static char *render(const struct an_analysis *a, const struct report_html_opts *o, size_t *len)
{
	char *buf = NULL;
	size_t n = 0;
	FILE *f = open_memstream(&buf, &n);
	cr_assert_not_null(f);
	cr_assert_eq(report_html(f, a, o), 0);
	fclose(f);
	if (len)
		*len = n;
	return buf;
}

/*
 * Every start tag is closed by its end tag, in order (HTML void elements and SVG
 * self-closed elements excepted); comments and the doctype skipped. Returns NULL,
 * or a message saying what is wrong.
 */
static const char *check_tags(const char *s, char *msg, size_t msglen)
{
	static const char *const voids[] = {"meta", "br", "hr", "img", "input", "link", "col", "wbr", NULL};
	char stack[256][24];
	int depth = 0;
	for (const char *p = strchr(s, '<'); p; p = strchr(p + 1, '<')) {
		if (p[1] == '!') {
			p = strchr(p, '>');
			if (!p)
				return "unterminated <!";
			continue;
		}
		int end = p[1] == '/';
		const char *n = p + 1 + end;
		size_t k = strspn(n, "abcdefghijklmnopqrstuvwxyz0123456789");
		if (!k || k >= sizeof(stack[0])) {
			snprintf(msg, msglen, "a '<' that opens no tag at offset %ld", (long)(p - s));
			return msg;
		}
		const char *gt = strchr(n, '>');
		if (!gt)
			return "unterminated tag";
		char name[24];
		memcpy(name, n, k);
		name[k] = 0;
		if (end) {
			if (!depth || strcmp(stack[depth - 1], name)) {
				snprintf(msg, msglen, "</%s> closes <%s> at offset %ld", name,
					 depth ? stack[depth - 1] : "", (long)(p - s));
				return msg;
			}
			depth--;
		} else if (gt[-1] != '/') {
			int v = 0;
			for (int i = 0; voids[i]; i++)
				v |= !strcmp(voids[i], name);
			if (!v) {
				if (depth == 256)
					return "nesting too deep";
				strcpy(stack[depth++], name);
			}
		}
		p = gt;
	}
	if (depth) {
		snprintf(msg, msglen, "<%s> never closed", stack[depth - 1]);
		return msg;
	}
	return NULL;
}

static void expect_balanced(const char *html)
{
	char msg[160];
	const char *e = check_tags(html, msg, sizeof(msg));
	cr_expect_null(e, "tags: %s", e ? e : "");
}

static size_t count(const char *s, const char *what)
{
	size_t n = 0;
	for (const char *p = strstr(s, what); p; p = strstr(p + 1, what))
		n++;
	return n;
}

/* ------------------------------------------------------------ 2. tests */

Test(html, escapes_every_string_from_a_trace)
{
	struct an_analysis a;
	build(&a, 12, NULL);
	a.procs = calloc(1, sizeof(*a.procs));
	a.nprocs = 1;
	a.procs[0].pid = 42;
	a.procs[0].rank = -1;
	a.procs[0].ppid = 1;
	snprintf(a.procs[0].cmdline, sizeof(a.procs[0].cmdline), "python <script>alert('x')</script> &\"\x01");
	a.fnd = calloc(1, sizeof(*a.fnd));
	a.nfnd = 1;
	struct an_result_finding *x = &a.fnd[0];
	x->kind = AN_F_SMALL_FILE_STORM;
	x->severity = 2;
	x->first_iteration = 3;
	x->last_iteration = 7;
	x->iterations = 5;
	x->nev = 2;
	x->ev[0].key = "top_directories";
	x->ev[0].is_str = 1;
	snprintf(x->ev[0].str, sizeof(x->ev[0].str), "/data/<img src=x onerror=alert(1)> (99 opens)");
	x->ev[1].key = "median_file_bytes";
	x->ev[1].num = 1 << 30;
	x->nsites = 1;
	snprintf(x->sites[0], sizeof(x->sites[0]), "lib<b>.so!f<T>+0x10");
	snprintf(x->advice, sizeof(x->advice), "Use <shards> & \"pack\" them.");
	const char *inputs[] = {"/runs/</title><script>bad()</script>"};
	struct report_html_opts o = {inputs, 1, 0};
	char *h = render(&a, &o, NULL);
	expect_balanced(h);
	cr_expect_null(strstr(h, "<script"), "raw <script> in the report");
	cr_expect_null(strstr(h, "<img"), "raw <img> in the report");
	cr_expect_null(strstr(h, "<b>"), "raw <b> from a call site");
	cr_expect_null(strstr(h, "<shards>"), "raw tag from the advice");
	cr_expect_null(strstr(h, "\x01"), "a control character passed through");
	cr_expect(strstr(h, "python &lt;script&gt;alert(&#39;x&#39;)&lt;/script&gt; &amp;&quot;\\x01"), "command line");
	cr_expect(strstr(h, "/data/&lt;img src=x onerror=alert(1)&gt; (99 opens)"), "string evidence");
	cr_expect(strstr(h, "lib&lt;b&gt;.so!f&lt;T&gt;+0x10"), "call site");
	cr_expect(strstr(h, "Use &lt;shards&gt; &amp; &quot;pack&quot; them."), "advice");
	cr_expect(strstr(h, "<title>stepprof: /runs/&lt;/title&gt;&lt;script&gt;bad()&lt;/script&gt;</title>"),
		  "the input path in the title");
	/* the finding itself: kind, severity, iterations, evidence with its readable unit */
	cr_expect(strstr(h, "data-kind=\"small_file_storm\""));
	cr_expect(strstr(h, "class=\"finding sev-critical\""));
	cr_expect(strstr(h, "iterations 3&ndash;7 (5 concerned)"));
	cr_expect(strstr(h, "1073741824 <span class=\"note\">(1 GiB)</span>"), "bytes evidence in full and readable");
	free(h);
	unbuild(&a);
}

Test(html, shares_and_medians_are_the_results)
{
	/* walls 10..50 ms, half input, half compute: shares 50% each, median input 15 ms */
	uint64_t ms[5] = {30, 10, 50, 20, 40};
	struct an_analysis a;
	build(&a, 5, ms);
	char *h = render(&a, NULL, NULL);
	expect_balanced(h);
	cr_expect(strstr(h, "data-cat=\"input\" data-value=\"0.5\">50.0%<"), "input share");
	cr_expect(strstr(h, "data-cat=\"compute\" data-value=\"0.5\">50.0%<"), "compute share");
	cr_expect(strstr(h, "data-cat=\"sync\" data-value=\"0\">0.0%<"), "sync share");
	cr_expect(strstr(h, "Bottleneck: input</strong> (50.0% of wall time)"), "bottleneck sentence");
	cr_expect(strstr(h, "median 30 ms per iteration, 150 ms in all iterations"), "wall time");
	/* the category row: median and p95 as the text report gives them for the same results */
	char *t = NULL;
	size_t tn = 0;
	FILE *f = open_memstream(&t, &tn);
	cr_assert_eq(report_text(f, &a, 0), 0);
	fclose(f);
	char med[32], p95[32];
	cr_assert_eq(sscanf(strstr(t, "\n  input ") + 1, " input %31[0-9.] ms %31[0-9.] ms", med, p95), 2, "%s", t);
	cr_expect_str_eq(med, "15");
	char row[160];
	snprintf(row, sizeof(row), "input</td><td>%s ms</td><td>%s ms</td>", med, p95);
	cr_expect(strstr(h, row), "category row %s", row);
	free(t);
	free(h);
	unbuild(&a);
}

Test(html, many_iterations_are_bucketed_and_bounded)
{
	const size_t n = 50000, spike = 43210;
	uint64_t *ms = malloc(n * sizeof(*ms));
	cr_assert_not_null(ms);
	for (size_t i = 0; i < n; i++)
		ms[i] = i == spike ? 500 : 1;
	struct an_analysis a;
	build(&a, n, ms);
	free(ms);
	size_t len = 0;
	char *h = render(&a, NULL, &len);
	expect_balanced(h);
	char want[64];
	snprintf(want, sizeof(want), "data-bars=\"%d\"", REPORT_HTML_MAX_BARS);
	cr_expect(strstr(h, want), "the chart has %d bars", REPORT_HTML_MAX_BARS);
	cr_expect_eq(count(h, "class=\"hover\""), REPORT_HTML_MAX_BARS);
	cr_expect_lt(len, 1500000, "report of %zu iterations: %zu bytes", n, len);
	/* the spike is in one bucket's numbers, and its bar is marked as cut at the top */
	const char *p = strstr(h, "max 500 ms");
	cr_assert_not_null(p, "no bucket holds the 500 ms iteration");
	const char *q = p;
	while (q > h && strncmp(q, "<title>iterations ", 18))
		q--;
	size_t lo = 0, hi = 0;
	cr_assert_eq(sscanf(q, "<title>iterations %zu-%zu", &lo, &hi), 2);
	cr_expect(lo <= spike && spike <= hi && hi - lo < 30, "bucket %zu-%zu for iteration %zu", lo, hi, spike);
	cr_expect(strstr(h, "class=\"cut\""), "the tall bucket is cut and marked");
	cr_expect(strstr(h, "50000 iterations in 2000 bars of 25 consecutive iterations"));
	free(h);
	unbuild(&a);
}

Test(html, no_iterations_no_charts)
{
	struct an_analysis a;
	build(&a, 0, NULL);
	char *h = render(&a, NULL, NULL);
	expect_balanced(h);
	cr_expect(strstr(h, "No iterations."));
	cr_expect_null(strstr(h, "<svg"));
	cr_expect(strstr(h, "Findings (0)"));
	cr_expect(strstr(h, "</html>\n"));
	free(h);
	unbuild(&a);
}

Test(html, table_holds_first_and_last_ten_or_all)
{
	struct an_analysis a;
	build(&a, 30, NULL);
	char *h = render(&a, NULL, NULL);
	const char *t = strstr(h, "id=\"table\"");
	cr_assert_not_null(t);
	cr_expect(strstr(t, "<details>"), "the table is behind a <details>");
	cr_expect_eq(count(t, "<tr><td>"), 20);
	cr_expect(strstr(t, "<tr><td>9</td>") && strstr(t, "<tr><td>20</td>") && !strstr(t, "<tr><td>10</td>") &&
		  !strstr(t, "<tr><td>19</td>"));
	cr_expect(strstr(t, "&hellip; 10 iterations &hellip;"));
	free(h);
	struct report_html_opts o = {NULL, 0, 1};
	h = render(&a, &o, NULL);
	expect_balanced(h);
	cr_expect_eq(count(strstr(h, "id=\"table\""), "<tr><td>"), 30);
	free(h);
	unbuild(&a);
}

Test(html, unwritable_file_is_an_error)
{
	struct an_analysis a;
	build(&a, 3, NULL);
	cr_expect_eq(report_html_file("/nonexistent-stepprof-dir/r.html", &a, NULL), -1);
	unbuild(&a);
}

/* Rank k of three: median wall med_ms[k] ms, bd_total in ms as given (wall_total their sum). */
static void set_rank(struct an_rank *r, int32_t rank, int32_t pid, uint64_t nit, uint64_t med_ms, const uint64_t *bd_ms,
		     int selected)
{
	memset(r, 0, sizeof(*r));
	r->rank = rank;
	r->pid = pid;
	r->local_rank = rank;
	r->world_size = 3;
	r->selected = selected;
	r->nit = nit;
	r->wall_median = med_ms * MS;
	for (int c = 0; c < AN_CAT__COUNT; c++) {
		r->bd_total[c] = bd_ms[c] * MS;
		r->wall_total += r->bd_total[c];
	}
}

Test(html, rank_table_of_the_ranks_numbers)
{
	struct an_analysis a;
	build(&a, 5, NULL);
	a.ranks = calloc(3, sizeof(*a.ranks));
	cr_assert_not_null(a.ranks);
	a.nranks = 3;
	/* input, h2d, compute, comm, d2h, sync, other (ms) */
	static const uint64_t b0[AN_CAT__COUNT] = {25, 0, 50, 0, 0, 25, 0}, b1[AN_CAT__COUNT] = {0, 0, 90, 0, 0, 0, 10},
			      b2[AN_CAT__COUNT] = {60, 0, 30, 0, 0, 0, 10};
	set_rank(&a.ranks[0], 0, 1000, 10, 10, b0, 0);
	set_rank(&a.ranks[1], 1, 1001, 10, 12, b1, 1);
	set_rank(&a.ranks[2], -1, 1002, 20, 30, b2, 0);
	char *h = render(&a, NULL, NULL);
	expect_balanced(h);
	cr_expect_eq(count(h, "<tr class=\"rank"), 3, "one row per rank");
	cr_expect(strstr(h, "Ranks: 3 trainer processes"));
	/* shares: the exact fractions, each category present (0 included) */
	cr_expect(strstr(h, "data-cat=\"input\" data-value=\"0.25\""), "rank 0 input 25%");
	cr_expect(strstr(h, "data-cat=\"sync\" data-value=\"0.25\""), "rank 0 sync 25%");
	cr_expect(strstr(h, "data-cat=\"compute\" data-value=\"0.90000000000000002\""), "rank 1 compute 90%");
	cr_expect(strstr(h, "data-cat=\"input\" data-value=\"0.59999999999999998\""), "rank 2 input 60%");
	cr_expect_eq(count(h, "class=\"rshare\""), 3 * AN_CAT__COUNT, "seven shares per row");
	/* rows: rank, pid, iterations, median wall; the bottleneck by report_bottleneck_of */
	cr_expect(strstr(h, "data-rank=\"0\" data-pid=\"1000\" data-selected=\"0\"><td class=\"mark\"></td><td>0</td>"
			    "<td>1000</td><td>10</td><td>10 ms</td>"),
		  "rank 0 row");
	cr_expect(strstr(h, "<tr class=\"rank selected\" data-rank=\"1\" data-pid=\"1001\" data-selected=\"1\"><td "
			    "class=\"mark\">&#9664; selected</td><td>1</td><td>1001</td><td>10</td><td>12 ms</td>"),
		  "rank 1 row, selected");
	cr_expect(
	    strstr(h, "data-rank=\"-1\" data-pid=\"1002\" data-selected=\"0\"><td class=\"mark\"></td><td>-</td>"),
	    "a process without RANK");
	cr_expect_eq(count(h, "&#9664; selected"), 1, "one rank marked");
	/* rank 0: input and sync tie at 25%, the first wins as in the text; rank 1 compute >= 80% */
	cr_expect(strstr(h, "</svg></td><td class=\"l\">input</td></tr>\n<tr class=\"rank selected\""), "rank 0");
	cr_expect(strstr(h, "</svg></td><td class=\"l\">compute</td></tr>\n<tr class=\"rank\" data-rank=\"-1\""),
		  "rank 1");
	/* 30 ms against 10 ms: 200% above */
	cr_expect(strstr(h, "Slowest median wall: <strong>pid 1002</strong> at 30 ms, 200% above the fastest, "
			    "rank 0 (pid 1000) at 10 ms."),
		  "the slowest/fastest line");
	cr_expect(strstr(h, "Below: the selected process (&#9664;: rank 1, pid 1001) only."));
	/* the same line in the text report, from the same numbers */
	char *t = NULL;
	size_t tn = 0;
	FILE *f = open_memstream(&t, &tn);
	cr_assert_eq(report_text(f, &a, 0), 0);
	fclose(f);
	cr_expect(strstr(t, "slowest median wall: pid 1002 at 30 ms, 200% above the fastest, rank 0 (pid 1000) at "
			    "10 ms"),
		  "text: %s", t);
	free(t);
	free(h);

	/* within 10%: no rank stands out; a rank without iterations is left out of the comparison */
	a.ranks[2].wall_median = 11 * MS;
	a.ranks[0].nit = 0;
	h = render(&a, NULL, NULL);
	expect_balanced(h);
	cr_expect(strstr(h, "Median walls within 10%: from pid 1002 at 11 ms to rank 1 (pid 1001) at 12 ms."),
		  "within 10%%");
	cr_expect_null(strstr(h, "Slowest median wall"));
	free(h);

	/* one trainer: no rank table */
	a.nranks = 1;
	a.ranks[0].selected = 1;
	h = render(&a, NULL, NULL);
	cr_expect_null(strstr(h, "id=\"ranks\""), "a rank section for one process");
	cr_expect_null(strstr(h, "<tr class=\"rank"));
	free(h);
	free(a.ranks);
	unbuild(&a);
}

/*
 * The findings open the report: the first finding card comes before the
 * bottleneck banner in the document, the most severe one first.
 */
Test(html, findings_come_before_the_bottleneck)
{
	struct an_analysis a;
	build(&a, 20, NULL);
	long it[] = {0, 19};
	add_finding(&a, AN_F_MEMORY_GROWTH, 2, it, 2);
	char *h = render(&a, NULL, NULL);
	expect_balanced(h);
	const char *card = strstr(h, "<article id=\"finding-0\""), *banner = strstr(h, "id=\"bottleneck\"");
	cr_assert(card && banner, "a finding card and the bottleneck banner");
	cr_expect_lt(card, banner, "the first finding card comes before the bottleneck banner");
	free(h);
	unbuild(&a);
	/* no findings: the bottleneck opens, the "none" paragraph further down */
	build(&a, 20, NULL);
	h = render(&a, NULL, NULL);
	const char *none = strstr(h, "id=\"findings\"");
	banner = strstr(h, "id=\"bottleneck\"");
	cr_assert(none && banner);
	cr_expect_gt(none, banner);
	free(h);
	unbuild(&a);
}

/*
 * The strip marks the concerned iterations, each on its own bar (consecutive
 * ones as one rectangle), not one bar from the first to the last; in a colour
 * that is no category's. Bucketed (3,000 iterations in 2,000 bars): the bars
 * that hold a concerned iteration.
 */
Test(html, strip_marks_only_the_concerned_iterations)
{
	struct an_analysis a;
	build(&a, 20, NULL);
	long it[] = {2, 3, 9, 17};
	add_finding(&a, AN_F_SMALL_FILE_STORM, 1, it, 4);
	char *h = render(&a, NULL, NULL);
	double x[8], w[8], bar = (960.0 - 104 - 12) / 20;
	size_t n = strip_rects(h, 0, x, w, 8);
	cr_assert_eq(n, 3, "iterations 2-3, 9, 17: three marks, got %zu", n);
	const double want_x[] = {2, 9, 17}, want_w[] = {2, 1, 1};
	for (size_t i = 0; i < n; i++) {
		cr_expect(fabs(x[i] - (104 + want_x[i] * bar)) < 0.02, "mark %zu at x=%.2f", i, x[i]);
		cr_expect(fabs(w[i] - want_w[i] * bar) < 0.02, "mark %zu %.2f wide", i, w[i]);
	}
	const char *strip = strstr(h, "class=\"strip\"");
	const char *fill = strstr(strip, "fill=\"");
	cr_assert_not_null(fill);
	for (int c = 0; c < AN_CAT__COUNT; c++)
		cr_expect(strncmp(fill + 6, cat_color[c], 7), "the strip is in %s's colour", an_cat_name[c]);
	free(h);
	unbuild(&a);

	build(&a, 3000, NULL);
	long far[] = {5, 2500};
	add_finding(&a, AN_F_UNPINNED_COPY, 0, far, 2);
	h = render(&a, NULL, NULL);
	n = strip_rects(h, 0, x, w, 8);
	bar = (960.0 - 104 - 12) / REPORT_HTML_MAX_BARS;
	cr_assert_eq(n, 2, "two iterations far apart: two marks, got %zu", n);
	cr_expect(w[0] < 1.01 * bar && w[1] < 1.01 * bar, "one bar each: %.3f, %.3f", w[0], w[1]);
	cr_expect(fabs(x[1] - (104 + (2500.0 * REPORT_HTML_MAX_BARS / 3000) * bar)) < 1.01 * bar,
		  "iteration 2500's mark at x=%.2f", x[1]);
	free(h);
	unbuild(&a);
}

/*
 * 3,000 iterations, a dozen neighbours far above the rest (their bars cut at
 * the top, each with its height in words): no two text labels on one line of
 * the chart overlap. A label's box: its x, its anchor, 6 px a character (the
 * chart's 10-11 px font is narrower). The time axis reads in one unit, 0 as "0".
 */
Test(html, labels_never_overlap_with_3000_iterations)
{
	const size_t n = 3000;
	uint64_t *ms = malloc(n * sizeof(*ms));
	cr_assert_not_null(ms);
	for (size_t i = 0; i < n; i++)
		ms[i] = i >= 1500 && i < 1518 ? 40 + i % 7 : 1;
	struct an_analysis a;
	build(&a, n, ms);
	free(ms);
	char *h = render(&a, NULL, NULL);
	const char *svg = strstr(h, "aria-label=\"breakdown per iteration\""), *svg_end = strstr(svg, "</svg>");
	cr_assert(svg && svg_end);
	size_t nl;
	int zero_ns;
	size_t overlaps = sp_t_svg_label_overlaps(svg, svg_end, 6.0, &nl, &zero_ns);
	cr_expect_eq(overlaps, 0, "%zu pairs of the %zu labels overlap", overlaps, nl);
	cr_expect(!zero_ns, "a time axis label says 0 ns");
	cr_expect(strstr(svg, "class=\"cut\""), "the tall bars are cut and marked");
	free(h);
	unbuild(&a);
}
