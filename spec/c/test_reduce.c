/* spec/c/test_reduce.c: reductions through the C API: values over all dims, one dim and several
 * dims (keepdim or not, strided inputs, 0-dim and empty tensors, integer dtypes), accuracy of
 * large float32 sums, float64 gradient checks of every differentiable reduction, and errors. */
#include <string.h>

#include "check.h"
#include "values.h"

static ddpl_device cpu;

#define DIMS(...) ((int[]){__VA_ARGS__})

/* t has the given shape and values (within tol; NaN matches NaN); releases t. */
static int is(ddpl_tensor *t, int ndim, const int64_t *sizes, const double *want, double tol)
{
    if (!t) return 0;
    int ok = ddpl_tensor_ndim(t) == ndim;
    for (int d = 0; ok && d < ndim; d++) ok = ddpl_tensor_size(t, d) == sizes[d];
    if (!ok) fprintf(stderr, "  wrong shape (%d dims)\n", ddpl_tensor_ndim(t));
    int64_t n = ddpl_tensor_numel(t);
    double got[64];
    if (ok) ok = ddpl_tensor_to_doubles(t, got) == 0;
    for (int64_t i = 0; ok && i < n; i++) {
        bool same = (isnan(got[i]) && isnan(want[i])) || got[i] == want[i];
        if (!same && !(fabs(got[i] - want[i]) <= tol * (1 + fabs(want[i])))) {
            fprintf(stderr, "  element %lld: got %.10g want %.10g\n", (long long)i, got[i],
                    want[i]);
            ok = 0;
        }
    }
    ddpl_tensor_release(t);
    return ok;
}

static int dtype_is(ddpl_tensor *t, ddpl_dtype dt)
{
    return t && ddpl_tensor_dtype(t) == dt;
}

static int error_mentions(const char *a, const char *b)
{
    const char *e = ddpl_last_error();
    return strstr(e, a) && (!b || strstr(e, b));
}

