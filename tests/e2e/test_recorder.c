/*
 * test_recorder.c - the recorder of libstepprof.so, end to end: markgen runs
 * under LD_PRELOAD and `stepprof info --json` / `stepprof dump --json` read back
 * what it wrote. Ground truth is what markgen was asked to do (threads x marks,
 * where it forks, execs, dies).
 *
 * Divided into: helpers; volume and exactness; the ring cap; crashes; fork and
 * exec; the trace directory; degraded conditions (unwritable directory, full
 * disk, bad configuration); the writer's encoder against trace.h's codec.
 */
#include <criterion/criterion.h>
#include <linux/filter.h>
#include <linux/seccomp.h>
#include <stddef.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <sched.h>
#include <stdio.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <grp.h>
#include <sys/mman.h>
#include <sys/mount.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/utsname.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "envconfig.h"
#include "clock.h"
#include "testlib.h"
#include "tracefile.h"

/* ------------------------------------------------------------------ helpers */

static char *env_dir(const char *dir)
{
	char *e = malloc(strlen(dir) + 16);
	sprintf(e, "STEPPROF_DIR=%s", dir);
	return e;
}

static char *env_preload(void)
{
	const char *so = sp_t_build("lib/libstepprof.so");
	char *e = malloc(strlen(so) + 16);
	sprintf(e, "LD_PRELOAD=%s", so);
	return e;
}

/* argv[] of build/tests/bin/markgen with args split at spaces (at most 30 words); free the returned copy they point into. */
static char *markgen_argv(char *argv[32], const char *args)
{
	char *copy = strdup(args), *save;
	int a = 0;
	argv[a++] = (char *)sp_t_build("tests/bin/markgen");
	for (char *w = strtok_r(copy, " ", &save); w && a < 31; w = strtok_r(NULL, " ", &save))
		argv[a++] = w;
	argv[a] = NULL;
	return copy;
}

/*
 * markgen under the preload; extra: NULL-terminated env additions (may be NULL).
 * Without CPU time samples: the tests account for every record as a mark, and
 * the exit's cpu_time record (docs/input-capture.md) would be one more (kept,
 * or lost when the trace is full); tests/e2e/test_cpu_samples.c tests those.
 */
static int markgen(struct sp_t_result *r, const char *dir, char *const extra[], const char *args)
{
	char *env[16];
	int n = 0;
	env[n++] = env_preload();
	if (dir)
		env[n++] = env_dir(dir);
	else
		env[n++] = "STEPPROF_DIR=";
	env[n++] = "STEPPROF_CPU_SAMPLES=0";
	for (int i = 0; extra && extra[i] && n < 15; i++)
		env[n++] = extra[i];
	env[n] = NULL;
	/* argv directly, no shell: a preloaded shell would write a trace file of its own */
	char *argv[32], *copy = markgen_argv(argv, args);
	int st = sp_t_run(r, argv, env, NULL, 120);
	free(copy);
	return st;
}

/* Entries of dir other than . and .. (0 when it does not exist). */
static int entries(const char *dir)
{
	DIR *d = opendir(dir);
	struct dirent *e;
	int n = 0;
	while (d && (e = readdir(d)))
		n += strcmp(e->d_name, ".") != 0 && strcmp(e->d_name, "..") != 0;
	if (d)
		closedir(d);
	return n;
}

/* `stepprof info --json path`, parsed. */
static struct sp_json *info(const char *path)
{
	struct sp_t_result r;
	char *argv[] = {(char *)sp_t_build("bin/stepprof"), "info", "--json", (char *)path, NULL};
	int st = sp_t_run(&r, argv, NULL, NULL, 120);
	cr_assert_eq(st, 0, "stepprof info %s: status %d: %s", path, st, r.err);
	struct sp_json *j = sp_json_parse(r.out);
	cr_assert(j, "info --json is not JSON: %.300s", r.out);
	sp_t_result_free(&r);
	return j;
}

/* The "files" entry of pid (the n-th one of that pid when exec'd in place). */
static struct sp_json *file_of(struct sp_json *j, long pid, int nth)
{
	struct sp_json *files = sp_json_get(j, "files");
	cr_assert(files, "no files[] in info --json");
	for (size_t i = 0; i < files->n; i++)
		if (sp_json_i64(&files->kids[i], "pid", -1) == pid && nth-- == 0)
			return &files->kids[i];
	return NULL;
}

static size_t nfiles(struct sp_json *j)
{
	struct sp_json *files = sp_json_get(j, "files");
	return files ? files->n : 0;
}

/* info's first file (asserted present), and the same when it must be the only one. */
static struct sp_json *file0(struct sp_json *j)
{
	struct sp_json *f = sp_json_at(sp_json_get(j, "files"), 0);
	cr_assert(f, "no file in the trace directory");
	return f;
}

static struct sp_json *only_file(struct sp_json *j)
{
	cr_assert_eq(nfiles(j), 1);
	return file0(j);
}

/* The trace in dir (its only file when only) holds exactly `marks` marks and lost none. */
static void expect_marks_kept(const char *dir, int only, uint64_t marks)
{
	struct sp_json *j = info(dir);
	struct sp_json *f = only ? only_file(j) : file0(j);
	cr_expect_eq(sp_json_u64(f, "records_by_kind.mark", 0), marks);
	cr_expect_eq(sp_json_u64(f, "lost", 99), 0);
	sp_json_free(j);
}

/* What became of the marks written into file f: each one is kept, overwritten or counted lost, exactly once. */
struct marks_fate {
	uint64_t kept, over, lost;
};

static struct marks_fate expect_marks_accounted(struct sp_json *f, long written)
{
	struct marks_fate m = {sp_json_u64(f, "records_by_kind.mark", 0), sp_json_u64(f, "overwritten", 0),
			       sp_json_u64(f, "lost", 0)};
	cr_expect_eq(m.kept + m.over + m.lost, (uint64_t)written, "kept %lu + overwritten %lu + lost %lu != %ld",
		     (unsigned long)m.kept, (unsigned long)m.over, (unsigned long)m.lost, written);
	return m;
}

/* `stepprof dump --json file`, one object per record. */
static size_t dump(const char *file, struct sp_json ***lines)
{
	struct sp_t_result r;
	char *argv[] = {(char *)sp_t_build("bin/stepprof"), "dump", "--json", (char *)file, NULL};
	int st = sp_t_run(&r, argv, NULL, NULL, 120);
	cr_assert_eq(st, 0, "stepprof dump %s: status %d: %s", file, st, r.err);
	size_t n = sp_json_parse_lines(r.out, lines);
	sp_t_result_free(&r);
	return n;
}

static size_t count_name(struct sp_json **l, size_t n, const char *kind, const char *name)
{
	size_t c = 0;
	for (size_t i = 0; i < n; i++) {
		const char *k = sp_json_str(l[i], "kind"), *nm = sp_json_str(l[i], "name");
		if (k && strcmp(k, kind) == 0 && (!name || (nm && strcmp(nm, name) == 0)))
			c++;
	}
	return c;
}

/* The last "markgen pid=N" line of stdout (the process that printed last). */
static long out_pid(const char *out)
{
	long pid = -1;
	for (const char *p = out; (p = strstr(p, "markgen pid=")); p++)
		pid = atol(p + 12);
	return pid;
}

static long child_pid(const char *out)
{
	const char *p = strstr(out, "child=");
	return p ? atol(p + 6) : -1;
}

static uint64_t ts_ns(const struct timespec *t)
{
	return (uint64_t)t->tv_sec * 1000000000ull + (uint64_t)t->tv_nsec;
}

static int stepprof_lines(const char *err)
{
	int n = 0;
	for (const char *p = err; p && *p; p = strchr(p, '\n'), p = p ? p + 1 : p)
		if (strncmp(p, "stepprof:", 9) == 0)
			n++;
	return n;
}

/* ----------------------------------------------------- volume, exactness */

Test(recorder, eight_threads_million_marks_exact, .timeout = 300)
{
	char *dir = sp_t_tmpdir("rec8");
	struct sp_t_result r;
	cr_assert_eq(markgen(&r, dir, NULL, "-t 8 -n 1000000"), 0, "%s", r.err);
	cr_expect_null(strstr(r.out, "errno_changed"), "stepprof_mark changed errno: %s", r.out);
	sp_t_result_free(&r);
	struct sp_json *j = info(dir);
	struct sp_json *f = only_file(j);
	cr_expect_eq(sp_json_u64(f, "records_by_kind.mark", 0), 8000000);
	cr_expect_eq(sp_json_u64(f, "records", 0), 8000000);
	cr_expect_eq(sp_json_u64(f, "lost", 99), 0);
	cr_expect_eq(sp_json_u64(f, "overwritten", 99), 0);
	cr_expect_eq(sp_json_u64(f, "threads", 0), 8);
	cr_expect_gt(sp_json_u64(f, "end_ns", 0), sp_json_u64(f, "begin_ns", 0));
	sp_json_free(j);
	sp_t_rmrf(dir);
}

/* The header says who wrote the file: host, pid, ppid (this test), rank, command line; records lie in the run. */
Test(recorder, header_names_the_process_and_its_rank)
{
	char *dir = sp_t_tmpdir("rechdr");
	struct sp_t_result r;
	char *extra[] = {"RANK=3", "LOCAL_RANK=1", "WORLD_SIZE=4", NULL};
	struct timespec t0, t1;
	clock_gettime(CLOCK_MONOTONIC, &t0);
	cr_assert_eq(markgen(&r, dir, extra, "-n 10 -m hdr"), 0, "%s", r.err);
	clock_gettime(CLOCK_MONOTONIC, &t1);
	long pid = out_pid(r.out);
	sp_t_result_free(&r);
	struct sp_json *j = info(dir);
	struct sp_json *f = file_of(j, pid, 0);
	cr_assert(f, "a file for pid %ld", pid);
	struct utsname u;
	cr_assert_eq(uname(&u), 0);
	cr_expect_str_eq(sp_json_str(f, "host"), u.nodename);
	cr_expect_eq(sp_json_i64(f, "ppid", -1), (long)getpid(), "markgen's parent is this test");
	cr_expect_eq(sp_json_i64(f, "rank", -9), 3);
	cr_expect_eq(sp_json_i64(f, "local_rank", -9), 1);
	cr_expect_eq(sp_json_i64(f, "world_size", -9), 4);
	char cmd[600];
	snprintf(cmd, sizeof(cmd), "%s -n 10 -m hdr", sp_t_build("tests/bin/markgen"));
	cr_expect_str_eq(sp_json_str(f, "cmdline"), cmd);
	uint64_t b = sp_json_u64(f, "begin_ns", 0), e = sp_json_u64(f, "end_ns", 0);
	uint64_t lo = ts_ns(&t0), hi = ts_ns(&t1);
	cr_expect(lo <= b && b <= e && e <= hi, "records [%lu, %lu] outside the run [%lu, %lu] (CLOCK_MONOTONIC)",
		  (unsigned long)b, (unsigned long)e, (unsigned long)lo, (unsigned long)hi);
	cr_expect(sp_json_path(f, "clean_exit") && sp_json_path(f, "clean_exit")->num == 1, "clean exit recorded");
	sp_json_free(j);
	sp_t_rmrf(dir);
}

/*
 * Both clocks of sp_now() (clock.h) give CLOCK_MONOTONIC: a run long enough
 * for the TSC clock to be calibrated and to go through several segments (4
 * threads, then a fork whose child writes too) lies inside the test's own
 * clock_gettime bracket, and the header says which clock wrote it.
 */
static void clock_run(const char *clock, int want_tsc)
{
	char *dir = sp_t_tmpdir("recclock");
	struct sp_t_result r;
	char env[64];
	snprintf(env, sizeof(env), "STEPPROF_CLOCK=%s", clock);
	char *extra[] = {env, NULL};
	struct timespec t0, t1;
	clock_gettime(CLOCK_MONOTONIC, &t0);
	cr_assert_eq(markgen(&r, dir, extra, "-t 4 -n 300000 -f 200000"), 0, "%s", r.err);
	clock_gettime(CLOCK_MONOTONIC, &t1);
	cr_assert_eq(r.errlen, 0, "no warning expected: %s", r.err);
	sp_t_result_free(&r);
	uint64_t lo = ts_ns(&t0), hi = ts_ns(&t1);
	struct sp_json *j = info(dir);
	cr_assert_eq(nfiles(j), 2, "parent and forked child");
	for (size_t i = 0; i < 2; i++) {
		struct sp_json *f = sp_json_at(sp_json_get(j, "files"), i);
		uint64_t b = sp_json_u64(f, "begin_ns", 0), e = sp_json_u64(f, "end_ns", 0);
		cr_expect(lo <= b && b <= e && e <= hi, "STEPPROF_CLOCK=%s: records [%lu, %lu] outside the run [%lu, %lu]",
			  clock, (unsigned long)b, (unsigned long)e, (unsigned long)lo, (unsigned long)hi);
		int tsc = 0;
		struct sp_json *feats = sp_json_get(f, "features");
		for (size_t k = 0; feats && k < feats->n; k++)
			tsc |= feats->kids[k].str && strcmp(feats->kids[k].str, "tsc_clock") == 0;
		cr_expect_eq(tsc, want_tsc, "STEPPROF_CLOCK=%s: tsc_clock feature %d, expected %d", clock, tsc, want_tsc);
	}
	sp_json_free(j);
	sp_t_rmrf(dir);
}

