/*
 * tf_space.c - the trace-file writer's disk space and keep area: blocks
 * reserved before the mapping touches a page (a store into a page without
 * blocks on a full disk is a SIGBUS), and the keep area's slots and strings.
 *
 * Divided into:
 *   1. disk space reservation,
 *   2. the keep area.
 *
 * Raw syscalls only, no malloc (tracefile_int.h says why).
 */
#include "tracefile_int.h"

#include <errno.h>
#include <fcntl.h>
#include <sched.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/uio.h>

/* ------------------------------------------------ 1. disk space reservation */

/*
 * Give [off, off+len) real blocks before the mapping touches it: writing a page
 * of a MAP_SHARED file that has no block behind it on a full disk raises
 * SIGBUS, a failed reservation only costs records.
 *
 * RATIONALE: through the mapping, with MADV_POPULATE_WRITE (Linux 5.14): it
 * write-faults every page of the range (the file system reserves its block
 * there: ext4's delayed allocation, tmpfs's page) and answers EFAULT where a
 * store would have raised SIGBUS (no space), so the writer needs no
 * descriptor and holds none (tracefile.c). It never changes data: threads may
 * reserve overlapping ranges of the keep area. Without it (EINVAL: an older
 * kernel), or for a writer that keeps its descriptor, the blocks come from
 * fallocate or, on a file system without it, written zeros, through the kept
 * descriptor or one opened by path for the call (O_CLOEXEC) and closed.
 */
#define SP_MADV_POPULATE_WRITE 23

/* 0, 1 (not supported: use a descriptor) or -1 (no space, errno ENOSPC) */
static int populate(struct sp_tf *tf, uint64_t off, uint64_t len)
{
	if (!tf->base || __atomic_load_n(&tf->no_populate, __ATOMIC_RELAXED))
		return 1;
	for (;;) {
		if (syscall(SYS_madvise, tf->base + off, (size_t)len, SP_MADV_POPULATE_WRITE) == 0)
			return 0;
		if (errno == EINTR || errno == EAGAIN)
			continue;
		if (errno == EINVAL) {
			__atomic_store_n(&tf->no_populate, 1, __ATOMIC_RELAXED);
			return 1;
		}
		if (errno == EFAULT)
			errno = ENOSPC;
		return -1;
	}
}

/*
 * A descriptor of our file: the kept one while it still names the file (a
 * program may close every descriptor and reuse the number for a file of its
 * own: fallocate would then grow the user's file; checked before each use), or
 * one reopened by its name in its directory, the directory walked and checked
 * again (tf_open_own_dir), taken only if it is the same file: *own set, the
 * caller closes it. A kept one that was lost is replaced by the reopened one,
 * moved high.
 */
static int file_fd(struct sp_tf *tf, int *own)
{
	int fd = __atomic_load_n(&tf->fd, __ATOMIC_ACQUIRE);
	struct stat st;
	*own = 0;
	if (fd >= 0 && syscall(SYS_fstat, fd, &st) == 0 && (uint64_t)st.st_ino == tf->ino &&
	    (uint64_t)st.st_dev == tf->dev)
		return fd;
	int dfd = tf_open_own_dir(tf);
	if (dfd < 0)
		return -1;
	long nfd = sys_openat(dfd, tf->path + tf->name_off, O_RDWR | O_NOFOLLOW | O_CLOEXEC, 0);
	sys_close(dfd);
	if (nfd < 0)
		return -1;
	if (syscall(SYS_fstat, (int)nfd, &st) != 0 || (uint64_t)st.st_ino != tf->ino ||
	    (uint64_t)st.st_dev != tf->dev) {
		sys_close((int)nfd);
		errno = ESTALE;
		return -1;
	}
	if (!tf->keep_fd) {
		*own = 1;
		return (int)nfd;
	}
	int h = high_fd((int)nfd);
	/* NOTE: the old number is not ours any more: never close it */
	if (!__atomic_compare_exchange_n(&tf->fd, &fd, h, 0, __ATOMIC_ACQ_REL, __ATOMIC_ACQUIRE)) {
		sys_close(h); /* another thread reopened first */
		return fd;
	}
	return h;
}

static void fd_done(int fd, int own)
{
	if (own) {
		int e = errno;
		sys_close(fd);
		errno = e;
	}
}

