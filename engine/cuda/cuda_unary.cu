/* cuda/cuda_unary.cu: unary elementwise CUDA kernels (neg abs sign relu clamp on every dtype;
 * exp log sqrt rsqrt sin cos tanh sigmoid gelu silu on floating dtypes) and the fused backward
 * kernels of the activations. Semantics follow cpu/cpu_unary.c: float32 and the 16-bit floats
 * compute in float with CUDA's accurate libm (not the fast intrinsics), float64 in double,
 * integers in wrapping int64; relu and clamp keep NaN; sign(NaN) is 0.
 * defines: cuda_pw_unary, cuda_pw_backward. */
#include "cuda_pointwise.cuh"

/* float/double overloads of the math functions, so each op is written once */
__device__ static inline float m_exp(float x)
{
    return expf(x);
}
__device__ static inline double m_exp(double x)
{
    return exp(x);
}
__device__ static inline float m_log(float x)
{
    return logf(x);
}
__device__ static inline double m_log(double x)
{
    return log(x);
}
__device__ static inline float m_sqrt(float x)
{
    return sqrtf(x);
}
__device__ static inline double m_sqrt(double x)
{
    return sqrt(x);
}
__device__ static inline float m_sin(float x)
{
    return sinf(x);
}
__device__ static inline double m_sin(double x)
{
    return sin(x);
}
__device__ static inline float m_cos(float x)
{
    return cosf(x);
}
__device__ static inline double m_cos(double x)
{
    return cos(x);
}
__device__ static inline float m_tanh(float x)
{
    return tanhf(x);
}
__device__ static inline double m_tanh(double x)
{
    return tanh(x);
}
__device__ static inline float m_fabs(float x)
{
    return fabsf(x);
}
__device__ static inline double m_fabs(double x)
{
    return fabs(x);
}
/* Phi(x), the standard normal CDF, accurate in the negative tail (no 1 + erf cancellation) */
__device__ static inline float m_normcdf(float x)
{
    return normcdff(x);
}
__device__ static inline double m_normcdf(double x)
{
    return normcdf(x);
}

#define PW_INT(A) std::is_integral<A>::value
typedef unsigned long long pw_u64;

#define GELU_K0     0.7978845608028654 /* sqrt(2/pi) */
#define GELU_K1     0.044715
#define INV_SQRT2PI 0.3989422804014327

/* ---- ops on every dtype ---- */
struct op_neg {
    template <typename A> __device__ A operator()(A a, const cuda_pw_scalars &) const
    {
        if constexpr (PW_INT(A))
            return (A)(0 - (pw_u64)a);
        else
            return -a;
    }
};
struct op_abs {
    template <typename A> __device__ A operator()(A a, const cuda_pw_scalars &) const
    {
        if constexpr (PW_INT(A))
            return a < 0 ? (A)(0 - (pw_u64)a) : a;
        else
            return m_fabs(a);
    }
};
struct op_sign { /* -1, 0 or 1; NaN and -0 give 0 */
    template <typename A> __device__ A operator()(A a, const cuda_pw_scalars &) const
    {
        return (A)((a > 0) - (a < 0));
    }
};
struct op_relu { /* NaN passes through */
    template <typename A> __device__ A operator()(A a, const cuda_pw_scalars &) const
    {
        return (a > 0 || a != a) ? a : (A)0;
    }
};
/* min bound first, so min > max gives max everywhere; NaN stays NaN */
struct op_clamp {
    template <typename A> __device__ A operator()(A a, const cuda_pw_scalars &s) const
    {
        A lo, hi;
        if constexpr (PW_INT(A)) {
            lo = (A)s.i0;
            hi = (A)s.i1;
        } else if constexpr (std::is_same<A, float>::value) {
            lo = s.f0;
            hi = s.f1;
        } else {
            lo = s.d0;
            hi = s.d1;
        }
        if (a != a) return a;
        A t = a < lo ? lo : a;
        return t > hi ? hi : t;
    }
};

/* ---- floating-only ops ---- */
#define PW_FLOAT_UNARY(name, EXPR)                                                                 \
    struct name {                                                                                  \
        template <typename A> __device__ A operator()(A a, const cuda_pw_scalars &) const          \
        {                                                                                          \
            return EXPR;                                                                           \
        }                                                                                          \
    };
