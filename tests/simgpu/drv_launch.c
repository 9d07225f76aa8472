/*
 * drv_launch.c - Execution Control of CUDA's Driver API: kernels and what runs them.
 *
 *   1. kernels: registration (simgpu.h), names, attributes; CUkernel handles
 *   2. launches: the arguments are copied, the kernel is queued on its stream
 *   3. host functions (cuLaunchHostFunc, and cuStreamAddCallback of Stream Management)
 *   4. cuKernelGetFunction and cuKernelGetName of Library Management
 *   5. the Occupancy calls
 *
 * RATIONALE: sections 4 and 5 are the few calls of their groups that the
 * simulator has; they take the kernel table of section 1, so they stay with it.
 */
#include "sim.h"
#include "simgpu.h"

#include <dlfcn.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/uio.h>
#include <unistd.h>

/* ---------------------------------------------------------------- 1. kernels */

struct kreg {
	const void *fn;
	char *name;
	int nargs;
	size_t *sizes;
};

static struct kreg *kregs;
static size_t nkregs;

int simgpu_register_kernel(const void *fn, const char *name, int nargs, const size_t *argsizes)
{
	struct kreg *k = NULL, *nk;
	char *nm = name ? strdup(name) : NULL;
	size_t *sz = nargs > 0 ? malloc((size_t)nargs * sizeof(*sz)) : NULL;

	if (!fn || (nargs > 0 && (!argsizes || !sz)) || (name && !nm)) {
		free(nm);
		free(sz);
		return -1;
	}
	if (nargs > 0)
		memcpy(sz, argsizes, (size_t)nargs * sizeof(*sz));
	pthread_mutex_lock(&sim_lock);
	for (size_t i = 0; i < nkregs; i++)
		if (kregs[i].fn == fn)
			k = &kregs[i];
	if (!k) {
		nk = realloc(kregs, (nkregs + 1) * sizeof(*nk));
		if (!nk) {
			pthread_mutex_unlock(&sim_lock);
			free(nm);
			free(sz);
			return -1;
		}
		kregs = nk;
		k = &kregs[nkregs++];
	} else {
		free(k->name);
		free(k->sizes);
	}
	*k = (struct kreg){fn, nm, nargs, sz};
	pthread_mutex_unlock(&sim_lock);
	return 0;
}

static struct kreg *kreg_find_locked(const void *fn)
{
	for (size_t i = 0; i < nkregs; i++)
		if (kregs[i].fn == fn)
			return &kregs[i];
	return NULL;
}

/*
 * CUkernel handles. Since CUDA 12.0 NVIDIA's runtime loads its programs'
 * kernels as a library (cuLibraryLoadData) and launches the CUkernel that
 * cuLibraryGetKernel gives (cudart_entry_points.txt: both requested), which
 * cuLaunchKernel takes in place of a CUfunction; cuFuncGetName does not name
 * it (on an H200, CUDA 13.0: 10 of PyTorch's 12 most-launched kernels, all
 * but a cuBLAS one launched from its module's CUfunction, went unnamed), and
 * cuKernelGetName and cuKernelGetFunction take it. Here a CUkernel is an entry
 * of this table, never a host function: a tool that takes it for a CUfunction
 * is told apart, as on a GPU. Entries are never freed (a library's kernels
 * live as long as the library, and the simulated one is never unloaded).
 */
#define MAX_KERNELS 4096
static const void *kernel_fn[MAX_KERNELS]; /* a CUkernel is &kernel_fn[i] */
static unsigned nkernels;

static int is_kernel(const void *h)
{
	const void *const *p = (const void *const *)h;
	return p >= kernel_fn && p < kernel_fn + __atomic_load_n(&nkernels, __ATOMIC_ACQUIRE);
}

/* The host function behind a CUfunction or a CUkernel. */
static const void *fn_of(const void *h)
{
	return is_kernel(h) ? *(const void *const *)h : h;
}

void *simgpu_kernel_of(const void *fn)
{
	void *k = NULL;

	if (!fn)
		return NULL;
	pthread_mutex_lock(&sim_lock);
	for (unsigned i = 0; i < nkernels && !k; i++)
		if (kernel_fn[i] == fn)
			k = (void *)&kernel_fn[i];
	if (!k && nkernels < MAX_KERNELS) {
		kernel_fn[nkernels] = fn;
		k = (void *)&kernel_fn[nkernels];
		__atomic_store_n(&nkernels, nkernels + 1, __ATOMIC_RELEASE);
	}
	pthread_mutex_unlock(&sim_lock);
	return k;
}

