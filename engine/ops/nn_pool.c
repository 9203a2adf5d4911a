/* ops/nn_pool.c: 2-D max, average and adaptive average pooling with their gradients.
 * defines: ddpl_max_pool2d, ddpl_avg_pool2d, ddpl_adaptive_avg_pool2d.
 *
 * Inputs are (N,C,H,W) or unbatched (C,H,W) (treated as a batch of one). Output sizes follow
 * PyTorch: OH = (H + 2*ph - kh) / sh + 1, or with ceil_mode (H + 2*ph - kh + sh - 1) / sh + 1
 * less one when that last window would start at or past H + ph (PyTorch's rule: it must start
 * inside the input or the left padding); the kernels clip windows that run past the end.
 * PyTorch's default stride (= the kernel) is the caller's business. */
#include "nn_common.h"

typedef struct {
    ddpl_pool_params p;
} pool_ctx;

/* Runs a pooling backward kernel: dx of the edge's shape from grad (and extra input). */
static int pool_backward_run(ddpl_op op, ddpl_node *n, ddpl_tensor *grad, ddpl_tensor *extra,
                             const void *params, ddpl_tensor **gi)
{
    ddpl_edge *e = &n->edges[0];
    ddpl_tensor *g = nn_contiguous(grad);
    ddpl_tensor *dx =
        g ? ddpl_tensor_new(e->ndim, e->sizes, (ddpl_dtype)grad->dtype, grad->device) : NULL;
    ddpl_tensor *ins[2] = {g, extra};
    if (dx) dx = nn_run_or_release(op, dx, &dx, ins, params);
    ddpl_tensor_release(g);
    gi[0] = dx;
    return dx ? 0 : -1;
}

/* ---- double backward (create_graph) ----
 * The pooling gradients are linear in the output gradient g and do not depend on x otherwise
 * (max_pool2d's argmax is piecewise constant), so their own gradient goes to g only: the
 * adjoint of the backward map, which is the forward pooling for the averages (the same window
 * and divisor per output) and a gather at the argmax for max_pool2d. */
typedef struct {
    ddpl_pool_params p;
    int kind;       /* 0 max, 1 avg, 2 adaptive */
    int64_t oh, ow; /* the pooled output's size (adaptive) */
} pool_double_ctx;

/* saved (max only): the argmax (N,C,OH,OW), h*W + w within each plane */
static int pool_double_backward(ddpl_node *n, ddpl_tensor *gg, ddpl_tensor **gi)
{
    pool_double_ctx *c = DDPL_NODE_CTX(n, pool_double_ctx);
    if (c->kind == 1) {
        gi[0] = ddpl_avg_pool2d_ex(gg, c->p.kernel, c->p.stride, c->p.padding, c->p.ceil_mode,
                                   c->p.count_include_pad, c->p.divisor_override);
    } else if (c->kind == 2) {
        gi[0] = ddpl_adaptive_avg_pool2d(gg, (int)c->oh, (int)c->ow);
    } else {
        ddpl_tensor *am = ddpl_node_saved(n, 0);
        if (!am) return -1;
        int64_t planes[3] = {gg->sizes[0], gg->sizes[1], gg->sizes[2] * gg->sizes[3]};
        int64_t picks[3] = {am->sizes[0], am->sizes[1], am->sizes[2] * am->sizes[3]};
        ddpl_tensor *flat = ddpl_reshape(gg, 3, planes), *idx = ddpl_reshape(am, 3, picks);
        ddpl_tensor *picked = flat && idx ? ddpl_gather(flat, 2, idx) : NULL;
        gi[0] = picked ? ddpl_reshape(picked, 4, am->sizes) : NULL;
        ddpl_tensor_release(flat);
        ddpl_tensor_release(idx);
        ddpl_tensor_release(picked);
    }
    return gi[0] ? 0 : -1;
}

/* Gives dx a node leading to grad when grad records (kind as in pool_double_ctx). */
static int pool_record_grad(ddpl_node *n, ddpl_tensor *grad, ddpl_tensor *argmax, int kind,
                            ddpl_tensor **gi)
{
    if (!ddpl_grad_needed(1, &grad)) return 0;
    static const char *const names[3] = {"MaxPool2dGradBackward0", "AvgPool2dGradBackward0",
                                         "AdaptiveAvgPool2dGradBackward0"};
    ddpl_node *d = ddpl_node_new(names[kind], pool_double_backward, 1, &grad);
    pool_double_ctx *c = DDPL_NODE_CTX(d, pool_double_ctx);
    c->p = DDPL_NODE_CTX(n, pool_ctx)->p; /* zeros for the adaptive pooling: unused */
    c->kind = kind;
    c->oh = grad->sizes[2];
    c->ow = grad->sizes[3];
    if (argmax) ddpl_node_save(d, argmax);
    ddpl_set_history(gi[0], d);
    return 0;
}

