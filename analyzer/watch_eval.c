/*
 * watch_eval.c - each tick: every trainer's new records analysed, the
 * iterations they complete added to its history, then the alerts (watch.h,
 * docs/watch.md).
 *
 * Divided into:
 *   1. thresholds;
 *   2. the history of iterations and its windows;
 *   3. one trainer's analysis of its buffer;
 *   4. the alerts, each raised once and cleared once.
 *
 * RATIONALE: the buffer is analysed with the analyzer itself (an_analyze over
 * an an_source of the buffer), so iterations, the breakdown and the device
 * peaks are exactly `stepprof analyze`'s definitions. The analysis sees the
 * records since the last iteration that was still open (NVTX, step marks), or
 * since three iterations before it (automatic detection, which needs periods
 * to compare): the cost of a tick is proportional to what is new.
 */
#include "watch.h"
#include "util.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

/* -------------------------------------------------------- 1. thresholds */

const char *const watch_threshold_name[WATCH_T__COUNT] = {
#define WATCH_T_NAME(id, name, dflt, help) [WATCH_T_##id] = name,
    WATCH_THRESHOLDS(WATCH_T_NAME)
#undef WATCH_T_NAME
};
const char *const watch_threshold_help[WATCH_T__COUNT] = {
#define WATCH_T_HELP(id, name, dflt, help) [WATCH_T_##id] = help,
    WATCH_THRESHOLDS(WATCH_T_HELP)
#undef WATCH_T_HELP
};
const double watch_threshold_default[WATCH_T__COUNT] = {
#define WATCH_T_DFLT(id, name, dflt, help) [WATCH_T_##id] = (dflt),
    WATCH_THRESHOLDS(WATCH_T_DFLT)
#undef WATCH_T_DFLT
};

int watch_set_threshold(struct watch_opts *o, const char *arg, char *err, size_t errlen)
{
	return an_parse_threshold(arg, watch_threshold_name, WATCH_T__COUNT, o->threshold, "watch", err, errlen);
}

/* ------------------------------------------------------------ 2. history */

static uint64_t wall(const struct watch_iter *it)
{
	return it->end_ns > it->start_ns ? it->end_ns - it->start_ns : 0;
}

static int history_add(struct watch_trainer *t, const struct an_iter *a, unsigned window)
{
	struct watch_iter it = {.index = t->iterations, .start_ns = a->start_ns, .end_ns = a->end_ns,
				.alloc_failed = a->alloc_failed, .flushes = a->flushes};
	memcpy(it.bd, a->bd, sizeof(it.bd));
	memcpy(it.dev_peak, a->dev_peak, sizeof(it.dev_peak));
	if (!t->hist) {
		/* the window, or more: a tick may complete many iterations (alloc_retry_storm looks at each) */
		t->hist_cap = window > WATCH_HIST_MIN ? window : WATCH_HIST_MIN;
		t->hist = calloc(t->hist_cap, sizeof(*t->hist));
		t->first = calloc(window ? window : 1, sizeof(*t->first));
		if (!t->hist || !t->first)
			return -1;
	}
	if (t->nfirst < window)
		t->first[t->nfirst++] = it;
	t->hist[(t->hist_head + t->nhist) % t->hist_cap] = it;
	if (t->nhist < t->hist_cap)
		t->nhist++;
	else
		t->hist_head = (t->hist_head + 1) % t->hist_cap;
	t->iterations++;
	t->last_start_ns = a->start_ns;
	for (unsigned d = 0; d < SP_MAX_DEVICES; d++)
		if (it.dev_peak[d] > t->dev_peak[d])
			t->dev_peak[d] = it.dev_peak[d];
	t->step_sum_s += (double)wall(&it) / 1e9;
	for (int c = 0; c < AN_CAT__COUNT; c++)
		t->phase_s[c] += (double)it.bd[c] / 1e9;
	return 0;
}

