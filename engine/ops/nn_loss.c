/* ops/nn_loss.c: classification and regression losses with their gradients.
 * defines: ddpl_nll_loss, ddpl_cross_entropy, ddpl_mse_loss.
 *
 * nll_loss runs the NLL kernels on log-probabilities seen as (N,C,S). cross_entropy is
 * log_softmax + nll_loss, plus PyTorch 1.13's label smoothing (LossNLL.cpp,
 * cross_entropy_loss_label_smoothing): with eps = label_smoothing and C classes,
 *   smooth[i] = -sum_c logp[i,c] * weight[c]      (0 where target[i] == ignore_index)
 *   loss = (1 - eps) * nll + (eps / C) * reduce(smooth)
 * where reduce is the same reduction, and 'mean' divides by the same total as nll's (the sum
 * of weight[target] over non-ignored targets, or their count). Without label smoothing, logits
 * (N,C) or (C) that are contiguous run the fused CROSS_ENTROPY kernel where the backend has it
 * (the CPU): no (N,C) log-probabilities are written, the backward writes softmax - onehot
 * straight into the logits' gradient (cpu/cpu_loss.c); elsewhere the composition runs.
 * mse_loss is a composite. */
#include "autocast.h"
#include "nn_common.h"

static int check_reduction(const char *op, ddpl_reduction r)
{
    if (r == DDPL_REDUCTION_NONE || r == DDPL_REDUCTION_MEAN || r == DDPL_REDUCTION_SUM) return 0;
    return ddpl_error("%s: invalid reduction %d (expected none, mean or sum)", op, (int)r);
}

/* ---- nll_loss ---- */
typedef struct {
    ddpl_nll_params p;
    int64_t C; /* classes */
} nll_ctx;

/* input 0 logp; saved: 0 target (N,S), 1 weight?, 2 total_weight */
/* The kernel's dlogp for the loss gradient grad (no autograd). */
static ddpl_tensor *nll_loss_grad_kernel(ddpl_node *n, ddpl_tensor *grad, ddpl_tensor *target,
                                         ddpl_tensor *w, ddpl_tensor *total)
{
    ddpl_edge *e = &n->edges[0];
    int64_t N = target->sizes[0], S = target->sizes[1];
    int64_t s3[3] = {N, DDPL_NODE_CTX(n, nll_ctx)->C, S};
    ddpl_tensor *g = nn_contiguous(grad);
    ddpl_tensor *dx =
        g ? ddpl_tensor_new(e->ndim, e->sizes, (ddpl_dtype)grad->dtype, grad->device) : NULL;
    ddpl_tensor *dx3 = dx ? nn_alias(dx, 3, s3) : NULL;
    ddpl_tensor *ins[4] = {g, target, w, total};
    int rc = dx3 ? ddpl_run_kernel(DDPL_OP_NLL_LOSS_BACKWARD, dx->device, &dx3, ins,
                                   &DDPL_NODE_CTX(n, nll_ctx)->p)
                 : -1;
    ddpl_tensor_release(g);
    ddpl_tensor_release(dx3);
    if (rc < 0) {
        ddpl_tensor_release(dx);
        return NULL;
    }
    return dx;
}

/* create_graph with a loss gradient that requires grad (gradgradcheck, a penalty on the
 * gradient of a per-sample loss): dlogp is linear in it, kernel(ones) * grad with grad's
 * sample dims broadcast over the classes (dim 1), which records. */
