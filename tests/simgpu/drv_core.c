/*
 * drv_core.c - the simulated driver's process state and its "identity" calls.
 *
 *   1. process state, configuration (SIMGPU_*), lazy initialisation (cuInit)
 *   2. devices and attributes (cuDeviceGet*, cuDriverGetVersion)
 *   3. contexts: primary contexts and a per-thread context stack
 *   4. error strings
 *   5. cuGetProcAddress (from the table generated out of cuda*Typedefs.h) and
 *      cuGetExportTable
 *   6. older names the CUDA 13 runtime still requests, small no-ops
 *
 * Nothing here runs before cuInit: a process that links libcuda.so.1 but never
 * initialises CUDA starts no thread and maps no memory.
 */
#include "procs.h"
#include "sim.h"
#include "simgpu.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

/* ---------------------------------------------------------------- 1. state */

pthread_mutex_t sim_lock = PTHREAD_MUTEX_INITIALIZER;
pthread_cond_t sim_cond;
struct sim_config sim_cfg;
struct sim_dev sim_devs[SIM_MAX_DEV];
int sim_ndev;
int sim_inited;

static pthread_once_t init_once = PTHREAD_ONCE_INIT;
static CUresult init_result = CUDA_ERROR_NOT_INITIALIZED;
static int forked; /* in a child forked after cuInit: CUDA is unusable there, as on a GPU */

static __thread CUcontext ctx_stack[16];
static __thread int ctx_top; /* number of entries; the current context is ctx_stack[ctx_top-1] */

uint64_t sim_now_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

static double env_double(const char *name, double def)
{
	const char *s = getenv(name);
	char *end;
	double v;

	if (!s || !*s)
		return def;
	errno = 0;
	v = strtod(s, &end);
	if (errno || *end || !(v > 0)) {
		fprintf(stderr, "simgpu: ignoring %s=%s (want a positive number)\n", name, s);
		return def;
	}
	return v;
}

static size_t env_size(const char *name, size_t def)
{
	const char *s = getenv(name);
	char *end;
	unsigned long long v;

	if (!s || !*s)
		return def;
	errno = 0;
	v = strtoull(s, &end, 0);
	if (*end == 'k' || *end == 'K')
		v <<= 10, end++;
	else if (*end == 'm' || *end == 'M')
		v <<= 20, end++;
	else if (*end == 'g' || *end == 'G')
		v <<= 30, end++;
	if (errno || *end || v == 0) {
		fprintf(stderr, "simgpu: ignoring %s=%s (want a byte count)\n", name, s);
		return def;
	}
	return (size_t)v;
}

/* The child has none of the parent's worker threads: every call fails cleanly. */
static void atfork_child(void)
{
	pthread_mutex_init(&sim_lock, NULL);
	sim_inited = 0;
	forked = 1;
}

static void do_init(void)
{
	pthread_condattr_t ca;

	pthread_condattr_init(&ca);
	pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
	pthread_cond_init(&sim_cond, &ca);

	sim_cfg.pinned_gbps = env_double("SIMGPU_PINNED_GBPS", 8);
	sim_cfg.pageable_gbps = env_double("SIMGPU_PAGEABLE_GBPS", 2);
	sim_cfg.device_gbps = env_double("SIMGPU_DEVICE_GBPS", 100);
	sim_cfg.mem_bytes = env_size("SIMGPU_MEM_BYTES", (size_t)1 << 30);
	sim_cfg.devices = (int)env_size("SIMGPU_DEVICES", 1);
	sim_cfg.capture_no_events = (int)env_size("SIMGPU_CAPTURE_NO_EVENTS", 0) != 0;
	if (sim_cfg.devices > SIM_MAX_DEV)
		sim_cfg.devices = SIM_MAX_DEV;
	for (int i = 0; i < sim_cfg.devices; i++) {
		struct sim_dev *d = &sim_devs[i];
		d->ordinal = i;
		d->primary.device = i;
		d->primary.primary = 1;
		d->default_pool.device = i;
		d->default_pool.is_default = 1;
		d->cur_pool = &d->default_pool;
		if (sim_mem_init_dev(d) != 0) {
			init_result = CUDA_ERROR_OUT_OF_MEMORY;
			return;
		}
	}
	sim_ndev = sim_cfg.devices;
	pthread_atfork(NULL, NULL, atfork_child);
	sim_inited = 1;
	init_result = CUDA_SUCCESS;
}

