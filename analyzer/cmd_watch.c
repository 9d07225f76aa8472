/*
 * cmd_watch.c - `stepprof watch [options] DIR`: follow a running job's trace
 * directory, one status line per trainer process every interval, alerts when
 * device memory runs away or steps slow down, Prometheus metrics
 * (docs/watch.md).
 *
 * Divided into: usage and options; the alert hook (--alert-cmd); the status
 * lines (text, JSON) and the metrics; the loop.
 *
 * Exit codes: 0 when every process of the job has ended (or on SIGINT and
 * SIGTERM, or after --once); 1 bad command line; 4 internal (out of memory,
 * a --listen address that cannot be bound, output not written); 5 with
 * --exit-on-alert, at the first alert raised.
 */
#include "commands.h"
#include "jsonw.h"
#include "util.h"
#include "watch.h"

#include <errno.h>
#include <getopt.h>
#include <malloc.h>
#include <math.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define SP_EXIT_ALERT 5

#ifndef STEPPROF_VERSION
#define STEPPROF_VERSION "0"
#endif

static void watch_usage(FILE *f)
{
	fprintf(f,
		"usage: stepprof watch [--interval S] [--window N] [--json] [--once] [--prom-file FILE]\n"
		"                      [--listen ADDR:PORT] [--alert-cmd CMD] [--exit-on-alert]\n"
		"                      [--step-regex RE] [--threshold NAME=VALUE]... [--merge-runs] DIR\n\n"
		"Follow a running job's trace directory (new processes, forked workers, ranks; files whose\n"
		"ring wraps), reading only what is new at each tick. Every interval, one line per trainer\n"
		"process: iterations and rate, median step time over the window and its change against\n"
		"the first window, the breakdown over the window, device memory live and peak against\n"
		"capacity, lost records, active alerts. Ends when every process of the job has ended.\n\n"
		"  --interval S          seconds between ticks (default 5)\n"
		"  --window N            iterations of the recent window (default 50)\n"
		"  --json                one JSON object per tick (schema stepprof.watch/1, docs/watch.md)\n"
		"  --once                one tick, then exit\n"
		"  --prom-file FILE      the metrics for node_exporter's textfile collector (atomic)\n"
		"  --listen ADDR:PORT    serve GET /metrics (Prometheus), e.g. 127.0.0.1:9464;\n"
		"                        an address other than loopback must be given explicitly\n"
		"  --alert-cmd CMD       run CMD (with /bin/sh) when an alert is raised or cleared, with\n"
		"                        STEPPROF_ALERT, STEPPROF_ALERT_STATE (raised|cleared),\n"
		"                        STEPPROF_ALERT_RANK, STEPPROF_ALERT_PID, STEPPROF_ALERT_MESSAGE\n"
		"  --exit-on-alert       exit with status 5 at the first alert raised\n"
		"  --step-regex RE       NVTX range names that are iterations (as stepprof analyze)\n"
		"  --threshold N=V       override an alert's threshold (repeatable)\n"
		"  --merge-runs          follow files of different runs (run ids) as one job; refused by default\n\n"
		"Alerts: memory_runaway, memory_high, alloc_failed, alloc_retry_storm, step_regression,\n"
		"stalled; each raised once and cleared once, on stderr, in --json and in the metrics.\n\n"
		"Thresholds (default):\n");
	for (int i = 0; i < WATCH_T__COUNT; i++)
		fprintf(f, "  %-38s %-10.10g %s\n", watch_threshold_name[i], watch_threshold_default[i],
			watch_threshold_help[i]);
	fprintf(f, "\nExit status: 0 the job ended (or --once, SIGINT, SIGTERM), 1 usage (also: files of more\n"
		   "than one run without --merge-runs), 4 internal,\n"
		   "5 an alert was raised (--exit-on-alert).\n");
}

/* ------------------------------------------------------------ alert hook */

static volatile sig_atomic_t g_stop;

static void on_stop(int sig)
{
	(void)sig;
	g_stop = 1;
}

struct hook {
	pid_t pid;
	char alert[32];
};
#define MAX_HOOKS 16
static struct hook g_hooks[MAX_HOOKS];