static void test_sum_mean_prod(void)
{
    /* x = [[1,2,3],[4,5,6]] */
    ddpl_tensor *x = T(2, SZ(2, 3), DDPL_FLOAT32, V(1, 2, 3, 4, 5, 6));
    CHECK(is(ddpl_sum(x), 0, NULL, V(21), 0));
    CHECK(is(ddpl_sum_dim(x, 0, false), 1, SZ(3), V(5, 7, 9), 0));
    CHECK(is(ddpl_sum_dim(x, -1, true), 2, SZ(2, 1), V(6, 15), 0));
    CHECK(is(ddpl_sum_dims(x, 2, DIMS(0, 1), true), 2, SZ(1, 1), V(21), 0));
    CHECK(is(ddpl_mean(x), 0, NULL, V(3.5), 0));
    CHECK(is(ddpl_mean_dim(x, 1, false), 1, SZ(2), V(2, 5), 0));
    CHECK(is(ddpl_mean_dims(x, 1, DIMS(0), true), 2, SZ(1, 3), V(2.5, 3.5, 4.5), 0));
    CHECK(is(ddpl_prod(x), 0, NULL, V(720), 0));
    CHECK(is(ddpl_prod_dim(x, 0, false), 1, SZ(3), V(4, 10, 18), 0));
    /* transposed input: xt = [[1,4],[2,5],[3,6]] */
    ddpl_tensor *xt = ddpl_t(x);
    CHECK(is(ddpl_sum_dim(xt, 0, false), 1, SZ(2), V(6, 15), 0));
    CHECK(is(ddpl_sum_dim(xt, 1, false), 1, SZ(3), V(5, 7, 9), 0));
    CHECK(is(ddpl_prod_dim(xt, 1, true), 2, SZ(3, 1), V(4, 10, 18), 0));
    /* 3-D, reducing the outer and inner dims together (non-adjacent) */
    ddpl_tensor *a = ddpl_arange(0, 24, 1, DDPL_FLOAT64, cpu);
    ddpl_tensor *a3 = ddpl_view(a, 3, SZ(2, 3, 4));
    CHECK(is(ddpl_sum_dims(a3, 2, DIMS(0, 2), false), 1, SZ(3), V(60, 92, 124), 0));
    CHECK(is(ddpl_sum_dims(a3, 2, DIMS(0, 1), false), 1, SZ(4), V(60, 66, 72, 78), 0));
    CHECK(is(ddpl_sum_dims(a3, 0, NULL, false), 0, NULL, V(276), 0)); /* dim=[]: all */
    /* integers: sums and products are int64 and exact */
    ddpl_tensor *i32 = T(1, SZ(3), DDPL_INT32, V(2000000000, 2000000000, 3));
    ddpl_tensor *s = ddpl_sum(i32);
    CHECK(dtype_is(s, DDPL_INT64));
    CHECK(is(s, 0, NULL, V(4000000003.0), 0));
    ddpl_tensor *bl = T(1, SZ(4), DDPL_BOOL, V(1, 0, 1, 1));
    s = ddpl_sum(bl);
    CHECK(dtype_is(s, DDPL_INT64));
    CHECK(is(s, 0, NULL, V(3), 0));
    int64_t big[2] = {(1LL << 53) + 1, 2};
    ddpl_tensor *bi = ddpl_from_data(1, SZ(2), DDPL_INT64, big, cpu);
    int64_t iv = 0;
    s = ddpl_sum(bi);
    CHECK(s && ddpl_tensor_item_int64(s, &iv) == 0 && iv == (1LL << 53) + 3);
    ddpl_tensor_release(s);
    s = ddpl_prod(bi);
    CHECK(s && ddpl_tensor_item_int64(s, &iv) == 0 && iv == (1LL << 54) + 2);
    ddpl_tensor_release(s);
    CHECK(ddpl_mean(bi) == NULL && error_mentions("mean", "int64"));
    /* float16 keeps its dtype */
    ddpl_tensor *h = T(1, SZ(3), DDPL_FLOAT16, V(0.5, 1.5, 2));
    s = ddpl_sum(h);
    CHECK(dtype_is(s, DDPL_FLOAT16));
    CHECK(is(s, 0, NULL, V(4), 0));
    /* 0-dim and empty */
    ddpl_tensor *sc = ddpl_scalar(3, DDPL_FLOAT32, cpu);
    CHECK(is(ddpl_sum_dim(sc, 0, false), 0, NULL, V(3), 0));
    CHECK(is(ddpl_sum_dim(sc, -1, true), 0, NULL, V(3), 0));
    ddpl_tensor *e = ddpl_zeros(2, SZ(0, 3), DDPL_FLOAT32, cpu);
    CHECK(is(ddpl_sum(e), 0, NULL, V(0), 0));
    CHECK(is(ddpl_sum_dim(e, 0, false), 1, SZ(3), V(0, 0, 0), 0));
    CHECK(is(ddpl_prod_dim(e, 0, false), 1, SZ(3), V(1, 1, 1), 0));
    CHECK(is(ddpl_mean(e), 0, NULL, V(NAN), 0));
    s = ddpl_sum_dim(e, 1, false);
    CHECK(s && ddpl_tensor_ndim(s) == 1 && ddpl_tensor_size(s, 0) == 0);
    ddpl_tensor_release(s);
    /* errors */
    CHECK(ddpl_sum_dim(x, 2, false) == NULL && error_mentions("sum", "dimension 2"));
    CHECK(ddpl_sum_dims(x, 2, DIMS(1, -1), false) == NULL && error_mentions("sum", "multiple"));
    ddpl_tensor *ts[] = {x, xt, a, a3, i32, bl, bi, h, sc, e};
    for (size_t k = 0; k < sizeof ts / sizeof *ts; k++) ddpl_tensor_release(ts[k]);
}

