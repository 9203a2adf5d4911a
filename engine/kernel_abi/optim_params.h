/* kernel_abi/optim_params.h: the hyperparameters of the fused optimizer updates and the
 * per-tensor parameter blocks their kernels take (ops.def SGD_STEP, ADAM_STEP, RMSPROP_STEP,
 * ADAGRAD_STEP, AMP_UNSCALE); the steps themselves are ops/optim.h's.
 * defines: ddpl_sgd_hyper, ddpl_adam_hyper, ddpl_rmsprop_hyper, ddpl_adagrad_hyper,
 *          ddpl_sgd_params, ddpl_adam_params, ddpl_rmsprop_params, ddpl_adagrad_params,
 *          ddpl_unscale_params. */
#ifndef DDPL_KERNEL_ABI_OPTIM_PARAMS_H
#define DDPL_KERNEL_ABI_OPTIM_PARAMS_H

#include <stdbool.h>

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

#endif
