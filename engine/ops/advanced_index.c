/* ops/advanced_index.c: the C core of advanced indexing (issue 29): x[i0, ..., i_{n-1}] and
 * index_put with PyTorch's rules.
 * defines: ddpl_index, ddpl_index_put, ddpl_index_put_, ddpl_check_index_range.
 *
 * A composition (no kernel of its own): each bool mask becomes the index tensors of its
 * nonzero() over the dims it covers; the index tensors (int64/int32, negative ones wrapped)
 * broadcast together to a shape B and combine into one linear index over the indexed dims
 * (row-major: L = (i_a * size_b + i_b) * size_c + i_c ...). x permuted so the indexed dims lead
 * and reshaped to (P, rest...) (P the product of the indexed sizes) is then read with
 * index_select at L, or written with index_copy / index_add (accumulate): one pass each, and
 * every step differentiable, so x[...]'s gradient is index_select's (an INDEX_ADD into zeros:
 * index_put with accumulate) and index_put's are index_copy's / index_add's. Each index tensor
 * is checked against its dim first (a SCATTER into a scratch row of the dim's size, which checks
 * without a host sync on CUDA and names the op), because a bad per-dim index could otherwise
 * land on another valid linear position. The result dims go where PyTorch puts them: at the
 * first indexed dim when the indexed dims are adjacent, else first. */
#include "scatter.h"

/* The indexing of one call: per dim of x, its int64 index (broadcast to B, wrapped) or NULL. */
typedef struct {
    ddpl_tensor *idx[DDPL_MAX_DIMS];
    int nd;   /* x's dims */
    int nidx; /* indexed dims */
    int bnd;  /* B's dims */
    int64_t bsizes[DDPL_MAX_DIMS];
    int first;           /* the first indexed dim */
    bool adjacent;       /* the indexed dims are consecutive */
    ddpl_tensor *linear; /* int64 (N,): the linear index, flattened B */
} index_plan;

static void plan_release(index_plan *p)
{
    for (int d = 0; d < DDPL_MAX_DIMS; d++) ddpl_tensor_release(p->idx[d]);
    ddpl_tensor_release(p->linear);
}

/* ddpl_check_index_range (scatter.h): a plain scatter of zeros into a scratch tensor of `size`
 * elements along dim d (shape 1 before d), whose kernel checks each index before it writes. */
int ddpl_check_index_range(const char *op, ddpl_tensor *ix, int d, int64_t size)
{
    int64_t ssz[DDPL_MAX_DIMS], isz[DDPL_MAX_DIMS];
    for (int k = 0; k <= d; k++) ssz[k] = isz[k] = 1;
    ssz[d] = size;
    isz[d] = ddpl_tensor_numel(ix);
    if (isz[d] == 0) return 0;
    op_temps k = {0};
    ddpl_tensor *scratch = OP_T(&k, ddpl_empty(d + 1, ssz, DDPL_UINT8, ix->device));
    ddpl_tensor *ir = OP_T(&k, ddpl_reshape(ix, d + 1, isz));
    ddpl_tensor *zero = OP_T(&k, ddpl_scalar(0, DDPL_UINT8, ix->device));
    ddpl_tensor *src = zero && ir ? OP_T(&k, ddpl_expand(zero, d + 1, isz)) : NULL;
    int rc =
        src && scratch ? ddpl_scatter_into(op, scratch, d, ir, src, DDPL_SCATTER_ASSIGN, true) : -1;
    op_temps_release(&k);
    return rc;
}

