/* cuda/cuda_registry.h: how the CUDA kernel table is assembled. Each op family lives in its own
 * pair of files (a .cu with kernels and launchers, a .c with the ddpl_kernel glue) and fills its
 * slots of the table once, when the backend starts (cuda_start in cuda_backend.c).
 * defines: cuda_register_* (one per op family), cuda_run_kernel. */
#ifndef DDPL_CUDA_REGISTRY_H
#define DDPL_CUDA_REGISTRY_H

#include "kernel_abi/kernel.h"

/* Each sets its op family's entries of k (indexed by ddpl_op); slots it does not know stay
 * NULL, which dispatch reports as "not supported on cuda". */
void cuda_register_pointwise(ddpl_kernel *k); /* fill copy random arange binary unary where,
                                                 activation backward */
void cuda_register_reduce(ddpl_kernel *k);    /* sum prod amax amin max min topk */
void cuda_register_scan(ddpl_kernel *k);      /* cumsum cummax ... any all */
void cuda_register_index(ddpl_kernel *k);     /* index_select index_add gather scatter_add */
void cuda_register_softmax(ddpl_kernel *k);   /* softmax log_softmax nll_loss (+ backward) */
void cuda_register_nn(ddpl_kernel *k);        /* norms, pools */
void cuda_register_optim(
    ddpl_kernel *k); /* sgd_step adam_step rmsprop_step adagrad_step amp_unscale */
void cuda_register_blas(ddpl_kernel *k);      /* matmul (cuBLAS), conv2d (cuDNN) */
void cuda_register_attention(ddpl_kernel *k); /* fused attention forward/backward */
void cuda_register_sort(ddpl_kernel *k);      /* sort searchsorted bincount histc */
void cuda_register_scatter(ddpl_kernel *k);   /* scatter (cuda_scatter_ops.c) */
void cuda_register_rnn(ddpl_kernel *k);       /* lstm_cell gru_cell (+ backward); called by
                                                 cuda_register_nn */
void cuda_register_ctc(ddpl_kernel *k);       /* ctc_loss (+ backward); called by
                                                 cuda_register_nn */

/* Runs another op's CUDA kernel from inside a kernel (conv2d's bias, the matmul epilogues):
 * through the backend's own table, not dispatch, since the operands' device is current already
 * and a kernel does not call up into ops. Only for ops every CUDA family registration fills. */
int cuda_run_kernel(ddpl_op op, ddpl_tensor **out, ddpl_tensor **in, const void *params);

#endif
