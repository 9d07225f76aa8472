/*
 * hook_dlsym.c - the dlsym door (design.md §3): cudart, TensorFlow, Triton and
 * Numba look CUDA functions up by handle, past any PLT interposition.
 *
 * A lookup of a hooked name returns our wrapper, after storing what the real
 * lookup found as the wrapper's real function; every other lookup returns
 * exactly what glibc's dlsym returns. RTLD_NEXT is resolved on the caller's
 * behalf (glibc would search after libstepprof.so, the object that calls it):
 * the objects after the caller's, in load order, each asked for a symbol it
 * defines itself.
 */
#include <dlfcn.h>
#include <link.h>
#include <stddef.h>

#include "cuda_drv.h"
#include "cuda_hooks.h"

#define SP_EXPORT __attribute__((visibility("default")))

static void *next_after(const void *caller, const char *name, sp_dlsym_fn rd)
{
	Dl_info di, me;
	struct link_map *lm = NULL;
	if (!dladdr1(caller, &di, (void **)&lm, RTLD_DL_LINKMAP) || !lm)
		return rd(RTLD_NEXT, name);
	if (dladdr((void *)next_after, &me) && me.dli_fbase == di.dli_fbase)
		return rd(RTLD_NEXT, name); /* stepprof itself: glibc's answer is the right one */
	for (struct link_map *l = lm->l_next; l; l = l->l_next) {
		if (!l->l_name || !l->l_name[0])
			continue;
		void *h = dlopen(l->l_name, RTLD_NOLOAD | RTLD_LAZY);
		if (!h)
			continue;
		void *p = rd(h, name);
		dlclose(h);
		struct link_map *def = NULL;
		Dl_info pi;
		/* Only a definition in l itself: h's scope also holds its dependencies. */
		if (p && dladdr1(p, &pi, (void **)&def, RTLD_DL_LINKMAP) && def == l)
			return p;
	}
	/*
	 * Not found: glibc leaves a message for dlerror(), which the dlclose
	 * calls above cleared (a program printing dlerror() after a failed
	 * RTLD_NEXT lookup got NULL). Our own RTLD_NEXT lookup of the name fails
	 * the same way and sets it (the objects after us are a subset of those
	 * searched, except those between us and a caller loaded after us).
	 */
	rd(RTLD_NEXT, name);
	return NULL;
}

SP_EXPORT void *dlsym(void *handle, const char *name)
{
	sp_dlsym_fn rd = sp_real_dlsym();
	if (!rd)
		return NULL;
	/* glibc declares name nonnull; a program may still pass NULL: keep the test. */
	__asm__("" : "+r"(name));
	void *p = handle == RTLD_NEXT ? next_after(__builtin_return_address(0), name, rd) : rd(handle, name);
	if (!p || !name || name[0] != 'c' || name[1] != 'u')
		return p;
	int i = sp_cuda_find_name(name);
	if (i < 0)
		return p;
	if (p == sp_cuda_wrapper[i]) {
		/*
		 * The lookup found libstepprof.so's own export (RTLD_DEFAULT, the
		 * program's handle): without us it would have found the real
		 * function after us, or nothing when CUDA is not loaded, and a
		 * program probing for CUDA must see exactly that.
		 */
		p = rd(RTLD_NEXT, name);
		if (!p)
			return NULL;
	}
	return sp_cuda_adopt(i, p);
}