static ddpl_tensor *nll_loss_grad_recorded(ddpl_node *n, ddpl_tensor *grad, ddpl_tensor *target,
                                           ddpl_tensor *w, ddpl_tensor *total)
{
    ddpl_tensor *ones = ddpl_ones(grad->ndim, grad->sizes, (ddpl_dtype)grad->dtype, grad->device);
    ddpl_tensor *unit = ones ? nll_loss_grad_kernel(n, ones, target, w, total) : NULL;
    ddpl_tensor_release(ones);
    if (!unit) return NULL;
    ddpl_tensor *g = ddpl_tensor_retain(grad);
    if (grad->ndim > 0) { /* (N, d...) -> (N, 1, d...) */
        int64_t sizes[DDPL_MAX_DIMS];
        sizes[0] = grad->sizes[0];
        sizes[1] = 1;
        for (int d = 1; d < grad->ndim; d++) sizes[d + 1] = grad->sizes[d];
        ddpl_tensor_release(g);
        g = ddpl_reshape(grad, grad->ndim + 1, sizes);
    }
    ddpl_tensor *dx = g ? ddpl_mul(unit, g) : NULL;
    ddpl_tensor_release(g);
    ddpl_tensor_release(unit);
    return dx;
}

static int nll_loss_backward(ddpl_node *n, ddpl_tensor *grad, ddpl_tensor **gi)
{
    ddpl_tensor *target = ddpl_node_saved(n, 0), *w = ddpl_node_saved(n, 1);
    ddpl_tensor *total = ddpl_node_saved(n, 2);
    if (!target || (!w && !ddpl_node_saved_is_null(n, 1)) || !total) return -1;
    bool linear = ddpl_is_grad_enabled() && ddpl_requires_grad(grad) &&
                  !(w && ddpl_requires_grad(w)) && !ddpl_requires_grad(total);
    gi[0] = linear ? nll_loss_grad_recorded(n, grad, target, w, total)
                   : nll_loss_grad_kernel(n, grad, target, w, total);
    if (!gi[0]) return -1;
    return ddpl_mark_not_differentiable("nll_loss", n, grad, 1, gi, false);
}

/* Checks logp (N,C,d...) / (C) against target (N,d...) / (); fills N, C, S. */
static int nll_shapes(const char *op, const ddpl_tensor *logp, const ddpl_tensor *target,
                      int64_t *N, int64_t *C, int64_t *S)
{
    char a[128], b[128];
    if (logp->ndim == 0)
        return ddpl_error("%s: input must have at least 1 dimension (C) or (N,C,...)", op);
    bool ok = target->ndim == (logp->ndim == 1 ? 0 : logp->ndim - 1);
    if (ok && logp->ndim >= 2) {
        ok = target->sizes[0] == logp->sizes[0];
        for (int d = 2; ok && d < logp->ndim; d++) ok = target->sizes[d - 1] == logp->sizes[d];
    }
    if (!ok) {
        char expect[128];
        int64_t es[DDPL_MAX_DIMS];
        int en = 0;
        for (int d = 0; d < logp->ndim; d++)
            if (d != (logp->ndim == 1 ? 0 : 1)) es[en++] = logp->sizes[d];
        return ddpl_error("%s: expected target of shape %s for input of shape %s, got %s", op,
                          ddpl_sizes_str(en, es, expect, sizeof expect),
                          ddpl_shape_str(logp, a, sizeof a), ddpl_shape_str(target, b, sizeof b));
    }
    if (logp->ndim == 1) {
        *N = 1, *C = logp->sizes[0], *S = 1;
    } else {
        *N = logp->sizes[0], *C = logp->sizes[1];
        *S = ddpl_numel(logp->ndim - 2, logp->sizes + 2);
    }
    return 0;
}

/* The target of both losses: int64 class indices on the input's device. */
static int check_target(const char *op, const ddpl_tensor *x, const ddpl_tensor *target)
{
    if (target->dtype != DDPL_INT64)
        return ddpl_error("%s: target must be an int64 tensor of class indices, got %s", op,
                          ddpl_dtype_name((ddpl_dtype)target->dtype)),
               -1;
    return ddpl_check_same_device(op, x, target);
}

/* The outputs both losses write, of x's dtype on x's device: loss (the target's shape for
 * reduction 'none', else 0-dim) and total_weight (0-dim). Both NULL when one fails. */
