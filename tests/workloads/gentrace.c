/*
 * gentrace.c - write a synthetic trace directory of a chosen size, in the v1
 * format (include/stepprof/trace.h codec), for the analyzer's benchmark
 * (scripts/bench.d/50-analyzer.sh) and its large-input tests.
 *
 *   gentrace DIR RECORDS [--iters N] [--markers none|step|nvtx]
 *            [--comm none|calls|names|untimed|sampled] [--comm-us U] [--overlap-us O]
 *
 * DIR/trainer.sptrace holds a training thread that runs N iterations (default
 * 1000) of: marker, batch wait, H2D copy, K kernel launches, D2H copy, sync, each
 * CUDA op with its GPU span; K is chosen so that the whole directory holds about
 * RECORDS records. DIR/worker.sptrace holds a loader process that opens, reads
 * and closes a file per iteration. Files are written chunk by chunk (memory is one
 * chunk per thread), so 50 million records need 1.6 GB of disk, not of memory.
 *
 * --comm adds an all-reduce to each iteration, after the D2H copy and before the
 * sync (which waits for it): one communicator made first (a COMM_INIT record), then
 * per iteration a kernel launch whose GPU span lasts U µs (default 3000) once the
 * D2H copy is done, the GPU otherwise idle. calls: the launch is made inside a COMM
 * record (ncclAllReduce), its kernel named "allreduce_ring_kernel" (communication by
 * the call alone; the record follows the launch, as a call's record is written when
 * it returns); names: no COMM record, the kernel named
 * "ncclDevKernel_AllReduce_Sum_f32_RING_LL" (by the name alone); untimed: as calls,
 * the kernel without a GPU span (not timed), so only the sync's wait shows it;
 * sampled: as calls, the kernel timed in the first two iterations only, as
 * STEPPROF_KERNEL_TIMING=auto samples a kernel (the analysis models the rest). With
 * --overlap-us O (calls, names) a compute kernel on another stream runs for the first
 * O µs of the all-reduce (communication hidden under compute).
 *
 * Prints one line: "gentrace: <records> records, <iters> iterations, <K> kernels per iteration".
 * Divided into: the file writer (header, keep area for strings, ring chunks), the
 * workload, and main().
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "stepprof/trace.h"

/* ------------------------------------------------------- 1. the writer */

#define CHUNK	    65536u
#define KEEP_SLOTS  64u
#define CHUNK_SLOTS (CHUNK / SP_SLOT_SIZE - SP_CHUNK_HDR_SLOTS)

struct gthread {
	int32_t tid;
	/* a chunk image: its header is read and written as struct sp_chunk_header */
	uint8_t buf[CHUNK] __attribute__((aligned(64)));
	uint32_t used;
	int open;
};

struct gfile {
	int fd;
	struct sp_file_header h;
	struct sp_slot keep[KEEP_SLOTS];
	uint32_t nkeep, next_id;
	uint64_t seq, records;
	struct gthread t[2];
};

static int pwrite_all(int fd, const void *p, size_t len, off_t off)
{
	const uint8_t *b = p;
	while (len) {
		ssize_t w = pwrite(fd, b, len, off);
		if (w < 0 && errno == EINTR)
			continue;
		if (w <= 0)
			return -1;
		b += w;
		len -= (size_t)w;
		off += w;
	}
	return 0;
}

static void die(const char *what)
{
	fprintf(stderr, "gentrace: %s: %s\n", what, strerror(errno));
	exit(1);
}

static void gf_open(struct gfile *g, const char *path, int32_t pid, int32_t ppid, const char *cmd)
{
	memset(g, 0, sizeof(*g));
	g->fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
	if (g->fd < 0)
		die(path);
	memcpy(g->h.magic, SP_MAGIC, 8);
	g->h.version_major = SP_VERSION_MAJOR;
	g->h.version_minor = SP_VERSION_MINOR;
	g->h.header_size = SP_HEADER_SIZE;
	g->h.endian = SP_ENDIAN_TAG;
	g->h.features = SP_FEAT_CUDA | SP_FEAT_LIBC_IO;
	g->h.chunk_size = CHUNK;
	g->h.keep_slots = KEEP_SLOTS;
	g->h.pid = pid;
	g->h.ppid = ppid;
	g->h.rank = g->h.local_rank = g->h.world_size = -1;
	g->h.start_mono_ns = 1000000000ull;
	snprintf(g->h.host, sizeof(g->h.host), "gentrace");
	snprintf(g->h.cmdline, sizeof(g->h.cmdline), "%s", cmd);
	g->h.ndevices = 1;
	snprintf(g->h.devices[0].name, sizeof(g->h.devices[0].name), "gentrace GPU");
	g->h.devices[0].mem_bytes = 16ull << 30;
	g->next_id = 1;
	g->t[0].tid = pid;
	g->t[1].tid = pid + 1;
}

