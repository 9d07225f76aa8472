/*
 * io_hook.h - what the libc input wrappers (hook_io_*.c) share: the table of
 * real functions, the on/off switch (STEPPROF_IO), the begin/end pair and
 * the record helpers.
 *
 * Every wrapper has one shape:
 *
 *	real = IO_REAL(read);
 *	struct io_call c;
 *	if (!io_begin(&c))                  // not capturing, or nested: just forward
 *		return real(fd, buf, n);
 *	return io_end_read(&c, SP_API_read, fd, real(fd, buf, n));
 *
 * io_end_<what>() is called with the real call's result, so it runs right
 * after the real call: it notes the call's errno if it failed and takes the
 * end time (io_end), writes one fixed-size record of its kind, and finishes
 * the call (io_finish: depth back; errno is left as the real call left it),
 * then returns the result. A wrapper whose record needs something the call
 * filled in (stat's st_size, fread's stream error) calls io_end() itself, then
 * io_rec_<what>().
 *
 * io_begin raises sp_hook_depth for the call and the record, so that libc
 * calling itself through the PLT, or the recorder creating its trace file,
 * is not recorded.
 *
 * Divided into: 1. real functions, 2. mode, 3. begin/end, 4. records.
 */
#ifndef STEPPROF_IO_HOOK_H
#define STEPPROF_IO_HOOK_H

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>

#include "recorder.h"
#include "io_fdtab.h"

/* ------------------------------------------------------- 1. real functions */

