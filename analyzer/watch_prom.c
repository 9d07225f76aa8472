/*
 * watch_prom.c - the Prometheus text exposition (format 0.0.4) of a watch
 * snapshot (watch_metrics.h): what GET /metrics answers and what the
 * node_exporter textfile collector reads. docs/watch-prometheus.md lists the
 * families for their users.
 *
 * Divided into:
 *   1. the names: alerts, quantiles, phases (categories.def's order),
 *   2. values and labels as the format wants them (numbers, escaping),
 *   3. the families, each written whole (HELP, TYPE, every sample) in turn,
 *   4. the textfile: a temporary file beside the target, fsync, rename(2).
 *
 * RATIONALE: a family is written only when it has at least one sample (no
 * ranks, no described device, no known capacity): an empty HELP/TYPE pair is
 * legal but says nothing, and client libraries omit it too.
 */
#include "watch_metrics.h"

#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

/* ------------------------------------------------------------- 1. the names */

const char *const watch_alert_name[WATCH_A__COUNT] = {
#define WATCH_ALERT_NAME(id, name) [WATCH_A_##id] = name,
    WATCH_ALERTS(WATCH_ALERT_NAME)
#undef WATCH_ALERT_NAME
};

const double watch_quantiles[WATCH_NQ] = {0.5, 0.9, 0.99};

/* phase_seconds[i] is the category of line i of categories.def. */
static const char *const phase_name[] = {
#define SP_CATEGORY(id, name) name,
#include "stepprof/categories.def"
#undef SP_CATEGORY
};
_Static_assert(sizeof(phase_name) / sizeof(phase_name[0]) == WATCH_PHASES,
	       "WATCH_PHASES must be the number of categories of categories.def");
_Static_assert(SP_MAX_DEVICES <= 32, "dev_mask holds one bit per device");

/* ------------------------------------------------- 2. values and labels */

/*
 * A double as the format's parser (Go's strconv.ParseFloat) reads it: NaN,
 * +Inf, -Inf, else the shortest %g that reads back as the same double (0.1,
 * not 0.10000000000000001). printf's decimal point is the C locale's: stepprof
 * never calls setlocale().
 */
static void put_double(FILE *f, double v)
{
	if (isnan(v)) {
		fputs("NaN", f);
		return;
	}
	if (isinf(v)) {
		fputs(v > 0 ? "+Inf" : "-Inf", f);
		return;
	}
	char buf[40];
	for (int prec = 15; prec <= 17; prec++) {
		snprintf(buf, sizeof(buf), "%.*g", prec, v);
		if (strtod(buf, NULL) == v)
			break;
	}
	fputs(buf, f);
}

/* The length of the valid UTF-8 sequence at s[0..n), 0 when it is not one. */
static size_t utf8_len(const unsigned char *s, size_t n)
{
	unsigned c = s[0];
	size_t len;
	unsigned min;
	if (c < 0x80)
		return 1;
	if (c >= 0xc2 && c <= 0xdf)
		len = 2, min = 0x80;
	else if (c >= 0xe0 && c <= 0xef)
		len = 3, min = 0x800;
	else if (c >= 0xf0 && c <= 0xf4)
		len = 4, min = 0x10000;
	else
		return 0;
	if (len > n)
		return 0;
	unsigned cp = c & (0x7f >> len);
	for (size_t i = 1; i < len; i++) {
		if ((s[i] & 0xc0) != 0x80)
			return 0;
		cp = cp << 6 | (s[i] & 0x3f);
	}
	if (cp < min || cp > 0x10ffff || (cp >= 0xd800 && cp <= 0xdfff))
		return 0;
	return len;
}

/*
 * A label value between its quotes: backslash, double quote and line feed
 * escaped as the format says. Label values must be UTF-8 (Prometheus refuses
 * the whole page otherwise); a byte that is not, in a directory or host name,
 * becomes U+FFFD.
 */
static void put_label_value(FILE *f, const char *v)
{
	const unsigned char *s = (const unsigned char *)(v ? v : "");
	size_t n = strlen((const char *)s);
	for (size_t i = 0; i < n;) {
		size_t len = utf8_len(s + i, n - i);
		if (!len) {
			fputs("\xef\xbf\xbd", f);
			i++;
			continue;
		}
		if (s[i] == '\\')
			fputs("\\\\", f);
		else if (s[i] == '"')
			fputs("\\\"", f);
		else if (s[i] == '\n')
			fputs("\\n", f);
		else
			fwrite(s + i, 1, len, f);
		i += len;
	}
}

static void put_label(FILE *f, const char *name, const char *value)
{
	fprintf(f, "%s=\"", name);
	put_label_value(f, value);
	fputc('"', f);
}

