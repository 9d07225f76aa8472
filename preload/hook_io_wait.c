/*
 * hook_io_wait.c - libc wrappers of the calls through which a trainer waits for
 * batches from its loader workers: poll/ppoll, select/pselect, epoll_wait/
 * epoll_pwait/epoll_pwait2, recv/recvfrom/recvmsg/recvmmsg. (read/readv on a pipe or socket are in
 * hook_io_read.c.)
 *
 * A wait is recorded as LOADER_WAIT when it involves a pipe or a socket (the
 * way multiprocessing, PyTorch's DataLoader and most loaders hand batches
 * over); a poll on timers or eventfds alone is not input and is not recorded.
 * fd = the first pipe/socket waited on, fd_type its type, result = the number
 * of ready descriptors or -errno; recv*: bytes received (taken from the socket:
 * a peek takes none).
 *
 * These stay on with STEPPROF_IO=bpf: the collector does not trace them.
 *
 * Divided into: 1. poll, 2. select, 3. epoll, 4. recv.
 */
#include "io_hook.h"

#include <poll.h>
#include <signal.h>
#include <sys/epoll.h>
#include <sys/select.h>
#include <sys/socket.h>

/* The wrappers below are the exported names (the version script lists them). */
#pragma GCC visibility push(default)

int __poll_chk(struct pollfd *fds, nfds_t n, int timeout, size_t fdslen);
int __ppoll_chk(struct pollfd *fds, nfds_t n, const struct timespec *ts, const sigset_t *mask, size_t fdslen);

static inline int wait_result(long r, int e)
{
	if (r < 0)
		return io_result(r, e);
	return r > 32767 ? 32767 : (int)r;
}

/*
 * A wait that returned r: LOADER_WAIT on fd (a pipe or socket of the given
 * type) when there is one (fd >= 0), then a CPU_TIME sample when this thread
 * has none from the last millisecond (sp_cpu_handoff), else no record.
 * wait_end = io_end + wait_rec.
 */
static inline void wait_rec(struct io_call *c, unsigned api, int fd, unsigned type, int r)
{
	if (fd >= 0) {
		io_emit(SP_K_LOADER_WAIT, api, c->t0, c->t1, 0, 0, fd, wait_result(r, c->err), type, 0);
		sp_cpu_handoff(c->t1);
	}
	io_finish(c);
}

static inline int wait_end(struct io_call *c, unsigned api, int fd, unsigned type, int r)
{
	io_end(c, r);
	wait_rec(c, api, fd, type, r);
	return r;
}

/* ------------------------------------------------------------------ 1. poll */

/* The first pipe or socket of fds (-1 when none), its type in *type. */
static int poll_wait_fd(const struct pollfd *fds, nfds_t n, unsigned *type)
{
	if (!fds)
		return -1;
	for (nfds_t i = 0; i < n; i++) {
		if (fds[i].fd < 0)
			continue;
		unsigned t = io_fd_type(fds[i].fd);
		if (io_type_is_wait(t)) {
			*type = t;
			return fds[i].fd;
		}
	}
	return -1;
}

/*
 * Scanned after the call: poll leaves fds[].fd as they were. Only when the
 * kernel has read the whole array (a result, or EINTR): on EFAULT it is not
 * readable, on EINVAL (n over the fd limit) not n entries long, and reading it
 * would crash a program that got an error without us.
 */
static inline int poll_end(struct io_call *c, unsigned api, const struct pollfd *fds, nfds_t n, int r)
{
	unsigned type = 0;
	io_end(c, r);
	int fd = r >= 0 || c->err == EINTR ? poll_wait_fd(fds, n, &type) : -1;
	wait_rec(c, api, fd, type, r);
	return r;
}

int poll(struct pollfd *fds, nfds_t n, int timeout)
{
	int (*real)(struct pollfd *, nfds_t, int) = IO_REAL(poll);
	struct io_call c;
	if (!io_begin_wait(&c))
		return real(fds, n, timeout);
	return poll_end(&c, SP_API_poll, fds, n, real(fds, n, timeout));
}

int ppoll(struct pollfd *fds, nfds_t n, const struct timespec *ts, const sigset_t *mask)
{
	int (*real)(struct pollfd *, nfds_t, const struct timespec *, const sigset_t *) = IO_REAL(ppoll);
	struct io_call c;
	if (!io_begin_wait(&c))
		return real(fds, n, ts, mask);
	return poll_end(&c, SP_API_ppoll, fds, n, real(fds, n, ts, mask));
}

int __poll_chk(struct pollfd *fds, nfds_t n, int timeout, size_t fdslen)
{
	int (*real)(struct pollfd *, nfds_t, int, size_t) = IO_REAL(__poll_chk);
	struct io_call c;
	if (!io_begin_wait(&c))
		return real(fds, n, timeout, fdslen);
	return poll_end(&c, SP_API___poll_chk, fds, n, real(fds, n, timeout, fdslen));
}

