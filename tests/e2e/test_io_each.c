/*
 * test_io_each.c - every libc entry point of the input capture, one by one:
 * `iogen each` (tests/workloads/iogen.c) calls each wrapped name the `run`
 * mode does not (the *64 and _FORTIFY_SOURCE names, readv/preadv*, stats of
 * an fd and AT_EMPTY_PATH, the pre-2.33 __xstat family bound by symbol
 * version as an old binary binds it, creat, freopen, getdents64, readdir64,
 * fdopendir, a listing stopped early, and the waits on a pipe and a socket)
 * on files of known size; the trace must hold exactly one record of the right
 * kind, path and bytes per call, and each call must leave errno as it does
 * without the preload. A wrapper that is missing, not exported, records the
 * wrong thing or touches errno fails here by name.
 *
 * Ground truth: the sizes (f000 1000 bytes, f001 1097) and the byte counts
 * are fixed by the workload's construction; the workload also prints what
 * each call returned, and both must agree with the trace.
 */
#include "test_io_helpers.h"

#include <sys/stat.h>

/* Where a record's path must point. */
enum where { F0, F1, NEW0, NEW1, DIRP, NOPATH };

struct expect {
	const char *api, *kind;
	enum where path;
	long count;	     /* records of this api and kind */
	long bytes;	     /* per record: bytes (or count for listdir); -1: the workload's figure only */
	const char *fd_type; /* NULL: not checked */
};

/* f000 = 1000 bytes, f001 = 1097 (iogen setup: 1000 + 97*i). */
static const struct expect each[] = {
    {"open64", "open", F0, 1, 0, NULL},
    {"readv", "read", F0, 1, 600, "file"},
    {"preadv", "read", F0, 1, 100, "file"},
    {"preadv2", "read", F0, 1, 100, "file"},
    {"preadv64", "read", F0, 1, 100, "file"},
    {"preadv64v2", "read", F0, 1, 100, "file"},
    {"pread64", "read", F0, 1, 50, "file"},
    {"__read_chk", "read", F0, 1, 10, "file"},
    {"__pread_chk", "read", F0, 1, 20, "file"},
    {"__pread64_chk", "read", F0, 1, 30, "file"},
    {"fstat64", "stat", F0, 1, 1000, NULL},
    {"fstatat", "stat", F0, 1, 1000, NULL},
    {"statx", "stat", F0, 1, 1000, NULL},
    {"stat64", "stat", F0, 1, 1000, NULL},
    {"lstat64", "stat", F0, 1, 1000, NULL},
    {"fstatat64", "stat", F0, 1, 1000, NULL},
    {"openat", "open", F1, 1, 0, NULL},
    {"openat64", "open", F1, 1, 0, NULL},
    {"__open_2", "open", F1, 1, 0, NULL},
    {"__open64_2", "open", F1, 1, 0, NULL},
    {"__openat_2", "open", F1, 1, 0, NULL},
    {"__openat64_2", "open", F1, 1, 0, NULL},
    {"read", "read", F1, 6, 1097, "file"},
    {"close", "close", F1, 6, 0, "file"},
    /* creat opens write-only: output, no record (io::files_opened_for_writing_are_not_input) */
    {"creat", "open", NEW0, 0, 0, NULL},
    {"creat64", "open", NEW1, 0, 0, NULL},
    {"fopen64", "open", F0, 1, 0, NULL},
    /* three freads of 100 bytes on one stream of f000: the first reads the file's
     * 1000 bytes into the buffer, the next two are served from it (bytes are what a
     * call read from the file: hook_io_stdio.c) */
    {"fread_unlocked", "read", F0, 1, 1000, "file"},
    {"__fread_chk", "read", F0, 1, 0, "file"},
    {"__fread_unlocked_chk", "read", F0, 1, 0, "file"},
    {"freopen", "open", F1, 1, 0, NULL},
    {"fread", "read", F1, 1, 1097, "file"},
    {"freopen64", "open", F0, 1, 0, NULL},
    {"fclose", "close", F0, 1, 0, "file"},
    /* getdents64 to the end: a call with entries, then the one that returns 0 (bytes checked below). */
    {"getdents64", "listdir", DIRP, 2, -1, NULL},
    {"readdir64", "listdir", DIRP, 1, -1, NULL},
    {"readdir", "listdir", DIRP, 1, -1, NULL},
    {"closedir", "listdir", DIRP, 1, -1, NULL},
    /* Waits: the wait, then a read of the 10 bytes that ended it. */
    {"ppoll", "loader_wait", NOPATH, 1, 0, "pipe"},
    {"pselect", "loader_wait", NOPATH, 1, 0, "pipe"},
    {"__poll_chk", "loader_wait", NOPATH, 1, 0, "pipe"},
    {"epoll_pwait", "loader_wait", NOPATH, 1, 0, "pipe"},
    {"recvfrom", "loader_wait", NOPATH, 1, 20, "socket"},
    {"recvmsg", "loader_wait", NOPATH, 1, 30, "socket"},
    {"__recv_chk", "loader_wait", NOPATH, 1, 40, "socket"},
};

