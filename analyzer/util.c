/*
 * util.c - helpers shared by the verbs (util.h): 1. error lines, 2. trace files
 * of a directory, 3. human-readable numbers, 4. untrusted strings on a terminal.
 */
#include "util.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <sys/stat.h>
#include <unistd.h>

#include "stepprof/trace.h"

/* ------------------------------------------------------------ 1. errors */

void util_err(const char *what, const char *fmt, ...)
{
	char msg[1024];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	/*
	 * One line, whatever the message holds; what and the message may carry names from
	 * a directory or a trace: their control characters are shown, not sent to the terminal.
	 */
	for (char *p = msg; *p; p++)
		if (*p == '\n' || *p == '\r')
			*p = ' ';
	fputs("stepprof: ", stderr);
	if (what) {
		util_put_text(stderr, what, 0);
		fputs(": ", stderr);
	}
	util_put_text(stderr, msg, 0);
	fputc('\n', stderr);
}

int util_bad_option(const char *verb, const char *arg)
{
	util_err(verb, "%s: unknown option or missing value (stepprof %s --help)", arg, verb);
	return SP_EXIT_USAGE;
}

int util_stdout_failed(void)
{
	static int said;
	if (!said++)
		util_err(NULL, "cannot write the output");
	return SP_EXIT_INTERNAL;
}

int util_no_operand(const char *verb)
{
	util_err(verb, "no trace directory given (stepprof %s --help)", verb);
	return SP_EXIT_USAGE;
}

int util_parse_flags(int argc, char **argv, const char *verb, const struct util_flag *flags, size_t n,
		     void (*usage)(FILE *))
{
	struct option opts[9] = {{"help", no_argument, NULL, 'h'}};
	char shorts[2 * 9] = "h";
	size_t k = 0, ns = 1;
	for (; k < n && k < 8; k++) {
		opts[k + 1] = (struct option){flags[k].name, no_argument, NULL, 256 + (int)k};
		if (flags[k].letter)
			shorts[ns++] = flags[k].letter;
	}
	shorts[ns] = 0;
	optind = 1;
	opterr = 0;
	for (int c; (c = getopt_long(argc, argv, shorts, opts, NULL)) != -1;) {
		if (c == 'h') {
			usage(stdout);
			return SP_EXIT_OK;
		}
		size_t i = 0;
		while (i < k && c != 256 + (int)i && c != flags[i].letter)
			i++;
		if (i == k || c == 0)
			return util_bad_option(verb, argv[optind - 1]);
		*flags[i].set = 1;
	}
	return -1;
}

int util_report_damage(const char *path, const struct sp_reader_stats *st)
{
	if (st->truncated && st->corrupt)
		util_err(path, "truncated and corrupt (%llu bad slots skipped): read what is whole",
			 (unsigned long long)st->corrupt_slots);
	else if (st->truncated)
		util_err(path, "truncated: the file is shorter than its header says; read what is whole");
	else if (st->corrupt)
		util_err(path, "corrupt: %llu slots did not decode and were skipped",
			 (unsigned long long)st->corrupt_slots);
	else
		return 0;
	return SP_EXIT_DAMAGED;
}

/* --------------------------------------------------------- 2. trace files */

int util_is_trace_file(const char *path)
{
	int fd = open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK);
	if (fd < 0)
		return 0;
	struct stat st;
	char magic[8];
	int ok = fstat(fd, &st) == 0 && S_ISREG(st.st_mode) && pread(fd, magic, 8, 0) == 8 &&
		 memcmp(magic, SP_MAGIC, 8) == 0;
	close(fd);
	return ok;
}

int util_run_id(const char *path, char *out)
{
	struct sp_file_header h;
	struct stat st;
	out[0] = 0;
	int fd = open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK);
	if (fd < 0)
		return -1;
	int ok = fstat(fd, &st) == 0 && S_ISREG(st.st_mode) && pread(fd, &h, sizeof(h), 0) == (ssize_t)sizeof(h) &&
		 memcmp(h.magic, SP_MAGIC, 8) == 0;
	close(fd);
	if (!ok || h.version_major != SP_VERSION_MAJOR)
		return -1;
	util_header_run_id(&h, out);
	return 0;
}

