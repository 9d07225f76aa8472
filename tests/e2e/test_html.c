/*
 * test_html.c - end-to-end tests of `stepprof analyze --html FILE` on real
 * captures: the synthetic trainer (docs/workloads.md) runs under
 * LD_PRELOAD=libstepprof.so on the simulated GPU, then the analyzer writes the
 * HTML report, which python3's html.parser (an independent parser) reads back:
 *   - every tag the report opens is closed, in order; there is no <script>;
 *   - each category's share is the JSON's of the same analysis, shown to 0.1%;
 *   - the findings' kinds are the JSON's, in order;
 *   - a path containing "<script>" (data directory, trace directory) is escaped:
 *     the parser gets it back as text, the raw file has no "<script";
 *   - the device memory line of a leaking run rises every iteration (the trainer
 *     leaks 8 MiB per iteration);
 *   - "--html -" writes the HTML, and only the HTML, to stdout; an unwritable
 *     FILE is exit status 4 with one error line;
 *   - a two-rank job (two trainers at once, RANK=0/1, compute-bound and
 *     input-bound, as torchrun starts them): one per-rank row each whose six
 *     shares are the JSON's ranks[] doubles, whose pid and bottleneck are the
 *     trainers' own, rank 0 marked as selected (--rank 1: rank 1), and the line
 *     that names the slower rank (by the trainers' own medians) with the JSON's
 *     medians' ratio; a single-process run has no rank table.
 *
 * Divided into: 1. capture and parse helpers, 2. the tests, 3. the multi-rank job.
 */
#include <criterion/criterion.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "testlib.h"
#include "trainerlib.h"
#include "tracegen.h"

/* ---------------------------------------------- 1. capture and parse */

TestSuite(html_e2e, .fini = sp_t_remove_cur_dir, .timeout = 300);

static const char *const cats[] = {
#define SP_CATEGORY(id, name) name,
#include "stepprof/categories.def"
#undef SP_CATEGORY
};

/*
 * Reads an HTML document on stdin; prints one JSON line: the tag-nesting errors,
 * the count of each start tag, the shares (data-value of class="share"), the
 * findings' kinds (data-kind), the bars of the iteration chart, the memory line's
 * points, and the document's text with entities decoded.
 */
static const char checker_py[] =
    "import sys, json\n"
    "from html.parser import HTMLParser\n"
    "VOID = {'area','base','br','col','embed','hr','img','input','link','meta','source','track','wbr'}\n"
    "class P(HTMLParser):\n"
    "    def __init__(s):\n"
    "        super().__init__(convert_charrefs=True)\n"
    "        s.stack=[]; s.errors=[]; s.tags={}; s.shares={}; s.pct={}; s.kinds=[]; s.text=[]; s.bars=-1\n"
    "        s.mem=''; s.cur=None; s.ranks=[]; s.inrow=False\n"
    "    def handle_starttag(s, t, attrs):\n"
    "        a=dict(attrs); s.tags[t]=s.tags.get(t,0)+1\n"
    "        if t not in VOID: s.stack.append(t)\n"
    "        s.cur=None\n"
    "        if a.get('class')=='share': s.shares[a.get('data-cat')]=a.get('data-value'); s.cur=a.get('data-cat')\n"
    "        if 'data-kind' in a: s.kinds.append(a['data-kind'])\n"
    "        if t=='svg' and 'data-bars' in a: s.bars=int(a['data-bars'])\n"
    "        if t=='polyline' and a.get('class')=='memline': s.mem=a.get('points','')\n"
    "        if t=='tr' and 'data-rank' in a:\n"
    "            s.inrow=True; s.ranks.append({'rank':int(a['data-rank']),'pid':int(a['data-pid']),\n"
    "                'selected':int(a['data-selected']),'cls':a.get('class',''),'shares':{},'cells':[]})\n"
    "        if s.inrow and t=='td': s.ranks[-1]['cells'].append('')\n"
    "        if s.inrow and t=='rect' and a.get('class')=='rshare': "
    "s.ranks[-1]['shares'][a['data-cat']]=a['data-value']\n"
    "    def handle_startendtag(s, t, attrs):\n"
    "        s.handle_starttag(t, attrs)\n"
    "        if t not in VOID: s.stack.pop()\n"
    "    def handle_endtag(s, t):\n"
    "        s.cur=None\n"
    "        if t=='tr': s.inrow=False\n"
    "        if t in VOID: return\n"
    "        if not s.stack or s.stack[-1]!=t:\n"
    "            s.errors.append('</%s> closes <%s> at %s' % (t, s.stack[-1] if s.stack else '', s.getpos()))\n"
    "            return\n"
    "        s.stack.pop()\n"
    "    def handle_data(s, d):\n"
    "        s.text.append(d)\n"
    "        if s.cur: s.pct[s.cur]=d\n"
    "        if s.inrow and s.ranks[-1]['cells']: s.ranks[-1]['cells'][-1]+=d\n"
    "p=P(); p.feed(sys.stdin.read()); p.close()\n"
    "if p.stack: p.errors.append('unclosed: ' + ' '.join(p.stack))\n"
    "print(json.dumps({'errors':p.errors,'tags':p.tags,'shares':p.shares,'pct':p.pct,'kinds':p.kinds,\n"
    "    'bars':p.bars,'mem':p.mem,'ranks':p.ranks,'text':''.join(p.text)}))\n";

