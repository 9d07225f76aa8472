/*
 * tf_chunks.c - the trace-file writer's ring of per-thread chunks and the
 * streams that append records to them: a chunk claimed per thread, a LOST
 * record for what could not be written, a chunk's records counted when it
 * is reused.
 *
 * Raw syscalls only, no malloc (tracefile_int.h says why).
 */
#include "tracefile_int.h"

#include <errno.h>
#include <string.h>

static struct sp_chunk_header *chunk_at(struct sp_tf *tf, uint32_t idx)
{
	return (struct sp_chunk_header *)(tf->base + tf->ring_off + (uint64_t)idx * tf->chunk_size);
}

/*
 * Claim a chunk for (pid, tid): the next sequence number's chunk, unless a
 * thread still appends to it (ACTIVE: skipped, the next one is tried). A reused
 * chunk's records are counted as overwritten. NULL when no disk space.
 */
static struct sp_chunk_header *claim(struct sp_tf *tf, int32_t pid, int32_t tid)
{
	struct sp_file_header *h = tf->hdr;
	for (uint64_t tries = 0; tries < 2ull * tf->ring_chunks + 2; tries++) {
		uint64_t seq = __atomic_fetch_add(&h->ring_next_seq, 1, __ATOMIC_ACQ_REL);
		uint32_t idx = (uint32_t)(seq % tf->ring_chunks);
		struct sp_chunk_header *c = chunk_at(tf, idx);
		/*
		 * Space before the first store into the chunk (c->state included):
		 * a store into a page without blocks on a full disk is a SIGBUS.
		 * One thread reserves (0 -> RESERVING -> 1); a thread that finds a
		 * chunk being reserved tries the next one, as for an ACTIVE chunk.
		 */
		uint32_t info = __atomic_load_n(&tf->chunk_info[idx], __ATOMIC_ACQUIRE);
		if (!info && __atomic_compare_exchange_n(&tf->chunk_info[idx], &info, SP_TF_RESERVING, 0,
							 __ATOMIC_ACQ_REL, __ATOMIC_ACQUIRE)) {
			if (reserve_chunk(tf, (uint64_t)((uint8_t *)c - tf->base), tf->chunk_size) != 0) {
				__atomic_store_n(&tf->chunk_info[idx], 0, __ATOMIC_RELEASE);
				warn_space(tf, "trace ring");
				return NULL;
			}
			info = 1;
			__atomic_store_n(&tf->chunk_info[idx], info, __ATOMIC_RELEASE);
		}
		if (info == SP_TF_RESERVING)
			continue;
		uint32_t st = __atomic_load_n(&c->state, __ATOMIC_ACQUIRE);
		if (st == SP_CHUNK_ACTIVE)
			continue;
		if (!__atomic_compare_exchange_n(&c->state, &st, SP_CHUNK_ACTIVE, 0, __ATOMIC_ACQ_REL,
						 __ATOMIC_ACQUIRE))
			continue;
		if (c->magic == SP_CHUNK_MAGIC) {
			/* the count its last stream stored before its release of the state */
			uint64_t gone = (uint64_t)__atomic_load_n(&tf->chunk_info[idx], __ATOMIC_ACQUIRE) - 1;
			/*
			 * A LOST record opens the chunk when c->lost is set: its count goes
			 * back to the header (the loss stays counted) and the LOST record
			 * itself is no overwritten event.
			 */
			uint32_t lost = c->lost;
			if (lost && gone) {
				__atomic_fetch_add(&h->lost_records, lost, __ATOMIC_RELAXED);
				gone--;
			}
			__atomic_fetch_add(&h->overwritten_records, gone, __ATOMIC_RELAXED);
			__atomic_fetch_add(&h->overwritten_chunks, 1, __ATOMIC_RELAXED);
			__atomic_store_n(&tf->chunk_info[idx], 1, __ATOMIC_RELAXED);
		}
		__atomic_store_n(&c->used, 0, __ATOMIC_RELEASE);
		c->seq = seq;
		c->pid = pid;
		c->tid = tid;
		c->lost = 0;
		c->first_ns = 0;
		__atomic_store_n(&c->magic, SP_CHUNK_MAGIC, __ATOMIC_RELEASE);
		return c;
	}
	char msg[300];
	fmt(msg, sizeof(msg),
	    "%s: all %u chunks of the ring are held by threads; records are counted as lost "
	    "(raise STEPPROF_MAX_MB)",
	    tf->path, tf->ring_chunks);
	tf_warn(tf, "ring", msg);
	return NULL;
}