static void loss_outputs(const ddpl_tensor *x, const ddpl_tensor *target, bool none,
                         ddpl_tensor **loss, ddpl_tensor **total)
{
    ddpl_dtype dt = (ddpl_dtype)x->dtype;
    *loss = ddpl_tensor_new(none ? target->ndim : 0, target->sizes, dt, x->device);
    *total = *loss ? ddpl_tensor_new(0, NULL, dt, x->device) : NULL;
    if (!*total) {
        ddpl_tensor_release(*loss);
        *loss = NULL;
    }
}

/* Records a loss's backward node over input x (when x needs a gradient): target, weight and
 * total_weight in slots 0 to 2, where nll_loss_grad_* read them, then the n_extra tensors of
 * extra (the fused kernel's logits and row statistics). */
static void record_loss(const char *name, ddpl_backward_fn fn, ddpl_tensor *x, ddpl_tensor *loss,
                        ddpl_tensor *t2, ddpl_tensor *wc, ddpl_tensor *total, nll_ctx ctx,
                        int n_extra, ddpl_tensor *const *extra)
{
    if (!ddpl_grad_needed(1, &x)) return;
    ddpl_node *n = ddpl_node_new(name, fn, 1, &x);
    ddpl_node_save(n, t2);
    ddpl_node_save(n, wc);
    ddpl_node_save(n, total);
    for (int i = 0; i < n_extra; i++) ddpl_node_save(n, extra[i]);
    *DDPL_NODE_CTX(n, nll_ctx) = ctx;
    ddpl_set_history(loss, n);
}

/* The end of both losses: the n temporaries of tmp are released, and on failure (rc < 0) the
 * loss too; returns the loss or NULL. */
static ddpl_tensor *loss_finish(int rc, ddpl_tensor *loss, size_t n, ddpl_tensor *const *tmp)
{
    for (size_t i = 0; i < n; i++) ddpl_tensor_release(tmp[i]);
    if (rc == 0) return loss;
    ddpl_tensor_release(loss);
    return NULL;
}

/* nll_loss that also returns total_weight (0-dim, new reference) for cross_entropy. */
static ddpl_tensor *nll_impl(const char *op, ddpl_tensor *logp, ddpl_tensor *target,
                             ddpl_tensor *weight, ddpl_reduction reduction, int64_t ignore_index,
                             ddpl_tensor **total_out)
{
    int64_t N, C, S;
    if (nn_check_float(op, "input", logp) < 0 || check_reduction(op, reduction) < 0 ||
        check_target(op, logp, target) < 0 || nll_shapes(op, logp, target, &N, &C, &S) < 0 ||
        nn_check_param(op, "weight", weight, logp, C) < 0)
        return NULL;
    int64_t s3[3] = {N, C, S}, s2[2] = {N, S};
    ddpl_tensor *lc = nn_contiguous(logp), *l3 = lc ? nn_alias(lc, 3, s3) : NULL;
    ddpl_tensor *tc = l3 ? nn_contiguous(target) : NULL, *t2 = tc ? nn_alias(tc, 2, s2) : NULL;
    ddpl_tensor *wc = t2 ? nn_contiguous(weight) : NULL;
    bool none = reduction == DDPL_REDUCTION_NONE;
    ddpl_tensor *loss = NULL, *total = NULL;
    /* any of the contiguous copies may have failed (out of memory): nothing runs then */
    if (l3 && t2 && (wc || !weight)) loss_outputs(logp, target, none, &loss, &total);
    ddpl_nll_params p = {(int)reduction, ignore_index};
    ddpl_tensor *l_out = loss ? nn_alias(loss, none ? 2 : 0, s2) : NULL;
    ddpl_tensor *outs[2] = {l_out, total}, *ins[3] = {l3, t2, wc};
    int rc = l_out && total ? ddpl_run_kernel(DDPL_OP_NLL_LOSS, logp->device, outs, ins, &p) : -1;
    if (rc < 0) {
        nn_rename_error("tensor", op);   /* a copy or an output could not be allocated */
        nn_rename_error("nll_loss", op); /* the kernel names nll_loss */
    }
    if (rc == 0)
        record_loss("NllLossBackward0", nll_loss_backward, logp, loss, t2, wc, total,
                    (nll_ctx){p, C}, 0, NULL);
    ddpl_tensor *tmp[] = {lc, l3, tc, t2, wc, l_out};
    loss = loss_finish(rc, loss, sizeof tmp / sizeof *tmp, tmp);
    if (loss && total_out)
        *total_out = total;
    else
        ddpl_tensor_release(total);
    return loss;
}

