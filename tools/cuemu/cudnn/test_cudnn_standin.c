/* tools/cuemu/cudnn/test_cudnn_standin.c: checks the cuDNN stand-in (argv[1], opened with dlopen
 * as engine/cuda/cuda_dynlib.c opens libcudnn) against double-precision loops.
 * defines: main (the exported names, version and error strings, descriptor argument checks,
 *          the output-size formula, forward / backward-data / backward-filter over groups,
 *          stride, padding, dilation, both modes, NCHW and NHWC, f32 / f64 / f16 / bf16, alpha
 *          and beta (beta 0 over NaN), the adjoint identities <conv(x,w), g> = <x, dX(g,w)> =
 *          <w, dW(x,g)>, the algorithm searches as cuda_conv.c reads them, and the error
 *          statuses of shape, type and algorithm mismatches, and the
 *          DDPL_CUEMU_CUDNN_HEURISTICS knob: none, conversion_first, normal, a bad value).
 * The references are written independently of the stand-in: backward data gathers over output
 * positions (the stand-in scatters). Prints one line per failure and ends with
 * "N passed, M failed"; exits 1 on any failure. */
#define _POSIX_C_SOURCE 200809L /* setenv, unsetenv */

#include <cudnn.h>
#include <dlfcn.h>
#include <math.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cuemu_check.h"
#include "cuemu_fp16.h"

/* ---- the library, resolved by name as the engine does ---- */
#define FUNCS(X)                                                                                   \
    X(cudnnConvolutionBackwardData)                                                                \
    X(cudnnConvolutionBackwardFilter)                                                              \
    X(cudnnConvolutionForward)                                                                     \
    X(cudnnCreate)                                                                                 \
    X(cudnnCreateConvolutionDescriptor)                                                            \
    X(cudnnCreateFilterDescriptor)                                                                 \
    X(cudnnCreateTensorDescriptor)                                                                 \
    X(cudnnDestroyConvolutionDescriptor)                                                           \
    X(cudnnDestroyFilterDescriptor)                                                                \
    X(cudnnDestroyTensorDescriptor)                                                                \
    X(cudnnFindConvolutionBackwardDataAlgorithm)                                                   \
    X(cudnnFindConvolutionBackwardFilterAlgorithm)                                                 \
    X(cudnnFindConvolutionForwardAlgorithm)                                                        \
    X(cudnnGetConvolutionBackwardDataAlgorithm_v7)                                                 \
    X(cudnnGetConvolutionBackwardFilterAlgorithm_v7)                                               \
    X(cudnnGetConvolutionForwardAlgorithm_v7)                                                      \
    X(cudnnGetErrorString)                                                                         \
    X(cudnnGetVersion)                                                                             \
    X(cudnnSetConvolution2dDescriptor)                                                             \
    X(cudnnSetConvolutionGroupCount)                                                               \
    X(cudnnSetConvolutionMathType)                                                                 \
    X(cudnnSetFilter4dDescriptor)                                                                  \
    X(cudnnSetStream)                                                                              \
    X(cudnnSetTensor4dDescriptor)                                                                  \
    X(cudnnDestroy)                                                                                \
    X(cudnnGetConvolution2dForwardOutputDim)

static struct {
#define FIELD(fn) __typeof__(&fn) fn;
    FUNCS(FIELD)
#undef FIELD
} lib;

