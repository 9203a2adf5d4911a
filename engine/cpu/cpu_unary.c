/* cpu/cpu_unary.c: unary pointwise CPU kernels and the fused backward kernels of activations.
 * defines: cpu_neg, cpu_exp, cpu_log, cpu_sqrt, cpu_rsqrt, cpu_abs, cpu_sign, cpu_sin, cpu_cos,
 *          cpu_tanh, cpu_sigmoid, cpu_relu, cpu_gelu, cpu_silu, cpu_clamp, cpu_relu_backward,
 *          cpu_gelu_backward, cpu_silu_backward, cpu_sigmoid_backward, cpu_tanh_backward.
 *
 * float32 uses the branch-free approximations of cpu_math.h (exp, tanh, GELU) so the loops
 * vectorise; float64 uses libm (it is the gradient-checking dtype: accuracy first). Ops that
 * keep integer dtypes (neg, abs, sign, relu, clamp) have int64 and generic integer loops; the
 * ops layer converts integer inputs of the other ops to float32 before calling. */
#include <math.h>

#include "cpu_kernels.h"
#include "cpu_loops.h"
#include "cpu_math.h"
#include "kernel_abi/kernel_params.h"

/* log, sin and cos loops vectorise through libmvec (cpu_math.h) */
CPU_VECTOR_MATH(log)
CPU_VECTOR_MATH(sin)
CPU_VECTOR_MATH(cos)

/* float/double overloads of the scalar functions below, chosen on the argument type */
#define M_EXP(a)  _Generic((a), float : cpu_expf, default : exp)(a)
#define M_LOG(a)  _Generic((a), float : logf, default : log)(a)
#define M_SQRT(a) _Generic((a), float : sqrtf, default : sqrt)(a)
#define M_FABS(a) _Generic((a), float : fabsf, default : fabs)(a)
#define M_SIN(a)  _Generic((a), float : sinf, default : sin)(a)
#define M_COS(a)  _Generic((a), float : cosf, default : cos)(a)
#define M_TANH(a) _Generic((a), float : cpu_tanhf, default : tanh)(a)

/* -1, 0 or 1; NaN and -0 give 0, as PyTorch's sign */
#define SIGN(a)    (((a) > 0) - ((a) < 0))
#define SIGMOID(a) (1 / (1 + M_EXP(-(a))))

/* GELU, exact: x Phi(x) = x/2 (1 + erf(x/sqrt2)), float32 through cpu_gelu_erff (cpu_math.h)
 * and double through erfc (accurate in the negative tail, like the float path); tanh form:
 * x/2 (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3))) */
#define GELU_K0     0.7978845608028654 /* sqrt(2/pi) */
#define GELU_K1     0.044715
#define INV_SQRT2   0.7071067811865476
#define INV_SQRT2PI 0.3989422804014327
static inline double phi_d(double x)
{
    return 0.5 * erfc(-x * INV_SQRT2);
}
static inline double gelu_erf_d(double x)
{
    return x * phi_d(x);
}
#define GELU_ERF(a) _Generic((a), float : cpu_gelu_erff, default : gelu_erf_d)(a)
#define GELU(T, a, approx)                                                                         \
    ((approx) ? (T)0.5 * (a) * (1 + M_TANH((T)GELU_K0 * ((a) + (T)GELU_K1 * (a) * (a) * (a))))     \
              : GELU_ERF(a))

/* ---- kernels with integer support: the int64 loop handles int64, the generic one the other
 * integer dtypes and float16/bfloat16 ---- */
