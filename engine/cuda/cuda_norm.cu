/* cuda/cuda_norm.cu: layer_norm and batch_norm on CUDA, forward and backward.
 * defines: cuda_launch_layer_norm, cuda_launch_layer_norm_backward_dx,
 *          cuda_launch_layer_norm_backward_params, cuda_launch_batch_norm,
 *          cuda_launch_batch_norm_backward.
 *
 * Semantics are cpu_norm.c's. Statistics are two-pass (mean, then squared deviations) and
 * accumulate in nn_num<T>::acc (float, double for float64); per-row/per-channel scalars derived
 * from them (rstd, running stats, the batch_norm affine terms) are computed in double as the
 * CPU does. With xhat = (x - mean) * rstd and gw = grad * weight (weight 1 when absent):
 *   layer_norm dx = rstd * (gw - mean(gw) - xhat * mean(gw * xhat))
 *   batch_norm dx = a*g + bx*x + k (batch statistics), a*g (running statistics)
 *   dweight = sum(grad * xhat), dbias = sum(grad).
 * layer_norm: one block per row. Its dweight/dbias (sums over rows) are a two-kernel column
 * reduction: per-chunk partials, then one fixed-order sum per column, so results do not depend
 * on scheduling (no atomics). batch_norm: one block per channel does statistics, running-stat
 * update and the normalisation in one kernel. Blocks grid-stride over rows/channels. */
#include "cuda_nn_util.cuh"
#include "cuda_norm.h"

/* Threads per row of layer_norm: enough to cover typical widths (768..4096) in a few steps. */
static unsigned ln_threads(int64_t N)
{
    return N >= 2048 ? 512 : N >= 256 ? 256 : 128;
}

/* Threads per channel of batch_norm: a whole 1024-thread block when there are few channels with
 * much data each (a CNN's early layers: C = 32..64 channels of N*H*W = 10^4..10^5 values), so
 * the few busy SMs keep more loads in flight; else 256. */
static unsigned bn_threads(int64_t C, int64_t per_channel)
{
    return C < 256 && per_channel >= 8192 ? 1024 : 256;
}

/* Blocks for `rows` independent rows/channels (grid-strided beyond the cap). */
static unsigned row_blocks(int64_t rows)
{
    return (unsigned)(rows < 1 ? 1 : rows > (1 << 20) ? (1 << 20) : rows);
}

/* ---- layer_norm ---- */

/* y (M,N), mean (M), rstd (M) <- x (M,N), w (N)?, b (N)? */
template <typename T>
__global__ static void __launch_bounds__(512)
    layer_norm_forward_kernel(T *y, T *mean, T *rstd, const T *x, const T *w, const T *b, int64_t M,
                              int N, double eps)
{
    typedef nn_num<T> num;
    typedef typename num::acc A;
    for (int64_t r = blockIdx.x; r < M; r += gridDim.x) {
        const T *xr = x + r * N;
        T *yr = y + r * N;
        A s = 0;
        for (int i = threadIdx.x; i < N; i += blockDim.x) s += num::load(xr[i]);
        const A mu = block_sum(s) / (A)N;
        A ss = 0;
        for (int i = threadIdx.x; i < N; i += blockDim.x) {
            A d = num::load(xr[i]) - mu;
            ss += d * d;
        }
        const A rs = (A)(1.0 / sqrt((double)(block_sum(ss) / (A)N) + eps));
        if (threadIdx.x == 0) {
            mean[r] = num::store(mu);
            rstd[r] = num::store(rs);
        }
        for (int i = threadIdx.x; i < N; i += blockDim.x) {
            A v = (num::load(xr[i]) - mu) * rs;
            if (w) v *= num::load(w[i]);
            if (b) v += num::load(b[i]);
            yr[i] = num::store(v);
        }
    }
}

extern "C" int cuda_launch_layer_norm(void *y, void *mean, void *rstd, const void *x, const void *w,
                                      const void *b, int64_t M, int64_t N, double eps, int dtype,
                                      const char *what)
{
    if (M == 0) return 0;
    if (N > INT32_MAX)
        return ddpl_error("%s: rows of %lld elements are too long", what, (long long)N);
    CUDA_DISPATCH_FLOAT(dtype, return ddpl_error("%s: unsupported dtype", what),
                        layer_norm_forward_kernel<scalar_t>
                        <<<row_blocks(M), ln_threads(N), 0, cuda_stream()>>>(
                            (scalar_t *)y, (scalar_t *)mean, (scalar_t *)rstd, (const scalar_t *)x,
                            (const scalar_t *)w, (const scalar_t *)b, M, (int)N, eps));
    return cuda_check(cudaGetLastError(), what);
}

