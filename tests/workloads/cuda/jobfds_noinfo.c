/*
 * jobfds_noinfo.c - CUDA calls from frames without unwind info (compiled with
 * -fno-asynchronous-unwind-tables -fno-unwind-tables, and a hand-written asm
 * trampoline that uses rbp as a plain register, as JIT code may): an unwinder
 * that guesses past them follows rbp into memory it cannot vouch for.
 */
#include <cuda_runtime_api.h>
#include <stddef.h>
#include <string.h>
#include <sys/mman.h>

int jobfds_noinfo_calls(void);
int jobfds_asm_call(int (*fn)(void), void *rbp);

/* rdi: the function, rsi: the value rbp holds during the call; no CFI */
__asm__(".text\n"
	".globl jobfds_asm_call\n"
	".type jobfds_asm_call,@function\n"
	"jobfds_asm_call:\n"
	"	push %rbp\n"
	"	mov %rsi, %rbp\n"
	"	call *%rdi\n"
	"	pop %rbp\n"
	"	ret\n"
	".size jobfds_asm_call, .-jobfds_asm_call\n");

static char host[4096];

/* CUDA calls made here, not through a helper with unwind info: their return
 * addresses are new to the preload, so each is a site to unwind from this frame */
static __attribute__((noinline)) int calls(void)
{
	void *d = NULL;
	if (cudaMalloc(&d, 1 << 20) != cudaSuccess)
		return -1;
	int rc = cudaMemcpy(d, host, sizeof(host), cudaMemcpyHostToDevice) == cudaSuccess ? 0 : -1;
	__asm__ volatile("" ::: "memory"); /* no tail call: the frame stays while the copy runs */
	return rc;
}

int jobfds_noinfo_calls(void)
{
	/* a page of 'H' that no unwind has touched: where the guessed frames lead */
	char *page = mmap(NULL, 8192, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (page == MAP_FAILED)
		return -1;
	memset(page, 'H', 8192);
	int rc = jobfds_asm_call(calls, page + 4096);
	munmap(page, 8192);
	return rc;
}
