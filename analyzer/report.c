/*
 * report.c - the text report and the JSON document of `stepprof analyze`.
 *
 * Divided into: the summary numbers both share (bottleneck, per-category median
 * and p95), the JSON writer (schema stepprof.analysis/2, fields
 * only added, never renamed; --schema 1 writes the document as it was before
 * the comm category), the CSV of the iterations and the text report (the run, the per-rank table
 * when there are several trainer processes, the findings: what to fix first,
 * above the seven categories and the bottleneck sentence; the per-iteration table).
 *
 * Strings from a trace (command lines; paths, directories, kernel names and call
 * sites in the evidence) are untrusted: the text goes through util_put_text, so
 * none can drive the terminal; the JSON writer escapes them.
 */
#include "report.h"
#include "jsonw.h"
#include "util.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

/* -------------------------------------------------------- output files */

int report_output_is_input(const char *verb, const char *option, const char *dest, char *const *paths,
			   size_t n)
{
	struct stat d, p;
	if (!strcmp(dest, "-") || stat(dest, &d) != 0 || !S_ISREG(d.st_mode))
		return 0;
	for (size_t i = 0; i < n; i++)
		if (stat(paths[i], &p) == 0 && p.st_dev == d.st_dev && p.st_ino == d.st_ino) {
			util_err(verb, "%s %s: is a trace file this command reads; it would be overwritten", option,
				 dest);
			return 1;
		}
	return 0;
}

/* ------------------------------------------------------------- summary */

const char *report_bottleneck_of(uint64_t nit, uint64_t wall_total, const uint64_t *bd_total, double compute_share)
{
	if (!nit || !wall_total)
		return "none";
	if ((double)bd_total[AN_COMPUTE] >= compute_share * (double)wall_total)
		return an_cat_name[AN_COMPUTE];
	int best = -1;
	for (int c = 0; c < AN_CAT__COUNT; c++) {
		if (c == AN_COMPUTE)
			continue;
		if (best < 0 || bd_total[c] > bd_total[best])
			best = c;
	}
	return an_cat_name[best];
}

const char *report_bottleneck(const struct an_analysis *a)
{
	return report_bottleneck_of(a->nit, a->wall_total, a->bd_total, a->opt.threshold[AN_T_BN_COMPUTE_SHARE]);
}

const char *report_rank_bottleneck(const struct an_analysis *a, const struct an_rank *x)
{
	return report_bottleneck_of(x->nit, x->wall_total, x->bd_total, a->opt.threshold[AN_T_BN_COMPUTE_SHARE]);
}

double report_fraction(uint64_t part, uint64_t whole)
{
	return whole ? (double)part / (double)whole : 0.0;
}

const char *const report_split_words[AN_SPLIT__COUNT] = {"file I/O", "loaders' CPU work",
							"neither (loaders idle or blocked)"};

double report_modelled_share(const struct an_analysis *a)
{
	uint64_t t = a->gpu_measured_ns + a->gpu_modelled_ns;
	return t ? (double)a->gpu_modelled_ns / (double)t : 0.0;
}

double report_share(const struct an_analysis *a, int c)
{
	return report_fraction(a->bd_total[c], a->wall_total);
}

uint64_t report_cat_quantile(const struct an_analysis *a, int c, double q)
{
	if (!a->nit)
		return 0;
	uint64_t *v = malloc(a->nit * sizeof(*v));
	if (!v)
		return 0;
	for (size_t i = 0; i < a->nit; i++)
		v[i] = c < AN_CAT__COUNT ? a->it[i].bd[c] : a->it[i].end_ns - a->it[i].start_ns;
	uint64_t r = an_quantile_u64(v, a->nit, q);
	free(v);
	return r;
}

void report_rank_pick(const struct an_analysis *a, struct report_rank_pick *p)
{
	*p = (struct report_rank_pick){0};
	for (size_t i = 0; i < a->nranks; i++) {
		const struct an_rank *x = &a->ranks[i];
		if (x->selected)
			p->sel = x;
		if (x->nit && (!p->slow || x->wall_median > p->slow->wall_median))
			p->slow = x;
		if (x->nit && (!p->fast || x->wall_median < p->fast->wall_median))
			p->fast = x;
	}
	p->spread = p->slow && p->fast && p->slow != p->fast && p->fast->wall_median;
	if (p->spread)
		p->over = 100.0 * ((double)p->slow->wall_median / (double)p->fast->wall_median - 1.0);
}

/* ----------------------------------------------------------------- JSON */

/* An object of n counters named by names[]: the input split's parts, the kinds of blocking. */
static void json_counts(struct jsonw *w, const char *key, const char *const *names, const uint64_t *v, int n)
{
	jw_kobj_begin(w, key);
	for (int i = 0; i < n; i++)
		jw_ku64(w, names[i], v[i]);
	jw_obj_end(w);
}

/*
 * The schema of the document being written (report_json_schema): 1 leaves the
 * comm category out (its time is in compute and sync there: an_iter.bd1).
 */
static int g_schema = REPORT_SCHEMA;

/* Category c is written in this schema. */
static int json_has_cat(int c)
{
	return g_schema >= 2 || c != AN_COMM;
}

/* The breakdown of bd (schema 2) or bd1 (schema 1) in ns. */
static void json_cats(struct jsonw *w, const char *key, const uint64_t *bd, const uint64_t *bd1)
{
	const uint64_t *v = g_schema >= 2 ? bd : bd1;
	jw_kobj_begin(w, key);
	for (int c = 0; c < AN_CAT__COUNT; c++)
		if (json_has_cat(c))
			jw_ku64(w, an_cat_name[c], v[c]);
	jw_obj_end(w);
}

