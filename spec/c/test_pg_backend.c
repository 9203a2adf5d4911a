/* spec/c/test_pg_backend.c: adding a process-group backend touches its own file and one table
 * entry (distributed/pg_backend.h). This file is the whole of a small backend, "store": every
 * collective goes through the group's key-value store (each rank sets its bytes under a key of
 * its own, then reads every rank's), completes before its entry returns, and keeps its own
 * state behind pg->impl and w->impl; pg_backend_add is its one table entry. Two forked ranks then
 * use it through the public C interface (pg.h) exactly as they use gloo: all_reduce (sum, avg,
 * max; a non-contiguous view), broadcast, all_gather_into_tensor, barrier, work handles; what
 * it lacks (reduce_scatter_tensor, send) is refused by name; DDPLUA_DISTRIBUTED_DEBUG=DETAIL
 * checks its calls through the store (it has no in-band check), a mismatch naming both calls.
 * pg_backend_add refuses a taken name and an incomplete table.
 * defines: main. */
#include <stdlib.h>

#include "check.h"
#include "net_util.h"
#include "core/core.h"
#include "distributed/pg.h"
#include "distributed/pg_impl.h"

/* ------------------------------------------------------------- the "store" backend ---- */
/* pg->impl: where this group's keys go, and how many operations it ran (its own state) */
typedef struct store_group {
    char prefix[64];
    int64_t ops;
} store_group;

/* w->impl: this backend's per-work state (what the operation moved) */
typedef struct store_work {
    size_t bytes_read;
} store_work;

static store_group *group_of(const ddpl_pg *pg)
{
    return pg->impl;
}

static int store_connect(ddpl_pg *pg, const char *prefix, const char *bind_host)
{
    DDPL_UNUSED(bind_host);
    store_group *g = ddpl_xcalloc(1, sizeof *g);
    snprintf(g->prefix, sizeof g->prefix, "%sstore/", prefix);
    pg->impl = g;
    return 0;
}

static bool store_free(ddpl_pg *pg)
{
    free(pg->impl);
    pg->impl = NULL;
    return true;
}

static int store_check_tensor(const ddpl_pg *pg, const char *fname, const char *what,
                              const ddpl_tensor *t, bool reduces)
{
    DDPL_UNUSED(pg);
    if (t->device.type != DDPL_CPU)
        return ddpl_error("%s: backend store takes CPU tensors (%s)", fname, what);
    if (reduces && t->dtype != DDPL_FLOAT32)
        return ddpl_error("%s: backend store reduces float32 only, got %s for %s", fname,
                          ddpl_dtype_name((ddpl_dtype)t->dtype), what);
    return 0;
}

/* Publishes `mine` (nbytes) as this rank's part of operation number g->ops, then reads every
 * rank's into all (size * nbytes). 0, or -1 with the error set. */
static int exchange(ddpl_work *w, const void *mine, void *all, size_t nbytes)
{
    ddpl_pg *pg = w->pg;
    store_group *g = group_of(pg);
    int64_t op = ++g->ops;
    char key[128];
    snprintf(key, sizeof key, "%s%lld/%d", g->prefix, (long long)op, pg->rank);
    if (ddpl_store_set(pg->store, key, mine, nbytes) < 0) return -1;
    for (int r = 0; r < pg->size; r++) {
        snprintf(key, sizeof key, "%s%lld/%d", g->prefix, (long long)op, r);
        const char *k = key;
        void *v = NULL;
        size_t len = 0;
        if (ddpl_store_wait(pg->store, 1, &k, w->timeout_s) < 0 ||
            ddpl_store_get(pg->store, key, &v, &len) < 0)
            return -1;
        if (len != nbytes) {
            free(v);
            return ddpl_error("%s: rank %d sent %zu bytes, expected %zu", w->name, r, len, nbytes);
        }
        memcpy((char *)all + (size_t)r * nbytes, v, len);
        free(v);
        ((store_work *)w->impl)->bytes_read += len;
    }
    return 0;
}

