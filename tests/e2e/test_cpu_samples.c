/*
 * test_cpu_samples.c - the process CPU time samples of format 1.5 (cpu_time
 * records, docs/input-capture.md "CPU time at hand-offs") and the header's CPU
 * fields, on the synthetic trainer with forked loader workers (docs/workloads.md)
 * under LD_PRELOAD=libstepprof.so, read back with `stepprof info --json` and
 * `stepprof dump --json`:
 *   - every worker's trace has cpu_time records, at least one per batch it served
 *     (each is >= 1 ms of decoding after the last), values non-decreasing in time
 *     per process;
 *   - the rule, record by record: a loader_wait ending 1 ms or more after its
 *     thread's last sample is followed by a cpu_time record on that thread, one
 *     ending sooner is not (the rate limit); samples after waits are >= 1 ms apart;
 *   - a summary window and the exit are sampled too (no workers: no hand-offs);
 *   - the header: online_cpus is this test's sysconf(_SC_NPROCESSORS_ONLN), the
 *     affinity this test's sched_getaffinity (the trainer inherits it), and under
 *     `taskset -c 0` one CPU, CPU 0, in every process's file;
 *   - STEPPROF_CPU_SAMPLES=0: no cpu_time record, the loader waits still recorded.
 */
#include <criterion/criterion.h>
#include <sched.h>
#include "stepprof/trace.h"
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "testlib.h"
#include "trainerlib.h"

TestSuite(cpu_samples, .fini = sp_t_remove_cur_dir);

#define ITERS	12
#define WORKERS 2
#define MS	1000000ll
/* decoded durations and sample times may differ from the recorder's by rounding: a margin at the 1 ms edge */
#define EDGE_NS 20000ll

static char *const worker_args[] = {"--iters",	"12", "--workers", "2",	      "--files-per-iter", "4", "--file-size",
				    "16K",	"--worker-us", "20000", "--kernels", "2",	      "--kernel-us", "1000", NULL};

/* `stepprof info --json DIR`, parsed; r keeps its output. */
static struct sp_json *info_of(struct sp_t_result *r, const char *tdir)
{
	char *argv[] = {(char *)sp_t_build("bin/stepprof"), "info", "--json", (char *)tdir, NULL};
	char *env[] = {"LD_PRELOAD=", NULL};
	sp_t_run(r, argv, env, NULL, 60);
	free(argv[0]);
	cr_assert_eq(r->status, 0, "stepprof info: exit %d: %s", r->status, r->err);
	struct sp_json *j = sp_json_parse(r->out);
	cr_assert_not_null(j, "stepprof info --json is not JSON: %s", r->out);
	return j;
}

/* The trace directory of a fresh test directory, in buf. */
static const char *new_tdir(char *buf, size_t len)
{
	sp_t_cur_dir = sp_t_tmpdir("cpu-samples");
	snprintf(buf, len, "%s/trace", sp_t_cur_dir);
	return buf;
}

static uint64_t kind_count(const struct sp_json *f, const char *kind)
{
	char key[64];
	snprintf(key, sizeof(key), "records_by_kind.%s", kind);
	return sp_json_u64(f, key, 0);
}

/* The test's own affinity as `stepprof info` lists it ("0-3,8"), its count in *count. */
static void my_affinity(char *out, size_t len, int *count)
{
	cpu_set_t set;
	CPU_ZERO(&set);
	cr_assert_eq(sched_getaffinity(0, sizeof(set), &set), 0);
	*count = CPU_COUNT(&set);
	size_t n = 0;
	out[0] = 0;
	for (int c = 0; c < CPU_SETSIZE && c < 1024; c++) {
		if (!CPU_ISSET(c, &set))
			continue;
		int e = c;
		while (e + 1 < CPU_SETSIZE && e + 1 < 1024 && CPU_ISSET(e + 1, &set))
			e++;
		n += (size_t)(e == c ? snprintf(out + n, len - n, "%s%d", n ? "," : "", c)
				     : snprintf(out + n, len - n, "%s%d-%d", n ? "," : "", c, e));
		cr_assert_lt(n, len);
		c = e;
	}
}

