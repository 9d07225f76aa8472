/*
 * test_io_procs.c - nothing already recorded is lost when processes end
 * abruptly or replace themselves: children that are forked then exec'd each
 * write a complete trace of their own (also when they did I/O between the
 * fork and the exec), and a process that leaves through
 * _exit / os._exit (no atexit, no destructors, no flush) keeps every record.
 * Ground truth: iogen's own counters and the files' sizes (1000 + 97*i).
 */
#include "test_io_helpers.h"

#define NF 10

struct procs_env {
	char *tmp, *iogen, *lib;
	char data[PATH_MAX], trace[PATH_MAX], prefix[PATH_MAX + 4];
	char pre[PATH_MAX + 16], dir[PATH_MAX + 16];
};

static void penv_init(struct procs_env *e, const char *tag)
{
	e->tmp = sp_t_tmpdir(tag);
	e->iogen = io_t_abs("tests/bin/iogen");
	e->lib = io_t_abs("lib/libstepprof.so");
	snprintf(e->data, sizeof(e->data), "%s/data", e->tmp);
	snprintf(e->trace, sizeof(e->trace), "%s/trace", e->tmp);
	snprintf(e->prefix, sizeof(e->prefix), "%s/f", e->data);
	snprintf(e->pre, sizeof(e->pre), "LD_PRELOAD=%s", e->lib);
	snprintf(e->dir, sizeof(e->dir), "STEPPROF_DIR=%s", e->trace);
	char *argv[] = { e->iogen, "setup", e->data, "10", NULL };
	struct sp_t_result res;
	cr_assert_eq(sp_t_run(&res, argv, NULL, NULL, 30), 0);
	sp_t_result_free(&res);
}

static void penv_fini(struct procs_env *e)
{
	sp_t_rmrf(e->tmp);
	free(e->tmp), free(e->iogen), free(e->lib);
}

/* argv under the preload into e's trace directory (it must succeed), then that directory's records. */
static void penv_run(struct procs_env *e, char *const argv[], struct sp_t_result *res, struct io_recs *rs)
{
	char *env[] = { e->pre, e->dir, NULL };
	cr_assert_eq(sp_t_run(res, argv, env, NULL, 60), 0, "%s", res->err);
	io_t_load_dir(e->trace, rs);
}

/* argv as penv_run does, for a workload that prints its ground truth: that truth. */
static struct sp_json *penv_truth(struct procs_env *e, char *const argv[], struct io_recs *rs)
{
	struct sp_t_result res;
	penv_run(e, argv, &res, rs);
	struct sp_json *t = io_t_truth(res.out);
	sp_t_result_free(&res);
	return t;
}

/* A python3 -c script given e's data directory as its argument, as penv_truth runs it. */
static struct sp_json *penv_python(struct procs_env *e, const char *script, struct io_recs *rs)
{
	char *argv[] = { "/usr/bin/python3", "-c", (char *)script, e->data, NULL };
	return penv_truth(e, argv, rs);
}

static uint64_t total_size(void)
{
	uint64_t s = 0;
	for (int i = 0; i < NF; i++)
		s += io_t_iogen_size(i);
	return s;
}

/* `runs` passes of `iogen run DIR 10 1 1` by process pid are complete in the trace. */
static void expect_complete_runs(const struct io_recs *rs, const char *prefix, int pid, int runs)
{
	struct io_filter f = { .prefix = prefix, .pid = pid };
	uint64_t b;
	f.kind = "open";
	cr_expect_eq(io_t_count(rs, f, NULL), runs * 2 * NF, "pid %d: opens", pid);
	f.kind = "close";
	cr_expect_eq(io_t_count(rs, f, NULL), runs * 2 * NF, "pid %d: closes", pid);
	f.kind = "stat";
	cr_expect_eq(io_t_count(rs, f, NULL), runs * 5 * NF, "pid %d: stats", pid);
	f.kind = "read";
	f.api = "read";
	io_t_count(rs, f, &b);
	cr_expect_eq(b, runs * total_size(), "pid %d: read() bytes", pid);
	f.api = "fread";
	io_t_count(rs, f, &b);
	cr_expect_eq(b, runs * total_size(), "pid %d: fread() bytes", pid);
	f.api = NULL;
	f.kind = "listdir";
	f.prefix = NULL;
	cr_expect_eq(io_t_count(rs, f, NULL), runs, "pid %d: listing", pid);
}

