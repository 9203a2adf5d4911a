/* ops/linalg_norms.c: linalg.vector_norm, linalg.matrix_norm and cdist.
 * defines: ddpl_linalg_vector_norm, ddpl_linalg_matrix_norm, ddpl_cdist.
 *
 * Compositions: a vector norm over several dims moves them last, flattens them and takes the
 * one-dim norm (ddpl_norm, whose gradient is PyTorch's, 0 where the norm is 0); matrix norms are
 * sums and extrema of |x| or of the singular values (svdvals); cdist's p = 2 runs on GEMMs with
 * a gradient node of its own. */
#include <math.h>

#include "linalg_util.h"

static int float_input(const char *op, const ddpl_tensor *x)
{
    if (!ddpl_dtype_is_floating((ddpl_dtype)x->dtype))
        return ddpl_error("%s: Expected a floating point or complex tensor as input. Got %s", op,
                          ddpl_dtype_name((ddpl_dtype)x->dtype));
    return 0;
}

/* Wraps dims (ndims of them) into w, refusing repeats; -1 with an error. */
static int wrap_dims(const char *op, int ndims, const int *dims, int ndim, int *w)
{
    bool seen[DDPL_MAX_DIMS] = {0};
    for (int i = 0; i < ndims; i++) {
        if ((w[i] = ddpl_wrap_dim(op, dims[i], ndim)) < 0) return -1;
        if (seen[w[i]])
            return ddpl_error("%s: dim %d appears multiple times in the list of dims", op, w[i]);
        seen[w[i]] = true;
    }
    return 0;
}

ddpl_tensor *ddpl_linalg_vector_norm(ddpl_tensor *x, double ord, int ndims, const int *dims,
                                     bool keepdim, ddpl_dtype dtype)
{
    const char *op = "linalg.vector_norm";
    if (float_input(op, x) < 0) return NULL;
    if (dtype != DDPL_DTYPE_COUNT && !ddpl_dtype_is_floating(dtype))
        return ddpl_error("%s: dtype should be floating point, but got %s", op,
                          ddpl_dtype_name(dtype)),
               NULL;
    int w[DDPL_MAX_DIMS];
    if (ndims > x->ndim && !(x->ndim == 0 && ndims == 1))
        return ddpl_error("%s: got %d dims for a %d-D input", op, ndims, x->ndim), NULL;
    if (wrap_dims(op, ndims, dims, x->ndim ? x->ndim : 1, w) < 0) return NULL;
    op_temps k = {0};
    ddpl_tensor *xs = dtype == DDPL_DTYPE_COUNT ? x : OP_T(&k, ddpl_to_dtype(x, dtype));
    if (!xs) return op_temps_result(&k, NULL);
    if (ndims == 0 || x->ndim == 0)
        return op_temps_result(&k, OP_T(&k, ddpl_norm(xs, ord, true, 0, keepdim)));
    if (ndims == 1) return op_temps_result(&k, OP_T(&k, ddpl_norm(xs, ord, false, w[0], keepdim)));
    /* kept dims first, then the reduced ones flattened into one */
    bool red[DDPL_MAX_DIMS] = {0};
    int perm[DDPL_MAX_DIMS], np = 0;
    int64_t ks[DDPL_MAX_DIMS];
    for (int i = 0; i < ndims; i++) red[w[i]] = true;
    for (int i = 0; i < x->ndim; i++) {
        if (!red[i]) perm[np++] = i;
        ks[i] = red[i] ? 1 : x->sizes[i];
    }
    int nkept = np;
    for (int i = 0; i < x->ndim; i++)
        if (red[i]) perm[np++] = i;
    ddpl_tensor *p = OP_T(&k, ddpl_permute(xs, x->ndim, perm));
    ddpl_tensor *f = p ? OP_T(&k, ddpl_flatten(p, nkept, x->ndim - 1)) : NULL;
    ddpl_tensor *r = f ? OP_T(&k, ddpl_norm(f, ord, false, nkept, false)) : NULL;
    if (r && keepdim) r = OP_T(&k, ddpl_reshape(r, x->ndim, ks));
    return op_temps_result(&k, r);
}

