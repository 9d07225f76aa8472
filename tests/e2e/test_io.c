/*
 * test_io.c - input capture, end to end: iogen (tests/workloads/iogen.c) does
 * known numbers of stat/lstat/fstat/fstatat/statx, open/fopen, read/pread/
 * fread, close/fclose and directory listings on known files from 3 threads;
 * the trace, read back with `stepprof dump --json`, must hold exactly those
 * calls, bytes and paths: with the libc wrappers (LD_PRELOAD), and with the
 * eBPF collector (`stepprof run --bpf`, skipped where BPF is refused) without
 * counting anything twice. Also: loader waits on a pipe, errno kept,
 * STEPPROF_IO=off/bpf silencing the wrappers, and the collector's fd -> path
 * join when an fd number is reused while its close is still in flight.
 *
 * Ground truth comes from the workload: sizes are 1000 + 97*i bytes by
 * construction, call counts from its loop structure (computed here) and its
 * own counters (printed by it).
 */
#include "test_io_helpers.h"

#include <errno.h>

#define N_FILES 20
#define THREADS 3
#define LOOPS 2

struct io_env {
	char *tmp, *data, *trace, *iogen, *lib, *stepprof;
	char prefix[PATH_MAX];
};

static void env_init(struct io_env *e, const char *tag, int nfiles)
{
	e->tmp = sp_t_tmpdir(tag);
	e->iogen = io_t_abs("tests/bin/iogen");
	e->lib = io_t_abs("lib/libstepprof.so");
	e->stepprof = io_t_abs("bin/stepprof");
	if (asprintf(&e->data, "%s/data", e->tmp) < 0 || asprintf(&e->trace, "%s/trace", e->tmp) < 0)
		cr_assert_fail("asprintf");
	snprintf(e->prefix, sizeof(e->prefix), "%s/f", e->data);
	char n[16];
	snprintf(n, sizeof(n), "%d", nfiles);
	char *argv[] = { e->iogen, "setup", e->data, n, NULL };
	struct sp_t_result res;
	cr_assert_eq(sp_t_run(&res, argv, NULL, NULL, 60), 0, "iogen setup failed: %s", res.err);
	sp_t_result_free(&res);
}

static void env_fini(struct io_env *e)
{
	sp_t_rmrf(e->tmp);
	free(e->tmp), free(e->data), free(e->trace), free(e->iogen), free(e->lib), free(e->stepprof);
}

/* Run iogen with the preload; returns its ground truth. */
static struct sp_json *run_preloaded(struct io_env *e, char **args, const char *io_mode)
{
	char pre[PATH_MAX + 16], dir[PATH_MAX + 16], io[64];
	snprintf(pre, sizeof(pre), "LD_PRELOAD=%s", e->lib);
	snprintf(dir, sizeof(dir), "STEPPROF_DIR=%s", e->trace);
	snprintf(io, sizeof(io), "STEPPROF_IO=%s", io_mode);
	char *env[] = { pre, dir, io, NULL };
	struct sp_t_result res;
	int st = sp_t_run(&res, args, env, NULL, 120);
	cr_assert_eq(st, 0, "iogen under the preload exited %d: %s", st, res.err);
	struct sp_json *t = io_t_truth(res.out);
	sp_t_result_free(&res);
	return t;
}

/*
 * `stepprof run --bpf ... -- iogen ...` (args), which must succeed: iogen's ground truth. Where the
 * collector is refused here (no BPF rights, old kernel) the test is skipped, saying why.
 */
static struct sp_json *bpf_run(struct io_env *e, char **args, int timeout_s)
{
	struct sp_t_result res;
	int st = sp_t_run(&res, args, NULL, NULL, timeout_s);
	cr_assert_eq(st, 0, "stepprof run --bpf exited %d: %s", st, res.err);
	if (strstr(res.err, "eBPF collector unavailable")) {
		char why[512];
		snprintf(why, sizeof(why), "BPF refused here: %s", strstr(res.err, "eBPF collector unavailable"));
		why[strcspn(why, "\n")] = '\0';
		sp_t_result_free(&res);
		env_fini(e);
		cr_skip_test("%s", why);
	}
	struct sp_json *t = io_t_truth(res.out);
	sp_t_result_free(&res);
	return t;
}

/*
 * An eBPF test's start: skipped, saying why, where BPF is refused; else
 * env_init(e, tag, nfiles) and `stepprof run --bpf -- iogen MODE DIR ARG`,
 * which must succeed: iogen's ground truth.
 */
static struct sp_json *bpf_iogen(struct io_env *e, const char *tag, int nfiles, const char *mode, const char *arg)
{
	const char *why;
	if (!io_t_bpf_possible(&why))
		cr_skip_test("eBPF mode not tested: %s", why);
	env_init(e, tag, nfiles);
	char *args[] = { e->stepprof, "run", "--bpf", "-o", e->trace, "--", e->iogen, (char *)mode, e->data,
			 (char *)arg, NULL };
	return bpf_run(e, args, 30);
}

static long tnum(const struct sp_json *t, const char *key)
{
	return (long)sp_json_i64(t, key, -1);
}

/* Read calls of iogen's 512-byte loop over one file of `size` bytes: full and partial chunks, then EOF. */
static long read_calls_for(uint64_t size)
{
	return (long)((size + 511) / 512) + 1;
}