/* Expands bool masks, converts, checks, wraps and broadcasts the indices; computes L. */
static int plan_make(const char *op, ddpl_tensor *x, int n, ddpl_tensor *const *indices,
                     index_plan *p)
{
    char a[128], b[128];
    *p = (index_plan){.nd = x->ndim, .first = -1};
    int d = 0;
    for (int i = 0; i < n; i++) {
        ddpl_tensor *t = indices[i];
        if (!t) { /* a full slice */
            if (++d > x->ndim) break;
            continue;
        }
        if (ddpl_check_same_device(op, x, t) < 0) return -1;
        if (t->dtype == DDPL_BOOL || t->dtype == DDPL_UINT8) {
            if (t->dtype == DDPL_UINT8)
                return ddpl_error("%s: uint8 masks are deprecated in PyTorch and not supported; "
                                  "use a bool mask",
                                  op);
            if (t->ndim == 0)
                return ddpl_error("%s: a 0-dim bool mask as an index is not supported", op);
            if (d + t->ndim > x->ndim) {
                d += t->ndim;
                break;
            }
            for (int k = 0; k < t->ndim; k++)
                if (t->sizes[k] != x->sizes[d + k])
                    return ddpl_error("%s: the shape of the mask %s at index %d does not match "
                                      "the shape of the indexed tensor %s at index %d",
                                      op, ddpl_shape_str(t, a, sizeof a), k,
                                      ddpl_shape_str(x, b, sizeof b), d + k);
            ddpl_tensor *cols[DDPL_MAX_DIMS];
            int m = ddpl_nonzero_tuple(t, cols);
            if (m < 0) return -1;
            for (int k = 0; k < m; k++) p->idx[d + k] = cols[k];
            d += m;
            continue;
        }
        if (d >= x->ndim) {
            d++;
            break;
        }
        if (!(p->idx[d] = ddpl_index_int64(op, t))) return -1;
        d++;
    }
    if (d > x->ndim || (n > 0 && x->ndim == 0))
        return ddpl_error("%s: too many indices for a tensor of dimension %d", op, x->ndim);
    /* broadcast shape, checks, wraps */
    int last = -1;
    p->adjacent = true;
    for (int k = 0; k < x->ndim; k++) {
        ddpl_tensor *t = p->idx[k];
        if (!t) continue;
        if (p->first < 0) {
            p->first = k;
            p->bnd = t->ndim;
            memcpy(p->bsizes, t->sizes, sizeof(int64_t) * (size_t)t->ndim);
        } else {
            if (k != last + 1) p->adjacent = false;
            int nd;
            int64_t s[DDPL_MAX_DIMS];
            if (ddpl_broadcast_shape(op, p->bnd, p->bsizes, t->ndim, t->sizes, &nd, s) < 0)
                return -1;
            p->bnd = nd;
            memcpy(p->bsizes, s, sizeof s);
        }
        last = k;
        p->nidx++;
        ddpl_tensor *w = ddpl_index_wrap(t, x->sizes[k]);
        ddpl_tensor_release(t);
        p->idx[k] = w;
        if (!w || ddpl_check_index_range(op, w, k, x->sizes[k]) < 0) return -1;
    }
    if (p->nidx == 0) return 0;
    if (p->bnd + x->ndim - p->nidx > DDPL_MAX_DIMS)
        return ddpl_error("%s: the indexing result would have %d dimensions (at most %d)", op,
                          p->bnd + x->ndim - p->nidx, DDPL_MAX_DIMS);
    /* L = ((i_a * size_b) + i_b) * size_c + i_c ..., over B */
    bool prev = ddpl_grad_mode_set(false);
    op_temps k = {0};
    ddpl_tensor *L = NULL;
    for (int q = 0; q < x->ndim; q++) {
        if (!p->idx[q]) continue;
        if (!L) {
            L = OP_T(&k, ddpl_expand(p->idx[q], p->bnd, p->bsizes));
            continue;
        }
        L = OP_B(&k, ddpl_mul, L, OP_T(&k, ddpl_wrapped_number((double)x->sizes[q], true)));
        L = OP_B(&k, ddpl_add, L, p->idx[q]);
    }
    int64_t minus1 = -1;
    ddpl_tensor *flat = L ? OP_T(&k, ddpl_reshape(L, 1, &minus1)) : NULL;
    p->linear = op_temps_result(&k, flat);
    ddpl_grad_mode_set(prev);
    return p->linear ? 0 : -1;
}

/* The permutation that puts the indexed dims first (in order), then the rest; and x viewed
 * through it reshaped to (P, rest...). *rest_n: how many rest dims. */
static ddpl_tensor *indexed_first(ddpl_tensor *x, const index_plan *p, int *perm, int *rest_n)
{
    int j = 0;
    int64_t P = 1, sizes[DDPL_MAX_DIMS];
    for (int d = 0; d < x->ndim; d++)
        if (p->idx[d]) {
            perm[j++] = d;
            P *= x->sizes[d];
        }
    int r = 1;
    sizes[0] = P;
    for (int d = 0; d < x->ndim; d++)
        if (!p->idx[d]) {
            perm[j++] = d;
            sizes[r++] = x->sizes[d];
        }
    *rest_n = r - 1;
    ddpl_tensor *xp = ddpl_permute(x, x->ndim, perm);
    ddpl_tensor *xr = xp ? ddpl_reshape(xp, r, sizes) : NULL;
    ddpl_tensor_release(xp);
    return xr;
}

/* The permutation taking (B..., rest...) to PyTorch's result layout: B at the first indexed
 * dim when the indexed dims are adjacent (after the `first` rest dims that precede it). */
static int result_perm(const index_plan *p, int rest_n, int *perm)
{
    int nd = p->bnd + rest_n, j = 0;
    int before = p->adjacent ? p->first : 0;
    for (int i = 0; i < before; i++) perm[j++] = p->bnd + i;
    for (int i = 0; i < p->bnd; i++) perm[j++] = i;
    for (int i = before; i < rest_n; i++) perm[j++] = p->bnd + i;
    return nd;
}

