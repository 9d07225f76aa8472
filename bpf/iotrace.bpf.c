// SPDX-License-Identifier: GPL-2.0
/*
 * iotrace.bpf.c - kernel side of the eBPF input collector: the file opens,
 * stats, reads, directory listings and closes of one process tree.
 *
 *   1. maps and configuration (targ_* globals, set by the loader before load)
 *   2. helpers: syscall number -> traced call, the fd's file type from its inode
 *   3. raw_tp/sys_enter: remember the call's arguments in the CPU's state;
 *      raw_tp/sched_switch: move a call in flight to its thread's storage
 *   4. raw_tp/sys_exit: complete the event (read the path), submit it without a wakeup
 *   5. raw_tp/sched_process_fork, sched_process_exec and sched_process_exit:
 *      follow the process tree (and the fds an exec closes, its environment)
 *   6. raw_tp/signal_deliver: an interrupted call that returns -EINTR
 *
 * RATIONALE: raw syscall tracepoints rather than syscalls:sys_enter_<name>:
 * they attach by name without tracefs (often not mounted in containers), one
 * program pair covers every call, and a raw tracepoint skips the perf-event
 * layer that each classic tracepoint hit goes through. Every syscall of the
 * machine runs the first lines, so the filter is ordered by cost: the syscall
 * number in a table frozen at load first (one load), then whether the running
 * task is traced, known per CPU since the task came on it (a task storage and
 * a hash lookup once per switch-in, not per call).
 *
 * NOTE: fentry/fexit on the __x64_sys_* entry points would spare untraced
 * syscalls the tracepoint slow path, but need BPF trampolines: the development
 * VM (kernel 6.18) refuses them (EPERM at load, fentry, fexit and lsm alike),
 * so they could be neither measured nor tested there; see docs/bpf.md.
 */
#include "vmlinux.h"
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_tracing.h>
#include <bpf/bpf_core_read.h>

#include "iotrace.h"

char LICENSE[] SEC("license") = "GPL";

/* ------------------------------------------------- 1. maps, configuration */

/*
 * Syscall number -> traced call + 1 (0: not traced) on this architecture, from
 * <sys/syscall.h> in the loader: one bounded load per syscall of the machine
 * rather than a compare with each traced number.
 */
const volatile __u8 targ_call[IOTRACE_NR_MAX] = {};
/* Follow children created by fork/clone of a traced process. */
const volatile bool targ_follow = true;

#define MAX_PROCS 16384

/* tgids being traced; seeded by the loader, grown at fork, shrunk at exit. */
struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, MAX_PROCS);
	__type(key, __u32);
	__type(value, __u8);
} traced SEC(".maps");

/*
 * The call in flight from sys_enter to sys_exit lives in the state of the CPU
 * that runs its thread, and moves to the thread's task-local storage only when
 * the thread is switched out in the middle of the call (sched_switch below).
 *
 * RATIONALE: a traced call that does not sleep (a cached stat, open, read,
 * close: the small-file storm this tool looks for) enters and returns on one
 * CPU without a switch. Per-CPU state is a few loads; a task storage lookup
 * at entry and at exit was ~30 ns each (measured: 4 calls a round of the
 * bench's loop, ~240 ns of ~1100 ns of tracing). Safe because the programs
 * run with preemption disabled (tracepoints guarantee it, the syscall ones too
 * since they may fault, 6.13), so nothing else runs on the CPU between a
 * program's first and last instruction, and sched_switch sees every switch.
 * Invariant: cpu->busy implies the call belongs to cpu->tid, the task running.
 */
struct iotrace_task {
	struct iotrace_start st;
	__u32 busy; /* st holds a call that has not returned yet (its thread was switched out during it) */
	__u32 pad;
};

struct {
	__uint(type, BPF_MAP_TYPE_TASK_STORAGE);
	__uint(map_flags, BPF_F_NO_PREALLOC);
	__type(key, int);
	__type(value, struct iotrace_task);
} tasks SEC(".maps");

/*
 * Batches: the events of the task running on a CPU are framed one after the
 * other in the CPU's batch, which goes to the ring as one record when it is
 * full, when the task leaves the CPU (sched_switch), forks or exits, at once
 * when its process has more than one thread, and is read by the loader
 * after it detached the programs at the end.
 *
 * RATIONALE: a ring record costs ~50 ns in the traced call (measured: the
 * bench's loop without the ring ran ~210 ns a round faster for 4 records):
 * the reservation's lock and the commit's atomic wait for the record's cache
 * lines, fresh ones. One record per batch pays that once for ~10 calls.
 * Why only single-threaded processes: the loader joins fds to paths in the
 * order events come in; the threads of one process share their fds, and a
 * batch held on one CPU would let another thread's read of an fd overtake
 * its open. A process has no one to overtake it but itself, its fork (the
 * batch is flushed before the fork event) and its exit (likewise). PyTorch's
 * DataLoader workers, the small-file readers, are single-threaded processes.
 */
struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct iotrace_cpu);
} cpus SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_RINGBUF);
	__uint(max_entries, 16 << 20);
} events SEC(".maps");

/* Events that did not fit the ring buffer or the maps, per CPU, and whose process is not known (see lost). */
struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, __u64);
} drops SEC(".maps");

/*
 * Calls that could not be handed over (ring full), per process: the loader
 * writes each process's count as a LOST record in its stream at the end, so
 * that `stepprof analyze` reports them with the process (the file header's
 * count, which the analyzer does not read for a collector's file of many
 * processes, holds only those of no known process).
 */
struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, MAX_PROCS);
	__type(key, __u32);
	__type(value, struct iotrace_lost);
} lost SEC(".maps");

/*
 * An exec's environment on its way to the ring (sched_process_exec), one
 * buffer per CPU (the loader sets max_entries to their number): too big for
 * the stack, and for a per-CPU map's values (32 KiB at most).
 */
struct iotrace_envbuf {
	/* a frame, an event's header (IOTRACE_EVENT_HDR bytes), the environment */
	__u8 buf[sizeof(struct iotrace_frame) + sizeof(struct iotrace_event) + IOTRACE_ENV_MAX];
};

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct iotrace_envbuf);
} envbufs SEC(".maps");

/* ------------------------------------------------------------ 2. helpers */

#define S_IFMT	      00170000
#define S_IFSOCK      0140000
#define S_IFREG	      0100000
#define S_IFDIR	      0040000
#define S_IFCHR	      0020000
#define S_IFIFO	      0010000
#define AT_EMPTY_PATH 0x1000
#define SA_RESTART    0x10000000

/* The syscall number as sys_exit sees it (the entry's number, kept in pt_regs). */
#if defined(__TARGET_ARCH_x86)
#define SYSCALL_NR(regs)   ((regs)->orig_ax)
#define SYSCALL_RET(regs)  ((regs)->ax)
#define SYSCALL_ARG1(regs) ((regs)->di)
#define SYSCALL_ARG2(regs) ((regs)->si)
#define SYSCALL_ARG3(regs) ((regs)->dx)
#define SYSCALL_ARG4(regs) ((regs)->r10)
#define SYSCALL_ARG5(regs) ((regs)->r8)
#elif defined(__TARGET_ARCH_arm64)
#define SYSCALL_NR(regs)   ((regs)->syscallno)
#define SYSCALL_RET(regs)  ((regs)->regs[0])
#define SYSCALL_ARG1(regs) ((regs)->orig_x0)
#define SYSCALL_ARG2(regs) ((regs)->regs[1])
#define SYSCALL_ARG3(regs) ((regs)->regs[2])
#define SYSCALL_ARG4(regs) ((regs)->regs[3])
#define SYSCALL_ARG5(regs) ((regs)->regs[4])
#else
#error "iotrace.bpf.c: SYSCALL_NR not defined for this architecture"
#endif

static __always_inline int call_of(long nr)
{
	if ((unsigned long)nr >= IOTRACE_NR_MAX)
		return -1; /* also -1, a syscall the tracer skipped */
	return (int)targ_call[nr] - 1;
}

/* A 32-bit syscall of a 64-bit kernel (int 0x80, or a 32-bit program): other numbers, not traced. */
static __always_inline int compat_syscall(struct task_struct *task)
{
#if defined(__TARGET_ARCH_x86)
	if (bpf_core_field_exists(task->thread_info.status))
		return (task->thread_info.status & 0x0002 /* TS_COMPAT */) != 0;
#endif
	return 0;
}

static __always_inline int has_path(int call)
{
	return call == IOTRACE_sys_openat || call == IOTRACE_sys_openat2 || call == IOTRACE_sys_newfstatat ||
	       call == IOTRACE_sys_statx || call == IOTRACE_sys_chdir;
}

static __always_inline void count_drops(__u64 events)
{
	__u32 zero = 0;
	__u64 *n = bpf_map_lookup_elem(&drops, &zero);
	if (n)
		*n += events;
}

static __always_inline void count_drop(void)
{
	count_drops(1);
}

/*
 * Calls of process tgid, the first of them begun at `since`, that could not be
 * recorded (in lost; when it is full, in drops).
 */
