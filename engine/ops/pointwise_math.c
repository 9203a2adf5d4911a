/* ops/pointwise_math.c: the one-argument functions of kernel_abi/math_fns.def (rounding, the
 * rest of libm) with their gradients, and the compositions isnan/isinf/isfinite, nan_to_num,
 * square, logical_not and bitwise_not.
 * defines: ddpl_floor, ddpl_ceil, ddpl_round, ddpl_trunc, ddpl_frac, ddpl_reciprocal, ddpl_exp2,
 *          ddpl_expm1, ddpl_log2, ddpl_log10, ddpl_log1p, ddpl_tan, ddpl_asin, ddpl_acos,
 *          ddpl_atan, ddpl_sinh, ddpl_cosh, ddpl_asinh, ddpl_acosh, ddpl_atanh, ddpl_erf,
 *          ddpl_erfc, ddpl_erfinv, ddpl_square, ddpl_isnan, ddpl_isinf, ddpl_isfinite,
 *          ddpl_nan_to_num, ddpl_logical_not, ddpl_bitwise_not.
 *
 * Dtypes as PyTorch: floor, ceil, round and trunc return integer tensors unchanged (a copy);
 * frac refuses them; every other function computes integer and bool inputs in float32. */
#include <math.h>

#include "pointwise.h"

#define LN2  0.69314718055994530942
#define LN10 2.30258509299404568402

/* PyTorch's grad_fn names, by function id */
static const char *const node_names[DDPL_UFN_COUNT] = {
    [DDPL_UFN_FLOOR] = "FloorBackward0",   [DDPL_UFN_CEIL] = "CeilBackward0",
    [DDPL_UFN_ROUND] = "RoundBackward0",   [DDPL_UFN_TRUNC] = "TruncBackward0",
    [DDPL_UFN_FRAC] = "FracBackward0",     [DDPL_UFN_RECIPROCAL] = "ReciprocalBackward0",
    [DDPL_UFN_EXP2] = "Exp2Backward0",     [DDPL_UFN_EXPM1] = "Expm1Backward0",
    [DDPL_UFN_LOG2] = "Log2Backward0",     [DDPL_UFN_LOG10] = "Log10Backward0",
    [DDPL_UFN_LOG1P] = "Log1PBackward0",   [DDPL_UFN_TAN] = "TanBackward0",
    [DDPL_UFN_ASIN] = "AsinBackward0",     [DDPL_UFN_ACOS] = "AcosBackward0",
    [DDPL_UFN_ATAN] = "AtanBackward0",     [DDPL_UFN_SINH] = "SinhBackward0",
    [DDPL_UFN_COSH] = "CoshBackward0",     [DDPL_UFN_ASINH] = "AsinhBackward0",
    [DDPL_UFN_ACOSH] = "AcoshBackward0",   [DDPL_UFN_ATANH] = "AtanhBackward0",
    [DDPL_UFN_ERF] = "ErfBackward0",       [DDPL_UFN_ERFC] = "ErfcBackward0",
    [DDPL_UFN_ERFINV] = "ErfinvBackward0",
};

typedef struct {
    int fn;
} ufn_ctx;

#define T(e)       OP_T(&k, e)
#define U(f, a)    OP_U(&k, f, a)
#define B(f, a, b) OP_B(&k, f, a, b)
#define NUM(v)     OP_NUM(&k, v)

/* The gradient of fn from the saved input x (slot 0) or output y (slot 1), as PyTorch's
 * derivatives.yaml: grad times a factor, or grad over a denominator. */