static void test_large_sums(void)
{
    /* 16M float32 ones plus 0.1: float accumulation would stall at 2^24 */
    int64_t n = 1 << 24;
    ddpl_tensor *x = ddpl_full(1, &n, 1.1f, DDPL_FLOAT32, cpu);
    double want = (double)1.1f * n, got = 0;
    ddpl_tensor *s = ddpl_sum(x);
    CHECK(s && ddpl_tensor_item(s, &got) == 0 && fabs(got - want) <= 1e-6 * want);
    ddpl_tensor_release(s);
    ddpl_tensor *m = ddpl_mean(x);
    CHECK(m && ddpl_tensor_item(m, &got) == 0 && fabs(got - 1.1f) <= 1e-7);
    ddpl_tensor_release(m);
    /* rows (inner reduction), columns (outer reduction) */
    ddpl_tensor *x2 = ddpl_view(x, 2, SZ(4096, 4096));
    ddpl_tensor *r = ddpl_sum_dim(x2, 1, false), *c = ddpl_sum_dim(x2, 0, false);
    const float *rp = r ? ddpl_tensor_data(r) : NULL, *cp = c ? ddpl_tensor_data(c) : NULL;
    CHECK(rp && fabs(rp[0] - 4096 * 1.1) < 1e-3 && fabs(rp[4095] - 4096 * 1.1) < 1e-3);
    CHECK(cp && fabs(cp[0] - 4096 * 1.1) < 1e-3 && fabs(cp[4095] - 4096 * 1.1) < 1e-3);
    /* the same on a transposed view: the roles swap */
    ddpl_tensor *x2t = ddpl_t(x2);
    ddpl_tensor *rt = ddpl_sum_dim(x2t, 1, false);
    const float *rtp = rt ? ddpl_tensor_data(rt) : NULL;
    CHECK(rtp && fabs(rtp[17] - 4096 * 1.1) < 1e-3);
    ddpl_tensor *mx = ddpl_max(x2t);
    CHECK(is(mx, 0, NULL, V(1.1f), 0));
    ddpl_tensor *ts[] = {x, x2, r, c, x2t, rt};
    for (size_t k = 0; k < sizeof ts / sizeof *ts; k++) ddpl_tensor_release(ts[k]);
}

static void test_extremes(void)
{
    ddpl_tensor *x = T(2, SZ(2, 3), DDPL_FLOAT32, V(3, 1, 3, -2, 5, 5));
    CHECK(is(ddpl_max(x), 0, NULL, V(5), 0));
    CHECK(is(ddpl_min(x), 0, NULL, V(-2), 0));
    ddpl_tensor *v, *i;
    CHECK(ddpl_max_dim(x, 1, false, &v, &i) == 0);
    CHECK(dtype_is(i, DDPL_INT64));
    CHECK(is(v, 1, SZ(2), V(3, 5), 0));
    CHECK(is(i, 1, SZ(2), V(0, 1), 0)); /* first occurrence */
    CHECK(ddpl_min_dim(x, 0, true, &v, &i) == 0);
    CHECK(is(v, 2, SZ(1, 3), V(-2, 1, 3), 0));
    CHECK(is(i, 2, SZ(1, 3), V(1, 0, 0), 0));
    CHECK(is(ddpl_argmax(x, true, 0, false), 0, NULL, V(4), 0));
    CHECK(is(ddpl_argmin(x, false, -1, false), 1, SZ(2), V(1, 0), 0));
    CHECK(is(ddpl_argmax(x, true, 0, true), 2, SZ(1, 1), V(4), 0));
    ddpl_tensor *xt = ddpl_t(x); /* [[3,-2],[1,5],[3,5]] */
    CHECK(is(ddpl_argmax(xt, false, 1, true), 2, SZ(3, 1), V(0, 1, 1), 0));
    CHECK(is(ddpl_argmax(xt, true, 0, false), 0, NULL, V(3), 0)); /* flattened xt */
    /* NaN is the maximum and the minimum, first NaN wins */
    ddpl_tensor *nx = T(1, SZ(4), DDPL_FLOAT64, V(1, NAN, 7, NAN));
    CHECK(is(ddpl_max(nx), 0, NULL, V(NAN), 0));
    CHECK(is(ddpl_min(nx), 0, NULL, V(NAN), 0));
    CHECK(is(ddpl_argmax(nx, true, 0, false), 0, NULL, V(1), 0));
    /* integers, exact */
    int64_t big[3] = {(1LL << 53) + 1, (1LL << 53), -5};
    ddpl_tensor *bi = ddpl_from_data(1, SZ(3), DDPL_INT64, big, cpu);
    int64_t iv = 0;
    ddpl_tensor *m = ddpl_max(bi);
    CHECK(m && ddpl_tensor_item_int64(m, &iv) == 0 && iv == (1LL << 53) + 1);
    ddpl_tensor_release(m);
    CHECK(is(ddpl_argmin(bi, true, 0, false), 0, NULL, V(2), 0));
    /* errors and empties */
    ddpl_tensor *e = ddpl_zeros(2, SZ(0, 3), DDPL_FLOAT32, cpu);
    CHECK(ddpl_max(e) == NULL && error_mentions("max", "[0,3]"));
    CHECK(ddpl_min(e) == NULL && error_mentions("min", "[0,3]"));
    CHECK(ddpl_max_dim(e, 0, false, &v, &i) == -1 && error_mentions("max", "non-zero"));
    CHECK(ddpl_argmax(e, true, 0, false) == NULL && error_mentions("argmax", "empty"));
    CHECK(ddpl_max_dim(e, 1, false, &v, &i) == 0 && ddpl_tensor_numel(v) == 0);
    ddpl_tensor_release(v);
    ddpl_tensor_release(i);
    ddpl_tensor *sc = ddpl_scalar(4, DDPL_FLOAT32, cpu);
    CHECK(ddpl_max_dim(sc, 0, false, &v, &i) == 0);
    CHECK(is(v, 0, NULL, V(4), 0));
    CHECK(is(i, 0, NULL, V(0), 0));
    ddpl_tensor *ts[] = {x, xt, nx, bi, e, sc};
    for (size_t k = 0; k < sizeof ts / sizeof *ts; k++) ddpl_tensor_release(ts[k]);
}

