/*
 * watch_follow.c - the files of a watched directory, read incrementally (see
 * watch.h): at each tick every file is opened again and resumed where the last
 * read stopped (sp_reader_resume), so a tick costs the file's chunk index and
 * the new records, not the file.
 *
 * Divided into:
 *   1. a file's strings and live allocations;
 *   2. the record buffer and its an_source;
 *   3. one file's new records;
 *   4. the directory, watch_poll.
 */
#include "watch.h"
#include "util.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <malloc.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

/* ------------------------------------------ 1. strings and allocations */

const char *watch_string(const struct watch_file *f, uint32_t id)
{
	return id ? hashmap_get(&f->strings, id) : NULL;
}

/* The strings of the open reader that f does not know yet (the table is read at open, a few hundred). */
static void take_strings(struct watch_file *f, const struct sp_reader *r)
{
	uint32_t id;
	const char *str;
	for (size_t i = 0; sp_reader_strings(r, i, &id, &str); i++) {
		if (!id || hashmap_find(&f->strings, id))
			continue;
		char *c = strdup(str);
		union hashmap_val *v = c ? hashmap_slot(&f->strings, id, true) : NULL;
		if (v)
			v->p = c;
		else
			free(c);
	}
}

static void track_memory(struct watch_file *f, const struct sp_event *ev)
{
	unsigned d = (unsigned)ev->f[SP_F_DEVICE];
	if (d >= SP_MAX_DEVICES)
		return;
	uint64_t key = ev->f[SP_F_DPTR];
	switch (ev->kind) {
	case SP_K_ALLOC: {
		if ((int64_t)ev->f[SP_F_RESULT] != 0)
			return;
		f->dev_live[d] = ev->f[SP_F_LIVE];
		f->dev_seen |= 1u << d;
		struct watch_alloc *a = malloc(sizeof(*a));
		union hashmap_val *v = a ? hashmap_slot(&f->allocs, key, true) : NULL;
		if (!v) {
			free(a);
			return;
		}
		free(v->p); /* an address given again: the old block was freed unseen */
		*a = (struct watch_alloc){ev->f[SP_F_BYTES], ev->begin_ns, (uint32_t)ev->f[SP_F_SITE], (uint8_t)d};
		v->p = a;
		return;
	}
	case SP_K_FREE:
		if ((int64_t)ev->f[SP_F_RESULT] != 0)
			return;
		f->dev_live[d] = ev->f[SP_F_LIVE];
		f->dev_seen |= 1u << d;
		free(hashmap_get(&f->allocs, key));
		hashmap_del(&f->allocs, key);
		return;
	case SP_K_ALLOC_FAILED:
		f->alloc_failures++;
		if (ev->f[SP_F_TOTAL])
			f->dev_capacity[d] = ev->f[SP_F_TOTAL];
		f->dev_seen |= 1u << d;
		return;
	case SP_K_MEM_INFO:
		if (ev->f[SP_F_TOTAL])
			f->dev_capacity[d] = ev->f[SP_F_TOTAL];
		return;
	}
}

/* ---------------------------------------------------- 2. record buffer */

struct entry_head {
	int32_t tid;
	uint32_t nslots;
};

/* Room at the buffer's end for one more entry of the longest record; 0 or -1. */
static int buffer_reserve(struct watch_file *f)
{
	size_t need = sizeof(struct entry_head) + (size_t)SP_MAX_RECORD_SLOTS * SP_SLOT_SIZE;
	if (f->buf_len + need <= f->buf_cap)
		return 0;
	size_t cap = f->buf_cap ? f->buf_cap * 2 : 1 << 16;
	while (cap < f->buf_len + need)
		cap *= 2;
	uint8_t *b = realloc(f->buf, cap);
	if (!b)
		return -1;
	f->buf = b;
	f->buf_cap = cap;
	return 0;
}

/* The slots of the entry being added (after buffer_reserve). */
static struct sp_slot *buffer_tail(struct watch_file *f)
{
	return (struct sp_slot *)(f->buf + f->buf_len + sizeof(struct entry_head));
}

