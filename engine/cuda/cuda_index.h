/* cuda/cuda_index.h: the C face of the CUDA index kernels (cuda_index.cu) and of the raw calls
 * of the deferred bad-index checks they share with the NLL loss (cuda_softmax.cu).
 * defines: cuda_index_geom, cuda_index_check_raw_calls, cuda_read_i64,
 *          cuda_launch_index_select, cuda_launch_index_add, cuda_launch_gather,
 *          cuda_launch_scatter_add.
 *
 * A kernel that meets an index out of range skips that element and records its position in the
 * op's flag (8 bytes of device memory from cuda_index_check_push, already reset in stream
 * order); nothing here waits for the device: cuda_index_check.h reads the flags later. */
#ifndef DDPL_CUDA_INDEX_H
#define DDPL_CUDA_INDEX_H

#include <stdint.h>

#include "cuda_launch.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Iteration over `sizes` (row-major, n elements) with the element strides of up to three
 * operands: which operand is which is stated per launcher. Indices must lie in [0, bound). */
typedef struct cuda_index_geom {
    int ndim, dim;
    int64_t sizes[DDPL_MAX_DIMS];
    int64_t a[DDPL_MAX_DIMS], b[DDPL_MAX_DIMS], c[DDPL_MAX_DIMS];
    int64_t n, bound;
} cuda_index_geom;

/* The device calls of cuda_index_check.c. */
extern const struct cuda_index_check_raw cuda_index_check_raw_calls;
/* *v <- the int64 at device address p (for naming a bad index in an error message); waits. */
int cuda_read_i64(const void *p, int64_t *v, const char *what);

/* Every launcher takes the op's flag and records there the first bad position in index
 * (row-major); the output's elements at bad positions are not written. */
/* out (a) <- x (b) along dim at index[i * istride] (1-D, n_index values); geometry over out. */
int cuda_launch_index_select(void *out, const void *x, int dtype, const int64_t *index,
                             int64_t istride, int64_t n_index, const cuda_index_geom *g,
                             void *flag);
/* out (a) along dim at index[i] += src (b); geometry over src. */
int cuda_launch_index_add(void *out, const void *src, int dtype, const int64_t *index,
                          int64_t istride, int64_t n_index, const cuda_index_geom *g, void *flag);
/* out (c) <- x (b) at p with dim = index[p] (a); geometry over index. */
int cuda_launch_gather(void *out, const void *x, int dtype, const int64_t *index,
                       const cuda_index_geom *g, void *flag);
/* out (b) at p with dim = index[p] (a) += src (c) at p; geometry over index. */
int cuda_launch_scatter_add(void *out, const void *src, int dtype, const int64_t *index,
                            const cuda_index_geom *g, void *flag);

#ifdef __cplusplus
}
#endif
#endif
