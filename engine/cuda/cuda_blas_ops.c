/* cuda/cuda_blas_ops.c: the ddpl_kernel slots of the CUDA matmul (cuBLAS, cuda_gemm.c) and
 * conv2d (cuDNN, cuda_conv.c).
 * defines: cuda_register_blas.
 *
 * A build whose configure found no cudnn.h (cmake/cuda_libs.cmake) does not compile
 * cuda_conv.c; its conv2d slots then say what is missing rather than "not supported on cuda",
 * which would read as a gap in the backend. */
#include "cuda_blas.h"
#include "cuda_registry.h"
#include "ddpl/config.h"

#if !DDPL_HAVE_CUDNN
static int conv2d_without_cudnn(ddpl_tensor **out, ddpl_tensor **in, const void *params)
{
    DDPL_UNUSED(out);
    DDPL_UNUSED(in);
    DDPL_UNUSED(params);
    return ddpl_error("conv2d on cuda needs cuDNN, and this build of ddplua has none (configure "
                      "found no cudnn.h, or DDPL_CUDNN=OFF): install cuDNN 9 or set CUDNN_ROOT, "
                      "then reconfigure");
}
#endif

void cuda_register_blas(ddpl_kernel *k)
{
    k[DDPL_OP_GEMM] = cuda_gemm;
#if DDPL_HAVE_CUDNN
    k[DDPL_OP_CONV2D] = cuda_conv2d;
    k[DDPL_OP_CONV2D_BACKWARD] = cuda_conv2d_backward;
#else
    k[DDPL_OP_CONV2D] = conv2d_without_cudnn;
    k[DDPL_OP_CONV2D_BACKWARD] = conv2d_without_cudnn;
#endif
}