const char *util_header_run_id(const struct sp_file_header *h, char *out)
{
	out[0] = 0;
	/* before 1.4 the bytes are zero (the header's unused space); a newer major may have moved them */
	if (h->version_major == SP_VERSION_MAJOR && h->version_minor >= 4) {
		memcpy(out, h->run_id, SP_RUN_ID_SIZE);
		out[SP_RUN_ID_SIZE - 1] = 0;
		if (!sp_run_id_valid(out))
			out[0] = 0;
	}
	return out;
}

const char *util_header_cpu_list(const struct sp_file_header *h, char *out, size_t len)
{
	const unsigned ncpu = SP_CPU_AFFINITY_WORDS * 64;
	size_t n = 0;
	out[0] = 0;
	for (unsigned c = 0; c < ncpu;) {
		if (!((h->cpu_affinity[c / 64] >> (c % 64)) & 1)) {
			c++;
			continue;
		}
		unsigned e = c;
		while (e + 1 < ncpu && ((h->cpu_affinity[(e + 1) / 64] >> ((e + 1) % 64)) & 1))
			e++;
		char part[32];
		int k = e == c ? snprintf(part, sizeof(part), "%s%u", n ? "," : "", c)
			       : snprintf(part, sizeof(part), "%s%u-%u", n ? "," : "", c, e);
		if (n + (size_t)k + 4 > len) {
			if (n + 4 <= len)
				snprintf(out + n, len - n, "...");
			break;
		}
		memcpy(out + n, part, (size_t)k + 1);
		n += (size_t)k;
		c = e + 1;
	}
	return out;
}

/* The directory part of path ("." for a bare name) into out. */
static void dir_of(const char *path, char *out, size_t n)
{
	const char *slash = strrchr(path, '/');
	if (!slash)
		snprintf(out, n, ".");
	else
		snprintf(out, n, "%.*s", slash == path ? 1 : (int)(slash - path), path);
}

int util_check_runs(const char *verb, char *const *paths, size_t n, int merge_runs)
{
	enum { SHOWN = 4 };
	char id[SP_RUN_ID_SIZE], ids[SHOWN][SP_RUN_ID_SIZE], first_id[SP_RUN_ID_SIZE];
	const char *where[SHOWN];
	size_t runs = 0;
	if (merge_runs)
		return 0;
	for (size_t i = 0; i < n; i++) {
		/* no run id (before 1.4, damaged): merged with any run, as before run ids */
		if (util_run_id(paths[i], id) != 0 || !id[0])
			continue;
		size_t k = 0;
		while (k < runs && k < SHOWN && strcmp(ids[k], id))
			k++;
		if (k < runs && k < SHOWN)
			continue; /* a run already seen */
		if (runs >= SHOWN) {
			/* past the shown ones: counted once each, by a look back over the files */
			int seen = 0;
			for (size_t j = 0; j < i && !seen; j++)
				seen = util_run_id(paths[j], first_id) == 0 && !strcmp(first_id, id);
			if (seen)
				continue;
		} else {
			memcpy(ids[runs], id, SP_RUN_ID_SIZE);
			where[runs] = paths[i];
		}
		runs++;
	}
	if (runs <= 1)
		return 0;
	/* each run's directory, or its first file when two runs share a directory */
	size_t shown = runs < SHOWN ? runs : SHOWN;
	char dirs[SHOWN][PATH_MAX];
	int by_dir = 1;
	for (size_t k = 0; k < shown; k++) {
		dir_of(where[k], dirs[k], sizeof(dirs[k]));
		for (size_t j = 0; j < k; j++)
			by_dir &= strcmp(dirs[j], dirs[k]) != 0;
	}
	fprintf(stderr, "stepprof: %s: the files are of %zu runs:", verb, runs);
	for (size_t k = 0; k < shown; k++)
		fprintf(stderr, "%s run %s in %s", k ? "," : "", ids[k], by_dir ? dirs[k] : where[k]);
	if (runs > shown)
		fprintf(stderr, " and %zu more", runs - shown);
	fprintf(stderr, "; give one run's files, or --merge-runs to merge them\n");
	return SP_EXIT_USAGE;
}

