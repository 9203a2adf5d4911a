/* cuda/cuda_math_fns.cu: the UNARY_FN and BINARY_FN kernels (kernel_abi/math_fns.def) on CUDA,
 * with the semantics of cpu/cpu_math_fns.c: float32 and the 16-bit floats compute in float with
 * CUDA's accurate libm, float64 in double, integers in wrapping int64 where INT64_MIN / -1 wraps
 * and a zero divisor (which the ops layer refuses first) gives 0.
 * defines: cuda_pw_unary_fn, cuda_pw_binary_fn. */
#include <math.h>

#include "cuda_pointwise.cuh"
#include "kernel_abi/kernel_params.h"

#define PW_INT(A) std::is_integral<A>::value
typedef unsigned long long fn_u64;

/* f(a) through libm's float function for float, the double one for double */
#define FN_OVERLOAD(name)                                                                          \
    __device__ static inline float fn_##name(float x)                                              \
    {                                                                                              \
        return name##f(x);                                                                         \
    }                                                                                              \
    __device__ static inline double fn_##name(double x)                                            \
    {                                                                                              \
        return name(x);                                                                            \
    }
#define FN_OVERLOAD2(name)                                                                         \
    __device__ static inline float fn_##name(float x, float y)                                     \
    {                                                                                              \
        return name##f(x, y);                                                                      \
    }                                                                                              \
    __device__ static inline double fn_##name(double x, double y)                                  \
    {                                                                                              \
        return name(x, y);                                                                         \
    }
FN_OVERLOAD(floor)
FN_OVERLOAD(ceil)
FN_OVERLOAD(rint)
FN_OVERLOAD(trunc)
FN_OVERLOAD(exp)
FN_OVERLOAD(exp2)
FN_OVERLOAD(expm1)
FN_OVERLOAD(log)
FN_OVERLOAD(log2)
FN_OVERLOAD(log10)
FN_OVERLOAD(log1p)
FN_OVERLOAD(tan)
FN_OVERLOAD(asin)
FN_OVERLOAD(acos)
FN_OVERLOAD(atan)
FN_OVERLOAD(sinh)
FN_OVERLOAD(cosh)
FN_OVERLOAD(asinh)
FN_OVERLOAD(acosh)
FN_OVERLOAD(atanh)
FN_OVERLOAD(erf)
FN_OVERLOAD(erfc)
FN_OVERLOAD(erfinv)
FN_OVERLOAD(fabs)
FN_OVERLOAD2(fmod)
FN_OVERLOAD2(atan2)
FN_OVERLOAD2(hypot)
FN_OVERLOAD2(fmax)
FN_OVERLOAD2(fmin)
FN_OVERLOAD2(copysign)

/* ---- unary (floating only) ---- */
#define UFN(op, EXPR)                                                                              \
    struct op {                                                                                    \
        template <typename A> __device__ A operator()(A a, const cuda_pw_scalars &s) const         \
        {                                                                                          \
            (void)s;                                                                               \
            return EXPR;                                                                           \
        }                                                                                          \
    };
/* p0 = 10^|decimals| (d0/f0), p1 = sign of decimals (d1), as the CPU */
template <typename A> __device__ static inline A fn_round(A a, const cuda_pw_scalars &s)
{
    A p0 = std::is_same<A, float>::value ? (A)s.f0 : (A)s.d0;
    if (s.d1 == 0) return fn_rint(a);
    return s.d1 > 0 ? fn_rint(a * p0) / p0 : fn_rint(a / p0) * p0;
}
UFN(op_FLOOR, fn_floor(a))
UFN(op_CEIL, fn_ceil(a))
UFN(op_ROUND, fn_round(a, s))
UFN(op_TRUNC, fn_trunc(a))
UFN(op_FRAC, a - fn_trunc(a))
UFN(op_RECIPROCAL, (A)1 / a)
UFN(op_EXP2, fn_exp2(a))
UFN(op_EXPM1, fn_expm1(a))
UFN(op_LOG2, fn_log2(a))
UFN(op_LOG10, fn_log10(a))
UFN(op_LOG1P, fn_log1p(a))
UFN(op_TAN, fn_tan(a))
UFN(op_ASIN, fn_asin(a))
UFN(op_ACOS, fn_acos(a))
UFN(op_ATAN, fn_atan(a))
UFN(op_SINH, fn_sinh(a))
UFN(op_COSH, fn_cosh(a))
UFN(op_ASINH, fn_asinh(a))
UFN(op_ACOSH, fn_acosh(a))
UFN(op_ATANH, fn_atanh(a))
UFN(op_ERF, fn_erf(a))
UFN(op_ERFC, fn_erfc(a))
UFN(op_ERFINV, fn_erfinv(a))

static int fn_bad_dtype(const char *what, int dt)
{
    return ddpl_error("%s: not implemented for dtype %s on cuda", what,
                      ddpl_dtype_name((ddpl_dtype)dt));
}

template <typename Op>
static int unary_float(const char *what, int dt, void *out, const void *const *ins,
                       const cuda_pw_geom *g, const cuda_pw_scalars &s)
{
    PW_DISPATCH_FLOAT(
        dt, return fn_bad_dtype(what, dt),
        return pw_launch<1, scalar_t, scalar_t>(what, (scalar_t *)out, ins, g, Op(), s))
    return 0;
}

extern "C" int cuda_pw_unary_fn(const char *what, int fn, int dtype, void *out, const void *a,
                                const cuda_pw_geom *g, const cuda_pw_scalars *s)
{
    const void *ins[1] = {a};
    switch (fn) {
#define DDPL_UNARY_FN(ID, NAME)                                                                    \
    case DDPL_UFN_##ID:                                                                            \
        return unary_float<op_##ID>(what, dtype, out, ins, g, *s);
#include "kernel_abi/math_fns.def"
#undef DDPL_UNARY_FN
    }
    return ddpl_error("%s: unknown unary function %d", what, fn);
}

