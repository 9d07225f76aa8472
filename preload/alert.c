/*
 * alert.c - the in-job runaway-memory alert (alert.h): the fit and the rule,
 * the line, and the per-device history the summaries feed.
 *
 * Divided into:
 *   1. the fit and the rule (pure functions, unit-tested),
 *   2. the line (integer formatting into a caller's buffer),
 *   3. the history: per device and level, a ring of the last points,
 *   4. the local time zone, learnt once outside the summaries' path.
 *
 * Everything here runs on the summaries' rare path, which any record may take,
 * a signal handler's included: no malloc, no lock (one summary writer at a
 * time: recorder.c's g_sum_busy), no stdio stream (the line is one write(2)
 * through sp_tf_write_stderr), no float conversion by printf.
 */
#include "alert.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#include "config.h"
#include "tracefile.h"

/* ------------------------------------------------ 1. the fit and the rule */

int sp_alert_fit(const struct sp_alert_pt *p, unsigned n, struct sp_alert_fit *f)
{
	memset(f, 0, sizeof(*f));
	if (n < 3)
		return -1;
	/* two passes over deviations from the means: peaks of 1e11 squared would lose the small differences */
	double mx = 0, my = 0;
	for (unsigned i = 0; i < n; i++) {
		mx += (double)(p[i].t_ns - p[0].t_ns) / 1e9;
		my += (double)p[i].peak;
	}
	mx /= n;
	my /= n;
	double sxx = 0, sxy = 0, syy = 0;
	for (unsigned i = 0; i < n; i++) {
		double dx = (double)(p[i].t_ns - p[0].t_ns) / 1e9 - mx, dy = (double)p[i].peak - my;
		sxx += dx * dx;
		sxy += dx * dy;
		syy += dy * dy;
		if (i && p[i].peak > p[i - 1].peak)
			f->rises++;
	}
	f->n = n;
	f->span_ns = p[n - 1].t_ns - p[0].t_ns;
	if (sxx <= 0 || syy <= 0)
		return -1;
	f->slope = sxy / sxx;
	f->r2 = sxy * sxy / (sxx * syy);
	f->growth = f->slope * (double)f->span_ns / 1e9;
	f->end = my + f->slope * ((double)f->span_ns / 1e9 - mx);
	return 0;
}

int sp_alert_runaway(const struct sp_alert_fit *f, uint64_t capacity)
{
	return capacity && f->n >= 3 && f->slope > 0 && f->r2 >= SP_ALERT_MIN_R2 && 2 * f->rises >= f->n - 1 &&
	       f->growth >= (double)SP_ALERT_MIN_BYTES && f->growth >= SP_ALERT_MIN_SHARE * (double)capacity;
}

int sp_alert_cleared(const struct sp_alert_fit *f, uint64_t capacity)
{
	return f->slope <= 0 || f->growth < (double)SP_ALERT_MIN_BYTES / 2 ||
	       f->growth < SP_ALERT_MIN_SHARE * (double)capacity / 2;
}

/* ------------------------------------------------------------- 2. the line */

struct out {
	char *b;
	size_t cap, n; /* cap > 0; n < cap */
};

__attribute__((format(printf, 2, 3))) static void put(struct out *o, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	int k = vsnprintf(o->b + o->n, o->cap - o->n, fmt, ap);
	va_end(ap);
	if (k > 0)
		o->n = o->n + (size_t)k < o->cap ? o->n + (size_t)k : o->cap - 1;
}

/* 8.0 MiB, 312 MiB, 1.5 GiB: one decimal under 10 of the unit */
static void put_bytes(struct out *o, double v)
{
	static const char *const unit[] = {"B", "KiB", "MiB", "GiB", "TiB", "PiB"};
	unsigned u = 0;
	if (v < 0)
		v = 0;
	while (v >= 1024 && u + 1 < sizeof(unit) / sizeof(unit[0])) {
		v /= 1024;
		u++;
	}
	unsigned long long tenths = (unsigned long long)(v * 10 + 0.5);
	if (u == 0 || tenths >= 100)
		put(o, "%llu %s", (tenths + 5) / 10, unit[u]);
	else
		put(o, "%llu.%llu %s", tenths / 10, tenths % 10, unit[u]);
}

/* 42 s, 1 min 27 s, 3 h 12 min, 2 d 5 h */
static void put_duration(struct out *o, double s)
{
	if (s > 1e9)
		s = 1e9;
	unsigned long long t = s > 0 ? (unsigned long long)(s + 0.5) : 0;
	unsigned long long min = (t + 30) / 60, h = (min + 30) / 60;
	if (t < 60)
		put(o, "%llu s", t);
	else if (t < 3600)
		put(o, "%llu min %llu s", t / 60, t % 60);
	else if (min < 24 * 60)
		put(o, "%llu h %llu min", min / 60, min % 60);
	else
		put(o, "%llu d %llu h", h / 24, h % 24);
}

