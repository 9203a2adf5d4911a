/* cuda/cuda_typed.cuh: typed element helpers shared by the reduction, index and softmax kernels
 * (cuda_reduce.cu, cuda_index.cu, cuda_softmax.cu): accumulator types, exact conversions to and
 * from them, a dispatch over every ddpl dtype, and warp reductions. C++ (nvcc) only.
 * defines: acc_of, to_acc, from_acc, CUDA_DISPATCH_ALL, CUDA_WARP (store_as and warp_sum are
 * in cuda_common.cuh). */
#ifndef DDPL_CUDA_TYPED_CUH
#define DDPL_CUDA_TYPED_CUH

#include "cuda_common.cuh"

enum { CUDA_WARP = 32 };

/* Accumulator of each element type: float for the 16-bit floats (as PyTorch), the type itself
 * for float and double, long long (int64, wrapping) for the integers and bool (stored as one
 * byte, 0 or 1). */
template <typename T> struct acc_of {
    typedef T type;
};
template <> struct acc_of<__half> {
    typedef float type;
};
template <> struct acc_of<__nv_bfloat16> {
    typedef float type;
};
template <> struct acc_of<int> {
    typedef long long type;
};
template <> struct acc_of<unsigned char> {
    typedef long long type;
};
template <> struct acc_of<short> {
    typedef long long type;
};
template <> struct acc_of<signed char> {
    typedef long long type;
};

/* Element -> accumulator: exact for every type (a 16-bit float widens exactly to float). */
template <typename A, typename T> __device__ __forceinline__ A to_acc(T v)
{
    return (A)v;
}
template <> __device__ __forceinline__ float to_acc<float, __half>(__half v)
{
    return __half2float(v);
}
template <> __device__ __forceinline__ float to_acc<float, __nv_bfloat16>(__nv_bfloat16 v)
{
    return __bfloat162float(v);
}

/* Accumulator -> element (round to nearest for the 16-bit floats; exact when the value came
 * from an element of that type, as max/min/topk values do). */
template <typename T, typename A> __device__ __forceinline__ T from_acc(A v)
{
    return (T)v;
}
template <> __device__ __forceinline__ __half from_acc<__half, float>(float v)
{
    return __float2half(v);
}
template <> __device__ __forceinline__ __nv_bfloat16 from_acc<__nv_bfloat16, float>(float v)
{
    return __float2bfloat16(v);
}

/* Runs BODY with scalar_t bound to the C++ type of any ddpl dtype (bool as unsigned char). */
#define CUDA_DISPATCH_ALL(dt, ELSE, ...)                                                           \
    switch (dt) {                                                                                  \
    case DDPL_INT64: {                                                                             \
        typedef long long scalar_t;                                                                \
        __VA_ARGS__;                                                                               \
    } break;                                                                                       \
    case DDPL_INT32: {                                                                             \
        typedef int scalar_t;                                                                      \
        __VA_ARGS__;                                                                               \
    } break;                                                                                       \
    case DDPL_INT16: {                                                                             \
        typedef short scalar_t;                                                                    \
        __VA_ARGS__;                                                                               \
    } break;                                                                                       \
    case DDPL_INT8: {                                                                              \
        typedef signed char scalar_t;                                                              \
        __VA_ARGS__;                                                                               \
    } break;                                                                                       \
    case DDPL_UINT8:                                                                               \
    case DDPL_BOOL: {                                                                              \
        typedef unsigned char scalar_t;                                                            \
        __VA_ARGS__;                                                                               \
    } break;                                                                                       \
    default:                                                                                       \
        CUDA_DISPATCH_FLOAT(dt, ELSE, __VA_ARGS__)                                                 \
    }

#endif
