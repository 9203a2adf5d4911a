/* ops/sort.c: ordering along one dim and searching sorted rows, with sort's gradient.
 * defines: ddpl_sort, ddpl_argsort, ddpl_kthvalue, ddpl_select_positions, ddpl_select_ranks,
 *          ddpl_searchsorted, ddpl_bucketize.
 *
 * sort is always stable (equal elements keep their input order: PyTorch's stable=true), so ties
 * and results are deterministic on every device; NaN sorts as the largest value, as in PyTorch.
 * Its gradient scatter-adds the incoming gradient back to the positions the indices name
 * (a permutation, so every input element gets exactly one gradient element). kthvalue is the
 * k-th (1-based, as in PyTorch) element of the stable ascending sort: where the backend has the
 * KTHVALUE kernel it is selected without sorting (O(n) a slice, not O(n log n)) and gathered
 * from x, else taken from the full sort with select; the gradient reaches the selected element
 * either way. */
#include "reduce.h"

typedef struct {
    int dim;
} sort_ctx;

/* grad (the values' shape) scattered back by the saved indices into zeros of x's shape. */
static int sort_backward(ddpl_node *n, ddpl_tensor *grad, ddpl_tensor **gi)
{
    ddpl_tensor *index = ddpl_node_saved(n, 0);
    if (!index) return -1;
    const ddpl_edge *e = &n->edges[0];
    ddpl_tensor *z = ddpl_zeros(e->ndim, e->sizes, (ddpl_dtype)grad->dtype, grad->device);
    if (!z) return -1;
    ddpl_dim_params p = {DDPL_NODE_CTX(n, sort_ctx)->dim};
    ddpl_tensor *ins[2] = {index, grad};
    if (ddpl_run_kernel(DDPL_OP_SCATTER_ADD, z->device, &z, ins, &p) < 0) {
        ddpl_tensor_release(z);
        return -1;
    }
    gi[0] = z;
    return ddpl_mark_not_differentiable("sort", n, grad, 1, gi, false);
}

int ddpl_sort(ddpl_tensor *x, int dim, bool descending, ddpl_tensor **values, ddpl_tensor **indices)
{
    *values = *indices = NULL;
    int d = ddpl_wrap_dim("sort", dim, x->ndim);
    if (d < 0) return -1;
    ddpl_tensor *v = ddpl_tensor_new(x->ndim, x->sizes, (ddpl_dtype)x->dtype, x->device);
    ddpl_tensor *i = v ? ddpl_tensor_new(x->ndim, x->sizes, DDPL_INT64, x->device) : NULL;
    ddpl_sort_params p = {d, descending};
    ddpl_tensor *outs[2] = {v, i};
    if (!i || ddpl_run_kernel(DDPL_OP_SORT, x->device, outs, &x, &p) < 0) {
        ddpl_tensor_release(v);
        ddpl_tensor_release(i);
        return -1;
    }
    if (ddpl_grad_needed(1, &x)) {
        ddpl_node *n = ddpl_node_new("SortBackward0", sort_backward, 1, &x);
        ddpl_node_save(n, i);
        DDPL_NODE_CTX(n, sort_ctx)->dim = d;
        ddpl_set_history(v, n);
    }
    *values = v;
    *indices = i;
    return 0;
}

ddpl_tensor *ddpl_argsort(ddpl_tensor *x, int dim, bool descending)
{
    ddpl_tensor *v, *i;
    bool prev = ddpl_set_grad_enabled(false); /* the values are dropped: record nothing */
    int rc = ddpl_sort(x, dim, descending, &v, &i);
    ddpl_set_grad_enabled(prev);
    if (rc < 0) {
        /* the error names sort; argsort is what was called */
        char msg[512];
        snprintf(msg, sizeof msg, "%s", ddpl_last_error());
        if (strncmp(msg, "sort:", 5) == 0) return ddpl_error("argsort:%s", msg + 5), NULL;
        return NULL;
    }
    ddpl_tensor_release(v);
    return i;
}

