/* cpu/cpu_math.h: math that GCC vectorises in loops: branch-free float32 exp, tanh and GELU,
 * and the libm functions libmvec has in SIMD form.
 * defines: CPU_VECTOR_MATH, CPU_VECTOR_MATH2, cpu_expf, cpu_tanhf, cpu_gelu_erff, cpu_gelu_erf_backwardf,
 *          cpu_select (and the helpers cpu_bits_to_float, cpu_float_to_bits, cpu_gauss_ratio,
 *          cpu_gelu_t, cpu_gelu_n, cpu_gelu_d).
 *
 * libm's expf/erff/tanhf are scalar calls, which cap GELU, sigmoid or softmax at a few hundred
 * million elements a second; these use only arithmetic, selects and bit moves, so a loop over
 * them becomes AVX2 or AVX-512 code. Both branches of a piecewise formula are computed and one
 * is selected. Accuracy, measured against double precision: cpu_expf within 1 ulp (results
 * below FLT_MIN flush to 0), cpu_tanhf within 2e-7 relative, GELU and its derivative as
 * described above cpu_gauss_ratio. The polynomial coefficients were fitted (weighted least
 * squares iterated towards minimax) on Chebyshev nodes against mpmath references. */
#ifndef DDPL_CPU_MATH_H
#define DDPL_CPU_MATH_H

#include <math.h>
#include <stdint.h>

/* CPU_VECTOR_MATH(fn), CPU_VECTOR_MATH2(fn) (two arguments): declare libm's fnf and fn as
 * having SIMD versions. glibc's vector math library (libmvec, linked through libm.so's
 * AS_NEEDED) has them for exp, log, the trig and hyperbolic functions, expm1, log1p, erf, atan2,
 * hypot...: with the declaration GCC vectorises a loop over fn into 8 (AVX2) or 16 (AVX-512)
 * lanes per call, 4-20x faster than a libm call per element. glibc's own headers declare them
 * so only under -ffast-math, which the engine does not use (NaN and inf behave as IEEE);
 * libmvec keeps them, within 4 ulp. Elsewhere it declares nothing. */
#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__)
#define CPU_VECTOR_MATH(fn)                                                                        \
    float fn##f(float) __attribute__((simd("notinbranch")));                                       \
    double fn(double) __attribute__((simd("notinbranch")));
#define CPU_VECTOR_MATH2(fn)                                                                       \
    float fn##f(float, float) __attribute__((simd("notinbranch")));                                \
    double fn(double, double) __attribute__((simd("notinbranch")));
#else
#define CPU_VECTOR_MATH(fn)
#define CPU_VECTOR_MATH2(fn)
#endif

static inline float cpu_bits_to_float(int32_t i)
{
    union {
        int32_t i;
        float f;
    } u = {.i = i};
    return u.f;
}

static inline int32_t cpu_float_to_bits(float f)
{
    union {
        float f;
        int32_t i;
    } u = {.f = f};
    return u.i;
}

/* c ? a : b as bit operations: GCC turns a float ?: whose operands are computed into branches
 * and copies the arithmetic into them, which it then cannot vectorise under the default
 * -ftrapping-math (the copies "could trap"). */
static inline float cpu_select(int c, float a, float b)
{
    int32_t m = -(int32_t)(c != 0);
    return cpu_bits_to_float((cpu_float_to_bits(a) & m) | (cpu_float_to_bits(b) & ~m));
}

/* e^x: x = n ln2 + r with |r| <= ln2/2 (Cody-Waite: ln2's high part has few enough bits that
 * n*hi is exact), e^r by its degree-7 Taylor polynomial (truncation < 6e-9 relative), and 2^n
 * applied as two factors 2^(n/2) because n reaches 128. Results below FLT_MIN (x < -87.34)
 * are flushed to 0 rather than made subnormal; above FLT_MAX they are inf.
 *
 * Written for GCC's vectoriser under the default -ftrapping-math: n is rounded by adding
 * 1.5*2^23 (no float-to-int conversion, which may trap on NaN); the input clamp stays within
 * the range where nothing overflows or underflows, because GCC threads the clamp into a path
 * that folds to constants and an overflowing constant counts as a possible trap; and the
 * out-of-range results are put in with bit masks, because a ?: there makes GCC move the
 * arithmetic into a branch it cannot if-convert. NaN passes the clamp and poisons the result. */
