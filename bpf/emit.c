/*
 * emit.c - kernel events -> trace records of stepprof-bpf, through the
 * trace-file writer (preload/tracefile.c), one stream per thread.
 *
 *   1. strings: each path interned once as a STRING record of the keep area
 *   2. records: streams, a record per traced call, calls interrupted by a
 *      signal held until restarted or not, the ring's framed events, the CPUs'
 *      last batches, LOST records for the calls the kernel side could not send
 */
#include "iotrace_user.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include <bpf/libbpf.h>

#include "iotrace.skel.h"

/* The api and record kind of each traced call (api_sys.def). */
static const uint16_t call_api[IOTRACE_CALL__COUNT] = {
#define SP_API_SYS(id, num, nr, kind) [IOTRACE_##id] = SP_API_##id,
#include "stepprof/api_sys.def"
#undef SP_API_SYS
};
static const uint8_t call_kind[IOTRACE_CALL__COUNT] = {
#define SP_API_SYS(id, num, nr, kind) [IOTRACE_##id] = SP_K_##kind,
#include "stepprof/api_sys.def"
#undef SP_API_SYS
};

/* ------------------------------------------------------------ 1. strings */

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
		h = (h ^ hashmap_hash(w)) * 0x9e3779b97f4a7c15ull;
	}
	uint64_t w = 0;
	memcpy(&w, s + i, len - i);
	h = hashmap_hash(h ^ hashmap_hash(w ^ 0x5bd1e995));
	return h ? h : 1;
}

uint32_t strtab_intern(struct strtab *t, const char *s, size_t len)
{
	if (len > SP_MAX_STRING)
		len = SP_MAX_STRING;
	for (uint64_t seed = 0;; seed++) {
		uint64_t h = strhash(s, len, seed);
		void **slot = xslot(&t->byhash, h);
		struct interned *e = *slot;
		if (e && e->len == len && !memcmp(e->s, s, len))
			return e->id;
		if (e)
			continue; /* a different string with this hash: next seed */
		uint32_t id = ++t->next_id;
		if (sp_tf_keep_string(t->tf, id, s, (unsigned)len)) {
			hashmap_del(&t->byhash, h); /* keep area full: record the path as unknown */
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

/* The string of an interned id, NULL when unknown. */
const struct interned *strtab_get(const struct strtab *t, uint32_t id)
{
	return id && id <= t->next_id ? t->byid[id] : NULL;
}

/* ------------------------------------------------------------ 2. records */

void stream_close(struct collector *c, uint64_t key)
{
	struct sp_tf_stream *s = hashmap_get(&c->streams, key);
	if (!s)
		return;
	c->last_stream = NULL;
	sp_tf_stream_close(s);
	hashmap_del(&c->streams, key);
	free(s);
}

static struct sp_tf_stream *stream_get(struct collector *c, int32_t pid, int32_t tid)
{
	uint64_t key = (uint64_t)(uint32_t)pid << 32 | (uint32_t)tid;
	if (c->last_stream && key == c->last_key)
		return c->last_stream; /* a thread's calls come in runs */
	void **slot = xslot(&c->streams, key);
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
	struct held *h = hashmap_get(&c->held, key);
	if (!h)
		return;
	hashmap_del(&c->held, key);
	record_call(c, &h->e, h->size, h->begin_ns, -EINTR);
	free(h);
}

/* Every held call of process pid (pid < 0: of every process). */
void held_flush_pid(struct collector *c, int32_t pid)
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
	if (c->held.n && (h = hashmap_get(&c->held, key))) {
		if (h->e.call == e->call && h->e.fd == e->fd && h->size == size &&
		    !memcmp(h->e.path, e->path, size - IOTRACE_EVENT_HDR)) {
			begin_ns = h->begin_ns; /* its restart */
			hashmap_del(&c->held, key);
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
			*xslot(&c->held, key) = h;
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

int on_ring(void *ctx, void *data, size_t size)
{
	on_record(ctx, data, size);
	return 0;
}

/*
 * The batches still in the CPUs' state once the programs are detached (their
 * processes still running: nothing flushed them), after the ring's records.
 */
void drain_batches(struct collector *c, struct iotrace_bpf *skel)
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
uint64_t write_lost(struct collector *c, struct bpf_map *lost, uint64_t *total)
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
