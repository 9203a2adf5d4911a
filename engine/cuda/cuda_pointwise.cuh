/* cuda/cuda_pointwise.cuh: the machinery every elementwise CUDA kernel shares: storage types
 * and their compute types, conversions with the CPU's semantics, and the two loop kernels
 * (flat with 16-byte vector accesses, and strided/broadcast with 32- or 64-bit index math)
 * that apply an op functor. CUDA C++ only; included by cuda_pointwise.cu and cuda_unary.cu.
 * defines: pw_bool, pw_acc, pw_load, pw_store, pw_f64_to_i64, PW_DISPATCH_ALL,
 *          PW_DISPATCH_FLOAT, pw_launch. */
#ifndef DDPL_CUDA_POINTWISE_CUH
#define DDPL_CUDA_POINTWISE_CUH

#include <stdint.h>

#include <type_traits>

#include "cuda_common.cuh"
#include "cuda_pointwise.h"

/* ---- storage types: one C++ type per ddpl_dtype (bool differs from uint8 in conversions) */
struct pw_bool {
    unsigned char v;
};

/* Compute type of a storage type: float for float32 and the 16-bit floats, double for
 * float64, and int64 (wrapping) for every integer dtype and bool, as the CPU loops. */
template <typename T> struct pw_acc {
    typedef float type;
};
template <> struct pw_acc<double> {
    typedef double type;
};
template <> struct pw_acc<long long> {
    typedef long long type;
};
template <> struct pw_acc<int> {
    typedef long long type;
};
template <> struct pw_acc<unsigned char> {
    typedef long long type;
};
template <> struct pw_acc<short> {
    typedef long long type;
};
template <> struct pw_acc<signed char> {
    typedef long long type;
};
template <> struct pw_acc<pw_bool> {
    typedef long long type;
};

__device__ static inline float pw_load(float x)
{
    return x;
}
__device__ static inline double pw_load(double x)
{
    return x;
}
__device__ static inline float pw_load(__half x)
{
    return __half2float(x);
}
__device__ static inline float pw_load(__nv_bfloat16 x)
{
    return __bfloat162float(x);
}
__device__ static inline long long pw_load(long long x)
{
    return x;
}
__device__ static inline long long pw_load(int x)
{
    return x;
}
__device__ static inline long long pw_load(unsigned char x)
{
    return x;
}
__device__ static inline long long pw_load(short x)
{
    return x;
}
__device__ static inline long long pw_load(signed char x)
{
    return x;
}
__device__ static inline long long pw_load(pw_bool x)
{
    return x.v != 0;
}

/* Float to integer as the CPU's ddpl_store_f64: truncation toward zero, NaN to 0, out of
 * range clamped to the int64 extremes (then narrowed modulo 2^bits). */
__device__ static inline long long pw_f64_to_i64(double v)
{
    if (v != v) return 0;
    if (v >= 9.2233720368547758e18) return INT64_MAX;
    if (v <= -9.2233720368547758e18) return INT64_MIN;
    return (long long)v;
}

/* pw_store<T>::from(v): a computed float, double or int64 as storage type T, rounding as the
 * CPU does (16-bit floats from float, round to nearest even; float64 into 16-bit floats goes
 * through float32 as ddpl_store_f64 does; int64 into float32 directly, as the CPU's typed copy
 * loop). */
template <typename T> struct pw_store;
template <> struct pw_store<float> {
    __device__ static float from(float v) { return v; }
    __device__ static float from(double v) { return (float)v; }
    __device__ static float from(long long v) { return (float)v; }
};
template <> struct pw_store<double> {
    __device__ static double from(float v) { return v; }
    __device__ static double from(double v) { return v; }
    __device__ static double from(long long v) { return (double)v; }
};
template <> struct pw_store<__half> {
    __device__ static __half from(float v) { return __float2half(v); }
    __device__ static __half from(double v) { return __float2half((float)v); }
    __device__ static __half from(long long v) { return __float2half((float)(double)v); }
};
template <> struct pw_store<__nv_bfloat16> {
    __device__ static __nv_bfloat16 from(float v) { return __float2bfloat16(v); }
    __device__ static __nv_bfloat16 from(double v) { return __float2bfloat16((float)v); }
    __device__ static __nv_bfloat16 from(long long v) { return __float2bfloat16((float)(double)v); }
};
/* narrowing int64 -> int32/int16/int8/uint8 keeps the low bits (two's complement), as the CPU's
 * casts */