static void expect_complete_run(const struct io_recs *rs, const char *prefix, int pid)
{
	expect_complete_runs(rs, prefix, pid, 1);
}

/*
 * `iogen mode DATA 10 3` as penv_run runs it: its three children each print
 * ground-truth lines with their pid and NF opens. The pids of those lines in
 * order into pids[] (at most max); returns how many lines there were.
 */
static int penv_children(struct procs_env *e, const char *mode, struct io_recs *rs, int pids[], int max)
{
	char *argv[] = { e->iogen, (char *)mode, e->data, "10", "3", NULL };
	struct sp_t_result res;
	penv_run(e, argv, &res, rs);
	struct sp_json **lines;
	size_t n = sp_json_parse_lines(res.out, &lines);
	int np = 0;
	for (size_t i = 0; i < n; i++) {
		if (!lines[i])
			continue;
		int pid = (int)sp_json_i64(lines[i], "pid", 0);
		cr_assert_gt(pid, 0);
		cr_expect_eq(sp_json_i64(lines[i], "open", -1), NF);
		if (np < max)
			pids[np] = pid;
		np++;
	}
	sp_json_free_lines(lines, n);
	sp_t_result_free(&res);
	return np;
}

Test(io, forked_then_execd_children_lose_nothing, .timeout = 120)
{
	struct procs_env e;
	penv_init(&e, "io-forkexec");
	struct io_recs rs;
	/* Each exec'd child printed its ground truth line with its pid. */
	int pids[8], kids = penv_children(&e, "forkexec", &rs, pids, 8);
	for (int k = 0; k < kids && k < 8; k++)
		expect_complete_run(&rs, e.prefix, pids[k]);
	cr_expect_eq(kids, 3, "%d children reported", kids);
	io_t_free(&rs);
	penv_fini(&e);
}

/*
 * Workers that do I/O between fork and exec: what they recorded before the
 * exec (in the trace file the fork gave them) survives it, and what they do
 * after it goes to a file of its own, the pid being the same.
 */
Test(io, forked_workers_keep_what_they_recorded_before_exec, .timeout = 120)
{
	struct procs_env e;
	penv_init(&e, "io-forkio");
	struct io_recs rs;
	/* Each child printed two ground-truth lines with its pid: before and after its exec. */
	int line_pid[32], nl = penv_children(&e, "forkio", &rs, line_pid, 32);
	int pids[8] = { 0 }, runs[8] = { 0 }, np = 0;
	for (int i = 0; i < nl && i < 32; i++) {
		int k = 0;
		while (k < np && pids[k] != line_pid[i])
			k++;
		if (k == np && np < 8)
			pids[np++] = line_pid[i];
		if (k < 8)
			runs[k]++;
	}
	cr_expect_eq(np, 3, "%d children reported", np);
	for (int k = 0; k < np; k++) {
		cr_expect_eq(runs[k], 2, "pid %d reported %d passes (one before exec, one after)", pids[k], runs[k]);
		expect_complete_runs(&rs, e.prefix, pids[k], 2);
	}
	/* The parent read nothing: every record of the data files is a child's. */
	long all = io_t_count(&rs, (struct io_filter){ .prefix = e.prefix }, NULL), kids = 0;
	for (int k = 0; k < np; k++)
		kids += io_t_count(&rs, (struct io_filter){ .prefix = e.prefix, .pid = pids[k] }, NULL);
	cr_expect_eq(all, kids, "%ld records of the data files, %ld of them the children's", all, kids);
	io_t_free(&rs);
	penv_fini(&e);
}

Test(io, c_process_leaving_by_exit_loses_nothing, .timeout = 60)
{
	struct procs_env e;
	penv_init(&e, "io-exit");
	char *argv[] = { e.iogen, "exit", e.data, "10", NULL };
	struct io_recs rs;
	struct sp_json *t = penv_truth(&e, argv, &rs);
	expect_complete_run(&rs, e.prefix, (int)sp_json_i64(t, "pid", 0));
	sp_json_free(t);
	io_t_free(&rs);
	penv_fini(&e);
}

