/*
 * capture.c - the capture range (STEPPROF_CAPTURE, docs/recorder.md): the flag
 * sp_on that every wrapper tests, and what opens and closes the range.
 *
 *   all              sp_on follows sp_active: everything is recorded (default)
 *   cudaProfilerApi  sp_on is 1 from a cudaProfilerStart (or cuProfilerStart)
 *                    to the next cudaProfilerStop (cuProfilerStop); the calls
 *                    reach hook_cuda.c's wrappers through every door
 *   steps:A-B        sp_on is 1 from stepprof_step mark A (recorded: it begins
 *                    iteration A) to mark B (recorded: it ends iteration B-1,
 *                    and nothing after it is), marks counted from 0 per process
 *
 * The range is the process's own: a process forked inside it starts inside it
 * and follows its own calls and marks afterwards (a forked child's marks count
 * from 0 again); an exec'd program starts outside it unless the mode is `all`.
 *
 * RATIONALE: one flag, not a second test beside sp_active: outside the range
 * a wrapper must cost what it costs with STEPPROF_DISABLE=1, a single
 * predictable branch on a global. The switches are rare (a few per run) and
 * only store the flag: no lock, no syscall, so a switch made by a signal
 * handler or from two threads at once leaves the last one's state.
 */
#include <stdlib.h>
#include <string.h>

#include "config.h"
#include "recorder.h"

volatile int sp_on;
int sp_capture_steps;

enum capture_mode { CAP_ALL, CAP_PROFILER, CAP_STEPS };
static enum capture_mode g_mode;
static uint64_t g_first, g_last; /* steps:A-B */
static int g_in;		 /* inside the range (CAP_ALL: always) */

static void publish(void)
{
	__atomic_store_n(&sp_on, g_in && __atomic_load_n(&sp_active, __ATOMIC_ACQUIRE), __ATOMIC_RELEASE);
}

void sp_capture_init(void)
{
	const char *v = sp_cfg.CAPTURE; /* valid: the parser kept the default for a bad value */
	g_mode = CAP_ALL;
	g_in = 1;
	sp_capture_steps = 0;
	if (v && strcmp(v, "cudaProfilerApi") == 0) {
		g_mode = CAP_PROFILER;
		g_in = 0;
	} else if (v && strncmp(v, "steps:", 6) == 0) {
		char *end;
		g_first = strtoull(v + 6, &end, 10);
		g_last = strtoull(end + 1, NULL, 10);
		g_mode = CAP_STEPS;
		g_in = 0;
		sp_capture_steps = 1;
	}
	publish();
}

void sp_capture_stop(void)
{
	__atomic_store_n(&sp_on, 0, __ATOMIC_RELEASE);
}

void sp_capture_profiler(int on)
{
	if (g_mode != CAP_PROFILER)
		return;
	g_in = on;
	publish();
}

int sp_capture_step_begin(uint64_t index)
{
	if (index == g_first) {
		g_in = 1;
		publish();
	}
	return sp_on;
}

void sp_capture_step_end(uint64_t index)
{
	if (index == g_last) {
		g_in = 0;
		publish();
	}
}
