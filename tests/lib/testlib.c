/*
 * testlib.c - implementation of the test helpers of testlib.h.
 *
 * Divided into:
 *   1. paths and temporary directories (sp_t_build, sp_t_tmpdir, sp_t_rmrf),
 *   2. running a command (sp_t_run): fork/exec with an edited environment,
 *      stdin fed and stdout/stderr drained through one poll loop, a timeout,
 *   3. a small JSON DOM: a recursive-descent parser, lookups by key, index and
 *      dotted path, and the one-object-per-line parser used for `dump --json`.
 *
 * Helpers abort the test (criterion's cr_assert is not used here, so that the
 * library links into any test file) only on impossible conditions such as
 * malloc failure; everything a test can check is returned.
 */
#include "testlib.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <poll.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/resource.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

/*
 * The programs the tests start inherit this process's signal dispositions. A
 * shell without job control starts a background command with SIGINT and
 * SIGQUIT ignored (and nohup ignores SIGHUP): then `stepprof run`, which keeps
 * what it inherited ignored as it should, forwards a SIGINT to a job that
 * ignores it, and the forwarding tests failed for a reason of the launch, not
 * of stepprof. The suite starts its programs with the default dispositions;
 * a test that wants a signal ignored sets it itself.
 */
__attribute__((constructor)) static void sp_t_default_signals(void)
{
	signal(SIGINT, SIG_DFL);
	signal(SIGQUIT, SIG_DFL);
	signal(SIGHUP, SIG_DFL);
}

extern char **environ;

static void *xmalloc(size_t n)
{
	void *p = malloc(n ? n : 1);
	if (!p) {
		fprintf(stderr, "testlib: out of memory\n");
		abort();
	}
	return p;
}

static void *xrealloc(void *p, size_t n)
{
	p = realloc(p, n ? n : 1);
	if (!p) {
		fprintf(stderr, "testlib: out of memory\n");
		abort();
	}
	return p;
}

static char *xstrndup(const char *s, size_t n)
{
	char *d = xmalloc(n + 1);
	memcpy(d, s, n);
	d[n] = 0;
	return d;
}

/* ------------------------------------------------ 1. paths and directories */

/* malloc'd "$var/rel", with dflt for an unset or empty var */
static const char *under_env_dir(const char *var, const char *dflt, const char *rel)
{
	const char *b = getenv(var);
	if (!b || !*b)
		b = dflt;
	size_t n = strlen(b) + strlen(rel) + 2;
	char *p = xmalloc(n);
	snprintf(p, n, "%s/%s", b, rel);
	return p;
}

const char *sp_t_build(const char *rel)
{
	return under_env_dir("STEPPROF_BUILD", "build", rel);
}

const char *sp_t_cuda(const char *rel)
{
	return under_env_dir("CUDA_HOME", "/usr/local/cuda", rel);
}

char *sp_t_tmpdir(const char *tag)
{
	char tmpl[256];
	snprintf(tmpl, sizeof(tmpl), "/tmp/stepprof-test-%s-XXXXXX", tag ? tag : "t");
	if (!mkdtemp(tmpl)) {
		fprintf(stderr, "testlib: mkdtemp %s: %s\n", tmpl, strerror(errno));
		abort();
	}
	return xstrndup(tmpl, strlen(tmpl));
}

static int rm_one(const char *path, const struct stat *st, int flag, struct FTW *ftw)
{
	(void)st;
	(void)ftw;
	if (flag == FTW_DP)
		rmdir(path);
	else
		unlink(path);
	return 0;
}

void sp_t_rmrf(const char *path)
{
	if (!path || !*path || strcmp(path, "/") == 0)
		return;
	/* Make unwritable test directories removable again. */
	chmod(path, 0700);
	nftw(path, rm_one, 32, FTW_DEPTH | FTW_PHYS);
}

/* ------------------------------------------------------ 2. running a command */

