/* tools/cuemu/cublas/cublas_gemm.c: cublasGemmStridedBatchedEx of the cuBLAS stand-in, through
 * OpenBLAS on host memory.
 * defines: cublasGemmStridedBatchedEx.
 *
 * Column-major, as documented: for each batch i in [0, batchCount),
 *   C_i (m,n, ld ldc) = alpha * op(A_i) (m,k) @ op(B_i) (k,n) + beta * C_i,
 * X_i = X + i * strideX elements (0 broadcasts one matrix, negative strides are allowed);
 * op(A) stored (m,k) with lda >= m for OP_N, (k,m) with lda >= k for OP_T / OP_C (real types:
 * OP_C is OP_T). alpha and beta are host pointers of the scale type, which follows the compute
 * type: float for CUBLAS_COMPUTE_32F*, double for CUBLAS_COMPUTE_64F*, __half for
 * CUBLAS_COMPUTE_16F*. beta == 0 never reads C (it may hold NaN), and alpha == 0 or k == 0 never
 * reads A or B, as in real cuBLAS.
 *
 * Types (the cublasGemmEx table, less the integer and complex rows, which the engine never asks
 * for and which answer CUBLAS_STATUS_NOT_SUPPORTED here):
 *   COMPUTE_32F[_PEDANTIC]        A = B in {16F, 16BF, 32F}, C = A's type or 32F
 *   COMPUTE_32F_FAST_{16F,16BF,TF32}, 32F_EMULATED_16BFX9    A = B = C = 32F
 *   COMPUTE_64F[_PEDANTIC], 64F_EMULATED_FIXEDPOINT           A = B = C = 64F
 *   COMPUTE_16F[_PEDANTIC]        A = B = C = 16F
 * 32F and 64F operands go straight to cblas_sgemm / cblas_dgemm. 16-bit operands are widened to
 * float (exactly), multiplied by sgemm with beta * C accumulated in float, and rounded to C's type
 * once, to nearest even. What only the real library can show: its rounding (tensor-core products,
 * TF32 and 16F/16BF down-conversion under the FAST compute types, split-K summation order, half
 * accumulation under COMPUTE_16F: all computed in plain float or double here), the algorithm it
 * picks for `algo`, its use of the workspace, and its speed. */
#include <cblas.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "cublas_standin.h"
#include "cuemu_fp16.h"

/* Which arithmetic a type combination runs in. */
typedef enum { PATH_F32, PATH_F64, PATH_WIDEN } gemm_path;
/* The C type of alpha and beta. */
typedef enum { SCALE_F16, SCALE_F32, SCALE_F64 } gemm_scale;

static bool is_16bit(cudaDataType t)
{
    return t == CUDA_R_16F || t == CUDA_R_16BF;
}

static size_t type_size(cudaDataType t)
{
    return t == CUDA_R_64F ? 8 : t == CUDA_R_32F ? 4 : 2;
}

/* NOT_SUPPORTED unless (compute, A, B, C) is a row of the table in the header comment. */
static cublasStatus_t plan_types(cublasComputeType_t ct, cudaDataType a, cudaDataType b,
                                 cudaDataType c, gemm_path *path, gemm_scale *scale)
{
    if (a != b) return CUBLAS_STATUS_NOT_SUPPORTED;
    switch (ct) {
    case CUBLAS_COMPUTE_32F:
    case CUBLAS_COMPUTE_32F_PEDANTIC:
        *scale = SCALE_F32;
        if (a == CUDA_R_32F && c == CUDA_R_32F) return *path = PATH_F32, CUBLAS_STATUS_SUCCESS;
        if (is_16bit(a) && (c == a || c == CUDA_R_32F))
            return *path = PATH_WIDEN, CUBLAS_STATUS_SUCCESS;
        return CUBLAS_STATUS_NOT_SUPPORTED;
    case CUBLAS_COMPUTE_32F_FAST_16F:
    case CUBLAS_COMPUTE_32F_FAST_16BF:
    case CUBLAS_COMPUTE_32F_FAST_TF32:
    case CUBLAS_COMPUTE_32F_EMULATED_16BFX9:
        *scale = SCALE_F32, *path = PATH_F32;
        return a == CUDA_R_32F && c == CUDA_R_32F ? CUBLAS_STATUS_SUCCESS
                                                  : CUBLAS_STATUS_NOT_SUPPORTED;
    case CUBLAS_COMPUTE_64F:
    case CUBLAS_COMPUTE_64F_PEDANTIC:
    case CUBLAS_COMPUTE_64F_EMULATED_FIXEDPOINT:
        *scale = SCALE_F64, *path = PATH_F64;
        return a == CUDA_R_64F && c == CUDA_R_64F ? CUBLAS_STATUS_SUCCESS
                                                  : CUBLAS_STATUS_NOT_SUPPORTED;
    case CUBLAS_COMPUTE_16F:
    case CUBLAS_COMPUTE_16F_PEDANTIC:
        *scale = SCALE_F16, *path = PATH_WIDEN;
        return a == CUDA_R_16F && c == CUDA_R_16F ? CUBLAS_STATUS_SUCCESS
                                                  : CUBLAS_STATUS_NOT_SUPPORTED;
    default:
        return CUBLAS_STATUS_NOT_SUPPORTED;
    }
}