/* dx (M,N) <- g (M,N), x (M,N), w (N)?, mean (M), rstd (M) */
template <typename T>
__global__ static void __launch_bounds__(512)
    layer_norm_backward_dx_kernel(T *dx, const T *g, const T *x, const T *w, const T *mean,
                                  const T *rstd, int64_t M, int N)
{
    typedef nn_num<T> num;
    typedef typename num::acc A;
    for (int64_t r = blockIdx.x; r < M; r += gridDim.x) {
        const T *xr = x + r * N, *gr = g + r * N;
        T *dxr = dx + r * N;
        const A mu = num::load(mean[r]), rs = num::load(rstd[r]);
        A sgw = 0, sgwx = 0; /* sum(gw), sum(gw * xhat) */
        for (int i = threadIdx.x; i < N; i += blockDim.x) {
            A gw = num::load(gr[i]);
            if (w) gw *= num::load(w[i]);
            sgw += gw;
            sgwx += gw * (num::load(xr[i]) - mu) * rs;
        }
        block_sum2(sgw, sgwx);
        const A a = sgw / (A)N, c = sgwx / (A)N;
        for (int i = threadIdx.x; i < N; i += blockDim.x) {
            A gw = num::load(gr[i]);
            if (w) gw *= num::load(w[i]);
            dxr[i] = num::store(rs * (gw - a - (num::load(xr[i]) - mu) * rs * c));
        }
    }
}

extern "C" int cuda_launch_layer_norm_backward_dx(void *dx, const void *g, const void *x,
                                                  const void *w, const void *mean, const void *rstd,
                                                  int64_t M, int64_t N, int dtype, const char *what)
{
    if (M == 0 || N == 0) return 0;
    if (N > INT32_MAX)
        return ddpl_error("%s: rows of %lld elements are too long", what, (long long)N);
    CUDA_DISPATCH_FLOAT(
        dtype, return ddpl_error("%s: unsupported dtype", what),
        layer_norm_backward_dx_kernel<scalar_t><<<row_blocks(M), ln_threads(N), 0, cuda_stream()>>>(
            (scalar_t *)dx, (const scalar_t *)g, (const scalar_t *)x, (const scalar_t *)w,
            (const scalar_t *)mean, (const scalar_t *)rstd, M, (int)N));
    return cuda_check(cudaGetLastError(), what);
}

/* Column tile of the weight/bias gradient: 32 columns (one per lane, so a warp reads 32
 * consecutive elements of a row) by LN_TILE_ROWS row lanes. */
enum { LN_TILE_COLS = 32, LN_TILE_ROWS = 8 };

/* First pass: block (32, 8) at (column tile blockIdx.x, row chunk blockIdx.y) sums
 * grad * xhat and grad over its chunk's rows for 32 columns, into pw/pb [chunk][N]. */
template <typename T>
__global__ static void layer_norm_params_partial_kernel(typename nn_num<T>::acc *pw,
                                                        typename nn_num<T>::acc *pb, const T *g,
                                                        const T *x, const T *mean, const T *rstd,
                                                        int64_t M, int64_t N, int64_t chunk_rows)
{
    typedef nn_num<T> num;
    typedef typename num::acc A;
    __shared__ A sw[LN_TILE_ROWS][LN_TILE_COLS + 1], sb[LN_TILE_ROWS][LN_TILE_COLS + 1];
    const int tx = threadIdx.x, ty = threadIdx.y;
    const int64_t col = (int64_t)blockIdx.x * LN_TILE_COLS + tx;
    const int64_t r0 = (int64_t)blockIdx.y * chunk_rows;
    const int64_t r1 = r0 + chunk_rows < M ? r0 + chunk_rows : M;
    A aw = 0, ab = 0;
    if (col < N)
        for (int64_t r = r0 + ty; r < r1; r += LN_TILE_ROWS) {
            A gv = num::load(g[r * N + col]);
            ab += gv;
            aw += gv * (num::load(x[r * N + col]) - num::load(mean[r])) * num::load(rstd[r]);
        }
    sw[ty][tx] = aw;
    sb[ty][tx] = ab;
    __syncthreads();
    if (ty == 0 && col < N) {
        A tw = 0, tb = 0;
        for (int k = 0; k < LN_TILE_ROWS; k++) tw += sw[k][tx], tb += sb[k][tx];
        pw[blockIdx.y * N + col] = tw;
        pb[blockIdx.y * N + col] = tb;
    }
}

