/* ops/masked.c: selecting by masks and flat indices (issue 29): nonzero, masked_select,
 * masked_scatter, masked_fill_, take, take_along_dim.
 * defines: ddpl_nonzero, ddpl_nonzero_tuple, ddpl_masked_select, ddpl_masked_scatter,
 *          ddpl_masked_scatter_, ddpl_masked_fill_, ddpl_take, ddpl_take_along_dim,
 *          ddpl_flat_nonzero (advanced_index.c uses it).
 *
 * All are compositions of existing kernels, so they run on every device and differentiate for
 * free (a documented choice), except one step: the flat positions of the non-zero elements
 * come from the NONZERO kernel where the backend has one (the CPU: one pass after
 * count_nonzero), else (CUDA) from a composition: an inclusive cumsum of the mask minus one,
 * scattered (SCATTER, assign) with arange as the values, the positions of zeros sent to one
 * spare slot past the end that is then cut off. Either way the count is read back (one host
 * sync, as PyTorch's nonzero) to size the result. The coordinates are the flat positions divided by
 * the row-major strides, modulo the sizes. masked_select is index_select on the flattened,
 * broadcast input at those positions (its gradient adds back through index_select's);
 * masked_scatter is index_copy of source's first count elements at them; take is
 * index_select on the flattened input (negative indices wrapped first); take_along_dim is
 * gather after broadcasting, as PyTorch writes it. */
#include "scatter.h"

/* The backend's NONZERO kernel (the CPU's: one pass) after counting. */
static ddpl_tensor *flat_nonzero_kernel(ddpl_tensor *t, int64_t *count)
{
    ddpl_tensor *c = ddpl_count_nonzero(t, 0, NULL);
    int rc = c ? ddpl_tensor_item_int64(c, count) : -1;
    ddpl_tensor_release(c);
    ddpl_tensor *out = rc == 0 ? ddpl_empty(1, count, DDPL_INT64, t->device) : NULL;
    if (out && ddpl_run_kernel(DDPL_OP_NONZERO, t->device, &out, &t, NULL) < 0) {
        ddpl_tensor_release(out);
        out = NULL;
    }
    return out;
}

ddpl_tensor *ddpl_flat_nonzero(ddpl_tensor *t, int64_t *count)
{
    int64_t n = ddpl_tensor_numel(t), minus1 = -1;
    *count = 0;
    bool prev = ddpl_grad_mode_set(false);
    if (ddpl_backend_supports(t->device, DDPL_OP_NONZERO)) {
        ddpl_tensor *r = flat_nonzero_kernel(t, count);
        ddpl_grad_mode_set(prev);
        return r;
    }
    op_temps k = {0};
    ddpl_tensor *flat = OP_T(&k, ddpl_reshape(t, 1, &minus1));
    ddpl_tensor *m = OP_B(&k, ddpl_ne, flat, OP_T(&k, ddpl_wrapped_number(0, true)));
    ddpl_tensor *mi = m ? OP_T(&k, ddpl_as_dtype(m, DDPL_INT64)) : NULL;
    ddpl_tensor *cs = mi ? OP_T(&k, ddpl_cumsum(mi, 0, DDPL_INT64)) : NULL;
    ddpl_tensor *r = NULL;
    if (cs && n > 0) {
        ddpl_tensor *last = OP_T(&k, ddpl_select(cs, 0, n - 1));
        if (last && ddpl_tensor_item_int64(last, count) < 0) k.failed = true;
    }
    if (!k.failed) {
        /* the k-th non-zero element goes to slot k (cumsum - 1), every zero to slot count */
        ddpl_tensor *pos = OP_B(&k, ddpl_sub, cs, OP_T(&k, ddpl_wrapped_number(1, true)));
        ddpl_tensor *spare = OP_T(&k, ddpl_scalar((double)*count, DDPL_INT64, t->device));
        ddpl_tensor *tgt = pos && spare ? OP_T(&k, ddpl_where(m, pos, spare)) : NULL;
        int64_t slots = *count + 1;
        ddpl_tensor *out = OP_T(&k, ddpl_empty(1, &slots, DDPL_INT64, t->device));
        ddpl_tensor *ar = OP_T(&k, ddpl_arange_int(0, n, 1, DDPL_INT64, t->device));
        if (tgt && out && ar &&
            ddpl_scatter_into("nonzero", out, 0, tgt, ar, DDPL_SCATTER_ASSIGN, true) == 0)
            r = OP_T(&k, ddpl_narrow(out, 0, 0, *count));
        else
            k.failed = true;
    }
    r = op_temps_result(&k, r);
    ddpl_grad_mode_set(prev);
    return r;
}