static uint32_t gf_intern(struct gfile *g, const char *s)
{
	unsigned len = (unsigned)strlen(s);
	unsigned n = sp_string_slots(len);
	if (g->nkeep + n > KEEP_SLOTS) {
		fprintf(stderr, "gentrace: keep area full\n");
		exit(1);
	}
	uint32_t id = g->next_id++;
	struct sp_slot *sl = &g->keep[g->nkeep];
	sp_string_encode(sl, id, s, len);
	sl->kind = SP_K_STRING;
	g->nkeep += n;
	return id;
}

static void chunk_flush(struct gfile *g, struct gthread *t)
{
	if (!t->open)
		return;
	struct sp_chunk_header *c = (struct sp_chunk_header *)t->buf;
	c->state = SP_CHUNK_CLOSED;
	c->used = t->used;
	off_t off = (off_t)(SP_HEADER_SIZE + KEEP_SLOTS * SP_SLOT_SIZE + c->seq * CHUNK);
	if (pwrite_all(g->fd, t->buf, CHUNK, off))
		die("write");
	t->open = 0;
}

static void emit(struct gfile *g, int th, unsigned kind, unsigned api, uint64_t b, uint64_t e, const uint64_t *f)
{
	struct gthread *t = &g->t[th];
	unsigned n = sp_kind_slots(kind);
	if (t->open && t->used + n > CHUNK_SLOTS)
		chunk_flush(g, t);
	if (!t->open) {
		memset(t->buf, 0, CHUNK);
		struct sp_chunk_header *c = (struct sp_chunk_header *)t->buf;
		c->magic = SP_CHUNK_MAGIC;
		c->state = SP_CHUNK_ACTIVE;
		c->seq = g->seq++;
		c->pid = g->h.pid;
		c->tid = t->tid;
		c->first_ns = b;
		t->used = 0;
		t->open = 1;
	}
	struct sp_slot *s = (struct sp_slot *)(t->buf + (SP_CHUNK_HDR_SLOTS + t->used) * SP_SLOT_SIZE);
	sp_encode(s, kind, api, b, e > b ? e - b : 0, f);
	s->kind = (uint8_t)kind;
	t->used += n;
	g->records++;
}

static void gf_close(struct gfile *g, uint64_t end_ns)
{
	chunk_flush(g, &g->t[0]);
	chunk_flush(g, &g->t[1]);
	g->h.ring_chunks = (uint32_t)g->seq;
	g->h.ring_next_seq = g->seq;
	g->h.keep_next_slot = g->nkeep;
	g->h.file_size = SP_HEADER_SIZE + KEEP_SLOTS * SP_SLOT_SIZE + g->seq * CHUNK;
	g->h.end_mono_ns = end_ns;
	uint8_t page[SP_HEADER_SIZE] = {0};
	memcpy(page, &g->h, sizeof(g->h));
	if (pwrite_all(g->fd, page, sizeof(page), 0) || pwrite_all(g->fd, g->keep, sizeof(g->keep), SP_HEADER_SIZE) ||
	    ftruncate(g->fd, (off_t)g->h.file_size) || close(g->fd))
		die("write");
}

/* ---------------------------------------------------------- 2. workload */

