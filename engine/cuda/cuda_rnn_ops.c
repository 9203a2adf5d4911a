/* cuda/cuda_rnn_ops.c: the ddpl_kernel glue of the CUDA fused recurrent cell kernels
 * (cuda_rnn.cu): data pointers and the (B,H) sizes in, one launch out.
 * defines: cuda_register_rnn.
 *
 * The ops (ops/nn_rnn_cell.c, nn_rnn_layer.c) hand these kernels contiguous floating point
 * operands with the shapes of ops.def, so the glue only reads sizes. */
#include "cuda_registry.h"
#include "cuda_rnn.h"

/* B and H from a (B,H) state operand */
#define ROWS(t) ((t)->sizes[0])
#define COLS(t) ((t)->sizes[1])
#define PTR(t)  ((t) ? ddpl_data_ptr(t) : NULL)

/* out[0] h, out[1] c, out[2] act; in[0] input gates, in[1] hidden gates, in[2] c_prev */
static int cuda_lstm_cell(ddpl_tensor **out, ddpl_tensor **in, const void *params)
{
    (void)params;
    return cuda_launch_lstm_cell(PTR(out[0]), PTR(out[1]), PTR(out[2]), PTR(in[0]), PTR(in[1]),
                                 PTR(in[2]), in[2]->dtype, ROWS(in[2]), COLS(in[2]));
}

/* out[0] dgates, out[1] dc_prev?; in[0] dh, in[1] dc, in[2] act, in[3] c_prev, in[4] c */
static int cuda_lstm_cell_backward(ddpl_tensor **out, ddpl_tensor **in, const void *params)
{
    (void)params;
    return cuda_launch_lstm_cell_backward(PTR(out[0]), PTR(out[1]), PTR(in[0]), PTR(in[1]),
                                          PTR(in[2]), PTR(in[3]), PTR(in[4]), in[3]->dtype,
                                          ROWS(in[3]), COLS(in[3]));
}

/* out[0] h, out[1] act; in[0] input gates, in[1] hidden gates, in[2] h_prev */
static int cuda_gru_cell(ddpl_tensor **out, ddpl_tensor **in, const void *params)
{
    (void)params;
    return cuda_launch_gru_cell(PTR(out[0]), PTR(out[1]), PTR(in[0]), PTR(in[1]), PTR(in[2]),
                                in[2]->dtype, ROWS(in[2]), COLS(in[2]));
}

/* out[0] d input gates, out[1] d hidden gates, out[2] dh_prev?; in[0] dh, in[1] act,
 * in[2] h_prev */
static int cuda_gru_cell_backward(ddpl_tensor **out, ddpl_tensor **in, const void *params)
{
    (void)params;
    return cuda_launch_gru_cell_backward(PTR(out[0]), PTR(out[1]), PTR(out[2]), PTR(in[0]),
                                         PTR(in[1]), PTR(in[2]), in[2]->dtype, ROWS(in[2]),
                                         COLS(in[2]));
}

void cuda_register_rnn(ddpl_kernel *k)
{
    k[DDPL_OP_LSTM_CELL] = cuda_lstm_cell;
    k[DDPL_OP_LSTM_CELL_BACKWARD] = cuda_lstm_cell_backward;
    k[DDPL_OP_GRU_CELL] = cuda_gru_cell;
    k[DDPL_OP_GRU_CELL_BACKWARD] = cuda_gru_cell_backward;
}
