/* ops/pointwise_unary.c: unary pointwise ops and activations, with their gradients.
 * defines: ddpl_neg, ddpl_exp, ddpl_log, ddpl_sqrt, ddpl_rsqrt, ddpl_abs, ddpl_sign, ddpl_sin,
 *          ddpl_cos, ddpl_tanh, ddpl_sigmoid, ddpl_relu, ddpl_gelu, ddpl_silu, ddpl_clamp,
 *          pw_unary_forward, pw_unary_recorded, pw_clamp_dtype.
 *
 * Dtypes as PyTorch: the transcendental ops and the activations with a smooth form compute in
 * float32 for integer and bool inputs; neg, abs, sign, relu and clamp keep integer dtypes
 * (bool is refused by neg, abs and relu). */
#include <math.h>

#include "pointwise.h"

/* out (x's shape, out_dt) <- kop(x) computed in out_dt; no autograd. */
ddpl_tensor *pw_unary_forward(ddpl_op kop, ddpl_tensor *x, ddpl_dtype out_dt, const void *params)
{
    kernel_input kx;
    if (kin_prepare(&kx, x, out_dt, x->device, x->ndim, x->sizes) < 0) return NULL;
    ddpl_tensor *out = ddpl_tensor_new(x->ndim, x->sizes, out_dt, x->device);
    ddpl_tensor *in = &kx.hdr;
    if (out && ddpl_run_kernel(kop, x->device, &out, &in, params) < 0) {
        ddpl_tensor_release(out);
        out = NULL;
    }
    kin_release(&kx);
    return out;
}

/* float32 for integer inputs, else the input's dtype */
static ddpl_dtype float_dtype(const ddpl_tensor *x)
{
    ddpl_dtype dt = (ddpl_dtype)x->dtype;
    return ddpl_dtype_is_floating(dt) ? dt : ddpl_default_float_dtype();
}

static int refuse_bool(const char *op, const ddpl_tensor *x)
{
    if (x->dtype != DDPL_BOOL) return 0;
    return ddpl_error("%s: not supported for bool tensors", op);
}

/* Runs kop and records a node with backward fn saving the input and/or the output
 * (pointwise.h). */
ddpl_tensor *pw_unary_recorded(ddpl_op kop, ddpl_tensor *x, ddpl_dtype out_dt, const void *params,
                               const char *node_name, ddpl_backward_fn fn, int save,
                               const void *ctx, size_t ctx_size)
{
    ddpl_tensor *out = pw_unary_forward(kop, x, out_dt, params);
    if (out && fn && ddpl_grad_needed(1, &x)) {
        ddpl_node *n = ddpl_node_new(node_name, fn, 1, &x);
        ddpl_node_save(n, (save & PW_SAVE_INPUT) ? x : NULL);
        if (save & PW_SAVE_OUTPUT)
            ddpl_node_save_output(n, out);
        else
            ddpl_node_save(n, NULL);
        if (ctx_size) memcpy(n->ctx, ctx, ctx_size);
        ddpl_set_history(out, n);
    }
    return out;
}

/* Saved tensor `slot` (0: input, 1: output), or NULL with the error set. */
#define SAVED(n, slot) ddpl_node_saved((n), (slot))

/* grad_in = grad * f, releasing f */
static int grad_times(ddpl_tensor *grad, ddpl_tensor *f, ddpl_tensor **gi)
{
    if (!f) return -1;
    gi[0] = ddpl_mul(grad, f);
    ddpl_tensor_release(f);
    return gi[0] ? 0 : -1;
}

static ddpl_tensor *scaled(ddpl_tensor *t, double s)
{
    if (!t) return NULL;
    ddpl_tensor *w = ddpl_wrapped_number(s, false);
    ddpl_tensor *r = ddpl_mul(t, w);
    ddpl_tensor_release(w);
    ddpl_tensor_release(t);
    return r;
}

/* ---- backward formulas ---- */
static int neg_backward(ddpl_node *n, ddpl_tensor *grad, ddpl_tensor **gi)
{
    DDPL_UNUSED(n);
    gi[0] = ddpl_neg(grad);
    return gi[0] ? 0 : -1;
}

/* exp: g * y */
static int exp_backward(ddpl_node *n, ddpl_tensor *grad, ddpl_tensor **gi)
{
    ddpl_tensor *y = SAVED(n, 1);
    return y ? grad_times(grad, ddpl_tensor_retain(y), gi) : -1;
}

