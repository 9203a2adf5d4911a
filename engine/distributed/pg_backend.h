/* distributed/pg_backend.h: the interface a process-group backend fills (a table of functions).
 * defines: struct ddpl_pg_backend, PG_HIDDEN, the tables of this build: pg_host_backend ("gloo",
 *          always) and pg_nccl_backend ("nccl", CUDA builds with NCCL only), pg_backend_add.
 *          Internal to engine/distributed.
 *
 * What every backend shares lives above it: rendezvous, the group's timeout and failure state
 * (pg.c), work handles (pg_work.c), argument checks and fingerprints (pg_ops.c, pg_agree.c).
 * pg_ops.c checks what it can without the backend (reduce ops, ranks, shapes, list lengths),
 * asks the backend to check each tensor, then calls the backend's entry for the operation: a
 * collective crosses this table once. How the backend runs it is its own business: the host
 * backend queues work items on lanes (threads) it owns, NCCL enqueues on a device stream. Its
 * state is its own too: pg->impl and w->impl (pg_impl.h), typed only in its files. A backend is
 * chosen once, by name, at group creation; nothing else branches on it.
 *
 * Entries follow the ops layer's kernel tables: designated initialisers, and a NULL operation
 * entry is reported ("reduce_scatter_tensor: not supported by backend X"), never called; name,
 * connect, free and check_tensor are required.
 * Adding a backend is its own file(s) and one entry in pg.c's list (spec/c/test_pg_backend.c
 * adds a fake one with pg_backend_add). Adding a collective is one entry here, one function in
 * pg_ops.c and one per backend; the pg_ops.c function calls pg_expect (pg_impl.h) once its
 * arguments are checked, which makes the call's fingerprint: the mismatch checks then cover it
 * with nothing more to do.
 * The shared-buffer entries are optional features instead: without them shared_zeros makes an
 * ordinary tensor and a prescaled allreduce scales the tensor first (pg.h). */
#ifndef DDPL_DIST_PG_BACKEND_H
#define DDPL_DIST_PG_BACKEND_H

#include "ddpl/config.h"
#include "distributed/pg.h"

/* engine-internal: not exported from libddplua.so */
#define PG_HIDDEN __attribute__((visibility("hidden")))

struct ddpl_pg_backend {
    const char *name;             /* as init_process_group takes it: "gloo", "nccl" */
    ddpl_device_type device_type; /* the tensors it moves: cpu for gloo, cuda for nccl */

    /* ---- the group ---- */
    /* 0 when the backend can run here, else -1 with why, for fname; NULL: always. */
    int (*available)(const char *fname);
    /* Connects pg (rank, size, timeout and store are set; every rank has joined) and sets
     * pg->impl; keys go under prefix; bind_host is the local address that routes to the master.
     * 0, or -1 with the error set (what was made is left for free). */
    int (*connect)(ddpl_pg *pg, const char *prefix, const char *bind_host);
    /* Finishes what is queued (bounded by the timeout), aborts what is stuck, frees pg->impl
     * (NULL when connect never ran: a subgroup this rank is not in). Work handles stay valid.
     * false when something is still stuck after that (a thread that waits on a peer that is
     * gone): pg is then leaked, never freed under a running thread. */
    bool (*free)(ddpl_pg *pg);
    /* bytes of the backend's state per work item (w->impl, zeroed; 0: none) */
    size_t work_size;

    /* ---- arguments ---- */
    /* t (non-NULL) is a tensor this backend takes: device, layout, and a dtype it reduces when
     * `reduces`. 0, or -1 with the error naming fname, `what` ("the input", "output 2") and t. */
    int (*check_tensor)(const ddpl_pg *pg, const char *fname, const char *what,
                        const ddpl_tensor *t, bool reduces);

