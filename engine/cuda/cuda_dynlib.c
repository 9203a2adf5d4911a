/* cuda/cuda_dynlib.c: opening cuBLAS, cuDNN and NCCL on first use (see cuda_dynlib.h).
 * defines: cuda_lib_load, cuda_lib_sym, cuda_lib_missing.
 *
 * Each library is looked for first where CMake found it at build time, then by its soname
 * through the dynamic loader's path. The functions each one must provide are listed here, so a
 * wrong or partial library is reported when it is opened, not as a failure deep inside an op. */
#define _GNU_SOURCE
#include "cuda_dynlib.h"

#include <dlfcn.h>
#include <pthread.h>
#include <stddef.h>

#include "ddpl/tensor.h"

static const char *const cublas_syms[] = {"cublasCreate_v2",       "cublasGemmStridedBatchedEx",
                                          "cublasGetStatusName",   "cublasSetStream_v2",
                                          "cublasSetWorkspace_v2", NULL};
static const char *const cudnn_syms[] = {"cudnnConvolutionBackwardData",
                                         "cudnnConvolutionBackwardFilter",
                                         "cudnnConvolutionForward",
                                         "cudnnCreate",
                                         "cudnnCreateConvolutionDescriptor",
                                         "cudnnCreateFilterDescriptor",
                                         "cudnnCreateTensorDescriptor",
                                         "cudnnDestroyConvolutionDescriptor",
                                         "cudnnDestroyFilterDescriptor",
                                         "cudnnDestroyTensorDescriptor",
                                         "cudnnGetConvolutionBackwardDataAlgorithm_v7",
                                         "cudnnGetConvolutionBackwardFilterAlgorithm_v7",
                                         "cudnnGetConvolutionForwardAlgorithm_v7",
                                         "cudnnGetErrorString",
                                         "cudnnGetVersion",
                                         "cudnnSetConvolution2dDescriptor",
                                         "cudnnSetConvolutionGroupCount",
                                         "cudnnSetConvolutionMathType",
                                         "cudnnSetFilter4dDescriptor",
                                         "cudnnSetStream",
                                         "cudnnSetTensor4dDescriptor",
                                         NULL};
static const char *const nccl_syms[] = {"ncclAllGather",
                                        "ncclAllReduce",
                                        "ncclBroadcast",
                                        "ncclCommAbort",
                                        "ncclCommDestroy",
                                        "ncclCommGetAsyncError",
                                        "ncclCommInitRank",
                                        "ncclGetErrorString",
                                        "ncclGetLastError",
                                        "ncclGetUniqueId",
                                        "ncclGetVersion",
                                        "ncclGroupEnd",
                                        "ncclGroupStart",
                                        "ncclRecv",
                                        "ncclReduceScatter",
                                        "ncclSend",
                                        NULL};

static const struct {
    const char *name, *built_path, *soname;
    const char *const *syms;
} libs[CUDA_LIB_COUNT] = {
    [CUDA_LIB_CUBLAS] = {"cuBLAS", DDPL_CUBLAS_PATH, "libcublas.so.13", cublas_syms},
    [CUDA_LIB_CUDNN] = {"cuDNN", DDPL_CUDNN_PATH, "libcudnn.so.9", cudnn_syms},
    [CUDA_LIB_NCCL] = {"NCCL", DDPL_NCCL_PATH, "libnccl.so.2", nccl_syms},
};

static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
static void *handles[CUDA_LIB_COUNT];

int cuda_lib_load(cuda_lib lib)
{
    pthread_mutex_lock(&mu);
    int rc = 0;
    if (!handles[lib]) {
        void *h = dlopen(libs[lib].built_path, RTLD_NOW | RTLD_LOCAL);
        if (!h) h = dlopen(libs[lib].soname, RTLD_NOW | RTLD_LOCAL);
        if (!h) {
            rc = ddpl_error("CUDA: cannot open %s (tried %s and %s): %s", libs[lib].name,
                            libs[lib].built_path, libs[lib].soname, dlerror());
        } else {
            for (const char *const *s = libs[lib].syms; *s && rc == 0; s++)
                if (!dlsym(h, *s))
                    rc = ddpl_error("CUDA: %s at %s lacks %s (a different version than the one "
                                    "ddplua was built with?)",
                                    libs[lib].name, libs[lib].built_path, *s);
            if (rc == 0)
                handles[lib] = h;
            else
                dlclose(h);
        }
    }
    pthread_mutex_unlock(&mu);
    return rc;
}

void *cuda_lib_sym(cuda_lib lib, const char *name)
{
    pthread_mutex_lock(&mu);
    void *h = handles[lib];
    pthread_mutex_unlock(&mu);
    return h ? dlsym(h, name) : NULL;
}

int cuda_lib_missing(void)
{
    ddpl_error("CUDA: a library function was called before its library was loaded");
    return 1;
}
