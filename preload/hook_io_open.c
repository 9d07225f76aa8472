/*
 * hook_io_open.c - libc wrappers: the open family, close, and the calls that
 * only keep the fd table right (pipe, socket, accept, dup, fcntl's F_DUPFD,
 * epoll_ctl); plus
 * the input capture's constructor (STEPPROF_IO).
 *
 * Divided into: 1. set-up, 2. open family (OPEN), 3. stdio open (OPEN),
 * 4. close (CLOSE), 5. fd table upkeep (no record).
 *
 * NOTE: glibc's fopen/freopen/fclose reach the kernel through internal calls,
 * not the PLT, so they are wrapped themselves; where a libc function does call
 * a wrapped name through the PLT, io_enter's depth check keeps it single.
 */
#include "io_hook.h"

#include <fcntl.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdlib.h>
#include <linux/close_range.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/mman.h>
#include <sys/signalfd.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/timerfd.h>
#include <unistd.h>

/* The wrappers below are the exported names (the version script lists them). */
#pragma GCC visibility push(default)

/* --------------------------------------------------------------- 1. set-up */

/* This process's pid (io_in_vfork_child): set at start and in a fork()ed child. */
static int io_pid;

static void io_after_fork_child(void)
{
	io_pid = (int)syscall(SYS_getpid);
	/* The child writes a trace file of its own, with string ids of its own. */
	io_feature_marked = 0;
	io_path_forget();
	io_fd_after_fork();
}

__attribute__((constructor)) static void io_init(void)
{
	/* NOTE: a bad value is reported by config.c (config.def lists STEPPROF_IO); here it means auto. */
	int mode = io_mode_parse(getenv("STEPPROF_IO"));
	if (mode < 0)
		mode = IO_MODE_AUTO;
	/* Resolve the hottest real functions now rather than at their first call. */
	io_real_get(IO_FN_read);
	io_real_get(IO_FN_open64);
	io_real_get(IO_FN_close);
	io_real_get(IO_FN_stat);
	io_pid = (int)syscall(SYS_getpid);
	pthread_atfork(NULL, NULL, io_after_fork_child);
	/* auto: the libc wrappers, unless `stepprof run --bpf` said STEPPROF_IO=bpf. */
	if (mode == IO_MODE_AUTO || mode == IO_MODE_LIBC)
		io_capture = IO_CAP_FILES | IO_CAP_WAITS;
	else if (mode == IO_MODE_BPF)
		io_capture = IO_CAP_WAITS;
	else
		io_capture = 0;
}

/* ------------------------------------------------------ 2. open family */

static inline int needs_mode(int flags)
{
	return (flags & O_CREAT) || (flags & O_TMPFILE) == O_TMPFILE;
}

#define VA_MODE(flags, mode)                                                                                           \
	do {                                                                                                           \
		if (needs_mode(flags)) {                                                                               \
			va_list ap;                                                                                    \
			va_start(ap, flags);                                                                           \
			mode = (mode_t)va_arg(ap, int);                                                                \
			va_end(ap);                                                                                    \
		}                                                                                                      \
	} while (0)

int open(const char *path, int flags, ...)
{
	int (*real)(const char *, int, ...) = IO_REAL(open);
	mode_t mode = 0;
	VA_MODE(flags, mode);
	struct io_call c;
	if (!io_begin(&c))
		return real(path, flags, mode);
	return io_end_open(&c, SP_API_open, path, flags, real(path, flags, mode));
}

int open64(const char *path, int flags, ...)
{
	int (*real)(const char *, int, ...) = IO_REAL(open64);
	mode_t mode = 0;
	VA_MODE(flags, mode);
	struct io_call c;
	if (!io_begin(&c))
		return real(path, flags, mode);
	return io_end_open(&c, SP_API_open64, path, flags, real(path, flags, mode));
}

int openat(int dirfd, const char *path, int flags, ...)
{
	int (*real)(int, const char *, int, ...) = IO_REAL(openat);
	mode_t mode = 0;
	VA_MODE(flags, mode);
	struct io_call c;
	if (!io_begin(&c))
		return real(dirfd, path, flags, mode);
	return io_end_open(&c, SP_API_openat, path, flags, real(dirfd, path, flags, mode));
}

