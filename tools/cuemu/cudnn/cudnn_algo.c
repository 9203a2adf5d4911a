/* tools/cuemu/cudnn/cudnn_algo.c: the cuDNN stand-in's algorithm searches (heuristic and
 * "measured") for the three convolution passes.
 * defines: cudnnGetConvolution{Forward,BackwardData,BackwardFilter}Algorithm_v7,
 *          cudnnFindConvolution{Forward,BackwardData,BackwardFilter}Algorithm,
 *          cudnn_standin_algo_runs.
 *
 * Every pass lists all of its algorithms, as cuDNN does: two that run (status SUCCESS, 0 bytes of
 * workspace, the descriptor's math type), fastest first, then the rest with
 * CUDNN_STATUS_NOT_SUPPORTED, so a caller that ignores the status is caught when it runs one.
 * The runnable pair per pass is the implicit-GEMM forward algorithms and backward ALGO_1 (the
 * deterministic one) then ALGO_0 (which real cuDNN marks non-deterministic: atomics). Heuristic
 * results carry time -1 (not measured); "measured" ones a time estimated from the MAC count at a
 * notional 1 TFLOP/s, the second algorithm 25% slower. Nothing is timed or allocated: real
 * cudnnFind* runs each candidate on scratch buffers. The math type is the descriptor's (tensor-op
 * math requested for double data reports default math: there are no double tensor-op kernels). */
#include "cudnn_standin.h"

typedef struct {
    int algo;
    cudnnStatus_t status;
    float time; /* ms */
    size_t memory;
    cudnnDeterminism_t determinism;
    cudnnMathType_t math;
} algo_row;

enum { ALGO_ROWS_MAX = 8 }; /* the largest *_ALGO_COUNT (forward: 8) */

static const int runnable[3][2] = {
    [PASS_FWD] = {CUDNN_CONVOLUTION_FWD_ALGO_IMPLICIT_PRECOMP_GEMM,
                  CUDNN_CONVOLUTION_FWD_ALGO_IMPLICIT_GEMM},
    [PASS_BWD_DATA] = {CUDNN_CONVOLUTION_BWD_DATA_ALGO_1, CUDNN_CONVOLUTION_BWD_DATA_ALGO_0},
    [PASS_BWD_FILTER] = {CUDNN_CONVOLUTION_BWD_FILTER_ALGO_1, CUDNN_CONVOLUTION_BWD_FILTER_ALGO_0},
};
static const int algo_count[3] = {
    [PASS_FWD] = CUDNN_CONVOLUTION_FWD_ALGO_COUNT,
    [PASS_BWD_DATA] = CUDNN_CONVOLUTION_BWD_DATA_ALGO_COUNT,
    [PASS_BWD_FILTER] = CUDNN_CONVOLUTION_BWD_FILTER_ALGO_COUNT,
};

bool cudnn_standin_algo_runs(cudnn_standin_pass pass, int algo)
{
    return algo == runnable[pass][0] || algo == runnable[pass][1];
}

/* Fills rows[0 .. *returned) for a checked geometry; returns the status of the search. */
static cudnnStatus_t search(cudnn_standin_pass pass, bool measured, cudnnHandle_t h,
                            const struct cudnnTensorStruct *x, const struct cudnnFilterStruct *w,
                            const struct cudnnConvolutionStruct *conv,
                            const struct cudnnTensorStruct *y, int requested, int *returned,
                            algo_row rows[ALGO_ROWS_MAX])
{
    if (!h || !returned || requested < 1) return CUDNN_STATUS_BAD_PARAM;
    conv_geom g;
    cudnnStatus_t st = cudnn_standin_geometry(x, w, conv, y, &g);
    if (st != CUDNN_STATUS_SUCCESS) return st;
    cudnnMathType_t math = conv->math;
    if (g.f64 && (math == CUDNN_TENSOR_OP_MATH || math == CUDNN_TENSOR_OP_MATH_ALLOW_CONVERSION))
        math = CUDNN_DEFAULT_MATH;
    double macs = (double)g.n * g.k * g.oh * g.ow * g.cg * g.r * g.s;
    int n = 0;
    for (int r = 0; r < 2; r++) /* the runnable two first, fastest first */
        rows[n++] = (algo_row){runnable[pass][r],
                               CUDNN_STATUS_SUCCESS,
                               measured ? (float)(macs * 2e-9 * (r ? 1.25 : 1.0)) : -1.0f,
                               0,
                               r ? CUDNN_NON_DETERMINISTIC : CUDNN_DETERMINISTIC,
                               math};
    for (int a = 0; a < algo_count[pass]; a++)
        if (!cudnn_standin_algo_runs(pass, a))
            rows[n++] =
                (algo_row){a, CUDNN_STATUS_NOT_SUPPORTED, -1.0f, 0, CUDNN_DETERMINISTIC, math};
    if (pass == PASS_FWD) rows[1].determinism = CUDNN_DETERMINISTIC; /* both GEMMs are */
    *returned = n < requested ? n : requested;
    return CUDNN_STATUS_SUCCESS;
}

