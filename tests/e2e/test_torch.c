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