/* The Gregorian date of a count of days since 1970-01-01 (H. Hinnant's civil_from_days). */
static void civil(int64_t days, int64_t *y, unsigned *m, unsigned *d)
{
	days += 719468;
	int64_t era = (days >= 0 ? days : days - 146096) / 146097;
	unsigned doe = (unsigned)(days - era * 146097);
	unsigned yoe = (doe - doe / 1460 + doe / 36524 - doe / 146096) / 365;
	unsigned doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
	unsigned mp = (5 * doy + 2) / 153;
	*d = doy - (153 * mp + 2) / 5 + 1;
	*m = mp < 10 ? mp + 3 : mp - 9;
	*y = (int64_t)yoe + era * 400 + (*m <= 2);
}

/* 16:42:10 CET, with the date when it is not within the next 20 hours */
static void put_clock(struct out *o, const struct sp_alert_msg *m)
{
	double ahead = m->to_full_s > 0 ? m->to_full_s : 0;
	if (ahead > 1e9)
		ahead = 1e9;
	int64_t t = m->now_s + (int64_t)(ahead + 0.5) + m->gmtoff;
	int64_t days = (t >= 0 ? t : t - 86399) / 86400;
	unsigned sod = (unsigned)(t - days * 86400);
	if (ahead > 20 * 3600) {
		int64_t y;
		unsigned mo, d;
		civil(days, &y, &mo, &d);
		put(o, "%04lld-%02u-%02u ", (long long)y, mo, d);
	}
	put(o, "%02u:%02u:%02u", sod / 3600, sod / 60 % 60, sod % 60);
	if (m->zone && m->zone[0])
		put(o, " %s", m->zone);
}

size_t sp_alert_format(char *buf, size_t cap, const struct sp_alert_msg *m)
{
	if (cap < 2) {
		if (cap)
			buf[0] = 0;
		return 0;
	}
	struct out o = {buf, cap, 0};
	buf[0] = 0;
	put(&o, "stepprof: device %u memory grows ", m->dev);
	put_bytes(&o, m->rate);
	put(&o, "/s over the last ");
	put_duration(&o, (double)m->span_ns / 1e9);
	put(&o, " (peak ");
	put_bytes(&o, (double)m->peak);
	put(&o, " of ");
	put_bytes(&o, (double)m->capacity);
	if (m->to_full_s <= 0) {
		put(&o, "); at this rate it is full now");
	} else {
		put(&o, "); at this rate it is full in about ");
		put_duration(&o, m->to_full_s);
		if (m->now_s >= 0) {
			put(&o, " (at ");
			put_clock(&o, m);
			put(&o, ")");
		}
	}
	put(&o, "; stepprof analyze %s %s", m->dir, m->sites ? "names the allocation sites" : "shows the growth");
	/* the newline, also after a line cut at cap */
	if (o.n > o.cap - 2)
		o.n = o.cap - 2;
	buf[o.n++] = '\n';
	buf[o.n] = 0;
	return o.n;
}

/* -------------------------------------------------------- 3. the history */

struct level {
	struct sp_alert_pt pt[SP_ALERT_POINTS]; /* a ring: the oldest at head once full */
	unsigned n, head;
	unsigned group_n;    /* points since the last one handed to the next level */
	uint64_t group_peak; /* their highest peak */
};

struct dev_state {
	struct level lv[SP_ALERT_LEVELS];
	unsigned lines;	 /* lines written for this device */
	unsigned raised; /* the level that raised the alert, + 1; 0: not raised */
};

/* NOTE: about 7 KiB of .bss, touched only by a process whose summaries have a device */
static struct dev_state g_dev[SP_MAX_DEVICES];
static int g_fed; /* some device was fed: a reset has something to clear */

static int g_tz_state; /* 0 unknown, 1 being learnt, 2 known */
static long g_gmtoff;
static char g_zone[8];

