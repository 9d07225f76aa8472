/*
 * test_bpf.c - end-to-end tests of the eBPF input collector, build/bin/stepprof-bpf.
 *
 * Each test starts a job the way `stepprof run` does: the job is forked and
 * waits on a pipe, the collector is started with --pid, the job is released
 * once the collector prints "ready". The collector's trace file is then read
 * with `stepprof dump --json`, and compared with what the job did: bpfgen
 * (tests/workloads/bpfgen.c) reads files the test made, of sizes it chose.
 *
 *   1. the harness: files, the job, the collector, the dump
 *   2. tests: exact counts/bytes/paths/pids from 3 threads; a forked and exec'd
 *      child followed; exit on SIGTERM; one-line errors (bad pid, not root)
 *
 * Every test that needs BPF skips with the collector's own reason when BPF is
 * refused (not root, no BTF, verifier), or when the collector was not built.
 */
#include <criterion/criterion.h>

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "testlib.h"

/* ------------------------------------------------------------ 1. harness */

#define NFILES 12
#define BUF    1000 /* bpfgen's read size */

/* Sizes chosen to hit the edges of the read loop: empty, exact multiples, one byte over. */
static size_t file_size(int i)
{
	static const size_t sizes[NFILES] = {0, 1, 999, 1000, 1001, 2000, 4096, 12345, 100, 3000, 7777, 65536};
	return sizes[i];
}

static size_t expected_reads(size_t size)
{
	return (size + BUF - 1) / BUF + 1; /* the last read returns 0 */
}

static void make_files(const char *dir)
{
	char path[512];
	for (int i = 0; i < NFILES; i++) {
		snprintf(path, sizeof(path), "%s/f%d", dir, i);
		FILE *f = fopen(path, "w");
		cr_assert(f, "cannot create %s", path);
		for (size_t k = 0; k < file_size(i); k++)
			fputc('a' + (int)(k % 26), f);
		fclose(f);
	}
}

struct session {
	char *tmp;  /* everything of the test */
	char *data; /* the files bpfgen reads */
	char *out;  /* the collector's -o */
	pid_t job, bpf;
	pid_t target;	/* the collector's --pid; 0: the job */
	int release_fd; /* write end of the job's start pipe */
	int bpf_out;	/* collector's stdout */
	char bpf_err[1024];
};

static void read_file_into(const char *path, char *buf, size_t len)
{
	buf[0] = 0;
	int fd = open(path, O_RDONLY);
	if (fd < 0)
		return;
	ssize_t n = read(fd, buf, len - 1);
	close(fd);
	buf[n > 0 ? n : 0] = 0;
	buf[strcspn(buf, "\n")] = 0;
}

/*
 * Fork argv with stdout/stderr to files; when gate >= 0 the child first waits
 * for a byte on it; stdin_fd >= 0 becomes the program's stdin.
 */
static pid_t spawn(char *const argv[], const char *out, const char *err, int gate, int stdin_fd, int stdout_fd)
{
	pid_t pid = fork();
	cr_assert(pid >= 0);
	if (pid == 0) {
		setpgid(0, 0);
		if (gate >= 0) {
			char c;
			if (read(gate, &c, 1) != 1)
				_exit(126);
			close(gate);
		}
		if (stdin_fd >= 0)
			dup2(stdin_fd, 0);
		int o = stdout_fd >= 0 ? stdout_fd : open(out, O_WRONLY | O_CREAT | O_TRUNC, 0644);
		int e = open(err, O_WRONLY | O_CREAT | O_TRUNC, 0644);
		if (o < 0 || e < 0)
			_exit(125);
		dup2(o, 1);
		dup2(e, 2);
		execv(argv[0], argv);
		_exit(127);
	}
	return pid;
}

/* waitpid with a timeout; -1 when still running after it. */
static int wait_for(pid_t pid, int timeout_ms)
{
	int status;
	for (int waited = 0;; waited += 20) {
		pid_t r = waitpid(pid, &status, WNOHANG);
		if (r == pid)
			return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
		if (waited >= timeout_ms)
			return -1;
		usleep(20000);
	}
}

/* Skip unless the collector is built and we are root (BPF needs privileges). */
static const char *collector_or_skip(void)
{
	const char *bin = sp_t_build("bin/stepprof-bpf");
	if (access(bin, X_OK)) {
		printf("test_bpf: skipped: %s not built (no BTF, clang or bpftool on the build machine)\n", bin);
		cr_skip_test("eBPF collector not built");
	}
	if (geteuid() != 0) {
		printf("test_bpf: skipped: not root, BPF is refused\n");
		cr_skip_test("not root: BPF refused");
	}
	return bin;
}

/*
 * Start the collector on s->job; returns once it said "ready". Skips the test
 * with the collector's reason when it exits instead (BPF refused).
 */
static void start_collector(struct session *s, const char *bin)
{
	char errpath[512], pidstr[16];
	int cout[2];
	/* CLOEXEC: the job must not hold the collector's stdout. */
	cr_assert(pipe2(cout, O_CLOEXEC) == 0);
	snprintf(pidstr, sizeof(pidstr), "%d", (int)(s->target ? s->target : s->job));
	char *bargv[] = {(char *)bin, "--pid", pidstr, "-o", s->out, NULL};
	snprintf(errpath, sizeof(errpath), "%s/bpf.err", s->tmp);
	s->bpf = spawn(bargv, NULL, errpath, -1, -1, cout[1]);
	close(cout[1]);
	s->bpf_out = cout[0];

	/* "ready" within 30 s (loading BPF on a loaded 2-core machine takes a second or two). */
	char line[64] = {0};
	size_t got = 0;
	struct pollfd p = {.fd = s->bpf_out, .events = POLLIN};
	while (got < sizeof(line) - 1 && !strchr(line, '\n') && poll(&p, 1, 30000) > 0) {
		ssize_t n = read(s->bpf_out, line + got, sizeof(line) - 1 - got);
		if (n <= 0)
			break;
		got += (size_t)n;
	}
	if (strncmp(line, "ready\n", 6) != 0) {
		kill(-s->job, SIGKILL);
		wait_for(s->job, 5000);
		kill(s->bpf, SIGKILL);
		int st = wait_for(s->bpf, 5000);
		read_file_into(errpath, s->bpf_err, sizeof(s->bpf_err));
		cr_assert(st != 0, "collector exited 0 without printing ready");
		printf("test_bpf: skipped: the collector refused to start: %s\n", s->bpf_err);
		cr_skip_test("BPF refused: %s", s->bpf_err);
	}
}

/* Start the job held at its gate (before its exec); returns the gate's write end (a byte releases it). */
static int hold_job(struct session *s, char *const job_argv[])
{
	char errpath[512], outpath[512];
	int gate[2];
	/* CLOEXEC: the collector must not hold the job's gate. */
	cr_assert(pipe2(gate, O_CLOEXEC) == 0);
	snprintf(outpath, sizeof(outpath), "%s/job.out", s->tmp);
	snprintf(errpath, sizeof(errpath), "%s/job.err", s->tmp);
	s->job = spawn(job_argv, outpath, errpath, gate[0], -1, -1);
	close(gate[0]);
	return gate[1];
}

/* Start the job held at its gate, the collector on it, then release the job. */
static void start(struct session *s, const char *bin, char *const job_argv[])
{
	s->release_fd = hold_job(s, job_argv);
	start_collector(s, bin);
	cr_assert(write(s->release_fd, "g", 1) == 1);
	close(s->release_fd);
}

