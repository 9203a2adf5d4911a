/* ops/pointwise.c: binary pointwise ops (broadcasting, dtype promotion, autograd) and the
 * helpers every pointwise op shares.
 * defines: ddpl_add, ddpl_sub, ddpl_mul, ddpl_div, ddpl_pow, ddpl_maximum, ddpl_minimum,
 *          ddpl_add_scaled, ddpl_eq, ddpl_ne, ddpl_lt, ddpl_le, ddpl_gt, ddpl_ge, ddpl_where,
 *          ddpl_masked_fill, and the kin_* / pw_* helpers of pointwise.h. */
#include <math.h>

#include "pointwise.h"

/* ---- helpers (pointwise.h) ---- */

/* hdr <- src's geometry broadcast to (ndim, sizes): stride 0 on new and size-1 dims. */
static void view_broadcast(ddpl_tensor *hdr, const ddpl_tensor *src, int ndim, const int64_t *sizes)
{
    memcpy(hdr, src, sizeof *hdr);
    hdr->autograd = NULL; /* a kernel's operand: src's history is not the header's */
    int lead = ndim - src->ndim;
    for (int d = 0; d < ndim; d++) {
        int sd = d - lead;
        hdr->sizes[d] = sizes[d];
        hdr->strides[d] = (sd < 0 || src->sizes[sd] != sizes[d]) ? 0 : src->strides[sd];
    }
    hdr->ndim = (int8_t)ndim;
}

/* A one-element CPU tensor of dtype dt holding the bytes in k->scalar. */
static void stack_scalar(kernel_input *k, ddpl_dtype dt, int ndim, const int64_t *sizes)
{
    memset(&k->store, 0, sizeof k->store);
    k->store.data = k->scalar;
    k->store.nbytes = ddpl_dtype_size(dt);
    k->store.device = ddpl_cpu();
    ddpl_tensor base;
    memset(&base, 0, sizeof base);
    base.storage = &k->store;
    base.dtype = (uint8_t)dt;
    base.device = ddpl_cpu();
    view_broadcast(&k->hdr, &base, ndim, sizes);
}

int kin_prepare(kernel_input *k, ddpl_tensor *t, ddpl_dtype dt, ddpl_device dev, int ndim,
                const int64_t *sizes)
{
    k->owned = NULL;
    bool same_dev = ddpl_same_device(t->device, dev);
    if (t->dtype == dt && same_dev) {
        view_broadcast(&k->hdr, t, ndim, sizes);
        return 0;
    }
    if (dev.type == DDPL_CPU && t->device.type == DDPL_CPU && ddpl_tensor_numel(t) == 1) {
        /* integers convert through int64 so that large values stay exact */
        const char *p = ddpl_data_ptr(t);
        if (ddpl_dtype_is_integral(dt) && ddpl_dtype_is_integral((ddpl_dtype)t->dtype))
            ddpl_store_i64(k->scalar, dt, ddpl_load_i64(p, (ddpl_dtype)t->dtype));
        else
            ddpl_store_f64(k->scalar, dt, ddpl_load_f64(p, (ddpl_dtype)t->dtype));
        stack_scalar(k, dt, ndim, sizes);
        return 0;
    }
    bool prev = ddpl_grad_mode_set(false); /* the op records its own history */
    k->owned = ddpl_to(t, dt, dev);
    ddpl_grad_mode_set(prev);
    if (!k->owned) return -1;
    view_broadcast(&k->hdr, k->owned, ndim, sizes);
    return 0;
}

int kin_scalar(kernel_input *k, double value, ddpl_dtype dt, ddpl_device dev, int ndim,
               const int64_t *sizes)
{
    k->owned = NULL;
    if (dev.type == DDPL_CPU) {
        ddpl_store_f64(k->scalar, dt, value);
        stack_scalar(k, dt, ndim, sizes);
        return 0;
    }
    k->owned = ddpl_scalar(value, dt, dev);
    if (!k->owned) return -1;
    view_broadcast(&k->hdr, k->owned, ndim, sizes);
    return 0;
}

