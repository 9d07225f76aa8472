/*
 * cmd_info.c - `stepprof info [--json] DIR|FILE...`: what each trace file holds.
 *
 * Divided into: 1. options, 2. reading one file (the reader's statistics after a
 * full pass: memory stays bounded whatever the file's size), 3. text output,
 * 4. JSON output ({"files": [...]}, docs/cli.md), 5. the verb.
 */
#include "commands.h"

#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "jsonw.h"
#include "reader.h"
#include "tracefile.h"
#include "util.h"

/* ------------------------------------------------------------ 1. options */

static void info_usage(FILE *f)
{
	fprintf(f, "usage: stepprof info [--json] DIR|FILE...\n\n"
		   "For each trace file (a DIR means every trace file directly in it): host, pid,\n"
		   "ppid, rank, command line, online CPUs and CPU affinity, time span, threads,\n"
		   "records in total and per kind,\n"
		   "lost and overwritten records, used and apparent file size, per-window\n"
		   "summaries (count and time span),\n"
		   "truncated/corrupt flags.\n\n"
		   "  --json    one JSON object {\"files\": [...]} (fields in docs/cli.md)\n"
		   "  -h, --help\n");
}

/* ----------------------------------------------------------- 2. one file */

struct info {
	struct sp_file_header hdr;
	struct sp_reader_stats st;
	uint64_t sum_begin, sum_end; /* span of the SUMMARY records (st.summaries of them) */
	uint64_t apparent, used;     /* the file's size, and what it holds (its compact size) */
};

/* Apparent size (st_size) and used size: what `stepprof compact` would leave. */
static void info_sizes(const char *path, struct info *in)
{
	struct stat sb;
	in->apparent = stat(path, &sb) == 0 ? (uint64_t)sb.st_size : 0;
	struct sp_tf_compact_plan p;
	in->used = sp_tf_compact_plan(&in->hdr, in->apparent, &p, NULL, 0) >= 0 ? p.size : in->apparent;
}

/*
 * Read the whole file; 0 ok, else the exit code (the error is printed): a file never
 * written is one line and 3, and left out, as analyze and export leave it out.
 */
static int info_read(const char *path, struct info *in)
{
	struct sp_reader *r;
	int rc = util_reader_open(path, &r);
	if (rc)
		return rc;
	struct sp_event ev;
	while (sp_reader_next(r, &ev))
		;
	in->sum_begin = in->sum_end = 0;
	size_t pos = 0;
	while (sp_reader_summary(r, &pos, &ev))
		if (ev.kind == SP_K_SUMMARY) {
			if (!in->sum_begin || ev.begin_ns < in->sum_begin)
				in->sum_begin = ev.begin_ns;
			if (ev.end_ns > in->sum_end)
				in->sum_end = ev.end_ns;
		}
	in->hdr = *sp_reader_header(r);
	in->st = *sp_reader_stats(r);
	sp_reader_close(r);
	/* The header's strings are untrusted: make sure they end. */
	in->hdr.host[sizeof(in->hdr.host) - 1] = 0;
	in->hdr.cmdline[sizeof(in->hdr.cmdline) - 1] = 0;
	for (unsigned i = 0; i < SP_MAX_DEVICES; i++)
		in->hdr.devices[i].name[sizeof(in->hdr.devices[i].name) - 1] = 0;
	info_sizes(path, in);
	return 0;
}

static const char *const feature_names[] = {"cuda", "libc_io", "bpf", "tsc_clock"};

/* -------------------------------------------------------------- 3. text */