/* Per-thread state of the walk over one file's records in dump order (each thread's in write order). */
struct thr {
	int64_t tid;
	int64_t last_sample; /* ts of its last cpu_time, -1: none */
	int after_wait;	     /* its previous record was a loader_wait that must be followed by a sample */
	int after_quick;     /* ... one that must not be */
	int64_t last_handoff; /* ts of its last sample right after a loader_wait, -1: none */
};

struct walk {
	uint64_t samples, handoff_samples, waits, waits_sampled, waits_skipped;
	int64_t last_ts;	/* of the process's latest sample so far (by ts) */
	uint64_t last_value;
	int monotonic;
};

/*
 * `stepprof dump --json path` walked record by record: the sampling rule checked
 * per thread (cr_expect), counts in *w.
 */
static void walk_file(const char *path, struct walk *w)
{
	memset(w, 0, sizeof(*w));
	w->monotonic = 1;
	w->last_ts = -1;
	char *argv[] = {(char *)sp_t_build("bin/stepprof"), "dump", "--json", (char *)path, NULL};
	char *env[] = {"LD_PRELOAD=", NULL};
	struct sp_t_result r;
	sp_t_run(&r, argv, env, NULL, 60);
	free(argv[0]);
	cr_assert_eq(r.status, 0, "stepprof dump %s: exit %d: %s", path, r.status, r.err);
	struct sp_json **lines;
	size_t n = sp_json_parse_lines(r.out, &lines);
	struct thr th[64];
	size_t nth = 0;
	/* cpu_time records by time, for the process-wide order of values */
	struct {
		int64_t ts;
		uint64_t v;
	} *smp = calloc(n + 1, sizeof(*smp));
	size_t nsmp = 0;
	for (size_t i = 0; i < n; i++) {
		cr_assert_not_null(lines[i], "%s: dump line %zu is not JSON", path, i);
		const char *kind = sp_json_str(lines[i], "kind");
		int64_t tid = sp_json_i64(lines[i], "tid", -1);
		if (!kind || tid <= 0)
			continue; /* the keep area's records (tid 0) */
		struct thr *t = NULL;
		for (size_t k = 0; k < nth; k++)
			if (th[k].tid == tid)
				t = &th[k];
		if (!t) {
			cr_assert_lt(nth, sizeof(th) / sizeof(th[0]));
			t = &th[nth++];
			*t = (struct thr){.tid = tid, .last_sample = -1, .last_handoff = -1};
		}
		int is_sample = !strcmp(kind, "cpu_time");
		if (t->after_wait)
			cr_expect(is_sample, "%s: tid %lld: a loader_wait ending >= 1 ms after the thread's last sample "
					     "is followed by a %s, not a cpu_time",
				  path, (long long)tid, kind);
		if (t->after_quick)
			cr_expect(!is_sample, "%s: tid %lld: a cpu_time after a loader_wait ending < 1 ms after the "
					      "thread's last sample (the rate limit)",
				  path, (long long)tid);
		if (is_sample) {
			int64_t ts = sp_json_i64(lines[i], "ts_ns", -1);
			uint64_t v = sp_json_u64(lines[i], "value", 0);
			cr_expect_gt(v, 0, "%s: a cpu_time of 0 ns", path);
			cr_expect_eq(sp_json_u64(lines[i], "begin_ns", 0), (uint64_t)ts);
			if (t->after_wait || t->after_quick) {
				if (t->last_handoff >= 0)
					cr_expect_geq(ts - t->last_handoff, MS - EDGE_NS,
						      "%s: tid %lld: two samples after loader waits %lld ns apart", path,
						      (long long)tid, (long long)(ts - t->last_handoff));
				t->last_handoff = ts;
				w->handoff_samples++;
			}
			t->last_sample = ts;
			smp[nsmp].ts = ts;
			smp[nsmp++].v = v;
			w->samples++;
		}
		t->after_wait = t->after_quick = 0;
		if (!strcmp(kind, "loader_wait")) {
			int64_t end = sp_json_i64(lines[i], "end_ns", -1);
			int64_t since = t->last_sample < 0 ? INT64_MAX : end - t->last_sample;
			w->waits++;
			if (since >= MS + EDGE_NS) {
				t->after_wait = 1;
				w->waits_sampled++;
			} else if (since < MS - EDGE_NS) {
				t->after_quick = 1;
				w->waits_skipped++;
			}
		}
	}
	/* the process's CPU time never goes back: values in the order of their times */
	for (size_t i = 1; i < nsmp; i++)
		for (size_t j = i; j > 0 && smp[j - 1].ts > smp[j].ts; j--) {
			__typeof__(*smp) x = smp[j];
			smp[j] = smp[j - 1];
			smp[j - 1] = x;
		}
	for (size_t i = 1; i < nsmp; i++)
		if (smp[i].v < smp[i - 1].v)
			w->monotonic = 0;
	free(smp);
	sp_json_free_lines(lines, n);
	sp_t_result_free(&r);
}

