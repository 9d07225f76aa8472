/*
 * test_torch.c - a real PyTorch input pipeline (Debian's python3-torch, run
 * with /usr/bin/python3): tests/workloads/py/loader.py reads one of 3,000
 * small files (2-16 KiB) per item through DataLoader(num_workers=4,
 * batch_size=32) for two epochs. Every open of those files must be in the
 * trace, attributed to the worker processes (not the trainer), the bytes read
 * must add up to the files' sizes, and the trainer's waits for batches must
 * be loader waits: under LD_PRELOAD (libc wrappers) and under
 * `stepprof run --bpf` (skipped with a reason where BPF is refused). The
 * report of the CPU-only job says no CUDA call was made, names the workers and
 * gives the whole run's input and its small_file_storm.
 * Ground truth: the script's own counts and the pids that served the items.
 *
 * Worker restarts: loader.py epochs runs 3 epochs of 8 steps over 128 of the
 * files with 2 workers whose worker_init_fn spins 50 ms, stepprof_step() marks
 * through ctypes. Without persistent_workers each epoch's iterator forks new
 * workers and the analysis has a worker_restart finding with restarts = epochs
 * - 1 at the steps where the script saw new workers; with persistent_workers=True
 * it has none. The step count is exact either way.
 *
 * The input split: loader.py cpu and smallfiles run 40 steps with 2 persistent
 * workers, stepprof_step() marks and a 6 ms main-process step holding a 2 MiB
 * cudaMemcpy on the simulated GPU (its runtime loaded through ctypes), so the
 * loop waits for its input. cpu: each item reads one file and runs ~6 ms of
 * matrix products (one thread per worker); smallfiles: each item stats, opens,
 * reads and closes 96 files of 256-704 bytes. Ground truth: the workers' own
 * time in file calls and in the transform. The analysis must split the input
 * into input_io, input_cpu and input_wait (summing to the input share, and per
 * iteration to its input ns) with the larger part where the workers' time went,
 * loader_cpu_bound for the first, small_file_storm for the second.
 */
#include <math.h>
#include <time.h>

#include "test_io_helpers.h"

#define PYTHON "/usr/bin/python3"
#define NFILES "3000"

struct torch_env {
	char *tmp, *script, *lib, *stepprof;
	uint64_t total; /* the files' total size, as loader.py make wrote them */
	char data[PATH_MAX], trace[PATH_MAX], prefix[PATH_MAX + 4];
};

static void torch_init(struct torch_env *e, const char *tag)
{
	if (access(PYTHON, X_OK) != 0)
		cr_skip_test(PYTHON " not installed");
	struct sp_t_result res;
	char *probe[] = { PYTHON, "-c", "import torch", NULL };
	if (sp_t_run(&res, probe, NULL, NULL, 120) != 0) {
		sp_t_result_free(&res);
		cr_skip_test("python3-torch not installed (make deps installs it)");
	}
	sp_t_result_free(&res);
	e->tmp = sp_t_tmpdir(tag);
	e->script = realpath("tests/workloads/py/loader.py", NULL);
	cr_assert_not_null(e->script, "tests/workloads/py/loader.py not found (run from the repository root)");
	e->lib = io_t_abs("lib/libstepprof.so");
	e->stepprof = io_t_abs("bin/stepprof");
	snprintf(e->data, sizeof(e->data), "%s/data", e->tmp);
	snprintf(e->trace, sizeof(e->trace), "%s/trace", e->tmp);
	snprintf(e->prefix, sizeof(e->prefix), "%s/s", e->data);
	char *make[] = { PYTHON, e->script, "make", e->data, NFILES, NULL };
	cr_assert_eq(sp_t_run(&res, make, NULL, NULL, 120), 0, "loader.py make: %s", res.err);
	struct sp_json *made = io_t_truth(res.out);
	e->total = sp_json_u64(made, "bytes", 0);
	cr_assert_gt(e->total, 0, "loader.py make: %s", res.out);
	sp_json_free(made);
	sp_t_result_free(&res);
}

