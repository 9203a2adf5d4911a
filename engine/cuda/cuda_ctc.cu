/* cuda/cuda_ctc.cu: the CTC loss forward and backward on CUDA, by the alpha-beta recursion in
 * log space with float64 accumulation.
 * defines: cuda_launch_ctc_loss, cuda_launch_ctc_loss_backward.
 *
 * The recursion and the gradient formula are cpu_ctc.c's (see there), one thread per sample:
 * each sample's time steps depend on the previous ones and a batch is tens of samples, so the
 * parallelism is the batch (PyTorch's kernel also spreads the target positions of a step over a
 * block; that matters for long targets, not for correctness). Every element of the outputs is
 * written, so no zero-fill is needed. */
#include "cuda_common.cuh"
#include "cuda_ctc.h"

struct ctc_geom {
    int64_t T, N, C, S, blank;
};

static __device__ __forceinline__ double ctc_lse2(double a, double b)
{
    if (a == -INFINITY) return b;
    if (b == -INFINITY) return a;
    const double m = a > b ? a : b;
    return m + log1p(exp(-fabs(a - b)));
}

template <typename T>
static __device__ __forceinline__ double ctc_lp(const T *lp, const ctc_geom &g, int64_t t,
                                                int64_t b, int64_t c)
{
    return (double)lp[(t * g.N + b) * g.C + c];
}

static __device__ __forceinline__ int64_t ctc_label(const int64_t *tg, const ctc_geom &g, int64_t b,
                                                    int64_t s)
{
    return s % 2 == 0 ? g.blank : tg[b * g.S + s / 2];
}

static __device__ __forceinline__ bool ctc_skip(const int64_t *tg, const ctc_geom &g, int64_t b,
                                                int64_t s)
{
    return s >= 2 && s % 2 == 1 && ctc_label(tg, g, b, s) != ctc_label(tg, g, b, s - 2);
}

template <typename T>
__global__ static void ctc_forward_kernel(double *nll, double *alpha, const T *lp,
                                          const int64_t *tg, const int64_t *il, const int64_t *tl,
                                          ctc_geom g)
{
    const int64_t W = 2 * g.S + 1;
    for (int64_t b = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; b < g.N;
         b += (int64_t)gridDim.x * blockDim.x) {
        const int64_t Tb = il[b], L = 2 * tl[b] + 1;
        double *a = alpha + b * g.T * W;
        for (int64_t i = 0; i < g.T * W; i++) a[i] = -INFINITY;
        if (Tb == 0) {
            nll[b] = L == 1 ? 0.0 : INFINITY;
            continue;
        }
        a[0] = ctc_lp(lp, g, 0, b, g.blank);
        if (L > 1) a[1] = ctc_lp(lp, g, 0, b, ctc_label(tg, g, b, 1));
        for (int64_t t = 1; t < Tb; t++) {
            const double *prev = a + (t - 1) * W;
            double *cur = a + t * W;
            for (int64_t s = 0; s < L; s++) {
                double v = prev[s];
                if (s >= 1) v = ctc_lse2(v, prev[s - 1]);
                if (ctc_skip(tg, g, b, s)) v = ctc_lse2(v, prev[s - 2]);
                cur[s] = v == -INFINITY ? v : v + ctc_lp(lp, g, t, b, ctc_label(tg, g, b, s));
            }
        }
        const double *last = a + (Tb - 1) * W;
        double ll = last[L - 1];
        if (L > 1) ll = ctc_lse2(ll, last[L - 2]);
        nll[b] = -ll;
    }
}