/* The entry at buffer_tail: n slots written by thread tid. */
static void buffer_commit(struct watch_file *f, int32_t tid, unsigned n)
{
	struct entry_head h = {tid, n};
	uint64_t begin = buffer_tail(f)->ts;
	memcpy(f->buf + f->buf_len, &h, sizeof(h));
	f->buf_len += sizeof(h) + (size_t)n * SP_SLOT_SIZE;
	f->buf_slots += n;
	f->buf_entries++;
	f->buf_unsorted |= begin < f->buf_last_begin;
	f->buf_last_begin = begin;
}

static const struct sp_slot *entry_slots(const uint8_t *p)
{
	return (const struct sp_slot *)(p + sizeof(struct entry_head));
}

static size_t entry_size(const uint8_t *p)
{
	struct entry_head h;
	memcpy(&h, p, sizeof(h));
	return sizeof(h) + (size_t)h.nslots * SP_SLOT_SIZE;
}

static uint64_t entry_begin(const uint8_t *p)
{
	return entry_slots(p)->ts;
}

static void ck_forget(const struct watch_file *f);
static int ck_find(const struct watch_file *f, uint64_t t, size_t *off, uint64_t *entries, uint64_t *slots);

/* Count the buffer's entries and see whether they are in time order (after a change of its content). */
static void buffer_recount(struct watch_file *f)
{
	uint64_t n = 0, slots = 0, prev = 0;
	int unsorted = 0;
	for (size_t off = 0; off < f->buf_len; off += entry_size(f->buf + off), n++) {
		uint64_t b = entry_begin(f->buf + off);
		unsorted |= b < prev;
		prev = b;
		slots += (entry_size(f->buf + off) - sizeof(struct entry_head)) / SP_SLOT_SIZE;
	}
	ck_forget(f);
	f->buf_entries = n;
	f->buf_slots = slots;
	f->buf_unsorted = unsorted;
	f->buf_last_begin = prev;
}

void watch_buffer_trim(struct watch_file *f, uint64_t t)
{
	if (!f->buf_unsorted) {
		/* in time order: what is kept is a suffix, found from the last checkpoint before t */
		size_t in = 0;
		uint64_t entries = 0, slots = 0;
		ck_find(f, t, &in, &entries, &slots);
		while (in < f->buf_len && entry_begin(f->buf + in) < t) {
			size_t sz = entry_size(f->buf + in);
			slots += (sz - sizeof(struct entry_head)) / SP_SLOT_SIZE;
			entries++;
			in += sz;
		}
		ck_forget(f); /* the entries moved */
		memmove(f->buf, f->buf + in, f->buf_len - in);
		f->buf_len -= in;
		f->buf_slots -= slots;
		f->buf_entries -= entries;
		if (!f->buf_len)
			f->buf_last_begin = 0;
		return;
	}
	size_t in = 0, out = 0, run = 0, run_len = 0; /* kept entries in runs: one move a run */
	while (in < f->buf_len) {
		size_t sz = entry_size(f->buf + in);
		if (entry_begin(f->buf + in) >= t) {
			if (!run_len)
				run = in;
			run_len += sz;
		} else if (run_len) {
			memmove(f->buf + out, f->buf + run, run_len);
			out += run_len;
			run_len = 0;
		}
		in += sz;
	}
	if (run_len) {
		memmove(f->buf + out, f->buf + run, run_len);
		out += run_len;
	}
	f->buf_len = out;
	buffer_recount(f);
}

/*
 * At the end of a tick: a burst (a long tick, a backlog) grew the buffer, the
 * memory goes back rather than staying at its high-water mark. Not after each
 * analysis of a batch: the batches of one tick reuse the same pages.
 */
static void buffer_shrink(struct watch_file *f)
{
	if (f->buf_cap > (1u << 20) && f->buf_cap > 4 * f->buf_len) {
		size_t cap = f->buf_len * 2 > (1u << 16) ? f->buf_len * 2 : 1u << 16;
		uint8_t *b = realloc(f->buf, cap);
		if (b) {
			f->buf = b;
			f->buf_cap = cap;
		}
	}
}

/* The buffer as an an_source: its entries by begin time (stable), decoded one at a time. */
/* Every CK_EVERY-th entry of a walk in time order: where it is, and what comes before it. */
#define CK_EVERY 256
struct ck {
	size_t off;
	uint64_t begin, entries, slots;
};

