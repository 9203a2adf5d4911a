/* ops/reduce_median.c: median, nanmedian, quantile and nanquantile, as PyTorch 1.13.
 * defines: ddpl_median, ddpl_median_dim, ddpl_nanmedian, ddpl_nanmedian_dim, ddpl_quantile.
 *
 * Where the backend has the KTHVALUE kernel (the CPU) the ranks are selected without sorting
 * (quickselect, O(n) a row: median of 1024x1024 rows 5x faster than the sort) and the
 * elements gathered from x by position; elsewhere compositions of sort (ops/sort.c), gather
 * and lerp: the selected positions depend on each row's NaN count, which a gather by a per-row
 * position tensor handles on every device. The gradients come from gather's (and sort's): the
 * selected element gets the whole gradient; quantile's interpolation weights split it between
 * the two neighbours, as PyTorch's lerp does.
 *
 * median picks the lower of the two middles; a row with a NaN gives NaN and the index of its
 * first NaN (the stable sort puts NaNs last, in input order). nanmedian takes the lower middle
 * of the non-NaN values (an all-NaN row: NaN, the index of its first NaN; PyTorch leaves that
 * index unspecified). quantile follows PyTorch's algorithm step by step (ranks q * (n - 1) in
 * the input's dtype, NaN rows rank last, then floor/ceil/round for lower/higher/nearest and a
 * lerp for linear/midpoint), so results match it up to the lerp's rounding. quantile's ranks
 * and weights carry no gradient (PyTorch's also reaches a q that requires grad). */
#include <math.h>

#include "reduce.h"

/* Prefixes an error raised by an op of the composition with `op` when it names another one. */
static void rename_error(const char *op)
{
    char msg[512];
    snprintf(msg, sizeof msg, "%s", ddpl_last_error());
    if (strncmp(msg, op, strlen(op)) == 0 && msg[strlen(op)] == ':') return;
    const char *colon = strchr(msg, ':');
    if (colon && colon - msg < 24) ddpl_error("%s:%s", op, colon + 1);
}

/* ---- median / nanmedian along a dim ---- */

/* The sorted position of each row's median: sizes of x with dim d of size 1 (int64).
 * median: n - nans where a row has NaNs (its first NaN), else (n - 1) / 2; nanmedian:
 * max(n - nans - 1, 0) / 2. cnt is each row's NaN count. */
static ddpl_tensor *median_position(op_temps *k, ddpl_tensor *cnt, int64_t n, bool ignore_nan)
{
    ddpl_tensor *n_t = OP_T(k, ddpl_wrapped_number((double)n, true));
    ddpl_tensor *valid = OP_B(k, ddpl_sub, n_t, cnt); /* non-NaN count */
    if (ignore_nan) {
        ddpl_tensor *m1 = OP_B(k, ddpl_sub, valid, OP_T(k, ddpl_wrapped_number(1, true)));
        ddpl_tensor *c = OP_B(k, ddpl_maximum, m1, OP_T(k, ddpl_wrapped_number(0, true)));
        return OP_B(k, ddpl_floor_divide, c, OP_T(k, ddpl_wrapped_number(2, true)));
    }
    ddpl_tensor *has_nan = OP_B(k, ddpl_gt, cnt, OP_T(k, ddpl_wrapped_number(0, true)));
    ddpl_tensor *mid =
        OP_T(k, ddpl_full(cnt->ndim, cnt->sizes, (double)((n - 1) / 2), DDPL_INT64, cnt->device));
    if (k->failed || !has_nan || !valid) return NULL;
    return OP_T(k, ddpl_where(has_nan, valid, mid));
}

