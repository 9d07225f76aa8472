/*
 * iolimits.c - the input calls that the libc wrappers once missed or
 * miscounted, for tests/e2e/test_io_limits.c. Each mode prints what it did as
 * one JSON line (bytes taken, bytes copied, entries listed), computed by the
 * program itself, never by stepprof.
 *
 *   iolimits recv DIR     a stream socket pair: 64 bytes peeked with recv
 *                         (MSG_PEEK), then taken with recv; 48 peeked with
 *                         recvmsg (MSG_PEEK), taken with recvfrom; a datagram
 *                         pair: a 100-byte datagram received into 10 bytes with
 *                         MSG_TRUNC by recv (which returns 100), another by
 *                         recvmsg; three datagrams (10, 20, 30 bytes) taken by
 *                         one recvmmsg; a pipe in an epoll set waited on with
 *                         epoll_pwait2
 *   iolimits copy DIR     DIR/src (100000 bytes, written here) copied to
 *                         DIR/dst1 by sendfile and to DIR/dst2 by
 *                         copy_file_range, in 4 calls of 25000 bytes each
 *   iolimits scandir DIR  DIR listed by scandir (no filter), scandir64 with a
 *                         filter that stats every entry it is shown and keeps
 *                         the names starting with 'f', and scandirat(AT_FDCWD)
 *                         with alphasort; the bytes of the entries each call
 *                         read (the d_reclen of every entry the filter saw, or
 *                         of every entry returned without a filter)
 *   iolimits nftw DIR     a tree DIR/t (files a1 a2, directories sub with
 *                         b1 b2 b3, and empty) walked by nftw twice: in
 *                         pre-order, then with FTW_DEPTH | FTW_PHYS; the
 *                         callback reads each regular file (512 B buffer) to EOF.
 *                         Truth: the entries called back, their st_size, the
 *                         files read and their bytes, and each directory's
 *                         bytes as the raw getdents64 syscall returns them
 *   iolimits fifo DIR     a FIFO DIR/fifo opened by its path and fstat'ed (as
 *                         Python's open does), then read (512 B buffer) to EOF
 *                         while a child writes 3 chunks of 100 bytes into it,
 *                         20 ms apart; then DIR opened without O_DIRECTORY,
 *                         fstat'ed and closed
 *   iolimits vfork DIR    DIR/f0 and DIR/f1 opened, a socket pair in an epoll
 *                         set; a vfork()ed child (as Python's subprocess
 *                         makes one) dup2s the socket onto f1's number, closes
 *                         f0, closes every fd above f1 with close_range and
 *                         execs /bin/true; then the parent waits on the epoll
 *                         set for a byte sent on the pair, takes it, and reads
 *                         both files to EOF (64 B buffer)
 *   iolimits passfd DIR   DIR/f0 and DIR/f1 opened, each sent over a Unix
 *                         socket pair (SCM_RIGHTS, as a DataLoader worker
 *                         hands tensor storage to the trainer) and closed;
 *                         the copy of f0 received is fstat'ed, the copy of f1
 *                         received is wrapped by fdopen and fclose'd
 *   iolimits jump DIR     a read of an empty pipe left by siglongjmp from a
 *                         SIGALRM handler (the alarm-and-jump timeout), then
 *                         DIR/f0 opened, read to EOF and closed 3 times; then a
 *                         thread whose stack lies below its alternate signal
 *                         stack blocks in a read of a pipe, a SIGUSR1 handler
 *                         on that alternate stack opens, reads and closes
 *                         DIR/f1 in the middle of it, the read returns the 5
 *                         bytes written later, and the thread opens, reads and
 *                         closes DIR/f0 once more
 *   iolimits big DIR      DIR/big made a sparse file of 1.1 TB (ftruncate),
 *                         stat'ed by path, by fd and by statx; prints its
 *                         st_size, or "efbig":1 when the file system refuses
 *   iolimits notinput DIR reads of descriptors that hold no file data: an
 *                         eventfd (written 3, read), a timerfd (20 ms, read:
 *                         it blocks), a signalfd (SIGUSR1 raised, read), an
 *                         eventfd made by the raw syscall (no wrapper sees it
 *                         born: written 1, read), /dev/zero (100 bytes); then
 *                         DIR/f0 read to EOF, which is file input
 *   iolimits output DIR   files written, as a step that saves its outputs
 *                         writes them: DIR/out/w0..w4 by open(O_WRONLY|O_CREAT|
 *                         O_TRUNC) + fstat (as Python's open(p, 'wb')) + write
 *                         + close, DIR/out/s0..s4 by fopen "w" + fwrite +
 *                         fclose, DIR/out/t by open(O_RDWR|O_CREAT|O_TRUNC)
 *                         (HDF5's "w"), DIR/out/a by fopen "a+" (which can
 *                         read: input) then fread; then DIR/f0 read to EOF
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <linux/close_range.h>
#include <pthread.h>
#include <setjmp.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/time.h>
#include <sys/epoll.h>
#include <sys/sendfile.h>
#include <sys/signalfd.h>
#include <sys/socket.h>
#include <sys/timerfd.h>
#include <sys/eventfd.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/uio.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

static const char *dir;

static void die(const char *what)
{
	fprintf(stderr, "iolimits: %s: %s\n", what, strerror(errno));
	exit(1);
}

static long must(const char *what, long r)
{
	if (r < 0)
		die(what);
	return r;
}

static int do_recv(void)
{
	char buf[256], small[10];
	int s[2], d[2], p[2];
	long peek1, take1, peek2, take2, trunc1, trunc2, mm_bytes = 0;

	must("socketpair", socketpair(AF_UNIX, SOCK_STREAM, 0, s));
	memset(buf, 'p', sizeof(buf));
	must("send", send(s[1], buf, 64, 0));
	peek1 = must("recv peek", recv(s[0], buf, sizeof(buf), MSG_PEEK));
	take1 = must("recv", recv(s[0], buf, sizeof(buf), 0));
	must("send", send(s[1], buf, 48, 0));
	struct iovec iov = { buf, sizeof(buf) };
	struct msghdr mh = { .msg_iov = &iov, .msg_iovlen = 1 };
	peek2 = must("recvmsg peek", recvmsg(s[0], &mh, MSG_PEEK));
	take2 = must("recvfrom", recvfrom(s[0], buf, sizeof(buf), 0, NULL, NULL));

	/* Datagrams longer than the buffer: MSG_TRUNC returns the datagram's length. */
	must("socketpair dgram", socketpair(AF_UNIX, SOCK_DGRAM, 0, d));
	must("send", send(d[1], buf, 100, 0));
	trunc1 = must("recv trunc", recv(d[0], small, sizeof(small), MSG_TRUNC));
	must("send", send(d[1], buf, 100, 0));
	struct iovec siov = { small, sizeof(small) };
	struct msghdr smh = { .msg_iov = &siov, .msg_iovlen = 1 };
	trunc2 = must("recvmsg trunc", recvmsg(d[0], &smh, MSG_TRUNC));

	/* Three datagrams, one recvmmsg. */
	char b3[3][64];
	struct iovec iv3[3];
	struct mmsghdr mm[3];
	memset(mm, 0, sizeof(mm));
	for (int i = 0; i < 3; i++) {
		must("send", send(d[1], buf, 10 * (i + 1), 0));
		iv3[i] = (struct iovec){ b3[i], sizeof(b3[i]) };
		mm[i].msg_hdr.msg_iov = &iv3[i];
		mm[i].msg_hdr.msg_iovlen = 1;
	}
	int got = (int)must("recvmmsg", recvmmsg(d[0], mm, 3, MSG_WAITFORONE, NULL));
	for (int i = 0; i < got; i++)
		mm_bytes += mm[i].msg_len;

	/* A pipe in an epoll set, waited on with epoll_pwait2. */
	must("pipe", pipe(p));
	int ep = (int)must("epoll_create1", epoll_create1(0));
	struct epoll_event ev = { .events = EPOLLIN, .data.fd = p[0] };
	must("epoll_ctl", epoll_ctl(ep, EPOLL_CTL_ADD, p[0], &ev));
	must("write", write(p[1], "0123456789", 10));
	struct timespec ts = { 5, 0 };
	long ready = must("epoll_pwait2", epoll_pwait2(ep, &ev, 1, &ts, NULL));
	long pread_ = must("read", read(p[0], buf, 10));

	printf("{\"pid\":%d,\"stream_fd\":%d,\"dgram_fd\":%d,\"epoll_fd\":%d,\"peek1\":%ld,\"take1\":%ld,"
	       "\"peek2\":%ld,\"take2\":%ld,\"trunc1\":%ld,\"trunc2\":%ld,\"trunc_buf\":%zu,\"mm_msgs\":%d,"
	       "\"mm_bytes\":%ld,\"ready\":%ld,\"pipe_read\":%ld}\n",
	       (int)getpid(), s[0], d[0], ep, peek1, take1, peek2, take2, trunc1, trunc2, sizeof(small), got,
	       mm_bytes, ready, pread_);
	return 0;
}