int main(int argc, char **argv)
{
	if (argc < 3) {
		fprintf(stderr, "usage: gentrace DIR RECORDS [--iters N] [--markers none|step|nvtx]\n");
		return 2;
	}
	const char *dir = argv[1];
	uint64_t want = strtoull(argv[2], NULL, 10), iters = 1000;
	const char *markers = "step", *comm = "none";
	uint64_t comm_ns = 3000000, overlap_ns = 0;
	for (int i = 3; i + 1 < argc; i += 2) {
		if (!strcmp(argv[i], "--iters"))
			iters = strtoull(argv[i + 1], NULL, 10);
		else if (!strcmp(argv[i], "--markers"))
			markers = argv[i + 1];
		else if (!strcmp(argv[i], "--comm"))
			comm = argv[i + 1];
		else if (!strcmp(argv[i], "--comm-us"))
			comm_ns = strtoull(argv[i + 1], NULL, 10) * 1000;
		else if (!strcmp(argv[i], "--overlap-us"))
			overlap_ns = strtoull(argv[i + 1], NULL, 10) * 1000;
	}
	/* 0 none, 1 calls, 2 names, 3 untimed, 4 sampled */
	int cm = !strcmp(comm, "calls")	    ? 1
		 : !strcmp(comm, "names")   ? 2
		 : !strcmp(comm, "untimed") ? 3
		 : !strcmp(comm, "sampled") ? 4
					    : 0;
	if (overlap_ns > comm_ns || (cm >= 3 && overlap_ns)) {
		fprintf(stderr, "gentrace: --overlap-us: at most --comm-us, and not with untimed or sampled\n");
		return 2;
	}
	if (!iters || want < iters * 12) {
		fprintf(stderr, "gentrace: RECORDS must be at least 12 per iteration\n");
		return 2;
	}
	int mk = !strcmp(markers, "step") ? 1 : !strcmp(markers, "nvtx") ? 2 : 0;
	/* per iteration: marker, wait, 2 copies + 2 spans, sync, K launches + K spans; worker: open, read, close */
	uint64_t fixed = (mk ? 1 : 0) + 1 + 4 + 1 + 3;
	uint64_t per = want / iters;
	uint64_t k = per > fixed + 2 ? (per - fixed) / 2 : 1;
	if (mkdir(dir, 0700) && errno != EEXIST)
		die(dir);
	char path[4096];
	static struct gfile tr, wk;
	snprintf(path, sizeof(path), "%s/trainer.sptrace", dir);
	gf_open(&tr, path, 1000, 1, "gentrace trainer");
	snprintf(path, sizeof(path), "%s/worker.sptrace", dir);
	gf_open(&wk, path, 2000, 1000, "gentrace worker");
	uint32_t kname = gf_intern(&tr, "gemm_kernel"), rname = gf_intern(&tr, "train_step");
	uint32_t cname = cm == 2 ? gf_intern(&tr, "ncclDevKernel_AllReduce_Sum_f32_RING_LL")
		       : cm	 ? gf_intern(&tr, "allreduce_ring_kernel")
				 : 0;
	uint32_t oname = cm && overlap_ns ? gf_intern(&tr, "gemm_overlap_kernel") : 0;
	uint32_t fpath = gf_intern(&wk, "/data/shard-000.bin");
	uint64_t f[SP_F__COUNT];
	uint64_t t = 2000000000ull, gpu = t;
	uint32_t op = 0;
	if (cm) { /* the communicator, made before the loop */
		memset(f, 0, sizeof(f));
		f[SP_F_COMM] = 0xc0c0ull;
		f[SP_F_VALUE] = 0x5eedf00dull;
		f[SP_F_RANK] = 0;
		f[SP_F_NRANKS] = 2;
		emit(&tr, 0, SP_K_COMM_INIT, SP_API_ncclCommInitRank, t - 500000, t - 100000, f);
	}
	for (uint64_t it = 0; it < iters; it++) {
		uint64_t start = t;
		memset(f, 0, sizeof(f));
		if (mk == 1) {
			f[SP_F_VALUE] = it;
			emit(&tr, 0, SP_K_STEP, SP_API_stepprof_step, t, t, f);
		}
		/* the worker reads the next batch while the trainer waits for it */
		memset(f, 0, sizeof(f));
		f[SP_F_PATH] = fpath;
		f[SP_F_FD] = 7;
		emit(&wk, 0, SP_K_OPEN, SP_API_open, t + 1000, t + 3000, f);
		f[SP_F_BYTES] = 1 << 20;
		f[SP_F_FD_TYPE] = SP_FDTYPE_FILE;
		emit(&wk, 0, SP_K_READ, SP_API_read, t + 3000, t + 200000, f);
		emit(&wk, 0, SP_K_CLOSE, SP_API_close, t + 200000, t + 201000, f);
		memset(f, 0, sizeof(f));
		f[SP_F_FD] = 9;
		f[SP_F_FD_TYPE] = SP_FDTYPE_PIPE;
		f[SP_F_BYTES] = 64;
		emit(&tr, 0, SP_K_LOADER_WAIT, SP_API_read, t, t + 250000, f);
		t += 250000;
		/* H2D copy */
		memset(f, 0, sizeof(f));
		f[SP_F_DIRECTION] = SP_DIR_H2D;
		f[SP_F_BYTES] = 4 << 20;
		f[SP_F_HOST_MEMORY] = SP_HOSTMEM_PINNED;
		f[SP_F_OP] = ++op;
		emit(&tr, 0, SP_K_COPY, SP_API_cudaMemcpyAsync, t, t + 5000, f);
		gpu = gpu > t ? gpu : t;
		uint64_t sf[SP_F__COUNT] = {0};
		sf[SP_F_OP] = op;
		emit(&tr, 1, SP_K_GPU_SPAN, 0, gpu, gpu + 500000, sf);
		gpu += 500000;
		t += 5000;
		for (uint64_t j = 0; j < k; j++) {
			memset(f, 0, sizeof(f));
			f[SP_F_NAME] = kname;
			f[SP_F_OP] = ++op;
			emit(&tr, 0, SP_K_LAUNCH, SP_API_cudaLaunchKernel, t, t + 50, f);
			t += 60;
			sf[SP_F_OP] = op;
			gpu = gpu > t ? gpu : t;
			emit(&tr, 1, SP_K_GPU_SPAN, 0, gpu, gpu + 100, sf);
			gpu += 100;
		}
		memset(f, 0, sizeof(f));
		f[SP_F_DIRECTION] = SP_DIR_D2H;
		f[SP_F_BYTES] = 4096;
		f[SP_F_HOST_MEMORY] = SP_HOSTMEM_PINNED;
		f[SP_F_OP] = ++op;
		emit(&tr, 0, SP_K_COPY, SP_API_cudaMemcpyAsync, t, t + 5000, f);
		gpu = gpu > t ? gpu : t;
		sf[SP_F_OP] = op;
		emit(&tr, 1, SP_K_GPU_SPAN, 0, gpu, gpu + 2000, sf);
		gpu += 2000;
		t += 5000;
		if (cm) {
			/* the all-reduce: its kernel on the stream after the D2H copy */
			uint64_t cb = t;
			memset(f, 0, sizeof(f));
			f[SP_F_NAME] = cname;
			f[SP_F_OP] = ++op;
			emit(&tr, 0, SP_K_LAUNCH, SP_API_cuLaunchKernel, t + 2000, t + 2050, f);
			uint32_t cop = op;
			if (cm != 2) {
				memset(f, 0, sizeof(f));
				f[SP_F_BYTES] = 64 << 20;
				f[SP_F_COMM] = 0xc0c0ull;
				f[SP_F_PEER] = (uint64_t)-1;
				emit(&tr, 0, SP_K_COMM, SP_API_ncclAllReduce, cb, cb + 10000, f);
			}
			t += 10000;
			gpu = gpu > t - 7950 ? gpu : t - 7950;
			if (cm != 3 && (cm != 4 || it < 2)) {
				sf[SP_F_OP] = cop;
				emit(&tr, 1, SP_K_GPU_SPAN, 0, gpu, gpu + comm_ns, sf);
			}
			if (overlap_ns) {
				memset(f, 0, sizeof(f));
				f[SP_F_NAME] = oname;
				f[SP_F_OP] = ++op;
				f[SP_F_STREAM] = 7;
				emit(&tr, 0, SP_K_LAUNCH, SP_API_cudaLaunchKernel, t, t + 50, f);
				t += 60;
				sf[SP_F_OP] = op;
				emit(&tr, 1, SP_K_GPU_SPAN, 0, gpu, gpu + overlap_ns, sf);
			}
			gpu += comm_ns;
		}
		memset(f, 0, sizeof(f));
		uint64_t se = gpu > t ? gpu : t;
		emit(&tr, 0, SP_K_SYNC, SP_API_cudaStreamSynchronize, t, se, f);
		t = se + 1000;
		if (mk == 2) {
			memset(f, 0, sizeof(f));
			f[SP_F_NAME] = rname;
			emit(&tr, 0, SP_K_RANGE, SP_API_nvtx, start, t, f);
		}
	}
	uint64_t total = tr.records + wk.records;
	gf_close(&tr, t);
	gf_close(&wk, t);
	printf("gentrace: %llu records, %llu iterations, %llu kernels per iteration\n", (unsigned long long)total,
	       (unsigned long long)iters, (unsigned long long)k);
	return 0;
}