struct bufsrc {
	struct watch_file *f;
	size_t *order, n, pos;
	size_t off;  /* sorted: the next entry's offset (walked in place, no order) */
	uint64_t slots; /* sorted: slots before it */
	int sorted;
	struct sp_event ev;
	/* checkpoints of the sorted walk, for watch_buffer_trim (valid until the buffer changes) */
	struct ck *ck;
	size_t nck, ckcap;
	int ck_oom;
};
static struct bufsrc g_bs; /* one analysis at a time */

static void ck_forget(const struct watch_file *f)
{
	if (g_bs.f == f)
		g_bs.nck = 0;
}

/* The last checkpoint of f's buffer that begins before t, if the last walk made them; 1 when found. */
static int ck_find(const struct watch_file *f, uint64_t t, size_t *off, uint64_t *entries, uint64_t *slots)
{
	if (g_bs.f != f || !g_bs.sorted || g_bs.ck_oom || !g_bs.nck)
		return 0;
	size_t lo = 0, hi = g_bs.nck; /* the first checkpoint at or after t */
	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;
		if (g_bs.ck[mid].begin < t)
			lo = mid + 1;
		else
			hi = mid;
	}
	if (!lo)
		return 0;
	const struct ck *c = &g_bs.ck[lo - 1];
	*off = c->off;
	*entries = c->entries;
	*slots = c->slots;
	return 1;
}

static const uint8_t *g_sort_base;
static int by_begin(const void *a, const void *b)
{
	size_t x = *(const size_t *)a, y = *(const size_t *)b;
	uint64_t bx = entry_begin(g_sort_base + x), by = entry_begin(g_sort_base + y);
	if (bx != by)
		return bx < by ? -1 : 1;
	return x < y ? -1 : x > y; /* stable: arrival order */
}

static int bs_index(struct bufsrc *s)
{
	/* in arrival order, which is time order but for what a tick read of a record older than the last */
	s->n = s->f->buf_entries;
	s->pos = 0;
	s->off = 0;
	s->slots = 0;
	s->sorted = !s->f->buf_unsorted;
	s->nck = 0;
	s->ck_oom = 0;
	if (s->sorted)
		return 0; /* walked in place */
	size_t n = 0;
	size_t *o = realloc(s->order, (s->n ? s->n : 1) * sizeof(*o));
	if (!o)
		return -1;
	s->order = o;
	for (size_t off = 0; off < s->f->buf_len && n < s->n; off += entry_size(s->f->buf + off))
		o[n++] = off;
	s->n = n;
	g_sort_base = s->f->buf;
	qsort(o, n, sizeof(*o), by_begin);
	return 0;
}

static const struct sp_event *bs_next(void *ctx, int *file)
{
	struct bufsrc *s = ctx;
	while (s->pos < s->n) {
		const uint8_t *p = s->f->buf + (s->sorted ? s->off : s->order[s->pos]);
		struct entry_head h;
		memcpy(&h, p, sizeof(h));
		if (s->sorted && s->pos % CK_EVERY == 0 && s->pos / CK_EVERY == s->nck && !s->ck_oom) {
			if (s->nck == s->ckcap) {
				size_t cap = s->ckcap ? 2 * s->ckcap : 64;
				struct ck *c = realloc(s->ck, cap * sizeof(*c));
				if (!c)
					s->ck_oom = 1; /* the trim walks the buffer instead */
				else
					s->ck = c, s->ckcap = cap;
			}
			if (!s->ck_oom)
				s->ck[s->nck++] = (struct ck){s->off, entry_begin(p), s->pos, s->slots};
		}
		s->pos++;
		s->off += sizeof(h) + (size_t)h.nslots * SP_SLOT_SIZE;
		s->slots += h.nslots;
		if (!sp_decode_again(entry_slots(p), h.nslots, &s->ev))
			continue;
		s->ev.pid = s->f->hdr.pid;
		s->ev.tid = h.tid;
		*file = 0;
		return &s->ev;
	}
	return NULL;
}

static int bs_rewind(void *ctx)
{
	struct bufsrc *s = ctx;
	s->pos = 0;
	s->off = 0;
	s->slots = 0;
	return 0;
}

