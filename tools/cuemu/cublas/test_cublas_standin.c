/* tools/cuemu/cublas/test_cublas_standin.c: checks the cuBLAS stand-in (argv[1], opened with
 * dlopen as engine/cuda/cuda_dynlib.c opens libcublas) against double-precision loops.
 * defines: main (the exported names, the handle calls and status names, the 16-bit converters
 *          against an independent rint-based rounding, GemmStridedBatchedEx over every transpose
 *          pair, odd sizes, padded leading dimensions, batch strides (broadcast and negative),
 *          f32 / tf32 / f64 / f16 / bf16 / mixed outputs / COMPUTE_16F, alpha and beta (beta 0
 *          over NaN, k 0, alpha 0), the engine's row-major call, and the error statuses).
 * Prints one line per failure and ends with "N passed, M failed"; exits 1 on any failure. */
#include <cublas_v2.h>
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
static struct {
    __typeof__(&cublasCreate_v2) create;
    __typeof__(&cublasDestroy_v2) destroy;
    __typeof__(&cublasSetStream_v2) set_stream;
    __typeof__(&cublasSetWorkspace_v2) set_workspace;
    __typeof__(&cublasGetStatusName) status_name;
    __typeof__(&cublasGemmStridedBatchedEx) gemm;
} lib;

static int load(const char *path)
{
    void *h = dlopen(path, RTLD_NOW | RTLD_LOCAL);
    if (!h) {
        printf("cannot open %s: %s\n", path, dlerror());
        return -1;
    }
    /* cuda_dynlib.c's cublas_syms, plus the destroy call */
    const char *names[] = {"cublasCreate_v2",     "cublasDestroy_v2",
                           "cublasSetStream_v2",  "cublasSetWorkspace_v2",
                           "cublasGetStatusName", "cublasGemmStridedBatchedEx"};
    void *fns[6];
    for (int i = 0; i < 6; i++) {
        fns[i] = dlsym(h, names[i]);
        CHECK(fns[i] != NULL, "symbol %s missing", names[i]);
        if (!fns[i]) return -1;
    }
    memcpy(&lib.create, &fns[0], sizeof fns[0]);
    memcpy(&lib.destroy, &fns[1], sizeof fns[1]);
    memcpy(&lib.set_stream, &fns[2], sizeof fns[2]);
    memcpy(&lib.set_workspace, &fns[3], sizeof fns[3]);
    memcpy(&lib.status_name, &fns[4], sizeof fns[4]);
    memcpy(&lib.gemm, &fns[5], sizeof fns[5]);
    /* internal helpers must stay hidden (the version script) */
    CHECK(dlsym(h, "cuemu_float_to_half") == NULL && dlsym(h, "plan_types") == NULL,
          "internal symbols are exported");
    return 0;
}

/* ---- 16-bit rounding, computed independently of cuemu_fp16.h ---- */

/* x rounded to a binary float with `mant` fraction bits and minimum normal exponent emin, by
 * scaling to an integer and rint (round-half-even in the default mode); overflow -> inf. */
static double ref_round(double x, int mant, int emin, double maxv)
{
    if (isnan(x) || x == 0) return x;
    int e;
    frexp(x, &e); /* |x| in [2^(e-1), 2^e) */
    int exp = e - 1 < emin ? emin : e - 1;
    double ulp = ldexp(1.0, exp - mant);
    double r = rint(x / ulp) * ulp;
    if (fabs(r) > maxv) return copysign(INFINITY, x);
    return r;
}
static double ref_half(double x)
{
    return ref_round(x, 10, -14, 65504.0);
}
static double ref_bf16(double x)
{
    return ref_round(x, 7, -126, ldexp(255.0, 120)); /* max bf16 = (2 - 2^-7) * 2^127 */
}

