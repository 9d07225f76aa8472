/*
 * test_io_helpers.h - shared by the input-capture end-to-end tests
 * (test_io*.c, test_run.c, test_torch.c): run a workload, read every trace
 * file of its directory through `stepprof dump --json`, and count the input
 * records that match a filter.
 *
 * Header-only (static functions) because the suite links every e2e .c file
 * into one binary and these files are the only users.
 */
#ifndef STEPPROF_TEST_IO_HELPERS_H
#define STEPPROF_TEST_IO_HELPERS_H

#include <criterion/criterion.h>
#include <dirent.h>
#include <limits.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "testlib.h"

#define IO_T_UNUSED __attribute__((unused))

/* One input record of `stepprof dump --json`. */
struct io_rec {
	char kind[16], api[32], fd_type[8], source[8];
	int pid, tid;
	uint64_t begin, end, bytes, count;
	int64_t fd, result;
	char *path; /* NULL when none */
};

struct io_recs {
	struct io_rec *v;
	size_t n, cap;
	size_t files; /* trace files read */
};

/* Absolute path of a build output (LD_PRELOAD and exec need one). */
static IO_T_UNUSED char *io_t_abs(const char *rel)
{
	const char *p = sp_t_build(rel);
	char *abs = realpath(p, NULL);
	cr_assert_not_null(abs, "%s does not exist: build it first (make)", p);
	free((void *)p);
	return abs;
}

static IO_T_UNUSED int io_t_is_input_kind(const char *k)
{
	static const char *const kinds[] = { "open", "stat", "read", "close", "listdir", "loader_wait", "lock_wait" };
	for (size_t i = 0; i < sizeof(kinds) / sizeof(kinds[0]); i++)
		if (!strcmp(k, kinds[i]))
			return 1;
	return 0;
}

static IO_T_UNUSED void io_t_copy(char *dst, size_t n, const char *src)
{
	snprintf(dst, n, "%s", src ? src : "");
}

/* Append every input record of one trace file. */
static IO_T_UNUSED void io_t_load_file(const char *file, struct io_recs *rs)
{
	char *stepprof = io_t_abs("bin/stepprof");
	char *argv[] = { stepprof, "dump", "--json", (char *)file, NULL };
	struct sp_t_result res;
	sp_t_run(&res, argv, NULL, NULL, 120);
	cr_assert_eq(res.status, 0, "stepprof dump --json %s failed: %s", file, res.err);
	struct sp_json **lines;
	size_t n = sp_json_parse_lines(res.out, &lines);
	for (size_t i = 0; i < n; i++) {
		struct sp_json *j = lines[i];
		cr_assert_not_null(j, "%s: line %zu of dump --json is not JSON", file, i + 1);
		const char *kind = sp_json_str(j, "kind");
		if (!kind || !io_t_is_input_kind(kind))
			continue;
		if (rs->n == rs->cap) {
			rs->cap = rs->cap ? rs->cap * 2 : 4096;
			rs->v = realloc(rs->v, rs->cap * sizeof(*rs->v));
			cr_assert_not_null(rs->v);
		}
		struct io_rec *r = &rs->v[rs->n++];
		memset(r, 0, sizeof(*r));
		io_t_copy(r->kind, sizeof(r->kind), kind);
		io_t_copy(r->api, sizeof(r->api), sp_json_str(j, "api"));
		io_t_copy(r->fd_type, sizeof(r->fd_type), sp_json_str(j, "fd_type"));
		io_t_copy(r->source, sizeof(r->source), sp_json_str(j, "source"));
		r->pid = (int)sp_json_i64(j, "pid", 0);
		r->tid = (int)sp_json_i64(j, "tid", 0);
		r->begin = sp_json_u64(j, "begin_ns", 0);
		r->end = sp_json_u64(j, "end_ns", 0);
		r->bytes = sp_json_u64(j, "bytes", 0);
		r->count = sp_json_u64(j, "count", 0);
		r->fd = sp_json_i64(j, "fd", -1);
		r->result = sp_json_i64(j, "result", 0);
		const char *path = sp_json_str(j, "path");
		r->path = path ? strdup(path) : NULL;
	}
	sp_json_free_lines(lines, n);
	sp_t_result_free(&res);
	free(stepprof);
	rs->files++;
}

