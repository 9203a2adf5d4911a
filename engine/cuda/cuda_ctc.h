/* cuda/cuda_ctc.h: the C face of the CUDA CTC loss kernels (cuda_ctc.cu), called by the glue in
 * cuda_ctc_ops.c.
 * defines: cuda_ctc_shape, cuda_launch_ctc_loss, cuda_launch_ctc_loss_backward. */
#ifndef DDPL_CUDA_CTC_H
#define DDPL_CUDA_CTC_H

#include <stdbool.h>
#include <stdint.h>

#include "cuda_launch.h"

#ifdef __cplusplus
extern "C" {
#endif

/* log_probs (T,N,C) contiguous float32/float64 (dtype), padded targets int64 (N,S) */
typedef struct cuda_ctc_shape {
    int64_t T, N, C, S, blank;
    int dtype;
} cuda_ctc_shape;

/* ops.def CTC_LOSS: nll (N) and log_alpha (N,T,2S+1), float64 */
int cuda_launch_ctc_loss(double *nll, double *alpha, const void *lp, const int64_t *targets,
                         const int64_t *in_len, const int64_t *tgt_len, const cuda_ctc_shape *s);
/* CTC_LOSS_BACKWARD: grad (T,N,C, dtype) <- gout (N) float64, ...; scratch holds
 * N * (T * (2S+1) + C) doubles (beta and the per-class sums of each sample) */
int cuda_launch_ctc_loss_backward(void *grad, const double *gout, const void *lp,
                                  const int64_t *targets, const int64_t *in_len,
                                  const int64_t *tgt_len, const double *nll, const double *alpha,
                                  double *scratch, bool zero_infinity, const cuda_ctc_shape *s);

#ifdef __cplusplus
}
#endif
#endif
