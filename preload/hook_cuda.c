/*
 * hook_cuda.c - the CUDA wrappers of libstepprof.so (docs/cuda-capture.md).
 *
 * Divided into:
 *   1. the SP_SPEC_* macros: the last column of api_cuda.def, turning a
 *      function's arguments into a call descriptor (cuda_call.h), whose
 *      family handlers (what a COPY, LAUNCH, ALLOC... records) are in
 *      cuda_call.c, inlined from cuda_call.h for SYNC and LAUNCH;
 *   2. the generated wrappers, one per GEN line of api_cuda.def, each an
 *      exported front (pass through, or tail-call) and a name__rec that records;
 *   3. the doors written by hand: cuGetProcAddress[_v2] and
 *      cudaGetDriverEntryPoint[ByVersion][_ptsz];
 *   4. the wrapper and real-function tables (shared with hook_dlsym.c).
 *
 * The driver API is the source of truth; the runtime wrappers record the call
 * the program made and raise sp_hook_depth, so the driver calls the runtime
 * makes underneath are passed through unrecorded. With a statically linked
 * runtime only the driver wrappers are reached, and they record.
 * Hot path: no lock, no malloc, no syscall but the clock; errno is kept (by
 * touching it nowhere on the fast path: see poll_end in cuda_call.h).
 */
#define __CUDA_API_VERSION_INTERNAL 1
#include <cuda.h>
#include <cuda_runtime_api.h>
#include <cudaProfiler.h>
#include <cuda_profiler_api.h>

#include <dlfcn.h>
#include <errno.h>
#include <pthread.h>
#include <string.h>

/* NOTE: cudaGetDriverEntryPoint[_ptsz] are deprecated in CUDA 13 but still
 * exported and called by older code: they are wrapped all the same. */
#pragma GCC diagnostic ignored "-Wdeprecated-declarations"

#include "cuda_call.h"
#include "cuda_drv.h"
#include "cuda_gpu.h"
#include "cuda_hooks.h"
#include "cuda_mem.h"
#include "recorder.h"

#define SP_EXPORT __attribute__((visibility("default")))

/* ------------------------------------------------------ 1. the specs */

#define U64(x) ((uint64_t)(uintptr_t)(x))

#define SP_SPEC_BATCH(d, s_, n, cnt, st) batch_spec(&c, 1, (d), (s_), (n), (cnt), U64(st))
#define SP_SPEC_BATCH3D(cnt, ops, st) batch_spec(&c, 2, (ops), NULL, NULL, (cnt), U64(st))
#define SP_SPEC_COPY(d, dev, host, n, s) copy_known(&c, SP_DIR_##d, U64(dev), U64(host), (uint64_t)(n), U64(s))
#define SP_SPEC_COPYU(dst, src, n, s) copy_unified(&c, U64(dst), U64(src), (uint64_t)(n), U64(s))
#define SP_SPEC_COPYRT(k, dst, src, n, s) copy_rt(&c, (int)(k), U64(dst), U64(src), (uint64_t)(n), U64(s))
#define SP_SPEC_COPY2D(p, s)                                                                                          \
	do {                                                                                                          \
		if (p)                                                                                                \
			copy_typed(&c, p->srcMemoryType, U64(p->srcHost), U64(p->srcDevice), p->dstMemoryType,       \
				   U64(p->dstHost), U64(p->dstDevice), (uint64_t)p->WidthInBytes * p->Height, U64(s)); \
		else                                                                                                  \
			copy_known(&c, SP_DIR_NONE, 0, 0, 0, U64(s));                                                 \
	} while (0)
#define SP_SPEC_COPY3D(p, s)                                                                                          \
	do {                                                                                                          \
		if (p)                                                                                                \
			copy_typed(&c, p->srcMemoryType, U64(p->srcHost), U64(p->srcDevice), p->dstMemoryType,       \
				   U64(p->dstHost), U64(p->dstDevice),                                                \
				   (uint64_t)p->WidthInBytes * p->Height * (p->Depth ? p->Depth : 1), U64(s));         \
		else                                                                                                  \
			copy_known(&c, SP_DIR_NONE, 0, 0, 0, U64(s));                                                 \
	} while (0)
#define SP_SPEC_COPY3DPEER(p, s)                                                                                      \
	do {                                                                                                          \
		SP_SPEC_COPY3D(p, s);                                                                                 \
		if (c.dir == SP_DIR_D2D)                                                                              \
			c.dir = SP_DIR_PEER;                                                                          \
	} while (0)
