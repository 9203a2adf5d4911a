/* cuda/cuda_softmax.cu: softmax and log_softmax (forward and backward) and the negative
 * log-likelihood loss (forward and backward) on CUDA.
 * defines: cuda_launch_softmax, cuda_launch_softmax_backward, cuda_launch_nll_loss,
 *          cuda_launch_nll_loss_backward.
 *
 * Softmax: x is contiguous, seen as (outer, D, inner). The softmax dim last (inner == 1, the
 * usual case) runs one warp per row for D <= 1024, else one block per row; each thread keeps
 * an online (max m, sum s of exp(x - m)) pair over its elements (Milakov & Gimelshein, "Online
 * normalizer calculation for softmax", 2018), pairs are merged by shuffles (and shared memory
 * across warps), then a second pass writes y = exp(x - m) / s, or (x - m) - log(s). Inner dims
 * (inner > 1) run one thread per (outer, inner) column: neighbouring threads read neighbouring
 * addresses. Accumulation in float (double for float64). As cpu_softmax.c: an all -inf row gives
 * NaN, a NaN anywhere makes the row NaN. Gradients (y the output, g the incoming gradient):
 *   softmax:     dx = y * (g - sum(g * y))
 *   log_softmax: dx = g - exp(y) * sum(g)
 * NLL: logp (N,C,S), target (N,S): loss = -weight[t] * logp[n,t,s], 0 where t == ignore_index;
 * 'mean' divides by total_weight. The sums run in one block of 1024 threads in double with a
 * fixed order (deterministic); targets out of range are recorded (cuda_index.h). */
#include "cuda_index.h"
#include "cuda_softmax.h"
#include "cuda_typed.cuh"

__device__ __forceinline__ float exp_(float v)
{
    return expf(v);
}
__device__ __forceinline__ double exp_(double v)
{
    return exp(v);
}
__device__ __forceinline__ float log_(float v)
{
    return logf(v);
}
__device__ __forceinline__ double log_(double v)
{
    return log(v);
}

/* Adds element v to the online pair (m, s). m never becomes NaN (NaN > m is false); a NaN v
 * makes s NaN instead, which then spreads to the whole row. -inf adds nothing (and would give
 * exp(-inf - -inf) = NaN when m is -inf too). */
template <typename A> __device__ __forceinline__ void ms_add(A &m, A &s, A v)
{
    if (v > m) {
        s = s * exp_(m - v) + (A)1;
        m = v;
    } else if (v != -(A)INFINITY) {
        s += exp_(v - m);
    }
}

/* Merges (m2, s2) into (m, s). Symmetric (the same result whichever side is which), so after
 * an xor-shuffle reduction every lane holds identical values. */
template <typename A> __device__ __forceinline__ void ms_merge(A &m, A &s, A m2, A s2)
{
    if (m2 > m) {
        s = s * exp_(m - m2) + s2;
        m = m2;
    } else if (m2 == m) {
        s = s + s2;
    } else {
        s = s + s2 * exp_(m2 - m);
    }
}

template <typename A> __device__ __forceinline__ void warp_ms(A &m, A &s)
{
    for (int o = CUDA_WARP / 2; o > 0; o >>= 1) {
        A m2 = __shfl_xor_sync(0xffffffffu, m, o), s2 = __shfl_xor_sync(0xffffffffu, s, o);
        ms_merge(m, s, m2, s2);
    }
}

/* Writes one row (or column, element stride st) of D outputs from its (m, s). */
template <typename T, typename A, bool LOG>
__device__ __forceinline__ void sm_write(T *y, const T *x, int64_t i, A m, A s)
{
    if (LOG)
        y[i] = from_acc<T>((to_acc<A>(x[i]) - m) - log_(s));
    else
        y[i] = from_acc<T>(exp_(to_acc<A>(x[i]) - m) / s);
}