int __ppoll_chk(struct pollfd *fds, nfds_t n, const struct timespec *ts, const sigset_t *mask, size_t fdslen)
{
	int (*real)(struct pollfd *, nfds_t, const struct timespec *, const sigset_t *, size_t) = IO_REAL(__ppoll_chk);
	struct io_call c;
	if (!io_begin_wait(&c))
		return real(fds, n, ts, mask, fdslen);
	return poll_end(&c, SP_API___ppoll_chk, fds, n, real(fds, n, ts, mask, fdslen));
}

/* ---------------------------------------------------------------- 2. select */

/*
 * Scanned after the call, in the set the kernel has read (and, with a result,
 * written): the ready descriptors (r > 0), or the set as given (EINTR leaves it
 * unchanged). On any other error it may not be readable (EFAULT) and reading it
 * would crash a program that got an error without us.
 * NOTE: a select that times out (r == 0, the sets cleared) names no descriptor
 * and is not recorded; poll and epoll, which loaders use (Python's
 * multiprocessing waits with poll), do not lose it.
 */
static int select_wait_fd(const struct io_call *c, int nfds, const fd_set *rd, int r, unsigned *type)
{
	if (!(r > 0 || (r < 0 && c->err == EINTR)))
		return -1;
	if (nfds > FD_SETSIZE)
		nfds = FD_SETSIZE;
	for (int fd = 0; rd && fd < nfds; fd++) {
		if (!FD_ISSET(fd, rd))
			continue;
		unsigned t = io_fd_type(fd);
		if (io_type_is_wait(t)) {
			*type = t;
			return fd;
		}
	}
	return -1;
}

static inline int select_end(struct io_call *c, unsigned api, int nfds, const fd_set *rd, int r)
{
	unsigned type = 0;
	io_end(c, r);
	int fd = select_wait_fd(c, nfds, rd, r, &type);
	wait_rec(c, api, fd, type, r);
	return r;
}

int select(int nfds, fd_set *rd, fd_set *wr, fd_set *ex, struct timeval *tv)
{
	int (*real)(int, fd_set *, fd_set *, fd_set *, struct timeval *) = IO_REAL(select);
	struct io_call c;
	if (!io_begin_wait(&c))
		return real(nfds, rd, wr, ex, tv);
	return select_end(&c, SP_API_select, nfds, rd, real(nfds, rd, wr, ex, tv));
}

int pselect(int nfds, fd_set *rd, fd_set *wr, fd_set *ex, const struct timespec *ts, const sigset_t *mask)
{
	int (*real)(int, fd_set *, fd_set *, fd_set *, const struct timespec *, const sigset_t *) = IO_REAL(pselect);
	struct io_call c;
	if (!io_begin_wait(&c))
		return real(nfds, rd, wr, ex, ts, mask);
	return select_end(&c, SP_API_pselect, nfds, rd, real(nfds, rd, wr, ex, ts, mask));
}

/* ----------------------------------------------------------------- 3. epoll */

/* The epoll fd's wait type was noted by epoll_ctl(ADD) of a pipe or socket (0: none, no record). */
static inline int epoll_end(struct io_call *c, unsigned api, int epfd, int r)
{
	unsigned type = io_word_wait_type(io_fd_word(epfd));
	return wait_end(c, api, type ? epfd : -1, type, r);
}

int epoll_wait(int epfd, struct epoll_event *ev, int maxev, int timeout)
{
	int (*real)(int, struct epoll_event *, int, int) = IO_REAL(epoll_wait);
	struct io_call c;
	if (!io_begin_wait(&c))
		return real(epfd, ev, maxev, timeout);
	return epoll_end(&c, SP_API_epoll_wait, epfd, real(epfd, ev, maxev, timeout));
}

int epoll_pwait(int epfd, struct epoll_event *ev, int maxev, int timeout, const sigset_t *mask)
{
	int (*real)(int, struct epoll_event *, int, int, const sigset_t *) = IO_REAL(epoll_pwait);
	struct io_call c;
	if (!io_begin_wait(&c))
		return real(epfd, ev, maxev, timeout, mask);
	return epoll_end(&c, SP_API_epoll_pwait, epfd, real(epfd, ev, maxev, timeout, mask));
}

/* glibc >= 2.35 (Linux >= 5.11): a timespec timeout. On an older glibc it resolves to the ENOSYS stub. */
int epoll_pwait2(int epfd, struct epoll_event *ev, int maxev, const struct timespec *ts, const sigset_t *mask)
{
	int (*real)(int, struct epoll_event *, int, const struct timespec *, const sigset_t *) = IO_REAL(epoll_pwait2);
	struct io_call c;
	if (!io_begin_wait(&c))
		return real(epfd, ev, maxev, ts, mask);
	return epoll_end(&c, SP_API_epoll_pwait2, epfd, real(epfd, ev, maxev, ts, mask));
}

/* ------------------------------------------------------------------ 4. recv */

