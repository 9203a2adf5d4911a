/* ops/reduce.c: sums, means, products and extremes, with their gradients.
 * defines: ddpl_sum, ddpl_sum_dim, ddpl_sum_dims, ddpl_mean, ddpl_mean_dim, ddpl_mean_dims,
 *          ddpl_prod, ddpl_prod_dim, ddpl_max, ddpl_min, ddpl_max_dim, ddpl_min_dim,
 *          ddpl_argmax, ddpl_argmin, and the red_* helpers of reduce.h.
 *
 * Dtypes as PyTorch: sums and products of integers and bools are int64; mean needs a floating
 * input; max/min keep the dtype; indices are int64. Empty reductions: sum 0, prod 1, mean NaN;
 * max/min of nothing is an error naming the op. */
#include "reduce.h"

/* ---- helpers (reduce.h) ---- */
int red_mask_dims(const char *op, const ddpl_tensor *x, int ndims, const int *dims, uint32_t *mask)
{
    if (ndims == 0) {
        *mask = red_mask_all(x);
        return 0;
    }
    uint32_t m = 0;
    for (int i = 0; i < ndims; i++) {
        int d = ddpl_wrap_dim(op, dims[i], x->ndim);
        if (d < 0) return -1;
        if (x->ndim == 0) continue; /* dim 0 / -1 of a scalar: nothing to reduce */
        if (m & (1u << d))
            return ddpl_error("%s: dim %d appears multiple times in the list of dims", op, d);
        m |= 1u << d;
    }
    *mask = m;
    return 0;
}

int64_t red_count(const ddpl_tensor *x, uint32_t mask)
{
    int64_t n = 1;
    for (int d = 0; d < x->ndim; d++)
        if (mask & (1u << d)) n *= x->sizes[d];
    return n;
}

/* Sizes of the keepdim output. */
static void keep_sizes(const ddpl_tensor *x, uint32_t mask, int64_t *sizes)
{
    for (int d = 0; d < x->ndim; d++) sizes[d] = (mask & (1u << d)) ? 1 : x->sizes[d];
}

ddpl_tensor *red_drop_reduced(ddpl_tensor *t, uint32_t mask)
{
    int64_t sizes[DDPL_MAX_DIMS], strides[DDPL_MAX_DIMS];
    int n = 0;
    for (int d = 0; d < t->ndim; d++) {
        if (mask & (1u << d)) continue;
        sizes[n] = t->sizes[d];
        strides[n++] = t->strides[d];
    }
    ddpl_tensor *v = ddpl_tensor_alias(t, n, sizes, strides, t->offset);
    ddpl_tensor_release(t);
    return v;
}

ddpl_tensor *red_forward(const char *op, ddpl_op kop, ddpl_tensor *x, uint32_t mask, bool keepdim,
                         ddpl_dtype out_dt)
{
    DDPL_UNUSED(op);
    int64_t sizes[DDPL_MAX_DIMS];
    keep_sizes(x, mask, sizes);
    ddpl_tensor *out = ddpl_tensor_new(x->ndim, sizes, out_dt, x->device);
    ddpl_reduce_params p = {mask};
    if (!out || ddpl_run_kernel(kop, x->device, &out, &x, &p) < 0) {
        ddpl_tensor_release(out);
        return NULL;
    }
    return keepdim ? out : red_drop_reduced(out, mask);
}

ddpl_tensor *red_amax_keep(ddpl_tensor *x, uint32_t mask)
{
    return red_forward("amax", DDPL_OP_AMAX, x, mask, true, (ddpl_dtype)x->dtype);
}

/* Strides of t's dims laid out over the input's ndim dims (reduced dims get stride 0). */
static void back_strides(const ddpl_tensor *t, int ndim, uint32_t mask, bool keepdim,
                         int64_t *strides)
{
    int td = 0;
    for (int d = 0; d < ndim; d++) {
        if (mask & (1u << d)) {
            strides[d] = 0;
            if (keepdim) td++;
        } else {
            strides[d] = t->strides[td++];
        }
    }
}