static void test_converters(void)
{
    /* every finite half and bf16 survives the round trip through float */
    int bad_h = 0, bad_b = 0;
    for (uint32_t u = 0; u < 0x10000u; u++) {
        uint16_t v = (uint16_t)u;
        float fh = cuemu_half_to_float(v), fb = cuemu_bf16_to_float(v);
        if (!isnan(fh) && cuemu_float_to_half(fh) != v) bad_h++;
        if (!isnan(fb) && cuemu_float_to_bf16(fb) != v) bad_b++;
        if (isnan(fh) != ((v & 0x7c00u) == 0x7c00u && (v & 0x3ffu))) bad_h++;
    }
    CHECK(bad_h == 0 && bad_b == 0, "16-bit round trips: %d half, %d bf16 wrong", bad_h, bad_b);
    /* known patterns: ties to even, subnormals, overflow, NaN */
    CHECK(cuemu_float_to_half(1.0f) == 0x3c00 && cuemu_float_to_half(65504.0f) == 0x7bff &&
              cuemu_float_to_half(65520.0f) == 0x7c00 && cuemu_float_to_half(65519.0f) == 0x7bff,
          "half: 1, max, overflow");
    CHECK(cuemu_float_to_half(ldexpf(1, -24)) == 0x0001 &&
              cuemu_float_to_half(ldexpf(1, -25)) == 0x0000 &&
              cuemu_float_to_half(ldexpf(3, -26)) == 0x0001 &&
              cuemu_float_to_half(ldexpf(3, -25)) == 0x0002 &&
              cuemu_float_to_half(-ldexpf(1, -14)) == 0x8400,
          "half: subnormals");
    CHECK(cuemu_float_to_half(1.0f + ldexpf(1, -11)) == 0x3c00 &&
              cuemu_float_to_half(1.0f + ldexpf(3, -11)) == 0x3c02,
          "half: ties to even");
    CHECK(isnan(cuemu_half_to_float(cuemu_float_to_half(NAN))) &&
              isnan(cuemu_bf16_to_float(cuemu_float_to_bf16(NAN))) &&
              cuemu_float_to_bf16(-INFINITY) == 0xff80,
          "NaN / inf");
    CHECK(cuemu_float_to_bf16(1.0f + ldexpf(1, -8)) == 0x3f80 &&
              cuemu_float_to_bf16(1.0f + ldexpf(3, -8)) == 0x3f82 &&
              cuemu_float_to_bf16(3.4028235e38f) == 0x7f80,
          "bf16: ties to even, overflow");
    /* random floats across the whole range against rint */
    srand(7);
    int wrong = 0;
    for (int i = 0; i < 200000; i++) {
        double m = (double)rand() / RAND_MAX * 2 - 1;
        float x = (float)ldexp(m, rand() % 60 - 40);
        if ((double)cuemu_half_to_float(cuemu_float_to_half(x)) != ref_half(x)) wrong++;
        if ((double)cuemu_bf16_to_float(cuemu_float_to_bf16(x)) != ref_bf16(x)) wrong++;
    }
    CHECK(wrong == 0, "%d of 400000 random conversions differ from rint", wrong);
}

