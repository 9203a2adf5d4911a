/* ops/nn_conv.c: 2-D convolution with its gradient.
 * defines: ddpl_conv2d, nn_run_conv_kernel.
 *
 * The forward and backward kernels take contiguous x (N,C,H,W), w (O,C/groups,kh,kw) and
 * produce y (N,O,OH,OW) with OH = (H + 2*ph - dh*(kh-1) - 1) / sh + 1 (floor), likewise OW.
 * An unbatched input (C,H,W) is treated as a batch of one, as PyTorch does. float16/bfloat16
 * run natively on CUDA (cuDNN, float accumulation); on the CPU they compute in float32 and
 * round once, as PyTorch's CPU bf16 convolution does. Under autocast the operands are cast to
 * the autocast dtype first (ops/autocast.h). */
#include "autocast.h"
#include "nn_common.h"

typedef struct {
    ddpl_conv_params p;
} conv_ctx;

/* Runs a conv kernel. The CPU conv2d kernels take 16-bit operands themselves (bfloat16 on the
 * CPU's bf16 units, cpu/cpu_conv.c); for the other CPU kernels (conv_transpose2d's) 16-bit
 * operands are widened to float32 copies here, the kernel writes float32 outputs, which are
 * rounded into outs. Shared with conv_transpose2d (nn_conv_transpose.c). */
int nn_run_conv_kernel(ddpl_op op, ddpl_tensor **outs, int n_out, ddpl_tensor **ins, int n_in,
                       const ddpl_conv_params *p)
{
    ddpl_tensor *in0 = ins[0];
    bool half = in0->dtype == DDPL_FLOAT16 || in0->dtype == DDPL_BFLOAT16;
    bool kernel_takes_half = op == DDPL_OP_CONV2D || op == DDPL_OP_CONV2D_BACKWARD;
    if (in0->device.type != DDPL_CPU || !half || kernel_takes_half)
        return ddpl_run_kernel(op, in0->device, outs, ins, p);
    ddpl_tensor *fin[3] = {NULL, NULL, NULL}, *fout[3] = {NULL, NULL, NULL};
    int rc = 0;
    for (int i = 0; i < n_in && rc == 0; i++)
        if (ins[i] && !(fin[i] = ddpl_as_dtype(ins[i], DDPL_FLOAT32))) rc = -1;
    for (int i = 0; i < n_out && rc == 0; i++)
        if (outs[i] &&
            !(fout[i] = ddpl_tensor_new(outs[i]->ndim, outs[i]->sizes, DDPL_FLOAT32, in0->device)))
            rc = -1;
    if (rc == 0) rc = ddpl_run_kernel(op, in0->device, fout, fin, p);
    for (int i = 0; i < n_out && rc == 0; i++)
        if (outs[i]) rc = ddpl_run_kernel(DDPL_OP_COPY, in0->device, &outs[i], &fout[i], NULL);
    for (int i = 0; i < 3; i++) {
        ddpl_tensor_release(fin[i]);
        ddpl_tensor_release(fout[i]);
    }
    return rc;
}

/* One gradient of the convolution from the backward kernel: which = 0 the input's (shape of
 * x), 1 the weight's (shape of w), for the output gradient g; x and w are read as the kernel
 * needs them (contiguous) and only for what that gradient depends on. No autograd. */
static ddpl_tensor *conv_grad_kernel(int which, ddpl_tensor *g, ddpl_tensor *x, ddpl_tensor *w,
                                     const ddpl_conv_params *p)
{
    ddpl_tensor *gc = nn_contiguous(g), *xc = nn_contiguous(x), *wc = nn_contiguous(w);
    ddpl_tensor *outs[3] = {NULL, NULL, NULL};
    int rc = gc && xc && wc ? 0 : -1;
    if (rc == 0 && !(outs[which] = ddpl_empty_like(which == 0 ? xc : wc))) rc = -1;
    ddpl_tensor *ins[3] = {gc, xc, wc};
    if (rc == 0) rc = nn_run_conv_kernel(DDPL_OP_CONV2D_BACKWARD, outs, 3, ins, 3, p);
    ddpl_tensor_release(gc);
    ddpl_tensor_release(xc);
    ddpl_tensor_release(wc);
    if (rc < 0) {
        ddpl_tensor_release(outs[which]);
        return NULL;
    }
    return outs[which];
}