Test(io, python_os_exit_loses_nothing, .timeout = 60)
{
	if (access("/usr/bin/python3", X_OK) != 0)
		cr_skip_test("/usr/bin/python3 not installed");
	struct procs_env e;
	penv_init(&e, "io-osexit");
	static const char script[] =
		"import json, os, sys\n"
		"d = sys.argv[1]; opens = nbytes = 0\n"
		"for i in range(10):\n"
		"    with open(os.path.join(d, 'f%03d' % i), 'rb') as f:\n"
		"        nbytes += len(f.read())\n"
		"    opens += 1\n"
		"print(json.dumps({'opens': opens, 'bytes': nbytes, 'pid': os.getpid()}))\n"
		"sys.stdout.flush()\n"
		"os._exit(0)\n";
	struct io_recs rs;
	struct sp_json *t = penv_python(&e, script, &rs);
	int pid = (int)sp_json_i64(t, "pid", 0);
	cr_assert_eq(sp_json_u64(t, "bytes", 0), total_size());
	uint64_t b;
	cr_expect_eq(io_t_count(&rs, (struct io_filter){ .kind = "open", .prefix = e.prefix, .pid = pid }, NULL), NF);
	cr_expect_eq(io_t_count(&rs, (struct io_filter){ .kind = "close", .prefix = e.prefix, .pid = pid }, NULL), NF);
	io_t_count(&rs, (struct io_filter){ .kind = "read", .prefix = e.prefix, .pid = pid }, &b);
	cr_expect_eq(b, total_size(), "bytes read: %llu recorded", (unsigned long long)b);
	sp_json_free(t);
	io_t_free(&rs);
	penv_fini(&e);
}

/*
 * A forked child opening the very file its parent opened last: the path in the
 * child's own trace file is that file's (the preload's per-thread "last path"
 * cache holds an id of the parent's file and must not survive the fork).
 */
Test(io, forked_child_records_the_path_its_parent_opened_last, .timeout = 60)
{
	if (access("/usr/bin/python3", X_OK) != 0)
		cr_skip_test("/usr/bin/python3 not installed");
	struct procs_env e;
	penv_init(&e, "io-forkpath");
	static const char script[] =
		"import json, os, sys\n"
		"p = os.path.join(sys.argv[1], 'f003')\n"
		"fd = os.open(p, os.O_RDONLY); os.read(fd, 100000); os.close(fd)\n"
		"pid = os.fork()\n"
		"if pid == 0:\n"
		"    fd = os.open(p, os.O_RDONLY); n = len(os.read(fd, 100000)); os.close(fd)\n"
		"    print(json.dumps({'child': os.getpid(), 'bytes': n})); sys.stdout.flush(); os._exit(0)\n"
		"os.waitpid(pid, 0)\n";
	struct io_recs rs;
	struct sp_json *t = penv_python(&e, script, &rs);
	int child = (int)sp_json_i64(t, "child", 0);
	cr_assert_eq(sp_json_u64(t, "bytes", 0), io_t_iogen_size(3));
	char path[PATH_MAX + 8];
	snprintf(path, sizeof(path), "%s/f003", e.data);
	long opens = 0, others = 0;
	for (size_t i = 0; i < rs.n; i++) {
		const struct io_rec *r = &rs.v[i];
		if (r->pid != child || strcmp(r->kind, "open"))
			continue;
		if (r->path && !strcmp(r->path, path))
			opens++;
		else if (!r->path || !strncmp(r->path, e.data, strlen(e.data)))
			others++;
	}
	cr_expect_eq(opens, 1, "the child's open of %s: %ld records with that path", path, opens);
	cr_expect_eq(others, 0, "%ld opens in the child recorded with another or no path", others);
	uint64_t b;
	io_t_count(&rs, (struct io_filter){ .kind = "read", .prefix = path, .pid = child }, &b);
	cr_expect_eq(b, io_t_iogen_size(3), "child's read of %s: %llu bytes recorded", path, (unsigned long long)b);
	sp_json_free(t);
	io_t_free(&rs);
	penv_fini(&e);
}
