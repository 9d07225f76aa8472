/*
 * test_nccl_capture.c - the NCCL hooks end to end on the simulated GPU and
 * NCCL: tests/workloads/cuda/nccl_door.c forks two ranks that each make a
 * communicator, K all-reduces, one grouped send/recv pair and destroy it;
 * the test runs it under LD_PRELOAD=libstepprof.so and compares every
 * process's `stepprof dump --json` with what the program did (its truth:
 * pids, streams, handles, the ncclUniqueId's bytes).
 *
 *   1. the job: run it, read its traces, FNV-1a of the unique id
 *   2. the records of each rank through each door (PLT, dlsym by handle)
 *   3. a split communicator's identity; ncclCommInitAll and every collective
 *      in one process (--all)
 *   4. STEPPROF_NCCL=0: no NCCL records, the same NCCL kernels
 */
#include <criterion/criterion.h>

#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "testlib.h"
#include "trainerlib.h"

/* ---------------------------------------------------------- 1. the job */

#define K_ALLREDUCE 5
#define COUNT	    65536 /* float32 */
#define P2P	    4096  /* int64 */

struct job {
	char *dir;
	struct sp_t_result res;
	struct sp_json *truth;
	struct sp_json **rec; /* every record of every trace file of the run */
	size_t nrec;
};

static int str_eq(const struct sp_json *j, const char *key, const char *v)
{
	const char *s = sp_json_str(j, key);
	return s && !strcmp(s, v);
}

static uint64_t hex_of(const struct sp_json *j, const char *key)
{
	const char *s = sp_json_str(j, key);
	return s ? strtoull(s, NULL, 16) : ~0ull;
}

static void read_traces(struct job *d)
{
	sp_t_dump_dir(d->dir, &d->rec, &d->nrec);
}

/* Run build/tests/bin/<bin> under the preload with extra args and environment entries. */
static void job_run(struct job *d, const char *bin, const char *const *args, const char *const *env)
{
	memset(d, 0, sizeof(*d));
	const char *lib = sp_t_build("simgpu/libnccl.so.2");
	if (access(lib, R_OK) != 0)
		cr_skip_test("%s is not built: the simulated NCCL (tests/simgpu) is missing", lib);
	const char *path = sp_t_build(bin);
	cr_assert(access(path, X_OK) == 0, "%s is not built (make build-all)", path);
	d->dir = sp_t_tmpdir("ncclcap");
	char truth[1024], dirv[1100], pre[1100], k[32], count[32], p2p[32];
	snprintf(truth, sizeof(truth), "%s/truth.json", d->dir);
	snprintf(dirv, sizeof(dirv), "STEPPROF_DIR=%s", d->dir);
	snprintf(pre, sizeof(pre), "LD_PRELOAD=%s", sp_t_build("lib/libstepprof.so"));
	snprintf(k, sizeof(k), "%d", K_ALLREDUCE);
	snprintf(count, sizeof(count), "%d", COUNT);
	snprintf(p2p, sizeof(p2p), "%d", P2P);
	char *argv[32], *envv[32];
	int n = 0, m = 0;
	argv[n++] = (char *)path;
	argv[n++] = "--truth";
	argv[n++] = truth;
	argv[n++] = "--k";
	argv[n++] = k;
	argv[n++] = "--count";
	argv[n++] = count;
	argv[n++] = "--p2p";
	argv[n++] = p2p;
	for (; args && *args && n < 30; args++)
		argv[n++] = (char *)*args;
	argv[n] = NULL;
	envv[m++] = pre;
	envv[m++] = dirv;
	envv[m++] = "SIMGPU_DEVICES=2";
	for (; env && *env && m < 30; env++)
		envv[m++] = (char *)*env;
	envv[m] = NULL;
	int st = sp_t_run(&d->res, argv, envv, NULL, 120);
	cr_assert_eq(st, 0, "%s exited %d; stderr:\n%s", path, st, d->res.err);
	char *t = sp_t_read_file(truth, NULL);
	cr_assert(t, "%s wrote no ground truth", path);
	d->truth = sp_json_parse(t);
	free(t);
	cr_assert(d->truth, "ground truth is not JSON");
	read_traces(d);
}

