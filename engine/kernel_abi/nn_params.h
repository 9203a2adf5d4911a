/* kernel_abi/nn_params.h: parameter blocks of the neural-network kernels (ops.def, CONV2D onwards).
 * defines: ddpl_conv_params, ddpl_pool_params, ddpl_batch_norm_params, ddpl_layer_norm_params,
 *          ddpl_nll_params.
 *
 * The ops hand these kernels contiguous tensors reshaped to the canonical layouts noted in
 * ops.def (batch_norm's x as (N,C,S), layer_norm's as (M,N), nll's log-probabilities as
 * (N,C,S)), so kernels only loop. Sizes are validated by the ops. */
#ifndef DDPL_NN_PARAMS_H
#define DDPL_NN_PARAMS_H

#include <stdbool.h>
#include <stdint.h>

#include "ddpl/types.h" /* ddpl_reduction */

/* pairs are (h, w) */
typedef struct ddpl_conv_params {
    int stride[2], padding[2], dilation[2];
    int groups;
} ddpl_conv_params;

/* max_pool2d, avg_pool2d (count_include_pad and divisor_override only for avg). With ceil_mode
 * the ops size the output by rounding up (the last window may run past the input's end, never
 * starting past it: PyTorch's rule), and kernels clip every window to the input; windows
 * never start beyond H + ph. divisor_override > 0 replaces avg_pool2d's divisor. */
typedef struct ddpl_pool_params {
    int kernel[2], stride[2], padding[2];
    bool count_include_pad;
    bool ceil_mode;
    int divisor_override; /* 0: none */
} ddpl_pool_params;

typedef struct ddpl_batch_norm_params {
    bool training; /* batch statistics (and running-stat update) vs running statistics */
    double momentum, eps;
} ddpl_batch_norm_params;

typedef struct ddpl_layer_norm_params {
    double eps;
} ddpl_layer_norm_params;

typedef struct ddpl_nll_params {
    int reduction; /* ddpl_reduction */
    int64_t ignore_index;
} ddpl_nll_params;

typedef struct ddpl_attention_params {
    double scale; /* applied to q.k before softmax */
    bool causal;  /* key j hidden from query i when j > i (top-left aligned, as PyTorch) */
} ddpl_attention_params;

/* CTC_LOSS, CTC_LOSS_BACKWARD (ops/nn_ctc.c) */
typedef struct ddpl_ctc_params {
    int64_t blank;      /* the blank's class index, in [0, C) */
    bool zero_infinity; /* backward: 0 for the samples whose loss is +inf */
} ddpl_ctc_params;

#endif
