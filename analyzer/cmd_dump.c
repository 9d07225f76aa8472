/*
 * cmd_dump.c - `stepprof dump [--json] [--summaries] FILE`: every record of one
 * trace file, one per line, in the reader's order (each thread in the order it
 * wrote, threads merged by begin time); with --summaries, the per-window summary
 * records of the keep area instead (in the order written).
 *
 * Divided into:
 *   1. options,
 *   2. the GPU-span window: a second reader of the file runs SPAN_AHEAD records
 *      ahead of the one printed and collects the gpu_span records it passes by
 *      (pid, op), so that the copy/memset/launch record of the same op can show
 *      its GPU-side time; spans are forgotten SPAN_BEHIND records after the
 *      printed record passed them, so dump's memory is bounded like the reader's,
 *   3. one record as a JSON object / as a text line (fields by fields.def),
 *   4. the verb.
 */
#include "commands.h"

#include <getopt.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "hashmap.h"
#include "jsonw.h"
#include "reader.h"
#include "util.h"

/* ------------------------------------------------------------ 1. options */

static void dump_usage(FILE *f)
{
	fprintf(f, "usage: stepprof dump [--json] [--summaries] FILE\n\n"
		   "Every record of one trace file, one per line: begin time, duration, pid/tid,\n"
		   "kind, api and the kind's fields (string ids resolved, pointers in hex).\n\n"
		   "  --json       one JSON object per line (fields in docs/cli.md)\n"
		   "  --summaries  the per-window summary and summary_device records instead\n"
		   "               (docs/trace-format.md), in the order the process wrote them\n"
		   "  -h, --help\n");
}

/*
 * Kinds that are instants, not calls: dump shows "ts_ns" (and "begin_ns") for them,
 * "begin_ns"/"end_ns"/"dur_ns" for everything else (a kind added later is a call).
 */
static int is_instant(unsigned kind)
{
	switch (kind) {
	case SP_K_LOST:
	case SP_K_THREAD:
	case SP_K_FORK:
	case SP_K_MARK:
	case SP_K_STEP:
	case SP_K_NVTX_MARK:
	case SP_K_CPU_TIME:
		return 1;
	default:
		return 0;
	}
}

/* ------------------------------------------------------- 2. GPU-span window */

/*
 * A gpu_span is written after its op's record and begins after it (the GPU
 * starts the op once it was called), so in the reader's order it comes later,
 * usually within the few iterations the host runs ahead of the GPU. An op
 * whose span lies farther than SPAN_AHEAD records from its record is shown
 * without GPU time. RATIONALE: a window of records, not the whole file's
 * spans: memory stays about 8 MB whatever the length of the trace.
 */
#define SPAN_AHEAD  (1u << 16)
#define SPAN_BEHIND (1u << 12) /* a span a little before its op (clock conversion) */
#define SPAN_CAP    (SPAN_AHEAD + SPAN_BEHIND + 1)

struct span {
	uint64_t key; /* span_key(pid, op) */
	uint64_t begin, end;
	uint64_t pos; /* its position in the file's records */
};

struct span_window {
	struct sp_reader *ahead; /* NULL once it has read every record */
	uint64_t pos;		 /* records the ahead reader has read */
	struct span *ring;	 /* SPAN_CAP entries, oldest at head */
	size_t head, n;
	struct hashmap map; /* key -> ring index + 1 */
};

static uint64_t span_key(int32_t pid, uint32_t op)
{
	return (uint64_t)(uint32_t)pid << 32 | op;
}

static void window_free(struct span_window *w)
{
	sp_reader_close(w->ahead);
	free(w->ring);
	hashmap_free(&w->map);
}

/* Forget the spans more than SPAN_BEHIND records behind record `at`. */
static void window_forget(struct span_window *w, uint64_t at)
{
	while (w->n && w->ring[w->head].pos + SPAN_BEHIND < at) {
		const struct span *g = &w->ring[w->head];
		union hashmap_val *v = hashmap_find(&w->map, g->key);
		if (v && v->u == w->head + 1)
			hashmap_del(&w->map, g->key);
		w->head = (w->head + 1) % SPAN_CAP;
		w->n--;
	}
}

/*
 * Read ahead up to SPAN_AHEAD records past record `at`, the one about to be
 * printed; the first span of an op in the window wins. -1 when out of memory.
 */
