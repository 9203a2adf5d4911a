/* cuda/cuda_softmax.h: the C face of the CUDA softmax, log_softmax and NLL loss kernels
 * (cuda_softmax.cu), called by the glue in cuda_softmax_ops.c.
 * defines: cuda_launch_softmax, cuda_launch_softmax_backward, cuda_launch_nll_loss,
 *          cuda_launch_nll_loss_backward. */
#ifndef DDPL_CUDA_SOFTMAX_H
#define DDPL_CUDA_SOFTMAX_H

#include <stdbool.h>
#include <stdint.h>

#include "cuda_launch.h"

#ifdef __cplusplus
extern "C" {
#endif

/* y <- softmax (or log_softmax) of contiguous x seen as (outer, D, inner), along D. */
int cuda_launch_softmax(void *y, const void *x, int dtype, int64_t outer, int64_t D, int64_t inner,
                        bool log);
/* dx <- gradient from g (the incoming gradient) and y (the forward output), same layout. */
int cuda_launch_softmax_backward(void *dx, const void *g, const void *y, int dtype, int64_t outer,
                                 int64_t D, int64_t inner, bool log);

/* loss ((N,S) when none, else 0-dim), total (0-dim) <- logp (N,C,S), target (N,S) int64,
 * weight (C) or NULL; all contiguous, of dtype except target. flag (cuda_index_check_push)
 * records the first position in target of a class out of range (not ignore_index); nothing
 * waits for the device (cuda_index_check.h reads the flag later). */
int cuda_launch_nll_loss(void *loss, void *total, const void *logp, const int64_t *target,
                         const void *weight, int dtype, int64_t N, int64_t C, int64_t S, bool none,
                         bool mean, int64_t ignore_index, void *flag);
/* dlogp (N,C,S) <- grad (the loss's shape), target, weight?, total (0-dim); flag as above. */
int cuda_launch_nll_loss_backward(void *dlogp, const void *grad, const int64_t *target,
                                  const void *weight, const void *total, int dtype, int64_t N,
                                  int64_t C, int64_t S, bool none, bool mean, int64_t ignore_index,
                                  void *flag);

#ifdef __cplusplus
}
#endif
#endif
