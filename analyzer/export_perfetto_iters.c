/*
 * export_perfetto_iters.c - what `stepprof analyze` finds, on the Perfetto
 * export's timeline (export_perfetto_int.h): an "iterations" track in the
 * trainer's process (and in each other rank's of a multi-process job), one slice per iteration (however found: NVTX ranges,
 * stepprof_step marks, automatic detection) with its breakdown in the args, and
 * the findings as instants on the same track, at the first iteration each
 * concerns (the run's start for a finding of the whole run).
 *
 * The analysis is the default one of `stepprof analyze DIR` (the trainer it
 * selects, default thresholds), run over the files the export read: one more
 * pass over the trace, ~20-40x faster than writing the JSON.
 */
#include "export_perfetto_int.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "analyze.h"
#include "util.h"

/* First-host CLOCK_MONOTONIC of the trainer's host, in document time. */
static int64_t doc_ns(const struct ex *x, unsigned host, uint64_t ns)
{
	return sat_sub(sat_add(clamp_ns(ns), x->hosts[host].offset_ns), x->zero);
}

static void put_ms(struct jsonw *w, const char *key, uint64_t ns)
{
	jw_key(w, key);
	if (ns % 1000000 == 0)
		jw_u64(w, ns / 1000000);
	else
		jw_double(w, (double)ns / 1e6);
}

static void iteration_slice(struct ex *x, const struct an_iter *it, size_t i, uint32_t pid, uint32_t tid,
			    unsigned host)
{
	struct jsonw *w = &x->w;
	int64_t b = doc_ns(x, host, it->start_ns), e = doc_ns(x, host, it->end_ns);
	if (!in_window(x, b, e))
		return;
	char name[48];
	snprintf(name, sizeof(name), "iteration %zu", i);
	jw_obj_begin(w);
	jw_kstr(w, "ph", "X");
	jw_kstr(w, "name", name);
	jw_ku64(w, "pid", pid);
	jw_ku64(w, "tid", tid);
	export_put_us(w, "ts", b);
	export_put_us(w, "dur", e - b);
	jw_kobj_begin(w, "args");
	unsigned top = 0;
	char key[32];
	for (unsigned c = 0; c < AN_CAT__COUNT; c++) {
		snprintf(key, sizeof(key), "%s_ms", an_cat_name[c]);
		put_ms(w, key, it->bd[c]);
		if (it->bd[c] > it->bd[top])
			top = c;
	}
	jw_kstr(w, "bottleneck", an_cat_name[top]);
	jw_obj_end(w);
	jw_obj_end(w);
	x->st->events++;
	x->st->iterations++;
}

static void finding_instant(struct ex *x, const struct an_analysis *a, const struct an_result_finding *f,
			    uint32_t pid, uint32_t tid, unsigned host)
{
	struct jsonw *w = &x->w;
	uint64_t at = a->run_begin_ns;
	if (f->first_iteration >= 0 && (size_t)f->first_iteration < a->nit)
		at = a->it[f->first_iteration].start_ns;
	int64_t ts = doc_ns(x, host, at);
	if (!in_window(x, ts, ts))
		return;
	char name[96];
	snprintf(name, sizeof(name), "%s (%s)", an_finding_name[f->kind], an_severity_name[f->severity]);
	jw_obj_begin(w);
	jw_kstr(w, "ph", "i");
	jw_kstr(w, "name", name);
	jw_kstr(w, "cat", "finding");
	jw_ku64(w, "pid", pid);
	jw_ku64(w, "tid", tid);
	export_put_us(w, "ts", ts);
	jw_kstr(w, "s", "t");
	jw_kobj_begin(w, "args");
	jw_kstr(w, "finding", an_finding_name[f->kind]);
	jw_kstr(w, "severity", an_severity_name[f->severity]);
	if (f->first_iteration >= 0) {
		jw_ki64(w, "first_iteration", f->first_iteration);
		jw_ki64(w, "last_iteration", f->last_iteration);
		jw_ki64(w, "iterations", f->iterations);
	}
	if (f->advice[0]) {
		/* its one line: the advice's first sentence (what is wrong; the rest says what to do) */
		char msg[sizeof(f->advice)];
		const char *end = strstr(f->advice, ". ");
		size_t n = end ? (size_t)(end - f->advice) + 1 : strlen(f->advice);
		memcpy(msg, f->advice, n);
		msg[n] = 0;
		jw_kstr(w, "message", msg);
		jw_kstr(w, "advice", f->advice);
	}
	jw_obj_end(w);
	jw_obj_end(w);
	x->st->events++;
	x->st->findings++;
}

/*
 * The iterations track of one trainer process: its iterations and, of the
 * analysis `analyze DIR` reports (the selected trainer), its findings.
 */
static void analysis_track(struct ex *x, const struct an_analysis *a, int findings)
{
	uint32_t pid = (uint32_t)a->trainer_pid;
	struct proc *p = proc_get(x, pid);
	unsigned host = p->host;
	uint32_t tid = x->next_pseudo++;
	export_meta(x, "thread_name", pid, tid, "name", "iterations", 0);
	export_meta(x, "thread_sort_index", pid, tid, "sort_index", NULL, -3);
	for (size_t i = 0; i < a->nit; i++)
		iteration_slice(x, &a->it[i], i, pid, tid, host);
	for (size_t i = 0; findings && i < a->nfnd; i++)
		finding_instant(x, a, &a->fnd[i], pid, tid, host);
}

/*
 * The other ranks of a multi-process job: each its own track, from the analysis
 * `analyze --rank N` gives (the per-rank pass of analyze.c), iterations only (the
 * findings are the selected trainer's, as in `analyze --json`).
 */
static void other_ranks(struct ex *x, struct an_source *src, const struct an_analysis *sel)
{
	for (size_t r = 0; r < sel->nranks; r++) {
		const struct an_rank *k = &sel->ranks[r];
		if (k->selected || !k->nit)
			continue;
		struct an_options o = sel->opt;
		o.rank_given = 0;
		o.pid = k->pid;
		o.no_ranks = 1;
		struct an_analysis a;
		char err[256];
		if (an_analyze(src, &o, &a, err, sizeof(err))) {
			util_err("export", "no iterations track for pid %d: %s", (int)k->pid, err);
			continue;
		}
		if (a.trainer_pid == k->pid && a.nit)
			analysis_track(x, &a, 0);
		an_analysis_free(&a);
	}
}

void export_analysis(struct ex *x)
{
	size_t n = 0;
	char **paths = xcalloc(x->nfiles ? x->nfiles : 1, sizeof(*paths));
	for (size_t i = 0; i < x->nfiles; i++)
		if (x->files[i].ok)
			paths[n++] = (char *)x->files[i].path;
	struct merge *m = n ? merge_open(paths, n) : NULL;
	free(paths);
	if (!m)
		return;
	struct an_source src;
	merge_source(m, &src);
	struct an_options opt;
	an_options_init(&opt);
	struct an_analysis a;
	char err[256];
	if (an_analyze(&src, &opt, &a, err, sizeof(err))) {
		util_err("export", "no iterations track: %s", err);
		merge_close(m);
		return;
	}
	if (a.trainer_pid > 0 && (a.nit || a.nfnd)) {
		analysis_track(x, &a, 1);
		/* otherData.iterations: the selected trainer's slices, as analyze --json's iterations[] */
		uint64_t nit = x->st->iterations;
		other_ranks(x, &src, &a);
		x->st->iterations = nit;
	}
	an_analysis_free(&a);
	an_scratch_free();
	merge_close(m);
}