int sp_t_env_has(const char *const env[], const char *name)
{
	size_t n = strlen(name);
	for (; env && *env; env++)
		if (!strncmp(*env, name, n) && ((*env)[n] == '=' || (*env)[n] == 0))
			return 1;
	return 0;
}

/* The child's environment: ours, minus the names env[] sets or unsets, plus env[]. */
static char **make_env(char *const env[])
{
	size_t n = 0, k = 0;
	while (environ[n])
		n++;
	if (env)
		while (env[k])
			k++;
	char **out = xmalloc((n + k + 1) * sizeof(*out));
	size_t o = 0;
	for (size_t i = 0; i < n; i++) {
		const char *eq = strchr(environ[i], '=');
		size_t nl = eq ? (size_t)(eq - environ[i]) : strlen(environ[i]);
		int drop = 0;
		for (size_t j = 0; j < k && !drop; j++) {
			const char *e2 = strchr(env[j], '=');
			size_t l2 = e2 ? (size_t)(e2 - env[j]) : strlen(env[j]);
			drop = l2 == nl && strncmp(env[j], environ[i], nl) == 0;
		}
		if (!drop)
			out[o++] = environ[i];
	}
	for (size_t j = 0; j < k; j++) {
		const char *eq = strchr(env[j], '=');
		if (eq && eq[1] == 0)
			continue; /* "NAME=": unset */
		out[o++] = env[j];
	}
	out[o] = NULL;
	return out;
}

struct sink {
	char *buf;
	size_t len, cap;
	double *line_s; /* when each newline was read (CLOCK_MONOTONIC s), if kept */
	size_t nlines, lcap;
	int keep_times;
};

static void sink_add(struct sink *s, const char *p, size_t n)
{
	if (s->len + n + 1 > s->cap) {
		s->cap = (s->len + n + 1) * 2;
		s->buf = xrealloc(s->buf, s->cap);
	}
	memcpy(s->buf + s->len, p, n);
	s->len += n;
	s->buf[s->len] = 0;
}

/* What is ready on *fd, into s; at its end or on an error, *fd is closed and set to -1. */
static double now_s(void);

static void sink_read(struct sink *s, int *fd, char *buf, size_t size)
{
	ssize_t r = read(*fd, buf, size);
	if (r > 0) {
		sink_add(s, buf, (size_t)r);
		double t = s->keep_times ? now_s() : 0;
		for (ssize_t i = 0; s->keep_times && i < r; i++) {
			if (buf[i] != '\n')
				continue;
			if (s->nlines == s->lcap) {
				s->lcap = s->lcap ? 2 * s->lcap : 64;
				s->line_s = xrealloc(s->line_s, s->lcap * sizeof(*s->line_s));
			}
			s->line_s[s->nlines++] = t;
		}
	} else if (r == 0 || errno != EINTR) {
		close(*fd);
		*fd = -1;
	}
}

/* fd (unless closed: -1) added to the n entries of pf, to poll for events: its index, or -1. */
static int poll_add(struct pollfd *pf, int *n, int fd, short events)
{
	if (fd < 0)
		return -1;
	pf[*n] = (struct pollfd){.fd = fd, .events = events};
	return (*n)++;
}

static double now_s(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + ts.tv_nsec / 1e9;
}

/*
 * The line a job's first process ends with to say where its trace went (and that
 * `stepprof run` prints): out of err (and its time out of err_line_s) into where,
 * so that what a test reads on err is the program's own stderr and the warnings;
 * suite `where` and the run tests read where.
 */