/* The collector ends by itself, with status 0, once the traced tree is gone. */
static void wait_collector(struct session *s)
{
	int st = wait_for(s->bpf, 15000);
	if (st < 0) {
		kill(s->bpf, SIGKILL);
		wait_for(s->bpf, 5000);
	}
	cr_assert_eq(st, 0, "the collector should exit 0 by itself when the traced processes are gone (status %d)", st);
}

/* The job ends with status 0, then the collector by itself. */
static void wait_job_then_collector(struct session *s, const char *job)
{
	cr_assert_eq(wait_for(s->job, 60000), 0, "%s failed", job);
	wait_collector(s);
}

/* A command that must fail: status `status`, nothing on stdout, one line on stderr, ours, that says `says`. */
static void expect_one_line(const struct sp_t_result *r, int st, int status, const char *says)
{
	cr_expect_eq(st, status, "status %d, expected %d (%s)", st, status, says);
	cr_expect(r->outlen == 0, "nothing on stdout (no \"ready\"): \"%s\"", r->out);
	cr_expect(r->errlen > 0 && strchr(r->err, '\n') == r->err + r->errlen - 1, "one line on stderr: \"%s\"",
		  r->err);
	cr_expect(strstr(r->err, "stepprof-bpf: ") == r->err && strstr(r->err, says),
		  "prefixed with the program's name, and says %s: \"%s\"", says, r->err);
}

static void session_init(struct session *s, const char *tag)
{
	memset(s, 0, sizeof(*s));
	s->tmp = sp_t_tmpdir(tag);
	size_t n = strlen(s->tmp) + 16;
	s->data = malloc(n);
	s->out = malloc(n);
	snprintf(s->data, n, "%s/data", s->tmp);
	snprintf(s->out, n, "%s/trace", s->tmp);
	cr_assert(mkdir(s->data, 0755) == 0);
	make_files(s->data);
}

static void session_free(struct session *s)
{
	sp_t_rmrf(s->tmp);
	free(s->tmp);
	free(s->data);
	free(s->out);
}

/* The one trace file the collector wrote into s->out: <host>.<its pid>.sptrace (the preload may write beside it). */
static char *trace_file(struct session *s)
{
	char suffix[32];
	snprintf(suffix, sizeof(suffix), ".%d.sptrace", (int)s->bpf);
	DIR *d = opendir(s->out);
	cr_assert(d, "no trace directory %s", s->out);
	char *found = NULL;
	int n = 0;
	for (struct dirent *de; (de = readdir(d));) {
		size_t l = strlen(de->d_name), k = strlen(suffix);
		if (l > k && !strcmp(de->d_name + l - k, suffix)) {
			n++;
			free(found);
			size_t m = strlen(s->out) + l + 2;
			found = malloc(m);
			snprintf(found, m, "%s/%s", s->out, de->d_name);
		}
	}
	closedir(d);
	cr_assert_eq(n, 1, "the collector should write exactly one trace file (*%s) in %s, found %d", suffix, s->out,
		     n);
	return found;
}

struct dump {
	struct sp_json **recs;
	size_t n;
};

/* The records of file, appended to d. */
static void dump_append(const char *file, struct dump *d)
{
	char *argv[] = {(char *)sp_t_build("bin/stepprof"), "dump", "--json", (char *)file, NULL};
	struct sp_t_result r;
	struct sp_json **recs;
	cr_assert_eq(sp_t_run(&r, argv, NULL, NULL, 60), 0, "stepprof dump --json %s failed: %s", file, r.err);
	size_t n = sp_json_parse_lines(r.out, &recs);
	d->recs = realloc(d->recs, (d->n + n + 1) * sizeof(*d->recs));
	cr_assert(d->recs);
	memcpy(d->recs + d->n, recs, n * sizeof(*recs));
	d->n += n;
	free(recs);
	sp_t_result_free(&r);
}

static void dump_trace(struct session *s, struct dump *d)
{
	char *file = trace_file(s);
	memset(d, 0, sizeof(*d));
	dump_append(file, d);
	cr_assert(d->n > 0, "empty dump of %s", file);
	free(file);
}

/* The records of every file in the trace directory: the collector's and the preload's. */
static void dump_dir(struct session *s, struct dump *d)
{
	char path[1024];
	DIR *dir = opendir(s->out);
	cr_assert(dir, "no trace directory %s", s->out);
	memset(d, 0, sizeof(*d));
	for (struct dirent *de; (de = readdir(dir));) {
		size_t l = strlen(de->d_name);
		if (l > 8 && !strcmp(de->d_name + l - 8, ".sptrace")) {
			snprintf(path, sizeof(path), "%s/%s", s->out, de->d_name);
			dump_append(path, d);
		}
	}
	closedir(dir);
}

static const char *jstr(const struct sp_json *j, const char *k)
{
	const char *v = sp_json_str(j, k);
	return v ? v : "";
}

static long long jnum(const struct sp_json *j, const char *k)
{
	return (long long)sp_json_num(j, k, -1);
}

/* Per (pid, path): what the collector recorded. */
struct tally {
	int open, stat, read, close, listdir, other;
	long long bytes_read, listdir_count;
	long long stat_bytes_min, stat_bytes_max;
	int bad_fd_type, bad_source;
	long long tid;
	int tids; /* distinct tids seen (1 expected) */
	char read_api[32];
	int mixed_read_api;
};

static void tally(const struct dump *d, long long pid, const char *path, struct tally *t)
{
	memset(t, 0, sizeof(*t));
	t->stat_bytes_min = -1;
	for (size_t i = 0; i < d->n; i++) {
		const struct sp_json *r = d->recs[i];
		if (jnum(r, "pid") != pid || strcmp(jstr(r, "path"), path))
			continue;
		const char *kind = jstr(r, "kind");
		long long tid = jnum(r, "tid");
		if (!t->tids || tid != t->tid)
			t->tids++;
		t->tid = tid;
		if (strcmp(jstr(r, "source"), "bpf"))
			t->bad_source++;
		if (!strcmp(kind, "open")) {
			t->open++;
		} else if (!strcmp(kind, "stat")) {
			long long b = jnum(r, "bytes");
			t->stat++;
			if (t->stat_bytes_min < 0 || b < t->stat_bytes_min)
				t->stat_bytes_min = b;
			if (b > t->stat_bytes_max)
				t->stat_bytes_max = b;
		} else if (!strcmp(kind, "read")) {
			t->read++;
			t->bytes_read += jnum(r, "bytes");
			if (strcmp(jstr(r, "fd_type"), "file"))
				t->bad_fd_type++;
			if (!t->read_api[0])
				snprintf(t->read_api, sizeof(t->read_api), "%s", jstr(r, "api"));
			else if (strcmp(t->read_api, jstr(r, "api")))
				t->mixed_read_api++;
		} else if (!strcmp(kind, "close")) {
			t->close++;
			if (strcmp(jstr(r, "fd_type"), "file"))
				t->bad_fd_type++;
		} else if (!strcmp(kind, "listdir")) {
			t->listdir++;
			t->listdir_count += jnum(r, "count");
		} else {
			t->other++;
		}
	}
}

/* Every file of the data directory read exactly as bpfgen does, by process pid; threaded: by its 3 threads, each with
 * its own read call (read, pread, readv). */
