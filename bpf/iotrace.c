/*
 * iotrace.c - stepprof-bpf, the eBPF input collector: loads iotrace.bpf.c,
 * follows one process tree and writes its file opens, stats, reads, directory
 * listings and closes into a trace file of its own (format v1, SP_FEAT_BPF).
 *
 *   stepprof-bpf --pid PID -o DIR [--duration S] [--verbose]
 *
 * Prints "ready" on stdout once attached; exits 0 on SIGTERM/SIGINT/SIGHUP, after S
 * seconds, or when the whole traced tree has exited, having flushed its file.
 * When BPF cannot be used it prints one line with the reason on stderr and
 * exits 1 (`stepprof run` then falls back to the libc wrappers).
 *
 * Divided into:
 *   1. small tables: string interning, u64-keyed hash of pointers
 *   2. the traced processes: per-tgid fd -> path tables, cwd, writer streams
 *   3. events -> trace records
 *   4. main: open -> configure -> load -> attach -> poll, one cleanup label
 */
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <limits.h>
#include <signal.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>
#include <dirent.h>

#include <bpf/bpf.h>
#include <bpf/libbpf.h>

#include "stepprof/trace.h"
#include "tracefile.h"
#include "iotrace.h"
#include "iotrace.skel.h"

#define PROG	    "stepprof-bpf"
#define POLL_MS	    10	      /* ring drain period: events wait at most this long in the ring */
#define LIVENESS_MS 500	      /* how often the traced processes are checked for a missed exit */
#define MAX_FD	    (1 << 20) /* fd tables stop growing here (RLIMIT_NOFILE's usual hard cap) */

#ifndef SYS_dup2
#define SYS_dup2 (-1000) /* architectures without it (arm64) have only dup3; never a syscall number (nor -1) */
#endif

_Static_assert(IOTRACE_F_DUPFD == F_DUPFD && IOTRACE_F_DUPFD_CLOEXEC == F_DUPFD_CLOEXEC, "fcntl's dup commands");
_Static_assert(IOTRACE_O_ACCMODE == O_ACCMODE && IOTRACE_O_WRONLY == O_WRONLY && IOTRACE_O_TRUNC == O_TRUNC,
	       "the open flags of an output file");

static volatile sig_atomic_t stop;
static bool verbose;
static char libbpf_last[256]; /* libbpf's last warning: the reason of a failed load */

/* The id, api and record kind of each traced call (api_sys.def). */
static const long call_nr[IOTRACE_CALL__COUNT] = {
#define SP_API_SYS(id, nr, kind) [IOTRACE_##id] = SYS_##nr,
#include "stepprof/api_sys.def"
#undef SP_API_SYS
};
static const uint16_t call_api[IOTRACE_CALL__COUNT] = {
#define SP_API_SYS(id, nr, kind) [IOTRACE_##id] = SP_API_##id,
#include "stepprof/api_sys.def"
#undef SP_API_SYS
};
static const uint8_t call_kind[IOTRACE_CALL__COUNT] = {
#define SP_API_SYS(id, nr, kind) [IOTRACE_##id] = SP_K_##kind,
#include "stepprof/api_sys.def"
#undef SP_API_SYS
};

static void die_oom(void)
{
	fprintf(stderr, PROG ": out of memory\n");
	exit(1);
}

static void *xcalloc(size_t n, size_t sz)
{
	void *p = calloc(n ? n : 1, sz ? sz : 1);
	if (!p)
		die_oom();
	return p;
}

static uint64_t now_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

/* ------------------------------------------------------------ 1. tables */

/* Open addressing, linear probing, key 0 reserved as empty; grows at 1/2 load. */
struct umap {
	uint64_t *keys;
	void **vals;
	size_t cap, n;
};

static uint64_t mix64(uint64_t k)
{
	k ^= k >> 33;
	k *= 0xff51afd7ed558ccdull;
	k ^= k >> 33;
	return k;
}

static void **umap_slot(struct umap *m, uint64_t key, bool insert)
{
	if (insert && (m->n + 1) * 2 > m->cap) {
		struct umap g = {.cap = m->cap ? m->cap * 2 : 64};
		g.keys = xcalloc(g.cap, sizeof(*g.keys));
		g.vals = xcalloc(g.cap, sizeof(*g.vals));
		for (size_t i = 0; i < m->cap; i++)
			if (m->keys[i])
				*umap_slot(&g, m->keys[i], true) = m->vals[i];
		free(m->keys);
		free(m->vals);
		g.n = m->n;
		*m = g;
	}
	if (!m->cap)
		return NULL;
	for (size_t i = mix64(key) & (m->cap - 1);; i = (i + 1) & (m->cap - 1)) {
		if (m->keys[i] == key)
			return &m->vals[i];
		if (!m->keys[i]) {
			if (!insert)
				return NULL;
			m->keys[i] = key;
			m->n++;
			return &m->vals[i];
		}
	}
}

static void *umap_get(struct umap *m, uint64_t key)
{
	void **v = umap_slot(m, key, false);
	return v ? *v : NULL;
}

/* Remove by backward-shift deletion, so that probe chains stay whole. */
static void umap_del(struct umap *m, uint64_t key)
{
	if (!m->cap)
		return;
	size_t mask = m->cap - 1, i = mix64(key) & mask;
	while (m->keys[i] != key) {
		if (!m->keys[i])
			return;
		i = (i + 1) & mask;
	}
	m->n--;
	for (size_t j = (i + 1) & mask; m->keys[j]; j = (j + 1) & mask) {
		size_t home = mix64(m->keys[j]) & mask;
		/* j's entry may move to the hole i when its home is not within (i, j] cyclically. */
		if (((j - home) & mask) >= ((j - i) & mask)) {
			m->keys[i] = m->keys[j];
			m->vals[i] = m->vals[j];
			i = j;
		}
	}
	m->keys[i] = 0;
	m->vals[i] = NULL;
}

/*
 * Interned paths: each distinct string is written once to the trace's keep
 * area as a STRING record and referred to by id. Keyed by a 64-bit hash with
 * the string kept for the equality check (collisions chain by rehashing).
 */
struct interned {
	uint32_t id;
	uint32_t len;
	bool own; /* in the trace directory (see strtab.own) */
	char s[];
};

struct strtab {
	struct umap byhash;	/* hash -> struct interned * */
	struct interned **byid; /* id -> string, for joining a path to its directory fd's */
	uint32_t next_id, cap_id;
	struct sp_tf *tf;
	/*
	 * The trace directory (-o), absolute, as given and with symbolic links
	 * resolved: the preload writes its own trace file there (its open, its
	 * fstats), which is not the job's input.
	 */
	char *own[2];
};

/* path is the directory own, or under it ("/" is never own: the trace is not the whole machine) */
static bool under_dir(const char *path, size_t len, const char *own)
{
	size_t n = own ? strlen(own) : 0;
	return n > 1 && len >= n && !memcmp(path, own, n) && (len == n || path[n] == '/');
}

/* A word-at-a-time hash: paths are hashed once per event, so byte loops show in profiles. */
static uint64_t strhash(const char *s, size_t len, uint64_t seed)
{
	uint64_t h = 0x9e3779b97f4a7c15ull ^ (seed * 0xff51afd7ed558ccdull) ^ len;
	size_t i = 0;
	for (; i + 8 <= len; i += 8) {
		uint64_t w;
		memcpy(&w, s + i, 8);
		h = (h ^ mix64(w)) * 0x9e3779b97f4a7c15ull;
	}
	uint64_t w = 0;
	memcpy(&w, s + i, len - i);
	h = mix64(h ^ mix64(w ^ 0x5bd1e995));
	return h ? h : 1;
}

static uint32_t strtab_intern(struct strtab *t, const char *s, size_t len)
{
	if (len > SP_MAX_STRING)
		len = SP_MAX_STRING;
	for (uint64_t seed = 0;; seed++) {
		uint64_t h = strhash(s, len, seed);
		void **slot = umap_slot(&t->byhash, h, true);
		struct interned *e = *slot;
		if (e && e->len == len && !memcmp(e->s, s, len))
			return e->id;
		if (e)
			continue; /* a different string with this hash: next seed */
		uint32_t id = ++t->next_id;
		if (sp_tf_keep_string(t->tf, id, s, (unsigned)len)) {
			umap_del(&t->byhash, h); /* keep area full: record the path as unknown */
			t->next_id--;
			return 0;
		}
		e = malloc(sizeof(*e) + len);
		if (!e)
			die_oom();
		e->id = id;
		e->len = (uint32_t)len;
		e->own = under_dir(s, len, t->own[0]) || under_dir(s, len, t->own[1]);
		memcpy(e->s, s, len);
		*slot = e;
		if (id >= t->cap_id) {
			uint32_t n = t->cap_id ? t->cap_id * 2 : 1024;
			struct interned **b = realloc(t->byid, n * sizeof(*b));
			if (!b)
				die_oom();
			t->byid = b;
			t->cap_id = n;
		}
		t->byid[id] = e;
		return id;
	}
}

