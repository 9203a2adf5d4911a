/* ops/optim.c: fused optimizer steps over lists of tensors (validation and dispatch).
 * defines: ddpl_sgd_step, ddpl_adam_step, ddpl_rmsprop_step, ddpl_adagrad_step,
 *          ddpl_amp_unscale.
 *
 * One call per parameter group from Lua: the loop over tensors runs here, and each tensor's
 * update is one kernel (ops.def SGD_STEP, ADAM_STEP, RMSPROP_STEP, ADAGRAD_STEP, AMP_UNSCALE)
 * so a device backend supplies only the per-tensor pass. Everything is validated before the first
 * tensor is written, so a bad list leaves every parameter as it was. */
#include <math.h>

#include "optim.h"
#include "dispatch.h"
#include "op_util.h"

/* The tensor `what` of parameter i must be a contiguous tensor like the parameter. */
static int check_like(const char *name, int i, const char *what, const ddpl_tensor *p,
                      const ddpl_tensor *t)
{
    char a[128], b[128];
    if (!t) return ddpl_error("%s: parameter %d has no %s", name, i, what);
    if (!ddpl_same_shape(p, t))
        return ddpl_error("%s: parameter %d has shape %s but its %s has shape %s", name, i,
                          ddpl_shape_str(p, a, sizeof a), what, ddpl_shape_str(t, b, sizeof b));
    if (p->dtype != t->dtype)
        return ddpl_error("%s: parameter %d is %s but its %s is %s", name, i,
                          ddpl_dtype_name((ddpl_dtype)p->dtype), what,
                          ddpl_dtype_name((ddpl_dtype)t->dtype));
    if (!ddpl_same_device(p->device, t->device))
        return ddpl_error("%s: parameter %d is on %s but its %s is on %s", name, i,
                          ddpl_device_str(p->device, a, sizeof a), what,
                          ddpl_device_str(t->device, b, sizeof b));
    return 0;
}

static int check_param(const char *name, int i, const ddpl_tensor *p)
{
    if (!p) return ddpl_error("%s: parameter %d is missing", name, i);
    if (!ddpl_dtype_is_floating((ddpl_dtype)p->dtype))
        return ddpl_error("%s: parameter %d is %s; only floating-point parameters can be "
                          "optimized",
                          name, i, ddpl_dtype_name((ddpl_dtype)p->dtype));
    return 0;
}

static bool is_contiguous(const ddpl_tensor *t)
{
    int64_t expect = 1;
    for (int d = t->ndim - 1; d >= 0; d--) {
        if (t->sizes[d] != 1 && t->strides[d] != expect) return false;
        expect *= t->sizes[d];
    }
    return true;
}

/* The largest number of tensors one kernel writes (RMSprop: param, square_avg, momentum_buffer,
 * grad_avg; Adam with amsgrad: param, exp_avg, exp_avg_sq, max_exp_avg_sq). */
#define MAX_OUTS 4

/* Runs op on contiguous stand-ins of the written tensors (outs[0..nout), NULL entries allowed
 * after the first) and the grad (NULL: the kernel reads none), copying results back into any
 * that were not contiguous. Rare (parameters are normally contiguous), so the copies are
 * simple. */
static int run_contiguous(ddpl_op op, int nout, ddpl_tensor **outs, ddpl_tensor *grad,
                          const void *params)
{
    ddpl_tensor *work[MAX_OUTS] = {NULL, NULL, NULL, NULL};
    ddpl_tensor *g = grad ? ddpl_contiguous(grad) : NULL;
    int rc = (g || !grad) ? 0 : -1;
    for (int k = 0; k < nout && rc == 0; k++) {
        if (!outs[k]) continue;
        work[k] = is_contiguous(outs[k]) ? ddpl_tensor_retain(outs[k]) : ddpl_contiguous(outs[k]);
        if (!work[k]) rc = -1;
    }
    if (rc == 0) rc = ddpl_run_kernel(op, outs[0]->device, work, grad ? &g : NULL, params);
    for (int k = 0; k < nout; k++) {
        if (!outs[k]) continue;
        if (rc == 0 && work[k] != outs[k])
            rc = ddpl_run_kernel(DDPL_OP_COPY, outs[k]->device, &outs[k], &work[k], NULL);
        if (rc == 0) ddpl_storage_bump_version(outs[k]->storage);
        ddpl_tensor_release(work[k]);
    }
    ddpl_tensor_release(g);
    return rc;
}