/* log: g / x */
static int log_backward(ddpl_node *n, ddpl_tensor *grad, ddpl_tensor **gi)
{
    ddpl_tensor *x = SAVED(n, 0);
    if (!x) return -1;
    gi[0] = ddpl_div(grad, x);
    return gi[0] ? 0 : -1;
}

/* sqrt: g / (2 y) */
static int sqrt_backward(ddpl_node *n, ddpl_tensor *grad, ddpl_tensor **gi)
{
    ddpl_tensor *y = SAVED(n, 1);
    if (!y) return -1;
    ddpl_tensor *two_y = scaled(ddpl_tensor_retain(y), 2.0);
    gi[0] = two_y ? ddpl_div(grad, two_y) : NULL;
    ddpl_tensor_release(two_y);
    return gi[0] ? 0 : -1;
}

/* rsqrt: y = x^-1/2, dy/dx = -1/2 y^3 */
static int rsqrt_backward(ddpl_node *n, ddpl_tensor *grad, ddpl_tensor **gi)
{
    ddpl_tensor *y = SAVED(n, 1);
    if (!y) return -1;
    ddpl_tensor *y2 = ddpl_mul(y, y);
    ddpl_tensor *y3 = y2 ? ddpl_mul(y2, y) : NULL;
    ddpl_tensor_release(y2);
    return grad_times(grad, scaled(y3, -0.5), gi);
}

/* abs: g * sign(x) (0 at 0, as PyTorch) */
static int abs_backward(ddpl_node *n, ddpl_tensor *grad, ddpl_tensor **gi)
{
    ddpl_tensor *x = SAVED(n, 0);
    return x ? grad_times(grad, ddpl_sign(x), gi) : -1;
}

/* sign: zero almost everywhere */
static int sign_backward(ddpl_node *n, ddpl_tensor *grad, ddpl_tensor **gi)
{
    DDPL_UNUSED(n);
    gi[0] = ddpl_zeros(grad->ndim, grad->sizes, (ddpl_dtype)grad->dtype, grad->device);
    return gi[0] ? 0 : -1;
}

static int sin_backward(ddpl_node *n, ddpl_tensor *grad, ddpl_tensor **gi)
{
    ddpl_tensor *x = SAVED(n, 0);
    return x ? grad_times(grad, ddpl_cos(x), gi) : -1;
}

static int cos_backward(ddpl_node *n, ddpl_tensor *grad, ddpl_tensor **gi)
{
    ddpl_tensor *x = SAVED(n, 0);
    return x ? grad_times(grad, scaled(ddpl_sin(x), -1.0), gi) : -1;
}

/* Fused activation backward: out <- kop(grad, saved), in the promoted dtype of the two. */
int pw_fused_backward(ddpl_op kop, ddpl_tensor *grad, ddpl_tensor *saved, const void *params,
                      ddpl_tensor **gi)
{
    if (!saved) return -1;
    ddpl_dtype dt = ddpl_promote_types((ddpl_dtype)grad->dtype, (ddpl_dtype)saved->dtype);
    kernel_input kg, ks;
    if (kin_prepare(&kg, grad, dt, saved->device, saved->ndim, saved->sizes) < 0) return -1;
    if (kin_prepare(&ks, saved, dt, saved->device, saved->ndim, saved->sizes) < 0) {
        kin_release(&kg);
        return -1;
    }
    ddpl_tensor *out = ddpl_tensor_new(saved->ndim, saved->sizes, dt, saved->device);
    ddpl_tensor *ins[2] = {&kg.hdr, &ks.hdr};
    if (out && ddpl_run_kernel(kop, saved->device, &out, ins, params) < 0) {
        ddpl_tensor_release(out);
        out = NULL;
    }
    kin_release(&kg);
    kin_release(&ks);
    gi[0] = out;
    return out ? 0 : -1;
}

/* The fused kernel, or under create_graph (when the result must record its history) the same
 * gradient written with ops (activation_grad.c). */
static int fused_backward(ddpl_op kop, ddpl_tensor *grad, ddpl_tensor *saved, const void *params,
                          ddpl_tensor **gi)
{
    if (!saved) return -1;
    ddpl_tensor *operands[2] = {grad, saved};
    if (ddpl_grad_needed(2, operands))
        return pw_activation_grad_recorded(kop, grad, saved, params, gi);
    return pw_fused_backward(kop, grad, saved, params, gi);
}