/* The categories' shares of a wall time. */
static void json_fractions(struct jsonw *w, const uint64_t *bd_total, const uint64_t *bd1_total, uint64_t wall_total)
{
	const uint64_t *v = g_schema >= 2 ? bd_total : bd1_total;
	jw_kobj_begin(w, "breakdown_fraction");
	for (int c = 0; c < AN_CAT__COUNT; c++)
		if (json_has_cat(c))
			jw_kdouble(w, an_cat_name[c], report_fraction(v[c], wall_total));
	jw_obj_end(w);
}

/* What the trainer's loader workers did with their time (docs/analysis-json.md, summary.loaders). */
static void json_loaders(struct jsonw *w, const struct an_analysis *a)
{
	const struct an_loaders *l = &a->loaders;
	jw_kobj_begin(w, "loaders");
	jw_ku64(w, "workers", l->workers);
	jw_ku64(w, "sampled_ns", l->seg_ns);
	jw_ku64(w, "io_ns", l->io_ns);
	jw_ku64(w, "cpu_work_ns", l->cpu_ns);
	jw_ku64(w, "neither_ns", l->wait_ns);
	jw_kdouble(w, "cpu_utilisation", report_fraction(l->cpu_time_ns, l->seg_ns));
	jw_ku64(w, "online_cpus", l->online_cpus);
	jw_ku64(w, "affinity_cpus", l->affinity_cpus);
	jw_kdouble(w, "cores_busy", an_cores_busy(a));
	jw_obj_end(w);
}

static void json_iteration(struct jsonw *w, const struct an_iter *it, size_t i)
{
	jw_obj_begin(w);
	jw_ku64(w, "index", i);
	jw_ku64(w, "start_ns", it->start_ns);
	jw_ku64(w, "end_ns", it->end_ns);
	jw_ku64(w, "wall_ns", it->end_ns - it->start_ns);
	json_cats(w, "breakdown_ns", it->bd, it->bd1);
	json_counts(w, "input_split_ns", an_split_name, it->split, AN_SPLIT__COUNT);
	json_counts(w, "host_blocked_ns", an_blk_name, it->blocked, AN_BLK__COUNT);
	jw_ku64(w, "gpu_idle_ns", it->gpu_idle_ns);
	jw_ku64(w, "files_opened", it->files_opened);
	jw_ku64(w, "metadata_ops", it->metadata_ops);
	jw_ku64(w, "bytes_read", it->bytes_read);
	jw_ku64(w, "h2d_bytes", it->h2d_bytes);
	jw_ku64(w, "d2h_bytes", it->d2h_bytes);
	jw_ku64(w, "pageable_copies", it->pageable_copies);
	jw_ku64(w, "device_bytes_peak", it->device_bytes_peak);
	/* added fields */
	jw_ku64(w, "stats", it->stats);
	jw_ku64(w, "allocs", it->allocs);
	jw_ku64(w, "frees", it->frees);
	jw_ku64(w, "alloc_failures", it->alloc_failed);
	if (g_schema >= 2)
		jw_ku64(w, "comm_overlapped_ns", it->comm_overlapped_ns);
	jw_obj_end(w);
}

static void json_finding(struct jsonw *w, const struct an_result_finding *f)
{
	jw_obj_begin(w);
	jw_kstr(w, "kind", an_finding_name[f->kind]);
	if (f->signal)
		jw_kstr(w, "signal", f->signal);
	jw_kstr(w, "severity", an_severity_name[f->severity]);
	jw_ki64(w, "first_iteration", f->first_iteration);
	jw_ki64(w, "last_iteration", f->last_iteration);
	jw_ki64(w, "iterations", f->iterations);
	jw_kobj_begin(w, "evidence");
	for (int i = 0; i < f->nev; i++) {
		if (f->ev[i].is_str)
			jw_kstr(w, f->ev[i].key, f->ev[i].str);
		else
			jw_kdouble(w, f->ev[i].key, f->ev[i].num);
	}
	jw_obj_end(w);
	jw_karr_begin(w, "sites");
	for (int i = 0; i < f->nsites; i++)
		jw_str(w, f->sites[i]);
	jw_arr_end(w);
	jw_kstr(w, "advice", f->advice);
	jw_obj_end(w);
}

static void json_rank(struct jsonw *w, const struct an_analysis *a, const struct an_rank *r)
{
	jw_obj_begin(w);
	jw_ki64(w, "rank", r->rank);
	jw_ki64(w, "local_rank", r->local_rank);
	jw_ki64(w, "world_size", r->world_size);
	jw_ki64(w, "pid", r->pid);
	jw_kbool(w, "selected", r->selected);
	jw_ku64(w, "launches", r->launches);
	jw_kstr(w, "iteration_source", an_source_name[r->source_kind]);
	jw_ku64(w, "iterations", r->nit);
	jw_ku64(w, "wall_ns_median", r->wall_median);
	jw_ku64(w, "wall_ns_total", r->wall_total);
	json_fractions(w, r->bd_total, r->bd1_total, r->wall_total);
	json_cats(w, "breakdown_ns", r->bd_total, r->bd1_total);
	jw_kstr(w, "bottleneck",
		g_schema >= 2 ? report_rank_bottleneck(a, r)
			      : report_bottleneck_of(r->nit, r->wall_total, r->bd1_total,
						     a->opt.threshold[AN_T_BN_COMPUTE_SHARE]));
	if (g_schema >= 2)
		jw_ku64(w, "comm_overlapped_ns", r->comm_overlapped_ns);
	jw_obj_end(w);
}

/* The job as the sum of its ranks' iterations (the JSON's job, stepprof merge's text). */
struct job_sums {
	uint64_t nit, wall, over, bd[AN_CAT__COUNT], bd1[AN_CAT__COUNT];
};

