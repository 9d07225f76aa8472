/*
 * test_io_limits.c - input calls the libc wrappers once missed or miscounted
 * (docs/input-capture.md, "Known limits"): a recv that only peeks, a datagram
 * cut by MSG_TRUNC, recvmmsg, epoll_pwait2, a file read by sendfile or
 * copy_file_range (shutil.copyfile), and directories listed by scandir or
 * walked by nftw.
 *
 * Ground truth: tests/workloads/iolimits.c prints what each call returned and
 * what it really took; the sizes and byte counts are fixed by its construction.
 */
#include "test_io_helpers.h"

#include <sys/stat.h>

struct lim_env {
	char *tmp, *bin, *lib;
	char trace[PATH_MAX], data[PATH_MAX];
};

/* `iolimits MODE DIR` under the preload with STEPPROF_IO=io: its truth, and the trace's records in *rs. */
static struct sp_json *lim_run_io(struct lim_env *e, const char *mode, const char *io, struct io_recs *rs)
{
	e->tmp = sp_t_tmpdir("io-limits");
	e->bin = io_t_abs("tests/bin/iolimits");
	e->lib = io_t_abs("lib/libstepprof.so");
	snprintf(e->trace, sizeof(e->trace), "%s/trace", e->tmp);
	snprintf(e->data, sizeof(e->data), "%s/data", e->tmp);
	cr_assert_eq(mkdir(e->data, 0700), 0);
	for (int i = 0; i < 5; i++) {
		char p[PATH_MAX + 16];
		snprintf(p, sizeof(p), "%s/%c%d", e->data, i < 3 ? 'f' : 'g', i);
		FILE *f = fopen(p, "w");
		cr_assert_not_null(f);
		fprintf(f, "%d\n", i);
		fclose(f);
	}
	char pre[PATH_MAX + 16], dir[PATH_MAX + 16], iomode[64];
	snprintf(pre, sizeof(pre), "LD_PRELOAD=%s", e->lib);
	snprintf(dir, sizeof(dir), "STEPPROF_DIR=%s", e->trace);
	snprintf(iomode, sizeof(iomode), "STEPPROF_IO=%s", io);
	char *env[] = { pre, dir, iomode, NULL };
	char *argv[] = { e->bin, (char *)mode, e->data, NULL };
	struct sp_t_result res;
	int st = sp_t_run(&res, argv, env, NULL, 60);
	cr_assert_eq(st, 0, "iolimits %s under the preload exited %d: %s", mode, st, res.err);
	struct sp_json *t = io_t_truth(res.out);
	sp_t_result_free(&res);
	io_t_load_dir(e->trace, rs);
	return t;
}

static struct sp_json *lim_run(struct lim_env *e, const char *mode, struct io_recs *rs)
{
	return lim_run_io(e, mode, "libc", rs);
}

static void lim_fini(struct lim_env *e, struct sp_json *t, struct io_recs *rs)
{
	io_t_free(rs);
	sp_json_free(t);
	sp_t_rmrf(e->tmp);
	free(e->tmp), free(e->bin), free(e->lib);
}

/* e for a command of the test's own (no iolimits): a fresh e->tmp, e->trace in it. */
static void lim_env_own(struct lim_env *e, const char *tag);

/* The same for a script of /usr/bin/python3 (the test skips without it). */
static void lim_env_python(struct lim_env *e, const char *tag)
{
	if (access("/usr/bin/python3", X_OK) != 0)
		cr_skip_test("/usr/bin/python3 not installed");
	lim_env_own(e, tag);
}

static void lim_env_own(struct lim_env *e, const char *tag)
{
	e->tmp = sp_t_tmpdir(tag);
	e->bin = NULL;
	e->lib = io_t_abs("lib/libstepprof.so");
	snprintf(e->trace, sizeof(e->trace), "%s/trace", e->tmp);
}

/* argv under the preload (STEPPROF_IO=libc, e->trace), exit 0 asserted: its truth when it prints one, the records in *rs. */
static struct sp_json *lim_run_argv(struct lim_env *e, char *argv[], struct io_recs *rs)
{
	char pre[PATH_MAX + 16], dir[PATH_MAX + 16];
	snprintf(pre, sizeof(pre), "LD_PRELOAD=%s", e->lib);
	snprintf(dir, sizeof(dir), "STEPPROF_DIR=%s", e->trace);
	char *env[] = { pre, dir, "STEPPROF_IO=libc", NULL };
	struct sp_t_result res;
	cr_assert_eq(sp_t_run(&res, argv, env, NULL, 60), 0, "%s: %s", argv[0], res.err);
	struct sp_json *t = strchr(res.out, '{') ? io_t_truth(res.out) : NULL;
	sp_t_result_free(&res);
	io_t_load_dir(e->trace, rs);
	return t;
}