static void take_where(struct sp_t_result *res)
{
	static const char tag[] = "stepprof: trace in ";
	size_t cap = 1, len = 0, out = 0, line = 0, kept = 0;
	char *where = malloc(cap);
	if (!where)
		abort();
	where[0] = 0;
	for (size_t in = 0; in < res->errlen; line++) {
		const char *nl = memchr(res->err + in, '\n', res->errlen - in);
		size_t n = nl ? (size_t)(nl - (res->err + in)) + 1 : res->errlen - in;
		if (n >= sizeof(tag) - 1 && !memcmp(res->err + in, tag, sizeof(tag) - 1)) {
			while (len + n + 1 > cap)
				cap *= 2;
			if (!(where = realloc(where, cap)))
				abort();
			memcpy(where + len, res->err + in, n);
			where[len += n] = 0;
		} else {
			memmove(res->err + out, res->err + in, n);
			out += n;
			if (nl && line < res->err_lines)
				res->err_line_s[kept++] = res->err_line_s[line];
		}
		in += n;
	}
	if (res->err) {
		res->err[out] = 0;
		res->errlen = out;
	}
	if (res->err_line_s)
		res->err_lines = kept;
	res->where = where;
}

int sp_t_run(struct sp_t_result *res, char *const argv[], char *const env[], const char *stdin_text, int timeout_s)
{
	int pin[2], pout[2], perr[2];
	memset(res, 0, sizeof(*res));
	if (pipe2(pin, O_CLOEXEC) || pipe2(pout, O_CLOEXEC) || pipe2(perr, O_CLOEXEC))
		abort();
	char **envp = make_env(env);
	pid_t pid = fork();
	if (pid < 0)
		abort();
	if (pid == 0) {
		/* Own process group, so that a timeout also kills grandchildren. */
		setpgid(0, 0);
		signal(SIGPIPE, SIG_DFL);
		dup2(pin[0], 0);
		dup2(pout[1], 1);
		dup2(perr[1], 2);
		execvpe(argv[0], argv, envp);
		dprintf(2, "testlib: exec %s: %s\n", argv[0], strerror(errno));
		_exit(127);
	}
	free(envp);
	close(pin[0]);
	close(pout[1]);
	close(perr[1]);
	fcntl(pin[1], F_SETFL, O_NONBLOCK);

	/* Writing to a child that exited early must not kill the test runner. */
	struct sigaction ign = {.sa_handler = SIG_IGN}, old;
	sigaction(SIGPIPE, &ign, &old);

	struct sink out = {0}, err = {.keep_times = 1};
	sink_add(&out, "", 0);
	sink_add(&err, "", 0);
	const char *in = stdin_text ? stdin_text : "";
	size_t inlen = strlen(in), inoff = 0;
	int fin = pin[1], fo = pout[0], fe = perr[0];
	if (inlen == 0) {
		close(fin);
		fin = -1;
	}
	double deadline = now_s() + (timeout_s > 0 ? timeout_s : 3600);
	double drain_deadline = 0;
	int status = -1, reaped = 0, killed = 0;
	char buf[65536];
	while (fo >= 0 || fe >= 0 || !reaped) {
		struct pollfd pf[3];
		int n = 0;
		int io = poll_add(pf, &n, fo, POLLIN), ie = poll_add(pf, &n, fe, POLLIN),
		    ii = poll_add(pf, &n, fin, POLLOUT);
		poll(pf, (nfds_t)n, 50);
		if (io >= 0 && pf[io].revents)
			sink_read(&out, &fo, buf, sizeof(buf));
		if (ie >= 0 && pf[ie].revents)
			sink_read(&err, &fe, buf, sizeof(buf));
		if (ii >= 0 && pf[ii].revents) {
			ssize_t w = write(fin, in + inoff, inlen - inoff);
			if (w > 0)
				inoff += (size_t)w;
			if ((w < 0 && errno != EAGAIN && errno != EINTR) || inoff == inlen) {
				close(fin);
				fin = -1;
			}
		}
		if (!reaped) {
			int st;
			struct rusage ru;
			pid_t w = wait4(pid, &st, WNOHANG, &ru);
			if (w == pid) {
				res->maxrss_kb = ru.ru_maxrss;
				reaped = 1;
				status = WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
				/* A daemonised grandchild may keep the pipes open: drain briefly only. */
				drain_deadline = now_s() + 2;
			}
		}
		double t = now_s();
		if (!reaped && t > deadline && !killed) {
			kill(-pid, SIGKILL);
			kill(pid, SIGKILL);
			killed = 1;
		}
		if (reaped && t > drain_deadline)
			break;
	}
	if (killed)
		status = 137;
	if (fo >= 0)
		close(fo);
	if (fe >= 0)
		close(fe);
	if (fin >= 0)
		close(fin);
	sigaction(SIGPIPE, &old, NULL);
	res->status = status;
	res->out = out.buf;
	res->outlen = out.len;
	res->err = err.buf;
	res->errlen = err.len;
	res->err_line_s = err.line_s;
	res->err_lines = err.nlines;
	take_where(res);
	return status;
}