/* The unordered scan of pass 1 (an_source.scan): arrival order, fields decoded only where it reads them. */
static int bs_scan(void *ctx, an_scan_fn fn, void *arg)
{
	struct bufsrc *s = ctx;
	struct sp_event ev;
	memset(&ev, 0, sizeof(ev));
	for (size_t off = 0; off < s->f->buf_len; off += entry_size(s->f->buf + off)) {
		const uint8_t *p = s->f->buf + off;
		struct entry_head h;
		memcpy(&h, p, sizeof(h));
		const struct sp_slot *sl = entry_slots(p);
		if (an_scan_needs_fields(sl->kind)) {
			if (!sp_decode_again(sl, h.nslots, &ev))
				continue;
		} else {
			ev.kind = sl->kind;
			ev.nslots = sl->nslots;
			ev.api = sl->api;
			ev.begin_ns = sl->ts;
			ev.end_ns = sl->ts + sp_dur_decode(sl->dur);
			for (uint64_t m = ev.mask; m; m &= m - 1) /* what sp_decode_again expects: zeros but ev.mask */
				ev.f[__builtin_ctzll(m)] = 0;
			ev.mask = 0; /* fields not decoded */
		}
		ev.pid = s->f->hdr.pid;
		ev.tid = h.tid;
		fn(arg, &ev, 0);
	}
	return 0;
}

static const char *bs_string(void *ctx, int file, uint32_t id)
{
	(void)file;
	return watch_string(((struct bufsrc *)ctx)->f, id);
}

static const struct sp_file_header *bs_header(void *ctx, int file)
{
	(void)file;
	return &((struct bufsrc *)ctx)->f->hdr;
}

void watch_buffer_source(struct watch_file *f, struct an_source *src)
{
	memset(src, 0, sizeof(*src));
	g_bs.f = f;
	if (bs_index(&g_bs))
		g_bs.n = 0;
	src->ctx = &g_bs;
	src->nfiles = 1;
	src->next = bs_next;
	src->rewind = bs_rewind;
	src->string = bs_string;
	src->header = bs_header;
	src->scan = bs_scan;
}

/* ------------------------------------------------- 3. one file's records */

/* The process of hdr has ended: a clean end, or (same host) no such process. */
static int process_ended(const struct watch *w, const struct sp_file_header *h)
{
	if (h->end_mono_ns)
		return 1;
	if (strncmp(h->host, w->host, sizeof(h->host)) != 0)
		return 0; /* another host's: only its clean end says it */
	return kill(h->pid, 0) != 0 && errno == ESRCH;
}

static int same_file_start(const struct sp_file_header *a, const struct sp_file_header *b)
{
	return a->pid == b->pid && a->start_mono_ns == b->start_mono_ns && a->start_real_ns == b->start_real_ns;
}