/* Reap finished hooks; a failure is reported, never fatal. */
static void hooks_reap(int wait_all)
{
	for (int i = 0; i < MAX_HOOKS; i++) {
		if (!g_hooks[i].pid)
			continue;
		int st;
		pid_t p = waitpid(g_hooks[i].pid, &st, wait_all ? 0 : WNOHANG);
		if (p == 0)
			continue;
		if (p > 0 && !(WIFEXITED(st) && WEXITSTATUS(st) == 0))
			util_err("watch", "--alert-cmd for %s failed (%s %d)", g_hooks[i].alert,
				 WIFEXITED(st) ? "exit status" : "signal", WIFEXITED(st) ? WEXITSTATUS(st) : WTERMSIG(st));
		g_hooks[i].pid = 0;
	}
}

static void hook_run(const char *cmd, const struct watch_event *e)
{
	int slot = -1;
	for (int i = 0; i < MAX_HOOKS && slot < 0; i++)
		if (!g_hooks[i].pid)
			slot = i;
	if (slot < 0) {
		util_err("watch", "--alert-cmd: %d still running; %s not passed on", MAX_HOOKS,
			 watch_alert_name[e->alert]);
		return;
	}
	char rank[16], pid[16];
	snprintf(rank, sizeof(rank), "%d", e->f->hdr.rank >= 0 ? e->f->hdr.rank : 0);
	snprintf(pid, sizeof(pid), "%d", (int)e->f->hdr.pid);
	fflush(NULL);
	pid_t p = fork();
	if (p < 0) {
		util_err("watch", "--alert-cmd: fork: %s", strerror(errno));
		return;
	}
	if (p == 0) {
		setenv("STEPPROF_ALERT", watch_alert_name[e->alert], 1);
		setenv("STEPPROF_ALERT_STATE", e->raised ? "raised" : "cleared", 1);
		setenv("STEPPROF_ALERT_RANK", rank, 1);
		setenv("STEPPROF_ALERT_PID", pid, 1);
		setenv("STEPPROF_ALERT_MESSAGE", e->msg, 1);
		signal(SIGPIPE, SIG_DFL);
		execl("/bin/sh", "sh", "-c", cmd, (char *)NULL);
		_exit(127);
	}
	g_hooks[slot].pid = p;
	snprintf(g_hooks[slot].alert, sizeof(g_hooks[slot].alert), "%s", watch_alert_name[e->alert]);
}

/* ------------------------------------------------------ lines and metrics */

struct rankview {
	struct watch_file *f;
	struct watch_rank_metrics m;
	double rate, change, share[AN_CAT__COUNT];
	uint64_t prev_iters;
};

static int rank_of(const struct watch_file *f)
{
	return f->hdr.rank >= 0 ? f->hdr.rank : 0;
}

/* The trainers, by rank then pid, with their metrics at this tick. */
static size_t build_views(struct watch *w, struct rankview **views, size_t *cap, double dt)
{
	size_t n = 0;
	for (size_t i = 0; i < w->nfiles; i++) {
		struct watch_file *f = w->files[i];
		if (!f->tr)
			continue;
		if (n == *cap) {
			size_t c = *cap ? *cap * 2 : 8;
			struct rankview *v = realloc(*views, c * sizeof(*v));
			if (!v)
				break;
			memset(v + *cap, 0, (c - *cap) * sizeof(*v));
			*views = v;
			*cap = c;
		}
		struct rankview *v = &(*views)[n];
		if (v->f != f) {
			memset(v, 0, sizeof(*v));
			v->f = f;
		}
		n++;
	}
	for (size_t i = 0; i < n; i++) {
		struct rankview *v = &(*views)[i];
		struct watch_file *f = v->f;
		struct watch_trainer *t = f->tr;
		struct watch_rank_metrics *m = &v->m;
		m->rank = rank_of(f);
		v->rate = dt > 0 ? (double)(t->iterations - v->prev_iters) / dt : 0;
		v->prev_iters = t->iterations;
		m->iterations = t->iterations;
		m->step_seconds_sum = t->step_sum_s;
		for (int q = 0; q < WATCH_NQ; q++)
			m->step_quantile[q] = watch_step_quantile(t, w->o.window, watch_quantiles[q]);
		for (int c = 0; c < AN_CAT__COUNT && c < WATCH_PHASES; c++)
			m->phase_seconds[c] = t->phase_s[c];
		double first = watch_first_median(t, w->o.window);
		v->change = isfinite(first) && first > 0 ? m->step_quantile[0] / first - 1 : NAN;
		struct watch_iter *r = malloc((w->o.window ? w->o.window : 1) * sizeof(*r));
		size_t nr = r ? watch_recent(t, r, w->o.window) : 0;
		double tot = 0, cat[AN_CAT__COUNT] = {0};
		for (size_t k = 0; k < nr; k++)
			for (int c = 0; c < AN_CAT__COUNT; c++) {
				cat[c] += (double)r[k].bd[c];
				tot += (double)r[k].bd[c];
			}
		free(r);
		for (int c = 0; c < AN_CAT__COUNT; c++)
			v->share[c] = tot > 0 ? cat[c] / tot : NAN;
		m->dev_mask = f->dev_seen;
		for (unsigned d = 0; d < SP_MAX_DEVICES; d++) {
			m->dev_live[d] = f->dev_live[d];
			if (f->dev_live[d] > t->dev_peak[d])
				t->dev_peak[d] = f->dev_live[d];
			m->dev_peak[d] = t->dev_peak[d];
			m->dev_capacity[d] = f->dev_capacity[d];
		}
		m->lost_records = f->lost;
		memcpy(m->alert, t->alert, sizeof(m->alert));
	}
	return n;
}

