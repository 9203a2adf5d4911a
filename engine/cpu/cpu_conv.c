/* cpu/cpu_conv.c: 2-D convolution on the CPU as im2col + GEMM, one image per thread.
 * defines: cpu_conv2d, cpu_conv2d_backward.
 *
 * For image n and group g, with Cg = C/groups input channels, Og = O/groups output channels,
 * Kc = Cg*kh*kw and P = OH*OW output pixels:
 *   col (Kc, P)       = im2col(x[n, g])               the receptive field of every pixel
 *   y[n, g] (Og, P)   = w[g] (Og, Kc) @ col + bias
 *   dcol (Kc, P)      = w[g]^T @ dy[n, g]             then col2im adds it into dx[n, g]
 *   dw[g] (Og, Kc)   += dy[n, g] @ col^T
 * A 1x1 kernel with stride 1 and no padding reads x directly as col (no copy). Images are
 * spread over the engine's threads with OpenBLAS single-threaded (cpu_blas_parallel_for); each
 * thread has its own col buffer, and dw has an accumulator per part of the images, summed in
 * part order at the end (the same bits every run: per-thread sums depended on which thread
 * took which part).
 *
 * bfloat16 runs natively where the CPU has AVX512-BF16 (cpu_gemm_bf16.h): im2col copies bf16,
 * the products run on the bf16 dot-product units with float32 sums, and each result is rounded
 * once: y from the float32 sum plus the bias; dw from float32 per-part accumulators; dx through
 * a float32 dcol and a float32 col2im of the image (overlapping windows add up before the
 * rounding). A bfloat16 convolution the Winograd path takes, and float16, or bfloat16 on a CPU
 * without the units, run the float32 kernel on widened copies (cpu_run_widened). */
#include "core/alloc.h"
#include "cpu_blas.h"
#include "cpu_gemm_bf16.h"
#include "cpu_conv_winograd.h"
#include "cpu_iter.h"
#include "cpu_kernels.h"
#include "kernel_abi/nn_params.h"

typedef struct {
    int64_t N, C, H, W, O, OH, OW, kh, kw;
    int sh, sw, ph, pw, dh, dw, groups;
    int64_t Cg, Og, Kc, P;
    bool direct; /* 1x1, stride 1, no padding: col is the input itself */
} conv_geom;

static void conv_geom_init(conv_geom *g, const ddpl_tensor *x, const ddpl_tensor *w,
                           const ddpl_tensor *y, const ddpl_conv_params *p)
{
    g->N = x->sizes[0], g->C = x->sizes[1], g->H = x->sizes[2], g->W = x->sizes[3];
    g->O = w->sizes[0], g->kh = w->sizes[2], g->kw = w->sizes[3];
    g->OH = y->sizes[2], g->OW = y->sizes[3];
    g->sh = p->stride[0], g->sw = p->stride[1], g->ph = p->padding[0], g->pw = p->padding[1];
    g->dh = p->dilation[0], g->dw = p->dilation[1], g->groups = p->groups;
    g->Cg = g->C / g->groups, g->Og = g->O / g->groups;
    g->Kc = g->Cg * g->kh * g->kw, g->P = g->OH * g->OW;
    g->direct = g->kh == 1 && g->kw == 1 && g->sh == 1 && g->sw == 1 && g->ph == 0 && g->pw == 0 &&
                g->OH == g->H && g->OW == g->W;
}

/* The Winograd shape of this convolution when its fast path applies (float32, 3x3, stride 1,
 * dilation 1, one group, enough channels): forward (x -> y), or adjoint (dy -> dx, padding
 * 2 - p). */
static bool winograd_shape(const conv_geom *g, ddpl_dtype dt, bool adjoint, cpu_winograd_shape *s)
{
    if (dt != DDPL_FLOAT32 || g->kh != 3 || g->kw != 3 || g->sh != 1 || g->sw != 1 || g->dh != 1 ||
        g->dw != 1 || g->groups != 1 || g->ph > 2 || g->pw > 2)
        return false;
    if (adjoint)
        *s = (cpu_winograd_shape){g->N, g->O, g->OH, g->OW, g->C, g->H, g->W, 2 - g->ph, 2 - g->pw};
    else
        *s = (cpu_winograd_shape){g->N, g->C, g->H, g->W, g->O, g->OH, g->OW, g->ph, g->pw};
    return cpu_winograd_applies(s);
}