static void torch_fini(struct torch_env *e)
{
	sp_t_rmrf(e->tmp);
	free(e->tmp), free(e->script), free(e->lib), free(e->stepprof);
}

static int in_list(const struct sp_json *arr, int pid)
{
	for (size_t i = 0; arr && i < arr->n; i++)
		if ((int)arr->kids[i].num == pid)
			return 1;
	return 0;
}

static void check_pipeline(struct torch_env *e, const struct sp_json *t, const char *source, struct io_recs *rsp)
{
	struct io_recs rs;
	io_t_load_dir(e->trace, &rs);
	*rsp = rs;
	long opens = sp_json_i64(t, "opens", -1);
	uint64_t nbytes = sp_json_u64(t, "bytes", 0);
	int main_pid = (int)sp_json_i64(t, "main_pid", 0);
	const struct sp_json *workers = sp_json_get(t, "worker_pids");
	cr_assert_eq(opens, 6000, "the script opened %ld files", opens);
	cr_assert_not_null(workers);
	cr_assert_geq(workers->n, 4, "%zu worker pids", workers->n);

	uint64_t b;
	long n = io_t_count(&rs, (struct io_filter){ .kind = "open", .prefix = e->prefix, .source = source }, NULL);
	cr_expect_eq(n, opens, "%s: %ld opens recorded, the Dataset opened %ld files", source, n, opens);
	io_t_count(&rs, (struct io_filter){ .kind = "read", .prefix = e->prefix, .source = source }, &b);
	cr_expect_eq(b, nbytes, "%s: %llu bytes recorded, the Dataset read %llu", source, (unsigned long long)b,
		     (unsigned long long)nbytes);
	/* Two epochs read every file once each: twice the files' total size. */
	cr_expect_eq(nbytes, 2 * e->total, "the Dataset read %llu bytes of files totalling %llu",
		     (unsigned long long)nbytes, (unsigned long long)e->total);
	/* Every one of the 3,000 files, by name (not 6,000 opens of fewer files). */
	static unsigned char seen[3000];
	memset(seen, 0, sizeof(seen));
	long distinct = 0;
	for (size_t i = 0; i < rs.n; i++) {
		struct io_rec *r = &rs.v[i];
		if (strcmp(r->kind, "open") || !r->path || strncmp(r->path, e->prefix, strlen(e->prefix)))
			continue;
		long k = strtol(r->path + strlen(e->prefix), NULL, 10);
		if (k >= 0 && k < 3000 && !seen[k]++)
			distinct++;
	}
	cr_expect_eq(distinct, 3000, "%s: %ld distinct files opened, the Dataset has 3000", source, distinct);
	long bad = 0;
	for (size_t i = 0; i < rs.n; i++) {
		struct io_rec *r = &rs.v[i];
		if (strcmp(r->kind, "open") || !r->path || strncmp(r->path, e->prefix, strlen(e->prefix)))
			continue;
		bad += !in_list(workers, r->pid) || r->pid == main_pid;
	}
	cr_expect_eq(bad, 0, "%ld opens not attributed to a worker process", bad);
	/* The trainer waits for its batches on the workers' pipes/sockets. */
	long waits = io_t_count(&rs, (struct io_filter){ .kind = "loader_wait", .pid = main_pid }, NULL);
	cr_expect_gt(waits, 0, "no loader_wait record in the main process %d", main_pid);
	uint64_t waited = 0;
	for (size_t i = 0; i < rs.n; i++)
		if (!strcmp(rs.v[i].kind, "loader_wait") && rs.v[i].pid == main_pid) {
			waited += rs.v[i].end - rs.v[i].begin;
			cr_expect(!strcmp(rs.v[i].fd_type, "pipe") || !strcmp(rs.v[i].fd_type, "socket"), "fd_type %s",
				  rs.v[i].fd_type);
		}
	cr_expect_gt(waited, 0);
}

/*
 * The CPU-only job as `stepprof analyze` reports it: no process made a CUDA call
 * (said in the text, summary.cuda_calls 0), the processes that served items are
 * workers, the whole-run input summary holds the Dataset's opens in those
 * workers and the data directory first, and small_file_storm fires over the
 * whole run (6,000 files of 2-16 KiB).
 */
