/* cpu/cpu_math_fns.c: the UNARY_FN and BINARY_FN kernels (kernel_abi/math_fns.def): rounding,
 * the rest of libm's one-argument functions, and the two-argument functions PyTorch has beyond
 * + - * / (remainder, fmod, the rounded divisions, atan2, hypot, fmax/fmin, logaddexp, xlogy,
 * copysign, bitwise and shifts).
 * defines: cpu_unary_fn, cpu_binary_fn.
 *
 * One loop set per function, picked from a table by the id in the params. float32 calls libm's
 * float functions, float64 the double ones (contiguous loops vectorised through libmvec),
 * float16/bfloat16 the float ones through the generic loop; integers compute in int64 (wrapping,
 * computed unsigned where it can overflow). Integer division by zero is refused by the ops layer;
 * the loops still give 0 there rather than trap, and INT64_MIN / -1 wraps instead of trapping (x86
 * raises SIGFPE for it). */
#include <math.h>

#include "cpu_kernels.h"
#include "cpu_loops.h"
#include "cpu_math.h"
#include "kernel_abi/kernel_params.h"

/* the libm functions whose loops vectorise through libmvec (cpu_math.h) */
CPU_VECTOR_MATH(exp2)
CPU_VECTOR_MATH(expm1)
CPU_VECTOR_MATH(log2)
CPU_VECTOR_MATH(log10)
CPU_VECTOR_MATH(log1p)
CPU_VECTOR_MATH(tan)
CPU_VECTOR_MATH(asin)
CPU_VECTOR_MATH(acos)
CPU_VECTOR_MATH(atan)
CPU_VECTOR_MATH(sinh)
CPU_VECTOR_MATH(cosh)
CPU_VECTOR_MATH(asinh)
CPU_VECTOR_MATH(acosh)
CPU_VECTOR_MATH(atanh)
CPU_VECTOR_MATH(erf)
CPU_VECTOR_MATH(erfc)
CPU_VECTOR_MATH2(atan2)
CPU_VECTOR_MATH2(hypot)

/* f(a) with libm's float function for a float argument, the double one otherwise */
#define TG(fn, a)     _Generic((a), float : fn##f, default : fn)(a)
#define TG2(fn, a, b) _Generic((a), float : fn##f, default : fn)((a), (b))

#define LN2 0.69314718055994530942

/* Inverse error function: a rational first guess (Giles, "Approximating the erfinv function",
 * 2010) refined by four Newton steps (the guess is float-accurate
 * at best, and off by 1e-3 in the far tails), so float64 is accurate to the last bits; +-1 give
 * +-inf and |y| > 1 NaN, as PyTorch. */
static double erfinv_d(double y)
{
    if (!(fabs(y) <= 1)) return NAN;
    if (fabs(y) == 1) return copysign(INFINITY, y);
    double w = -log((1 - y) * (1 + y)), x;
    if (w < 5) {
        w -= 2.5;
        x = 2.81022636e-08;
        x = 3.43273939e-07 + x * w;
        x = -3.5233877e-06 + x * w;
        x = -4.39150654e-06 + x * w;
        x = 0.00021858087 + x * w;
        x = -0.00125372503 + x * w;
        x = -0.00417768164 + x * w;
        x = 0.246640727 + x * w;
        x = 1.50140941 + x * w;
    } else {
        w = sqrt(w) - 3;
        x = -0.000200214257;
        x = 0.000100950558 + x * w;
        x = 0.00134934322 + x * w;
        x = -0.00367342844 + x * w;
        x = 0.00573950773 + x * w;
        x = -0.0076224613 + x * w;
        x = 0.00943887047 + x * w;
        x = 1.00167406 + x * w;
        x = 2.83297682 + x * w;
    }
    x *= y;
    /* Newton on erf (d erf/dx = 2/sqrt(pi) e^-x^2). In the tails, where erf(x) - y cancels to
     * nothing, on log erfc(|x|) = log(1 - |y|) instead: 1 - |y| is exact there, and the log
     * takes out erfc's e^-x^2 curvature, so the steps converge as fast as in the middle. */
    double tail = 1 - fabs(y);
    for (int i = 0; i < 4; i++) {
        double slope = 1.1283791670955126 * exp(-x * x);
        if (tail < 0.5) {
            double e = erfc(fabs(x));
            x += (y < 0 ? -1 : 1) * log(e / tail) * e / slope;
        } else {
            x -= (erf(x) - y) / slope;
        }
    }
    return x;
}
static float erfinv_f(float y)
{
    return (float)erfinv_d(y);
}
#define ERFINV(a) _Generic((a), float : erfinv_f, default : erfinv_d)(a)

