/* cuda/cuda_dynlib.c: opening cuBLAS, cuDNN and NCCL on first use (see cuda_dynlib.h).
 * defines: cuda_lib_load, cuda_lib_sym, cuda_lib_missing.
 *
 * Each library is looked for first where CMake found it at build time, then by its soname
 * through the dynamic loader's path. The soname is the one of the file CMake found, else the
 * major version of the header compiled against (libcublas.so.12 on CUDA 12, not a guess). The
 * functions each one must provide are listed here, so a wrong or partial library is reported
 * when it is opened, not as a failure deep inside an op (spec/cuda/cuda_dynlib_spec.lua checks that
 * every CUDA_DL call's function is listed). cuDNN and NCCL are optional at
 * configure time (ddpl/config.h): a build without one's header says so when it is loaded. */
#define _GNU_SOURCE
#include "cuda_dynlib.h"

#include <cublas_api.h> /* CUBLAS_VER_MAJOR */
#include <dlfcn.h>
#include <pthread.h>
#include <stdbool.h>
#include <stddef.h>

#include "ddpl/config.h"
#include "ddpl/tensor.h"

#define STR_(x) #x
#define STR(x)  STR_(x)
/* CMake's soname when it found the library file, else the header's major version; NULL when
 * this build has no header for the library (configure found none, or it was turned off) */
#define SONAME_OR(cmake, fallback) (sizeof(cmake) > 1 ? (cmake) : (fallback))
/* cuBLAS is always built: its header is the toolkit's */
#define CUBLAS_SONAME SONAME_OR(DDPL_CUBLAS_SONAME, "libcublas.so." STR(CUBLAS_VER_MAJOR))
#if DDPL_HAVE_CUDNN
#include <cudnn_version.h> /* CUDNN_MAJOR */
#define CUDNN_SONAME SONAME_OR(DDPL_CUDNN_SONAME, "libcudnn.so." STR(CUDNN_MAJOR))
#else
#define CUDNN_SONAME NULL
#endif
#if DDPL_HAVE_NCCL
#include <nccl.h> /* NCCL_MAJOR */
#define NCCL_SONAME SONAME_OR(DDPL_NCCL_SONAME, "libnccl.so." STR(NCCL_MAJOR))
#else
#define NCCL_SONAME NULL
#endif

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
                                         "cudnnFindConvolutionBackwardDataAlgorithm",
                                         "cudnnFindConvolutionBackwardFilterAlgorithm",
                                         "cudnnFindConvolutionForwardAlgorithm",
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
                                        "ncclCommFinalize",
                                        "ncclCommGetAsyncError",
                                        "ncclCommInitRank",
                                        "ncclCommInitRankConfig",
                                        "ncclGetErrorString",
                                        "ncclGetLastError",
                                        "ncclGetUniqueId",
                                        "ncclGetVersion",
                                        "ncclGroupEnd",
                                        "ncclGroupStart",
                                        "ncclRecv",
                                        "ncclReduce",
                                        "ncclReduceScatter",
                                        "ncclSend",
                                        NULL};

/* soname NULL: no code of this build calls the library; `absent` says how to get it. */
static const struct {
    const char *name, *built_path, *soname, *absent;
    const char *const *syms;
} libs[CUDA_LIB_COUNT] = {
    [CUDA_LIB_CUBLAS] = {"cuBLAS", DDPL_CUBLAS_PATH, CUBLAS_SONAME, "", cublas_syms},
    [CUDA_LIB_CUDNN] = {"cuDNN", DDPL_CUDNN_PATH, CUDNN_SONAME, "install cuDNN 9 or set CUDNN_ROOT",
                        cudnn_syms},
    [CUDA_LIB_NCCL] = {"NCCL", DDPL_NCCL_PATH, NCCL_SONAME, "install NCCL 2 or set NCCL_ROOT",
                       nccl_syms},
};

static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
static void *handles[CUDA_LIB_COUNT];

int cuda_lib_load(cuda_lib lib)
{
    pthread_mutex_lock(&mu);
    int rc = 0;
    if (!handles[lib] && !libs[lib].soname) {
        rc = ddpl_error("CUDA: this build of ddplua has no %s (configure found no header for it, "
                        "or it was turned off): %s, then reconfigure",
                        libs[lib].name, libs[lib].absent);
    } else if (!handles[lib]) {
        void *h =
            libs[lib].built_path[0] ? dlopen(libs[lib].built_path, RTLD_NOW | RTLD_LOCAL) : NULL;
        if (!h) h = dlopen(libs[lib].soname, RTLD_NOW | RTLD_LOCAL);
        if (!h) {
            bool built = libs[lib].built_path[0];
            rc = ddpl_error("CUDA: cannot open %s (tried %s%s%s): %s", libs[lib].name,
                            built ? libs[lib].built_path : "", built ? " and " : "",
                            libs[lib].soname, dlerror());
        } else {
            for (const char *const *s = libs[lib].syms; *s && rc == 0; s++)
                if (!dlsym(h, *s))
                    rc = ddpl_error(
                        "CUDA: %s at %s lacks %s (a different version than the one "
                        "ddplua was built with?)",
                        libs[lib].name,
                        libs[lib].built_path[0] ? libs[lib].built_path : libs[lib].soname, *s);
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