/* The pre-2.33 entry points (x86_64 symbol versions): by fd and by path. */
static const struct expect old_xstat[] = {
    {"__fxstat", "stat", F0, 1, 1000, NULL},   {"__fxstat64", "stat", F0, 1, 1000, NULL},
    {"__xstat", "stat", F0, 1, 1000, NULL},    {"__xstat64", "stat", F0, 1, 1000, NULL},
    {"__lxstat", "stat", F0, 1, 1000, NULL},   {"__lxstat64", "stat", F0, 1, 1000, NULL},
    {"__fxstatat", "stat", F0, 1, 1000, NULL}, {"__fxstatat64", "stat", F0, 1, 1000, NULL},
};

static void check(const struct io_recs *rs, const struct expect *x, int pid, char *const paths[],
		  const struct sp_json *t)
{
	long n = 0;
	for (size_t i = 0; i < rs->n; i++) {
		const struct io_rec *r = &rs->v[i];
		if (r->pid != pid || strcmp(r->api, x->api) || strcmp(r->kind, x->kind))
			continue;
		if (x->path != NOPATH && (!r->path || strcmp(r->path, paths[x->path])))
			continue;
		n++;
		/* A wait's result is the number of ready descriptors: the one pipe. */
		int64_t want = !strcmp(x->kind, "loader_wait") && x->bytes == 0 ? 1 : 0;
		cr_expect_eq(r->result, want, "%s: result %lld, expected %lld", x->api, (long long)r->result,
			     (long long)want);
		if (x->fd_type)
			cr_expect_str_eq(r->fd_type, x->fd_type, "%s: fd_type %s, expected %s", x->api, r->fd_type,
					 x->fd_type);
		if (x->bytes >= 0 && strcmp(x->kind, "listdir"))
			cr_expect_eq(r->bytes, (uint64_t)x->bytes, "%s: %llu bytes recorded, the call returned %ld",
				     x->api, (unsigned long long)r->bytes, x->bytes);
	}
	cr_expect_eq(n, x->count, "%s (%s): %ld records with the right path, the workload made %ld calls", x->api,
		     x->kind, n, x->count);
	/* The workload's own figure, where it printed one, agrees with the construction. */
	long said = (long)sp_json_i64(t, x->api, -1);
	if (said >= 0 && x->bytes > 0 && strcmp(x->api, "read") && strcmp(x->api, "fread_unlocked"))
		cr_expect_eq(said, x->bytes, "iogen says %s returned %ld", x->api, said);
}