static long tnum(const struct sp_json *t, const char *key)
{
	long v = (long)sp_json_i64(t, key, -1);
	cr_assert_geq(v, 0, "the workload did not say %s", key);
	return v;
}

/*
 * The records that match f and, unless fd is -1, are on fd: how many; the sum
 * of their bytes in *bytes and the last one in *last (either may be NULL).
 */
static long matching(const struct io_recs *rs, struct io_filter f, long fd, uint64_t *bytes,
		     const struct io_rec **last)
{
	long n = 0;
	uint64_t b = 0;
	for (size_t i = 0; i < rs->n; i++) {
		const struct io_rec *r = &rs->v[i];
		if (!io_t_match(r, &f) || (fd >= 0 && r->fd != fd))
			continue;
		n++;
		b += r->bytes;
		if (last)
			*last = r;
	}
	if (bytes)
		*bytes = b;
	return n;
}

/* The records of process pid with this api on fd; their bytes in *bytes. */
static long on_fd(const struct io_recs *rs, int pid, const char *api, long fd, uint64_t *bytes)
{
	return matching(rs, (struct io_filter){ .pid = pid, .api = api }, fd, bytes, NULL);
}

/*
 * A peek takes nothing: the bytes are taken (and counted) by the next call.
 * recv(MSG_PEEK) then recv must not count the same 64 bytes twice (128), nor a
 * 100-byte datagram received into 10 bytes with MSG_TRUNC count 100.
 */
Test(io, a_peek_takes_no_bytes_and_a_cut_datagram_counts_what_was_received, .timeout = 60)
{
	struct lim_env e;
	struct io_recs rs;
	struct sp_json *t = lim_run(&e, "recv", &rs);
	int pid = (int)tnum(t, "pid");
	long sfd = tnum(t, "stream_fd"), dfd = tnum(t, "dgram_fd");
	cr_assert_eq(tnum(t, "peek1"), 64);
	cr_assert_eq(tnum(t, "take1"), 64);
	cr_assert_eq(tnum(t, "trunc1"), 100, "MSG_TRUNC returns the datagram's length");
	uint64_t b;
	cr_expect_eq(on_fd(&rs, pid, "recv", sfd, &b), 2, "the peek and the take are both waits");
	cr_expect_eq(b, (uint64_t)tnum(t, "take1"), "recv on the stream: %llu bytes, %ld taken",
		     (unsigned long long)b, tnum(t, "take1"));
	cr_expect_eq(on_fd(&rs, pid, "recvmsg", sfd, &b), 1);
	cr_expect_eq(b, 0, "recvmsg(MSG_PEEK) took nothing, %llu bytes recorded", (unsigned long long)b);
	cr_expect_eq(on_fd(&rs, pid, "recvfrom", sfd, &b), 1);
	cr_expect_eq(b, (uint64_t)tnum(t, "take2"));
	long cap = tnum(t, "trunc_buf");
	cr_expect_eq(on_fd(&rs, pid, "recv", dfd, &b), 1);
	cr_expect_eq(b, (uint64_t)cap, "recv(MSG_TRUNC) of a %ld-byte datagram into %ld bytes: %llu recorded",
		     tnum(t, "trunc1"), cap, (unsigned long long)b);
	cr_expect_eq(on_fd(&rs, pid, "recvmsg", dfd, &b), 1);
	cr_expect_eq(b, (uint64_t)cap, "recvmsg(MSG_TRUNC) of a %ld-byte datagram into %ld bytes: %llu recorded",
		     tnum(t, "trunc2"), cap, (unsigned long long)b);
	lim_fini(&e, t, &rs);
}

/* Unrecorded, a trainer receiving its batches by recvmmsg or waiting in epoll_pwait2 would show no input. */
Test(io, recvmmsg_and_epoll_pwait2_are_loader_waits, .timeout = 60)
{
	struct lim_env e;
	struct io_recs rs;
	struct sp_json *t = lim_run(&e, "recv", &rs);
	int pid = (int)tnum(t, "pid");
	cr_assert_eq(tnum(t, "mm_msgs"), 3);
	cr_assert_eq(tnum(t, "mm_bytes"), 60);
	struct io_filter f = { .kind = "loader_wait", .pid = pid, .api = "recvmmsg", .fd_type = "socket" };
	uint64_t b;
	cr_expect_eq(io_t_count(&rs, f, &b), 1, "one recvmmsg call");
	cr_expect_eq(b, (uint64_t)tnum(t, "mm_bytes"), "recvmmsg: %llu bytes recorded, 60 received",
		     (unsigned long long)b);
	f.api = "epoll_pwait2";
	f.fd_type = "pipe";
	cr_expect_eq(io_t_count(&rs, f, NULL), 1, "one epoll_pwait2 on an epoll set holding a pipe");
	for (size_t i = 0; i < rs.n; i++)
		if (io_t_match(&rs.v[i], &f)) {
			cr_expect_eq(rs.v[i].fd, tnum(t, "epoll_fd"));
			cr_expect_eq(rs.v[i].result, tnum(t, "ready"), "a wait's result is the number ready");
		}
	lim_fini(&e, t, &rs);
}