static __always_inline void count_lost(__u32 tgid, __u64 calls, __u64 since)
{
	__u64 now = bpf_ktime_get_ns();
	struct iotrace_lost *l = bpf_map_lookup_elem(&lost, &tgid);

	if (!l) {
		struct iotrace_lost first = {.first_ns = since, .last_ns = now};
		bpf_map_update_elem(&lost, &tgid, &first, BPF_NOEXIST);
		l = bpf_map_lookup_elem(&lost, &tgid);
	}
	if (!l) {
		count_drops(calls);
		return;
	}
	__sync_fetch_and_add(&l->calls, calls);
	l->last_ns = now; /* another CPU's store may win: a few ns off, never outside the run */
}

/*
 * A kernel address read as a typed pointer (kernel >= 6.2): the verifier turns
 * the call into a move, and reads through the result are plain loads guarded
 * by the exception table, instead of a bpf_probe_read_kernel() call each
 * (measured: ~20 ns a probe read, 7 of them a round of the bench's loop).
 * Weak: on older kernels it is NULL and the probe reads below are used.
 */
extern void *bpf_rdonly_cast(const void *obj, __u32 btf_id) __ksym __weak;

/*
 * The current task's open file on fd, as a kernel address: the identity of
 * the open file (the loader compares it, never dereferences it); 0 when fd is
 * not open. BTF pointers are loaded directly; the fd array's element, at a
 * variable index, through bpf_rdonly_cast or a probe read.
 */
static __always_inline __u64 file_of(struct task_struct *task, int fd)
{
	struct fdtable *fdt;
	__u64 file = 0;

	if (fd < 0)
		return 0; /* AT_FDCWD, the dirfd of most *at calls: no table to read */
	fdt = task->files->fdt;
	if ((unsigned int)fd >= fdt->max_fds)
		return 0;
	if (bpf_rdonly_cast) {
		/*
		 * NOTE: the slot is read as the first member of a struct list_head:
		 * any struct with a pointer at offset 0 would do, the verifier
		 * needs a struct type to cast to.
		 */
		struct list_head *slot = bpf_rdonly_cast((void *)((__u64)fdt->fd + (__u64)fd * sizeof(file)),
							 bpf_core_type_id_kernel(struct list_head));
		return (__u64)slot->next;
	}
	if (bpf_probe_read_kernel(&file, sizeof(file), &fdt->fd[fd]))
		return 0;
	return file;
}

/* The type of an open file, from its inode's mode (CO-RE reads). */
static __always_inline __u8 type_of(__u64 file)
{
	struct inode *inode = NULL;
	umode_t mode = 0;

	if (!file)
		return IOTRACE_FD_OTHER;
	if (bpf_rdonly_cast) {
		struct file *f = bpf_rdonly_cast((void *)file, bpf_core_type_id_kernel(struct file));
		mode = f->f_inode->i_mode; /* a NULL f_inode reads as 0 */
	} else if (bpf_probe_read_kernel(&inode, sizeof(inode), &((struct file *)file)->f_inode) || !inode ||
		   bpf_probe_read_kernel(&mode, sizeof(mode), &inode->i_mode)) {
		return IOTRACE_FD_OTHER;
	}
	switch (mode & S_IFMT) {
	case S_IFREG:
		return IOTRACE_FD_FILE;
	case S_IFIFO:
		return IOTRACE_FD_PIPE;
	case S_IFSOCK:
		return IOTRACE_FD_SOCKET;
	case S_IFDIR:
		return IOTRACE_FD_DIR;
	case 0:	      /* an anonymous inode: eventfd, timerfd, signalfd, epoll, inotify */
	case S_IFCHR: /* a tty, /dev/zero, /dev/urandom */
		return IOTRACE_FD_NOT_INPUT;
	default:
		return IOTRACE_FD_OTHER; /* a block device: its reads are file input */
	}
}

/*
 * An open with these flags makes an output file, not input, as the libc
 * wrappers decide (preload/io_fdtab.h, io_open_is_output): write-only
 * (Python's open(p, 'wb'), creat, fopen "w"/"a": torch.save, np.save, a log)
 * or truncated (fopen "w+", HDF5's "w"). The loader records no open of it,
 * and no fstat, read or close of its fd.
 */
static __always_inline bool open_is_output(__u64 flags)
{
	return (flags & IOTRACE_O_ACCMODE) == IOTRACE_O_WRONLY || (flags & IOTRACE_O_TRUNC);
}

/* --------------------------------------------------------- 3. sys_enter */

/* The state of this CPU (never NULL: a one-entry array). */
static __always_inline struct iotrace_cpu *this_cpu(void)
{
	__u32 zero = 0;
	return bpf_map_lookup_elem(&cpus, &zero);
}

