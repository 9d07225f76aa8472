/*
 * rank_summary.c - rank summaries written by `analyze --rank-summary` and
 * combined by `stepprof merge` (rank_summary.h).
 *
 * Reading is strict: a line that does not parse, a number out of range, a
 * category or finding name this stepprof does not know, a unit naming a host
 * not declared before it, all end the read with "FILE:LINE: what".
 */
#include "rank_summary.h"

#include <ctype.h>
#include <errno.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include "analyze_int.h"

/* ------------------------------------------------------------- writing */

static void put_name(FILE *f, const char *s)
{
	/* h: then the name, every byte outside [A-Za-z0-9._-] as %XX */
	fputs("h:", f);
	for (const unsigned char *p = (const unsigned char *)s; *p; p++) {
		if (isalnum(*p) || *p == '.' || *p == '_' || *p == '-')
			fputc(*p, f);
		else
			fprintf(f, "%%%02X", *p);
	}
}

int rs_write(FILE *f, const struct an_analysis *a)
{
	fprintf(f, "%s\ncategories", RS_MAGIC);
	for (int c = 0; c < AN_CAT__COUNT; c++)
		fprintf(f, " %s", an_cat_name[c]);
	fputc('\n', f);
	fprintf(f, "nccl %" PRIu64 "\n", a->comm_records);
	for (size_t i = 0; i < a->nranks; i++) {
		const struct an_rank *r = &a->ranks[i];
		fprintf(f, "rank %" PRId32 " %" PRId32 " %" PRId32 " %" PRId32 " %s %" PRIu64 " %" PRIu64 " %" PRIu64
			   " %" PRIu64 " %s",
			r->rank, r->local_rank, r->world_size, r->pid, an_source_name[r->source_kind], r->launches, r->nit,
			r->wall_median, r->wall_total, r->top_finding >= 0 ? an_finding_name[r->top_finding] : "-");
		for (int c = 0; c < AN_CAT__COUNT; c++)
			fprintf(f, " %" PRIu64, r->bd_total[c]);
		for (int c = 0; c < AN_CAT__COUNT; c++)
			fprintf(f, " %" PRIu64, r->bd1_total[c]);
		fprintf(f, " %" PRIu64 "\n", r->comm_overlapped_ns);
	}
	for (uint32_t h = 0; h < a->comm_hosts && a->comm_host_names; h++) {
		fprintf(f, "host %" PRIu32 " ", h);
		put_name(f, a->comm_host_names[h]);
		fputc('\n', f);
	}
	for (size_t k = 0; k < a->ncomm_calls; k++) {
		const struct cm_call *c = &a->comm_calls[k];
		fprintf(f,
			"call %016" PRIx64 " %" PRIu64 " %" PRIu32 " %" PRId32 " %" PRId32 " %" PRIu32 " %" PRId64
			" %" PRIu64 " %" PRIu64 " %" PRIu64 "\n",
			c->ident, c->seq, c->nranks, c->crank, c->rank, c->host, c->to_real_ns, c->call_ns, c->gpu_begin_ns,
			c->gpu_end_ns);
	}
	return ferror(f) ? -1 : 0;
}

/* ------------------------------------------------------------- reading */

struct rd {
	const char *name;
	unsigned long line;
	char *err;
	size_t errlen;
	char *save; /* strtok_r */
};

static int bad(struct rd *r, const char *what, const char *tok)
{
	snprintf(r->err, r->errlen, "%s:%lu: %s%s%s%s", r->name, r->line, what, tok ? " '" : "",
		 tok ? tok : "", tok ? "'" : "");
	return -1;
}

static char *tok(struct rd *r)
{
	return strtok_r(NULL, " \n", &r->save);
}

static int get_u64(struct rd *r, uint64_t *v, int base)
{
	char *t = tok(r), *end;
	if (!t)
		return bad(r, "line ends early", NULL);
	if (*t == '-' || *t == '+')
		return bad(r, "not a non-negative integer:", t);
	errno = 0;
	unsigned long long x = strtoull(t, &end, base);
	if (end == t || *end || errno)
		return bad(r, "not a non-negative integer:", t);
	*v = x;
	return 0;
}

static int get_i64(struct rd *r, int64_t *v, int64_t lo, int64_t hi)
{
	char *t = tok(r), *end;
	if (!t)
		return bad(r, "line ends early", NULL);
	errno = 0;
	long long x = strtoll(t, &end, 10);
	if (end == t || *end || errno || x < lo || x > hi)
		return bad(r, "integer missing or out of range:", t);
	*v = x;
	return 0;
}

static int get_i32(struct rd *r, int32_t *v, int32_t lo)
{
	int64_t x;
	if (get_i64(r, &x, lo, INT32_MAX))
		return -1;
	*v = (int32_t)x;
	return 0;
}

static int name_index(const char *const *names, int n, const char *s)
{
	for (int i = 0; i < n; i++)
		if (!strcmp(names[i], s))
			return i;
	return -1;
}