/*
 * shutil.copyfile copies with sendfile (Python 3.8+), os.copy_file_range and
 * cp with copy_file_range: the source is read by the kernel for the program.
 * Unrecorded, they would leave a Dataset that copies its files to local disk
 * reading nothing. The eBPF collector does not trace them either, so they are
 * recorded with STEPPROF_IO=bpf too, where open and read are the collector's.
 */
static void check_copy(const char *io)
{
	struct lim_env e;
	struct io_recs rs;
	struct sp_json *t = lim_run_io(&e, "copy", io, &rs);
	int pid = (int)tnum(t, "pid");
	const char *src = sp_json_str(t, "src");
	cr_assert_not_null(src);
	long size = tnum(t, "size");
	cr_assert_eq(tnum(t, "sendfile_bytes"), size);
	cr_assert_eq(tnum(t, "copy_file_range_bytes"), size);
	struct io_filter f = { .kind = "read", .pid = pid, .api = "sendfile", .prefix = src, .fd_type = "file" };
	uint64_t b;
	cr_expect_eq(io_t_count(&rs, f, &b), tnum(t, "sendfile_calls"), "%s: a read record per sendfile call", io);
	cr_expect_eq(b, (uint64_t)size, "%s: sendfile: %llu bytes recorded, %ld read", io, (unsigned long long)b,
		     size);
	f.api = "copy_file_range";
	cr_expect_eq(io_t_count(&rs, f, &b), tnum(t, "copy_file_range_calls"),
		     "%s: a read record per copy_file_range call", io);
	cr_expect_eq(b, (uint64_t)size, "%s: copy_file_range: %llu bytes recorded, %ld read", io,
		     (unsigned long long)b, size);
	lim_fini(&e, t, &rs);
}

Test(io, sendfile_and_copy_file_range_read_their_source, .timeout = 60)
{
	check_copy("libc");
	check_copy("bpf");
}

/* The listdir records of process pid and api for path (or a path under it): how many; the last one's count and result. */
static long listdir_of(const struct io_recs *rs, int pid, const char *api, const char *path, uint64_t *count,
		       int64_t *result)
{
	const struct io_rec *r = NULL;
	long n = matching(rs, (struct io_filter){ .kind = "listdir", .pid = pid, .api = api, .prefix = path }, -1,
			  NULL, &r);
	if (r) {
		*count = r->count;
		*result = r->result;
	}
	return n;
}

/*
 * scandir reads its directory with glibc's internal opendir/readdir, which the
 * wrappers do not see: a scandir is one listdir per call (rather than no record
 * at all), counting the bytes of every entry read (those a filter rejects too),
 * and what the program's filter does meanwhile is recorded as well.
 */
Test(io, scandir_is_one_listdir_and_its_filter_input_is_recorded, .timeout = 60)
{
	struct lim_env e;
	struct io_recs rs;
	struct sp_json *t = lim_run(&e, "scandir", &rs);
	int pid = (int)tnum(t, "pid");
	cr_assert_eq(tnum(t, "scandir_entries"), 7, "5 files, . and ..");
	cr_assert_eq(tnum(t, "scandir64_seen"), 7);
	cr_assert_eq(tnum(t, "scandir64_kept"), 3);
	uint64_t count = 0;
	int64_t result = 0;
	cr_expect_eq(listdir_of(&rs, pid, "scandir", e.data, &count, &result), 1);
	cr_expect_eq(count, (uint64_t)tnum(t, "scandir_bytes"));
	cr_expect_eq(result, 0);
	cr_expect_eq(listdir_of(&rs, pid, "scandir64", e.data, &count, &result), 1);
	cr_expect_eq(count, (uint64_t)tnum(t, "scandir64_bytes"), "scandir64: %llu bytes, its filter saw %ld",
		     (unsigned long long)count, tnum(t, "scandir64_bytes"));
	cr_expect_eq(listdir_of(&rs, pid, "scandirat", e.data, &count, &result), 1);
	cr_expect_eq(count, (uint64_t)tnum(t, "scandirat_bytes"));
	cr_expect_eq(listdir_of(&rs, pid, "scandir", "/nonexistent-iolimits", &count, &result), 1,
		     "a scandir that fails is recorded with its error");
	cr_expect_eq(result, -tnum(t, "bad_errno"));
	char prefix[PATH_MAX + 2];
	snprintf(prefix, sizeof(prefix), "%s/", e.data);
	struct io_filter f = { .kind = "stat", .pid = pid, .prefix = prefix };
	cr_expect_eq(io_t_count(&rs, f, NULL), tnum(t, "filter_stats"), "the stats made by scandir64's filter");
	lim_fini(&e, t, &rs);
}

