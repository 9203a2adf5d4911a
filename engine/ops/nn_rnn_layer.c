/* ops/nn_rnn_layer.c: one direction of one LSTM or GRU layer over a whole sequence.
 * defines: ddpl_lstm_layer, ddpl_gru_layer.
 *
 * The input projection x @ W_ih^T + b of every time step is one GEMM the caller makes
 * (lua/ddplua/nn/rnn_base.lua); these ops run the recurrence: per step one GEMM h @ W_hh^T for
 * all gates and one fused cell kernel (LSTM_CELL, GRU_CELL; cpu/cpu_rnn.c). The whole loop is
 * one graph node, as cuDNN's RNN is, because a node per step would cost a (T,B,G*H) zero-filled
 * gradient per step for the slice of the input gates it read (quadratic in T). Backward runs
 * the steps in reverse: per step one cell-backward kernel and one GEMM dgates @ W_hh, then one
 * GEMM over all steps for dW_hh (and one sum for the GRU's db_hh). A reverse layer (the second
 * direction of a bidirectional one) walks t from T-1 down to 0 and writes step t at position t.
 *
 * The graph's nodes have a single output, so the LSTM returns its states as hc (2,T,B,H):
 * hc[0] is the output sequence h_t, hc[1] the cells c_t (c_n is hc[1][T-1], or [0] in
 * reverse). The loop runs with gradient recording off on history-free aliases. Under autocast
 * a layer runs in the autocast dtype (the end of this file). */
#include "autocast.h"
#include "nn_rnn.h"

/* The time index of processing step p. */
static inline int64_t step_time(int64_t p, int64_t T, bool reverse)
{
    return reverse ? T - 1 - p : p;
}

/* gates (T,B,G*H), w_hh (G*H,H), b_hh (G*H)?, states (B,H). */
static int layer_check(const char *op, int G, ddpl_tensor *gx, ddpl_tensor *w_hh, ddpl_tensor *b_hh,
                       ddpl_tensor *h0, ddpl_tensor *c0)
{
    char a[128], b[128], c[128];
    if (!gx || !w_hh || !h0)
        return ddpl_error("%s: input gates, weight_hh and h_0 are required", op);
    ddpl_tensor *list[5] = {gx, w_hh, h0, c0, b_hh};
    const char *names[5] = {"the input gates", "weight_hh", "h_0", "c_0", "bias_hh"};
    if (rnn_check_float_same(op, 5, list, names) < 0) return -1;
    if (w_hh->ndim != 2 || w_hh->sizes[1] > INT64_MAX / 4 || w_hh->sizes[0] != G * w_hh->sizes[1])
        return ddpl_error("%s: expected weight_hh (%d*H,H), got %s", op, G,
                          ddpl_shape_str(w_hh, a, sizeof a));
    int64_t H = w_hh->sizes[1];
    if (gx->ndim != 3 || gx->sizes[2] != G * H || gx->sizes[0] < 1)
        return ddpl_error("%s: expected input gates (T,B,%lld) with T >= 1, got %s", op,
                          (long long)(G * H), ddpl_shape_str(gx, a, sizeof a));
    for (int i = 2; i < 4; i++) {
        ddpl_tensor *s = list[i];
        if (s && (s->ndim != 2 || s->sizes[0] != gx->sizes[1] || s->sizes[1] != H))
            return ddpl_error("%s: expected %s of shape [%lld,%lld], got %s (input gates %s)", op,
                              names[i], (long long)gx->sizes[1], (long long)H,
                              ddpl_shape_str(s, b, sizeof b), ddpl_shape_str(gx, c, sizeof c));
    }
    if (b_hh && (b_hh->ndim != 1 || b_hh->sizes[0] != G * H))
        return ddpl_error("%s: expected bias_hh of shape [%lld], got %s", op, (long long)(G * H),
                          ddpl_shape_str(b_hh, a, sizeof a));
    return 0;
}

/* A history-free contiguous copy or alias of x (saved tensors and loop operands). */
static ddpl_tensor *plain(ddpl_tensor *x)
{
    if (!x) return NULL;
    ddpl_tensor *c = nn_contiguous(x);
    if (!c) return NULL;
    ddpl_tensor *a = ddpl_tensor_alias(c, c->ndim, c->sizes, c->strides, c->offset);
    ddpl_tensor_release(c);
    return a;
}