/* --------------------------------------------------------- 2. processes */

/*
 * The path of an fd opened for output (IOTRACE_F_OUTPUT): no record of it is
 * written, and its dups and a forked child's copy are output as well, as the
 * libc wrappers keep it (IO_W_OUTPUT). Never an interned id (strtab_get: none).
 */
#define PATH_OUTPUT UINT32_MAX

struct fdent {
	uint32_t path; /* interned path id, 0 = unknown, PATH_OUTPUT */
	uint64_t file; /* identity of the open file (kernel address), 0 = unknown (fds found in /proc) */
	uint64_t born; /* end_ns of the call that made it (0: found in /proc), for close_range */
};

/*
 * An fd whose close is still in flight when an open of another thread has
 * already been given the same number (events come in the order calls return,
 * see iotrace.h): the closed file's entry waits here for its close event (and
 * for reads that began before that close). A few suffice: each one needs a
 * close overtaken by an open, and leaves with the close.
 */
#define NDISPLACED 8
struct displaced {
	int32_t fd;
	uint32_t path;
	uint64_t file; /* never 0 */
};

struct proc {
	int32_t pid;
	bool alive;
	bool dead;	   /* found dead by check_liveness, removed after a last drain */
	char *cwd;	   /* NULL until first needed (or lost) */
	bool cwd_lost;	   /* the working directory is not known (see proc_lose_cwd) */
	bool libc_io;	   /* its libc wrappers record its file input into our directory (proc_check_libc_io) */
	struct fdent *fds; /* indexed by fd */
	uint32_t nfds;
	struct displaced displaced[NDISPLACED]; /* file == 0: free */
	unsigned next_displaced;		/* round robin: a lost close's entry is reused in time */
};

struct collector {
	struct sp_tf tf;
	struct strtab strings;
	struct umap procs;   /* tgid -> struct proc * */
	struct umap streams; /* (tgid << 32 | tid) -> struct sp_tf_stream * */
	uint64_t last_key;   /* the stream of the previous record */
	struct sp_tf_stream *last_stream;
	uint32_t nalive;
	uint64_t records;
	bool told_libc_io; /* the line of proc_check_libc_io was printed */
	struct umap held;  /* (tgid << 32 | tid) -> struct held *: an interrupted call, see on_call() */
};

static struct proc *proc_get(struct collector *c, int32_t pid, bool create)
{
	struct proc *p = umap_get(&c->procs, (uint32_t)pid);
	if (p || !create)
		return p;
	p = xcalloc(1, sizeof(*p));
	p->pid = pid;
	p->alive = true;
	*umap_slot(&c->procs, (uint32_t)pid, true) = p;
	c->nalive++;
	return p;
}

static void proc_set_fd(struct proc *p, int fd, uint32_t path, uint64_t file, uint64_t born)
{
	if (fd < 0 || fd >= MAX_FD)
		return;
	if ((uint32_t)fd >= p->nfds) {
		uint32_t n = p->nfds ? p->nfds : 64;
		while (n <= (uint32_t)fd)
			n *= 2;
		struct fdent *f = realloc(p->fds, n * sizeof(*f));
		if (!f)
			die_oom();
		memset(f + p->nfds, 0, (n - p->nfds) * sizeof(*f));
		p->fds = f;
		p->nfds = n;
	}
	p->fds[fd] = (struct fdent){.path = path, .file = file, .born = born};
}

/*
 * A call that returns the lowest free fd (open, dup) got fd. When our table
 * still holds another open file there, that file's close freed the number but
 * has not returned yet: keep its entry aside for its close (and late reads).
 */
static void proc_new_fd(struct proc *p, int fd, uint32_t path, uint64_t file, uint64_t born)
{
	if (fd >= 0 && (uint32_t)fd < p->nfds) {
		struct fdent *old = &p->fds[fd];
		if (old->path && old->file && file && old->file != file) {
			p->displaced[p->next_displaced] =
			    (struct displaced){.fd = fd, .path = old->path, .file = old->file};
			p->next_displaced = (p->next_displaced + 1) % NDISPLACED;
		}
	}
	proc_set_fd(p, fd, path, file, born);
}

static struct displaced *proc_displaced(struct proc *p, int fd, uint64_t file)
{
	for (int i = 0; file && i < NDISPLACED; i++)
		if (p->displaced[i].file == file && p->displaced[i].fd == fd)
			return &p->displaced[i];
	return NULL;
}

/*
 * The path of fd as a call that saw open file `file` on it (0: not known)
 * means it. The table's entry when it is that file, or either identity is
 * unknown; a displaced entry when the number was reused meanwhile; else 0.
 */
static uint32_t fd_path(struct proc *p, int fd, uint64_t file)
{
	struct fdent *ent = p && fd >= 0 && (uint32_t)fd < p->nfds ? &p->fds[fd] : NULL;
	struct displaced *d;
	if (!p || fd < 0)
		return 0;
	if (ent && ent->path && file && ent->file == file)
		return ent->path;
	if ((d = proc_displaced(p, fd, file)))
		return d->path;
	if (ent && ent->path && (!file || !ent->file)) {
		if (file)
			ent->file = file; /* an fd from /proc: learn its identity */
		return ent->path;
	}
	return 0;
}

/* fd was closed, and it held open file `file`: forget that file, never a newer one on the same number. */
static void fd_closed(struct proc *p, int fd, uint64_t file)
{
	struct fdent *ent = fd >= 0 && (uint32_t)fd < p->nfds ? &p->fds[fd] : NULL;
	struct displaced *d;
	if (ent && file && ent->file == file)
		*ent = (struct fdent){0};
	else if ((d = proc_displaced(p, fd, file)))
		*d = (struct displaced){0};
	else if (ent && (!file || !ent->file))
		*ent = (struct fdent){0};
}

/*
 * close_range(first, last) returned: its fds are closed, with no close event
 * each. An entry made by a call that returned after close_range began may be
 * a new file on a number close_range had already freed (another thread's
 * open, as for close above): kept.
 */
static void proc_closed_range(struct proc *p, int32_t first, uint32_t last, uint64_t begin_ns)
{
	if (first < 0)
		return;
	for (uint32_t fd = (uint32_t)first; fd < p->nfds && fd <= last; fd++)
		if (p->fds[fd].born < begin_ns)
			p->fds[fd] = (struct fdent){0};
}

/* exec closed the close-on-exec fds: forget every fd below `covered` whose bit is clear in the bitmap. */
static void proc_execed(struct proc *p, const uint8_t *open_fds, uint32_t covered)
{
	for (uint32_t fd = 0; fd < p->nfds && fd < covered; fd++)
		if (!(open_fds[fd / 8] & (1u << (fd % 8))))
			p->fds[fd] = (struct fdent){0};
	/* exec killed the threads whose closes they waited for */
	for (int i = 0; i < NDISPLACED; i++)
		if (p->displaced[i].fd >= 0 && (uint32_t)p->displaced[i].fd < covered)
			p->displaced[i] = (struct displaced){0};
}

/* The fds a process already has when tracing starts, from /proc (best effort). */
static void proc_scan_fds(struct collector *c, struct proc *p)
{
	char dir[64], link[PATH_MAX + 64], target[PATH_MAX];
	snprintf(dir, sizeof(dir), "/proc/%d/fd", p->pid);
	DIR *d = opendir(dir);
	if (!d)
		return;
	for (struct dirent *de; (de = readdir(d));) {
		char *end;
		long fd = strtol(de->d_name, &end, 10);
		if (*end || end == de->d_name)
			continue;
		snprintf(link, sizeof(link), "%s/%s", dir, de->d_name);
		ssize_t n = readlink(link, target, sizeof(target) - 1);
		if (n > 0 && target[0] == '/')
			proc_set_fd(p, (int)fd, strtab_intern(&c->strings, target, (size_t)n), 0, 0);
	}
	closedir(d);
}

/*
 * The working directory, for relative paths. Read once per process from /proc
 * (at its first relative path, or at start for the traced process), inherited
 * at fork, followed through chdir and fchdir. NULL when not known.
 */
