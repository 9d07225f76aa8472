/*
 * bpfgen.c - a workload with known file input, for the eBPF collector's tests.
 *
 *   bpfgen DIR N [--fork]
 *   bpfgen DIR N --spin
 *   bpfgen DIR N --extra
 *   bpfgen DIR N --prefork | --thread
 *   bpfgen DIR N --storm NPROC NREADS
 *
 * DIR holds files f0 .. f(N-1) (made by the test, any sizes). The program:
 *   1. lists DIR once (opendir/readdir: getdents64) from the main thread;
 *   2. reads every file from 3 threads, thread t taking the files i with
 *      i % 3 == t, each file the same way: stat(path), open, read to EOF in
 *      BPFGEN_BUF-byte calls (thread 0 read, 1 pread, 2 readv), fstat(fd),
 *      close: per file 1 open, 2 stats, ceil(size/BPFGEN_BUF) + 1 reads (the
 *      last one returns 0), 1 close;
 *   3. writes BPFGEN_PIPE_BYTES bytes into a pipe and reads them back with one
 *      read (a loader wait: the way a trainer receives a batch from a worker);
 *   4. with --fork: forks a child that execs `bpfgen DIR N --child`, which
 *      reads every file the same way from its one thread, and waits for it.
 *
 * --spin reads every file as the child does, from its one thread, prints its
 * JSON line, then spins on its CPU without a syscall until killed (5 s at
 * most): a traced process that is still running, its last calls not yet
 * handed over, when the collector is stopped.
 *
 * --extra does only this, from the main thread, with files f4..f7 (N >= 8):
 * chdir(DIR); openat(AT_FDCWD, "f4"); preadv 1000 bytes at 0; the raw fstat
 * syscall; preadv2 of its last byte (f4 has 1001); dup; read 1000 bytes
 * through the dup; close both; open DIR; statx(dirfd, "f5"); openat2(dirfd,
 * "f6") and close; chdir("/"); fchdir(dirfd); stat("f7"); close(dirfd).
 * Relative paths, dirfds, dup and every traced syscall glibc does not use
 * for the plain calls.
 *
 * --prefork and --thread make a job that is already running, with its
 * processes or threads, when the collector is started on it (by hand, on a
 * trainer and its DataLoader workers). --prefork forks a child, which forks a
 * grandchild, and prints {"pid": P, "child_pid": C, "grandchild_pid": G}
 * once both exist; each of the two then reads one byte from stdin (the test
 * releases them once the collector is ready) and every file as the child
 * above does. --thread starts one thread, which prints {"pid": P, "tid": T},
 * reads one byte from stdin, then every file the same way.
 *
 * --storm NPROC NREADS (after DIR N) is a storm of traced calls, for the
 * lost-event tests: NPROC (1..64) children each open DIR/f1 (at least 1 byte), pread
 * its first byte NREADS times, close it and _exit (no stdio: exactly NREADS + 2
 * traced calls, open, reads and close, none other); the parent waits for them
 * and prints {"procs": NPROC, "reads": NREADS}, exits 1 when a child failed.
 * RATIONALE: file reads, input; reads of /dev/zero are not (a character
 * device: no record, docs/bpf.md).
 *
 * Otherwise prints one JSON line: {"pid": P, "child_pid": C, "files": N, "bytes": B}
 * where B is the bytes the parent's threads read (the child reads as many).
 */
#include <dirent.h>
#include <fcntl.h>
#include <pthread.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/uio.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define BPFGEN_BUF	  1000
#define BPFGEN_THREADS	  3
#define BPFGEN_PIPE_BYTES 100

static const char *dir;
static int nfiles;

struct job {
	int thread; /* 0..2, or -1: every file */
	int how;    /* 0 read, 1 pread, 2 readv */
	long long bytes;
};

static long long read_file(const char *path, int how)
{
	char buf[BPFGEN_BUF];
	struct stat st;
	long long total = 0;
	ssize_t n;

	if (stat(path, &st))
		return -1;
	int fd = open(path, O_RDONLY);
	if (fd < 0)
		return -1;
	do {
		if (how == 1) {
			n = pread(fd, buf, sizeof(buf), total);
		} else if (how == 2) {
			struct iovec iov[2] = {{buf, BPFGEN_BUF / 2}, {buf + BPFGEN_BUF / 2, BPFGEN_BUF / 2}};
			n = readv(fd, iov, 2);
		} else {
			n = read(fd, buf, sizeof(buf));
		}
		if (n > 0)
			total += n;
	} while (n > 0);
	fstat(fd, &st);
	close(fd);
	return total;
}

