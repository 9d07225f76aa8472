/*
 * export_perfetto.c - stepprof traces as Chrome Trace Event Format JSON for
 * ui.perfetto.dev (export_perfetto.h, docs/export.md).
 *
 * This file runs the export: the header pass, then every file's records, then
 * the metadata. The state they share is in export_perfetto_int.h; the tracks
 * (processes, threads, GPU lanes and their names) are kept by
 * export_perfetto_tracks.c; the records are written as trace events by
 * export_perfetto_events.c.
 *
 * Divided into:
 *   1. the header pass: every file's header, the hosts' clocks and ts 0,
 *   2. the export.
 *
 * Ids: Perfetto keys threads by tid alone (and a tid seen under another pid starts
 * a new thread), so every track id written must be unique in the document. Pids
 * and tids are numbered as the analysis numbers pids (merge_pid_spaces, merge.h):
 * those of the first host as they are, those of the n-th further host with
 * n << 22 added (pid_max is at most 2^22), and a later process of a pid already
 * seen on its host (another pid namespace, a reused pid) in a space of its own,
 * so that `analyze` and `export` tell the same processes apart; the GPU tracks
 * take pseudo tids from 0x80000000 up.
 *
 * Time: ts and dur are microseconds with three decimals (exact nanoseconds),
 * counted from ts 0 = the earliest file start, so that the numbers stay short
 * and exact whatever the machine's uptime (otherData.ts_zero_mono_ns gives it
 * back). The files of another host are moved onto the first host's
 * CLOCK_MONOTONIC by the difference of the hosts' realtime-monotonic offsets
 * (as good as the hosts' NTP); the files of one host share one offset, so their
 * relative timing stays exact.
 */
#include "export_perfetto.h"
#include "export_perfetto_int.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "util.h"

/* ------------------------------------------------------ 1. header pass */

/*
 * Times are untrusted (a damaged file's can be anything up to 2^64-1): document time
 * is computed with saturating arithmetic, never a signed overflow.
 */
int64_t sat_add(int64_t a, int64_t b)
{
	int64_t r;
	if (__builtin_add_overflow(a, b, &r))
		return b > 0 ? INT64_MAX : INT64_MIN;
	return r;
}

int64_t sat_sub(int64_t a, int64_t b)
{
	int64_t r;
	if (__builtin_sub_overflow(a, b, &r))
		return b < 0 ? INT64_MAX : INT64_MIN;
	return r;
}

int64_t clamp_ns(uint64_t ns)
{
	return ns > INT64_MAX ? INT64_MAX : (int64_t)ns;
}