/*
 * nftw reads and stats with glibc's internal calls, which the wrappers do not
 * see: a walk is a stat per entry called back (st_size, path) and a listdir per
 * directory (rather than no record at all), whose count is what getdents64
 * returned for it (the workload lists each directory again with the raw
 * syscall), and the files the callback reads are read records as any read is,
 * not counted twice.
 */
Test(io, nftw_is_a_stat_per_entry_and_a_listdir_per_directory, .timeout = 60)
{
	struct lim_env e;
	struct io_recs rs;
	struct sp_json *t = lim_run(&e, "nftw", &rs);
	int pid = (int)tnum(t, "pid");
	const char *root = sp_json_str(t, "root");
	cr_assert_not_null(root);
	long walks = tnum(t, "walks");
	cr_assert_eq(tnum(t, "entries"), 8, "t, a1, a2, sub, b1, b2, b3, empty");
	cr_assert_eq(tnum(t, "entries_total"), walks * 8);
	uint64_t b;
	struct io_filter f = { .kind = "stat", .pid = pid, .api = "nftw", .prefix = root };
	cr_expect_eq(io_t_count(&rs, f, &b), tnum(t, "entries_total"), "a stat per entry called back");
	cr_expect_eq(b, (uint64_t)tnum(t, "sizes_total"), "their st_size: %llu recorded, %ld called back",
		     (unsigned long long)b, tnum(t, "sizes_total"));
	static const char *const dirs[] = { "", "/sub", "/empty" };
	for (int i = 0; i < 3; i++) {
		char path[PATH_MAX + 16], key[16];
		snprintf(path, sizeof(path), "%s%s", root, dirs[i]);
		snprintf(key, sizeof(key), "dents_%d", i);
		long n = 0;
		for (size_t k = 0; k < rs.n; k++) {
			const struct io_rec *r = &rs.v[k];
			if (r->pid != pid || strcmp(r->kind, "listdir") || strcmp(r->api, "nftw") || !r->path ||
			    strcmp(r->path, path))
				continue;
			n++;
			cr_expect_eq(r->count, (uint64_t)tnum(t, key), "listdir of %s: %llu bytes, getdents64 returned %ld",
				     path, (unsigned long long)r->count, tnum(t, key));
		}
		cr_expect_eq(n, walks, "%s: %ld listdir records, %ld walks", path, n, walks);
	}
	f = (struct io_filter){ .kind = "listdir", .pid = pid, .api = "nftw" };
	cr_expect_eq(io_t_count(&rs, f, NULL), walks * 3, "a listdir per directory, no more");
	f = (struct io_filter){ .kind = "read", .pid = pid, .api = "read", .prefix = root };
	cr_expect_eq(io_t_count(&rs, f, &b), tnum(t, "reads"), "the callback's reads");
	cr_expect_eq(b, (uint64_t)tnum(t, "read_bytes"));
	lim_fini(&e, t, &rs);
}

/*
 * open() guesses an fd's type without a syscall, so the program's own fstat
 * (Python's open() makes one) tells the fd table: otherwise a FIFO opened by its
 * path would be a `file` for its whole life, its reads `read` records (a loader
 * handing batches through a named pipe would show no loader wait), and a
 * directory opened without O_DIRECTORY (Python's os.open) a `file`.
 */
Test(io, an_fstat_tells_a_fifo_or_a_directory_opened_by_path, .timeout = 60)
{
	struct lim_env e;
	struct io_recs rs;
	struct sp_json *t = lim_run(&e, "fifo", &rs);
	int pid = (int)tnum(t, "pid");
	cr_assert_eq(tnum(t, "writer_ok"), 1);
	cr_assert_eq(tnum(t, "fifo_bytes"), 300);
	long fd = tnum(t, "fifo_fd");
	uint64_t b;
	struct io_filter f = { .kind = "loader_wait", .pid = pid, .api = "read", .fd_type = "pipe" };
	cr_expect_eq(matching(&rs, f, fd, &b, NULL), tnum(t, "fifo_reads"), "the FIFO's reads are loader waits");
	cr_expect_eq(b, (uint64_t)tnum(t, "fifo_bytes"));
	f = (struct io_filter){ .kind = "read", .pid = pid };
	cr_expect_eq(matching(&rs, f, fd, NULL, NULL), 0, "no read record of a file on the FIFO's fd");
	cr_assert_eq(tnum(t, "is_dir"), 1);
	f = (struct io_filter){ .kind = "close", .pid = pid, .prefix = e.data, .fd_type = "dir" };
	cr_expect_eq(matching(&rs, f, tnum(t, "dir_fd"), NULL, NULL), 1, "the directory's close says dir");
	lim_fini(&e, t, &rs);
}

