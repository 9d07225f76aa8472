/*
 * test_watch_prom.c - the Prometheus exposition of a watch snapshot
 * (analyzer/watch_prom.c): the text of every family for a sample, label
 * escaping, special values, and the textfile written for node_exporter
 * (atomic replacement, temporary files cleaned, errors in one line).
 * promtool, Prometheus and node_exporter themselves read it in
 * tests/e2e/test_watch_prom.c.
 *
 * Divided into: 1. the sample and helpers, 2. the text, 3. the textfile.
 */
#include <criterion/criterion.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "testlib.h"
#include "watch_metrics.h"

/* ----------------------------------------------------- 1. sample and helpers */

static struct watch_rank_metrics g_ranks[64];

/* n ranks: rank 10+i, 100+i iterations, described devices 0 and 2 (device 1 has values but is not described). */
static struct watch_metrics sample(size_t n, const char *job)
{
	memset(g_ranks, 0, sizeof(g_ranks));
	for (size_t i = 0; i < n; i++) {
		struct watch_rank_metrics *r = &g_ranks[i];
		r->rank = 10 + (int)i;
		r->iterations = 100 + i;
		r->step_seconds_sum = 12.5;
		r->step_quantile[0] = 0.1;
		r->step_quantile[1] = 0.2;
		r->step_quantile[2] = 0.3;
		for (int p = 0; p < WATCH_PHASES; p++)
			r->phase_seconds[p] = p + 1;
		r->dev_mask = 0x5;
		for (int d = 0; d < 3; d++) {
			r->dev_live[d] = 1000 + d;
			r->dev_peak[d] = 2000 + d;
			r->dev_capacity[d] = d == 0 ? 80ull << 30 : 0;
		}
		r->dev_capacity[1] = 5555; /* not described: must not appear */
		r->lost_records = 7;
		r->alert[WATCH_A_STALLED] = 1;
		r->alert[WATCH_A_ALLOC_FAILED] = 9; /* any non-zero is active */
	}
	return (struct watch_metrics){
	    .job = job, .host = "h1", .version = "1.2.3", .nranks = n, .ranks = g_ranks, .scrape_lag_seconds = 0.5};
}

static char *expo(const struct watch_metrics *m)
{
	char *buf = NULL;
	size_t len = 0;
	FILE *f = open_memstream(&buf, &len);
	cr_assert_not_null(f);
	cr_assert_eq(watch_prom_write(f, m), 0);
	fclose(f);
	return buf;
}

static int has_line(const char *text, const char *line)
{
	size_t n = strlen(line);
	for (const char *p = text; (p = strstr(p, line)); p++)
		if ((p == text || p[-1] == '\n') && (p[n] == '\n' || p[n] == 0))
			return 1;
	return 0;
}

static int count_lines_starting(const char *text, const char *prefix)
{
	int n = 0;
	size_t pl = strlen(prefix);
	for (const char *p = text; *p;) {
		if (!strncmp(p, prefix, pl))
			n++;
		const char *nl = strchr(p, '\n');
		if (!nl)
			break;
		p = nl + 1;
	}
	return n;
}

/* ------------------------------------------------------------------ 2. the text */

Test(watch_prom, names_of_alerts_and_quantiles)
{
	static const char *const want[] = {"memory_runaway",	"memory_high",	   "alloc_failed",
					   "alloc_retry_storm", "step_regression", "stalled"};
	cr_assert_eq(WATCH_A__COUNT, 6);
	for (int a = 0; a < WATCH_A__COUNT; a++)
		cr_expect_str_eq(watch_alert_name[a], want[a]);
	cr_expect_eq(watch_quantiles[0], 0.5);
	cr_expect_eq(watch_quantiles[1], 0.9);
	cr_expect_eq(watch_quantiles[2], 0.99);
}

/*
 * Every family once, HELP then TYPE, with its type; every sample under its
 * own family's TYPE (the format wants a family's lines together); counters,
 * and only counters, named _total.
 */