CUresult cuFuncGetName(const char **name, CUfunction hfunc)
{
	struct kreg *k;
	Dl_info info;

	if (!name || !hfunc)
		return CUDA_ERROR_INVALID_VALUE;
	if (is_kernel(hfunc))
		return CUDA_ERROR_INVALID_HANDLE; /* a CUkernel: cuKernelGetName names it */
	pthread_mutex_lock(&sim_lock);
	k = kreg_find_locked(hfunc);
	*name = k ? k->name : NULL;
	pthread_mutex_unlock(&sim_lock);
	if (*name)
		return CUDA_SUCCESS;
	if (dladdr((void *)hfunc, &info) && info.dli_saddr == (void *)hfunc && info.dli_sname) {
		*name = info.dli_sname;
		return CUDA_SUCCESS;
	}
	return CUDA_ERROR_NOT_FOUND;
}

CUresult cuFuncGetAttribute(int *pi, CUfunction_attribute attrib, CUfunction hfunc)
{
	if (!pi || !hfunc)
		return CUDA_ERROR_INVALID_VALUE;
	*pi = attrib == CU_FUNC_ATTRIBUTE_MAX_THREADS_PER_BLOCK					      ? 1024
	      : attrib == CU_FUNC_ATTRIBUTE_PTX_VERSION || attrib == CU_FUNC_ATTRIBUTE_BINARY_VERSION ? 80
												      : 0;
	return CUDA_SUCCESS;
}

CUresult cuFuncSetAttribute(CUfunction hfunc, CUfunction_attribute attrib, int value)
{
	return hfunc ? CUDA_SUCCESS : CUDA_ERROR_INVALID_HANDLE;
}

CUresult cuFuncSetCacheConfig(CUfunction hfunc, CUfunc_cache config)
{
	return hfunc ? CUDA_SUCCESS : CUDA_ERROR_INVALID_HANDLE;
}

CUresult cuFuncGetParamInfo(CUfunction func, size_t paramIndex, size_t *paramOffset, size_t *paramSize)
{
	struct kreg *k;
	CUresult r = CUDA_ERROR_INVALID_VALUE;

	pthread_mutex_lock(&sim_lock);
	k = kreg_find_locked(func);
	if (k && k->nargs >= 0 && paramIndex < (size_t)k->nargs) {
		size_t off = 0;
		for (size_t i = 0; i < paramIndex; i++)
			off += k->sizes[i];
		if (paramOffset)
			*paramOffset = off;
		if (paramSize)
			*paramSize = k->sizes[paramIndex];
		r = CUDA_SUCCESS;
	}
	pthread_mutex_unlock(&sim_lock);
	return r;
}

/* ---------------------------------------------------------------- 2. launches */

/*
 * Read n bytes at src without faulting: 0 when they are not all readable. Used on
 * the arguments of unregistered kernels, whose count and sizes are guessed (a
 * program written for a real GPU does not NULL-terminate its argument array).
 */
static int safe_read(void *dst, const void *src, size_t n)
{
	struct iovec l = {dst, n}, r = {(void *)src, n};
	ssize_t got = process_vm_readv(getpid(), &l, 1, &r, 1, 0);

	if (got == (ssize_t)n)
		return 1;
	if (got < 0 && (errno == ENOSYS || errno == EPERM)) {
		/* NOTE: no process_vm_readv here (seccomp): trust the documented convention. */
		memcpy(dst, src, n);
		return 1;
	}
	return 0;
}

/*
 * Copy the launch's arguments, as CUDA does at launch: one block holding the
 * pointer array then the values. Registered kernels have known sizes; others
 * pass a NULL-terminated array of arguments of at most 8 bytes each.
 */
