/*
 * iogen.c - an input workload with a known ground truth, for the input-capture
 * tests and the small-file benchmark. Every mode prints what it did as one JSON
 * line on stdout (counts of calls it made and bytes it received), so a test can
 * compare a trace with the truth without trusting stepprof.
 *
 *   iogen setup DIR N [SIZE]       create DIR/f000..: file i has 1000 + 97*i bytes
 *                                  (or SIZE bytes each: the benchmark's 4 KiB files)
 *   iogen run DIR N THREADS LOOPS  per thread, LOOPS x per file: stat, lstat, open,
 *                                  fstat, read (512 B buffer) to EOF, pread 64 B,
 *                                  close, fstatat, statx, fopen + fread to EOF +
 *                                  fclose; then one opendir/readdir/closedir of DIR
 *   iogen pipe WAITS MS            the main thread waits WAITS times for a batch
 *                                  that a thread writes into a pipe after MS ms
 *                                  (poll, then read)
 *   iogen pingpong ROUNDS [SPIN_US] batch hand-offs between two processes: the parent
 *                                  writes a byte into a pipe, a forked child blocks in
 *                                  read() for it, spins SPIN_US (0) and answers on a
 *                                  second pipe, which the parent blocks in read() for;
 *                                  ROUNDS round trips (2 hand-offs each) after 1000
 *                                  untimed ones; prints wall and CPU (both processes)
 *                                  ns per hand-off
 *   iogen cputime ITERS            ITERS clock_gettime(CLOCK_PROCESS_CPUTIME_ID) calls:
 *                                  ns per call (and CLOCK_MONOTONIC's, the vDSO's)
 *   iogen bench DIR N ITERS        the small-file loop: stat + open + read + close
 *                                  of each file, ITERS rounds after one untimed
 *                                  round; prints elapsed and CPU ns per file
 *   iogen forkexec DIR N KIDS      KIDS children: fork, then exec "iogen run DIR N 1 1"
 *   iogen exit DIR N               run DIR N 1 1, then _exit(0) without any clean-up
 *   iogen each DIR N               every other wrapped entry point once (N >= 2):
 *                                  the *64 and fortify names, readv/preadv*, stat
 *                                  by fd and AT_EMPTY_PATH, the pre-2.33 __xstat
 *                                  family bound by symbol version as an old binary
 *                                  binds it, creat, freopen, getdents64, readdir64,
 *                                  fdopendir, a listing stopped early, and waits on
 *                                  a pipe and a socket (ppoll, pselect, epoll_pwait,
 *                                  __poll_chk, recvfrom, recvmsg, __recv_chk...)
 *   iogen forkio DIR N KIDS        KIDS children: fork, read every file (run DIR N 1 1
 *                                  in the child), then exec "iogen run DIR N 1 1"
 *   iogen reuse DIR N              an fd number reused while its close is in flight:
 *                                  the main thread closes a lingering TCP socket
 *                                  (close blocks ~1 s after freeing the fd); a
 *                                  second thread opens DIR/f000 meanwhile, gets the
 *                                  same number, waits for the close to return, then
 *                                  fstats, reads (512 B) to EOF, preads 64 B, closes
 *   iogen dupfd DIR N              copies of an fd of DIR/f000 made with fcntl(F_DUPFD_CLOEXEC)
 *                                  (as Python's os.dup) and fcntl64(F_DUPFD, 20), the
 *                                  original closed first: read (512 B) to EOF on the
 *                                  first, fstat and pread 64 B on the second, close both
 *   iogen badptr DIR N             calls given bad and NULL pointers (paths, a poll array, a
 *                                  select set) and fstatat/statx(fd, NULL, AT_EMPTY_PATH):
 *                                  prints each result and errno, the same with or without
 *                                  the preload
 *   iogen forkfd DIR N             the parent opens DIR/f000 and forks; the child stats
 *                                  DIR/f001 (a path of its own first), then preads 64 B,
 *                                  reads (512 B) to EOF, fstats and closes the inherited fd
 *   iogen memstream DIR N          an open_memstream stream: fread from it (an error),
 *                                  fclose it; then reads fd 0 (made a pipe holding 5 bytes)
 *   iogen stale DIR N              numbers reused after a descriptor died without close():
 *                                  popen + pclose then memfd_create; DIR/f000 closed by
 *                                  close_range then memfd_create; DIR/f000 closed by
 *                                  closefrom then eventfd; a pread/read on each new one
 *   iogen vforkfirst DIR N         the first input calls are a vfork()ed child's (open and close
 *                                  DIR/f000, then _exit); then the parent opens, reads (512 B)
 *                                  to EOF and closes DIR/f001
 *   iogen mainexit DIR N [ROUNDS]  the main thread calls pthread_exit at once; a second
 *                                  thread joins it (so the process goes on with its
 *                                  main thread a zombie), prints {"main_exited":1,...},
 *                                  then ROUNDS (30) times, 100 ms apart: open, read
 *                                  (512 B) to EOF and close each file; then the truth
 *   iogen closerange DIR N         fds closed without close(): expects fds 8 and 9 open on a
 *                                  file (inherited); close_range(9, 9) then eventfds until one
 *                                  gets 9, read; N times: open DIR/f000, close_range it,
 *                                  memfd_create (same number), pread 10 B; then fd 8 made
 *                                  close-on-exec and an exec of itself (closerange-exec), which
 *                                  makes eventfds until one gets 8 and reads it
 *   iogen longpath DIR N           paths longer than the collector reads (511 bytes): in DIR,
 *                                  11 nested directories of 50-byte names ("LLL...00"), a
 *                                  file "deepfile" at the bottom; opens and reads it by its
 *                                  relative and by its absolute path, then chdir()s there by
 *                                  the relative path and opens and reads "deepfile"
 *   iogen dotdot DIR N             "." and ".." in paths: in DIR, N times chdir("sub"),
 *                                  open "../f000", read, close, chdir(".."); then
 *                                  openat(fd of "sub/.", "../f000") and open("DIR//./sub/../f000")
 *   iogen fchdirfd DIR N           fchdir to a directory fd of unknown path: in DIR/one, opens
 *                                  DIR/two, passes the fd to itself over a Unix socket
 *                                  (SCM_RIGHTS), fchdir()s to the received fd, then opens and
 *                                  reads "data" (DIR/two/data)
 *   iogen eintr DIR N              calls interrupted by a signal (SIGUSR1, sent by a second
 *                                  thread once the main thread is blocked in the call, seen
 *                                  in /proc): a pipe read with an SA_RESTART handler (that
 *                                  writes the byte it then reads); the same without SA_RESTART
 *                                  (EINTR), then the read again; an open of the FIFO DIR/fifo
 *                                  restarted (SA_RESTART), which the thread then opens for
 *                                  writing; a child killed (SIGTERM) while blocked in a read
 *   iogen stdio DIR N              stdio reads through the stream's buffer: writes DIR/text
 *                                  (lines of numbers, 20,000+ bytes, several buffers), then
 *                                  reads it to EOF once with each of fgets, fgets_unlocked,
 *                                  __fgets_chk, getline, getdelim, __getdelim, fgetc, getc,
 *                                  _IO_getc, fgetc_unlocked, getc_unlocked (the function and
 *                                  the macro: __uflow), __underflow then fgetc, fscanf
 *                                  (__isoc99_fscanf), vfscanf (__isoc99_vfscanf) and the plain
 *                                  fscanf/vfscanf symbols (found with dlsym), and on DIR/text2
 *                                  (the same) fgets of one line then fread to EOF; prints the
 *                                  file's size, its st_blksize and per function the bytes it
 *                                  took (numbers read, for the scanf ones)
 *
 * Divided into: helpers, the modes (each and forkio last), main.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <dirent.h>
#include <stdarg.h>
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <stdint.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <netinet/in.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/mman.h>
#include <sys/select.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/uio.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

/* ---------------------------------------------------------------- helpers */

static const char *dir;
static int nfiles, loops;
static long fixed_size; /* setup SIZE: every file this size */

static long file_size(int i)
{
	return fixed_size > 0 ? fixed_size : 1000 + 97L * i;
}

static void file_path(char *buf, size_t n, int i)
{
	snprintf(buf, n, "%s/f%03d", dir, i);
}

static void die(const char *what)
{
	fprintf(stderr, "iogen: %s: %s\n", what, strerror(errno));
	exit(1);
}

static uint64_t now_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

/* What a thread did: counted as it happens, summed by main. */
struct truth {
	long stat, lstat, fstat, fstatat, statx, open, fopen, close, fclose;
	long read_calls, read_bytes, pread_calls, pread_bytes, fread_calls, fread_bytes, listdir, dirents;
};

/* ------------------------------------------------------------------ modes */

static int do_setup(void)
{
	char path[4096], buf[8192];
	if (mkdir(dir, 0755) != 0 && errno != EEXIST)
		die(dir);
	for (int i = 0; i < nfiles; i++) {
		file_path(path, sizeof(path), i);
		int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0644);
		if (fd < 0)
			die(path);
		long n = file_size(i);
		for (long k = 0; k < n; k++)
			buf[k % sizeof(buf)] = (char)('a' + (i + k) % 26);
		if (write(fd, buf, (size_t)n) != n)
			die("write");
		close(fd);
	}
	printf("{\"files\":%d}\n", nfiles);
	return 0;
}

