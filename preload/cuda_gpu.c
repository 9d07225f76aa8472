/*
 * cuda_gpu.c - the GPU side of the CUDA wrappers (see cuda_gpu.h):
 *   1. current device cache,
 *   2. kernel names,
 *   3. host pointer kinds,
 *   4. trace header device info.
 * The timing events (cuda_gpu.h, section 2) are cuda_timing.c's and cuda_spans.c's.
 */
#include "cuda_gpu.h"

#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "alert.h"
#include "cuda_mem.h"
#include "lazymap.h"
#include "recorder.h"

/* ------------------------------------------------------------ 1. device */

__thread int sp_gpu_tdev __attribute__((tls_model("initial-exec"))) = -1;
static __thread CUcontext t_ctx;
/*
 * t_ctx is good while t_ctx_gen == ctx_gen: a device reset (any thread)
 * bumps ctx_gen, since the context handles every thread cached may be gone.
 */
static __thread unsigned t_ctx_gen;
unsigned ctx_gen = 1;

void sp_gpu_ctx_changed(void)
{
	sp_gpu_tdev = -1;
	t_ctx_gen = 0;
}

CUcontext cur_ctx(const struct sp_drv *d)
{
	unsigned g = __atomic_load_n(&ctx_gen, __ATOMIC_ACQUIRE);
	if (t_ctx_gen != g) {
		CUcontext c = NULL;
		if (!d->CtxGetCurrent || d->CtxGetCurrent(&c) != CUDA_SUCCESS)
			c = NULL;
		t_ctx = c;
		t_ctx_gen = c ? g : 0; /* no context yet: ask again next time */
	}
	return t_ctx;
}

unsigned sp_gpu_device_slow(void)
{
	if (sp_gpu_tdev >= 0)
		return (unsigned)sp_gpu_tdev;
	int e = errno; /* sp_drv's dlopen, the driver's calls */
	const struct sp_drv *d = sp_drv();
	CUdevice dev = 0;
	if (d && d->CtxGetDevice && cur_ctx(d) && d->CtxGetDevice(&dev) == CUDA_SUCCESS && dev >= 0)
		sp_gpu_tdev = dev < SP_DEV_MAX ? dev : SP_DEV_MAX - 1;
	errno = e;
	return sp_gpu_tdev >= 0 ? (unsigned)sp_gpu_tdev : 0;
}

/* ------------------------------------------------------ 2. kernel names */

#define NAME_SLOTS 4096u

struct name_slot {
	uintptr_t key; /* 0 empty, 1 being filled */
	uint32_t id;
};

static struct sp_lazy names = SP_LAZY_INIT(NAME_SLOTS * sizeof(struct name_slot), "kernel name cache");

/* n interned, with SP_NAME_COMM when it is an NCCL kernel's name */
static uint32_t named(const char *n)
{
	uint32_t id = sp_intern_cstr(n);
	if (!strncmp(n, "ncclDevKernel_", 14) || !strncmp(n, "ncclKernel_", 11))
		id |= SP_NAME_COMM;
	return id;
}

static uint32_t name_of(const void *stub, CUfunction f)
{
	char buf[512];
	if (!stub && !f)
		return sp_intern_cstr("graph");
	if (f) {
		const struct sp_drv *d = sp_drv();
		const char *n = NULL;
		if (d && d->FuncGetName && d->FuncGetName(&n, f) == CUDA_SUCCESS && n && *n)
			return named(n);
		/*
		 * cuLaunchKernel takes a CUkernel too (CUDA >= 12.0), and the CUDA
		 * 12/13 runtime launches its programs' kernels through those
		 * (cuLibraryGetKernel): cuFuncGetName does not name them. On the
		 * H200 run, 10 of PyTorch's 12 most-launched kernels read
		 * kernel@0x...; only the cuBLAS one, a module's CUfunction, had its
		 * name. NOTE: not yet checked on a GPU (gpu-check reports the
		 * share of named launches).
		 */
		if (d && d->KernelGetName && d->KernelGetName(&n, (CUkernel)(void *)f) == CUDA_SUCCESS && n && *n)
			return named(n);
		/* the simulator's CUfunction is a host function: dladdr may name it */
		stub = (const void *)f;
	}
	Dl_info di;
	if (dladdr(stub, &di) && di.dli_sname && di.dli_saddr == stub)
		return named(di.dli_sname);
	snprintf(buf, sizeof(buf), "kernel@%p", stub);
	return sp_intern_cstr(buf);
}

