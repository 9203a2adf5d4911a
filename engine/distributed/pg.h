/* distributed/pg.h: process groups: collectives over the ranks of a job, each returning a work
 * handle. defines: ddpl_pg, ddpl_work, ddpl_reduce_op, ddpl_pg_config, group creation and queries,
 *          the collectives (allreduce, broadcast, allgather, reduce_scatter, send/recv,
 *          barrier; reduce, gather, scatter, all_to_all, all_to_all_single), work handles
 *          (wait, is_completed, error).
 *
 * The model is PyTorch's ProcessGroup. A group owns a worker thread that runs collectives one at
 * a time in the order they were issued (a FIFO queue): when every rank issues the same
 * collectives in the same order (the caller's duty, as in PyTorch), they match up, and the
 * caller is free to go on computing while they run (async). Point-to-point messages are posted
 * at once and completed by two more threads (one for sends, one for receives), so isend/irecv
 * pairs issued in any order on two ranks cannot deadlock; a blocking send completes once the
 * peer has posted the matching recv, as in PyTorch.
 *
 * Backends fill one table of functions (distributed/pg_backend.h), chosen by name at creation.
 * Backend gloo (distributed/pg_host.c) moves bytes through Gloo (TCP); when all ranks share one
 * machine, every collective (not send/recv) goes through a shared mapping instead
 * (distributed/shm_coll.h; DDPLUA_SHM=0 turns that off), decided once per group, identically on
 * every rank.
 *
 * Backend nccl (distributed/nccl_pg.c, CUDA builds only) takes CUDA tensors instead and has no
 * worker threads: each operation is enqueued at once on the communicator's CUDA stream, ordered
 * after the compute stream; wait() makes the compute stream wait for it rather than blocking the
 * host (barrier excepted). Each rank uses its current CUDA device: ddpl.cuda.set_device(LOCAL_RANK)
 * before init, as with PyTorch. The paragraphs below describe gloo unless nccl_pg.c says
 * otherwise.
 *
 * Tensors: CPU, any strides (a non-contiguous tensor is packed into a contiguous buffer when the
 * call is made and unpacked when the operation completes). Reductions take float32, float64 and
 * int64; data movement (broadcast, allgather, gather, scatter, all_to_all, send/recv) takes every
 * dtype. Results are written
 * in place into the given tensors, which the work handle retains until it is done; touching
 * them before the work completes is a race, as in PyTorch.
 *
 * Groups: ddpl_pg_create makes the default group (the world, group 0); ddpl_pg_new_group makes
 * a subgroup of some of its ranks (PyTorch's new_group): its own backend instance (Gloo mesh and
 * shared-memory segment under its own store prefix), lanes and sequence numbers, on the world's
 * store. src/dst arguments are GLOBAL ranks (as in torch.distributed) and are translated to the
 * group's ranks; ddpl_pg_rank is the rank within the group, -1 on a process that is not a
 * member, which may hold the group but gets an error naming its rank and the group's ranks from
 * every operation.
 *
 * Safety: every collective has a fingerprint (sequence number, operation, dtype, element count,
 * reduce op, root, group) that the ranks compare before it touches data
 * (distributed/pg_fingerprint.h, distributed/pg_agree.c): collectives that do not match fail on
 * every rank, naming each side's call, within the group's timeout, and leave the group unusable.
 * Always for backend gloo; for nccl under DDPLUA_DISTRIBUTED_DEBUG=DETAIL. INFO (or DETAIL) logs
 * each group made to stderr.
 *
 * Errors: issuing returns NULL with ddpl_error set when the arguments are wrong ("all_reduce:
 * expected a CPU tensor of float32/float64/int64, got int32") or the backend lacks the operation
 * ("<op>: not supported by backend <name>"); a failure while running (a
 * timeout, a peer that died) is reported by the handle and makes the group unusable: later
 * operations fail at once with the first error instead of hanging. Nothing blocks past the
 * group's timeout.
 *
 *     ddpl_work *w = ddpl_pg_allreduce(pg, grad, DDPL_REDUCE_AVG);
 *     ... overlap other work ...
 *     if (!w || ddpl_work_wait(w, -1) < 0) fprintf(stderr, "%s\n", ddpl_last_error());
 *     ddpl_work_release(w);
 */
#ifndef DDPL_DIST_PG_H
#define DDPL_DIST_PG_H

#include "core/core.h"

typedef struct ddpl_pg ddpl_pg;
typedef struct ddpl_work ddpl_work;