static void job_sums(const struct an_analysis *a, struct job_sums *j)
{
	memset(j, 0, sizeof(*j));
	for (size_t i = 0; i < a->nranks; i++) {
		j->nit += a->ranks[i].nit;
		j->wall += a->ranks[i].wall_total;
		j->over += a->ranks[i].comm_overlapped_ns;
		for (int c = 0; c < AN_CAT__COUNT; c++) {
			j->bd[c] += a->ranks[i].bd_total[c];
			j->bd1[c] += a->ranks[i].bd1_total[c];
		}
	}
}

/* added, with several ranks: the job as the sum of its ranks' iterations */
static void json_job(struct jsonw *w, const struct an_analysis *a)
{
	struct job_sums j;
	job_sums(a, &j);
	uint64_t nit = j.nit, wall = j.wall, over = j.over, *bd = j.bd, *bd1 = j.bd1;
	jw_kobj_begin(w, "job");
	jw_ku64(w, "ranks", a->nranks);
	jw_ku64(w, "iterations", nit);
	jw_ku64(w, "wall_ns_total", wall);
	json_fractions(w, bd, bd1, wall);
	json_cats(w, "breakdown_ns", bd, bd1);
	if (g_schema >= 2)
		jw_ku64(w, "comm_overlapped_ns", over);
	jw_obj_end(w);
}

/* added, for jobs that made NCCL collectives: their arrivals across the ranks (comm_match.h) */
static void json_stragglers(struct jsonw *w, const struct an_analysis *a)
{
	const struct cm_result *m = &a->comm;
	jw_kobj_begin(w, "stragglers");
	jw_ku64(w, "collectives", m->collectives);
	jw_ku64(w, "incomplete", m->incomplete);
	jw_ku64(w, "gpu_timed", m->gpu_timed);
	jw_ku64(w, "skew_ns_mean", m->skew_mean_ns);
	jw_ku64(w, "skew_ns_p95", m->skew_p95_ns);
	jw_ku64(w, "hosts", a->comm_hosts);
	jw_karr_begin(w, "clock_offsets");
	for (size_t h = 0; h < m->nhosts && a->comm_hosts > 1; h++) {
		jw_obj_begin(w);
		jw_ku64(w, "host", h);
		jw_kstr(w, "name", a->comm_host_names ? a->comm_host_names[h] : "");
		jw_ki64(w, "offset_ns", m->host_offset_ns[h]);
		jw_ki64(w, "residual_ns", m->host_residual_ns[h]);
		jw_obj_end(w);
	}
	jw_arr_end(w);
	if (m->nworst) {
		jw_karr_begin(w, "worst");
		for (size_t i = 0; i < m->nworst; i++) {
			const struct cm_worst *x = &m->worst[i];
			jw_obj_begin(w);
			jw_khex(w, "communicator", x->ident);
			jw_ku64(w, "seq", x->seq);
			jw_ku64(w, "skew_ns", x->skew_ns);
			jw_ki64(w, "last_rank", x->last_rank);
			jw_kstr(w, "arrivals_from", x->gpu ? "gpu" : "host");
			jw_karr_begin(w, "arrivals");
			for (uint32_t k = 0; k < x->nranks; k++) {
				jw_obj_begin(w);
				jw_ki64(w, "rank", x->arr[k].rank);
				jw_ku64(w, "host_call_ns", x->arr[k].call_ns);
				jw_ku64(w, "gpu_start_ns", x->arr[k].gpu_begin_ns);
				jw_obj_end(w);
			}
			jw_arr_end(w);
			jw_obj_end(w);
		}
		jw_arr_end(w);
	}
	jw_karr_begin(w, "ranks");
	for (size_t k = 0; k < m->nranks; k++) {
		const struct cm_rank *r = &m->ranks[k];
		jw_obj_begin(w);
		jw_ki64(w, "rank", r->rank);
		jw_ku64(w, "collectives", r->matched);
		jw_ku64(w, "last", r->last);
		jw_kdouble(w, "last_share", r->matched ? (double)r->last / (double)r->matched : 0);
		jw_ku64(w, "lateness_ns_mean", r->late_mean_ns);
		jw_ku64(w, "lateness_ns_p95", r->late_p95_ns);
		jw_ku64(w, "caused_wait_ns", r->caused_ns);
		jw_obj_end(w);
	}
	jw_arr_end(w);
	jw_obj_end(w);
}

/* added, only without iterations: the whole run's input, per process, and the busiest directories */
static void json_input(struct jsonw *w, const struct an_analysis *a)
{
	const struct an_iter *r = &a->run_input;
	jw_kobj_begin(w, "input");
	jw_kstr(w, "scope", "whole_run");
	jw_ku64(w, "files_opened", r->files_opened);
	jw_ku64(w, "bytes_read", r->bytes_read);
	jw_ku64(w, "metadata_ops", r->metadata_ops);
	jw_ku64(w, "metadata_ns", r->meta_ns);
	jw_ku64(w, "data_ns", r->data_ns);
	jw_karr_begin(w, "processes");
	for (size_t i = 0; i < a->nprocs; i++) {
		const struct an_proc *p = &a->procs[i];
		if (!p->in_ns && !p->in_wait_ns && !p->in_meta)
			continue;
		jw_obj_begin(w);
		jw_ki64(w, "pid", p->pid);
		jw_kstr(w, "role", an_role_name[p->role]);
		jw_ku64(w, "files_opened", p->in_files);
		jw_ku64(w, "bytes_read", p->in_bytes);
		jw_ku64(w, "metadata_ops", p->in_meta);
		jw_ku64(w, "io_ns", p->in_ns);
		jw_ku64(w, "loader_wait_ns", p->in_wait_ns);
		jw_obj_end(w);
	}
	jw_arr_end(w);
	jw_karr_begin(w, "top_directories");
	for (size_t i = 0; i < a->ninput_dirs; i++) {
		jw_obj_begin(w);
		jw_kstr(w, "path", a->input_dirs[i]);
		jw_ku64(w, "opens", a->input_dir_opens[i]);
		jw_obj_end(w);
	}
	jw_arr_end(w);
	jw_obj_end(w);
}