/* ---- forward ---- */
template <typename T, bool LOG>
__global__ void softmax_warp_kernel(T *y, const T *x, int64_t rows, int64_t D)
{
    typedef typename acc_of<T>::type A;
    int lane = threadIdx.x % CUDA_WARP;
    int64_t warps = (int64_t)gridDim.x * (blockDim.x / CUDA_WARP);
    for (int64_t r = (blockIdx.x * (int64_t)blockDim.x + threadIdx.x) / CUDA_WARP; r < rows;
         r += warps) {
        const T *xr = x + r * D;
        T *yr = y + r * D;
        A m = -(A)INFINITY, s = 0;
        for (int64_t i = lane; i < D; i += CUDA_WARP) ms_add(m, s, to_acc<A>(xr[i]));
        warp_ms(m, s);
        if (m == -(A)INFINITY) m = 0; /* an all -inf row: 0/0 = NaN, as the CPU */
        for (int64_t i = lane; i < D; i += CUDA_WARP) sm_write<T, A, LOG>(yr, xr, i, m, s);
    }
}

/* One block per row (blocks stride over rows; the loop is uniform over the block). */
template <typename T, bool LOG>
__global__ void softmax_block_kernel(T *y, const T *x, int64_t rows, int64_t D)
{
    typedef typename acc_of<T>::type A;
    __shared__ A sm[CUDA_WARP], ss[CUDA_WARP];
    int lane = threadIdx.x % CUDA_WARP, warp = threadIdx.x / CUDA_WARP;
    int nwarps = blockDim.x / CUDA_WARP;
    for (int64_t r = blockIdx.x; r < rows; r += gridDim.x) {
        const T *xr = x + r * D;
        T *yr = y + r * D;
        A m = -(A)INFINITY, s = 0;
        for (int64_t i = threadIdx.x; i < D; i += blockDim.x) ms_add(m, s, to_acc<A>(xr[i]));
        warp_ms(m, s);
        if (lane == 0) sm[warp] = m, ss[warp] = s;
        __syncthreads();
        m = sm[0], s = ss[0];
        for (int w = 1; w < nwarps; w++) ms_merge(m, s, sm[w], ss[w]); /* same order everywhere */
        __syncthreads(); /* sm/ss are rewritten for the next row */
        if (m == -(A)INFINITY) m = 0;
        for (int64_t i = threadIdx.x; i < D; i += blockDim.x) sm_write<T, A, LOG>(yr, xr, i, m, s);
    }
}

/* One thread per (outer, inner) column of D elements, element stride inner. */
template <typename T, bool LOG>
__global__ void softmax_cols_kernel(T *y, const T *x, int64_t outer, int64_t D, int64_t inner)
{
    typedef typename acc_of<T>::type A;
    for (int64_t c = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; c < outer * inner;
         c += (int64_t)gridDim.x * blockDim.x) {
        int64_t base = c / inner * D * inner + c % inner;
        const T *xc = x + base;
        T *yc = y + base;
        A m = -(A)INFINITY, s = 0;
        for (int64_t d = 0; d < D; d++) ms_add(m, s, to_acc<A>(xc[d * inner]));
        if (m == -(A)INFINITY) m = 0;
        for (int64_t d = 0; d < D; d++) sm_write<T, A, LOG>(yc, xc, d * inner, m, s);
    }
}

static unsigned row_blocks(int64_t rows)
{
    return (unsigned)(rows < 65535 * 32 ? rows : 65535 * 32);
}

template <typename T, bool LOG>
static int softmax_typed(T *y, const T *x, int64_t outer, int64_t D, int64_t inner)
{
    cudaStream_t st = cuda_stream();
    if (inner > 1)
        softmax_cols_kernel<T, LOG>
            <<<cuda_blocks(outer * inner), CUDA_THREADS, 0, st>>>(y, x, outer, D, inner);
    else if (D <= 1024)
        softmax_warp_kernel<T, LOG>
            <<<cuda_blocks(outer * CUDA_WARP), CUDA_THREADS, 0, st>>>(y, x, outer, D);
    else
        softmax_block_kernel<T, LOG><<<row_blocks(outer), CUDA_THREADS, 0, st>>>(y, x, outer, D);
    return cuda_check(cudaGetLastError(), LOG ? "log_softmax" : "softmax");
}