static void check_files(struct session *s, const struct dump *d, long long pid, int threaded)
{
	static const char *const api_of_thread[3] = {"sys_read", "sys_pread64", "sys_readv"};
	long long tid_of_thread[3] = {0, 0, 0};
	char path[512];

	for (int i = 0; i < NFILES; i++) {
		struct tally t;
		snprintf(path, sizeof(path), "%s/f%d", s->data, i);
		tally(d, pid, path, &t);
		size_t size = file_size(i);
		cr_expect_eq(t.open, 1, "pid %lld %s: %d opens, expected 1", pid, path, t.open);
		cr_expect_eq(t.stat, 2, "pid %lld %s: %d stats, expected 2 (stat + fstat)", pid, path, t.stat);
		cr_expect_eq(t.stat_bytes_min, (long long)size, "%s: stat size %lld, file has %zu", path,
			     t.stat_bytes_min, size);
		cr_expect_eq(t.stat_bytes_max, (long long)size, "%s: stat size %lld, file has %zu", path,
			     t.stat_bytes_max, size);
		cr_expect_eq(t.read, (int)expected_reads(size), "pid %lld %s: %d reads, expected %zu", pid, path,
			     t.read, expected_reads(size));
		cr_expect_eq(t.bytes_read, (long long)size, "pid %lld %s: %lld bytes read, file has %zu", pid, path,
			     t.bytes_read, size);
		cr_expect_eq(t.close, 1, "pid %lld %s: %d closes, expected 1", pid, path, t.close);
		cr_expect_eq(t.other + t.listdir, 0, "pid %lld %s: unexpected records", pid, path);
		cr_expect_eq(t.bad_fd_type, 0, "%s: reads/closes not typed \"file\"", path);
		cr_expect_eq(t.bad_source, 0, "%s: records without source \"bpf\"", path);
		cr_expect_eq(t.tids, 1, "%s: records from %d threads, one thread read it", path, t.tids);
		if (threaded) {
			int th = i % 3;
			cr_expect_str_eq(t.read_api, api_of_thread[th], "%s: read by thread %d with %s, recorded %s",
					 path, th, api_of_thread[th], t.read_api);
			cr_expect_eq(t.mixed_read_api, 0);
			cr_expect_neq(t.tid, pid, "%s: read by a worker thread, recorded on the main thread", path);
			if (!tid_of_thread[th])
				tid_of_thread[th] = t.tid;
			cr_expect_eq(t.tid, tid_of_thread[th], "%s: files of one thread recorded under two tids", path);
		}
	}
	if (threaded) {
		cr_expect(tid_of_thread[0] != tid_of_thread[1] && tid_of_thread[1] != tid_of_thread[2] &&
			      tid_of_thread[0] != tid_of_thread[2],
			  "the 3 threads should have 3 distinct tids");
	}
}

/* Every file read as bpfgen's one-thread readers do, by the process the job's line names with key (not the job). */
static void check_files_of(struct session *s, const struct dump *d, const struct sp_json *res, const char *key)
{
	long long pid = (long long)sp_json_num(res, key, -1);
	cr_assert(pid > 0 && pid != (long long)s->job, "bpfgen reports %s %lld", key, pid);
	check_files(s, d, pid, 0);
}

/* The job's JSON line (bpfgen's: {"pid", "child_pid", "files", "bytes"}; iolimits' per mode). */
static struct sp_json *job_result(struct session *s)
{
	char path[512], buf[1024];
	snprintf(path, sizeof(path), "%s/job.out", s->tmp);
	read_file_into(path, buf, sizeof(buf));
	struct sp_json *j = sp_json_parse(buf);
	cr_assert(j, "the job printed no JSON: \"%s\"", buf);
	return j;
}

/* The job argv (argv[0] a workload of the build) under the collector: its JSON line and the collector's records. */
static void run_job(struct session *s, char *const argv[], struct dump *d, struct sp_json **res)
{
	const char *bin = collector_or_skip();
	start(s, bin, argv);
	wait_job_then_collector(s, argv[0]);
	*res = job_result(s);
	dump_trace(s, d);
}

static void run_bpfgen(struct session *s, const char *mode, struct dump *d, struct sp_json **res)
{
	char n[8];
	snprintf(n, sizeof(n), "%d", NFILES);
	char *argv[] = {(char *)sp_t_build("tests/bin/bpfgen"), s->data, n, (char *)mode, NULL};
	run_job(s, argv, d, res);
}

/* iolimits MODE on the data directory (tests/workloads/iolimits.c: its modes are shared with the io suite). */
static void run_iolimits(struct session *s, const char *mode, struct dump *d, struct sp_json **res)
{
	char *argv[] = {(char *)sp_t_build("tests/bin/iolimits"), (char *)mode, s->data, NULL};
	run_job(s, argv, d, res);
}

/* Data file f0 rewritten with n bytes (iolimits reads DIR/f0 as its file input). */
static void rewrite_f0(struct session *s, size_t n)
{
	char path[512];
	snprintf(path, sizeof(path), "%s/f0", s->data);
	FILE *f = fopen(path, "w");
	cr_assert(f, "cannot create %s", path);
	for (size_t k = 0; k < n; k++)
		fputc('0' + (int)(k % 10), f);
	fclose(f);
}

/*
 * The collector started by hand on a job that already runs: bpfgen in `mode`
 * (--prefork, --thread) makes its processes or threads and prints their ids,
 * then waits for a byte on stdin in each reader; the collector is started on
 * the job's pid (or on the id `target_key` of that line names), and the
 * readers released (`readers` bytes) once it is ready.
 */
static void run_running(struct session *s, const char *mode, const char *target_key, int readers, struct dump *d,
			struct sp_json **res)
{
	const char *bin = collector_or_skip();
	char n[8], outpath[512], errpath[512], buf[1024] = {0};
	int gate[2];
	snprintf(n, sizeof(n), "%d", NFILES);
	char *argv[] = {(char *)sp_t_build("tests/bin/bpfgen"), s->data, n, (char *)mode, NULL};
	/* CLOEXEC: only the job's stdin (a dup2, which clears it) keeps the read end; nobody else the write end. */
	cr_assert(pipe2(gate, O_CLOEXEC) == 0);
	snprintf(outpath, sizeof(outpath), "%s/job.out", s->tmp);
	snprintf(errpath, sizeof(errpath), "%s/job.err", s->tmp);
	s->job = spawn(argv, outpath, errpath, -1, gate[0], -1);
	close(gate[0]);
	/* Its line says the processes (threads) exist: the collector starts after them. */
	for (int i = 0; i < 600 && buf[0] != '{'; i++) {
		usleep(50000);
		read_file_into(outpath, buf, sizeof(buf));
	}
	*res = sp_json_parse(buf);
	if (!*res) {
		kill(-s->job, SIGKILL);
		wait_for(s->job, 5000);
		cr_assert_fail("bpfgen %s printed no JSON within 30 s: \"%s\"", mode, buf);
	}
	if (target_key)
		s->target = (pid_t)sp_json_num(*res, target_key, 0);
	start_collector(s, bin);
	for (int i = 0; i < readers; i++)
		cr_assert(write(gate[1], "g", 1) == 1);
	close(gate[1]);
	wait_job_then_collector(s, mode);
	dump_trace(s, d);
}

static void dump_free(struct dump *d)
{
	for (size_t i = 0; i < d->n; i++)
		sp_json_free(d->recs[i]);
	free(d->recs);
}

/* The end of a test: the job's JSON line, the dump and the session freed. */
static void session_done(struct session *s, struct dump *d, struct sp_json *res)
{
	sp_json_free(res);
	dump_free(d);
	session_free(s);
}

/* --------------------------------------------------------------- 2. tests */

