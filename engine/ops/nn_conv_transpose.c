/* ops/nn_conv_transpose.c: 2-D transposed convolution with its gradient.
 * defines: ddpl_conv_transpose2d.
 *
 * conv_transpose2d is the adjoint of conv2d: y = conv_transpose2d(x, w) is the gradient of
 * conv2d(., w) with respect to its input, for an input of size
 *   OH = (H - 1)*sh - 2*ph + dh*(kh - 1) + oph + 1   (likewise OW; oph = output_padding),
 * so it runs conv2d's backward kernel (CONV2D_BACKWARD) for the data gradient only: x plays
 * the upstream gradient (N, Cin, H, W), w (Cin, Cout/groups, kh, kw) is conv2d's weight as it
 * is (PyTorch's layout for transposed weights), y (N, Cout, OH, OW) the input gradient. That
 * kernel reads its in[1] (conv2d's input) only for the weight gradient, so y, zeroed, gives it
 * the shape. No kernel of its own: every backend with CONV2D_BACKWARD runs it.
 * Backward: dx = conv2d(dy, w) with the same stride, padding, dilation and groups (narrowed to
 * (H, W): an output_padding >= stride, allowed when below the dilation, adds windows), and dw =
 * the weight pass of CONV2D_BACKWARD with x as the upstream gradient and dy as conv2d's input.
 * The bias is added with ddpl_add, which records its own gradient. */
#include "autocast.h"
#include "nn_common.h"

typedef struct {
    ddpl_conv_params p;
} convt_ctx;

/* inputs 0 x, 1 w; saved: x and w as the kernel saw them (contiguous) */
static int conv_transpose2d_backward(ddpl_node *n, ddpl_tensor *grad, ddpl_tensor **gi)
{
    const ddpl_conv_params *p = &DDPL_NODE_CTX(n, convt_ctx)->p;
    ddpl_tensor *x = ddpl_node_saved(n, 0), *w = ddpl_node_saved(n, 1);
    if (!x || !w) return -1;
    ddpl_tensor *g = nn_contiguous(grad);
    if (!g) return -1;
    ddpl_tensor *dx = NULL, *dw = NULL;
    int rc = 0;
    if (ddpl_node_needs_grad(n, 0)) {
        ddpl_tensor *full = ddpl_conv2d(g, w, NULL, p->stride, p->padding, p->dilation, p->groups);
        ddpl_tensor *rows = full ? ddpl_narrow(full, 2, 0, x->sizes[2]) : NULL;
        dx = rows ? ddpl_narrow(rows, 3, 0, x->sizes[3]) : NULL;
        ddpl_tensor_release(full);
        ddpl_tensor_release(rows);
        if (!dx) rc = -1;
    }
    if (rc == 0 && ddpl_node_needs_grad(n, 1)) {
        dw = ddpl_empty_like(w);
        ddpl_tensor *outs[3] = {NULL, dw, NULL}, *ins[3] = {x, g, w};
        if (!dw || nn_run_conv_kernel(DDPL_OP_CONV2D_BACKWARD, outs, 3, ins, 3, p) < 0) rc = -1;
    }
    ddpl_tensor_release(g);
    if (rc < 0) {
        ddpl_tensor_release(dx);
        ddpl_tensor_release(dw);
        return -1;
    }
    gi[0] = dx;
    gi[1] = dw;
    /* dx is conv2d, recorded under create_graph; dw comes from the raw kernel, which records
     * nothing: a second derivative through it is refused rather than silently zero */
    return ddpl_mark_not_differentiable("conv_transpose2d", n, grad, 2, gi, true);
}

/* Validates x (N,Cin,H,W), w (Cin,Cout/groups,kh,kw), bias (Cout) and the sizes; fills the
 * output shape. */
