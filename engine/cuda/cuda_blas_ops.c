/* cuda/cuda_blas_ops.c: the ddpl_kernel glue of the CUDA matmul via cuBLAS, conv2d via cuDNN
 * kernels. defines: cuda_register_blas. */
#include "cuda_registry.h"

void cuda_register_blas(ddpl_kernel *k)
{
    DDPL_UNUSED(k);
}