static int window_fill(struct span_window *w, uint64_t at)
{
	window_forget(w, at);
	struct sp_event ev;
	while (w->ahead && w->pos <= at + SPAN_AHEAD) {
		if (!sp_reader_next(w->ahead, &ev)) {
			sp_reader_close(w->ahead);
			w->ahead = NULL;
			break;
		}
		uint64_t pos = w->pos++;
		/* op 0 means "no op id" (sp_next_op starts at 1) */
		if (ev.kind != SP_K_GPU_SPAN || !ev.f[SP_F_OP])
			continue;
		uint64_t key = span_key(ev.pid, (uint32_t)ev.f[SP_F_OP]);
		union hashmap_val *v = hashmap_slot(&w->map, key, true);
		if (!v)
			return -1;
		if (v->u)
			continue;
		/* the ring holds the spans of at most SPAN_AHEAD + SPAN_BEHIND records: never full here */
		size_t i = (w->head + w->n++) % SPAN_CAP;
		w->ring[i] = (struct span){key, ev.begin_ns, ev.end_ns, pos};
		v->u = i + 1;
	}
	return 0;
}

static const struct span *window_get(const struct span_window *w, int32_t pid, uint32_t op)
{
	const union hashmap_val *v = hashmap_find(&w->map, span_key(pid, op));
	return v ? &w->ring[v->u - 1] : NULL;
}

/* -------------------------------------------------------- 3. one record */

static const char *enum_name(unsigned type, uint64_t v)
{
	switch (type) {
	case SP_T_DIR:
		return v < SP_DIR__COUNT ? sp_dir_name[v] : NULL;
	case SP_T_HOSTMEM:
		return v < SP_HOSTMEM__COUNT ? sp_hostmem_name[v] : NULL;
	case SP_T_FDTYPE:
		return v < SP_FDTYPE__COUNT ? sp_fdtype_name[v] : NULL;
	case SP_T_SOURCE:
		return v < SP_SOURCE__COUNT ? sp_source_name[v] : NULL;
	default:
		return NULL;
	}
}

static void record_json(struct jsonw *w, struct sp_reader *r, const struct sp_event *ev, const struct span *gs)
{
	jw_obj_begin(w);
	jw_kstr(w, "kind", sp_kind_name[ev->kind]);
	if (ev->api && ev->api < SP_API__COUNT)
		jw_kstr(w, "api", sp_api_name[ev->api]);
	jw_ki64(w, "pid", ev->pid);
	jw_ki64(w, "tid", ev->tid);
	if (is_instant(ev->kind)) {
		jw_ku64(w, "ts_ns", ev->begin_ns);
		jw_ku64(w, "begin_ns", ev->begin_ns);
	} else {
		jw_ku64(w, "begin_ns", ev->begin_ns);
		jw_ku64(w, "end_ns", ev->end_ns);
		jw_ku64(w, "dur_ns", ev->end_ns - ev->begin_ns);
	}
	for (unsigned i = 0; i < SP_F__COUNT; i++) {
		if (!((ev->mask >> i) & 1))
			continue;
		uint64_t v = ev->f[i];
		unsigned t = sp_field_type[i];
		const char *name = sp_field_name[i];
		switch (t) {
		case SP_T_U:
			jw_ku64(w, name, v);
			break;
		case SP_T_I:
			jw_ki64(w, name, (int64_t)v);
			break;
		case SP_T_HEX:
			jw_khex(w, name, v);
			break;
		case SP_T_STR:
			/* null: no string (id 0) or one the file does not hold (lost). */
			jw_kstr(w, name, sp_reader_string(r, (uint32_t)v));
			break;
		default: {
			const char *e = enum_name(t, v);
			if (e)
				jw_kstr(w, name, e);
			else
				jw_ku64(w, name, v);
		}
		}
	}
	if (gs) {
		jw_ku64(w, "gpu_begin_ns", gs->begin);
		jw_ku64(w, "gpu_end_ns", gs->end);
	}
	jw_obj_end(w);
}

/* A string field in a text line: bare when it is one plain word, else quoted. */
static void text_string(const char *s)
{
	int plain = *s != 0;
	for (const char *p = s; *p && plain; p++)
		plain = *p > ' ' && *p != '"' && *p != '\\' && (unsigned char)*p < 0x7f;
	if (plain) {
		fputs(s, stdout);
		return;
	}
	putchar('"');
	util_put_text(stdout, s, 1);
	putchar('"');
}

