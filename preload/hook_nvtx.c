/*
 * hook_nvtx.c - NVTX v3 through injection (see nvtx_inject.h): the exported
 * InitializeInjectionNvtx2 hands NVTX our implementations of the core and
 * domain calls; they write RANGE records (name, domain, value) when a range
 * closes and NVTX_MARK records for marks.
 *
 * Divided into:
 *   1. names: A and W strings, event attributes, registered strings, domains,
 *   2. push/pop: one range stack per thread (value = the range's level),
 *   3. start/end: a lock-free table of open ranges, since a range may end on
 *      another thread (value = the range id),
 *   4. marks,
 *   5. the injection entry point and the constructor's set-up.
 *
 * Ranges that were open in the parent when a process forked are dropped in the
 * child (their names belong to the parent's file).
 */
#define NVTX_NO_IMPL
#include <nvtx3/nvToolsExt.h>

#include <dlfcn.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <wchar.h>

#include "lazymap.h"
#include "nvtx_inject.h"
#include "recorder.h"

#define SP_EXPORT __attribute__((visibility("default")))

/* Fork generation: names interned before a fork are not valid in the child's file. */
static uint32_t g_gen;

/* -------------------------------------------------------------- 1. names */

struct sp_nvtx_domain {
	uint32_t id, gen; /* interned name in the current file, cached */
	char name[256];
};

struct sp_nvtx_string {
	char s[SP_MAX_STRING + 1];
};

/* UCS-4 wchar_t to UTF-8, truncated to fit. */
static const char *wide(const wchar_t *w, char *buf, size_t n)
{
	size_t o = 0;
	for (; w && *w && o + 4 < n; w++) {
		uint32_t c = (uint32_t)*w;
		if (c < 0x80) {
			buf[o++] = (char)c;
		} else if (c < 0x800) {
			buf[o++] = (char)(0xc0 | (c >> 6));
			buf[o++] = (char)(0x80 | (c & 0x3f));
		} else if (c < 0x10000) {
			buf[o++] = (char)(0xe0 | (c >> 12));
			buf[o++] = (char)(0x80 | ((c >> 6) & 0x3f));
			buf[o++] = (char)(0x80 | (c & 0x3f));
		} else if (c < 0x110000) {
			buf[o++] = (char)(0xf0 | (c >> 18));
			buf[o++] = (char)(0x80 | ((c >> 12) & 0x3f));
			buf[o++] = (char)(0x80 | ((c >> 6) & 0x3f));
			buf[o++] = (char)(0x80 | (c & 0x3f));
		}
	}
	buf[o] = 0;
	return buf;
}

static uint32_t name_of_attr(const nvtxEventAttributes_t *a)
{
	char buf[SP_MAX_STRING + 8];
	if (!a)
		return 0;
	switch (a->messageType) {
	case NVTX_MESSAGE_TYPE_ASCII:
		return sp_intern_cstr(a->message.ascii);
	case NVTX_MESSAGE_TYPE_UNICODE:
		return sp_intern_cstr(wide(a->message.unicode, buf, sizeof(buf)));
	case NVTX_MESSAGE_TYPE_REGISTERED:
		return a->message.registered ? sp_intern_cstr(((struct sp_nvtx_string *)a->message.registered)->s) : 0;
	default:
		return 0;
	}
}

static uint32_t domain_id(nvtxDomainHandle_t h)
{
	struct sp_nvtx_domain *d = (struct sp_nvtx_domain *)h;
	if (!d)
		return 0; /* the default domain */
	uint32_t gen = __atomic_load_n(&g_gen, __ATOMIC_RELAXED);
	if (d->id && d->gen == gen)
		return d->id;
	uint32_t id = sp_intern_cstr(d->name);
	d->gen = gen;
	d->id = id; /* NOTE: a benign race: every writer stores the same id for this file */
	return id;
}