void kin_release(kernel_input *k)
{
    ddpl_tensor_release(k->owned);
    k->owned = NULL;
}

int pw_pick_device(const char *op, int n, ddpl_tensor *const *ts, ddpl_device *dev)
{
    /* the first operand that is not a CPU scalar decides; the rest must agree or be scalars */
    const ddpl_tensor *lead = ts[0];
    for (int i = 0; i < n; i++)
        if (!(ts[i]->ndim == 0 && ts[i]->device.type == DDPL_CPU)) {
            lead = ts[i];
            break;
        }
    for (int i = 0; i < n; i++) {
        bool cpu_scalar = ts[i]->ndim == 0 && ts[i]->device.type == DDPL_CPU;
        if (!cpu_scalar && ddpl_check_same_device(op, lead, ts[i]) < 0) return -1;
    }
    *dev = lead->device;
    return 0;
}

bool pw_can_cast(ddpl_dtype from, ddpl_dtype to)
{
    if (ddpl_dtype_is_floating(from) && !ddpl_dtype_is_floating(to)) return false;
    if (from != DDPL_BOOL && to == DDPL_BOOL) return false;
    return true;
}

ddpl_tensor *pw_grad_to_input(ddpl_node *n, int i, ddpl_tensor *g)
{
    if (!g) return NULL;
    ddpl_edge *e = &n->edges[i];
    ddpl_tensor *r = ddpl_sum_to(g, e->ndim, e->sizes);
    ddpl_tensor_release(g);
    if (r && !ddpl_same_device(r->device, e->device)) {
        ddpl_tensor *moved = ddpl_to(r, (ddpl_dtype)r->dtype, e->device);
        ddpl_tensor_release(r);
        r = moved;
    }
    return r;
}

bool pw_scalar_is_integral(double v)
{
    return v == floor(v) && fabs(v) <= 9.2233720368547758e18;
}

ddpl_tensor *pw_wrapped(double v)
{
    return ddpl_wrapped_number(v, pw_scalar_is_integral(v));
}

/* ---- the binary forward ---- */

/* out = kop(a, b) computed in dtype `compute`, written as out_dt; no autograd (pointwise.h). */
ddpl_tensor *pw_binary_forward(const char *op, ddpl_op kop, ddpl_tensor *a, ddpl_tensor *b,
                               ddpl_dtype compute, ddpl_dtype out_dt, const void *params)
{
    ddpl_device dev;
    int nd;
    int64_t sizes[DDPL_MAX_DIMS];
    if (pw_pick_device(op, 2, OP_INPUTS(a, b), &dev) < 0 ||
        ddpl_broadcast_shape(op, a->ndim, a->sizes, b->ndim, b->sizes, &nd, sizes) < 0)
        return NULL;
    kernel_input ka, kb;
    if (kin_prepare(&ka, a, compute, dev, nd, sizes) < 0) return NULL;
    if (kin_prepare(&kb, b, compute, dev, nd, sizes) < 0) {
        kin_release(&ka);
        return NULL;
    }
    ddpl_tensor *out = ddpl_tensor_new(nd, sizes, out_dt, dev);
    ddpl_tensor *ins[2] = {&ka.hdr, &kb.hdr};
    if (out && ddpl_run_kernel(kop, dev, &out, ins, params) < 0) {
        ddpl_tensor_release(out);
        out = NULL;
    }
    kin_release(&ka);
    kin_release(&kb);
    return out;
}

static ddpl_tensor *arith_forward(const char *op, ddpl_op kop, ddpl_tensor *a, ddpl_tensor *b,
                                  const void *params)
{
    ddpl_dtype dt = ddpl_result_type(2, OP_INPUTS(a, b));
    return pw_binary_forward(op, kop, a, b, dt, dt, params);
}

/* ---- backward formulas: gradients at the output's shape, then pw_grad_to_input ---- */