Test(bpf, counts_bytes_paths_from_three_threads, .timeout = 120)
{
	struct session s;
	struct dump d;
	struct sp_json *res;
	session_init(&s, "bpf3t");
	run_bpfgen(&s, NULL, &d, &res);

	long long pid = (long long)sp_json_num(res, "pid", -1);
	cr_assert_eq(pid, (long long)s.job, "the job's pid is the collector's --pid (exec keeps it)");
	check_files(&s, &d, pid, 1);

	long long total = 0;
	for (int i = 0; i < NFILES; i++)
		total += (long long)file_size(i);
	cr_expect_eq((long long)sp_json_num(res, "bytes", -1), total, "bpfgen read what the test wrote");

	/* The directory listing: on the main thread, entries returned. */
	struct tally t;
	tally(&d, pid, s.data, &t);
	cr_expect_geq(t.listdir, 2, "getdents64 until it returns 0: at least 2 listdir records, got %d", t.listdir);
	cr_expect_gt(t.listdir_count, 0, "listdir count: bytes of entries");
	cr_expect_eq(t.open, 1, "opendir: one open of the directory");
	cr_expect_eq(t.tid, pid, "listed by the main thread");

	/*
	 * Reads on pipes are loader waits: bpfgen's 100-byte pipe round trip, and
	 * at most the 1-byte read of the start gate (not recorded when, as usual,
	 * it began before the collector attached: a call seen only at its exit is
	 * dropped).
	 */
	int waits = 0, gate = 0, batch = 0;
	for (size_t i = 0; i < d.n; i++) {
		const struct sp_json *r = d.recs[i];
		if (jnum(r, "pid") != pid || strcmp(jstr(r, "kind"), "loader_wait"))
			continue;
		waits++;
		cr_expect_str_eq(jstr(r, "fd_type"), "pipe");
		cr_expect_str_eq(jstr(r, "api"), "sys_read");
		gate += jnum(r, "bytes") == 1;
		batch += jnum(r, "bytes") == 100 && jnum(r, "tid") == pid;
	}
	cr_expect_eq(batch, 1, "one loader wait of 100 bytes on the main thread, got %d", batch);
	cr_expect_eq(waits, batch + gate, "loader waits other than bpfgen's and the gate's: %d", waits);
	cr_expect_leq(gate, 1);

	/* Nothing about the data files from any other process. */
	for (size_t i = 0; i < d.n; i++) {
		const char *p = jstr(d.recs[i], "path");
		if (!strncmp(p, s.data, strlen(s.data)))
			cr_expect_eq(jnum(d.recs[i], "pid"), pid, "a record of %s under pid %lld", p,
				     jnum(d.recs[i], "pid"));
	}
	session_done(&s, &d, res);
}

Test(bpf, forked_and_execed_child_followed, .timeout = 120)
{
	struct session s;
	struct dump d;
	struct sp_json *res;
	session_init(&s, "bpffork");
	run_bpfgen(&s, "--fork", &d, &res);

	check_files(&s, &d, (long long)sp_json_num(res, "pid", -1), 1);
	/* The child forked, exec'd bpfgen --child and read every file again, from one thread. */
	check_files_of(&s, &d, res, "child_pid");
	session_done(&s, &d, res);
}

/*
 * By hand, on a job that already runs: a trainer whose DataLoader workers were
 * forked before the collector started. Its descendants of that time (a child
 * and the grandchild it forked) are traced as well as the ones it forks later.
 * Were only --pid itself traced, the reads of every running worker would be lost.
 */
Test(bpf, descendants_running_before_the_attach_are_traced, .timeout = 120)
{
	struct session s;
	struct dump d;
	struct sp_json *res;
	session_init(&s, "bpfpre");
	run_running(&s, "--prefork", NULL, 2, &d, &res);
	check_files_of(&s, &d, res, "child_pid");
	check_files_of(&s, &d, res, "grandchild_pid");
	session_done(&s, &d, res);
}

/*
 * --pid given a thread's id (what `top -H`, `py-spy dump` or a tid in the
 * trace show) traces the thread's process. Taken as it is, it would record
 * nothing: the kernel side filters by process id, and no process has a thread's id.
 */
Test(bpf, the_pid_of_a_thread_traces_its_process, .timeout = 120)
{
	struct session s;
	struct dump d;
	struct sp_json *res;
	session_init(&s, "bpftid");
	run_running(&s, "--thread", "tid", 1, &d, &res);
	long long tid = (long long)sp_json_num(res, "tid", -1);
	cr_assert(tid > 0 && tid != s.job, "bpfgen --thread: tid %lld", tid);
	check_files(&s, &d, (long long)s.job, 0);
	session_done(&s, &d, res);
}

/* Records of pid with this kind, api, path (under the data dir when rel) and bytes (-1: any). */
static int count(const struct dump *d, long long pid, const char *kind, const char *api, const char *path,
		 long long bytes)
{
	int n = 0;
	for (size_t i = 0; i < d->n; i++) {
		const struct sp_json *r = d->recs[i];
		n += jnum(r, "pid") == pid && !strcmp(jstr(r, "kind"), kind) && !strcmp(jstr(r, "api"), api) &&
		     !strcmp(jstr(r, "path"), path) && (bytes < 0 || jnum(r, "bytes") == bytes);
	}
	return n;
}

Test(bpf, every_syscall_relative_paths_dirfd_dup, .timeout = 120)
{
	struct session s;
	struct dump d;
	struct sp_json *res;
	char f4[512], f5[512], f6[512], f7[512];
	session_init(&s, "bpfextra");
	run_bpfgen(&s, "--extra", &d, &res);
	long long pid = (long long)s.job;
	snprintf(f4, sizeof(f4), "%s/f4", s.data);
	snprintf(f5, sizeof(f5), "%s/f5", s.data);
	snprintf(f6, sizeof(f6), "%s/f6", s.data);
	snprintf(f7, sizeof(f7), "%s/f7", s.data);

	/* chdir(DIR) then openat(AT_FDCWD, "f4"): the path is made absolute with the traced cwd. */
	cr_expect_eq(count(&d, pid, "open", "sys_openat", f4, -1), 1, "openat of relative f4");
	cr_expect_eq(count(&d, pid, "read", "sys_preadv", f4, BUF), 1, "preadv of %d bytes", BUF);
	cr_expect_eq(count(&d, pid, "stat", "sys_newfstat", f4, (long long)file_size(4)), 1, "fstat syscall: size");
	/* preadv2 (Python's os.preadv calls it) is traced too: one record. */
	cr_expect_eq(count(&d, pid, "read", "sys_preadv2", f4, 1), 1, "preadv2 of f4's last byte");
	/* The read through dup(fd) is joined to the path of fd. */
	cr_expect_eq(count(&d, pid, "read", "sys_read", f4, BUF), 1, "read through the dup'd fd");
	cr_expect_eq(count(&d, pid, "close", "sys_close", f4, -1), 2, "fd and its dup closed");
	cr_expect_eq(count(&d, pid, "open", "sys_openat", s.data, -1), 1, "the directory opened");
	/* statx and openat2 relative to the directory fd. */
	cr_expect_eq(count(&d, pid, "stat", "sys_statx", f5, (long long)file_size(5)), 1, "statx(dirfd, f5)");
	cr_expect_eq(count(&d, pid, "open", "sys_openat2", f6, -1), 1, "openat2(dirfd, f6)");
	cr_expect_eq(count(&d, pid, "close", "sys_close", f6, -1), 1);
	/* chdir("/") then fchdir(dirfd): stat("f7") is in the directory again. */
	cr_expect_eq(count(&d, pid, "stat", "sys_newfstatat", f7, (long long)file_size(7)), 1, "stat(f7) after fchdir");
	cr_expect_eq(count(&d, pid, "close", "sys_close", s.data, -1), 1, "the directory fd closed");
	session_done(&s, &d, res);
}

/*
 * The kernel side batches the calls of a single-threaded process and hands
 * them over when the process leaves the CPU, forks or exits: the collector,
 * stopped while such a process still runs, reads what is left in the
 * batches once it has detached, and loses nothing.
 */