/* Column k of nonzero: (flat / stride_k) % size_k for x's row-major strides. */
static ddpl_tensor *coordinate(ddpl_tensor *flat, const ddpl_tensor *x, int k)
{
    int64_t stride = ddpl_numel(x->ndim - k - 1, x->sizes + k + 1);
    op_temps t = {0};
    ddpl_tensor *q =
        stride == 1
            ? flat
            : OP_T(&t, ddpl_div_rounded(flat, OP_T(&t, ddpl_wrapped_number((double)stride, true)),
                                        "floor"));
    ddpl_tensor *r = k == 0 ? q
                            : OP_B(&t, ddpl_remainder, q,
                                   OP_T(&t, ddpl_wrapped_number((double)x->sizes[k], true)));
    return op_temps_result(&t, r);
}

ddpl_tensor *ddpl_nonzero(ddpl_tensor *x)
{
    int64_t count;
    ddpl_tensor *flat = ddpl_flat_nonzero(x, &count);
    if (!flat) return NULL;
    if (x->ndim <= 1) { /* 1-D: the flat positions are the column; 0-dim: no columns */
        int64_t sizes[2] = {count, x->ndim};
        ddpl_tensor *r =
            x->ndim ? ddpl_reshape(flat, 2, sizes) : ddpl_empty(2, sizes, DDPL_INT64, x->device);
        ddpl_tensor_release(flat);
        return r;
    }
    ddpl_tensor *cols[DDPL_MAX_DIMS] = {0};
    ddpl_tensor *r = NULL;
    int made = 0;
    bool prev = ddpl_grad_mode_set(false);
    for (; made < x->ndim; made++)
        if (!(cols[made] = coordinate(flat, x, made))) break;
    if (made == x->ndim) r = ddpl_stack(x->ndim, cols, 1);
    ddpl_grad_mode_set(prev);
    for (int i = 0; i < made; i++) ddpl_tensor_release(cols[i]);
    ddpl_tensor_release(flat);
    return r;
}

int ddpl_nonzero_tuple(ddpl_tensor *x, ddpl_tensor **outs)
{
    int64_t count;
    ddpl_tensor *flat = ddpl_flat_nonzero(x, &count);
    if (!flat) return -1;
    if (x->ndim <= 1) { /* a 0-dim input counts as 1-D, as PyTorch's as_tuple */
        outs[0] = flat;
        return 1;
    }
    int made = 0;
    bool prev = ddpl_grad_mode_set(false);
    for (; made < x->ndim; made++)
        if (!(outs[made] = coordinate(flat, x, made))) break;
    ddpl_grad_mode_set(prev);
    ddpl_tensor_release(flat);
    if (made == x->ndim) return made;
    for (int i = 0; i < made; i++) ddpl_tensor_release(outs[i]);
    return -1;
}

/* ---- masked_select / masked_scatter / masked_fill_ ---- */

static int check_mask(const char *op, ddpl_tensor *x, ddpl_tensor *mask)
{
    if (mask->dtype != DDPL_BOOL)
        return ddpl_error("%s: expected a bool tensor for mask, got %s", op,
                          ddpl_dtype_name((ddpl_dtype)mask->dtype));
    return ddpl_check_same_device(op, x, mask);
}