/* Under create_graph (grad mode on in backward) a tensor with history must go through the view
 * ops, which record; otherwise a bare alias is cheaper. */
static bool recorded(const ddpl_tensor *t)
{
    return ddpl_is_grad_enabled() && ddpl_requires_grad(t);
}

ddpl_tensor *red_keep_view(ddpl_tensor *t, int ndim, const int64_t *sizes, uint32_t mask,
                           bool keepdim)
{
    int64_t strides[DDPL_MAX_DIMS], ks[DDPL_MAX_DIMS];
    back_strides(t, ndim, mask, keepdim, strides);
    for (int d = 0; d < ndim; d++) ks[d] = (mask & (1u << d)) ? 1 : sizes[d];
    if (recorded(t)) return ddpl_reshape(t, ndim, ks);
    return ddpl_tensor_alias(t, ndim, ks, strides, t->offset);
}

ddpl_tensor *red_expand_back(ddpl_tensor *t, int ndim, const int64_t *sizes, uint32_t mask,
                             bool keepdim)
{
    if (recorded(t)) {
        ddpl_tensor *k = red_keep_view(t, ndim, sizes, mask, keepdim);
        ddpl_tensor *e = k ? ddpl_expand(k, ndim, sizes) : NULL;
        ddpl_tensor_release(k);
        return e;
    }
    int64_t strides[DDPL_MAX_DIMS];
    back_strides(t, ndim, mask, keepdim, strides);
    return ddpl_tensor_alias(t, ndim, sizes, strides, t->offset);
}

int red_scale_(ddpl_tensor *t, ddpl_op kop, double s)
{
    kernel_input ks;
    if (kin_scalar(&ks, s, (ddpl_dtype)t->dtype, t->device, t->ndim, t->sizes) < 0) return -1;
    ddpl_tensor *ins[2] = {t, &ks.hdr};
    int rc = ddpl_run_kernel(kop, t->device, &t, ins, NULL);
    kin_release(&ks);
    return rc;
}

/* ---- sum and mean ---- */

/* sum: the gradient broadcast back; mean: also divided by the count (ctx.p) */
static int sum_backward(ddpl_node *n, ddpl_tensor *grad, ddpl_tensor **gi)
{
    reduce_ctx *c = DDPL_NODE_CTX(n, reduce_ctx);
    ddpl_edge *e = &n->edges[0];
    ddpl_tensor *g = red_expand_back(grad, e->ndim, e->sizes, c->mask, c->keepdim);
    if (c->p != 1.0) {
        ddpl_tensor *s = ddpl_wrapped_number(1.0 / c->p, false);
        ddpl_tensor *scaled = ddpl_mul(g, s);
        ddpl_tensor_release(s);
        ddpl_tensor_release(g);
        g = scaled;
    }
    gi[0] = g;
    return g ? 0 : -1;
}

static ddpl_tensor *record_reduce(ddpl_tensor *out, ddpl_tensor *x, const char *name,
                                  ddpl_backward_fn fn, reduce_ctx ctx, ddpl_tensor *save0,
                                  ddpl_tensor *save1)
{
    if (out && ddpl_grad_needed(1, &x)) {
        ddpl_node *n = ddpl_node_new(name, fn, 1, &x);
        *DDPL_NODE_CTX(n, reduce_ctx) = ctx;
        ddpl_node_save(n, save0);
        if (save1) ddpl_node_save(n, save1);
        ddpl_set_history(out, n);
    }
    return out;
}

static ddpl_tensor *sum_mask(const char *op, ddpl_tensor *x, uint32_t mask, bool keepdim)
{
    ddpl_dtype dt =
        ddpl_dtype_is_integral((ddpl_dtype)x->dtype) ? DDPL_INT64 : (ddpl_dtype)x->dtype;
    ddpl_tensor *out = red_forward(op, DDPL_OP_SUM, x, mask, keepdim, dt);
    reduce_ctx c = {mask, keepdim, 0, 1.0};
    return record_reduce(out, x, "SumBackward0", sum_backward, c, NULL, NULL);
}