/* The CPU's batch into the ring as one record (nothing when empty). */
static __always_inline void batch_flush(struct iotrace_cpu *c)
{
	struct iotrace_event *e;
	__u32 len = c->batch_len;

	if (!len)
		return;
	if (len > sizeof(c->batch))
		len = sizeof(c->batch); /* never: the verifier needs the bound */
	/*
	 * No wakeup: the loader polls the ring on a timer, so a busy loader costs
	 * no context switch per event. A batch holds the calls of one task (the
	 * one on the CPU since the last flush): lost, they are its process's.
	 */
	e = (struct iotrace_event *)(c->batch + sizeof(struct iotrace_frame));
	if (bpf_ringbuf_output(&events, c->batch, len, BPF_RB_NO_WAKEUP))
		count_lost(e->pid, c->batch_n, e->begin_ns);
	c->batch_len = 0;
	c->batch_n = 0;
}

/*
 * Is task's process traced? A thread that has our storage is (it is made
 * only here, for a traced tgid, and dies with the thread); else the tgid's
 * entry in traced decides, and the storage is made for the thread's calls
 * that will be switched out.
 */
static __always_inline bool task_traced(struct task_struct *task)
{
	__u32 tgid;

	if (bpf_task_storage_get(&tasks, task, NULL, 0))
		return true;
	tgid = task->tgid;
	if (!bpf_map_lookup_elem(&traced, &tgid))
		return false;
	if (!bpf_task_storage_get(&tasks, task, NULL, BPF_LOCAL_STORAGE_GET_F_CREATE)) {
		/* this call: its thread is taken for untraced until it leaves the CPU */
		count_lost(tgid, 1, bpf_ktime_get_ns());
		return false;
	}
	return true;
}

/*
 * Both syscall programs start alike: the call (by syscall number, -1 for one
 * not traced), this CPU's state, the current task and its thread id. NULL:
 * nothing to do for this syscall.
 */
static __always_inline struct iotrace_cpu *cpu_call(struct pt_regs *regs, long nr, int *call, struct task_struct **task,
						    __u32 *tid)
{
	struct iotrace_cpu *c;
	long cmd;

	*call = call_of(nr);
	if (*call < 0)
		return NULL;
	if (*call == IOTRACE_sys_fcntl) {
		/* Only its dups change the fd table (the command is still in its register at exit). */
		cmd = SYSCALL_ARG2(regs);
		if (cmd != IOTRACE_F_DUPFD && cmd != IOTRACE_F_DUPFD_CLOEXEC)
			return NULL;
	} else if (*call == IOTRACE_sys_close_range && (SYSCALL_ARG3(regs) & IOTRACE_CLOSE_RANGE_CLOEXEC)) {
		return NULL; /* marks the fds close-on-exec, closes none (the exec event covers them) */
	}
	c = this_cpu();
	if (!c)
		return NULL;
	*task = bpf_get_current_task_btf();
	*tid = (*task)->pid;
	return c;
}

