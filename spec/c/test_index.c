/* spec/c/test_index.c: cat, stack, index_select, gather and topk against hand-computed values
 * and naive loops, float64 gradient checks, and error messages for bad indices and shapes. */
#include "ref_util.h"

static ddpl_tensor *idx(int n, const int64_t *v)
{
    return ddpl_from_data(1, (int64_t[]){n}, DDPL_INT64, v, ddpl_cpu());
}

/* ---- cat / stack ---- */
static void test_cat_stack(void)
{
    ddpl_tensor *a = t_from(2, (int64_t[]){2, 2}, (double[]){1, 2, 3, 4}, DDPL_FLOAT32);
    ddpl_tensor *b = t_from(2, (int64_t[]){1, 2}, (double[]){5, 6}, DDPL_FLOAT32);
    ddpl_tensor *c = t_from(2, (int64_t[]){2, 1}, (double[]){7, 8}, DDPL_INT64);
    ddpl_tensor *r0 = ddpl_cat(2, (ddpl_tensor *[]){a, b}, 0);
    CHECK(r0 && ddpl_tensor_size(r0, 0) == 3);
    CHECK_VALUES(r0, ((double[]){1, 2, 3, 4, 5, 6}), 0);
    /* int64 joins float32: the result is promoted to float32 */
    ddpl_tensor *r1 = ddpl_cat(2, (ddpl_tensor *[]){a, c}, -1);
    CHECK(r1 && ddpl_tensor_dtype(r1) == DDPL_FLOAT32 && ddpl_tensor_size(r1, 1) == 3);
    CHECK_VALUES(r1, ((double[]){1, 2, 7, 3, 4, 8}), 0);
    /* a 1-D empty tensor is skipped, as PyTorch does */
    ddpl_tensor *e = ddpl_empty(1, (int64_t[]){0}, DDPL_FLOAT32, ddpl_cpu());
    ddpl_tensor *r2 = ddpl_cat(3, (ddpl_tensor *[]){e, a, b}, 0);
    CHECK_VALUES(r2, ((double[]){1, 2, 3, 4, 5, 6}), 0);
    /* a non-contiguous input */
    ddpl_tensor *at = ddpl_t(a);
    ddpl_tensor *r3 = ddpl_cat(2, (ddpl_tensor *[]){at, b}, 0);
    CHECK_VALUES(r3, ((double[]){1, 3, 2, 4, 5, 6}), 0);

    ddpl_tensor *s0 = ddpl_stack(2, (ddpl_tensor *[]){a, at}, 0);
    CHECK(s0 && ddpl_tensor_ndim(s0) == 3 && ddpl_tensor_size(s0, 0) == 2);
    CHECK_VALUES(s0, ((double[]){1, 2, 3, 4, 1, 3, 2, 4}), 0);
    ddpl_tensor *s2 = ddpl_stack(2, (ddpl_tensor *[]){a, at}, -1);
    CHECK(s2 && ddpl_tensor_size(s2, 2) == 2);
    CHECK_VALUES(s2, ((double[]){1, 1, 2, 3, 3, 2, 4, 4}), 0);

    ddpl_tensor *sc = ddpl_scalar(1, DDPL_FLOAT32, ddpl_cpu());
    CHECK_ERROR(ddpl_cat(2, (ddpl_tensor *[]){a, b}, 1) == NULL, "cat:", "dimension 1");
    CHECK_ERROR(ddpl_cat(2, (ddpl_tensor *[]){a, sc}, 0) == NULL, "cat:", "zero-dimensional");
    CHECK_ERROR(ddpl_cat(0, NULL, 0) == NULL, "cat:", "non-empty");
    CHECK_ERROR(ddpl_cat(2, (ddpl_tensor *[]){a, b}, 2) == NULL, "cat:", "out of range");
    CHECK_ERROR(ddpl_stack(2, (ddpl_tensor *[]){a, b}, 0) == NULL, "stack:", "[1,2] at entry 1");
    RELEASE(a, b, c, r0, r1, e, r2, at, r3, s0, s2, sc);
}