static struct sp_json *parse_html(const char *html)
{
	char *argv[] = {"/usr/bin/python3", "-c", (char *)checker_py, NULL};
	struct sp_t_result r;
	sp_t_run(&r, argv, NULL, html, 60);
	cr_assert_eq(r.status, 0, "python3 html.parser: exit %d: %s", r.status, r.err);
	struct sp_json *j = sp_json_parse(r.out);
	cr_assert_not_null(j, "checker output is not JSON: %s", r.out);
	sp_t_result_free(&r);
	return j;
}

/* The HTML is well formed enough: balanced tags, no script, the structure we promise. */
static void check_structure(const struct sp_json *h)
{
	struct sp_json *errs = sp_json_get(h, "errors");
	cr_assert_not_null(errs);
	cr_expect_eq(errs->n, 0, "tag nesting: %zu errors, first: %s", errs->n, errs->n ? errs->kids[0].str : "");
	cr_expect_eq(sp_json_num(h, "tags.script", 0), 0, "the report must not contain a <script> element");
	cr_expect_eq(sp_json_num(h, "tags.html", 0), 1);
	cr_expect_eq(sp_json_num(h, "tags.body", 0), 1);
	cr_expect_geq(sp_json_num(h, "tags.svg", 0), 2, "charts are inline SVG");
	cr_expect_geq(sp_json_num(h, "tags.details", 0), 1, "the per-iteration table is behind a <details>");
	cr_expect_eq(sp_json_num(h, "tags.link", 0) + sp_json_num(h, "tags.img", 0) + sp_json_num(h, "tags.iframe", 0),
		     0, "self-contained: no link, img or iframe");
}

/* Run the trainer under the preload into <sp_t_cur_dir>/t<script> (made when unset); the trace directory's path. */
static char *capture(const char *scenario, const char *data_dir)
{
	if (!sp_t_cur_dir)
		sp_t_cur_dir = sp_t_tmpdir("html");
	char tdir[512];
	snprintf(tdir, sizeof(tdir), "%s/t<script>", sp_t_cur_dir);
	char *args[] = {"--scenario", (char *)scenario, "--iters", "12", data_dir ? "--data-dir" : NULL,
			(char *)data_dir, NULL};
	struct sp_t_result r;
	sp_t_run_trainer(&r, tdir, args);
	sp_t_result_free(&r);
	return strdup(tdir);
}

/* ------------------------------------------------------------ 2. tests */

/* The six shares of the HTML (h's shares.<cat>) are the JSON's exact doubles (j's <prefix><cat>); who: for messages. */
static void expect_same_shares(const struct sp_json *j, const char *prefix, const struct sp_json *h, const char *who)
{
	for (int c = 0; c < (int)(sizeof(cats) / sizeof(cats[0])); c++) {
		char key[96];
		snprintf(key, sizeof(key), "%s%s", prefix, cats[c]);
		double want = sp_json_num(j, key, -1);
		snprintf(key, sizeof(key), "shares.%s", cats[c]);
		const char *got = sp_json_str(h, key);
		cr_assert_not_null(got, "%s: no %s share in the HTML", who, cats[c]);
		cr_expect_eq(strtod(got, NULL), want, "%s %s share: HTML %s, JSON %.17g", who, cats[c], got, want);
	}
}

