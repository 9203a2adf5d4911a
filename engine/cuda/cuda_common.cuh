/* cuda/cuda_common.cuh: device-side helpers every .cu file of the backend shares: the error
 * check, launch geometry, element addressing through cuda_geometry, and typed access by
 * ddpl_dtype. C++ (nvcc) only; the C side sees cuda_launch.h.
 * defines: cuda_check, cuda_blocks, CUDA_THREADS, cuda_offset_of, cuda_load, store_as,
 *          cuda_store, warp_sum, CUDA_DISPATCH_F32_F64, CUDA_DISPATCH_FLOAT. */
#ifndef DDPL_CUDA_COMMON_CUH
#define DDPL_CUDA_COMMON_CUH

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include "cuda_launch.h"

/* 0, or -1 with ddpl_error naming `what` and the CUDA error (which is cleared, so later calls
 * are not blamed for it). */
static inline int cuda_check(cudaError_t e, const char *what)
{
    if (e == cudaSuccess) return 0;
    cudaGetLastError();
    return ddpl_error("%s: CUDA error %s (%s)", what, cudaGetErrorName(e), cudaGetErrorString(e));
}

/* The compute stream of the current device, as the runtime type. */
static inline cudaStream_t cuda_stream(void)
{
    return (cudaStream_t)cuda_current_stream();
}

enum { CUDA_THREADS = 256 };

/* Blocks of CUDA_THREADS covering n elements, capped so grid-stride loops handle the rest. */
static inline unsigned cuda_blocks(int64_t n)
{
    int64_t b = (n + CUDA_THREADS - 1) / CUDA_THREADS;
    return (unsigned)(b < 1 ? 1 : b > 65535 * 32 ? 65535 * 32 : b);
}

/* Element offset of logical (row-major) index i in an operand laid out as g. */
__device__ static inline int64_t cuda_offset_of(const cuda_geometry &g, int64_t i)
{
    int64_t off = 0;
    for (int d = g.ndim - 1; d >= 0; d--) {
        off += (i % g.sizes[d]) * g.strides[d];
        i /= g.sizes[d];
    }
    return off;
}

/* Typed access by ddpl_dtype (as int), computing in double: for generic/strided paths. Hot
 * paths use CUDA_DISPATCH_FLOAT with real types instead. */
__device__ static inline double cuda_load(const void *p, int dt, int64_t off)
{
    switch (dt) {
    case DDPL_FLOAT32:
        return ((const float *)p)[off];
    case DDPL_FLOAT64:
        return ((const double *)p)[off];
    case DDPL_FLOAT16:
        return __half2float(((const __half *)p)[off]);
    case DDPL_BFLOAT16:
        return __bfloat162float(((const __nv_bfloat16 *)p)[off]);
    case DDPL_INT64:
        return (double)((const long long *)p)[off];
    case DDPL_INT32:
        return ((const int *)p)[off];
    case DDPL_INT16:
        return ((const short *)p)[off];
    case DDPL_INT8:
        return ((const signed char *)p)[off];
    default:
        return ((const unsigned char *)p)[off];
    }
}

/* Stores an accumulator into an element of dtype dt (the reductions' output dtype may differ
 * from the input's: integer sums are int64). Integers never go through double, so int64 stays
 * exact. */
template <typename A> __device__ __forceinline__ void store_as(void *p, int dt, int64_t off, A v)
{
    switch (dt) {
    case DDPL_FLOAT32:
        ((float *)p)[off] = (float)v;
        break;
    case DDPL_FLOAT64:
        ((double *)p)[off] = (double)v;
        break;
    case DDPL_FLOAT16:
        ((__half *)p)[off] = __float2half((float)v);
        break;
    case DDPL_BFLOAT16:
        ((__nv_bfloat16 *)p)[off] = __float2bfloat16((float)v);
        break;
    case DDPL_INT64:
        ((long long *)p)[off] = (long long)v;
        break;
    case DDPL_INT32:
        ((int *)p)[off] = (int)(long long)v;
        break;
    case DDPL_INT16:
        ((short *)p)[off] = (short)(long long)v;
        break;
    case DDPL_INT8:
        ((signed char *)p)[off] = (signed char)(long long)v;
        break;
    case DDPL_BOOL:
        ((unsigned char *)p)[off] = v != (A)0;
        break;
    default:
        ((unsigned char *)p)[off] = (unsigned char)(long long)v;
        break;
    }
}

__device__ static inline void cuda_store(void *p, int dt, int64_t off, double v)
{
    store_as<double>(p, dt, off, v);
}

/* Sum over the 32 lanes of a full warp; every lane gets the total (xor butterfly). */
template <typename A> __device__ __forceinline__ A warp_sum(A v)
{
    for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
    return v;
}

/* Runs BODY with scalar_t float or double; any other dtype returns an error naming `what`
 * (kernels that compute in their input's precision: the RNN cells, CTC). */
#define CUDA_DISPATCH_F32_F64(dtype, what, BODY)                                                   \
    switch (dtype) {                                                                               \
    case DDPL_FLOAT32: {                                                                           \
        typedef float scalar_t;                                                                    \
        BODY;                                                                                      \
    } break;                                                                                       \
    case DDPL_FLOAT64: {                                                                           \
        typedef double scalar_t;                                                                   \
        BODY;                                                                                      \
    } break;                                                                                       \
    default:                                                                                       \
        return ddpl_error("%s: expected float32 or float64 on cuda", what);                        \
    }

/* Runs BODY with scalar_t bound to the C++ type of a floating ddpl_dtype (float, double,
 * __half, __nv_bfloat16); other dtypes run ELSE. Compute in float for the 16-bit types. */
#define CUDA_DISPATCH_FLOAT(dt, ELSE, ...)                                                         \
    switch (dt) {                                                                                  \
    case DDPL_FLOAT32: {                                                                           \
        typedef float scalar_t;                                                                    \
        __VA_ARGS__;                                                                               \
    } break;                                                                                       \
    case DDPL_FLOAT64: {                                                                           \
        typedef double scalar_t;                                                                   \
        __VA_ARGS__;                                                                               \
    } break;                                                                                       \
    case DDPL_FLOAT16: {                                                                           \
        typedef __half scalar_t;                                                                   \
        __VA_ARGS__;                                                                               \
    } break;                                                                                       \
    case DDPL_BFLOAT16: {                                                                          \
        typedef __nv_bfloat16 scalar_t;                                                            \
        __VA_ARGS__;                                                                               \
    } break;                                                                                       \
    default:                                                                                       \
        ELSE;                                                                                      \
    }

#endif
