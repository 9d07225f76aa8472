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
 */
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