Test(io, libc_wrappers_record_every_call_exactly, .timeout = 180)
{
	struct io_env e;
	env_init(&e, "io-libc", N_FILES);
	char *args[] = { e.iogen, "run", e.data, "20", "3", "2", NULL };
	struct sp_json *t = run_preloaded(&e, args, "libc");
	struct io_recs rs;
	io_t_load_dir(e.trace, &rs);
	cr_assert_gt(rs.files, 0, "no trace file in %s", e.trace);

	/* What the workload's structure implies, independently of its counters. */
	const long per_file = THREADS * LOOPS * N_FILES;
	uint64_t sum_sizes = 0;
	long reads_per_round = 0;
	for (int i = 0; i < N_FILES; i++) {
		sum_sizes += io_t_iogen_size(i);
		reads_per_round += read_calls_for(io_t_iogen_size(i));
	}
	const char *p = e.prefix;
	static const char *const stats[] = { "stat", "lstat", "fstat", "fstatat", "statx" };
	for (size_t k = 0; k < 5; k++) {
		long n = io_t_count(&rs, (struct io_filter){ .kind = "stat", .api = stats[k], .prefix = p }, NULL);
		cr_expect_eq(n, per_file, "%s: %ld records, the workload made %ld", stats[k], n, per_file);
		cr_expect_eq(n, tnum(t, stats[k]), "%s: %ld records, iogen counted %ld", stats[k], n, tnum(t, stats[k]));
	}
	cr_expect_eq(io_t_count(&rs, (struct io_filter){ .kind = "open", .api = "open", .prefix = p }, NULL), per_file);
	cr_expect_eq(io_t_count(&rs, (struct io_filter){ .kind = "open", .api = "fopen", .prefix = p }, NULL), per_file);
	cr_expect_eq(io_t_count(&rs, (struct io_filter){ .kind = "open", .prefix = p }, NULL), 2 * per_file,
		     "opens other than open/fopen were recorded (double counting?)");
	cr_expect_eq(io_t_count(&rs, (struct io_filter){ .kind = "close", .api = "close", .prefix = p }, NULL), per_file);
	cr_expect_eq(io_t_count(&rs, (struct io_filter){ .kind = "close", .api = "fclose", .prefix = p }, NULL),
		     per_file);

	uint64_t b;
	long n = io_t_count(&rs, (struct io_filter){ .kind = "read", .api = "read", .prefix = p, .fd_type = "file" }, &b);
	cr_expect_eq(n, THREADS * LOOPS * reads_per_round);
	cr_expect_eq(n, tnum(t, "read_calls"));
	cr_expect_eq(b, THREADS * LOOPS * sum_sizes, "read: %llu bytes recorded, %llu read", (unsigned long long)b,
		     (unsigned long long)(THREADS * LOOPS * sum_sizes));
	n = io_t_count(&rs, (struct io_filter){ .kind = "read", .api = "pread", .prefix = p }, &b);
	cr_expect_eq(n, per_file);
	cr_expect_eq(b, (uint64_t)per_file * 64);
	n = io_t_count(&rs, (struct io_filter){ .kind = "read", .api = "fread", .prefix = p }, &b);
	cr_expect_eq(n, tnum(t, "fread_calls"));
	cr_expect_eq(b, THREADS * LOOPS * sum_sizes);
	cr_expect_eq(io_t_count(&rs, (struct io_filter){ .kind = "read", .prefix = p }, NULL),
		     tnum(t, "read_calls") + tnum(t, "pread_calls") + tnum(t, "fread_calls"));

	/* Each file by name (the fd -> path join of read, fstat and close): its own counts and bytes. */
	for (int i = 0; i < N_FILES; i++) {
		char f[PATH_MAX + 8];
		snprintf(f, sizeof(f), "%s%03d", p, i);
		struct io_filter ff = { .prefix = f };
		ff.kind = "open";
		cr_expect_eq(io_t_count(&rs, ff, NULL), 2 * THREADS * LOOPS, "%s: opens", f);
		ff.kind = "close";
		cr_expect_eq(io_t_count(&rs, ff, NULL), 2 * THREADS * LOOPS, "%s: closes", f);
		ff.kind = "stat";
		cr_expect_eq(io_t_count(&rs, ff, NULL), 5 * THREADS * LOOPS, "%s: stats", f);
		ff.kind = "read";
		ff.api = "read";
		n = io_t_count(&rs, ff, &b);
		cr_expect_eq(n, THREADS * LOOPS * read_calls_for(io_t_iogen_size(i)), "%s: read calls", f);
		cr_expect_eq(b, THREADS * LOOPS * io_t_iogen_size(i), "%s: read bytes", f);
		ff.api = "fread";
		io_t_count(&rs, ff, &b);
		cr_expect_eq(b, THREADS * LOOPS * io_t_iogen_size(i), "%s: fread bytes", f);
	}

	/* Every record: the right pid, source libc, stat bytes = the file's size, a path under the data dir. */
	int pid = (int)tnum(t, "pid"), tids[8] = { 0 }, ntids = 0;
	for (size_t i = 0; i < rs.n; i++) {
		struct io_rec *r = &rs.v[i];
		if (!r->path || strncmp(r->path, p, strlen(p)))
			continue;
		cr_expect_eq(r->pid, pid);
		cr_expect_str_eq(r->source, "libc");
		if (!strcmp(r->kind, "stat")) {
			int idx = atoi(r->path + strlen(p));
			cr_expect_eq(r->bytes, io_t_iogen_size(idx), "%s %s: st_size %llu, file has %llu", r->api, r->path,
				     (unsigned long long)r->bytes, (unsigned long long)io_t_iogen_size(idx));
		}
		if (!strcmp(r->kind, "read") || !strcmp(r->kind, "close"))
			cr_expect_str_eq(r->fd_type, "file");
		int seen = 0;
		for (int k = 0; k < ntids; k++)
			seen |= tids[k] == r->tid;
		if (!seen && ntids < 8)
			tids[ntids++] = r->tid;
	}
	cr_expect_eq(ntids, THREADS, "records from %d threads, the workload used %d", ntids, THREADS);

	/* One listing per thread; count = bytes of dirent64 entries: 24 each for names of 1..4 chars. */
	n = io_t_count(&rs, (struct io_filter){ .kind = "listdir", .prefix = e.data }, NULL);
	cr_expect_eq(n, tnum(t, "listdir"));
	for (size_t i = 0; i < rs.n; i++)
		if (!strcmp(rs.v[i].kind, "listdir") && rs.v[i].path && !strcmp(rs.v[i].path, e.data))
			cr_expect_eq(rs.v[i].count, (uint64_t)(tnum(t, "dirents") / THREADS) * 24);

	io_t_free(&rs);
	sp_json_free(t);
	env_fini(&e);
}

Test(io, plain_stat_calls_bind_to_glibc_2_33_and_are_wrapped)
{
	if (access("/usr/bin/objdump", X_OK) != 0)
		cr_skip_test("objdump not installed");
	char *iogen = io_t_abs("tests/bin/iogen"), *lib = io_t_abs("lib/libstepprof.so");
	char *a1[] = { "/usr/bin/objdump", "-T", iogen, NULL };
	struct sp_t_result res;
	cr_assert_eq(sp_t_run(&res, a1, NULL, NULL, 30), 0);
	/* The workload binds the 2.33 names (so the counting test above exercises them)... */
	cr_expect_not_null(strstr(res.out, "GLIBC_2.33"), "iogen does not bind stat@GLIBC_2.33: %s", res.out);
	sp_t_result_free(&res);
	/* ...and the library defines each of them, plus the pre-2.33 entry points. */
	char *a2[] = { "/usr/bin/objdump", "-T", lib, NULL };
	cr_assert_eq(sp_t_run(&res, a2, NULL, NULL, 30), 0);
	static const char *const names[] = { " stat\n", " lstat\n", " fstat\n", " fstatat\n", " statx\n", " stat64\n",
					     " __xstat\n", " __fxstat\n", " __lxstat\n", " __fxstatat\n" };
	for (size_t i = 0; i < sizeof(names) / sizeof(names[0]); i++)
		cr_expect_not_null(strstr(res.out, names[i]), "libstepprof.so does not export%.*s", (int)strlen(names[i]) - 1,
				   names[i]);
	sp_t_result_free(&res);
	free(iogen), free(lib);
}

Test(io, pipe_waits_are_loader_waits, .timeout = 60)
{
	struct io_env e;
	env_init(&e, "io-pipe", 1);
	char *args[] = { e.iogen, "pipe", "3", "50", NULL };
	struct sp_json *t = run_preloaded(&e, args, "auto");
	struct io_recs rs;
	io_t_load_dir(e.trace, &rs);
	int pid = (int)tnum(t, "pid");
	long polls = io_t_count(&rs, (struct io_filter){ .kind = "loader_wait", .api = "poll", .pid = pid, .fd_type = "pipe" }, NULL);
	cr_expect_eq(polls, tnum(t, "polls"));
	uint64_t b;
	long reads = io_t_count(&rs, (struct io_filter){ .kind = "loader_wait", .api = "read", .pid = pid, .fd_type = "pipe" }, &b);
	cr_expect_eq(reads, tnum(t, "reads"));
	cr_expect_eq(b, (uint64_t)tnum(t, "bytes"));
	/* A read on a pipe is a wait for a batch, never file input. */
	cr_expect_eq(io_t_count(&rs, (struct io_filter){ .kind = "read", .fd_type = "pipe" }, NULL), 0);
	/* The writer sleeps 50 ms before each batch, so the main thread spends most of
	 * the 150 ms in poll; half of it is a bound a loaded machine still meets. */
	uint64_t polled = 0;
	for (size_t i = 0; i < rs.n; i++)
		if (!strcmp(rs.v[i].kind, "loader_wait") && !strcmp(rs.v[i].api, "poll"))
			polled += rs.v[i].end - rs.v[i].begin;
	cr_expect_geq(polled, 75000000ull, "%llu ns in poll, the batches came over 150 ms", (unsigned long long)polled);
	cr_expect_leq(polled, (uint64_t)tnum(t, "elapsed_ns"), "more time in poll than the workload ran");
	io_t_free(&rs);
	sp_json_free(t);
	env_fini(&e);
}