int report_json(FILE *f, const struct an_analysis *a)
{
	return report_json_schema(f, a, REPORT_SCHEMA);
}

int report_json_schema(FILE *f, const struct an_analysis *a, int schema)
{
	struct jsonw w;
	g_schema = schema;
	jw_init(&w, f, 0);
	jw_obj_begin(&w);
	jw_kstr(&w, "schema", schema >= 2 ? "stepprof.analysis/2" : "stepprof.analysis/1");
	jw_kstr(&w, "iteration_source", an_source_name[a->source_kind]);
	jw_karr_begin(&w, "processes");
	for (size_t i = 0; i < a->nprocs; i++) {
		const struct an_proc *p = &a->procs[i];
		jw_obj_begin(&w);
		jw_ki64(&w, "pid", p->pid);
		jw_ki64(&w, "rank", p->rank);
		jw_kstr(&w, "role", an_role_name[p->role]);
		jw_ku64(&w, "records", p->records);
		jw_ku64(&w, "lost", p->lost);
		jw_ki64(&w, "ppid", p->ppid);
		jw_ku64(&w, "launches", p->launches);
		jw_kstr(&w, "cmdline", p->cmdline);
		jw_ku64(&w, "images", p->images);
		jw_kstr(&w, "first_cmdline", p->first_cmdline);
		jw_obj_end(&w);
	}
	jw_arr_end(&w);
	jw_karr_begin(&w, "iterations");
	for (size_t i = 0; i < a->nit; i++)
		json_iteration(&w, &a->it[i], i);
	jw_arr_end(&w);
	jw_kobj_begin(&w, "summary");
	jw_ku64(&w, "iterations", a->nit);
	jw_ku64(&w, "wall_ns_median", report_cat_quantile(a, AN_CAT__COUNT, 0.5));
	json_fractions(&w, a->bd_total, a->bd1_total, a->wall_total);
	jw_kstr(&w, "bottleneck",
		schema >= 2 ? report_bottleneck(a)
			    : report_bottleneck_of(a->nit, a->wall_total, a->bd1_total,
						   a->opt.threshold[AN_T_BN_COMPUTE_SHARE]));
	jw_ku64(&w, "device_bytes_peak", a->device_bytes_peak);
	/* added fields */
	jw_ku64(&w, "wall_ns_total", a->wall_total);
	json_cats(&w, "breakdown_ns", a->bd_total, a->bd1_total);
	jw_kobj_begin(&w, "input_split_fraction");
	for (int c = 0; c < AN_SPLIT__COUNT; c++)
		jw_kdouble(&w, an_split_name[c], report_fraction(a->split_total[c], a->wall_total));
	jw_obj_end(&w);
	json_counts(&w, "input_split_ns", an_split_name, a->split_total, AN_SPLIT__COUNT);
	jw_ku64(&w, "input_unsampled_ns", a->split_unsampled_total);
	json_loaders(&w, a);
	jw_ki64(&w, "trainer_pid", a->trainer_pid);
	jw_ki64(&w, "training_tid", a->training_tid);
	jw_ku64(&w, "run_begin_ns", a->run_begin_ns);
	jw_ku64(&w, "run_end_ns", a->run_end_ns);
	jw_ku64(&w, "records", a->records);
	jw_ku64(&w, "lost", a->lost);
	jw_ku64(&w, "late_records", a->late_events);
	jw_ku64(&w, "device_capacity_bytes", a->device_capacity);
	if (a->source_kind == AN_SRC_AUTO)
		jw_ku64(&w, "auto_period", a->auto_period);
	jw_ku64(&w, "cuda_calls", a->cuda_calls);
	jw_kdouble(&w, "gpu_modelled_share", report_modelled_share(a));
	jw_kobj_begin(&w, "gpu_time");
	jw_ku64(&w, "measured_ns", a->gpu_measured_ns);
	jw_ku64(&w, "modelled_ns", a->gpu_modelled_ns);
	jw_ku64(&w, "launches_timed", a->launches_timed);
	jw_ku64(&w, "launches_modelled", a->launches_modelled);
	jw_ku64(&w, "launches_unmodelled", a->launches_unmodelled);
	jw_obj_end(&w);
	if (schema >= 2)
		jw_ku64(&w, "comm_overlapped_ns", a->comm_overlapped_ns);
	jw_obj_end(&w);
	if (!a->nit)
		json_input(&w, a);
	jw_karr_begin(&w, "findings");
	for (size_t i = 0; i < a->nfnd; i++)
		json_finding(&w, &a->fnd[i]);
	jw_arr_end(&w);
	/* added: every trainer process (rank), each from its own analysis */
	jw_karr_begin(&w, "ranks");
	for (size_t i = 0; i < a->nranks; i++)
		json_rank(&w, a, &a->ranks[i]);
	jw_arr_end(&w);
	if (a->nranks > 1)
		json_job(&w, a);
	if (a->comm_records)
		json_stragglers(&w, a);
	jw_obj_end(&w);
	return jw_error(&w);
}