#define UNARY_KERNEL(name, FEXPR, IEXPR, HAS_INT)                                                  \
    UNARY_LOOP(name##_f32, float, float, p0f, p1f, FEXPR)                                          \
    UNARY_LOOP(name##_f64, double, double, p0, p1, FEXPR)                                          \
    UNARY_LOOP(name##_i64, int64_t, int64_t, p0i, p1i, IEXPR)                                      \
    GENERIC_UNARY_LOOP(name##_any, FEXPR, IEXPR)                                                   \
    static const cpu_loop_set name##_set = {name##_f32, name##_f64, HAS_INT ? name##_i64 : NULL,   \
                                            name##_any};

/* Float-only ops: the integer expression is never run (the ops layer promotes to float32). */
#define FLOAT_UNARY_KERNEL(name, FEXPR) UNARY_KERNEL(name, FEXPR, a, 0)

#define SIMPLE_ENTRY(name)                                                                         \
    int cpu_##name(ddpl_tensor **out, ddpl_tensor **in, const void *params)                        \
    {                                                                                              \
        DDPL_UNUSED(params);                                                                       \
        cpu_loop_ctx ctx = {0};                                                                    \
        return cpu_run_pointwise(#name, &name##_set, out, 1, in, &ctx);                            \
    }

UNARY_KERNEL(neg, -a, (int64_t)(0 - (uint64_t)a), 1)
UNARY_KERNEL(abs, M_FABS(a), (a < 0 ? (int64_t)(0 - (uint64_t)a) : a), 1)
UNARY_KERNEL(sign, SIGN(a), (a > 0) - (a < 0), 1)
UNARY_KERNEL(relu, (a > 0 || a != a ? a : 0), (a > 0 ? a : 0), 1)
FLOAT_UNARY_KERNEL(exp, M_EXP(a))
FLOAT_UNARY_KERNEL(log, M_LOG(a))
FLOAT_UNARY_KERNEL(sqrt, M_SQRT(a))
FLOAT_UNARY_KERNEL(rsqrt, 1 / M_SQRT(a))
FLOAT_UNARY_KERNEL(sin, M_SIN(a))
FLOAT_UNARY_KERNEL(cos, M_COS(a))
FLOAT_UNARY_KERNEL(tanh, M_TANH(a))
FLOAT_UNARY_KERNEL(sigmoid, SIGMOID(a))
FLOAT_UNARY_KERNEL(silu, a *SIGMOID(a))
SIMPLE_ENTRY(neg)
SIMPLE_ENTRY(abs)
SIMPLE_ENTRY(sign)
SIMPLE_ENTRY(relu)
SIMPLE_ENTRY(exp)
SIMPLE_ENTRY(log)
SIMPLE_ENTRY(sqrt)
SIMPLE_ENTRY(rsqrt)
SIMPLE_ENTRY(sin)
SIMPLE_ENTRY(cos)
SIMPLE_ENTRY(tanh)
SIMPLE_ENTRY(sigmoid)
SIMPLE_ENTRY(silu)

/* gelu: the approximation flag picks a separate loop so neither loop carries a branch */
FLOAT_UNARY_KERNEL(gelu_erf, GELU(__typeof__(a), a, 0))
FLOAT_UNARY_KERNEL(gelu_tanh, GELU(__typeof__(a), a, 1))

int cpu_gelu(ddpl_tensor **out, ddpl_tensor **in, const void *params)
{
    const ddpl_gelu_params *p = params;
    cpu_loop_ctx ctx = {0};
    bool approx = p && p->tanh_approximation;
    return cpu_run_pointwise("gelu", approx ? &gelu_tanh_set : &gelu_erf_set, out, 1, in, &ctx);
}

/* clamp: p0/p1 are min/max; an absent bound is +-inf (or the int64 extremes). NaN stays NaN,
 * as in PyTorch; the min bound applies first, so min > max gives max everywhere. */
#define CLAMP(a) ((a) != (a) ? (a) : ((a) < p0 ? p0 : (a)) > p1 ? p1 : ((a) < p0 ? p0 : (a)))
UNARY_KERNEL(clamp, CLAMP(a), CLAMP(a), 1)

int cpu_clamp(ddpl_tensor **out, ddpl_tensor **in, const void *params)
{
    const ddpl_clamp_params *p = params;
    cpu_loop_ctx ctx = {0};
    ctx.p0 = p->has_min ? p->min : -INFINITY;
    ctx.p1 = p->has_max ? p->max : INFINITY;
    ctx.p0f = (float)ctx.p0;
    ctx.p1f = (float)ctx.p1;
    /* integer bounds: the ops layer only passes integral values for integer dtypes */
    ctx.p0i = p->has_min ? ddpl_f64_to_i64(p->min) : INT64_MIN;
    ctx.p1i = p->has_max ? ddpl_f64_to_i64(p->max) : INT64_MAX;
    return cpu_run_pointwise("clamp", &clamp_set, out, 1, in, &ctx);
}

/* ---- fused activation backward: out <- f(grad = in[0], saved = in[1]); `a` is the gradient
 * and `b` the saved tensor (forward output y, or forward input x) ---- */
#define BACKWARD_KERNEL(name, EXPR)                                                                \
    BINARY_LOOP(name##_f32, float, float, p0f, p1f, EXPR)                                          \
    BINARY_LOOP(name##_f64, double, double, p0, p1, EXPR)                                          \
    GENERIC_BINARY_LOOP(name##_any, EXPR, 0)                                                       \
    static const cpu_loop_set name##_set = {name##_f32, name##_f64, NULL, name##_any};

/* relu: y > 0 passes the gradient (PyTorch's threshold_backward on the output) */
BACKWARD_KERNEL(relu_backward, b > 0 ? a : 0)
/* sigmoid: y (1 - y) */
BACKWARD_KERNEL(sigmoid_backward, a *b *(1 - b))
/* tanh: 1 - y^2 */
BACKWARD_KERNEL(tanh_backward, a *(1 - b * b))
/* silu(x) = x s(x): s(x) (1 + x (1 - s(x))) */
#define SILU_GRAD(T, g, x) ((g) * (SIGMOID(x) * (1 + (x) * (1 - SIGMOID(x)))))
BACKWARD_KERNEL(silu_backward, SILU_GRAD(__typeof__(a), a, b))
/* exact gelu: Phi(x) + x phi(x) with phi(x) = exp(-x^2/2)/sqrt(2pi) */
static inline double gelu_erf_backward_d(double g, double x)
{
    return g * (phi_d(x) + x * INV_SQRT2PI * exp(-0.5 * x * x));
}
#define GELU_ERF_GRAD(g, x)                                                                        \
    _Generic((x), float : cpu_gelu_erf_backwardf, default : gelu_erf_backward_d)(g, x)
BACKWARD_KERNEL(gelu_erf_backward, GELU_ERF_GRAD(a, b))
/* tanh gelu: with u = k0 (x + k1 x^3), t = tanh(u):
 *   1/2 (1 + t) + 1/2 x (1 - t^2) k0 (1 + 3 k1 x^2) */
#define GELU_TANH_GRAD(T, g, x, t)                                                                 \
    ((g) * ((T)0.5 * (1 + (t)) +                                                                   \
            (T)0.5 * (x) * (1 - (t) * (t)) * (T)GELU_K0 * (1 + (T)(3 * GELU_K1) * (x) * (x))))
#define GELU_TANH_T(T, x) M_TANH((T)GELU_K0 *((x) + (T)GELU_K1 * (x) * (x) * (x)))
BACKWARD_KERNEL(gelu_tanh_backward,
                GELU_TANH_GRAD(__typeof__(a), a, b, GELU_TANH_T(__typeof__(a), b)))

#define BACKWARD_ENTRY(name)                                                                       \
    int cpu_##name(ddpl_tensor **out, ddpl_tensor **in, const void *params)                        \
    {                                                                                              \
        DDPL_UNUSED(params);                                                                       \
        cpu_loop_ctx ctx = {0};                                                                    \
        return cpu_run_pointwise(#name, &name##_set, out, 2, in, &ctx);                            \
    }
BACKWARD_ENTRY(relu_backward)
BACKWARD_ENTRY(sigmoid_backward)
BACKWARD_ENTRY(tanh_backward)
BACKWARD_ENTRY(silu_backward)

int cpu_gelu_backward(ddpl_tensor **out, ddpl_tensor **in, const void *params)
{
    const ddpl_gelu_params *p = params;
    cpu_loop_ctx ctx = {0};
    bool approx = p && p->tanh_approximation;
    return cpu_run_pointwise("gelu_backward",
                             approx ? &gelu_tanh_backward_set : &gelu_erf_backward_set, out, 2, in,
                             &ctx);
}
