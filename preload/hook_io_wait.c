/*
 * hook_io_wait.c - libc wrappers of the calls through which a trainer waits for
 * batches from its loader workers: poll/ppoll, select/pselect, epoll_wait/
 * epoll_pwait, recv/recvfrom/recvmsg. (read/readv on a pipe or socket are in
 * hook_io_read.c.)
 *
 * A wait is recorded as LOADER_WAIT when it involves a pipe or a socket (the
 * way multiprocessing, PyTorch's DataLoader and most loaders hand batches
 * over); a poll on timers or eventfds alone is not input and is not recorded.
 * fd = the first pipe/socket waited on, fd_type its type, result = the number
 * of ready descriptors or -errno; recv*: bytes received.
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

static inline void rec_wait(unsigned api, int fd, unsigned type, long r, int e, uint64_t t0, uint64_t t1)
{
	io_emit(SP_K_LOADER_WAIT, api, t0, t1, 0, 0, fd, wait_result(r, e), type, 0);
}

/* ------------------------------------------------------------------ 1. poll */

static int poll_wait_fd(const struct pollfd *fds, nfds_t n, unsigned *type)
{
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

static int do_poll(unsigned api, struct pollfd *fds, nfds_t n, int timeout, const struct timespec *ts,
		   const sigset_t *mask, size_t fdslen, int variant)
{
	int r;
	uint64_t t0 = sp_now();
	switch (variant) {
	case 0:
		r = IO_REAL(poll)(fds, n, timeout);
		break;
	case 1:
		r = IO_REAL(ppoll)(fds, n, ts, mask);
		break;
	case 2:
		r = IO_REAL(__poll_chk)(fds, n, timeout, fdslen);
		break;
	default:
		r = IO_REAL(__ppoll_chk)(fds, n, ts, mask, fdslen);
		break;
	}
	int e = errno;
	uint64_t t1 = sp_now();
	unsigned type = 0;
	int fd = fds ? poll_wait_fd(fds, n, &type) : -1;
	if (fd >= 0)
		rec_wait(api, fd, type, r, e, t0, t1);
	errno = e;
	return r;
}

int poll(struct pollfd *fds, nfds_t n, int timeout)
{
	if (!io_enter_wait())
		return IO_REAL(poll)(fds, n, timeout);
	int r = do_poll(SP_API_poll, fds, n, timeout, NULL, NULL, 0, 0);
	io_leave();
	return r;
}

int ppoll(struct pollfd *fds, nfds_t n, const struct timespec *ts, const sigset_t *mask)
{
	if (!io_enter_wait())
		return IO_REAL(ppoll)(fds, n, ts, mask);
	int r = do_poll(SP_API_ppoll, fds, n, 0, ts, mask, 0, 1);
	io_leave();
	return r;
}

int __poll_chk(struct pollfd *fds, nfds_t n, int timeout, size_t fdslen)
{
	if (!io_enter_wait())
		return IO_REAL(__poll_chk)(fds, n, timeout, fdslen);
	int r = do_poll(SP_API___poll_chk, fds, n, timeout, NULL, NULL, fdslen, 2);
	io_leave();
	return r;
}

int __ppoll_chk(struct pollfd *fds, nfds_t n, const struct timespec *ts, const sigset_t *mask, size_t fdslen)
{
	if (!io_enter_wait())
		return IO_REAL(__ppoll_chk)(fds, n, ts, mask, fdslen);
	int r = do_poll(SP_API___ppoll_chk, fds, n, 0, ts, mask, fdslen, 3);
	io_leave();
	return r;
}

/* ---------------------------------------------------------------- 2. select */

/* Scanned before the call: select overwrites the set with the ready fds. */
static int select_wait_fd(int nfds, const fd_set *rd, unsigned *type)
{
	if (!rd)
		return -1;
	if (nfds > FD_SETSIZE)
		nfds = FD_SETSIZE;
	for (int fd = 0; fd < nfds; fd++) {
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

int select(int nfds, fd_set *rd, fd_set *wr, fd_set *ex, struct timeval *tv)
{
	int (*real)(int, fd_set *, fd_set *, fd_set *, struct timeval *) = IO_REAL(select);
	if (!io_enter_wait())
		return real(nfds, rd, wr, ex, tv);
	int e = errno;
	unsigned type = 0;
	int fd = select_wait_fd(nfds, rd, &type);
	errno = e;
	uint64_t t0 = sp_now();
	int r = real(nfds, rd, wr, ex, tv);
	e = errno;
	uint64_t t1 = sp_now();
	if (fd >= 0)
		rec_wait(SP_API_select, fd, type, r, e, t0, t1);
	io_leave();
	errno = e;
	return r;
}

int pselect(int nfds, fd_set *rd, fd_set *wr, fd_set *ex, const struct timespec *ts, const sigset_t *mask)
{
	int (*real)(int, fd_set *, fd_set *, fd_set *, const struct timespec *, const sigset_t *) = IO_REAL(pselect);
	if (!io_enter_wait())
		return real(nfds, rd, wr, ex, ts, mask);
	int e = errno;
	unsigned type = 0;
	int fd = select_wait_fd(nfds, rd, &type);
	errno = e;
	uint64_t t0 = sp_now();
	int r = real(nfds, rd, wr, ex, ts, mask);
	e = errno;
	uint64_t t1 = sp_now();
	if (fd >= 0)
		rec_wait(SP_API_pselect, fd, type, r, e, t0, t1);
	io_leave();
	errno = e;
	return r;
}

/* ----------------------------------------------------------------- 3. epoll */

/* The epoll fd's wait type was noted by epoll_ctl(ADD) of a pipe or socket. */
int epoll_wait(int epfd, struct epoll_event *ev, int maxev, int timeout)
{
	int (*real)(int, struct epoll_event *, int, int) = IO_REAL(epoll_wait);
	if (!io_enter_wait())
		return real(epfd, ev, maxev, timeout);
	uint64_t t0 = sp_now();
	int r = real(epfd, ev, maxev, timeout);
	int e = errno;
	uint64_t t1 = sp_now();
	unsigned type = io_word_wait_type(io_fd_word(epfd));
	if (type)
		rec_wait(SP_API_epoll_wait, epfd, type, r, e, t0, t1);
	io_leave();
	errno = e;
	return r;
}

int epoll_pwait(int epfd, struct epoll_event *ev, int maxev, int timeout, const sigset_t *mask)
{
	int (*real)(int, struct epoll_event *, int, int, const sigset_t *) = IO_REAL(epoll_pwait);
	if (!io_enter_wait())
		return real(epfd, ev, maxev, timeout, mask);
	uint64_t t0 = sp_now();
	int r = real(epfd, ev, maxev, timeout, mask);
	int e = errno;
	uint64_t t1 = sp_now();
	unsigned type = io_word_wait_type(io_fd_word(epfd));
	if (type)
		rec_wait(SP_API_epoll_pwait, epfd, type, r, e, t0, t1);
	io_leave();
	errno = e;
	return r;
}

/* ------------------------------------------------------------------ 4. recv */

ssize_t recv(int fd, void *buf, size_t n, int flags)
{
	ssize_t (*real)(int, void *, size_t, int) = IO_REAL(recv);
	if (!io_enter_wait())
		return real(fd, buf, n, flags);
	uint64_t t0 = sp_now();
	ssize_t r = real(fd, buf, n, flags);
	int e = errno;
	uint64_t t1 = sp_now();
	io_rec_read(SP_API_recv, fd, r, e, t0, t1);
	io_leave();
	errno = e;
	return r;
}

ssize_t __recv_chk(int fd, void *buf, size_t n, size_t buflen, int flags);
ssize_t __recvfrom_chk(int fd, void *buf, size_t n, size_t buflen, int flags, struct sockaddr *from,
		       socklen_t *fromlen);

ssize_t __recv_chk(int fd, void *buf, size_t n, size_t buflen, int flags)
{
	ssize_t (*real)(int, void *, size_t, size_t, int) = IO_REAL(__recv_chk);
	if (!io_enter_wait())
		return real(fd, buf, n, buflen, flags);
	uint64_t t0 = sp_now();
	ssize_t r = real(fd, buf, n, buflen, flags);
	int e = errno;
	uint64_t t1 = sp_now();
	io_rec_read(SP_API___recv_chk, fd, r, e, t0, t1);
	io_leave();
	errno = e;
	return r;
}

ssize_t recvfrom(int fd, void *buf, size_t n, int flags, struct sockaddr *from, socklen_t *fromlen)
{
	ssize_t (*real)(int, void *, size_t, int, struct sockaddr *, socklen_t *) = IO_REAL(recvfrom);
	if (!io_enter_wait())
		return real(fd, buf, n, flags, from, fromlen);
	uint64_t t0 = sp_now();
	ssize_t r = real(fd, buf, n, flags, from, fromlen);
	int e = errno;
	uint64_t t1 = sp_now();
	io_rec_read(SP_API_recvfrom, fd, r, e, t0, t1);
	io_leave();
	errno = e;
	return r;
}

ssize_t __recvfrom_chk(int fd, void *buf, size_t n, size_t buflen, int flags, struct sockaddr *from,
		       socklen_t *fromlen)
{
	ssize_t (*real)(int, void *, size_t, size_t, int, struct sockaddr *, socklen_t *) = IO_REAL(__recvfrom_chk);
	if (!io_enter_wait())
		return real(fd, buf, n, buflen, flags, from, fromlen);
	uint64_t t0 = sp_now();
	ssize_t r = real(fd, buf, n, buflen, flags, from, fromlen);
	int e = errno;
	uint64_t t1 = sp_now();
	io_rec_read(SP_API___recvfrom_chk, fd, r, e, t0, t1);
	io_leave();
	errno = e;
	return r;
}

ssize_t recvmsg(int fd, struct msghdr *msg, int flags)
{
	ssize_t (*real)(int, struct msghdr *, int) = IO_REAL(recvmsg);
	if (!io_enter_wait())
		return real(fd, msg, flags);
	uint64_t t0 = sp_now();
	ssize_t r = real(fd, msg, flags);
	int e = errno;
	uint64_t t1 = sp_now();
	io_rec_read(SP_API_recvmsg, fd, r, e, t0, t1);
	io_leave();
	errno = e;
	return r;
}
