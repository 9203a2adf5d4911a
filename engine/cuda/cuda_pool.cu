/* cuda/cuda_pool.cu: 2-D max, average and adaptive average pooling on CUDA, forward and
 * backward.
 * defines: cuda_launch_max_pool2d, cuda_launch_max_pool2d_backward, cuda_launch_avg_pool2d,
 *          cuda_launch_avg_pool2d_backward, cuda_launch_adaptive_avg_pool2d,
 *          cuda_launch_adaptive_avg_pool2d_backward.
 *
 * Semantics are cpu_pool.c's: windows clipped to the input, max_pool2d propagates NaN (a NaN in
 * the window wins; a later NaN displaces an earlier one) and records the argmax h*W + w within
 * the plane; avg_pool2d divides by the padded window with count_include_pad, else by the
 * clipped one; adaptive output i covers [floor(i*in/out), ceil((i+1)*in/out)).
 * Forward: one thread per output element. Backward: one thread per input element, gathering
 * from the outputs whose windows cover it in the CPU's scan order (oh, then ow), so results are
 * deterministic and need no zero-fill or atomics. Index math is 32-bit (I = int) when both
 * tensors have fewer than 2^30 elements, else 64-bit. The ops layer guarantees padding <= half
 * the kernel, so every window meets the input and every argmax lies in its own window; with
 * ceil_mode the last window may run past the input's end (clipped like the padding) but starts
 * inside it. divisor_override (non-zero) replaces avg_pool2d's divisor. */
#include "cuda_nn_util.cuh"
#include "cuda_pool.h"

/* Window geometry in index type I. */
template <typename I> struct pool_geom {
    I planes, H, W, OH, OW;
    I kh, kw, sh, sw, ph, pw;
    bool count_include_pad;
    I divisor_override; /* 0: none */
};

template <typename I> static pool_geom<I> geom_of(const cuda_pool_shape *s)
{
    pool_geom<I> g = {(I)s->planes,
                      (I)s->H,
                      (I)s->W,
                      (I)s->OH,
                      (I)s->OW,
                      (I)s->kh,
                      (I)s->kw,
                      (I)s->sh,
                      (I)s->sw,
                      (I)s->ph,
                      (I)s->pw,
                      s->count_include_pad,
                      (I)s->divisor_override};
    return g;
}

template <typename I> static __device__ __forceinline__ I imin(I a, I b)
{
    return a < b ? a : b;
}
template <typename I> static __device__ __forceinline__ I imax(I a, I b)
{
    return a > b ? a : b;
}

/* Outputs along one axis whose window [o*s - p, o*s - p + k) covers input i: [lo, hi]. */
template <typename I>
static __device__ __forceinline__ void covering(I i, I k, I s, I p, I out, I &lo, I &hi)
{
    lo = i + p < k ? 0 : (i + p - k) / s + 1;
    hi = imin((i + p) / s, out - 1);
}

/* Divisor of avg_pool2d's output (oh, ow), as cpu_pool.c's avg_window_of. */
template <typename I>
static __device__ __forceinline__ I avg_divisor(const pool_geom<I> &g, I oh, I ow)
{
    if (g.divisor_override) return g.divisor_override;
    I h0 = oh * g.sh - g.ph, w0 = ow * g.sw - g.pw;
    I h1 = imin(h0 + g.kh, g.H + g.ph), w1 = imin(w0 + g.kw, g.W + g.pw);
    if (g.count_include_pad) return (h1 - h0) * (w1 - w0);
    return (imin(h1, g.H) - imax(h0, (I)0)) * (imin(w1, g.W) - imax(w0, (I)0));
}

/* ---- max_pool2d ---- */

