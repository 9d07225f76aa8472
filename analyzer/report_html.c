/*
 * report_html.c - the HTML report of `stepprof analyze --html FILE`.
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
 * Divided into:
 *   1. output helpers: escaping, numbers, nice axis steps;
 *   2. the run (processes, ranks, duration, iterations and their source) and,
 *      with several trainer processes, the per-rank table;
 *   3. the bottleneck sentence and the six categories (stacked bar + table);
 *   4. the per-iteration chart (stacked bars, buckets, findings' iterations);
 *   5. the per-iteration device memory peak (line);
 *   6. the findings;
 *   7. the per-iteration table;
 *   8. the document and the file.
 */
#include "report_html.h"
#include "report.h"
#include "util.h"

#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

/* Category colours (colour-blind friendly Tableau 10), in enum an_cat order. */
static const char *const cat_color[AN_CAT__COUNT] = {"#e15759", "#f28e2b", "#4e79a7", "#edc948", "#b07aa1", "#bab0ac"};
static const char *const sev_color[3] = {"#4e79a7", "#f28e2b", "#e15759"};

/* ----------------------------------------------------- 1. output helpers */

/*
 * Text or attribute value, escaped: & < > " ' become entities, and control
 * characters (C0 but tab and newline, DEL, C1: HTML forbids them) and bytes that
 * are not UTF-8 (the document says it is UTF-8) are shown as \xNN, as on the
 * terminal, so nothing from a trace can open a tag, close an attribute or hide in
 * the output.
 */
static void esc(FILE *f, const char *str)
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

static const char *fns(uint64_t ns, char *buf, size_t len)
{
	return util_fmt_ns(ns, buf, len);
}

static const char *fbytes(uint64_t b, char *buf, size_t len)
{
	return util_fmt_bytes(b, buf, len);
}

static int cmp_double(const void *x, const void *y)
{
	double a = *(const double *)x, b = *(const double *)y;
	return a < b ? -1 : a > b;
}

/* An axis step of 1, 2 or 5 times a power of ten that divides max into at most about 5 intervals. */
static double nice_step(double max)
{
	if (max <= 0)
		return 1;
	double raw = max / 5, p = pow(10, floor(log10(raw))), m = raw / p;
	return (m <= 1 ? 1 : m <= 2 ? 2 : m <= 5 ? 5 : 10) * p;
}

/*
 * Memory ticks: a power-of-two step of bytes (so they read "256 MiB", never
 * "244 MiB" or "1e+03 MiB"), the smallest that divides max into at most 5 intervals.
 */
static double nice_step_bytes(double max)
{
	double step = 1;
	while (max / step > 5)
		step *= 2;
	return step;
}

/* ----------------------------------------------------------- 2. the run */

static const char *source_words(int k)
{
	switch (k) {
	case AN_SRC_NVTX:
		return "NVTX ranges matching --step-regex";
	case AN_SRC_API:
		return "stepprof_step() marks";
	case AN_SRC_AUTO:
		return "automatic detection of the training thread's repeating CUDA call sequence";
	default:
		return "none found";
	}
}

