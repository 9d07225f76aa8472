/*
 * io_fdtab.c - the fd -> (path, type) table of the input capture: storage and
 * the slow paths (see io_fdtab.h for the design).
 *
 * Divided into: the table, type classification, the once-per-fd fstat.
 */
#include "io_fdtab.h"

#include <errno.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

struct io_fd io_fdtab[IO_FD_MAX];

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

uint64_t io_fd_resolve(int fd)
{
	struct stat st;
	uint64_t w = io_fd_word(fd);
	/* NOTE: the raw syscall, not fstat(): never recorded, never re-entered, errno kept. */
	long r;
	int saved = errno;
	r = syscall(SYS_fstat, fd, &st);
	errno = saved;
	if (r != 0)
		return w; /* not open (yet): leave unknown, "other" for now */
	w = io_word_make(io_word_path(w), io_type_from_mode(st.st_mode), 1) | (w & (7ull << IO_W_WAIT_SHIFT));
	if (io_fd_tracked(fd))
		__atomic_store_n(&io_fdtab[fd].word, w, __ATOMIC_RELAXED);
	return w;
}
