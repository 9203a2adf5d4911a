/* cuda/cuda_optim.h: the C face of the fused optimizer kernels (cuda_optim.cu).
 * defines: cuda_sgd_args, cuda_adam_args, cuda_rmsprop_args, cuda_adagrad_args,
 *          cuda_launch_sgd_step, cuda_launch_adam_step, cuda_launch_rmsprop_step,
 *          cuda_launch_adagrad_step, cuda_launch_amp_unscale.
 *
 * Hyperparameters travel as doubles computed on the host (bias corrections included, as
 * ops/optim.c computes them); the kernels round them to the compute type (float for float32 and
 * the 16-bit types, double for float64) exactly as cpu_optim.c does. Operands are contiguous
 * tensors of n elements of one floating dtype on the current device. Each returns 0, or -1 with
 * ddpl_error set naming `what`. */
#ifndef DDPL_CUDA_OPTIM_H
#define DDPL_CUDA_OPTIM_H

#include <stdbool.h>

#include "cuda_launch.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct cuda_sgd_args {
    double lr, momentum, dampening, weight_decay;
    bool nesterov, maximize, init_buf;
} cuda_sgd_args;

typedef struct cuda_adam_args {
    double beta1, beta2, eps, weight_decay;
    double step_size; /* lr / (1 - beta1^step) */
    double bc2_sqrt;  /* sqrt(1 - beta2^step) */
    double decay;     /* 1 - lr*weight_decay (decoupled only) */
    bool decoupled, maximize;
} cuda_adam_args;

typedef struct cuda_rmsprop_args {
    double lr, alpha, eps, weight_decay, momentum;
    bool maximize;
} cuda_rmsprop_args;

typedef struct cuda_adagrad_args {
    double clr; /* lr / (1 + (step-1)*lr_decay) */
    double weight_decay, eps;
    bool maximize;
} cuda_adagrad_args;

/* param, buf? (momentum buffer, NULL without momentum) <- grad; n elements */
int cuda_launch_sgd_step(void *param, void *buf, const void *grad, int64_t n,
                         const cuda_sgd_args *a, int dtype, const char *what);
/* param, exp_avg, exp_avg_sq, max_exp_avg_sq? (amsgrad, else NULL) <- grad; n elements */
int cuda_launch_adam_step(void *param, void *exp_avg, void *exp_avg_sq, void *max_exp_avg_sq,
                          const void *grad, int64_t n, const cuda_adam_args *a, int dtype,
                          const char *what);
/* param, square_avg, momentum_buffer? (NULL: no momentum), grad_avg? (NULL: not centered)
 * <- grad; n elements */
int cuda_launch_rmsprop_step(void *param, void *square_avg, void *buf, void *grad_avg,
                             const void *grad, int64_t n, const cuda_rmsprop_args *a, int dtype,
                             const char *what);
/* param, sum <- grad; n elements */
int cuda_launch_adagrad_step(void *param, void *sum, const void *grad, int64_t n,
                             const cuda_adagrad_args *a, int dtype, const char *what);
/* grad *= inv_scale in place; *found_inf (one float on the device) = 1 if grad has inf/NaN */
int cuda_launch_amp_unscale(void *grad, float *found_inf, int64_t n, double inv_scale, int dtype,
                            const char *what);

#ifdef __cplusplus
}
#endif
#endif