/* values and indices of the (nan)median of x (ndim >= 1) along d, keepdim as asked. */
static int median_along(const char *op, ddpl_tensor *x, int d, bool keepdim, bool ignore_nan,
                        ddpl_tensor **values, ddpl_tensor **indices)
{
    int64_t n = x->sizes[d];
    if (x->dtype == DDPL_BOOL) return ddpl_error("%s: not implemented for bool tensors", op);
    if (n == 0) return ddpl_error("%s: expected reduction dim %d to have non-zero size", op, d);
    if (ddpl_backend_supports(x->device, DDPL_OP_KTHVALUE)) {
        ddpl_kthvalue_params p = {d, ignore_nan ? DDPL_SELECT_NANMEDIAN : DDPL_SELECT_MEDIAN, 0};
        return ddpl_select_ranks(op, x, d, &p, keepdim, values, indices);
    }
    ddpl_tensor *sv, *si;
    if (ddpl_sort(x, d, false, &sv, &si) < 0) return rename_error(op), -1;
    op_temps k = {0};
    OP_T(&k, sv);
    OP_T(&k, si);
    ddpl_tensor *pos;
    {
        bool prev = ddpl_set_grad_enabled(false); /* positions are not differentiable */
        ddpl_tensor *cnt = OP_U(&k, ddpl_isnan, x);
        cnt = cnt ? OP_T(&k, ddpl_sum_dim(cnt, d, true)) : NULL;
        pos = cnt ? median_position(&k, cnt, n, ignore_nan) : NULL;
        ddpl_set_grad_enabled(prev);
    }
    ddpl_tensor *v = pos ? OP_T(&k, ddpl_gather(sv, d, pos)) : NULL;
    ddpl_tensor *i = v ? OP_T(&k, ddpl_gather(si, d, pos)) : NULL;
    if (i && !keepdim) {
        v = OP_T(&k, ddpl_squeeze(v, d));
        i = v ? OP_T(&k, ddpl_squeeze(i, d)) : NULL;
    }
    if (!i || k.failed) {
        rename_error(op);
        op_temps_release(&k);
        return -1;
    }
    *values = ddpl_tensor_retain(v);
    *indices = ddpl_tensor_retain(i);
    op_temps_release(&k);
    return 0;
}

static int median_dim_impl(const char *op, ddpl_tensor *x, int dim, bool keepdim, bool ignore_nan,
                           ddpl_tensor **values, ddpl_tensor **indices)
{
    *values = *indices = NULL;
    int d = ddpl_wrap_dim(op, dim, x->ndim);
    if (d < 0) return -1;
    if (x->ndim > 0) return median_along(op, x, d, keepdim, ignore_nan, values, indices);
    /* 0-dim: the element itself and index 0, as a 1-element row */
    ddpl_tensor *row = ddpl_unsqueeze(x, 0);
    if (!row) return -1;
    int rc = median_along(op, row, 0, false, ignore_nan, values, indices);
    ddpl_tensor_release(row);
    return rc;
}

int ddpl_median_dim(ddpl_tensor *x, int dim, bool keepdim, ddpl_tensor **values,
                    ddpl_tensor **indices)
{
    return median_dim_impl("median", x, dim, keepdim, false, values, indices);
}

int ddpl_nanmedian_dim(ddpl_tensor *x, int dim, bool keepdim, ddpl_tensor **values,
                       ddpl_tensor **indices)
{
    return median_dim_impl("nanmedian", x, dim, keepdim, true, values, indices);
}

/* The whole tensor's (nan)median, 0-dim; an empty tensor gives NaN, as PyTorch. */
static ddpl_tensor *median_all(const char *op, ddpl_tensor *x, bool ignore_nan)
{
    if (x->dtype == DDPL_BOOL) return ddpl_error("%s: not implemented for bool tensors", op), NULL;
    if (ddpl_tensor_numel(x) == 0) {
        if (!ddpl_dtype_is_floating((ddpl_dtype)x->dtype))
            return ddpl_error("%s: an empty %s tensor has no median", op,
                              ddpl_dtype_name((ddpl_dtype)x->dtype)),
                   NULL;
        return ddpl_scalar(NAN, (ddpl_dtype)x->dtype, x->device);
    }
    int64_t all = -1;
    ddpl_tensor *flat = ddpl_reshape(x, 1, &all), *v = NULL, *i = NULL;
    if (flat) median_along(op, flat, 0, false, ignore_nan, &v, &i);
    ddpl_tensor_release(flat);
    ddpl_tensor_release(i);
    return v;
}