static void html_run(FILE *f, const struct an_analysis *a)
{
	char b1[32], b2[32];
	size_t nrole[3] = {0, 0, 0};
	for (size_t i = 0; i < a->nprocs; i++)
		if (a->procs[i].role >= 0 && a->procs[i].role < 3)
			nrole[a->procs[i].role]++;
	fputs("<section id=\"run\">\n<h2>The run</h2>\n<table class=\"kv\">\n", f);
	fprintf(f, "<tr><th>processes</th><td>%zu (%zu trainer%s, %zu worker%s, %zu other)</td></tr>\n", a->nprocs,
		nrole[AN_ROLE_TRAINER], nrole[AN_ROLE_TRAINER] == 1 ? "" : "s", nrole[AN_ROLE_WORKER],
		nrole[AN_ROLE_WORKER] == 1 ? "" : "s", nrole[AN_ROLE_OTHER]);
	/* ranks: the distinct values, in process order (a job has few) */
	fputs("<tr><th>ranks</th><td>", f);
	int nr = 0;
	for (size_t i = 0; i < a->nprocs; i++) {
		int32_t r = a->procs[i].rank;
		int seen = r < 0;
		for (size_t j = 0; j < i && !seen; j++)
			seen = a->procs[j].rank == r;
		if (seen)
			continue;
		if (nr++ == 32) {
			fputs(", &hellip;", f);
			break;
		}
		fprintf(f, "%s%d", nr > 1 ? ", " : "", r);
	}
	if (!nr)
		fputs("none set (RANK unset: a single-process job)", f);
	fputs("</td></tr>\n", f);
	fprintf(f, "<tr><th>duration</th><td>%s (first to last record, all files)</td></tr>\n",
		fns(a->run_end_ns > a->run_begin_ns ? a->run_end_ns - a->run_begin_ns : 0, b1, sizeof(b1)));
	fprintf(f, "<tr><th>records</th><td>%llu", (unsigned long long)a->records);
	if (a->lost)
		fprintf(f, " <span class=\"warn\">(%llu lost: the producers could not write them)</span>",
			(unsigned long long)a->lost);
	fputs("</td></tr>\n", f);
	fprintf(f, "<tr><th>iterations</th><td><span id=\"iterations\">%zu</span>, source <code>%s</code>: %s", a->nit,
		an_source_name[a->source_kind], source_words(a->source_kind));
	if (a->source_kind == AN_SRC_AUTO)
		fprintf(f, " (%u calls per iteration)", a->auto_period);
	fputs("</td></tr>\n", f);
	if (a->nit)
		fprintf(f, "<tr><th>wall time</th><td>median %s per iteration, %s in all iterations</td></tr>\n",
			fns(report_cat_quantile(a, AN_CAT__COUNT, 0.5), b1, sizeof(b1)),
			fns(a->wall_total, b2, sizeof(b2)));
	if (a->trainer_pid)
		fprintf(f, "<tr><th>training thread</th><td>tid %d of pid %d</td></tr>\n", a->training_tid,
			a->trainer_pid);
	fprintf(f, "<tr><th>device memory</th><td>peak %s", fbytes(a->device_bytes_peak, b1, sizeof(b1)));
	if (a->device_capacity)
		fprintf(f, " of %s (%.1f%%)", fbytes(a->device_capacity, b2, sizeof(b2)),
			100.0 * (double)a->device_bytes_peak / (double)a->device_capacity);
	fputs("</td></tr>\n", f);
	if (a->late_events)
		fprintf(f,
			"<tr><th>note</th><td class=\"warn\">%llu records arrived after their iteration was closed "
			"and were not counted</td></tr>\n",
			(unsigned long long)a->late_events);
	fputs("</table>\n", f);

	/* a job with many processes (a collector that saw a whole node) keeps its list folded */
	fprintf(f, "<details%s><summary>%zu process%s</summary>\n", a->nprocs <= 16 ? " open" : "", a->nprocs,
		a->nprocs == 1 ? "" : "es");
	fputs("<table class=\"grid\"><thead><tr><th>pid</th><th>ppid</th><th>role</th><th>rank</th>"
	      "<th>records</th><th>lost</th><th>launches</th><th class=\"l\">command line</th></tr></thead><tbody>\n",
	      f);
	for (size_t i = 0; i < a->nprocs; i++) {
		const struct an_proc *p = &a->procs[i];
		const char *role = p->role >= 0 && p->role < 3 ? an_role_name[p->role] : "?";
		fprintf(f, "<tr><td>%d</td><td>", p->pid);
		if (p->ppid >= 0)
			fprintf(f, "%d", p->ppid);
		else
			fputs("-", f);
		fprintf(f, "</td><td class=\"role-%s\">%s</td><td>", role, role);
		if (p->rank >= 0)
			fprintf(f, "%d", p->rank);
		else
			fputs("-", f);
		fprintf(f, "</td><td>%llu</td><td>%llu</td><td>%llu</td><td class=\"l\"><code>",
			(unsigned long long)p->records, (unsigned long long)p->lost, (unsigned long long)p->launches);
		/* cmdline is a fixed array filled from an untrusted header: bound it */
		char cmd[sizeof(p->cmdline) + 1];
		memcpy(cmd, p->cmdline, sizeof(p->cmdline));
		cmd[sizeof(p->cmdline)] = 0;
		esc(f, cmd);
		fputs("</code>", f);
		if (p->images > 1) {
			memcpy(cmd, p->first_cmdline, sizeof(p->first_cmdline));
			cmd[sizeof(p->first_cmdline)] = 0;
			fputs(" (exec'd from <code>", f);
			esc(f, cmd);
			fprintf(f, "</code>, %u images)", (unsigned)p->images);
		}
		fputs("</td></tr>\n", f);
	}
	fputs("</tbody></table>\n</details>\n</section>\n", f);
}

/*
 * Several trainer processes (the ranks of a job): one row each from its own
 * analysis (struct an_rank: the numbers of the text report's per-rank table and
 * of the JSON's ranks[]), the six shares as a small stacked bar, the selected
 * rank marked (the rest of the report describes it), then the text report's
 * one-line comparison of the slowest and fastest median iteration: in a
 * synchronous job the slowest rank holds the others at their collectives.
 */
static double rank_share(const struct an_rank *x, int c)
{
	/* the JSON's expression (report.c json_rank), so data-value is its exact double */
	return report_fraction(x->bd_total[c], x->wall_total);
}

static void rank_label(FILE *f, const struct an_rank *x)
{
	if (x->rank >= 0)
		fprintf(f, "rank %d (pid %d)", x->rank, x->pid);
	else
		fprintf(f, "pid %d", x->pid);
}