static int max_pool2d_backward(ddpl_node *n, ddpl_tensor *grad, ddpl_tensor **gi)
{
    ddpl_tensor *argmax = ddpl_node_saved(n, 0);
    if (!argmax) return -1;
    int rc = pool_backward_run(DDPL_OP_MAX_POOL2D_BACKWARD, n, grad, argmax,
                               &DDPL_NODE_CTX(n, pool_ctx)->p, gi);
    return rc == 0 ? pool_record_grad(n, grad, argmax, 0, gi) : rc;
}

static int avg_pool2d_backward(ddpl_node *n, ddpl_tensor *grad, ddpl_tensor **gi)
{
    int rc = pool_backward_run(DDPL_OP_AVG_POOL2D_BACKWARD, n, grad, NULL,
                               &DDPL_NODE_CTX(n, pool_ctx)->p, gi);
    return rc == 0 ? pool_record_grad(n, grad, NULL, 1, gi) : rc;
}

static int adaptive_avg_pool2d_backward(ddpl_node *n, ddpl_tensor *grad, ddpl_tensor **gi)
{
    int rc = pool_backward_run(DDPL_OP_ADAPTIVE_AVG_POOL2D_BACKWARD, n, grad, NULL, NULL, gi);
    return rc == 0 ? pool_record_grad(n, grad, NULL, 2, gi) : rc;
}

static int check_input(const char *op, const ddpl_tensor *x)
{
    char sx[128];
    if (nn_check_float(op, "input", x) < 0) return -1;
    if (x->ndim != 4)
        return ddpl_error("%s: expected a 3-D (C,H,W) or 4-D (N,C,H,W) input, got shape %s", op,
                          ddpl_shape_str(x, sx, sizeof sx));
    if (x->sizes[1] == 0 || x->sizes[2] == 0 || x->sizes[3] == 0)
        return ddpl_error("%s: input of shape %s has an empty channel or spatial dimension", op,
                          ddpl_shape_str(x, sx, sizeof sx));
    return 0;
}

/* Validates kernel/stride/padding and computes the (N,C,OH,OW) output shape. */
static int pool_shape(const char *op, const ddpl_tensor *x, const ddpl_pool_params *p,
                      int64_t out[4])
{
    if (check_input(op, x) < 0) return -1;
    for (int i = 0; i < 2; i++) {
        if (p->kernel[i] < 1 || p->stride[i] < 1 || p->padding[i] < 0)
            return ddpl_error("%s: kernel size and stride must be >= 1 and padding >= 0, got "
                              "kernel (%d, %d), stride (%d, %d), padding (%d, %d)",
                              op, p->kernel[0], p->kernel[1], p->stride[0], p->stride[1],
                              p->padding[0], p->padding[1]);
        if (p->padding[i] > p->kernel[i] / 2)
            return ddpl_error("%s: padding (%d, %d) should be at most half of the kernel size "
                              "(%d, %d)",
                              op, p->padding[0], p->padding[1], p->kernel[0], p->kernel[1]);
    }
    out[0] = x->sizes[0];
    out[1] = x->sizes[1];
    for (int i = 0; i < 2; i++) {
        /* PyTorch's pooling_output_shape: a floor division (of a possibly negative span) */
        int64_t span = x->sizes[2 + i] + 2 * p->padding[i] - p->kernel[i];
        int64_t num = span + (p->ceil_mode ? p->stride[i] - 1 : 0);
        int64_t o = (num >= 0 ? num : num - p->stride[i] + 1) / p->stride[i] + 1;
        if (p->ceil_mode && (o - 1) * p->stride[i] >= x->sizes[2 + i] + p->padding[i]) o--;
        if (o < 1) {
            char sx[128];
            return ddpl_error("%s: input of shape %s is smaller than the kernel (%d, %d) with "
                              "padding (%d, %d)",
                              op, ddpl_shape_str(x, sx, sizeof sx), p->kernel[0], p->kernel[1],
                              p->padding[0], p->padding[1]);
        }
        out[2 + i] = o;
    }
    return 0;
}

typedef ddpl_tensor *(*pool_fn)(ddpl_tensor *x, const ddpl_pool_params *p, int oh, int ow);

/* Runs f on x, unsqueezing an unbatched (C,H,W) input to a batch of one and back. */
static ddpl_tensor *with_batch(ddpl_tensor *x, pool_fn f, const ddpl_pool_params *p, int oh, int ow)
{
    if (x->ndim != 3) return f(x, p, oh, ow);
    ddpl_tensor *xb = ddpl_unsqueeze(x, 0);
    ddpl_tensor *yb = xb ? f(xb, p, oh, ow) : NULL;
    ddpl_tensor *y = yb ? ddpl_squeeze(yb, 0) : NULL;
    ddpl_tensor_release(xb);
    ddpl_tensor_release(yb);
    return y;
}