static void job_free(struct job *d)
{
	for (size_t i = 0; i < d->nrec; i++)
		sp_json_free(d->rec[i]);
	free(d->rec);
	sp_json_free(d->truth);
	sp_t_result_free(&d->res);
	sp_t_rmrf(d->dir);
	free(d->dir);
}

/* The truth of rank r: its object in "ranks". */
static const struct sp_json *rank_truth(const struct job *d, int r)
{
	char key[32];
	snprintf(key, sizeof(key), "ranks.%d", r);
	const struct sp_json *t = sp_json_path(d->truth, key);
	cr_assert(t && sp_json_num(t, "rank", -1) == r, "truth has no rank %d", r);
	return t;
}

static int of_pid(const struct sp_json *rec, int64_t pid)
{
	return sp_json_i64(rec, "pid", -1) == pid;
}

/* FNV-1a, 64 bits, written here again from its definition (not the preload's). */
static uint64_t fnv1a(uint64_t h, const unsigned char *p, size_t n)
{
	for (size_t i = 0; i < n; i++)
		h = (h ^ p[i]) * 0x100000001b3ull;
	return h;
}

/* The identity every rank of the job's communicator must record: FNV-1a of the 128 bytes of the unique id. */
static uint64_t uid_identity(const struct job *d)
{
	const char *hex = sp_json_str(d->truth, "uid");
	cr_assert(hex && strlen(hex) == 256, "truth has no 128-byte uid");
	unsigned char b[128];
	for (int i = 0; i < 128; i++) {
		unsigned v = 0;
		sscanf(hex + 2 * i, "%2x", &v);
		b[i] = (unsigned char)v;
	}
	return fnv1a(0xcbf29ce484222325ull, b, sizeof(b));
}

/*
 * FNV-1a of (a, b) as 8 then 4 little-endian bytes: a split's identity from
 * (the parent's identity, the color), ncclCommInitAll's from (pid, the call's number).
 */
static uint64_t pair_identity(uint64_t parent, uint32_t color)
{
	unsigned char b[12];
	for (int i = 0; i < 8; i++)
		b[i] = (unsigned char)(parent >> (8 * i));
	for (int i = 0; i < 4; i++)
		b[8 + i] = (unsigned char)(color >> (8 * i));
	return fnv1a(0xcbf29ce484222325ull, b, sizeof(b));
}

static int is_nccl_kernel(const struct sp_json *rec)
{
	const char *n = sp_json_str(rec, "name");
	return str_eq(rec, "kind", "launch") && n && !strncmp(n, "ncclDevKernel_", 14);
}

/* The comm record of the same thread whose [begin, end) holds rec's host call; NULL when none. */
static const struct sp_json *holder(const struct job *d, const struct sp_json *rec)
{
	uint64_t b = sp_json_u64(rec, "begin_ns", 0), e = sp_json_u64(rec, "end_ns", 0);
	int64_t pid = sp_json_i64(rec, "pid", -1), tid = sp_json_i64(rec, "tid", -1);
	for (size_t i = 0; i < d->nrec; i++) {
		const struct sp_json *c = d->rec[i];
		if (!c || !str_eq(c, "kind", "comm") || sp_json_i64(c, "pid", -2) != pid ||
		    sp_json_i64(c, "tid", -2) != tid)
			continue;
		if (sp_json_u64(c, "begin_ns", ~0ull) <= b && e <= sp_json_u64(c, "end_ns", 0))
			return c;
	}
	return NULL;
}

/* ------------------------------------ 2. the records of each rank, each door */

