/*
 * report_html_tables.c - the sections of the HTML report that are facts and
 * tables (report_html_int.h): the run and, with several trainer processes, the
 * per-rank table; the bottleneck sentence and the six categories; the findings;
 * the per-iteration table.
 *
 * Divided into:
 *   1. the run (processes, ranks, duration, iterations and their source) and,
 *      with several trainer processes, the per-rank table;
 *   2. the bottleneck sentence and the six categories (stacked bar + table);
 *   3. the findings;
 *   4. the per-iteration table.
 */
#include "report_html_int.h"
#include "report.h"

#include <math.h>
#include <string.h>

/* ----------------------------------------------------------- 1. the run */

static const char *source_words(int k)
{
	switch (k) {
	case AN_SRC_NVTX:
		return "NVTX ranges matching --step-regex";
	case AN_SRC_API:
		return "stepprof_step() marks";
	case AN_SRC_AUTO:
		return "automatic detection of the training thread's repeating CUDA call sequence";
	default:
		return "none found";
	}
}

void html_run(FILE *f, const struct an_analysis *a)
{
	char b1[32], b2[32];
	size_t nrole[3] = {0, 0, 0};
	for (size_t i = 0; i < a->nprocs; i++)
		if (a->procs[i].role >= 0 && a->procs[i].role < 3)
			nrole[a->procs[i].role]++;
	fputs("<section id=\"run\">\n<h2>The run</h2>\n<table class=\"kv\">\n", f);
	fprintf(f, "<tr><th>processes</th><td>%zu (%zu trainer%s, %zu worker%s, %zu other)</td></tr>\n", a->nprocs,
		nrole[AN_ROLE_TRAINER], nrole[AN_ROLE_TRAINER] == 1 ? "" : "s", nrole[AN_ROLE_WORKER],
		nrole[AN_ROLE_WORKER] == 1 ? "" : "s", nrole[AN_ROLE_OTHER]);
	/* ranks: the distinct values, in process order (a job has few) */
	fputs("<tr><th>ranks</th><td>", f);
	int nr = 0;
	for (size_t i = 0; i < a->nprocs; i++) {
		int32_t r = a->procs[i].rank;
		int seen = r < 0;
		for (size_t j = 0; j < i && !seen; j++)
			seen = a->procs[j].rank == r;
		if (seen)
			continue;
		if (nr++ == 32) {
			fputs(", &hellip;", f);
			break;
		}
		fprintf(f, "%s%d", nr > 1 ? ", " : "", r);
	}
	if (!nr)
		fputs("none set (RANK unset: a single-process job)", f);
	fputs("</td></tr>\n", f);
	fprintf(f, "<tr><th>duration</th><td>%s (first to last record, all files)</td></tr>\n",
		fns(a->run_end_ns > a->run_begin_ns ? a->run_end_ns - a->run_begin_ns : 0, b1, sizeof(b1)));
	fprintf(f, "<tr><th>records</th><td>%llu", (unsigned long long)a->records);
	if (a->lost)
		fprintf(f, " <span class=\"warn\">(%llu lost: the producers could not write them)</span>",
			(unsigned long long)a->lost);
	fputs("</td></tr>\n", f);
	fprintf(f, "<tr><th>iterations</th><td><span id=\"iterations\">%zu</span>, source <code>%s</code>: %s", a->nit,
		an_source_name[a->source_kind], source_words(a->source_kind));
	if (a->source_kind == AN_SRC_AUTO)
		fprintf(f, " (%u calls per iteration)", a->auto_period);
	fputs("</td></tr>\n", f);
	if (a->nit)
		fprintf(f, "<tr><th>wall time</th><td>median %s per iteration, %s in all iterations</td></tr>\n",
			fns(report_cat_quantile(a, AN_CAT__COUNT, 0.5), b1, sizeof(b1)),
			fns(a->wall_total, b2, sizeof(b2)));
	if (a->trainer_pid)
		fprintf(f, "<tr><th>training thread</th><td>tid %d of pid %d</td></tr>\n", a->training_tid,
			a->trainer_pid);
	fprintf(f, "<tr><th>device memory</th><td>peak %s", fbytes(a->device_bytes_peak, b1, sizeof(b1)));
	if (a->device_capacity)
		fprintf(f, " of %s (%.1f%%)", fbytes(a->device_capacity, b2, sizeof(b2)),
			100.0 * (double)a->device_bytes_peak / (double)a->device_capacity);
	fputs("</td></tr>\n", f);
	if (a->launches_modelled || a->launches_unmodelled)
		fprintf(f,
			"<tr><th>GPU time of kernels</th><td><span id=\"gpu-modelled\">%.1f%%</span> modelled from timed "
			"samples (%llu of %llu launches timed, %llu never sampled)</td></tr>\n",
			100.0 * report_modelled_share(a), (unsigned long long)a->launches_timed,
			(unsigned long long)(a->launches_timed + a->launches_modelled + a->launches_unmodelled),
			(unsigned long long)a->launches_unmodelled);
	if (a->bd_total[AN_INPUT]) {
		/* the input split (docs/definitions.md): what the loader workers did while the step waited */
		fputs("<tr><th>input, split</th><td>", f);
		for (int c = 0; c < AN_SPLIT__COUNT; c++)
			fprintf(f, "%s<span id=\"%s\">%.1f%%</span> %s", c ? ", " : "", an_split_name[c],
				100.0 * report_fraction(a->split_total[c], a->wall_total), report_split_words[c]);
		fputs(" of the wall time", f);
		if (100 * a->split_unsampled_total >= a->bd_total[AN_INPUT]) /* 1% or more */
			fprintf(f, " (%s of the input with no sampled loader worker to explain it, counted as neither)",
				fns(a->split_unsampled_total, b1, sizeof(b1)));
		fputs("</td></tr>\n", f);
	}
	if (a->late_events)
		fprintf(f,
			"<tr><th>note</th><td class=\"warn\">%llu records arrived after their iteration was closed "
			"and were not counted</td></tr>\n",
			(unsigned long long)a->late_events);
	fputs("</table>\n", f);

	/* a job with many processes (a collector that saw a whole node) keeps its list folded */
	fprintf(f, "<details%s><summary>%zu process%s</summary>\n", a->nprocs <= 16 ? " open" : "", a->nprocs,
		a->nprocs == 1 ? "" : "es");
	fputs("<table class=\"grid\"><thead><tr><th>pid</th><th>ppid</th><th>role</th><th>rank</th>"
	      "<th>records</th><th>lost</th><th>launches</th><th class=\"l\">command line</th></tr></thead><tbody>\n",
	      f);
	for (size_t i = 0; i < a->nprocs; i++) {
		const struct an_proc *p = &a->procs[i];
		const char *role = p->role >= 0 && p->role < 3 ? an_role_name[p->role] : "?";
		fprintf(f, "<tr><td>%d</td><td>", p->pid);
		if (p->ppid >= 0)
			fprintf(f, "%d", p->ppid);
		else
			fputs("-", f);
		fprintf(f, "</td><td class=\"role-%s\">%s</td><td>", role, role);
		if (p->rank >= 0)
			fprintf(f, "%d", p->rank);
		else
			fputs("-", f);
		fprintf(f, "</td><td>%llu</td><td>%llu</td><td>%llu</td><td class=\"l\"><code>",
			(unsigned long long)p->records, (unsigned long long)p->lost, (unsigned long long)p->launches);
		/* cmdline is a fixed array filled from an untrusted header: bound it */
		char cmd[sizeof(p->cmdline) + 1];
		memcpy(cmd, p->cmdline, sizeof(p->cmdline));
		cmd[sizeof(p->cmdline)] = 0;
		esc(f, cmd);
		fputs("</code>", f);
		if (p->images > 1) {
			memcpy(cmd, p->first_cmdline, sizeof(p->first_cmdline));
			cmd[sizeof(p->first_cmdline)] = 0;
			fputs(" (exec'd from <code>", f);
			esc(f, cmd);
			fprintf(f, "</code>, %u images)", (unsigned)p->images);
		}
		fputs("</td></tr>\n", f);
	}
	fputs("</tbody></table>\n</details>\n</section>\n", f);
}