ddpl_tensor *ddpl_index(ddpl_tensor *x, int n, ddpl_tensor *const *indices)
{
    index_plan p;
    ddpl_tensor *r = NULL;
    if (plan_make("index", x, n, indices, &p) < 0) goto out;
    if (p.nidx == 0) { /* only full slices: x itself, as a view */
        r = ddpl_view(x, x->ndim, x->sizes);
        goto out;
    }
    int perm[DDPL_MAX_DIMS], rp[DDPL_MAX_DIMS], rest_n = 0;
    op_temps k = {0};
    ddpl_tensor *xr = OP_T(&k, indexed_first(x, &p, perm, &rest_n));
    ddpl_tensor *sel = xr ? OP_T(&k, ddpl_index_select(xr, 0, p.linear)) : NULL;
    int64_t sizes[DDPL_MAX_DIMS]; /* bnd + rest_n <= DDPL_MAX_DIMS: plan_make checked */
    memcpy(sizes, p.bsizes, sizeof(int64_t) * (size_t)p.bnd);
    if (xr) memcpy(sizes + p.bnd, xr->sizes + 1, sizeof(int64_t) * (size_t)rest_n);
    ddpl_tensor *shaped =
        sel && !k.failed ? OP_T(&k, ddpl_reshape(sel, p.bnd + rest_n, sizes)) : NULL;
    int nd = result_perm(&p, rest_n, rp);
    r = shaped ? OP_T(&k, ddpl_permute(shaped, nd, rp)) : NULL;
    r = op_temps_result(&k, r);
out:
    plan_release(&p);
    return r;
}

/* x with values written (or added) at the plan's positions; out of place, recorded. */
static ddpl_tensor *put_planned(const char *op, ddpl_tensor *x, const index_plan *p,
                                ddpl_tensor *values, bool accumulate)
{
    char a[128], b[128];
    int perm[DDPL_MAX_DIMS], rp[DDPL_MAX_DIMS], inv[DDPL_MAX_DIMS], rest_n;
    op_temps k = {0};
    ddpl_tensor *xr = OP_T(&k, indexed_first(x, p, perm, &rest_n));
    if (!xr) return op_temps_result(&k, NULL);
    /* the shape of x[indices] (PyTorch's layout), which values must broadcast to */
    int64_t bl[DDPL_MAX_DIMS], rs[DDPL_MAX_DIMS];
    memcpy(bl, p->bsizes, sizeof(int64_t) * (size_t)p->bnd);
    memcpy(bl + p->bnd, xr->sizes + 1, sizeof(int64_t) * (size_t)rest_n);
    int nd = result_perm(p, rest_n, rp);
    for (int i = 0; i < nd; i++) rs[i] = bl[rp[i]];
    int bn;
    int64_t bs[DDPL_MAX_DIMS];
    if (ddpl_broadcast_shape(op, nd, rs, values->ndim, values->sizes, &bn, bs) < 0 || bn != nd ||
        memcmp(bs, rs, sizeof(int64_t) * (size_t)nd) != 0) {
        ddpl_error("%s: shape mismatch: value tensor of shape %s cannot be broadcast to "
                   "indexing result of shape %s",
                   op, ddpl_shape_str(values, a, sizeof a), ddpl_sizes_str(nd, rs, b, sizeof b));
        return op_temps_result(&k, NULL);
    }
    /* values in x[indices]'s layout -> (B..., rest...) -> (N, rest...) */
    for (int i = 0; i < nd; i++) inv[rp[i]] = i;
    ddpl_tensor *ve = OP_T(&k, ddpl_expand(values, nd, rs));
    ddpl_tensor *vb = ve ? OP_T(&k, ddpl_permute(ve, nd, inv)) : NULL;
    int64_t vs[DDPL_MAX_DIMS];
    vs[0] = ddpl_tensor_numel(p->linear);
    memcpy(vs + 1, xr->sizes + 1, sizeof(int64_t) * (size_t)rest_n);
    ddpl_tensor *vr = vb ? OP_T(&k, ddpl_reshape(vb, rest_n + 1, vs)) : NULL;
    ddpl_tensor *w = !vr          ? NULL
                     : accumulate ? OP_T(&k, ddpl_index_add(xr, 0, p->linear, vr, 1.0))
                                  : OP_T(&k, ddpl_index_copy(xr, 0, p->linear, vr));
    /* back to x's layout: (P, rest) -> permuted x's shape -> x's dim order */
    int64_t ps[DDPL_MAX_DIMS];
    int pinv[DDPL_MAX_DIMS];
    for (int i = 0; i < x->ndim; i++) {
        ps[i] = x->sizes[perm[i]];
        pinv[perm[i]] = i;
    }
    ddpl_tensor *wp = w ? OP_T(&k, ddpl_reshape(w, x->ndim, ps)) : NULL;
    ddpl_tensor *wx = wp ? OP_T(&k, ddpl_permute(wp, x->ndim, pinv)) : NULL;
    ddpl_tensor *r = wx ? OP_T(&k, ddpl_contiguous(wx)) : NULL;
    return op_temps_result(&k, r);
}