#define COPY_SIZE 100000
#define COPY_CALL 25000

static int do_copy(void)
{
	char src[4096], dst[4096], buf[COPY_SIZE];
	snprintf(src, sizeof(src), "%s/src", dir);
	memset(buf, 'c', sizeof(buf));
	int fd = (int)must("creat src", open(src, O_WRONLY | O_CREAT | O_TRUNC, 0600));
	if (write(fd, buf, sizeof(buf)) != (ssize_t)sizeof(buf))
		die("write src");
	close(fd);

	long sent = 0, copied = 0, calls = 0;
	int in = (int)must("open src", open(src, O_RDONLY));
	snprintf(dst, sizeof(dst), "%s/dst1", dir);
	int out = (int)must("open dst1", open(dst, O_WRONLY | O_CREAT | O_TRUNC, 0600));
	for (long r; (r = must("sendfile", sendfile(out, in, NULL, COPY_CALL))) > 0; calls++)
		sent += r;
	close(out);
	int sendfile_calls = (int)calls + 1; /* and the one that returned 0 */
	calls = 0;
	off64_t off = 0;
	snprintf(dst, sizeof(dst), "%s/dst2", dir);
	out = (int)must("open dst2", open(dst, O_WRONLY | O_CREAT | O_TRUNC, 0600));
	for (long r; (r = must("copy_file_range", copy_file_range(in, &off, out, NULL, COPY_CALL, 0))) > 0; calls++)
		copied += r;
	close(out);
	close(in);
	printf("{\"pid\":%d,\"src\":\"%s\",\"size\":%d,\"sendfile_bytes\":%ld,\"sendfile_calls\":%d,"
	       "\"copy_file_range_bytes\":%ld,\"copy_file_range_calls\":%ld}\n",
	       (int)getpid(), src, COPY_SIZE, sent, sendfile_calls, copied, calls + 1);
	return 0;
}