/* "name{job="...",host="...",rank="N"" — the caller adds its labels and "} value". */
static void open_rank_sample(FILE *f, const char *name, const struct watch_metrics *m,
			     const struct watch_rank_metrics *r)
{
	fprintf(f, "%s{", name);
	put_label(f, "job", m->job);
	fputc(',', f);
	put_label(f, "host", m->host);
	fprintf(f, ",rank=\"%d\"", r->rank);
}

static void close_sample_u64(FILE *f, uint64_t v)
{
	fprintf(f, "} %llu\n", (unsigned long long)v);
}

static void close_sample_double(FILE *f, double v)
{
	fputs("} ", f);
	put_double(f, v);
	fputc('\n', f);
}

/* ------------------------------------------------------------ 3. the families */

static void family(FILE *f, const char *name, const char *type, const char *help)
{
	fprintf(f, "# HELP %s %s\n# TYPE %s %s\n", name, help, name, type);
}

static int rank_has_device(const struct watch_rank_metrics *r, int capacity)
{
	for (int d = 0; d < SP_MAX_DEVICES; d++)
		if ((r->dev_mask >> d & 1) && (!capacity || r->dev_capacity[d]))
			return 1;
	return 0;
}

static int any_device(const struct watch_metrics *m, int capacity)
{
	for (size_t i = 0; i < m->nranks; i++)
		if (rank_has_device(&m->ranks[i], capacity))
			return 1;
	return 0;
}

static void write_steps(FILE *f, const struct watch_metrics *m)
{
	family(f, "stepprof_iterations_total", "counter", "Complete training iterations of the rank.");
	for (size_t i = 0; i < m->nranks; i++) {
		open_rank_sample(f, "stepprof_iterations_total", m, &m->ranks[i]);
		close_sample_u64(f, m->ranks[i].iterations);
	}

	family(f, "stepprof_step_duration_seconds", "summary",
	       "Wall time of an iteration: quantiles over the watch window, sum and count over the run.");
	for (size_t i = 0; i < m->nranks; i++) {
		const struct watch_rank_metrics *r = &m->ranks[i];
		for (int q = 0; q < WATCH_NQ; q++) {
			open_rank_sample(f, "stepprof_step_duration_seconds", m, r);
			fputs(",quantile=\"", f);
			put_double(f, watch_quantiles[q]);
			fputc('"', f);
			close_sample_double(f, r->step_quantile[q]);
		}
		open_rank_sample(f, "stepprof_step_duration_seconds_sum", m, r);
		close_sample_double(f, r->step_seconds_sum);
		open_rank_sample(f, "stepprof_step_duration_seconds_count", m, r);
		close_sample_u64(f, r->iterations);
	}

	family(f, "stepprof_phase_seconds_total", "counter",
	       "Wall time of the iterations given to each phase of the breakdown.");
	for (size_t i = 0; i < m->nranks; i++)
		for (int p = 0; p < WATCH_PHASES; p++) {
			open_rank_sample(f, "stepprof_phase_seconds_total", m, &m->ranks[i]);
			fprintf(f, ",phase=\"%s\"", phase_name[p]);
			close_sample_double(f, m->ranks[i].phase_seconds[p]);
		}
}

static void write_memory(FILE *f, const struct watch_metrics *m)
{
	if (any_device(m, 0)) {
		family(f, "stepprof_device_memory_bytes", "gauge",
		       "Device memory allocated by the rank: live now, and the peak so far.");
		for (size_t i = 0; i < m->nranks; i++) {
			const struct watch_rank_metrics *r = &m->ranks[i];
			for (int d = 0; d < SP_MAX_DEVICES; d++) {
				if (!(r->dev_mask >> d & 1))
					continue;
				open_rank_sample(f, "stepprof_device_memory_bytes", m, r);
				fprintf(f, ",device=\"%d\",state=\"live\"", d);
				close_sample_u64(f, r->dev_live[d]);
				open_rank_sample(f, "stepprof_device_memory_bytes", m, r);
				fprintf(f, ",device=\"%d\",state=\"peak\"", d);
				close_sample_u64(f, r->dev_peak[d]);
			}
		}
	}
	if (any_device(m, 1)) {
		family(f, "stepprof_device_memory_capacity_bytes", "gauge", "Total memory of the device.");
		for (size_t i = 0; i < m->nranks; i++) {
			const struct watch_rank_metrics *r = &m->ranks[i];
			for (int d = 0; d < SP_MAX_DEVICES; d++) {
				if (!(r->dev_mask >> d & 1) || !r->dev_capacity[d])
					continue;
				open_rank_sample(f, "stepprof_device_memory_capacity_bytes", m, r);
				fprintf(f, ",device=\"%d\"", d);
				close_sample_u64(f, r->dev_capacity[d]);
			}
		}
	}
}