size_t watch_recent(const struct watch_trainer *t, struct watch_iter *out, size_t n)
{
	if (n > t->nhist)
		n = t->nhist;
	for (size_t i = 0; i < n; i++)
		out[i] = t->hist[(t->hist_head + t->nhist - n + i) % t->hist_cap];
	return n;
}

static int cmp_u64(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
	return x < y ? -1 : x > y;
}

/* Nearest-rank quantile of the wall times of it[0..n). */
static double quantile(const struct watch_iter *it, size_t n, double q)
{
	if (!n)
		return NAN;
	uint64_t *v = malloc(n * sizeof(*v));
	if (!v)
		return NAN;
	for (size_t i = 0; i < n; i++)
		v[i] = wall(&it[i]);
	qsort(v, n, sizeof(*v), cmp_u64);
	size_t k = (size_t)ceil(q * (double)n);
	k = k < 1 ? 1 : k > n ? n : k;
	double r = (double)v[k - 1] / 1e9;
	free(v);
	return r;
}

double watch_step_quantile(const struct watch_trainer *t, unsigned window, double q)
{
	struct watch_iter *r = malloc((window ? window : 1) * sizeof(*r));
	if (!r)
		return NAN;
	size_t n = watch_recent(t, r, window);
	double v = quantile(r, n, q);
	free(r);
	return v;
}

double watch_first_median(const struct watch_trainer *t, unsigned window)
{
	return t->nfirst >= window && window ? quantile(t->first, t->nfirst, 0.5) : NAN;
}

void watch_trainer_free(struct watch_trainer *t)
{
	if (!t)
		return;
	free(t->hist);
	free(t->first);
	free(t);
}

/* ------------------------------------------------------- 3. the analysis */

int watch_analyse(struct watch *w, struct watch_file *f)
{
	if (!f->tr && !(f->tr = calloc(1, sizeof(*f->tr))))
		return -1;
	struct watch_trainer *t = f->tr;
	if (!f->buf_len)
		return 0;
	struct an_options opt;
	an_options_init(&opt);
	opt.step_regex = w->o.step_regex;
	opt.no_ranks = 1;
	struct an_source src;
	watch_buffer_source(f, &src);
	struct an_analysis a;
	char err[256];
	if (an_analyze(&src, &opt, &a, err, sizeof(err)) != 0) {
		util_err(f->path, "%s", err);
		return -1;
	}
	t->source_kind = a.source_kind;
	/* the last iteration may still grow (late GPU spans, an open step): it waits for the next tick */
	size_t complete = f->ended ? a.nit : a.nit ? a.nit - 1 : 0;
	for (size_t i = 0; i < complete; i++)
		if (!t->iterations || a.it[i].start_ns > t->last_start_ns)
			history_add(t, &a.it[i], w->o.window);
	if (!f->ended && a.nit) {
		size_t keep = a.nit - 1;
		if (a.source_kind == AN_SRC_AUTO)
			keep = keep > 3 ? keep - 3 : 0;
		watch_buffer_trim(f, a.it[keep].start_ns);
	} else if (f->ended) {
		watch_buffer_trim(f, UINT64_MAX);
	}
	an_analysis_free(&a);
	return 0;
}

/* ---------------------------------------------------------- 4. alerts */

struct evlist {
	struct watch_event *v;
	size_t n, cap;
};

static void set_alert(struct watch_file *f, int k, int on, struct evlist *out)
{
	struct watch_trainer *t = f->tr;
	if (!!t->alert[k] == !!on)
		return;
	t->alert[k] = (uint8_t)!!on;
	if (out->n == out->cap) {
		size_t c = out->cap ? out->cap * 2 : 8;
		struct watch_event *v = realloc(out->v, c * sizeof(*v));
		if (!v)
			return;
		out->v = v;
		out->cap = c;
	}
	out->v[out->n++] = (struct watch_event){f, k, !!on, t->alert_msg[k]};
}