ddpl_tensor *ddpl_median(ddpl_tensor *x)
{
    return median_all("median", x, false);
}

ddpl_tensor *ddpl_nanmedian(ddpl_tensor *x)
{
    return median_all("nanmedian", x, true);
}

/* ---- quantile / nanquantile ---- */

static int quantile_check(const char *op, ddpl_tensor *x, ddpl_tensor *q, double qs,
                          const char *interpolation)
{
    static const char *const modes[] = {"linear", "lower", "higher", "midpoint", "nearest"};
    bool known = false;
    for (int m = 0; m < 5; m++) known |= strcmp(interpolation, modes[m]) == 0;
    if (!known)
        return ddpl_error("%s: interpolation must be one of linear, lower, higher, midpoint or "
                          "nearest, but got %s",
                          op, interpolation);
    if (x->dtype != DDPL_FLOAT32 && x->dtype != DDPL_FLOAT64)
        return ddpl_error("%s: input tensor must be float32 or float64, got %s", op,
                          ddpl_dtype_name((ddpl_dtype)x->dtype));
    if (ddpl_tensor_numel(x) == 0) return ddpl_error("%s: input tensor must be non-empty", op);
    if (!q) {
        if (!(qs >= 0 && qs <= 1))
            return ddpl_error("%s: q must be in the range [0, 1] but got %g", op, qs);
        return 0;
    }
    char sq[128];
    if (q->ndim > 1)
        return ddpl_error("%s: q must be a scalar or 1-D tensor, got shape %s", op,
                          ddpl_shape_str(q, sq, sizeof sq));
    if (q->dtype != x->dtype)
        return ddpl_error("%s: q tensor must have the input's dtype %s, got %s", op,
                          ddpl_dtype_name((ddpl_dtype)x->dtype),
                          ddpl_dtype_name((ddpl_dtype)q->dtype));
    if (ddpl_check_same_device(op, x, q) < 0) return -1;
    /* the range check reads q on the host (PyTorch checks it likewise) */
    int64_t nq = ddpl_tensor_numel(q);
    ddpl_tensor *q64 = nq ? ddpl_as_dtype(q, DDPL_FLOAT64) : NULL;
    double *h = q64 ? ddpl_tensor_host_copy(q64) : NULL;
    ddpl_tensor_release(q64);
    if (nq && !h) return -1;
    int rc = 0;
    for (int64_t j = 0; j < nq && rc == 0; j++)
        if (!(h[j] >= 0 && h[j] <= 1))
            rc = ddpl_error("%s: q values must be in the range [0, 1], got %g", op, h[j]);
    free(h);
    return rc;
}

/* The ranks (Q, R..., 1) into the sorted rows s (R..., n) for the q values qv (Q, 1.., 1), in
 * the input's dtype, PyTorch's steps: NaN rows rank last (quantile) or the non-NaN values are
 * ranked alone (nanquantile, an all-NaN row ranking 0); then rounded by the interpolation. */