extern "C" int cuda_launch_softmax(void *y, const void *x, int dtype, int64_t outer, int64_t D,
                                   int64_t inner, bool log)
{
    if (outer == 0 || D == 0 || inner == 0) return 0;
    int rc = -1;
    CUDA_DISPATCH_FLOAT(dtype, rc = ddpl_error("softmax: unsupported dtype %d on cuda", dtype), {
        rc =
            log ? softmax_typed<scalar_t, true>((scalar_t *)y, (const scalar_t *)x, outer, D, inner)
                : softmax_typed<scalar_t, false>((scalar_t *)y, (const scalar_t *)x, outer, D,
                                                 inner);
    })
    return rc;
}

/* ---- backward ---- */
/* term of the row sum: g (log_softmax) or g * y (softmax) */
template <typename A, bool LOG> __device__ __forceinline__ A bwd_term(A g, A y)
{
    return LOG ? g : g * y;
}

template <typename T, typename A, bool LOG>
__device__ __forceinline__ void bwd_write(T *dx, const T *g, const T *y, int64_t i, A s)
{
    A gv = to_acc<A>(g[i]), yv = to_acc<A>(y[i]);
    dx[i] = from_acc<T>(LOG ? gv - exp_(yv) * s : yv * (gv - s));
}

template <typename T, bool LOG>
__global__ void softmax_bwd_warp_kernel(T *dx, const T *g, const T *y, int64_t rows, int64_t D)
{
    typedef typename acc_of<T>::type A;
    int lane = threadIdx.x % CUDA_WARP;
    int64_t warps = (int64_t)gridDim.x * (blockDim.x / CUDA_WARP);
    for (int64_t r = (blockIdx.x * (int64_t)blockDim.x + threadIdx.x) / CUDA_WARP; r < rows;
         r += warps) {
        int64_t o = r * D;
        A s = 0;
        for (int64_t i = lane; i < D; i += CUDA_WARP)
            s += bwd_term<A, LOG>(to_acc<A>(g[o + i]), to_acc<A>(y[o + i]));
        s = warp_sum(s);
        for (int64_t i = lane; i < D; i += CUDA_WARP)
            bwd_write<T, A, LOG>(dx + o, g + o, y + o, i, s);
    }
}

template <typename T, bool LOG>
__global__ void softmax_bwd_block_kernel(T *dx, const T *g, const T *y, int64_t rows, int64_t D)
{
    typedef typename acc_of<T>::type A;
    __shared__ A partial[CUDA_WARP];
    int lane = threadIdx.x % CUDA_WARP, warp = threadIdx.x / CUDA_WARP;
    int nwarps = blockDim.x / CUDA_WARP;
    for (int64_t r = blockIdx.x; r < rows; r += gridDim.x) {
        int64_t o = r * D;
        A s = 0;
        for (int64_t i = threadIdx.x; i < D; i += blockDim.x)
            s += bwd_term<A, LOG>(to_acc<A>(g[o + i]), to_acc<A>(y[o + i]));
        s = warp_sum(s);
        if (lane == 0) partial[warp] = s;
        __syncthreads();
        s = partial[0];
        for (int w = 1; w < nwarps; w++) s += partial[w];
        __syncthreads();
        for (int64_t i = threadIdx.x; i < D; i += blockDim.x)
            bwd_write<T, A, LOG>(dx + o, g + o, y + o, i, s);
    }
}

template <typename T, bool LOG>
__global__ void softmax_bwd_cols_kernel(T *dx, const T *g, const T *y, int64_t outer, int64_t D,
                                        int64_t inner)
{
    typedef typename acc_of<T>::type A;
    for (int64_t c = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; c < outer * inner;
         c += (int64_t)gridDim.x * blockDim.x) {
        int64_t base = c / inner * D * inner + c % inner;
        A s = 0;
        for (int64_t d = 0; d < D; d++)
            s += bwd_term<A, LOG>(to_acc<A>(g[base + d * inner]), to_acc<A>(y[base + d * inner]));
        for (int64_t d = 0; d < D; d++)
            bwd_write<T, A, LOG>(dx + base, g + base, y + base, d * inner, s);
    }
}

