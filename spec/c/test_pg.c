/* spec/c/test_pg.c: the process-group C interface (engine/distributed/pg.h) as the DDP reducer uses
 * it: two forked ranks on loopback run async allreduce (avg of float32; max of a non-contiguous
 * int64 view), broadcast and barrier; argument errors come back as NULL with a message; and when
 * one rank goes away, the other's collective fails within the timeout (no hang) and every later
 * one fails at once, naming the earlier failure. Both allreduce paths run: shared memory (the
 * default for ranks on one machine) and Gloo (DDPLUA_SHM=0). Shared buffers (the reducer's
 * buckets) reduce in place with the prescaled sum's exact rounding, in part or whole; ranks that
 * disagree on what they reduce get an error; a rank without room for its part makes every rank
 * fall back to ordinary memory; a waiter may run queued work itself, and the order
 * of the work is kept. A collective the group's backend table lacks is refused by name. A backend
 * without an in-band check (agree: nccl's case) has its calls checked through the store under
 * DDPLUA_DISTRIBUTED_DEBUG=DETAIL: matching calls go through (more than two, so the store's old
 * keys are deleted), a mismatch fails at issue on both ranks naming both calls, and the group is
 * unusable after it.
 * defines: main. */
#include <signal.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "check.h"
#include "net_util.h"
#include "core/core.h"
#include "distributed/pg.h"
#include "distributed/pg_impl.h" /* the backend table, to take an entry out of it */

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static double at(ddpl_tensor *t, int64_t i)
{
    return ddpl_load_f64(ddpl_data_ptr(t) + i * (int64_t)ddpl_dtype_size(t->dtype), t->dtype);
}

/* (float)(a * f) + (float)(b * f), each product rounded on its own, as pre-dividing each rank's
 * values and then summing them does */
static float prescaled_sum(float a, float b, float f)
{
    volatile float pa = a * f, pb = b * f; /* no fused multiply-add */
    return pa + pb;
}

/* rank r's value at i, rounded once (no fused multiply-add either) */
static float value_at(int64_t i, int rank)
{
    volatile float p = 0.1f * (float)i;
    return p + (float)rank;
}

/* ddpl_pg_shared_zeros + ddpl_pg_allreduce_prescaled: in place through shared memory (or an
 * ordinary tensor and Gloo, with DDPLUA_SHM=0), the same values either way. */