/* Zeros over [off, off+len) of fd, up to 64 KiB a call (one 4 KiB page of zeros, repeated). */
static int write_zeros(int fd, uint64_t off, uint64_t len)
{
	static const char zeros[4096] __attribute__((aligned(4096)));
	struct iovec iov[16];
	for (unsigned i = 0; i < 16; i++)
		iov[i] = (struct iovec){ (void *)zeros, sizeof(zeros) };
	while (len) {
		unsigned n = 0;
		uint64_t bytes = 0;
		while (n < 16 && bytes < len) {
			iov[n].iov_len = len - bytes < sizeof(zeros) ? (size_t)(len - bytes) : sizeof(zeros);
			bytes += iov[n++].iov_len;
		}
		/* the raw call: offset as (low, high) words; the high word is ignored on 64-bit */
		long w = syscall(SYS_pwritev, fd, iov, n, (unsigned long)off, (unsigned long)((off >> 16) >> 16));
		for (unsigned i = 0; i < n; i++)
			iov[i].iov_len = sizeof(zeros);
		if (w < 0 && errno == EINTR)
			continue;
		if (w <= 0) {
			if (w == 0)
				errno = ENOSPC;
			return -1;
		}
		off += (uint64_t)w;
		len -= (uint64_t)w;
	}
	return 0;
}

static int reserve_by_fd(struct sp_tf *tf, uint64_t off, uint64_t len)
{
	int own;
	int fd = file_fd(tf, &own);
	if (fd < 0)
		return -1;
	int rc = -1;
	if (!__atomic_load_n(&tf->no_fallocate, __ATOMIC_RELAXED)) {
		if (syscall(SYS_fallocate, fd, 0, (off_t)off, (off_t)len) == 0) {
			fd_done(fd, own);
			return 0;
		}
		if (errno != EOPNOTSUPP && errno != ENOSYS) {
			fd_done(fd, own);
			return -1;
		}
		/* known at the file's creation (its header is reserved here first, one thread) */
		__atomic_store_n(&tf->no_fallocate, 1, __ATOMIC_RELAXED);
	}
	rc = write_zeros(fd, off, len);
	fd_done(fd, own);
	return rc;
}

int reserve_range(struct sp_tf *tf, uint64_t off, uint64_t len)
{
	if (!under_fsize_limit(off, len))
		return -1;
	int p = populate(tf, off, len);
	return p <= 0 ? p : reserve_by_fd(tf, off, len);
}

/*
 * A new ring chunk's disk space, reserved by the one thread that claims the
 * chunk (claim(): chunk_info RESERVING): through the mapping (populate, which
 * also maps the chunk's 16 pages at once instead of 16 page faults on the hot
 * path), or, where a descriptor is needed, zeros written through the page
 * cache (measured on ext4, per 64 KiB chunk: fallocate 50-99 us, written
 * zeros 20-27 us; fallocate's unwritten extents make every page go through
 * the read path and page_mkwrite), then fallocate on a file system that
 * refuses the write.
 */
int reserve_chunk(struct sp_tf *tf, uint64_t off, uint64_t len)
{
	if (!under_fsize_limit(off, len))
		return -1;
	int p = populate(tf, off, len);
	if (p <= 0)
		return p;
	int own;
	int fd = file_fd(tf, &own);
	if (fd < 0)
		return -1;
	int rc = write_zeros(fd, off, len);
	fd_done(fd, own);
	if (rc == 0)
		return 0;
	if (errno == ENOSPC || errno == EDQUOT || errno == EFBIG)
		return -1;
	return reserve_range(tf, off, len);
}

void warn_space(struct sp_tf *tf, const char *what)
{
	char msg[400];
	fmt(msg, sizeof(msg), "%s: cannot reserve disk space for the %s (%s); records are counted as lost", tf->path,
	    what, strerror(errno));
	tf_warn(tf, "disk", msg);
}

/* ------------------------------------------------------------- 2. keep area */

/* A spinning thread's hint to the CPU. */
static inline void cpu_relax(void)
{
#if defined(__x86_64__) || defined(__i386__)
	__builtin_ia32_pause();
#elif defined(__aarch64__)
	__asm__ volatile("yield");
#endif
}

/*
 * keep_space on a file system without fallocate: the zeros that reserve a range
 * would erase a string another thread wrote there after its own reservation, so
 * one thread at a time writes them (keep_busy), and the others wait for it
 * (a write of at most 64 KiB; once per 64 KiB of strings). The wait is bounded
 * (~1 ms): a signal handler that records while its own thread holds the flag
 * gets -1 (its string is missing) rather than waiting forever.
 */
