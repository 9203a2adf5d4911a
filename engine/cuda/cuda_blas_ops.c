/* cuda/cuda_blas_ops.c: the ddpl_kernel slots of the CUDA matmul (cuBLAS, cuda_gemm.c) and
 * conv2d (cuDNN, cuda_conv.c).
 * defines: cuda_register_blas. */
#include "cuda_blas.h"
#include "cuda_registry.h"

void cuda_register_blas(ddpl_kernel *k)
{
    k[DDPL_OP_GEMM] = cuda_gemm;
    k[DDPL_OP_CONV2D] = cuda_conv2d;
    k[DDPL_OP_CONV2D_BACKWARD] = cuda_conv2d_backward;
}
