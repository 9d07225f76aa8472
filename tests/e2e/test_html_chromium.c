/*
 * test_html_chromium.c - the HTML report as a browser lays it out: Debian's
 * chromium (installed by the set-up) opens a copy of the report, headless, in
 * a 1280x900 window, with a script added at the end of the body that measures
 * what the reader sees (getBoundingClientRect) and writes it into an attribute
 * of the body; --dump-dom prints the document after the script ran.
 *   - the leaking run: the first (critical) finding card is above the
 *     bottleneck banner and inside the first screen;
 *   - a 3,000-iteration run: no two labels of a chart overlap as rendered (the
 *     browser's own font metrics, not an estimate), and none reads "0 ns".
 * Skipped, with the reason, where chromium is not installed.
 */
#include <criterion/criterion.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "testlib.h"
#include "trainerlib.h"

#define CHROMIUM "/usr/bin/chromium"

TestSuite(html_chromium, .fini = sp_t_remove_cur_dir);

/* What the page measures: in data-layout="...", space-separated name=value. */
static const char measure_js[] =
    "<script>(function(){"
    "function top(id){var e=document.getElementById(id);return e?Math.round(e.getBoundingClientRect().top):-1;}"
    "var ov=0,n=0,zero=0;"
    "document.querySelectorAll('svg.chart').forEach(function(svg){"
    " var b=[];"
    " svg.querySelectorAll('text').forEach(function(t){"
    "  var s=(t.textContent||'').trim(),r=t.getBoundingClientRect();"
    "  if(!s||r.width<=0||r.height<=0)return;"
    "  if(s==='0 ns')zero++;"
    "  b.push(r);n++;});"
    " for(var i=0;i<b.length;i++)for(var j=i+1;j<b.length;j++){"
    "  var p=b[i],q=b[j];"
    "  if(p.left+0.5<q.right&&q.left+0.5<p.right&&p.top+0.5<q.bottom&&q.top+0.5<p.bottom)ov++;}"
    "});"
    "document.body.setAttribute('data-layout','finding='+top('finding-0')+' banner='+top('bottleneck')+"
    "' labels='+n+' overlaps='+ov+' zero_ns='+zero);"
    "})();</script>";

/* Chromium installed, or the test is skipped with the reason. */
static void need_chromium(void)
{
	if (access(CHROMIUM, X_OK) != 0)
		cr_skip_test(CHROMIUM " not installed (scripts/install-deps.sh installs it)");
}

/*
 * The report html (a file) laid out by chromium: the value of each name in
 * names[] into vals[] (-1 when missing).
 */
static void layout(const char *html, const char *const *names, long *vals, size_t n)
{
	size_t len;
	char *doc = sp_t_read_file(html, &len);
	cr_assert_not_null(doc, "%s: not readable", html);
	char *body = strstr(doc, "</body>");
	cr_assert_not_null(body, "%s: no </body>", html);
	char page[1024];
	snprintf(page, sizeof(page), "%s.measured.html", html);
	FILE *f = fopen(page, "w");
	cr_assert_not_null(f);
	fwrite(doc, 1, (size_t)(body - doc), f);
	fputs(measure_js, f);
	fputs(body, f);
	fclose(f);
	free(doc);
	char url[1100], profile[1100];
	snprintf(url, sizeof(url), "file://%s", page);
	snprintf(profile, sizeof(profile), "--user-data-dir=%s.profile", html);
	char *argv[] = {CHROMIUM,
			"--headless",
			"--no-sandbox", /* the tests may run as root */
			"--disable-gpu",
			"--no-first-run",
			profile,
			"--window-size=1280,900",
			"--virtual-time-budget=5000",
			"--dump-dom",
			url,
			NULL};
	char *env[] = {"HOME=/tmp", NULL};
	struct sp_t_result r;
	sp_t_run(&r, argv, env, NULL, 120);
	cr_assert_eq(r.status, 0, "chromium --dump-dom: exit %d: %.400s", r.status, r.err);
	const char *at = strstr(r.out, "data-layout=\"");
	cr_assert_not_null(at, "the page's script did not run (no data-layout in the DOM): %.300s", r.err);
	at += strlen("data-layout=\"");
	for (size_t i = 0; i < n; i++) {
		char key[64];
		snprintf(key, sizeof(key), "%s=", names[i]);
		const char *p = strstr(at, key);
		vals[i] = p ? strtol(p + strlen(key), NULL, 10) : -1;
	}
	sp_t_note("html_chromium: %s: %.*s", strrchr(html, '/') + 1, (int)strcspn(at, "\""), at);
	sp_t_result_free(&r);
}

/* The test's directory, with its trace directory tdir and report file html (name.html) in it. */
static void paths(const char *name, char *tdir, size_t tn, char *html, size_t hn)
{
	need_chromium();
	sp_t_cur_dir = sp_t_tmpdir("html-chromium");
	snprintf(tdir, tn, "%s/%s", sp_t_cur_dir, name);
	snprintf(html, hn, "%s/%s.html", sp_t_cur_dir, name);
}

static void report(const char *tdir, const char *html)
{
	char *argv[] = {(char *)sp_t_build("bin/stepprof"), "analyze", "--html", (char *)html, (char *)tdir, NULL};
	struct sp_t_result r;
	sp_t_run(&r, argv, NULL, NULL, 120);
	cr_assert_eq(r.status, 0, "stepprof analyze --html: exit %d: %s", r.status, r.err);
	sp_t_result_free(&r);
}

Test(html_chromium, the_leaking_runs_critical_finding_is_seen_first, .timeout = 180)
{
	char tdir[512], html[600];
	paths("leaking", tdir, sizeof(tdir), html, sizeof(html));
	char *args[] = {"--scenario", "leaking", NULL};
	struct sp_t_result r;
	sp_t_run_trainer(&r, tdir, args);
	sp_t_result_free(&r);
	report(tdir, html);
	static const char *const names[] = {"finding", "banner"};
	long v[2];
	layout(html, names, v, 2);
	cr_assert_geq(v[0], 0, "no finding card rendered");
	cr_assert_geq(v[1], 0, "no bottleneck banner rendered");
	cr_expect_lt(v[0], v[1], "the finding card (top %ld px) is above the bottleneck banner (%ld px)", v[0], v[1]);
	cr_expect_lt(v[0], 900, "the finding card's top (%ld px) is within the first screen (900 px)", v[0]);
}

Test(html_chromium, labels_of_a_3000_iteration_report_never_overlap_as_rendered, .timeout = 180)
{
	char tdir[512], html[600];
	paths("g3k", tdir, sizeof(tdir), html, sizeof(html));
	struct sp_t_result g;
	char *gargv[] = {(char *)sp_t_build("tests/bin/gentrace"), tdir, "200000", "--iters", "3000", "--markers",
			 "step", NULL};
	cr_assert_eq(sp_t_run(&g, gargv, NULL, NULL, 120), 0, "gentrace: %s", g.err);
	sp_t_result_free(&g);
	report(tdir, html);
	static const char *const names[] = {"labels", "overlaps", "zero_ns"};
	long v[3];
	layout(html, names, v, 3);
	cr_assert_gt(v[0], 10, "%ld labels rendered in the charts", v[0]);
	cr_expect_eq(v[1], 0, "%ld pairs of the %ld rendered labels overlap", v[1], v[0]);
	cr_expect_eq(v[2], 0, "%ld labels read \"0 ns\"", v[2]);
}
