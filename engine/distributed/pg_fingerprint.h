/* distributed/pg_fingerprint.h: the fingerprint of a collective call, compared across the ranks of
 * a group before the call touches data, so that collectives which do not match (another op, dtype,
 * element count, reduce op or root, or a rank that called something else) fail on every rank with
 * both sides' calls named instead of producing a wrong result, a crash or a hang. defines:
 * ddpl_pg_fp, ddpl_pg_fp_describe, ddpl_pg_fp_check. Internal to engine/distributed.
 *
 * A fingerprint is plain bytes of a fixed size: it is published in the shared-memory segment's
 * tag slots (distributed/shm_coll.c) or exchanged by a tiny allgather (Gloo) or through the store
 * (backends without an in-band check, under DDPLUA_DISTRIBUTED_DEBUG=DETAIL). It is filled in
 * on the caller's thread when the collective is issued (pg_expect, distributed/pg_impl.h), so the
 * sequence number counts calls in issue order on each rank. */
#ifndef DDPL_DIST_PG_FINGERPRINT_H
#define DDPL_DIST_PG_FINGERPRINT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

typedef struct ddpl_pg_fp {
    uint64_t seq;  /* 1, 2, ... per group in issue order; 0: none (not checked) */
    int64_t count; /* elements of the input per rank; 0 when it has none (barrier); -1 when ranks
                    * may differ (all-to-all: its pair sizes are checked by the op itself) */
    int32_t group; /* group id: 0 the default group, then in creation order */
    int32_t dtype; /* ddpl_dtype of the input, -1 for none */
    int32_t reduce_op; /* ddpl_reduce_op, -1 for none */
    int32_t root;      /* src/dst as the caller gave it (a global rank), -1 for none */
    int32_t caller;    /* global rank of the caller: named in messages, not compared */
    int32_t pad_;
    char name[32]; /* the API call: "all_reduce" (truncated) */
} ddpl_pg_fp;
_Static_assert(sizeof(ddpl_pg_fp) == 72, "a fingerprint is fixed-size bytes on the wire");

/* "all_reduce(float32, 8 elements, op sum)", "broadcast(float32, 8 elements, src 0)",
 * "barrier()". */
void ddpl_pg_fp_describe(const ddpl_pg_fp *fp, char *out, size_t n);
/* Whether two ranks' fingerprints describe the same call (everything but the caller). */
bool ddpl_pg_fp_same(const ddpl_pg_fp *a, const ddpl_pg_fp *b);
/* fps[0..size) are the group's fingerprints in group-rank order and `mine` is this rank's.
 * 0 when all match; else -1 with the error, the same text on every rank:
 * "all_reduce: collective #5 of group 0 differs across ranks: rank 0 called all_reduce(float32,
 * 8 elements, op sum), rank 1 called all_reduce(float64, 8 elements, op sum)" (the calls
 * grouped, ranks global), prefixed with this rank's call name. */
int ddpl_pg_fp_check(const ddpl_pg_fp *mine, const ddpl_pg_fp *fps, int size);

#endif