/* ---- index_select ---- */
static void test_index_select(void)
{
    /* dim 0 of a contiguous float32 matrix: the data loader's row gather */
    ddpl_tensor *x = ddpl_arange(0, 12, 1, DDPL_FLOAT32, ddpl_cpu());
    ddpl_tensor *m = ddpl_view(x, 2, (int64_t[]){4, 3});
    ddpl_tensor *i = idx(3, (int64_t[]){3, 0, 3});
    ddpl_tensor *r = ddpl_index_select(m, 0, i);
    CHECK_VALUES(r, ((double[]){9, 10, 11, 0, 1, 2, 9, 10, 11}), 0);
    ddpl_tensor *r1i = idx(2, (int64_t[]){2, 0});
    ddpl_tensor *r1 = ddpl_index_select(m, -1, r1i);
    CHECK_VALUES(r1, ((double[]){2, 0, 5, 3, 8, 6, 11, 9}), 0);
    /* a transposed (strided) input takes the general path */
    ddpl_tensor *mt = ddpl_t(m);
    ddpl_tensor *r2 = ddpl_index_select(mt, 1, i);
    CHECK_VALUES(r2, ((double[]){9, 0, 9, 10, 1, 10, 11, 2, 11}), 0);
    /* a 0-dim index selects one row and keeps the dim */
    int64_t one = 2;
    ddpl_tensor *i0 = ddpl_from_data(0, NULL, DDPL_INT64, &one, ddpl_cpu());
    ddpl_tensor *r3 = ddpl_index_select(m, 0, i0);
    CHECK(r3 && ddpl_tensor_ndim(r3) == 2 && ddpl_tensor_size(r3, 0) == 1);
    CHECK_VALUES(r3, ((double[]){6, 7, 8}), 0);
    /* a large gather (threaded rows) agrees with a loop */
    int64_t n = 5000, d = 64, k = 3000;
    ddpl_tensor *big = t_rand(2, (int64_t[]){n, d}, DDPL_FLOAT32);
    ddpl_tensor *perm = ddpl_randperm(n, ddpl_cpu()), *pk = ddpl_narrow(perm, 0, 0, k);
    ddpl_tensor *got = ddpl_index_select(big, 0, pk);
    const float *bv = ddpl_tensor_data(big), *gv = got ? ddpl_tensor_data(got) : NULL;
    const int64_t *pv = ddpl_tensor_data(pk);
    int same = gv != NULL;
    for (int64_t a = 0; same && a < k; a++)
        same = memcmp(gv + a * d, bv + pv[a] * d, (size_t)d * sizeof(float)) == 0;
    CHECK(same);

    /* repeated indices accumulate in the gradient */
    ddpl_tensor *w = ddpl_ones(2, (int64_t[]){4, 3}, DDPL_FLOAT64, ddpl_cpu());
    ddpl_tensor_set_requires_grad(w, true);
    ddpl_tensor *sel = ddpl_index_select(w, 0, i), *s = ddpl_sum(sel);
    CHECK(ddpl_backward(s, NULL, false) == 0);
    CHECK_VALUES(ddpl_tensor_grad(w), ((double[]){1, 1, 1, 0, 0, 0, 0, 0, 0, 2, 2, 2}), 0);

    ddpl_tensor *bad = idx(2, (int64_t[]){1, 4}), *neg = idx(1, (int64_t[]){-1});
    ddpl_tensor *fi = ddpl_zeros(1, (int64_t[]){2}, DDPL_FLOAT32, ddpl_cpu());
    ddpl_tensor *i2 = ddpl_zeros(2, (int64_t[]){1, 2}, DDPL_INT64, ddpl_cpu());
    CHECK_ERROR(ddpl_index_select(m, 0, bad) == NULL,
                "index_select:", "index 4 is out of range for dimension 0 with size 4");
    CHECK_ERROR(ddpl_index_select(m, 1, neg) == NULL, "index_select:", "index -1");
    CHECK_ERROR(ddpl_index_select(m, 0, fi) == NULL, "index_select:", "int64");
    CHECK_ERROR(ddpl_index_select(m, 0, i2) == NULL, "index_select:", "1-D");
    RELEASE(x, m, i, r, r1, r1i, mt, r2, i0, r3, big, perm, pk, got, w, sel, s, bad, neg, fi, i2);
}