PW_FLOAT_UNARY(op_exp, m_exp(a))
PW_FLOAT_UNARY(op_log, m_log(a))
PW_FLOAT_UNARY(op_sqrt, m_sqrt(a))
PW_FLOAT_UNARY(op_rsqrt, (A)1 / m_sqrt(a))
PW_FLOAT_UNARY(op_sin, m_sin(a))
PW_FLOAT_UNARY(op_cos, m_cos(a))
PW_FLOAT_UNARY(op_tanh, m_tanh(a))
PW_FLOAT_UNARY(op_sigmoid, (A)1 / ((A)1 + m_exp(-a)))
PW_FLOAT_UNARY(op_silu, a *((A)1 / ((A)1 + m_exp(-a))))
/* exact GELU x Phi(x); gelu(-inf) is NaN (-inf * 0) as on the CPU */
PW_FLOAT_UNARY(op_gelu_erf, a *m_normcdf(a))
/* x/2 (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3))) */
PW_FLOAT_UNARY(op_gelu_tanh,
               (A)0.5 * a * ((A)1 + m_tanh((A)GELU_K0 * (a + (A)GELU_K1 * a * a * a))))

static int pw_bad_dtype(const char *what, int dt)
{
    return ddpl_error("%s: not implemented for dtype %s on cuda", what,
                      ddpl_dtype_name((ddpl_dtype)dt));
}

template <typename Op>
static int unary_all(const char *what, int dt, void *out, const void *const *ins,
                     const cuda_pw_geom *g, const cuda_pw_scalars &s)
{
    PW_DISPATCH_ALL(dt, return pw_bad_dtype(what, dt),
                    return pw_launch<1, scalar_t, scalar_t>(what, (scalar_t *)out, ins, g, Op(), s))
    return 0;
}

template <typename Op>
static int unary_float(const char *what, int dt, void *out, const void *const *ins,
                       const cuda_pw_geom *g, const cuda_pw_scalars &s)
{
    PW_DISPATCH_FLOAT(
        dt, return pw_bad_dtype(what, dt),
        return pw_launch<1, scalar_t, scalar_t>(what, (scalar_t *)out, ins, g, Op(), s))
    return 0;
}

extern "C" int cuda_pw_unary(const char *what, cuda_pw_unop op, int dtype, void *out, const void *a,
                             const cuda_pw_geom *g, const cuda_pw_scalars *s)
{
    const void *ins[1] = {a};
    switch (op) {
    case CUDA_PW_NEG:
        return unary_all<op_neg>(what, dtype, out, ins, g, *s);
    case CUDA_PW_ABS:
        return unary_all<op_abs>(what, dtype, out, ins, g, *s);
    case CUDA_PW_SIGN:
        return unary_all<op_sign>(what, dtype, out, ins, g, *s);
    case CUDA_PW_RELU:
        return unary_all<op_relu>(what, dtype, out, ins, g, *s);
    case CUDA_PW_CLAMP:
        return unary_all<op_clamp>(what, dtype, out, ins, g, *s);
    case CUDA_PW_EXP:
        return unary_float<op_exp>(what, dtype, out, ins, g, *s);
    case CUDA_PW_LOG:
        return unary_float<op_log>(what, dtype, out, ins, g, *s);
    case CUDA_PW_SQRT:
        return unary_float<op_sqrt>(what, dtype, out, ins, g, *s);
    case CUDA_PW_RSQRT:
        return unary_float<op_rsqrt>(what, dtype, out, ins, g, *s);
    case CUDA_PW_SIN:
        return unary_float<op_sin>(what, dtype, out, ins, g, *s);
    case CUDA_PW_COS:
        return unary_float<op_cos>(what, dtype, out, ins, g, *s);
    case CUDA_PW_TANH:
        return unary_float<op_tanh>(what, dtype, out, ins, g, *s);
    case CUDA_PW_SIGMOID:
        return unary_float<op_sigmoid>(what, dtype, out, ins, g, *s);
    case CUDA_PW_GELU_ERF:
        return unary_float<op_gelu_erf>(what, dtype, out, ins, g, *s);
    case CUDA_PW_GELU_TANH:
        return unary_float<op_gelu_tanh>(what, dtype, out, ins, g, *s);
    case CUDA_PW_SILU:
        return unary_float<op_silu>(what, dtype, out, ins, g, *s);
    }
    return ddpl_error("%s: unknown unary op %d", what, (int)op);
}