/* Second pass: each column sums its chunk partials in chunk order. */
template <typename T>
__global__ static void
layer_norm_params_final_kernel(T *dw, T *db, const typename nn_num<T>::acc *pw,
                               const typename nn_num<T>::acc *pb, int64_t chunks, int64_t N)
{
    typedef nn_num<T> num;
    typedef typename num::acc A;
    for (int64_t col = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; col < N;
         col += (int64_t)gridDim.x * blockDim.x) {
        A tw = 0, tb = 0;
        for (int64_t k = 0; k < chunks; k++) tw += pw[k * N + col], tb += pb[k * N + col];
        if (dw) dw[col] = num::store(tw);
        if (db) db[col] = num::store(tb);
    }
}

extern "C" int cuda_launch_layer_norm_backward_params(void *dw, void *db, void *work, const void *g,
                                                      const void *x, const void *mean,
                                                      const void *rstd, int64_t M, int64_t N,
                                                      int dtype, const char *what)
{
    if (N == 0 || (!dw && !db)) return 0;
    const int64_t chunks = cuda_ln_chunks(M), rows = cuda_ln_chunk_rows(M);
    const int64_t tiles = (N + LN_TILE_COLS - 1) / LN_TILE_COLS;
    if (tiles > INT32_MAX)
        return ddpl_error("%s: rows of %lld elements are too long", what, (long long)N);
    dim3 grid((unsigned)tiles, (unsigned)chunks), block(LN_TILE_COLS, LN_TILE_ROWS);
    /* M == 0 still runs: the partials are zeros, so dweight and dbias come out 0 */
    CUDA_DISPATCH_FLOAT(dtype, return ddpl_error("%s: unsupported dtype", what), {
        typedef typename nn_num<scalar_t>::acc A;
        A *pw = (A *)work, *pb = pw + chunks * N;
        layer_norm_params_partial_kernel<scalar_t><<<grid, block, 0, cuda_stream()>>>(
            pw, pb, (const scalar_t *)g, (const scalar_t *)x, (const scalar_t *)mean,
            (const scalar_t *)rstd, M, N, rows);
        layer_norm_params_final_kernel<scalar_t>
            <<<cuda_blocks(N), CUDA_THREADS, 0, cuda_stream()>>>((scalar_t *)dw, (scalar_t *)db, pw,
                                                                 pb, chunks, N);
    });
    return cuda_check(cudaGetLastError(), what);
}

/* ---- batch_norm ---- */

/* Calls f(offset) for every element of channel c of a contiguous (N,C,S) tensor, spread over
 * the block's threads: rows of S when they fill the block, else the flattened N*S range. */
template <typename F>
static __device__ __forceinline__ void channel_each(int64_t N, int64_t C, int64_t S, int64_t c, F f)
{
    if (S >= (int64_t)blockDim.x) {
        for (int64_t n = 0; n < N; n++) {
            const int64_t base = (n * C + c) * S;
            for (int64_t i = threadIdx.x; i < S; i += blockDim.x) f(base + i);
        }
    } else {
        const int64_t NS = N * S;
        for (int64_t j = threadIdx.x; j < NS; j += blockDim.x) {
            const int64_t n = j / S;
            f((n * C + c) * S + (j - n * S));
        }
    }
}

/* y (N,C,S), mean (C), invstd (C) <- x (N,C,S), w (C)?, b (C)?; rm/rv (C) read in eval,
 * updated when training (running variance: the unbiased estimate). */
template <typename T>
__global__ static void __launch_bounds__(1024)
    batch_norm_forward_kernel(T *y, T *mean, T *invstd, T *rm, T *rv, const T *x, const T *w,
                              const T *b, int64_t N, int64_t C, int64_t S, bool training,
                              double momentum, double eps)
{
    typedef nn_num<T> num;
    typedef typename num::acc A;
    const int64_t M = N * S;
    for (int64_t c = blockIdx.x; c < C; c += gridDim.x) {
        double mu, is;
        if (training) {
            A s = 0;
            channel_each(N, C, S, c, [&](int64_t k) { s += num::load(x[k]); });
            const A am = block_sum(s) / (A)M;
            A ss = 0;
            channel_each(N, C, S, c, [&](int64_t k) {
                A d = num::load(x[k]) - am;
                ss += d * d;
            });
            const double dev = (double)block_sum(ss);
            mu = (double)am;
            is = 1.0 / sqrt(dev / (double)M + eps);
            if (threadIdx.x == 0) {
                if (rm)
                    rm[c] =
                        num::store((A)((1 - momentum) * (double)num::load(rm[c]) + momentum * mu));
                if (rv)
                    rv[c] = num::store((A)((1 - momentum) * (double)num::load(rv[c]) +
                                           momentum * dev / (double)(M - 1)));
            }
        } else {
            mu = (double)num::load(rm[c]);
            is = 1.0 / sqrt((double)num::load(rv[c]) + eps);
        }
        if (threadIdx.x == 0) {
            mean[c] = num::store((A)mu);
            invstd[c] = num::store((A)is);
        }
        const double wc = w ? (double)num::load(w[c]) : 1.0, bc = b ? (double)num::load(b[c]) : 0.0;
        const A scale = (A)(is * wc), shift = (A)(bc - mu * is * wc);
        channel_each(N, C, S, c,
                     [&](int64_t k) { y[k] = num::store(num::load(x[k]) * scale + shift); });
    }
}