static void check_shared_buffers(ddpl_pg *pg, int rank)
{
    int64_t n = 3001; /* not a multiple of a cache line of floats: an uneven split */
    int64_t before = ddpl_memory_allocated(DDPL_CPU);
    ddpl_tensor *s = ddpl_pg_shared_zeros(pg, n, DDPL_FLOAT32);
    CHECK(s != NULL && s->dtype == DDPL_FLOAT32 && ddpl_tensor_numel(s) == n);
    if (!s) return;
    CHECK(ddpl_memory_allocated(DDPL_CPU) - before >= n * 4); /* counted like any storage */
    float *d = (float *)ddpl_data_ptr(s);
    bool zero = true;
    for (int64_t i = 0; i < n; i++) zero = zero && d[i] == 0.0f;
    CHECK(zero);
    /* a third: not a power of two, so pre-dividing and dividing the sum round differently */
    float third = (float)(1.0 / 3.0);
    for (int64_t i = 0; i < n; i++) d[i] = value_at(i, rank);
    ddpl_work *w = ddpl_pg_allreduce_prescaled(pg, s, 1.0 / 3.0);
    CHECK(w && ddpl_work_wait(w, -1) == 0);
    ddpl_work_release(w);
    bool exact = true;
    for (int64_t i = 0; i < n; i++)
        exact = exact && d[i] == prescaled_sum(value_at(i, 0), value_at(i, 1), third);
    CHECK(exact);

    /* a part of it: only that part changes */
    for (int64_t i = 0; i < n; i++) d[i] = (float)(rank + 1);
    ddpl_tensor *part = ddpl_narrow(s, 0, 100, 1000);
    w = ddpl_pg_allreduce(pg, part, DDPL_REDUCE_SUM);
    CHECK(w && ddpl_work_wait(w, -1) == 0);
    ddpl_work_release(w);
    CHECK(d[99] == (float)(rank + 1) && d[100] == 3.0f && d[1099] == 3.0f &&
          d[1100] == (float)(rank + 1));

    /* values kept outside the buffer (the DDP reducer's gradients): elements [10, 1010) and
     * [1500, 3001) live in two tensors of this rank, the rest (a gap, and the head) in the
     * buffer; results land where the values are */
    CHECK(ddpl_pg_is_shared(pg, s) == (getenv("DDPLUA_SHM")[0] == '1'));
    if (ddpl_pg_is_shared(pg, s)) {
        int64_t n1 = 1000, n2 = n - 1500;
        ddpl_tensor *v1 = ddpl_empty(1, &n1, DDPL_FLOAT32, ddpl_cpu());
        ddpl_tensor *v2 = ddpl_empty(1, &n2, DDPL_FLOAT32, ddpl_cpu());
        float *a = (float *)ddpl_data_ptr(v1), *c = (float *)ddpl_data_ptr(v2);
        for (int64_t i = 0; i < n; i++) {
            float x = value_at(i, rank);
            if (i >= 10 && i < 1010)
                a[i - 10] = x;
            else if (i >= 1500)
                c[i - 1500] = x;
            else
                d[i] = x;
        }
        ddpl_tensor *vals[2] = {v1, v2};
        int64_t offs[2] = {10, 1500};
        w = ddpl_pg_allreduce_prescaled_into(pg, s, 1.0 / 3.0, 2, vals, offs);
        CHECK(w && ddpl_work_wait(w, -1) == 0);
        ddpl_work_release(w);
        exact = true;
        for (int64_t i = 0; i < n; i++) {
            float got = i >= 10 && i < 1010 ? a[i - 10] : i >= 1500 ? c[i - 1500] : d[i];
            exact = exact && got == prescaled_sum(value_at(i, 0), value_at(i, 1), third);
        }
        CHECK(exact);
        /* out of order, overlapping the buffer, or past its end: refused when issued */
        int64_t back[2] = {1500, 10}, past[2] = {10, 1501};
        CHECK(ddpl_pg_allreduce_prescaled_into(pg, s, 0.5, 2, vals, back) == NULL);
        CHECK(strstr(ddpl_last_error(), "value tensor 1 must be a contiguous CPU float32") != NULL);
        CHECK(ddpl_pg_allreduce_prescaled_into(pg, s, 0.5, 2, vals, past) == NULL);
        ddpl_tensor *inside[1] = {part};
        CHECK(ddpl_pg_allreduce_prescaled_into(pg, s, 0.5, 1, inside, offs) == NULL);
        ddpl_tensor_release(v1);
        ddpl_tensor_release(v2);
    } else {
        CHECK(ddpl_pg_allreduce_prescaled_into(pg, s, 0.5, 0, NULL, NULL) == NULL);
        CHECK(strstr(ddpl_last_error(), "not a shared buffer") != NULL);
    }

    /* max: no fused 2-rank kernel, the blocked path for any number of ranks */
    for (int64_t i = 0; i < n; i++) d[i] = (float)(i % 7 == rank ? 100 + i : -i);
    w = ddpl_pg_allreduce(pg, s, DDPL_REDUCE_MAX);
    CHECK(w && ddpl_work_wait(w, -1) == 0);
    ddpl_work_release(w);
    exact = true;
    for (int64_t i = 0; i < n; i++)
        exact = exact && d[i] == (float)(i % 7 == 0 || i % 7 == 1 ? 100 + i : -i);
    CHECK(exact);

    /* a second buffer, float64: separate memory, reduced independently */
    ddpl_tensor *s2 = ddpl_pg_shared_zeros(pg, 5, DDPL_FLOAT64);
    CHECK(s2 && ddpl_data_ptr(s2) != ddpl_data_ptr(s));
    if (s2) {
        double *e = (double *)ddpl_data_ptr(s2);
        for (int i = 0; i < 5; i++) e[i] = rank ? 3.0 : 1.0;
        w = ddpl_pg_allreduce_prescaled(pg, s2, 0.5);
        CHECK(w && ddpl_work_wait(w, -1) == 0);
        ddpl_work_release(w);
        CHECK(e[0] == 2.0 && e[4] == 2.0);
    }
    /* the prescaled sum takes floating dtypes only */
    ddpl_tensor *i64 = ddpl_zeros(1, &n, DDPL_INT64, ddpl_cpu());
    CHECK(ddpl_pg_allreduce_prescaled(pg, i64, 0.5) == NULL);
    CHECK(strstr(ddpl_last_error(), "needs float32 or float64, got int64") != NULL);
    ddpl_tensor_release(i64);
    ddpl_tensor_release(part);
    ddpl_tensor_release(s2);
    ddpl_tensor_release(s);
    CHECK(ddpl_memory_allocated(DDPL_CPU) == before);
}