void sp_t_result_free(struct sp_t_result *res)
{
	free(res->out);
	free(res->err);
	free(res->err_line_s);
	free(res->where);
	res->where = NULL;
	res->err_line_s = NULL;
	res->err_lines = 0;
	res->out = res->err = NULL;
	res->outlen = res->errlen = 0;
}

char *sp_t_read_file(const char *path, size_t *len)
{
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return NULL;
	struct sink s = {0};
	sink_add(&s, "", 0);
	char buf[65536];
	ssize_t r;
	while ((r = read(fd, buf, sizeof(buf))) > 0 || (r < 0 && errno == EINTR))
		if (r > 0)
			sink_add(&s, buf, (size_t)r);
	close(fd);
	if (len)
		*len = s.len;
	return s.buf;
}

int sp_t_write_file(const char *path, const void *data, size_t len)
{
	int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
	if (fd < 0)
		return -1;
	const char *p = data;
	while (len) {
		ssize_t w = write(fd, p, len);
		if (w < 0 && errno == EINTR)
			continue;
		if (w <= 0) {
			close(fd);
			return -1;
		}
		p += w;
		len -= (size_t)w;
	}
	return close(fd);
}

/* ------------------------------------------------------------------ 3. JSON */

struct jp {
	const char *p;
	int depth;
};

#define JSON_MAX_DEPTH 200

static void skip_ws(struct jp *s)
{
	while (*s->p == ' ' || *s->p == '\t' || *s->p == '\n' || *s->p == '\r')
		s->p++;
}

static int parse_value(struct jp *s, struct sp_json *out);

static void utf8_put(struct sink *b, unsigned cp)
{
	char u[4];
	size_t n;
	if (cp < 0x80) {
		u[0] = (char)cp;
		n = 1;
	} else if (cp < 0x800) {
		u[0] = (char)(0xc0 | (cp >> 6));
		u[1] = (char)(0x80 | (cp & 0x3f));
		n = 2;
	} else if (cp < 0x10000) {
		u[0] = (char)(0xe0 | (cp >> 12));
		u[1] = (char)(0x80 | ((cp >> 6) & 0x3f));
		u[2] = (char)(0x80 | (cp & 0x3f));
		n = 3;
	} else {
		u[0] = (char)(0xf0 | (cp >> 18));
		u[1] = (char)(0x80 | ((cp >> 12) & 0x3f));
		u[2] = (char)(0x80 | ((cp >> 6) & 0x3f));
		u[3] = (char)(0x80 | (cp & 0x3f));
		n = 4;
	}
	sink_add(b, u, n);
}

static int hex4(const char *p, unsigned *v)
{
	*v = 0;
	for (int i = 0; i < 4; i++) {
		char c = p[i];
		unsigned d;
		if (c >= '0' && c <= '9')
			d = (unsigned)(c - '0');
		else if (c >= 'a' && c <= 'f')
			d = (unsigned)(c - 'a' + 10);
		else if (c >= 'A' && c <= 'F')
			d = (unsigned)(c - 'A' + 10);
		else
			return -1;
		*v = *v * 16 + d;
	}
	return 0;
}

