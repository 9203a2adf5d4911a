/* ops/nn_ctc.c: the CTC loss (connectionist temporal classification), as PyTorch 1.13's
 * F.ctc_loss.
 * defines: ddpl_ctc_loss.
 *
 * log_probs (T,N,C) (or unbatched (T,C)) are log-probabilities over C classes at T steps;
 * targets are padded (N,S) (or (S) unbatched) or the N targets concatenated (1-D, sum of the
 * target lengths); input_lengths and target_lengths hold N integers. The per-sample negative
 * log-likelihoods come from the CTC_LOSS kernel (the alpha recursion in log space, float64
 * accumulation: cpu_ctc.c, cuda_ctc.cu), their gradient from CTC_LOSS_BACKWARD (alpha and
 * beta). zero_infinity (an impossible alignment's +inf loss becomes 0) and the reductions are
 * compositions, as in PyTorch: 'mean' divides each loss by its target length (at least 1) and
 * averages over the batch. The lengths and labels are read on the host to be validated (and
 * concatenated targets are padded there), so a bad length or label is an error naming
 * ctc_loss, not an out-of-bounds read; for the same reason they may live on any device (PyTorch
 * also takes CPU lengths with CUDA log_probs). */
#include <math.h>
#include <stdlib.h>

#include "kernel_abi/nn_params.h"
#include "nn_common.h"

typedef struct {
    ddpl_ctc_params p;
} ctc_ctx;

/* saved: 0 log_probs (contiguous), 1 targets (N,S), 2 input_lengths, 3 target_lengths, 4 nll
 * (float64), 5 log_alpha */
static int ctc_backward(ddpl_node *n, ddpl_tensor *grad, ddpl_tensor **gi)
{
    ddpl_tensor *s[6];
    for (int i = 0; i < 6; i++)
        if (!(s[i] = ddpl_node_saved(n, i))) return -1;
    ddpl_tensor *g64 = ddpl_as_dtype(grad, DDPL_FLOAT64);
    ddpl_tensor *gc = g64 ? nn_contiguous(g64) : NULL;
    ddpl_tensor_release(g64);
    ddpl_tensor *dx =
        gc ? ddpl_tensor_new(3, s[0]->sizes, (ddpl_dtype)s[0]->dtype, s[0]->device) : NULL;
    ddpl_tensor *ins[7] = {gc, s[0], s[1], s[2], s[3], s[4], s[5]};
    if (dx)
        dx = nn_run_or_release(DDPL_OP_CTC_LOSS_BACKWARD, dx, &dx, ins,
                               &DDPL_NODE_CTX(n, ctc_ctx)->p);
    ddpl_tensor_release(gc);
    gi[0] = dx;
    if (!dx) return -1;
    return ddpl_mark_not_differentiable("ctc_loss", n, grad, 1, gi, true);
}

/* Contiguous int64 host copy of an integer tensor's n elements (caller frees), or NULL with an
 * error naming `what`. */
static int64_t *host_ints(const char *what, ddpl_tensor *t, int64_t n)
{
    if (ddpl_dtype_is_floating((ddpl_dtype)t->dtype) || t->dtype == DDPL_BOOL)
        return ddpl_error("ctc_loss: %s must be integers, got %s", what,
                          ddpl_dtype_name((ddpl_dtype)t->dtype)),
               NULL;
    if (ddpl_tensor_numel(t) != n)
        return ddpl_error("ctc_loss: %s must have %lld elements (the batch size), got %lld", what,
                          (long long)n, (long long)ddpl_tensor_numel(t)),
               NULL;
    ddpl_tensor *t64 = ddpl_as_dtype(t, DDPL_INT64);
    int64_t *h = t64 && n ? ddpl_tensor_host_copy(t64) : malloc(1);
    ddpl_tensor_release(t64);
    return h;
}

typedef struct {
    int64_t T, N, C, S;    /* S: the padded targets' width */
    int64_t *il, *tl, *tg; /* host: input lengths (N), target lengths (N), padded targets (N,S) */
} ctc_host;

static void ctc_host_free(ctc_host *h)
{
    free(h->il);
    free(h->tl);
    free(h->tg);
}

/* Reads and validates lengths and targets (PyTorch's checks, plus labels in [0, C) and
 * non-negative lengths, which PyTorch leaves unchecked). */