int openat64(int dirfd, const char *path, int flags, ...)
{
	int (*real)(int, const char *, int, ...) = IO_REAL(openat64);
	mode_t mode = 0;
	VA_MODE(flags, mode);
	struct io_call c;
	if (!io_begin(&c))
		return real(dirfd, path, flags, mode);
	return io_end_open(&c, SP_API_openat64, path, flags, real(dirfd, path, flags, mode));
}

int creat(const char *path, mode_t mode)
{
	int (*real)(const char *, mode_t) = IO_REAL(creat);
	struct io_call c;
	if (!io_begin(&c))
		return real(path, mode);
	return io_end_open(&c, SP_API_creat, path, O_CREAT | O_WRONLY | O_TRUNC, real(path, mode));
}

int creat64(const char *path, mode_t mode)
{
	int (*real)(const char *, mode_t) = IO_REAL(creat64);
	struct io_call c;
	if (!io_begin(&c))
		return real(path, mode);
	return io_end_open(&c, SP_API_creat64, path, O_CREAT | O_WRONLY | O_TRUNC, real(path, mode));
}

/* _FORTIFY_SOURCE entry points: open(path, flags) without a mode. */
int __open_2(const char *path, int flags);
int __open64_2(const char *path, int flags);
int __openat_2(int dirfd, const char *path, int flags);
int __openat64_2(int dirfd, const char *path, int flags);

int __open_2(const char *path, int flags)
{
	int (*real)(const char *, int) = IO_REAL(__open_2);
	struct io_call c;
	if (!io_begin(&c))
		return real(path, flags);
	return io_end_open(&c, SP_API___open_2, path, flags, real(path, flags));
}

int __open64_2(const char *path, int flags)
{
	int (*real)(const char *, int) = IO_REAL(__open64_2);
	struct io_call c;
	if (!io_begin(&c))
		return real(path, flags);
	return io_end_open(&c, SP_API___open64_2, path, flags, real(path, flags));
}

int __openat_2(int dirfd, const char *path, int flags)
{
	int (*real)(int, const char *, int) = IO_REAL(__openat_2);
	struct io_call c;
	if (!io_begin(&c))
		return real(dirfd, path, flags);
	return io_end_open(&c, SP_API___openat_2, path, flags, real(dirfd, path, flags));
}

int __openat64_2(int dirfd, const char *path, int flags)
{
	int (*real)(int, const char *, int) = IO_REAL(__openat64_2);
	struct io_call c;
	if (!io_begin(&c))
		return real(dirfd, path, flags);
	return io_end_open(&c, SP_API___openat64_2, path, flags, real(dirfd, path, flags));
}

/* ------------------------------------------------------- 3. stdio open */

/* The flags fopen's mode string means, as far as the fd table cares ("r+", "w+", "a+": read and write). */
static int fmode_flags(const char *mode)
{
	if (!mode)
		return O_RDONLY;
	int rw = strchr(mode, '+') ? O_RDWR : 0;
	switch (mode[0]) {
	case 'w':
		return (rw ? rw : O_WRONLY) | O_CREAT | O_TRUNC;
	case 'a':
		return (rw ? rw : O_WRONLY) | O_CREAT | O_APPEND;
	default:
		return rw ? rw : O_RDONLY;
	}
}

/* A stream was opened (or not: NULL): OPEN of its fd. */
IO_INLINE FILE *fopen_end(struct io_call *c, unsigned api, const char *path, const char *mode, FILE *r)
{
	int fd = r ? io_file_fd(r) : -1;
	io_end(c, fd);
	io_rec_open(c, api, path, fmode_flags(mode), fd);
	return r;
}

FILE *fopen(const char *path, const char *mode)
{
	FILE *(*real)(const char *, const char *) = IO_REAL(fopen);
	struct io_call c;
	if (!io_begin(&c))
		return real(path, mode);
	return fopen_end(&c, SP_API_fopen, path, mode, real(path, mode));
}