extern "C" int cuda_launch_batch_norm(void *y, void *mean, void *invstd, void *rm, void *rv,
                                      const void *x, const void *w, const void *b, int64_t N,
                                      int64_t C, int64_t S, bool training, double momentum,
                                      double eps, int dtype, const char *what)
{
    if (C == 0) return 0;
    CUDA_DISPATCH_FLOAT(dtype, return ddpl_error("%s: unsupported dtype", what),
                        batch_norm_forward_kernel<scalar_t>
                        <<<row_blocks(C), bn_threads(C, N * S), 0, cuda_stream()>>>(
                            (scalar_t *)y, (scalar_t *)mean, (scalar_t *)invstd, (scalar_t *)rm,
                            (scalar_t *)rv, (const scalar_t *)x, (const scalar_t *)w,
                            (const scalar_t *)b, N, C, S, training, momentum, eps));
    return cuda_check(cudaGetLastError(), what);
}

/* dx (N,C,S)?, dw (C)?, db (C)? <- g (N,C,S), x (N,C,S), w (C)?, mean (C), invstd (C) */
template <typename T>
__global__ static void __launch_bounds__(1024)
    batch_norm_backward_kernel(T *dx, T *dw, T *db, const T *g, const T *x, const T *w,
                               const T *mean, const T *invstd, int64_t N, int64_t C, int64_t S,
                               bool training)
{
    typedef nn_num<T> num;
    typedef typename num::acc A;
    const int64_t M = N * S;
    for (int64_t c = blockIdx.x; c < C; c += gridDim.x) {
        const A am = num::load(mean[c]);
        const double mu = (double)am, is = (double)num::load(invstd[c]);
        A sg = 0, sgx = 0; /* sum(grad), sum(grad * (x - mean)) */
        channel_each(N, C, S, c, [&](int64_t k) {
            A gv = num::load(g[k]);
            sg += gv;
            sgx += gv * (num::load(x[k]) - am);
        });
        block_sum2(sg, sgx);
        if (threadIdx.x == 0) {
            if (dw) dw[c] = num::store((A)((double)sgx * is));
            if (db) db[c] = num::store(sg);
        }
        if (!dx) continue;
        /* dx = a*g + bx*x + k with batch statistics, dx = a*g with running ones */
        const double wc = w ? (double)num::load(w[c]) : 1.0;
        const double a = wc * is;
        double bx = 0, k0 = 0;
        if (training) {
            bx = -a * is * is * (double)sgx / (double)M;
            k0 = -a * (double)sg / (double)M - bx * mu;
        }
        const A ta = (A)a, tb = (A)bx, tk = (A)k0;
        channel_each(N, C, S, c, [&](int64_t k) {
            dx[k] = num::store(ta * num::load(g[k]) + tb * num::load(x[k]) + tk);
        });
    }
}

extern "C" int cuda_launch_batch_norm_backward(void *dx, void *dw, void *db, const void *g,
                                               const void *x, const void *w, const void *mean,
                                               const void *invstd, int64_t N, int64_t C, int64_t S,
                                               bool training, int dtype, const char *what)
{
    if (C == 0 || (!dx && !dw && !db)) return 0;
    CUDA_DISPATCH_FLOAT(dtype, return ddpl_error("%s: unsupported dtype", what),
                        batch_norm_backward_kernel<scalar_t>
                        <<<row_blocks(C), bn_threads(C, N * S), 0, cuda_stream()>>>(
                            (scalar_t *)dx, (scalar_t *)dw, (scalar_t *)db, (const scalar_t *)g,
                            (const scalar_t *)x, (const scalar_t *)w, (const scalar_t *)mean,
                            (const scalar_t *)invstd, N, C, S, training));
    return cuda_check(cudaGetLastError(), what);
}
