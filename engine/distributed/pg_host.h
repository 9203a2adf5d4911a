/* distributed/pg_host.h: what the CPU process-group backend's files (pg_host.c, pg_host_coll.c,
 * pg_host_lanes.c, pg_host_rooted.c, pg_heartbeat.c) share: the group's state (pg->impl), a
 * work item's (w->impl), the table of host collectives (Gloo or shared memory) that its work
 * items run over, the reduction kernels, and the rooted collectives' entries.
 * defines: pg_host, host_work, host_coll, host_of, host_work_of, host_work_new,
 *          pg_host_gloo_coll, pg_host_shm_coll, pg_host_reduce_fn, pg_host_divide_by,
 *          pg_host_reduce, pg_host_gather, pg_host_scatter, pg_host_alltoall,
 *          pg_host_alltoall_single, the hierarchy's entries (pg_host_hier_*).
 *          Internal to engine/distributed. */
#ifndef DDPL_DIST_PG_HOST_H
#define DDPL_DIST_PG_HOST_H

#include "distributed/gloo_pg.h"
#include "distributed/pg_host_lanes.h"
#include "distributed/pg_impl.h"
#include "distributed/shm_coll.h"

typedef struct host_coll host_coll;
typedef struct host_hier host_hier;
typedef struct pg_heartbeat pg_heartbeat;

/* pg->impl of a group of this backend */
typedef struct pg_host {
    ddpl_gloo *gloo; /* the mesh: point-to-point, and collectives off shared memory */
    ddpl_shm *shm;   /* every rank on this machine (and DDPLUA_SHM is not 0), else NULL */
    host_hier *hier; /* ranks on several machines, several on one (pg_host_hier.c), else NULL */
    const host_coll *coll; /* shm_coll when shm is set, hier_coll when hier is, else gloo_coll */
    /* who the group's ranks are, for fault messages (per group rank: pid, host name) */
    int *pids;
    char **hosts;
    pg_heartbeat *hb; /* distributed/pg_heartbeat.h; NULL without a heartbeat */
    host_lanes lanes; /* where its work items run (distributed/pg_host_lanes.h) */
} pg_host;

/* send/recv: what the sender sends ahead of the payload */
typedef struct host_p2p_header {
    int64_t nbytes;
    int32_t dtype, ndim;
    int64_t sizes[DDPL_MAX_DIMS];
} host_p2p_header;

/* w->impl of a work item of this backend */
typedef struct host_work {
    /* runs the operation on a lane (or the waiting thread): 0, or -1 with the error set */
    int (*run)(ddpl_work *w);
    bool harmless;  /* set by run when its failure leaves the group in step (a size mismatch) */
    bool prescaled; /* allreduce: each rank's values are multiplied by factor before the sum */
    double factor;
    host_p2p_header hdr;
    ddpl_gloo_p2p *p2p_hdr; /* posted header send/receive, until waited for */
    ddpl_gloo_p2p *p2p;     /* posted payload send/receive, until waited for */
    ddpl_shm_buffer *made; /* ddpl_pg_shared_zeros: the buffer created, until the caller takes it */
    /* its lane (pg_host_lanes.c) */
    ddpl_work *next;        /* queue link */
    struct host_lane *lane; /* where it was queued */
    bool quiet;             /* queued without waking the lane's thread (ddpl_pg_wait_follows) */
} host_work;

/* Collectives on contiguous host bytes (the shapes of gloo_pg.h and shm_coll.h); each returns
 * 0, or -1 with the error set. */
struct host_coll {
    int (*allreduce)(pg_host *h, void *data, size_t count, size_t elsize, ddpl_reduce_fn fn);
    int (*broadcast)(pg_host *h, void *data, size_t nbytes, int root);
    int (*allgather)(pg_host *h, const void *in, void *out, size_t nbytes); /* out: size x */
    /* out (count) = the reduction of every rank's block r of in (size x count); NULL: the
     * backend reduce-scatters by an allreduce of a copy of in */
    int (*reduce_scatter)(pg_host *h, const void *in, void *out, size_t count, size_t elsize,
                          ddpl_reduce_fn fn);
    int (*barrier)(pg_host *h);
    /* Before each collective: compares this rank's fingerprint with the others' (gloo: a small
     * allgather now), or hands it to the operation's first barrier (shm: no extra step). */
    int (*agree)(pg_host *h, const ddpl_pg_fp *fp, int size);
    /* agree returns only once every rank has called it (an allgather does: it waits for every
     * rank's fingerprint), so a barrier that agreed has nothing left to do */
    bool agree_waits_for_all;
    /* count elements of data reduced into data on root; elsewhere data is only read, and
     * scratch (count * elsize bytes) is given when reduce_scratch says the table needs it */
    int (*reduce)(pg_host *h, void *data, void *scratch, size_t count, size_t elsize,
                  ddpl_reduce_fn fn, int root);
    bool reduce_scratch;
    int (*gather)(pg_host *h, const void *in, void *out, size_t nbytes, int root);  /* out: root */
    int (*scatter)(pg_host *h, const void *in, void *out, size_t nbytes, int root); /* in: root */
    /* per-pair byte counts, checked to agree across ranks (max_pair_bytes: the largest) */
    int (*alltoallv)(pg_host *h, const void *in, const size_t *in_bytes, void *out,
                     const size_t *out_bytes, size_t max_pair_bytes);
    /* buffers every rank maps, reduced in place (shm_coll.h); NULL: none */
    int (*buffer_new)(pg_host *h, size_t nbytes, ddpl_shm_buffer **out);
    int (*buffer_allreduce)(pg_host *h, ddpl_shm_buffer *b, size_t offset, size_t count,
                            const ddpl_shm_reduce *how, const ddpl_shm_seg *segs, int nsegs);
};