/* Least squares of y[i] against i: 0, or -1 when it cannot be fitted. */
static int fit(const double *y, size_t n, double *slope, double *icpt, double *r2)
{
	if (n < 2)
		return -1;
	double mx = (double)(n - 1) / 2, my = 0, vxx = 0, vxy = 0, ss_tot = 0, ss_res = 0;
	for (size_t i = 0; i < n; i++)
		my += y[i];
	my /= (double)n;
	for (size_t i = 0; i < n; i++) {
		vxx += ((double)i - mx) * ((double)i - mx);
		vxy += ((double)i - mx) * (y[i] - my);
	}
	if (vxx <= 0)
		return -1;
	*slope = vxy / vxx;
	*icpt = my - *slope * mx;
	for (size_t i = 0; i < n; i++) {
		double e = y[i] - (*icpt + *slope * (double)i);
		ss_res += e * e;
		ss_tot += (y[i] - my) * (y[i] - my);
	}
	*r2 = ss_tot > 0 ? 1.0 - ss_res / ss_tot : 0;
	return 0;
}

/* The live allocations of device d made since t0, summed by site: the largest in t->sites. */
static void growth_sites(struct watch_file *f, unsigned d, uint64_t t0)
{
	struct watch_trainer *t = f->tr;
	struct {
		uint32_t site;
		uint64_t bytes;
	} top[64];
	size_t ntop = 0, pos = 0;
	union hashmap_val *v;
	while ((v = hashmap_next(&f->allocs, &pos, NULL))) {
		const struct watch_alloc *a = v->p;
		if (a->device != d || a->t_ns < t0)
			continue;
		size_t k = 0;
		while (k < ntop && top[k].site != a->site)
			k++;
		if (k == ntop) {
			if (ntop == 64)
				continue;
			top[ntop++] = (typeof(top[0])){a->site, 0};
		}
		top[k].bytes += a->bytes;
	}
	t->nsites = 0;
	for (int s = 0; s < WATCH_MAX_SITES; s++) {
		size_t best = ntop;
		for (size_t k = 0; k < ntop; k++)
			if (top[k].bytes && (best == ntop || top[k].bytes > top[best].bytes))
				best = k;
		if (best == ntop)
			break;
		const char *name = watch_string(f, top[best].site);
		snprintf(t->sites[t->nsites], sizeof(t->sites[0]), "%s", name ? name : "(site not recorded)");
		t->site_bytes[t->nsites++] = top[best].bytes;
		top[best].bytes = 0;
	}
}

static void fmt_duration(double s, char *buf, size_t len)
{
	if (s < 120)
		snprintf(buf, len, "%.0f s", s);
	else if (s < 7200)
		snprintf(buf, len, "%.0f min %.0f s", floor(s / 60), fmod(s, 60));
	else
		snprintf(buf, len, "%.0f h %.0f min", floor(s / 3600), floor(fmod(s, 3600) / 60));
}