static void *run_thread(void *arg)
{
	struct truth *t = arg;
	char path[4096], buf[512], big[65536];
	struct stat st;
	struct statx stx;
	for (int l = 0; l < loops; l++) {
		for (int i = 0; i < nfiles; i++) {
			file_path(path, sizeof(path), i);
			if (stat(path, &st) != 0 || st.st_size != file_size(i))
				die("stat");
			t->stat++;
			if (lstat(path, &st) != 0)
				die("lstat");
			t->lstat++;
			int fd = open(path, O_RDONLY);
			if (fd < 0)
				die("open");
			t->open++;
			if (fstat(fd, &st) != 0)
				die("fstat");
			t->fstat++;
			ssize_t r;
			do {
				r = read(fd, buf, sizeof(buf));
				if (r < 0)
					die("read");
				t->read_calls++;
				t->read_bytes += r;
			} while (r > 0);
			r = pread(fd, buf, 64, 0);
			if (r != 64)
				die("pread");
			t->pread_calls++;
			t->pread_bytes += r;
			close(fd);
			t->close++;
			if (fstatat(AT_FDCWD, path, &st, 0) != 0)
				die("fstatat");
			t->fstatat++;
			if (statx(AT_FDCWD, path, 0, STATX_SIZE, &stx) != 0)
				die("statx");
			t->statx++;
			FILE *fp = fopen(path, "r");
			if (!fp)
				die("fopen");
			t->fopen++;
			size_t got;
			do {
				got = fread(big, 1, sizeof(big), fp);
				t->fread_calls++;
				t->fread_bytes += (long)got;
			} while (got > 0);
			fclose(fp);
			t->fclose++;
		}
	}
	DIR *d = opendir(dir);
	if (!d)
		die("opendir");
	while (readdir(d))
		t->dirents++;
	closedir(d);
	t->listdir++;
	return NULL;
}

static void print_truth(const struct truth *s, int threads)
{
	printf("{\"threads\":%d,\"files\":%d,\"loops\":%d,\"stat\":%ld,\"lstat\":%ld,\"fstat\":%ld,\"fstatat\":%ld,"
	       "\"statx\":%ld,\"open\":%ld,\"fopen\":%ld,\"close\":%ld,\"fclose\":%ld,\"read_calls\":%ld,"
	       "\"read_bytes\":%ld,\"pread_calls\":%ld,\"pread_bytes\":%ld,\"fread_calls\":%ld,\"fread_bytes\":%ld,"
	       "\"listdir\":%ld,\"dirents\":%ld,\"pid\":%d}\n",
	       threads, nfiles, loops, s->stat, s->lstat, s->fstat, s->fstatat, s->statx, s->open, s->fopen, s->close,
	       s->fclose, s->read_calls, s->read_bytes, s->pread_calls, s->pread_bytes, s->fread_calls, s->fread_bytes,
	       s->listdir, s->dirents, (int)getpid());
	fflush(stdout);
}

static int do_run(int threads)
{
	pthread_t tid[64];
	struct truth t[64], sum;
	if (threads < 1 || threads > 64)
		threads = 1;
	memset(t, 0, sizeof(t));
	memset(&sum, 0, sizeof(sum));
	for (int i = 0; i < threads; i++)
		if (pthread_create(&tid[i], NULL, run_thread, &t[i]) != 0)
			die("pthread_create");
	for (int i = 0; i < threads; i++) {
		pthread_join(tid[i], NULL);
		long *a = (long *)&sum, *b = (long *)&t[i];
		for (size_t k = 0; k < sizeof(sum) / sizeof(long); k++)
			a[k] += b[k];
	}
	print_truth(&sum, threads);
	return 0;
}

struct pipe_job {
	int wfd, waits, ms;
};

static void *pipe_writer(void *arg)
{
	struct pipe_job *j = arg;
	char batch[100];
	memset(batch, 'b', sizeof(batch));
	for (int i = 0; i < j->waits; i++) {
		struct timespec ts = { j->ms / 1000, (long)(j->ms % 1000) * 1000000L };
		nanosleep(&ts, NULL);
		if (write(j->wfd, batch, sizeof(batch)) != (ssize_t)sizeof(batch))
			die("write");
	}
	return NULL;
}

static int do_pipe(int waits, int ms)
{
	int p[2];
	pthread_t t;
	if (pipe(p) != 0)
		die("pipe");
	struct pipe_job j = { p[1], waits, ms };
	uint64_t t0 = now_ns();
	pthread_create(&t, NULL, pipe_writer, &j);
	long polls = 0, reads = 0, bytes = 0;
	for (int i = 0; i < waits; i++) {
		struct pollfd pfd = { p[0], POLLIN, 0 };
		if (poll(&pfd, 1, -1) != 1)
			die("poll");
		polls++;
		char buf[100];
		ssize_t r = read(p[0], buf, sizeof(buf));
		if (r != (ssize_t)sizeof(buf))
			die("read");
		reads++;
		bytes += r;
	}
	pthread_join(t, NULL);
	printf("{\"polls\":%ld,\"reads\":%ld,\"bytes\":%ld,\"elapsed_ns\":%llu,\"pid\":%d}\n", polls, reads, bytes,
	       (unsigned long long)(now_ns() - t0), (int)getpid());
	return 0;
}

static uint64_t cpu_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

static void spin_us(long us)
{
	uint64_t end = now_ns() + (uint64_t)us * 1000u;
	while (now_ns() < end)
		;
}

static void must_io(ssize_t r, size_t want, const char *what)
{
	if (r != (ssize_t)want)
		die(what);
}

/* The child's side: ROUNDS + warm-up answers, then its CPU ns of the timed rounds on the answer pipe. */
static void pingpong_child(int rfd, int wfd, long warm, long rounds, long spin)
{
	char c;
	uint64_t c0 = 0;
	for (long i = 0; i < warm + rounds; i++) {
		if (i == warm)
			c0 = cpu_ns();
		must_io(read(rfd, &c, 1), 1, "child read");
		if (spin)
			spin_us(spin);
		must_io(write(wfd, &c, 1), 1, "child write");
	}
	uint64_t dc = cpu_ns() - c0;
	must_io(write(wfd, &dc, sizeof(dc)), sizeof(dc), "child cpu");
	exit(0);
}

static int do_pingpong(long rounds, long spin)
{
	const long warm = 1000;
	int a[2], b[2];
	if (rounds < 1 || pipe(a) || pipe(b))
		die("pipe");
	pid_t pid = fork();
	if (pid < 0)
		die("fork");
	if (pid == 0) {
		close(a[1]);
		close(b[0]);
		pingpong_child(a[0], b[1], warm, rounds, spin);
	}
	close(a[0]);
	close(b[1]);
	char c = 'x';
	uint64_t t0 = 0, c0 = 0;
	for (long i = 0; i < warm + rounds; i++) {
		if (i == warm) {
			c0 = cpu_ns();
			t0 = now_ns();
		}
		must_io(write(a[1], &c, 1), 1, "write");
		must_io(read(b[0], &c, 1), 1, "read");
	}
	uint64_t dt = now_ns() - t0, dc = cpu_ns() - c0, child = 0;
	must_io(read(b[0], &child, sizeof(child)), sizeof(child), "read child cpu");
	int st;
	if (waitpid(pid, &st, 0) != pid || !WIFEXITED(st) || WEXITSTATUS(st))
		die("child");
	double n = 2.0 * (double)rounds;
	printf("{\"handoffs\":%.0f,\"spin_us\":%ld,\"elapsed_ns\":%llu,\"ns_per_handoff\":%.1f,"
	       "\"cpu_ns_per_handoff\":%.1f,\"pid\":%d,\"child_pid\":%d}\n",
	       n, spin, (unsigned long long)dt, (double)dt / n, (double)(dc + child) / n, (int)getpid(), (int)pid);
	return 0;
}

static int do_cputime(long iters)
{
	struct timespec ts;
	uint64_t t0 = now_ns();
	for (long i = 0; i < iters; i++)
		clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
	uint64_t cpu = now_ns() - t0;
	t0 = now_ns();
	for (long i = 0; i < iters; i++)
		clock_gettime(CLOCK_MONOTONIC, &ts);
	uint64_t mono = now_ns() - t0;
	printf("{\"calls\":%ld,\"process_cputime_ns_per_call\":%.1f,\"monotonic_ns_per_call\":%.1f}\n", iters,
	       (double)cpu / (double)iters, (double)mono / (double)iters);
	return 0;
}

