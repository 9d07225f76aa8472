/*
 * io_fdtab.h - the per-process fd -> (path, type) table of the input capture.
 *
 * The libc wrappers fill it when a descriptor is born (open, fopen, opendir,
 * pipe, socket, accept, dup...) and clear it when it dies (close, fclose,
 * closedir, dup2 onto it), so that a read, fstat or close can say which file
 * it touched and whether the fd is a file, a pipe or a socket without a
 * syscall. A descriptor the wrappers did not see being born (inherited across
 * exec, made by eventfd/memfd/...) gets its type from one fstat at first use,
 * then cached: the slow path, once per fd.
 *
 * A fork()ed child keeps the table (its fds are the parent's), but the path ids
 * in it are the parent's trace file's: io_fd_after_fork() turns every entry
 * with a path back into "unknown", and the first use of such an fd in the
 * child asks the kernel (fstat, and readlink of /proc/self/fd/N for a file or
 * a directory: the slow path, once per fd), as for an fd inherited across exec.
 *
 * Lock-free and fixed size: one 64-bit word per fd below IO_FD_MAX, read and
 * written with relaxed atomics (a torn view is impossible, a stale one only
 * after a racy close/reuse that the program itself would have to get wrong).
 * Higher fds are not tracked: type "other", no path. The table (2 MiB) is
 * mapped at its first use while the process records (lazymap.h): a process
 * that records nothing never maps it; one whose mapping fails tracks no fd
 * (one warning). fork() copies it with the fds it describes.
 *
 * Divided into: 1. the word layout, 2. lookups and updates (inline, hot path),
 * 3. the slow path and helpers (io_fdtab.c), 4. directory-listing state.
 */
#ifndef STEPPROF_IO_FDTAB_H
#define STEPPROF_IO_FDTAB_H

#include <fcntl.h>
#include <stdint.h>
#include <sys/stat.h>
#include <sys/types.h>

#include "recorder.h"

#define IO_FD_MAX 65536

/* ------------------------------------------------------------ 1. layout */

#define IO_W_PATH_MASK 0xffffffull /* interned path id (trace path fields are 3 bytes) */
#define IO_W_TYPE_SHIFT 24         /* enum sp_fdtype, 4 bits */
#define IO_W_KNOWN (1ull << 28)    /* the type is known (else: fstat at first use) */
#define IO_W_WAIT_SHIFT 29         /* epoll fds: sp_fdtype of the first pipe/socket added, 3 bits */
#define IO_W_NOT_INPUT (1ull << 32) /* an eventfd, timerfd, signalfd, epoll fd or character device */
#define IO_W_OUTPUT (1ull << 33)    /* opened for writing only, or truncated: io_open_is_output */

struct io_fd {
	uint64_t word;
	/* directory listing in progress on this fd (section 4) */
	uint64_t dir_begin;   /* 0 = none pending */
	uint64_t dir_end;
	uint64_t dir_bytes;
};

/* NULL until io_fdtab_map: set once, never unmapped */
SP_HIDDEN extern struct io_fd *io_fdtab;

/* Maps the table if the process records: 1 when it is there (the slow path, once). */
SP_HIDDEN int io_fdtab_map(void);

/* The highest fd ever given an entry (bounds io_fd_after_fork's scan). */
SP_HIDDEN extern int io_fd_hwm;

static inline void io_fd_note_hwm(int fd)
{
	int h = __atomic_load_n(&io_fd_hwm, __ATOMIC_RELAXED);
	while (__builtin_expect(fd > h, 0) &&
	       !__atomic_compare_exchange_n(&io_fd_hwm, &h, fd, 1, __ATOMIC_RELAXED, __ATOMIC_RELAXED))
		;
}

/* ------------------------------------------------- 2. lookups and updates */

static inline int io_fd_tracked(int fd)
{
	return fd >= 0 && fd < IO_FD_MAX &&
	       (__builtin_expect(__atomic_load_n(&io_fdtab, __ATOMIC_ACQUIRE) != NULL, 1) || io_fdtab_map());
}

static inline uint64_t io_fd_word(int fd)
{
	return io_fd_tracked(fd) ? __atomic_load_n(&io_fdtab[fd].word, __ATOMIC_RELAXED) : 0;
}

static inline uint32_t io_word_path(uint64_t w)
{
	return (uint32_t)(w & IO_W_PATH_MASK);
}

static inline unsigned io_word_type(uint64_t w)
{
	return (unsigned)((w >> IO_W_TYPE_SHIFT) & 0xf);
}

