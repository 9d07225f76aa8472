/*
 * hook_io_read.c - libc wrappers of the read family and of directory listing.
 *
 * A read on a regular file (or anything but a pipe or socket) is a READ record;
 * a read on a pipe or a socket is the trainer waiting for data from a loader
 * worker: a LOADER_WAIT record (io_rec_read decides from the fd table).
 * bytes = what the call returned. A directory read in many readdir calls is one
 * LISTDIR record (io_fdtab.h, section 4).
 *
 * Divided into: 1. read, pread, readv, preadv (+ fortify _chk), sendfile,
 * copy_file_range, 3. directory listing, 4. scandir (stdio's fread, 2., is in
 * hook_io_stdio.c with the other stdio reads).
 */
#include "io_hook.h"

#include <dirent.h>
#include <ftw.h>
#include <sys/sendfile.h>
#include <sys/uio.h>
#include <unistd.h>

/* The wrappers below are the exported names (the version script lists them). */
#pragma GCC visibility push(default)

/* --------------------------------------------- 1. read, pread, readv, preadv */

ssize_t read(int fd, void *buf, size_t n)
{
	ssize_t (*real)(int, void *, size_t) = IO_REAL(read);
	struct io_call c;
	if (!io_begin(&c))
		return real(fd, buf, n);
	return io_end_read(&c, SP_API_read, fd, real(fd, buf, n));
}

ssize_t __read_chk(int fd, void *buf, size_t n, size_t buflen);
ssize_t __pread_chk(int fd, void *buf, size_t n, off_t off, size_t buflen);
ssize_t __pread64_chk(int fd, void *buf, size_t n, off64_t off, size_t buflen);

ssize_t __read_chk(int fd, void *buf, size_t n, size_t buflen)
{
	ssize_t (*real)(int, void *, size_t, size_t) = IO_REAL(__read_chk);
	struct io_call c;
	if (!io_begin(&c))
		return real(fd, buf, n, buflen);
	return io_end_read(&c, SP_API___read_chk, fd, real(fd, buf, n, buflen));
}

ssize_t readv(int fd, const struct iovec *iov, int iovcnt)
{
	ssize_t (*real)(int, const struct iovec *, int) = IO_REAL(readv);
	struct io_call c;
	if (!io_begin(&c))
		return real(fd, iov, iovcnt);
	return io_end_read(&c, SP_API_readv, fd, real(fd, iov, iovcnt));
}

/*
 * RATIONALE: function-defining macros (not statement macros): each pair below
 * differs only in its name and the offset's type.
 */
