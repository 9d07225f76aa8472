/*
 * nccl_sim.h - shared between the simulated NCCL's parts: communicators and
 * their rendezvous (nccl_core.c), collectives, point-to-point and groups
 * (nccl_coll.c).
 *
 * A communicator's ranks are processes (or, for ncclCommInitAll, comms of one
 * process) that share one POSIX shared memory segment named from the unique id.
 * Every state change in it bumps `gen`, a futex word every waiter sleeps on.
 */
#ifndef SIMNCCL_H
#define SIMNCCL_H

#include <cuda.h>
#include <nccl.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>

#define SN_MAXRANKS	   64
#define SN_SLOT_BYTES	   (1u << 20)	/* staging per rank for collectives */
#define SN_CHAN_BYTES	   (256u << 10) /* staging per directed pair for send/recv (nranks <= 8) */
#define SN_CHAN_BYTES_MANY (16u << 10)	/* ... more ranks */

/* The segment: a header, then nranks collective slots, then nranks x nranks channels. */
struct sn_shm {
	_Atomic uint32_t gen;	  /* futex word: bumped on every change */
	_Atomic uint32_t nranks;  /* set by the first to join */
	_Atomic uint32_t joined;  /* ranks joined */
	_Atomic uint32_t aborted; /* a rank aborted its communicator */
	_Atomic int32_t pid[SN_MAXRANKS];
	/* collectives: rank r has arrived at (written its slot for) coll_arrived[r], read every slot for coll_done[r]
	 */
	_Atomic uint64_t coll_arrived[SN_MAXRANKS], coll_done[SN_MAXRANKS];
	/* ncclCommSplit's host-side exchange, same two-counter scheme */
	_Atomic uint64_t split_arrived[SN_MAXRANKS], split_done[SN_MAXRANKS];
	int32_t split_color[SN_MAXRANKS], split_key[SN_MAXRANKS];
	uint64_t coll_bytes[SN_MAXRANKS]; /* bytes rank r staged for coll_arrived[r] (0: too big to stage) */
	uint64_t coll_t[SN_MAXRANKS];	  /* when rank r's kernel began (its stream's timeline) */
	/* send/recv: channel [src][dst]: sent = sequence staged by src, taken = sequence consumed by dst */
	_Atomic uint64_t chan_sent[SN_MAXRANKS][SN_MAXRANKS], chan_taken[SN_MAXRANKS][SN_MAXRANKS];
	uint64_t chan_bytes[SN_MAXRANKS][SN_MAXRANKS];
	uint64_t chan_sent_t[SN_MAXRANKS][SN_MAXRANKS], chan_taken_t[SN_MAXRANKS][SN_MAXRANKS]; /* kernels' begins */
};

struct ncclComm {
	uint32_t magic; /* SN_MAGIC while alive */
	int rank, nranks, dev;
	CUcontext ctx; /* the device's primary context */
	struct sn_shm *sh;
	size_t shsz, chan_cap;
	uint64_t id_hash; /* of the unique id: names the split children */
	uint64_t coll_seq, split_seq;
	uint64_t send_seq[SN_MAXRANKS], recv_seq[SN_MAXRANKS];
	_Atomic int async_err;
	_Atomic int local_abort;
	_Atomic uint32_t pending; /* kernels enqueued, not yet finished (futex word) */
};
#define SN_MAGIC 0x6e63636cu

/* internal to the library: not exported */
#pragma GCC visibility push(hidden)

/* nccl_core.c */
struct sn_drv {
	CUresult (*cuInit)(unsigned);
	CUresult (*cuLaunchKernel)(CUfunction, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned,
				   CUstream, void **, void **);
	CUresult (*cuCtxGetDevice)(CUdevice *);
	CUresult (*cuCtxGetCurrent)(CUcontext *);
	CUresult (*cuCtxPushCurrent)(CUcontext);
	CUresult (*cuCtxPopCurrent)(CUcontext *);
	CUresult (*cuDevicePrimaryCtxRetain)(CUcontext *, CUdevice);
	CUresult (*cuGetExportTable)(const void **, const CUuuid *);
	int (*register_kernel)(const void *fn, const char *name, int nargs, const size_t *argsizes);
	uint64_t (*globaltimer_ns)(void); /* the GPU's clock: in a kernel, its stream's timeline */
	void (*kernel_end_at)(uint64_t t); /* a kernel's end on the timeline (NULL: the time it takes) */
};
extern struct sn_drv sn_drv;
extern double sn_gbps;
extern uint64_t sn_timeout_ns;

ncclResult_t sn_init(void); /* driver, kernels, environment; once */
void sn_set_error(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
uint64_t sn_now(void);
uint8_t *sn_slot(struct ncclComm *c, int rank);
uint8_t *sn_chan(struct ncclComm *c, int src, int dst);
void sn_bump(struct sn_shm *sh);
/* sleep on sh->gen while it still reads `seen`, until the absolute deadline (ns) */
void sn_wait(struct sn_shm *sh, uint32_t seen, uint64_t deadline);
int sn_comm_ok(ncclComm_t c);

/* nccl_coll.c */
ncclResult_t sn_register_kernels(void);
void sn_wait_pending(struct ncclComm *c);

#pragma GCC visibility pop

#endif /* SIMNCCL_H */