Test(html_e2e, report_matches_the_json_and_escapes_paths)
{
	char data[600];
	/* the data directory's path reaches the report twice: in the command lines and in
	 * small_file_storm's top_directories evidence */
	sp_t_cur_dir = sp_t_tmpdir("html");
	snprintf(data, sizeof(data), "%s/d<script>alert('x')&\"", sp_t_cur_dir);
	cr_assert_eq(mkdir(data, 0700), 0);
	char *tdir = capture("input-bound", data);

	char out[700];
	snprintf(out, sizeof(out), "%s/report.html", sp_t_cur_dir);
	char *argv[] = {(char *)sp_t_build("bin/stepprof"), "analyze", "--json", "--html", out, tdir, NULL};
	struct sp_t_result r;
	sp_t_run(&r, argv, NULL, NULL, 120);
	cr_assert_eq(r.status, 0, "stepprof analyze --json --html: exit %d: %s", r.status, r.err);
	struct sp_json *an = sp_json_parse(r.out);
	cr_assert_not_null(an, "with --html FILE, stdout is still the JSON: %s", r.out);
	size_t len = 0;
	char *html = sp_t_read_file(out, &len);
	cr_assert_not_null(html, "no HTML file written");
	cr_assert(len > 1000 && !strncmp(html, "<!DOCTYPE html>", 15), "not an HTML document");

	struct sp_json *h = parse_html(html);
	check_structure(h);
	/* same analysis, same numbers: the exact double, and the percent shown */
	expect_same_shares(an, "summary.breakdown_fraction.", h, "summary");
	for (int c = 0; c < (int)(sizeof(cats) / sizeof(cats[0])); c++) {
		char key[96], pct[32];
		snprintf(key, sizeof(key), "summary.breakdown_fraction.%s", cats[c]);
		snprintf(pct, sizeof(pct), "%.1f%%", 100.0 * sp_json_num(an, key, -1));
		snprintf(key, sizeof(key), "pct.%s", cats[c]);
		cr_expect_str_eq(sp_json_str(h, key), pct, "%s share shown", cats[c]);
	}
	/* the findings, in the JSON's order; input-bound has a small-file storm */
	struct sp_json *fj = sp_json_get(an, "findings"), *fh = sp_json_get(h, "kinds");
	cr_assert(fj && fh);
	cr_expect_eq(fh->n, fj->n, "findings: HTML %zu, JSON %zu", fh->n, fj->n);
	for (size_t i = 0; i < fj->n && i < fh->n; i++)
		cr_expect_str_eq(fh->kids[i].str, sp_json_str(sp_json_at(fj, i), "kind"));
	int storm = 0;
	for (size_t i = 0; i < fh->n; i++)
		storm |= !strcmp(fh->kids[i].str, "small_file_storm");
	cr_expect(storm, "input-bound: small_file_storm expected among the findings");
	/* every iteration has its bar (12 < REPORT_HTML_MAX_BARS) */
	cr_expect_eq(sp_json_num(h, "bars", -1), sp_json_num(an, "summary.iterations", -2));
	/* one process: no per-rank table (the JSON's ranks[] has its one entry) */
	struct sp_json *hr = sp_json_get(h, "ranks");
	cr_assert_not_null(hr);
	cr_expect_eq(hr->n, 0, "a single-process run shows %zu rank rows", hr->n);
	cr_expect_eq(sp_json_get(an, "ranks") ? sp_json_get(an, "ranks")->n : 0, 1);
	/* escaping: the parser reads the paths back as text; the raw file has no tag of them */
	const char *text = sp_json_str(h, "text");
	cr_assert_not_null(text);
	cr_expect(strstr(text, "d<script>alert('x')&\"") != NULL, "the data directory's path is not in the text");
	cr_expect(strstr(text, "/t<script>") != NULL, "the trace directory's path is not in the text");
	cr_expect(strstr(text, "Ranks:") == NULL, "a single-process run has a rank section");
	cr_expect(strstr(html, "<script") == NULL, "raw <script in the HTML");
	cr_expect(strstr(html, "d&lt;script&gt;alert(&#39;x&#39;)&amp;&quot;") != NULL, "escaped path not found");

	/* an unwritable FILE: one error line, exit 4, the JSON still on stdout */
	sp_t_result_free(&r);
	char bad[700];
	snprintf(bad, sizeof(bad), "%s/no/such/dir/r.html", sp_t_cur_dir);
	char *argv2[] = {(char *)sp_t_build("bin/stepprof"), "analyze", "--html", bad, tdir, NULL};
	sp_t_run(&r, argv2, NULL, NULL, 120);
	cr_expect_eq(r.status, 4, "unwritable --html FILE: exit %d", r.status);
	cr_expect(strstr(r.err, "stepprof: ") && strstr(r.err, "r.html"), "error line: %s", r.err);
	cr_expect(strstr(r.out, "Bottleneck") != NULL, "the text report is still written: %s", r.out);

	sp_t_result_free(&r);
	sp_json_free(h);
	sp_json_free(an);
	free(html);
	free(tdir);
	sp_t_remove_cur_dir();
}