ddpl_tensor *ddpl_nll_loss(ddpl_tensor *logp, ddpl_tensor *target, ddpl_tensor *weight,
                           ddpl_reduction reduction, int64_t ignore_index)
{
    if (!ddpl_autocast_enabled((ddpl_device_type)logp->device.type))
        return nll_impl("nll_loss", logp, target, weight, reduction, ignore_index, NULL);
    ddpl_tensor *c[2]; /* autocast: 16-bit log-probabilities compute in float32 */
    ddpl_tensor *r = ddpl_autocast_upcast_n(2, OP_INPUTS(logp, weight), c) == 0
                         ? nll_impl("nll_loss", c[0], target, c[1], reduction, ignore_index, NULL)
                         : NULL;
    ddpl_autocast_release_n(2, c);
    return r;
}

/* ---- cross_entropy ---- */

/* a * x + b * y for tensors x, y and numbers a, b (with autograd). */
static ddpl_tensor *lincomb(double a, ddpl_tensor *x, double b, ddpl_tensor *y)
{
    ddpl_tensor *na = ddpl_wrapped_number(a, false), *nb = ddpl_wrapped_number(b, false);
    ddpl_tensor *ax = ddpl_mul(x, na), *by = ax ? ddpl_mul(y, nb) : NULL;
    ddpl_tensor *r = by ? ddpl_add(ax, by) : NULL;
    ddpl_tensor *tmp[] = {na, nb, ax, by};
    for (size_t i = 0; i < sizeof tmp / sizeof *tmp; i++) ddpl_tensor_release(tmp[i]);
    return r;
}

/* reduce(smooth) of the label-smoothing term; logp (N,C,d...) or (C), class dim cd. */
static ddpl_tensor *smooth_term(ddpl_tensor *logp, ddpl_tensor *target, ddpl_tensor *weight,
                                ddpl_reduction reduction, int64_t ignore_index, int cd,
                                ddpl_tensor *total)
{
    ddpl_tensor *weighted = NULL;
    if (weight) { /* weight viewed as (1,C,1,...) to broadcast along the class dim */
        int64_t ws[DDPL_MAX_DIMS];
        for (int d = 0; d < logp->ndim; d++) ws[d] = d == cd ? weight->sizes[0] : 1;
        ddpl_tensor *wv = ddpl_reshape(weight, logp->ndim, ws);
        weighted = wv ? ddpl_mul(logp, wv) : NULL;
        ddpl_tensor_release(wv);
    } else {
        weighted = ddpl_tensor_retain(logp);
    }
    ddpl_tensor *s = weighted ? ddpl_sum_dim(weighted, cd, false) : NULL; /* target's shape */
    ddpl_tensor_release(weighted);
    ddpl_tensor *ii = s ? ddpl_wrapped_number((double)ignore_index, true) : NULL;
    ddpl_tensor *ignored = ii ? ddpl_eq(target, ii) : NULL;
    ddpl_tensor *masked = ignored ? ddpl_masked_fill(s, ignored, 0.0) : NULL;
    ddpl_tensor *neg = masked ? ddpl_neg(masked) : NULL;
    ddpl_tensor *tmp[] = {s, ii, ignored, masked};
    for (size_t i = 0; i < sizeof tmp / sizeof *tmp; i++) ddpl_tensor_release(tmp[i]);
    if (!neg || reduction == DDPL_REDUCTION_NONE) return neg;
    ddpl_tensor *sum = ddpl_sum(neg);
    ddpl_tensor_release(neg);
    if (!sum || reduction == DDPL_REDUCTION_SUM) return sum;
    ddpl_tensor *mean = ddpl_div(sum, total);
    ddpl_tensor_release(sum);
    return mean;
}

