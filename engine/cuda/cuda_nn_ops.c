/* cuda/cuda_nn_ops.c: the ddpl_kernel glue of the CUDA layer_norm batch_norm pools kernels.
 * defines: cuda_register_nn. */
#include "cuda_registry.h"

void cuda_register_nn(ddpl_kernel *k)
{
    DDPL_UNUSED(k);
}
