/* ops/scan.c: cumulative ops along one dim, with their gradients.
 * defines: ddpl_cumsum, ddpl_cumprod, ddpl_cummax, ddpl_cummin.
 *
 * Dtypes as PyTorch: cumsum/cumprod of integers and bools are int64, or the dtype asked for (the
 * input is converted first, with autograd through the conversion); cummax/cummin keep the dtype
 * and give int64 indices. A 0-dim input is one slice of one element (dim 0 or -1).
 * Gradients: cumsum's is the cumulative sum of the gradient taken from the end; cumprod's is
 * PyTorch's formula that stays exact at zeros (cumprod_backward, below); cummax/cummin add the
 * gradient into the positions their indices name. */
#include <stdlib.h>
#include <string.h>

#include "reduce.h"

typedef struct {
    int dim;
    bool reverse;
} scan_ctx;

/* The output dtype of cumsum/cumprod: dt when given (DDPL_DTYPE_COUNT: not given). */
static ddpl_dtype acc_dtype(const ddpl_tensor *x, ddpl_dtype dt)
{
    if (dt != DDPL_DTYPE_COUNT) return dt;
    return ddpl_dtype_is_integral((ddpl_dtype)x->dtype) ? DDPL_INT64 : (ddpl_dtype)x->dtype;
}

/* kop of x along d (wrapped) into a new tensor of x's shape and dtype; no autograd. */
static ddpl_tensor *scan_raw(ddpl_op kop, ddpl_tensor *x, int d, bool reverse)
{
    ddpl_tensor *out = ddpl_tensor_new(x->ndim, x->sizes, (ddpl_dtype)x->dtype, x->device);
    ddpl_scan_params p = {d, reverse};
    if (!out || ddpl_run_kernel(kop, x->device, &out, &x, &p) < 0) {
        ddpl_tensor_release(out);
        return NULL;
    }
    return out;
}

/* ---- cumsum ---- */
static ddpl_tensor *cumsum_dir(ddpl_tensor *x, int d, bool reverse);

/* d/dx_i of sum_{k<=j} x_k is 1 for j >= i: the gradient's sum from the end (or, for a reversed
 * scan, from the start). Recorded, so create_graph differentiates it again. */
static int cumsum_backward(ddpl_node *n, ddpl_tensor *grad, ddpl_tensor **gi)
{
    scan_ctx *c = DDPL_NODE_CTX(n, scan_ctx);
    gi[0] = cumsum_dir(grad, c->dim, !c->reverse);
    return gi[0] ? 0 : -1;
}

static ddpl_tensor *cumsum_dir(ddpl_tensor *x, int d, bool reverse)
{
    ddpl_tensor *out = scan_raw(DDPL_OP_CUMSUM, x, d, reverse);
    if (out && ddpl_grad_needed(1, &x)) {
        ddpl_node *n = ddpl_node_new("CumsumBackward0", cumsum_backward, 1, &x);
        *DDPL_NODE_CTX(n, scan_ctx) = (scan_ctx){d, reverse};
        ddpl_set_history(out, n);
    }
    return out;
}

/* x wrapped to dim d and converted (with autograd) to the scan's dtype; NULL with an error. */
static ddpl_tensor *scan_input(const char *op, ddpl_tensor *x, int dim, ddpl_dtype dt, int *d)
{
    *d = ddpl_wrap_dim(op, dim, x->ndim);
    if (*d < 0) return NULL;
    if (x->ndim == 0) *d = 0;
    if ((int)dt < 0 || dt > DDPL_DTYPE_COUNT)
        return ddpl_error("%s: unknown dtype %d", op, (int)dt), NULL;
    if (dt == DDPL_BOOL)
        return ddpl_error("%s: dtype bool is not supported for the result", op), NULL;
    return ddpl_to_dtype(x, acc_dtype(x, dt));
}

ddpl_tensor *ddpl_cumsum(ddpl_tensor *x, int dim, ddpl_dtype dt)
{
    int d;
    ddpl_tensor *xc = scan_input("cumsum", x, dim, dt, &d);
    ddpl_tensor *out = xc ? cumsum_dir(xc, d, false) : NULL;
    ddpl_tensor_release(xc);
    return out;
}

/* ---- cumprod ---- */
static ddpl_tensor *cumprod_rec(ddpl_tensor *x, int d);

/* grad_k = sum_{j>=k} g_j prod_{i<=j, i!=k} x_i, one k at a time with recorded ops (PyTorch's
 * cumprod_backward under GradMode): the product of the x before k times the cumprod of the x
 * after k gives every product that omits x_k. O(n^2) in the slice length n; only second
 * derivatives through zeros take it. */
