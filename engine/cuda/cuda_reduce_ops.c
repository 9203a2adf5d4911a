/* cuda/cuda_reduce_ops.c: the ddpl_kernel glue of the CUDA sum prod amax amin max min topk kernels.
 * defines: cuda_register_reduce. */
#include "cuda_registry.h"

void cuda_register_reduce(ddpl_kernel *k)
{
    DDPL_UNUSED(k);
}
