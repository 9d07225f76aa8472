/*
 * hook_io_stat.c - libc wrappers of the stat family: one STAT record per call,
 * bytes = st_size, path = the path given or, for fstat and AT_EMPTY_PATH, the
 * fd's path from the fd table.
 *
 * Divided into: 1. path-based (stat, lstat, fstatat, statx), 2. fd-based
 * (fstat), 3. the pre-2.33 entry points (__xstat & co).
 *
 * NOTE: since glibc 2.33 programs bind to stat@GLIBC_2.33 and friends, real
 * exported functions; before, stat() was a static stub calling __xstat. Both
 * sets are wrapped, so every program counts whichever glibc built it.
 */
#include "io_hook.h"

#include <fcntl.h>
#include <sys/stat.h>

/* The wrappers below are the exported names (the version script lists them). */
#pragma GCC visibility push(default)

/* The path a stat-at call is about, and the fd when it is an fd query. */
static inline uint32_t at_path(int dirfd, const char *path, int flags, int *fd)
{
	if ((flags & AT_EMPTY_PATH) && path && !path[0]) {
		*fd = dirfd;
		return io_word_path(io_fd_word(dirfd));
	}
	*fd = -1;
	return io_path_id(path);
}

/* ------------------------------------------------------- 1. path-based */