static ddpl_tensor *cumprod_grad_quadratic(ddpl_tensor *grad, ddpl_tensor *x, int d)
{
    int64_t n = x->sizes[d], ks[DDPL_MAX_DIMS];
    memcpy(ks, x->sizes, sizeof(int64_t) * (size_t)x->ndim);
    ks[d] = 1;
    ddpl_tensor **cols = calloc((size_t)(n ? n : 1), sizeof *cols);
    ddpl_tensor *ones = ddpl_ones(x->ndim, ks, (ddpl_dtype)x->dtype, x->device);
    bool ok = cols && ones;
    for (int64_t c = 0; ok && c < n; c++) {
        op_temps t = {0};
        ddpl_tensor *until =
            c == 0 ? ones : OP_T(&t, ddpl_prod_dim(OP_T(&t, ddpl_narrow(x, d, 0, c)), d, true));
        ddpl_tensor *omitted = until;
        if (c < n - 1) {
            ddpl_tensor *rest = OP_T(&t, ddpl_narrow(x, d, c + 1, n - c - 1));
            ddpl_tensor *parts[2] = {until,
                                     OP_T(&t, ddpl_mul(until, OP_T(&t, cumprod_rec(rest, d))))};
            omitted = OP_T(&t, ddpl_cat(2, parts, d));
        }
        ddpl_tensor *terms = OP_T(&t, ddpl_mul(OP_T(&t, ddpl_narrow(grad, d, c, n - c)), omitted));
        cols[c] = t.failed ? NULL : ddpl_sum_dim(terms, d, false);
        ok = cols[c] != NULL;
        op_temps_release(&t);
    }
    ddpl_tensor *r = ok ? ddpl_stack((int)n, cols, d) : NULL;
    for (int64_t c = 0; cols && c < n; c++) ddpl_tensor_release(cols[c]);
    free(cols);
    ddpl_tensor_release(ones);
    return r;
}

/* PyTorch's cumprod_backward. With out_j = prod_{k<=j} x_k and z the first zero of a slice:
 *   i < z:  grad_i = sum_{j>=i} g_j out_j / x_i (every out_j with j >= z is 0, so the sum
 *           from the end of g*out is right without knowing z);
 *   i == z: grad_i = sum_{j>=z} g_j prod_{k<=j, k != z} x_k, the sum from the end of g times
 *           the cumprod of x with x_z replaced by 1;
 *   i > z:  0 (every product through i also holds x_z = 0).
 * Written with recorded ops, so create_graph differentiates it. saved: x, the output. */
static int cumprod_backward(ddpl_node *n, ddpl_tensor *grad, ddpl_tensor **gi)
{
    int d = DDPL_NODE_CTX(n, scan_ctx)->dim;
    ddpl_tensor *x = ddpl_node_saved(n, 0), *out = ddpl_node_saved(n, 1);
    if (!x || !out) return -1;
    op_temps k = {0};
    ddpl_tensor *zero = OP_T(&k, ddpl_wrapped_number(0, true));
    ddpl_tensor *one = OP_T(&k, ddpl_wrapped_number(1, true));
    ddpl_tensor *z = OP_T(&k, ddpl_eq(x, zero));
    if (!k.failed && ddpl_is_grad_enabled() && x->ndim > 0) {
        /* create_graph: the formula below is right at zeros but its own derivative is not
         * (the 0 it gives after a zero does not vary with x_z), so where there are zeros take
         * PyTorch's differentiable O(n^2) form */
        ddpl_tensor *anyz = OP_T(&k, ddpl_any(z, 0, NULL, false));
        double has_zero = 0;
        if (anyz && ddpl_tensor_item(anyz, &has_zero) < 0) k.failed = true;
        if (!k.failed && has_zero != 0) {
            op_temps_release(&k);
            gi[0] = cumprod_grad_quadratic(grad, x, d);
            return gi[0] ? 0 : -1;
        }
    }
    bool prev = ddpl_grad_mode_set(false);
    ddpl_tensor *zc = OP_T(&k, ddpl_cumsum(z, d, DDPL_DTYPE_COUNT)); /* zeros so far, int64 */
    ddpl_grad_mode_set(prev);
    ddpl_tensor *before = OP_T(&k, ddpl_eq(zc, zero));
    ddpl_tensor *first = OP_T(&k, ddpl_mul(z, OP_T(&k, ddpl_eq(zc, one)))); /* bool and */
    ddpl_tensor *safe = OP_T(&k, ddpl_where(before, x, one));
    ddpl_tensor *a = OP_T(&k, cumsum_dir(OP_T(&k, ddpl_mul(grad, out)), d, true));
    a = OP_T(&k, ddpl_div(a, safe));
    ddpl_tensor *x1 = OP_T(&k, ddpl_where(first, one, x));
    ddpl_tensor *b =
        OP_T(&k, cumsum_dir(OP_T(&k, ddpl_mul(grad, OP_T(&k, cumprod_rec(x1, d)))), d, true));
    ddpl_tensor *at_zero = OP_T(&k, ddpl_where(first, b, zero));
    gi[0] = k.failed ? NULL : ddpl_where(before, a, at_zero);
    op_temps_release(&k);
    return gi[0] ? 0 : -1;
}

