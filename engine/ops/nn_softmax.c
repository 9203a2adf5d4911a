/* ops/nn_softmax.c: softmax and log_softmax.
 * defines: ddpl_softmax, ddpl_log_softmax.
 *
 * Both run fused, numerically stable kernels (cpu_softmax.c) and save their output, from which
 * both gradients follow; float16/bfloat16 inputs compute in float32. */
#include "autocast.h"
#include "nn_common.h"

typedef struct {
    int dim;
    bool log;
} softmax_ctx;

/* create_graph: the gradient written with ops, so it records its history.
 * softmax: y (g - sum(g y)); log_softmax: g - exp(y) sum(g), sums over dim kept. */
static int softmax_backward_recorded(const softmax_ctx *c, ddpl_tensor *grad, ddpl_tensor *y,
                                     ddpl_tensor **gi)
{
    ddpl_tensor *p = c->log ? ddpl_exp(y) : ddpl_mul(grad, y);
    ddpl_tensor *s = p ? ddpl_sum_dims(c->log ? grad : p, 1, &c->dim, true) : NULL;
    ddpl_tensor *r = NULL;
    if (s && c->log) {
        ddpl_tensor *ps = ddpl_mul(p, s);
        r = ps ? ddpl_sub(grad, ps) : NULL;
        ddpl_tensor_release(ps);
    } else if (s) {
        ddpl_tensor *d = ddpl_sub(grad, s);
        r = d ? ddpl_mul(y, d) : NULL;
        ddpl_tensor_release(d);
    }
    ddpl_tensor_release(p);
    ddpl_tensor_release(s);
    gi[0] = r;
    return r ? 0 : -1;
}

/* saved: 0 the forward output */
static int softmax_backward(ddpl_node *n, ddpl_tensor *grad, ddpl_tensor **gi)
{
    softmax_ctx *c = DDPL_NODE_CTX(n, softmax_ctx);
    ddpl_tensor *y = ddpl_node_saved(n, 0);
    if (!y) return -1;
    ddpl_tensor *operands[2] = {grad, y};
    if (ddpl_grad_needed(2, operands)) return softmax_backward_recorded(c, grad, y, gi);
    ddpl_tensor *g = nn_contiguous(grad);
    ddpl_tensor *dx = g ? ddpl_empty_like(y) : NULL;
    ddpl_dim_params p = {c->dim};
    ddpl_tensor *ins[2] = {g, y};
    if (dx)
        dx = nn_run_or_release(c->log ? DDPL_OP_LOG_SOFTMAX_BACKWARD : DDPL_OP_SOFTMAX_BACKWARD, dx,
                               &dx, ins, &p);
    ddpl_tensor_release(g);
    gi[0] = dx;
    return dx ? 0 : -1;
}

static ddpl_tensor *softmax_impl(const char *op, ddpl_tensor *x, int dim, bool log)
{
    if (x->dtype == DDPL_FLOAT16 || x->dtype == DDPL_BFLOAT16) {
        /* half precision computes in float32 and rounds once at the end, as PyTorch does;
         * under CUDA autocast (PyTorch's float32 list there) the float32 result is returned as
         * it is; the CPU's list does not have softmax */
        ddpl_tensor *xf = ddpl_to_dtype(x, DDPL_FLOAT32);
        ddpl_tensor *yf = xf ? softmax_impl(op, xf, dim, log) : NULL;
        ddpl_tensor *y = NULL;
        if (yf && ddpl_autocast_upcasts_norms((ddpl_device_type)x->device.type))
            y = ddpl_tensor_retain(yf);
        else if (yf)
            y = ddpl_to_dtype(yf, (ddpl_dtype)x->dtype);
        ddpl_tensor_release(xf);
        ddpl_tensor_release(yf);
        return y;
    }
    if (nn_check_float(op, "input", x) < 0) return NULL;
    int d = ddpl_wrap_dim(op, dim, x->ndim);
    if (d < 0) return NULL;
    ddpl_tensor *xc = nn_contiguous(x);
    ddpl_tensor *y = xc ? ddpl_empty_like(x) : NULL;
    ddpl_dim_params p = {d};
    if (y) y = nn_run_or_release(log ? DDPL_OP_LOG_SOFTMAX : DDPL_OP_SOFTMAX, y, &y, &xc, &p);
    ddpl_tensor_release(xc);
    if (y && ddpl_grad_needed(1, &x)) {
        ddpl_node *n = ddpl_node_new(log ? "LogSoftmaxBackward0" : "SoftmaxBackward0",
                                     softmax_backward, 1, &x);
        ddpl_node_save_output(n, y);
        *DDPL_NODE_CTX(n, softmax_ctx) = (softmax_ctx){d, log};
        ddpl_set_history(y, n);
    }
    return y;
}

ddpl_tensor *ddpl_softmax(ddpl_tensor *x, int dim)
{
    return softmax_impl("softmax", x, dim, false);
}

ddpl_tensor *ddpl_log_softmax(ddpl_tensor *x, int dim)
{
    return softmax_impl("log_softmax", x, dim, true);
}
