/* ops/index.c: joining tensors and picking elements by index, with their gradients.
 * defines: ddpl_cat, ddpl_stack, ddpl_index_select, ddpl_gather, ddpl_topk.
 *
 * Gradients: cat hands each input its narrow slice of the gradient; index_select adds the
 * gradient rows back at their indices (INDEX_ADD into zeros, so repeated indices accumulate);
 * gather and topk scatter-add the gradient back into zeros of the input's shape. Index tensors
 * are int64 and 0-based; the kernels reject out-of-range values before writing anything. */
#include "op_util.h"

static int check_index_dtype(const char *op, const ddpl_tensor *index)
{
    if (index->dtype == DDPL_INT64) return 0;
    return ddpl_error("%s: index must be an int64 tensor, got %s", op,
                      ddpl_dtype_name((ddpl_dtype)index->dtype));
}

/* zeros of an edge's shape (the forward input's) with grad's dtype, then the kernel op adds
 * src into it at index along dim. */
static ddpl_tensor *scatter_into_zeros(ddpl_op op, const ddpl_edge *e, ddpl_tensor *index,
                                       ddpl_tensor *src, int dim)
{
    ddpl_tensor *z = ddpl_zeros(e->ndim, e->sizes, (ddpl_dtype)src->dtype, src->device);
    if (!z) return NULL;
    ddpl_dim_params p = {dim};
    ddpl_tensor *ins[2] = {index, src};
    if (ddpl_run_kernel(op, z->device, &z, ins, &p) < 0) {
        ddpl_tensor_release(z);
        return NULL;
    }
    return z;
}

/* ---- cat / stack ---- */
typedef struct {
    int dim;
} dim_ctx;

/* PyTorch still accepts 1-D empty tensors of any other shape in cat and skips them. */
static bool cat_skipped(const ddpl_tensor *t)
{
    return t->ndim == 1 && t->sizes[0] == 0;
}

static int cat_backward(ddpl_node *n, ddpl_tensor *grad, ddpl_tensor **gi)
{
    int dim = DDPL_NODE_CTX(n, dim_ctx)->dim;
    int64_t offset = 0;
    for (int i = 0; i < n->n_inputs; i++) {
        ddpl_edge *e = &n->edges[i];
        bool skipped = e->ndim == 1 && e->sizes[0] == 0 && grad->ndim != 1;
        int64_t len = skipped ? 0 : e->sizes[dim];
        if (ddpl_node_needs_grad(n, i)) {
            gi[i] = skipped ? ddpl_zeros(1, e->sizes, (ddpl_dtype)grad->dtype, grad->device)
                            : ddpl_narrow(grad, dim, offset, len);
            if (!gi[i]) return -1;
        }
        offset += len;
    }
    return 0;
}

ddpl_tensor *ddpl_cat(int n, ddpl_tensor *const *xs, int dim)
{
    if (n <= 0) return ddpl_error("cat: expected a non-empty list of tensors"), NULL;
    int ref = -1;
    for (int i = 0; i < n; i++) {
        if (xs[i]->ndim == 0)
            return ddpl_error("cat: zero-dimensional tensor (at position %d) cannot be "
                              "concatenated",
                              i),
                   NULL;
        if (ref < 0 && !cat_skipped(xs[i])) ref = i;
    }
    if (ref < 0) ref = 0; /* all are 1-D empty: the result is too */
    const ddpl_tensor *r = xs[ref];
    int d = ddpl_wrap_dim("cat", dim, r->ndim);
    if (d < 0) return NULL;
    int64_t sizes[DDPL_MAX_DIMS];
    memcpy(sizes, r->sizes, sizeof sizes);
    sizes[d] = 0;
    for (int i = 0; i < n; i++) {
        const ddpl_tensor *t = xs[i];
        if (ddpl_check_same_device("cat", r, t) < 0) return NULL;
        if (cat_skipped(t) && i != ref) continue;
        char sa[128], sb[128];
        if (t->ndim != r->ndim)
            return ddpl_error("cat: tensors must have the same number of dimensions: got shape "
                              "%s at position %d and %s at position %d",
                              ddpl_shape_str(r, sa, sizeof sa), ref,
                              ddpl_shape_str(t, sb, sizeof sb), i),
                   NULL;
        for (int k = 0; k < r->ndim; k++)
            if (k != d && t->sizes[k] != r->sizes[k])
                return ddpl_error("cat: sizes of tensors must match except in dimension %d: "
                                  "expected size %lld but got size %lld for tensor %d of shape "
                                  "%s",
                                  d, (long long)r->sizes[k], (long long)t->sizes[k], i,
                                  ddpl_shape_str(t, sb, sizeof sb)),
                       NULL;
        sizes[d] += t->sizes[d];
    }
    ddpl_dtype dt = ddpl_result_type(n, xs);
    ddpl_tensor *out = ddpl_tensor_new(r->ndim, sizes, dt, r->device);
    if (!out) return NULL;
    int64_t offset = 0;
    for (int i = 0; i < n; i++) {
        ddpl_tensor *t = xs[i];
        if (cat_skipped(t) && i != ref) continue;
        int64_t part[DDPL_MAX_DIMS];
        memcpy(part, sizes, sizeof part);
        part[d] = t->sizes[d];
        ddpl_tensor *slot = ddpl_tensor_alias(out, out->ndim, part, out->strides,
                                              out->offset + offset * out->strides[d]);
        int rc = ddpl_run_kernel(DDPL_OP_COPY, out->device, &slot, &t, NULL);
        ddpl_tensor_release(slot);
        if (rc < 0) {
            ddpl_tensor_release(out);
            return NULL;
        }
        offset += t->sizes[d];
    }
    if (ddpl_grad_needed(n, xs)) {
        ddpl_node *node = ddpl_node_new("CatBackward0", cat_backward, n, xs);
        DDPL_NODE_CTX(node, dim_ctx)->dim = d;
        ddpl_set_history(out, node);
    }
    return out;
}