static int tanh_backward(ddpl_node *n, ddpl_tensor *grad, ddpl_tensor **gi)
{
    return fused_backward(DDPL_OP_TANH_BACKWARD, grad, SAVED(n, 1), NULL, gi);
}

static int sigmoid_backward(ddpl_node *n, ddpl_tensor *grad, ddpl_tensor **gi)
{
    return fused_backward(DDPL_OP_SIGMOID_BACKWARD, grad, SAVED(n, 1), NULL, gi);
}

static int relu_backward(ddpl_node *n, ddpl_tensor *grad, ddpl_tensor **gi)
{
    return fused_backward(DDPL_OP_RELU_BACKWARD, grad, SAVED(n, 1), NULL, gi);
}

static int silu_backward(ddpl_node *n, ddpl_tensor *grad, ddpl_tensor **gi)
{
    return fused_backward(DDPL_OP_SILU_BACKWARD, grad, SAVED(n, 0), NULL, gi);
}

static int gelu_backward(ddpl_node *n, ddpl_tensor *grad, ddpl_tensor **gi)
{
    return fused_backward(DDPL_OP_GELU_BACKWARD, grad, SAVED(n, 0),
                          DDPL_NODE_CTX(n, ddpl_gelu_params), gi);
}

/* ---- the ops ---- */
ddpl_tensor *ddpl_neg(ddpl_tensor *x)
{
    if (x->dtype == DDPL_BOOL)
        return ddpl_error("neg: negation of a bool tensor is not supported; use logical_not"), NULL;
    return pw_unary_recorded(DDPL_OP_NEG, x, (ddpl_dtype)x->dtype, NULL, "NegBackward0",
                             neg_backward, 0, NULL, 0);
}

ddpl_tensor *ddpl_exp(ddpl_tensor *x)
{
    return pw_unary_recorded(DDPL_OP_EXP, x, float_dtype(x), NULL, "ExpBackward0", exp_backward,
                             PW_SAVE_OUTPUT, NULL, 0);
}

ddpl_tensor *ddpl_log(ddpl_tensor *x)
{
    return pw_unary_recorded(DDPL_OP_LOG, x, float_dtype(x), NULL, "LogBackward0", log_backward,
                             PW_SAVE_INPUT, NULL, 0);
}

ddpl_tensor *ddpl_sqrt(ddpl_tensor *x)
{
    return pw_unary_recorded(DDPL_OP_SQRT, x, float_dtype(x), NULL, "SqrtBackward0", sqrt_backward,
                             PW_SAVE_OUTPUT, NULL, 0);
}

ddpl_tensor *ddpl_rsqrt(ddpl_tensor *x)
{
    return pw_unary_recorded(DDPL_OP_RSQRT, x, float_dtype(x), NULL, "RsqrtBackward0",
                             rsqrt_backward, PW_SAVE_OUTPUT, NULL, 0);
}

ddpl_tensor *ddpl_abs(ddpl_tensor *x)
{
    if (refuse_bool("abs", x) < 0) return NULL;
    return pw_unary_recorded(DDPL_OP_ABS, x, (ddpl_dtype)x->dtype, NULL, "AbsBackward0",
                             abs_backward, PW_SAVE_INPUT, NULL, 0);
}

ddpl_tensor *ddpl_sign(ddpl_tensor *x)
{
    return pw_unary_recorded(DDPL_OP_SIGN, x, (ddpl_dtype)x->dtype, NULL, "SignBackward0",
                             sign_backward, 0, NULL, 0);
}

ddpl_tensor *ddpl_sin(ddpl_tensor *x)
{
    return pw_unary_recorded(DDPL_OP_SIN, x, float_dtype(x), NULL, "SinBackward0", sin_backward,
                             PW_SAVE_INPUT, NULL, 0);
}

ddpl_tensor *ddpl_cos(ddpl_tensor *x)
{
    return pw_unary_recorded(DDPL_OP_COS, x, float_dtype(x), NULL, "CosBackward0", cos_backward,
                             PW_SAVE_INPUT, NULL, 0);
}