static void html_ranks(FILE *f, const struct an_analysis *a)
{
	char b1[32], b2[32];
	struct report_rank_pick p;
	report_rank_pick(a, &p);
	const double BW = 200, BH = 12;
	fprintf(f, "<section id=\"ranks\">\n<h2>Ranks: %zu trainer processes</h2>\n", a->nranks);
	fputs("<p class=\"note\">Each trainer process analysed on its own; shares of its own wall time. The rest of "
	      "the report describes the selected one (&#9664;); <code>--rank N</code> selects another.</p>\n",
	      f);
	fputs("<table class=\"grid ranks\"><thead><tr><th></th><th>rank</th><th>pid</th><th>iterations</th>"
	      "<th>median wall</th><th class=\"l\">shares</th><th class=\"l\">bottleneck</th></tr></thead><tbody>\n",
	      f);
	for (size_t i = 0; i < a->nranks; i++) {
		const struct an_rank *x = &a->ranks[i];
		const char *bn = report_rank_bottleneck(a, x);
		fprintf(f, "<tr class=\"rank%s\" data-rank=\"%d\" data-pid=\"%d\" data-selected=\"%d\">",
			x->selected ? " selected" : "", x->rank, x->pid, x->selected ? 1 : 0);
		fprintf(f, "<td class=\"mark\">%s</td><td>", x->selected ? "&#9664; selected" : "");
		if (x->rank >= 0)
			fprintf(f, "%d", x->rank);
		else
			fputs("-", f);
		fprintf(f, "</td><td>%d</td><td>%llu</td><td>%s</td>", x->pid, (unsigned long long)x->nit,
			fns(x->wall_median, b1, sizeof(b1)));
		/* every category has its rect (width 0 when absent) so each share is there to read */
		fprintf(f,
			"<td class=\"l\"><svg class=\"rankbar\" viewBox=\"0 0 %.0f %.0f\" role=\"img\" "
			"aria-label=\"shares of rank wall time\">",
			BW, BH);
		double bx = 0;
		for (int c = 0; c < AN_CAT__COUNT; c++) {
			double s = rank_share(x, c), w = s * BW;
			fprintf(f,
				"<rect class=\"rshare\" data-cat=\"%s\" data-value=\"%.17g\" x=\"%.2f\" y=\"0\" "
				"width=\"%.2f\" height=\"%.0f\" fill=\"%s\"><title>%s %.1f%%</title></rect>",
				an_cat_name[c], s, bx, w, BH, cat_color[c], an_cat_name[c], 100.0 * s);
			bx += w;
		}
		if (!x->wall_total)
			fprintf(f, "<rect x=\"0\" y=\"0\" width=\"%.0f\" height=\"%.0f\" fill=\"#eee\"/>", BW, BH);
		fputs("</svg></td><td class=\"l\">", f);
		esc(f, bn);
		fputs("</td></tr>\n", f);
	}
	fputs("</tbody></table>\n<p class=\"legend\">", f);
	for (int c = 0; c < AN_CAT__COUNT; c++)
		fprintf(f, "<span><span class=\"swatch\" style=\"background:%s\"></span>%s</span> ", cat_color[c],
			an_cat_name[c]);
	fputs("</p>\n", f);
	if (p.spread) {
		/* the text report's comparison, on the same numbers */
		fns(p.slow->wall_median, b1, sizeof(b1));
		fns(p.fast->wall_median, b2, sizeof(b2));
		fputs("<p class=\"rank-spread\">", f);
		if (p.over >= 10.0) {
			fputs("Slowest median wall: <strong>", f);
			rank_label(f, p.slow);
			fprintf(f, "</strong> at %s, %.0f%% above the fastest, ", b1, p.over);
			rank_label(f, p.fast);
			fprintf(f, " at %s.", b2);
		} else {
			fputs("Median walls within 10%: from ", f);
			rank_label(f, p.fast);
			fprintf(f, " at %s to ", b2);
			rank_label(f, p.slow);
			fprintf(f, " at %s.", b1);
		}
		fputs("</p>\n", f);
	}
	if (p.sel) {
		fputs("<p>Below: the selected process (&#9664;: ", f);
		if (p.sel->rank >= 0)
			fprintf(f, "rank %d, ", p.sel->rank);
		fprintf(f, "pid %d) only.</p>\n", p.sel->pid);
	}
	fputs("</section>\n", f);
}

/* ------------------------------------------- 3. bottleneck and categories */

static void html_bottleneck(FILE *f, const struct an_analysis *a)
{
	const char *bn = report_bottleneck(a);
	int bc = -1;
	for (int c = 0; c < AN_CAT__COUNT; c++)
		if (!strcmp(an_cat_name[c], bn))
			bc = c;
	fprintf(f, "<section id=\"bottleneck\" class=\"bottleneck\" data-bottleneck=\"%s\">\n", bn);
	if (bc < 0) {
		fputs("<p><strong>No iterations.</strong> No NVTX range matched <code>--step-regex</code>, no "
		      "<code>stepprof_step()</code> marks were made, and no repeating CUDA call sequence was found: "
		      "there is no per-iteration breakdown. The run and the findings below still hold.</p>\n",
		      f);
	} else {
		char sb[128];
		fprintf(f,
			"<p><span class=\"swatch\" style=\"background:%s\"></span><strong>Bottleneck: %s</strong> "
			"(%.1f%% of wall time): %s.</p>\n",
			cat_color[bc], bn, 100.0 * report_share(a, bc),
			report_bottleneck_sentence(a, bn, sb, sizeof(sb)));
	}
	fputs("</section>\n", f);
}