static void info_text(const char *path, const struct info *in)
{
	const struct sp_file_header *h = &in->hdr;
	const struct sp_reader_stats *st = &in->st;
	char b1[32], b2[32];
	/* path, host, command line and device names are untrusted: util_put_text shows them */
	char run[SP_RUN_ID_SIZE];
	util_put_text(stdout, path, 0);
	printf("\n  format      %u.%u\n", h->version_major, h->version_minor);
	printf("  run         %s\n",
	       util_header_run_id(h, run)[0] ? run : "none (a file of format 1.3 or older, or its writer had none)");
	fputs("  host        ", stdout);
	util_put_text(stdout, h->host, 0);
	fputc('\n', stdout);
	printf("  process     pid %d, ppid %d", h->pid, h->ppid);
	if (h->rank >= 0)
		printf(", rank %d", h->rank);
	if (h->local_rank >= 0)
		printf(", local rank %d", h->local_rank);
	if (h->world_size >= 0)
		printf(", world size %d", h->world_size);
	fputs("\n  cmdline     ", stdout);
	util_put_text(stdout, h->cmdline, 0);
	fputc('\n', stdout);
	printf("  features   ");
	int any = 0;
	for (unsigned i = 0; i < sizeof(feature_names) / sizeof(feature_names[0]); i++)
		if (h->features & (1u << i)) {
			printf(" %s", feature_names[i]);
			any = 1;
		}
	printf("%s\n", any ? "" : " none");
	if (h->online_cpus || h->cpu_affinity_count) {
		char cpus[256];
		printf("  cpus        %u online, affinity %u (%s)\n", h->online_cpus, h->cpu_affinity_count,
		       util_header_cpu_list(h, cpus, sizeof(cpus))[0] ? cpus : "unknown");
	} else {
		printf("  cpus        unknown (a file of format 1.4 or older, or of the eBPF collector)\n");
	}
	if (st->records)
		printf("  time        %llu .. %llu ns (CLOCK_MONOTONIC), span %s\n", (unsigned long long)st->begin_ns,
		       (unsigned long long)st->end_ns, util_fmt_ns(st->end_ns - st->begin_ns, b1, sizeof(b1)));
	else
		printf("  time        no records\n");
	printf("  exit        %s\n",
	       h->end_mono_ns ? "clean" : "no clean exit recorded (crash, kill or still running)");
	printf("  threads     %u\n", st->threads);
	printf("  records     %llu (strings %llu, lost %llu, overwritten %llu)\n", (unsigned long long)st->records,
	       (unsigned long long)st->strings, (unsigned long long)st->lost, (unsigned long long)st->overwritten);
	if (st->records)
		printf("  size        %llu slots of %u bytes, %.1f bytes per record\n", (unsigned long long)st->slots,
		       SP_SLOT_SIZE, (double)st->slots * SP_SLOT_SIZE / (double)st->records);
	printf("  file        %s used, %s apparent%s\n", util_fmt_bytes(in->used, b1, sizeof(b1)),
	       util_fmt_bytes(in->apparent, b2, sizeof(b2)),
	       in->apparent > in->used + in->hdr.chunk_size ? " (sparse: stepprof compact shrinks it)" : "");
	if (st->summaries)
		printf("  summaries   %llu windows, %llu .. %llu ns, span %s\n", (unsigned long long)st->summaries,
		       (unsigned long long)in->sum_begin, (unsigned long long)in->sum_end,
		       util_fmt_ns(in->sum_end - in->sum_begin, b1, sizeof(b1)));
	else
		printf("  summaries   none\n");
	printf("  by kind    ");
	any = 0;
	for (unsigned k = 1; k < SP_K__COUNT; k++)
		if (st->by_kind[k]) {
			printf("%s %s %llu", any ? "," : "", sp_kind_name[k], (unsigned long long)st->by_kind[k]);
			any = 1;
		}
	printf("%s\n", any ? "" : " -");
	unsigned nd = h->ndevices < SP_MAX_DEVICES ? h->ndevices : SP_MAX_DEVICES;
	for (unsigned i = 0; i < nd; i++) {
		const struct sp_device_info *d = &h->devices[i];
		printf("  device %-4d ", d->ordinal);
		util_put_text(stdout, d->name[0] ? d->name : "?", 0);
		printf(", %s, PCIe gen %u x%u (max gen %u x%u)\n", util_fmt_bytes(d->mem_bytes, b2, sizeof(b2)),
		       d->pcie_gen_cur, d->pcie_width_cur, d->pcie_gen_max, d->pcie_width_max);
	}
	if (h->driver_version || h->runtime_version)
		printf("  cuda        driver %d, runtime %d\n", h->driver_version, h->runtime_version);
	printf("  status      %s\n",
	       st->truncated ? (st->corrupt ? "truncated, corrupt" : "truncated") : (st->corrupt ? "corrupt" : "ok"));
}

/* -------------------------------------------------------------- 4. JSON */