template <> struct pw_store<long long> {
    __device__ static long long from(float v) { return pw_f64_to_i64(v); }
    __device__ static long long from(double v) { return pw_f64_to_i64(v); }
    __device__ static long long from(long long v) { return v; }
};
template <> struct pw_store<int> {
    __device__ static int from(float v) { return (int)(unsigned)pw_f64_to_i64(v); }
    __device__ static int from(double v) { return (int)(unsigned)pw_f64_to_i64(v); }
    __device__ static int from(long long v) { return (int)(unsigned)v; }
};
template <> struct pw_store<unsigned char> {
    __device__ static unsigned char from(float v) { return (unsigned char)pw_f64_to_i64(v); }
    __device__ static unsigned char from(double v) { return (unsigned char)pw_f64_to_i64(v); }
    __device__ static unsigned char from(long long v) { return (unsigned char)v; }
};
template <> struct pw_store<short> {
    __device__ static short from(float v) { return (short)(unsigned short)pw_f64_to_i64(v); }
    __device__ static short from(double v) { return (short)(unsigned short)pw_f64_to_i64(v); }
    __device__ static short from(long long v) { return (short)(unsigned short)v; }
};
template <> struct pw_store<signed char> {
    __device__ static signed char from(float v)
    {
        return (signed char)(unsigned char)pw_f64_to_i64(v);
    }
    __device__ static signed char from(double v)
    {
        return (signed char)(unsigned char)pw_f64_to_i64(v);
    }
    __device__ static signed char from(long long v) { return (signed char)(unsigned char)v; }
};
/* bool: nonzero (NaN included) is true */
template <> struct pw_store<pw_bool> {
    __device__ static pw_bool from(float v) { return pw_bool{(unsigned char)(v != 0)}; }
    __device__ static pw_bool from(double v) { return pw_bool{(unsigned char)(v != 0)}; }
    __device__ static pw_bool from(long long v) { return pw_bool{(unsigned char)(v != 0)}; }
};

/* Runs BODY with scalar_t bound to the storage type of dtype dt (every dtype), or ELSE. */
#define PW_DISPATCH_CASE(DT, T, ...)                                                               \
    case DT: {                                                                                     \
        typedef T scalar_t;                                                                        \
        __VA_ARGS__;                                                                               \
    } break;
#define PW_DISPATCH_ALL(dt, ELSE, ...)                                                             \
    switch (dt) {                                                                                  \
        PW_DISPATCH_CASE(DDPL_FLOAT32, float, __VA_ARGS__)                                         \
        PW_DISPATCH_CASE(DDPL_FLOAT64, double, __VA_ARGS__)                                        \
        PW_DISPATCH_CASE(DDPL_FLOAT16, __half, __VA_ARGS__)                                        \
        PW_DISPATCH_CASE(DDPL_BFLOAT16, __nv_bfloat16, __VA_ARGS__)                                \
        PW_DISPATCH_CASE(DDPL_INT64, long long, __VA_ARGS__)                                       \
        PW_DISPATCH_CASE(DDPL_INT32, int, __VA_ARGS__)                                             \
        PW_DISPATCH_CASE(DDPL_UINT8, unsigned char, __VA_ARGS__)                                   \
        PW_DISPATCH_CASE(DDPL_INT16, short, __VA_ARGS__)                                           \
        PW_DISPATCH_CASE(DDPL_INT8, signed char, __VA_ARGS__)                                      \
        PW_DISPATCH_CASE(DDPL_BOOL, pw_bool, __VA_ARGS__)                                          \
    default:                                                                                       \
        ELSE;                                                                                      \
    }