Test(html_e2e, stdout_and_memory_line_of_a_leaking_run)
{
	char *tdir = capture("leaking", NULL);
	char *argv[] = {(char *)sp_t_build("bin/stepprof"), "analyze", "--html", "-", tdir, NULL};
	struct sp_t_result r;
	sp_t_run(&r, argv, NULL, NULL, 120);
	cr_assert_eq(r.status, 0, "stepprof analyze --html -: exit %d: %s", r.status, r.err);
	cr_assert(!strncmp(r.out, "<!DOCTYPE html>", 15), "--html - writes the HTML to stdout: %.200s", r.out);
	/* only the HTML: the text report's first line is not there */
	cr_expect(strstr(r.out, "stepprof analyze: ") == NULL, "text report mixed into the HTML");
	struct sp_json *h = parse_html(r.out);
	check_structure(h);
	int growth = 0;
	struct sp_json *fh = sp_json_get(h, "kinds");
	for (size_t i = 0; fh && i < fh->n; i++)
		growth |= !strcmp(fh->kids[i].str, "memory_growth");
	cr_expect(growth, "leaking: memory_growth expected among the findings");
	/* 8 MiB leaked per iteration: each point of the peak line is higher (SVG y smaller) than the last */
	const char *pts = sp_json_str(h, "mem");
	cr_assert(pts && *pts, "no device memory line");
	int n = 0;
	double prev_y = INFINITY;
	for (const char *p = pts; *p;) {
		char *end;
		strtod(p, &end);
		if (end == p || *end != ',')
			break;
		double y = strtod(end + 1, &end);
		cr_expect_lt(y, prev_y, "memory point %d at y=%.2f, the previous at %.2f: the leak must rise", n, y,
			     prev_y);
		prev_y = y;
		n++;
		p = end;
		while (*p == ' ')
			p++;
	}
	cr_expect_eq(n, 12, "one memory point per iteration: %d", n);
	sp_json_free(h);
	sp_t_result_free(&r);
	free(tdir);
	sp_t_remove_cur_dir();
}


/*
 * Findings first: for the leaking scenario (a critical memory_growth) the first
 * finding card comes before the bottleneck banner in the HTML, and the text
 * report's findings before its bottleneck sentence. The strip under the chart
 * covers the concerned iterations only: per finding, its marks' total width is
 * the JSON's count of concerned iterations times a bar's width (12 bars).
 */
Test(html_e2e, leaking_run_opens_with_its_critical_finding)
{
	char *tdir = capture("leaking", NULL);
	char *argv[] = {(char *)sp_t_build("bin/stepprof"), "analyze", "--html", "-", tdir, NULL};
	struct sp_t_result r, t, j;
	sp_t_run(&r, argv, NULL, NULL, 120);
	cr_assert_eq(r.status, 0, "stepprof analyze --html -: exit %d: %s", r.status, r.err);
	const char *card = strstr(r.out, "<article id=\"finding-0\" class=\"finding sev-critical\" "
					 "data-kind=\"memory_growth\"");
	const char *banner = strstr(r.out, "<section id=\"bottleneck\"");
	cr_assert(card && banner, "a critical memory_growth card and the bottleneck banner");
	cr_expect_lt(card, banner, "the first finding card comes before the bottleneck banner");
	char *targv[] = {(char *)sp_t_build("bin/stepprof"), "analyze", tdir, NULL};
	sp_t_run(&t, targv, NULL, NULL, 120);
	cr_assert_eq(t.status, 0, "%s", t.err);
	const char *crit = strstr(t.out, "[critical] memory_growth"), *bn = strstr(t.out, "\nBottleneck: ");
	cr_assert(crit && bn, "%s", t.out);
	cr_expect_lt(crit, bn, "the text report names the critical finding above the bottleneck");
	char *jargv[] = {(char *)sp_t_build("bin/stepprof"), "analyze", "--json", tdir, NULL};
	sp_t_run(&j, jargv, NULL, NULL, 120);
	cr_assert_eq(j.status, 0, "%s", j.err);
	struct sp_json *js = sp_json_parse(j.out);
	cr_assert_not_null(js);
	double nit = sp_json_num(js, "summary.iterations", 0), bar = (960.0 - 104 - 12) / nit;
	struct sp_json *fnd = sp_json_get(js, "findings");
	cr_assert(fnd && fnd->n >= 1);
	for (size_t k = 0; k < fnd->n; k++) {
		char key[80];
		snprintf(key, sizeof(key), "<a href=\"#finding-%zu\" class=\"strip\"", k);
		const char *p = strstr(r.out, key), *end = p ? strstr(p, "</a>") : NULL;
		cr_assert(p && end, "no strip for finding %zu", k);
		double total = 0, x, w;
		for (const char *q = strstr(p, "<rect "); q && q < end; q = strstr(q + 1, "<rect ")) {
			cr_assert_eq(sscanf(q, "<rect x=\"%lf\" y=\"%*f\" width=\"%lf\"", &x, &w), 2);
			total += w;
		}
		double want = sp_json_num(sp_json_at(fnd, k), "iterations", -1) * bar;
		cr_expect(fabs(total - want) < 0.05, "finding %zu: strip %.2f px wide, %.2f for its iterations", k,
			  total, want);
	}
	sp_json_free(js);
	sp_t_result_free(&j);
	sp_t_result_free(&t);
	sp_t_result_free(&r);
	free(tdir);
	sp_t_remove_cur_dir();
}