/*
 * Several trainer processes (the ranks of a job): one row each from its own
 * analysis (struct an_rank: the numbers of the text report's per-rank table and
 * of the JSON's ranks[]), the six shares as a small stacked bar, the selected
 * rank marked (the rest of the report describes it), then the text report's
 * one-line comparison of the slowest and fastest median iteration: in a
 * synchronous job the slowest rank holds the others at their collectives.
 */
static double rank_share(const struct an_rank *x, int c)
{
	/* the JSON's expression (report.c json_rank), so data-value is its exact double */
	return report_fraction(x->bd_total[c], x->wall_total);
}

static void rank_label(FILE *f, const struct an_rank *x)
{
	if (x->rank >= 0)
		fprintf(f, "rank %d (pid %d)", x->rank, x->pid);
	else
		fprintf(f, "pid %d", x->pid);
}

void html_ranks(FILE *f, const struct an_analysis *a)
{
	char b1[32], b2[32];
	struct report_rank_pick p;
	report_rank_pick(a, &p);
	const double BW = 200, BH = 12;
	fprintf(f, "<section id=\"ranks\">\n<h2>Ranks: %zu trainer processes</h2>\n", a->nranks);
	fputs("<p class=\"note\">Each trainer process analysed on its own; shares of its own wall time. The rest of "
	      "the report describes the selected one (&#9664;); <code>--rank N</code> selects another.</p>\n",
	      f);
	fputs("<table class=\"grid ranks\"><thead><tr><th></th><th>rank</th><th>pid</th><th>iterations</th>"
	      "<th>median wall</th><th class=\"l\">shares</th><th class=\"l\">bottleneck</th></tr></thead><tbody>\n",
	      f);
	for (size_t i = 0; i < a->nranks; i++) {
		const struct an_rank *x = &a->ranks[i];
		const char *bn = report_rank_bottleneck(a, x);
		fprintf(f, "<tr class=\"rank%s\" data-rank=\"%d\" data-pid=\"%d\" data-selected=\"%d\">",
			x->selected ? " selected" : "", x->rank, x->pid, x->selected ? 1 : 0);
		fprintf(f, "<td class=\"mark\">%s</td><td>", x->selected ? "&#9664; selected" : "");
		if (x->rank >= 0)
			fprintf(f, "%d", x->rank);
		else
			fputs("-", f);
		fprintf(f, "</td><td>%d</td><td>%llu</td><td>%s</td>", x->pid, (unsigned long long)x->nit,
			fns(x->wall_median, b1, sizeof(b1)));
		/* every category has its rect (width 0 when absent) so each share is there to read */
		fprintf(f,
			"<td class=\"l\"><svg class=\"rankbar\" viewBox=\"0 0 %.0f %.0f\" role=\"img\" "
			"aria-label=\"shares of rank wall time\">",
			BW, BH);
		double bx = 0;
		for (int c = 0; c < AN_CAT__COUNT; c++) {
			double s = rank_share(x, c), w = s * BW;
			fprintf(f,
				"<rect class=\"rshare\" data-cat=\"%s\" data-value=\"%.17g\" x=\"%.2f\" y=\"0\" "
				"width=\"%.2f\" height=\"%.0f\" fill=\"%s\"><title>%s %.1f%%</title></rect>",
				an_cat_name[c], s, bx, w, BH, cat_color[c], an_cat_name[c], 100.0 * s);
			bx += w;
		}
		if (!x->wall_total)
			fprintf(f, "<rect x=\"0\" y=\"0\" width=\"%.0f\" height=\"%.0f\" fill=\"#eee\"/>", BW, BH);
		fputs("</svg></td><td class=\"l\">", f);
		esc(f, bn);
		fputs("</td></tr>\n", f);
	}
	fputs("</tbody></table>\n<p class=\"legend\">", f);
	for (int c = 0; c < AN_CAT__COUNT; c++)
		fprintf(f, "<span><span class=\"swatch\" style=\"background:%s\"></span>%s</span> ", cat_color[c],
			an_cat_name[c]);
	fputs("</p>\n", f);
	if (p.spread) {
		/* the text report's comparison, on the same numbers */
		fns(p.slow->wall_median, b1, sizeof(b1));
		fns(p.fast->wall_median, b2, sizeof(b2));
		fputs("<p class=\"rank-spread\">", f);
		if (p.over >= 10.0) {
			fputs("Slowest median wall: <strong>", f);
			rank_label(f, p.slow);
			fprintf(f, "</strong> at %s, %.0f%% above the fastest, ", b1, p.over);
			rank_label(f, p.fast);
			fprintf(f, " at %s.", b2);
		} else {
			fputs("Median walls within 10%: from ", f);
			rank_label(f, p.fast);
			fprintf(f, " at %s to ", b2);
			rank_label(f, p.slow);
			fprintf(f, " at %s.", b1);
		}
		fputs("</p>\n", f);
	}
	if (p.sel) {
		fputs("<p>Below: the selected process (&#9664;: ", f);
		if (p.sel->rank >= 0)
			fprintf(f, "rank %d, ", p.sel->rank);
		fprintf(f, "pid %d) only.</p>\n", p.sel->pid);
	}
	fputs("</section>\n", f);
}