/* ---- handle calls and status names ---- */
static void test_handle(void)
{
    cublasHandle_t h = NULL;
    CHECK(lib.create(NULL) == CUBLAS_STATUS_INVALID_VALUE, "create(NULL)");
    CHECK(lib.create(&h) == CUBLAS_STATUS_SUCCESS && h, "create");
    cudaStream_t s = (cudaStream_t)(uintptr_t)0x1000; /* any stream value is only recorded */
    CHECK(lib.set_stream(h, s) == CUBLAS_STATUS_SUCCESS, "set stream");
    CHECK(lib.set_stream(NULL, s) == CUBLAS_STATUS_NOT_INITIALIZED, "set stream on NULL");
    void *ws = aligned_alloc(256, 1 << 16);
    CHECK(lib.set_workspace(h, ws, 1 << 16) == CUBLAS_STATUS_SUCCESS, "workspace");
    CHECK(lib.set_workspace(h, (char *)ws + 16, 1024) == CUBLAS_STATUS_INVALID_VALUE,
          "misaligned workspace");
    CHECK(lib.set_workspace(h, NULL, 0) == CUBLAS_STATUS_SUCCESS, "no workspace");
    CHECK(lib.set_workspace(NULL, ws, 1 << 16) == CUBLAS_STATUS_NOT_INITIALIZED,
          "workspace on NULL");
    CHECK(lib.destroy(h) == CUBLAS_STATUS_SUCCESS, "destroy");
    CHECK(lib.destroy(NULL) == CUBLAS_STATUS_NOT_INITIALIZED, "destroy(NULL)");
    free(ws);
    static const struct {
        cublasStatus_t st;
        const char *name;
    } names[] = {{CUBLAS_STATUS_SUCCESS, "CUBLAS_STATUS_SUCCESS"},
                 {CUBLAS_STATUS_NOT_INITIALIZED, "CUBLAS_STATUS_NOT_INITIALIZED"},
                 {CUBLAS_STATUS_ALLOC_FAILED, "CUBLAS_STATUS_ALLOC_FAILED"},
                 {CUBLAS_STATUS_INVALID_VALUE, "CUBLAS_STATUS_INVALID_VALUE"},
                 {CUBLAS_STATUS_ARCH_MISMATCH, "CUBLAS_STATUS_ARCH_MISMATCH"},
                 {CUBLAS_STATUS_MAPPING_ERROR, "CUBLAS_STATUS_MAPPING_ERROR"},
                 {CUBLAS_STATUS_EXECUTION_FAILED, "CUBLAS_STATUS_EXECUTION_FAILED"},
                 {CUBLAS_STATUS_INTERNAL_ERROR, "CUBLAS_STATUS_INTERNAL_ERROR"},
                 {CUBLAS_STATUS_NOT_SUPPORTED, "CUBLAS_STATUS_NOT_SUPPORTED"},
                 {CUBLAS_STATUS_LICENSE_ERROR, "CUBLAS_STATUS_LICENSE_ERROR"}};
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++)
        CHECK(strcmp(lib.status_name(names[i].st), names[i].name) == 0, "name of %d: %s",
              (int)names[i].st, lib.status_name(names[i].st));
    CHECK(lib.status_name((cublasStatus_t)12345) != NULL, "unknown status has a name");
}

/* ---- typed host buffers ---- */
static size_t tsize(cudaDataType t)
{
    return t == CUDA_R_64F ? 8 : t == CUDA_R_32F ? 4 : 2;
}
static void put(void *p, cudaDataType t, size_t i, double v)
{
    switch (t) {
    case CUDA_R_64F:
        ((double *)p)[i] = v;
        break;
    case CUDA_R_32F:
        ((float *)p)[i] = (float)v;
        break;
    case CUDA_R_16F:
        ((uint16_t *)p)[i] = cuemu_float_to_half((float)v);
        break;
    default:
        ((uint16_t *)p)[i] = cuemu_float_to_bf16((float)v);
        break;
    }
}
static double get(const void *p, cudaDataType t, size_t i)
{
    switch (t) {
    case CUDA_R_64F:
        return ((const double *)p)[i];
    case CUDA_R_32F:
        return ((const float *)p)[i];
    case CUDA_R_16F:
        return cuemu_half_to_float(((const uint16_t *)p)[i]);
    default:
        return cuemu_bf16_to_float(((const uint16_t *)p)[i]);
    }
}
/* small multiples of 1/8: exact in every type, and products sum exactly in float */
static double small_value(void)
{
    return (double)(rand() % 33 - 16) / 8.0;
}
static double random_value(void)
{
    return (double)rand() / RAND_MAX * 2 - 1;
}

typedef struct {
    const char *name;
    cudaDataType ab, c;
    cublasComputeType_t compute;
    int scale;  /* 16, 32, 64: the type of alpha and beta */
    double tol; /* relative to the magnitude of the terms */
} gemm_type;

static const gemm_type gemm_types[] = {
    {"f32", CUDA_R_32F, CUDA_R_32F, CUBLAS_COMPUTE_32F, 32, 1e-5},
    {"f32 tf32", CUDA_R_32F, CUDA_R_32F, CUBLAS_COMPUTE_32F_FAST_TF32, 32, 1e-5},
    {"f32 pedantic", CUDA_R_32F, CUDA_R_32F, CUBLAS_COMPUTE_32F_PEDANTIC, 32, 1e-5},
    {"f64", CUDA_R_64F, CUDA_R_64F, CUBLAS_COMPUTE_64F, 64, 1e-13},
    {"f16", CUDA_R_16F, CUDA_R_16F, CUBLAS_COMPUTE_32F, 32, 0},
    {"bf16", CUDA_R_16BF, CUDA_R_16BF, CUBLAS_COMPUTE_32F, 32, 0},
    {"f16->f32", CUDA_R_16F, CUDA_R_32F, CUBLAS_COMPUTE_32F, 32, 0},
    {"bf16->f32", CUDA_R_16BF, CUDA_R_32F, CUBLAS_COMPUTE_32F, 32, 0},
    {"f16 compute16", CUDA_R_16F, CUDA_R_16F, CUBLAS_COMPUTE_16F, 16, 0},
};

