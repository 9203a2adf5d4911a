/* ops/pointwise_math_binary.c: the two-argument functions of kernel_abi/math_fns.def with
 * broadcasting, PyTorch's dtype rules and gradients, div with a rounding mode, and the logical
 * functions.
 * defines: ddpl_remainder, ddpl_fmod, ddpl_floor_divide, ddpl_div_rounded, ddpl_atan2,
 *          ddpl_hypot, ddpl_fmax, ddpl_fmin, ddpl_logaddexp, ddpl_logaddexp2, ddpl_xlogy,
 *          ddpl_copysign, ddpl_bitwise_and, ddpl_bitwise_or, ddpl_bitwise_xor,
 *          ddpl_bitwise_left_shift, ddpl_bitwise_right_shift, ddpl_logical_and,
 *          ddpl_logical_or, ddpl_logical_xor.
 *
 * Dtypes: remainder, fmod, the rounded divisions, fmax and fmin keep the promoted dtype
 * (integers stay integers); atan2, hypot, logaddexp(2), xlogy and copysign compute integers in
 * float32; the bitwise functions take integers and bool only, the shifts integers only. An
 * integer division by zero is an error on the CPU, as PyTorch's ZeroDivisionError; on CUDA,
 * where checking would cost a device synchronisation, it gives 0 (PyTorch gives garbage). */
#include <string.h>

#include "pointwise.h"

#define T(e)       OP_T(&k, e)
#define U(f, a)    OP_U(&k, f, a)
#define B(f, a, b) OP_B(&k, f, a, b)
#define NUM(v)     OP_NUM(&k, v)

/* the result dtype of fn on a and b, or -1 with an error naming op */
static int fn_dtype(int fn, ddpl_tensor *a, ddpl_tensor *b, ddpl_dtype *dt)
{
    const char *op = ddpl_binary_fn_name(fn);
    *dt = ddpl_result_type(2, OP_INPUTS(a, b));
    switch (fn) {
    case DDPL_BFN_ATAN2:
    case DDPL_BFN_HYPOT:
    case DDPL_BFN_LOGADDEXP:
    case DDPL_BFN_LOGADDEXP2:
    case DDPL_BFN_XLOGY:
    case DDPL_BFN_COPYSIGN:
        if (!ddpl_dtype_is_floating(*dt)) *dt = ddpl_default_float_dtype();
        return 0;
    case DDPL_BFN_BITWISE_AND:
    case DDPL_BFN_BITWISE_OR:
    case DDPL_BFN_BITWISE_XOR:
        if (ddpl_dtype_is_floating(*dt))
            return ddpl_error("%s: expected integer or bool tensors, got %s and %s", op,
                              ddpl_dtype_name((ddpl_dtype)a->dtype),
                              ddpl_dtype_name((ddpl_dtype)b->dtype));
        return 0;
    default: /* arithmetic on numbers: no bool, and the shifts no floats */
        if (*dt == DDPL_BOOL || ((fn == DDPL_BFN_LEFT_SHIFT || fn == DDPL_BFN_RIGHT_SHIFT) &&
                                 ddpl_dtype_is_floating(*dt)))
            return ddpl_error("%s: not implemented for %s and %s tensors", op,
                              ddpl_dtype_name((ddpl_dtype)a->dtype),
                              ddpl_dtype_name((ddpl_dtype)b->dtype));
        return 0;
    }
}

/* An integer divisor must not be zero anywhere (checked on the CPU only: see the top). */
static int check_divisor(const char *op, ddpl_tensor *b, ddpl_dtype dt)
{
    if (ddpl_dtype_is_floating(dt) || b->device.type != DDPL_CPU) return 0;
    op_temps k = {0};
    ddpl_tensor *zeros = U(ddpl_sum, B(ddpl_eq, b, T(ddpl_wrapped_number(0, true))));
    int64_t n = 0;
    int rc = zeros && ddpl_tensor_item_int64(zeros, &n) == 0 ? 0 : -1;
    op_temps_release(&k);
    if (rc == 0 && n > 0) return ddpl_error("%s: integer division by zero (ZeroDivisionError)", op);
    return rc;
}

