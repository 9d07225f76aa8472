/*
 * tracefile.c - the writer of one trace file (see tracefile.h for the contract):
 * its directory, its creation, header and geometry, and its release. The disk
 * space and the keep area are tf_space.c's, the ring's chunks and the streams
 * tf_chunks.c's.
 *
 * Divided into:
 *   1. small helpers (errno-preserving, no libc I/O): warnings, environment,
 *   2. directory and file creation, the header.
 *
 * RATIONALE: every file operation is a raw syscall so that the preload's libc
 * I/O wrappers never record (or recurse into) stepprof's own I/O, and nothing
 * here calls malloc: the recorder may create its file from inside any hooked
 * call, including one made by a signal handler.
 */
#include "tracefile_int.h"

#include <errno.h>
#include <signal.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/random.h>
#include <sys/syscall.h>
#include <sys/utsname.h>
#include <time.h>
#include <unistd.h>

/* ------------------------------------------------------------ 1. helpers */

static void *sys_mmap(void *addr, size_t len, int prot, int flags, int fd, off_t off)
{
	return (void *)syscall(SYS_mmap, addr, len, prot, flags, fd, off);
}

/*
 * Write a warning line to stderr without the signals such a write can raise in
 * the program: SIGPIPE when stderr is a pipe nobody reads any more (`job 2>&1 |
 * head`, a log collector that died), SIGXFSZ when it is a file at the file size
 * limit. Both kill by default; the program's own writes would meet the same, but
 * a program that writes nothing more must not die of stepprof's warning. The two
 * are blocked in this thread around the write, and one the write raised (it is
 * sent to this thread) is taken back unless it was pending already. Rare: one
 * write per warning.
 */
void sp_tf_write_stderr(const char *line, size_t len)
{
	int saved = errno;
	sigset_t block, old, before;
	sigemptyset(&block);
	sigaddset(&block, SIGPIPE);
	sigaddset(&block, SIGXFSZ);
	if (pthread_sigmask(SIG_BLOCK, &block, &old) != 0) {
		syscall(SYS_write, 2, line, len);
		errno = saved;
		return;
	}
	sigpending(&before);
	long w = syscall(SYS_write, 2, line, len);
	if (w < 0 && (errno == EPIPE || errno == EFBIG)) {
		int sig = errno == EPIPE ? SIGPIPE : SIGXFSZ;
		if (!sigismember(&before, sig)) {
			sigset_t one;
			sigemptyset(&one);
			sigaddset(&one, sig);
			static const struct timespec zero;
			sigtimedwait(&one, NULL, &zero);
		}
	}
	pthread_sigmask(SIG_SETMASK, &old, NULL);
	errno = saved;
}

/* Default warning sink when the producer gave none: once per key, raw write to stderr. */
void tf_warn(struct sp_tf *tf, const char *key, const char *msg)
{
	static const char *seen[8];
	if (tf && tf->warn) {
		tf->warn(key, msg);
		return;
	}
	for (unsigned i = 0; i < 8; i++) {
		const char *k = __atomic_load_n(&seen[i], __ATOMIC_ACQUIRE);
		if (k && strcmp(k, key) == 0)
			return;
		if (!k) {
			const char *expect = NULL;
			if (!__atomic_compare_exchange_n(&seen[i], &expect, key, 0, __ATOMIC_ACQ_REL,
							 __ATOMIC_ACQUIRE)) {
				if (strcmp(expect, key) == 0)
					return;
				continue;
			}
			break;
		}
	}
	char line[600];
	int len = snprintf(line, sizeof(line), "%s: %s\n", tf && tf->prog ? tf->prog : "stepprof", msg);
	if (len > (int)sizeof(line) - 1)
		len = sizeof(line) - 1;
	if (len > 0)
		sp_tf_write_stderr(line, (size_t)len);
}

static int32_t env_int(const char *name)
{
	const char *v = getenv(name);
	if (!v || !*v)
		return -1;
	char *end;
	errno = 0;
	long x = strtol(v, &end, 10);
	if (errno || *end || x < 0 || x > 0x7fffffff)
		return -1;
	return (int32_t)x;
}