static const char *proc_cwd(struct proc *p)
{
	if (!p->cwd && !p->cwd_lost) {
		char link[64], target[PATH_MAX];
		snprintf(link, sizeof(link), "/proc/%d/cwd", p->pid);
		ssize_t n = readlink(link, target, sizeof(target) - 1);
		if (n <= 0)
			return NULL;
		target[n] = 0;
		p->cwd = strdup(target);
	}
	return p->cwd;
}

static void proc_set_cwd(struct proc *p, const char *dir, size_t len)
{
	free(p->cwd);
	p->cwd = strndup(dir, len);
	p->cwd_lost = false;
}

/*
 * A chdir or fchdir to a directory whose path we do not know (cut, unreadable,
 * relative to an unknown base): relative paths are then recorded as given, not
 * made absolute with the directory the process has left. NOTE: /proc/PID/cwd
 * is not read again: by the time the loader sees the event the process may
 * have moved on, or exited.
 */
static void proc_lose_cwd(struct proc *p)
{
	free(p->cwd);
	p->cwd = NULL;
	p->cwd_lost = true;
}

static size_t path_normalize(char *s, size_t len);

/* Whether the variable NAME= of the NUL-separated environment env[0..len) is set; *val its value. */
static bool env_get(const char *env, size_t len, const char *name, const char **val)
{
	size_t n = strlen(name);
	for (const char *e = env; e < env + len; e += strlen(e) + 1)
		if (!strncmp(e, name, n) && e[n] == '=') {
			*val = e + n + 1;
			return true;
		}
	return false;
}

/* The environment process pid started with (/proc/PID/environ), NUL-separated, malloc'd; NULL when unreadable. */
static char *env_read(int32_t pid, size_t *len)
{
	char path[64];
	size_t cap = 1 << 16;
	char *env = malloc(cap);
	ssize_t n;

	*len = 0;
	snprintf(path, sizeof(path), "/proc/%d/environ", pid);
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0 || !env) {
		free(env);
		if (fd >= 0)
			close(fd);
		return NULL;
	}
	while ((n = read(fd, env + *len, cap - *len - 1)) > 0) {
		*len += (size_t)n;
		if (*len + 1 == cap) {
			char *g = realloc(env, cap * 2);
			if (!g)
				break;
			env = g;
			cap *= 2;
		}
	}
	close(fd);
	env[*len] = 0;
	return env;
}

/* Is dir (relative: to p's working directory, as hook_init.c takes it) our trace directory? */
static bool is_own_dir(struct collector *c, struct proc *p, const char *dir)
{
	char abs[PATH_MAX + 2];
	const char *cwd = dir[0] == '/' ? NULL : proc_cwd(p);
	bool own = false;

	if (dir[0] != '/' && !cwd)
		return false;
	int m = snprintf(abs, sizeof(abs), "%s%s%s", cwd ? cwd : "", cwd ? "/" : "", dir);
	if (m <= 0 || (size_t)m >= sizeof(abs))
		return false;
	size_t l = path_normalize(abs, (size_t)m);
	char *real = realpath(abs, NULL);
	for (int i = 0; i < 2; i++) {
		const char *d = c->strings.own[i];
		own |= d && ((l == strlen(d) && !memcmp(abs, d, l)) || (real && !strcmp(real, d)));
	}
	free(real);
	return own;
}

/*
 * Does process p record its file input itself, into our trace directory?
 * libstepprof.so in its LD_PRELOAD, STEPPROF_IO neither bpf nor off, not
 * STEPPROF_DISABLE'd, and STEPPROF_DIR our -o: its open/stat/read/close
 * records (and its reads of pipes, loader waits) are in the directory
 * already, and ours would count each of those calls twice. Its records are
 * then not written (its fd and directory tables are kept). Read from
 * /proc/PID/environ, the environment its program started with (what the
 * preload read) at the start; at each exec, the environment the kernel side
 * sends (IOTRACE_EV_ENV; given, given_len), /proc's when it was cut.
 * RATIONALE: the wrappers stand down only when told STEPPROF_IO=bpf at the
 * start, which `stepprof run --bpf` does; a collector started by hand on a
 * job run with LD_PRELOAD cannot tell them, so it stands down itself (before:
 * 24 opens in the directory for the 12 made).
 */
static void proc_check_libc_io(struct collector *c, struct proc *p, const char *given, size_t given_len)
{
	const char *preload, *io, *off, *dir;
	size_t len = given_len;
	char *read = given ? NULL : env_read(p->pid, &len);
	const char *env = given ? given : read;

	p->libc_io =
	    env && env_get(env, len, "LD_PRELOAD", &preload) && strstr(preload, "libstepprof") &&
	    !(env_get(env, len, "STEPPROF_IO", &io) && (!strcmp(io, "bpf") || !strcmp(io, "off"))) &&
	    !(env_get(env, len, "STEPPROF_DISABLE", &off) &&
	      (!strcmp(off, "1") || !strcasecmp(off, "yes") || !strcasecmp(off, "on") || !strcasecmp(off, "true"))) &&
	    env_get(env, len, "STEPPROF_DIR", &dir) && dir[0] && is_own_dir(c, p, dir);
	if (p->libc_io && !c->told_libc_io) {
		c->told_libc_io = true;
		fprintf(stderr,
			PROG ": process %d (and any like it) records its file input with libstepprof.so into %s: "
			     "not recorded here as well (STEPPROF_IO=bpf makes the wrappers stand down)\n",
			p->pid, dir);
	}
	free(read);
}

static void proc_forked(struct collector *c, int32_t parent, int32_t child)
{
	struct proc *pp = proc_get(c, parent, false);
	struct proc *cp = proc_get(c, child, true);
	if (!pp)
		return;
	/* The child starts with a copy of its parent's descriptors and directory. */
	if (pp->nfds && !cp->nfds) {
		cp->fds = xcalloc(pp->nfds, sizeof(*cp->fds));
		memcpy(cp->fds, pp->fds, pp->nfds * sizeof(*cp->fds));
		cp->nfds = pp->nfds;
	}
	if (pp->cwd && !cp->cwd)
		cp->cwd = strdup(pp->cwd);
	cp->libc_io = pp->libc_io; /* the same program and environment */
	cp->cwd_lost = pp->cwd_lost && !cp->cwd;
}

static void stream_close(struct collector *c, uint64_t key)
{
	struct sp_tf_stream *s = umap_get(&c->streams, key);
	if (!s)
		return;
	c->last_stream = NULL;
	sp_tf_stream_close(s);
	umap_del(&c->streams, key);
	free(s);
}

static void proc_exited(struct collector *c, struct proc *p)
{
	if (!p->alive)
		return;
	p->alive = false;
	c->nalive--;
	/* Close every stream of the process: its chunks become CLOSED for readers. */
	for (size_t i = 0; i < c->streams.cap; i++) {
		uint64_t k = c->streams.keys[i];
		if (k && (int32_t)(k >> 32) == p->pid) {
			stream_close(c, k);
			i--; /* backward-shift deletion may have moved another entry into slot i */
		}
	}
	umap_del(&c->procs, (uint32_t)p->pid);
	free(p->cwd);
	free(p->fds);
	free(p);
}

static struct sp_tf_stream *stream_get(struct collector *c, int32_t pid, int32_t tid)
{
	uint64_t key = (uint64_t)(uint32_t)pid << 32 | (uint32_t)tid;
	if (c->last_stream && key == c->last_key)
		return c->last_stream; /* a thread's calls come in runs */
	void **slot = umap_slot(&c->streams, key, true);
	if (!*slot) {
		struct sp_tf_stream *s = xcalloc(1, sizeof(*s));
		sp_tf_stream_init(s, &c->tf, pid, tid);
		*slot = s;
	}
	c->last_key = key;
	c->last_stream = *slot;
	return *slot;
}

/*
 * The fields of a /proc/.../stat file after the command's name, from the ')'
 * that ends it (the name may hold anything, ')' included): " S ppid ...",
 * in buf; NULL when it cannot be read.
 */
