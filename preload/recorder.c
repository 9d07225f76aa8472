/*
 * recorder.c - the in-process recorder of libstepprof.so: recorder.h on top of
 * the trace-file writer (tracefile.c) and the intern table (intern.c).
 *
 * Divided into:
 *   1. process state: the one trace file, created lazily at the first record,
 *   2. thread state: a writer stream in initial-exec TLS, closed at thread exit,
 *   3. the record path (sp_emit, sp_intern, sp_next_op),
 *   4. fork, start-up and shutdown,
 *   5. warnings,
 *   6. per-window summaries (SUMMARY, SUMMARY_DEVICE in the keep area), which
 *      also feed the in-job runaway-memory alert (alert.h).
 *
 * The hot path is recorder.h's inline sp_emit (a one-slot kind named by a
 * constant) on a thread that already has a chunk: a TLS load, a bounds check,
 * one relaxed load and compare (has the record crossed the summary window's
 * end?), the kind's own fields encoded by code folded for that kind
 * (sp_tf_encode_k: the bytes of trace.h's sp_encode) and two release stores
 * into the MAP_SHARED file. Everything else comes here (sp_emit_slow): a first
 * record, a full chunk, a window's end, a multi-slot or variable kind, and
 * STEP, ALLOC, FREE (they update the summary's running values).
 */
#include "recorder.h"

#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "alert.h"
#include "config.h"
#include "intern.h"
#include "tracefile.h"

volatile int sp_active;
__thread int sp_hook_depth __attribute__((tls_model("initial-exec")));

/* ------------------------------------------------------- 1. process state */

enum { FILE_NONE, FILE_CREATING, FILE_READY, FILE_FAILED };

struct sp_proc_page sp_proc;
static int g_wipe_ok; /* sp_proc is MADV_WIPEONFORK (Linux >= 4.14) */
static struct sp_tf g_tf = {.fd = -1};
static struct sp_intern g_intern;
/* this thread is creating the file (a signal handler on it must not wait for itself) */
static __thread int t_creating __attribute__((tls_model("initial-exec")));
/* records of signal handlers lost while this thread had no stream yet (creating the file, attaching) */
static __thread uint32_t t_early_lost __attribute__((tls_model("initial-exec")));
/*
 * The rare path of this thread is running (t_rare): a signal handler that records
 * meanwhile must not claim a chunk or write a summary under it.
 */
static __thread int t_rare __attribute__((tls_model("initial-exec")));
/* this thread is interning (a fork in a signal handler meanwhile: fork_child_mid_record) */
static __thread int t_interning __attribute__((tls_model("initial-exec")));
static char g_dir[SP_TF_PATH_MAX];
static char g_run_id[SP_RUN_ID_SIZE]; /* a forked child keeps its parent's: one job */
static uint64_t g_max_bytes;
static int32_t g_pid, g_ppid; /* g_ppid: the forking parent in a child, else 0 (getppid at creation) */

static void tf_warn(const char *key, const char *msg)
{
	sp_warn_once(key, "%s", msg);
}

static int32_t gettid_raw(void)
{
	return (int32_t)syscall(SYS_gettid);
}

/* ------------------------------------ a child the atfork handlers missed */

static void atfork_child(void);

/*
 * Set up sp_proc as a page of its own that a child made by clone() without
 * CLONE_VM finds zeroed (MADV_WIPEONFORK). Called before the recorder is
 * active: every value in it is 0 until then, so replacing the page loses nothing.
 */
static void proc_page_init(void)
{
	void *p = (void *)syscall(SYS_mmap, &sp_proc, sizeof(sp_proc), PROT_READ | PROT_WRITE,
				  MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED, -1, 0);
	g_wipe_ok = p == (void *)&sp_proc && syscall(SYS_madvise, &sp_proc, sizeof(sp_proc), MADV_WIPEONFORK) == 0;
	sp_proc.alive = 1;
}

/*
 * sp_proc reads 0 (alive) in a child made by a raw clone(SIGCHLD): its memory
 * is a copy of the parent's, the trace mapping (MAP_SHARED) included, and no
 * atfork handler told the recorder. Its records would go into the chunk the
 * parent writes at the same time, under the parent's pid, over the parent's
 * own. It is given its own file, as fork does.
 * Not in a vfork()ed child: it shares the page, alive stays 1 (thread_attach's
 * getpid keeps it out).
 */
static __attribute__((noinline)) void proc_check_slow(void)
{
	int saved = errno;
	if ((int32_t)syscall(SYS_getpid) != g_pid)
		atfork_child();
	__atomic_store_n(&sp_proc.alive, 1, __ATOMIC_RELEASE);
	errno = saved;
}

static inline void proc_check(void)
{
	if (__builtin_expect(!__atomic_load_n(&sp_proc.alive, __ATOMIC_ACQUIRE), 0) && g_wipe_ok && sp_active)
		proc_check_slow();
}

/* --------------------------------------------- the trace file cut short */

