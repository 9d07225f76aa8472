/*
 * hook_io_stat.c - libc wrappers of the stat family: one STAT record per call,
 * bytes = st_size, path = the path given or, for fstat and AT_EMPTY_PATH, the
 * fd's path from the fd table. An fstat also tells the fd table the fd's
 * type (io_fd_learn_mode).
 *
 * Divided into: 1. path-based (stat, lstat, fstatat, statx), 2. fd-based
 * (fstat), 3. the pre-2.33 entry points (__xstat & co).
 *
 * NOTE: since glibc 2.33 programs bind to stat@GLIBC_2.33 and friends, real
 * exported functions; older ones have stat() as a static stub calling __xstat. Both
 * sets are wrapped, so every program counts whichever glibc built it.
 */
#include "io_hook.h"

#include <fcntl.h>
#include <sys/stat.h>

/* The wrappers below are the exported names (the version script lists them). */
#pragma GCC visibility push(default)

/*
 * Each wrapper hands io_end_stat its arguments as fstatat would take them
 * (io_hook.h) and &st->st_size, read only when the call succeeded (st was
 * then valid).
 *
 * RATIONALE: function-defining macros (not statement macros): the variants of
 * each group differ only in name and struct; one body keeps them equal.
 */

/* ------------------------------------------------------- 1. path-based */

#define PATH_STAT(NAME, STRUCT)                                                                                        \
	int NAME(const char *path, struct STRUCT *st)                                                                  \
	{                                                                                                              \
		int (*real)(const char *, struct STRUCT *) = IO_REAL(NAME);                                            \
		struct io_call c;                                                                                      \
		if (!io_begin(&c))                                                                                     \
			return real(path, st);                                                                         \
		return io_end_stat(&c, SP_API_##NAME, AT_FDCWD, path, 0, real(path, st), &st->st_size);                \
	}

PATH_STAT(stat, stat)
PATH_STAT(stat64, stat64)
PATH_STAT(lstat, stat)
PATH_STAT(lstat64, stat64)

#define AT_STAT(NAME, STRUCT)                                                                                          \
	int NAME(int dirfd, const char *path, struct STRUCT *st, int flags)                                            \
	{                                                                                                              \
		int (*real)(int, const char *, struct STRUCT *, int) = IO_REAL(NAME);                                  \
		struct io_call c;                                                                                      \
		if (!io_begin(&c))                                                                                     \
			return real(dirfd, path, st, flags);                                                           \
		return io_end_stat(&c, SP_API_##NAME, dirfd, path, flags, real(dirfd, path, st, flags), &st->st_size); \
	}

AT_STAT(fstatat, stat)
AT_STAT(fstatat64, stat64)

int statx(int dirfd, const char *path, int flags, unsigned int mask, struct statx *stx)
{
	int (*real)(int, const char *, int, unsigned int, struct statx *) = IO_REAL(statx);
	struct io_call c;
	if (!io_begin(&c))
		return real(dirfd, path, flags, mask, stx);
	int r = real(dirfd, path, flags, mask, stx);
	io_end(&c, r);
	io_rec_stat(&c, SP_API_statx, dirfd, path, flags, r,
		    r == 0 && (stx->stx_mask & STATX_SIZE) ? stx->stx_size : 0);
	return r;
}

/* ---------------------------------------------------------- 2. fd-based */

#define FD_STAT(NAME, STRUCT)                                                                                          \
	int NAME(int fd, struct STRUCT *st)                                                                            \
	{                                                                                                              \
		int (*real)(int, struct STRUCT *) = IO_REAL(NAME);                                                     \
		struct io_call c;                                                                                      \
		if (!io_begin(&c))                                                                                     \
			return real(fd, st);                                                                           \
		int r = real(fd, st);                                                                                  \
		if (r == 0)                                                                                            \
			io_fd_learn_mode(fd, st->st_mode);                                                             \
		return io_end_stat(&c, SP_API_##NAME, fd, "", AT_EMPTY_PATH, r, &st->st_size);                         \
	}

FD_STAT(fstat, stat)
FD_STAT(fstat64, stat64)

/* ------------------------------------------------- 3. __xstat & co */

#define XPATH_STAT(NAME, STRUCT)                                                                                       \
	int NAME(int ver, const char *path, struct STRUCT *st)                                                         \
	{                                                                                                              \
		int (*real)(int, const char *, struct STRUCT *) = IO_REAL(NAME);                                       \
		struct io_call c;                                                                                      \
		if (!io_begin(&c))                                                                                     \
			return real(ver, path, st);                                                                    \
		return io_end_stat(&c, SP_API_##NAME, AT_FDCWD, path, 0, real(ver, path, st), &st->st_size);           \
	}

XPATH_STAT(__xstat, stat)
XPATH_STAT(__xstat64, stat64)
XPATH_STAT(__lxstat, stat)
XPATH_STAT(__lxstat64, stat64)

#define XFD_STAT(NAME, STRUCT)                                                                                         \
	int NAME(int ver, int fd, struct STRUCT *st)                                                                   \
	{                                                                                                              \
		int (*real)(int, int, struct STRUCT *) = IO_REAL(NAME);                                                \
		struct io_call c;                                                                                      \
		if (!io_begin(&c))                                                                                     \
			return real(ver, fd, st);                                                                      \
		int r = real(ver, fd, st);                                                                             \
		if (r == 0)                                                                                            \
			io_fd_learn_mode(fd, st->st_mode);                                                             \
		return io_end_stat(&c, SP_API_##NAME, fd, "", AT_EMPTY_PATH, r, &st->st_size);                         \
	}

XFD_STAT(__fxstat, stat)
XFD_STAT(__fxstat64, stat64)

#define XAT_STAT(NAME, STRUCT)                                                                                         \
	int NAME(int ver, int dirfd, const char *path, struct STRUCT *st, int flags)                                   \
	{                                                                                                              \
		int (*real)(int, int, const char *, struct STRUCT *, int) = IO_REAL(NAME);                             \
		struct io_call c;                                                                                      \
		if (!io_begin(&c))                                                                                     \
			return real(ver, dirfd, path, st, flags);                                                      \
		return io_end_stat(&c, SP_API_##NAME, dirfd, path, flags, real(ver, dirfd, path, st, flags),           \
				   &st->st_size);                                                                      \
	}

XAT_STAT(__fxstatat, stat)
XAT_STAT(__fxstatat64, stat64)