Test(io, every_wrapped_entry_point_records_once, .timeout = 60)
{
	char *tmp = sp_t_tmpdir("io-each");
	char *iogen = io_t_abs("tests/bin/iogen"), *lib = io_t_abs("lib/libstepprof.so");
	char data[PATH_MAX], trace[PATH_MAX], f0[PATH_MAX + 8], f1[PATH_MAX + 8], n0[PATH_MAX + 8], n1[PATH_MAX + 8];
	snprintf(data, sizeof(data), "%s/data", tmp);
	snprintf(trace, sizeof(trace), "%s/trace", tmp);
	snprintf(f0, sizeof(f0), "%s/f000", data);
	snprintf(f1, sizeof(f1), "%s/f001", data);
	snprintf(n0, sizeof(n0), "%s/new0", data);
	snprintf(n1, sizeof(n1), "%s/new1", data);
	char *paths[] = {f0, f1, n0, n1, data};
	struct sp_t_result res;
	char *setup[] = {iogen, "setup", data, "3", NULL};
	cr_assert_eq(sp_t_run(&res, setup, NULL, NULL, 30), 0, "iogen setup: %s", res.err);
	sp_t_result_free(&res);

	char pre[PATH_MAX + 16], dir[PATH_MAX + 16];
	snprintf(pre, sizeof(pre), "LD_PRELOAD=%s", lib);
	snprintf(dir, sizeof(dir), "STEPPROF_DIR=%s", trace);
	char *env[] = {pre, dir, "STEPPROF_IO=libc", NULL};
	char *argv[] = {iogen, "each", data, "3", NULL};
	cr_assert_eq(sp_t_run(&res, argv, env, NULL, 60), 0, "iogen each: %s", res.err);
	struct sp_json *t = io_t_truth(res.out);
	sp_t_result_free(&res);
	int pid = (int)sp_json_i64(t, "pid", 0);
	cr_assert_gt(pid, 0);

	/*
	 * errno as each call left it, under the preload and without: the same (hot-path
	 * rule). Also with a trace directory that cannot be made: the first record's
	 * failed file creation must not leak its errno into the program, which runs on.
	 */
	char *plain_argv[] = { iogen, "each", data, "3", NULL };
	cr_assert_eq(sp_t_run(&res, plain_argv, NULL, NULL, 60), 0, "iogen each (plain): %s", res.err);
	struct sp_json *plain = io_t_truth(res.out);
	sp_t_result_free(&res);
	char *bad_env[] = { pre, "STEPPROF_DIR=/proc/stepprof-cannot-be-made", "STEPPROF_IO=libc", NULL };
	cr_assert_eq(sp_t_run(&res, argv, bad_env, NULL, 60), 0, "iogen each (unwritable dir): %s", res.err);
	struct sp_json *unwritable = io_t_truth(res.out);
	sp_t_result_free(&res);
	size_t compared = 0;
	for (size_t i = 0; i < plain->n; i++) {
		const struct sp_json *k = &plain->kids[i];
		if (!k->key || strncmp(k->key, "errno_", 6))
			continue;
		long want = (long)k->num, got = (long)sp_json_i64(t, k->key, -1);
		cr_expect_eq(got, want, "%s: errno %ld under the preload, %ld without", k->key + 6, got, want);
		got = (long)sp_json_i64(unwritable, k->key, -1);
		cr_expect_eq(got, want, "%s: errno %ld with an unwritable trace directory, %ld without", k->key + 6, got,
			     want);
		compared++;
	}
	cr_expect_geq(compared, sizeof(each) / sizeof(each[0]) - 8, "only %zu errno figures", compared);
	sp_json_free(plain);
	sp_json_free(unwritable);

	struct io_recs rs;
	io_t_load_dir(trace, &rs);
	for (size_t i = 0; i < sizeof(each) / sizeof(each[0]); i++)
		check(&rs, &each[i], pid, paths, t);
	if (sp_json_i64(t, "old_xstat", 0))
		for (size_t i = 0; i < sizeof(old_xstat) / sizeof(old_xstat[0]); i++)
			check(&rs, &old_xstat[i], pid, paths, t);
	else
		sp_t_note("the __xstat family is checked on x86_64 only");

	/* Listings: count = bytes of entries (sum of d_reclen), as the workload summed them. */
	static const char *const lists[] = {"getdents64", "readdir64", "readdir", "closedir"};
	for (size_t k = 0; k < 4; k++) {
		uint64_t sum = 0;
		for (size_t i = 0; i < rs.n; i++)
			if (rs.v[i].pid == pid && !strcmp(rs.v[i].kind, "listdir") && !strcmp(rs.v[i].api, lists[k]))
				sum += rs.v[i].count;
		long said = (long)sp_json_i64(t, lists[k], -1);
		cr_expect_gt(said, 0, "iogen printed no %s figure", lists[k]);
		cr_expect_eq(sum, (uint64_t)said, "%s: count %llu, the listing returned %ld bytes of entries", lists[k],
			     (unsigned long long)sum, said);
	}
	/* The reads that ended each pipe wait: readv and 3 x read of 10 bytes, all loader waits. */
	uint64_t b;
	cr_expect_eq(
	    io_t_count(&rs, (struct io_filter){.kind = "loader_wait", .api = "readv", .pid = pid, .fd_type = "pipe"},
		       &b),
	    1);
	cr_expect_eq(b, 10);
	cr_expect_eq(io_t_count(&rs,
				(struct io_filter){.kind = "loader_wait", .api = "read", .pid = pid, .fd_type = "pipe"},
				&b),
		     3);
	cr_expect_eq(b, 30);
	/* Nothing on the pipe or the socket counted as file input. */
	cr_expect_eq(io_t_count(&rs, (struct io_filter){.kind = "read", .pid = pid, .fd_type = "pipe"}, NULL), 0);
	cr_expect_eq(io_t_count(&rs, (struct io_filter){.kind = "read", .pid = pid, .fd_type = "socket"}, NULL), 0);

	io_t_free(&rs);
	sp_json_free(t);
	free(iogen), free(lib);
	sp_t_rmrf(tmp);
	free(tmp);
}