/* ---- gather ---- */
static void test_gather(void)
{
    ddpl_tensor *x = t_from(2, (int64_t[]){2, 3}, (double[]){1, 2, 3, 4, 5, 6}, DDPL_FLOAT32);
    ddpl_tensor *i1 =
        ddpl_from_data(2, (int64_t[]){2, 2}, DDPL_INT64, (int64_t[]){2, 0, 1, 1}, ddpl_cpu());
    ddpl_tensor *g1 = ddpl_gather(x, 1, i1); /* out[i][j] = x[i][idx[i][j]] */
    CHECK_VALUES(g1, ((double[]){3, 1, 5, 5}), 0);
    ddpl_tensor *i0 =
        ddpl_from_data(2, (int64_t[]){1, 3}, DDPL_INT64, (int64_t[]){1, 0, 1}, ddpl_cpu());
    ddpl_tensor *g0 = ddpl_gather(x, 0, i0); /* out[i][j] = x[idx[i][j]][j] */
    CHECK_VALUES(g0, ((double[]){4, 2, 6}), 0);
    /* a transposed input */
    ddpl_tensor *xt = ddpl_t(x); /* (3,2): rows (1,4), (2,5), (3,6) */
    ddpl_tensor *it =
        ddpl_from_data(2, (int64_t[]){3, 1}, DDPL_INT64, (int64_t[]){1, 0, 1}, ddpl_cpu());
    ddpl_tensor *gt = ddpl_gather(xt, 1, it);
    CHECK_VALUES(gt, ((double[]){4, 2, 6}), 0);

    ddpl_tensor *bad = ddpl_from_data(2, (int64_t[]){1, 1}, DDPL_INT64, (int64_t[]){3}, ddpl_cpu());
    ddpl_tensor *big = ddpl_zeros(2, (int64_t[]){3, 1}, DDPL_INT64, ddpl_cpu());
    ddpl_tensor *flat = ddpl_zeros(1, (int64_t[]){2}, DDPL_INT64, ddpl_cpu());
    CHECK_ERROR(ddpl_gather(x, 1, bad) == NULL,
                "gather:", "index 3 is out of range for dimension 1 with size 3");
    CHECK_ERROR(ddpl_gather(x, 1, big) == NULL, "gather:", "larger than the input");
    CHECK_ERROR(ddpl_gather(x, 0, flat) == NULL, "gather:", "dimensions");
    RELEASE(x, i1, g1, i0, g0, xt, it, gt, bad, big, flat);
}

/* ---- topk ---- */
static void test_topk(void)
{
    ddpl_tensor *x =
        t_from(2, (int64_t[]){2, 5}, (double[]){3, 1, 4, 1, 5, 9, 2, 6, 5, 3}, DDPL_FLOAT32);
    ddpl_tensor *v, *i;
    CHECK(ddpl_topk(x, 3, 1, true, true, &v, &i) == 0);
    CHECK_VALUES(v, ((double[]){5, 4, 3, 9, 6, 5}), 0);
    CHECK_VALUES(i, ((double[]){4, 2, 0, 0, 2, 3}), 0);
    ddpl_tensor *v2, *i2;
    CHECK(ddpl_topk(x, 2, 1, false, true, &v2, &i2) == 0); /* ties: the lower index first */
    CHECK_VALUES(v2, ((double[]){1, 1, 2, 3}), 0);
    CHECK_VALUES(i2, ((double[]){1, 3, 1, 4}), 0);
    ddpl_tensor *v3, *i3;
    CHECK(ddpl_topk(x, 1, 0, true, true, &v3, &i3) == 0);
    CHECK_VALUES(v3, ((double[]){9, 2, 6, 5, 5}), 0);
    CHECK_VALUES(i3, ((double[]){1, 1, 1, 1, 0}), 0);
    /* NaN ranks above everything; int64 values beyond 2^53 stay exact */
    ddpl_tensor *xn = t_from(1, (int64_t[]){4}, (double[]){1, NAN, 7, -2}, DDPL_FLOAT64);
    ddpl_tensor *vn, *in;
    CHECK(ddpl_topk(xn, 2, 0, true, true, &vn, &in) == 0);
    CHECK_VALUES(in, ((double[]){1, 2}), 0);
    int64_t bigv[3] = {(1LL << 60) + 1, (1LL << 60) + 3, (1LL << 60) + 2};
    ddpl_tensor *xi = ddpl_from_data(1, (int64_t[]){3}, DDPL_INT64, bigv, ddpl_cpu());
    ddpl_tensor *vi, *ii;
    CHECK(ddpl_topk(xi, 3, 0, true, true, &vi, &ii) == 0);
    const int64_t *vp = vi ? ddpl_tensor_data(vi) : NULL;
    CHECK(vp && vp[0] == bigv[1] && vp[1] == bigv[2] && vp[2] == bigv[0]);
    /* a larger random row agrees with sorting */
    ddpl_tensor *r = t_rand(1, (int64_t[]){1000}, DDPL_FLOAT32), *vr, *ir;
    CHECK(ddpl_topk(r, 10, 0, true, true, &vr, &ir) == 0);
    double *rv = t_vals(r), *top = t_vals(vr);
    int ok = 1;
    for (int a = 0; a < 10; a++) {
        int greater = 0;
        for (int b = 0; b < 1000; b++) greater += rv[b] > top[a];
        ok &= greater == a && (a == 0 || top[a] <= top[a - 1]);
    }
    CHECK(ok);
    free(rv);
    free(top);

    ddpl_tensor *ve, *ie;
    CHECK_ERROR(ddpl_topk(x, 6, 1, true, true, &ve, &ie) < 0, "topk:", "k (6)");
    CHECK(ve == NULL && ie == NULL);
    CHECK_ERROR(ddpl_topk(x, 1, 2, true, true, &ve, &ie) < 0, "topk:", "out of range");
    RELEASE(x, v, i, v2, i2, v3, i3, xn, vn, in, xi, vi, ii, r, vr, ir);
}