static nvtxDomainHandle_t domain_create(const char *name)
{
	struct sp_nvtx_domain *d = calloc(1, sizeof(*d));
	if (d)
		snprintf(d->name, sizeof(d->name), "%s", name ? name : "");
	return (nvtxDomainHandle_t)d;
}

static nvtxDomainHandle_t NVTX_API domain_create_a(const char *name)
{
	return domain_create(name);
}

static nvtxDomainHandle_t NVTX_API domain_create_w(const wchar_t *name)
{
	char buf[256];
	return domain_create(wide(name, buf, sizeof(buf)));
}

/* RATIONALE: a domain is never freed: a late call with a destroyed handle must not crash */
static void NVTX_API domain_destroy(nvtxDomainHandle_t d)
{
	(void)d;
}

static nvtxStringHandle_t register_string(const char *s)
{
	struct sp_nvtx_string *r = malloc(sizeof(*r));
	if (r)
		snprintf(r->s, sizeof(r->s), "%s", s ? s : "");
	return (nvtxStringHandle_t)r;
}

static nvtxStringHandle_t NVTX_API register_string_a(nvtxDomainHandle_t d, const char *s)
{
	return register_string(s);
}

static nvtxStringHandle_t NVTX_API register_string_w(nvtxDomainHandle_t d, const wchar_t *s)
{
	char buf[SP_MAX_STRING + 8];
	return register_string(wide(s, buf, sizeof(buf)));
}

/* ---------------------------------------------------------- 2. push / pop */

#define STACK_MAX 32

struct range_open {
	uint64_t begin_ns;
	uint32_t name, domain;
};

struct range_stack {
	int depth;    /* may exceed STACK_MAX: those levels are counted, not recorded */
	uint32_t gen; /* fork generation of the entries */
	struct range_open r[STACK_MAX];
};

static __thread struct range_stack t_stack __attribute__((tls_model("initial-exec")));

static int push(uint32_t name, uint32_t domain)
{
	if (!sp_cap.on)
		return -1;
	struct range_stack *s = &t_stack;
	uint32_t gen = __atomic_load_n(&g_gen, __ATOMIC_RELAXED);
	if (s->gen != gen) { /* a forked child: the parent's open ranges are not ours */
		s->depth = 0;
		s->gen = gen;
	}
	int top = s->depth++, level = 0;
	if (top < STACK_MAX) {
		s->r[top].name = name;
		s->r[top].domain = domain;
		s->r[top].begin_ns = sp_now();
		for (int j = 0; j < top; j++) /* the level within its domain */
			level += s->r[j].domain == domain;
	} else {
		level = top;
	}
	return level;
}

/*
 * NVTX: "Each domain maintains its own nvtxRangePush and nvtxRangePop stack".
 * The thread's ranges of every domain share one array in push order; a pop
 * ends the last one open in its domain (the top, unless domains interleave),
 * and the level is its depth within its domain.
 * RATIONALE: a pop that ended the top range whatever its domain would let a
 * core pop after a library's domain push end the library's range, and the
 * program's "step" be ended by the library's pop, later.
 */
static int pop(uint32_t domain)
{
	struct range_stack *s = &t_stack;
	/* RATIONALE: sp_active, not sp_cap.on: a range pushed inside the capture range
	 * (STEPPROF_CAPTURE) and popped outside it leaves the stack, unrecorded */
	if (!sp_active || s->depth <= 0 || s->gen != __atomic_load_n(&g_gen, __ATOMIC_RELAXED))
		return -1;
	if (s->depth > STACK_MAX) /* a level past the array: counted, not recorded */
		return --s->depth;
	int i = s->depth - 1;
	while (i >= 0 && s->r[i].domain != domain)
		i--;
	if (i < 0)
		return -1; /* nothing open in this domain */
	int level = 0;
	for (int j = 0; j < i; j++)
		level += s->r[j].domain == domain;
	uint64_t f[SP_F__COUNT];
	f[SP_F_NAME] = s->r[i].name;
	f[SP_F_DOMAIN] = s->r[i].domain;
	f[SP_F_VALUE] = (uint64_t)level;
	if (sp_cap.on)
		sp_emit(SP_K_RANGE, SP_API_nvtx, s->r[i].begin_ns, sp_now(), f);
	s->depth--;
	for (int j = i; j < s->depth; j++)
		s->r[j] = s->r[j + 1];
	return level;
}