typedef struct {
    double alpha;
} alpha_ctx;

/* add: da = g, db = alpha g; sub: db = -alpha g */
static int add_backward(ddpl_node *n, ddpl_tensor *grad, ddpl_tensor **gi)
{
    double alpha = DDPL_NODE_CTX(n, alpha_ctx)->alpha;
    if (ddpl_node_needs_grad(n, 0))
        if (!(gi[0] = pw_grad_to_input(n, 0, ddpl_tensor_retain(grad)))) return -1;
    if (ddpl_node_needs_grad(n, 1)) {
        ddpl_tensor *s = pw_wrapped(alpha);
        ddpl_tensor *g = alpha == 1.0 ? ddpl_tensor_retain(grad) : ddpl_mul(grad, s);
        ddpl_tensor_release(s);
        if (!(gi[1] = pw_grad_to_input(n, 1, g))) return -1;
    }
    return 0;
}

static ddpl_tensor *record_add(ddpl_tensor *out, ddpl_tensor *a, ddpl_tensor *b, double alpha,
                               const char *name)
{
    ddpl_tensor *ins[2] = {a, b};
    if (out && ddpl_grad_needed(2, ins)) {
        ddpl_node *n = ddpl_node_new(name, add_backward, 2, ins);
        DDPL_NODE_CTX(n, alpha_ctx)->alpha = alpha;
        ddpl_set_history(out, n);
    }
    return out;
}

/* Integer results cannot take a fractional alpha (PyTorch's rule). */
static int check_alpha(const char *op, ddpl_dtype dt, double alpha)
{
    if (ddpl_dtype_is_integral(dt) && !pw_scalar_is_integral(alpha))
        return ddpl_error("%s: for integral input tensors, argument alpha must not be a floating "
                          "point number (got %g)",
                          op, alpha);
    return 0;
}

ddpl_tensor *ddpl_add_scaled(ddpl_tensor *a, ddpl_tensor *b, double alpha)
{
    ddpl_dtype dt = ddpl_result_type(2, OP_INPUTS(a, b));
    if (check_alpha("add", dt, alpha) < 0) return NULL;
    ddpl_alpha_params p = {alpha};
    ddpl_tensor *out = pw_binary_forward("add", DDPL_OP_ADD, a, b, dt, dt, &p);
    return record_add(out, a, b, alpha, "AddBackward0");
}

ddpl_tensor *ddpl_add(ddpl_tensor *a, ddpl_tensor *b)
{
    return ddpl_add_scaled(a, b, 1.0);
}

ddpl_tensor *ddpl_sub(ddpl_tensor *a, ddpl_tensor *b)
{
    if (a->dtype == DDPL_BOOL || b->dtype == DDPL_BOOL)
        return ddpl_error("sub: subtraction with a bool tensor is not supported (got %s and %s); "
                          "to invert a mask use logical_not",
                          ddpl_dtype_name((ddpl_dtype)a->dtype),
                          ddpl_dtype_name((ddpl_dtype)b->dtype)),
               NULL;
    ddpl_dtype dt = ddpl_result_type(2, OP_INPUTS(a, b));
    ddpl_alpha_params p = {1.0};
    ddpl_tensor *out = pw_binary_forward("sub", DDPL_OP_SUB, a, b, dt, dt, &p);
    return record_add(out, a, b, -1.0, "SubBackward0");
}

/* mul: da = g b, db = g a (saved: slot 0 = a, slot 1 = b, each only when the other side needs
 * its gradient) */
static int mul_backward(ddpl_node *n, ddpl_tensor *grad, ddpl_tensor **gi)
{
    for (int i = 0; i < 2; i++) {
        if (!ddpl_node_needs_grad(n, i)) continue;
        ddpl_tensor *other = ddpl_node_saved(n, 1 - i);
        if (!other) return -1;
        if (!(gi[i] = pw_grad_to_input(n, i, ddpl_mul(grad, other)))) return -1;
    }
    return 0;
}

