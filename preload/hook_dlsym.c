/*
 * hook_dlsym.c - the dlsym door (docs/cuda-capture.md): cudart, TensorFlow, Triton and
 * Numba look CUDA functions up by handle, past any PLT interposition, and a
 * program that dlopens libnccl.so.2 its NCCL functions.
 *
 * A lookup of a hooked name returns our wrapper, after storing what the real
 * lookup found as the wrapper's real function. Every other lookup must be
 * glibc's own, made from the caller: glibc's dlsym takes its caller's return
 * address to choose the scope (RTLD_NEXT: the objects after the caller's;
 * RTLD_DEFAULT: the global scope plus the caller's own local scope, which is
 * how a library opened RTLD_LOCAL, a Python extension, finds its own symbols)
 * and to word its dlerror() message. So on x86-64 dlsym is a small assembly
 * stub: it asks sp_dlsym_cuda whether the name is ours, and otherwise jumps to
 * glibc's dlsym with the caller's return address still in place (a tail call
 * C cannot promise). Elsewhere the C version below resolves RTLD_NEXT on the
 * caller's behalf, as the stub's CUDA path does: the objects after the
 * caller's, in load order, each asked for a symbol it defines itself.
 *
 * RATIONALE (measured with a tester's programs): resolving every name on the
 * caller's behalf asked each object after the caller in turn; each miss makes
 * glibc allocate a dlerror() message, so a program whose own malloc looks up
 * the real one with dlsym(RTLD_NEXT, "malloc") recursed without end (it works
 * without the preload); a dlsym(RTLD_DEFAULT, own symbol) from a library
 * opened RTLD_LOCAL found nothing (42 without the preload, -1 with it); and
 * every failed lookup's dlerror() named libstepprof.so.
 */
#include <dlfcn.h>
#include <link.h>
#include <stddef.h>

#include "cuda_drv.h"
#include "cuda_hooks.h"
#include "nccl_hooks.h"

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

/*
 * The lookup of a name we hook (caller: the return address of the program's
 * dlsym call): wrapper is ours, adopt stores the real function. Returns the
 * wrapper, or what glibc found when the name is not one of ours to wrap after
 * all (not found, say).
 */
static void *hooked_lookup(void *handle, const char *name, int i, void *wrapper, void *(*adopt)(int, void *),
			   const void *caller, sp_dlsym_fn rd)
{
	void *p = handle == RTLD_NEXT ? next_after(caller, name, rd) : rd(handle, name);
	if (!p)
		return NULL;
	if (p == wrapper) {
		/*
		 * The lookup found libstepprof.so's own export (RTLD_DEFAULT, the
		 * program's handle): without us it would have found the real
		 * function after us, or nothing when CUDA (NCCL) is not loaded, and
		 * a program probing for it must see exactly that.
		 */
		p = rd(RTLD_NEXT, name);
		if (!p)
			return NULL;
	}
	return adopt(i, p);
}

static void *cuda_lookup(void *handle, const char *name, int i, const void *caller, sp_dlsym_fn rd)
{
	return hooked_lookup(handle, name, i, sp_cuda_wrapper[i], sp_cuda_adopt, caller, rd);
}

/* An NCCL name of api_nccl.def: the same door (a program that dlopens libnccl.so.2). */
static void *nccl_lookup(void *handle, const char *name, int i, const void *caller, sp_dlsym_fn rd)
{
	return hooked_lookup(handle, name, i, sp_nccl_wrapper[i], sp_nccl_adopt, caller, rd);
}

/* A hooked CUDA name (its index), or -1: every other name is glibc's business. */
static int cuda_name(const char *name)
{
	/* glibc declares name nonnull; a program may still pass NULL: keep the test. */
	__asm__("" : "+r"(name));
	if (!name || name[0] != 'c' || name[1] != 'u')
		return -1;
	return sp_cuda_find_name(name);
}

#if defined(__x86_64__)

/* glibc's dlsym, for the stub's jump (set before each jump by sp_dlsym_cuda). */
__attribute__((visibility("hidden"))) sp_dlsym_fn sp_dlsym_next;

/* 1 and *out = the answer for a name of ours; 0: the stub hands the call to glibc. */
__attribute__((visibility("hidden"), used)) int sp_dlsym_cuda(void *handle, const char *name, const void *caller,
							     void **out)
{
	sp_dlsym_fn rd = sp_real_dlsym();
	if (!rd) {
		*out = NULL;
		return 1;
	}
	sp_dlsym_next = rd;
	int i = cuda_name(name);
	if (i >= 0) {
		*out = cuda_lookup(handle, name, i, caller, rd);
		return 1;
	}
	i = sp_nccl_find_name(name);
	if (i >= 0) {
		*out = nccl_lookup(handle, name, i, caller, rd);
		return 1;
	}
	return 0;
}

/*
 * dlsym(handle, name): 40 bytes of frame (16-aligned for the call): handle,
 * name, the answer; the caller's return address at 40(%rsp).
 */
__asm__(".text\n"
	".globl dlsym\n"
	".type dlsym, @function\n"
	".p2align 4\n"
	"dlsym:\n"
	".cfi_startproc\n"
	"	subq $40, %rsp\n"
	".cfi_def_cfa_offset 48\n"
	"	movq %rdi, (%rsp)\n"
	"	movq %rsi, 8(%rsp)\n"
	"	movq 40(%rsp), %rdx\n"
	"	leaq 16(%rsp), %rcx\n"
	"	call sp_dlsym_cuda\n"
	"	testl %eax, %eax\n"
	"	je 1f\n"
	"	movq 16(%rsp), %rax\n"
	"	addq $40, %rsp\n"
	".cfi_remember_state\n"
	".cfi_def_cfa_offset 8\n"
	"	ret\n"
	".cfi_restore_state\n"
	"1:\n"
	"	movq (%rsp), %rdi\n"
	"	movq 8(%rsp), %rsi\n"
	"	addq $40, %rsp\n"
	".cfi_def_cfa_offset 8\n"
	"	jmp *sp_dlsym_next(%rip)\n"
	".cfi_endproc\n"
	".size dlsym, .-dlsym\n");

#else

SP_EXPORT void *dlsym(void *handle, const char *name)
{
	sp_dlsym_fn rd = sp_real_dlsym();
	if (!rd)
		return NULL;
	const void *caller = __builtin_return_address(0);
	int i = cuda_name(name);
	if (i >= 0)
		return cuda_lookup(handle, name, i, caller, rd);
	i = name ? sp_nccl_find_name(name) : -1;
	if (i >= 0)
		return nccl_lookup(handle, name, i, caller, rd);
	return handle == RTLD_NEXT ? next_after(caller, name, rd) : rd(handle, name);
}

#endif