static int ufn_backward(ddpl_node *n, ddpl_tensor *grad, ddpl_tensor **gi)
{
    int fn = DDPL_NODE_CTX(n, ufn_ctx)->fn;
    if (fn == DDPL_UFN_FRAC) { /* x - trunc(x) */
        gi[0] = ddpl_tensor_retain(grad);
        return 0;
    }
    if (fn == DDPL_UFN_FLOOR || fn == DDPL_UFN_CEIL || fn == DDPL_UFN_ROUND ||
        fn == DDPL_UFN_TRUNC) { /* piecewise constant */
        gi[0] = ddpl_zeros(grad->ndim, grad->sizes, (ddpl_dtype)grad->dtype, grad->device);
        return gi[0] ? 0 : -1;
    }
    ddpl_tensor *x = ddpl_node_saved(n, 0), *y = ddpl_node_saved(n, 1);
    if (!x && !y) return -1;
    op_temps k = {0};
    ddpl_tensor *factor = NULL, *denom = NULL;
    switch (fn) {
    case DDPL_UFN_RECIPROCAL: /* -1/x^2 = -y^2 */
        factor = U(ddpl_neg, B(ddpl_mul, y, y));
        break;
    case DDPL_UFN_EXP2:
        factor = B(ddpl_mul, y, NUM(LN2));
        break;
    case DDPL_UFN_EXPM1: /* e^x = y + 1 */
        factor = B(ddpl_add, y, NUM(1));
        break;
    case DDPL_UFN_LOG2:
        denom = B(ddpl_mul, x, NUM(LN2));
        break;
    case DDPL_UFN_LOG10:
        denom = B(ddpl_mul, x, NUM(LN10));
        break;
    case DDPL_UFN_LOG1P:
        denom = B(ddpl_add, x, NUM(1));
        break;
    case DDPL_UFN_TAN: /* 1 + tan^2 */
        factor = B(ddpl_add, B(ddpl_mul, y, y), NUM(1));
        break;
    case DDPL_UFN_ASIN: /* sqrt(1 - x^2), negated for acos */
    case DDPL_UFN_ACOS:
        denom = U(ddpl_sqrt, B(ddpl_sub, NUM(1), B(ddpl_mul, x, x)));
        if (fn == DDPL_UFN_ACOS) denom = U(ddpl_neg, denom);
        break;
    case DDPL_UFN_ATAN:
        denom = B(ddpl_add, B(ddpl_mul, x, x), NUM(1));
        break;
    case DDPL_UFN_SINH:
        factor = U(ddpl_cosh, x);
        break;
    case DDPL_UFN_COSH:
        factor = U(ddpl_sinh, x);
        break;
    case DDPL_UFN_ASINH:
        denom = U(ddpl_sqrt, B(ddpl_add, B(ddpl_mul, x, x), NUM(1)));
        break;
    case DDPL_UFN_ACOSH: /* (x^2 - 1)^-1/2, as PyTorch writes it */
        factor = U(ddpl_rsqrt, B(ddpl_sub, B(ddpl_mul, x, x), NUM(1)));
        break;
    case DDPL_UFN_ATANH:
        denom = B(ddpl_sub, NUM(1), B(ddpl_mul, x, x));
        break;
    case DDPL_UFN_ERF: /* +-2/sqrt(pi) e^-x^2 */
    case DDPL_UFN_ERFC:
        factor = B(ddpl_mul, U(ddpl_exp, U(ddpl_neg, B(ddpl_mul, x, x))),
                   NUM(fn == DDPL_UFN_ERF ? M_2_SQRTPI : -M_2_SQRTPI));
        break;
    case DDPL_UFN_ERFINV: /* sqrt(pi)/2 e^y^2 */
        factor = B(ddpl_mul, U(ddpl_exp, B(ddpl_mul, y, y)), NUM(1 / M_2_SQRTPI));
        break;
    default:
        op_temps_release(&k);
        return ddpl_error("%s: no gradient formula", ddpl_unary_fn_name(fn));
    }
    gi[0] = k.failed ? NULL : factor ? ddpl_mul(grad, factor) : ddpl_div(grad, denom);
    op_temps_release(&k);
    return gi[0] ? 0 : -1;
}