static void check_report(struct torch_env *e, const struct sp_json *t)
{
	const struct sp_json *workers = sp_json_get(t, "worker_pids");
	char *jargv[] = { e->stepprof, "analyze", "--json", e->trace, NULL };
	char *targv[] = { e->stepprof, "analyze", e->trace, NULL };
	struct sp_t_result jr, tr;
	cr_assert_eq(sp_t_run(&jr, jargv, NULL, NULL, 120), 0, "stepprof analyze --json: %s", jr.err);
	cr_assert_eq(sp_t_run(&tr, targv, NULL, NULL, 120), 0, "stepprof analyze: %s", tr.err);
	cr_expect(strstr(tr.out, "No CUDA call: no process made a CUDA call"), "%s", tr.out);
	cr_expect(strstr(tr.out, "Input over the whole run"), "%s", tr.out);
	struct sp_json *j = sp_json_parse(jr.out);
	cr_assert_not_null(j);
	cr_expect_eq(sp_json_u64(j, "summary.cuda_calls", 99), 0);
	uint64_t opens = 0;
	const struct sp_json *procs = sp_json_get(j, "processes"), *in = sp_json_path(j, "input.processes");
	cr_assert(procs && in, "processes and input.processes");
	for (size_t i = 0; i < procs->n; i++) {
		const struct sp_json *p = sp_json_at(procs, i);
		int pid = (int)sp_json_i64(p, "pid", 0);
		if (in_list(workers, pid))
			cr_expect_str_eq(sp_json_str(p, "role"), "worker", "pid %d served items", pid);
	}
	for (size_t i = 0; i < in->n; i++)
		if (in_list(workers, (int)sp_json_i64(sp_json_at(in, i), "pid", 0)))
			opens += sp_json_u64(sp_json_at(in, i), "files_opened", 0);
	cr_expect_geq(opens, 6000, "the workers' files in the input summary: %llu", (unsigned long long)opens);
	cr_expect_str_eq(sp_json_str(j, "input.top_directories.0.path"), e->data);
	const struct sp_json *f = sp_json_get(j, "findings");
	int storm = 0;
	for (size_t i = 0; f && i < f->n; i++)
		if (!strcmp(sp_json_str(sp_json_at(f, i), "kind"), "small_file_storm"))
			storm = !strcmp(sp_json_str(sp_json_at(f, i), "evidence.scope") ?: "", "whole_run");
	cr_expect(storm, "small_file_storm over the whole run: %s", tr.out);
	sp_json_free(j);
	sp_t_result_free(&jr);
	sp_t_result_free(&tr);
}

Test(torch, dataloader_under_ld_preload, .timeout = 300)
{
	struct torch_env e;
	torch_init(&e, "torch-libc");
	char pre[PATH_MAX + 16], dir[PATH_MAX + 16];
	snprintf(pre, sizeof(pre), "LD_PRELOAD=%s", e.lib);
	snprintf(dir, sizeof(dir), "STEPPROF_DIR=%s", e.trace);
	char *env[] = { pre, dir, "STEPPROF_IO=libc", NULL };
	char *argv[] = { PYTHON, "-W", "ignore", e.script, "run", e.data, NFILES, "2", "4", NULL };
	struct sp_t_result res;
	cr_assert_eq(sp_t_run(&res, argv, env, NULL, 240), 0, "loader.py run: %s", res.err);
	struct sp_json *t = io_t_truth(res.out);
	sp_t_result_free(&res);
	struct io_recs rs;
	check_pipeline(&e, t, "libc", &rs);
	check_report(&e, t);
	io_t_free(&rs);
	sp_json_free(t);
	torch_fini(&e);
}

