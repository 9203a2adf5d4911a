/* cuda/cuda_logic.h: the C face of the CUDA any/all kernels (cuda_logic.cu), called by the glue
 * in cuda_scan_ops.c.
 * defines: cuda_launch_logic. */
#ifndef DDPL_CUDA_LOGIC_H
#define DDPL_CUDA_LOGIC_H

#include <stdbool.h>

#include "cuda_launch.h"
#include "core/reduce_geom.h"

#ifdef __cplusplus
extern "C" {
#endif

/* out (bool or uint8, one byte each, 0 or 1) <- whether any (want_zero false) element of each
 * output's reduced elements of in (dtype) is non-zero, or (want_zero true) whether all are;
 * g as for the reductions (core/reduce_geom.h). */
int cuda_launch_logic(unsigned char *out, const void *in, int dtype, const ddpl_reduce_geom *g,
                      bool want_zero);

#ifdef __cplusplus
}
#endif
#endif