static inline pg_host *host_of(const ddpl_pg *pg)
{
    return pg->impl;
}

static inline host_work *host_work_of(const ddpl_work *w)
{
    return w->impl;
}

/* A work item of this backend that run executes on a lane (pg_work_new's, with the quiet flag
 * of ddpl_pg_wait_follows taken). */
PG_HIDDEN ddpl_work *host_work_new(ddpl_pg *pg, const char *name, int nslots,
                                   int (*run)(ddpl_work *));

/* The tables of host collectives (pg_host_coll.c): Gloo's, shared memory's when every rank is on
 * this machine, and the hierarchy's when the ranks span machines (pg_host_hier.c). */
PG_HIDDEN extern const host_coll pg_host_gloo_coll, pg_host_shm_coll, pg_host_hier_coll;

/* The hierarchy (pg_host_hier.c), for a group connected over Gloo whose ranks' pids and hosts are
 * known (h->pids, h->hosts): sets h->hier and h->coll when the group uses it; 0 (also when it
 * does not), or -1 with the error set. Collective. */
PG_HIDDEN int pg_host_hier_connect(ddpl_pg *pg, pg_host *h, const char *prefix,
                                   const char *bind_host);
PG_HIDDEN void pg_host_hier_free(host_hier *x); /* NULL is fine */
/* The hierarchy's entries of pg_host_hier_coll: the fingerprint check of every collective (a
 * barrier), and allreduce (flat below its threshold). */
PG_HIDDEN int pg_host_hier_agree(pg_host *h, const ddpl_pg_fp *fp, int size);
PG_HIDDEN int pg_host_hier_allreduce(pg_host *h, void *data, size_t count, size_t elsize,
                                     ddpl_reduce_fn fn);
/* "gloo+shm (hierarchical: ...)": the transport named in INFO lines. */
PG_HIDDEN const char *pg_host_hier_transport(const host_hier *x);
/* The heartbeat's part (NULL is fine): beat into the node's segment, which its barriers watch
 * (limit_s and host, this machine's name, as ddpl_shm_watch's); a fault closes the leaders'
 * mesh. */
PG_HIDDEN void pg_host_hier_watch(host_hier *x, double limit_s, const char *host);
PG_HIDDEN void pg_host_hier_beat(host_hier *x);
PG_HIDDEN void pg_host_hier_abort(host_hier *x, const char *why);

/* The elementwise reduction of op on dt (AVG reduces with SUM: divide afterwards), NULL for a
 * dtype the backend does not reduce. */
PG_HIDDEN ddpl_reduce_fn pg_host_reduce_fn(ddpl_dtype dt, ddpl_reduce_op op);
/* data[0..n) /= size, rounding as a division does (floating dtypes; others untouched). */
PG_HIDDEN void pg_host_divide_by(void *data, ddpl_dtype dt, int64_t n, int size);

/* The backend entries of the rooted collectives and all-to-all (pg_backend.h; pg_host_rooted.c). */
PG_HIDDEN ddpl_work *pg_host_reduce(ddpl_pg *pg, ddpl_tensor *t, int dst, ddpl_reduce_op op);
PG_HIDDEN ddpl_work *pg_host_gather(ddpl_pg *pg, ddpl_tensor *t, ddpl_tensor *const *outs,
                                    int nouts, int dst);
PG_HIDDEN ddpl_work *pg_host_scatter(ddpl_pg *pg, ddpl_tensor *t, ddpl_tensor *const *ins, int nins,
                                     int src);
PG_HIDDEN ddpl_work *pg_host_alltoall(ddpl_pg *pg, ddpl_tensor *const *outs,
                                      ddpl_tensor *const *ins, int n);
PG_HIDDEN ddpl_work *pg_host_alltoall_single(ddpl_pg *pg, ddpl_tensor *out, ddpl_tensor *in,
                                             const int64_t *out_counts, const int64_t *in_counts);

#endif