Test(torch, dataloader_under_stepprof_run_bpf, .timeout = 300)
{
	const char *why;
	if (!io_t_bpf_possible(&why))
		cr_skip_test("eBPF mode not tested: %s", why);
	struct torch_env e;
	torch_init(&e, "torch-bpf");
	char *argv[] = { e.stepprof, "run", "--bpf", "-o", e.trace, "--", PYTHON, "-W", "ignore", e.script, "run",
			 e.data, NFILES, "2", "4", NULL };
	struct sp_t_result res;
	cr_assert_eq(sp_t_run(&res, argv, NULL, NULL, 240), 0, "stepprof run: %s", res.err);
	if (strstr(res.err, "eBPF collector unavailable")) {
		char why[512];
		snprintf(why, sizeof(why), "BPF refused here: %s", strstr(res.err, "eBPF collector unavailable"));
		why[strcspn(why, "\n")] = '\0';
		sp_t_result_free(&res);
		torch_fini(&e);
		cr_skip_test("%s", why);
	}
	/* the collector leaves at the tree's end, before the exit of a torch process is over: not "early" */
	cr_expect_null(strstr(res.err, "exited early"), "%s", res.err);
	struct sp_json *t = io_t_truth(res.out);
	sp_t_result_free(&res);
	struct io_recs rs;
	check_pipeline(&e, t, "bpf", &rs);
	/* And not twice: the libc file wrappers stood down. */
	cr_expect_eq(io_t_count(&rs, (struct io_filter){ .prefix = e.prefix, .source = "libc" }, NULL), 0);
	io_t_free(&rs);
	sp_json_free(t);
	torch_fini(&e);
}

/*
 * loader.py epochs under the preload, analysed: the script's truth in *t, the
 * analysis in *an. The step count is exact and the truth's generations are what
 * persistent_workers says: one per epoch without it, one for the run with it.
 */
static void run_epochs(struct torch_env *e, const char *persistent, struct sp_json **t, struct sp_json **an)
{
	char pre[PATH_MAX + 16], dir[PATH_MAX + 16];
	snprintf(pre, sizeof(pre), "LD_PRELOAD=%s", e->lib);
	snprintf(dir, sizeof(dir), "STEPPROF_DIR=%s", e->trace);
	char *env[] = { pre, dir, "STEPPROF_IO=libc", NULL };
	char *argv[] = { PYTHON, "-W", "ignore", e->script, "epochs", e->data, "128", "3", "2", (char *)persistent,
			 "50", "16", NULL };
	struct sp_t_result res;
	cr_assert_eq(sp_t_run(&res, argv, env, NULL, 240), 0, "loader.py epochs: %s", res.err);
	*t = io_t_truth(res.out);
	sp_t_result_free(&res);
	cr_assert_not_null(*t);
	char *jargv[] = { e->stepprof, "analyze", "--json", e->trace, NULL };
	cr_assert_eq(sp_t_run(&res, jargv, NULL, NULL, 120), 0, "stepprof analyze --json: %s", res.err);
	*an = sp_json_parse(res.out);
	sp_t_result_free(&res);
	cr_assert_not_null(*an);
	long steps = sp_json_i64(*t, "steps", -1), epochs = sp_json_i64(*t, "epochs", -1);
	cr_assert_eq(steps, 24);
	cr_expect_str_eq(sp_json_str(*an, "iteration_source"), "api");
	cr_expect_eq(sp_json_i64(*an, "summary.iterations", -1), steps, "%lld iterations, the script made %ld steps",
		     (long long)sp_json_i64(*an, "summary.iterations", -1), steps);
	const struct sp_json *gens = sp_json_get(*t, "worker_pids_by_epoch"), *walls = sp_json_get(*t, "wall_ms");
	cr_assert(gens && (long)gens->n == epochs && walls);
	int same = 1;
	for (size_t g = 1; g < gens->n; g++) {
		const struct sp_json *a = sp_json_at(gens, g - 1), *b = sp_json_at(gens, g);
		cr_assert_eq(a->n, 2, "epoch %zu: %zu workers", g - 1, a->n);
		for (size_t k = 0; k < a->n; k++)
			same &= in_list(b, (int)a->kids[k].num);
	}
	cr_expect_eq(same, strcmp(persistent, "0") != 0, "persistent_workers=%s, the epochs' workers %s", persistent,
		     same ? "the same" : "new");
	char line[1024] = "";
	for (size_t i = 0; i < walls->n; i++)
		snprintf(line + strlen(line), sizeof(line) - strlen(line), "%s%.0f", i ? " " : "", walls->kids[i].num);
	sp_t_note("torch epochs, persistent_workers=%s: step walls (ms) %s", persistent, line);
}