/* For kernel column kj: output columns [*lo, *hi) read input columns iw = ow*sw + off inside
 * [0, W); the others fall into the padding. */
static void valid_cols(const conv_geom *g, int64_t off, int64_t *lo, int64_t *hi)
{
    int64_t l = off >= 0 ? 0 : (-off + g->sw - 1) / g->sw;
    int64_t h = g->W - 1 - off < 0 ? 0 : (g->W - 1 - off) / g->sw + 1;
    if (h > g->OW) h = g->OW;
    if (l > h) l = h;
    *lo = l, *hi = h;
}

/* im2col: col (Kc, P) <- x (Cg, H, W) of one image and group, zeros in the padding.
 * col2im: dx (Cg, H, W) += dcol (Kc, P), the adjoint (float32 for bfloat16 convolutions: the
 * overlapping windows' sums are rounded once, see below). */
#define DEFINE_IM2COL(T, SUFFIX)                                                                   \
    static void im2col_##SUFFIX(const conv_geom *g, const T *x, T *col)                            \
    {                                                                                              \
        for (int64_t c = 0; c < g->Cg; c++)                                                        \
            for (int64_t ki = 0; ki < g->kh; ki++)                                                 \
                for (int64_t kj = 0; kj < g->kw; kj++) {                                           \
                    T *row = col + ((c * g->kh + ki) * g->kw + kj) * g->P;                         \
                    int64_t off = kj * g->dw - g->pw, lo, hi;                                      \
                    valid_cols(g, off, &lo, &hi);                                                  \
                    for (int64_t oh = 0; oh < g->OH; oh++) {                                       \
                        T *r = row + oh * g->OW;                                                   \
                        int64_t ih = oh * g->sh - g->ph + ki * g->dh;                              \
                        if (ih < 0 || ih >= g->H) {                                                \
                            for (int64_t ow = 0; ow < g->OW; ow++) r[ow] = 0;                      \
                            continue;                                                              \
                        }                                                                          \
                        const T *xr = x + (c * g->H + ih) * g->W + off;                            \
                        for (int64_t ow = 0; ow < lo; ow++) r[ow] = 0;                             \
                        if (g->sw == 1) /* a loop, not memcpy: rows are short, calls cost */       \
                            for (int64_t ow = lo; ow < hi; ow++) r[ow] = xr[ow];                   \
                        else                                                                       \
                            for (int64_t ow = lo; ow < hi; ow++) r[ow] = xr[ow * g->sw];           \
                        for (int64_t ow = hi; ow < g->OW; ow++) r[ow] = 0;                         \
                    }                                                                              \
                }                                                                                  \
    }
#define DEFINE_COL2IM(T, SUFFIX)                                                                   \
    static void col2im_##SUFFIX(const conv_geom *g, const T *col, T *dx)                           \
    {                                                                                              \
        for (int64_t c = 0; c < g->Cg; c++)                                                        \
            for (int64_t ki = 0; ki < g->kh; ki++)                                                 \
                for (int64_t kj = 0; kj < g->kw; kj++) {                                           \
                    const T *row = col + ((c * g->kh + ki) * g->kw + kj) * g->P;                   \
                    int64_t off = kj * g->dw - g->pw, lo, hi;                                      \
                    valid_cols(g, off, &lo, &hi);                                                  \
                    for (int64_t oh = 0; oh < g->OH; oh++) {                                       \
                        int64_t ih = oh * g->sh - g->ph + ki * g->dh;                              \
                        if (ih < 0 || ih >= g->H) continue;                                        \
                        const T *r = row + oh * g->OW;                                             \
                        T *xr = dx + (c * g->H + ih) * g->W + off;                                 \
                        if (g->sw == 1) /* unit stride: a loop the compiler vectorises */          \
                            for (int64_t ow = lo; ow < hi; ow++) xr[ow] += r[ow];                  \
                        else                                                                       \
                            for (int64_t ow = lo; ow < hi; ow++) xr[ow * g->sw] += r[ow];          \
                    }                                                                              \
                }                                                                                  \
    }