/* One strided batched product against double loops. lda etc. get `pad` spare rows; batch
 * strides are the matrix size plus `gap` (or 0 for a broadcast A). For 16-bit types the inputs
 * are small multiples of 1/8, so the float sums are exact and the result must equal the exact
 * value rounded once to C's type (tol 0). */
static void run_case(cublasHandle_t h, const gemm_type *ty, cublasOperation_t ta,
                     cublasOperation_t tb, int m, int n, int k, int batch, int pad, int gap,
                     bool bcast_a, double alpha, double beta)
{
    bool exact = ty->tol == 0;
    int ra = ta == CUBLAS_OP_N ? m : k, ca = ta == CUBLAS_OP_N ? k : m;
    int rb = tb == CUBLAS_OP_N ? k : n, cb = tb == CUBLAS_OP_N ? n : k;
    int lda = ra + pad > 0 ? ra + pad : 1, ldb = rb + pad > 0 ? rb + pad : 1;
    int ldc = m + pad > 0 ? m + pad : 1;
    long long sa = bcast_a ? 0 : (long long)lda * ca + gap, sb = (long long)ldb * cb + gap;
    long long sc = (long long)ldc * n + gap;
    size_t na = (size_t)(bcast_a ? 1 : batch) * (lda * (size_t)ca + gap) + 1;
    size_t nb = (size_t)batch * (ldb * (size_t)cb + gap) + 1, nc = (size_t)batch * sc + 1;
    void *A = malloc(na * tsize(ty->ab)), *B = malloc(nb * tsize(ty->ab));
    void *C = malloc(nc * tsize(ty->c));
    double *C0 = malloc(nc * sizeof(double));
    for (size_t i = 0; i < na; i++) put(A, ty->ab, i, exact ? small_value() : random_value());
    for (size_t i = 0; i < nb; i++) put(B, ty->ab, i, exact ? small_value() : random_value());
    for (size_t i = 0; i < nc; i++) {
        /* beta 0 must not read C: fill it with NaN then */
        put(C, ty->c, i, beta == 0 ? NAN : exact ? small_value() : random_value());
        C0[i] = get(C, ty->c, i);
    }
    double ad = alpha, bd = beta;
    float af = (float)alpha, bf = (float)beta;
    uint16_t ah = cuemu_float_to_half((float)alpha), bh = cuemu_float_to_half((float)beta);
    const void *pa = ty->scale == 64 ? (void *)&ad : ty->scale == 32 ? (void *)&af : (void *)&ah;
    const void *pb = ty->scale == 64 ? (void *)&bd : ty->scale == 32 ? (void *)&bf : (void *)&bh;
    cublasStatus_t st = lib.gemm(h, ta, tb, m, n, k, pa, A, ty->ab, lda, sa, B, ty->ab, ldb, sb, pb,
                                 C, ty->c, ldc, sc, batch, ty->compute, CUBLAS_GEMM_DEFAULT);
    CHECK(st == CUBLAS_STATUS_SUCCESS, "%s gemm(%d,%d,%d) status %s", ty->name, m, n, k,
          lib.status_name(st));
    int bad = 0;
    double worst = 0;
    for (int b = 0; b < batch; b++)
        for (int j = 0; j < n; j++)
            for (int i = 0; i < m; i++) {
                double sum = 0, mag = 0;
                for (int l = 0; l < k; l++) {
                    size_t ia = ta == CUBLAS_OP_N ? (size_t)l * lda + i : (size_t)i * lda + l;
                    size_t ib = tb == CUBLAS_OP_N ? (size_t)j * ldb + l : (size_t)l * ldb + j;
                    double x = get(A, ty->ab, b * sa + ia), y = get(B, ty->ab, b * sb + ib);
                    sum += x * y, mag += fabs(x * y);
                }
                size_t ic = b * sc + (size_t)j * ldc + i;
                double c0 = beta == 0 ? 0 : C0[ic];
                double want = alpha * sum + (beta == 0 ? 0 : beta * c0);
                mag = fabs(alpha) * mag + fabs(beta * c0) + 1e-30;
                double got = get(C, ty->c, ic);
                if (exact)
                    want = ty->c == CUDA_R_16F    ? ref_half(want)
                           : ty->c == CUDA_R_16BF ? ref_bf16(want)
                                                  : want;
                double err = fabs(got - want) / mag;
                if (!(exact ? got == want : err <= ty->tol)) bad++;
                if (!(err <= worst)) worst = err;
            }
    /* padding between rows and batches is left alone */
    int touched = 0;
    for (int b = 0; b < batch; b++)
        for (int j = 0; j < n; j++)
            for (int i = m; i < ldc; i++) {
                size_t ic = b * sc + (size_t)j * ldc + i;
                double g = get(C, ty->c, ic);
                if (!(g == C0[ic] || (isnan(g) && isnan(C0[ic])))) touched++;
            }
    CHECK(bad == 0 && touched == 0,
          "%s op(%d,%d) m=%d n=%d k=%d batch=%d pad=%d bcast=%d alpha=%g beta=%g: %d wrong "
          "(worst rel err %g), %d padding elements written",
          ty->name, (int)ta, (int)tb, m, n, k, batch, pad, (int)bcast_a, alpha, beta, bad, worst,
          touched);
    free(A), free(B), free(C), free(C0);
}

