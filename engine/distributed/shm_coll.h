/* distributed/shm_coll.h: collectives through shared memory for a group whose ranks share one
 * machine. defines: ddpl_shm, ddpl_shm_connect, ddpl_shm_expect, ddpl_shm_allreduce,
 * ddpl_shm_broadcast, ddpl_shm_allgather,
 * ddpl_shm_reduce_scatter, ddpl_shm_barrier, ddpl_shm_checked_barrier,
 * ddpl_shm_free, ddpl_shm_buffer and its calls, the heartbeat's calls (ddpl_shm_watch,
 * ddpl_shm_beat, ddpl_shm_silence, ddpl_shm_pid), ddpl_shm_machine_id.
 *
 * Gloo moves every byte through TCP loopback and two threads per message; ranks on one machine
 * can instead reduce straight out of a shared mapping (as NCCL's and oneCCL's shm transports
 * do). The group decides collectively at creation: every rank publishes its machine identity
 * (boot id + network namespace) and whether it could map the segment, and all ranks use the
 * path only when all agree, so each rank takes the same path for every allreduce.
 *
 * Every collective here compares the ranks' calls at its first barrier (the fingerprint given
 * by ddpl_shm_expect, and for an allreduce what it reduces): a mismatch is an error on every
 * rank naming each rank's call (distributed/pg_fingerprint.h), never a wrong result. */
#ifndef DDPL_DIST_SHM_COLL_H
#define DDPL_DIST_SHM_COLL_H

#include "distributed/gloo_pg.h"
#include "distributed/pg_fingerprint.h"
#include "distributed/store.h"

typedef struct ddpl_shm ddpl_shm;

/* "<boot id> <network namespace> <pid namespace>": equal exactly for processes that can share
 * /dev/shm, that the job treats as one node, and that can see each other's pids. */
void ddpl_shm_machine_id(char *out, size_t n);

/* NULL (no error) when the ranks are not all on this machine, the path is disabled
 * (DDPLUA_SHM=0) or any rank failed to map the segment; the caller then uses Gloo. Blocks up to
 * timeout_s (store calls). */
ddpl_shm *ddpl_shm_connect(ddpl_store *st, const char *prefix, int rank, int size,
                           double timeout_s);
/* The fingerprint of the next collective calls (until the next ddpl_shm_expect), which their
 * first barrier compares across the ranks. Zero (the default) matches zero. */
void ddpl_shm_expect(ddpl_shm *s, const ddpl_pg_fp *fp);
/* In place on data (count elements of elsize bytes); 0, or -1 with the error set (a peer that
 * exited is named at once, one whose heartbeat stopped at the heartbeat limit (ddpl_shm_watch),
 * one that is alive but does not come at the timeout). */
int ddpl_shm_allreduce(ddpl_shm *s, void *data, size_t count, size_t elsize, ddpl_reduce_fn fn);
/* nbytes of root's data land in data on every rank. */
int ddpl_shm_broadcast(ddpl_shm *s, void *data, size_t nbytes, int root);
/* out holds size * nbytes: rank r's `in` lands at out + r * nbytes. */
int ddpl_shm_allgather(ddpl_shm *s, const void *in, void *out, size_t nbytes);
/* in holds size * count elements; out (count) gets the reduction over the ranks of rank r's
 * block, in[r * count .. (r + 1) * count). */
int ddpl_shm_reduce_scatter(ddpl_shm *s, const void *in, void *out, size_t count, size_t elsize,
                            ddpl_reduce_fn fn);
/* Returns once every rank has called it; 0, or -1 with the error set after the timeout. A bare
 * synchronisation (creation uses it), not checked: the collective barrier is the next one. */
int ddpl_shm_barrier(ddpl_shm *s);
/* barrier() of a process group: ddpl_shm_barrier with the fingerprint check. */
int ddpl_shm_checked_barrier(ddpl_shm *s);
void ddpl_shm_free(ddpl_shm *s);