/* Copies rows into one of the three perf struct types (same members, distinct types). */
#define COPY_ROWS(perf, rows, count, algo_type)                                                    \
    do {                                                                                           \
        for (int i_ = 0; i_ < (count); i_++) {                                                     \
            (perf)[i_].algo = (algo_type)(rows)[i_].algo;                                          \
            (perf)[i_].status = (rows)[i_].status;                                                 \
            (perf)[i_].time = (rows)[i_].time;                                                     \
            (perf)[i_].memory = (rows)[i_].memory;                                                 \
            (perf)[i_].determinism = (rows)[i_].determinism;                                       \
            (perf)[i_].mathType = (rows)[i_].math;                                                 \
            for (int r_ = 0; r_ < 3; r_++) (perf)[i_].reserved[r_] = 0;                            \
        }                                                                                          \
    } while (0)

static cudnnStatus_t forward(bool measured, cudnnHandle_t h, const cudnnTensorDescriptor_t x,
                             const cudnnFilterDescriptor_t w,
                             const cudnnConvolutionDescriptor_t conv,
                             const cudnnTensorDescriptor_t y, int requested, int *returned,
                             cudnnConvolutionFwdAlgoPerf_t *perf)
{
    algo_row rows[ALGO_ROWS_MAX];
    if (!perf) return CUDNN_STATUS_BAD_PARAM;
    cudnnStatus_t st = search(PASS_FWD, measured, h, x, w, conv, y, requested, returned, rows);
    if (st == CUDNN_STATUS_SUCCESS) COPY_ROWS(perf, rows, *returned, cudnnConvolutionFwdAlgo_t);
    return st;
}

static cudnnStatus_t backward_data(bool measured, cudnnHandle_t h, const cudnnFilterDescriptor_t w,
                                   const cudnnTensorDescriptor_t dy,
                                   const cudnnConvolutionDescriptor_t conv,
                                   const cudnnTensorDescriptor_t dx, int requested, int *returned,
                                   cudnnConvolutionBwdDataAlgoPerf_t *perf)
{
    algo_row rows[ALGO_ROWS_MAX];
    if (!perf) return CUDNN_STATUS_BAD_PARAM;
    cudnnStatus_t st =
        search(PASS_BWD_DATA, measured, h, dx, w, conv, dy, requested, returned, rows);
    if (st == CUDNN_STATUS_SUCCESS) COPY_ROWS(perf, rows, *returned, cudnnConvolutionBwdDataAlgo_t);
    return st;
}

static cudnnStatus_t backward_filter(bool measured, cudnnHandle_t h,
                                     const cudnnTensorDescriptor_t x,
                                     const cudnnTensorDescriptor_t dy,
                                     const cudnnConvolutionDescriptor_t conv,
                                     const cudnnFilterDescriptor_t dw, int requested, int *returned,
                                     cudnnConvolutionBwdFilterAlgoPerf_t *perf)
{
    algo_row rows[ALGO_ROWS_MAX];
    if (!perf) return CUDNN_STATUS_BAD_PARAM;
    cudnnStatus_t st =
        search(PASS_BWD_FILTER, measured, h, x, dw, conv, dy, requested, returned, rows);
    if (st == CUDNN_STATUS_SUCCESS)
        COPY_ROWS(perf, rows, *returned, cudnnConvolutionBwdFilterAlgo_t);
    return st;
}