Test(watch_prom, every_family_once_with_help_and_type)
{
	static const struct {
		const char *name, *type;
	} fam[] = {
	    {"stepprof_build_info", "gauge"},
	    {"stepprof_iterations_total", "counter"},
	    {"stepprof_step_duration_seconds", "summary"},
	    {"stepprof_phase_seconds_total", "counter"},
	    {"stepprof_device_memory_bytes", "gauge"},
	    {"stepprof_device_memory_capacity_bytes", "gauge"},
	    {"stepprof_lost_records_total", "counter"},
	    {"stepprof_alert", "gauge"},
	    {"stepprof_watch_lag_seconds", "gauge"},
	};
	const size_t nfam = sizeof(fam) / sizeof(fam[0]);
	struct watch_metrics m = sample(2, "j");
	char *text = expo(&m);
	char line[512];

	cr_expect_eq(count_lines_starting(text, "# HELP "), (int)nfam, "%s", text);
	cr_expect_eq(count_lines_starting(text, "# TYPE "), (int)nfam, "%s", text);
	for (size_t i = 0; i < nfam; i++) {
		snprintf(line, sizeof(line), "# HELP %s ", fam[i].name);
		cr_expect_eq(count_lines_starting(text, line), 1, "%s", line);
		snprintf(line, sizeof(line), "# TYPE %s %s", fam[i].name, fam[i].type);
		cr_expect(has_line(text, line), "%s", line);
		size_t nl = strlen(fam[i].name);
		int is_total = nl > 6 && !strcmp(fam[i].name + nl - 6, "_total");
		cr_expect_eq(is_total, !strcmp(fam[i].type, "counter"), "%s", fam[i].name);
	}

	/* Walk the lines: HELP, then TYPE of the same name, then samples of that family only. */
	char cur[128] = "", helped[128] = "";
	int samples = 0;
	for (char *p = text, *nl; *p; p = nl + 1) {
		nl = strchr(p, '\n');
		cr_assert_not_null(nl, "the text ends with a line feed");
		size_t len = (size_t)(nl - p);
		if (!strncmp(p, "# HELP ", 7)) {
			sscanf(p + 7, "%127s", helped);
			cur[0] = 0;
		} else if (!strncmp(p, "# TYPE ", 7)) {
			sscanf(p + 7, "%127s", cur);
			cr_expect_str_eq(cur, helped, "TYPE follows the HELP of its family");
		} else {
			cr_assert_neq(cur[0], 0, "a sample before any TYPE: %.*s", (int)len, p);
			size_t n = strcspn(p, "{ ");
			char name[160];
			snprintf(name, sizeof(name), "%.*s", (int)n, p);
			char sum[160], count[160];
			snprintf(sum, sizeof(sum), "%s_sum", cur);
			snprintf(count, sizeof(count), "%s_count", cur);
			int summary = !strcmp(cur, "stepprof_step_duration_seconds");
			cr_expect(!strcmp(name, cur) || (summary && (!strcmp(name, sum) || !strcmp(name, count))),
				  "%s under the TYPE of %s", name, cur);
			samples++;
		}
	}
	/* 1 build_info + 2 ranks x (1 + 5 + 7 + 4 + 1 + 1 + 6) + 1 lag */
	cr_expect_eq(samples, 1 + 2 * 25 + 1, "%s", text);
	free(text);
}