static void header_pass(struct ex *x, int *rc)
{
	int64_t first_off = 0;
	int have_zero = 0;
	for (size_t i = 0; i < x->nfiles; i++) {
		struct file_info *fi = &x->files[i];
		struct sp_reader *r;
		int orc = util_reader_open(fi->path, &r);
		if (orc) { /* one line; a file never written (exit 3) is left out as analyze does */
			*rc = util_worse(*rc, orc);
			continue;
		}
		fi->ok = 1;
		fi->hdr = xcalloc(1, sizeof(*fi->hdr));
		*fi->hdr = *sp_reader_header(r);
		/*
		 * The file is created by the first record's call, which began before the header's
		 * start: the reader returns the earliest record first (threads merged by begin), so
		 * ts 0 is taken before it and the document's times are not negative.
		 */
		struct sp_event ev;
		uint64_t first = fi->hdr->start_mono_ns;
		if (sp_reader_next(r, &ev) && ev.begin_ns && ev.begin_ns < first)
			first = ev.begin_ns;
		sp_reader_close(r);
		struct sp_file_header *h = fi->hdr;
		h->host[sizeof(h->host) - 1] = 0;
		h->cmdline[sizeof(h->cmdline) - 1] = 0;
		fi->bpf = !!(h->features & SP_FEAT_BPF);

		/* realtime - monotonic of this file: the same for every file of a host, up to NTP slew */
		int64_t off = (int64_t)(h->start_real_ns - h->start_mono_ns);
		unsigned k = 0;
		while (k < x->nhosts && strcmp(x->hosts[k].name, h->host))
			k++;
		if (k == x->nhosts) {
			if (x->nhosts == MAX_HOSTS) {
				k = MAX_HOSTS - 1; /* NOTE: the clock of hosts past 512 may be off; ids stay apart */
			} else {
				x->nhosts++;
				snprintf(x->hosts[k].name, sizeof(x->hosts[k].name), "%s", h->host);
				if (k == 0)
					first_off = off;
				/* Only clocks that were both read: a header without realtime keeps its monotonic. */
				x->hosts[k].offset_ns =
				    k && h->start_real_ns && off != first_off ? sat_sub(off, first_off) : 0;
			}
		}
		fi->host = k;
		int64_t start = sat_add(clamp_ns(first), x->hosts[k].offset_ns);
		if (!have_zero || start < x->zero) {
			x->zero = start;
			have_zero = 1;
		}
	}
	x->st->ts_zero_ns = (uint64_t)x->zero;

	/* the pid spaces of the files read, numbered as the analysis numbers them */
	const struct sp_file_header **hdr = xcalloc(x->nfiles, sizeof(*hdr));
	int32_t *off = xcalloc(x->nfiles, sizeof(*off));
	size_t n = 0;
	for (size_t i = 0; i < x->nfiles; i++)
		if (x->files[i].ok)
			hdr[n++] = x->files[i].hdr;
	if (merge_pid_spaces(hdr, n, off)) {
		util_err(NULL, "out of memory");
		exit(SP_EXIT_INTERNAL);
	}
	for (size_t i = 0, k = 0; i < x->nfiles; i++)
		if (x->files[i].ok)
			x->files[i].pid_off = off[k++];
	free(hdr);
	free(off);
}

/* ------------------------------------------------------------ 2. export */

/*
 * Has writing the document failed? The errno of the first failure is kept for the
 * error line: what runs after it (reading, formatting) may change errno.
 */
static int out_failed(struct ex *x)
{
	if (!ferror(x->w.f))
		return 0;
	if (!x->werr)
		x->werr = errno ? errno : EIO;
	return 1;
}

static int export_file(struct ex *x, struct file_info *fi)
{
	int orc = util_reader_open(fi->path, &x->r);
	if (orc)
		return orc; /* it opened at the header pass: changed under us */
	x->fi = fi;
	x->st->files++;
	if (!fi->bpf) {
		/* the collector's header names the collector, not the pids it saw */
		struct proc *p = proc_get(x, out_id(x, fi->hdr->pid));
		/* named by what it ran last, as stepprof analyze does, whatever the files' order */
		if (!p->has_hdr || fi->hdr->start_mono_ns >= p->cmd_start) {
			p->pid = fi->hdr->pid;
			p->ppid = fi->hdr->ppid;
			p->rank = fi->hdr->rank;
			p->host = fi->host;
			free(p->cmdline);
			p->cmdline = xstrdup(fi->hdr->cmdline);
			p->cmd_start = fi->hdr->start_mono_ns;
		}
		p->has_hdr = 1;
	}
	struct sp_event ev;
	/* A reader gone (export -o - | head, SIGPIPE ignored): the rest would go nowhere. */
	while (!out_failed(x) && sp_reader_next(x->r, &ev)) {
		x->st->records++;
		uint32_t opid = out_id(x, ev.pid), otid = out_id(x, ev.tid);
		gpu_model_record(x, &ev); /* before gpu_call: a span that waits for its call is measured on joining */
		struct thread *t = thread_get(x, opid, otid ? otid : opid, ev.tid);
		switch (ev.kind) {
		case SP_K_THREAD: {
			const char *s = str_or(x, ev.f[SP_F_NAME], NULL);
			if (s) {
				free(t->name);
				t->name = xstrdup(s);
			}
			continue;
		}
		case SP_K_GPU_SPAN:
			if (ev.f[SP_F_OP])
				gpu_span(x, &ev);
			continue;
		case SP_K_LAUNCH:
			t->launches++;
			/* fall through */
		case SP_K_COPY:
		case SP_K_MEMSET:
			if (ev.f[SP_F_OP])
				gpu_call(x, &ev);
			break;
		default:
			break;
		}
		if (in_window(x, rel(x, ev.begin_ns), rel(x, ev.end_ns)))
			host_record(x, &ev, opid, otid ? otid : opid);
	}
	gpu_flush(x);
	int rc = util_report_damage(fi->path, sp_reader_stats(x->r));
	sp_reader_close(x->r);
	x->r = NULL;
	return rc;
}