static int hexval(int c)
{
	return isdigit(c) ? c - '0' : isxdigit(c) ? tolower(c) - 'a' + 10 : -1;
}

/* "h:..." decoded into out (64 bytes); -1 when malformed. */
static int get_name(struct rd *r, char out[64])
{
	char *t = tok(r);
	if (!t || strncmp(t, "h:", 2))
		return bad(r, "host name missing (h:NAME)", NULL);
	size_t n = 0;
	for (const char *p = t + 2; *p; p++) {
		int c = (unsigned char)*p;
		if (c == '%') {
			int h = p[1] ? hexval((unsigned char)p[1]) : -1, l = h >= 0 && p[2] ? hexval((unsigned char)p[2]) : -1;
			if (h < 0 || l < 0 || (h == 0 && l == 0))
				return bad(r, "bad %XX in host name:", t);
			c = h * 16 + l;
			p += 2;
		} else if (!isalnum(c) && c != '.' && c != '_' && c != '-') {
			return bad(r, "bad character in host name:", t);
		}
		if (n >= 63)
			return bad(r, "host name longer than 63 bytes", NULL);
		out[n++] = (char)c;
	}
	out[n] = 0;
	return 0;
}

static int host_global(struct an_analysis *a, const char name[64])
{
	for (uint32_t h = 0; h < a->comm_hosts; h++)
		if (!strcmp(a->comm_host_names[h], name))
			return (int)h;
	char(*v)[64] = realloc(a->comm_host_names, (a->comm_hosts + 1) * sizeof(*v));
	if (!v)
		return -1;
	a->comm_host_names = v;
	memcpy(v[a->comm_hosts], name, 64);
	return (int)a->comm_hosts++;
}

static int read_rank(struct rd *r, struct an_analysis *a, const int *cat_of, int ncat)
{
	struct an_rank x = {0};
	uint64_t v;
	char *t;
	if (get_i32(r, &x.rank, -1) || get_i32(r, &x.local_rank, -1) || get_i32(r, &x.world_size, -1) ||
	    get_i32(r, &x.pid, 1))
		return -1;
	if (!(t = tok(r)))
		return bad(r, "line ends early", NULL);
	int sk = name_index(an_source_name, 4, t);
	if (sk < 0)
		return bad(r, "unknown iteration source", t);
	x.source_kind = sk;
	if (get_u64(r, &x.launches, 10) || get_u64(r, &x.nit, 10) || get_u64(r, &x.wall_median, 10) ||
	    get_u64(r, &x.wall_total, 10))
		return -1;
	if (!(t = tok(r)))
		return bad(r, "line ends early", NULL);
	x.top_finding = -1;
	if (strcmp(t, "-") && (x.top_finding = name_index(an_finding_name, AN_F__COUNT, t)) < 0)
		return bad(r, "unknown finding", t);
	for (int c = 0; c < 2 * ncat; c++) {
		if (get_u64(r, &v, 10))
			return -1;
		if (cat_of[c % ncat] >= 0)
			(c < ncat ? x.bd_total : x.bd1_total)[cat_of[c % ncat]] = v;
	}
	if (get_u64(r, &x.comm_overlapped_ns, 10))
		return -1;
	if (tok(r))
		return bad(r, "extra fields on a rank line", NULL);
	for (size_t i = 0; i < a->nranks; i++)
		if (a->ranks[i].rank == x.rank && x.rank >= 0)
			return bad(r, "rank already given by a summary read before", NULL);
	struct an_rank *nv = realloc(a->ranks, (a->nranks + 1) * sizeof(*nv));
	if (!nv)
		return bad(r, "out of memory", NULL);
	a->ranks = nv;
	a->ranks[a->nranks++] = x;
	return 0;
}

static int read_call(struct rd *r, struct an_analysis *a, const int *host_map, uint32_t nmap)
{
	struct cm_call c = {0};
	uint64_t v;
	int64_t s;
	if (get_u64(r, &c.ident, 16) || get_u64(r, &c.seq, 10) || get_u64(r, &v, 10))
		return -1;
	if (!v || v > INT32_MAX)
		return bad(r, "communicator size out of range", NULL);
	c.nranks = (uint32_t)v;
	if (get_i32(r, &c.crank, 0) || get_i32(r, &c.rank, -1) || get_u64(r, &v, 10))
		return -1;
	if ((uint32_t)c.crank >= c.nranks)
		return bad(r, "rank in the communicator not below its size", NULL);
	if (v >= nmap || host_map[v] < 0)
		return bad(r, "unit of a host not declared before it", NULL);
	c.host = (uint32_t)host_map[v];
	if (get_i64(r, &s, INT64_MIN, INT64_MAX))
		return -1;
	c.to_real_ns = s;
	if (get_u64(r, &c.call_ns, 10) || get_u64(r, &c.gpu_begin_ns, 10) || get_u64(r, &c.gpu_end_ns, 10))
		return -1;
	if (tok(r))
		return bad(r, "extra fields on a call line", NULL);
	if (a->ncomm_calls % 1024 == 0) {
		struct cm_call *nv = realloc(a->comm_calls, (a->ncomm_calls + 1024) * sizeof(*nv));
		if (!nv)
			return bad(r, "out of memory", NULL);
		a->comm_calls = nv;
	}
	a->comm_calls[a->ncomm_calls++] = c;
	return 0;
}

