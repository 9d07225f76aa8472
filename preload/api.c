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

#include <string.h>

#include "config.h"
#include "recorder.h"

#define SP_EXPORT __attribute__((visibility("default")))

static uint64_t g_step; /* next step index of this process */

/*
 * The calling thread's last mark name and its id: a loop marking the same name
 * skips the hash and the table probe. Compared by content (the caller's buffer
 * may have changed), names up to 47 bytes.
 */
struct mark_cache {
	uint32_t id, len;
	char name[48];
};
static __thread struct mark_cache t_cache __attribute__((tls_model("initial-exec")));

void sp_api_fork_child(void)
{
	g_step = 0;
	t_cache.id = 0; /* the child's file has its own ids */
}

/* A name other than the cached one: hash and probe, then cache it. Out of line,
 * so that the cached case keeps stepprof_mark's frame small. */
static __attribute__((noinline)) uint32_t mark_id_slow(const char *name)
{
	struct mark_cache *c = &t_cache;
	size_t len = strlen(name);
	uint32_t id = sp_intern(name, len);
	if (id && len < sizeof(c->name)) {
		memcpy(c->name, name, len);
		c->len = (uint32_t)len;
		c->id = id;
	}
	return id;
}

static inline uint32_t mark_id(const char *name)
{
	const struct mark_cache *c = &t_cache;
	if (c->id) {
		unsigned i = 0;
		while (i < c->len && name[i] == c->name[i])
			i++;
		if (i == c->len && name[i] == 0)
			return c->id;
	}
	return mark_id_slow(name);
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
	f[SP_F_NAME] = name ? mark_id(name) : 0;
	sp_emit(SP_K_MARK, SP_API_stepprof_mark, now, now, f);
}
