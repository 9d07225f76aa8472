/*
 * report_html_charts.c - the SVG charts of the HTML report (report_html_int.h):
 * the breakdown of each iteration as stacked bars, with buckets of consecutive
 * iterations beyond REPORT_HTML_MAX_BARS and the findings' iterations under the
 * axis, and the per-iteration device memory peak as a line.
 *
 * Divided into:
 *   1. scales: nice axis steps;
 *   2. the per-iteration chart (stacked bars, buckets, findings' iterations);
 *   3. the per-iteration device memory peak (line).
 */
#include "report_html_int.h"
#include "report.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

/*
 * The findings' strip, by severity (info, warning, critical). RATIONALE: dark
 * shades that are no category's colour (report_html.c's cat_color), so a mark
 * under the chart is never read as a slice of the breakdown.
 */
static const char *const sev_color[3] = {"#1d3557", "#7f4f00", "#8b0037"};

/* ------------------------------------------------------------ 1. scales */

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

/* ---------------------------------------------------- 2. per-iteration chart */

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

/* Bars b0..b1 of the findings' strip at height y. */
static void strip_mark(FILE *f, size_t nbars, size_t b0, size_t b1, double y, int sev)
{
	fprintf(f, "<rect x=\"%.2f\" y=\"%.1f\" width=\"%.2f\" height=\"7\" fill=\"%s\"/>", CH_L + b0 * BAR_PX, y,
		(b1 - b0 + 1) * BAR_PX, sev_color[sev]);
}

/*
 * Labels never overlap: a centred label of len characters at x is drawn only
 * when its box (LABEL_PX per character, an upper bound for the chart's 10-11 px
 * font) starts past the end of the last one drawn, *right, and fits under the
 * bar's own width or the room beside it. tests/unit/test_html.c recomputes the
 * boxes from the SVG the same way.
 */
#define LABEL_PX 7.0
static int label_fits(double *right, double x, size_t len)
{
	double half = LABEL_PX * (double)len / 2;
	if (x - half < *right + 2)
		return 0;
	*right = x + half;
	return 1;
}

/*
 * A time axis label in one unit for the whole axis, the unit of its top (so the
 * ticks read 0, 200 us, 400 us..., never "0 ns" under microseconds).
 */
static const char *axis_ns(double v, double top, double step, char *buf, size_t len)
{
	static const struct {
		double div;
		const char *unit;
	} u[] = {{1, "ns"}, {1e3, "us"}, {1e6, "ms"}, {1e9, "s"}};
	int k = 0;
	while (k < 3 && top >= u[k + 1].div)
		k++;
	if (v <= 0) {
		snprintf(buf, len, "0");
		return buf;
	}
	double s = step / u[k].div;
	int dec = s >= 1 ? 0 : s >= 0.1 ? 1 : 2;
	snprintf(buf, len, "%.*f %s", dec, v / u[k].div, u[k].unit);
	return buf;
}

static void x_axis(FILE *f, const struct an_analysis *a, size_t nbars, double y0)
{
	fprintf(f, "<line x1=\"%.0f\" y1=\"%.1f\" x2=\"%.0f\" y2=\"%.1f\" class=\"axis\"/>\n", CH_L, y0, CH_W - CH_R,
		y0);
	double step = nice_step((double)a->nit);
	if (step < 1)
		step = 1;
	double right = -1e9;
	for (double v = 0; v < (double)a->nit; v += step) {
		size_t b = bar_of(a->nit, nbars, (size_t)v);
		double x = CH_L + (b + 0.5) * BAR_PX;
		char t[32];
		snprintf(t, sizeof(t), "%.0f", v);
		if (label_fits(&right, x, strlen(t)))
			fprintf(f, "<text x=\"%.1f\" y=\"%.1f\" class=\"tick\" text-anchor=\"middle\">%s</text>\n",
				x, y0 + 14, t);
	}
	fprintf(f, "<text x=\"%.0f\" y=\"%.1f\" class=\"tick\" text-anchor=\"end\">iteration</text>\n", CH_W - CH_R,
		y0 + 28);
}

void html_iter_chart(FILE *f, const struct an_analysis *a)
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
			CH_L, y, CH_W - CH_R, y, CH_L - 6, y + 4, axis_ns(v, top, step, b1, sizeof(b1)));
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
	/* and their height in words above them, while there are few enough to be read and they do not overlap */
	double right = -1e9;
	for (size_t b = 0; ncut && ncut <= 12 && b < nbars; b++) {
		bar_get(a, nbars, b, &br);
		double s = 0;
		for (int c = 0; c < AN_CAT__COUNT; c++)
			s += br.bd[c];
		fns((uint64_t)llround(s), b1, sizeof(b1));
		if (s > top && label_fits(&right, CH_L + (b + 0.5) * BAR_PX, strlen(b1)))
			fprintf(f,
				"<text x=\"%.2f\" y=\"%.1f\" class=\"tick small\" text-anchor=\"middle\">%s</text>\n",
				CH_L + (b + 0.5) * BAR_PX, CH_T - 11, b1);
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
	/*
	 * The findings' iterations, one band per finding under the axis: a mark on
	 * each bar that holds a concerned iteration (consecutive ones drawn as one
	 * rectangle), not one bar from the first to the last.
	 */
	double yb = y0 + 34;
	for (size_t k = 0; k < a->nfnd; k++) {
		const struct an_result_finding *x = &a->fnd[k];
		if (x->first_iteration < 0 || (size_t)x->first_iteration >= a->nit)
			continue;
		int sev = x->severity >= 0 && x->severity < 3 ? x->severity : 0;
		const char *kind = x->kind >= 0 && x->kind < AN_F__COUNT ? an_finding_name[x->kind] : "?";
		fprintf(f, "<a href=\"#finding-%zu\" class=\"strip\" data-finding=\"%s\">", k, kind);
		size_t n = x->iter ? x->niter : 1, run0 = 0, run1 = 0;
		int open = 0;
		for (size_t j = 0; j < n; j++) {
			long lo = x->iter ? x->iter[j] : x->first_iteration;
			long hi = x->iter ? x->iter[j] : x->last_iteration >= lo ? x->last_iteration : lo;
			if (lo < 0 || (size_t)lo >= a->nit)
				continue;
			if ((size_t)hi >= a->nit)
				hi = (long)a->nit - 1;
			size_t b0 = bar_of(a->nit, nbars, (size_t)lo), b1i = bar_of(a->nit, nbars, (size_t)hi);
			if (open && b0 <= run1 + 1) {
				run1 = b1i > run1 ? b1i : run1;
				continue;
			}
			if (open)
				strip_mark(f, nbars, run0, run1, yb, sev);
			run0 = b0;
			run1 = b1i;
			open = 1;
		}
		if (open)
			strip_mark(f, nbars, run0, run1, yb, sev);
		fprintf(f, "<title>%s (%s): %ld iteration%s concerned, %ld-%ld</title></a>\n", kind,
			an_severity_name[sev], x->iterations, x->iterations == 1 ? "" : "s", x->first_iteration,
			x->last_iteration);
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

/* ----------------------------------------------------- 3. memory chart */

void html_mem_chart(FILE *f, const struct an_analysis *a)
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