Test(recorder, both_clocks_give_clock_monotonic, .timeout = 300)
{
	clock_run("vdso", 0);
	const char *why = NULL;
	int tsc = sp_clock_init("auto", &why) == SP_CLK_TSC;
	if (!tsc)
		cr_log_info("auto picks clock_gettime here (%s): checked as such", why ? why : "?");
	clock_run("auto", tsc);
}

Test(recorder, steps_are_numbered_per_process)
{
	char *dir = sp_t_tmpdir("recstep");
	struct sp_t_result r;
	cr_assert_eq(markgen(&r, dir, NULL, "-n 3 -s 5"), 0, "%s", r.err);
	long pid = out_pid(r.out);
	sp_t_result_free(&r);
	struct sp_json *j = info(dir);
	struct sp_json *f = file_of(j, pid, 0);
	cr_assert(f);
	cr_expect_eq(sp_json_u64(f, "records_by_kind.step", 0), 5);
	struct sp_json **l;
	size_t n = dump(sp_json_str(f, "path"), &l), k = 0;
	for (size_t i = 0; i < n; i++) {
		const char *kind = sp_json_str(l[i], "kind");
		if (kind && strcmp(kind, "step") == 0) {
			cr_expect_eq(sp_json_u64(l[i], "value", 99), k, "step %zu has value %lu", k,
				     (unsigned long)sp_json_u64(l[i], "value", 99));
			k++;
		}
	}
	cr_expect_eq(k, 5);
	cr_expect_eq(count_name(l, n, "mark", "mark"), 3);
	sp_json_free_lines(l, n);
	sp_json_free(j);
	sp_t_rmrf(dir);
}

/* /usr/bin/python3 -c script under the preload, its trace in dir (io: STEPPROF_IO, NULL for the default); its status. */
static int python_in(struct sp_t_result *r, const char *dir, const char *script, const char *io)
{
	char pre[600], d[600], iov[64];
	snprintf(pre, sizeof(pre), "LD_PRELOAD=%s", sp_t_build("lib/libstepprof.so"));
	snprintf(d, sizeof(d), "STEPPROF_DIR=%s", dir);
	snprintf(iov, sizeof(iov), "STEPPROF_IO=%s", io ? io : "auto");
	char *env[] = {pre, d, iov, NULL};
	char *argv[] = {"/usr/bin/python3", "-c", (char *)script, NULL};
	return sp_t_run(r, argv, env, NULL, 60);
}

Test(recorder, python_ctypes_reaches_the_api)
{
	char *dir = sp_t_tmpdir("recpy");
	struct sp_t_result r;
	cr_assert_eq(python_in(&r, dir,
			       "import ctypes\nlib = ctypes.CDLL(None)\nfor i in range(7):\n"
			       "    lib.stepprof_step()\n    lib.stepprof_mark(b'py')\nprint('done')",
			       NULL),
		     0, "%s", r.err);
	cr_expect_str_eq(r.out, "done\n");
	sp_t_result_free(&r);
	struct sp_json *j = info(dir);
	struct sp_json *f = file0(j);
	cr_expect_eq(sp_json_u64(f, "records_by_kind.step", 0), 7);
	cr_expect_eq(sp_json_u64(f, "records_by_kind.mark", 0), 7);
	sp_json_free(j);
	sp_t_rmrf(dir);
}

/* Every chunk a thread used is closed at its exit (pthread key destructor), the
 * main thread's at exit; the header says the process ended cleanly. */
Test(recorder, threads_close_their_chunks_at_exit)
{
	char *dir = sp_t_tmpdir("recclose");
	struct sp_t_result r;
	char *extra[] = {"STEPPROF_MAX_MB=8", NULL}; /* the test reads the whole file */
	cr_assert_eq(markgen(&r, dir, extra, "-t 6 -n 5000 -s 3"), 0, "%s", r.err);
	sp_t_result_free(&r);
	struct sp_json *j = info(dir);
	const char *path = sp_json_str(file0(j), "path");
	cr_assert(path);
	size_t len;
	char *raw = sp_t_read_file(path, &len);
	cr_assert(raw && len >= SP_HEADER_SIZE);
	const struct sp_file_header *h = (const struct sp_file_header *)raw;
	cr_expect_gt(h->end_mono_ns, h->start_mono_ns, "clean exit recorded");
	uint64_t ring_off = SP_HEADER_SIZE + h->keep_slots * SP_SLOT_SIZE;
	unsigned used = 0;
	for (uint32_t i = 0; i < h->ring_chunks; i++) {
		const struct sp_chunk_header *c = (const void *)(raw + ring_off + (uint64_t)i * h->chunk_size);
		if (c->magic != SP_CHUNK_MAGIC)
			continue;
		used++;
		cr_expect_eq(c->state, SP_CHUNK_CLOSED, "chunk %u of tid %d left in state %u", i, c->tid, c->state);
	}
	cr_expect_geq(used, 7, "six writer threads and the main thread");
	free(raw);
	sp_json_free(j);
	sp_t_rmrf(dir);
}

/* ------------------------------------------------------------- the ring cap */

Test(recorder, small_cap_keeps_newest_and_counts_overwritten, .timeout = 300)
{
	char *dir = sp_t_tmpdir("reccap");
	struct sp_t_result r;
	char *extra[] = {"STEPPROF_MAX_MB=4", NULL};
	const long threads = 8, per = 1000000, total = threads * (per + 1);
	cr_assert_eq(markgen(&r, dir, extra, "-t 8 -n 1000000 -P 10 -L"), 0, "%s", r.err);
	sp_t_result_free(&r);

	struct sp_json *j = info(dir);
	struct sp_json *f = only_file(j);
	const char *path = sp_json_str(f, "path");
	struct stat st;
	cr_assert_eq(stat(path, &st), 0);
	cr_expect_leq(st.st_size, 4 << 20, "file size %ld over the 4 MiB cap", (long)st.st_size);
	cr_expect_leq(st.st_blocks * 512, 4 << 20, "disk use %ld over the cap", (long)st.st_blocks * 512);

	uint64_t kept = expect_marks_accounted(f, total).kept;
	cr_expect_gt(kept, 50000, "a 4 MiB file keeps more than 50,000 one-slot marks, got %lu", (unsigned long)kept);

	/* newest kept: per thread, what remains is a suffix of what it wrote (phases
	 * never go back, its final "last" mark is there) */
	struct sp_json **l;
	size_t n = dump(path, &l);
	cr_assert_eq(n, kept, "dump has %zu records, info says %lu marks", n, (unsigned long)kept);
	long tids[64], phase[64], nt = 0, lasts = 0;
	for (size_t i = 0; i < n; i++) {
		long tid = sp_json_i64(l[i], "tid", -1), t;
		const char *name = sp_json_str(l[i], "name");
		cr_assert(name, "record %zu has no name", i);
		for (t = 0; t < nt && tids[t] != tid; t++)
			;
		if (t == nt) {
			cr_assert_lt(nt, 64);
			tids[nt] = tid, phase[nt++] = -1;
		}
		cr_expect_neq(phase[t], 100, "thread %ld has records after its last mark", tid);
		if (strcmp(name, "last") == 0) {
			phase[t] = 100;
			lasts++;
			continue;
		}
		long p = atol(name + 4);
		cr_expect_geq(p, phase[t], "thread %ld goes back from phase %ld to %ld", tid, phase[t], p);
		phase[t] = p;
	}
	for (long t = 0; t < nt; t++)
		cr_expect_eq(phase[t], 100, "thread %ld kept records but not its last one", tids[t]);
	cr_expect_geq(lasts, 1);
	sp_json_free_lines(l, n);
	sp_json_free(j);
	sp_t_rmrf(dir);
}

/*
 * More threads than ring chunks: some records find no free chunk (lost), and the
 * ring wraps over chunks that hold LOST records. Whatever the interleaving, every
 * mark written is kept, overwritten or counted lost, exactly once.
 */
Test(recorder, more_threads_than_chunks_every_mark_accounted, .timeout = 300)
{
	char *dir = sp_t_tmpdir("recmany");
	struct sp_t_result r;
	char *extra[] = {"STEPPROF_MAX_MB=4", NULL}; /* 55 chunks of 64 KiB */
	const long threads = 120, per = 20000;
	/* -B: every thread holds a chunk at once, so 65 of them find none at first */
	cr_assert_eq(markgen(&r, dir, extra, "-t 120 -n 20000 -B"), 0, "%s", r.err);
	sp_t_result_free(&r);
	struct sp_json *j = info(dir);
	struct sp_json *f = only_file(j);
	struct marks_fate m = expect_marks_accounted(f, threads * per);
	cr_log_info("%ld threads x %ld marks: kept %lu, overwritten %lu, lost %lu", threads, per, (unsigned long)m.kept,
		    (unsigned long)m.over, (unsigned long)m.lost);
	cr_expect_gt(m.over, 0, "2.4 M marks through a 4 MiB ring");
	cr_expect_geq(m.lost, 65, "120 threads holding a chunk each, 55 chunks");
	sp_json_free(j);
	sp_t_rmrf(dir);
}

/* ---------------------------------------------------------------- crashes */

Test(recorder, sigkill_loses_nothing_written)
{
	char *dir = sp_t_tmpdir("reckill");
	struct sp_t_result r;
	int st = markgen(&r, dir, NULL, "-n 1000000 -k 100000");
	cr_assert_eq(st, 128 + 9, "markgen should die of SIGKILL, status %d", st);
	sp_t_result_free(&r);
	expect_marks_kept(dir, 1, 100000);
	sp_t_rmrf(dir);
}

Test(recorder, exit_without_destructors_loses_nothing)
{
	char *dir = sp_t_tmpdir("recquick");
	struct sp_t_result r;
	cr_assert_eq(markgen(&r, dir, NULL, "-n 100000 -q"), 0);
	sp_t_result_free(&r);
	expect_marks_kept(dir, 1, 100000);
	sp_t_rmrf(dir);
}

/*
 * A signal handler that marks while its thread is making a record of its own
 * (markgen -I: SIGUSR1 every 20 us during 2,000,000 marks; the handler marks
 * "sig"). Each of the program's marks and each handler's mark is kept or counted
 * lost, exactly once, and no slot is damaged. Were the handler's record to go
 * into the slot the interrupted record is being written to, 26 of the
 * program's marks and 105 of 2,008 handler marks would vanish, none counted.
 */
Test(recorder, marks_from_a_signal_handler_are_kept_or_counted, .timeout = 120)
{
	char *dir = sp_t_tmpdir("recsig");
	struct sp_t_result r;
	cr_assert_eq(markgen(&r, dir, NULL, "-n 2000000 -I 20"), 0, "%s", r.err);
	const char *s = strstr(r.out, "signals=");
	cr_assert_not_null(s, "stdout: %s", r.out);
	long sigs = atol(s + 8);
	sp_t_result_free(&r);
	cr_assert_geq(sigs, 20, "only %ld signals handled: the test says nothing", sigs);
	struct sp_json *j = info(dir);
	struct sp_json *f = only_file(j);
	expect_marks_accounted(f, 2000000 + sigs);
	cr_expect(!sp_json_num(f, "corrupt", 1) && !sp_json_num(f, "truncated", 1), "the trace is damaged");
	sp_json_free(j);
	sp_t_rmrf(dir);
}

/*
 * fork() in a signal handler, the child going on with what its thread was doing
 * (markgen -I 100 -Y 200: SIGUSR1 every 100 us during 300,000 marks; the first
 * 200 handler calls fork, each child returns into the interrupted code, writes
 * 10 marks and exits 0). Neither process is harmed and the parent's records are
 * all kept or counted. It guards against a child dying of SIGSEGV (the record
 * it goes on with pointing into the mapping the fork unmapped; about 1 child in
 * 5) and the parent dying of SIGBUS (in 2 runs of 3): a child forked while the
 * parent makes its trace file must not finish the creation on cleared state
 * and truncate the parent's file to 0 bytes.
 */
Test(recorder, fork_in_a_signal_handler_harms_neither_process, .timeout = 240)
{
	for (int run = 0; run < 3; run++) {
		char *dir = sp_t_tmpdir("recsigfork");
		struct sp_t_result r;
		int st = markgen(&r, dir, NULL, "-n 300000 -I 100 -Y 200");
		cr_assert_eq(st, 0, "run %d: markgen exited %d: %s", run, st, r.err);
		const char *s = strstr(r.out, "signals="), *k = strstr(r.out, "sigforks=");
		cr_assert(s && k, "stdout: %s", r.out);
		long sigs = atol(s + 8), forks = atol(k + 9),
		     bad = strstr(k, "bad=") ? atol(strstr(k, "bad=") + 4) : -1;
		cr_assert_geq(forks, 5, "only %ld forks in handlers: the test says nothing", forks);
		cr_expect_eq(bad, 0, "run %d: %ld of %ld children forked in a handler did not exit 0", run, bad, forks);
		for (const char *l = r.err; l && *l; l = strchr(l, '\n'), l = l ? l + 1 : l)
			cr_expect(strncmp(l, "stepprof:", 9) != 0 || strstr(l, "signal handler") < strchr(l, '\n'),
				  "only the unrecorded children's warning: %.200s", l);
		long parent = out_pid(r.out);
		sp_t_result_free(&r);
		struct sp_json *j = info(dir);
		struct sp_json *f = file_of(j, parent, 0);
		cr_assert(f, "no file of the parent %ld", parent);
		uint64_t got = sp_json_u64(f, "records_by_kind.mark", 0) + sp_json_u64(f, "records_by_kind.fork", 0) +
			       sp_json_u64(f, "lost", 0) + sp_json_u64(f, "overwritten", 0);
		cr_expect_eq(got, (uint64_t)(300000 + sigs + forks), "the parent's marks and forks: %lu, not %ld",
			     (unsigned long)got, 300000 + sigs + forks);
		struct sp_json *files = sp_json_get(j, "files");
		for (size_t i = 0; files && i < files->n; i++)
			cr_expect(!sp_json_num(&files->kids[i], "corrupt", 1) &&
				      !sp_json_num(&files->kids[i], "truncated", 1),
				  "a damaged trace file");
		sp_json_free(j);
		sp_t_rmrf(dir);
		free(dir);
	}
}

