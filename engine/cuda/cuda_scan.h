/* cuda/cuda_scan.h: the C face of the CUDA scan kernels (cuda_scan.cu), called by the glue in
 * cuda_scan_ops.c.
 * defines: cuda_scan_kind, cuda_scan_geom, cuda_scan_scratch_bytes, cuda_launch_scan. */
#ifndef DDPL_CUDA_SCAN_H
#define DDPL_CUDA_SCAN_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "cuda_launch.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef enum cuda_scan_kind {
    CUDA_SCAN_SUM,
    CUDA_SCAN_PROD,
    CUDA_SCAN_MAX,
    CUDA_SCAN_MIN
} cuda_scan_kind;

/* Slices of x along dim: x's sizes and element strides, the output's (os) and the indices'
 * (is, cummax/cummin) strides, all of x's rank; n = sizes[dim], nslices = numel / n. A 0-dim x
 * is one slice of one element (ndim 1, size 1). */
typedef struct cuda_scan_geom {
    int ndim, dim;
    int64_t sizes[DDPL_MAX_DIMS], xs[DDPL_MAX_DIMS], os[DDPL_MAX_DIMS], is[DDPL_MAX_DIMS];
    int64_t n, nslices;
} cuda_scan_geom;

/* Bytes of device scratch cuda_launch_scan needs for g (0: none): the chunk totals of slices
 * split over several blocks. */
size_t cuda_scan_scratch_bytes(const cuda_scan_geom *g);
/* out (x's dtype) <- the scan of x along g->dim (reverse: from the end; sums only); indices
 * (int64, NULL for sums and products) <- the position of the running extreme; scratch:
 * cuda_scan_scratch_bytes of device memory (NULL when 0), free once this is enqueued. */
int cuda_launch_scan(void *out, int64_t *indices, const void *x, int dtype, const cuda_scan_geom *g,
                     cuda_scan_kind kind, bool reverse, void *scratch);

#ifdef __cplusplus
}
#endif
#endif