/* y (planes,OH,OW), argmax? <- x (planes,H,W) */
template <typename T, typename I>
__global__ static void max_pool2d_forward_kernel(T *y, int64_t *argmax, const T *x, pool_geom<I> g,
                                                 I total)
{
    typedef nn_num<T> num;
    typedef typename num::acc A;
    for (I o = blockIdx.x * (I)blockDim.x + threadIdx.x; o < total;
         o += (I)gridDim.x * blockDim.x) {
        const I ow = o % g.OW, t = o / g.OW, oh = t % g.OH, pl = t / g.OH;
        const T *xp = x + (int64_t)pl * g.H * g.W;
        I h0 = oh * g.sh - g.ph, w0 = ow * g.sw - g.pw;
        const I h1 = imin(h0 + g.kh, g.H), w1 = imin(w0 + g.kw, g.W);
        h0 = imax(h0, (I)0), w0 = imax(w0, (I)0);
        A m = -(A)INFINITY;
        I best = h0 * g.W + w0;
        for (I ih = h0; ih < h1; ih++)
            for (I iw = w0; iw < w1; iw++) {
                const A v = num::load(xp[ih * g.W + iw]);
                if (v > m || v != v) {
                    m = v;
                    best = ih * g.W + iw;
                }
            }
        y[o] = num::store(m);
        if (argmax) argmax[o] = (int64_t)best;
    }
}

/* dx (planes,H,W) <- g (planes,OH,OW), argmax: each input sums the grads of the outputs that
 * picked it. */
template <typename T, typename I>
__global__ static void max_pool2d_backward_kernel(T *dx, const T *grad, const int64_t *argmax,
                                                  pool_geom<I> g, I total)
{
    typedef nn_num<T> num;
    typedef typename num::acc A;
    for (I o = blockIdx.x * (I)blockDim.x + threadIdx.x; o < total;
         o += (I)gridDim.x * blockDim.x) {
        const I iw = o % g.W, t = o / g.W, ih = t % g.H, pl = t / g.H;
        const int64_t plane = (int64_t)pl * g.OH * g.OW, idx = (int64_t)ih * g.W + iw;
        I oh0, oh1, ow0, ow1;
        covering(ih, g.kh, g.sh, g.ph, g.OH, oh0, oh1);
        covering(iw, g.kw, g.sw, g.pw, g.OW, ow0, ow1);
        A s = 0;
        for (I oh = oh0; oh <= oh1; oh++)
            for (I ow = ow0; ow <= ow1; ow++) {
                const int64_t p = plane + oh * g.OW + ow;
                if (argmax[p] == idx) s += num::load(grad[p]);
            }
        dx[o] = num::store(s);
    }
}

/* ---- avg_pool2d ---- */

template <typename T, typename I>
__global__ static void avg_pool2d_forward_kernel(T *y, const T *x, pool_geom<I> g, I total)
{
    typedef nn_num<T> num;
    typedef typename num::acc A;
    for (I o = blockIdx.x * (I)blockDim.x + threadIdx.x; o < total;
         o += (I)gridDim.x * blockDim.x) {
        const I ow = o % g.OW, t = o / g.OW, oh = t % g.OH, pl = t / g.OH;
        const T *xp = x + (int64_t)pl * g.H * g.W;
        const I h0 = imax(oh * g.sh - g.ph, (I)0), w0 = imax(ow * g.sw - g.pw, (I)0);
        const I h1 = imin(oh * g.sh - g.ph + g.kh, g.H), w1 = imin(ow * g.sw - g.pw + g.kw, g.W);
        A s = 0;
        for (I ih = h0; ih < h1; ih++)
            for (I iw = w0; iw < w1; iw++) s += num::load(xp[ih * g.W + iw]);
        y[o] = num::store(s / (A)avg_divisor(g, oh, ow));
    }
}

