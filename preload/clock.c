/*
 * clock.c - the choice of sp_now()'s clock and the TSC segment's upkeep
 * (see clock.h for the scheme and its bounds).
 *
 * State outside the published segment, touched only by the thread that holds
 * the odd sequence count: the last calibration point (a TSC/CLOCK_MONOTONIC
 * pair measured together) and the length of the next segment, which starts
 * at 2 ms and doubles up to SP_CLK_SEG_NS, so that the first rates, measured
 * over short spans, are not trusted for long.
 */
#include <fcntl.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "clock.h"
#if SP_CLK_HAVE_TSC
#include <cpuid.h>
#endif

struct sp_clk sp_clk; /* zero: no segment, every read takes clock_gettime */

static uint64_t g_cal_tsc, g_cal_ns; /* last calibration point (0: none yet) */
static uint64_t g_seg_ns;	     /* length of the next segment */
static uint64_t g_rate;		     /* the last rate measured, ns per tick << 32 (0: none yet) */

#define SEG_FIRST_NS 2000000ull	 /* the first rate is measured over >= 2 ms */
#define MAX_BRACKET_TICKS 20000ull /* a pair measured across a preemption is not used */
#define MAX_STEP_NS 50000ull	 /* further off than this, the segment restarts at the true time */

/* One TSC/CLOCK_MONOTONIC pair: the tightest of three brackets. 0: all too wide. */
static int measure(uint64_t *tsc, uint64_t *ns)
{
	uint64_t best = UINT64_MAX;
	for (int i = 0; i < 3; i++) {
		uint64_t a = sp_clock_ticks();
		uint64_t m = sp_clock_mono();
		uint64_t b = sp_clock_ticks();
		if (b > a && b - a < best) {
			best = b - a;
			*tsc = a + (b - a) / 2;
			*ns = m;
		}
	}
	return best <= MAX_BRACKET_TICKS;
}

static inline uint64_t scale(uint64_t d, uint64_t mult)
{
	return (uint64_t)(((unsigned __int128)d * mult) >> 32);
}

/* x << 32 / y in 128 bits; 0 when it does not fit 64 bits. */
static uint64_t ratio32(uint64_t x, uint64_t y)
{
	if (!y)
		return 0;
	unsigned __int128 q = ((unsigned __int128)x << 32) / y;
	return q >> 64 ? 0 : (uint64_t)q;
}

/*
 * Holding the odd count: calibration starts again at (ct, cn), with no segment
 * (readers take clock_gettime until the first span is long enough to measure).
 */
static uint64_t restart(uint64_t ct, uint64_t cn)
{
	__atomic_store_n(&sp_clk.tsc_len, 0, __ATOMIC_RELAXED);
	g_cal_tsc = ct;
	__atomic_store_n(&g_cal_ns, cn, __ATOMIC_RELAXED);
	g_rate = 0;
	g_seg_ns = SEG_FIRST_NS;
	return cn;
}

/*
 * Holding the odd count: calibrate and publish the next segment. Returns the
 * time to hand back (the new segment's start, or the true time).
 */
