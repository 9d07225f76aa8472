// SPDX-License-Identifier: GPL-2.0 OR MIT
/*
 * iotrace.h - what the eBPF collector's two halves share: the kernel side
 * (iotrace.bpf.c) and the loader (iotrace.c).
 *
 *   1. the traced calls: one enum generated from include/stepprof/api_sys.def
 *   2. the ring-buffer event (one struct, __u32/__u64 only, same layout on both
 *      sides) and the small per-thread state the kernel keeps between a
 *      syscall's entry and its exit
 */
#ifndef STEPPROF_IOTRACE_H
#define STEPPROF_IOTRACE_H

/* ------------------------------------------------------------- 1. calls */

enum iotrace_call {
#define SP_API_SYS(id, num, nr, kind) IOTRACE_##id,
#include "stepprof/api_sys.def"
#undef SP_API_SYS
	IOTRACE_CALL__COUNT
};

/* Syscall numbers the kernel side maps to calls are below this (x86-64 and arm64 stay under 512). */
#define IOTRACE_NR_MAX 512

/* ------------------------------------------------------------- 2. events */

/*
 * Paths longer than this are cut (the event says so with IOTRACE_F_PATH_CUT).
 * A power of two: the BPF side masks lengths with it for the verifier.
 */
#define IOTRACE_PATH_MAX 512

enum iotrace_type {
	IOTRACE_EV_CALL = 1, /* a traced syscall returned */
	IOTRACE_EV_FORK,     /* pid forked a new process, child in tid */
	IOTRACE_EV_EXIT,     /* thread tid of pid exited; IOTRACE_F_GROUP_DEAD: the whole process */
	IOTRACE_EV_EXEC,     /* pid exec'd: path holds its open-fd bitmap after exec, for fds < fd */
	IOTRACE_EV_EINTR,    /* thread tid's interrupted call (ret -ERESTART*) returns -EINTR: not restarted */
	IOTRACE_EV_ENV,	     /* pid exec'd: its environment (bytes long) follows the header, IOTRACE_F_PATH_CUT: cut */
};

/* An exec's environment is sent up to this many bytes (a power of two: the BPF side masks with it). */
#define IOTRACE_ENV_MAX 32768

/*
 * The kernel-internal results of a syscall interrupted by a signal: never seen
 * by the program. It gets -EINTR, or the kernel runs the call again (restart).
 */
#define IOTRACE_ERESTARTSYS	      512
#define IOTRACE_ERESTARTNOINTR	      513
#define IOTRACE_ERESTARTNOHAND	      514
#define IOTRACE_ERESTART_RESTARTBLOCK 516

/* iotrace_event.flags */
#define IOTRACE_F_GROUP_DEAD 0x1u  /* EXIT: the last thread of the process */
#define IOTRACE_F_EMPTY_PATH 0x2u  /* *stat*: AT_EMPTY_PATH with "" or NULL, i.e. a stat of fd */
#define IOTRACE_F_PATH_CUT   0x4u  /* the path did not fit IOTRACE_PATH_MAX */
#define IOTRACE_F_PATH_FAULT 0x8u  /* the path could not be read from user memory */
#define IOTRACE_F_OUTPUT     0x10u /* open: for writing only, or truncating (iotrace.bpf.c, open_is_output) */

/*
 * The open flags that make an output file, the same on every Linux
 * architecture (asm-generic and x86): O_ACCMODE, O_WRONLY, O_TRUNC.
 */
#define IOTRACE_O_ACCMODE 03
#define IOTRACE_O_WRONLY  01
#define IOTRACE_O_TRUNC	  01000

/* fcntl's dup commands (the same on every Linux architecture): the only fcntl calls traced. */
#define IOTRACE_F_DUPFD		0
#define IOTRACE_F_DUPFD_CLOEXEC 1030

/* close_range's flag that only marks the fds close-on-exec (then it closes nothing: not traced). */
#define IOTRACE_CLOSE_RANGE_CLOEXEC 4

/* File types as the kernel sees them (i_mode), the same values as enum sp_fdtype. */
#define IOTRACE_FD_OTHER  0
#define IOTRACE_FD_FILE	  1
#define IOTRACE_FD_PIPE	  2
#define IOTRACE_FD_SOCKET 3
#define IOTRACE_FD_DIR	  4
/*
 * Kernel side only (the loader takes it for other): no file type (an
 * anonymous inode: eventfd, timerfd, signalfd, epoll, inotify) or a character
 * device (a tty, /dev/zero). Reads of one are not input and are not sent.
 */
