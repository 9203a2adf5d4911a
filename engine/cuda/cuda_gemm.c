/* cuda/cuda_gemm.c: the GEMM slot on CUDA through cuBLAS (cublasGemmStridedBatchedEx).
 * defines: cuda_gemm.
 *
 * out (B,M,N) = alpha * in0 (B,M,K) @ in1 (B,K,N) + beta * out, any strides; a batch stride of
 * 0 (or a batch of one) broadcasts a matrix. cuBLAS is column-major: a row-major matrix
 * (unit column stride) is its transpose in column-major order with the row stride as leading
 * dimension, so a row-major C is computed as C^T = B^T A^T and a column-major C as C = A B;
 * each operand is read in place with OP_N or OP_T. An operand with no unit-stride dim is first
 * copied to a contiguous tensor by the COPY kernel (and a packed C copied back).
 * Compute: float32 with CUBLAS_COMPUTE_32F (CUBLAS_COMPUTE_32F_FAST_TF32 when the user set
 * float32 matmul precision 'high' or 'medium'), float16/bfloat16 inputs with float32
 * accumulation, float64 with CUBLAS_COMPUTE_64F. One handle per device, on that device's
 * compute stream, with a 32 MiB workspace from the engine's allocator (PyTorch's size on
 * Hopper). */
#include <cublas_v2.h>
#include <cuda_runtime_api.h>
#include <limits.h>
#include <pthread.h>

#include "core/alloc.h"
#include "cuda_blas.h"
#include "cuda_dynlib.h"
#include "cuda_launch.h"
#include "cuda_registry.h"
#include "core/matmul_precision.h"
#include "kernel_abi/gemm_layout.h"
#include "kernel_abi/kernel_params.h"

#define GEMM_WORKSPACE_BYTES ((size_t)32 << 20)

typedef struct {
    cublasHandle_t handle;
    cudaStream_t stream; /* the stream last set on the handle */
    void *workspace;     /* NULL: cuBLAS's own pool */
} gemm_device;

static gemm_device gemm_devices[CUDA_BLAS_MAX_DEVICES];
static pthread_mutex_t gemm_lock = PTHREAD_MUTEX_INITIALIZER;

/* The current device's handle, bound to its compute stream and workspace. cublasSetStream
 * resets the workspace to the default pool, so the workspace is set again after it. */
static int gemm_handle(int dev, cublasHandle_t *out)
{
    if (dev < 0 || dev >= CUDA_BLAS_MAX_DEVICES)
        return ddpl_error("matmul: cuda:%d is beyond the %d devices cuBLAS handles are kept for",
                          dev, CUDA_BLAS_MAX_DEVICES);
    gemm_device *d = &gemm_devices[dev];
    cudaStream_t s = (cudaStream_t)cuda_current_stream();
    if (!s) return -1; /* not the legacy default stream: it is not ordered with ours */
    int rc = 0;
    pthread_mutex_lock(&gemm_lock);
    if (!d->handle && cuda_lib_load(CUDA_LIB_CUBLAS) < 0) {
        rc = -1;
    } else if (!d->handle) {
        cublasStatus_t st = CUDA_DL(CUDA_LIB_CUBLAS, cublasCreate)(&d->handle);
        if (st != CUBLAS_STATUS_SUCCESS) {
            d->handle = NULL;
            rc = ddpl_error("matmul: cublasCreate failed (%s) on cuda:%d",
                            CUDA_DL(CUDA_LIB_CUBLAS, cublasGetStatusName)(st), dev);
        } else {
            /* without it cuBLAS allocates its own pool: slower, but still correct */
            d->workspace = ddpl_device_alloc(GEMM_WORKSPACE_BYTES, (ddpl_device){DDPL_CUDA, dev});
            d->stream = NULL;
        }
    }
    if (rc == 0 && (d->stream != s || !d->stream)) {
        cublasStatus_t st = CUDA_DL(CUDA_LIB_CUBLAS, cublasSetStream)(d->handle, s);
        if (st == CUBLAS_STATUS_SUCCESS && d->workspace)
            st = CUDA_DL(CUDA_LIB_CUBLAS, cublasSetWorkspace)(d->handle, d->workspace,
                                                              GEMM_WORKSPACE_BYTES);
        if (st != CUBLAS_STATUS_SUCCESS)
            rc = ddpl_error("matmul: cuBLAS could not use the compute stream (%s) on cuda:%d",
                            CUDA_DL(CUDA_LIB_CUBLAS, cublasGetStatusName)(st), dev);
        else
            d->stream = s;
    }
    pthread_mutex_unlock(&gemm_lock);
    *out = d->handle;
    return rc;
}