static ddpl_tensor *cumprod_rec(ddpl_tensor *x, int d)
{
    ddpl_tensor *out = scan_raw(DDPL_OP_CUMPROD, x, d, false);
    if (out && ddpl_grad_needed(1, &x)) {
        ddpl_node *n = ddpl_node_new("CumprodBackward0", cumprod_backward, 1, &x);
        *DDPL_NODE_CTX(n, scan_ctx) = (scan_ctx){d, false};
        ddpl_node_save(n, x);
        ddpl_node_save_output(n, out);
        ddpl_set_history(out, n);
    }
    return out;
}

ddpl_tensor *ddpl_cumprod(ddpl_tensor *x, int dim, ddpl_dtype dt)
{
    int d;
    ddpl_tensor *xc = scan_input("cumprod", x, dim, dt, &d);
    ddpl_tensor *out = xc ? cumprod_rec(xc, d) : NULL;
    ddpl_tensor_release(xc);
    return out;
}

/* ---- cummax / cummin ---- */

/* The gradient of each output goes to the element its index names: scatter_add into zeros of
 * the input's shape (several outputs may name one element), PyTorch's cummaxmin_backward. When
 * the backward pass records itself (create_graph) it is the scatter_add op, whose own gradient
 * (a gather of the incoming one) makes second derivatives work; else the kernel alone. The
 * indices are constants, so nothing flows back to the input. saved: the indices. */
static int cumext_backward(ddpl_node *n, ddpl_tensor *grad, ddpl_tensor **gi)
{
    ddpl_edge *e = &n->edges[0];
    ddpl_tensor *idx = ddpl_node_saved(n, 0);
    if (!idx) return -1;
    if (e->ndim == 0) { /* one element: its own extreme */
        gi[0] = ddpl_tensor_retain(grad);
        return 0;
    }
    ddpl_tensor *z = ddpl_zeros(e->ndim, e->sizes, (ddpl_dtype)grad->dtype, grad->device);
    int dim = DDPL_NODE_CTX(n, scan_ctx)->dim;
    if (z && ddpl_is_grad_enabled()) {
        gi[0] = ddpl_scatter_add(z, dim, idx, grad);
        ddpl_tensor_release(z);
        return gi[0] ? 0 : -1;
    }
    ddpl_dim_params p = {dim};
    ddpl_tensor *ins[2] = {idx, grad};
    if (!z || ddpl_run_kernel(DDPL_OP_SCATTER_ADD, z->device, &z, ins, &p) < 0) {
        ddpl_tensor_release(z);
        return -1;
    }
    gi[0] = z;
    return 0;
}

static int cum_extreme(const char *op, ddpl_op kop, const char *node, ddpl_tensor *x, int dim,
                       ddpl_tensor **values, ddpl_tensor **indices)
{
    *values = *indices = NULL;
    int d = ddpl_wrap_dim(op, dim, x->ndim);
    if (d < 0) return -1;
    if (x->ndim == 0) d = 0;
    ddpl_tensor *v = ddpl_tensor_new(x->ndim, x->sizes, (ddpl_dtype)x->dtype, x->device);
    ddpl_tensor *i = v ? ddpl_tensor_new(x->ndim, x->sizes, DDPL_INT64, x->device) : NULL;
    ddpl_tensor *outs[2] = {v, i};
    ddpl_scan_params p = {d, false};
    if (!i || ddpl_run_kernel(kop, x->device, outs, &x, &p) < 0) {
        ddpl_tensor_release(v);
        ddpl_tensor_release(i);
        return -1;
    }
    if (ddpl_grad_needed(1, &x)) {
        ddpl_node *n = ddpl_node_new(node, cumext_backward, 1, &x);
        *DDPL_NODE_CTX(n, scan_ctx) = (scan_ctx){d, false};
        ddpl_node_save(n, i);
        ddpl_set_history(v, n);
    }
    *values = v;
    *indices = i;
    return 0;
}

int ddpl_cummax(ddpl_tensor *x, int dim, ddpl_tensor **values, ddpl_tensor **indices)
{
    return cum_extreme("cummax", DDPL_OP_CUMMAX, "CummaxBackward0", x, dim, values, indices);
}

int ddpl_cummin(ddpl_tensor *x, int dim, ddpl_tensor **values, ddpl_tensor **indices)
{
    return cum_extreme("cummin", DDPL_OP_CUMMIN, "CumminBackward0", x, dim, values, indices);
}