/* (cols, rows) transposed view of a contiguous (rows, cols) tensor */
static ddpl_tensor *transposed(const ddpl_tensor *m)
{
    int64_t sizes[2] = {m->sizes[1], m->sizes[0]}, strides[2] = {1, m->sizes[1]};
    return ddpl_tensor_alias(m, 2, sizes, strides, m->offset);
}

/* Accumulates dW (G*H,H) = sum over steps of dgates_t^T @ h_prev(t): the steps whose h_prev is
 * a state the loop produced form one GEMM over (T-1)*B rows, since they are contiguous in
 * both dgates (T,B,G*H) and hs (T,B,H); the first processed step adds dgates^T @ h_0. */
static ddpl_tensor *weight_hh_grad(ddpl_tensor *dg, ddpl_tensor *hs, ddpl_tensor *h0, bool reverse)
{
    int64_t T = dg->sizes[0], B = dg->sizes[1], GH = dg->sizes[2], H = h0->sizes[1];
    int64_t t0 = step_time(0, T, reverse);
    ddpl_tensor *d0 = rnn_rows(dg, t0 * B * GH, B, GH);
    ddpl_tensor *d0t = d0 ? transposed(d0) : NULL;
    ddpl_tensor *dw = d0t ? ddpl_mm(d0t, h0) : NULL;
    ddpl_tensor_release(d0);
    ddpl_tensor_release(d0t);
    if (!dw || T == 1) return dw;
    /* forward: steps t = 1..T-1 read h_{t-1}; reverse: steps t = 0..T-2 read h_{t+1} */
    ddpl_tensor *d = rnn_rows(dg, reverse ? 0 : B * GH, (T - 1) * B, GH);
    ddpl_tensor *hp = rnn_rows(hs, reverse ? B * H : 0, (T - 1) * B, H);
    ddpl_tensor *dt = d ? transposed(d) : NULL;
    ddpl_tensor *sum = dt && hp ? ddpl_addmm(dw, dt, hp, 1, 1) : NULL;
    ddpl_tensor *tmp[] = {d, hp, dt, dw};
    for (size_t i = 0; i < sizeof tmp / sizeof *tmp; i++) ddpl_tensor_release(tmp[i]);
    return sum;
}

typedef struct {
    bool reverse;
    ddpl_backward_fn body; /* the layer's backward, run by layer_backward */
} layer_ctx;

/* Every layer node's backward: its body with autocast off, since a backward called inside an
 * autocast region would otherwise lower a float32 layer's products. */
static int layer_backward(ddpl_node *n, ddpl_tensor *grad, ddpl_tensor **gi)
{
    ddpl_device_type type = (ddpl_device_type)grad->device.type;
    ddpl_autocast_state autocast = ddpl_autocast_suspend(type);
    int rc = DDPL_NODE_CTX(n, layer_ctx)->body(n, grad, gi);
    ddpl_autocast_set(type, autocast, NULL);
    return rc;
}

/* The end of a layer's forward (gradient recording already restored): when an input of args
 * needs a gradient, records the backward node with the n_saved tensors of saved in slots 0.. and
 * the output out after them; then releases the n_tmp temporaries of tmp. Returns out, or NULL
 * (out released) when rc reports a failure. */
static ddpl_tensor *layer_finish(int rc, const char *name, ddpl_backward_fn fn, ddpl_tensor **args,
                                 int n_saved, ddpl_tensor *const *saved, bool reverse,
                                 ddpl_tensor *out, size_t n_tmp, ddpl_tensor *const *tmp)
{
    if (rc == 0 && ddpl_grad_needed(4, args)) {
        ddpl_node *n = ddpl_node_new(name, layer_backward, 4, args);
        for (int i = 0; i < n_saved; i++) ddpl_node_save(n, saved[i]);
        ddpl_node_save_output(n, out);
        *DDPL_NODE_CTX(n, layer_ctx) = (layer_ctx){reverse, fn};
        ddpl_set_history(out, n);
    }
    for (size_t i = 0; i < n_tmp; i++) ddpl_tensor_release(tmp[i]);
    if (rc == 0) return out;
    ddpl_tensor_release(out);
    return NULL;
}

/* inputs 0 gates (T,B,4H), 1 w_hh, 2 h_0, 3 c_0; saved 0 act (T,B,4H), 1 w_hh, 2 h_0, 3 c_0
 * (all plain), 4 hc (2,T,B,H) */