int ddpl_sgd_step(int n, ddpl_tensor **params, ddpl_tensor **grads, ddpl_tensor **bufs,
                  const bool *init, const ddpl_sgd_hyper *h)
{
    bool momentum = h->momentum != 0;
    for (int i = 0; i < n; i++) {
        if (check_param("SGD", i, params[i]) < 0 ||
            check_like("SGD", i, "gradient", params[i], grads[i]) < 0)
            return -1;
        if (momentum && check_like("SGD", i, "momentum_buffer", params[i], bufs[i]) < 0) return -1;
    }
    bool prev = ddpl_set_grad_enabled(false);
    int rc = 0;
    for (int i = 0; i < n && rc == 0; i++) {
        ddpl_sgd_params kp = {.h = *h, .init_buf = momentum && init[i]};
        ddpl_tensor *outs[2] = {params[i], momentum ? bufs[i] : NULL};
        rc = run_contiguous(DDPL_OP_SGD_STEP, 2, outs, grads[i], &kp);
    }
    ddpl_set_grad_enabled(prev);
    return rc;
}

/* steps[i] must count from 1 */
static int check_step(const char *name, int i, int64_t step)
{
    if (step < 1)
        return ddpl_error("%s: parameter %d has step %lld; steps count from 1", name, i,
                          (long long)step);
    return 0;
}

int ddpl_adam_step(const char *name, int n, ddpl_tensor **params, ddpl_tensor **grads,
                   ddpl_tensor **exp_avgs, ddpl_tensor **exp_avg_sqs, ddpl_tensor **max_exp_avg_sqs,
                   const int64_t *steps, const ddpl_adam_hyper *h)
{
    for (int i = 0; i < n; i++) {
        if (check_param(name, i, params[i]) < 0 ||
            check_like(name, i, "gradient", params[i], grads[i]) < 0 ||
            check_like(name, i, "exp_avg", params[i], exp_avgs[i]) < 0 ||
            check_like(name, i, "exp_avg_sq", params[i], exp_avg_sqs[i]) < 0 ||
            check_step(name, i, steps[i]) < 0)
            return -1;
        if (h->amsgrad && check_like(name, i, "max_exp_avg_sq", params[i],
                                     max_exp_avg_sqs ? max_exp_avg_sqs[i] : NULL) < 0)
            return -1;
    }
    bool prev = ddpl_set_grad_enabled(false);
    int rc = 0;
    for (int i = 0; i < n && rc == 0; i++) {
        /* As torch: Python floats (double) for the bias corrections. */
        double step = (double)steps[i];
        ddpl_adam_params kp = {
            .h = *h,
            .step_size = h->lr / (1.0 - pow(h->beta1, step)),
            .bc2_sqrt = sqrt(1.0 - pow(h->beta2, step)),
            .decay = 1.0 - h->lr * h->weight_decay,
        };
        ddpl_tensor *outs[4] = {params[i], exp_avgs[i], exp_avg_sqs[i],
                                h->amsgrad ? max_exp_avg_sqs[i] : NULL};
        rc = run_contiguous(DDPL_OP_ADAM_STEP, 4, outs, grads[i], &kp);
    }
    ddpl_set_grad_enabled(prev);
    return rc;
}

