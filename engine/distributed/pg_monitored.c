/* distributed/pg_monitored.c: monitored_barrier, a barrier that names the ranks that did not
 * arrive. defines: ddpl_pg_monitored_barrier.
 *
 * PyTorch's monitored_barrier, over the group's store rather than the backend, so that a rank
 * that never arrives cannot wedge the transport (the group stays usable after a failure), and
 * it runs on the calling thread, not queued behind the group's collectives. Keys of call n live
 * under pg<id>/monitored_barrier/<n>/ (id: the group's; n counts this group's calls, identical
 * on every rank). "rank 0" below is the group's first rank; messages name global ranks:
 *   arrived/<r>  set by rank r > 0 when it arrives; deleted by r itself once it read the verdict
 *   verdict      set by rank 0: "<k>\n" then "" (success) or the failure message, where k is
 *                the number of ranks rank 0 saw arrive
 *   read         a counter each rank > 0 increments once it has read the verdict; the one that
 *                brings it to k sets all_read
 *   all_read     rank 0 waits for it (bounded), then deletes verdict, read and all_read (after
 *                a success; a failure's verdict stays for the ranks that arrive late)
 * Rank 0 waits for every other rank until one deadline (timeout after rank 0 arrived), in rank
 * order; once it has passed, the remaining ranks are only checked. It names the first missing
 * rank, or every one with wait_all_ranks (as PyTorch). It waits for the arrived ranks to read its
 * verdict before it returns (or raises): otherwise a rank 0 that ends its process right away
 * would take the store with it while the others still wait for the verdict. The other ranks wait
 * for the verdict up to twice the timeout (rank 0 may itself arrive up to a timeout after them
 * and then wait a timeout for a late third rank); a verdict that never comes is an error naming
 * rank 0. Keys are removed by the last rank to need them; only a failed call, or a rank that dies
 * mid-call, leaves keys behind. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "distributed/pg_impl.h"
#include "distributed/store_proto.h"

#define MB_PREFIX 80 /* "pg<id>/monitored_barrier/<n>/" */
#define MB_KEY    (MB_PREFIX + 32)

static void mb_key(char *buf, const char *prefix, const char *what, int rank)
{
    if (rank >= 0)
        snprintf(buf, MB_KEY, "%s%s/%d", prefix, what, rank);
    else
        snprintf(buf, MB_KEY, "%s%s", prefix, what);
}

/* Whether key appears within timeout_s (<= 0: whether it is there now); -1 when the store
 * itself failed (the error is set). */
static int appears(ddpl_store *st, const char *key, double timeout_s)
{
    bool present = false;
    if (timeout_s > 0 && ddpl_store_wait(st, 1, &key, timeout_s) == 0) return 1;
    if (ddpl_store_check(st, 1, &key, &present) < 0) return -1;
    return present ? 1 : 0;
}

/* The store's failure as monitored_barrier's. */
static int store_failed(void)
{
    char e[512];
    snprintf(e, sizeof e, "%s", ddpl_last_error());
    return ddpl_error("monitored_barrier: %s", e);
}

