/* cuda/cuda_scatter.h: the C face of the CUDA SCATTER kernel (cuda_scatter.cu), called by the
 * glue in cuda_scatter_ops.c.
 * defines: cuda_launch_scatter. */
#ifndef DDPL_CUDA_SCATTER_H
#define DDPL_CUDA_SCATTER_H

#include <stdint.h>

#include "cuda_index.h"

#ifdef __cplusplus
extern "C" {
#endif

/* out (b) at p with dim = index[p] (a) <- combine(that, src (c) at p), reduce a
 * ddpl_scatter_mode; geometry over index. A bad position is recorded in flag (from
 * cuda_index_check_push) and skipped. */
int cuda_launch_scatter(void *out, const void *src, int dtype, const int64_t *index,
                        const cuda_index_geom *g, int reduce, void *flag);

#ifdef __cplusplus
}
#endif
#endif