static long seen_bytes, seen_entries, kept, filter_stats;

/* Sees every entry scandir64 reads: counts its bytes, stats it (input made inside the call), keeps f*. */
static int keep_f(const struct dirent64 *e)
{
	char p[4096];
	struct stat st;
	seen_bytes += e->d_reclen;
	seen_entries++;
	snprintf(p, sizeof(p), "%s/%s", dir, e->d_name);
	if (stat(p, &st) == 0)
		filter_stats++;
	return e->d_name[0] == 'f' && ++kept;
}

static long list_bytes(struct dirent **v, int n)
{
	long b = 0;
	for (int i = 0; i < n; i++) {
		b += v[i]->d_reclen;
		free(v[i]);
	}
	free(v);
	return b;
}

static int do_scandir(void)
{
	struct dirent **v;
	struct dirent64 **v64;
	int n1 = (int)must("scandir", scandir(dir, &v, NULL, NULL));
	long b1 = list_bytes(v, n1);
	int n2 = (int)must("scandir64", scandir64(dir, &v64, keep_f, alphasort64));
	list_bytes((struct dirent **)v64, n2);
	int n3 = (int)must("scandirat", scandirat(AT_FDCWD, dir, &v, NULL, alphasort));
	long b3 = list_bytes(v, n3);
	errno = 0;
	int bad = scandir("/nonexistent-iolimits", &v, NULL, NULL);
	printf("{\"pid\":%d,\"scandir_entries\":%d,\"scandir_bytes\":%ld,\"scandir64_seen\":%ld,"
	       "\"scandir64_bytes\":%ld,\"scandir64_kept\":%d,\"filter_stats\":%ld,\"scandirat_entries\":%d,"
	       "\"scandirat_bytes\":%ld,\"bad\":%d,\"bad_errno\":%d}\n",
	       (int)getpid(), n1, b1, seen_entries, seen_bytes, n2, filter_stats, n3, b3, bad, errno);
	return 0;
}