static inline float cpu_expf(float x)
{
    float xc = cpu_select(x < -87.33654f, -87.33654f, x);
    xc = cpu_select(xc > 88.72283f, 88.72283f, xc);
    const float shifter = 12582912.0f; /* 1.5 * 2^23 */
    float k = xc * 1.44269504088896341f + shifter;
    int32_t ni = cpu_float_to_bits(k) - cpu_float_to_bits(shifter); /* round(x / ln2) */
    float n = k - shifter;
    float r = xc - n * 0.693145751953125f;
    r = r - n * 1.428606765330187e-06f;
    float p = 1.0f / 5040.0f;
    p = p * r + 1.0f / 720.0f;
    p = p * r + 1.0f / 120.0f;
    p = p * r + 1.0f / 24.0f;
    p = p * r + 1.0f / 6.0f;
    p = p * r + 0.5f;
    p = p * r + 1.0f;
    p = p * r + 1.0f;
    int32_t n1 = ni / 2, n2 = ni - n1; /* each in [-63, 64]: a normal power of two */
    float res = p * cpu_bits_to_float((int32_t)((uint32_t)(n1 + 127) << 23)) *
                cpu_bits_to_float((int32_t)((uint32_t)(n2 + 127) << 23));
    int32_t over = -(int32_t)(x > 88.7228391f), under = -(int32_t)(x < -87.33654f);
    int32_t bits = (cpu_float_to_bits(res) & ~(over | under)) | (0x7f800000 & over);
    return cpu_bits_to_float(bits);
}

/* ---- GELU (exact, erf form) for float32 ----
 * With t = |x| S, S = sqrt(log2(e) / 2), e^(-x^2/2) = 2^(-t^2), and the upper tail of the
 * normal distribution is Q(|x|) = Phi(-|x|) = 2^(-t^2) R(t), where R(t) = Q e^(x^2/2) (a scaled
 * complementary error function) is smooth and decays like 1/t. R is a (3,4) rational function
 * of t, fitted (weighted minimax against mpmath) on t in [0, 11.1], |x| <= 13.07, to a relative
 * error of 4.4e-8 (1 + t^2): the weight leaves the far tail to the error that rounding x S
 * already makes there. GELU is x - |x| Q for x >= 0 and -|x| Q for x < 0, and its derivative
 * Phi + x phi is 1 + u for x >= 0 and -u for x < 0, u = |x| phi - Q: so the negative tail keeps
 * its relative accuracy (1 + erf(x/sqrt2) would cancel to nothing there).
 *
 * 2^(-t^2 - ell) = 2^m 2^(-g): m = round(-(t^2 + ell)) goes into the exponent bits, and
 * 2^(-g), |g| <= 1/2, is (c - g)/(c + g) with c(g^2) = g coth(g ln2 / 2) fitted by a quadratic
 * (relative error 3e-10), which shares the one division with R. ell takes R's leading
 * coefficient (and other constant factors) into the exponent, so both polynomials are monic.
 * That is 13 multiplies or FMAs and a division per element, plus integer operations on the
 * bits (min/max and shifts rather than float compares into masks, which on Zen 4 take the two
 * FMA pipes), against 27 and float selects for the previous exp(-t^2/2) times a polynomial in
 * 1/(1 + 0.3t), which made GELU compute-bound (0.6 ns per element on one Zen 4 core, where
 * streaming the data takes 0.33); it now runs at about memory speed.
 *
 * Errors, over every float in [-10, 10] against double precision: GELU within 4.4e-7 relative
 * for x >= -1 (1.1e-7 for x >= 1) and 6.1e-7 down to -2; below that the relative error grows
 * like 1.3e-7 x^2 (1.1e-6 at -3, 1.2e-5 at -10), the problem's own conditioning (Q's relative
 * condition number is x^2) applied to the roundings of x S and t^2, while the absolute error
 * is below 0.27 (1e-7 + 1e-6 |GELU|) everywhere. The derivative is as accurate away from its
 * zero at x = -0.7518, and within 0.49 (1e-7 + 1e-6 |derivative|) everywhere.
 * Where Q / S falls below FLT_MIN (|x| > 13.0) it is flushed to 0 (to within FLT_MIN);
 * gelu(-inf) and the derivative at +-inf are NaN (inf * 0, as in PyTorch). */

/* 2^(p - t^2 - ell) num / den for t in [0, 14], with |ell| <= 1/2 (so that t^2 + ell rounds no
 * worse than t^2), an integer p, and num / den finite, positive unless has_sign; flushed to
 * zero (or to a value below FLT_MIN) where the result is below FLT_MIN. */