static int NVTX_API push_a(const char *m)
{
	return sp_cap.on ? push(sp_intern_cstr(m), 0) : -1;
}

static int NVTX_API push_w(const wchar_t *m)
{
	char buf[SP_MAX_STRING + 8];
	return sp_cap.on ? push(sp_intern_cstr(wide(m, buf, sizeof(buf))), 0) : -1;
}

static int NVTX_API push_ex(const nvtxEventAttributes_t *a)
{
	return sp_cap.on ? push(name_of_attr(a), 0) : -1;
}

static int NVTX_API domain_push_ex(nvtxDomainHandle_t d, const nvtxEventAttributes_t *a)
{
	return sp_cap.on ? push(name_of_attr(a), domain_id(d)) : -1;
}

static int NVTX_API pop_core(void)
{
	return pop(0);
}

static int NVTX_API domain_pop(nvtxDomainHandle_t d)
{
	return sp_active ? pop(domain_id(d)) : -1;
}

/* -------------------------------------------------------- 3. start / end */

#define OPEN_SLOTS 4096u /* ranges open at once across threads; more are not recorded */

struct range_slot {
	uint64_t seq; /* the id's upper part; 0 = free */
	uint64_t begin_ns;
	uint32_t name, domain, gen;
};

static struct sp_lazy g_open = SP_LAZY_INIT(OPEN_SLOTS * sizeof(struct range_slot), "NVTX range table");
static uint64_t g_open_next;

static nvtxRangeId_t start(uint32_t name, uint32_t domain)
{
	if (!sp_cap.on)
		return 0;
	struct range_slot *tab = sp_lazy_get(&g_open);
	if (!tab)
		return 0;
	uint64_t now = sp_now();
	for (int probe = 0; probe < 16; probe++) {
		uint64_t n = __atomic_fetch_add(&g_open_next, 1, __ATOMIC_RELAXED);
		struct range_slot *s = &tab[n % OPEN_SLOTS];
		uint64_t expect = 0, seq = n / OPEN_SLOTS + 1;
		if (!__atomic_compare_exchange_n(&s->seq, &expect, ~0ull, 0, __ATOMIC_ACQ_REL, __ATOMIC_RELAXED))
			continue; /* still open: try the next slot */
		s->begin_ns = now;
		s->name = name;
		s->domain = domain;
		s->gen = __atomic_load_n(&g_gen, __ATOMIC_RELAXED);
		__atomic_store_n(&s->seq, seq, __ATOMIC_RELEASE);
		return (nvtxRangeId_t)(seq * OPEN_SLOTS + n % OPEN_SLOTS);
	}
	return 0;
}

static void end(nvtxRangeId_t id)
{
	struct range_slot *tab = sp_lazy_peek(&g_open);
	if (!sp_active || id < OPEN_SLOTS || !tab) /* sp_active: as pop's */
		return;
	struct range_slot *s = &tab[id % OPEN_SLOTS];
	uint64_t seq = id / OPEN_SLOTS;
	if (__atomic_load_n(&s->seq, __ATOMIC_ACQUIRE) != seq)
		return; /* unknown, already ended, or overwritten */
	uint64_t f[SP_F__COUNT];
	f[SP_F_NAME] = s->name;
	f[SP_F_DOMAIN] = s->domain;
	f[SP_F_VALUE] = id;
	uint64_t begin = s->begin_ns;
	int ours = s->gen == __atomic_load_n(&g_gen, __ATOMIC_RELAXED);
	/* free the slot first: only one of two racing ends gets to record */
	if (!__atomic_compare_exchange_n(&s->seq, &seq, 0, 0, __ATOMIC_ACQ_REL, __ATOMIC_RELAXED))
		return;
	if (ours && sp_cap.on)
		sp_emit(SP_K_RANGE, SP_API_nvtx, begin, sp_now(), f);
}