/*
 * The file is MAP_SHARED: when another program truncates it (`: > file`, a
 * log rotation) a store into a page past its new end raises SIGBUS, whose
 * default kills the job (exit 135). A handler, chained to the one the program
 * had: a fault inside the trace mapping turns the mapping into private zeros
 * at the same address (MAP_FIXED), so the store completes in memory, the
 * process stops recording (sp_active 0: threads finish their current chunk in
 * that memory, nothing more), and one warning says so; any other SIGBUS goes
 * to the program's handler, or kills as it would have.
 * NOTE: installed when the file is made; a handler the program sets later
 * replaces it (the program then sees the SIGBUS of a truncated trace).
 */
static struct sigaction g_prev_bus;
static int g_bus_installed;

static void on_sigbus(int sig, siginfo_t *si, void *uc)
{
	uint8_t *a = (uint8_t *)si->si_addr, *base = __atomic_load_n(&g_tf.base, __ATOMIC_ACQUIRE);
	if (si->si_code > 0 && base && a >= base && a < base + g_tf.size) {
		int saved = errno;
		__atomic_store_n(&sp_active, 0, __ATOMIC_RELEASE);
		sp_capture_stop();
		syscall(SYS_mmap, base, g_tf.size, PROT_READ | PROT_WRITE,
			MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED | MAP_NORESERVE, -1, 0);
		sp_warn_once("truncated",
			     "%s was truncated while the process ran: its records are lost, this process is no "
			     "longer recorded",
			     g_tf.path);
		errno = saved;
		return; /* the store is made again, into memory */
	}
	if (g_prev_bus.sa_flags & SA_SIGINFO) {
		g_prev_bus.sa_sigaction(sig, si, uc);
		return;
	}
	if (g_prev_bus.sa_handler != SIG_DFL && g_prev_bus.sa_handler != SIG_IGN) {
		g_prev_bus.sa_handler(sig);
		return;
	}
	/* the default: a fault comes again when the instruction does and kills; a sent one is sent again */
	struct sigaction dfl = {.sa_handler = SIG_DFL};
	sigaction(SIGBUS, &dfl, NULL);
	if (si->si_code <= 0 && g_prev_bus.sa_handler == SIG_DFL)
		raise(SIGBUS);
}

static void sigbus_install(void)
{
	if (g_bus_installed)
		return; /* a forked child: its parent's handler, and what it chained to, came with it */
	struct sigaction sa = {0};
	sa.sa_sigaction = on_sigbus;
	sa.sa_flags = SA_SIGINFO | SA_ONSTACK | SA_RESTART;
	sigfillset(&sa.sa_mask);
	if (sigaction(SIGBUS, &sa, &g_prev_bus) == 0)
		g_bus_installed = 1;
}

static void create_file(void)
{
	char err[512];
	struct sp_tf_opts o = {
	    .dir = g_dir,
	    .max_bytes = g_max_bytes,
	    .pid = g_pid,
	    .ppid = g_ppid,
	    .run_id = g_run_id[0] ? g_run_id : NULL,
	    .warn = tf_warn,
	    .dir_flags = SP_TF_DIR_CREATE,
	    .features = __atomic_load_n(&sp_clk.mode, __ATOMIC_RELAXED) == SP_CLK_TSC ? SP_FEAT_TSC : 0,
	    .cpus = 1, /* this process's, a forked child's own: each makes its file */
	};
	int state = FILE_FAILED;
	sigbus_install();
	if (sp_tf_create(&g_tf, &o, err, sizeof(err)) != 0) {
		sp_warn_once("create", "%s; this process is not recorded", err);
	} else {
		if (g_tf.dir_mode & 077)
			sp_warn_once("dirmode",
				     "%s: the trace directory is open to other users (mode %04o): its files are "
				     "private (0600), their names are not; `chmod go= %s` closes it",
				     g_dir, g_tf.dir_mode, g_dir);
		/* strings (paths, names) never take the summaries' half of the keep area */
		g_tf.keep_string_max = g_tf.keep_slots - g_tf.keep_slots / 2;
		/*
		 * The string table, mapped with the file that its strings go to, not
		 * before: a process that records nothing maps nothing (1 MiB of address
		 * space counts against `ulimit -v`). A forked child keeps its parent's
		 * table, emptied (atfork_child). Without one, records name no path.
		 */
		if (!g_intern.ntab && sp_intern_init(&g_intern, 16) != 0 && sp_intern_init(&g_intern, 10) != 0)
			sp_warn_once("intern", "cannot map the string table (%s): records name no path or kernel",
				     strerror(errno));
		state = FILE_READY;
	}
	__atomic_store_n(&sp_proc.state, state, __ATOMIC_RELEASE);
}

/*
 * The file, created by the first thread that records. Others arriving during
 * the creation (a few syscalls, once per process) wait for it rather than lose
 * records; a signal handler interrupting the creator gives up instead.
 */
static __attribute__((noinline)) int file_ready_slow(void);

static inline int file_ready(void)
{
	return __builtin_expect(__atomic_load_n(&sp_proc.state, __ATOMIC_ACQUIRE) == FILE_READY, 1) || file_ready_slow();
}

int sp_recorder_failed(void)
{
	return __atomic_load_n(&sp_proc.state, __ATOMIC_ACQUIRE) == FILE_FAILED;
}

