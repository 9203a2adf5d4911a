/* spec/c/test_autograd.c: the backward engine through the C API: accumulation, hooks,
 * gradient-ready signals (what the DDP reducer relies on), retain_graph, autograd_grad,
 * saved-tensor versioning, deep graphs, gradient homes, and memory returning to zero; and what
 * the reducer asks through autograd/leaves.h (reachable leaves, replacing a sole-owner home). */
#include "autograd/leaves.h"
#include "check.h"
#include "ops/op_util.h"

static ddpl_tensor *leaf(double v)
{
    ddpl_tensor *t = ddpl_scalar(v, DDPL_FLOAT64, ddpl_cpu());
    ddpl_tensor_set_requires_grad(t, true);
    return t;
}

static double value(const ddpl_tensor *t)
{
    double v = NAN;
    if (t) ddpl_tensor_item(t, &v);
    return v;
}

static void test_accumulation(void)
{
    ddpl_tensor *x = leaf(3.0);
    ddpl_tensor *y = ddpl_mul(x, x); /* x used twice: dy/dx = 2x */
    CHECK(ddpl_backward(y, NULL, true) == 0);
    CHECK_CLOSE(value(ddpl_tensor_grad(x)), 6.0, 1e-12);
    CHECK(ddpl_backward(y, NULL, false) == 0); /* accumulates */
    CHECK_CLOSE(value(ddpl_tensor_grad(x)), 12.0, 1e-12);
    CHECK(ddpl_backward(y, NULL, false) == -1); /* graph freed */
    CHECK(strstr(ddpl_last_error(), "second time") != NULL);
    ddpl_tensor_release(y);
    ddpl_tensor_release(x);
}

typedef struct {
    int calls;
    int order[4];
    int n;
} ready_log;

typedef struct {
    ready_log *log;
    int id;
} ready_ud;

static int on_ready(ddpl_tensor *t, void *ud)
{
    ready_ud *r = ud;
    r->log->calls++;
    if (r->log->n < 4) r->log->order[r->log->n++] = r->id;
    /* the gradient must already be final when the signal comes */
    return ddpl_tensor_grad(t) ? 0 : ddpl_error("grad missing in ready hook");
}

/* loss = w2 * (w1 * x): backward reaches w2 before w1, so w2's signal comes first (the
 * reducer's bucket order depends on this). */
static void test_grad_ready_order(void)
{
    ddpl_tensor *x = ddpl_scalar(2.0, DDPL_FLOAT64, ddpl_cpu());
    ddpl_tensor *w1 = leaf(3.0), *w2 = leaf(5.0);
    ready_log log = {0};
    ready_ud u1 = {&log, 1}, u2 = {&log, 2};
    CHECK(ddpl_tensor_register_grad_ready_hook(w1, on_ready, &u1, NULL) == 0);
    CHECK(ddpl_tensor_register_grad_ready_hook(w2, on_ready, &u2, NULL) == 0);
    ddpl_tensor *h = ddpl_mul(w1, x);
    ddpl_tensor *loss = ddpl_mul(w2, h);
    CHECK(ddpl_tensor_register_grad_ready_hook(h, on_ready, &u1, NULL) == -1); /* not a leaf */
    CHECK(ddpl_backward(loss, NULL, false) == 0);
    CHECK(log.calls == 2 && log.order[0] == 2 && log.order[1] == 1);
    CHECK_CLOSE(value(ddpl_tensor_grad(w1)), 10.0, 1e-12);
    CHECK_CLOSE(value(ddpl_tensor_grad(w2)), 6.0, 1e-12);
    ddpl_tensor *ts[] = {loss, h, w2, w1, x};
    for (int i = 0; i < 5; i++) ddpl_tensor_release(ts[i]);
}