int export_perfetto(char *const *paths, size_t n, FILE *out, const struct export_opts *opts, struct export_stats *st)
{
	struct export_stats dummy;
	struct ex *x = xcalloc(1, sizeof(*x));
	int rc = 0;
	memset(st ? st : &dummy, 0, sizeof(*st));
	x->st = st ? st : &dummy;
	x->nfiles = n;
	x->files = xcalloc(n, sizeof(*x->files));
	for (size_t i = 0; i < n; i++)
		x->files[i].path = paths[i];
	x->next_pseudo = PSEUDO_TID_BASE;
	x->from = opts ? opts->from_ns : INT64_MIN;
	x->to = opts ? opts->to_ns : INT64_MAX;

	header_pass(x, &rc);
	size_t ok = 0;
	for (size_t i = 0; i < n; i++)
		ok += x->files[i].ok;
	if (!ok)
		rc = SP_EXIT_INPUT; /* nothing to export, as when no file can be read (every one never written) */
	if (ok) {
		x->ops = xcalloc(EXPORT_OP_WINDOW, sizeof(*x->ops));
		struct jsonw *w = &x->w;
		jw_init(w, out, opts ? opts->pretty : 0);
		jw_obj_begin(w);
		/* Perfetto reads displayTimeUnit only before the events (and stops at a key it does not know) */
		jw_kstr(w, "displayTimeUnit", "ns");
		jw_karr_begin(w, "traceEvents");
		for (size_t i = 0; i < n; i++)
			if (x->files[i].ok)
				rc = util_worse(rc, export_file(x, &x->files[i]));
		if (!out_failed(x))
			export_analysis(x);
		write_metadata(x);
		jw_arr_end(w);
		jw_kobj_begin(w, "otherData");
		jw_kstr(w, "producer", "stepprof export");
		jw_kstr(w, "clock", "CLOCK_MONOTONIC");
		jw_ku64(w, "ts_zero_mono_ns", (uint64_t)x->zero);
		jw_ku64(w, "files", x->st->files);
		jw_ku64(w, "records", x->st->records);
		jw_ku64(w, "gpu_spans", x->st->gpu_spans);
		jw_ku64(w, "gpu_spans_unjoined", x->st->gpu_unjoined);
		jw_ku64(w, "gpu_spans_modelled", x->st->gpu_modelled);
		jw_ku64(w, "iterations", x->st->iterations);
		jw_ku64(w, "findings", x->st->findings);
		jw_obj_end(w);
		jw_obj_end(w);
		int flushed = fflush(out) == 0;
		if (!flushed && !x->werr)
			x->werr = errno ? errno : EIO;
		if (!flushed || out_failed(x) || jw_error(w)) {
			if (out == stdout)
				util_stdout_failed();
			else /* which file and why: a full disk, a file size limit */
				util_err(opts ? opts->out_name : NULL, "cannot write%s%s",
					 x->werr ? ": " : " the trace", x->werr ? strerror(x->werr) : "");
			rc = util_worse(rc, SP_EXIT_INTERNAL);
		}
	}

	for (size_t i = 0; i < x->procs_cap; i++)
		free(x->procs[i].cmdline);
	for (size_t i = 0; i < x->threads_cap; i++)
		free(x->threads[i].name);
	for (size_t i = 0; i < n; i++)
		free(x->files[i].hdr);
	free(x->procs);
	free(x->threads);
	free(x->lanes);
	free(x->ops);
	free(x->pend);
	free(x->files);
	free(x);
	return rc;
}