/* ---- double backward (create_graph) ----
 * The input gradient dx = convT(g, w) and the weight gradient dw = corr(x, g) are bilinear, so
 * their own gradients are convolutions again (PyTorch's _convolution_double_backward):
 *   dx's node (inputs g, w), given ggx:  d/dg = conv2d(ggx, w),  d/dw = dw-kernel(ggx, g)
 *   dw's node (inputs g, x), given ggw:  d/dg = conv2d(x, ggw),  d/dx = dx-kernel(g, ggw)
 * conv2d records; the kernel results are marked not differentiable, so a third derivative
 * through a convolution is refused. The bias gradient is a recorded sum. */
typedef struct {
    ddpl_conv_params p;
    int64_t x_sizes[4], w_sizes[4]; /* the forward operands' shapes */
} conv_double_ctx;

/* saved: 0 g, 1 w (input-gradient node) or x (weight-gradient node) */
static int conv2d_double_backward(ddpl_node *n, ddpl_tensor *gg, ddpl_tensor **gi)
{
    conv_double_ctx *c = DDPL_NODE_CTX(n, conv_double_ctx);
    ddpl_tensor *g = ddpl_node_saved(n, 0), *other = ddpl_node_saved(n, 1);
    if (!g || !other) return -1;
    bool input_node = strcmp(n->name, "Conv2dInputGradBackward0") == 0;
    const ddpl_conv_params *p = &c->p;
    if (ddpl_node_needs_grad(n, 0)) { /* d/dg: the forward convolution of the other operands */
        gi[0] = input_node
                    ? ddpl_conv2d(gg, other, NULL, p->stride, p->padding, p->dilation, p->groups)
                    : ddpl_conv2d(other, gg, NULL, p->stride, p->padding, p->dilation, p->groups);
        if (!gi[0]) return -1;
    }
    if (ddpl_node_needs_grad(n, 1)) {
        /* the dx node sends a weight gradient: kernel(g, input=gg); the dw node an input
         * gradient: kernel(g, weight=gg). The third operand only gives the kernel its shape. */
        ddpl_tensor *shape_only =
            ddpl_zeros(4, input_node ? c->w_sizes : c->x_sizes, (ddpl_dtype)gg->dtype, gg->device);
        gi[1] = !shape_only  ? NULL
                : input_node ? conv_grad_kernel(1, g, gg, shape_only, p)
                             : conv_grad_kernel(0, g, shape_only, gg, p);
        ddpl_tensor_release(shape_only);
        if (!gi[1]) return -1;
    }
    return ddpl_mark_not_differentiable("conv2d", n, gg, 2, gi, true);
}

/* Gives dx and dw (from the kernel) the nodes above, and makes db a recorded sum of grad. */
static int conv2d_record_grads(ddpl_node *n, ddpl_tensor *grad, ddpl_tensor *x, ddpl_tensor *w,
                               ddpl_tensor **gi)
{
    conv_double_ctx ctx = {DDPL_NODE_CTX(n, conv_ctx)->p, {0}, {0}};
    memcpy(ctx.x_sizes, x->sizes, sizeof ctx.x_sizes);
    memcpy(ctx.w_sizes, w->sizes, sizeof ctx.w_sizes);
    const char *names[2] = {"Conv2dInputGradBackward0", "Conv2dWeightGradBackward0"};
    for (int i = 0; i < 2; i++) {
        ddpl_tensor *operands[2] = {grad, i == 0 ? w : x};
        if (!gi[i] || !ddpl_grad_needed(2, operands)) continue;
        ddpl_node *d = ddpl_node_new(names[i], conv2d_double_backward, 2, operands);
        ddpl_node_save(d, grad);
        ddpl_node_save(d, operands[1]);
        *DDPL_NODE_CTX(d, conv_double_ctx) = ctx;
        ddpl_set_history(gi[i], d);
    }
    if (gi[2] && ddpl_requires_grad(grad)) {
        int dims[3] = {0, 2, 3};
        ddpl_tensor *db = ddpl_sum_dims(grad, 3, dims, false);
        if (!db) return -1;
        ddpl_tensor_release(gi[2]);
        gi[2] = db;
    }
    return 0;
}

/* inputs 0 x, 1 w, 2 bias?; saved: x and w as given (made contiguous here: double backward
 * needs them with their history) */