int ddpl_kthvalue(ddpl_tensor *x, int64_t k, int dim, bool keepdim, ddpl_tensor **values,
                  ddpl_tensor **indices)
{
    *values = *indices = NULL;
    int d = ddpl_wrap_dim("kthvalue", dim, x->ndim);
    if (d < 0) return -1;
    int64_t size = x->ndim ? x->sizes[d] : 1;
    if (k < 1 || k > size) {
        char sa[128];
        return ddpl_error("kthvalue: k (%lld) is out of range for dimension %d of shape %s (k is "
                          "1-based: expected 1 to %lld)",
                          (long long)k, d, ddpl_shape_str(x, sa, sizeof sa), (long long)size);
    }
    if (x->ndim > 0 && ddpl_backend_supports(x->device, DDPL_OP_KTHVALUE)) {
        ddpl_kthvalue_params p = {d, DDPL_SELECT_KTH, k - 1};
        return ddpl_select_ranks("kthvalue", x, d, &p, keepdim, values, indices);
    }
    ddpl_tensor *sv, *si;
    if (ddpl_sort(x, d, false, &sv, &si) < 0) return -1;
    ddpl_tensor *v, *i;
    if (x->ndim == 0) { /* the element itself, index 0 */
        v = sv;
        i = si;
    } else {
        v = ddpl_select(sv, d, k - 1);
        i = v ? ddpl_select(si, d, k - 1) : NULL;
        ddpl_tensor_release(sv);
        ddpl_tensor_release(si);
        if (i && keepdim) {
            ddpl_tensor *vk = ddpl_unsqueeze(v, d), *ik = vk ? ddpl_unsqueeze(i, d) : NULL;
            ddpl_tensor_release(v);
            ddpl_tensor_release(i);
            v = vk;
            i = ik;
        }
        /* the index tensor is a view into the full sort's indices: give it storage of its own */
        if (i) {
            ddpl_tensor *ic = ddpl_contiguous(i);
            ddpl_tensor_release(i);
            i = ic;
        }
    }
    if (!i) {
        ddpl_tensor_release(v);
        return -1;
    }
    *values = v;
    *indices = i;
    return 0;
}

/* The positions (int64, (M, x's sizes with dim of size 1)) of the ranks p selects along dim of
 * x (ndim >= 1), from the KTHVALUE kernel: ranks (that shape) for DDPL_SELECT_RANKS, else M is
 * 1. Not differentiable. */
ddpl_tensor *ddpl_select_positions(const char *op, ddpl_tensor *x, const ddpl_kthvalue_params *p,
                                   ddpl_tensor *ranks)
{
    int64_t sizes[DDPL_MAX_DIMS + 1];
    sizes[0] = ranks ? ranks->sizes[0] : 1;
    for (int i = 0; i < x->ndim; i++) sizes[i + 1] = i == p->dim ? 1 : x->sizes[i];
    ddpl_tensor *pos = ddpl_tensor_new(x->ndim + 1, sizes, DDPL_INT64, x->device);
    ddpl_tensor *ins[2] = {x, ranks};
    if (pos && ddpl_run_kernel(DDPL_OP_KTHVALUE, x->device, &pos, ins, p) < 0) {
        ddpl_tensor_release(pos);
        pos = NULL;
    }
    if (!pos) {
        char msg[512];
        snprintf(msg, sizeof msg, "%s", ddpl_last_error());
        if (strncmp(msg, "kthvalue:", 9) == 0 && strcmp(op, "kthvalue") != 0)
            ddpl_error("%s:%s", op, msg + 9);
    }
    return pos;
}

/* values (gathered from x, so the gradient reaches the selected element) and indices of the
 * one rank p selects along dim d of x (ndim >= 1), keepdim as asked: kthvalue and median
 * without a full sort. */
int ddpl_select_ranks(const char *op, ddpl_tensor *x, int d, const ddpl_kthvalue_params *p,
                      bool keepdim, ddpl_tensor **values, ddpl_tensor **indices)
{
    *values = *indices = NULL;
    op_temps k = {0};
    ddpl_tensor *pos = OP_T(&k, ddpl_select_positions(op, x, p, NULL));
    ddpl_tensor *i = pos ? OP_T(&k, ddpl_squeeze(pos, 0)) : NULL;
    ddpl_tensor *v = i ? OP_T(&k, ddpl_gather(x, d, i)) : NULL;
    if (v && !keepdim) {
        v = OP_T(&k, ddpl_squeeze(v, d));
        i = v ? OP_T(&k, ddpl_squeeze(i, d)) : NULL;
    }
    if (!i || k.failed) {
        op_temps_release(&k);
        return -1;
    }
    *values = ddpl_tensor_retain(v);
    *indices = ddpl_tensor_retain(i);
    op_temps_release(&k);
    return 0;
}