CUresult cuInit(unsigned int Flags)
{
	if (Flags != 0)
		return CUDA_ERROR_INVALID_VALUE;
	pthread_once(&init_once, do_init);
	return forked ? CUDA_ERROR_NOT_INITIALIZED : init_result;
}

CUresult sim_check_init(void)
{
	return sim_inited ? CUDA_SUCCESS : CUDA_ERROR_NOT_INITIALIZED;
}

CUresult cuDriverGetVersion(int *driverVersion)
{
	if (!driverVersion)
		return CUDA_ERROR_INVALID_VALUE;
	*driverVersion = SIM_VERSION;
	return CUDA_SUCCESS;
}

/* ---------------------------------------------------------------- 2. devices */

#define CHECK_INIT()                                                                                                   \
	do {                                                                                                           \
		if (!sim_inited)                                                                                       \
			return CUDA_ERROR_NOT_INITIALIZED;                                                             \
	} while (0)
#define CHECK_DEV(dev)                                                                                                 \
	do {                                                                                                           \
		if ((dev) < 0 || (dev) >= sim_ndev)                                                                    \
			return CUDA_ERROR_INVALID_DEVICE;                                                              \
	} while (0)

CUresult cuDeviceGet(CUdevice *device, int ordinal)
{
	CHECK_INIT();
	if (!device)
		return CUDA_ERROR_INVALID_VALUE;
	CHECK_DEV(ordinal);
	*device = ordinal;
	return CUDA_SUCCESS;
}

CUresult cuDeviceGetCount(int *count)
{
	CHECK_INIT();
	if (!count)
		return CUDA_ERROR_INVALID_VALUE;
	*count = sim_ndev;
	return CUDA_SUCCESS;
}

CUresult cuDeviceGetName(char *name, int len, CUdevice dev)
{
	CHECK_INIT();
	CHECK_DEV(dev);
	if (!name || len <= 0)
		return CUDA_ERROR_INVALID_VALUE;
	snprintf(name, (size_t)len, "%s", SIM_DEVICE_NAME);
	return CUDA_SUCCESS;
}

CUresult cuDeviceTotalMem_v2(size_t *bytes, CUdevice dev)
{
	CHECK_INIT();
	CHECK_DEV(dev);
	if (!bytes)
		return CUDA_ERROR_INVALID_VALUE;
	*bytes = sim_devs[dev].cap;
	return CUDA_SUCCESS;
}

CUresult cuDeviceGetUuid_v2(CUuuid *uuid, CUdevice dev)
{
	CHECK_INIT();
	CHECK_DEV(dev);
	if (!uuid)
		return CUDA_ERROR_INVALID_VALUE;
	memset(uuid, 0, sizeof(*uuid));
	memcpy(uuid->bytes, "simgpu-device-", 14);
	uuid->bytes[15] = (char)dev;
	return CUDA_SUCCESS;
}

CUresult cuDeviceGetUuid(CUuuid *uuid, CUdevice dev)
{
	return cuDeviceGetUuid_v2(uuid, dev);
}

CUresult cuDeviceGetPCIBusId(char *pciBusId, int len, CUdevice dev)
{
	CHECK_INIT();
	CHECK_DEV(dev);
	if (!pciBusId || len <= 0)
		return CUDA_ERROR_INVALID_VALUE;
	snprintf(pciBusId, (size_t)len, "0000:%02x:00.0", 0x10 + dev);
	return CUDA_SUCCESS;
}

/* A plausible mid-range device (compute capability 8.0, 108 SMs); attributes not
 * listed are 0. PCI bus id: 0x10 + the ordinal. */