static void expect_rank(const struct job *d, int r, const char *door, int split)
{
	const struct sp_json *t = rank_truth(d, r);
	int64_t pid = sp_json_i64(t, "pid", -1);
	uint64_t stream = hex_of(t, "stream"), comm = hex_of(t, "comm"), sub = hex_of(t, "split_comm");
	uint64_t ident = uid_identity(d);
	int peer = (r + 1) % 2;
	size_t inits = 0, splits = 0, ar = 0, send = 0, recv = 0, gend = 0, destroy = 0, other = 0;
	size_t kernels = 0, in_ar = 0, in_gend = 0;
	for (size_t i = 0; i < d->nrec; i++) {
		const struct sp_json *x = d->rec[i];
		if (!x || !of_pid(x, pid))
			continue;
		const char *api = sp_json_str(x, "api");
		if (str_eq(x, "kind", "comm_init")) {
			cr_expect_eq(sp_json_i64(x, "result", -1), 0, "%s rank %d: %s failed", door, r, api);
			cr_expect_eq(sp_json_i64(x, "rank", -1), r, "%s rank %d: %s rank %lld", door, r, api,
				     (long long)sp_json_i64(x, "rank", -1));
			cr_expect_eq(sp_json_u64(x, "nranks", 0), 2, "%s rank %d: %s nranks %llu", door, r, api,
				     (unsigned long long)sp_json_u64(x, "nranks", 0));
			cr_expect_eq(sp_json_u64(x, "device", 999), (uint64_t)r, "%s rank %d: %s on device %llu", door,
				     r, api, (unsigned long long)sp_json_u64(x, "device", 999));
			if (str_eq(x, "api", "ncclCommInitRank")) {
				inits++;
				cr_expect_eq(hex_of(x, "comm"), comm, "%s rank %d: comm_init handle %s", door, r,
					     sp_json_str(x, "comm"));
				cr_expect_eq(sp_json_u64(x, "value", 0), ident,
					     "%s rank %d: identity %llu, FNV-1a of the unique id is %llu", door, r,
					     (unsigned long long)sp_json_u64(x, "value", 0), (unsigned long long)ident);
			} else if (str_eq(x, "api", "ncclCommSplit")) {
				splits++;
				cr_expect_eq(hex_of(x, "comm"), sub, "%s rank %d: split handle %s", door, r,
					     sp_json_str(x, "comm"));
				cr_expect_eq(sp_json_u64(x, "value", 0), pair_identity(ident, 0),
					     "%s rank %d: split identity %llu", door, r,
					     (unsigned long long)sp_json_u64(x, "value", 0));
			} else {
				other++;
			}
			continue;
		}
		if (str_eq(x, "kind", "comm")) {
			cr_expect_eq(sp_json_i64(x, "result", -1), 0, "%s rank %d: %s failed", door, r, api);
			if (str_eq(x, "api", "ncclAllReduce")) {
				ar++;
				cr_expect_eq(sp_json_u64(x, "bytes", 0), (uint64_t)COUNT * 4,
					     "%s rank %d: all-reduce of %llu bytes", door, r,
					     (unsigned long long)sp_json_u64(x, "bytes", 0));
				cr_expect_eq(sp_json_i64(x, "peer", 0), -1);
				cr_expect_eq(sp_json_u64(x, "flags", 9), 0,
					     "%s rank %d: an all-reduce outside a group flagged", door, r);
				cr_expect_eq(hex_of(x, "stream"), stream);
				uint64_t c = hex_of(x, "comm");
				cr_expect(c == comm || (split && c == sub), "%s rank %d: all-reduce on %s", door, r,
					  sp_json_str(x, "comm"));
			} else if (str_eq(x, "api", "ncclSend") || str_eq(x, "api", "ncclRecv")) {
				*(str_eq(x, "api", "ncclSend") ? &send : &recv) += 1;
				cr_expect_eq(sp_json_u64(x, "bytes", 0), (uint64_t)P2P * 8,
					     "%s rank %d: %s of %llu bytes", door, r, api,
					     (unsigned long long)sp_json_u64(x, "bytes", 0));
				cr_expect_eq(sp_json_i64(x, "peer", -9), peer, "%s rank %d: %s peer %lld", door, r, api,
					     (long long)sp_json_i64(x, "peer", -9));
				cr_expect_eq(sp_json_u64(x, "flags", 0), 1, "%s rank %d: %s in a group not flagged",
					     door, r, api);
				cr_expect_eq(hex_of(x, "stream"), stream);
				cr_expect_eq(hex_of(x, "comm"), comm);
			} else if (str_eq(x, "api", "ncclGroupEnd")) {
				gend++;
				cr_expect_eq(sp_json_u64(x, "bytes", 0), 2ull * P2P * 8,
					     "%s rank %d: the group's %llu bytes", door, r,
					     (unsigned long long)sp_json_u64(x, "bytes", 0));
				cr_expect_eq(hex_of(x, "comm"), 0);
				cr_expect_eq(hex_of(x, "stream"), stream);
				cr_expect_eq(sp_json_u64(x, "flags", 9), 0);
			} else if (str_eq(x, "api", "ncclCommDestroy")) {
				destroy++;
				uint64_t c = hex_of(x, "comm");
				cr_expect(c == comm || (split && c == sub), "%s rank %d: destroy of %s", door, r,
					  sp_json_str(x, "comm"));
			} else {
				other++;
				cr_expect(0, "%s rank %d: a comm record of %s", door, r, api);
			}
			continue;
		}
		if (is_nccl_kernel(x)) {
			kernels++;
			cr_expect(api && !strcmp(api, "cuLaunchKernel"),
				  "%s rank %d: %s launched through %s, not the driver's entry point", door, r,
				  sp_json_str(x, "name"), api);
			const struct sp_json *c = holder(d, x);
			cr_expect(c, "%s rank %d: kernel %s at %llu inside no NCCL call", door, r,
				  sp_json_str(x, "name"), (unsigned long long)sp_json_u64(x, "begin_ns", 0));
			in_ar += c && str_eq(c, "api", "ncclAllReduce");
			in_gend += c && str_eq(c, "api", "ncclGroupEnd");
		}
	}
	size_t k = K_ALLREDUCE + (split ? 1 : 0);
	cr_expect_eq(inits, 1, "%s rank %d: %zu ncclCommInitRank records", door, r, inits);
	cr_expect_eq(splits, split ? 1 : 0, "%s rank %d: %zu ncclCommSplit records", door, r, splits);
	cr_expect_eq(other, 0);
	cr_expect_eq(ar, k, "%s rank %d: %zu all-reduce records, the rank made %zu", door, r, ar, k);
	cr_expect_eq(send, 1, "%s rank %d: %zu send records", door, r, send);
	cr_expect_eq(recv, 1, "%s rank %d: %zu recv records", door, r, recv);
	cr_expect_eq(gend, 1, "%s rank %d: %zu group-end records", door, r, gend);
	cr_expect_eq(destroy, split ? 2 : 1, "%s rank %d: %zu destroy records", door, r, destroy);
	cr_expect_geq(in_ar, k, "%s rank %d: %zu NCCL kernels inside the %zu all-reduces", door, r, in_ar, k);
	cr_expect_geq(in_gend, 1, "%s rank %d: no NCCL kernel inside the group's end", door, r);
	cr_expect_geq(kernels, k + 1, "%s rank %d: %zu ncclDevKernel launches", door, r, kernels);
}