enum io_fn {
#define SP_API_IO(name, id, version) IO_FN_##name,
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
/* libc's own function of that name (after libstepprof.so), for a wrapper outside the lists: NULL when none */
SP_HIDDEN void *io_real_by_name(const char *name);

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
 * STEPPROF_IO auto or libc; waits (poll/select/epoll/recv*), sendfile and
 * copy_file_range also with bpf, because the eBPF collector traces the file
 * syscalls (reads on pipes included) but not these. off: nothing.
 */
#define IO_CAP_FILES 1
#define IO_CAP_WAITS 2
SP_HIDDEN extern volatile int io_capture;

/* ------------------------------------------------------- 3. begin / end */

/*
 * A wrapper left by siglongjmp. A signal handler that jumps out of a blocking
 * read (the alarm-and-jump timeout) leaves the depth raised: nothing more was
 * recorded on that thread. So the outermost wrapper of a thread notes its
 * frame and its return address (io_outer). A call met with the depth raised
 * is nested in a live wrapper unless io_left_by_a_jump, the rare path, finds
 * that wrapper gone: its return address overwritten in its frame (by the
 * calls made after the jump, from its caller or above), or this call made at
 * or above its frame (a nested call, or a handler that interrupted it on the
 * same stack, runs below it) and not on an alternate signal stack (a handler
 * there is nested, wherever that stack lies). It then lowers the depth.
 * RATIONALE: the frame is a fixed point of the wrapper's call, not its stack
 * pointer: whatever the wrapper's frame size, two wrappers called from one
 * place compare equal. On x86_64 it is the canonical frame address (the
 * caller's stack pointer before the call: __builtin_dwarf_cfa) and the return
 * address is the word below it, where the call pushed it; elsewhere
 * (aarch64) the frame record's address (__builtin_frame_address) and the
 * return address the word above it. The CFA needs no frame pointer: with
 * __builtin_frame_address every wrapper kept one (a push, a move and a pop,
 * and one register fewer: ~4 instructions a call). So the function that
 * enters (io_enter*, io_begin*, always inlined) must stay on the stack until
 * its io_leave: a wrapper, or a helper that leaves before it returns, or one
 * always inlined into its wrapper (fread_recorded).
 */
struct io_outer {
	uintptr_t frame; /* 0: no wrapper of ours raised the depth */
	uintptr_t ret;
};
SP_HIDDEN extern __thread struct io_outer io_outer __attribute__((tls_model("initial-exec")));
SP_HIDDEN int io_left_by_a_jump(uintptr_t frame);

#if defined(__x86_64__)
#define IO_FRAME()	      ((uintptr_t)__builtin_dwarf_cfa())
#define IO_RET_SLOT(frame) ((const uintptr_t *)((frame) - sizeof(void *)))
#else
#define IO_FRAME()	      ((uintptr_t)__builtin_frame_address(0))
#define IO_RET_SLOT(frame) ((const uintptr_t *)((frame) + sizeof(void *)))
#endif

/* 1 = capture `cap` on this call (depth raised: io_leave after), 0 = not capturing, or nested. */
static inline __attribute__((always_inline)) int io_enter_cap(int cap)
{
	if (__builtin_expect(!sp_cap.on || !(io_capture & cap), 0))
		return 0;
	uintptr_t frame = IO_FRAME();
	if (__builtin_expect(sp_hook_depth != 0, 0) && !io_left_by_a_jump(frame))
		return 0;
	/* The depth is 0 here (a wrapper never raises it from another value): this
	 * call is the thread's outermost. The word itself, not
	 * __builtin_return_address: aarch64's pac-ret signs the saved one. */
	io_outer.ret = *IO_RET_SLOT(frame);
	io_outer.frame = frame;
	/* both written before a handler can see the depth raised */
	__atomic_signal_fence(__ATOMIC_SEQ_CST);
	sp_hook_depth = 1;
	return 1;
}

/* File I/O; waits (hook_io_wait.c). Used as such by the calls that record nothing themselves. */
static inline __attribute__((always_inline)) int io_enter(void)
{
	return io_enter_cap(IO_CAP_FILES);
}

static inline __attribute__((always_inline)) int io_enter_wait(void)
{
	return io_enter_cap(IO_CAP_WAITS);
}

/* Back to 0 (io_enter_cap): the thread is in no wrapper of ours. */
static inline void io_leave(void)
{
	io_outer.frame = 0;
	__atomic_signal_fence(__ATOMIC_SEQ_CST);
	sp_hook_depth = 0;
}

/*
 * One recorded call: the clock around the real call and, when it failed, the
 * errno it left (what the record says: io_result).
 *
 * RATIONALE: errno is read only when the call failed, and never written back.
 * What a wrapper does between the real call and its return leaves errno as it
 * finds it: the fd table, path and record helpers make no call that sets it,
 * and every slow path that makes syscalls saves and restores it (recorder.c's
 * file creation, thread attach, chunk refill and summaries, tracefile.c's raw
 * syscalls, intern's growth, io_fd_lookup, io_fd_proc_path, io_left_by_a_jump),
 * as the CUDA wrappers and stepprof_mark rely on too
 * (io::every_wrapped_entry_point_records_once compares errno after every
 * wrapped call with a plain run's, the call that creates the trace file and a
 * failed creation included). The program thus gets errno as the real call
 * left it, and a call that succeeded does not locate errno at all. Before,
 * every call located it (__errno_location through the PLT), kept the pointer
 * across the record and stored errno back: ~5 instructions a call (callgrind,
 * small-file loop: 1,048 -> 1,028 added per file).
 */
struct io_call {
	uint64_t t0, t1;
	int err; /* errno after a failed call (r < 0), else 0 */
};

/* 1 = record this call (entered, start time taken), 0 = just forward. */
static inline __attribute__((always_inline)) int io_begin(struct io_call *c)
{
	if (!io_enter())
		return 0;
	c->t0 = sp_now();
	return 1;
}

static inline __attribute__((always_inline)) int io_begin_wait(struct io_call *c)
{
	if (!io_enter_wait())
		return 0;
	c->t0 = sp_now();
	return 1;
}

/*
 * Right after the real call, given its result r (< 0: it failed): its errno
 * when it failed, then the end time. A call whose record needs errno whatever
 * it returned (readdir's NULL: the end, or an error) passes -1.
 */
static inline void io_end(struct io_call *c, long r)
{
	c->err = __builtin_expect(r < 0, 0) ? errno : 0;
	c->t1 = sp_now();
}

/* After the record: leave (errno is as the real call left it: see struct io_call). */
static inline void io_finish(const struct io_call *c)
{
	(void)c;
	io_leave();
}

/*
 * The fd behind a stream, -1 for none: fileno()'s own test (glibc's
 * _IO_IS_FILEBUF, 0x2000, in _flags) without its errno. An open_memstream
 * stream has _fileno 0 and no file: read as it was, its fread was recorded
 * on fd 0 and its fclose forgot what fd 0 (stdin) is.
 */
#define IO_FILE_IS_FILEBUF 0x2000
static inline int io_file_fd(const FILE *fp)
{
	return fp && (fp->_flags & IO_FILE_IS_FILEBUF) ? fp->_fileno : -1;
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

/*
 * RATIONALE: always inlined, and every caller names its kind by a constant
 * (io_rec_read picks one of two constant calls): sp_emit then folds to
 * recorder.h's sp_emit_k, the record encoded in line with the field stores
 * below turned into registers. Measured (callgrind, small-file loop): ~105
 * instructions per record through sp_emit_slow's switch, ~35 inline.
 */
/* The largest figure the bytes field holds: its width from fields.def. */
enum {
	IO_BYTES_WIDTH =
#define SP_FIELD(id, num, name, width, type) (SP_F_##id == SP_F_BYTES ? (width) : 0) +
#include "stepprof/fields.def"
#undef SP_FIELD
	0
};
#define IO_BYTES_MAX ((1ull << (8 * IO_BYTES_WIDTH)) - 1)

static inline __attribute__((always_inline)) void io_emit(unsigned kind, unsigned api, uint64_t t0, uint64_t t1,
							  uint32_t path, uint64_t bytes, int fd, int result,
							  unsigned fdtype, uint32_t count)
{
	/* NOTE: not zeroed (192 bytes per call): these seven fields are a superset of
	 * every input kind's mask (kinds.def, io_real.c checks), and the codec reads
	 * only the mask. */
	uint64_t f[SP_F__COUNT];
	if (__builtin_expect(!io_feature_marked, 0))
		io_mark_feature();
	/* Only the kind's own fields (a constant mask). The array's address goes
	 * nowhere (sp_emit_k hands its rare path a copy): the stores fold into the
	 * encoding, in registers. */
	const uint64_t m = sp_kind_mask[kind];
	if (m & (1ull << SP_F_PATH))
		f[SP_F_PATH] = path;
	/* A field holds 5 bytes (< 1 TiB): a larger figure (the st_size of a file of
	 * 1 TiB or more) is saturated, not cut to its low bytes (a 1.1 TB file was 488 MB). */
	if (m & (1ull << SP_F_BYTES))
		f[SP_F_BYTES] = bytes < IO_BYTES_MAX ? bytes : IO_BYTES_MAX;
	if (m & (1ull << SP_F_FD))
		f[SP_F_FD] = (uint64_t)(int64_t)fd;
	if (m & (1ull << SP_F_RESULT))
		f[SP_F_RESULT] = (uint64_t)(int64_t)result;
	if (m & (1ull << SP_F_FD_TYPE))
		f[SP_F_FD_TYPE] = fdtype;
	if (m & (1ull << SP_F_SOURCE))
		f[SP_F_SOURCE] = SP_SOURCE_LIBC;
	if (m & (1ull << SP_F_COUNT))
		f[SP_F_COUNT] = count;
	sp_emit(kind, api, t0, t1, f);
}

/*
 * Intern a path given to open/stat; 0 for NULL or "". A one-entry per-thread
 * cache, the last path interned and its id, skips the intern table for the
 * most common repeat, a stat then an open of the same file: the path is
 * compared in full with the cached copy (never trusted by its pointer: the
 * program's buffer may hold a new string). io_path_forget() empties it (fork:
 * the child's trace file has ids of its own).
 *
 * RATIONALE: the hit is inline (a strlen and a memcmp, no call of ours);
 * io_path_intern, out of line, interns a new path and keeps it. The cache is
 * only touched with sp_hook_depth raised, so a signal handler's open cannot
 * see it half-written: its calls are not recorded.
 */
#define IO_PATH_CACHE 240

struct io_path_cache {
	uint32_t id, len; /* len 0: empty */
	char s[IO_PATH_CACHE];
};
SP_HIDDEN extern __thread struct io_path_cache io_last_path __attribute__((tls_model("initial-exec")));

SP_HIDDEN uint32_t io_path_intern(const char *path, size_t len);
SP_HIDDEN void io_path_forget(void);

/*
 * A path argument as it may be read after the call: NULL when the kernel said
 * EFAULT (the pointer is not readable: reading it would crash a program that
 * got an error without us). Laundered through an empty asm: glibc declares most
 * path arguments nonnull, and GCC would otherwise drop our NULL tests, while
 * fstatat(fd, NULL, st, AT_EMPTY_PATH) is valid (Linux >= 6.11) and a NULL
 * elsewhere is an EFAULT the program must get back, not a crash.
 */
static inline const char *io_path_after(const char *path, long r, int err)
{
	__asm__("" : "+r"(path));
	return r < 0 && err == EFAULT ? NULL : path;
}

/*
 * RATIONALE: strnlen to PATH_MAX: the kernel reads a path up to its NUL or
 * PATH_MAX bytes (ENAMETOOLONG), so that much is readable; a longer buffer with
 * no NUL may end in an unmapped page.
 */
static inline uint32_t io_path_id(const char *path)
{
	__asm__("" : "+r"(path));
	if (!path || !path[0])
		return 0;
	struct io_path_cache *c = &io_last_path;
	size_t len = strnlen(path, PATH_MAX);
	/* The last byte first: paths met one after the other (f001, f002...) mostly differ there. */
	if (len == c->len && path[len - 1] == c->s[len - 1] && memcmp(path, c->s, len) == 0)
		return c->id;
	return io_path_intern(path, len);
}

/*
 * The record helpers: io_rec_<what>(c, ...) writes the record of a call that
 * io_end() ended and finishes it (io_finish); io_end_<what>(c, ...) is io_end
 * + io_rec_<what>, called with the real call's result, which it returns.
 *
 * RATIONALE: always inlined (IO_INLINE): each wrapper is then one function,
 * the struct io_call in registers, with one prologue; GCC otherwise keeps
 * io_rec_<what> out of line (a call, six pushes and a stack frame per record).
 */
#define IO_INLINE static inline __attribute__((always_inline))

/*
 * A read-like call on fd returned r bytes (or -1): READ on a file, LOADER_WAIT
 * on a pipe or a socket (the trainer receiving a batch; then a CPU_TIME sample
 * at most once a millisecond per thread: sp_cpu_handoff), nothing on an fd
 * whose reads are not input (IO_W_NOT_INPUT: an eventfd, a timerfd, a tty).
 */
IO_INLINE void io_rec_read(struct io_call *c, unsigned api, int fd, long r)
{
	uint64_t w = io_fd_word_typed(fd);
	if (__builtin_expect(w & (IO_W_NOT_INPUT | IO_W_OUTPUT), 0)) {
		io_finish(c); /* an eventfd, timerfd, signalfd, character device or output file: not input */
		return;
	}
	unsigned type = io_word_type(w);
	uint64_t bytes = r > 0 ? (uint64_t)r : 0;
	int res = io_result(r, c->err);
	/* Two calls, each with a constant kind, so that each folds (io_emit). */
	if (__builtin_expect(io_type_is_wait(type), 0)) {
		io_emit(SP_K_LOADER_WAIT, api, c->t0, c->t1, io_word_path(w), bytes, fd, res, type, 0);
		sp_cpu_handoff(c->t1);
	} else
		io_emit(SP_K_READ, api, c->t0, c->t1, io_word_path(w), bytes, fd, res, type, 0);
	io_finish(c);
}

IO_INLINE long io_end_read(struct io_call *c, unsigned api, int fd, long r)
{
	io_end(c, r);
	io_rec_read(c, api, fd, r);
	return r;
}

/*
 * An open-like call of path with flags returned fd r (or -1): OPEN; the fd
 * table learns the fd. An output file (io_open_is_output) is no record.
 */
IO_INLINE void io_rec_open(struct io_call *c, unsigned api, const char *path, int flags, int r)
{
	path = io_path_after(path, r, c->err);
	if (__builtin_expect(io_open_is_output(flags), 0)) {
		if (r >= 0) {
			int known;
			unsigned type = io_guess_type(path, flags, &known);
			io_fd_put(r, io_word_make(0, type, known) | IO_W_OUTPUT);
		}
		io_finish(c); /* output: no record */
		return;
	}
	uint32_t id = io_path_id(path);
	if (r >= 0) {
		int known;
		unsigned type = io_guess_type(path, flags, &known);
		io_fd_set(r, id, type, known);
	}
	io_emit(SP_K_OPEN, api, c->t0, c->t1, id, 0, r >= 0 ? r : -1, io_result(r, c->err), 0, 0);
	io_finish(c);
}

IO_INLINE int io_end_open(struct io_call *c, unsigned api, const char *path, int flags, int r)
{
	io_end(c, r);
	io_rec_open(c, api, path, flags, r);
	return r;
}

/*
 * A stat-like call returned r, with size = st_size on success: STAT. Every
 * variant is described as fstatat describes it: (AT_FDCWD, path, 0) for a
 * path, (fd, "", AT_EMPTY_PATH) for an fd, whose path comes from the fd table.
 */
IO_INLINE void io_rec_stat(struct io_call *c, unsigned api, int dirfd, const char *path, int flags, int r,
			       uint64_t size)
{
	int fd = -1;
	uint32_t id;
	path = io_path_after(path, r, c->err);
	/* AT_EMPTY_PATH with "" or, since Linux 6.11, NULL (a successful call): the fd itself */
	if ((flags & AT_EMPTY_PATH) && (path ? !path[0] : r == 0)) {
		fd = dirfd;
		/* An fd not seen born (received over a socket, inherited) is looked up
		 * at its first use, this stat as well as a read (once per fd). */
		uint64_t w = r == 0 ? io_fd_word_typed(dirfd) : io_fd_word(dirfd);
		if (__builtin_expect(w & IO_W_OUTPUT, 0)) {
			io_finish(c); /* an output file's fstat (Python's open(p, 'wb') makes one) */
			return;
		}
		id = io_word_path(w);
	} else {
		id = io_path_id(path);
	}
	io_emit(SP_K_STAT, api, c->t0, c->t1, id, r == 0 ? size : 0, fd, io_result(r, c->err), 0, 0);
	io_finish(c);
}

/* st_size: &st->st_size of the caller's struct (NULL when st is), read only on success. */
IO_INLINE int io_end_stat(struct io_call *c, unsigned api, int dirfd, const char *path, int flags, int r,
			      const off_t *st_size)
{
	io_end(c, r);
	io_rec_stat(c, api, dirfd, path, flags, r, r == 0 && st_size ? (uint64_t)*st_size : 0);
	return r;
}

#endif /* STEPPROF_IO_HOOK_H */