static void read_file(struct watch *w, struct watch_file *f)
{
	struct sp_reader *r;
	char err[256];
	/* the process's state before reading: records written after this check are read now too */
	int ended = f->have_hdr && process_ended(w, &f->hdr);
	/* the chunks handed out since the last read, and those still written then: not the whole ring */
	if (sp_reader_open_follow(f->path, f->have_hdr ? &f->follow : NULL, &r, err, sizeof(err)) != 0) {
		if (f->warned++ == 1) /* a file being created reads so once: said at its second failure */
			util_err(f->path, "%s; skipped until it can be read", err);
		if (ended)
			f->ended = 1; /* unreadable, and its process is gone: nothing more will come */
		return;
	}
	const struct sp_file_header *h = sp_reader_header(r);
	if (f->have_hdr && !same_file_start(&f->hdr, h)) {
		/* another process's file under the name (or a file written over): start again */
		util_err(f->path, "replaced by another trace file; read from its start");
		free(f->marks);
		f->marks = NULL;
		f->nmarks = 0;
		sp_reader_close(r);
		if (sp_reader_open(f->path, &r, err, sizeof(err)) != 0) {
			f->have_hdr = 0;
			f->warned = 1;
			return;
		}
		h = sp_reader_header(r);
	}
	if (f->warned > 1)
		util_err(f->path, "readable again");
	f->warned = 0;
	/*
	 * More chunks handed out since the last read than the ring holds: the
	 * difference was written and overwritten between two ticks, unread.
	 */
	if (f->have_hdr && h->ring_chunks && h->ring_next_seq > f->next_seq + h->ring_chunks) {
		uint64_t n = h->ring_next_seq - f->next_seq - h->ring_chunks;
		f->missed_chunks += n;
		if (!f->missed_warned++)
			util_err(f->path,
				 "the ring wraps faster than the interval: %llu chunks were overwritten before a tick "
				 "read them (a shorter --interval, or a larger STEPPROF_MAX_MB, keeps up)",
				 (unsigned long long)n);
	}
	f->next_seq = h->ring_next_seq;
	f->hdr = *h;
	f->have_hdr = 1;
	for (unsigned d = 0; d < SP_MAX_DEVICES && d < h->ndevices; d++)
		if (!f->dev_capacity[d] && h->devices[d].mem_bytes)
			f->dev_capacity[d] = h->devices[d].mem_bytes;
	if (f->nmarks)
		sp_reader_resume(r, f->marks, f->nmarks);
	take_strings(f, r);
	struct sp_event ev;
	int32_t tid;
	uint64_t end_ns, n = 0;
	unsigned ns;
	/* the records as slots, read into the buffer: decoded here only where memory is tracked */
	while (buffer_reserve(f) == 0 && (ns = sp_reader_next_raw(r, buffer_tail(f), &tid, &end_ns))) {
		const struct sp_slot *sl = buffer_tail(f);
		n++;
		if (end_ns > f->last_record_ns)
			f->last_record_ns = end_ns;
		switch (sl->kind) {
		case SP_K_LAUNCH:
			f->launches++;
			break;
		case SP_K_STEP:
			f->steps++;
			break;
		case SP_K_ALLOC:
		case SP_K_FREE:
		case SP_K_ALLOC_FAILED:
		case SP_K_MEM_INFO:
			if (sp_decode_fast(sl, ns, &ev))
				track_memory(f, &ev);
			break;
		}
		buffer_commit(f, tid, ns);
		/* a backlog (a watcher started late, a long tick) is analysed as it is read: bounded memory */
		if (f->buf_slots >= WATCH_BATCH_SLOTS && watch_is_trainer(f))
			watch_analyse(w, f);
	}
	f->records += n;
	f->quiet_ticks = n ? 0 : f->quiet_ticks + 1;
	const struct sp_reader_stats *st = sp_reader_stats(r);
	f->overwritten = st->overwritten;
	f->lost = st->lost > f->lost ? st->lost : f->lost;
	size_t nm = sp_reader_marks(r, NULL, 0);
	struct sp_reader_mark *m = malloc((nm ? nm : 1) * sizeof(*m));
	if (m) {
		sp_reader_marks(r, m, nm);
		free(f->marks);
		f->marks = m;
		f->nmarks = nm;
	}
	sp_reader_follow(r, &f->follow);
	sp_reader_close(r);
	if (!watch_is_trainer(f)) {
		/* not a trainer (yet): its records count, they are not analysed */
		f->buf_len = 0;
		buffer_recount(f);
	} else if (f->buf_slots > WATCH_BUF_MAX_SLOTS) {
		/* no iteration found in that much: keep the newer half */
		size_t off = 0;
		uint64_t slots = 0;
		while (off < f->buf_len && slots < f->buf_slots / 2) {
			size_t sz = entry_size(f->buf + off);
			slots += (sz - sizeof(struct entry_head)) / SP_SLOT_SIZE;
			off += sz;
		}
		memmove(f->buf, f->buf + off, f->buf_len - off);
		f->buf_len -= off;
		buffer_recount(f);
	}
	buffer_shrink(f);
	if (ended || f->hdr.end_mono_ns) /* the header as read (the reader is closed) */
		f->ended = 1;
}

/* -------------------------------------------------------- 4. directory */

int watch_init(struct watch *w, const char *dir, const struct watch_opts *o)
{
	/*
	 * RATIONALE: a fixed threshold: blocks of 1 MiB or more (the record buffer, a
	 * reader's index) are mapped and unmapped, never left in the heap. glibc's
	 * moving threshold kept them there after the first free, and the watcher's
	 * resident memory crept up tick after tick (5.5 to 13 MB in a 3-minute soak).
	 */
	mallopt(M_MMAP_THRESHOLD, 1 << 20);
	memset(w, 0, sizeof(*w));
	w->dir = strdup(dir);
	w->o = *o;
	if (gethostname(w->host, sizeof(w->host) - 1) != 0)
		w->host[0] = 0;
	return w->dir ? 0 : -1;
}