static nvtxRangeId_t NVTX_API start_a(const char *m)
{
	return sp_cap.on ? start(sp_intern_cstr(m), 0) : 0;
}

static nvtxRangeId_t NVTX_API start_w(const wchar_t *m)
{
	char buf[SP_MAX_STRING + 8];
	return sp_cap.on ? start(sp_intern_cstr(wide(m, buf, sizeof(buf))), 0) : 0;
}

static nvtxRangeId_t NVTX_API start_ex(const nvtxEventAttributes_t *a)
{
	return sp_cap.on ? start(name_of_attr(a), 0) : 0;
}

static nvtxRangeId_t NVTX_API domain_start_ex(nvtxDomainHandle_t d, const nvtxEventAttributes_t *a)
{
	return sp_cap.on ? start(name_of_attr(a), domain_id(d)) : 0;
}

static void NVTX_API end_core(nvtxRangeId_t id)
{
	end(id);
}

static void NVTX_API domain_end(nvtxDomainHandle_t d, nvtxRangeId_t id)
{
	end(id);
}

/* ---------------------------------------------------------------- 4. marks */

static void mark(uint32_t name, uint32_t domain)
{
	uint64_t f[SP_F__COUNT];
	uint64_t now = sp_now();
	f[SP_F_NAME] = name;
	f[SP_F_DOMAIN] = domain;
	sp_emit(SP_K_NVTX_MARK, SP_API_nvtx, now, now, f);
}

static void NVTX_API mark_a(const char *m)
{
	if (sp_cap.on)
		mark(sp_intern_cstr(m), 0);
}

static void NVTX_API mark_w(const wchar_t *m)
{
	char buf[SP_MAX_STRING + 8];
	if (sp_cap.on)
		mark(sp_intern_cstr(wide(m, buf, sizeof(buf))), 0);
}

static void NVTX_API mark_ex(const nvtxEventAttributes_t *a)
{
	if (sp_cap.on)
		mark(name_of_attr(a), 0);
}

static void NVTX_API domain_mark_ex(nvtxDomainHandle_t d, const nvtxEventAttributes_t *a)
{
	if (sp_cap.on)
		mark(name_of_attr(a), domain_id(d));
}

static void NVTX_API initialize(const void *reserved)
{
	(void)reserved;
}

/* ------------------------------------------- 5. injection, set-up, fork */

static void set(NvtxFunctionTable t, unsigned size, unsigned id, NvtxFunctionPointer fn)
{
	if (t && id <= size && t[id])
		*t[id] = fn;
}

#define FN(f) ((NvtxFunctionPointer)(f))