void **sim_pack_args(const void *fn, void **params, void **extra, size_t *store_size, int *fail)
{
	size_t n = 0, total, sizes_local[64], *sizes = sizes_local;
	struct kreg *k;
	char *vals;
	void **out;

	*fail = 0;
	if (!params && extra) {
		/* CU_LAUNCH_PARAM_BUFFER_POINTER / _SIZE: the kernel gets args[0] = the buffer. */
		void *buf = NULL;
		size_t bsz = 0;
		for (size_t i = 0; extra[i] != CU_LAUNCH_PARAM_END; i += 2) {
			if (extra[i] == CU_LAUNCH_PARAM_BUFFER_POINTER)
				buf = extra[i + 1];
			else if (extra[i] == CU_LAUNCH_PARAM_BUFFER_SIZE)
				bsz = *(size_t *)extra[i + 1];
			else
				break;
		}
		out = malloc(2 * sizeof(void *) + bsz);
		if (!out) {
			*fail = 1;
			return NULL;
		}
		memcpy(out + 2, buf, bsz);
		out[0] = out + 2;
		out[1] = NULL;
		*store_size = 2 * sizeof(void *) + bsz;
		return out;
	}
	if (!params)
		return NULL;
	pthread_mutex_lock(&sim_lock);
	k = kreg_find_locked(fn);
	if (k && k->nargs < 0)
		k = NULL; /* registered for its name only */
	if (k) {
		n = (size_t)k->nargs;
		if (n > 64)
			n = 64;
		memcpy(sizes, k->sizes, n * sizeof(*sizes));
	}
	pthread_mutex_unlock(&sim_lock);
	if (!k) {
		void *pv;
		while (n < 64 && safe_read(&pv, &params[n], sizeof(pv)) && pv)
			sizes[n++] = 8;
	}
	total = (n + 1) * sizeof(void *);
	for (size_t i = 0; i < n; i++)
		total += (sizes[i] + 15) & ~(size_t)15;
	out = malloc(total);
	if (!out) {
		*fail = 1;
		return NULL;
	}
	vals = (char *)(out + n + 1);
	for (size_t i = 0; i < n; i++) {
		if (k)
			memcpy(vals, params[i], sizes[i]);
		else if (!safe_read(vals, params[i], sizes[i]))
			memset(vals, 0, sizes[i]); /* an 8-byte read past a small last argument's page */
		out[i] = vals;
		vals += (sizes[i] + 15) & ~(size_t)15;
	}
	out[n] = NULL;
	*store_size = total;
	return out;
}

static CUresult launch(CUfunction f, CUstream h, int pt, void **params, void **extra)
{
	struct sim_op *op;
	int fail;
	SIM_RESOLVE(h, pt, s);

	if (!f)
		return CUDA_ERROR_INVALID_HANDLE;
	op = sim_op_new(OP_KERNEL);
	if (!op)
		return CUDA_ERROR_OUT_OF_MEMORY;
	f = (CUfunction)(void *)fn_of(f); /* a CUkernel runs its function */
	op->u.kern.fn = (void (*)(void **))(void *)f;
	op->u.kern.args = sim_pack_args(f, params, extra, &op->u.kern.store_size, &fail);
	if (fail) {
		free(op);
		return CUDA_ERROR_OUT_OF_MEMORY;
	}
	return sim_enqueue(s, op, 0);
}

#define GRID_OK(gx, gy, gz, bx, by, bz) ((gx) && (gy) && (gz) && (bx) && (by) && (bz) && (bx) * (by) * (bz) <= 1024)

CUresult cuLaunchKernel(CUfunction f, unsigned int gx, unsigned int gy, unsigned int gz, unsigned int bx,
			unsigned int by, unsigned int bz, unsigned int shmem, CUstream h, void **params, void **extra)
{
	if (!GRID_OK(gx, gy, gz, bx, by, bz))
		return CUDA_ERROR_INVALID_VALUE;
	return launch(f, h, 0, params, extra);
}

CUresult cuLaunchKernel_ptsz(CUfunction f, unsigned int gx, unsigned int gy, unsigned int gz, unsigned int bx,
			     unsigned int by, unsigned int bz, unsigned int shmem, CUstream h, void **params,
			     void **extra)
{
	if (!GRID_OK(gx, gy, gz, bx, by, bz))
		return CUDA_ERROR_INVALID_VALUE;
	return launch(f, h, 1, params, extra);
}

CUresult cuLaunchCooperativeKernel(CUfunction f, unsigned int gx, unsigned int gy, unsigned int gz, unsigned int bx,
				   unsigned int by, unsigned int bz, unsigned int shmem, CUstream h, void **params)
{
	if (!GRID_OK(gx, gy, gz, bx, by, bz))
		return CUDA_ERROR_INVALID_VALUE;
	return launch(f, h, 0, params, NULL);
}