static void write_health(FILE *f, const struct watch_metrics *m)
{
	if (m->nranks) {
		family(f, "stepprof_lost_records_total", "counter",
		       "Trace records the rank could not write (its trace has gaps).");
		for (size_t i = 0; i < m->nranks; i++) {
			open_rank_sample(f, "stepprof_lost_records_total", m, &m->ranks[i]);
			close_sample_u64(f, m->ranks[i].lost_records);
		}

		family(f, "stepprof_alert", "gauge", "1 while the alert is active for the rank, else 0.");
		for (size_t i = 0; i < m->nranks; i++)
			for (int a = 0; a < WATCH_A__COUNT; a++) {
				open_rank_sample(f, "stepprof_alert", m, &m->ranks[i]);
				fprintf(f, ",alert=\"%s\"", watch_alert_name[a]);
				close_sample_u64(f, m->ranks[i].alert[a] ? 1 : 0);
			}
	}

	family(f, "stepprof_watch_lag_seconds", "gauge",
	       "How far the watcher's last tick was behind the newest trace record.");
	fputs("stepprof_watch_lag_seconds{", f);
	put_label(f, "job", m->job);
	fputc(',', f);
	put_label(f, "host", m->host);
	close_sample_double(f, m->scrape_lag_seconds);
}

int watch_prom_write(FILE *f, const struct watch_metrics *m)
{
	family(f, "stepprof_build_info", "gauge", "The stepprof version that writes these metrics; always 1.");
	fputs("stepprof_build_info{", f);
	put_label(f, "version", m->version);
	fputs("} 1\n", f);

	if (m->nranks)
		write_steps(f, m);
	write_memory(f, m);
	write_health(f, m);

	if (fflush(f) != 0 || ferror(f))
		return -1;
	return 0;
}

/* ---------------------------------------------------------- 4. the textfile */

/*
 * NOTE: the temporary file is "<dir>/.<name>.XXXXXX": node_exporter reads only
 * *.prom files and skips it, and rename(2) within one directory is atomic, so
 * a reader sees the old file or the new one, never a part. It is made 0644:
 * node_exporter usually runs as another user (prometheus on Debian).
 */
int watch_prom_file(const char *path, const struct watch_metrics *m, char *err, size_t errlen)
{
	const char *slash = strrchr(path, '/');
	const char *base = slash ? slash + 1 : path;
	int dirlen = slash ? (int)(slash - path) : 0;
	char *tmp = NULL;
	FILE *f = NULL;
	int fd = -1, rc;

	if (!*base) {
		snprintf(err, errlen, "%s: not a file name", path);
		return -1;
	}
	if (asprintf(&tmp, "%.*s%s.%s.XXXXXX", dirlen, path, slash ? "/" : "", base) < 0) {
		snprintf(err, errlen, "%s: out of memory", path);
		return -1;
	}
	fd = mkostemp(tmp, O_CLOEXEC);
	if (fd < 0) {
		snprintf(err, errlen, "%s: cannot create a temporary file beside it: %s", path, strerror(errno));
		free(tmp);
		return -1;
	}
	if (fchmod(fd, 0644) != 0 || !(f = fdopen(fd, "w"))) {
		snprintf(err, errlen, "%s: %s", tmp, strerror(errno));
		goto fail;
	}
	fd = -1; /* f owns it */
	errno = 0;
	if (watch_prom_write(f, m) != 0) {
		snprintf(err, errlen, "%s: cannot write: %s", tmp, errno ? strerror(errno) : "write error");
		goto fail;
	}
	if (fsync(fileno(f)) != 0) {
		snprintf(err, errlen, "%s: cannot write: %s", tmp, strerror(errno));
		goto fail;
	}
	rc = fclose(f);
	f = NULL;
	if (rc != 0) {
		snprintf(err, errlen, "%s: cannot write: %s", tmp, strerror(errno));
		goto fail;
	}
	if (rename(tmp, path) != 0) {
		snprintf(err, errlen, "%s: cannot replace it: %s", path, strerror(errno));
		goto fail;
	}
	free(tmp);

	/* The rename itself made durable; a directory that cannot be opened or synced changes nothing above. */
	char *dir = NULL;
	if (asprintf(&dir, "%.*s", slash ? (dirlen ? dirlen : 1) : 1, slash ? path : ".") >= 0) {
		int dfd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
		if (dfd >= 0) {
			fsync(dfd);
			close(dfd);
		}
		free(dir);
	}
	return 0;

fail:
	if (f)
		fclose(f);
	if (fd >= 0)
		close(fd);
	unlink(tmp);
	free(tmp);
	return -1;
}
