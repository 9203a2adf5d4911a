/* cuda/cuda_dynlib.h: cuBLAS, cuDNN and NCCL are opened on first use (dlopen), not linked.
 * defines: cuda_lib, cuda_lib_load, cuda_lib_sym, CUDA_DL.
 *
 * Why: linking them made every process, CPU-only ones included, map and relocate them at start:
 * about 150 MB of resident memory and 0.1 s before the first line of Lua (cuBLASLt alone is
 * half a gigabyte on disk). Only the CUDA runtime is linked; a program that never touches a
 * GPU never loads the rest. */
#ifndef DDPL_CUDA_DYNLIB_H
#define DDPL_CUDA_DYNLIB_H

typedef enum cuda_lib { CUDA_LIB_CUBLAS, CUDA_LIB_CUDNN, CUDA_LIB_NCCL, CUDA_LIB_COUNT } cuda_lib;

#ifdef __cplusplus
extern "C" {
#endif
/* Opens lib once (thread-safe) and checks that every function the engine calls is there: 0, or
 * -1 with an error naming the library, the file tried and why (or that this build has no cuDNN
 * or NCCL: ddpl/config.h's DDPL_HAVE_CUDNN / DDPL_HAVE_NCCL). Call before CUDA_DL(lib, ...). */
int cuda_lib_load(cuda_lib lib);
/* The address of `name` in lib, or NULL (lib not loaded, or no such symbol). */
void *cuda_lib_sym(cuda_lib lib, const char *name);
/* Reports a call through a symbol that could not be resolved; returns 1, which every library
 * status type here reads as an error. Never reached after a successful cuda_lib_load. */
int cuda_lib_missing(void);
#ifdef __cplusplus
}
#endif

/* CUDA_DL(lib, fn)(args...): calls fn of lib, typed as its header declares it; the address is
 * looked up once per call site. */
#define CUDA_DL_NAME_(fn) #fn
#define CUDA_DL_NAME(fn)  CUDA_DL_NAME_(fn) /* after expansion: cublasCreate -> "cublasCreate_v2"  \
                                             */
#define CUDA_DL(lib, fn)                                                                           \
    (*({                                                                                           \
        static void *volatile cuda_dl_addr_;                                                       \
        void *a_ = cuda_dl_addr_;                                                                  \
        if (!a_) cuda_dl_addr_ = a_ = cuda_lib_sym(lib, CUDA_DL_NAME(fn));                         \
        (__typeof__(&fn))(a_ ? a_ : (void *)cuda_lib_missing);                                     \
    }))

#endif
