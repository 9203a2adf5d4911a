/* ops/nn_rnn.h: helpers shared by the recurrent ops (nn_rnn_cell.c, nn_rnn_layer.c).
 * defines: rnn_check_float_same, rnn_rows, rnn_grad_as, rnn_give_grads.
 *
 * The recurrent kernels read and write (rows, cols) blocks of larger contiguous buffers (one
 * time step of (T,B,G*H) gates, one plane of the LSTM's (2,T,B,H) states); rnn_rows makes such
 * a block as a history-free alias, so nothing is copied and nothing is recorded. */
#ifndef DDPL_NN_RNN_H
#define DDPL_NN_RNN_H

#include "nn_common.h"

/* x, a float tensor, and every other non-NULL tensor of list share one dtype and device. */
static inline int rnn_check_float_same(const char *op, int n, ddpl_tensor *const *list,
                                       const char *const *names)
{
    if (nn_check_float(op, names[0], list[0]) < 0) return -1;
    for (int i = 1; i < n; i++) {
        if (!list[i]) continue;
        if (list[i]->dtype != list[0]->dtype)
            return ddpl_error("%s: %s has dtype %s but %s has %s", op, names[i],
                              ddpl_dtype_name((ddpl_dtype)list[i]->dtype), names[0],
                              ddpl_dtype_name((ddpl_dtype)list[0]->dtype));
        if (ddpl_check_same_device(op, list[0], list[i]) < 0) return -1;
    }
    return 0;
}

/* The (rows, cols) contiguous block of contiguous t starting `first` elements in. */
static inline ddpl_tensor *rnn_rows(const ddpl_tensor *t, int64_t first, int64_t rows, int64_t cols)
{
    int64_t sizes[2] = {rows, cols}, strides[2] = {cols, 1};
    return ddpl_tensor_alias(t, 2, sizes, strides, t->offset + first);
}

/* grad in dtype dt, contiguous (a new reference) */
static inline ddpl_tensor *rnn_grad_as(ddpl_tensor *grad, ddpl_dtype dt)
{
    ddpl_tensor *gd = ddpl_as_dtype(grad, dt);
    ddpl_tensor *g = nn_contiguous(gd);
    ddpl_tensor_release(gd);
    return g;
}

/* Hands out[i] (retained) to gi[i] where input i needs a gradient; out may repeat a tensor
 * (the LSTM cell's input and hidden gates share one gradient). */
static inline void rnn_give_grads(ddpl_node *n, int count, ddpl_tensor *const *out,
                                  ddpl_tensor **gi)
{
    for (int i = 0; i < count; i++)
        if (out[i] && ddpl_node_needs_grad(n, i)) gi[i] = ddpl_tensor_retain(out[i]);
}

#endif