/* ---- gradient checks ---- */
static ddpl_tensor *f_cat(ddpl_tensor **in, void *ctx)
{
    return ddpl_cat(2, in, *(int *)ctx);
}
static ddpl_tensor *f_stack(ddpl_tensor **in, void *ctx)
{
    return ddpl_stack(2, in, 1);
}
static ddpl_tensor *f_index_select(ddpl_tensor **in, void *ctx)
{
    return ddpl_index_select(in[0], 1, ctx);
}
static ddpl_tensor *f_gather(ddpl_tensor **in, void *ctx)
{
    return ddpl_gather(in[0], 0, ctx);
}
static ddpl_tensor *f_topk(ddpl_tensor **in, void *ctx)
{
    ddpl_tensor *v, *i;
    if (ddpl_topk(in[0], 2, -1, *(bool *)ctx, true, &v, &i) < 0) return NULL;
    ddpl_tensor_release(i);
    return v;
}

static void test_gradients(void)
{
    int dim = 1;
    ddpl_tensor *c[2] = {gc_input(2, (int64_t[]){2, 3}, 1, 0),
                         gc_input(2, (int64_t[]){2, 2}, 1, 0)};
    CHECK(gradcheck("cat", f_cat, 2, c, &dim, 1e-6, 1e-8, 1e-6));
    ddpl_tensor *s[2] = {gc_input(2, (int64_t[]){2, 3}, 1, 0),
                         gc_input(2, (int64_t[]){2, 3}, 1, 0)};
    CHECK(gradcheck("stack", f_stack, 2, s, NULL, 1e-6, 1e-8, 1e-6));
    ddpl_tensor *x = gc_input(2, (int64_t[]){3, 4}, 1, 0);
    ddpl_tensor *i = idx(5, (int64_t[]){3, 0, 3, 1, 3});
    CHECK(gradcheck("index_select", f_index_select, 1, &x, i, 1e-6, 1e-8, 1e-6));
    ddpl_tensor *gi =
        ddpl_from_data(2, (int64_t[]){4, 4}, DDPL_INT64,
                       (int64_t[]){0, 1, 2, 0, 2, 2, 1, 1, 0, 0, 0, 2, 1, 2, 0, 0}, ddpl_cpu());
    CHECK(gradcheck("gather", f_gather, 1, &x, gi, 1e-6, 1e-8, 1e-6));
    bool largest = true, smallest = false;
    CHECK(gradcheck("topk largest", f_topk, 1, &x, &largest, 1e-6, 1e-8, 1e-6));
    CHECK(gradcheck("topk smallest", f_topk, 1, &x, &smallest, 1e-6, 1e-8, 1e-6));
    RELEASE(c[0], c[1], s[0], s[1], x, i, gi);
}

int main(void)
{
    ddpl_manual_seed(7);
    test_cat_stack();
    test_index_select();
    test_gather();
    test_topk();
    test_gradients();
    CHECK(ddpl_memory_allocated(DDPL_CPU) == 0); /* everything released */
    return check_finish();
}
