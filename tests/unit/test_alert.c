/*
 * test_alert.c - the in-job runaway-memory alert (preload/alert.c) on points
 * the test makes itself:
 *   1. the fit and the rule: a steady leak is a runaway; a flat device, a
 *      start-up staircase, one spike, noise, growth that is a small share of a
 *      large device, and an unknown capacity are not;
 *   2. the history: one line per runaway, raised once, cleared when the memory
 *      stops growing, raised at most once more; a slow leak found at a coarser
 *      level; STEPPROF_ALERTS=0 and STEPPROF_QUIET=1 say nothing;
 *   3. the line: its exact words, durations, the time of day, a cut line.
 * The lines the history writes go to stderr: each test that feeds it sends its
 * own stderr to a file and reads them back.
 */
#include <criterion/criterion.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "alert.h"
#include "config.h"
#include "testlib.h"

#define MiB (1ull << 20)
#define GiB (1ull << 30)
#define SEC 1000000000ull

/* ------------------------------------------------ 1. the fit and the rule */

/* n points one second apart, peak[i] bytes: sp_alert_fit of them. */
static int fit_of(const uint64_t *peak, unsigned n, struct sp_alert_fit *f)
{
	struct sp_alert_pt p[64];
	cr_assert_leq(n, 64);
	for (unsigned i = 0; i < n; i++)
		p[i] = (struct sp_alert_pt){.t_ns = 5 * SEC + i * SEC, .peak = peak[i]};
	return sp_alert_fit(p, n, f);
}

Test(alert, fit_of_a_line_is_exact)
{
	uint64_t y[10];
	for (unsigned i = 0; i < 10; i++)
		y[i] = 100 * MiB + i * 24 * MiB;
	struct sp_alert_fit f;
	cr_assert_eq(fit_of(y, 10, &f), 0);
	cr_expect_float_eq(f.slope, 24.0 * MiB, 1e-3, "slope %f", f.slope);
	cr_expect_float_eq(f.r2, 1.0, 1e-12);
	cr_expect_float_eq(f.growth, 9 * 24.0 * MiB, 1e-3);
	cr_expect_float_eq(f.end, (double)y[9], 1e-3);
	cr_expect_eq(f.span_ns, 9 * SEC);
	cr_expect_eq(f.rises, 9);
}

Test(alert, a_steady_leak_is_a_runaway)
{
	uint64_t y[10];
	for (unsigned i = 0; i < 10; i++)
		y[i] = 30 * MiB + i * 24 * MiB + (i % 3) * MiB / 2; /* a little jitter */
	struct sp_alert_fit f;
	cr_assert_eq(fit_of(y, 10, &f), 0);
	cr_expect(sp_alert_runaway(&f, 512 * MiB), "r2 %f growth %f", f.r2, f.growth);
	/* the same leak on a device whose capacity is unknown: no line (no projection to give) */
	cr_expect_not(sp_alert_runaway(&f, 0));
}

Test(alert, flat_memory_has_no_fit)
{
	uint64_t y[10];
	for (unsigned i = 0; i < 10; i++)
		y[i] = 300 * MiB;
	struct sp_alert_fit f;
	cr_expect_neq(fit_of(y, 10, &f), 0);
}

Test(alert, a_startup_staircase_is_no_runaway)
{
	/* weights, then optimizer state, then activations: three jumps, a good line through them */
	uint64_t y[10] = {1 * GiB, 1 * GiB, 1 * GiB, 3 * GiB, 3 * GiB, 3 * GiB, 5 * GiB, 5 * GiB, 6 * GiB, 6 * GiB};
	struct sp_alert_fit f;
	cr_assert_eq(fit_of(y, 10, &f), 0);
	cr_expect_geq(f.r2, SP_ALERT_MIN_R2, "the staircase must fit well for this test to mean something: %f", f.r2);
	cr_expect_not(sp_alert_runaway(&f, 80 * GiB), "rises %u of 9", f.rises);
}

