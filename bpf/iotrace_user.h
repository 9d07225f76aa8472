/*
 * iotrace_user.h - what the files of the loader stepprof-bpf share: the
 * collector's state and the functions one file calls in another.
 *
 *   iotrace.c   options, open -> configure -> load -> attach -> poll, main()
 *   proctree.c  the traced processes, their fd -> path tables
 *   emit.c      events -> trace records (string interning, streams, LOST)
 */
#ifndef STEPPROF_IOTRACE_USER_H
#define STEPPROF_IOTRACE_USER_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <linux/types.h> /* the __u32/__u64 of iotrace.h */

#include "hashmap.h"
#include "tracefile.h"
#include "iotrace.h"

#define PROG "stepprof-bpf"

struct bpf_map;
struct iotrace_bpf;

/*
 * Interned paths: each distinct string is written once to the trace's keep
 * area as a STRING record and referred to by id. Keyed by a 64-bit hash with
 * the string kept for the equality check (collisions chain by rehashing).
 */
struct interned {
	uint32_t id;
	uint32_t len;
	bool own; /* in the trace directory (see strtab.own) */
	char s[];
};

struct strtab {
	struct hashmap byhash;	/* hash -> struct interned * */
	struct interned **byid; /* id -> string, for joining a path to its directory fd's */
	uint32_t next_id, cap_id;
	struct sp_tf *tf;
	/*
	 * The trace directory (-o), absolute, as given and with symbolic links
	 * resolved: the preload writes its own trace file there (its open, its
	 * fstats), which is not the job's input.
	 */
	char *own[2];
};

/*
 * The path of an fd opened for output (IOTRACE_F_OUTPUT): no record of it is
 * written, and its dups and a forked child's copy are output as well, as the
 * libc wrappers keep it (IO_W_OUTPUT). Never an interned id (strtab_get: none).
 */
#define PATH_OUTPUT UINT32_MAX

struct fdent {
	uint32_t path; /* interned path id, 0 = unknown, PATH_OUTPUT */
	uint64_t file; /* identity of the open file (kernel address), 0 = unknown (fds found in /proc) */
	uint64_t born; /* end_ns of the call that made it (0: found in /proc), for close_range */
};

/*
 * An fd whose close is still in flight when an open of another thread has
 * already been given the same number (events come in the order calls return,
 * see iotrace.h): the closed file's entry waits here for its close event (and
 * for reads that began before that close). A few suffice: each one needs a
 * close overtaken by an open, and leaves with the close.
 */
#define NDISPLACED 8
struct displaced {
	int32_t fd;
	uint32_t path;
	uint64_t file; /* never 0 */
};

struct proc {
	int32_t pid;
	bool alive;
	bool dead;	   /* found dead by check_liveness, removed after a last drain */
	char *cwd;	   /* NULL until first needed (or lost) */
	bool cwd_lost;	   /* the working directory is not known (see proc_lose_cwd) */
	bool libc_io;	   /* its libc wrappers record its file input into our directory (proc_check_libc_io) */
	struct fdent *fds; /* indexed by fd */
	uint32_t nfds;
	struct displaced displaced[NDISPLACED]; /* file == 0: free */
	unsigned next_displaced;		/* round robin: a lost close's entry is reused in time */
};

struct collector {
	struct sp_tf tf;
	struct strtab strings;
	struct hashmap procs;	/* tgid -> struct proc * */
	struct hashmap streams; /* (tgid << 32 | tid) -> struct sp_tf_stream * */
	uint64_t last_key;	/* the stream of the previous record */
	struct sp_tf_stream *last_stream;
	uint32_t nalive;
	uint64_t records;
	bool told_libc_io;   /* the line of proc_check_libc_io was printed */
	struct hashmap held; /* (tgid << 32 | tid) -> struct held *: an interrupted call, see on_call() */
};

/* proctree.c */
void die_oom(void);
void *xcalloc(size_t n, size_t sz);
void **xslot(struct hashmap *m, uint64_t key);
struct proc *proc_get(struct collector *c, int32_t pid, bool create);
void proc_new_fd(struct proc *p, int fd, uint32_t path, uint64_t file, uint64_t born);
uint32_t fd_path(struct proc *p, int fd, uint64_t file);
void fd_closed(struct proc *p, int fd, uint64_t file);
void proc_execed(struct proc *p, const uint8_t *open_fds, uint32_t covered);
void proc_scan_fds(struct collector *c, struct proc *p);
const char *proc_cwd(struct proc *p);
void proc_check_libc_io(struct collector *c, struct proc *p, const char *given, size_t given_len);
void proc_forked(struct collector *c, int32_t parent, int32_t child);
void proc_exited(struct collector *c, struct proc *p);
bool pid_dead(int32_t pid);
int32_t thread_group(int32_t tid);
void trace_descendants(struct collector *c, struct bpf_map *traced);
size_t path_normalize(char *s, size_t len);
uint32_t path_id(struct collector *c, struct proc *p, int dirfd, uint64_t dirfile, const char *path, size_t len);
void on_bookkeeping(struct collector *c, struct proc *p, const struct iotrace_event *e, size_t plen);

/* emit.c */
uint32_t strtab_intern(struct strtab *t, const char *s, size_t len);
const struct interned *strtab_get(const struct strtab *t, uint32_t id);
void stream_close(struct collector *c, uint64_t key);
void held_flush_pid(struct collector *c, int32_t pid);
int on_ring(void *ctx, void *data, size_t size);
void drain_batches(struct collector *c, struct iotrace_bpf *skel);
uint64_t write_lost(struct collector *c, struct bpf_map *lost, uint64_t *total);

#endif