FILE *fopen64(const char *path, const char *mode)
{
	FILE *(*real)(const char *, const char *) = IO_REAL(fopen64);
	struct io_call c;
	if (!io_begin(&c))
		return real(path, mode);
	return fopen_end(&c, SP_API_fopen64, path, mode, real(path, mode));
}

/*
 * freopen(path, ...) closes the stream's old fd (when it has one) and opens
 * path: OPEN. freopen(NULL, ...) only changes the mode of the same file: no
 * record, but the depth stays raised over libc's own work.
 */
static FILE *do_freopen(unsigned api, FILE *(*real)(const char *, const char *, FILE *), const char *path,
			const char *mode, FILE *fp)
{
	struct io_call c;
	if (!io_begin(&c))
		return real(path, mode, fp);
	if (!path) {
		FILE *r = real(path, mode, fp);
		io_end(&c, r ? 0 : -1);
		io_finish(&c);
		return r;
	}
	io_fd_clear(io_file_fd(fp));
	return fopen_end(&c, api, path, mode, real(path, mode, fp));
}

FILE *freopen(const char *path, const char *mode, FILE *fp)
{
	return do_freopen(SP_API_freopen, IO_REAL(freopen), path, mode, fp);
}

FILE *freopen64(const char *path, const char *mode, FILE *fp)
{
	return do_freopen(SP_API_freopen64, IO_REAL(freopen64), path, mode, fp);
}

/* ---------------------------------------------------------------- 4. close */

/* What close records of fd: what the table knew (w), type "other" if it was never resolved. */
IO_INLINE int close_end(struct io_call *c, unsigned api, int fd, uint64_t w, int r)
{
	io_end(c, r);
	if (__builtin_expect(w & IO_W_OUTPUT, 0)) {
		io_finish(c); /* an output file: no record */
		return r;
	}
	unsigned type = (w & IO_W_KNOWN) ? io_word_type(w) : SP_FDTYPE_OTHER;
	io_emit(SP_K_CLOSE, api, c->t0, c->t1, io_word_path(w), 0, fd, io_result(r, c->err), type, 0);
	io_finish(c);
	return r;
}

/*
 * What the table knew of fd (w), or, for an fd never described (inherited
 * across exec, received over a socket, from the parent's table after fork; a
 * stream fdopen'ed on one), what the kernel says while it is still open,
 * looked up outside the call's time.
 */
IO_INLINE uint64_t close_known(struct io_call *c, int fd, uint64_t w)
{
	if (__builtin_expect(!(w & IO_W_KNOWN), 0) && io_fd_tracked(fd)) {
		w = io_fd_lookup(fd, w);
		c->t0 = sp_now();
	}
	return w;
}

int close(int fd)
{
	int (*real)(int) = IO_REAL(close);
	/* Cleared before the real close: once it returns the number may be reused. */
	uint64_t w = io_fd_clear(fd);
	struct io_call c;
	if (!io_begin(&c))
		return real(fd);
	w = close_known(&c, fd, w);
	return close_end(&c, SP_API_close, fd, w, real(fd));
}

int fclose(FILE *fp)
{
	int (*real)(FILE *) = IO_REAL(fclose);
	int fd = io_file_fd(fp);
	uint64_t w = io_fd_clear(fd);
	struct io_call c;
	if (!io_begin(&c))
		return real(fp);
	if (fd < 0) { /* a memory stream: no fd to record, the depth raised over its clean-up all the same */
		int r = real(fp);
		io_end(&c, r);
		io_finish(&c);
		return r;
	}
	w = close_known(&c, fd, w);
	return close_end(&c, SP_API_fclose, fd, w, real(fp));
}

/* ------------------------------------------------------ 5. fd table upkeep */