/* ------------------------------------------- 2. bottleneck and categories */

void html_bottleneck(FILE *f, const struct an_analysis *a)
{
	const char *bn = report_bottleneck(a);
	int bc = -1;
	for (int c = 0; c < AN_CAT__COUNT; c++)
		if (!strcmp(an_cat_name[c], bn))
			bc = c;
	fprintf(f, "<section id=\"bottleneck\" class=\"bottleneck\" data-bottleneck=\"%s\">\n", bn);
	if (!a->cuda_calls && a->records)
		fprintf(f, "<p id=\"no-cuda\"><strong>No CUDA call:</strong> %s</p>\n", report_no_cuda);
	if (bc < 0) {
		fputs("<p><strong>No iterations.</strong> No NVTX range matched <code>--step-regex</code>, no "
		      "<code>stepprof_step()</code> marks were made, and no repeating CUDA call sequence was found: "
		      "there is no per-iteration breakdown. The run and the findings below still hold.</p>\n",
		      f);
	} else {
		char sb[128];
		fprintf(f,
			"<p><span class=\"swatch\" style=\"background:%s\"></span><strong>Bottleneck: %s</strong> "
			"(%.1f%% of wall time): %s.</p>\n",
			cat_color[bc], bn, 100.0 * report_share(a, bc),
			report_bottleneck_sentence(a, bn, sb, sizeof(sb)));
	}
	fputs("</section>\n", f);
}