/* /proc/self/cmdline with the NULs turned into spaces, truncated to fit. */
static void read_cmdline(char *out, size_t n)
{
	out[0] = 0;
	long fd = sys_openat(AT_FDCWD, "/proc/self/cmdline", O_RDONLY | O_CLOEXEC, 0);
	if (fd < 0)
		return;
	long got = syscall(SYS_read, (int)fd, out, n - 1);
	sys_close((int)fd);
	if (got <= 0)
		return;
	while (got > 0 && out[got - 1] == 0)
		got--;
	for (long i = 0; i < got; i++)
		if (out[i] == 0)
			out[i] = ' ';
	out[got] = 0;
}

/* --------------------------------------------------- 2. directory and file */

/* A directory whose entries another user can replace (/tmp, a group-writable or foreign one). */
static int others_may_write(const struct stat *st)
{
	return (st->st_mode & (S_IWGRP | S_IWOTH)) || (st->st_uid != 0 && st->st_uid != geteuid());
}

static int check_dir(int fd, const char *dir, unsigned flags, unsigned *mode, char *err, size_t errlen)
{
	struct stat st;
	if (syscall(SYS_fstat, fd, &st) != 0) {
		int e = errno;
		fmt(err, errlen, "%s: %s", dir, strerror(e));
		return -e;
	}
	if (!S_ISDIR(st.st_mode)) {
		fmt(err, errlen, "%s: not a directory", dir);
		return -ENOTDIR;
	}
	if (st.st_uid != geteuid() && !(flags & SP_TF_DIR_ANY_OWNER)) {
		fmt(err, errlen, "%s: directory not owned by uid %u", dir, (unsigned)geteuid());
		return -EPERM;
	}
	if (mode)
		*mode = (unsigned)st.st_mode & 07777;
	return 0;
}

/*
 * One component of the walk: name in the directory parent (O_PATH fd), made
 * when missing and asked to. A symbolic link is followed only when parent is
 * a directory no other user can write.
 * RATIONALE: refusing every link would refuse /home -> /data/home and the
 * like; a link in a directory only its owner (or root) can write was put there
 * by one of them, so following it gives nobody else a say. Another user's
 * link in /tmp is refused.
 */
static long open_component(long parent, const char *comp, const char *dir, unsigned flags, char *err,
			   size_t errlen)
{
	const int oflags = O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC;
	long next = sys_openat((int)parent, comp, oflags, 0);
	if (next < 0 && errno == ENOENT && (flags & SP_TF_DIR_CREATE) &&
	    (syscall(SYS_mkdirat, (int)parent, comp, 0700) == 0 || errno == EEXIST))
		next = sys_openat((int)parent, comp, oflags, 0);
	if (next < 0 && (errno == ENOTDIR || errno == ELOOP)) {
		int e = errno;
		struct stat lst, pst;
		if (syscall(SYS_newfstatat, (int)parent, comp, &lst, AT_SYMLINK_NOFOLLOW) == 0 && S_ISLNK(lst.st_mode)) {
			if (syscall(SYS_fstat, (int)parent, &pst) != 0 || others_may_write(&pst)) {
				fmt(err, errlen,
				    "%s: \"%s\" is a symbolic link in a directory other users can write; refused", dir,
				    comp);
				errno = ELOOP;
				return -1;
			}
			next = sys_openat((int)parent, comp, O_PATH | O_DIRECTORY | O_CLOEXEC, 0);
		} else {
			errno = e;
		}
	}
	if (next < 0)
		fmt(err, errlen, "%s: %s", dir, strerror(errno));
	return next;
}

int sp_tf_open_dir(const char *dir, unsigned flags, unsigned *mode, char *err, size_t errlen)
{
	int saved = errno, rc;
	size_t len = strlen(dir);
	if (len == 0) {
		fmt(err, errlen, "empty trace directory name");
		return -ENOENT;
	}
	if (len > SP_TF_DIR_MAX) {
		fmt(err, errlen,
		    "the trace directory's path is %zu bytes long, more than the %d a trace file's path "
		    "leaves it",
		    len, SP_TF_DIR_MAX);
		return -ENAMETOOLONG;
	}
	long fd = sys_openat(AT_FDCWD, dir[0] == '/' ? "/" : ".", O_PATH | O_DIRECTORY | O_CLOEXEC, 0);
	if (fd < 0) {
		rc = -errno;
		fmt(err, errlen, "%s: %s", dir, strerror(errno));
		goto out;
	}
	for (const char *p = dir; *p;) {
		while (*p == '/')
			p++;
		size_t n = strcspn(p, "/");
		if (n == 0)
			break;
		char comp[256];
		if (n >= sizeof(comp)) {
			rc = -ENAMETOOLONG;
			fmt(err, errlen, "%s: %s", dir, strerror(ENAMETOOLONG));
			goto fail;
		}
		memcpy(comp, p, n);
		comp[n] = 0;
		p += n;
		if (strcmp(comp, ".") == 0)
			continue;
		long next = open_component(fd, comp, dir, flags, err, errlen);
		if (next < 0) {
			rc = -errno;
			goto fail;
		}
		sys_close((int)fd);
		fd = next;
	}
	rc = check_dir((int)fd, dir, flags, mode, err, errlen);
	if (rc == 0) {
		errno = saved;
		return (int)fd;
	}
fail:
	sys_close((int)fd);
out:
	errno = saved;
	return rc;
}

