/* tools/cuemu/cudnn/cudnn_algo.c: the cuDNN stand-in's algorithm searches (heuristic and
 * "measured") for the three convolution passes, and the heuristics knob.
 * defines: cudnnGetConvolution{Forward,BackwardData,BackwardFilter}Algorithm_v7,
 *          cudnnFindConvolution{Forward,BackwardData,BackwardFilter}Algorithm,
 *          cudnn_standin_algo_runs, cudnn_standin_conversion_algo, cudnn_standin_heuristics_mode,
 *          cudnn_standin_conversion_offered.
 *
 * Every pass lists all of its algorithms, as cuDNN does: two that run (status SUCCESS, 0 bytes of
 * workspace, the descriptor's math type), fastest first, then the rest with
 * CUDNN_STATUS_NOT_SUPPORTED, so a caller that ignores the status is caught when it runs one.
 * The runnable pair per pass is the implicit-GEMM forward algorithms and backward ALGO_1 (the
 * deterministic one) then ALGO_0 (which real cuDNN marks non-deterministic: atomics). Heuristic
 * results carry time -1 (not measured); "measured" ones a time estimated from the MAC count at a
 * notional 1 TFLOP/s, the second algorithm 25% slower. Nothing is timed or allocated: real
 * cudnnFind* runs each candidate on scratch buffers. The math type is the descriptor's (tensor-op
 * math requested for double data reports default math: there are no double tensor-op kernels).
 *
 * DDPL_CUEMU_CUDNN_HEURISTICS (read at every search and every pass, never cached, so a test can
 * set it per process) makes the searches answer as real cuDNN does in cases the ranking above
 * never produces, to exercise two paths of the engine's algorithm choice (choose_algo and
 * PICK_ALGO in engine/cuda/cuda_conv.c) that would otherwise only run on some GPUs; the cases
 * are in spec/cuda/cuda_blas_spec.lua and test_cudnn_standin.c:
 *   normal (or unset, or empty): the ranking above.
 *   none: cudnnGet*_v7 lists every algorithm with CUDNN_STATUS_NOT_SUPPORTED (as cuDNN 9's
 *     heuristics may for some shapes under FMA math), so the engine must fall back to
 *     cudnnFind*, which ranks as under normal. The passes still run the runnable pair.
 *   conversion_first: for float data, cudnnGet*_v7 and cudnnFind* first rank the pass's
 *     WINOGRAD_NONFUSED algorithm (cudnn_standin_conversion_algo) with status SUCCESS and math
 *     type CUDNN_TENSOR_OP_MATH_ALLOW_CONVERSION (measured 2x faster than the first of the pair),
 *     then the usual list. As with real cuDNN, that algorithm exists only as a tensor-op kernel
 *     with down-conversion: a pass run with it answers CUDNN_STATUS_NOT_SUPPORTED unless the
 *     descriptor's math type is CUDNN_TENSOR_OP_MATH_ALLOW_CONVERSION (in particular under the
 *     FMA math the engine sets for strict float32), and when it runs it rounds the pass's two
 *     inputs to float16 first (what the down-conversion costs in precision), accumulating in
 *     float. A caller that takes the first SUCCESS result for strict float32 and forces FMA math
 *     on it fails here; one that keeps its math type silently loses float32 precision. Other
 *     data types rank as normal.
 * Any other value makes every search answer CUDNN_STATUS_BAD_PARAM (with a line on stderr), so
 * a misspelt value cannot leave a test silently on the normal ranking. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

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

/* the algorithm conversion_first ranks first: runnable only with down-conversion */
static const int conversion[3] = {
    [PASS_FWD] = CUDNN_CONVOLUTION_FWD_ALGO_WINOGRAD_NONFUSED,
    [PASS_BWD_DATA] = CUDNN_CONVOLUTION_BWD_DATA_ALGO_WINOGRAD_NONFUSED,
    [PASS_BWD_FILTER] = CUDNN_CONVOLUTION_BWD_FILTER_ALGO_WINOGRAD_NONFUSED,
};

#define HEURISTICS_ENV "DDPL_CUEMU_CUDNN_HEURISTICS"