/* A string at s->p (on the opening quote); malloc'd result, NULL on error. */
static char *parse_string(struct jp *s)
{
	if (*s->p != '"')
		return NULL;
	s->p++;
	struct sink b = {0};
	sink_add(&b, "", 0);
	for (;;) {
		unsigned char c = (unsigned char)*s->p;
		if (c == 0 || c < 0x20) {
			free(b.buf);
			return NULL;
		}
		s->p++;
		if (c == '"')
			return b.buf;
		if (c != '\\') {
			char ch = (char)c;
			sink_add(&b, &ch, 1);
			continue;
		}
		char e = *s->p++;
		char ch;
		switch (e) {
		case '"':
		case '\\':
		case '/':
			ch = e;
			break;
		case 'b':
			ch = '\b';
			break;
		case 'f':
			ch = '\f';
			break;
		case 'n':
			ch = '\n';
			break;
		case 'r':
			ch = '\r';
			break;
		case 't':
			ch = '\t';
			break;
		case 'u': {
			unsigned cp;
			if (hex4(s->p, &cp)) {
				free(b.buf);
				return NULL;
			}
			s->p += 4;
			if (cp >= 0xd800 && cp < 0xdc00 && s->p[0] == '\\' && s->p[1] == 'u') {
				unsigned lo;
				if (hex4(s->p + 2, &lo) == 0 && lo >= 0xdc00 && lo < 0xe000) {
					cp = 0x10000 + ((cp - 0xd800) << 10) + (lo - 0xdc00);
					s->p += 6;
				}
			}
			utf8_put(&b, cp);
			continue;
		}
		default:
			free(b.buf);
			return NULL;
		}
		sink_add(&b, &ch, 1);
	}
}

static int parse_number(struct jp *s, struct sp_json *out)
{
	const char *st = s->p;
	const char *p = st;
	if (*p == '-')
		p++;
	if (*p == '0')
		p++;
	else if (*p >= '1' && *p <= '9')
		while (*p >= '0' && *p <= '9')
			p++;
	else
		return -1;
	if (*p == '.') {
		p++;
		if (!(*p >= '0' && *p <= '9'))
			return -1;
		while (*p >= '0' && *p <= '9')
			p++;
	}
	if (*p == 'e' || *p == 'E') {
		p++;
		if (*p == '+' || *p == '-')
			p++;
		if (!(*p >= '0' && *p <= '9'))
			return -1;
		while (*p >= '0' && *p <= '9')
			p++;
	}
	out->type = SPJ_NUM;
	out->str = xstrndup(st, (size_t)(p - st));
	out->num = strtod(out->str, NULL);
	s->p = p;
	return 0;
}

static int parse_container(struct jp *s, struct sp_json *out, int obj)
{
	char close = obj ? '}' : ']';
	size_t cap = 0;
	out->type = obj ? SPJ_OBJ : SPJ_ARR;
	s->p++;
	skip_ws(s);
	if (*s->p == close) {
		s->p++;
		return 0;
	}
	for (;;) {
		char *key = NULL;
		skip_ws(s);
		if (obj) {
			key = parse_string(s);
			if (!key)
				return -1;
			skip_ws(s);
			if (*s->p != ':') {
				free(key);
				return -1;
			}
			s->p++;
		}
		if (out->n == cap) {
			cap = cap ? cap * 2 : 4;
			out->kids = xrealloc(out->kids, cap * sizeof(*out->kids));
		}
		struct sp_json *k = &out->kids[out->n];
		memset(k, 0, sizeof(*k));
		k->key = key;
		out->n++;
		skip_ws(s);
		if (parse_value(s, k))
			return -1;
		skip_ws(s);
		if (*s->p == ',') {
			s->p++;
			continue;
		}
		if (*s->p == close) {
			s->p++;
			return 0;
		}
		return -1;
	}
}