/* What NVTX calls in our place: the callback id in its module's table, and our function. */
static const struct nvtx_hook {
	NvtxCallbackModule module;
	unsigned id;
	NvtxFunctionPointer fn;
} nvtx_hooks[] = {
    {NVTX_CB_MODULE_CORE, NVTX_CBID_CORE_MarkEx, FN(mark_ex)},
    {NVTX_CB_MODULE_CORE, NVTX_CBID_CORE_MarkA, FN(mark_a)},
    {NVTX_CB_MODULE_CORE, NVTX_CBID_CORE_MarkW, FN(mark_w)},
    {NVTX_CB_MODULE_CORE, NVTX_CBID_CORE_RangeStartEx, FN(start_ex)},
    {NVTX_CB_MODULE_CORE, NVTX_CBID_CORE_RangeStartA, FN(start_a)},
    {NVTX_CB_MODULE_CORE, NVTX_CBID_CORE_RangeStartW, FN(start_w)},
    {NVTX_CB_MODULE_CORE, NVTX_CBID_CORE_RangeEnd, FN(end_core)},
    {NVTX_CB_MODULE_CORE, NVTX_CBID_CORE_RangePushEx, FN(push_ex)},
    {NVTX_CB_MODULE_CORE, NVTX_CBID_CORE_RangePushA, FN(push_a)},
    {NVTX_CB_MODULE_CORE, NVTX_CBID_CORE_RangePushW, FN(push_w)},
    {NVTX_CB_MODULE_CORE, NVTX_CBID_CORE_RangePop, FN(pop_core)},
    {NVTX_CB_MODULE_CORE2, NVTX_CBID_CORE2_DomainMarkEx, FN(domain_mark_ex)},
    {NVTX_CB_MODULE_CORE2, NVTX_CBID_CORE2_DomainRangeStartEx, FN(domain_start_ex)},
    {NVTX_CB_MODULE_CORE2, NVTX_CBID_CORE2_DomainRangeEnd, FN(domain_end)},
    {NVTX_CB_MODULE_CORE2, NVTX_CBID_CORE2_DomainRangePushEx, FN(domain_push_ex)},
    {NVTX_CB_MODULE_CORE2, NVTX_CBID_CORE2_DomainRangePop, FN(domain_pop)},
    {NVTX_CB_MODULE_CORE2, NVTX_CBID_CORE2_DomainRegisterStringA, FN(register_string_a)},
    {NVTX_CB_MODULE_CORE2, NVTX_CBID_CORE2_DomainRegisterStringW, FN(register_string_w)},
    {NVTX_CB_MODULE_CORE2, NVTX_CBID_CORE2_DomainCreateA, FN(domain_create_a)},
    {NVTX_CB_MODULE_CORE2, NVTX_CBID_CORE2_DomainCreateW, FN(domain_create_w)},
    {NVTX_CB_MODULE_CORE2, NVTX_CBID_CORE2_DomainDestroy, FN(domain_destroy)},
    {NVTX_CB_MODULE_CORE2, NVTX_CBID_CORE2_Initialize, FN(initialize)},
};

/*
 * Called by each module that uses NVTX (every library compiled with the
 * header-only NVTX has its own tables), once, at its first NVTX call.
 * Returns 1: this library is the tool.
 */
SP_EXPORT int InitializeInjectionNvtx2(NvtxGetExportTableFunc_t get_table)
{
	const NvtxExportTableCallbacks *cb = get_table ? get_table(NVTX_ETID_CALLBACKS) : NULL;
	if (!cb || cb->struct_size < sizeof(*cb) || !cb->GetModuleFunctionTable)
		return 0;
	static const NvtxCallbackModule modules[] = {NVTX_CB_MODULE_CORE, NVTX_CB_MODULE_CORE2};
	for (size_t m = 0; m < sizeof(modules) / sizeof(modules[0]); m++) {
		NvtxFunctionTable t = NULL;
		unsigned size = 0;
		if (!cb->GetModuleFunctionTable(modules[m], &t, &size))
			continue;
		for (size_t k = 0; k < sizeof(nvtx_hooks) / sizeof(nvtx_hooks[0]); k++)
			if (nvtx_hooks[k].module == modules[m])
				set(t, size, nvtx_hooks[k].id, nvtx_hooks[k].fn);
	}
	return 1;
}

void sp_nvtx_setup(void)
{
	pthread_atfork(NULL, NULL, sp_nvtx_fork_child);
	const char *cur = getenv("NVTX_INJECTION64_PATH");
	if (cur && *cur)
		return; /* another tool (Nsight Systems...) was asked for: leave it */
	Dl_info info = {0};
	if (!dladdr((void *)InitializeInjectionNvtx2, &info) || !info.dli_fname)
		return;
	/* absolute, so that children that chdir still find it */
	char *abs = realpath(info.dli_fname, NULL);
	if (abs) {
		setenv("NVTX_INJECTION64_PATH", abs, 1);
		free(abs);
	}
}

void sp_nvtx_fork_child(void)
{
	__atomic_add_fetch(&g_gen, 1, __ATOMIC_RELAXED);
}