/*
 * stepprof_mark/stepprof_step called by the constructor of a library the program
 * links (built here: libctormark.so, linked NEEDED by ctormain), which the
 * dynamic loader runs before libstepprof.so's own constructor: the first call
 * starts the recorder. Dropped without a count (the recorder not started yet),
 * they would leave the trace with the program's marks only.
 */
static const char ctor_lib_src[] =
    "#include <dlfcn.h>\n"
    "__attribute__((constructor)) static void early(void)\n"
    "{\n"
    "\tvoid (*mark)(const char *) = (void (*)(const char *))dlsym(RTLD_DEFAULT, \"stepprof_mark\");\n"
    "\tvoid (*step)(void) = (void (*)(void))dlsym(RTLD_DEFAULT, \"stepprof_step\");\n"
    "\tif (mark)\n\t\tmark(\"lib_ctor\");\n"
    "\tif (step)\n\t\tstep();\n"
    "}\n";
static const char ctor_main_src[] = "#include <dlfcn.h>\n"
				    "int main(void)\n"
				    "{\n"
				    "\tvoid (*mark)(const char *) = (void (*)(const char *))dlsym(RTLD_DEFAULT, "
				    "\"stepprof_mark\");\n"
				    "\tif (mark)\n\t\tmark(\"in_main\");\n"
				    "\treturn 0;\n"
				    "}\n";

Test(recorder, marks_from_a_linked_librarys_constructor_are_recorded, .timeout = 120)
{
	char *dir = sp_t_tmpdir("recctor");
	char src[600], exe[600], trace[600], cmd[2048];
	snprintf(src, sizeof(src), "%s/ctormark.c", dir);
	cr_assert_eq(sp_t_write_file(src, ctor_lib_src, strlen(ctor_lib_src)), 0);
	snprintf(src, sizeof(src), "%s/ctormain.c", dir);
	cr_assert_eq(sp_t_write_file(src, ctor_main_src, strlen(ctor_main_src)), 0);
	snprintf(cmd, sizeof(cmd),
		 "cd %s && cc -shared -fPIC -o libctormark.so ctormark.c -ldl && "
		 "cc -o ctormain ctormain.c -L. -Wl,--no-as-needed -lctormark -Wl,-rpath,%s -ldl",
		 dir, dir);
	struct sp_t_result r;
	char *cc[] = {"/bin/sh", "-c", cmd, NULL};
	cr_assert_eq(sp_t_run(&r, cc, NULL, NULL, 60), 0, "cc failed: %s", r.err);
	sp_t_result_free(&r);
	snprintf(exe, sizeof(exe), "%s/ctormain", dir);
	snprintf(trace, sizeof(trace), "%s/trace", dir);
	char *argv[] = {exe, NULL};
	char *env[] = {env_preload(), env_dir(trace), NULL};
	cr_assert_eq(sp_t_run(&r, argv, env, NULL, 60), 0, "%s", r.err);
	cr_expect_eq(stepprof_lines(r.err), 0, "%s", r.err);
	sp_t_result_free(&r);
	struct sp_json *j = info(trace);
	struct sp_json *f = only_file(j);
	cr_expect_eq(sp_json_u64(f, "records_by_kind.mark", 0), 2, "the library constructor's mark and main's");
	cr_expect_eq(sp_json_u64(f, "records_by_kind.step", 0), 1, "the library constructor's step");
	sp_json_free(j);
	sp_t_rmrf(dir);
	free(dir);
}

/* ------------------------------------------------------------ fork, exec */

Test(recorder, fork_gives_each_process_its_own_file)
{
	char *dir = sp_t_tmpdir("recfork");
	struct sp_t_result r;
	cr_assert_eq(markgen(&r, dir, NULL, "-n 1000 -f 500"), 0, "%s", r.err);
	long parent = out_pid(r.out), child = child_pid(r.out);
	cr_assert(parent > 0 && child > 0, "stdout: %s", r.out);
	sp_t_result_free(&r);
	struct sp_json *j = info(dir);
	cr_assert_eq(nfiles(j), 2);
	struct sp_json *pf = file_of(j, parent, 0), *cf = file_of(j, child, 0);
	cr_assert(pf && cf, "files of parent %ld and child %ld", parent, child);
	cr_expect_eq(sp_json_i64(cf, "ppid", -1), parent);
	cr_expect_eq(sp_json_u64(pf, "records_by_kind.mark", 0), 1500);
	cr_expect_eq(sp_json_u64(cf, "records_by_kind.mark", 0), 500);

	struct sp_json **l;
	size_t n = dump(sp_json_str(pf, "path"), &l);
	cr_expect_eq(count_name(l, n, "mark", "mark"), 1000);
	cr_expect_eq(count_name(l, n, "mark", "after"), 500);
	cr_expect_eq(count_name(l, n, "mark", "child"), 0);
	/* the parent's fork(): one FORK record naming the child the program saw */
	cr_expect_eq(count_name(l, n, "fork", NULL), 1, "fork records in the parent's file");
	for (size_t i = 0; i < n; i++)
		if (!strcmp(sp_json_str(l[i], "kind") ? sp_json_str(l[i], "kind") : "", "fork"))
			cr_expect_eq(sp_json_i64(l[i], "child_pid", -1), child);
	sp_json_free_lines(l, n);
	n = dump(sp_json_str(cf, "path"), &l);
	cr_expect_eq(count_name(l, n, "mark", "child"), 500);
	cr_expect_eq(count_name(l, n, "mark", NULL), 500, "the child's file holds only the child's marks");
	cr_expect_eq(count_name(l, n, "fork", NULL), 0);
	sp_json_free_lines(l, n);
	sp_json_free(j);
	sp_t_rmrf(dir);
}

/* The child's strings are its own: a name the parent interned (and cached per
 * thread) before the fork is interned again in the child's file. */
Test(recorder, forked_child_resolves_names_the_parent_used)
{
	char *dir = sp_t_tmpdir("recfork2");
	struct sp_t_result r;
	cr_assert_eq(markgen(&r, dir, NULL, "-n 50 -m shared -f 20 -S"), 0, "%s", r.err);
	long child = child_pid(r.out);
	sp_t_result_free(&r);
	struct sp_json *j = info(dir);
	struct sp_json *cf = file_of(j, child, 0);
	cr_assert(cf, "file of child %ld", child);
	struct sp_json **l;
	size_t n = dump(sp_json_str(cf, "path"), &l);
	cr_expect_eq(count_name(l, n, "mark", NULL), 20);
	cr_expect_eq(count_name(l, n, "mark", "shared"), 20, "every mark of the child is named in its own file");
	sp_json_free_lines(l, n);
	sp_json_free(j);
	sp_t_rmrf(dir);
}

Test(recorder, exec_child_writes_its_own_file_beside)
{
	char *dir = sp_t_tmpdir("recexec");
	struct sp_t_result r;
	/* a forked child that execs itself, then the process itself execs in place */
	cr_assert_eq(markgen(&r, dir, NULL, "-n 100 -e 300 -x 200"), 0, "%s", r.err);
	long child = child_pid(r.out);
	/* the exec'd child prints first; the parent's line follows "child=" */
	const char *p = strstr(r.out, "child=");
	p = p ? strstr(p, "markgen pid=") : NULL;
	long parent = p ? atol(p + 12) : -1;
	cr_assert(child > 0 && parent > 0, "stdout: %s", r.out);
	sp_t_result_free(&r);
	struct sp_json *j = info(dir);
	cr_assert_eq(nfiles(j), 3, "parent, exec'd child, parent after exec in place");
	struct sp_json *cf = file_of(j, child, 0);
	cr_assert(cf);
	cr_expect_eq(sp_json_i64(cf, "ppid", -1), parent);
	cr_expect_eq(sp_json_u64(cf, "records_by_kind.mark", 0), 300);
	struct sp_json *a = file_of(j, parent, 0), *b = file_of(j, parent, 1);
	cr_assert(a && b, "two files for pid %ld (before and after exec)", parent);
	uint64_t ma = sp_json_u64(a, "records_by_kind.mark", 0), mb = sp_json_u64(b, "records_by_kind.mark", 0);
	cr_expect((ma == 100 && mb == 200) || (ma == 200 && mb == 100), "marks %lu and %lu", (unsigned long)ma,
		  (unsigned long)mb);
	sp_json_free(j);
	sp_t_rmrf(dir);
}

/*
 * A program that execs itself again and again (same pid): every image has its
 * file. Names tried <host>.<pid>.1 to .99 one by one would leave each image from
 * the 101st on unrecorded, with the warning "File exists" (150 execs: 100 files,
 * 51 warnings).
 */
Test(recorder, every_image_of_a_program_exec_ing_itself_has_its_file, .timeout = 120)
{
	char *dir = sp_t_tmpdir("recchain");
	struct sp_t_result r;
	cr_assert_eq(markgen(&r, dir, NULL, "-n 1 -X 150"), 0, "%s", r.err);
	cr_expect_eq(stepprof_lines(r.err), 0, "%.300s", r.err);
	long pid = out_pid(r.out);
	sp_t_result_free(&r);
	struct sp_json *j = info(dir);
	cr_expect_eq(nfiles(j), 151, "the first image and 150 execs of pid %ld", pid);
	struct sp_json *files = sp_json_get(j, "files");
	uint64_t marks = 0;
	for (size_t i = 0; files && i < files->n; i++) {
		cr_expect_eq(sp_json_i64(&files->kids[i], "pid", -1), pid);
		marks += sp_json_u64(&files->kids[i], "records_by_kind.mark", 0);
	}
	cr_expect_eq(marks, 151, "one mark per image");
	sp_json_free(j);
	sp_t_rmrf(dir);
	free(dir);
}

Test(recorder, program_reusing_the_trace_fd_is_not_touched)
{
	char *dir = sp_t_tmpdir("recfd");
	char user[700], envf[800];
	snprintf(user, sizeof(user), "%s/user.dat", dir);
	snprintf(envf, sizeof(envf), "MARKGEN_FILE=%s", user);
	char sub[700];
	snprintf(sub, sizeof(sub), "%s/trace", dir);
	struct sp_t_result r;
	char *extra[] = {envf, NULL};
	/* 10,000 marks after the dup2 storm: several new chunks, each a disk reservation */
	cr_assert_eq(markgen(&r, sub, extra, "-n 100 -C 10000"), 0, "%s", r.err);
	cr_expect(strstr(r.out, "user_size=0\n"), "the program's own file must stay empty: %s", r.out);
	cr_expect_eq(r.errlen, 0, "no warning: %s", r.err);
	sp_t_result_free(&r);
	expect_marks_kept(sub, 0, 10100);
	sp_t_rmrf(dir);
}

/* ------------------------------------------------------- trace directory */

/*
 * markgen args, run by a shell in directory cwd with STEPPROF_DIR unset and the
 * assignments vars ("" or "NAME=value ") before it; it must succeed. Only
 * markgen is preloaded, not the shell.
 */
static void markgen_in(struct sp_t_result *r, const char *cwd, const char *vars, const char *args, int timeout_s)
{
	char so[512], mg[512], cmd[2048];
	cr_assert(realpath(sp_t_build("lib/libstepprof.so"), so) && realpath(sp_t_build("tests/bin/markgen"), mg));
	snprintf(cmd, sizeof(cmd), "cd %s && %sLD_PRELOAD=%s exec %s %s", cwd, vars, so, mg, args);
	char *argv[] = {"/bin/sh", "-c", cmd, NULL};
	char *env[] = {"STEPPROF_DIR=", NULL};
	cr_assert_eq(sp_t_run(r, argv, env, NULL, timeout_s), 0, "%s", r->err);
}

Test(recorder, default_directory_is_created_and_shared_with_children)
{
	char *cwd = sp_t_tmpdir("reccwd");
	struct sp_t_result r;
	/* the directory is chosen in the current directory */
	markgen_in(&r, cwd, "", "-n 10 -f 5 -e 7", 60);
	long parent = out_pid(r.out);
	sp_t_result_free(&r);
	DIR *d = opendir(cwd);
	struct dirent *e;
	char found[512] = "";
	int dirs = 0;
	while ((e = readdir(d)))
		if (strncmp(e->d_name, "stepprof-", 9) == 0) {
			dirs++;
			snprintf(found, sizeof(found), "%s/%s", cwd, e->d_name);
			char suffix[32];
			snprintf(suffix, sizeof(suffix), "-%ld", parent);
			cr_expect(strlen(e->d_name) == strlen("stepprof-YYYYmmdd-HHMMSS") + strlen(suffix) &&
				      strcmp(e->d_name + strlen(e->d_name) - strlen(suffix), suffix) == 0,
				  "directory %s is not stepprof-YYYYmmdd-HHMMSS-%ld", e->d_name, parent);
		}
	closedir(d);
	cr_assert_eq(dirs, 1, "one trace directory in %s", cwd);
	struct stat st;
	cr_assert_eq(stat(found, &st), 0);
	cr_expect_eq(st.st_mode & 0777, 0700);
	struct sp_json *j = info(found);
	cr_expect_eq(nfiles(j), 3, "parent, forked child and exec'd child all write into %s", found);
	sp_json_free(j);
	sp_t_rmrf(cwd);
}