static int check_values(const char *op, ddpl_tensor *x, ddpl_tensor *values)
{
    if (ddpl_check_same_device(op, x, values) < 0) return -1;
    if (values->dtype != x->dtype)
        return ddpl_error("%s: index put requires the source and destination dtypes match, got "
                          "%s for the destination and %s for the source",
                          op, ddpl_dtype_name((ddpl_dtype)x->dtype),
                          ddpl_dtype_name((ddpl_dtype)values->dtype));
    return 0;
}

ddpl_tensor *ddpl_index_put(ddpl_tensor *x, int n, ddpl_tensor *const *indices, ddpl_tensor *values,
                            bool accumulate)
{
    index_plan p = {0};
    ddpl_tensor *r = NULL;
    if (check_values("index_put", x, values) == 0 &&
        plan_make("index_put", x, n, indices, &p) == 0) {
        if (p.nidx == 0) { /* x[:] = values: values broadcast over all of x */
            ddpl_tensor *e = ddpl_expand(values, x->ndim, x->sizes);
            r = !e ? NULL : accumulate ? ddpl_add(x, e) : ddpl_clone(e);
            ddpl_tensor_release(e);
        } else {
            r = put_planned("index_put", x, &p, values, accumulate);
        }
    }
    plan_release(&p);
    return r;
}

/* The overlap rules of index_put_ (ops/mem_overlap.c). PyTorch turns x[mask] = v, without
 * accumulate, with one bool mask as the only index and a one-element v on the CPU, into
 * masked_fill_(mask, v.item()) (canDispatchToMaskedFill): only the mask is checked then, as an
 * elementwise operand (x[x] = false and x[x > 1] = x[0] work). Otherwise neither the values
 * nor an index may share any memory with x (assert_no_overlap). */
static int check_put_overlap(const char *op, ddpl_tensor *x, int n, ddpl_tensor *const *indices,
                             ddpl_tensor *values, bool accumulate)
{
    ddpl_tensor *mask = NULL;
    int defined = 0;
    for (int i = 0; i < n; i++)
        if (indices[i]) defined++, mask = indices[i];
    /* a number from Lua (wrapped) counts as PyTorch's: Python's setitem makes a scalar a CPU
     * tensor for a CUDA x, so x[x] = false works there too */
    bool fill = !accumulate && defined == 1 && mask->dtype == DDPL_BOOL &&
                ddpl_same_device(mask->device, x->device) && ddpl_tensor_numel(values) == 1 &&
                (values->device.type == DDPL_CPU || values->wrapped_number);
    if (fill) return ddpl_check_write(op, x, DDPL_WRITE_ELEMENTWISE, 1, &mask);
    if (ddpl_check_write(op, x, DDPL_WRITE_SCATTERED, 1, &values) < 0) return -1;
    return ddpl_check_write(op, x, DDPL_WRITE_SCATTERED, n, indices);
}

int ddpl_index_put_(ddpl_tensor *x, int n, ddpl_tensor *const *indices, ddpl_tensor *values,
                    bool accumulate)
{
    const char *op = "index_put_";
    int rec = ddpl_inplace_recorded(op, x, 1, &values);
    if (rec < 0 || check_put_overlap(op, x, n, indices, values, accumulate) < 0 ||
        check_values(op, x, values) < 0)
        return -1;
    if (!rec && ddpl_check_inplace(op, x) < 0) return -1;
    /* the result is computed out of place and then written (x untouched on error) */
    bool prev = rec ? true : ddpl_grad_mode_set(false);
    ddpl_tensor *xs = ddpl_inplace_source(x, false);
    ddpl_tensor *r = xs ? ddpl_index_put(xs, n, indices, values, accumulate) : NULL;
    ddpl_tensor_release(xs);
    if (!rec) ddpl_grad_mode_set(prev);
    if (rec) return ddpl_inplace_commit(op, "IndexPutBackward0", x, r);
    if (!r) return -1;
    int rc = ddpl_run_kernel(DDPL_OP_COPY, x->device, &x, &r, NULL);
    ddpl_tensor_release(r);
    if (rc == 0) ddpl_storage_bump_version(x->storage);
    return rc;
}
