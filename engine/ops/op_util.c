/* ops/op_util.c: see op_util.h.
 * defines: ddpl_check_* (in place, device, floating), ddpl_as_dtype,
 * ddpl_to_dtype, ddpl_sum_to, ddpl_mark_not_differentiable. */
#include "op_util.h"

int ddpl_check_inplace(const char *op, const ddpl_tensor *x)
{
    if (!ddpl_is_grad_enabled() || !ddpl_requires_grad(x)) return 0;
    if (!ddpl_grad_fn(x))
        return ddpl_error("%s: a leaf tensor that requires grad is being used in an in-place "
                          "operation; wrap it in ddpl.no_grad or use the out-of-place form",
                          op);
    return ddpl_error("%s: in-place operations on tensors that require grad are not supported "
                      "(the tensor has history %s); use the out-of-place form",
                      op, ddpl_grad_fn(x)->name);
}

int ddpl_check_same_device(const char *op, const ddpl_tensor *a, const ddpl_tensor *b)
{
    if (ddpl_same_device(a->device, b->device)) return 0;
    char da[32], db[32];
    return ddpl_error("%s: expected all tensors on the same device, got %s and %s", op,
                      ddpl_device_str(a->device, da, sizeof da),
                      ddpl_device_str(b->device, db, sizeof db));
}

int ddpl_check_floating(const char *op, const ddpl_tensor *x)
{
    if (ddpl_dtype_is_floating((ddpl_dtype)x->dtype)) return 0;
    return ddpl_error("%s: expected a floating-point tensor, got %s", op,
                      ddpl_dtype_name((ddpl_dtype)x->dtype));
}

ddpl_tensor *ddpl_as_dtype(ddpl_tensor *x, ddpl_dtype dt)
{
    if (x->dtype == dt) return ddpl_tensor_retain(x);
    ddpl_tensor *y = ddpl_tensor_new(x->ndim, x->sizes, dt, x->device);
    if (!y) return NULL;
    if (ddpl_run_kernel(DDPL_OP_COPY, x->device, &y, &x, NULL) < 0) {
        ddpl_tensor_release(y);
        return NULL;
    }
    return y;
}

ddpl_tensor *ddpl_to_dtype(ddpl_tensor *x, ddpl_dtype dt)
{
    if (x->dtype == dt) return ddpl_tensor_retain(x);
    return ddpl_to(x, dt, x->device);
}

ddpl_tensor *ddpl_sum_to(ddpl_tensor *grad, int ndim, const int64_t *sizes)
{
    int lead = grad->ndim - ndim;
    int dims[DDPL_MAX_DIMS], n = 0;
    for (int d = 0; d < grad->ndim; d++) {
        int sd = d - lead;
        if (sd < 0 || (sizes[sd] == 1 && grad->sizes[d] != 1)) dims[n++] = d;
    }
    if (n == 0) return ddpl_tensor_retain(grad);
    ddpl_tensor *s = ddpl_sum_dims(grad, n, dims, true);
    if (!s) return NULL;
    ddpl_tensor *r = ddpl_view(s, ndim, sizes);
    ddpl_tensor_release(s);
    return r;
}

typedef struct {
    const char *op;
} not_differentiable_ctx;

static int not_differentiable_backward(ddpl_node *n, ddpl_tensor *grad, ddpl_tensor **gi)
{
    DDPL_UNUSED(grad);
    DDPL_UNUSED(gi);
    return ddpl_error("create_graph: the backward of %s is not differentiable (its "
                      "derivative is not implemented)",
                      DDPL_NODE_CTX(n, not_differentiable_ctx)->op);
}

int ddpl_mark_not_differentiable(const char *op, ddpl_node *n, ddpl_tensor *grad, int n_outs,
                                 ddpl_tensor **outs, bool through_inputs)
{
    if (!ddpl_is_grad_enabled()) return 0; /* the common case: backward records nothing */
    ddpl_tensor *operands[1 + DDPL_NODE_MAX_SAVED] = {grad};
    for (int i = 0; i < n->n_saved; i++) {
        if (ddpl_node_saved_is_null(n, i)) continue;
        operands[1 + i] = ddpl_node_saved(n, i);
        if (!operands[1 + i]) return -1;
    }
    /* a saved tensor may be a contiguous copy without history: the inputs' edges say more */
    bool inputs_record = false;
    for (int i = 0; through_inputs && i < n->n_inputs; i++)
        inputs_record = inputs_record || ddpl_node_needs_grad(n, i);
    if (!inputs_record && !ddpl_grad_needed(1 + n->n_saved, operands)) return 0;
    ddpl_node *mark = ddpl_node_new("NotDifferentiableBackward0", not_differentiable_backward,
                                    1 + n->n_saved, operands);
    DDPL_NODE_CTX(mark, not_differentiable_ctx)->op = op;
    for (int i = 0; i < n_outs; i++) {
        /* a result that already records (a gradient passed through as it is) keeps that */
        if (!outs[i] || ddpl_requires_grad(outs[i])) continue;
        ddpl_node_retain(mark);
        ddpl_set_history(outs[i], mark);
    }
    ddpl_node_release(mark);
    return 0;
}
