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
 *   - an unwritable file is an error.
 *
 * Divided into: 1. building results and checking tags, 2. the tests.
 */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "analyze.h"
#include "report.h"
#include "report_html.h"

/* ---------------------------------------- 1. results and a tag checker */

#define MS 1000000ull

/* n iterations of wall ms[i] milliseconds (1 ms when ms is NULL), split input half, compute half. */
static void build(struct an_analysis *a, size_t n, const uint64_t *ms)
{
	memset(a, 0, sizeof(*a));
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
	free(a->fnd);
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