static void test_stats(void)
{
    ddpl_tensor *x = T(2, SZ(2, 3), DDPL_FLOAT64, V(1, 2, 6, 4, 4, 4));
    CHECK(is(ddpl_var(x, 1), 0, NULL, V(3.1), 1e-12));
    CHECK(is(ddpl_var(x, 0), 0, NULL, V(2.5833333333333335), 1e-12));
    CHECK(is(ddpl_var_dim(x, 1, 1, false), 1, SZ(2), V(7, 0), 1e-12));
    CHECK(is(ddpl_std_dim(x, 1, 1, true), 2, SZ(2, 1), V(sqrt(7), 0), 1e-12));
    CHECK(is(ddpl_std(x, 1), 0, NULL, V(sqrt(3.1)), 1e-12));
    ddpl_tensor *one = T(1, SZ(1), DDPL_FLOAT64, V(5));
    CHECK(is(ddpl_var(one, 1), 0, NULL, V(NAN), 0)); /* N - correction = 0 */
    CHECK(is(ddpl_logsumexp(x, 1, false), 1, SZ(2), V(log(exp(1) + exp(2) + exp(6)), 4 + log(3)),
             1e-12));
    /* stable for large values; -inf rows give -inf */
    ddpl_tensor *l = T(2, SZ(2, 2), DDPL_FLOAT32, V(1000, 1000, -INFINITY, -INFINITY));
    CHECK(is(ddpl_logsumexp(l, -1, true), 2, SZ(2, 1), V(1000 + log(2), -INFINITY), 1e-6));
    ddpl_tensor *li = T(1, SZ(2), DDPL_INT64, V(0, 0));
    ddpl_tensor *r = ddpl_logsumexp(li, 0, false);
    CHECK(dtype_is(r, DDPL_FLOAT32));
    CHECK(is(r, 0, NULL, V(log(2)), 1e-6));
    ddpl_tensor *v = T(2, SZ(2, 2), DDPL_FLOAT32, V(3, -4, 0, 1));
    CHECK(is(ddpl_norm(v, 2, true, 0, false), 0, NULL, V(sqrt(26)), 1e-6));
    CHECK(is(ddpl_norm(v, 1, false, 1, false), 1, SZ(2), V(7, 1), 0));
    CHECK(is(ddpl_norm(v, INFINITY, false, 0, true), 2, SZ(1, 2), V(3, 4), 0));
    CHECK(is(ddpl_norm(v, -INFINITY, true, 0, false), 0, NULL, V(0), 0));
    CHECK(is(ddpl_norm(v, 0, true, 0, false), 0, NULL, V(3), 0));
    CHECK(is(ddpl_norm(v, 3, true, 0, false), 0, NULL, V(cbrt(27 + 64 + 1)), 1e-6));
    CHECK(ddpl_var(li, 1) == NULL && error_mentions("var", "int64"));
    CHECK(ddpl_norm(li, 2, true, 0, false) == NULL && error_mentions("norm", "int64"));
    ddpl_tensor *e = ddpl_zeros(1, SZ(0), DDPL_FLOAT32, cpu);
    CHECK(ddpl_norm(e, INFINITY, true, 0, false) == NULL && error_mentions("norm", "empty"));
    CHECK(is(ddpl_norm(e, 2, true, 0, false), 0, NULL, V(0), 0));
    ddpl_tensor *ts[] = {x, one, l, li, v, e};
    for (size_t k = 0; k < sizeof ts / sizeof *ts; k++) ddpl_tensor_release(ts[k]);
}

