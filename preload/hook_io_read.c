/*
 * hook_io_read.c - libc wrappers of the read family and of directory listing.
 *
 * A read on a regular file (or anything but a pipe or socket) is a READ record;
 * a read on a pipe or a socket is the trainer waiting for data from a loader
 * worker: a LOADER_WAIT record (io_rec_read decides from the fd table).
 * bytes = what the call returned. A directory read in many readdir calls is one
 * LISTDIR record (io_fdtab.h, section 4).
 *
 * Divided into: 1. read, pread, readv, preadv (+ fortify _chk), 2. stdio fread,
 * 3. directory listing.
 */
#include "io_hook.h"

#include <dirent.h>
#include <sys/uio.h>
#include <unistd.h>

/* The wrappers below are the exported names (the version script lists them). */
#pragma GCC visibility push(default)

/* --------------------------------------------- 1. read, pread, readv, preadv */

ssize_t read(int fd, void *buf, size_t n)
{
	ssize_t (*real)(int, void *, size_t) = IO_REAL(read);
	if (!io_enter())
		return real(fd, buf, n);
	uint64_t t0 = sp_now();
	ssize_t r = real(fd, buf, n);
	int e = errno;
	uint64_t t1 = sp_now();
	io_rec_read(SP_API_read, fd, r, e, t0, t1);
	io_leave();
	errno = e;
	return r;
}

ssize_t __read_chk(int fd, void *buf, size_t n, size_t buflen);
ssize_t __pread_chk(int fd, void *buf, size_t n, off_t off, size_t buflen);
ssize_t __pread64_chk(int fd, void *buf, size_t n, off64_t off, size_t buflen);

ssize_t __read_chk(int fd, void *buf, size_t n, size_t buflen)
{
	ssize_t (*real)(int, void *, size_t, size_t) = IO_REAL(__read_chk);
	if (!io_enter())
		return real(fd, buf, n, buflen);
	uint64_t t0 = sp_now();
	ssize_t r = real(fd, buf, n, buflen);
	int e = errno;
	uint64_t t1 = sp_now();
	io_rec_read(SP_API___read_chk, fd, r, e, t0, t1);
	io_leave();
	errno = e;
	return r;
}