ddpl_tensor *ddpl_mul(ddpl_tensor *a, ddpl_tensor *b)
{
    ddpl_tensor *out = arith_forward("mul", DDPL_OP_MUL, a, b, NULL);
    ddpl_tensor *ins[2] = {a, b};
    if (out && ddpl_grad_needed(2, ins)) {
        ddpl_node *n = ddpl_node_new("MulBackward0", mul_backward, 2, ins);
        ddpl_node_save(n, ddpl_requires_grad(b) ? a : NULL);
        ddpl_node_save(n, ddpl_requires_grad(a) ? b : NULL);
        ddpl_set_history(out, n);
    }
    return out;
}

/* div: da = g / b, db = -g a / b^2 (saved: a, b) */
static int div_backward(ddpl_node *n, ddpl_tensor *grad, ddpl_tensor **gi)
{
    ddpl_tensor *a = ddpl_node_saved(n, 0), *b = ddpl_node_saved(n, 1);
    if (!b || (!a && !ddpl_node_saved_is_null(n, 0))) return -1;
    if (ddpl_node_needs_grad(n, 0))
        if (!(gi[0] = pw_grad_to_input(n, 0, ddpl_div(grad, b)))) return -1;
    if (ddpl_node_needs_grad(n, 1)) {
        ddpl_tensor *ga = ddpl_mul(grad, a);
        ddpl_tensor *bb = ddpl_mul(b, b);
        ddpl_tensor *q = ga && bb ? ddpl_div(ga, bb) : NULL;
        ddpl_tensor *neg = q ? ddpl_neg(q) : NULL;
        ddpl_tensor_release(ga);
        ddpl_tensor_release(bb);
        ddpl_tensor_release(q);
        if (!(gi[1] = pw_grad_to_input(n, 1, neg))) return -1;
    }
    return 0;
}

ddpl_tensor *ddpl_div(ddpl_tensor *a, ddpl_tensor *b)
{
    ddpl_dtype dt = ddpl_result_type(2, OP_INPUTS(a, b));
    if (!ddpl_dtype_is_floating(dt)) dt = ddpl_default_float_dtype(); /* true division */
    ddpl_tensor *out = pw_binary_forward("div", DDPL_OP_DIV, a, b, dt, dt, NULL);
    ddpl_tensor *ins[2] = {a, b};
    if (out && ddpl_grad_needed(2, ins)) {
        ddpl_node *n = ddpl_node_new("DivBackward0", div_backward, 2, ins);
        ddpl_node_save(n, ddpl_requires_grad(b) ? a : NULL);
        ddpl_node_save(n, b);
        ddpl_set_history(out, n);
    }
    return out;
}

/* pow, as PyTorch: da = g b a^(b-1), zero where b == 0 (so 0^0 does not give 0 * inf);
 * db = g a^b log(a), zero where a == 0 and b >= 0 (the limit; log(0) = -inf otherwise).
 * saved: a, b, output */
