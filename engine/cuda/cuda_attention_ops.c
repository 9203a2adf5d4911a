/* cuda/cuda_attention_ops.c: the ddpl_kernel glue of the CUDA fused scaled dot-product attention
 * kernels. defines: cuda_register_attention. */
#include "cuda_registry.h"

void cuda_register_attention(ddpl_kernel *k)
{
    DDPL_UNUSED(k);
}