/*
 * The trace directory deleted while the process runs (a job's clean-up): the
 * process goes on unharmed and says, at its exit, that what it recorded is
 * gone, not exit 0 without a word with nothing left of the run (as the eBPF
 * collector does: bpf::a_trace_removed_while_tracing_is_reported).
 */
Test(recorder, a_trace_removed_while_the_process_runs_is_reported)
{
	char *top = sp_t_tmpdir("recrm");
	char dir[600];
	snprintf(dir, sizeof(dir), "%s/trace", top);
	struct sp_t_result r;
	cr_assert_eq(markgen(&r, dir, NULL, "-n 5000 -R 100000"), 0, "%s", r.err);
	cr_expect(strstr(r.out, "marks=105000"), "%s", r.out);
	cr_expect_eq(stepprof_lines(r.err), 1, "one warning: %s", r.err);
	cr_expect(strstr(r.err, "was removed while the process ran"), "%s", r.err);
	sp_t_result_free(&r);
	cr_expect_eq(entries(top), 0, "the directory stays removed");
	sp_t_rmrf(top);
	free(top);
}

/*
 * A long STEPPROF_DIR is used whole, or refused with one warning: never a prefix
 * of it: a relative one cut at 200 bytes (269 asked) would send the traces to,
 * and tell the exec'd child, a directory 200 bytes long, and an absolute one
 * past the writer's 1,023 bytes would make directories of its prefix and warn
 * "cannot create a trace file in" that prefix.
 */
Test(recorder, a_long_trace_directory_is_used_whole_or_refused)
{
	char *cwd = sp_t_tmpdir("reclong");
	char rel[400] = "", vars[512], path[1024];
	for (int i = 0; i < 15; i++)
		snprintf(rel + strlen(rel), sizeof(rel) - strlen(rel), "%ssub%03d_abcdefghij", i ? "/" : "", i);
	cr_assert_eq(strlen(rel), 269);
	snprintf(vars, sizeof(vars), "STEPPROF_DIR=%s ", rel);
	struct sp_t_result r;
	markgen_in(&r, cwd, vars, "-n 10 -e 5", 60);
	cr_expect_eq(stepprof_lines(r.err), 0, "%s", r.err);
	sp_t_result_free(&r);
	snprintf(path, sizeof(path), "%s/%s", cwd, rel);
	struct stat st;
	cr_assert_eq(stat(path, &st), 0, "no trace directory %s", path);
	struct sp_json *j = info(path);
	cr_expect_eq(nfiles(j), 2, "the process and its exec'd child write into the directory asked for");
	sp_json_free(j);
	sp_t_rmrf(cwd);

	/* 1,111 bytes: more than a trace file's path leaves a directory (SP_TF_DIR_MAX) */
	char *top = sp_t_tmpdir("reclonga"), big[1400];
	snprintf(big, sizeof(big), "%s", top);
	while (strlen(big) < 1100)
		snprintf(big + strlen(big), sizeof(big) - strlen(big), "/abcdefghijklmnopqrstuvwxyz");
	cr_assert_gt(strlen(big), SP_TF_DIR_MAX);
	cr_assert_eq(markgen(&r, big, NULL, "-n 10"), 0, "%s", r.err);
	cr_expect(strstr(r.out, "marks=10"), "%s", r.out);
	cr_expect_eq(stepprof_lines(r.err), 1, "one warning: %s", r.err);
	cr_expect(strstr(r.err, "bytes long"), "the warning says why: %s", r.err);
	cr_expect_eq(entries(top), 0, "nothing made in %s (a prefix of the directory asked for)", top);
	sp_t_result_free(&r);
	sp_t_rmrf(top);
	free(top);
}

/* Pages of the file at path that are in the page cache (mincore on a mapping that touches none). */
static long resident_pages(const char *path)
{
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	cr_assert_geq(fd, 0, "%s: %s", path, strerror(errno));
	struct stat st;
	cr_assert_eq(fstat(fd, &st), 0);
	long pg = sysconf(_SC_PAGESIZE);
	size_t npages = ((size_t)st.st_size + (size_t)pg - 1) / (size_t)pg;
	void *m = mmap(NULL, (size_t)st.st_size, PROT_READ, MAP_SHARED, fd, 0);
	cr_assert_neq(m, MAP_FAILED);
	unsigned char *vec = malloc(npages);
	cr_assert_eq(mincore(m, (size_t)st.st_size, vec), 0, "mincore: %s", strerror(errno));
	long n = 0;
	for (size_t i = 0; i < npages; i++)
		n += vec[i] & 1;
	free(vec);
	munmap(m, (size_t)st.st_size);
	close(fd);
	return n;
}

/*
 * A short process costs what it writes, not a readahead of the file's hole: the
 * first fault on the mapping (the header) made Linux 6.18 on ext4 read ahead and
 * zero 8 MiB of page cache for every process (2,064 pages; 2.7 ms of a `cat`).
 * Ten marks need the header, the keep area's first 64 KiB and one 64 KiB chunk.
 */
Test(recorder, a_short_process_costs_what_it_writes_in_memory)
{
	char *dir = sp_t_tmpdir("recra");
	struct sp_t_result r;
	cr_assert_eq(markgen(&r, dir, NULL, "-n 10"), 0, "%s", r.err);
	long pid = out_pid(r.out);
	sp_t_result_free(&r);
	char path[PATH_MAX];
	struct utsname u;
	uname(&u);
	snprintf(path, sizeof(path), "%s/%s.%ld.sptrace", dir, u.nodename, pid);
	long pages = resident_pages(path), pg = sysconf(_SC_PAGESIZE);
	cr_expect_leq(pages * pg, 512 * 1024, "%ld pages of %s in the page cache after 10 marks", pages, path);
	expect_marks_kept(dir, 1, 10);
	sp_t_rmrf(dir);
	free(dir);
}

Test(recorder, process_recording_nothing_leaves_nothing)
{
	char *cwd = sp_t_tmpdir("recnone");
	struct sp_t_result r;
	/* STEPPROF_IO=off: only the recorder is under test, not what the libc hooks see */
	markgen_in(&r, cwd, "STEPPROF_IO=off ", "-n 0", 30);
	sp_t_result_free(&r);
	DIR *d = opendir(cwd);
	struct dirent *e;
	int n = 0;
	while ((e = readdir(d)))
		if (e->d_name[0] != '.')
			n++;
	closedir(d);
	cr_expect_eq(n, 0, "no trace directory for a process without records");
	sp_t_rmrf(cwd);
}

Test(recorder, disable_records_nothing)
{
	char *dir = sp_t_tmpdir("recoff");
	char sub[600];
	snprintf(sub, sizeof(sub), "%s/t", dir);
	struct sp_t_result r;
	char *extra[] = {"STEPPROF_DISABLE=1", NULL};
	cr_assert_eq(markgen(&r, sub, extra, "-n 1000 -f 10"), 0);
	cr_expect_eq(r.errlen, 0, "stderr: %s", r.err);
	sp_t_result_free(&r);
	struct stat st;
	cr_expect_neq(stat(sub, &st), 0, "STEPPROF_DISABLE=1 must not create %s", sub);
	sp_t_rmrf(dir);
}

/* --------------------------------------------------- degraded conditions */

/*
 * The test's mounts in a mount namespace of its own (Criterion runs each test in
 * its own process): a test killed by its timeout leaves no tmpfs mounted behind.
 * Without the privilege the mounts are made as before (and then refused anyway).
 */
static void private_mounts(void)
{
	if (unshare(CLONE_NEWNS) == 0)
		mount(NULL, "/", NULL, MS_REC | MS_PRIVATE, NULL);
}

/* Output and status of markgen without the preload, to compare with. */
static void plain_run(struct sp_t_result *r, const char *args)
{
	char *argv[32], *copy = markgen_argv(argv, args);
	char *env[] = {"LD_PRELOAD=", NULL};
	sp_t_run(r, argv, env, NULL, 60);
	free(copy);
}

/* Same stdout except the pids, same status. */
static void expect_same_behaviour(struct sp_t_result *a, struct sp_t_result *b)
{
	cr_expect_eq(a->status, b->status, "exit status %d vs %d without stepprof", a->status, b->status);
	const char *pa = strstr(a->out, "marks="), *pb = strstr(b->out, "marks=");
	cr_expect(pa && pb && strcmp(pa, pb) == 0, "stdout differs: [%s] vs [%s]", a->out, b->out);
}

Test(recorder, unwritable_dir_one_warning_program_unchanged)
{
	char *dir = sp_t_tmpdir("recro");
	char target[600];
	/* root ignores permission bits: a read-only mount is unwritable for everyone */
	private_mounts();
	if (mount("tmpfs", dir, "tmpfs", MS_RDONLY, "size=64k") == 0) {
		snprintf(target, sizeof(target), "%s/trace", dir);
	} else {
		cr_log_info("mount refused: using a path below a regular file instead");
		snprintf(target, sizeof(target), "%s/file/trace", dir);
		char f[600];
		snprintf(f, sizeof(f), "%s/file", dir);
		sp_t_write_file(f, "x", 1);
	}
	struct sp_t_result r, plain;
	markgen(&r, target, NULL, "-t 2 -n 1000 -c 3");
	plain_run(&plain, "-t 2 -n 1000 -c 3");
	expect_same_behaviour(&r, &plain);
	cr_expect_eq(stepprof_lines(r.err), 1, "one stepprof: warning, stderr: %s", r.err);
	cr_expect(r.errlen > 0 && strchr(r.err, '\n') == r.err + r.errlen - 1, "nothing else on stderr: %s", r.err);
	sp_t_result_free(&r);
	sp_t_result_free(&plain);
	umount(dir);
	sp_t_rmrf(dir);
}

Test(recorder, full_disk_one_warning_program_unchanged_lost_counted, .timeout = 120)
{
	char *dir = sp_t_tmpdir("recfull");
	private_mounts();
	if (mount("tmpfs", dir, "tmpfs", 0, "size=1m") != 0) {
		sp_t_rmrf(dir);
		cr_skip_test("mount -t tmpfs refused (not root?): full-disk test skipped");
	}
	char target[600];
	snprintf(target, sizeof(target), "%s/trace", dir);
	struct sp_t_result r, plain;
	markgen(&r, target, NULL, "-t 4 -n 200000 -c 3");
	plain_run(&plain, "-t 4 -n 200000 -c 3");
	expect_same_behaviour(&r, &plain);
	cr_expect_eq(stepprof_lines(r.err), 1, "one stepprof: warning, stderr: %s", r.err);
	cr_expect(strstr(r.err, "No space left"), "the warning says why: %s", r.err);
	cr_expect_null(strstr(r.out, "errno_changed"), "errno changed on a full disk: %s", r.out);
	struct sp_json *j = info(target);
	struct sp_json *f = only_file(j);
	uint64_t kept = sp_json_u64(f, "records_by_kind.mark", 0), lost = sp_json_u64(f, "lost", 0);
	cr_expect_gt(lost, 0);
	cr_expect_gt(kept, 0);
	cr_expect_eq(kept + lost, 800000, "kept %lu + lost %lu", (unsigned long)kept, (unsigned long)lost);
	sp_json_free(j);
	sp_t_result_free(&r);
	sp_t_result_free(&plain);
	umount(dir);
	sp_t_rmrf(dir);
}

/*
 * docs/architecture.md's rules and `ulimit -f`: a write or truncate past RLIMIT_FSIZE gets SIGXFSZ,
 * which kills the program. The trace file stays under the limit set before it is
 * created, none is made when the limit is below the smallest file, and a limit
 * lowered while the program runs costs records, never the program.
 */
