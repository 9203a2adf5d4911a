/* cuda/cuda_pointwise.cu: elementwise CUDA kernels that create or combine values: binary
 * arithmetic and comparisons with broadcasting, where, fill, copy with dtype conversion,
 * arange. Semantics follow the CPU kernels (cpu/cpu_pointwise.c, cpu/cpu_memory.c): float32 and
 * the 16-bit floats compute in float, float64 in double, integer dtypes and bool in wrapping
 * int64; maximum/minimum propagate NaN; comparisons write bool.
 * defines: cuda_pw_binary, cuda_pw_where, cuda_pw_fill, cuda_pw_copy, cuda_pw_arange. */
#include <string.h>

#include "cuda_pointwise.cuh"

/* The op scalar p0 in compute type A. */
template <typename A> __device__ static inline A pw_p0(const cuda_pw_scalars &s);
template <> __device__ inline float pw_p0<float>(const cuda_pw_scalars &s)
{
    return s.f0;
}
template <> __device__ inline double pw_p0<double>(const cuda_pw_scalars &s)
{
    return s.d0;
}
template <> __device__ inline long long pw_p0<long long>(const cuda_pw_scalars &s)
{
    return (long long)s.i0;
}

typedef unsigned long long pw_u64; /* integer arithmetic wraps: computed unsigned */

/* Integer power by squaring; negative exponents give 0 except for bases 1 and -1 (PyTorch). */
__device__ static inline long long pw_ipow(long long a, long long b)
{
    if (b < 0) return a == 1 ? 1 : a == -1 ? ((b & 1) ? -1 : 1) : 0;
    pw_u64 r = 1, base = (pw_u64)a;
    while (b) {
        if (b & 1) r *= base;
        base *= base;
        b >>= 1;
    }
    return (long long)r;
}

#define PW_INT(A) std::is_integral<A>::value

struct op_add {
    template <typename A> __device__ A operator()(A a, A b, const cuda_pw_scalars &s) const
    {
        if constexpr (PW_INT(A))
            return (A)((pw_u64)a + (pw_u64)pw_p0<A>(s) * (pw_u64)b);
        else
            return a + pw_p0<A>(s) * b;
    }
};
struct op_sub {
    template <typename A> __device__ A operator()(A a, A b, const cuda_pw_scalars &s) const
    {
        if constexpr (PW_INT(A))
            return (A)((pw_u64)a - (pw_u64)pw_p0<A>(s) * (pw_u64)b);
        else
            return a - pw_p0<A>(s) * b;
    }
};
struct op_mul {
    template <typename A> __device__ A operator()(A a, A b, const cuda_pw_scalars &) const
    {
        if constexpr (PW_INT(A))
            return (A)((pw_u64)a * (pw_u64)b);
        else
            return a * b;
    }
};
struct op_div { /* floating only: the ops layer computes integer division in float */
    template <typename A> __device__ A operator()(A a, A b, const cuda_pw_scalars &) const
    {
        return a / b;
    }
};
struct op_pow {
    template <typename A> __device__ A operator()(A a, A b, const cuda_pw_scalars &) const
    {
        if constexpr (PW_INT(A))
            return pw_ipow(a, b);
        else if constexpr (std::is_same<A, float>::value)
            return b == 2 ? a * a : powf(a, b);
        else
            return b == 2 ? a * a : pow(a, b);
    }
};
/* a NaN on either side wins, as torch.maximum/minimum */
struct op_maximum {
    template <typename A> __device__ A operator()(A a, A b, const cuda_pw_scalars &) const
    {
        return (a != a || a > b) ? a : b;
    }
};
struct op_minimum {
    template <typename A> __device__ A operator()(A a, A b, const cuda_pw_scalars &) const
    {
        return (a != a || a < b) ? a : b;
    }
};
#define PW_COMPARE(name, OPR)                                                                      \
    struct name {                                                                                  \
        template <typename A>                                                                      \
        __device__ long long operator()(A a, A b, const cuda_pw_scalars &) const                   \
        {                                                                                          \
            return (long long)(a OPR b);                                                           \
        }                                                                                          \
    };
PW_COMPARE(op_eq, ==)
PW_COMPARE(op_ne, !=)
PW_COMPARE(op_lt, <)
PW_COMPARE(op_le, <=)
PW_COMPARE(op_gt, >)
PW_COMPARE(op_ge, >=)

static int pw_bad_dtype(const char *what, int dt)
{
    return ddpl_error("%s: not implemented for dtype %s on cuda", what,
                      ddpl_dtype_name((ddpl_dtype)dt));
}