/*
 * A vfork()ed child (Python's subprocess makes one: _posixsubprocess) runs on
 * its parent's memory until it execs, so what its dup2/close_range/fcntl did
 * to the fd table would be done to the parent's: a child's close_range(3, ~0U)
 * would wipe the parent's every entry (its epoll fds no longer waits for
 * loader data, its files looked up again), a dup2 of a pipe onto 0 would make
 * the parent's stdin a pipe. The calls below that change the table leave it alone
 * there. RATIONALE: a getpid per call, these calls are not the hot path (close
 * is, and is not guarded: a vfork child's close clears the parent's entry, which
 * its next use looks up again, docs/input-capture.md); vfork itself cannot be
 * wrapped in C (its child returns into the wrapper's frame, on the parent's
 * stack).
 */
static int io_in_vfork_child(void)
{
	return (int)syscall(SYS_getpid) != io_pid;
}

/*
 * These calls make descriptors whose type the reads and waits need (a read on a
 * pipe is a loader wait, not file input). They record nothing; they are cheap
 * enough to keep the table exact whether or not capture is on.
 */

int pipe(int fds[2])
{
	int r = IO_REAL(pipe)(fds);
	if (r == 0) {
		io_fd_set(fds[0], 0, SP_FDTYPE_PIPE, 1);
		io_fd_set(fds[1], 0, SP_FDTYPE_PIPE, 1);
	}
	return r;
}

int pipe2(int fds[2], int flags)
{
	int r = IO_REAL(pipe2)(fds, flags);
	if (r == 0) {
		io_fd_set(fds[0], 0, SP_FDTYPE_PIPE, 1);
		io_fd_set(fds[1], 0, SP_FDTYPE_PIPE, 1);
	}
	return r;
}

int socket(int domain, int type, int protocol)
{
	int r = IO_REAL(socket)(domain, type, protocol);
	if (r >= 0)
		io_fd_set(r, 0, SP_FDTYPE_SOCKET, 1);
	return r;
}

int socketpair(int domain, int type, int protocol, int fds[2])
{
	int r = IO_REAL(socketpair)(domain, type, protocol, fds);
	if (r == 0) {
		io_fd_set(fds[0], 0, SP_FDTYPE_SOCKET, 1);
		io_fd_set(fds[1], 0, SP_FDTYPE_SOCKET, 1);
	}
	return r;
}

int accept(int fd, struct sockaddr *addr, socklen_t *len)
{
	int r = IO_REAL(accept)(fd, addr, len);
	if (r >= 0)
		io_fd_set(r, 0, SP_FDTYPE_SOCKET, 1);
	return r;
}

int accept4(int fd, struct sockaddr *addr, socklen_t *len, int flags)
{
	int r = IO_REAL(accept4)(fd, addr, len, flags);
	if (r >= 0)
		io_fd_set(r, 0, SP_FDTYPE_SOCKET, 1);
	return r;
}

int dup(int fd)
{
	int r = IO_REAL(dup)(fd);
	if (r >= 0 && !io_in_vfork_child())
		io_fd_copy(fd, r);
	return r;
}

int dup2(int oldfd, int newfd)
{
	int (*real)(int, int) = IO_REAL(dup2);
	if (oldfd == newfd || io_in_vfork_child())
		return real(oldfd, newfd);
	uint64_t w = io_fd_clear(newfd);
	int r = real(oldfd, newfd);
	if (r >= 0)
		io_fd_copy(oldfd, r);
	else if (io_fd_tracked(newfd))
		__atomic_store_n(&io_fdtab[newfd].word, w, __ATOMIC_RELAXED); /* nothing changed */
	return r;
}

int dup3(int oldfd, int newfd, int flags)
{
	int (*real)(int, int, int) = IO_REAL(dup3);
	if (oldfd == newfd || io_in_vfork_child())
		return real(oldfd, newfd, flags);
	uint64_t w = io_fd_clear(newfd);
	int r = real(oldfd, newfd, flags);
	if (r >= 0)
		io_fd_copy(oldfd, r);
	else if (io_fd_tracked(newfd))
		__atomic_store_n(&io_fdtab[newfd].word, w, __ATOMIC_RELAXED);
	return r;
}