Test(bpf, sigterm_while_the_job_runs_loses_no_call, .timeout = 90)
{
	const char *bin = collector_or_skip();
	struct session s;
	struct dump d;
	char n[8], path[512], buf[1024] = {0};
	session_init(&s, "bpfspin");
	snprintf(n, sizeof(n), "%d", NFILES);
	char *argv[] = {(char *)sp_t_build("tests/bin/bpfgen"), s.data, n, "--spin", NULL};
	start(&s, bin, argv);
	/* bpfgen prints its line once it has read every file, then spins (read_file_into keeps the first line). */
	snprintf(path, sizeof(path), "%s/job.out", s.tmp);
	for (int i = 0; i < 600 && buf[0] != '{'; i++) {
		usleep(50000);
		read_file_into(path, buf, sizeof(buf));
	}
	if (buf[0] != '{') {
		kill(-s.job, SIGKILL);
		wait_for(s.job, 5000);
		kill(s.bpf, SIGKILL);
		wait_for(s.bpf, 5000);
		cr_assert_fail("bpfgen --spin did not read its files within 30 s");
	}
	kill(s.bpf, SIGTERM);
	int st = wait_for(s.bpf, 10000);
	kill(-s.job, SIGKILL);
	wait_for(s.job, 5000);
	cr_assert_eq(st, 0, "SIGTERM: the collector should flush and exit 0 (status %d)", st);
	dump_trace(&s, &d);
	check_files(&s, &d, (long long)s.job, 0);
	dump_free(&d);
	session_free(&s);
}

/*
 * SIGTERM, SIGINT (Ctrl-C) and SIGHUP (the terminal of a collector started by
 * hand hung up: an ssh session lost) each end the collector with its file
 * flushed, status 0. Killed by SIGHUP (status 129), it would lose the ring's
 * last events and the lost count, and the file would have no clean end.
 */
Test(bpf, exits_on_sigterm_sigint_sighup_with_a_readable_file, .timeout = 90)
{
	const char *bin = collector_or_skip();
	static const int sigs[] = {SIGTERM, SIGINT, SIGHUP};
	for (size_t k = 0; k < sizeof(sigs) / sizeof(sigs[0]); k++) {
		struct session s;
		session_init(&s, "bpfterm");
		char *argv[] = {"/bin/sleep", "30", NULL};
		start(&s, bin, argv);
		usleep(200000);
		kill(s.bpf, sigs[k]);
		int st = wait_for(s.bpf, 10000);
		kill(-s.job, SIGKILL);
		wait_for(s.job, 5000);
		cr_assert_eq(st, 0, "%s: the collector should flush and exit 0 (status %d)", strsignal(sigs[k]), st);
		/* The file is complete: `stepprof dump` reads it (sleep's own startup is in it). */
		struct dump d;
		dump_trace(&s, &d);
		int opens = 0;
		for (size_t i = 0; i < d.n; i++)
			opens += !strcmp(jstr(d.recs[i], "kind"), "open") && jnum(d.recs[i], "pid") == (long long)s.job;
		cr_expect_gt(opens, 0, "sleep opens its libraries after exec: some open records expected");
		dump_free(&d);
		session_free(&s);
	}
}

Test(bpf, no_such_pid_is_a_one_line_error)
{
	const char *bin = sp_t_build("bin/stepprof-bpf");
	if (access(bin, X_OK))
		cr_skip_test("eBPF collector not built");
	char *argv[] = {(char *)bin, "--pid", "2147483000", "-o", "/tmp/stepprof-test-nopid", NULL};
	struct sp_t_result r;
	expect_one_line(&r, sp_t_run(&r, argv, NULL, NULL, 30), 1, "no process");
	sp_t_result_free(&r);
}

/*
 * By hand on a job run with LD_PRELOAD=libstepprof.so into the same trace
 * directory: its libc wrappers record its file input unless told
 * STEPPROF_IO=bpf (which only `stepprof run --bpf` does), so the collector
 * stands down for such a process. Each file is opened, read and closed once
 * in the directory, whoever records it; with STEPPROF_IO=bpf, the collector
 * records them: not 2 opens of each file (libc and bpf).
 */
Test(bpf, by_hand_on_a_preloaded_job_nothing_is_counted_twice, .timeout = 180)
{
	const char *bin = collector_or_skip();
	static const char *const modes[] = {"auto", "bpf"};
	for (int m = 0; m < 2; m++) {
		struct session s;
		struct dump d;
		char n[8], preload[1024], dir[1024], io[32], path[512];
		session_init(&s, "bpfpre2");
		snprintf(n, sizeof(n), "%d", NFILES);
		snprintf(preload, sizeof(preload), "LD_PRELOAD=%s", sp_t_build("lib/libstepprof.so"));
		snprintf(dir, sizeof(dir), "STEPPROF_DIR=%s", s.out);
		snprintf(io, sizeof(io), "STEPPROF_IO=%s", modes[m]);
		const char *gen = sp_t_build("tests/bin/bpfgen");
		char *argv[] = {"/usr/bin/env", preload, dir, io, (char *)gen, s.data, n, "--child", NULL};
		start(&s, bin, argv);
		wait_job_then_collector(&s, modes[m]);
		dump_dir(&s, &d);
		for (int i = 0; i < NFILES; i++) {
			struct tally t;
			snprintf(path, sizeof(path), "%s/f%d", s.data, i);
			tally(&d, (long long)s.job, path, &t);
			cr_expect_eq(t.open, 1, "STEPPROF_IO=%s: %s opened once, recorded %d times in the directory",
				     modes[m], path, t.open);
			cr_expect_eq(t.close, 1, "STEPPROF_IO=%s: %s closed once, recorded %d times", modes[m], path,
				     t.close);
			cr_expect_eq(t.bytes_read, (long long)file_size(i), "STEPPROF_IO=%s: %s: %lld bytes read, %zu",
				     modes[m], path, t.bytes_read, file_size(i));
		}
		/* With STEPPROF_IO=bpf the wrappers stand down: the collector's records are the job's input. */
		if (m == 1) {
			dump_free(&d);
			dump_trace(&s, &d);
			check_files(&s, &d, (long long)s.job, 0);
		}
		dump_free(&d);
		session_free(&s);
	}
}

/*
 * A storm the collector cannot keep up with (stopped, its ring buffer fills):
 * the calls that did not fit are counted, per process, as a LOST record that
 * `stepprof analyze` reports with the process, and the collector says so on
 * stderr. Each of bpfgen --storm's children makes exactly STORM_READS + 2 traced
 * calls: its records and its lost calls add up to that. A count in the file
 * header only, which the analyzer does not read for a collector's file (many
 * processes), would leave 6 million calls lost of 16 with `stepprof analyze`
 * saying nothing.
 */
#define STORM_PROCS 2
#define STORM_READS 300000 /* 2 x 300,000 events: more than the 16 MiB ring holds (64 bytes an event at least) */

