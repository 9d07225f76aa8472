/*
 * marknvtx.c - a program using NVTX v3 (header-only nvtx3/nvToolsExt.h) the way
 * a training script does, for the NVTX injection tests. Without a tool NVTX does
 * nothing; under LD_PRELOAD=libstepprof.so every call below becomes a record.
 *
 *   marknvtx [-n N] [-u US] [-f]
 *     -n N   N iterations of push("step") / sleep US / pop (default 20)
 *     -u US  microseconds slept inside each "step" (default 2000)
 *     -f     fork after the loop: the child pushes/pops "child_step" once
 *     -c LIB capture ranges (STEPPROF_CAPTURE=cudaProfilerApi), before the loop:
 *            start; push "cut"; stop; pop; start; push "whole"; pop; stop;
 *            cuProfilerStart/Stop looked up with dlsym in LIB (a libcuda.so.1,
 *            the simulated one: no CUDA call is needed before them)
 *
 * Then, once each: push "outer" { push "inner" { sleep 1 ms } }; nvtxMarkA("hello");
 * push W "wide"; markW "wmark"; start "async" ended on another thread after
 * 3 ms; pushEx with an ASCII message "ex_push" and with a registered string
 * "registered"; in domain "mydomain": pushEx "dpush", markEx "dmark",
 * startEx "drange"/end; push "open_at_exit" never popped.
 *
 * Every NVTX call after the first (whose lazy initialisation is NVTX's own code)
 * must leave errno alone: the last line says how many did not ("errno_changed=N").
 */
#include <dlfcn.h>
#include <errno.h>
#include <nvtx3/nvToolsExt.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

static int errno_changed;

/* Run the NVTX call `call` with a sentinel errno and count a change. */
#define KEEP(call)                                                                                                     \
	do {                                                                                                           \
		errno = EDOM;                                                                                          \
		call;                                                                                                  \
		if (errno != EDOM)                                                                                     \
			__atomic_add_fetch(&errno_changed, 1, __ATOMIC_RELAXED);                                       \
	} while (0)

static void *ender(void *arg)
{
	usleep(3000);
	KEEP(nvtxRangeEnd(*(nvtxRangeId_t *)arg));
	return NULL;
}

/* Event attributes with a message of the given type, the message itself left for the caller. */
static nvtxEventAttributes_t attr_of(nvtxMessageType_t type)
{
	nvtxEventAttributes_t a;
	memset(&a, 0, sizeof(a));
	a.version = NVTX_VERSION;
	a.size = NVTX_EVENT_ATTRIB_STRUCT_SIZE;
	a.messageType = type;
	return a;
}

static nvtxEventAttributes_t ascii_attr(const char *msg)
{
	nvtxEventAttributes_t a = attr_of(NVTX_MESSAGE_TYPE_ASCII);
	a.message.ascii = msg;
	return a;
}

/* cuProfilerStart (on) or cuProfilerStop of the driver lib (its result does not matter here). */
static void profiler(const char *lib, int on)
{
	void *h = dlopen(lib, RTLD_NOW);
	int (*fn)(void) = h ? (int (*)(void))dlsym(h, on ? "cuProfilerStart" : "cuProfilerStop") : NULL;
	if (!fn) {
		fprintf(stderr, "marknvtx: no cuProfilerStart/Stop in %s\n", lib);
		exit(1);
	}
	(void)fn();
	dlclose(h);
}

int main(int argc, char **argv)
{
	int n = 20, us = 2000, do_fork = 0, opt;
	const char *capture = NULL;
	while ((opt = getopt(argc, argv, "n:u:fc:")) != -1) {
		if (opt == 'n')
			n = atoi(optarg);
		else if (opt == 'u')
			us = atoi(optarg);
		else if (opt == 'f')
			do_fork = 1;
		else if (opt == 'c')
			capture = optarg;
		else
			return 2;
	}
	if (capture) {
		profiler(capture, 1);
		nvtxRangePushA("cut"); /* NVTX initialises itself here */
		profiler(capture, 0);
		KEEP(nvtxRangePop());
		profiler(capture, 1);
		KEEP(nvtxRangePushA("whole"));
		KEEP(nvtxRangePop());
		profiler(capture, 0);
	}
	for (int i = 0; i < n; i++) {
		if (i || capture)
			KEEP(nvtxRangePushA("step"));
		else
			nvtxRangePushA("step"); /* NVTX initialises itself here */
		usleep(us);
		KEEP(nvtxRangePop());
	}

	KEEP(nvtxRangePushA("outer"));
	KEEP(nvtxRangePushA("inner"));
	usleep(1000);
	KEEP(nvtxRangePop());
	KEEP(nvtxRangePop());
	KEEP(nvtxMarkA("hello"));

	KEEP(nvtxRangePushW(L"wide\u00e9"));
	KEEP(nvtxMarkW(L"wmark"));
	KEEP(nvtxRangePop());

	nvtxRangeId_t id;
	KEEP(id = nvtxRangeStartA("async"));
	pthread_t th;
	pthread_create(&th, NULL, ender, &id);
	pthread_join(th, NULL);

	nvtxEventAttributes_t a = ascii_attr("ex_push");
	KEEP(nvtxRangePushEx(&a));
	KEEP(nvtxRangePop());

	nvtxDomainHandle_t d;
	KEEP(d = nvtxDomainCreateA("mydomain"));
	nvtxStringHandle_t reg;
	KEEP(reg = nvtxDomainRegisterStringA(d, "registered"));
	nvtxEventAttributes_t r = attr_of(NVTX_MESSAGE_TYPE_REGISTERED);
	r.message.registered = reg;
	KEEP(nvtxRangePushEx(&r));
	KEEP(nvtxRangePop());

	nvtxEventAttributes_t dp = ascii_attr("dpush"), dm = ascii_attr("dmark"), dr = ascii_attr("drange");
	KEEP(nvtxDomainRangePushEx(d, &dp));
	KEEP(nvtxDomainMarkEx(d, &dm));
	KEEP(nvtxDomainRangePop(d));
	nvtxRangeId_t did;
	KEEP(did = nvtxDomainRangeStartEx(d, &dr));
	usleep(500);
	KEEP(nvtxDomainRangeEnd(d, did));

	if (do_fork) {
		fflush(stdout);
		pid_t c = fork();
		if (c == 0) {
			nvtxRangePushA("child_step");
			nvtxRangePop();
			_exit(0);
		}
		waitpid(c, NULL, 0);
		printf("child=%d\n", (int)c);
	}
	KEEP(nvtxRangePushA("open_at_exit"));
	printf("marknvtx pid=%d steps=%d errno_changed=%d\n", (int)getpid(), n, errno_changed);
	return 0;
}