static inline uintptr_t name_key(const void *stub, CUfunction f)
{
	uintptr_t k = f ? (uintptr_t)f : (uintptr_t)stub;
	return k <= 1 ? 2 : k; /* graph launches share one name */
}

static inline unsigned name_hash(uintptr_t k)
{
	return (unsigned)((k >> 4) ^ (k >> 16)) & (NAME_SLOTS - 1);
}

/* Not at its first slot: probe on, or name it and fill a slot. */
static __attribute__((noinline)) uint32_t name_slow(const void *stub, CUfunction f, uintptr_t k)
{
	unsigned h = name_hash(k);
	struct name_slot *tab = sp_lazy_get(&names);
	for (unsigned n = 0; tab && n < 32; n++) {
		struct name_slot *s = &tab[(h + n) & (NAME_SLOTS - 1)];
		uintptr_t cur = __atomic_load_n(&s->key, __ATOMIC_ACQUIRE);
		if (cur == k)
			return __atomic_load_n(&s->id, __ATOMIC_ACQUIRE);
		if (cur == 0) {
			if (!__atomic_compare_exchange_n(&s->key, &cur, (uintptr_t)1, 0, __ATOMIC_ACQ_REL, __ATOMIC_RELAXED))
				continue;
			int e = errno;
			uint32_t id = name_of(stub, f);
			errno = e;
			__atomic_store_n(&s->id, id, __ATOMIC_RELEASE);
			__atomic_store_n(&s->key, k, __ATOMIC_RELEASE);
			return id;
		}
	}
	int e = errno;
	uint32_t id = name_of(stub, f);
	errno = e;
	return id;
}

/* RATIONALE: the common case, a kernel met before at its first slot, is one
 * load and one compare, with no frame: the rest lives in name_slow. */
uint32_t sp_gpu_kernel_name(const void *stub, CUfunction f)
{
	return sp_gpu_kernel_name_flags(stub, f) & ~SP_NAME_COMM;
}

uint32_t sp_gpu_kernel_name_flags(const void *stub, CUfunction f)
{
	uintptr_t k = name_key(stub, f);
	struct name_slot *tab = sp_lazy_peek(&names);
	if (__builtin_expect(tab != NULL, 1)) {
		struct name_slot *s = &tab[name_hash(k)];
		if (__builtin_expect(__atomic_load_n(&s->key, __ATOMIC_ACQUIRE) == k, 1))
			return __atomic_load_n(&s->id, __ATOMIC_ACQUIRE);
	}
	return name_slow(stub, f, k);
}

/* ------------------------------------------------------ 3. host kinds */

#define PTR_CACHE 1024u

/*
 * One word per slot, (page << 16 | generation) << 8 | kind, stored and loaded
 * whole: with the kind beside the key, a reader that saw one thread's key
 * could read another thread's kind for another page of the same slot.
 * NOTE: 48-bit user addresses (36-bit pages) fit; above that the top page
 * bits are lost, so two pages 2^52 bytes apart could share an answer.
 */
struct ptr_slot {
	uint64_t word; /* 0 empty */
};

static struct ptr_slot ptr_cache[PTR_CACHE];
static unsigned ptr_gen = 1;

void sp_gpu_ptr_cache_flush(void)
{
	unsigned g = __atomic_add_fetch(&ptr_gen, 1, __ATOMIC_RELAXED);
	if ((g & 0xffff) == 0)
		__atomic_add_fetch(&ptr_gen, 1, __ATOMIC_RELAXED);
}

