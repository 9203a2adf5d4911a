/* dist/shm_coll.h: collectives through shared memory for a group whose ranks share one machine.
 * defines: ddpl_shm, ddpl_shm_connect, ddpl_shm_allreduce, ddpl_shm_broadcast,
 *          ddpl_shm_allgather, ddpl_shm_barrier, ddpl_shm_free.
 *
 * Gloo moves every byte through TCP loopback and two threads per message; ranks on one machine
 * can instead reduce straight out of a shared mapping (as NCCL's and oneCCL's shm transports
 * do). The group decides collectively at creation: every rank publishes its machine identity
 * (boot id + network namespace) and whether it could map the segment, and all ranks use the
 * path only when all agree, so each rank takes the same path for every allreduce. */
#ifndef DDPL_DIST_SHM_COLL_H
#define DDPL_DIST_SHM_COLL_H

#include "dist/gloo_pg.h"
#include "dist/store.h"

typedef struct ddpl_shm ddpl_shm;

/* NULL (no error) when the ranks are not all on this machine, the path is disabled
 * (DDPLUA_SHM=0) or any rank failed to map the segment; the caller then uses Gloo. Blocks up to
 * timeout_s (store calls). */
ddpl_shm *ddpl_shm_connect(ddpl_store *st, const char *prefix, int rank, int size,
                           double timeout_s);
/* In place on data (count elements of elsize bytes); 0, or -1 with the error set (a peer that
 * stopped participating is reported after the timeout). */
int ddpl_shm_allreduce(ddpl_shm *s, void *data, size_t count, size_t elsize, ddpl_reduce_fn fn);
/* nbytes of root's data land in data on every rank. */
int ddpl_shm_broadcast(ddpl_shm *s, void *data, size_t nbytes, int root);
/* out holds size * nbytes: rank r's `in` lands at out + r * nbytes. */
int ddpl_shm_allgather(ddpl_shm *s, const void *in, void *out, size_t nbytes);
/* Returns once every rank has called it; 0, or -1 with the error set after the timeout. */
int ddpl_shm_barrier(ddpl_shm *s);
void ddpl_shm_free(ddpl_shm *s);

#endif
