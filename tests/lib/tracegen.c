/*
 * tracegen.c - test-side builder of v1 trace files (see tracegen.h).
 *
 * Divided into:
 *   1. the builder state: header, keep-area slots, ring chunks, per-thread
 *      current chunk, a string hash for interning,
 *   2. adding strings and records (the chunk allocation mirrors the recorder:
 *      a thread takes the next sequence number when its chunk is full),
 *   3. laying the file out (image) and writing it.
 *
 * Records are encoded with trace.h's codec only, so the tests exercise the same
 * encoder the recorder uses and the reader's decoder independently of this file.
 */
#include "tracegen.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* ---------------------------------------------------------- 1. the state */

struct tg_chunk {
	uint8_t *mem;	  /* chunk_size bytes, NULL while never allocated */
	uint64_t records; /* committed records in it */
};

struct tg_thread {
	int32_t pid, tid;
	int64_t cur; /* ring position of the current chunk, -1 none */
};

struct tg_str {
	char *s;
	unsigned len;
	uint32_t id;
};

struct sp_tg {
	char *path;
	struct sp_file_header hdr;
	struct sp_tg_opts o;
	struct sp_slot *keep; /* keep-area slots in order */
	uint64_t nkeep, capkeep;
	struct tg_chunk *chunks; /* by ring position */
	uint64_t nchunks;	 /* positions in use (growing ring) or ring_chunks */
	struct tg_thread *thr;
	size_t nthr, capthr;
	struct tg_str *hash; /* open addressing, power of two */
	size_t nhash, caphash;
	uint32_t next_id;
	uint64_t records;
};

static void *tg_alloc(size_t n)
{
	void *p = calloc(1, n ? n : 1);
	if (!p)
		abort();
	return p;
}

static void *tg_grow(void *p, size_t n)
{
	p = realloc(p, n ? n : 1);
	if (!p)
		abort();
	return p;
}

struct sp_tg *sp_tg_create_opts(const char *path, const struct sp_tg_opts *opts)
{
	struct sp_tg *g = tg_alloc(sizeof(*g));
	g->o = *opts;
	if (!g->o.chunk_size)
		g->o.chunk_size = 65536;
	if (g->o.chunk_size < (SP_CHUNK_HDR_SLOTS + 1) * SP_SLOT_SIZE || g->o.chunk_size % SP_SLOT_SIZE)
		abort();
	if (!g->o.keep_slots)
		g->o.keep_slots = 4096;
	if (!g->o.start_mono_ns)
		g->o.start_mono_ns = 1000000000ull;
	g->path = path ? strdup(path) : NULL;
	g->next_id = 1;

	struct sp_file_header *h = &g->hdr;
	memcpy(h->magic, SP_MAGIC, 8);
	h->version_major = SP_VERSION_MAJOR;
	h->version_minor = SP_VERSION_MINOR;
	h->header_size = SP_HEADER_SIZE;
	h->endian = SP_ENDIAN_TAG;
	h->chunk_size = g->o.chunk_size;
	h->pid = g->o.pid;
	h->ppid = g->o.ppid;
	h->rank = g->o.rank;
	h->local_rank = -1;
	h->world_size = -1;
	h->start_mono_ns = g->o.start_mono_ns;
	h->start_real_ns = 1700000000000000000ull;
	snprintf(h->host, sizeof(h->host), "%s", g->o.host ? g->o.host : "testhost");
	snprintf(h->cmdline, sizeof(h->cmdline), "%s", g->o.cmdline ? g->o.cmdline : "python train.py");
	if (g->o.ring_chunks) {
		g->nchunks = g->o.ring_chunks;
		g->chunks = tg_alloc(g->nchunks * sizeof(*g->chunks));
	}
	return g;
}

struct sp_tg *sp_tg_create(const char *path, int32_t pid, int32_t ppid, int32_t rank)
{
	struct sp_tg_opts o = {.pid = pid, .ppid = ppid, .rank = rank};
	return sp_tg_create_opts(path, &o);
}

struct sp_file_header *sp_tg_header(struct sp_tg *g)
{
	return &g->hdr;
}

uint64_t sp_tg_records(const struct sp_tg *g)
{
	return g->records;
}

uint64_t sp_tg_overwritten(const struct sp_tg *g)
{
	return g->hdr.overwritten_records;
}

/* ------------------------------------------------- 2. strings and records */

static struct sp_slot *keep_reserve(struct sp_tg *g, unsigned n)
{
	if (g->nkeep + n > g->capkeep) {
		g->capkeep = (g->nkeep + n) * 2;
		g->keep = tg_grow(g->keep, g->capkeep * sizeof(*g->keep));
	}
	struct sp_slot *s = &g->keep[g->nkeep];
	memset(s, 0, n * sizeof(*s));
	g->nkeep += n;
	return s;
}

void sp_tg_string(struct sp_tg *g, uint32_t id, const char *s, unsigned len)
{
	if (len > SP_MAX_STRING)
		len = SP_MAX_STRING;
	struct sp_slot *sl = keep_reserve(g, sp_string_slots(len));
	sp_string_encode(sl, id, s, len);
	sl->kind = SP_K_STRING;
}