DEFINE_IM2COL(float, f32)
DEFINE_IM2COL(double, f64)
DEFINE_IM2COL(uint16_t, bf16) /* bfloat16 bits: a copy (zero is +0.0) */
DEFINE_COL2IM(float, f32)
DEFINE_COL2IM(double, f64)

static void im2col(ddpl_dtype dt, const conv_geom *g, const void *x, void *col)
{
    if (dt == DDPL_FLOAT32)
        im2col_f32(g, x, col);
    else if (dt == DDPL_BFLOAT16)
        im2col_bf16(g, x, col);
    else
        im2col_f64(g, x, col);
}

static void col2im(ddpl_dtype dt, const conv_geom *g, const void *col, void *dx)
{
    if (dt == DDPL_FLOAT32)
        col2im_f32(g, col, dx);
    else
        col2im_f64(g, col, dx);
}

typedef struct {
    conv_geom g;
    ddpl_dtype dt;
    size_t esz;
    const char *x, *w, *bias, *dy;
    char *y, *dx, *db;
    void **cols;       /* one (Kc, P) buffer per thread; NULL entries when direct */
    char **dw_acc;     /* one (O, Kc) accumulator per part of the images (float32 for bf16) */
    double **db_acc;   /* one (O) sum per part of the images, when the images' loop does db */
    bool bf16;         /* bfloat16 on the bf16 GEMM */
    void **dx_f32;     /* bf16 dx: per thread, dcol (Kc, P) then dx (Cg, H, W) in float32 */
    atomic_int failed; /* a bf16 GEMM could not get its packing scratch */
} conv_job;

/* Address of element (n, channel c) of a (N, channels, plane) contiguous tensor. */
static inline const char *plane(const conv_job *j, const char *base, int64_t n, int64_t channels,
                                int64_t c, int64_t plane_size)
{
    return base + ((n * channels + c) * plane_size) * (int64_t)j->esz;
}

/* The sum of one plane of dy (P elements), in float32 for float32 (per-plane partial sums keep
 * the rounding small) and added into a double by the callers. simd reductions: the lanes'
 * partial sums may be reassociated, which is what lets the loop vectorise (a strict
 * left-to-right float sum cannot). */
static double plane_sum(const conv_job *j, const char *r)
{
    const conv_geom *g = &j->g;
    if (j->dt == DDPL_BFLOAT16) {
        const uint16_t *rb = (const uint16_t *)r;
        float acc = 0;
#pragma omp simd reduction(+ : acc)
        for (int64_t p = 0; p < g->P; p++) acc += ddpl_bf16_to_float(rb[p]);
        return acc;
    }
    if (j->dt == DDPL_FLOAT32) {
        const float *rf = (const float *)r;
        float acc = 0;
#pragma omp simd reduction(+ : acc)
        for (int64_t p = 0; p < g->P; p++) acc += rf[p];
        return acc;
    }
    const double *rd = (const double *)r;
    double acc = 0;
#pragma omp simd reduction(+ : acc)
    for (int64_t p = 0; p < g->P; p++) acc += rd[p];
    return acc;
}