ddpl_tensor *ddpl_tanh(ddpl_tensor *x)
{
    return pw_unary_recorded(DDPL_OP_TANH, x, float_dtype(x), NULL, "TanhBackward0", tanh_backward,
                             PW_SAVE_OUTPUT, NULL, 0);
}

ddpl_tensor *ddpl_sigmoid(ddpl_tensor *x)
{
    return pw_unary_recorded(DDPL_OP_SIGMOID, x, float_dtype(x), NULL, "SigmoidBackward0",
                             sigmoid_backward, PW_SAVE_OUTPUT, NULL, 0);
}

ddpl_tensor *ddpl_relu(ddpl_tensor *x)
{
    if (refuse_bool("relu", x) < 0) return NULL;
    return pw_unary_recorded(DDPL_OP_RELU, x, (ddpl_dtype)x->dtype, NULL, "ReluBackward0",
                             relu_backward, PW_SAVE_OUTPUT, NULL, 0);
}

ddpl_tensor *ddpl_gelu(ddpl_tensor *x, bool tanh_approximation)
{
    ddpl_gelu_params p = {tanh_approximation};
    return pw_unary_recorded(DDPL_OP_GELU, x, float_dtype(x), &p, "GeluBackward0", gelu_backward,
                             PW_SAVE_INPUT, &p, sizeof p);
}

ddpl_tensor *ddpl_silu(ddpl_tensor *x)
{
    return pw_unary_recorded(DDPL_OP_SILU, x, float_dtype(x), NULL, "SiluBackward0", silu_backward,
                             PW_SAVE_INPUT, NULL, 0);
}

/* ---- clamp ---- */

/* The result dtype of clamping x to the given bounds: the bounds take part in promotion as
 * numbers, integral ones keeping an integer tensor integral (clamp(int64, 0, 10) is int64,
 * clamp(int64, 0.5, 1) float32). -1 with an error when no bound is given. */
int pw_clamp_dtype(const char *op, ddpl_tensor *x, const ddpl_clamp_params *p, ddpl_dtype *dt)
{
    if (!p->has_min && !p->has_max)
        return ddpl_error("%s: at least one of min and max must be given", op);
    if ((p->has_min && isnan(p->min)) || (p->has_max && isnan(p->max)))
        return ddpl_error("%s: bounds must not be NaN", op);
    ddpl_tensor *ts[3] = {x, NULL, NULL};
    if (p->has_min) ts[1] = pw_wrapped(p->min);
    if (p->has_max) ts[2] = pw_wrapped(p->max);
    *dt = ddpl_result_type(3, ts);
    ddpl_tensor_release(ts[1]);
    ddpl_tensor_release(ts[2]);
    return 0;
}

/* clamp: the gradient passes where min <= x <= max (saved: x; ctx: the bounds) */
static int clamp_backward(ddpl_node *n, ddpl_tensor *grad, ddpl_tensor **gi)
{
    const ddpl_clamp_params *p = DDPL_NODE_CTX(n, ddpl_clamp_params);
    ddpl_tensor *x = SAVED(n, 0);
    if (!x) return -1;
    ddpl_tensor *g = ddpl_tensor_retain(grad);
    for (int side = 0; side < 2 && g; side++) {
        if (!(side == 0 ? p->has_min : p->has_max)) continue;
        ddpl_tensor *bound = ddpl_wrapped_number(side == 0 ? p->min : p->max, false);
        /* outside: x < min, or x > max */
        ddpl_tensor *outside = side == 0 ? ddpl_lt(x, bound) : ddpl_gt(x, bound);
        ddpl_tensor *masked = outside ? ddpl_masked_fill(g, outside, 0.0) : NULL;
        ddpl_tensor_release(bound);
        ddpl_tensor_release(outside);
        ddpl_tensor_release(g);
        g = masked;
    }
    gi[0] = g;
    return g ? 0 : -1;
}

ddpl_tensor *ddpl_clamp(ddpl_tensor *x, bool has_min, double min, bool has_max, double max)
{
    ddpl_clamp_params p = {has_min, has_max, min, max};
    ddpl_dtype dt = (ddpl_dtype)x->dtype;
    if (pw_clamp_dtype("clamp", x, &p, &dt) < 0) return NULL;
    return pw_unary_recorded(DDPL_OP_CLAMP, x, dt, &p, "ClampBackward0", clamp_backward,
                             PW_SAVE_INPUT, &p, sizeof p);
}