int ddpl_rmsprop_step(int n, ddpl_tensor **params, ddpl_tensor **grads, ddpl_tensor **square_avgs,
                      ddpl_tensor **momentum_bufs, ddpl_tensor **grad_avgs,
                      const ddpl_rmsprop_hyper *h)
{
    const char *name = "RMSprop";
    bool momentum = h->momentum > 0; /* PyTorch: `if momentum > 0` */
    for (int i = 0; i < n; i++) {
        if (check_param(name, i, params[i]) < 0 ||
            check_like(name, i, "gradient", params[i], grads[i]) < 0 ||
            check_like(name, i, "square_avg", params[i], square_avgs[i]) < 0)
            return -1;
        if (momentum && check_like(name, i, "momentum_buffer", params[i],
                                   momentum_bufs ? momentum_bufs[i] : NULL) < 0)
            return -1;
        if (h->centered &&
            check_like(name, i, "grad_avg", params[i], grad_avgs ? grad_avgs[i] : NULL) < 0)
            return -1;
    }
    bool prev = ddpl_set_grad_enabled(false);
    int rc = 0;
    for (int i = 0; i < n && rc == 0; i++) {
        ddpl_rmsprop_params kp = {.h = *h};
        ddpl_tensor *outs[4] = {params[i], square_avgs[i], momentum ? momentum_bufs[i] : NULL,
                                h->centered ? grad_avgs[i] : NULL};
        rc = run_contiguous(DDPL_OP_RMSPROP_STEP, 4, outs, grads[i], &kp);
    }
    ddpl_set_grad_enabled(prev);
    return rc;
}

int ddpl_adagrad_step(int n, ddpl_tensor **params, ddpl_tensor **grads, ddpl_tensor **sums,
                      const int64_t *steps, const ddpl_adagrad_hyper *h)
{
    const char *name = "Adagrad";
    for (int i = 0; i < n; i++) {
        if (check_param(name, i, params[i]) < 0 ||
            check_like(name, i, "gradient", params[i], grads[i]) < 0 ||
            check_like(name, i, "sum", params[i], sums[i]) < 0 || check_step(name, i, steps[i]) < 0)
            return -1;
    }
    bool prev = ddpl_set_grad_enabled(false);
    int rc = 0;
    for (int i = 0; i < n && rc == 0; i++) {
        /* As torch: clr = lr / (1 + (step - 1) * lr_decay) with Python floats. */
        ddpl_adagrad_params kp = {
            .h = *h,
            .clr = h->lr / (1.0 + ((double)steps[i] - 1.0) * h->lr_decay),
        };
        ddpl_tensor *outs[2] = {params[i], sums[i]};
        rc = run_contiguous(DDPL_OP_ADAGRAD_STEP, 2, outs, grads[i], &kp);
    }
    ddpl_set_grad_enabled(prev);
    return rc;
}

int ddpl_amp_unscale(int n, ddpl_tensor **grads, ddpl_tensor **found_infs, double inv_scale)
{
    const char *name = "GradScaler";
    char a[64], b[64];
    for (int i = 0; i < n; i++) {
        const ddpl_tensor *g = grads[i], *f = found_infs[i];
        if (!g || !f) return ddpl_error("%s: gradient %d or its found_inf is missing", name, i);
        if (!ddpl_dtype_is_floating((ddpl_dtype)g->dtype))
            return ddpl_error("%s: gradient %d is %s; only floating-point gradients can be "
                              "unscaled",
                              name, i, ddpl_dtype_name((ddpl_dtype)g->dtype));
        if (f->dtype != DDPL_FLOAT32 || ddpl_tensor_numel(f) != 1 || !is_contiguous(f))
            return ddpl_error("%s: found_inf %d must be one contiguous float32 element", name, i);
        if (!ddpl_same_device(g->device, f->device))
            return ddpl_error("%s: gradient %d is on %s but its found_inf is on %s", name, i,
                              ddpl_device_str(g->device, a, sizeof a),
                              ddpl_device_str(f->device, b, sizeof b));
    }
    bool prev = ddpl_set_grad_enabled(false);
    int rc = 0;
    ddpl_unscale_params kp = {.inv_scale = inv_scale};
    for (int i = 0; i < n && rc == 0; i++) {
        ddpl_tensor *outs[2] = {grads[i], found_infs[i]};
        rc = run_contiguous(DDPL_OP_AMP_UNSCALE, 2, outs, NULL, &kp);
    }
    ddpl_set_grad_enabled(prev);
    return rc;
}