/* The word (true, false, null) at s->p, into out as type with value num (out is zeroed); -1 when it is not there. */
static int parse_literal(struct jp *s, struct sp_json *out, const char *word, enum sp_json_type type, double num)
{
	size_t len = strlen(word);
	if (strncmp(s->p, word, len) != 0)
		return -1;
	out->type = type;
	out->num = num;
	s->p += len;
	return 0;
}

static int parse_value(struct jp *s, struct sp_json *out)
{
	skip_ws(s);
	if (++s->depth > JSON_MAX_DEPTH)
		return -1;
	int rc = -1;
	switch (*s->p) {
	case '{':
		rc = parse_container(s, out, 1);
		break;
	case '[':
		rc = parse_container(s, out, 0);
		break;
	case '"':
		out->type = SPJ_STR;
		out->str = parse_string(s);
		rc = out->str ? 0 : -1;
		break;
	case 't':
		rc = parse_literal(s, out, "true", SPJ_BOOL, 1);
		break;
	case 'f':
		rc = parse_literal(s, out, "false", SPJ_BOOL, 0);
		break;
	case 'n':
		rc = parse_literal(s, out, "null", SPJ_NULL, 0);
		break;
	default:
		rc = parse_number(s, out);
		break;
	}
	s->depth--;
	return rc;
}

static void json_free_inner(struct sp_json *j)
{
	for (size_t i = 0; i < j->n; i++)
		json_free_inner(&j->kids[i]);
	free(j->kids);
	free(j->str);
	free(j->key);
}

void sp_json_free(struct sp_json *j)
{
	if (!j)
		return;
	json_free_inner(j);
	free(j);
}

struct sp_json *sp_json_parse(const char *text)
{
	if (!text)
		return NULL;
	struct jp s = {.p = text};
	struct sp_json *j = xmalloc(sizeof(*j));
	memset(j, 0, sizeof(*j));
	if (parse_value(&s, j)) {
		sp_json_free(j);
		return NULL;
	}
	skip_ws(&s);
	if (*s.p) {
		sp_json_free(j);
		return NULL;
	}
	return j;
}

struct sp_json *sp_json_get(const struct sp_json *j, const char *key)
{
	if (!j || j->type != SPJ_OBJ || !key)
		return NULL;
	for (size_t i = 0; i < j->n; i++)
		if (strcmp(j->kids[i].key, key) == 0)
			return &j->kids[i];
	return NULL;
}

struct sp_json *sp_json_at(const struct sp_json *j, size_t i)
{
	if (!j || (j->type != SPJ_ARR && j->type != SPJ_OBJ) || i >= j->n)
		return NULL;
	return &j->kids[i];
}

struct sp_json *sp_json_path(const struct sp_json *j, const char *path)
{
	if (!path || !*path)
		return (struct sp_json *)j;
	char seg[256];
	const char *p = path;
	const struct sp_json *cur = j;
	while (cur && *p) {
		size_t n = strcspn(p, ".");
		if (n >= sizeof(seg))
			return NULL;
		memcpy(seg, p, n);
		seg[n] = 0;
		p += n;
		if (*p == '.')
			p++;
		if (cur->type == SPJ_ARR) {
			char *end;
			unsigned long idx = strtoul(seg, &end, 10);
			if (!n || *end)
				return NULL;
			cur = sp_json_at(cur, idx);
		} else {
			cur = sp_json_get(cur, seg);
		}
	}
	return (struct sp_json *)cur;
}

double sp_json_num(const struct sp_json *j, const char *path, double dflt)
{
	const struct sp_json *v = sp_json_path(j, path);
	if (!v || (v->type != SPJ_NUM && v->type != SPJ_BOOL))
		return dflt;
	return v->num;
}