static long walk_entries, walk_sizes, walk_reads, walk_read_bytes;

static int walk_cb(const char *p, const struct stat *st, int flag, struct FTW *w)
{
	(void)w;
	walk_entries++;
	walk_sizes += st->st_size;
	if (flag != FTW_F)
		return 0;
	char buf[512];
	int fd = (int)must("open", open(p, O_RDONLY));
	for (ssize_t n; (n = must("read", read(fd, buf, sizeof(buf)))) > 0; walk_reads++)
		walk_read_bytes += n;
	walk_reads++; /* and the read at EOF */
	close(fd);
	return 0;
}

/* The bytes the getdents64 syscall returns for directory p, made raw: no wrapper sees it. */
static long dents_bytes(const char *p)
{
	char buf[32768];
	long total = 0, n;
	int fd = (int)must("open dir", open(p, O_RDONLY | O_DIRECTORY));
	while ((n = must("getdents64", syscall(SYS_getdents64, fd, buf, sizeof(buf)))) > 0)
		total += n;
	close(fd);
	return total;
}

static void make_file(const char *p, long size)
{
	char buf[4096];
	memset(buf, 'w', sizeof(buf));
	int fd = (int)must("creat", open(p, O_WRONLY | O_CREAT | O_TRUNC, 0600));
	if (write(fd, buf, (size_t)size) != size)
		die("write");
	close(fd);
}

static int do_nftw(void)
{
	static const char *const dirs[] = { "t", "t/sub", "t/empty" };
	static const struct {
		const char *name;
		long size;
	} files[] = { { "t/a1", 1000 }, { "t/a2", 2000 }, { "t/sub/b1", 700 }, { "t/sub/b2", 1300 },
		      { "t/sub/b3", 3000 } };
	char p[4096], root[4096];
	for (size_t i = 0; i < 3; i++) {
		snprintf(p, sizeof(p), "%s/%s", dir, dirs[i]);
		must("mkdir", mkdir(p, 0700));
	}
	for (size_t i = 0; i < sizeof(files) / sizeof(files[0]); i++) {
		snprintf(p, sizeof(p), "%s/%s", dir, files[i].name);
		make_file(p, files[i].size);
	}
	snprintf(root, sizeof(root), "%s/t", dir);
	must("nftw", nftw(root, walk_cb, 4, 0));
	long entries = walk_entries, sizes = walk_sizes;
	must("nftw depth", nftw(root, walk_cb, 4, FTW_DEPTH | FTW_PHYS));
	printf("{\"pid\":%d,\"root\":\"%s\",\"walks\":2,\"entries\":%ld,\"sizes\":%ld,\"entries_total\":%ld,"
	       "\"sizes_total\":%ld,\"reads\":%ld,\"read_bytes\":%ld",
	       (int)getpid(), root, entries, sizes, walk_entries, walk_sizes, walk_reads, walk_read_bytes);
	for (size_t i = 0; i < 3; i++) {
		snprintf(p, sizeof(p), "%s/%s", dir, dirs[i]);
		printf(",\"dents_%zu\":%ld", i, dents_bytes(p));
	}
	printf("}\n");
	return 0;
}