static void *run_job(void *arg)
{
	struct job *j = arg;
	char path[4096];
	for (int i = 0; i < nfiles; i++) {
		if (j->thread >= 0 && i % BPFGEN_THREADS != j->thread)
			continue;
		snprintf(path, sizeof(path), "%s/f%d", dir, i);
		long long n = read_file(path, j->how);
		if (n < 0) {
			fprintf(stderr, "bpfgen: %s: cannot read\n", path);
			exit(1);
		}
		j->bytes += n;
	}
	return NULL;
}

/* Raw syscalls: the kernel's struct open_how, without needing <linux/openat2.h>. */
struct bpfgen_open_how {
	unsigned long long flags, mode, resolve;
};

static int extra(void)
{
	char buf[BPFGEN_BUF];
	struct stat st;
	struct statx stx;
	struct iovec iov[2] = {{buf, BPFGEN_BUF / 2}, {buf + BPFGEN_BUF / 2, BPFGEN_BUF / 2}};
	struct bpfgen_open_how how = {.flags = O_RDONLY};

	if (chdir(dir))
		return 1;
	int fd = openat(AT_FDCWD, "f4", O_RDONLY);
	if (fd < 0 || preadv(fd, iov, 2, 0) != BPFGEN_BUF || syscall(SYS_fstat, fd, &st))
		return 1;
	/* preadv2 (Python's os.preadv): the last byte of f4 (1001 bytes), flags 0 */
	if (preadv2(fd, iov, 2, BPFGEN_BUF, 0) != 1)
		return 1;
	int nfd = dup(fd);
	if (nfd < 0 || read(nfd, buf, sizeof(buf)) != BPFGEN_BUF)
		return 1;
	close(nfd);
	close(fd);
	int dfd = open(dir, O_RDONLY | O_DIRECTORY);
	if (dfd < 0 || statx(dfd, "f5", 0, STATX_SIZE, &stx))
		return 1;
	fd = (int)syscall(SYS_openat2, dfd, "f6", &how, sizeof(how));
	if (fd < 0)
		return 1;
	close(fd);
	if (chdir("/") || fchdir(dfd) || stat("f7", &st))
		return 1;
	close(dfd);
	return 0;
}

/* Wait for the test's byte on stdin, then read every file from this one thread. */
static void *gated_reader(void *arg)
{
	struct job j = {.thread = -1, .how = 0};
	char c;
	if (arg) {
		printf("{\"pid\": %d, \"tid\": %d}\n", (int)getpid(), (int)syscall(SYS_gettid));
		fflush(stdout);
	}
	if (read(0, &c, 1) != 1)
		exit(3);
	run_job(&j);
	return NULL;
}

static int wait_ok(pid_t pid)
{
	int status = 0;
	return waitpid(pid, &status, 0) == pid && WIFEXITED(status) && WEXITSTATUS(status) == 0 ? 0 : 1;
}

/* --prefork: parent -> child -> grandchild, all running before the collector starts. */
static int prefork(void)
{
	int p[2];
	pid_t grandchild = 0;
	if (pipe(p))
		return 1;
	pid_t child = fork();
	if (child < 0)
		return 1;
	if (child == 0) {
		pid_t g = fork();
		if (g == 0) {
			close(p[0]);
			close(p[1]);
			gated_reader(NULL);
			_exit(0);
		}
		if (g < 0 || write(p[1], &g, sizeof(g)) != (ssize_t)sizeof(g))
			_exit(1);
		close(p[0]);
		close(p[1]);
		gated_reader(NULL);
		_exit(wait_ok(g));
	}
	close(p[1]);
	if (read(p[0], &grandchild, sizeof(grandchild)) != (ssize_t)sizeof(grandchild))
		return 1;
	close(p[0]);
	printf("{\"pid\": %d, \"child_pid\": %d, \"grandchild_pid\": %d}\n", (int)getpid(), (int)child,
	       (int)grandchild);
	fflush(stdout);
	return wait_ok(child);
}

/* --storm: one child's calls, exactly NREADS + 2 traced ones (open, preads, close), then _exit. */
static void storm_child(const char *path, long nreads)
{
	char c;
	long k = 0;
	int fd = open(path, O_RDONLY);
	while (fd >= 0 && k < nreads && pread(fd, &c, 1, 0) == 1)
		k++;
	_exit(fd < 0 || k < nreads || close(fd) ? 1 : 0);
}