static void record_text(struct sp_reader *r, const struct sp_event *ev, const struct span *gs)
{
	if (is_instant(ev->kind))
		printf("%20" PRIu64 " %12s", ev->begin_ns, "-");
	else
		printf("%20" PRIu64 " %12" PRIu64, ev->begin_ns, ev->end_ns - ev->begin_ns);
	printf(" %7d %7d %-15s %-24s", ev->pid, ev->tid, sp_kind_name[ev->kind],
	       ev->api && ev->api < SP_API__COUNT ? sp_api_name[ev->api] : "-");
	for (unsigned i = 0; i < SP_F__COUNT; i++) {
		if (!((ev->mask >> i) & 1))
			continue;
		uint64_t v = ev->f[i];
		unsigned t = sp_field_type[i];
		printf(" %s=", sp_field_name[i]);
		if (t == SP_T_U) {
			printf("%" PRIu64, v);
		} else if (t == SP_T_I) {
			printf("%" PRId64, (int64_t)v);
		} else if (t == SP_T_HEX) {
			printf("0x%" PRIx64, v);
		} else if (t == SP_T_STR) {
			const char *s = sp_reader_string(r, (uint32_t)v);
			if (s)
				text_string(s);
			else if (v)
				printf("#%" PRIu64, v); /* an id the file holds no string for */
			else
				putchar('-');
		} else {
			const char *e = enum_name(t, v);
			if (e)
				fputs(e, stdout);
			else
				printf("%" PRIu64, v);
		}
	}
	if (gs)
		printf(" gpu=%" PRIu64 "+%" PRIu64, gs->begin, gs->end - gs->begin);
	putchar('\n');
}

/* ------------------------------------------------------------- 4. the verb */

int command_dump(int argc, char **argv)
{
	int json = 0, sums = 0;
	const struct util_flag flags[] = {{"json", 'j', &json}, {"summaries", 's', &sums}};
	int done = util_parse_flags(argc, argv, "dump", flags, 2, dump_usage);
	if (done >= 0)
		return done;
	if (optind + 1 != argc) {
		util_err("dump", "%s (stepprof dump --help)",
			 optind >= argc ? "which trace? give one FILE" : "one FILE at a time");
		return SP_EXIT_USAGE;
	}
	const char *path = argv[optind];
	struct sp_reader *r;
	int rc = util_reader_open(path, &r);
	if (rc)
		return rc;
	struct span_window sw = {0};
	if (!sums) {
		rc = util_reader_open(path, &sw.ahead);
		sw.ring = malloc(SPAN_CAP * sizeof(*sw.ring));
		if (!rc && !sw.ring) {
			util_err(path, "out of memory");
			rc = SP_EXIT_INTERNAL;
		}
		if (rc) {
			window_free(&sw);
			sp_reader_close(r);
			return rc;
		}
	}
	struct jsonw w;
	jw_init(&w, stdout, 0);
	if (!json)
		printf("%20s %12s %7s %7s %-15s %-24s %s\n", "begin_ns", "dur_ns", "pid", "tid", "kind", "api",
		       "fields");
	struct sp_event ev;
	size_t pos = 0;
	/* A reader gone (dump | head, SIGPIPE ignored) ends the pass: the rest would go nowhere. */
	while (sums && !ferror(stdout) && sp_reader_summary(r, &pos, &ev)) {
		if (json)
			record_json(&w, r, &ev, NULL);
		else
			record_text(r, &ev, NULL);
	}
	for (uint64_t at = 0; !sums && !ferror(stdout) && sp_reader_next(r, &ev); at++) {
		if (window_fill(&sw, at)) {
			util_err(path, "out of memory");
			rc = SP_EXIT_INTERNAL;
			break;
		}
		const struct span *gs = NULL;
		if (ev.kind != SP_K_GPU_SPAN && ((ev.mask >> SP_F_OP) & 1) && ev.f[SP_F_OP])
			gs = window_get(&sw, ev.pid, (uint32_t)ev.f[SP_F_OP]);
		if (json)
			record_json(&w, r, &ev, gs);
		else
			record_text(r, &ev, gs);
	}
	if (ferror(stdout) || (json && jw_error(&w)))
		rc = util_stdout_failed();
	rc = util_worse(rc, util_report_damage(path, sp_reader_stats(r)));
	sp_reader_close(r);
	window_free(&sw);
	return rc;
}