Test(recorder, file_size_limit_never_kills_the_program, .timeout = 120)
{
	char *dir = sp_t_tmpdir("recfsize");
	char capped[600], tiny[600], lowered[600];
	snprintf(capped, sizeof(capped), "%s/capped", dir);
	snprintf(tiny, sizeof(tiny), "%s/tiny", dir);
	snprintf(lowered, sizeof(lowered), "%s/lowered", dir);
	struct sp_t_result r, plain;

	/* 10 MiB limit, ~19 MiB of marks: the file is sized under it and its ring wraps */
	markgen(&r, capped, NULL, "-F 10485760 -n 600000 -c 3");
	plain_run(&plain, "-F 10485760 -n 600000 -c 3");
	expect_same_behaviour(&r, &plain);
	cr_expect_eq(stepprof_lines(r.err), 0, "no warning: %s", r.err);
	struct sp_json *j = info(capped);
	struct sp_json *f = only_file(j);
	struct stat st;
	cr_assert_eq(stat(sp_json_str(f, "path"), &st), 0);
	cr_expect_leq(st.st_size, 10485760, "file of %ld bytes past the limit", (long)st.st_size);
	cr_expect_geq(st.st_size, 8 << 20, "file of %ld bytes: the limit's space unused", (long)st.st_size);
	struct marks_fate m = expect_marks_accounted(f, 600000);
	cr_expect_gt(m.kept, 0);
	cr_expect_gt(m.over, 0, "the ring wrapped");
	sp_json_free(j);
	sp_t_result_free(&r);
	sp_t_result_free(&plain);

	/* 1 MiB: below the smallest trace file (4 MiB): one warning, no file */
	markgen(&r, tiny, NULL, "-F 1048576 -n 1000 -c 3");
	plain_run(&plain, "-F 1048576 -n 1000 -c 3");
	expect_same_behaviour(&r, &plain);
	cr_expect_eq(stepprof_lines(r.err), 1, "one stepprof: warning, stderr: %s", r.err);
	cr_expect(strstr(r.err, "ulimit -f"), "the warning says why: %s", r.err);
	cr_expect_eq(entries(tiny), 0, "no trace file under a 1 MiB limit");
	sp_t_result_free(&r);
	sp_t_result_free(&plain);

	/* lowered to 1 MiB after 200,000 marks (a 1 GiB file, its ring past 64 MiB): the rest is lost, counted */
	markgen(&r, lowered, NULL, "-G 1048576 -n 200000 -c 3");
	plain_run(&plain, "-G 1048576 -n 200000 -c 3");
	expect_same_behaviour(&r, &plain);
	cr_expect_eq(stepprof_lines(r.err), 1, "one stepprof: warning, stderr: %s", r.err);
	cr_expect(strstr(r.err, "File too large"), "the warning says why: %s", r.err);
	j = info(lowered);
	f = only_file(j);
	m = expect_marks_accounted(f, 400000);
	cr_expect_geq(m.kept, 200000, "the marks before the limit are kept");
	cr_expect_gt(m.lost, 0);
	sp_json_free(j);
	sp_t_result_free(&r);
	sp_t_result_free(&plain);
	sp_t_rmrf(dir);
}

/* Set the soft limit of `resource` (inherited through fork) to value; returns the old one to give back. */
static struct rlimit limit_soft(int resource, uint64_t value)
{
	struct rlimit old, lim;
	cr_assert_eq(getrlimit(resource, &old), 0);
	lim = old;
	lim.rlim_cur = (rlim_t)value;
	cr_assert_eq(setrlimit(resource, &lim), 0);
	return old;
}

/* markgen ARGS run with the soft address space limit (RLIMIT_AS) at `bytes`. */
static int markgen_under_as_limit(struct sp_t_result *r, const char *dir, uint64_t bytes, const char *args, int preload)
{
	struct rlimit old = limit_soft(RLIMIT_AS, bytes);
	int st;
	if (preload) {
		st = markgen(r, dir, NULL, args);
	} else {
		char *argv[32], *copy = markgen_argv(argv, args);
		char *env[] = {"LD_PRELOAD=", NULL};
		st = sp_t_run(r, argv, env, NULL, 60);
		free(copy);
	}
	setrlimit(RLIMIT_AS, &old);
	return st;
}

/*
 * Under a low descriptor limit (ulimit -n 64) a recorded program has every
 * number it has without stepprof: the trace file is held by its mapping, not
 * by a descriptor, so the first open gets the number it gets bare and as many
 * opens succeed. (Python: it records its start-up reads, so its trace file
 * exists before the script's first open.)
 */
Test(recorder, low_descriptor_limit_keeps_the_programs_numbers)
{
	char *dir = sp_t_tmpdir("recnofile");
	const char *py = "/usr/bin/python3";
	if (access(py, X_OK) != 0)
		cr_skip_test("%s missing", py);
	char *argv[] = {(char *)py, "-c",
			"import os\nfds = []\ntry:\n    while True: fds.append(os.open('/dev/null', os.O_RDONLY))\n"
			"except OSError:\n    print('first', fds[0], 'count', len(fds))",
			NULL};
	char *env_plain[] = {"LD_PRELOAD=", NULL};
	char *env_pre[] = {env_preload(), env_dir(dir), "STEPPROF_IO=libc", NULL};
	struct sp_t_result plain, r;
	struct rlimit old = limit_soft(RLIMIT_NOFILE, 64);
	sp_t_run(&plain, argv, env_plain, NULL, 60);
	sp_t_run(&r, argv, env_pre, NULL, 60);
	setrlimit(RLIMIT_NOFILE, &old);
	int pf = -1, pc = -1, rf = -1, rc = -1;
	cr_assert_eq(sscanf(plain.out, "first %d count %d", &pf, &pc), 2, "%s%s", plain.out, plain.err);
	cr_assert_eq(sscanf(r.out, "first %d count %d", &rf, &rc), 2, "%s%s", r.out, r.err);
	cr_expect_eq(rf, pf, "first descriptor %d under stepprof, %d without", rf, pf);
	cr_expect_eq(rc, pc, "the preload holds no descriptor: %d opens against %d", rc, pc);
	cr_expect_eq(entries(dir), 1, "the python process was recorded");
	sp_t_result_free(&plain);
	sp_t_result_free(&r);
	sp_t_rmrf(dir);
}

/*
 * The trace file is mapped whole, and a mapping counts against the address space
 * limit (ulimit -v): a 1 GiB trace would leave a program under a 1.4 GB limit
 * without the 600 MiB it allocates fine without stepprof. Under a limit the file
 * takes at most a 16th of it (one warning); under a limit too small for that, no
 * file.
 */
Test(recorder, address_space_limit_leaves_the_program_its_memory, .timeout = 120)
{
	char *dir = sp_t_tmpdir("recas");
	char capped[600], tiny[600];
	snprintf(capped, sizeof(capped), "%s/capped", dir);
	snprintf(tiny, sizeof(tiny), "%s/tiny", dir);
	uint64_t limit = 1400ull << 20;
	struct sp_t_result r, plain;

	markgen_under_as_limit(&plain, NULL, limit, "-n 1000 -M 600 -c 3", 0);
	cr_assert(strstr(plain.out, "alloc=ok"), "600 MiB under 1.4 GB without stepprof: %s", plain.out);
	markgen_under_as_limit(&r, capped, limit, "-n 1000 -M 600 -c 3", 1);
	expect_same_behaviour(&r, &plain);
	cr_expect(strstr(r.out, "alloc=ok"), "the program's 600 MiB under the preload: %s", r.out);
	cr_expect_eq(stepprof_lines(r.err), 1, "one stepprof: warning, stderr: %s", r.err);
	cr_expect(strstr(r.err, "ulimit -v"), "the warning says why: %s", r.err);
	struct sp_json *j = info(capped);
	struct sp_json *f = only_file(j);
	struct stat st;
	cr_assert_eq(stat(sp_json_str(f, "path"), &st), 0);
	cr_expect_leq((uint64_t)st.st_size, limit / 16, "a file of %ld bytes", (long)st.st_size);
	cr_expect_eq(sp_json_u64(f, "records_by_kind.mark", 0), 1000);
	sp_json_free(j);
	sp_t_result_free(&r);
	sp_t_result_free(&plain);

	/* 48 MiB: a 16th is 3 MiB, under the smallest trace file: no file, the program unchanged */
	markgen_under_as_limit(&plain, NULL, 48ull << 20, "-n 1000 -c 3", 0);
	markgen_under_as_limit(&r, tiny, 48ull << 20, "-n 1000 -c 3", 1);
	expect_same_behaviour(&r, &plain);
	cr_expect(strstr(r.err, "ulimit -v"), "the warning says why: %s", r.err);
	cr_expect_eq(entries(tiny), 0, "no trace file under a 48 MiB limit");
	sp_t_result_free(&r);
	sp_t_result_free(&plain);
	sp_t_rmrf(dir);
}

/*
 * markgen ARGS under the preload with fd 2 = err_fd (stdout to /dev/null) and
 * SIGPIPE/SIGXFSZ at their default action, as a shell starts a job; its wait status.
 */
static int markgen_stderr_to(int err_fd, const char *dir, const char *args)
{
	char *argv[32], *copy = markgen_argv(argv, args);
	char *env[] = {env_preload(), env_dir(dir), "STEPPROF_MAX_MB=lots", NULL};
	pid_t pid = fork();
	if (pid == 0) {
		signal(SIGPIPE, SIG_DFL);
		signal(SIGXFSZ, SIG_DFL);
		sigset_t none;
		sigemptyset(&none);
		sigprocmask(SIG_SETMASK, &none, NULL);
		int devnull = open("/dev/null", O_WRONLY);
		dup2(devnull, 1);
		dup2(err_fd, 2);
		execve(argv[0], argv, env);
		_exit(127);
	}
	int status = -1;
	waitpid(pid, &status, 0);
	free(copy);
	return status;
}

/*
 * A warning is written to stderr: when that is a pipe nobody reads (`job 2>&1 |
 * head` after head left) the write raises SIGPIPE, when it is a file at the file
 * size limit SIGXFSZ; either kills a program by default. The warning here: a bad
 * STEPPROF_MAX_MB, at start-up.
 */
Test(recorder, a_warning_never_raises_sigpipe_or_sigxfsz)
{
	char *dir = sp_t_tmpdir("recsig");
	int p[2];
	cr_assert_eq(pipe(p), 0);
	close(p[0]); /* nobody will read */
	int st = markgen_stderr_to(p[1], dir, "-n 10 -c 3");
	close(p[1]);
	cr_expect(WIFEXITED(st) && WEXITSTATUS(st) == 3, "stderr a broken pipe: wait status 0x%x (signal %d)", st,
		  WIFSIGNALED(st) ? WTERMSIG(st) : 0);

	/* -F 0: a limit of 0 bytes, so the warnings' write to the empty stderr file is past it */
	char errfile[600];
	snprintf(errfile, sizeof(errfile), "%s/stderr.txt", dir);
	int fd = open(errfile, O_WRONLY | O_CREAT | O_TRUNC, 0600);
	cr_assert_geq(fd, 0);
	st = markgen_stderr_to(fd, dir, "-F 0 -n 10 -c 3");
	close(fd);
	cr_expect(WIFEXITED(st) && WEXITSTATUS(st) == 3, "stderr a file at the size limit: wait status 0x%x (signal %d)",
		  st, WIFSIGNALED(st) ? WTERMSIG(st) : 0);
	sp_t_rmrf(dir);
}

/*
 * markgen ARGS under the preload writing into trace, with fallocate answering
 * EOPNOTSUPP (a seccomp filter), as on a file system without it (NFSv3, some
 * FUSE file systems); stdout into *out. Its wait status.
 */
static int markgen_without_fallocate(const char *trace, const char *args, char **out)
{
	char *argv[32], *copy = markgen_argv(argv, args);
	char *env[] = {env_preload(), env_dir(trace), NULL};
	int p[2];
	cr_assert_eq(pipe(p), 0);
	pid_t pid = fork();
	if (pid == 0) {
		struct sock_filter f[] = {
		    BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, nr)),
		    BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, __NR_fallocate, 0, 1),
		    BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ERRNO | (EOPNOTSUPP & SECCOMP_RET_DATA)),
		    BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW),
		};
		struct sock_fprog prog = {sizeof(f) / sizeof(f[0]), f};
		if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0 || prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, &prog) != 0)
			_exit(126);
		dup2(p[1], 1);
		close(p[0]);
		execve(argv[0], argv, env);
		_exit(127);
	}
	close(p[1]);
	size_t cap = 4096, len = 0;
	char *buf = malloc(cap);
	ssize_t k;
	while ((k = read(p[0], buf + len, cap - len - 1)) > 0)
		if ((len += (size_t)k) + 1 == cap)
			buf = realloc(buf, cap *= 2);
	buf[len] = 0;
	close(p[0]);
	int status = -1;
	waitpid(pid, &status, 0);
	free(copy);
	*out = buf;
	return status;
}

/*
 * Without fallocate, disk space is reserved by writing zeros. In the keep area
 * two threads may need the same range at once; zeros written there after the
 * other thread's string would erase it, so one thread at a time writes them
 * (keep_space_zeros). 8 threads intern the same 8,000 names (~4 ranges of
 * 64 KiB of strings) at once: every mark must keep its name.
 */
Test(recorder, without_fallocate_every_string_is_kept, .timeout = 120)
{
	char *dir = sp_t_tmpdir("recnofalloc");
	char trace[600];
	snprintf(trace, sizeof(trace), "%s/trace", dir);
	char *out = NULL;
	int st = markgen_without_fallocate(trace, "-t 8 -B -n 8000 -P 8000 -m name", &out);
	if (WIFEXITED(st) && WEXITSTATUS(st) == 126)
		cr_skip_test("seccomp refused: the file system without fallocate is not simulated");
	cr_assert(WIFEXITED(st) && WEXITSTATUS(st) == 0, "wait status 0x%x", st);
	cr_expect(strstr(out, "marks=64000"), "%s", out);
	free(out);
	struct sp_json *j = info(trace);
	struct sp_json *f = only_file(j);
	cr_expect_eq(sp_json_u64(f, "records_by_kind.mark", 0), 64000);
	cr_expect_eq(sp_json_u64(f, "lost", 99), 0);
	char path[700];
	snprintf(path, sizeof(path), "%s", sp_json_str(f, "path"));
	sp_json_free(j);
	struct sp_json **l;
	size_t n = dump(path, &l), marks = 0, named = 0;
	for (size_t i = 0; i < n; i++) {
		const char *k = sp_json_str(l[i], "kind");
		if (!k || strcmp(k, "mark") != 0)
			continue;
		marks++;
		const char *name = sp_json_str(l[i], "name");
		named += name && strncmp(name, "name", 4) == 0 && name[4] >= '0' && name[4] <= '9';
	}
	sp_json_free_lines(l, n);
	cr_expect_eq(marks, 64000);
	cr_expect_eq(named, marks, "%zu of %zu marks lost their name", marks - named, marks);
	sp_t_rmrf(dir);
}