int rs_read(FILE *f, const char *name, struct an_analysis *a, char *err, size_t errlen)
{
	struct rd r = {.name = name, .err = err, .errlen = errlen};
	char *line = NULL;
	size_t cap = 0;
	ssize_t len;
	int cat_of[64], ncat = -1, rc = 0;
	int host_map[4096];
	uint32_t nmap = 0;
	while (!rc && (len = getline(&line, &cap, f)) >= 0) {
		r.line++;
		if ((size_t)len != strlen(line)) {
			rc = bad(&r, "NUL byte in the line", NULL);
			break;
		}
		if (r.line == 1) {
			if (strcmp(line, RS_MAGIC "\n"))
				rc = bad(&r, "not a stepprof rank summary (version 1): no '" RS_MAGIC "' line", NULL);
			continue;
		}
		char *k = strtok_r(line, " \n", &r.save);
		if (!k) {
			rc = bad(&r, "empty line", NULL);
		} else if (!strcmp(k, "categories")) {
			if (ncat >= 0) {
				rc = bad(&r, "categories given twice", NULL);
				break;
			}
			ncat = 0;
			char *t;
			while (!rc && (t = tok(&r))) {
				if (ncat == 64)
					rc = bad(&r, "too many categories", NULL);
				else
					cat_of[ncat++] = name_index(an_cat_name, AN_CAT__COUNT, t);
			}
		} else if (!strcmp(k, "nccl")) {
			uint64_t v;
			if (!(rc = get_u64(&r, &v, 10))) {
				if (tok(&r))
					rc = bad(&r, "extra fields on the nccl line", NULL);
				a->comm_records += v;
			}
		} else if (!strcmp(k, "rank")) {
			rc = ncat < 0 ? bad(&r, "rank line before the categories", NULL) : read_rank(&r, a, cat_of, ncat);
		} else if (!strcmp(k, "host")) {
			uint64_t idx;
			char nm[64];
			if (!(rc = get_u64(&r, &idx, 10)) && !(rc = get_name(&r, nm))) {
				if (idx != nmap || nmap == sizeof(host_map) / sizeof(host_map[0]))
					rc = bad(&r, "host lines out of order or too many", NULL);
				else if (tok(&r))
					rc = bad(&r, "extra fields on a host line", NULL);
				else if ((host_map[nmap++] = host_global(a, nm)) < 0)
					rc = bad(&r, "out of memory", NULL);
			}
		} else if (!strcmp(k, "call")) {
			rc = read_call(&r, a, host_map, nmap);
		} else {
			rc = bad(&r, "unknown line", k);
		}
	}
	if (!rc && r.line == 0)
		rc = bad(&r, "empty file", NULL);
	else if (!rc && ferror(f))
		rc = bad(&r, "read error", NULL);
	else if (!rc && ncat < 0)
		rc = bad(&r, "no categories line", NULL);
	free(line);
	return rc;
}

/* ------------------------------------------------------------ finishing */

static int cmp_host(const void *x, const void *y)
{
	return strcmp(x, y);
}

int rs_finish(struct an_analysis *a)
{
	if (a->nranks)
		qsort(a->ranks, a->nranks, sizeof(*a->ranks), an_rank_cmp);
	/* selected: the default of analyze, the lowest rank that launched kernels */
	int sel = -1;
	for (size_t i = 0; i < a->nranks; i++) {
		a->ranks[i].selected = 0;
		if (sel < 0 && a->ranks[i].launches)
			sel = (int)i;
	}
	if (sel < 0 && a->nranks)
		sel = 0;
	if (sel >= 0)
		a->ranks[sel].selected = 1;
	/* hosts in the order of their names, as one analysis of all the files has them */
	if (a->comm_hosts > 1) {
		char(*sorted)[64] = malloc(a->comm_hosts * sizeof(*sorted));
		uint32_t *map = malloc(a->comm_hosts * sizeof(*map));
		if (!sorted || !map) {
			free(sorted);
			free(map);
			return -1;
		}
		memcpy(sorted, a->comm_host_names, a->comm_hosts * sizeof(*sorted));
		qsort(sorted, a->comm_hosts, sizeof(*sorted), cmp_host);
		for (uint32_t h = 0; h < a->comm_hosts; h++)
			for (uint32_t k = 0; k < a->comm_hosts; k++)
				if (!strcmp(a->comm_host_names[h], sorted[k]))
					map[h] = k;
		for (size_t k = 0; k < a->ncomm_calls; k++)
			a->comm_calls[k].host = map[a->comm_calls[k].host];
		free(a->comm_host_names);
		a->comm_host_names = sorted;
		free(map);
	}
	if (an_comm_match(a) || an_findings_straggler(a))
		return -1;
	an_findings_order(a);
	return 0;
}