ddpl_tensor *ddpl_sum_dims(ddpl_tensor *x, int ndims, const int *dims, bool keepdim)
{
    uint32_t mask = 0;
    if (red_mask_dims("sum", x, ndims, dims, &mask) < 0) return NULL;
    return sum_mask("sum", x, mask, keepdim);
}

ddpl_tensor *ddpl_sum_dim(ddpl_tensor *x, int dim, bool keepdim)
{
    return ddpl_sum_dims(x, 1, &dim, keepdim);
}

ddpl_tensor *ddpl_sum(ddpl_tensor *x)
{
    return sum_mask("sum", x, red_mask_all(x), false);
}

static ddpl_tensor *mean_mask(ddpl_tensor *x, uint32_t mask, bool keepdim)
{
    if (!ddpl_dtype_is_floating((ddpl_dtype)x->dtype))
        return ddpl_error("mean: could not infer the output dtype: the input must be floating "
                          "point, got %s",
                          ddpl_dtype_name((ddpl_dtype)x->dtype)),
               NULL;
    int64_t count = red_count(x, mask);
    ddpl_tensor *out = red_forward("mean", DDPL_OP_SUM, x, mask, keepdim, (ddpl_dtype)x->dtype);
    /* divide (not multiply by 1/n) as PyTorch does; 0/0 makes the mean of nothing NaN */
    if (out && red_scale_(out, DDPL_OP_DIV, (double)count) < 0) {
        ddpl_tensor_release(out);
        return NULL;
    }
    reduce_ctx c = {mask, keepdim, 0, (double)count};
    return record_reduce(out, x, "MeanBackward0", sum_backward, c, NULL, NULL);
}

ddpl_tensor *ddpl_mean_dims(ddpl_tensor *x, int ndims, const int *dims, bool keepdim)
{
    uint32_t mask = 0;
    if (red_mask_dims("mean", x, ndims, dims, &mask) < 0) return NULL;
    return mean_mask(x, mask, keepdim);
}

ddpl_tensor *ddpl_mean_dim(ddpl_tensor *x, int dim, bool keepdim)
{
    return ddpl_mean_dims(x, 1, &dim, keepdim);
}

ddpl_tensor *ddpl_mean(ddpl_tensor *x)
{
    return mean_mask(x, red_mask_all(x), false);
}

/* ---- prod ---- */
static ddpl_tensor *prod_mask(ddpl_tensor *x, uint32_t mask, bool keepdim);

/* The gradient of a product w.r.t. x_i is the product of the others. Dividing the product by
 * x_i fails at zeros, so count the zeros of each reduced slice: with none, g*prod/x; with one,
 * the zero element gets g times the product of the non-zeros and the others 0; with more,
 * everything is 0. saved: x, and the output. */