static void html_categories(FILE *f, const struct an_analysis *a)
{
	char b1[32], b2[32], b3[32];
	fputs("<section id=\"categories\">\n<h2>Where the time went</h2>\n", f);
	/* one bar of the whole run's wall time, split by share; labels where they fit */
	const double W = 960, H = 36;
	fprintf(f, "<svg class=\"chart\" viewBox=\"0 0 %.0f %.0f\" role=\"img\" aria-label=\"share of wall time\">\n",
		W, H);
	double x = 0;
	for (int c = 0; c < AN_CAT__COUNT; c++) {
		double w = report_share(a, c) * W;
		if (w <= 0)
			continue;
		fprintf(f,
			"<rect x=\"%.2f\" y=\"0\" width=\"%.2f\" height=\"%.0f\" fill=\"%s\"><title>%s "
			"%.1f%%</title></rect>\n",
			x, w, H, cat_color[c], an_cat_name[c], 100.0 * report_share(a, c));
		if (w >= 70)
			fprintf(f, "<text x=\"%.2f\" y=\"23\" class=\"on\">%s %.1f%%</text>\n", x + 6, an_cat_name[c],
				100.0 * report_share(a, c));
		x += w;
	}
	if (!a->wall_total)
		fprintf(f, "<rect x=\"0\" y=\"0\" width=\"%.0f\" height=\"%.0f\" fill=\"#eee\"/>\n", W, H);
	fputs("</svg>\n", f);
	fputs("<table class=\"grid cats\"><thead><tr><th class=\"l\">category</th><th>median</th><th>p95</th>"
	      "<th>share</th><th>total</th><th class=\"l\">an instant counts here when</th></tr></thead><tbody>\n",
	      f);
	static const char *const what[AN_CAT__COUNT] = {
	    "the training thread is blocked in file I/O or waiting for a batch from loader workers",
	    "a host-to-device copy runs on the GPU, or the training thread is inside an H2D call",
	    "a kernel, memset or device-to-device copy runs on the GPU",
	    "a device-to-host copy runs, or the training thread is inside a D2H call",
	    "the training thread is blocked in a synchronisation call",
	    "none of the above (Python, framework, launch overhead, GPU idle)",
	};
	for (int c = 0; c < AN_CAT__COUNT; c++)
		fprintf(f,
			"<tr><td class=\"l\"><span class=\"swatch\" style=\"background:%s\"></span>%s</td>"
			"<td>%s</td><td>%s</td><td class=\"share\" data-cat=\"%s\" data-value=\"%.17g\">%.1f%%</td>"
			"<td>%s</td><td class=\"l note\">%s</td></tr>\n",
			cat_color[c], an_cat_name[c], fns(report_cat_quantile(a, c, 0.5), b1, sizeof(b1)),
			fns(report_cat_quantile(a, c, 0.95), b2, sizeof(b2)), an_cat_name[c], report_share(a, c),
			100.0 * report_share(a, c), fns(a->bd_total[c], b3, sizeof(b3)), what[c]);
	fputs("</tbody></table>\n<p class=\"note\">Every instant of an iteration goes to the first category that "
	      "holds, in the table's priority order compute, h2d, d2h, input, sync, other; the six sum to the wall "
	      "time. Median and p95 are over iterations; share is the category's total over the total wall time.</p>\n"
	      "</section>\n",
	      f);
}

/* ---------------------------------------------------- 4. per-iteration chart */

/* Bar b of nbars covers iterations [*lo, *hi). */
static void bar_range(size_t nit, size_t nbars, size_t b, size_t *lo, size_t *hi)
{
	*lo = b * nit / nbars;
	*hi = (b + 1) * nit / nbars;
}

static size_t bar_of(size_t nit, size_t nbars, size_t i)
{
	/* the largest b with b*nit/nbars <= i */
	size_t b = (size_t)((double)i * (double)nbars / (double)nit);
	while (b + 1 < nbars && (b + 1) * nit / nbars <= i)
		b++;
	while (b > 0 && b * nit / nbars > i)
		b--;
	return b;
}

struct bar {
	double bd[AN_CAT__COUNT]; /* mean per iteration of the bar */
	uint64_t wall_max, mem_max;
};

static void bar_get(const struct an_analysis *a, size_t nbars, size_t b, struct bar *r)
{
	size_t lo, hi;
	bar_range(a->nit, nbars, b, &lo, &hi);
	memset(r, 0, sizeof(*r));
	for (size_t i = lo; i < hi; i++) {
		const struct an_iter *it = &a->it[i];
		for (int c = 0; c < AN_CAT__COUNT; c++)
			r->bd[c] += (double)it->bd[c];
		if (it->end_ns - it->start_ns > r->wall_max)
			r->wall_max = it->end_ns - it->start_ns;
		if (it->device_bytes_peak > r->mem_max)
			r->mem_max = it->device_bytes_peak;
	}
	for (int c = 0; c < AN_CAT__COUNT; c++)
		r->bd[c] /= (double)(hi - lo);
}

/* Plot geometry shared by both charts. */
#define CH_W   960.0
#define CH_L   104.0 /* left margin: y labels, the findings' names */
#define CH_R   12.0
#define CH_T   24.0 /* top margin: marks and values of bars cut at the top */
#define CH_PW  (CH_W - CH_L - CH_R)
#define BAR_PX (CH_PW / (double)nbars)

static void x_axis(FILE *f, const struct an_analysis *a, size_t nbars, double y0)
{
	fprintf(f, "<line x1=\"%.0f\" y1=\"%.1f\" x2=\"%.0f\" y2=\"%.1f\" class=\"axis\"/>\n", CH_L, y0, CH_W - CH_R,
		y0);
	double step = nice_step((double)a->nit);
	if (step < 1)
		step = 1;
	for (double v = 0; v < (double)a->nit; v += step) {
		size_t b = bar_of(a->nit, nbars, (size_t)v);
		double x = CH_L + (b + 0.5) * BAR_PX;
		fprintf(f, "<text x=\"%.1f\" y=\"%.1f\" class=\"tick\" text-anchor=\"middle\">%.0f</text>\n", x,
			y0 + 14, v);
	}
	fprintf(f, "<text x=\"%.0f\" y=\"%.1f\" class=\"tick\" text-anchor=\"end\">iteration</text>\n", CH_W - CH_R,
		y0 + 28);
}

