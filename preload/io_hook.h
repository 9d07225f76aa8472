/*
 * io_hook.h - what the libc input wrappers (hook_io_*.c) share: the table of
 * real functions, the on/off switch (STEPPROF_IO), the enter/leave pair and
 * the record helpers.
 *
 * Every wrapper has one shape:
 *
 *	real = IO_REAL(read);
 *	if (!io_enter())                    // not capturing, or nested: just forward
 *		return real(fd, buf, n);
 *	t0 = sp_now(); r = real(...); e = errno; t1 = sp_now();
 *	io_rec_...(...);                    // one fixed-size record
 *	io_leave(); errno = e; return r;
 *
 * io_enter raises sp_hook_depth for the call and the record, so that libc
 * calling itself through the PLT, or the recorder creating its trace file,
 * is not recorded.
 *
 * Divided into: 1. real functions, 2. mode, 3. enter/leave, 4. records.
 */
#ifndef STEPPROF_IO_HOOK_H
#define STEPPROF_IO_HOOK_H

#include <dirent.h>
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <sys/stat.h>

#include "recorder.h"
#include "io_fdtab.h"

/* ------------------------------------------------------- 1. real functions */

enum io_fn {
#define SP_API_IO(name, version) IO_FN_##name,
#include "stepprof/api_io.def"
#undef SP_API_IO
	IO_FN__COUNT
};

SP_HIDDEN extern void *io_real_ptr[IO_FN__COUNT];

/*
 * Resolve the real function (dlsym/dlvsym RTLD_NEXT, through libc's own dlsym,
 * not the preload's dlsym override). A missing symbol resolves to a stub that
 * fails with ENOSYS, so a wrapper never calls NULL.
 */
SP_HIDDEN void *io_real_resolve(unsigned fn);

static inline void *io_real_get(unsigned fn)
{
	void *p = __atomic_load_n(&io_real_ptr[fn], __ATOMIC_RELAXED);
	return __builtin_expect(p != 0, 1) ? p : io_real_resolve(fn);
}

#define IO_REAL(fn) ((__typeof__(&fn))io_real_get(IO_FN_##fn))

/* Entry points glibc >= 2.33 no longer declares. */
int __xstat(int ver, const char *path, struct stat *st);
int __xstat64(int ver, const char *path, struct stat64 *st);
int __lxstat(int ver, const char *path, struct stat *st);
int __lxstat64(int ver, const char *path, struct stat64 *st);
int __fxstat(int ver, int fd, struct stat *st);
int __fxstat64(int ver, int fd, struct stat64 *st);
int __fxstatat(int ver, int dirfd, const char *path, struct stat *st, int flags);
int __fxstatat64(int ver, int dirfd, const char *path, struct stat64 *st, int flags);

/* ---------------------------------------------------------------- 2. mode */

enum io_mode { IO_MODE_AUTO, IO_MODE_LIBC, IO_MODE_BPF, IO_MODE_OFF };

/* Parse STEPPROF_IO (NULL or "" = auto). Returns -1 for a bad value. */
SP_HIDDEN int io_mode_parse(const char *s);

/*
 * What the libc wrappers record: file I/O (open/read/stat/close/listdir) with
 * STEPPROF_IO auto or libc; waits (poll/select/epoll/recv*) also with bpf,
 * because the eBPF collector traces the file syscalls (reads on pipes
 * included) but not these. off: nothing.
 */
#define IO_CAP_FILES 1
#define IO_CAP_WAITS 2
SP_HIDDEN extern volatile int io_capture;

/* ------------------------------------------------------- 3. enter / leave */

/* File-I/O wrappers: 1 = record this call (depth raised), 0 = just forward. */
static inline int io_enter(void)
{
	if (__builtin_expect(!sp_active || !(io_capture & IO_CAP_FILES) || sp_hook_depth, 0))
		return 0;
	sp_hook_depth++;
	return 1;
}