static const struct {
	CUdevice_attribute attr;
	int value;
} attrs[] = {
    {CU_DEVICE_ATTRIBUTE_MAX_THREADS_PER_BLOCK, 1024},
    {CU_DEVICE_ATTRIBUTE_MAX_BLOCK_DIM_X, 1024},
    {CU_DEVICE_ATTRIBUTE_MAX_BLOCK_DIM_Y, 1024},
    {CU_DEVICE_ATTRIBUTE_MAX_BLOCK_DIM_Z, 64},
    {CU_DEVICE_ATTRIBUTE_MAX_GRID_DIM_X, 2147483647},
    {CU_DEVICE_ATTRIBUTE_MAX_GRID_DIM_Y, 65535},
    {CU_DEVICE_ATTRIBUTE_MAX_GRID_DIM_Z, 65535},
    {CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK, 49152},
    {CU_DEVICE_ATTRIBUTE_TOTAL_CONSTANT_MEMORY, 65536},
    {CU_DEVICE_ATTRIBUTE_WARP_SIZE, 32},
    {CU_DEVICE_ATTRIBUTE_MAX_PITCH, 2147483647},
    {CU_DEVICE_ATTRIBUTE_MAX_REGISTERS_PER_BLOCK, 65536},
    {CU_DEVICE_ATTRIBUTE_CLOCK_RATE, 1410000},
    {CU_DEVICE_ATTRIBUTE_TEXTURE_ALIGNMENT, 512},
    {CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT, 108},
    {CU_DEVICE_ATTRIBUTE_KERNEL_EXEC_TIMEOUT, 0},
    {CU_DEVICE_ATTRIBUTE_INTEGRATED, 0},
    {CU_DEVICE_ATTRIBUTE_CAN_MAP_HOST_MEMORY, 1},
    {CU_DEVICE_ATTRIBUTE_COMPUTE_MODE, CU_COMPUTEMODE_DEFAULT},
    {CU_DEVICE_ATTRIBUTE_CONCURRENT_KERNELS, 1},
    {CU_DEVICE_ATTRIBUTE_ECC_ENABLED, 0},
    {CU_DEVICE_ATTRIBUTE_PCI_DEVICE_ID, 0},
    {CU_DEVICE_ATTRIBUTE_PCI_DOMAIN_ID, 0},
    {CU_DEVICE_ATTRIBUTE_TCC_DRIVER, 0},
    {CU_DEVICE_ATTRIBUTE_MEMORY_CLOCK_RATE, 1215000},
    {CU_DEVICE_ATTRIBUTE_GLOBAL_MEMORY_BUS_WIDTH, 5120},
    {CU_DEVICE_ATTRIBUTE_L2_CACHE_SIZE, 40 << 20},
    {CU_DEVICE_ATTRIBUTE_MAX_THREADS_PER_MULTIPROCESSOR, 2048},
    {CU_DEVICE_ATTRIBUTE_ASYNC_ENGINE_COUNT, 2},
    {CU_DEVICE_ATTRIBUTE_UNIFIED_ADDRESSING, 1},
    {CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR, 8},
    {CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR, 0},
    {CU_DEVICE_ATTRIBUTE_STREAM_PRIORITIES_SUPPORTED, 1},
    {CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_MULTIPROCESSOR, 167936},
    {CU_DEVICE_ATTRIBUTE_MAX_REGISTERS_PER_MULTIPROCESSOR, 65536},
    {CU_DEVICE_ATTRIBUTE_MANAGED_MEMORY, 1},
    {CU_DEVICE_ATTRIBUTE_MULTI_GPU_BOARD, 0},
    {CU_DEVICE_ATTRIBUTE_CONCURRENT_MANAGED_ACCESS, 1},
    {CU_DEVICE_ATTRIBUTE_COOPERATIVE_LAUNCH, 1},
    {CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN, 166912},
    {CU_DEVICE_ATTRIBUTE_VIRTUAL_MEMORY_MANAGEMENT_SUPPORTED, 1},
    {CU_DEVICE_ATTRIBUTE_HOST_NUMA_VIRTUAL_MEMORY_MANAGEMENT_SUPPORTED, 1},
    {CU_DEVICE_ATTRIBUTE_MEMORY_POOLS_SUPPORTED, 1},
    {CU_DEVICE_ATTRIBUTE_GPU_DIRECT_RDMA_SUPPORTED, 0},
    {CU_DEVICE_ATTRIBUTE_HOST_REGISTER_SUPPORTED, 1},
    {CU_DEVICE_ATTRIBUTE_PAGEABLE_MEMORY_ACCESS, 0},
    {CU_DEVICE_ATTRIBUTE_CAN_USE_HOST_POINTER_FOR_REGISTERED_MEM, 1},
};

CUresult cuDeviceGetAttribute(int *pi, CUdevice_attribute attrib, CUdevice dev)
{
	CHECK_INIT();
	CHECK_DEV(dev);
	if (!pi)
		return CUDA_ERROR_INVALID_VALUE;
	*pi = 0;
	if (attrib == CU_DEVICE_ATTRIBUTE_PCI_BUS_ID) {
		*pi = 0x10 + dev;
		return CUDA_SUCCESS;
	}
	for (size_t i = 0; i < sizeof(attrs) / sizeof(attrs[0]); i++)
		if (attrs[i].attr == attrib)
			*pi = attrs[i].value;
	return CUDA_SUCCESS;
}