static const struct sp_json *find_kind(const struct sp_json *an, const char *kind)
{
	const struct sp_json *f = sp_json_get(an, "findings");
	for (size_t i = 0; f && i < f->n; i++)
		if (!strcmp(sp_json_str(sp_json_at(f, i), "kind") ?: "", kind))
			return sp_json_at(f, i);
	return NULL;
}

Test(torch, worker_restart_without_persistent_workers, .timeout = 300)
{
	struct torch_env e;
	torch_init(&e, "torch-restart");
	struct sp_json *t, *an;
	run_epochs(&e, "0", &t, &an);
	long epochs = sp_json_i64(t, "epochs", -1);
	/* the steps whose batch came from new workers, the first one (no restart) left out */
	const struct sp_json *started = sp_json_get(t, "workers_started");
	cr_assert(started && (long)started->n == epochs, "new workers at %zu steps", started ? started->n : 0);
	char list[256] = "";
	for (size_t i = 1; i < started->n; i++)
		snprintf(list + strlen(list), sizeof(list) - strlen(list), "%s%.0f", i > 1 ? "," : "",
			 started->kids[i].num);
	/* the new workers' start-up is waited for: each restart step is longer than every step of no restart */
	const struct sp_json *walls = sp_json_get(t, "wall_ms");
	double slowest_other = 0, fastest_restart = 1e30;
	for (size_t i = 1; i < walls->n; i++) {
		int restart = 0;
		for (size_t k = 1; k < started->n; k++)
			restart |= (size_t)started->kids[k].num == i;
		double w = walls->kids[i].num;
		if (restart)
			fastest_restart = w < fastest_restart ? w : fastest_restart;
		else
			slowest_other = w > slowest_other ? w : slowest_other;
	}
	cr_expect_gt(fastest_restart, slowest_other, "restart steps from %.1f ms, other steps up to %.1f ms",
		     fastest_restart, slowest_other);
	const struct sp_json *f = find_kind(an, "worker_restart");
	cr_assert_not_null(f, "no worker_restart: %s", sp_json_str(an, "iteration_source"));
	cr_expect_eq(sp_json_i64(f, "evidence.restarts", -1), epochs - 1);
	cr_expect_eq(sp_json_i64(f, "evidence.epochs", -1), epochs);
	cr_expect_eq(sp_json_i64(f, "evidence.workers_per_epoch", -1), 2);
	cr_expect_str_eq(sp_json_str(f, "evidence.restart_iterations") ?: "(none)", list);
	sp_json_free(an);
	sp_json_free(t);
	torch_fini(&e);
}

Test(torch, no_worker_restart_with_persistent_workers, .timeout = 300)
{
	struct torch_env e;
	torch_init(&e, "torch-persistent");
	struct sp_json *t, *an;
	run_epochs(&e, "1", &t, &an);
	const struct sp_json *started = sp_json_get(t, "workers_started");
	cr_assert(started && started->n == 1 && started->kids[0].num == 0, "new workers after step 0");
	cr_expect_null(find_kind(an, "worker_restart"), "worker_restart with persistent workers");
	sp_json_free(an);
	sp_json_free(t);
	torch_fini(&e);
}

/*
 * loader.py cpu / smallfiles under the preload, with the simulated GPU's runtime
 * for the main process's copies, analysed: the script's truth in *t, the analysis
 * in *an. The truth must show what the mode is for (its two workers served every
 * item; the loop waited for its input) and the analysis must see the steps as
 * iterations, through the API marks, and the copies as CUDA calls.
 */
#define SPLIT_STEPS 40

