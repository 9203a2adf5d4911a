/* distributed/nccl_comm.h: the NCCL communicator of a process group (distributed/nccl_comm.c), for
 * the operations of the nccl backend (distributed/nccl_pg.c). CUDA builds only. defines: ddpl_nccl
 * (pg->impl; each work's comm); nccl_comm_connect/free (lifecycle), nccl_comm_retain/release
 * (references), nccl_comm_fail/cuda_fail (errors naming the rank and device),
 * nccl_comm_break/check_health (failure state), nccl_comm_enter/leave (the device),
 * nccl_comm_settle (wait out ncclInProgress), nccl_comm_poll_stream (bounded wait for an event or
 * stream), nccl_comm_enqueue_barrier. */
#ifndef DDPL_DIST_NCCL_COMM_H
#define DDPL_DIST_NCCL_COMM_H

#include <cuda_runtime.h>
#include <nccl.h>

#include "distributed/pg_impl.h"

/* pg->impl of a group of this backend; nccl_pg.c's works hold one reference each */
typedef struct ddpl_nccl {
    atomic_long refcount; /* the group's and each pending work's */
    ncclComm_t comm;      /* NULL once destroyed or aborted */
    cudaStream_t stream;  /* the communication stream (non-blocking) */
    cudaEvent_t ready;    /* recorded on the compute stream before each operation */
    float *one;           /* barrier: one float on the device */
    int device, rank, size;
    double timeout_s;
    pthread_mutex_t mu;
    char *broken; /* first failure at run time; later operations fail with it */
} ddpl_nccl;

/* Creates the communicator of a group (rank, size) through the store; blocks, bounded by
 * timeout_s, until every rank joined and a first allreduce went through. NULL with the error
 * set on failure. */
PG_HIDDEN ddpl_nccl *nccl_comm_connect(ddpl_store *st, const char *prefix, int rank, int size,
                                       double timeout_s);
/* Waits (bounded) for queued operations, then destroys the communicator (aborts it when they
 * do not finish) and drops the group's reference. NULL is fine. */
PG_HIDDEN void nccl_comm_free(ddpl_nccl *c);
PG_HIDDEN ddpl_nccl *nccl_comm_retain(ddpl_nccl *c);
PG_HIDDEN void nccl_comm_release(ddpl_nccl *c);

/* Set the error "<fname>: NCCL <what> failed on rank R of N (cuda:D): ..." (or the CUDA
 * runtime's) and return -1. */
PG_HIDDEN int nccl_comm_fail(const ddpl_nccl *c, ncclResult_t r, const char *fname,
                             const char *what);
PG_HIDDEN int nccl_comm_cuda_fail(const ddpl_nccl *c, cudaError_t e, const char *fname,
                                  const char *what);
/* Records the current error as c's first failure and aborts the communicator. */
PG_HIDDEN void nccl_comm_break(ddpl_nccl *c);
/* 0 while c is healthy; -1 with the error for fname once it failed (then it is broken). */
PG_HIDDEN int nccl_comm_check_health(ddpl_nccl *c, const char *fname);

/* Make c's device current (*prev: the one nccl_comm_leave restores). */
PG_HIDDEN int nccl_comm_enter(const ddpl_nccl *c, int *prev, const char *fname);
PG_HIDDEN void nccl_comm_leave(int prev);
/* Waits, bounded by the group's timeout, until the call `what` that returned ncclInProgress has
 * finished: 0, or -1 with the error set and c broken. */
PG_HIDDEN int nccl_comm_settle(ddpl_nccl *c, const char *fname, const char *what);
/* 1 when the event ev (or the stream s when ev is NULL) completed within timeout_s, 0 when it
 * timed out, -1 when it failed (error set). */
PG_HIDDEN int nccl_comm_poll_stream(ddpl_nccl *c, cudaStream_t s, cudaEvent_t ev, const char *fname,
                                    double timeout_s);
/* Enqueues the barrier's one-element allreduce on stream s. */
PG_HIDDEN ncclResult_t nccl_comm_enqueue_barrier(ddpl_nccl *c, cudaStream_t s);

#endif
