/* spec/c/test_reducer.c: the DDP reducer's C interface (engine/distributed/reducer.h) on two forked
 * ranks, without Lua: loss = sum(w1 * c_r) + sum(w2 * d_r), so each rank's gradients are its own
 * constants and the reduced ones must be their average; a tiny bucket cap puts each parameter in
 * its own bucket, in reverse registration order; gradient_as_bucket_view makes .grad share the
 * bucket's storage; the first finished iteration rebuilds the buckets (ready order, w2 first);
 * an iteration that leaves w2 without gradient makes the next prepare_forward fail naming it.
 * defines: main. */
#include <stdio.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "check.h"
#include "net_util.h"
#include "core/core.h"
#include "distributed/reducer.h"

static float at(ddpl_tensor *t, int64_t i)
{
    return ((float *)ddpl_tensor_data(t))[i];
}

/* loss = sum(w1 * c) (+ sum(w2 * d) when use_w2), then backward */
static int step(ddpl_reducer *r, ddpl_tensor *w1, ddpl_tensor *w2, ddpl_tensor *c, ddpl_tensor *d,
                bool use_w2)
{
    if (ddpl_reducer_prepare_forward(r) < 0) return -1;
    ddpl_tensor *a = ddpl_mul(w1, c), *sa = ddpl_sum(a), *loss = sa;
    ddpl_tensor *b = NULL, *sb = NULL;
    if (use_w2) {
        b = ddpl_mul(w2, d);
        sb = ddpl_sum(b);
        loss = ddpl_add(sa, sb);
    }
    int rc = ddpl_reducer_prepare_backward(r, 1, &loss, true);
    if (rc == 0) rc = ddpl_backward(loss, NULL, false);
    if (loss != sa) ddpl_tensor_release(loss);
    ddpl_tensor_release(a);
    ddpl_tensor_release(sa);
    ddpl_tensor_release(b);
    ddpl_tensor_release(sb);
    return rc;
}

static int rank_main(int rank, int port, bool view)
{
    ddpl_pg *pg = join_group(rank, port, 10.0);
    if (!pg) return check_finish();
    int64_t s1[2] = {4, 3}, s2[1] = {3};
    ddpl_tensor *w1 = ddpl_zeros(2, s1, DDPL_FLOAT32, ddpl_cpu());
    ddpl_tensor *w2 = ddpl_zeros(1, s2, DDPL_FLOAT32, ddpl_cpu());
    ddpl_tensor_set_requires_grad(w1, true);
    ddpl_tensor_set_requires_grad(w2, true);
    /* c_r = r*100 + i, d_r = 7 - r: averages i + 50 and 6.5 */
    ddpl_tensor *c = ddpl_arange(100.0 * rank, 100.0 * rank + 12, 1, DDPL_FLOAT32, ddpl_cpu());
    ddpl_tensor *c2 = ddpl_view(c, 2, s1);
    ddpl_tensor *d = ddpl_full(1, s2, 7.0 - rank, DDPL_FLOAT32, ddpl_cpu());
    ddpl_tensor *params[2] = {w1, w2};
    const char *names[2] = {"w1", "w2"};
    ddpl_reducer_config rc = {.bucket_cap_mb = 1e-6, .grad_as_bucket_view = view};
    ddpl_reducer *r = ddpl_reducer_new(pg, 2, params, names, &rc);
    CHECK(r != NULL);
    if (!r) return check_finish();

    CHECK(ddpl_reducer_num_buckets(r) == 2);
    int idx[2] = {-1, -1};
    CHECK(ddpl_reducer_bucket_params(r, 0, idx, 2) == 1 && idx[0] == 1); /* reverse order */
    CHECK(ddpl_reducer_bucket_bytes(r, 1) == 12 * 4);

    for (int it = 0; it < 2; it++) {
        ddpl_tensor_set_grad(w1, NULL);
        ddpl_tensor_set_grad(w2, NULL);
        CHECK(step(r, w1, w2, c2, d, true) == 0);
        ddpl_tensor *g1 = ddpl_tensor_grad(w1), *g2 = ddpl_tensor_grad(w2);
        CHECK(g1 && g2);
        if (!g1 || !g2) break;
        for (int i = 0; i < 12; i++) CHECK_CLOSE(at(g1, i), i + 50.0, 0);
        for (int i = 0; i < 3; i++) CHECK_CLOSE(at(g2, i), 6.5, 0);
        if (view) { /* each gradient lives in one of the two buckets */
            ddpl_storage *s0 = ddpl_reducer_bucket_tensor(r, 0)->storage;
            ddpl_storage *s1b = ddpl_reducer_bucket_tensor(r, 1)->storage;
            CHECK((g1->storage == s0 || g1->storage == s1b) &&
                  (g2->storage == s0 || g2->storage == s1b) && g1->storage != g2->storage);
        }
    }
    CHECK(ddpl_reducer_rebuilt(r));

    /* w2 gets no gradient: the next forward reports it */
    CHECK(step(r, w1, w2, c2, d, false) == 0);
    CHECK(ddpl_reducer_prepare_forward(r) == -1);
    CHECK(strstr(ddpl_last_error(), "Parameters which did not receive grad for rank") != NULL);
    CHECK(strstr(ddpl_last_error(), ": w2") != NULL);

    ddpl_reducer_free(r);
    ddpl_tensor_release(w1);
    ddpl_tensor_release(w2);
    ddpl_tensor_release(c);
    ddpl_tensor_release(c2);
    ddpl_tensor_release(d);
    ddpl_pg_free(pg);
    return check_finish();
}

/* rank_main of both ranks (net_util.h's run_two_ranks), with and without bucket views */
static int rank_plain(int rank, int port)
{
    return rank_main(rank, port, false);
}

static int rank_view(int rank, int port)
{
    return rank_main(rank, port, true);
}

static int run_job(bool view)
{
    int failed = run_two_ranks("1", view ? rank_view : rank_plain, 60);
    if (failed) fprintf(stderr, "test_reducer: view=%d failed\n", view);
    return failed;
}

int main(void)
{
    int failed = run_job(false) | run_job(true);
    printf("test_reducer: %s\n", failed ? "FAILED" : "ok");
    return failed;
}