static void info_json(struct jsonw *w, const char *path, const struct info *in)
{
	const struct sp_file_header *h = &in->hdr;
	const struct sp_reader_stats *st = &in->st;
	char ver[32];
	snprintf(ver, sizeof(ver), "%u.%u", h->version_major, h->version_minor);
	jw_obj_begin(w);
	jw_kstr(w, "path", path);
	jw_kstr(w, "format_version", ver);
	char run[SP_RUN_ID_SIZE];
	jw_kstr(w, "run_id", util_header_run_id(h, run));
	jw_kstr(w, "host", h->host);
	jw_ki64(w, "pid", h->pid);
	jw_ki64(w, "ppid", h->ppid);
	jw_ki64(w, "rank", h->rank);
	jw_ki64(w, "local_rank", h->local_rank);
	jw_ki64(w, "world_size", h->world_size);
	jw_kstr(w, "cmdline", h->cmdline);
	jw_karr_begin(w, "features");
	for (unsigned i = 0; i < sizeof(feature_names) / sizeof(feature_names[0]); i++)
		if (h->features & (1u << i))
			jw_str(w, feature_names[i]);
	jw_arr_end(w);
	char cpus[4096];
	jw_ku64(w, "online_cpus", h->online_cpus);
	jw_ku64(w, "cpu_affinity_count", h->cpu_affinity_count);
	jw_kstr(w, "cpu_affinity", util_header_cpu_list(h, cpus, sizeof(cpus)));
	jw_ku64(w, "start_mono_ns", h->start_mono_ns);
	jw_ku64(w, "start_real_ns", h->start_real_ns);
	jw_ku64(w, "begin_ns", st->begin_ns);
	jw_ku64(w, "end_ns", st->end_ns);
	jw_kbool(w, "clean_exit", h->end_mono_ns != 0);
	jw_ku64(w, "threads", st->threads);
	jw_ku64(w, "records", st->records);
	jw_ku64(w, "record_slots", st->slots);
	jw_ku64(w, "used_bytes", in->used);
	jw_ku64(w, "apparent_bytes", in->apparent);
	jw_ku64(w, "strings", st->strings);
	jw_ku64(w, "lost", st->lost);
	jw_ku64(w, "overwritten", st->overwritten);
	jw_ku64(w, "summaries", st->summaries);
	jw_ku64(w, "summaries_begin_ns", in->sum_begin);
	jw_ku64(w, "summaries_end_ns", in->sum_end);
	jw_kobj_begin(w, "records_by_kind");
	for (unsigned k = 1; k < SP_K__COUNT; k++)
		/* summaries: "summaries"; a GPU_SPAN2 is read as two gpu_span records */
		if (k != SP_K_STRING && k != SP_K_SUMMARY && k != SP_K_SUMMARY_DEVICE && k != SP_K_GPU_SPAN2)
			jw_ku64(w, sp_kind_name[k], st->by_kind[k]);
	jw_obj_end(w);
	jw_kbool(w, "truncated", st->truncated);
	jw_kbool(w, "corrupt", st->corrupt);
	jw_ku64(w, "corrupt_slots", st->corrupt_slots);
	jw_ki64(w, "driver_version", h->driver_version);
	jw_ki64(w, "runtime_version", h->runtime_version);
	jw_karr_begin(w, "devices");
	unsigned nd = h->ndevices < SP_MAX_DEVICES ? h->ndevices : SP_MAX_DEVICES;
	for (unsigned i = 0; i < nd; i++) {
		const struct sp_device_info *d = &h->devices[i];
		jw_obj_begin(w);
		jw_ki64(w, "ordinal", d->ordinal);
		jw_kstr(w, "name", d->name);
		jw_ku64(w, "mem_bytes", d->mem_bytes);
		jw_ku64(w, "pcie_gen", d->pcie_gen_cur);
		jw_ku64(w, "pcie_width", d->pcie_width_cur);
		jw_ku64(w, "pcie_gen_max", d->pcie_gen_max);
		jw_ku64(w, "pcie_width_max", d->pcie_width_max);
		jw_obj_end(w);
	}
	jw_arr_end(w);
	jw_obj_end(w);
}

/* ------------------------------------------------------------- 5. the verb */

int command_info(int argc, char **argv)
{
	int json = 0;
	const struct util_flag flags[] = {{"json", 'j', &json}};
	int done = util_parse_flags(argc, argv, "info", flags, 1, info_usage);
	if (done >= 0)
		return done;
	if (optind >= argc)
		return util_no_operand("info");
	size_t n;
	int rc;
	char **paths = util_trace_paths(argv + optind, argc - optind, &n, &rc);
	struct jsonw w;
	if (json) {
		jw_init(&w, stdout, 1);
		jw_obj_begin(&w);
		jw_karr_begin(&w, "files");
	}
	size_t shown = 0;
	for (size_t i = 0; i < n && !ferror(stdout); i++) { /* stop when nobody reads */
		struct info in;
		int frc = info_read(paths[i], &in);
		if (frc) {
			rc = util_worse(rc, frc);
			continue;
		}
		shown++;
		if (json) {
			info_json(&w, paths[i], &in);
		} else {
			if (shown > 1)
				printf("\n");
			info_text(paths[i], &in);
		}
		rc = util_worse(rc, util_report_damage(paths[i], &in.st));
	}
	if (n && !shown && rc == SP_EXIT_DAMAGED)
		rc = SP_EXIT_INPUT; /* nothing to show, as when no file can be read (every one never written) */
	if (json) {
		jw_arr_end(&w);
		jw_obj_end(&w);
		if (jw_error(&w))
			rc = util_worse(rc, util_stdout_failed());
	}
	util_free_paths(paths);
	return rc;
}
