/*
 * summary.c - the per-window summaries in the analysis (see summary.h).
 *
 * Divided into:
 *   1. reading the windows of one file,
 *   2. does the raw ring still cover the run? (when not, summaries are used),
 *   3. the whole-run memory_growth fit and the run's peak.
 *
 * RATIONALE: a multi-day job's ring keeps only its last hours; a leak that
 * started on day one shows in the summaries, one point per window. The fit is
 * memory_growth's (least squares, R², growth thresholds of findings.def), on
 * the windows' peaks instead of the iterations' peaks; x is the process's step
 * count at the window's end when it calls stepprof_step(), else the time in
 * mean iteration lengths of the raw iterations.
 */
#include "summary.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "reader.h"

/* ------------------------------------------------------- 1. the windows */

size_t sm_windows(const struct sp_file_header *h, struct sm_window **out)
{
	*out = NULL;
	const struct sp_reader *r = sp_reader_find(h);
	if (!r || !sp_reader_stats(r)->summaries)
		return 0;
	size_t cap = sp_reader_stats(r)->summaries, n = 0, pos = 0;
	struct sm_window *w = calloc(cap, sizeof(*w));
	if (!w)
		return 0;
	struct sp_event ev;
	while (sp_reader_summary(r, &pos, &ev)) {
		if (ev.kind == SP_K_SUMMARY) {
			if (n == cap)
				break;
			w[n++] =
			    (struct sm_window){.begin_ns = ev.begin_ns, .end_ns = ev.end_ns, .steps = ev.f[SP_F_STEPS]};
		} else if (ev.kind == SP_K_SUMMARY_DEVICE && n && ev.begin_ns == w[n - 1].begin_ns) {
			w[n - 1].peak_bytes += ev.f[SP_F_PEAK];
			w[n - 1].live_bytes += ev.f[SP_F_LIVE];
			w[n - 1].has_device = 1;
		}
	}
	if (!n) {
		free(w);
		return 0;
	}
	*out = w;
	return n;
}

/* ------------------------------------------------- 2. coverage of the ring */

/* The header of the trainer's file: of its last image when it exec'd (analyze.c's choice, an_proc.file). */
static const struct sp_file_header *trainer_header(struct an_source *src, const struct an_analysis *a)
{
	for (size_t i = 0; i < a->nprocs; i++)
		if (a->procs[i].pid == a->trainer_pid && a->procs[i].file >= 0)
			return src->header(src->ctx, a->procs[i].file);
	return NULL;
}

/*
 * The raw records lost part of the run: with iterations from steps, fewer raw
 * iterations than the process counted; otherwise (no steps, or NVTX ranges that
 * give the iterations while the process also counts steps), the first surviving
 * record comes more than a window after the summaries' start.
 */
static int ring_lost_iterations(const struct an_analysis *a, const struct sm_window *w, size_t n)
{
	uint64_t steps = w[n - 1].steps;
	if (steps && a->source_kind == AN_SRC_API)
		return a->nit + 1 < steps;
	for (size_t i = 0; i < a->nprocs; i++)
		if (a->procs[i].pid == a->trainer_pid)
			return a->procs[i].begin_ns != UINT64_MAX && a->procs[i].begin_ns > w[0].end_ns;
	return 0;
}

/* ------------------------------------------------------------- 3. the fit */

