/*
 * test_io_fdtab.c - the input capture's core pieces, without interposition:
 * the fd -> (path, type) table, the type of real descriptors (pipe, socket,
 * file, directory, device) from one fstat, the no-syscall guess at open,
 * STEPPROF_IO parsing, the resolution of the real libc functions, and the
 * path ids of open/stat (io_path_id and its one-entry per-thread cache),
 * checked against the strings the trace file holds.
 */
#include <criterion/criterion.h>
#include <dirent.h>
#include <dlfcn.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "config.h"
#include "io_fdtab.h"
#include "io_hook.h"
#include "reader.h"
#include "testlib.h"

/* The table is mapped at its first use by a process that records (each test is a process of its own). */
static void recording(void)
{
	sp_active = 1;
}

Test(io_fdtab, a_process_that_records_nothing_maps_no_table)
{
	io_fd_set(5, 42, SP_FDTYPE_PIPE, 1);
	cr_expect_eq(io_fd_word(5), 0);
	cr_expect(!io_fd_tracked(5));
	cr_expect_null(io_fdtab, "the 2 MiB table was mapped by a process that records nothing");
	recording();
	io_fd_set(5, 42, SP_FDTYPE_PIPE, 1);
	cr_expect_not_null(io_fdtab);
	cr_expect_eq(io_word_path(io_fd_word(5)), 42);
}

Test(io_fdtab, real_descriptors_get_their_type_from_one_fstat, .init = recording)
{
	int p[2], s[2];
	cr_assert_eq(pipe(p), 0);
	cr_assert_eq(socketpair(AF_UNIX, SOCK_STREAM, 0, s), 0);
	int file = open("/proc/self/exe", O_RDONLY); /* a regular file */
	int dir = open("/", O_RDONLY | O_DIRECTORY);
	int dev = open("/dev/null", O_RDONLY);
	cr_assert(file >= 0 && dir >= 0 && dev >= 0);
	struct {
		int fd;
		unsigned type;
	} cases[] = { { p[0], SP_FDTYPE_PIPE },	  { p[1], SP_FDTYPE_PIPE }, { s[0], SP_FDTYPE_SOCKET },
		      { file, SP_FDTYPE_FILE }, { dir, SP_FDTYPE_DIR }, { dev, SP_FDTYPE_OTHER } };
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		int fd = cases[i].fd;
		io_fd_clear(fd);
		cr_expect_eq(io_fd_word(fd) & IO_W_KNOWN, 0);
		errno = 1234;
		cr_expect_eq(io_fd_type(fd), cases[i].type, "fd %d: type %u, expected %u", fd, io_fd_type(fd),
			     cases[i].type);
		cr_expect_eq(errno, 1234, "the lookup changed errno");
		/* Cached: known from now on, whatever happens to the fd. */
		cr_expect_neq(io_fd_word(fd) & IO_W_KNOWN, 0);
	}
	/* A path set at open survives the type resolution. */
	io_fd_set(file, 77, SP_FDTYPE_OTHER, 0);
	cr_expect_eq(io_fd_type(file), SP_FDTYPE_FILE);
	cr_expect_eq(io_word_path(io_fd_word(file)), 77);
	/* A closed fd has no type. */
	close(dev);
	io_fd_clear(dev);
	cr_expect_eq(io_fd_type(dev), SP_FDTYPE_OTHER);
	cr_expect_eq(io_fd_word(dev) & IO_W_KNOWN, 0);
	close(p[0]), close(p[1]), close(s[0]), close(s[1]), close(file), close(dir);
}