static ddpl_tensor *double_it(ddpl_tensor *grad, void *ud, bool *failed)
{
    (*(int *)ud)++;
    ddpl_tensor *two = ddpl_wrapped_number(2.0, false);
    ddpl_tensor *r = ddpl_mul(grad, two);
    ddpl_tensor_release(two);
    *failed = r == NULL;
    return r;
}

static ddpl_tensor *fail_hook(ddpl_tensor *grad, void *ud, bool *failed)
{
    (void)grad;
    (void)ud;
    ddpl_error("hook refused");
    *failed = true;
    return NULL;
}

static void test_hooks(void)
{
    int calls = 0;
    ddpl_tensor *x = leaf(1.5);
    ddpl_tensor *y = ddpl_mul(x, x);
    ddpl_tensor *z = ddpl_exp(y);
    CHECK(ddpl_tensor_register_hook(y, double_it, &calls, NULL) == 0); /* non-leaf hook */
    CHECK(ddpl_tensor_retain_grad(y) == 0);
    CHECK(ddpl_backward(z, NULL, true) == 0);
    /* dz/dy = exp(y), doubled by the hook; dz/dx = 2 * exp(y) * 2x */
    CHECK(calls == 1);
    CHECK_CLOSE(value(ddpl_tensor_grad(y)), 2 * exp(2.25), 1e-12);
    CHECK_CLOSE(value(ddpl_tensor_grad(x)), 2 * exp(2.25) * 3.0, 1e-12);
    CHECK(ddpl_tensor_remove_hooks(y, &calls) == 1);
    CHECK(ddpl_tensor_register_hook(x, fail_hook, NULL, NULL) == 0);
    CHECK(ddpl_backward(z, NULL, false) == -1);
    CHECK(strstr(ddpl_last_error(), "hook refused") != NULL);
    ddpl_tensor_release(z);
    ddpl_tensor_release(y);
    ddpl_tensor_release(x);
}

static void test_autograd_grad_and_versions(void)
{
    ddpl_tensor *x = leaf(2.0), *y = leaf(4.0);
    ddpl_tensor *p = ddpl_mul(x, y);
    ddpl_tensor *ins[2] = {x, y}, *gs[2] = {0};
    CHECK(ddpl_autograd_grad(1, &p, NULL, 2, ins, gs, true, false) == 0);
    CHECK_CLOSE(value(gs[0]), 4.0, 1e-12);
    CHECK_CLOSE(value(gs[1]), 2.0, 1e-12);
    CHECK(ddpl_tensor_grad(x) == NULL); /* .grad untouched */
    ddpl_tensor_release(gs[0]);
    ddpl_tensor_release(gs[1]);
    int calls = 0; /* a leaf's hook also runs under autograd_grad */
    CHECK(ddpl_tensor_register_hook(x, double_it, &calls, NULL) == 0);
    CHECK(ddpl_autograd_grad(1, &p, NULL, 1, &x, gs, false, false) == 0);
    CHECK(calls == 1);
    CHECK_CLOSE(value(gs[0]), 8.0, 1e-12);
    ddpl_tensor_release(gs[0]);

    /* modifying a saved tensor in place is detected at backward */
    ddpl_tensor *a = ddpl_ones(1, (int64_t[]){3}, DDPL_FLOAT64, ddpl_cpu());
    ddpl_tensor *w = ddpl_ones(1, (int64_t[]){3}, DDPL_FLOAT64, ddpl_cpu());
    ddpl_tensor_set_requires_grad(w, true);
    ddpl_tensor *prod = ddpl_mul(w, a); /* saves a */
    ddpl_tensor *s = ddpl_sum(prod);
    CHECK(ddpl_fill_(a, 2.0) == 0);
    CHECK(ddpl_backward(s, NULL, false) == -1);
    CHECK(strstr(ddpl_last_error(), "modified by an inplace operation") != NULL);
    ddpl_tensor *ts[] = {s, prod, w, a, p, x, y};
    for (int i = 0; i < 7; i++) ddpl_tensor_release(ts[i]);
}