static int do_bench(long iters)
{
	char path[4096], buf[8192];
	struct stat st;
	/*
	 * One untimed pass first: it brings the files into the page cache and,
	 * under the preload, makes the process's trace file (its creation, a few
	 * ms once per process, is start-up, like exec, not a cost per operation).
	 */
	for (int i = 0; i < nfiles; i++) {
		file_path(path, sizeof(path), i);
		if (stat(path, &st) != 0)
			die("stat");
		int fd = open(path, O_RDONLY);
		if (fd < 0 || read(fd, buf, sizeof(buf)) < 0)
			die("warm-up");
		close(fd);
	}
	uint64_t c0 = cpu_ns();
	uint64_t t0 = now_ns();
	for (long it = 0; it < iters; it++) {
		for (int i = 0; i < nfiles; i++) {
			file_path(path, sizeof(path), i);
			if (stat(path, &st) != 0)
				die("stat");
			int fd = open(path, O_RDONLY);
			if (fd < 0)
				die("open");
			if (read(fd, buf, sizeof(buf)) < 0)
				die("read");
			close(fd);
		}
	}
	uint64_t dt = now_ns() - t0, dc = cpu_ns() - c0;
	printf("{\"iterations\":%ld,\"files\":%d,\"elapsed_ns\":%llu,\"ns_per_file\":%.1f,\"cpu_ns_per_file\":%.1f}\n",
	       iters, nfiles, (unsigned long long)dt, (double)dt / (double)(iters * nfiles),
	       (double)dc / (double)(iters * nfiles));
	return 0;
}

/*
 * kids children that exec `self run` once each (after a run of their own, before the
 * exec, when read_first); 0 when every one exited 0.
 */
static int fork_and_exec_runs(const char *self, int kids, int read_first)
{
	char nbuf[16];
	snprintf(nbuf, sizeof(nbuf), "%d", nfiles);
	for (int k = 0; k < kids; k++) {
		pid_t pid = fork();
		if (pid < 0)
			die("fork");
		if (pid == 0) {
			if (read_first)
				do_run(1); /* prints its ground truth: the same pid as after the exec */
			execl(self, "iogen", "run", dir, nbuf, "1", "1", (char *)NULL);
			_exit(127);
		}
	}
	int bad = 0, st;
	while (wait(&st) > 0)
		bad += !WIFEXITED(st) || WEXITSTATUS(st) != 0;
	return bad ? 1 : 0;
}

static int do_forkexec(const char *self, int kids)
{
	return fork_and_exec_runs(self, kids, 0);
}

/*
 * each: every wrapped entry point the `run` mode does not reach, once, on
 * known files (f000: 1000 bytes, f001: 1097 bytes) and on a pipe and a socket.
 * The bytes each call returned are printed by api name; the test knows them
 * too (sizes by construction), so both sides are checked.
 */

/* Fortify entry points: declared by glibc's headers only under _FORTIFY_SOURCE. */
int __open_2(const char *path, int flags);
int __open64_2(const char *path, int flags);
int __openat_2(int dirfd, const char *path, int flags);
int __openat64_2(int dirfd, const char *path, int flags);
ssize_t __read_chk(int fd, void *buf, size_t n, size_t buflen);
ssize_t __pread_chk(int fd, void *buf, size_t n, off_t off, size_t buflen);
ssize_t __pread64_chk(int fd, void *buf, size_t n, off64_t off, size_t buflen);
size_t __fread_chk(void *ptr, size_t ptrlen, size_t size, size_t n, FILE *fp);
size_t __fread_unlocked_chk(void *ptr, size_t ptrlen, size_t size, size_t n, FILE *fp);
int __poll_chk(struct pollfd *fds, nfds_t n, int timeout, size_t fdslen);
ssize_t __recv_chk(int fd, void *buf, size_t n, size_t buflen, int flags);

/*
 * The pre-2.33 stat entry points, bound by symbol version the way a program
 * built against an old glibc binds them (glibc >= 2.33 keeps them as compat
 * symbols only and no longer declares them).
 */
int old_xstat(int ver, const char *path, struct stat *st);
int old_xstat64(int ver, const char *path, struct stat64 *st);
int old_lxstat(int ver, const char *path, struct stat *st);
int old_lxstat64(int ver, const char *path, struct stat64 *st);
int old_fxstat(int ver, int fd, struct stat *st);
int old_fxstat64(int ver, int fd, struct stat64 *st);
int old_fxstatat(int ver, int dirfd, const char *path, struct stat *st, int flags);
int old_fxstatat64(int ver, int dirfd, const char *path, struct stat64 *st, int flags);
#if defined(__x86_64__)
__asm__(".symver old_xstat, __xstat@GLIBC_2.2.5");
__asm__(".symver old_xstat64, __xstat64@GLIBC_2.2.5");
__asm__(".symver old_lxstat, __lxstat@GLIBC_2.2.5");
__asm__(".symver old_lxstat64, __lxstat64@GLIBC_2.2.5");
__asm__(".symver old_fxstat, __fxstat@GLIBC_2.2.5");
__asm__(".symver old_fxstat64, __fxstat64@GLIBC_2.2.5");
__asm__(".symver old_fxstatat, __fxstatat@GLIBC_2.4");
__asm__(".symver old_fxstatat64, __fxstatat64@GLIBC_2.4");
#define HAVE_OLD_XSTAT 1
#else
#define HAVE_OLD_XSTAT 0
#endif

static char each_out[8192];
static size_t each_len;

/*
 * One "api":value pair of the ground truth line, and "errno_api": errno as
 * the call left it. errno is set to 4242 after each pair, so the next call
 * starts from a known value; a test compares the errno figures of a run under
 * the preload with those of a plain run (a wrapper must leave errno alone).
 */
static void put(const char *api, long v)
{
	int e = errno;
	each_len += (size_t)snprintf(each_out + each_len, sizeof(each_out) - each_len,
				     "%s\"%s\":%ld,\"errno_%s\":%d", each_len ? "," : "", api, v, api, e);
	errno = 4242;
}

static long must(const char *what, long r)
{
	if (r < 0)
		die(what);
	return r;
}

/*
 * A stat-like call that must succeed, then the size it filled in under its name.
 * NOTE: a macro because the size fields differ in type (off_t, off64_t, __u64);
 * the comma operator reads the size after the call.
 */
#define MUST_PUT_SIZE(api, call, size) (must(api, call), put(api, (long)(size)))

/* A listing's bytes as the getdents64 syscall counts them: the sum of d_reclen. */
static long list_all(DIR *d, int use64)
{
	long bytes = 0;
	if (use64) {
		struct dirent64 *e;
		while ((e = readdir64(d)))
			bytes += e->d_reclen;
	} else {
		struct dirent *e;
		while ((e = readdir(d)))
			bytes += e->d_reclen;
	}
	return bytes;
}