static int lstm_layer_backward(ddpl_node *n, ddpl_tensor *grad, ddpl_tensor **gi)
{
    ddpl_tensor *s[5];
    for (int i = 0; i < 5; i++)
        if (!(s[i] = ddpl_node_saved(n, i))) return -1;
    ddpl_tensor *act = s[0], *w = s[1], *h0 = s[2], *c0 = s[3], *hc = s[4];
    bool reverse = DDPL_NODE_CTX(n, layer_ctx)->reverse;
    int64_t T = act->sizes[0], B = act->sizes[1], H = h0->sizes[1], BH = B * H;
    ddpl_tensor *g = rnn_grad_as(grad, (ddpl_dtype)act->dtype);
    ddpl_tensor *dg = g ? ddpl_empty_like(act) : NULL;
    ddpl_tensor *dh = dg ? ddpl_zeros(2, h0->sizes, (ddpl_dtype)act->dtype, act->device) : NULL;
    ddpl_tensor *dc = dh ? ddpl_zeros(2, h0->sizes, (ddpl_dtype)act->dtype, act->device) : NULL;
    int rc = dc ? 0 : -1;
    for (int64_t p = T - 1; p >= 0 && rc == 0; p--) {
        int64_t t = step_time(p, T, reverse), tp = p ? step_time(p - 1, T, reverse) : -1;
        ddpl_tensor *gh_t = rnn_rows(g, t * BH, B, H), *gc_t = rnn_rows(g, (T + t) * BH, B, H);
        ddpl_tensor *dh_in = gh_t ? ddpl_add(gh_t, dh) : NULL;
        ddpl_tensor *dc_in = gc_t ? ddpl_add(gc_t, dc) : NULL;
        ddpl_tensor *act_t = rnn_rows(act, t * B * 4 * H, B, 4 * H);
        ddpl_tensor *c_prev = p ? rnn_rows(hc, (T + tp) * BH, B, H) : ddpl_tensor_retain(c0);
        ddpl_tensor *c_t = rnn_rows(hc, (T + t) * BH, B, H);
        ddpl_tensor *dg_t = rnn_rows(dg, t * B * 4 * H, B, 4 * H);
        ddpl_tensor *dc_prev = ddpl_empty_like(c0);
        ddpl_tensor *outs[2] = {dg_t, dc_prev}, *ins[5] = {dh_in, dc_in, act_t, c_prev, c_t};
        rc = dh_in && dc_in && act_t && c_prev && c_t && dg_t && dc_prev
                 ? ddpl_run_kernel(DDPL_OP_LSTM_CELL_BACKWARD, act->device, outs, ins, NULL)
                 : -1;
        ddpl_tensor_release(dh);
        ddpl_tensor_release(dc);
        dh = rc == 0 ? ddpl_mm(dg_t, w) : NULL; /* (B,4H) @ (4H,H) */
        dc = dc_prev;
        if (!dh) rc = -1;
        ddpl_tensor *tmp[] = {gh_t, gc_t, dh_in, dc_in, act_t, c_prev, c_t, dg_t};
        for (size_t i = 0; i < sizeof tmp / sizeof *tmp; i++) ddpl_tensor_release(tmp[i]);
    }
    ddpl_tensor *hs = rc == 0 ? rnn_rows(hc, 0, T * B, H) : NULL;
    ddpl_tensor *hs3 = hs ? nn_alias(hs, 3, (int64_t[]){T, B, H}) : NULL;
    ddpl_tensor *dw = NULL;
    if (rc == 0 && ddpl_node_needs_grad(n, 1) && !(dw = weight_hh_grad(dg, hs3, h0, reverse)))
        rc = -1;
    if (rc == 0) rnn_give_grads(n, 4, (ddpl_tensor *[]){dg, dw, dh, dc}, gi);
    ddpl_tensor *tmp[] = {g, dg, dh, dc, hs, hs3, dw};
    for (size_t i = 0; i < sizeof tmp / sizeof *tmp; i++) ddpl_tensor_release(tmp[i]);
    return rc == 0 ? ddpl_mark_not_differentiable("LSTM", n, grad, 4, gi, true) : rc;
}