/* The same for the wait wrappers (hook_io_wait.c). */
static inline int io_enter_wait(void)
{
	if (__builtin_expect(!sp_active || !(io_capture & IO_CAP_WAITS) || sp_hook_depth, 0))
		return 0;
	sp_hook_depth++;
	return 1;
}

static inline void io_leave(void)
{
	sp_hook_depth--;
}

/* ------------------------------------------------------------- 4. records */

/* Once per process: mark the trace as holding libc input records. */
SP_HIDDEN void io_mark_feature(void);
SP_HIDDEN extern int io_feature_marked;

static inline int io_result(long r, int err)
{
	if (r >= 0)
		return 0;
	return err > 32767 ? -32767 : -err;
}

static inline void io_emit(unsigned kind, unsigned api, uint64_t t0, uint64_t t1, uint32_t path, uint64_t bytes, int fd,
			   int result, unsigned fdtype, uint32_t count)
{
	/* NOTE: not zeroed (192 bytes per call): these seven fields are a superset of
	 * every input kind's mask (kinds.def), and the codec reads only the mask. */
	uint64_t f[SP_F__COUNT];
	if (__builtin_expect(!io_feature_marked, 0))
		io_mark_feature();
	f[SP_F_PATH] = path;
	f[SP_F_BYTES] = bytes;
	f[SP_F_FD] = (uint64_t)(int64_t)fd;
	f[SP_F_RESULT] = (uint64_t)(int64_t)result;
	f[SP_F_FD_TYPE] = fdtype;
	f[SP_F_SOURCE] = SP_SOURCE_LIBC;
	f[SP_F_COUNT] = count;
	sp_emit(kind, api, t0, t1, f);
}

/*
 * Intern a path given to open/stat; 0 for NULL or "". A one-entry per-thread
 * cache skips the intern table for the most common repeat, a stat then an
 * open of the same file (io_real.c). io_path_forget() empties it (fork: the
 * child's trace file has ids of its own).
 */
SP_HIDDEN uint32_t io_path_intern(const char *path);
SP_HIDDEN void io_path_forget(void);

static inline uint32_t io_path_id(const char *path)
{
	return path && path[0] ? io_path_intern(path) : 0;
}

/*
 * A read-like call on fd returned r bytes (or -1, errno err): READ on a file,
 * LOADER_WAIT on a pipe or a socket (the trainer receiving a batch).
 */
static inline void io_rec_read(unsigned api, int fd, long r, int err, uint64_t t0, uint64_t t1)
{
	uint64_t w = io_fd_word_typed(fd);
	unsigned type = io_word_type(w);
	unsigned kind = io_type_is_wait(type) ? SP_K_LOADER_WAIT : SP_K_READ;
	io_emit(kind, api, t0, t1, io_word_path(w), r > 0 ? (uint64_t)r : 0, fd, io_result(r, err), type, 0);
}

/* An open-like call returned fd r (or -1, errno err). */
static inline void io_rec_open(unsigned api, const char *path, int flags, long r, int err, uint64_t t0, uint64_t t1)
{
	uint32_t id = io_path_id(path);
	if (r >= 0) {
		int known;
		unsigned type = io_guess_type(path, flags, &known);
		io_fd_set((int)r, id, type, known);
	}
	io_emit(SP_K_OPEN, api, t0, t1, id, 0, r >= 0 ? (int)r : -1, io_result(r, err), 0, 0);
}

/* A stat-like call: path id (or the fd's), fd (-1 for a path), size on success. */
static inline void io_rec_stat(unsigned api, uint32_t path, int fd, long r, int err, uint64_t size, uint64_t t0,
			       uint64_t t1)
{
	io_emit(SP_K_STAT, api, t0, t1, path, r == 0 ? size : 0, fd, io_result(r, err), 0, 0);
}

#endif /* STEPPROF_IO_HOOK_H */
