/*
 * analyze_scan.c - a fast, unordered scan of one trace file's ring for the
 * analysis's first pass (which only counts and collects markers, so it needs no
 * time order): chunks are read in large blocks and records are walked by their
 * slot heads; only the kinds whose fields the first pass reads (RANGE, STEP,
 * FORK, LOST, COPY) are decoded in full.
 *
 * RATIONALE: the first pass over a merged, fully decoded stream cost as much as
 * the second; this scan is several times cheaper, so the analysis costs about
 * one ordered pass (docs/architecture.md's budgets: >= 10 M records/s). Bytes are untrusted: every
 * length is bounded by the file's size and the header's geometry; a slot that
 * does not make a record is skipped, as the reader does.
 */
#include "analyze.h"

#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define SCAN_BLOCK (4u << 20) /* bytes read per pread */
_Static_assert(SCAN_BLOCK >= SP_CHUNK_SIZE_MAX, "a block holds at least one chunk of any size the reader accepts");

/* Slots per kind, computed once (sp_kind_slots walks the field list every call). */
static uint8_t kind_slots[SP_K__COUNT];

static void kind_slots_init(void)
{
	if (kind_slots[SP_K_LAUNCH])
		return;
	for (unsigned k = 1; k < SP_K__COUNT; k++)
		kind_slots[k] = k == SP_K_STRING ? 0 : (uint8_t)sp_kind_slots(k);
}

int an_scan_needs_fields(unsigned kind)
{
	/* COPY: its direction tells the training thread (analyze.c, thr_trains_more); copies are few */
	/* GPU_SPAN2: two spans, returned as two GPU_SPAN records, as the reader does */
	return kind == SP_K_RANGE || kind == SP_K_STEP || kind == SP_K_FORK || kind == SP_K_LOST || kind == SP_K_COPY ||
	       kind == SP_K_GPU_SPAN2;
}

/* One chunk of which `bytes` are in the file (less than the chunk size when the file was cut). */
static void scan_chunk(const uint8_t *c, uint32_t bytes, int file, an_scan_fn fn, void *arg)
{
	const struct sp_chunk_header *h = (const struct sp_chunk_header *)c;
	if (bytes < (SP_CHUNK_HDR_SLOTS + 1) * SP_SLOT_SIZE || h->magic != SP_CHUNK_MAGIC || h->state == SP_CHUNK_FREE)
		return;
	uint32_t cap = bytes / SP_SLOT_SIZE - SP_CHUNK_HDR_SLOTS;
	uint32_t used = h->used < cap ? h->used : cap;
	const struct sp_slot *s = (const struct sp_slot *)(c + SP_CHUNK_HDR_SLOTS * SP_SLOT_SIZE);
	struct sp_event ev;
	ev.pid = h->pid;
	ev.tid = h->tid;
	for (uint32_t i = 0; i < used;) {
		unsigned kind = s[i].kind;
		if (kind == SP_K_NONE)
			break; /* not committed */
		unsigned n = kind < SP_K__COUNT ? kind_slots[kind] : 0;
		if (!n || s[i].nslots != n || n > used - i || s[i].api >= SP_API__COUNT) {
			/* a string, a newer kind or damage: step over what the head claims, at least one slot */
			unsigned k = s[i].nslots;
			i += k >= 1 && k <= SP_MAX_RECORD_SLOTS && k <= used - i ? k : 1;
			continue;
		}
		if (an_scan_needs_fields(kind)) {
			if (sp_decode(&s[i], used - i, &ev)) {
				ev.pid = h->pid;
				ev.tid = h->tid;
				if (kind == SP_K_GPU_SPAN2) {
					struct sp_event b;
					sp_span2_split(&ev, &ev, &b);
					fn(arg, &ev, file);
					ev = b;
				}
				fn(arg, &ev, file);
			}
		} else {
			ev.kind = (uint8_t)kind;
			ev.nslots = (uint8_t)n;
			ev.api = s[i].api;
			ev.begin_ns = s[i].ts;
			ev.end_ns = s[i].ts + sp_dur_decode(s[i].dur);
			ev.mask = 0; /* fields not decoded */
			fn(arg, &ev, file);
		}
		i += n;
	}
}

int an_scan_file(const char *path, int file, an_scan_fn fn, void *arg)
{
	kind_slots_init();
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return -1;
	struct stat st;
	struct sp_file_header h;
	if (fstat(fd, &st) || pread(fd, &h, sizeof(h), 0) != (ssize_t)sizeof(h) || memcmp(h.magic, SP_MAGIC, 8) ||
	    h.chunk_size < SP_CHUNK_SIZE_MIN || h.chunk_size % SP_SLOT_SIZE || h.chunk_size > SP_CHUNK_SIZE_MAX ||
	    h.keep_slots > SP_KEEP_SLOTS_MAX || h.header_size < sizeof(h)) {
		close(fd);
		return -1;
	}
	uint64_t fsize = (uint64_t)st.st_size, ring = h.header_size + h.keep_slots * SP_SLOT_SIZE;
	/*
	 * Chunks are handed out in position order until the ring wraps: past
	 * ring_next_seq the file is unused (and usually sparse: a 1 GiB cap holding
	 * 1 MB of records). Reading it would cost a read of the whole cap.
	 */
	uint64_t nchunks = h.ring_next_seq < h.ring_chunks ? h.ring_next_seq : h.ring_chunks;
	if (ring >= fsize)
		nchunks = 0;
	else if (nchunks > (fsize - ring + h.chunk_size - 1) / h.chunk_size)
		nchunks = (fsize - ring + h.chunk_size - 1) / h.chunk_size; /* truncated: the last one partly */
	uint32_t per = SCAN_BLOCK / h.chunk_size;
	uint8_t *buf = malloc((size_t)per * h.chunk_size);
	if (!buf) {
		close(fd);
		return -1;
	}
	int rc = 0;
	for (uint64_t c = 0; c < nchunks; c += per) {
		uint64_t k = nchunks - c < per ? nchunks - c : per;
		size_t len = (size_t)(k * h.chunk_size);
		ssize_t got = pread(fd, buf, len, (off_t)(ring + c * h.chunk_size));
		if (got < 0) {
			rc = -1;
			break;
		}
		for (uint64_t j = 0; j < k && j * h.chunk_size < (uint64_t)got; j++) {
			uint64_t left = (uint64_t)got - j * h.chunk_size;
			scan_chunk(buf + j * h.chunk_size, left < h.chunk_size ? (uint32_t)left : h.chunk_size, file,
				   fn, arg);
		}
	}
	free(buf);
	close(fd);
	return rc;
}