/* A 100k-node chain: backward and graph teardown must not recurse on the C stack. */
static void test_deep_chain(void)
{
    ddpl_tensor *x = leaf(1.0);
    ddpl_tensor *h = ddpl_tensor_retain(x);
    ddpl_tensor *one = ddpl_wrapped_number(1.0, false);
    for (int i = 0; i < 100000; i++) {
        ddpl_tensor *next = ddpl_add(h, one);
        ddpl_tensor_release(h);
        h = next;
    }
    CHECK_CLOSE(value(h), 100001.0, 1e-9);
    CHECK(ddpl_backward(h, NULL, false) == 0);
    CHECK_CLOSE(value(ddpl_tensor_grad(x)), 1.0, 1e-12);
    ddpl_tensor_release(h); /* frees 100k nodes */
    ddpl_tensor_release(one);
    ddpl_tensor_release(x);
}

static void test_no_grad(void)
{
    ddpl_tensor *x = leaf(1.0);
    bool prev = ddpl_set_grad_enabled(false);
    ddpl_tensor *y = ddpl_mul(x, x);
    CHECK(!ddpl_tensor_requires_grad(y) && ddpl_tensor_grad_fn_name(y) == NULL);
    ddpl_set_grad_enabled(prev);
    ddpl_tensor *z = ddpl_mul(x, x);
    CHECK(ddpl_tensor_requires_grad(z) && ddpl_tensor_grad_fn_name(z) != NULL);
    ddpl_tensor *d = ddpl_detach(z);
    CHECK(!ddpl_tensor_requires_grad(d));
    CHECK(ddpl_backward(d, NULL, false) == -1); /* nothing to differentiate */
    ddpl_tensor *ts[] = {d, z, y, x};
    for (int i = 0; i < 4; i++) ddpl_tensor_release(ts[i]);
}

/* A Linear weight reaches matmul as the view W.t(); its gradient must come back in W's own
 * layout (contiguous), not as a transposed view that AccumulateGrad would have to copy. */
static void test_linear_weight_grad_layout(void)
{
    ddpl_tensor *x = ddpl_randn(2, (int64_t[]){4, 3}, DDPL_FLOAT64, ddpl_cpu());
    ddpl_tensor *w = ddpl_randn(2, (int64_t[]){5, 3}, DDPL_FLOAT64, ddpl_cpu());
    ddpl_tensor_set_requires_grad(w, true);
    ddpl_tensor *y = ddpl_linear(x, w, NULL);
    ddpl_tensor *s = ddpl_sum(y);
    CHECK(ddpl_backward(s, NULL, false) == 0);
    ddpl_tensor *g = ddpl_tensor_grad(w);
    CHECK(g && ddpl_tensor_is_contiguous(g) && ddpl_tensor_size(g, 0) == 5);
    /* d sum(x @ w^T) / dw[o][i] = sum over rows of x[:, i] */
    double xv[12], gv[15];
    ddpl_tensor_to_doubles(x, xv);
    ddpl_tensor_to_doubles(g, gv);
    for (int o = 0; o < 5; o++)
        for (int i = 0; i < 3; i++)
            CHECK_CLOSE(gv[o * 3 + i], xv[i] + xv[3 + i] + xv[6 + i] + xv[9 + i], 1e-12);
    ddpl_tensor *ts[] = {s, y, w, x};
    for (int i = 0; i < 4; i++) ddpl_tensor_release(ts[i]);
}

/* Elements [at, at + rows*cols) of buf as a contiguous (rows, cols) view. */
static ddpl_tensor *slot(ddpl_tensor *buf, int64_t at, int64_t rows, int64_t cols)
{
    ddpl_tensor *n = ddpl_narrow(buf, 0, at, rows * cols);
    ddpl_tensor *v = ddpl_view(n, 2, (int64_t[]){rows, cols});
    ddpl_tensor_release(n);
    return v;
}