/*
 * The bytes a recv-like call that returned r took into the program's buffer of
 * cap bytes: none for a peek (MSG_PEEK leaves them for the next call, which
 * counts them), at most cap when MSG_TRUNC made r the datagram's length.
 * Passed to io_rec_read as the call's result: an error stays r.
 */
static inline long recv_taken(long r, int flags, size_t cap)
{
	if (r <= 0)
		return r;
	if (flags & MSG_PEEK)
		return 0;
	return (size_t)r > cap ? (long)cap : r;
}

/* recvmsg's buffer: the iovecs' total, read only after a successful call (the kernel has read them). */
static inline size_t msg_cap(const struct msghdr *m)
{
	size_t cap = 0;
	for (size_t i = 0; i < m->msg_iovlen; i++)
		cap += m->msg_iov[i].iov_len;
	return cap;
}

static inline ssize_t recv_end(struct io_call *c, unsigned api, int fd, ssize_t r, int flags, size_t cap)
{
	io_end(c, r);
	io_rec_read(c, api, fd, recv_taken(r, flags, cap));
	return r;
}

ssize_t recv(int fd, void *buf, size_t n, int flags)
{
	ssize_t (*real)(int, void *, size_t, int) = IO_REAL(recv);
	struct io_call c;
	if (!io_begin_wait(&c))
		return real(fd, buf, n, flags);
	return recv_end(&c, SP_API_recv, fd, real(fd, buf, n, flags), flags, n);
}

ssize_t __recv_chk(int fd, void *buf, size_t n, size_t buflen, int flags);
ssize_t __recvfrom_chk(int fd, void *buf, size_t n, size_t buflen, int flags, struct sockaddr *from,
		       socklen_t *fromlen);

ssize_t __recv_chk(int fd, void *buf, size_t n, size_t buflen, int flags)
{
	ssize_t (*real)(int, void *, size_t, size_t, int) = IO_REAL(__recv_chk);
	struct io_call c;
	if (!io_begin_wait(&c))
		return real(fd, buf, n, buflen, flags);
	return recv_end(&c, SP_API___recv_chk, fd, real(fd, buf, n, buflen, flags), flags, n);
}

ssize_t recvfrom(int fd, void *buf, size_t n, int flags, struct sockaddr *from, socklen_t *fromlen)
{
	ssize_t (*real)(int, void *, size_t, int, struct sockaddr *, socklen_t *) = IO_REAL(recvfrom);
	struct io_call c;
	if (!io_begin_wait(&c))
		return real(fd, buf, n, flags, from, fromlen);
	return recv_end(&c, SP_API_recvfrom, fd, real(fd, buf, n, flags, from, fromlen), flags, n);
}

ssize_t __recvfrom_chk(int fd, void *buf, size_t n, size_t buflen, int flags, struct sockaddr *from, socklen_t *fromlen)
{
	ssize_t (*real)(int, void *, size_t, size_t, int, struct sockaddr *, socklen_t *) = IO_REAL(__recvfrom_chk);
	struct io_call c;
	if (!io_begin_wait(&c))
		return real(fd, buf, n, buflen, flags, from, fromlen);
	return recv_end(&c, SP_API___recvfrom_chk, fd, real(fd, buf, n, buflen, flags, from, fromlen), flags, n);
}

ssize_t recvmsg(int fd, struct msghdr *msg, int flags)
{
	ssize_t (*real)(int, struct msghdr *, int) = IO_REAL(recvmsg);
	struct io_call c;
	if (!io_begin_wait(&c))
		return real(fd, msg, flags);
	ssize_t r = real(fd, msg, flags);
	/* the iovecs are summed only where they matter: a datagram longer than them */
	return recv_end(&c, SP_API_recvmsg, fd, r, flags, r > 0 && (flags & MSG_TRUNC) ? msg_cap(msg) : (size_t)r);
}

/*
 * recvmmsg: one LOADER_WAIT for the call, bytes = the messages it received
 * (each msg_len, cut to its buffer under MSG_TRUNC; none for a peek). The
 * vector is read only after a successful call, and only its first r entries,
 * which the kernel has written.
 */
int recvmmsg(int fd, struct mmsghdr *vec, unsigned int vlen, int flags, struct timespec *tmo)
{
	int (*real)(int, struct mmsghdr *, unsigned int, int, struct timespec *) = IO_REAL(recvmmsg);
	struct io_call c;
	if (!io_begin_wait(&c))
		return real(fd, vec, vlen, flags, tmo);
	int r = real(fd, vec, vlen, flags, tmo);
	io_end(&c, r);
	long bytes = r;
	if (r > 0) {
		bytes = 0;
		for (int i = 0; i < r; i++)
			bytes += recv_taken(vec[i].msg_len, flags,
					    flags & MSG_TRUNC ? msg_cap(&vec[i].msg_hdr) : vec[i].msg_len);
	}
	io_rec_read(&c, SP_API_recvmmsg, fd, bytes);
	return r;
}
