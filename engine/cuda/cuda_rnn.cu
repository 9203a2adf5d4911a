/* cuda/cuda_rnn.cu: the fused LSTM and GRU cell kernels on CUDA, forward and backward.
 * defines: cuda_launch_lstm_cell, cuda_launch_lstm_cell_backward, cuda_launch_gru_cell,
 *          cuda_launch_gru_cell_backward (ops.def LSTM_CELL, LSTM_CELL_BACKWARD, GRU_CELL,
 *          GRU_CELL_BACKWARD).
 *
 * One thread per (row b, unit k) of the (B,H) state, grid-stride; the formulas are
 * cpu/cpu_rnn.c's (read its header for them), with PyTorch's gate order (LSTM i,f,g,o; GRU
 * r,z,n). float32 computes in float with the fast expf/tanhf, float64 in double. */
#include "cuda_common.cuh"
#include "cuda_rnn.h"

__device__ __forceinline__ float rnn_sigmoid(float x)
{
    return 1.f / (1.f + expf(-x));
}
__device__ __forceinline__ double rnn_sigmoid(double x)
{
    return 1.0 / (1.0 + exp(-x));
}

template <typename T>
__global__ static void lstm_cell_kernel(T *h, T *c, T *act, const T *ig, const T *hg, const T *cp,
                                        int64_t n, int64_t H)
{
    for (int64_t e = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; e < n;
         e += (int64_t)gridDim.x * blockDim.x) {
        const int64_t b = e / H, k = e % H, g0 = b * 4 * H + k;
        const T i = rnn_sigmoid(ig[g0] + hg[g0]);
        const T f = rnn_sigmoid(ig[g0 + H] + hg[g0 + H]);
        const T g = tanh(ig[g0 + 2 * H] + hg[g0 + 2 * H]);
        const T o = rnn_sigmoid(ig[g0 + 3 * H] + hg[g0 + 3 * H]);
        const T cn = f * cp[e] + i * g;
        act[g0] = i, act[g0 + H] = f, act[g0 + 2 * H] = g, act[g0 + 3 * H] = o;
        c[e] = cn;
        h[e] = o * tanh(cn);
    }
}

template <typename T>
__global__ static void lstm_cell_backward_kernel(T *da, T *dcp, const T *dh, const T *dc,
                                                 const T *act, const T *cp, const T *c, int64_t n,
                                                 int64_t H)
{
    for (int64_t e = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; e < n;
         e += (int64_t)gridDim.x * blockDim.x) {
        const int64_t b = e / H, k = e % H, g0 = b * 4 * H + k;
        const T i = act[g0], f = act[g0 + H], g = act[g0 + 2 * H], o = act[g0 + 3 * H];
        const T tc = tanh(c[e]);
        const T dct = dc[e] + dh[e] * o * (1 - tc * tc);
        da[g0] = dct * g * i * (1 - i);
        da[g0 + H] = dct * cp[e] * f * (1 - f);
        da[g0 + 2 * H] = dct * i * (1 - g * g);
        da[g0 + 3 * H] = dh[e] * tc * o * (1 - o);
        if (dcp) dcp[e] = dct * f;
    }
}

template <typename T>
__global__ static void gru_cell_kernel(T *h, T *act, const T *ig, const T *hg, const T *hp,
                                       int64_t n, int64_t H)
{
    for (int64_t e = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; e < n;
         e += (int64_t)gridDim.x * blockDim.x) {
        const int64_t b = e / H, k = e % H, g0 = b * 3 * H + k, a0 = b * 4 * H + k;
        const T r = rnn_sigmoid(ig[g0] + hg[g0]);
        const T z = rnn_sigmoid(ig[g0 + H] + hg[g0 + H]);
        const T sn = hg[g0 + 2 * H];
        const T nn = tanh(ig[g0 + 2 * H] + r * sn);
        act[a0] = r, act[a0 + H] = z, act[a0 + 2 * H] = nn, act[a0 + 3 * H] = sn;
        h[e] = (1 - z) * nn + z * hp[e];
    }
}