/*
 * stdio reads (iogen stdio): a 28,000-byte text file read to its end by each
 * stdio function on a stream of its own. Every function's records hold what it
 * read from the file: they sum to the file's size, one record per refill of the
 * 4 KiB buffer (plus the one that meets the end of the file) for the per-line
 * and per-character ones, not one per line; fgets then fread on one stream read
 * each byte once; __underflow fills one buffer. Were fread alone recorded (with
 * what the program received), a file read by fgets, getline, fgetc or fscanf
 * would be opened and never read as far as the trace could tell. The program
 * prints the same with and without the preload; with STEPPROF_IO=off nothing.
 */
/* Records of api on exactly path (pid's): their number, *bytes their sum. */
static long stdio_sum(const struct io_recs *rs, int pid, const char *api, const char *path, uint64_t *bytes)
{
	long n = 0;
	*bytes = 0;
	for (size_t i = 0; i < rs->n; i++) {
		const struct io_rec *r = &rs->v[i];
		if (r->pid == pid && !strcmp(r->kind, "read") && !strcmp(r->api, api) && r->path && !strcmp(r->path, path)) {
			n++;
			*bytes += r->bytes;
		}
	}
	return n;
}

static void stdio_run(const char *iogen, const char *lib, const char *data, const char *trace, const char *mode,
		      struct sp_json **out)
{
	char pre[PATH_MAX + 16], dir[PATH_MAX + 16], io[64];
	snprintf(pre, sizeof(pre), "LD_PRELOAD=%s", lib);
	snprintf(dir, sizeof(dir), "STEPPROF_DIR=%s", trace);
	snprintf(io, sizeof(io), "STEPPROF_IO=%s", mode ? mode : "libc");
	char *env[] = {pre, dir, io, NULL};
	char *argv[] = {(char *)iogen, "stdio", (char *)data, "1", NULL};
	struct sp_t_result res;
	cr_assert_eq(sp_t_run(&res, argv, mode && !strcmp(mode, "plain") ? NULL : env, NULL, 60), 0, "iogen stdio: %s",
		     res.err);
	*out = io_t_truth(res.out);
	sp_t_result_free(&res);
}