/* Waiting runs queued work on the waiting thread when the group's thread is idle; work still
 * completes in issue order, whichever handle is waited for first, and work queued with
 * ddpl_pg_wait_follows is run when it is only polled. */
static void check_wait_runs_queued_work(ddpl_pg *pg, int rank)
{
    int64_t n = 64;
    ddpl_tensor *t[3];
    ddpl_work *w[3];
    for (int k = 0; k < 3; k++) {
        t[k] = ddpl_full(1, &n, (double)(rank + 1) * (k + 1), DDPL_FLOAT64, ddpl_cpu());
        w[k] = ddpl_pg_allreduce(pg, t[k], DDPL_REDUCE_SUM);
        CHECK(w[k] != NULL);
    }
    for (int k = 2; k >= 0; k--) CHECK(w[k] && ddpl_work_wait(w[k], -1) == 0);
    for (int k = 0; k < 3; k++) {
        CHECK(at(t[k], 0) == 3.0 * (k + 1) && at(t[k], n - 1) == 3.0 * (k + 1));
        ddpl_work_release(w[k]);
    }
    ddpl_pg_wait_follows(pg);
    ddpl_work *q = ddpl_pg_allreduce(pg, t[0], DDPL_REDUCE_SUM);
    CHECK(q != NULL);
    double t0 = now_s();
    while (q && !ddpl_work_is_completed(q) && now_s() - t0 < 20.0) usleep(1000);
    CHECK(q && ddpl_work_is_completed(q) && ddpl_work_error(q) == NULL);
    CHECK(at(t[0], 0) == 6.0);
    ddpl_work_release(q);
    /* ... and when waited for with a timeout shorter than the group's (not run by the waiter) */
    ddpl_pg_wait_follows(pg);
    q = ddpl_pg_allreduce(pg, t[0], DDPL_REDUCE_SUM);
    CHECK(q && ddpl_work_wait(q, 2.0) == 0);
    CHECK(at(t[0], 0) == 12.0);
    ddpl_work_release(q);
    for (int k = 0; k < 3; k++) ddpl_tensor_release(t[k]);
}

static int rank_main(int rank, int port)
{
    ddpl_pg *pg = join_group(rank, port, 3.0);
    if (!pg) return check_finish();
    CHECK(ddpl_pg_rank(pg) == rank && ddpl_pg_size(pg) == 2);

    /* avg of float32: rank r holds i + 10 r, so the mean is i + 5 */
    int64_t n = 1000;
    ddpl_tensor *x =
        ddpl_arange(10.0 * rank, 10.0 * rank + (double)n, 1.0, DDPL_FLOAT32, ddpl_cpu());
    ddpl_work *w = ddpl_pg_allreduce(pg, x, DDPL_REDUCE_AVG);
    CHECK(w != NULL);
    CHECK(ddpl_work_wait(w, -1) == 0);
    CHECK(ddpl_work_is_completed(w) && ddpl_work_error(w) == NULL);
    CHECK(strcmp(ddpl_work_name(w), "all_reduce") == 0);
    ddpl_work_release(w);
    CHECK_CLOSE(at(x, 0), 5.0, 0);
    CHECK_CLOSE(at(x, n - 1), (double)(n - 1) + 5.0, 0);

    /* max over a transposed (non-contiguous) int64 view of a 2x3 block, written back in place */
    int64_t sizes[2] = {2, 3}, tsizes[2] = {3, 2}, tstrides[2] = {1, 3};
    int64_t vals[6] = {1, -5, 7, 0, 2, -3};
    for (int i = 0; i < 6; i++) vals[i] *= rank ? -1 : 1;
    ddpl_tensor *base = ddpl_from_data(2, sizes, DDPL_INT64, vals, ddpl_cpu());
    ddpl_tensor *view = ddpl_tensor_alias(base, 2, tsizes, tstrides, 0);
    CHECK(!ddpl_tensor_is_contiguous(view));
    w = ddpl_pg_allreduce(pg, view, DDPL_REDUCE_MAX);
    CHECK(w && ddpl_work_wait(w, 10.0) == 0);
    ddpl_work_release(w);
    int64_t *got = (int64_t *)ddpl_data_ptr(base);
    int64_t want[6] = {1, 5, 7, 0, 2, 3};
    for (int i = 0; i < 6; i++) CHECK(got[i] == want[i]);

    /* broadcast from rank 1 */
    ddpl_tensor *b = ddpl_full(1, &n, (double)rank + 1, DDPL_FLOAT64, ddpl_cpu());
    w = ddpl_pg_broadcast(pg, b, 1);
    CHECK(w && ddpl_work_wait(w, -1) == 0);
    ddpl_work_release(w);
    CHECK(at(b, 0) == 2.0 && at(b, n - 1) == 2.0);

    /* argument errors: NULL and a message naming the call */
    ddpl_tensor *i32 = ddpl_zeros(1, &n, DDPL_INT32, ddpl_cpu());
    CHECK(ddpl_pg_allreduce(pg, i32, DDPL_REDUCE_SUM) == NULL);
    CHECK(strstr(ddpl_last_error(),
                 "all_reduce: expected a CPU tensor of float32/float64/int64, got int32") != NULL);
    CHECK(ddpl_pg_broadcast(pg, b, 2) == NULL);
    CHECK(strstr(ddpl_last_error(), "broadcast: src rank 2 is out of range") != NULL);

    w = ddpl_pg_barrier(pg);
    CHECK(w && ddpl_work_wait(w, -1) == 0);
    ddpl_work_release(w);

    check_shared_buffers(pg, rank);
    check_wait_runs_queued_work(pg, rank);

    /* rank 1 leaves; rank 0's next collective fails (reset or timeout), not hangs */
    if (rank == 0) {
        sleep(1);
        w = ddpl_pg_allreduce(pg, x, DDPL_REDUCE_SUM);
        CHECK(w != NULL);
        CHECK(ddpl_work_wait(w, 20.0) < 0);
        CHECK(strncmp(ddpl_last_error(), "all_reduce: ", 12) == 0);
        ddpl_work_release(w);
        w = ddpl_pg_barrier(pg);
        CHECK(w && ddpl_work_wait(w, 5.0) < 0);
        CHECK(strstr(ddpl_last_error(), "barrier: the process group is unusable") != NULL);
        ddpl_work_release(w);
    }
    ddpl_pg_free(pg);
    ddpl_tensor_release(x);
    ddpl_tensor_release(view);
    ddpl_tensor_release(base);
    ddpl_tensor_release(b);
    ddpl_tensor_release(i32);
    return check_finish();
}

