/*
 * report_html.c - the HTML report of `stepprof analyze --html FILE`: the page
 * (its head, inline CSS, the order of the sections) and the helpers that every
 * section writes with.
 *
 * One self-contained file: inline CSS and inline SVG drawn here, no script, no
 * font or image fetched, so it can be mailed, attached to a ticket or opened on
 * an air-gapped cluster. Every number comes from the analysis results that the
 * text and JSON reports print (struct an_analysis; quantiles, shares and the
 * bottleneck sentence from report.h), so the three outputs agree.
 * Every string that comes from a trace (command lines, paths in evidence, call
 * sites) or from the command line is escaped: a trace is untrusted input.
 *
 * Output size is bounded by the number of processes and findings, not by the
 * run's length: beyond REPORT_HTML_MAX_BARS iterations the charts aggregate
 * consecutive iterations into buckets (mean stack, maximum wall and memory),
 * and the table holds the first and last 10 iterations unless --all is given.
 *
 * The sections are written by report_html_tables.c (the run, the ranks, the
 * bottleneck and categories, the findings, the per-iteration table) and
 * report_html_charts.c (the per-iteration SVG charts); see report_html_int.h.
 *
 * Divided into:
 *   1. output helpers: escaping, numbers;
 *   2. the document and the file.
 */
#include "report_html.h"
#include "report_html_int.h"
#include "util.h"

#include <errno.h>
#include <string.h>

/* Category colours (colour-blind friendly Tableau 10), in enum an_cat order. */
const char *const cat_color[AN_CAT__COUNT] = {"#e15759", "#f28e2b", "#4e79a7", "#76b7b2",
					      "#edc948", "#b07aa1", "#bab0ac"};

/* ----------------------------------------------------- 1. output helpers */

/*
 * Text or attribute value, escaped: & < > " ' become entities, and control
 * characters (C0 but tab and newline, DEL, C1: HTML forbids them) and bytes that
 * are not UTF-8 (the document says it is UTF-8) are shown as \xNN, as on the
 * terminal, so nothing from a trace can open a tag, close an attribute or hide in
 * the output.
 */
void esc(FILE *f, const char *str)
{
	const unsigned char *s = (const unsigned char *)(str ? str : "");
	size_t n = strlen((const char *)s);
	for (size_t i = 0; i < n; i++) {
		unsigned char c = s[i];
		size_t l;
		switch (c) {
		case '&':
			fputs("&amp;", f);
			break;
		case '<':
			fputs("&lt;", f);
			break;
		case '>':
			fputs("&gt;", f);
			break;
		case '"':
			fputs("&quot;", f);
			break;
		case '\'':
			fputs("&#39;", f);
			break;
		case '\t':
		case '\n':
			fputc(c, f);
			break;
		default:
			/* one whole character: a hidden one as \xNN, else its UTF-8 bytes */
			l = util_put_unsafe(f, s + i, n - i);
			if (!l) {
				l = util_utf8_len(s + i, n - i);
				fwrite(s + i, 1, l, f);
			}
			i += l - 1;
		}
	}
}

const char *fns(uint64_t ns, char *buf, size_t len)
{
	return util_fmt_ns(ns, buf, len);
}

const char *fbytes(uint64_t b, char *buf, size_t len)
{
	return util_fmt_bytes(b, buf, len);
}

/* ------------------------------------------------ 2. document and file */

