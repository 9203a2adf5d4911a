/* cuda/cuda_pointwise.cu: elementwise kernels: strided fill, copy with dtype conversion,
 * binary arithmetic with broadcasting.
 * defines: cuda_launch_fill, cuda_launch_copy, cuda_launch_binary.
 *
 * Elements are addressed through their logical row-major index, so any strides and broadcasts
 * work; grid-stride loops cover any n. */
#include "cuda_common.cuh"

__global__ static void fill_kernel(void *out, int dt, cuda_geometry g, int64_t n, double value)
{
    for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < n;
         i += (int64_t)gridDim.x * blockDim.x)
        cuda_store(out, dt, cuda_offset_of(g, i), value);
}

__global__ static void copy_kernel(void *out, int odt, cuda_geometry og, const void *in, int idt,
                                   cuda_geometry ig, int64_t n)
{
    for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < n;
         i += (int64_t)gridDim.x * blockDim.x)
        cuda_store(out, odt, cuda_offset_of(og, i), cuda_load(in, idt, cuda_offset_of(ig, i)));
}

__global__ static void binary_kernel(void *out, int dt, cuda_geometry og, const void *a,
                                     cuda_geometry ag, const void *b, cuda_geometry bg, int64_t n,
                                     int kind, double alpha)
{
    for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < n;
         i += (int64_t)gridDim.x * blockDim.x) {
        double x = cuda_load(a, dt, cuda_offset_of(ag, i)),
               y = cuda_load(b, dt, cuda_offset_of(bg, i)), r;
        switch (kind) {
        case CUDA_BIN_ADD:
            r = x + alpha * y;
            break;
        case CUDA_BIN_SUB:
            r = x - alpha * y;
            break;
        case CUDA_BIN_MUL:
            r = x * y;
            break;
        default:
            r = x / y;
            break;
        }
        cuda_store(out, dt, cuda_offset_of(og, i), r);
    }
}

extern "C" int cuda_launch_fill(void *out, int dtype, const cuda_geometry *g, int64_t n,
                                double value)
{
    fill_kernel<<<cuda_blocks(n), CUDA_THREADS, 0, cuda_stream()>>>(out, dtype, *g, n, value);
    return cuda_check(cudaGetLastError(), "fill");
}

extern "C" int cuda_launch_copy(void *out, int out_dtype, const cuda_geometry *og, const void *in,
                                int in_dtype, const cuda_geometry *ig, int64_t n)
{
    copy_kernel<<<cuda_blocks(n), CUDA_THREADS, 0, cuda_stream()>>>(out, out_dtype, *og, in,
                                                                    in_dtype, *ig, n);
    return cuda_check(cudaGetLastError(), "copy");
}

extern "C" int cuda_launch_binary(void *out, int dtype, const cuda_geometry *og, const void *a,
                                  const cuda_geometry *ag, const void *b, const cuda_geometry *bg,
                                  int64_t n, cuda_binary_kind kind, double alpha)
{
    binary_kernel<<<cuda_blocks(n), CUDA_THREADS, 0, cuda_stream()>>>(out, dtype, *og, a, *ag, b,
                                                                      *bg, n, (int)kind, alpha);
    return cuda_check(cudaGetLastError(), "binary op");
}