/* The operation runs now: the work is complete when the entry returns it. */
static ddpl_work *complete(ddpl_work *w, int rc)
{
    pg_work_finish(w, rc < 0 ? ddpl_last_error() : NULL);
    return w;
}

static ddpl_work *store_allreduce(ddpl_pg *pg, ddpl_tensor *t, ddpl_reduce_op op)
{
    ddpl_work *w = pg_work_new(pg, "all_reduce", 1);
    w->op = op;
    pg_work_slot(w, 0, t, true, true); /* stages a non-contiguous tensor */
    int64_t n = ddpl_tensor_numel(t);
    float *mine = w->slots[0].data, *all = ddpl_xmalloc((size_t)(n * pg->size + 1) * 4);
    int rc = exchange(w, mine, all, (size_t)n * 4);
    for (int64_t i = 0; rc == 0 && i < n; i++) {
        float acc = all[i];
        for (int r = 1; r < pg->size; r++) {
            float x = all[(int64_t)r * n + i];
            acc = op == DDPL_REDUCE_MAX       ? (x > acc ? x : acc)
                  : op == DDPL_REDUCE_MIN     ? (x < acc ? x : acc)
                  : op == DDPL_REDUCE_PRODUCT ? acc * x
                                              : acc + x;
        }
        mine[i] = op == DDPL_REDUCE_AVG ? acc / (float)pg->size : acc;
    }
    free(all);
    return complete(w, rc);
}

static ddpl_work *store_broadcast(ddpl_pg *pg, ddpl_tensor *t, int src)
{
    ddpl_work *w = pg_work_new(pg, "broadcast", 1);
    pg_work_slot(w, 0, t, true, src != pg->rank);
    size_t nbytes = ddpl_tensor_nbytes(t);
    char *all = ddpl_xmalloc(nbytes * (size_t)pg->size + 1);
    int rc = exchange(w, w->slots[0].data, all, nbytes);
    if (rc == 0) memcpy(w->slots[0].data, all + (size_t)src * nbytes, nbytes);
    free(all);
    return complete(w, rc);
}

static ddpl_work *store_allgather_into(ddpl_pg *pg, ddpl_tensor *out, ddpl_tensor *t)
{
    ddpl_work *w = pg_work_new(pg, "all_gather_into_tensor", 2);
    pg_work_slot(w, 0, out, false, true);
    pg_work_slot(w, 1, t, true, false);
    return complete(w, exchange(w, w->slots[1].data, w->slots[0].data, ddpl_tensor_nbytes(t)));
}

static ddpl_work *store_barrier(ddpl_pg *pg)
{
    ddpl_work *w = pg_work_new(pg, "barrier", 0);
    char one = 1, *all = ddpl_xmalloc((size_t)pg->size);
    int rc = exchange(w, &one, all, 1);
    free(all);
    return complete(w, rc);
}

static const struct ddpl_pg_backend store_backend = {
    .name = "store",
    .device_type = DDPL_CPU,
    .connect = store_connect,
    .free = store_free,
    .work_size = sizeof(store_work),
    .check_tensor = store_check_tensor,
    .allreduce = store_allreduce,
    .broadcast = store_broadcast,
    .allgather_into = store_allgather_into,
    .barrier = store_barrier,
};

/* ------------------------------------------------------------------------ the ranks ---- */
static ddpl_pg *store_group_join(int rank, int port)
{
    ddpl_pg_config cfg = {.backend = "store",
                          .master_addr = "127.0.0.1",
                          .master_port = port,
                          .rank = rank,
                          .world_size = 2,
                          .timeout_s = 20};
    ddpl_pg *pg = ddpl_pg_create(&cfg);
    CHECK(pg != NULL);
    return pg;
}

