/* dist/nccl_pg.h: the NCCL backend of process groups (backend='nccl', CUDA tensors).
 * defines: ddpl_nccl, ddpl_nccl_check_available, ddpl_nccl_connect/free, ddpl_nccl_device,
 *          the nccl_pg_* operations pg_ops.c routes to, and the nccl_work_* hooks of pg.c.
 * Internal to engine/dist.
 *
 * One communicator per group, bound to one device: the calling thread's current CUDA device at
 * init (ddpl.cuda.set_device(LOCAL_RANK) first, as torchrun users do with PyTorch). Rank 0
 * creates the ncclUniqueId and publishes it in the store under "<prefix>nccl/id"; every rank
 * reads it and calls ncclCommInitRank on that device.
 *
 * Operations never block the host. Each one: records an event on the compute stream
 * (cuda_current_stream()), makes the communicator's own stream wait on it (inputs written by
 * earlier kernels are ready), enqueues the NCCL call(s) on the communication stream, and records
 * a "done" event there. The work handle's wait() makes the compute stream wait on that event
 * (later kernels see the result; the host goes on); is_completed() queries it. The work keeps
 * its tensors until the compute stream is ordered after the operation (wait, or release), so
 * memory the caching allocator hands out again on the compute stream is never still in use by
 * NCCL. barrier() is a one-element allreduce whose wait does block the host (bounded by the
 * group's timeout).
 *
 * Tensors: contiguous CUDA tensors on the group's device (anything else is refused by name);
 * reductions take float32/float64/float16/bfloat16/int64/int32/uint8, data movement every dtype.
 * send/recv move raw bytes: the receiver's tensor must have the sender's byte size (as in
 * PyTorch's NCCL backend, a mismatch is not detected), and a send blocks the communication stream
 * until its peer posts the matching recv, so pair them in the same order on both ranks.
 *
 * In a build without CUDA every entry point fails with "this build has no NCCL". */
#ifndef DDPL_DIST_NCCL_PG_H
#define DDPL_DIST_NCCL_PG_H

#include "dist/pg.h"

/* engine-internal: not exported from libddplua.so */
#define NCCL_HIDDEN __attribute__((visibility("hidden")))

typedef struct ddpl_nccl ddpl_nccl;

/* 0 when backend='nccl' can work here (NCCL built in, a CUDA device present), else -1 with an
 * error that says why, for `fname` ("init_process_group"). */
NCCL_HIDDEN int ddpl_nccl_check_available(const char *fname);
/* Creates the communicator of a group (rank, size) through the store; blocks until every rank
 * joined NCCL's bootstrap. NULL with the error set on failure. */
NCCL_HIDDEN ddpl_nccl *ddpl_nccl_connect(ddpl_store *st, const char *prefix, int rank, int size,
                                         double timeout_s);
/* Waits (bounded by the timeout) for queued operations, then destroys the communicator (aborts
 * it when they do not finish). Work handles stay valid. NULL is fine. */
NCCL_HIDDEN void ddpl_nccl_free(ddpl_nccl *c);
NCCL_HIDDEN int ddpl_nccl_device(const ddpl_nccl *c);

/* The argument check of every operation on an nccl group: t is a contiguous CUDA tensor on the
 * group's device, of a dtype NCCL reduces when `reduces`. 0, or -1 with the error naming fname,
 * what ("the input", "output 2") and the tensor. */
NCCL_HIDDEN int nccl_check_tensor(const ddpl_nccl *c, int rank, const char *fname, const char *what,
                                  const ddpl_tensor *t, bool reduces);

/* The operations of pg.h for a group whose pg->nccl is set, called by pg_ops.c once the
 * arguments passed its checks (same contracts). */
NCCL_HIDDEN ddpl_work *nccl_pg_allreduce(ddpl_pg *pg, ddpl_tensor *t, ddpl_reduce_op op);
NCCL_HIDDEN ddpl_work *nccl_pg_broadcast(ddpl_pg *pg, ddpl_tensor *t, int src);
NCCL_HIDDEN ddpl_work *nccl_pg_allgather(ddpl_pg *pg, ddpl_tensor *const *outs, int nouts,
                                         ddpl_tensor *t);
NCCL_HIDDEN ddpl_work *nccl_pg_allgather_into(ddpl_pg *pg, ddpl_tensor *out, ddpl_tensor *t);
NCCL_HIDDEN ddpl_work *nccl_pg_reduce_scatter(ddpl_pg *pg, ddpl_tensor *out, ddpl_tensor *in,
                                              ddpl_reduce_op op);
NCCL_HIDDEN ddpl_work *nccl_pg_send(ddpl_pg *pg, ddpl_tensor *t, int dst);
NCCL_HIDDEN ddpl_work *nccl_pg_recv(ddpl_pg *pg, ddpl_tensor *t, int src);
NCCL_HIDDEN ddpl_work *nccl_pg_barrier(ddpl_pg *pg);

/* Work handles of NCCL operations (w->nccl set); pg.c calls these. */
NCCL_HIDDEN int nccl_work_wait(ddpl_work *w, double timeout_s);
/* Marks w done when its event has completed (or the communicator failed). */
NCCL_HIDDEN void nccl_work_poll(ddpl_work *w);
/* At the last reference: orders the compute stream after w (if not yet), frees its event. */
NCCL_HIDDEN void nccl_work_release(ddpl_work *w);

#endif