int util_expand_output(const char *pat, long pid, const char *host, char *out, size_t n, char *err,
		       size_t errlen)
{
	size_t o = 0;
	char num[24];
	for (const char *p = pat; *p; p++) {
		const char *add = p, *end;
		size_t len = 1;
		if (*p == '%') {
			switch (p[1]) {
			case '%':
				len = 1;
				p++;
				break;
			case 'p':
				snprintf(num, sizeof(num), "%ld", pid);
				add = num;
				len = strlen(num);
				p++;
				break;
			case 'h':
				add = host;
				len = strlen(host);
				p++;
				break;
			case 'q':
				end = p[2] == '{' ? strchr(p + 3, '}') : NULL;
				if (!end || end == p + 3) {
					snprintf(err, errlen, "%%q needs a variable name in braces: %%q{VAR}");
					return -1;
				}
				char var[256];
				snprintf(var, sizeof(var), "%.*s", (int)(end - p - 3), p + 3);
				add = getenv(var);
				if (!add) {
					snprintf(err, errlen, "%%q{%.200s}: %.200s is not set", var, var);
					return -1;
				}
				len = strlen(add);
				p = end;
				break;
			default:
				snprintf(err, errlen, "%%%.1s: not a substitution (%%p pid, %%h host, %%q{VAR}, %%%% a '%%')",
					 p[1] ? p + 1 : "");
				return -1;
			}
		}
		if (o + len >= n) {
			snprintf(err, errlen, "the directory's name is longer than %zu bytes", n - 1);
			return -1;
		}
		memcpy(out + o, add, len);
		o += len;
	}
	out[o] = 0;
	return 0;
}

static int cmp_str(const void *a, const void *b)
{
	return strcmp(*(char *const *)a, *(char *const *)b);
}

struct plist {
	char **v;
	size_t n, cap;
};

static int plist_add(struct plist *l, char *p)
{
	if (!p)
		return -1;
	if (l->n + 2 > l->cap) {
		size_t nc = l->cap ? l->cap * 2 : 16;
		char **nv = realloc(l->v, nc * sizeof(*nv));
		if (!nv) {
			free(p);
			return -1;
		}
		l->v = nv;
		l->cap = nc;
	}
	l->v[l->n++] = p;
	l->v[l->n] = NULL;
	return 0;
}

/* A listed file's identity, to find it named twice. */
struct fid {
	dev_t dev;
	ino_t ino;
	size_t at; /* its place in the list */
};

static int cmp_fid(const void *a, const void *b)
{
	const struct fid *x = a, *y = b;
	if (x->dev != y->dev)
		return x->dev < y->dev ? -1 : 1;
	if (x->ino != y->ino)
		return x->ino < y->ino ? -1 : 1;
	return x->at < y->at ? -1 : x->at > y->at;
}

/*
 * One file named twice (`DIR DIR/x.sptrace`, `DIR ./DIR`, a link) is read once: twice
 * would count its every call, byte and iteration share double. The first mention
 * stays, the order is kept; a path that cannot be stat'ed stays for the reader to report.
 */
static void plist_dedupe(struct plist *l)
{
	if (l->n < 2)
		return;
	struct fid *f = malloc(l->n * sizeof(*f));
	char *drop = calloc(l->n, 1);
	size_t nf = 0;
	if (!f || !drop) {
		free(f);
		free(drop);
		return; /* out of memory: read duplicates rather than nothing */
	}
	for (size_t i = 0; i < l->n; i++) {
		struct stat st;
		if (stat(l->v[i], &st) == 0 && S_ISREG(st.st_mode))
			f[nf++] = (struct fid){st.st_dev, st.st_ino, i};
	}
	qsort(f, nf, sizeof(*f), cmp_fid);
	for (size_t i = 1; i < nf; i++)
		if (f[i].dev == f[i - 1].dev && f[i].ino == f[i - 1].ino)
			drop[f[i].at] = 1;
	size_t k = 0;
	for (size_t i = 0; i < l->n; i++) {
		if (drop[i])
			free(l->v[i]);
		else
			l->v[k++] = l->v[i];
	}
	l->n = k;
	l->v[k] = NULL;
	free(f);
	free(drop);
}

