/*
 * tracefile_int.h - what the files of the trace-file writer share (tracefile.c,
 * tf_space.c, tf_chunks.c): small raw-syscall helpers and the functions one file
 * calls in another. Not part of the contract, which is tracefile.h.
 *
 * RATIONALE: every file operation is a raw syscall so that the preload's libc
 * I/O wrappers never record (or recurse into) stepprof's own I/O, and nothing
 * here calls malloc: the recorder may create its file from inside any hooked
 * call, including one made by a signal handler.
 */
#ifndef STEPPROF_TRACEFILE_INT_H
#define STEPPROF_TRACEFILE_INT_H

#include "tracefile.h"

#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

static inline long sys_openat(int dirfd, const char *path, int flags, int mode)
{
	return syscall(SYS_openat, dirfd, path, flags, mode);
}

static inline void sys_close(int fd)
{
	syscall(SYS_close, fd);
}

static inline uint64_t mono_ns(clockid_t id)
{
	struct timespec ts;
	clock_gettime(id, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

static inline void fmt(char *buf, size_t n, const char *f, ...) __attribute__((format(printf, 3, 4)));
static inline void fmt(char *buf, size_t n, const char *f, ...)
{
	va_list ap;
	va_start(ap, f);
	vsnprintf(buf, n, f, ap);
	va_end(ap);
}

/* tracefile.c */
void tf_warn(struct sp_tf *tf, const char *key, const char *msg);
int under_fsize_limit(uint64_t off, uint64_t len);
int high_fd(int fd);
int tf_open_own_dir(const struct sp_tf *tf);

/* tf_space.c */
int reserve_range(struct sp_tf *tf, uint64_t off, uint64_t len);
int reserve_chunk(struct sp_tf *tf, uint64_t off, uint64_t len);
void warn_space(struct sp_tf *tf, const char *what);

#endif /* STEPPROF_TRACEFILE_INT_H */