Test(bpf, calls_lost_in_a_storm_are_reported_per_process, .timeout = 180)
{
	const char *bin = collector_or_skip();
	struct session s;
	char np[16], nr[16], errpath[512];
	session_init(&s, "bpfstorm");
	snprintf(np, sizeof(np), "%d", STORM_PROCS);
	snprintf(nr, sizeof(nr), "%d", STORM_READS);
	char *argv[] = {(char *)sp_t_build("tests/bin/bpfgen"), s.data, "1", "--storm", np, nr, NULL};
	int gate = hold_job(&s, argv);
	start_collector(&s, bin);
	/* The collector stopped: nothing drains the ring while the job runs. */
	kill(s.bpf, SIGSTOP);
	cr_assert(write(gate, "g", 1) == 1);
	close(gate);
	int job_st = wait_for(s.job, 120000);
	kill(s.bpf, SIGCONT);
	cr_assert_eq(job_st, 0, "bpfgen --storm failed");
	wait_collector(&s);
	snprintf(errpath, sizeof(errpath), "%s/bpf.err", s.tmp);
	read_file_into(errpath, s.bpf_err, sizeof(s.bpf_err));
	cr_expect(strstr(s.bpf_err, "calls not recorded") != NULL, "the collector says calls were lost: \"%s\"",
		  s.bpf_err);

	char *an[] = {(char *)sp_t_build("bin/stepprof"), "analyze", "--json", s.out, NULL};
	struct sp_t_result r;
	cr_assert_eq(sp_t_run(&r, an, NULL, NULL, 120), 0, "stepprof analyze --json failed: %s", r.err);
	struct sp_json *j = sp_json_parse(r.out);
	cr_assert(j, "analyze --json is not JSON");
	const struct sp_json *procs = sp_json_get(j, "processes");
	int children = 0;
	long long lost = 0;
	for (size_t i = 0; procs && i < procs->n; i++) {
		const struct sp_json *p = sp_json_at(procs, i);
		long long pid = jnum(p, "pid"), recs = jnum(p, "records"), plost = jnum(p, "lost");
		if (pid == (long long)s.job)
			continue;
		children++;
		lost += plost;
		/* its records (the LOST one among them when it lost calls) and its lost calls */
		cr_expect_eq(recs - (plost > 0) + plost, STORM_READS + 2,
			     "pid %lld: %lld records + %lld lost, it made %d traced calls", pid, recs, plost,
			     STORM_READS + 2);
	}
	cr_expect_eq(children, STORM_PROCS, "%d children in the analysis, bpfgen --storm forked %d", children,
		     STORM_PROCS);
	cr_expect_gt(lost, 0, "the ring cannot hold %d events: some calls must be reported lost",
		     STORM_PROCS * STORM_READS);
	sp_json_free(j);
	sp_t_result_free(&r);
	session_free(&s);
}

/*
 * The trace directory on a full disk (a 1 MiB tmpfs): the records that do not
 * fit are counted as lost, said by the collector under its own name, and
 * counted by `stepprof analyze` as `stepprof info` counts them: the header's
 * share (no LOST record fits on a full disk) is the run's: the warning is not
 * under "stepprof:", and analyze does not leave the losses unsaid.
 */
Test(bpf, a_full_disk_is_said_by_the_collector_and_counted_by_analyze, .timeout = 180)
{
	const char *bin = collector_or_skip();
	struct session s;
	char nr[16], errpath[512];
	session_init(&s, "bpffull");
	cr_assert(mkdir(s.out, 0700) == 0);
	if (mount("tmpfs", s.out, "tmpfs", 0, "size=1m,mode=0700")) {
		printf("test_bpf: skipped: cannot mount a tmpfs (%s)\n", strerror(errno));
		session_free(&s);
		cr_skip_test("cannot mount a tmpfs");
	}
	snprintf(nr, sizeof(nr), "%d", 100000); /* 100,000 records: 3 MiB, three times the disk */
	char *argv[] = {(char *)sp_t_build("tests/bin/bpfgen"), s.data, "1", "--storm", "1", nr, NULL};
	start(&s, bin, argv);
	wait_job_then_collector(&s, "bpfgen --storm");
	snprintf(errpath, sizeof(errpath), "%s/bpf.err", s.tmp);
	read_file_into(errpath, s.bpf_err, sizeof(s.bpf_err));
	cr_expect(strstr(s.bpf_err, "stepprof-bpf: ") == s.bpf_err && strstr(s.bpf_err, "disk space"),
		  "the collector says the disk is full, under its own name: \"%s\"", s.bpf_err);
	cr_expect(!strstr(s.bpf_err, "\nstepprof: ") && strncmp(s.bpf_err, "stepprof: ", 10),
		  "no line of the collector's says \"stepprof:\": \"%s\"", s.bpf_err);

	char *file = trace_file(&s);
	char *in[] = {(char *)sp_t_build("bin/stepprof"), "info", "--json", file, NULL};
	struct sp_t_result r;
	cr_assert_eq(sp_t_run(&r, in, NULL, NULL, 60), 0, "stepprof info --json failed: %s", r.err);
	struct sp_json *j = sp_json_parse(r.out);
	cr_assert(j, "info --json is not JSON: %s", r.out);
	long long info_lost = (long long)sp_json_num(j, "files.0.lost", -1);
	sp_json_free(j);
	sp_t_result_free(&r);
	cr_expect_gt(info_lost, 0, "1 MiB cannot hold 100,000 records: some are lost");

	char *an[] = {(char *)sp_t_build("bin/stepprof"), "analyze", "--json", s.out, NULL};
	cr_assert_eq(sp_t_run(&r, an, NULL, NULL, 120), 0, "stepprof analyze --json failed: %s", r.err);
	j = sp_json_parse(r.out);
	cr_assert(j, "analyze --json is not JSON");
	cr_expect_eq((long long)sp_json_num(j, "summary.lost", -1), info_lost,
		     "analyze counts the %lld records info says were lost", info_lost);
	sp_json_free(j);
	sp_t_result_free(&r);
	free(file);
	umount2(s.out, MNT_DETACH);
	session_free(&s);
}

/*
 * A second collector on a process the first one traces already would write a
 * second file of the same calls into the directory, counted twice by the
 * analyzer: it says so in one line and exits 1, not "ready" and a second
 * full file.
 */
Test(bpf, a_second_collector_on_a_traced_process_is_refused, .timeout = 120)
{
	const char *bin = collector_or_skip();
	struct session s;
	struct dump d;
	char pidstr[16];
	session_init(&s, "bpftwo");
	char n[8];
	snprintf(n, sizeof(n), "%d", NFILES);
	char *argv[] = {(char *)sp_t_build("tests/bin/bpfgen"), s.data, n, "--child", NULL};
	int gate = hold_job(&s, argv);
	snprintf(pidstr, sizeof(pidstr), "%d", (int)s.job);

	/*
	 * A collector that just ended (here: a bad -o, once its programs were
	 * loaded) is no other collector: its maps outlive it for a while, and the
	 * one started again at once must not take them for a live one's.
	 */
	char *bad[] = {(char *)bin, "--pid", pidstr, "-o", "", NULL};
	struct sp_t_result r;
	expect_one_line(&r, sp_t_run(&r, bad, NULL, NULL, 30), 1, "trace directory");
	sp_t_result_free(&r);
	char *again[] = {(char *)bin, "--pid", pidstr, "-o", s.out, "--duration=0.2", NULL};
	cr_expect_eq(sp_t_run(&r, again, NULL, NULL, 30), 0, "started again at once: %s", r.err);
	cr_expect(strstr(r.out, "ready") == r.out, "started again at once: \"%s\"", r.out);
	sp_t_result_free(&r);
	sp_t_rmrf(s.out); /* its file: the test wants the first collector's alone */

	/* the first collector attached, the job not released yet */
	start_collector(&s, bin);

	char *second[] = {(char *)bin, "--pid", pidstr, "-o", s.out, "--duration=1", NULL};
	expect_one_line(&r, sp_t_run(&r, second, NULL, NULL, 30), 1, "another stepprof-bpf");
	sp_t_result_free(&r);

	/* the first one records the job as ever, alone in the directory */
	cr_assert(write(gate, "g", 1) == 1);
	close(gate);
	wait_job_then_collector(&s, "bpfgen --child");
	dump_dir(&s, &d);
	check_files(&s, &d, (long long)s.job, 0);
	dump_free(&d);
	session_free(&s);
}