#define PREAD(NAME, OFF_T)                                                                                             \
	ssize_t NAME(int fd, void *buf, size_t n, OFF_T off)                                                           \
	{                                                                                                              \
		ssize_t (*real)(int, void *, size_t, OFF_T) = IO_REAL(NAME);                                           \
		struct io_call c;                                                                                      \
		if (!io_begin(&c))                                                                                     \
			return real(fd, buf, n, off);                                                                  \
		return io_end_read(&c, SP_API_##NAME, fd, real(fd, buf, n, off));                                      \
	}

PREAD(pread, off_t)
PREAD(pread64, off64_t)

#define PREAD_CHK(NAME, OFF_T)                                                                                         \
	ssize_t NAME(int fd, void *buf, size_t n, OFF_T off, size_t buflen)                                            \
	{                                                                                                              \
		ssize_t (*real)(int, void *, size_t, OFF_T, size_t) = IO_REAL(NAME);                                   \
		struct io_call c;                                                                                      \
		if (!io_begin(&c))                                                                                     \
			return real(fd, buf, n, off, buflen);                                                          \
		return io_end_read(&c, SP_API_##NAME, fd, real(fd, buf, n, off, buflen));                              \
	}

PREAD_CHK(__pread_chk, off_t)
PREAD_CHK(__pread64_chk, off64_t)

#define PREADV(NAME, OFF_T)                                                                                            \
	ssize_t NAME(int fd, const struct iovec *iov, int iovcnt, OFF_T off)                                           \
	{                                                                                                              \
		ssize_t (*real)(int, const struct iovec *, int, OFF_T) = IO_REAL(NAME);                                \
		struct io_call c;                                                                                      \
		if (!io_begin(&c))                                                                                     \
			return real(fd, iov, iovcnt, off);                                                             \
		return io_end_read(&c, SP_API_##NAME, fd, real(fd, iov, iovcnt, off));                                 \
	}

PREADV(preadv, off_t)
PREADV(preadv64, off64_t)

#define PREADV2(NAME, OFF_T)                                                                                           \
	ssize_t NAME(int fd, const struct iovec *iov, int iovcnt, OFF_T off, int flags)                                \
	{                                                                                                              \
		ssize_t (*real)(int, const struct iovec *, int, OFF_T, int) = IO_REAL(NAME);                           \
		struct io_call c;                                                                                      \
		if (!io_begin(&c))                                                                                     \
			return real(fd, iov, iovcnt, off, flags);                                                      \
		return io_end_read(&c, SP_API_##NAME, fd, real(fd, iov, iovcnt, off, flags));                          \
	}

PREADV2(preadv2, off_t)
PREADV2(preadv64v2, off64_t)

/*
 * sendfile, copy_file_range: the kernel reads the source for the program
 * (Python's shutil.copyfile, os.sendfile, os.copy_file_range; cp). A READ of
 * in_fd, bytes = what the call copied; the destination is output, not recorded.
 * RATIONALE: io_begin_wait, not io_begin: like the waits, these stay on with
 * STEPPROF_IO=bpf, because the eBPF collector does not trace them (docs/bpf.md).
 */
#define SENDFILE(NAME, OFF_T)                                                                                          \
	ssize_t NAME(int out, int in, OFF_T *off, size_t n)                                                            \
	{                                                                                                              \
		ssize_t (*real)(int, int, OFF_T *, size_t) = IO_REAL(NAME);                                            \
		struct io_call c;                                                                                      \
		if (!io_begin_wait(&c))                                                                                \
			return real(out, in, off, n);                                                                  \
		return io_end_read(&c, SP_API_##NAME, in, real(out, in, off, n));                                      \
	}

SENDFILE(sendfile, off_t)
SENDFILE(sendfile64, off64_t)

ssize_t copy_file_range(int in, off64_t *in_off, int out, off64_t *out_off, size_t n, unsigned int flags)
{
	ssize_t (*real)(int, off64_t *, int, off64_t *, size_t, unsigned int) = IO_REAL(copy_file_range);
	struct io_call c;
	if (!io_begin_wait(&c))
		return real(in, in_off, out, out_off, n, flags);
	return io_end_read(&c, SP_API_copy_file_range, in, real(in, in_off, out, out_off, n, flags));
}

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
	struct io_call c;
	if (!io_begin(&c))
		return real(path);
	DIR *d = real(path);
	io_end(&c, d ? 0 : -1);
	if (d) {
		int fd = dirfd(d);
		io_fd_set(fd, io_path_id(path), SP_FDTYPE_DIR, 1);
		io_dir_start(fd, c.t0);
	} else {
		io_emit(SP_K_LISTDIR, SP_API_opendir, c.t0, c.t1, io_path_id(io_path_after(path, -1, c.err)), 0, -1,
			io_result(-1, c.err), 0, 0);
	}
	io_finish(&c);
	return d;
}

DIR *fdopendir(int fd)
{
	DIR *(*real)(int) = IO_REAL(fdopendir);
	struct io_call c;
	if (!io_begin(&c))
		return real(fd);
	DIR *d = real(fd);
	io_end(&c, d ? 0 : -1);
	if (d && io_fd_tracked(fd)) {
		io_fd_set(fd, io_word_path(io_fd_word(fd)), SP_FDTYPE_DIR, 1);
		io_dir_start(fd, c.t0);
	}
	io_finish(&c);
	return d;
}

/*
 * A readdir call on fd returned an entry of reclen bytes (got) or NULL (the
 * end, or an error when errno changed from e0): the listing goes on, or its
 * LISTDIR record is written.
 */
static void readdir_rec(struct io_call *c, unsigned api, int fd, int e0, int got, unsigned reclen)
{
	if (io_fd_tracked(fd)) {
		struct io_fd *s = &io_fdtab[fd];
		if (!__atomic_load_n(&s->dir_begin, __ATOMIC_RELAXED))
			io_dir_start(fd, c->t0);
		if (got) {
			s->dir_bytes += reclen;
			s->dir_end = c->t1;
		} else {
			uint64_t b = __atomic_exchange_n(&s->dir_begin, 0, __ATOMIC_RELAXED);
			emit_listdir(api, fd, b, c->t1, s->dir_bytes, c->err != e0 ? io_result(-1, c->err) : 0);
		}
	}
	io_finish(c);
}

struct dirent *readdir(DIR *dirp)
{
	struct dirent *(*real)(DIR *) = IO_REAL(readdir);
	struct io_call c;
	if (io_null(dirp) || !io_begin(&c))
		return real(dirp);
	int fd = dirfd(dirp), e0 = errno;
	struct dirent *d = real(dirp);
	io_end(&c, -1); /* errno whatever the result: a NULL is the end or an error (readdir_rec) */
	readdir_rec(&c, SP_API_readdir, fd, e0, d != NULL, d ? d->d_reclen : 0);
	return d;
}

struct dirent64 *readdir64(DIR *dirp)
{
	struct dirent64 *(*real)(DIR *) = IO_REAL(readdir64);
	struct io_call c;
	if (io_null(dirp) || !io_begin(&c))
		return real(dirp);
	int fd = dirfd(dirp), e0 = errno;
	struct dirent64 *d = real(dirp);
	io_end(&c, -1);
	readdir_rec(&c, SP_API_readdir64, fd, e0, d != NULL, d ? d->d_reclen : 0);
	return d;
}

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
	struct io_call c;
	if (!io_begin(&c))
		return real(fd, buf, n);
	ssize_t r = real(fd, buf, n);
	io_end(&c, r);
	emit_listdir(SP_API_getdents64, fd, c.t0, c.t1, r > 0 ? (uint64_t)r : 0, io_result(r, c.err));
	io_finish(&c);
	return r;
}

/* --------------------------------------------------------------- 4. scandir */

/*
 * scandir reads its directory with glibc's internal opendir/readdir/closedir,
 * which no wrapper sees: one LISTDIR per call, from its start to its return,
 * path = the directory as given (relative to dirfd for scandirat), fd -1,
 * count = the bytes of every entry read (d_reclen, as readdir counts them),
 * those the program's filter rejects included.
 *
 * The entries are counted by a filter of ours that stands in front of the
 * program's (or of none). RATIONALE: the call is not entered (sp_hook_depth
 * stays as it is) while glibc lists: the program's filter and comparison
 * functions run inside it, and what they do (a stat of each entry) is the
 * program's input, recorded as such. glibc makes no wrapped call of its own in
 * scandir, so nothing is counted twice. Each call's state is on its stack and
 * the thread's top of the list points at it: a scandir in a filter, or in a
 * signal handler, stacks its own and gives the previous one back on return.
 */
struct scan_state {
	int (*filter)(const struct dirent64 *);
	uint64_t bytes;
	struct scan_state *prev;
};

static __thread struct scan_state *scan_top __attribute__((tls_model("initial-exec")));

/* NOTE: struct dirent and dirent64 are the same on LP64 (x86_64, aarch64): one filter serves both. */
_Static_assert(sizeof(struct dirent) == sizeof(struct dirent64), "dirent and dirent64 differ");

static int scan_filter(const struct dirent64 *d)
{
	struct scan_state *s = scan_top;
	s->bytes += d->d_reclen;
	return s->filter ? s->filter(d) : 1;
}

/* 1 = record this scandir (started: its state pushed, t0 taken), 0 = forward it as it is. */
static inline int scan_begin(struct scan_state *s, struct io_call *c, void *filter)
{
	if (!io_enter())
		return 0;
	io_leave();
	s->filter = (int (*)(const struct dirent64 *))filter;
	s->bytes = 0;
	s->prev = scan_top;
	scan_top = s;
	c->t0 = sp_now();
	return 1;
}

static int scan_end(struct scan_state *s, struct io_call *c, unsigned api, const char *path, int r)
{
	scan_top = s->prev;
	if (!io_enter())
		return r; /* capture turned off meanwhile */
	io_end(c, r);
	io_emit(SP_K_LISTDIR, api, c->t0, c->t1, io_path_id(io_path_after(path, r, c->err)), 0, -1,
		io_result(r, c->err), 0, s->bytes > 0xffffffffu ? 0xffffffffu : (uint32_t)s->bytes);
	io_finish(c);
	return r;
}

typedef int (*scan_cmp_t)(const struct dirent **, const struct dirent **);
typedef int (*scan_cmp64_t)(const struct dirent64 **, const struct dirent64 **);

int scandir(const char *dir, struct dirent ***list, int (*filter)(const struct dirent *), scan_cmp_t cmp)
{
	int (*real)(const char *, struct dirent ***, int (*)(const struct dirent *), scan_cmp_t) = IO_REAL(scandir);
	struct scan_state s;
	struct io_call c;
	if (!scan_begin(&s, &c, (void *)filter))
		return real(dir, list, filter, cmp);
	return scan_end(&s, &c, SP_API_scandir, dir, real(dir, list, (int (*)(const struct dirent *))scan_filter, cmp));
}

int scandir64(const char *dir, struct dirent64 ***list, int (*filter)(const struct dirent64 *), scan_cmp64_t cmp)
{
	int (*real)(const char *, struct dirent64 ***, int (*)(const struct dirent64 *), scan_cmp64_t) =
	    IO_REAL(scandir64);
	struct scan_state s;
	struct io_call c;
	if (!scan_begin(&s, &c, (void *)filter))
		return real(dir, list, filter, cmp);
	return scan_end(&s, &c, SP_API_scandir64, dir, real(dir, list, scan_filter, cmp));
}

int scandirat(int dfd, const char *dir, struct dirent ***list, int (*filter)(const struct dirent *), scan_cmp_t cmp)
{
	int (*real)(int, const char *, struct dirent ***, int (*)(const struct dirent *), scan_cmp_t) =
	    IO_REAL(scandirat);
	struct scan_state s;
	struct io_call c;
	if (!scan_begin(&s, &c, (void *)filter))
		return real(dfd, dir, list, filter, cmp);
	return scan_end(&s, &c, SP_API_scandirat, dir,
			real(dfd, dir, list, (int (*)(const struct dirent *))scan_filter, cmp));
}

int scandirat64(int dfd, const char *dir, struct dirent64 ***list, int (*filter)(const struct dirent64 *),
		scan_cmp64_t cmp)
{
	int (*real)(int, const char *, struct dirent64 ***, int (*)(const struct dirent64 *), scan_cmp64_t) =
	    IO_REAL(scandirat64);
	struct scan_state s;
	struct io_call c;
	if (!scan_begin(&s, &c, (void *)filter))
		return real(dfd, dir, list, filter, cmp);
	return scan_end(&s, &c, SP_API_scandirat64, dir, real(dfd, dir, list, scan_filter, cmp));
}

/* ------------------------------------------------------------------ 5. nftw */

/*
 * nftw reads directories and stats their entries with glibc's internal calls,
 * and calls the program back once per entry with the stat it made: the calls
 * between two callbacks are nftw's own input. A callback of ours in front of
 * the program's writes, per entry:
 * - a STAT (api nftw): path, bytes = st_size, from nftw's previous return to
 *   the program (or its start) to this callback: the directory reads and the
 *   stat that found this entry. None when nftw could not stat it (FTW_NS).
 * - a LISTDIR per directory read, once nftw is done with it: count = the bytes
 *   getdents64 returned for it, computed from its entries' names as the kernel
 *   sizes a linux_dirent64 (".." and "." included), of no duration (the reads'
 *   time is in the STATs). Directories deeper than WALK_LEVELS are not listed.
 * As for scandir, the call is not entered while nftw runs: the program's
 * callback and its input (reading each file) are the program's, recorded as such.
 */
#define WALK_LEVELS 64

struct walk_dir {
	uint32_t path, bytes;
	int open; /* 0: no directory being read at this level */
};

struct walk_state {
	int (*fn)(const char *, const struct stat *, int, struct FTW *);
	unsigned api;
	int flags;
	uint64_t gap; /* when nftw last had control: its start, or the program's last return */
	long entries;
	struct walk_dir dir[WALK_LEVELS];
	struct walk_state *prev;
};

static __thread struct walk_state *walk_top __attribute__((tls_model("initial-exec")));

/* The size of name's linux_dirent64: 19 bytes of header, the name, its NUL, to a multiple of 8. */
static inline uint32_t walk_reclen(size_t len)
{
	return (uint32_t)((19 + len + 1 + 7) & ~(size_t)7);
}

static void walk_close(struct walk_state *s, int level, uint64_t t)
{
	struct walk_dir *d = &s->dir[level];
	if (d->open)
		io_emit(SP_K_LISTDIR, s->api, t, t, d->path, 0, -1, 0, 0, d->bytes);
	d->open = 0;
}

static void walk_open(struct walk_state *s, int level, uint32_t path)
{
	s->dir[level] = (struct walk_dir){path, walk_reclen(1) + walk_reclen(2), 1};
}

/* What nftw did before calling back for fpath, at level; flag as nftw says. */
static void walk_entry(struct walk_state *s, const char *fpath, const struct stat *sb, int flag, const struct FTW *w,
		       uint64_t t)
{
	int k = w->level;
	if (flag != FTW_NS)
		io_emit(SP_K_STAT, s->api, s->gap, t, io_path_id(fpath), (uint64_t)sb->st_size, -1, 0, 0, 0);
	for (int j = WALK_LEVELS - 1; j > k; j--)
		walk_close(s, j, t);
	if (k < WALK_LEVELS) {
		/* FTW_DP: after its entries (FTW_DEPTH); an empty one had none to open its listing */
		if (flag == FTW_DP && !s->dir[k].open)
			walk_open(s, k, io_path_id(fpath));
		walk_close(s, k, t);
	}
	if (k >= 1 && k <= WALK_LEVELS) {
		struct walk_dir *parent = &s->dir[k - 1];
		if (!parent->open)
			walk_open(s, k - 1, io_path_intern(fpath, w->base > 1 ? (size_t)w->base - 1 : (size_t)w->base));
		parent->bytes += walk_reclen(strlen(fpath + w->base));
	}
	if (flag == FTW_D && k < WALK_LEVELS)
		walk_open(s, k, io_path_id(fpath));
}

static int walk_fn(const char *fpath, const struct stat *sb, int flag, struct FTW *w)
{
	struct walk_state *s = walk_top;
	uint64_t t = sp_now();
	s->entries++;
	if (io_enter()) {
		int e = errno;
		walk_entry(s, fpath, sb, flag, w, t);
		io_leave();
		errno = e;
	}
	int r = s->fn(fpath, sb, flag, w);
	/* a directory the program told nftw to skip is not read */
	if ((s->flags & FTW_ACTIONRETVAL) && r == FTW_SKIP_SUBTREE && flag == FTW_D && w->level < WALK_LEVELS)
		s->dir[w->level].open = 0;
	s->gap = sp_now();
	return r;
}

typedef int (*walk_fn_t)(const char *, const struct stat *, int, struct FTW *);
typedef int (*walk_real_t)(const char *, walk_fn_t, int, int);

static int walk(unsigned api, walk_real_t real, const char *dir, walk_fn_t fn, int nopenfd, int flags)
{
	struct walk_state s;
	if (!io_enter())
		return real(dir, fn, nopenfd, flags);
	io_leave();
	memset(s.dir, 0, sizeof(s.dir));
	s.fn = fn;
	s.api = api;
	s.flags = flags;
	s.entries = 0;
	s.prev = walk_top;
	walk_top = &s;
	s.gap = sp_now();
	int r = real(dir, walk_fn, nopenfd, flags);
	walk_top = s.prev;
	struct io_call c;
	if (!io_enter())
		return r;
	io_end(&c, r);
	for (int j = WALK_LEVELS - 1; j >= 0; j--)
		walk_close(&s, j, c.t1);
	/* nothing walked: the error of the stat of dir (ENOENT, EACCES...) */
	if (r == -1 && !s.entries)
		io_emit(SP_K_STAT, api, s.gap, c.t1, io_path_id(io_path_after(dir, -1, c.err)), 0, -1,
			io_result(-1, c.err), 0, 0);
	io_finish(&c);
	return r;
}

int nftw(const char *dir, walk_fn_t fn, int nopenfd, int flags)
{
	return walk(SP_API_nftw, IO_REAL(nftw), dir, fn, nopenfd, flags);
}

/*
 * NOTE: struct stat64 is struct stat on LP64: nftw64 and its callback are
 * nftw's (cast through void (*)(void), deliberately).
 */
_Static_assert(sizeof(struct stat) == sizeof(struct stat64), "stat and stat64 differ");

int nftw64(const char *dir, int (*fn)(const char *, const struct stat64 *, int, struct FTW *), int nopenfd, int flags)
{
	return walk(SP_API_nftw64, (walk_real_t)io_real_get(IO_FN_nftw64), dir, (walk_fn_t)(void (*)(void))fn, nopenfd,
		    flags);
}