/* out = fn(a, b) over the broadcast of a and b in dtype dt; no autograd */
static ddpl_tensor *fn_forward(int fn, ddpl_tensor *a, ddpl_tensor *b, ddpl_dtype dt)
{
    ddpl_binary_fn_params p = {fn};
    return pw_binary_forward(ddpl_binary_fn_name(fn), DDPL_OP_BINARY_FN, a, b, dt, dt, &p);
}

/* ---- gradients (PyTorch's derivatives.yaml), at the output's shape, then summed down ---- */
typedef struct {
    int fn;
} bfn_ctx;

static int bfn_backward(ddpl_node *n, ddpl_tensor *grad, ddpl_tensor **gi)
{
    int fn = DDPL_NODE_CTX(n, bfn_ctx)->fn;
    ddpl_tensor *a = ddpl_node_saved(n, 0), *b = ddpl_node_saved(n, 1),
                *out = ddpl_node_saved(n, 2);
    if (!a || !b || !out) return -1;
    op_temps k = {0};
    ddpl_tensor *g[2] = {NULL, NULL};
    switch (fn) {
    case DDPL_BFN_REMAINDER: /* a - b floor(a / b): da = g, db = -g floor(a / b) */
    case DDPL_BFN_FMOD:      /* a - b trunc(a / b) */
        g[0] = grad;
        g[1] = U(ddpl_neg,
                 B(ddpl_mul, grad,
                   T(fn_forward(fn == DDPL_BFN_FMOD ? DDPL_BFN_TRUNC_DIVIDE : DDPL_BFN_FLOOR_DIVIDE,
                                a, b, (ddpl_dtype)out->dtype))));
        break;
    case DDPL_BFN_FLOOR_DIVIDE: /* div with a rounding mode: piecewise constant */
    case DDPL_BFN_TRUNC_DIVIDE:
        g[0] = g[1] = T(ddpl_zeros(grad->ndim, grad->sizes, (ddpl_dtype)grad->dtype, grad->device));
        break;
    case DDPL_BFN_ATAN2: { /* (b, -a) / (a^2 + b^2) */
        ddpl_tensor *gr = B(ddpl_div, grad, B(ddpl_add, B(ddpl_mul, a, a), B(ddpl_mul, b, b)));
        g[0] = B(ddpl_mul, gr, b);
        g[1] = U(ddpl_neg, B(ddpl_mul, gr, a));
        break;
    }
    case DDPL_BFN_HYPOT: { /* (a, b) / out */
        ddpl_tensor *go = B(ddpl_div, grad, out);
        g[0] = B(ddpl_mul, go, a);
        g[1] = B(ddpl_mul, go, b);
        break;
    }
    case DDPL_BFN_FMAX: /* all of g to the side fmax took: a where a >= b or b is NaN */
    case DDPL_BFN_FMIN: {
        ddpl_tensor *wins = T(fn == DDPL_BFN_FMAX ? ddpl_ge(a, b) : ddpl_le(a, b));
        ddpl_tensor *a_taken = B(ddpl_logical_or, wins, B(ddpl_ne, b, b));
        ddpl_tensor *zero = T(ddpl_wrapped_number(0, true));
        if (a_taken && zero) {
            g[0] = T(ddpl_where(a_taken, grad, zero));
            g[1] = T(ddpl_where(a_taken, zero, grad));
        }
        break;
    }
    case DDPL_BFN_LOGADDEXP: /* g / (1 + e^(b - a)), g / (1 + e^(a - b)) */
    case DDPL_BFN_LOGADDEXP2: {
        ddpl_tensor *(*ex)(ddpl_tensor *) = fn == DDPL_BFN_LOGADDEXP ? ddpl_exp : ddpl_exp2;
        g[0] = B(ddpl_div, grad, B(ddpl_add, U(ex, B(ddpl_sub, b, a)), NUM(1)));
        g[1] = B(ddpl_div, grad, B(ddpl_add, U(ex, B(ddpl_sub, a, b)), NUM(1)));
        break;
    }
    case DDPL_BFN_XLOGY: /* g xlogy(a != 0, b), g a / b */
        g[0] = B(ddpl_mul, grad, B(ddpl_xlogy, B(ddpl_ne, a, T(ddpl_wrapped_number(0, true))), b));
        g[1] = B(ddpl_div, B(ddpl_mul, grad, a), b);
        break;
    case DDPL_BFN_COPYSIGN: { /* g out / a (0 where a == 0); b gets none */
        ddpl_tensor *zero = T(ddpl_wrapped_number(0, true));
        ddpl_tensor *ratio = B(ddpl_div, out, a), *at_zero = B(ddpl_eq, a, zero);
        g[0] = B(ddpl_mul, grad, at_zero ? T(ddpl_where(at_zero, zero, ratio)) : NULL);
        g[1] = T(ddpl_zeros(grad->ndim, grad->sizes, (ddpl_dtype)grad->dtype, grad->device));
        break;
    }
    default:
        op_temps_release(&k);
        return ddpl_error("%s: not differentiable", ddpl_binary_fn_name(fn));
    }
    int rc = k.failed ? -1 : 0;
    for (int i = 0; rc == 0 && i < 2; i++)
        if (ddpl_node_needs_grad(n, i) &&
            !(gi[i] = pw_grad_to_input(n, i, ddpl_tensor_retain(g[i]))))
            rc = -1;
    op_temps_release(&k);
    return rc;
}

