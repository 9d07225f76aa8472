/*
 * hook_io_lock.c - libc wrappers of the semaphore waits through which a
 * training thread may wait for its batch from another thread of its own
 * process: sem_wait, sem_timedwait, sem_clockwait.
 *
 * With DataLoader(pin_memory=True) the batches of the worker processes are
 * received by a pin-memory thread (its poll/read of the worker pipe is a
 * LOADER_WAIT, hook_io_wait.c), which hands them to the main thread through a
 * queue.Queue: the main thread waits in queue.get(), i.e. a CPython lock
 * acquire, i.e. a POSIX semaphore (CPython's locks are semaphores on Linux:
 * sem_clockwait or sem_timedwait with a timeout, sem_wait without). The
 * analyzer counts such a wait of the training thread as input only while
 * another thread of its process is in a LOADER_WAIT (docs/definitions.md).
 *
 * A wait is recorded as LOCK_WAIT only when it really blocked: it took at
 * least LOCK_WAIT_MIN_NS. An uncontended acquire costs the two clock reads and
 * writes no record. result = 0 or -errno (ETIMEDOUT: the timeout passed, which
 * was time blocked as well).
 *
 * NOTE: pthread_cond_wait/pthread_cond_timedwait are not wrapped. glibc keeps
 * two implementations of each on x86_64 (GLIBC_2.2.5, the old condvar layout,
 * and GLIBC_2.3.2): one unversioned wrapper receives the calls of both and
 * could forward to only one, corrupting an old binary's condvars. And CPython's
 * GIL hand-off is a condvar wait (5 ms timeouts): every switch of every
 * threaded Python program would be a record. The semaphores, whose symbol
 * versions are aliases of one function, cover CPython's locks (queue.Queue,
 * threading.Condition, Event).
 *
 * These stay on with STEPPROF_IO=bpf, like the loader waits: the collector does
 * not trace them.
 */
#include "io_hook.h"

#include <semaphore.h>
#include <time.h>

/*
 * RATIONALE: 20 us. An uncontended sem_wait returns in tens of nanoseconds and
 * a contended hand-off between two running threads (futex wake-up) in a few
 * microseconds; a wait for a batch lasts milliseconds. Below 20 us a wait is a
 * hand-off, not a batch wait, and the input it could add (20 us per batch) is
 * well under the analysis's resolution of interest.
 */
#define LOCK_WAIT_MIN_NS 20000ull

/* The wrappers below are the exported names (the version script lists them). */
#pragma GCC visibility push(default)

int sem_clockwait(sem_t *sem, clockid_t clock, const struct timespec *abstime);

static inline int lock_end(struct io_call *c, unsigned api, int r)
{
	io_end(c, r);
	if (__builtin_expect(c->t1 - c->t0 >= LOCK_WAIT_MIN_NS, 0))
		io_emit(SP_K_LOCK_WAIT, api, c->t0, c->t1, 0, 0, -1, io_result(r, c->err), 0, 0);
	io_finish(c);
	return r;
}

int sem_wait(sem_t *sem)
{
	int (*real)(sem_t *) = IO_REAL(sem_wait);
	struct io_call c;
	if (!io_begin_wait(&c))
		return real(sem);
	return lock_end(&c, SP_API_sem_wait, real(sem));
}

int sem_timedwait(sem_t *sem, const struct timespec *abstime)
{
	int (*real)(sem_t *, const struct timespec *) = IO_REAL(sem_timedwait);
	struct io_call c;
	if (!io_begin_wait(&c))
		return real(sem, abstime);
	return lock_end(&c, SP_API_sem_timedwait, real(sem, abstime));
}

int sem_clockwait(sem_t *sem, clockid_t clock, const struct timespec *abstime)
{
	int (*real)(sem_t *, clockid_t, const struct timespec *) = IO_REAL(sem_clockwait);
	struct io_call c;
	if (!io_begin_wait(&c))
		return real(sem, clock, abstime);
	return lock_end(&c, SP_API_sem_clockwait, real(sem, clock, abstime));
}

#pragma GCC visibility pop
