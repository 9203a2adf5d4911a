/* ops/nn_rnn_cell.c: the fused LSTM and GRU cells, one time step's gate nonlinearities.
 * defines: ddpl_lstm_cell_fused, ddpl_gru_cell_fused.
 *
 * PyTorch's _thnn_fused_lstm_cell/_thnn_fused_gru_cell: the input and hidden gate
 * pre-activations of one step go through one kernel (LSTM_CELL, GRU_CELL) that also writes the
 * activated gates, and one node records it, whose backward is one kernel. nn.LSTM and nn.GRU run
 * whole sequences through nn_rnn_layer.c, which loops over the same kernels; these single steps
 * are for cells driven from Lua and are what the gradient checks exercise.
 *
 * The graph's nodes have a single output, so the LSTM cell returns h and c stacked as hc
 * (2,B,H): h = hc[0] and c = hc[1] are contiguous views, and their gradients meet in hc's. */
#include "nn_rnn.h"

/* gates (B,G*H) and state (B,H), one float dtype, one device. */
static int cell_check(const char *op, int G, ddpl_tensor *igates, ddpl_tensor *hgates,
                      ddpl_tensor *state, const char *state_name)
{
    char a[128], b[128], c[128];
    if (!igates || !hgates || !state)
        return ddpl_error("%s: input gates, hidden gates and %s are required", op, state_name);
    ddpl_tensor *list[3] = {igates, hgates, state};
    const char *names[3] = {"the input gates", "the hidden gates", state_name};
    if (rnn_check_float_same(op, 3, list, names) < 0) return -1;
    if (state->ndim == 2 && state->sizes[1] > INT64_MAX / 4)
        return ddpl_error("%s: hidden size %lld is too large", op, (long long)state->sizes[1]);
    if (state->ndim != 2 || igates->ndim != 2 || hgates->ndim != 2 ||
        igates->sizes[0] != state->sizes[0] || hgates->sizes[0] != state->sizes[0] ||
        igates->sizes[1] != G * state->sizes[1] || hgates->sizes[1] != G * state->sizes[1])
        return ddpl_error("%s: expected input gates and hidden gates (B,%d*H) and %s (B,H), got "
                          "%s, %s and %s",
                          op, G, state_name, ddpl_shape_str(igates, a, sizeof a),
                          ddpl_shape_str(hgates, b, sizeof b), ddpl_shape_str(state, c, sizeof c));
    return 0;
}

/* inputs 0 input gates, 1 hidden gates, 2 c_prev; saved 0 act, 1 c_prev, 2 hc */
static int lstm_cell_backward(ddpl_node *n, ddpl_tensor *grad, ddpl_tensor **gi)
{
    ddpl_tensor *act = ddpl_node_saved(n, 0), *cx = act ? ddpl_node_saved(n, 1) : NULL;
    ddpl_tensor *hc = cx ? ddpl_node_saved(n, 2) : NULL;
    if (!hc) return -1;
    int64_t B = cx->sizes[0], H = cx->sizes[1];
    ddpl_tensor *g = rnn_grad_as(grad, (ddpl_dtype)act->dtype);
    ddpl_tensor *da = g ? ddpl_empty_like(act) : NULL;
    ddpl_tensor *dcx = NULL;
    int rc = da ? 0 : -1;
    if (rc == 0 && ddpl_node_needs_grad(n, 2) && !(dcx = ddpl_empty_like(cx))) rc = -1;
    ddpl_tensor *dh = rc == 0 ? rnn_rows(g, 0, B, H) : NULL;
    ddpl_tensor *dc = rc == 0 ? rnn_rows(g, B * H, B, H) : NULL;
    ddpl_tensor *c = rc == 0 ? rnn_rows(hc, B * H, B, H) : NULL;
    ddpl_tensor *outs[2] = {da, dcx}, *ins[5] = {dh, dc, act, cx, c};
    if (rc == 0) rc = ddpl_run_kernel(DDPL_OP_LSTM_CELL_BACKWARD, act->device, outs, ins, NULL);
    if (rc == 0) rnn_give_grads(n, 3, (ddpl_tensor *[]){da, da, dcx}, gi);
    ddpl_tensor *tmp[] = {g, da, dcx, dh, dc, c};
    for (size_t i = 0; i < sizeof tmp / sizeof *tmp; i++) ddpl_tensor_release(tmp[i]);
    return rc == 0 ? ddpl_mark_not_differentiable("lstm_cell", n, grad, 3, gi, true) : rc;
}

