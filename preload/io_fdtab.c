/*
 * io_fdtab.c - the fd -> (path, type) table of the input capture: storage and
 * the slow paths (see io_fdtab.h for the design).
 *
 * Divided into: the table, type classification, the once-per-fd fstat.
 */
#include "io_hook.h"
#include "lazymap.h"

#include <errno.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

struct io_fd *io_fdtab;
int io_fd_hwm = -1;

static struct sp_lazy fdtab_map = SP_LAZY_INIT(IO_FD_MAX * sizeof(struct io_fd), "descriptor table");

int io_fdtab_map(void)
{
	/* a process that records nothing (STEPPROF_DISABLE=1, not started yet, no trace file) maps nothing */
	if (!__atomic_load_n(&sp_active, __ATOMIC_ACQUIRE) || sp_recorder_failed())
		return 0;
	struct io_fd *t = sp_lazy_get(&fdtab_map);
	if (t)
		__atomic_store_n(&io_fdtab, t, __ATOMIC_RELEASE);
	return t != NULL;
}

unsigned io_type_from_mode(mode_t mode)
{
	switch (mode & S_IFMT) {
	case S_IFREG:
		return SP_FDTYPE_FILE;
	case S_IFIFO:
		return SP_FDTYPE_PIPE;
	case S_IFSOCK:
		return SP_FDTYPE_SOCKET;
	case S_IFDIR:
		return SP_FDTYPE_DIR;
	default:
		return SP_FDTYPE_OTHER;
	}
}

/*
 * The path /proc/self/fd/fd names, interned; 0 when there is none (a deleted
 * file keeps the " (deleted)" the kernel appends: it is the truth).
 */
static uint32_t io_fd_proc_path(int fd)
{
	char link[32] = "/proc/self/fd/", buf[PATH_MAX], digits[12];
	int nd = 0, at = 14;
	for (unsigned v = (unsigned)fd; nd == 0 || v; v /= 10)
		digits[nd++] = (char)('0' + v % 10);
	while (nd)
		link[at++] = digits[--nd];
	link[at] = 0;
	int saved = errno;
	long n = syscall(SYS_readlinkat, AT_FDCWD, link, buf, sizeof(buf));
	errno = saved;
	if (n <= 0 || n >= (long)sizeof(buf) || buf[0] != '/')
		return 0;
	return io_path_intern(buf, (size_t)n);
}

void io_fd_after_fork(void)
{
	int hwm = io_fd_hwm < IO_FD_MAX ? io_fd_hwm : IO_FD_MAX - 1;
	if (!io_fdtab)
		return;
	for (int fd = 0; fd <= hwm; fd++) {
		uint64_t w = io_fdtab[fd].word;
		if (io_word_path(w))
			io_fdtab[fd].word = w & ~(IO_W_PATH_MASK | IO_W_KNOWN);
	}
}

uint64_t io_fd_lookup(int fd, uint64_t w)
{
	struct stat st;
	/* NOTE: the raw syscall, not fstat(): never recorded, never re-entered, errno kept. */
	int saved = errno;
	long r = syscall(SYS_fstat, fd, &st);
	errno = saved;
	if (r != 0)
		return w; /* not open (yet): leave unknown, "other" for now */
	unsigned type = io_type_from_mode(st.st_mode);
	/* no file type (an anonymous inode: eventfd, timerfd, signalfd, epoll, pidfd,
	 * inotify) or a character device (a tty, /dev/zero, /dev/urandom): not input */
	uint64_t not_input = (st.st_mode & S_IFMT) == 0 || S_ISCHR(st.st_mode) ? IO_W_NOT_INPUT : 0;
	/*
	 * An fd not seen born that is open for writing only is output, as a file
	 * opened so here is (io_open_is_output): a stdout the shell redirected to
	 * a file (`job > log`), a pipe's write end: the close of such a stdout and
	 * stderr at exit must not be records (they would make `true > f` a trace). One fcntl per such fd, at its first use.
	 */
	saved = errno;
	long fl = syscall(SYS_fcntl, fd, F_GETFL);
	errno = saved;
	uint64_t output = fl >= 0 && (fl & O_ACCMODE) == O_WRONLY ? IO_W_OUTPUT : 0;
	/*
	 * The path of an fd that is no input is never in a record: not interned,
	 * since interning creates the trace file (`/bin/echo hi > f` would leave
	 * a file holding the names of its stdout and stderr, and no record).
	 */
	uint32_t path = io_word_path(w);
	if (!path && !output && !(w & IO_W_OUTPUT) && (type == SP_FDTYPE_FILE || type == SP_FDTYPE_DIR))
		path = io_fd_proc_path(fd);
	return io_word_make(path, type, 1) | not_input | output | (w & ((7ull << IO_W_WAIT_SHIFT) | IO_W_OUTPUT));
}

uint64_t io_fd_resolve(int fd)
{
	uint64_t w = io_fd_word(fd), n = io_fd_lookup(fd, w);
	if (n != w && io_fd_tracked(fd))
		__atomic_store_n(&io_fdtab[fd].word, n, __ATOMIC_RELAXED);
	return n;
}