Test(watch_prom, values_of_every_family)
{
	struct watch_metrics m = sample(1, "j");
	char *t = expo(&m);
	const char *want[] = {
	    "stepprof_build_info{version=\"1.2.3\"} 1",
	    "stepprof_iterations_total{job=\"j\",host=\"h1\",rank=\"10\"} 100",
	    "stepprof_step_duration_seconds{job=\"j\",host=\"h1\",rank=\"10\",quantile=\"0.5\"} 0.1",
	    "stepprof_step_duration_seconds{job=\"j\",host=\"h1\",rank=\"10\",quantile=\"0.9\"} 0.2",
	    "stepprof_step_duration_seconds{job=\"j\",host=\"h1\",rank=\"10\",quantile=\"0.99\"} 0.3",
	    "stepprof_step_duration_seconds_sum{job=\"j\",host=\"h1\",rank=\"10\"} 12.5",
	    "stepprof_step_duration_seconds_count{job=\"j\",host=\"h1\",rank=\"10\"} 100",
	    /* phase_seconds[] in categories.def's order */
	    "stepprof_phase_seconds_total{job=\"j\",host=\"h1\",rank=\"10\",phase=\"input\"} 1",
	    "stepprof_phase_seconds_total{job=\"j\",host=\"h1\",rank=\"10\",phase=\"h2d\"} 2",
	    "stepprof_phase_seconds_total{job=\"j\",host=\"h1\",rank=\"10\",phase=\"compute\"} 3",
	    "stepprof_phase_seconds_total{job=\"j\",host=\"h1\",rank=\"10\",phase=\"comm\"} 4",
	    "stepprof_phase_seconds_total{job=\"j\",host=\"h1\",rank=\"10\",phase=\"d2h\"} 5",
	    "stepprof_phase_seconds_total{job=\"j\",host=\"h1\",rank=\"10\",phase=\"sync\"} 6",
	    "stepprof_phase_seconds_total{job=\"j\",host=\"h1\",rank=\"10\",phase=\"other\"} 7",
	    "stepprof_device_memory_bytes{job=\"j\",host=\"h1\",rank=\"10\",device=\"0\",state=\"live\"} 1000",
	    "stepprof_device_memory_bytes{job=\"j\",host=\"h1\",rank=\"10\",device=\"0\",state=\"peak\"} 2000",
	    "stepprof_device_memory_bytes{job=\"j\",host=\"h1\",rank=\"10\",device=\"2\",state=\"live\"} 1002",
	    "stepprof_device_memory_bytes{job=\"j\",host=\"h1\",rank=\"10\",device=\"2\",state=\"peak\"} 2002",
	    "stepprof_device_memory_capacity_bytes{job=\"j\",host=\"h1\",rank=\"10\",device=\"0\"} 85899345920",
	    "stepprof_lost_records_total{job=\"j\",host=\"h1\",rank=\"10\"} 7",
	    "stepprof_alert{job=\"j\",host=\"h1\",rank=\"10\",alert=\"memory_runaway\"} 0",
	    "stepprof_alert{job=\"j\",host=\"h1\",rank=\"10\",alert=\"memory_high\"} 0",
	    "stepprof_alert{job=\"j\",host=\"h1\",rank=\"10\",alert=\"alloc_failed\"} 1",
	    "stepprof_alert{job=\"j\",host=\"h1\",rank=\"10\",alert=\"alloc_retry_storm\"} 0",
	    "stepprof_alert{job=\"j\",host=\"h1\",rank=\"10\",alert=\"step_regression\"} 0",
	    "stepprof_alert{job=\"j\",host=\"h1\",rank=\"10\",alert=\"stalled\"} 1",
	    "stepprof_watch_lag_seconds{job=\"j\",host=\"h1\"} 0.5",
	};
	for (size_t i = 0; i < sizeof(want) / sizeof(want[0]); i++)
		cr_expect(has_line(t, want[i]), "missing: %s\nin:\n%s", want[i], t);
	free(t);
}