CUresult cuDeviceGetP2PAttribute(int *value, CUdevice_P2PAttribute attrib, CUdevice srcDevice, CUdevice dstDevice)
{
	CHECK_INIT();
	CHECK_DEV(srcDevice);
	CHECK_DEV(dstDevice);
	if (!value || srcDevice == dstDevice)
		return CUDA_ERROR_INVALID_VALUE;
	*value = attrib == CU_DEVICE_P2P_ATTRIBUTE_ACCESS_SUPPORTED ? 1 : 0;
	return CUDA_SUCCESS;
}

CUresult cuDeviceCanAccessPeer(int *canAccessPeer, CUdevice dev, CUdevice peerDev)
{
	CHECK_INIT();
	CHECK_DEV(dev);
	CHECK_DEV(peerDev);
	if (!canAccessPeer)
		return CUDA_ERROR_INVALID_VALUE;
	*canAccessPeer = dev != peerDev;
	return CUDA_SUCCESS;
}

/* ---------------------------------------------------------------- 3. contexts */

CUcontext sim_cur_ctx(void)
{
	return ctx_top > 0 ? ctx_stack[ctx_top - 1] : NULL;
}

int sim_cur_dev(CUresult *err)
{
	CUcontext c;

	if (!sim_inited) {
		*err = CUDA_ERROR_NOT_INITIALIZED;
		return -1;
	}
	c = sim_cur_ctx();
	if (!c) {
		*err = CUDA_ERROR_INVALID_CONTEXT;
		return -1;
	}
	return c->device;
}

CUresult cuDevicePrimaryCtxRetain(CUcontext *pctx, CUdevice dev)
{
	CHECK_INIT();
	CHECK_DEV(dev);
	if (!pctx)
		return CUDA_ERROR_INVALID_VALUE;
	pthread_mutex_lock(&sim_lock);
	sim_devs[dev].primary.refs++;
	sim_devs[dev].primary_active = 1;
	pthread_mutex_unlock(&sim_lock);
	*pctx = &sim_devs[dev].primary;
	return CUDA_SUCCESS;
}

CUresult cuDevicePrimaryCtxRelease_v2(CUdevice dev)
{
	CHECK_INIT();
	CHECK_DEV(dev);
	pthread_mutex_lock(&sim_lock);
	if (sim_devs[dev].primary.refs > 0 && --sim_devs[dev].primary.refs == 0)
		sim_devs[dev].primary_active = 0;
	pthread_mutex_unlock(&sim_lock);
	return CUDA_SUCCESS;
}

CUresult cuDevicePrimaryCtxSetFlags_v2(CUdevice dev, unsigned int flags)
{
	CHECK_INIT();
	CHECK_DEV(dev);
	sim_devs[dev].primary.flags = flags;
	return CUDA_SUCCESS;
}

CUresult cuDevicePrimaryCtxGetState(CUdevice dev, unsigned int *flags, int *active)
{
	CHECK_INIT();
	CHECK_DEV(dev);
	if (!flags || !active)
		return CUDA_ERROR_INVALID_VALUE;
	*flags = sim_devs[dev].primary.flags;
	*active = sim_devs[dev].primary_active;
	return CUDA_SUCCESS;
}

/* As CUDA: once the device's work is done, every allocation made in it is gone. */
CUresult cuDevicePrimaryCtxReset_v2(CUdevice dev)
{
	CHECK_INIT();
	CHECK_DEV(dev);
	sim_ctx_sync_dev(dev);
	pthread_mutex_lock(&sim_lock);
	sim_mem_reset_locked(dev);
	pthread_mutex_unlock(&sim_lock);
	return CUDA_SUCCESS;
}

CUresult cuCtxGetCurrent(CUcontext *pctx)
{
	CHECK_INIT();
	if (!pctx)
		return CUDA_ERROR_INVALID_VALUE;
	*pctx = sim_cur_ctx();
	return CUDA_SUCCESS;
}

CUresult cuCtxSetCurrent(CUcontext ctx)
{
	CHECK_INIT();
	if (!ctx) {
		if (ctx_top > 0)
			ctx_top--;
		return CUDA_SUCCESS;
	}
	if (ctx_top == 0)
		ctx_top = 1;
	ctx_stack[ctx_top - 1] = ctx;
	return CUDA_SUCCESS;
}

CUresult cuCtxPushCurrent_v2(CUcontext ctx)
{
	CHECK_INIT();
	if (!ctx)
		return CUDA_ERROR_INVALID_CONTEXT;
	if (ctx_top >= (int)(sizeof(ctx_stack) / sizeof(ctx_stack[0])))
		return CUDA_ERROR_INVALID_VALUE;
	ctx_stack[ctx_top++] = ctx;
	return CUDA_SUCCESS;
}