static void conv_forward_images(int64_t begin, int64_t end, int part, int thread, void *ctx)
{
    DDPL_UNUSED(part);
    const conv_job *j = ctx;
    const conv_geom *g = &j->g;
    for (int64_t n = begin; n < end; n++)
        for (int64_t gr = 0; gr < g->groups; gr++) {
            const char *xg = plane(j, j->x, n, g->C, gr * g->Cg, g->H * g->W);
            char *yg = (char *)plane(j, j->y, n, g->O, gr * g->Og, g->P);
            const void *col = xg;
            if (!g->direct) {
                im2col(j->dt, g, xg, j->cols[thread]);
                col = j->cols[thread];
            }
            double beta = 0.0;
            if (j->bias) { /* start from the bias and let GEMM add the product (beta 1) */
                for (int64_t o = 0; o < g->Og; o++) {
                    int64_t oc = gr * g->Og + o;
                    if (j->dt == DDPL_FLOAT32) {
                        float b = ((const float *)j->bias)[oc], *r = (float *)yg + o * g->P;
                        for (int64_t p = 0; p < g->P; p++) r[p] = b;
                    } else if (j->dt == DDPL_BFLOAT16) {
                        uint16_t b = ((const uint16_t *)j->bias)[oc],
                                 *r = (uint16_t *)yg + o * g->P;
                        for (int64_t p = 0; p < g->P; p++) r[p] = b;
                    } else {
                        double b = ((const double *)j->bias)[oc], *r = (double *)yg + o * g->P;
                        for (int64_t p = 0; p < g->P; p++) r[p] = b;
                    }
                }
                beta = 1.0;
            }
            const char *wg = j->w + gr * g->Og * g->Kc * (int64_t)j->esz;
            if (j->bf16) {
                /* y (Og, P) = w[g] (Og, Kc) @ col (Kc, P) + beta * bias, rounded once */
                if (cpu_bf16_gemm(g->Og, g->P, g->Kc, 1.0f,
                                  (cpu_bf16_matrix){(const uint16_t *)wg, g->Kc, 1},
                                  (cpu_bf16_matrix){(const uint16_t *)col, g->P, 1}, (float)beta,
                                  yg, DDPL_BFLOAT16, g->P, 1) < 0)
                    atomic_store(&((conv_job *)j)->failed, 1);
                continue;
            }
            cpu_blas_gemm(j->dt, false, false, g->Og, g->P, g->Kc, 1.0, wg, g->Kc, col, g->P, beta,
                          yg, g->P);
        }
}

/* The per-thread (im2col) or per-part (dw sums) buffers of one call: one block from the host
 * caching allocator (a call's buffers have the same sizes every training step, so the block
 * comes back from the cache with its pages mapped, where malloc gave fresh pages to fault in on
 * every call with 2 threads), cut into 64-byte aligned slices; the callers see the slices'
 * array. */
typedef struct slices {
    void *block;
    size_t bytes;
    void *slice[]; /* `count` of them */
} slices;

/* Allocates `count` buffers of `elems` elements, zeroed if asked; NULL when out of memory or
 * the sizes overflow. */
static void **alloc_slices(int count, int64_t elems, size_t esz, bool zero)
{
    size_t each, bytes;
    if (ddpl_bytes_overflow(elems, esz, &each) || each > SIZE_MAX - 63) return NULL;
    each = (each + 63) & ~(size_t)63;
    if (__builtin_mul_overflow(each, (size_t)count, &bytes)) return NULL;
    slices *sl = malloc(sizeof *sl + (size_t)count * sizeof sl->slice[0]);
    if (!sl) return NULL;
    sl->bytes = bytes ? bytes : 1;
    if (!(sl->block = ddpl_host_scratch_alloc(sl->bytes))) {
        free(sl);
        return NULL;
    }
    if (zero) memset(sl->block, 0, sl->bytes);
    for (int t = 0; t < count; t++) sl->slice[t] = (char *)sl->block + (size_t)t * each;
    return sl->slice;
}

static void free_slices(void **bufs)
{
    if (!bufs) return;
    slices *sl = (slices *)((char *)bufs - offsetof(slices, slice));
    ddpl_host_scratch_free(sl->block, sl->bytes);
    free(sl);
}

/* out[0] y (N,O,OH,OW); in[0] x (N,C,H,W), in[1] w (O,C/g,kh,kw), in[2] bias (O)?; all
 * contiguous, float32 or float64; C, O, OH, OW >= 1 (checked by the op). */
/* Whether this convolution of a 16-bit input runs natively (bfloat16 on the bf16 GEMM, outside
 * the Winograd path's shapes); false: the float32 kernel on widened copies. */
static bool bf16_native(const conv_geom *g, ddpl_dtype dt, bool adjoint)
{
    cpu_winograd_shape ws;
    return dt == DDPL_BFLOAT16 && cpu_bf16_gemm_available() &&
           !winograd_shape(g, DDPL_FLOAT32, adjoint, &ws);
}