unsigned sp_gpu_host_kind(uint64_t p, int may_be_device)
{
	int pin = sp_pinned_lookup(p);
	if (pin > 0)
		return SP_HOSTMEM_PINNED;
	if (!may_be_device || !p) /* in no range of an incomplete map: pinned or not, unknown */
		return pin < 0 ? SP_HOSTMEM_UNKNOWN : SP_HOSTMEM_PAGEABLE;
	uint64_t key = ((p >> 12) << 16) | (__atomic_load_n(&ptr_gen, __ATOMIC_RELAXED) & 0xffff);
	struct ptr_slot *s = &ptr_cache[(p >> 12) & (PTR_CACHE - 1)];
	uint64_t w = __atomic_load_n(&s->word, __ATOMIC_RELAXED);
	if (w >> 8 == (key & (UINT64_MAX >> 8)))
		return (unsigned)(w & 0xff);
	int e = errno;
	const struct sp_drv *d = sp_drv();
	/* Only where a context exists: never initialise CUDA ourselves. */
	if (!d || !d->PointerGetAttribute || !cur_ctx(d)) {
		errno = e;
		return SP_HOSTMEM_UNKNOWN;
	}
	unsigned kind = SP_HOSTMEM_PAGEABLE;
	unsigned int managed = 0, mtype = 0;
	if (d->PointerGetAttribute(&managed, CU_POINTER_ATTRIBUTE_IS_MANAGED, (CUdeviceptr)p) == CUDA_SUCCESS && managed)
		kind = SP_HOSTMEM_MANAGED;
	else if (d->PointerGetAttribute(&mtype, CU_POINTER_ATTRIBUTE_MEMORY_TYPE, (CUdeviceptr)p) == CUDA_SUCCESS)
		kind = mtype == CU_MEMORYTYPE_DEVICE ? SP_HOSTMEM_DEVICE :
		       mtype == CU_MEMORYTYPE_HOST   ? SP_HOSTMEM_PINNED :
						       SP_HOSTMEM_PAGEABLE;
	errno = e;
	__atomic_store_n(&s->word, key << 8 | (kind & 0xff), __ATOMIC_RELAXED);
	return kind;
}

static int ndevices; /* 0: not asked yet */

int sp_gpu_ptr_device(uint64_t p)
{
	int e = errno;
	const struct sp_drv *d = sp_drv();
	int n = __atomic_load_n(&ndevices, __ATOMIC_RELAXED), dev = -1;
	if (!n && d && d->DeviceGetCount && d->DeviceGetCount(&n) == CUDA_SUCCESS && n > 0)
		__atomic_store_n(&ndevices, n, __ATOMIC_RELAXED);
	if (n > 1 && d && d->PointerGetAttribute &&
	    d->PointerGetAttribute(&dev, CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL, (CUdeviceptr)p) != CUDA_SUCCESS)
		dev = -1;
	errno = e;
	return dev < 0 ? -1 : dev < SP_DEV_MAX ? dev : SP_DEV_MAX - 1;
}

/* ------------------------------------------------------ 4. the header */

static int read_small(const char *path, char *buf, size_t len)
{
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return -1;
	ssize_t n = read(fd, buf, len - 1);
	close(fd);
	if (n <= 0)
		return -1;
	buf[n] = 0;
	return 0;
}

static uint16_t pcie_gen(const char *speed)
{
	double gt = atof(speed); /* "16.0 GT/s PCIe" */
	return gt >= 60 ? 6 : gt >= 30 ? 5 : gt >= 15 ? 4 : gt >= 7 ? 3 : gt >= 4 ? 2 : gt > 0 ? 1 : 0;
}