CUresult cuCtxPopCurrent_v2(CUcontext *pctx)
{
	CHECK_INIT();
	if (ctx_top == 0)
		return CUDA_ERROR_INVALID_CONTEXT;
	ctx_top--;
	if (pctx)
		*pctx = ctx_stack[ctx_top];
	return CUDA_SUCCESS;
}

CUresult cuCtxGetDevice(CUdevice *device)
{
	CUresult err = CUDA_SUCCESS;
	int dev;

	if (!device)
		return CUDA_ERROR_INVALID_VALUE;
	dev = sim_cur_dev(&err);
	if (dev < 0)
		return err;
	*device = dev;
	return CUDA_SUCCESS;
}

CUresult cuCtxGetDevice_v2(CUdevice *device, CUcontext ctx)
{
	if (!ctx)
		return cuCtxGetDevice(device);
	CHECK_INIT();
	if (!device)
		return CUDA_ERROR_INVALID_VALUE;
	*device = ctx->device;
	return CUDA_SUCCESS;
}

CUresult cuCtxGetFlags(unsigned int *flags)
{
	CUcontext c = sim_cur_ctx();

	CHECK_INIT();
	if (!c)
		return CUDA_ERROR_INVALID_CONTEXT;
	if (!flags)
		return CUDA_ERROR_INVALID_VALUE;
	*flags = c->flags;
	return CUDA_SUCCESS;
}

CUresult cuCtxGetApiVersion(CUcontext ctx, unsigned int *version)
{
	CHECK_INIT();
	if (!version)
		return CUDA_ERROR_INVALID_VALUE;
	*version = 3020;
	return CUDA_SUCCESS;
}

static CUresult ctx_create(CUcontext *pctx, unsigned int flags, CUdevice dev)
{
	CUcontext c;

	CHECK_INIT();
	CHECK_DEV(dev);
	if (!pctx)
		return CUDA_ERROR_INVALID_VALUE;
	c = calloc(1, sizeof(*c));
	if (!c)
		return CUDA_ERROR_OUT_OF_MEMORY;
	c->device = dev;
	c->flags = flags;
	c->refs = 1;
	*pctx = c;
	return cuCtxPushCurrent_v2(c);
}

CUresult cuCtxCreate_v2(CUcontext *pctx, unsigned int flags, CUdevice dev)
{
	return ctx_create(pctx, flags, dev);
}

CUresult cuCtxCreate_v3(CUcontext *pctx, CUexecAffinityParam *paramsArray, int numParams, unsigned int flags,
			CUdevice dev)
{
	return ctx_create(pctx, flags, dev);
}

CUresult cuCtxCreate_v4(CUcontext *pctx, CUctxCreateParams *ctxCreateParams, unsigned int flags, CUdevice dev)
{
	return ctx_create(pctx, flags, dev);
}

CUresult cuCtxDestroy_v2(CUcontext ctx)
{
	CHECK_INIT();
	if (!ctx || ctx->primary)
		return CUDA_ERROR_INVALID_CONTEXT;
	sim_ctx_sync_dev(ctx->device);
	for (int i = 0; i < ctx_top; i++)
		if (ctx_stack[i] == ctx) {
			memmove(&ctx_stack[i], &ctx_stack[i + 1], (size_t)(ctx_top - i - 1) * sizeof(ctx_stack[0]));
			ctx_top--;
			i--;
		}
	/* NOTE: contexts are never freed: a stale handle stays harmless in a test fixture. */
	ctx->refs = 0;
	return CUDA_SUCCESS;
}

CUresult cuCtxSynchronize(void)
{
	CUresult err = CUDA_SUCCESS;
	int dev = sim_cur_dev(&err);

	return dev < 0 ? err : sim_ctx_sync_dev(dev);
}

CUresult cuCtxSynchronize_v2(CUcontext ctx)
{
	if (!sim_inited)
		return CUDA_ERROR_NOT_INITIALIZED;
	if (!ctx)
		return cuCtxSynchronize();
	if (!sim_inited)
		return CUDA_ERROR_NOT_INITIALIZED;
	return sim_ctx_sync_dev(ctx->device);
}

CUresult cuCtxGetLimit(size_t *pvalue, CUlimit limit)
{
	CHECK_INIT();
	if (!pvalue)
		return CUDA_ERROR_INVALID_VALUE;
	*pvalue = limit == CU_LIMIT_STACK_SIZE ? 1024 : 0;
	return CUDA_SUCCESS;
}