char **util_trace_paths(char *const *args, int nargs, size_t *n, int *rc)
{
	struct plist l = {0};
	*rc = SP_EXIT_OK;
	for (int i = 0; i < nargs; i++) {
		struct stat st;
		if (stat(args[i], &st) < 0) {
			util_err(args[i], "%s", strerror(errno));
			*rc = util_worse(*rc, SP_EXIT_INPUT);
			continue;
		}
		if (!S_ISDIR(st.st_mode)) {
			if (plist_add(&l, strdup(args[i])))
				*rc = util_worse(*rc, SP_EXIT_INTERNAL);
			continue;
		}
		DIR *d = opendir(args[i]);
		if (!d) {
			util_err(args[i], "%s", strerror(errno));
			*rc = util_worse(*rc, SP_EXIT_INPUT);
			continue;
		}
		size_t first = l.n;
		struct dirent *de;
		while ((de = readdir(d))) {
			if (de->d_name[0] == '.')
				continue;
			size_t dl = strlen(args[i]);
			int slash = dl > 0 && args[i][dl - 1] == '/';
			size_t len = dl + strlen(de->d_name) + 2;
			char *p = malloc(len);
			if (!p)
				break;
			snprintf(p, len, "%s%s%s", args[i], slash ? "" : "/", de->d_name);
			/*
			 * Files named like the recorder's (*.sptrace) are kept even when their
			 * magic is damaged, so that the reader reports them instead of a
			 * silent skip; other names must carry the magic.
			 */
			size_t nl = strlen(de->d_name);
			int named = nl > 8 && strcmp(de->d_name + nl - 8, ".sptrace") == 0;
			if (!named && !util_is_trace_file(p)) {
				free(p);
				continue;
			}
			if (plist_add(&l, p))
				*rc = util_worse(*rc, SP_EXIT_INTERNAL);
		}
		closedir(d);
		if (l.n == first) {
			unsigned nd = util_trace_dirs(args[i], NULL, NULL, 0, NULL);
			if (nd) { /* `analyze .` beside the run directories: say which they are */
				util_err(args[i], "no stepprof trace files in this directory, but %u trace director%s in it "
						  "(give one of them):",
					 nd, nd == 1 ? "y" : "ies");
				util_trace_dirs(args[i], NULL, NULL, 0, stderr);
			} else {
				util_err(args[i], "no stepprof trace files in this directory");
			}
			*rc = util_worse(*rc, SP_EXIT_INPUT);
		} else {
			qsort(l.v + first, l.n - first, sizeof(*l.v), cmp_str);
		}
	}
	plist_dedupe(&l);
	if (!l.v) {
		l.v = calloc(1, sizeof(*l.v));
		if (!l.v)
			*rc = util_worse(*rc, SP_EXIT_INTERNAL);
	}
	*n = l.n;
	return l.v;
}

unsigned util_traces_in(const char *dir)
{
	DIR *d = opendir(dir);
	if (!d)
		return 0;
	unsigned n = 0;
	char p[PATH_MAX];
	for (struct dirent *de; (de = readdir(d));) {
		size_t nl = strlen(de->d_name);
		if (de->d_name[0] == '.' || snprintf(p, sizeof(p), "%s/%s", dir, de->d_name) >= (int)sizeof(p))
			continue;
		n += (nl > 8 && !strcmp(de->d_name + nl - 8, ".sptrace")) || util_is_trace_file(p);
	}
	closedir(d);
	return n;
}