static int do_each(void)
{
	char p0[4096], p1[4096], pn[4096], buf[2048], dents[65536];
	struct stat st;
	struct stat64 st64;
	struct statx stx;
	file_path(p0, sizeof(p0), 0);
	file_path(p1, sizeof(p1), 1);
	errno = 4242;

	/* f000 by fd: vectored and positioned reads, fortify reads, stats of the fd. */
	int fd = (int)must("open64", open64(p0, O_RDONLY));
	struct iovec iov[2] = { { buf, 300 }, { buf + 300, 300 } };
	put("readv", must("readv", readv(fd, iov, 2)));
	struct iovec one = { buf, 100 };
	put("preadv", must("preadv", preadv(fd, &one, 1, 0)));
	put("preadv2", must("preadv2", preadv2(fd, &one, 1, 0, 0)));
	put("preadv64", must("preadv64", preadv64(fd, &one, 1, 0)));
	put("preadv64v2", must("preadv64v2", preadv64v2(fd, &one, 1, 0, 0)));
	put("pread64", must("pread64", pread64(fd, buf, 50, 0)));
	put("__read_chk", must("__read_chk", __read_chk(fd, buf, 10, sizeof(buf))));
	put("__pread_chk", must("__pread_chk", __pread_chk(fd, buf, 20, 0, sizeof(buf))));
	put("__pread64_chk", must("__pread64_chk", __pread64_chk(fd, buf, 30, 0, sizeof(buf))));
	MUST_PUT_SIZE("fstat64", fstat64(fd, &st64), st64.st_size);
	MUST_PUT_SIZE("fstatat", fstatat(fd, "", &st, AT_EMPTY_PATH), st.st_size);
	MUST_PUT_SIZE("statx", statx(fd, "", AT_EMPTY_PATH, STATX_SIZE, &stx), stx.stx_size);
#if HAVE_OLD_XSTAT
	MUST_PUT_SIZE("__fxstat", old_fxstat(1, fd, &st), st.st_size);
	MUST_PUT_SIZE("__fxstat64", old_fxstat64(1, fd, &st64), st64.st_size);
#endif
	close(fd);

	/* f000 by path: the *64 and pre-2.33 names. */
	MUST_PUT_SIZE("stat64", stat64(p0, &st64), st64.st_size);
	MUST_PUT_SIZE("lstat64", lstat64(p0, &st64), st64.st_size);
	MUST_PUT_SIZE("fstatat64", fstatat64(AT_FDCWD, p0, &st64, 0), st64.st_size);
#if HAVE_OLD_XSTAT
	MUST_PUT_SIZE("__xstat", old_xstat(1, p0, &st), st.st_size);
	MUST_PUT_SIZE("__xstat64", old_xstat64(1, p0, &st64), st64.st_size);
	MUST_PUT_SIZE("__lxstat", old_lxstat(1, p0, &st), st.st_size);
	MUST_PUT_SIZE("__lxstat64", old_lxstat64(1, p0, &st64), st64.st_size);
	MUST_PUT_SIZE("__fxstatat", old_fxstatat(1, AT_FDCWD, p0, &st, 0), st.st_size);
	MUST_PUT_SIZE("__fxstatat64", old_fxstatat64(1, AT_FDCWD, p0, &st64, 0), st64.st_size);
#endif

	/* f001: the other opens, each read to the end once through the fd it made. */
	int fds[6];
	fds[0] = (int)must("openat", openat(AT_FDCWD, p1, O_RDONLY));
	fds[1] = (int)must("openat64", openat64(AT_FDCWD, p1, O_RDONLY));
	fds[2] = (int)must("__open_2", __open_2(p1, O_RDONLY));
	fds[3] = (int)must("__open64_2", __open64_2(p1, O_RDONLY));
	fds[4] = (int)must("__openat_2", __openat_2(AT_FDCWD, p1, O_RDONLY));
	fds[5] = (int)must("__openat64_2", __openat64_2(AT_FDCWD, p1, O_RDONLY));
	long got = 0;
	for (int i = 0; i < 6; i++) {
		got += must("read", read(fds[i], buf, sizeof(buf)));
		close(fds[i]);
	}
	put("read", got);
	snprintf(pn, sizeof(pn), "%s/new0", dir);
	close((int)must("creat", creat(pn, 0644)));
	snprintf(pn, sizeof(pn), "%s/new1", dir);
	close((int)must("creat64", creat64(pn, 0644)));

	/* stdio: fopen64 of f000, freopen onto f001, freopen64 back onto f000. */
	FILE *fp = fopen64(p0, "r");
	if (!fp)
		die("fopen64");
	put("fread_unlocked", (long)(fread_unlocked)(buf, 1, 100, fp));
	put("__fread_chk", (long)__fread_chk(buf, sizeof(buf), 1, 100, fp));
	put("__fread_unlocked_chk", (long)__fread_unlocked_chk(buf, sizeof(buf), 1, 100, fp));
	fp = freopen(p1, "r", fp);
	if (!fp)
		die("freopen");
	put("fread", (long)fread(buf, 1, sizeof(buf), fp));
	fp = freopen64(p0, "r", fp);
	if (!fp)
		die("freopen64");
	fclose(fp);

	/* Listings: getdents64 to the end, readdir64, fdopendir + readdir, one stopped early. */
	int dfd = (int)must("open dir", open(dir, O_RDONLY | O_DIRECTORY));
	long r, dbytes = 0, calls = 0;
	do {
		r = must("getdents64", getdents64(dfd, dents, sizeof(dents)));
		dbytes += r;
		calls++;
	} while (r > 0);
	close(dfd);
	put("getdents64", dbytes);
	put("getdents64_calls", calls);
	DIR *d = opendir(dir);
	if (!d)
		die("opendir");
	put("readdir64", list_all(d, 1));
	closedir(d);
	dfd = (int)must("open dir", open(dir, O_RDONLY | O_DIRECTORY));
	d = fdopendir(dfd);
	if (!d)
		die("fdopendir");
	put("readdir", list_all(d, 0));
	closedir(d);
	d = opendir(dir);
	if (!d)
		die("opendir");
	struct dirent *first = readdir(d);
	put("closedir", first ? first->d_reclen : 0);
	closedir(d);

	/* Waits on a pipe: each wait, then a read of the 10 bytes that ended it. */
	int p[2];
	must("pipe", pipe(p));
	struct pollfd pfd = { p[0], POLLIN, 0 };
	struct timespec ts = { 5, 0 };
	must("write", write(p[1], "0123456789", 10));
	put("ppoll", must("ppoll", ppoll(&pfd, 1, &ts, NULL)));
	struct iovec piov = { buf, 10 };
	put("readv_pipe", must("readv", readv(p[0], &piov, 1)));
	must("write", write(p[1], "0123456789", 10));
	fd_set rd;
	FD_ZERO(&rd);
	FD_SET(p[0], &rd);
	put("pselect", must("pselect", pselect(p[0] + 1, &rd, NULL, NULL, &ts, NULL)));
	must("read", read(p[0], buf, 10));
	must("write", write(p[1], "0123456789", 10));
	put("__poll_chk", must("__poll_chk", __poll_chk(&pfd, 1, 5000, sizeof(pfd))));
	must("read", read(p[0], buf, 10));
	int ep = (int)must("epoll_create1", epoll_create1(0));
	struct epoll_event ev = { .events = EPOLLIN, .data.fd = p[0] };
	must("epoll_ctl", epoll_ctl(ep, EPOLL_CTL_ADD, p[0], &ev));
	must("write", write(p[1], "0123456789", 10));
	put("epoll_pwait", must("epoll_pwait", epoll_pwait(ep, &ev, 1, 5000, NULL)));
	must("read", read(p[0], buf, 10));
	close(ep);
	close(p[0]);
	close(p[1]);

	/* A socket pair: recvfrom, recvmsg, __recv_chk of 20, 30, 40 bytes. */
	int s[2];
	must("socketpair", socketpair(AF_UNIX, SOCK_STREAM, 0, s));
	memset(buf, 's', 40);
	must("send", send(s[1], buf, 20, 0));
	put("recvfrom", must("recvfrom", recvfrom(s[0], buf, sizeof(buf), 0, NULL, NULL)));
	must("send", send(s[1], buf, 30, 0));
	struct iovec siov = { buf, sizeof(buf) };
	struct msghdr mh = { .msg_iov = &siov, .msg_iovlen = 1 };
	put("recvmsg", must("recvmsg", recvmsg(s[0], &mh, 0)));
	must("send", send(s[1], buf, 40, 0));
	put("__recv_chk", must("__recv_chk", __recv_chk(s[0], buf, sizeof(buf), sizeof(buf), 0)));
	close(s[0]);
	close(s[1]);

	put("old_xstat", HAVE_OLD_XSTAT);
	put("pid", (long)getpid());
	printf("{%s}\n", each_out);
	fflush(stdout);
	return 0;
}

/* forkio: children that read files after fork and before exec, then read them again after. */
static int do_forkio(const char *self, int kids)
{
	return fork_and_exec_runs(self, kids, 1);
}

/*
 * reuse: the close of a TCP socket with SO_LINGER and unsent data (the peer
 * never reads) frees the fd number first, then waits up to the linger time
 * inside the syscall (Linux >= 6.6 releases the file synchronously in close).
 * An open of another thread in that second gets the same number and returns
 * long before the close does: a tracer that orders calls by their return sees
 * "open -> fd" before "close fd".
 */
struct reuse {
	int fd;			     /* the socket's number */
	volatile int closing, closed; /* set by the main thread around its close */
	int got_fd, overlapped, read_calls, pread_calls, fstat_calls;
	long read_bytes, pread_bytes, st_size;
};

static void sleep_us(long us)
{
	struct timespec ts = {us / 1000000, (us % 1000000) * 1000};
	nanosleep(&ts, NULL);
}

static void *reuse_reader(void *arg)
{
	struct reuse *r = arg;
	char path[4096], buf[512];
	while (!__atomic_load_n(&r->closing, __ATOMIC_ACQUIRE))
		sleep_us(200);
	/* F_GETFD is not a traced call: wait until the close has freed the number. */
	for (int i = 0; i < 20000 && fcntl(r->fd, F_GETFD) != -1; i++)
		sleep_us(50);
	file_path(path, sizeof(path), 0);
	int fd = open(path, O_RDONLY);
	if (fd < 0)
		die("open");
	r->got_fd = fd;
	r->overlapped = !__atomic_load_n(&r->closed, __ATOMIC_ACQUIRE);
	/* Everything else after the close has returned: its record comes before these. */
	while (!__atomic_load_n(&r->closed, __ATOMIC_ACQUIRE))
		sleep_us(200);
	struct stat st;
	if (fstat(fd, &st))
		die("fstat");
	r->fstat_calls++;
	r->st_size = st.st_size;
	for (ssize_t n;; r->read_bytes += n) {
		n = read(fd, buf, sizeof(buf));
		r->read_calls++;
		if (n < 0)
			die("read");
		if (n == 0)
			break;
	}
	ssize_t n = pread(fd, buf, 64, 0);
	if (n < 0)
		die("pread");
	r->pread_calls++;
	r->pread_bytes = n;
	close(fd);
	return NULL;
}