CUresult cuCtxSetLimit(CUlimit limit, size_t value)
{
	CHECK_INIT();
	return CUDA_SUCCESS;
}

CUresult cuCtxGetStreamPriorityRange(int *leastPriority, int *greatestPriority)
{
	CHECK_INIT();
	if (leastPriority)
		*leastPriority = 0;
	if (greatestPriority)
		*greatestPriority = -5;
	return CUDA_SUCCESS;
}

CUresult cuCtxGetCacheConfig(CUfunc_cache *pconfig)
{
	CHECK_INIT();
	if (pconfig)
		*pconfig = CU_FUNC_CACHE_PREFER_NONE;
	return CUDA_SUCCESS;
}

CUresult cuCtxSetCacheConfig(CUfunc_cache config)
{
	CHECK_INIT();
	return CUDA_SUCCESS;
}

CUresult cuCtxEnablePeerAccess(CUcontext peerContext, unsigned int Flags)
{
	CUresult err = CUDA_SUCCESS;
	int dev = sim_cur_dev(&err);
	CUresult r = CUDA_SUCCESS;

	if (dev < 0)
		return err;
	if (!peerContext || Flags)
		return CUDA_ERROR_INVALID_VALUE;
	if (peerContext->device == dev)
		return CUDA_ERROR_INVALID_DEVICE;
	pthread_mutex_lock(&sim_lock);
	if (sim_devs[dev].peer[peerContext->device])
		r = CUDA_ERROR_PEER_ACCESS_ALREADY_ENABLED;
	sim_devs[dev].peer[peerContext->device] = 1;
	pthread_mutex_unlock(&sim_lock);
	return r;
}

CUresult cuCtxDisablePeerAccess(CUcontext peerContext)
{
	CUresult err = CUDA_SUCCESS;
	int dev = sim_cur_dev(&err);
	CUresult r = CUDA_SUCCESS;

	if (dev < 0)
		return err;
	if (!peerContext)
		return CUDA_ERROR_INVALID_VALUE;
	pthread_mutex_lock(&sim_lock);
	if (!sim_devs[dev].peer[peerContext->device])
		r = CUDA_ERROR_PEER_ACCESS_NOT_ENABLED;
	sim_devs[dev].peer[peerContext->device] = 0;
	pthread_mutex_unlock(&sim_lock);
	return r;
}

/* ---------------------------------------------------------------- 4. errors */

static const struct sim_error {
	CUresult code;
	const char *name, *text;
} errors[] = {
    {CUDA_SUCCESS, "CUDA_SUCCESS", "no error"},
    {CUDA_ERROR_INVALID_VALUE, "CUDA_ERROR_INVALID_VALUE", "invalid argument"},
    {CUDA_ERROR_OUT_OF_MEMORY, "CUDA_ERROR_OUT_OF_MEMORY", "out of memory"},
    {CUDA_ERROR_NOT_INITIALIZED, "CUDA_ERROR_NOT_INITIALIZED", "initialization error"},
    {CUDA_ERROR_DEINITIALIZED, "CUDA_ERROR_DEINITIALIZED", "driver shutting down"},
    {CUDA_ERROR_NO_DEVICE, "CUDA_ERROR_NO_DEVICE", "no CUDA-capable device is detected"},
    {CUDA_ERROR_INVALID_DEVICE, "CUDA_ERROR_INVALID_DEVICE", "invalid device ordinal"},
    {CUDA_ERROR_INVALID_CONTEXT, "CUDA_ERROR_INVALID_CONTEXT", "invalid device context"},
    {CUDA_ERROR_INVALID_HANDLE, "CUDA_ERROR_INVALID_HANDLE", "invalid resource handle"},
    {CUDA_ERROR_NOT_FOUND, "CUDA_ERROR_NOT_FOUND", "named symbol not found"},
    {CUDA_ERROR_NOT_READY, "CUDA_ERROR_NOT_READY", "device not ready"},
    {CUDA_ERROR_ILLEGAL_ADDRESS, "CUDA_ERROR_ILLEGAL_ADDRESS", "an illegal memory access was encountered"},
    {CUDA_ERROR_PEER_ACCESS_ALREADY_ENABLED, "CUDA_ERROR_PEER_ACCESS_ALREADY_ENABLED",
     "peer access is already enabled"},
    {CUDA_ERROR_PEER_ACCESS_NOT_ENABLED, "CUDA_ERROR_PEER_ACCESS_NOT_ENABLED", "peer access has not been enabled"},
    {CUDA_ERROR_HOST_MEMORY_ALREADY_REGISTERED, "CUDA_ERROR_HOST_MEMORY_ALREADY_REGISTERED",
     "part or all of the requested memory range is already mapped"},
    {CUDA_ERROR_HOST_MEMORY_NOT_REGISTERED, "CUDA_ERROR_HOST_MEMORY_NOT_REGISTERED",
     "pointer does not correspond to a registered memory region"},
    {CUDA_ERROR_NOT_PERMITTED, "CUDA_ERROR_NOT_PERMITTED", "operation not permitted"},
    {CUDA_ERROR_NOT_SUPPORTED, "CUDA_ERROR_NOT_SUPPORTED", "operation not supported"},
    {CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED, "CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED",
     "operation not permitted when stream is capturing"},
    {CUDA_ERROR_STREAM_CAPTURE_INVALIDATED, "CUDA_ERROR_STREAM_CAPTURE_INVALIDATED",
     "operation failed due to a previous error during capture"},
    {CUDA_ERROR_STREAM_CAPTURE_UNMATCHED, "CUDA_ERROR_STREAM_CAPTURE_UNMATCHED",
     "capture was not initiated in this stream"},
    {CUDA_ERROR_STREAM_CAPTURE_IMPLICIT, "CUDA_ERROR_STREAM_CAPTURE_IMPLICIT",
     "operation would make the legacy stream depend on a capturing blocking stream"},
    {CUDA_ERROR_ILLEGAL_STATE, "CUDA_ERROR_ILLEGAL_STATE", "the operation is not permitted in this state"},
    {CUDA_ERROR_UNKNOWN, "CUDA_ERROR_UNKNOWN", "unknown error"},
};