static bool all_close(ddpl_tensor *a, ddpl_tensor *b, double scale)
{
    int64_t n = ddpl_tensor_numel(a);
    double av[64], bv[64];
    if (n != ddpl_tensor_numel(b) || n > 64) return false;
    ddpl_tensor_to_doubles(a, av);
    ddpl_tensor_to_doubles(b, bv);
    for (int64_t i = 0; i < n; i++)
        if (fabs(av[i] - scale * bv[i]) > 1e-12) return false;
    return true;
}

/* sum((x @ w^T + b)^2) through linear, or through mm when w is (in, out); backward. */
static int linear_loss_backward(ddpl_tensor *x, ddpl_tensor *w, ddpl_tensor *b, bool twice)
{
    ddpl_tensor *y =
        ddpl_tensor_size(w, 0) == ddpl_tensor_size(x, 1) ? ddpl_mm(x, w) : ddpl_linear(x, w, b);
    if (twice) {
        ddpl_tensor *y2 = ddpl_linear(x, w, b), *s = ddpl_add(y, y2);
        ddpl_tensor_release(y);
        ddpl_tensor_release(y2);
        y = s;
    }
    ddpl_tensor *sq = ddpl_mul(y, y), *s = ddpl_sum(sq);
    int rc = ddpl_backward(s, NULL, false);
    ddpl_tensor *ts[] = {s, sq, y};
    for (int i = 0; i < 3; i++) ddpl_tensor_release(ts[i]);
    return rc;
}

/* A leaf with a gradient home gets its gradient computed into the home (a Linear weight through
 * its transpose, an mm operand directly) and .grad over that memory; the same values as
 * without; new memory when the leaf has .grad already, is used twice, has a hook, or for
 * autograd.grad. */