/* docs/architecture.md's rules: trace files are mode 0600, and a directory the user does not own is not written into. */
Test(recorder, files_private_and_foreign_owned_dir_refused)
{
	char *dir = sp_t_tmpdir("recown");
	char mine[600], theirs[600];
	snprintf(mine, sizeof(mine), "%s/mine", dir);
	snprintf(theirs, sizeof(theirs), "%s/theirs", dir);
	struct sp_t_result r, plain;
	cr_assert_eq(markgen(&r, mine, NULL, "-n 100 -f 10"), 0, "%s", r.err);
	sp_t_result_free(&r);
	struct sp_json *j = info(mine);
	cr_assert_eq(nfiles(j), 2);
	for (size_t i = 0; i < 2; i++) {
		struct stat st;
		const char *path = sp_json_str(sp_json_at(sp_json_get(j, "files"), i), "path");
		cr_assert_eq(lstat(path, &st), 0);
		cr_expect(S_ISREG(st.st_mode) && (st.st_mode & 0777) == 0600, "%s has mode %o", path,
			  (unsigned)st.st_mode & 0777);
	}
	sp_json_free(j);

	cr_assert_eq(mkdir(theirs, 0777), 0);
	uid_t other = geteuid() == 65534 ? 65533 : 65534;
	if (chown(theirs, other, other) != 0) {
		sp_t_rmrf(dir);
		cr_skip_test("chown refused (not root?): foreign-owned directory not checked");
	}
	markgen(&r, theirs, NULL, "-n 100 -c 5");
	plain_run(&plain, "-n 100 -c 5");
	expect_same_behaviour(&r, &plain);
	cr_expect_eq(stepprof_lines(r.err), 1, "one stepprof: warning, stderr: %s", r.err);
	cr_expect(strstr(r.err, "not owned"), "the warning says why: %s", r.err);
	cr_expect_eq(entries(theirs), 0, "nothing written into a directory owned by uid %d", (int)other);
	sp_t_result_free(&r);
	sp_t_result_free(&plain);
	sp_t_rmrf(dir);
}

Test(recorder, quiet_silences_every_warning)
{
	char *dir = sp_t_tmpdir("recquiet");
	char target[700], f[600];
	snprintf(f, sizeof(f), "%s/file", dir);
	sp_t_write_file(f, "x", 1);
	snprintf(target, sizeof(target), "%s/trace", f); /* below a regular file: cannot be created */
	struct sp_t_result r;
	char *extra[] = {"STEPPROF_QUIET=1", "STEPPROF_MAX_MB=lots", NULL};
	cr_assert_eq(markgen(&r, target, extra, "-n 100 -c 0"), 0);
	cr_expect_eq(r.errlen, 0, "stderr: %s", r.err);
	cr_expect(strstr(r.out, "marks=100"));
	sp_t_result_free(&r);
	sp_t_rmrf(dir);
}

Test(recorder, bad_config_value_one_warning_and_default)
{
	char *dir = sp_t_tmpdir("recbad");
	struct sp_t_result r;
	char *extra[] = {"STEPPROF_MAX_MB=lots", NULL};
	/* killed after its marks: no clean exit, so the file keeps the geometry of its cap (not compacted) */
	cr_assert_eq(markgen(&r, dir, extra, "-n 1000 -k 1000"), 128 + SIGKILL);
	cr_expect_eq(stepprof_lines(r.err), 1, "stderr: %s", r.err);
	cr_expect(strstr(r.err, "STEPPROF_MAX_MB"), "the warning names the variable: %s", r.err);
	sp_t_result_free(&r);
	struct sp_json *j = info(dir);
	struct sp_json *f = file0(j);
	cr_expect_eq(sp_json_u64(f, "records_by_kind.mark", 0), 1000);
	struct stat st;
	cr_assert_eq(stat(sp_json_str(f, "path"), &st), 0);
	cr_expect_gt(st.st_size, 1000 << 20, "the default cap (1024 MiB) is used");
	sp_json_free(j);
	sp_t_rmrf(dir);
}

/* Every variable of config.def: its name and type (the one list the preload parses). */
static const struct {
	const char *name, *type;
	unsigned readers;
} config_vars[] = {
#define SP_CONFIG(name, type, dflt, lo, hi, words, readers, help) {"STEPPROF_" #name, #type, readers},
#include "config.def"
#undef SP_CONFIG
};

/*
 * A bad value of any STEPPROF_* variable (but STEPPROF_DIR, where any string
 * is a path) is one warning naming it, in a job that exercises what reads the
 * variables later: the trainer launches kernels, allocates device memory and
 * reads files through its loader workers: STEPPROF_KERNEL_TIMING=foo must not
 * give two warnings, the parser's at start-up and the CUDA hooks' at the first
 * launch. And the default is used: with kernel timing's (auto), the first two
 * of the trainer's launches of its kernel (its own count, cudaLaunchKernel) have
 * their GPU span, and not every one does.
 */
Test(recorder, a_bad_value_of_any_variable_is_one_warning_and_the_default, .timeout = 240)
{
	for (size_t i = 0; i < sizeof(config_vars) / sizeof(config_vars[0]); i++) {
		if (!strcmp(config_vars[i].type, "STR") || !(config_vars[i].readers & SP_CFG_PRELOAD))
			continue;
		char *dir = sp_t_tmpdir("recbadvar"), trace[600], data[600], bad[128];
		snprintf(trace, sizeof(trace), "%s/trace", dir);
		snprintf(data, sizeof(data), "%s/data", dir);
		snprintf(bad, sizeof(bad), "%s=foo", config_vars[i].name);
		char *argv[] = {(char *)sp_t_build("tests/bin/trainer"), "--iters", "2", "--kernels", "3", "--workers", "1",
				"--files-per-iter", "2", "--data-dir", data, NULL};
		char *env[] = {env_preload(), env_dir(trace), bad, NULL};
		struct sp_t_result r;
		cr_assert_eq(sp_t_run(&r, argv, env, NULL, 120), 0, "%s: %s", bad, r.err);
		cr_expect_eq(stepprof_lines(r.err), 1, "%s: one warning, stderr: %s", bad, r.err);
		cr_expect(strstr(r.err, config_vars[i].name), "%s: the warning names the variable: %s", bad, r.err);
		struct sp_json *truth = sp_json_parse(r.out);
		cr_assert_not_null(truth, "%s: the trainer's ground truth: %s", bad, r.out);
		uint64_t launched = sp_json_u64(truth, "totals.by_api.cudaLaunchKernel", 0);
		sp_json_free(truth);
		sp_t_result_free(&r);
		if (!strcmp(config_vars[i].name, "STEPPROF_KERNEL_TIMING")) {
			struct sp_json *j = info(trace);
			struct sp_json *files = sp_json_get(j, "files");
			size_t launches = 0, timed = 0;
			for (size_t f = 0; files && f < files->n; f++) {
				struct sp_json **l;
				size_t n = dump(sp_json_str(&files->kids[f], "path"), &l);
				for (size_t k = 0; k < n; k++) {
					const char *kind = sp_json_str(l[k], "kind");
					if (kind && !strcmp(kind, "launch")) {
						launches++;
						timed += sp_json_get(l[k], "gpu_begin_ns") != NULL;
					}
				}
				sp_json_free_lines(l, n);
			}
			sp_json_free(j);
			cr_expect_eq(launches, 6, "%zu launch records for 2 iterations of 3 kernels", launches);
			cr_expect_eq(launched, 6, "the trainer's own count: %lu", (unsigned long)launched);
			/* auto, the default: a kernel's first 2 launches timed, then 1 in 32 at random (not all 4 others) */
			cr_expect(timed >= 2 && timed < launches, "%s: auto (the default): %zu of %zu launches timed", bad,
				  timed, launches);
		}
		sp_t_rmrf(dir);
		free(dir);
	}
}

/* ---------------------------------------------------------------- the bench */

static double field_after(const char *s, const char *key)
{
	const char *p = s ? strstr(s, key) : NULL;
	return p ? atof(p + strlen(key)) : -1e9;
}

/*
 * `make bench`'s 10-mark.sh prints the cost of stepprof_mark against an empty
 * call of the same run, in the BENCH line format. The number itself is not
 * judged here (a loaded machine), only that it measures a real mark: the same
 * program without the preload (stepprof_mark absent, a no-op called) adds less.
 */
Test(recorder, bench_prints_mark_cost_against_an_empty_call, .timeout = 120)
{
	const char *script = "scripts/bench.d/10-mark.sh";
	if (access(script, R_OK) != 0)
		cr_skip_test("%s not found (tests run from the repository root)", script);
	char *argv[] = {"/bin/bash", (char *)script, NULL};
	char *env[] = {"MARK_BENCH_CALLS=300000", NULL};
	struct sp_t_result r;
	cr_assert_eq(sp_t_run(&r, argv, env, NULL, 100), 0, "%s", r.err);
	int lines = 0;
	for (const char *p = r.out; (p = strstr(p, "BENCH stepprof_mark ")); p++) {
		lines++;
		const char *eol = strchr(p, '\n');
		cr_assert(eol, "%s", r.out);
		char line[300];
		snprintf(line, sizeof(line), "%.*s", (int)(eol - p), p);
		if (strstr(line, "clock_gettime clock")) /* STEPPROF_CLOCK=vdso: a comparison, no budget */
			cr_expect(strstr(line, " ns added per call (budget n/a, comparison) ok"), "BENCH line format: %s",
				  line);
		else
			cr_expect(strstr(line, " ns added per call (budget 30) ok") ||
				      strstr(line, " ns added per call (budget 30) OVER"),
				  "BENCH line format: %s", line);
	}
	cr_expect_eq(lines, 3, "warm ring, fresh file, and warm ring with clock_gettime: %s", r.out);
	/* and each one's whole-run figure (CPU time of one loop, chunk starts included) */
	lines = 0;
	for (const char *p = r.out; (p = strstr(p, "BENCH stepprof_mark_whole_run ")); p++) {
		lines++;
		cr_expect(strstr(p, " ns added per call (budget n/a, CPU time of ") < strchr(p, '\n') &&
			      strstr(p, " ns added per call (budget n/a, CPU time of "),
			  "BENCH line format: %.200s", p);
	}
	cr_expect_eq(lines, 3, "three whole-run figures: %s", r.out);
	double added = field_after(r.out, "added_ns=");
	sp_t_result_free(&r);

	char *bare[] = {(char *)sp_t_build("tests/bin/markgen"), "-b", "300000", NULL};
	char *noenv[] = {"LD_PRELOAD=", NULL};
	cr_assert_eq(sp_t_run(&r, bare, noenv, NULL, 60), 0, "%s", r.err);
	double none = field_after(r.out, "added_ns=");
	cr_log_info("stepprof_mark adds %.1f ns; a no-op through the same pointer %.1f ns", added, none);
	cr_expect_gt(added, none + 3, "a mark (%.1f ns) must cost more than a no-op (%.1f ns)", added, none);
	sp_t_result_free(&r);
}

/* ------------------------------------------------------- exported symbols */

/* The names libstepprof.so may export: the public API, the NVTX injection entry,
 * dlsym, _exit and _Exit (they end the trace file: hook_proc.c), and the hook
 * lists (the same .def files the version script comes from). */
static const char *const exportable[] = {
    "stepprof_step",
    "stepprof_mark",
    "InitializeInjectionNvtx2",
    "dlsym",
    "_exit",
    "_Exit",
#define SP_API_CUDA(name, ...) #name,
#define SP_API_IO(name, ...)   #name,
#define SP_API_NCCL(name, ...) #name,
#include "stepprof/api_cuda.def"
#include "stepprof/api_io.def"
#include "stepprof/api_nccl.def"
#undef SP_API_CUDA
#undef SP_API_IO
#undef SP_API_NCCL
};

/* docs/cuda-capture.md: the public API is exported, everything else is hidden. */
Test(recorder, exports_only_the_api_and_the_hooked_names)
{
	char *argv[] = {"nm", "-D", "--defined-only", (char *)sp_t_build("lib/libstepprof.so"), NULL};
	struct sp_t_result r;
	int st = sp_t_run(&r, argv, NULL, NULL, 60);
	if (st == 127 || (st != 0 && strstr(r.err, "No such file"))) {
		sp_t_result_free(&r);
		cr_skip_test("nm (binutils) not found: exported symbols not checked");
	}
	cr_assert_eq(st, 0, "nm: %s", r.err);
	const size_t n = sizeof(exportable) / sizeof(exportable[0]);
	char *seen = calloc(n, 1);
	size_t exported = 0;
	char *save;
	for (char *line = strtok_r(r.out, "\n", &save); line; line = strtok_r(NULL, "\n", &save)) {
		char addr[64], type[8], name[256];
		if (sscanf(line, "%63s %7s %255s", addr, type, name) != 3)
			continue;
		char *at = strchr(name, '@');
		if (at)
			*at = 0;
		size_t i;
		for (i = 0; i < n && strcmp(exportable[i], name) != 0; i++)
			;
		cr_expect_lt(i, n, "libstepprof.so exports %s, which is neither the API nor a hooked name", name);
		if (i < n)
			seen[i] = 1;
		exported++;
	}
	for (size_t i = 0; i < n; i++)
		cr_expect(seen[i], "%s is not exported", exportable[i]);
	cr_expect_geq(exported, n);
	free(seen);
	sp_t_result_free(&r);
}