/*
 * The Python way: shutil.copyfile binds sendfile64 (Python is built with
 * _FILE_OFFSET_BITS=64), the name the C workload above does not call: unwrapped,
 * a 100000-byte copy would record no read of its source.
 */
Test(io, shutil_copyfile_reads_its_source, .timeout = 60)
{
	struct lim_env e;
	struct io_recs rs;
	lim_env_python(&e, "io-limits-py");
	static const char script[] = "import json, os, shutil, sys\n"
				     "d = sys.argv[1]\n"
				     "src = os.path.join(d, 'src')\n"
				     "with open(src, 'wb') as f:\n"
				     "    f.write(b'y' * 100000)\n"
				     "shutil.copyfile(src, os.path.join(d, 'dst'))\n"
				     "print(json.dumps({'pid': os.getpid(), 'src': src,\n"
				     "                  'size': os.path.getsize(os.path.join(d, 'dst'))}))\n";
	char *argv[] = { "/usr/bin/python3", "-c", (char *)script, e.tmp, NULL };
	struct sp_json *t = lim_run_argv(&e, argv, &rs);
	cr_assert_eq(tnum(t, "size"), 100000);
	struct io_filter f = { .kind = "read", .pid = (int)tnum(t, "pid"), .prefix = sp_json_str(t, "src") };
	uint64_t b;
	cr_expect_geq(io_t_count(&rs, f, &b), 1);
	cr_expect_eq(b, 100000, "shutil.copyfile: %llu bytes of its source recorded, 100000 copied",
		     (unsigned long long)b);
	lim_fini(&e, t, &rs);
}

/*
 * A vfork()ed child runs on its parent's memory until it execs: its dup2 and
 * close_range are done to the parent's fd table, and must leave its entries
 * alone: the child's close_range(3, ~0U) would wipe every entry of the parent
 * (its epoll fd not a wait for loader data: the epoll_wait after it no record
 * at all), and its dup2 of a socket onto a file's number would make the
 * parent's reads of that file loader waits on a socket, without a path.
 */
Test(io, a_vfork_child_leaves_the_parents_fd_table_alone, .timeout = 60)
{
	struct lim_env e;
	struct io_recs rs;
	struct sp_json *t = lim_run(&e, "vfork", &rs);
	int pid = (int)tnum(t, "pid");
	cr_assert_eq(tnum(t, "child_ok"), 1, "the vfork child did not run /bin/true");
	cr_assert_eq(tnum(t, "ready"), 1);
	cr_assert_eq(tnum(t, "taken"), 1);
	struct io_filter f = { .kind = "loader_wait", .pid = pid, .api = "epoll_wait", .fd_type = "socket" };
	cr_expect_eq(matching(&rs, f, tnum(t, "ep_fd"), NULL, NULL), 1, "the epoll_wait after the vfork is a loader wait");
	char p1[PATH_MAX + 8];
	snprintf(p1, sizeof(p1), "%s/f1", e.data);
	uint64_t b;
	f = (struct io_filter){ .kind = "read", .pid = pid, .api = "read", .fd_type = "file", .prefix = p1 };
	cr_expect_eq(matching(&rs, f, tnum(t, "f1_fd"), &b, NULL), tnum(t, "f1_reads"),
		     "f1's reads are file reads of f1");
	cr_expect_eq(b, (uint64_t)tnum(t, "f1_bytes"));
	f = (struct io_filter){ .kind = "loader_wait", .pid = pid, .api = "read" };
	cr_expect_eq(matching(&rs, f, tnum(t, "f1_fd"), NULL, NULL), 0, "no loader wait on f1's number");
	f = (struct io_filter){ .kind = "read", .pid = pid, .api = "read", .fd_type = "file" };
	cr_expect_eq(matching(&rs, f, tnum(t, "f0_fd"), &b, NULL), tnum(t, "f0_reads"));
	cr_expect_eq(b, (uint64_t)tnum(t, "f0_bytes"));
	lim_fini(&e, t, &rs);
}

/*
 * A descriptor the wrappers did not see born (received over a Unix socket, as
 * a DataLoader worker hands tensor storage to the trainer; inherited across
 * exec) is looked up at its first use, an fstat or an fclose too: PyTorch's
 * trainer fstats every storage fd it receives, and each such stat would have
 * no path; an fclose would say `other`, without a path.
 */
