/*
 * io_real.c - the input capture's plumbing that holds no interposed symbol:
 * resolving the real libc functions, STEPPROF_IO, the trace feature bit.
 *
 * Divided into: 1. real functions, 2. mode, 3. path ids, 4. feature bit,
 * 5. a wrapper left by a jump.
 */
#include "io_hook.h"

#include <dlfcn.h>
#include <signal.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

/* ------------------------------------------------------- 1. real functions */

void *io_real_ptr[IO_FN__COUNT];

static const char *const io_fn_name[IO_FN__COUNT] = {
#define SP_API_IO(name, id, version) [IO_FN_##name] = #name,
#include "stepprof/api_io.def"
#undef SP_API_IO
};

static const char *const io_fn_version[IO_FN__COUNT] = {
#define SP_API_IO(name, id, version) [IO_FN_##name] = version,
#include "stepprof/api_io.def"
#undef SP_API_IO
};

/* What a symbol missing from the running libc does: fail like an unsupported syscall. */
static long io_enosys(void)
{
	errno = ENOSYS;
	return -1;
}

typedef void *(*dlsym_fn)(void *, const char *);

/*
 * RATIONALE: the preload overrides dlsym (CUDA door 2), so a plain dlsym() here
 * would go through that override. libc's own dlsym is fetched by version, and
 * called from this file so that RTLD_NEXT means "after libstepprof.so".
 */
static dlsym_fn libc_dlsym(void)
{
	static dlsym_fn fn;
	dlsym_fn f = __atomic_load_n(&fn, __ATOMIC_RELAXED);
	if (!f) {
		f = (dlsym_fn)dlvsym(RTLD_NEXT, "dlsym", "GLIBC_2.34");
		if (!f)
			f = (dlsym_fn)dlvsym(RTLD_NEXT, "dlsym", "GLIBC_2.2.5");
		__atomic_store_n(&fn, f, __ATOMIC_RELAXED);
	}
	return f;
}

void *io_real_by_name(const char *name)
{
	int saved = errno;
	dlsym_fn d = libc_dlsym();
	void *p = d ? d(RTLD_NEXT, name) : NULL;
	errno = saved;
	return p;
}

void *io_real_resolve(unsigned fn)
{
	void *p = NULL;
	int saved = errno;
	if (fn >= IO_FN__COUNT)
		return (void *)io_enosys;
	if (io_fn_version[fn])
		p = dlvsym(RTLD_NEXT, io_fn_name[fn], io_fn_version[fn]);
	if (!p) {
		dlsym_fn d = libc_dlsym();
		p = d ? d(RTLD_NEXT, io_fn_name[fn]) : NULL;
	}
	if (!p)
		p = (void *)io_enosys;
	__atomic_store_n(&io_real_ptr[fn], p, __ATOMIC_RELAXED);
	errno = saved;
	return p;
}

/* ---------------------------------------------------------------- 2. mode */

volatile int io_capture;

int io_mode_parse(const char *s)
{
	if (!s || !*s || !strcmp(s, "auto"))
		return IO_MODE_AUTO;
	if (!strcmp(s, "libc"))
		return IO_MODE_LIBC;
	if (!strcmp(s, "bpf"))
		return IO_MODE_BPF;
	if (!strcmp(s, "off"))
		return IO_MODE_OFF;
	return -1;
}

/* io_emit (io_hook.h) fills only these fields: every input kind must fit in them. */
#define F(x)	  (1ull << SP_F_##x)
#define IO_FIELDS (F(PATH) | F(BYTES) | F(FD) | F(RESULT) | F(FD_TYPE) | F(SOURCE) | F(COUNT))
enum {
#define SP_KIND(id, num, name, mask) IO_MASK_##id = (int)(mask),
#include "stepprof/kinds.def"
#undef SP_KIND
};
_Static_assert(!((IO_MASK_OPEN | IO_MASK_STAT | IO_MASK_READ | IO_MASK_CLOSE | IO_MASK_LISTDIR | IO_MASK_LOADER_WAIT |
		  IO_MASK_LOCK_WAIT) &
		 ~IO_FIELDS),
	       "an input record kind carries a field io_emit does not fill");
#undef F

/* ---------------------------------------------------------- 3. path ids */

__thread struct io_path_cache io_last_path __attribute__((tls_model("initial-exec")));

/* A path not in the cache (io_path_id): intern it, and cache it when it fits. */
uint32_t io_path_intern(const char *path, size_t len)
{
	struct io_path_cache *c = &io_last_path;
	uint32_t id = sp_intern(path, len);
	if (id && len < IO_PATH_CACHE) {
		memcpy(c->s, path, len);
		c->len = (uint32_t)len;
		c->id = id;
	}
	return id;
}

void io_path_forget(void)
{
	io_last_path.len = 0;
	io_last_path.id = 0;
}

/* --------------------------------------------------------- 4. feature bit */

int io_feature_marked;

void io_mark_feature(void)
{
	io_feature_marked = 1;
	struct sp_file_header *h = sp_trace_header();
	if (h)
		__atomic_fetch_or(&h->features, SP_FEAT_LIBC_IO, __ATOMIC_RELAXED);
}

/* ------------------------------------------------ 5. a wrapper left by a jump */

__thread struct io_outer io_outer __attribute__((tls_model("initial-exec")));

/* io_hook.h, io_enter_cap: the depth is raised and a wrapper is called at `frame`. */
int io_left_by_a_jump(uintptr_t frame)
{
	uintptr_t outer = io_outer.frame;
	if (!outer)
		return 0; /* not raised by a wrapper of ours */
	/* NOTE: the word lies in this thread's stack, mapped whether that wrapper is live or gone */
	int gone = *(const volatile uintptr_t *)IO_RET_SLOT(outer) != io_outer.ret;
	if (!gone && frame >= outer) {
		stack_t ss;
		int saved = errno;
		long r = syscall(SYS_sigaltstack, NULL, &ss);
		errno = saved;
		gone = r == 0 && !(ss.ss_flags & SS_ONSTACK);
	}
	if (!gone)
		return 0; /* nested in it, or a handler on an alternate stack interrupting it */
	sp_hook_depth = 0;
	io_outer.frame = 0;
	return 1;
}