Test(io, failed_open_is_recorded_and_errno_kept, .timeout = 60)
{
	struct io_env e;
	env_init(&e, "io-errno", 1);
	char missing[PATH_MAX + 16], pre[PATH_MAX + 16], dir[PATH_MAX + 16];
	snprintf(missing, sizeof(missing), "%s/no-such-file", e.data);
	snprintf(pre, sizeof(pre), "LD_PRELOAD=%s", e.lib);
	snprintf(dir, sizeof(dir), "STEPPROF_DIR=%s", e.trace);
	char *env[] = { pre, dir, NULL };
	char *args[] = { "/bin/cat", missing, NULL };
	struct sp_t_result res;
	cr_expect_eq(sp_t_run(&res, args, env, NULL, 30), 1);
	/* cat's message comes from errno after the wrapped open: it must still be ENOENT. */
	cr_expect_not_null(strstr(res.err, strerror(ENOENT)), "cat said: %s", res.err);
	sp_t_result_free(&res);
	struct io_recs rs;
	io_t_load_dir(e.trace, &rs);
	int found = 0;
	for (size_t i = 0; i < rs.n; i++)
		if (!strcmp(rs.v[i].kind, "open") && rs.v[i].path && !strcmp(rs.v[i].path, missing)) {
			found++;
			cr_expect_eq(rs.v[i].result, -ENOENT);
			cr_expect_eq(rs.v[i].fd, -1);
		}
	cr_expect_eq(found, 1, "%d open records of %s", found, missing);
	io_t_free(&rs);
	env_fini(&e);
}

Test(io, stepprof_io_off_and_bpf_silence_the_file_wrappers, .timeout = 120)
{
	static const char *const modes[] = { "off", "bpf" };
	for (int m = 0; m < 2; m++) {
		struct io_env e;
		env_init(&e, "io-off", 5);
		char *args[] = { e.iogen, "run", e.data, "5", "3", "1", NULL };
		struct sp_json *t = run_preloaded(&e, args, modes[m]);
		cr_expect_eq(tnum(t, "open"), 15, "the workload itself must run normally");
		struct io_recs rs;
		io_t_load_dir(e.trace, &rs);
		cr_expect_eq(io_t_count(&rs, (struct io_filter){ .prefix = e.data }, NULL), 0,
			     "STEPPROF_IO=%s: the libc wrappers recorded file I/O", modes[m]);
		io_t_free(&rs);
		sp_json_free(t);
		env_fini(&e);
	}
}

Test(io, bpf_collector_records_every_call_once, .timeout = 180)
{
	const char *why;
	if (!io_t_bpf_possible(&why))
		cr_skip_test("eBPF mode not tested: %s", why);
	struct io_env e;
	env_init(&e, "io-bpf", N_FILES);
	char *args[] = { e.stepprof, "run", "--bpf", "-o", e.trace, "--", e.iogen, "run", e.data, "20", "3", "2", NULL };
	struct sp_json *t = bpf_run(&e, args, 120);
	struct io_recs rs;
	io_t_load_dir(e.trace, &rs);
	const char *p = e.prefix;

	/* No double counting: the libc wrappers stood down for file I/O. */
	cr_expect_eq(io_t_count(&rs, (struct io_filter){ .prefix = p, .source = "libc" }, NULL), 0);
	cr_expect_eq(io_t_count(&rs, (struct io_filter){ .kind = "open", .prefix = p, .source = "bpf" }, NULL),
		     tnum(t, "open") + tnum(t, "fopen"));
	cr_expect_eq(io_t_count(&rs, (struct io_filter){ .kind = "close", .prefix = p, .source = "bpf" }, NULL),
		     tnum(t, "close") + tnum(t, "fclose"));
	uint64_t b;
	io_t_count(&rs, (struct io_filter){ .kind = "read", .prefix = p, .source = "bpf" }, &b);
	cr_expect_eq(b, (uint64_t)(tnum(t, "read_bytes") + tnum(t, "pread_bytes") + tnum(t, "fread_bytes")),
		     "bytes read by syscalls %llu", (unsigned long long)b);
	/* Syscall level: stdio's first fread of each stream adds exactly one fstat (to size its buffer). */
	long stats = io_t_count(&rs, (struct io_filter){ .kind = "stat", .prefix = p, .source = "bpf" }, NULL);
	long calls = tnum(t, "stat") + tnum(t, "lstat") + tnum(t, "fstat") + tnum(t, "fstatat") + tnum(t, "statx");
	cr_expect_eq(stats, calls + tnum(t, "fopen"), "%ld stat syscalls for %ld stat calls and %ld streams", stats,
		     calls, tnum(t, "fopen"));
	/* Each file by name: its stats carry its size; read() and pread() are one syscall each. */
	for (int i = 0; i < N_FILES; i++) {
		char f[PATH_MAX + 8];
		snprintf(f, sizeof(f), "%s%03d", p, i);
		for (size_t k = 0; k < rs.n; k++)
			if (rs.v[k].path && !strcmp(rs.v[k].path, f) && !strcmp(rs.v[k].kind, "stat"))
				cr_expect_eq(rs.v[k].bytes, io_t_iogen_size(i), "%s: %s says size %llu", f, rs.v[k].api,
					     (unsigned long long)rs.v[k].bytes);
		cr_expect_eq(io_t_count(&rs, (struct io_filter){ .kind = "open", .prefix = f, .source = "bpf" }, NULL),
			     2 * THREADS * LOOPS, "%s: opens", f);
		uint64_t fb;
		io_t_count(&rs, (struct io_filter){ .kind = "read", .prefix = f, .source = "bpf" }, &fb);
		cr_expect_eq(fb, (uint64_t)THREADS * LOOPS * (2 * io_t_iogen_size(i) + 64), "%s: bytes read", f);
	}
	long n = io_t_count(&rs, (struct io_filter){ .kind = "read", .api = "sys_pread64", .prefix = p, .source = "bpf" }, &b);
	cr_expect_eq(n, tnum(t, "pread_calls"));
	cr_expect_eq(b, (uint64_t)tnum(t, "pread_bytes"));
	int pid = (int)tnum(t, "pid");
	for (size_t i = 0; i < rs.n; i++)
		if (rs.v[i].path && !strncmp(rs.v[i].path, p, strlen(p)))
			cr_expect_eq(rs.v[i].pid, pid, "a record of pid %d, the workload is %d", rs.v[i].pid, pid);
	io_t_free(&rs);
	sp_json_free(t);
	env_fini(&e);
}

/*
 * The flake of the test above, made certain: a close frees its fd number in the
 * middle of the call, so another thread's open can get the number and return
 * before the close does. The collector sees the calls in the order they return
 * and must not let the late close erase the new file's fd -> path entry (and
 * name the closed socket with the new file's path): every later read of the
 * file would have no path. iogen reuse holds the close for ~1 s (a lingering socket).
 */