static inline unsigned io_word_wait_type(uint64_t w)
{
	return (unsigned)((w >> IO_W_WAIT_SHIFT) & 0x7);
}

static inline uint64_t io_word_make(uint32_t path, unsigned type, int known)
{
	return (path & IO_W_PATH_MASK) | ((uint64_t)(type & 0xf) << IO_W_TYPE_SHIFT) | (known ? IO_W_KNOWN : 0);
}

/* A new descriptor's word (its listing state reset). */
static inline void io_fd_put(int fd, uint64_t w)
{
	if (!io_fd_tracked(fd))
		return;
	io_fd_note_hwm(fd);
	__atomic_store_n(&io_fdtab[fd].dir_begin, 0, __ATOMIC_RELAXED);
	__atomic_store_n(&io_fdtab[fd].word, w, __ATOMIC_RELAXED);
}

/* A new descriptor: path id (0 = none) and type; known = 0 defers the type to first use. */
static inline void io_fd_set(int fd, uint32_t path, unsigned type, int known)
{
	io_fd_put(fd, io_word_make(path, type, known));
}

/*
 * A new descriptor whose reads are not input (type other): an eventfd, a
 * timerfd, a signalfd, an epoll fd. A read of one is a thread waiting for a
 * counter, a timer or a signal, not for file data: io_rec_read writes no record.
 */
static inline void io_fd_set_not_input(int fd)
{
	io_fd_put(fd, io_word_make(0, SP_FDTYPE_OTHER, 1) | IO_W_NOT_INPUT);
}

/*
 * The descriptor is going away; returns what was known about it. A load and a
 * store, not an exchange: until close returns no other thread can be handed
 * this number, so nobody else writes the entry meanwhile.
 */
static inline uint64_t io_fd_clear(int fd)
{
	if (!io_fd_tracked(fd))
		return 0;
	uint64_t w = __atomic_load_n(&io_fdtab[fd].word, __ATOMIC_RELAXED);
	if (w)
		__atomic_store_n(&io_fdtab[fd].word, 0, __ATOMIC_RELAXED);
	return w;
}

/*
 * dup/dup2/dup3: newfd describes what oldfd describes, an epoll fd's wait type
 * included (the copy is the same epoll instance: its waits on the pipes
 * added through the original are loader waits too).
 */
static inline void io_fd_copy(int oldfd, int newfd)
{
	if (!io_fd_tracked(newfd))
		return;
	io_fd_note_hwm(newfd);
	__atomic_store_n(&io_fdtab[newfd].word, io_fd_word(oldfd), __ATOMIC_RELAXED);
}

/* epoll_ctl(ADD) of a pipe or socket: the epoll fd now waits for loader data. */
static inline void io_fd_set_wait_type(int epfd, unsigned type)
{
	if (!io_fd_tracked(epfd) || io_word_wait_type(io_fd_word(epfd)))
		return;
	__atomic_fetch_or(&io_fdtab[epfd].word, (uint64_t)(type & 7) << IO_W_WAIT_SHIFT, __ATOMIC_RELAXED);
}

/*
 * An fstat of fd succeeded with this st_mode: a type the table had guessed
 * otherwise is corrected, path kept. open() guesses `file` without a syscall,
 * so a FIFO opened by its path, or a directory opened without O_DIRECTORY,
 * was a `file` for its whole life; Python's open() fstats every fd it opens,
 * so its FIFOs are now pipes (their reads loader waits). An entry whose type
 * is still unknown is left to io_fd_resolve (which also finds its path). The
 * exchange keeps an entry another thread renewed meanwhile (a close and an
 * open of the same number).
 */
static inline void io_fd_learn_mode(int fd, unsigned mode)
{
	if (!io_fd_tracked(fd))
		return;
	uint64_t w = __atomic_load_n(&io_fdtab[fd].word, __ATOMIC_RELAXED);
	unsigned t;
	switch (mode & S_IFMT) {
	case S_IFREG:
		t = SP_FDTYPE_FILE;
		break;
	case S_IFIFO:
		t = SP_FDTYPE_PIPE;
		break;
	case S_IFDIR:
		t = SP_FDTYPE_DIR;
		break;
	default:
		return; /* sockets, devices, anonymous inodes: set where they are born, or resolved */
	}
	if (!(w & IO_W_KNOWN) || io_word_type(w) == t)
		return;
	uint64_t n = (w & ~(0xfull << IO_W_TYPE_SHIFT)) | ((uint64_t)t << IO_W_TYPE_SHIFT);
	__atomic_compare_exchange_n(&io_fdtab[fd].word, &w, n, 0, __ATOMIC_RELAXED, __ATOMIC_RELAXED);
}