static int wait_ok(ddpl_work *w)
{
    int rc = w ? ddpl_work_wait(w, -1) : -1;
    ddpl_work_release(w);
    return rc;
}

static int ops_main(int rank, int port)
{
    ddpl_pg *pg = store_group_join(rank, port);
    if (!pg) return check_finish();
    CHECK(strcmp(ddpl_pg_backend(pg), "store") == 0);
    CHECK(ddpl_pg_device_type(pg) == DDPL_CPU);
    CHECK(ddpl_pg_rank(pg) == rank && ddpl_pg_size(pg) == 2);

    /* all_reduce: sum, then the work handle as a caller sees it */
    int64_t n = 5;
    ddpl_tensor *t = ddpl_full(1, &n, (double)(rank + 1), DDPL_FLOAT32, ddpl_cpu());
    ddpl_work *w = ddpl_pg_allreduce(pg, t, DDPL_REDUCE_SUM);
    CHECK(w && ddpl_work_is_completed(w) && ddpl_work_error(w) == NULL);
    CHECK(w && strcmp(ddpl_work_name(w), "all_reduce") == 0);
    CHECK(wait_ok(w) == 0);
    CHECK(((float *)ddpl_data_ptr(t))[4] == 3.0f);
    CHECK(wait_ok(ddpl_pg_allreduce(pg, t, DDPL_REDUCE_AVG)) == 0);
    CHECK(((float *)ddpl_data_ptr(t))[0] == 3.0f);

    /* max over a non-contiguous view: staged, and written back to the view only */
    int64_t sizes[2] = {3, 2};
    ddpl_tensor *m = ddpl_zeros(2, sizes, DDPL_FLOAT32, ddpl_cpu());
    float *md = (float *)ddpl_data_ptr(m);
    for (int i = 0; i < 6; i++) md[i] = (float)(rank == 0 ? i : 10 - i);
    int64_t col_sizes[1] = {3}, col_strides[1] = {2};
    ddpl_tensor *col = ddpl_tensor_alias(m, 1, col_sizes, col_strides, 1); /* column 1 */
    CHECK(wait_ok(ddpl_pg_allreduce(pg, col, DDPL_REDUCE_MAX)) == 0);
    /* column 1 holds i = 1, 3, 5: rank 0 has 1, 3, 5 and rank 1 has 9, 7, 5 */
    CHECK(md[1] == 9.0f && md[3] == 7.0f && md[5] == 5.0f);
    CHECK(md[0] == (float)(rank == 0 ? 0 : 10)); /* column 0 untouched */

    /* broadcast from rank 1, all_gather_into_tensor, barrier */
    ddpl_tensor *b = ddpl_full(1, &n, (double)(10 * rank + 7), DDPL_FLOAT32, ddpl_cpu());
    CHECK(wait_ok(ddpl_pg_broadcast(pg, b, 1)) == 0);
    CHECK(((float *)ddpl_data_ptr(b))[2] == 17.0f);
    int64_t two_n = 2 * n;
    ddpl_tensor *g = ddpl_zeros(1, &two_n, DDPL_FLOAT32, ddpl_cpu());
    ddpl_tensor *mine = ddpl_full(1, &n, (double)rank, DDPL_FLOAT32, ddpl_cpu());
    CHECK(wait_ok(ddpl_pg_allgather_into(pg, g, mine)) == 0);
    CHECK(((float *)ddpl_data_ptr(g))[0] == 0.0f && ((float *)ddpl_data_ptr(g))[9] == 1.0f);
    CHECK(wait_ok(ddpl_pg_barrier(pg)) == 0);
    CHECK(group_of(pg)->ops == 6); /* its own state: every operation went through this backend */

    /* what the table lacks is named, never called; and its own argument checks apply */
    CHECK(ddpl_pg_reduce_scatter(pg, mine, g, DDPL_REDUCE_SUM) == NULL);
    CHECK(strcmp(ddpl_last_error(), "reduce_scatter_tensor: not supported by backend store") == 0);
    CHECK(ddpl_pg_send(pg, t, 1 - rank) == NULL);
    CHECK(strcmp(ddpl_last_error(), "send: not supported by backend store") == 0);
    ddpl_tensor *i64 = ddpl_zeros(1, &n, DDPL_INT64, ddpl_cpu());
    CHECK(ddpl_pg_allreduce(pg, i64, DDPL_REDUCE_SUM) == NULL);
    CHECK(strstr(ddpl_last_error(), "backend store reduces float32 only, got int64") != NULL);
    CHECK(wait_ok(ddpl_pg_barrier(pg)) == 0); /* and the group goes on */

    ddpl_pg_free(pg);
    ddpl_tensor_release(t);
    ddpl_tensor_release(col);
    ddpl_tensor_release(m);
    ddpl_tensor_release(b);
    ddpl_tensor_release(g);
    ddpl_tensor_release(mine);
    ddpl_tensor_release(i64);
    return check_finish();
}

