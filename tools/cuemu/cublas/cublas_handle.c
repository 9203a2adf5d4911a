/* tools/cuemu/cublas/cublas_handle.c: the cuBLAS stand-in's handle life cycle and status names.
 * defines: cublasCreate_v2, cublasDestroy_v2, cublasSetStream_v2, cublasSetWorkspace_v2,
 *          cublasGetStatusName.
 *
 * Behaviour follows the cuBLAS documentation where the engine can observe it: a NULL handle is
 * CUBLAS_STATUS_NOT_INITIALIZED; cublasSetStream resets the workspace to the default pool (so the
 * engine must set its workspace again after it, as cuda_gemm.c does); a user workspace must be
 * aligned to 256 bytes (cudaMalloc's alignment) or the call is CUBLAS_STATUS_INVALID_VALUE. The
 * stand-in never touches the workspace: OpenBLAS brings its own scratch. */
#include <stdint.h>
#include <stdlib.h>

#include "cublas_standin.h"

#define WORKSPACE_ALIGN 256 /* bytes; documented for cublasSetWorkspace */

cublasStatus_t cublasCreate_v2(cublasHandle_t *handle)
{
    if (!handle) return CUBLAS_STATUS_INVALID_VALUE;
    struct cublasContext *h = calloc(1, sizeof *h);
    if (!h) return CUBLAS_STATUS_ALLOC_FAILED;
    h->magic = CUBLAS_STANDIN_MAGIC;
    *handle = h;
    return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t cublasDestroy_v2(cublasHandle_t handle)
{
    if (!cublas_standin_handle_ok(handle)) return CUBLAS_STATUS_NOT_INITIALIZED;
    handle->magic = 0; /* a second destroy of the same (freed) block is a use after free that
                          ASan reports, as it should be */
    free(handle);
    return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t cublasSetStream_v2(cublasHandle_t handle, cudaStream_t stream)
{
    if (!cublas_standin_handle_ok(handle)) return CUBLAS_STATUS_NOT_INITIALIZED;
    handle->stream = stream;
    handle->workspace = NULL; /* documented: back to the default workspace pool */
    handle->workspace_len = 0;
    return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t cublasSetWorkspace_v2(cublasHandle_t handle, void *workspace, size_t bytes)
{
    if (!cublas_standin_handle_ok(handle)) return CUBLAS_STATUS_NOT_INITIALIZED;
    if ((uintptr_t)workspace % WORKSPACE_ALIGN != 0) return CUBLAS_STATUS_INVALID_VALUE;
    if (!workspace && bytes > 0) return CUBLAS_STATUS_INVALID_VALUE;
    handle->workspace = workspace;
    handle->workspace_len = bytes;
    return CUBLAS_STATUS_SUCCESS;
}

const char *cublasGetStatusName(cublasStatus_t status)
{
    switch (status) {
    case CUBLAS_STATUS_SUCCESS:
        return "CUBLAS_STATUS_SUCCESS";
    case CUBLAS_STATUS_NOT_INITIALIZED:
        return "CUBLAS_STATUS_NOT_INITIALIZED";
    case CUBLAS_STATUS_ALLOC_FAILED:
        return "CUBLAS_STATUS_ALLOC_FAILED";
    case CUBLAS_STATUS_INVALID_VALUE:
        return "CUBLAS_STATUS_INVALID_VALUE";
    case CUBLAS_STATUS_ARCH_MISMATCH:
        return "CUBLAS_STATUS_ARCH_MISMATCH";
    case CUBLAS_STATUS_MAPPING_ERROR:
        return "CUBLAS_STATUS_MAPPING_ERROR";
    case CUBLAS_STATUS_EXECUTION_FAILED:
        return "CUBLAS_STATUS_EXECUTION_FAILED";
    case CUBLAS_STATUS_INTERNAL_ERROR:
        return "CUBLAS_STATUS_INTERNAL_ERROR";
    case CUBLAS_STATUS_NOT_SUPPORTED:
        return "CUBLAS_STATUS_NOT_SUPPORTED";
    case CUBLAS_STATUS_LICENSE_ERROR:
        return "CUBLAS_STATUS_LICENSE_ERROR";
    }
    return "CUBLAS_STATUS_UNKNOWN"; /* the real library's text for a value it does not know is
                                       not documented; any caller only prints it */
}