int cpu_conv2d(ddpl_tensor **out, ddpl_tensor **in, const void *params)
{
    conv_job j = {.dt = (ddpl_dtype)in[0]->dtype};
    conv_geom_init(&j.g, in[0], in[1], out[0], params);
    if (ddpl_tensor_numel(out[0]) == 0) return 0;
    if (cpu_has_half(3, in)) {
        if (!bf16_native(&j.g, j.dt, false))
            return cpu_run_widened(cpu_conv2d, 1, out, 3, in, params, 0);
        j.bf16 = true;
    }
    j.esz = ddpl_dtype_size(j.dt);
    j.x = ddpl_data_ptr(in[0]);
    j.w = ddpl_data_ptr(in[1]);
    j.bias = in[2] ? ddpl_data_ptr(in[2]) : NULL;
    j.y = ddpl_data_ptr(out[0]);
    cpu_winograd_shape ws;
    if (winograd_shape(&j.g, j.dt, false, &ws))
        return cpu_winograd_conv3x3(&ws, (const float *)j.x, (const float *)j.w, false,
                                    (const float *)j.bias, (float *)j.y);
    int nt = cpu_blas_max_threads();
    if (!j.g.direct && !(j.cols = alloc_slices(nt, j.g.Kc * j.g.P, j.esz, false)))
        return ddpl_error("conv2d: out of memory for the im2col buffers (%lld x %lld)",
                          (long long)j.g.Kc, (long long)j.g.P);
    cpu_blas_parallel_for(j.g.N, 0, conv_forward_images, &j);
    free_slices(j.cols);
    return atomic_load(&j.failed) ? ddpl_error("conv2d: out of memory for the bf16 GEMM's scratch")
                                  : 0;
}

/* dx[n, g] of a bfloat16 convolution: dcol (Kc, P) = w[g]^T @ dy[n, g] in float32, col2im into
 * a float32 image, rounded once into dx (direct: the product is dx itself, rounded by GEMM). */
static void bf16_dx(const conv_job *j, int thread, const char *wg, const char *dyg, char *dxg)
{
    const conv_geom *g = &j->g;
    cpu_bf16_matrix wt = {(const uint16_t *)wg, 1, g->Kc}, dy = {(const uint16_t *)dyg, g->P, 1};
    int rc;
    if (g->direct) {
        rc = cpu_bf16_gemm(g->Kc, g->P, g->Og, 1.0f, wt, dy, 0.0f, dxg, DDPL_BFLOAT16, g->P, 1);
    } else {
        float *dcol = j->dx_f32[thread], *dxf = dcol + g->Kc * g->P;
        int64_t plane_n = g->Cg * g->H * g->W;
        rc = cpu_bf16_gemm(g->Kc, g->P, g->Og, 1.0f, wt, dy, 0.0f, dcol, DDPL_FLOAT32, g->P, 1);
        memset(dxf, 0, (size_t)plane_n * sizeof(float));
        col2im_f32(g, dcol, dxf);
        cpu_float_to_bf16((uint16_t *)dxg, dxf, plane_n);
    }
    if (rc < 0) atomic_store(&((conv_job *)j)->failed, 1);
}