static int do_fifo(void)
{
	char p[4096], buf[512];
	struct stat st;
	snprintf(p, sizeof(p), "%s/fifo", dir);
	must("mkfifo", mkfifo(p, 0600));
	pid_t kid = fork();
	if (kid == 0) {
		int w = open(p, O_WRONLY);
		memset(buf, 'q', 100);
		for (int i = 0; w >= 0 && i < 3; i++) {
			struct timespec ts = { 0, 20 * 1000 * 1000 };
			nanosleep(&ts, NULL);
			if (write(w, buf, 100) != 100)
				_exit(1);
		}
		_exit(0);
	}
	int fd = (int)must("open fifo", open(p, O_RDONLY));
	must("fstat fifo", fstat(fd, &st));
	long reads = 0, bytes = 0;
	for (ssize_t n; (n = must("read fifo", read(fd, buf, sizeof(buf)))) > 0; reads++)
		bytes += n;
	reads++; /* and the read at EOF */
	close(fd);
	int status;
	waitpid(kid, &status, 0);
	int dfd = (int)must("open dir", open(dir, O_RDONLY));
	must("fstat dir", fstat(dfd, &st));
	close(dfd);
	printf("{\"pid\":%d,\"fifo_fd\":%d,\"fifo_reads\":%ld,\"fifo_bytes\":%ld,\"is_fifo\":%d,\"writer_ok\":%d,"
	       "\"dir_fd\":%d,\"is_dir\":%d}\n",
	       (int)getpid(), fd, reads, bytes, 1, WIFEXITED(status) && WEXITSTATUS(status) == 0, dfd,
	       S_ISDIR(st.st_mode) ? 1 : 0);
	return 0;
}

static long read_all(int fd, long *calls)
{
	char buf[64];
	long bytes = 0;
	for (ssize_t n; (n = must("read", read(fd, buf, sizeof(buf)))) > 0; ++*calls)
		bytes += n;
	++*calls; /* and the read at EOF */
	return bytes;
}

static int do_vfork(void)
{
	char p0[4096], p1[4096];
	int s[2];
	snprintf(p0, sizeof(p0), "%s/f0", dir);
	snprintf(p1, sizeof(p1), "%s/f1", dir);
	int f0 = (int)must("open f0", open(p0, O_RDONLY));
	int f1 = (int)must("open f1", open(p1, O_RDONLY));
	must("socketpair", socketpair(AF_UNIX, SOCK_STREAM, 0, s));
	int ep = (int)must("epoll_create1", epoll_create1(0));
	struct epoll_event ev = { .events = EPOLLIN, .data.fd = s[0] };
	must("epoll_ctl", epoll_ctl(ep, EPOLL_CTL_ADD, s[0], &ev));
	pid_t kid = vfork();
	if (kid == 0) {
		/* only what a vfork child may do: calls into libc, then exec */
		if (dup2(s[1], f1) < 0 || close(f0) != 0 || close_range((unsigned)f1 + 1, ~0U, 0) != 0)
			_exit(126);
		execl("/bin/true", "true", (char *)NULL);
		_exit(127);
	}
	must("vfork", kid);
	int status;
	must("waitpid", waitpid(kid, &status, 0));
	char c = 'x';
	must("send", send(s[1], &c, 1, 0));
	struct epoll_event got;
	int ready = (int)must("epoll_wait", epoll_wait(ep, &got, 1, 5000));
	long taken = must("recv", recv(s[0], &c, 1, 0));
	long r0 = 0, r1 = 0, b0 = read_all(f0, &r0), b1 = read_all(f1, &r1);
	close(f0);
	close(f1);
	printf("{\"pid\":%d,\"child_ok\":%d,\"ep_fd\":%d,\"ready\":%d,\"taken\":%ld,\"f0_fd\":%d,\"f0_reads\":%ld,"
	       "\"f0_bytes\":%ld,\"f1_fd\":%d,\"f1_reads\":%ld,\"f1_bytes\":%ld}\n",
	       (int)getpid(), WIFEXITED(status) && WEXITSTATUS(status) == 0, ep, ready, taken, f0, r0, b0, f1, r1, b1);
	return 0;
}

