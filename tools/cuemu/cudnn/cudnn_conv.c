/* tools/cuemu/cudnn/cudnn_conv.c: the cuDNN stand-in's convolution passes as reference loops.
 * defines: cudnnConvolutionForward, cudnnConvolutionBackwardData, cudnnConvolutionBackwardFilter.
 *
 * x (N,C,H,W), w (K,C/G,R,S), y (N,K,OH,OW) with G groups: output channel k reads input channels
 * [g*C/G, (g+1)*C/G) for its group g = k / (K/G). Cross-correlation, pad p, stride st, dilation d:
 *   y[n,k,oh,ow] = sum_{c,i,j} x[n, g*C/G + c, oh*st_h - p_h + i*d_h, ow*st_w - p_w + j*d_w]
 *                              * w[k,c,i,j]      (taps outside the input read zero)
 * CUDNN_CONVOLUTION is the same with w rotated 180 degrees (w[k,c,R-1-i,S-1-j]). Backward data is
 * the adjoint in x (dx += dy * w scattered back), backward filter the adjoint in w (dw = sum over
 * n, oh, ow of x * dy). Each call writes out = alpha * result + beta * out; beta == 0 never reads
 * out (it may hold NaN). alpha and beta are doubles for double data and floats otherwise, as
 * cuDNN documents.
 *
 * Operands are first gathered from their strides (NCHW or NHWC) into packed arrays of the
 * accumulation type: float for float, half and bfloat16 data (16-bit values widen exactly, the
 * result rounds once, to nearest even), double for double. The workspace is never used (every
 * algorithm here needs 0 bytes). The one algorithm that runs only with down-conversion
 * (DDPL_CUEMU_CUDNN_HEURISTICS=conversion_first, cudnn_algo.c) rounds the pass's two float inputs
 * to float16 after gathering them, as tensor cores would read them, and accumulates in float. What
 * only the real library can show: its numerics (tensor-core TF32/16-bit products, Winograd and FFT
 * transforms, split reductions, TRUE_HALF accumulation in half: all computed in plain float or
 * double here), which algorithms exist and are fastest for a shape, their workspace sizes,
 * non-determinism of the atomic-add algorithms, and speed. */
#include <stdlib.h>
#include <string.h>

#include "cudnn_standin.h"
#include "cuemu_fp16.h"

/* ---- typed element access ---- */
static double load(const void *p, cudnnDataType_t t, size_t i)
{
    switch (t) {
    case CUDNN_DATA_DOUBLE:
        return ((const double *)p)[i];
    case CUDNN_DATA_FLOAT:
        return ((const float *)p)[i];
    case CUDNN_DATA_HALF:
        return cuemu_half_to_float(((const uint16_t *)p)[i]);
    default:
        return cuemu_bf16_to_float(((const uint16_t *)p)[i]);
    }
}

/* v is already rounded to float for the float-accumulating types, so narrowing here rounds
 * once */
static void store(void *p, cudnnDataType_t t, size_t i, double v)
{
    switch (t) {
    case CUDNN_DATA_DOUBLE:
        ((double *)p)[i] = v;
        break;
    case CUDNN_DATA_FLOAT:
        ((float *)p)[i] = (float)v;
        break;
    case CUDNN_DATA_HALF:
        ((uint16_t *)p)[i] = cuemu_float_to_half((float)v);
        break;
    default:
        ((uint16_t *)p)[i] = cuemu_float_to_bf16((float)v);
        break;
    }
}

/* A 4-d operand as the loops see it. */
typedef struct {
    const int *dims;     /* 4 */
    const long *strides; /* 4, elements */
    void *data;
} operand;

static size_t numel(const operand *o)
{
    return (size_t)o->dims[0] * o->dims[1] * o->dims[2] * o->dims[3];
}

/* packed[i0,i1,i2,i3] (row-major over dims) <- the strided operand, widened */
static void gather(const operand *o, cudnnDataType_t t, bool f64, void *packed)
{
    size_t at = 0;
    for (int a = 0; a < o->dims[0]; a++)
        for (int b = 0; b < o->dims[1]; b++)
            for (int c = 0; c < o->dims[2]; c++)
                for (int d = 0; d < o->dims[3]; d++, at++) {
                    size_t src = a * o->strides[0] + b * o->strides[1] + c * o->strides[2] +
                                 d * o->strides[3];
                    double v = load(o->data, t, src);
                    if (f64)
                        ((double *)packed)[at] = v;
                    else
                        ((float *)packed)[at] = (float)v;
                }
}