#define PATH_STAT(NAME, STRUCT)                                                     \
	int NAME(const char *path, struct STRUCT *st)                               \
	{                                                                           \
		int (*real)(const char *, struct STRUCT *) = IO_REAL(NAME);         \
		if (!io_enter())                                                    \
			return real(path, st);                                      \
		uint64_t t0 = sp_now();                                             \
		int r = real(path, st);                                             \
		int e = errno;                                                      \
		uint64_t t1 = sp_now();                                             \
		io_rec_stat(SP_API_##NAME, io_path_id(path), -1, r, e, r == 0 ? (uint64_t)st->st_size : 0, t0, t1); \
		io_leave();                                                         \
		errno = e;                                                          \
		return r;                                                           \
	}

/* RATIONALE: a function-defining macro (not a statement macro): the eight
 * path-based wrappers differ only in name and struct; one body keeps them equal. */
PATH_STAT(stat, stat)
PATH_STAT(stat64, stat64)
PATH_STAT(lstat, stat)
PATH_STAT(lstat64, stat64)

#define AT_STAT(NAME, STRUCT)                                                              \
	int NAME(int dirfd, const char *path, struct STRUCT *st, int flags)                \
	{                                                                                  \
		int (*real)(int, const char *, struct STRUCT *, int) = IO_REAL(NAME);      \
		if (!io_enter())                                                           \
			return real(dirfd, path, st, flags);                               \
		uint64_t t0 = sp_now();                                                    \
		int r = real(dirfd, path, st, flags);                                      \
		int e = errno;                                                             \
		uint64_t t1 = sp_now();                                                    \
		int fd;                                                                    \
		uint32_t id = at_path(dirfd, path, flags, &fd);                            \
		io_rec_stat(SP_API_##NAME, id, fd, r, e, r == 0 ? (uint64_t)st->st_size : 0, t0, t1); \
		io_leave();                                                                \
		errno = e;                                                                 \
		return r;                                                                  \
	}

AT_STAT(fstatat, stat)
AT_STAT(fstatat64, stat64)

int statx(int dirfd, const char *path, int flags, unsigned int mask, struct statx *stx)
{
	int (*real)(int, const char *, int, unsigned int, struct statx *) = IO_REAL(statx);
	if (!io_enter())
		return real(dirfd, path, flags, mask, stx);
	uint64_t t0 = sp_now();
	int r = real(dirfd, path, flags, mask, stx);
	int e = errno;
	uint64_t t1 = sp_now();
	int fd;
	uint32_t id = at_path(dirfd, path, flags, &fd);
	uint64_t size = r == 0 && (stx->stx_mask & STATX_SIZE) ? stx->stx_size : 0;
	io_rec_stat(SP_API_statx, id, fd, r, e, size, t0, t1);
	io_leave();
	errno = e;
	return r;
}

/* ---------------------------------------------------------- 2. fd-based */

#define FD_STAT(NAME, STRUCT)                                                              \
	int NAME(int fd, struct STRUCT *st)                                                \
	{                                                                                  \
		int (*real)(int, struct STRUCT *) = IO_REAL(NAME);                         \
		if (!io_enter())                                                           \
			return real(fd, st);                                               \
		uint64_t t0 = sp_now();                                                    \
		int r = real(fd, st);                                                      \
		int e = errno;                                                             \
		uint64_t t1 = sp_now();                                                    \
		io_rec_stat(SP_API_##NAME, io_word_path(io_fd_word(fd)), fd, r, e,        \
			    r == 0 ? (uint64_t)st->st_size : 0, t0, t1);                   \
		io_leave();                                                                \
		errno = e;                                                                 \
		return r;                                                                  \
	}

FD_STAT(fstat, stat)
FD_STAT(fstat64, stat64)

/* ------------------------------------------------- 3. __xstat & co */

#define XPATH_STAT(NAME, STRUCT)                                                           \
	int NAME(int ver, const char *path, struct STRUCT *st)                             \
	{                                                                                  \
		int (*real)(int, const char *, struct STRUCT *) = IO_REAL(NAME);           \
		if (!io_enter())                                                           \
			return real(ver, path, st);                                        \
		uint64_t t0 = sp_now();                                                    \
		int r = real(ver, path, st);                                               \
		int e = errno;                                                             \
		uint64_t t1 = sp_now();                                                    \
		io_rec_stat(SP_API_##NAME, io_path_id(path), -1, r, e, r == 0 ? (uint64_t)st->st_size : 0, t0, t1); \
		io_leave();                                                                \
		errno = e;                                                                 \
		return r;                                                                  \
	}

XPATH_STAT(__xstat, stat)
XPATH_STAT(__xstat64, stat64)
XPATH_STAT(__lxstat, stat)
XPATH_STAT(__lxstat64, stat64)

#define XFD_STAT(NAME, STRUCT)                                                             \
	int NAME(int ver, int fd, struct STRUCT *st)                                       \
	{                                                                                  \
		int (*real)(int, int, struct STRUCT *) = IO_REAL(NAME);                    \
		if (!io_enter())                                                           \
			return real(ver, fd, st);                                          \
		uint64_t t0 = sp_now();                                                    \
		int r = real(ver, fd, st);                                                 \
		int e = errno;                                                             \
		uint64_t t1 = sp_now();                                                    \
		io_rec_stat(SP_API_##NAME, io_word_path(io_fd_word(fd)), fd, r, e,        \
			    r == 0 ? (uint64_t)st->st_size : 0, t0, t1);                   \
		io_leave();                                                                \
		errno = e;                                                                 \
		return r;                                                                  \
	}

XFD_STAT(__fxstat, stat)
XFD_STAT(__fxstat64, stat64)

#define XAT_STAT(NAME, STRUCT)                                                             \
	int NAME(int ver, int dirfd, const char *path, struct STRUCT *st, int flags)       \
	{                                                                                  \
		int (*real)(int, int, const char *, struct STRUCT *, int) = IO_REAL(NAME); \
		if (!io_enter())                                                           \
			return real(ver, dirfd, path, st, flags);                          \
		uint64_t t0 = sp_now();                                                    \
		int r = real(ver, dirfd, path, st, flags);                                 \
		int e = errno;                                                             \
		uint64_t t1 = sp_now();                                                    \
		int fd;                                                                    \
		uint32_t id = at_path(dirfd, path, flags, &fd);                            \
		io_rec_stat(SP_API_##NAME, id, fd, r, e, r == 0 ? (uint64_t)st->st_size : 0, t0, t1); \
		io_leave();                                                                \
		errno = e;                                                                 \
		return r;                                                                  \
	}

XAT_STAT(__fxstatat, stat)
XAT_STAT(__fxstatat64, stat64)