/* Rank 0: waits for the others, announces the verdict, waits for it to be read. */
static int monitored_root(ddpl_pg *pg, const char *prefix, double timeout_s, bool wait_all)
{
    ddpl_store *st = pg->store;
    char key[MB_KEY];
    double deadline = store_now() + timeout_s;
    size_t cap = 64 + 12 * (size_t)pg->size, used = 0;
    char *missing = ddpl_xmalloc(cap);
    missing[0] = '\0';
    int nmissing = 0, narrived = 0;
    for (int r = 1; r < pg->size; r++) {
        mb_key(key, prefix, "arrived", r);
        int here = appears(st, key, deadline - store_now());
        if (here < 0) {
            free(missing);
            return store_failed();
        }
        if (here) {
            narrived++;
            continue;
        }
        /* without wait_all_ranks only the first is named, but every rank counted as arrived
         * (the deadline has passed: the rest are only checked) is one that will read the verdict */
        if (wait_all || nmissing == 0)
            used += (size_t)snprintf(missing + used, cap - used, "%s%d", nmissing ? ", " : "",
                                     ddpl_pg_global_rank(pg, r));
        nmissing++;
        if (!wait_all) deadline = 0;
    }
    if (!wait_all && nmissing) nmissing = 1;
    char *verdict = ddpl_xmalloc(cap + 128);
    int head = snprintf(verdict, cap + 128, "%d\n", narrived);
    if (nmissing)
        snprintf(verdict + head, cap + 128 - (size_t)head, "%s %s did not arrive within %g s",
                 nmissing == 1 ? "rank" : "ranks", missing, timeout_s);
    free(missing);
    mb_key(key, prefix, "verdict", -1);
    int rc = ddpl_store_set(st, key, verdict, strlen(verdict));
    if (rc < 0) {
        free(verdict);
        return store_failed();
    }
    if (narrived > 0) {
        /* the arrived ranks are waiting for the verdict, so this is quick; bounded all the same.
         * A failure's verdict stays (as does read): a late rank reads it on arrival instead of
         * waiting for a verdict that was removed */
        char all_read[MB_KEY];
        mb_key(all_read, prefix, "all_read", -1);
        if (appears(st, all_read, timeout_s) == 1 && nmissing == 0) {
            bool gone;
            ddpl_store_delete(st, key, &gone);
            ddpl_store_delete(st, all_read, &gone);
            mb_key(key, prefix, "read", -1);
            ddpl_store_delete(st, key, &gone);
        }
    }
    if (nmissing) rc = ddpl_error("monitored_barrier: %s", verdict + head);
    free(verdict);
    return rc;
}

/* Rank r > 0: arrives, waits for rank 0's verdict, acknowledges it. */
static int monitored_member(ddpl_pg *pg, const char *prefix, double timeout_s)
{
    ddpl_store *st = pg->store;
    char arrived[MB_KEY], key[MB_KEY];
    mb_key(arrived, prefix, "arrived", pg->rank);
    if (ddpl_store_set(st, arrived, "1", 1) < 0) return store_failed();
    mb_key(key, prefix, "verdict", -1);
    const char *keys[] = {key};
    if (ddpl_store_wait(st, 1, keys, 2 * timeout_s) < 0) {
        char why[512];
        snprintf(why, sizeof why, "%s", ddpl_last_error());
        int root = ddpl_pg_global_rank(pg, 0);
        return ddpl_error("monitored_barrier: rank %d got no verdict from rank %d within %g s "
                          "(rank %d did not reach monitored_barrier, or failed or exited: %s)",
                          ddpl_pg_global_rank(pg, pg->rank), root, 2 * timeout_s, root, why);
    }
    void *value;
    size_t len;
    if (ddpl_store_get(st, key, &value, &len) < 0) return store_failed();
    char *verdict = ddpl_xmalloc(len + 1);
    memcpy(verdict, value, len);
    verdict[len] = '\0';
    free(value);
    char *msg = strchr(verdict, '\n');
    long narrived = strtol(verdict, NULL, 10);
    bool gone;
    ddpl_store_delete(st, arrived, &gone);
    int64_t nread = 0;
    mb_key(key, prefix, "read", -1);
    if (ddpl_store_add(st, key, 1, &nread) == 0 && nread == narrived) {
        mb_key(key, prefix, "all_read", -1);
        ddpl_store_set(st, key, "1", 1);
    }
    int rc = 0;
    if (msg && msg[1])
        rc = ddpl_error("monitored_barrier: failed on rank %d: %s (seen from rank %d)",
                        ddpl_pg_global_rank(pg, 0), msg + 1, ddpl_pg_global_rank(pg, pg->rank));
    free(verdict);
    return rc;
}

int ddpl_pg_monitored_barrier(ddpl_pg *pg, double timeout_s, bool wait_all_ranks)
{
    if (pg_member(pg, "monitored_barrier") < 0) return -1;
    if (timeout_s <= 0) timeout_s = pg->timeout_s;
    if (pg->size == 1) return 0;
    char prefix[MB_PREFIX];
    snprintf(prefix, sizeof prefix, "pg%d/monitored_barrier/%lld/", pg->group_id,
             (long long)pg->monitored_calls++);
    return pg->rank == 0 ? monitored_root(pg, prefix, timeout_s, wait_all_ranks)
                         : monitored_member(pg, prefix, timeout_s);
}