static ddpl_tensor *lstm_layer_impl(ddpl_tensor *gates, ddpl_tensor *w_hh, ddpl_tensor *h0,
                                    ddpl_tensor *c0, bool reverse)
{
    if (layer_check("LSTM", 4, gates, w_hh, NULL, h0, c0) < 0) return NULL;
    if (!c0) {
        ddpl_error("LSTM: c_0 is required");
        return NULL;
    }
    int64_t T = gates->sizes[0], B = gates->sizes[1], H = w_hh->sizes[1], BH = B * H;
    ddpl_dtype dt = (ddpl_dtype)gates->dtype;
    bool grad_mode = ddpl_set_grad_enabled(false);
    ddpl_device_type type = (ddpl_device_type)gates->device.type;
    ddpl_autocast_state autocast = ddpl_autocast_suspend(type); /* operands are in their dtype */
    ddpl_tensor *gx = plain(gates), *w = plain(w_hh), *h = plain(h0), *c = plain(c0);
    ddpl_tensor *wt = w ? transposed(w) : NULL;
    ddpl_tensor *hc = ddpl_tensor_new(4, (int64_t[]){2, T, B, H}, dt, gates->device);
    ddpl_tensor *act = ddpl_tensor_new(3, (int64_t[]){T, B, 4 * H}, dt, gates->device);
    ddpl_tensor *h_prev = h ? ddpl_tensor_retain(h) : NULL;
    ddpl_tensor *c_prev = c ? ddpl_tensor_retain(c) : NULL;
    int rc = gx && wt && hc && act && h_prev && c_prev ? 0 : -1;
    for (int64_t p = 0; p < T && rc == 0; p++) {
        int64_t t = step_time(p, T, reverse);
        ddpl_tensor *hg = ddpl_mm(h_prev, wt); /* (B,H) @ (H,4H): every gate in one GEMM */
        ddpl_tensor *g_t = rnn_rows(gx, t * B * 4 * H, B, 4 * H);
        ddpl_tensor *h_t = rnn_rows(hc, t * BH, B, H), *c_t = rnn_rows(hc, (T + t) * BH, B, H);
        ddpl_tensor *a_t = rnn_rows(act, t * B * 4 * H, B, 4 * H);
        ddpl_tensor *outs[3] = {h_t, c_t, a_t}, *ins[3] = {g_t, hg, c_prev};
        rc = hg && g_t && h_t && c_t && a_t
                 ? ddpl_run_kernel(DDPL_OP_LSTM_CELL, gates->device, outs, ins, NULL)
                 : -1;
        ddpl_tensor *tmp[] = {hg, g_t, a_t, h_prev, c_prev};
        for (size_t i = 0; i < sizeof tmp / sizeof *tmp; i++) ddpl_tensor_release(tmp[i]);
        h_prev = h_t;
        c_prev = c_t;
    }
    ddpl_set_grad_enabled(grad_mode);
    ddpl_autocast_set(type, autocast, NULL);
    ddpl_tensor *tmp[] = {gx, w, h, c, wt, act, h_prev, c_prev};
    return layer_finish(rc, "LstmBackward0", lstm_layer_backward,
                        (ddpl_tensor *[]){gates, w_hh, h0, c0}, 4, (ddpl_tensor *[]){act, w, h, c},
                        reverse, hc, sizeof tmp / sizeof *tmp, tmp);
}

/* inputs 0 gates (T,B,3H), 1 w_hh, 2 b_hh?, 3 h_0; saved 0 act (T,B,4H), 1 w_hh, 2 h_0 (plain),
 * 3 hs (T,B,H) */