static __attribute__((noinline)) int file_ready_slow(void)
{
	if (!t_rare && !t_interning)
		proc_check();
	int s = __atomic_load_n(&sp_proc.state, __ATOMIC_ACQUIRE);
	if (s == FILE_READY)
		return 1;
	if (s == FILE_FAILED)
		return 0;
	if (t_creating)
		return 0; /* a signal handler interrupting this thread's creation of the file */
	int saved = errno;
	if (s == FILE_NONE && (int32_t)syscall(SYS_getpid) != g_pid) {
		errno = saved;
		return 0; /* a vfork()ed child: the file would be the parent's, made from the child (thread_attach) */
	}
	if (s == FILE_NONE) {
		/*
		 * Signals blocked while the file is made (once per process): a handler
		 * that forked meanwhile left its child to finish the creation on the
		 * state the fork had cleared, and the child truncated the parent's new
		 * file to 0 bytes: the parent died of SIGBUS at its next record.
		 */
		sigset_t all, old;
		sigfillset(&all);
		pthread_sigmask(SIG_BLOCK, &all, &old);
		/*
		 * Flagged before the claim: a handler arriving between the claim and a
		 * flag set after it waited for its own thread forever.
		 */
		t_creating = 1;
		__atomic_signal_fence(__ATOMIC_SEQ_CST);
		if (__atomic_compare_exchange_n(&sp_proc.state, &s, FILE_CREATING, 0, __ATOMIC_ACQ_REL, __ATOMIC_ACQUIRE))
			create_file();
		__atomic_signal_fence(__ATOMIC_SEQ_CST);
		t_creating = 0;
		pthread_sigmask(SIG_SETMASK, &old, NULL);
	}
	while (__atomic_load_n(&sp_proc.state, __ATOMIC_ACQUIRE) == FILE_CREATING)
		syscall(SYS_sched_yield);
	errno = saved;
	return __atomic_load_n(&sp_proc.state, __ATOMIC_ACQUIRE) == FILE_READY;
}

/* -------------------------------------------------------- 2. thread state */

/* the thread's stream (st.tf == NULL: not attached yet); recorder.h's inline sp_emit reads it */
__thread struct sp_tf_stream sp_rec_stream __attribute__((tls_model("initial-exec")));
/* the pthread key's destructor will run for this thread */
static __thread int t_registered __attribute__((tls_model("initial-exec")));
static pthread_key_t g_key;
static int g_key_ok;

/*
 * Records a thread holds back, written at its exit and at the process's: a run
 * of CUDA query polls not answered yet (cuda_call.c). Weak: the recorder's core
 * is also linked without the hooks (unit tests).
 */
__attribute__((weak)) void sp_cuda_thread_flush(void);

static void flush_held(void)
{
	if (sp_cuda_thread_flush)
		sp_cuda_thread_flush();
}

static void thread_dtor(void *p)
{
	(void)p;
	flush_held();
	t_registered = 0;
	sp_recorder_thread_exit();
}

void sp_recorder_thread_watch(void)
{
	if (g_key_ok && !t_registered) {
		pthread_setspecific(g_key, &sp_rec_stream);
		t_registered = 1;
	}
}

/*
 * First record of this thread (or first since fork/exit): a stream on the file.
 * Not in a vfork()ed child (nor a raw clone without the atfork handlers): it
 * shares the parent thread's memory, so attaching would give the parent's
 * thread the child's tid and, were it the first record, make the parent's file
 * from the child (measured: the parent's header ppid said its own pid, its
 * records the child's tid). A getpid once per attach, never on the hot path.
 */
static int thread_attach(void)
{
	if ((int32_t)syscall(SYS_getpid) != g_pid)
		return 0;
	if (!file_ready())
		return 0;
	int saved = errno;
	sp_tf_stream_init(&sp_rec_stream, &g_tf, g_tf.hdr->pid, gettid_raw());
	__atomic_signal_fence(__ATOMIC_SEQ_CST);
	/* records of signal handlers that ran while this thread had no stream: counted now */
	uint32_t early = t_early_lost;
	if (early) {
		t_early_lost -= early; /* from here on, a handler's lost record counts in the stream */
		sp_rec_stream.lost += early;
		__atomic_fetch_add(&g_tf.hdr->lost_records, early, __ATOMIC_RELAXED);
	}
	if (g_key_ok && !t_registered) {
		/* NOTE: a low key index: glibc stores it in the thread descriptor, no malloc */
		pthread_setspecific(g_key, &sp_rec_stream);
		t_registered = 1;
	}
	errno = saved;
	return 1;
}

void sp_recorder_thread_exit(void)
{
	if (sp_rec_stream.tf)
		sp_tf_stream_close(&sp_rec_stream);
	sp_rec_stream.tf = NULL;
}

/* ------------------------------------------------------- 3. record path */

/* Section 6: the summary window's end (UINT64_MAX: off) and the slow path (1: a summary was written). */
static int summary_tick(uint64_t now, int final);
static void summary_note(unsigned kind, const uint64_t *f);

/* ------------------------------------------------------- CPU_TIME samples */

int sp_cpu_samples;
__thread uint64_t sp_cpu_last __attribute__((tls_model("initial-exec")));