Test(io_fdtab, set_copy_clear_and_untracked_fds, .init = recording)
{
	io_fd_set(5, 42, SP_FDTYPE_PIPE, 1);
	uint64_t w = io_fd_word(5);
	cr_expect_eq(io_word_path(w), 42);
	cr_expect_eq(io_word_type(w), SP_FDTYPE_PIPE);
	io_fd_set_wait_type(5, SP_FDTYPE_SOCKET);
	cr_expect_eq(io_word_wait_type(io_fd_word(5)), SP_FDTYPE_SOCKET);
	/* dup: the copy describes the same open file, an epoll set's wait type included (the same instance). */
	io_fd_copy(5, 9);
	cr_expect_eq(io_word_path(io_fd_word(9)), 42);
	cr_expect_eq(io_word_type(io_fd_word(9)), SP_FDTYPE_PIPE);
	cr_expect_eq(io_word_wait_type(io_fd_word(9)), SP_FDTYPE_SOCKET);
	cr_expect_eq(io_fd_clear(5), io_fd_word(9));
	cr_expect_eq(io_fd_word(5), 0);
	/* Path ids are 3 bytes in the trace: the table keeps 24 bits. */
	io_fd_set(6, 0x1abcdef, SP_FDTYPE_FILE, 1);
	cr_expect_eq(io_word_path(io_fd_word(6)), 0xabcdef);
	/* Out of range: ignored, never written. */
	io_fd_set(IO_FD_MAX, 1, SP_FDTYPE_FILE, 1);
	io_fd_set(-1, 1, SP_FDTYPE_FILE, 1);
	cr_expect_eq(io_fd_word(IO_FD_MAX), 0);
	cr_expect_eq(io_fd_word(-1), 0);
	cr_expect_eq(io_fd_type(IO_FD_MAX + 5), SP_FDTYPE_OTHER);
}

Test(io_fdtab, guess_at_open_needs_no_syscall)
{
	int known;
	cr_expect_eq(io_guess_type("/data/train/x.jpg", O_RDONLY, &known), SP_FDTYPE_FILE);
	cr_expect_eq(known, 1);
	cr_expect_eq(io_guess_type("relative/x", O_RDONLY, &known), SP_FDTYPE_FILE);
	cr_expect_eq(known, 1);
	cr_expect_eq(io_guess_type("/data", O_RDONLY | O_DIRECTORY, &known), SP_FDTYPE_DIR);
	cr_expect_eq(known, 1);
	static const char *const special[] = { "/dev/nvidia0", "/dev/shm/torch_1", "/proc/self/stat", "/sys/bus/pci" };
	for (size_t i = 0; i < 4; i++) {
		io_guess_type(special[i], O_RDONLY, &known);
		cr_expect_eq(known, 0, "%s: FIFOs, ttys and devices live there: resolve at first use", special[i]);
	}
	/* Only whole components. */
	cr_expect_eq(io_guess_type("/device/x", O_RDONLY, &known), SP_FDTYPE_FILE);
	cr_expect_eq(known, 1);
	cr_expect_eq(io_guess_type("/dev", O_RDONLY, &known), SP_FDTYPE_FILE);
}

Test(io_fdtab, mode_from_mode_bits)
{
	cr_expect_eq(io_type_from_mode(S_IFREG | 0644), SP_FDTYPE_FILE);
	cr_expect_eq(io_type_from_mode(S_IFIFO), SP_FDTYPE_PIPE);
	cr_expect_eq(io_type_from_mode(S_IFSOCK), SP_FDTYPE_SOCKET);
	cr_expect_eq(io_type_from_mode(S_IFDIR), SP_FDTYPE_DIR);
	cr_expect_eq(io_type_from_mode(S_IFCHR), SP_FDTYPE_OTHER);
	cr_expect_eq(io_type_from_mode(S_IFBLK), SP_FDTYPE_OTHER);
}

Test(io_mode, stepprof_io_values)
{
	cr_expect_eq(io_mode_parse(NULL), IO_MODE_AUTO);
	cr_expect_eq(io_mode_parse(""), IO_MODE_AUTO);
	cr_expect_eq(io_mode_parse("auto"), IO_MODE_AUTO);
	cr_expect_eq(io_mode_parse("libc"), IO_MODE_LIBC);
	cr_expect_eq(io_mode_parse("bpf"), IO_MODE_BPF);
	cr_expect_eq(io_mode_parse("off"), IO_MODE_OFF);
	cr_expect_eq(io_mode_parse("LIBC"), -1);
	cr_expect_eq(io_mode_parse("ebpf"), -1);
}

Test(io_real, resolves_the_libc_functions)
{
	/* Outside the preload, "next" after the test binary is libc itself. */
	cr_expect_eq(io_real_get(IO_FN_read), dlsym(RTLD_DEFAULT, "read"));
	cr_expect_eq(io_real_get(IO_FN_stat), dlsym(RTLD_DEFAULT, "stat"));
	cr_expect_eq(io_real_get(IO_FN_fopen), dlsym(RTLD_DEFAULT, "fopen"));
	/* Compat-only since glibc 2.33: found through its version. */
	void *x = io_real_get(IO_FN___xstat);
	cr_expect_eq(x, dlvsym(RTLD_DEFAULT, "__xstat", "GLIBC_2.2.5"));
	cr_expect_not_null(x);
	/* The table is filled: the second lookup is the cached pointer. */
	cr_expect_eq(io_real_ptr[IO_FN_read], io_real_get(IO_FN_read));
}