static bool valid_op(cublasOperation_t op)
{
    return op == CUBLAS_OP_N || op == CUBLAS_OP_T || op == CUBLAS_OP_C; /* not OP_CONJG */
}

/* cublasGemmAlgo_t: DEFAULT, ALGO0..23, DEFAULT_TENSOR_OP, ALGO0..15_TENSOR_OP, AUTOTUNE */
static bool valid_algo(cublasGemmAlgo_t algo)
{
    int a = (int)algo;
    return (a >= CUBLAS_GEMM_DEFAULT && a <= CUBLAS_GEMM_ALGO23) ||
           (a >= CUBLAS_GEMM_DEFAULT_TENSOR_OP && a <= CUBLAS_GEMM_ALGO15_TENSOR_OP) ||
           a == CUBLAS_GEMM_AUTOTUNE;
}

static int max1(int x)
{
    return x > 1 ? x : 1;
}

/* Element i of a 16-bit or float array, widened to float. */
static float load_f(const void *p, cudaDataType t, size_t i)
{
    if (t == CUDA_R_32F) return ((const float *)p)[i];
    uint16_t v = ((const uint16_t *)p)[i];
    return t == CUDA_R_16F ? cuemu_half_to_float(v) : cuemu_bf16_to_float(v);
}

static void store_f(void *p, cudaDataType t, size_t i, float v)
{
    if (t == CUDA_R_32F)
        ((float *)p)[i] = v;
    else
        ((uint16_t *)p)[i] = t == CUDA_R_16F ? cuemu_float_to_half(v) : cuemu_float_to_bf16(v);
}

/* dst (rows,cols) packed column-major floats <- src (rows,cols) with leading dimension ld */
static void widen(float *dst, const void *src, cudaDataType t, int rows, int cols, int ld)
{
    for (int j = 0; j < cols; j++)
        for (int i = 0; i < rows; i++)
            dst[(size_t)j * rows + i] = load_f(src, t, (size_t)j * ld + i);
}

/* The operands of one call, already validated. */
typedef struct {
    CBLAS_TRANSPOSE ta, tb;
    int m, n, k;
    const char *a, *b;
    char *c;
    cudaDataType ab_type, c_type;
    int lda, ldb, ldc;
    long long sa, sb, sc; /* batch strides in elements */
} gemm_args;

/* C (m,n) = beta * C for one matrix, without reading C when beta is 0 (alpha 0 or k 0). */
static void scale_c(const gemm_args *g, char *c, double beta)
{
    for (int j = 0; j < g->n; j++)
        for (int i = 0; i < g->m; i++) {
            size_t at = (size_t)j * g->ldc + i;
            if (g->c_type == CUDA_R_64F)
                ((double *)c)[at] = beta == 0 ? 0.0 : beta * ((double *)c)[at];
            else
                store_f(c, g->c_type, at,
                        beta == 0 ? 0.0f : (float)beta * load_f(c, g->c_type, at));
        }
}

/* 16-bit A/B (and C): widen, sgemm in float, round once. work holds A, B and C as floats. */
static void gemm_widened(const gemm_args *g, const char *a, const char *b, char *c, float alpha,
                         float beta, float *work)
{
    int ra = g->ta == CblasNoTrans ? g->m : g->k, ca = g->ta == CblasNoTrans ? g->k : g->m;
    int rb = g->tb == CblasNoTrans ? g->k : g->n, cb = g->tb == CblasNoTrans ? g->n : g->k;
    float *fa = work, *fb = fa + (size_t)ra * ca, *fc = fb + (size_t)rb * cb;
    widen(fa, a, g->ab_type, ra, ca, g->lda);
    widen(fb, b, g->ab_type, rb, cb, g->ldb);
    if (beta != 0)
        widen(fc, c, g->c_type, g->m, g->n, g->ldc);
    else
        memset(fc, 0, sizeof(float) * (size_t)g->m * g->n);
    cblas_sgemm(CblasColMajor, g->ta, g->tb, g->m, g->n, g->k, alpha, fa, max1(ra), fb, max1(rb),
                beta, fc, max1(g->m));
    for (int j = 0; j < g->n; j++)
        for (int i = 0; i < g->m; i++)
            store_f(c, g->c_type, (size_t)j * g->ldc + i, fc[(size_t)j * g->m + i]);
}