/* Ranks that disagree about what they all-reduce through shared memory (rank 0 a shared
 * buffer, rank 1 an ordinary tensor of the same size) both get an error naming both sides, not
 * a sum of unrelated memory. */
static int mismatch_main(int rank, int port)
{
    ddpl_pg *pg = join_group(rank, port, 3.0);
    if (!pg) return check_finish();
    int64_t n = 100;
    ddpl_tensor *s = ddpl_pg_shared_zeros(pg, n, DDPL_FLOAT32);
    ddpl_tensor *plain = ddpl_zeros(1, &n, DDPL_FLOAT32, ddpl_cpu());
    ddpl_work *w = ddpl_pg_allreduce(pg, rank == 0 ? s : plain, DDPL_REDUCE_SUM);
    CHECK(w && ddpl_work_wait(w, -1) < 0);
    const char *e = ddpl_last_error();
    CHECK(strstr(e, "the ranks issued different collectives") != NULL);
    CHECK(strstr(e, "100 elements at byte 0 of shared buffer 1") != NULL);
    CHECK(strstr(e, "100 elements of a tensor") != NULL);
    ddpl_work_release(w);
    ddpl_pg_free(pg);
    ddpl_tensor_release(s);
    ddpl_tensor_release(plain);
    return check_finish();
}

/* DETAIL on a backend table that does not agree in band: pg_expect compares through the store
 * at issue, before the lane's own check. */
static int store_agree_main(int rank, int port)
{
    ddpl_pg *pg = join_group(rank, port, 10.0);
    if (!pg) return check_finish();
    const struct ddpl_pg_backend *full = pg->backend;
    struct ddpl_pg_backend no_agree = *full;
    no_agree.agrees_in_band = false;
    pg->backend = &no_agree;
    int64_t n = 8;
    ddpl_tensor *f32 = ddpl_ones(1, &n, DDPL_FLOAT32, ddpl_cpu());
    ddpl_tensor *f64 = ddpl_ones(1, &n, DDPL_FLOAT64, ddpl_cpu());
    for (int i = 0; i < 4; i++) {
        ddpl_work *w = ddpl_pg_allreduce(pg, f32, DDPL_REDUCE_SUM);
        CHECK(w && ddpl_work_wait(w, -1) == 0);
        ddpl_work_release(w);
    }
    CHECK(((float *)ddpl_data_ptr(f32))[0] == 16.0f);
    CHECK(ddpl_pg_allreduce(pg, rank == 1 ? f64 : f32, DDPL_REDUCE_SUM) == NULL);
    CHECK(strcmp(ddpl_last_error(), "all_reduce: collective #5 of group 0 differs across ranks: "
                                    "rank 0 called all_reduce(float32, 8 elements, op sum), "
                                    "rank 1 called all_reduce(float64, 8 elements, op sum)") == 0);
    CHECK(ddpl_pg_barrier(pg) == NULL);
    CHECK(strstr(ddpl_last_error(), "barrier: the process group is unusable after an earlier "
                                    "failure (all_reduce: collective #5") != NULL);
    pg->backend = full;
    ddpl_pg_free(pg);
    ddpl_tensor_release(f32);
    ddpl_tensor_release(f64);
    return check_finish();
}