static void test_gemm_values(cublasHandle_t h)
{
    static const int sizes[][3] = {{1, 1, 1}, {5, 7, 3}, {13, 9, 17}, {2, 11, 1}, {33, 4, 65}};
    static const cublasOperation_t ops[] = {CUBLAS_OP_N, CUBLAS_OP_T, CUBLAS_OP_C};
    static const double ab[][2] = {{1, 0}, {0.5, -1.25}, {-2, 1}};
    srand(11);
    for (size_t t = 0; t < sizeof gemm_types / sizeof gemm_types[0]; t++)
        for (int oa = 0; oa < 3; oa++)
            for (int ob = 0; ob < 3; ob++)
                for (int s = 0; s < 5; s++) {
                    const double *al = ab[(oa + ob + s) % 3];
                    run_case(h, &gemm_types[t], ops[oa], ops[ob], sizes[s][0], sizes[s][1],
                             sizes[s][2], 1 + (s % 3), s % 3, s % 2 ? 3 : 0, s == 3, al[0], al[1]);
                }
    /* k == 0 and alpha == 0: C = beta * C without reading A or B (beta 0 over NaN: zeros) */
    for (size_t t = 0; t < sizeof gemm_types / sizeof gemm_types[0]; t++) {
        run_case(h, &gemm_types[t], CUBLAS_OP_N, CUBLAS_OP_T, 4, 3, 0, 2, 1, 0, false, 1, 0);
        run_case(h, &gemm_types[t], CUBLAS_OP_N, CUBLAS_OP_T, 4, 3, 0, 2, 1, 0, false, 1, -0.5);
        run_case(h, &gemm_types[t], CUBLAS_OP_T, CUBLAS_OP_N, 4, 3, 5, 2, 0, 2, false, 0, 2);
        run_case(h, &gemm_types[t], CUBLAS_OP_T, CUBLAS_OP_N, 4, 3, 5, 2, 0, 2, false, 0, 0);
    }
}

/* Rounding actually happens: an f16 output of 1 + 2^-11 (a tie) is 1, + 3*2^-11 is 1 + 2^-9;
 * bf16 of 1 + 2^-8 is 1. Inputs exact, so only the final rounding can produce these. */