int report_job_json(FILE *f, const struct an_analysis *a)
{
	struct jsonw w;
	jw_init(&w, f, 0);
	jw_obj_begin(&w);
	jw_kstr(&w, "schema", "stepprof.job/1");
	jw_karr_begin(&w, "findings");
	for (size_t i = 0; i < a->nfnd; i++)
		json_finding(&w, &a->fnd[i]);
	jw_arr_end(&w);
	jw_karr_begin(&w, "ranks");
	for (size_t i = 0; i < a->nranks; i++)
		json_rank(&w, a, &a->ranks[i]);
	jw_arr_end(&w);
	json_job(&w, a);
	if (a->comm_records)
		json_stragglers(&w, a);
	jw_obj_end(&w);
	g_schema = REPORT_SCHEMA;
	return jw_error(&w);
}

/* ------------------------------------------------------------------ CSV */

int report_csv(FILE *f, const struct an_analysis *a)
{
	fputs("index,start_ns,end_ns,wall_ns", f);
	for (int c = 0; c < AN_CAT__COUNT; c++)
		fprintf(f, ",%s_ns", an_cat_name[c]);
	fputs(",gpu_idle_ns,files_opened,metadata_ops,bytes_read,h2d_bytes,d2h_bytes,pageable_copies,"
	      "device_bytes_peak\n",
	      f);
	for (size_t i = 0; i < a->nit; i++) {
		const struct an_iter *it = &a->it[i];
		fprintf(f, "%zu,%llu,%llu,%llu", i, (unsigned long long)it->start_ns, (unsigned long long)it->end_ns,
			(unsigned long long)(it->end_ns - it->start_ns));
		for (int c = 0; c < AN_CAT__COUNT; c++)
			fprintf(f, ",%llu", (unsigned long long)it->bd[c]);
		fprintf(f, ",%llu,%llu,%llu,%llu,%llu,%llu,%llu,%llu\n", (unsigned long long)it->gpu_idle_ns,
			(unsigned long long)it->files_opened, (unsigned long long)it->metadata_ops,
			(unsigned long long)it->bytes_read, (unsigned long long)it->h2d_bytes,
			(unsigned long long)it->d2h_bytes, (unsigned long long)it->pageable_copies,
			(unsigned long long)it->device_bytes_peak);
	}
	return ferror(f) ? -1 : 0;
}

/* ----------------------------------------------------------------- text */

const char *report_bottleneck_sentence(const struct an_analysis *a, const char *b, char *buf, size_t len)
{
	if (!strcmp(b, "input"))
		return "the training thread waits for input (file I/O or batches from loader workers)";
	if (!strcmp(b, "h2d"))
		return "host-to-device copies hold the step";
	if (!strcmp(b, "d2h"))
		return "device-to-host copies hold the step";
	if (!strcmp(b, "sync"))
		return "the training thread waits in synchronisation calls while the GPU is idle";
	if (!strcmp(b, "comm"))
		return "multi-GPU communication (NCCL collectives) not hidden under compute holds the step: overlap "
		       "it with the backward pass (bucketing), or move fewer bytes";
	if (!strcmp(b, "other") && !a->cuda_calls)
		return "host time outside I/O (Python, the framework, computation on the CPU); no process made a CUDA "
		       "call, so no GPU waits";
	if (!strcmp(b, "other"))
		return "host time outside CUDA and I/O (Python, framework, launch overhead) leaves the GPU idle";
	if (!strcmp(b, "compute")) {
		snprintf(buf, len,
			 "the GPU computes at least %.0f%% of the time: optimise the kernels, not the pipeline",
			 100.0 * a->opt.threshold[AN_T_BN_COMPUTE_SHARE]);
		return buf;
	}
	return "no iterations were found";
}

static void text_wrap(FILE *f, const char *indent, const char *text)
{
	size_t col = 0, width = 96;
	fputs(indent, f);
	while (*text) {
		const char *sp = strchr(text, ' ');
		size_t len = sp ? (size_t)(sp - text) : strlen(text);
		if (col && col + 1 + len > width) {
			fprintf(f, "\n%s", indent);
			col = 0;
		} else if (col) {
			fputc(' ', f);
			col++;
		}
		fwrite(text, 1, len, f);
		col += len;
		text += len;
		while (*text == ' ')
			text++;
	}
	fputc('\n', f);
}

static void text_iteration(FILE *f, const struct an_analysis *a, size_t i)
{
	const struct an_iter *it = &a->it[i];
	char b[AN_CAT__COUNT + 1][32], x[3][32];
	util_fmt_ns(it->end_ns - it->start_ns, b[AN_CAT__COUNT], sizeof(b[0]));
	for (int c = 0; c < AN_CAT__COUNT; c++)
		util_fmt_ns(it->bd[c], b[c], sizeof(b[c]));
	fprintf(f, "  %5zu %10s", i, b[AN_CAT__COUNT]);
	for (int c = 0; c < AN_CAT__COUNT; c++)
		fprintf(f, " %9s", b[c]);
	fprintf(f, " %6llu %9s %9s %9s\n", (unsigned long long)it->files_opened,
		util_fmt_bytes(it->bytes_read, x[0], sizeof(x[0])), util_fmt_bytes(it->h2d_bytes, x[1], sizeof(x[1])),
		util_fmt_bytes(it->device_bytes_peak, x[2], sizeof(x[2])));
}

/*
 * Several trainer processes (ranks): one line each, then which one the rest of
 * the report describes, and the spread of the median iteration times (in a
 * synchronous job the slowest rank holds the others at their collectives).
 */
static void rank_label(char *buf, size_t len, const struct an_rank *x)
{
	if (x->rank >= 0)
		snprintf(buf, len, "rank %d (pid %d)", x->rank, x->pid);
	else
		snprintf(buf, len, "pid %d", x->pid);
}

