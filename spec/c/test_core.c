/* spec/c/test_core.c: C-level checks of tensors, views, autograd bookkeeping and errors, through
 * the public C API plus the engine's internal headers. */
#include "check.h"

static void test_creation_and_views(void)
{
    int64_t sizes[2] = {2, 3};
    ddpl_tensor *x = ddpl_arange(0, 6, 1, DDPL_FLOAT32, ddpl_cpu());
    CHECK(x && ddpl_tensor_numel(x) == 6);
    ddpl_tensor *v = ddpl_view(x, 2, sizes);
    CHECK(v && ddpl_tensor_size(v, 1) == 3);
    ddpl_tensor *t = ddpl_t(v);
    CHECK(t && !ddpl_tensor_is_contiguous(t));
    double item;
    ddpl_tensor *e = ddpl_select(t, 0, 2); /* column 2 of v: 2, 5 */
    ddpl_tensor *e1 = ddpl_select(e, 0, 1);
    CHECK(ddpl_tensor_item(e1, &item) == 0 && item == 5.0);
    ddpl_tensor *c = ddpl_contiguous(t);
    CHECK(c && ddpl_tensor_is_contiguous(c));
    double vals[6];
    CHECK(ddpl_tensor_to_doubles(c, vals) == 0 && vals[1] == 3.0 && vals[5] == 5.0);
    /* a bad view is an error, not a crash */
    int64_t bad[2] = {4, 2};
    CHECK(ddpl_view(x, 2, bad) == NULL);
    ddpl_tensor *r = ddpl_reshape(t, 1, (int64_t[]){6}); /* needs a copy */
    CHECK(r && ddpl_tensor_to_doubles(r, vals) == 0 && vals[1] == 3.0);
    ddpl_tensor *ey = ddpl_eye(3, 3, DDPL_FLOAT64, ddpl_cpu());
    double ev[9];
    CHECK(ey && ddpl_tensor_to_doubles(ey, ev) == 0 && ev[0] == 1 && ev[1] == 0 && ev[4] == 1);
    ddpl_tensor *h = ddpl_to(x, DDPL_FLOAT16, ddpl_cpu());
    ddpl_tensor *h2 = ddpl_to(h, DDPL_FLOAT64, ddpl_cpu());
    CHECK(h2 && ddpl_tensor_to_doubles(h2, vals) == 0 && vals[5] == 5.0);
    ddpl_tensor *tensors[] = {x, v, t, e, e1, c, r, ey, h, h2};
    for (size_t i = 0; i < sizeof tensors / sizeof *tensors; i++) ddpl_tensor_release(tensors[i]);
}

static void test_random(void)
{
    int64_t n = 100000;
    ddpl_manual_seed(1);
    ddpl_tensor *a = ddpl_rand(1, &n, DDPL_FLOAT32, ddpl_cpu());
    ddpl_manual_seed(1);
    ddpl_tensor *b = ddpl_rand(1, &n, DDPL_FLOAT32, ddpl_cpu());
    const float *pa = ddpl_tensor_data(a), *pb = ddpl_tensor_data(b);
    double mean = 0;
    int same = 1;
    float lo = 1, hi = 0;
    for (int64_t i = 0; i < n; i++) {
        mean += pa[i];
        same &= pa[i] == pb[i];
        lo = pa[i] < lo ? pa[i] : lo;
        hi = pa[i] > hi ? pa[i] : hi;
    }
    mean /= (double)n;
    CHECK(same);
    CHECK(fabs(mean - 0.5) < 0.01 && lo >= 0 && hi < 1);
    ddpl_tensor *g = ddpl_randn(1, &n, DDPL_FLOAT64, ddpl_cpu());
    const double *pg = ddpl_tensor_data(g);
    double m = 0, s = 0;
    for (int64_t i = 0; i < n; i++) m += pg[i];
    m /= (double)n;
    for (int64_t i = 0; i < n; i++) s += (pg[i] - m) * (pg[i] - m);
    s = sqrt(s / (double)n);
    CHECK(fabs(m) < 0.02 && fabs(s - 1) < 0.02);
    ddpl_tensor *p = ddpl_randperm(1000, ddpl_cpu());
    const int64_t *pp = ddpl_tensor_data(p);
    int seen[1000] = {0}, ok = 1;
    for (int i = 0; i < 1000; i++) {
        if (pp[i] < 0 || pp[i] >= 1000 || seen[pp[i]])
            ok = 0;
        else
            seen[pp[i]] = 1;
    }
    CHECK(ok);
    ddpl_tensor_release(a);
    ddpl_tensor_release(b);
    ddpl_tensor_release(g);
    ddpl_tensor_release(p);
}

static void test_autograd_views(void)
{
    int64_t sizes[2] = {2, 3};
    ddpl_tensor *x = ddpl_zeros(2, sizes, DDPL_FLOAT64, ddpl_cpu());
    CHECK(ddpl_tensor_set_requires_grad(x, true) == 0);
    ddpl_tensor *y = ddpl_narrow(x, 1, 1, 2);
    ddpl_tensor *z = ddpl_select(y, 0, 1);
    CHECK(ddpl_tensor_grad_fn_name(z) != NULL);
    ddpl_tensor *g = ddpl_ones(1, (int64_t[]){2}, DDPL_FLOAT64, ddpl_cpu());
    CHECK(ddpl_backward(z, g, false) == 0);
    ddpl_tensor *gx = ddpl_tensor_grad(x);
    double v[6];
    CHECK(gx && ddpl_tensor_to_doubles(gx, v) == 0);
    CHECK(v[0] == 0 && v[1] == 0 && v[2] == 0 && v[3] == 0 && v[4] == 1 && v[5] == 1);
    /* views save no tensors, so (as in PyTorch) a second backward works and accumulates */
    CHECK(ddpl_backward(z, g, false) == 0);
    CHECK(ddpl_tensor_to_doubles(gx, v) == 0 && v[4] == 2 && v[1] == 0);
    /* in-place on a leaf that requires grad is refused */
    CHECK(ddpl_fill_(x, 1.0) == -1);
    ddpl_tensor_release(g);
    ddpl_tensor_release(z);
    ddpl_tensor_release(y);
    ddpl_tensor_release(x);
}

int main(void)
{
    test_creation_and_views();
    test_random();
    test_autograd_views();
    CHECK(ddpl_memory_allocated(DDPL_CPU) == 0); /* everything released */
    return check_finish();
}