#define SP_SPEC_COPYRT3D(p, s)                                                                                        \
	do {                                                                                                          \
		if (p)                                                                                                \
			copy_rt(&c, p->kind, U64(p->dstPtr.ptr), U64(p->srcPtr.ptr),                                  \
				(uint64_t)p->extent.width * (p->extent.height ? p->extent.height : 1) *               \
					(p->extent.depth ? p->extent.depth : 1),                                      \
				U64(s));                                                                              \
		else                                                                                                  \
			copy_known(&c, SP_DIR_NONE, 0, 0, 0, U64(s));                                                 \
	} while (0)
#define SP_SPEC_PEER(dst, src, n, s) copy_known(&c, SP_DIR_PEER, U64(dst), 0, (uint64_t)(n), U64(s))
#define SP_SPEC_MEMSET(p, n, s)                                                                                       \
	do {                                                                                                          \
		fam(&c, FAM_MEMSET);                                                                                  \
		c.dptr = U64(p);                                                                                      \
		c.bytes = (uint64_t)(n);                                                                              \
		c.stream = U64(s);                                                                                    \
	} while (0)
/*
 * A launch: its function (driver) or stub (runtime), stream and shape, the
 * launch configuration folded into 64 bits (SP_SHAPE): with the function, what
 * identifies a kernel's work for the timing policy (cuda_timing.c, "Samples").
 */
#define SP_SHAPE(gx, gy, gz, bx, by, bz, smem)                                                                        \
	((((uint64_t)(gx) * 0x9E3779B97F4A7C15ull ^ (uint64_t)(gy)) * 0xC2B2AE3D27D4EB4Full ^ (uint64_t)(gz) << 32 ^  \
	  (uint64_t)(bx) << 20 ^ (uint64_t)(by) << 10 ^ (uint64_t)(bz)) * 0x165667B19E3779F9ull ^ (uint64_t)(smem))
#define SP_SPEC_LAUNCH(f, stubp, s, shp)                                                                              \
	do {                                                                                                          \
		fam(&c, FAM_LAUNCH);                                                                                  \
		c.func = (CUfunction)(f);                                                                             \
		c.stub = (const void *)(stubp);                                                                       \
		c.stream = U64(s);                                                                                    \
		c.shape = (shp);                                                                                      \
	} while (0)
#define SP_SPEC_SYNC(s, ev, kind)                                                                                     \
	do {                                                                                                          \
		fam(&c, FAM_SYNC);                                                                                    \
		c.stream = U64(s);                                                                                    \
		c.event = U64(ev);                                                                                    \
		c.sync = kind;                                                                                        \
	} while (0)
#define SP_SPEC_ALLOC(outp, n, s)                                                                                     \
	do {                                                                                                          \
		fam(&c, FAM_ALLOC);                                                                                   \
		c.out = (void *)(outp);                                                                               \
		c.bytes = (uint64_t)(n);                                                                              \
		c.stream = U64(s);                                                                                    \
	} while (0)
#define SP_SPEC_ALLOCPITCH(outp, pitchp, w, h)                                                                        \
	do {                                                                                                          \
		fam(&c, FAM_ALLOC);                                                                                   \
		c.out = (void *)(outp);                                                                               \
		c.out2 = (void *)(pitchp);                                                                            \
		c.ptr = (uint64_t)(w);                                                                                \
		c.bytes = (uint64_t)(h);                                                                              \
	} while (0)
/* VMM memory on a device, or on the host (pinned host memory: NCCL's host buffers) */
#define SP_SPEC_VMMCREATE(hp, n, prop)                                                                                \
	do {                                                                                                          \
		int host_ = (prop) && ((prop)->location.type == CU_MEM_LOCATION_TYPE_HOST ||                         \
				       (prop)->location.type == CU_MEM_LOCATION_TYPE_HOST_NUMA ||                    \
				       (prop)->location.type == CU_MEM_LOCATION_TYPE_HOST_NUMA_CURRENT);             \
		fam(&c, host_ ? FAM_HOSTALLOC : FAM_ALLOC);                                                           \
		c.vmm = (uint8_t)host_;                                                                               \
		c.out = (void *)(hp);                                                                                 \
		c.bytes = (uint64_t)(n);                                                                              \
		if ((prop) && (prop)->location.type == CU_MEM_LOCATION_TYPE_DEVICE && (prop)->location.id >= 0)      \
			c.dev = (prop)->location.id < SP_DEV_MAX ? (prop)->location.id : SP_DEV_MAX - 1;              \
	} while (0)
