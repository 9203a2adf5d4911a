/* cuda/cuda_reduce.h: the C face of the CUDA reduction kernels (cuda_reduce.cu), called by the
 * glue in cuda_reduce_ops.c.
 * defines: cuda_reduce_kind, cuda_reduce_geom, cuda_arg_geom, cuda_topk_geom,
 *          cuda_launch_reduce, cuda_launch_arg_reduce, cuda_launch_topk. */
#ifndef DDPL_CUDA_REDUCE_H
#define DDPL_CUDA_REDUCE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "cuda_launch.h"
#include "core/reduce_geom.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef enum cuda_reduce_kind {
    CUDA_RED_SUM,
    CUDA_RED_PROD,
    CUDA_RED_MAX,
    CUDA_RED_MIN,
    CUDA_RED_NANSUM /* a sum reading each NaN element as 0 */
} cuda_reduce_kind;

/* Reducing in[0] over a set of dims: kept dims (which number the outputs, row-major) and
 * reduced dims (ordered outer to inner by stride, innermost last), each group coalesced.
 * Strides in elements. nr >= 1 (a reduction over nothing has one reduced dim of size 1). */
typedef ddpl_reduce_geom cuda_reduce_geom; /* core/reduce_geom.h: the CPU kernels' plan too */

/* max/min along one dim: x's sizes and strides, values' and indices' strides (keepdim shape,
 * so every rank matches); nout = numel / sizes[dim]. */
typedef struct cuda_arg_geom {
    int ndim, dim;
    int64_t sizes[DDPL_MAX_DIMS], xs[DDPL_MAX_DIMS], vs[DDPL_MAX_DIMS], is[DDPL_MAX_DIMS];
    int64_t nout;
} cuda_arg_geom;

/* topk along dim: same layout as cuda_arg_geom (values and indices have k along dim). */
typedef cuda_arg_geom cuda_topk_geom;

/* Bytes of device scratch cuda_launch_reduce needs for g (0: none): partial results when an
 * output's reduced range is split over several blocks. */
size_t cuda_reduce_scratch_bytes(const cuda_reduce_geom *g, int in_dtype);
/* out (dtype out_dtype) <- reduction of in (dtype in_dtype) over g's reduced dims; scratch:
 * cuda_reduce_scratch_bytes of device memory (NULL when 0), free once this is enqueued. */
int cuda_launch_reduce(void *out, int out_dtype, const void *in, int in_dtype,
                       const cuda_reduce_geom *g, cuda_reduce_kind kind, void *scratch);
/* values (x's dtype), indices (int64) <- max (is_max) or min of x along g->dim. */
int cuda_launch_arg_reduce(void *values, int64_t *indices, const void *x, int dtype,
                           const cuda_arg_geom *g, bool is_max);
/* Bytes of device scratch cuda_launch_topk needs (0: the slices sort in shared memory). */
size_t cuda_topk_scratch_bytes(const cuda_topk_geom *g, int dtype);
/* values, indices <- the k first elements of each slice along g->dim, in order; scratch as for
 * cuda_launch_reduce. */
int cuda_launch_topk(void *values, int64_t *indices, const void *x, int dtype,
                     const cuda_topk_geom *g, int64_t k, bool largest, void *scratch);

#ifdef __cplusplus
}
#endif
#endif
