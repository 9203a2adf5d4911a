/* distributed/pg_fingerprint.c: describing and comparing the fingerprints of collective calls.
 * defines: ddpl_pg_fp_describe, ddpl_pg_fp_same, ddpl_pg_fp_check (distributed/pg_fingerprint.h).
 *
 * The mismatch message groups the ranks by the call they made ("ranks 0, 1, 2 called X, rank 3
 * called Y") and is built from the fingerprints alone, so every rank writes the same text. */
#include "distributed/pg_fingerprint.h"

#include "core/core.h"
#include "distributed/pg.h"

void ddpl_pg_fp_describe(const ddpl_pg_fp *fp, char *out, size_t n)
{
    size_t used = (size_t)snprintf(out, n, "%.*s(", (int)sizeof fp->name, fp->name);
    const char *sep = "";
#define ADD(...)                                                                                   \
    do {                                                                                           \
        if (used < n) used += (size_t)snprintf(out + used, n - used, __VA_ARGS__);                 \
        sep = ", ";                                                                                \
    } while (0)
    if (fp->dtype >= 0)
        ADD("%s%s", sep,
            fp->dtype < DDPL_DTYPE_COUNT ? ddpl_dtype_name((ddpl_dtype)fp->dtype) : "?");
    if (fp->count >= 0 && (fp->dtype >= 0 || fp->count))
        ADD("%s%lld elements", sep, (long long)fp->count);
    if (fp->reduce_op >= 0) ADD("%sop %s", sep, ddpl_reduce_op_name((ddpl_reduce_op)fp->reduce_op));
    if (fp->root >= 0) ADD("%sroot %d", sep, fp->root);
#undef ADD
    if (used < n) snprintf(out + used, n - used, ")");
}

bool ddpl_pg_fp_same(const ddpl_pg_fp *a, const ddpl_pg_fp *b)
{
    return a->seq == b->seq && a->count == b->count && a->group == b->group &&
           a->dtype == b->dtype && a->reduce_op == b->reduce_op && a->root == b->root &&
           memcmp(a->name, b->name, sizeof a->name) == 0;
}

int ddpl_pg_fp_check(const ddpl_pg_fp *mine, const ddpl_pg_fp *fps, int size)
{
    int first_bad = -1;
    for (int q = 0; q < size && first_bad < 0; q++)
        if (!ddpl_pg_fp_same(&fps[0], &fps[q])) first_bad = q;
    if (first_bad < 0) return 0;
    /* the distinct calls, in order of the first rank making each; a long list is cut short */
    char msg[1024];
    size_t used = (size_t)snprintf(
        msg, sizeof msg,
        "%.*s: collective #%llu of group %d differs across ranks: ", (int)sizeof mine->name,
        mine->name, (unsigned long long)mine->seq, (int)mine->group);
    bool *done = ddpl_xcalloc((size_t)size, sizeof *done);
    for (int q = 0; q < size && used < sizeof msg; q++) {
        if (done[q]) continue;
        int nsame = 0;
        for (int p = q; p < size; p++)
            if (!done[p] && ddpl_pg_fp_same(&fps[q], &fps[p])) nsame++;
        used += (size_t)snprintf(msg + used, sizeof msg - used, "%s%s ", q ? ", " : "",
                                 nsame > 1 ? "ranks" : "rank");
        int listed = 0;
        for (int p = q; p < size && used < sizeof msg; p++) {
            if (done[p] || !ddpl_pg_fp_same(&fps[q], &fps[p])) continue;
            done[p] = true;
            if (listed++ < 8)
                used += (size_t)snprintf(msg + used, sizeof msg - used, "%s%d",
                                         listed > 1 ? ", " : "", (int)fps[p].caller);
            else if (listed == 9)
                used += (size_t)snprintf(msg + used, sizeof msg - used, ", ...");
        }
        char call[160];
        ddpl_pg_fp_describe(&fps[q], call, sizeof call);
        if (used < sizeof msg)
            used += (size_t)snprintf(msg + used, sizeof msg - used, " called %s", call);
        if (fps[q].seq != mine->seq && used < sizeof msg)
            used += (size_t)snprintf(msg + used, sizeof msg - used, " as its collective #%llu",
                                     (unsigned long long)fps[q].seq);
    }
    free(done);
    return ddpl_error("%s", msg);
}