static void html_iter_chart(FILE *f, const struct an_analysis *a)
{
	char b1[32], b2[32];
	size_t nbars = a->nit < REPORT_HTML_MAX_BARS ? a->nit : REPORT_HTML_MAX_BARS;
	int bucketed = nbars < a->nit;
	fputs("<section id=\"iterations-chart\">\n<h2>Each iteration</h2>\n", f);
	if (bucketed) {
		fprintf(f, "<p class=\"note\">%zu iterations in %zu bars of ", a->nit, nbars);
		if (a->nit % nbars)
			fprintf(f, "%zu&ndash;%zu", a->nit / nbars, a->nit / nbars + 1);
		else
			fprintf(f, "%zu", a->nit / nbars);
		fputs(" consecutive iterations: each bar stacks the mean of its iterations; the thin grey line is the "
		      "longest iteration in the bar.</p>\n",
		      f);
	}
	/*
	 * y scale: the tallest bar, unless a few bars (the first iteration with its
	 * set-up, a stall) tower over the rest and would flatten every other bar to a
	 * line: then the scale stops at 1.25 x the 98th percentile of the bars, and the
	 * taller ones are cut at the top and marked (their numbers stay in the tooltip).
	 */
	struct bar br;
	double ymax = 0, robust = 0;
	double *tot = malloc(nbars * sizeof(*tot));
	for (size_t b = 0; b < nbars; b++) {
		bar_get(a, nbars, b, &br);
		double s = 0;
		for (int c = 0; c < AN_CAT__COUNT; c++)
			s += br.bd[c];
		if (tot)
			tot[b] = s;
		if (s > ymax)
			ymax = s;
	}
	if (tot && nbars >= 10) {
		qsort(tot, nbars, sizeof(*tot), cmp_double);
		robust = 1.25 * tot[(size_t)(0.98 * (double)(nbars - 1))];
		if (robust > 0 && ymax > robust)
			ymax = robust;
	}
	free(tot);
	double step = nice_step(ymax);
	double top = ceil(ymax / step) * step;
	if (top <= 0)
		top = 1;
	const double PH = 260; /* plot height */
	size_t nband = 0;
	for (size_t k = 0; k < a->nfnd; k++)
		nband += a->fnd[k].first_iteration >= 0 && (size_t)a->fnd[k].first_iteration < a->nit;
	double y0 = CH_T + PH, H = y0 + 34 + (nband ? 8 + 10.0 * nband : 0);
	fprintf(f,
		"<svg class=\"chart\" viewBox=\"0 0 %.0f %.0f\" role=\"img\" aria-label=\"breakdown per iteration\" "
		"data-bars=\"%zu\">\n",
		CH_W, H, nbars);
	/* y grid and labels */
	for (double v = 0; v <= top * 1.0001; v += step) {
		double y = y0 - v / top * PH;
		fprintf(f,
			"<line x1=\"%.0f\" y1=\"%.1f\" x2=\"%.0f\" y2=\"%.1f\" class=\"grid\"/><text x=\"%.0f\" "
			"y=\"%.1f\" class=\"tick\" text-anchor=\"end\">%s</text>\n",
			CH_L, y, CH_W - CH_R, y, CH_L - 6, y + 4, fns((uint64_t)llround(v), b1, sizeof(b1)));
	}
	/* one path per category: small output even with thousands of bars */
	double gap = nbars <= 200 ? 0.15 : 0;
	for (int c = 0; c < AN_CAT__COUNT; c++) {
		fprintf(f, "<path fill=\"%s\" d=\"", cat_color[c]);
		for (size_t b = 0; b < nbars; b++) {
			bar_get(a, nbars, b, &br);
			double base = 0;
			for (int k = 0; k < c; k++)
				base += br.bd[k];
			if (base >= top)
				continue;
			double h = (base + br.bd[c] > top ? top - base : br.bd[c]) / top * PH;
			if (h < 0.01)
				continue;
			double x = CH_L + b * BAR_PX + gap * BAR_PX / 2, w = BAR_PX * (1 - gap);
			double y = y0 - base / top * PH - h;
			fprintf(f, "M%.2f %.2fh%.2fv%.2fh%.2fz", x, y, w, h, -w);
		}
		fputs("\"/>\n", f);
	}
	if (bucketed) {
		fputs("<polyline class=\"maxline\" points=\"", f);
		for (size_t b = 0; b < nbars; b++) {
			bar_get(a, nbars, b, &br);
			double v = (double)br.wall_max < top ? (double)br.wall_max : top;
			fprintf(f, "%.2f,%.2f ", CH_L + (b + 0.5) * BAR_PX, y0 - v / top * PH);
		}
		fputs("\"/>\n", f);
	}
	/* bars cut at the top of the scale: a small triangle above each */
	size_t ncut = 0;
	for (size_t b = 0; b < nbars; b++) {
		bar_get(a, nbars, b, &br);
		double s = 0;
		for (int c = 0; c < AN_CAT__COUNT; c++)
			s += br.bd[c];
		if (s <= top)
			continue;
		double xc = CH_L + (b + 0.5) * BAR_PX, hw = BAR_PX / 2 < 4 ? (BAR_PX / 2 > 1.5 ? BAR_PX / 2 : 1.5) : 4;
		fprintf(f, "%s M%.2f %.2fl%.2f %.2fh%.2fz", ncut++ ? "" : "<path class=\"cut\" d=\"", xc, CH_T - 8, hw,
			7.0, -2 * hw);
	}
	if (ncut)
		fputs("\"/>\n", f);
	/* and their height in words above them, while there are few enough to be read */
	for (size_t b = 0; ncut && ncut <= 12 && b < nbars; b++) {
		bar_get(a, nbars, b, &br);
		double s = 0;
		for (int c = 0; c < AN_CAT__COUNT; c++)
			s += br.bd[c];
		if (s > top)
			fprintf(f,
				"<text x=\"%.2f\" y=\"%.1f\" class=\"tick small\" text-anchor=\"middle\">%s</text>\n",
				CH_L + (b + 0.5) * BAR_PX, CH_T - 11, fns((uint64_t)llround(s), b1, sizeof(b1)));
	}
	/* hover targets: a transparent full-height column per bar whose title holds the numbers */
	for (size_t b = 0; b < nbars; b++) {
		size_t lo, hi;
		bar_range(a->nit, nbars, b, &lo, &hi);
		bar_get(a, nbars, b, &br);
		fprintf(f, "<rect class=\"hover\" x=\"%.2f\" y=\"%.0f\" width=\"%.2f\" height=\"%.0f\"><title>",
			CH_L + b * BAR_PX, CH_T, BAR_PX, PH);
		double wall = 0;
		for (int c = 0; c < AN_CAT__COUNT; c++)
			wall += br.bd[c];
		if (hi - lo == 1)
			fprintf(f, "iteration %zu: wall %s", lo, fns((uint64_t)llround(wall), b1, sizeof(b1)));
		else
			fprintf(f, "iterations %zu-%zu: mean wall %s, max %s", lo, hi - 1,
				fns((uint64_t)llround(wall), b1, sizeof(b1)), fns(br.wall_max, b2, sizeof(b2)));
		for (int c = 0; c < AN_CAT__COUNT; c++)
			fprintf(f, "&#10;%s %s (%.0f%%)", an_cat_name[c],
				fns((uint64_t)llround(br.bd[c]), b1, sizeof(b1)),
				wall > 0 ? 100.0 * br.bd[c] / wall : 0.0);
		fputs("</title></rect>\n", f);
	}
	x_axis(f, a, nbars, y0);
	/* the findings' iterations, one band per finding under the axis */
	double yb = y0 + 34;
	for (size_t k = 0; k < a->nfnd; k++) {
		const struct an_result_finding *x = &a->fnd[k];
		if (x->first_iteration < 0 || (size_t)x->first_iteration >= a->nit)
			continue;
		size_t last =
		    x->last_iteration >= x->first_iteration ? (size_t)x->last_iteration : (size_t)x->first_iteration;
		if (last >= a->nit)
			last = a->nit - 1;
		size_t b0 = bar_of(a->nit, nbars, (size_t)x->first_iteration), b1i = bar_of(a->nit, nbars, last);
		int sev = x->severity >= 0 && x->severity < 3 ? x->severity : 0;
		const char *kind = x->kind >= 0 && x->kind < AN_F__COUNT ? an_finding_name[x->kind] : "?";
		fprintf(f,
			"<a href=\"#finding-%zu\"><rect x=\"%.2f\" y=\"%.1f\" width=\"%.2f\" height=\"7\" fill=\"%s\">"
			"<title>%s (%s): iterations %ld-%ld</title></rect></a>\n",
			k, CH_L + b0 * BAR_PX, yb, (b1i - b0 + 1) * BAR_PX, sev_color[sev], kind, an_severity_name[sev],
			x->first_iteration, x->last_iteration);
		fprintf(f, "<text x=\"%.0f\" y=\"%.1f\" class=\"tick small\" text-anchor=\"end\">%s</text>\n", CH_L - 4,
			yb + 7, kind);
		yb += 10;
	}
	fputs("</svg>\n", f);
	if (ncut)
		fprintf(f,
			"<p class=\"note\">%zu bar%s taller than %s %s cut at the top of the scale (marked &#9650;); "
			"hover a bar for its numbers.</p>\n",
			ncut, ncut == 1 ? "" : "s", fns((uint64_t)llround(top), b1, sizeof(b1)),
			ncut == 1 ? "is" : "are");
	fputs("<p class=\"legend\">", f);
	for (int c = 0; c < AN_CAT__COUNT; c++)
		fprintf(f, "<span><span class=\"swatch\" style=\"background:%s\"></span>%s</span> ", cat_color[c],
			an_cat_name[c]);
	fputs("</p>\n</section>\n", f);
}

