/* cuda/cuda_random.cu: uniform_ and normal_ on CUDA, drawing exactly the CPU kernel's stream
 * (cpu/cpu_memory.c): element i of a contiguous output uses 32-bit value i (uniform) or values
 * 2i and 2i + 1 (normal) of the Philox stream (seed, offset), value k being word k % 4 of block
 * offset + k / 4. One thread computes one Philox block and writes the 4 (uniform) or 2
 * (normal) elements it covers, so CPU and CUDA tensors are equal for one seed (normal: up to
 * the last-bit differences of double log/cos between glibc and CUDA).
 * defines: cuda_pw_random. */
#include "core/philox.h"
#include "cuda_pointwise.cuh"

template <typename T>
__global__ static void uniform_kernel(T *out, int64_t n, uint64_t seed, uint64_t offset, double a,
                                      double b, int is_f64, int f32_guard)
{
    int64_t nblocks = (n + 3) / 4;
    for (int64_t j = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; j < nblocks;
         j += (int64_t)gridDim.x * blockDim.x) {
        uint32_t u[4];
        ddpl_philox4x32(seed, offset + (uint64_t)j, u);
#pragma unroll
        for (int w = 0; w < 4; w++) {
            int64_t i = 4 * j + w;
            if (i < n)
                out[i] = pw_store<T>::from(ddpl_philox_uniform(u[w], a, b, is_f64, f32_guard));
        }
    }
}

template <typename T>
__global__ static void normal_kernel(T *out, int64_t n, uint64_t seed, uint64_t offset, double a,
                                     double b)
{
    int64_t nblocks = (n + 1) / 2;
    for (int64_t j = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; j < nblocks;
         j += (int64_t)gridDim.x * blockDim.x) {
        uint32_t u[4];
        ddpl_philox4x32(seed, offset + (uint64_t)j, u);
        out[2 * j] = pw_store<T>::from(ddpl_philox_normal(u[0], u[1], a, b));
        if (2 * j + 1 < n) out[2 * j + 1] = pw_store<T>::from(ddpl_philox_normal(u[2], u[3], a, b));
    }
}

extern "C" int cuda_pw_random(int normal, int dtype, void *out, int64_t n, uint64_t seed,
                              uint64_t offset, double a, double b)
{
    const char *what = normal ? "normal_" : "uniform_";
    if (n <= 0) return 0;
    cudaStream_t st = cuda_stream();
    int64_t nblocks = normal ? (n + 1) / 2 : (n + 3) / 4;
    PW_DISPATCH_FLOAT(
        dtype,
        return ddpl_error("%s: expected a floating-point dtype, got %s", what,
                          ddpl_dtype_name((ddpl_dtype)dtype)),
        if (normal) normal_kernel<scalar_t>
        <<<cuda_blocks(nblocks), CUDA_THREADS, 0, st>>>((scalar_t *)out, n, seed, offset, a, b);
        else uniform_kernel<scalar_t><<<cuda_blocks(nblocks), CUDA_THREADS, 0, st>>>(
            (scalar_t *)out, n, seed, offset, a, b, dtype == DDPL_FLOAT64, dtype == DDPL_FLOAT32))
    return cuda_check(cudaGetLastError(), what);
}