static int do_reuse(void)
{
	struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
	socklen_t alen = sizeof(a);
	int l = socket(AF_INET, SOCK_STREAM, 0);
	if (l < 0 || bind(l, (struct sockaddr *)&a, sizeof(a)) || listen(l, 1) ||
	    getsockname(l, (struct sockaddr *)&a, &alen))
		die("listen");
	int c = socket(AF_INET, SOCK_STREAM, 0);
	if (c < 0 || connect(c, (struct sockaddr *)&a, sizeof(a)))
		die("connect");
	int peer = accept(l, NULL, NULL);
	if (peer < 0)
		die("accept");
	/* Fill the send queue and the peer's window: the FIN cannot go out, so close lingers. */
	static char junk[65536];
	int fl = fcntl(c, F_GETFL);
	fcntl(c, F_SETFL, fl | O_NONBLOCK);
	while (send(c, junk, sizeof(junk), 0) > 0)
		;
	fcntl(c, F_SETFL, fl);
	struct linger lg = {.l_onoff = 1, .l_linger = 1};
	if (setsockopt(c, SOL_SOCKET, SO_LINGER, &lg, sizeof(lg)))
		die("SO_LINGER");

	/* c is the lowest free number once closed: 0-2, l before it; peer after. */
	struct reuse r = {.fd = c, .got_fd = -1};
	pthread_t t;
	if (pthread_create(&t, NULL, reuse_reader, &r))
		die("pthread_create");
	uint64_t t0 = now_ns();
	__atomic_store_n(&r.closing, 1, __ATOMIC_RELEASE);
	close(c);
	uint64_t close_ns = now_ns() - t0;
	__atomic_store_n(&r.closed, 1, __ATOMIC_RELEASE);
	pthread_join(t, NULL);
	close(peer);
	close(l);
	printf("{\"pid\":%d,\"socket_fd\":%d,\"fd\":%d,\"overlapped\":%d,\"close_ns\":%llu,\"fstat\":%d,"
	       "\"st_size\":%ld,\"read_calls\":%d,\"read_bytes\":%ld,\"pread_calls\":%d,\"pread_bytes\":%ld}\n",
	       (int)getpid(), c, r.got_fd, r.overlapped, (unsigned long long)close_ns, r.fstat_calls, r.st_size,
	       r.read_calls, r.read_bytes, r.pread_calls, r.pread_bytes);
	return 0;
}

static int do_dupfd(void)
{
	char path[4096], buf[512];
	file_path(path, sizeof(path), 0);
	int fd = open(path, O_RDONLY);
	if (fd < 0)
		die("open");
	int a = fcntl(fd, F_DUPFD_CLOEXEC, 0), b = fcntl64(fd, F_DUPFD, 20);
	if (a < 0 || b < 20)
		die("fcntl");
	close(fd);
	long read_bytes = 0;
	int read_calls = 0;
	for (ssize_t n;; read_bytes += n) {
		n = read(a, buf, sizeof(buf));
		read_calls++;
		if (n < 0)
			die("read");
		if (n == 0)
			break;
	}
	struct stat st;
	if (fstat(b, &st))
		die("fstat");
	ssize_t p = pread(b, buf, 64, 0);
	if (p < 0)
		die("pread");
	close(a);
	close(b);
	printf("{\"pid\":%d,\"fd\":%d,\"fd_cloexec\":%d,\"fd_20\":%d,\"read_calls\":%d,\"read_bytes\":%ld,"
	       "\"st_size\":%ld,\"pread_bytes\":%ld}\n",
	       (int)getpid(), fd, a, b, read_calls, read_bytes, (long)st.st_size, (long)p);
	return 0;
}

/* One result of badptr: "name":[r,errno]. */
static void badptr_out(const char *name, long r, int *first)
{
	printf("%s\"%s\":[%ld,%d]", *first ? "" : ",", name, r, r < 0 ? errno : 0);
	*first = 0;
}

static int do_badptr(void)
{
	/* volatile: the compiler must not know them (glibc declares these arguments nonnull) */
	const char *volatile bad = (const char *)1, *volatile nul = NULL;
	/*
	 * The calls given NULL go through pointers: glibc declares these arguments
	 * nonnull, and UBSan (make sanitize) rejects a direct call with NULL in the
	 * program itself, before the preload or the kernel could answer.
	 */
	int (*volatile open_p)(const char *, int, ...) = open;
	int (*volatile stat_p)(const char *, struct stat *) = stat;
	int (*volatile fstatat_p)(int, const char *, struct stat *, int) = fstatat;
	int (*volatile statx_p)(int, const char *, int, unsigned, struct statx *) = statx;
	char path[4096];
	struct stat st;
	struct statx sx;
	int first = 1;
	file_path(path, sizeof(path), 0);
	int fd = open(path, O_RDONLY);
	if (fd < 0)
		die("open");
	printf("{\"pid\":%d,\"fd\":%d", (int)getpid(), fd);
	first = 0;
	errno = 0;
	badptr_out("open_bad", open(bad, O_RDONLY), &first);
	badptr_out("open_null", open_p(nul, O_RDONLY), &first);
	badptr_out("openat_bad", openat(AT_FDCWD, bad, O_RDONLY), &first);
	badptr_out("creat_bad", creat(bad, 0600), &first);
	FILE *f = fopen(bad, "r");
	badptr_out("fopen_bad", f ? 0 : -1, &first);
	badptr_out("stat_bad", stat(bad, &st), &first);
	badptr_out("stat_null", stat_p(nul, &st), &first);
	badptr_out("lstat_bad", lstat(bad, &st), &first);
	badptr_out("fstatat_bad", fstatat(AT_FDCWD, bad, &st, 0), &first);
	badptr_out("statx_bad", statx(AT_FDCWD, bad, 0, STATX_SIZE, &sx), &first);
	/* valid since Linux 6.11 (EFAULT before): a stat of fd itself */
	st.st_size = -1;
	long r = fstatat_p(fd, nul, &st, AT_EMPTY_PATH);
	badptr_out("fstatat_fd_null", r, &first);
	printf(",\"fstatat_fd_null_size\":%ld", r == 0 ? (long)st.st_size : -1L);
	sx.stx_size = 0;
	r = statx_p(fd, nul, AT_EMPTY_PATH, STATX_SIZE, &sx);
	badptr_out("statx_fd_null", r, &first);
	printf(",\"statx_fd_null_size\":%ld", r == 0 ? (long)sx.stx_size : -1L);
	badptr_out("poll_bad", poll((struct pollfd *)bad, 1, 0), &first);
	badptr_out("select_bad", select(1, (fd_set *)bad, NULL, NULL, &(struct timeval){0, 0}), &first);
	close(fd);
	printf("}\n");
	return 0;
}

static int do_forkfd(void)
{
	char path[4096], other[4096], buf[512];
	file_path(path, sizeof(path), 0);
	file_path(other, sizeof(other), 1);
	int fd = open(path, O_RDONLY);
	if (fd < 0)
		die("open");
	pid_t kid = fork();
	if (kid < 0)
		die("fork");
	if (kid == 0) {
		struct stat st;
		if (stat(other, &st))
			die("stat");
		ssize_t p = pread(fd, buf, 64, 0);
		long bytes = 0;
		int calls = 0;
		for (ssize_t n;; bytes += n) {
			n = read(fd, buf, sizeof(buf));
			calls++;
			if (n < 0)
				die("read");
			if (n == 0)
				break;
		}
		if (fstat(fd, &st))
			die("fstat");
		close(fd);
		printf("{\"child\":%d,\"fd\":%d,\"pread_bytes\":%ld,\"read_calls\":%d,\"read_bytes\":%ld,"
		       "\"st_size\":%ld}\n",
		       (int)getpid(), fd, (long)p, calls, bytes, (long)st.st_size);
		fflush(stdout);
		_exit(0);
	}
	int status;
	waitpid(kid, &status, 0);
	close(fd);
	printf("{\"pid\":%d,\"child\":%d,\"fd\":%d,\"child_status\":%d}\n", (int)getpid(), (int)kid, fd, status);
	return 0;
}

static int do_memstream(void)
{
	int p[2];
	if (pipe(p) || dup2(p[0], 0) < 0 || write(p[1], "hello", 5) != 5)
		die("pipe");
	char *mem = NULL, buf[16];
	size_t len = 0;
	FILE *m = open_memstream(&mem, &len);
	if (!m)
		die("open_memstream");
	fputs("data", m);
	size_t got = fread(buf, 1, sizeof(buf), m); /* a write-only stream: 0, an error */
	int closed = fclose(m);
	free(mem);
	ssize_t n = read(0, buf, sizeof(buf));
	printf("{\"pid\":%d,\"fread\":%zu,\"fclose\":%d,\"stdin_read\":%ld}\n", (int)getpid(), got, closed, (long)n);
	return 0;
}

static int do_stale(void)
{
	char path[4096], buf[64];
	file_path(path, sizeof(path), 0);
	/* 1. pclose, then a memfd on the pipe's number */
	FILE *pp = popen("true", "r");
	if (!pp)
		die("popen");
	int pfd = fileno(pp);
	if (fread(buf, 1, 1, pp) != 0) /* a wait on the pipe: its type is known from here on */
		die("fread");
	pclose(pp);
	int m1 = memfd_create("iogen", 0);
	if (m1 < 0 || write(m1, "0123456789", 10) != 10)
		die("memfd_create");
	long r1 = pread(m1, buf, sizeof(buf), 0);
	/* 2. close_range, then a memfd on the file's number */
	int f2 = open(path, O_RDONLY);
	if (f2 < 0 || close_range((unsigned)f2, (unsigned)f2, 0))
		die("close_range");
	int m2 = memfd_create("iogen", 0);
	if (m2 < 0 || write(m2, "0123456789", 10) != 10)
		die("memfd_create");
	long r2 = pread(m2, buf, sizeof(buf), 0);
	/* 3. closefrom, then an eventfd on the file's number */
	int f3 = open(path, O_RDONLY);
	if (f3 < 0)
		die("open");
	closefrom(f3);
	int e3 = eventfd(0, 0);
	uint64_t one = 1;
	if (e3 < 0 || write(e3, &one, sizeof(one)) != sizeof(one))
		die("eventfd");
	long r3 = read(e3, buf, sizeof(uint64_t));
	printf("{\"pid\":%d,\"pipe_fd\":%d,\"memfd1\":%d,\"pread1\":%ld,\"file2\":%d,\"memfd2\":%d,"
	       "\"pread2\":%ld,\"file3\":%d,\"eventfd3\":%d,\"read3\":%ld}\n",
	       (int)getpid(), pfd, m1, r1, f2, m2, r2, f3, e3, r3);
	return 0;
}