/* ----------------------------------------------------- 5. memory chart */

static void html_mem_chart(FILE *f, const struct an_analysis *a)
{
	char b1[32], b2[32];
	size_t nbars = a->nit < REPORT_HTML_MAX_BARS ? a->nit : REPORT_HTML_MAX_BARS;
	struct bar br;
	uint64_t ymax = 0;
	for (size_t b = 0; b < nbars; b++) {
		bar_get(a, nbars, b, &br);
		if (br.mem_max > ymax)
			ymax = br.mem_max;
	}
	fputs("<section id=\"memory\">\n<h2>Device memory peak per iteration</h2>\n", f);
	if (!ymax) {
		fputs(
		    "<p class=\"note\">No device memory was live during the iterations (no allocation recorded).</p>\n"
		    "</section>\n",
		    f);
		return;
	}
	/* show the capacity line only when the peak comes near it: otherwise it flattens the curve */
	int show_cap = a->device_capacity && (double)ymax >= 0.5 * (double)a->device_capacity;
	double vmax = show_cap && a->device_capacity > ymax ? (double)a->device_capacity : (double)ymax;
	double step = nice_step_bytes(vmax), top = ceil(vmax / step) * step;
	const double PH = 180, y0 = CH_T + PH;
	fprintf(f, "<svg class=\"chart\" viewBox=\"0 0 %.0f %.0f\" role=\"img\" aria-label=\"device memory peak\">\n",
		CH_W, y0 + 34);
	for (double v = 0; v <= top * 1.0001; v += step) {
		double y = y0 - v / top * PH;
		fprintf(f,
			"<line x1=\"%.0f\" y1=\"%.1f\" x2=\"%.0f\" y2=\"%.1f\" class=\"grid\"/><text x=\"%.0f\" "
			"y=\"%.1f\" class=\"tick\" text-anchor=\"end\">%s</text>\n",
			CH_L, y, CH_W - CH_R, y, CH_L - 6, y + 4, fbytes((uint64_t)v, b1, sizeof(b1)));
	}
	if (show_cap) {
		double y = y0 - (double)a->device_capacity / top * PH;
		fprintf(
		    f,
		    "<line x1=\"%.0f\" y1=\"%.1f\" x2=\"%.0f\" y2=\"%.1f\" class=\"cap\"/><text x=\"%.0f\" y=\"%.1f\" "
		    "class=\"tick\" text-anchor=\"end\">capacity %s</text>\n",
		    CH_L, y, CH_W - CH_R, y, CH_W - CH_R, y - 4, fbytes(a->device_capacity, b1, sizeof(b1)));
	}
	fputs("<polyline class=\"memline\" points=\"", f);
	for (size_t b = 0; b < nbars; b++) {
		bar_get(a, nbars, b, &br);
		fprintf(f, "%.2f,%.2f ", CH_L + (b + 0.5) * BAR_PX, y0 - (double)br.mem_max / top * PH);
	}
	fputs("\"/>\n", f);
	if (nbars <= 200) /* points with the exact value on hover, where they can be told apart */
		for (size_t b = 0; b < nbars; b++) {
			bar_get(a, nbars, b, &br);
			fprintf(f,
				"<circle cx=\"%.2f\" cy=\"%.2f\" r=\"3\" class=\"mempt\"><title>iteration %zu: peak %s "
				"(%llu bytes)</title></circle>\n",
				CH_L + (b + 0.5) * BAR_PX, y0 - (double)br.mem_max / top * PH, b,
				fbytes(br.mem_max, b1, sizeof(b1)), (unsigned long long)br.mem_max);
		}
	x_axis(f, a, nbars, y0);
	fputs("</svg>\n", f);
	fprintf(f, "<p class=\"note\">Highest live device bytes of the trainer in each iteration%s. Run peak %s",
		nbars < a->nit ? " (the maximum over each bar's iterations)" : "",
		fbytes(a->device_bytes_peak, b1, sizeof(b1)));
	if (a->device_capacity)
		fprintf(f, " of %s device memory", fbytes(a->device_capacity, b2, sizeof(b2)));
	fputs(".</p>\n</section>\n", f);
}