SEC("tp_btf/sys_enter")
int BPF_PROG(sys_enter, struct pt_regs *regs, long id)
{
	struct task_struct *task;
	struct iotrace_start *st;
	struct iotrace_cpu *c;
	__u32 tid;
	int call;

	c = cpu_call(regs, id, &call, &task, &tid);
	if (!c)
		return 0;
	if (c->tid != tid) {
		/* The first traced-number call since the task was switched in: is it traced? */
		c->tid = tid;
		c->busy = 0;
		c->traced = task_traced(task);
	}
	if (!c->traced)
		return 0;
	if (compat_syscall(task))
		return 0; /* a 32-bit syscall: its numbers mean other calls */

	st = &c->st;
	st->begin_ns = bpf_ktime_get_ns();
	st->call = call;
	st->fd = (int)SYSCALL_ARG1(regs);
	st->fd_type = IOTRACE_FD_OTHER;
	st->flags = 0;
	st->ubuf = 0;
	st->uptr = 0;
	st->file = 0;
	switch (call) {
	case IOTRACE_sys_newfstatat:
		st->ubuf = SYSCALL_ARG3(regs);
		if (SYSCALL_ARG4(regs) & AT_EMPTY_PATH)
			st->flags |= IOTRACE_F_EMPTY_PATH;
		break;
	case IOTRACE_sys_statx:
		st->ubuf = SYSCALL_ARG5(regs);
		if (SYSCALL_ARG3(regs) & AT_EMPTY_PATH)
			st->flags |= IOTRACE_F_EMPTY_PATH;
		break;
	case IOTRACE_sys_newfstat:
	case IOTRACE_sys_close_range: /* its last fd */
		st->ubuf = SYSCALL_ARG2(regs);
		break;
	case IOTRACE_sys_openat:
		if (open_is_output(SYSCALL_ARG3(regs)))
			st->flags |= IOTRACE_F_OUTPUT;
		break;
	case IOTRACE_sys_openat2:
		st->ubuf = SYSCALL_ARG3(regs); /* its struct open_how: the flags are read at exit */
		break;
	case IOTRACE_sys_read:
	case IOTRACE_sys_pread64:
	case IOTRACE_sys_readv:
	case IOTRACE_sys_preadv:
	case IOTRACE_sys_preadv2:
	case IOTRACE_sys_getdents64:
	case IOTRACE_sys_close:
		/* At entry: close removes the fd, and a read's fd may be closed by another thread meanwhile. */
		st->file = file_of(task, st->fd);
		st->fd_type = type_of(st->file);
		/*
		 * A read of an eventfd, a timerfd, a signalfd or a device is a
		 * thread waiting for a counter, a timer, a signal or a keyboard,
		 * not for file data: no event, as the libc wrappers write no
		 * record (their close is one: the loader's fd table needs it).
		 * RATIONALE: decided here, where the type is read anyway: the
		 * call costs no event, and its exit finds nothing in flight.
		 */
		if (st->fd_type == IOTRACE_FD_NOT_INPUT && call != IOTRACE_sys_close &&
		    call != IOTRACE_sys_getdents64) {
			c->busy = 0;
			return 0;
		}
		break;
	}
	/*
	 * The open file behind the fd argument (the dirfd of the *at calls, the
	 * fd of fstat, fchdir, dup): its identity lets the loader join fd -> path
	 * even when the fd number was closed and reused by another thread while
	 * this call ran (see iotrace.h). AT_FDCWD and other negative values give 0.
	 */
	if (!st->file && call != IOTRACE_sys_chdir)
		st->file = file_of(task, st->fd);

	if (has_path(call))
		st->uptr = call == IOTRACE_sys_chdir ? SYSCALL_ARG1(regs) : SYSCALL_ARG2(regs);
	c->busy = 1;
	return 0;
}

/*
 * A thread leaves the CPU: its batch goes to the ring, a call of it in flight
 * to its storage, and the CPU's state is forgotten.
 */
SEC("tp_btf/sched_switch")
int BPF_PROG(sched_switch, bool preempt, struct task_struct *prev, struct task_struct *next)
{
	struct iotrace_cpu *c = this_cpu();
	struct iotrace_task *t;

	if (!c)
		return 0;
	batch_flush(c); /* prev's events */
	if (!c->tid)
		return 0;
	if (c->busy && c->tid == prev->pid) {
		/* prev is traced, so task_traced() made its storage (unless refused: counted there). */
		t = bpf_task_storage_get(&tasks, prev, NULL, 0);
		if (t) {
			t->st = c->st;
			t->busy = 1;
		}
	}
	c->tid = 0;
	c->busy = 0;
	return 0;
}

/* ---------------------------------------------------------- 4. sys_exit */

/* Everything of a call's event but its path, into e (in the CPU's batch). */
static __always_inline void fill_call(struct iotrace_event *e, struct task_struct *task, const struct iotrace_start *st,
				      int call, long ret)
{
	__u64 how_flags; /* openat2's struct open_how starts with its flags */

	e->begin_ns = st->begin_ns;
	e->end_ns = bpf_ktime_get_ns();
	e->ret = ret;
	e->bytes = 0;
	e->file = st->file;
	e->pid = task->tgid; /* BTF loads: no helper call */
	e->tid = task->pid;
	e->fd = st->fd;
	e->type = IOTRACE_EV_CALL;
	e->call = call;
	e->fd_type = st->fd_type;
	e->flags = st->flags;

	switch (call) {
	case IOTRACE_sys_read:
	case IOTRACE_sys_pread64:
	case IOTRACE_sys_readv:
	case IOTRACE_sys_preadv:
	case IOTRACE_sys_preadv2:
	case IOTRACE_sys_getdents64:
		e->bytes = ret > 0 ? ret : 0;
		break;
	case IOTRACE_sys_newfstatat:
	case IOTRACE_sys_newfstat:
		if (ret == 0)
			bpf_probe_read_user(&e->bytes, sizeof(e->bytes),
					    (void *)(st->ubuf + __builtin_offsetof(struct stat, st_size)));
		break;
	case IOTRACE_sys_statx:
		if (ret == 0)
			bpf_probe_read_user(&e->bytes, sizeof(e->bytes),
					    (void *)(st->ubuf + __builtin_offsetof(struct statx, stx_size)));
		break;
	case IOTRACE_sys_openat2:
		/* resident: the kernel has just copied it (a failed output open is no record either) */
		if (!bpf_probe_read_user(&how_flags, sizeof(how_flags), (void *)st->ubuf) && open_is_output(how_flags))
			e->flags |= IOTRACE_F_OUTPUT;
		/* fallthrough */
	case IOTRACE_sys_openat:
	case IOTRACE_sys_dup:
	case IOTRACE_sys_dup2:
	case IOTRACE_sys_dup3:
	case IOTRACE_sys_fcntl: /* F_DUPFD, F_DUPFD_CLOEXEC only (cpu_call) */
		/* The new fd's open file, installed just before the return: what later calls on the fd will show. */
		if (ret >= 0)
			e->nfile = file_of(task, (int)ret);
		break;
	case IOTRACE_sys_close_range:
		e->bytes = (__u32)st->ubuf;
		break;
	}
}