/* x and mask expanded to their broadcast shape (*xb, *mb new references). */
static int broadcast_pair(const char *op, ddpl_tensor *x, ddpl_tensor *mask, ddpl_tensor **xb,
                          ddpl_tensor **mb)
{
    int nd;
    int64_t sizes[DDPL_MAX_DIMS];
    *xb = *mb = NULL;
    if (ddpl_broadcast_shape(op, x->ndim, x->sizes, mask->ndim, mask->sizes, &nd, sizes) < 0)
        return -1;
    *xb = ddpl_expand(x, nd, sizes);
    *mb = *xb ? ddpl_expand(mask, nd, sizes) : NULL;
    if (*mb) return 0;
    ddpl_tensor_release(*xb);
    *xb = NULL;
    return -1;
}

ddpl_tensor *ddpl_masked_select(ddpl_tensor *x, ddpl_tensor *mask)
{
    ddpl_tensor *xb, *mb;
    if (check_mask("masked_select", x, mask) < 0 ||
        broadcast_pair("masked_select", x, mask, &xb, &mb) < 0)
        return NULL;
    int64_t count, minus1 = -1;
    op_temps k = {0};
    ddpl_tensor *pos = OP_T(&k, ddpl_flat_nonzero(mb, &count));
    ddpl_tensor *flat = pos ? OP_T(&k, ddpl_reshape(xb, 1, &minus1)) : NULL;
    ddpl_tensor *r = flat ? OP_T(&k, ddpl_index_select(flat, 0, pos)) : NULL;
    r = op_temps_result(&k, r);
    ddpl_tensor_release(xb);
    ddpl_tensor_release(mb);
    return r;
}

ddpl_tensor *ddpl_masked_scatter(ddpl_tensor *x, ddpl_tensor *mask, ddpl_tensor *source)
{
    const char *op = "masked_scatter";
    ddpl_tensor *xb, *mb;
    if (check_mask(op, x, mask) < 0 || ddpl_check_same_device(op, x, source) < 0) return NULL;
    if (source->dtype != x->dtype)
        return ddpl_error("%s: expected self and source to have the same dtype, got %s and %s", op,
                          ddpl_dtype_name((ddpl_dtype)x->dtype),
                          ddpl_dtype_name((ddpl_dtype)source->dtype)),
               NULL;
    if (broadcast_pair(op, x, mask, &xb, &mb) < 0) return NULL;
    int64_t count, minus1 = -1;
    op_temps k = {0};
    ddpl_tensor *pos = OP_T(&k, ddpl_flat_nonzero(mb, &count));
    ddpl_tensor *r = NULL;
    if (pos && ddpl_tensor_numel(source) < count) {
        ddpl_error("%s: the mask has %lld true values but source has only %lld elements", op,
                   (long long)count, (long long)ddpl_tensor_numel(source));
    } else if (pos) {
        ddpl_tensor *sf = OP_T(&k, ddpl_reshape(source, 1, &minus1));
        ddpl_tensor *vals = sf ? OP_T(&k, ddpl_narrow(sf, 0, 0, count)) : NULL;
        ddpl_tensor *flat = vals ? OP_T(&k, ddpl_reshape(xb, 1, &minus1)) : NULL;
        ddpl_tensor *w = flat ? OP_T(&k, ddpl_index_copy(flat, 0, pos, vals)) : NULL;
        r = w ? OP_T(&k, ddpl_reshape(w, xb->ndim, xb->sizes)) : NULL;
    }
    r = op_temps_result(&k, r);
    ddpl_tensor_release(xb);
    ddpl_tensor_release(mb);
    return r;
}

/* An error unless mask broadcasts to x's own shape (the in-place forms do not grow x). */
static int check_mask_fits(const char *op, ddpl_tensor *x, ddpl_tensor *mask)
{
    int nd;
    int64_t sizes[DDPL_MAX_DIMS];
    char a[128], b[128];
    if (ddpl_broadcast_shape(op, x->ndim, x->sizes, mask->ndim, mask->sizes, &nd, sizes) < 0)
        return -1;
    if (nd != x->ndim || memcmp(sizes, x->sizes, sizeof(int64_t) * (size_t)nd) != 0)
        return ddpl_error("%s: mask of shape %s does not broadcast to the shape %s of the tensor "
                          "written",
                          op, ddpl_shape_str(mask, a, sizeof a), ddpl_shape_str(x, b, sizeof b));
    return 0;
}