CUresult cuLaunchCooperativeKernel_ptsz(CUfunction f, unsigned int gx, unsigned int gy, unsigned int gz,
					unsigned int bx, unsigned int by, unsigned int bz, unsigned int shmem,
					CUstream h, void **params)
{
	if (!GRID_OK(gx, gy, gz, bx, by, bz))
		return CUDA_ERROR_INVALID_VALUE;
	return launch(f, h, 1, params, NULL);
}

CUresult cuLaunchKernelEx(const CUlaunchConfig *c, CUfunction f, void **params, void **extra)
{
	if (!c || !GRID_OK(c->gridDimX, c->gridDimY, c->gridDimZ, c->blockDimX, c->blockDimY, c->blockDimZ))
		return CUDA_ERROR_INVALID_VALUE;
	return launch(f, c->hStream, 0, params, extra);
}

CUresult cuLaunchKernelEx_ptsz(const CUlaunchConfig *c, CUfunction f, void **params, void **extra)
{
	if (!c || !GRID_OK(c->gridDimX, c->gridDimY, c->gridDimZ, c->blockDimX, c->blockDimY, c->blockDimZ))
		return CUDA_ERROR_INVALID_VALUE;
	return launch(f, c->hStream, 1, params, extra);
}

/* ---------------------------------------------------------------- 3. host functions */

static CUresult host_fn(CUstream h, CUhostFn fn, CUstreamCallback cb, void *ud, int pt)
{
	struct sim_op *op;
	SIM_RESOLVE(h, pt, s);

	if (!fn && !cb)
		return CUDA_ERROR_INVALID_VALUE;
	op = sim_op_new(OP_HOST);
	if (!op)
		return CUDA_ERROR_OUT_OF_MEMORY;
	op->u.host.fn = fn;
	op->u.host.cb = cb;
	op->u.host.ud = ud;
	op->u.host.cbs = h;
	return sim_enqueue(s, op, 0);
}

CUresult cuLaunchHostFunc(CUstream hStream, CUhostFn fn, void *userData)
{
	return host_fn(hStream, fn, NULL, userData, 0);
}

CUresult cuLaunchHostFunc_ptsz(CUstream hStream, CUhostFn fn, void *userData)
{
	return host_fn(hStream, fn, NULL, userData, 1);
}

CUresult cuStreamAddCallback(CUstream hStream, CUstreamCallback callback, void *userData, unsigned int flags)
{
	return host_fn(hStream, NULL, callback, userData, 0);
}

CUresult cuStreamAddCallback_ptsz(CUstream hStream, CUstreamCallback callback, void *userData, unsigned int flags)
{
	return host_fn(hStream, NULL, callback, userData, 1);
}

/* ---------------------------------------------------------------- 4. CUkernel handles (Library Management) */

CUresult cuKernelGetFunction(CUfunction *pFunc, CUkernel kernel)
{
	if (!pFunc || !kernel)
		return CUDA_ERROR_INVALID_VALUE;
	if (!is_kernel(kernel))
		return CUDA_ERROR_INVALID_HANDLE;
	*pFunc = (CUfunction)(void *)fn_of(kernel); /* the context's function is the kernel's host function */
	return CUDA_SUCCESS;
}

CUresult cuKernelGetName(const char **name, CUkernel hfunc)
{
	if (!name || !hfunc)
		return CUDA_ERROR_INVALID_VALUE;
	if (!is_kernel(hfunc))
		return CUDA_ERROR_INVALID_HANDLE;
	return cuFuncGetName(name, (CUfunction)(void *)fn_of(hfunc));
}

/* ---------------------------------------------------------------- 5. occupancy */

CUresult cuOccupancyMaxActiveBlocksPerMultiprocessorWithFlags(int *numBlocks, CUfunction func, int blockSize,
							      size_t dynamicSMemSize, unsigned int flags)
{
	if (!numBlocks || blockSize <= 0)
		return CUDA_ERROR_INVALID_VALUE;
	*numBlocks = 2048 / blockSize > 32 ? 32 : 2048 / blockSize;
	return CUDA_SUCCESS;
}

CUresult cuOccupancyAvailableDynamicSMemPerBlock(size_t *dynamicSmemSize, CUfunction func, int numBlocks, int blockSize)
{
	if (!dynamicSmemSize)
		return CUDA_ERROR_INVALID_VALUE;
	*dynamicSmemSize = 49152;
	return CUDA_SUCCESS;
}
