/*
 * hook_proc.c - fork(): a FORK record in the parent, with the child's pid and
 * the time the fork took (a process with a large address space, a trainer
 * forking its DataLoader workers, takes milliseconds). The child gets a file
 * of its own at its first record (recorder.c's atfork handler); the analyzer
 * and the export draw the process tree from these records and the files'
 * ppids (docs/trace-format.md).
 *
 * Written whatever STEPPROF_IO says (a fork is not input). Not wrapped: vfork
 * and clone (posix_spawn, subprocess: the child execs at once and its file
 * names its parent), glibc's _Fork.
 *
 * _exit and _Exit read back the GPU times of finished ops and end the trace
 * file as a clean exit does (cuda_spans.c, sp_gpu_quick_exit; recorder.c,
 * sp_recorder_quick_exit), then call libc's; exit() reaches the kernel through
 * glibc's internal _exit, not these. There too, the job's first process says
 * where its trace is, as at a normal exit (hook_init.c).
 */
#include "io_hook.h"
#include "config.h"
#include "cuda_gpu.h"

#include <stdlib.h>
#include <sys/syscall.h>
#include <unistd.h>

#pragma GCC visibility push(default)

pid_t fork(void)
{
	pid_t (*real)(void) = IO_REAL(fork);
	uint64_t t0 = sp_now();
	pid_t p = real();
	if (p > 0 && sp_active) {
		int e = errno;
		uint64_t f[SP_F__COUNT];
		f[SP_F_PID] = (uint64_t)p;
		sp_emit(SP_K_FORK, SP_API_fork, t0, sp_now(), f);
		errno = e;
	}
	return p;
}

typedef void (*exit_fn)(int);

static __attribute__((noreturn)) void quick_exit_as(const char *name, int status)
{
	static exit_fn real[2];
	int i = name[1] == 'E'; /* _Exit */
	exit_fn r = __atomic_load_n(&real[i], __ATOMIC_RELAXED);
	if (!r) {
		r = (exit_fn)io_real_by_name(name);
		__atomic_store_n(&real[i], r, __ATOMIC_RELAXED);
	}
	if (sp_recorder_quick_exit_due())
		sp_gpu_quick_exit(); /* first, as exit()'s atexit handler runs before the file is ended */
	sp_recorder_quick_exit();
	sp_say_where();
	if (r)
		r(status);
	for (;;)
		syscall(SYS_exit_group, status);
}

void _exit(int status)
{
	quick_exit_as("_exit", status);
}

void _Exit(int status)
{
	quick_exit_as("_Exit", status);
}

#pragma GCC visibility pop
