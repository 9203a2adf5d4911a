/* ops/reduce_amax.c: amax, amin over a set of dims, and aminmax, with their gradients.
 * defines: ddpl_amax, ddpl_amin, ddpl_aminmax.
 *
 * The values keep the input's dtype (bool included). As PyTorch, a reduced dim of size 0 is an
 * error (there is no identity), and so is reducing an empty tensor without naming dims. The
 * gradient is shared evenly among the elements equal to the result of their slice (PyTorch's
 * amax/amin rule; max/min with a dim instead pick one index). aminmax is amin and amax: the
 * gradients of its two results are theirs. */
#include "reduce.h"

/* An error naming op when the reduction over mask has no identity to fall back on. */
static int check_nonempty(const char *op, const ddpl_tensor *x, uint32_t mask, bool all_dims)
{
    char b[128];
    if (all_dims && ddpl_tensor_numel(x) == 0)
        return ddpl_error("%s: cannot reduce an empty tensor (shape %s) without a dim; give the "
                          "dims to reduce",
                          op, ddpl_shape_str(x, b, sizeof b));
    for (int d = 0; d < x->ndim; d++)
        if ((mask & (1u << d)) && x->sizes[d] == 0)
            return ddpl_error("%s: expected reduction dim %d to have non-zero size (shape %s)", op,
                              d, ddpl_shape_str(x, b, sizeof b));
    return 0;
}

typedef struct {
    uint32_t mask;
    bool keepdim;
} amax_ctx;

/* grad_i = g * [x_i == out] / (number of such i in the slice). saved: x, the keepdim result. */
static int amax_backward(ddpl_node *n, ddpl_tensor *grad, ddpl_tensor **gi)
{
    amax_ctx *c = DDPL_NODE_CTX(n, amax_ctx);
    ddpl_edge *e = &n->edges[0];
    ddpl_tensor *x = ddpl_node_saved(n, 0), *out = ddpl_node_saved(n, 1);
    if (!x || !out) return -1;
    op_temps k = {0};
    ddpl_tensor *hit = OP_T(&k, ddpl_eq(x, out)); /* out broadcasts over the reduced dims */
    ddpl_tensor *count = OP_T(&k, red_forward("amax", DDPL_OP_SUM, hit, c->mask, true, DDPL_INT64));
    ddpl_tensor *gk = OP_T(&k, red_keep_view(grad, e->ndim, e->sizes, c->mask, c->keepdim));
    ddpl_tensor *share = OP_T(&k, ddpl_div(gk, count));
    ddpl_tensor *zero = OP_T(&k, ddpl_wrapped_number(0, true));
    gi[0] = k.failed ? NULL : ddpl_where(hit, share, zero);
    op_temps_release(&k);
    return gi[0] ? 0 : -1;
}

/* The result from keep (the kernel's keepdim-shaped output, released here), with its history. */
static ddpl_tensor *extreme_finish(ddpl_op kop, ddpl_tensor *x, ddpl_tensor *keep, uint32_t mask,
                                   bool keepdim)
{
    ddpl_tensor *out =
        keepdim ? ddpl_tensor_retain(keep) : red_drop_reduced(ddpl_tensor_retain(keep), mask);
    if (out && ddpl_grad_needed(1, &x)) {
        ddpl_node *n = ddpl_node_new(kop == DDPL_OP_AMAX ? "AmaxBackward0" : "AminBackward0",
                                     amax_backward, 1, &x);
        *DDPL_NODE_CTX(n, amax_ctx) = (amax_ctx){mask, keepdim};
        ddpl_node_save(n, x);
        ddpl_node_save(n, keep); /* shares the output's storage: an in-place change is seen */
        ddpl_set_history(out, n);
    }
    ddpl_tensor_release(keep);
    return out;
}

static ddpl_tensor *extreme(const char *op, ddpl_op kop, ddpl_tensor *x, uint32_t mask,
                            bool all_dims, bool keepdim)
{
    if (check_nonempty(op, x, mask, all_dims) < 0) return NULL;
    ddpl_tensor *keep = red_forward(op, kop, x, mask, true, (ddpl_dtype)x->dtype);
    return keep ? extreme_finish(kop, x, keep, mask, keepdim) : NULL;
}

static ddpl_tensor *extreme_dims(const char *op, ddpl_op kop, ddpl_tensor *x, int ndims,
                                 const int *dims, bool keepdim)
{
    uint32_t mask = 0;
    if (red_mask_dims(op, x, ndims, dims, &mask) < 0) return NULL;
    return extreme(op, kop, x, mask, ndims == 0, keepdim);
}

ddpl_tensor *ddpl_amax(ddpl_tensor *x, int ndims, const int *dims, bool keepdim)
{
    return extreme_dims("amax", DDPL_OP_AMAX, x, ndims, dims, keepdim);
}

ddpl_tensor *ddpl_amin(ddpl_tensor *x, int ndims, const int *dims, bool keepdim)
{
    return extreme_dims("amin", DDPL_OP_AMIN, x, ndims, dims, keepdim);
}

int ddpl_aminmax(ddpl_tensor *x, bool all_dims, int dim, bool keepdim, ddpl_tensor **min,
                 ddpl_tensor **max)
{
    *min = *max = NULL;
    uint32_t mask = red_mask_all(x);
    if (!all_dims) {
        int d = ddpl_wrap_dim("aminmax", dim, x->ndim);
        if (d < 0) return -1;
        mask = x->ndim ? 1u << d : 0;
    }
    if (ddpl_backend_supports(x->device, DDPL_OP_AMINMAX)) {
        /* both in one pass over x (the optional AMINMAX kernel) */
        if (check_nonempty("aminmax", x, mask, all_dims) < 0) return -1;
        int64_t sizes[DDPL_MAX_DIMS];
        for (int d = 0; d < x->ndim; d++) sizes[d] = (mask & (1u << d)) ? 1 : x->sizes[d];
        ddpl_tensor *keep[2] = {ddpl_tensor_new(x->ndim, sizes, (ddpl_dtype)x->dtype, x->device),
                                ddpl_tensor_new(x->ndim, sizes, (ddpl_dtype)x->dtype, x->device)};
        ddpl_reduce_params p = {mask};
        if (!keep[0] || !keep[1] || ddpl_run_kernel(DDPL_OP_AMINMAX, x->device, keep, &x, &p) < 0) {
            ddpl_tensor_release(keep[0]);
            ddpl_tensor_release(keep[1]);
            return -1;
        }
        *min = extreme_finish(DDPL_OP_AMIN, x, keep[0], mask, keepdim);
        *max = extreme_finish(DDPL_OP_AMAX, x, keep[1], mask, keepdim);
    } else {
        *min = extreme("aminmax", DDPL_OP_AMIN, x, mask, all_dims, keepdim);
        *max = *min ? extreme("aminmax", DDPL_OP_AMAX, x, mask, all_dims, keepdim) : NULL;
    }
    if (*min && *max) return 0;
    ddpl_tensor_release(*max);
    *max = NULL;
    ddpl_tensor_release(*min);
    *min = NULL;
    return -1;
}
