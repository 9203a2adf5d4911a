/* cuda/cuda_blas.h: the CUDA kernels that call NVIDIA's libraries: GEMM through cuBLAS
 * (cuda_gemm.c) and convolution through cuDNN (cuda_conv.c, built only with cuDNN: see
 * cuda_blas_ops.c). Plain C: cublas_v2.h and cudnn.h are C headers, included only by those
 * two files.
 * defines: CUDA_BLAS_MAX_DEVICES, cuda_gemm, cuda_conv2d, cuda_conv2d_backward (ddpl_kernel
 *          slots). */
#ifndef DDPL_CUDA_BLAS_H
#define DDPL_CUDA_BLAS_H

#include "kernel_abi/kernel.h"

/* The maximum number of devices whose library handles are kept (as cuda_runtime.cu's streams). */
enum { CUDA_BLAS_MAX_DEVICES = 64 };

int cuda_gemm(ddpl_tensor **out, ddpl_tensor **in, const void *params);
int cuda_conv2d(ddpl_tensor **out, ddpl_tensor **in, const void *params);
int cuda_conv2d_backward(ddpl_tensor **out, ddpl_tensor **in, const void *params);

#endif