unsigned util_trace_dirs(const char *dir, const char *prefix, char *newest, size_t len, FILE *list)
{
	DIR *d = opendir(dir);
	if (!d)
		return 0;
	unsigned n = 0;
	time_t best = 0;
	size_t dl = strlen(dir);
	int slash = dl && dir[dl - 1] == '/';
	char p[PATH_MAX];
	for (struct dirent *de; (de = readdir(d));) {
		struct stat st;
		if (de->d_name[0] == '.' || (prefix && strncmp(de->d_name, prefix, strlen(prefix))))
			continue;
		if (snprintf(p, sizeof(p), "%s%s%s", dir, slash ? "" : "/", de->d_name) >= (int)sizeof(p) ||
		    stat(p, &st) || !S_ISDIR(st.st_mode))
			continue;
		unsigned files = util_traces_in(p);
		if (!files)
			continue;
		n++;
		if (list) {
			char when[32];
			struct tm tm;
			strftime(when, sizeof(when), "%Y-%m-%d %H:%M:%S", localtime_r(&st.st_mtime, &tm));
			fprintf(list, "  %s  (%u file%s, modified %s)\n", p, files, files == 1 ? "" : "s", when);
		}
		/* the newest by modification time (the last file a job created in it), ties by name */
		if (newest && (n == 1 || st.st_mtime > best || (st.st_mtime == best && strcmp(p, newest) > 0))) {
			best = st.st_mtime;
			snprintf(newest, len, "%s", p);
		}
	}
	closedir(d);
	return n;
}

void util_free_paths(char **paths)
{
	if (!paths)
		return;
	for (char **p = paths; *p; p++)
		free(*p);
	free(paths);
}

char **util_verb_trace_paths(const char *verb, char *const *args, int nargs, size_t *n, int *rc)
{
	char **paths = util_trace_paths(args, nargs, n, rc);
	if (*rc == SP_EXIT_OK && *n)
		return paths;
	if (*rc == SP_EXIT_OK) {
		util_err(verb, "no trace files");
		*rc = SP_EXIT_INPUT;
	}
	util_free_paths(paths);
	return NULL;
}

/*
 * A file the recorder had created but not filled when its process died (or that it is
 * still creating): empty, or a header of zeros (the magic is written last). It holds
 * no record.
 */
static int never_written(const char *path)
{
	int fd = open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK);
	if (fd < 0)
		return 0;
	struct stat st;
	uint8_t b[SP_HEADER_SIZE];
	ssize_t got = fstat(fd, &st) == 0 && S_ISREG(st.st_mode) ? pread(fd, b, sizeof(b), 0) : -1;
	close(fd);
	if (got < 0)
		return 0;
	for (ssize_t i = 0; i < got; i++)
		if (b[i])
			return 0;
	return 1;
}

int util_reader_open(const char *path, struct sp_reader **r)
{
	char err[256];
	if (sp_reader_open(path, r, err, sizeof(err))) {
		if (never_written(path)) {
			util_err(path, "truncated: no header (its process died while creating it): no records");
			return SP_EXIT_DAMAGED;
		}
		util_err(path, "%s", err);
		return SP_EXIT_INPUT;
	}
	return 0;
}

/* ------------------------------------------------------ output files */

int util_out_open(struct util_out *o, const char *dest, const char *what)
{
	memset(o, 0, sizeof(*o));
	o->what = what;
	size_t tl = strlen(dest) + 32;
	o->dest = strdup(dest);
	o->tmp = malloc(tl);
	if (!o->dest || !o->tmp) {
		util_err(dest, "%s: out of memory", what);
		goto fail;
	}
	/* A device or a pipe is written in place: never renamed over. */
	struct stat ds;
	o->direct = stat(dest, &ds) == 0 && !S_ISREG(ds.st_mode);
	if (o->direct)
		snprintf(o->tmp, tl, "%s", dest);
	else
		snprintf(o->tmp, tl, "%s.tmp.%ld", dest, (long)getpid());
	int fd = o->direct ? open(dest, O_WRONLY | O_CLOEXEC)
			   : open(o->tmp, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW, 0644);
	o->f = fd >= 0 ? fdopen(fd, "w") : NULL;
	if (!o->f) {
		util_err(dest, "%s: %s", what, strerror(errno));
		if (fd >= 0) {
			close(fd);
			if (!o->direct)
				unlink(o->tmp);
		}
		goto fail;
	}
	return 0;
fail:
	free(o->dest);
	free(o->tmp);
	o->dest = o->tmp = NULL;
	return -1;
}