Test(alert, one_spike_is_no_runaway)
{
	/* a fragmentation peak in the newest window: steep, but no line fits it */
	uint64_t y[10];
	for (unsigned i = 0; i < 10; i++)
		y[i] = i == 9 ? 1000 * MiB : 10 * MiB;
	struct sp_alert_fit f;
	cr_assert_eq(fit_of(y, 10, &f), 0);
	cr_expect_gt(f.growth, 100.0 * MiB);
	cr_expect_not(sp_alert_runaway(&f, GiB), "r2 %f", f.r2);
}

Test(alert, noisy_growth_is_no_runaway)
{
	uint64_t y[10] = {100 * MiB, 400 * MiB, 120 * MiB, 380 * MiB, 150 * MiB,
			  420 * MiB, 160 * MiB, 450 * MiB, 200 * MiB, 460 * MiB};
	struct sp_alert_fit f;
	cr_assert_eq(fit_of(y, 10, &f), 0);
	cr_expect_gt(f.slope, 0);
	cr_expect_lt(f.r2, SP_ALERT_MIN_R2);
	cr_expect_not(sp_alert_runaway(&f, GiB));
}

Test(alert, growth_is_weighed_against_the_capacity)
{
	/* 24 MiB/s for 9 s: 216 MiB, a runaway on 1 GiB (21%), not on 80 GiB (0.26%) */
	uint64_t y[10];
	for (unsigned i = 0; i < 10; i++)
		y[i] = GiB / 8 + i * 24 * MiB;
	struct sp_alert_fit f;
	cr_assert_eq(fit_of(y, 10, &f), 0);
	cr_expect(sp_alert_runaway(&f, GiB));
	cr_expect_not(sp_alert_runaway(&f, 80 * GiB));
	/* and a small growth is none whatever the device: 2 MiB/s, 18 MiB on a 64 MiB device */
	for (unsigned i = 0; i < 10; i++)
		y[i] = 8 * MiB + i * 2 * MiB;
	cr_assert_eq(fit_of(y, 10, &f), 0);
	cr_expect_not(sp_alert_runaway(&f, 64 * MiB));
}

/* ---------------------------------------------------------- 2. the history */

static char errpath[256];