typedef enum ddpl_reduce_op {
    DDPL_REDUCE_SUM,
    DDPL_REDUCE_AVG, /* sum, then divided by the group size (floating dtypes only) */
    DDPL_REDUCE_MAX,
    DDPL_REDUCE_MIN,
    DDPL_REDUCE_PRODUCT,
    DDPL_REDUCE_OP_COUNT
} ddpl_reduce_op;

/* "sum", "avg", ... to the op; -1 for an unknown name. */
int ddpl_reduce_op_parse(const char *name);

typedef struct ddpl_pg_config {
    const char *backend;     /* "gloo" (CPU tensors) or "nccl" (CUDA tensors); NULL: gloo */
    const char *master_addr; /* host of the store (rank 0) */
    int master_port;
    int rank, world_size;
    double timeout_s;  /* rendezvous, store calls and every collective; <= 0: 1800 as PyTorch */
    const char *token; /* store secret (DDPLUA_STORE_TOKEN), NULL for none */
    /* Elastic jobs (the launcher's --max-restarts): the launcher hosts the store and keeps it
     * across restarts, so rank 0 connects to it as a client too (TORCHELASTIC_USE_AGENT_STORE),
     * and every key of the group goes under key_prefix ("/worker/attempt_<restart>/", as
     * PyTorch's), so a restarted gang never meets the keys of the one before. NULL: none. */
    bool agent_store;
    const char *key_prefix;
    /* CPU groups (backend gloo): a peer whose heartbeat is silent this long while an operation
     * waits is named as stopped (docs/internals/fault-detection.md). 0: the default
     * (DDPLUA_HEARTBEAT_TIMEOUT, else 30 s); < 0: no heartbeat. Subgroups use the world's. */
    double heartbeat_s;
} ddpl_pg_config;

/* 0 when `backend` exists and can run in this build and on this machine, else -1 with the
 * error init_process_group gives ("... this build has no NCCL ..."). */
int ddpl_pg_backend_check(const char *backend);
/* Rank 0 hosts the store (unless agent_store); every rank joins, waits for all others (the timeout
 * error names the ranks that never came), then connects the backend. Blocks up to the timeout. */
ddpl_pg *ddpl_pg_create(const ddpl_pg_config *cfg);
/* Collective over the default group `world`: every rank of the world calls it, with the same
 * ranks (n distinct global ranks, in group-rank order), in the same order as its other
 * new_group calls (the group ids, 1, 2, ..., are counted on every rank). A member blocks until
 * every member has joined and the backend is connected (up to the timeout: timeout_s, or the
 * world's when <= 0); a non-member returns at once with a group whose rank is -1. Free every
 * subgroup before the world: they use its store. NULL with the error set. */
ddpl_pg *ddpl_pg_new_group(ddpl_pg *world, int n, const int *ranks, double timeout_s);
/* Finishes queued operations (each bounded by the timeout), stops the threads, frees the group
 * (and the store it hosts). A lane still stuck after the timeout is left running and the group
 * leaked instead, so this never hangs longer. Work handles stay valid. NULL is fine. */
void ddpl_pg_free(ddpl_pg *pg);
int ddpl_pg_rank(const ddpl_pg *pg);
int ddpl_pg_size(const ddpl_pg *pg);
const char *ddpl_pg_backend(const ddpl_pg *pg);
ddpl_device_type ddpl_pg_device_type(const ddpl_pg *pg); /* of the tensors the backend moves */
double ddpl_pg_timeout(const ddpl_pg *pg);
int ddpl_pg_group_id(const ddpl_pg *pg); /* 0 for the world */
/* The global rank of a group rank, and back; -1 when out of range / not in the group. */
int ddpl_pg_global_rank(const ddpl_pg *pg, int group_rank);
int ddpl_pg_group_rank(const ddpl_pg *pg, int global_rank);
/* The level of DDPLUA_DISTRIBUTED_DEBUG (TORCH_DISTRIBUTED_DEBUG's): OFF (default; unset or
 * unknown), INFO (log groups and DDP's buckets to stderr), DETAIL (INFO, and check every call
 * of backends without an in-band check: nccl). Read once. */
enum { DDPL_PG_DEBUG_OFF, DDPL_PG_DEBUG_INFO, DDPL_PG_DEBUG_DETAIL };
int ddpl_pg_debug_level(void);
/* "sum", "avg", ...; "?" for an unknown op. */
const char *ddpl_reduce_op_name(ddpl_reduce_op op);