/* No ncclGroupStart record, and one identity for the job's communicator in both ranks. */
static void expect_job(const struct job *d, const char *door, int split)
{
	uint64_t id[2] = {0, 0};
	for (int r = 0; r < 2; r++) {
		expect_rank(d, r, door, split);
		int64_t pid = sp_json_i64(rank_truth(d, r), "pid", -1);
		for (size_t i = 0; i < d->nrec; i++) {
			const struct sp_json *x = d->rec[i];
			if (x && of_pid(x, pid) && str_eq(x, "kind", "comm_init") &&
			    str_eq(x, "api", "ncclCommInitRank"))
				id[r] = sp_json_u64(x, "value", 0);
		}
	}
	cr_expect(id[0] && id[0] == id[1], "%s: identities %llu and %llu", door, (unsigned long long)id[0],
		  (unsigned long long)id[1]);
	for (size_t i = 0; i < d->nrec; i++)
		cr_expect(!(d->rec[i] && str_eq(d->rec[i], "api", "ncclGroupStart")), "%s: a ncclGroupStart record",
			  door);
}

Test(nccl_capture, plt_door_records, .timeout = 180)
{
	struct job d;
	job_run(&d, "tests/bin/nccl_plt", NULL, NULL);
	expect_job(&d, "PLT", 0);
	job_free(&d);
}