Test(io, stdio_reads_record_what_they_read_from_the_file, .timeout = 60)
{
	static const char *const names[] = {"fgets",   "fgets_unlocked", "__fgets_chk",   "getline",
					    "getdelim", "__getdelim",	  "fgetc",	   "getc",
					    "_IO_getc", "fgetc_unlocked", "getc_unlocked", "__uflow",
					    "__isoc99_fscanf", "__isoc99_vfscanf", "fscanf", "vfscanf"};
	char *tmp = sp_t_tmpdir("io-stdio");
	char *iogen = io_t_abs("tests/bin/iogen"), *lib = io_t_abs("lib/libstepprof.so");
	char data[PATH_MAX], trace[PATH_MAX], off[PATH_MAX], text[PATH_MAX + 8], text2[PATH_MAX + 8];
	snprintf(data, sizeof(data), "%s/data", tmp);
	snprintf(trace, sizeof(trace), "%s/trace", tmp);
	snprintf(off, sizeof(off), "%s/off", tmp);
	snprintf(text, sizeof(text), "%s/text", data);
	snprintf(text2, sizeof(text2), "%s/text2", data);
	cr_assert_eq(mkdir(data, 0700), 0);
	struct sp_json *t, *plain, *t_off;
	stdio_run(iogen, lib, data, trace, NULL, &t);
	stdio_run(iogen, lib, data, trace, "plain", &plain);
	stdio_run(iogen, lib, data, off, "off", &t_off);
	long size = (long)sp_json_i64(t, "size", 0), blk = (long)sp_json_i64(t, "blksize", 0);
	cr_assert_eq(size, 28000);
	cr_assert_gt(blk, 0);
	/* the program's own figures: the same with and without the preload */
	for (size_t i = 0; i < plain->n; i++) {
		const struct sp_json *k = &plain->kids[i];
		if (k->key && strcmp(k->key, "pid"))
			cr_expect_eq(sp_json_i64(t, k->key, -1), (int64_t)k->num, "%s: %lld under the preload, %lld without",
				     k->key, (long long)sp_json_i64(t, k->key, -1), (long long)k->num);
	}
	int pid = (int)sp_json_i64(t, "pid", 0);
	struct io_recs rs;
	io_t_load_dir(trace, &rs);
	/* one call of getdelim with no space in the file takes it whole: one record */
	long refills = (size + blk - 1) / blk;
	for (size_t k = 0; k < sizeof(names) / sizeof(names[0]); k++) {
		long n = 0;
		uint64_t sum = 0;
		for (size_t i = 0; i < rs.n; i++) {
			const struct io_rec *r = &rs.v[i];
			if (r->pid != pid || strcmp(r->api, names[k]) || !r->path || strcmp(r->path, text))
				continue;
			n++;
			sum += r->bytes;
			cr_expect_str_eq(r->kind, "read", "%s: a %s record", names[k], r->kind);
			cr_expect_str_eq(r->fd_type, "file", "%s: fd_type %s", names[k], r->fd_type);
			cr_expect_eq(r->result, 0, "%s: result %lld", names[k], (long long)r->result);
		}
		cr_expect_eq(sum, (uint64_t)size, "%s: %llu bytes in its records, the file has %ld", names[k],
			     (unsigned long long)sum, size);
		if (!strcmp(names[k], "getdelim"))
			cr_expect_eq(n, 1, "getdelim: %ld records", n);
		else
			cr_expect(n >= refills && n <= refills + 1, "%s: %ld records for %ld buffers of %ld bytes", names[k],
				  n, refills, blk);
	}
	/* __underflow fills one buffer and takes nothing; fread reads the rest */
	uint64_t b = 0, bf = 0;
	cr_expect_eq(stdio_sum(&rs, pid, "__underflow", text, &b), 1);
	cr_expect_eq(b, (uint64_t)(blk < size ? blk : size));
	stdio_sum(&rs, pid, "fread", text, &bf);
	cr_expect_eq(b + bf, (uint64_t)size, "__underflow %llu + fread %llu bytes of %ld", (unsigned long long)b,
		     (unsigned long long)bf, size);
	/* all 17 readings of text, as the eBPF collector sums its read syscalls
	 * (bpf::stdio_reads_sum_to_what_the_libc_wrappers_record) */
	uint64_t all = 0;
	for (size_t i = 0; i < rs.n; i++)
		if (rs.v[i].pid == pid && !strcmp(rs.v[i].kind, "read") && rs.v[i].path && !strcmp(rs.v[i].path, text))
			all += rs.v[i].bytes;
	cr_expect_eq(all, 17 * (uint64_t)size, "%llu bytes read from %s, 17 x %ld", (unsigned long long)all, text, size);
	/* fgets then fread on text2: each byte once */
	cr_expect_eq(stdio_sum(&rs, pid, "fgets", text2, &b), 1);
	stdio_sum(&rs, pid, "fread", text2, &bf);
	cr_expect_eq(b + bf, (uint64_t)size, "fgets %llu + fread %llu bytes of %ld", (unsigned long long)b,
		     (unsigned long long)bf, size);
	io_t_free(&rs);
	/* STEPPROF_IO=off: no input record at all */
	io_t_load_dir(off, &rs);
	cr_expect_eq(io_t_count(&rs, (struct io_filter){.kind = "read"}, NULL), 0);
	io_t_free(&rs);
	sp_json_free(t);
	sp_json_free(plain);
	sp_json_free(t_off);
	sp_t_rmrf(tmp);
	free(tmp);
	free(iogen);
	free(lib);
}
