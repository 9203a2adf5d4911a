/* cuda/cuda_rnn.h: the C face of the CUDA fused recurrent cell kernels (cuda_rnn.cu), called by
 * the glue in cuda_rnn_ops.c.
 * defines: cuda_launch_lstm_cell, cuda_launch_lstm_cell_backward, cuda_launch_gru_cell,
 *          cuda_launch_gru_cell_backward. */
#ifndef DDPL_CUDA_RNN_H
#define DDPL_CUDA_RNN_H

#include <stdint.h>

#include "cuda_launch.h"

#ifdef __cplusplus
extern "C" {
#endif

/* ops.def LSTM_CELL: h, c (B,H), act (B,4H) <- input gates, hidden gates (B,4H), c_prev (B,H);
 * all contiguous, float32 or float64 (dtype). */
int cuda_launch_lstm_cell(void *h, void *c, void *act, const void *ig, const void *hg,
                          const void *c_prev, int dtype, int64_t B, int64_t H);
/* LSTM_CELL_BACKWARD: dgates (B,4H), dc_prev (B,H) or NULL <- dh, dc (B,H), act (B,4H),
 * c_prev, c (B,H). */
int cuda_launch_lstm_cell_backward(void *dgates, void *dc_prev, const void *dh, const void *dc,
                                   const void *act, const void *c_prev, const void *c, int dtype,
                                   int64_t B, int64_t H);
/* GRU_CELL: h (B,H), act (B,4H) <- input gates, hidden gates (B,3H), h_prev (B,H). */
int cuda_launch_gru_cell(void *h, void *act, const void *ig, const void *hg, const void *h_prev,
                         int dtype, int64_t B, int64_t H);
/* GRU_CELL_BACKWARD: d input gates, d hidden gates (B,3H), dh_prev (B,H) or NULL <- dh (B,H),
 * act (B,4H), h_prev (B,H). */
int cuda_launch_gru_cell_backward(void *dig, void *dhg, void *dh_prev, const void *dh,
                                  const void *act, const void *h_prev, int dtype, int64_t B,
                                  int64_t H);

#ifdef __cplusplus
}
#endif
#endif