/*
 * fcntl's F_DUPFD and F_DUPFD_CLOEXEC are dups (Python's os.dup is one): the
 * copy describes what fd describes. Every other command is passed through.
 * RATIONALE: the third argument is read as one word whatever the command, as
 * glibc's own fcntl reads it: each command takes an int, a pointer or nothing,
 * all passed in the same register.
 */
#define IO_FCNTL(NAME)                                                                                                 \
	int NAME(int fd, int cmd, ...)                                                                                 \
	{                                                                                                              \
		va_list ap;                                                                                            \
		va_start(ap, cmd);                                                                                     \
		void *arg = va_arg(ap, void *);                                                                        \
		va_end(ap);                                                                                            \
		int r = IO_REAL(NAME)(fd, cmd, arg);                                                                   \
		if (r >= 0 && (cmd == F_DUPFD || cmd == F_DUPFD_CLOEXEC) && !io_in_vfork_child())                       \
			io_fd_copy(fd, r);                                                                             \
		return r;                                                                                              \
	}

IO_FCNTL(fcntl)
IO_FCNTL(fcntl64)

/*
 * Descriptors that die without close(): their entries go, or a number reused
 * by a descriptor the wrappers do not see born would keep a dead file's path
 * and type (a memfd after a pclose read as a "pipe", a loader wait).
 */
static void io_fd_clear_range(unsigned first, unsigned last)
{
	int hwm = __atomic_load_n(&io_fd_hwm, __ATOMIC_RELAXED);
	for (unsigned fd = first; fd <= last && (int)fd <= hwm && fd < IO_FD_MAX; fd++)
		io_fd_clear((int)fd);
}

int pclose(FILE *fp)
{
	io_fd_clear(io_file_fd(fp));
	return IO_REAL(pclose)(fp);
}

int close_range(unsigned first, unsigned last, int flags)
{
	int r = IO_REAL(close_range)(first, last, flags);
	if (r == 0 && !(flags & CLOSE_RANGE_CLOEXEC) && !io_in_vfork_child())
		io_fd_clear_range(first, last);
	return r;
}

void closefrom(int lowfd)
{
	IO_REAL(closefrom)(lowfd);
	if (!io_in_vfork_child())
		io_fd_clear_range(lowfd < 0 ? 0 : (unsigned)lowfd, IO_FD_MAX - 1);
}

/* Born of calls that are not input: a fresh entry (a memfd is a file without a path). */
int memfd_create(const char *name, unsigned flags)
{
	int r = IO_REAL(memfd_create)(name, flags);
	if (r >= 0)
		io_fd_set(r, 0, SP_FDTYPE_FILE, 1);
	return r;
}

#define IO_FD_OTHER(PROTO, CALL)                                                                                       \
	int PROTO                                                                                                      \
	{                                                                                                              \
		int r = CALL;                                                                                          \
		if (r >= 0)                                                                                            \
			io_fd_set_not_input(r);                                                                        \
		return r;                                                                                              \
	}

IO_FD_OTHER(eventfd(unsigned count, int flags), IO_REAL(eventfd)(count, flags))
IO_FD_OTHER(epoll_create(int size), IO_REAL(epoll_create)(size))
IO_FD_OTHER(epoll_create1(int flags), IO_REAL(epoll_create1)(flags))
IO_FD_OTHER(timerfd_create(int clock, int flags), IO_REAL(timerfd_create)(clock, flags))
IO_FD_OTHER(signalfd(int fd, const sigset_t *mask, int flags), IO_REAL(signalfd)(fd, mask, flags))

int epoll_ctl(int epfd, int op, int fd, struct epoll_event *ev)
{
	int r = IO_REAL(epoll_ctl)(epfd, op, fd, ev);
	if (r == 0 && op == EPOLL_CTL_ADD && io_enter_wait()) {
		/* io_fd_type may fstat an unknown fd: keep errno as the real call left it. */
		int e = errno;
		unsigned type = io_fd_type(fd);
		if (io_type_is_wait(type))
			io_fd_set_wait_type(epfd, type);
		io_leave();
		errno = e;
	}
	return r;
}