template <typename T, bool LOG>
static int softmax_bwd_typed(T *dx, const T *g, const T *y, int64_t outer, int64_t D, int64_t inner)
{
    cudaStream_t st = cuda_stream();
    if (inner > 1)
        softmax_bwd_cols_kernel<T, LOG>
            <<<cuda_blocks(outer * inner), CUDA_THREADS, 0, st>>>(dx, g, y, outer, D, inner);
    else if (D <= 1024)
        softmax_bwd_warp_kernel<T, LOG>
            <<<cuda_blocks(outer * CUDA_WARP), CUDA_THREADS, 0, st>>>(dx, g, y, outer, D);
    else
        softmax_bwd_block_kernel<T, LOG>
            <<<row_blocks(outer), CUDA_THREADS, 0, st>>>(dx, g, y, outer, D);
    return cuda_check(cudaGetLastError(), LOG ? "log_softmax_backward" : "softmax_backward");
}

extern "C" int cuda_launch_softmax_backward(void *dx, const void *g, const void *y, int dtype,
                                            int64_t outer, int64_t D, int64_t inner, bool log)
{
    if (outer == 0 || D == 0 || inner == 0) return 0;
    int rc = -1;
    CUDA_DISPATCH_FLOAT(
        dtype, rc = ddpl_error("softmax_backward: unsupported dtype %d on cuda", dtype), {
            const scalar_t *gp = (const scalar_t *)g, *yp = (const scalar_t *)y;
            rc = log ? softmax_bwd_typed<scalar_t, true>((scalar_t *)dx, gp, yp, outer, D, inner)
                     : softmax_bwd_typed<scalar_t, false>((scalar_t *)dx, gp, yp, outer, D, inner);
        })
    return rc;
}

/* ---- nll_loss ---- */
enum { NLL_THREADS = 1024 };

/* reduction none: loss[e] for each (n, s) = e; bad targets are left to nll_sum_kernel */
template <typename T>
__global__ void nll_none_kernel(T *loss, const T *logp, const long long *target, const T *weight,
                                int64_t N, int64_t C, int64_t S, long long ignore)
{
    typedef typename acc_of<T>::type A;
    for (int64_t e = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; e < N * S;
         e += (int64_t)gridDim.x * blockDim.x) {
        long long t = target[e];
        A l = 0;
        if (t != ignore && t >= 0 && t < C) {
            A w = weight ? to_acc<A>(weight[t]) : (A)1;
            l = -w * to_acc<A>(logp[(e / S * C + t) * S + e % S]);
        }
        loss[e] = from_acc<T>(l);
    }
}

/* One block: total weight (and, unless none, the reduced loss), in double and a fixed order;
 * records the first bad target. */
template <typename T>
__global__ void nll_sum_kernel(T *loss, T *total, const T *logp, const long long *target,
                               const T *weight, int64_t N, int64_t C, int64_t S, long long ignore,
                               bool none, bool mean, unsigned long long *flag)
{
    typedef typename acc_of<T>::type A;
    __shared__ double psum[CUDA_WARP], ptot[CUDA_WARP];
    double sum = 0, tot = 0;
    for (int64_t e = threadIdx.x; e < N * S; e += blockDim.x) {
        long long t = target[e];
        if (t == ignore) continue;
        if (t < 0 || t >= C) {
            atomicMin(flag, (unsigned long long)e);
            continue;
        }
        double w = weight ? (double)to_acc<A>(weight[t]) : 1.0;
        sum += -w * (double)to_acc<A>(logp[(e / S * C + t) * S + e % S]);
        tot += w;
    }
    int lane = threadIdx.x % CUDA_WARP, warp = threadIdx.x / CUDA_WARP;
    sum = warp_sum(sum);
    tot = warp_sum(tot);
    if (lane == 0) psum[warp] = sum, ptot[warp] = tot;
    __syncthreads();
    if (threadIdx.x == 0) {
        sum = tot = 0;
        for (int w = 0; w < (int)(blockDim.x / CUDA_WARP); w++) sum += psum[w], tot += ptot[w];
        if (!none) loss[0] = from_acc<T>((A)(mean ? sum / tot : sum)); /* all ignored: NaN */
        total[0] = from_acc<T>((A)tot);
    }
}