ddpl_tensor *ddpl_lstm_cell_fused(ddpl_tensor *igates, ddpl_tensor *hgates, ddpl_tensor *cx)
{
    if (cell_check("lstm_cell", 4, igates, hgates, cx, "c_prev") < 0) return NULL;
    int64_t B = cx->sizes[0], H = cx->sizes[1];
    ddpl_tensor *ig = nn_contiguous(igates), *hg = nn_contiguous(hgates), *c = nn_contiguous(cx);
    ddpl_dtype dt = (ddpl_dtype)cx->dtype;
    ddpl_tensor *hc = ddpl_tensor_new(3, (int64_t[]){2, B, H}, dt, cx->device);
    ddpl_tensor *act = ddpl_tensor_new(2, (int64_t[]){B, 4 * H}, dt, cx->device);
    ddpl_tensor *h_out = hc ? rnn_rows(hc, 0, B, H) : NULL;
    ddpl_tensor *c_out = hc ? rnn_rows(hc, B * H, B, H) : NULL;
    ddpl_tensor *outs[3] = {h_out, c_out, act}, *ins[3] = {ig, hg, c};
    int rc = ig && hg && c && h_out && c_out && act
                 ? ddpl_run_kernel(DDPL_OP_LSTM_CELL, cx->device, outs, ins, NULL)
                 : -1;
    ddpl_tensor *args[3] = {igates, hgates, cx};
    if (rc == 0 && ddpl_grad_needed(3, args)) {
        ddpl_node *n = ddpl_node_new("LstmCellBackward0", lstm_cell_backward, 3, args);
        ddpl_node_save(n, act);
        ddpl_node_save(n, c);
        ddpl_node_save_output(n, hc);
        ddpl_set_history(hc, n);
    }
    ddpl_tensor *tmp[] = {ig, hg, c, act, h_out, c_out};
    for (size_t i = 0; i < sizeof tmp / sizeof *tmp; i++) ddpl_tensor_release(tmp[i]);
    if (rc != 0) {
        ddpl_tensor_release(hc);
        return NULL;
    }
    return hc;
}

/* inputs 0 input gates, 1 hidden gates, 2 h_prev; saved 0 act, 1 h_prev */
static int gru_cell_backward(ddpl_node *n, ddpl_tensor *grad, ddpl_tensor **gi)
{
    ddpl_tensor *act = ddpl_node_saved(n, 0), *hx = act ? ddpl_node_saved(n, 1) : NULL;
    if (!hx) return -1;
    ddpl_dtype dt = (ddpl_dtype)act->dtype;
    int64_t gs[2] = {hx->sizes[0], 3 * hx->sizes[1]};
    ddpl_tensor *g = rnn_grad_as(grad, dt);
    ddpl_tensor *dx = g ? ddpl_tensor_new(2, gs, dt, act->device) : NULL;
    ddpl_tensor *ds = dx ? ddpl_tensor_new(2, gs, dt, act->device) : NULL;
    ddpl_tensor *dh = NULL;
    int rc = ds ? 0 : -1;
    if (rc == 0 && ddpl_node_needs_grad(n, 2) && !(dh = ddpl_empty_like(hx))) rc = -1;
    ddpl_tensor *outs[3] = {dx, ds, dh}, *ins[3] = {g, act, hx};
    if (rc == 0) rc = ddpl_run_kernel(DDPL_OP_GRU_CELL_BACKWARD, act->device, outs, ins, NULL);
    if (rc == 0) rnn_give_grads(n, 3, outs, gi);
    ddpl_tensor_release(g);
    for (int i = 0; i < 3; i++) ddpl_tensor_release(outs[i]);
    return rc == 0 ? ddpl_mark_not_differentiable("gru_cell", n, grad, 3, gi, true) : rc;
}

ddpl_tensor *ddpl_gru_cell_fused(ddpl_tensor *igates, ddpl_tensor *hgates, ddpl_tensor *hx)
{
    if (cell_check("gru_cell", 3, igates, hgates, hx, "h_prev") < 0) return NULL;
    int64_t B = hx->sizes[0], H = hx->sizes[1];
    ddpl_tensor *ig = nn_contiguous(igates), *hg = nn_contiguous(hgates), *h = nn_contiguous(hx);
    ddpl_dtype dt = (ddpl_dtype)hx->dtype;
    ddpl_tensor *hy = ddpl_tensor_new(2, (int64_t[]){B, H}, dt, hx->device);
    ddpl_tensor *act = ddpl_tensor_new(2, (int64_t[]){B, 4 * H}, dt, hx->device);
    ddpl_tensor *outs[2] = {hy, act}, *ins[3] = {ig, hg, h};
    int rc = ig && hg && h && hy && act
                 ? ddpl_run_kernel(DDPL_OP_GRU_CELL, hx->device, outs, ins, NULL)
                 : -1;
    ddpl_tensor *args[3] = {igates, hgates, hx};
    if (rc == 0 && ddpl_grad_needed(3, args)) {
        ddpl_node *n = ddpl_node_new("GruCellBackward0", gru_cell_backward, 3, args);
        ddpl_node_save(n, act);
        ddpl_node_save(n, h);
        ddpl_set_history(hy, n);
    }
    ddpl_tensor *tmp[] = {ig, hg, h, act};
    for (size_t i = 0; i < sizeof tmp / sizeof *tmp; i++) ddpl_tensor_release(tmp[i]);
    if (rc != 0) {
        ddpl_tensor_release(hy);
        return NULL;
    }
    return hy;
}