/* ------------------------------------------- the writer's encoder vs trace.h */

Test(tracefile, encode_matches_trace_codec_for_every_kind)
{
	sp_tf_layout_init();
	srand(7);
	for (unsigned k = 1; k < SP_K__COUNT; k++) {
		if (k == SP_K_STRING)
			continue;
		for (int rep = 0; rep < 50; rep++) {
			uint64_t f[SP_F__COUNT];
			for (unsigned i = 0; i < SP_F__COUNT; i++)
				f[i] = ((uint64_t)rand() << 40) ^ ((uint64_t)rand() << 20) ^ (uint64_t)rand();
			struct sp_slot a[SP_MAX_RECORD_SLOTS], b[SP_MAX_RECORD_SLOTS];
			memset(a, 0xa5, sizeof(a));
			memset(b, 0x5a, sizeof(b));
			unsigned n = sp_encode(a, k, 3, 1000 + rep, 77, f);
			sp_tf_encode(b, k, 3, 1000 + rep, 77, f);
			cr_assert_eq(b[0].nslots, n, "kind %s: %u slots vs %u", sp_kind_name[k], b[0].nslots, n);
			cr_assert_eq(memcmp(a, b, n * sizeof(struct sp_slot)), 0, "kind %s: bytes differ",
				     sp_kind_name[k]);
		}
	}
}

/*
 * The constant-kind encoder (sp_tf_encode_k, reached through sp_tf_encode_any's
 * switch: what sp_emit uses) against trace.h's codec, for every kind: random
 * field values (high bits beyond each field's width included, so a missing mask
 * shows), slots pre-filled with garbage (so a byte it forgets to write shows).
 */
Test(tracefile, constant_kind_encoder_matches_trace_codec_for_every_kind)
{
	srand(11);
	for (unsigned k = 1; k < SP_K__COUNT; k++) {
		if (k == SP_K_STRING)
			continue;
		for (int rep = 0; rep < 50; rep++) {
			uint64_t f[SP_F__COUNT];
			for (unsigned i = 0; i < SP_F__COUNT; i++)
				f[i] = ((uint64_t)rand() << 40) ^ ((uint64_t)rand() << 20) ^ (uint64_t)rand();
			uint64_t dur = rep % 3 == 0 ? 77 : rep % 3 == 1 ? 5000000000ull : ((uint64_t)rand() << 20);
			struct sp_slot a[SP_MAX_RECORD_SLOTS], b[SP_MAX_RECORD_SLOTS];
			memset(a, 0xa5, sizeof(a));
			memset(b, 0x5a, sizeof(b));
			unsigned n = sp_encode(a, k, 1 + (unsigned)rep, 1000 + (uint64_t)rep, dur, f);
			sp_tf_encode_any(b, k, 1 + (unsigned)rep, 1000 + (uint64_t)rep, dur, f);
			cr_assert_eq(b[0].nslots, n, "kind %s: %u slots vs %u", sp_kind_name[k], b[0].nslots, n);
			cr_assert_eq(memcmp(a, b, n * sizeof(struct sp_slot)), 0, "kind %s: bytes differ",
				     sp_kind_name[k]);
			/* and nothing past the record */
			cr_assert_eq(((uint8_t *)b)[n * sizeof(struct sp_slot)], 0x5a, "kind %s: wrote past its slots",
				     sp_kind_name[k]);
		}
	}
}

/* ------------------------------- the mark name cache (api.c), in process */

#include <sys/mman.h>

#include "config.h"
#include "stepprof/stepprof.h"

/*
 * stepprof_mark keeps the thread's last name and its id and compares a new
 * name with it 8 bytes at a time. Names that share the first 8 bytes, a
 * prefix of the cached name, a longer name starting with it, a buffer changed
 * in place, and a name ending right before an unreadable page (the word loads
 * must not cross into it: this test would die of SIGSEGV) must each be
 * recorded under its own name, in order.
 */