Test(watch_prom, only_described_devices_and_known_capacities)
{
	struct watch_metrics m = sample(1, "j");
	char *t = expo(&m);
	cr_expect_null(strstr(t, "device=\"1\""), "device 1 is not in dev_mask:\n%s", t);
	cr_expect_eq(count_lines_starting(t, "stepprof_device_memory_bytes{"), 4);
	cr_expect_eq(count_lines_starting(t, "stepprof_device_memory_capacity_bytes{"), 1,
		     "device 2's capacity is unknown");
	free(t);

	/* No device described: no memory family at all, not an empty one. */
	g_ranks[0].dev_mask = 0;
	t = expo(&m);
	cr_expect_null(strstr(t, "stepprof_device_memory"), "%s", t);
	free(t);

	/* Devices without any known capacity: the bytes, but no capacity family. */
	g_ranks[0].dev_mask = 0x4;
	t = expo(&m);
	cr_expect_eq(count_lines_starting(t, "stepprof_device_memory_bytes{"), 2);
	cr_expect_null(strstr(t, "stepprof_device_memory_capacity_bytes"), "%s", t);
	free(t);

	/* The highest device of the mask. */
	g_ranks[0].dev_mask = 1u << (SP_MAX_DEVICES - 1);
	g_ranks[0].dev_live[SP_MAX_DEVICES - 1] = 42;
	t = expo(&m);
	char want[200];
	snprintf(want, sizeof(want),
		 "stepprof_device_memory_bytes{job=\"j\",host=\"h1\",rank=\"10\",device=\"%d\",state=\"live\"} 42",
		 SP_MAX_DEVICES - 1);
	cr_expect(has_line(t, want), "%s", t);
	free(t);
}

Test(watch_prom, label_values_escaped)
{
	/* quote, backslash, line feed; a tab and UTF-8 pass as they are; a byte that is not UTF-8 becomes U+FFFD */
	struct watch_metrics m = sample(1, "a\"b\\c\nd\te\xc3\xa9-\xff-");
	m.host = "h\"\\";
	m.version = "v\n1";
	char *t = expo(&m);
	cr_expect(has_line(t, "stepprof_iterations_total{job=\"a\\\"b\\\\c\\nd\te\xc3\xa9-\xef\xbf\xbd-\",host="
			      "\"h\\\"\\\\\",rank=\"10\"} 100"),
		  "%s", t);
	cr_expect(has_line(t, "stepprof_build_info{version=\"v\\n1\"} 1"), "%s", t);
	/* No raw line feed inside a sample: every line is a comment or starts with a metric name. */
	for (const char *p = t; *p;) {
		cr_expect(*p == '#' || !strncmp(p, "stepprof_", 9), "a line broken by an unescaped value: %.40s", p);
		const char *nl = strchr(p, '\n');
		if (!nl)
			break;
		p = nl + 1;
	}
	free(t);

	/* NULL names are empty labels, not a crash */
	m.job = NULL;
	m.host = NULL;
	m.version = NULL;
	t = expo(&m);
	cr_expect(has_line(t, "stepprof_iterations_total{job=\"\",host=\"\",rank=\"10\"} 100"), "%s", t);
	cr_expect(has_line(t, "stepprof_build_info{version=\"\"} 1"), "%s", t);
	free(t);
}

Test(watch_prom, nan_infinities_and_shortest_numbers)
{
	struct watch_metrics m = sample(1, "j");
	g_ranks[0].step_quantile[0] = NAN;
	g_ranks[0].step_quantile[1] = INFINITY;
	g_ranks[0].step_quantile[2] = -INFINITY;
	g_ranks[0].step_seconds_sum = 0.1 + 0.2; /* 0.30000000000000004: needs 17 digits to read back */
	g_ranks[0].phase_seconds[0] = 1e-9;
	g_ranks[0].phase_seconds[1] = 1e21;
	g_ranks[0].iterations = UINT64_MAX;
	m.scrape_lag_seconds = NAN;
	char *t = expo(&m);
	const char *want[] = {
	    "stepprof_step_duration_seconds{job=\"j\",host=\"h1\",rank=\"10\",quantile=\"0.5\"} NaN",
	    "stepprof_step_duration_seconds{job=\"j\",host=\"h1\",rank=\"10\",quantile=\"0.9\"} +Inf",
	    "stepprof_step_duration_seconds{job=\"j\",host=\"h1\",rank=\"10\",quantile=\"0.99\"} -Inf",
	    "stepprof_step_duration_seconds_sum{job=\"j\",host=\"h1\",rank=\"10\"} 0.30000000000000004",
	    "stepprof_phase_seconds_total{job=\"j\",host=\"h1\",rank=\"10\",phase=\"input\"} 1e-09",
	    "stepprof_phase_seconds_total{job=\"j\",host=\"h1\",rank=\"10\",phase=\"h2d\"} 1e+21",
	    "stepprof_iterations_total{job=\"j\",host=\"h1\",rank=\"10\"} 18446744073709551615",
	    "stepprof_watch_lag_seconds{job=\"j\",host=\"h1\"} NaN",
	};
	for (size_t i = 0; i < sizeof(want) / sizeof(want[0]); i++)
		cr_expect(has_line(t, want[i]), "missing: %s\nin:\n%s", want[i], t);
	cr_expect_null(strstr(t, "} nan"), "C's spelling is not the format's");
	cr_expect_null(strstr(t, "} inf"), "C's spelling is not the format's");
	cr_expect_null(strstr(t, "} -inf"), "C's spelling is not the format's");
	free(t);
}