static void runaway(struct watch *w, struct watch_file *f, struct evlist *out)
{
	struct watch_trainer *t = f->tr;
	const double *th = w->o.threshold;
	unsigned win = w->o.window;
	struct watch_iter *r = malloc((win ? win : 1) * sizeof(*r));
	double *y = malloc((win ? win : 1) * sizeof(*y));
	size_t n = r && y ? watch_recent(t, r, win) : 0;
	int on = 0;
	if (n >= 2 && (double)n >= th[WATCH_T_RUNAWAY_MIN_ITERS]) {
		double best_left = INFINITY;
		for (unsigned d = 0; d < SP_MAX_DEVICES; d++) {
			if (!(f->dev_seen >> d & 1))
				continue;
			for (size_t i = 0; i < n; i++)
				y[i] = (double)r[i].dev_peak[d];
			double slope, icpt, r2;
			if (fit(y, n, &slope, &icpt, &r2) || slope <= 0 || r2 < th[WATCH_T_RUNAWAY_MIN_R2])
				continue;
			double growth = slope * (double)(n - 1), start = icpt > 0 ? icpt : y[0];
			if (growth < th[WATCH_T_RUNAWAY_MIN_BYTES] || growth < th[WATCH_T_RUNAWAY_MIN_FRACTION] * start)
				continue;
			double cap = (double)f->dev_capacity[d], last = icpt + slope * (double)(n - 1);
			double left = cap > last ? (cap - last) / slope : cap ? 0 : INFINITY;
			if (on && left >= best_left)
				continue;
			on = 1;
			best_left = left;
			t->runaway_dev = (int)d;
			t->runaway_slope = slope;
			t->runaway_r2 = r2;
			/*
			 * The iteration whose peak reaches the capacity, counted from 0 at the first
			 * the watcher saw (the job's own count when it watched from the start).
			 */
			t->runaway_full_iter = isfinite(left) ? (double)r[n - 1].index + left : NAN;
			/*
			 * The time at the window's pace: its span over its iterations, the mean
			 * step (gaps between iterations included). The median would miss the
			 * occasional slow step that the time to come will have too.
			 */
			double step = r[n - 1].end_ns > r[0].start_ns ? (double)(r[n - 1].end_ns - r[0].start_ns) / 1e9 / (double)n
								      : 0;
			t->runaway_full_s = isfinite(left) ? left * step : NAN;
			growth_sites(f, d, r[0].start_ns);
			char b1[32], b2[32], b3[32], when[160] = "", sites[600] = "";
			if (isfinite(left)) {
				char dur[48], clock[16];
				time_t at = time(NULL) + (time_t)t->runaway_full_s;
				struct tm tm;
				localtime_r(&at, &tm);
				strftime(clock, sizeof(clock), "%H:%M:%S", &tm);
				fmt_duration(t->runaway_full_s, dur, sizeof(dur));
				snprintf(when, sizeof(when), "full at iteration %.0f, in about %s (%s)", t->runaway_full_iter,
					 dur, clock);
			} else {
				snprintf(when, sizeof(when), "its capacity is unknown");
			}
			size_t sl = 0;
			for (int s = 0; s < t->nsites && sl < sizeof(sites) - 1; s++) {
				char b[32];
				int k = snprintf(sites + sl, sizeof(sites) - sl, "%s%s (%s)", s ? "; " : "; held by: ",
						 t->sites[s], util_fmt_bytes(t->site_bytes[s], b, sizeof(b)));
				sl += k > 0 ? (size_t)k : 0;
			}
			snprintf(t->alert_msg[WATCH_A_MEMORY_RUNAWAY], sizeof(t->alert_msg[0]),
				 "device %u memory grows %s per iteration (R2 %.2f over %zu iterations; peak %s of %s): %s%s",
				 d, util_fmt_bytes((uint64_t)slope, b1, sizeof(b1)), r2, n,
				 util_fmt_bytes((uint64_t)last, b2, sizeof(b2)),
				 cap ? util_fmt_bytes((uint64_t)cap, b3, sizeof(b3)) : "an unknown capacity", when, sites);
		}
	}
	/* cleared when the fit no longer holds for two ticks in a row: a noisy window does not flap it */
	if (on) {
		t->alert_quiet[WATCH_A_MEMORY_RUNAWAY] = 0;
		set_alert(f, WATCH_A_MEMORY_RUNAWAY, 1, out);
	} else if (t->alert[WATCH_A_MEMORY_RUNAWAY] && ++t->alert_quiet[WATCH_A_MEMORY_RUNAWAY] >= 2) {
		snprintf(t->alert_msg[WATCH_A_MEMORY_RUNAWAY], sizeof(t->alert_msg[0]),
			 "device memory no longer grows steadily");
		set_alert(f, WATCH_A_MEMORY_RUNAWAY, 0, out);
	}
	free(r);
	free(y);
}