static void conv_backward_images(int64_t begin, int64_t end, int part, int thread, void *ctx)
{
    const conv_job *j = ctx;
    const conv_geom *g = &j->g;
    int64_t esz = (int64_t)j->esz;
    for (int64_t n = begin; n < end; n++)
        for (int64_t gr = 0; gr < g->groups; gr++) {
            const char *dyg = plane(j, j->dy, n, g->O, gr * g->Og, g->P);
            const char *wg = j->w + gr * g->Og * g->Kc * esz;
            if (j->db_acc) /* the bias gradient from the planes about to be read anyway */
                for (int64_t o = 0; o < g->Og; o++)
                    j->db_acc[part][gr * g->Og + o] += plane_sum(j, dyg + o * g->P * esz);
            if (j->dw_acc) {
                const char *xg = plane(j, j->x, n, g->C, gr * g->Cg, g->H * g->W);
                const void *col = xg;
                if (!g->direct) {
                    im2col(j->dt, g, xg, j->cols[thread]);
                    col = j->cols[thread];
                }
                /* dw[g] (Og, Kc) += dy (Og, P) @ col^T (P, Kc) */
                if (j->bf16) {
                    float *acc = (float *)j->dw_acc[part] + gr * g->Og * g->Kc;
                    if (cpu_bf16_gemm(g->Og, g->Kc, g->P, 1.0f,
                                      (cpu_bf16_matrix){(const uint16_t *)dyg, g->P, 1},
                                      (cpu_bf16_matrix){(const uint16_t *)col, 1, g->P}, 1.0f, acc,
                                      DDPL_FLOAT32, g->Kc, 1) < 0)
                        atomic_store(&((conv_job *)j)->failed, 1);
                } else {
                    cpu_blas_gemm(j->dt, false, true, g->Og, g->Kc, g->P, 1.0, dyg, g->P, col, g->P,
                                  1.0, j->dw_acc[part] + gr * g->Og * g->Kc * esz, g->Kc);
                }
            }
            if (j->dx && j->bf16) {
                bf16_dx(j, thread, wg, dyg,
                        (char *)plane(j, j->dx, n, g->C, gr * g->Cg, g->H * g->W));
                continue;
            }
            if (j->dx) {
                char *dxg = (char *)plane(j, j->dx, n, g->C, gr * g->Cg, g->H * g->W);
                /* dcol (Kc, P) = w[g]^T (Kc, Og) @ dy (Og, P); direct: dcol is dx itself */
                void *dcol = g->direct ? (void *)dxg : j->cols[thread];
                cpu_blas_gemm(j->dt, true, false, g->Kc, g->P, g->Og, 1.0, wg, g->Kc, dyg, g->P,
                              0.0, dcol, g->P);
                if (!g->direct) {
                    memset(dxg, 0, (size_t)(g->Cg * g->H * g->W * esz));
                    col2im(j->dt, g, dcol, dxg);
                }
            }
        }
}

/* dbias[o] = sum over n and pixels of dy[n, o], for o in [begin, end): a channel is one
 * thread's, summed in the same order whatever the thread count. Used when the images' loop
 * does not run (both gradients by Winograd); otherwise that loop sums each image's planes while
 * they are in cache (db_acc). */
static void conv_bias_grad_range(int64_t begin, int64_t end, void *ctx)
{
    const conv_job *j = ctx;
    const conv_geom *g = &j->g;
    for (int64_t o = begin; o < end; o++) {
        double s = 0;
        for (int64_t n = 0; n < g->N; n++) s += plane_sum(j, plane(j, j->dy, n, g->O, o, g->P));
        ddpl_store_f64(j->db + o * (int64_t)j->esz, j->dt, s);
    }
}