extern "C" int cuda_launch_nll_loss(void *loss, void *total, const void *logp,
                                    const int64_t *target, const void *weight, int dtype, int64_t N,
                                    int64_t C, int64_t S, bool none, bool mean,
                                    int64_t ignore_index, void *flag)
{
    cudaStream_t st = cuda_stream();
    const long long *tg = (const long long *)target;
    int rc = -1;
    CUDA_DISPATCH_FLOAT(dtype, rc = ddpl_error("nll_loss: unsupported dtype %d on cuda", dtype), {
        const scalar_t *lp = (const scalar_t *)logp, *w = (const scalar_t *)weight;
        rc = 0;
        if (none && N * S > 0) {
            nll_none_kernel<scalar_t><<<cuda_blocks(N * S), CUDA_THREADS, 0, st>>>(
                (scalar_t *)loss, lp, tg, w, N, C, S, ignore_index);
            rc = cuda_check(cudaGetLastError(), "nll_loss");
        }
        if (rc == 0) {
            nll_sum_kernel<scalar_t>
                <<<1, NLL_THREADS, 0, st>>>((scalar_t *)loss, (scalar_t *)total, lp, tg, w, N, C, S,
                                            ignore_index, none, mean, (unsigned long long *)flag);
            rc = cuda_check(cudaGetLastError(), "nll_loss");
        }
    })
    return rc;
}

/* dlogp (zeroed first) at each non-ignored target <- -weight[t] * grad (/ total for mean) */
template <typename T>
__global__ void nll_backward_kernel(T *dlogp, const T *grad, const long long *target,
                                    const T *weight, const T *total, int64_t N, int64_t C,
                                    int64_t S, long long ignore, bool none, bool mean,
                                    unsigned long long *flag)
{
    typedef typename acc_of<T>::type A;
    for (int64_t e = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; e < N * S;
         e += (int64_t)gridDim.x * blockDim.x) {
        long long t = target[e];
        if (t == ignore) continue;
        if (t < 0 || t >= C) {
            atomicMin(flag, (unsigned long long)e);
            continue;
        }
        double w = weight ? (double)to_acc<A>(weight[t]) : 1.0;
        double gs = (double)to_acc<A>(grad[none ? e : 0]);
        if (mean) gs /= (double)to_acc<A>(total[0]);
        dlogp[(e / S * C + t) * S + e % S] = from_acc<T>((A)(-w * gs));
    }
}

extern "C" int cuda_launch_nll_loss_backward(void *dlogp, const void *grad, const int64_t *target,
                                             const void *weight, const void *total, int dtype,
                                             int64_t N, int64_t C, int64_t S, bool none, bool mean,
                                             int64_t ignore_index, void *flag)
{
    cudaStream_t st = cuda_stream();
    size_t esz = dtype == DDPL_FLOAT64 ? 8 : dtype == DDPL_FLOAT32 ? 4 : 2;
    if (N * C * S > 0 && cuda_check(cudaMemsetAsync(dlogp, 0, (size_t)(N * C * S) * esz, st),
                                    "nll_loss_backward") < 0)
        return -1;
    if (N * S == 0) return 0;
    const long long *tg = (const long long *)target;
    int rc = -1;
    CUDA_DISPATCH_FLOAT(
        dtype, rc = ddpl_error("nll_loss_backward: unsupported dtype %d on cuda", dtype), {
            nll_backward_kernel<scalar_t><<<cuda_blocks(N * S), CUDA_THREADS, 0, st>>>(
                (scalar_t *)dlogp, (const scalar_t *)grad, tg, (const scalar_t *)weight,
                (const scalar_t *)total, N, C, S, ignore_index, none, mean,
                (unsigned long long *)flag);
            rc = cuda_check(cudaGetLastError(), "nll_loss_backward");
        })
    return rc;
}