/* ---- gradient checks ---- */
typedef struct {
    int which;
} gc_op;

static ddpl_tensor *apply(ddpl_tensor **in, void *ctx)
{
    ddpl_tensor *x = in[0], *v = NULL, *i = NULL;
    switch (((gc_op *)ctx)->which) {
    case 0:
        return ddpl_sum(x);
    case 1:
        return ddpl_sum_dim(x, 1, false);
    case 2:
        return ddpl_sum_dims(x, 2, DIMS(0, 2), true);
    case 3:
        return ddpl_mean(x);
    case 4:
        return ddpl_mean_dims(x, 2, DIMS(-1, 0), false);
    case 5:
        return ddpl_prod(x);
    case 6:
        return ddpl_prod_dim(x, 1, true);
    case 7:
        return ddpl_var(x, 1);
    case 8:
        return ddpl_var_dim(x, 2, 0, true);
    case 9:
        return ddpl_std(x, 1);
    case 10:
        return ddpl_std_dim(x, 0, 1, false);
    case 11:
        return ddpl_max(x);
    case 12:
        return ddpl_min(x);
    case 13:
        ddpl_max_dim(x, 1, false, &v, &i);
        break;
    case 14:
        ddpl_min_dim(x, 0, true, &v, &i);
        break;
    case 15:
        return ddpl_logsumexp(x, 1, false);
    case 16:
        return ddpl_logsumexp(x, -1, true);
    case 17:
        return ddpl_norm(x, 2, true, 0, false);
    case 18:
        return ddpl_norm(x, 1, false, 1, false);
    case 19:
        return ddpl_norm(x, INFINITY, false, 2, true);
    case 20:
        return ddpl_norm(x, 3, true, 0, false);
    case 21:
        return ddpl_norm(x, 1.5, false, 0, false);
    default:
        return NULL;
    }
    ddpl_tensor_release(i);
    return v;
}

static void test_gradients(void)
{
    ddpl_manual_seed(11);
    ddpl_tensor *x = gc_input(3, SZ(2, 3, 4), 1, 0);
    ddpl_tensor *pos = gc_input(3, SZ(2, 3, 4), 0.2, 1); /* no zeros for prod */
    const char *names[] = {
        "sum",       "sum_dim",      "sum_dims", "mean",      "mean_dims",      "prod",
        "prod_dim",  "var",          "var_dim",  "std",       "std_dim",        "max",
        "min",       "max_dim",      "min_dim",  "logsumexp", "logsumexp_keep", "norm2",
        "norm1_dim", "norm_inf_dim", "norm3",    "norm1.5"};
    for (int k = 0; k < 22; k++) {
        ddpl_tensor *in[1] = {k == 5 || k == 6 ? pos : x};
        gc_op op = {k};
        CHECK(gradcheck(names[k], apply, 1, in, &op, 1e-6, 1e-7, 1e-5));
    }
    ddpl_tensor_release(x);
    ddpl_tensor_release(pos);
}