static int ctc_read(ctc_host *h, ddpl_tensor *targets, ddpl_tensor *il, ddpl_tensor *tl,
                    int64_t blank, bool batched)
{
    char sa[128];
    if (blank < 0 || blank >= h->C)
        return ddpl_error("ctc_loss: blank (%lld) must be in the label range [0, %lld)",
                          (long long)blank, (long long)h->C);
    if (!(h->il = host_ints("input_lengths", il, h->N))) return -1;
    if (!(h->tl = host_ints("target_lengths", tl, h->N))) return -1;
    int64_t total = 0, longest = 0;
    for (int64_t b = 0; b < h->N; b++) {
        if (h->il[b] < 0 || h->il[b] > h->T)
            return ddpl_error("ctc_loss: input_lengths must be in [0, %lld] (the input's length), "
                              "got %lld for sample %lld",
                              (long long)h->T, (long long)h->il[b], (long long)b);
        if (h->tl[b] < 0)
            return ddpl_error("ctc_loss: target_lengths must be >= 0, got %lld for sample %lld",
                              (long long)h->tl[b], (long long)b);
        if (ddpl_add_overflow(total, h->tl[b], &total))
            return ddpl_error("ctc_loss: target_lengths add up past 2^63 (sample %lld has %lld)",
                              (long long)b, (long long)h->tl[b]);
        if (h->tl[b] > longest) longest = h->tl[b];
    }
    bool padded = targets->ndim == 2 || (!batched && targets->ndim == 1);
    if (targets->ndim == 0 || targets->ndim > 2 || (!batched && targets->ndim != 1))
        return ddpl_error("ctc_loss: targets must be %s, got shape %s",
                          batched ? "(N, S) padded or 1-D concatenated" : "1-D (S) unbatched",
                          ddpl_shape_str(targets, sa, sizeof sa));
    int64_t width = padded ? targets->sizes[targets->ndim - 1] : 0;
    if (padded && batched && targets->sizes[0] != h->N)
        return ddpl_error("ctc_loss: padded targets of shape %s must have %lld rows (the batch "
                          "size)",
                          ddpl_shape_str(targets, sa, sizeof sa), (long long)h->N);
    if (padded && width < longest)
        return ddpl_error("ctc_loss: padded targets of shape %s are narrower than the longest "
                          "target length %lld",
                          ddpl_shape_str(targets, sa, sizeof sa), (long long)longest);
    if (!padded && targets->sizes[0] != total)
        return ddpl_error("ctc_loss: concatenated targets of shape %s must have %lld elements "
                          "(the sum of target_lengths)",
                          ddpl_shape_str(targets, sa, sizeof sa), (long long)total);
    int64_t *flat = host_ints("targets", targets, ddpl_tensor_numel(targets));
    if (!flat) return -1;
    h->S = longest;
    h->tg = calloc((size_t)(h->N * h->S + 1), sizeof *h->tg);
    if (!h->tg) return free(flat), ddpl_error("ctc_loss: out of memory");
    for (int64_t b = 0, at = 0; b < h->N; b++) {
        const int64_t *row = padded ? flat + b * width : flat + at;
        at += h->tl[b];
        for (int64_t k = 0; k < h->tl[b]; k++) {
            if (row[k] < 0 || row[k] >= h->C) {
                int64_t bad = row[k];
                free(flat);
                return ddpl_error("ctc_loss: target label %lld of sample %lld is outside [0, %lld)",
                                  (long long)bad, (long long)b, (long long)h->C);
            }
            h->tg[b * h->S + k] = row[k];
        }
    }
    free(flat);
    return 0;
}

/* The per-sample losses (N) of batched lp (T,N,C), with a CtcLossBackward node. */
static ddpl_tensor *ctc_nll(ddpl_tensor *lp, const ctc_host *h, ddpl_ctc_params p)
{
    int64_t ts[2] = {h->N, h->S}, ns[1] = {h->N}, as[3] = {h->N, h->T, 2 * h->S + 1};
    ddpl_device dev = lp->device;
    ddpl_tensor *tg = ddpl_from_data(2, ts, DDPL_INT64, h->tg, dev);
    ddpl_tensor *il = ddpl_from_data(1, ns, DDPL_INT64, h->il, dev);
    ddpl_tensor *tl = ddpl_from_data(1, ns, DDPL_INT64, h->tl, dev);
    ddpl_tensor *lpc = nn_contiguous(lp);
    ddpl_tensor *nll = ddpl_tensor_new(1, ns, DDPL_FLOAT64, dev);
    ddpl_tensor *alpha = ddpl_tensor_new(3, as, DDPL_FLOAT64, dev);
    ddpl_tensor *y = NULL;
    if (tg && il && tl && lpc && nll && alpha) {
        ddpl_tensor *outs[2] = {nll, alpha}, *ins[4] = {lpc, tg, il, tl};
        if (ddpl_run_kernel(DDPL_OP_CTC_LOSS, dev, outs, ins, &p) == 0) {
            /* a tensor of its own (nll is saved for backward) in lp's dtype */
            y = ddpl_tensor_new(1, ns, (ddpl_dtype)lp->dtype, dev);
            if (y && ddpl_run_kernel(DDPL_OP_COPY, dev, &y, &nll, NULL) < 0) {
                ddpl_tensor_release(y);
                y = NULL;
            }
        }
    }
    if (y && ddpl_grad_needed(1, &lp)) {
        ddpl_node *n = ddpl_node_new("CtcLossBackward0", ctc_backward, 1, &lp);
        ddpl_tensor *saved[6] = {lpc, tg, il, tl, nll, alpha};
        for (int i = 0; i < 6; i++) ddpl_node_save(n, saved[i]);
        DDPL_NODE_CTX(n, ctc_ctx)->p = p;
        ddpl_set_history(y, n);
    }
    ddpl_tensor *tmp[6] = {tg, il, tl, lpc, nll, alpha};
    for (int i = 0; i < 6; i++) ddpl_tensor_release(tmp[i]);
    return y;
}