#define SP_SPEC_FREE(p, s)                                                                                            \
	do {                                                                                                          \
		fam(&c, FAM_FREE);                                                                                    \
		c.dptr = U64(p);                                                                                      \
		c.stream = U64(s);                                                                                    \
	} while (0)
#define SP_SPEC_VMMFREE(h)                                                                                            \
	do {                                                                                                          \
		fam(&c, FAM_FREE);                                                                                    \
		c.dptr = U64(h);                                                                                      \
		c.vmm = 1;                                                                                            \
	} while (0)
#define SP_SPEC_VMMMAP(va, n, h)                                                                                      \
	do {                                                                                                          \
		fam(&c, FAM_VMMMAP);                                                                                  \
		c.dptr = U64(va);                                                                                     \
		c.bytes = (uint64_t)(n);                                                                              \
		c.ptr = U64(h);                                                                                       \
	} while (0)
#define SP_SPEC_VMMUNMAP(va, n)                                                                                       \
	do {                                                                                                          \
		fam(&c, FAM_VMMUNMAP);                                                                                \
		c.dptr = U64(va);                                                                                     \
		c.bytes = (uint64_t)(n);                                                                              \
	} while (0)
#define SP_SPEC_VMMRETAIN(hp)                                                                                         \
	do {                                                                                                          \
		fam(&c, FAM_VMMRETAIN);                                                                               \
		c.out = (void *)(hp);                                                                                 \
	} while (0)
#define SP_SPEC_HOSTALLOC(pp, n)                                                                                      \
	do {                                                                                                          \
		fam(&c, FAM_HOSTALLOC);                                                                               \
		c.out = (void *)(pp);                                                                                 \
		c.bytes = (uint64_t)(n);                                                                              \
	} while (0)
#define SP_SPEC_HOSTFREE(p)                                                                                           \
	do {                                                                                                          \
		fam(&c, FAM_HOSTFREE);                                                                                \
		c.ptr = U64(p);                                                                                       \
	} while (0)
#define SP_SPEC_HOSTREG(p, n)                                                                                         \
	do {                                                                                                          \
		fam(&c, FAM_HOSTREG);                                                                                 \
		c.ptr = U64(p);                                                                                       \
		c.bytes = (uint64_t)(n);                                                                              \
	} while (0)
#define SP_SPEC_HOSTUNREG(p)                                                                                          \
	do {                                                                                                          \
		fam(&c, FAM_HOSTUNREG);                                                                               \
		c.ptr = U64(p);                                                                                       \
	} while (0)
#define SP_SPEC_MEMINFO(fp, tp)                                                                                       \
	do {                                                                                                          \
		fam(&c, FAM_MEMINFO);                                                                                 \
		c.out = (void *)(fp);                                                                                 \
		c.out2 = (void *)(tp);                                                                                \
	} while (0)
#define SP_SPEC_RESET(d)                                                                                              \
	do {                                                                                                          \
		fam(&c, FAM_RESET);                                                                                   \
		c.dev = (d) < 0 ? -1 : (d) < SP_DEV_MAX ? (d) : SP_DEV_MAX - 1;                                      \
	} while (0)
#define SP_SPEC_CTX() fam(&c, FAM_NONE)
#define SP_SPEC_CTXGONE(ctx) fam(&c, FAM_NONE)
#define SP_SPEC_NOTE() fam(&c, FAM_NONE)
#define SP_SPEC_PROFILER(on) fam(&c, FAM_NONE)