/* In place on t. */
ddpl_work *ddpl_pg_allreduce(ddpl_pg *pg, ddpl_tensor *t, ddpl_reduce_op op);
/* Sum over the ranks of factor * t, in place (floating dtypes): each rank's values are
 * multiplied by factor before they are summed, as the DDP reducer divides every gradient by the
 * world size before its allreduce (PyTorch's order of rounding, and no overflow from the sum of
 * large values). On a shared buffer (ddpl_pg_shared_zeros) the multiply happens inside the
 * reduction; otherwise t is scaled in place first (an ordinary op, on the caller's thread or the
 * CUDA compute stream), then all-reduced. */
ddpl_work *ddpl_pg_allreduce_prescaled(ddpl_pg *pg, ddpl_tensor *t, double factor);
/* Whether t is (a contiguous part of) a shared buffer that this group reduces in place. */
bool ddpl_pg_is_shared(const ddpl_pg *pg, const ddpl_tensor *t);
/* ddpl_pg_allreduce_prescaled of a shared buffer t whose values for elements
 * [offsets[i], offsets[i] + numel(values[i])) this rank keeps in values[i] instead (contiguous
 * CPU tensors of t's dtype, outside t, in increasing offset order, not overlapping): they are
 * read from there and the results written back there. t then carries only what the other ranks
 * read: on 2 ranks half of the copies that staging every value through t would take. The DDP
 * reducer passes the gradients of a bucket's parameters. NULL with the error set when t is not
 * shared (ddpl_pg_is_shared) or a value tensor does not fit. */
ddpl_work *ddpl_pg_allreduce_prescaled_into(ddpl_pg *pg, ddpl_tensor *t, double factor, int n,
                                            ddpl_tensor *const *values, const int64_t *offsets);
/* t of rank src (a global rank, as every src/dst below) overwrites t on every rank. */
ddpl_work *ddpl_pg_broadcast(ddpl_pg *pg, ddpl_tensor *t, int src);
/* outs[r] (size tensors of t's shape and dtype) receives rank r's t. */
ddpl_work *ddpl_pg_allgather(ddpl_pg *pg, ddpl_tensor *const *outs, int nouts, ddpl_tensor *t);
/* out (size * numel(t) elements, t's dtype, any shape) receives the ranks' t one after another. */
ddpl_work *ddpl_pg_allgather_into(ddpl_pg *pg, ddpl_tensor *out, ddpl_tensor *t);
/* in (size * numel(out) elements) is reduced across ranks; rank r keeps chunk r in out. */
ddpl_work *ddpl_pg_reduce_scatter(ddpl_pg *pg, ddpl_tensor *out, ddpl_tensor *in,
                                  ddpl_reduce_op op);
/* The receiver's tensor must have the sender's byte size. */
ddpl_work *ddpl_pg_send(ddpl_pg *pg, ddpl_tensor *t, int dst);
ddpl_work *ddpl_pg_recv(ddpl_pg *pg, ddpl_tensor *t, int src);
ddpl_work *ddpl_pg_barrier(ddpl_pg *pg);
/* PyTorch's monitored_barrier (distributed/pg_monitored.c): synchronous, over the store. Rank 0
 * waits up to timeout_s (<= 0: the group's) for every other rank and fails naming the first that
 * did not arrive ("monitored_barrier: rank 2 did not arrive within 5 s"), or every one with
 * wait_all_ranks; the others fail with rank 0's verdict. 0 on success, -1 with the error set. */
int ddpl_pg_monitored_barrier(ddpl_pg *pg, double timeout_s, bool wait_all_ranks);

/* ---- rooted collectives and all-to-all (PyTorch's reduce, gather, scatter, all_to_all,
 * all_to_all_single). Ranks (dst, src) are ranks of pg, 0 <= r < size; every rank passes the same
 * root. Messages name the API function ("gather: ..."). */

/* The reduction of every rank's t lands in t on rank dst (reduce dtypes, as allreduce; AVG
 * divides by the group size). On the other ranks t is left unchanged (PyTorch leaves it
 * unspecified; this backend contract promises it for gloo; nccl too, see nccl_pg.c). */
ddpl_work *ddpl_pg_reduce(ddpl_pg *pg, ddpl_tensor *t, int dst, ddpl_reduce_op op);
/* Rank dst receives every rank's t: outs[r] (nouts == size tensors of t's shape and dtype) gets
 * rank r's t. Other ranks pass outs NULL (or nouts 0) and t is only read. Errors: a list on a
 * rank that is not dst, no list (or a list of another length) on dst, an output of another
 * shape or dtype. Every rank's t must have the same shape and dtype (not checked across ranks
 * here). */