static ddpl_tensor *cross_entropy_impl(ddpl_tensor *logits, ddpl_tensor *target,
                                       ddpl_tensor *weight, ddpl_reduction reduction,
                                       int64_t ignore_index, double label_smoothing);

/* The fused kernel (CROSS_ENTROPY, backends that have it) for logits (N,C) or (C), contiguous,
 * without label smoothing: no (N,C) log-probabilities are kept, the node saves the logits and
 * per row the max and log(sum exp(x - max)). Its context is nll's, so that the create_graph path
 * reuses nll's gradient (nll_loss_grad_kernel reads the context and the target saved as (N,1)).
 * Saving the logits (where the composition saved its log-probabilities) means that changing them in
 * place before backward is refused, where PyTorch, which saves log_softmax's output, allows it. */
static bool cross_entropy_fusable(const ddpl_tensor *logits, double label_smoothing)
{
    return label_smoothing == 0 && (logits->ndim == 1 || logits->ndim == 2) &&
           ddpl_tensor_is_contiguous(logits) &&
           ddpl_backend_supports(logits->device, DDPL_OP_CROSS_ENTROPY) &&
           ddpl_backend_supports(logits->device, DDPL_OP_CROSS_ENTROPY_BACKWARD);
}

/* saved: 0 target (N,1), 1 weight?, 2 total_weight, 3 logits (as given), 4 row stats (N,2) */
static int cross_entropy_backward(ddpl_node *n, ddpl_tensor *grad, ddpl_tensor **gi)
{
    ddpl_tensor *target = ddpl_node_saved(n, 0), *w = ddpl_node_saved(n, 1);
    ddpl_tensor *total = ddpl_node_saved(n, 2), *logits = ddpl_node_saved(n, 3);
    ddpl_tensor *stats = ddpl_node_saved(n, 4);
    if (!target || (!w && !ddpl_node_saved_is_null(n, 1)) || !total || !logits || !stats) return -1;
    if (ddpl_is_grad_enabled()) {
        /* create_graph: log_softmax's backward written with recording ops over nll's gradient,
         * dx = dlogp - softmax(logits) * sum(dlogp) along the classes */
        bool linear =
            ddpl_requires_grad(grad) && !(w && ddpl_requires_grad(w)) && !ddpl_requires_grad(total);
        ddpl_tensor *dlogp = linear ? nll_loss_grad_recorded(n, grad, target, w, total)
                                    : nll_loss_grad_kernel(n, grad, target, w, total);
        int cd = logits->ndim - 1;
        ddpl_tensor *p = dlogp ? ddpl_softmax(logits, cd) : NULL;
        ddpl_tensor *s = p ? ddpl_sum_dim(dlogp, cd, true) : NULL;
        ddpl_tensor *ps = s ? ddpl_mul(p, s) : NULL;
        gi[0] = ps ? ddpl_sub(dlogp, ps) : NULL;
        ddpl_tensor *tmp[] = {dlogp, p, s, ps};
        for (size_t i = 0; i < sizeof tmp / sizeof *tmp; i++) ddpl_tensor_release(tmp[i]);
        if (!gi[0]) return -1;
        return ddpl_mark_not_differentiable("cross_entropy", n, grad, 1, gi, false);
    }
    int64_t N = stats->sizes[0], s2[2] = {N, DDPL_NODE_CTX(n, nll_ctx)->C};
    ddpl_tensor *g = nn_contiguous(grad);
    ddpl_tensor *dx =
        g ? ddpl_tensor_new(logits->ndim, logits->sizes, (ddpl_dtype)logits->dtype, logits->device)
          : NULL;
    ddpl_tensor *dx2 = dx ? nn_alias(dx, 2, s2) : NULL, *l2 = dx2 ? nn_alias(logits, 2, s2) : NULL;
    ddpl_tensor *ins[6] = {g, l2, target, w, total, stats};
    int rc = l2 ? ddpl_run_kernel(DDPL_OP_CROSS_ENTROPY_BACKWARD, dx->device, &dx2, ins,
                                  &DDPL_NODE_CTX(n, nll_ctx)->p)
                : -1;
    ddpl_tensor *tmp[] = {g, dx2, l2};
    for (size_t i = 0; i < sizeof tmp / sizeof *tmp; i++) ddpl_tensor_release(tmp[i]);
    if (rc < 0) {
        ddpl_tensor_release(dx);
        return -1;
    }
    gi[0] = dx;
    return 0;
}