static void send_fd(int sock, int fd)
{
	char byte = 'f', ctl[CMSG_SPACE(sizeof(int))];
	struct iovec iov = { &byte, 1 };
	struct msghdr m = { .msg_iov = &iov, .msg_iovlen = 1, .msg_control = ctl, .msg_controllen = sizeof(ctl) };
	struct cmsghdr *c = CMSG_FIRSTHDR(&m);
	c->cmsg_level = SOL_SOCKET;
	c->cmsg_type = SCM_RIGHTS;
	c->cmsg_len = CMSG_LEN(sizeof(int));
	memcpy(CMSG_DATA(c), &fd, sizeof(int));
	must("sendmsg", sendmsg(sock, &m, 0));
}

static int recv_fd(int sock)
{
	char byte, ctl[CMSG_SPACE(sizeof(int))];
	struct iovec iov = { &byte, 1 };
	struct msghdr m = { .msg_iov = &iov, .msg_iovlen = 1, .msg_control = ctl, .msg_controllen = sizeof(ctl) };
	must("recvmsg", recvmsg(sock, &m, 0));
	struct cmsghdr *c = CMSG_FIRSTHDR(&m);
	int fd = -1;
	if (!c || c->cmsg_type != SCM_RIGHTS)
		die("no fd received");
	memcpy(&fd, CMSG_DATA(c), sizeof(int));
	return fd;
}

static int do_passfd(void)
{
	char p0[4096], p1[4096];
	int s[2];
	struct stat st;
	snprintf(p0, sizeof(p0), "%s/f0", dir);
	snprintf(p1, sizeof(p1), "%s/f1", dir);
	must("socketpair", socketpair(AF_UNIX, SOCK_STREAM, 0, s));
	int f0 = (int)must("open f0", open(p0, O_RDONLY));
	send_fd(s[1], f0);
	close(f0);
	int g0 = recv_fd(s[0]);
	must("fstat", fstat(g0, &st));
	int f1 = (int)must("open f1", open(p1, O_RDONLY));
	send_fd(s[1], f1);
	close(f1);
	int g1 = recv_fd(s[0]);
	FILE *fp = fdopen(g1, "r");
	if (!fp)
		die("fdopen");
	must("fclose", fclose(fp));
	close(g0);
	printf("{\"pid\":%d,\"g0_fd\":%d,\"g0_size\":%ld,\"g1_fd\":%d}\n", (int)getpid(), g0, (long)st.st_size, g1);
	return 0;
}

static sigjmp_buf jump_env;

static void on_alarm(int sig)
{
	(void)sig;
	siglongjmp(jump_env, 1);
}

/* open, read to EOF, close: the bytes read */
static long slurp_file(const char *path)
{
	long calls = 0;
	int fd = (int)must("open", open(path, O_RDONLY));
	long n = read_all(fd, &calls);
	close(fd);
	return n;
}

static int jump_pipe[2];
static long jump_handler_bytes, jump_read, jump_after;
static char jump_f0[4096], jump_f1[4096];

static void on_usr1(int sig)
{
	(void)sig;
	jump_handler_bytes = slurp_file(jump_f1);
}

static void *jump_thread(void *arg)
{
	stack_t ss = { .ss_sp = arg, .ss_size = 1 << 16 };
	must("sigaltstack", sigaltstack(&ss, NULL));
	char buf[16];
	jump_read = must("read pipe", read(jump_pipe[0], buf, sizeof(buf)));
	jump_after = slurp_file(jump_f0);
	return NULL;
}

