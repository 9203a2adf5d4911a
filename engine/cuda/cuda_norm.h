/* cuda/cuda_norm.h: the C face of the layer_norm and batch_norm kernels (cuda_norm.cu).
 * defines: cuda_launch_layer_norm*, cuda_launch_batch_norm*, cuda_ln_chunks.
 *
 * Operands are contiguous, of one floating dtype (`dtype`, a ddpl_dtype), on the current device;
 * optional ones are NULL. `what` names the op, shapes and device in CUDA errors. Each returns 0,
 * or -1 with ddpl_error set. */
#ifndef DDPL_CUDA_NORM_H
#define DDPL_CUDA_NORM_H

#include <stdbool.h>

#include "cuda_launch.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Row chunks of the layer_norm weight/bias gradient's first pass: each chunk of rows leaves one
 * partial sum per column, so the workspace holds 2 * cuda_ln_chunks(M) * N accumulators (float,
 * or double for float64): dweight partials then dbias partials. Chunks of at least 256 rows, and
 * at most 65535 of them (they are grid.y). */
static inline int64_t cuda_ln_chunk_rows(int64_t M)
{
    int64_t rows = (M + 65534) / 65535;
    return rows < 256 ? 256 : rows;
}
static inline int64_t cuda_ln_chunks(int64_t M)
{
    int64_t rows = cuda_ln_chunk_rows(M);
    return M == 0 ? 1 : (M + rows - 1) / rows;
}

/* y (M,N), mean (M), rstd (M) <- x (M,N), w (N)?, b (N)? */
int cuda_launch_layer_norm(void *y, void *mean, void *rstd, const void *x, const void *w,
                           const void *b, int64_t M, int64_t N, double eps, int dtype,
                           const char *what);
/* dx (M,N) <- g (M,N), x (M,N), w (N)?, mean (M), rstd (M) */
int cuda_launch_layer_norm_backward_dx(void *dx, const void *g, const void *x, const void *w,
                                       const void *mean, const void *rstd, int64_t M, int64_t N,
                                       int dtype, const char *what);
/* dw (N)?, db (N)? <- g (M,N), x (M,N), mean (M), rstd (M); work as cuda_ln_chunks says */
int cuda_launch_layer_norm_backward_params(void *dw, void *db, void *work, const void *g,
                                           const void *x, const void *mean, const void *rstd,
                                           int64_t M, int64_t N, int dtype, const char *what);

/* y (N,C,S), mean (C), invstd (C) <- x (N,C,S), w (C)?, b (C)?; rm, rv (C) are read in eval
 * and updated (when given) in training. */
int cuda_launch_batch_norm(void *y, void *mean, void *invstd, void *rm, void *rv, const void *x,
                           const void *w, const void *b, int64_t N, int64_t C, int64_t S,
                           bool training, double momentum, double eps, int dtype, const char *what);
/* dx (N,C,S)?, dw (C)?, db (C)? <- g (N,C,S), x (N,C,S), w (C)?, mean (C), invstd (C) */
int cuda_launch_batch_norm_backward(void *dx, void *dw, void *db, const void *g, const void *x,
                                    const void *w, const void *mean, const void *invstd, int64_t N,
                                    int64_t C, int64_t S, bool training, int dtype,
                                    const char *what);

#ifdef __cplusplus
}
#endif
#endif