static int keep_space_zeros(struct sp_tf *tf, uint64_t end, uint64_t want)
{
	for (unsigned spins = 0;; spins++) {
		int idle = 0;
		if (__atomic_compare_exchange_n(&tf->keep_busy, &idle, 1, 0, __ATOMIC_ACQ_REL, __ATOMIC_ACQUIRE))
			break;
		if (end <= __atomic_load_n(&tf->keep_reserved, __ATOMIC_ACQUIRE))
			return 0;
		if (spins >= 1000) {
			errno = EBUSY;
			return -1;
		}
		if (spins >= 16)
			sched_yield();
		else
			cpu_relax();
	}
	uint64_t have = __atomic_load_n(&tf->keep_reserved, __ATOMIC_ACQUIRE);
	int rc = 0;
	if (end > have) {
		rc = reserve_range(tf, have, want - have);
		if (rc == 0)
			__atomic_store_n(&tf->keep_reserved, want, __ATOMIC_RELEASE);
	}
	__atomic_store_n(&tf->keep_busy, 0, __ATOMIC_RELEASE);
	return rc;
}

/* Disk space up to byte `end` of the file, ahead in 64 KiB steps. */
static int keep_space(struct sp_tf *tf, uint64_t end)
{
	uint64_t have = __atomic_load_n(&tf->keep_reserved, __ATOMIC_ACQUIRE);
	if (end <= have)
		return 0;
	uint64_t want = (end + SP_TF_CHUNK_SIZE - 1) & ~(uint64_t)(SP_TF_CHUNK_SIZE - 1);
	if (want > tf->ring_off)
		want = tf->ring_off;
	if (__atomic_load_n(&tf->no_fallocate, __ATOMIC_RELAXED))
		return keep_space_zeros(tf, end, want);
	if (reserve_range(tf, have, want - have) != 0)
		return -1;
	/* several threads may have reserved overlapping ranges (fallocate changes no data): keep the maximum */
	while (have < want &&
	       !__atomic_compare_exchange_n(&tf->keep_reserved, &have, want, 1, __ATOMIC_ACQ_REL, __ATOMIC_ACQUIRE))
		;
	return 0;
}

struct sp_slot *sp_tf_keep_reserve(struct sp_tf *tf, unsigned nslots)
{
	if (!tf->hdr)
		return NULL;
	int saved = errno;
	struct sp_slot *keep = (struct sp_slot *)(tf->base + tf->keep_off);
	uint64_t at = __atomic_load_n(&tf->hdr->keep_next_slot, __ATOMIC_ACQUIRE);
	for (;;) {
		if (at + nslots > tf->keep_slots) {
			char msg[300];
			fmt(msg, sizeof(msg), "%s: the area for strings is full; later names are missing", tf->path);
			tf_warn(tf, "keep", msg);
			break;
		}
		/* space first, then the counter: the area never has a hole without blocks */
		if (keep_space(tf, tf->keep_off + (at + nslots) * SP_SLOT_SIZE) != 0) {
			if (errno != EBUSY) /* EBUSY: keep_space_zeros' bounded wait, not the disk */
				warn_space(tf, "string area");
			break;
		}
		if (__atomic_compare_exchange_n(&tf->hdr->keep_next_slot, &at, at + nslots, 0, __ATOMIC_ACQ_REL,
						__ATOMIC_ACQUIRE)) {
			errno = saved;
			return keep + at;
		}
	}
	errno = saved;
	return NULL;
}

int sp_tf_keep_string(struct sp_tf *tf, uint32_t id, const char *s, unsigned len)
{
	if (len > SP_MAX_STRING)
		len = SP_MAX_STRING;
	unsigned n = sp_string_slots(len);
	if (tf->keep_string_max &&
	    __atomic_add_fetch(&tf->keep_string_used, n, __ATOMIC_RELAXED) > tf->keep_string_max) {
		__atomic_sub_fetch(&tf->keep_string_used, n, __ATOMIC_RELAXED);
		char msg[300];
		fmt(msg, sizeof(msg),
		    "%s: the strings' half of the keep area is full (%llu slots); later names and paths are "
		    "missing (raise STEPPROF_MAX_MB)",
		    tf->path, (unsigned long long)tf->keep_string_max);
		tf_warn(tf, "keep", msg);
		return -1;
	}
	struct sp_slot *slot = sp_tf_keep_reserve(tf, n);
	if (!slot)
		return -1;
	sp_string_encode(slot, id, s, len);
	sp_tf_publish(slot, SP_K_STRING);
	return 0;
}