Test(io, bpf_fd_reused_while_its_close_is_in_flight, .timeout = 60)
{
	struct io_env e;
	struct sp_json *t = bpf_iogen(&e, "io-reuse", 1, "reuse", "1");
	/* The workload made the race: same number, the open returned while the close was still in the kernel. */
	cr_assert_eq(tnum(t, "fd"), tnum(t, "socket_fd"), "the open did not reuse the socket's fd");
	cr_assert_eq(tnum(t, "overlapped"), 1, "the open returned after the close: no race to test");
	struct io_recs rs;
	io_t_load_dir(e.trace, &rs);
	char f[PATH_MAX + 8];
	snprintf(f, sizeof(f), "%s000", e.prefix);
	int pid = (int)tnum(t, "pid");
	long fd = tnum(t, "fd");

	/* Every call on the file after the close returned still carries its path. */
	struct io_filter ff = { .prefix = f, .source = "bpf", .pid = pid };
	ff.kind = "open";
	cr_expect_eq(io_t_count(&rs, ff, NULL), 1, "opens of %s", f);
	uint64_t b;
	ff.kind = "stat";
	cr_expect_eq(io_t_count(&rs, ff, &b), tnum(t, "fstat"), "fstat of the reused fd: no path");
	cr_expect_eq(b, io_t_iogen_size(0), "fstat says size %llu", (unsigned long long)b);
	ff.kind = "read";
	ff.api = "sys_read";
	cr_expect_eq(io_t_count(&rs, ff, &b), tnum(t, "read_calls"), "reads of the reused fd: no path");
	cr_expect_eq(b, (uint64_t)tnum(t, "read_bytes"));
	cr_expect_eq(b, io_t_iogen_size(0));
	ff.api = "sys_pread64";
	cr_expect_eq(io_t_count(&rs, ff, &b), tnum(t, "pread_calls"));
	cr_expect_eq(b, (uint64_t)tnum(t, "pread_bytes"));
	ff.api = NULL;
	ff.kind = "close";
	ff.fd_type = "file";
	cr_expect_eq(io_t_count(&rs, ff, NULL), 1, "the file's own close");

	/* The socket's close is the socket's: never named after the file that took its number. */
	long sock_closes = 0;
	for (size_t i = 0; i < rs.n; i++) {
		struct io_rec *r = &rs.v[i];
		if (r->pid != pid || strcmp(r->kind, "close") || strcmp(r->fd_type, "socket") || r->fd != fd)
			continue;
		sock_closes++;
		cr_expect(!r->path || strcmp(r->path, f), "the socket's close is recorded with the path %s", r->path);
	}
	cr_expect_eq(sock_closes, 1, "%ld closes of the socket recorded", sock_closes);
	io_t_free(&rs);
	sp_json_free(t);
	env_fini(&e);
}

Test(io, select_epoll_and_recv_on_sockets_are_loader_waits, .timeout = 60)
{
	if (access("/usr/bin/python3", X_OK) != 0)
		cr_skip_test("/usr/bin/python3 not installed");
	struct io_env e;
	env_init(&e, "io-sock", 1);
	/* A worker thread sends 3 batches of 64 bytes, 30 ms apart; the main thread
	 * waits for each with select, epoll and poll-free recv in turn. */
	static const char script[] =
		"import json, os, select, socket, threading, time\n"
		"a, b = socket.socketpair()\n"
		"def worker():\n"
		"    for i in range(3):\n"
		"        time.sleep(0.03)\n"
		"        b.send(b'x' * 64)\n"
		"threading.Thread(target=worker).start()\n"
		"got = 0\n"
		"select.select([a], [], [])\n"
		"got += len(a.recv(64))\n"
		"ep = select.epoll()\n"
		"ep.register(a.fileno(), select.EPOLLIN)\n"
		"ep.poll()\n"
		"got += len(a.recv(64))\n"
		"got += len(a.recv(64))\n"
		"print(json.dumps({'recv_bytes': got, 'pid': os.getpid()}))\n";
	char *args[] = { "/usr/bin/python3", "-c", (char *)script, NULL };
	struct sp_json *t = run_preloaded(&e, args, "auto");
	int pid = (int)tnum(t, "pid");
	cr_assert_eq(tnum(t, "recv_bytes"), 192);
	struct io_recs rs;
	io_t_load_dir(e.trace, &rs);
	struct io_filter f = { .kind = "loader_wait", .pid = pid, .fd_type = "socket" };
	f.api = "select";
	cr_expect_eq(io_t_count(&rs, f, NULL), 1);
	f.api = "epoll_wait";
	cr_expect_eq(io_t_count(&rs, f, NULL), 1, "epoll_wait on an epoll fd that watches a socket");
	uint64_t b;
	f.api = "recv";
	cr_expect_eq(io_t_count(&rs, f, &b), 3);
	cr_expect_eq(b, 192);
	io_t_free(&rs);
	sp_json_free(t);
	env_fini(&e);
}

/*
 * fcntl(F_DUPFD_CLOEXEC) is how Python's os.dup copies an fd, fcntl64(F_DUPFD, n)
 * the name and command a program built with _FILE_OFFSET_BITS=64 may use: the
 * copies describe the file too. Unfollowed, every read, fstat and close through
 * such a copy would have no path, with the libc wrappers and the collector
 * alike (reads of os.dup'ed fds in a Python script: "path": null).
 */
static void check_dupfd(struct io_env *e, const struct sp_json *t, const char *source)
{
	struct io_recs rs;
	io_t_load_dir(e->trace, &rs);
	char f[PATH_MAX + 8];
	snprintf(f, sizeof(f), "%s000", e->prefix);
	int pid = (int)tnum(t, "pid");
	uint64_t b;
	struct io_filter ff = { .prefix = f, .source = source, .pid = pid, .kind = "read" };
	/* the reads of the first copy (to EOF) and the pread of the second */
	cr_expect_eq(io_t_count(&rs, ff, &b), tnum(t, "read_calls") + 1, "%s: reads through the copies named %s",
		     source, f);
	cr_expect_eq(b, (uint64_t)(tnum(t, "read_bytes") + tnum(t, "pread_bytes")));
	ff.kind = "stat";
	cr_expect_eq(io_t_count(&rs, ff, &b), 1, "%s: the fstat of the F_DUPFD copy", source);
	cr_expect_eq(b, io_t_iogen_size(0));
	ff.kind = "close";
	cr_expect_eq(io_t_count(&rs, ff, NULL), 3, "%s: the closes of the fd and its two copies", source);
	/* and nothing of that process on those fds went unnamed */
	long unnamed = 0;
	for (size_t i = 0; i < rs.n; i++) {
		const struct io_rec *r = &rs.v[i];
		if (r->pid == pid && !r->path && !strcmp(r->source, source) &&
		    (r->fd == tnum(t, "fd_cloexec") || r->fd == tnum(t, "fd_20")))
			unnamed++;
	}
	cr_expect_eq(unnamed, 0, "%s: %ld records on the copies without a path", source, unnamed);
	io_t_free(&rs);
}

Test(io, fd_copies_made_by_fcntl_keep_their_path_libc, .timeout = 60)
{
	struct io_env e;
	env_init(&e, "io-dupfd", 1);
	char *args[] = { e.iogen, "dupfd", e.data, "1", NULL };
	struct sp_json *t = run_preloaded(&e, args, "libc");
	check_dupfd(&e, t, "libc");
	sp_json_free(t);
	env_fini(&e);
}