static int conv2d_backward(ddpl_node *n, ddpl_tensor *grad, ddpl_tensor **gi)
{
    ddpl_tensor *x = ddpl_node_saved(n, 0), *w = ddpl_node_saved(n, 1);
    if (!x || !w) return -1;
    ddpl_tensor *g = nn_contiguous(grad), *xc = nn_contiguous(x), *wc = nn_contiguous(w);
    ddpl_tensor *outs[3] = {NULL, NULL, NULL};
    int rc = g && xc && wc ? 0 : -1;
    if (rc == 0 && ddpl_node_needs_grad(n, 0) && !(outs[0] = ddpl_empty_like(xc))) rc = -1;
    if (rc == 0 && ddpl_node_needs_grad(n, 1) && !(outs[1] = ddpl_empty_like(wc))) rc = -1;
    if (rc == 0 && n->edges[2].ndim == 1 && ddpl_node_needs_grad(n, 2) &&
        !(outs[2] = ddpl_tensor_new(1, n->edges[2].sizes, (ddpl_dtype)x->dtype, x->device)))
        rc = -1;
    ddpl_tensor *ins[3] = {g, xc, wc};
    if (rc == 0 && (outs[0] || outs[1] || outs[2]))
        rc = nn_run_conv_kernel(DDPL_OP_CONV2D_BACKWARD, outs, 3, ins, 3,
                                &DDPL_NODE_CTX(n, conv_ctx)->p);
    ddpl_tensor_release(g);
    ddpl_tensor_release(xc);
    ddpl_tensor_release(wc);
    for (int i = 0; i < 3; i++) {
        if (rc == 0)
            gi[i] = outs[i];
        else
            ddpl_tensor_release(outs[i]);
    }
    if (rc < 0 || !ddpl_is_grad_enabled()) return rc;
    return conv2d_record_grads(n, grad, x, w, gi);
}

static int check_pair(const char *what, const int v[2], int min)
{
    if (v[0] >= min && v[1] >= min) return 0;
    return ddpl_error("conv2d: %s must be >= %d, got (%d, %d)", what, min, v[0], v[1]);
}

/* Validates everything and computes the output shape into y_sizes. */
static int conv2d_check(ddpl_tensor *x, ddpl_tensor *w, ddpl_tensor *bias,
                        const ddpl_conv_params *p, int64_t y_sizes[4])
{
    char sx[128], sw[128];
    if (!ddpl_dtype_is_floating((ddpl_dtype)x->dtype))
        return ddpl_error("conv2d: expected float32 or float64 input, got %s; float16 and "
                          "bfloat16 are accepted too",
                          ddpl_dtype_name((ddpl_dtype)x->dtype));
    if (ddpl_check_same_device("conv2d", x, w) < 0) return -1;
    if (w->dtype != x->dtype)
        return ddpl_error("conv2d: input (%s) and weight (%s) must have the same dtype",
                          ddpl_dtype_name((ddpl_dtype)x->dtype),
                          ddpl_dtype_name((ddpl_dtype)w->dtype));
    if (x->ndim != 4)
        return ddpl_error("conv2d: expected a 3-D (C,H,W) or 4-D (N,C,H,W) input, got shape %s",
                          ddpl_shape_str(x, sx, sizeof sx));
    if (w->ndim != 4)
        return ddpl_error("conv2d: expected a 4-D weight (O,C/groups,kh,kw), got shape %s",
                          ddpl_shape_str(w, sw, sizeof sw));
    if (check_pair("stride", p->stride, 1) < 0 || check_pair("padding", p->padding, 0) < 0 ||
        check_pair("dilation", p->dilation, 1) < 0)
        return -1;
    if (p->groups < 1) return ddpl_error("conv2d: groups must be >= 1, got %d", p->groups);
        /* the shapes are formatted only for an error (formatting them up front cost two
         * snprintf per call of every training step) */
#define SX ddpl_shape_str(x, sx, sizeof sx)
#define SW ddpl_shape_str(w, sw, sizeof sw)
    if (w->sizes[1] == 0 || w->sizes[2] == 0 || w->sizes[3] == 0)
        return ddpl_error("conv2d: weight of shape %s is empty", SW);
    if (x->sizes[1] != w->sizes[1] * p->groups)
        return ddpl_error("conv2d: input of shape %s has %lld channels but weight %s expects "
                          "%lld (groups=%d)",
                          SX, (long long)x->sizes[1], SW, (long long)(w->sizes[1] * p->groups),
                          p->groups);
    if (w->sizes[0] % p->groups != 0)
        return ddpl_error("conv2d: weight %s has %lld output channels, not divisible by "
                          "groups=%d",
                          SW, (long long)w->sizes[0], p->groups);
    if (bias && nn_check_param("conv2d", "bias", bias, x, w->sizes[0]) < 0) return -1;
    int64_t oh = (x->sizes[2] + 2 * p->padding[0] - p->dilation[0] * (w->sizes[2] - 1) - 1);
    int64_t ow = (x->sizes[3] + 2 * p->padding[1] - p->dilation[1] * (w->sizes[3] - 1) - 1);
    oh = oh < 0 ? 0 : oh / p->stride[0] + 1;
    ow = ow < 0 ? 0 : ow / p->stride[1] + 1;
    if (oh < 1 || ow < 1)
        return ddpl_error("conv2d: input of shape %s is smaller than the (dilated) kernel of "
                          "weight %s with padding (%d, %d) and dilation (%d, %d)",
                          SX, SW, p->padding[0], p->padding[1], p->dilation[0], p->dilation[1]);
#undef SX
#undef SW
    y_sizes[0] = x->sizes[0];
    y_sizes[1] = w->sizes[0];
    y_sizes[2] = oh;
    y_sizes[3] = ow;
    return 0;
}

