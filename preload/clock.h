/*
 * clock.h - sp_now(): CLOCK_MONOTONIC in ns, the one clock of every record.
 *
 * Every wrapped call reads the clock twice, so its cost is the floor of every
 * wrapper's. On the VMs stepprof is built on, clock_gettime(CLOCK_MONOTONIC)
 * through the vDSO costs 22-25 ns, most of it an ordered TSC read (rdtscp or
 * lfence;rdtsc) plus the vDSO's own sequence and scaling; a plain rdtsc costs
 * ~10 ns. So, where the TSC is the kernel's own clocksource and invariant,
 * sp_now() reads the TSC and scales it to CLOCK_MONOTONIC itself:
 *
 *	ns = ns0 + ((tsc - tsc0) * mult) >> 32
 *
 * over a segment [tsc0, tsc_end) of at most SP_CLK_SEG_NS (64 ms). The first
 * read after a segment ends recalibrates against clock_gettime (slow path,
 * ~100 ns, once per segment per process, whichever thread gets there first):
 * the rate is measured against CLOCK_MONOTONIC over the last segment, so NTP's
 * frequency corrections are followed, and the new segment starts where the
 * old one ends (no step) with a slope that absorbs the remaining offset by
 * its end. The result stays within about 100 ns of clock_gettime
 * (tests/unit/test_clock.c measures it) and never steps back within a thread
 * by more than that; the analyzer and the eBPF collector's bpf_ktime_get_ns
 * timestamps share the clock without conversion.
 *
 * A TSC that jumps (a VM moved to another host) is noticed at the next
 * calibration (behind the segment, or a rate off the last by more than 1/32):
 * calibration restarts there.
 *
 * Readers take no lock: the segment is published under a sequence count;
 * a reader that finds it being rewritten (a window of ~100 ns every 64 ms)
 * or out of range falls back to clock_gettime. Until the first segment is
 * calibrated (the first ~2 ms of a process), and with STEPPROF_CLOCK=vdso,
 * sp_now() is clock_gettime.
 */
#ifndef STEPPROF_CLOCK_H
#define STEPPROF_CLOCK_H

#include <stdint.h>
#include <time.h>

#if defined(__x86_64__) || defined(__i386__)
#include <x86intrin.h>
#define SP_CLK_HAVE_TSC 1
#else
#define SP_CLK_HAVE_TSC 0
#endif

/* The segment. seq is even when stable, odd while a thread rewrites it. */
struct sp_clk {
	uint32_t seq;
	uint32_t mode;    /* SP_CLK_* */
	uint64_t tsc0;    /* segment start */
	uint64_t tsc_len; /* segment length in ticks (0: no segment) */
	uint64_t ns0;     /* CLOCK_MONOTONIC at tsc0 */
	uint64_t mult;    /* ns per tick << 32 */
} __attribute__((aligned(64)));

enum { SP_CLK_VDSO = 0, SP_CLK_TSC = 1 };

#define SP_CLK_SEG_NS 64000000ull /* longest segment: 64 ms */

__attribute__((visibility("hidden"))) extern struct sp_clk sp_clk;

/* clock_gettime(CLOCK_MONOTONIC) in ns: the reference, and the fallback. */
static inline uint64_t sp_clock_mono(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

static inline uint64_t sp_clock_ticks(void)
{
#if SP_CLK_HAVE_TSC
	return __rdtsc();
#else
	return 0;
#endif
}

/* The slow path: no segment, segment over, or being rewritten (clock.c). */
__attribute__((visibility("hidden"))) uint64_t sp_now_slow(uint64_t tsc);

static inline uint64_t sp_now(void)
{
#if SP_CLK_HAVE_TSC
	uint32_t s = __atomic_load_n(&sp_clk.seq, __ATOMIC_ACQUIRE);
	uint64_t t = sp_clock_ticks();
	uint64_t d = t - sp_clk.tsc0, len = sp_clk.tsc_len, ns0 = sp_clk.ns0, mult = sp_clk.mult;
	__atomic_thread_fence(__ATOMIC_ACQUIRE);
	/* d < len also rejects t < tsc0 (unsigned), and len == 0 (no segment) */
	/*
	 * An odd count (the segment being rewritten) made even, so that the second
	 * read, never equal to it then, rejects it: one compare for both tests
	 * (`== s && !(s & 1)`).
	 */
	if (__builtin_expect(d < len && __atomic_load_n(&sp_clk.seq, __ATOMIC_RELAXED) == (s & ~1u), 1))
		return ns0 + ((d * mult) >> 32);
	return sp_now_slow(t);
#else
	return sp_clock_mono();
#endif
}

/*
 * Choose the clock (STEPPROF_CLOCK: auto, tsc or vdso; NULL = auto). auto uses
 * the TSC when the CPU has an invariant TSC and the kernel's clocksource is
 * "tsc"; tsc skips the clocksource check (a kvm-clock guest with a stable TSC).
 * Returns the mode chosen; *why gets a reason when the TSC was refused.
 */
__attribute__((visibility("hidden"))) int sp_clock_init(const char *want, const char **why);

/* In a forked child: a segment left half-written by a parent's thread is dropped. */
__attribute__((visibility("hidden"))) void sp_clock_fork_child(void);

/*
 * Tests only: as if the TSC jumped by `ticks` (forward when positive) with
 * CLOCK_MONOTONIC going on smoothly, as a VM moved to another host may see.
 */
__attribute__((visibility("hidden"))) void sp_clock_test_jump(int64_t ticks);

#endif /* STEPPROF_CLOCK_H */