Test(nccl_capture, dlsym_door_records, .timeout = 180)
{
	struct job d;
	job_run(&d, "tests/bin/nccl_dlsym", NULL, NULL);
	expect_job(&d, "dlsym", 0);
	job_free(&d);
}

/* ------------------------------------------------- 3. a split's identity */

Test(nccl_capture, split_identity_rank_and_size, .timeout = 180)
{
	struct job d;
	const char *args[] = {"--split", NULL};
	job_run(&d, "tests/bin/nccl_dlsym", args, NULL);
	expect_job(&d, "dlsym+split", 1);
	job_free(&d);
}

/*
 * One process, both ranks (ncclCommInitAll): the identity is FNV-1a of (pid, 1)
 * (this process's first ncclCommInitAll), every collective's bytes are its
 * per-rank count x its datatype's size, grouped, with its root as peer; each
 * group's end sums both ranks' bytes on the first rank's stream.
 */
Test(nccl_capture, init_all_every_collective_finalize_abort, .timeout = 180)
{
	struct job d;
	const char *args[] = {"--all", NULL};
	job_run(&d, "tests/bin/nccl_plt", args, NULL);
	int64_t pid = sp_json_i64(d.truth, "pid", -1);
	uint64_t comm[2] = {0, 0}, stream[2] = {0, 0};
	const struct sp_json *cs = sp_json_get(d.truth, "comms"), *ss = sp_json_get(d.truth, "streams");
	cr_assert(cs && ss && cs->n == 2 && ss->n == 2, "truth without comms and streams");
	for (int i = 0; i < 2; i++) {
		comm[i] = strtoull(sp_json_at(cs, (size_t)i)->str, NULL, 16);
		stream[i] = strtoull(sp_json_at(ss, (size_t)i)->str, NULL, 16);
	}
	static const struct {
		const char *api;
		uint64_t size;
		int peer;
	} want[] = {
	    {"ncclAllReduce", 2, -1}, {"ncclReduce", 8, 1},	{"ncclBroadcast", 1, 0},
	    {"ncclBcast", 2, 1},      {"ncclAllGather", 4, -1}, {"ncclReduceScatter", 8, -1},
	};
	size_t nw = sizeof(want) / sizeof(want[0]), seen[6][2] = {{0}}, inits = 0, gend = 0, fin = 0, destroy = 0,
	       abort_ = 0, kernels = 0, held = 0;
	uint64_t ident = pair_identity((uint64_t)pid, 1);
	size_t g = 0;
	for (size_t i = 0; i < d.nrec; i++) {
		const struct sp_json *x = d.rec[i];
		if (!x || !of_pid(x, pid))
			continue;
		const char *api = sp_json_str(x, "api");
		if (str_eq(x, "kind", "comm_init")) {
			int r = (int)sp_json_i64(x, "rank", -1);
			cr_expect(str_eq(x, "api", "ncclCommInitAll"), "a comm_init of %s", api);
			cr_expect(r == 0 || r == 1, "comm_init rank %d", r);
			if (r == 0 || r == 1) {
				cr_expect_eq(hex_of(x, "comm"), comm[r], "rank %d: handle %s", r,
					     sp_json_str(x, "comm"));
				cr_expect_eq(sp_json_u64(x, "device", 999), (uint64_t)r, "rank %d on device %llu", r,
					     (unsigned long long)sp_json_u64(x, "device", 999));
			}
			cr_expect_eq(sp_json_u64(x, "nranks", 0), 2);
			cr_expect_eq(sp_json_u64(x, "value", 0), ident, "identity %llu, FNV-1a of (pid, 1) is %llu",
				     (unsigned long long)sp_json_u64(x, "value", 0), (unsigned long long)ident);
			inits++;
			continue;
		}
		if (is_nccl_kernel(x)) {
			kernels++;
			const struct sp_json *c = holder(&d, x);
			held += c && str_eq(c, "api", "ncclGroupEnd");
			continue;
		}
		if (!str_eq(x, "kind", "comm"))
			continue;
		cr_expect_eq(sp_json_i64(x, "result", -1), 0, "%s failed", api);
		uint64_t c = hex_of(x, "comm");
		if (str_eq(x, "api", "ncclGroupEnd")) {
			cr_expect(g < nw, "more group ends than groups");
			if (g < nw) {
				cr_expect_eq(sp_json_u64(x, "bytes", 0), 2 * (uint64_t)COUNT * want[g].size,
					     "the group of %s: %llu bytes", want[g].api,
					     (unsigned long long)sp_json_u64(x, "bytes", 0));
			}
			cr_expect_eq(hex_of(x, "stream"), stream[0]);
			cr_expect_eq(c, 0);
			gend++, g++;
			continue;
		}
		fin += str_eq(x, "api", "ncclCommFinalize") && (c == comm[0] || c == comm[1]);
		destroy += str_eq(x, "api", "ncclCommDestroy") && c == comm[0];
		abort_ += str_eq(x, "api", "ncclCommAbort") && c == comm[1];
		for (size_t w = 0; w < nw; w++) {
			if (!str_eq(x, "api", want[w].api))
				continue;
			int r = c == comm[0] ? 0 : c == comm[1] ? 1 : -1;
			cr_expect(r >= 0, "%s on %s", api, sp_json_str(x, "comm"));
			if (r >= 0) {
				seen[w][r]++;
				cr_expect_eq(hex_of(x, "stream"), stream[r], "%s of rank %d on stream %s", api, r,
					     sp_json_str(x, "stream"));
			}
			cr_expect_eq(sp_json_u64(x, "bytes", 0), (uint64_t)COUNT * want[w].size, "%s: %llu bytes", api,
				     (unsigned long long)sp_json_u64(x, "bytes", 0));
			cr_expect_eq(sp_json_i64(x, "peer", -9), want[w].peer, "%s: peer %lld", api,
				     (long long)sp_json_i64(x, "peer", -9));
			cr_expect_eq(sp_json_u64(x, "flags", 0), 1, "%s in a group not flagged", api);
			cr_expect_eq(g, w, "%s outside its group", api);
		}
	}
	cr_expect_eq(inits, 2, "%zu comm_init records", inits);
	for (size_t w = 0; w < nw; w++)
		cr_expect(seen[w][0] == 1 && seen[w][1] == 1, "%s: %zu and %zu records", want[w].api, seen[w][0],
			  seen[w][1]);
	cr_expect_eq(gend, nw, "%zu group-end records", gend);
	cr_expect_eq(fin, 2, "%zu finalize records", fin);
	cr_expect_eq(destroy, 1, "%zu destroy records", destroy);
	cr_expect_eq(abort_, 1, "%zu abort records", abort_);
	cr_expect_eq(kernels, 2 * nw, "%zu NCCL kernels", kernels);
	cr_expect_eq(held, kernels, "%zu of %zu NCCL kernels inside a group's end", held, kernels);
	job_free(&d);
}

