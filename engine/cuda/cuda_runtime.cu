/* cuda/cuda_runtime.cu: the CUDA runtime calls of cuda_launch.h (devices, memory, copies,
 * streams).
 * defines: cuda_rt_device_count, cuda_rt_malloc, cuda_rt_free, cuda_rt_memcpy,
 *          cuda_rt_synchronize, cuda_rt_set_device, cuda_current_stream. */
#include "cuda_common.cuh"

#define check cuda_check

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

/* One compute stream per device, created on first use (device index < 64). */
static cudaStream_t compute_streams[64];

extern "C" void *cuda_current_stream(void)
{
    int dev = 0;
    cudaGetDevice(&dev);
    if (dev < 0 || dev >= 64) return NULL;
    if (!compute_streams[dev])
        cudaStreamCreateWithFlags(&compute_streams[dev], cudaStreamNonBlocking);
    return compute_streams[dev];
}