/* The files of info --json: the trainer's (ppid not among the pids) index in *trainer; count returned. */
static size_t files_of(const struct sp_json *info, size_t *trainer)
{
	const struct sp_json *files = sp_json_get(info, "files");
	cr_assert(files && files->type == SPJ_ARR);
	*trainer = SIZE_MAX;
	for (size_t i = 0; i < files->n; i++) {
		int64_t ppid = sp_json_i64(&files->kids[i], "ppid", -1);
		int parent_here = 0;
		for (size_t k = 0; k < files->n; k++)
			parent_here |= sp_json_i64(&files->kids[k], "pid", -2) == ppid;
		if (!parent_here) {
			cr_assert_eq(*trainer, SIZE_MAX, "two processes without a parent in the trace");
			*trainer = i;
		}
	}
	cr_assert_neq(*trainer, SIZE_MAX);
	return files->n;
}

Test(cpu_samples, workers_sample_their_cpu_time_at_each_hand_off, .timeout = 180)
{
	char tdir[600];
	struct sp_t_result tr, ir;
	sp_t_run_trainer(&tr, new_tdir(tdir, sizeof(tdir)), worker_args);
	struct sp_json *info = info_of(&ir, tdir);
	size_t trainer;
	size_t n = files_of(info, &trainer);
	cr_assert_eq(n, 1 + WORKERS, "the trainer and its %d workers: %zu files: %s", WORKERS, n, ir.out);
	const struct sp_json *files = sp_json_get(info, "files");
	char want_list[4096];
	int want_count;
	my_affinity(want_list, sizeof(want_list), &want_count);
	long online = sysconf(_SC_NPROCESSORS_ONLN);
	uint64_t all_sampled = 0, all_skipped = 0;
	for (size_t i = 0; i < n; i++) {
		const struct sp_json *f = &files->kids[i];
		const char *path = sp_json_str(f, "path");
		cr_assert_not_null(path);
		char want_version[16];
		snprintf(want_version, sizeof(want_version), "%d.%d", SP_VERSION_MAJOR, SP_VERSION_MINOR);
		cr_expect_str_eq(sp_json_str(f, "format_version"), want_version); /* 1.5 at least: the CPU fields */
		cr_expect_eq(sp_json_i64(f, "online_cpus", -1), online, "%s: online_cpus %lld, sysconf says %ld", path,
			     (long long)sp_json_i64(f, "online_cpus", -1), online);
		cr_expect_eq(sp_json_i64(f, "cpu_affinity_count", -1), want_count, "%s: cpu_affinity_count %lld, %d",
			     path, (long long)sp_json_i64(f, "cpu_affinity_count", -1), want_count);
		cr_expect_str_eq(sp_json_str(f, "cpu_affinity"), want_list, "%s", path);
		struct walk w;
		walk_file(path, &w);
		cr_expect_eq(w.samples, kind_count(f, "cpu_time"), "%s: dump and info disagree", path);
		cr_expect(w.monotonic, "%s: the process's CPU time went back between two samples", path);
		all_sampled += w.waits_sampled;
		all_skipped += w.waits_skipped;
		if (i == trainer)
			continue;
		/* a worker: ITERS / WORKERS batches, each after >= 1 ms of decoding (--worker-us 20000) */
		cr_expect_geq(w.handoff_samples, ITERS / WORKERS, "%s: %llu samples after loader waits, %d batches",
			      path, (unsigned long long)w.handoff_samples, ITERS / WORKERS);
		cr_expect_geq(w.samples, w.handoff_samples + 1, "%s: no sample at the exit", path);
	}
	cr_expect_geq(all_sampled, ITERS, "waits that had to be sampled: %llu", (unsigned long long)all_sampled);
	sp_t_note("cpu_samples: %llu loader waits sampled, %llu within 1 ms of a sample and not",
		  (unsigned long long)all_sampled, (unsigned long long)all_skipped);
	sp_json_free(info);
	sp_t_result_free(&ir);
	sp_t_result_free(&tr);
}