static void pcie_info(struct sp_device_info *di, const char *busid)
{
	char path[256], buf[64], id[32];
	size_t i;
	for (i = 0; busid[i] && i < sizeof(id) - 1; i++)
		id[i] = (char)(busid[i] >= 'A' && busid[i] <= 'F' ? busid[i] - 'A' + 'a' : busid[i]);
	id[i] = 0;
	static const struct {
		const char *file;
		int what;
	} f[] = { { "current_link_speed", 0 }, { "current_link_width", 1 }, { "max_link_speed", 2 }, { "max_link_width", 3 } };
	const char *dom = id;
	if (strlen(id) > 12 && id[8] == ':') /* 8-digit domain from the driver */
		dom = id + 4;
	for (unsigned k = 0; k < 4; k++) {
		snprintf(path, sizeof(path), "/sys/bus/pci/devices/%s/%s", dom, f[k].file);
		if (read_small(path, buf, sizeof(buf)) < 0)
			continue;
		switch (f[k].what) {
		case 0: di->pcie_gen_cur = pcie_gen(buf); break;
		case 1: di->pcie_width_cur = (uint16_t)atoi(buf); break;
		case 2: di->pcie_gen_max = pcie_gen(buf); break;
		default: di->pcie_width_max = (uint16_t)atoi(buf); break;
		}
	}
}

int sp_gpu_header_done;

void sp_gpu_header_slow(void)
{
	int e = errno;
	const struct sp_drv *d = sp_drv();
	int expect = 0;
	struct sp_file_header *h;
	if (!d || !cur_ctx(d) || /* else later, once the program has a context */
	    !__atomic_compare_exchange_n(&sp_gpu_header_done, &expect, 1, 0, __ATOMIC_ACQ_REL, __ATOMIC_RELAXED) ||
	    !(h = sp_trace_header())) {
		errno = e;
		return;
	}
	sp_hook_depth++; /* our own sysfs reads and driver queries are not the program's */
	/* the alert's time of day: in a CUDA call, never a signal handler (alert.h) */
	sp_alert_clock_prepare();
	__atomic_or_fetch(&h->features, SP_FEAT_CUDA, __ATOMIC_RELAXED);
	int v = 0;
	if (d->DriverGetVersion && d->DriverGetVersion(&v) == CUDA_SUCCESS)
		h->driver_version = v;
	const char *rt[] = { "libcudart.so.13", "libcudart.so.12", NULL };
	for (int i = 0; rt[i]; i++) {
		void *lh = dlopen(rt[i], RTLD_NOLOAD | RTLD_LAZY);
		sp_dlsym_fn rd = sp_real_dlsym();
		if (!lh || !rd)
			continue;
		int (*rgv)(int *) = (int (*)(int *))rd(lh, "cudaRuntimeGetVersion");
		if (rgv && rgv(&v) == 0)
			h->runtime_version = v;
		dlclose(lh);
		break;
	}
	int n = 0;
	if (d->DeviceGetCount && d->DeviceGetCount(&n) == CUDA_SUCCESS) {
		if (n > (int)SP_MAX_DEVICES)
			n = SP_MAX_DEVICES;
		for (int i = 0; i < n; i++) {
			struct sp_device_info *di = &h->devices[i];
			CUdevice dev = i;
			if (d->DeviceGet && d->DeviceGet(&dev, i) != CUDA_SUCCESS)
				continue;
			di->ordinal = i;
			if (d->DeviceGetName)
				d->DeviceGetName(di->name, sizeof(di->name) - 1, dev);
			size_t mem = 0;
			if (d->DeviceTotalMem && d->DeviceTotalMem(&mem, dev) == CUDA_SUCCESS)
				di->mem_bytes = mem;
			char bus[64] = "";
			if (d->DeviceGetPCIBusId && d->DeviceGetPCIBusId(bus, sizeof(bus), dev) == CUDA_SUCCESS)
				pcie_info(di, bus);
		}
		h->ndevices = (uint32_t)n;
	}
	sp_hook_depth--;
	errno = e;
}