Test(io, fd_copies_made_by_fcntl_keep_their_path_bpf, .timeout = 60)
{
	struct io_env e;
	struct sp_json *t = bpf_iogen(&e, "io-dupfd-bpf", 1, "dupfd", "1");
	check_dupfd(&e, t, "bpf");
	sp_json_free(t);
	env_fini(&e);
}

/*
 * A bad or NULL path, poll array or select set: the program gets its EFAULT back,
 * as without the preload. The wrappers read a path or an array only once the
 * kernel has read it (and not at all after EFAULT): otherwise open((char *)1), stat
 * (NULL) and eleven more crash the program (SIGSEGV, status 139). And
 * fstatat/statx(fd, NULL, AT_EMPTY_PATH), valid since Linux 6.11, are stats of fd.
 */
Test(io, bad_pointers_get_their_error_not_a_crash, .timeout = 60)
{
	struct io_env e;
	env_init(&e, "io-badptr", 1);
	char *args[] = { e.iogen, "badptr", e.data, "1", NULL };
	struct sp_t_result plain;
	cr_assert_eq(sp_t_run(&plain, args, NULL, NULL, 30), 0, "iogen badptr without the preload: %s", plain.err);
	struct sp_json *t = run_preloaded(&e, args, "libc"); /* asserts exit status 0 */
	struct sp_json *p = io_t_truth(plain.out);
	cr_assert(p && t);
	static const char *const calls[] = { "open_bad", "open_null", "openat_bad", "creat_bad", "fopen_bad",
					     "stat_bad", "stat_null", "lstat_bad", "fstatat_bad", "statx_bad",
					     "fstatat_fd_null", "statx_fd_null", "poll_bad", "select_bad" };
	for (size_t i = 0; i < sizeof(calls) / sizeof(calls[0]); i++) {
		char k[64];
		for (int j = 0; j < 2; j++) {
			snprintf(k, sizeof(k), "%s.%d", calls[i], j);
			struct sp_json *a = sp_json_path(p, k), *b = sp_json_path(t, k);
			cr_assert(a && b, "%s missing", k);
			cr_expect_eq(sp_json_i64(p, k, 99), sp_json_i64(t, k, 98), "%s: %lld without the preload, %lld with",
				     k, (long long)sp_json_i64(p, k, 99), (long long)sp_json_i64(t, k, 98));
		}
	}
	cr_expect_eq(sp_json_i64(p, "open_bad.1", 0), EFAULT, "the workload did not pass a bad pointer");
	/* the stats of fd with a NULL path name the fd's file */
	struct io_recs rs;
	io_t_load_dir(e.trace, &rs);
	char f[PATH_MAX + 8];
	snprintf(f, sizeof(f), "%s000", e.prefix);
	static const char *const fdstats[][2] = { { "fstatat", "fstatat_fd_null" }, { "statx", "statx_fd_null" } };
	for (int i = 0; i < 2; i++) {
		char k[64];
		snprintf(k, sizeof(k), "%s.0", fdstats[i][1]);
		if (sp_json_i64(t, k, -1) != 0)
			continue; /* a kernel before 6.11: EFAULT, nothing to name */
		uint64_t b;
		struct io_filter ff = { .kind = "stat", .api = fdstats[i][0], .prefix = f, .source = "libc" };
		cr_expect_eq(io_t_count(&rs, ff, &b), 1, "%s(fd, NULL, AT_EMPTY_PATH) is a stat of %s", fdstats[i][0], f);
		cr_expect_eq(b, io_t_iogen_size(0));
	}
	io_t_free(&rs);
	sp_json_free(p);
	sp_json_free(t);
	sp_t_result_free(&plain);
	env_fini(&e);
}

/*
 * A fork()ed child reading an fd its parent opened (a Dataset that opens its file
 * in __init__, read by the DataLoader workers): the child's records name that file.
 * The child's trace has string ids of its own while the fd table it inherits held
 * the parent's: its reads must not be named after whatever the child interned first
 * under the same id (here DIR/f001, which it stats first), nor have no path.
 */
Test(io, forked_child_names_the_fds_it_inherited, .timeout = 60)
{
	struct io_env e;
	env_init(&e, "io-forkfd", 2);
	char *args[] = { e.iogen, "forkfd", e.data, "2", NULL };
	char pre[PATH_MAX + 16], dir[PATH_MAX + 16];
	snprintf(pre, sizeof(pre), "LD_PRELOAD=%s", e.lib);
	snprintf(dir, sizeof(dir), "STEPPROF_DIR=%s", e.trace);
	char *env[] = { pre, dir, "STEPPROF_IO=libc", NULL };
	struct sp_t_result res;
	cr_assert_eq(sp_t_run(&res, args, env, NULL, 30), 0, "%s", res.err);
	/* two JSON lines: the child's, then the parent's */
	const char *nl = strchr(res.out, '\n');
	cr_assert(nl);
	char *first = strndup(res.out, (size_t)(nl - res.out));
	struct sp_json *kid = sp_json_parse(first), *t = io_t_truth(res.out);
	cr_assert(kid && t, "%s", res.out);
	cr_assert_eq(tnum(t, "child_status"), 0);
	int child = (int)tnum(t, "child");
	long fd = tnum(t, "fd");
	struct io_recs rs;
	io_t_load_dir(e.trace, &rs);
	char f0[PATH_MAX + 8];
	snprintf(f0, sizeof(f0), "%s000", e.prefix);
	uint64_t b;
	struct io_filter ff = { .kind = "read", .pid = child, .prefix = f0, .source = "libc" };
	cr_expect_eq(io_t_count(&rs, ff, &b), sp_json_i64(kid, "read_calls", -1) + 1, "the child's reads named %s", f0);
	cr_expect_eq(b, (uint64_t)(sp_json_i64(kid, "read_bytes", 0) + sp_json_i64(kid, "pread_bytes", 0)));
	ff.kind = "stat";
	cr_expect_eq(io_t_count(&rs, ff, &b), 1, "the child's fstat of the inherited fd");
	cr_expect_eq(b, io_t_iogen_size(0));
	ff.kind = "close";
	cr_expect_eq(io_t_count(&rs, ff, NULL), 1);
	/* and no record of the child on that fd names anything else */
	long wrong = 0;
	for (size_t i = 0; i < rs.n; i++) {
		const struct io_rec *r = &rs.v[i];
		if (r->pid == child && r->fd == fd && strcmp(r->kind, "open") && (!r->path || strcmp(r->path, f0)))
			wrong++;
	}
	cr_expect_eq(wrong, 0, "%ld records of the child on fd %ld name another file or none", wrong, fd);
	io_t_free(&rs);
	sp_json_free(kid);
	sp_json_free(t);
	free(first);
	sp_t_result_free(&res);
	env_fini(&e);
}

/* An open_memstream stream has no fd (its _fileno is 0): it must not be recorded as fd 0 (stdin). */
Test(io, a_memory_stream_is_not_stdin, .timeout = 60)
{
	struct io_env e;
	env_init(&e, "io-memstream", 1);
	char *args[] = { e.iogen, "memstream", e.data, "1", NULL };
	struct sp_json *t = run_preloaded(&e, args, "libc");
	cr_assert_eq(tnum(t, "stdin_read"), 5);
	struct io_recs rs;
	io_t_load_dir(e.trace, &rs);
	int pid = (int)tnum(t, "pid");
	struct io_filter ff = { .pid = pid, .api = "fread" };
	cr_expect_eq(io_t_count(&rs, ff, NULL), 0, "fread of a memory stream recorded");
	ff.api = "fclose";
	cr_expect_eq(io_t_count(&rs, ff, NULL), 0, "fclose of a memory stream recorded");
	/* stdin, a pipe, is still known as one */
	ff.api = "read";
	ff.kind = "loader_wait";
	ff.fd_type = "pipe";
	uint64_t b;
	cr_expect_eq(io_t_count(&rs, ff, &b), 1);
	cr_expect_eq(b, 5);
	io_t_free(&rs);
	sp_json_free(t);
	env_fini(&e);
}

