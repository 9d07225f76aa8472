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

/* /dev/, /proc/ or /sys/: compared by hand, this runs at every open. */
static int special_tree(const char *p)
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

unsigned io_guess_type(const char *path, int flags, int *known)
{
	*known = 1;
	if (flags & O_DIRECTORY)
		return SP_FDTYPE_DIR;
	/* RATIONALE: a stat per open would cost ~10% of a small-file loop; the
	 * only non-regular files opened by path in practice live in these trees. */
	if (path && special_tree(path)) {
		*known = 0;
		return SP_FDTYPE_OTHER;
	}
	return SP_FDTYPE_FILE;
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