Test(io, the_first_fstat_or_fclose_of_a_received_fd_names_its_file, .timeout = 60)
{
	struct lim_env e;
	struct io_recs rs;
	struct sp_json *t = lim_run(&e, "passfd", &rs);
	int pid = (int)tnum(t, "pid");
	char p0[PATH_MAX + 8], p1[PATH_MAX + 8];
	snprintf(p0, sizeof(p0), "%s/f0", e.data);
	snprintf(p1, sizeof(p1), "%s/f1", e.data);
	const struct io_rec *last = NULL;
	struct io_filter f = { .kind = "stat", .pid = pid, .api = "fstat" };
	cr_assert_eq(matching(&rs, f, tnum(t, "g0_fd"), NULL, &last), 1, "one fstat of the received fd");
	cr_expect(last->path && !strcmp(last->path, p0), "the fstat of the received fd: path %s, expected %s",
		  last->path ? last->path : "(none)", p0);
	cr_expect_eq(last->bytes, (uint64_t)tnum(t, "g0_size"));
	f = (struct io_filter){ .kind = "close", .pid = pid, .api = "fclose" };
	cr_assert_eq(matching(&rs, f, tnum(t, "g1_fd"), NULL, &last), 1, "one fclose of the received fd");
	cr_expect(last->path && !strcmp(last->path, p1), "the fclose of the received fd: path %s, expected %s",
		  last->path ? last->path : "(none)", p1);
	cr_expect_str_eq(last->fd_type, "file");
	lim_fini(&e, t, &rs);
}

/*
 * The alarm-and-jump timeout: a SIGALRM handler leaves a blocking read with
 * siglongjmp. The thread's depth counter must not stay raised, leaving nothing
 * it does afterwards recorded (3 opens of f0, none in the trace). A handler on
 * an alternate signal stack that lies above the thread's stack, interrupting
 * a read, is still nested in it: its own open of f1 is not recorded, and the
 * read it interrupted and the thread's calls after it are.
 */
Test(io, a_read_left_by_siglongjmp_does_not_end_the_threads_recording, .timeout = 60)
{
	struct lim_env e;
	struct io_recs rs;
	struct sp_json *t = lim_run(&e, "jump", &rs);
	int pid = (int)tnum(t, "pid");
	cr_assert_eq(tnum(t, "jumped"), 1, "the SIGALRM handler did not jump");
	cr_assert_eq(tnum(t, "alt_above"), 1, "the alternate stack is not above the thread's stack");
	cr_assert_eq(tnum(t, "thread_read"), 5);
	char p0[PATH_MAX + 8], p1[PATH_MAX + 8];
	snprintf(p0, sizeof(p0), "%s/f0", e.data);
	snprintf(p1, sizeof(p1), "%s/f1", e.data);
	/* f0: 3 opens by the main thread after the jump, 1 by the thread after the handler */
	struct io_filter f = { .kind = "open", .pid = pid, .api = "open", .prefix = p0 };
	cr_expect_eq(io_t_count(&rs, f, NULL), 4, "opens of f0 after the jump: %ld recorded, 4 made",
		     io_t_count(&rs, f, NULL));
	f = (struct io_filter){ .kind = "read", .pid = pid, .api = "read", .prefix = p0 };
	uint64_t b;
	cr_expect_eq(io_t_count(&rs, f, &b), 8, "reads of f0: 2 per open");
	cr_expect_eq(b, (uint64_t)(3 * tnum(t, "f0_bytes") + tnum(t, "thread_f0_bytes")));
	f = (struct io_filter){ .kind = "open", .pid = pid, .prefix = p1 };
	cr_assert_eq(tnum(t, "handler_bytes"), 2, "the handler did not read f1");
	cr_expect_eq(io_t_count(&rs, f, NULL), 0, "the handler's open, nested in a read, is not recorded");
	f = (struct io_filter){ .kind = "loader_wait", .pid = pid, .api = "read", .fd_type = "pipe" };
	cr_expect_eq(io_t_count(&rs, f, &b), 1, "the read the handler interrupted is one loader wait");
	cr_expect_eq(b, 5);
	lim_fini(&e, t, &rs);
}

/*
 * The bytes field holds 5 bytes (< 1 TiB, docs/trace-format.md). The st_size
 * of a larger file (a 1.1 TB LMDB or tar shard) is saturated at the field's
 * largest value; cut to its low 5 bytes, 1,100,000,000,000 bytes would be
 * recorded as 488,372,224.
 */
Test(io, a_stat_of_a_file_of_a_terabyte_or_more_saturates_instead_of_wrapping, .timeout = 60)
{
	struct lim_env e;
	struct io_recs rs;
	struct sp_json *t = lim_run(&e, "big", &rs);
	if (tnum(t, "efbig")) {
		lim_fini(&e, t, &rs);
		cr_skip_test("the file system of the test's directory refuses a 1.1 TB sparse file");
	}
	int pid = (int)tnum(t, "pid");
	cr_assert_eq(tnum(t, "size"), 1100000000000L);
	cr_assert_eq(tnum(t, "statx_size"), 1100000000000L);
	const uint64_t max = (1ull << 40) - 1;
	static const char *const apis[] = { "stat", "fstat", "statx" };
	for (size_t i = 0; i < sizeof(apis) / sizeof(apis[0]); i++) {
		const struct io_rec *last = NULL;
		struct io_filter f = { .kind = "stat", .pid = pid, .api = apis[i] };
		cr_assert_eq(matching(&rs, f, -1, NULL, &last), 1, "one %s", apis[i]);
		cr_expect_eq(last->bytes, max, "%s of a 1,100,000,000,000-byte file: %llu bytes recorded, expected %llu",
			     apis[i], (unsigned long long)last->bytes, (unsigned long long)max);
	}
	lim_fini(&e, t, &rs);
}

