/* cuda/cuda_optim_ops.c: the ddpl_kernel glue of the CUDA sgd_step adam_step kernels.
 * defines: cuda_register_optim. */
#include "cuda_registry.h"

void cuda_register_optim(ddpl_kernel *k)
{
    DDPL_UNUSED(k);
}