static void memory_high(struct watch *w, struct watch_file *f, struct evlist *out)
{
	struct watch_trainer *t = f->tr;
	double share = w->o.threshold[WATCH_T_MEMORY_HIGH_SHARE], worst = 0;
	unsigned wd = 0;
	struct watch_iter last;
	int have = watch_recent(t, &last, 1) == 1;
	for (unsigned d = 0; d < SP_MAX_DEVICES; d++) {
		if (!(f->dev_seen >> d & 1) || !f->dev_capacity[d])
			continue;
		uint64_t use = f->dev_live[d];
		if (have && last.dev_peak[d] > use)
			use = last.dev_peak[d];
		double s = (double)use / (double)f->dev_capacity[d];
		if (s > worst)
			worst = s, wd = d;
	}
	if (worst >= share) {
		char b1[32], b2[32];
		snprintf(t->alert_msg[WATCH_A_MEMORY_HIGH], sizeof(t->alert_msg[0]),
			 "device %u holds %.0f%% of its memory (%s of %s)", wd, worst * 100,
			 util_fmt_bytes((uint64_t)(worst * (double)f->dev_capacity[wd]), b1, sizeof(b1)),
			 util_fmt_bytes(f->dev_capacity[wd], b2, sizeof(b2)));
		set_alert(f, WATCH_A_MEMORY_HIGH, 1, out);
	} else if (t->alert[WATCH_A_MEMORY_HIGH] && worst < share - 0.05) {
		snprintf(t->alert_msg[WATCH_A_MEMORY_HIGH], sizeof(t->alert_msg[0]),
			 "device memory back under %.0f%% of capacity", (share - 0.05) * 100);
		set_alert(f, WATCH_A_MEMORY_HIGH, 0, out);
	}
}

/* An alert whose condition is an event (a failure, a retry burst): cleared after quiet ticks. */
static void event_alert(struct watch *w, struct watch_file *f, int k, int happened, struct evlist *out,
			const char *msg_on, const char *msg_off)
{
	struct watch_trainer *t = f->tr;
	if (happened) {
		t->alert_quiet[k] = 0;
		if (!t->alert[k]) {
			snprintf(t->alert_msg[k], sizeof(t->alert_msg[0]), "%s", msg_on);
			set_alert(f, k, 1, out);
		}
	} else if (t->alert[k] && (double)++t->alert_quiet[k] >= w->o.threshold[WATCH_T_ALLOC_FAILED_CLEAR]) {
		snprintf(t->alert_msg[k], sizeof(t->alert_msg[0]), "%s", msg_off);
		set_alert(f, k, 0, out);
	}
}

static void step_regression(struct watch *w, struct watch_file *f, struct evlist *out)
{
	struct watch_trainer *t = f->tr;
	unsigned win = w->o.window;
	double share = w->o.threshold[WATCH_T_REGRESSION_SHARE];
	if (t->iterations < 2 * (uint64_t)win || t->nfirst < win)
		return;
	struct watch_iter *r = malloc(win * sizeof(*r));
	if (!r)
		return;
	size_t n = watch_recent(t, r, win);
	double m0 = quantile(t->first, t->nfirst, 0.5), m1 = quantile(r, n, 0.5);
	int over = m0 > 0 && m1 / m0 - 1 >= share;
	/* sustained: over the threshold for a whole window of iterations and min_seconds, not a blip */
	if (!over) {
		t->slow_since_ns = 0;
	} else if (!t->slow_since_ns) {
		t->slow_since_ns = w->now_ns;
		t->slow_since_iter = t->iterations;
	}
	int held = over && t->iterations - t->slow_since_iter >= win &&
		   (double)(w->now_ns - t->slow_since_ns) / 1e9 >= w->o.threshold[WATCH_T_REGRESSION_MIN_S];
	if (held && !t->alert[WATCH_A_STEP_REGRESSION]) {
		/* the category whose mean per iteration grew the most */
		int worst = 0;
		double grew = -INFINITY;
		for (int c = 0; c < AN_CAT__COUNT; c++) {
			double a = 0, b = 0;
			for (size_t i = 0; i < t->nfirst; i++)
				a += (double)t->first[i].bd[c];
			for (size_t i = 0; i < n; i++)
				b += (double)r[i].bd[c];
			double g = b / (double)n - a / (double)t->nfirst;
			if (g > grew)
				grew = g, worst = c;
		}
		char b0[32], b1[32], b2[32];
		snprintf(t->alert_msg[WATCH_A_STEP_REGRESSION], sizeof(t->alert_msg[0]),
			 "median step %s, %+.0f%% over the first %u iterations' %s; %s grew the most (+%s per iteration)",
			 util_fmt_ns((uint64_t)(m1 * 1e9), b1, sizeof(b1)), (m1 / m0 - 1) * 100, win,
			 util_fmt_ns((uint64_t)(m0 * 1e9), b0, sizeof(b0)), an_cat_name[worst],
			 util_fmt_ns(grew > 0 ? (uint64_t)grew : 0, b2, sizeof(b2)));
		set_alert(f, WATCH_A_STEP_REGRESSION, 1, out);
	} else if (t->alert[WATCH_A_STEP_REGRESSION] && !held && m0 > 0 && m1 / m0 - 1 < share / 2) {
		snprintf(t->alert_msg[WATCH_A_STEP_REGRESSION], sizeof(t->alert_msg[0]),
			 "median step back within %.0f%% of the first iterations'", share / 2 * 100);
		set_alert(f, WATCH_A_STEP_REGRESSION, 0, out);
	}
	free(r);
}