static void text_ranks(FILE *f, const struct an_analysis *a, int below)
{
	char b[32], r[48];
	struct report_rank_pick p;
	report_rank_pick(a, &p);
	fprintf(f, "\nRanks: %zu trainer processes, each analysed on its own (shares of its wall time):\n", a->nranks);
	fprintf(f, "    %5s %-8s %6s %10s", "rank", "pid", "iters", "med wall");
	for (int c = 0; c < AN_CAT__COUNT; c++)
		fprintf(f, " %7s", an_cat_name[c]);
	fprintf(f, "  %s\n", "bottleneck");
	for (size_t i = 0; i < a->nranks; i++) {
		const struct an_rank *x = &a->ranks[i];
		if (x->rank >= 0)
			snprintf(r, sizeof(r), "%d", x->rank);
		else
			snprintf(r, sizeof(r), "-");
		fprintf(f, "  %s %5s %-8d %6llu %10s", x->selected ? "*" : " ", r, x->pid, (unsigned long long)x->nit,
			util_fmt_ns(x->wall_median, b, sizeof(b)));
		for (int c = 0; c < AN_CAT__COUNT; c++)
			fprintf(f, " %6.1f%%",
				x->wall_total ? 100.0 * (double)x->bd_total[c] / (double)x->wall_total : 0.0);
		fprintf(f, "  %s\n", report_rank_bottleneck(a, x));
	}
	if (p.spread) {
		char b2[32], r2[48];
		rank_label(r, sizeof(r), p.slow);
		rank_label(r2, sizeof(r2), p.fast);
		util_fmt_ns(p.slow->wall_median, b, sizeof(b));
		util_fmt_ns(p.fast->wall_median, b2, sizeof(b2));
		if (p.over >= 10.0)
			fprintf(f, "  slowest median wall: %s at %s, %.0f%% above the fastest, %s at %s\n", r, b,
				p.over, r2, b2);
		else
			fprintf(f, "  median walls within 10%%: from %s at %s to %s at %s\n", r2, b2, r, b);
	}
	if (p.sel && below) {
		if (p.sel->rank >= 0)
			snprintf(r, sizeof(r), "rank %d, ", p.sel->rank);
		else
			r[0] = 0;
		fprintf(f, "  Below: the selected process (*: %spid %d) only; --rank N selects another.\n\n", r,
			p.sel->pid);
	}
}

/* The collectives' arrivals across the ranks: who the others wait for. */
static void text_stragglers(FILE *f, const struct an_analysis *a)
{
	const struct cm_result *m = &a->comm;
	char b1[32], b2[32], b3[32];
	fprintf(f, "\nStragglers: %llu collectives matched across the ranks", (unsigned long long)m->collectives);
	if (m->incomplete)
		fprintf(f, " (%llu with a rank missing, left out)", (unsigned long long)m->incomplete);
	fprintf(f, "; arrivals: %s; skew (last - first) mean %s, p95 %s\n",
		m->gpu_timed == m->collectives ? "GPU starts" : m->gpu_timed ? "GPU starts where timed, else host calls" : "host calls",
		util_fmt_ns(m->skew_mean_ns, b1, sizeof(b1)), util_fmt_ns(m->skew_p95_ns, b2, sizeof(b2)));
	if (!m->collectives)
		return;
	fprintf(f, "    %5s %8s %12s %12s %14s\n", "rank", "last", "late mean", "late p95", "others waited");
	for (size_t k = 0; k < m->nranks; k++) {
		const struct cm_rank *r = &m->ranks[k];
		fprintf(f, "    %5d %7.1f%% %12s %12s %14s\n", r->rank,
			r->matched ? 100.0 * (double)r->last / (double)r->matched : 0.0,
			util_fmt_ns(r->late_mean_ns, b1, sizeof(b1)), util_fmt_ns(r->late_p95_ns, b2, sizeof(b2)),
			util_fmt_ns(r->caused_ns, b3, sizeof(b3)));
	}
	for (size_t i = 0; i < m->nworst; i++) {
		const struct cm_worst *x = &m->worst[i];
		uint64_t first = UINT64_MAX;
		for (uint32_t k = 0; k < x->nranks; k++) {
			uint64_t t = x->gpu ? x->arr[k].gpu_begin_ns : x->arr[k].call_ns;
			first = t < first ? t : first;
		}
		fprintf(f, "  collective %llu on communicator %016llx: skew %s, last rank %d; arrivals after the first:",
			(unsigned long long)x->seq, (unsigned long long)x->ident, util_fmt_ns(x->skew_ns, b1, sizeof(b1)),
			x->last_rank);
		for (uint32_t k = 0; k < x->nranks && k < 16; k++) {
			uint64_t t = x->gpu ? x->arr[k].gpu_begin_ns : x->arr[k].call_ns;
			fprintf(f, " %d +%s", x->arr[k].rank, util_fmt_ns(t - first, b2, sizeof(b2)));
		}
		fprintf(f, "%s\n", x->nranks > 16 ? " ..." : "");
	}
	for (size_t h = 1; h < m->nhosts && a->comm_hosts > 1; h++) {
		const char *name = a->comm_host_names ? a->comm_host_names[h] : "";
		const char *ref = a->comm_host_names ? a->comm_host_names[0] : "";
		if (m->host_residual_ns[h] < 0)
			fprintf(f, "  host %s: no timed collective shared with %s, clock not aligned\n", name, ref);
		else
			fprintf(f, "  host %s: clock offset %+.3f ms from %s, residual %s\n", name,
				(double)m->host_offset_ns[h] / 1e6, ref,
				util_fmt_ns((uint64_t)m->host_residual_ns[h], b1, sizeof(b1)));
	}
}

const char report_no_cuda[] =
    "no process made a CUDA call (no kernel, copy, allocation or synchronisation was recorded). If the job "
    "should use a GPU, the framework may be a CPU-only build (PyTorch: torch.cuda.is_available() is False, "
    "torch.version.cuda is None), or libstepprof.so did not reach the processes that use CUDA (LD_PRELOAD "
    "unset, relative or wrong there; stepprof run sets an absolute one).";