static uint64_t recalibrate(void)
{
	uint64_t ct, cn;
	if (!measure(&ct, &cn))
		return sp_clock_mono(); /* preempted three times: next read retries */
	if (!g_cal_tsc || ct <= g_cal_tsc || cn <= g_cal_ns)
		return restart(ct, cn); /* no point yet, or the TSC went back (a VM moved to another host) */
	if (cn - g_cal_ns < SEG_FIRST_NS / 2)
		return cn; /* too short a span to measure a rate over: keep the segment */
	uint64_t rate = ratio32(cn - g_cal_ns, ct - g_cal_tsc); /* ns per tick << 32 */
	/*
	 * A rate off the last one by more than 1/32 is no NTP correction (at most
	 * 500 ppm) but a TSC that jumped within the span (a VM migrated, paused or
	 * resumed): that rate, used for the next segment, would put timestamps
	 * 100 ms behind CLOCK_MONOTONIC at its end after a 100 ms jump in a 64 ms
	 * span, or abandon the TSC for good (a rate out of range). Measured again
	 * from here.
	 */
	if (g_rate && (rate > g_rate + (g_rate >> 5) || rate < g_rate - (g_rate >> 5)))
		return restart(ct, cn);
	/* 0.25 to 8 GHz: anything else is not a TSC this code understands */
	if (rate < (1ull << 32) / 8 || rate > (1ull << 32) * 4) {
		__atomic_store_n(&sp_clk.mode, SP_CLK_VDSO, __ATOMIC_RELAXED);
		return cn;
	}
	/* where the current segment says we are: the new one starts there (no step) */
	uint64_t start = cn;
	uint64_t len = __atomic_load_n(&sp_clk.tsc_len, __ATOMIC_RELAXED);
	uint64_t tsc0 = __atomic_load_n(&sp_clk.tsc0, __ATOMIC_RELAXED);
	if (len && ct >= tsc0) {
		uint64_t old = __atomic_load_n(&sp_clk.ns0, __ATOMIC_RELAXED) +
			       scale(ct - tsc0, __atomic_load_n(&sp_clk.mult, __ATOMIC_RELAXED));
		if (old + MAX_STEP_NS >= cn && old <= cn + MAX_STEP_NS)
			start = old;
	}
	uint64_t seg = g_seg_ns ? g_seg_ns : SEG_FIRST_NS;
	uint64_t ticks = ratio32(seg, rate); /* seg / (rate / 2^32) */
	if (!ticks)
		return cn;
	/* the slope that takes start to the true time at the segment's end */
	uint64_t mult = ratio32(cn + seg - start, ticks);
	if (!mult)
		return cn;
	__atomic_store_n(&sp_clk.tsc0, ct, __ATOMIC_RELAXED);
	__atomic_store_n(&sp_clk.ns0, start, __ATOMIC_RELAXED);
	__atomic_store_n(&sp_clk.mult, mult, __ATOMIC_RELAXED);
	__atomic_store_n(&sp_clk.tsc_len, ticks, __ATOMIC_RELAXED);
	g_cal_tsc = ct;
	__atomic_store_n(&g_cal_ns, cn, __ATOMIC_RELAXED);
	g_rate = rate;
	g_seg_ns = seg * 2 > SP_CLK_SEG_NS ? SP_CLK_SEG_NS : seg * 2;
	return start;
}

uint64_t sp_now_slow(uint64_t t)
{
	if (__atomic_load_n(&sp_clk.mode, __ATOMIC_RELAXED) != SP_CLK_TSC)
		return sp_clock_mono();
	uint32_t s = __atomic_load_n(&sp_clk.seq, __ATOMIC_ACQUIRE);
	if (s & 1)
		return sp_clock_mono(); /* being rewritten */
	uint64_t tsc0 = __atomic_load_n(&sp_clk.tsc0, __ATOMIC_RELAXED);
	uint64_t len = __atomic_load_n(&sp_clk.tsc_len, __ATOMIC_RELAXED);
	uint64_t ns0 = __atomic_load_n(&sp_clk.ns0, __ATOMIC_RELAXED);
	uint64_t mult = __atomic_load_n(&sp_clk.mult, __ATOMIC_RELAXED);
	__atomic_thread_fence(__ATOMIC_ACQUIRE);
	if (__atomic_load_n(&sp_clk.seq, __ATOMIC_RELAXED) != s)
		return sp_clock_mono();
	/*
	 * Before the segment's start: a read that raced its publication (a few
	 * ticks), or a TSC that went back (a VM moved to another host): this read
	 * only; the segment is renewed, so later reads do not all fall back.
	 */
	if (len && t < tsc0 && tsc0 - t < len)
		return sp_clock_mono();
	if (t - tsc0 < len)
		return ns0 + scale(t - tsc0, mult); /* another thread has just published it */
	if (!len && g_cal_tsc) {
		/* calibrating: nothing to do until the first span is long enough */
		uint64_t n = sp_clock_mono();
		if (n - __atomic_load_n(&g_cal_ns, __ATOMIC_RELAXED) < SEG_FIRST_NS)
			return n;
	}
	if (!__atomic_compare_exchange_n(&sp_clk.seq, &s, s + 1, 0, __ATOMIC_ACQ_REL, __ATOMIC_RELAXED)) {
		/* another thread is recalibrating: the old segment is still close */
		if (len && t - tsc0 < 4 * len)
			return ns0 + scale(t - tsc0, mult);
		return sp_clock_mono();
	}
	uint64_t r = recalibrate();
	__atomic_store_n(&sp_clk.seq, s + 2, __ATOMIC_RELEASE);
	return r;
}