/*
 * A 3,000-iteration run written by gentrace (step marks, bucketed into 2,000
 * bars): no two labels of the iteration chart or of the memory chart overlap
 * (boxes from the SVG's coordinates, 6 px a character), and no time label
 * reads "0 ns".
 */
Test(html_e2e, labels_of_a_3000_iteration_report_never_overlap)
{
	if (!sp_t_cur_dir)
		sp_t_cur_dir = sp_t_tmpdir("html");
	char tdir[512];
	snprintf(tdir, sizeof(tdir), "%s/g3k", sp_t_cur_dir);
	struct sp_t_result g, r;
	char *gargv[] = {(char *)sp_t_build("tests/bin/gentrace"), tdir, "200000", "--iters", "3000", "--markers",
			 "step", NULL};
	cr_assert_eq(sp_t_run(&g, gargv, NULL, NULL, 120), 0, "gentrace: %s", g.err);
	sp_t_result_free(&g);
	char *argv[] = {(char *)sp_t_build("bin/stepprof"), "analyze", "--html", "-", tdir, NULL};
	sp_t_run(&r, argv, NULL, NULL, 120);
	cr_assert_eq(r.status, 0, "%s", r.err);
	cr_assert(strstr(r.out, "3000 iterations in 2000 bars"), "bucketed");
	size_t charts = 0;
	for (const char *svg = strstr(r.out, "<svg class=\"chart\""); svg; svg = strstr(svg + 1, "<svg class=\"chart\"")) {
		const char *end = strstr(svg, "</svg>");
		cr_assert_not_null(end);
		size_t nl;
		int zero_ns;
		size_t ov = sp_t_svg_label_overlaps(svg, end, 6.0, &nl, &zero_ns);
		cr_expect_eq(ov, 0, "chart %zu: %zu pairs of its %zu labels overlap", charts, ov, nl);
		cr_expect(!zero_ns, "chart %zu: a label says 0 ns", charts);
		charts++;
	}
	cr_expect_geq(charts, 2, "the share bar and the iteration chart at least");
	sp_t_result_free(&r);
	sp_t_remove_cur_dir();
}

/*
 * A trace's strings and the operands are shown, never passed through: a command
 * line with control characters (C0, C1) and bytes that are not UTF-8, in a
 * directory whose name is not UTF-8 either, gives a document that is all UTF-8
 * (as its <meta charset> says) with those bytes as \xNN; U+2028 is a character
 * and stays as it is.
 */
