/* distributed/pg_impl.h: what every process-group backend shares with the backend-independent
 * files: pg.c (groups), pg_work.c (work handles), pg_ops.c (the operations), pg_agree.c
 * (fingerprints of collectives). defines: pg_slot, struct ddpl_work, struct ddpl_pg, pg_work_new,
 * pg_work_slot, pg_work_finish, pg_work_wait_done, pg_work_is_done, pg_strided_copy, pg_broken,
 * pg_break, pg_expect, pg_member, pg_agree_via_store, pg_ranks_str. Internal to engine/distributed.
 *
 * ggml's {iface, context}: a group and a work item hold what every backend shares, and one
 * `void *impl` that belongs to their backend (struct ddpl_pg_backend, pg_backend.h): a group's is
 * made by the backend's connect and freed by its free; a work item's is work_size bytes the
 * backend declares, allocated with the item itself (no second allocation per operation) and
 * zeroed. No backend's types appear here: this header includes no backend's header. */
#ifndef DDPL_DIST_PG_IMPL_H
#define DDPL_DIST_PG_IMPL_H

#include <pthread.h>

#include "ddpl/ops.h"
#include "distributed/pg_backend.h"
#include "distributed/pg_fingerprint.h"
#include "distributed/store.h"

typedef struct pg_slot {
    ddpl_tensor *t;  /* owned view of the caller's tensor (same storage) */
    void *data;      /* what the operation reads/writes: t's memory, or stage */
    void *stage;     /* contiguous copy of a non-contiguous t (malloc), else NULL */
    bool write_back; /* an output: unpack the stage and bump the version after success */
} pg_slot;

struct ddpl_work {
    atomic_long refcount;
    const char *name;                      /* API name, for messages */
    ddpl_pg *pg;                           /* until the work completes (or its backend lets go) */
    const struct ddpl_pg_backend *backend; /* the group's, for the work hooks (static) */
    /* the operation, as the backends' entries describe it */
    ddpl_reduce_op op;
    int peer; /* a root, source or destination (group rank) */
    pg_slot *slots;
    int nslots;
    void *scratch; /* staging or a plan (malloc), freed at completion */
    size_t nbytes; /* per-rank bytes of the operation */
    double timeout_s;
    ddpl_pg_fp fp; /* a collective's fingerprint (pg_expect); seq 0 for send/recv */
    /* completion */
    pthread_mutex_t mu;
    pthread_cond_t cv; /* CLOCK_MONOTONIC */
    bool done;
    char *error;
    void *impl; /* the backend's work_size bytes, just after this struct in one allocation */
};

struct ddpl_pg {
    int rank, size; /* this process's group rank (-1: not a member), the group's size */
    double timeout_s;
    double heartbeat_s; /* as ddpl_pg_config's (0: the default, < 0: none) */
    bool agent_store;   /* the launcher hosts the store (else rank 0 does) */
    ddpl_store *store;
    int64_t monitored_calls; /* monitored_barrier calls so far: the store keys of the next */
    const struct ddpl_pg_backend *backend; /* chosen by name at creation */
    void *impl; /* the backend's state of this group: made by connect, freed by free */
    pthread_mutex_t broken_mu;
    char *broken; /* first runtime failure; later operations fail with it (pg_broken) */

    /* ---- groups (pg.c) and collective safety (pg_agree.c) ---- */
    int group_id;       /* 0: the default group (the world); subgroups 1, 2, ... */
    int *global_ranks;  /* size entries: group rank -> global rank; NULL for the world */
    int my_global;      /* this process's global rank */
    bool owns_store;    /* the world's group; subgroups use the world's store */
    char *store_id;     /* the world on rank 0 hosting the store: "address:port:token" (pg.c) */
    int n_groups;       /* the world: subgroups created so far (the next id minus 1) */
    char bind[256];     /* the world: the local address the backends listen on */
    uint64_t seq;       /* collectives issued so far (the caller's thread) */
    ddpl_pg_fp next_fp; /* pg_expect -> pg_work_new: the fingerprint of the work being issued */
};

/* ---- work items (pg_work.c) ---- */
/* A new work item (one reference, for the caller) with nslots empty tensor slots and the
 * backend's zeroed work_size bytes at w->impl; it takes the fingerprint pg_expect just made. */
PG_HIDDEN ddpl_work *pg_work_new(ddpl_pg *pg, const char *name, int nslots);
/* Fills slot i for tensor t: stages a non-contiguous tensor (packing its values when the
 * operation reads them). */
PG_HIDDEN void pg_work_slot(ddpl_work *w, int i, ddpl_tensor *t, bool reads, bool writes);
/* Marks w done (with the error, if any): unpacks staged outputs and bumps their versions on
 * success, drops the tensors and buffers (the backend's work_drop first), wakes waiters. */
PG_HIDDEN void pg_work_finish(ddpl_work *w, const char *error);
/* Sleeps until w is done (any thread may finish it) or timeout_s passes (< 0: the operation's
 * timeout plus a margin); ddpl_work_wait's result. */
PG_HIDDEN int pg_work_wait_done(ddpl_work *w, double timeout_s);
/* Whether w is done, and its error (owned by w; NULL on success) when error is not NULL. */
PG_HIDDEN bool pg_work_is_done(ddpl_work *w, const char **error);
/* Copies t's elements in row-major order into buf (to_buf) or back from it. */
PG_HIDDEN void pg_strided_copy(const ddpl_tensor *t, char *buf, bool to_buf);

/* ---- the group's failure state (pg.c) ---- */
/* True when pg failed earlier: msg (n bytes) then says "<name>: the process group is unusable
 * after an earlier failure (<first failure>)". */
PG_HIDDEN bool pg_broken(ddpl_pg *pg, const char *name, char *msg, size_t n);
/* Records msg as pg's first failure (later ones are dropped). */
PG_HIDDEN void pg_break(ddpl_pg *pg, const char *msg);

/* ---- collective safety (pg_agree.c) ---- */
/* 0 when this rank is a member of pg, else -1 with the error naming fname, the rank and the
 * group's ranks (a non-member may hold a group, as in PyTorch, but not call it). */
PG_HIDDEN int pg_member(const ddpl_pg *pg, const char *fname);
/* The one call every collective of pg_ops.c makes once its arguments are checked: fills in the
 * fingerprint of the call being issued (name, dtype or -1, elements per rank, reduce op or -1,
 * root as a global rank or -1) and gives it the group's next sequence number; pg_work_new puts
 * it into the work item, and a backend that agrees_in_band compares it before the operation
 * touches data (the host backend's lanes). Any other backend is checked here, through the store,
 * under DDPLUA_DISTRIBUTED_DEBUG=DETAIL. 0, or -1 with the error (not a member; a mismatch). */
PG_HIDDEN int pg_expect(ddpl_pg *pg, const char *name, int dtype, int64_t count, int reduce_op,
                        int root);
/* "3, 1, 5": the group's global ranks in group-rank order, the first max_listed of them (then
 * ", ... (N ranks)"), cut to fit n bytes. */
PG_HIDDEN void pg_ranks_str(const ddpl_pg *pg, char *out, size_t n, int max_listed);
/* Exchanges fp through the group's store (keys <prefix>fp/<seq>/<rank>) and compares:
 * ddpl_pg_fp_check's result. Blocks up to the group's timeout. */
PG_HIDDEN int pg_agree_via_store(ddpl_pg *pg, const ddpl_pg_fp *fp);

#endif