/* ---- binary ---- */
/* floor(a / b) without the quotient's rounding error, as the CPU's floor_div */
template <typename A> __device__ static inline A fn_floor_div(A a, A b)
{
    if (b == 0) return a / b;
    A mod = fn_fmod(a, b), div = (a - mod) / b;
    if (mod != 0 && (b < 0) != (mod < 0)) div -= 1;
    if (div == 0) return fn_copysign((A)0, a / b);
    A fl = fn_floor(div);
    return div - fl > (A)0.5 ? fl + 1 : fl;
}

/* Functions on every dtype: FEXPR for floats, IEXPR for integers (a and b long long). */
#define BFN(op, FEXPR, IEXPR)                                                                      \
    struct op {                                                                                    \
        template <typename A> __device__ A operator()(A a, A b, const cuda_pw_scalars &) const     \
        {                                                                                          \
            if constexpr (PW_INT(A))                                                               \
                return IEXPR;                                                                      \
            else                                                                                   \
                return FEXPR;                                                                      \
        }                                                                                          \
    };
#define I_NEG(a) (long long)(0 - (fn_u64)(a)) /* wrapping: INT64_MIN stays */

template <typename A> __device__ static inline A fn_remainder(A a, A b)
{
    A m = fn_fmod(a, b);
    return (m != 0 && (b < 0) != (m < 0)) ? m + b : m;
}
__device__ static inline long long i_remainder(long long a, long long b)
{
    long long r = (b == 0 || b == -1) ? 0 : a % b;
    return (r != 0 && (r < 0) != (b < 0)) ? r + b : r;
}
__device__ static inline long long i_floor_div(long long a, long long b)
{
    if (b == 0) return 0;
    if (b == -1) return I_NEG(a);
    return a / b - ((a % b != 0 && (a < 0) != (b < 0)) ? 1 : 0);
}
BFN(op_REMAINDER, fn_remainder(a, b), i_remainder(a, b))
BFN(op_FMOD, fn_fmod(a, b), (b == 0 || b == -1) ? 0 : a % b)
BFN(op_FLOOR_DIVIDE, fn_floor_div(a, b), i_floor_div(a, b))
BFN(op_TRUNC_DIVIDE, fn_trunc(a / b), b == 0 ? 0 : b == -1 ? I_NEG(a) : a / b)
BFN(op_FMAX, fn_fmax(a, b), a > b ? a : b)
BFN(op_FMIN, fn_fmin(a, b), a < b ? a : b)
BFN(op_ATAN2, fn_atan2(a, b), 0)
BFN(op_HYPOT, fn_hypot(a, b), 0)
/* max + log1p(e^-|a-b|); equal infinities give themselves */
BFN(op_LOGADDEXP, (isinf(a) && a == b) ? a : (a > b ? a : b) + fn_log1p(fn_exp(-fn_fabs(a - b))), 0)
BFN(op_LOGADDEXP2,
    (isinf(a) && a == b) ? a
                         : (a > b ? a : b) + fn_log1p(fn_exp2(-fn_fabs(a - b))) *
                                                 (A)1.4426950408889634 /* 1 / ln 2 */,
    0)
BFN(op_XLOGY, b != b ? b : a == 0 ? (A)0 : a * fn_log(b), 0)
BFN(op_COPYSIGN, fn_copysign(a, b), 0)
BFN(op_BITWISE_AND, 0, a &b)
BFN(op_BITWISE_OR, 0, a | b)
BFN(op_BITWISE_XOR, 0, a ^ b)
/* counts outside [0, 64): 0 (left) or the sign (right), as the CPU */
BFN(op_LEFT_SHIFT, 0, (b < 0 || b >= 64) ? 0 : (long long)((fn_u64)a << b))
BFN(op_RIGHT_SHIFT, 0, (b < 0 || b >= 64) ? (a < 0 ? -1 : 0) : a >> b)

template <typename Op>
static int binary_any(const char *what, int dt, bool int_ok, bool float_ok, void *out,
                      const void *const *ins, const cuda_pw_geom *g)
{
    cuda_pw_scalars s = {};
    bool is_float =
        dt == DDPL_FLOAT32 || dt == DDPL_FLOAT64 || dt == DDPL_FLOAT16 || dt == DDPL_BFLOAT16;
    if (is_float ? !float_ok : !int_ok) return fn_bad_dtype(what, dt);
    PW_DISPATCH_ALL(dt, return fn_bad_dtype(what, dt),
                    return pw_launch<2, scalar_t, scalar_t>(what, (scalar_t *)out, ins, g, Op(), s))
    return 0;
}

/* the bitwise functions take integers and bool only */
static bool float_ok(int fn)
{
    return fn != DDPL_BFN_BITWISE_AND && fn != DDPL_BFN_BITWISE_OR && fn != DDPL_BFN_BITWISE_XOR &&
           fn != DDPL_BFN_LEFT_SHIFT && fn != DDPL_BFN_RIGHT_SHIFT;
}

extern "C" int cuda_pw_binary_fn(const char *what, int fn, int dtype, void *out, const void *a,
                                 const void *b, const cuda_pw_geom *g)
{
    const void *ins[2] = {a, b};
    switch (fn) {
#define DDPL_BINARY_FN(ID, NAME, INT_OK)                                                           \
    case DDPL_BFN_##ID:                                                                            \
        return binary_any<op_##ID>(what, dtype, INT_OK, float_ok(fn), out, ins, g);
#include "kernel_abi/math_fns.def"
#undef DDPL_BINARY_FN
    }
    return ddpl_error("%s: unknown binary function %d", what, fn);
}
