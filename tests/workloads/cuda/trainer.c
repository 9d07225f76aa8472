/*
 * trainer.c - a synthetic training loop on the (simulated) GPU whose options
 * choose the scenario, and which prints the ground truth of what it did
 * (docs/workloads.md). Built twice: build/tests/bin/trainer (libcudart.so.12) and
 * build/tests/bin/trainer-static (libcudart_static.a, -DTRAINER_STATIC).
 *
 *   1. options and scenarios (presets expanded into options)
 *   2. helpers: jitter, sleeping and spinning, checked CUDA calls
 *   3. the data directory and the batch readers (main thread or forked workers)
 *   4. markers (NVTX v3 range, stepprof_step)
 *   5. one iteration: input, host, h2d, memory (leak, fragmentation), compute, d2h, sync
 *   5b. the backward thread (--backward-thread): launches the backward share of the kernels
 *   5c. ranks (--ranks N): one process per rank, as torchrun starts them, and each step's all-reduce
 *   6. main: setup, loop, teardown, ground truth
 */
#include "trainer.h"

#include <cuda_profiler_api.h>
#include <cuda_runtime_api.h>
#include <nccl.h>
#include "simgpu.h"
#include <nvtx3/nvToolsExt.h>

#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <math.h>
#include <pthread.h>
#include <semaphore.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#ifdef TRAINER_STATIC
#define TRAINER_IS_STATIC true
#else
#define TRAINER_IS_STATIC false
#endif

#define MiB (1024ull * 1024)

/* ---- 1. options and scenarios ---- */

enum markers { MARK_NONE, MARK_NVTX, MARK_STEP };

static struct opts {
	const char *scenario;
	unsigned iters, files_per_iter, dataset_files, workers, prefetch, kernels, syncs, fragment_iter;
	unsigned ckpt_every, ckpt_files; /* --checkpoint-every N --checkpoint-files K */
	unsigned log_every;		 /* --log-every N: the loss printed every N iterations */
	unsigned slow_from, pause_at;	 /* --slow-from N (0: never), --pause-at N (0: never) */
	uint64_t slow_host_us, pause_ms; /* --slow-host-us U: host time from then on; --pause-ms M */
	uint64_t launch_host_us;	 /* --launch-host-us U: host time spun before each kernel launch */
	unsigned kernel_step_at;	 /* --kernel-step-at N: from iteration N on (0: never) ... */
	uint64_t kernel_step_us;	 /* --kernel-step-us U: ... each kernel sleeps U us, not --kernel-us */
	unsigned batch_copies;		 /* --batch-copies N: each copy as N pieces of one cudaMemcpyBatchAsync */
	unsigned epoch_iters;		 /* --epoch-iters N: new loader workers every N iterations (0: never) */
	uint64_t worker_start_us;	 /* --worker-start-us U: a new worker's start-up, spun before its first batch */
	uint64_t file_size, h2d_bytes, d2h_bytes, item_bytes, leak_bytes;
	uint64_t worker_us, kernel_us, host_us;
	uint64_t worker_cpu_us; /* --worker-cpu-us U: a worker's CPU work per batch, spun after each file */
	bool pin_thread;  /* --pin-thread: a thread receives the workers' batches (pin_memory=True) */
	bool print_iters; /* --print-iters: "iteration N" on stdout as each iteration ends */
	bool pinned, fragment, fragment_iter_set, run_static;
	enum markers markers;
	double jitter_pct;
	uint64_t seed;
	const char *data_dir;
	double backward_share; /* --backward-thread: share of each iteration's kernels (0: none) */
	bool prof_range;       /* --profiler-range A-B: cudaProfilerStart before iteration A, Stop before B */
	bool prof_dlsym;       /* --profiler-dlsym: the driver's cuProfilerStart/Stop looked up with dlsym */
	bool prof_entry;       /* --profiler-entry-point: ... from cudaGetDriverEntryPointByVersion */
	unsigned prof_from, prof_to;
	unsigned ranks;		  /* --ranks N: N rank processes, each with an all-reduce per step (0: none) */
	uint64_t allreduce_bytes; /* --allreduce-bytes B: the all-reduce's size (float32 elements) */
	bool overlap;		  /* --overlap: the all-reduce on a second stream, beside the last kernel */
	unsigned slow_rank;	  /* --slow-rank K --slow-us U: rank K's input phase takes U us more */
	uint64_t slow_us;
} O = {
    .allreduce_bytes = MiB,
    .iters = 20,
    .file_size = 64 * 1024,
    .prefetch = 2,
    .h2d_bytes = MiB,
    .pinned = true,
    .kernels = 4,
    .kernel_us = 1000,
    .d2h_bytes = 4096,
    .item_bytes = 4,
    .seed = 1,
    .host_us = 500,
};

/* The scenarios of docs/workloads.md; this table is the source of truth. */
#define CLEAN_ARGS                                                                                                     \
	"--iters 24 --workers 2 --files-per-iter 2 --file-size 2M --h2d-bytes 4M --pinned --kernels 10 "               \
	"--kernel-us 3000 --d2h-bytes 1M --host-us 500"
static const struct scenario {
	const char *name, *args, *what;
} scenarios[] = {
    {"input-bound",
     "--iters 24 --workers 4 --files-per-iter 128 --file-size 16K --worker-us 100000 --h2d-bytes 2M --pinned "
     "--kernels 4 --kernel-us 1000 --d2h-bytes 4K --host-us 500",
     "small files through 4 loader workers; the trainer waits for batches"},
    {"pageable-h2d-bound",
     "--iters 24 --files-per-iter 2 --file-size 1M --h2d-bytes 32M --pageable --kernels 4 --kernel-us 1000 "
     "--d2h-bytes 4K --host-us 500",
     "32 MiB per iteration copied from malloc'd memory"},
    {"compute-bound",
     "--iters 24 --files-per-iter 2 --file-size 1M --h2d-bytes 4M --pinned --kernels 20 --kernel-us 2000 "
     "--d2h-bytes 4K --host-us 500",
     "kernels fill more than 80% of each iteration"},
    {"clean", CLEAN_ARGS, "pinned copies, large files, steady memory"},
    {"fragmenting", CLEAN_ARGS " --fragment", "an OOM with enough free memory, then flush-and-retry"},
    {"leaking", CLEAN_ARGS " --leak-bytes 8M", "8 MiB of device memory leaked per iteration"},
    {"sync-heavy",
     "--iters 24 --files-per-iter 4 --file-size 256K --h2d-bytes 1M --pinned --kernels 20 --kernel-us 600 "
     "--syncs 19 --item-bytes 4 --d2h-bytes 4K --host-us 500",
     "a small D2H copy and a sync after each kernel (.item())"},
    {"launch-bound",
     "--iters 20 --kernels 200 --kernel-us 15 --launch-host-us 60 --h2d-bytes 64K --pinned --d2h-bytes 4K "
     "--host-us 500",
     "hundreds of short kernels per step, each after host work as long as it: the GPU waits for launches"},
    {"gpu-bound", "--iters 20 --kernels 100 --kernel-us 300 --h2d-bytes 1M --pinned --d2h-bytes 4K --host-us 200",
     "a deep queue: the host launches a step's kernels at once and waits at the sync"},
    {"worker-restart",
     "--iters 24 --workers 2 --epoch-iters 6 --worker-start-us 60000 --files-per-iter 8 --file-size 64K "
     "--kernels 4 --kernel-us 2000 --h2d-bytes 1M --pinned --d2h-bytes 4K --host-us 500",
     "loader workers created anew every 6 iterations (an epoch without persistent_workers), 60 ms start-up each"},
    {"loader-cpu-bound",
     "--iters 24 --workers 2 --files-per-iter 4 --file-size 16K --worker-cpu-us 40000 --h2d-bytes 1M --pinned "
     "--kernels 4 --kernel-us 1000 --d2h-bytes 4K --host-us 500",
     "2 workers burn 40 ms of CPU per batch (decode, augment) on 4 small files: the trainer waits on their CPU"},
    {"small-files",
     "--iters 12 --workers 1 --files-per-iter 2500 --file-size 2K --dataset-files 30000 --h2d-bytes 1M --pinned "
     "--kernels 2 --kernel-us 1000 --d2h-bytes 4K --host-us 200",
     "a worker stats, opens, reads and closes 2500 distinct 2 KiB files per batch, no transform: the trainer waits "
     "on its file calls"},
    {"loader-starved",
     "--iters 24 --workers 2 --prefetch 1 --files-per-iter 2 --file-size 64K --worker-us 30000 --h2d-bytes 1M "
     "--pinned --kernels 4 --kernel-us 1000 --d2h-bytes 4K --host-us 500",
     "2 workers, one batch ahead each, blocked 30 ms per batch (neither file calls nor CPU): the trainer waits on "
     "their waits"},
};

static void usage(FILE *f)
{
	fprintf(f, "usage: trainer [--scenario NAME] [options]   (docs/workloads.md)\n"
		   "  --iters N  --files-per-iter N  --file-size B  --dataset-files N  --data-dir DIR\n"
		   "  --workers K  --prefetch N  --worker-us U  --pin-thread  --h2d-bytes B  --pinned|--pageable\n"
		   "  --kernels N  --kernel-us U  --d2h-bytes B  --syncs N  --item-bytes B  --leak-bytes B\n"
		   "  --fragment  --fragment-iter K  --markers none|nvtx|step  --jitter PCT  --seed S\n"
		   "  --host-us U  --static  --list-scenarios  --checkpoint-every N  --checkpoint-files K\n"
		   "  --log-every N  --batch-copies N  --print-iters  --slow-from N --slow-host-us U\n"
		   "  --pause-at N --pause-ms M  --launch-host-us U  --kernel-step-at N --kernel-step-us U\n"
		   "  --backward-thread SHARE   (a fraction, 0.67 or 2/3)\n"
		   "  --profiler-range A-B  --profiler-dlsym  --profiler-entry-point\n"
		   "  --epoch-iters N  --worker-start-us U  --worker-cpu-us U\n"
		   "  --ranks N  --allreduce-bytes B  --overlap  --slow-rank K --slow-us U\n"
		   "sizes take K/M/G suffixes (powers of 1024); durations are microseconds\n");
}