static int gru_layer_backward(ddpl_node *n, ddpl_tensor *grad, ddpl_tensor **gi)
{
    ddpl_tensor *s[4];
    for (int i = 0; i < 4; i++)
        if (!(s[i] = ddpl_node_saved(n, i))) return -1;
    ddpl_tensor *act = s[0], *w = s[1], *h0 = s[2], *hs = s[3];
    bool reverse = DDPL_NODE_CTX(n, layer_ctx)->reverse;
    ddpl_dtype dt = (ddpl_dtype)act->dtype;
    int64_t T = act->sizes[0], B = act->sizes[1], H = h0->sizes[1], BH = B * H;
    int64_t gsz[3] = {T, B, 3 * H};
    ddpl_tensor *g = rnn_grad_as(grad, dt);
    ddpl_tensor *dx = g ? ddpl_tensor_new(3, gsz, dt, act->device) : NULL;
    ddpl_tensor *ds = dx ? ddpl_tensor_new(3, gsz, dt, act->device) : NULL;
    ddpl_tensor *dh = ds ? ddpl_zeros(2, h0->sizes, dt, act->device) : NULL;
    int rc = dh ? 0 : -1;
    for (int64_t p = T - 1; p >= 0 && rc == 0; p--) {
        int64_t t = step_time(p, T, reverse), tp = p ? step_time(p - 1, T, reverse) : -1;
        ddpl_tensor *g_t = rnn_rows(g, t * BH, B, H);
        ddpl_tensor *dh_in = g_t ? ddpl_add(g_t, dh) : NULL;
        ddpl_tensor *act_t = rnn_rows(act, t * B * 4 * H, B, 4 * H);
        ddpl_tensor *h_prev = p ? rnn_rows(hs, tp * BH, B, H) : ddpl_tensor_retain(h0);
        ddpl_tensor *dx_t = rnn_rows(dx, t * B * 3 * H, B, 3 * H);
        ddpl_tensor *ds_t = rnn_rows(ds, t * B * 3 * H, B, 3 * H);
        ddpl_tensor *dh_direct = ddpl_empty_like(h0);
        ddpl_tensor *outs[3] = {dx_t, ds_t, dh_direct}, *ins[3] = {dh_in, act_t, h_prev};
        rc = dh_in && act_t && h_prev && dx_t && ds_t && dh_direct
                 ? ddpl_run_kernel(DDPL_OP_GRU_CELL_BACKWARD, act->device, outs, ins, NULL)
                 : -1;
        ddpl_tensor_release(dh);
        dh = rc == 0 ? ddpl_addmm(dh_direct, ds_t, w, 1, 1) : NULL; /* + ds @ W_hh */
        if (!dh) rc = -1;
        ddpl_tensor *tmp[] = {g_t, dh_in, act_t, h_prev, dx_t, ds_t, dh_direct};
        for (size_t i = 0; i < sizeof tmp / sizeof *tmp; i++) ddpl_tensor_release(tmp[i]);
    }
    ddpl_tensor *dw = NULL, *db = NULL;
    if (rc == 0 && ddpl_node_needs_grad(n, 1) && !(dw = weight_hh_grad(ds, hs, h0, reverse)))
        rc = -1;
    if (rc == 0 && ddpl_node_needs_grad(n, 2)) {
        ddpl_tensor *rows = rnn_rows(ds, 0, T * B, 3 * H);
        int dim0 = 0;
        db = rows ? ddpl_sum_dims(rows, 1, &dim0, false) : NULL;
        ddpl_tensor_release(rows);
        if (!db) rc = -1;
    }
    if (rc == 0) rnn_give_grads(n, 4, (ddpl_tensor *[]){dx, dw, db, dh}, gi);
    ddpl_tensor *tmp[] = {g, dx, ds, dh, dw, db};
    for (size_t i = 0; i < sizeof tmp / sizeof *tmp; i++) ddpl_tensor_release(tmp[i]);
    return rc == 0 ? ddpl_mark_not_differentiable("GRU", n, grad, 4, gi, true) : rc;
}