/*
 * Without NCCL: the dlsym door hides libstepprof.so's own NCCL exports from a
 * program probing for NCCL (the program's exit status); a wrapper reached all
 * the same (a weak reference bound to it) finds no real function and returns
 * ncclInternalError (3), errno untouched, and records nothing.
 */
Test(nccl_capture, without_nccl_probe_finds_nothing_and_wrappers_fail_cleanly, .timeout = 60)
{
	struct job d;
	const char *args[] = {"--probe", NULL};
	job_run(&d, "tests/bin/nccl_dlsym", args, NULL);
	cr_expect_eq(sp_json_num(d.truth, "probe", 0), 1);
	cr_assert_eq(sp_json_num(d.truth, "weak", 0), 1, "the weak references were not bound to libstepprof.so");
	cr_expect_eq(sp_json_num(d.truth, "all_reduce", -1), 3, "ncclAllReduce without NCCL gave %g",
		     sp_json_num(d.truth, "all_reduce", -1));
	cr_expect_eq(sp_json_num(d.truth, "group_start", -1), 3, "ncclGroupStart without NCCL gave %g",
		     sp_json_num(d.truth, "group_start", -1));
	cr_expect_eq(sp_json_num(d.truth, "errno", -1), 4242, "errno %g", sp_json_num(d.truth, "errno", -1));
	for (size_t i = 0; i < d.nrec; i++)
		cr_expect(!(d.rec[i] && (str_eq(d.rec[i], "kind", "comm") || str_eq(d.rec[i], "kind", "comm_init"))),
			  "a record of %s without NCCL", sp_json_str(d.rec[i], "api"));
	job_free(&d);
}