static void say(unsigned dev, const struct sp_alert_pt *last, const struct sp_alert_fit *f, uint64_t capacity,
		uint64_t now_ns, const char *dir)
{
	struct timespec rt;
	int tz = __atomic_load_n(&g_tz_state, __ATOMIC_ACQUIRE) == 2;
	struct sp_alert_msg m = {
	    .dev = dev,
	    .rate = f->slope,
	    .span_ns = f->span_ns,
	    .peak = last->peak,
	    .capacity = capacity,
	    .to_full_s = ((double)capacity - f->end) / f->slope -
			 (now_ns > last->t_ns ? (double)(now_ns - last->t_ns) / 1e9 : 0),
	    .now_s = clock_gettime(CLOCK_REALTIME, &rt) == 0 ? (int64_t)rt.tv_sec : -1,
	    .gmtoff = tz ? g_gmtoff : 0,
	    .zone = tz ? g_zone : "UTC",
	    .dir = dir,
	    .sites = sp_cfg.SITES,
	};
	/*
	 * Static, not on a stack that may be a signal handler's small one: one
	 * summary writer at a time (recorder.c's g_sum_busy, which a signal
	 * handler interrupting the writer also finds taken).
	 */
	static char line[1536];
	size_t n = sp_alert_format(line, sizeof(line), &m);
	sp_tf_write_stderr(line, n);
}

/* The level's points, oldest first, fitted: raise or clear the device's alert. */
static int evaluate(struct dev_state *d, unsigned dev, unsigned k, uint64_t capacity, uint64_t now_ns, const char *dir)
{
	const struct level *l = &d->lv[k];
	struct sp_alert_pt p[SP_ALERT_POINTS];
	for (unsigned i = 0; i < SP_ALERT_POINTS; i++)
		p[i] = l->pt[(l->head + i) % SP_ALERT_POINTS];
	struct sp_alert_fit f;
	int flat = sp_alert_fit(p, SP_ALERT_POINTS, &f) != 0;
	if (d->raised) {
		if (d->raised == k + 1 && (flat || sp_alert_cleared(&f, capacity)))
			d->raised = 0;
		return 0;
	}
	if (flat || !sp_alert_runaway(&f, capacity))
		return 0;
	d->raised = k + 1;
	d->lines++;
	say(dev, &p[SP_ALERT_POINTS - 1], &f, capacity, now_ns, dir);
	return 1;
}

static int feed(struct dev_state *d, unsigned dev, unsigned k, struct sp_alert_pt pt, uint64_t capacity,
		uint64_t now_ns, const char *dir)
{
	struct level *l = &d->lv[k];
	if (l->n < SP_ALERT_POINTS) {
		l->pt[(l->head + l->n) % SP_ALERT_POINTS] = pt;
		l->n++;
	} else {
		l->pt[l->head] = pt;
		l->head = (l->head + 1) % SP_ALERT_POINTS;
	}
	int said = l->n == SP_ALERT_POINTS && evaluate(d, dev, k, capacity, now_ns, dir);
	if (k + 1 < SP_ALERT_LEVELS) {
		if (pt.peak > l->group_peak)
			l->group_peak = pt.peak;
		if (++l->group_n == SP_ALERT_GROUP) {
			struct sp_alert_pt up = {pt.t_ns, l->group_peak};
			l->group_n = 0;
			l->group_peak = 0;
			said |= feed(d, dev, k + 1, up, capacity, now_ns, dir);
		}
	}
	return said;
}

int sp_alert_window(unsigned dev, uint64_t t_end_ns, uint64_t peak, uint64_t capacity, uint64_t now_ns, const char *dir)
{
	if (!sp_cfg.ALERTS || sp_cfg.QUIET || dev >= SP_MAX_DEVICES)
		return 0;
	struct dev_state *d = &g_dev[dev];
	if (d->lines >= SP_ALERT_MAX_LINES)
		return 0; /* said all it may: nothing more to keep */
	g_fed = 1;
	struct sp_alert_pt pt = {t_end_ns, peak};
	return feed(d, dev, 0, pt, capacity, now_ns, dir);
}

void sp_alert_reset(void)
{
	if (!g_fed)
		return;
	memset(g_dev, 0, sizeof(g_dev));
	g_fed = 0;
}

/* ------------------------------------------------------ 4. the time zone */

void sp_alert_clock_prepare(void)
{
	int s = 0;
	if (!__atomic_compare_exchange_n(&g_tz_state, &s, 1, 0, __ATOMIC_ACQ_REL, __ATOMIC_RELAXED))
		return;
	time_t t = time(NULL);
	struct tm tm;
	if (!localtime_r(&t, &tm)) {
		__atomic_store_n(&g_tz_state, 0, __ATOMIC_RELEASE);
		return;
	}
	/* NOTE: the offset of now: a change to or from summer time later in the run is not followed */
	g_gmtoff = tm.tm_gmtoff;
	snprintf(g_zone, sizeof(g_zone), "%s", tm.tm_zone ? tm.tm_zone : "");
	__atomic_store_n(&g_tz_state, 2, __ATOMIC_RELEASE);
}