/* sum of |x| over d_sum, then the max (min) over d_ext: the 1 / inf matrix norms */
static ddpl_tensor *abs_sum_extreme(op_temps *k, ddpl_tensor *x, int d_sum, int d_ext, bool max)
{
    ddpl_tensor *s = OP_T(k, ddpl_sum_dim(OP_U(k, ddpl_abs, x), d_sum, true));
    if (!s) return NULL;
    return OP_T(k, max ? ddpl_amax(s, 1, &d_ext, true) : ddpl_amin(s, 1, &d_ext, true));
}

ddpl_tensor *ddpl_linalg_matrix_norm(ddpl_tensor *x, const char *sord, double ord, int dim0,
                                     int dim1, bool keepdim)
{
    const char *op = "linalg.matrix_norm";
    if (float_input(op, x) < 0) return NULL;
    if (x->ndim < 2)
        return ddpl_error("%s: The input tensor A must have at least 2 dimensions.", op), NULL;
    int d[2], in[2] = {dim0, dim1};
    if (ddpl_wrap_dim(op, dim0, x->ndim) < 0 || ddpl_wrap_dim(op, dim1, x->ndim) < 0) return NULL;
    d[0] = ddpl_wrap_dim(op, dim0, x->ndim), d[1] = ddpl_wrap_dim(op, dim1, x->ndim);
    if (d[0] == d[1])
        return ddpl_error("%s: dims must be different. Got (%d, %d)", op, in[0], in[1]), NULL;
    bool fro = sord && !strcmp(sord, "fro"), nuc = sord && !strcmp(sord, "nuc");
    if (sord && !fro && !nuc) return ddpl_error("%s: Order %s not supported.", op, sord), NULL;
    double a = fabs(ord);
    if (!sord && a != 1.0 && a != 2.0 && !isinf(ord))
        return ddpl_error("%s: Order %g not supported.", op, ord), NULL;
    if (fro) return ddpl_linalg_vector_norm(x, 2.0, 2, d, keepdim, DDPL_DTYPE_COUNT);
    op_temps k = {0};
    ddpl_tensor *r;
    int lo = d[0] < d[1] ? d[0] : d[1], hi = d[0] < d[1] ? d[1] : d[0];
    if (nuc || a == 2.0) { /* singular values of the (d0, d1) matrices, moved last */
        int perm[DDPL_MAX_DIMS], np = 0;
        for (int i = 0; i < x->ndim; i++)
            if (i != d[0] && i != d[1]) perm[np++] = i;
        perm[np++] = d[0], perm[np++] = d[1];
        ddpl_tensor *s = OP_U(&k, ddpl_linalg_svdvals, OP_T(&k, ddpl_permute(x, x->ndim, perm)));
        int last = x->ndim - 2;
        r = !s        ? NULL
            : nuc     ? OP_T(&k, ddpl_sum_dim(s, last, false))
            : ord > 0 ? OP_T(&k, ddpl_amax(s, 1, &last, false))
                      : OP_T(&k, ddpl_amin(s, 1, &last, false));
        if (r && keepdim) r = OP_T(&k, ddpl_unsqueeze(r, lo));
        if (r && keepdim) r = OP_T(&k, ddpl_unsqueeze(r, hi));
        return op_temps_result(&k, r);
    }
    /* 1: max column sum (sum over d0, extreme over d1); inf: max row sum */
    r = a == 1.0 ? abs_sum_extreme(&k, x, d[0], d[1], ord > 0)
                 : abs_sum_extreme(&k, x, d[1], d[0], ord > 0);
    if (r && !keepdim) r = OP_T(&k, ddpl_squeeze(r, hi));
    if (r && !keepdim) r = OP_T(&k, ddpl_squeeze(r, lo));
    return op_temps_result(&k, r);
}

/* ---- cdist ---- */

/* p = 2: gx1 = rowsum(W) x1 - W x2, gx2 = colsum(W)^T x2 - W^T x1 with W = g / d and 0 where
 * d = 0 (PyTorch's _cdist_backward). inputs x1 (..., P, M), x2 (..., R, M) with equal batch
 * dims; saved: x1, x2, output. */
