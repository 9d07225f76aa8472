/*
 * proctree.c - the traced processes of stepprof-bpf: which pids belong to the
 * traced tree, and per process its fd -> path table and working directory.
 *
 *   1. allocation that stops the collector when out of memory
 *   2. processes: fd tables, cwd, whose libc wrappers record already, fork and
 *      exit, liveness from /proc, the descendants found at the start
 *   3. paths: made absolute against those tables; the calls that only move them
 */
#include "envconfig.h"
#include "iotrace_user.h"

#include <dirent.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>

#include <bpf/libbpf.h>

#define MAX_FD (1 << 20) /* fd tables stop growing here (RLIMIT_NOFILE's usual hard cap) */

/* ---------------------------------------------------------- 1. allocation */

void die_oom(void)
{
	fprintf(stderr, PROG ": out of memory\n");
	exit(1);
}

void *xcalloc(size_t n, size_t sz)
{
	void *p = calloc(n ? n : 1, sz ? sz : 1);
	if (!p)
		die_oom();
	return p;
}

/* The value of key in m, added when absent: the collector stops when out of memory. */
void **xslot(struct hashmap *m, uint64_t key)
{
	union hashmap_val *v = hashmap_slot(m, key, true);
	if (!v)
		die_oom();
	return &v->p;
}

/* ---------------------------------------------------------- 2. processes */

struct proc *proc_get(struct collector *c, int32_t pid, bool create)
{
	struct proc *p = hashmap_get(&c->procs, (uint32_t)pid);
	if (p || !create)
		return p;
	p = xcalloc(1, sizeof(*p));
	p->pid = pid;
	p->alive = true;
	*xslot(&c->procs, (uint32_t)pid) = p;
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
void proc_new_fd(struct proc *p, int fd, uint32_t path, uint64_t file, uint64_t born)
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
uint32_t fd_path(struct proc *p, int fd, uint64_t file)
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
void fd_closed(struct proc *p, int fd, uint64_t file)
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
void proc_execed(struct proc *p, const uint8_t *open_fds, uint32_t covered)
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
void proc_scan_fds(struct collector *c, struct proc *p)
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
const char *proc_cwd(struct proc *p)
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
/* The environment block sp_config_parse reads (the collector has one thread). */
static const char *cfg_env;
static size_t cfg_env_len;

static const char *cfg_get(const char *name)
{
	const char *v;
	return env_get(cfg_env, cfg_env_len, name, &v) ? v : NULL;
}

void proc_check_libc_io(struct collector *c, struct proc *p, const char *given, size_t given_len)
{
	const char *preload, *dir = "";
	size_t len = given_len;
	char *read = given ? NULL : env_read(p->pid, &len);
	const char *env = given ? given : read;
	struct sp_config cfg;

	/* its STEPPROF_* as its preload parses them: a bad value is that value's default there too */
	if (env) {
		cfg_env = env, cfg_env_len = len;
		sp_config_parse(&cfg, SP_CFG_PRELOAD, cfg_get, NULL);
		dir = cfg.DIR;
	}
	p->libc_io = env && env_get(env, len, "LD_PRELOAD", &preload) && strstr(preload, "libstepprof") &&
		     strcmp(cfg.IO, "bpf") && strcmp(cfg.IO, "off") && !cfg.DISABLE && dir[0] &&
		     is_own_dir(c, p, dir);
	if (p->libc_io && !c->told_libc_io) {
		c->told_libc_io = true;
		fprintf(stderr,
			PROG ": process %d (and any like it) records its file input with libstepprof.so into %s: "
			     "not recorded here as well (STEPPROF_IO=bpf makes the wrappers stand down)\n",
			p->pid, dir);
	}
	free(read);
}

void proc_forked(struct collector *c, int32_t parent, int32_t child)
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

void proc_exited(struct collector *c, struct proc *p)
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
	hashmap_del(&c->procs, (uint32_t)p->pid);
	free(p->cwd);
	free(p->fds);
	free(p);
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
bool pid_dead(int32_t pid)
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
int32_t thread_group(int32_t tid)
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
 * RATIONALE: with --pid alone traced, a collector started by hand on a
 * running job would record none of its workers' reads. A process
 * whose parent exited before this scan (reparented) is not found.
 */
void trace_descendants(struct collector *c, struct bpf_map *traced)
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

/* -------------------------------------------------------------- 3. paths */

/*
 * An absolute path (s[0] == '/') made lexically normal in place: repeated
 * slashes, "." and ".." components resolved by name, as `realpath -s` does
 * (a ".." after a symbolic link goes back to the link's directory, not its
 * target's: the loader cannot look at the file system as the process saw it).
 * Returns the new length; s is NUL-terminated when it shrank.
 * RATIONALE: the working directory was kept as text, so chdir("sub") then
 * chdir("..") 100 times gave 101 names for 2 files (".../sub/../sub/../...").
 */
size_t path_normalize(char *s, size_t len)
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

uint32_t path_id(struct collector *c, struct proc *p, int dirfd, uint64_t dirfile, const char *path, size_t len)
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
void on_bookkeeping(struct collector *c, struct proc *p, const struct iotrace_event *e, size_t plen)
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