/* ---- fused activation backward: a = incoming gradient, b = saved tensor ---- */
#define PW_BACKWARD(name, EXPR)                                                                    \
    struct name {                                                                                  \
        template <typename A> __device__ A operator()(A a, A b, const cuda_pw_scalars &) const     \
        {                                                                                          \
            return EXPR;                                                                           \
        }                                                                                          \
    };
/* relu: y > 0 passes the gradient (threshold_backward on the output) */
PW_BACKWARD(op_relu_bw, b > 0 ? a : (A)0)
/* sigmoid: y (1 - y) */
PW_BACKWARD(op_sigmoid_bw, a *b *((A)1 - b))
/* tanh: 1 - y^2 */
PW_BACKWARD(op_tanh_bw, a *((A)1 - b * b))

/* silu(x) = x s(x): s(x) (1 + x (1 - s(x))) */
struct op_silu_bw {
    template <typename A> __device__ A operator()(A g, A x, const cuda_pw_scalars &) const
    {
        A sg = (A)1 / ((A)1 + m_exp(-x));
        return g * (sg * ((A)1 + x * ((A)1 - sg)));
    }
};
/* exact gelu: Phi(x) + x phi(x), phi(x) = exp(-x^2/2) / sqrt(2 pi); NaN at +-inf as the CPU */
struct op_gelu_erf_bw {
    template <typename A> __device__ A operator()(A g, A x, const cuda_pw_scalars &) const
    {
        return g * (m_normcdf(x) + x * (A)INV_SQRT2PI * m_exp((A)-0.5 * x * x));
    }
};
/* tanh gelu, u = k0 (x + k1 x^3), t = tanh(u): 1/2 (1 + t) + 1/2 x (1 - t^2) k0 (1 + 3 k1 x^2) */
struct op_gelu_tanh_bw {
    template <typename A> __device__ A operator()(A g, A x, const cuda_pw_scalars &) const
    {
        A t = m_tanh((A)GELU_K0 * (x + (A)GELU_K1 * x * x * x));
        return g * ((A)0.5 * ((A)1 + t) +
                    (A)0.5 * x * ((A)1 - t * t) * (A)GELU_K0 * ((A)1 + (A)(3 * GELU_K1) * x * x));
    }
};

template <typename Op>
static int backward_float(const char *what, int dt, void *out, const void *const *ins,
                          const cuda_pw_geom *g)
{
    cuda_pw_scalars s = {};
    PW_DISPATCH_FLOAT(
        dt, return pw_bad_dtype(what, dt),
        return pw_launch<2, scalar_t, scalar_t>(what, (scalar_t *)out, ins, g, Op(), s))
    return 0;
}

extern "C" int cuda_pw_backward(const char *what, cuda_pw_bwop op, int dtype, void *out,
                                const void *grad, const void *saved, const cuda_pw_geom *g)
{
    const void *ins[2] = {grad, saved};
    switch (op) {
    case CUDA_PW_RELU_BW:
        return backward_float<op_relu_bw>(what, dtype, out, ins, g);
    case CUDA_PW_SIGMOID_BW:
        return backward_float<op_sigmoid_bw>(what, dtype, out, ins, g);
    case CUDA_PW_TANH_BW:
        return backward_float<op_tanh_bw>(what, dtype, out, ins, g);
    case CUDA_PW_SILU_BW:
        return backward_float<op_silu_bw>(what, dtype, out, ins, g);
    case CUDA_PW_GELU_ERF_BW:
        return backward_float<op_gelu_erf_bw>(what, dtype, out, ins, g);
    case CUDA_PW_GELU_TANH_BW:
        return backward_float<op_gelu_tanh_bw>(what, dtype, out, ins, g);
    }
    return ddpl_error("%s: unknown backward op %d", what, (int)op);
}
