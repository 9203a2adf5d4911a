/* cuda/cuda_rnn.cu: the fused LSTM and GRU cell kernels on CUDA, forward and backward.
 * defines: cuda_launch_lstm_cell, cuda_launch_lstm_cell_backward, cuda_launch_gru_cell,
 *          cuda_launch_gru_cell_backward (ops.def LSTM_CELL, LSTM_CELL_BACKWARD, GRU_CELL,
 *          GRU_CELL_BACKWARD).
 *
 * One thread per (row b, unit k) of the (B,H) state, grid-stride; the formulas are
 * cpu/cpu_rnn.c's (read its header for them), with PyTorch's gate order (LSTM i,f,g,o; GRU
 * r,z,n). float32 and the 16-bit dtypes compute in float (expf/tanhf), float64 in double. */
#include "cuda_typed.cuh"
#include "cuda_rnn.h"

__device__ __forceinline__ float rnn_sigmoid(float x)
{
    return 1.f / (1.f + expf(-x));
}
__device__ __forceinline__ double rnn_sigmoid(double x)
{
    return 1.0 / (1.0 + exp(-x));
}

/* Storage T computing in A = acc_of<T> (float for the 16-bit dtypes, which round each value
 * they store once: state, activations, gradients). */
#define LD(v) to_acc<A>(v)
#define ST(v) from_acc<T, A>(v)

template <typename T>
__global__ static void lstm_cell_kernel(T *h, T *c, T *act, const T *ig, const T *hg, const T *cp,
                                        int64_t n, int64_t H)
{
    typedef typename acc_of<T>::type A;
    for (int64_t e = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; e < n;
         e += (int64_t)gridDim.x * blockDim.x) {
        const int64_t b = e / H, k = e % H, g0 = b * 4 * H + k;
        const A i = rnn_sigmoid(LD(ig[g0]) + LD(hg[g0]));
        const A f = rnn_sigmoid(LD(ig[g0 + H]) + LD(hg[g0 + H]));
        const A g = tanh(LD(ig[g0 + 2 * H]) + LD(hg[g0 + 2 * H]));
        const A o = rnn_sigmoid(LD(ig[g0 + 3 * H]) + LD(hg[g0 + 3 * H]));
        const A cn = f * LD(cp[e]) + i * g;
        act[g0] = ST(i), act[g0 + H] = ST(f), act[g0 + 2 * H] = ST(g), act[g0 + 3 * H] = ST(o);
        c[e] = ST(cn);
        h[e] = ST(o * tanh(cn));
    }
}

template <typename T>
__global__ static void lstm_cell_backward_kernel(T *da, T *dcp, const T *dh, const T *dc,
                                                 const T *act, const T *cp, const T *c, int64_t n,
                                                 int64_t H)
{
    typedef typename acc_of<T>::type A;
    for (int64_t e = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; e < n;
         e += (int64_t)gridDim.x * blockDim.x) {
        const int64_t b = e / H, k = e % H, g0 = b * 4 * H + k;
        const A i = LD(act[g0]), f = LD(act[g0 + H]), g = LD(act[g0 + 2 * H]);
        const A o = LD(act[g0 + 3 * H]), dhe = LD(dh[e]);
        const A tc = tanh(LD(c[e]));
        const A dct = LD(dc[e]) + dhe * o * (1 - tc * tc);
        da[g0] = ST(dct * g * i * (1 - i));
        da[g0 + H] = ST(dct * LD(cp[e]) * f * (1 - f));
        da[g0 + 2 * H] = ST(dct * i * (1 - g * g));
        da[g0 + 3 * H] = ST(dhe * tc * o * (1 - o));
        if (dcp) dcp[e] = ST(dct * f);
    }
}

template <typename T>
__global__ static void gru_cell_kernel(T *h, T *act, const T *ig, const T *hg, const T *hp,
                                       int64_t n, int64_t H)
{
    typedef typename acc_of<T>::type A;
    for (int64_t e = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; e < n;
         e += (int64_t)gridDim.x * blockDim.x) {
        const int64_t b = e / H, k = e % H, g0 = b * 3 * H + k, a0 = b * 4 * H + k;
        const A r = rnn_sigmoid(LD(ig[g0]) + LD(hg[g0]));
        const A z = rnn_sigmoid(LD(ig[g0 + H]) + LD(hg[g0 + H]));
        const A sn = LD(hg[g0 + 2 * H]);
        const A nn = tanh(LD(ig[g0 + 2 * H]) + r * sn);
        act[a0] = ST(r), act[a0 + H] = ST(z), act[a0 + 2 * H] = ST(nn);
        act[a0 + 3 * H] = hg[g0 + 2 * H];
        h[e] = ST((1 - z) * nn + z * LD(hp[e]));
    }
}

template <typename T>
__global__ static void gru_cell_backward_kernel(T *dx, T *ds, T *dhp, const T *dh, const T *act,
                                                const T *hp, int64_t n, int64_t H)
{
    typedef typename acc_of<T>::type A;
    for (int64_t e = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; e < n;
         e += (int64_t)gridDim.x * blockDim.x) {
        const int64_t b = e / H, k = e % H, g0 = b * 3 * H + k, a0 = b * 4 * H + k;
        const A r = LD(act[a0]), z = LD(act[a0 + H]), nn = LD(act[a0 + 2 * H]);
        const A sn = LD(act[a0 + 3 * H]), dhe = LD(dh[e]);
        const A dn = dhe * (1 - z) * (1 - nn * nn);
        const A dz = dhe * (LD(hp[e]) - nn) * z * (1 - z);
        const A dr = dn * sn * r * (1 - r);
        const T dr_s = ST(dr), dz_s = ST(dz);
        dx[g0] = dr_s, dx[g0 + H] = dz_s, dx[g0 + 2 * H] = ST(dn);
        ds[g0] = dr_s, ds[g0 + H] = dz_s, ds[g0 + 2 * H] = ST(dn * r);
        if (dhp) dhp[e] = ST(dhe * z);
    }
}

#undef LD
#undef ST

/* float32, float64, float16 and bfloat16 */
#define RNN_DISPATCH(dtype, what, ...)                                                             \
    CUDA_DISPATCH_FLOAT(dtype,                                                                     \
                        return ddpl_error("%s: expected a floating point dtype on cuda", what),    \
                        __VA_ARGS__)

extern "C" int cuda_launch_lstm_cell(void *h, void *c, void *act, const void *ig, const void *hg,
                                     const void *c_prev, int dtype, int64_t B, int64_t H)
{
    int64_t n = B * H;
    if (n == 0) return 0;
    RNN_DISPATCH(dtype, "lstm_cell",
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
    RNN_DISPATCH(
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
    RNN_DISPATCH(dtype, "gru_cell",
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
    RNN_DISPATCH(
        dtype, "gru_cell_backward",
        (gru_cell_backward_kernel<scalar_t><<<cuda_blocks(n), CUDA_THREADS, 0, cuda_stream()>>>(
            (scalar_t *)dig, (scalar_t *)dhg, (scalar_t *)dh_prev, (const scalar_t *)dh,
            (const scalar_t *)act, (const scalar_t *)h_prev, n, H)));
    return cuda_check(cudaGetLastError(), "gru_cell_backward");
}