ddpl_work *ddpl_pg_gather(ddpl_pg *pg, ddpl_tensor *t, ddpl_tensor *const *outs, int nouts,
                          int dst);
/* The inverse of gather: rank src passes ins (nins == size tensors of t's shape and dtype), and
 * t on rank r receives ins[r] (src's own t too). Other ranks pass ins NULL (or nins 0). */
ddpl_work *ddpl_pg_scatter(ddpl_pg *pg, ddpl_tensor *t, ddpl_tensor *const *ins, int nins, int src);
/* ins[q] of this rank goes to rank q, where it lands in outs[this rank]: outs[q] receives rank
 * q's ins[this rank]. nouts == nins == size; every tensor has one dtype (ins[0]'s); shapes may
 * differ per pair, but outs[q] must hold as many bytes as rank q sends: the ranks exchange their
 * sizes first and a mismatch fails on every rank, naming both sides, before any data moves. */
ddpl_work *ddpl_pg_alltoall(ddpl_pg *pg, ddpl_tensor *const *outs, int nouts,
                            ddpl_tensor *const *ins, int nins);
/* all_to_all of slices along dim 0: in (at least 1-D) is cut into size consecutive slices of
 * in_splits[q] rows each (in_splits NULL, n_in 0: dim 0 / size rows each, dim 0 divisible by
 * size), slice q going to rank q; out is cut likewise by out_splits, slice q receiving rank q's
 * slice for this rank. in and out have one dtype; their rows may differ in shape, but a pair's
 * byte counts must match (exchanged and checked as for all_to_all). Errors: a split list whose
 * length is not size, negative sizes, sizes that do not add up to dim 0. */
ddpl_work *ddpl_pg_alltoall_single(ddpl_pg *pg, ddpl_tensor *out, ddpl_tensor *in,
                                   const int64_t *out_splits, int n_out, const int64_t *in_splits,
                                   int n_in);

/* A zero-filled 1-D CPU tensor of numel elements of dt, meant to be all-reduced over and over
 * (the DDP reducer's buckets). When the group reduces through shared memory it lives in memory
 * every rank maps, and ddpl_pg_allreduce of it (or of a contiguous part of it) runs in place
 * without staging copies; then every rank must reduce the same part of its own buffer of the
 * same creation (checked). Otherwise (ranks on several machines, DDPLUA_SHM=0, backend nccl)
 * it is an ordinary CPU tensor. Collective: every rank calls it with the same arguments, in the
 * same order as its other collectives; blocks until it is made. NULL with the error set on failure.
 */
ddpl_tensor *ddpl_pg_shared_zeros(ddpl_pg *pg, int64_t numel, ddpl_dtype dt);

/* Says that the caller will wait for the next operation it issues on pg right away (the DDP
 * reducer's last bucket). It is then queued without waking the group's thread, and
 * ddpl_work_wait runs it on the caller's thread (unless earlier work is still running, after
 * which the group's thread goes on to it): handing it to another thread and back costs two thread
 * switches, and on a busy machine the woken thread takes the caller's core meanwhile. A work
 * queued so is still run by the group's thread when another collective is issued after it, when
 * the group is freed, or when it is polled (ddpl_work_is_completed) or waited for without being
 * run by the waiter. */
void ddpl_pg_wait_follows(ddpl_pg *pg);

/* Blocks until the work is done or timeout_s passes (< 0: the group's timeout plus a margin,
 * since the operation itself is bounded by it). 0 on success; -1 with the error set when the
 * operation failed ("all_reduce: gloo: ... Timed out ...") or the wait timed out. A work that is
 * next in its lane while nothing of the lane runs is run on the waiting thread itself (unless
 * timeout_s is shorter than the group's timeout): the same result, without two thread
 * switches. */
int ddpl_work_wait(ddpl_work *w, double timeout_s);
bool ddpl_work_is_completed(ddpl_work *w); /* done, successfully or not */
/* The failure message, or NULL while pending or after success. Owned by w. */
const char *ddpl_work_error(ddpl_work *w);
const char *ddpl_work_name(const ddpl_work *w); /* "all_reduce", ... */
ddpl_work *ddpl_work_retain(ddpl_work *w);
void ddpl_work_release(ddpl_work *w); /* NULL is fine; a pending work keeps running */

#endif