Test(html_e2e, controls_and_bytes_not_utf8_are_shown_as_escapes)
{
	char *base = sp_t_tmpdir("html");
	char dir[600], file[700];
	snprintf(dir, sizeof(dir), "%s/t\xfe\xc2\x9b", base);
	cr_assert_eq(mkdir(dir, 0700), 0);
	snprintf(file, sizeof(file), "%s/n.5.sptrace", dir);
	struct sp_tg_opts o = {.pid = 5, .ppid = 1, .rank = -1, .cmdline = "python \xff\xc2\x9b[31m x\x01 \xe2\x80\xa8ok"};
	struct sp_tg *g = sp_tg_create_opts(file, &o);
	SP_TG_ADD(g, 5, SP_K_STEP, SP_API_stepprof_step, 1000000000000ull, 1000000000000ull, {SP_F_VALUE, 0});
	cr_assert_eq(sp_tg_finish(g), 0);

	char *argv[] = {(char *)sp_t_build("bin/stepprof"), "analyze", "--html", "-", dir, NULL};
	struct sp_t_result r;
	sp_t_run(&r, argv, NULL, NULL, 120);
	cr_assert_eq(r.status, 0, "exit %d: %s", r.status, r.err);
	cr_expect(strstr(r.out, "python \\xff\\xc2\\x9b[31m x\\x01 \xe2\x80\xa8ok</code>"), "%s", r.out);
	cr_expect(strstr(r.out, "/t\\xfe\\xc2\\x9b</code>"), "%s", r.out);
	char *py[] = {"/usr/bin/python3", "-c",
		      "import sys\nb = sys.stdin.buffer.read()\nt = b.decode('utf-8')\n"
		      "bad = [hex(ord(c)) for c in t if 0x80 <= ord(c) < 0xa0 or (ord(c) < 0x20 and c not in '\\t\\n')]\n"
		      "sys.exit('controls: %s' % bad if bad else 0)\n",
		      NULL};
	struct sp_t_result v;
	sp_t_run(&v, py, NULL, r.out, 60);
	cr_expect_eq(v.status, 0, "the HTML is not clean UTF-8: %s", v.err);
	sp_t_result_free(&v);
	sp_t_result_free(&r);
	free(argv[0]);
	sp_t_rmrf(base);
	free(base);
}

/*
 * An HTML report that cannot be written whole (here the file size limit stops it
 * after a few KiB) leaves no half document under its name, and the report already
 * there stays; the text report is still on stdout, the error one line, exit 4.
 */
Test(html_e2e, a_failed_write_keeps_the_old_report)
{
	char *tdir = capture("compute-bound", NULL);
	char out[600], listing[700];
	snprintf(out, sizeof(out), "%s/report.html", sp_t_cur_dir);
	cr_assert_eq(sp_t_write_file(out, "OLD\n", 4), 0);
	char *sp = (char *)sp_t_build("bin/stepprof");
	char *argv[] = {"/bin/sh", "-c", "ulimit -f 4; trap '' XFSZ; exec \"$@\"", "sh", sp, "analyze", "--html", out,
			tdir, NULL};
	struct sp_t_result r;
	sp_t_run(&r, argv, NULL, NULL, 120);
	cr_expect_eq(r.status, 4, "exit %d: %s", r.status, r.err);
	cr_expect(strstr(r.err, "report.html: cannot write the HTML report"), "%s", r.err);
	cr_expect(strchr(r.err, '\n') && strchr(r.err, '\n')[1] == 0, "not one line: %s", r.err);
	cr_expect(strstr(r.out, "stepprof analyze: "), "the text report: %s", r.out);
	char *now = sp_t_read_file(out, NULL);
	cr_expect(now && !strcmp(now, "OLD\n"), "the old report was replaced by: %.80s", now ? now : "(nothing)");
	free(now);
	sp_t_result_free(&r);
	/* and no temporary left beside it */
	snprintf(listing, sizeof(listing), "ls -a '%s' | grep -c tmp", sp_t_cur_dir);
	char *ls[] = {"/bin/sh", "-c", listing, NULL};
	sp_t_run(&r, ls, NULL, NULL, 30);
	cr_expect_str_eq(r.out, "0\n", "a temporary file stayed");
	sp_t_result_free(&r);
	free(sp);
	free(tdir);
}

/*
 * `analyze --html F DIR | head`: the reader of stdout goes away and the next write
 * there ends stepprof with SIGPIPE. F is written before the stdout report, so it
 * is complete all the same (it was never written: the text of 1000 iterations
 * filled the pipe first).
 */
Test(html_e2e, the_file_is_written_before_stdout_can_end_the_run)
{
	char *base = sp_t_tmpdir("html");
	char tdir[600], out[600], cmd[2400];
	snprintf(tdir, sizeof(tdir), "%s/trace", base);
	snprintf(out, sizeof(out), "%s/r.html", base);
	char *gen = (char *)sp_t_build("tests/bin/gentrace"), *sp = (char *)sp_t_build("bin/stepprof");
	char *ga[] = {gen, tdir, "20000", "--iters", "1000", NULL};
	struct sp_t_result r;
	cr_assert_eq(sp_t_run(&r, ga, NULL, NULL, 120), 0, "gentrace: %s", r.err);
	sp_t_result_free(&r);
	snprintf(cmd, sizeof(cmd), "'%s' analyze --all --html '%s' '%s' | head -c 1 >/dev/null", sp, out, tdir);
	char *sh[] = {"/bin/sh", "-c", cmd, NULL};
	sp_t_run(&r, sh, NULL, NULL, 120);
	sp_t_result_free(&r);
	char *html = sp_t_read_file(out, NULL);
	cr_assert_not_null(html, "no HTML report");
	size_t n = strlen(html);
	cr_expect(n > 7 && !strcmp(html + n - 8, "</html>\n"), "a cut report: ...%s", html + (n > 40 ? n - 40 : 0));
	free(html);
	free(gen);
	free(sp);
	sp_t_rmrf(base);
	free(base);
}
/* ------------------------------------------------- 3. the multi-rank job */