#define PW_DISPATCH_FLOAT(dt, ELSE, ...)                                                           \
    switch (dt) {                                                                                  \
        PW_DISPATCH_CASE(DDPL_FLOAT32, float, __VA_ARGS__)                                         \
        PW_DISPATCH_CASE(DDPL_FLOAT64, double, __VA_ARGS__)                                        \
        PW_DISPATCH_CASE(DDPL_FLOAT16, __half, __VA_ARGS__)                                        \
        PW_DISPATCH_CASE(DDPL_BFLOAT16, __nv_bfloat16, __VA_ARGS__)                                \
    default:                                                                                       \
        ELSE;                                                                                      \
    }

/* N elements of T as one aligned access (N * sizeof(T) is 16 bytes, or less for the narrower
 * side of an op whose output and input sizes differ). */
template <typename T, int N> struct alignas(sizeof(T) * N) pw_vec {
    T v[N];
};

/* Geometry in the kernel's index type (32-bit when it fits: cuda_pw_geom_fits_i32). */
template <typename I> struct pw_geom_dev {
    int ndim;
    I sizes[DDPL_MAX_DIMS];
    I strides[CUDA_PW_MAX_OPS][DDPL_MAX_DIMS];
};

/* Input pointers of an NIN-input op (output separate). */
template <typename T, int NIN> struct pw_inputs {
    const T *p[NIN];
};

/* f(x0) or f(x0, x1) in the compute type; Op::operator() takes the scalars last. */
template <int NIN, typename Op, typename A>
__device__ static inline auto pw_apply(const Op &op, const A *x, const cuda_pw_scalars &s)
{
    if constexpr (NIN == 1)
        return op(x[0], s);
    else
        return op(x[0], x[1], s);
}

/* All operands contiguous from element 0: element i at offset i. With vec set (every pointer
 * aligned to its vector size) the body moves VEC elements per access, the remainder
 * n % VEC elements are done one by one. The grid-stride loop runs in int64 (cheap: no
 * division). */
template <int NIN, typename TO, typename TI, typename Op>
__global__ static void pw_flat_kernel(TO *out, pw_inputs<TI, NIN> in, int64_t n, bool vec, Op op,
                                      cuda_pw_scalars s)
{
    typedef typename pw_acc<TI>::type A;
    constexpr int W = sizeof(TI) > sizeof(TO) ? (int)sizeof(TI) : (int)sizeof(TO);
    constexpr int VEC = 16 / W;
    const int64_t stride = (int64_t)gridDim.x * blockDim.x;
    int64_t start = blockIdx.x * (int64_t)blockDim.x + threadIdx.x, done = 0;
    if (vec) {
        int64_t nvec = n / VEC;
        for (int64_t v = start; v < nvec; v += stride) {
            pw_vec<TI, VEC> x[NIN];
            for (int k = 0; k < NIN; k++) x[k] = ((const pw_vec<TI, VEC> *)in.p[k])[v];
            pw_vec<TO, VEC> r;
#pragma unroll
            for (int j = 0; j < VEC; j++) {
                A a[NIN];
                for (int k = 0; k < NIN; k++) a[k] = pw_load(x[k].v[j]);
                r.v[j] = pw_store<TO>::from(pw_apply<NIN>(op, a, s));
            }
            ((pw_vec<TO, VEC> *)out)[v] = r;
        }
        done = nvec * VEC;
    }
    for (int64_t i = done + start; i < n; i += stride) {
        A a[NIN];
        for (int k = 0; k < NIN; k++) a[k] = pw_load(in.p[k][i]);
        out[i] = pw_store<TO>::from(pw_apply<NIN>(op, a, s));
    }
}

/* Any strides and broadcasts: the logical index is split into coordinates once per element
 * (innermost dim first) and every operand's offset is accumulated from them. I is int (when
 * cuda_pw_geom_fits_i32; the loop index is then unsigned) or long long. */
