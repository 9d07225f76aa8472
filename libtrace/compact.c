/*
 * compact.c - a trace file the size of what it holds (see tracefile.h).
 *
 * A trace file is created at its full geometry (header, keep area, ring) and
 * mapped whole; the disk space is reserved as records need it, so the file is
 * sparse: a demo trace of 900 KiB had an apparent size of 5 GiB, which tar
 * without -S, scp, zip and object-store uploads copy as zeros. Compaction
 * writes the same file with the keep area cut to its used slots and the ring
 * to the chunks handed out (all of them once it has wrapped), into a hidden
 * file beside it, header last, then renames it over the original: a reader
 * sees the old file or the new one, never a mix. The records, and so every
 * analysis, are the same; only keep_slots, ring_chunks and file_size change.
 *
 * Used by the recorder at a clean exit (sp_tf_compact, raw syscalls, no malloc:
 * it runs in the program's exit path) and by `stepprof compact` on files left
 * by a crash (sp_tf_compact_file).
 */
#include "tracefile.h"
#include "tracefile_int.h"

#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <sys/syscall.h>
#include <unistd.h>

#define KEEP_ALIGN 4096u

/* A reason into err (NULL: none wanted). */
#define say(err, errlen, ...) ((err) ? fmt((err), (errlen), __VA_ARGS__) : (void)0)

int sp_tf_compact_plan(const struct sp_file_header *h, uint64_t fsize, struct sp_tf_compact_plan *p, char *err,
		       size_t errlen)
{
	memset(p, 0, sizeof(*p));
	if (fsize < SP_HEADER_SIZE || memcmp(h->magic, SP_MAGIC, 8) != 0) {
		say(err, errlen, "not a stepprof trace file");
		return -EINVAL;
	}
	if (h->version_major != SP_VERSION_MAJOR || h->endian != SP_ENDIAN_TAG) {
		say(err, errlen, "trace format version %u.%u or byte order not this build's: not compacted",
		    h->version_major, h->version_minor);
		return -EINVAL;
	}
	uint64_t chunk = h->chunk_size;
	if (h->header_size != SP_HEADER_SIZE || chunk < SP_CHUNK_SIZE_MIN || chunk % SP_SLOT_SIZE ||
	    chunk > SP_CHUNK_SIZE_MAX || h->keep_slots > SP_KEEP_SLOTS_MAX ||
	    h->keep_next_slot > h->keep_slots) {
		say(err, errlen, "damaged header (geometry): not compacted");
		return -EINVAL;
	}
	uint64_t ring_off = SP_HEADER_SIZE + h->keep_slots * SP_SLOT_SIZE;
	uint64_t ring = h->ring_next_seq < h->ring_chunks ? h->ring_next_seq : h->ring_chunks;
	if (ring_off > fsize || ring > (fsize - ring_off) / chunk) {
		say(err, errlen, "shorter than its header says (truncated): not compacted");
		return -EINVAL;
	}
	uint64_t keep = (h->keep_next_slot * SP_SLOT_SIZE + KEEP_ALIGN - 1) / KEEP_ALIGN * KEEP_ALIGN;
	if (keep > h->keep_slots * SP_SLOT_SIZE)
		keep = h->keep_slots * SP_SLOT_SIZE;
	p->old_ring_off = ring_off;
	p->keep_slots = keep / SP_SLOT_SIZE;
	p->ring_off = SP_HEADER_SIZE + keep;
	p->ring_chunks = ring;
	p->size = p->ring_off + ring * chunk;
	p->old_size = fsize;
	/* already the size of what it holds, give or take a chunk */
	return fsize > p->size + chunk ? 1 : 0;
}

/* All of [buf, buf+len) at off; 0 or -errno. */
static int write_all(int fd, const uint8_t *buf, uint64_t len, uint64_t off)
{
	while (len) {
		size_t n = len > (8u << 20) ? (8u << 20) : (size_t)len;
		long w = syscall(SYS_pwrite64, fd, buf, n, (off_t)off);
		if (w < 0 && errno == EINTR)
			continue;
		if (w <= 0)
			return w < 0 ? -errno : -EIO;
		buf += w;
		off += (uint64_t)w;
		len -= (uint64_t)w;
	}
	return 0;
}

/* path's hidden sibling ".<name>.compact": readers skip names that begin with a dot. */
static int tmp_name(char *out, size_t n, const char *path)
{
	const char *slash = strrchr(path, '/');
	int dl = slash ? (int)(slash - path + 1) : 0;
	int len = snprintf(out, n, "%.*s.%s.compact", dl, path, path + dl);
	return len < 0 || (size_t)len >= n ? -ENAMETOOLONG : 0;
}

