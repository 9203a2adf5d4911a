/* dist/pg_impl.h: what pg.c (groups, lanes, work handles), pg_ops.c (the operations),
 * pg_agree.c (fingerprints of collectives) and the backends (pg_host.c, nccl_pg.c) share.
 * defines: pg_slot, pg_p2p_header, struct ddpl_work, pg_lane, struct ddpl_pg, pg_work_new,
 *          pg_work_slot, pg_work_finish, pg_lane_push, pg_lanes_start, pg_strided_copy,
 *          pg_expect, pg_member, pg_agree_via_store, pg_ranks_str.
 *          Internal to engine/dist. */
#ifndef DDPL_DIST_PG_IMPL_H
#define DDPL_DIST_PG_IMPL_H

#include <pthread.h>

#include "ddpl/ops.h"
#include "dist/gloo_pg.h"
#include "dist/pg_backend.h"
#include "dist/pg_fingerprint.h"
#include "dist/shm_coll.h"
#include "dist/store.h"

typedef struct pg_slot {
    ddpl_tensor *t;  /* owned view of the caller's tensor (same storage) */
    void *data;      /* what the operation reads/writes: t's memory, or stage */
    void *stage;     /* contiguous copy of a non-contiguous t (malloc), else NULL */
    bool write_back; /* an output: unpack the stage and bump the version after success */
} pg_slot;

typedef struct pg_p2p_header {
    int64_t nbytes;
    int32_t dtype, ndim;
    int64_t sizes[DDPL_MAX_DIMS];
} pg_p2p_header;

struct ddpl_work {
    atomic_long refcount;
    const char *name; /* API name, for messages */
    int (*run)(ddpl_work *w);
    ddpl_pg *pg; /* valid until the work completes (ddpl_pg_free drains the lanes first) */
    const struct ddpl_pg_backend
        *backend; /* the group's, for the work hooks (static: outlives pg) */
    ddpl_reduce_op op;
    bool prescaled; /* allreduce: each rank's values are multiplied by factor before the sum */
    double factor;
    int peer;
    pg_slot *slots;
    int nslots;
    void *scratch;          /* allgather / reduce_scatter staging (malloc) */
    size_t nbytes;          /* per-rank bytes of the operation */
    pg_p2p_header hdr;      /* send/recv: what the sender sends ahead of the payload */
    ddpl_gloo_p2p *p2p_hdr; /* posted header send/receive, until waited for */
    ddpl_gloo_p2p *p2p;     /* posted payload send/receive, until waited for */
    double timeout_s;
    bool harmless; /* set by run when its failure leaves the group in step (a size mismatch) */
    /* operations a backend enqueues on a device stream (run is NULL; nccl_pg.c): its
     * communicator (one reference, dropped by work_release), the event recorded on its stream
     * after the operation, and whether the compute stream was already made to wait on it (after
     * which the tensors may go) */
    void *comm;
    void *done_event;
    bool ordered;
    bool host_sync;        /* barrier: wait blocks the host until the event completes */
    ddpl_shm_buffer *made; /* ddpl_pg_shared_zeros: the buffer created, until the caller takes it */
    pthread_mutex_t mu;
    pthread_cond_t cv; /* CLOCK_MONOTONIC */
    bool done;
    char *error;
    ddpl_work *next;      /* queue link */
    struct pg_lane *lane; /* where it was queued (host operations) */
    bool quiet;           /* queued without waking the lane's thread (ddpl_pg_wait_follows) */
    ddpl_pg_fp fp;        /* a collective's fingerprint (pg_expect); seq 0 for send/recv */
};

/* A FIFO of work and the thread that runs it. busy: an item is running, on the lane's thread or
 * on a caller that took the head item to run it itself (ddpl_work_wait): nobody else may start
 * one meanwhile, so items still run one at a time in issue order. */
typedef struct pg_lane {
    pthread_t thread;
    bool started;
    pthread_mutex_t mu;
    pthread_cond_t cv;
    ddpl_work *head, *tail;
    bool busy;
    bool stop;
} pg_lane;

