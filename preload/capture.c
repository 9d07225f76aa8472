/*
 * capture.c - the capture range (STEPPROF_CAPTURE, docs/recorder.md): the flag
 * sp_cap.on that every wrapper tests, and what opens and closes the range.
 *
 *   all              sp_cap.on follows sp_active: everything is recorded (default)
 *   cudaProfilerApi  on from a cudaProfilerStart (or cuProfilerStart) to the
 *                    next cudaProfilerStop (cuProfilerStop); the calls reach
 *                    hook_cuda.c's wrappers through every door
 *   steps:A-B        on from stepprof_step mark A (recorded: it begins
 *                    iteration A) to mark B (recorded: it ends iteration B-1,
 *                    and nothing after it is), marks counted from 0 by the
 *                    process that loaded the configuration
 *
 * The range belongs to the process and every process it forks afterwards:
 * with a range, sp_cap's page is mapped MAP_SHARED at start-up, so a
 * DataLoader's workers forked before the range record inside it, and stop
 * with it. In steps mode only the first process's marks move it (a forked
 * child's marks count from 0 again: they would open it at the wrong time). An
 * exec'd program starts outside it unless the mode is `all`. A process that
 * stops recording (sp_capture_stop: a truncated trace, a child forked in the
 * middle of a record) takes a private page first: it never turns its
 * neighbours' recording off.
 *
 * RATIONALE: one flag, not a second test beside sp_active: outside the range
 * a wrapper must cost what it costs with STEPPROF_DISABLE=1, a single
 * predictable branch on a global. The switches are rare (a few per run) and
 * only store the flags: no lock, so a switch made by a signal handler or two
 * threads at once leaves the last one's state.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "config.h"
#include "recorder.h"

struct sp_cap_page sp_cap;
int sp_capture_steps;

enum capture_mode { CAP_ALL, CAP_PROFILER, CAP_STEPS };
static enum capture_mode g_mode;
static uint64_t g_first, g_last; /* steps:A-B */
static int g_shared;		 /* sp_cap is the MAP_SHARED page of the process tree */
static int g_child;		 /* a forked child: its marks do not move a steps:A-B range */

static void publish(void)
{
	__atomic_store_n(&sp_cap.on, sp_cap.in && __atomic_load_n(&sp_active, __ATOMIC_ACQUIRE), __ATOMIC_RELEASE);
}

/* sp_cap as a page of this process only, zeros: not recording (async-signal-safe). */
static void detach(void)
{
	if (g_shared)
		syscall(SYS_mmap, &sp_cap, sizeof(sp_cap), PROT_READ | PROT_WRITE,
			MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED, -1, 0);
	g_shared = 0;
	__atomic_store_n(&sp_cap.in, 0, __ATOMIC_RELAXED);
	__atomic_store_n(&sp_cap.on, 0, __ATOMIC_RELEASE);
}

void sp_capture_init(void)
{
	const char *v = sp_cfg.CAPTURE; /* valid: the parser kept the default for a bad value */
	g_mode = CAP_ALL;
	g_child = 0;
	sp_capture_steps = 0;
	if (v && strcmp(v, "cudaProfilerApi") == 0) {
		g_mode = CAP_PROFILER;
	} else if (v && strncmp(v, "steps:", 6) == 0) {
		char *end;
		g_first = strtoull(v + 6, &end, 10);
		g_last = strtoull(end + 1, NULL, 10);
		g_mode = CAP_STEPS;
		sp_capture_steps = 1;
	}
	if (g_mode != CAP_ALL && !g_shared) {
		void *p = (void *)syscall(SYS_mmap, &sp_cap, sizeof(sp_cap), PROT_READ | PROT_WRITE,
					  MAP_SHARED | MAP_ANONYMOUS | MAP_FIXED, -1, 0);
		g_shared = p == (void *)&sp_cap;
		if (!g_shared)
			sp_warn_once("capture_shared",
				     "STEPPROF_CAPTURE=%s: no shared page for the range (%s); processes forked by "
				     "this one follow their own calls",
				     v, strerror(errno));
	}
	sp_cap.in = g_mode == CAP_ALL;
	publish();
}

void sp_capture_stop(void)
{
	detach();
}

void sp_capture_fork_child(void)
{
	g_child = 1;
}

void sp_capture_profiler(int on)
{
	if (g_mode != CAP_PROFILER)
		return;
	__atomic_store_n(&sp_cap.in, on, __ATOMIC_RELAXED);
	publish();
}

int sp_capture_step_begin(uint64_t index)
{
	if (index == g_first && !g_child) {
		__atomic_store_n(&sp_cap.in, 1, __ATOMIC_RELAXED);
		publish();
	}
	return sp_cap.on;
}

void sp_capture_step_end(uint64_t index)
{
	if (index == g_last && !g_child) {
		__atomic_store_n(&sp_cap.in, 0, __ATOMIC_RELAXED);
		publish();
	}
}