/* The in-place forms of masked_scatter and masked_fill: r = the out-of-place result (computed
 * first, so x is untouched on error) written into x; recorded by autograd when x or source
 * requires grad (ops/inplace.c). */
static int masked_in_place(const char *op, const char *node, ddpl_tensor *x, ddpl_tensor *mask,
                           ddpl_tensor *source, double value)
{
    int rec = ddpl_inplace_recorded(op, x, 1, &source);
    /* PyTorch checks the mask of masked_fill_ (partial overlap) and neither for masked_scatter_,
     * which reads its source in order of the mask's true elements */
    ddpl_tensor *read = source ? NULL : mask;
    if (rec < 0 || ddpl_check_write(op, x, DDPL_WRITE_ELEMENTWISE, 1, &read) < 0 ||
        check_mask(op, x, mask) < 0 || check_mask_fits(op, x, mask) < 0)
        return -1;
    if (!rec && ddpl_check_inplace(op, x) < 0) return -1;
    bool prev = rec ? true : ddpl_grad_mode_set(false);
    ddpl_tensor *xs = ddpl_inplace_source(x, false);
    ddpl_tensor *r = !xs      ? NULL
                     : source ? ddpl_masked_scatter(xs, mask, source)
                              : ddpl_masked_fill(xs, mask, value);
    ddpl_tensor_release(xs);
    if (!rec) ddpl_grad_mode_set(prev);
    if (rec) return ddpl_inplace_commit(op, node, x, r);
    if (!r) return -1;
    int rc = ddpl_run_kernel(DDPL_OP_COPY, x->device, &x, &r, NULL);
    ddpl_tensor_release(r);
    if (rc == 0) ddpl_storage_bump_version(x->storage);
    return rc;
}

int ddpl_masked_scatter_(ddpl_tensor *x, ddpl_tensor *mask, ddpl_tensor *source)
{
    return masked_in_place("masked_scatter_", "MaskedScatterBackward0", x, mask, source, 0);
}

int ddpl_masked_fill_(ddpl_tensor *x, ddpl_tensor *mask, double value)
{
    return masked_in_place("masked_fill_", "MaskedFillBackward0", x, mask, NULL, value);
}

/* ---- take / take_along_dim ---- */

/* On the CPU, an error naming op unless every value of ix lies in [-n, n), in PyTorch's words
 * (CUDA: ddpl_take checks the wrapped values on the device). */
static int check_take_range(const char *op, ddpl_tensor *ix, int64_t n)
{
    if (ix->device.type != DDPL_CPU || ddpl_tensor_numel(ix) == 0) return 0;
    ddpl_tensor *c = ddpl_contiguous(ix);
    if (!c) return -1;
    const int64_t *v = (const int64_t *)ddpl_data_ptr(c);
    int rc = 0;
    for (int64_t i = 0, m = ddpl_tensor_numel(c); i < m && rc == 0; i++)
        if (v[i] < -n || v[i] >= n)
            rc = ddpl_error("%s: out of range: tried to access index %lld on a tensor of %lld "
                            "elements",
                            op, (long long)v[i], (long long)n);
    ddpl_tensor_release(c);
    return rc;
}

