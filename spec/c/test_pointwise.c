/* spec/c/test_pointwise.c: pointwise ops through the C API: values (broadcasting, dtype
 * promotion, int64 exactness, strided and 0-dim inputs, empty tensors, float16/bfloat16),
 * float64 gradient checks of every differentiable op, the in-place ops, and error messages. */
#include <string.h>

#include "check.h"
#include "values.h"
#include "core/core.h"

static ddpl_device cpu;

/* t's values equal want[0..n) within tol (NaN matches NaN); releases t. */
static int values_are(ddpl_tensor *t, int64_t n, const double *want, double tol)
{
    if (!t) return 0;
    int ok = ddpl_tensor_numel(t) == n;
    double got[64];
    if (ok) ok = ddpl_tensor_to_doubles(t, got) == 0;
    for (int64_t i = 0; ok && i < n; i++) {
        bool same = (isnan(got[i]) && isnan(want[i])) || got[i] == want[i];
        if (!same && !(fabs(got[i] - want[i]) <= tol * (1 + fabs(want[i])))) {
            fprintf(stderr, "  element %lld: got %.9g want %.9g\n", (long long)i, got[i], want[i]);
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

/* The last error mentions every given word. */
static int error_mentions(const char *a, const char *b, const char *c)
{
    const char *e = ddpl_last_error();
    return strstr(e, a) && (!b || strstr(e, b)) && (!c || strstr(e, c));
}

static void test_binary_values(void)
{
    ddpl_tensor *a = T(2, SZ(2, 3), DDPL_FLOAT32, V(1, 2, 3, 4, 5, 6));
    ddpl_tensor *b = T(1, SZ(3), DDPL_FLOAT32, V(10, 20, 30));
    CHECK(values_are(ddpl_add(a, b), 6, V(11, 22, 33, 14, 25, 36), 0));
    CHECK(values_are(ddpl_sub(a, b), 6, V(-9, -18, -27, -6, -15, -24), 0));
    CHECK(values_are(ddpl_mul(b, a), 6, V(10, 40, 90, 40, 100, 180), 0));
    CHECK(values_are(ddpl_div(a, b), 6, V(.1, .1, .1, .4, .25, .2), 1e-7));
    CHECK(values_are(ddpl_add_scaled(a, b, -0.5), 6, V(-4, -8, -12, -1, -5, -9), 0));
    ddpl_tensor *col = T(2, SZ(2, 1), DDPL_FLOAT32, V(2, 3));
    CHECK(values_are(ddpl_pow(a, col), 6, V(1, 4, 9, 64, 125, 216), 1e-7));
    ddpl_tensor *c = T(1, SZ(3), DDPL_FLOAT32, V(2, NAN, 2));
    ddpl_tensor *d = T(1, SZ(3), DDPL_FLOAT32, V(1, 5, 3));
    CHECK(values_are(ddpl_maximum(c, d), 3, V(2, NAN, 3), 0)); /* NaN propagates */
    CHECK(values_are(ddpl_minimum(c, d), 3, V(1, NAN, 2), 0));
    /* comparisons: bool results, broadcast */
    ddpl_tensor *lt = ddpl_lt(a, col);
    CHECK(dtype_is(lt, DDPL_BOOL));
    CHECK(values_are(lt, 6, V(1, 0, 0, 0, 0, 0), 0));
    CHECK(values_are(ddpl_ge(a, col), 6, V(0, 1, 1, 1, 1, 1), 0));
    CHECK(values_are(ddpl_eq(c, c), 3, V(1, 0, 1), 0)); /* NaN != NaN */
    CHECK(values_are(ddpl_ne(c, d), 3, V(1, 1, 1), 0));
    CHECK(values_are(ddpl_le(d, c), 3, V(1, 0, 0), 0));
    CHECK(values_are(ddpl_gt(d, c), 3, V(0, 0, 1), 0));
    ddpl_tensor *ts[] = {a, b, col, c, d};
    for (int i = 0; i < 5; i++) ddpl_tensor_release(ts[i]);
}

static void test_promotion(void)
{
    ddpl_tensor *f = T(1, SZ(2), DDPL_FLOAT32, V(1, 2));
    ddpl_tensor *i = T(1, SZ(2), DDPL_INT64, V(-7, 7));
    ddpl_tensor *i32 = T(1, SZ(2), DDPL_INT32, V(1, 2));
    ddpl_tensor *bl = T(1, SZ(2), DDPL_BOOL, V(1, 0));
    ddpl_tensor *f64 = T(1, SZ(2), DDPL_FLOAT64, V(0.5, 0.25));
    ddpl_tensor *w25 = ddpl_wrapped_number(2.5, false), *w2 = ddpl_wrapped_number(2, true);
    ddpl_tensor *r;
    r = ddpl_mul(f, w25); /* a Lua number does not widen float32 */
    CHECK(dtype_is(r, DDPL_FLOAT32));
    CHECK(values_are(r, 2, V(2.5, 5), 0));
    r = ddpl_add(i, w25); /* int64 + 2.5 -> float32 */
    CHECK(dtype_is(r, DDPL_FLOAT32));
    CHECK(values_are(r, 2, V(-4.5, 9.5), 0));
    r = ddpl_add(i, w2);
    CHECK(dtype_is(r, DDPL_INT64));
    CHECK(values_are(r, 2, V(-5, 9), 0));
    r = ddpl_div(i, w2); /* true division */
    CHECK(dtype_is(r, DDPL_FLOAT32));
    CHECK(values_are(r, 2, V(-3.5, 3.5), 0));
    r = ddpl_add(i32, w2);
    CHECK(dtype_is(r, DDPL_INT32));
    ddpl_tensor_release(r);
    r = ddpl_add(f, f64);
    CHECK(dtype_is(r, DDPL_FLOAT64));
    CHECK(values_are(r, 2, V(1.5, 2.25), 0));
    ddpl_tensor *s64 = ddpl_scalar(3, DDPL_INT64, cpu); /* 0-dim, same category: no widening */
    r = ddpl_mul(i32, s64);
    CHECK(dtype_is(r, DDPL_INT32));
    CHECK(values_are(r, 2, V(3, 6), 0));
    r = ddpl_add(bl, bl); /* bool + bool stays bool (logical or) */
    CHECK(dtype_is(r, DDPL_BOOL));
    CHECK(values_are(r, 2, V(1, 0), 0));
    r = ddpl_mul(bl, i32);
    CHECK(dtype_is(r, DDPL_INT32));
    CHECK(values_are(r, 2, V(1, 0), 0));
    CHECK(ddpl_sub(bl, bl) == NULL && error_mentions("sub", "bool", NULL));
    CHECK(ddpl_sub(f, bl) == NULL && error_mentions("sub", "float32", "bool"));
    CHECK(ddpl_sub(bl, w2) == NULL && error_mentions("sub", "bool", "int64"));
    r = ddpl_lt(i, w25); /* compared in float32 */
    CHECK(dtype_is(r, DDPL_BOOL));
    CHECK(values_are(r, 2, V(1, 0), 0));
    /* int64 arithmetic is exact beyond 2^53 */
    int64_t big[2] = {(1LL << 53) + 1, INT64_MAX - 1};
    ddpl_tensor *bi = ddpl_from_data(1, SZ(2), DDPL_INT64, big, cpu);
    ddpl_tensor *one = ddpl_wrapped_number(1, true);
    r = ddpl_add(bi, one);
    CHECK(r && ((int64_t *)ddpl_tensor_data(r))[0] == (1LL << 53) + 2 &&
          ((int64_t *)ddpl_tensor_data(r))[1] == INT64_MAX);
    ddpl_tensor_release(r);
    r = ddpl_maximum(bi, one);
    CHECK(r && ((int64_t *)ddpl_tensor_data(r))[0] == (1LL << 53) + 1);
    ddpl_tensor_release(r);
    int64_t near[2] = {1LL << 53, INT64_MAX};
    ddpl_tensor *nb = ddpl_from_data(1, SZ(2), DDPL_INT64, near, cpu);
    CHECK(values_are(ddpl_eq(bi, nb), 2, V(0, 0), 0)); /* would be equal through double */
    /* integer pow and its negative-exponent rule */
    r = ddpl_pow(i, w2);
    CHECK(dtype_is(r, DDPL_INT64));
    CHECK(values_are(r, 2, V(49, 49), 0));
    ddpl_tensor *wm1 = ddpl_wrapped_number(-1, true);
    CHECK(ddpl_pow(i, wm1) == NULL && error_mentions("pow", "negative", NULL));
    /* float16 and bfloat16 compute in float */
    ddpl_tensor *h = T(1, SZ(2), DDPL_FLOAT16, V(1.5, -2));
    r = ddpl_mul(h, w25);
    CHECK(dtype_is(r, DDPL_FLOAT16));
    CHECK(values_are(r, 2, V(3.75, -5), 0));
    ddpl_tensor *bf = T(1, SZ(2), DDPL_BFLOAT16, V(1, 2));
    r = ddpl_add(h, bf); /* float16 with bfloat16 -> float32 */
    CHECK(dtype_is(r, DDPL_FLOAT32));
    CHECK(values_are(r, 2, V(2.5, 0), 0));
    ddpl_tensor *ts[] = {f, i, i32, bl, f64, w25, w2, s64, bi, one, nb, wm1, h, bf};
    for (size_t k = 0; k < sizeof ts / sizeof *ts; k++) ddpl_tensor_release(ts[k]);
}

static void test_layouts(void)
{
    /* transposed (strided) operands, 0-dim tensors and empty tensors */
    ddpl_tensor *x = T(2, SZ(2, 3), DDPL_FLOAT32, V(0, 1, 2, 3, 4, 5));
    ddpl_tensor *xt = ddpl_t(x); /* [[0,3],[1,4],[2,5]] */
    ddpl_tensor *y = T(2, SZ(3, 2), DDPL_FLOAT32, V(10, 20, 30, 40, 50, 60));
    CHECK(values_are(ddpl_add(xt, y), 6, V(10, 23, 31, 44, 52, 65), 0));
    CHECK(values_are(ddpl_mul(xt, xt), 6, V(0, 9, 1, 16, 4, 25), 0));
    ddpl_tensor *xd = ddpl_to(xt, DDPL_FLOAT64, cpu);
    CHECK(values_are(ddpl_exp(xt), 6, V(1, exp(3), exp(1), exp(4), exp(2), exp(5)), 1e-6));
    CHECK(values_are(ddpl_sub(xd, xt), 6, V(0, 0, 0, 0, 0, 0), 0));
    ddpl_tensor *s1 = ddpl_scalar(2, DDPL_FLOAT32, cpu), *s2 = ddpl_scalar(5, DDPL_FLOAT32, cpu);
    ddpl_tensor *r = ddpl_mul(s1, s2);
    CHECK(r && ddpl_tensor_ndim(r) == 0);
    CHECK(values_are(r, 1, V(10), 0));
    ddpl_tensor *e = ddpl_zeros(2, SZ(0, 3), DDPL_FLOAT32, cpu);
    ddpl_tensor *b = T(1, SZ(3), DDPL_FLOAT32, V(1, 2, 3));
    r = ddpl_add(e, b);
    CHECK(r && ddpl_tensor_ndim(r) == 2 && ddpl_tensor_size(r, 0) == 0 &&
          ddpl_tensor_size(r, 1) == 3);
    ddpl_tensor_release(r);
    r = ddpl_gelu(e, false);
    CHECK(r && ddpl_tensor_numel(r) == 0);
    ddpl_tensor_release(r);
    /* large enough to take the threaded path, with a broadcast row */
    int64_t n = 300000;
    ddpl_tensor *big = ddpl_ones(2, SZ(n / 3, 3), DDPL_FLOAT32, cpu);
    r = ddpl_add(big, b);
    const float *rp = r ? ddpl_tensor_data(r) : NULL;
    CHECK(rp && rp[0] == 2 && rp[n - 1] == 4 && rp[n / 2] == 2 + (n / 2) % 3);
    ddpl_tensor_release(r);
    ddpl_tensor *ts[] = {x, xt, y, xd, s1, s2, e, b, big};
    for (size_t k = 0; k < sizeof ts / sizeof *ts; k++) ddpl_tensor_release(ts[k]);
}

static void test_unary_values(void)
{
    ddpl_tensor *x = T(1, SZ(5), DDPL_FLOAT32, V(-2, -0.5, 0, 0.5, 3));
    double g[5], ge[5], gt[5], si[5], sg[5], th[5];
    const double xs[5] = {-2, -0.5, 0, 0.5, 3};
    for (int i = 0; i < 5; i++) {
        double v = xs[i];
        ge[i] = 0.5 * v * (1 + erf(v / sqrt(2)));
        gt[i] = 0.5 * v * (1 + tanh(sqrt(2 / M_PI) * (v + 0.044715 * v * v * v)));
        sg[i] = 1 / (1 + exp(-v));
        si[i] = v * sg[i];
        th[i] = tanh(v);
        g[i] = exp(v);
    }
    CHECK(values_are(ddpl_exp(x), 5, g, 1e-6));
    CHECK(values_are(ddpl_gelu(x, false), 5, ge, 1e-6));
    CHECK(values_are(ddpl_gelu(x, true), 5, gt, 1e-6));
    CHECK(values_are(ddpl_sigmoid(x), 5, sg, 1e-6));
    CHECK(values_are(ddpl_silu(x), 5, si, 1e-6));
    CHECK(values_are(ddpl_tanh(x), 5, th, 1e-6));
    CHECK(values_are(ddpl_relu(x), 5, V(0, 0, 0, 0.5, 3), 0));
    CHECK(values_are(ddpl_abs(x), 5, V(2, 0.5, 0, 0.5, 3), 0));
    CHECK(values_are(ddpl_sign(x), 5, V(-1, -1, 0, 1, 1), 0));
    ddpl_tensor *nz = T(1, SZ(3), DDPL_FLOAT32, V(NAN, -0.0, -3));
    CHECK(values_are(ddpl_sign(nz), 3, V(0, 0, -1), 0)); /* sign(NaN) = 0, as PyTorch */
    CHECK(values_are(ddpl_relu(nz), 3, V(NAN, 0, 0), 0));
    CHECK(values_are(ddpl_clamp(nz, true, 0, true, 1), 3, V(NAN, 0, 0), 0));
    ddpl_tensor_release(nz);
    CHECK(values_are(ddpl_neg(x), 5, V(2, 0.5, 0, -0.5, -3), 0));
    CHECK(values_are(ddpl_sin(x), 5, V(sin(-2), sin(-.5), 0, sin(.5), sin(3)), 1e-6));
    CHECK(values_are(ddpl_cos(x), 5, V(cos(-2), cos(-.5), 1, cos(.5), cos(3)), 1e-6));
    CHECK(values_are(ddpl_clamp(x, true, -1, true, 1), 5, V(-1, -0.5, 0, 0.5, 1), 0));
    CHECK(values_are(ddpl_clamp(x, false, 0, true, 0.25), 5, V(-2, -0.5, 0, 0.25, 0.25), 0));
    CHECK(values_are(ddpl_clamp(x, true, 1, true, -1), 5, V(-1, -1, -1, -1, -1), 0));
    ddpl_tensor *p = T(1, SZ(3), DDPL_FLOAT64, V(0.25, 1, 4));
    CHECK(values_are(ddpl_log(p), 3, V(log(0.25), 0, log(4)), 1e-15));
    CHECK(values_are(ddpl_sqrt(p), 3, V(0.5, 1, 2), 1e-15));
    CHECK(values_are(ddpl_rsqrt(p), 3, V(2, 1, 0.5), 1e-15));
    /* special values of the float32 approximations */
    ddpl_tensor *sp = T(1, SZ(4), DDPL_FLOAT32, V(NAN, INFINITY, -INFINITY, -200));
    CHECK(values_are(ddpl_exp(sp), 4, V(NAN, INFINITY, 0, 0), 0));
    CHECK(values_are(ddpl_tanh(sp), 4, V(NAN, 1, -1, -1), 0));
    CHECK(values_are(ddpl_sigmoid(sp), 4, V(NAN, 1, 0, 0), 0));
    CHECK(values_are(ddpl_gelu(sp, false), 4, V(NAN, INFINITY, NAN, 0), 0));
    /* integer inputs: float ops promote, the others keep the dtype */
    ddpl_tensor *i = T(1, SZ(3), DDPL_INT64, V(-3, 0, 2));
    ddpl_tensor *r = ddpl_exp(i);
    CHECK(dtype_is(r, DDPL_FLOAT32));
    CHECK(values_are(r, 3, V(exp(-3), 1, exp(2)), 1e-6));
    r = ddpl_neg(i);
    CHECK(dtype_is(r, DDPL_INT64));
    CHECK(values_are(r, 3, V(3, 0, -2), 0));
    r = ddpl_relu(i);
    CHECK(dtype_is(r, DDPL_INT64));
    CHECK(values_are(r, 3, V(0, 0, 2), 0));
    CHECK(values_are(ddpl_abs(i), 3, V(3, 0, 2), 0));
    CHECK(values_are(ddpl_sign(i), 3, V(-1, 0, 1), 0));
    r = ddpl_clamp(i, true, -1, true, 1);
    CHECK(dtype_is(r, DDPL_INT64));
    CHECK(values_are(r, 3, V(-1, 0, 1), 0));
    r = ddpl_clamp(i, true, 0.5, false, 0); /* a fractional bound promotes */
    CHECK(dtype_is(r, DDPL_FLOAT32));
    CHECK(values_are(r, 3, V(0.5, 0.5, 2), 0));
    ddpl_tensor *i32 = T(1, SZ(2), DDPL_INT32, V(-5, 5));
    CHECK(values_are(ddpl_neg(i32), 2, V(5, -5), 0));
    ddpl_tensor *bl = T(1, SZ(2), DDPL_BOOL, V(1, 0));
    CHECK(ddpl_neg(bl) == NULL && error_mentions("neg", "bool", NULL));
    CHECK(ddpl_abs(bl) == NULL && error_mentions("abs", "bool", NULL));
    CHECK(ddpl_relu(bl) == NULL && error_mentions("relu", "bool", NULL));
    CHECK(ddpl_clamp(x, false, 0, false, 0) == NULL && error_mentions("clamp", NULL, NULL));
    /* half precision through float */
    ddpl_tensor *bf = T(1, SZ(2), DDPL_BFLOAT16, V(0, 1));
    r = ddpl_exp(bf);
    CHECK(dtype_is(r, DDPL_BFLOAT16));
    CHECK(values_are(r, 2, V(1, 2.71875), 0)); /* e rounded to bfloat16 */
    ddpl_tensor *ts[] = {x, p, sp, i, i32, bl, bf};
    for (size_t k = 0; k < sizeof ts / sizeof *ts; k++) ddpl_tensor_release(ts[k]);
}

/* Exact GELU in float32 (a rational approximation, cpu_math.h) and its derivative against a
 * double-precision reference on a dense grid of [-10, 10] (through the threaded path), within
 * 1e-6 relative or 1e-7 absolute; the float64 path against libm's erf; special values. */
static double gelu_ref(double x)
{
    return 0.5 * x * erfc(-x / sqrt(2));
}
static double gelu_grad_ref(double x)
{
    return 0.5 * erfc(-x / sqrt(2)) + x * exp(-0.5 * x * x) / sqrt(2 * M_PI);
}

static void test_gelu_accuracy(void)
{
    const int64_t n = 400001; /* step 5e-5 */
    float *xs = malloc((size_t)n * sizeof *xs);
    for (int64_t i = 0; i < n; i++) xs[i] = (float)(-10 + 20.0 * (double)i / (double)(n - 1));
    ddpl_tensor *x = ddpl_from_data(1, SZ(n), DDPL_FLOAT32, xs, cpu);
    ddpl_tensor_set_requires_grad(x, true);
    ddpl_tensor *y = ddpl_gelu(x, false), *s = ddpl_sum(y);
    CHECK(y && s && ddpl_backward(s, NULL, false) == 0);
    ddpl_tensor *gx = ddpl_tensor_grad(x);
    const float *yp = y ? ddpl_tensor_data(y) : NULL, *gp = gx ? ddpl_tensor_data(gx) : NULL;
    double worst = 0, worst_grad = 0; /* error / (1e-7 + 1e-6 |reference|) */
    for (int64_t i = 0; yp && gp && i < n; i++) {
        double r = gelu_ref(xs[i]), rg = gelu_grad_ref(xs[i]);
        worst = fmax(worst, fabs(yp[i] - r) / (1e-7 + 1e-6 * fabs(r)));
        worst_grad = fmax(worst_grad, fabs(gp[i] - rg) / (1e-7 + 1e-6 * fabs(rg)));
    }
    CHECK(yp && gp && worst <= 1 && worst_grad <= 1);
    if (worst > 1 || worst_grad > 1)
        fprintf(stderr, "  gelu error %.3g, gradient error %.3g (of the bound)\n", worst,
                worst_grad);
    ddpl_tensor_release(s);
    ddpl_tensor_release(y);
    ddpl_tensor_release(x);
    free(xs);
    /* the negative tail keeps its relative accuracy (no 1 + erf cancellation) */
    const double tx[3] = {-4, -6, -9};
    ddpl_tensor *tail = T(1, SZ(3), DDPL_FLOAT32, tx);
    ddpl_tensor *gt = ddpl_gelu(tail, false);
    const float *tp = gt ? ddpl_tensor_data(gt) : NULL;
    for (int i = 0; tp && i < 3; i++) CHECK(fabs(tp[i] / gelu_ref(tx[i]) - 1) < 2e-5);
    ddpl_tensor_release(gt);
    ddpl_tensor_release(tail);
    /* denormal, huge and infinite inputs; results below ~1e-37 flush to zero */
    ddpl_tensor *sp =
        T(1, SZ(8), DDPL_FLOAT32, V(1e-40, -1e-40, 1e30, -1e30, 3e38, -3e38, 20, -20));
    ddpl_tensor *r = ddpl_gelu(sp, false);
    const float *rp = r ? ddpl_tensor_data(r) : NULL;
    CHECK(rp && fabs(rp[0] - 0.5e-40) < 1e-45 && fabs(rp[1] + 0.5e-40) < 1e-45);
    CHECK(rp && rp[2] == 1e30f && rp[3] == 0 && rp[4] == 3e38f && rp[5] == 0);
    CHECK(rp && rp[6] == 20 && rp[7] == 0);
    ddpl_tensor_release(r);
    ddpl_tensor_release(sp);
    /* float64 goes through libm */
    double xd[7] = {-8, -3, -0.7, 1e-3, 0.5, 2, 6}, want[7];
    for (int i = 0; i < 7; i++) want[i] = 0.5 * xd[i] * (1 + erf(xd[i] / sqrt(2)));
    ddpl_tensor *d = T(1, SZ(7), DDPL_FLOAT64, xd);
    CHECK(values_are(ddpl_gelu(d, false), 7, want, 1e-15));
    ddpl_tensor_release(d);
}

static void test_where_masked_fill(void)
{
    ddpl_tensor *c = T(2, SZ(2, 1), DDPL_BOOL, V(1, 0));
    ddpl_tensor *x = T(1, SZ(3), DDPL_FLOAT32, V(1, 2, 3));
    ddpl_tensor *w = ddpl_wrapped_number(-1, true);
    ddpl_tensor *r = ddpl_where(c, x, w);
    CHECK(dtype_is(r, DDPL_FLOAT32));
    CHECK(values_are(r, 6, V(1, 2, 3, -1, -1, -1), 0));
    ddpl_tensor *m = T(1, SZ(3), DDPL_BOOL, V(0, 1, 0));
    CHECK(values_are(ddpl_masked_fill(x, m, 9), 3, V(1, 9, 3), 0));
    ddpl_tensor *i = T(1, SZ(2), DDPL_INT64, V(1, -2));
    ddpl_tensor *m2 = T(1, SZ(2), DDPL_BOOL, V(1, 0));
    r = ddpl_masked_fill(i, m2, 2.5); /* keeps int64, the value truncates as in PyTorch */
    CHECK(dtype_is(r, DDPL_INT64));
    CHECK(values_are(r, 2, V(2, -2), 0));
    CHECK(ddpl_where(i, x, x) == NULL && error_mentions("where", "bool", "int64"));
    ddpl_tensor *m4 = ddpl_ones(1, SZ(4), DDPL_BOOL, cpu);
    CHECK(ddpl_masked_fill(x, m4, 0) == NULL && error_mentions("masked_fill", "[4]", "[3]"));
    ddpl_tensor *ts[] = {c, x, w, m, i, m2, m4};
    for (size_t k = 0; k < sizeof ts / sizeof *ts; k++) ddpl_tensor_release(ts[k]);
}

static void test_inplace(void)
{
    ddpl_tensor *x = T(2, SZ(2, 2), DDPL_FLOAT32, V(1, 2, 3, 4));
    ddpl_tensor *row = T(1, SZ(2), DDPL_FLOAT32, V(10, 20));
    unsigned v0 = atomic_load(&x->storage->version);
    CHECK(ddpl_add_(x, row, 0.5) == 0);
    CHECK(atomic_load(&x->storage->version) == v0 + 1);
    CHECK(values_are(ddpl_clone(x), 4, V(6, 12, 8, 14), 0));
    CHECK(ddpl_mul_(x, row) == 0);
    CHECK(values_are(ddpl_clone(x), 4, V(60, 240, 80, 280), 0));
    CHECK(ddpl_div_(x, row) == 0);
    CHECK(ddpl_clamp_(x, true, 7, true, 13) == 0);
    CHECK(values_are(ddpl_clone(x), 4, V(7, 12, 8, 13), 0));
    CHECK(ddpl_add_(x, x, 1) == 0); /* exactly itself: fine element by element */
    CHECK(values_are(ddpl_clone(x), 4, V(14, 24, 16, 26), 0));
    /* a transposed target with an operand overlapping it differently (its transpose), and a
     * shifted overlap (y[i] += y[i-1]): PyTorch 1.13 refuses both (ops/mem_overlap.c), and
     * the target is left untouched */
    ddpl_tensor *xt = ddpl_t(x);
    CHECK(ddpl_add_(xt, x, 1) == -1 && error_mentions("add_", "single memory location", NULL));
    CHECK(values_are(ddpl_clone(x), 4, V(14, 24, 16, 26), 0));
    ddpl_tensor *s = T(1, SZ(4), DDPL_FLOAT32, V(1, 2, 3, 4));
    ddpl_tensor *lo = ddpl_narrow(s, 0, 0, 3), *hi = ddpl_narrow(s, 0, 1, 3);
    CHECK(ddpl_add_(hi, lo, 1) == -1 && error_mentions("add_", "single memory location", NULL));
    CHECK(values_are(ddpl_clone(s), 4, V(1, 2, 3, 4), 0));
    /* errors leave the target untouched */
    ddpl_tensor *i = T(1, SZ(2), DDPL_INT64, V(1, 2));
    ddpl_tensor *w = ddpl_wrapped_number(1.5, false), *w2 = ddpl_wrapped_number(2, true);
    CHECK(ddpl_add_(i, w, 1) == -1 && error_mentions("add_", "float32", "int64"));
    CHECK(ddpl_div_(i, w2) == -1 && error_mentions("div_", "float32", "int64"));
    CHECK(ddpl_add_(i, w2, 0.5) == -1 && error_mentions("add_", "alpha", NULL));
    CHECK(ddpl_clamp_(i, true, 0.5, false, 0) == -1 && error_mentions("clamp_", NULL, NULL));
    CHECK(ddpl_mul_(i, w2) == 0);
    CHECK(values_are(ddpl_clone(i), 2, V(2, 4), 0));
    ddpl_tensor *big = ddpl_ones(2, SZ(2, 2), DDPL_FLOAT32, cpu);
    CHECK(ddpl_add_(row, big, 1) == -1 && error_mentions("add_", "[2]", "[2,2]"));
    CHECK(values_are(ddpl_clone(row), 2, V(10, 20), 0));
    ddpl_tensor *ex = ddpl_expand(row, 2, SZ(2, 2));
    CHECK(ddpl_add_(ex, big, 1) == -1 && error_mentions("add_", "memory location", NULL));
    ddpl_tensor *leaf = ddpl_ones(1, SZ(2), DDPL_FLOAT64, cpu);
    ddpl_tensor_set_requires_grad(leaf, true);
    CHECK(ddpl_add_(leaf, w2, 1) == -1 && error_mentions("add_", "leaf", NULL));
    CHECK(ddpl_clamp_(leaf, true, 0, false, 0) == -1);
    /* float32 target, float64 operand: computed wide, stored narrow */
    ddpl_tensor *f = T(1, SZ(1), DDPL_FLOAT32, V(1));
    ddpl_tensor *d = T(1, SZ(1), DDPL_FLOAT64, V(1e-8));
    CHECK(ddpl_add_(f, d, 1) == 0 && dtype_is(f, DDPL_FLOAT32));
    CHECK(values_are(ddpl_clone(f), 1, V(1), 0));
    ddpl_tensor *ts[] = {x, row, xt, s, lo, hi, i, w, w2, big, ex, leaf, f, d};
    for (size_t k = 0; k < sizeof ts / sizeof *ts; k++) ddpl_tensor_release(ts[k]);
}

/* out <- x * y in one pass (the DDP reducer's divide-while-copying) */
static void test_mul_out(void)
{
    ddpl_tensor *out = ddpl_zeros(2, SZ(2, 2), DDPL_FLOAT32, cpu);
    ddpl_tensor *x = T(2, SZ(2, 2), DDPL_FLOAT32, V(1, 2, 3, 4));
    ddpl_tensor *row = T(1, SZ(2), DDPL_FLOAT32, V(10, 20));
    ddpl_tensor *half = ddpl_scalar(0.5, DDPL_FLOAT64, cpu); /* 0-dim: computes in float32 */
    unsigned v0 = atomic_load(&out->storage->version);
    CHECK(ddpl_mul_out(out, x, half) == 0 && dtype_is(out, DDPL_FLOAT32));
    CHECK(atomic_load(&out->storage->version) == v0 + 1);
    CHECK(values_are(ddpl_clone(out), 4, V(0.5, 1, 1.5, 2), 0));
    CHECK(values_are(ddpl_clone(x), 4, V(1, 2, 3, 4), 0)); /* the operand is untouched */
    CHECK(ddpl_mul_out(out, row, x) == 0);                 /* the left operand broadcasts too */
    CHECK(values_are(ddpl_clone(out), 4, V(10, 40, 30, 80), 0));
    /* into a transposed view of out, and with out itself as an operand element for element */
    ddpl_tensor *ot = ddpl_t(out);
    CHECK(ddpl_mul_out(ot, x, half) == 0);
    CHECK(values_are(ddpl_clone(out), 4, V(0.5, 1.5, 1, 2), 0));
    CHECK(ddpl_mul_out(out, out, row) == 0);
    CHECK(values_are(ddpl_clone(out), 4, V(5, 30, 10, 40), 0));
    /* errors leave out untouched */
    CHECK(ddpl_mul_out(out, ot, row) == -1 &&
          error_mentions("mul_out", "single memory location", NULL));
    ddpl_tensor *big = ddpl_ones(1, SZ(3), DDPL_FLOAT32, cpu);
    CHECK(ddpl_mul_out(out, x, big) == -1 && error_mentions("mul_out", NULL, NULL));
    ddpl_tensor *i = ddpl_zeros(1, SZ(2), DDPL_INT64, cpu);
    CHECK(ddpl_mul_out(i, row, row) == -1 && error_mentions("mul_out", "float32", "int64"));
    ddpl_tensor *leaf = ddpl_ones(2, SZ(2, 2), DDPL_FLOAT32, cpu);
    ddpl_tensor_set_requires_grad(leaf, true);
    CHECK(ddpl_mul_out(out, leaf, half) == -1 && error_mentions("mul_out", "require grad", NULL));
    CHECK(values_are(ddpl_clone(out), 4, V(5, 30, 10, 40), 0));
    ddpl_tensor *ts[] = {out, x, row, half, ot, big, i, leaf};
    for (size_t k = 0; k < sizeof ts / sizeof *ts; k++) ddpl_tensor_release(ts[k]);
}

static void test_errors(void)
{
    ddpl_tensor *a = ddpl_zeros(2, SZ(2, 3), DDPL_FLOAT32, cpu);
    ddpl_tensor *b = ddpl_zeros(1, SZ(4), DDPL_FLOAT32, cpu);
    CHECK(ddpl_add(a, b) == NULL && error_mentions("add", "[2,3]", "[4]"));
    CHECK(ddpl_mul(a, b) == NULL && error_mentions("mul", "[2,3]", "[4]"));
    CHECK(ddpl_lt(a, b) == NULL && error_mentions("lt", "[2,3]", "[4]"));
    CHECK(ddpl_pow(a, b) == NULL && error_mentions("pow", NULL, NULL));
    CHECK(ddpl_maximum(b, a) == NULL && error_mentions("maximum", "[4]", "[2,3]"));
    ddpl_tensor *c = ddpl_zeros(1, SZ(2), DDPL_BOOL, cpu);
    CHECK(ddpl_where(c, a, b) == NULL && error_mentions("where", NULL, NULL));
    ddpl_tensor_release(a);
    ddpl_tensor_release(b);
    ddpl_tensor_release(c);
}

/* ---- gradient checks (float64) ---- */
typedef ddpl_tensor *(*bin_fn)(ddpl_tensor *, ddpl_tensor *);
typedef ddpl_tensor *(*un_fn)(ddpl_tensor *);
typedef struct {
    bin_fn bin;
    un_fn un;
    int which; /* extra variants */
} gc_op;

static ddpl_tensor *apply(ddpl_tensor **in, void *ctx)
{
    gc_op *o = ctx;
    if (o->bin) return o->bin(in[0], in[1]);
    if (o->un) return o->un(in[0]);
    switch (o->which) {
    case 0:
        return ddpl_add_scaled(in[0], in[1], -2.5);
    case 1:
        return ddpl_gelu(in[0], false);
    case 2:
        return ddpl_gelu(in[0], true);
    case 3:
        return ddpl_clamp(in[0], true, -0.5, true, 0.7);
    case 4:
        return ddpl_clamp(in[0], false, 0, true, 0.1);
    case 5: {
        ddpl_tensor *zero = ddpl_wrapped_number(0, true);
        ddpl_tensor *c = ddpl_gt(in[0], zero);
        ddpl_tensor *r = ddpl_where(c, in[0], in[1]);
        ddpl_tensor_release(c);
        ddpl_tensor_release(zero);
        return r;
    }
    case 6: {
        ddpl_tensor *zero = ddpl_wrapped_number(0, true);
        ddpl_tensor *c = ddpl_lt(in[1], zero);
        ddpl_tensor *r = ddpl_masked_fill(in[0], c, 3.0);
        ddpl_tensor_release(c);
        ddpl_tensor_release(zero);
        return r;
    }
    case 7: { /* x * 2.5 + x / 3, x^2: wrapped numbers on both sides */
        ddpl_tensor *w = ddpl_wrapped_number(2.5, false), *w3 = ddpl_wrapped_number(3, true);
        ddpl_tensor *m = ddpl_mul(w, in[0]), *dv = ddpl_div(in[0], w3), *s = ddpl_add(m, dv);
        ddpl_tensor *p = ddpl_pow(s, w3);
        ddpl_tensor *ts[] = {w, w3, m, dv, s};
        for (int k = 0; k < 5; k++) ddpl_tensor_release(ts[k]);
        return p;
    }
    default:
        return NULL;
    }
}

static void gc(const char *name, gc_op op, int n, ddpl_tensor *a, ddpl_tensor *b)
{
    ddpl_tensor *in[2] = {a, b};
    CHECK(gradcheck(name, apply, n, in, &op, 1e-6, 1e-7, 1e-5));
}

static void test_gradients(void)
{
    ddpl_manual_seed(7);
    ddpl_tensor *a = gc_input(2, SZ(2, 3), 1, 0);
    ddpl_tensor *b = gc_input(1, SZ(3), 1, 0);
    ddpl_tensor *col = gc_input(2, SZ(2, 1), 1, 0);
    ddpl_tensor *pos = gc_input(2, SZ(2, 3), 0.3, 2); /* away from 0 */
    ddpl_tensor *pos_b = gc_input(1, SZ(3), 0.3, 1.5);
    gc("add", (gc_op){ddpl_add, NULL, 0}, 2, a, b);
    gc("add_scaled", (gc_op){NULL, NULL, 0}, 2, a, b);
    gc("sub", (gc_op){ddpl_sub, NULL, 0}, 2, col, a);
    gc("mul", (gc_op){ddpl_mul, NULL, 0}, 2, col, b);
    gc("div", (gc_op){ddpl_div, NULL, 0}, 2, a, pos_b);
    gc("pow", (gc_op){ddpl_pow, NULL, 0}, 2, pos, b);
    gc("maximum", (gc_op){ddpl_maximum, NULL, 0}, 2, a, b);
    gc("minimum", (gc_op){ddpl_minimum, NULL, 0}, 2, col, b);
    gc("where", (gc_op){NULL, NULL, 5}, 2, a, b);
    gc("masked_fill", (gc_op){NULL, NULL, 6}, 2, a, b);
    gc("scalars", (gc_op){NULL, NULL, 7}, 1, a, NULL);
    const struct {
        const char *name;
        un_fn f;
        ddpl_tensor *x;
    } un[] = {{"neg", ddpl_neg, a},     {"exp", ddpl_exp, a},         {"log", ddpl_log, pos},
              {"sqrt", ddpl_sqrt, pos}, {"rsqrt", ddpl_rsqrt, pos},   {"abs", ddpl_abs, a},
              {"sign", ddpl_sign, a},   {"sin", ddpl_sin, a},         {"cos", ddpl_cos, a},
              {"tanh", ddpl_tanh, a},   {"sigmoid", ddpl_sigmoid, a}, {"relu", ddpl_relu, a},
              {"silu", ddpl_silu, a}};
    for (size_t k = 0; k < sizeof un / sizeof *un; k++)
        gc(un[k].name, (gc_op){NULL, un[k].f, 0}, 1, un[k].x, NULL);
    gc("gelu", (gc_op){NULL, NULL, 1}, 1, a, NULL);
    gc("gelu_tanh", (gc_op){NULL, NULL, 2}, 1, a, NULL);
    gc("clamp", (gc_op){NULL, NULL, 3}, 1, a, NULL);
    gc("clamp_max", (gc_op){NULL, NULL, 4}, 1, a, NULL);
    ddpl_tensor *ts[] = {a, b, col, pos, pos_b};
    for (size_t k = 0; k < sizeof ts / sizeof *ts; k++) ddpl_tensor_release(ts[k]);
}

/* Gradients at the points where PyTorch picks a convention: ties, zeros. */
static void test_gradient_conventions(void)
{
    ddpl_tensor *a = T(1, SZ(3), DDPL_FLOAT64, V(1, 2, 0));
    ddpl_tensor *b = T(1, SZ(3), DDPL_FLOAT64, V(1, 1, 0));
    ddpl_tensor_set_requires_grad(a, true);
    ddpl_tensor_set_requires_grad(b, true);
    ddpl_tensor *m = ddpl_maximum(a, b);
    ddpl_tensor *s = ddpl_sum(m);
    CHECK(ddpl_backward(s, NULL, false) == 0);
    CHECK(values_are(ddpl_tensor_retain(ddpl_tensor_grad(a)), 3, V(0.5, 1, 0.5), 0));
    CHECK(values_are(ddpl_tensor_retain(ddpl_tensor_grad(b)), 3, V(0.5, 0, 0.5), 0));
    ddpl_tensor_release(m);
    ddpl_tensor_release(s);
    /* pow at base 0: d/db 0^b = 0 for b >= 0 (not NaN); d/da a^0 = 0 */
    ddpl_tensor_set_grad(a, NULL);
    ddpl_tensor_set_grad(b, NULL);
    ddpl_tensor *p = ddpl_pow(a, b); /* 1^1, 2^1, 0^0 */
    s = ddpl_sum(p);
    CHECK(ddpl_backward(s, NULL, false) == 0);
    CHECK(values_are(ddpl_tensor_retain(ddpl_tensor_grad(a)), 3, V(1, 1, 0), 0));
    CHECK(values_are(ddpl_tensor_retain(ddpl_tensor_grad(b)), 3, V(0, 2 * log(2), 0), 1e-15));
    ddpl_tensor_release(p);
    ddpl_tensor_release(s);
    /* relu at 0 gives 0; abs at 0 gives 0; clamp passes the gradient at the bounds */
    ddpl_tensor_set_grad(a, NULL);
    ddpl_tensor *r = ddpl_relu(a), *ab = ddpl_abs(a), *cl = ddpl_clamp(a, true, 1, true, 2);
    ddpl_tensor *t1 = ddpl_add(r, ab), *t2 = ddpl_add(t1, cl);
    s = ddpl_sum(t2);
    CHECK(ddpl_backward(s, NULL, false) == 0);
    CHECK(values_are(ddpl_tensor_retain(ddpl_tensor_grad(a)), 3, V(3, 3, 0), 0));
    ddpl_tensor *ts[] = {a, b, r, ab, cl, t1, t2, s};
    for (size_t k = 0; k < sizeof ts / sizeof *ts; k++) ddpl_tensor_release(ts[k]);
    /* mixed dtypes and broadcasting: a float32 leaf gets a float32 gradient of its own shape */
    ddpl_tensor *f = T(2, SZ(2, 1), DDPL_FLOAT32, V(1, 2));
    ddpl_tensor *d = T(1, SZ(3), DDPL_FLOAT64, V(0.5, 0.25, 2));
    ddpl_tensor_set_requires_grad(f, true);
    ddpl_tensor *fd = ddpl_mul(f, d), *fs = ddpl_sum(fd);
    CHECK(dtype_is(fd, DDPL_FLOAT64) && ddpl_backward(fs, NULL, false) == 0);
    ddpl_tensor *fg = ddpl_tensor_grad(f);
    CHECK(dtype_is(fg, DDPL_FLOAT32) && ddpl_tensor_ndim(fg) == 2);
    CHECK(values_are(ddpl_tensor_retain(fg), 2, V(2.75, 2.75), 0));
    ddpl_tensor *mixed[] = {f, d, fd, fs};
    for (size_t k = 0; k < 4; k++) ddpl_tensor_release(mixed[k]);
    /* pow by 2 takes the multiply path: exact squares, gradient 2x */
    ddpl_tensor *q = T(1, SZ(3), DDPL_FLOAT32, V(-3, 0.1f, 1e20f));
    ddpl_tensor *two = ddpl_wrapped_number(2, true);
    double q1 = (double)(0.1f * 0.1f);
    CHECK(values_are(ddpl_pow(q, two), 3, V(9, q1, INFINITY), 0));
    ddpl_tensor_release(q);
    ddpl_tensor_release(two);
    /* fused float32 backward kernels agree with their float64 formulas */
    ddpl_tensor *x = T(1, SZ(4), DDPL_FLOAT32, V(-1.5, -0.2, 0.3, 2));
    ddpl_tensor_set_requires_grad(x, true);
    ddpl_tensor *g = ddpl_gelu(x, false);
    ddpl_tensor *gs = ddpl_sum(g);
    CHECK(ddpl_backward(gs, NULL, false) == 0);
    double want[4];
    const double xv[4] = {-1.5, -0.2, 0.3, 2};
    for (int i = 0; i < 4; i++)
        want[i] =
            0.5 * (1 + erf(xv[i] / sqrt(2))) + xv[i] * exp(-xv[i] * xv[i] / 2) / sqrt(2 * M_PI);
    CHECK(values_are(ddpl_tensor_retain(ddpl_tensor_grad(x)), 4, want, 1e-6));
    ddpl_tensor_release(g);
    ddpl_tensor_release(gs);
    ddpl_tensor_release(x);
}

int main(void)
{
    cpu = ddpl_cpu();
    test_binary_values();
    test_promotion();
    test_layouts();
    test_unary_values();
    test_gelu_accuracy();
    test_where_masked_fill();
    test_inplace();
    test_mul_out();
    test_errors();
    test_gradients();
    test_gradient_conventions();
    CHECK(ddpl_memory_allocated(DDPL_CPU) == 0); /* every tensor released */
    return check_finish();
}