/* No iterations: the whole run's input, per process and the busiest directories. */
static void text_input(FILE *f, const struct an_analysis *a)
{
	char b1[32], b2[32];
	const struct an_iter *r = &a->run_input;
	if (!r->opens && !r->stats && !r->bytes_read && !r->metadata_ops)
		return;
	fprintf(f, "\nInput over the whole run: %llu files opened, %s read, %llu metadata ops (%s in metadata, %s "
		   "reading)\n",
		(unsigned long long)r->files_opened, util_fmt_bytes(r->bytes_read, b1, sizeof(b1)),
		(unsigned long long)r->metadata_ops, util_fmt_ns(r->meta_ns, b2, sizeof(b2)),
		util_fmt_ns(r->data_ns, (char[32]){0}, 32));
	fprintf(f, "  %-7s %-7s %8s %10s %9s %12s %12s\n", "pid", "role", "files", "read", "meta ops", "in I/O",
		"loader wait");
	for (size_t i = 0; i < a->nprocs; i++) {
		const struct an_proc *p = &a->procs[i];
		if (!p->in_ns && !p->in_wait_ns && !p->in_meta)
			continue;
		fprintf(f, "  %-7d %-7s %8llu %10s %9llu %12s %12s\n", p->pid, an_role_name[p->role],
			(unsigned long long)p->in_files, util_fmt_bytes(p->in_bytes, b1, sizeof(b1)),
			(unsigned long long)p->in_meta, util_fmt_ns(p->in_ns, b2, sizeof(b2)),
			util_fmt_ns(p->in_wait_ns, (char[32]){0}, 32));
	}
	for (size_t i = 0; i < a->ninput_dirs; i++) {
		fputs(i ? ", " : "  top directories: ", f);
		util_put_text(f, a->input_dirs[i], 0);
		fprintf(f, " (%llu opens)", (unsigned long long)a->input_dir_opens[i]);
	}
	if (a->ninput_dirs)
		fputc('\n', f);
}

/* One finding: severity, name, iterations, evidence, sites, advice. */
static void text_finding(FILE *f, const struct an_analysis *a, const struct an_result_finding *x)
{
	fprintf(f, "  [%s] %s%s%s%s, ", an_severity_name[x->severity], an_finding_name[x->kind], x->signal ? " (" : "",
		x->signal ? x->signal : "", x->signal ? ")" : "");
	if (x->kind == AN_F_STRAGGLER_RANK)
		fprintf(f, "across the ranks' collectives\n");
	else if (!a->nit && x->first_iteration < 0)
		fprintf(f, "over the whole run (no iterations)\n");
	else
		fprintf(f, "iterations %ld-%ld (%ld)\n", x->first_iteration, x->last_iteration, x->iterations);
	fprintf(f, "    evidence:");
	for (int k = 0; k < x->nev; k++) {
		if (x->ev[k].is_str) {
			fprintf(f, " %s=\"", x->ev[k].key);
			util_put_text(f, x->ev[k].str, 1);
			fputc('"', f);
		} else if (x->ev[k].num == floor(x->ev[k].num) && fabs(x->ev[k].num) < 1e15)
			fprintf(f, " %s=%.0f", x->ev[k].key, x->ev[k].num); /* counts and bytes in full */
		else
			fprintf(f, " %s=%.4g", x->ev[k].key, x->ev[k].num);
	}
	fprintf(f, "\n");
	for (int k = 0; k < x->nsites; k++) {
		fputs("    site: ", f);
		util_put_text(f, x->sites[k], 0);
		fputc('\n', f);
	}
	text_wrap(f, "    ", x->advice);
}

int report_job_text(FILE *f, const struct an_analysis *a)
{
	struct job_sums j;
	job_sums(a, &j);
	uint64_t nit = j.nit, wall = j.wall, *bd = j.bd;
	fprintf(f, "stepprof merge: %zu rank%s, %llu iterations\n", a->nranks, a->nranks == 1 ? "" : "s",
		(unsigned long long)nit);
	fprintf(f, "Job breakdown (every rank's iterations):");
	for (int c = 0; c < AN_CAT__COUNT; c++)
		fprintf(f, "%s %s %.1f%%", c ? "," : "", an_cat_name[c], 100.0 * report_fraction(bd[c], wall));
	fputc('\n', f);
	if (a->nranks)
		text_ranks(f, a, 0);
	if (a->comm_records)
		text_stragglers(f, a);
	fprintf(f, "\nFindings:%s\n", a->nfnd ? " in the order to fix them" : " none");
	for (size_t i = 0; i < a->nfnd; i++)
		text_finding(f, a, &a->fnd[i]);
	return ferror(f) ? -1 : 0;
}