static int load(const char *path)
{
    void *h = dlopen(path, RTLD_NOW | RTLD_LOCAL);
    if (!h) {
        printf("cannot open %s: %s\n", path, dlerror());
        return -1;
    }
    int missing = 0;
#define RESOLVE(fn)                                                                                \
    {                                                                                              \
        void *p = dlsym(h, #fn);                                                                   \
        CHECK(p != NULL, "symbol %s missing", #fn);                                                \
        missing += !p;                                                                             \
        memcpy(&lib.fn, &p, sizeof p);                                                             \
    }
    FUNCS(RESOLVE)
#undef RESOLVE
    CHECK(dlsym(h, "cudnn_standin_geometry") == NULL, "internal symbols are exported");
    return missing ? -1 : 0;
}

static const char *err(cudnnStatus_t st)
{
    return lib.cudnnGetErrorString(st);
}

/* ---- 16-bit rounding, independent of cuemu_fp16.h: rint at the type's precision ---- */
static double ref_round(double x, int mant, int emin, double maxv)
{
    if (isnan(x) || x == 0) return x;
    int e;
    frexp(x, &e);
    int exp = e - 1 < emin ? emin : e - 1;
    double ulp = ldexp(1.0, exp - mant);
    double r = rint(x / ulp) * ulp;
    return fabs(r) > maxv ? copysign(INFINITY, x) : r;
}

/* ---- a convolution problem ---- */
typedef struct {
    int n, c, h, w, k, groups, r, s;
    int pad[2], stride[2], dil[2];
    cudnnConvolutionMode_t mode;
    cudnnTensorFormat_t format;
} conv_cfg;

typedef struct {
    const char *name;
    cudnnDataType_t data, compute;
    double tol; /* 0: exact after one rounding to the data type */
} conv_type;

static const conv_type conv_types[] = {
    {"f32", CUDNN_DATA_FLOAT, CUDNN_DATA_FLOAT, 1e-5},
    {"f64", CUDNN_DATA_DOUBLE, CUDNN_DATA_DOUBLE, 1e-13},
    {"f16", CUDNN_DATA_HALF, CUDNN_DATA_FLOAT, 0},
    {"bf16", CUDNN_DATA_BFLOAT16, CUDNN_DATA_FLOAT, 0},
    {"f16 true-half", CUDNN_DATA_HALF, CUDNN_DATA_HALF, 0},
};

static int out_dim(int in, int pad, int taps, int dil, int stride)
{
    return (in + 2 * pad - ((taps - 1) * dil + 1)) / stride + 1;
}

/* Reference arrays are packed NCHW / KCRS doubles. */
#define XI(q, n_, c_, h_, w_) ((((size_t)(n_) * (q)->c + (c_)) * (q)->h + (h_)) * (q)->w + (w_))
#define WI(q, k_, c_, i_, j_)                                                                      \
    ((((size_t)(k_) * ((q)->c / (q)->groups) + (c_)) * (q)->r + (i_)) * (q)->s + (j_))
#define YI(q, oh_, ow_, n_, k_, y_, x_)                                                            \
    ((((size_t)(n_) * (q)->k + (k_)) * (oh_) + (y_)) * (ow_) + (x_))

/* the filter tap used at (i, j): rotated for CUDNN_CONVOLUTION */
static void tap(const conv_cfg *q, int i, int j, int *ti, int *tj)
{
    bool flip = q->mode == CUDNN_CONVOLUTION;
    *ti = flip ? q->r - 1 - i : i, *tj = flip ? q->s - 1 - j : j;
}

static void ref_forward(const conv_cfg *q, const double *x, const double *w, double *y)
{
    int oh = out_dim(q->h, q->pad[0], q->r, q->dil[0], q->stride[0]);
    int ow = out_dim(q->w, q->pad[1], q->s, q->dil[1], q->stride[1]);
    int cg = q->c / q->groups, kg = q->k / q->groups;
    for (int n = 0; n < q->n; n++)
        for (int k = 0; k < q->k; k++)
            for (int a = 0; a < oh; a++)
                for (int b = 0; b < ow; b++) {
                    double sum = 0;
                    for (int c = 0; c < cg; c++)
                        for (int i = 0; i < q->r; i++)
                            for (int j = 0; j < q->s; j++) {
                                int ih = a * q->stride[0] - q->pad[0] + i * q->dil[0];
                                int iw = b * q->stride[1] - q->pad[1] + j * q->dil[1];
                                if (ih < 0 || ih >= q->h || iw < 0 || iw >= q->w) continue;
                                int ti, tj;
                                tap(q, i, j, &ti, &tj);
                                sum +=
                                    x[XI(q, n, k / kg * cg + c, ih, iw)] * w[WI(q, k, c, ti, tj)];
                            }
                    y[YI(q, oh, ow, n, k, a, b)] = sum;
                }
}

/* dx[n, ci, ih, iw]: a gather over the output positions whose taps reach (ih, iw) */
static void ref_backward_data(const conv_cfg *q, const double *w, const double *dy, double *dx)
{
    int oh = out_dim(q->h, q->pad[0], q->r, q->dil[0], q->stride[0]);
    int ow = out_dim(q->w, q->pad[1], q->s, q->dil[1], q->stride[1]);
    int cg = q->c / q->groups, kg = q->k / q->groups;
    for (int n = 0; n < q->n; n++)
        for (int ci = 0; ci < q->c; ci++)
            for (int ih = 0; ih < q->h; ih++)
                for (int iw = 0; iw < q->w; iw++) {
                    double sum = 0;
                    int g = ci / cg, c = ci % cg;
                    for (int k = g * kg; k < (g + 1) * kg; k++)
                        for (int i = 0; i < q->r; i++)
                            for (int j = 0; j < q->s; j++) {
                                int th = ih + q->pad[0] - i * q->dil[0];
                                int tw = iw + q->pad[1] - j * q->dil[1];
                                if (th < 0 || tw < 0 || th % q->stride[0] || tw % q->stride[1])
                                    continue;
                                int a = th / q->stride[0], b = tw / q->stride[1];
                                if (a >= oh || b >= ow) continue;
                                int ti, tj;
                                tap(q, i, j, &ti, &tj);
                                sum += dy[YI(q, oh, ow, n, k, a, b)] * w[WI(q, k, c, ti, tj)];
                            }
                    dx[XI(q, n, ci, ih, iw)] = sum;
                }
}

static void ref_backward_filter(const conv_cfg *q, const double *x, const double *dy, double *dw)
{
    int oh = out_dim(q->h, q->pad[0], q->r, q->dil[0], q->stride[0]);
    int ow = out_dim(q->w, q->pad[1], q->s, q->dil[1], q->stride[1]);
    int cg = q->c / q->groups, kg = q->k / q->groups;
    for (int k = 0; k < q->k; k++)
        for (int c = 0; c < cg; c++)
            for (int i = 0; i < q->r; i++)
                for (int j = 0; j < q->s; j++) {
                    double sum = 0;
                    for (int n = 0; n < q->n; n++)
                        for (int a = 0; a < oh; a++)
                            for (int b = 0; b < ow; b++) {
                                int ih = a * q->stride[0] - q->pad[0] + i * q->dil[0];
                                int iw = b * q->stride[1] - q->pad[1] + j * q->dil[1];
                                if (ih < 0 || ih >= q->h || iw < 0 || iw >= q->w) continue;
                                sum += x[XI(q, n, k / kg * cg + c, ih, iw)] *
                                       dy[YI(q, oh, ow, n, k, a, b)];
                            }
                    int ti, tj;
                    tap(q, i, j, &ti, &tj);
                    dw[WI(q, k, c, ti, tj)] = sum;
                }
}

/* ---- typed device buffers in NCHW or NHWC ---- */
static size_t dsize(cudnnDataType_t t)
{
    return t == CUDNN_DATA_DOUBLE ? 8 : t == CUDNN_DATA_FLOAT ? 4 : 2;
}

/* offset of packed (a,b,c,d) = (n,c,h,w) in the layout: NHWC keeps the channel innermost */
static size_t layout_at(cudnnTensorFormat_t f, const int d[4], int a, int b, int c, int e)
{
    if (f == CUDNN_TENSOR_NCHW) return (((size_t)a * d[1] + b) * d[2] + c) * d[3] + e;
    return (((size_t)a * d[2] + c) * d[3] + e) * d[1] + b;
}

static void to_device(void *dst, cudnnDataType_t t, cudnnTensorFormat_t f, const int d[4],
                      const double *src)
{
    size_t p = 0;
    for (int a = 0; a < d[0]; a++)
        for (int b = 0; b < d[1]; b++)
            for (int c = 0; c < d[2]; c++)
                for (int e = 0; e < d[3]; e++, p++) {
                    size_t at = layout_at(f, d, a, b, c, e);
                    double v = src[p];
                    switch (t) {
                    case CUDNN_DATA_DOUBLE:
                        ((double *)dst)[at] = v;
                        break;
                    case CUDNN_DATA_FLOAT:
                        ((float *)dst)[at] = (float)v;
                        break;
                    case CUDNN_DATA_HALF:
                        ((uint16_t *)dst)[at] = cuemu_float_to_half((float)v);
                        break;
                    default:
                        ((uint16_t *)dst)[at] = cuemu_float_to_bf16((float)v);
                        break;
                    }
                }
}

static void from_device(double *dst, cudnnDataType_t t, cudnnTensorFormat_t f, const int d[4],
                        const void *src)
{
    size_t p = 0;
    for (int a = 0; a < d[0]; a++)
        for (int b = 0; b < d[1]; b++)
            for (int c = 0; c < d[2]; c++)
                for (int e = 0; e < d[3]; e++, p++) {
                    size_t at = layout_at(f, d, a, b, c, e);
                    switch (t) {
                    case CUDNN_DATA_DOUBLE:
                        dst[p] = ((const double *)src)[at];
                        break;
                    case CUDNN_DATA_FLOAT:
                        dst[p] = ((const float *)src)[at];
                        break;
                    case CUDNN_DATA_HALF:
                        dst[p] = cuemu_half_to_float(((const uint16_t *)src)[at]);
                        break;
                    default:
                        dst[p] = cuemu_bf16_to_float(((const uint16_t *)src)[at]);
                        break;
                    }
                }
}

static size_t prod4(const int d[4])
{
    return (size_t)d[0] * d[1] * d[2] * d[3];
}

/* small multiples of 1/8: exact in every type, and float sums of their products are exact */
static void fill(double *p, size_t n, bool exact)
{
    for (size_t i = 0; i < n; i++)
        p[i] = exact ? (double)(rand() % 17 - 8) / 8.0 : (double)rand() / RAND_MAX * 2 - 1;
}

/* ---- descriptors for a problem ---- */
typedef struct {
    cudnnHandle_t h;
    cudnnTensorDescriptor_t x, y;
    cudnnFilterDescriptor_t w;
    cudnnConvolutionDescriptor_t conv;
    int xd[4], wd[4], yd[4];
} setup;

static cudnnStatus_t setup_init(setup *s, cudnnHandle_t h, const conv_cfg *q, const conv_type *ty,
                                cudnnMathType_t math)
{
    memset(s, 0, sizeof *s);
    s->h = h;
    int oh = out_dim(q->h, q->pad[0], q->r, q->dil[0], q->stride[0]);
    int ow = out_dim(q->w, q->pad[1], q->s, q->dil[1], q->stride[1]);
    int xd[4] = {q->n, q->c, q->h, q->w}, wd[4] = {q->k, q->c / q->groups, q->r, q->s};
    int yd[4] = {q->n, q->k, oh, ow};
    memcpy(s->xd, xd, sizeof xd), memcpy(s->wd, wd, sizeof wd), memcpy(s->yd, yd, sizeof yd);
    cudnnStatus_t st = lib.cudnnCreateTensorDescriptor(&s->x);
    if (!st) st = lib.cudnnCreateTensorDescriptor(&s->y);
    if (!st) st = lib.cudnnCreateFilterDescriptor(&s->w);
    if (!st) st = lib.cudnnCreateConvolutionDescriptor(&s->conv);
    if (!st)
        st = lib.cudnnSetTensor4dDescriptor(s->x, q->format, ty->data, xd[0], xd[1], xd[2], xd[3]);
    if (!st)
        st = lib.cudnnSetTensor4dDescriptor(s->y, q->format, ty->data, yd[0], yd[1], yd[2], yd[3]);
    if (!st)
        st = lib.cudnnSetFilter4dDescriptor(s->w, ty->data, q->format, wd[0], wd[1], wd[2], wd[3]);
    if (!st)
        st = lib.cudnnSetConvolution2dDescriptor(s->conv, q->pad[0], q->pad[1], q->stride[0],
                                                 q->stride[1], q->dil[0], q->dil[1], q->mode,
                                                 ty->compute);
    if (!st) st = lib.cudnnSetConvolutionGroupCount(s->conv, q->groups);
    if (!st) st = lib.cudnnSetConvolutionMathType(s->conv, math);
    return st;
}

static void setup_destroy(setup *s)
{
    lib.cudnnDestroyTensorDescriptor(s->x);
    lib.cudnnDestroyTensorDescriptor(s->y);
    lib.cudnnDestroyFilterDescriptor(s->w);
    lib.cudnnDestroyConvolutionDescriptor(s->conv);
}

/* The engine's choice (cuda_conv.c's PICK_ALGO): the first result that succeeded. */
typedef enum { FWD, BWD_DATA, BWD_FILTER } pass;

static int pick_algo(setup *s, pass p, bool find, cudnnMathType_t want_math)
{
    enum { MAX = 16 };
    int count = -1, algo = -1;
    cudnnStatus_t st;
    bool math_ok = true, mem_ok = true;
#define PICK(perf)                                                                                 \
    for (int i = 0; i < count && algo < 0; i++)                                                    \
        if (perf[i].status == CUDNN_STATUS_SUCCESS) {                                              \
            algo = (int)perf[i].algo;                                                              \
            math_ok = perf[i].mathType == want_math;                                               \
            mem_ok = perf[i].memory == 0;                                                          \
        }
    if (p == FWD) {
        cudnnConvolutionFwdAlgoPerf_t perf[MAX];
        st = find ? lib.cudnnFindConvolutionForwardAlgorithm(s->h, s->x, s->w, s->conv, s->y, MAX,
                                                             &count, perf)
                  : lib.cudnnGetConvolutionForwardAlgorithm_v7(s->h, s->x, s->w, s->conv, s->y, MAX,
                                                               &count, perf);
        PICK(perf)
    } else if (p == BWD_DATA) {
        cudnnConvolutionBwdDataAlgoPerf_t perf[MAX];
        st = find ? lib.cudnnFindConvolutionBackwardDataAlgorithm(s->h, s->w, s->y, s->conv, s->x,
                                                                  MAX, &count, perf)
                  : lib.cudnnGetConvolutionBackwardDataAlgorithm_v7(s->h, s->w, s->y, s->conv, s->x,
                                                                    MAX, &count, perf);
        PICK(perf)
    } else {
        cudnnConvolutionBwdFilterAlgoPerf_t perf[MAX];
        st = find ? lib.cudnnFindConvolutionBackwardFilterAlgorithm(s->h, s->x, s->y, s->conv, s->w,
                                                                    MAX, &count, perf)
                  : lib.cudnnGetConvolutionBackwardFilterAlgorithm_v7(s->h, s->x, s->y, s->conv,
                                                                      s->w, MAX, &count, perf);
        PICK(perf)
    }
#undef PICK
    CHECK(st == CUDNN_STATUS_SUCCESS && count >= 1 && algo >= 0 && math_ok && mem_ok,
          "algorithm search (pass %d, find %d): %s, %d results, algo %d, math ok %d, memory 0 %d",
          (int)p, (int)find, err(st), count, algo, (int)math_ok, (int)mem_ok);
    return algo;
}

/* Runs one pass through the library into `out` (a typed buffer already holding its old value)
 * and returns the status. */
static cudnnStatus_t run_pass(setup *s, pass p, int algo, bool f64, double alpha, double beta,
                              const void *a, const void *b, void *out)
{
    float af = (float)alpha, bf = (float)beta;
    const void *pa = f64 ? (const void *)&alpha : (const void *)&af;
    const void *pb = f64 ? (const void *)&beta : (const void *)&bf;
    char ws[64]; /* a workspace the stand-in never needs */
    switch (p) {
    case FWD:
        return lib.cudnnConvolutionForward(s->h, pa, s->x, a, s->w, b, s->conv,
                                           (cudnnConvolutionFwdAlgo_t)algo, ws, sizeof ws, pb, s->y,
                                           out);
    case BWD_DATA:
        return lib.cudnnConvolutionBackwardData(s->h, pa, s->w, a, s->y, b, s->conv,
                                                (cudnnConvolutionBwdDataAlgo_t)algo, NULL, 0, pb,
                                                s->x, out);
    default:
        return lib.cudnnConvolutionBackwardFilter(s->h, pa, s->x, a, s->y, b, s->conv,
                                                  (cudnnConvolutionBwdFilterAlgo_t)algo, NULL, 0,
                                                  pb, s->w, out);
    }
}

static const char *pass_name[] = {"forward", "backward data", "backward filter"};

/* Compares got with alpha * ref + beta * old (old ignored for beta 0), exact after rounding for
 * 16-bit types; returns the count of wrong elements. */
static int compare(const conv_type *ty, const double *got, const double *ref, const double *old,
                   const double *mag, size_t n, double alpha, double beta, double *worst)
{
    int bad = 0;
    for (size_t i = 0; i < n; i++) {
        double want = alpha * ref[i] + (beta == 0 ? 0 : beta * old[i]);
        double scale = fabs(alpha) * mag[i] + (beta == 0 ? 0 : fabs(beta * old[i])) + 1e-30;
        if (ty->tol == 0) {
            want = ty->data == CUDNN_DATA_HALF ? ref_round(want, 10, -14, 65504.0)
                                               : ref_round(want, 7, -126, ldexp(255.0, 120));
            if (got[i] != want) bad++;
        } else if (!(fabs(got[i] - want) <= ty->tol * scale)) {
            bad++;
        }
        double e = fabs(got[i] - want) / scale;
        if (!(e <= *worst)) *worst = e;
    }
    return bad;
}

/* Every pass of one problem in one type, against the references, with two (alpha, beta). */
static void run_problem(cudnnHandle_t h, const conv_cfg *q, const conv_type *ty, bool find)
{
    bool exact = ty->tol == 0, f64 = ty->data == CUDNN_DATA_DOUBLE;
    cudnnMathType_t math = f64 ? CUDNN_DEFAULT_MATH : CUDNN_FMA_MATH;
    setup s;
    cudnnStatus_t st = setup_init(&s, h, q, ty, math);
    CHECK(st == CUDNN_STATUS_SUCCESS, "%s descriptors: %s", ty->name, err(st));
    if (st != CUDNN_STATUS_SUCCESS) return;
    size_t nx = prod4(s.xd), nw = prod4(s.wd), ny = prod4(s.yd);
    size_t nmax = nx > nw ? (nx > ny ? nx : ny) : (nw > ny ? nw : ny);
    double *x = malloc(nx * 8), *w = malloc(nw * 8), *gy = malloc(ny * 8);
    double *ref = malloc(nmax * 8), *mag = malloc(nmax * 8), *old = malloc(nmax * 8);
    double *got = malloc(nmax * 8);
    double *absx = malloc(nx * 8), *absw = malloc(nw * 8), *absy = malloc(ny * 8);
    void *dx = malloc(nx * dsize(ty->data)), *dw = malloc(nw * dsize(ty->data));
    void *dy = malloc(ny * dsize(ty->data)), *dout = malloc(nmax * dsize(ty->data));
    fill(x, nx, exact), fill(w, nw, exact), fill(gy, ny, exact);
    for (size_t i = 0; i < nx; i++) absx[i] = fabs(x[i]);
    for (size_t i = 0; i < nw; i++) absw[i] = fabs(w[i]);
    for (size_t i = 0; i < ny; i++) absy[i] = fabs(gy[i]);
    to_device(dx, ty->data, q->format, s.xd, x);
    to_device(dw, ty->data, q->format, s.wd, w);
    to_device(dy, ty->data, q->format, s.yd, gy);
    static const double ab[2][2] = {{1, 0}, {0.5, -1.25}};
    double dot[3] = {0, 0, 0}; /* <y, gy>, <x, dX>, <w, dW> with alpha 1, beta 0 */
    double dmag = 0;           /* the largest sum of |terms| of the three */
    for (int p = 0; p < 3; p++) {
        const int *od = p == FWD ? s.yd : p == BWD_DATA ? s.xd : s.wd;
        size_t no = prod4(od);
        /* reference and the magnitude of its terms (the same loops on |values|) */
        if (p == FWD) ref_forward(q, x, w, ref), ref_forward(q, absx, absw, mag);
        if (p == BWD_DATA) ref_backward_data(q, w, gy, ref), ref_backward_data(q, absw, absy, mag);
        if (p == BWD_FILTER)
            ref_backward_filter(q, x, gy, ref), ref_backward_filter(q, absx, absy, mag);
        int algo = pick_algo(&s, (pass)p, find, math);
        const void *a = p == FWD ? dx : p == BWD_DATA ? dw : dx;
        const void *b = p == FWD ? dw : dy;
        for (int v = 0; v < 2; v++) {
            double alpha = ab[v][0], beta = ab[v][1];
            if (beta == 0) {
                for (size_t i = 0; i < no; i++) old[i] = NAN; /* must not be read */
            } else {
                fill(old, no, exact);
            }
            to_device(dout, ty->data, q->format, od, old);
            st = run_pass(&s, (pass)p, algo, f64, alpha, beta, a, b, dout);
            from_device(got, ty->data, q->format, od, dout);
            double worst = 0;
            int bad = compare(ty, got, ref, old, mag, no, alpha, beta, &worst);
            CHECK(st == CUDNN_STATUS_SUCCESS && bad == 0,
                  "%s %s n%d c%d %dx%d k%d g%d f%dx%d pad%d,%d st%d,%d dil%d,%d %s %s alpha %g "
                  "beta %g: %s, %d of %zu wrong (worst rel %g)",
                  ty->name, pass_name[p], q->n, q->c, q->h, q->w, q->k, q->groups, q->r, q->s,
                  q->pad[0], q->pad[1], q->stride[0], q->stride[1], q->dil[0], q->dil[1],
                  q->mode == CUDNN_CONVOLUTION ? "conv" : "xcorr",
                  q->format == CUDNN_TENSOR_NCHW ? "NCHW" : "NHWC", alpha, beta, err(st), bad, no,
                  worst);
            if (v == 0) {
                const double *other = p == FWD ? gy : p == BWD_DATA ? x : w;
                double m = 0;
                for (size_t i = 0; i < no; i++)
                    dot[p] += got[i] * other[i], m += fabs(got[i] * other[i]);
                if (m > dmag) dmag = m;
            }
        }
    }
    /* the adjoint identities, up to the rounding of each output element to the data type */
    double unit = ty->data == CUDNN_DATA_DOUBLE  ? 1e-13
                  : ty->data == CUDNN_DATA_FLOAT ? 1e-6
                  : ty->data == CUDNN_DATA_HALF  ? ldexp(1, -10)
                                                 : ldexp(1, -7);
    double tol = unit * (dmag + 1e-30);
    CHECK(fabs(dot[0] - dot[1]) <= tol && fabs(dot[0] - dot[2]) <= tol,
          "%s adjoints: <conv(x,w),g> %.17g, <x,dX> %.17g, <w,dW> %.17g", ty->name, dot[0], dot[1],
          dot[2]);
    setup_destroy(&s);
    free(x), free(w), free(gy), free(ref), free(mag), free(old), free(got);
    free(absx), free(absw), free(absy), free(dx), free(dw), free(dy), free(dout);
}

static const conv_cfg problems[] = {
    /* n c h w  k g  r s  pad stride dil  mode format */
    {1, 1, 1, 1, 1, 1, 1, 1, {0, 0}, {1, 1}, {1, 1}, CUDNN_CROSS_CORRELATION, CUDNN_TENSOR_NCHW},
    {2, 3, 7, 5, 4, 1, 3, 3, {1, 1}, {1, 1}, {1, 1}, CUDNN_CROSS_CORRELATION, CUDNN_TENSOR_NCHW},
    {2, 4, 9, 8, 6, 2, 3, 2, {1, 0}, {2, 3}, {1, 1}, CUDNN_CROSS_CORRELATION, CUDNN_TENSOR_NCHW},
    {1, 3, 11, 10, 5, 1, 3, 3, {2, 1}, {1, 2}, {2, 3}, CUDNN_CROSS_CORRELATION, CUDNN_TENSOR_NCHW},
    {3, 6, 6, 7, 6, 6, 3, 3, {1, 1}, {2, 1}, {1, 1}, CUDNN_CROSS_CORRELATION, CUDNN_TENSOR_NCHW},
    {2, 4, 8, 7, 6, 2, 2, 3, {0, 2}, {3, 2}, {2, 1}, CUDNN_CONVOLUTION, CUDNN_TENSOR_NCHW},
    {2, 6, 5, 6, 9, 3, 3, 1, {1, 0}, {1, 1}, {1, 1}, CUDNN_CROSS_CORRELATION, CUDNN_TENSOR_NHWC},
    {1, 2, 4, 4, 2, 1, 4, 4, {0, 0}, {1, 1}, {1, 1}, CUDNN_CONVOLUTION, CUDNN_TENSOR_NHWC},
};

static void test_passes(cudnnHandle_t h)
{
    srand(5);
    int i = 0;
    for (size_t t = 0; t < sizeof conv_types / sizeof conv_types[0]; t++)
        for (size_t p = 0; p < sizeof problems / sizeof problems[0]; p++, i++)
            run_problem(h, &problems[p], &conv_types[t], i % 3 == 0); /* some through Find */
}

/* ---- library-level calls ---- */
static void test_basics(cudnnHandle_t h)
{
    CHECK(lib.cudnnGetVersion() == CUDNN_VERSION, "version %zu, header %d", lib.cudnnGetVersion(),
          CUDNN_VERSION);
    CHECK(!strcmp(err(CUDNN_STATUS_SUCCESS), "CUDNN_STATUS_SUCCESS") &&
              !strcmp(err(CUDNN_STATUS_BAD_PARAM), "CUDNN_STATUS_BAD_PARAM") &&
              !strcmp(err(CUDNN_STATUS_NOT_SUPPORTED), "CUDNN_STATUS_NOT_SUPPORTED") &&
              !strcmp(err(CUDNN_STATUS_INTERNAL_ERROR_HOST_ALLOCATION_FAILED),
                      "CUDNN_STATUS_INTERNAL_ERROR_HOST_ALLOCATION_FAILED") &&
              !strcmp(err(CUDNN_STATUS_EXECUTION_FAILED_CUBLAS),
                      "CUDNN_STATUS_EXECUTION_FAILED_CUBLAS") &&
              err((cudnnStatus_t)123456) != NULL,
          "error strings");
    CHECK(lib.cudnnCreate(NULL) == CUDNN_STATUS_BAD_PARAM, "create(NULL)");
    CHECK(lib.cudnnSetStream(h, (cudaStream_t)(uintptr_t)0x100) == CUDNN_STATUS_SUCCESS &&
              lib.cudnnSetStream(NULL, NULL) == CUDNN_STATUS_BAD_PARAM,
          "set stream");
    cudnnTensorDescriptor_t t;
    cudnnFilterDescriptor_t f;
    cudnnConvolutionDescriptor_t c;
    lib.cudnnCreateTensorDescriptor(&t);
    lib.cudnnCreateFilterDescriptor(&f);
    lib.cudnnCreateConvolutionDescriptor(&c);
    const cudnnTensorFormat_t NCHW = CUDNN_TENSOR_NCHW;
    const cudnnDataType_t F = CUDNN_DATA_FLOAT;
    struct {
        const char *what;
        cudnnStatus_t got, want;
    } cases[] = {
        {"tensor n 0", lib.cudnnSetTensor4dDescriptor(t, NCHW, F, 0, 1, 1, 1),
         CUDNN_STATUS_BAD_PARAM},
        {"tensor w -1", lib.cudnnSetTensor4dDescriptor(t, NCHW, F, 1, 1, 1, -1),
         CUDNN_STATUS_BAD_PARAM},
        {"tensor NCHW_VECT_C float",
         lib.cudnnSetTensor4dDescriptor(t, CUDNN_TENSOR_NCHW_VECT_C, F, 1, 4, 1, 1),
         CUDNN_STATUS_BAD_PARAM},
        {"tensor over 2^31 elements",
         lib.cudnnSetTensor4dDescriptor(t, NCHW, F, 65536, 65536, 1, 1),
         CUDNN_STATUS_NOT_SUPPORTED},
        {"tensor NULL", lib.cudnnSetTensor4dDescriptor(NULL, NCHW, F, 1, 1, 1, 1),
         CUDNN_STATUS_BAD_PARAM},
        {"filter k 0", lib.cudnnSetFilter4dDescriptor(f, F, NCHW, 0, 1, 1, 1),
         CUDNN_STATUS_BAD_PARAM},
        {"conv pad -1",
         lib.cudnnSetConvolution2dDescriptor(c, -1, 0, 1, 1, 1, 1, CUDNN_CONVOLUTION, F),
         CUDNN_STATUS_BAD_PARAM},
        {"conv stride 0",
         lib.cudnnSetConvolution2dDescriptor(c, 0, 0, 1, 0, 1, 1, CUDNN_CONVOLUTION, F),
         CUDNN_STATUS_BAD_PARAM},
        {"conv dilation 0",
         lib.cudnnSetConvolution2dDescriptor(c, 0, 0, 1, 1, 0, 1, CUDNN_CONVOLUTION, F),
         CUDNN_STATUS_BAD_PARAM},
        {"conv mode 7",
         lib.cudnnSetConvolution2dDescriptor(c, 0, 0, 1, 1, 1, 1, (cudnnConvolutionMode_t)7, F),
         CUDNN_STATUS_BAD_PARAM},
        {"groups 0", lib.cudnnSetConvolutionGroupCount(c, 0), CUDNN_STATUS_BAD_PARAM},
        {"math 9", lib.cudnnSetConvolutionMathType(c, (cudnnMathType_t)9), CUDNN_STATUS_BAD_PARAM},
        {"destroy NULL", lib.cudnnDestroyTensorDescriptor(NULL), CUDNN_STATUS_SUCCESS},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++)
        CHECK(cases[i].got == cases[i].want, "%s: got %s, want %s", cases[i].what,
              err(cases[i].got), err(cases[i].want));
    /* output size: 1 + (in + 2 pad - ((taps - 1) dil + 1)) / stride */
    int n = 0, k = 0, oh = 0, ow = 0;
    lib.cudnnSetTensor4dDescriptor(t, NCHW, F, 2, 6, 11, 10);
    lib.cudnnSetFilter4dDescriptor(f, F, NCHW, 8, 3, 3, 2);
    lib.cudnnSetConvolution2dDescriptor(c, 1, 2, 2, 3, 2, 1, CUDNN_CROSS_CORRELATION, F);
    lib.cudnnSetConvolutionGroupCount(c, 2);
    cudnnStatus_t st = lib.cudnnGetConvolution2dForwardOutputDim(c, t, f, &n, &k, &oh, &ow);
    CHECK(st == CUDNN_STATUS_SUCCESS && n == 2 && k == 8 && oh == 1 + (11 + 2 - 5) / 2 &&
              ow == 1 + (10 + 4 - 2) / 3,
          "output dim: %s (%d,%d,%d,%d)", err(st), n, k, oh, ow);
    lib.cudnnSetConvolutionGroupCount(c, 3); /* 6 channels != 3 * 3 */
    CHECK(lib.cudnnGetConvolution2dForwardOutputDim(c, t, f, &n, &k, &oh, &ow) ==
              CUDNN_STATUS_BAD_PARAM,
          "output dim with a channel mismatch");
    lib.cudnnDestroyTensorDescriptor(t);
    lib.cudnnDestroyFilterDescriptor(f);
    lib.cudnnDestroyConvolutionDescriptor(c);
}

/* Shape, type and algorithm errors of the passes and searches. */
static void test_errors(cudnnHandle_t h)
{
    static const conv_type f32 = {"f32", CUDNN_DATA_FLOAT, CUDNN_DATA_FLOAT, 1e-5};
    conv_cfg q = {
        2, 4, 6, 6, 4, 2, 3, 3, {1, 1}, {1, 1}, {1, 1}, CUDNN_CROSS_CORRELATION, CUDNN_TENSOR_NCHW};
    setup s;
    CHECK(setup_init(&s, h, &q, &f32, CUDNN_FMA_MATH) == CUDNN_STATUS_SUCCESS, "setup");
    float buf_x[2 * 4 * 6 * 6] = {0}, buf_w[4 * 2 * 9] = {0}, buf_y[2 * 4 * 6 * 6] = {0};
    float one = 1, zero = 0;
    /* well formed first */
    CHECK(lib.cudnnConvolutionForward(h, &one, s.x, buf_x, s.w, buf_w, s.conv,
                                      CUDNN_CONVOLUTION_FWD_ALGO_IMPLICIT_GEMM, NULL, 0, &zero, s.y,
                                      buf_y) == CUDNN_STATUS_SUCCESS,
          "well-formed forward");
    /* an algorithm the search called NOT_SUPPORTED, and one out of range */
    CHECK(lib.cudnnConvolutionForward(h, &one, s.x, buf_x, s.w, buf_w, s.conv,
                                      CUDNN_CONVOLUTION_FWD_ALGO_FFT, NULL, 0, &zero, s.y,
                                      buf_y) == CUDNN_STATUS_NOT_SUPPORTED,
          "unsupported algorithm");
    CHECK(lib.cudnnConvolutionBackwardData(h, &one, s.w, buf_w, s.y, buf_y, s.conv,
                                           (cudnnConvolutionBwdDataAlgo_t)42, NULL, 0, &zero, s.x,
                                           buf_x) == CUDNN_STATUS_BAD_PARAM,
          "algorithm out of range");
    cudnnConvolutionFwdAlgoPerf_t perf[8];
    int count = 0;
    cudnnStatus_t st =
        lib.cudnnGetConvolutionForwardAlgorithm_v7(h, s.x, s.w, s.conv, s.y, 8, &count, perf);
    int unsupported = -1;
    for (int i = 0; i < count; i++)
        if (perf[i].status != CUDNN_STATUS_SUCCESS) unsupported = (int)perf[i].algo;
    CHECK(st == CUDNN_STATUS_SUCCESS && count == CUDNN_CONVOLUTION_FWD_ALGO_COUNT &&
              perf[0].status == CUDNN_STATUS_SUCCESS && perf[0].mathType == CUDNN_FMA_MATH &&
              unsupported >= 0 &&
              lib.cudnnConvolutionForward(h, &one, s.x, buf_x, s.w, buf_w, s.conv,
                                          (cudnnConvolutionFwdAlgo_t)unsupported, NULL, 0, &zero,
                                          s.y, buf_y) == CUDNN_STATUS_NOT_SUPPORTED,
          "v7 lists every algorithm; a NOT_SUPPORTED one does not run (%s, %d)", err(st), count);
    CHECK(lib.cudnnGetConvolutionForwardAlgorithm_v7(h, s.x, s.w, s.conv, s.y, 1, &count, perf) ==
                  CUDNN_STATUS_SUCCESS &&
              count == 1,
          "requested 1 -> 1");
    CHECK(lib.cudnnGetConvolutionForwardAlgorithm_v7(h, s.x, s.w, s.conv, s.y, 0, &count, perf) ==
              CUDNN_STATUS_BAD_PARAM,
          "requested 0");
    CHECK(lib.cudnnFindConvolutionForwardAlgorithm(h, s.x, s.w, s.conv, s.y, 8, &count, perf) ==
                  CUDNN_STATUS_SUCCESS &&
              perf[0].time >= 0 && perf[0].time <= perf[1].time,
          "find reports times, fastest first");
    CHECK(lib.cudnnConvolutionForward(NULL, &one, s.x, buf_x, s.w, buf_w, s.conv,
                                      CUDNN_CONVOLUTION_FWD_ALGO_IMPLICIT_GEMM, NULL, 0, &zero, s.y,
                                      buf_y) == CUDNN_STATUS_BAD_PARAM,
          "NULL handle");
    CHECK(lib.cudnnConvolutionForward(h, NULL, s.x, buf_x, s.w, buf_w, s.conv,
                                      CUDNN_CONVOLUTION_FWD_ALGO_IMPLICIT_GEMM, NULL, 0, &zero, s.y,
                                      buf_y) == CUDNN_STATUS_BAD_PARAM,
          "NULL alpha");

    /* y of the wrong height: every pass and search says BAD_PARAM */
    cudnnTensorDescriptor_t bad_y;
    lib.cudnnCreateTensorDescriptor(&bad_y);
    lib.cudnnSetTensor4dDescriptor(bad_y, CUDNN_TENSOR_NCHW, CUDNN_DATA_FLOAT, 2, 4, 5, 6);
    cudnnConvolutionBwdDataAlgoPerf_t pd[8];
    cudnnConvolutionBwdFilterAlgoPerf_t pf[8];
    cudnnStatus_t got[6] = {
        lib.cudnnConvolutionForward(h, &one, s.x, buf_x, s.w, buf_w, s.conv,
                                    CUDNN_CONVOLUTION_FWD_ALGO_IMPLICIT_GEMM, NULL, 0, &zero, bad_y,
                                    buf_y),
        lib.cudnnConvolutionBackwardData(h, &one, s.w, buf_w, bad_y, buf_y, s.conv,
                                         CUDNN_CONVOLUTION_BWD_DATA_ALGO_1, NULL, 0, &zero, s.x,
                                         buf_x),
        lib.cudnnConvolutionBackwardFilter(h, &one, s.x, buf_x, bad_y, buf_y, s.conv,
                                           CUDNN_CONVOLUTION_BWD_FILTER_ALGO_1, NULL, 0, &zero, s.w,
                                           buf_w),
        lib.cudnnGetConvolutionForwardAlgorithm_v7(h, s.x, s.w, s.conv, bad_y, 8, &count, perf),
        lib.cudnnFindConvolutionBackwardDataAlgorithm(h, s.w, bad_y, s.conv, s.x, 8, &count, pd),
        lib.cudnnGetConvolutionBackwardFilterAlgorithm_v7(h, s.x, bad_y, s.conv, s.w, 8, &count,
                                                          pf),
    };
    for (int i = 0; i < 6; i++)
        CHECK(got[i] == CUDNN_STATUS_BAD_PARAM, "wrong y shape, call %d: %s", i, err(got[i]));

    /* x of another data type; channels not groups * filter channels; K not a multiple of the
     * groups; a filter larger than the padded input; float data with double compute */
    cudnnTensorDescriptor_t half_x;
    lib.cudnnCreateTensorDescriptor(&half_x);
    lib.cudnnSetTensor4dDescriptor(half_x, CUDNN_TENSOR_NCHW, CUDNN_DATA_HALF, 2, 4, 6, 6);
    CHECK(lib.cudnnConvolutionForward(h, &one, half_x, buf_x, s.w, buf_w, s.conv,
                                      CUDNN_CONVOLUTION_FWD_ALGO_IMPLICIT_GEMM, NULL, 0, &zero, s.y,
                                      buf_y) == CUDNN_STATUS_BAD_PARAM,
          "mixed data types");
    lib.cudnnSetConvolutionGroupCount(s.conv, 4); /* 4 != 4 * 2 */
    CHECK(lib.cudnnConvolutionForward(h, &one, s.x, buf_x, s.w, buf_w, s.conv,
                                      CUDNN_CONVOLUTION_FWD_ALGO_IMPLICIT_GEMM, NULL, 0, &zero, s.y,
                                      buf_y) == CUDNN_STATUS_BAD_PARAM,
          "channels != groups * filter channels");
    lib.cudnnSetConvolutionGroupCount(s.conv, 2);
    cudnnFilterDescriptor_t w3;
    lib.cudnnCreateFilterDescriptor(&w3);
    lib.cudnnSetFilter4dDescriptor(w3, CUDNN_DATA_FLOAT, CUDNN_TENSOR_NCHW, 3, 2, 3, 3);
    CHECK(lib.cudnnGetConvolutionForwardAlgorithm_v7(h, s.x, w3, s.conv, s.y, 8, &count, perf) ==
              CUDNN_STATUS_BAD_PARAM,
          "K not a multiple of groups");
    lib.cudnnSetFilter4dDescriptor(w3, CUDNN_DATA_FLOAT, CUDNN_TENSOR_NCHW, 4, 2, 9, 3);
    int n, k, oh, ow;
    CHECK(lib.cudnnGetConvolution2dForwardOutputDim(s.conv, s.x, w3, &n, &k, &oh, &ow) ==
              CUDNN_STATUS_BAD_PARAM,
          "filter taller than the padded input");
    lib.cudnnSetConvolution2dDescriptor(s.conv, 1, 1, 1, 1, 1, 1, CUDNN_CROSS_CORRELATION,
                                        CUDNN_DATA_DOUBLE);
    CHECK(lib.cudnnConvolutionForward(h, &one, s.x, buf_x, s.w, buf_w, s.conv,
                                      CUDNN_CONVOLUTION_FWD_ALGO_IMPLICIT_GEMM, NULL, 0, &zero, s.y,
                                      buf_y) == CUDNN_STATUS_NOT_SUPPORTED,
          "float data, double compute");
    CHECK(lib.cudnnGetConvolution2dForwardOutputDim(s.conv, s.x, s.w, &n, &k, &oh, &ow) ==
                  CUDNN_STATUS_SUCCESS &&
              oh == 6,
          "output dim does not depend on the compute type");
    lib.cudnnDestroyFilterDescriptor(w3);
    lib.cudnnDestroyTensorDescriptor(half_x);
    lib.cudnnDestroyTensorDescriptor(bad_y);
    setup_destroy(&s);
}

/* Math types as cuda_conv.c asks for them: FMA for strict float32, TENSOR_OP otherwise, DEFAULT
 * for double; the first result reports what the descriptor asked for. */
static void test_math_types(cudnnHandle_t h)
{
    conv_cfg q = {
        1, 2, 5, 5, 2, 1, 3, 3, {1, 1}, {1, 1}, {1, 1}, CUDNN_CROSS_CORRELATION, CUDNN_TENSOR_NCHW};
    static const conv_type f32 = {"f32", CUDNN_DATA_FLOAT, CUDNN_DATA_FLOAT, 1e-5};
    static const conv_type f64 = {"f64", CUDNN_DATA_DOUBLE, CUDNN_DATA_DOUBLE, 1e-13};
    static const conv_type bf = {"bf16", CUDNN_DATA_BFLOAT16, CUDNN_DATA_FLOAT, 0};
    const struct {
        const conv_type *ty;
        cudnnMathType_t set, want;
    } cases[] = {{&f32, CUDNN_FMA_MATH, CUDNN_FMA_MATH},
                 {&f32, CUDNN_TENSOR_OP_MATH, CUDNN_TENSOR_OP_MATH},
                 {&bf, CUDNN_TENSOR_OP_MATH, CUDNN_TENSOR_OP_MATH},
                 {&f64, CUDNN_DEFAULT_MATH, CUDNN_DEFAULT_MATH},
                 {&f64, CUDNN_TENSOR_OP_MATH, CUDNN_DEFAULT_MATH}};
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        setup s;
        setup_init(&s, h, &q, cases[i].ty, cases[i].set);
        for (int p = 0; p < 3; p++) pick_algo(&s, (pass)p, p == 1, cases[i].want);
        setup_destroy(&s);
    }
}

/* ---- DDPL_CUEMU_CUDNN_HEURISTICS (cudnn_algo.c's header), set per case with setenv ---- */
#define HEURISTICS_ENV "DDPL_CUEMU_CUDNN_HEURISTICS"

/* One search result, whatever the pass's perf struct type. */
typedef struct {
    int algo;
    cudnnStatus_t status;
    cudnnMathType_t math;
    float time;
} result;

enum { RESULTS_MAX = 16 };

static const int algo_counts[3] = {CUDNN_CONVOLUTION_FWD_ALGO_COUNT,
                                   CUDNN_CONVOLUTION_BWD_DATA_ALGO_COUNT,
                                   CUDNN_CONVOLUTION_BWD_FILTER_ALGO_COUNT};
/* the algorithm conversion_first ranks first: WINOGRAD_NONFUSED in every pass */
static const int conversion_algos[3] = {CUDNN_CONVOLUTION_FWD_ALGO_WINOGRAD_NONFUSED,
                                        CUDNN_CONVOLUTION_BWD_DATA_ALGO_WINOGRAD_NONFUSED,
                                        CUDNN_CONVOLUTION_BWD_FILTER_ALGO_WINOGRAD_NONFUSED};

/* Runs one search (cudnnGet*_v7, or cudnnFind* when find) of pass p into res; returns its
 * status, with *count the number of results. */
static cudnnStatus_t search_all(setup *s, pass p, bool find, result *res, int *count)
{
    cudnnStatus_t st;
    *count = 0;
#define COPY(perf)                                                                                 \
    for (int i = 0; st == CUDNN_STATUS_SUCCESS && i < *count; i++)                                 \
        res[i] = (result){(int)perf[i].algo, perf[i].status, perf[i].mathType, perf[i].time};
    if (p == FWD) {
        cudnnConvolutionFwdAlgoPerf_t perf[RESULTS_MAX];
        st = find ? lib.cudnnFindConvolutionForwardAlgorithm(s->h, s->x, s->w, s->conv, s->y,
                                                             RESULTS_MAX, count, perf)
                  : lib.cudnnGetConvolutionForwardAlgorithm_v7(s->h, s->x, s->w, s->conv, s->y,
                                                               RESULTS_MAX, count, perf);
        COPY(perf)
    } else if (p == BWD_DATA) {
        cudnnConvolutionBwdDataAlgoPerf_t perf[RESULTS_MAX];
        st = find ? lib.cudnnFindConvolutionBackwardDataAlgorithm(s->h, s->w, s->y, s->conv, s->x,
                                                                  RESULTS_MAX, count, perf)
                  : lib.cudnnGetConvolutionBackwardDataAlgorithm_v7(s->h, s->w, s->y, s->conv, s->x,
                                                                    RESULTS_MAX, count, perf);
        COPY(perf)
    } else {
        cudnnConvolutionBwdFilterAlgoPerf_t perf[RESULTS_MAX];
        st = find ? lib.cudnnFindConvolutionBackwardFilterAlgorithm(s->h, s->x, s->y, s->conv, s->w,
                                                                    RESULTS_MAX, count, perf)
                  : lib.cudnnGetConvolutionBackwardFilterAlgorithm_v7(
                        s->h, s->x, s->y, s->conv, s->w, RESULTS_MAX, count, perf);
        COPY(perf)
    }
#undef COPY
    return st;
}

/* Whether res[0 .. count) names every algorithm of pass p exactly once. */
static bool lists_each_once(const result *res, int count, pass p)
{
    if (count != algo_counts[p]) return false;
    int seen[RESULTS_MAX] = {0};
    for (int i = 0; i < count; i++) {
        if (res[i].algo < 0 || res[i].algo >= algo_counts[p] || seen[res[i].algo]++) return false;
    }
    return true;
}

/* One float problem's device buffers and double references, per pass. */
typedef struct {
    setup s;
    float *x, *w, *dy, *out;
    double *ref[3];
    size_t nout[3];
} knob_problem;

static void knob_init(knob_problem *k, cudnnHandle_t h, const conv_cfg *q, const double *x,
                      const double *w, const double *dy)
{
    static const conv_type f32 = {"f32", CUDNN_DATA_FLOAT, CUDNN_DATA_FLOAT, 1e-5};
    cudnnStatus_t st = setup_init(&k->s, h, q, &f32, CUDNN_FMA_MATH);
    CHECK(st == CUDNN_STATUS_SUCCESS, "knob descriptors: %s", err(st));
    size_t nx = prod4(k->s.xd), nw = prod4(k->s.wd), ny = prod4(k->s.yd);
    size_t nmax = nx > nw ? (nx > ny ? nx : ny) : (nw > ny ? nw : ny);
    k->x = malloc(nx * 4), k->w = malloc(nw * 4), k->dy = malloc(ny * 4);
    k->out = malloc(nmax * 4);
    to_device(k->x, CUDNN_DATA_FLOAT, q->format, k->s.xd, x);
    to_device(k->w, CUDNN_DATA_FLOAT, q->format, k->s.wd, w);
    to_device(k->dy, CUDNN_DATA_FLOAT, q->format, k->s.yd, dy);
    k->nout[FWD] = ny, k->nout[BWD_DATA] = nx, k->nout[BWD_FILTER] = nw;
    for (int p = 0; p < 3; p++) k->ref[p] = malloc(k->nout[p] * 8);
    ref_forward(q, x, w, k->ref[FWD]);
    ref_backward_data(q, w, dy, k->ref[BWD_DATA]);
    ref_backward_filter(q, x, dy, k->ref[BWD_FILTER]);
}

static void knob_destroy(knob_problem *k)
{
    setup_destroy(&k->s);
    free(k->x), free(k->w), free(k->dy), free(k->out);
    for (int p = 0; p < 3; p++) free(k->ref[p]);
}

/* Runs pass p with algo under math (alpha 1, beta 0); returns the status and, when it ran, the
 * largest |result - reference| in *diff. NCHW only. */
static cudnnStatus_t knob_run(knob_problem *k, pass p, int algo, cudnnMathType_t math, double *diff)
{
    lib.cudnnSetConvolutionMathType(k->s.conv, math);
    const void *a = p == BWD_DATA ? (const void *)k->w : (const void *)k->x;
    const void *b = p == FWD ? (const void *)k->w : (const void *)k->dy;
    cudnnStatus_t st = run_pass(&k->s, p, algo, false, 1, 0, a, b, k->out);
    lib.cudnnSetConvolutionMathType(k->s.conv, CUDNN_FMA_MATH);
    *diff = INFINITY;
    if (st == CUDNN_STATUS_SUCCESS) {
        *diff = 0;
        for (size_t i = 0; i < k->nout[p]; i++) {
            double d = fabs((double)k->out[i] - k->ref[p][i]);
            if (!(d <= *diff)) *diff = d;
        }
    }
    return st;
}

static void test_heuristics(cudnnHandle_t h)
{
    conv_cfg q = {
        2, 3, 6, 5, 4, 1, 3, 3, {1, 1}, {1, 1}, {1, 1}, CUDNN_CROSS_CORRELATION, CUDNN_TENSOR_NCHW};
    /* multiples of 1/8: exact in float16 too, so every algorithm's float sums are exact */
    double x[2 * 3 * 6 * 5], w[4 * 3 * 3 * 3], dy[2 * 4 * 6 * 5];
    srand(11);
    fill(x, sizeof x / sizeof x[0], true), fill(w, sizeof w / sizeof w[0], true);
    fill(dy, sizeof dy / sizeof dy[0], true);
    knob_problem k;
    knob_init(&k, h, &q, x, w, dy);
    result res[RESULTS_MAX];
    int count;
    double diff;

    /* none: the heuristics offer nothing runnable; the measured search and the passes work */
    setenv(HEURISTICS_ENV, "none", 1);
    for (int p = 0; p < 3; p++) {
        cudnnStatus_t st = search_all(&k.s, (pass)p, false, res, &count);
        int ok = 0;
        for (int i = 0; i < count; i++) ok += res[i].status == CUDNN_STATUS_SUCCESS;
        CHECK(st == CUDNN_STATUS_SUCCESS && lists_each_once(res, count, (pass)p) && ok == 0,
              "none, %s: v7 lists every algorithm as NOT_SUPPORTED (%s, %d results, %d SUCCESS)",
              pass_name[p], err(st), count, ok);
        st = search_all(&k.s, (pass)p, true, res, &count);
        CHECK(st == CUDNN_STATUS_SUCCESS && lists_each_once(res, count, (pass)p) &&
                  res[0].status == CUDNN_STATUS_SUCCESS && res[0].math == CUDNN_FMA_MATH,
              "none, %s: find still offers an FMA algorithm first (%s, %d results)", pass_name[p],
              err(st), count);
        st = knob_run(&k, (pass)p, res[0].algo, CUDNN_FMA_MATH, &diff);
        CHECK(st == CUDNN_STATUS_SUCCESS && diff == 0,
              "none, %s: find's first algorithm %d runs: %s, max diff %g", pass_name[p],
              res[0].algo, err(st), diff);
    }

    /* conversion_first: a SUCCESS result with ALLOW_CONVERSION math ranks first in both
     * searches; its algorithm runs only under that math type */
    setenv(HEURISTICS_ENV, "conversion_first", 1);
    for (int p = 0; p < 3; p++)
        for (int find = 0; find < 2; find++) {
            cudnnStatus_t st = search_all(&k.s, (pass)p, find, res, &count);
            bool ranked = st == CUDNN_STATUS_SUCCESS && lists_each_once(res, count, (pass)p) &&
                          res[0].status == CUDNN_STATUS_SUCCESS &&
                          res[0].math == CUDNN_TENSOR_OP_MATH_ALLOW_CONVERSION &&
                          res[0].algo == conversion_algos[p] &&
                          res[1].status == CUDNN_STATUS_SUCCESS && res[1].math == CUDNN_FMA_MATH &&
                          res[2].status == CUDNN_STATUS_SUCCESS && res[2].math == CUDNN_FMA_MATH;
            CHECK(ranked && (!find || (res[0].time >= 0 && res[0].time <= res[1].time)),
                  "conversion_first, %s, %s: the conversion result first, then the FMA pair (%s, "
                  "%d results, first algo %d math %d)",
                  pass_name[p], find ? "find" : "v7", err(st), count, res[0].algo,
                  (int)res[0].math);
            if (!ranked) continue;
            st = knob_run(&k, (pass)p, res[0].algo, CUDNN_FMA_MATH, &diff);
            CHECK(st == CUDNN_STATUS_NOT_SUPPORTED,
                  "conversion_first, %s: the conversion algorithm under FMA math: %s, want "
                  "NOT_SUPPORTED",
                  pass_name[p], err(st));
            st = knob_run(&k, (pass)p, res[0].algo, CUDNN_TENSOR_OP_MATH, &diff);
            CHECK(st == CUDNN_STATUS_NOT_SUPPORTED,
                  "conversion_first, %s: the conversion algorithm under tensor-op math without "
                  "conversion: %s, want NOT_SUPPORTED",
                  pass_name[p], err(st));
            st = knob_run(&k, (pass)p, res[0].algo, CUDNN_TENSOR_OP_MATH_ALLOW_CONVERSION, &diff);
            CHECK(st == CUDNN_STATUS_SUCCESS && diff == 0,
                  "conversion_first, %s: the conversion algorithm under its math: %s, max diff %g",
                  pass_name[p], err(st), diff);
            st = knob_run(&k, (pass)p, res[1].algo, CUDNN_FMA_MATH, &diff);
            CHECK(st == CUDNN_STATUS_SUCCESS && diff == 0,
                  "conversion_first, %s: the next (FMA) algorithm %d: %s, max diff %g",
                  pass_name[p], res[1].algo, err(st), diff);
        }
    /* the conversion costs precision: 1 + 2^-12 is 1 in float16 */
    {
        conv_cfg one = {1,
                        1,
                        1,
                        1,
                        1,
                        1,
                        1,
                        1,
                        {0, 0},
                        {1, 1},
                        {1, 1},
                        CUDNN_CROSS_CORRELATION,
                        CUDNN_TENSOR_NCHW};
        double ox = 1 + ldexp(1, -12), ow = 1, ody = 1;
        knob_problem k1;
        knob_init(&k1, h, &one, &ox, &ow, &ody);
        cudnnStatus_t st =
            knob_run(&k1, FWD, conversion_algos[FWD], CUDNN_TENSOR_OP_MATH_ALLOW_CONVERSION, &diff);
        CHECK(st == CUDNN_STATUS_SUCCESS && diff == ldexp(1, -12),
              "conversion_first rounds the inputs to float16: %s, diff %g", err(st), diff);
        st = knob_run(&k1, FWD, CUDNN_CONVOLUTION_FWD_ALGO_IMPLICIT_GEMM, CUDNN_FMA_MATH, &diff);
        CHECK(st == CUDNN_STATUS_SUCCESS && diff == 0, "FMA keeps float32: %s, diff %g", err(st),
              diff);
        knob_destroy(&k1);
    }
    /* double data: no conversion result, and the algorithm does not run */
    {
        static const conv_type f64 = {"f64", CUDNN_DATA_DOUBLE, CUDNN_DATA_DOUBLE, 1e-13};
        setup s;
        setup_init(&s, h, &q, &f64, CUDNN_DEFAULT_MATH);
        for (int p = 0; p < 3; p++) {
            cudnnStatus_t st = search_all(&s, (pass)p, false, res, &count);
            bool conv_offered = false;
            for (int i = 0; i < count; i++)
                conv_offered |=
                    res[i].math == CUDNN_TENSOR_OP_MATH_ALLOW_CONVERSION ||
                    (res[i].algo == conversion_algos[p] && res[i].status == CUDNN_STATUS_SUCCESS);
            CHECK(st == CUDNN_STATUS_SUCCESS && lists_each_once(res, count, (pass)p) &&
                      res[0].status == CUDNN_STATUS_SUCCESS && res[0].math == CUDNN_DEFAULT_MATH &&
                      !conv_offered,
                  "conversion_first, f64 %s: ranked as normal (%s)", pass_name[p], err(st));
        }
        double buf[2 * 4 * 6 * 5] = {0}, one_d = 1, zero_d = 0;
        lib.cudnnSetConvolutionMathType(s.conv, CUDNN_TENSOR_OP_MATH_ALLOW_CONVERSION);
        cudnnStatus_t st = lib.cudnnConvolutionForward(
            h, &one_d, s.x, buf, s.w, buf, s.conv, (cudnnConvolutionFwdAlgo_t)conversion_algos[FWD],
            NULL, 0, &zero_d, s.y, buf);
        CHECK(st == CUDNN_STATUS_NOT_SUPPORTED, "conversion_first, f64: the algorithm runs: %s",
              err(st));
        setup_destroy(&s);
    }

    /* normal, spelt out and unset: the conversion algorithm is NOT_SUPPORTED again */
    for (int spelt = 0; spelt < 2; spelt++) {
        if (spelt)
            setenv(HEURISTICS_ENV, "normal", 1);
        else
            unsetenv(HEURISTICS_ENV);
        for (int p = 0; p < 3; p++) {
            cudnnStatus_t st = search_all(&k.s, (pass)p, false, res, &count);
            CHECK(st == CUDNN_STATUS_SUCCESS && lists_each_once(res, count, (pass)p) &&
                      res[0].status == CUDNN_STATUS_SUCCESS && res[0].math == CUDNN_FMA_MATH &&
                      res[0].algo != conversion_algos[p],
                  "normal (%s), %s: %s", spelt ? "set" : "unset", pass_name[p], err(st));
            st = knob_run(&k, (pass)p, conversion_algos[p], CUDNN_TENSOR_OP_MATH_ALLOW_CONVERSION,
                          &diff);
            CHECK(st == CUDNN_STATUS_NOT_SUPPORTED,
                  "normal (%s), %s: the conversion algorithm runs: %s", spelt ? "set" : "unset",
                  pass_name[p], err(st));
        }
    }

    /* an unknown value: every search refuses (the stand-in also says so on stderr) */
    setenv(HEURISTICS_ENV, "conversion-first", 1);
    for (int p = 0; p < 3; p++)
        for (int find = 0; find < 2; find++) {
            cudnnStatus_t st = search_all(&k.s, (pass)p, find, res, &count);
            CHECK(st == CUDNN_STATUS_BAD_PARAM, "unknown value, %s, %s: %s, want BAD_PARAM",
                  pass_name[p], find ? "find" : "v7", err(st));
        }
    unsetenv(HEURISTICS_ENV);
    knob_destroy(&k);
}

int main(int argc, char **argv)
{
    if (argc < 2) {
        fprintf(stderr, "usage: %s path/to/libcuemu_cudnn.so\n", argv[0]);
        return 2;
    }
    unsetenv(HEURISTICS_ENV); /* the searches' normal ranking, until test_heuristics */
    if (load(argv[1]) == 0) {
        cudnnHandle_t h = NULL;
        CHECK(lib.cudnnCreate(&h) == CUDNN_STATUS_SUCCESS, "create");
        test_basics(h);
        test_passes(h);
        test_errors(h);
        test_math_types(h);
        test_heuristics(h);
        CHECK(lib.cudnnDestroy(h) == CUDNN_STATUS_SUCCESS, "destroy");
    }
    return cuemu_check_finish();
}
