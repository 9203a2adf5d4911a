/* cuda/cuda_sort.h: the C face of the CUDA searching and counting kernels (cuda_sort.cu), called
 * by the glue in cuda_sort_ops.c. Sorting itself runs on topk's bitonic kernel
 * (cuda_launch_topk with k = the slice length).
 * defines: cuda_launch_searchsorted, cuda_launch_bincount, cuda_launch_histc. */
#ifndef DDPL_CUDA_SORT_H
#define DDPL_CUDA_SORT_H

#include <stdbool.h>
#include <stdint.h>

#include "cuda_launch.h"

#ifdef __cplusplus
extern "C" {
#endif

/* out[i] (int64, or int32 when out_int32) <- insertion point of v[i] (n values) in seq's row
 * i / per_row (rows of m; per_row 0: one row for all); seq and v contiguous, of dtype dtype. */
int cuda_launch_searchsorted(void *out, bool out_int32, const void *seq, const void *v, int dtype,
                             int64_t m, int64_t n, int64_t per_row, bool right);
/* out (bins elements of out_dtype: int64, float32 or float64; zeroed here) += 1 or w[i] at x[i]
 * (int64, n of them; values outside [0, bins) are skipped). */
int cuda_launch_bincount(void *out, int out_dtype, int64_t bins, const int64_t *x, const void *w,
                         int64_t n);
/* out (bins, dtype float32 or float64; zeroed here) <- histogram of x (n elements of dtype) over
 * [lo, hi]. */
int cuda_launch_histc(void *out, const void *x, int dtype, int64_t n, int64_t bins, double lo,
                      double hi);

#ifdef __cplusplus
}
#endif
#endif
