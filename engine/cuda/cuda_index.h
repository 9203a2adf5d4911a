/* cuda/cuda_index.h: the C face of the CUDA index kernels (cuda_index.cu) and of the
 * bad-index check they share with the NLL loss (cuda_softmax.cu).
 * defines: cuda_index_geom, cuda_bad_begin, cuda_bad_end, cuda_read_i64,
 *          cuda_launch_index_select, cuda_launch_index_add, cuda_launch_gather,
 *          cuda_launch_scatter_add.
 *
 * A kernel cannot raise an error, so a kernel that meets an index out of range skips that
 * element and records its position (the lowest such position wins: the same one the CPU
 * reports) in an 8-byte device flag; cuda_bad_end reads the flag back at the end of the op.
 * The glue allocates the flag as a one-element int64 device tensor (the caching allocator).
 * Index ops and nll_loss therefore synchronise the host with the compute stream once per
 * call (one 8-byte device-to-host copy); the output of a failing op is left partly written
 * (the ops release it, or, for index_add/scatter_add, it is a fresh zeros tensor). */
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

/* Resets flag (8 bytes of device memory the caller owns, e.g. a one-element int64 tensor) to
 * all ones (nothing bad), on the compute stream. 0, or -1 with ddpl_error. */
int cuda_bad_begin(void *flag, const char *what);
/* Reads the flag back (synchronising with the compute stream): *pos is the lowest bad position
 * recorded, or -1. Returns -1 with ddpl_error on a CUDA failure. */
int cuda_bad_end(const void *flag, int64_t *pos, const char *what);
/* *v <- the int64 at device address p (for naming a bad index in an error message). */
int cuda_read_i64(const void *p, int64_t *v, const char *what);

/* Every launcher takes the flag (see cuda_bad_begin) and sets *bad to the first bad position
 * in index (row-major), or -1. */
/* out (a) <- x (b) along dim at index[i * istride] (1-D, n_index values); geometry over out. */
int cuda_launch_index_select(void *out, const void *x, int dtype, const int64_t *index,
                             int64_t istride, int64_t n_index, const cuda_index_geom *g, void *flag,
                             int64_t *bad);
/* out (a) along dim at index[i] += src (b); geometry over src. */
int cuda_launch_index_add(void *out, const void *src, int dtype, const int64_t *index,
                          int64_t istride, int64_t n_index, const cuda_index_geom *g, void *flag,
                          int64_t *bad);
/* out (c) <- x (b) at p with dim = index[p] (a); geometry over index. */
int cuda_launch_gather(void *out, const void *x, int dtype, const int64_t *index,
                       const cuda_index_geom *g, void *flag, int64_t *bad);
/* out (b) at p with dim = index[p] (a) += src (c) at p; geometry over index. */
int cuda_launch_scatter_add(void *out, const void *src, int dtype, const int64_t *index,
                            const cuda_index_geom *g, void *flag, int64_t *bad);

#ifdef __cplusplus
}
#endif
#endif