static int pow_backward(ddpl_node *n, ddpl_tensor *grad, ddpl_tensor **gi)
{
    ddpl_tensor *a = ddpl_node_saved(n, 0), *b = ddpl_node_saved(n, 1),
                *out = ddpl_node_saved(n, 2);
    if (!a || !b || !out) return -1;
    ddpl_tensor *zero = ddpl_wrapped_number(0, true), *one = ddpl_wrapped_number(1, true);
    int rc = -1;
    if (ddpl_node_needs_grad(n, 0)) {
        ddpl_tensor *bm1 = ddpl_sub(b, one);
        ddpl_tensor *p = bm1 ? ddpl_pow(a, bm1) : NULL;
        ddpl_tensor *bp = p ? ddpl_mul(b, p) : NULL;
        ddpl_tensor *gbp = bp ? ddpl_mul(grad, bp) : NULL;
        ddpl_tensor *b0 = gbp ? ddpl_eq(b, zero) : NULL;
        ddpl_tensor *g = b0 ? ddpl_where(b0, zero, gbp) : NULL;
        ddpl_tensor *tmp[] = {bm1, p, bp, gbp, b0};
        for (int i = 0; i < 5; i++) ddpl_tensor_release(tmp[i]);
        if (!(gi[0] = pw_grad_to_input(n, 0, g))) goto done;
    }
    if (ddpl_node_needs_grad(n, 1)) {
        ddpl_tensor *la = ddpl_log(a);
        ddpl_tensor *ol = la ? ddpl_mul(out, la) : NULL;
        ddpl_tensor *gol = ol ? ddpl_mul(grad, ol) : NULL;
        ddpl_tensor *a0 = gol ? ddpl_eq(a, zero) : NULL;
        ddpl_tensor *bpos = a0 ? ddpl_ge(b, zero) : NULL;
        /* a == 0 and b >= 0, as a product of bools (an and) */
        ddpl_tensor *mask = bpos ? ddpl_mul(a0, bpos) : NULL;
        ddpl_tensor *g = mask ? ddpl_where(mask, zero, gol) : NULL;
        ddpl_tensor *tmp[] = {la, ol, gol, a0, bpos, mask};
        for (int i = 0; i < 6; i++) ddpl_tensor_release(tmp[i]);
        if (!(gi[1] = pw_grad_to_input(n, 1, g))) goto done;
    }
    rc = 0;
done:
    ddpl_tensor_release(zero);
    ddpl_tensor_release(one);
    return rc;
}

ddpl_tensor *ddpl_pow(ddpl_tensor *a, ddpl_tensor *b)
{
    ddpl_dtype dt = ddpl_result_type(2, OP_INPUTS(a, b));
    if (ddpl_dtype_is_integral(dt) && b->wrapped_number) {
        int64_t e = 0;
        ddpl_tensor_item_int64(b, &e);
        if (e < 0)
            return ddpl_error("pow: integers to negative integer powers are not allowed (base "
                              "%s, exponent %lld)",
                              ddpl_dtype_name((ddpl_dtype)a->dtype), (long long)e),
                   NULL;
    }
    ddpl_tensor *out = pw_binary_forward("pow", DDPL_OP_POW, a, b, dt, dt, NULL);
    ddpl_tensor *ins[2] = {a, b};
    if (out && ddpl_grad_needed(2, ins)) {
        ddpl_node *n = ddpl_node_new("PowBackward0", pow_backward, 2, ins);
        ddpl_node_save(n, a);
        ddpl_node_save(n, b);
        ddpl_node_save_output(n, out);
        ddpl_set_history(out, n);
    }
    return out;
}

/* maximum/minimum: the gradient goes to the larger (smaller) side, half to each on ties, as
 * PyTorch does. saved: a, b; ctx: which one */
typedef struct {
    bool is_max;
} minmax_ctx;

static int minmax_backward(ddpl_node *n, ddpl_tensor *grad, ddpl_tensor **gi)
{
    bool is_max = DDPL_NODE_CTX(n, minmax_ctx)->is_max;
    ddpl_tensor *a = ddpl_node_saved(n, 0), *b = ddpl_node_saved(n, 1);
    if (!a || !b) return -1;
    ddpl_tensor *half = ddpl_wrapped_number(0.5, false), *zero = ddpl_wrapped_number(0, true);
    ddpl_tensor *ties = ddpl_eq(a, b);
    ddpl_tensor *hg = ties ? ddpl_mul(grad, half) : NULL;
    ddpl_tensor *shared = hg ? ddpl_where(ties, hg, grad) : NULL; /* g, halved on ties */
    int rc = shared ? 0 : -1;
    for (int i = 0; rc == 0 && i < 2; i++) {
        if (!ddpl_node_needs_grad(n, i)) continue;
        /* input i loses where the other side wins */
        ddpl_tensor *x = i == 0 ? a : b, *y = i == 0 ? b : a;
        ddpl_tensor *loses = is_max ? ddpl_lt(x, y) : ddpl_gt(x, y);
        ddpl_tensor *g = loses ? ddpl_where(loses, zero, shared) : NULL;
        ddpl_tensor_release(loses);
        if (!(gi[i] = pw_grad_to_input(n, i, g))) rc = -1;
    }
    ddpl_tensor *tmp[] = {half, zero, ties, hg, shared};
    for (int i = 0; i < 5; i++) ddpl_tensor_release(tmp[i]);
    return rc;
}