static void __attribute__((noreturn)) bad(const char *what, const char *val)
{
	fprintf(stderr, "trainer: bad %s: '%s'\n", what, val ? val : "(missing)");
	usage(stderr);
	exit(2);
}

static uint64_t parse_size(const char *opt, const char *s)
{
	char *end;
	if (!s || !*s || *s == '-')
		bad(opt, s);
	errno = 0;
	unsigned long long v = strtoull(s, &end, 10);
	uint64_t mul = 1;
	switch (*end) {
	case 'K':
	case 'k':
		mul = 1024, end++;
		break;
	case 'M':
	case 'm':
		mul = MiB, end++;
		break;
	case 'G':
	case 'g':
		mul = 1024 * MiB, end++;
		break;
	}
	if (errno || *end || end == s || v > UINT64_MAX / mul)
		bad(opt, s);
	return v * mul;
}

static unsigned parse_uint(const char *opt, const char *s, unsigned max)
{
	uint64_t v = parse_size(opt, s);
	if (v > max)
		bad(opt, s);
	return (unsigned)v;
}

/* A share in [0, 1]: a decimal (0.67) or a fraction (2/3). */
static double parse_share(const char *opt, const char *s)
{
	char *end;
	if (!s || !*s || *s == '-')
		bad(opt, s);
	errno = 0;
	double v = strtod(s, &end);
	if (*end == '/') {
		const char *d = end + 1;
		double den = strtod(d, &end);
		if (end == d || den <= 0)
			bad(opt, s);
		v /= den;
	}
	if (errno || *end || end == s || !isfinite(v) || v < 0 || v > 1)
		bad(opt, s);
	return v;
}

/*
 * The options that set one field of O: a count (at most max), a size or a
 * duration or a seed (K/M/G suffixes), or a flag set to a fixed value.
 */
enum field_kind { F_UINT, F_SIZE, F_TRUE, F_FALSE };
static const struct field_opt {
	const char *name;
	enum field_kind kind;
	size_t off;
	unsigned max;
} field_opts[] = {
    {"--iters", F_UINT, offsetof(struct opts, iters), 1000000},
    {"--files-per-iter", F_UINT, offsetof(struct opts, files_per_iter), 100000},
    {"--file-size", F_SIZE, offsetof(struct opts, file_size), 0},
    {"--dataset-files", F_UINT, offsetof(struct opts, dataset_files), 1000000},
    {"--workers", F_UINT, offsetof(struct opts, workers), 64},
    {"--prefetch", F_UINT, offsetof(struct opts, prefetch), 64},
    {"--pin-thread", F_TRUE, offsetof(struct opts, pin_thread), 0},
    {"--print-iters", F_TRUE, offsetof(struct opts, print_iters), 0},
    {"--profiler-dlsym", F_TRUE, offsetof(struct opts, prof_dlsym), 0},
    {"--profiler-entry-point", F_TRUE, offsetof(struct opts, prof_entry), 0},
    {"--worker-us", F_SIZE, offsetof(struct opts, worker_us), 0},
    {"--worker-cpu-us", F_SIZE, offsetof(struct opts, worker_cpu_us), 0},
    {"--h2d-bytes", F_SIZE, offsetof(struct opts, h2d_bytes), 0},
    {"--pinned", F_TRUE, offsetof(struct opts, pinned), 0},
    {"--pageable", F_FALSE, offsetof(struct opts, pinned), 0},
    {"--kernels", F_UINT, offsetof(struct opts, kernels), 100000},
    {"--kernel-us", F_SIZE, offsetof(struct opts, kernel_us), 0},
    {"--d2h-bytes", F_SIZE, offsetof(struct opts, d2h_bytes), 0},
    {"--syncs", F_UINT, offsetof(struct opts, syncs), 100000},
    {"--item-bytes", F_SIZE, offsetof(struct opts, item_bytes), 0},
    {"--leak-bytes", F_SIZE, offsetof(struct opts, leak_bytes), 0},
    {"--fragment", F_TRUE, offsetof(struct opts, fragment), 0},
    {"--seed", F_SIZE, offsetof(struct opts, seed), 0},
    {"--host-us", F_SIZE, offsetof(struct opts, host_us), 0},
    {"--static", F_TRUE, offsetof(struct opts, run_static), 0},
    {"--checkpoint-every", F_UINT, offsetof(struct opts, ckpt_every), 1000000},
    {"--checkpoint-files", F_UINT, offsetof(struct opts, ckpt_files), 100000},
    {"--log-every", F_UINT, offsetof(struct opts, log_every), 1000000},
    {"--batch-copies", F_UINT, offsetof(struct opts, batch_copies), 1024},
    {"--slow-from", F_UINT, offsetof(struct opts, slow_from), 100000000},
    {"--slow-host-us", F_SIZE, offsetof(struct opts, slow_host_us), 0},
    {"--pause-at", F_UINT, offsetof(struct opts, pause_at), 100000000},
    {"--pause-ms", F_SIZE, offsetof(struct opts, pause_ms), 0},
    {"--launch-host-us", F_SIZE, offsetof(struct opts, launch_host_us), 0},
    {"--kernel-step-at", F_UINT, offsetof(struct opts, kernel_step_at), 100000000},
    {"--kernel-step-us", F_SIZE, offsetof(struct opts, kernel_step_us), 0},
    {"--epoch-iters", F_UINT, offsetof(struct opts, epoch_iters), 1000000},
    {"--worker-start-us", F_SIZE, offsetof(struct opts, worker_start_us), 0},
    {"--ranks", F_UINT, offsetof(struct opts, ranks), 64},
    {"--allreduce-bytes", F_SIZE, offsetof(struct opts, allreduce_bytes), 0},
    {"--overlap", F_TRUE, offsetof(struct opts, overlap), 0},
    {"--slow-rank", F_UINT, offsetof(struct opts, slow_rank), 63},
    {"--slow-us", F_SIZE, offsetof(struct opts, slow_us), 0},
};

/* Option a (its value v, if it takes one, consumed by moving *i): false when it is none of field_opts. */
static bool set_field(const char *a, const char *v, int *i)
{
	for (size_t k = 0; k < sizeof(field_opts) / sizeof(field_opts[0]); k++) {
		const struct field_opt *f = &field_opts[k];
		if (strcmp(a, f->name))
			continue;
		char *field = (char *)&O + f->off;
		switch (f->kind) {
		case F_UINT:
			++*i;
			*(unsigned *)field = parse_uint(a, v, f->max);
			break;
		case F_SIZE:
			++*i;
			*(uint64_t *)field = parse_size(a, v);
			break;
		case F_TRUE:
		case F_FALSE:
			*(bool *)field = f->kind == F_TRUE;
			break;
		}
		return true;
	}
	return false;
}

static void parse_args(int argc, char **argv);

static void apply_scenario(const char *name)
{
	for (size_t i = 0; i < sizeof(scenarios) / sizeof(scenarios[0]); i++) {
		if (strcmp(scenarios[i].name, name))
			continue;
		char *copy = strdup(scenarios[i].args), *save = NULL;
		char *av[64];
		int ac = 1;
		av[0] = "trainer";
		for (char *t = strtok_r(copy, " ", &save); t && ac < 63; t = strtok_r(NULL, " ", &save))
			av[ac++] = t;
		av[ac] = NULL;
		parse_args(ac, av);
		O.scenario = scenarios[i].name; /* copy stays referenced by nothing but lives on: tiny */
		return;
	}
	bad("--scenario (see --list-scenarios)", name);
}

static void parse_args(int argc, char **argv)
{
	for (int i = 1; i < argc; i++) {
		const char *a = argv[i];
		const char *v = i + 1 < argc ? argv[i + 1] : NULL;
#define OPT(name) (!strcmp(a, name))
#define TAKE()	  (i++, v)
		if (OPT("--scenario"))
			apply_scenario(v ? TAKE() : (bad(a, v), ""));
		else if (OPT("--list-scenarios")) {
			for (size_t k = 0; k < sizeof(scenarios) / sizeof(scenarios[0]); k++)
				printf("%-20s %s\n%-20s   # %s\n", scenarios[k].name, scenarios[k].args, "",
				       scenarios[k].what);
			exit(0);
		} else if (OPT("--help") || OPT("-h")) {
			usage(stdout);
			exit(0);
		} else if (OPT("--data-dir"))
			O.data_dir = v ? TAKE() : (bad(a, v), "");
		else if (OPT("--fragment-iter")) {
			O.fragment_iter = parse_uint(a, TAKE(), 1000000);
			O.fragment_iter_set = true;
		} else if (OPT("--markers")) {
			i++;
			if (v && !strcmp(v, "none"))
				O.markers = MARK_NONE;
			else if (v && !strcmp(v, "nvtx"))
				O.markers = MARK_NVTX;
			else if (v && !strcmp(v, "step"))
				O.markers = MARK_STEP;
			else
				bad(a, v);
		} else if (OPT("--jitter")) {
			O.jitter_pct = parse_uint(a, TAKE(), 99);
		} else if (OPT("--backward-thread")) {
			O.backward_share = parse_share(a, TAKE());
		} else if (OPT("--profiler-range")) {
			char *end = NULL;
			i++;
			O.prof_from = v ? (unsigned)strtoul(v, &end, 10) : 0;
			if (!v || !end || *end != '-' || sscanf(end + 1, "%u", &O.prof_to) != 1 || O.prof_to <= O.prof_from)
				bad(a, v);
			O.prof_range = true;
		} else if (!set_field(a, v, &i))
			bad("option", a);
#undef OPT
#undef TAKE
	}
}

/* ---- 2. helpers ---- */