template <typename T, typename I>
__global__ static void avg_pool2d_backward_kernel(T *dx, const T *grad, pool_geom<I> g, I total)
{
    typedef nn_num<T> num;
    typedef typename num::acc A;
    for (I o = blockIdx.x * (I)blockDim.x + threadIdx.x; o < total;
         o += (I)gridDim.x * blockDim.x) {
        const I iw = o % g.W, t = o / g.W, ih = t % g.H, pl = t / g.H;
        const T *gp = grad + (int64_t)pl * g.OH * g.OW;
        I oh0, oh1, ow0, ow1;
        covering(ih, g.kh, g.sh, g.ph, g.OH, oh0, oh1);
        covering(iw, g.kw, g.sw, g.pw, g.OW, ow0, ow1);
        A s = 0;
        for (I oh = oh0; oh <= oh1; oh++)
            for (I ow = ow0; ow <= ow1; ow++)
                s += num::load(gp[oh * g.OW + ow]) / (A)avg_divisor(g, oh, ow);
        dx[o] = num::store(s);
    }
}

/* ---- adaptive_avg_pool2d ----
 * Window bounds in 64-bit: o * in can exceed 2^31 even when both tensors are small. */
static __device__ __forceinline__ int64_t ad_start(int64_t o, int64_t in, int64_t out)
{
    return o * in / out;
}
static __device__ __forceinline__ int64_t ad_end(int64_t o, int64_t in, int64_t out)
{
    return ((o + 1) * in + out - 1) / out;
}

template <typename T, typename I>
__global__ static void adaptive_avg_pool2d_forward_kernel(T *y, const T *x, pool_geom<I> g, I total)
{
    typedef nn_num<T> num;
    typedef typename num::acc A;
    for (I o = blockIdx.x * (I)blockDim.x + threadIdx.x; o < total;
         o += (I)gridDim.x * blockDim.x) {
        const I ow = o % g.OW, t = o / g.OW, oh = t % g.OH, pl = t / g.OH;
        const T *xp = x + (int64_t)pl * g.H * g.W;
        const I h0 = (I)ad_start(oh, g.H, g.OH), h1 = (I)ad_end(oh, g.H, g.OH);
        const I w0 = (I)ad_start(ow, g.W, g.OW), w1 = (I)ad_end(ow, g.W, g.OW);
        A s = 0;
        for (I ih = h0; ih < h1; ih++)
            for (I iw = w0; iw < w1; iw++) s += num::load(xp[ih * g.W + iw]);
        y[o] = num::store(s / (A)((h1 - h0) * (w1 - w0)));
    }
}

/* Outputs covering input i are [floor(i*out/in), ceil((i+1)*out/in)); each is still checked
 * against its own window, so the gather sums exactly what the CPU scatter adds. */
template <typename T, typename I>
__global__ static void adaptive_avg_pool2d_backward_kernel(T *dx, const T *grad, pool_geom<I> g,
                                                           I total)
{
    typedef nn_num<T> num;
    typedef typename num::acc A;
    for (I o = blockIdx.x * (I)blockDim.x + threadIdx.x; o < total;
         o += (I)gridDim.x * blockDim.x) {
        const I iw = o % g.W, t = o / g.W, ih = t % g.H, pl = t / g.H;
        const T *gp = grad + (int64_t)pl * g.OH * g.OW;
        const I oh0 = (I)ad_start(ih, g.OH, g.H),
                oh1 = (I)imin(ad_end(ih, g.OH, g.H), (int64_t)g.OH);
        const I ow0 = (I)ad_start(iw, g.OW, g.W),
                ow1 = (I)imin(ad_end(iw, g.OW, g.W), (int64_t)g.OW);
        A s = 0;
        for (I oh = oh0; oh < oh1; oh++) {
            const int64_t h0 = ad_start(oh, g.H, g.OH), h1 = ad_end(oh, g.H, g.OH);
            if (ih < h0 || ih >= h1) continue;
            for (I ow = ow0; ow < ow1; ow++) {
                const int64_t w0 = ad_start(ow, g.W, g.OW), w1 = ad_end(ow, g.W, g.OW);
                if (iw < w0 || iw >= w1) continue;
                s += num::load(gp[oh * g.OW + ow]) / (A)((h1 - h0) * (w1 - w0));
            }
        }
        dx[o] = num::store(s);
    }
}