template <typename Op>
static int pw_arith(const char *what, int dt, void *out, const void *const *ins,
                    const cuda_pw_geom *g, const cuda_pw_scalars &s)
{
    PW_DISPATCH_ALL(dt, return pw_bad_dtype(what, dt),
                    return pw_launch<2, scalar_t, scalar_t>(what, (scalar_t *)out, ins, g, Op(), s))
    return 0;
}

template <typename Op>
static int pw_float_arith(const char *what, int dt, void *out, const void *const *ins,
                          const cuda_pw_geom *g, const cuda_pw_scalars &s)
{
    PW_DISPATCH_FLOAT(
        dt, return pw_bad_dtype(what, dt),
        return pw_launch<2, scalar_t, scalar_t>(what, (scalar_t *)out, ins, g, Op(), s))
    return 0;
}

template <typename Op>
static int pw_compare(const char *what, int dt, void *out, const void *const *ins,
                      const cuda_pw_geom *g, const cuda_pw_scalars &s)
{
    PW_DISPATCH_ALL(dt, return pw_bad_dtype(what, dt),
                    return pw_launch<2, pw_bool, scalar_t>(what, (pw_bool *)out, ins, g, Op(), s))
    return 0;
}

extern "C" int cuda_pw_binary(const char *what, cuda_pw_binop op, int dtype, int out_dtype,
                              void *out, const void *a, const void *b, const cuda_pw_geom *g,
                              const cuda_pw_scalars *s)
{
    const void *ins[2] = {a, b};
    bool compare = op >= CUDA_PW_EQ;
    if (out_dtype != (compare ? (int)DDPL_BOOL : dtype))
        return ddpl_error("%s: cuda kernel expects a %s output for %s inputs, got %s", what,
                          compare ? "bool" : ddpl_dtype_name((ddpl_dtype)dtype),
                          ddpl_dtype_name((ddpl_dtype)dtype),
                          ddpl_dtype_name((ddpl_dtype)out_dtype));
    switch (op) {
    case CUDA_PW_ADD:
        return pw_arith<op_add>(what, dtype, out, ins, g, *s);
    case CUDA_PW_SUB:
        return pw_arith<op_sub>(what, dtype, out, ins, g, *s);
    case CUDA_PW_MUL:
        return pw_arith<op_mul>(what, dtype, out, ins, g, *s);
    case CUDA_PW_DIV:
        return pw_float_arith<op_div>(what, dtype, out, ins, g, *s);
    case CUDA_PW_POW:
        return pw_arith<op_pow>(what, dtype, out, ins, g, *s);
    case CUDA_PW_MAXIMUM:
        return pw_arith<op_maximum>(what, dtype, out, ins, g, *s);
    case CUDA_PW_MINIMUM:
        return pw_arith<op_minimum>(what, dtype, out, ins, g, *s);
    case CUDA_PW_EQ:
        return pw_compare<op_eq>(what, dtype, out, ins, g, *s);
    case CUDA_PW_NE:
        return pw_compare<op_ne>(what, dtype, out, ins, g, *s);
    case CUDA_PW_LT:
        return pw_compare<op_lt>(what, dtype, out, ins, g, *s);
    case CUDA_PW_LE:
        return pw_compare<op_le>(what, dtype, out, ins, g, *s);
    case CUDA_PW_GT:
        return pw_compare<op_gt>(what, dtype, out, ins, g, *s);
    case CUDA_PW_GE:
        return pw_compare<op_ge>(what, dtype, out, ins, g, *s);
    }
    return ddpl_error("%s: unknown binary op %d", what, (int)op);
}

/* ---- where: a select of raw T-sized elements (T: an unsigned type of the element size) ---- */
template <typename T>
__global__ static void where_flat_kernel(T *out, const unsigned char *c, const T *x, const T *y,
                                         int64_t n)
{
    for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < n;
         i += (int64_t)gridDim.x * blockDim.x)
        out[i] = c[i] ? x[i] : y[i];
}

template <typename T, typename I>
__global__ static void where_strided_kernel(T *out, const unsigned char *c, const T *x, const T *y,
                                            I n, pw_geom_dev<I> g)
{
    typedef typename std::conditional<sizeof(I) == 4, unsigned, unsigned long long>::type U;
    const U stride = (U)gridDim.x * blockDim.x;
    for (U i = (U)blockIdx.x * blockDim.x + threadIdx.x; i < (U)n; i += stride) {
        I off[4] = {0, 0, 0, 0};
        I rest = (I)i;
        for (int d = g.ndim - 1; d >= 0; d--) {
            I k = rest % g.sizes[d];
            rest /= g.sizes[d];
#pragma unroll
            for (int j = 0; j < 4; j++) off[j] += k * g.strides[j][d];
        }
        out[off[0]] = c[off[1]] ? x[off[2]] : y[off[3]];
    }
}