static const char *node_name(int fn)
{
    switch (fn) {
    case DDPL_BFN_REMAINDER:
        return "RemainderBackward0";
    case DDPL_BFN_FMOD:
        return "FmodBackward0";
    case DDPL_BFN_ATAN2:
        return "Atan2Backward0";
    case DDPL_BFN_HYPOT:
        return "HypotBackward0";
    case DDPL_BFN_FMAX:
        return "FmaxBackward0";
    case DDPL_BFN_FMIN:
        return "FminBackward0";
    case DDPL_BFN_LOGADDEXP:
        return "LogaddexpBackward0";
    case DDPL_BFN_LOGADDEXP2:
        return "Logaddexp2Backward0";
    case DDPL_BFN_XLOGY:
        return "XlogyBackward0";
    case DDPL_BFN_COPYSIGN:
        return "CopysignBackward0";
    case DDPL_BFN_FLOOR_DIVIDE: /* only through div(rounding_mode=): PyTorch's div.Tensor_mode */
    case DDPL_BFN_TRUNC_DIVIDE:
        return "DivBackward2";
    default:
        return NULL; /* integer-only functions: nothing to differentiate */
    }
}

/* fn(a, b) with its node; floor_divide itself is not differentiable (recorded=false) */
static ddpl_tensor *binary_fn(int fn, ddpl_tensor *a, ddpl_tensor *b, bool recorded)
{
    ddpl_dtype dt;
    if (fn_dtype(fn, a, b, &dt) < 0) return NULL;
    bool divides = fn == DDPL_BFN_REMAINDER || fn == DDPL_BFN_FMOD || fn == DDPL_BFN_FLOOR_DIVIDE ||
                   fn == DDPL_BFN_TRUNC_DIVIDE;
    if (divides && check_divisor(ddpl_binary_fn_name(fn), b, dt) < 0) return NULL;
    ddpl_tensor *out = fn_forward(fn, a, b, dt);
    ddpl_tensor *ins[2] = {a, b};
    const char *name = node_name(fn);
    if (out && recorded && name && ddpl_grad_needed(2, ins)) {
        ddpl_node *n = ddpl_node_new(name, bfn_backward, 2, ins);
        ddpl_node_save(n, a);
        ddpl_node_save(n, b);
        ddpl_node_save_output(n, out);
        DDPL_NODE_CTX(n, bfn_ctx)->fn = fn;
        ddpl_set_history(out, n);
    }
    return out;
}

