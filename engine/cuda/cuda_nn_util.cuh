/* cuda/cuda_nn_util.cuh: device helpers shared by the norm, pool and optimizer kernels
 * (cuda_norm.cu, cuda_pool.cu, cuda_optim.cu): the accumulation type of each storage type with
 * its conversions, and warp/block sums.
 * defines: nn_num, block_sum, block_sum2, nn_fits_int (warp_sum: cuda_common.cuh).
 *
 * Storage types are float, double, __half, __nv_bfloat16; the 16-bit types and float compute
 * in float, double stays double (nn_num<T>::acc). */
#ifndef DDPL_CUDA_NN_UTIL_CUH
#define DDPL_CUDA_NN_UTIL_CUH

#include "cuda_common.cuh"

template <typename T> struct nn_num;
template <> struct nn_num<float> {
    typedef float acc;
    static __device__ __forceinline__ float load(float v) { return v; }
    static __device__ __forceinline__ float store(float v) { return v; }
};
template <> struct nn_num<double> {
    typedef double acc;
    static __device__ __forceinline__ double load(double v) { return v; }
    static __device__ __forceinline__ double store(double v) { return v; }
};
template <> struct nn_num<__half> {
    typedef float acc;
    static __device__ __forceinline__ float load(__half v) { return __half2float(v); }
    static __device__ __forceinline__ __half store(float v) { return __float2half(v); }
};
template <> struct nn_num<__nv_bfloat16> {
    typedef float acc;
    static __device__ __forceinline__ float load(__nv_bfloat16 v) { return __bfloat162float(v); }
    static __device__ __forceinline__ __nv_bfloat16 store(float v) { return __float2bfloat16(v); }
};

/* Sum over a 1-D block whose size is a multiple of 32 (<= 1024); every thread gets the total.
 * Every thread of the block must call it (it synchronises). The leading barrier lets a kernel
 * call it repeatedly: no warp rewrites `part` while another still reads the previous sums. */
template <typename A> static __device__ A block_sum(A v)
{
    __shared__ A part[32];
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, nwarps = blockDim.x >> 5;
    v = warp_sum(v);
    __syncthreads();
    if (lane == 0) part[warp] = v;
    __syncthreads();
    return warp_sum(lane < nwarps ? part[lane] : A(0));
}

/* Two block sums in one round of barriers; same contract as block_sum. */
template <typename A> static __device__ void block_sum2(A &a, A &b)
{
    __shared__ A part_a[32], part_b[32];
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, nwarps = blockDim.x >> 5;
    a = warp_sum(a);
    b = warp_sum(b);
    __syncthreads();
    if (lane == 0) part_a[warp] = a, part_b[warp] = b;
    __syncthreads();
    a = warp_sum(lane < nwarps ? part_a[lane] : A(0));
    b = warp_sum(lane < nwarps ? part_b[lane] : A(0));
}

/* Whether 32-bit grid-stride index math is safe for n elements: n + the largest grid stride
 * (cuda_blocks caps it below 2^29) must stay below 2^31. */
static inline bool nn_fits_int(int64_t n)
{
    return n < ((int64_t)1 << 30);
}

#endif