struct ddpl_pg {
    int rank, size;
    double timeout_s;
    double heartbeat_s; /* as ddpl_pg_config's (0: the default, < 0: none); pg_heartbeat.h */
    bool agent_store;   /* the launcher hosts the store (else rank 0 does) */
    ddpl_store *store;
    int64_t monitored_calls; /* monitored_barrier calls so far: the store keys of the next */
    const struct ddpl_pg_backend *backend; /* chosen by name at creation */
    void *comm; /* the backend's connection (pg_host.c: Gloo and shared memory; NCCL's) */
    /* sends and receives wait on separate lanes: a send completes only once the peer's receive
     * lane has posted the payload, which must not queue behind our own sends (deadlock) */
    pg_lane coll, send, recv;
    pthread_mutex_t broken_mu;
    char *broken; /* first runtime failure; later operations fail with it */
    /* what lane_run runs now, for the heartbeat (dist/pg_heartbeat.h): collectives, which wait
     * for every peer, and sends and receives per peer (size entries, by group rank) */
    atomic_int coll_running;
    atomic_int *p2p_running;
    bool quiet_next; /* ddpl_pg_wait_follows: the next work item is queued quietly */

    /* ---- groups (pg.c) and collective safety (pg_agree.c) ---- */
    int group_id;       /* 0: the default group (the world); subgroups 1, 2, ... */
    int *global_ranks;  /* size entries: group rank -> global rank; NULL for the world */
    int my_global;      /* this process's global rank */
    bool owns_store;    /* the world's group; subgroups use the world's store */
    int n_groups;       /* the world: subgroups created so far (the next id minus 1) */
    char bind[256];     /* the world: the local address the backends listen on */
    uint64_t seq;       /* collectives issued so far (the caller's thread) */
    ddpl_pg_fp next_fp; /* pg_expect -> pg_work_new: the fingerprint of the work being issued */
};

/* A new work item (one reference, for the caller) with nslots empty tensor slots; run executes
 * it on a lane thread and returns 0, or -1 with the error set. */
PG_HIDDEN ddpl_work *pg_work_new(ddpl_pg *pg, const char *name, int nslots,
                                 int (*run)(ddpl_work *));
/* Fills slot i for tensor t: stages a non-contiguous tensor (packing its values when the
 * operation reads them). */
PG_HIDDEN void pg_work_slot(ddpl_work *w, int i, ddpl_tensor *t, bool reads, bool writes);
/* Marks w done (with the error, if any): unpacks staged outputs and bumps their versions on
 * success, drops the tensors and buffers, wakes waiters. */
PG_HIDDEN void pg_work_finish(ddpl_work *w, const char *error);
/* Queues w (the lane takes its own reference) and returns w to the caller. */
PG_HIDDEN ddpl_work *pg_lane_push(pg_lane *ln, ddpl_work *w);
/* Starts the threads of the three lanes (a backend whose operations run on them, at connect). */
PG_HIDDEN int pg_lanes_start(ddpl_pg *pg);
/* Copies t's elements in row-major order into buf (to_buf) or back from it. */
PG_HIDDEN void pg_strided_copy(const ddpl_tensor *t, char *buf, bool to_buf);

/* ---- collective safety (pg_agree.c) ---- */
/* 0 when this rank is a member of pg, else -1 with the error naming fname, the rank and the
 * group's ranks (a non-member may hold a group, as in PyTorch, but not call it). */
PG_HIDDEN int pg_member(const ddpl_pg *pg, const char *fname);
/* The one call every collective of pg_ops.c makes once its arguments are checked: fills in the
 * fingerprint of the call being issued (name, dtype or -1, elements per rank, reduce op or -1,
 * root as a global rank or -1) and gives it the group's next sequence number; pg_work_new puts
 * it into the work item, and lane_run has the backend compare it (its agree entry) before the
 * operation runs. A backend without an in-band check is checked here, through the store, under
 * DDPLUA_DISTRIBUTED_DEBUG=DETAIL. 0, or -1 with the error (not a member; a mismatch). */
PG_HIDDEN int pg_expect(ddpl_pg *pg, const char *name, int dtype, int64_t count, int reduce_op,
                        int root);
/* "3, 1, 5": the group's global ranks in group-rank order, the first max_listed of them (then
 * ", ... (N ranks)"), cut to fit n bytes. */
PG_HIDDEN void pg_ranks_str(const ddpl_pg *pg, char *out, size_t n, int max_listed);
/* Exchanges fp through the group's store (keys <prefix>fp/<seq>/<rank>) and compares:
 * ddpl_pg_fp_check's result. Blocks up to the group's timeout. */
PG_HIDDEN int pg_agree_via_store(ddpl_pg *pg, const ddpl_pg_fp *fp);

#endif
