/* cuda/cuda_softmax_ops.c: the ddpl_kernel glue of the CUDA softmax, log_softmax and NLL loss
 * kernels (cuda_softmax.cu), forward and backward.
 * defines: cuda_register_softmax.
 *
 * The ops hand these kernels contiguous tensors (softmax's x and y, nll's logp as (N,C,S) and
 * target as (N,S)), so the glue only reads sizes. nll_loss and its backward check the targets
 * without waiting for the device: a target out of range is reported at the next
 * synchronisation (cuda_index_check.h). */
#include "cuda_index.h"
#include "cuda_index_check.h"
#include "cuda_registry.h"
#include "cuda_softmax.h"
#include "ddpl/types.h"
#include "kernel_abi/kernel_params.h"
#include "kernel_abi/nn_params.h"

/* (outer, D, inner) of contiguous t around dim */
static void split_dims(const ddpl_tensor *t, int dim, int64_t *outer, int64_t *D, int64_t *inner)
{
    if (t->ndim == 0) {
        *outer = *D = *inner = 1;
        return;
    }
    *outer = ddpl_numel(dim, t->sizes);
    *D = t->sizes[dim];
    *inner = ddpl_numel(t->ndim - dim - 1, t->sizes + dim + 1);
}

static int softmax_forward(ddpl_tensor **out, ddpl_tensor **in, const void *params, bool log)
{
    int64_t outer, D, inner;
    split_dims(in[0], ((const ddpl_dim_params *)params)->dim, &outer, &D, &inner);
    if (ddpl_tensor_numel(in[0]) == 0) return 0;
    return cuda_launch_softmax(ddpl_data_ptr(out[0]), ddpl_data_ptr(in[0]), in[0]->dtype, outer, D,
                               inner, log);
}

static int softmax_backward(ddpl_tensor **out, ddpl_tensor **in, const void *params, bool log)
{
    int64_t outer, D, inner;
    split_dims(in[1], ((const ddpl_dim_params *)params)->dim, &outer, &D, &inner);
    if (ddpl_tensor_numel(in[1]) == 0) return 0;
    return cuda_launch_softmax_backward(ddpl_data_ptr(out[0]), ddpl_data_ptr(in[0]),
                                        ddpl_data_ptr(in[1]), in[1]->dtype, outer, D, inner, log);
}

/* out[0] y <- softmax of in[0] along params->dim; contiguous. */
static int cuda_softmax(ddpl_tensor **out, ddpl_tensor **in, const void *params)
{
    return softmax_forward(out, in, params, false);
}

static int cuda_log_softmax(ddpl_tensor **out, ddpl_tensor **in, const void *params)
{
    return softmax_forward(out, in, params, true);
}

/* out[0] dx; in[0] grad, in[1] y (the forward output); contiguous. */
static int cuda_softmax_backward(ddpl_tensor **out, ddpl_tensor **in, const void *params)
{
    return softmax_backward(out, in, params, false);
}

static int cuda_log_softmax_backward(ddpl_tensor **out, ddpl_tensor **in, const void *params)
{
    return softmax_backward(out, in, params, true);
}

/* The message of cpu_loss.c, naming the first bad target (read back from the device). */
static int target_report(const cuda_index_pending *p, int64_t pos)
{
    int64_t t = 0;
    if (cuda_read_i64((const int64_t *)ddpl_data_ptr(p->index) + pos, &t, p->op) < 0) return -1;
    return ddpl_error("nll_loss: target %lld is out of bounds for %lld classes (valid: 0 to %lld, "
                      "or ignore_index %lld) on cuda",
                      (long long)t, (long long)p->bound, (long long)(p->bound - 1),
                      (long long)p->extra);
}

/* The op's bad-target flag on target's device (NULL with the error; cuda_index_check.h). */
static void *target_flag(const char *op, ddpl_tensor *target, int64_t C, int64_t ignore_index)
{
    cuda_index_pending p = {
        .op = op, .index = target, .bound = C, .extra = ignore_index, .report = target_report};
    return cuda_index_check_push(target->device.index, &p);
}

/* out[0] loss ((N,S) for reduction none, else 0-dim), out[1] total_weight (0-dim);
 * in[0] logp (N,C,S), in[1] target (N,S) int64, in[2] weight (C)?; all contiguous. */
static int cuda_nll_loss(ddpl_tensor **out, ddpl_tensor **in, const void *params)
{
    const ddpl_nll_params *p = params;
    const ddpl_tensor *logp = in[0];
    int64_t N = logp->sizes[0], C = logp->sizes[1], S = logp->sizes[2];
    void *flag = target_flag("nll_loss", in[1], C, p->ignore_index);
    if (!flag) return -1;
    return cuda_launch_nll_loss(ddpl_data_ptr(out[0]), ddpl_data_ptr(out[1]), ddpl_data_ptr(logp),
                                (const int64_t *)ddpl_data_ptr(in[1]),
                                in[2] ? ddpl_data_ptr(in[2]) : NULL, logp->dtype, N, C, S,
                                p->reduction == DDPL_REDUCTION_NONE,
                                p->reduction == DDPL_REDUCTION_MEAN, p->ignore_index, flag);
}

/* out[0] dlogp (N,C,S); in[0] grad (the loss's shape), in[1] target, in[2] weight?,
 * in[3] total_weight (0-dim). */
static int cuda_nll_loss_backward(ddpl_tensor **out, ddpl_tensor **in, const void *params)
{
    const ddpl_nll_params *p = params;
    ddpl_tensor *dlogp = out[0];
    int64_t N = dlogp->sizes[0], C = dlogp->sizes[1], S = dlogp->sizes[2];
    void *flag = target_flag("nll_loss_backward", in[1], C, p->ignore_index);
    if (!flag) return -1;
    return cuda_launch_nll_loss_backward(
        ddpl_data_ptr(dlogp), ddpl_data_ptr(in[0]), (const int64_t *)ddpl_data_ptr(in[1]),
        in[2] ? ddpl_data_ptr(in[2]) : NULL, ddpl_data_ptr(in[3]), dlogp->dtype, N, C, S,
        p->reduction == DDPL_REDUCTION_NONE, p->reduction == DDPL_REDUCTION_MEAN, p->ignore_index,
        flag);
}

void cuda_register_softmax(ddpl_kernel *k)
{
    k[DDPL_OP_SOFTMAX] = cuda_softmax;
    k[DDPL_OP_LOG_SOFTMAX] = cuda_log_softmax;
    k[DDPL_OP_SOFTMAX_BACKWARD] = cuda_softmax_backward;
    k[DDPL_OP_LOG_SOFTMAX_BACKWARD] = cuda_log_softmax_backward;
    k[DDPL_OP_NLL_LOSS] = cuda_nll_loss;
    k[DDPL_OP_NLL_LOSS_BACKWARD] = cuda_nll_loss_backward;
}