/*
 * The trace directory removed while the collector writes into it (a job that
 * cleans up its temporary directory): the records went into a file nobody can
 * open, and the collector says so at the end: not exit 0 without a word, and
 * nothing left of the run.
 */
Test(bpf, a_trace_removed_while_tracing_is_reported, .timeout = 120)
{
	const char *bin = collector_or_skip();
	struct session s;
	char n[8], errpath[512];
	session_init(&s, "bpfrm");
	snprintf(n, sizeof(n), "%d", NFILES);
	char *argv[] = {(char *)sp_t_build("tests/bin/bpfgen"), s.data, n, "--child", NULL};
	int gate = hold_job(&s, argv);
	start_collector(&s, bin);
	sp_t_rmrf(s.out);
	cr_assert(access(s.out, F_OK) != 0, "%s should be gone", s.out);
	cr_assert(write(gate, "g", 1) == 1);
	close(gate);
	wait_job_then_collector(&s, "bpfgen --child");
	snprintf(errpath, sizeof(errpath), "%s/bpf.err", s.tmp);
	read_file_into(errpath, s.bpf_err, sizeof(s.bpf_err));
	cr_expect(strstr(s.bpf_err, "stepprof-bpf: warning: ") == s.bpf_err && strstr(s.bpf_err, "was removed"),
		  "the collector says its file was removed: \"%s\"", s.bpf_err);
	session_free(&s);
}

/*
 * The st_size of a file of 1 TiB or more (a sparse 1.1 TB file, stat'ed by
 * path, by fd and with statx) saturates at the 5-byte field's largest value,
 * 1 TiB - 1, as the libc wrappers record it. Cut to its low bytes, it would
 * make 1,100,000,000,000 bytes read 488,372,224.
 */
#define BYTES_FIELD_MAX 1099511627775LL /* 2^40 - 1: the trace's bytes field holds 5 bytes (docs/trace-format.md) */

Test(bpf, a_stat_of_a_file_of_1_tib_or_more_saturates, .timeout = 120)
{
	struct session s;
	struct dump d;
	struct sp_json *res;
	struct tally t;
	char path[512];
	session_init(&s, "bpfbig");
	run_iolimits(&s, "big", &d, &res);
	if (sp_json_num(res, "efbig", 0) != 0) {
		printf("test_bpf: skipped: the file system of %s cannot hold a 1.1 TB sparse file\n", s.data);
		session_done(&s, &d, res);
		cr_skip_test("no 1.1 TB sparse file here");
	}
	long long size = (long long)sp_json_num(res, "size", -1);
	cr_assert_gt(size, BYTES_FIELD_MAX, "iolimits big made a file of %lld bytes", size);
	cr_assert_eq((long long)sp_json_num(res, "statx_size", -1), size);
	snprintf(path, sizeof(path), "%s/big", s.data);
	tally(&d, (long long)sp_json_num(res, "pid", -1), path, &t);
	cr_expect_eq(t.stat, 3, "stat, fstat and statx of %s: %d stat records", path, t.stat);
	cr_expect_eq(t.stat_bytes_min, BYTES_FIELD_MAX, "a %lld-byte file: stat bytes %lld, expected %lld (saturated)",
		     size, t.stat_bytes_min, BYTES_FIELD_MAX);
	cr_expect_eq(t.stat_bytes_max, BYTES_FIELD_MAX, "a %lld-byte file: stat bytes %lld, expected %lld (saturated)",
		     size, t.stat_bytes_max, BYTES_FIELD_MAX);
	cr_expect_eq(t.open, 1, "opened to read and write (input): %d open records", t.open);
	session_done(&s, &d, res);
}

/*
 * The reads (and loader waits) of pid on fd of a type other than file: not
 * the dynamic loader's reads of the libraries, which had the number before.
 */
static int count_reads_not_file(const struct dump *d, long long pid, long long fd)
{
	int n = 0;
	for (size_t i = 0; i < d->n; i++) {
		const struct sp_json *r = d->recs[i];
		const char *kind = jstr(r, "kind");
		n += jnum(r, "pid") == pid && jnum(r, "fd") == fd && strcmp(jstr(r, "fd_type"), "file") &&
		     (!strcmp(kind, "read") || !strcmp(kind, "loader_wait"));
	}
	return n;
}

/*
 * Reads of an eventfd, a timerfd, a signalfd (and an eventfd made by the raw
 * syscall) and of /dev/zero are a thread waiting for a counter, a timer, a
 * signal or a device, not file input: no record, as the libc wrappers write
 * none. As a read record of fd_type other, each would be input to the
 * analysis (a 20 ms wait on a timerfd 20 ms of file input). The file the
 * same program reads is still recorded.
 */
Test(bpf, reads_of_eventfds_timerfds_signalfds_and_devices_are_not_input, .timeout = 120)
{
	static const char *const fds[] = {"eventfd", "timerfd", "signalfd", "raw_eventfd", "zero"};
	static const char *const reads[] = {"eventfd_read", "timerfd_read", "signalfd_read", "raw_read", "zero_read"};
	struct session s;
	struct dump d;
	struct sp_json *res;
	struct tally t;
	char path[512];
	session_init(&s, "bpfnotin");
	rewrite_f0(&s, 3000);
	run_iolimits(&s, "notinput", &d, &res);
	long long pid = (long long)sp_json_num(res, "pid", -1);
	for (size_t k = 0; k < sizeof(fds) / sizeof(fds[0]); k++) {
		long long fd = (long long)sp_json_num(res, fds[k], -1);
		cr_assert_gt(sp_json_num(res, reads[k], 0), 0, "the workload's read of its %s returned nothing",
			     fds[k]);
		int n = count_reads_not_file(&d, pid, fd);
		cr_expect_eq(n, 0, "the read of the %s (fd %lld): %d records, expected none", fds[k], fd, n);
	}
	snprintf(path, sizeof(path), "%s/f0", s.data);
	tally(&d, pid, path, &t);
	cr_expect_eq((long long)sp_json_num(res, "f0_bytes", -1), 3000);
	cr_expect_eq(t.bytes_read, 3000, "%s: %lld bytes read recorded, the test wrote 3000", path, t.bytes_read);
	cr_expect_geq(t.read, 2, "%s: a read of its bytes and one at EOF, %d recorded", path, t.read);
	cr_expect_eq(t.open + t.close, 2, "%s: its open and its close", path);
	session_done(&s, &d, res);
}

/*
 * A file opened for writing only, or truncated, is output: a step that saves
 * its outputs (torch.save, np.save, Python's open(p, 'wb')) reads nothing,
 * and the libc wrappers write no record of its open, fstat, reads or close.
 * iolimits output writes 5 files by open(O_WRONLY|O_CREAT|O_TRUNC) + fstat,
 * 5 by fopen "w", one by open(O_RDWR|O_CREAT|O_TRUNC), then a file opened
 * "a+" (it can be read: input) and f0 read. The collector records no open,
 * fstat or close of a file written (otherwise a step saving 300 small files
 * would be a critical small_file_storm under --bpf).
 */