static ddpl_tensor *minmax(const char *op, ddpl_op kop, ddpl_tensor *a, ddpl_tensor *b, bool is_max)
{
    ddpl_tensor *out = arith_forward(op, kop, a, b, NULL);
    ddpl_tensor *ins[2] = {a, b};
    if (out && ddpl_grad_needed(2, ins)) {
        ddpl_node *n = ddpl_node_new(is_max ? "MaximumBackward0" : "MinimumBackward0",
                                     minmax_backward, 2, ins);
        ddpl_node_save(n, a);
        ddpl_node_save(n, b);
        DDPL_NODE_CTX(n, minmax_ctx)->is_max = is_max;
        ddpl_set_history(out, n);
    }
    return out;
}

ddpl_tensor *ddpl_maximum(ddpl_tensor *a, ddpl_tensor *b)
{
    return minmax("maximum", DDPL_OP_MAXIMUM, a, b, true);
}

ddpl_tensor *ddpl_minimum(ddpl_tensor *a, ddpl_tensor *b)
{
    return minmax("minimum", DDPL_OP_MINIMUM, a, b, false);
}

/* ---- comparisons: computed in the promoted dtype, bool result, no gradient ---- */
static ddpl_tensor *compare(const char *op, ddpl_op kop, ddpl_tensor *a, ddpl_tensor *b)
{
    ddpl_dtype dt = ddpl_result_type(2, OP_INPUTS(a, b));
    return pw_binary_forward(op, kop, a, b, dt, DDPL_BOOL, NULL);
}

ddpl_tensor *ddpl_eq(ddpl_tensor *a, ddpl_tensor *b)
{
    return compare("eq", DDPL_OP_EQ, a, b);
}
ddpl_tensor *ddpl_ne(ddpl_tensor *a, ddpl_tensor *b)
{
    return compare("ne", DDPL_OP_NE, a, b);
}
ddpl_tensor *ddpl_lt(ddpl_tensor *a, ddpl_tensor *b)
{
    return compare("lt", DDPL_OP_LT, a, b);
}
ddpl_tensor *ddpl_le(ddpl_tensor *a, ddpl_tensor *b)
{
    return compare("le", DDPL_OP_LE, a, b);
}
ddpl_tensor *ddpl_gt(ddpl_tensor *a, ddpl_tensor *b)
{
    return compare("gt", DDPL_OP_GT, a, b);
}
ddpl_tensor *ddpl_ge(ddpl_tensor *a, ddpl_tensor *b)
{
    return compare("ge", DDPL_OP_GE, a, b);
}

/* ---- where and masked_fill ---- */

/* out <- cond ? x : y over the broadcast of the three; x or y may be NULL with a value instead
 * (masked_fill). */