/* --------------------------------------------------------- 6. findings */

/* Evidence keys end in their unit: show a readable value beside the exact number. */
static void evidence_value(FILE *f, const struct an_evidence *e)
{
	char b[48];
	if (e->is_str) {
		fputs("<code>", f);
		char s[sizeof(e->str) + 1];
		memcpy(s, e->str, sizeof(e->str));
		s[sizeof(e->str)] = 0;
		esc(f, s);
		fputs("</code>", f);
		return;
	}
	double v = e->num;
	if (!isfinite(v)) {
		fputs("-", f);
		return;
	}
	/* counts and bytes in full; large measures rounded rather than in e-notation */
	if ((v == floor(v) || fabs(v) >= 1000) && fabs(v) < 1e15)
		fprintf(f, "%.0f", v);
	else
		fprintf(f, "%.4g", v);
	const char *k = e->key ? e->key : "";
	size_t n = strlen(k);
	int ends_ns = (n >= 3 && !strcmp(k + n - 3, "_ns")) || !strncmp(k, "ns_", 3);
	if (v >= 1024 && strstr(k, "bytes"))
		fprintf(f, " <span class=\"note\">(%s)</span>", fbytes((uint64_t)v, b, sizeof(b)));
	else if (v >= 1000 && ends_ns)
		fprintf(f, " <span class=\"note\">(%s)</span>", fns((uint64_t)v, b, sizeof(b)));
	else if (strstr(k, "share") && v >= 0 && v <= 1)
		fprintf(f, " <span class=\"note\">(%.1f%%)</span>", 100 * v);
	else if (n >= 5 && !strcmp(k + n - 5, "_gbps"))
		fputs(" <span class=\"note\">GB/s</span>", f);
}