int sp_tf_mkdir(const char *dir, char *err, size_t errlen)
{
	int fd = sp_tf_open_dir(dir, SP_TF_DIR_CREATE, NULL, err, errlen);
	if (fd < 0)
		return fd;
	sys_close(fd);
	return 0;
}

/* The descriptor of tf's directory, opened and checked again as sp_tf_open_dir does. */
int tf_open_own_dir(const struct sp_tf *tf)
{
	char dir[SP_TF_PATH_MAX], err[64];
	if (tf->name_off == 0 || tf->name_off > sizeof(dir)) {
		errno = ENOENT;
		return -1;
	}
	size_t n = tf->name_off - 1;
	memcpy(dir, tf->path, n);
	dir[n ? n : 1] = 0;
	if (n == 0)
		dir[0] = '/';
	int fd = sp_tf_open_dir(dir, tf->dir_flags & SP_TF_DIR_ANY_OWNER, NULL, err, sizeof(err));
	if (fd < 0) {
		errno = -fd;
		return -1;
	}
	return fd;
}

/*
 * The kernel's random pool mixed with the time and the pid: a pool with nothing
 * yet (GRND_NONBLOCK) still gives two jobs started at once different ids.
 */
void sp_tf_make_run_id(char *out)
{
	uint64_t r = 0;
	struct timespec ts;
	clock_gettime(CLOCK_REALTIME, &ts);
	if (syscall(SYS_getrandom, &r, sizeof(r), GRND_NONBLOCK) != (long)sizeof(r))
		r = 0;
	r ^= ((uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec) * 0x9e3779b97f4a7c15ull;
	uint64_t pid = (uint64_t)syscall(SYS_getpid);
	r ^= pid << 40 | pid;
	static const char hex[] = "0123456789abcdef";
	for (int i = 15; i >= 0; i--, r >>= 4)
		out[i] = hex[r & 15];
	out[16] = 0;
}

/*
 * The machine's online CPUs and the calling process's affinity (format 1.5).
 * The affinity through the raw syscall, into a mask of 8192 CPUs: the libc
 * wrapper may be interposed, and a mask smaller than the kernel's (nr_cpu_ids
 * over 1024) is refused with EINVAL; CPUs 0..1023 go into the header, the
 * count is of them all. Nothing is written where a call fails (0: unknown).
 */
static void header_cpus(struct sp_file_header *h)
{
	int saved = errno;
	long n = sysconf(_SC_NPROCESSORS_ONLN);
	h->online_cpus = n > 0 && n <= (long)UINT32_MAX ? (uint32_t)n : 0;
	uint64_t set[128];
	memset(set, 0, sizeof(set));
	long got = syscall(SYS_sched_getaffinity, 0, sizeof(set), set);
	if (got > 0) {
		uint32_t count = 0;
		for (size_t i = 0; i < sizeof(set) / sizeof(set[0]); i++)
			count += (uint32_t)__builtin_popcountll(set[i]);
		h->cpu_affinity_count = count;
		memcpy(h->cpu_affinity, set, sizeof(h->cpu_affinity));
	}
	errno = saved;
}

static void fill_header(struct sp_tf *tf, const struct sp_tf_opts *o)
{
	struct sp_file_header *h = tf->hdr;
	h->version_major = SP_VERSION_MAJOR;
	h->version_minor = SP_VERSION_MINOR;
	h->header_size = SP_HEADER_SIZE;
	h->endian = SP_ENDIAN_TAG;
	h->features = o->features;
	h->chunk_size = tf->chunk_size;
	h->ring_chunks = tf->ring_chunks;
	h->keep_slots = tf->keep_slots;
	h->file_size = tf->size;
	h->pid = o->pid ? o->pid : (int32_t)getpid();
	h->ppid = o->ppid ? o->ppid : (int32_t)getppid();
	h->rank = env_int("RANK");
	h->local_rank = env_int("LOCAL_RANK");
	h->world_size = env_int("WORLD_SIZE");
	/* the realtime read between two monotonic ones, paired with their midpoint */
	uint64_t m0 = mono_ns(CLOCK_MONOTONIC);
	uint64_t r = mono_ns(CLOCK_REALTIME);
	uint64_t m1 = mono_ns(CLOCK_MONOTONIC);
	h->start_mono_ns = m0 + (m1 - m0) / 2;
	h->start_real_ns = r;
	struct utsname u;
	if (uname(&u) == 0)
		snprintf(h->host, sizeof(h->host), "%.63s", u.nodename);
	if (o->cmdline)
		snprintf(h->cmdline, sizeof(h->cmdline), "%s", o->cmdline);
	else
		read_cmdline(h->cmdline, sizeof(h->cmdline));
	/* the caller's run id, else the job's from the environment (the eBPF collector's file) */
	const char *run = o->run_id ? o->run_id : getenv("STEPPROF_RUN_ID");
	if (sp_run_id_valid(run))
		snprintf(h->run_id, sizeof(h->run_id), "%s", run);
	if (o->cpus)
		header_cpus(h);
	h->ring_next_seq = 0;
	h->keep_next_slot = 0;
	/* the magic last: a reader that finds it finds a complete header */
	__atomic_thread_fence(__ATOMIC_RELEASE);
	memcpy(h->magic, SP_MAGIC, 8);
}

/*
 * The process's file size limit (RLIMIT_FSIZE, `ulimit -f`) as it is now; UINT64_MAX
 * when there is none. A write or a truncate that reaches past it is answered with
 * SIGXFSZ, whose default action kills the program: the trace file is made no
 * larger than the limit (sp_tf_create) and every reservation checks it first (the
 * program may lower it while it runs), so that stepprof's own writes never raise it.
 */
static uint64_t fsize_limit(void)
{
	struct rlimit r;
	if (getrlimit(RLIMIT_FSIZE, &r) != 0 || r.rlim_cur == RLIM_INFINITY)
		return UINT64_MAX;
	return (uint64_t)r.rlim_cur;
}

int under_fsize_limit(uint64_t off, uint64_t len)
{
	if (off + len <= fsize_limit())
		return 1;
	errno = EFBIG;
	return 0;
}

static void geometry(struct sp_tf *tf, uint64_t cap)
{
	if (cap < SP_TF_MIN_BYTES)
		cap = SP_TF_MIN_BYTES;
	tf->chunk_size = SP_TF_CHUNK_SIZE;
	/* NOTE: an eighth of the cap for strings, at most 64 MiB; space is reserved as used */
	uint64_t keep = cap / 8;
	if (keep > (64ull << 20))
		keep = 64ull << 20;
	keep &= ~(uint64_t)(SP_TF_CHUNK_SIZE - 1);
	uint64_t ring = (cap - SP_HEADER_SIZE - keep) / SP_TF_CHUNK_SIZE;
	if (ring > 0xffffffffull)
		ring = 0xffffffffull;
	tf->keep_slots = keep / SP_SLOT_SIZE;
	tf->ring_chunks = (uint32_t)ring;
	tf->keep_off = SP_HEADER_SIZE;
	tf->ring_off = SP_HEADER_SIZE + keep;
	tf->size = tf->ring_off + ring * SP_TF_CHUNK_SIZE;
}

/*
 * Move fd out of the way of the program's own descriptors: code that closes
 * "all fds from 3" or reuses low numbers is less likely to hit it.
 */
int high_fd(int fd)
{
	/* under a descriptor limit below 256 (ulimit -n), the top of the program's table */
	struct rlimit r;
	int top = getrlimit(RLIMIT_NOFILE, &r) == 0 && r.rlim_cur != RLIM_INFINITY && r.rlim_cur < 256 ?
			  (int)r.rlim_cur - 8 : 0;
	const int floors[] = {1000, 512, 256, top};
	for (unsigned i = 0; i < sizeof(floors) / sizeof(floors[0]); i++) {
		if (floors[i] <= fd)
			continue;
		long h = syscall(SYS_fcntl, fd, F_DUPFD_CLOEXEC, floors[i]);
		if (h >= 0) {
			sys_close(fd);
			return (int)h;
		}
	}
	return fd;
}

/* The name of the k-th file of pid (k = 0: <host>.<pid>.sptrace); -1 if it does not fit. */
static int file_name(char *name, size_t n, const char *host, int pid, unsigned long k)
{
	int len = k == 0 ? snprintf(name, n, "%s.%d%s", host, pid, SP_TF_SUFFIX)
			 : snprintf(name, n, "%s.%d.%lu%s", host, pid, k, SP_TF_SUFFIX);
	if (len < 0 || (size_t)len >= n) {
		errno = ENAMETOOLONG; /* a name cut short would be another file */
		return -1;
	}
	return 0;
}

static int name_taken(int dfd, char *name, size_t n, const char *host, int pid, unsigned long k)
{
	struct stat st;
	return file_name(name, n, host, pid, k) == 0 &&
	       syscall(SYS_newfstatat, dfd, name, &st, AT_SYMLINK_NOFOLLOW) == 0;
}

/*
 * A new file for pid: <host>.<pid>.sptrace, or the first free <host>.<pid>.<k>
 * when an earlier image of the same pid (a program that execs itself) has it.
 * The free k is found by doubling then halving over the names taken (they are
 * 1, 2, 3...: each image takes the next), a few look-ups whatever the number of
 * images, and no limit on their number (a program that execs itself in a loop).
 */
static long create_file(int dfd, char *name, size_t n, const char *host, int pid)
{
	unsigned long k = 0;
	for (int tries = 0; tries < 100; tries++) {
		if (file_name(name, n, host, pid, k) != 0)
			return -1;
		long fd = sys_openat(dfd, name, O_RDWR | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
		if (fd >= 0 || errno != EEXIST)
			return fd;
		if (tries == 0 && name_taken(dfd, name, n, host, pid, 1)) {
			/* names 1..lo are taken, hi is free (as far as the look-ups saw) */
			unsigned long lo = 1, hi = 2;
			while (hi < (1ul << 30) && name_taken(dfd, name, n, host, pid, hi))
				lo = hi, hi *= 2;
			while (hi - lo > 1) {
				unsigned long mid = lo + (hi - lo) / 2;
				if (name_taken(dfd, name, n, host, pid, mid))
					lo = mid;
				else
					hi = mid;
			}
			k = hi;
		} else {
			k++; /* taken meanwhile by another process of the same pid (another pid namespace) */
		}
	}
	return -1;
}

struct sp_tf_layout sp_tf_layout[SP_K__COUNT];

/* Idempotent: concurrent callers write the same bytes. */
void sp_tf_layout_init(void)
{
	for (unsigned k = 1; k < SP_K__COUNT; k++) {
		struct sp_tf_layout *l = &sp_tf_layout[k];
		unsigned n = 0, len = 0;
		for (unsigned i = 0; i < SP_F__COUNT; i++)
			if ((sp_kind_mask[k] >> i) & 1) {
				l->field[n++] = (uint8_t)i;
				len += sp_field_width[i];
			}
		l->nfields = (uint8_t)n;
		l->len = (uint8_t)len;
		l->nslots = (uint8_t)sp_slots_for_payload(len);
	}
}

void sp_tf_encode_payload(struct sp_slot *s, unsigned kind, const uint64_t *f)
{
	const struct sp_tf_layout *l = &sp_tf_layout[kind];
	uint8_t buf[SP_HEAD_PAYLOAD + 4 * SP_CONT_PAYLOAD + 16];
	unsigned off = 0;
	/* full 8-byte little-endian stores: the next field overwrites the excess */
	for (unsigned i = 0; i < l->nfields; i++) {
		memcpy(buf + off, &f[l->field[i]], 8);
		off += sp_field_width[l->field[i]];
	}
	memset(buf + off, 0, 16);
	sp_put_payload(s, l->nslots, buf, l->len);
}

void sp_tf_encode_any(struct sp_slot *s, unsigned kind, unsigned api, uint64_t begin_ns, uint64_t dur_ns,
		      const uint64_t *f)
{
	switch (kind) {
#define SP_KIND_CASE(K) sp_tf_encode_k(s, K, api, begin_ns, dur_ns, f)
#include "stepprof/kind_cases.h"
#undef SP_KIND_CASE
	default:
		break;
	}
}

int sp_tf_create(struct sp_tf *tf, const struct sp_tf_opts *o, char *err, size_t errlen)
{
	int saved = errno, rc, dfd = -1;
	sp_tf_layout_init();
	memset(tf, 0, sizeof(*tf));
	tf->fd = -1;
	tf->warn = o->warn;
	tf->prog = o->prog;
	tf->keep_fd = o->keep_fd;
	uint64_t limit = fsize_limit();
	if (limit < SP_TF_MIN_BYTES) {
		fmt(err, errlen,
		    "the file size limit (ulimit -f) is %llu bytes, below the %llu bytes of the smallest trace file",
		    (unsigned long long)limit, (unsigned long long)SP_TF_MIN_BYTES);
		errno = saved;
		return -EFBIG;
	}
	uint64_t cap = o->max_bytes < limit ? o->max_bytes : limit;
	/*
	 * The whole file is mapped, and a mapping counts against the address space
	 * limit (ulimit -v, RLIMIT_AS): a 1 GiB trace under a 1.4 GB limit left the
	 * program a MemoryError for 500 MB it could allocate without stepprof. Under
	 * such a limit the trace takes at most a sixteenth of it.
	 */
	struct rlimit as;
	if (getrlimit(RLIMIT_AS, &as) == 0 && as.rlim_cur != RLIM_INFINITY) {
		uint64_t share = (uint64_t)as.rlim_cur / SP_TF_AS_SHARE;
		if (share < SP_TF_MIN_BYTES) {
			fmt(err, errlen,
			    "the address space limit (ulimit -v) is %llu bytes: a trace file (at least %llu bytes, "
			    "mapped whole) may take a 16th of it, too little",
			    (unsigned long long)as.rlim_cur, (unsigned long long)SP_TF_MIN_BYTES);
			errno = saved;
			return -ENOMEM;
		}
		if (share < cap) {
			cap = share;
			char msg[300];
			fmt(msg, sizeof(msg),
			    "the address space limit (ulimit -v) is %llu bytes: the trace file is capped at a 16th "
			    "of it, %llu MiB",
			    (unsigned long long)as.rlim_cur, (unsigned long long)(cap >> 20));
			tf_warn(tf, "aslimit", msg);
		}
	}
	geometry(tf, cap);

	struct utsname u;
	char host[65] = "localhost";
	if (uname(&u) == 0 && u.nodename[0])
		snprintf(host, sizeof(host), "%s", u.nodename);
	for (char *c = host; *c; c++)
		if (*c == '/')
			*c = '_';
	int pid = o->pid ? o->pid : (int)getpid();

	tf->dir_flags = o->dir_flags & ~SP_TF_DIR_CREATE;
	dfd = sp_tf_open_dir(o->dir, o->dir_flags, &tf->dir_mode, err, errlen);
	if (dfd < 0) {
		rc = dfd;
		goto out;
	}
	char name[128];
	long fd = create_file(dfd, name, sizeof(name), host, pid);
	if (fd < 0) {
		rc = -errno;
		fmt(err, errlen, "cannot create a trace file in %s: %s", o->dir, strerror(errno));
		goto out;
	}
	/* the name, for messages and for a descriptor reopened in its directory (tf_open_own_dir) */
	size_t dl = strlen(o->dir);
	while (dl > 1 && o->dir[dl - 1] == '/')
		dl--;
	snprintf(tf->path, sizeof(tf->path), "%.*s/%s", (int)dl, o->dir, name);
	tf->name_off = (unsigned)(strlen(tf->path) - strlen(name));
	/* NOTE: not moved high unless kept: closed below, once the file is mapped */
	tf->fd = o->keep_fd ? high_fd((int)fd) : (int)fd;
	struct stat st;
	if (syscall(SYS_fstat, tf->fd, &st) != 0)
		goto fail;
	tf->dev = (uint64_t)st.st_dev;
	tf->ino = (uint64_t)st.st_ino;
	if (syscall(SYS_ftruncate, tf->fd, (off_t)tf->size) != 0)
		goto fail;
	tf->chunk_info = sys_mmap(NULL, (size_t)tf->ring_chunks * 4, PROT_READ | PROT_WRITE,
				  MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
	if (tf->chunk_info == MAP_FAILED) {
		tf->chunk_info = NULL;
		goto fail;
	}
	tf->base = sys_mmap(NULL, tf->size, PROT_READ | PROT_WRITE, MAP_SHARED, tf->fd, 0);
	if (tf->base == MAP_FAILED) {
		tf->base = NULL;
		goto fail;
	}
	/*
	 * RATIONALE: no readahead on this mapping. Its first fault (the header's
	 * page) otherwise made the kernel read ahead the file's hole: 8 MiB of
	 * zeroed page-cache pages per process (fincore), 2.7 ms of a `cat` that
	 * takes 1.9 ms without the preload (perf: page_cache_ra_order under
	 * sp_tf_create; Linux 6.18, ext4). Each page is written before it is read.
	 */
	syscall(SYS_madvise, tf->base, tf->size, MADV_RANDOM);
	tf->hdr = (struct sp_file_header *)tf->base;
	if (reserve_range(tf, 0, SP_HEADER_SIZE) != 0)
		goto fail;
	tf->keep_reserved = SP_HEADER_SIZE;
	fill_header(tf, o);
	/*
	 * RATIONALE: the mapping holds the file; a descriptor would hold a number
	 * of the program's table for the whole run (a job at its `ulimit -n`
	 * failed its last open). Space is reserved through the mapping (tf_space.c).
	 */
	if (!o->keep_fd) {
		sys_close(tf->fd);
		tf->fd = -1;
	}
	rc = 0;
	goto out;
fail:
	rc = -errno;
	fmt(err, errlen, "cannot create trace file %s: %s", tf->path, strerror(errno));
	syscall(SYS_unlinkat, dfd, tf->path + tf->name_off, 0);
	sp_tf_release(tf);
out:
	if (dfd >= 0)
		sys_close(dfd);
	errno = saved;
	return rc;
}

void sp_tf_finish(struct sp_tf *tf, uint64_t end_ns)
{
	if (tf->hdr)
		__atomic_store_n(&tf->hdr->end_mono_ns, end_ns, __ATOMIC_RELEASE);
}

int sp_tf_removed(const struct sp_tf *tf)
{
	int saved = errno;
	struct stat st;
	int gone;
	if (tf->fd >= 0)
		gone = syscall(SYS_fstat, tf->fd, &st) == 0 && (uint64_t)st.st_ino == tf->ino &&
		       (uint64_t)st.st_dev == tf->dev && st.st_nlink == 0;
	else /* no descriptor: the name no longer leads to the file */
		gone = tf->base && tf->path[0] &&
		       (syscall(SYS_newfstatat, AT_FDCWD, tf->path, &st, AT_SYMLINK_NOFOLLOW) != 0 ?
				(errno == ENOENT || errno == ENOTDIR) :
				(uint64_t)st.st_ino != tf->ino || (uint64_t)st.st_dev != tf->dev);
	errno = saved;
	return gone;
}

void sp_tf_release(struct sp_tf *tf)
{
	int saved = errno;
	if (tf->base)
		syscall(SYS_munmap, tf->base, tf->size);
	if (tf->chunk_info)
		syscall(SYS_munmap, tf->chunk_info, (size_t)tf->ring_chunks * 4);
	struct stat st;
	/* only if the number still names our file: the program may have reused it */
	if (tf->fd >= 0 && syscall(SYS_fstat, tf->fd, &st) == 0 && (uint64_t)st.st_ino == tf->ino &&
	    (uint64_t)st.st_dev == tf->dev)
		sys_close(tf->fd);
	tf->base = NULL;
	tf->hdr = NULL;
	tf->chunk_info = NULL;
	tf->fd = -1;
	errno = saved;
}

static void warn_nothing(const char *key, const char *msg)
{
	(void)key;
	(void)msg;
}

void sp_tf_orphan(struct sp_tf *tf)
{
	int saved = errno;
	tf->warn = warn_nothing; /* the interrupted code's reservations fail: the child said why once */
	/* NOTE: should this fail, that code's record lands in the parent's file: the bytes the parent writes there */
	if (tf->base)
		sys_mmap(tf->base, tf->size, PROT_READ | PROT_WRITE,
			 MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED | MAP_NORESERVE, -1, 0);
	struct stat st;
	if (tf->fd >= 0 && syscall(SYS_fstat, tf->fd, &st) == 0 && (uint64_t)st.st_ino == tf->ino &&
	    (uint64_t)st.st_dev == tf->dev)
		sys_close(tf->fd);
	tf->fd = -1;
	tf->path[0] = 0; /* nothing reopens the parent's file by its name (file_fd) */
	errno = saved;
}