static uint64_t str_hash(const char *s, unsigned len)
{
	uint64_t h = 1469598103934665603ull;
	for (unsigned i = 0; i < len; i++)
		h = (h ^ (uint8_t)s[i]) * 1099511628211ull;
	return h;
}

uint32_t sp_tg_intern(struct sp_tg *g, const char *s)
{
	unsigned len = (unsigned)strnlen(s, SP_MAX_STRING);
	if ((g->nhash + 1) * 2 > g->caphash) {
		size_t nc = g->caphash ? g->caphash * 2 : 256;
		struct tg_str *nh = tg_alloc(nc * sizeof(*nh));
		for (size_t i = 0; i < g->caphash; i++) {
			if (!g->hash[i].s)
				continue;
			size_t j = str_hash(g->hash[i].s, g->hash[i].len) & (nc - 1);
			while (nh[j].s)
				j = (j + 1) & (nc - 1);
			nh[j] = g->hash[i];
		}
		free(g->hash);
		g->hash = nh;
		g->caphash = nc;
	}
	size_t j = str_hash(s, len) & (g->caphash - 1);
	while (g->hash[j].s) {
		if (g->hash[j].len == len && memcmp(g->hash[j].s, s, len) == 0)
			return g->hash[j].id;
		j = (j + 1) & (g->caphash - 1);
	}
	char *copy = tg_alloc(len + 1);
	memcpy(copy, s, len);
	g->hash[j] = (struct tg_str){.s = copy, .len = len, .id = g->next_id++};
	g->nhash++;
	sp_tg_string(g, g->hash[j].id, s, len);
	return g->hash[j].id;
}

static struct tg_thread *thread_of(struct sp_tg *g, int32_t pid, int32_t tid)
{
	for (size_t i = 0; i < g->nthr; i++)
		if (g->thr[i].pid == pid && g->thr[i].tid == tid)
			return &g->thr[i];
	if (g->nthr == g->capthr) {
		g->capthr = g->capthr ? g->capthr * 2 : 8;
		g->thr = tg_grow(g->thr, g->capthr * sizeof(*g->thr));
	}
	struct tg_thread *t = &g->thr[g->nthr++];
	*t = (struct tg_thread){.pid = pid, .tid = tid, .cur = -1};
	return t;
}

static struct sp_chunk_header *chunk_hdr(struct sp_tg *g, int64_t pos)
{
	return (struct sp_chunk_header *)g->chunks[pos].mem;
}

/* The next chunk for t, taking ring position seq % ring_chunks (or a new one). */
static void new_chunk(struct sp_tg *g, struct tg_thread *t)
{
	if (t->cur >= 0)
		chunk_hdr(g, t->cur)->state = SP_CHUNK_CLOSED;
	uint64_t seq = g->hdr.ring_next_seq++;
	uint64_t pos;
	if (g->o.ring_chunks) {
		pos = seq % g->o.ring_chunks;
	} else {
		pos = seq;
		g->chunks = tg_grow(g->chunks, (seq + 1) * sizeof(*g->chunks));
		g->chunks[pos] = (struct tg_chunk){0};
		g->nchunks = seq + 1;
	}
	struct tg_chunk *c = &g->chunks[pos];
	if (c->mem) {
		/* Ring reuse: the oldest chunk's records are gone, as in the recorder. */
		g->hdr.overwritten_records += c->records;
		g->hdr.overwritten_chunks++;
		for (size_t i = 0; i < g->nthr; i++)
			if (g->thr[i].cur == (int64_t)pos)
				g->thr[i].cur = -1;
	} else {
		c->mem = tg_alloc(g->o.chunk_size);
	}
	memset(c->mem, 0, g->o.chunk_size);
	c->records = 0;
	struct sp_chunk_header *h = chunk_hdr(g, (int64_t)pos);
	h->magic = SP_CHUNK_MAGIC;
	h->state = SP_CHUNK_ACTIVE;
	h->seq = seq;
	h->pid = t->pid;
	h->tid = t->tid;
	t->cur = (int64_t)pos;
}

static void add_ring(struct sp_tg *g, int32_t pid, int32_t tid, unsigned kind, unsigned api, uint64_t begin,
		     uint64_t end, const uint64_t *f)
{
	uint64_t zero[SP_F__COUNT] = {0};
	if (!f)
		f = zero;
	if (kind == SP_K_NONE || kind >= SP_K__COUNT || kind == SP_K_STRING)
		abort(); /* a test bug: strings go through sp_tg_intern/sp_tg_string */
	struct tg_thread *t = thread_of(g, pid, tid);
	unsigned n = sp_kind_slots(kind);
	uint32_t cap = g->o.chunk_size / SP_SLOT_SIZE - SP_CHUNK_HDR_SLOTS;
	if (n > cap)
		abort();
	if (t->cur < 0 || chunk_hdr(g, t->cur)->used + n > cap)
		new_chunk(g, t);
	struct sp_chunk_header *h = chunk_hdr(g, t->cur);
	struct sp_slot *s = (struct sp_slot *)(g->chunks[t->cur].mem + (SP_CHUNK_HDR_SLOTS + h->used) * SP_SLOT_SIZE);
	sp_encode(s, kind, api, begin, end > begin ? end - begin : 0, f);
	s->kind = (uint8_t)kind;
	if (!h->used)
		h->first_ns = begin;
	h->used += n;
	g->chunks[t->cur].records++;
	g->records++;
}

