/*
 * lazymap.c - the one-time mapping of a lazily mapped table (see lazymap.h).
 * Any thread may get there first: each maps, one publishes its mapping with a
 * CAS, the others unmap theirs. Raw syscalls: errno is kept, nothing hooked
 * is called.
 */
#include "lazymap.h"

#include <errno.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <unistd.h>

void *sp_lazy_map(struct sp_lazy *l)
{
	if (__atomic_load_n(&l->failed, __ATOMIC_RELAXED))
		return NULL;
	int saved = errno;
	void *m = (void *)syscall(SYS_mmap, NULL, l->size, PROT_READ | PROT_WRITE,
				  MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
	if (m == MAP_FAILED) {
		int e = errno;
		__atomic_store_n(&l->failed, 1, __ATOMIC_RELAXED);
		sp_warn_once(l->what, "cannot map %zu KiB for the %s (%s): fewer records", l->size >> 10, l->what,
			     strerror(e));
		errno = saved;
		return NULL;
	}
	void *expected = NULL;
	if (!__atomic_compare_exchange_n(&l->p, &expected, m, 0, __ATOMIC_ACQ_REL, __ATOMIC_ACQUIRE)) {
		syscall(SYS_munmap, m, l->size);
		m = expected;
	}
	errno = saved;
	return m;
}