static void html_findings(FILE *f, const struct an_analysis *a)
{
	fprintf(f, "<section id=\"findings\">\n<h2>Findings (%zu)</h2>\n", a->nfnd);
	if (!a->nfnd)
		fputs("<p>None: no small-file storm, no copy from pageable memory, no allocator fragmentation and no "
		      "steady memory growth crossed its threshold.</p>\n",
		      f);
	for (size_t i = 0; i < a->nfnd; i++) {
		const struct an_result_finding *x = &a->fnd[i];
		int sev = x->severity >= 0 && x->severity < 3 ? x->severity : 0;
		const char *kind = x->kind >= 0 && x->kind < AN_F__COUNT ? an_finding_name[x->kind] : "?";
		fprintf(f,
			"<article id=\"finding-%zu\" class=\"finding sev-%s\" data-kind=\"%s\">\n<h3><span "
			"class=\"badge\">%s</span> %s",
			i, an_severity_name[sev], kind, an_severity_name[sev], kind);
		if (x->signal) {
			fputs(" <small>(", f);
			esc(f, x->signal);
			fputs(")</small>", f);
		}
		fputs("</h3>\n<p class=\"iters\">", f);
		if (x->first_iteration < 0)
			fputs("outside every iteration", f);
		else if (x->first_iteration == x->last_iteration)
			fprintf(f, "iteration %ld", x->first_iteration);
		else
			fprintf(f, "iterations %ld&ndash;%ld (%ld concerned)", x->first_iteration, x->last_iteration,
				x->iterations);
		fputs("</p>\n", f);
		fputs("<p class=\"advice\">", f);
		char adv[sizeof(x->advice) + 1];
		memcpy(adv, x->advice, sizeof(x->advice));
		adv[sizeof(x->advice)] = 0;
		esc(f, adv);
		fputs("</p>\n", f);
		if (x->nev > 0) {
			fputs("<table class=\"kv evidence\"><caption>evidence</caption>\n", f);
			for (int k = 0; k < x->nev && k < AN_MAX_EVIDENCE; k++) {
				fputs("<tr><th>", f);
				esc(f, x->ev[k].key);
				fputs("</th><td>", f);
				evidence_value(f, &x->ev[k]);
				fputs("</td></tr>\n", f);
			}
			fputs("</table>\n", f);
		}
		if (x->nsites > 0) {
			fputs("<p class=\"sites-h\">call sites</p>\n<ol class=\"sites\">\n", f);
			for (int k = 0; k < x->nsites && k < AN_MAX_SITES; k++) {
				char s[sizeof(x->sites[k]) + 1];
				memcpy(s, x->sites[k], sizeof(x->sites[k]));
				s[sizeof(x->sites[k])] = 0;
				fputs("<li><code>", f);
				esc(f, s);
				fputs("</code></li>\n", f);
			}
			fputs("</ol>\n", f);
		}
		fputs("</article>\n", f);
	}
	fputs("</section>\n", f);
}

/* ------------------------------------------------------ 7. iteration table */

static void table_row(FILE *f, const struct an_analysis *a, size_t i)
{
	const struct an_iter *it = &a->it[i];
	char b[32];
	fprintf(f, "<tr><td>%zu</td><td>%s</td>", i, fns(it->start_ns - a->it[0].start_ns, b, sizeof(b)));
	fprintf(f, "<td>%s</td>", fns(it->end_ns - it->start_ns, b, sizeof(b)));
	for (int c = 0; c < AN_CAT__COUNT; c++)
		fprintf(f, "<td>%s</td>", fns(it->bd[c], b, sizeof(b)));
	fprintf(f, "<td>%s</td><td>%llu</td><td>%llu</td>", fns(it->gpu_idle_ns, b, sizeof(b)),
		(unsigned long long)it->files_opened, (unsigned long long)it->metadata_ops);
	fprintf(f, "<td>%s</td>", fbytes(it->bytes_read, b, sizeof(b)));
	fprintf(f, "<td>%s</td>", fbytes(it->h2d_bytes, b, sizeof(b)));
	fprintf(f, "<td>%s</td><td>%llu</td>", fbytes(it->d2h_bytes, b, sizeof(b)),
		(unsigned long long)it->pageable_copies);
	fprintf(f, "<td>%s</td></tr>\n", fbytes(it->device_bytes_peak, b, sizeof(b)));
}

static void html_table(FILE *f, const struct an_analysis *a, int all)
{
	if (!a->nit)
		return;
	int cut = !all && a->nit > 20;
	fprintf(f, "<section id=\"table\">\n<details><summary>Per-iteration table (%s%zu iterations%s)</summary>\n",
		cut ? "first and last 10 of " : "", a->nit, cut ? "; <code>--all</code> for every one" : "");
	fputs("<table class=\"grid iters\"><thead><tr><th>#</th><th>start</th><th>wall</th>", f);
	for (int c = 0; c < AN_CAT__COUNT; c++)
		fprintf(f, "<th><span class=\"swatch\" style=\"background:%s\"></span>%s</th>", cat_color[c],
			an_cat_name[c]);
	fputs("<th>GPU idle</th><th>files</th><th>meta ops</th><th>read</th><th>h2d</th><th>d2h</th><th>pageable</th>"
	      "<th>dev peak</th></tr></thead><tbody>\n",
	      f);
	for (size_t i = 0; i < a->nit; i++) {
		if (cut && i == 10)
			fprintf(f, "<tr class=\"gap\"><td colspan=\"%d\">&hellip; %zu iterations &hellip;</td></tr>\n",
				3 + AN_CAT__COUNT + 8, a->nit - 20);
		if (cut && i >= 10 && i < a->nit - 10)
			continue;
		table_row(f, a, i);
	}
	fputs("</tbody></table>\n<p class=\"note\">start: from the first iteration's start. Files, metadata "
	      "operations and bytes read are counted across the process tree (loader workers included) in the "
	      "iteration where the call began.</p>\n</details>\n</section>\n",
	      f);
}

/* ------------------------------------------------ 8. document and file */

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
	html_bottleneck(f, a);
	html_run(f, a);
	if (a->nranks > 1)
		html_ranks(f, a);
	if (a->nit) {
		html_categories(f, a);
		html_iter_chart(f, a);
		html_mem_chart(f, a);
	}
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
