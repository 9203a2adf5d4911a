/* cuda/cuda_ctc_ops.c: the ddpl_kernel glue of the CUDA CTC loss kernels (cuda_ctc.cu).
 * defines: cuda_register_ctc.
 *
 * The op (ops/nn_ctc.c) hands these kernels contiguous operands with ops.def's shapes; the
 * backward's per-sample scratch (beta and the per-class sums) is a float64 device tensor from
 * the caching allocator, released right after the launch (stream-ordered). */
#include "cuda_ctc.h"
#include "cuda_registry.h"
#include "kernel_abi/nn_params.h"

static cuda_ctc_shape ctc_shape(const ddpl_tensor *lp, const ddpl_tensor *targets,
                                const ddpl_ctc_params *p)
{
    return (cuda_ctc_shape){.T = lp->sizes[0],
                            .N = lp->sizes[1],
                            .C = lp->sizes[2],
                            .S = targets->sizes[1],
                            .blank = p->blank,
                            .dtype = lp->dtype};
}

/* out[0] nll, out[1] log_alpha; in[0] log_probs, in[1] targets, in[2] input_lengths, in[3]
 * target_lengths */
static int cuda_ctc_loss(ddpl_tensor **out, ddpl_tensor **in, const void *params)
{
    cuda_ctc_shape s = ctc_shape(in[0], in[1], params);
    return cuda_launch_ctc_loss((double *)ddpl_data_ptr(out[0]), (double *)ddpl_data_ptr(out[1]),
                                ddpl_data_ptr(in[0]), (const int64_t *)ddpl_data_ptr(in[1]),
                                (const int64_t *)ddpl_data_ptr(in[2]),
                                (const int64_t *)ddpl_data_ptr(in[3]), &s);
}

/* out[0] d log_probs; in[0] d nll, in[1] log_probs, in[2] targets, in[3] input_lengths, in[4]
 * target_lengths, in[5] nll, in[6] log_alpha */
static int cuda_ctc_loss_backward(ddpl_tensor **out, ddpl_tensor **in, const void *params)
{
    const ddpl_ctc_params *p = params;
    cuda_ctc_shape s = ctc_shape(in[1], in[2], p);
    int64_t n = s.N * (s.T * (2 * s.S + 1) + s.C);
    if (n == 0) n = 1;
    ddpl_tensor *scratch = ddpl_tensor_new(1, &n, DDPL_FLOAT64, in[1]->device);
    if (!scratch) return -1;
    int rc = cuda_launch_ctc_loss_backward(
        ddpl_data_ptr(out[0]), (const double *)ddpl_data_ptr(in[0]), ddpl_data_ptr(in[1]),
        (const int64_t *)ddpl_data_ptr(in[2]), (const int64_t *)ddpl_data_ptr(in[3]),
        (const int64_t *)ddpl_data_ptr(in[4]), (const double *)ddpl_data_ptr(in[5]),
        (const double *)ddpl_data_ptr(in[6]), (double *)ddpl_data_ptr(scratch), p->zero_infinity,
        &s);
    ddpl_tensor_release(scratch);
    return rc;
}

void cuda_register_ctc(ddpl_kernel *k)
{
    k[DDPL_OP_CTC_LOSS] = cuda_ctc_loss;
    k[DDPL_OP_CTC_LOSS_BACKWARD] = cuda_ctc_loss_backward;
}