int sm_apply(struct an_source *src, struct an_analysis *a, const struct an_collect *c)
{
	if (!a->trainer_pid || !a->nit)
		return 0;
	const struct sp_file_header *h = trainer_header(src, a);
	if (!h || !h->overwritten_records)
		return 0;
	struct sm_window *w;
	size_t n = sm_windows(h, &w);
	if (!n)
		return 0;
	if (!ring_lost_iterations(a, w, n)) {
		free(w);
		return 0;
	}
	/* the run's peak: every window of the trainer, setup included */
	for (size_t i = 0; i < n; i++)
		if (w[i].has_device && w[i].peak_bytes > a->device_bytes_peak)
			a->device_bytes_peak = w[i].peak_bytes;

	/* points: windows with device memory, from the first step on (setup is no growth) */
	int by_steps = w[n - 1].steps > 0;
	double mean_wall = (double)a->wall_total / (double)a->nit;
	const double *th = a->opt.threshold;
	double sx = 0, sy = 0, sxx = 0, sxy = 0, x0 = NAN, x1 = 0, y0 = 0;
	size_t np = 0;
	uint64_t t0 = 0;
	for (size_t i = 0; i < n; i++) {
		if (!w[i].has_device || (by_steps && !w[i].steps))
			continue;
		if (!np)
			t0 = w[i].end_ns;
		double x = by_steps ? (double)w[i].steps - 1 : (double)(w[i].end_ns - t0) / mean_wall;
		double y = (double)w[i].peak_bytes;
		if (!np) {
			x0 = x;
			y0 = y;
		}
		x1 = x;
		sx += x;
		sy += y;
		sxx += x * x;
		sxy += x * y;
		np++;
	}
	int rc = 0;
	if (np < 3 || x1 - x0 < th[AN_T_MG_MIN_ITERS] || !(mean_wall > 0))
		goto out;
	double dn = (double)np, mx = sx / dn, my = sy / dn, vxx = sxx - dn * mx * mx, vxy = sxy - dn * mx * my;
	if (vxx <= 0)
		goto out;
	double slope = vxy / vxx, icpt = my - slope * mx, ss_tot = 0, ss_res = 0;
	for (size_t i = 0; i < n; i++) {
		if (!w[i].has_device || (by_steps && !w[i].steps))
			continue;
		double x = by_steps ? (double)w[i].steps - 1 : (double)(w[i].end_ns - t0) / mean_wall;
		double y = (double)w[i].peak_bytes, fit = icpt + slope * x;
		ss_tot += (y - my) * (y - my);
		ss_res += (y - fit) * (y - fit);
	}
	if (slope <= 0 || ss_tot <= 0)
		goto out;
	double r2 = 1.0 - ss_res / ss_tot, start = icpt + slope * x0, end = icpt + slope * x1;
	if (start <= 0)
		start = y0;
	double growth = slope * (x1 - x0);
	/* NOTE: when the whole run does not show growth, the raw iterations' verdict stands */
	if (r2 < th[AN_T_MG_MIN_R2] || growth < th[AN_T_MG_MIN_BYTES] || growth < th[AN_T_MG_MIN_FRACTION] * start)
		goto out;

	/* replace the raw iterations' finding (its call sites are the same: kept) */
	struct an_result_finding keep = {0};
	size_t k = 0;
	for (size_t i = 0; i < a->nfnd; i++) {
		if (a->fnd[i].kind == AN_F_MEMORY_GROWTH)
			keep = a->fnd[i];
		else
			a->fnd[k++] = a->fnd[i];
	}
	a->nfnd = k;
	struct an_result_finding *v = realloc(a->fnd, (a->nfnd + 1) * sizeof(*v));
	if (!v) {
		rc = -1;
		goto out;
	}
	a->fnd = v;
	struct an_result_finding *f = &v[a->nfnd++];
	memset(f, 0, sizeof(*f));
	f->kind = AN_F_MEMORY_GROWTH;
	f->first_iteration = 0;
	f->last_iteration = (long)a->nit - 1;
	f->iterations = (long)a->nit;
	an_growth_evidence(f, th, slope, r2, growth, start, end, x1, a->device_capacity);
	an_evidence_str(f, "history", "summaries");
	an_evidence_num(f, "summary_windows", (double)np);
	an_evidence_num(f, "history_iterations", x1 - x0);
	an_evidence_num(f, "history_span_ns", (double)(w[n - 1].end_ns - w[0].begin_ns));
	if (keep.kind == AN_F_MEMORY_GROWTH) {
		memcpy(f->sites, keep.sites, sizeof(f->sites));
		f->nsites = keep.nsites;
		memcpy(f->advice, keep.advice, sizeof(f->advice));
	} else {
		struct an_top sites = c->live_sites;
		an_top_sort(&sites, 1);
		for (size_t i = 0; i < sites.n && f->nsites < AN_MAX_SITES; i++)
			snprintf(f->sites[f->nsites++], sizeof(f->sites[0]), "%s", sites.e[i].key);
		snprintf(f->advice, sizeof(f->advice),
			 "Peak device memory rose steadily over the whole run (per-window summaries: the trace's ring "
			 "no longer holds its beginning): something keeps tensors alive, such as a list of losses "
			 "holding their graphs, gradients accumulated without zero_grad(), or a cache that only grows. "
			 "Log torch.cuda.memory_allocated() per step and find what the sites above still hold.");
	}
out:
	free(w);
	return rc;
}
