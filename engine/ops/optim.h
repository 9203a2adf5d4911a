/* ops/optim.h: fused multi-tensor optimizer updates (what torch.optim's single-tensor loops
 * compute, one pass over each parameter), and GradScaler's unscale-and-check pass.
 * defines: ddpl_sgd_step, ddpl_adam_step, ddpl_rmsprop_step, ddpl_adagrad_step,
 *          ddpl_amp_unscale. The hyperparameters and the per-tensor kernel parameter blocks
 *          are kernel_abi/optim_params.h's.
 *
 * The formulas are torch.optim 1.13's _single_tensor_sgd, _adam(w), _rmsprop and _adagrad, in
 * the same order of operations, so float32 results agree with PyTorch to rounding. */
#ifndef DDPL_OPS_OPTIM_H
#define DDPL_OPS_OPTIM_H

#include <stdbool.h>
#include <stdint.h>

#include "core/core.h"
#include "kernel_abi/optim_params.h"

/* One SGD step over n parameters. grads[i] must match params[i] (shape, dtype, device);
 * bufs[i] is the momentum buffer (ignored when momentum is 0); init[i] says that bufs[i] is
 * new (uninitialised) and takes the first d_p. Runs without autograd; bumps the versions of
 * every tensor written. Returns 0, or -1 with an error naming "SGD" and the parameter index
 * (0-based); on a validation error nothing is written. */
int ddpl_sgd_step(int n, ddpl_tensor **params, ddpl_tensor **grads, ddpl_tensor **bufs,
                  const bool *init, const ddpl_sgd_hyper *h);

/* One Adam (or AdamW, h->decoupled) step over n parameters; steps[i] is parameter i's step
 * count after this step (>= 1). max_exp_avg_sqs is read only with h->amsgrad. name ("Adam"
 * or "AdamW") prefixes errors. */
int ddpl_adam_step(const char *name, int n, ddpl_tensor **params, ddpl_tensor **grads,
                   ddpl_tensor **exp_avgs, ddpl_tensor **exp_avg_sqs, ddpl_tensor **max_exp_avg_sqs,
                   const int64_t *steps, const ddpl_adam_hyper *h);

/* One RMSprop step over n parameters. momentum_bufs is read only when h->momentum > 0,
 * grad_avgs only when h->centered (either may then be NULL). Errors name "RMSprop". */
int ddpl_rmsprop_step(int n, ddpl_tensor **params, ddpl_tensor **grads, ddpl_tensor **square_avgs,
                      ddpl_tensor **momentum_bufs, ddpl_tensor **grad_avgs,
                      const ddpl_rmsprop_hyper *h);

/* One Adagrad step over n parameters; steps[i] is parameter i's step count after this step
 * (>= 1). Errors name "Adagrad". */
int ddpl_adagrad_step(int n, ddpl_tensor **params, ddpl_tensor **grads, ddpl_tensor **sums,
                      const int64_t *steps, const ddpl_adagrad_hyper *h);

/* GradScaler's torch._amp_foreach_non_finite_check_and_unscale_: each grads[i] *= inv_scale
 * in place (one pass), and found_infs[i] (a one-element float32 tensor on grads[i]'s device;
 * several grads may share one) is set to 1 when grads[i] holds an inf or NaN. Validates every
 * tensor before writing any. Errors name "GradScaler". */
int ddpl_amp_unscale(int n, ddpl_tensor **grads, ddpl_tensor **found_infs, double inv_scale);

#endif