ddpl_tensor *ddpl_stack(int n, ddpl_tensor *const *xs, int dim)
{
    if (n <= 0) return ddpl_error("stack: expected a non-empty list of tensors"), NULL;
    int d = ddpl_wrap_dim("stack", dim, xs[0]->ndim + 1);
    if (d < 0) return NULL;
    for (int i = 1; i < n; i++)
        if (!ddpl_same_shape(xs[i], xs[0])) {
            char sa[128], sb[128];
            return ddpl_error("stack: expects each tensor to be equal size, but got %s at entry "
                              "0 and %s at entry %d",
                              ddpl_shape_str(xs[0], sa, sizeof sa),
                              ddpl_shape_str(xs[i], sb, sizeof sb), i),
                   NULL;
        }
    ddpl_tensor **u = ddpl_xcalloc((size_t)n, sizeof *u);
    ddpl_tensor *out = NULL;
    int made = 0;
    for (; made < n; made++)
        if (!(u[made] = ddpl_unsqueeze(xs[made], d))) break;
    if (made == n) out = ddpl_cat(n, u, d);
    for (int i = 0; i < made; i++) ddpl_tensor_release(u[i]);
    free(u);
    return out;
}

/* ---- index_select ---- */
static int index_select_backward(ddpl_node *n, ddpl_tensor *grad, ddpl_tensor **gi)
{
    ddpl_tensor *index = ddpl_node_saved(n, 0);
    if (!index) return -1;
    ddpl_dim_params p = {DDPL_NODE_CTX(n, dim_ctx)->dim};
    /* another gradient already reached the input (a tied embedding's head): add the rows into
     * that sum (gi[0] stays NULL) rather than into zeros of the whole table */
    ddpl_tensor *sum = ddpl_node_partial_grad(n, 0, grad);
    if (sum)
        return ddpl_run_kernel(DDPL_OP_INDEX_ADD, sum->device, &sum, OP_INPUTS(index, grad), &p);
    gi[0] = scatter_into_zeros(DDPL_OP_INDEX_ADD, &n->edges[0], index, grad, p.dim);
    return gi[0] ? ddpl_mark_not_differentiable("index_select", n, grad, 1, gi, false) : -1;
}

ddpl_tensor *ddpl_index_select(ddpl_tensor *x, int dim, ddpl_tensor *index)
{
    if (check_index_dtype("index_select", index) < 0 ||
        ddpl_check_same_device("index_select", x, index) < 0)
        return NULL;
    char sa[128];
    if (index->ndim > 1)
        return ddpl_error("index_select: index must be 1-D, got shape %s",
                          ddpl_shape_str(index, sa, sizeof sa)),
               NULL;
    if (x->ndim == 0)
        return ddpl_error("index_select: input must have at least one dimension"), NULL;
    int d = ddpl_wrap_dim("index_select", dim, x->ndim);
    if (d < 0) return NULL;
    int64_t sizes[DDPL_MAX_DIMS];
    memcpy(sizes, x->sizes, sizeof sizes);
    sizes[d] = ddpl_tensor_numel(index);
    ddpl_tensor *out = ddpl_tensor_new(x->ndim, sizes, (ddpl_dtype)x->dtype, x->device);
    if (!out) return NULL;
    ddpl_dim_params p = {d};
    ddpl_tensor *ins[2] = {x, index};
    if (ddpl_run_kernel(DDPL_OP_INDEX_SELECT, x->device, &out, ins, &p) < 0) {
        ddpl_tensor_release(out);
        return NULL;
    }
    if (ddpl_grad_needed(1, &x)) {
        ddpl_node *n = ddpl_node_new("IndexSelectBackward0", index_select_backward, 1, &x);
        ddpl_node_save(n, index);
        DDPL_NODE_CTX(n, dim_ctx)->dim = d;
        ddpl_set_history(out, n);
    }
    return out;
}