/* This test's stderr into a file; alerts on, as a default configuration has them. */
static void capture_stderr(void)
{
	snprintf(errpath, sizeof(errpath), "/tmp/stepprof-test-alert-%d.err", (int)getpid());
	int fd = open(errpath, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
	cr_assert_geq(fd, 0);
	cr_assert_geq(dup2(fd, 2), 0);
	close(fd);
	sp_cfg.ALERTS = 1;
	sp_cfg.QUIET = 0;
	sp_cfg.SITES = 1;
	sp_alert_reset();
}

/* What this test wrote on stderr (malloc'd), the file removed. */
static char *captured(void)
{
	char *s = sp_t_read_file(errpath, NULL);
	unlink(errpath);
	cr_assert_not_null(s);
	return s;
}

static unsigned count(const char *s, const char *what)
{
	unsigned n = 0;
	for (const char *p = s; (p = strstr(p, what)); p++)
		n++;
	return n;
}

/* Windows w0..w1 (exclusive) of device 0, 1 s each, peak(w); returns how many lines were written. */
static unsigned feed(unsigned w0, unsigned w1, uint64_t (*peak)(unsigned), uint64_t capacity, unsigned *first)
{
	unsigned said = 0;
	for (unsigned w = w0; w < w1; w++) {
		uint64_t t = (w + 1) * SEC;
		if (sp_alert_window(0, t, peak(w), capacity, t + SEC / 100, "/tmp/trace dir") && !said++ && first)
			*first = w;
	}
	return said;
}

static uint64_t leak_24(unsigned w)
{
	return 20 * MiB + w * 24 * MiB;
}

Test(alert, a_runaway_is_said_once_after_ten_windows)
{
	capture_stderr();
	unsigned first = 0;
	/* 20 windows of a 24 MiB/s leak on a 1 GiB device: said at the 10th window, not again */
	cr_expect_eq(feed(0, 20, leak_24, GiB, &first), 1);
	cr_expect_eq(first, SP_ALERT_POINTS - 1);
	char *s = captured();
	cr_expect_eq(count(s, "stepprof: "), 1, "%s", s);
	cr_expect(strstr(s, "stepprof: device 0 memory grows 24 MiB/s over the last 9 s (peak 236 MiB of 1.0 GiB); "
			    "at this rate it is full in about 33 s (at "),
		  "%s", s);
	cr_expect(strstr(s, "); stepprof analyze /tmp/trace dir names the allocation sites\n"), "%s", s);
	free(s);
}

/* 10 windows of leak, 10 flat, 10 of leak, 10 flat, 10 of leak: three runaways, each after a stop */
static uint64_t bursts(unsigned w)
{
	uint64_t base = 10 * MiB;
	for (unsigned k = 0; k < w; k++)
		if ((k / 10) % 2 == 0)
			base += 24 * MiB;
	return base;
}

Test(alert, a_runaway_that_stops_and_starts_again_is_said_once_more_at_most)
{
	capture_stderr();
	unsigned first = 0;
	/* peaks grow by 24 MiB in windows 0-9, 20-29 and 40-49: up to 730 MiB of 8 GiB */
	cr_expect_eq(feed(0, 12, bursts, 8 * GiB, &first), 0, "under 5%% of 8 GiB in 9 s: no line");
	sp_alert_reset();
	cr_expect_eq(feed(0, 70, bursts, GiB, &first), 2);
	char *s = captured();
	cr_expect_eq(count(s, "stepprof: device 0 memory grows"), 2, "%s", s);
	free(s);
}

Test(alert, a_runaway_that_never_stops_is_said_once)
{
	capture_stderr();
	/* a leak whose rate wobbles: it never looks stopped, so never cleared, never said again */
	unsigned said = 0;
	for (unsigned w = 0; w < 40; w++) {
		uint64_t t = (w + 1) * SEC, peak = 10 * MiB + w * 12 * MiB + (w % 4 == 3 ? 0 : (w % 4) * 3 * MiB);
		said += (unsigned)sp_alert_window(0, t, peak, GiB, t, "/d");
	}
	cr_expect_eq(said, 1);
	free(captured());
}

static uint64_t slow(unsigned w)
{
	return 64 * MiB + (uint64_t)w * MiB;
}

Test(alert, a_slow_leak_is_found_over_a_longer_span)
{
	capture_stderr();
	unsigned first = 0;
	/* 1 MiB/s: 9 MiB over ten windows is nothing, 72 MiB over ten groups of eight is a runaway */
	cr_expect_eq(feed(0, 200, slow, 512 * MiB, &first), 1);
	cr_expect_eq(first, SP_ALERT_POINTS * SP_ALERT_GROUP - 1, "said at window %u", first);
	char *s = captured();
	cr_expect(strstr(s, "memory grows 1.0 MiB/s over the last 1 min 12 s (peak 143 MiB of 512 MiB); at this "
			    "rate it is full in about 6 min 9 s"),
		  "%s", s);
	free(s);
}

Test(alert, alerts_off_or_quiet_say_nothing)
{
	capture_stderr();
	sp_cfg.ALERTS = 0;
	cr_expect_eq(feed(0, 30, leak_24, GiB, NULL), 0);
	sp_cfg.ALERTS = 1;
	sp_cfg.QUIET = 1;
	cr_expect_eq(feed(0, 30, leak_24, GiB, NULL), 0);
	sp_cfg.QUIET = 0;
	/* and the same windows with both back on: said (the test above would otherwise prove nothing) */
	sp_alert_reset();
	cr_expect_eq(feed(0, 30, leak_24, GiB, NULL), 1);
	char *s = captured();
	cr_expect_eq(count(s, "stepprof: "), 1, "%s", s);
	free(s);
}

Test(alert, each_device_has_its_own_history)
{
	capture_stderr();
	unsigned said = 0;
	for (unsigned w = 0; w < 20; w++) {
		uint64_t t = (w + 1) * SEC;
		said += (unsigned)sp_alert_window(0, t, 100 * MiB, GiB, t, "/d");	    /* flat */
		said += (unsigned)sp_alert_window(3, t, leak_24(w), GiB, t, "/d");	    /* leaks */
		said += (unsigned)sp_alert_window(5, t, leak_24(w) / 64, 4 * GiB, t, "/d"); /* too slow */
	}
	cr_expect_eq(said, 1);
	char *s = captured();
	cr_expect(strstr(s, "stepprof: device 3 memory grows") == s, "%s", s);
	free(s);
}

/* ------------------------------------------------------------- 3. the line */

static struct sp_alert_msg msg(void)
{
	return (struct sp_alert_msg){
	    .dev = 0,
	    .rate = 8.0 * MiB,
	    .span_ns = 9 * SEC,
	    .peak = 312 * MiB,
	    .capacity = GiB,
	    .to_full_s = 87.2,
	    .now_s = 1796139643, /* 2026-12-01 15:40:43 UTC */
	    .gmtoff = 3600,
	    .zone = "CET",
	    .dir = "/home/me/stepprof-20261201-164000-42",
	    .sites = 1,
	};
}

Test(alert, the_line_says_rate_peak_capacity_and_when_it_is_full)
{
	struct sp_alert_msg m = msg();
	char buf[1024];
	size_t n = sp_alert_format(buf, sizeof(buf), &m);
	cr_expect_str_eq(buf, "stepprof: device 0 memory grows 8.0 MiB/s over the last 9 s (peak 312 MiB of 1.0 GiB); "
			      "at this rate it is full in about 1 min 27 s (at 16:42:10 CET); stepprof analyze "
			      "/home/me/stepprof-20261201-164000-42 names the allocation sites\n");
	cr_expect_eq(n, strlen(buf));
}

Test(alert, the_line_gives_the_date_of_a_distant_full_and_words_for_its_other_cases)
{
	struct sp_alert_msg m = msg();
	char buf[1024];
	m.rate = 300.0 * 1024;
	m.span_ns = 4620 * SEC; /* 1 h 17 min */
	m.to_full_s = 2 * 86400 + 5 * 3600;
	m.now_s = 1772319600; /* 2026-02-28 23:00:00 UTC */
	m.gmtoff = 0;
	m.zone = "UTC";
	m.sites = 0;
	sp_alert_format(buf, sizeof(buf), &m);
	cr_expect_str_eq(buf, "stepprof: device 0 memory grows 300 KiB/s over the last 1 h 17 min (peak 312 MiB of "
			      "1.0 GiB); at this rate it is full in about 2 d 5 h (at 2026-03-03 04:00:00 UTC); "
			      "stepprof analyze /home/me/stepprof-20261201-164000-42 shows the growth\n");
	m = msg();
	m.to_full_s = -3;
	m.dev = 2;
	sp_alert_format(buf, sizeof(buf), &m);
	cr_expect(strstr(buf, "stepprof: device 2 memory grows 8.0 MiB/s") == buf, "%s", buf);
	cr_expect(strstr(buf, "(peak 312 MiB of 1.0 GiB); at this rate it is full now; stepprof analyze"), "%s", buf);
	m = msg();
	m.to_full_s = 2 * 3600 - 20; /* 1 h 59 min 40 s: rounds to 2 h 0 min */
	m.now_s = -1;		     /* no clock: no time of day */
	sp_alert_format(buf, sizeof(buf), &m);
	cr_expect(strstr(buf, "full in about 2 h 0 min; stepprof analyze"), "%s", buf);
}

Test(alert, a_cut_line_still_ends_its_line)
{
	struct sp_alert_msg m = msg();
	char buf[40];
	size_t n = sp_alert_format(buf, sizeof(buf), &m);
	cr_expect_eq(n, sizeof(buf) - 1);
	cr_expect_eq(buf[n - 1], '\n');
	cr_expect_eq(buf[n], 0);
	cr_expect(strncmp(buf, "stepprof: device 0 memory grows", 31) == 0, "%s", buf);
}