void sp_tf_stream_init(struct sp_tf_stream *s, struct sp_tf *tf, int32_t pid, int32_t tid)
{
	memset(s, 0, sizeof(*s));
	s->tf = tf;
	s->pid = pid;
	s->tid = tid;
}

static void close_chunk(struct sp_tf_stream *s)
{
	if (s->chunk) {
		struct sp_tf *tf = s->tf;
		uint32_t idx = (uint32_t)(((uint8_t *)s->chunk - tf->base - tf->ring_off) / tf->chunk_size);
		__atomic_store_n(&tf->chunk_info[idx], 1 + s->nrec, __ATOMIC_RELEASE);
		__atomic_fetch_add(&tf->closed_records, s->nrec, __ATOMIC_RELAXED);
		__atomic_store_n(&s->chunk->state, SP_CHUNK_CLOSED, __ATOMIC_RELEASE);
	}
	s->nrec = 0;
	s->chunk = NULL;
	s->cur = s->end = NULL;
}

static struct sp_slot *drop(struct sp_tf_stream *s)
{
	s->lost++;
	/* counted in the header at once (exact after a crash), moved to a LOST record later */
	if (s->tf && s->tf->hdr)
		__atomic_fetch_add(&s->tf->hdr->lost_records, 1, __ATOMIC_RELAXED);
	return NULL;
}

void sp_tf_drop(struct sp_tf_stream *s)
{
	drop(s);
}

struct sp_slot *sp_tf_refill(struct sp_tf_stream *s, unsigned nslots, uint64_t now_ns)
{
	struct sp_tf *tf = s->tf;
	close_chunk(s);
	if (!tf || !tf->hdr || nslots + 1 > tf->chunk_size / SP_SLOT_SIZE - SP_CHUNK_HDR_SLOTS)
		return drop(s);
	if (!now_ns)
		now_ns = mono_ns(CLOCK_MONOTONIC);
	if (s->retry_ns && now_ns < s->retry_ns)
		return drop(s);
	int saved = errno;
	struct sp_chunk_header *c = claim(tf, s->pid, s->tid);
	errno = saved;
	if (!c) {
		/* RATIONALE: a full disk stays full for a while; try again in 1 ms, not at every record */
		s->retry_ns = now_ns + 1000000;
		return drop(s);
	}
	s->retry_ns = 0;
	s->chunk = c;
	s->nrec = 0;
	s->cur = (struct sp_slot *)c + SP_CHUNK_HDR_SLOTS;
	/* no room shown until the LOST record is committed (sp_tf_stream_busy) */
	s->end = s->cur;
	__atomic_signal_fence(__ATOMIC_SEQ_CST);
	if (s->lost) {
		uint64_t f[SP_F__COUNT] = {0};
		uint32_t lost = s->lost;
		f[SP_F_COUNT] = lost;
		struct sp_slot *slot = s->cur;
		sp_tf_encode(slot, SP_K_LOST, SP_API_NONE, now_ns, 0, f);
		c->lost = lost;
		sp_tf_commit(s, slot, SP_K_LOST);
		__atomic_fetch_sub(&tf->hdr->lost_records, lost, __ATOMIC_RELAXED);
		s->lost -= lost; /* a record dropped meanwhile (signal handler) stays to report */
	}
	__atomic_signal_fence(__ATOMIC_SEQ_CST);
	s->end = (struct sp_slot *)((uint8_t *)c + tf->chunk_size);
	return s->cur;
}

void sp_tf_stream_close(struct sp_tf_stream *s)
{
	close_chunk(s);
}

int sp_tf_write(struct sp_tf_stream *s, unsigned kind, unsigned api, uint64_t begin_ns, uint64_t end_ns,
		const uint64_t *f)
{
	if (kind == SP_K_NONE || kind >= SP_K__COUNT || kind == SP_K_STRING)
		return -1;
	struct sp_slot *slot = sp_tf_reserve(s, sp_tf_layout[kind].nslots, end_ns);
	if (!slot)
		return -1;
	sp_tf_encode(slot, kind, api, begin_ns, sp_tf_dur_ns(begin_ns, end_ns), f);
	sp_tf_commit(s, slot, kind);
	return 0;
}
