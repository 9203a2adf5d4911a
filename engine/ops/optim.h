/* ops/optim.h: fused multi-tensor optimizer updates (what torch.optim's single-tensor loops
 * compute, one pass over each parameter).
 * defines: ddpl_sgd_hyper, ddpl_adam_hyper, ddpl_sgd_step, ddpl_adam_step, and the per-tensor
 *          kernel parameter blocks ddpl_sgd_params, ddpl_adam_params (ops.def SGD_STEP,
 *          ADAM_STEP).
 *
 * The formulas are torch.optim 1.13's _single_tensor_sgd and _single_tensor_adam(w), in the
 * same order of operations, so float32 results agree with PyTorch to rounding. */
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
    bool maximize;
} ddpl_adam_hyper;

/* Kernel parameters of one tensor's SGD update: out[0] param, out[1] momentum buffer (NULL
 * when momentum is 0); in[0] grad. All contiguous, one dtype, one device. */
typedef struct ddpl_sgd_params {
    ddpl_sgd_hyper h;
    bool init_buf; /* first step: buf <- d_p instead of buf*momentum + (1-dampening)*d_p */
} ddpl_sgd_params;

/* Kernel parameters of one tensor's Adam/AdamW update: out[0] param, out[1] exp_avg,
 * out[2] exp_avg_sq; in[0] grad. Bias corrections are computed in double by the op, as
 * PyTorch computes them with Python floats. */
typedef struct ddpl_adam_params {
    ddpl_adam_hyper h;
    double step_size; /* lr / (1 - beta1^step) */
    double bc2_sqrt;  /* sqrt(1 - beta2^step) */
    double decay;     /* 1 - lr*weight_decay (decoupled only) */
} ddpl_adam_params;

/* One SGD step over n parameters. grads[i] must match params[i] (shape, dtype, device);
 * bufs[i] is the momentum buffer (ignored when momentum is 0); init[i] says that bufs[i] is
 * new (uninitialised) and takes the first d_p. Runs without autograd; bumps the versions of
 * every tensor written. Returns 0, or -1 with an error naming "SGD" and the parameter index
 * (0-based); on a validation error nothing is written. */
int ddpl_sgd_step(int n, ddpl_tensor **params, ddpl_tensor **grads, ddpl_tensor **bufs,
                  const bool *init, const ddpl_sgd_hyper *h);

/* One Adam (or AdamW, h->decoupled) step over n parameters; steps[i] is parameter i's step
 * count after this step (>= 1). name ("Adam" or "AdamW") prefixes errors. */
int ddpl_adam_step(const char *name, int n, ddpl_tensor **params, ddpl_tensor **grads,
                   ddpl_tensor **exp_avgs, ddpl_tensor **exp_avg_sqs, const int64_t *steps,
                   const ddpl_adam_hyper *h);

#endif