static ddpl_tensor *gru_layer_impl(ddpl_tensor *gates, ddpl_tensor *w_hh, ddpl_tensor *b_hh,
                                   ddpl_tensor *h0, bool reverse)
{
    if (layer_check("GRU", 3, gates, w_hh, b_hh, h0, NULL) < 0) return NULL;
    int64_t T = gates->sizes[0], B = gates->sizes[1], H = w_hh->sizes[1], BH = B * H;
    ddpl_dtype dt = (ddpl_dtype)gates->dtype;
    bool grad_mode = ddpl_set_grad_enabled(false);
    ddpl_device_type type = (ddpl_device_type)gates->device.type;
    ddpl_autocast_state autocast = ddpl_autocast_suspend(type); /* operands are in their dtype */
    ddpl_tensor *gx = plain(gates), *w = plain(w_hh), *b = plain(b_hh), *h = plain(h0);
    ddpl_tensor *wt = w ? transposed(w) : NULL;
    ddpl_tensor *hs = ddpl_tensor_new(3, (int64_t[]){T, B, H}, dt, gates->device);
    ddpl_tensor *act = ddpl_tensor_new(3, (int64_t[]){T, B, 4 * H}, dt, gates->device);
    ddpl_tensor *h_prev = h ? ddpl_tensor_retain(h) : NULL;
    int rc = gx && wt && hs && act && h_prev && (b || !b_hh) ? 0 : -1;
    for (int64_t p = 0; p < T && rc == 0; p++) {
        int64_t t = step_time(p, T, reverse);
        /* (B,H) @ (H,3H) + b_hh: every gate in one GEMM; r multiplies the n part with its bias */
        ddpl_tensor *hg = b ? ddpl_addmm(b, h_prev, wt, 1, 1) : ddpl_mm(h_prev, wt);
        ddpl_tensor *g_t = rnn_rows(gx, t * B * 3 * H, B, 3 * H);
        ddpl_tensor *h_t = rnn_rows(hs, t * BH, B, H);
        ddpl_tensor *a_t = rnn_rows(act, t * B * 4 * H, B, 4 * H);
        ddpl_tensor *outs[2] = {h_t, a_t}, *ins[3] = {g_t, hg, h_prev};
        rc = hg && g_t && h_t && a_t
                 ? ddpl_run_kernel(DDPL_OP_GRU_CELL, gates->device, outs, ins, NULL)
                 : -1;
        ddpl_tensor *tmp[] = {hg, g_t, a_t, h_prev};
        for (size_t i = 0; i < sizeof tmp / sizeof *tmp; i++) ddpl_tensor_release(tmp[i]);
        h_prev = h_t;
    }
    ddpl_set_grad_enabled(grad_mode);
    ddpl_autocast_set(type, autocast, NULL);
    ddpl_tensor *tmp[] = {gx, w, b, h, wt, act, h_prev};
    return layer_finish(rc, "GruBackward0", gru_layer_backward,
                        (ddpl_tensor *[]){gates, w_hh, b_hh, h0}, 3, (ddpl_tensor *[]){act, w, h},
                        reverse, hs, sizeof tmp / sizeof *tmp, tmp);
}

/* ---- autocast ----
 * A layer is on autocast's lower-precision list, as PyTorch's mkldnn_rnn_layer (CPU) and
 * cudnn_rnn (CUDA) are: its output and states come out in the autocast dtype. Where the device
 * multiplies that dtype on its own units (bf16 on AVX512-BF16, CUDA), every floating operand but
 * float64 is cast to it and the per-step GEMMs run there. Where the backend would widen each
 * product to float32 (float16 on the CPU, bf16 without the units), the layer computes in float32
 * and only its output is cast: widening the weight again at every time step made it slower
 * than float32 (about 1.1x). */
typedef ddpl_tensor *(*layer_fn)(ddpl_tensor *const t[4], bool reverse);

static ddpl_tensor *lstm_fn(ddpl_tensor *const t[4], bool reverse)
{
    return lstm_layer_impl(t[0], t[1], t[2], t[3], reverse);
}

static ddpl_tensor *gru_fn(ddpl_tensor *const t[4], bool reverse)
{
    return gru_layer_impl(t[0], t[1], t[2], t[3], reverse);
}

static ddpl_tensor *run_layer(layer_fn fn, ddpl_tensor *const in[4], bool reverse)
{
    if (!in[0] || !ddpl_autocast_enabled((ddpl_device_type)in[0]->device.type))
        return fn(in, reverse);
    ddpl_dtype dt = ddpl_autocast_dtype((ddpl_device_type)in[0]->device.type);
    bool native = ddpl_backend_gemm_native(in[0]->device, dt);
    ddpl_tensor *c[4];
    int rc = native ? ddpl_autocast_lower_n(4, in, c) : ddpl_autocast_upcast_n(4, in, c);
    ddpl_tensor *y = rc == 0 ? fn(c, reverse) : NULL;
    ddpl_autocast_release_n(4, c);
    if (!y || native || y->dtype != DDPL_FLOAT32) return y;
    ddpl_tensor *lowered = ddpl_to_dtype(y, dt);
    ddpl_tensor_release(y);
    return lowered;
}

ddpl_tensor *ddpl_lstm_layer(ddpl_tensor *gates, ddpl_tensor *w_hh, ddpl_tensor *h0,
                             ddpl_tensor *c0, bool reverse)
{
    return run_layer(lstm_fn, (ddpl_tensor *const[4]){gates, w_hh, h0, c0}, reverse);
}

ddpl_tensor *ddpl_gru_layer(ddpl_tensor *gates, ddpl_tensor *w_hh, ddpl_tensor *b_hh,
                            ddpl_tensor *h0, bool reverse)
{
    return run_layer(gru_fn, (ddpl_tensor *const[4]){gates, w_hh, b_hh, h0}, reverse);
}
