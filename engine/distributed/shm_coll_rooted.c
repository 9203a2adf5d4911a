/* distributed/shm_coll_rooted.c: reduce, gather, scatter and all-to-all through the shared segment
 * of distributed/shm_coll.c (see shm_coll_rooted.h). defines: ddpl_shm_reduce_to, ddpl_shm_gather,
 * ddpl_shm_scatter, ddpl_shm_alltoallv.
 *
 * Each moves its data in rounds through the segment's staging buffers (one set of `size`
 * buffers of ddpl_shm_staging_bytes() each per round, alternating between the two sets), like
 * ddpl_shm_broadcast and ddpl_shm_allgather:
 *   reduce:    each rank copies its chunk into its buffer; barrier; rank r reduces its share of
 *              the elements over all buffers into buffer 0 (as ddpl_shm_allreduce does); barrier;
 *              the root copies buffer 0 out. The other ranks' data is never written.
 *   gather:    each rank copies its chunk into its buffer; barrier; the root copies all out.
 *   scatter:   the root copies rank q's chunk into buffer q for every q; barrier; each rank
 *              copies its buffer out.
 *   all-to-all: each rank's buffer is cut into `size` slots (64-byte multiples); slot q of rank
 *              p's buffer carries the next piece of p's data for q; barrier; each rank copies
 *              slot (its rank) of every buffer out. Rounds: the largest pair's bytes over the
 *              slot size, the same count on every rank.
 * One barrier per round where a round's readers only read (gather, scatter, all-to-all): see
 * the set rule in shm_coll_rooted.h. */
#include "distributed/shm_coll_rooted.h"

#include "core/core.h"

static size_t min_size(size_t a, size_t b)
{
    return a < b ? a : b;
}

/* The barrier of a round: the first round's compares the ranks' fingerprints
 * (ddpl_shm_checked_barrier), so a mismatched call fails before any rank reads another's data. */
static int round_barrier(ddpl_shm *s, bool first_round)
{
    return first_round ? ddpl_shm_checked_barrier(s) : ddpl_shm_barrier(s);
}

int ddpl_shm_reduce_to(ddpl_shm *s, void *data, size_t count, size_t elsize, ddpl_reduce_fn fn,
                       int root)
{
    int rank = ddpl_shm_rank(s), size = ddpl_shm_size(s);
    size_t per_chunk = ddpl_shm_staging_bytes() / elsize;
    if (count == 0) return ddpl_shm_checked_barrier(s); /* still compared */
    for (size_t first = 0; first < count; first += per_chunk) {
        size_t m = min_size(count - first, per_chunk);
        char *mine = (char *)data + first * elsize, *dst = ddpl_shm_staging(s, 0);
        memcpy(ddpl_shm_staging(s, rank), mine, m * elsize);
        if (round_barrier(s, first == 0) < 0) return -1;
        size_t lo = m * (size_t)rank / (size_t)size, hi = m * (size_t)(rank + 1) / (size_t)size;
        for (int q = 1; q < size && hi > lo; q++)
            fn(dst + lo * elsize, dst + lo * elsize, ddpl_shm_staging(s, q) + lo * elsize, hi - lo);
        if (ddpl_shm_barrier(s) < 0) return -1;
        if (rank == root) memcpy(mine, dst, m * elsize);
        ddpl_shm_next_set(s);
    }
    return 0;
}

/* gather (to_root: rank r's `in` lands at out + r * nbytes on the root) and scatter (the root's
 * in + r * nbytes lands in rank r's `out`): one round per staging chunk, through buffer r. */
static int rooted_move(ddpl_shm *s, const void *in, void *out, size_t nbytes, int root,
                       bool to_root)
{
    int rank = ddpl_shm_rank(s), size = ddpl_shm_size(s);
    size_t chunk = ddpl_shm_staging_bytes();
    if (nbytes == 0) return ddpl_shm_checked_barrier(s); /* still compared */
    for (size_t off = 0; off < nbytes; off += chunk) {
        size_t m = min_size(nbytes - off, chunk);
        if (to_root)
            memcpy(ddpl_shm_staging(s, rank), (const char *)in + off, m);
        else if (rank == root)
            for (int q = 0; q < size; q++)
                memcpy(ddpl_shm_staging(s, q), (const char *)in + (size_t)q * nbytes + off, m);
        if (round_barrier(s, off == 0) < 0) return -1;
        if (!to_root)
            memcpy((char *)out + off, ddpl_shm_staging(s, rank), m);
        else if (rank == root)
            for (int q = 0; q < size; q++)
                memcpy((char *)out + (size_t)q * nbytes + off, ddpl_shm_staging(s, q), m);
        ddpl_shm_next_set(s);
    }
    return 0;
}

int ddpl_shm_gather(ddpl_shm *s, const void *in, void *out, size_t nbytes, int root)
{
    return rooted_move(s, in, out, nbytes, root, true);
}

int ddpl_shm_scatter(ddpl_shm *s, const void *in, void *out, size_t nbytes, int root)
{
    return rooted_move(s, in, out, nbytes, root, false);
}

/* bytes [off, off + slot) of a slice of n bytes: how many of them exist */
static size_t piece(size_t n, size_t off, size_t slot)
{
    return off < n ? min_size(n - off, slot) : 0;
}

int ddpl_shm_alltoallv(ddpl_shm *s, const void *in, const size_t *in_bytes, void *out,
                       const size_t *out_bytes, size_t max_pair_bytes)
{
    int rank = ddpl_shm_rank(s), size = ddpl_shm_size(s);
    size_t slot = ddpl_shm_staging_bytes() / (size_t)size / 64 * 64; /* >= 4 KB: size <= 1000 */
    if (max_pair_bytes == 0) return ddpl_shm_checked_barrier(s);     /* still compared */
    for (size_t off = 0; off < max_pair_bytes; off += slot) {
        char *mine = ddpl_shm_staging(s, rank);
        size_t at = 0; /* start of slice q in `in` */
        for (int q = 0; q < size; q++) {
            size_t n = piece(in_bytes[q], off, slot);
            if (n) memcpy(mine + (size_t)q * slot, (const char *)in + at + off, n);
            at += in_bytes[q];
        }
        if (round_barrier(s, off == 0) < 0) return -1;
        at = 0;
        for (int q = 0; q < size; q++) {
            size_t n = piece(out_bytes[q], off, slot);
            if (n) memcpy((char *)out + at + off, ddpl_shm_staging(s, q) + (size_t)rank * slot, n);
            at += out_bytes[q];
        }
        ddpl_shm_next_set(s);
    }
    return 0;
}