/* The row of a code, or NULL for a code the driver does not know. */
static const struct sim_error *find_error(CUresult error)
{
	for (size_t i = 0; i < sizeof(errors) / sizeof(errors[0]); i++)
		if (errors[i].code == error)
			return &errors[i];
	return NULL;
}

CUresult cuGetErrorString(CUresult error, const char **pStr)
{
	if (!pStr)
		return CUDA_ERROR_INVALID_VALUE;
	const struct sim_error *e = find_error(error);
	*pStr = e ? e->text : NULL;
	return e ? CUDA_SUCCESS : CUDA_ERROR_INVALID_VALUE;
}

CUresult cuGetErrorName(CUresult error, const char **pStr)
{
	if (!pStr)
		return CUDA_ERROR_INVALID_VALUE;
	const struct sim_error *e = find_error(error);
	*pStr = e ? e->name : NULL;
	return e ? CUDA_SUCCESS : CUDA_ERROR_INVALID_VALUE;
}

/* ---------------------------------------------------------------- 5. entry points */

/*
 * The rule of NVIDIA's driver: among the variants of `symbol`, take the newest one
 * introduced at or before `cudaVersion`; with CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM,
 * take that variant's _ptds/_ptsz flavour when it has one. The table is sorted by
 * name, then version, so one pass finds both.
 */
/*
 * SIMGPU_COUNT_FILE=<file>: at exit, "event_records N": how many event records
 * the process asked of the driver (its own and a profiler's), so that a test
 * can measure what timing costs in records, as a count, not a time.
 */
__attribute__((destructor)) static void count_file(void)
{
	const char *path = getenv("SIMGPU_COUNT_FILE");
	FILE *f = path && *path ? fopen(path, "we") : NULL;
	if (f) {
		fprintf(f, "event_records %lu\n", __atomic_load_n(&sim_event_records, __ATOMIC_RELAXED));
		fclose(f);
	}
}

/* SIMGPU_LOG_PROCS=<file>: append every request, one "name ver=V flags=F" line, in
 * the format of cudart_entry_points.txt, so a test can compare what a runtime asks. */
static void proc_log(const char *symbol, int version, cuuint64_t flags)
{
	static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
	static FILE *f;
	static int opened;

	pthread_mutex_lock(&mu);
	if (!opened) {
		const char *path = getenv("SIMGPU_LOG_PROCS");
		opened = 1;
		f = path && *path ? fopen(path, "ae") : NULL;
	}
	if (f) {
		fprintf(f, "%s ver=%d flags=%llu\n", symbol && *symbol ? symbol : "\"\"", version,
			(unsigned long long)flags);
		fflush(f);
	}
	pthread_mutex_unlock(&mu);
}