static ddpl_tensor *conv2d_batched(ddpl_tensor *x, ddpl_tensor *w, ddpl_tensor *bias,
                                   const ddpl_conv_params *p)
{
    int64_t ys[4];
    if (conv2d_check(x, w, bias, p, ys) < 0) return NULL;
    ddpl_tensor *xc = nn_contiguous(x), *wc = nn_contiguous(w), *bc = nn_contiguous(bias);
    ddpl_tensor *y =
        xc && wc && (bc || !bias) ? ddpl_tensor_new(4, ys, (ddpl_dtype)x->dtype, x->device) : NULL;
    ddpl_tensor *ins[3] = {xc, wc, bc};
    if (y && nn_run_conv_kernel(DDPL_OP_CONV2D, &y, 1, ins, 3, p) < 0) {
        ddpl_tensor_release(y);
        y = NULL;
    }
    ddpl_tensor *args[3] = {x, w, bias};
    if (y && ddpl_grad_needed(3, args)) {
        ddpl_node *n = ddpl_node_new("ConvolutionBackward0", conv2d_backward, 3, args);
        ddpl_node_save(n, x);
        ddpl_node_save(n, w);
        DDPL_NODE_CTX(n, conv_ctx)->p = *p;
        ddpl_set_history(y, n);
    }
    ddpl_tensor_release(xc);
    ddpl_tensor_release(wc);
    ddpl_tensor_release(bc);
    return y;
}

static ddpl_tensor *conv2d_impl(ddpl_tensor *x, ddpl_tensor *weight, ddpl_tensor *bias,
                                const int stride[2], const int padding[2], const int dilation[2],
                                int groups);

ddpl_tensor *ddpl_conv2d(ddpl_tensor *x, ddpl_tensor *weight, ddpl_tensor *bias,
                         const int stride[2], const int padding[2], const int dilation[2],
                         int groups)
{
    if (!ddpl_autocast_enabled((ddpl_device_type)x->device.type))
        return conv2d_impl(x, weight, bias, stride, padding, dilation, groups);
    ddpl_tensor *c[3];
    ddpl_tensor *y = ddpl_autocast_lower_n(3, OP_INPUTS(x, weight, bias), c) == 0
                         ? conv2d_impl(c[0], c[1], c[2], stride, padding, dilation, groups)
                         : NULL;
    ddpl_autocast_release_n(3, c);
    return y;
}

static ddpl_tensor *conv2d_impl(ddpl_tensor *x, ddpl_tensor *weight, ddpl_tensor *bias,
                                const int stride[2], const int padding[2], const int dilation[2],
                                int groups)
{
    ddpl_conv_params p = {
        {stride[0], stride[1]}, {padding[0], padding[1]}, {dilation[0], dilation[1]}, groups};
    if (x->ndim != 3) return conv2d_batched(x, weight, bias, &p);
    ddpl_tensor *xb = ddpl_unsqueeze(x, 0);
    ddpl_tensor *yb = xb ? conv2d_batched(xb, weight, bias, &p) : NULL;
    ddpl_tensor *y = yb ? ddpl_squeeze(yb, 0) : NULL;
    ddpl_tensor_release(xb);
    ddpl_tensor_release(yb);
    return y;
}
