/* cuda/cuda_optim_ops.c: the ddpl_kernel glue of the fused CUDA optimizer kernels
 * (cuda_optim.cu): hyperparameters (bias corrections already computed in double by
 * ops/optim.c) and data pointers in, one launch per tensor out.
 * defines: cuda_register_optim. */
#include <stdio.h>

#include "cuda_optim.h"
#include "cuda_registry.h"
#include "kernel_abi/optim_params.h"

/* "op (shape) dtype on cuda:N" for errors; -1 with an error for a dtype with no kernel. */
static int describe(char *buf, size_t n, const char *op, const ddpl_tensor *p)
{
    char s[128], d[32];
    ddpl_shape_str(p, s, sizeof s);
    ddpl_device_str(p->device, d, sizeof d);
    snprintf(buf, n, "%s %s %s on %s", op, s, ddpl_dtype_name((ddpl_dtype)p->dtype), d);
    if (p->dtype != DDPL_FLOAT32 && p->dtype != DDPL_FLOAT64 && p->dtype != DDPL_FLOAT16 &&
        p->dtype != DDPL_BFLOAT16)
        return ddpl_error("%s: dtype %s is not supported on cuda (parameter %s on %s)", op,
                          ddpl_dtype_name((ddpl_dtype)p->dtype), s, d);
    return 0;
}

/* out[0] param, out[1] momentum buffer?; in[0] grad; all contiguous, same shape and dtype */
static int cuda_sgd_step(ddpl_tensor **out, ddpl_tensor **in, const void *params)
{
    const ddpl_sgd_params *p = params;
    char what[256];
    if (describe(what, sizeof what, "sgd_step", out[0]) < 0) return -1;
    cuda_sgd_args a = {.lr = p->h.lr,
                       .momentum = p->h.momentum,
                       .dampening = p->h.dampening,
                       .weight_decay = p->h.weight_decay,
                       .nesterov = p->h.nesterov,
                       .maximize = p->h.maximize,
                       .init_buf = p->init_buf};
    return cuda_launch_sgd_step(ddpl_data_ptr(out[0]), out[1] ? ddpl_data_ptr(out[1]) : NULL,
                                ddpl_data_ptr(in[0]), ddpl_tensor_numel(out[0]), &a, out[0]->dtype,
                                what);
}

/* out[0] param, out[1] exp_avg, out[2] exp_avg_sq, out[3] max_exp_avg_sq?; in[0] grad; all
 * contiguous, same shape and dtype */
static int cuda_adam_step(ddpl_tensor **out, ddpl_tensor **in, const void *params)
{
    const ddpl_adam_params *p = params;
    char what[256];
    if (describe(what, sizeof what, "adam_step", out[0]) < 0) return -1;
    cuda_adam_args a = {.beta1 = p->h.beta1,
                        .beta2 = p->h.beta2,
                        .eps = p->h.eps,
                        .weight_decay = p->h.weight_decay,
                        .step_size = p->step_size,
                        .bc2_sqrt = p->bc2_sqrt,
                        .decay = p->decay,
                        .decoupled = p->h.decoupled,
                        .maximize = p->h.maximize};
    return cuda_launch_adam_step(ddpl_data_ptr(out[0]), ddpl_data_ptr(out[1]),
                                 ddpl_data_ptr(out[2]), out[3] ? ddpl_data_ptr(out[3]) : NULL,
                                 ddpl_data_ptr(in[0]), ddpl_tensor_numel(out[0]), &a, out[0]->dtype,
                                 what);
}

/* out[0] param, out[1] square_avg, out[2] momentum_buffer?, out[3] grad_avg?; in[0] grad */
static int cuda_rmsprop_step(ddpl_tensor **out, ddpl_tensor **in, const void *params)
{
    const ddpl_rmsprop_params *p = params;
    char what[256];
    if (describe(what, sizeof what, "rmsprop_step", out[0]) < 0) return -1;
    cuda_rmsprop_args a = {.lr = p->h.lr,
                           .alpha = p->h.alpha,
                           .eps = p->h.eps,
                           .weight_decay = p->h.weight_decay,
                           .momentum = p->h.momentum,
                           .maximize = p->h.maximize};
    return cuda_launch_rmsprop_step(ddpl_data_ptr(out[0]), ddpl_data_ptr(out[1]),
                                    out[2] ? ddpl_data_ptr(out[2]) : NULL,
                                    out[3] ? ddpl_data_ptr(out[3]) : NULL, ddpl_data_ptr(in[0]),
                                    ddpl_tensor_numel(out[0]), &a, out[0]->dtype, what);
}

/* out[0] param, out[1] sum; in[0] grad */
static int cuda_adagrad_step(ddpl_tensor **out, ddpl_tensor **in, const void *params)
{
    const ddpl_adagrad_params *p = params;
    char what[256];
    if (describe(what, sizeof what, "adagrad_step", out[0]) < 0) return -1;
    cuda_adagrad_args a = {.clr = p->clr,
                           .weight_decay = p->h.weight_decay,
                           .eps = p->h.eps,
                           .maximize = p->h.maximize};
    return cuda_launch_adagrad_step(ddpl_data_ptr(out[0]), ddpl_data_ptr(out[1]),
                                    ddpl_data_ptr(in[0]), ddpl_tensor_numel(out[0]), &a,
                                    out[0]->dtype, what);
}

/* out[0] grad (in place), out[1] found_inf (one float32 on the grad's device) */
static int cuda_amp_unscale(ddpl_tensor **out, ddpl_tensor **in, const void *params)
{
    (void)in;
    const ddpl_unscale_params *p = params;
    char what[256];
    if (describe(what, sizeof what, "amp_unscale", out[0]) < 0) return -1;
    return cuda_launch_amp_unscale(ddpl_data_ptr(out[0]), (float *)ddpl_data_ptr(out[1]),
                                   ddpl_tensor_numel(out[0]), p->inv_scale, out[0]->dtype, what);
}

void cuda_register_optim(ddpl_kernel *k)
{
    k[DDPL_OP_SGD_STEP] = cuda_sgd_step;
    k[DDPL_OP_ADAM_STEP] = cuda_adam_step;
    k[DDPL_OP_RMSPROP_STEP] = cuda_rmsprop_step;
    k[DDPL_OP_ADAGRAD_STEP] = cuda_adagrad_step;
    k[DDPL_OP_AMP_UNSCALE] = cuda_amp_unscale;
}