static const char *stat_fields(const char *stat_path, char *buf, size_t len)
{
	int fd = open(stat_path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return NULL;
	ssize_t n = read(fd, buf, len - 1);
	close(fd);
	if (n <= 0)
		return NULL;
	buf[n] = 0;
	return strrchr(buf, ')');
}

/* A thread (its /proc/.../stat) is gone: no entry, or a zombie (exited, not yet reaped). */
static bool task_dead(const char *stat_path)
{
	char buf[256];
	const char *rp = stat_fields(stat_path, buf, sizeof(buf));
	return !rp || rp[1] != ' ' || rp[2] == 'Z' || rp[2] == 'X';
}

/*
 * A process is gone when none of its threads is left. The leader's state alone
 * does not say: a main thread that called pthread_exit is a zombie ('Z' in
 * /proc/PID/stat and /proc/PID/status) while the other threads work on, for as
 * long as they do (measured: then Threads: 2, /proc/PID/task lists the zombie
 * leader and the live thread; once the last one has exited, only the zombie
 * leader). Taking that for the end stopped the collector within 500 ms of the
 * main thread's exit. So a zombie leader sends us to /proc/PID/task, which only
 * a process that is ending (or such a job) costs.
 */
static bool pid_dead(int32_t pid)
{
	char path[64], tpath[64 + 256 + 8]; /* + d_name + "/stat" */
	snprintf(path, sizeof(path), "/proc/%d/stat", pid);
	if (!task_dead(path))
		return false;
	snprintf(path, sizeof(path), "/proc/%d/task", pid);
	DIR *d = opendir(path);
	if (!d)
		return true;
	bool dead = true;
	for (struct dirent *de; dead && (de = readdir(d));) {
		if (de->d_name[0] == '.')
			continue;
		snprintf(tpath, sizeof(tpath), "%s/%s/stat", path, de->d_name);
		dead = task_dead(tpath);
	}
	closedir(d);
	return dead;
}

/* The parent of process pid (field 4 of /proc/PID/stat), 0 when it cannot be read. */
static int32_t proc_ppid(int32_t pid)
{
	char path[64], buf[512];
	snprintf(path, sizeof(path), "/proc/%d/stat", pid);
	const char *rp = stat_fields(path, buf, sizeof(buf));
	int ppid = 0;
	char state;
	if (!rp || sscanf(rp + 1, " %c %d", &state, &ppid) != 2)
		return 0;
	return ppid;
}

/*
 * The process of thread id tid (the Tgid of /proc/TID/status): tid itself for
 * a process's main thread, and when it cannot be read.
 * RATIONALE: /proc/TID exists for every thread, though not listed, so a
 * thread's id passes for a pid; the kernel side filters by process id, and
 * given a thread's id the collector recorded nothing.
 */
static int32_t thread_group(int32_t tid)
{
	char path[64], line[128];
	int tgid = 0;
	snprintf(path, sizeof(path), "/proc/%d/status", tid);
	FILE *f = fopen(path, "re");
	if (!f)
		return tid;
	while (fgets(line, sizeof(line), f))
		if (sscanf(line, "Tgid: %d", &tgid) == 1)
			break;
	fclose(f);
	return tgid > 0 ? tgid : tid;
}

/*
 * The descendants the traced process already has when tracing starts (a
 * trainer's running DataLoader workers, and their children): traced as if
 * their forks had been seen. Called once the programs are attached, so that
 * every fork of a process from the moment it is in the traced map is
 * followed by the kernel side; a pass over /proc finds the children of the
 * processes known so far, and passes go on until one finds none (a child
 * forked by a process just before we added it is found by the next pass).
 * RATIONALE: before, only --pid itself was traced: started by hand on a
 * running job, the collector recorded none of its workers' reads. A process
 * whose parent exited before this scan (reparented) is not found.
 */
static void trace_descendants(struct collector *c, struct bpf_map *traced)
{
	/*
	 * Never the collector itself nor its ancestors (`stepprof-bpf --pid $$`
	 * from a shell, `sudo` in between): a process started before the attach
	 * is only traced when it is the job's, and they are not.
	 */
	int32_t self[64];
	int nself = 0;
	for (int32_t a = (int32_t)getpid(); a > 1 && nself < 64; a = proc_ppid(a))
		self[nself++] = a;

	uint8_t one = 1;
	for (bool added = true; added;) {
		added = false;
		DIR *d = opendir("/proc");
		if (!d)
			return;
		for (struct dirent *de; (de = readdir(d));) {
			char *end;
			long pid = strtol(de->d_name, &end, 10);
			if (*end || end == de->d_name || pid <= 0 || pid > INT_MAX || proc_get(c, (int32_t)pid, false))
				continue;
			int k = 0;
			while (k < nself && self[k] != (int32_t)pid)
				k++;
			if (k < nself)
				continue;
			int32_t ppid = proc_ppid((int32_t)pid);
			struct proc *pp = ppid > 0 ? proc_get(c, ppid, false) : NULL;
			if (!pp)
				continue;
			uint32_t key = (uint32_t)pid;
			if (bpf_map__update_elem(traced, &key, sizeof(key), &one, sizeof(one), BPF_ANY))
				continue; /* the map is full: as a fork the kernel side could not follow */
			if (pid_dead((int32_t)pid)) {
				/* exited meanwhile: its exit, before it was in the map, removed nothing */
				bpf_map__delete_elem(traced, &key, sizeof(key), 0);
				continue;
			}
			struct proc *p = proc_get(c, (int32_t)pid, true);
			proc_scan_fds(c, p);
			proc_cwd(p); /* now, while it is alive (as for --pid) */
			proc_check_libc_io(c, p, NULL, 0);
			added = true;
		}
		closedir(d);
	}
}

/* ------------------------------------------------------------- 3. events */

/*
 * An absolute path (s[0] == '/') made lexically normal in place: repeated
 * slashes, "." and ".." components resolved by name, as `realpath -s` does
 * (a ".." after a symbolic link goes back to the link's directory, not its
 * target's: the loader cannot look at the file system as the process saw it).
 * Returns the new length; s is NUL-terminated when it shrank.
 * RATIONALE: the working directory was kept as text, so chdir("sub") then
 * chdir("..") 100 times gave 101 names for 2 files (".../sub/../sub/../...").
 */
static size_t path_normalize(char *s, size_t len)
{
	size_t w = 0, r = 0;
	while (r < len) {
		while (r < len && s[r] == '/')
			r++;
		size_t start = r;
		while (r < len && s[r] != '/')
			r++;
		size_t n = r - start;
		if (n == 0 || (n == 1 && s[start] == '.'))
			continue;
		if (n == 2 && s[start] == '.' && s[start + 1] == '.') {
			while (w > 0 && s[w - 1] != '/')
				w--;
			if (w > 0)
				w--; /* the component's slash; ".." of "/" is "/" */
			continue;
		}
		/* w < start: each component written takes at least the bytes it was read from */
		s[w++] = '/';
		memmove(s + w, s + start, n);
		w += n;
	}
	if (w == 0)
		s[w++] = '/';
	if (w < len)
		s[w] = 0;
	return w;
}

/* Whether path_normalize would change an absolute path (the common case: no). */
static bool path_is_normal(const char *s, size_t len)
{
	if (len > 1 && s[len - 1] == '/')
		return false;
	for (const char *p = s; (p = memchr(p, '/', len - (size_t)(p - s))) && p + 1 < s + len; p++)
		if (p[1] == '/' || (p[1] == '.' && (p + 2 == s + len || p[2] == '/' ||
						    (p[2] == '.' && (p + 3 == s + len || p[3] == '/')))))
			return false;
	return true;
}

/* The string of an interned id, NULL when unknown. */
static const struct interned *strtab_get(const struct strtab *t, uint32_t id)
{
	return id && id <= t->next_id ? t->byid[id] : NULL;
}

/*
 * The absolute form of a path given relative to dirfd (AT_FDCWD or a directory
 * fd) into out; the path as given when its base is unknown. Returns the length,
 * 0 when the result would be longer than a trace string (a cut name would be a
 * wrong one).
 */
static size_t abs_path(struct collector *c, struct proc *p, int dirfd, uint64_t dirfile, const char *path, size_t len,
		       char *out, size_t outlen)
{
	const char *base = NULL;
	size_t blen = 0;
	if (path[0] != '/') {
		if (dirfd == AT_FDCWD) {
			base = proc_cwd(p);
			blen = base ? strlen(base) : 0;
		} else {
			const struct interned *e = strtab_get(&c->strings, fd_path(p, dirfd, dirfile));
			if (e) {
				base = e->s;
				blen = e->len;
			}
		}
	}
	int n;
	if (base)
		n = snprintf(out, outlen, "%.*s%s%.*s", (int)blen, base, blen == 1 && base[0] == '/' ? "" : "/",
			     (int)len, path);
	else
		n = snprintf(out, outlen, "%.*s", (int)len, path);
	if (n < 0 || (size_t)n >= outlen)
		return 0;
	if (out[0] == '/')
		n = (int)path_normalize(out, (size_t)n);
	return (size_t)n > SP_MAX_STRING ? 0 : (size_t)n;
}

static uint32_t path_id(struct collector *c, struct proc *p, int dirfd, uint64_t dirfile, const char *path, size_t len)
{
	char buf[PATH_MAX + IOTRACE_PATH_MAX + 2];
	if (len == 0)
		return 0;
	if (path[0] == '/' && path_is_normal(path, len))
		return strtab_intern(&c->strings, path, len);
	len = abs_path(c, p, dirfd, dirfile, path, len, buf, sizeof(buf));
	return len ? strtab_intern(&c->strings, buf, len) : 0;
}

/* chdir, fchdir and the dup family: no record, but the tables must follow them. */
static void on_bookkeeping(struct collector *c, struct proc *p, const struct iotrace_event *e, size_t plen)
{
	char buf[PATH_MAX + IOTRACE_PATH_MAX + 2];
	const struct interned *s;
	size_t n;

	if (e->ret < 0)
		return;
	switch (e->call) {
	case IOTRACE_sys_chdir:
		/* plen 0: a path cut or unreadable (IOTRACE_F_PATH_*): the directory is not known */
		n = plen ? abs_path(c, p, AT_FDCWD, 0, e->path, plen, buf, sizeof(buf)) : 0;
		if (n && buf[0] == '/')
			proc_set_cwd(p, buf, n);
		else
			proc_lose_cwd(p);
		break;
	case IOTRACE_sys_fchdir:
		s = strtab_get(&c->strings, fd_path(p, e->fd, e->file));
		if (s)
			proc_set_cwd(p, s->s, s->len);
		else
			proc_lose_cwd(p); /* an fd of unknown path (received over SCM_RIGHTS...): not the old cwd */
		break;
	case IOTRACE_sys_dup:
	case IOTRACE_sys_fcntl: /* F_DUPFD, F_DUPFD_CLOEXEC: the kernel side traces no other command */
		/* Every dup returns the new descriptor; dup's (and F_DUPFD's, from its floor up) is the
		 * lowest free one, as an open's. */
		proc_new_fd(p, (int)e->ret, fd_path(p, e->fd, e->file), e->nfile, e->end_ns);
		break;
	case IOTRACE_sys_dup2:
	case IOTRACE_sys_dup3:
		/* The kernel closes what newfd held: overwritten, not displaced. */
		proc_set_fd(p, (int)e->ret, fd_path(p, e->fd, e->file), e->nfile, e->end_ns);
		break;
	case IOTRACE_sys_close_range: /* without CLOSE_RANGE_CLOEXEC (the kernel side traces no other) */
		proc_closed_range(p, e->fd, (uint32_t)e->bytes, e->begin_ns);
		break;
	}
}

/*
 * A size into the 5-byte bytes field: saturated at its largest value
 * (1 TiB - 1), as the libc wrappers do, not cut to its low bytes (the st_size
 * of a 1100 GiB file was 81,604,378,624).
 */
static uint64_t bytes_of(uint64_t v)
{
	const uint64_t max = (1ull << (8 * sp_field_width[SP_F_BYTES])) - 1;
	return v < max ? v : max;
}

static int16_t result_of(int64_t ret)
{
	return ret < 0 ? (int16_t)(ret < -32768 ? -32768 : ret) : 0;
}

/* The record of call event e, from begin_ns (the first part's, for a restarted call) with result ret. */
static void record_call(struct collector *c, const struct iotrace_event *e, size_t size, uint64_t begin_ns, int64_t ret)
{
	struct proc *p = proc_get(c, (int32_t)e->pid, false);
	if (!p)
		p = proc_get(c, (int32_t)e->pid, true); /* an event from before a lost fork */
	uint64_t f[SP_F__COUNT] = {0};
	unsigned kind = call_kind[e->call];
	size_t plen = size - IOTRACE_EVENT_HDR; /* the path's bytes, NUL included (see iotrace.h) */
	if (plen > IOTRACE_PATH_MAX || (plen && e->path[plen - 1]))
		plen = 0;
	if (plen)
		plen--; /* the NUL */
	if (e->flags & (IOTRACE_F_PATH_CUT | IOTRACE_F_PATH_FAULT))
		plen = 0; /* no name rather than a wrong one: the first 511 bytes name another file */

	if (kind == SP_K_NONE) {
		on_bookkeeping(c, p, e, plen);
		return;
	}
	f[SP_F_SOURCE] = SP_SOURCE_BPF;
	f[SP_F_RESULT] = (uint64_t)(int64_t)result_of(ret);
	f[SP_F_FD] = (uint64_t)(int64_t)e->fd;
	f[SP_F_FD_TYPE] = e->fd_type < SP_FDTYPE__COUNT ? e->fd_type : SP_FDTYPE_OTHER;

	switch (kind) {
	case SP_K_OPEN:
		if (e->flags & IOTRACE_F_OUTPUT) {
			/* an output file: no record, its fd kept out of the input (PATH_OUTPUT) */
			if (ret >= 0)
				proc_new_fd(p, (int)ret, PATH_OUTPUT, e->nfile, e->end_ns);
			return;
		}
		f[SP_F_PATH] = path_id(c, p, e->fd, e->file, e->path, plen);
		f[SP_F_FD] = (uint64_t)(int64_t)(ret >= 0 ? ret : -1);
		if (ret >= 0)
			proc_new_fd(p, (int)ret, (uint32_t)f[SP_F_PATH], e->nfile, e->end_ns);
		break;
	case SP_K_STAT:
		if (e->call == IOTRACE_sys_newfstat || (e->flags & IOTRACE_F_EMPTY_PATH)) {
			f[SP_F_PATH] = fd_path(p, e->fd, e->file);
		} else {
			f[SP_F_PATH] = path_id(c, p, e->fd, e->file, e->path, plen);
			f[SP_F_FD] = (uint64_t)-1;
		}
		f[SP_F_BYTES] = bytes_of(e->bytes);
		break;
	case SP_K_READ:
		f[SP_F_PATH] = fd_path(p, e->fd, e->file);
		f[SP_F_BYTES] = bytes_of(e->bytes);
		/* As the libc wrappers do: a read on a pipe or socket is waiting for a loader worker's data. */
		if (e->fd_type == IOTRACE_FD_PIPE || e->fd_type == IOTRACE_FD_SOCKET)
			kind = SP_K_LOADER_WAIT;
		break;
	case SP_K_LISTDIR:
		f[SP_F_PATH] = fd_path(p, e->fd, e->file);
		f[SP_F_COUNT] = e->bytes;
		break;
	case SP_K_CLOSE:
		f[SP_F_PATH] = fd_path(p, e->fd, e->file);
		/* Even a failed close frees the fd (Linux), unless it was not open (EBADF: e->file is 0 then). */
		if (ret == 0 || e->file)
			fd_closed(p, e->fd, e->file);
		break;
	}
	if (f[SP_F_PATH] == PATH_OUTPUT)
		return; /* an fstat, read or close of an output file's fd */
	const struct interned *path = strtab_get(&c->strings, (uint32_t)f[SP_F_PATH]);
	if (path && path->own)
		return; /* the preload's trace file: stepprof's output, not the job's input */
	if (p->libc_io)
		return; /* recorded by its libc wrappers (proc_check_libc_io) */
	struct sp_tf_stream *s = stream_get(c, (int32_t)e->pid, (int32_t)e->tid);
	if (sp_tf_write(s, kind, call_api[e->call], begin_ns, e->end_ns, f) == 0)
		c->records++;
}

/*
 * Calls interrupted by a signal. Their exit event has the kernel's internal
 * result (-ERESTARTSYS...), and what follows is decided after it, when the
 * signal is delivered: the program gets -EINTR (a handler without SA_RESTART:
 * an IOTRACE_EV_EINTR event then comes), or the kernel runs the same call
 * again and the thread's next event is its restart. The interrupted part is
 * held here, per thread, until one of them comes: a restart (the same call on
 * the same fd, same path) is recorded as one call from the first entry to the
 * last exit, with the last result, as the libc wrappers record it; anything
 * else records the interrupted part with -EINTR (also when the thread exits,
 * and at the end of the run). A handler's own traced calls between the two
 * parts of a restarted call make the first part an -EINTR record of its own.
 */
struct held {
	uint64_t begin_ns; /* the first part's entry (an interrupted restart carries it on) */
	size_t size;
	struct iotrace_event e;
};

static bool interrupted(int64_t ret)
{
	return ret == -IOTRACE_ERESTARTSYS || ret == -IOTRACE_ERESTARTNOINTR || ret == -IOTRACE_ERESTARTNOHAND ||
	       ret == -IOTRACE_ERESTART_RESTARTBLOCK;
}

/* The held call of thread key, recorded with -EINTR: it was not restarted. */
static void held_flush(struct collector *c, uint64_t key)
{
	struct held *h = umap_get(&c->held, key);
	if (!h)
		return;
	umap_del(&c->held, key);
	record_call(c, &h->e, h->size, h->begin_ns, -EINTR);
	free(h);
}

/* Every held call of process pid (pid < 0: of every process). */
static void held_flush_pid(struct collector *c, int32_t pid)
{
	for (size_t i = 0; c->held.n && i < c->held.cap; i++) {
		uint64_t k = c->held.keys[i];
		if (k && (pid < 0 || (int32_t)(k >> 32) == pid)) {
			held_flush(c, k);
			i--; /* backward-shift deletion may have moved another entry into slot i */
		}
	}
}

static void on_call(struct collector *c, const struct iotrace_event *e, size_t size)
{
	uint64_t key = (uint64_t)e->pid << 32 | e->tid, begin_ns = e->begin_ns;
	struct held *h;

	if (e->call >= IOTRACE_CALL__COUNT)
		return;
	if (c->held.n && (h = umap_get(&c->held, key))) {
		if (h->e.call == e->call && h->e.fd == e->fd && h->size == size &&
		    !memcmp(h->e.path, e->path, size - IOTRACE_EVENT_HDR)) {
			begin_ns = h->begin_ns; /* its restart */
			umap_del(&c->held, key);
			free(h);
		} else {
			held_flush(c, key);
		}
	}
	if (interrupted(e->ret) && call_kind[e->call] != SP_K_NONE) {
		h = malloc(sizeof(*h));
		if (h) {
			h->begin_ns = begin_ns;
			h->size = size;
			memcpy(&h->e, e, size);
			*umap_slot(&c->held, key, true) = h;
			return;
		}
	}
	record_call(c, e, size, begin_ns, interrupted(e->ret) ? -EINTR : e->ret);
}

static void on_event(struct collector *c, const void *data, size_t size)
{
	const struct iotrace_event *e = data;
	if (size < IOTRACE_EVENT_HDR)
		return;
	switch (e->type) {
	case IOTRACE_EV_CALL:
		on_call(c, e, size);
		break;
	case IOTRACE_EV_FORK:
		proc_forked(c, (int32_t)e->pid, (int32_t)e->tid);
		break;
	case IOTRACE_EV_EXEC: {
		struct proc *p = proc_get(c, (int32_t)e->pid, false);
		uint32_t covered = e->fd > 0 ? (uint32_t)e->fd : 0;
		if (p && covered <= 8 * (size - IOTRACE_EVENT_HDR))
			proc_execed(p, (const uint8_t *)e->path, covered);

		break;
	}
	case IOTRACE_EV_EINTR:
		held_flush(c, (uint64_t)e->pid << 32 | e->tid);
		break;
	case IOTRACE_EV_ENV: {
		/* a new program, maybe a new environment: the one exec gave it (all of it, or /proc's when cut) */
		struct proc *p = proc_get(c, (int32_t)e->pid, false);
		size_t len = size - IOTRACE_EVENT_HDR;
		bool whole = !(e->flags & IOTRACE_F_PATH_CUT) && len && !e->path[len - 1]; /* NUL-terminated strings */
		if (p)
			proc_check_libc_io(c, p, whole ? e->path : NULL, len);
		break;
	}
	case IOTRACE_EV_EXIT:
		if (e->flags & IOTRACE_F_GROUP_DEAD) {
			struct proc *p = proc_get(c, (int32_t)e->pid, false);
			held_flush_pid(c, (int32_t)e->pid);
			if (p)
				proc_exited(c, p);
		} else {
			held_flush(c, (uint64_t)e->pid << 32 | e->tid);
			stream_close(c, (uint64_t)e->pid << 32 | e->tid);
		}
		break;
	}
}

/* A ring record: one or more framed events (see iotrace.h). */
static void on_record(struct collector *c, const uint8_t *p, size_t size)
{
	while (size >= sizeof(struct iotrace_frame)) {
		const struct iotrace_frame *f = (const void *)p;
		const struct iotrace_event *e = (const void *)(f + 1);
		size_t n = (sizeof(*f) + (size_t)f->size + 7) & ~(size_t)7;
		/* an exec's environment (alone in its record) is longer than any other event */
		size_t max =
		    f->size >= IOTRACE_EVENT_HDR && sizeof(*f) + IOTRACE_EVENT_HDR <= size && e->type == IOTRACE_EV_ENV
			? IOTRACE_EVENT_HDR + IOTRACE_ENV_MAX
			: sizeof(struct iotrace_event);
		if (f->size > max || sizeof(*f) + f->size > size)
			return;
		on_event(c, p + sizeof(*f), f->size);
		if (n >= size)
			return;
		p += n;
		size -= n;
	}
}

static int on_ring(void *ctx, void *data, size_t size)
{
	on_record(ctx, data, size);
	return 0;
}

/*
 * The batches still in the CPUs' state once the programs are detached (their
 * processes still running: nothing flushed them), after the ring's records.
 */
static void drain_batches(struct collector *c, struct iotrace_bpf *skel)
{
	int ncpu = libbpf_num_possible_cpus();
	size_t vsz = (sizeof(struct iotrace_cpu) + 7) & ~(size_t)7;
	uint32_t zero = 0;
	uint8_t *v;

	if (ncpu <= 0 || !(v = calloc((size_t)ncpu, vsz)))
		return;
	if (!bpf_map__lookup_elem(skel->maps.cpus, &zero, sizeof(zero), v, (size_t)ncpu * vsz, 0))
		for (int i = 0; i < ncpu; i++) {
			const struct iotrace_cpu *s = (const void *)(v + (size_t)i * vsz);
			on_record(c, s->batch, s->batch_len < sizeof(s->batch) ? s->batch_len : sizeof(s->batch));
		}
	free(v);
}

/*
 * The calls the kernel side could not hand over (ring full), per process: a
 * LOST record in each process's stream, timed from the first lost call's
 * entry to the last one's loss, which `stepprof analyze` counts for that
 * process; *total grows by their number. Returns those that could not be
 * written either (for the header).
 * RATIONALE: the header's lost_records is the file's, and a collector's file
 * holds many processes: the analyzer does not read it there, so a storm that
 * lost 6 of 16 million calls said nothing in `stepprof analyze`.
 */
static uint64_t write_lost(struct collector *c, struct bpf_map *lost, uint64_t *total)
{
	uint32_t key, next, *prev = NULL;
	uint64_t unwritten = 0;

	for (; !bpf_map__get_next_key(lost, prev, &next, sizeof(next)); key = next, prev = &key) {
		struct iotrace_lost l;
		if (bpf_map__lookup_elem(lost, &next, sizeof(next), &l, sizeof(l), 0) || !l.calls)
			continue;
		struct sp_tf_stream *s = stream_get(c, (int32_t)next, (int32_t)next);
		*total += l.calls;
		for (uint64_t n = l.calls; n;) {
			uint64_t f[SP_F__COUNT] = {0};
			f[SP_F_COUNT] = n > UINT32_MAX ? UINT32_MAX : n; /* a 32-bit field */
			if (sp_tf_write(s, SP_K_LOST, SP_API_NONE, l.first_ns, l.last_ns, f)) {
				unwritten += n - 1; /* the writer counted the LOST record itself as one */
				break;
			}
			n -= f[SP_F_COUNT];
		}
	}
	return unwritten;
}

/*
 * Processes whose exit event was lost (full ring) or came before we attached.
 * The dead are found first and removed only after one more drain of the ring,
 * so that the records a process submitted before dying still find its tables.
 */
static void check_liveness(struct collector *c, struct ring_buffer *rb)
{
	int ndead = 0;
	for (size_t i = 0; i < c->procs.cap; i++) {
		struct proc *p = c->procs.vals[i];
		if (p && pid_dead(p->pid)) {
			p->dead = true;
			ndead++;
		}
	}
	if (!ndead)
		return;
	ring_buffer__consume(rb);
	for (size_t i = 0; i < c->procs.cap; i++) {
		struct proc *p = c->procs.vals[i];
		if (p && p->dead) {
			held_flush_pid(c, p->pid);
			proc_exited(c, p);
			i--; /* deletion may have moved another entry into slot i */
		}
	}
}

/* ---------------------------------------------------------------- 4. main */

static void on_signal(int sig)
{
	(void)sig;
	stop = 1;
}

static int on_libbpf_print(enum libbpf_print_level level, const char *fmt, va_list ap)
{
	if (level == LIBBPF_DEBUG && !verbose)
		return 0;
	char line[sizeof(libbpf_last)];
	va_list aq;
	va_copy(aq, ap);
	vsnprintf(line, sizeof(line), fmt, aq);
	va_end(aq);
	line[strcspn(line, "\n")] = 0;
	if (level == LIBBPF_WARN && line[0])
		memcpy(libbpf_last, line, sizeof(line));
	return verbose ? vfprintf(stderr, fmt, ap) : 0;
}

/*
 * The trace directory: made (mode 0700) when missing. An existing directory
 * of another user is accepted when we are root: `sudo stepprof run` makes it
 * for the invoking user, whose job writes there, and only the collector is root.
 * A symbolic link is refused either way.
 */
static int open_trace_dir(const char *dir, struct stat *st, char *err, size_t errlen)
{
	char why[256];
	int rc = sp_tf_mkdir(dir, why, sizeof(why));
	if (rc == -EPERM && geteuid() == 0)
		rc = 0;
	if (rc == 0 && lstat(dir, st) == 0 && S_ISDIR(st->st_mode))
		return 0;
	snprintf(err, errlen, "%s", rc ? why : "not a directory");
	if (!rc)
		snprintf(err, errlen, "%s: not a directory", dir);
	return -1;
}

/* The trace directory's absolute forms into own[2]: as given (made absolute), and resolved (NULL when the same). */
static void own_dirs(const char *dir, char *own[2])
{
	char cwd[PATH_MAX];
	if (dir[0] == '/')
		own[0] = strdup(dir);
	else if (getcwd(cwd, sizeof(cwd)) && asprintf(&own[0], "%s/%s", cwd, dir) < 0)
		own[0] = NULL;
	if (own[0])
		path_normalize(own[0], strlen(own[0]));
	own[1] = realpath(dir, NULL);
	if (own[0] && own[1] && !strcmp(own[0], own[1])) {
		free(own[1]);
		own[1] = NULL;
	}
}

/* The file's cap: STEPPROF_MAX_MB as for the preload's files (4..1048576 MiB), default 1 GiB. */
static uint64_t max_bytes(void)
{
	const char *v = getenv("STEPPROF_MAX_MB");
	char *end;
	long long mb = v && *v ? strtoll(v, &end, 10) : 1024;
	if (v && *v && (*end || mb < 4 || mb > 1048576)) {
		fprintf(stderr, PROG ": warning: STEPPROF_MAX_MB=%s is not a number of MiB in 4..1048576; using 1024\n",
			v);
		mb = 1024;
	}
	return (uint64_t)mb << 20;
}

static void usage(FILE *to)
{
	fprintf(to, "usage: " PROG " --pid PID -o DIR [--duration SECONDS] [--verbose]\n"
		    "  trace the file input (open/stat/read/getdents/close) of PID and its descendants\n"
		    "  into a stepprof trace file in DIR; prints \"ready\" once attached\n");
}

/*
 * Whether we run in a PID namespace other than the initial one (a container's):
 * the initial one's inode number is fixed (PROC_PID_INIT_INO, Linux >= 3.8).
 * RATIONALE: the kernel side knows tasks by their pids in the initial
 * namespace (task->tgid), --pid and /proc here are the container's: nothing
 * matched, and the collector recorded nothing while saying "ready" (under
 * `stepprof run --bpf` the libc wrappers then stood down: no input at all).
 */
static bool in_child_pid_namespace(void)
{
	struct stat st;
	return stat("/proc/self/ns/pid", &st) == 0 && st.st_ino != 0xEFFFFFFCu;
}

/*
 * The pid of a running stepprof-bpf that holds map id (an fd on it, in
 * /proc/PID/fdinfo), 0 when none does.
 * RATIONALE: a collector's maps outlive it for a while: the programs that use
 * them are freed after an RCU grace period of tracing programs (up to seconds),
 * so a collector started again at once on the same process (after an error)
 * found the dead one's map and refused.
 */
static int32_t map_holder(uint32_t id)
{
	char path[300], line[128], comm[32];
	int32_t holder = 0;
	DIR *d = opendir("/proc");
	if (!d)
		return 0;
	for (struct dirent *de; !holder && (de = readdir(d));) {
		char *end;
		long pid = strtol(de->d_name, &end, 10);
		if (*end || pid <= 0 || pid == getpid())
			continue;
		snprintf(path, sizeof(path), "/proc/%ld/comm", pid);
		FILE *f = fopen(path, "re");
		if (!f)
			continue;
		bool ours = fgets(comm, sizeof(comm), f) && !strcmp(comm, PROG "\n");
		fclose(f);
		snprintf(path, sizeof(path), "/proc/%ld/fdinfo", pid);
		DIR *fds = ours ? opendir(path) : NULL;
		for (struct dirent *fe; fds && !holder && (fe = readdir(fds));) {
			unsigned mid;
			snprintf(path, sizeof(path), "/proc/%ld/fdinfo/%s", pid, fe->d_name);
			if (fe->d_name[0] == '.' || !(f = fopen(path, "re")))
				continue;
			while (fgets(line, sizeof(line), f))
				if (sscanf(line, "map_id: %u", &mid) == 1 && mid == id)
					holder = (int32_t)pid;
			fclose(f);
		}
		if (fds)
			closedir(fds);
	}
	closedir(d);
	return holder;
}

/*
 * The pid of another collector whose map of traced processes (a hash named
 * "traced", u32 -> u8) holds pid, 0 when none does: that collector records
 * pid's calls already, and a second one would record each of them again
 * (two files of the same calls in one directory are counted twice). Called
 * before our own map exists.
 */
static int32_t traced_elsewhere(int32_t pid)
{
	uint32_t id = 0, key = (uint32_t)pid;
	int32_t holder = 0;
	uint8_t val;

	while (!bpf_map_get_next_id(id, &id)) {
		struct bpf_map_info info = {0};
		uint32_t len = sizeof(info);
		int fd = bpf_map_get_fd_by_id(id);
		if (fd < 0)
			continue; /* gone meanwhile */
		bool found = !bpf_obj_get_info_by_fd(fd, &info, &len) && info.type == BPF_MAP_TYPE_HASH &&
			     !strcmp(info.name, "traced") && info.key_size == sizeof(key) &&
			     info.value_size == sizeof(val) && !bpf_map_lookup_elem(fd, &key, &val);
		close(fd);
		if (found && (holder = map_holder(id)))
			return holder;
	}
	return 0;
}

/*
 * Bad usage: one line on stderr, exit status 2 (the usage itself with --help).
 * RATIONALE: as the stepprof verbs do; getopt's own line followed by the three
 * of the usage made four lines of which the error was the first.
 */
static int usage_error(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static int usage_error(const char *fmt, ...)
{
	va_list ap;
	fputs(PROG ": ", stderr);
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fputs(" (" PROG " --help)\n", stderr);
	return 2;
}

/* Why the program did not load, in one line. */
static const char *load_reason(int err, char *buf, size_t len)
{
	if (err == -EPERM || (err == -EACCES && geteuid() != 0))
		snprintf(buf, len, "not permitted (%s): run as root, or with CAP_BPF and CAP_PERFMON", strerror(-err));
	else if (libbpf_last[0])
		snprintf(buf, len, "the kernel refused it (%s): %s", strerror(-err), libbpf_last);
	else
		snprintf(buf, len, "%s", strerror(-err));
	return buf;
}

int main(int argc, char **argv)
{
	static const struct option opts[] = {
	    {"pid", required_argument, NULL, 'p'},	{"output", required_argument, NULL, 'o'},
	    {"duration", required_argument, NULL, 'd'}, {"verbose", no_argument, NULL, 'v'},
	    {"help", no_argument, NULL, 'h'},		{0},
	};
	struct iotrace_bpf *skel = NULL;
	struct ring_buffer *rb = NULL;
	struct collector c = {0};
	bool tf_open = false;
	uint64_t unwritten_lost = 0, lost_calls = 0;
	char *end, reason[512], err[256];
	long pid = 0;
	double duration = 0;
	const char *dir = NULL;
	int opt, ret = 1;

	opterr = 0; /* bad usage is one line, ours */
	while ((opt = getopt_long(argc, argv, "p:o:d:vh", opts, NULL)) != -1) {
		switch (opt) {
		case 'p':
			pid = strtol(optarg, &end, 10);
			if (*end || pid <= 0 || pid > INT_MAX) {
				fprintf(stderr, PROG ": --pid: not a process id: %s\n", optarg);
				return 2;
			}
			break;
		case 'o':
			dir = optarg;
			break;
		case 'd':
			duration = strtod(optarg, &end);
			if (*end || duration <= 0) {
				fprintf(stderr, PROG ": --duration: not a positive number of seconds: %s\n", optarg);
				return 2;
			}
			break;
		case 'v':
			verbose = true;
			break;
		case 'h':
			usage(stdout);
			return 0;
		default:
			/* a long option as typed; a short one by optopt (it may be inside a cluster, "-vx") */
			if (!strncmp(argv[optind - 1], "--", 2) || !optopt)
				return usage_error("%s: unknown option or missing value", argv[optind - 1]);
			return usage_error("-%c: unknown option or missing value", optopt);
		}
	}
	if (optind != argc)
		return usage_error("%s: unexpected argument", argv[optind]);
	if (!pid || !dir)
		return usage_error("%s is required", !pid ? "--pid PID" : "-o DIR");
	if (pid_dead((int32_t)pid)) {
		fprintf(stderr, PROG ": no process %ld\n", pid);
		return 1;
	}
	pid = thread_group((int32_t)pid); /* a thread's id: its process */
	int32_t other = traced_elsewhere((int32_t)pid);
	if (other) {
		fprintf(stderr,
			PROG
			": process %ld is traced by another stepprof-bpf already (pid %d): a second one would record "
			"each of its calls again\n",
			pid, other);
		return 1;
	}
	if (in_child_pid_namespace()) {
		fprintf(stderr,
			PROG ": cannot trace from inside a PID namespace (a container): the kernel knows its "
			     "processes by other pids; run stepprof-bpf on the host, with the job's pid there\n");
		return 1;
	}
	if (access("/sys/kernel/btf/vmlinux", R_OK)) {
		fprintf(stderr, PROG ": cannot load BPF: the kernel has no BTF (/sys/kernel/btf/vmlinux): %s\n",
			strerror(errno));
		return 1;
	}
	signal(SIGPIPE, SIG_IGN);
	libbpf_set_print(on_libbpf_print);

	/* open -> configure -> load -> attach -> poll */
	skel = iotrace_bpf__open();
	if (!skel) {
		fprintf(stderr, PROG ": cannot open the BPF object: %s\n", load_reason(-errno, reason, sizeof(reason)));
		goto cleanup;
	}
	for (int i = 0; i < IOTRACE_CALL__COUNT; i++) {
		if (call_nr[i] < 0)
			continue; /* not on this architecture (SYS_dup2 on arm64) */
		if (call_nr[i] >= IOTRACE_NR_MAX) {
			fprintf(stderr, PROG ": cannot load BPF: syscall number %ld out of range\n", call_nr[i]);
			goto cleanup;
		}
		skel->rodata->targ_call[call_nr[i]] = (uint8_t)(i + 1);
	}
	skel->rodata->targ_follow = true;
	int ncpus = libbpf_num_possible_cpus();
	if (ncpus <= 0 || bpf_map__set_max_entries(skel->maps.envbufs, (uint32_t)ncpus)) {
		fprintf(stderr, PROG ": cannot load BPF: the number of CPUs is unknown\n");
		goto cleanup;
	}

	int e = iotrace_bpf__load(skel);
	if (e) {
		fprintf(stderr, PROG ": cannot load BPF: %s\n", load_reason(e, reason, sizeof(reason)));
		goto cleanup;
	}
	uint32_t key = (uint32_t)pid;
	uint8_t one = 1;
	if (bpf_map__update_elem(skel->maps.traced, &key, sizeof(key), &one, sizeof(one), BPF_ANY)) {
		fprintf(stderr, PROG ": cannot seed the traced pid: %s\n", strerror(errno));
		goto cleanup;
	}

	struct stat dst;
	if (open_trace_dir(dir, &dst, err, sizeof(err))) {
		fprintf(stderr, PROG ": %s\n", err);
		goto cleanup;
	}
	struct sp_tf_opts to = {.dir = dir, .max_bytes = max_bytes(), .features = SP_FEAT_BPF, .prog = PROG};
	if (sp_tf_create(&c.tf, &to, err, sizeof(err))) {
		fprintf(stderr, PROG ": %s\n", err);
		goto cleanup;
	}
	tf_open = true;
	/* Under sudo the directory is the user's: hand the file to them, so that they can analyze it. */
	if (dst.st_uid != geteuid() && fchown(c.tf.fd, dst.st_uid, dst.st_gid))
		fprintf(stderr, PROG ": warning: %s: cannot give the file to uid %u: %s\n", c.tf.path,
			(unsigned)dst.st_uid, strerror(errno));
	c.strings.tf = &c.tf;
	own_dirs(dir, c.strings.own);
	struct proc *root = proc_get(&c, (int32_t)pid, true);
	proc_scan_fds(&c, root);
	proc_cwd(root); /* now, while it is alive: its children inherit it */
	proc_check_libc_io(&c, root, NULL, 0);

	rb = ring_buffer__new(bpf_map__fd(skel->maps.events), on_ring, &c, NULL);
	if (!rb) {
		fprintf(stderr, PROG ": cannot open the ring buffer: %s\n", strerror(errno));
		goto cleanup;
	}
	e = iotrace_bpf__attach(skel);
	if (e) {
		fprintf(stderr, PROG ": cannot attach to the syscall tracepoints: %s\n",
			load_reason(e, reason, sizeof(reason)));
		goto cleanup;
	}

	trace_descendants(&c, skel->maps.traced);

	struct sigaction sa = {.sa_handler = on_signal};
	sigemptyset(&sa.sa_mask);
	sigaction(SIGTERM, &sa, NULL);
	sigaction(SIGINT, &sa, NULL);
	/* the terminal it was started from hung up (an ssh session lost): flush as for the others, not die */
	sigaction(SIGHUP, &sa, NULL);
	printf("ready\n");
	fflush(stdout);

	/*
	 * Events are submitted without a wakeup: drain the ring every POLL_MS.
	 * The poll still returns at once for the forced wakeup of a process exit.
	 */
	uint64_t t0 = now_ns(), next_check = t0;
	while (!stop) {
		ring_buffer__poll(rb, POLL_MS);
		ring_buffer__consume(rb);
		uint64_t t = now_ns();
		if (duration > 0 && t - t0 >= (uint64_t)(duration * 1e9))
			break;
		if (t >= next_check) {
			check_liveness(&c, rb);
			next_check = t + LIVENESS_MS * 1000000ull;
		}
		if (c.nalive == 0)
			break;
	}
	/* Detached first, so that no program touches the ring or the batches while they are read. */
	iotrace_bpf__detach(skel);
	ring_buffer__consume(rb);
	drain_batches(&c, skel);
	held_flush_pid(&c, -1); /* calls interrupted and not restarted before the end */
	unwritten_lost = write_lost(&c, skel->maps.lost, &lost_calls);
	ret = 0;

cleanup:
	if (tf_open) {
		uint64_t dropped = 0;
		int ncpu = libbpf_num_possible_cpus();
		if (skel && ncpu > 0) {
			uint64_t *v = calloc((size_t)ncpu, sizeof(*v));
			uint32_t zero = 0;
			if (v && !bpf_map__lookup_elem(skel->maps.drops, &zero, sizeof(zero), v, ncpu * sizeof(*v), 0))
				for (int i = 0; i < ncpu; i++)
					dropped += v[i];
			free(v);
		}
		for (size_t i = 0; i < c.streams.cap; i++)
			if (c.streams.keys[i])
				sp_tf_stream_close(c.streams.vals[i]);
		__atomic_add_fetch(&c.tf.hdr->lost_records, dropped + unwritten_lost, __ATOMIC_RELAXED);
		sp_tf_finish(&c.tf, now_ns());
		/* Written to the end into a file nobody can open: say so, the only trace of the run is this line. */
		struct stat fst;
		if (fstat(c.tf.fd, &fst) == 0 && fst.st_nlink == 0)
			fprintf(stderr,
				PROG
				": warning: %s was removed while tracing (its directory deleted?): %llu records lost\n",
				c.tf.path, (unsigned long long)c.records);
		/* Never silent: the trace says how many (LOST records, the header), and so does this line. */
		if (lost_calls + dropped)
			fprintf(stderr,
				PROG ": warning: %llu calls not recorded (ring buffer full): counted as lost in %s\n",
				(unsigned long long)(lost_calls + dropped), c.tf.path);
		if (verbose)
			fprintf(stderr, PROG ": %llu records, %llu lost, in %s\n", (unsigned long long)c.records,
				(unsigned long long)(lost_calls + dropped), c.tf.path);
		sp_tf_release(&c.tf);
	}
	ring_buffer__free(rb);
	iotrace_bpf__destroy(skel);
	free(c.strings.own[0]);
	free(c.strings.own[1]);
	return ret;
}