/* Fast hand-offs (no decoding, short kernels): waits within 1 ms of a sample are not sampled. */
Test(cpu_samples, the_rate_limit_skips_waits_within_a_millisecond, .timeout = 180)
{
	char tdir[600];
	struct sp_t_result tr, ir;
	char *args[] = {"--iters",   "200", "--workers", "2",	 "--files-per-iter", "1",   "--file-size", "4K",
			"--kernels", "1",   "--kernel-us", "50", "--h2d-bytes",	     "4K", NULL};
	sp_t_run_trainer(&tr, new_tdir(tdir, sizeof(tdir)), args);
	struct sp_json *info = info_of(&ir, tdir);
	size_t trainer;
	size_t n = files_of(info, &trainer);
	const struct sp_json *files = sp_json_get(info, "files");
	uint64_t waits = 0, skipped = 0, samples = 0;
	for (size_t i = 0; i < n; i++) {
		struct walk w;
		walk_file(sp_json_str(&files->kids[i], "path"), &w);
		cr_expect(w.monotonic);
		waits += w.waits;
		skipped += w.waits_skipped;
		samples += w.samples;
	}
	sp_t_note("cpu_samples: fast hand-offs: %llu loader waits, %llu within 1 ms of a sample, %llu samples",
		  (unsigned long long)waits, (unsigned long long)skipped, (unsigned long long)samples);
	/* the rule itself is checked record by record in walk_file; here, that it was put to the test */
	cr_expect_gt(skipped, 0, "no loader wait within 1 ms of its thread's last sample (%llu waits)",
		     (unsigned long long)waits);
	cr_expect_lt(samples, waits, "%llu samples for %llu loader waits", (unsigned long long)samples,
		     (unsigned long long)waits);
	sp_json_free(info);
	sp_t_result_free(&ir);
	sp_t_result_free(&tr);
}

/* No workers, no waits: the summary windows and the exit are sampled. */
Test(cpu_samples, summary_windows_and_the_exit_are_sampled, .timeout = 120)
{
	char tdir[600];
	struct sp_t_result tr, ir;
	char *args[] = {"--iters", "30", "--kernels", "2", "--kernel-us", "2000", NULL};
	char *more[] = {"STEPPROF_SUMMARY_MS=20", NULL};
	sp_t_run_trainer_env(&tr, new_tdir(tdir, sizeof(tdir)), args, more);
	struct sp_json *info = info_of(&ir, tdir);
	const struct sp_json *f = sp_json_path(info, "files.0");
	cr_assert_not_null(f);
	uint64_t sums = sp_json_u64(f, "summaries", 0), cpu = kind_count(f, "cpu_time");
	cr_assert_geq(sums, 3, "a run of >= 120 ms with 20 ms windows: %llu summaries", (unsigned long long)sums);
	/* one a window written at a record, the last (the exit's) with the exit's sample */
	cr_expect_geq(cpu, sums, "%llu cpu_time records for %llu summary windows", (unsigned long long)cpu,
		      (unsigned long long)sums);
	cr_expect_leq(cpu, sums + 1 + kind_count(f, "loader_wait"), "%llu cpu_time records", (unsigned long long)cpu);
	struct walk w;
	walk_file(sp_json_str(f, "path"), &w);
	cr_expect(w.monotonic);
	sp_json_free(info);
	sp_t_result_free(&ir);
	sp_t_result_free(&tr);
}