/* ---- operand layouts (as cpu_gemm.c) ---- */
typedef struct {
    ddpl_tensor *t;    /* the tensor cuBLAS reads: the operand, or its contiguous copy */
    ddpl_tensor *copy; /* owned copy, or NULL */
    long long bstride; /* elements between consecutive matrices; 0 broadcasts */
    gemm_layout layout;
    int64_t ld;
} gemm_operand;

/* Describes t (B,rows,cols); packs it into a contiguous copy when cuBLAS cannot read it (only
 * one matrix when the batch is broadcast). With_values false skips copying the values (an
 * output that beta 0 does not read). */
static int operand_init(gemm_operand *o, ddpl_tensor *t, bool with_values)
{
    int64_t B = t->sizes[0], rows = t->sizes[1], cols = t->sizes[2];
    bool broadcast = B == 1 || t->strides[0] == 0;
    o->t = t;
    o->copy = NULL;
    o->bstride = broadcast ? 0 : (long long)t->strides[0];
    o->layout = gemm_layout_of(rows, cols, t->strides[1], t->strides[2], &o->ld);
    if (o->layout != LAYOUT_PACK) return 0;
    int64_t sizes[3] = {broadcast ? 1 : B, rows, cols};
    ddpl_tensor *src =
        broadcast ? ddpl_tensor_alias(t, 3, sizes, t->strides, t->offset) : ddpl_tensor_retain(t);
    o->copy = src ? ddpl_tensor_new(3, sizes, (ddpl_dtype)t->dtype, t->device) : NULL;
    int rc = o->copy ? 0 : -1;
    if (rc == 0 && with_values) rc = cuda_run_kernel(DDPL_OP_COPY, &o->copy, &src, NULL);
    ddpl_tensor_release(src);
    if (rc < 0) return -1;
    o->t = o->copy;
    o->bstride = broadcast ? 0 : (long long)(rows * cols);
    o->layout = LAYOUT_ROW;
    o->ld = cols > 1 ? cols : 1;
    return 0;
}

/* ---- the call ---- */
typedef struct {
    cudaDataType_t type;
    cublasComputeType_t compute;
    bool f64; /* alpha and beta are doubles */
} gemm_types;

static int types_of(ddpl_dtype dt, gemm_types *g)
{
    switch (dt) {
    case DDPL_FLOAT32:
        *g = (gemm_types){CUDA_R_32F,
                          ddpl_allow_tf32() ? CUBLAS_COMPUTE_32F_FAST_TF32 : CUBLAS_COMPUTE_32F,
                          false};
        return 0;
    case DDPL_FLOAT64:
        *g = (gemm_types){CUDA_R_64F, CUBLAS_COMPUTE_64F, true};
        return 0;
    case DDPL_FLOAT16:
        *g = (gemm_types){CUDA_R_16F, CUBLAS_COMPUTE_32F, false};
        return 0;
    case DDPL_BFLOAT16:
        *g = (gemm_types){CUDA_R_16BF, CUBLAS_COMPUTE_32F, false};
        return 0;
    default:
        return ddpl_error("matmul: dtype %s is not supported on cuda (cuBLAS multiplies "
                          "float32, float64, float16 and bfloat16)",
                          ddpl_dtype_name(dt));
    }
}

static int gemm_failed(cublasStatus_t st, const ddpl_tensor *a, const ddpl_tensor *b, int dev)
{
    char sa[128], sb[128];
    return ddpl_error("matmul: cuBLAS failed (%s) for %s @ %s %s on cuda:%d",
                      CUDA_DL(CUDA_LIB_CUBLAS, cublasGetStatusName)(st),
                      ddpl_shape_str(a, sa, sizeof sa), ddpl_shape_str(b, sb, sizeof sb),
                      ddpl_dtype_name((ddpl_dtype)a->dtype), dev);
}

/* K == 0: the product is empty, out = beta * out, one rounding per element as the cpu computes it
 * (cpu_gemm.c); beta 0 gives zeros whatever out held. The product is a multiplication by a
 * one-element tensor broadcast over out (c + (beta-1)*c would turn an inf into NaN). */