SEC("tp_btf/sys_exit")
int BPF_PROG(sys_exit, struct pt_regs *regs, long ret)
{
	struct task_struct *task;
	struct iotrace_start *st;
	struct iotrace_task *t;
	struct iotrace_cpu *c;
	struct iotrace_frame *f;
	struct iotrace_event *e;
	__u32 off, size;
	long len;
	__u32 tid;
	int call;

	c = cpu_call(regs, SYSCALL_NR(regs), &call, &task, &tid);
	if (!c)
		return 0;
	if (c->busy && c->tid == tid) {
		st = &c->st; /* the call did not leave the CPU */
		c->busy = 0;
	} else {
		if (c->tid == tid && !c->traced)
			return 0; /* not traced: known since the task came on this CPU */
		/* The call was switched out (or its entry not seen: no storage, or busy == 0). */
		t = bpf_task_storage_get(&tasks, task, NULL, 0);
		if (!t || !t->busy)
			return 0;
		t->busy = 0;
		st = &t->st;
	}
	if (st->call != call)
		return 0; /* a stale entry: the thread left a call we never saw end (exec, signal) */

	/* Appended to the batch: batch_len < IOTRACE_BATCH_BYTES here (flushed below when it reaches it). */
	off = c->batch_len & (IOTRACE_BATCH_BYTES - 1);
	f = (struct iotrace_frame *)(c->batch + off);
	e = (struct iotrace_event *)(f + 1);
	fill_call(e, task, st, call, ret);
	size = IOTRACE_EVENT_HDR;
	if (has_path(call) && !(e->flags & IOTRACE_F_OUTPUT)) { /* an output file's name is not needed */
		/*
		 * RATIONALE: the path is read at exit: the kernel has just copied it,
		 * so its page is resident (a read at entry fails on a page not yet
		 * faulted in, and BPF cannot fault). The price: a program that
		 * rewrites the path buffer from another thread during the call is
		 * recorded with the new bytes. It takes its actual length in the
		 * record, a few dozen bytes for most paths (measured: reserving 576
		 * bytes for every path event cost more than copying; docs/bpf.md).
		 */
		len = bpf_probe_read_user_str(e->path, sizeof(e->path), (const void *)st->uptr);
		if (len <= 0) {
			/* NULL with AT_EMPTY_PATH is "" (a stat of the fd, Linux >= 6.11), not a fault */
			if (st->uptr || !(e->flags & IOTRACE_F_EMPTY_PATH))
				e->flags |= IOTRACE_F_PATH_FAULT;
			len = 0;
		} else if (len >= IOTRACE_PATH_MAX) {
			e->flags |= IOTRACE_F_PATH_CUT;
			len = IOTRACE_PATH_MAX;
		}
		/* AT_EMPTY_PATH means "stat the fd" only with "" (or NULL) */
		if (len > 1 || (e->flags & IOTRACE_F_PATH_FAULT))
			e->flags &= ~IOTRACE_F_EMPTY_PATH;
		size += len;
	}
	f->size = size;
	f->pad = 0;
	c->batch_len = off + ((sizeof(*f) + size + 7) & ~7u);
	c->batch_n++;
	if (c->batch_len >= IOTRACE_BATCH_BYTES || task->signal->nr_threads != 1)
		batch_flush(c);
	return 0;
}

/* ------------------------------------------------ 5. the process tree */

/*
 * A framed, zeroed header-only event of the process tree, stamped now, into
 * *e; the record to submit, NULL (counted) when the ring is full. The CPU's
 * batch (the running task's calls) goes first, so that the loader sees a
 * process's calls before its fork or exit.
 */