bool cudnn_standin_algo_runs(cudnn_standin_pass pass, int algo)
{
    return algo == runnable[pass][0] || algo == runnable[pass][1];
}

int cudnn_standin_conversion_algo(cudnn_standin_pass pass)
{
    return conversion[pass];
}

cudnn_standin_heuristics cudnn_standin_heuristics_mode(void)
{
    const char *s = getenv(HEURISTICS_ENV);
    if (!s || !*s || !strcmp(s, "normal")) return HEURISTICS_NORMAL;
    if (!strcmp(s, "none")) return HEURISTICS_NONE;
    if (!strcmp(s, "conversion_first")) return HEURISTICS_CONVERSION_FIRST;
    return HEURISTICS_UNKNOWN;
}

bool cudnn_standin_conversion_offered(const conv_geom *g)
{
    return g->dtype == CUDNN_DATA_FLOAT &&
           cudnn_standin_heuristics_mode() == HEURISTICS_CONVERSION_FIRST;
}

/* Fills rows[0 .. *returned) for a checked geometry; returns the status of the search. */
static cudnnStatus_t search(cudnn_standin_pass pass, bool measured, cudnnHandle_t h,
                            const struct cudnnTensorStruct *x, const struct cudnnFilterStruct *w,
                            const struct cudnnConvolutionStruct *conv,
                            const struct cudnnTensorStruct *y, int requested, int *returned,
                            algo_row rows[ALGO_ROWS_MAX])
{
    if (!h || !returned || requested < 1) return CUDNN_STATUS_BAD_PARAM;
    cudnn_standin_heuristics mode = cudnn_standin_heuristics_mode();
    if (mode == HEURISTICS_UNKNOWN) {
        fprintf(stderr,
                "cuDNN stand-in: " HEURISTICS_ENV "=%s is not one of normal, none, "
                "conversion_first\n",
                getenv(HEURISTICS_ENV));
        return CUDNN_STATUS_BAD_PARAM;
    }
    conv_geom g;
    cudnnStatus_t st = cudnn_standin_geometry(x, w, conv, y, &g);
    if (st != CUDNN_STATUS_SUCCESS) return st;
    cudnnMathType_t math = conv->math;
    if (g.f64 && (math == CUDNN_TENSOR_OP_MATH || math == CUDNN_TENSOR_OP_MATH_ALLOW_CONVERSION))
        math = CUDNN_DEFAULT_MATH;
    double macs = (double)g.n * g.k * g.oh * g.ow * g.cg * g.r * g.s;
    /* none: the heuristics offer nothing that runs; the measured search still does */
    cudnnStatus_t ok =
        mode == HEURISTICS_NONE && !measured ? CUDNN_STATUS_NOT_SUPPORTED : CUDNN_STATUS_SUCCESS;
    bool convert = cudnn_standin_conversion_offered(&g);
    int n = 0;
    if (convert) /* first whatever the descriptor's math: cuDNN reports the math it needs */
        rows[n++] = (algo_row){conversion[pass],
                               CUDNN_STATUS_SUCCESS,
                               measured ? (float)(macs * 2e-9 * 0.5) : -1.0f,
                               0,
                               CUDNN_DETERMINISTIC,
                               CUDNN_TENSOR_OP_MATH_ALLOW_CONVERSION};
    for (int r = 0; r < 2; r++) /* the runnable two, fastest first; both forward GEMMs are
                                   deterministic, backward ALGO_0 is not */
        rows[n++] =
            (algo_row){runnable[pass][r],
                       ok,
                       measured ? (float)(macs * 2e-9 * (r ? 1.25 : 1.0)) : -1.0f,
                       0,
                       r && pass != PASS_FWD ? CUDNN_NON_DETERMINISTIC : CUDNN_DETERMINISTIC,
                       math};
    for (int a = 0; a < algo_count[pass]; a++)
        if (!cudnn_standin_algo_runs(pass, a) && !(convert && a == conversion[pass]))
            rows[n++] =
                (algo_row){a, CUDNN_STATUS_NOT_SUPPORTED, -1.0f, 0, CUDNN_DETERMINISTIC, math};
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