Test(recorder, mark_name_cache_tells_every_name_apart)
{
	char *dir = sp_t_tmpdir("markcache");
	sp_recorder_init(dir, 0);
	long pg = sysconf(_SC_PAGESIZE);
	/* pages: readable, unreadable, readable, unreadable */
	uint8_t *map = mmap(NULL, (size_t)pg * 4, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	cr_assert_neq(map, MAP_FAILED);
	cr_assert_eq(mprotect(map + pg, (size_t)pg, PROT_NONE), 0);
	cr_assert_eq(mprotect(map + 3 * pg, (size_t)pg, PROT_NONE), 0);
	char *edge = (char *)map + pg - 5; /* "edge" and its NUL end the first readable page */
	memcpy(edge, "edge", 5);
	char *edge2 = (char *)map + 3 * pg - 12; /* 11 bytes + NUL end the second */
	memcpy(edge2, "edge-longer", 12);
	char buf[64];
	strcpy(buf, "inplace");

	const char *want[] = {"abcdefgh1",
			      "abcdefgh1",
			      "abcdefgh2",
			      "abcdefgh",
			      "abcdefgh",
			      "abcdefgh12",
			      "abcdefgh12",
			      "mark",
			      "mar",
			      "mark",
			      "edge",
			      "edge",
			      "edge-longer",
			      "edge-longer",
			      "edge",
			      "inplace",
			      "inplacf",
			      "inplace",
			      "a-name-of-forty-seven-bytes-long-to-fill-cache!",
			      "a-name-of-forty-seven-bytes-long-to-fill-cache?",
			      "a-name-longer-than-the-cache-of-forty-eight-bytes-is-never-cached",
			      "a-name-longer-than-the-cache-of-forty-eight-bytes-is-never-cached",
			      ""};
	size_t n = sizeof(want) / sizeof(want[0]);
	for (size_t i = 0; i < n; i++) {
		const char *name = want[i];
		if (strcmp(name, "edge") == 0)
			name = edge;
		else if (strcmp(name, "edge-longer") == 0)
			name = edge2;
		else if (strncmp(name, "inplac", 6) == 0) {
			strcpy(buf, name); /* the same buffer, its content changed */
			name = buf;
		}
		stepprof_mark(name);
	}
	sp_recorder_shutdown();

	DIR *d = opendir(dir);
	cr_assert(d);
	char file[PATH_MAX] = "";
	for (struct dirent *e; (e = readdir(d));)
		if (strstr(e->d_name, ".sptrace"))
			snprintf(file, sizeof(file), "%s/%s", dir, e->d_name);
	closedir(d);
	cr_assert(file[0], "no trace file in %s", dir);
	struct sp_json **l;
	size_t nl = dump(file, &l), k = 0;
	for (size_t i = 0; i < nl; i++) {
		const char *kind = sp_json_str(l[i], "kind");
		if (!kind || strcmp(kind, "mark") != 0)
			continue;
		const char *nm = sp_json_str(l[i], "name");
		cr_assert_lt(k, n, "more marks than written");
		if (want[k][0])
			cr_expect_str_eq(nm ? nm : "(none)", want[k], "mark %zu: %s, not %s", k, nm ? nm : "(none)",
					 want[k]);
		k++;
	}
	cr_assert_eq(k, n, "%zu marks read back, %zu written", k, n);
	sp_json_free_lines(l, nl);
	munmap(map, (size_t)pg * 4);
	sp_t_rmrf(dir);
	free(dir);
}

/*
 * _exit/_Exit end the file as a clean exit does: Python's multiprocessing ends
 * every child with os._exit (each DataLoader worker), of which `info` must not
 * say "no clean exit recorded (crash, kill or still running)".
 * The script: a forked multiprocessing child reads a file 5 times; a
 * subprocess of a missing program (CPython's vfork child calls _exit(255)
 * when its exec fails, in the parent's memory); 7 more reads; os._exit(3).
 * Both files end clean, the parent's status stays 3, and the parent's reads
 * after the vfork child's _exit are all there (its file is the parent's to end).
 */
Test(recorder, a_process_ended_by_os_exit_ends_its_file_cleanly, .timeout = 60)
{
	char *dir = sp_t_tmpdir("recqexit");
	static const char script[] =
			"import os, multiprocessing as mp, subprocess, tempfile\n"
			"path = os.path.join(tempfile.gettempdir(), 'stepprof-qexit-%d' % os.getpid())\n"
			"open(path, 'wb').write(b'x' * 100)\n"
			"def w():\n"
			"    for i in range(5): open(path, 'rb').read()\n"
			"p = mp.get_context('fork').Process(target=w); p.start(); p.join()\n"
			"try: subprocess.run(['/nonexistent-stepprof-test'])\n"
			"except FileNotFoundError: pass\n"
			"for i in range(7): open(path, 'rb').read()\n"
			"os.unlink(path)\n"
			"print('worker', p.exitcode, 'parent', os.getpid(), 'path', path, flush=True)\n"
			"os._exit(3)";
	struct sp_t_result r;
	cr_assert_eq(python_in(&r, dir, script, "libc"), 3, "%s", r.err);
	long parent = -1;
	char path[512] = "";
	cr_assert_eq(sscanf(r.out, "worker 0 parent %ld path %511s", &parent, path), 2, "%s", r.out);
	sp_t_result_free(&r);
	struct sp_json *j = info(dir);
	cr_assert_eq(nfiles(j), 2, "one file for the parent, one for the worker");
	struct sp_json *files = sp_json_get(j, "files");
	for (size_t i = 0; i < files->n; i++) {
		struct sp_json *f = &files->kids[i];
		cr_expect(sp_json_path(f, "clean_exit") && sp_json_path(f, "clean_exit")->num == 1,
			  "pid %ld (the %s): no clean exit", (long)sp_json_i64(f, "pid", -1),
			  sp_json_i64(f, "pid", -1) == parent ? "parent" : "worker");
		/* the parent's 7 opens of path are after the vfork child's _exit; the worker's 5 are its own */
		struct sp_json **l = NULL;
		size_t n = dump(sp_json_str(f, "path"), &l), opens = 0;
		for (size_t k = 0; k < n; k++) {
			const char *kind = sp_json_str(l[k], "kind"), *p = sp_json_str(l[k], "path");
			opens += kind && p && !strcmp(kind, "open") && !strcmp(p, path);
			sp_json_free(l[k]);
		}
		free(l);
		cr_expect_eq(opens, sp_json_i64(f, "pid", -1) == parent ? 7u : 5u, "pid %ld: %zu opens of %s",
			     (long)sp_json_i64(f, "pid", -1), opens, path);
	}
	sp_json_free(j);
	sp_t_rmrf(dir);
}

/*
 * A signal handler's mark rewrites the thread's name cache while the mark it
 * interrupted compares its name with that cache: the words compared can be a
 * mix of two names, which match a third. markgen -W: 300,000 rounds of
 * "xxxxxxxxAAAAAAA" and "xxxxxxxxBBBBBBB" (same first word) under SIGALRM
 * every 20 us marking "yyyyyyyyBBBBBBB" (same second word); unguarded, ~0.03% of
 * the B marks would be recorded as A (500,135 A for 500,000). Every mark is its
 * own name or a counted lost record.
 */
Test(recorder, a_signal_handlers_mark_never_renames_the_mark_it_interrupted, .timeout = 120)
{
	char *dir = sp_t_tmpdir("recrace");
	struct sp_t_result r;
	char *extra[] = {"STEPPROF_MAX_MB=64", NULL};
	cr_assert_eq(markgen(&r, dir, extra, "-W 300000"), 0, "%s", r.err);
	long alarms = -1;
	const char *a = strstr(r.out, "alarms=");
	cr_assert(a && sscanf(a, "alarms=%ld", &alarms) == 1, "%s", r.out);
	sp_t_result_free(&r);
	struct sp_json *j = info(dir);
	struct sp_json *f = only_file(j);
	expect_marks_accounted(f, 600000 + alarms);
	struct sp_json **l = NULL;
	size_t n = dump(sp_json_str(f, "path"), &l);
	uint64_t xa = count_name(l, n, "mark", "xxxxxxxxAAAAAAA"), xb = count_name(l, n, "mark", "xxxxxxxxBBBBBBB"),
		 yb = count_name(l, n, "mark", "yyyyyyyyBBBBBBB");
	cr_expect_leq(xa, 300000, "%lu marks named xxxxxxxxAAAAAAA for 300000 made", (unsigned long)xa);
	cr_expect_leq(xb, 300000, "%lu marks named xxxxxxxxBBBBBBB for 300000 made", (unsigned long)xb);
	cr_expect_leq(yb, (uint64_t)alarms, "%lu marks named yyyyyyyyBBBBBBB for %ld made", (unsigned long)yb, alarms);
	cr_expect_eq(xa + xb + yb, sp_json_u64(f, "records_by_kind.mark", 0), "marks of another name");
	for (size_t i = 0; i < n; i++)
		sp_json_free(l[i]);
	free(l);
	sp_json_free(j);
	sp_t_rmrf(dir);
}

/* ------------------------------------------- the directory and other users */

/* This (forked) process becomes uid/gid 65534, a second, unprivileged user; exits 3 if it cannot. */
static void become_nobody(void)
{
	if (setgroups(0, NULL) != 0 || setresgid(65534, 65534, 65534) != 0 || setresuid(65534, 65534, 65534) != 0)
		_exit(3);
}

/* The stepprof-* entries of dir: how many, the last one's name in name. */
static int trace_dirs_in(const char *dir, char *name, size_t n)
{
	DIR *d = opendir(dir);
	struct dirent *e;
	int dirs = 0;
	name[0] = 0;
	while (d && (e = readdir(d)))
		if (strncmp(e->d_name, "stepprof-", 9) == 0) {
			dirs++;
			snprintf(name, n, "%s", e->d_name);
		}
	if (d)
		closedir(d);
	return dirs;
}

/* Run fn(arg) in a child as uid 65534; its exit status. */
static int as_nobody(void (*fn)(void *), void *arg)
{
	pid_t c = fork();
	if (c == 0) {
		become_nobody();
		fn(arg);
		_exit(0);
	}
	int st = 0;
	waitpid(c, &st, 0);
	return st;
}

struct plant {
	const char *link, *target, *target2; /* target2: flip between target and it until killed */
};

static void plant_link(void *arg)
{
	struct plant *p = arg;
	char tmp[700];
	snprintf(tmp, sizeof(tmp), "%s.new", p->link);
	for (unsigned long i = 0;; i++) {
		unlink(tmp);
		if (symlink(i % 2 && p->target2 ? p->target2 : p->target, tmp) != 0 || rename(tmp, p->link) != 0)
			_exit(4);
		if (!p->target2)
			return;
	}
}

/* top (mode 0755), top/shared (1777, as /tmp), top/mine (the victim's, 0700), top/theirs (uid 65534's, 0777) */
static char *shared_layout(char shared[600], char mine[600], char theirs[600])
{
	if (geteuid() != 0)
		cr_skip_test("needs root to act as a second user (uid 65534)");
	char *top = sp_t_tmpdir("recshared");
	cr_assert_eq(chmod(top, 0755), 0);
	snprintf(shared, 600, "%s/shared", top);
	snprintf(mine, 600, "%s/mine", top);
	snprintf(theirs, 600, "%s/theirs", top);
	cr_assert_eq(mkdir(shared, 0700), 0);
	cr_assert_eq(chmod(shared, 01777), 0);
	cr_assert_eq(mkdir(mine, 0700), 0);
	cr_assert_eq(mkdir(theirs, 0700), 0);
	cr_assert_eq(chown(theirs, 65534, 65534), 0);
	cr_assert_eq(chmod(theirs, 0777), 0);
	return top;
}

/*
 * Another user plants a symbolic link where the victim's traces are to go, in a
 * directory anyone can write (/tmp): to a directory of the victim's (which the
 * owner check passes) or to one of their own. The link is refused, with one
 * warning, and nothing is written through it.
 */
Test(recorder, a_link_planted_by_another_user_is_never_followed)
{
	char shared[600], mine[600], theirs[600], link[700];
	char *top = shared_layout(shared, mine, theirs);
	snprintf(link, sizeof(link), "%s/stepprof-planted", shared);
	const char *targets[] = {mine, theirs};
	for (int t = 0; t < 2; t++) {
		struct plant p = {link, targets[t], NULL};
		unlink(link);
		cr_assert_eq(as_nobody(plant_link, &p), 0, "uid 65534 plants %s", link);
		struct sp_t_result r;
		cr_expect_eq(markgen(&r, link, NULL, "-n 100 -f 10"), 0, "%s", r.err);
		cr_expect_eq(stepprof_lines(r.err), 1, "one warning: %s", r.err);
		cr_expect(strstr(r.err, "symbolic link in a directory other users can write"), "%s", r.err);
		sp_t_result_free(&r);
		cr_expect_eq(entries(targets[t]), 0, "nothing written through the link into %s", targets[t]);
	}
	sp_t_rmrf(top);
	free(top);
}

/*
 * The same link flipped by the other user between a directory of the victim's
 * and one of their own while the victim's process opens its directory and
 * creates its file: 1,000 runs, not one trace anywhere but where it was meant
 * to go (here: nowhere, the link is refused every time).
 */
Test(recorder, a_link_flipped_by_another_user_never_redirects_a_trace, .timeout = 600)
{
	char shared[600], mine[600], theirs[600], link[700];
	char *top = shared_layout(shared, mine, theirs);
	snprintf(link, sizeof(link), "%s/trace", shared);
	struct plant p = {link, mine, theirs};
	pid_t flipper = fork();
	if (flipper == 0) {
		become_nobody();
		plant_link(&p);
		_exit(0);
	}
	for (int i = 0; i < 1000 && access(link, F_OK) != 0; i++)
		usleep(1000); /* the link exists before the first run */
	char *env[] = {env_preload(), env_dir(link), "STEPPROF_IO=off", NULL};
	char *argv[32], *copy = markgen_argv(argv, "-n 50");
	int bad_exit = 0, warned = 0;
	for (int i = 0; i < 1000; i++) {
		struct sp_t_result r;
		bad_exit += sp_t_run(&r, argv, env, NULL, 60) != 0;
		warned += stepprof_lines(r.err) == 1;
		sp_t_result_free(&r);
	}
	free(copy);
	int fst = 0;
	cr_expect_eq(waitpid(flipper, &fst, WNOHANG), 0, "the flipper ran to the end: status %#x", fst);
	kill(flipper, SIGKILL);
	waitpid(flipper, NULL, 0);
	cr_expect_eq(bad_exit, 0, "every run exits 0");
	cr_expect_eq(warned, 1000, "each run says why it is not recorded");
	cr_expect_eq(entries(mine), 0, "no trace in the victim's other directory");
	cr_expect_eq(entries(theirs), 0, "no trace in the other user's directory");
	sp_t_rmrf(top);
	free(top);
}

/*
 * The default directory in a working directory anyone can write: its name gets
 * a random suffix (one warning says where), so that another user cannot have
 * taken it first.
 */
Test(recorder, the_default_directory_in_a_shared_directory_has_a_random_name)
{
	char shared[600], mine[600], theirs[600];
	char *top = shared_layout(shared, mine, theirs);
	struct sp_t_result r;
	markgen_in(&r, shared, "", "-n 10", 60);
	long pid = out_pid(r.out);
	cr_expect_eq(stepprof_lines(r.err), 1, "one warning: %s", r.err);
	cr_expect(strstr(r.err, "random suffix"), "%s", r.err);
	sp_t_result_free(&r);
	char suffix[32], name[256];
	snprintf(suffix, sizeof(suffix), "-%ld-", pid);
	int dirs = trace_dirs_in(shared, name, sizeof(name));
	cr_expect(strlen(name) == strlen("stepprof-YYYYmmdd-HHMMSS") + strlen(suffix) + 8 && strstr(name, suffix),
		  "%s is stepprof-YYYYmmdd-HHMMSS-%ld-<8 random characters>", name, pid);
	cr_expect_eq(dirs, 1);
	sp_t_rmrf(top);
	free(top);
}

/* An existing directory of the user's that others may enter or read is used, with one warning. */
Test(recorder, an_own_directory_open_to_others_is_used_with_one_warning)
{
	char *top = sp_t_tmpdir("recopen");
	char dir[600];
	snprintf(dir, sizeof(dir), "%s/open", top);
	cr_assert_eq(mkdir(dir, 0700), 0);
	cr_assert_eq(chmod(dir, 0755), 0);
	struct sp_t_result r;
	cr_assert_eq(markgen(&r, dir, NULL, "-n 100 -f 10"), 0, "%s", r.err);
	cr_expect_eq(stepprof_lines(r.err), 1, "one warning for parent and child: %s", r.err);
	cr_expect(strstr(r.err, "open to other users (mode 0755)"), "%s", r.err);
	sp_t_result_free(&r);
	cr_expect_eq(entries(dir), 2, "the parent's and the child's files");
	sp_t_rmrf(top);
	free(top);
}

/* ------------------------------------------ the file truncated, a raw clone */

/*
 * Another program truncates the trace file while the job writes marks: the
 * MAP_SHARED pages past the new end would raise SIGBUS (exit 135). The job
 * goes on and exits 0; one warning says the process is no longer recorded.
 */
Test(recorder, a_trace_truncated_while_the_process_runs_costs_it_nothing, .timeout = 120)
{
	char *dir = sp_t_tmpdir("rectrunc");
	struct sp_t_result r;
	int st = markgen(&r, dir, NULL, "-n 3000 -U 200000");
	cr_expect_eq(st, 0, "status %d: %s", st, r.err);
	cr_expect(strstr(r.out, "truncated=1"), "%s", r.out);
	cr_expect(strstr(r.out, "marks=203000"), "%s", r.out);
	cr_expect_eq(stepprof_lines(r.err), 1, "one warning: %s", r.err);
	cr_expect(strstr(r.err, "was truncated while the process ran"), "%s", r.err);
	sp_t_result_free(&r);
	sp_t_rmrf(dir);
	free(dir);
}

/* A SIGBUS that is not the trace's still reaches the program as it would without stepprof. */
Test(recorder, a_sigbus_of_the_program_still_kills_it)
{
	char *dir = sp_t_tmpdir("recbus");
	char so[PATH_MAX], mg[PATH_MAX], cmd[3 * PATH_MAX];
	cr_assert(realpath(sp_t_build("lib/libstepprof.so"), so) && realpath(sp_t_build("tests/bin/markgen"), mg));
	/* a SIGBUS sent from outside while markgen writes its marks (the trace's handler is installed) */
	snprintf(cmd, sizeof(cmd),
		 "STEPPROF_MAX_MB=8 STEPPROF_DIR=%s LD_PRELOAD=%s %s -n 400000000 & sleep 0.5; kill -BUS $!; wait $!; "
		 "echo status=$?",
		 dir, so, mg);
	char *argv[] = {"/bin/sh", "-c", cmd, NULL};
	struct sp_t_result r;
	sp_t_run(&r, argv, NULL, NULL, 60);
	cr_expect(strstr(r.out, "status=135"), "killed by SIGBUS as without stepprof: %s %s", r.out, r.err);
	sp_t_result_free(&r);
	sp_t_rmrf(dir);
	free(dir);
}

/*
 * A child made by the raw clone(SIGCHLD) syscall runs no atfork handler: its
 * memory is a copy of the parent's, the trace mapping included. Parent and
 * child each write their marks at the same time: each finds all of its own in
 * its own file, under its own pid.
 */
Test(recorder, a_raw_clone_child_writes_its_own_file, .timeout = 120)
{
	char *dir = sp_t_tmpdir("recclone");
	struct sp_t_result r;
	cr_assert_eq(markgen(&r, dir, NULL, "-n 1 -O 100000"), 0, "%s", r.err);
	long parent = out_pid(r.out), child = child_pid(r.out);
	cr_expect(strstr(r.out, "child_status=0"), "%s", r.out);
	cr_expect_eq(stepprof_lines(r.err), 0, "%s", r.err);
	sp_t_result_free(&r);
	struct sp_json *j = info(dir);
	cr_assert_eq(nfiles(j), 2, "one file each");
	/* each pid's marks, all of them, none lost; the child names the parent */
	const long pids[] = {parent, child};
	const uint64_t want[] = {100001, 100000};
	for (int i = 0; i < 2; i++) {
		struct sp_json *f = file_of(j, pids[i], 0);
		cr_assert(f, "a file of pid %ld", pids[i]);
		cr_expect_eq(sp_json_u64(f, "records_by_kind.mark", 0), want[i], "pid %ld", pids[i]);
		cr_expect_eq(sp_json_u64(f, "lost", 99), 0, "pid %ld", pids[i]);
		cr_expect_eq(sp_json_i64(f, "ppid", 0), i ? parent : sp_json_i64(f, "ppid", 0));
	}
	sp_json_free(j);
	sp_t_rmrf(dir);
	free(dir);
}

/* ---------------------------------------------- programs that record nothing */

/*
 * /bin/echo and readlink record nothing (their output is no input): no trace
 * directory, no file. Their stdout and stderr are files here, whose names the
 * fd table would otherwise have interned into a file of no record.
 */
Test(recorder, echo_and_readlink_leave_no_trace)
{
	char *cwd = sp_t_tmpdir("rececho");
	char so[PATH_MAX], cmd[4 * PATH_MAX];
	cr_assert(realpath(sp_t_build("lib/libstepprof.so"), so));
	snprintf(cmd, sizeof(cmd),
		 "cd %s && LD_PRELOAD=%s /bin/echo hi >out1 2>err1 && LD_PRELOAD=%s readlink /proc/self/exe >out2 "
		 "2>err2 && LD_PRELOAD=%s readlink -f /usr/bin/env >out3 2>err3",
		 cwd, so, so, so);
	char *argv[] = {"/bin/sh", "-c", cmd, NULL};
	char *env[] = {"STEPPROF_DIR=", "PATH=/usr/bin:/bin", NULL};
	struct sp_t_result r;
	cr_assert_eq(sp_t_run(&r, argv, env, NULL, 60), 0, "%s", r.err);
	sp_t_result_free(&r);
	char name[256];
	cr_expect_eq(trace_dirs_in(cwd, name, sizeof(name)), 0, "no trace directory in %s: %s", cwd, name);
	sp_t_rmrf(cwd);
	free(cwd);
}