/*
 * The process's CPU time (user + system) in ns into f[SP_F_VALUE], and the
 * time of the reading into *now; -1 when the clock failed. The raw syscall:
 * the vDSO has no process CPU clock (glibc's clock_gettime makes the same
 * syscall), and no wrapper of anyone else's is called. errno is kept.
 */
static int cpu_read(uint64_t *f, uint64_t *now)
{
	int saved = errno;
	struct timespec ts;
	long r = syscall(SYS_clock_gettime, CLOCK_PROCESS_CPUTIME_ID, &ts);
	*now = sp_now();
	sp_cpu_last = *now; /* a failed reading too: a clock that fails is not asked again at once */
	errno = saved;
	if (r != 0 || ts.tv_sec < 0 || ts.tv_nsec < 0)
		return -1;
	f[SP_F_VALUE] = (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
	return 0;
}

void sp_cpu_sample(void)
{
	uint64_t f[SP_F__COUNT], now;
	if (cpu_read(f, &now) == 0)
		sp_emit(SP_K_CPU_TIME, SP_API_NONE, now, now, f);
}

/* Reserve, encode and commit a record of a kind known at compile time. */
static inline __attribute__((always_inline)) void emit_k(struct sp_tf_stream *st, unsigned kind, unsigned api,
							 uint64_t begin_ns, uint64_t end_ns, const uint64_t *f)
{
	const unsigned n = sp_tf_kind_slots(kind);
	struct sp_slot *slot, *end;
	for (;;) {
		slot = sp_tf_reserve(st, n, end_ns);
		if (__builtin_expect(!slot, 0)) {
			if (sp_kind_records(kind) == 2)
				sp_tf_drop(st); /* the reservation counted one of its two records */
			return;
		}
		end = st->end;
		st->end = slot; /* busy until the commit, as in sp_emit_k */
		__atomic_signal_fence(__ATOMIC_SEQ_CST);
		if (__builtin_expect(st->cur == slot, 1))
			break;
		sp_tf_stream_unhide(st); /* a handler recorded into the slot before the hiding: reserve again */
	}
	sp_tf_encode_k(slot, kind, api, begin_ns, sp_tf_dur_ns(begin_ns, end_ns), f);
	sp_tf_commit_n(st, slot, kind, n);
	__atomic_signal_fence(__ATOMIC_SEQ_CST);
	st->end = end;
}


static void emit_rare(struct sp_tf_stream *st, unsigned kind, unsigned api, uint64_t begin_ns, uint64_t end_ns,
		      const uint64_t *f);

/* A sample on the rare path (a summary window ended): into the thread's stream, not through sp_emit (t_rare). */
static void cpu_sample_rare(struct sp_tf_stream *st)
{
	uint64_t f[SP_F__COUNT], now;
	if (cpu_read(f, &now) == 0)
		emit_k(st, SP_K_CPU_TIME, SP_API_NONE, now, now, f);
}

void sp_emit_rare(unsigned kind, unsigned api, uint64_t begin_ns, uint64_t end_ns, const uint64_t *f)
{
	if (__builtin_expect(!sp_active, 0))
		return;
	proc_check();
	struct sp_tf_stream *st = &sp_rec_stream;
	/*
	 * A record of a signal handler that interrupted this thread's own record (its
	 * slot taken, not committed yet) or this path: counted lost. Written into the
	 * interrupted record's slot, one of the two would be gone without a count
	 * (3 of 29 handler marks in a loop of 3 million).
	 */
	if (__builtin_expect(t_rare || (st->tf && sp_tf_stream_busy(st)), 0)) {
		for (unsigned i = 0; i < sp_kind_records(kind); i++) {
			if (st->tf)
				sp_tf_drop(st);
			else
				t_early_lost++; /* the thread is attaching: counted by thread_attach */
		}
		return;
	}
	t_rare = 1;
	__atomic_signal_fence(__ATOMIC_SEQ_CST);
	emit_rare(st, kind, api, begin_ns, end_ns, f);
	__atomic_signal_fence(__ATOMIC_SEQ_CST);
	t_rare = 0;
}

/*
 * The whole record path, for what recorder.h's sp_emit_k leaves to it: attach
 * the thread, write a summary when the window's end is crossed, note
 * STEP/ALLOC/FREE for the summaries, claim a new chunk when this one is full.
 * The encoder is still the one folded for the kind (a switch).
 */
static void emit_rare(struct sp_tf_stream *st, unsigned kind, unsigned api, uint64_t begin_ns, uint64_t end_ns,
		      const uint64_t *f)
{
	if (__builtin_expect(!st->tf, 0) && !thread_attach()) {
		/* a signal handler's record while this very thread creates the file: counted at its attach */
		if (t_creating)
			t_early_lost += sp_kind_records(kind);
		return;
	}
	/* before this record counts: a summary describes the records that ended before its window's end */
	if (__builtin_expect(end_ns >= __atomic_load_n(&sp_proc.sum_next, __ATOMIC_RELAXED), 0) &&
	    summary_tick(end_ns, 0) && sp_cpu_samples)
		cpu_sample_rare(st);
	switch (kind) {
	case SP_K_STEP:
	case SP_K_ALLOC:
	case SP_K_FREE:
		summary_note(kind, f);
		break;
	default:
		break;
	}
	switch (kind) {
#define SP_KIND_CASE(K) emit_k(st, K, api, begin_ns, end_ns, f)
#include "stepprof/kind_cases.h"
#undef SP_KIND_CASE
	default:
		break; /* SP_K_NONE or out of range: nothing */
	}
}

/*
 * A kind not known at compile time, or one of several slots: one function per
 * kind, each that kind's inline path (its rare cases go on to sp_emit_rare),
 * reached through a switch of tail calls.
 * RATIONALE: one switch holding every kind's inlined path needs callee-saved
 * registers, so every record paid their saving and restoring; small separate
 * functions need none.
 */
#define SP_KIND(id, num, name, mask)                                                                                   \
	static __attribute__((noinline)) void emit_##id(unsigned api, uint64_t begin_ns, uint64_t end_ns,              \
							const uint64_t *f)                                             \
	{                                                                                                              \
		if (SP_K_##id != SP_K_STRING)                                                                          \
			sp_emit_k(SP_K_##id, api, begin_ns, end_ns, f);                                                \
	}
#include "stepprof/kinds.def"
#undef SP_KIND

void sp_emit_slow(unsigned kind, unsigned api, uint64_t begin_ns, uint64_t end_ns, const uint64_t *f)
{
	switch (kind) {
#define SP_KIND(id, num, name, mask)                                                                                   \
	case SP_K_##id:                                                                                                \
		emit_##id(api, begin_ns, end_ns, f);                                                                   \
		return;
#include "stepprof/kinds.def"
#undef SP_KIND
	default:
		return; /* SP_K_NONE or out of range: nothing */
	}
}


uint32_t sp_intern(const char *s, size_t len)
{
	if (!sp_active)
		return 0;
	proc_check();
	t_interning++;
	__atomic_signal_fence(__ATOMIC_SEQ_CST);
	uint32_t id = file_ready() ? sp_intern_get(&g_intern, &g_tf, s, len) : 0;
	__atomic_signal_fence(__ATOMIC_SEQ_CST);
	t_interning--;
	return id;
}

uint32_t sp_intern_cstr(const char *s)
{
	return s ? sp_intern(s, strlen(s)) : 0;
}


uint32_t sp_next_op_slow(void)
{
	if (!sp_active)
		return 0;
	proc_check();
	if (!file_ready())
		return 0;
	__atomic_store_n(&sp_proc.op_counter, &g_tf.hdr->next_op, __ATOMIC_RELEASE);
	return (uint32_t)__atomic_add_fetch(&g_tf.hdr->next_op, 1, __ATOMIC_RELAXED);
}

struct sp_file_header *sp_trace_header(void)
{
	return sp_active && file_ready() ? g_tf.hdr : NULL;
}

/* ---------------------------------------------- 4. fork, start-up, shutdown */

/*
 * In a forked child: drop the parent's mapping (the child must never write into
 * the parent's file), forget its strings and this thread's stream; the child's
 * own file is created at its first record, naming the parent as ppid.
 */
static void warn_fork_child(void);
static void summary_fork_child(void);
static void summary_init(void);

/*
 * fork() in a signal handler that interrupted this thread inside the recorder
 * (a record, the rare path, an intern): once the handler returns, the child goes
 * on with the interrupted code, which holds pointers into the parent's mapping,
 * its stream and its intern table: unmapped and cleared under it, the child
 * would die of SIGSEGV (19 of 91 such children in markgen -I 100 -Y 200).
 * They stay, the file made harmless (sp_tf_orphan: the interrupted record
 * lands in the child's own memory, never in the parent's file), and this child
 * records nothing (its exec'd programs do).
 */
static void fork_child_mid_record(void)
{
	__atomic_store_n(&sp_active, 0, __ATOMIC_RELEASE);
	sp_capture_stop();
	warn_fork_child();
	sp_clock_fork_child();
	g_pid = (int32_t)syscall(SYS_getpid);
	__atomic_store_n(&sp_proc.op_counter, NULL, __ATOMIC_RELAXED);
	sp_tf_orphan(&g_tf);
	/* the page came wiped: nothing is made for this child, no summary */
	__atomic_store_n(&sp_proc.state, FILE_FAILED, __ATOMIC_RELEASE);
	__atomic_store_n(&sp_proc.sum_next, UINT64_MAX, __ATOMIC_RELAXED);
	__atomic_store_n(&sp_proc.alive, 1, __ATOMIC_RELEASE);
	sp_warn_once("forkrec", "fork() in a signal handler that interrupted a record of its thread: "
				"this child process is not recorded");
}

static void atfork_child(void)
{
	int saved = errno;
	if (t_rare || t_interning || (sp_rec_stream.tf && sp_tf_stream_busy(&sp_rec_stream))) {
		fork_child_mid_record();
		errno = saved;
		return;
	}
	warn_fork_child();
	sp_clock_fork_child();
	int32_t parent = g_pid;
	g_pid = (int32_t)syscall(SYS_getpid);
	g_ppid = parent;
	__atomic_store_n(&sp_proc.op_counter, NULL, __ATOMIC_RELAXED); /* the parent's header */
	sp_tf_release(&g_tf);
	memset(&g_tf, 0, sizeof(g_tf));
	g_tf.fd = -1;
	sp_intern_reset(&g_intern);
	memset(&sp_rec_stream, 0, sizeof(sp_rec_stream));
	t_rare = 0; /* fork() called by a signal handler that interrupted the rare path */
	t_early_lost = 0;
	sp_cpu_last = 0; /* the child's first hand-off is sampled: its file starts with its own CPU time */
	summary_fork_child();
	t_creating = 0;
	__atomic_store_n(&sp_proc.state, FILE_NONE, __ATOMIC_RELEASE);
	__atomic_store_n(&sp_proc.alive, 1, __ATOMIC_RELEASE); /* the page was wiped by the fork */
	sp_api_fork_child();
	sp_capture_fork_child();
	errno = saved;
}

const char *sp_recorder_dir(void)
{
	return g_dir;
}

void sp_recorder_set_run_id(const char *id)
{
	snprintf(g_run_id, sizeof(g_run_id), "%s", id);
}

void sp_recorder_init(const char *dir, uint64_t max_bytes)
{
	snprintf(g_dir, sizeof(g_dir), "%s", dir);
	g_max_bytes = max_bytes;
	g_pid = (int32_t)syscall(SYS_getpid);
	g_ppid = 0;
	proc_page_init();
	sp_tf_layout_init();
	g_key_ok = pthread_key_create(&g_key, thread_dtor) == 0;
	pthread_atfork(NULL, NULL, atfork_child);
	summary_init();
	sp_cpu_samples = sp_cfg.CPU_SAMPLES != 0;
	__atomic_store_n(&sp_active, 1, __ATOMIC_RELEASE);
	sp_capture_init();
}

/*
 * Clean exit. The file is then compacted (libtrace/compact.c): copied without
 * its holes beside itself and renamed over its name, so that its apparent size
 * is what it holds. NOTE: the mapping and the fd stay: other threads may still
 * be writing, into the old file, whose records after the copy are lost.
 */
void sp_recorder_shutdown(void)
{
	if (!sp_active || __atomic_load_n(&sp_proc.state, __ATOMIC_ACQUIRE) != FILE_READY)
		return;
	flush_held(); /* the exiting thread's */
	/* the process's CPU time at its end, inside the capture range only */
	if (sp_cpu_samples && sp_cap.on)
		sp_cpu_sample();
	uint64_t now = sp_now();
	sp_recorder_thread_exit(); /* first: its records count in the last summary */
	summary_tick(now, 1);
	sp_tf_finish(&g_tf, now);
	/* written to the end into a file nobody can open: this line is all that is left of it */
	if (sp_tf_removed(&g_tf))
		sp_warn_once("removed",
			     "%s was removed while the process ran (its directory deleted?): its records (%llu or "
			     "more) are lost",
			     g_tf.path, (unsigned long long)__atomic_load_n(&g_tf.closed_records, __ATOMIC_RELAXED));
	else if (sp_tf_compact(&g_tf) == 1)
		g_tf.path[0] = 0; /* the name is the compact file's now: nothing may reopen it by name */
}

/*
 * _exit and _Exit (hook_proc.c) end the file as exit() does: Python's
 * multiprocessing ends every child with os._exit (each DataLoader worker), so
 * `stepprof info` said "no clean exit recorded (crash, kill or still running)"
 * of every worker, and a pid reused after one could be taken for its exec.
 * Not in a vfork()ed child, whose memory is its parent's (a failed exec in
 * Python's subprocess ends with _exit): the parent's file is the parent's to end.
 */
int sp_recorder_quick_exit_due(void)
{
	return sp_active && (int32_t)syscall(SYS_getpid) == g_pid;
}

void sp_recorder_quick_exit(void)
{
	if (sp_recorder_quick_exit_due())
		sp_recorder_shutdown();
}

/* ------------------------------------------------------------ 5. warnings */

#define WARN_KEYS 64
static char g_warn_keys[WARN_KEYS][64];
static int g_warn_used[WARN_KEYS]; /* 0 free, 1 being written, 2 set */

/* A key being written by a thread that does not exist in the child: free its slot. */
static void warn_fork_child(void)
{
	for (unsigned i = 0; i < WARN_KEYS; i++)
		if (g_warn_used[i] == 1)
			g_warn_used[i] = 0;
}

/* Claim the key; 0 if it was already warned about (or the table is full of others). */
static int warn_first(const char *key)
{
	unsigned spins = 0;
	for (unsigned i = 0; i < WARN_KEYS;) {
		int u = __atomic_load_n(&g_warn_used[i], __ATOMIC_ACQUIRE);
		/*
		 * Another thread is copying its key in (a few ns): it may be ours. Not
		 * for ever: the copier may be this very thread, interrupted by the
		 * signal handler that warns now; past ~1M looks the slot is taken
		 * for another key (at worst one warning said twice).
		 */
		if (u == 1 && ++spins < (1u << 20))
			continue;
		if (u == 1) {
			spins = 0;
			i++;
			continue;
		}
		/* NOTE: keys differing only after 63 bytes count as the same warning */
		if (u == 2) {
			if (strncmp(g_warn_keys[i], key, sizeof(g_warn_keys[i]) - 1) == 0)
				return 0;
			i++;
			continue;
		}
		if (!__atomic_compare_exchange_n(&g_warn_used[i], &u, 1, 0, __ATOMIC_ACQ_REL, __ATOMIC_ACQUIRE))
			continue; /* lost the slot: look at what the winner wrote */
		snprintf(g_warn_keys[i], sizeof(g_warn_keys[i]), "%s", key);
		__atomic_store_n(&g_warn_used[i], 2, __ATOMIC_RELEASE);
		return 1;
	}
	return 0;
}

void sp_warn_once(const char *key, const char *fmt, ...)
{
	int saved = errno;
	if (warn_first(key) && !sp_cfg.QUIET) {
		char line[1024];
		int n = snprintf(line, sizeof(line), "stepprof: ");
		va_list ap;
		va_start(ap, fmt);
		n += vsnprintf(line + n, sizeof(line) - (size_t)n - 1, fmt, ap);
		va_end(ap);
		if (n > (int)sizeof(line) - 2)
			n = (int)sizeof(line) - 2;
		line[n++] = '\n';
		sp_tf_write_stderr(line, (size_t)n);
	}
	errno = saved;
}

/* ----------------------------------------------------- 6. summaries */

/*
 * Every STEPPROF_SUMMARY_MS the process writes a SUMMARY record (steps, records
 * in closed chunks, lost records) and one SUMMARY_DEVICE per device that ever
 * held memory (live bytes at the window's end, peak within the window) into the
 * keep area, which the ring never overwrites: a job whose ring wrapped keeps its
 * whole step and memory history.
 *
 * Who writes: the thread whose record ends at or after the window's end (one
 * relaxed load and compare in sp_emit). It takes g_sum_busy with a CAS (others
 * skip, nobody waits), writes the summary for [begin, the last window boundary
 * before its record] (several windows without any record make one summary) and
 * moves the end on. The clean exit writes the last, shorter window.
 *
 * Running values come from the records themselves, noted in sp_emit after the
 * window check: the last STEP's index + 1, the last ALLOC/FREE's live bytes per
 * device, the highest live bytes since the last summary. So a summary is exact
 * for the records that were emitted before the one that crossed its end (a
 * record of another thread, racing with the crossing, may count in the next
 * window).
 *
 * Size: summaries may use half of the keep area (strings the rest). Each time
 * they have used 1/2, 3/4, 7/8, ... of that budget the window doubles, so at a
 * steady rate each window length lasts as long as the first; when the budget is
 * used up, summaries stop (one warning). At the default 1 s window, 1 GiB cap
 * (64 MiB keep area) and one device: ~2.9 days per window length.
 */
#define SUM_DEVS SP_MAX_DEVICES

static uint64_t g_sum_t0;	  /* process start: windows are [t0 + k*W, t0 + (k+1)*W) */
static uint64_t g_sum_win;	  /* current window length, ns (doubles) */
static uint64_t g_sum_begin;	  /* begin of the window being summed */
static int g_sum_busy;		  /* a thread is writing a summary */
static unsigned g_sum_doublings;  /* times the window doubled */
static uint64_t g_sum_slots_used; /* keep slots taken by summaries */
static uint64_t g_sum_steps;	  /* stepprof_step() calls seen */
static uint32_t g_sum_devmask;	  /* devices that ever held memory */
static uint64_t g_sum_live[SUM_DEVS], g_sum_peak[SUM_DEVS];

static void summary_reset(uint64_t t0)
{
	g_sum_t0 = g_sum_begin = t0;
	g_sum_win = (uint64_t)sp_cfg.SUMMARY_MS * 1000000ull;
	g_sum_busy = 0;
	g_sum_doublings = 0;
	g_sum_slots_used = 0;
	g_sum_steps = 0;
	g_sum_devmask = 0;
	memset(g_sum_live, 0, sizeof(g_sum_live));
	memset(g_sum_peak, 0, sizeof(g_sum_peak));
	sp_alert_reset();
	__atomic_store_n(&sp_proc.sum_next, g_sum_win ? t0 + g_sum_win : UINT64_MAX, __ATOMIC_RELEASE);
}

static void summary_init(void)
{
	summary_reset(sp_now());
}

/* The child's file starts now, with its own steps; its memory is the parent's (not its own). */
static void summary_fork_child(void)
{
	summary_reset(sp_now());
}

static void summary_note(unsigned kind, const uint64_t *f)
{
	if (kind == SP_K_STEP) {
		/* the highest step so far: threads that step at once never take the count back */
		uint64_t v = f[SP_F_VALUE] + 1, s = __atomic_load_n(&g_sum_steps, __ATOMIC_RELAXED);
		while (v > s &&
		       !__atomic_compare_exchange_n(&g_sum_steps, &s, v, 1, __ATOMIC_RELAXED, __ATOMIC_RELAXED))
			;
		return;
	}
	uint64_t dev = f[SP_F_DEVICE], live = f[SP_F_LIVE];
	if (dev >= SUM_DEVS)
		return; /* NOTE: devices past SP_MAX_DEVICES have no summary */
	__atomic_store_n(&g_sum_live[dev], live, __ATOMIC_RELAXED);
	uint64_t p = __atomic_load_n(&g_sum_peak[dev], __ATOMIC_RELAXED);
	while (live > p &&
	       !__atomic_compare_exchange_n(&g_sum_peak[dev], &p, live, 1, __ATOMIC_RELAXED, __ATOMIC_RELAXED))
		;
	if (!(__atomic_load_n(&g_sum_devmask, __ATOMIC_RELAXED) & (1u << dev)))
		__atomic_fetch_or(&g_sum_devmask, 1u << dev, __ATOMIC_RELAXED);
}

/*
 * Write the summary of [begin, end) into the keep area; 0, or -1 when there is
 * no room. Each device's peak then goes to the in-job alert (alert.h), with the
 * device's capacity from the file header (filled at the first allocation), but
 * for the last, shorter window of an exit (final): the process is ending.
 */
static int summary_write(uint64_t begin, uint64_t end, uint64_t now, int final)
{
	uint32_t mask = __atomic_load_n(&g_sum_devmask, __ATOMIC_RELAXED);
	unsigned n = 1 + (unsigned)__builtin_popcount(mask);
	uint64_t budget = g_tf.keep_slots / 2;
	if (g_sum_slots_used + n > budget) {
		sp_warn_once("summary",
			     "the summaries' half of the trace's keep area is full (%llu windows); "
			     "later windows have no summary (raise STEPPROF_MAX_MB or STEPPROF_SUMMARY_MS)",
			     (unsigned long long)g_sum_slots_used);
		return -1;
	}
	struct sp_slot *slot = sp_tf_keep_reserve(&g_tf, n);
	if (!slot)
		return -1;
	g_sum_slots_used += n;
	uint64_t f[SP_F__COUNT] = {0};
	f[SP_F_STEPS] = __atomic_load_n(&g_sum_steps, __ATOMIC_RELAXED);
	f[SP_F_RECORDS] = __atomic_load_n(&g_tf.closed_records, __ATOMIC_RELAXED) + sp_rec_stream.nrec;
	f[SP_F_LOST] = __atomic_load_n(&g_tf.hdr->lost_records, __ATOMIC_RELAXED);
	/* the devices first, the SUMMARY head last: a reader that sees it sees its devices */
	unsigned i = 1;
	uint64_t peaks[SUM_DEVS];
	for (unsigned d = 0; d < SUM_DEVS; d++) {
		if (!(mask & (1u << d)))
			continue;
		uint64_t live = __atomic_load_n(&g_sum_live[d], __ATOMIC_RELAXED);
		/* the next window starts at the live bytes of this one's end */
		uint64_t peak = __atomic_exchange_n(&g_sum_peak[d], live, __ATOMIC_RELAXED);
		uint64_t g[SP_F__COUNT] = {0};
		g[SP_F_DEVICE] = d;
		g[SP_F_LIVE] = live;
		g[SP_F_PEAK] = peaks[d] = peak > live ? peak : live;
		sp_tf_encode(&slot[i], SP_K_SUMMARY_DEVICE, SP_API_NONE, begin, end - begin, g);
		sp_tf_publish(&slot[i], SP_K_SUMMARY_DEVICE);
		i++;
	}
	sp_tf_encode(slot, SP_K_SUMMARY, SP_API_NONE, begin, end - begin, f);
	sp_tf_publish(slot, SP_K_SUMMARY);
	for (unsigned d = 0; d < SUM_DEVS && !final; d++)
		if (mask & (1u << d))
			sp_alert_window(d, end, peaks[d],
					__atomic_load_n(&g_tf.hdr->devices[d].mem_bytes, __ATOMIC_RELAXED), now, g_dir);
	return 0;
}

/* Slow path: `now` reached the window's end (or the process ends: final). 1: a summary was written. */
static int summary_tick(uint64_t now, int final)
{
	int idle = 0, wrote = 0;
	if (!g_sum_win || !__atomic_compare_exchange_n(&g_sum_busy, &idle, 1, 0, __ATOMIC_ACQUIRE, __ATOMIC_RELAXED))
		return 0;
	int saved = errno;
	uint64_t next = __atomic_load_n(&sp_proc.sum_next, __ATOMIC_RELAXED);
	if (next == UINT64_MAX || (!final && now < next) || now < g_sum_t0 ||
	    __atomic_load_n(&sp_proc.state, __ATOMIC_ACQUIRE) != FILE_READY)
		goto out;
	uint64_t end = final ? now : g_sum_t0 + (now - g_sum_t0) / g_sum_win * g_sum_win;
	int full = 0;
	if (end > g_sum_begin) {
		full = summary_write(g_sum_begin, end, now, final) != 0;
		wrote = !full;
		g_sum_begin = end;
	}
	uint64_t budget = g_tf.keep_slots / 2;
	while (g_sum_doublings < 40 && g_sum_slots_used >= budget - (budget >> (g_sum_doublings + 1))) {
		g_sum_win *= 2;
		g_sum_doublings++;
	}
	next = final || full ? UINT64_MAX : g_sum_t0 + ((end - g_sum_t0) / g_sum_win + 1) * g_sum_win;
	__atomic_store_n(&sp_proc.sum_next, next, __ATOMIC_RELAXED);
out:
	__atomic_store_n(&g_sum_busy, 0, __ATOMIC_RELEASE);
	errno = saved;
	return wrote;
}
