/* core/reduce_geom.h: the plan of a reduction over a set of dims, shared by the CPU and CUDA
 * reduction kernels: kept dims (sizes, input and output strides) and reduced dims (sizes, input
 * strides), size-1 dims dropped, reduced dims ordered outer to inner by stride, and neighbours
 * that step through memory as one dim coalesced. Plain C types only, so CUDA code can take it.
 * defines: ddpl_reduce_geom, ddpl_reduce_geom_init, ddpl_reduce_geom_offsets. */
#ifndef DDPL_REDUCE_GEOM_H
#define DDPL_REDUCE_GEOM_H

#include <stdint.h>

#include "ddpl/tensor.h"

typedef struct ddpl_reduce_geom {
    int nk, nr; /* kept and reduced dims after coalescing (nr >= 1) */
    int64_t ksize[DDPL_MAX_DIMS], kin[DDPL_MAX_DIMS], kout[DDPL_MAX_DIMS]; /* elements */
    int64_t rsize[DDPL_MAX_DIMS], rin[DDPL_MAX_DIMS];
    int64_t nout, nred; /* outputs, and elements reduced into each */
} ddpl_reduce_geom;

#ifdef __cplusplus
extern "C" {
#endif
/* The plan of reducing `in` over the dims in mask (bit d: dim d) into `out` (keepdim shape). A
 * reduction over nothing (or only size-1 dims) is one row of nred (1, or 0 for an empty dim). */
void ddpl_reduce_geom_init(ddpl_reduce_geom *g, const ddpl_tensor *in, const ddpl_tensor *out,
                           uint32_t mask);
#ifdef __cplusplus
}
#endif

/* Input and output element offsets of output i (row-major over the kept dims), for the host
 * kernels (cuda/cuda_reduce_addr.cuh has the device's). */
static inline void ddpl_reduce_geom_offsets(const ddpl_reduce_geom *g, int64_t i, int64_t *in_off,
                                            int64_t *out_off)
{
    int64_t a = 0, b = 0;
    for (int d = g->nk - 1; d >= 0; d--) {
        int64_t k = i % g->ksize[d];
        i /= g->ksize[d];
        a += k * g->kin[d];
        b += k * g->kout[d];
    }
    *in_off = a;
    *out_off = b;
}
#endif