/* ---- gather ---- */
static int scatter_backward(ddpl_node *n, ddpl_tensor *grad, ddpl_tensor **gi)
{
    ddpl_tensor *index = ddpl_node_saved(n, 0);
    if (!index) return -1;
    gi[0] = scatter_into_zeros(DDPL_OP_SCATTER_ADD, &n->edges[0], index, grad,
                               DDPL_NODE_CTX(n, dim_ctx)->dim);
    return gi[0] ? ddpl_mark_not_differentiable(n->name[0] == 'T' ? "topk" : "gather", n, grad, 1,
                                                gi, false)
                 : -1;
}

ddpl_tensor *ddpl_gather(ddpl_tensor *x, int dim, ddpl_tensor *index)
{
    if (check_index_dtype("gather", index) < 0 || ddpl_check_same_device("gather", x, index) < 0)
        return NULL;
    char sa[128], sb[128];
    if (index->ndim != x->ndim)
        return ddpl_error("gather: index %s must have as many dimensions as the input %s",
                          ddpl_shape_str(index, sa, sizeof sa), ddpl_shape_str(x, sb, sizeof sb)),
               NULL;
    int d = ddpl_wrap_dim("gather", dim, x->ndim);
    if (d < 0) return NULL;
    for (int k = 0; k < x->ndim; k++)
        if (k != d && index->sizes[k] > x->sizes[k])
            return ddpl_error("gather: index of shape %s is larger than the input of shape %s in "
                              "dimension %d (gathering along dimension %d)",
                              ddpl_shape_str(index, sa, sizeof sa),
                              ddpl_shape_str(x, sb, sizeof sb), k, d),
                   NULL;
    ddpl_tensor *out = ddpl_tensor_new(index->ndim, index->sizes, (ddpl_dtype)x->dtype, x->device);
    if (!out) return NULL;
    ddpl_dim_params p = {d};
    ddpl_tensor *ins[2] = {x, index};
    if (ddpl_run_kernel(DDPL_OP_GATHER, x->device, &out, ins, &p) < 0) {
        ddpl_tensor_release(out);
        return NULL;
    }
    if (ddpl_grad_needed(1, &x)) {
        ddpl_node *n = ddpl_node_new("GatherBackward0", scatter_backward, 1, &x);
        ddpl_node_save(n, index);
        DDPL_NODE_CTX(n, dim_ctx)->dim = d;
        ddpl_set_history(out, n);
    }
    return out;
}

/* ---- topk ---- */
int ddpl_topk(ddpl_tensor *x, int64_t k, int dim, bool largest, bool sorted, ddpl_tensor **values,
              ddpl_tensor **indices)
{
    *values = *indices = NULL;
    int d = ddpl_wrap_dim("topk", dim, x->ndim);
    if (d < 0) return -1;
    if (x->dtype == DDPL_BOOL) return ddpl_error("topk: not implemented for dtype bool");
    int64_t size = x->ndim ? x->sizes[d] : 1;
    if (k < 0 || k > size) {
        char sa[128];
        return ddpl_error("topk: k (%lld) is out of range for dimension %d of shape %s (size "
                          "%lld)",
                          (long long)k, d, ddpl_shape_str(x, sa, sizeof sa), (long long)size);
    }
    int64_t sizes[DDPL_MAX_DIMS];
    memcpy(sizes, x->sizes, sizeof sizes);
    if (x->ndim) sizes[d] = k;
    ddpl_tensor *v = ddpl_tensor_new(x->ndim, sizes, (ddpl_dtype)x->dtype, x->device);
    ddpl_tensor *i = v ? ddpl_tensor_new(x->ndim, sizes, DDPL_INT64, x->device) : NULL;
    ddpl_topk_params p = {k, d, largest, sorted};
    ddpl_tensor *outs[2] = {v, i};
    if (!i || ddpl_run_kernel(DDPL_OP_TOPK, x->device, outs, &x, &p) < 0) {
        ddpl_tensor_release(v);
        ddpl_tensor_release(i);
        return -1;
    }
    if (ddpl_grad_needed(1, &x)) {
        ddpl_node *n = ddpl_node_new("TopkBackward0", scatter_backward, 1, &x);
        ddpl_node_save(n, i);
        DDPL_NODE_CTX(n, dim_ctx)->dim = d;
        ddpl_set_history(v, n);
    }
    *values = v;
    *indices = i;
    return 0;
}