static void test_grad_home(void)
{
    ddpl_device cpu = ddpl_cpu();
    ddpl_tensor *x = ddpl_randn(2, (int64_t[]){4, 3}, DDPL_FLOAT64, cpu);
    ddpl_tensor *w = ddpl_randn(2, (int64_t[]){5, 3}, DDPL_FLOAT64, cpu);
    ddpl_tensor *b = ddpl_randn(1, (int64_t[]){5}, DDPL_FLOAT64, cpu);
    ddpl_tensor *w_ref = ddpl_clone(w), *b_ref = ddpl_clone(b);
    ddpl_tensor *ps[] = {w, b, w_ref, b_ref};
    for (int i = 0; i < 4; i++) ddpl_tensor_set_requires_grad(ps[i], true);
    CHECK(linear_loss_backward(x, w_ref, b_ref, false) == 0);
    ddpl_tensor *g_ref = ddpl_tensor_grad(w_ref);

    ddpl_tensor *buf = ddpl_zeros(1, (int64_t[]){64}, DDPL_FLOAT64, cpu);
    ddpl_tensor *home = slot(buf, 7, 5, 3), *bhome = ddpl_narrow(buf, 0, 25, 5);
    CHECK(ddpl_tensor_set_grad_home(w, home, false) == 0);
    /* the bias's gradient (a sum, not a product) cannot go home; it must not keep the weight's
     * from doing so, though both come from the same node */
    CHECK(ddpl_tensor_set_grad_home(b, bhome, false) == 0);
    CHECK(linear_loss_backward(x, w, b, false) == 0);
    ddpl_tensor *g = ddpl_tensor_grad(w);
    CHECK(g && ddpl_tensor_data(g) == ddpl_tensor_data(home) && ddpl_tensor_is_contiguous(g));
    CHECK(all_close(g, g_ref, 1.0) && all_close(home, g_ref, 1.0));
    CHECK(ddpl_tensor_data(ddpl_tensor_grad(b)) != ddpl_tensor_data(bhome));
    CHECK(all_close(ddpl_tensor_grad(b), ddpl_tensor_grad(b_ref), 1.0));
    CHECK(ddpl_tensor_set_grad_home(b, NULL, false) == 0);
    ddpl_tensor_release(bhome);
    /* .grad present: accumulated in place, where it is */
    CHECK(linear_loss_backward(x, w, b, false) == 0);
    CHECK(ddpl_tensor_grad(w) == g && all_close(home, g_ref, 2.0));

    /* used twice (two gradients summed), a tensor hook, autograd.grad: new memory */
    CHECK(ddpl_tensor_set_grad(w, NULL) == 0 && ddpl_fill_(buf, 0.0) == 0);
    CHECK(linear_loss_backward(x, w, b, true) == 0);
    CHECK(ddpl_tensor_data(ddpl_tensor_grad(w)) != ddpl_tensor_data(home));
    int calls = 0;
    CHECK(ddpl_tensor_set_grad(w, NULL) == 0);
    CHECK(ddpl_tensor_register_hook(w, double_it, &calls, NULL) == 0);
    CHECK(linear_loss_backward(x, w, b, false) == 0);
    CHECK(calls == 1 && ddpl_tensor_data(ddpl_tensor_grad(w)) != ddpl_tensor_data(home));
    CHECK(all_close(ddpl_tensor_grad(w), g_ref, 2.0));
    CHECK(ddpl_tensor_remove_hooks(w, &calls) == 1);
    CHECK(ddpl_tensor_set_grad(w, NULL) == 0);
    ddpl_tensor *y = ddpl_linear(x, w, b), *s = ddpl_sum(y), *gs[1] = {NULL};
    CHECK(ddpl_autograd_grad(1, &s, NULL, 1, &w, gs, false, false) == 0);
    CHECK(gs[0] && ddpl_tensor_data(gs[0]) != ddpl_tensor_data(home));
    CHECK(ddpl_tensor_grad(w) == NULL);
    double hv[15];
    ddpl_tensor_to_doubles(home, hv);
    for (int i = 0; i < 15; i++) CHECK(hv[i] == 0.0);
    ddpl_tensor_release(gs[0]);
    ddpl_tensor_release(s);
    ddpl_tensor_release(y);

    /* an mm operand (in, out) without a transpose: straight into its home */
    ddpl_tensor *v = ddpl_randn(2, (int64_t[]){3, 2}, DDPL_FLOAT64, cpu), *v_ref = ddpl_clone(v);
    ddpl_tensor_set_requires_grad(v, true);
    ddpl_tensor_set_requires_grad(v_ref, true);
    ddpl_tensor *vhome = slot(buf, 40, 3, 2);
    CHECK(ddpl_tensor_set_grad_home(v, vhome, false) == 0);
    CHECK(linear_loss_backward(x, v, NULL, false) == 0);
    CHECK(linear_loss_backward(x, v_ref, NULL, false) == 0);
    CHECK(ddpl_tensor_data(ddpl_tensor_grad(v)) == ddpl_tensor_data(vhome));
    CHECK(all_close(ddpl_tensor_grad(v), ddpl_tensor_grad(v_ref), 1.0));

    /* a home must match the leaf */
    ddpl_tensor *wrong = slot(buf, 0, 3, 5);
    CHECK(ddpl_tensor_set_grad_home(w, wrong, false) == -1);
    CHECK(strstr(ddpl_last_error(), "shape [5,3]") != NULL);
    CHECK(ddpl_tensor_set_grad_home(w, NULL, false) == 0 &&
          ddpl_tensor_set_grad_home(v, NULL, false) == 0);
    ddpl_tensor *ts[] = {wrong, vhome, v_ref, v, home, buf, b_ref, w_ref, b, w, x};
    for (int i = 0; i < 11; i++) ddpl_tensor_release(ts[i]);
}

/* A sole-owner home belongs to the gradient alone: a .grad kept from the step before moves to a
 * copy of its own (same values) before backward computes the new gradient into the home. */