template <int NIN, typename TO, typename TI, typename Op, typename I>
__global__ static void pw_strided_kernel(TO *out, pw_inputs<TI, NIN> in, I n, pw_geom_dev<I> g,
                                         Op op, cuda_pw_scalars s)
{
    typedef typename pw_acc<TI>::type A;
    typedef typename std::conditional<sizeof(I) == 4, unsigned, unsigned long long>::type U;
    const U stride = (U)gridDim.x * blockDim.x;
    for (U i = (U)blockIdx.x * blockDim.x + threadIdx.x; i < (U)n; i += stride) {
        I off[NIN + 1] = {0};
        I rest = (I)i;
        for (int d = g.ndim - 1; d >= 0; d--) {
            I c = rest % g.sizes[d];
            rest /= g.sizes[d];
#pragma unroll
            for (int k = 0; k <= NIN; k++) off[k] += c * g.strides[k][d];
        }
        A a[NIN];
#pragma unroll
        for (int k = 0; k < NIN; k++) a[k] = pw_load(in.p[k][off[k + 1]]);
        out[off[0]] = pw_store<TO>::from(pw_apply<NIN>(op, a, s));
    }
}

template <typename I> static inline pw_geom_dev<I> pw_geom_to_dev(const cuda_pw_geom *g)
{
    pw_geom_dev<I> d;
    d.ndim = g->ndim;
    for (int k = 0; k < CUDA_PW_MAX_OPS; k++)
        for (int j = 0; j < DDPL_MAX_DIMS; j++) d.strides[k][j] = 0;
    for (int j = 0; j < DDPL_MAX_DIMS; j++) d.sizes[j] = 1;
    for (int j = 0; j < g->ndim; j++) {
        d.sizes[j] = (I)g->sizes[j];
        for (int k = 0; k < g->nops; k++) d.strides[k][j] = (I)g->strides[k][j];
    }
    return d;
}

static inline bool pw_aligned(const void *p, size_t bytes)
{
    return ((uintptr_t)p % bytes) == 0;
}

/* Launches op over g (g->nops == NIN + 1, g->n > 0) on the compute stream: the flat kernel
 * (vectorised when every pointer is aligned) when all operands are contiguous, else the
 * strided one in 32- or 64-bit index math. */
template <int NIN, typename TO, typename TI, typename Op>
static int pw_launch(const char *what, TO *out, const void *const *ins, const cuda_pw_geom *g,
                     Op op, const cuda_pw_scalars &s)
{
    pw_inputs<TI, NIN> in;
    for (int k = 0; k < NIN; k++) in.p[k] = (const TI *)ins[k];
    cudaStream_t st = cuda_stream();
    if (cuda_pw_geom_is_flat(g)) {
        constexpr size_t W = sizeof(TI) > sizeof(TO) ? sizeof(TI) : sizeof(TO);
        constexpr size_t VEC = 16 / W;
        bool vec = pw_aligned(out, sizeof(TO) * VEC);
        for (int k = 0; k < NIN; k++) vec = vec && pw_aligned(ins[k], sizeof(TI) * VEC);
        int64_t work = vec ? (g->n + (int64_t)VEC - 1) / (int64_t)VEC : g->n;
        pw_flat_kernel<NIN, TO, TI, Op>
            <<<cuda_blocks(work), CUDA_THREADS, 0, st>>>(out, in, g->n, vec, op, s);
    } else if (cuda_pw_geom_fits_i32(g)) {
        pw_strided_kernel<NIN, TO, TI, Op, int><<<cuda_blocks(g->n), CUDA_THREADS, 0, st>>>(
            out, in, (int)g->n, pw_geom_to_dev<int>(g), op, s);
    } else {
        pw_strided_kernel<NIN, TO, TI, Op, long long><<<cuda_blocks(g->n), CUDA_THREADS, 0, st>>>(
            out, in, (long long)g->n, pw_geom_to_dev<long long>(g), op, s);
    }
    return cuda_check(cudaGetLastError(), what);
}

#endif
