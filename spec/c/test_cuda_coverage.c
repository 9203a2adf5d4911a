/* spec/c/test_cuda_coverage.c: the CUDA backend provides a kernel for every op the CPU backend
 * has (issue 6: "a CUDA entry in the backend table for every op the CPU backend has"). The
 * table is assembled by the op families' registrars, which need no GPU, so this runs in CI on
 * machines without one. A build without the CUDA backend has nothing to check.
 *
 * Exempt: fused fast paths whose op asks ddpl_backend_supports first and composes other ops
 * where a backend lacks them (cross_entropy: log_softmax + nll_loss, engine/ops/nn_loss.c;
 * nonzero: a cumsum and a scatter, engine/ops/masked.c; kthvalue: a sort and a gather,
 * engine/ops/sort.c and reduce_median.c; sum_squares: a mul and a sum, engine/ops/reduce_stats.c;
 * aminmax: amin and amax, engine/ops/reduce_amax.c), so CUDA computes the same thing through
 * kernels it has. */
#include "check.h"
#include "ddpl/config.h"

#if DDPL_HAVE_CUDA
#include "cuda/cuda_registry.h"
#include "ops/dispatch.h" /* ddpl_op_name */
#endif

#if DDPL_HAVE_CUDA
static bool optional_on_cuda(ddpl_op op)
{
    return op == DDPL_OP_CROSS_ENTROPY || op == DDPL_OP_CROSS_ENTROPY_BACKWARD ||
           op == DDPL_OP_NONZERO || op == DDPL_OP_KTHVALUE || op == DDPL_OP_SUM_SQUARES ||
           op == DDPL_OP_AMINMAX;
}
#endif

int main(void)
{
#if DDPL_HAVE_CUDA
    ddpl_kernel k[DDPL_OP_COUNT] = {0};
    void (*const families[])(ddpl_kernel *) = {
        cuda_register_pointwise, cuda_register_reduce, cuda_register_index, cuda_register_softmax,
        cuda_register_nn,        cuda_register_optim,  cuda_register_blas,  cuda_register_attention,
        cuda_register_scan,      cuda_register_sort, /* sort searchsorted bincount histc */
        cuda_register_scatter,
    };
    for (size_t i = 0; i < sizeof families / sizeof *families; i++) families[i](k);
    int missing = 0;
    for (int op = 0; op < DDPL_OP_COUNT; op++)
        if (ddpl_cpu_backend.kernels[op] && !k[op] && !optional_on_cuda((ddpl_op)op)) {
            fprintf(stderr, "  no CUDA kernel for '%s'\n", ddpl_op_name((ddpl_op)op));
            missing++;
        }
    CHECK(missing == 0);
#else
    printf("built without the CUDA backend: nothing to check\n");
#endif
    return check_finish();
}
