/* cuda/cuda_kernels.cu: CUDA kernels and runtime wrappers behind cuda_launch.h.
 * defines: cuda_rt_device_count, cuda_rt_malloc, cuda_rt_free, cuda_rt_memcpy,
 *          cuda_rt_synchronize, cuda_launch_fill, cuda_launch_copy, cuda_launch_binary.
 *
 * The first slice of the GPU backend: strided fill, copy with dtype conversion and float
 * arithmetic, enough to run the dispatch path end to end. Elements are addressed through their
 * logical row-major index, so any strides and broadcasts work. */
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include "cuda_launch.h"

static int check(cudaError_t e, const char *what)
{
    if (e == cudaSuccess) return 0;
    cudaGetLastError(); /* clear the error so later calls are not blamed for it */
    return ddpl_error("%s: CUDA error %s (%s)", what, cudaGetErrorName(e), cudaGetErrorString(e));
}

extern "C" int cuda_rt_device_count(void)
{
    int n = 0;
    if (cudaGetDeviceCount(&n) != cudaSuccess) { /* no driver or no GPU: none here */
        cudaGetLastError();
        return 0;
    }
    return n;
}

extern "C" int cuda_rt_malloc(void **ptr, size_t nbytes, int device, const char *what)
{
    if (check(cudaSetDevice(device), what) < 0) return -1;
    return check(cudaMalloc(ptr, nbytes ? nbytes : 1), what);
}

extern "C" void cuda_rt_free(void *ptr, int device)
{
    cudaSetDevice(device);
    cudaFree(ptr);
}

extern "C" int cuda_rt_memcpy(void *dst, const void *src, size_t nbytes, cuda_copy_kind kind,
                              const char *what)
{
    cudaMemcpyKind k = kind == CUDA_H2D   ? cudaMemcpyHostToDevice
                       : kind == CUDA_D2H ? cudaMemcpyDeviceToHost
                                          : cudaMemcpyDeviceToDevice;
    return check(cudaMemcpy(dst, src, nbytes, k), what);
}

extern "C" int cuda_rt_set_device(int device, const char *what)
{
    return check(cudaSetDevice(device), what);
}

extern "C" int cuda_rt_synchronize(const char *what)
{
    return check(cudaDeviceSynchronize(), what);
}

/* Element offset of logical (row-major) index i. */
__device__ static int64_t offset_of(const cuda_geometry &g, int64_t i)
{
    int64_t off = 0;
    for (int d = g.ndim - 1; d >= 0; d--) {
        off += (i % g.sizes[d]) * g.strides[d];
        i /= g.sizes[d];
    }
    return off;
}

__device__ static double load(const void *p, int dt, int64_t off)
{
    switch (dt) {
    case DDPL_FLOAT32: return ((const float *)p)[off];
    case DDPL_FLOAT64: return ((const double *)p)[off];
    case DDPL_FLOAT16: return __half2float(((const __half *)p)[off]);
    case DDPL_BFLOAT16: return __bfloat162float(((const __nv_bfloat16 *)p)[off]);
    case DDPL_INT64: return (double)((const long long *)p)[off];
    case DDPL_INT32: return ((const int *)p)[off];
    default: return ((const unsigned char *)p)[off];
    }
}

__device__ static void store(void *p, int dt, int64_t off, double v)
{
    switch (dt) {
    case DDPL_FLOAT32: ((float *)p)[off] = (float)v; break;
    case DDPL_FLOAT64: ((double *)p)[off] = v; break;
    case DDPL_FLOAT16: ((__half *)p)[off] = __float2half((float)v); break;
    case DDPL_BFLOAT16: ((__nv_bfloat16 *)p)[off] = __float2bfloat16((float)v); break;
    case DDPL_INT64: ((long long *)p)[off] = (long long)v; break;
    case DDPL_INT32: ((int *)p)[off] = (int)v; break;
    case DDPL_BOOL: ((unsigned char *)p)[off] = v != 0; break;
    default: ((unsigned char *)p)[off] = (unsigned char)(long long)v; break;
    }
}

__global__ static void fill_kernel(void *out, int dt, cuda_geometry g, int64_t n, double value)
{
    int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x;
    if (i < n) store(out, dt, offset_of(g, i), value);
}

__global__ static void copy_kernel(void *out, int odt, cuda_geometry og, const void *in, int idt,
                                   cuda_geometry ig, int64_t n)
{
    int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x;
    if (i < n) store(out, odt, offset_of(og, i), load(in, idt, offset_of(ig, i)));
}

__global__ static void binary_kernel(void *out, int dt, cuda_geometry og, const void *a,
                                     cuda_geometry ag, const void *b, cuda_geometry bg, int64_t n,
                                     int kind, double alpha)
{
    int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x;
    if (i >= n) return;
    double x = load(a, dt, offset_of(ag, i)), y = load(b, dt, offset_of(bg, i)), r;
    switch (kind) {
    case CUDA_BIN_ADD: r = x + alpha * y; break;
    case CUDA_BIN_SUB: r = x - alpha * y; break;
    case CUDA_BIN_MUL: r = x * y; break;
    default: r = x / y; break;
    }
    store(out, dt, offset_of(og, i), r);
}

static unsigned blocks_for(int64_t n) { return (unsigned)((n + 255) / 256); }

extern "C" int cuda_launch_fill(void *out, int dtype, const cuda_geometry *g, int64_t n,
                                double value)
{
    fill_kernel<<<blocks_for(n), 256>>>(out, dtype, *g, n, value);
    return check(cudaGetLastError(), "fill");
}

extern "C" int cuda_launch_copy(void *out, int out_dtype, const cuda_geometry *og, const void *in,
                                int in_dtype, const cuda_geometry *ig, int64_t n)
{
    copy_kernel<<<blocks_for(n), 256>>>(out, out_dtype, *og, in, in_dtype, *ig, n);
    return check(cudaGetLastError(), "copy");
}

extern "C" int cuda_launch_binary(void *out, int dtype, const cuda_geometry *og, const void *a,
                                  const cuda_geometry *ag, const void *b, const cuda_geometry *bg,
                                  int64_t n, cuda_binary_kind kind, double alpha)
{
    binary_kernel<<<blocks_for(n), 256>>>(out, dtype, *og, a, *ag, b, *bg, n, (int)kind, alpha);
    return check(cudaGetLastError(), "binary op");
}