static int scale_output(ddpl_tensor *c, double beta)
{
    ddpl_fill_params f = {beta};
    if (beta == 0) return cuda_run_kernel(DDPL_OP_FILL, &c, NULL, &f);
    if (beta == 1) return 0;
    int64_t zeros[DDPL_MAX_DIMS] = {0};
    ddpl_tensor *scalar = ddpl_tensor_new(0, NULL, (ddpl_dtype)c->dtype, c->device);
    ddpl_tensor *b = scalar ? ddpl_tensor_alias(scalar, c->ndim, c->sizes, zeros, 0) : NULL;
    int rc = b ? cuda_run_kernel(DDPL_OP_FILL, &scalar, NULL, &f) : -1;
    ddpl_tensor *ins[2] = {c, b};
    if (rc == 0) rc = cuda_run_kernel(DDPL_OP_MUL, &c, ins, NULL);
    ddpl_tensor_release(b);
    ddpl_tensor_release(scalar);
    return rc;
}

/* out[0] (B,M,N), in[0] (B,M,K), in[1] (B,K,N); params ddpl_gemm_params. */
int cuda_gemm(ddpl_tensor **out, ddpl_tensor **in, const void *params)
{
    const ddpl_gemm_params *p = params;
    ddpl_tensor *c = out[0], *a = in[0], *b = in[1];
    int64_t batches = c->sizes[0], M = c->sizes[1], N = c->sizes[2], K = a->sizes[2];
    gemm_types ty = {CUDA_R_32F, CUBLAS_COMPUTE_32F, false};
    if (types_of((ddpl_dtype)c->dtype, &ty) < 0) return -1;
    if (batches == 0 || M == 0 || N == 0) return 0;
    if (K == 0) return scale_output(c, p->beta);
    if (M > INT_MAX || N > INT_MAX || K > INT_MAX || batches > INT_MAX)
        return ddpl_error("matmul: sizes (%lld,%lld,%lld) x %lld batches exceed cuBLAS's limit "
                          "of 2^31-1",
                          (long long)M, (long long)N, (long long)K, (long long)batches);
    int dev = 0;
    cudaGetDevice(&dev);
    cublasHandle_t h = NULL;
    if (gemm_handle(dev, &h) < 0) return -1;

    gemm_operand oa, ob, oc;
    memset(&oa, 0, sizeof oa), memset(&ob, 0, sizeof ob), memset(&oc, 0, sizeof oc);
    int rc = operand_init(&oa, a, true);
    if (rc == 0) rc = operand_init(&ob, b, true);
    if (rc == 0) rc = operand_init(&oc, c, p->beta != 0);
    if (rc == 0 && oc.bstride == 0 && batches > 1)
        rc = ddpl_error("matmul: the output's batch dimension has stride 0 (overlapping "
                        "matrices)");
    if (rc == 0) {
        /* (first, second) in column-major terms: C^T = B^T A^T for a row-major C, C = A B for
         * a column-major one; OP_T where the stored layout is the other one */
        bool c_row = oc.layout == LAYOUT_ROW;
        const gemm_operand *f = c_row ? &ob : &oa, *s = c_row ? &oa : &ob;
        cublasOperation_t opf = (f->layout == LAYOUT_ROW) == c_row ? CUBLAS_OP_N : CUBLAS_OP_T;
        cublasOperation_t ops = (s->layout == LAYOUT_ROW) == c_row ? CUBLAS_OP_N : CUBLAS_OP_T;
        int m = (int)(c_row ? N : M), n = (int)(c_row ? M : N);
        float af = (float)p->alpha, bf = (float)p->beta;
        const void *alpha = ty.f64 ? (const void *)&p->alpha : (const void *)&af;
        const void *beta = ty.f64 ? (const void *)&p->beta : (const void *)&bf;
        cublasStatus_t st = CUDA_DL(CUDA_LIB_CUBLAS, cublasGemmStridedBatchedEx)(
            h, opf, ops, m, n, (int)K, alpha, ddpl_data_ptr(f->t), ty.type, (int)f->ld, f->bstride,
            ddpl_data_ptr(s->t), ty.type, (int)s->ld, s->bstride, beta, ddpl_data_ptr(oc.t),
            ty.type, (int)oc.ld, oc.bstride, (int)batches, ty.compute, CUBLAS_GEMM_DEFAULT);
        if (st != CUBLAS_STATUS_SUCCESS) rc = gemm_failed(st, a, b, dev);
    }
    if (rc == 0 && oc.copy) rc = cuda_run_kernel(DDPL_OP_COPY, &c, &oc.copy, NULL);
    ddpl_tensor_release(oa.copy);
    ddpl_tensor_release(ob.copy);
    ddpl_tensor_release(oc.copy);
    return rc;
}