static int do_vforkfirst(void)
{
	char path0[4096], path1[4096], buf[512];
	file_path(path0, sizeof(path0), 0);
	file_path(path1, sizeof(path1), 1);
	pid_t kid = vfork();
	if (kid < 0)
		die("vfork");
	if (kid == 0) {
		/* what a vfork child does before exec (close, dup2...), with a file: recorded nowhere */
		int fd = open(path0, O_RDONLY);
		if (fd >= 0)
			close(fd);
		_exit(fd >= 0 ? 0 : 1);
	}
	int status;
	waitpid(kid, &status, 0);
	int fd = open(path1, O_RDONLY);
	if (fd < 0)
		die("open");
	long bytes = 0;
	int calls = 0;
	for (ssize_t n;; bytes += n) {
		n = read(fd, buf, sizeof(buf));
		calls++;
		if (n <= 0)
			break;
	}
	close(fd);
	printf("{\"pid\":%d,\"ppid\":%d,\"child\":%d,\"child_status\":%d,\"read_calls\":%d,\"read_bytes\":%ld}\n",
	       (int)getpid(), (int)getppid(), (int)kid, status, calls, bytes);
	return 0;
}

struct mainexit {
	pthread_t main;
	int rounds;
};

static void *mainexit_worker(void *arg)
{
	struct mainexit *m = arg;
	char path[4096], buf[512];
	/* Returns once the main thread is in its exit (glibc waits for the kernel to clear its tid). */
	if (pthread_join(m->main, NULL))
		die("pthread_join");
	printf("{\"main_exited\":1,\"pid\":%d}\n", (int)getpid());
	fflush(stdout);
	long open_calls = 0, read_calls = 0, read_bytes = 0, close_calls = 0;
	for (int r = 0; r < m->rounds; r++) {
		if (r)
			sleep_us(100000);
		for (int i = 0; i < nfiles; i++) {
			file_path(path, sizeof(path), i);
			int fd = open(path, O_RDONLY);
			if (fd < 0)
				die("open");
			open_calls++;
			for (ssize_t n;; read_bytes += n) {
				n = read(fd, buf, sizeof(buf));
				read_calls++;
				if (n < 0)
					die("read");
				if (n == 0)
					break;
			}
			close(fd);
			close_calls++;
		}
	}
	printf("{\"pid\":%d,\"rounds\":%d,\"files\":%d,\"open\":%ld,\"read_calls\":%ld,\"read_bytes\":%ld,"
	       "\"close\":%ld}\n",
	       (int)getpid(), m->rounds, nfiles, open_calls, read_calls, read_bytes, close_calls);
	fflush(stdout);
	return NULL; /* the last thread: the process exits, status 0 */
}

static int do_mainexit(int rounds)
{
	static struct mainexit m;
	pthread_t t;
	m.main = pthread_self();
	m.rounds = rounds > 0 ? rounds : 30;
	if (pthread_create(&t, NULL, mainexit_worker, &m))
		die("pthread_create");
	pthread_exit(NULL);
}

/* A new eventfd holding 1, made on number `want` (the lower free numbers filled first); -1 if not. */
static int eventfd_on(int want)
{
	uint64_t one = 1;
	int e;
	while ((e = eventfd(0, 0)) >= 0 && e < want)
		;
	if (e != want || write(e, &one, sizeof(one)) != sizeof(one))
		return -1;
	return e;
}

static int do_closerange(const char *self)
{
	char path[4096], buf[64], a[3][16];
	uint64_t v;
	if (fcntl(8, F_GETFD) < 0 || fcntl(9, F_GETFD) < 0)
		die("fds 8 and 9 are not open");
	/* 1. an inherited fd (the collector knows it from /proc only) closed by close_range, its number reused */
	if (close_range(9, 9, 0))
		die("close_range");
	int e9 = eventfd_on(9);
	if (e9 < 0 || read(e9, &v, sizeof(v)) != sizeof(v))
		die("eventfd on 9");
	/* 2. a file closed by close_range, a memfd on its number (often the same struct file, reused) */
	int memfd = -1;
	for (int i = 0; i < nfiles; i++) {
		file_path(path, sizeof(path), 0);
		int fd = open(path, O_RDONLY);
		if (fd < 0 || close_range((unsigned)fd, (unsigned)fd, 0))
			die("open + close_range");
		memfd = memfd_create("iogen", 0);
		if (memfd != fd || write(memfd, "0123456789", 10) != 10 || pread(memfd, buf, sizeof(buf), 0) != 10)
			die("memfd on the closed number");
		close(memfd);
	}
	/* 3. fd 8 made close-on-exec (fcntl(F_SETFD): not traced), then exec: the new image reuses 8 */
	for (int fd = 3; fd <= 9; fd++)
		if (fd != 8)
			close(fd);
	if (fcntl(8, F_SETFD, FD_CLOEXEC))
		die("F_SETFD");
	snprintf(a[0], sizeof(a[0]), "%d", e9);
	snprintf(a[1], sizeof(a[1]), "%d", memfd);
	snprintf(a[2], sizeof(a[2]), "%d", nfiles);
	char *argv[] = {"iogen", "closerange-exec", (char *)dir, a[2], a[0], a[1], NULL};
	execv(self, argv);
	die("exec");
	return 1;
}

static int do_closerange_exec(int e9, int memfd)
{
	uint64_t v;
	int e8 = eventfd_on(8);
	if (e8 < 0 || read(e8, &v, sizeof(v)) != sizeof(v))
		die("eventfd on 8");
	printf("{\"pid\":%d,\"range_fd\":%d,\"memfd\":%d,\"memfd_preads\":%d,\"exec_fd\":%d}\n", (int)getpid(), e9,
	       memfd, nfiles, e8);
	return 0;
}

static int do_longpath(void)
{
	char rel[1024] = "", abs[8192], buf[64];
	size_t n = 0;
	if (chdir(dir))
		die("chdir");
	for (int i = 0; i < 11; i++) {
		memset(rel + n, 'L', 48);
		n += (size_t)snprintf(rel + n + 48, sizeof(rel) - n - 48, "%02d", i) + 48;
		if (mkdir(rel, 0755) && errno != EEXIST)
			die("mkdir");
		rel[n++] = '/';
		rel[n] = 0;
	}
	size_t dirlen = n;
	snprintf(rel + n, sizeof(rel) - n, "deepfile");
	snprintf(abs, sizeof(abs), "%s/%s", dir, rel);
	int fd = open(rel, O_WRONLY | O_CREAT | O_TRUNC, 0644);
	if (fd < 0 || write(fd, "0123456789", 10) != 10 || close(fd))
		die("create deepfile");
	const char *paths[2] = {rel, abs};
	for (int i = 0; i < 2; i++) {
		fd = open(paths[i], O_RDONLY);
		if (fd < 0 || read(fd, buf, sizeof(buf)) != 10)
			die("open deepfile");
		close(fd);
	}
	rel[dirlen] = 0;
	if (chdir(rel))
		die("chdir deep");
	fd = open("deepfile", O_RDONLY);
	if (fd < 0 || read(fd, buf, sizeof(buf)) != 10)
		die("open deepfile after chdir");
	close(fd);
	printf("{\"pid\":%d,\"rel_len\":%zu,\"abs_len\":%zu,\"dir_len\":%zu}\n", (int)getpid(), dirlen + 8,
	       strlen(abs), dirlen);
	return 0;
}

static int do_dotdot(void)
{
	char path[8192], buf[64];
	int opens = 0;
	if (chdir(dir) || (mkdir("sub", 0755) && errno != EEXIST))
		die("chdir, mkdir sub");
	for (int i = 0; i < nfiles; i++, opens++) {
		int fd;
		if (chdir("sub") || (fd = open("../f000", O_RDONLY)) < 0 || read(fd, buf, sizeof(buf)) <= 0 ||
		    close(fd) || chdir(".."))
			die("chdir sub, open ../f000");
	}
	int d = open("sub/.", O_RDONLY | O_DIRECTORY);
	int fd = d < 0 ? -1 : openat(d, "../f000", O_RDONLY);
	if (fd < 0 || read(fd, buf, sizeof(buf)) <= 0)
		die("openat(sub, ../f000)");
	close(fd);
	close(d);
	opens++;
	snprintf(path, sizeof(path), "%s//./sub/../f000", dir);
	fd = open(path, O_RDONLY);
	if (fd < 0 || read(fd, buf, sizeof(buf)) <= 0)
		die(path);
	close(fd);
	opens++;
	printf("{\"pid\":%d,\"opens\":%d}\n", (int)getpid(), opens);
	return 0;
}