/* ------------------------------------------------------ 4. STEPPROF_NCCL=0 */

/* The ncclDevKernel launches of rank r, and their names joined (in order). */
static size_t rank_kernels(const struct job *d, int r, char *names, size_t cap)
{
	int64_t pid = sp_json_i64(rank_truth(d, r), "pid", -1);
	size_t n = 0, len = 0;
	names[0] = 0;
	for (size_t i = 0; i < d->nrec; i++) {
		const struct sp_json *x = d->rec[i];
		if (!x || !of_pid(x, pid) || !is_nccl_kernel(x))
			continue;
		n++;
		len += (size_t)snprintf(names + len, len < cap ? cap - len : 0, "%s;", sp_json_str(x, "name"));
		if (len >= cap)
			len = cap - 1;
	}
	return n;
}

Test(nccl_capture, off_no_records_same_kernels, .timeout = 240)
{
	struct job on, off;
	const char *env_off[] = {"STEPPROF_NCCL=0", NULL};
	job_run(&on, "tests/bin/nccl_plt", NULL, NULL);
	job_run(&off, "tests/bin/nccl_plt", NULL, env_off);
	size_t nrecs = 0;
	for (size_t i = 0; i < off.nrec; i++)
		nrecs += off.rec[i] && (str_eq(off.rec[i], "kind", "comm") || str_eq(off.rec[i], "kind", "comm_init"));
	cr_expect_eq(nrecs, 0, "STEPPROF_NCCL=0: %zu comm/comm_init records", nrecs);
	static char a[65536], b[65536];
	for (int r = 0; r < 2; r++) {
		size_t na = rank_kernels(&on, r, a, sizeof(a)), nb = rank_kernels(&off, r, b, sizeof(b));
		cr_expect_geq(na, K_ALLREDUCE + 1, "rank %d: %zu NCCL kernels with the hooks on", r, na);
		cr_expect_eq(nb, na, "rank %d: %zu NCCL kernels with STEPPROF_NCCL=0, %zu with the hooks on", r, nb,
			     na);
		cr_expect_str_eq(b, a, "rank %d: the kernels differ", r);
	}
	job_free(&on);
	job_free(&off);
}