static __always_inline struct iotrace_frame *tree_event(__u32 pid, __u32 tid, __u8 type, struct iotrace_event **ep)
{
	struct iotrace_cpu *c = this_cpu();
	struct iotrace_frame *f;
	struct iotrace_event *e;

	if (c)
		batch_flush(c);
	f = bpf_ringbuf_reserve(&events, sizeof(*f) + IOTRACE_EVENT_HDR, 0);
	if (!f) {
		count_drop();
		return NULL;
	}
	f->size = IOTRACE_EVENT_HDR;
	f->pad = 0;
	e = (struct iotrace_event *)(f + 1);
	__builtin_memset(e, 0, IOTRACE_EVENT_HDR);
	e->begin_ns = e->end_ns = bpf_ktime_get_ns();
	e->pid = pid;
	e->tid = tid;
	e->type = type;
	*ep = e;
	return f;
}

SEC("tp_btf/sched_process_fork")
int BPF_PROG(sched_process_fork, struct task_struct *parent, struct task_struct *child)
{
	__u32 ptgid = bpf_get_current_pid_tgid() >> 32;
	__u32 ctgid = child->tgid;
	__u8 one = 1;
	struct iotrace_cpu *c = this_cpu();
	struct iotrace_frame *f;
	struct iotrace_event *e;

	/* A second thread: the process's calls are no longer batched, so the ones batched so far go now. */
	if (c)
		batch_flush(c);
	if (!targ_follow || ctgid == ptgid || !bpf_map_lookup_elem(&traced, &ptgid))
		return 0; /* a new thread of a traced process is traced already */
	if (bpf_map_update_elem(&traced, &ctgid, &one, BPF_ANY)) {
		count_drop();
		return 0;
	}
	f = tree_event(ptgid, ctgid, IOTRACE_EV_FORK, &e);
	if (!f)
		return 0;
	bpf_ringbuf_submit(f, BPF_RB_NO_WAKEUP);
	return 0;
}

/*
 * The environment the new program starts with (mm->env_start..env_end, on its
 * fresh stack, resident: exec has just written it), at its actual length.
 * RATIONALE: the loader looks in it for libstepprof.so's variables (does the
 * process record its file input itself? see proc_check_libc_io in iotrace.c);
 * reading /proc/PID/environ when it gets the event missed a program that had
 * already exited by then. Execs are rare: a copy of a few KiB each.
 */
static __always_inline void send_env(struct task_struct *p, __u32 tgid)
{
	__u32 cpu = bpf_get_smp_processor_id(); /* preemption is off: the CPU's buffer is ours */
	struct iotrace_envbuf *b = bpf_map_lookup_elem(&envbufs, &cpu);
	struct mm_struct *mm = p->mm;
	struct iotrace_frame *f;
	struct iotrace_event *e;
	__u64 start, len;

	if (!b || !mm)
		return;
	f = (struct iotrace_frame *)b->buf;
	e = (struct iotrace_event *)(f + 1);
	__builtin_memset(e, 0, IOTRACE_EVENT_HDR);
	start = mm->env_start;
	len = mm->env_end - start;
	if (len > IOTRACE_ENV_MAX) {
		len = IOTRACE_ENV_MAX;
		e->flags = IOTRACE_F_PATH_CUT;
	}
	len &= 2 * IOTRACE_ENV_MAX - 1; /* the verifier's bound: a no-op here */
	if (len > IOTRACE_ENV_MAX ||
	    bpf_probe_read_user(b->buf + sizeof(*f) + IOTRACE_EVENT_HDR, len, (const void *)start))
		len = 0;
	e->begin_ns = e->end_ns = bpf_ktime_get_ns();
	e->pid = tgid;
	e->tid = p->pid;
	e->type = IOTRACE_EV_ENV;
	e->bytes = len;
	f->size = IOTRACE_EVENT_HDR + len;
	f->pad = 0;
	if (bpf_ringbuf_output(&events, b, sizeof(*f) + IOTRACE_EVENT_HDR + len, BPF_RB_NO_WAKEUP))
		count_drop();
}

/*
 * An exec closed the process's close-on-exec fds (in the kernel, not by a
 * traced close): the event carries the bitmap of the fds still open after it,
 * the first IOTRACE_PATH_MAX * 8 of them, for the loader to forget the others.
 * RATIONALE: the fd table's own bitmap, read once here, is exact and in order
 * with the process's events; reading /proc/PID/fd when the loader gets the
 * event would see the fds of calls it has not processed yet.
 */