int report_text(FILE *f, const struct an_analysis *a, int all)
{
	char b1[32], b2[32];
	size_t ntrain = 0, nwork = 0;
	for (size_t i = 0; i < a->nprocs; i++) {
		ntrain += a->procs[i].role == AN_ROLE_TRAINER;
		nwork += a->procs[i].role == AN_ROLE_WORKER;
	}
	fprintf(f, "stepprof analyze: %zu process%s (%zu trainer%s, %zu worker%s, %zu other), %s, %llu records",
		a->nprocs, a->nprocs == 1 ? "" : "es", ntrain, ntrain == 1 ? "" : "s", nwork, nwork == 1 ? "" : "s",
		a->nprocs - ntrain - nwork, util_fmt_ns(a->run_end_ns - a->run_begin_ns, b1, sizeof(b1)),
		(unsigned long long)a->records);
	if (a->lost)
		fprintf(f, " (%llu lost)", (unsigned long long)a->lost);
	fprintf(f, "\n");
	for (size_t i = 0; i < a->nprocs; i++) {
		const struct an_proc *p = &a->procs[i];
		fprintf(f, "  pid %-7d %-7s rank %-3s records %-9llu ", p->pid, an_role_name[p->role],
			p->rank >= 0 ? (snprintf(b1, sizeof(b1), "%d", p->rank), b1) : "-",
			(unsigned long long)p->records);
		util_put_text(f, p->cmdline, 0);
		if (p->images > 1) {
			fputs(" (exec'd from ", f);
			util_put_text(f, p->first_cmdline, 0);
			fprintf(f, ", %u images)", (unsigned)p->images);
		}
		fputc('\n', f);
	}
	if (a->nranks > 1)
		text_ranks(f, a, 1);
	if (a->comm_records)
		text_stragglers(f, a);
	if (!a->cuda_calls && a->records) {
		char nc[sizeof(report_no_cuda) + 16];
		snprintf(nc, sizeof(nc), "No CUDA call: %s", report_no_cuda);
		text_wrap(f, "", nc);
	}
	fprintf(f, "iterations: %zu (source: %s", a->nit, an_source_name[a->source_kind]);
	if (a->source_kind == AN_SRC_AUTO)
		fprintf(f, ", %u calls per iteration", a->auto_period);
	if (a->trainer_pid)
		fprintf(f, "; training thread %d of pid %d", a->training_tid, a->trainer_pid);
	fprintf(f, "), median wall %s\n", util_fmt_ns(report_cat_quantile(a, AN_CAT__COUNT, 0.5), b1, sizeof(b1)));
	/* the findings first, the most severe on top (critical ones above the bottleneck), then how the time splits */
	fprintf(f, "\nFindings:%s\n",
		a->nfnd ? " in the order to fix them (the most severe first, then the most wall time)" : " none");
	for (size_t i = 0; i < a->nfnd; i++)
		text_finding(f, a, &a->fnd[i]);
	if (!a->nit) {
		fprintf(f, "\nNo iterations: no NVTX range matched --step-regex, no stepprof_step() marks, and no "
			   "repeating CUDA call sequence was found.\n");
		text_input(f, a);
	} else {
		fprintf(f, "\n  %-8s %10s %10s %7s\n", "category", "median", "p95", "share");
		for (int c = 0; c < AN_CAT__COUNT; c++)
			fprintf(f, "  %-8s %10s %10s %6.1f%%\n", an_cat_name[c],
				util_fmt_ns(report_cat_quantile(a, c, 0.5), b1, sizeof(b1)),
				util_fmt_ns(report_cat_quantile(a, c, 0.95), b2, sizeof(b2)), 100.0 * report_share(a, c));
		const char *bn = report_bottleneck(a);
		int bc = 0;
		for (int c = 0; c < AN_CAT__COUNT; c++)
			if (!strcmp(an_cat_name[c], bn))
				bc = c;
		char sb[128];
		fprintf(f, "\nBottleneck: %s (%.0f%% of wall time): %s.\n", bn, 100.0 * report_share(a, bc),
			report_bottleneck_sentence(a, bn, sb, sizeof(sb)));
		if (a->bd_total[AN_INPUT]) {
			fprintf(f, "Input, split:");
			for (int c = 0; c < AN_SPLIT__COUNT; c++)
				fprintf(f, "%s %.1f%% %s", c ? "," : "", 100.0 * report_fraction(a->split_total[c], a->wall_total),
					report_split_words[c]);
			fprintf(f, " of the wall time");
			if (100 * a->split_unsampled_total >= a->bd_total[AN_INPUT]) /* 1% or more */
				fprintf(f, " (%s with no sampled loader worker to explain it, counted as neither)",
					util_fmt_ns(a->split_unsampled_total, b1, sizeof(b1)));
			fprintf(f, "\n");
		}
		if (a->bd_total[AN_COMM] || a->comm_overlapped_ns)
			fprintf(f, "Communication: %.1f%% of the wall time exposed (comm), %s more hidden under compute "
				   "(comm_overlapped_ns)\n",
				100.0 * report_share(a, AN_COMM), util_fmt_ns(a->comm_overlapped_ns, b1, sizeof(b1)));
		if (a->launches_modelled || a->launches_unmodelled)
			fprintf(f,
				"GPU time of kernels: %.1f%% modelled from timed samples (%llu of %llu launches timed, "
				"%llu modelled, %llu never sampled)\n",
				100.0 * report_modelled_share(a), (unsigned long long)a->launches_timed,
				(unsigned long long)(a->launches_timed + a->launches_modelled + a->launches_unmodelled),
				(unsigned long long)a->launches_modelled, (unsigned long long)a->launches_unmodelled);
	}
	if (a->nit) {
		fprintf(f, "\nIterations%s:\n", all || a->nit <= 20 ? "" : " (first and last 10; --all for every one)");
		fprintf(f, "  %5s %10s", "#", "wall");
		for (int c = 0; c < AN_CAT__COUNT; c++)
			fprintf(f, " %9s", an_cat_name[c]);
		fprintf(f, " %6s %9s %9s %9s\n", "files", "read", "h2d", "dev peak");
		for (size_t i = 0; i < a->nit; i++) {
			if (!all && a->nit > 20 && i == 10)
				fprintf(f, "  %5s\n", "...");
			if (!all && a->nit > 20 && i >= 10 && i < a->nit - 10)
				continue;
			text_iteration(f, a, i);
		}
	}
	if (a->late_events)
		fprintf(f, "\nnote: %llu records arrived after their iteration was closed and were not counted\n",
			(unsigned long long)a->late_events);
	return ferror(f) ? -1 : 0;
}