static void test_grad_home_sole_owner(void)
{
    ddpl_device cpu = ddpl_cpu();
    ddpl_tensor *x1 = ddpl_randn(2, (int64_t[]){4, 3}, DDPL_FLOAT64, cpu);
    ddpl_tensor *x2 = ddpl_randn(2, (int64_t[]){4, 3}, DDPL_FLOAT64, cpu);
    ddpl_tensor *w = ddpl_randn(2, (int64_t[]){5, 3}, DDPL_FLOAT64, cpu), *w_ref = ddpl_clone(w);
    ddpl_tensor_set_requires_grad(w, true);
    ddpl_tensor_set_requires_grad(w_ref, true);
    ddpl_tensor *home = ddpl_zeros(2, (int64_t[]){5, 3}, DDPL_FLOAT64, cpu);
    ddpl_tensor *big = ddpl_zeros(1, (int64_t[]){20}, DDPL_FLOAT64, cpu),
                *part = slot(big, 0, 5, 3);
    CHECK(ddpl_tensor_set_grad_home(w, part, true) == -1); /* not its whole storage */
    CHECK(strstr(ddpl_last_error(), "whole storage") != NULL);
    ddpl_tensor_release(part);
    ddpl_tensor_release(big);
    CHECK(ddpl_tensor_set_grad_home(w, home, true) == 0);
    CHECK(linear_loss_backward(x1, w, NULL, false) == 0);
    ddpl_tensor *kept = ddpl_tensor_retain(ddpl_tensor_grad(w)), *kept_view = ddpl_t(kept);
    CHECK(ddpl_tensor_data(kept) == ddpl_tensor_data(home));
    ddpl_tensor *first = ddpl_clone(kept);
    CHECK(ddpl_tensor_set_grad(w, NULL) == 0);
    CHECK(linear_loss_backward(x2, w, NULL, false) == 0);
    CHECK(linear_loss_backward(x2, w_ref, NULL, false) == 0);
    ddpl_tensor *g = ddpl_tensor_grad(w);
    CHECK(ddpl_tensor_data(g) == ddpl_tensor_data(home) &&
          all_close(g, ddpl_tensor_grad(w_ref), 1.0));
    CHECK(ddpl_tensor_data(kept) != ddpl_tensor_data(home) && all_close(kept, first, 1.0));
    ddpl_tensor *kept_view_t = ddpl_t(kept_view); /* the view moved with it */
    CHECK(all_close(kept_view_t, first, 1.0));
    CHECK(ddpl_tensor_set_grad_home(w, NULL, false) == 0);
    ddpl_tensor *ts[] = {kept_view_t, first, kept_view, kept, home, w_ref, w, x2, x1};
    for (int i = 0; i < 9; i++) ddpl_tensor_release(ts[i]);
}

/* Leaves a backward from the roots would reach: through a graph, a leaf root itself; not a
 * leaf outside the graph, nor anything from a root that requires no grad. */
static void test_leaves_reached(void)
{
    ddpl_tensor *x = leaf(2.0), *y = leaf(3.0), *u = leaf(4.0);
    ddpl_tensor *c = ddpl_scalar(5.0, DDPL_FLOAT64, ddpl_cpu()), *z = ddpl_mul(x, c);
    ddpl_tensor *roots[] = {z, y, c}, *leaves[] = {x, y, u};
    bool reached[3];
    ddpl_leaves_reached(3, roots, 3, leaves, reached);
    CHECK(reached[0] && reached[1] && !reached[2]);
    ddpl_leaves_reached(1, &c, 3, leaves, reached);
    CHECK(!reached[0] && !reached[1] && !reached[2]);
    ddpl_tensor *ts[] = {z, c, u, y, x};
    for (int i = 0; i < 5; i++) ddpl_tensor_release(ts[i]);
}

/* A sole-owner home replaced by another takes the .grad living in it along (views of it too),
 * replaced by none it leaves what lies in it memory of its own; before a write from outside
 * backward, tensors over a home other than .grad move out. Values never change. */
