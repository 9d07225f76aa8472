/*
 * nccl_core.c - the simulated NCCL's communicators: reaching the driver,
 * unique ids, the rendezvous of ncclCommInitRank through POSIX shared memory,
 * ncclCommInitAll, ncclCommSplit, finalize/destroy/abort, queries and errors.
 *
 * Like NVIDIA's libraries, it reaches the driver with dlopen("libcuda.so.1") and
 * cuGetProcAddress, never by linking it.
 */
#include "nccl_sim.h"
#include "simgpu.h"

#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <linux/futex.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/random.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

struct sn_drv sn_drv;
double sn_gbps = 10.0;
uint64_t sn_timeout_ns = 60000ull * 1000000ull;

static __thread char last_error[256];

void sn_set_error(const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(last_error, sizeof(last_error), fmt, ap);
	va_end(ap);
}

uint64_t sn_now(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

/* ---- the driver, once ---- */

static pthread_once_t init_once = PTHREAD_ONCE_INIT;
static ncclResult_t init_result = ncclSuccess;

static double env_double(const char *name, double def)
{
	const char *v = getenv(name);
	if (!v || !*v)
		return def;
	char *end;
	double d = strtod(v, &end);
	if (*end || !(d > 0)) {
		fprintf(stderr, "simnccl: bad %s='%s', using %g\n", name, v, def);
		return def;
	}
	return d;
}

static void init_driver(void)
{
	sn_gbps = env_double("SIMNCCL_GBPS", 10.0);
	sn_timeout_ns = (uint64_t)(env_double("SIMNCCL_TIMEOUT_MS", 60000.0) * 1e6);

	void *h = dlopen("libcuda.so.1", RTLD_NOW | RTLD_GLOBAL);
	CUresult (*gpa)(const char *, void **, int, cuuint64_t, CUdriverProcAddressQueryResult *) =
	    h ? (CUresult(*)(const char *, void **, int, cuuint64_t, CUdriverProcAddressQueryResult *))dlsym(
		    h, "cuGetProcAddress_v2")
	      : NULL;
	if (!gpa) {
		sn_set_error("libcuda.so.1: %s", h ? "no cuGetProcAddress_v2" : dlerror());
		init_result = ncclUnhandledCudaError;
		return;
	}
#define GET(field, name)                                                                                               \
	do {                                                                                                           \
		void *p_ = NULL;                                                                                       \
		CUdriverProcAddressQueryResult st_;                                                                    \
		if (gpa(name, &p_, 12000, CU_GET_PROC_ADDRESS_DEFAULT, &st_) != CUDA_SUCCESS || !p_) {                 \
			sn_set_error("cuGetProcAddress(%s) failed", name);                                             \
			init_result = ncclUnhandledCudaError;                                                          \
			return;                                                                                        \
		}                                                                                                      \
		memcpy(&sn_drv.field, &p_, sizeof(p_));                                                                \
	} while (0)
	GET(cuInit, "cuInit");
	GET(cuLaunchKernel, "cuLaunchKernel");
	GET(cuCtxGetDevice, "cuCtxGetDevice");
	GET(cuCtxGetCurrent, "cuCtxGetCurrent");
	GET(cuCtxPushCurrent, "cuCtxPushCurrent");
	GET(cuCtxPopCurrent, "cuCtxPopCurrent");
	GET(cuDevicePrimaryCtxRetain, "cuDevicePrimaryCtxRetain");
	GET(cuGetExportTable, "cuGetExportTable");
#undef GET
	if (sn_drv.cuInit(0) != CUDA_SUCCESS) {
		sn_set_error("cuInit failed");
		init_result = ncclUnhandledCudaError;
		return;
	}
	static const CUuuid tid = {SIMGPU_EXPORT_TABLE_ID};
	const void *tab = NULL;
	if (sn_drv.cuGetExportTable(&tab, &tid) != CUDA_SUCCESS || !tab) {
		sn_set_error("the driver has no kernel registration table");
		init_result = ncclUnhandledCudaError;
		return;
	}
	sn_drv.register_kernel = ((const struct simgpu_export_table *)tab)->register_kernel;
	const struct simgpu_export_table *et = tab;
	sn_drv.globaltimer_ns = et->globaltimer_ns;
	if (et->size >= offsetof(struct simgpu_export_table, kernel_end_at) + sizeof(et->kernel_end_at))
		sn_drv.kernel_end_at = et->kernel_end_at;
	if (!sn_drv.globaltimer_ns)
		sn_drv.globaltimer_ns = sn_now;
	init_result = sn_register_kernels();
}

ncclResult_t sn_init(void)
{
	pthread_once(&init_once, init_driver);
	return init_result;
}

/* ---- shared memory ---- */

static uint64_t fnv1a(uint64_t h, const void *p, size_t n)
{
	const uint8_t *b = p;
	for (size_t i = 0; i < n; i++)
		h = (h ^ b[i]) * 0x100000001b3ull;
	return h;
}
#define FNV_BASIS 0xcbf29ce484222325ull

static size_t hdr_size(void)
{
	return (sizeof(struct sn_shm) + 4095) & ~(size_t)4095;
}

static size_t chan_cap(int nranks)
{
	return nranks <= 8 ? SN_CHAN_BYTES : SN_CHAN_BYTES_MANY;
}

uint8_t *sn_slot(struct ncclComm *c, int rank)
{
	return (uint8_t *)c->sh + hdr_size() + (size_t)rank * SN_SLOT_BYTES;
}

uint8_t *sn_chan(struct ncclComm *c, int src, int dst)
{
	return (uint8_t *)c->sh + hdr_size() + (size_t)c->nranks * SN_SLOT_BYTES +
	       ((size_t)src * (size_t)c->nranks + (size_t)dst) * c->chan_cap;
}

void sn_bump(struct sn_shm *sh)
{
	atomic_fetch_add(&sh->gen, 1);
	syscall(SYS_futex, &sh->gen, FUTEX_WAKE, INT_MAX, NULL, NULL, 0);
}

void sn_wait(struct sn_shm *sh, uint32_t seen, uint64_t deadline)
{
	uint64_t now = sn_now();
	if (now >= deadline)
		return;
	uint64_t left = deadline - now;
	if (left > 100000000ull) /* wake now and then: an abort in this process bumps nothing shared */
		left = 100000000ull;
	struct timespec ts = {(time_t)(left / 1000000000ull), (long)(left % 1000000000ull)};
	syscall(SYS_futex, &sh->gen, FUTEX_WAIT, seen, &ts, NULL, 0);
}

int sn_comm_ok(ncclComm_t c)
{
	return c && c->magic == SN_MAGIC;
}

/* Until every rank q has a[q] >= v: false on timeout or abort. */
static int wait_all(struct ncclComm *c, _Atomic uint64_t *a, uint64_t v, uint64_t deadline)
{
	for (;;) {
		uint32_t g = atomic_load(&c->sh->gen);
		int q = 0;
		while (q < c->nranks && atomic_load(&a[q]) >= v)
			q++;
		if (q == c->nranks)
			return 1;
		if (atomic_load(&c->sh->aborted) || atomic_load(&c->local_abort) || sn_now() >= deadline)
			return 0;
		sn_wait(c->sh, g, deadline);
	}
}

static void shm_name(char *buf, size_t n, uint64_t h)
{
	snprintf(buf, n, "/simnccl-%d-%016llx", (int)getuid(), (unsigned long long)h);
}

/*
 * Map the communicator's segment and take rank `rank` in it; with `wait`, block
 * until all nranks have joined. The last to join unlinks the name: every rank has
 * it mapped by then, and nothing stays behind in /dev/shm.
 */
static ncclResult_t join(ncclComm_t *out, int nranks, uint64_t h, int rank, int dev, CUcontext ctx, int wait)
{
	if (nranks < 1 || nranks > SN_MAXRANKS || rank < 0 || rank >= nranks) {
		sn_set_error("nranks %d, rank %d: out of range (the simulation has at most %d ranks)", nranks, rank,
			     SN_MAXRANKS);
		return ncclInvalidArgument;
	}
	char name[64];
	shm_name(name, sizeof(name), h);
	size_t cap = chan_cap(nranks);
	size_t sz = hdr_size() + (size_t)nranks * SN_SLOT_BYTES + (size_t)nranks * (size_t)nranks * cap;
	int fd = shm_open(name, O_RDWR | O_CREAT, 0600);
	if (fd < 0) {
		sn_set_error("shm_open %s: %s", name, strerror(errno));
		return ncclSystemError;
	}
	if (ftruncate(fd, (off_t)sz)) {
		sn_set_error("ftruncate %s: %s", name, strerror(errno));
		close(fd);
		return ncclSystemError;
	}
	void *m = mmap(NULL, sz, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
	close(fd);
	if (m == MAP_FAILED) {
		sn_set_error("mmap %s: %s", name, strerror(errno));
		return ncclSystemError;
	}
	struct sn_shm *sh = m;
	uint32_t zero = 0;
	if (!atomic_compare_exchange_strong(&sh->nranks, &zero, (uint32_t)nranks) && zero != (uint32_t)nranks) {
		sn_set_error("nranks %d, but the communicator's first rank said %u", nranks, zero);
		munmap(m, sz);
		return ncclInvalidUsage;
	}
	int32_t none = 0;
	if (!atomic_compare_exchange_strong(&sh->pid[rank], &none, (int32_t)getpid())) {
		sn_set_error("rank %d joined twice", rank);
		munmap(m, sz);
		return ncclInvalidUsage;
	}
	struct ncclComm *c = calloc(1, sizeof(*c));
	if (!c) {
		munmap(m, sz);
		return ncclSystemError;
	}
	*c = (struct ncclComm){.magic = SN_MAGIC,
			       .rank = rank,
			       .nranks = nranks,
			       .dev = dev,
			       .ctx = ctx,
			       .sh = sh,
			       .shsz = sz,
			       .chan_cap = cap,
			       .id_hash = h};
	if (atomic_fetch_add(&sh->joined, 1) + 1 == (uint32_t)nranks)
		shm_unlink(name);
	sn_bump(sh);
	if (wait) {
		uint64_t deadline = sn_now() + sn_timeout_ns;
		for (;;) {
			uint32_t g = atomic_load(&sh->gen);
			if (atomic_load(&sh->joined) >= (uint32_t)nranks)
				break;
			if (sn_now() >= deadline) {
				sn_set_error("ncclCommInitRank: %u of %d ranks joined within %llu ms",
					     atomic_load(&sh->joined), nranks,
					     (unsigned long long)(sn_timeout_ns / 1000000));
				shm_unlink(name);
				munmap(m, sz);
				c->magic = 0;
				free(c);
				return ncclRemoteError;
			}
			sn_wait(sh, g, deadline);
		}
	}
	*out = c;
	return ncclSuccess;
}

/* The calling thread's device and its primary context (device 0 when none is current). */
static ncclResult_t current_device(int *dev, CUcontext *ctx)
{
	CUdevice d = 0;
	CUcontext cur = NULL;
	if (sn_drv.cuCtxGetCurrent(&cur) != CUDA_SUCCESS || !cur || sn_drv.cuCtxGetDevice(&d) != CUDA_SUCCESS)
		d = 0;
	if (sn_drv.cuDevicePrimaryCtxRetain(ctx, d) != CUDA_SUCCESS) {
		sn_set_error("no primary context for device %d", (int)d);
		return ncclUnhandledCudaError;
	}
	*dev = (int)d;
	return ncclSuccess;
}

/* ---- the API ---- */

ncclResult_t ncclGetVersion(int *version)
{
	if (!version)
		return ncclInvalidArgument;
	*version = NCCL_VERSION_CODE;
	return ncclSuccess;
}

static const char id_magic[8] = "SIMNCCL";

ncclResult_t ncclGetUniqueId(ncclUniqueId *uniqueId)
{
	static _Atomic uint64_t counter;
	if (!uniqueId)
		return ncclInvalidArgument;
	ncclResult_t r = sn_init();
	if (r != ncclSuccess)
		return r;
	memset(uniqueId, 0, sizeof(*uniqueId));
	uint64_t v[4] = {(uint64_t)getpid(), sn_now(), atomic_fetch_add(&counter, 1), 0};
	if (getrandom(&v[3], sizeof(v[3]), 0) != sizeof(v[3]))
		v[3] = sn_now() * 0x9e3779b97f4a7c15ull;
	memcpy(uniqueId->internal, id_magic, sizeof(id_magic));
	memcpy(uniqueId->internal + sizeof(id_magic), v, sizeof(v));
	return ncclSuccess;
}

static ncclResult_t init_rank(ncclComm_t *comm, int nranks, ncclUniqueId id, int rank)
{
	if (!comm)
		return ncclInvalidArgument;
	*comm = NULL;
	ncclResult_t r = sn_init();
	if (r != ncclSuccess)
		return r;
	if (memcmp(id.internal, id_magic, sizeof(id_magic))) {
		sn_set_error("not a unique id of ncclGetUniqueId");
		return ncclInvalidArgument;
	}
	int dev;
	CUcontext ctx;
	if ((r = current_device(&dev, &ctx)) != ncclSuccess)
		return r;
	return join(comm, nranks, fnv1a(FNV_BASIS, id.internal, sizeof(id.internal)), rank, dev, ctx, 1);
}

ncclResult_t ncclCommInitRank(ncclComm_t *comm, int nranks, ncclUniqueId commId, int rank)
{
	return init_rank(comm, nranks, commId, rank);
}

/* A configuration asking for a non-blocking communicator gets a blocking init all the same (a success). */
ncclResult_t ncclCommInitRankConfig(ncclComm_t *comm, int nranks, ncclUniqueId commId, int rank, ncclConfig_t *config)
{
	if (config && (config->magic != 0xcafebeef || config->size < offsetof(ncclConfig_t, blocking))) {
		sn_set_error("ncclConfig_t not initialised with NCCL_CONFIG_INITIALIZER");
		return ncclInvalidArgument;
	}
	return init_rank(comm, nranks, commId, rank);
}

/* ndev communicators of this process, rank i on devlist[i] (device i without a list). */
ncclResult_t ncclCommInitAll(ncclComm_t *comm, int ndev, const int *devlist)
{
	if (!comm || ndev < 1)
		return ncclInvalidArgument;
	ncclResult_t r = sn_init();
	if (r != ncclSuccess)
		return r;
	ncclUniqueId id;
	if ((r = ncclGetUniqueId(&id)) != ncclSuccess)
		return r;
	uint64_t h = fnv1a(FNV_BASIS, id.internal, sizeof(id.internal));
	for (int i = 0; i < ndev; i++) {
		int dev = devlist ? devlist[i] : i;
		CUcontext ctx;
		if (sn_drv.cuDevicePrimaryCtxRetain(&ctx, dev) != CUDA_SUCCESS) {
			sn_set_error("ncclCommInitAll: no device %d", dev);
			r = ncclInvalidArgument;
		} else {
			r = join(&comm[i], ndev, h, i, dev, ctx, 0);
		}
		if (r != ncclSuccess) {
			char name[64];
			shm_name(name, sizeof(name), h);
			shm_unlink(name);
			while (i-- > 0) {
				munmap(comm[i]->sh, comm[i]->shsz);
				comm[i]->magic = 0;
				free(comm[i]);
				comm[i] = NULL;
			}
			return r;
		}
	}
	return ncclSuccess;
}

/*
 * A collective host call over the parent: every rank gives (color, key); those of
 * one color make a communicator, ranked by (key, parent rank). Its segment is named
 * from the parent's id, the split's number and the color.
 */
ncclResult_t ncclCommSplit(ncclComm_t comm, int color, int key, ncclComm_t *newcomm, ncclConfig_t *config)
{
	(void)config;
	if (!sn_comm_ok(comm) || !newcomm || (color < 0 && color != NCCL_SPLIT_NOCOLOR))
		return ncclInvalidArgument;
	*newcomm = NULL;
	struct sn_shm *sh = comm->sh;
	uint64_t s = ++comm->split_seq, deadline = sn_now() + sn_timeout_ns;
	if (!wait_all(comm, sh->split_done, s - 1, deadline))
		goto remote;
	sh->split_color[comm->rank] = color;
	sh->split_key[comm->rank] = key;
	atomic_store(&sh->split_arrived[comm->rank], s);
	sn_bump(sh);
	if (!wait_all(comm, sh->split_arrived, s, deadline))
		goto remote;
	int n = 0, me = 0;
	for (int q = 0; q < comm->nranks; q++) {
		if (sh->split_color[q] != color)
			continue;
		n++;
		if (sh->split_key[q] < key || (sh->split_key[q] == key && q < comm->rank))
			me++;
	}
	atomic_store(&sh->split_done[comm->rank], s);
	sn_bump(sh);
	if (color == NCCL_SPLIT_NOCOLOR)
		return ncclSuccess;
	uint64_t parts[3] = {comm->id_hash, s, (uint64_t)(uint32_t)color};
	return join(newcomm, n, fnv1a(FNV_BASIS, parts, sizeof(parts)), me, comm->dev, comm->ctx, 1);
remote:
	sn_set_error("ncclCommSplit: not every rank came within %llu ms",
		     (unsigned long long)(sn_timeout_ns / 1000000));
	atomic_store(&comm->async_err, ncclRemoteError);
	return ncclRemoteError;
}

/* Finalize: the communicator's queued operations complete (the device has run them). */
ncclResult_t ncclCommFinalize(ncclComm_t comm)
{
	if (!sn_comm_ok(comm))
		return ncclInvalidArgument;
	sn_wait_pending(comm);
	return (ncclResult_t)atomic_load(&comm->async_err);
}

static void release(ncclComm_t comm)
{
	sn_wait_pending(comm);
	munmap(comm->sh, comm->shsz);
	comm->magic = 0;
	free(comm);
}

ncclResult_t ncclCommDestroy(ncclComm_t comm)
{
	if (!comm)
		return ncclSuccess;
	if (!sn_comm_ok(comm))
		return ncclInvalidArgument;
	release(comm);
	return ncclSuccess;
}

/* Abort: this rank's pending operations give up at once, and so do the other ranks' waits for it. */
ncclResult_t ncclCommAbort(ncclComm_t comm)
{
	if (!comm)
		return ncclSuccess;
	if (!sn_comm_ok(comm))
		return ncclInvalidArgument;
	atomic_store(&comm->local_abort, 1);
	atomic_store(&comm->sh->aborted, 1);
	sn_bump(comm->sh);
	release(comm);
	return ncclSuccess;
}

ncclResult_t ncclCommGetAsyncError(ncclComm_t comm, ncclResult_t *asyncError)
{
	if (!sn_comm_ok(comm) || !asyncError)
		return ncclInvalidArgument;
	*asyncError = (ncclResult_t)atomic_load(&comm->async_err);
	return ncclSuccess;
}

ncclResult_t ncclCommCount(const ncclComm_t comm, int *count)
{
	if (!sn_comm_ok(comm) || !count)
		return ncclInvalidArgument;
	*count = comm->nranks;
	return ncclSuccess;
}

ncclResult_t ncclCommCuDevice(const ncclComm_t comm, int *device)
{
	if (!sn_comm_ok(comm) || !device)
		return ncclInvalidArgument;
	*device = comm->dev;
	return ncclSuccess;
}

ncclResult_t ncclCommUserRank(const ncclComm_t comm, int *rank)
{
	if (!sn_comm_ok(comm) || !rank)
		return ncclInvalidArgument;
	*rank = comm->rank;
	return ncclSuccess;
}

const char *ncclGetErrorString(ncclResult_t result)
{
	switch (result) {
	case ncclSuccess:
		return "no error";
	case ncclUnhandledCudaError:
		return "unhandled cuda error (run with NCCL_DEBUG=INFO for details)";
	case ncclSystemError:
		return "unhandled system error (run with NCCL_DEBUG=INFO for details)";
	case ncclInternalError:
		return "internal error - please report this issue to the NCCL developers";
	case ncclInvalidArgument:
		return "invalid argument (run with NCCL_DEBUG=WARN for details)";
	case ncclInvalidUsage:
		return "invalid usage (run with NCCL_DEBUG=WARN for details)";
	case ncclRemoteError:
		return "remote process exited or there was a network error";
	case ncclInProgress:
		return "NCCL operation in progress";
	default:
		return "unknown result code";
	}
}

const char *ncclGetLastError(ncclComm_t comm)
{
	(void)comm;
	return last_error;
}

/* ---- the rest of nccl.h: not simulated ---- */

#define UNSUPPORTED(decl)                                                                                              \
	decl                                                                                                           \
	{                                                                                                              \
		sn_set_error("not simulated");                                                                         \
		return ncclInvalidUsage;                                                                               \
	}
UNSUPPORTED(ncclResult_t ncclMemAlloc(void **ptr, size_t size))
UNSUPPORTED(ncclResult_t ncclMemFree(void *ptr))
UNSUPPORTED(ncclResult_t ncclCommRevoke(ncclComm_t comm, int revokeFlags))
UNSUPPORTED(ncclResult_t ncclCommShrink(ncclComm_t comm, int *excludeRanksList, int excludeRanksCount,
					ncclComm_t *newcomm, ncclConfig_t *config, int shrinkFlags))
UNSUPPORTED(ncclResult_t ncclCommInitRankScalable(ncclComm_t *newcomm, int nranks, int myrank, int nId,
						  ncclUniqueId *commIds, ncclConfig_t *config))
UNSUPPORTED(ncclResult_t ncclCommRegister(const ncclComm_t comm, void *buff, size_t size, void **handle))
UNSUPPORTED(ncclResult_t ncclCommDeregister(const ncclComm_t comm, void *handle))
UNSUPPORTED(ncclResult_t ncclCommWindowRegister(ncclComm_t comm, void *buff, size_t size, ncclWindow_t *win,
						int winFlags))
UNSUPPORTED(ncclResult_t ncclCommWindowDeregister(ncclComm_t comm, ncclWindow_t win))
UNSUPPORTED(ncclResult_t ncclRedOpCreatePreMulSum(ncclRedOp_t *op, void *scalar, ncclDataType_t datatype,
						  ncclScalarResidence_t residence, ncclComm_t comm))
UNSUPPORTED(ncclResult_t ncclRedOpDestroy(ncclRedOp_t op, ncclComm_t comm))
UNSUPPORTED(ncclResult_t ncclGroupSimulateEnd(ncclSimInfo_t *simInfo))