/* Every trace file of a directory (*.sptrace and anything else that is a regular file). */
static IO_T_UNUSED void io_t_load_dir(const char *dir, struct io_recs *rs)
{
	memset(rs, 0, sizeof(*rs));
	DIR *d = opendir(dir);
	if (!d)
		return;
	struct dirent *e;
	char path[PATH_MAX + 256];
	while ((e = readdir(d))) {
		if (e->d_name[0] == '.')
			continue;
		snprintf(path, sizeof(path), "%s/%s", dir, e->d_name);
		io_t_load_file(path, rs);
	}
	closedir(d);
}

static IO_T_UNUSED void io_t_free(struct io_recs *rs)
{
	for (size_t i = 0; i < rs->n; i++)
		free(rs->v[i].path);
	free(rs->v);
	memset(rs, 0, sizeof(*rs));
}

/* A filter: NULL / 0 fields match anything; prefix matches the start of path. */
struct io_filter {
	const char *kind, *api, *prefix, *source, *fd_type;
	int pid;
};

static IO_T_UNUSED int io_t_match(const struct io_rec *r, const struct io_filter *f)
{
	if (f->kind && strcmp(r->kind, f->kind))
		return 0;
	if (f->api && strcmp(r->api, f->api))
		return 0;
	if (f->source && strcmp(r->source, f->source))
		return 0;
	if (f->fd_type && strcmp(r->fd_type, f->fd_type))
		return 0;
	if (f->pid && r->pid != f->pid)
		return 0;
	if (f->prefix && (!r->path || strncmp(r->path, f->prefix, strlen(f->prefix))))
		return 0;
	return 1;
}

/* Number of matching records; *bytes (may be NULL) gets the sum of their bytes. */
static IO_T_UNUSED long io_t_count(const struct io_recs *rs, struct io_filter f, uint64_t *bytes)
{
	long n = 0;
	uint64_t b = 0;
	for (size_t i = 0; i < rs->n; i++)
		if (io_t_match(&rs->v[i], &f)) {
			n++;
			b += rs->v[i].bytes;
		}
	if (bytes)
		*bytes = b;
	return n;
}

/* The workload's ground truth: the last line of its stdout that is a JSON object. */
static IO_T_UNUSED struct sp_json *io_t_truth(const char *out)
{
	const char *last = NULL;
	for (const char *p = out; p && *p; p = strchr(p, '\n') ? strchr(p, '\n') + 1 : NULL)
		if (*p == '{')
			last = p;
	cr_assert_not_null(last, "the workload printed no ground truth: %s", out);
	size_t len = strcspn(last, "\n");
	char *line = strndup(last, len);
	struct sp_json *j = sp_json_parse(line);
	free(line);
	cr_assert_not_null(j, "ground truth is not JSON: %.*s", (int)len, last);
	return j;
}

/* Size of iogen's file i (tests/workloads/iogen.c: 1000 + 97*i bytes). */
static IO_T_UNUSED uint64_t io_t_iogen_size(int i)
{
	return 1000 + 97ull * (uint64_t)i;
}

/* Whether stepprof run may try the eBPF collector here: root and the collector built. */
static IO_T_UNUSED int io_t_bpf_possible(const char **why)
{
	if (geteuid() != 0) {
		*why = "not root";
		return 0;
	}
	char *c = (char *)sp_t_build("bin/stepprof-bpf");
	int ok = access(c, X_OK) == 0;
	free(c);
	if (!ok)
		*why = "build/bin/stepprof-bpf not built";
	return ok;
}

#endif /* STEPPROF_TEST_IO_HELPERS_H */
