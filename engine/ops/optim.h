/* ops/optim.h: fused multi-tensor optimizer updates (what torch.optim's single-tensor loops
 * compute, one pass over each parameter), and GradScaler's unscale-and-check pass.
 * defines: ddpl_sgd_hyper, ddpl_adam_hyper, ddpl_rmsprop_hyper, ddpl_adagrad_hyper,
 *          ddpl_sgd_step, ddpl_adam_step, ddpl_rmsprop_step, ddpl_adagrad_step,
 *          ddpl_amp_unscale, and the per-tensor kernel parameter blocks ddpl_sgd_params,
 *          ddpl_adam_params, ddpl_rmsprop_params, ddpl_adagrad_params, ddpl_unscale_params
 *          (ops.def SGD_STEP, ADAM_STEP, RMSPROP_STEP, ADAGRAD_STEP, AMP_UNSCALE).
 *
 * The formulas are torch.optim 1.13's _single_tensor_sgd, _adam(w), _rmsprop and _adagrad, in
 * the same order of operations, so float32 results agree with PyTorch to rounding. */
#ifndef DDPL_OPS_OPTIM_H
#define DDPL_OPS_OPTIM_H

#include <stdbool.h>
#include <stdint.h>

#include "core/core.h"

typedef struct ddpl_sgd_hyper {
    double lr, momentum, dampening, weight_decay;
    bool nesterov, maximize;
} ddpl_sgd_hyper;

typedef struct ddpl_adam_hyper {
    double lr, beta1, beta2, eps, weight_decay;
    bool decoupled; /* AdamW: p *= 1 - lr*wd instead of g += wd*p */
    bool amsgrad;   /* normalise by the running maximum of exp_avg_sq (max_exp_avg_sq) */
    bool maximize;
} ddpl_adam_hyper;

typedef struct ddpl_rmsprop_hyper {
    double lr, alpha, eps, weight_decay, momentum;
    bool centered, maximize;
} ddpl_rmsprop_hyper;

typedef struct ddpl_adagrad_hyper {
    double lr, lr_decay, weight_decay, eps;
    bool maximize;
} ddpl_adagrad_hyper;

/* Kernel parameters of one tensor's SGD update: out[0] param, out[1] momentum buffer (NULL
 * when momentum is 0); in[0] grad. All contiguous, one dtype, one device. */
typedef struct ddpl_sgd_params {
    ddpl_sgd_hyper h;
    bool init_buf; /* first step: buf <- d_p instead of buf*momentum + (1-dampening)*d_p */
} ddpl_sgd_params;

/* Kernel parameters of one tensor's Adam/AdamW update: out[0] param, out[1] exp_avg,
 * out[2] exp_avg_sq, out[3] max_exp_avg_sq (amsgrad only, else NULL); in[0] grad. Bias corrections
 * are computed in double by the op, as PyTorch computes them with Python floats. */
typedef struct ddpl_adam_params {
    ddpl_adam_hyper h;
    double step_size; /* lr / (1 - beta1^step) */
    double bc2_sqrt;  /* sqrt(1 - beta2^step) */
    double decay;     /* 1 - lr*weight_decay (decoupled only) */
} ddpl_adam_params;

/* Kernel parameters of one tensor's RMSprop update: out[0] param, out[1] square_avg,
 * out[2] momentum_buffer (NULL when momentum is 0), out[3] grad_avg (NULL unless centered);
 * in[0] grad. */
typedef struct ddpl_rmsprop_params {
    ddpl_rmsprop_hyper h;
} ddpl_rmsprop_params;

/* Kernel parameters of one tensor's Adagrad update: out[0] param, out[1] sum; in[0] grad. */
typedef struct ddpl_adagrad_params {
    ddpl_adagrad_hyper h;
    double clr; /* lr / (1 + (step-1)*lr_decay), in double as PyTorch's Python floats */
} ddpl_adagrad_params;

/* Kernel parameters of GradScaler's unscale pass: out[0] grad (multiplied by inv_scale in
 * place), out[1] found_inf (one float32 element on the grad's device, set to 1 when the grad
 * holds an inf or NaN). inv_scale is float32's 1/scale widened to double, as PyTorch's. */
typedef struct ddpl_unscale_params {
    double inv_scale;
} ddpl_unscale_params;

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