static inline float cpu_gauss_ratio(float t, float ell, int p, float num, float den, int has_sign)
{
    const float shifter = 12582912.0f + (float)p; /* 1.5 * 2^23: adding it rounds to an integer */
    float y = fmaf(t, t, ell);
    float k = shifter - y;       /* 1.5 * 2^23 + p + m, m = round(-y) */
    float g = y + (k - shifter); /* exact, |g| <= 1/2 */
    float z = g * g;
    float c = (-0.00092045349f * z + 0.11552395f) * z + 2.8853901f;
    float r = ((c - g) * num) / ((c + g) * den);
    /* times 2^(p + m) through the exponent field of |r|: the low 9 bits of 1.5 * 2^23's bits are
     * zero, so bits(k) << 23 is (p + m) << 23 (mod 2^32). Where the result is below FLT_MIN the
     * sum comes out negative (or with a zero exponent field), and is clamped to 0; |p + m| < 200
     * keeps it from wrapping around. */
    int32_t rb = cpu_float_to_bits(r), sign = has_sign ? rb & INT32_MIN : 0;
    int32_t bits =
        (has_sign ? rb & 0x7fffffff : rb) + (int32_t)((uint32_t)cpu_float_to_bits(k) << 23);
    return cpu_bits_to_float((bits > 0 ? bits : 0) | sign);
}

/* t = |x| S (S = sqrt(log2(e) / 2)) clamped to 14, NaN and inf included (the callers restore
 * those); the clamp is an integer min, as nonnegative floats order like their bits. */
static inline float cpu_gelu_t(float x)
{
    int32_t tb = cpu_float_to_bits(x * 0.849321800f) & 0x7fffffff;
    int32_t tmax = 0x41600000; /* 14.0f */
    return cpu_bits_to_float(tb < tmax ? tb : tmax);
}

/* R(t) = 0.338705923 N(t) / D(t) */
static inline float cpu_gelu_n(float t)
{
    return ((t + 6.43172555f) * t + 17.3494079f) * t + 21.6793857f;
}
static inline float cpu_gelu_d(float t)
{
    return (((t + 6.41928955f) * t + 18.1798559f) * t + 25.5491012f) * t + 14.6858733f;
}

/* GELU(x) = x Phi(x) */
static inline float cpu_gelu_erff(float x)
{
    float t = cpu_gelu_t(x);
    /* Q / S = 2^(-t^2) (0.338705923 / S) N / D, the constant as 2^(-1 - 0.32627807) */
    float q = cpu_gauss_ratio(t, 0.32627807f, -1, cpu_gelu_n(t), cpu_gelu_d(t), 0);
    /* x - |x| Q for x >= 0, -|x| Q for x < 0; x - x makes gelu(-inf) (and NaN) NaN */
    int32_t neg = cpu_float_to_bits(x) >> 31;
    float v = cpu_bits_to_float((cpu_float_to_bits(x - x) & neg) | (cpu_float_to_bits(x) & ~neg));
    return v - t * q;
}

/* grad (Phi(x) + x phi(x)), the backward of GELU */
static inline float cpu_gelu_erf_backwardf(float grad, float x)
{
    float t = cpu_gelu_t(x);
    /* u = 2^(-t^2) (t / (S sqrt(2 pi)) - R) = 2^(-t^2) (0.469718639 B / D) with
     * B = t D - N / 1.38680374, brought to one fraction so that its zero (|x| = 0.7518) costs no
     * absolute accuracy; 0.469718639 is 2^(-1 - 0.09013125). */
    float b = ((((t + 6.41928955f) * t + 17.4587733f) * t + 20.9112960f) * t + 2.17551770f) * t -
              15.6326271f;
    float u = cpu_gauss_ratio(t, 0.09013125f, -1, b, cpu_gelu_d(t), 1);
    /* grad + grad u for x >= 0, -grad u for x < 0; x - x makes it NaN at +-inf (and NaN) */
    int32_t neg = cpu_float_to_bits(x) >> 31;
    float gs = cpu_bits_to_float(cpu_float_to_bits(grad) ^ (neg & INT32_MIN));
    float v = cpu_bits_to_float(cpu_float_to_bits(grad) & ~neg);
    return gs * u + v + (x - x);
}

/* tanh: for |x| < 0.625, x + x^3 P(x^2) (fitted, error 4e-9); above,
 * 1 - 2/(e^(2|x|) + 1), whose cancellation costs at most a bit there, saturating at 1 from
 * |x| = 10 (tanh(10) = 1 - 4e-9; at 9 it would round to the float just below 1). */
static inline float cpu_tanhf(float x)
{
    float t = fabsf(x), s = x * x;
    float p = -0.005717058970992016f;
    p = p * s + 0.020650601234444472f;
    p = p * s + -0.05374350296514151f;
    p = p * s + 0.13331491356002262f;
    p = p * s + -0.33333283928436463f;
    float small = x + x * s * p;
    float tc = cpu_select(t < 10.0f, t, 10.0f);
    float large = copysignf(1.0f - 2.0f / (cpu_expf(2.0f * tc) + 1.0f), x);
    return cpu_select(t >= 0.625f, large, small);
}

#endif