void html_categories(FILE *f, const struct an_analysis *a)
{
	char b1[32], b2[32], b3[32];
	fputs("<section id=\"categories\">\n<h2>Where the time went</h2>\n", f);
	/* one bar of the whole run's wall time, split by share; labels where they fit */
	const double W = 960, H = 36;
	fprintf(f, "<svg class=\"chart\" viewBox=\"0 0 %.0f %.0f\" role=\"img\" aria-label=\"share of wall time\">\n",
		W, H);
	double x = 0;
	for (int c = 0; c < AN_CAT__COUNT; c++) {
		double w = report_share(a, c) * W;
		if (w <= 0)
			continue;
		fprintf(f,
			"<rect x=\"%.2f\" y=\"0\" width=\"%.2f\" height=\"%.0f\" fill=\"%s\"><title>%s "
			"%.1f%%</title></rect>\n",
			x, w, H, cat_color[c], an_cat_name[c], 100.0 * report_share(a, c));
		if (w >= 70)
			fprintf(f, "<text x=\"%.2f\" y=\"23\" class=\"on\">%s %.1f%%</text>\n", x + 6, an_cat_name[c],
				100.0 * report_share(a, c));
		x += w;
	}
	if (!a->wall_total)
		fprintf(f, "<rect x=\"0\" y=\"0\" width=\"%.0f\" height=\"%.0f\" fill=\"#eee\"/>\n", W, H);
	fputs("</svg>\n", f);
	fputs("<table class=\"grid cats\"><thead><tr><th class=\"l\">category</th><th>median</th><th>p95</th>"
	      "<th>share</th><th>total</th><th class=\"l\">an instant counts here when</th></tr></thead><tbody>\n",
	      f);
	static const char *const what[AN_CAT__COUNT] = {
	    "the training thread is blocked in file I/O or waiting for a batch from loader workers",
	    "a host-to-device copy runs on the GPU, or the training thread is inside an H2D call",
	    "a kernel, memset or device-to-device copy runs on the GPU (communication kernels are comm)",
	    ("a communication (NCCL) kernel runs on the GPU and no compute kernel does, or the training thread "
	     "waits in a synchronisation for one"),
	    "a device-to-host copy runs, or the training thread is inside a D2H call",
	    "the training thread is blocked in a synchronisation call",
	    "none of the above (Python, framework, launch overhead, GPU idle)",
	};
	for (int c = 0; c < AN_CAT__COUNT; c++)
		fprintf(f,
			"<tr><td class=\"l\"><span class=\"swatch\" style=\"background:%s\"></span>%s</td>"
			"<td>%s</td><td>%s</td><td class=\"share\" data-cat=\"%s\" data-value=\"%.17g\">%.1f%%</td>"
			"<td>%s</td><td class=\"l note\">%s</td></tr>\n",
			cat_color[c], an_cat_name[c], fns(report_cat_quantile(a, c, 0.5), b1, sizeof(b1)),
			fns(report_cat_quantile(a, c, 0.95), b2, sizeof(b2)), an_cat_name[c], report_share(a, c),
			100.0 * report_share(a, c), fns(a->bd_total[c], b3, sizeof(b3)), what[c]);
	fputs("</tbody></table>\n<p class=\"note\">Every instant of an iteration goes to the first category that "
	      "holds, in the priority order compute, comm, h2d, d2h, input, sync, other; the seven sum to the wall "
	      "time. Median and p95 are over iterations; share is the category's total over the total wall time.</p>\n",
	      f);
	if (a->bd_total[AN_COMM] || a->comm_overlapped_ns)
		fprintf(f,
			"<p class=\"note\" id=\"comm-overlapped\">Communication hidden under compute (counted as "
			"compute, comm_overlapped_ns): %s over the iterations.</p>\n",
			fns(a->comm_overlapped_ns, b1, sizeof(b1)));
	fputs("</section>\n", f);
}