static void run_split(struct torch_env *e, char *const *args, struct sp_json **t, struct sp_json **an)
{
	char pre[PATH_MAX + 16], dir[PATH_MAX + 16];
	snprintf(pre, sizeof(pre), "LD_PRELOAD=%s", e->lib);
	snprintf(dir, sizeof(dir), "STEPPROF_DIR=%s", e->trace);
	char *env[] = { pre, dir, "STEPPROF_IO=libc", NULL };
	char *cudart = io_t_abs("simgpu/libcudart.so.12");
	char *argv[16] = { PYTHON, "-W", "ignore", e->script };
	size_t n = 4;
	for (size_t i = 0; args[i] && n < 14; i++)
		argv[n++] = args[i];
	argv[n++] = cudart;
	argv[n] = NULL;
	struct sp_t_result res;
	struct timespec t0, t1;
	clock_gettime(CLOCK_MONOTONIC, &t0);
	cr_assert_eq(sp_t_run(&res, argv, env, NULL, 240), 0, "loader.py %s: %s", args[0], res.err);
	clock_gettime(CLOCK_MONOTONIC, &t1);
	*t = io_t_truth(res.out);
	sp_t_result_free(&res);
	free(cudart);
	char *jargv[] = { e->stepprof, "analyze", "--json", e->trace, NULL };
	cr_assert_eq(sp_t_run(&res, jargv, NULL, NULL, 120), 0, "stepprof analyze --json: %s", res.err);
	*an = sp_json_parse(res.out);
	sp_t_result_free(&res);
	cr_assert_not_null(*an);

	long steps = sp_json_i64(*t, "steps", -1), batch = sp_json_i64(*t, "batch", -1);
	cr_assert_eq(steps, SPLIT_STEPS);
	cr_assert(sp_json_num(*t, "cuda", 0), "loader.py %s made no CUDA call", args[0]);
	const struct sp_json *workers = sp_json_get(*t, "workers"), *walls = sp_json_get(*t, "wall_ms"),
			     *waits = sp_json_get(*t, "wait_ms");
	cr_assert(workers && walls && waits && (long)walls->n == steps && (long)waits->n == steps);
	cr_assert_eq(workers->n, 2, "%zu processes served the items", workers->n);
	cr_assert_eq(sp_json_i64(*t, "items", -1), steps * batch);
	for (size_t i = 0; i < workers->n; i++) {
		int pid = (int)sp_json_i64(sp_json_at(workers, i), "pid", 0);
		cr_assert(pid > 0 && pid != (int)sp_json_i64(*t, "main_pid", 0), "worker pid %d", pid);
		cr_assert_gt(sp_json_i64(sp_json_at(workers, i), "items", 0), 0, "worker %d served nothing", pid);
	}
	/* input-bound: the main process spent a large part of its steps in next() */
	double wall = 0, wait = 0;
	for (size_t i = 0; i < walls->n; i++)
		wall += walls->kids[i].num, wait += waits->kids[i].num;
	cr_assert_gt(wait, 0.3 * wall, "loader.py %s: %.0f ms of %.0f ms waiting for batches", args[0], wait, wall);
	sp_t_note("torch %s: %.1f s for the run, %ld steps of %ld items in %.0f ms, %.0f ms (%.0f%%) in next(); "
		  "workers: file calls %.1f ms, transform %.1f ms (CPU %.1f ms), __getitem__ %.1f ms",
		  args[0], (double)(t1.tv_sec - t0.tv_sec) + (double)(t1.tv_nsec - t0.tv_nsec) / 1e9, steps, batch,
		  wall, wait, 100 * wait / wall, sp_json_num(*t, "file_ms", -1), sp_json_num(*t, "transform_ms", -1),
		  sp_json_num(*t, "transform_cpu_ms", -1), sp_json_num(*t, "getitem_ms", -1));

	cr_expect_str_eq(sp_json_str(*an, "iteration_source"), "api");
	cr_expect_eq(sp_json_i64(*an, "summary.iterations", -1), steps, "%lld iterations, the script made %ld steps",
		     (long long)sp_json_i64(*an, "summary.iterations", -1), steps);
	cr_expect_geq(sp_json_i64(*an, "summary.cuda_calls", 0), steps, "%lld CUDA calls for %ld steps' copies",
		      (long long)sp_json_i64(*an, "summary.cuda_calls", 0), steps);
}