static int conv_transpose2d_check(ddpl_tensor *x, ddpl_tensor *w, ddpl_tensor *bias,
                                  const ddpl_conv_params *p, const int output_padding[2],
                                  int64_t ys[4])
{
    static const char *op = "conv_transpose2d";
    char sx[128], sw[128];
    if (!ddpl_dtype_is_floating((ddpl_dtype)x->dtype))
        return ddpl_error("%s: expected a floating point input, got %s", op,
                          ddpl_dtype_name((ddpl_dtype)x->dtype));
    if (ddpl_check_same_device(op, x, w) < 0) return -1;
    if (w->dtype != x->dtype)
        return ddpl_error("%s: input (%s) and weight (%s) must have the same dtype", op,
                          ddpl_dtype_name((ddpl_dtype)x->dtype),
                          ddpl_dtype_name((ddpl_dtype)w->dtype));
    ddpl_shape_str(x, sx, sizeof sx);
    ddpl_shape_str(w, sw, sizeof sw);
    if (x->ndim != 4)
        return ddpl_error("%s: expected a 3-D (C,H,W) or 4-D (N,C,H,W) input, got shape %s", op,
                          sx);
    if (w->ndim != 4)
        return ddpl_error("%s: expected a 4-D weight (in, out/groups, kh, kw), got shape %s", op,
                          sw);
    if (p->groups < 1) return ddpl_error("%s: groups must be >= 1, got %d", op, p->groups);
    if (x->sizes[1] != w->sizes[0])
        return ddpl_error("%s: input of shape %s has %lld channels but weight %s expects %lld", op,
                          sx, (long long)x->sizes[1], sw, (long long)w->sizes[0]);
    if (w->sizes[0] % p->groups != 0)
        return ddpl_error("%s: weight %s has %lld input channels, not divisible by groups=%d", op,
                          sw, (long long)w->sizes[0], p->groups);
    if (w->sizes[1] == 0 || w->sizes[2] == 0 || w->sizes[3] == 0)
        return ddpl_error("%s: weight of shape %s is empty", op, sw);
    for (int i = 0; i < 2; i++) {
        if (p->stride[i] < 1 || p->dilation[i] < 1 || p->padding[i] < 0 || output_padding[i] < 0)
            return ddpl_error("%s: stride and dilation must be >= 1, padding and output_padding "
                              ">= 0; got stride (%d, %d), padding (%d, %d), dilation (%d, %d), "
                              "output_padding (%d, %d)",
                              op, p->stride[0], p->stride[1], p->padding[0], p->padding[1],
                              p->dilation[0], p->dilation[1], output_padding[0], output_padding[1]);
        if (output_padding[i] >= p->stride[i] && output_padding[i] >= p->dilation[i])
            return ddpl_error("%s: output_padding (%d, %d) must be smaller than either stride "
                              "(%d, %d) or dilation (%d, %d)",
                              op, output_padding[0], output_padding[1], p->stride[0], p->stride[1],
                              p->dilation[0], p->dilation[1]);
    }
    int64_t cout = w->sizes[1] * p->groups;
    if (bias && nn_check_param(op, "bias", bias, x, cout) < 0) return -1;
    ys[0] = x->sizes[0];
    ys[1] = cout;
    for (int i = 0; i < 2; i++) {
        ys[2 + i] = (x->sizes[2 + i] - 1) * p->stride[i] - 2 * (int64_t)p->padding[i] +
                    (int64_t)p->dilation[i] * (w->sizes[2 + i] - 1) + output_padding[i] + 1;
        if (ys[2 + i] < 1)
            return ddpl_error("%s: input %s with weight %s, stride (%d, %d) and padding (%d, %d) "
                              "gives an empty output (%lld x %lld)",
                              op, sx, sw, p->stride[0], p->stride[1], p->padding[0], p->padding[1],
                              (long long)ys[2], (long long)ys[3]);
    }
    return 0;
}

static ddpl_tensor *conv_transpose2d_batched(ddpl_tensor *x, ddpl_tensor *w, ddpl_tensor *bias,
                                             const ddpl_conv_params *p, const int output_padding[2])
{
    int64_t ys[4];
    if (conv_transpose2d_check(x, w, bias, p, output_padding, ys) < 0) return NULL;
    ddpl_tensor *xc = nn_contiguous(x), *wc = nn_contiguous(w);
    ddpl_tensor *y = xc && wc ? ddpl_tensor_new(4, ys, (ddpl_dtype)x->dtype, x->device) : NULL;
    /* y is conv2d's input for the shape only; zeroed so that no path reads garbage */
    int rc = y ? ddpl_zero_(y) : -1;
    ddpl_tensor *outs[3] = {y, NULL, NULL}, *ins[3] = {xc, y, wc};
    if (rc == 0) rc = nn_run_conv_kernel(DDPL_OP_CONV2D_BACKWARD, outs, 3, ins, 3, p);
    ddpl_tensor *args[2] = {x, w};
    if (rc == 0 && ddpl_grad_needed(2, args)) {
        ddpl_node *n =
            ddpl_node_new("ConvTranspose2dBackward0", conv_transpose2d_backward, 2, args);
        ddpl_node_save(n, xc);
        ddpl_node_save(n, wc);
        DDPL_NODE_CTX(n, convt_ctx)->p = *p;
        ddpl_set_history(y, n);
    }
    ddpl_tensor_release(xc);
    ddpl_tensor_release(wc);
    if (rc < 0) {
        ddpl_tensor_release(y);
        return NULL;
    }
    if (!bias) return y;
    int64_t bs[4] = {1, ys[1], 1, 1};
    ddpl_tensor *bv = ddpl_reshape(bias, 4, bs);
    ddpl_tensor *out = bv ? ddpl_add(y, bv) : NULL;
    ddpl_tensor_release(bv);
    ddpl_tensor_release(y);
    return out;
}

static ddpl_tensor *conv_transpose2d_impl(ddpl_tensor *x, ddpl_tensor *w, ddpl_tensor *bias,
                                          const ddpl_conv_params *p, const int output_padding[2])
{
    if (x->ndim != 3) return conv_transpose2d_batched(x, w, bias, p, output_padding);
    ddpl_tensor *xb = ddpl_unsqueeze(x, 0); /* (C,H,W): a batch of one, as PyTorch */
    ddpl_tensor *yb = xb ? conv_transpose2d_batched(xb, w, bias, p, output_padding) : NULL;
    ddpl_tensor *y = yb ? ddpl_squeeze(yb, 0) : NULL;
    ddpl_tensor_release(xb);
    ddpl_tensor_release(yb);
    return y;
}

ddpl_tensor *ddpl_conv_transpose2d(ddpl_tensor *x, ddpl_tensor *weight, ddpl_tensor *bias,
                                   const int stride[2], const int padding[2],
                                   const int output_padding[2], int groups, const int dilation[2])
{
    ddpl_conv_params p = {
        {stride[0], stride[1]}, {padding[0], padding[1]}, {dilation[0], dilation[1]}, groups};
    if (!ddpl_autocast_enabled((ddpl_device_type)x->device.type))
        return conv_transpose2d_impl(x, weight, bias, &p, output_padding);
    ddpl_tensor *c[3]; /* autocast: as conv2d, the operands in the autocast dtype */
    ddpl_tensor *y = ddpl_autocast_lower_n(3, OP_INPUTS(x, weight, bias), c) == 0
                         ? conv_transpose2d_impl(c[0], c[1], c[2], &p, output_padding)
                         : NULL;
    ddpl_autocast_release_n(3, c);
    return y;
}
