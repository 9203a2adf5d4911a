/* tools/cuemu/cublas/cublas_standin.h: the cuBLAS stand-in's handle, shared by its files.
 * defines: struct cublasContext, CUBLAS_STANDIN_MAGIC, cublas_standin_handle_ok.
 *
 * The stand-in replaces libcublas in the CUDA emulation build (issue 28): device memory is host
 * memory and every stream runs synchronously on the calling thread, so a call does its work
 * before it returns and the stream it was given only has to be remembered. The public types and
 * prototypes are NVIDIA's own (cublas_v2.h), so the engine calls this library through exactly
 * the declarations it uses against the real one. */
#ifndef CUBLAS_STANDIN_H
#define CUBLAS_STANDIN_H

#include <cublas_v2.h>
#include <stdbool.h>
#include <stddef.h>

/* Marks a live handle: a destroyed or foreign pointer reads as "not initialized", which is what
 * real cuBLAS reports for a handle it did not create (when it notices). */
#define CUBLAS_STANDIN_MAGIC 0x63754253u /* "cuBS" */

/* cublasHandle_t is `struct cublasContext *` in cublas_api.h; the struct is ours to define. */
struct cublasContext {
    unsigned magic;
    cudaStream_t stream;  /* the stream last set; work runs at once, so it is only recorded */
    void *workspace;      /* the user's workspace, NULL: the library's default pool */
    size_t workspace_len; /* bytes */
};

static inline bool cublas_standin_handle_ok(cublasHandle_t h)
{
    return h && h->magic == CUBLAS_STANDIN_MAGIC;
}

#endif