static ddpl_tensor *max_pool2d_impl(ddpl_tensor *x, const ddpl_pool_params *p, int oh, int ow)
{
    DDPL_UNUSED(oh);
    DDPL_UNUSED(ow);
    int64_t ys[4];
    if (pool_shape("max_pool2d", x, p, ys) < 0) return NULL;
    bool grad = ddpl_grad_needed(1, &x);
    ddpl_tensor *xc = nn_contiguous(x);
    ddpl_tensor *y = xc ? ddpl_tensor_new(4, ys, (ddpl_dtype)x->dtype, x->device) : NULL;
    /* the argmax is only computed when backward will need it */
    ddpl_tensor *am = y && grad ? ddpl_tensor_new(4, ys, DDPL_INT64, x->device) : NULL;
    ddpl_tensor *outs[2] = {y, am};
    if (y && (am || !grad)) {
        y = nn_run_or_release(DDPL_OP_MAX_POOL2D, y, outs, &xc, p);
    } else {
        ddpl_tensor_release(y);
        y = NULL;
    }
    if (y && grad) {
        ddpl_node *n = ddpl_node_new("MaxPool2DWithIndicesBackward0", max_pool2d_backward, 1, &x);
        ddpl_node_save(n, am);
        DDPL_NODE_CTX(n, pool_ctx)->p = *p;
        ddpl_set_history(y, n);
    }
    ddpl_tensor_release(am);
    ddpl_tensor_release(xc);
    return y;
}

ddpl_tensor *ddpl_max_pool2d_ex(ddpl_tensor *x, const int kernel[2], const int stride[2],
                                const int padding[2], bool ceil_mode)
{
    ddpl_pool_params p = {{kernel[0], kernel[1]},
                          {stride[0], stride[1]},
                          {padding[0], padding[1]},
                          false,
                          ceil_mode,
                          0};
    return with_batch(x, max_pool2d_impl, &p, 0, 0);
}

ddpl_tensor *ddpl_max_pool2d(ddpl_tensor *x, const int kernel[2], const int stride[2],
                             const int padding[2])
{
    return ddpl_max_pool2d_ex(x, kernel, stride, padding, false);
}

static ddpl_tensor *avg_pool2d_impl(ddpl_tensor *x, const ddpl_pool_params *p, int oh, int ow)
{
    DDPL_UNUSED(oh);
    DDPL_UNUSED(ow);
    int64_t ys[4];
    if (pool_shape("avg_pool2d", x, p, ys) < 0) return NULL;
    ddpl_tensor *xc = nn_contiguous(x);
    ddpl_tensor *y = xc ? ddpl_tensor_new(4, ys, (ddpl_dtype)x->dtype, x->device) : NULL;
    if (y) y = nn_run_or_release(DDPL_OP_AVG_POOL2D, y, &y, &xc, p);
    if (y && ddpl_grad_needed(1, &x)) {
        ddpl_node *n = ddpl_node_new("AvgPool2DBackward0", avg_pool2d_backward, 1, &x);
        DDPL_NODE_CTX(n, pool_ctx)->p = *p;
        ddpl_set_history(y, n);
    }
    ddpl_tensor_release(xc);
    return y;
}

ddpl_tensor *ddpl_avg_pool2d_ex(ddpl_tensor *x, const int kernel[2], const int stride[2],
                                const int padding[2], bool ceil_mode, bool count_include_pad,
                                int divisor_override)
{
    ddpl_pool_params p = {{kernel[0], kernel[1]},
                          {stride[0], stride[1]},
                          {padding[0], padding[1]},
                          count_include_pad,
                          ceil_mode,
                          divisor_override};
    return with_batch(x, avg_pool2d_impl, &p, 0, 0);
}

ddpl_tensor *ddpl_avg_pool2d(ddpl_tensor *x, const int kernel[2], const int stride[2],
                             const int padding[2], bool count_include_pad)
{
    return ddpl_avg_pool2d_ex(x, kernel, stride, padding, false, count_include_pad, 0);
}

static ddpl_tensor *adaptive_impl(ddpl_tensor *x, const ddpl_pool_params *p, int oh, int ow)
{
    DDPL_UNUSED(p);
    if (check_input("adaptive_avg_pool2d", x) < 0) return NULL;
    if (oh < 1 || ow < 1)
        return ddpl_error("adaptive_avg_pool2d: output size must be >= 1, got (%d, %d)", oh, ow),
               NULL;
    int64_t ys[4] = {x->sizes[0], x->sizes[1], oh, ow};
    ddpl_tensor *xc = nn_contiguous(x);
    ddpl_tensor *y = xc ? ddpl_tensor_new(4, ys, (ddpl_dtype)x->dtype, x->device) : NULL;
    if (y) y = nn_run_or_release(DDPL_OP_ADAPTIVE_AVG_POOL2D, y, &y, &xc, NULL);
    if (y && ddpl_grad_needed(1, &x))
        ddpl_set_history(
            y, ddpl_node_new("AdaptiveAvgPool2dBackward0", adaptive_avg_pool2d_backward, 1, &x));
    ddpl_tensor_release(xc);
    return y;
}

ddpl_tensor *ddpl_adaptive_avg_pool2d(ddpl_tensor *x, int out_h, int out_w)
{
    return with_batch(x, adaptive_impl, NULL, out_h, out_w);
}