/*
 * A descriptor that dies without close() (pclose, close_range: Python's
 * os.closerange, closefrom) and a number reused by a descriptor born of a call
 * that is not input (memfd_create, eventfd): the new one must not inherit the
 * dead one's entry: a memfd read after a pclose must not be a "loader_wait" on a
 * "pipe", nor reads of a memfd or an eventfd named after a closed file.
 */
Test(io, numbers_reused_after_pclose_or_close_range_are_not_the_dead_file, .timeout = 60)
{
	struct io_env e;
	env_init(&e, "io-stale", 1);
	char *args[] = { e.iogen, "stale", e.data, "1", NULL };
	struct sp_json *t = run_preloaded(&e, args, "libc");
	/* the workload reused each number, or the test proves nothing */
	cr_assert_eq(tnum(t, "memfd1"), tnum(t, "pipe_fd"));
	cr_assert_eq(tnum(t, "memfd2"), tnum(t, "file2"));
	cr_assert_eq(tnum(t, "eventfd3"), tnum(t, "file3"));
	struct io_recs rs;
	io_t_load_dir(e.trace, &rs);
	int pid = (int)tnum(t, "pid");
	/* An eventfd's read is not input (no record): one named after the dead file would be a `read`. */
	static const struct {
		const char *fd, *api, *type;
		long records;
	} cases[] = { { "memfd1", "pread", "file", 1 }, { "memfd2", "pread", "file", 1 }, { "eventfd3", "read", "other", 0 } };
	for (size_t k = 0; k < 3; k++) {
		long fd = tnum(t, cases[k].fd), n = 0;
		for (size_t i = 0; i < rs.n; i++) {
			const struct io_rec *r = &rs.v[i];
			if (r->pid != pid || r->fd != fd || strcmp(r->api, cases[k].api))
				continue;
			n++;
			cr_expect_str_eq(r->kind, "read", "%s: %s", cases[k].fd, r->kind);
			cr_expect_str_eq(r->fd_type, cases[k].type, "%s: type %s", cases[k].fd, r->fd_type);
			cr_expect_null(r->path, "%s is named %s, a file closed before it was born", cases[k].fd, r->path);
		}
		cr_expect_eq(n, cases[k].records, "%s: %ld %s records", cases[k].fd, n, cases[k].api);
	}
	io_t_free(&rs);
	sp_json_free(t);
	env_fini(&e);
}

/*
 * A vfork()ed child shares its parent's memory, thread state included: when its
 * calls (before exec) are not recorded, and the parent's are its own. Were they
 * the process's first records, the parent's trace file would be made from the
 * child (header ppid = the parent's own pid) and every later record of the
 * parent's thread would carry the child's tid.
 */
Test(io, a_vfork_child_does_not_take_over_the_parents_trace, .timeout = 60)
{
	struct io_env e;
	env_init(&e, "io-vfork", 2);
	char *args[] = { e.iogen, "vforkfirst", e.data, "2", NULL };
	struct sp_json *t = run_preloaded(&e, args, "libc");
	cr_assert_eq(tnum(t, "child_status"), 0);
	int pid = (int)tnum(t, "pid");
	struct io_recs rs;
	io_t_load_dir(e.trace, &rs);
	char f0[PATH_MAX + 8], f1[PATH_MAX + 8];
	snprintf(f0, sizeof(f0), "%s000", e.prefix);
	snprintf(f1, sizeof(f1), "%s001", e.prefix);
	long parent = 0, foreign_tid = 0;
	for (size_t i = 0; i < rs.n; i++) {
		const struct io_rec *r = &rs.v[i];
		if (r->pid != pid)
			continue;
		parent += r->path && !strcmp(r->path, f1);
		foreign_tid += r->tid != pid;
	}
	cr_expect_eq(parent, 1 + tnum(t, "read_calls") + 1, "the parent's open, reads and close of %s", f1);
	cr_expect_eq(foreign_tid, 0, "%ld records of the parent's only thread with another tid", foreign_tid);
	cr_expect_eq(io_t_count(&rs, (struct io_filter){ .prefix = f0 }, NULL), 0, "the vfork child's calls recorded");
	/* the file's header names the parent's parent */
	char *iargs[] = { e.stepprof, "info", "--json", e.trace, NULL };
	struct sp_t_result res;
	cr_assert_eq(sp_t_run(&res, iargs, NULL, NULL, 30), 0, "%s", res.err);
	struct sp_json *info = sp_json_parse(res.out);
	cr_assert(info);
	cr_expect_eq(sp_json_i64(info, "files.0.pid", -1), pid);
	cr_expect_eq(sp_json_i64(info, "files.0.ppid", -1), tnum(t, "ppid"), "header ppid");
	sp_json_free(info);
	sp_t_result_free(&res);
	io_t_free(&rs);
	sp_json_free(t);
	env_fini(&e);
}

/*
 * Descriptors the kernel closes without a close(): close_range (Python's
 * os.closerange, subprocess) and exec (the close-on-exec ones). The collector
 * kept their fd -> path entries, and the file-identity check does not help
 * where the fd was found in /proc at start (no identity) or where the new
 * file got the dead one's struct file address (the slab reuses it at once).
 * Otherwise the eventfd read on the number close_range freed, every memfd pread
 * (20 of 20) and the eventfd read after exec would be named DIR/f000.
 */
Test(io, bpf_fds_closed_by_close_range_or_exec_are_forgotten, .timeout = 60)
{
	const char *why;
	if (!io_t_bpf_possible(&why))
		cr_skip_test("eBPF mode not tested: %s", why);
	struct io_env e;
	env_init(&e, "io-closerange", 1);
	char f[PATH_MAX + 8];
	snprintf(f, sizeof(f), "%s000", e.prefix);
	/* fds 8 and 9 open on DIR/f000 from before the trace: the collector reads them from /proc */
	char *args[] = { "/bin/sh", "-c", "exec 8<\"$0\" 9<\"$0\"; exec \"$@\"", f, e.stepprof, "run", "--bpf", "-o",
			 e.trace, "--", e.iogen, "closerange", e.data, "20", NULL };
	struct sp_json *t = bpf_run(&e, args, 30);
	struct io_recs rs;
	io_t_load_dir(e.trace, &rs);
	int pid = (int)tnum(t, "pid");
	cr_assert_eq(tnum(t, "memfd_preads"), 20);
	cr_expect_eq(io_t_count(&rs, (struct io_filter){ .kind = "open", .prefix = f, .pid = pid }, NULL), 20,
		     "the opens of %s", f);
	/* The reads of the eventfds are not input (no record, docs/bpf.md): the close of the one on 9 is named or not. */
	static const struct {
		const char *fd, *kind, *api;
		long n;
	} cases[] = { { "range_fd", "close", "sys_close", 1 },
		      { "memfd", "read", "sys_pread64", 20 },
		      { "exec_fd", "read", "sys_read", 0 } };
	for (size_t k = 0; k < 3; k++) {
		long fd = tnum(t, cases[k].fd), n = 0, named = 0;
		for (size_t i = 0; i < rs.n; i++) {
			const struct io_rec *r = &rs.v[i];
			if (r->pid != pid || r->fd != fd || strcmp(r->kind, cases[k].kind) || strcmp(r->api, cases[k].api))
				continue;
			n++;
			named += r->path != NULL;
		}
		cr_expect_eq(n, cases[k].n, "%s (fd %ld): %ld %s records", cases[k].fd, fd, n, cases[k].api);
		cr_expect_eq(named, 0, "%s (fd %ld): %ld of %ld reads named after a closed file", cases[k].fd, fd, named, n);
	}
	io_t_free(&rs);
	sp_json_free(t);
	env_fini(&e);
}

