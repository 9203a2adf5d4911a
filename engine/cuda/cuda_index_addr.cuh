/* cuda/cuda_index_addr.cuh: the addressing of the kernels that run over an index tensor (gather,
 * scatter_add in cuda_index.cu; scatter and its reductions in cuda_scatter.cu).
 * defines: index_offsets. */
#ifndef DDPL_CUDA_INDEX_ADDR_CUH
#define DDPL_CUDA_INDEX_ADDR_CUH

#include <stdint.h>

#include "cuda_index.h"

/* Element e of g (row-major over the index's sizes): *ia its offset in the index (strides a),
 * *ic in the operand laid out as the index (c), *ib in the operand the index's value picks a
 * position of along dim (b), without dim's term, which the caller adds as value * b[dim]. */
__device__ __forceinline__ void index_offsets(const cuda_index_geom &g, int64_t e, int64_t *ia,
                                              int64_t *ib, int64_t *ic)
{
    int64_t a = 0, b = 0, c = 0;
    for (int d = g.ndim - 1; d >= 0; d--) {
        int64_t p = e % g.sizes[d];
        e /= g.sizes[d];
        a += p * g.a[d];
        c += p * g.c[d];
        if (d != g.dim) b += p * g.b[d];
    }
    *ia = a;
    *ib = b;
    *ic = c;
}

#endif