#define PREAD(NAME, OFF_T)                                                      \
	ssize_t NAME(int fd, void *buf, size_t n, OFF_T off)                    \
	{                                                                       \
		ssize_t (*real)(int, void *, size_t, OFF_T) = IO_REAL(NAME);    \
		if (!io_enter())                                                \
			return real(fd, buf, n, off);                           \
		uint64_t t0 = sp_now();                                         \
		ssize_t r = real(fd, buf, n, off);                              \
		int e = errno;                                                  \
		uint64_t t1 = sp_now();                                         \
		io_rec_read(SP_API_##NAME, fd, r, e, t0, t1);                   \
		io_leave();                                                     \
		errno = e;                                                      \
		return r;                                                       \
	}

/* RATIONALE: function-defining macros: the variants differ in name and types only. */
PREAD(pread, off_t)
PREAD(pread64, off64_t)

#define PREAD_CHK(NAME, OFF_T)                                                          \
	ssize_t NAME(int fd, void *buf, size_t n, OFF_T off, size_t buflen)             \
	{                                                                               \
		ssize_t (*real)(int, void *, size_t, OFF_T, size_t) = IO_REAL(NAME);    \
		if (!io_enter())                                                        \
			return real(fd, buf, n, off, buflen);                           \
		uint64_t t0 = sp_now();                                                 \
		ssize_t r = real(fd, buf, n, off, buflen);                              \
		int e = errno;                                                          \
		uint64_t t1 = sp_now();                                                 \
		io_rec_read(SP_API_##NAME, fd, r, e, t0, t1);                           \
		io_leave();                                                             \
		errno = e;                                                              \
		return r;                                                               \
	}

PREAD_CHK(__pread_chk, off_t)
PREAD_CHK(__pread64_chk, off64_t)

ssize_t readv(int fd, const struct iovec *iov, int iovcnt)
{
	ssize_t (*real)(int, const struct iovec *, int) = IO_REAL(readv);
	if (!io_enter())
		return real(fd, iov, iovcnt);
	uint64_t t0 = sp_now();
	ssize_t r = real(fd, iov, iovcnt);
	int e = errno;
	uint64_t t1 = sp_now();
	io_rec_read(SP_API_readv, fd, r, e, t0, t1);
	io_leave();
	errno = e;
	return r;
}

#define PREADV(NAME, OFF_T)                                                                     \
	ssize_t NAME(int fd, const struct iovec *iov, int iovcnt, OFF_T off)                    \
	{                                                                                       \
		ssize_t (*real)(int, const struct iovec *, int, OFF_T) = IO_REAL(NAME);         \
		if (!io_enter())                                                                \
			return real(fd, iov, iovcnt, off);                                      \
		uint64_t t0 = sp_now();                                                         \
		ssize_t r = real(fd, iov, iovcnt, off);                                         \
		int e = errno;                                                                  \
		uint64_t t1 = sp_now();                                                         \
		io_rec_read(SP_API_##NAME, fd, r, e, t0, t1);                                   \
		io_leave();                                                                     \
		errno = e;                                                                      \
		return r;                                                                       \
	}

PREADV(preadv, off_t)
PREADV(preadv64, off64_t)

#define PREADV2(NAME, OFF_T)                                                                    \
	ssize_t NAME(int fd, const struct iovec *iov, int iovcnt, OFF_T off, int flags)         \
	{                                                                                       \
		ssize_t (*real)(int, const struct iovec *, int, OFF_T, int) = IO_REAL(NAME);    \
		if (!io_enter())                                                                \
			return real(fd, iov, iovcnt, off, flags);                               \
		uint64_t t0 = sp_now();                                                         \
		ssize_t r = real(fd, iov, iovcnt, off, flags);                                  \
		int e = errno;                                                                  \
		uint64_t t1 = sp_now();                                                         \
		io_rec_read(SP_API_##NAME, fd, r, e, t0, t1);                                   \
		io_leave();                                                                     \
		errno = e;                                                                      \
		return r;                                                                       \
	}

PREADV2(preadv2, off_t)
PREADV2(preadv64v2, off64_t)

/* ------------------------------------------------------------ 2. stdio fread */

/* bytes = items read x size: what the program received, whatever stdio buffered.
 * A stream without an fd (fmemopen, open_memstream) is memory, not input. */
#define FREAD(NAME)                                                                     \
	size_t NAME(void *ptr, size_t size, size_t n, FILE *fp)                         \
	{                                                                               \
		size_t (*real)(void *, size_t, size_t, FILE *) = IO_REAL(NAME);         \
		if (!fp || fp->_fileno < 0 || !io_enter())                              \
			return real(ptr, size, n, fp);                                  \
		uint64_t t0 = sp_now();                                                 \
		size_t r = real(ptr, size, n, fp);                                      \
		int e = errno;                                                          \
		uint64_t t1 = sp_now();                                                 \
		long got = (long)(r * size);                                            \
		io_rec_read(SP_API_##NAME, fp->_fileno, r == 0 && ferror_unlocked(fp) ? -1 : got, e, t0, t1); \
		io_leave();                                                             \
		errno = e;                                                              \
		return r;                                                               \
	}

/* NOTE: <stdio.h> may define fread_unlocked as a macro when optimising. */
#undef fread_unlocked
FREAD(fread)
FREAD(fread_unlocked)

size_t __fread_chk(void *ptr, size_t ptrlen, size_t size, size_t n, FILE *fp);
size_t __fread_unlocked_chk(void *ptr, size_t ptrlen, size_t size, size_t n, FILE *fp);

#define FREAD_CHK(NAME)                                                                 \
	size_t NAME(void *ptr, size_t ptrlen, size_t size, size_t n, FILE *fp)          \
	{                                                                               \
		size_t (*real)(void *, size_t, size_t, size_t, FILE *) = IO_REAL(NAME); \
		if (!fp || fp->_fileno < 0 || !io_enter())                              \
			return real(ptr, ptrlen, size, n, fp);                          \
		uint64_t t0 = sp_now();                                                 \
		size_t r = real(ptr, ptrlen, size, n, fp);                              \
		int e = errno;                                                          \
		uint64_t t1 = sp_now();                                                 \
		long got = (long)(r * size);                                            \
		io_rec_read(SP_API_##NAME, fp->_fileno, r == 0 && ferror_unlocked(fp) ? -1 : got, e, t0, t1); \
		io_leave();                                                             \
		errno = e;                                                              \
		return r;                                                               \
	}

FREAD_CHK(__fread_chk)
FREAD_CHK(__fread_unlocked_chk)

/* ------------------------------------------------------ 3. directory listing */

/*
 * glibc declares DIR* arguments nonnull, so a plain NULL test would be optimised
 * away; closedir(NULL) is defined (EINVAL) and must not reach dirfd(NULL).
 */
static inline int io_null(const void *p)
{
	__asm__("" : "+r"(p));
	return p == NULL;
}

static void emit_listdir(unsigned api, int fd, uint64_t begin, uint64_t end, uint64_t bytes, int result)
{
	uint64_t w = io_fd_word(fd);
	io_emit(SP_K_LISTDIR, api, begin, end, io_word_path(w), 0, fd, result, 0,
		bytes > 0xffffffffu ? 0xffffffffu : (uint32_t)bytes);
}

/* A listing pending on fd (stopped before its end) is recorded now. */
static void flush_listdir(unsigned api, int fd)
{
	if (!io_fd_tracked(fd))
		return;
	struct io_fd *s = &io_fdtab[fd];
	uint64_t begin = __atomic_exchange_n(&s->dir_begin, 0, __ATOMIC_RELAXED);
	if (begin)
		emit_listdir(api, fd, begin, s->dir_end, s->dir_bytes, 0);
}

DIR *opendir(const char *path)
{
	DIR *(*real)(const char *) = IO_REAL(opendir);
	if (!io_enter())
		return real(path);
	uint64_t t0 = sp_now();
	DIR *d = real(path);
	int e = errno;
	uint64_t t1 = sp_now();
	if (d) {
		int fd = dirfd(d);
		io_fd_set(fd, io_path_id(path), SP_FDTYPE_DIR, 1);
		io_dir_start(fd, t0);
	} else {
		io_emit(SP_K_LISTDIR, SP_API_opendir, t0, t1, io_path_id(path), 0, -1, io_result(-1, e), 0, 0);
	}
	io_leave();
	errno = e;
	return d;
}

DIR *fdopendir(int fd)
{
	DIR *(*real)(int) = IO_REAL(fdopendir);
	if (!io_enter())
		return real(fd);
	uint64_t t0 = sp_now();
	DIR *d = real(fd);
	int e = errno;
	if (d && io_fd_tracked(fd)) {
		io_fd_set(fd, io_word_path(io_fd_word(fd)), SP_FDTYPE_DIR, 1);
		io_dir_start(fd, t0);
	}
	io_leave();
	errno = e;
	return d;
}

#define READDIR(NAME, DIRENT)                                                              \
	struct DIRENT *NAME(DIR *dirp)                                                     \
	{                                                                                  \
		struct DIRENT *(*real)(DIR *) = IO_REAL(NAME);                             \
		if (io_null(dirp) || !io_enter())                                                  \
			return real(dirp);                                                 \
		int fd = dirfd(dirp);                                                      \
		int e0 = errno;                                                            \
		uint64_t t0 = sp_now();                                                    \
		struct DIRENT *d = real(dirp);                                             \
		int e = errno;                                                             \
		uint64_t t1 = sp_now();                                                    \
		if (io_fd_tracked(fd)) {                                                   \
			struct io_fd *s = &io_fdtab[fd];                                   \
			if (!__atomic_load_n(&s->dir_begin, __ATOMIC_RELAXED))             \
				io_dir_start(fd, t0);                                      \
			if (d) {                                                           \
				s->dir_bytes += d->d_reclen;                               \
				s->dir_end = t1;                                           \
			} else {                                                           \
				uint64_t b = __atomic_exchange_n(&s->dir_begin, 0, __ATOMIC_RELAXED); \
				emit_listdir(SP_API_##NAME, fd, b, t1, s->dir_bytes, e != e0 ? io_result(-1, e) : 0); \
			}                                                                  \
		}                                                                          \
		io_leave();                                                                \
		errno = e;                                                                 \
		return d;                                                                  \
	}

READDIR(readdir, dirent)
READDIR(readdir64, dirent64)

int closedir(DIR *dirp)
{
	int (*real)(DIR *) = IO_REAL(closedir);
	if (io_null(dirp))
		return real(dirp);
	int fd = dirfd(dirp);
	if (io_enter()) {
		int e = errno;
		flush_listdir(SP_API_closedir, fd);
		io_leave();
		errno = e;
	}
	io_fd_clear(fd);
	return real(dirp);
}

ssize_t getdents64(int fd, void *buf, size_t n)
{
	ssize_t (*real)(int, void *, size_t) = IO_REAL(getdents64);
	if (!io_enter())
		return real(fd, buf, n);
	uint64_t t0 = sp_now();
	ssize_t r = real(fd, buf, n);
	int e = errno;
	uint64_t t1 = sp_now();
	emit_listdir(SP_API_getdents64, fd, t0, t1, r > 0 ? (uint64_t)r : 0, io_result(r, e));
	io_leave();
	errno = e;
	return r;
}