/*
 * Two trainers at the same time into <sp_t_cur_dir>/t<script>, as torchrun starts the
 * ranks of a node: rank 0 compute-bound, rank 1 input-bound. truth[k]: rank k's
 * own JSON line. Returns the trace directory.
 */
static char *capture_two_ranks(struct sp_json **truth)
{
	static const char *const sc[2] = {"compute-bound", "input-bound"};
	sp_t_cur_dir = sp_t_tmpdir("html");
	return sp_t_run_ranks(sp_t_cur_dir, "t<script>", 2, sc, 12, truth);
}

/* stepprof analyze --json --html FILE [--rank R] DIR: the JSON document and the parsed HTML. */
static void analyze_both(const char *tdir, const char *rank, struct sp_json **an, struct sp_json **h)
{
	char out[700];
	snprintf(out, sizeof(out), "%s/ranks.html", sp_t_cur_dir);
	/* options before the directory */
	char *argv[9] = {(char *)sp_t_build("bin/stepprof"), "analyze", "--json", "--html", out};
	int k = 5;
	if (rank) {
		argv[k++] = "--rank";
		argv[k++] = (char *)rank;
	}
	argv[k++] = (char *)tdir;
	argv[k] = NULL;
	struct sp_t_result r;
	sp_t_run(&r, argv, NULL, NULL, 120);
	cr_assert_eq(r.status, 0, "stepprof analyze --json --html%s%s: exit %d: %s", rank ? " --rank " : "",
		     rank ? rank : "", r.status, r.err);
	*an = sp_json_parse(r.out);
	cr_assert_not_null(*an, "not JSON: %s", r.out);
	sp_t_result_free(&r);
	char *html = sp_t_read_file(out, NULL);
	cr_assert_not_null(html, "no HTML file written");
	cr_expect(strstr(html, "<script") == NULL, "raw <script in the HTML");
	*h = parse_html(html);
	free(html);
	check_structure(*h);
}