/* Faults (distributed/pg_heartbeat.c beats; shm_coll.c's barriers check). From now on a barrier
 * that waits for a peer whose heartbeat is older than limit_s (> 0; 0: never) fails naming it, the
 * pid and what /proc says of it; global (size entries, copied; NULL: the group's ranks) names
 * the ranks in messages, and host (copied; NULL: none) the machine, for a segment that is one
 * node of a group spanning machines. Call before the group's collectives start. */
void ddpl_shm_watch(ddpl_shm *s, double limit_s, const int *global, const char *host);
/* This rank's heartbeat: stamps the time into the segment. Safe from any thread. */
void ddpl_shm_beat(ddpl_shm *s);
/* Seconds since rank q's last heartbeat, -1 when it has not beaten yet; its pid. */
double ddpl_shm_silence(const ddpl_shm *s, int q);
int ddpl_shm_pid(const ddpl_shm *s, int q);

/* A buffer every rank of the group can read and write: each rank's part lives in a segment of its
 * own that all ranks map, so an allreduce of it runs in place (no copy into and out of the
 * group's staging buffers): rank r sums its share of the elements across all parts and writes
 * the sums into every part. The DDP reducer keeps its buckets in these. */
typedef struct ddpl_shm_buffer ddpl_shm_buffer;

/* Collective: every rank calls it with the same nbytes, in the same order as its other
 * collectives. 0 with *out a zero-filled buffer, or with *out NULL (no error) when some rank
 * could not create or map its part (the same on every rank: then nobody uses one); -1 with the
 * error set when a peer stopped participating (named, as for an allreduce). */
int ddpl_shm_buffer_new(ddpl_shm *s, size_t nbytes, ddpl_shm_buffer **out);
void *ddpl_shm_buffer_data(const ddpl_shm_buffer *b); /* this rank's part */
size_t ddpl_shm_buffer_nbytes(const ddpl_shm_buffer *b);
/* out[i] = in[i] * factor for n elements of the scaled dtype. */
typedef void (*ddpl_scale_fn)(void *out, const void *in, size_t n, double factor);

/* How an allreduce on a shared buffer combines values. */
typedef struct ddpl_shm_reduce {
    size_t elsize;
    ddpl_reduce_fn fn;   /* out = a (op) b */
    ddpl_scale_fn scale; /* each rank's values times factor before they are combined; NULL: no */
    double factor;
    /* Optional, used on 2 ranks: a[i] = b[i] = (a[i] * f) (op) (b[i] * f) in one pass (f = factor,
     * or 1 without scale), the same values fn and scale give, for n elements. */
    void (*pair)(void *restrict a, void *restrict b, size_t n, double factor);
} ddpl_shm_reduce;

/* Elements [start, start + count) of an allreduce on a shared buffer that live in this rank's own
 * memory (data) instead of its part of the buffer: read from there, and the result written
 * there. */
typedef struct ddpl_shm_seg {
    char *data;
    size_t start, count; /* in elements of the reduced range */
} ddpl_shm_seg;

/* Reduces count elements at byte offset `offset` across the ranks, as `how` says. Every rank
 * must pass the same buffer, offset and count (checked: a mismatch is an error, not a wrong
 * sum). With how->scale, each rank's values are multiplied by how->factor before they are
 * reduced, as if every rank had scaled its values first, without a pass of its own.
 *
 * Where this rank's values are: in its part of b, except the ranges of segs (nsegs of them,
 * sorted, not overlapping; NULL/0 for none), which are read from and written to their own
 * memory. Only the ranges the other ranks reduce are copied into the part before, and copied
 * back after: with 2 ranks, half of what staging every value through the part costs. Where the
 * values are in the part, it holds the result afterwards; elsewhere the part's contents are left
 * undefined. 0, or -1 with the error set. */
int ddpl_shm_buffer_allreduce(ddpl_shm *s, ddpl_shm_buffer *b, size_t offset, size_t count,
                              const ddpl_shm_reduce *how, const ddpl_shm_seg *segs, int nsegs);
/* Unmaps this rank's view of every part; the others keep theirs. NULL is fine. */
void ddpl_shm_buffer_free(ddpl_shm_buffer *b);

#endif