/* Shapes are checked (nll_shapes); N rows of C classes. */
static ddpl_tensor *cross_entropy_fused(const char *op, ddpl_tensor *logits, ddpl_tensor *target,
                                        ddpl_tensor *weight, ddpl_reduction reduction,
                                        int64_t ignore_index, int64_t N, int64_t C)
{
    if (check_target(op, logits, target) < 0 || nn_check_param(op, "weight", weight, logits, C) < 0)
        return NULL;
    int64_t s2[2] = {N, C}, t2s[2] = {N, 1}, st[2] = {N, 2};
    bool none = reduction == DDPL_REDUCTION_NONE;
    ddpl_tensor *l2 = nn_alias(logits, 2, s2);
    ddpl_tensor *tc = l2 ? nn_contiguous(target) : NULL, *t2 = tc ? nn_alias(tc, 2, t2s) : NULL;
    ddpl_tensor *wc = t2 ? nn_contiguous(weight) : NULL;
    ddpl_tensor *loss = NULL, *total = NULL;
    if (t2 && (wc || !weight)) loss_outputs(logits, target, none, &loss, &total);
    ddpl_tensor *stats =
        total ? ddpl_tensor_new(2, st, (ddpl_dtype)logits->dtype, logits->device) : NULL;
    ddpl_nll_params p = {(int)reduction, ignore_index};
    ddpl_tensor *outs[3] = {loss, total, stats}, *ins[3] = {l2, t2, wc};
    int rc = stats ? ddpl_run_kernel(DDPL_OP_CROSS_ENTROPY, logits->device, outs, ins, &p) : -1;
    if (rc < 0) nn_rename_error("tensor", op); /* a copy or an output could not be allocated */
    if (rc == 0)
        record_loss("CrossEntropyBackward0", cross_entropy_backward, logits, loss, t2, wc, total,
                    (nll_ctx){p, C}, 2, (ddpl_tensor *[]){logits, stats});
    ddpl_tensor *tmp[] = {l2, tc, t2, wc, total, stats};
    return loss_finish(rc, loss, sizeof tmp / sizeof *tmp, tmp);
}

/* Under autocast 16-bit logits (and class weights) compute in float32: the loss is float32
 * (PyTorch's float32 list). */
ddpl_tensor *ddpl_cross_entropy(ddpl_tensor *logits, ddpl_tensor *target, ddpl_tensor *weight,
                                ddpl_reduction reduction, int64_t ignore_index,
                                double label_smoothing)
{
    if (!ddpl_autocast_enabled((ddpl_device_type)logits->device.type))
        return cross_entropy_impl(logits, target, weight, reduction, ignore_index, label_smoothing);
    ddpl_tensor *c[2];
    ddpl_tensor *r =
        ddpl_autocast_upcast_n(2, OP_INPUTS(logits, weight), c) == 0
            ? cross_entropy_impl(c[0], target, c[1], reduction, ignore_index, label_smoothing)
            : NULL;
    ddpl_autocast_release_n(2, c);
    return r;
}