/* sp_tf_compact_image with path relative to the directory dfd (AT_FDCWD: path as it is). */
static int compact_image_at(const uint8_t *base, const struct sp_tf_compact_plan *p, int dfd, const char *path,
			    const struct sp_tf_compact_opts *o, char *err, size_t errlen)
{
	int saved = errno, rc;
	const struct sp_file_header *h = (const struct sp_file_header *)base;
	char tmp[SP_TF_PATH_MAX + 16];
	if ((rc = tmp_name(tmp, sizeof(tmp), path)) != 0) {
		say(err, errlen, "%s: the name is too long to compact beside it", path);
		goto out;
	}
	long fd = syscall(SYS_openat, dfd, tmp, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
	if (fd < 0 && errno == EEXIST) {
		/* left by a compaction that was killed: never a trace reader's (hidden name) */
		syscall(SYS_unlinkat, dfd, tmp, 0);
		fd = syscall(SYS_openat, dfd, tmp, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
	}
	if (fd < 0) {
		rc = -errno;
		say(err, errlen, "cannot create %s: %s", tmp, strerror(errno));
		goto out;
	}
	/* the header, in this file's geometry; written last, so that a copy cut short has no magic */
	union {
		struct sp_file_header h;
		uint8_t bytes[SP_HEADER_SIZE];
	} hdr;
	memcpy(hdr.bytes, base, SP_HEADER_SIZE);
	hdr.h.keep_slots = p->keep_slots;
	hdr.h.ring_chunks = (uint32_t)p->ring_chunks;
	hdr.h.file_size = p->size;
	if (hdr.h.keep_next_slot > p->keep_slots)
		hdr.h.keep_next_slot = p->keep_slots;
	uint64_t keep_bytes = p->ring_off - SP_HEADER_SIZE;
	if ((rc = syscall(SYS_ftruncate, fd, (off_t)p->size) != 0 ? -errno : 0) ||
	    (rc = write_all((int)fd, base + SP_HEADER_SIZE, keep_bytes, SP_HEADER_SIZE)) ||
	    (rc = write_all((int)fd, base + p->old_ring_off, p->ring_chunks * h->chunk_size, p->ring_off)) ||
	    (rc = write_all((int)fd, hdr.bytes, SP_HEADER_SIZE, 0))) {
		say(err, errlen, "cannot write %s: %s", tmp, strerror(-rc));
		goto fail;
	}
	if (o && o->uid != (uint32_t)-1 && syscall(SYS_fchown, fd, o->uid, o->gid) != 0) {
		rc = -errno;
		say(err, errlen, "cannot give %s to uid %u: %s", tmp, o->uid, strerror(errno));
		goto fail;
	}
	if (o && o->sync && syscall(SYS_fsync, fd) != 0) {
		rc = -errno;
		say(err, errlen, "cannot flush %s: %s", tmp, strerror(errno));
		goto fail;
	}
	if (syscall(SYS_renameat, dfd, tmp, dfd, path) != 0) {
		rc = -errno;
		say(err, errlen, "cannot rename %s to %s: %s", tmp, path, strerror(errno));
		goto fail;
	}
	syscall(SYS_close, fd);
	rc = 0;
	goto out;
fail:
	syscall(SYS_close, fd);
	syscall(SYS_unlinkat, dfd, tmp, 0);
out:
	errno = saved;
	return rc;
}

int sp_tf_compact_image(const uint8_t *base, const struct sp_tf_compact_plan *p, const char *path,
			const struct sp_tf_compact_opts *o, char *err, size_t errlen)
{
	return compact_image_at(base, p, AT_FDCWD, path, o, err, errlen);
}

int sp_tf_compact(struct sp_tf *tf)
{
	if (!tf->base || !tf->path[0])
		return 0;
	struct sp_tf_compact_plan p;
	char err[SP_TF_PATH_MAX + 128];
	if (sp_tf_compact_plan(tf->hdr, tf->size, &p, NULL, 0) != 1)
		return 0;
	/*
	 * At exit the copy is the program's time: a file that holds more than
	 * SP_TF_COMPACT_EXIT_MAX and is at least half full stays as it is (its
	 * holes are at most the keep area's unused part, an eighth of the file);
	 * `stepprof compact` does it later.
	 */
	if (p.size > SP_TF_COMPACT_EXIT_MAX && p.size * 2 >= p.old_size)
		return 0;
	/* a copy past the file size limit (ulimit -f) would raise SIGXFSZ in the program */
	if (!under_fsize_limit(0, p.size))
		return 0;
	/* the owner the file has now: the collector gives its file to the user it traces */
	struct sp_tf_compact_opts o = {.uid = (uint32_t)-1, .gid = (uint32_t)-1, .sync = 0};
	struct stat st;
	if ((tf->fd >= 0 ? syscall(SYS_fstat, tf->fd, &st) : syscall(SYS_newfstatat, AT_FDCWD, tf->path, &st, 0)) == 0 &&
	    st.st_uid != geteuid())
		o.uid = st.st_uid, o.gid = st.st_gid;
	/* in the file's directory, walked and checked again: never a directory another user swapped in */
	int dfd = tf_open_own_dir(tf), rc;
	if (dfd < 0) {
		rc = -errno;
		snprintf(err, sizeof(err), "%s: its directory: %s", tf->path, strerror(errno));
	} else {
		rc = compact_image_at(tf->base, &p, dfd, tf->path + tf->name_off, &o, err, sizeof(err));
		syscall(SYS_close, dfd);
	}
	if (rc != 0 && tf->warn && rc != -ENOSPC && rc != -EDQUOT) {
		/* (a full disk has had its warning: the file stays as it is, stepprof info says so) */
		char msg[sizeof(err) + 64];
		snprintf(msg, sizeof(msg), "%s; the trace stays at its full size (stepprof compact)", err);
		tf->warn("compact", msg);
	}
	return rc == 0 ? 1 : rc;
}

/* ------------------------------------------------------- stepprof compact */

/*
 * Is the file mapped by process pid (its writer)? Looks for dev:ino in
 * /proc/pid/maps. 1 yes, 0 no (or no such process), -1 unknown.
 */
static int mapped_by(int pid, uint64_t dev, uint64_t ino)
{
	char path[64], line[1024];
	snprintf(path, sizeof(path), "/proc/%d/maps", pid);
	FILE *f = fopen(path, "r");
	if (!f)
		return errno == ENOENT ? 0 : -1;
	int found = 0;
	while (!found && fgets(line, sizeof(line), f)) {
		unsigned maj, min;
		unsigned long long i;
		if (sscanf(line, "%*s %*s %*s %x:%x %llu", &maj, &min, &i) == 3 && i == ino &&
		    makedev(maj, min) == (dev_t)dev)
			found = 1;
	}
	fclose(f);
	return found;
}

int sp_tf_compact_file(const char *path, int force, char *err, size_t errlen)
{
	int fd = open(path, O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
	if (fd < 0) {
		say(err, errlen, "%s", strerror(errno));
		return -errno;
	}
	struct stat st;
	if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode) || st.st_size < (off_t)SP_HEADER_SIZE) {
		close(fd);
		say(err, errlen, "not a stepprof trace file");
		return -EINVAL;
	}
	int rc;
	uint8_t *base = mmap(NULL, (size_t)st.st_size, PROT_READ, MAP_SHARED, fd, 0);
	if (base == MAP_FAILED) {
		rc = -errno;
		say(err, errlen, "cannot map it: %s", strerror(errno));
		close(fd);
		return rc;
	}
	const struct sp_file_header *h = (const struct sp_file_header *)base;
	struct sp_tf_compact_plan p;
	rc = sp_tf_compact_plan(h, (uint64_t)st.st_size, &p, err, errlen);
	if (rc == 1 && !force) {
		char host[65];
		size_t hl = strnlen(h->host, sizeof(h->host));
		memcpy(host, h->host, hl);
		host[hl] = 0;
		char self[65] = "";
		gethostname(self, sizeof(self) - 1);
		int here = strcmp(host, self) == 0;
		int m = here && h->pid > 0 ? mapped_by(h->pid, (uint64_t)st.st_dev, (uint64_t)st.st_ino) : -1;
		if (m == 1) {
			say(err, errlen, "still being written by process %d: compact it after the process ends", h->pid);
			rc = -EBUSY;
		} else if (m == -1 && !h->end_mono_ns) {
			say(err, errlen,
			    "no clean exit recorded and its writer (pid %d on %s) cannot be checked from here: "
			    "--force if it has ended",
			    h->pid, host);
			rc = -EBUSY;
		}
	}
	if (rc == 1) {
		struct sp_tf_compact_opts o = {.uid = st.st_uid, .gid = st.st_gid, .sync = 1};
		if (st.st_uid == geteuid())
			o.uid = o.gid = (uint32_t)-1;
		rc = sp_tf_compact_image(base, &p, path, &o, err, errlen);
		rc = rc == 0 ? 1 : rc;
	}
	munmap(base, (size_t)st.st_size);
	close(fd);
	return rc;
}