static void test_gemm_rounding(cublasHandle_t h)
{
    float one = 1, zero = 0;
    uint16_t a[2] = {cuemu_float_to_half(1.0f), cuemu_float_to_half(ldexpf(1, -11))};
    uint16_t b[2] = {cuemu_float_to_half(1.0f), cuemu_float_to_half(1.0f)}, c = 0;
    /* (1x2) @ (2x1): 1 + 2^-11 */
    cublasStatus_t st =
        lib.gemm(h, CUBLAS_OP_N, CUBLAS_OP_N, 1, 1, 2, &one, a, CUDA_R_16F, 1, 0, b, CUDA_R_16F, 2,
                 0, &zero, &c, CUDA_R_16F, 1, 0, 1, CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT);
    CHECK(st == CUBLAS_STATUS_SUCCESS && c == 0x3c00, "f16 tie to even: %04x", c);
    a[1] = cuemu_float_to_half(ldexpf(3, -11));
    lib.gemm(h, CUBLAS_OP_N, CUBLAS_OP_N, 1, 1, 2, &one, a, CUDA_R_16F, 1, 0, b, CUDA_R_16F, 2, 0,
             &zero, &c, CUDA_R_16F, 1, 0, 1, CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT);
    CHECK(c == 0x3c02, "f16 round up: %04x", c);
    uint16_t x[2] = {cuemu_float_to_bf16(1.0f), cuemu_float_to_bf16(ldexpf(1, -8))};
    uint16_t y[2] = {cuemu_float_to_bf16(1.0f), cuemu_float_to_bf16(1.0f)};
    lib.gemm(h, CUBLAS_OP_N, CUBLAS_OP_N, 1, 1, 2, &one, x, CUDA_R_16BF, 1, 0, y, CUDA_R_16BF, 2, 0,
             &zero, &c, CUDA_R_16BF, 1, 0, 1, CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT);
    CHECK(c == 0x3f80, "bf16 tie to even: %04x", c);
}

/* The call engine/cuda/cuda_gemm.c makes for row-major out (B,M,N) = a (B,M,K) @ b (B,K,N):
 * C^T = B^T A^T with m = N, n = M, the first operand b and the second a, each OP_N when
 * row-major; here a is broadcast (batch stride 0) and b is stored column-major (OP_T). */
static void test_engine_layout(cublasHandle_t h)
{
    enum { NB = 3, M = 5, K = 4, N = 6 };
    float a[M * K], b[NB][N][K], c[NB][M][N]; /* a row-major (M,K); b column-major (K,N) */
    for (int i = 0; i < M * K; i++) a[i] = (float)(i % 7) - 3;
    for (int t = 0; t < NB; t++)
        for (int j = 0; j < N; j++)
            for (int l = 0; l < K; l++) b[t][j][l] = (float)((t + 2 * j + 3 * l) % 5) - 2;
    float one = 1, zero = 0;
    cublasStatus_t st = lib.gemm(h, CUBLAS_OP_T, CUBLAS_OP_N, N, M, K, &one, b, CUDA_R_32F, K,
                                 (long long)N * K, a, CUDA_R_32F, K, 0, &zero, c, CUDA_R_32F, N,
                                 (long long)M * N, NB, CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT);
    int bad = 0;
    for (int t = 0; t < NB; t++)
        for (int i = 0; i < M; i++)
            for (int j = 0; j < N; j++) {
                double s = 0;
                for (int l = 0; l < K; l++) s += a[i * K + l] * b[t][j][l];
                if (c[t][i][j] != s) bad++;
            }
    CHECK(st == CUBLAS_STATUS_SUCCESS && bad == 0, "engine's row-major call: %d wrong", bad);
}

/* Negative batch strides walk backwards from the pointer given: the same product as positive
 * strides from the first matrix, batches in reverse order. */
static void test_negative_strides(cublasHandle_t h)
{
    enum { NB = 3, SZ = 6 }; /* 2x3 @ 3x2 -> 2x2 per batch, each operand padded to 6 floats */
    float a[NB * SZ], b[NB * SZ], c1[NB * SZ], c2[NB * SZ], one = 1, zero = 0;
    for (int i = 0; i < NB * SZ; i++) a[i] = (float)(i % 5) - 2, b[i] = (float)(i % 3) + 1;
    cublasStatus_t s1 =
        lib.gemm(h, CUBLAS_OP_N, CUBLAS_OP_N, 2, 2, 3, &one, a, CUDA_R_32F, 2, SZ, b, CUDA_R_32F, 3,
                 SZ, &zero, c1, CUDA_R_32F, 2, SZ, NB, CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT);
    const int last = (NB - 1) * SZ;
    cublasStatus_t s2 = lib.gemm(h, CUBLAS_OP_N, CUBLAS_OP_N, 2, 2, 3, &one, a + last, CUDA_R_32F,
                                 2, -SZ, b + last, CUDA_R_32F, 3, -SZ, &zero, c2 + last, CUDA_R_32F,
                                 2, -SZ, NB, CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT);
    int bad = 0;
    for (int t = 0; t < NB; t++)
        for (int i = 0; i < 4; i++) bad += c1[t * SZ + i] != c2[t * SZ + i];
    CHECK(s1 == CUBLAS_STATUS_SUCCESS && s2 == CUBLAS_STATUS_SUCCESS && bad == 0,
          "negative batch strides: %d differ", bad);
}

