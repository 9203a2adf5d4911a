/* cuda/cuda_index_ops.c: the ddpl_kernel glue of the CUDA index_select index_add gather scatter_add
 * kernels. defines: cuda_register_index. */
#include "cuda_registry.h"

void cuda_register_index(ddpl_kernel *k)
{
    DDPL_UNUSED(k);
}