static void put_text_line(const struct watch *w, const struct rankview *v)
{
	const struct watch_file *f = v->f;
	const struct watch_trainer *t = f->tr;
	char b1[32], b2[32], b3[32], clock[16];
	time_t now = time(NULL);
	struct tm tm;
	localtime_r(&now, &tm);
	strftime(clock, sizeof(clock), "%H:%M:%S", &tm);
	printf("[%s] rank %d pid %d: %llu it", clock, v->m.rank, (int)f->hdr.pid, (unsigned long long)t->iterations);
	if (t->iterations)
		printf(" (%.2f/s)", v->rate);
	if (isfinite(v->m.step_quantile[0])) {
		printf(", step %s", util_fmt_ns((uint64_t)(v->m.step_quantile[0] * 1e9), b1, sizeof(b1)));
		if (isfinite(v->change))
			printf(" (%+.0f%% vs first %u)", v->change * 100, w->o.window);
	} else {
		printf(", no iteration yet (%s)", t->source_kind == AN_SRC_NONE ? "none found" : "first one open");
	}
	if (isfinite(v->share[0])) {
		printf(" |");
		for (int c = 0; c < AN_CAT__COUNT; c++)
			printf(" %s %.0f%%", an_cat_name[c], v->share[c] * 100);
	}
	for (unsigned d = 0; d < SP_MAX_DEVICES; d++) {
		if (!(v->m.dev_mask >> d & 1))
			continue;
		printf(" | dev%u %s peak %s", d, util_fmt_bytes(v->m.dev_live[d], b1, sizeof(b1)),
		       util_fmt_bytes(v->m.dev_peak[d], b2, sizeof(b2)));
		if (v->m.dev_capacity[d])
			printf(" of %s", util_fmt_bytes(v->m.dev_capacity[d], b3, sizeof(b3)));
	}
	if (v->m.lost_records)
		printf(" | lost %llu", (unsigned long long)v->m.lost_records);
	if (f->overwritten)
		printf(" | ring wrapped (%llu overwritten)", (unsigned long long)f->overwritten);
	if (f->missed_chunks)
		printf(" | %llu chunks missed", (unsigned long long)f->missed_chunks);
	int any = 0;
	for (int k = 0; k < WATCH_A__COUNT; k++)
		if (t->alert[k])
			printf("%s%s", any++ ? "," : " | ALERT ", watch_alert_name[k]);
	if (f->ended)
		printf(" | ended");
	putchar('\n');
}