static const char css[] =
    "body{font:14px/1.45 system-ui,-apple-system,'Segoe UI',Roboto,sans-serif;color:#222;background:#fff;"
    "max-width:1040px;margin:0 auto;padding:16px 24px 48px}"
    "h1{font-size:22px;margin:8px 0 2px}h2{font-size:17px;margin:28px 0 8px;border-bottom:1px solid #ddd;"
    "padding-bottom:4px}h3{font-size:15px;margin:0 0 4px}"
    ".sub{color:#666;margin:0 0 12px;word-break:break-all}"
    "code{font:12px/1.4 ui-monospace,SFMono-Regular,Menlo,Consolas,monospace;word-break:break-all}"
    "table{border-collapse:collapse;margin:6px 0}th,td{padding:3px 8px;text-align:right;vertical-align:top}"
    ".kv th{text-align:left;color:#555;font-weight:600;white-space:nowrap}.kv td{text-align:left}"
    ".grid{font-size:13px}.grid thead th{border-bottom:2px solid #ccc;white-space:nowrap}"
    ".grid tbody tr:nth-child(even){background:#f6f6f6}.grid td{font-variant-numeric:tabular-nums;"
    "white-space:nowrap}.grid .l{text-align:left;white-space:normal}.gap td{text-align:center;color:#888}"
    ".note{color:#666;font-size:12px}.warn{color:#b04000}"
    ".swatch{display:inline-block;width:11px;height:11px;border-radius:2px;margin-right:5px;"
    "vertical-align:-1px}"
    ".bottleneck{background:#fff8e6;border-left:5px solid #f28e2b;padding:6px 14px;margin:16px 0;font-size:15px}"
    ".chart{width:100%;height:auto;display:block}.chart .tick{font-size:11px;fill:#555}.chart "
    ".small{font-size:10px}.chart .cut{fill:#222}"
    ".chart .on{font-size:12px;fill:#fff;font-weight:600}.chart .axis{stroke:#888}"
    ".chart .grid{stroke:#e4e4e4}.chart .hover{fill:transparent}.chart .hover:hover{fill:rgba(0,0,0,.08)}"
    ".chart .maxline{fill:none;stroke:#777;stroke-width:.5;stroke-opacity:.45}.chart .memline{fill:none;stroke:#4e79a7;"
    "stroke-width:2}.chart .mempt{fill:#4e79a7}.chart .cap{stroke:#e15759;stroke-dasharray:6 4}"
    ".legend span{margin-right:12px;white-space:nowrap}"
    ".finding{border:1px solid #ddd;border-left:5px solid #888;border-radius:3px;padding:8px 14px;"
    "margin:10px 0}.finding .iters{color:#555;margin:0 0 6px}.finding .advice{margin:6px 0}"
    ".badge{display:inline-block;color:#fff;border-radius:3px;padding:0 6px;font-size:12px;"
    "text-transform:uppercase;vertical-align:1px}"
    ".sev-info{border-left-color:#4e79a7}.sev-info .badge{background:#4e79a7}"
    ".sev-warning{border-left-color:#f28e2b}.sev-warning .badge{background:#f28e2b}"
    ".sev-critical{border-left-color:#e15759}.sev-critical .badge{background:#e15759}"
    ".evidence caption,.sites-h{text-align:left;color:#555;font-weight:600;margin:6px 0 2px}"
    ".sites{margin:0;padding-left:24px}"
    "details>summary{cursor:pointer;font-weight:600;margin:6px 0}"
    ".rankbar{width:200px;height:12px;display:block;margin-top:3px}.ranks .mark{color:#f28e2b;font-weight:600}"
    ".ranks tr.selected td{font-weight:600}.rank-spread{margin:6px 0}"
    "@media print{.chart .hover{display:none}}"
    "@media (prefers-color-scheme:dark){body{color:#ddd;background:#1b1b1b}.sub,.note,.kv th,.finding .iters,"
    ".evidence caption,.sites-h{color:#aaa}h2{border-color:#444}.grid thead th{border-color:#555}"
    ".grid tbody tr:nth-child(even){background:#262626}.bottleneck{background:#3a2e16}.finding{border-color:#444}"
    ".chart .tick{fill:#bbb}.chart .grid{stroke:#333}.chart .cut{fill:#ddd}.chart .maxline{stroke:#bbb}"
    ".chart .hover:hover{fill:rgba(255,255,255,.1)}.warn{color:#f0a060}}";

int report_html(FILE *f, const struct an_analysis *a, const struct report_html_opts *o)
{
	fputs("<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n"
	      "<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\n"
	      "<meta name=\"generator\" content=\"stepprof analyze\">\n<title>stepprof: ",
	      f);
	if (o && o->ninputs)
		esc(f, o->inputs[0]);
	else
		fputs("analysis", f);
	fprintf(f, "</title>\n<style>%s</style>\n</head>\n<body>\n<header>\n<h1>stepprof analysis</h1>\n", css);
	if (o && o->ninputs) {
		fputs("<p class=\"sub\">", f);
		for (size_t i = 0; i < o->ninputs; i++) {
			fputs(i ? " " : "", f);
			fputs("<code>", f);
			esc(f, o->inputs[i]);
			fputs("</code>", f);
		}
		fputs("</p>\n", f);
	}
	fputs("</header>\n<main>\n", f);
	/* findings first, the most severe on top, then the bottleneck: what to fix before how the time splits */
	if (a->nfnd)
		html_findings(f, a);
	html_bottleneck(f, a);
	html_run(f, a);
	if (a->nranks > 1)
		html_ranks(f, a);
	if (a->nit) {
		html_categories(f, a);
		html_iter_chart(f, a);
		html_mem_chart(f, a);
	}
	if (!a->nfnd)
		html_findings(f, a);
	html_table(f, a, o ? o->all : 0);
	fputs("</main>\n<footer><p class=\"note\">Definitions of every number: docs/definitions.md; the same results "
	      "as JSON: <code>stepprof analyze --json</code>.</p></footer>\n</body>\n</html>\n",
	      f);
	return ferror(f) ? -1 : 0;
}

int report_html_file(const char *path, const struct an_analysis *a, const struct report_html_opts *o)
{
	if (!strcmp(path, "-")) {
		if (report_html(stdout, a, o) || fflush(stdout)) {
			util_stdout_failed();
			return -1;
		}
		return 0;
	}
	/* written whole or not at all: a failed write leaves no half report, and the old one stays */
	struct util_out uo;
	if (util_out_open(&uo, path, "cannot write the HTML report"))
		return -1;
	int rc = report_html(uo.f, a, o);
	if (rc)
		util_err(path, "cannot write the HTML report%s%s", errno ? ": " : "", errno ? strerror(errno) : "");
	return util_out_close(&uo, !rc) || rc ? -1 : 0;
}