/*
 * An open with these flags makes an output file, not input: write-only
 * (Python's open(p, 'wb'), creat, fopen "w"/"a": torch.save, np.save, a log),
 * or truncated (fopen "w+": what it holds is what the program writes). Its
 * open, its fstat by fd, its reads and its close write no record: a step that
 * saved 300 small files was a critical small_file_storm, 86% "input".
 */
static inline int io_open_is_output(int flags)
{
	return (flags & O_ACCMODE) == O_WRONLY || (flags & O_TRUNC);
}

/* ------------------------------------------------- 3. slow path, helpers */

/* Type from an st_mode (S_IFREG -> file, S_IFIFO -> pipe, ...). */
SP_HIDDEN unsigned io_type_from_mode(mode_t mode);

/*
 * fstat the fd once (raw syscall, never recorded), cache and return its word;
 * a file or directory with no path also gets the one /proc/self/fd/N names.
 */
SP_HIDDEN uint64_t io_fd_resolve(int fd);

/* The same word for fd, known w so far, without storing it (close: the entry is already gone). */
SP_HIDDEN uint64_t io_fd_lookup(int fd, uint64_t w);

/* In a fork()ed child: the parent's path ids mean nothing here (see the top). */
SP_HIDDEN void io_fd_after_fork(void);

/* The fd's word with a known type: the cached one, or io_fd_resolve's. */
static inline uint64_t io_fd_word_typed(int fd)
{
	uint64_t w = io_fd_word(fd);
	if (__builtin_expect(!(w & IO_W_KNOWN), 0) && io_fd_tracked(fd))
		w = io_fd_resolve(fd);
	return w;
}

static inline unsigned io_fd_type(int fd)
{
	return io_fd_tracked(fd) ? io_word_type(io_fd_word_typed(fd)) : SP_FDTYPE_OTHER;
}

static inline int io_type_is_wait(unsigned type)
{
	return type == SP_FDTYPE_PIPE || type == SP_FDTYPE_SOCKET;
}

/* /dev/, /proc/ or /sys/: compared by hand, this runs at every open. */
static inline int io_special_tree(const char *p)
{
	if (p[0] != '/')
		return 0;
	if (p[1] == 'd')
		return p[2] == 'e' && p[3] == 'v' && p[4] == '/';
	if (p[1] == 'p')
		return p[2] == 'r' && p[3] == 'o' && p[4] == 'c' && p[5] == '/';
	if (p[1] == 's')
		return p[2] == 'y' && p[3] == 's' && p[4] == '/';
	return 0;
}

/*
 * The type a path opened with `flags` most likely has, without a syscall:
 * O_DIRECTORY -> dir; anything under /dev, /proc or /sys -> unknown (fstat at
 * first read: FIFOs, ttys, devices); everything else -> a regular file. Returns
 * the type and sets *known.
 * NOTE: inline (it was a call, ~17 instructions per open): a typical path is
 * told apart from the special trees by its second byte.
 */
static inline unsigned io_guess_type(const char *path, int flags, int *known)
{
	*known = 1;
	if (flags & O_DIRECTORY)
		return SP_FDTYPE_DIR;
	/* RATIONALE: a stat per open would cost ~10% of a small-file loop; the
	 * only non-regular files opened by path in practice live in these trees. */
	if (path && io_special_tree(path)) {
		*known = 0;
		return SP_FDTYPE_OTHER;
	}
	return SP_FDTYPE_FILE;
}

/* ------------------------------------------------- 4. directory listing */

/*
 * A directory is read in many readdir calls; it is recorded as one LISTDIR:
 * begin = opendir (or first readdir), end = the last readdir, count = bytes of
 * the entries returned (sum of d_reclen, as the getdents64 syscall counts them).
 * The record is written at the end of the directory, or at closedir if the
 * program stopped early.
 */
static inline void io_dir_start(int fd, uint64_t t0)
{
	if (!io_fd_tracked(fd))
		return;
	io_fdtab[fd].dir_bytes = 0;
	io_fdtab[fd].dir_end = t0;
	__atomic_store_n(&io_fdtab[fd].dir_begin, t0 ? t0 : 1, __ATOMIC_RELAXED);
}

#endif /* STEPPROF_IO_FDTAB_H */