/* operand = alpha * packed + beta * operand, in the accumulation type; beta 0 reads nothing */
static void scatter(const operand *o, cudnnDataType_t t, bool f64, const void *packed, double alpha,
                    double beta)
{
    size_t at = 0;
    for (int a = 0; a < o->dims[0]; a++)
        for (int b = 0; b < o->dims[1]; b++)
            for (int c = 0; c < o->dims[2]; c++)
                for (int d = 0; d < o->dims[3]; d++, at++) {
                    size_t dst = a * o->strides[0] + b * o->strides[1] + c * o->strides[2] +
                                 d * o->strides[3];
                    if (f64) {
                        double v = alpha * ((const double *)packed)[at];
                        if (beta != 0) v += beta * load(o->data, t, dst);
                        store(o->data, t, dst, v);
                    } else {
                        float v = (float)alpha * ((const float *)packed)[at];
                        if (beta != 0) v += (float)beta * (float)load(o->data, t, dst);
                        store(o->data, t, dst, v);
                    }
                }
}

/* w (K,C/G,R,S) packed <- rotated 180 degrees in (R,S), in place */
static void flip_taps(const conv_geom *g, void *w, size_t elem)
{
    size_t taps = (size_t)g->r * g->s;
    char tmp[8];
    for (size_t f = 0; f < (size_t)g->k * g->cg; f++) {
        char *base = (char *)w + f * taps * elem;
        for (size_t i = 0, j = taps - 1; i < j; i++, j--) {
            memcpy(tmp, base + i * elem, elem);
            memcpy(base + i * elem, base + j * elem, elem);
            memcpy(base + j * elem, tmp, elem);
        }
    }
}

/* ---- the loops, once per accumulation type; all arrays packed, cross-correlation ---- */
/* packed offsets; the parameters end in _ so that they cannot capture conv_geom's members */
#define X_AT(g, n_, c_, h_, w_) ((((size_t)(n_) * (g)->c + (c_)) * (g)->h + (h_)) * (g)->w + (w_))
#define W_AT(g, k_, c_, i_, j_) ((((size_t)(k_) * (g)->cg + (c_)) * (g)->r + (i_)) * (g)->s + (j_))
#define Y_AT(g, n_, k_, h_, w_) ((((size_t)(n_) * (g)->k + (k_)) * (g)->oh + (h_)) * (g)->ow + (w_))

/* Visits every (n, k, oh, ow, c, i, j) whose tap lands inside the input, with ci the input
 * channel and (ih, iw) the input position; BODY uses them. */
#define FOR_EACH_TAP(g, BODY)                                                                      \
    for (int n = 0; n < (g)->n; n++)                                                               \
        for (int k = 0; k < (g)->k; k++)                                                           \
            for (int oh = 0; oh < (g)->oh; oh++)                                                   \
                for (int ow = 0; ow < (g)->ow; ow++)                                               \
                    for (int c = 0; c < (g)->cg; c++) {                                            \
                        int ci = k / ((g)->k / (g)->groups) * (g)->cg + c;                         \
                        for (int i = 0; i < (g)->r; i++) {                                         \
                            int ih = oh * (g)->stride[0] - (g)->pad[0] + i * (g)->dilation[0];     \
                            if (ih < 0 || ih >= (g)->h) continue;                                  \
                            for (int j = 0; j < (g)->s; j++) {                                     \
                                int iw = ow * (g)->stride[1] - (g)->pad[1] + j * (g)->dilation[1]; \
                                if (iw < 0 || iw >= (g)->w) continue;                              \
                                BODY;                                                              \
                            }                                                                      \
                        }                                                                          \
                    }

/* y, dx and dw start zeroed; each pass accumulates into its output */
#define CONV_LOOPS(T)                                                                              \
    static void fwd_##T(const conv_geom *g, const T *x, const T *w, T *y)                          \
    {                                                                                              \
        FOR_EACH_TAP(g, y[Y_AT(g, n, k, oh, ow)] +=                                                \
                        x[X_AT(g, n, ci, ih, iw)] * w[W_AT(g, k, c, i, j)])                        \
    }                                                                                              \
    static void bwd_data_##T(const conv_geom *g, T *dx, const T *w, const T *dy)                   \
    {                                                                                              \
        FOR_EACH_TAP(g, dx[X_AT(g, n, ci, ih, iw)] +=                                              \
                        dy[Y_AT(g, n, k, oh, ow)] * w[W_AT(g, k, c, i, j)])                        \
    }                                                                                              \
    static void bwd_filter_##T(const conv_geom *g, const T *x, T *dw, const T *dy)                 \
    {                                                                                              \
        FOR_EACH_TAP(g, dw[W_AT(g, k, c, i, j)] +=                                                 \
                        x[X_AT(g, n, ci, ih, iw)] * dy[Y_AT(g, n, k, oh, ow)])                     \
    }