    /* ---- operations: the contracts of pg.h, called once pg_ops.c's checks passed ---- */
    ddpl_work *(*allreduce)(ddpl_pg *pg, ddpl_tensor *t, ddpl_reduce_op op);
    ddpl_work *(*broadcast)(ddpl_pg *pg, ddpl_tensor *t, int src);
    ddpl_work *(*allgather)(ddpl_pg *pg, ddpl_tensor *const *outs, int nouts, ddpl_tensor *t);
    ddpl_work *(*allgather_into)(ddpl_pg *pg, ddpl_tensor *out, ddpl_tensor *t);
    ddpl_work *(*reduce_scatter)(ddpl_pg *pg, ddpl_tensor *out, ddpl_tensor *in, ddpl_reduce_op op);
    ddpl_work *(*send)(ddpl_pg *pg, ddpl_tensor *t, int dst);
    ddpl_work *(*recv)(ddpl_pg *pg, ddpl_tensor *t, int src);
    ddpl_work *(*barrier)(ddpl_pg *pg);
    /* outs/ins are NULL (nouts/nins 0) off the root; the root's lists hold size tensors */
    ddpl_work *(*reduce)(ddpl_pg *pg, ddpl_tensor *t, int dst, ddpl_reduce_op op);
    ddpl_work *(*gather)(ddpl_pg *pg, ddpl_tensor *t, ddpl_tensor *const *outs, int nouts, int dst);
    ddpl_work *(*scatter)(ddpl_pg *pg, ddpl_tensor *t, ddpl_tensor *const *ins, int nins, int src);
    /* n == size tensors each, one dtype */
    ddpl_work *(*alltoall)(ddpl_pg *pg, ddpl_tensor *const *outs, ddpl_tensor *const *ins, int n);
    /* out_counts[q] / in_counts[q]: elements of out received from / of in sent to rank q (size
     * entries each, pg_ops.c made them from the split sizes; they add up to numel(out) and
     * numel(in)); the slices are consecutive in row-major order */
    ddpl_work *(*alltoall_single)(ddpl_pg *pg, ddpl_tensor *out, ddpl_tensor *in,
                                  const int64_t *out_counts, const int64_t *in_counts);

    /* ---- shared buffers (optional; the DDP reducer's buckets) ---- */
    /* A zero-filled buffer the group reduces in place, or an ordinary tensor when it has none
     * (ddpl_pg_shared_zeros; numel >= 0). */
    ddpl_tensor *(*shared_zeros)(ddpl_pg *pg, int64_t numel, ddpl_dtype dt);
    bool (*is_shared)(const ddpl_pg *pg, const ddpl_tensor *t); /* t non-NULL */
    /* The sum over the ranks of factor * t on a shared buffer t (is_shared), with this rank's
     * values of n ranges kept in values[i] (ddpl_pg_allreduce_prescaled_into; n may be 0). */
    ddpl_work *(*allreduce_shared)(ddpl_pg *pg, ddpl_tensor *t, double factor, int n,
                                   ddpl_tensor *const *values, const int64_t *offsets);

    /* ---- collective safety (distributed/pg_fingerprint.h) ---- */
    /* The backend compares w->fp (a collective: seq > 0) with the other ranks' itself before the
     * operation touches data (the host backend: a small allgather, or in the shared-memory tag
     * slots). false: pg_expect compares through the store under DDPLUA_DISTRIBUTED_DEBUG=DETAIL
     * (nccl, as PyTorch checks NCCL calls only then). */
    bool agrees_in_band;
    /* How the group moves bytes, for the INFO log ("shm", "gloo"); NULL: the backend's name. */
    const char *(*transport)(const ddpl_pg *pg);

    /* ---- work handles of this backend's operations (each optional) ---- */
    /* The next operation issued on pg will be waited for right away (ddpl_pg_wait_follows): a
     * hint, NULL: ignored. */
    void (*wait_follows)(ddpl_pg *pg);
    /* ddpl_work_wait: ordering instead of blocking where the backend can (a device stream), or
     * running the work on the caller's thread; 0 or -1. NULL: sleeps until the work is done
     * (pg_work_wait_done). */
    int (*work_wait)(ddpl_work *w, double timeout_s);
    void (*work_poll)(ddpl_work *w); /* marks w done when it has completed or failed */
    /* Frees what w->impl holds besides the tensors and scratch when w completes (messages
     * still posted when a broken group skipped it), before the tensors go. */
    void (*work_drop)(ddpl_work *w);
    /* At the last reference, before the tensors go (a result the caller never took). */
    void (*work_release)(ddpl_work *w);
};

/* CPU tensors (distributed/pg_host.c): Gloo over TCP, collectives through shared memory when every
 * rank is on this machine. */
PG_HIDDEN extern const struct ddpl_pg_backend pg_host_backend;
#if DDPL_HAVE_NCCL
/* CUDA tensors through NCCL (distributed/nccl_pg.c), compiled only with the CUDA backend and
 * nccl.h. */
PG_HIDDEN extern const struct ddpl_pg_backend pg_nccl_backend;
#endif

/* Makes backend b (static: it outlives every group) available by its name after the built-in
 * ones, for a backend outside the tree (a test's, an embedder's who links the objects). 0, or
 * -1 with the error when the name is taken or the list is full. Not thread-safe: before any
 * group is made. */
PG_HIDDEN int pg_backend_add(const struct ddpl_pg_backend *b);

#endif