static int prod_backward(ddpl_node *n, ddpl_tensor *grad, ddpl_tensor **gi)
{
    reduce_ctx *c = DDPL_NODE_CTX(n, reduce_ctx);
    ddpl_edge *e = &n->edges[0];
    ddpl_tensor *x = ddpl_node_saved(n, 0);
    if (!x) return -1;
    ddpl_tensor *zero = ddpl_wrapped_number(0, true), *one = ddpl_wrapped_number(1, true);
    ddpl_tensor *gk = red_keep_view(grad, e->ndim, e->sizes, c->mask, c->keepdim);
    ddpl_tensor *z = ddpl_eq(x, zero); /* x's shape */
    ddpl_tensor *nz = z ? red_forward("prod", DDPL_OP_SUM, z, c->mask, true, DDPL_INT64) : NULL;
    ddpl_tensor *safe = z ? ddpl_where(z, one, x) : NULL;
    /* under create_graph the product of the others is the recorded op (safe records) */
    ddpl_tensor *pn = !safe            ? NULL
                      : recorded(safe) ? prod_mask(safe, c->mask, true)
                                       : red_forward("prod", DDPL_OP_PROD, safe, c->mask, true,
                                                     (ddpl_dtype)safe->dtype);
    ddpl_tensor *gp = pn ? ddpl_mul(gk, pn) : NULL;  /* keepdim */
    ddpl_tensor *q = gp ? ddpl_div(gp, safe) : NULL; /* no zeros */
    ddpl_tensor *nz0 = q && nz ? ddpl_eq(nz, zero) : NULL;
    ddpl_tensor *nz1 = nz0 ? ddpl_eq(nz, one) : NULL;
    ddpl_tensor *the_zero = nz1 ? ddpl_mul(z, nz1) : NULL; /* bool and: the only zero */
    ddpl_tensor *r1 = the_zero ? ddpl_where(the_zero, gp, zero) : NULL;
    ddpl_tensor *r = r1 ? ddpl_where(nz0, q, r1) : NULL;
    ddpl_tensor *tmp[] = {zero, one, gk, z, nz, safe, pn, gp, q, nz0, nz1, the_zero, r1};
    for (size_t i = 0; i < sizeof tmp / sizeof *tmp; i++) ddpl_tensor_release(tmp[i]);
    gi[0] = r;
    return r ? 0 : -1;
}

static ddpl_tensor *prod_mask(ddpl_tensor *x, uint32_t mask, bool keepdim)
{
    ddpl_dtype dt =
        ddpl_dtype_is_integral((ddpl_dtype)x->dtype) ? DDPL_INT64 : (ddpl_dtype)x->dtype;
    ddpl_tensor *out = red_forward("prod", DDPL_OP_PROD, x, mask, keepdim, dt);
    reduce_ctx c = {mask, keepdim, 0, 1.0};
    return record_reduce(out, x, "ProdBackward0", prod_backward, c, x, NULL);
}

ddpl_tensor *ddpl_prod(ddpl_tensor *x)
{
    return prod_mask(x, red_mask_all(x), false);
}

ddpl_tensor *ddpl_prod_dim(ddpl_tensor *x, int dim, bool keepdim)
{
    uint32_t mask = 0;
    if (red_mask_dims("prod", x, 1, &dim, &mask) < 0) return NULL;
    return prod_mask(x, mask, keepdim);
}

/* ---- max and min of everything ---- */

/* The gradient is shared evenly among the elements equal to the result (PyTorch's rule for
 * ties). saved: x, the output. */
static int extreme_backward(ddpl_node *n, ddpl_tensor *grad, ddpl_tensor **gi)
{
    ddpl_tensor *x = ddpl_node_saved(n, 0), *out = ddpl_node_saved(n, 1);
    if (!x || !out) return -1;
    ddpl_tensor *zero = ddpl_wrapped_number(0, true);
    ddpl_tensor *hit = ddpl_eq(x, out);
    ddpl_tensor *count = hit ? ddpl_sum(hit) : NULL;
    ddpl_tensor *share = count ? ddpl_div(grad, count) : NULL;
    gi[0] = share ? ddpl_where(hit, share, zero) : NULL;
    ddpl_tensor *tmp[] = {zero, hit, count, share};
    for (int i = 0; i < 4; i++) ddpl_tensor_release(tmp[i]);
    return gi[0] ? 0 : -1;
}

static ddpl_tensor *extreme_all(const char *op, ddpl_op kop, ddpl_tensor *x)
{
    if (ddpl_tensor_numel(x) == 0) {
        char b[128];
        return ddpl_error("%s: cannot reduce an empty tensor (shape %s) without a dim; give "
                          "the dim to reduce",
                          op, ddpl_shape_str(x, b, sizeof b)),
               NULL;
    }
    ddpl_tensor *out = red_forward(op, kop, x, red_mask_all(x), false, (ddpl_dtype)x->dtype);
    if (out && ddpl_grad_needed(1, &x)) {
        ddpl_node *n = ddpl_node_new(kop == DDPL_OP_AMAX ? "MaxBackward0" : "MinBackward0",
                                     extreme_backward, 1, &x);
        ddpl_node_save(n, x);
        ddpl_node_save_output(n, out);
        ddpl_set_history(out, n);
    }
    return out;
}