SEC("tp_btf/sched_process_exec")
int BPF_PROG(sched_process_exec, struct task_struct *p, pid_t old_pid, struct linux_binprm *bprm)
{
	__u32 tgid = p->tgid, len;
	struct iotrace_cpu *c = this_cpu();
	struct iotrace_frame *f;
	struct iotrace_event *e;
	struct fdtable *fdt;

	if (!bpf_map_lookup_elem(&traced, &tgid))
		return 0;
	if (c)
		batch_flush(c); /* the calls before the exec go first */
	f = bpf_ringbuf_reserve(&events, sizeof(*f) + sizeof(*e), 0);
	if (!f) {
		count_drop();
		return 0;
	}
	f->size = sizeof(*e);
	f->pad = 0;
	e = (struct iotrace_event *)(f + 1);
	__builtin_memset(e, 0, sizeof(*e));
	e->begin_ns = e->end_ns = bpf_ktime_get_ns();
	e->pid = tgid;
	e->tid = p->pid;
	e->type = IOTRACE_EV_EXEC;
	fdt = p->files->fdt;
	len = fdt->max_fds / 8; /* a multiple of 8 bytes: the bitmap is in longs */
	if (len > sizeof(e->path))
		len = sizeof(e->path);
	if (bpf_probe_read_kernel(e->path, len, fdt->open_fds))
		len = 0; /* no bitmap: the loader forgets nothing */
	e->fd = (__s32)(len * 8);
	bpf_ringbuf_submit(f, BPF_RB_NO_WAKEUP);
	send_env(p, tgid);
	return 0;
}

SEC("tp_btf/sched_process_exit")
int BPF_PROG(sched_process_exit, struct task_struct *task)
{
	__u64 pid_tgid = bpf_get_current_pid_tgid();
	__u32 tgid = pid_tgid >> 32, tid = (__u32)pid_tgid;
	struct iotrace_frame *f;
	struct iotrace_event *e;
	int group_dead;

	if (!bpf_map_lookup_elem(&traced, &tgid))
		return 0;
	/* signal->live drops to 0 when the last thread of the group passes do_exit, before this tracepoint. */
	group_dead = task->signal->live.counter == 0;
	if (group_dead)
		bpf_map_delete_elem(&traced, &tgid);

	f = tree_event(tgid, tid, IOTRACE_EV_EXIT, &e);
	if (!f)
		return 0;
	e->flags = group_dead ? IOTRACE_F_GROUP_DEAD : 0;
	/* Process exits are rare and end the run: wake the loader for them. */
	bpf_ringbuf_submit(f, group_dead ? BPF_RB_FORCE_WAKEUP : BPF_RB_NO_WAKEUP);
	return 0;
}

/* ------------------------------------------------------ 6. interrupted calls */

/*
 * A traced call interrupted by a signal returns a kernel-internal -ERESTART*
 * code at sys_exit, and only then does the kernel decide, here, when it
 * delivers the signal: a handler without SA_RESTART (or any handler, for
 * ERESTARTNOHAND) makes the call return -EINTR to the program; otherwise the
 * kernel runs the same call again, with a new sys_enter. The loader holds the
 * interrupted part (see on_call() in iotrace.c) and joins it to the restart;
 * this event tells it there will be none.
 *
 * RATIONALE: the decision is known only here, after the exit event went out,
 * so the loader, not the kernel side, holds the interrupted part: nothing is
 * added to sys_enter/sys_exit, and this program runs only when a signal is
 * delivered (no handler: SIG_DFL, SIG_IGN, a stop; the call restarts).
 */
SEC("tp_btf/signal_deliver")
int BPF_PROG(signal_deliver, int sig, struct kernel_siginfo *info, struct k_sigaction *ka)
{
	struct task_struct *task = bpf_get_current_task_btf();
	__u32 tgid = task->tgid;
	struct iotrace_frame *f;
	struct iotrace_event *e;
	struct pt_regs *regs;
	long ret;

	if ((unsigned long)ka->sa.sa_handler <= 1)
		return 0; /* SIG_DFL, SIG_IGN: no handler runs here */
	regs = (struct pt_regs *)bpf_task_pt_regs(task);
	if (!regs || call_of(SYSCALL_NR(regs)) < 0)
		return 0; /* not in a traced syscall */
	ret = SYSCALL_RET(regs);
	if (ret != -IOTRACE_ERESTARTSYS && ret != -IOTRACE_ERESTARTNOHAND && ret != -IOTRACE_ERESTART_RESTARTBLOCK)
		return 0; /* not interrupted, or ERESTARTNOINTR: restarted whatever the handler */
	if (ret == -IOTRACE_ERESTARTSYS && (ka->sa.sa_flags & SA_RESTART))
		return 0; /* restarted */
	if (!bpf_map_lookup_elem(&traced, &tgid))
		return 0;
	f = tree_event(tgid, task->pid, IOTRACE_EV_EINTR, &e);
	if (!f)
		return 0;
	bpf_ringbuf_submit(f, BPF_RB_NO_WAKEUP);
	return 0;
}