/* ---- launchers ---- */

/* Launches KERNEL<scalar_t, I> over `total` elements with I = int when both the input
 * (planes*H*W) and the output (planes*OH*OW) have fewer than 2^30 elements. (the geometry is the
 * kernel's second-to-last argument) */
#define POOL_LAUNCH(KERNEL, s, total, dtype, what, ...)                                            \
    do {                                                                                           \
        if ((total) == 0) return 0;                                                                \
        const bool small = nn_fits_int((s)->planes * (s)->H * (s)->W) &&                           \
                           nn_fits_int((s)->planes * (s)->OH * (s)->OW);                           \
        CUDA_DISPATCH_FLOAT(                                                                       \
            dtype, return ddpl_error("%s: unsupported dtype", what),                               \
            if (small) {                                                                           \
                typedef int I;                                                                     \
                pool_geom<I> geom = geom_of<I>(s);                                                 \
                KERNEL<scalar_t, I><<<cuda_blocks(total), CUDA_THREADS, 0, cuda_stream()>>>(       \
                    __VA_ARGS__, geom, (I)(total));                                                \
            } else {                                                                               \
                typedef int64_t I;                                                                 \
                pool_geom<I> geom = geom_of<I>(s);                                                 \
                KERNEL<scalar_t, I><<<cuda_blocks(total), CUDA_THREADS, 0, cuda_stream()>>>(       \
                    __VA_ARGS__, geom, (I)(total));                                                \
            });                                                                                    \
        return cuda_check(cudaGetLastError(), what);                                               \
    } while (0)

extern "C" int cuda_launch_max_pool2d(void *y, int64_t *argmax, const void *x,
                                      const cuda_pool_shape *s, int dtype, const char *what)
{
    POOL_LAUNCH(max_pool2d_forward_kernel, s, s->planes * s->OH * s->OW, dtype, what, (scalar_t *)y,
                argmax, (const scalar_t *)x);
}

extern "C" int cuda_launch_max_pool2d_backward(void *dx, const void *g, const int64_t *argmax,
                                               const cuda_pool_shape *s, int dtype,
                                               const char *what)
{
    POOL_LAUNCH(max_pool2d_backward_kernel, s, s->planes * s->H * s->W, dtype, what, (scalar_t *)dx,
                (const scalar_t *)g, argmax);
}

extern "C" int cuda_launch_avg_pool2d(void *y, const void *x, const cuda_pool_shape *s, int dtype,
                                      const char *what)
{
    POOL_LAUNCH(avg_pool2d_forward_kernel, s, s->planes * s->OH * s->OW, dtype, what, (scalar_t *)y,
                (const scalar_t *)x);
}

extern "C" int cuda_launch_avg_pool2d_backward(void *dx, const void *g, const cuda_pool_shape *s,
                                               int dtype, const char *what)
{
    POOL_LAUNCH(avg_pool2d_backward_kernel, s, s->planes * s->H * s->W, dtype, what, (scalar_t *)dx,
                (const scalar_t *)g);
}

extern "C" int cuda_launch_adaptive_avg_pool2d(void *y, const void *x, const cuda_pool_shape *s,
                                               int dtype, const char *what)
{
    POOL_LAUNCH(adaptive_avg_pool2d_forward_kernel, s, s->planes * s->OH * s->OW, dtype, what,
                (scalar_t *)y, (const scalar_t *)x);
}

extern "C" int cuda_launch_adaptive_avg_pool2d_backward(void *dx, const void *g,
                                                        const cuda_pool_shape *s, int dtype,
                                                        const char *what)
{
    POOL_LAUNCH(adaptive_avg_pool2d_backward_kernel, s, s->planes * s->H * s->W, dtype, what,
                (scalar_t *)dx, (const scalar_t *)g);
}