/* 1: the record names a call site (sp_post reads c->caller). */
#define SP_CALLER_CTX() 0
#define SP_CALLER_CTXGONE(...) 0
#define SP_CALLER_NOTE() 0
#define SP_CALLER_PROFILER(on) 0
#define SP_CALLER_COPY(...) 1
#define SP_CALLER_COPYU(...) 1
#define SP_CALLER_COPYRT(...) 1
#define SP_CALLER_COPY2D(...) 1
#define SP_CALLER_COPY3D(...) 1
#define SP_CALLER_COPY3DPEER(...) 1
#define SP_CALLER_COPYRT3D(...) 1
#define SP_CALLER_PEER(...) 1
#define SP_CALLER_BATCH(...) 1
#define SP_CALLER_BATCH3D(...) 1
#define SP_CALLER_MEMSET(...) 0
#define SP_CALLER_LAUNCH(...) 0
#define SP_CALLER_SYNC(...) 0
#define SP_CALLER_ALLOC(...) 1
#define SP_CALLER_ALLOCPITCH(...) 1
#define SP_CALLER_VMMCREATE(...) 1
#define SP_CALLER_FREE(...) 0
#define SP_CALLER_VMMFREE(...) 0
#define SP_CALLER_VMMMAP(...) 0
#define SP_CALLER_VMMUNMAP(...) 0
#define SP_CALLER_VMMRETAIN(...) 0
#define SP_CALLER_HOSTALLOC(...) 1
#define SP_CALLER_HOSTFREE(...) 0
#define SP_CALLER_HOSTREG(...) 0
#define SP_CALLER_HOSTUNREG(...) 0
#define SP_CALLER_MEMINFO(...) 0
#define SP_CALLER_RESET(...) 0

/*
 * 1: the family keeps the books of device and pinned memory (cuda_mem.c) outside
 * the capture range too (STEPPROF_CAPTURE, capture.c), recording nothing there.
 * RATIONALE: an allocation made before the range (a model's weights, the
 * pinned staging buffers of a DataLoader) would otherwise be unknown inside
 * it: live and peak device bytes would count only what the range allocated,
 * and copies from pinned buffers made before it would not read as pinned. These
 * calls are rare and cost microseconds in the driver; every other family
 * costs outside the range what it costs with STEPPROF_DISABLE=1.
 */
#define SP_BOOKS_CTX(...) 0
#define SP_BOOKS_CTXGONE(...) 0
#define SP_BOOKS_NOTE(...) 0
#define SP_BOOKS_PROFILER(...) 0
#define SP_BOOKS_COPY(...) 0
#define SP_BOOKS_COPYU(...) 0
#define SP_BOOKS_COPYRT(...) 0
#define SP_BOOKS_COPY2D(...) 0
#define SP_BOOKS_COPY3D(...) 0
#define SP_BOOKS_COPY3DPEER(...) 0
#define SP_BOOKS_COPYRT3D(...) 0
#define SP_BOOKS_PEER(...) 0
#define SP_BOOKS_BATCH(...) 0
#define SP_BOOKS_BATCH3D(...) 0
#define SP_BOOKS_MEMSET(...) 0
#define SP_BOOKS_LAUNCH(...) 0
#define SP_BOOKS_SYNC(...) 0
#define SP_BOOKS_MEMINFO(...) 0
#define SP_BOOKS_ALLOC(...) 1
#define SP_BOOKS_ALLOCPITCH(...) 1
#define SP_BOOKS_VMMCREATE(...) 1
#define SP_BOOKS_FREE(...) 1
#define SP_BOOKS_VMMFREE(...) 1
#define SP_BOOKS_VMMMAP(...) 1
#define SP_BOOKS_VMMUNMAP(...) 1
#define SP_BOOKS_VMMRETAIN(...) 1
#define SP_BOOKS_HOSTALLOC(...) 1
#define SP_BOOKS_HOSTFREE(...) 1
#define SP_BOOKS_HOSTREG(...) 1
#define SP_BOOKS_HOSTUNREG(...) 1
#define SP_BOOKS_RESET(...) 1

/* What a wrapper does even when it does not record (nested or inactive). */
#define SP_EARLY_CTX() sp_gpu_ctx_changed()
/*
 * RATIONALE: before the call, as the wrapper has no after for a call it does
 * not record; if the destruction fails, stepprof has only forgotten events and
 * a stream of a live context, and makes new ones.
 */
#define SP_EARLY_CTXGONE(ctx)                                                                                         \
	do {                                                                                                          \
		sp_gpu_ctx_changed();                                                                                 \
		sp_gpu_ctx_gone(ctx);                                                                                 \
	} while (0)