Test(cpu_samples, off_writes_no_cpu_time, .timeout = 120)
{
	char tdir[600];
	struct sp_t_result tr, ir;
	char *more[] = {"STEPPROF_CPU_SAMPLES=0", NULL};
	sp_t_run_trainer_env(&tr, new_tdir(tdir, sizeof(tdir)), worker_args, more);
	struct sp_json *info = info_of(&ir, tdir);
	const struct sp_json *files = sp_json_get(info, "files");
	cr_assert(files && files->n == 1 + WORKERS, "%s", ir.out);
	uint64_t waits = 0;
	for (size_t i = 0; i < files->n; i++) {
		cr_expect_eq(kind_count(&files->kids[i], "cpu_time"), 0, "%s: cpu_time records with STEPPROF_CPU_SAMPLES=0",
			     sp_json_str(&files->kids[i], "path"));
		waits += kind_count(&files->kids[i], "loader_wait");
		/* the header's CPUs do not depend on the samples */
		cr_expect_gt(sp_json_u64(&files->kids[i], "online_cpus", 0), 0);
	}
	cr_expect_geq(waits, ITERS, "the loader waits are still recorded: %llu", (unsigned long long)waits);
	sp_json_free(info);
	sp_t_result_free(&ir);
	sp_t_result_free(&tr);
}

Test(cpu_samples, taskset_one_cpu_is_every_process_s_affinity, .timeout = 120)
{
	struct sp_t_result which;
	char *wargv[] = {"sh", "-c", "command -v taskset", NULL};
	sp_t_run(&which, wargv, NULL, NULL, 10);
	int have = which.status == 0;
	sp_t_result_free(&which);
	if (!have) {
		sp_t_note("cpu_samples: no taskset (util-linux): the affinity of a pinned job is not checked");
		cr_skip_test("taskset is not installed");
	}
	char tdir[600], env_dir[700];
	new_tdir(tdir, sizeof(tdir));
	snprintf(env_dir, sizeof(env_dir), "STEPPROF_DIR=%s", tdir);
	char *pre = sp_t_preload_env();
	char *env[] = {pre, env_dir, "STEPPROF_MAX_MB=64", NULL};
	char *argv[32] = {"taskset", "-c", "0", (char *)sp_t_build("tests/bin/trainer")};
	int k = 4;
	for (int i = 0; worker_args[i] && k < 31; i++)
		argv[k++] = worker_args[i];
	argv[k] = NULL;
	struct sp_t_result tr, ir;
	sp_t_run(&tr, argv, env, NULL, 120);
	free(pre);
	free(argv[3]);
	cr_assert_eq(tr.status, 0, "taskset -c 0 trainer: exit %d: %s", tr.status, tr.err);
	struct sp_json *info = info_of(&ir, tdir);
	const struct sp_json *files = sp_json_get(info, "files");
	cr_assert(files && files->n == 1 + WORKERS, "%s", ir.out);
	for (size_t i = 0; i < files->n; i++) {
		const struct sp_json *f = &files->kids[i];
		cr_expect_eq(sp_json_i64(f, "cpu_affinity_count", -1), 1, "%s", sp_json_str(f, "path"));
		cr_expect_str_eq(sp_json_str(f, "cpu_affinity"), "0");
		cr_expect_eq(sp_json_i64(f, "online_cpus", -1), sysconf(_SC_NPROCESSORS_ONLN));
	}
	sp_json_free(info);
	sp_t_result_free(&ir);
	sp_t_result_free(&tr);
}