/* Gradient conventions: ties and zeros. */
static void test_gradient_conventions(void)
{
    ddpl_tensor *x = T(1, SZ(4), DDPL_FLOAT64, V(2, 5, 5, 1));
    ddpl_tensor_set_requires_grad(x, true);
    ddpl_tensor *m = ddpl_max(x);
    CHECK(ddpl_backward(m, NULL, false) == 0);
    CHECK(is(ddpl_tensor_retain(ddpl_tensor_grad(x)), 1, SZ(4), V(0, 0.5, 0.5, 0), 0));
    ddpl_tensor_release(m);
    ddpl_tensor *v, *i;
    ddpl_tensor_set_grad(x, NULL);
    CHECK(ddpl_max_dim(x, 0, false, &v, &i) == 0);
    CHECK(ddpl_backward(v, NULL, false) == 0); /* the index gets it all */
    CHECK(is(ddpl_tensor_retain(ddpl_tensor_grad(x)), 1, SZ(4), V(0, 1, 0, 0), 0));
    ddpl_tensor_release(v);
    ddpl_tensor_release(i);
    /* prod with one zero and with two zeros */
    ddpl_tensor *z1 = T(1, SZ(3), DDPL_FLOAT64, V(2, 0, 3));
    ddpl_tensor *z2 = T(1, SZ(3), DDPL_FLOAT64, V(0, 4, 0));
    ddpl_tensor_set_requires_grad(z1, true);
    ddpl_tensor_set_requires_grad(z2, true);
    ddpl_tensor *p1 = ddpl_prod(z1), *p2 = ddpl_prod(z2);
    CHECK(ddpl_backward(p1, NULL, false) == 0 && ddpl_backward(p2, NULL, false) == 0);
    CHECK(is(ddpl_tensor_retain(ddpl_tensor_grad(z1)), 1, SZ(3), V(0, 6, 0), 0));
    CHECK(is(ddpl_tensor_retain(ddpl_tensor_grad(z2)), 1, SZ(3), V(0, 0, 0), 0));
    /* norm at the origin: zero gradient, not NaN */
    ddpl_tensor *o = ddpl_zeros(1, SZ(3), DDPL_FLOAT64, cpu);
    ddpl_tensor_set_requires_grad(o, true);
    ddpl_tensor *n2 = ddpl_norm(o, 2, true, 0, false);
    CHECK(ddpl_backward(n2, NULL, false) == 0);
    CHECK(is(ddpl_tensor_retain(ddpl_tensor_grad(o)), 1, SZ(3), V(0, 0, 0), 0));
    /* p < 1: the infinite |x|^(p-1) at 0 is taken as 0, as PyTorch */
    ddpl_tensor *h = T(1, SZ(2), DDPL_FLOAT64, V(0, 1));
    ddpl_tensor_set_requires_grad(h, true);
    ddpl_tensor *nh = ddpl_norm(h, 0.5, true, 0, false);
    CHECK(ddpl_backward(nh, NULL, false) == 0);
    CHECK(is(ddpl_tensor_retain(ddpl_tensor_grad(h)), 1, SZ(2), V(0, 1), 0));
    ddpl_tensor_release(nh);
    ddpl_tensor_release(h);
    /* a saved input modified in place is detected */
    ddpl_tensor *y = T(1, SZ(2), DDPL_FLOAT64, V(1, 2));
    ddpl_tensor *w = T(1, SZ(2), DDPL_FLOAT64, V(3, 4));
    ddpl_tensor_set_requires_grad(w, true);
    ddpl_tensor *pr = ddpl_mul(w, y), *ps = ddpl_sum(pr);
    ddpl_tensor *one = ddpl_wrapped_number(1, true);
    CHECK(ddpl_add_(y, one, 1) == 0);
    CHECK(ddpl_backward(ps, NULL, false) == -1 &&
          error_mentions("MulBackward0", "inplace operation"));
    ddpl_tensor *ts[] = {x, z1, z2, p1, p2, o, n2, y, w, pr, ps, one};
    for (size_t k = 0; k < sizeof ts / sizeof *ts; k++) ddpl_tensor_release(ts[k]);
}

int main(void)
{
    cpu = ddpl_cpu();
    test_sum_mean_prod();
    test_large_sums();
    test_extremes();
    test_stats();
    test_gradients();
    test_gradient_conventions();
    CHECK(ddpl_memory_allocated(DDPL_CPU) == 0);
    return check_finish();
}