#define SP_EARLY_NOTE()
/* the capture range opens or closes whether or not this call is recorded (capture.c) */
#define SP_EARLY_PROFILER(on) sp_capture_profiler(on)
#define SP_EARLY_COPY(...)
#define SP_EARLY_COPYU(...)
#define SP_EARLY_COPYRT(...)
#define SP_EARLY_COPY2D(...)
#define SP_EARLY_COPY3D(...)
#define SP_EARLY_COPY3DPEER(...)
#define SP_EARLY_COPYRT3D(...)
#define SP_EARLY_PEER(...)
#define SP_EARLY_BATCH(...)
#define SP_EARLY_BATCH3D(...)
#define SP_EARLY_MEMSET(...)
#define SP_EARLY_LAUNCH(...)
#define SP_EARLY_SYNC(...)
#define SP_EARLY_ALLOC(...)
#define SP_EARLY_ALLOCPITCH(...)
#define SP_EARLY_VMMCREATE(...)
#define SP_EARLY_FREE(...)
#define SP_EARLY_VMMFREE(...)
#define SP_EARLY_VMMMAP(...)
#define SP_EARLY_VMMUNMAP(...)
#define SP_EARLY_VMMRETAIN(...)
#define SP_EARLY_HOSTALLOC(...)
#define SP_EARLY_HOSTFREE(...)
#define SP_EARLY_HOSTREG(...)
#define SP_EARLY_HOSTUNREG(...)
#define SP_EARLY_MEMINFO(...)
#define SP_EARLY_RESET(...)

/* ------------------------------------------------- 2. the wrappers */

static inline int sp_should_record(void)
{
	return sp_cap.on && !sp_hook_depth;
}

/* A memory family's call (SP_BOOKS_*): through the record path while the recorder is active. */
static inline int sp_should_book(void)
{
	return sp_active && !sp_hook_depth;
}

void *sp_cuda_real[SP_CUDA__COUNT];

static void *resolve_real(int i)
{
	sp_dlsym_fn rd = sp_real_dlsym();
	void *p = rd ? rd(RTLD_NEXT, sp_cuda_table[i].name) : NULL;
	if (p && p != sp_cuda_wrapper[i])
		__atomic_store_n(&sp_cuda_real[i], p, __ATOMIC_RELEASE);
	else
		p = NULL;
	return p;
}

static inline void *real_of(int i)
{
	void *p = __atomic_load_n(&sp_cuda_real[i], __ATOMIC_ACQUIRE);
	return p ? p : resolve_real(i);
}

#define SP_NOFN_CUresult CUDA_ERROR_NOT_FOUND
#define SP_NOFN_cudaError_t cudaErrorSymbolNotFound

/*
 * Each wrapper is two functions: the exported one tests whether to record
 * and else jumps to the real function; name__rec, reached by a tail call with
 * the same arguments, records (and resolves the real function the first time).
 * RATIONALE: with the record path in the same function, every call paid its
 * frame (six callee-saved registers and the descriptor) before the test, the
 * nested driver call under a runtime wrapper too: 29 instructions to pass a
 * cuStreamQuery through, against about 10 now.
 * The program's return address (call sites) travels in t_caller: a tail call
 * keeps it as name__rec's own, but nothing guarantees the tail call.
 */
static __thread const void *t_caller;