/* Each HTML rank row against the JSON's ranks[] (same order) and the trainers' ground truth. */
static void expect_rank_rows(struct sp_json *an, struct sp_json *h, struct sp_json **truth, int selected_rank)
{
	struct sp_json *rj = sp_json_get(an, "ranks"), *rh = sp_json_get(h, "ranks");
	cr_assert(rj && rh);
	cr_assert_eq(rj->n, 2, "JSON ranks[]: %zu entries", rj->n);
	cr_assert_eq(rh->n, rj->n, "HTML rank rows: %zu, JSON ranks[]: %zu", rh->n, rj->n);
	int nsel = 0;
	for (size_t i = 0; i < rj->n; i++) {
		struct sp_json *x = sp_json_at(rj, i), *y = sp_json_at(rh, i);
		int rank = (int)sp_json_num(x, "rank", -2);
		cr_assert(rank == 0 || rank == 1, "JSON rank %d", rank);
		cr_expect_eq(sp_json_num(y, "rank", -3), rank, "row %zu", i);
		/* pid: the trainer's own, in the HTML and the JSON */
		cr_expect_eq(sp_json_num(y, "pid", -1), sp_json_num(truth[rank], "pid", -2), "rank %d: HTML pid", rank);
		cr_expect_eq(sp_json_num(x, "pid", -1), sp_json_num(truth[rank], "pid", -2), "rank %d: JSON pid", rank);
		/* the six shares: the JSON's exact doubles */
		char who[32];
		snprintf(who, sizeof(who), "rank %d", rank);
		expect_same_shares(x, "breakdown_fraction.", y, who);
		/* cells: mark, rank, pid, iterations, median wall, shares, bottleneck */
		struct sp_json *cells = sp_json_get(y, "cells");
		cr_assert(cells && cells->n == 7, "rank %d: %zu cells", rank, cells ? cells->n : 0);
		cr_expect_eq(strtod(cells->kids[3].str, NULL), sp_json_num(x, "iterations", -1), "rank %d iterations",
			     rank);
		cr_expect_eq(strtod(cells->kids[3].str, NULL), sp_json_num(truth[rank], "totals.iterations", -1),
			     "rank %d: iterations %s, the trainer made %g", rank, cells->kids[3].str,
			     sp_json_num(truth[rank], "totals.iterations", -1));
		cr_expect_str_eq(cells->kids[6].str, sp_json_str(x, "bottleneck"), "rank %d bottleneck", rank);
		cr_expect_str_eq(cells->kids[6].str, sp_json_str(truth[rank], "summary.bottleneck"),
				 "rank %d bottleneck against the trainer's own", rank);
		/* the selected rank: marked in the attribute, the class and the visible text */
		int sel = rank == selected_rank;
		cr_expect_eq(sp_json_num(y, "selected", -1), sel, "rank %d data-selected", rank);
		cr_expect_eq(strstr(sp_json_str(y, "cls"), "selected") != NULL, sel, "rank %d class", rank);
		cr_expect_eq(strstr(cells->kids[0].str, "selected") != NULL, sel, "rank %d mark: '%s'", rank,
			     cells->kids[0].str);
		nsel += sel;
	}
	cr_expect_eq(nsel, 1, "rank %d is not among the rows", selected_rank);
	/* the slower rank by the trainers' own medians (44 ms compute-bound against 5.5 ms), named with
	 * the JSON's medians' ratio */
	int slow =
	    sp_json_num(truth[1], "summary.wall_ns_median", 0) > sp_json_num(truth[0], "summary.wall_ns_median", 0);
	double ms = 0, mf = 0;
	for (size_t i = 0; i < rj->n; i++) {
		struct sp_json *x = sp_json_at(rj, i);
		if (sp_json_num(x, "rank", -1) == slow)
			ms = sp_json_num(x, "wall_ns_median", 0);
		else
			mf = sp_json_num(x, "wall_ns_median", 0);
	}
	cr_assert(mf > 0 && ms >= 1.1 * mf, "JSON medians: slower %g, faster %g", ms, mf);
	char line[160];
	snprintf(line, sizeof(line), "Slowest median wall: rank %d (pid %.0f) at ", slow,
		 sp_json_num(truth[slow], "pid", -1));
	const char *text = sp_json_str(h, "text");
	cr_assert_not_null(text);
	const char *at = strstr(text, line);
	cr_expect_not_null(at, "no '%s' in the text", line);
	snprintf(line, sizeof(line), "%.0f%% above the fastest, rank %d (pid %.0f)", 100.0 * (ms / mf - 1.0), !slow,
		 sp_json_num(truth[!slow], "pid", -1));
	cr_expect(at && strstr(at, line), "no '%s' after the slowest rank", line);
	cr_expect_not_null(strstr(text, "Ranks: 2 trainer processes"));
}

Test(html_e2e, two_ranks_table_matches_the_json, .timeout = 300)
{
	struct sp_json *truth[2], *an, *h;
	char *tdir = capture_two_ranks(truth);
	cr_assert_str_eq(sp_json_str(truth[0], "summary.bottleneck"), "compute");
	cr_assert_str_eq(sp_json_str(truth[1], "summary.bottleneck"), "input");

	analyze_both(tdir, NULL, &an, &h);
	expect_rank_rows(an, h, truth, 0); /* default: the lowest rank */
	sp_json_free(an);
	sp_json_free(h);

	analyze_both(tdir, "1", &an, &h);
	expect_rank_rows(an, h, truth, 1);
	/* the rest of the report is rank 1's: its shares are those of its row */
	struct sp_json *rh = sp_json_get(h, "ranks");
	for (size_t i = 0; rh && i < rh->n; i++) {
		struct sp_json *y = sp_json_at(rh, i);
		if (sp_json_num(y, "rank", -1) != 1)
			continue;
		for (int c = 0; c < (int)(sizeof(cats) / sizeof(cats[0])); c++) {
			char key[64];
			snprintf(key, sizeof(key), "shares.%s", cats[c]);
			cr_expect_str_eq(sp_json_str(y, key), sp_json_str(h, key), "--rank 1: %s", cats[c]);
		}
	}
	sp_json_free(an);
	sp_json_free(h);
	for (int k = 0; k < 2; k++)
		sp_json_free(truth[k]);
	free(tdir);
	sp_t_remove_cur_dir();
}