/* out[0] dx?, out[1] dw?, out[2] dbias?; in[0] dy (N,O,OH,OW), in[1] x, in[2] w. */
int cpu_conv2d_backward(ddpl_tensor **out, ddpl_tensor **in, const void *params)
{
    conv_job j = {.dt = (ddpl_dtype)in[1]->dtype};
    conv_geom_init(&j.g, in[1], in[2], in[0], params);
    if (cpu_has_half(3, in)) {
        /* both gradients natively, or both widened (Winograd takes 3x3 shapes in float32) */
        if (!bf16_native(&j.g, j.dt, true) || !bf16_native(&j.g, j.dt, false))
            return cpu_run_widened(cpu_conv2d_backward, 3, out, 3, in, params, 0);
        j.bf16 = true;
    }
    j.esz = ddpl_dtype_size(j.dt);
    j.dy = ddpl_data_ptr(in[0]);
    j.x = ddpl_data_ptr(in[1]);
    j.w = ddpl_data_ptr(in[2]);
    j.dx = out[0] ? ddpl_data_ptr(out[0]) : NULL;
    int nt = cpu_blas_max_threads();
    int64_t wsize = j.g.O * j.g.Kc;
    /* each image's dx is zeroed before its col2im (the direct 1x1 path writes it whole); only
     * an empty product leaves dx to zero here */
    bool work = j.g.P > 0 && j.g.Kc > 0;
    cpu_winograd_shape ws; /* dx by Winograd: the images' loop below then only does dw */
    if (j.dx && work && winograd_shape(&j.g, j.dt, true, &ws)) {
        if (cpu_winograd_conv3x3(&ws, (const float *)j.dy, (const float *)j.w, true, NULL,
                                 (float *)j.dx) < 0)
            return -1;
        j.dx = NULL;
    }
    if (out[0] && !work && ddpl_tensor_numel(out[0])) memset(j.dx, 0, ddpl_tensor_nbytes(out[0]));
    bool dw_left = out[1] != NULL; /* dw still to compute in the images' loop */
    if (dw_left && work && winograd_shape(&j.g, j.dt, false, &ws)) {
        if (cpu_winograd_weight_grad3x3(&ws, (const float *)j.x, (const float *)j.dy,
                                        (float *)ddpl_data_ptr(out[1])) < 0)
            return -1;
        dw_left = false;
    }
    int parts = cpu_blas_parts(j.g.N);                /* dw: a sum per part, added in part order */
    ddpl_dtype acc_dt = j.bf16 ? DDPL_FLOAT32 : j.dt; /* the accumulators' dtype */
    size_t acc_esz = ddpl_dtype_size(acc_dt);
    if (dw_left && !(j.dw_acc = (char **)alloc_slices(parts, wsize, acc_esz, true)))
        return ddpl_error("conv2d: out of memory for the weight-gradient accumulators");
    if (j.bf16 && j.dx && !j.g.direct && work &&
        !(j.dx_f32 =
              alloc_slices(nt, j.g.Kc * j.g.P + j.g.Cg * j.g.H * j.g.W, sizeof(float), false))) {
        free_slices((void **)j.dw_acc);
        return ddpl_error("conv2d: out of memory for the float32 input-gradient buffers");
    }
    if (!j.g.direct && j.g.P > 0 && (j.dx || dw_left) &&
        !(j.cols = alloc_slices(nt, j.g.Kc * j.g.P, j.esz, false))) {
        free_slices((void **)j.dw_acc);
        free_slices(j.dx_f32);
        return ddpl_error("conv2d: out of memory for the im2col buffers (%lld x %lld)",
                          (long long)j.g.Kc, (long long)j.g.P);
    }
    bool images_loop = work && (j.dx || dw_left);
    /* db in the images' loop when it runs: a sum per part, added in part order below */
    if (out[2] && images_loop &&
        !(j.db_acc = (double **)alloc_slices(parts, j.g.O, sizeof(double), true))) {
        free_slices((void **)j.dw_acc);
        free_slices(j.dx_f32);
        free_slices(j.cols);
        return ddpl_error("conv2d: out of memory for the bias-gradient sums");
    }
    if (images_loop) cpu_blas_parallel_for(j.g.N, parts, conv_backward_images, &j);
    if (dw_left) { /* sum the per-part accumulators into dw, in part order */
        char *dw = ddpl_data_ptr(out[1]);
        for (int64_t i = 0; i < wsize; i++) {
            double s = 0;
            for (int t = 0; t < parts; t++)
                s += ddpl_load_f64(j.dw_acc[t] + i * (int64_t)acc_esz, acc_dt);
            ddpl_store_f64(dw + i * (int64_t)j.esz, j.dt, s);
        }
    }
    if (out[2]) {
        j.db = ddpl_data_ptr(out[2]);
        if (j.db_acc)
            for (int64_t o = 0; o < j.g.O; o++) {
                double s = 0;
                for (int t = 0; t < parts; t++) s += j.db_acc[t][o];
                ddpl_store_f64(j.db + o * (int64_t)j.esz, j.dt, s);
            }
        else
            cpu_parallel_for(j.g.O, CPU_GRAIN / (j.g.N * j.g.P + 1) + 1, conv_bias_grad_range, &j);
    }
    free_slices((void **)j.db_acc);
    free_slices((void **)j.dw_acc);
    free_slices(j.dx_f32);
    free_slices(j.cols);
    return atomic_load(&j.failed) ? ddpl_error("conv2d: out of memory for the bf16 GEMM's scratch")
                                  : 0;
}