/* which saved tensor each gradient formula reads */
static int saved_for(int fn)
{
    switch (fn) {
    case DDPL_UFN_FLOOR:
    case DDPL_UFN_CEIL:
    case DDPL_UFN_ROUND:
    case DDPL_UFN_TRUNC:
    case DDPL_UFN_FRAC:
        return 0;
    case DDPL_UFN_RECIPROCAL:
    case DDPL_UFN_EXP2:
    case DDPL_UFN_EXPM1:
    case DDPL_UFN_TAN:
    case DDPL_UFN_ERFINV:
        return PW_SAVE_OUTPUT;
    default:
        return PW_SAVE_INPUT;
    }
}

static ddpl_tensor *unary_fn(int fn, ddpl_tensor *x, double p0, double p1)
{
    ddpl_dtype dt = (ddpl_dtype)x->dtype;
    bool rounding =
        fn == DDPL_UFN_FLOOR || fn == DDPL_UFN_CEIL || fn == DDPL_UFN_ROUND || fn == DDPL_UFN_TRUNC;
    if (!ddpl_dtype_is_floating(dt)) {
        const char *name = ddpl_unary_fn_name(fn);
        if (dt == DDPL_BOOL && (rounding || fn == DDPL_UFN_FRAC))
            return ddpl_error("%s: not implemented for bool tensors", name), NULL;
        if (fn == DDPL_UFN_FRAC || (fn == DDPL_UFN_ROUND && p1 != 0))
            return ddpl_error("%s: not implemented for integer dtype %s%s", name,
                              ddpl_dtype_name(dt), fn == DDPL_UFN_ROUND ? " with decimals" : ""),
                   NULL;
        if (rounding) return ddpl_clone(x); /* integers are already whole */
        dt = ddpl_default_float_dtype();
    }
    ddpl_unary_fn_params p = {fn, p0, p1};
    ufn_ctx ctx = {fn};
    return pw_unary_recorded(DDPL_OP_UNARY_FN, x, dt, &p, node_names[fn], ufn_backward,
                             saved_for(fn), &ctx, sizeof ctx);
}