/* --------------------------------------------------------- 3. findings */

/* Evidence keys end in their unit: show a readable value beside the exact number. */
static void evidence_value(FILE *f, const struct an_evidence *e)
{
	char b[48];
	if (e->is_str) {
		fputs("<code>", f);
		char s[sizeof(e->str) + 1];
		memcpy(s, e->str, sizeof(e->str));
		s[sizeof(e->str)] = 0;
		esc(f, s);
		fputs("</code>", f);
		return;
	}
	double v = e->num;
	if (!isfinite(v)) {
		fputs("-", f);
		return;
	}
	/* counts and bytes in full; large measures rounded rather than in e-notation */
	if ((v == floor(v) || fabs(v) >= 1000) && fabs(v) < 1e15)
		fprintf(f, "%.0f", v);
	else
		fprintf(f, "%.4g", v);
	const char *k = e->key ? e->key : "";
	size_t n = strlen(k);
	int ends_ns = (n >= 3 && !strcmp(k + n - 3, "_ns")) || !strncmp(k, "ns_", 3);
	if (v >= 1024 && strstr(k, "bytes"))
		fprintf(f, " <span class=\"note\">(%s)</span>", fbytes((uint64_t)v, b, sizeof(b)));
	else if (v >= 1000 && ends_ns)
		fprintf(f, " <span class=\"note\">(%s)</span>", fns((uint64_t)v, b, sizeof(b)));
	else if (strstr(k, "share") && v >= 0 && v <= 1)
		fprintf(f, " <span class=\"note\">(%.1f%%)</span>", 100 * v);
	else if (n >= 5 && !strcmp(k + n - 5, "_gbps"))
		fputs(" <span class=\"note\">GB/s</span>", f);
}

void html_findings(FILE *f, const struct an_analysis *a)
{
	fprintf(f, "<section id=\"findings\">\n<h2>Findings (%zu)</h2>\n", a->nfnd);
	if (!a->nfnd)
		fputs("<p>None: no small-file storm, no copy from pageable memory, no allocator fragmentation and no "
		      "steady memory growth crossed its threshold.</p>\n",
		      f);
	for (size_t i = 0; i < a->nfnd; i++) {
		const struct an_result_finding *x = &a->fnd[i];
		int sev = x->severity >= 0 && x->severity < 3 ? x->severity : 0;
		const char *kind = x->kind >= 0 && x->kind < AN_F__COUNT ? an_finding_name[x->kind] : "?";
		fprintf(f,
			"<article id=\"finding-%zu\" class=\"finding sev-%s\" data-kind=\"%s\">\n<h3><span "
			"class=\"badge\">%s</span> %s",
			i, an_severity_name[sev], kind, an_severity_name[sev], kind);
		if (x->signal) {
			fputs(" <small>(", f);
			esc(f, x->signal);
			fputs(")</small>", f);
		}
		fputs("</h3>\n<p class=\"iters\">", f);
		if (x->first_iteration < 0)
			fputs("outside every iteration", f);
		else if (x->first_iteration == x->last_iteration)
			fprintf(f, "iteration %ld", x->first_iteration);
		else
			fprintf(f, "iterations %ld&ndash;%ld (%ld concerned)", x->first_iteration, x->last_iteration,
				x->iterations);
		fputs("</p>\n", f);
		fputs("<p class=\"advice\">", f);
		char adv[sizeof(x->advice) + 1];
		memcpy(adv, x->advice, sizeof(x->advice));
		adv[sizeof(x->advice)] = 0;
		esc(f, adv);
		fputs("</p>\n", f);
		if (x->nev > 0) {
			fputs("<table class=\"kv evidence\"><caption>evidence</caption>\n", f);
			for (int k = 0; k < x->nev && k < AN_MAX_EVIDENCE; k++) {
				fputs("<tr><th>", f);
				esc(f, x->ev[k].key);
				fputs("</th><td>", f);
				evidence_value(f, &x->ev[k]);
				fputs("</td></tr>\n", f);
			}
			fputs("</table>\n", f);
		}
		if (x->nsites > 0) {
			fputs("<p class=\"sites-h\">call sites</p>\n<ol class=\"sites\">\n", f);
			for (int k = 0; k < x->nsites && k < AN_MAX_SITES; k++) {
				char s[sizeof(x->sites[k]) + 1];
				memcpy(s, x->sites[k], sizeof(x->sites[k]));
				s[sizeof(x->sites[k])] = 0;
				fputs("<li><code>", f);
				esc(f, s);
				fputs("</code></li>\n", f);
			}
			fputs("</ol>\n", f);
		}
		fputs("</article>\n", f);
	}
	fputs("</section>\n", f);
}