ddpl_tensor *ddpl_max(ddpl_tensor *x)
{
    return extreme_all("max", DDPL_OP_AMAX, x);
}
ddpl_tensor *ddpl_min(ddpl_tensor *x)
{
    return extreme_all("min", DDPL_OP_AMIN, x);
}

/* ---- max/min along a dim, with indices ---- */

/* The gradient goes to the position of the index: a one-hot mask from comparing the indices
 * with positions 0..L-1 along the dim. saved: the keepdim indices. */
static int extreme_dim_backward(ddpl_node *n, ddpl_tensor *grad, ddpl_tensor **gi)
{
    reduce_ctx *c = DDPL_NODE_CTX(n, reduce_ctx);
    ddpl_edge *e = &n->edges[0];
    ddpl_tensor *idx = ddpl_node_saved(n, 0);
    if (!idx) return -1;
    if (e->ndim == 0) { /* the max of a scalar is the scalar */
        gi[0] = ddpl_tensor_retain(grad);
        return 0;
    }
    int dim = __builtin_ctz(c->mask);
    int64_t shape[DDPL_MAX_DIMS];
    for (int d = 0; d < e->ndim; d++) shape[d] = d == dim ? e->sizes[d] : 1;
    ddpl_tensor *pos = ddpl_arange(0, (double)e->sizes[dim], 1, DDPL_INT64, grad->device);
    ddpl_tensor *pos_v = pos ? ddpl_view(pos, e->ndim, shape) : NULL;
    ddpl_tensor *hot = pos_v ? ddpl_eq(pos_v, idx) : NULL; /* input's shape */
    ddpl_tensor *gk = red_keep_view(grad, e->ndim, e->sizes, c->mask, c->keepdim);
    ddpl_tensor *zero = ddpl_wrapped_number(0, true);
    gi[0] = hot ? ddpl_where(hot, gk, zero) : NULL;
    ddpl_tensor *tmp[] = {pos, pos_v, hot, gk, zero};
    for (int i = 0; i < 5; i++) ddpl_tensor_release(tmp[i]);
    return gi[0] ? 0 : -1;
}

/* values and indices (keepdim shape) of the extreme of x along dim d (already wrapped). */
static int extreme_dim_raw(const char *op, ddpl_op kop, ddpl_tensor *x, int d, ddpl_tensor **values,
                           ddpl_tensor **indices)
{
    *values = *indices = NULL;
    if (x->ndim > 0 && x->sizes[d] == 0) {
        char b[128];
        return ddpl_error("%s: expected reduction dim %d to have non-zero size (shape %s)", op, d,
                          ddpl_shape_str(x, b, sizeof b));
    }
    uint32_t mask = x->ndim ? 1u << d : 0;
    int64_t sizes[DDPL_MAX_DIMS];
    keep_sizes(x, mask, sizes);
    ddpl_tensor *v = ddpl_tensor_new(x->ndim, sizes, (ddpl_dtype)x->dtype, x->device);
    ddpl_tensor *i = v ? ddpl_tensor_new(x->ndim, sizes, DDPL_INT64, x->device) : NULL;
    ddpl_tensor *outs[2] = {v, i};
    ddpl_dim_params p = {d};
    if (!i || ddpl_run_kernel(kop, x->device, outs, &x, &p) < 0) {
        ddpl_tensor_release(v);
        ddpl_tensor_release(i);
        return -1;
    }
    *values = v;
    *indices = i;
    return 0;
}