static int do_jump(void)
{
	int p[2];
	snprintf(jump_f0, sizeof(jump_f0), "%s/f0", dir);
	snprintf(jump_f1, sizeof(jump_f1), "%s/f1", dir);
	must("pipe", pipe(p));
	struct sigaction sa = { .sa_handler = on_alarm };
	must("sigaction", sigaction(SIGALRM, &sa, NULL));
	int jumped = 0;
	if (sigsetjmp(jump_env, 1) == 0) {
		struct itimerval it = { .it_value = { 0, 30000 } };
		must("setitimer", setitimer(ITIMER_REAL, &it, NULL));
		char c;
		read(p[0], &c, 1); /* nothing is ever written: left by the jump */
	} else {
		jumped = 1;
	}
	long bytes = 0;
	for (int i = 0; i < 3; i++)
		bytes += slurp_file(jump_f0);

	/* the alternate stack mapped first, the thread's stack after it: below it */
	char *alt = mmap(NULL, 1 << 16, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	char *stk = mmap(NULL, 1 << 20, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (alt == MAP_FAILED || stk == MAP_FAILED)
		die("mmap");
	must("pipe", pipe(jump_pipe));
	struct sigaction su = { .sa_handler = on_usr1, .sa_flags = SA_ONSTACK | SA_RESTART };
	must("sigaction", sigaction(SIGUSR1, &su, NULL));
	pthread_attr_t at;
	pthread_attr_init(&at);
	pthread_attr_setstack(&at, stk, 1 << 20);
	pthread_t th;
	if (pthread_create(&th, &at, jump_thread, alt) != 0)
		die("pthread_create");
	struct timespec ts = { 0, 50 * 1000 * 1000 };
	nanosleep(&ts, NULL);
	pthread_kill(th, SIGUSR1);
	nanosleep(&ts, NULL);
	must("write", write(jump_pipe[1], "hello", 5));
	pthread_join(th, NULL);
	printf("{\"pid\":%d,\"jumped\":%d,\"f0_bytes\":%ld,\"alt_above\":%d,\"handler_bytes\":%ld,"
	       "\"thread_read\":%ld,\"thread_f0_bytes\":%ld}\n",
	       (int)getpid(), jumped, bytes / 3, alt > stk, jump_handler_bytes, jump_read, jump_after);
	return 0;
}

static int do_big(void)
{
	char p[4096];
	struct stat st;
	struct statx sx;
	snprintf(p, sizeof(p), "%s/big", dir);
	int fd = (int)must("open big", open(p, O_RDWR | O_CREAT, 0600));
	if (ftruncate(fd, 1100000000000LL) != 0) {
		printf("{\"efbig\":1}\n");
		return 0;
	}
	must("stat", stat(p, &st));
	must("fstat", fstat(fd, &st));
	must("statx", statx(AT_FDCWD, p, 0, STATX_SIZE, &sx));
	close(fd);
	unlink(p);
	printf("{\"pid\":%d,\"efbig\":0,\"size\":%lld,\"statx_size\":%llu}\n", (int)getpid(), (long long)st.st_size,
	       (unsigned long long)sx.stx_size);
	return 0;
}

static int do_notinput(void)
{
	uint64_t v = 3;
	char buf[128], p0[4096];
	int ev = (int)must("eventfd", eventfd(0, 0));
	must("write eventfd", write(ev, &v, sizeof(v)));
	long ev_r = must("read eventfd", read(ev, &v, sizeof(v)));
	int tf = (int)must("timerfd_create", timerfd_create(CLOCK_MONOTONIC, 0));
	struct itimerspec its = { .it_value = { 0, 20 * 1000 * 1000 } };
	must("timerfd_settime", timerfd_settime(tf, 0, &its, NULL));
	long tf_r = must("read timerfd", read(tf, &v, sizeof(v)));
	sigset_t set;
	sigemptyset(&set);
	sigaddset(&set, SIGUSR1);
	must("sigprocmask", sigprocmask(SIG_BLOCK, &set, NULL));
	int sf = (int)must("signalfd", signalfd(-1, &set, 0));
	raise(SIGUSR1);
	struct signalfd_siginfo si;
	long sf_r = must("read signalfd", read(sf, &si, sizeof(si)));
	int raw = (int)must("eventfd2", syscall(SYS_eventfd2, 0, 0));
	v = 1;
	must("write raw eventfd", write(raw, &v, sizeof(v)));
	long raw_r = must("read raw eventfd", read(raw, &v, sizeof(v)));
	int z = (int)must("open /dev/zero", open("/dev/zero", O_RDONLY));
	long z_r = must("read /dev/zero", read(z, buf, 100));
	snprintf(p0, sizeof(p0), "%s/f0", dir);
	long f0_bytes = slurp_file(p0);
	printf("{\"pid\":%d,\"eventfd\":%d,\"eventfd_read\":%ld,\"timerfd\":%d,\"timerfd_read\":%ld,"
	       "\"signalfd\":%d,\"signalfd_read\":%ld,\"raw_eventfd\":%d,\"raw_read\":%ld,\"zero\":%d,"
	       "\"zero_read\":%ld,\"f0_bytes\":%ld}\n",
	       (int)getpid(), ev, ev_r, tf, tf_r, sf, sf_r, raw, raw_r, z, z_r, f0_bytes);
	return 0;
}

static int do_output(void)
{
	char p[4096], buf[100];
	struct stat st;
	memset(buf, 'o', sizeof(buf));
	snprintf(p, sizeof(p), "%s/out", dir);
	must("mkdir", mkdir(p, 0700));
	for (int i = 0; i < 5; i++) {
		snprintf(p, sizeof(p), "%s/out/w%d", dir, i);
		int fd = (int)must("open w", open(p, O_WRONLY | O_CREAT | O_TRUNC, 0600));
		must("fstat w", fstat(fd, &st));
		must("write w", write(fd, buf, sizeof(buf)));
		must("close w", close(fd));
		snprintf(p, sizeof(p), "%s/out/s%d", dir, i);
		FILE *f = fopen(p, "w");
		if (!f || fwrite(buf, 1, sizeof(buf), f) != sizeof(buf) || fclose(f) != 0)
			die("fopen w");
	}
	snprintf(p, sizeof(p), "%s/out/t", dir);
	int t = (int)must("open t", open(p, O_RDWR | O_CREAT | O_TRUNC, 0600));
	must("write t", write(t, buf, sizeof(buf)));
	close(t);
	snprintf(p, sizeof(p), "%s/out/a", dir);
	FILE *a = fopen(p, "a+");
	if (!a || fwrite(buf, 1, sizeof(buf), a) != sizeof(buf))
		die("fopen a+");
	rewind(a);
	long a_bytes = (long)fread(buf, 1, sizeof(buf), a);
	int a_fd = fileno(a);
	fclose(a);
	snprintf(p, sizeof(p), "%s/f0", dir);
	long f0_bytes = slurp_file(p);
	printf("{\"pid\":%d,\"a_fd\":%d,\"a_bytes\":%ld,\"f0_bytes\":%ld}\n", (int)getpid(), a_fd, a_bytes, f0_bytes);
	return 0;
}

int main(int argc, char **argv)
{
	static const struct {
		const char *name;
		int (*run)(void);
	} modes[] = {
		{ "recv", do_recv },	 { "copy", do_copy },	  { "scandir", do_scandir }, { "nftw", do_nftw },
		{ "fifo", do_fifo },	 { "vfork", do_vfork },	  { "passfd", do_passfd },   { "jump", do_jump },
		{ "big", do_big },	 { "notinput", do_notinput }, { "output", do_output },
	};
	if (argc < 3) {
		fprintf(stderr, "usage: iolimits recv|copy|scandir|nftw|fifo|vfork|passfd|jump|big|notinput|output DIR\n");
		return 2;
	}
	dir = argv[2];
	for (size_t i = 0; i < sizeof(modes) / sizeof(modes[0]); i++)
		if (!strcmp(argv[1], modes[i].name))
			return modes[i].run();
	fprintf(stderr, "iolimits: unknown mode %s\n", argv[1]);
	return 2;
}