/* ------------------------------------------------------ 4. iteration table */

static void table_row(FILE *f, const struct an_analysis *a, size_t i)
{
	const struct an_iter *it = &a->it[i];
	char b[32];
	fprintf(f, "<tr><td>%zu</td><td>%s</td>", i, fns(it->start_ns - a->it[0].start_ns, b, sizeof(b)));
	fprintf(f, "<td>%s</td>", fns(it->end_ns - it->start_ns, b, sizeof(b)));
	for (int c = 0; c < AN_CAT__COUNT; c++)
		fprintf(f, "<td>%s</td>", fns(it->bd[c], b, sizeof(b)));
	fprintf(f, "<td>%s</td><td>%llu</td><td>%llu</td>", fns(it->gpu_idle_ns, b, sizeof(b)),
		(unsigned long long)it->files_opened, (unsigned long long)it->metadata_ops);
	fprintf(f, "<td>%s</td>", fbytes(it->bytes_read, b, sizeof(b)));
	fprintf(f, "<td>%s</td>", fbytes(it->h2d_bytes, b, sizeof(b)));
	fprintf(f, "<td>%s</td><td>%llu</td>", fbytes(it->d2h_bytes, b, sizeof(b)),
		(unsigned long long)it->pageable_copies);
	fprintf(f, "<td>%s</td></tr>\n", fbytes(it->device_bytes_peak, b, sizeof(b)));
}

void html_table(FILE *f, const struct an_analysis *a, int all)
{
	if (!a->nit)
		return;
	int cut = !all && a->nit > 20;
	fprintf(f, "<section id=\"table\">\n<details><summary>Per-iteration table (%s%zu iterations%s)</summary>\n",
		cut ? "first and last 10 of " : "", a->nit, cut ? "; <code>--all</code> for every one" : "");
	fputs("<table class=\"grid iters\"><thead><tr><th>#</th><th>start</th><th>wall</th>", f);
	for (int c = 0; c < AN_CAT__COUNT; c++)
		fprintf(f, "<th><span class=\"swatch\" style=\"background:%s\"></span>%s</th>", cat_color[c],
			an_cat_name[c]);
	fputs("<th>GPU idle</th><th>files</th><th>meta ops</th><th>read</th><th>h2d</th><th>d2h</th><th>pageable</th>"
	      "<th>dev peak</th></tr></thead><tbody>\n",
	      f);
	for (size_t i = 0; i < a->nit; i++) {
		if (cut && i == 10)
			fprintf(f, "<tr class=\"gap\"><td colspan=\"%d\">&hellip; %zu iterations &hellip;</td></tr>\n",
				3 + AN_CAT__COUNT + 8, a->nit - 20);
		if (cut && i >= 10 && i < a->nit - 10)
			continue;
		table_row(f, a, i);
	}
	fputs("</tbody></table>\n<p class=\"note\">start: from the first iteration's start. Files, metadata "
	      "operations and bytes read are counted across the process tree (loader workers included) in the "
	      "iteration where the call began.</p>\n</details>\n</section>\n",
	      f);
}
