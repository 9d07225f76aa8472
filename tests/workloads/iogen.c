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
 *   iogen bench DIR N ITERS        the small-file loop: stat + open + read + close
 *                                  of each file, ITERS rounds; prints elapsed and
 *                                  CPU ns per file
 *   iogen forkexec DIR N KIDS      KIDS children: fork, then exec "iogen run DIR N 1 1"
 *   iogen exit DIR N               run DIR N 1 1, then _exit(0) without any clean-up
 *
 * Divided into: helpers, the modes, main.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <stdint.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
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

static int do_bench(long iters)
{
	char path[4096], buf[8192];
	struct stat st;
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

static int do_forkexec(const char *self, int kids)
{
	char nbuf[16];
	snprintf(nbuf, sizeof(nbuf), "%d", nfiles);
	for (int k = 0; k < kids; k++) {
		pid_t pid = fork();
		if (pid < 0)
			die("fork");
		if (pid == 0) {
			execl(self, "iogen", "run", dir, nbuf, "1", "1", (char *)NULL);
			_exit(127);
		}
	}
	int bad = 0, st;
	while (wait(&st) > 0)
		bad += !WIFEXITED(st) || WEXITSTATUS(st) != 0;
	return bad ? 1 : 0;
}

/* ------------------------------------------------------------------- main */

int main(int argc, char **argv)
{
	if (argc < 3) {
		fprintf(stderr, "usage: iogen setup|run|pipe|bench|forkexec|exit ...\n");
		return 2;
	}
	const char *mode = argv[1];
	if (!strcmp(mode, "pipe"))
		return do_pipe(atoi(argv[2]), argc > 3 ? atoi(argv[3]) : 50);
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
	if (!strcmp(mode, "exit")) {
		do_run(1);
		_exit(0);
	}
	fprintf(stderr, "iogen: unknown mode %s\n", mode);
	return 2;
}
