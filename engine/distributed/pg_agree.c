/* distributed/pg_agree.c: collective safety: membership, the fingerprint of each collective as it
 * is issued, the exchange through the store for backends without an in-band check, and the
 * DDPLUA_DISTRIBUTED_DEBUG level.
 * defines: pg_member, pg_expect, pg_agree_via_store, pg_ranks_str (pg_impl.h),
 *          ddpl_pg_debug_level (pg.h).
 *
 * Where the fingerprints are compared (see docs/internals/collectives.md):
 *   - gloo through shared memory: always, in the tag slots the first barrier of every operation
 *     already reads (distributed/shm_coll.c): no extra synchronisation;
 *   - gloo over TCP: always, by an allgather of the fingerprints (72 bytes per rank) on the lane
 *     before the operation (pg_host_lanes.c): one small round trip, next to a DDP bucket's
 * megabytes, and without it a mismatch is a wrong result, a hang or Gloo aborting the process;
 *   - nccl: under DDPLUA_DISTRIBUTED_DEBUG=DETAIL, through the store when the call is issued
 *     (here), as PyTorch checks NCCL calls only in its DETAIL mode. */
#include <stdatomic.h>
#include <strings.h>

#include "distributed/pg_impl.h"

int ddpl_pg_debug_level(void)
{
    static atomic_int level = -1; /* read once: the environment of a job does not change */
    int l = atomic_load(&level);
    if (l >= 0) return l;
    const char *v = getenv("DDPLUA_DISTRIBUTED_DEBUG");
    l = !v || !*v                      ? DDPL_PG_DEBUG_OFF
        : strcasecmp(v, "DETAIL") == 0 ? DDPL_PG_DEBUG_DETAIL
        : strcasecmp(v, "INFO") == 0   ? DDPL_PG_DEBUG_INFO
                                       : DDPL_PG_DEBUG_OFF;
    if (v && *v && l == DDPL_PG_DEBUG_OFF && strcasecmp(v, "OFF") != 0)
        fprintf(stderr,
                "ddplua: DDPLUA_DISTRIBUTED_DEBUG=%s is not OFF, INFO or DETAIL; using OFF\n", v);
    atomic_store(&level, l);
    return l;
}

void pg_ranks_str(const ddpl_pg *pg, char *out, size_t n, int max_listed)
{
    size_t used = 0;
    out[0] = '\0';
    for (int r = 0; r < pg->size && used < n; r++) {
        if (r == max_listed) {
            snprintf(out + used, n - used, ", ... (%d ranks)", pg->size);
            break;
        }
        int g = pg->global_ranks ? pg->global_ranks[r] : r;
        used += (size_t)snprintf(out + used, n - used, "%s%d", r ? ", " : "", g);
    }
}

int pg_member(const ddpl_pg *pg, const char *fname)
{
    if (pg->rank >= 0) return 0;
    char ranks[256];
    pg_ranks_str(pg, ranks, sizeof ranks, 16);
    return ddpl_error("%s: rank %d is not a member of process group %d (ranks %s)", fname,
                      pg->my_global, pg->group_id, ranks);
}

int pg_expect(ddpl_pg *pg, const char *name, int dtype, int64_t count, int reduce_op, int root)
{
    if (pg_member(pg, name) < 0) return -1;
    ddpl_pg_fp *fp = &pg->next_fp;
    memset(fp, 0, sizeof *fp);
    fp->seq = ++pg->seq;
    fp->count = count;
    fp->group = pg->group_id;
    fp->dtype = dtype;
    fp->reduce_op = reduce_op;
    fp->root = root;
    fp->caller = pg->my_global;
    snprintf(fp->name, sizeof fp->name, "%s", name);
    if (pg->backend->agrees_in_band || ddpl_pg_debug_level() < DDPL_PG_DEBUG_DETAIL) return 0;
    /* checked here, at issue: so is the failure state a mismatch leaves (the host backend's
     * lanes check it when they run a work item; a backend without lanes has only this place) */
    char msg[1024];
    if (pg_broken(pg, name, msg, sizeof msg)) return ddpl_error("%s", msg);
    return pg_agree_via_store(pg, fp);
}

int pg_agree_via_store(ddpl_pg *pg, const ddpl_pg_fp *fp)
{
    char key[96];
    snprintf(key, sizeof key, "pg%d/fp/%llu/%d", pg->group_id, (unsigned long long)fp->seq,
             pg->rank);
    if (ddpl_store_set(pg->store, key, fp, sizeof *fp) < 0) return -1;
    ddpl_pg_fp *fps = ddpl_xcalloc((size_t)pg->size, sizeof *fps);
    int rc = 0;
    for (int r = 0; r < pg->size && rc == 0; r++) {
        snprintf(key, sizeof key, "pg%d/fp/%llu/%d", pg->group_id, (unsigned long long)fp->seq, r);
        const char *k = key;
        void *v = NULL;
        size_t len = 0;
        rc = ddpl_store_wait(pg->store, 1, &k, pg->timeout_s);
        if (rc == 0) rc = ddpl_store_get(pg->store, key, &v, &len);
        if (rc == 0 && len == sizeof *fps) memcpy(&fps[r], v, len);
        free(v);
    }
    bool mismatch = false;
    if (rc == 0) {
        rc = ddpl_pg_fp_check(fp, fps, pg->size);
        mismatch = rc < 0;
    }
    free(fps);
    if (mismatch) { /* the ranks are out of step: the group is unusable, as after a failed run */
        pg_break(pg, ddpl_last_error());
        return -1;
    }
    /* Every rank has read the keys of call seq - 2 once it set those of seq - 1, which this rank
     * has just waited for: its own key of seq - 2 can go (the store does not grow per call). */
    if (rc == 0 && fp->seq > 2) {
        snprintf(key, sizeof key, "pg%d/fp/%llu/%d", pg->group_id, (unsigned long long)fp->seq - 2,
                 pg->rank);
        bool deleted;
        ddpl_store_delete(pg->store, key, &deleted);
    }
    return rc;
}