static ddpl_tensor *select_forward(const char *op, ddpl_tensor *cond, ddpl_tensor *x,
                                   ddpl_tensor *y, double value, ddpl_dtype dt)
{
    if (cond->dtype != DDPL_BOOL)
        return ddpl_error("%s: expected the condition (mask) to be a bool tensor, got %s", op,
                          ddpl_dtype_name((ddpl_dtype)cond->dtype)),
               NULL;
    ddpl_tensor *t = x ? x : y;
    ddpl_device dev;
    int nd, nd2;
    int64_t sizes[DDPL_MAX_DIMS], sizes2[DDPL_MAX_DIMS];
    if (pw_pick_device(op, 3, OP_INPUTS(cond, t, x && y ? y : t), &dev) < 0) return NULL;
    if (ddpl_broadcast_shape(op, cond->ndim, cond->sizes, t->ndim, t->sizes, &nd, sizes) < 0)
        return NULL;
    if (x && y) {
        if (ddpl_broadcast_shape(op, nd, sizes, y->ndim, y->sizes, &nd2, sizes2) < 0) return NULL;
        nd = nd2;
        memcpy(sizes, sizes2, sizeof sizes);
    }
    kernel_input kc, kx, ky;
    int rc = kin_prepare(&kc, cond, DDPL_BOOL, dev, nd, sizes);
    if (rc == 0)
        rc = x ? kin_prepare(&kx, x, dt, dev, nd, sizes)
               : kin_scalar(&kx, value, dt, dev, nd, sizes);
    if (rc < 0) {
        kin_release(&kc);
        return NULL;
    }
    rc = y ? kin_prepare(&ky, y, dt, dev, nd, sizes) : kin_scalar(&ky, value, dt, dev, nd, sizes);
    if (rc < 0) {
        kin_release(&kc);
        kin_release(&kx);
        return NULL;
    }
    ddpl_tensor *out = ddpl_tensor_new(nd, sizes, dt, dev);
    ddpl_tensor *ins[3] = {&kc.hdr, &kx.hdr, &ky.hdr};
    if (out && ddpl_run_kernel(DDPL_OP_WHERE, dev, &out, ins, NULL) < 0) {
        ddpl_tensor_release(out);
        out = NULL;
    }
    kin_release(&kc);
    kin_release(&kx);
    kin_release(&ky);
    return out;
}

/* where: dx = where(cond, g, 0), dy = where(cond, 0, g); masked_fill: dx = where(mask, 0, g).
 * saved: cond; input 0 is the cond (never differentiable) */
static int where_backward(ddpl_node *n, ddpl_tensor *grad, ddpl_tensor **gi)
{
    ddpl_tensor *cond = ddpl_node_saved(n, 0);
    if (!cond) return -1;
    ddpl_tensor *zero = ddpl_wrapped_number(0, true);
    int rc = 0;
    for (int i = 1; i < n->n_inputs && rc == 0; i++) {
        if (!ddpl_node_needs_grad(n, i)) continue;
        /* input 1 (x) keeps the gradient where cond holds; input 2 (y) where it does not */
        ddpl_tensor *g = i == 1 && n->n_inputs == 3 ? ddpl_where(cond, grad, zero)
                                                    : ddpl_where(cond, zero, grad);
        if (!(gi[i] = pw_grad_to_input(n, i, g))) rc = -1;
    }
    ddpl_tensor_release(zero);
    return rc;
}

ddpl_tensor *ddpl_where(ddpl_tensor *cond, ddpl_tensor *x, ddpl_tensor *y)
{
    ddpl_dtype dt = ddpl_result_type(2, OP_INPUTS(x, y));
    ddpl_tensor *out = select_forward("where", cond, x, y, 0, dt);
    ddpl_tensor *ins[3] = {cond, x, y};
    if (out && ddpl_grad_needed(3, ins)) {
        ddpl_node *n = ddpl_node_new("WhereBackward0", where_backward, 3, ins);
        ddpl_node_save(n, cond);
        ddpl_set_history(out, n);
    }
    return out;
}

ddpl_tensor *ddpl_masked_fill(ddpl_tensor *x, ddpl_tensor *mask, double value)
{
    ddpl_tensor *out = select_forward("masked_fill", mask, NULL, x, value, (ddpl_dtype)x->dtype);
    ddpl_tensor *ins[2] = {mask, x};
    if (out && ddpl_grad_needed(2, ins)) {
        ddpl_node *n = ddpl_node_new("MaskedFillBackward0", where_backward, 2, ins);
        ddpl_node_save(n, mask);
        ddpl_set_history(out, n);
    }
    return out;
}