cudnnStatus_t cudnnGetConvolutionForwardAlgorithm_v7(
    cudnnHandle_t handle, const cudnnTensorDescriptor_t srcDesc,
    const cudnnFilterDescriptor_t filterDesc, const cudnnConvolutionDescriptor_t convDesc,
    const cudnnTensorDescriptor_t destDesc, const int requestedAlgoCount, int *returnedAlgoCount,
    cudnnConvolutionFwdAlgoPerf_t *perfResults)
{
    return forward(false, handle, srcDesc, filterDesc, convDesc, destDesc, requestedAlgoCount,
                   returnedAlgoCount, perfResults);
}

cudnnStatus_t cudnnFindConvolutionForwardAlgorithm(
    cudnnHandle_t handle, const cudnnTensorDescriptor_t xDesc, const cudnnFilterDescriptor_t wDesc,
    const cudnnConvolutionDescriptor_t convDesc, const cudnnTensorDescriptor_t yDesc,
    const int requestedAlgoCount, int *returnedAlgoCount,
    cudnnConvolutionFwdAlgoPerf_t *perfResults)
{
    return forward(true, handle, xDesc, wDesc, convDesc, yDesc, requestedAlgoCount,
                   returnedAlgoCount, perfResults);
}

cudnnStatus_t cudnnGetConvolutionBackwardDataAlgorithm_v7(
    cudnnHandle_t handle, const cudnnFilterDescriptor_t filterDesc,
    const cudnnTensorDescriptor_t diffDesc, const cudnnConvolutionDescriptor_t convDesc,
    const cudnnTensorDescriptor_t gradDesc, const int requestedAlgoCount, int *returnedAlgoCount,
    cudnnConvolutionBwdDataAlgoPerf_t *perfResults)
{
    return backward_data(false, handle, filterDesc, diffDesc, convDesc, gradDesc,
                         requestedAlgoCount, returnedAlgoCount, perfResults);
}

cudnnStatus_t cudnnFindConvolutionBackwardDataAlgorithm(
    cudnnHandle_t handle, const cudnnFilterDescriptor_t wDesc, const cudnnTensorDescriptor_t dyDesc,
    const cudnnConvolutionDescriptor_t convDesc, const cudnnTensorDescriptor_t dxDesc,
    const int requestedAlgoCount, int *returnedAlgoCount,
    cudnnConvolutionBwdDataAlgoPerf_t *perfResults)
{
    return backward_data(true, handle, wDesc, dyDesc, convDesc, dxDesc, requestedAlgoCount,
                         returnedAlgoCount, perfResults);
}

cudnnStatus_t cudnnGetConvolutionBackwardFilterAlgorithm_v7(
    cudnnHandle_t handle, const cudnnTensorDescriptor_t srcDesc,
    const cudnnTensorDescriptor_t diffDesc, const cudnnConvolutionDescriptor_t convDesc,
    const cudnnFilterDescriptor_t gradDesc, const int requestedAlgoCount, int *returnedAlgoCount,
    cudnnConvolutionBwdFilterAlgoPerf_t *perfResults)
{
    return backward_filter(false, handle, srcDesc, diffDesc, convDesc, gradDesc, requestedAlgoCount,
                           returnedAlgoCount, perfResults);
}

cudnnStatus_t cudnnFindConvolutionBackwardFilterAlgorithm(
    cudnnHandle_t handle, const cudnnTensorDescriptor_t xDesc, const cudnnTensorDescriptor_t dyDesc,
    const cudnnConvolutionDescriptor_t convDesc, const cudnnFilterDescriptor_t dwDesc,
    const int requestedAlgoCount, int *returnedAlgoCount,
    cudnnConvolutionBwdFilterAlgoPerf_t *perfResults)
{
    return backward_filter(true, handle, xDesc, dyDesc, convDesc, dwDesc, requestedAlgoCount,
                           returnedAlgoCount, perfResults);
}