Test(watch_prom, no_rank_yet)
{
	struct watch_metrics m = sample(0, "j");
	char *t = expo(&m);
	cr_expect(has_line(t, "stepprof_build_info{version=\"1.2.3\"} 1"), "%s", t);
	cr_expect(has_line(t, "stepprof_watch_lag_seconds{job=\"j\",host=\"h1\"} 0.5"), "%s", t);
	cr_expect_eq(count_lines_starting(t, "# TYPE "), 2, "only the families with a sample:\n%s", t);
	free(t);
}

Test(watch_prom, write_error_is_reported)
{
	FILE *f = fopen("/dev/full", "w");
	if (!f)
		cr_skip_test("/dev/full cannot be opened here: %s", strerror(errno));
	struct watch_metrics m = sample(2, "j");
	cr_expect_eq(watch_prom_write(f, &m), -1, "a full disk is an error, not a short file");
	fclose(f);
}

/* -------------------------------------------------------------- 3. the textfile */

static char *path_in(const char *dir, const char *name)
{
	char *p;
	cr_assert_geq(asprintf(&p, "%s/%s", dir, name), 0);
	return p;
}

/* The names in dir, space-separated and sorted by readdir order (a small directory). */
static char *dir_names(const char *dir)
{
	char *out = calloc(1, 4096);
	DIR *d = opendir(dir);
	cr_assert_not_null(d);
	struct dirent *e;
	while ((e = readdir(d)))
		if (strcmp(e->d_name, ".") && strcmp(e->d_name, ".."))
			snprintf(out + strlen(out), 4096 - strlen(out), "%s%s", *out ? " " : "", e->d_name);
	closedir(d);
	return out;
}

struct reader_arg {
	const char *path;
	const char *a, *b; /* the two contents the file may have */
	volatile int stop;
	long reads, seen_a, seen_b, partial, missing;
};

static void *reader(void *p)
{
	struct reader_arg *r = p;
	size_t cap = strlen(r->a) > strlen(r->b) ? strlen(r->a) : strlen(r->b);
	char *buf = malloc(cap + 2);
	while (!__atomic_load_n(&r->stop, __ATOMIC_ACQUIRE)) {
		int fd = open(r->path, O_RDONLY);
		if (fd < 0) {
			r->missing++;
			continue;
		}
		size_t len = 0;
		ssize_t n;
		while (len < cap + 1 && (n = read(fd, buf + len, cap + 1 - len)) > 0)
			len += (size_t)n;
		close(fd);
		buf[len] = 0;
		r->reads++;
		if (!strcmp(buf, r->a))
			r->seen_a++;
		else if (!strcmp(buf, r->b))
			r->seen_b++;
		else
			r->partial++;
	}
	free(buf);
	return NULL;
}