static void put_json(const struct watch *w, const struct rankview *v, size_t n, const struct watch_event *ev,
		     size_t nev, int ended)
{
	struct jsonw j;
	jw_init(&j, stdout, 0);
	jw_obj_begin(&j);
	jw_kstr(&j, "schema", "stepprof.watch/1");
	jw_ku64(&j, "tick", w->tick);
	jw_kdouble(&j, "time_unix", (double)time(NULL));
	jw_ku64(&j, "time_mono_ns", w->now_ns);
	jw_kstr(&j, "dir", w->dir);
	size_t procs = 0;
	for (size_t i = 0; i < w->nfiles; i++)
		procs += w->files[i]->have_hdr;
	jw_ku64(&j, "processes", procs);
	/* how long this tick took to read and analyse what was new: a record is said at most interval + that after */
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	uint64_t done = (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
	jw_kdouble(&j, "tick_s", done > w->now_ns ? (double)(done - w->now_ns) / 1e9 : 0);
	jw_kbool(&j, "ended", ended);
	jw_karr_begin(&j, "ranks");
	for (size_t i = 0; i < n; i++) {
		const struct watch_file *f = v[i].f;
		const struct watch_trainer *t = f->tr;
		jw_obj_begin(&j);
		jw_ki64(&j, "rank", v[i].m.rank);
		jw_ki64(&j, "pid", f->hdr.pid);
		jw_kstr(&j, "iteration_source", an_source_name[t->source_kind]);
		jw_ku64(&j, "iterations", t->iterations);
		jw_kdouble(&j, "iterations_per_s", v[i].rate);
		jw_kdouble(&j, "step_s_median", v[i].m.step_quantile[0]);
		jw_kdouble(&j, "step_s_p90", v[i].m.step_quantile[1]);
		jw_kdouble(&j, "step_change", v[i].change);
		jw_kobj_begin(&j, "breakdown_fraction");
		for (int c = 0; c < AN_CAT__COUNT; c++)
			jw_kdouble(&j, an_cat_name[c], v[i].share[c]);
		jw_obj_end(&j);
		jw_karr_begin(&j, "devices");
		for (unsigned d = 0; d < SP_MAX_DEVICES; d++) {
			if (!(v[i].m.dev_mask >> d & 1))
				continue;
			jw_obj_begin(&j);
			jw_ku64(&j, "device", d);
			jw_ku64(&j, "live_bytes", v[i].m.dev_live[d]);
			jw_ku64(&j, "peak_bytes", v[i].m.dev_peak[d]);
			if (v[i].m.dev_capacity[d])
				jw_ku64(&j, "capacity_bytes", v[i].m.dev_capacity[d]);
			else
				jw_knull(&j, "capacity_bytes");
			jw_obj_end(&j);
		}
		jw_arr_end(&j);
		jw_ku64(&j, "records", f->records);
		jw_ku64(&j, "lost_records", v[i].m.lost_records);
		jw_ku64(&j, "overwritten_records", f->overwritten);
		jw_ku64(&j, "missed_chunks", f->missed_chunks);
		jw_kbool(&j, "ended", f->ended);
		jw_karr_begin(&j, "alerts");
		for (int k = 0; k < WATCH_A__COUNT; k++)
			if (t->alert[k])
				jw_str(&j, watch_alert_name[k]);
		jw_arr_end(&j);
		if (t->alert[WATCH_A_MEMORY_RUNAWAY]) {
			jw_kobj_begin(&j, "memory_runaway");
			jw_ku64(&j, "device", (uint64_t)t->runaway_dev);
			jw_kdouble(&j, "slope_bytes_per_iteration", t->runaway_slope);
			jw_kdouble(&j, "r2", t->runaway_r2);
			jw_kdouble(&j, "full_at_iteration", t->runaway_full_iter);
			jw_kdouble(&j, "full_in_s", t->runaway_full_s);
			jw_karr_begin(&j, "sites");
			for (int s = 0; s < t->nsites; s++) {
				jw_obj_begin(&j);
				jw_kstr(&j, "site", t->sites[s]);
				jw_ku64(&j, "bytes", t->site_bytes[s]);
				jw_obj_end(&j);
			}
			jw_arr_end(&j);
			jw_obj_end(&j);
		}
		jw_obj_end(&j);
	}
	jw_arr_end(&j);
	jw_karr_begin(&j, "events");
	for (size_t i = 0; i < nev; i++) {
		jw_obj_begin(&j);
		jw_kstr(&j, "alert", watch_alert_name[ev[i].alert]);
		jw_kstr(&j, "state", ev[i].raised ? "raised" : "cleared");
		jw_ki64(&j, "rank", rank_of(ev[i].f));
		jw_ki64(&j, "pid", ev[i].f->hdr.pid);
		jw_kstr(&j, "message", ev[i].msg);
		jw_obj_end(&j);
	}
	jw_arr_end(&j);
	jw_obj_end(&j); /* a top-level value ends its line */
}

/* The metrics text for --listen: into *body (malloc'd). */
static int metrics_text(const struct watch_metrics *m, char **body, size_t *len)
{
	FILE *f = open_memstream(body, len);
	if (!f)
		return -1;
	int rc = watch_prom_write(f, m);
	return fclose(f) || rc ? -1 : 0;
}

/* -------------------------------------------------------------- the loop */

static int parse_num(const char *opt, const char *arg, double lo, double hi, double *out)
{
	char *end;
	double v = strtod(arg, &end);
	if (end == arg || *end || !isfinite(v) || v < lo || v > hi) {
		util_err("watch", "%s %s: not a number from %g to %g", opt, arg, lo, hi);
		return -1;
	}
	*out = v;
	return 0;
}

int command_watch(int argc, char **argv)
{
	static const struct option longopts[] = {
	    {"interval", required_argument, NULL, 'i'},	 {"window", required_argument, NULL, 'w'},
	    {"json", no_argument, NULL, 'j'},		 {"once", no_argument, NULL, '1'},
	    {"prom-file", required_argument, NULL, 'P'}, {"listen", required_argument, NULL, 'L'},
	    {"alert-cmd", required_argument, NULL, 'A'}, {"exit-on-alert", no_argument, NULL, 'X'},
	    {"step-regex", required_argument, NULL, 'r'}, {"threshold", required_argument, NULL, 't'},
	    {"merge-runs", no_argument, NULL, 'M'},	 {"help", no_argument, NULL, 'h'},
	    {NULL, 0, NULL, 0},
	};
	struct watch_opts o = {.interval_s = 5, .window = 50};
	for (int i = 0; i < WATCH_T__COUNT; i++)
		o.threshold[i] = watch_threshold_default[i];
	int json = 0, once = 0, exit_on_alert = 0, c;
	const char *prom_file = NULL, *listen_addr = NULL, *alert_cmd = NULL;
	char err[512];
	double v;
	optind = 1;
	opterr = 0;
	while ((c = getopt_long(argc, argv, "h", longopts, NULL)) != -1) {
		switch (c) {
		case 'i':
			if (parse_num("--interval", optarg, 0.05, 86400, &o.interval_s))
				return SP_EXIT_USAGE;
			break;
		case 'w':
			if (parse_num("--window", optarg, 2, 100000, &v))
				return SP_EXIT_USAGE;
			o.window = (unsigned)v;
			break;
		case 'j':
			json = 1;
			break;
		case '1':
			once = 1;
			break;
		case 'P':
			prom_file = optarg;
			break;
		case 'L':
			listen_addr = optarg;
			break;
		case 'A':
			alert_cmd = optarg;
			break;
		case 'X':
			exit_on_alert = 1;
			break;
		case 'r':
			o.step_regex = optarg;
			break;
		case 'M':
			o.merge_runs = 1;
			break;
		case 't':
			if (watch_set_threshold(&o, optarg, err, sizeof(err))) {
				util_err("watch", "%s", err);
				return SP_EXIT_USAGE;
			}
			break;
		case 'h':
			watch_usage(stdout);
			return SP_EXIT_OK;
		default:
			return util_bad_option("watch", argv[optind - 1]);
		}
	}
	if (optind >= argc)
		return util_no_operand("watch");
	if (optind + 1 < argc) {
		util_err("watch", "%s: one directory only", argv[optind + 1]);
		return SP_EXIT_USAGE;
	}
	if (prom_file && !*prom_file) {
		util_err("watch", "--prom-file: empty file name");
		return SP_EXIT_USAGE;
	}
	struct watch_httpd *httpd = NULL;
	if (listen_addr && watch_httpd_open(listen_addr, &httpd, err, sizeof(err))) {
		util_err("watch", "--listen %s: %s", listen_addr, err);
		return SP_EXIT_INTERNAL;
	}
	struct watch w;
	if (watch_init(&w, argv[optind], &o)) {
		if (httpd)
			watch_httpd_close(httpd);
		return SP_EXIT_INTERNAL;
	}
	struct sigaction sa = {.sa_handler = on_stop};
	sigemptyset(&sa.sa_mask);
	sigaction(SIGINT, &sa, NULL);
	sigaction(SIGTERM, &sa, NULL);
	signal(SIGPIPE, SIG_IGN);

	const char *slash = strrchr(w.dir, '/');
	const char *job = slash && slash[1] ? slash + 1 : w.dir;
	struct rankview *views = NULL;
	size_t vcap = 0;
	struct watch_rank_metrics *rm = NULL;
	char *body = NULL;
	size_t blen = 0;
	int rc = SP_EXIT_OK, raised = 0;
	double last_t = 0;
	for (;;) {
		/* a stop that came before this tick's reading: this tick is the last (it reads all before it) */
		int last = g_stop;
		int polled = watch_poll(&w);
		if (polled != 0) {
			rc = polled > 0 ? SP_EXIT_USAGE : SP_EXIT_INTERNAL;
			break;
		}
		struct watch_event *ev = NULL;
		size_t nev = 0;
		if (watch_eval(&w, &ev, &nev) != 0) {
			rc = SP_EXIT_INTERNAL;
			break;
		}
		hooks_reap(0);
		for (size_t i = 0; i < nev; i++) {
			fprintf(stderr, "stepprof watch: %s %s (rank %d, pid %d): %s\n",
				ev[i].raised ? "ALERT" : "cleared", watch_alert_name[ev[i].alert], rank_of(ev[i].f),
				(int)ev[i].f->hdr.pid, ev[i].msg);
			raised |= ev[i].raised;
			if (alert_cmd)
				hook_run(alert_cmd, &ev[i]);
		}
		double now_s = (double)w.now_ns / 1e9;
		size_t n = build_views(&w, &views, &vcap, last_t ? now_s - last_t : 0);
		last_t = now_s;
		int ended = watch_all_ended(&w);
		if (json)
			put_json(&w, views, n, ev, nev, ended);
		else
			for (size_t i = 0; i < n; i++)
				put_text_line(&w, &views[i]);
		free(ev);
		if (fflush(stdout)) {
			rc = util_stdout_failed();
			break;
		}
		if (prom_file || httpd) {
			struct watch_rank_metrics *nrm = realloc(rm, (n ? n : 1) * sizeof(*rm));
			if (!nrm) {
				rc = SP_EXIT_INTERNAL;
				break;
			}
			rm = nrm;
			for (size_t i = 0; i < n; i++)
				rm[i] = views[i].m;
			/* the oldest a record can be when a tick reports it: the interval and the tick's own time */
			struct timespec ts;
			clock_gettime(CLOCK_MONOTONIC, &ts);
			double tick_s = ((double)ts.tv_sec * 1e9 + (double)ts.tv_nsec - (double)w.now_ns) / 1e9;
			struct watch_metrics m = {job, w.host, STEPPROF_VERSION, n, rm, o.interval_s + tick_s};
			if (prom_file && watch_prom_file(prom_file, &m, err, sizeof(err)))
				util_err("watch", "--prom-file %s: %s", prom_file, err);
			if (httpd) {
				free(body);
				body = NULL;
				if (metrics_text(&m, &body, &blen))
					blen = 0;
			}
		}
		/* the pages a tick freed go back to the system: a watcher of weeks keeps its size */
		malloc_trim(0);
		if (exit_on_alert && raised) {
			rc = SP_EXIT_ALERT;
			break;
		}
		if (once || ended || last)
			break;
		/* until the next tick: serve /metrics, or sleep; a signal ends the wait */
		struct timespec t0, t1;
		clock_gettime(CLOCK_MONOTONIC, &t0);
		double left = o.interval_s;
		while (left > 0 && !g_stop) {
			if (httpd) {
				if (watch_httpd_serve(httpd, (int)(left * 1000) + 1, body ? body : "", blen) != 0) {
					util_err("watch", "--listen %s: the server failed; no more metrics served",
						 listen_addr);
					watch_httpd_close(httpd);
					httpd = NULL;
				}
			} else {
				struct timespec d = {(time_t)left, (long)((left - floor(left)) * 1e9)};
				nanosleep(&d, NULL);
			}
			clock_gettime(CLOCK_MONOTONIC, &t1);
			left = o.interval_s - ((double)(t1.tv_sec - t0.tv_sec) + (double)(t1.tv_nsec - t0.tv_nsec) / 1e9);
		}
	}
	hooks_reap(1);
	free(body);
	free(rm);
	free(views);
	if (httpd)
		watch_httpd_close(httpd);
	watch_free(&w);
	return rc;
}