/*
 * A read of an eventfd, a timerfd, a signalfd or a character device is a
 * thread waiting for a counter, a timer or a signal (or reading /dev/zero),
 * not file input: no record, as a poll on them alone is none. As a `read`
 * record (fd_type other), each would be input to the analysis: a training thread
 * blocked 20 ms on a timerfd 20 ms of file input. A file read in the same
 * program is still recorded.
 */
Test(io, reads_of_eventfds_timerfds_signalfds_and_devices_are_not_input, .timeout = 60)
{
	struct lim_env e;
	struct io_recs rs;
	struct sp_json *t = lim_run(&e, "notinput", &rs);
	int pid = (int)tnum(t, "pid");
	static const char *const fds[] = { "eventfd", "timerfd", "signalfd", "raw_eventfd", "zero" };
	static const char *const reads[] = { "eventfd_read", "timerfd_read", "signalfd_read", "raw_read", "zero_read" };
	for (size_t k = 0; k < sizeof(fds) / sizeof(fds[0]); k++) {
		cr_assert_gt(tnum(t, reads[k]), 0, "the workload's read of its %s returned nothing", fds[k]);
		long n = 0;
		for (size_t i = 0; i < rs.n; i++) {
			const struct io_rec *r = &rs.v[i];
			if (r->pid == pid && r->fd == tnum(t, fds[k]) && !strcmp(r->api, "read"))
				n++;
		}
		cr_expect_eq(n, 0, "the read of the %s: %ld records, expected none", fds[k], n);
	}
	char p0[PATH_MAX + 8];
	snprintf(p0, sizeof(p0), "%s/f0", e.data);
	uint64_t b;
	struct io_filter f = { .kind = "read", .pid = pid, .api = "read", .fd_type = "file", .prefix = p0 };
	cr_expect_eq(io_t_count(&rs, f, &b), 2, "f0: a read with its bytes, a read at EOF");
	cr_expect_eq(b, (uint64_t)tnum(t, "f0_bytes"));
	lim_fini(&e, t, &rs);
}

/*
 * A file opened for writing only, or truncated, is output: a step that saves
 * its outputs (torch.save, np.save, a prediction per sample) reads nothing.
 * Its open, fstat, reads and close are no record; a file opened "a+" (which can
 * be read) and a file read are input. Were each save an open, an fstat
 * (Python's open() makes one) and a close of the input capture, a step writing
 * 300 small files would be a critical small_file_storm, 86% "input".
 */
Test(io, files_opened_for_writing_are_not_input, .timeout = 60)
{
	struct lim_env e;
	struct io_recs rs;
	struct sp_json *t = lim_run(&e, "output", &rs);
	int pid = (int)tnum(t, "pid");
	char out[PATH_MAX + 8], pa[PATH_MAX + 8], p0[PATH_MAX + 8];
	snprintf(out, sizeof(out), "%s/out/", e.data);
	snprintf(pa, sizeof(pa), "%s/out/a", e.data);
	snprintf(p0, sizeof(p0), "%s/f0", e.data);
	long written = 0;
	for (size_t i = 0; i < rs.n; i++) {
		const struct io_rec *r = &rs.v[i];
		if (r->pid == pid && r->path && !strncmp(r->path, out, strlen(out)) && strcmp(r->path, pa)) {
			written++;
			cr_expect(0, "a record of a file written: %s %s %s", r->kind, r->api, r->path);
		}
	}
	cr_expect_eq(written, 0);
	cr_assert_eq(tnum(t, "a_bytes"), 100);
	struct io_filter f = { .kind = "open", .pid = pid, .api = "fopen", .prefix = pa };
	cr_expect_eq(io_t_count(&rs, f, NULL), 1, "the \"a+\" file's open");
	uint64_t b;
	f = (struct io_filter){ .kind = "read", .pid = pid, .api = "fread", .prefix = pa };
	cr_expect_eq(io_t_count(&rs, f, &b), 1, "the \"a+\" file's fread");
	cr_expect_eq(b, 100);
	f = (struct io_filter){ .kind = "open", .pid = pid, .api = "open", .prefix = p0 };
	cr_expect_eq(io_t_count(&rs, f, NULL), 1, "f0's open");
	f = (struct io_filter){ .kind = "read", .pid = pid, .api = "read", .prefix = p0 };
	cr_expect_eq(io_t_count(&rs, f, &b), 2);
	cr_expect_eq(b, (uint64_t)tnum(t, "f0_bytes"));
	lim_fini(&e, t, &rs);
}