static double scalar(const void *p, gemm_scale s)
{
    if (s == SCALE_F64) return *(const double *)p;
    if (s == SCALE_F32) return *(const float *)p;
    return cuemu_half_to_float(*(const uint16_t *)p);
}

cublasStatus_t cublasGemmStridedBatchedEx(cublasHandle_t handle, cublasOperation_t transa,
                                          cublasOperation_t transb, int m, int n, int k,
                                          const void *alpha, const void *A, cudaDataType Atype,
                                          int lda, long long int strideA, const void *B,
                                          cudaDataType Btype, int ldb, long long int strideB,
                                          const void *beta, void *C, cudaDataType Ctype, int ldc,
                                          long long int strideC, int batchCount,
                                          cublasComputeType_t computeType, cublasGemmAlgo_t algo)
{
    if (!cublas_standin_handle_ok(handle)) return CUBLAS_STATUS_NOT_INITIALIZED;
    if (!valid_op(transa) || !valid_op(transb) || !valid_algo(algo))
        return CUBLAS_STATUS_INVALID_VALUE;
    if (m < 0 || n < 0 || k < 0 || batchCount < 0) return CUBLAS_STATUS_INVALID_VALUE;
    if (lda < max1(transa == CUBLAS_OP_N ? m : k) || ldb < max1(transb == CUBLAS_OP_N ? k : n) ||
        ldc < max1(m))
        return CUBLAS_STATUS_INVALID_VALUE;
    gemm_path path;
    gemm_scale sc;
    cublasStatus_t st = plan_types(computeType, Atype, Btype, Ctype, &path, &sc);
    if (st != CUBLAS_STATUS_SUCCESS) return st;
    if (!alpha || !beta) return CUBLAS_STATUS_INVALID_VALUE;
    if (m == 0 || n == 0 || batchCount == 0) return CUBLAS_STATUS_SUCCESS;

    gemm_args g = {transa == CUBLAS_OP_N ? CblasNoTrans : CblasTrans,
                   transb == CUBLAS_OP_N ? CblasNoTrans : CblasTrans,
                   m,
                   n,
                   k,
                   A,
                   B,
                   C,
                   Atype,
                   Ctype,
                   lda,
                   ldb,
                   ldc,
                   strideA,
                   strideB,
                   strideC};
    double al = scalar(alpha, sc), be = scalar(beta, sc);
    size_t ab_size = type_size(Atype), c_size = type_size(Ctype);
    float *work = NULL;
    if (path == PATH_WIDEN && al != 0 && k > 0) {
        /* floats for op(A) (m,k), op(B) (k,n) and C (m,n) of one batch */
        size_t n_f = (size_t)m * k + (size_t)k * n + (size_t)m * n;
        work = malloc(sizeof(float) * n_f);
        if (!work) return CUBLAS_STATUS_ALLOC_FAILED;
    }
    for (int i = 0; i < batchCount; i++) {
        const char *a = g.a + (ptrdiff_t)i * g.sa * (ptrdiff_t)ab_size;
        const char *b = g.b + (ptrdiff_t)i * g.sb * (ptrdiff_t)ab_size;
        char *c = g.c + (ptrdiff_t)i * g.sc * (ptrdiff_t)c_size;
        if (al == 0 || k == 0) {
            scale_c(&g, c, be);
        } else if (path == PATH_WIDEN) {
            gemm_widened(&g, a, b, c, (float)al, (float)be, work);
        } else {
            /* beta 0: clear C first so that NaN or Inf there cannot leak through beta * C
             * (OpenBLAS happens to clear it too, but the CBLAS interface does not promise it) */
            if (be == 0) scale_c(&g, c, 0.0);
            if (path == PATH_F64)
                cblas_dgemm(CblasColMajor, g.ta, g.tb, m, n, k, al, (const double *)a, lda,
                            (const double *)b, ldb, be, (double *)c, ldc);
            else
                cblas_sgemm(CblasColMajor, g.ta, g.tb, m, n, k, (float)al, (const float *)a, lda,
                            (const float *)b, ldb, (float)be, (float *)c, ldc);
        }
    }
    free(work);
    return CUBLAS_STATUS_SUCCESS;
}