static void stalled(struct watch *w, struct watch_file *f, struct evlist *out)
{
	struct watch_trainer *t = f->tr;
	double th = w->o.threshold[WATCH_T_STALLED_INTERVALS];
	if (!f->ended && th > 0 && (double)f->quiet_ticks >= th) {
		snprintf(t->alert_msg[WATCH_A_STALLED], sizeof(t->alert_msg[0]),
			 "no record for %.0f s while process %d lives", (double)f->quiet_ticks * w->o.interval_s,
			 (int)f->hdr.pid);
		set_alert(f, WATCH_A_STALLED, 1, out);
	} else if (t->alert[WATCH_A_STALLED] && (!f->quiet_ticks || f->ended)) {
		snprintf(t->alert_msg[WATCH_A_STALLED], sizeof(t->alert_msg[0]), "%s",
			 f->ended ? "the process ended" : "records again");
		set_alert(f, WATCH_A_STALLED, 0, out);
	}
}

int watch_eval(struct watch *w, struct watch_event **ev, size_t *nev)
{
	struct evlist out = {0};
	for (size_t i = 0; i < w->nfiles; i++) {
		struct watch_file *f = w->files[i];
		if (!watch_is_trainer(f) || !f->have_hdr)
			continue;
		if (!f->tr && !(f->tr = calloc(1, sizeof(*f->tr))))
			return -1;
		watch_analyse(w, f);
		struct watch_trainer *t = f->tr;
		/* the iterations completed since the last look (those analysed while a backlog was read too) */
		int storm = 0;
		struct watch_iter *r = malloc((t->iterations - t->checked + 1) * sizeof(*r));
		size_t n = r ? watch_recent(t, r, (size_t)(t->iterations - t->checked)) : 0;
		for (size_t k = 0; k < n; k++)
			storm |= r[k].alloc_failed && r[k].flushes;
		free(r);
		t->checked = t->iterations;
		runaway(w, f, &out);
		memory_high(w, f, &out);
		char msg[160];
		snprintf(msg, sizeof(msg), "%llu failed device allocation%s so far",
			 (unsigned long long)f->alloc_failures, f->alloc_failures == 1 ? "" : "s");
		event_alert(w, f, WATCH_A_ALLOC_FAILED, f->alloc_failures > t->failures_seen, &out, msg,
			    "no failed allocation since");
		t->failures_seen = f->alloc_failures;
		event_alert(w, f, WATCH_A_ALLOC_RETRY_STORM, storm, &out,
			    "a device allocation failed, the allocator released its cache and allocated again "
			    "(PyTorch's num_alloc_retries)",
			    "no release-and-retry since");
		step_regression(w, f, &out);
		stalled(w, f, &out);
	}
	*ev = out.v;
	*nev = out.n;
	return 0;
}