/* When one rank cannot get its part (no room in /dev/shm: a file size limit stands in for a
 * full tmpfs here), every rank gets an ordinary tensor instead, and reducing it still works. */
static int nospace_main(int rank, int port)
{
    ddpl_pg *pg = join_group(rank, port, 3.0);
    if (!pg) return check_finish();
    int64_t n = 1 << 20; /* 4 MB */
    ddpl_tensor *small = ddpl_pg_shared_zeros(pg, 16, DDPL_FLOAT32);
    CHECK(small && small->storage->deleter != NULL); /* shared, while there is room */
    if (rank == 1) {
        signal(SIGXFSZ, SIG_IGN); /* EFBIG instead of a signal */
        struct rlimit lim = {1 << 20, 1 << 20};
        CHECK(setrlimit(RLIMIT_FSIZE, &lim) == 0);
    }
    ddpl_tensor *big = ddpl_pg_shared_zeros(pg, n, DDPL_FLOAT32);
    CHECK(big && big->storage->deleter == NULL); /* ordinary memory, on both ranks */
    if (big) {
        ((float *)ddpl_data_ptr(big))[n - 1] = (float)(rank + 1);
        ddpl_work *w = ddpl_pg_allreduce_prescaled(pg, big, 0.5);
        CHECK(w && ddpl_work_wait(w, -1) == 0);
        ddpl_work_release(w);
        CHECK(((float *)ddpl_data_ptr(big))[n - 1] == 1.5f);
    }
    ddpl_pg_free(pg);
    ddpl_tensor_release(small);
    ddpl_tensor_release(big);
    return check_finish();
}

/* Runs both ranks of job once with DDPLUA_SHM=shm (shared memory or Gloo's TCP for
 * allreduce). */
static int run_job(const char *shm, int (*job)(int rank, int port))
{
    return run_two_ranks(shm, job, 60);
}

/* A one-rank group whose backend table lacks reduce_scatter: the call fails with the operation
 * and the backend named, and the group goes on working. */
static void check_missing_entry(void)
{
    ddpl_pg *pg = one_rank_group(29300);
    if (!pg) return;
    const struct ddpl_pg_backend *full = pg->backend;
    struct ddpl_pg_backend partial = *full;
    partial.reduce_scatter = NULL;
    pg->backend = &partial;
    int64_t n = 4;
    ddpl_tensor *in = ddpl_ones(1, &n, DDPL_FLOAT32, ddpl_cpu());
    ddpl_tensor *out = ddpl_zeros(1, &n, DDPL_FLOAT32, ddpl_cpu());
    CHECK(ddpl_pg_reduce_scatter(pg, out, in, DDPL_REDUCE_SUM) == NULL);
    CHECK(strcmp(ddpl_last_error(), "reduce_scatter_tensor: not supported by backend gloo") == 0);
    ddpl_work *w = ddpl_pg_allreduce(pg, in, DDPL_REDUCE_SUM);
    CHECK(w && ddpl_work_wait(w, -1) == 0);
    ddpl_work_release(w);
    pg->backend = full;
    ddpl_tensor_release(in);
    ddpl_tensor_release(out);
    ddpl_pg_free(pg);
}

int main(void)
{
    /* first: the debug level is read once per process, and the ranks are forked from this one */
    setenv("DDPLUA_DISTRIBUTED_DEBUG", "DETAIL", 1);
    int detail_failed = run_job("0", store_agree_main);
    unsetenv("DDPLUA_DISTRIBUTED_DEBUG");
    if (detail_failed) fprintf(stderr, "test_pg: the DETAIL check through the store failed\n");
    check_missing_entry();
    int missing_failed = check_finish();
    fflush(stdout); /* not again from the forked ranks */
    if (missing_failed) return 1;
    int failed = detail_failed | run_job("1", rank_main) | run_job("0", rank_main) |
                 run_job("1", mismatch_main) | run_job("1", nospace_main);
    printf("test_pg: %s\n", failed ? "FAILED" : "ok");
    return failed;
}