CONV_LOOPS(float)
CONV_LOOPS(double)

/* ---- one pass ---- */

/* packed float values <- rounded to float16 and back (the down-conversion of tensor-op math) */
static void to_half_precision(float *p, size_t n)
{
    for (size_t i = 0; i < n; i++) p[i] = cuemu_half_to_float(cuemu_float_to_half(p[i]));
}

/* Runs `pass` with x, w, y as given (the output is the one the pass writes) and combines with
 * alpha / beta. The arrays are packed copies in the accumulation type; convert (float data only)
 * rounds the two inputs of the pass to float16 first. */
static cudnnStatus_t run(cudnn_standin_pass pass, const conv_geom *g, bool convert, operand x,
                         operand w, operand y, const void *alpha_p, const void *beta_p)
{
    bool f64 = g->f64;
    size_t elem = f64 ? sizeof(double) : sizeof(float);
    size_t nx = numel(&x), nw = numel(&w), ny = numel(&y);
    char *px = calloc(nx, elem), *pw = calloc(nw, elem), *py = calloc(ny, elem);
    cudnnStatus_t st = CUDNN_STATUS_SUCCESS;
    if (!px || !pw || !py) {
        st = CUDNN_STATUS_INTERNAL_ERROR_HOST_ALLOCATION_FAILED;
        goto done;
    }
    double alpha = f64 ? *(const double *)alpha_p : *(const float *)alpha_p;
    double beta = f64 ? *(const double *)beta_p : *(const float *)beta_p;
    /* the two inputs of the pass; its output stays zero until the loops add into it */
    if (pass != PASS_BWD_DATA) gather(&x, g->dtype, f64, px);
    if (pass != PASS_BWD_FILTER) gather(&w, g->dtype, f64, pw);
    if (pass != PASS_FWD) gather(&y, g->dtype, f64, py);
    if (convert && !f64) {
        if (pass != PASS_BWD_DATA) to_half_precision((float *)px, nx);
        if (pass != PASS_BWD_FILTER) to_half_precision((float *)pw, nw);
        if (pass != PASS_FWD) to_half_precision((float *)py, ny);
    }
    if (g->flip && pass != PASS_BWD_FILTER) flip_taps(g, pw, elem);
    switch (pass) {
    case PASS_FWD:
        if (f64)
            fwd_double(g, (double *)px, (double *)pw, (double *)py);
        else
            fwd_float(g, (float *)px, (float *)pw, (float *)py);
        scatter(&y, g->dtype, f64, py, alpha, beta);
        break;
    case PASS_BWD_DATA:
        if (f64)
            bwd_data_double(g, (double *)px, (double *)pw, (double *)py);
        else
            bwd_data_float(g, (float *)px, (float *)pw, (float *)py);
        scatter(&x, g->dtype, f64, px, alpha, beta);
        break;
    case PASS_BWD_FILTER:
        if (f64)
            bwd_filter_double(g, (double *)px, (double *)pw, (double *)py);
        else
            bwd_filter_float(g, (float *)px, (float *)pw, (float *)py);
        if (g->flip) flip_taps(g, pw, elem); /* the gradient of the unrotated filter */
        scatter(&w, g->dtype, f64, pw, alpha, beta);
        break;
    }
done:
    free(px), free(pw), free(py);
    return st;
}

/* The checks every pass makes before touching memory; *convert: the algorithm runs with
 * down-conversion. */
static cudnnStatus_t check(cudnn_standin_pass pass, int algo, int algo_count, cudnnHandle_t h,
                           const void *alpha, const void *beta, const void *a, const void *b,
                           const void *out, const struct cudnnTensorStruct *xd,
                           const struct cudnnFilterStruct *wd,
                           const struct cudnnConvolutionStruct *cd,
                           const struct cudnnTensorStruct *yd, conv_geom *g, bool *convert)
{
    *convert = false;
    if (!h || !alpha || !beta || !a || !b || !out || !xd || !wd || !yd)
        return CUDNN_STATUS_BAD_PARAM;
    cudnnStatus_t st = cudnn_standin_geometry(xd, wd, cd, yd, g);
    if (st != CUDNN_STATUS_SUCCESS) return st;
    if (algo < 0 || algo >= algo_count) return CUDNN_STATUS_BAD_PARAM;
    if (cudnn_standin_algo_runs(pass, algo)) return CUDNN_STATUS_SUCCESS;
    /* the conversion algorithm has tensor-op kernels with down-conversion only: under FMA (or
     * default, or tensor-op without conversion) math there is nothing to run */
    if (algo == cudnn_standin_conversion_algo(pass) && cudnn_standin_conversion_offered(g) &&
        cd->math == CUDNN_TENSOR_OP_MATH_ALLOW_CONVERSION) {
        *convert = true;
        return CUDNN_STATUS_SUCCESS;
    }
    return CUDNN_STATUS_NOT_SUPPORTED;
}