#define UNARY_FN_OP(name, ID)                                                                      \
    ddpl_tensor *ddpl_##name(ddpl_tensor *x)                                                       \
    {                                                                                              \
        return unary_fn(DDPL_UFN_##ID, x, 0, 0);                                                   \
    }
UNARY_FN_OP(floor, FLOOR)
UNARY_FN_OP(ceil, CEIL)
UNARY_FN_OP(trunc, TRUNC)
UNARY_FN_OP(frac, FRAC)
UNARY_FN_OP(reciprocal, RECIPROCAL)
UNARY_FN_OP(exp2, EXP2)
UNARY_FN_OP(expm1, EXPM1)
UNARY_FN_OP(log2, LOG2)
UNARY_FN_OP(log10, LOG10)
UNARY_FN_OP(log1p, LOG1P)
UNARY_FN_OP(tan, TAN)
UNARY_FN_OP(asin, ASIN)
UNARY_FN_OP(acos, ACOS)
UNARY_FN_OP(atan, ATAN)
UNARY_FN_OP(sinh, SINH)
UNARY_FN_OP(cosh, COSH)
UNARY_FN_OP(asinh, ASINH)
UNARY_FN_OP(acosh, ACOSH)
UNARY_FN_OP(atanh, ATANH)
UNARY_FN_OP(erf, ERF)
UNARY_FN_OP(erfc, ERFC)
UNARY_FN_OP(erfinv, ERFINV)

/* round half to even; decimals as PyTorch: scale by 10^decimals, round, scale back */
ddpl_tensor *ddpl_round(ddpl_tensor *x, int decimals)
{
    if (decimals < -308 || decimals > 308)
        return ddpl_error("round: decimals must be in [-308, 308], got %d", decimals), NULL;
    double scale = pow(10.0, decimals < 0 ? -decimals : decimals);
    return unary_fn(DDPL_UFN_ROUND, x, scale, decimals > 0 ? 1 : decimals < 0 ? -1 : 0);
}

/* ---- compositions ---- */

/* x * x, with pow(x, 2)'s dtype (integers stay integers) */
ddpl_tensor *ddpl_square(ddpl_tensor *x)
{
    if (x->dtype == DDPL_BOOL) return ddpl_error("square: not supported for bool tensors"), NULL;
    return ddpl_mul(x, x);
}

/* NaN is the one value unequal to itself */
ddpl_tensor *ddpl_isnan(ddpl_tensor *x)
{
    return ddpl_ne(x, x);
}

/* |x| == inf; integers are never infinite */
ddpl_tensor *ddpl_isinf(ddpl_tensor *x)
{
    if (!ddpl_dtype_is_floating((ddpl_dtype)x->dtype)) return ddpl_ne(x, x);
    op_temps k = {0};
    return op_temps_result(&k, B(ddpl_eq, U(ddpl_abs, x), NUM(INFINITY)));
}

/* |x| < inf is false for NaN too; integers are always finite */
ddpl_tensor *ddpl_isfinite(ddpl_tensor *x)
{
    if (!ddpl_dtype_is_floating((ddpl_dtype)x->dtype)) return ddpl_eq(x, x);
    op_temps k = {0};
    return op_temps_result(&k, B(ddpl_lt, U(ddpl_abs, x), NUM(INFINITY)));
}

/* The largest finite value of a floating dtype (nan_to_num's default for +inf). */
static double dtype_max(ddpl_dtype dt)
{
    switch (dt) {
    case DDPL_FLOAT16:
        return 65504.0;
    case DDPL_BFLOAT16:
        return 3.3895313892515355e38;
    case DDPL_FLOAT32:
        return 3.4028234663852886e38;
    default:
        return 1.7976931348623157e308;
    }
}

/* x with NaN, +inf and -inf replaced (defaults: 0 and the dtype's largest and smallest finite
 * values); three masked fills, so the gradient is zero where a value was replaced, as in
 * PyTorch. Integer tensors come back as a copy. */
ddpl_tensor *ddpl_nan_to_num(ddpl_tensor *x, double nan, const double *posinf, const double *neginf)
{
    ddpl_dtype dt = (ddpl_dtype)x->dtype;
    if (!ddpl_dtype_is_floating(dt)) return ddpl_clone(x);
    double big = dtype_max(dt);
    double fills[3] = {nan, posinf ? *posinf : big, neginf ? *neginf : -big};
    op_temps k = {0};
    ddpl_tensor *masks[3] = {U(ddpl_isnan, x), B(ddpl_eq, x, NUM(INFINITY)),
                             B(ddpl_eq, x, NUM(-INFINITY))};
    ddpl_tensor *r = x;
    for (int i = 0; i < 3 && !k.failed; i++) r = T(ddpl_masked_fill(r, masks[i], fills[i]));
    return op_temps_result(&k, r);
}

/* x == 0, as bool */
ddpl_tensor *ddpl_logical_not(ddpl_tensor *x)
{
    op_temps k = {0};
    return op_temps_result(&k, B(ddpl_eq, x, T(ddpl_wrapped_number(0, true))));
}

/* ~x: logical not for bool; for integers -x - 1 (two's complement, wrapping as the ops do) */
ddpl_tensor *ddpl_bitwise_not(ddpl_tensor *x)
{
    ddpl_dtype dt = (ddpl_dtype)x->dtype;
    if (dt == DDPL_BOOL) return ddpl_logical_not(x);
    if (!ddpl_dtype_is_integral(dt))
        return ddpl_error("bitwise_not: expected an integer or bool tensor, got %s",
                          ddpl_dtype_name(dt)),
               NULL;
    ddpl_tensor *one = ddpl_wrapped_number(1, true);
    ddpl_tensor *neg = one ? ddpl_neg(x) : NULL;
    ddpl_tensor *r = neg ? ddpl_sub(neg, one) : NULL;
    ddpl_tensor_release(neg);
    ddpl_tensor_release(one);
    return r;
}