/* xorshift64*: a fixed sequence per seed, so a scenario is repeatable. */
static uint64_t rng_next(uint64_t *s)
{
	*s ^= *s >> 12;
	*s ^= *s << 25;
	*s ^= *s >> 27;
	return *s * 2685821657736338717ull;
}

static uint64_t rng_state;

static uint64_t jitter(uint64_t *state, uint64_t ns)
{
	if (O.jitter_pct <= 0 || !ns)
		return ns;
	double u = (double)(rng_next(state) >> 11) / (double)(1ull << 53); /* [0, 1) */
	double f = 1.0 + O.jitter_pct / 100.0 * (2.0 * u - 1.0);
	return (uint64_t)((double)ns * f);
}

static void sleep_until(uint64_t t)
{
	struct timespec ts = {(time_t)(t / 1000000000ull), (long)(t % 1000000000ull)};
	while (clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &ts, NULL) == EINTR)
		;
}

/* Host "Python" time burns CPU as Python would. */
static void spin_for(uint64_t ns)
{
	uint64_t end = tr_now() + ns;
	while (tr_now() < end)
		;
}

/* The calling thread's CPU time (user + system), ns. */
static uint64_t cpu_now(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

/*
 * A loader worker's transform (decode, augment): ns of CPU burnt, however long
 * the machine makes it take; returns the CPU time it took (>= ns).
 */
static uint64_t spin_cpu(uint64_t ns)
{
	uint64_t c0 = cpu_now(), c = c0;
	while (c - c0 < ns)
		c = cpu_now();
	return c - c0;
}

static long cur_iteration = -1; /* the iteration running, -1 outside the loop */

/* The failure, the iteration it happened in and when (CLOCK_MONOTONIC): what a test of an OOM compares. */
static void die_cuda(const char *what, cudaError_t r)
{
	fprintf(stderr, "trainer: %s failed: CUDA error %d (iteration %ld, at %llu ns)\n", what, (int)r, cur_iteration,
		(unsigned long long)tr_now());
	exit(1);
}

#define CHECK(api, call)                                                                                               \
	do {                                                                                                           \
		tr_api(TR_API_##api);                                                                                  \
		cudaError_t r_ = (call);                                                                               \
		if (r_ != cudaSuccess)                                                                                 \
			die_cuda(#api, r_);                                                                            \
	} while (0)

/*
 * RATIONALE: a sleep overshoots by the timer slack (50 us by default, more on a
 * loaded machine): a 15 us kernel that slept would take ~65 us, and a
 * launch-bound loop (--launch-host-us, short kernels) would be GPU-bound. Short
 * kernels (under 100 us) spin instead, as the host time does; longer ones sleep,
 * so that the stream's worker leaves the CPU to the host thread (the 100 us
 * kernels of long runs elsewhere in the suite among them). The ground truth measures
 * each kernel's own begin and end either way.
 *
 * RATIONALE: a kernel of a given work lasts the same GPU time whatever the host's
 * CPUs are doing. A sleeping kernel's end is its start on the stream's timeline
 * plus its duration (simgpu_kernel_end_at), not the moment its worker thread woke
 * up: on a loaded machine a wake-up overshoots by hundreds of microseconds, which
 * no real kernel's duration shows, and a duration learned from sampled launches
 * would miss the others' by as much. The worker still returns no earlier than that
 * end on the host's clock, and sooner after a late start (it catches up). A
 * spinning kernel has no wake-up to overshoot: it ends when its spin does.
 */
#define KERNEL_SPIN_NS 100000ull

/*
 * The kernel: a host function run by the stream's worker (the simulated GPU's
 * contract). Exported, so that dladdr names it "trainer_kernel".
 */
void trainer_kernel(void **args);
void trainer_kernel(void **args)
{
	struct tr_kslot *k = *(struct tr_kslot **)args[0];
	uint64_t b = simgpu_globaltimer_ns(); /* the GPU's clock, as a CUDA kernel reads %globaltimer */
	if (k->sleep_ns < KERNEL_SPIN_NS) {
		spin_for(k->sleep_ns);
		k->begin = b;
		k->end = simgpu_globaltimer_ns();
		return;
	}
	uint64_t e = b + k->sleep_ns;
	sleep_until(e);
	simgpu_kernel_end_at(e);
	k->begin = b;
	k->end = e;
}

/* ---- 3. data directory and batch readers ---- */

static char data_dir[PATH_MAX];
static bool data_dir_is_temp;

static void file_path(char *buf, size_t len, unsigned f)
{
	snprintf(buf, len, "%s/f%06u.bin", data_dir, f);
}

static void make_data(void)
{
	if (!O.files_per_iter)
		return;
	if (O.data_dir) {
		snprintf(data_dir, sizeof(data_dir), "%s", O.data_dir);
		if (mkdir(data_dir, 0755) && errno != EEXIST) {
			fprintf(stderr, "trainer: cannot create %s: %s\n", data_dir, strerror(errno));
			exit(1);
		}
	} else {
		const char *tmp = getenv("TMPDIR");
		snprintf(data_dir, sizeof(data_dir), "%s/trainer-data-XXXXXX", tmp && *tmp ? tmp : "/tmp");
		if (!mkdtemp(data_dir)) {
			fprintf(stderr, "trainer: cannot create a data directory in %s: %s\n", tmp ? tmp : "/tmp",
				strerror(errno));
			exit(1);
		}
		data_dir_is_temp = true;
	}
	size_t chunk = O.file_size < MiB ? O.file_size : MiB;
	char *buf = malloc(chunk ? chunk : 1);
	for (size_t i = 0; i < chunk; i++)
		buf[i] = (char)(i * 31 + 7);
	for (unsigned f = 0; f < O.dataset_files; f++) {
		char path[PATH_MAX + 16];
		struct stat st;
		file_path(path, sizeof(path), f);
		if (!stat(path, &st) && S_ISREG(st.st_mode) && (uint64_t)st.st_size == O.file_size)
			continue;
		int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0644);
		if (fd < 0) {
			fprintf(stderr, "trainer: cannot create %s: %s\n", path, strerror(errno));
			exit(1);
		}
		for (uint64_t left = O.file_size; left;) {
			size_t n = left < chunk ? left : chunk;
			ssize_t w = write(fd, buf, n);
			if (w <= 0) {
				fprintf(stderr, "trainer: cannot write %s: %s\n", path, strerror(errno));
				exit(1);
			}
			left -= (uint64_t)w;
		}
		close(fd);
		tr_data_file_created();
	}
	free(buf);
}

static void remove_data(void)
{
	if (!data_dir_is_temp)
		return;
	for (unsigned f = 0; f < O.dataset_files; f++) {
		char path[PATH_MAX + 16];
		file_path(path, sizeof(path), f);
		unlink(path);
	}
	rmdir(data_dir);
}

struct batch_stats {
	unsigned opened, stats;
	int err;
	uint64_t bytes;
	uint64_t io_ns;	 /* the stat/open/read/close calls, each timed around the call */
	uint64_t cpu_ns; /* CPU time of --worker-cpu-us (workers only) */
};

/*
 * Read batch b's files as a Dataset's __getitem__ would: stat, open, read to
 * EOF, close. In the trainer (record) each call is an input interval; in a
 * worker (rng) each file is followed by its share of --worker-cpu-us (CPU
 * burnt) and of --worker-us (slept). Either way bs->io_ns sums the calls.
 */
static void read_batch(unsigned b, char *buf, size_t cap, struct batch_stats *bs, bool record, uint64_t *rng)
{
	memset(bs, 0, sizeof(*bs));
	for (unsigned j = 0; j < O.files_per_iter; j++) {
		char path[PATH_MAX + 16];
		struct stat st;
		uint64_t t0, t1;
		file_path(path, sizeof(path), (unsigned)(((uint64_t)b * O.files_per_iter + j) % O.dataset_files));

		t0 = tr_now();
		int rc = stat(path, &st);
		t1 = tr_now();
		if (record)
			tr_input(t0, t1);
		bs->io_ns += t1 - t0;
		bs->stats++;
		if (rc)
			bs->err = errno;

		t0 = tr_now();
		int fd = open(path, O_RDONLY);
		t1 = tr_now();
		if (record)
			tr_input(t0, t1);
		bs->io_ns += t1 - t0;
		if (fd < 0) {
			bs->err = errno;
			continue;
		}
		bs->opened++;
		for (;;) {
			t0 = tr_now();
			ssize_t n = read(fd, buf, cap);
			t1 = tr_now();
			if (record)
				tr_input(t0, t1);
			bs->io_ns += t1 - t0;
			if (n <= 0) {
				if (n < 0)
					bs->err = errno;
				break;
			}
			bs->bytes += (uint64_t)n;
		}
		t0 = tr_now();
		close(fd);
		t1 = tr_now();
		if (record)
			tr_input(t0, t1);
		bs->io_ns += t1 - t0;
		/* A worker decodes each sample after reading it (Dataset.__getitem__), so its
		 * reads spread over the batch's time instead of coming in one burst. */
		if (rng && O.worker_cpu_us)
			bs->cpu_ns += spin_cpu(jitter(rng, O.worker_cpu_us * 1000 / O.files_per_iter));
		if (rng && O.worker_us)
			sleep_until(tr_now() + jitter(rng, O.worker_us * 1000 / O.files_per_iter));
	}
}

/*
 * What a worker sends per batch: small, like the shared-memory handle a
 * DataLoader sends, plus what the ground truth needs of the worker's time: its
 * file calls (io_ns) and CPU work (cpu_ns) inside [read_begin, read_end], and in
 * its first message its start-up, [start_begin, start_end] with start_cpu_ns of
 * CPU (all zero in later messages, and without --worker-start-us). 88 bytes: one
 * atomic pipe write.
 */
struct batch_msg {
	uint32_t index, opened, stats;
	int32_t err, pid, pad;
	uint64_t bytes, read_begin, read_end;
	uint64_t io_ns, cpu_ns;
	uint64_t start_begin, start_end, start_cpu_ns;
};
_Static_assert(sizeof(struct batch_msg) == 88, "docs/workloads.md gives the batch message's size");

struct worker {
	pid_t pid;
	int idx_fd; /* trainer -> worker: batch indices */
	int res_fd; /* worker -> trainer: batch_msg */
};

static struct worker *workers;

/*
 * --epoch-iters N: the workers of one epoch's iterator (a generation) serve
 * batches epoch_first .. epoch_end - 1, batch b by worker (b - epoch_first) mod K,
 * as a new DataLoader iterator deals its indices round-robin from worker 0.
 * all_pids: every worker forked, generation after generation (the ground truth's
 * worker_pids).
 */
static unsigned epoch_first, epoch_end;
static pid_t *all_pids;
static unsigned nall_pids;

static unsigned worker_of(unsigned b)
{
	return (b - epoch_first) % O.workers;
}

/* The global number of worker w of the current generation (tr_worker_window). */
static unsigned worker_global(unsigned w)
{
	return nall_pids - O.workers + w;
}

/* record: the read is the trainer's wait for its batch, from the current generation's workers */
static bool read_full(int fd, void *p, size_t n, bool record)
{
	char *c = p;
	while (n) {
		uint64_t t0 = tr_now();
		ssize_t r = read(fd, c, n);
		uint64_t t1 = tr_now();
		if (record)
			tr_input_wait(t0, t1, worker_global(0), O.workers);
		if (r < 0 && errno == EINTR)
			continue;
		if (r <= 0)
			return false;
		c += r, n -= (size_t)r;
	}
	return true;
}

static bool write_full(int fd, const void *p, size_t n)
{
	const char *c = p;
	while (n) {
		ssize_t r = write(fd, c, n);
		if (r < 0 && errno == EINTR)
			continue;
		if (r <= 0)
			return false;
		c += r, n -= (size_t)r;
	}
	return true;
}

/* A loader worker: never touches CUDA, leaves with _exit (no atexit handlers of the runtime). */
static void __attribute__((noreturn)) worker_main(unsigned w, int idx_fd, int res_fd)
{
	uint64_t rng = O.seed + 1 + w;
	size_t cap = O.file_size < MiB ? O.file_size : MiB;
	char *buf = malloc(cap ? cap : 1);
	uint32_t idx;

	/* --worker-start-us: what a new worker does before its first batch (imports, building the dataset) */
	uint64_t start_begin = tr_now(), c0 = cpu_now();
	spin_for(jitter(&rng, O.worker_start_us * 1000));
	uint64_t start_end = tr_now(), start_cpu = cpu_now() - c0;
	bool first = true;
	while (buf && read_full(idx_fd, &idx, sizeof(idx), false)) {
		struct batch_stats bs;
		struct batch_msg m = {.index = idx, .pid = (int32_t)getpid()};
		if (first && O.worker_start_us)
			m.start_begin = start_begin, m.start_end = start_end, m.start_cpu_ns = start_cpu;
		first = false;
		m.read_begin = tr_now();
		read_batch(idx, buf, cap ? cap : 1, &bs, false, &rng);
		m.read_end = tr_now();
		m.opened = bs.opened, m.stats = bs.stats, m.bytes = bs.bytes, m.err = bs.err;
		m.io_ns = bs.io_ns, m.cpu_ns = bs.cpu_ns;
		if (!write_full(res_fd, &m, sizeof(m)))
			break;
	}
	_exit(0);
}

static void send_index(unsigned b)
{
	uint32_t idx = b;
	if (!write_full(workers[worker_of(b)].idx_fd, &idx, sizeof(idx))) {
		fprintf(stderr, "trainer: loader worker %u is gone\n", worker_of(b));
		exit(1);
	}
}

/* A generation of K workers for batches first .. the end of its epoch (the run's end without --epoch-iters). */
static void start_workers(unsigned first)
{
	epoch_first = first;
	epoch_end = O.epoch_iters && O.iters - first > O.epoch_iters ? first + O.epoch_iters : O.iters;
	if (!workers)
		workers = calloc(O.workers, sizeof(*workers));
	pid_t *more = realloc(all_pids, (nall_pids + O.workers) * sizeof(*all_pids));
	if (!workers || !more) {
		fprintf(stderr, "trainer: out of host memory\n");
		exit(1);
	}
	all_pids = more;
	tr_workers_started(first);
	for (unsigned w = 0; w < O.workers; w++) {
		int ip[2], rp[2];
		if (pipe2(ip, O_CLOEXEC) || pipe2(rp, O_CLOEXEC)) {
			fprintf(stderr, "trainer: pipe: %s\n", strerror(errno));
			exit(1);
		}
		fflush(stdout);
		pid_t pid = fork();
		if (pid < 0) {
			fprintf(stderr, "trainer: fork: %s\n", strerror(errno));
			exit(1);
		}
		if (pid == 0) {
			close(ip[1]);
			close(rp[0]);
			for (unsigned k = 0; k < w; k++) /* earlier workers' trainer ends */
				close(workers[k].idx_fd), close(workers[k].res_fd);
			worker_main(w, ip[0], rp[1]);
		}
		close(ip[0]);
		close(rp[1]);
		workers[w] = (struct worker){pid, ip[1], rp[0]};
		all_pids[nall_pids++] = pid;
	}
}

static void stop_workers(void)
{
	for (unsigned w = 0; w < O.workers; w++)
		close(workers[w].idx_fd);
	for (unsigned w = 0; w < O.workers; w++) {
		int st;
		while (waitpid(workers[w].pid, &st, 0) < 0 && errno == EINTR)
			;
		close(workers[w].res_fd);
	}
}

/*
 * --pin-thread: DataLoader(pin_memory=True). A thread of the trainer receives the
 * workers' batch messages in batch order (its blocking read of the result pipe is
 * the wait for the workers) and hands each to the main thread through a queue
 * guarded by a POSIX semaphore; the main thread waits on it with sem_clockwait
 * and a 5 s deadline, retried, as CPython's queue.get(timeout=5) acquires a lock.
 * The thread starts with the first indices (iter(loader)), inside iteration 0.
 */
static struct {
	pthread_t thread;
	sem_t ready;		/* one post per batch stored in msgs[] */
	struct batch_msg *msgs; /* batch b in msgs[b], written before its post */
	volatile unsigned dead; /* a worker died: batch dead - 1 (posted all the same) is not there */
	bool started;
} pin;

static void *pin_main(void *arg)
{
	(void)arg;
	for (unsigned b = 0; b < O.iters; b++) {
		if (!read_full(workers[b % O.workers].res_fd, &pin.msgs[b], sizeof(pin.msgs[b]), false)) {
			pin.dead = b + 1;
			sem_post(&pin.ready);
			return NULL;
		}
		sem_post(&pin.ready);
	}
	return NULL;
}

static void pin_start(void)
{
	pin.msgs = calloc(O.iters, sizeof(*pin.msgs));
	if (!pin.msgs || sem_init(&pin.ready, 0, 0) || pthread_create(&pin.thread, NULL, pin_main, NULL)) {
		fprintf(stderr, "trainer: cannot start the pin thread\n");
		exit(1);
	}
	pin.started = true;
}

/* Batch i from the pin thread: false when a worker died. */
static bool pin_get(unsigned i, struct batch_msg *m)
{
	for (;;) {
		struct timespec dl;
		clock_gettime(CLOCK_MONOTONIC, &dl);
		dl.tv_sec += 5;
		if (sem_clockwait(&pin.ready, CLOCK_MONOTONIC, &dl) == 0)
			break;
		if (errno != EINTR && errno != ETIMEDOUT) {
			fprintf(stderr, "trainer: sem_clockwait: %s\n", strerror(errno));
			exit(1);
		}
	}
	if (pin.dead && i + 1 >= pin.dead)
		return false;
	*m = pin.msgs[i];
	return true;
}

static void pin_stop(void)
{
	if (!pin.started)
		return;
	pthread_join(pin.thread, NULL);
	sem_destroy(&pin.ready);
	free(pin.msgs);
}

/* ---- 4. markers ---- */

static void (*step_fn)(void);

static void marker_begin(void)
{
	if (O.markers == MARK_NVTX)
		nvtxRangePushA("train_step");
	else if (O.markers == MARK_STEP && step_fn)
		step_fn();
}

static void marker_end(void)
{
	if (O.markers == MARK_NVTX)
		nvtxRangePop();
}

/*
 * --profiler-range A-B: the capture range of a profiler (nsys
 * --capture-range=cudaProfilerApi, STEPPROF_CAPTURE=cudaProfilerApi), opened
 * before iteration A begins and closed before iteration B begins (or after the
 * last one), as a training script does around its loop's step. Through the
 * runtime (the PLT, or the static runtime's driver table), or with
 * --profiler-dlsym the driver's functions looked up by handle, or with
 * --profiler-entry-point asked of the runtime (cudaGetDriverEntryPointByVersion).
 */
static void profiler_at(unsigned i)
{
	if (!O.prof_range || (i != O.prof_from && i != O.prof_to))
		return;
	bool on = i == O.prof_from;
	if (O.prof_entry) {
		void *p = NULL;
		enum cudaDriverEntryPointQueryResult q;
		if (cudaGetDriverEntryPointByVersion(on ? "cuProfilerStart" : "cuProfilerStop", &p, 12000,
						     cudaEnableDefault, &q) != cudaSuccess ||
		    !p || ((int (*)(void))p)() != 0) {
			fprintf(stderr, "trainer: %s through cudaGetDriverEntryPointByVersion failed\n",
				on ? "cuProfilerStart" : "cuProfilerStop");
			exit(1);
		}
	} else if (O.prof_dlsym) {
		void *h = dlopen("libcuda.so.1", RTLD_LAZY | RTLD_NOLOAD);
		int (*fn)(void) = h ? (int (*)(void))dlsym(h, on ? "cuProfilerStart" : "cuProfilerStop") : NULL;
		if (!fn || fn() != 0) {
			fprintf(stderr, "trainer: %s through dlsym failed\n", on ? "cuProfilerStart" : "cuProfilerStop");
			exit(1);
		}
		dlclose(h);
	} else if ((on ? cudaProfilerStart() : cudaProfilerStop()) != cudaSuccess) {
		fprintf(stderr, "trainer: %s failed\n", on ? "cudaProfilerStart" : "cudaProfilerStop");
		exit(1);
	}
}

/* ---- 5. one iteration ---- */

static cudaStream_t stream;
static void *d_in, *d_out, *h_in, *h_out, *h_item;
static struct tr_kslot *kslots;
static char *rbuf;
static size_t rcap;

static void *dev_alloc(size_t n)
{
	void *p = NULL;
	CHECK(cudaMalloc, cudaMalloc(&p, n));
	tr_dev_alloc(n);
	return p;
}

static void dev_free(void *p, size_t n)
{
	CHECK(cudaFree, cudaFree(p));
	tr_dev_free(n);
}

static void *host_alloc(size_t n)
{
	void *p;
	if (!O.pinned)
		return calloc(1, n ? n : 1);
	CHECK(cudaHostAlloc, cudaHostAlloc(&p, n ? n : 1, cudaHostAllocDefault));
	tr_host_alloc();
	return p;
}

static void host_free(void *p)
{
	if (!O.pinned) {
		free(p);
		return;
	}
	CHECK(cudaFreeHost, cudaFreeHost(p));
	tr_host_free();
}

/*
 * --batch-copies N: the copy as N pieces (the last takes the remainder; fewer
 * when n < N) of one cudaMemcpyBatchAsync on the stream, in stream order, as a
 * loader that moves a batch's tensors in one call does. One copy for the ground
 * truth: its pieces run one after the other on the stream.
 */
static cudaError_t copy_batched(void *dst, const void *src, size_t n)
{
	enum { MAXB = 1024 };
	static void *dsts[MAXB];
	static const void *srcs[MAXB];
	static size_t sizes[MAXB];
	size_t k = O.batch_copies < n ? O.batch_copies : (n ? n : 1), piece = n / k;
	for (size_t i = 0; i < k; i++) {
		dsts[i] = (char *)dst + i * piece;
		srcs[i] = (const char *)src + i * piece;
		sizes[i] = i + 1 < k ? piece : n - i * piece;
	}
	struct cudaMemcpyAttributes attr;
	memset(&attr, 0, sizeof(attr));
	attr.srcAccessOrder = cudaMemcpySrcAccessOrderStream;
	size_t first = 0;
	return cudaMemcpyBatchAsync(dsts, srcs, sizes, k, &attr, &first, 1, stream);
}

static void copy(void *dst, const void *src, size_t n, enum cudaMemcpyKind kind, bool pageable)
{
	uint64_t cb = tr_now();
	cudaError_t r;
	if (O.batch_copies) {
		tr_api(TR_API_cudaMemcpyBatchAsync);
		r = copy_batched(dst, src, n);
	} else {
		tr_api(TR_API_cudaMemcpyAsync);
		r = cudaMemcpyAsync(dst, src, n, kind, stream);
	}
	uint64_t ce = tr_now();
	if (r != cudaSuccess)
		die_cuda(O.batch_copies ? "cudaMemcpyBatchAsync" : "cudaMemcpyAsync", r);
	tr_copy(kind == cudaMemcpyHostToDevice ? TR_H2D : TR_D2H, n, pageable, cb, ce);
}

/* A sync of stream s (or the device); returns when it returned. */
static uint64_t sync_on(cudaStream_t s, bool device)
{
	uint64_t cb = tr_now();
	cudaError_t r;
	if (device) {
		tr_api(TR_API_cudaDeviceSynchronize);
		r = cudaDeviceSynchronize();
	} else {
		tr_api(TR_API_cudaStreamSynchronize);
		r = cudaStreamSynchronize(s);
	}
	uint64_t ce = tr_now();
	if (r != cudaSuccess)
		die_cuda(device ? "cudaDeviceSynchronize" : "cudaStreamSynchronize", r);
	tr_sync(cb, ce);
	return ce;
}

static void sync_stream(bool device)
{
	(void)sync_on(stream, device);
}

static void get_batch(unsigned i)
{
	if (!O.files_per_iter)
		return;
	if (!O.workers) {
		struct batch_stats bs;
		uint64_t t0 = tr_now();
		read_batch(i, rbuf, rcap, &bs, true, NULL);
		tr_batch_reader((int)getpid(), t0, tr_now(), bs.io_ns, 0);
		tr_files(bs.opened, bs.stats, bs.bytes);
		if (bs.err)
			fprintf(stderr, "trainer: batch %u: %s\n", i, strerror(bs.err));
		return;
	}
	/*
	 * PyTorch's DataLoader keeps prefetch_factor batches outstanding per worker; the first
	 * ones are sent by iter(loader), just before the first wait: inside the first
	 * iteration, so that every file a worker reads falls inside some iteration.
	 * --epoch-iters: at an epoch's first batch the last epoch's iterator ends its
	 * workers (EOF on their index pipes, waitpid) and the new one forks its own and
	 * prefetches from scratch, so the new workers' first batches are waited for.
	 */
	if (i && i == epoch_end) {
		stop_workers();
		start_workers(i);
	}
	if (i == epoch_first)
		for (unsigned b = i; b < epoch_end && b < i + O.prefetch * O.workers; b++)
			send_index(b);
	struct batch_msg m;
	bool got;
	if (O.pin_thread) {
		if (i == 0)
			pin_start();
		/* the main thread's wait for the hand-over is its wait for the batch: input */
		uint64_t t0 = tr_now();
		got = pin_get(i, &m);
		tr_input_wait(t0, tr_now(), worker_global(0), O.workers);
	} else {
		got = read_full(workers[worker_of(i)].res_fd, &m, sizeof(m), true);
	}
	if (!got) {
		fprintf(stderr, "trainer: loader worker %u died\n", worker_of(i));
		exit(1);
	}
	if (m.index != i || m.err)
		fprintf(stderr, "trainer: batch %u: got batch %u, error %d\n", i, m.index, m.err);
	tr_batch_reader(m.pid, m.read_begin, m.read_end, m.io_ns, m.cpu_ns);
	/* how the worker spent its time: its start-up (first message only), then this batch */
	unsigned w = worker_global(worker_of(i));
	if (m.start_end > m.start_begin)
		tr_worker_window(w, m.start_begin, m.start_end, 0, m.start_cpu_ns);
	tr_worker_window(w, m.read_begin, m.read_end, m.io_ns, m.cpu_ns);
	tr_files(m.opened, m.stats, m.bytes);
	if (i + O.prefetch * O.workers < epoch_end)
		send_index(i + O.prefetch * O.workers);
}

/*
 * Fragment device memory as a caching allocator does under churning sizes, hit an
 * OOM while the free total is larger than the request, then release the cached
 * segments and retry (PyTorch: release_cached_blocks, then cudaMalloc again).
 */
static void fill_failed(size_t request)
{
	size_t f = 0, t = 0;
	CHECK(cudaMemGetInfo, cudaMemGetInfo(&f, &t));
	tr_alloc_failure(request, f, t, 0, 0, false);
}

static void fragment(void)
{
	const size_t small = 8 * MiB, big = 24 * MiB;
	size_t free_b = 0, total_b = 0;
	CHECK(cudaMemGetInfo, cudaMemGetInfo(&free_b, &total_b));

	size_t pairs = free_b / (small + big), nheld = 0, nsmall = 0, held_bytes = 0;
	void **held = calloc(pairs + 1, sizeof(*held)), **smalls = calloc(pairs + 1, sizeof(*smalls));
	/* All first, then the frees: freeing as we go would let first fit reuse the one hole. */
	for (size_t k = 0; k < pairs; k++) {
		void *ps = NULL, *pb = NULL;
		tr_api(TR_API_cudaMalloc);
		if (cudaMalloc(&ps, small) != cudaSuccess) { /* not expected: the device was not as free as it said */
			fill_failed(small);
			break;
		}
		tr_dev_alloc(small);
		smalls[nsmall++] = ps;
		tr_api(TR_API_cudaMalloc);
		if (cudaMalloc(&pb, big) != cudaSuccess) {
			fill_failed(big);
			break;
		}
		tr_dev_alloc(big);
		held[nheld++] = pb;
		held_bytes += big;
	}
	for (size_t k = 0; k < nsmall; k++) /* every other block goes back: 8 MiB holes between held segments */
		dev_free(smalls[k], small);
	free(smalls);
	size_t tail = free_b - pairs * (small + big);
	size_t request = ((tail > small ? tail : small) + MiB + MiB - 1) / MiB * MiB;

	void *p = NULL;
	tr_api(TR_API_cudaMalloc);
	cudaError_t r = cudaMalloc(&p, request);
	if (r == cudaSuccess) {
		/* The device did not fragment (no first fit?): the ground truth says so (no failure). */
		tr_dev_alloc(request);
	} else {
		size_t f2 = 0, t2 = 0;
		CHECK(cudaMemGetInfo, cudaMemGetInfo(&f2, &t2));
		for (size_t k = 0; k < nheld; k++)
			dev_free(held[k], big);
		tr_api(TR_API_cudaMalloc);
		bool ok = cudaMalloc(&p, request) == cudaSuccess;
		if (ok)
			tr_dev_alloc(request);
		tr_alloc_failure(request, f2, t2, (unsigned)nheld, held_bytes, ok);
		nheld = 0;
	}
	for (size_t k = 0; k < nheld; k++)
		dev_free(held[k], big);
	if (p)
		dev_free(p, request);
	free(held);
}

/*
 * --checkpoint-every N: after every N-th iteration's last sync, the main thread
 * saves a checkpoint as a sharded state dict does, --checkpoint-files K files of
 * 4 KiB each, written (opened for writing, never read) into a directory of its
 * own; the GPU has nothing to do meanwhile. Files opened for writing are the
 * job's output, not its input (docs/input-capture.md): the whole checkpoint is
 * host time, `other`, and its files are no files of the iteration.
 */
static char ckpt_dir[PATH_MAX];

static void ckpt_path(char *buf, size_t len, unsigned c, unsigned k)
{
	snprintf(buf, len, "%s/ckpt-%u-%05u.pt", ckpt_dir, c, k);
}

static void ckpt_dir_make(void)
{
	if (!O.ckpt_every || !O.ckpt_files)
		return;
	const char *tmp = getenv("TMPDIR");
	snprintf(ckpt_dir, sizeof(ckpt_dir), "%s/trainer-ckpt-XXXXXX", tmp && *tmp ? tmp : "/tmp");
	if (!mkdtemp(ckpt_dir)) {
		fprintf(stderr, "trainer: cannot create a checkpoint directory: %s\n", strerror(errno));
		exit(1);
	}
}

static void checkpoint(unsigned i)
{
	static const char shard[4096];
	unsigned c = (i + 1) / O.ckpt_every;
	for (unsigned k = 0; k < O.ckpt_files; k++) {
		char path[PATH_MAX + 32];
		ckpt_path(path, sizeof(path), c, k);
		int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0600);
		if (fd < 0) {
			fprintf(stderr, "trainer: cannot write %s: %s\n", path, strerror(errno));
			exit(1);
		}
		if (write(fd, shard, sizeof(shard)) != (ssize_t)sizeof(shard)) {
			fprintf(stderr, "trainer: cannot write %s: %s\n", path, strerror(errno));
			exit(1);
		}
		close(fd);
	}
}

static void ckpt_remove(void)
{
	if (!ckpt_dir[0])
		return;
	for (unsigned c = 1; c <= O.iters / O.ckpt_every; c++)
		for (unsigned k = 0; k < O.ckpt_files; k++) {
			char path[PATH_MAX + 32];
			ckpt_path(path, sizeof(path), c, k);
			unlink(path);
		}
	rmdir(ckpt_dir);
}

/* ---- 5b. the backward thread ---- */

/*
 * PyTorch's autograd engine launches the backward kernels from its own per-device
 * thread ("pt_autograd_0"), long-lived, while the thread that called backward()
 * waits for it on a condition variable (a wait stepprof does not record). With
 * --backward-thread SHARE the last round(kernels x SHARE) kernels of each
 * iteration are launched so: the main thread prepares their slots (the same
 * jitter sequence as without the option), hands the run over and waits until the
 * thread has launched them. The thread records each kernel (tr_kernel, tr_api)
 * while the main thread waits, so the ground truth's stream order holds.
 */
static struct {
	pthread_t th;
	pthread_mutex_t mu;
	pthread_cond_t cv;
	struct tr_kslot *run;
	unsigned nrun;
	bool started, ready, work, quit;
} BW = {.mu = PTHREAD_MUTEX_INITIALIZER, .cv = PTHREAD_COND_INITIALIZER};

static unsigned backward_kernels(void)
{
	return (unsigned)lround((double)O.kernels * O.backward_share);
}

/*
 * --launch-host-us: the host work of one launch (the framework's dispatch,
 * argument packing, a small op's Python) spun before it, whichever thread
 * launches; the ground truth counts it as other where no kernel runs.
 */
static void launch_kernel(struct tr_kslot *s)
{
	dim3 grid = {1, 1, 1}, block = {128, 1, 1};
	spin_for(s->launch_host_ns);
	tr_kernel(s);
	CHECK(cudaLaunchKernel, cudaLaunchKernel((const void *)trainer_kernel, grid, block, s->args, 0, stream));
}

static void *backward_main(void *unused)
{
	(void)unused;
	pthread_setname_np(pthread_self(), "pt_autograd_0");
	CHECK(cudaSetDevice, cudaSetDevice(0)); /* as the engine's device thread does */
	pthread_mutex_lock(&BW.mu);
	BW.ready = true;
	pthread_cond_broadcast(&BW.cv);
	for (;;) {
		while (!BW.work && !BW.quit)
			pthread_cond_wait(&BW.cv, &BW.mu);
		if (!BW.work)
			break;
		for (unsigned j = 0; j < BW.nrun; j++)
			launch_kernel(&BW.run[j]); /* the main thread waits: nothing else touches the truth */
		BW.work = false;
		pthread_cond_broadcast(&BW.cv);
	}
	pthread_mutex_unlock(&BW.mu);
	return NULL;
}

static void backward_start(void)
{
	if (!backward_kernels())
		return;
	int rc = pthread_create(&BW.th, NULL, backward_main, NULL);
	if (rc) {
		fprintf(stderr, "trainer: cannot start the backward thread: %s\n", strerror(rc));
		exit(1);
	}
	BW.started = true;
	pthread_mutex_lock(&BW.mu);
	while (!BW.ready)
		pthread_cond_wait(&BW.cv, &BW.mu);
	pthread_mutex_unlock(&BW.mu);
}

/* Launch the n kernels at run from the backward thread; return once they are launched (not run). */
static void backward_launch(struct tr_kslot *run, unsigned n)
{
	if (!n)
		return;
	pthread_mutex_lock(&BW.mu);
	BW.run = run;
	BW.nrun = n;
	BW.work = true;
	pthread_cond_broadcast(&BW.cv);
	while (BW.work)
		pthread_cond_wait(&BW.cv, &BW.mu);
	pthread_mutex_unlock(&BW.mu);
}

static void backward_stop(void)
{
	if (!BW.started)
		return;
	pthread_mutex_lock(&BW.mu);
	BW.quit = true;
	pthread_cond_broadcast(&BW.cv);
	pthread_mutex_unlock(&BW.mu);
	pthread_join(BW.th, NULL);
}

/* ---- 5c. ranks ---- */

/*
 * --ranks N: main forks N rank processes before any CUDA work, as torchrun
 * starts a job's ranks (RANK, LOCAL_RANK, WORLD_SIZE, LOCAL_WORLD_SIZE set in
 * each), and waits for them. Rank 0 makes the NCCL unique id and hands it to the
 * others through a pipe made before the fork. Each rank prints its own ground
 * truth; the launcher prints the ranks' lines in rank order once all have ended.
 */
static int my_rank = -1;
static int id_pipe[2] = {-1, -1};
static ncclComm_t comm;
static cudaStream_t comm_stream;
static cudaEvent_t grad_ready;
/* --overlap: around the all-reduce on its stream, its GPU time (the overlap ends with it, not with the host's wait) */
static cudaEvent_t ar_begin, ar_end;
static void *d_grad;
static unsigned nccl_unique_ids, nccl_inits, nccl_allreduces, nccl_destroys;

static void die_nccl(const char *what, ncclResult_t r)
{
	fprintf(stderr, "trainer: rank %d: %s failed: %s (iteration %ld)\n", my_rank, what, ncclGetErrorString(r),
		cur_iteration);
	exit(1);
}

#define NCHECK(what, call)                                                                                             \
	do {                                                                                                           \
		ncclResult_t r_ = (call);                                                                              \
		if (r_ != ncclSuccess)                                                                                 \
			die_nccl(what, r_);                                                                            \
	} while (0)

/* Returns in each rank; the launcher itself never touches CUDA and exits with the first failing rank's status. */
static void launch_ranks(void)
{
	pid_t pids[64];
	FILE *outs[64];
	if (pipe(id_pipe)) {
		fprintf(stderr, "trainer: pipe: %s\n", strerror(errno));
		exit(1);
	}
	for (unsigned r = 0; r < O.ranks; r++) {
		outs[r] = tmpfile(); /* the rank's stdout, printed in rank order at the end */
		if (!outs[r]) {
			fprintf(stderr, "trainer: tmpfile: %s\n", strerror(errno));
			exit(1);
		}
		/*
		 * The environment before the fork, as torchrun gives it before exec: a
		 * profiler reading RANK when the process starts (its trace file's header,
		 * made at the fork) sees it.
		 */
		char v[16];
		snprintf(v, sizeof(v), "%u", r);
		setenv("RANK", v, 1);
		setenv("LOCAL_RANK", v, 1);
		snprintf(v, sizeof(v), "%u", O.ranks);
		setenv("WORLD_SIZE", v, 1);
		setenv("LOCAL_WORLD_SIZE", v, 1);
		fflush(NULL);
		pids[r] = fork();
		if (pids[r] < 0) {
			fprintf(stderr, "trainer: fork: %s\n", strerror(errno));
			exit(1);
		}
		if (pids[r] == 0) {
			dup2(fileno(outs[r]), 1);
			for (unsigned q = 0; q <= r; q++)
				fclose(outs[q]);
			my_rank = (int)r;
			return; /* the rank goes on with main */
		}
	}
	unsetenv("RANK");
	unsetenv("LOCAL_RANK");
	unsetenv("WORLD_SIZE");
	unsetenv("LOCAL_WORLD_SIZE");
	close(id_pipe[0]);
	close(id_pipe[1]);
	int status = 0, left = (int)O.ranks;
	bool killed = false;
	while (left > 0) {
		int st;
		pid_t p = wait(&st);
		if (p < 0) {
			if (errno == EINTR)
				continue;
			break;
		}
		left--;
		int code = WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
		if (code && !status) {
			status = code;
			/* a rank that died leaves the others waiting in their all-reduce: end them */
			for (unsigned r = 0; r < O.ranks && !killed; r++)
				if (pids[r] != p)
					kill(pids[r], SIGTERM);
			killed = true;
		}
	}
	for (unsigned r = 0; r < O.ranks; r++) {
		char buf[65536];
		size_t n;
		rewind(outs[r]);
		while ((n = fread(buf, 1, sizeof(buf), outs[r])) > 0)
			fwrite(buf, 1, n, stdout);
		fclose(outs[r]);
	}
	fflush(stdout);
	exit(status);
}

/* In a rank, after its device and stream: the communicator, the gradient buffer, the second stream. */
static void comm_setup(void)
{
	ncclUniqueId id;
	if (my_rank == 0) {
		nccl_unique_ids++;
		NCHECK("ncclGetUniqueId", ncclGetUniqueId(&id));
		for (unsigned r = 1; r < O.ranks; r++)
			if (!write_full(id_pipe[1], &id, sizeof(id))) {
				fprintf(stderr, "trainer: cannot hand the unique id over\n");
				exit(1);
			}
	} else if (!read_full(id_pipe[0], &id, sizeof(id), false)) {
		fprintf(stderr, "trainer: rank %d: no unique id from rank 0\n", my_rank);
		exit(1);
	}
	close(id_pipe[0]);
	close(id_pipe[1]);
	nccl_inits++;
	NCHECK("ncclCommInitRank", ncclCommInitRank(&comm, (int)O.ranks, id, my_rank));
	if (O.allreduce_bytes)
		d_grad = dev_alloc(O.allreduce_bytes);
	if (O.overlap) {
		CHECK(cudaStreamCreate, cudaStreamCreate(&comm_stream));
		CHECK(cudaEventCreateWithFlags, cudaEventCreateWithFlags(&grad_ready, cudaEventDisableTiming));
		CHECK(cudaEventCreateWithFlags, cudaEventCreateWithFlags(&ar_begin, cudaEventDefault));
		CHECK(cudaEventCreateWithFlags, cudaEventCreateWithFlags(&ar_end, cudaEventDefault));
	}
}

static void comm_teardown(void)
{
	nccl_destroys++;
	NCHECK("ncclCommDestroy", ncclCommDestroy(comm));
	if (O.overlap) {
		CHECK(cudaEventDestroy, cudaEventDestroy(grad_ready));
		CHECK(cudaEventDestroy, cudaEventDestroy(ar_begin));
		CHECK(cudaEventDestroy, cudaEventDestroy(ar_end));
		CHECK(cudaStreamDestroy, cudaStreamDestroy(comm_stream));
	}
	if (d_grad)
		dev_free(d_grad, O.allreduce_bytes);
}

/* The step's all-reduce (float32 sum of --allreduce-bytes), on stream s; its call's begin and end. */
static void allreduce(cudaStream_t s, uint64_t *cb, uint64_t *ce)
{
	*cb = tr_now();
	nccl_allreduces++;
	ncclResult_t r = ncclAllReduce(d_grad, d_grad, O.allreduce_bytes / sizeof(float), ncclFloat, ncclSum, comm, s);
	*ce = tr_now();
	if (r != ncclSuccess)
		die_nccl("ncclAllReduce", r);
}

/* --overlap: the all-reduce waits on the second stream for the gradients (the kernels so far), then runs there */
static void allreduce_overlapped(uint64_t *cb, uint64_t *ce)
{
	CHECK(cudaEventRecord, cudaEventRecord(grad_ready, stream));
	CHECK(cudaStreamWaitEvent, cudaStreamWaitEvent(comm_stream, grad_ready, 0));
	CHECK(cudaEventRecord, cudaEventRecord(ar_begin, comm_stream));
	allreduce(comm_stream, cb, ce);
	CHECK(cudaEventRecord, cudaEventRecord(ar_end, comm_stream));
}

/*
 * --slow-rank K --slow-us U: rank K waits U us more for its batch, handed over
 * through a pipe by a loader thread of its own that takes that long (as a
 * DataLoader's slow worker would): a blocking read on a pipe, its input.
 */
static int slow_req[2] = {-1, -1}, slow_data[2] = {-1, -1};

static void *slow_loader_main(void *arg)
{
	(void)arg;
	char c;
	while (read(slow_req[0], &c, 1) == 1) {
		sleep_until(tr_now() + O.slow_us * 1000);
		if (write(slow_data[1], &c, 1) != 1)
			break;
	}
	return NULL;
}

static void slow_input(void)
{
	if (my_rank < 0 || (unsigned)my_rank != O.slow_rank || !O.slow_us)
		return;
	if (slow_req[0] < 0) {
		pthread_t th;
		if (pipe(slow_req) || pipe(slow_data) || pthread_create(&th, NULL, slow_loader_main, NULL)) {
			fprintf(stderr, "trainer: --slow-rank: the loader thread: %s\n", strerror(errno));
			exit(1);
		}
		pthread_detach(th);
	}
	uint64_t t0 = tr_now();
	char c = 0;
	if (!write_full(slow_req[1], &c, 1) || !read_full(slow_data[0], &c, 1, false)) {
		fprintf(stderr, "trainer: --slow-rank: the loader thread stopped\n");
		exit(1);
	}
	tr_input(t0, tr_now());
}

static void iteration(unsigned i)
{
	cur_iteration = (long)i;
	tr_iter_begin(i, tr_now());
	marker_begin();

	get_batch(i);
	slow_input();
	if (O.pause_at && i == O.pause_at)
		sleep_until(tr_now() + O.pause_ms * 1000000); /* a hung step: no call at all */
	uint64_t host_us = O.slow_from && i >= O.slow_from ? O.slow_host_us : O.host_us;
	spin_for(jitter(&rng_state, host_us * 1000));
	if (O.h2d_bytes)
		copy(d_in, h_in, O.h2d_bytes, cudaMemcpyHostToDevice, !O.pinned);

	if (O.fragment && i == O.fragment_iter)
		fragment();
	if (O.leak_bytes)
		(void)dev_alloc(O.leak_bytes);

	/* --kernel-step-at: the same kernel, launched the same way, takes another time from then on */
	uint64_t kernel_us = O.kernel_step_at && i >= O.kernel_step_at ? O.kernel_step_us : O.kernel_us;
	unsigned groups = O.syncs + 1, k = 0, forward = O.kernels - backward_kernels();
	uint64_t ar_cb = 0, ar_ce = 0;
	bool ar_issued = false;
	for (unsigned g = 0; g < groups; g++) {
		unsigned n = O.kernels / groups + (g < O.kernels % groups), nback = 0;
		for (unsigned j = 0; j < n; j++, k++) {
			struct tr_kslot *s = &kslots[(size_t)i * O.kernels + k];
			s->self = s;
			s->args[0] = &s->self;
			s->args[1] = NULL;
			s->sleep_ns = jitter(&rng_state, kernel_us * 1000);
			s->launch_host_ns = jitter(&rng_state, O.launch_host_us * 1000);
			/* --overlap: the last kernel is the backward phase the all-reduce overlaps */
			if (O.ranks && O.overlap && k == O.kernels - 1) {
				allreduce_overlapped(&ar_cb, &ar_ce);
				ar_issued = true;
			}
			if (k < forward)
				launch_kernel(s);
			else
				nback++; /* the backward kernels are the iteration's last ones */
		}
		backward_launch(&kslots[(size_t)i * O.kernels + k - nback], nback);
		if (g < O.syncs) {
			/* .item(): into a Python scalar, i.e. pageable memory, whatever --pinned says */
			if (O.item_bytes)
				copy(h_item, d_out, O.item_bytes, cudaMemcpyDeviceToHost, true);
			sync_stream(g % 2 == 1);
		}
	}
	if (O.ranks) {
		/* after the compute, the all-reduce; the host waits for it (a sync), then goes on */
		const struct tr_kslot *last = O.kernels ? &kslots[(size_t)i * O.kernels + O.kernels - 1] : NULL;
		if (O.overlap) {
			if (!ar_issued)
				allreduce_overlapped(&ar_cb, &ar_ce);
			uint64_t end = sync_on(comm_stream, false);
			float ms = 0;
			CHECK(cudaEventElapsedTime, cudaEventElapsedTime(&ms, ar_begin, ar_end));
			tr_comm(i, O.allreduce_bytes, ar_cb, ar_ce, ar_issued && O.kernels >= 2 ? last - 1 : NULL,
				ar_issued ? last : NULL, end, (uint64_t)((double)ms * 1e6));
		} else {
			allreduce(stream, &ar_cb, &ar_ce);
			uint64_t end = sync_on(stream, false);
			tr_comm(i, O.allreduce_bytes, ar_cb, ar_ce, last, NULL, end, 0);
		}
	}
	if (O.d2h_bytes)
		copy(h_out, d_out, O.d2h_bytes, cudaMemcpyDeviceToHost, !O.pinned);
	sync_stream(false);
	if (O.log_every && (i + 1) % O.log_every == 0) {
		/* print(loss.item()) every N steps: a 4-byte D2H into a Python scalar, then its sync */
		copy(h_item, d_out, 4, cudaMemcpyDeviceToHost, true);
		sync_stream(false);
	}
	if (ckpt_dir[0] && (i + 1) % O.ckpt_every == 0)
		checkpoint(i);
	marker_end();
}

/* ---- 6. main ---- */

static void exec_static(char **argv)
{
	char self[PATH_MAX], path[PATH_MAX + 32];
	ssize_t n = readlink("/proc/self/exe", self, sizeof(self) - 1);
	if (n <= 0) {
		fprintf(stderr, "trainer: cannot find my own path\n");
		exit(1);
	}
	self[n] = '\0';
	char *slash = strrchr(self, '/');
	if (slash)
		*slash = '\0';
	snprintf(path, sizeof(path), "%s/trainer-static", self);
	execv(path, argv);
	fprintf(stderr, "trainer: cannot run %s: %s\n", path, strerror(errno));
	exit(1);
}

/*
 * The host's memcpy speed for a copy of n bytes (best of three, warm buffers):
 * the simulated GPU moves a copy's bytes with memcpy, so a copy never takes less
 * than this, whatever the link's bandwidth (ground truth of pinned copies).
 */
static double measure_memcpy_gbps(size_t n)
{
	double best = 0;
	if (n < 4096)
		return 0;
	char *a = malloc(n), *b = malloc(n);
	if (!a || !b)
		goto out;
	memset(a, 1, n);
	memset(b, 2, n);
	for (int k = 0; k < 3; k++) {
		uint64_t t0 = tr_now();
		memcpy(b, a, n);
		__asm__ volatile("" : : "r"(b) : "memory"); /* keep the copy */
		uint64_t dt = tr_now() - t0;
		double g = dt ? (double)n / (double)dt : 0;
		best = g > best ? g : best;
	}
out:
	free(a);
	free(b);
	return best;
}

static const char *markers_name(void)
{
	return O.markers == MARK_NVTX ? "nvtx" : O.markers == MARK_STEP ? "step" : "none";
}

int main(int argc, char **argv)
{
	parse_args(argc, argv);
	if (O.run_static && !TRAINER_IS_STATIC)
		exec_static(argv);
	if (!O.iters)
		bad("--iters (must be > 0)", "0");
	if (!O.dataset_files)
		O.dataset_files = 2 * O.files_per_iter;
	if (!O.fragment_iter_set)
		O.fragment_iter = O.iters / 2;
	if (O.fragment && O.fragment_iter >= O.iters)
		bad("--fragment-iter (must be < --iters)", "");
	if (O.files_per_iter && !O.file_size)
		bad("--file-size (must be > 0)", "0");
	if (O.workers && !O.prefetch)
		bad("--prefetch (must be > 0)", "0");
	if (O.pin_thread && !(O.workers && O.files_per_iter))
		bad("--pin-thread (needs --workers K and --files-per-iter N)", "");
	if (O.epoch_iters && !(O.workers && O.files_per_iter))
		bad("--epoch-iters (needs --workers K and --files-per-iter N)", "");
	if (O.epoch_iters && O.pin_thread)
		bad("--epoch-iters (not with --pin-thread)", "");
	if (O.overlap && !O.ranks)
		bad("--overlap (needs --ranks N)", "");
	if (O.overlap && O.backward_share > 0)
		bad("--overlap (not with --backward-thread)", "");
	if ((O.slow_us || O.slow_rank) && (!O.ranks || O.slow_rank >= O.ranks))
		bad("--slow-rank (needs --ranks N, K < N)", "");
	if (O.ranks && O.allreduce_bytes % sizeof(float))
		bad("--allreduce-bytes (a multiple of 4: float32 elements)", "");
	if (O.ranks)
		launch_ranks(); /* returns in each rank */
	rng_state = O.seed ? O.seed : 1;

	const char *gbps = getenv("SIMGPU_PINNED_GBPS");
	double memcpy_gbps = measure_memcpy_gbps(O.h2d_bytes > O.d2h_bytes ? O.h2d_bytes : O.d2h_bytes);
	tr_truth_init(O.iters, gbps ? atof(gbps) : 8.0, memcpy_gbps);
	if (O.ranks) {
		const char *ng = getenv("SIMNCCL_GBPS");
		tr_comm_enable(ng && atof(ng) > 0 ? atof(ng) : 10.0);
	}
	if (O.markers == MARK_STEP)
		step_fn = (void (*)(void))dlsym(RTLD_DEFAULT, "stepprof_step");

	/* Setup, as a training script does it: data, device, model buffers; workers last. */
	make_data();
	ckpt_dir_make();
	int ndev = 0;
	tr_api(TR_API_cudaGetDeviceCount);
	cudaError_t r = cudaGetDeviceCount(&ndev);
	if (r != cudaSuccess || ndev < 1) {
		fprintf(stderr, "trainer: no CUDA device (error %d, %d devices)\n", (int)r, ndev);
		remove_data();
		ckpt_remove();
		return 1;
	}
	CHECK(cudaSetDevice, cudaSetDevice(0));
	CHECK(cudaStreamCreate, cudaStreamCreate(&stream));
	size_t free0 = 0, total0 = 0;
	CHECK(cudaMemGetInfo, cudaMemGetInfo(&free0, &total0));

	size_t out_bytes = O.d2h_bytes > O.item_bytes ? O.d2h_bytes : O.item_bytes;
	if (O.log_every && out_bytes < 4)
		out_bytes = 4;
	if (O.h2d_bytes)
		d_in = dev_alloc(O.h2d_bytes), h_in = host_alloc(O.h2d_bytes);
	if (out_bytes)
		d_out = dev_alloc(out_bytes);
	if (O.d2h_bytes)
		h_out = host_alloc(O.d2h_bytes);
	if ((O.syncs && O.item_bytes) || O.log_every)
		h_item = calloc(1, O.item_bytes > 4 ? O.item_bytes : 4);
	kslots = calloc((size_t)O.iters * O.kernels + 1, sizeof(*kslots));
	rcap = O.file_size < MiB ? O.file_size : MiB;
	rbuf = malloc(rcap ? rcap : 1);
	if (!kslots || !rbuf) {
		fprintf(stderr, "trainer: out of host memory\n");
		return 1;
	}
	if (O.files_per_iter && O.workers)
		start_workers(0);
	backward_start();
	if (O.ranks)
		comm_setup();

	for (unsigned i = 0; i < O.iters; i++) {
		profiler_at(i);
		iteration(i);
		if (O.print_iters) {
			/* flushed: a run that dies (an out-of-memory error) has shown how far it got */
			printf("iteration %u\n", i);
			fflush(stdout);
		}
	}
	tr_iter_finish(tr_now());
	profiler_at(O.iters);

	/* Teardown: outside the iterations, counted in the totals only. */
	pin_stop();
	backward_stop();
	if (O.files_per_iter && O.workers)
		stop_workers();
	if (d_in)
		dev_free(d_in, O.h2d_bytes), host_free(h_in);
	if (d_out)
		dev_free(d_out, out_bytes);
	if (h_out)
		host_free(h_out);
	free(h_item);
	if (O.ranks)
		comm_teardown();
	CHECK(cudaStreamDestroy, cudaStreamDestroy(stream));
	remove_data();
	ckpt_remove();

	/* The ground truth: one JSON line. */
	char *json = NULL;
	size_t len = 0;
	FILE *f = open_memstream(&json, &len);
	fprintf(f,
		"{\"schema\":\"stepprof.trainer/1\",\"config\":{\"scenario\":\"%s\",\"iters\":%u,\"files_per_iter\":%u,"
		"\"file_size\":%llu,\"dataset_files\":%u,\"workers\":%u,\"prefetch\":%u,\"worker_us\":%llu,"
		"\"h2d_bytes\":%llu,\"pinned\":%s,\"kernels\":%u,\"kernel_us\":%llu,\"d2h_bytes\":%llu,\"syncs\":%u,"
		"\"item_bytes\":%llu,\"leak_bytes\":%llu,\"fragment\":%s,\"fragment_iter\":%u,\"markers\":\"%s\","
		"\"jitter_pct\":%g,\"seed\":%llu,\"host_us\":%llu,\"static\":%s,\"data_dir\":\"",
		O.scenario ? O.scenario : "", O.iters, O.files_per_iter, (unsigned long long)O.file_size,
		O.dataset_files, O.workers, O.prefetch, (unsigned long long)O.worker_us,
		(unsigned long long)O.h2d_bytes, O.pinned ? "true" : "false", O.kernels,
		(unsigned long long)O.kernel_us, (unsigned long long)O.d2h_bytes, O.syncs,
		(unsigned long long)O.item_bytes, (unsigned long long)O.leak_bytes, O.fragment ? "true" : "false",
		O.fragment_iter, markers_name(), O.jitter_pct, (unsigned long long)O.seed,
		(unsigned long long)O.host_us, TRAINER_IS_STATIC ? "true" : "false");
	for (const char *c = data_dir; *c; c++) /* a JSON string, whatever the path holds */
		fprintf(f, *c == '"' || *c == '\\' ? "\\%c" : (unsigned char)*c < 0x20 ? "\\u%04x" : "%c", *c);
	fprintf(f, "\",\"pin_thread\":%s,\"checkpoint_every\":%u,\"checkpoint_files\":%u,\"log_every\":%u",
		O.pin_thread ? "true" : "false", O.ckpt_every, O.ckpt_files, O.log_every);
	fprintf(f, ",\"launch_host_us\":%llu,\"kernel_step_at\":%u,\"kernel_step_us\":%llu",
		(unsigned long long)O.launch_host_us, O.kernel_step_at, (unsigned long long)O.kernel_step_us);
	fprintf(f, ",\"epoch_iters\":%u,\"worker_start_us\":%llu,\"worker_cpu_us\":%llu", O.epoch_iters,
		(unsigned long long)O.worker_start_us, (unsigned long long)O.worker_cpu_us);
	fprintf(f, ",\"ranks\":%u,\"allreduce_bytes\":%llu,\"overlap\":%s,\"slow_rank\":%u,\"slow_us\":%llu", O.ranks,
		(unsigned long long)O.allreduce_bytes, O.overlap ? "true" : "false", O.slow_rank,
		(unsigned long long)O.slow_us);
	fprintf(f, "},\"pid\":%d,\"worker_pids\":[", (int)getpid());
	for (unsigned w = 0; w < nall_pids; w++)
		fprintf(f, "%s%d", w ? "," : "", (int)all_pids[w]);
	fprintf(f, "],\"device\":{\"total_bytes\":%llu,\"free_bytes_at_start\":%llu,\"host_memcpy_gbps\":%.3f},",
		(unsigned long long)total0, (unsigned long long)free0, memcpy_gbps);
	/* --backward-thread: the share asked for, and the kernels per iteration it gives */
	fprintf(f, "\"backward_thread\":{\"share\":%g,\"kernels\":%u},", O.backward_share, backward_kernels());
	/* --ranks: this rank, its launcher and what it called of NCCL */
	if (O.ranks)
		fprintf(f,
			"\"rank\":{\"rank\":%d,\"world_size\":%u,\"launcher_pid\":%d,\"nccl_calls\":{"
			"\"ncclGetUniqueId\":%u,\"ncclCommInitRank\":%u,\"ncclAllReduce\":%u,\"ncclCommDestroy\":%u}},",
			my_rank, O.ranks, (int)getppid(), nccl_unique_ids, nccl_inits, nccl_allreduces, nccl_destroys);
	tr_truth_write(f);
	fputs("}\n", f);
	fclose(f);
	fwrite(json, 1, len, stdout);
	fflush(stdout);
	free(json);
	return 0;
}