/*
 * The input split: summary.input_split_fraction's input_io, input_cpu and
 * input_wait sum to summary.breakdown_fraction.input (within 0.001), and every
 * iteration's input_split_ns sums to its breakdown_ns.input. The shares are
 * returned in io, cpu; 0 when there is no split (the failure is recorded and the
 * caller's other checks still run).
 */
static int check_split(const struct sp_json *an, double *io, double *cpu)
{
	static const char *const keys[] = { "input_io", "input_cpu", "input_wait" };
	const struct sp_json *f = sp_json_path(an, "summary.input_split_fraction");
	if (!f || f->type != SPJ_OBJ) {
		cr_expect_fail("summary.input_split_fraction is not an object");
		return 0;
	}
	double sum = 0;
	for (size_t k = 0; k < 3; k++) {
		const struct sp_json *v = sp_json_get(f, keys[k]);
		if (!v || v->type != SPJ_NUM) {
			cr_expect_fail("summary.input_split_fraction.%s is not a number", keys[k]);
			return 0;
		}
		cr_expect(v->num >= 0 && v->num <= 1, "input_split_fraction.%s = %g", keys[k], v->num);
		sum += v->num;
	}
	double input = sp_json_num(an, "summary.breakdown_fraction.input", -1);
	cr_expect(fabs(sum - input) <= 0.001, "the input split sums to %.4f, breakdown_fraction.input is %.4f", sum,
		  input);
	*io = sp_json_num(f, "input_io", -1);
	*cpu = sp_json_num(f, "input_cpu", -1);
	sp_t_note("input split: io %.3f, cpu %.3f, wait %.3f of the wall; input %.3f", *io, *cpu,
		  sp_json_num(f, "input_wait", -1), input);
	const struct sp_json *its = sp_json_get(an, "iterations");
	cr_expect(its && its->n > 0, "no iterations");
	long bad = 0;
	for (size_t i = 0; its && i < its->n; i++) {
		const struct sp_json *it = sp_json_at(its, i), *s = sp_json_get(it, "input_split_ns");
		uint64_t ns = 0;
		size_t k = 0;
		while (s && s->type == SPJ_OBJ && k < 3 && sp_json_get(s, keys[k]))
			ns += sp_json_u64(s, keys[k++], 0);
		if (k < 3) {
			cr_expect_fail("iterations[%zu].input_split_ns has no %s", i, s ? keys[k] : "object");
			return 1;
		}
		uint64_t in = sp_json_u64(it, "breakdown_ns.input", 0);
		if (ns != in && bad++ < 3)
			cr_expect_eq(ns, in, "iteration %zu: input split %llu ns, breakdown_ns.input %llu ns", i,
				     (unsigned long long)ns, (unsigned long long)in);
	}
	cr_expect_eq(bad, 0, "%ld iterations whose input split is not their input", bad);
	return 1;
}

static int severity_is(const struct sp_json *f, const char *a, const char *b)
{
	const char *s = sp_json_str(f, "severity") ?: "";
	return !strcmp(s, a) || (b && !strcmp(s, b));
}

/*
 * A CPU-bound loader: each item reads one file of 2-16 KiB and runs ~6 ms of
 * matrix products; the workers' own measure says their time went to the
 * transform. The input is then mostly the workers' CPU (input_cpu > input_io),
 * loader_cpu_bound is a warning or worse and there is no small-file storm (4
 * opens a step) above info.
 */