static int extreme_dim(const char *op, ddpl_op kop, ddpl_tensor *x, int dim, bool keepdim,
                       ddpl_tensor **values, ddpl_tensor **indices)
{
    *values = *indices = NULL;
    int d = ddpl_wrap_dim(op, dim, x->ndim);
    ddpl_tensor *v, *i;
    if (d < 0 || extreme_dim_raw(op, kop, x, d, &v, &i) < 0) return -1;
    uint32_t mask = x->ndim ? 1u << d : 0;
    ddpl_tensor *saved_idx = ddpl_tensor_retain(i);
    if (!keepdim) {
        v = red_drop_reduced(v, mask);
        i = red_drop_reduced(i, mask);
    }
    if (ddpl_grad_needed(1, &x)) {
        ddpl_node *n = ddpl_node_new(kop == DDPL_OP_MAX_DIM ? "MaxBackward0" : "MinBackward0",
                                     extreme_dim_backward, 1, &x);
        *DDPL_NODE_CTX(n, reduce_ctx) = (reduce_ctx){mask, keepdim, 0, 0};
        ddpl_node_save(n, saved_idx);
        ddpl_set_history(v, n);
    }
    ddpl_tensor_release(saved_idx);
    *values = v;
    *indices = i;
    return 0;
}

int ddpl_max_dim(ddpl_tensor *x, int dim, bool keepdim, ddpl_tensor **values, ddpl_tensor **indices)
{
    return extreme_dim("max", DDPL_OP_MAX_DIM, x, dim, keepdim, values, indices);
}

int ddpl_min_dim(ddpl_tensor *x, int dim, bool keepdim, ddpl_tensor **values, ddpl_tensor **indices)
{
    return extreme_dim("min", DDPL_OP_MIN_DIM, x, dim, keepdim, values, indices);
}

/* argmax/argmin: with all_dims, the index into the flattened tensor (shape [] or, with keepdim,
 * all ones). */
static ddpl_tensor *arg_extreme(const char *op, ddpl_op kop, ddpl_tensor *x, bool all_dims, int dim,
                                bool keepdim)
{
    ddpl_tensor *v = NULL, *i = NULL;
    if (!all_dims) {
        int d = ddpl_wrap_dim(op, dim, x->ndim);
        if (d < 0 || extreme_dim_raw(op, kop, x, d, &v, &i) < 0) return NULL;
        ddpl_tensor_release(v);
        return keepdim || x->ndim == 0 ? i : red_drop_reduced(i, 1u << d);
    }
    if (ddpl_tensor_numel(x) == 0) {
        char b[128];
        return ddpl_error("%s: cannot take the index of an empty tensor (shape %s)", op,
                          ddpl_shape_str(x, b, sizeof b)),
               NULL;
    }
    bool prev = ddpl_grad_mode_set(false);
    int64_t n = ddpl_tensor_numel(x);
    ddpl_tensor *flat = ddpl_reshape(x, 1, &n);
    ddpl_grad_mode_set(prev);
    int rc = flat ? extreme_dim_raw(op, kop, flat, 0, &v, &i) : -1;
    ddpl_tensor_release(flat);
    ddpl_tensor_release(v);
    if (rc < 0) return NULL;
    int64_t ones[DDPL_MAX_DIMS] = {1, 1, 1, 1, 1, 1, 1, 1}, zeros[DDPL_MAX_DIMS] = {0};
    ddpl_tensor *r = keepdim ? ddpl_tensor_alias(i, x->ndim, ones, zeros, i->offset)
                             : ddpl_tensor_alias(i, 0, NULL, NULL, i->offset);
    ddpl_tensor_release(i);
    return r;
}

ddpl_tensor *ddpl_argmax(ddpl_tensor *x, bool all_dims, int dim, bool keepdim)
{
    return arg_extreme("argmax", DDPL_OP_MAX_DIM, x, all_dims, dim, keepdim);
}

ddpl_tensor *ddpl_argmin(ddpl_tensor *x, bool all_dims, int dim, bool keepdim)
{
    return arg_extreme("argmin", DDPL_OP_MIN_DIM, x, all_dims, dim, keepdim);
}