static void test_grad_home_replace(void)
{
    ddpl_device cpu = ddpl_cpu();
    ddpl_tensor *x = ddpl_randn(2, (int64_t[]){4, 3}, DDPL_FLOAT64, cpu);
    ddpl_tensor *w = ddpl_randn(2, (int64_t[]){5, 3}, DDPL_FLOAT64, cpu);
    ddpl_tensor_set_requires_grad(w, true);
    ddpl_tensor *old = ddpl_zeros(2, (int64_t[]){5, 3}, DDPL_FLOAT64, cpu);
    ddpl_tensor *home = ddpl_zeros(2, (int64_t[]){5, 3}, DDPL_FLOAT64, cpu);
    CHECK(ddpl_tensor_set_grad_home(w, old, true) == 0);
    CHECK(linear_loss_backward(x, w, NULL, false) == 0);
    ddpl_tensor *g = ddpl_tensor_grad(w), *g_view = ddpl_t(g), *values = ddpl_clone(g);
    CHECK(ddpl_tensor_data(g) == ddpl_tensor_data(old));

    CHECK(ddpl_grad_home_replace(w, home, true) == 0);
    CHECK(ddpl_grad_home_of(w) == home && ddpl_tensor_grad(w) == g);
    CHECK(ddpl_tensor_data(g) == ddpl_tensor_data(home) && all_close(g, values, 1.0));
    ddpl_tensor *g_view_t = ddpl_t(g_view);
    CHECK(ddpl_tensor_data(g_view) == ddpl_tensor_data(home) && all_close(g_view_t, values, 1.0));
    ddpl_tensor_release(g_view_t);

    CHECK(ddpl_grad_home_prepare_write(w) == 0); /* g_view besides .grad: both move out */
    CHECK(ddpl_tensor_data(g) != ddpl_tensor_data(home) && all_close(g, values, 1.0));
    CHECK(ddpl_tensor_data(g_view) == ddpl_tensor_data(g));

    CHECK(ddpl_tensor_set_grad(w, NULL) == 0 && ddpl_fill_(home, 0.0) == 0);
    CHECK(linear_loss_backward(x, w, NULL, false) == 0);
    g = ddpl_tensor_grad(w);
    CHECK(ddpl_tensor_data(g) == ddpl_tensor_data(home));
    CHECK(ddpl_grad_home_replace(w, NULL, false) == 0 && ddpl_grad_home_of(w) == NULL);
    CHECK(ddpl_tensor_data(g) != ddpl_tensor_data(home) && all_close(g, values, 1.0));
    CHECK(ddpl_fill_(home, 0.0) == 0 && all_close(g, values, 1.0));
    ddpl_tensor *ts[] = {values, g_view, home, old, w, x};
    for (int i = 0; i < 6; i++) ddpl_tensor_release(ts[i]);
}

/* op_temps (ops/op_util.h): a formula that keeps more temporaries than the set has room for
 * fails with a message naming the limit, and releases what it kept. */
static void test_op_temps_limit(void)
{
    op_temps k = {0};
    for (int i = 0; i < 32; i++) CHECK(OP_NUM(&k, 1.0) != NULL);
    CHECK(OP_NUM(&k, 2.0) == NULL);
    CHECK(strstr(ddpl_last_error(), "more than 32 temporaries") != NULL);
    CHECK(k.failed);
    op_temps_release(&k);
}

int main(void)
{
    test_linear_weight_grad_layout();
    test_grad_home();
    test_grad_home_sole_owner();
    test_grad_home_replace();
    test_leaves_reached();
    test_accumulation();
    test_grad_ready_order();
    test_hooks();
    test_autograd_grad_and_versions();
    test_deep_chain();
    test_no_grad();
    test_op_temps_limit();
    CHECK(ddpl_memory_allocated(DDPL_CPU) == 0);
    return check_finish();
}