/* round half to even (nearbyint in the default rounding mode); with decimals as PyTorch:
 * p1 > 0 scales up by p0 = 10^decimals first, p1 < 0 down by p0 = 10^-decimals */
#define ROUND(a, p0, p1)                                                                           \
    ((p1) == 0 ? TG(rint, a) : (p1) > 0 ? TG(rint, (a) * (p0)) / (p0) : TG(rint, (a) / (p0)) * (p0))

/* ---- unary ---- */
#define UFN(ID, FEXPR)                                                                             \
    UNARY_LOOP(ufn_##ID##_f32, float, float, p0f, p1f, FEXPR)                                      \
    UNARY_LOOP(ufn_##ID##_f64, double, double, p0, p1, FEXPR)                                      \
    GENERIC_UNARY_LOOP(ufn_##ID##_any, FEXPR, a)

UFN(FLOOR, TG(floor, a))
UFN(CEIL, TG(ceil, a))
UFN(ROUND, ROUND(a, p0, p1))
UFN(TRUNC, TG(trunc, a))
UFN(FRAC, a - TG(trunc, a))
UFN(RECIPROCAL, 1 / a)
UFN(EXP2, TG(exp2, a))
UFN(EXPM1, TG(expm1, a))
UFN(LOG2, TG(log2, a))
UFN(LOG10, TG(log10, a))
UFN(LOG1P, TG(log1p, a))
UFN(TAN, TG(tan, a))
UFN(ASIN, TG(asin, a))
UFN(ACOS, TG(acos, a))
UFN(ATAN, TG(atan, a))
UFN(SINH, TG(sinh, a))
UFN(COSH, TG(cosh, a))
UFN(ASINH, TG(asinh, a))
UFN(ACOSH, TG(acosh, a))
UFN(ATANH, TG(atanh, a))
UFN(ERF, TG(erf, a))
UFN(ERFC, TG(erfc, a))
UFN(ERFINV, ERFINV(a))

static const cpu_loop_set unary_sets[DDPL_UFN_COUNT] = {
#define DDPL_UNARY_FN(ID, NAME)                                                                    \
    [DDPL_UFN_##ID] = {ufn_##ID##_f32, ufn_##ID##_f64, NULL, ufn_##ID##_any},
#include "kernel_abi/math_fns.def"
#undef DDPL_UNARY_FN
};

int cpu_unary_fn(ddpl_tensor **out, ddpl_tensor **in, const void *params)
{
    const ddpl_unary_fn_params *p = params;
    if (!p || p->fn < 0 || p->fn >= DDPL_UFN_COUNT)
        return ddpl_error("unary_fn: unknown function %d", p ? p->fn : -1);
    cpu_loop_ctx ctx = {.p0 = p->p0, .p1 = p->p1, .p0f = (float)p->p0, .p1f = (float)p->p1};
    return cpu_run_pointwise(ddpl_unary_fn_name(p->fn), &unary_sets[p->fn], out, 1, in, &ctx);
}

/* ---- binary: floating ---- */

/* Python's a % b: fmod's remainder moved to b's sign (so -0.0 % 2 stays -0.0) */
#define F_REMAINDER(a, b)                                                                          \
    ({                                                                                             \
        __typeof__(a) m_ = TG2(fmod, a, b);                                                        \
        (m_ != 0 && ((b) < 0) != (m_ < 0)) ? m_ + (b) : m_;                                        \
    })

/* floor(a / b) without the rounding error of the quotient, as PyTorch's div_floor: division
 * by zero gives a / b (+-inf or NaN) */
static inline double floor_div_d(double a, double b)
{
    if (b == 0) return a / b;
    double mod = fmod(a, b), div = (a - mod) / b;
    if (mod != 0 && (b < 0) != (mod < 0)) div -= 1;
    if (div == 0) return copysign(0.0, a / b);
    double fl = floor(div);
    return div - fl > 0.5 ? fl + 1 : fl;
}
static inline float floor_div_f(float a, float b)
{
    if (b == 0) return a / b;
    float mod = fmodf(a, b), div = (a - mod) / b;
    if (mod != 0 && (b < 0) != (mod < 0)) div -= 1;
    if (div == 0) return copysignf(0.0f, a / b);
    float fl = floorf(div);
    return div - fl > 0.5f ? fl + 1 : fl;
}
#define F_FLOOR_DIV(a, b) _Generic((a), float : floor_div_f, default : floor_div_d)(a, b)

/* log(e^a + e^b) = max + log1p(e^-|a-b|); equal infinities give themselves (not inf - inf) */
#define F_LOGADDEXP(a, b, EXP, LOG1P_SCALE)                                                        \
    ({                                                                                             \
        __typeof__(a) a_ = (a), b_ = (b);                                                          \
        (isinf(a_) && a_ == b_)                                                                    \
            ? a_                                                                                   \
            : (a_ > b_ ? a_ : b_) + TG(log1p, EXP(-TG(fabs, a_ - b_))) * LOG1P_SCALE;              \
    })
#define F_EXP(x)  TG(exp, x)
#define F_EXP2(x) TG(exp2, x)

/* a log(b), 0 where a == 0 unless b is NaN */
#define F_XLOGY(a, b) ((b) != (b) ? (b) : (a) == 0 ? 0 : (a)*TG(log, b))

/* ---- binary: integers (int64, wrapping) ---- */
#define U64(v) ((uint64_t)(v))
static inline int64_t i_remainder(int64_t a, int64_t b)
{
    if (b == 0 || b == -1) return 0; /* b == -1: INT64_MIN % -1 traps */
    int64_t r = a % b;
    return (r != 0 && (r < 0) != (b < 0)) ? r + b : r;
}
static inline int64_t i_fmod(int64_t a, int64_t b)
{
    return (b == 0 || b == -1) ? 0 : a % b;
}
static inline int64_t i_trunc_div(int64_t a, int64_t b)
{
    if (b == 0) return 0;
    return b == -1 ? (int64_t)(0 - U64(a)) : a / b;
}
static inline int64_t i_floor_div(int64_t a, int64_t b)
{
    if (b == 0) return 0;
    if (b == -1) return (int64_t)(0 - U64(a));
    int64_t q = a / b;
    return (a % b != 0 && (a < 0) != (b < 0)) ? q - 1 : q;
}
/* shift counts outside [0, 64) give 0 (left) or the sign (right), never undefined behaviour */
static inline int64_t i_shl(int64_t a, int64_t b)
{
    return (b < 0 || b >= 64) ? 0 : (int64_t)(U64(a) << b);
}
static inline int64_t i_shr(int64_t a, int64_t b)
{
    return (b < 0 || b >= 64) ? (a < 0 ? -1 : 0) : a >> b;
}

/* Functions on every dtype: FEXPR for floats, IEXPR for integers (a and b int64). */
#define BFN(ID, FEXPR, IEXPR)                                                                      \
    BINARY_LOOP(bfn_##ID##_f32, float, float, p0f, p1f, FEXPR)                                     \
    BINARY_LOOP(bfn_##ID##_f64, double, double, p0, p1, FEXPR)                                     \
    BINARY_LOOP(bfn_##ID##_i64, int64_t, int64_t, p0i, p1i, IEXPR)                                 \
    GENERIC_BINARY_LOOP(bfn_##ID##_any, FEXPR, IEXPR)
#define BFN_SET(ID)                                                                                \
    {                                                                                              \
        bfn_##ID##_f32, bfn_##ID##_f64, bfn_##ID##_i64, bfn_##ID##_any                             \
    }
/* Floating-only functions: the integer loop is never selected (cpu_run_pointwise refuses). */
#define BFN_FLOAT(ID, FEXPR)                                                                       \
    BINARY_LOOP(bfn_##ID##_f32, float, float, p0f, p1f, FEXPR)                                     \
    BINARY_LOOP(bfn_##ID##_f64, double, double, p0, p1, FEXPR)                                     \
    GENERIC_BINARY_LOOP(bfn_##ID##_any, FEXPR, 0)
#define BFN_FLOAT_SET(ID)                                                                          \
    {                                                                                              \
        bfn_##ID##_f32, bfn_##ID##_f64, NULL, bfn_##ID##_any                                       \
    }
/* Integer-only functions (bitwise): cpu_binary_fn refuses floating dtypes before the generic
 * loop could run the (absent) float expression. */
#define BFN_INT(ID, IEXPR)                                                                         \
    BINARY_LOOP(bfn_##ID##_i64, int64_t, int64_t, p0i, p1i, IEXPR)                                 \
    GENERIC_BINARY_LOOP(bfn_##ID##_any, 0, IEXPR)
#define BFN_INT_SET(ID)                                                                            \
    {                                                                                              \
        NULL, NULL, bfn_##ID##_i64, bfn_##ID##_any                                                 \
    }

BFN(REMAINDER, F_REMAINDER(a, b), i_remainder(a, b))
BFN(FMOD, TG2(fmod, a, b), i_fmod(a, b))
BFN(FLOOR_DIVIDE, F_FLOOR_DIV(a, b), i_floor_div(a, b))
BFN(TRUNC_DIVIDE, TG(trunc, a / b), i_trunc_div(a, b))
BFN(FMAX, TG2(fmax, a, b), (a > b ? a : b))
BFN(FMIN, TG2(fmin, a, b), (a < b ? a : b))
BFN_FLOAT(ATAN2, TG2(atan2, a, b))
BFN_FLOAT(HYPOT, TG2(hypot, a, b))
BFN_FLOAT(LOGADDEXP, F_LOGADDEXP(a, b, F_EXP, 1))
BFN_FLOAT(LOGADDEXP2, F_LOGADDEXP(a, b, F_EXP2, (1 / LN2)))
BFN_FLOAT(XLOGY, F_XLOGY(a, b))
BFN_FLOAT(COPYSIGN, TG2(copysign, a, b))
BFN_INT(BITWISE_AND, a &b)
BFN_INT(BITWISE_OR, a | b)
BFN_INT(BITWISE_XOR, a ^ b)
BFN_INT(LEFT_SHIFT, i_shl(a, b))
BFN_INT(RIGHT_SHIFT, i_shr(a, b))

/* ---- fmod and remainder without a libm call per element ----
 * glibc's fmod is a scalar loop (60 ns a call here, 3-4x torch's vectorised kernel). For
 * |a / b| < 2^24 (float32) or 2^52 (float64) the remainder is a - q b with q = trunc(a / b),
 * computed exactly, so the results are fmod's bits:
 *   - float32 in double: the double quotient of two floats cannot round across an integer
 *     below 2^28 (a and b are multiples of b's ulp, so a / b is at least 2^-24 from any
 *     integer it is not), q b has at most 48 bits, and a - q b is the exact remainder;
 *   - float64: the quotient can round up to the next integer, so r = fma(-q, b, a) is computed
 *     and, when its sign is not a's (q one too large), once more with q moved towards zero;
 *     with the right q, fma's single rounding is exact, the remainder being representable.
 * The sign is a's (fmod(-4, 2) is -0.0). A block with any other element (b zero or infinite, a
 * infinite or NaN, huge quotients) is recomputed with libm, so those keep its results. */
enum { FMOD_BLOCK = 256 };

#define FMOD_FAST_F32(a, b, ok)                                                                    \
    ({                                                                                             \
        double x_ = (a), y_ = (b), q_ = trunc(x_ / y_), r_ = x_ - q_ * y_;                         \
        ok &= (fabs(q_) < 0x1p24) & (r_ == r_);                                                    \
        (float)copysign(r_, x_);                                                                   \
    })
#define FMOD_FAST_F64(a, b, ok)                                                                    \
    ({                                                                                             \
        double x_ = (a), y_ = (b), q_ = trunc(x_ / y_), r_ = fma(-q_, y_, x_);                     \
        bool wrong_ = (r_ != 0) & ((r_ < 0) != (x_ < 0));                                          \
        q_ = wrong_ ? q_ - copysign(1.0, q_) : q_;                                                 \
        r_ = fma(-q_, y_, x_);                                                                     \
        ok &= (fabs(q_) < 0x1p52) & (r_ == r_);                                                    \
        copysign(r_, x_);                                                                          \
    })
/* remainder from fmod's m, as F_REMAINDER; & rather than &&, so the select vectorises (with
 * a branch it mispredicted on every other element) */
#define REM_FROM_FMOD(m, b) ((((m) != 0) & (((b) < 0) != ((m) < 0))) ? (m) + (b) : (m))

/* FAST(a, b, ok) per element of contiguous blocks (b contiguous or one scalar); any other
 * layout, and blocks where ok dropped, through the libm loop SLOW. no-trapping-math lets GCC
 * turn the compares and selects into vector blends (with trapping math it keeps them as
 * branches, and remainder's sign fix-up mispredicted every other element); it changes no
 * value, only whether FP exception flags may be raised speculatively. */
#define FMOD_LOOP(NAME, T, FAST, REM, SLOW)                                                        \
    __attribute__((optimize("no-trapping-math"))) CPU_LOOP_CLONES static void NAME(                \
        char **d, const int64_t *s, int64_t n, void *ctx)                                          \
    {                                                                                              \
        const int64_t e = (int64_t)sizeof(T);                                                      \
        if (!(s[0] == e && s[1] == e && (s[2] == e || s[2] == 0))) {                               \
            SLOW(d, s, n, ctx);                                                                    \
            return;                                                                                \
        }                                                                                          \
        T *o = (T *)d[0];                                                                          \
        const T *x = (const T *)d[1], *y = (const T *)d[2];                                        \
        int64_t ys = s[2] / e;                                                                     \
        for (int64_t i0 = 0; i0 < n; i0 += FMOD_BLOCK) {                                           \
            int64_t m = n - i0 < FMOD_BLOCK ? n - i0 : FMOD_BLOCK;                                 \
            int ok = 1;                                                                            \
            if (ys) {                                                                              \
                CPU_PRAGMA_IVDEP for (int64_t i = i0; i < i0 + m; i++)                             \
                {                                                                                  \
                    T b = y[i], r = FAST(x[i], b, ok);                                             \
                    o[i] = REM ? REM_FROM_FMOD(r, b) : r;                                          \
                }                                                                                  \
            } else {                                                                               \
                const T b = y[0];                                                                  \
                CPU_PRAGMA_IVDEP for (int64_t i = i0; i < i0 + m; i++)                             \
                {                                                                                  \
                    T r = FAST(x[i], b, ok);                                                       \
                    o[i] = REM ? REM_FROM_FMOD(r, b) : r;                                          \
                }                                                                                  \
            }                                                                                      \
            if (!ok) {                                                                             \
                char *dd[3] = {(char *)(o + i0), (char *)(x + i0), (char *)(y + i0 * ys)};         \
                SLOW(dd, s, m, ctx);                                                               \
            }                                                                                      \
        }                                                                                          \
    }
FMOD_LOOP(fmod_fast_f32, float, FMOD_FAST_F32, 0, bfn_FMOD_f32)
FMOD_LOOP(fmod_fast_f64, double, FMOD_FAST_F64, 0, bfn_FMOD_f64)
FMOD_LOOP(remainder_fast_f32, float, FMOD_FAST_F32, 1, bfn_REMAINDER_f32)
FMOD_LOOP(remainder_fast_f64, double, FMOD_FAST_F64, 1, bfn_REMAINDER_f64)

static const cpu_loop_set binary_sets[DDPL_BFN_COUNT] = {
    [DDPL_BFN_REMAINDER] = {remainder_fast_f32, remainder_fast_f64, bfn_REMAINDER_i64,
                            bfn_REMAINDER_any},
    [DDPL_BFN_FMOD] = {fmod_fast_f32, fmod_fast_f64, bfn_FMOD_i64, bfn_FMOD_any},
    [DDPL_BFN_FLOOR_DIVIDE] = BFN_SET(FLOOR_DIVIDE),
    [DDPL_BFN_TRUNC_DIVIDE] = BFN_SET(TRUNC_DIVIDE),
    [DDPL_BFN_FMAX] = BFN_SET(FMAX),
    [DDPL_BFN_FMIN] = BFN_SET(FMIN),
    [DDPL_BFN_ATAN2] = BFN_FLOAT_SET(ATAN2),
    [DDPL_BFN_HYPOT] = BFN_FLOAT_SET(HYPOT),
    [DDPL_BFN_LOGADDEXP] = BFN_FLOAT_SET(LOGADDEXP),
    [DDPL_BFN_LOGADDEXP2] = BFN_FLOAT_SET(LOGADDEXP2),
    [DDPL_BFN_XLOGY] = BFN_FLOAT_SET(XLOGY),
    [DDPL_BFN_COPYSIGN] = BFN_FLOAT_SET(COPYSIGN),
    [DDPL_BFN_BITWISE_AND] = BFN_INT_SET(BITWISE_AND),
    [DDPL_BFN_BITWISE_OR] = BFN_INT_SET(BITWISE_OR),
    [DDPL_BFN_BITWISE_XOR] = BFN_INT_SET(BITWISE_XOR),
    [DDPL_BFN_LEFT_SHIFT] = BFN_INT_SET(LEFT_SHIFT),
    [DDPL_BFN_RIGHT_SHIFT] = BFN_INT_SET(RIGHT_SHIFT),
};

int cpu_binary_fn(ddpl_tensor **out, ddpl_tensor **in, const void *params)
{
    const ddpl_binary_fn_params *p = params;
    if (!p || p->fn < 0 || p->fn >= DDPL_BFN_COUNT)
        return ddpl_error("binary_fn: unknown function %d", p ? p->fn : -1);
    const cpu_loop_set *set = &binary_sets[p->fn];
    ddpl_dtype dt = (ddpl_dtype)in[0]->dtype;
    if (!set->f32 && ddpl_dtype_is_floating(dt))
        return ddpl_error("%s: not implemented for dtype %s", ddpl_binary_fn_name(p->fn),
                          ddpl_dtype_name(dt));
    cpu_loop_ctx ctx = {0};
    return cpu_run_pointwise(ddpl_binary_fn_name(p->fn), set, out, 2, in, &ctx);
}