static ddpl_tensor *quantile_ranks(op_temps *k, ddpl_tensor *s, ddpl_tensor *qv, bool ignore_nan,
                                   const char *interp)
{
    int last = s->ndim - 1;
    int64_t n = s->sizes[last];
    ddpl_tensor *nan = OP_U(k, ddpl_isnan, s), *ranks;
    if (ignore_nan) {
        ddpl_tensor *valid = OP_U(k, ddpl_logical_not, nan);
        ddpl_tensor *cnt = valid ? OP_T(k, ddpl_sum_dim(valid, last, true)) : NULL;
        ddpl_tensor *cm1 = OP_B(k, ddpl_sub, cnt, OP_T(k, ddpl_wrapped_number(1, true)));
        ranks = OP_B(k, ddpl_mul, qv, cm1);
        ddpl_tensor *neg = OP_B(k, ddpl_lt, ranks, OP_T(k, ddpl_wrapped_number(0, true)));
        ranks = ranks && neg ? OP_T(k, ddpl_masked_fill(ranks, neg, 0)) : NULL;
    } else {
        int dim = last;
        ddpl_tensor *any = nan ? OP_T(k, ddpl_any(nan, 1, &dim, true)) : NULL;
        ddpl_tensor *r = OP_B(k, ddpl_mul, qv, OP_T(k, ddpl_wrapped_number((double)(n - 1), true)));
        ddpl_tensor *lastr =
            r ? OP_T(k, ddpl_scalar((double)(n - 1), (ddpl_dtype)r->dtype, r->device)) : NULL;
        ranks = any && lastr && r ? OP_T(k, ddpl_where(any, lastr, r)) : NULL;
    }
    if (strcmp(interp, "lower") == 0) return OP_U(k, ddpl_floor, ranks);
    if (strcmp(interp, "higher") == 0) return OP_U(k, ddpl_ceil, ranks);
    if (strcmp(interp, "nearest") == 0) return ranks ? OP_T(k, ddpl_round(ranks, 0)) : NULL;
    return ranks;
}

/* x's dims other than d in order, then d (PyTorch moves the reduced dim last). */
static ddpl_tensor *move_last(ddpl_tensor *x, int d)
{
    int perm[DDPL_MAX_DIMS], m = 0;
    for (int i = 0; i < x->ndim; i++)
        if (i != d) perm[m++] = i;
    perm[m] = d;
    return ddpl_permute(x, x->ndim, perm);
}

/* q: a 0-/1-D tensor of x's dtype, or NULL for the number qs. Without has_dim x is flattened;
 * keepdim then keeps every dim as size 1. Output (Q, reduced...) for a tensor q, (reduced...)
 * for a number or a 0-dim q. */