static void test_gemm_errors(cublasHandle_t h)
{
    float A[64] = {0}, B[64] = {0}, C[64] = {0}, one = 1, zero = 0;
    double d1 = 1;
    uint16_t hA[64] = {0};
#define GEMM(hh, ta, tb, m, n, k, al, a, at, lda, b, bt, ldb, be, c, ct, ldc, batch, comp)         \
    lib.gemm(hh, ta, tb, m, n, k, al, a, at, lda, 0, b, bt, ldb, 0, be, c, ct, ldc, 0, batch,      \
             comp, CUBLAS_GEMM_DEFAULT)
    const cublasOperation_t N = CUBLAS_OP_N, T = CUBLAS_OP_T;
    const cudaDataType F = CUDA_R_32F;
    const cublasComputeType_t CF = CUBLAS_COMPUTE_32F;
    struct {
        const char *what;
        cublasStatus_t got, want;
    } cases[] = {
        {"NULL handle", GEMM(NULL, N, N, 2, 2, 2, &one, A, F, 2, B, F, 2, &zero, C, F, 2, 1, CF),
         CUBLAS_STATUS_NOT_INITIALIZED},
        {"m < 0", GEMM(h, N, N, -1, 2, 2, &one, A, F, 2, B, F, 2, &zero, C, F, 2, 1, CF),
         CUBLAS_STATUS_INVALID_VALUE},
        {"n < 0", GEMM(h, N, N, 2, -1, 2, &one, A, F, 2, B, F, 2, &zero, C, F, 2, 1, CF),
         CUBLAS_STATUS_INVALID_VALUE},
        {"k < 0", GEMM(h, N, N, 2, 2, -1, &one, A, F, 2, B, F, 2, &zero, C, F, 2, 1, CF),
         CUBLAS_STATUS_INVALID_VALUE},
        {"batch < 0", GEMM(h, N, N, 2, 2, 2, &one, A, F, 2, B, F, 2, &zero, C, F, 2, -1, CF),
         CUBLAS_STATUS_INVALID_VALUE},
        {"lda < m", GEMM(h, N, N, 3, 2, 2, &one, A, F, 2, B, F, 2, &zero, C, F, 3, 1, CF),
         CUBLAS_STATUS_INVALID_VALUE},
        {"lda < k (T)", GEMM(h, T, N, 2, 2, 3, &one, A, F, 2, B, F, 3, &zero, C, F, 2, 1, CF),
         CUBLAS_STATUS_INVALID_VALUE},
        {"ldb < k", GEMM(h, N, N, 2, 2, 3, &one, A, F, 2, B, F, 2, &zero, C, F, 2, 1, CF),
         CUBLAS_STATUS_INVALID_VALUE},
        {"ldb < n (T)", GEMM(h, N, T, 2, 3, 2, &one, A, F, 2, B, F, 2, &zero, C, F, 2, 1, CF),
         CUBLAS_STATUS_INVALID_VALUE},
        {"ldc < m", GEMM(h, N, N, 3, 2, 2, &one, A, F, 3, B, F, 2, &zero, C, F, 2, 1, CF),
         CUBLAS_STATUS_INVALID_VALUE},
        {"ld 0 with m 0", GEMM(h, N, N, 0, 2, 2, &one, A, F, 0, B, F, 2, &zero, C, F, 0, 1, CF),
         CUBLAS_STATUS_INVALID_VALUE},
        {"OP_CONJG",
         GEMM(h, CUBLAS_OP_CONJG, N, 2, 2, 2, &one, A, F, 2, B, F, 2, &zero, C, F, 2, 1, CF),
         CUBLAS_STATUS_INVALID_VALUE},
        {"A f32, B f16",
         GEMM(h, N, N, 2, 2, 2, &one, A, F, 2, hA, CUDA_R_16F, 2, &zero, C, F, 2, 1, CF),
         CUBLAS_STATUS_NOT_SUPPORTED},
        {"f64 data, 32F compute",
         GEMM(h, N, N, 2, 2, 2, &one, A, CUDA_R_64F, 2, B, CUDA_R_64F, 2, &zero, C, CUDA_R_64F, 2,
              1, CF),
         CUBLAS_STATUS_NOT_SUPPORTED},
        {"f32 data, 64F compute",
         GEMM(h, N, N, 2, 2, 2, &d1, A, F, 2, B, F, 2, &d1, C, F, 2, 1, CUBLAS_COMPUTE_64F),
         CUBLAS_STATUS_NOT_SUPPORTED},
        {"f16 data, TF32 compute",
         GEMM(h, N, N, 2, 2, 2, &one, hA, CUDA_R_16F, 2, hA, CUDA_R_16F, 2, &zero, C, CUDA_R_16F, 2,
              1, CUBLAS_COMPUTE_32F_FAST_TF32),
         CUBLAS_STATUS_NOT_SUPPORTED},
        {"f16 in, bf16 out",
         GEMM(h, N, N, 2, 2, 2, &one, hA, CUDA_R_16F, 2, hA, CUDA_R_16F, 2, &zero, C, CUDA_R_16BF,
              2, 1, CF),
         CUBLAS_STATUS_NOT_SUPPORTED},
        {"32I compute",
         GEMM(h, N, N, 2, 2, 2, &one, A, CUDA_R_8I, 2, B, CUDA_R_8I, 2, &zero, C, CUDA_R_32I, 2, 1,
              CUBLAS_COMPUTE_32I),
         CUBLAS_STATUS_NOT_SUPPORTED},
        {"NULL alpha", GEMM(h, N, N, 2, 2, 2, NULL, A, F, 2, B, F, 2, &zero, C, F, 2, 1, CF),
         CUBLAS_STATUS_INVALID_VALUE},
        {"m 0 is a no-op",
         GEMM(h, N, N, 0, 2, 2, &one, NULL, F, 1, NULL, F, 2, &zero, NULL, F, 1, 1, CF),
         CUBLAS_STATUS_SUCCESS},
        {"batch 0 is a no-op",
         GEMM(h, N, N, 2, 2, 2, &one, NULL, F, 2, NULL, F, 2, &zero, NULL, F, 2, 0, CF),
         CUBLAS_STATUS_SUCCESS},
        {"bad algo",
         lib.gemm(h, N, N, 2, 2, 2, &one, A, F, 2, 0, B, F, 2, 0, &zero, C, F, 2, 0, 1, CF,
                  (cublasGemmAlgo_t)50),
         CUBLAS_STATUS_INVALID_VALUE},
        {"tensor-op algo",
         lib.gemm(h, N, N, 2, 2, 2, &one, A, F, 2, 0, B, F, 2, 0, &zero, C, F, 2, 0, 1, CF,
                  CUBLAS_GEMM_DEFAULT_TENSOR_OP),
         CUBLAS_STATUS_SUCCESS},
    };
#undef GEMM
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++)
        CHECK(cases[i].got == cases[i].want, "%s: got %s, want %s", cases[i].what,
              lib.status_name(cases[i].got), lib.status_name(cases[i].want));
}

int main(int argc, char **argv)
{
    if (argc < 2) {
        fprintf(stderr, "usage: %s path/to/libcuemu_cublas.so\n", argv[0]);
        return 2;
    }
    test_converters();
    if (load(argv[1]) == 0) {
        test_handle();
        cublasHandle_t h = NULL;
        CHECK(lib.create(&h) == CUBLAS_STATUS_SUCCESS, "create");
        test_gemm_values(h);
        test_gemm_rounding(h);
        test_engine_layout(h);
        test_negative_strides(h);
        test_gemm_errors(h);
        lib.destroy(h);
    }
    return cuemu_check_finish();
}