uint64_t sp_json_u64(const struct sp_json *j, const char *path, uint64_t dflt)
{
	const struct sp_json *v = sp_json_path(j, path);
	if (!v || v->type != SPJ_NUM || !v->str || v->str[0] == '-')
		return dflt;
	char *end;
	errno = 0;
	unsigned long long x = strtoull(v->str, &end, 10);
	if (errno || *end)
		return (uint64_t)v->num;
	return x;
}

int64_t sp_json_i64(const struct sp_json *j, const char *path, int64_t dflt)
{
	const struct sp_json *v = sp_json_path(j, path);
	if (!v || v->type != SPJ_NUM || !v->str)
		return dflt;
	char *end;
	errno = 0;
	long long x = strtoll(v->str, &end, 10);
	if (errno || *end)
		return (int64_t)v->num;
	return x;
}

const char *sp_json_str(const struct sp_json *j, const char *path)
{
	const struct sp_json *v = sp_json_path(j, path);
	return v && v->type == SPJ_STR ? v->str : NULL;
}

size_t sp_json_parse_lines(const char *text, struct sp_json ***out)
{
	size_t n = 0, cap = 0;
	struct sp_json **arr = NULL;
	const char *p = text ? text : "";
	while (*p) {
		const char *nl = strchr(p, '\n');
		size_t len = nl ? (size_t)(nl - p) : strlen(p);
		char *line = xstrndup(p, len);
		p += len + (nl ? 1 : 0);
		const char *q = line;
		while (*q == ' ' || *q == '\t' || *q == '\r')
			q++;
		if (!*q) {
			free(line);
			continue;
		}
		if (n == cap) {
			cap = cap ? cap * 2 : 64;
			arr = xrealloc(arr, cap * sizeof(*arr));
		}
		/* A line that does not parse is kept as NULL, so that counts stay honest. */
		arr[n++] = sp_json_parse(line);
		free(line);
	}
	*out = arr;
	return n;
}

void sp_json_free_lines(struct sp_json **arr, size_t n)
{
	for (size_t i = 0; i < n; i++)
		sp_json_free(arr[i]);
	free(arr);
}

void sp_t_note(const char *fmt, ...)
{
	char line[1024];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(line, sizeof(line), fmt, ap);
	va_end(ap);
	fprintf(stderr, "note: %s\n", line);
}

size_t sp_t_svg_label_overlaps(const char *svg, const char *end, double char_px, size_t *nlabels, int *zero_ns)
{
	struct box {
		double l, r, y;
	} *b = NULL;
	size_t nb = 0, cap = 0, overlaps = 0;
	*zero_ns = 0;
	for (const char *p = strstr(svg, "<text "); p && p < end; p = strstr(p + 1, "<text ")) {
		double x, y;
		char anchor[16] = "start";
		const char *gt = strchr(p, '>'), *close = gt ? strstr(gt, "</text>") : NULL;
		if (!close || sscanf(p, "<text x=\"%lf\" y=\"%lf\"", &x, &y) != 2)
			continue;
		const char *an = strstr(p, "text-anchor=\"");
		if (an && an < gt)
			sscanf(an, "text-anchor=\"%15[a-z]", anchor);
		double w = char_px * (double)(close - gt - 1);
		double l = !strcmp(anchor, "middle") ? x - w / 2 : !strcmp(anchor, "end") ? x - w : x;
		*zero_ns |= !strncmp(gt + 1, "0 ns<", 5);
		if (nb == cap) {
			cap = cap ? 2 * cap : 64;
			struct box *v = realloc(b, cap * sizeof(*b));
			if (!v)
				break;
			b = v;
		}
		b[nb++] = (struct box){l, l + w, y};
	}
	for (size_t i = 0; i < nb; i++)
		for (size_t k = i + 1; k < nb; k++)
			overlaps += b[i].y - b[k].y < 8 && b[k].y - b[i].y < 8 && b[i].l < b[k].r && b[k].l < b[i].r;
	free(b);
	*nlabels = nb;
	return overlaps;
}