static ddpl_tensor *quantile_impl(const char *op, ddpl_tensor *x, ddpl_tensor *q, double qs,
                                  bool has_dim, int dim, bool keepdim, const char *interp,
                                  bool ignore_nan)
{
    if (quantile_check(op, x, q, qs, interp) < 0) return NULL;
    int d = 0;
    if (has_dim && (d = ddpl_wrap_dim(op, dim, x->ndim)) < 0) return NULL;
    op_temps k = {0};
    int64_t all = -1;
    ddpl_tensor *src = !has_dim || x->ndim == 0 ? OP_T(&k, ddpl_reshape(x, 1, &all)) : x;
    if (!has_dim || x->ndim == 0) d = 0;
    ddpl_tensor *sv = NULL, *si = NULL;
    ddpl_tensor *moved = src ? OP_T(&k, move_last(src, d)) : NULL;
    /* with the KTHVALUE kernel the rows stay unsorted: the ranks are selected in place and
     * their elements gathered from x by position (select is set); else the rows are sorted */
    bool select = moved && ddpl_backend_supports(x->device, DDPL_OP_KTHVALUE);
    if (select) {
        sv = moved;
    } else if (moved && ddpl_sort(moved, moved->ndim - 1, false, &sv, &si) == 0) {
        OP_T(&k, sv);
        ddpl_tensor_release(si);
    } else {
        k.failed = true;
    }
    int64_t Q = q ? ddpl_tensor_numel(q) : 1;
    ddpl_tensor *result = NULL;
    if (!k.failed) {
        /* q as (Q, 1, ..., 1) against the sorted rows expanded to (Q, R..., n) */
        int nd = sv->ndim + 1;
        int64_t qshape[DDPL_MAX_DIMS + 1], eshape[DDPL_MAX_DIMS + 1];
        for (int i = 0; i < nd; i++) qshape[i] = 1, eshape[i] = i ? sv->sizes[i - 1] : Q;
        qshape[0] = Q;
        ddpl_tensor *qv;
        if (q) {
            qv = OP_T(&k, ddpl_reshape(q, nd, qshape));
        } else {
            qv = OP_T(&k, ddpl_full(nd, qshape, qs, (ddpl_dtype)x->dtype, x->device));
        }
        ddpl_tensor *se = OP_T(&k, ddpl_unsqueeze(sv, 0));
        se = se ? OP_T(&k, ddpl_expand(se, nd, eshape)) : NULL;
        ddpl_tensor *ranks = NULL, *below = NULL, *above = NULL, *w = NULL;
        {
            bool prev = ddpl_set_grad_enabled(false); /* ranks and weights carry no gradient */
            ranks =
                qv ? quantile_ranks(&k, sv, OP_T(&k, ddpl_detach(qv)), ignore_nan, interp) : NULL;
            below = ranks ? OP_T(&k, ddpl_as_dtype(ranks, DDPL_INT64)) : NULL;
            bool lerp = strcmp(interp, "linear") == 0 || strcmp(interp, "midpoint") == 0;
            if (lerp && below) {
                ddpl_tensor *up = OP_U(&k, ddpl_ceil, ranks);
                above = up ? OP_T(&k, ddpl_as_dtype(up, DDPL_INT64)) : NULL;
                w = strcmp(interp, "midpoint") == 0
                        ? OP_T(&k, ddpl_full(ranks->ndim, ranks->sizes, 0.5,
                                             (ddpl_dtype)ranks->dtype, ranks->device))
                        : OP_B(&k, ddpl_sub, ranks, OP_U(&k, ddpl_floor, ranks));
            }
            ddpl_set_grad_enabled(prev);
        }
        if (select && below) {
            /* ranks -> positions in the unsorted rows: both neighbours in one pass (Q, or 2Q
             * ranks a row) */
            ddpl_tensor *both[2] = {below, above};
            ddpl_tensor *r = above ? OP_T(&k, ddpl_cat(2, both, 0)) : below;
            ddpl_kthvalue_params p = {sv->ndim - 1, DDPL_SELECT_RANKS, 0};
            ddpl_tensor *pos = r ? OP_T(&k, ddpl_select_positions(op, sv, &p, r)) : NULL;
            below = pos ? OP_T(&k, ddpl_narrow(pos, 0, 0, Q)) : NULL;
            if (above) above = pos ? OP_T(&k, ddpl_narrow(pos, 0, Q, Q)) : NULL;
        }
        ddpl_tensor *v = se && below ? OP_T(&k, ddpl_gather(se, nd - 1, below)) : NULL;
        if (v && above && w) {
            ddpl_tensor *va = OP_T(&k, ddpl_gather(se, nd - 1, above));
            v = va ? OP_T(&k, ddpl_lerp(v, va, w)) : NULL;
        }
        v = v ? OP_T(&k, ddpl_squeeze(v, nd - 1)) : NULL; /* (Q, R...) */
        if (v && keepdim) {
            if (has_dim && x->ndim > 0) {
                v = OP_T(&k, ddpl_unsqueeze(v, 1 + d));
            } else { /* every dim of x kept as size 1 */
                int64_t ks[DDPL_MAX_DIMS + 1];
                ks[0] = Q;
                for (int i = 0; i < x->ndim; i++) ks[1 + i] = 1;
                v = OP_T(&k, ddpl_reshape(v, 1 + x->ndim, ks));
            }
        }
        if (v && (!q || q->ndim == 0)) v = OP_T(&k, ddpl_squeeze(v, 0));
        result = v;
    }
    result = op_temps_result(&k, result);
    if (!result) rename_error(op);
    return result;
}

ddpl_tensor *ddpl_quantile(ddpl_tensor *x, ddpl_tensor *q, double q_number, bool has_dim, int dim,
                           bool keepdim, const char *interpolation, bool ignore_nan)
{
    return quantile_impl(ignore_nan ? "nanquantile" : "quantile", x, q, q_number, has_dim, dim,
                         keepdim, interpolation ? interpolation : "linear", ignore_nan);
}