void sp_tg_addv(struct sp_tg *g, int32_t tid, unsigned kind, unsigned api, uint64_t begin_ns, uint64_t end_ns,
		const uint64_t *f)
{
	add_ring(g, g->hdr.pid, tid, kind, api, begin_ns, end_ns, f);
}

void sp_tg_add_event(struct sp_tg *g, const struct sp_event *ev)
{
	add_ring(g, ev->pid, ev->tid, ev->kind, ev->api, ev->begin_ns, ev->end_ns, ev->f);
}

void sp_tg_addf(struct sp_tg *g, int32_t tid, unsigned kind, unsigned api, uint64_t begin_ns, uint64_t end_ns,
		const struct sp_tg_field *fields)
{
	uint64_t f[SP_F__COUNT] = {0};
	for (; fields && fields->field != -1; fields++) {
		if (fields->field == -2)
			continue;
		if (fields->field < 0 || fields->field >= SP_F__COUNT)
			abort();
		f[fields->field] = fields->value;
	}
	add_ring(g, g->hdr.pid, tid, kind, api, begin_ns, end_ns, f);
}

void sp_tg_add_keep(struct sp_tg *g, unsigned kind, unsigned api, uint64_t begin_ns, uint64_t end_ns, const uint64_t *f)
{
	uint64_t zero[SP_F__COUNT] = {0};
	if (kind == SP_K_NONE || kind >= SP_K__COUNT || kind == SP_K_STRING)
		abort();
	struct sp_slot *s = keep_reserve(g, sp_kind_slots(kind));
	sp_encode(s, kind, api, begin_ns, end_ns > begin_ns ? end_ns - begin_ns : 0, f ? f : zero);
	s->kind = (uint8_t)kind;
}

void sp_tg_close_thread(struct sp_tg *g, int32_t pid, int32_t tid)
{
	struct tg_thread *t = thread_of(g, pid, tid);
	if (t->cur >= 0)
		chunk_hdr(g, t->cur)->state = SP_CHUNK_CLOSED;
	t->cur = -1;
}

/* ------------------------------------------------------------ 3. the file */

static void tg_free(struct sp_tg *g)
{
	for (uint64_t i = 0; i < g->nchunks; i++)
		free(g->chunks[i].mem);
	free(g->chunks);
	for (size_t i = 0; i < g->caphash; i++)
		free(g->hash[i].s);
	free(g->hash);
	free(g->thr);
	free(g->keep);
	free(g->path);
	free(g);
}

uint8_t *sp_tg_image(struct sp_tg *g, size_t *len)
{
	if (!g->o.leave_active)
		for (size_t i = 0; i < g->nthr; i++)
			if (g->thr[i].cur >= 0)
				chunk_hdr(g, g->thr[i].cur)->state = SP_CHUNK_CLOSED;
	struct sp_file_header *h = &g->hdr;
	if (g->nkeep > g->o.keep_slots)
		g->o.keep_slots = g->nkeep;
	h->keep_slots = g->o.keep_slots;
	h->keep_next_slot = g->nkeep;
	h->ring_chunks = (uint32_t)g->nchunks;
	h->file_size = SP_HEADER_SIZE + h->keep_slots * SP_SLOT_SIZE + (uint64_t)h->ring_chunks * h->chunk_size;

	size_t n = (size_t)h->file_size;
	uint8_t *img = tg_alloc(n);
	memcpy(img, h, sizeof(*h));
	if (g->nkeep)
		memcpy(img + SP_HEADER_SIZE, g->keep, g->nkeep * SP_SLOT_SIZE);
	uint8_t *ring = img + SP_HEADER_SIZE + h->keep_slots * SP_SLOT_SIZE;
	for (uint64_t i = 0; i < g->nchunks; i++)
		if (g->chunks[i].mem)
			memcpy(ring + i * h->chunk_size, g->chunks[i].mem, h->chunk_size);
	*len = n;
	tg_free(g);
	return img;
}

int sp_tg_finish(struct sp_tg *g)
{
	char *path = g->path ? strdup(g->path) : NULL;
	size_t len;
	uint8_t *img = sp_tg_image(g, &len);
	int rc = -1;
	if (path) {
		unlink(path);
		int fd = open(path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
		if (fd >= 0) {
			size_t off = 0;
			while (off < len) {
				ssize_t w = write(fd, img + off, len - off);
				if (w < 0 && errno == EINTR)
					continue;
				if (w <= 0)
					break;
				off += (size_t)w;
			}
			rc = close(fd) == 0 && off == len ? 0 : -1;
		}
	}
	int e = errno;
	free(img);
	free(path);
	errno = e;
	return rc;
}