#if SP_CLK_HAVE_TSC
/* CPUID.80000007H:EDX[8]: the TSC runs at a constant rate in every P-, C- and T-state. */
static int invariant_tsc(void)
{
	unsigned a, b, c, d;
	if (!__get_cpuid(0x80000000u, &a, &b, &c, &d) || a < 0x80000007u)
		return 0;
	if (!__get_cpuid(0x80000007u, &a, &b, &c, &d))
		return 0;
	return (d >> 8) & 1;
}

/* The kernel's clocksource is the TSC (raw syscalls: nothing of ours is re-entered). */
static int kernel_uses_tsc(void)
{
	char buf[32] = { 0 };
	long fd = syscall(SYS_openat, AT_FDCWD, "/sys/devices/system/clocksource/clocksource0/current_clocksource",
			  O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return 0;
	long n = syscall(SYS_read, (int)fd, buf, sizeof(buf) - 1);
	syscall(SYS_close, (int)fd);
	return n >= 3 && strncmp(buf, "tsc", 3) == 0 && (buf[3] == '\n' || buf[3] == 0);
}
#endif

int sp_clock_init(const char *want, const char **why)
{
	const char *no = NULL;
	int mode = SP_CLK_VDSO;
	if (want && strcmp(want, "vdso") == 0) {
		no = "STEPPROF_CLOCK=vdso";
	} else {
#if SP_CLK_HAVE_TSC
		if (!invariant_tsc())
			no = "the CPU has no invariant TSC";
		else if ((!want || strcmp(want, "tsc") != 0) && !kernel_uses_tsc())
			no = "the kernel's clocksource is not tsc";
		else
			mode = SP_CLK_TSC;
#else
		no = "no TSC on this architecture";
#endif
	}
	memset(&sp_clk, 0, sizeof(sp_clk));
	g_cal_tsc = g_cal_ns = g_rate = 0;
	g_seg_ns = SEG_FIRST_NS;
	__atomic_store_n(&sp_clk.mode, (uint32_t)mode, __ATOMIC_RELEASE);
	if (mode == SP_CLK_TSC) {
		/* the first calibration point now: the first segment can start 2 ms later */
		uint64_t ct, cn;
		if (measure(&ct, &cn)) {
			g_cal_tsc = ct;
			g_cal_ns = cn;
		}
	}
	if (why)
		*why = no;
	return mode;
}

void sp_clock_fork_child(void)
{
	uint32_t s = __atomic_load_n(&sp_clk.seq, __ATOMIC_RELAXED);
	if (s & 1) {
		/* the parent's thread that was rewriting the segment does not exist here */
		__atomic_store_n(&sp_clk.tsc_len, 0, __ATOMIC_RELAXED);
		g_cal_tsc = g_cal_ns = g_rate = 0;
		g_seg_ns = SEG_FIRST_NS;
		__atomic_store_n(&sp_clk.seq, s + 1, __ATOMIC_RELEASE);
	}
}

void sp_clock_test_jump(int64_t ticks)
{
	uint32_t s = __atomic_load_n(&sp_clk.seq, __ATOMIC_RELAXED);
	__atomic_store_n(&sp_clk.seq, s + 1, __ATOMIC_RELEASE);
	__atomic_signal_fence(__ATOMIC_SEQ_CST);
	/* every TSC value kept moves the other way: the TSC now reads `ticks` further on */
	__atomic_store_n(&sp_clk.tsc0, sp_clk.tsc0 - (uint64_t)ticks, __ATOMIC_RELAXED);
	if (g_cal_tsc)
		g_cal_tsc -= (uint64_t)ticks;
	__atomic_store_n(&sp_clk.seq, s + 2, __ATOMIC_RELEASE);
}