Test(torch, loader_cpu_transform, .timeout = 300)
{
	struct torch_env e;
	torch_init(&e, "torch-cpu");
	struct sp_json *t, *an;
	char *args[] = { "cpu", e.data, NFILES, "40", "2", "4", NULL };
	run_split(&e, args, &t, &an);
	const struct sp_json *workers = sp_json_get(t, "workers");
	for (size_t i = 0; i < workers->n; i++) {
		const struct sp_json *w = sp_json_at(workers, i);
		cr_assert_gt(sp_json_num(w, "transform_ms", 0), sp_json_num(w, "file_ms", 0),
			     "worker %lld: transform %.1f ms, file calls %.1f ms", (long long)sp_json_i64(w, "pid", 0),
			     sp_json_num(w, "transform_ms", 0), sp_json_num(w, "file_ms", 0));
	}
	cr_assert_gt(sp_json_num(t, "transform_cpu_ms", 0), sp_json_num(t, "file_ms", 0),
		     "transform CPU %.1f ms, file calls %.1f ms", sp_json_num(t, "transform_cpu_ms", 0),
		     sp_json_num(t, "file_ms", 0));
	double io, cpu;
	if (check_split(an, &io, &cpu))
		cr_expect_gt(cpu, io, "input_cpu %.3f, input_io %.3f", cpu, io);
	const struct sp_json *f = find_kind(an, "loader_cpu_bound");
	cr_expect(f && severity_is(f, "warning", "critical"), "loader_cpu_bound: %s",
		  f ? sp_json_str(f, "severity") : "none");
	f = find_kind(an, "small_file_storm");
	cr_expect(!f || severity_is(f, "info", NULL), "small_file_storm %s, iterations %lld from %lld, %lld files each",
		  f ? sp_json_str(f, "severity") : "", (long long)sp_json_i64(f, "iterations", -1),
		  (long long)sp_json_i64(f, "first_iteration", -1),
		  (long long)sp_json_i64(f, "evidence.files_per_iteration", -1));
	sp_json_free(an);
	sp_json_free(t);
	torch_fini(&e);
}

/*
 * A loader of many tiny files: each item stats, opens, reads and closes 96
 * files of 256-704 bytes and transforms nothing; the workers' own measure says
 * file calls took most of __getitem__. The input is then mostly file calls
 * (input_io > input_cpu), small_file_storm is a warning or worse and there is
 * no loader_cpu_bound.
 */
Test(torch, loader_small_files, .timeout = 300)
{
	struct torch_env e;
	torch_init(&e, "torch-small");
	char tiny[PATH_MAX + 8];
	snprintf(tiny, sizeof(tiny), "%s/tiny", e.tmp);
	struct sp_t_result res;
	char *make[] = { PYTHON, e.script, "tiny", tiny, "1024", NULL };
	cr_assert_eq(sp_t_run(&res, make, NULL, NULL, 120), 0, "loader.py tiny: %s", res.err);
	sp_t_result_free(&res);
	struct sp_json *t, *an;
	char *args[] = { "smallfiles", tiny, "1024", "40", "2", "16", "96", NULL };
	run_split(&e, args, &t, &an);
	cr_assert_eq(sp_json_i64(t, "files_per_item", -1), 96);
	const struct sp_json *workers = sp_json_get(t, "workers");
	for (size_t i = 0; i < workers->n; i++) {
		const struct sp_json *w = sp_json_at(workers, i);
		double file = sp_json_num(w, "file_ms", 0), get = sp_json_num(w, "getitem_ms", 0);
		cr_assert_gt(file, get - file, "worker %lld: file calls %.1f ms of __getitem__'s %.1f ms",
			     (long long)sp_json_i64(w, "pid", 0), file, get);
		cr_assert_gt(file, sp_json_num(w, "transform_ms", 0));
	}
	double io, cpu;
	if (check_split(an, &io, &cpu))
		cr_expect_gt(io, cpu, "input_io %.3f, input_cpu %.3f", io, cpu);
	const struct sp_json *f = find_kind(an, "small_file_storm");
	cr_expect(f && severity_is(f, "warning", "critical"), "small_file_storm: %s",
		  f ? sp_json_str(f, "severity") : "none");
	f = find_kind(an, "loader_cpu_bound");
	cr_expect_null(f, "loader_cpu_bound (%s) for a loader of tiny files", f ? sp_json_str(f, "severity") : "");
	sp_json_free(an);
	sp_json_free(t);
	torch_fini(&e);
}