/*
 * Paths the kernel side could not read whole (over 511 bytes: IOTRACE_F_PATH_CUT)
 * or at all (IOTRACE_F_PATH_FAULT) have no name: their first 511 bytes name
 * another file, or none. The 569-byte relative path must not be recorded as the
 * cwd + its first 511 bytes (nor its reads and close with it), and a chdir to a
 * cut path must not keep the old directory, which would name the open of
 * "deepfile" after it DIR/deepfile, a file that does not exist.
 */
Test(io, bpf_paths_cut_or_unreadable_are_not_recorded, .timeout = 60)
{
	struct io_env e;
	struct sp_json *t = bpf_iogen(&e, "io-longpath", 1, "longpath", "1");
	cr_assert_gt(tnum(t, "rel_len"), 511);
	cr_assert_gt(tnum(t, "dir_len"), 511);
	struct io_recs rs;
	io_t_load_dir(e.trace, &rs);
	int pid = (int)tnum(t, "pid");
	long cut = 0, unnamed_opens = 0, deep = 0;
	for (size_t i = 0; i < rs.n; i++) {
		const struct io_rec *r = &rs.v[i];
		if (r->pid != pid)
			continue;
		if (r->path && strstr(r->path, "LLLLLLLL"))
			cut++;
		if (r->path && strstr(r->path, "deepfile"))
			cr_expect_str_eq(r->path, "deepfile", "after a chdir to a cut path: %s %s", r->kind, r->path);
		deep += r->path && !strcmp(r->kind, "open") && !strcmp(r->path, "deepfile");
		unnamed_opens += !r->path && !strcmp(r->kind, "open") && r->result == 0;
	}
	cr_expect_eq(cut, 0, "%ld records named with a cut path", cut);
	/* and the create, for writing, is output: no record */
	cr_expect_eq(unnamed_opens, 2, "the opens by the long paths (relative, absolute) have no path: %ld",
		     unnamed_opens);
	cr_expect_eq(deep, 1, "the open after the chdir: relative, as given (%ld)", deep);
	io_t_free(&rs);
	sp_json_free(t);
	env_fini(&e);
}

/*
 * fstatat/statx(fd, NULL, AT_EMPTY_PATH), valid since Linux 6.11, are stats of
 * fd, as with "". The kernel side must not take the NULL for a path it could not
 * read, which would record both with fd -1 and no path.
 */
Test(io, bpf_stat_of_an_fd_with_a_null_path, .timeout = 60)
{
	struct io_env e;
	struct sp_json *t = bpf_iogen(&e, "io-nullpath-bpf", 1, "badptr", "1");
	struct io_recs rs;
	io_t_load_dir(e.trace, &rs);
	char f[PATH_MAX + 8];
	snprintf(f, sizeof(f), "%s000", e.prefix);
	static const char *const fdstats[][2] = { { "sys_newfstatat", "fstatat_fd_null" }, { "sys_statx", "statx_fd_null" } };
	int tested = 0;
	for (int i = 0; i < 2; i++) {
		char k[64];
		snprintf(k, sizeof(k), "%s.0", fdstats[i][1]);
		if (sp_json_i64(t, k, -1) != 0)
			continue; /* a kernel before 6.11: EFAULT */
		tested++;
		long n = 0;
		for (size_t j = 0; j < rs.n; j++) {
			const struct io_rec *r = &rs.v[j];
			if (r->pid != tnum(t, "pid") || strcmp(r->api, fdstats[i][0]) || !r->path || strcmp(r->path, f))
				continue;
			n++;
			cr_expect_eq(r->fd, tnum(t, "fd"), "%s(fd, NULL, AT_EMPTY_PATH): fd %lld", fdstats[i][0], (long long)r->fd);
			cr_expect_eq(r->bytes, io_t_iogen_size(0));
		}
		cr_expect_eq(n, 1, "%s(fd, NULL, AT_EMPTY_PATH) is a stat of %s: %ld records", fdstats[i][0], f, n);
	}
	if (!tested)
		printf("io::bpf_stat_of_an_fd_with_a_null_path: nothing to check: this kernel (< 6.11) refuses a NULL path\n");
	io_t_free(&rs);
	sp_json_free(t);
	env_fini(&e);
}

/*
 * With --bpf the preload still makes its own trace file in the trace directory:
 * its open, stats and close are stepprof's output, not the job's input, and the
 * collector drops records of paths in its -o directory: the opens and fstats
 * of DIR and of the preload's .sptrace (an fstat of fd 1000 with bytes = the
 * file's 1 GiB cap) are not the job's.
 */
Test(io, bpf_the_trace_directory_is_not_input, .timeout = 60)
{
	const char *why;
	if (!io_t_bpf_possible(&why))
		cr_skip_test("eBPF mode not tested: %s", why);
	struct io_env e;
	env_init(&e, "io-owndir", 1);
	/* a poll the wrappers record (the collector does not trace waits): the preload makes its file */
	char *args[] = { e.stepprof, "run", "--bpf", "-o", e.trace, "--", e.iogen, "pipe", "1", "1", NULL };
	struct sp_json *t = bpf_run(&e, args, 30);
	struct io_recs rs;
	io_t_load_dir(e.trace, &rs);
	cr_assert_eq(rs.files, 2, "the preload's trace file and the collector's in %s: %zu files", e.trace, rs.files);
	int pid = (int)tnum(t, "pid");
	cr_expect_eq(io_t_count(&rs, (struct io_filter){ .kind = "loader_wait", .api = "sys_read", .pid = pid }, NULL),
		     tnum(t, "reads"), "the job's own read of its pipe is there");
	long own = io_t_count(&rs, (struct io_filter){ .prefix = e.trace }, NULL);
	cr_expect_eq(own, 0, "%ld records of the trace directory %s", own, e.trace);
	long big = 0;
	for (size_t i = 0; i < rs.n; i++)
		big += !strcmp(rs.v[i].kind, "stat") && rs.v[i].bytes >= (1ull << 29);
	cr_expect_eq(big, 0, "%ld stats of a file of 512 MiB or more (the preload's trace file)", big);
	io_t_free(&rs);
	sp_json_free(t);
	env_fini(&e);
}

/*
 * The paths the collector makes absolute are lexically normal: "." and ".." are
 * resolved by name, repeated slashes folded. The working directory was kept as
 * text: chdir("sub") then chdir("..") 20 times gave 20 names for DIR/f000
 * (DIR/sub/../f000, DIR/sub/../sub/../f000, ...), and an openat relative to a
 * directory fd or an absolute path with "//" and "." names of their own.
 */