#define SP_WRAP_HAND(name, ret, params, args, ptds_, spec)
#define SP_WRAP_GEN(name, ret, params, args, ptds_, spec)                                                             \
	static __attribute__((noinline)) ret name##__rec params;                                                      \
	SP_EXPORT ret name params                                                                                     \
	{                                                                                                             \
		__typeof__(&name) real =                                                                              \
			(__typeof__(&name))__atomic_load_n(&sp_cuda_real[SP_CIDX_##name], __ATOMIC_ACQUIRE);         \
		SP_EARLY_##spec;                                                                                      \
		if (__builtin_expect(real != NULL, 1) && !(SP_BOOKS_##spec ? sp_should_book() : sp_should_record())) \
			return real args;                                                                             \
		if (SP_CALLER_##spec)                                                                                 \
			t_caller = __builtin_return_address(0);                                                       \
		return name##__rec args;                                                                              \
	}                                                                                                             \
	static ret name##__rec params                                                                                 \
	{                                                                                                             \
		__typeof__(&name) real =                                                                              \
			(__typeof__(&name))__atomic_load_n(&sp_cuda_real[SP_CIDX_##name], __ATOMIC_ACQUIRE);         \
		if (__builtin_expect(!real, 0)) { /* the first call: resolve it, then decide */                    \
			real = (__typeof__(&name))resolve_real(SP_CIDX_##name);                                      \
			if (!real)                                                                                    \
				return SP_NOFN_##ret;                                                                 \
			if (!(SP_BOOKS_##spec ? sp_should_book() : sp_should_record()))                              \
				return real args;                                                                     \
		}                                                                                                     \
		struct sp_call c;                                                                                     \
		SP_SPEC_##spec;                                                                                       \
		if (c.fam == FAM_NONE) { /* no record; what it does inside is not the program's */                \
			sp_hook_depth++;                                                                              \
			ret r0 = real args;                                                                           \
			sp_hook_depth--;                                                                              \
			return r0;                                                                                    \
		}                                                                                                     \
		if (c.fam == FAM_SYNC) { /* known at compile time: the inlined path */                             \
			sp_hook_depth++;                                                                              \
			uint64_t t0_ = sync_pre(c.sync);                                                              \
			ret r1 = real args;                                                                           \
			sync_post(SP_API_##name, ptds_, c.sync, c.stream, c.event, t0_, (int)r1);                     \
			sp_hook_depth--;                                                                              \
			return r1;                                                                                    \
		}                                                                                                     \
		if (c.fam == FAM_LAUNCH) {                                                                            \
			sp_hook_depth++;                                                                              \
			struct sp_gtim tim_;                                                                          \
			uint64_t t0_ = launch_pre(&tim_, c.stream, ptds_, launch_key(c.func, c.stub, c.shape));       \
			ret r2 = real args;                                                                           \
			launch_post(SP_API_##name, &tim_, c.stream, c.stub, c.func, t0_, (int)r2);                    \
			sp_hook_depth--;                                                                              \
			return r2;                                                                                    \
		}                                                                                                     \
		c.api = SP_API_##name;                                                                                \
		c.ptds = ptds_;                                                                                       \
		c.caller = SP_CALLER_##spec ? t_caller : NULL;                                                        \
		/* depth covers our own driver calls too: nothing they do is recorded */                          \
		sp_hook_depth++;                                                                                      \
		sp_pre(&c);                                                                                           \
		ret r = real args;                                                                                    \
		sp_post(&c, (int)r);                                                                                  \
		sp_hook_depth--;                                                                                      \
		return r;                                                                                             \
	}

#define SP_API_CUDA(name, id, how, ret, params, args, base, ver, ptds, spec) SP_WRAP_##how(name, ret, params, args, ptds, spec)
#include "stepprof/api_cuda.def"
#undef SP_API_CUDA

/* ------------------------------------------------------ 3. the doors */

void *sp_cuda_adopt(int i, void *real)
{
	if (i < 0 || !real || real == sp_cuda_wrapper[i])
		return real;
	__atomic_store_n(&sp_cuda_real[i], real, __ATOMIC_RELEASE);
	return sp_cuda_wrapper[i];
}

/* After a successful driver lookup: our wrapper for a hooked variant. */
static void proc_answer(const char *symbol, void **pfn, int ver, uint64_t flags)
{
	if (!symbol || !pfn || !*pfn)
		return;
	int i;
	if (strcmp(symbol, "cuGetProcAddress") == 0)
		i = ver >= 12000 ? SP_CIDX_cuGetProcAddress_v2 : SP_CIDX_cuGetProcAddress;
	else
		i = sp_cuda_find_proc(symbol, ver, flags);
	if (i >= 0)
		*pfn = sp_cuda_adopt(i, *pfn);
}

SP_EXPORT CUresult cuGetProcAddress_v2(const char *symbol, void **pfn, int cudaVersion, cuuint64_t flags,
				       CUdriverProcAddressQueryResult *symbolStatus)
{
	__typeof__(&cuGetProcAddress_v2) real = (__typeof__(&cuGetProcAddress_v2))real_of(SP_CIDX_cuGetProcAddress_v2);
	if (!real)
		return CUDA_ERROR_NOT_FOUND;
	CUresult r = real(symbol, pfn, cudaVersion, flags, symbolStatus);
	if (r == CUDA_SUCCESS) {
		int e = errno;
		proc_answer(symbol, pfn, cudaVersion, flags);
		errno = e;
	}
	return r;
}

SP_EXPORT CUresult cuGetProcAddress(const char *symbol, void **pfn, int cudaVersion, cuuint64_t flags)
{
	__typeof__(&cuGetProcAddress) real = (__typeof__(&cuGetProcAddress))real_of(SP_CIDX_cuGetProcAddress);
	if (!real)
		return CUDA_ERROR_NOT_FOUND;
	CUresult r = real(symbol, pfn, cudaVersion, flags);
	if (r == CUDA_SUCCESS) {
		int e = errno;
		proc_answer(symbol, pfn, cudaVersion, flags);
		errno = e;
	}
	return r;
}

/* The cudaVersion cudaGetDriverEntryPoint asks the driver for: the runtime's own. */
static int runtime_version(void)
{
	static int v;
	if (!v) {
		sp_dlsym_fn rd = sp_real_dlsym();
		cudaError_t (*rgv)(int *) = rd ? (cudaError_t(*)(int *))rd(RTLD_NEXT, "cudaRuntimeGetVersion") : NULL;
		int x = 0;
		if (!rgv || rgv(&x) != cudaSuccess || x <= 0)
			x = CUDART_VERSION;
		v = x;
	}
	return v;
}

/* cudaEnablePerThreadDefaultStream, or the _ptsz entry with cudaEnableDefault. */
static uint64_t rt_flags(unsigned long long flags, int ptsz)
{
	return (flags & cudaEnablePerThreadDefaultStream) || (ptsz && !(flags & cudaEnableLegacyStream)) ? 2 : 0;
}

#define SP_DOOR_ENTRY(name, ptsz)                                                                                    \
	SP_EXPORT cudaError_t name(const char *symbol, void **funcPtr, unsigned long long flags,                       \
				   enum cudaDriverEntryPointQueryResult *driverStatus)                                 \
	{                                                                                                             \
		__typeof__(&name) real = (__typeof__(&name))real_of(SP_CIDX_##name);                                \
		if (!real)                                                                                            \
			return cudaErrorSymbolNotFound;                                                               \
		cudaError_t r = real(symbol, funcPtr, flags, driverStatus);                                           \
		if (r == cudaSuccess) {                                                                               \
			int e = errno;                                                                                \
			proc_answer(symbol, funcPtr, runtime_version(), rt_flags(flags, ptsz));                       \
			errno = e;                                                                                    \
		}                                                                                                     \
		return r;                                                                                             \
	}
#define SP_DOOR_VERSION(name, ptsz)                                                                                  \
	SP_EXPORT cudaError_t name(const char *symbol, void **funcPtr, unsigned int cudaVersion,                      \
				   unsigned long long flags, enum cudaDriverEntryPointQueryResult *driverStatus)       \
	{                                                                                                             \
		__typeof__(&name) real = (__typeof__(&name))real_of(SP_CIDX_##name);                                 \
		if (!real)                                                                                            \
			return cudaErrorSymbolNotFound;                                                               \
		cudaError_t r = real(symbol, funcPtr, cudaVersion, flags, driverStatus);                              \
		if (r == cudaSuccess) {                                                                               \
			int e = errno;                                                                                \
			proc_answer(symbol, funcPtr, (int)cudaVersion, rt_flags(flags, ptsz));                        \
			errno = e;                                                                                    \
		}                                                                                                     \
		return r;                                                                                             \
	}

SP_DOOR_ENTRY(cudaGetDriverEntryPoint, 0)
SP_DOOR_ENTRY(cudaGetDriverEntryPoint_ptsz, 1)
SP_DOOR_VERSION(cudaGetDriverEntryPointByVersion, 0)
SP_DOOR_VERSION(cudaGetDriverEntryPointByVersion_ptsz, 1)

/*
 * A forked child starts with the forking thread's timing state: events of the
 * parent's context, which mean nothing in the child. Forget them (the child
 * leaks nothing it could use), and the cached current device. A run of query
 * polls the thread was in is the parent's, which records it: the child must
 * not write it too, at its first CUDA call or its exit, though it never called
 * CUDA (a sync record in a DataLoader worker, begun before it existed).
 */
static void cuda_atfork_child(void)
{
	t_poll.active = 0;
	sp_gpu_forget_thread();
}

__attribute__((constructor)) static void cuda_hooks_init(void)
{
	for (int i = 0; i < SP_CUDA__COUNT; i++) {
		sp_api_async[sp_cuda_table[i].api] = strstr(sp_cuda_table[i].name, "Async") != NULL;
		sp_api_pool[sp_cuda_table[i].api] = strstr(sp_cuda_table[i].name, "FromPool") != NULL;
	}
	pthread_atfork(NULL, NULL, cuda_atfork_child);
}

/* ------------------------------------------------------ 4. the tables */

void *const sp_cuda_wrapper[SP_CUDA__COUNT] = {
#define SP_API_CUDA(name, ...) [SP_CIDX_##name] = (void *)name,
#include "stepprof/api_cuda.def"
#undef SP_API_CUDA
};