/* zero_infinity and the reduction, compositions over the per-sample losses y (N). */
static ddpl_tensor *ctc_reduce(ddpl_tensor *y, const ctc_host *h, ddpl_reduction reduction,
                               bool zero_infinity, bool batched)
{
    op_temps k = {0};
    ddpl_tensor *r = y;
    if (zero_infinity) {
        ddpl_tensor *inf = OP_B(&k, ddpl_eq, r, OP_T(&k, ddpl_wrapped_number(INFINITY, false)));
        ddpl_tensor *zero = OP_T(&k, ddpl_scalar(0, (ddpl_dtype)y->dtype, y->device));
        r = inf && zero ? OP_T(&k, ddpl_where(inf, zero, r)) : NULL;
    }
    if (reduction == DDPL_REDUCTION_MEAN) {
        int64_t ns[1] = {h->N};
        double *div = malloc((size_t)(h->N + 1) * sizeof *div);
        for (int64_t b = 0; div && b < h->N; b++) div[b] = h->tl[b] > 1 ? (double)h->tl[b] : 1.0;
        ddpl_tensor *d64 =
            div ? OP_T(&k, ddpl_from_data(1, ns, DDPL_FLOAT64, div, y->device)) : NULL;
        free(div);
        if (!div && !k.failed)
            ddpl_error("ctc_loss: out of memory for the %lld target lengths of the mean",
                       (long long)h->N);
        if (!d64) k.failed = true;
        ddpl_tensor *d = d64 ? OP_T(&k, ddpl_as_dtype(d64, (ddpl_dtype)y->dtype)) : NULL;
        r = OP_U(&k, ddpl_mean, OP_B(&k, ddpl_div, r, d));
    } else if (reduction == DDPL_REDUCTION_SUM) {
        r = OP_U(&k, ddpl_sum, r);
    } else if (!batched && r) {
        r = OP_T(&k, ddpl_squeeze(r, 0));
    }
    return op_temps_result(&k, r);
}

ddpl_tensor *ddpl_ctc_loss(ddpl_tensor *log_probs, ddpl_tensor *targets, ddpl_tensor *input_lengths,
                           ddpl_tensor *target_lengths, int64_t blank, ddpl_reduction reduction,
                           bool zero_infinity)
{
    char sa[128];
    if (log_probs->dtype != DDPL_FLOAT32 && log_probs->dtype != DDPL_FLOAT64)
        return ddpl_error("ctc_loss: log_probs must be float32 or float64, got %s",
                          ddpl_dtype_name((ddpl_dtype)log_probs->dtype)),
               NULL;
    if (log_probs->ndim != 3 && log_probs->ndim != 2)
        return ddpl_error("ctc_loss: log_probs must be (T, N, C) or unbatched (T, C), got shape "
                          "%s",
                          ddpl_shape_str(log_probs, sa, sizeof sa)),
               NULL;
    bool batched = log_probs->ndim == 3;
    ddpl_tensor *lp = batched ? ddpl_tensor_retain(log_probs) : ddpl_unsqueeze(log_probs, 1);
    if (!lp) return NULL;
    ctc_host h = {.T = lp->sizes[0], .N = lp->sizes[1], .C = lp->sizes[2]};
    ddpl_tensor *r = NULL;
    if (h.C == 0) {
        ddpl_error("ctc_loss: log_probs of shape %s has no classes",
                   ddpl_shape_str(log_probs, sa, sizeof sa));
    } else if (ctc_read(&h, targets, input_lengths, target_lengths, blank, batched) == 0) {
        ddpl_ctc_params p = {blank, zero_infinity};
        ddpl_tensor *y = ctc_nll(lp, &h, p);
        r = y ? ctc_reduce(y, &h, reduction, zero_infinity, batched) : NULL;
        ddpl_tensor_release(y);
    }
    ctc_host_free(&h);
    ddpl_tensor_release(lp);
    return r;
}
