/* distributed/pg_host_coll.c: the host backend's three tables of collectives on contiguous host
 * bytes (struct host_coll, pg_host.h), chosen once per group at connect: Gloo over TCP
 * (gloo_pg.h); shared memory (shm_coll.h, shm_coll_rooted.h) when every rank is on this machine;
 * the hierarchy (pg_host_hier.c) when the ranks span machines and some share one.
 * defines: pg_host_gloo_coll, pg_host_shm_coll, pg_host_hier_coll (pg_host.h); the entries are
 * static. */
#include "distributed/pg_host.h"
#include "distributed/shm_coll_rooted.h"

static int gloo_allreduce(pg_host *h, void *data, size_t count, size_t elsize, ddpl_reduce_fn fn)
{
    return ddpl_gloo_allreduce(h->gloo, data, count, elsize, fn);
}
static int gloo_broadcast(pg_host *h, void *data, size_t nbytes, int root)
{
    return ddpl_gloo_broadcast(h->gloo, data, nbytes, root);
}
static int gloo_allgather(pg_host *h, const void *in, void *out, size_t nbytes)
{
    return ddpl_gloo_allgather(h->gloo, in, out, nbytes);
}
static int gloo_barrier(pg_host *h)
{
    return ddpl_gloo_barrier(h->gloo);
}

/* Always on (docs/internals/collectives.md): one allgather of 72 bytes per rank ahead of the
 * collective. Without it a call of another size makes Gloo abort the process (its TCP loop thread
 * throws on a message larger than the posted buffer, where nothing can catch it), and another
 * operation waits until the timeout. Every rank's first Gloo exchange of a collective is this one,
 * of the same size, so it always matches. */
static int gloo_agree(pg_host *h, const ddpl_pg_fp *fp, int size)
{
    ddpl_pg_fp *fps = ddpl_xcalloc((size_t)size, sizeof *fps);
    int rc = ddpl_gloo_allgather(h->gloo, fp, fps, sizeof *fp);
    if (rc == 0) rc = ddpl_pg_fp_check(fp, fps, size);
    free(fps);
    return rc;
}

/* Gloo's ring reduce leaves partial sums in the output of the other ranks: theirs is scratch. */
static int gloo_reduce(pg_host *h, void *data, void *scratch, size_t count, size_t elsize,
                       ddpl_reduce_fn fn, int root)
{
    /* scratch is NULL on the root (run_reduce): there the reduction is in place */
    return ddpl_gloo_reduce(h->gloo, data, scratch ? scratch : data, count, elsize, fn, root);
}
static int gloo_gather(pg_host *h, const void *in, void *out, size_t nbytes, int root)
{
    return ddpl_gloo_gather(h->gloo, in, out, nbytes, root);
}
static int gloo_scatter(pg_host *h, const void *in, void *out, size_t nbytes, int root)
{
    return ddpl_gloo_scatter(h->gloo, in, out, nbytes, root);
}
static int gloo_alltoallv(pg_host *h, const void *in, const size_t *in_bytes, void *out,
                          const size_t *out_bytes, size_t max_pair_bytes)
{
    DDPL_UNUSED(max_pair_bytes);
    return ddpl_gloo_alltoallv(h->gloo, in, in_bytes, out, out_bytes);
}

const host_coll pg_host_gloo_coll = {
    .allreduce = gloo_allreduce,
    .broadcast = gloo_broadcast,
    .allgather = gloo_allgather,
    .barrier = gloo_barrier,
    .agree = gloo_agree,
    .agree_waits_for_all = true,
    .reduce = gloo_reduce,
    .reduce_scratch = true,
    .gather = gloo_gather,
    .scatter = gloo_scatter,
    .alltoallv = gloo_alltoallv,
};

static int shm_allreduce(pg_host *h, void *data, size_t count, size_t elsize, ddpl_reduce_fn fn)
{
    return ddpl_shm_allreduce(h->shm, data, count, elsize, fn);
}
static int shm_broadcast(pg_host *h, void *data, size_t nbytes, int root)
{
    return ddpl_shm_broadcast(h->shm, data, nbytes, root);
}
static int shm_allgather(pg_host *h, const void *in, void *out, size_t nbytes)
{
    return ddpl_shm_allgather(h->shm, in, out, nbytes);
}
static int shm_reduce_scatter(pg_host *h, const void *in, void *out, size_t count, size_t elsize,
                              ddpl_reduce_fn fn)
{
    return ddpl_shm_reduce_scatter(h->shm, in, out, count, elsize, fn);
}
static int shm_barrier(pg_host *h)
{
    return ddpl_shm_checked_barrier(h->shm);
}
/* compared at the operation's first barrier, in the tag slots (shm_coll.c) */
static int shm_agree(pg_host *h, const ddpl_pg_fp *fp, int size)
{
    DDPL_UNUSED(size);
    ddpl_shm_expect(h->shm, fp);
    return 0;
}
static int shm_reduce(pg_host *h, void *data, void *scratch, size_t count, size_t elsize,
                      ddpl_reduce_fn fn, int root)
{
    DDPL_UNUSED(scratch);
    return ddpl_shm_reduce_to(h->shm, data, count, elsize, fn, root);
}
static int shm_gather(pg_host *h, const void *in, void *out, size_t nbytes, int root)
{
    return ddpl_shm_gather(h->shm, in, out, nbytes, root);
}
static int shm_scatter(pg_host *h, const void *in, void *out, size_t nbytes, int root)
{
    return ddpl_shm_scatter(h->shm, in, out, nbytes, root);
}
static int shm_alltoallv(pg_host *h, const void *in, const size_t *in_bytes, void *out,
                         const size_t *out_bytes, size_t max_pair_bytes)
{
    return ddpl_shm_alltoallv(h->shm, in, in_bytes, out, out_bytes, max_pair_bytes);
}
static int shm_buffer_new(pg_host *h, size_t nbytes, ddpl_shm_buffer **out)
{
    return ddpl_shm_buffer_new(h->shm, nbytes, out);
}
static int shm_buffer_allreduce(pg_host *h, ddpl_shm_buffer *b, size_t offset, size_t count,
                                const ddpl_shm_reduce *how, const ddpl_shm_seg *segs, int nsegs)
{
    return ddpl_shm_buffer_allreduce(h->shm, b, offset, count, how, segs, nsegs);
}

const host_coll pg_host_shm_coll = {
    .allreduce = shm_allreduce,
    .broadcast = shm_broadcast,
    .allgather = shm_allgather,
    .reduce_scatter = shm_reduce_scatter,
    .barrier = shm_barrier,
    .agree = shm_agree,
    .reduce = shm_reduce,
    .gather = shm_gather,
    .scatter = shm_scatter,
    .alltoallv = shm_alltoallv,
    .buffer_new = shm_buffer_new,
    .buffer_allreduce = shm_buffer_allreduce,
};

/* The hierarchy checks fingerprints (which makes its barrier) and all-reduces through its tree;
 * every other collective is Gloo's over the whole group's mesh (its fingerprints already compared
 * by the tree). */
const host_coll pg_host_hier_coll = {
    .allreduce = pg_host_hier_allreduce,
    .broadcast = gloo_broadcast,
    .allgather = gloo_allgather,
    .barrier = gloo_barrier,
    .agree = pg_host_hier_agree,
    .agree_waits_for_all = true,
    .reduce = gloo_reduce,
    .reduce_scratch = true,
    .gather = gloo_gather,
    .scatter = gloo_scatter,
    .alltoallv = gloo_alltoallv,
};