template <typename T>
__global__ static void gru_cell_backward_kernel(T *dx, T *ds, T *dhp, const T *dh, const T *act,
                                                const T *hp, int64_t n, int64_t H)
{
    for (int64_t e = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; e < n;
         e += (int64_t)gridDim.x * blockDim.x) {
        const int64_t b = e / H, k = e % H, g0 = b * 3 * H + k, a0 = b * 4 * H + k;
        const T r = act[a0], z = act[a0 + H], nn = act[a0 + 2 * H], sn = act[a0 + 3 * H];
        const T dn = dh[e] * (1 - z) * (1 - nn * nn);
        const T dz = dh[e] * (hp[e] - nn) * z * (1 - z);
        const T dr = dn * sn * r * (1 - r);
        dx[g0] = dr, dx[g0 + H] = dz, dx[g0 + 2 * H] = dn;
        ds[g0] = dr, ds[g0 + H] = dz, ds[g0 + 2 * H] = dn * r;
        if (dhp) dhp[e] = dh[e] * z;
    }
}

extern "C" int cuda_launch_lstm_cell(void *h, void *c, void *act, const void *ig, const void *hg,
                                     const void *c_prev, int dtype, int64_t B, int64_t H)
{
    int64_t n = B * H;
    if (n == 0) return 0;
    CUDA_DISPATCH_F32_F64(
        dtype, "lstm_cell",
        (lstm_cell_kernel<scalar_t><<<cuda_blocks(n), CUDA_THREADS, 0, cuda_stream()>>>(
            (scalar_t *)h, (scalar_t *)c, (scalar_t *)act, (const scalar_t *)ig,
            (const scalar_t *)hg, (const scalar_t *)c_prev, n, H)));
    return cuda_check(cudaGetLastError(), "lstm_cell");
}

extern "C" int cuda_launch_lstm_cell_backward(void *dgates, void *dc_prev, const void *dh,
                                              const void *dc, const void *act, const void *c_prev,
                                              const void *c, int dtype, int64_t B, int64_t H)
{
    int64_t n = B * H;
    if (n == 0) return 0;
    CUDA_DISPATCH_F32_F64(
        dtype, "lstm_cell_backward",
        (lstm_cell_backward_kernel<scalar_t><<<cuda_blocks(n), CUDA_THREADS, 0, cuda_stream()>>>(
            (scalar_t *)dgates, (scalar_t *)dc_prev, (const scalar_t *)dh, (const scalar_t *)dc,
            (const scalar_t *)act, (const scalar_t *)c_prev, (const scalar_t *)c, n, H)));
    return cuda_check(cudaGetLastError(), "lstm_cell_backward");
}

extern "C" int cuda_launch_gru_cell(void *h, void *act, const void *ig, const void *hg,
                                    const void *h_prev, int dtype, int64_t B, int64_t H)
{
    int64_t n = B * H;
    if (n == 0) return 0;
    CUDA_DISPATCH_F32_F64(
        dtype, "gru_cell",
        (gru_cell_kernel<scalar_t><<<cuda_blocks(n), CUDA_THREADS, 0, cuda_stream()>>>(
            (scalar_t *)h, (scalar_t *)act, (const scalar_t *)ig, (const scalar_t *)hg,
            (const scalar_t *)h_prev, n, H)));
    return cuda_check(cudaGetLastError(), "gru_cell");
}

extern "C" int cuda_launch_gru_cell_backward(void *dig, void *dhg, void *dh_prev, const void *dh,
                                             const void *act, const void *h_prev, int dtype,
                                             int64_t B, int64_t H)
{
    int64_t n = B * H;
    if (n == 0) return 0;
    CUDA_DISPATCH_F32_F64(
        dtype, "gru_cell_backward",
        (gru_cell_backward_kernel<scalar_t><<<cuda_blocks(n), CUDA_THREADS, 0, cuda_stream()>>>(
            (scalar_t *)dig, (scalar_t *)dhg, (scalar_t *)dh_prev, (const scalar_t *)dh,
            (const scalar_t *)act, (const scalar_t *)h_prev, n, H)));
    return cuda_check(cudaGetLastError(), "gru_cell_backward");
}