static ddpl_tensor *cross_entropy_impl(ddpl_tensor *logits, ddpl_tensor *target,
                                       ddpl_tensor *weight, ddpl_reduction reduction,
                                       int64_t ignore_index, double label_smoothing)
{
    const char *op = "cross_entropy";
    if (!(label_smoothing >= 0 && label_smoothing <= 1))
        return ddpl_error("%s: label_smoothing must be between 0.0 and 1.0, got %g", op,
                          label_smoothing),
               NULL;
    if (nn_check_float(op, "input", logits) < 0 || check_reduction(op, reduction) < 0) return NULL;
    if (logits->ndim == 0)
        return ddpl_error("%s: input must have at least 1 dimension (C) or (N,C,...)", op), NULL;
    int64_t N, C, S;
    if (nll_shapes(op, logits, target, &N, &C, &S) < 0) return NULL;
    if (cross_entropy_fusable(logits, label_smoothing))
        return cross_entropy_fused(op, logits, target, weight, reduction, ignore_index, N, C);
    int cd = logits->ndim == 1 ? 0 : 1;
    ddpl_tensor *logp = ddpl_log_softmax(logits, cd);
    if (!logp) return NULL;
    ddpl_tensor *total = NULL;
    ddpl_tensor *nll = nll_impl(op, logp, target, weight, reduction, ignore_index, &total);
    ddpl_tensor *r = nll;
    if (nll && label_smoothing > 0) {
        ddpl_tensor *sm = smooth_term(logp, target, weight, reduction, ignore_index, cd, total);
        r = sm ? lincomb(1 - label_smoothing, nll, label_smoothing / (double)C, sm) : NULL;
        ddpl_tensor_release(sm);
        ddpl_tensor_release(nll);
    }
    ddpl_tensor_release(total);
    ddpl_tensor_release(logp);
    return r;
}

/* ---- mse_loss ---- */
static ddpl_tensor *mse_loss_impl(ddpl_tensor *input, ddpl_tensor *target,
                                  ddpl_reduction reduction);

/* Under autocast 16-bit input and target compute in float32 and the loss is float32 (on both
 * device types' float32 lists). */
ddpl_tensor *ddpl_mse_loss(ddpl_tensor *input, ddpl_tensor *target, ddpl_reduction reduction)
{
    if (!ddpl_autocast_enabled((ddpl_device_type)input->device.type))
        return mse_loss_impl(input, target, reduction);
    ddpl_tensor *c[2];
    ddpl_tensor *r = ddpl_autocast_upcast_n(2, OP_INPUTS(input, target), c) == 0
                         ? mse_loss_impl(c[0], c[1], reduction)
                         : NULL;
    ddpl_autocast_release_n(2, c);
    return r;
}

static ddpl_tensor *mse_loss_impl(ddpl_tensor *input, ddpl_tensor *target, ddpl_reduction reduction)
{
    if (check_reduction("mse_loss", reduction) < 0 || ddpl_check_floating("mse_loss", input) < 0)
        return NULL;
    int nd;
    int64_t bs[DDPL_MAX_DIMS];
    if (ddpl_broadcast_shape("mse_loss", input->ndim, input->sizes, target->ndim, target->sizes,
                             &nd, bs) < 0)
        return NULL;
    ddpl_tensor *d = ddpl_sub(input, target);
    ddpl_tensor *sq = d ? ddpl_mul(d, d) : NULL;
    ddpl_tensor_release(d);
    if (!sq || reduction == DDPL_REDUCTION_NONE) return sq;
    ddpl_tensor *r = reduction == DDPL_REDUCTION_SUM ? ddpl_sum(sq) : ddpl_mean(sq);
    ddpl_tensor_release(sq);
    return r;
}