static int cdist_backward(ddpl_node *n, ddpl_tensor *grad, ddpl_tensor **gi)
{
    ddpl_tensor *x1 = ddpl_node_saved(n, 0), *x2 = ddpl_node_saved(n, 1);
    ddpl_tensor *d = ddpl_node_saved(n, 2);
    if (!x1 || !x2 || !d) return -1;
    op_temps k = {0};
    ddpl_tensor *zero = OP_NUM(&k, 0.0);
    ddpl_tensor *w =
        OP_T(&k, ddpl_where(OP_B(&k, ddpl_eq, d, zero), zero, OP_B(&k, ddpl_div, grad, d)));
    if (w && ddpl_node_needs_grad(n, 0)) {
        ddpl_tensor *rs = OP_T(&k, ddpl_sum_dim(w, -1, true));
        gi[0] = OP_B(&k, ddpl_sub, OP_B(&k, ddpl_mul, rs, x1), OP_B(&k, ddpl_matmul, w, x2));
        if (gi[0]) ddpl_tensor_retain(gi[0]);
    }
    if (w && ddpl_node_needs_grad(n, 1)) {
        ddpl_tensor *wt = OP_U(&k, la_mT, w);
        ddpl_tensor *cs = OP_T(&k, ddpl_sum_dim(wt, -1, true));
        gi[1] = OP_B(&k, ddpl_sub, OP_B(&k, ddpl_mul, cs, x2), OP_B(&k, ddpl_matmul, wt, x1));
        if (gi[1]) ddpl_tensor_retain(gi[1]);
    }
    bool failed = k.failed;
    op_temps_release(&k);
    return failed ? -1 : 0;
}

/* sqrt(max(|x1|^2 + |x2|^2 - 2 x1 x2^T, 0)) without autograd (PyTorch's
 * use_mm_for_euclid_dist_if_necessary: more than 25 rows on either side) */
static ddpl_tensor *euclid_mm(op_temps *k, ddpl_tensor *x1, ddpl_tensor *x2)
{
    ddpl_tensor *n1 = OP_T(k, ddpl_sum_dim(OP_B(k, ddpl_mul, x1, x1), -1, true));
    ddpl_tensor *n2 = OP_T(k, ddpl_sum_dim(OP_B(k, ddpl_mul, x2, x2), -1, true));
    ddpl_tensor *dotp = OP_B(k, ddpl_matmul, x1, OP_U(k, la_mT, x2));
    ddpl_tensor *s = OP_B(k, ddpl_add, n1, OP_U(k, la_mT, n2));
    s = OP_B(k, ddpl_sub, s, OP_B(k, ddpl_mul, dotp, OP_NUM(k, 2.0)));
    return s ? OP_T(k, ddpl_sqrt(OP_T(k, ddpl_clamp(s, true, 0.0, false, 0.0)))) : NULL;
}

/* p = 0, the number of coordinates that differ, as PyTorch's kernel counts them:
 * sum(min(ceil(|x1_i - x2_j|), 1)), so a NaN coordinate makes the distance NaN where norm(0)
 * would count it as one that differs. The gradient is zero (ceil's), as PyTorch's. a (..., P, M)
 * and b (..., R, M) with nd batch dims. */
static ddpl_tensor *cdist_zero(op_temps *k, ddpl_tensor *a, ddpl_tensor *b, int nd)
{
    ddpl_tensor *diff =
        OP_B(k, ddpl_sub, OP_T(k, ddpl_unsqueeze(a, nd + 1)), OP_T(k, ddpl_unsqueeze(b, nd)));
    ddpl_tensor *up = OP_U(k, ddpl_ceil, OP_U(k, ddpl_abs, diff));
    ddpl_tensor *ind = OP_B(k, ddpl_minimum, up, OP_NUM(k, 1.0));
    return ind ? OP_T(k, ddpl_sum_dim(ind, -1, false)) : NULL;
}