#define IOTRACE_FD_NOT_INPUT 0xff

/*
 * One record of the ring buffer. Events of calls that take a path carry the
 * path after the fixed part (NUL included): its length is the record's size
 * minus IOTRACE_EVENT_HDR, so a record takes only the ring space it uses.
 *
 * RATIONALE for file/nfile: events reach the loader in the order the calls
 * RETURNED, but a close frees its fd number in the middle of the call. So
 * thread A's close(3) can free fd 3, thread B's open can get fd 3 and return,
 * and only then A's close return: the loader would see "open -> 3" before
 * "close 3" and forget B's file. The address of the open file (struct file)
 * tells the two apart: the loader joins an fd to a path only when the
 * identities agree (see fd_path() in iotrace.c).
 *
 * RATIONALE for the size (56 bytes, 64 with the ring's own header): every
 * traced call writes one, and ring-buffer space is cache lines the producer
 * has to own (measured in docs/bpf.md, "Overhead"); fields no call uses
 * together share a slot.
 */
struct iotrace_event {
	__u64 begin_ns; /* bpf_ktime_get_ns(): CLOCK_MONOTONIC */
	__u64 end_ns;
	__s64 ret; /* the syscall's return value (-errno on failure) */
	union {
		__u64 bytes; /* read: bytes read; stat: st_size; listdir: bytes of entries; close_range: last fd */
		__u64 nfile; /* open, dup*: identity of the returned fd's open file at exit; 0 = none */
	};
	__u64 file;   /* identity (struct file address) of fd's open file at entry; 0 = none */
	__u32 pid;    /* tgid */
	__u32 tid;    /* FORK: the child's pid */
	__s32 fd;     /* the fd argument (dirfd of *at calls) */
	__u8 type;    /* enum iotrace_type */
	__u8 call;    /* enum iotrace_call */
	__u8 fd_type; /* IOTRACE_FD_* of fd at entry (reads, close) */
	__u8 flags;   /* IOTRACE_F_* */
	char path[IOTRACE_PATH_MAX];
};

#define IOTRACE_EVENT_HDR ((unsigned long)&((struct iotrace_event *)0)->path)

/*
 * A ring-buffer record holds one or more events back to back, each behind a
 * frame giving its size and padded to 8 bytes. Several: a batch of one
 * single-threaded process's calls (see iotrace.bpf.c, "batches").
 */
struct iotrace_frame {
	__u32 size; /* of the event that follows, path included */
	__u32 pad;
};

/* Batches go to the ring once they hold this many bytes (a power of two). */
#define IOTRACE_BATCH_BYTES 4096
#define IOTRACE_ENTRY_MAX   (sizeof(struct iotrace_frame) + sizeof(struct iotrace_event))

/*
 * Calls of one process that could not be handed over (ring full), from the
 * first such call to the last: the kernel side's map lost, by tgid; the
 * loader writes it as the process's LOST record.
 */
struct iotrace_lost {
	__u64 calls;
	__u64 first_ns;
	__u64 last_ns;
};

/* What sys_enter keeps for sys_exit, per thread. */
struct iotrace_start {
	__u64 begin_ns;
	__u64 uptr; /* path argument (user pointer), 0 when none */
	__u64 ubuf; /* stat/statx result buffer (user pointer); close_range: its last fd */
	__u64 file; /* the fd argument's open file at entry (identity only, never dereferenced by the loader) */
	__s32 fd;
	__u16 call;
	__u8 fd_type;
	__u8 flags;
};

/* A CPU's state (iotrace.bpf.c, per-CPU map cpus); the loader reads the batches left in it at the end. */
struct iotrace_cpu {
	__u32 tid;   /* the running task st and traced are about; 0: not known since the last switch */
	__u8 traced; /* tid's process is traced */
	__u8 busy;   /* st holds tid's call in flight */
	__u16 pad;
	__u32 batch_len; /* bytes in batch: < IOTRACE_BATCH_BYTES between programs */
	__u32 batch_n;	 /* events in batch */
	struct iotrace_start st;
	/* + 16: the verifier's bound on an entry's padded size is a few bytes loose */
	__u8 batch[IOTRACE_BATCH_BYTES + IOTRACE_ENTRY_MAX + 16];
};

#endif /* STEPPROF_IOTRACE_H */