/* fd passed to itself over a Unix socket pair: a new fd on the same open file, born of recvmsg */
static int pass_fd(int fd)
{
	int sv[2], got;
	char byte = 'x', cbuf[CMSG_SPACE(sizeof(int))];
	struct iovec io = {.iov_base = &byte, .iov_len = 1};
	struct msghdr mh = {.msg_iov = &io, .msg_iovlen = 1, .msg_control = cbuf, .msg_controllen = sizeof(cbuf)};
	if (socketpair(AF_UNIX, SOCK_STREAM, 0, sv))
		die("socketpair");
	struct cmsghdr *cm = CMSG_FIRSTHDR(&mh);
	cm->cmsg_level = SOL_SOCKET;
	cm->cmsg_type = SCM_RIGHTS;
	cm->cmsg_len = CMSG_LEN(sizeof(int));
	memcpy(CMSG_DATA(cm), &fd, sizeof(fd));
	if (sendmsg(sv[0], &mh, 0) != 1 || recvmsg(sv[1], &mh, 0) != 1 || !(cm = CMSG_FIRSTHDR(&mh)) ||
	    cm->cmsg_type != SCM_RIGHTS)
		die("SCM_RIGHTS");
	memcpy(&got, CMSG_DATA(cm), sizeof(got));
	close(sv[0]);
	close(sv[1]);
	return got;
}

static int do_fchdirfd(void)
{
	static const char *const subs[] = {"one", "two"};
	char path[8192], buf[64];
	for (int i = 0; i < 2; i++) {
		snprintf(path, sizeof(path), "%s/%s", dir, subs[i]);
		if (mkdir(path, 0755) && errno != EEXIST)
			die("mkdir");
		snprintf(path, sizeof(path), "%s/%s/data", dir, subs[i]);
		int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0644);
		if (fd < 0 || write(fd, subs[i], 3) != 3 || close(fd))
			die(path);
	}
	snprintf(path, sizeof(path), "%s/one", dir);
	if (chdir(path))
		die("chdir one");
	snprintf(path, sizeof(path), "%s/two", dir);
	int d = open(path, O_RDONLY | O_DIRECTORY);
	if (d < 0)
		die("open two");
	int r = pass_fd(d);
	close(d);
	if (fchdir(r))
		die("fchdir");
	close(r);
	int fd = open("data", O_RDONLY);
	ssize_t n = fd < 0 ? -1 : read(fd, buf, sizeof(buf));
	if (n != 3 || memcmp(buf, "two", 3))
		die("read two/data");
	close(fd);
	printf("{\"pid\":%d,\"fd\":%d,\"received_fd\":%d}\n", (int)getpid(), fd, r);
	return 0;
}

/* Wait (up to 5 s) until thread tid of process pid is blocked in syscall nr: /proc/PID/task/TID/syscall. */
static void wait_blocked_in(pid_t pid, pid_t tid, long nr)
{
	char path[64], buf[128];
	snprintf(path, sizeof(path), "/proc/%d/task/%d/syscall", (int)pid, (int)tid);
	for (int i = 0; i < 5000; i++) {
		int fd = open(path, O_RDONLY);
		ssize_t n = fd < 0 ? -1 : read(fd, buf, sizeof(buf) - 1);
		if (fd >= 0)
			close(fd);
		if (n > 0) {
			buf[n] = 0;
			if (strtol(buf, NULL, 10) == nr && buf[0] != 'r') /* "running" when not in a syscall */
				return;
		}
		sleep_us(1000); /* NOTE: no pipe can say "the other thread is now asleep in the kernel" */
	}
	fprintf(stderr, "iogen: thread %d never blocked in syscall %ld\n", (int)tid, nr);
	exit(1);
}

static int eintr_wake = -1;		/* the handler writes a byte here */
static volatile uint64_t eintr_handled_ns; /* when the handler ran */

static void eintr_handler(int sig)
{
	(void)sig;
	eintr_handled_ns = now_ns();
	if (eintr_wake >= 0 && write(eintr_wake, "w", 1) != 1)
		_exit(3);
}

struct eintr_kick {
	pid_t tid; /* the main thread */
	long nr;   /* the syscall it will block in */
	int sync;  /* >= 0: after the signal, wait for the handler's byte here, then open fifo for writing */
	const char *fifo;
	pthread_t main;
};

static void *eintr_kicker(void *arg)
{
	struct eintr_kick *k = arg;
	char b;
	wait_blocked_in(getpid(), k->tid, k->nr);
	pthread_kill(k->main, SIGUSR1);
	if (k->sync >= 0) {
		int w;
		if (read(k->sync, &b, 1) != 1 || (w = open(k->fifo, O_WRONLY)) < 0 || write(w, "x", 1) != 1)
			die("fifo writer");
		close(w);
	}
	return NULL;
}

static void eintr_setup(int flags, int wake)
{
	struct sigaction sa = {.sa_handler = eintr_handler, .sa_flags = flags};
	sigemptyset(&sa.sa_mask);
	eintr_wake = wake;
	if (sigaction(SIGUSR1, &sa, NULL))
		die("sigaction");
}

static pthread_t eintr_kick(struct eintr_kick *k, long nr, int sync, const char *fifo)
{
	pthread_t t;
	*k = (struct eintr_kick){.tid = (pid_t)syscall(SYS_gettid), .nr = nr, .sync = sync, .fifo = fifo,
				 .main = pthread_self()};
	if (pthread_create(&t, NULL, eintr_kicker, k))
		die("pthread_create");
	return t;
}

static int do_eintr(void)
{
	char fifo[4096], buf[64];
	struct eintr_kick k;
	int p[2], sync[2], q[2];
	if (pipe(p) || pipe(sync) || pipe(q))
		die("pipe");
	/* 1. a read restarted (SA_RESTART): the handler writes the byte the restarted read gets */
	eintr_setup(SA_RESTART, p[1]);
	pthread_t t = eintr_kick(&k, SYS_read, -1, NULL);
	uint64_t t0 = now_ns();
	ssize_t r1 = read(p[0], buf, sizeof(buf));
	uint64_t h1 = eintr_handled_ns;
	pthread_join(t, NULL);
	/* 2. the same without SA_RESTART: EINTR, then the program reads again */
	eintr_setup(0, p[1]);
	t = eintr_kick(&k, SYS_read, -1, NULL);
	ssize_t r2 = read(p[0], buf, sizeof(buf));
	int e2 = errno;
	pthread_join(t, NULL);
	ssize_t r3 = read(p[0], buf, sizeof(buf));
	/* 3. an open of a FIFO (it waits for a writer) restarted; the second thread is the writer */
	snprintf(fifo, sizeof(fifo), "%s/fifo", dir);
	unlink(fifo);
	if (mkfifo(fifo, 0600))
		die("mkfifo");
	eintr_setup(SA_RESTART, sync[1]);
	t = eintr_kick(&k, SYS_openat, sync[0], fifo);
	int ff = open(fifo, O_RDONLY);
	uint64_t h3 = eintr_handled_ns;
	if (ff < 0 || read(ff, buf, sizeof(buf)) != 1)
		die("fifo reader");
	close(ff);
	pthread_join(t, NULL);
	/* 4. a child killed while blocked in a read (no handler: the call is never finished) */
	pid_t kid = fork();
	if (kid == 0) {
		signal(SIGTERM, SIG_DFL);
		read(q[0], buf, sizeof(buf));
		_exit(0);
	}
	wait_blocked_in(kid, kid, SYS_read);
	kill(kid, SIGTERM);
	int status;
	waitpid(kid, &status, 0);
	printf("{\"pid\":%d,\"pipe_fd\":%d,\"t0\":%llu,\"handled1\":%llu,\"read1\":%ld,\"read2\":%ld,"
	       "\"errno2\":%d,\"read3\":%ld,\"fifo_fd\":%d,\"handled3\":%llu,\"child\":%d,\"child_fd\":%d,"
	       "\"child_killed\":%d}\n",
	       (int)getpid(), p[0], (unsigned long long)t0, (unsigned long long)h1, (long)r1, (long)r2, e2, (long)r3,
	       ff, (unsigned long long)h3, (int)kid, q[0], WIFSIGNALED(status) && WTERMSIG(status) == SIGTERM);
	return 0;
}

/* ------------------------------------------------------------------ stdio */

char *__fgets_chk(char *s, size_t size, int n, FILE *fp);
ssize_t __getdelim(char **line, size_t *n, int delim, FILE *fp);
int _IO_getc(FILE *fp);
int __uflow(FILE *fp);
int __underflow(FILE *fp);

static int vscan(FILE *fp, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	int r = vfscanf(fp, fmt, ap); /* __isoc99_vfscanf under -std=gnu11 */
	va_end(ap);
	return r;
}

typedef int (*vscanf_fn)(FILE *, const char *, va_list);
static vscanf_fn plain_vfscanf;

