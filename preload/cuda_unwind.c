/*
 * cuda_unwind.c - the stack's return addresses (see cuda_unwind.h), through
 * _Unwind_Backtrace of the libgcc linked statically into libstepprof.so
 * (-static-libgcc): the job's own libgcc_s, if any, is not involved.
 */
#include "cuda_unwind.h"

#include <stdint.h>
#include <unwind.h>

struct trace_buf {
	void **pcs;
	int n, max;
};

static _Unwind_Reason_Code trace_one(struct _Unwind_Context *ctx, void *arg)
{
	struct trace_buf *t = arg;
	uintptr_t ip = _Unwind_GetIP(ctx);
	if (!ip || t->n >= t->max)
		return _URC_END_OF_STACK;
	t->pcs[t->n++] = (void *)ip;
	return _URC_NO_REASON;
}

__attribute__((noinline)) int sp_unwind_pcs(void **pcs, int max)
{
	struct trace_buf t = {pcs, 0, max};
	_Unwind_Backtrace(trace_one, &t);
	return t.n;
}
