/*
 * api.c - the public C API of include/stepprof/stepprof.h, exported by
 * libstepprof.so (default visibility; everything else in the library is hidden).
 *
 *   stepprof_step()      a STEP record whose value is the process's step index (0, 1, ...)
 *   stepprof_mark(name)  a MARK record naming `name` (interned)
 *
 * Both are instants (begin = end) on the calling thread, lock-free, and keep errno.
 */
#include "stepprof/stepprof.h"

#include "config.h"
#include "recorder.h"

#define SP_EXPORT __attribute__((visibility("default")))

static uint64_t g_step; /* next step index of this process */

void sp_api_fork_child(void)
{
	g_step = 0;
}

SP_EXPORT void stepprof_step(void)
{
	if (!sp_active)
		return;
	uint64_t f[SP_F__COUNT];
	uint64_t now = sp_now();
	f[SP_F_VALUE] = __atomic_fetch_add(&g_step, 1, __ATOMIC_RELAXED);
	sp_emit(SP_K_STEP, SP_API_stepprof_step, now, now, f);
}

SP_EXPORT void stepprof_mark(const char *name)
{
	if (!sp_active)
		return;
	/* NOTE: errno is kept by the recorder's every slow path, nothing to save here */
	uint64_t f[SP_F__COUNT];
	uint64_t now = sp_now();
	f[SP_F_NAME] = name ? sp_intern_cstr(name) : 0;
	sp_emit(SP_K_MARK, SP_API_stepprof_mark, now, now, f);
}