/*
 * A dup of an epoll fd is the same epoll instance: its waits on a pipe added
 * through the original are loader waits too. The copy keeps the wait type
 * (io_fd_copy must not mask it): otherwise Python's select.epoll.fromfd(os.dup(...)),
 * waiting 30 ms for a pipe a thread writes, would be no record. The script: an
 * epoll with a pipe's read end, a dup of it, a thread writing the pipe after
 * 30 ms, epoll_wait on the dup (Python's epoll.poll), three rounds.
 */
Test(io, a_dup_of_an_epoll_fd_keeps_its_loader_waits, .timeout = 60)
{
	struct lim_env e;
	struct io_recs rs;
	lim_env_python(&e, "io-limits-epdup");
	static const char script[] = "import json, os, select, threading, time\n"
				     "r, w = os.pipe()\n"
				     "ep = select.epoll()\n"
				     "ep.register(r, select.EPOLLIN)\n"
				     "dup = select.epoll.fromfd(os.dup(ep.fileno()))\n"
				     "got = 0\n"
				     "for i in range(3):\n"
				     "    t = threading.Thread(target=lambda: (time.sleep(0.03), os.write(w, b'x')))\n"
				     "    t.start()\n"
				     "    got += len(dup.poll(5))\n"
				     "    os.read(r, 1)\n"
				     "    t.join()\n"
				     "print(json.dumps({'pid': os.getpid(), 'ready': got, 'dupfd': dup.fileno()}))\n";
	char *argv[] = { "/usr/bin/python3", "-c", (char *)script, NULL };
	struct sp_json *t = lim_run_argv(&e, argv, &rs);
	cr_assert_eq(tnum(t, "ready"), 3);
	struct io_filter f = { .kind = "loader_wait", .pid = (int)tnum(t, "pid"), .api = "epoll_wait" };
	unsigned n = 0;
	for (size_t i = 0; i < rs.n; i++)
		if (io_t_match(&rs.v[i], &f) && rs.v[i].fd == (int64_t)tnum(t, "dupfd")) {
			n++;
			cr_expect_geq(rs.v[i].end - rs.v[i].begin, 20000000, "an epoll_wait of %llu ns for a 30 ms wait",
				      (unsigned long long)(rs.v[i].end - rs.v[i].begin));
		}
	cr_expect_eq(n, 3, "%u loader waits on the dup of the epoll fd for 3 waits", n);
	lim_fini(&e, t, &rs);
}

/*
 * An fd the process did not open, open for writing only (a stdout the shell
 * redirected to a file, a stderr that is a pipe's write end), is output, as a
 * file the process opens write-only is: its close is no record. Otherwise `true
 * > f` leaves a trace of two closes (fd 1 and 2), and every program of a job
 * records the close of its stdout. `sh -c 'exec cat < in > out'`: cat's trace
 * holds the read of in on fd 0 and its close, and nothing on fd 1 or 2.
 */
Test(io, inherited_write_only_fds_are_output_not_input, .timeout = 60)
{
	struct lim_env e;
	struct io_recs rs;
	lim_env_own(&e, "io-limits-wronly");
	char in[PATH_MAX + 8], out[PATH_MAX + 8], cmd[3 * PATH_MAX];
	snprintf(in, sizeof(in), "%s/in", e.tmp);
	snprintf(out, sizeof(out), "%s/out", e.tmp);
	FILE *f = fopen(in, "w");
	cr_assert_not_null(f);
	fputs("twelve bytes", f);
	fclose(f);
	snprintf(cmd, sizeof(cmd), "exec cat < '%s' > '%s'", in, out);
	char *argv[] = { "/bin/sh", "-c", cmd, NULL };
	cr_assert_null(lim_run_argv(&e, argv, &rs));
	uint64_t bytes = 0;
	unsigned reads = 0, closes0 = 0, on_out = 0;
	for (size_t i = 0; i < rs.n; i++) {
		const struct io_rec *r = &rs.v[i];
		if (r->fd == 1 || r->fd == 2 || (r->path && !strcmp(r->path, out)))
			on_out++;
		if (r->fd == 0 && r->path && !strcmp(r->path, in)) {
			if (!strcmp(r->kind, "read"))
				reads++, bytes += r->bytes;
			closes0 += !strcmp(r->kind, "close");
		}
	}
	cr_expect_eq(on_out, 0, "%u records on the write-only stdout/stderr", on_out);
	cr_expect_geq(reads, 1, "cat's read of its stdin");
	cr_expect_eq(bytes, 12, "%llu bytes read of in, 12 written", (unsigned long long)bytes);
	cr_expect_eq(closes0, 1, "%u closes of the stdin", closes0);
	lim_fini(&e, NULL, &rs);
}