/* ------------------------------------------------------------- path ids */

/* The string of each id in the trace file of dir (the ground truth), into out[id] (malloc'd, or NULL). */
static void trace_strings(const char *dir, char **out, uint32_t nids)
{
	DIR *d = opendir(dir);
	struct dirent *de;
	char path[1024] = "", err[256];
	cr_assert(d);
	while ((de = readdir(d)))
		if (strstr(de->d_name, ".sptrace"))
			snprintf(path, sizeof(path), "%s/%s", dir, de->d_name);
	closedir(d);
	cr_assert(path[0], "no trace in %s", dir);
	struct sp_reader *r;
	cr_assert_eq(sp_reader_open(path, &r, err, sizeof(err)), 0, "%s", err);
	struct sp_event ev;
	while (sp_reader_next(r, &ev) > 0)
		;
	for (uint32_t id = 0; id < nids; id++) {
		const char *t = id ? sp_reader_string(r, id) : NULL;
		out[id] = t ? strdup(t) : NULL;
	}
	sp_reader_close(r);
}

Test(io_path, cache_compares_the_whole_string_never_the_pointer)
{
	char *dir = sp_t_tmpdir("iopath");
	sp_recorder_init(dir, 8u << 20);
	io_path_forget();
	/* One buffer, as a loader reuses it: each new string must get its own id,
	 * however much of it matches the cached one (length, last byte, prefix). */
	static const char *const seq[] = {
		"/data/a/x0",  "/data/a/x0",   /* a repeat: the cache */
		"/data/b/x0",		       /* same length and last byte, differs inside */
		"/data/a/x1",		       /* differs in the last byte */
		"/data/a/x",   "/data/a/x0/y", /* a prefix of the cached one, and one that extends it */
		"/data/a/x0",		       /* back to the first: the table's id */
		"/data/A/x0",		       /* differs in case only */
	};
	enum { N = sizeof(seq) / sizeof(seq[0]), MAXID = 64 };
	char buf[300];
	uint32_t id[N];
	for (int i = 0; i < N; i++) {
		strcpy(buf, seq[i]);
		id[i] = io_path_id(buf);
		cr_assert_neq(id[i], 0, "%s: no id", seq[i]);
		cr_assert_lt(id[i], MAXID);
		memset(buf, 'z', sizeof(buf)); /* the caller's buffer changes after the call */
	}
	/* A path longer than the cache holds: interned each time, same id. */
	memset(buf, 'p', sizeof(buf) - 1);
	buf[0] = '/', buf[sizeof(buf) - 1] = 0;
	uint32_t lid = io_path_id(buf), lid2 = io_path_id(buf);
	cr_expect_eq(lid, lid2, "a long path has one id");
	cr_expect_eq(io_path_id(""), 0);
	cr_expect_eq(io_path_id(NULL), 0);
	/* After a fork's forget, the same path: no stale entry, the table's id. */
	io_path_forget();
	strcpy(buf, seq[2]);
	cr_expect_eq(io_path_id(buf), id[2]);

	char *str[MAXID];
	trace_strings(dir, str, MAXID);
	for (int i = 0; i < N; i++) {
		cr_expect(str[id[i]] && !strcmp(str[id[i]], seq[i]), "call %d (%s) got id %u, which is \"%s\"", i, seq[i],
			  id[i], str[id[i]] ? str[id[i]] : "(none)");
		for (int j = 0; j < i; j++)
			if (strcmp(seq[i], seq[j]) != 0)
				cr_expect_neq(id[i], id[j], "%s and %s share id %u", seq[i], seq[j], id[i]);
	}
	cr_expect_eq(id[1], id[0], "a repeat of the cached path keeps its id");
	cr_expect_eq(id[6], id[0], "the same string gets the same id again");
	cr_expect(lid < MAXID && str[lid] && strlen(str[lid]) == sizeof(buf) - 1, "the long path in the trace");
	for (int i = 0; i < MAXID; i++)
		free(str[i]);
	sp_recorder_shutdown();
	sp_t_rmrf(dir);
	free(dir);
}