static struct watch_file *file_find(struct watch *w, const char *path)
{
	for (size_t i = 0; i < w->nfiles; i++)
		if (!strcmp(w->files[i]->path, path))
			return w->files[i];
	return NULL;
}

static int name_is_trace(const char *name)
{
	size_t n = strlen(name);
	return name[0] != '.' && n > 8 && !strcmp(name + n - 8, ".sptrace");
}

/*
 * A file of another run than those seen (an earlier job into the same directory,
 * or a new one started into it while we follow): refused as analyze refuses it,
 * the message from the files whose header could be read. Each file once.
 */
static int check_runs(struct watch *w)
{
	char id[SP_RUN_ID_SIZE];
	int other = 0;
	for (size_t i = 0; i < w->nfiles; i++) {
		struct watch_file *f = w->files[i];
		if (f->run_checked || util_run_id(f->path, id) != 0)
			continue; /* no header yet: the next tick */
		f->run_checked = 1;
		if (!w->have_run) {
			memcpy(w->run_id, id, sizeof(w->run_id));
			w->have_run = 1;
		}
		other |= strcmp(id, w->run_id) != 0;
	}
	if (!other || w->o.merge_runs)
		return 0;
	char **paths = malloc(w->nfiles * sizeof(*paths));
	if (!paths)
		return -1;
	for (size_t i = 0; i < w->nfiles; i++)
		paths[i] = w->files[i]->path;
	int rc = util_check_runs("watch", paths, w->nfiles, 0);
	free(paths);
	return rc ? 1 : 0;
}

int watch_poll(struct watch *w)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	w->now_ns = (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
	w->tick++;
	DIR *d = opendir(w->dir);
	if (!d) {
		if (!w->dir_warned++)
			util_err(w->dir, w->dir_seen ? "%s; waiting for it" : "%s; waiting for it to appear",
				 strerror(errno));
		return 0;
	}
	w->dir_seen = 1;
	if (w->dir_warned) {
		w->dir_warned = 0;
		util_err(w->dir, "found");
	}
	struct dirent *de;
	while ((de = readdir(d))) {
		if (!name_is_trace(de->d_name))
			continue;
		char *path;
		if (asprintf(&path, "%s/%s", w->dir, de->d_name) < 0) {
			closedir(d);
			return -1;
		}
		struct stat st;
		if (stat(path, &st) != 0 || !S_ISREG(st.st_mode) || file_find(w, path)) {
			free(path);
			continue;
		}
		struct watch_file *f = calloc(1, sizeof(*f));
		struct watch_file **v = f ? realloc(w->files, (w->nfiles + 1) * sizeof(*v)) : NULL;
		if (!v) {
			free(f);
			free(path);
			closedir(d);
			return -1;
		}
		w->files = v;
		f->path = path;
		f->dev = st.st_dev;
		f->ino = st.st_ino;
		w->files[w->nfiles++] = f;
	}
	closedir(d);
	if (check_runs(w))
		return 1;
	for (size_t i = 0; i < w->nfiles; i++)
		if (!w->files[i]->ended)
			read_file(w, w->files[i]);
	return 0;
}

int watch_all_ended(const struct watch *w)
{
	size_t n = 0;
	for (size_t i = 0; i < w->nfiles; i++) {
		if (!w->files[i]->have_hdr)
			continue;
		if (!w->files[i]->ended)
			return 0;
		n++;
	}
	return n > 0;
}

static void file_free(struct watch_file *f)
{
	size_t pos = 0;
	union hashmap_val *v;
	while ((v = hashmap_next(&f->strings, &pos, NULL)))
		free(v->p);
	hashmap_free(&f->strings);
	pos = 0;
	while ((v = hashmap_next(&f->allocs, &pos, NULL)))
		free(v->p);
	hashmap_free(&f->allocs);
	watch_trainer_free(f->tr);
	free(f->marks);
	free(f->buf);
	free(f->path);
	free(f);
}

void watch_free(struct watch *w)
{
	for (size_t i = 0; i < w->nfiles; i++)
		file_free(w->files[i]);
	free(w->files);
	free(w->dir);
	free(g_bs.order);
	free(g_bs.ck);
	memset(&g_bs, 0, sizeof(g_bs));
	an_scratch_free();
}