/* Under DETAIL a backend without an in-band check has each collective compared through the
 * store at issue (distributed/pg_agree.c): the mismatch fails on both ranks naming both calls. */
static int detail_main(int rank, int port)
{
    setenv("DDPLUA_DISTRIBUTED_DEBUG", "DETAIL", 1); /* read once, at this rank's first call */
    ddpl_pg *pg = store_group_join(rank, port);
    if (!pg) return check_finish();
    int64_t n = 4, m = rank == 0 ? 4 : 3;
    ddpl_tensor *t = ddpl_ones(1, &n, DDPL_FLOAT32, ddpl_cpu());
    ddpl_tensor *u = ddpl_ones(1, &m, DDPL_FLOAT32, ddpl_cpu());
    CHECK(wait_ok(ddpl_pg_allreduce(pg, t, DDPL_REDUCE_SUM)) == 0);
    CHECK(ddpl_pg_allreduce(pg, u, DDPL_REDUCE_SUM) == NULL);
    CHECK(strcmp(ddpl_last_error(), "all_reduce: collective #2 of group 0 differs across ranks: "
                                    "rank 0 called all_reduce(float32, 4 elements, op sum), "
                                    "rank 1 called all_reduce(float32, 3 elements, op sum)") == 0);
    CHECK(ddpl_pg_barrier(pg) == NULL);
    CHECK(strstr(ddpl_last_error(), "the process group is unusable after an earlier failure") !=
          NULL);
    CHECK(group_of(pg)->ops == 1); /* the mismatched call never reached the backend */
    ddpl_pg_free(pg);
    ddpl_tensor_release(t);
    ddpl_tensor_release(u);
    return check_finish();
}

static void check_registration(void)
{
    CHECK(pg_backend_add(&store_backend) == 0);
    CHECK(ddpl_pg_backend_check("store") == 0);
    CHECK(pg_backend_add(&store_backend) < 0);
    CHECK(strstr(ddpl_last_error(), "a backend named 'store' exists already") != NULL);
    CHECK(pg_backend_add(&pg_host_backend) < 0); /* gloo is built in */
    CHECK(strstr(ddpl_last_error(), "a backend named 'gloo' exists already") != NULL);
    static const struct ddpl_pg_backend incomplete = {.name = "half"};
    CHECK(pg_backend_add(&incomplete) < 0);
    CHECK(strstr(ddpl_last_error(), "needs a name, connect, free and check_tensor") != NULL);
    CHECK(ddpl_pg_backend_check("half") < 0);
}

int main(void)
{
    check_registration();
    int failed = check_finish();
    fflush(stdout); /* not again from the forked ranks */
    if (failed) return 1;
    failed = run_two_ranks("0", ops_main, 60) | run_two_ranks("0", detail_main, 60);
    printf("test_pg_backend: %s\n", failed ? "FAILED" : "ok");
    return failed;
}