static int vscan_plain(FILE *fp, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	int r = plain_vfscanf(fp, fmt, ap);
	va_end(ap);
	return r;
}

/*
 * The functions by address, so that each is called under its own name: with
 * optimisation, <stdio.h> inlines getline as __getdelim and getc_unlocked and
 * fgetc_unlocked as the buffer test plus __uflow (case 11 keeps that form).
 */
static char *(*volatile p_fgets)(char *, int, FILE *) = fgets;
static char *(*volatile p_fgets_unlocked)(char *, int, FILE *) = fgets_unlocked;
static char *(*volatile p_fgets_chk)(char *, size_t, int, FILE *) = __fgets_chk;
static ssize_t (*volatile p_getline)(char **, size_t *, FILE *) = getline;
static ssize_t (*volatile p_getdelim)(char **, size_t *, int, FILE *) = getdelim;
static ssize_t (*volatile p___getdelim)(char **, size_t *, int, FILE *) = __getdelim;
static int (*volatile p_fgetc)(FILE *) = fgetc;
static int (*volatile p_getc)(FILE *) = (getc);
static int (*volatile p_IO_getc)(FILE *) = _IO_getc;
static int (*volatile p_fgetc_unlocked)(FILE *) = (fgetc_unlocked);
static int (*volatile p_getc_unlocked)(FILE *) = (getc_unlocked);
static int (*volatile p_underflow)(FILE *) = __underflow;

/* Bytes taken from fp to EOF by function k (numbers for the scanf ones); -1 for an unknown k. */
static long stdio_read_all(int k, FILE *fp)
{
	long took = 0;
	char buf[128], *line = NULL;
	size_t cap = 0, n;
	ssize_t r;
	int c, x;
	int (*plain_fscanf)(FILE *, const char *, ...) = (int (*)(FILE *, const char *, ...))dlsym(RTLD_DEFAULT, "fscanf");
	switch (k) {
	case 0: while (p_fgets(buf, sizeof(buf), fp)) took += (long)strlen(buf); break;
	case 1: while (p_fgets_unlocked(buf, sizeof(buf), fp)) took += (long)strlen(buf); break;
	case 2: while (p_fgets_chk(buf, sizeof(buf), sizeof(buf), fp)) took += (long)strlen(buf); break;
	case 3: while ((r = p_getline(&line, &cap, fp)) > 0) took += r; break;
	case 4: while ((r = p_getdelim(&line, &cap, ' ', fp)) > 0) took += r; break; /* no space: one call */
	case 5: while ((r = p___getdelim(&line, &cap, '\n', fp)) > 0) took += r; break;
	case 6: while (p_fgetc(fp) != EOF) took++; break;
	case 7: while (p_getc(fp) != EOF) took++; break;
	case 8: while (p_IO_getc(fp) != EOF) took++; break;
	case 9: while (p_fgetc_unlocked(fp) != EOF) took++; break;
	case 10: while (p_getc_unlocked(fp) != EOF) took++; break;
	case 11: while ((c = getc_unlocked(fp)) != EOF) took++; break; /* the macro: __uflow when empty */
	case 12: /* fills the buffer and takes nothing; the rest by fread */
		if (p_underflow(fp) != EOF)
			while ((n = fread(buf, 1, sizeof(buf), fp)) > 0)
				took += (long)n;
		break;
	case 13: while (fscanf(fp, "%d", &x) == 1) took++; break;
	case 14: while (vscan(fp, "%d", &x) == 1) took++; break;
	case 15: while (plain_fscanf && plain_fscanf(fp, "%d", &x) == 1) took++; break;
	case 16: while (plain_vfscanf && vscan_plain(fp, "%d", &x) == 1) took++; break;
	case 17: /* a header line, then the body by fread: each byte read from the file once */
		if (p_fgets(buf, sizeof(buf), fp)) {
			took += (long)strlen(buf);
			while ((n = fread(buf, 1, sizeof(buf), fp)) > 0)
				took += (long)n;
		}
		break;
	default: return -1;
	}
	(void)c;
	free(line);
	return took;
}

static const char *const stdio_names[] = {"fgets", "fgets_unlocked", "__fgets_chk", "getline", "getdelim",
					  "__getdelim", "fgetc", "getc", "_IO_getc", "fgetc_unlocked",
					  "getc_unlocked", "__uflow", "__underflow", "__isoc99_fscanf",
					  "__isoc99_vfscanf", "fscanf", "vfscanf", "fgets+fread"};

static int do_stdio(void)
{
	char path[4096], path2[4096];
	snprintf(path, sizeof(path), "%s/text", dir);
	snprintf(path2, sizeof(path2), "%s/text2", dir);
	for (int f = 0; f < 2; f++) {
		FILE *w = fopen(f ? path2 : path, "we");
		if (!w)
			die("fopen text");
		for (int i = 0; i < 4000; i++)
			fprintf(w, "%d\n", 100000 + i * 7);
		if (fclose(w))
			die("fclose text");
	}
	struct stat st;
	if (stat(path, &st))
		die("stat text");
	plain_vfscanf = (vscanf_fn)dlsym(RTLD_DEFAULT, "vfscanf");
	printf("{\"pid\":%d,\"size\":%lld,\"blksize\":%ld", (int)getpid(), (long long)st.st_size,
	       (long)st.st_blksize);
	for (int k = 0; k < (int)(sizeof(stdio_names) / sizeof(stdio_names[0])); k++) {
		FILE *fp = fopen(k == 17 ? path2 : path, "re"); /* the mix on a file of its own */
		if (!fp)
			die("fopen");
		printf(",\"%s\":%ld", stdio_names[k], stdio_read_all(k, fp));
		fclose(fp);
	}
	printf("}\n");
	return 0;
}

/* ------------------------------------------------------------------- main */

int main(int argc, char **argv)
{
	if (argc < 3) {
		fprintf(stderr, "usage: iogen setup|run|pipe|pingpong|cputime|bench|forkexec|forkio|each|exit|reuse|dupfd|badptr|forkfd|memstream|stale|vforkfirst|mainexit|closerange|longpath|dotdot|fchdirfd|eintr ...\n");
		return 2;
	}
	const char *mode = argv[1];
	if (!strcmp(mode, "pipe"))
		return do_pipe(atoi(argv[2]), argc > 3 ? atoi(argv[3]) : 50);
	if (!strcmp(mode, "pingpong"))
		return do_pingpong(atol(argv[2]), argc > 3 ? atol(argv[3]) : 0);
	if (!strcmp(mode, "cputime"))
		return do_cputime(atol(argv[2]));
	if (argc < 4) {
		fprintf(stderr, "iogen %s: DIR N missing\n", mode);
		return 2;
	}
	dir = argv[2];
	nfiles = atoi(argv[3]);
	if (nfiles < 1 || nfiles > 999)
		nfiles = 1;
	loops = 1;
	if (!strcmp(mode, "setup")) {
		fixed_size = argc > 4 ? atol(argv[4]) : 0;
		if (fixed_size > 8192)
			fixed_size = 8192;
		return do_setup();
	}
	if (!strcmp(mode, "run")) {
		loops = argc > 5 ? atoi(argv[5]) : 1;
		return do_run(argc > 4 ? atoi(argv[4]) : 1);
	}
	if (!strcmp(mode, "bench"))
		return do_bench(argc > 4 ? atol(argv[4]) : 100);
	if (!strcmp(mode, "forkexec"))
		return do_forkexec("/proc/self/exe", argc > 4 ? atoi(argv[4]) : 2);
	if (!strcmp(mode, "each"))
		return nfiles < 2 ? 2 : do_each();
	if (!strcmp(mode, "forkio"))
		return do_forkio("/proc/self/exe", argc > 4 ? atoi(argv[4]) : 2);
	if (!strcmp(mode, "reuse"))
		return do_reuse();
	if (!strcmp(mode, "dupfd"))
		return do_dupfd();
	if (!strcmp(mode, "badptr"))
		return do_badptr();
	if (!strcmp(mode, "forkfd"))
		return do_forkfd();
	if (!strcmp(mode, "memstream"))
		return do_memstream();
	if (!strcmp(mode, "stale"))
		return do_stale();
	if (!strcmp(mode, "vforkfirst"))
		return do_vforkfirst();
	if (!strcmp(mode, "mainexit"))
		return do_mainexit(argc > 4 ? atoi(argv[4]) : 30);
	if (!strcmp(mode, "eintr"))
		return do_eintr();
	if (!strcmp(mode, "fchdirfd"))
		return do_fchdirfd();
	if (!strcmp(mode, "dotdot"))
		return do_dotdot();
	if (!strcmp(mode, "longpath"))
		return do_longpath();
	if (!strcmp(mode, "closerange"))
		return do_closerange("/proc/self/exe");
	if (!strcmp(mode, "closerange-exec"))
		return argc < 6 ? 2 : do_closerange_exec(atoi(argv[4]), atoi(argv[5]));
	if (!strcmp(mode, "stdio"))
		return do_stdio();
	if (!strcmp(mode, "exit")) {
		do_run(1);
		_exit(0);
	}
	fprintf(stderr, "iogen: unknown mode %s\n", mode);
	return 2;
}