/* ---- searchsorted / bucketize ---- */
/* PyTorch's rule (searchsorted_pre_check): a 1-D sequence serves every value; otherwise the
 * sequence and the values have the same leading dims and each value searches its own row. */
static int check_search_shapes(const char *op, const ddpl_tensor *seq, const ddpl_tensor *v)
{
    char sa[128], sb[128];
    if (seq->ndim == 0)
        return ddpl_error("%s: the sorted sequence must have at least one dimension, got a 0-dim "
                          "tensor",
                          op);
    if (seq->ndim == 1) return 0;
    bool ok = v->ndim == seq->ndim;
    for (int d = 0; ok && d < seq->ndim - 1; d++) ok = v->sizes[d] == seq->sizes[d];
    if (!ok)
        return ddpl_error("%s: the sorted sequence %s must be 1-D or have the leading dimensions "
                          "of the values %s (all but the last)",
                          op, ddpl_shape_str(seq, sa, sizeof sa), ddpl_shape_str(v, sb, sizeof sb));
    return 0;
}

/* The dtype both operands are compared in: PyTorch promotes them; float16/bfloat16 widen to
 * float32 (exact) for the kernels. */
static ddpl_dtype search_dtype(const ddpl_tensor *seq, const ddpl_tensor *v)
{
    ddpl_dtype dt = ddpl_promote_types((ddpl_dtype)seq->dtype, (ddpl_dtype)v->dtype);
    if (dt == DDPL_FLOAT16 || dt == DDPL_BFLOAT16) dt = DDPL_FLOAT32;
    if (dt == DDPL_BOOL) dt = DDPL_UINT8;
    return dt;
}

static ddpl_tensor *search(const char *op, ddpl_tensor *seq, ddpl_tensor *values, bool right,
                           bool out_int32)
{
    if (ddpl_check_same_device(op, seq, values) < 0 || check_search_shapes(op, seq, values) < 0)
        return NULL;
    int64_t m = seq->sizes[seq->ndim - 1];
    if (out_int32 && m >= INT32_MAX)
        return ddpl_error("%s: a sequence of %lld elements does not fit out_int32 indices", op,
                          (long long)m),
               NULL;
    ddpl_dtype dt = search_dtype(seq, values);
    ddpl_tensor *out = NULL, *s = NULL, *v = NULL, *sc = NULL, *vc = NULL;
    bool prev = ddpl_set_grad_enabled(false); /* indices are not differentiable */
    if ((s = ddpl_as_dtype(seq, dt)) && (v = ddpl_as_dtype(values, dt)) &&
        (sc = ddpl_contiguous(s)) && (vc = ddpl_contiguous(v)) &&
        (out = ddpl_tensor_new(values->ndim, values->sizes, out_int32 ? DDPL_INT32 : DDPL_INT64,
                               values->device))) {
        int64_t last = values->ndim ? values->sizes[values->ndim - 1] : 1;
        ddpl_searchsorted_params p = {right, seq->ndim == 1 ? 0 : last};
        ddpl_tensor *ins[2] = {sc, vc};
        if (ddpl_run_kernel(DDPL_OP_SEARCHSORTED, values->device, &out, ins, &p) < 0) {
            ddpl_tensor_release(out);
            out = NULL;
        }
    }
    ddpl_set_grad_enabled(prev);
    ddpl_tensor_release(s);
    ddpl_tensor_release(v);
    ddpl_tensor_release(sc);
    ddpl_tensor_release(vc);
    return out;
}

ddpl_tensor *ddpl_searchsorted(ddpl_tensor *sorted_sequence, ddpl_tensor *values, bool right,
                               bool out_int32)
{
    return search("searchsorted", sorted_sequence, values, right, out_int32);
}

ddpl_tensor *ddpl_bucketize(ddpl_tensor *input, ddpl_tensor *boundaries, bool right, bool out_int32)
{
    if (boundaries->ndim != 1) {
        char sa[128];
        return ddpl_error("bucketize: boundaries must be 1-D, got shape %s",
                          ddpl_shape_str(boundaries, sa, sizeof sa)),
               NULL;
    }
    return search("bucketize", boundaries, input, right, out_int32);
}
