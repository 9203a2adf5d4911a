/* cuda/cuda_reduce_addr.cuh: the addressing of a reduction plan (core/reduce_geom.h) on the
 * device, shared by the reduction kernels (cuda_reduce.cu) and any/all (cuda_logic.cu).
 * defines: kept_offsets, red_offset. */
#ifndef DDPL_CUDA_REDUCE_ADDR_CUH
#define DDPL_CUDA_REDUCE_ADDR_CUH

#include <stdint.h>

#include "core/reduce_geom.h"

/* Input and output element offsets of output o (row-major over the kept dims). */
__device__ __forceinline__ void kept_offsets(const ddpl_reduce_geom &g, int64_t o, int64_t *in_off,
                                             int64_t *out_off)
{
    int64_t a = 0, b = 0;
    for (int d = g.nk - 1; d >= 0; d--) {
        int64_t i = o % g.ksize[d];
        o /= g.ksize[d];
        a += i * g.kin[d];
        b += i * g.kout[d];
    }
    *in_off = a;
    *out_off = b;
}

/* Input offset (from the output's base) of reduced element r, row-major over the reduced dims. */
__device__ __forceinline__ int64_t red_offset(const ddpl_reduce_geom &g, int64_t r)
{
    if (g.nr == 1) return r * g.rin[0];
    int64_t off = 0;
    for (int d = g.nr - 1; d >= 0; d--) {
        off += (r % g.rsize[d]) * g.rin[d];
        r /= g.rsize[d];
    }
    return off;
}

#endif