Test(bpf, files_opened_for_writing_are_not_input, .timeout = 120)
{
	struct session s;
	struct dump d;
	struct sp_json *res;
	struct tally t;
	char out[512], pa[512], p0[512];
	session_init(&s, "bpfout");
	rewrite_f0(&s, 3000);
	run_iolimits(&s, "output", &d, &res);
	long long pid = (long long)sp_json_num(res, "pid", -1);
	snprintf(out, sizeof(out), "%s/out/", s.data);
	snprintf(pa, sizeof(pa), "%s/out/a", s.data);
	snprintf(p0, sizeof(p0), "%s/f0", s.data);
	int written = 0, unnamed = 0;
	for (size_t i = 0; i < d.n; i++) {
		const struct sp_json *r = d.recs[i];
		const char *p = jstr(r, "path"), *kind = jstr(r, "kind");
		if (jnum(r, "pid") != pid)
			continue;
		if (!strncmp(p, out, strlen(out)) && strcmp(p, pa)) {
			written++;
			cr_expect(0, "a record of a file written: %s %s %s", kind, jstr(r, "api"), p);
		}
		/* an output file's fstat, read or close, recorded without its name (not the start gate's pipe) */
		if (!p[0] &&
		    ((!strcmp(kind, "stat") && jnum(r, "fd") >= 0) ||
		     ((!strcmp(kind, "read") || !strcmp(kind, "close")) && !strcmp(jstr(r, "fd_type"), "file")))) {
			unnamed++;
			cr_expect(0, "a record without a path: %s %s fd %lld", kind, jstr(r, "api"), jnum(r, "fd"));
		}
	}
	cr_expect_eq(written, 0, "%d records of the files written", written);
	cr_expect_eq(unnamed, 0, "%d records of fds without a path", unnamed);
	/* read and write ("a+"): input */
	cr_assert_eq((long long)sp_json_num(res, "a_bytes", -1), 100);
	tally(&d, pid, pa, &t);
	cr_expect_eq(t.open, 1, "%s (\"a+\"): %d opens", pa, t.open);
	cr_expect_eq(t.bytes_read, 100, "%s: %lld bytes read recorded, 100 read", pa, t.bytes_read);
	cr_expect_eq(t.close, 1, "%s: %d closes", pa, t.close);
	tally(&d, pid, p0, &t);
	cr_expect_eq(t.open, 1, "%s: %d opens", p0, t.open);
	cr_expect_eq(t.bytes_read, 3000, "%s: %lld bytes read recorded, the test wrote 3000", p0, t.bytes_read);
	cr_expect_eq(t.close, 1, "%s: %d closes", p0, t.close);
	session_done(&s, &d, res);
}

/*
 * stdio reads seen by the collector (iogen stdio: a 28,000-byte text file read to
 * its end once by each of 17 stdio functions, and its copy by fgets then fread):
 * the read syscalls glibc makes to fill the streams' buffers sum to 17 times the
 * file and once its copy, the figures the libc wrappers record for the same run
 * (io::stdio_reads_record_what_they_read_from_the_file): the two modes agree.
 */
Test(bpf, stdio_reads_sum_to_what_the_libc_wrappers_record, .timeout = 120)
{
	struct session s;
	struct dump d;
	struct sp_json *res;
	struct tally t;
	char text[512], text2[512];
	session_init(&s, "bpfstdio");
	char *argv[] = {(char *)sp_t_build("tests/bin/iogen"), "stdio", s.data, "1", NULL};
	run_job(&s, argv, &d, &res);
	long long pid = (long long)sp_json_num(res, "pid", -1), size = (long long)sp_json_num(res, "size", -1);
	cr_assert_eq(size, 28000);
	snprintf(text, sizeof(text), "%s/text", s.data);
	snprintf(text2, sizeof(text2), "%s/text2", s.data);
	tally(&d, pid, text, &t);
	cr_expect_eq(t.open, 17, "%s: %d opens for reading", text, t.open);
	cr_expect_eq(t.bytes_read, 17 * size, "%s: %lld bytes read, 17 x %lld", text, t.bytes_read, size);
	cr_expect_eq(t.bad_fd_type, 0);
	tally(&d, pid, text2, &t);
	cr_expect_eq(t.bytes_read, size, "%s: %lld bytes read, %lld", text2, t.bytes_read, size);
	session_done(&s, &d, res);
}

/*
 * Bad usage: one line of our own and status 2, not getopt's line and the
 * 3-line usage (4 lines), nor the usage alone.
 */
Test(bpf, bad_usage_is_one_line_and_status_2, .timeout = 60)
{
	const char *bin = sp_t_build("bin/stepprof-bpf");
	if (access(bin, X_OK))
		cr_skip_test("eBPF collector not built");
	static const struct {
		const char *args[6];
		const char *says;
	} cases[] = {
	    {{"--bogus"}, "--bogus"}, {{"-xv"}, "-x:"}, /* the unknown one of a cluster, not the program's name */
	    {{"--pid"}, "--pid"},     {{"-o", "/tmp/stepprof-test-usage"}, "--pid"},
	    {{"--pid", "1"}, "-o"},   {{"--pid", "1", "-o", "/tmp/stepprof-test-usage", "extra"}, "extra"},
	    {{NULL}, "--pid"},
	};
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		char *argv[8] = {(char *)bin};
		for (int k = 0; cases[i].args[k]; k++)
			argv[k + 1] = (char *)cases[i].args[k];
		struct sp_t_result r;
		expect_one_line(&r, sp_t_run(&r, argv, NULL, NULL, 30), 2, cases[i].says);
		sp_t_result_free(&r);
	}
}

/*
 * Inside a PID namespace (a container), the kernel knows the job's processes
 * by other pids than --pid: the collector must say it cannot trace, not
 * "ready" and then record nothing (under `stepprof run --bpf` the libc
 * wrappers stand down as well: no input at all), not "ready", exit 0 and
 * an empty file.
 */
Test(bpf, inside_a_pid_namespace_is_a_one_line_error, .timeout = 60)
{
	const char *bin = sp_t_build("bin/stepprof-bpf");
	if (access(bin, X_OK))
		cr_skip_test("eBPF collector not built");
	if (geteuid() != 0 || access("/usr/bin/unshare", X_OK))
		cr_skip_test("needs root and unshare to make a PID namespace");
	char *tmp = sp_t_tmpdir("bpfpidns"), out[512];
	snprintf(out, sizeof(out), "%s/trace", tmp);
	/* pid 1 in the new namespace: the collector itself, there (a pid that exists) */
	char *argv[] = {
	    "/usr/bin/unshare", "--pid", "--kill-child", "--mount-proc", (char *)bin, "--pid=1", "-o", out, NULL};
	struct sp_t_result r;
	int st = sp_t_run(&r, argv, NULL, NULL, 5); /* not "ready", and tracing until killed */
	if (st != 0 && strstr(r.err, "unshare:") == r.err) {
		printf("test_bpf: skipped: cannot make a PID namespace: %s", r.err);
		sp_t_result_free(&r);
		sp_t_rmrf(tmp);
		free(tmp);
		cr_skip_test("unshare --pid refused");
	}
	expect_one_line(&r, st, 1, "PID namespace"); /* the collector must fail, not trace nothing */
	sp_t_result_free(&r);
	sp_t_rmrf(tmp);
	free(tmp);
}

Test(bpf, not_root_is_a_one_line_error, .timeout = 60)
{
	const char *bin = sp_t_build("bin/stepprof-bpf");
	if (access(bin, X_OK))
		cr_skip_test("eBPF collector not built");
	if (geteuid() != 0 || access("/usr/bin/setpriv", X_OK))
		cr_skip_test("needs root and setpriv to drop to an unprivileged user");
	char pidstr[16];
	snprintf(pidstr, sizeof(pidstr), "%d", (int)getpid());
	char *argv[] = {"/usr/bin/setpriv",
			"--reuid=65534",
			"--regid=65534",
			"--clear-groups",
			"--inh-caps=-all",
			(char *)bin,
			"--pid",
			pidstr,
			"-o",
			"/tmp/stepprof-test-noroot",
			NULL};
	struct sp_t_result r;
	/* an unprivileged collector must fail, not pretend; the reason says it is a permission problem */
	expect_one_line(&r, sp_t_run(&r, argv, NULL, NULL, 30), 1, "not permitted");
	sp_t_result_free(&r);
}