#define BINARY_FN_OP(name, ID)                                                                     \
    ddpl_tensor *ddpl_##name(ddpl_tensor *a, ddpl_tensor *b)                                       \
    {                                                                                              \
        return binary_fn(DDPL_BFN_##ID, a, b, true);                                               \
    }
BINARY_FN_OP(remainder, REMAINDER)
BINARY_FN_OP(fmod, FMOD)
BINARY_FN_OP(atan2, ATAN2)
BINARY_FN_OP(hypot, HYPOT)
BINARY_FN_OP(fmax, FMAX)
BINARY_FN_OP(fmin, FMIN)
BINARY_FN_OP(logaddexp, LOGADDEXP)
BINARY_FN_OP(logaddexp2, LOGADDEXP2)
BINARY_FN_OP(xlogy, XLOGY)
BINARY_FN_OP(copysign, COPYSIGN)
BINARY_FN_OP(bitwise_and, BITWISE_AND)
BINARY_FN_OP(bitwise_or, BITWISE_OR)
BINARY_FN_OP(bitwise_xor, BITWISE_XOR)
BINARY_FN_OP(bitwise_left_shift, LEFT_SHIFT)
BINARY_FN_OP(bitwise_right_shift, RIGHT_SHIFT)

/* Backward of floor_divide: PyTorch 1.13 defines none (its grad_fn is "NotImplemented"), so
 * a backward that reaches it fails rather than treating the result as a constant. */
static int floor_divide_backward(ddpl_node *n, ddpl_tensor *grad, ddpl_tensor **gi)
{
    DDPL_UNUSED(n);
    DDPL_UNUSED(grad);
    DDPL_UNUSED(gi);
    return ddpl_error("floor_divide: the derivative for floor_divide is not implemented (as in "
                      "PyTorch); div(a, b, {rounding_mode='floor'}) computes the same values with "
                      "a zero gradient");
}

/* Python's a // b. Not differentiable, as in PyTorch: a floating result of operands that
 * require grad requires grad too, and backward through it is an error. */
ddpl_tensor *ddpl_floor_divide(ddpl_tensor *a, ddpl_tensor *b)
{
    ddpl_tensor *out = binary_fn(DDPL_BFN_FLOOR_DIVIDE, a, b, false);
    ddpl_tensor *ins[2] = {a, b};
    if (out && ddpl_dtype_is_floating((ddpl_dtype)out->dtype) && ddpl_grad_needed(2, ins))
        ddpl_set_history(out, ddpl_node_new("NotImplemented", floor_divide_backward, 2, ins));
    return out;
}

/* div(a, b, rounding_mode): NULL is true division; "floor" and "trunc" keep integer dtypes
 * and have a zero gradient, as PyTorch */
ddpl_tensor *ddpl_div_rounded(ddpl_tensor *a, ddpl_tensor *b, const char *rounding_mode)
{
    if (!rounding_mode) return ddpl_div(a, b);
    if (strcmp(rounding_mode, "floor") == 0) return binary_fn(DDPL_BFN_FLOOR_DIVIDE, a, b, true);
    if (strcmp(rounding_mode, "trunc") == 0) return binary_fn(DDPL_BFN_TRUNC_DIVIDE, a, b, true);
    return ddpl_error("div: expected rounding_mode to be nil, 'floor' or 'trunc', got '%s'",
                      rounding_mode),
           NULL;
}

/* ---- logical: nonzero is true, the result is bool ---- */
typedef ddpl_tensor *(*bool_combine)(ddpl_tensor *, ddpl_tensor *);

static ddpl_tensor *logical(ddpl_tensor *a, ddpl_tensor *b, bool_combine combine)
{
    op_temps k = {0};
    ddpl_tensor *zero = T(ddpl_wrapped_number(0, true));
    ddpl_tensor *ta = B(ddpl_ne, a, zero), *tb = B(ddpl_ne, b, zero);
    ddpl_tensor *r = k.failed ? NULL : combine(ta, tb);
    op_temps_release(&k);
    return r;
}

ddpl_tensor *ddpl_logical_and(ddpl_tensor *a, ddpl_tensor *b)
{
    return logical(a, b, ddpl_bitwise_and);
}
ddpl_tensor *ddpl_logical_or(ddpl_tensor *a, ddpl_tensor *b)
{
    return logical(a, b, ddpl_bitwise_or);
}
ddpl_tensor *ddpl_logical_xor(ddpl_tensor *a, ddpl_tensor *b)
{
    return logical(a, b, ddpl_ne);
}