ddpl_tensor *ddpl_take(ddpl_tensor *x, ddpl_tensor *index)
{
    const char *op = "take";
    if (index->dtype != DDPL_INT64)
        return ddpl_error("%s: expected an int64 tensor for index, got %s", op,
                          ddpl_dtype_name((ddpl_dtype)index->dtype)),
               NULL;
    if (ddpl_check_same_device(op, x, index) < 0) return NULL;
    int64_t n = ddpl_tensor_numel(x), minus1 = -1;
    if (n == 0 && ddpl_tensor_numel(index) > 0)
        return ddpl_error("%s: tried to take from an empty tensor", op), NULL;
    if (check_take_range(op, index, n) < 0) return NULL;
    op_temps k = {0};
    ddpl_tensor *w = OP_T(&k, ddpl_index_wrap(index, n));
    ddpl_tensor *wf = w ? OP_T(&k, ddpl_reshape(w, 1, &minus1)) : NULL;
    /* CUDA: checked on the device, named take (the CPU checked on the host above) */
    if (wf && x->device.type != DDPL_CPU && ddpl_check_index_range(op, wf, 0, n) < 0)
        k.failed = true;
    ddpl_tensor *xf = wf && !k.failed ? OP_T(&k, ddpl_reshape(x, 1, &minus1)) : NULL;
    ddpl_tensor *r = xf ? OP_T(&k, ddpl_index_select(xf, 0, wf)) : NULL;
    r = r ? OP_T(&k, ddpl_reshape(r, index->ndim, index->sizes)) : NULL;
    return op_temps_result(&k, r);
}

ddpl_tensor *ddpl_take_along_dim(ddpl_tensor *x, ddpl_tensor *indices, bool has_dim, int dim)
{
    const char *op = "take_along_dim";
    if (indices->dtype != DDPL_INT64)
        return ddpl_error("%s: dtype of indices should be int64 but got %s", op,
                          ddpl_dtype_name((ddpl_dtype)indices->dtype)),
               NULL;
    if (ddpl_check_same_device(op, x, indices) < 0) return NULL;
    op_temps k = {0};
    int64_t minus1 = -1;
    if (!has_dim) {
        ddpl_tensor *xf = OP_T(&k, ddpl_reshape(x, 1, &minus1));
        ddpl_tensor *inf = OP_T(&k, ddpl_reshape(indices, 1, &minus1));
        /* CUDA: checked on the device first, so the asynchronous report names take_along_dim
         * (the gather's own check would name gather; on the CPU its error is wrapped) */
        if (xf && inf && x->device.type != DDPL_CPU &&
            ddpl_check_index_range(op, inf, 0, xf->sizes[0]) < 0)
            k.failed = true;
        ddpl_tensor *r = xf && inf && !k.failed ? OP_T(&k, ddpl_gather(xf, 0, inf)) : NULL;
        return op_temps_result(&k, r);
    }
    int d = ddpl_wrap_dim(op, dim, x->ndim);
    if (d < 0) return NULL;
    if (x->ndim != indices->ndim)
        return ddpl_error("%s: input and indices should have the same number of dimensions, but "
                          "got %d dimensions for input, and %d dimensions for indices",
                          op, x->ndim, indices->ndim),
               NULL;
    /* indices broadcast against x with x's dim replaced by theirs; x against indices with the
     * indices' dim replaced by x's (PyTorch's _take_along_dim_helper) */
    int64_t a[DDPL_MAX_DIMS], b[DDPL_MAX_DIMS], s1[DDPL_MAX_DIMS], s2[DDPL_MAX_DIMS];
    int n1, n2;
    memcpy(a, x->sizes, sizeof a);
    memcpy(b, indices->sizes, sizeof b);
    if (x->ndim) {
        a[d] = indices->sizes[d];
        b[d] = x->sizes[d];
    }
    if (ddpl_broadcast_shape(op, x->ndim, a, indices->ndim, indices->sizes, &n1, s1) < 0 ||
        ddpl_broadcast_shape(op, indices->ndim, b, x->ndim, x->sizes, &n2, s2) < 0)
        return NULL;
    ddpl_tensor *ib = OP_T(&k, ddpl_expand(indices, n1, s1));
    ddpl_tensor *xb = OP_T(&k, ddpl_expand(x, n2, s2));
    if (ib && xb && x->device.type != DDPL_CPU && x->ndim &&
        ddpl_check_index_range(op, ib, d, xb->sizes[d]) < 0) /* as above */
        k.failed = true;
    ddpl_tensor *r = ib && xb && !k.failed ? OP_T(&k, ddpl_gather(xb, d, ib)) : NULL;
    return op_temps_result(&k, r);
}
