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
 */
#include "io_hook.h"

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

#pragma GCC visibility pop