static CUresult proc_lookup(const char *symbol, void **pfn, int cudaVersion, cuuint64_t flags,
			    CUdriverProcAddressQueryResult *status)
{
	const struct sim_proc *best = NULL, *best_pt = NULL;
	int known = 0;

	proc_log(symbol, cudaVersion, flags);
	if (pfn)
		*pfn = NULL;
	if (!symbol || !pfn)
		return CUDA_ERROR_INVALID_VALUE;
	for (size_t i = 0; i < sim_nprocs; i++) {
		const struct sim_proc *p = &sim_procs[i];
		if (strcmp(p->base, symbol) != 0)
			continue;
		known = 1;
		if (p->version > cudaVersion)
			continue;
		if (!p->ptds) {
			best = p;
			best_pt = NULL;
		} else if (best) {
			best_pt = p;
		}
	}
	if (!best) {
		if (status)
			*status =
			    known ? CU_GET_PROC_ADDRESS_VERSION_NOT_SUFFICIENT : CU_GET_PROC_ADDRESS_SYMBOL_NOT_FOUND;
		return CUDA_ERROR_NOT_FOUND;
	}
	*pfn = (flags & CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM) && best_pt ? best_pt->fn : best->fn;
	if (status)
		*status = CU_GET_PROC_ADDRESS_SUCCESS;
	return CUDA_SUCCESS;
}

CUresult cuGetProcAddress_v2(const char *symbol, void **pfn, int cudaVersion, cuuint64_t flags,
			     CUdriverProcAddressQueryResult *symbolStatus)
{
	return proc_lookup(symbol, pfn, cudaVersion, flags, symbolStatus);
}

CUresult cuGetProcAddress(const char *symbol, void **pfn, int cudaVersion, cuuint64_t flags)
{
	return proc_lookup(symbol, pfn, cudaVersion, flags, NULL);
}

/* Kernel registration lives in drv_launch.c; the export table hands it to the runtime. */
int simgpu_register_kernel(const void *fn, const char *name, int nargs, const size_t *argsizes);
void *simgpu_kernel_of(const void *fn);

static const struct simgpu_export_table export_table = {sizeof(export_table), simgpu_register_kernel,
							 simgpu_kernel_of, simgpu_globaltimer_ns,
							 simgpu_kernel_end_at};

/* One documented table: SIMGPU_EXPORT_TABLE_ID (simgpu.h). Anything else is refused
 * with CUDA_ERROR_INVALID_VALUE, so a caller can tell a pass-through from a forgery. */
CUresult cuGetExportTable(const void **ppExportTable, const CUuuid *pExportTableId)
{
	static const char id[16] = SIMGPU_EXPORT_TABLE_ID;

	if (!ppExportTable || !pExportTableId)
		return CUDA_ERROR_INVALID_VALUE;
	if (memcmp(pExportTableId->bytes, id, sizeof(id)) != 0) {
		*ppExportTable = NULL;
		return CUDA_ERROR_INVALID_VALUE;
	}
	*ppExportTable = &export_table;
	return CUDA_SUCCESS;
}

/* ---------------------------------------------------------------- 6. older names still requested */

/* cudart_entry_points.txt asks for these at version 7000: the pre-11.0 names. */
CUresult cuDevicePrimaryCtxRelease(CUdevice dev)
{
	return cuDevicePrimaryCtxRelease_v2(dev);
}

CUresult cuDevicePrimaryCtxReset(CUdevice dev)
{
	return cuDevicePrimaryCtxReset_v2(dev);
}

CUresult cuDevicePrimaryCtxSetFlags(CUdevice dev, unsigned int flags)
{
	return cuDevicePrimaryCtxSetFlags_v2(dev, flags);
}

CUresult cuCtxResetPersistingL2Cache(void)
{
	return sim_inited ? CUDA_SUCCESS : CUDA_ERROR_NOT_INITIALIZED;
}

/* Nothing to enable without a profiling tool; an error before cuInit, as the driver's. */
CUresult cuProfilerStart(void)
{
	return sim_inited ? CUDA_SUCCESS : CUDA_ERROR_NOT_INITIALIZED;
}

CUresult cuProfilerStop(void)
{
	return sim_inited ? CUDA_SUCCESS : CUDA_ERROR_NOT_INITIALIZED;
}

CUresult cuCtxPushCurrent(CUcontext ctx)
{
	return cuCtxPushCurrent_v2(ctx);
}

CUresult cuCtxPopCurrent(CUcontext *pctx)
{
	return cuCtxPopCurrent_v2(pctx);
}