ddpl_tensor *ddpl_cdist(ddpl_tensor *x1, ddpl_tensor *x2, double p)
{
    if (x1->ndim < 2 || x2->ndim < 2)
        return ddpl_error("cdist: only supports at least 2D tensors, X%d got: %dD",
                          x1->ndim < 2 ? 1 : 2, x1->ndim < 2 ? x1->ndim : x2->ndim),
               NULL;
    if (x1->sizes[x1->ndim - 1] != x2->sizes[x2->ndim - 1])
        return ddpl_error(
                   "cdist: X1 and X2 must have the same number of columns. X1: %lld X2: %lld",
                   (long long)x1->sizes[x1->ndim - 1], (long long)x2->sizes[x2->ndim - 1]),
               NULL;
    for (int i = 0; i < 2; i++) {
        ddpl_tensor *x = i ? x2 : x1;
        if (!ddpl_dtype_is_floating((ddpl_dtype)x->dtype))
            return ddpl_error("cdist: only supports floating-point dtypes, X%d got: %s", i + 1,
                              ddpl_dtype_name((ddpl_dtype)x->dtype)),
                   NULL;
    }
    if (x1->dtype != x2->dtype)
        return ddpl_error("cdist: X1 and X2 must have the same dtype, got %s and %s",
                          ddpl_dtype_name((ddpl_dtype)x1->dtype),
                          ddpl_dtype_name((ddpl_dtype)x2->dtype)),
               NULL;
    if (ddpl_check_same_device("cdist", x1, x2) < 0) return NULL;
    if (!(p >= 0)) return ddpl_error("cdist: only supports non-negative p values"), NULL;
    int nd;
    int64_t bs[DDPL_MAX_DIMS];
    if (ddpl_broadcast_shape("cdist", x1->ndim - 2, x1->sizes, x2->ndim - 2, x2->sizes, &nd, bs) <
        0)
        return NULL;
    int64_t s1[DDPL_MAX_DIMS], s2[DDPL_MAX_DIMS];
    memcpy(s1, bs, sizeof(int64_t) * nd);
    memcpy(s2, bs, sizeof(int64_t) * nd);
    s1[nd] = x1->sizes[x1->ndim - 2], s2[nd] = x2->sizes[x2->ndim - 2];
    s1[nd + 1] = s2[nd + 1] = x1->sizes[x1->ndim - 1];
    op_temps k = {0};
    ddpl_tensor *a = OP_T(&k, ddpl_expand(x1, nd + 2, s1));
    ddpl_tensor *b = k.failed ? NULL : OP_T(&k, ddpl_expand(x2, nd + 2, s2));
    if (k.failed) return op_temps_result(&k, NULL);
    if (p == 0.0) return op_temps_result(&k, cdist_zero(&k, a, b, nd));
    if (p != 2.0) { /* |x1_i - x2_j| over a (..., P, R, M) difference: norm's gradient */
        ddpl_tensor *diff = OP_B(&k, ddpl_sub, OP_T(&k, ddpl_unsqueeze(a, nd + 1)),
                                 OP_T(&k, ddpl_unsqueeze(b, nd)));
        return op_temps_result(&k, diff ? OP_T(&k, ddpl_norm(diff, p, false, -1, false)) : NULL);
    }
    bool grad = ddpl_grad_needed(2, OP_INPUTS(a, b));
    bool prev = ddpl_grad_mode_set(false);
    ddpl_tensor *d;
    if (s1[nd] > 25 || s2[nd] > 25) {
        d = euclid_mm(&k, a, b);
    } else {
        ddpl_tensor *diff = OP_B(&k, ddpl_sub, OP_T(&k, ddpl_unsqueeze(a, nd + 1)),
                                 OP_T(&k, ddpl_unsqueeze(b, nd)));
        d = diff ? OP_T(&k, ddpl_norm(diff, 2.0, false, -1, false)) : NULL;
    }
    ddpl_grad_mode_set(prev);
    ddpl_tensor *out = d ? ddpl_contiguous(d) : NULL;
    if (out && out == d) { /* a fresh tensor for the node's output */
        ddpl_tensor_release(out);
        out = ddpl_clone(d);
    }
    if (out && grad) {
        ddpl_node *node = ddpl_node_new("CdistBackward0", cdist_backward, 2, OP_INPUTS(a, b));
        ddpl_node_save(node, a);
        ddpl_node_save(node, b);
        ddpl_node_save_output(node, out);
        ddpl_set_history(out, node);
    }
    op_temps_release(&k);
    return out;
}