#define OPERAND(desc, ptr) ((operand){(desc)->dims, (desc)->strides, (void *)(ptr)})

cudnnStatus_t cudnnConvolutionForward(cudnnHandle_t handle, const void *alpha,
                                      const cudnnTensorDescriptor_t xDesc, const void *x,
                                      const cudnnFilterDescriptor_t wDesc, const void *w,
                                      const cudnnConvolutionDescriptor_t convDesc,
                                      cudnnConvolutionFwdAlgo_t algo, void *workSpace,
                                      size_t workSpaceSizeInBytes, const void *beta,
                                      const cudnnTensorDescriptor_t yDesc, void *y)
{
    (void)workSpace, (void)workSpaceSizeInBytes; /* every algorithm here needs 0 bytes */
    conv_geom g;
    bool convert;
    cudnnStatus_t st = check(PASS_FWD, (int)algo, CUDNN_CONVOLUTION_FWD_ALGO_COUNT, handle, alpha,
                             beta, x, w, y, xDesc, wDesc, convDesc, yDesc, &g, &convert);
    if (st != CUDNN_STATUS_SUCCESS) return st;
    return run(PASS_FWD, &g, convert, OPERAND(xDesc, x), OPERAND(wDesc, w), OPERAND(yDesc, y),
               alpha, beta);
}

cudnnStatus_t cudnnConvolutionBackwardData(cudnnHandle_t handle, const void *alpha,
                                           const cudnnFilterDescriptor_t wDesc, const void *w,
                                           const cudnnTensorDescriptor_t dyDesc, const void *dy,
                                           const cudnnConvolutionDescriptor_t convDesc,
                                           cudnnConvolutionBwdDataAlgo_t algo, void *workSpace,
                                           size_t workSpaceSizeInBytes, const void *beta,
                                           const cudnnTensorDescriptor_t dxDesc, void *dx)
{
    (void)workSpace, (void)workSpaceSizeInBytes;
    conv_geom g;
    bool convert;
    cudnnStatus_t st =
        check(PASS_BWD_DATA, (int)algo, CUDNN_CONVOLUTION_BWD_DATA_ALGO_COUNT, handle, alpha, beta,
              w, dy, dx, dxDesc, wDesc, convDesc, dyDesc, &g, &convert);
    if (st != CUDNN_STATUS_SUCCESS) return st;
    return run(PASS_BWD_DATA, &g, convert, OPERAND(dxDesc, dx), OPERAND(wDesc, w),
               OPERAND(dyDesc, dy), alpha, beta);
}

cudnnStatus_t cudnnConvolutionBackwardFilter(cudnnHandle_t handle, const void *alpha,
                                             const cudnnTensorDescriptor_t xDesc, const void *x,
                                             const cudnnTensorDescriptor_t dyDesc, const void *dy,
                                             const cudnnConvolutionDescriptor_t convDesc,
                                             cudnnConvolutionBwdFilterAlgo_t algo, void *workSpace,
                                             size_t workSpaceSizeInBytes, const void *beta,
                                             const cudnnFilterDescriptor_t dwDesc, void *dw)
{
    (void)workSpace, (void)workSpaceSizeInBytes;
    conv_geom g;
    bool convert;
    cudnnStatus_t st =
        check(PASS_BWD_FILTER, (int)algo, CUDNN_CONVOLUTION_BWD_FILTER_ALGO_COUNT, handle, alpha,
              beta, x, dy, dw, xDesc, dwDesc, convDesc, dyDesc, &g, &convert);
    if (st != CUDNN_STATUS_SUCCESS) return st;
    return run(PASS_BWD_FILTER, &g, convert, OPERAND(xDesc, x), OPERAND(dwDesc, dw),
               OPERAND(dyDesc, dy), alpha, beta);
}