Test(io, bpf_dot_and_dotdot_are_resolved, .timeout = 60)
{
	struct io_env e;
	struct sp_json *t = bpf_iogen(&e, "io-dotdot", 1, "dotdot", "20");
	struct io_recs rs;
	io_t_load_dir(e.trace, &rs);
	int pid = (int)tnum(t, "pid");
	char f[PATH_MAX + 8];
	snprintf(f, sizeof(f), "%s000", e.prefix);
	long exact = 0, other = 0;
	for (size_t i = 0; i < rs.n; i++) {
		const struct io_rec *r = &rs.v[i];
		if (r->pid != pid || !r->path || strncmp(r->path, e.data, strlen(e.data)))
			continue;
		if (!strcmp(r->kind, "open") && !strcmp(r->path, f))
			exact++;
		if (strstr(r->path, "/../") || strstr(r->path, "/./") || strstr(r->path, "//")) {
			other++;
			cr_expect(other > 3, "not normal: %s %s", r->kind, r->path);
		}
	}
	cr_expect_eq(exact, tnum(t, "opens"), "%ld opens named %s, the workload made %ld", exact, f, tnum(t, "opens"));
	cr_expect_eq(other, 0, "%ld records named with \".\", \"..\" or \"//\"", other);
	io_t_free(&rs);
	sp_json_free(t);
	env_fini(&e);
}

/*
 * fchdir to a directory fd whose path the collector does not know (received over
 * SCM_RIGHTS) makes the working directory unknown: later relative paths are
 * recorded as given. Keeping the old directory would record the open of "data"
 * in DIR/two as DIR/one/data, another file.
 */
Test(io, bpf_fchdir_to_an_unknown_directory, .timeout = 60)
{
	struct io_env e;
	struct sp_json *t = bpf_iogen(&e, "io-fchdir", 1, "fchdirfd", "1");
	struct io_recs rs;
	io_t_load_dir(e.trace, &rs);
	int pid = (int)tnum(t, "pid");
	char one[PATH_MAX + 16];
	snprintf(one, sizeof(one), "%s/one/data", e.data);
	long made = 0, wrong = 0, rel = 0;
	for (size_t i = 0; i < rs.n; i++) {
		const struct io_rec *r = &rs.v[i];
		if (r->pid != pid || !r->path)
			continue;
		/* the workload opens DIR/one/data once, to write it (output: no record); it reads only DIR/two/data */
		made += !strcmp(r->path, one) && !strcmp(r->kind, "open");
		wrong += !strcmp(r->path, one) && !strcmp(r->kind, "read");
		rel += !strcmp(r->path, "data") && (!strcmp(r->kind, "open") || !strcmp(r->kind, "read"));
	}
	cr_expect_eq(made, 0, "%ld opens of %s, the workload made 1, to write it (not input)", made, one);
	cr_expect_eq(wrong, 0, "%ld reads of %s, which the workload never read", wrong, one);
	cr_expect_eq(rel, 2, "the open and read of \"data\" after fchdir: recorded as given (%ld)", rel);
	io_t_free(&rs);
	sp_json_free(t);
	env_fini(&e);
}

/* The records of pid's thread tid (0: any) with this api on pipe fd, in time order (the first max in out). */
static size_t io_t_pipe_calls(const struct io_recs *rs, int pid, int tid, const char *api, long fd,
			      const struct io_rec **out, size_t max)
{
	size_t n = 0;
	for (size_t i = 0; i < rs->n; i++) {
		const struct io_rec *r = &rs->v[i];
		if (r->pid != pid || (tid && r->tid != tid) || strcmp(r->api, api) || r->fd != fd ||
		    strcmp(r->fd_type, "pipe"))
			continue;
		if (n < max) {
			size_t j = n;
			for (; j > 0 && out[j - 1]->begin > r->begin; j--)
				out[j] = out[j - 1];
			out[j] = r;
		}
		n++;
	}
	return n;
}

/*
 * A syscall interrupted by a signal returns a kernel-internal -ERESTART* code
 * at its exit; the program sees -EINTR, or the kernel runs the call again
 * (SA_RESTART, or no handler). A restart is one record from the first entry to
 * the last exit, as the libc wrappers record it, not two (-512, then the
 * restart); the part the program saw fail is -EINTR, not -512 (ERESTARTSYS);
 * and a call left interrupted by a killed process is recorded (-EINTR).
 */
Test(io, bpf_calls_interrupted_by_signals, .timeout = 60)
{
	struct io_env e;
	struct sp_json *t = bpf_iogen(&e, "io-eintr", 1, "eintr", "1");
	cr_assert_eq(tnum(t, "read1"), 1);
	cr_assert_eq(tnum(t, "read2"), -1);
	cr_assert_eq(tnum(t, "errno2"), EINTR);
	cr_assert_eq(tnum(t, "child_killed"), 1);
	struct io_recs rs;
	io_t_load_dir(e.trace, &rs);
	int pid = (int)tnum(t, "pid");
	uint64_t h1 = (uint64_t)sp_json_u64(t, "handled1", 0), h3 = (uint64_t)sp_json_u64(t, "handled3", 0);
	const struct io_rec *v[8];

	/* 1 and 2: the pipe reads of the main thread: restarted (1 byte), EINTR, read again (1 byte) */
	size_t n = io_t_pipe_calls(&rs, pid, pid, "sys_read", tnum(t, "pipe_fd"), v, 8);
	cr_expect_eq(n, 3, "%zu reads of the pipe recorded, the program made 3 (one restarted by the kernel)", n);
	for (size_t i = 0; i < n && i < 8; i++)
		cr_expect(v[i]->result > -512 || v[i]->result < -516, "a read recorded with result %lld",
			  (long long)v[i]->result);
	if (n == 3) {
		cr_expect(v[0]->result == 0 && v[0]->bytes == 1, "the restarted read: result %lld, %llu bytes",
			  (long long)v[0]->result, (unsigned long long)v[0]->bytes);
		cr_expect(v[0]->begin < h1 && v[0]->end > h1, "the restarted read is one call from its first entry");
		cr_expect_eq(v[1]->result, -EINTR, "the read without SA_RESTART: %lld", (long long)v[1]->result);
		cr_expect(v[2]->result == 0 && v[2]->bytes == 1);
	}
	/* 3: the FIFO open, restarted: one open */
	char fifo[PATH_MAX + 8];
	snprintf(fifo, sizeof(fifo), "%s/fifo", e.data);
	long opens = 0;
	for (size_t i = 0; i < rs.n; i++) {
		const struct io_rec *r = &rs.v[i];
		if (r->pid != pid || r->tid != pid || strcmp(r->kind, "open") || !r->path || strcmp(r->path, fifo))
			continue;
		opens++;
		cr_expect_eq(r->result, 0, "an open of the FIFO recorded with result %lld", (long long)r->result);
		cr_expect_eq(r->fd, tnum(t, "fifo_fd"));
		cr_expect(r->begin < h3 && r->end > h3, "the restarted open is one call from its first entry");
	}
	cr_expect_eq(opens, 1, "%ld opens of the FIFO by the main thread, the program made 1", opens);
	/* 4: the killed child's read: recorded, as interrupted */
	n = io_t_pipe_calls(&rs, (int)tnum(t, "child"), 0, "sys_read", tnum(t, "child_fd"), v, 8);
	cr_expect_eq(n, 1, "%zu reads of the killed child", n);
	if (n == 1)
		cr_expect_eq(v[0]->result, -EINTR, "the killed child's read: %lld", (long long)v[0]->result);
	io_t_free(&rs);
	sp_json_free(t);
	env_fini(&e);
}