template <typename T>
static int where_typed(void *out, const void *cond, const void *x, const void *y,
                       const cuda_pw_geom *g)
{
    cudaStream_t st = cuda_stream();
    const unsigned char *c = (const unsigned char *)cond;
    if (cuda_pw_geom_is_flat(g))
        where_flat_kernel<T><<<cuda_blocks(g->n), CUDA_THREADS, 0, st>>>((T *)out, c, (const T *)x,
                                                                         (const T *)y, g->n);
    else if (cuda_pw_geom_fits_i32(g))
        where_strided_kernel<T, int><<<cuda_blocks(g->n), CUDA_THREADS, 0, st>>>(
            (T *)out, c, (const T *)x, (const T *)y, (int)g->n, pw_geom_to_dev<int>(g));
    else
        where_strided_kernel<T, long long><<<cuda_blocks(g->n), CUDA_THREADS, 0, st>>>(
            (T *)out, c, (const T *)x, (const T *)y, (long long)g->n, pw_geom_to_dev<long long>(g));
    return cuda_check(cudaGetLastError(), "where");
}

extern "C" int cuda_pw_where(int elem_size, void *out, const void *cond, const void *x,
                             const void *y, const cuda_pw_geom *g)
{
    switch (elem_size) {
    case 1:
        return where_typed<unsigned char>(out, cond, x, y, g);
    case 2:
        return where_typed<unsigned short>(out, cond, x, y, g);
    case 4:
        return where_typed<unsigned>(out, cond, x, y, g);
    case 8:
        return where_typed<unsigned long long>(out, cond, x, y, g);
    }
    return ddpl_error("where: unsupported element size %d", elem_size);
}

/* ---- fill: the element's bytes are encoded on the host (ddpl_store_f64), so every dtype
 * gets exactly the CPU's value; contiguous outputs are written 16 bytes at a time ---- */
__global__ static void fill_vec_kernel(uint4 *out, uint4 v, int64_t n)
{
    for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < n;
         i += (int64_t)gridDim.x * blockDim.x)
        out[i] = v;
}

template <typename T, typename I>
__global__ static void fill_strided_kernel(T *out, T v, I n, pw_geom_dev<I> g)
{
    typedef typename std::conditional<sizeof(I) == 4, unsigned, unsigned long long>::type U;
    const U stride = (U)gridDim.x * blockDim.x;
    for (U i = (U)blockIdx.x * blockDim.x + threadIdx.x; i < (U)n; i += stride) {
        I off = 0, rest = (I)i;
        for (int d = g.ndim - 1; d >= 0; d--) {
            off += (rest % g.sizes[d]) * g.strides[0][d];
            rest /= g.sizes[d];
        }
        out[off] = v;
    }
}

template <typename T> static int fill_typed(uint64_t pattern, void *out, const cuda_pw_geom *g)
{
    cudaStream_t st = cuda_stream();
    T v = (T)pattern;
    int64_t n = g->n;
    if (cuda_pw_geom_is_flat(g)) {
        /* bytes all equal (zeros above all): a memset */
        unsigned char b0 = (unsigned char)pattern;
        bool same = true;
        for (size_t j = 1; j < sizeof(T); j++)
            same = same && (unsigned char)(pattern >> (8 * j)) == b0;
        if (same) return cuda_check(cudaMemsetAsync(out, b0, (size_t)n * sizeof(T), st), "fill");
        /* 16-byte stores over the aligned middle, element stores on either side */
        const int64_t per = 16 / (int64_t)sizeof(T);
        int64_t head = (int64_t)((16 - (uintptr_t)out % 16) % 16);
        if (head % (int64_t)sizeof(T) == 0 && n >= per) {
            head /= (int64_t)sizeof(T);
            int64_t nvec = (n - head) / per;
            T rep[16 / sizeof(T)];
            for (int64_t j = 0; j < per; j++) rep[j] = v;
            uint4 v4;
            memcpy(&v4, rep, 16);
            if (nvec > 0)
                fill_vec_kernel<<<cuda_blocks(nvec), CUDA_THREADS, 0, st>>>(
                    (uint4 *)((T *)out + head), v4, nvec);
            if (cuda_check(cudaGetLastError(), "fill") < 0) return -1;
            /* the head and the tail as 1-D strided fills */
            cuda_pw_geom e = *g;
            e.ndim = 1;
            e.strides[0][0] = 1;
            if (head > 0) {
                e.n = e.sizes[0] = head;
                fill_strided_kernel<T, int>
                    <<<1, CUDA_THREADS, 0, st>>>((T *)out, v, (int)head, pw_geom_to_dev<int>(&e));
            }
            int64_t tail0 = head + nvec * per;
            if (tail0 < n) {
                e.n = e.sizes[0] = n - tail0;
                fill_strided_kernel<T, int><<<1, CUDA_THREADS, 0, st>>>(
                    (T *)out + tail0, v, (int)(n - tail0), pw_geom_to_dev<int>(&e));
            }
            return cuda_check(cudaGetLastError(), "fill");
        }
    }
    if (cuda_pw_geom_fits_i32(g))
        fill_strided_kernel<T, int>
            <<<cuda_blocks(n), CUDA_THREADS, 0, st>>>((T *)out, v, (int)n, pw_geom_to_dev<int>(g));
    else
        fill_strided_kernel<T, long long><<<cuda_blocks(n), CUDA_THREADS, 0, st>>>(
            (T *)out, v, (long long)n, pw_geom_to_dev<long long>(g));
    return cuda_check(cudaGetLastError(), "fill");
}

