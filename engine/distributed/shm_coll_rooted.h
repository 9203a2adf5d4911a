/* distributed/shm_coll_rooted.h: the rooted collectives (reduce, gather, scatter) and all-to-all
 * through the shared segment of distributed/shm_coll.h, for a group whose ranks share one machine.
 * defines: ddpl_shm_reduce_to, ddpl_shm_gather, ddpl_shm_scatter, ddpl_shm_alltoallv, and the
 *          staging accessors they are built on (ddpl_shm_staging, ddpl_shm_next_set,
 *          ddpl_shm_staging_bytes, ddpl_shm_rank, ddpl_shm_size; those are in shm_coll.c).
 *
 * Every call returns 0, or -1 with the error set (a peer that stopped participating is reported
 * after the timeout). Every rank passes the same sizes and root (pg_host.c exchanges and checks
 * the per-pair counts of an all-to-all first). */
#ifndef DDPL_DIST_SHM_COLL_ROOTED_H
#define DDPL_DIST_SHM_COLL_ROOTED_H

#include "distributed/shm_coll.h"

/* Rank r's staging buffer of the current set (ddpl_shm_staging_bytes() bytes). A round of a
 * collective writes buffers of the current set, passes at least one ddpl_shm_barrier, reads,
 * and moves on to the other set (ddpl_shm_next_set): a rank's reads of one round end before it
 * enters its next barrier, after which alone anybody writes that set again. */
char *ddpl_shm_staging(ddpl_shm *s, int r);
void ddpl_shm_next_set(ddpl_shm *s);
size_t ddpl_shm_staging_bytes(void);
int ddpl_shm_rank(const ddpl_shm *s);
int ddpl_shm_size(const ddpl_shm *s);

/* count elements of data reduced over the ranks into data on root (with the element order of
 * ddpl_shm_allreduce, so the values equal an allreduce's); data of the other ranks is only
 * read. */
int ddpl_shm_reduce_to(ddpl_shm *s, void *data, size_t count, size_t elsize, ddpl_reduce_fn fn,
                       int root);
/* out (root only; size * nbytes) receives rank r's `in` at out + r * nbytes. */
int ddpl_shm_gather(ddpl_shm *s, const void *in, void *out, size_t nbytes, int root);
/* in (root only; size * nbytes): rank r's out receives in + r * nbytes. */
int ddpl_shm_scatter(ddpl_shm *s, const void *in, void *out, size_t nbytes, int root);
/* in_bytes[q] bytes of in (slices consecutive in rank order) go to rank q, which receives them in
 * its out slice of out_bytes[this rank] bytes (equal: checked by the caller). max_pair_bytes is
 * the largest count of any pair of ranks, the same on every rank: it sets the number of rounds. */
int ddpl_shm_alltoallv(ddpl_shm *s, const void *in, const size_t *in_bytes, void *out,
                       const size_t *out_bytes, size_t max_pair_bytes);

#endif