Test(watch_prom, textfile_is_replaced_whole)
{
	char *dir = sp_t_tmpdir("promfile");
	char *path = path_in(dir, "stepprof.prom");
	char err[256];
	/* Two contents of different sizes, the larger ~100 KiB: many write(2)s each. */
	struct watch_metrics small = sample(1, "small");
	char *a = expo(&small);
	struct watch_metrics big = sample(64, "a-much-longer-job-name-for-the-larger-of-the-two-files");
	char *b = expo(&big);
	cr_assert_gt(strlen(b), 64 * 1024);

	cr_assert_eq(watch_prom_file(path, &small, err, sizeof(err)), 0, "%s", err);
	struct reader_arg ra = {.path = path, .a = a, .b = b};
	pthread_t th;
	cr_assert_eq(pthread_create(&th, NULL, reader, &ra), 0);
	for (int i = 0; i < 200; i++) {
		struct watch_metrics m =
		    i % 2 ? sample(1, "small") : sample(64, "a-much-longer-job-name-for-the-larger-of-the-two-files");
		cr_assert_eq(watch_prom_file(path, &m, err, sizeof(err)), 0, "write %d: %s", i, err);
		usleep(500);
	}
	__atomic_store_n(&ra.stop, 1, __ATOMIC_RELEASE);
	pthread_join(th, NULL);
	sp_t_note("textfile: %ld reads during 200 writes: %ld small, %ld big, %ld partial, %ld missing", ra.reads,
		  ra.seen_a, ra.seen_b, ra.partial, ra.missing);
	cr_expect_eq(ra.partial, 0, "a reader saw a partial file %ld times", ra.partial);
	cr_expect_eq(ra.missing, 0, "a reader found no file %ld times", ra.missing);
	cr_expect_gt(ra.seen_a, 0);
	cr_expect_gt(ra.seen_b, 0, "the reader never saw the larger file: it checked nothing");

	/* What is left: the file alone (no temporary), the last content, readable by node_exporter's user. */
	char *names = dir_names(dir);
	cr_expect_str_eq(names, "stepprof.prom");
	size_t len;
	char *got = sp_t_read_file(path, &len);
	cr_expect_str_eq(got, a);
	struct stat st;
	cr_assert_eq(stat(path, &st), 0);
	cr_expect_eq(st.st_mode & 0777, 0644);

	free(got);
	free(names);
	free(a);
	free(b);
	sp_t_rmrf(dir);
	free(path);
	free(dir);
}

Test(watch_prom, textfile_errors_in_one_line)
{
	char *dir = sp_t_tmpdir("promfile");
	char *missing = path_in(dir, "no/such/dir/stepprof.prom");
	struct watch_metrics m = sample(1, "j");
	char err[256] = "";

	cr_expect_eq(watch_prom_file(missing, &m, err, sizeof(err)), -1);
	cr_expect_neq(err[0], 0);
	cr_expect_null(strchr(err, '\n'), "one line: %s", err);
	cr_expect_not_null(strstr(err, missing), "names the file: %s", err);
	cr_expect_not_null(strstr(err, strerror(ENOENT)), "says why: %s", err);

	/* rename(2) fails (the target is a directory): the temporary file is removed. */
	char *isdir = path_in(dir, "stepprof.prom");
	cr_assert_eq(mkdir(isdir, 0755), 0);
	err[0] = 0;
	cr_expect_eq(watch_prom_file(isdir, &m, err, sizeof(err)), -1);
	cr_expect_neq(err[0], 0);
	cr_expect_null(strchr(err, '\n'), "one line: %s", err);
	char *names = dir_names(dir);
	cr_expect_str_eq(names, "stepprof.prom", "the temporary file is left: %s", names);

	free(names);
	sp_t_rmrf(dir);
	free(isdir);
	free(missing);
	free(dir);
}

Test(watch_prom, textfile_in_the_current_directory)
{
	char *dir = sp_t_tmpdir("promfile");
	cr_assert_eq(chdir(dir), 0);
	struct watch_metrics m = sample(1, "j");
	char err[256];
	cr_expect_eq(watch_prom_file("m.prom", &m, err, sizeof(err)), 0, "%s", err);
	char *names = dir_names(".");
	cr_expect_str_eq(names, "m.prom");
	cr_expect_eq(watch_prom_file("", &m, err, sizeof(err)), -1, "an empty name");
	cr_expect_eq(watch_prom_file("sub/", &m, err, sizeof(err)), -1, "a directory, not a file");
	free(names);
	sp_t_rmrf(dir);
	free(dir);
}