static int storm(int nproc, long nreads)
{
	char path[4096];
	pid_t pids[64];
	int failed = 0;
	if (nproc < 1 || nproc > 64)
		return 2;
	snprintf(path, sizeof(path), "%s/f1", dir);
	for (int i = 0; i < nproc; i++)
		if ((pids[i] = fork()) == 0)
			storm_child(path, nreads);
	for (int i = 0; i < nproc; i++)
		failed |= pids[i] < 0 || wait_ok(pids[i]);
	printf("{\"procs\": %d, \"reads\": %ld}\n", nproc, nreads);
	return failed;
}

int main(int argc, char **argv)
{
	if (argc < 3) {
		fprintf(stderr, "usage: bpfgen DIR N [--fork|--child]\n");
		return 2;
	}
	dir = argv[1];
	nfiles = atoi(argv[2]);
	int fork_child = argc > 3 && !strcmp(argv[3], "--fork");
	int is_child = argc > 3 && !strcmp(argv[3], "--child");

	if (argc > 3 && !strcmp(argv[3], "--prefork"))
		return prefork();
	if (argc > 5 && !strcmp(argv[3], "--storm"))
		return storm(atoi(argv[4]), atol(argv[5]));
	if (argc > 3 && !strcmp(argv[3], "--thread")) {
		pthread_t t;
		if (pthread_create(&t, NULL, gated_reader, "tid"))
			return 1;
		pthread_join(t, NULL);
		return 0;
	}

	if (argc > 3 && !strcmp(argv[3], "--extra")) {
		if (extra()) {
			perror("bpfgen --extra");
			return 1;
		}
		printf("{\"pid\": %d, \"child_pid\": 0, \"files\": %d, \"bytes\": 0}\n", (int)getpid(), nfiles);
		return 0;
	}

	if (is_child) {
		struct job j = {.thread = -1, .how = 0};
		run_job(&j);
		return 0;
	}

	if (argc > 3 && !strcmp(argv[3], "--spin")) {
		/*
		 * Kept on its CPU from now on (best effort: real-time class, root
		 * only): a switch would hand the calls over, the very thing the
		 * test wants not to happen before the collector stops.
		 */
		cpu_set_t set;
		struct sched_param sp = {.sched_priority = 1};
		CPU_ZERO(&set);
		CPU_SET(sched_getcpu(), &set);
		sched_setaffinity(0, sizeof(set), &set);
		sched_setscheduler(0, SCHED_FIFO, &sp);
		struct job j = {.thread = -1, .how = 0};
		run_job(&j);
		printf("{\"pid\": %d, \"child_pid\": 0, \"files\": %d, \"bytes\": %lld}\n", (int)getpid(), nfiles,
		       (long long)j.bytes);
		fflush(stdout);
		/* No syscall (the clock is the vDSO's) until killed, or 5 s at most. */
		struct timespec t0, t;
		clock_gettime(CLOCK_MONOTONIC, &t0);
		do
			clock_gettime(CLOCK_MONOTONIC, &t);
		while (t.tv_sec - t0.tv_sec < 5);
		return 0;
	}

	DIR *d = opendir(dir);
	if (!d) {
		fprintf(stderr, "bpfgen: %s: cannot list\n", dir);
		return 1;
	}
	while (readdir(d))
		;
	closedir(d);

	pthread_t th[BPFGEN_THREADS];
	struct job jobs[BPFGEN_THREADS];
	for (int t = 0; t < BPFGEN_THREADS; t++) {
		jobs[t] = (struct job){.thread = t, .how = t};
		pthread_create(&th[t], NULL, run_job, &jobs[t]);
	}
	long long bytes = 0;
	for (int t = 0; t < BPFGEN_THREADS; t++) {
		pthread_join(th[t], NULL);
		bytes += jobs[t].bytes;
	}

	int p[2];
	char msg[BPFGEN_PIPE_BYTES] = {0};
	if (pipe(p) || write(p[1], msg, sizeof(msg)) != (ssize_t)sizeof(msg) ||
	    read(p[0], msg, sizeof(msg)) != (ssize_t)sizeof(msg)) {
		fprintf(stderr, "bpfgen: pipe round trip failed\n");
		return 1;
	}
	close(p[0]);
	close(p[1]);

	pid_t child = 0;
	if (fork_child) {
		child = fork();
		if (child == 0) {
			execl("/proc/self/exe", "bpfgen", dir, argv[2], "--child", (char *)NULL);
			_exit(127);
		}
		int status = 0;
		waitpid(child, &status, 0);
		if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
			fprintf(stderr, "bpfgen: child failed\n");
			return 1;
		}
	}
	printf("{\"pid\": %d, \"child_pid\": %d, \"files\": %d, \"bytes\": %lld}\n", (int)getpid(), (int)child, nfiles,
	       bytes);
	return 0;
}