extern "C" int cuda_pw_fill(int elem_size, uint64_t pattern, void *out, const cuda_pw_geom *g)
{
    switch (elem_size) {
    case 1:
        return fill_typed<unsigned char>(pattern, out, g);
    case 2:
        return fill_typed<unsigned short>(pattern, out, g);
    case 4:
        return fill_typed<unsigned>(pattern, out, g);
    case 8:
        return fill_typed<unsigned long long>(pattern, out, g);
    }
    return ddpl_error("fill: unsupported element size %d", elem_size);
}

/* ---- copy with conversion: load into the compute type, store with the CPU's rounding ---- */
struct op_identity {
    template <typename A> __device__ A operator()(A a, const cuda_pw_scalars &) const { return a; }
};

template <typename TO>
static int copy_from(int in_dtype, TO *out, const void *in, const cuda_pw_geom *g)
{
    const void *ins[1] = {in};
    cuda_pw_scalars s = {};
    PW_DISPATCH_ALL(in_dtype, return pw_bad_dtype("copy", in_dtype),
                    return pw_launch<1, TO, scalar_t>("copy", out, ins, g, op_identity(), s))
    return 0;
}

extern "C" int cuda_pw_copy(int out_dtype, void *out, int in_dtype, const void *in,
                            const cuda_pw_geom *g)
{
    /* same dtype, both contiguous: one asynchronous device-to-device copy */
    if (out_dtype == in_dtype && cuda_pw_geom_is_flat(g)) {
        if (out == in) return 0;
        size_t esz = ddpl_dtype_size((ddpl_dtype)out_dtype), bytes = (size_t)g->n * esz;
        /* cudaMemcpyAsync's result is undefined for overlapping ranges; ops.copy_ stages such
         * copies through a temporary, so reaching here with one is a bug upstream */
        const char *o = (const char *)out, *i = (const char *)in;
        if (o < i + bytes && i < o + bytes)
            return ddpl_error("copy on cuda: source and destination overlap (an internal error: "
                              "such copies must go through a temporary)");
        return cuda_check(cudaMemcpyAsync(out, in, bytes, cudaMemcpyDeviceToDevice, cuda_stream()),
                          "copy");
    }
    PW_DISPATCH_ALL(out_dtype, return pw_bad_dtype("copy", out_dtype),
                    return copy_from<scalar_t>(in_dtype, (scalar_t *)out, in, g))
    return 0;
}

/* ---- arange: start + i * step in double; integers rounded to nearest (llround) ---- */
template <typename T>
__global__ static void arange_kernel(T *out, int64_t n, int64_t stride, double start, double step,
                                     bool integral)
{
    for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < n;
         i += (int64_t)gridDim.x * blockDim.x) {
        double v = start + (double)i * step;
        out[i * stride] =
            integral ? pw_store<T>::from((long long)llround(v)) : pw_store<T>::from(v);
    }
}

extern "C" int cuda_pw_arange(int dtype, void *out, int64_t n, int64_t stride, double start,
                              double step)
{
    bool integral = !(dtype == DDPL_FLOAT32 || dtype == DDPL_FLOAT64 || dtype == DDPL_FLOAT16 ||
                      dtype == DDPL_BFLOAT16);
    PW_DISPATCH_ALL(dtype, return pw_bad_dtype("arange", dtype),
                    arange_kernel<scalar_t><<<cuda_blocks(n), CUDA_THREADS, 0, cuda_stream()>>>(
                        (scalar_t *)out, n, stride, start, step, integral))
    return cuda_check(cudaGetLastError(), "arange");
}