int util_out_close(struct util_out *o, int keep)
{
	int rc = 0;
	/* a document dropped anyway: the caller has said why, a failing close adds nothing */
	if (fclose(o->f)) {
		if (keep)
			util_err(o->dest, "%s: %s", o->what, strerror(errno));
		rc = -1;
	}
	if (!o->direct && (rc || !keep)) {
		unlink(o->tmp);
	} else if (!o->direct && rename(o->tmp, o->dest)) {
		util_err(o->dest, "%s: %s", o->what, strerror(errno));
		unlink(o->tmp);
		rc = -1;
	}
	free(o->dest);
	free(o->tmp);
	o->f = NULL;
	o->dest = o->tmp = NULL;
	return rc;
}

/* ----------------------------------------------------------- 3. numbers */

const char *util_fmt_ns(uint64_t ns, char *buf, size_t len)
{
	if (ns < 1000)
		snprintf(buf, len, "%llu ns", (unsigned long long)ns);
	else if (ns < 1000000)
		snprintf(buf, len, "%.3g us", ns / 1e3);
	else if (ns < 1000000000)
		snprintf(buf, len, "%.3g ms", ns / 1e6);
	else
		snprintf(buf, len, "%.3f s", ns / 1e9);
	return buf;
}

const char *util_fmt_bytes(uint64_t b, char *buf, size_t len)
{
	static const char *const unit[] = {"B", "KiB", "MiB", "GiB", "TiB", "PiB", "EiB"};
	double v = (double)b;
	unsigned u = 0;
	while (v >= 1024 && u + 1 < sizeof(unit) / sizeof(unit[0])) {
		v /= 1024;
		u++;
	}
	if (u == 0)
		snprintf(buf, len, "%llu B", (unsigned long long)b);
	else if (v >= 999.5) /* %.3g would write 1.02e+03 */
		snprintf(buf, len, "%.0f %s", v, unit[u]);
	else
		snprintf(buf, len, "%.3g %s", v, unit[u]);
	return buf;
}

/* --------------------------------------------- 4. untrusted strings on a terminal */

size_t util_utf8_len(const unsigned char *p, size_t n)
{
	unsigned c = p[0];
	size_t len;
	unsigned min;
	if (c < 0x80)
		return 1;
	if (c >= 0xc2 && c <= 0xdf) {
		len = 2;
		min = 0x80;
	} else if (c >= 0xe0 && c <= 0xef) {
		len = 3;
		min = 0x800;
	} else if (c >= 0xf0 && c <= 0xf4) {
		len = 4;
		min = 0x10000;
	} else {
		return 0;
	}
	if (n < len)
		return 0;
	unsigned cp = c & (0x3f >> (len - 1));
	for (size_t i = 1; i < len; i++) {
		if ((p[i] & 0xc0) != 0x80)
			return 0;
		cp = (cp << 6) | (p[i] & 0x3f);
	}
	if (cp < min || cp > 0x10ffff || (cp >= 0xd800 && cp < 0xe000))
		return 0;
	return len;
}

size_t util_put_unsafe(FILE *f, const unsigned char *p, size_t n)
{
	unsigned c = p[0];
	size_t l = util_utf8_len(p, n);
	/* C0 controls, DEL, C1 controls (U+0080..U+009F: 8-bit CSI and the like), bytes that are not UTF-8 */
	if (!(c < 0x20 || c == 0x7f || !l || (l == 2 && c == 0xc2 && p[1] < 0xa0)))
		return 0;
	l = l ? l : 1;
	for (size_t k = 0; k < l; k++)
		fprintf(f, "\\x%02x", p[k]);
	return l;
}

void util_put_text(FILE *f, const char *s, int quoted)
{
	const unsigned char *p = (const unsigned char *)s;
	size_t n = strlen(s);
	for (size_t i = 0; i < n;) {
		size_t l = util_put_unsafe(f, p + i, n - i);
		if (l) {
			i += l;
			continue;
		}
		/* a backslash is always doubled: a literal "\\x1b" in a name never reads as an escaped byte */
		if (p[i] == '\\' || (quoted && p[i] == '"'))
			fputc('\\', f);
		l = util_utf8_len(p + i, n - i);
		fwrite(p + i, 1, l, f);
		i += l;
	}
}