template <typename T>
__global__ static void ctc_backward_kernel(T *grad, const double *gout, const T *lp,
                                           const int64_t *tg, const int64_t *il, const int64_t *tl,
                                           const double *nllv, const double *alpha, double *scratch,
                                           bool zero_infinity, ctc_geom g)
{
    const int64_t W = 2 * g.S + 1;
    for (int64_t b = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; b < g.N;
         b += (int64_t)gridDim.x * blockDim.x) {
        double *beta = scratch + b * (g.T * W + g.C), *lcab = beta + g.T * W;
        const int64_t Tb = il[b], L = 2 * tl[b] + 1;
        const double nll = nllv[b], go = gout[b];
        const bool zero = zero_infinity && nll == INFINITY;
        for (int64_t t = 0; t < g.T; t++)
            for (int64_t c = 0; c < g.C; c++)
                grad[(t * g.N + b) * g.C + c] =
                    (T)(t < Tb && !zero ? exp(ctc_lp(lp, g, t, b, c)) * go : 0.0);
        if (zero || Tb == 0) continue;
        for (int64_t i = 0; i < Tb * W; i++) beta[i] = -INFINITY;
        double *last = beta + (Tb - 1) * W;
        last[L - 1] = ctc_lp(lp, g, Tb - 1, b, g.blank);
        if (L > 1) last[L - 2] = ctc_lp(lp, g, Tb - 1, b, ctc_label(tg, g, b, L - 2));
        for (int64_t t = Tb - 2; t >= 0; t--) {
            const double *next = beta + (t + 1) * W;
            double *cur = beta + t * W;
            for (int64_t s = 0; s < L; s++) {
                double v = next[s];
                if (s + 1 < L) v = ctc_lse2(v, next[s + 1]);
                if (s + 2 < L && ctc_skip(tg, g, b, s + 2)) v = ctc_lse2(v, next[s + 2]);
                cur[s] = v == -INFINITY ? v : v + ctc_lp(lp, g, t, b, ctc_label(tg, g, b, s));
            }
        }
        const double *a = alpha + b * g.T * W;
        for (int64_t t = 0; t < Tb; t++) {
            for (int64_t c = 0; c < g.C; c++) lcab[c] = -INFINITY;
            for (int64_t s = 0; s < L; s++) {
                const int64_t c = ctc_label(tg, g, b, s);
                lcab[c] = ctc_lse2(lcab[c], a[t * W + s] + beta[t * W + s]);
            }
            for (int64_t c = 0; c < g.C; c++) {
                if (lcab[c] == -INFINITY) continue;
                const double l = ctc_lp(lp, g, t, b, c);
                grad[(t * g.N + b) * g.C + c] = (T)((exp(l) - exp(lcab[c] + nll - l)) * go);
            }
        }
    }
}

extern "C" int cuda_launch_ctc_loss(double *nll, double *alpha, const void *lp,
                                    const int64_t *targets, const int64_t *in_len,
                                    const int64_t *tgt_len, const cuda_ctc_shape *s)
{
    if (s->N == 0) return 0;
    const ctc_geom g = {s->T, s->N, s->C, s->S, s->blank};
    CUDA_DISPATCH_F32_F64(
        s->dtype, "ctc_loss",
        (ctc_forward_kernel<scalar_t><<<cuda_blocks(s->N), CUDA_THREADS, 0, cuda_stream()>>>(
            nll, alpha, (const scalar_t *)lp, targets, in_len, tgt_len, g)));
    return cuda_check(cudaGetLastError(), "ctc_loss");
}

extern "C" int cuda_launch_ctc_loss_backward(void *grad, const double *gout, const void *lp,
                                             const int64_t *targets, const int64_t *in_len,
                                             const int64_t *tgt_len, const double *nll,
                                             const double *alpha, double *scratch,
                                             bool zero_infinity, const cuda_ctc_shape *s)
{
    if (s->N == 0) return 0;
    const ctc_geom g = {s->T, s->N, s->C, s->S, s->blank};
    CUDA_DISPATCH_F32_F64(
        s->dtype, "ctc_loss_backward",
        (ctc_backward_kernel<scalar_t><<<cuda_blocks(s->N), CUDA_THREADS, 0, cuda_stream()>>>(
            (scalar_t *)grad, gout, (const scalar_t *)lp, targets, in_len, tgt_len, nll, alpha,
            scratch, zero_infinity, g)));
    return cuda_check(cudaGetLastError(), "ctc_loss_backward");
}
