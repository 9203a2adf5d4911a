/* ops/nn_norm.c: batch and layer normalisation with their gradients.
 * defines: ddpl_batch_norm, ddpl_layer_norm.
 *
 * batch_norm follows PyTorch: in training the batch mean and biased variance normalise, and the
 * running stats (when given) move towards the batch mean and the *unbiased* variance with
 * `momentum`; in evaluation the running stats normalise. layer_norm normalises over the last
 * n dims with the biased variance. The kernels return the mean and 1/sqrt(var + eps) they used,
 * which backward reuses. */
#include "autocast.h"
#include "nn_common.h"

/* ---- batch_norm ---- */
typedef struct {
    ddpl_batch_norm_params p;
} bn_ctx;

/* Runs a normalisation backward kernel. inputs 0 x, 1 weight?, 2 bias?; saved: 0 x (as the
 * kernel saw it: contiguous, canonical shape), 1 weight?, 2 mean, 3 invstd. */
static int norm_backward_run(ddpl_op op, ddpl_node *n, ddpl_tensor *grad, const void *params,
                             ddpl_tensor **gi)
{
    ddpl_tensor *x = ddpl_node_saved(n, 0), *w = ddpl_node_saved(n, 1);
    ddpl_tensor *mean = ddpl_node_saved(n, 2), *invstd = ddpl_node_saved(n, 3);
    if (!x || (!w && !ddpl_node_saved_is_null(n, 1)) || !mean || !invstd) return -1;
    ddpl_tensor *g = nn_contiguous(grad), *g2 = g ? nn_alias(g, x->ndim, x->sizes) : NULL;
    ddpl_tensor *outs[3] = {NULL, NULL, NULL}, *views[3] = {NULL, NULL, NULL};
    int rc = g2 ? 0 : -1;
    for (int i = 0; i < 3 && rc == 0; i++) {
        ddpl_edge *e = &n->edges[i];
        if (!ddpl_node_needs_grad(n, i)) continue;
        outs[i] = ddpl_tensor_new(e->ndim, e->sizes, (ddpl_dtype)x->dtype, x->device);
        /* the kernel writes dx in the canonical shape of x */
        views[i] =
            outs[i] ? (i == 0 ? nn_alias(outs[i], x->ndim, x->sizes) : ddpl_tensor_retain(outs[i]))
                    : NULL;
        if (!views[i]) rc = -1;
    }
    ddpl_tensor *ins[5] = {g2, x, w, mean, invstd};
    if (rc == 0) rc = ddpl_run_kernel(op, x->device, views, ins, params);
    ddpl_tensor_release(g);
    ddpl_tensor_release(g2);
    for (int i = 0; i < 3; i++) {
        ddpl_tensor_release(views[i]);
        if (rc == 0)
            gi[i] = outs[i];
        else
            ddpl_tensor_release(outs[i]);
    }
    return rc;
}

/* The geometry of a normalisation's gradients written with ops (create_graph). */
typedef struct {
    int ndim;                 /* of the canonical shape: 2 (M,N) layer_norm, 3 (N,C,S) batch */
    int64_t sizes[3];         /* the canonical shape x and grad are reshaped to */
    int n_stat, stat_dims[2]; /* the statistics' dims (kept) */
    int n_sum, sum_dims[2];   /* what weight and bias gradients sum over */
    int64_t param_sizes[3];   /* weight and bias viewed to broadcast against x */
    double eps;
} norm_geometry;

/* create_graph: a normalisation's gradients written with ops from the input x as given (saved
 * with its history), so they are differentiated through the statistics too:
 *   xhat = (x - mean) rstd, rstd = 1/sqrt(var + eps), dxhat = g w (g without weight)
 *   dx = rstd (dxhat - mean(dxhat) - xhat mean(dxhat xhat)),  dw = sum(g xhat),  db = sum(g)
 * Statistics given (fixed_mean, fixed_rstd: batch_norm in evaluation, the running ones) are
 * constants: then dx = rstd dxhat. */
static int norm_backward_recorded(ddpl_node *n, ddpl_tensor *grad, ddpl_tensor *x, ddpl_tensor *w,
                                  ddpl_tensor *fixed_mean, ddpl_tensor *fixed_rstd,
                                  const norm_geometry *geo, ddpl_tensor **gi)
{
    op_temps k = {0};
    const int *sd = geo->stat_dims;
    ddpl_tensor *xr = OP_T(&k, ddpl_reshape(x, geo->ndim, geo->sizes));
    ddpl_tensor *g = OP_T(&k, ddpl_reshape(grad, geo->ndim, geo->sizes));
    ddpl_tensor *mean, *rstd;
    if (fixed_mean) {
        mean = OP_T(&k, ddpl_reshape(fixed_mean, geo->ndim, geo->param_sizes));
        rstd = OP_T(&k, ddpl_reshape(fixed_rstd, geo->ndim, geo->param_sizes));
    } else {
        mean = OP_T(&k, ddpl_mean_dims(xr, geo->n_stat, sd, true));
    }
    ddpl_tensor *xm = OP_T(&k, ddpl_sub(xr, mean));
    if (!fixed_mean) {
        ddpl_tensor *var =
            OP_T(&k, ddpl_mean_dims(OP_T(&k, ddpl_mul(xm, xm)), geo->n_stat, sd, true));
        rstd = OP_T(&k, ddpl_rsqrt(OP_T(&k, ddpl_add(var, OP_NUM(&k, geo->eps)))));
    }
    ddpl_tensor *xhat = OP_T(&k, ddpl_mul(xm, rstd));
    ddpl_tensor *dxhat =
        w ? OP_T(&k, ddpl_mul(g, OP_T(&k, ddpl_reshape(w, geo->ndim, geo->param_sizes)))) : g;
    int rc = 0;
    if (!k.failed && ddpl_node_needs_grad(n, 0)) {
        ddpl_tensor *dx;
        if (fixed_mean) {
            dx = OP_T(&k, ddpl_mul(dxhat, rstd));
        } else {
            ddpl_tensor *m1 = OP_T(&k, ddpl_mean_dims(dxhat, geo->n_stat, sd, true));
            ddpl_tensor *m2 =
                OP_T(&k, ddpl_mean_dims(OP_T(&k, ddpl_mul(dxhat, xhat)), geo->n_stat, sd, true));
            ddpl_tensor *inner =
                OP_T(&k, ddpl_sub(OP_T(&k, ddpl_sub(dxhat, m1)), OP_T(&k, ddpl_mul(xhat, m2))));
            dx = OP_T(&k, ddpl_mul(inner, rstd));
        }
        gi[0] = k.failed ? NULL : ddpl_reshape(dx, n->edges[0].ndim, n->edges[0].sizes);
        if (!gi[0]) rc = -1;
    }
    for (int i = 1; i < 3 && rc == 0 && !k.failed; i++) { /* 1 weight: g xhat, 2 bias: g */
        if (!ddpl_node_needs_grad(n, i)) continue;
        ddpl_tensor *terms = i == 1 ? OP_T(&k, ddpl_mul(g, xhat)) : g;
        ddpl_tensor *summed = OP_T(&k, ddpl_sum_dims(terms, geo->n_sum, geo->sum_dims, false));
        gi[i] = k.failed ? NULL : ddpl_reshape(summed, n->edges[i].ndim, n->edges[i].sizes);
        if (!gi[i]) rc = -1;
    }
    if (k.failed) rc = -1;
    op_temps_release(&k);
    return rc;
}

/* Whether backward records (create_graph) and the gradients need a graph. */
static bool norm_records(ddpl_node *n, ddpl_tensor *grad)
{
    bool record = ddpl_grad_needed(1, &grad);
    for (int i = 0; i < 3 && ddpl_is_grad_enabled(); i++)
        record = record || ddpl_node_needs_grad(n, i);
    return record;
}

/* saved for create_graph: 4 x and 5 weight as given */
static int batch_norm_backward(ddpl_node *n, ddpl_tensor *grad, ddpl_tensor **gi)
{
    const ddpl_batch_norm_params *p = &DDPL_NODE_CTX(n, bn_ctx)->p;
    if (!norm_records(n, grad))
        return norm_backward_run(DDPL_OP_BATCH_NORM_BACKWARD, n, grad, p, gi);
    ddpl_tensor *x3 = ddpl_node_saved(n, 0), *x = ddpl_node_saved(n, 4);
    ddpl_tensor *w = ddpl_node_saved(n, 5);
    ddpl_tensor *mean = ddpl_node_saved(n, 2), *invstd = ddpl_node_saved(n, 3);
    if (!x3 || !x || (!w && !ddpl_node_saved_is_null(n, 5)) || !mean || !invstd) return -1;
    int64_t C = x3->sizes[1];
    norm_geometry geo = {3,     {x3->sizes[0], C, x3->sizes[2]}, 2, {0, 2}, 2, {0, 2}, {1, C, 1},
                         p->eps};
    return norm_backward_recorded(n, grad, x, w, p->training ? NULL : mean,
                                  p->training ? NULL : invstd, &geo, gi);
}

static int check_running(const char *what, ddpl_tensor *t)
{
    if (!t) return 0;
    if (!ddpl_tensor_is_contiguous(t))
        return ddpl_error("batch_norm: %s must be contiguous (it is updated in place)", what);
    return ddpl_check_inplace("batch_norm", t);
}

static ddpl_tensor *batch_norm_impl(ddpl_tensor *x, ddpl_tensor *running_mean,
                                    ddpl_tensor *running_var, ddpl_tensor *weight,
                                    ddpl_tensor *bias, bool training, double momentum, double eps);

/* Under autocast y, computed in float32 from a 16-bit x: float32 under CUDA's float32 list; on
 * the CPU (not on its list) rounded back to x's dtype, as PyTorch's CPU autocast returns it. */
static ddpl_tensor *autocast_norm_result(const ddpl_tensor *x, ddpl_tensor *y)
{
    bool half = x->dtype == DDPL_FLOAT16 || x->dtype == DDPL_BFLOAT16;
    if (!y || !half || ddpl_autocast_upcasts_norms((ddpl_device_type)x->device.type)) return y;
    ddpl_tensor *r = ddpl_to_dtype(y, (ddpl_dtype)x->dtype);
    ddpl_tensor_release(y);
    return r;
}

/* Under autocast a 16-bit input (a conv's bfloat16 output) and parameters compute in float32;
 * the result's dtype is autocast_norm_result's; running stats stay as they are. */
ddpl_tensor *ddpl_batch_norm(ddpl_tensor *x, ddpl_tensor *running_mean, ddpl_tensor *running_var,
                             ddpl_tensor *weight, ddpl_tensor *bias, bool training, double momentum,
                             double eps)
{
    if (!ddpl_autocast_enabled((ddpl_device_type)x->device.type))
        return batch_norm_impl(x, running_mean, running_var, weight, bias, training, momentum, eps);
    ddpl_tensor *c[3];
    ddpl_tensor *y =
        ddpl_autocast_upcast_n(3, OP_INPUTS(x, weight, bias), c) == 0
            ? batch_norm_impl(c[0], running_mean, running_var, c[1], c[2], training, momentum, eps)
            : NULL;
    ddpl_autocast_release_n(3, c);
    return autocast_norm_result(x, y);
}

static ddpl_tensor *batch_norm_impl(ddpl_tensor *x, ddpl_tensor *running_mean,
                                    ddpl_tensor *running_var, ddpl_tensor *weight,
                                    ddpl_tensor *bias, bool training, double momentum, double eps)
{
    char sx[128];
    if (nn_check_float("batch_norm", "input", x) < 0) return NULL;
    if (x->ndim < 2)
        return ddpl_error("batch_norm: expected an input of at least 2 dimensions (N,C,...), got "
                          "shape %s",
                          ddpl_shape_str(x, sx, sizeof sx)),
               NULL;
    int64_t N = x->sizes[0], C = x->sizes[1], S = ddpl_numel(x->ndim - 2, x->sizes + 2);
    if (nn_check_param("batch_norm", "weight", weight, x, C) < 0 ||
        nn_check_param("batch_norm", "bias", bias, x, C) < 0 ||
        nn_check_param("batch_norm", "running_mean", running_mean, x, C) < 0 ||
        nn_check_param("batch_norm", "running_var", running_var, x, C) < 0)
        return NULL;
    if (!training && (!running_mean || !running_var))
        return ddpl_error("batch_norm: running_mean and running_var are required in evaluation "
                          "mode"),
               NULL;
    if (training && N * S <= 1)
        return ddpl_error("batch_norm: expected more than 1 value per channel when training, got "
                          "input of shape %s",
                          ddpl_shape_str(x, sx, sizeof sx)),
               NULL;
    if (!(eps >= 0)) return ddpl_error("batch_norm: eps must be >= 0, got %g", eps), NULL;
    if (training && (check_running("running_mean", running_mean) < 0 ||
                     check_running("running_var", running_var) < 0))
        return NULL;

    int64_t s3[3] = {N, C, S};
    ddpl_tensor *xc = nn_contiguous(x), *x3 = xc ? nn_alias(xc, 3, s3) : NULL;
    ddpl_tensor *y =
        x3 ? ddpl_tensor_new(x->ndim, x->sizes, (ddpl_dtype)x->dtype, x->device) : NULL;
    ddpl_tensor *y3 = y ? nn_alias(y, 3, s3) : NULL;
    ddpl_tensor *mean = y3 ? ddpl_tensor_new(1, &C, (ddpl_dtype)x->dtype, x->device) : NULL;
    ddpl_tensor *invstd = mean ? ddpl_tensor_new(1, &C, (ddpl_dtype)x->dtype, x->device) : NULL;
    ddpl_batch_norm_params p = {training, momentum, eps};
    ddpl_tensor *outs[3] = {y3, mean, invstd};
    ddpl_tensor *ins[5] = {x3, weight, bias, running_mean, running_var};
    int rc = invstd ? ddpl_run_kernel(DDPL_OP_BATCH_NORM, x->device, outs, ins, &p) : -1;
    if (rc == 0 && training) {
        if (running_mean) ddpl_storage_bump_version(running_mean->storage);
        if (running_var) ddpl_storage_bump_version(running_var->storage);
    }
    ddpl_tensor *args[3] = {x, weight, bias};
    if (rc == 0 && ddpl_grad_needed(3, args)) {
        ddpl_node *n = ddpl_node_new("NativeBatchNormBackward0", batch_norm_backward, 3, args);
        ddpl_node_save(n, x3);
        ddpl_node_save(n, weight);
        ddpl_node_save(n, mean);
        ddpl_node_save(n, invstd);
        ddpl_node_save(n, x);      /* for create_graph (norm_backward_recorded) */
        ddpl_node_save(n, weight); /* with its history, NULL keeps the slot */
        DDPL_NODE_CTX(n, bn_ctx)->p = p;
        ddpl_set_history(y, n);
    }
    ddpl_tensor *tmp[] = {xc, x3, y3, mean, invstd};
    for (size_t i = 0; i < sizeof tmp / sizeof *tmp; i++) ddpl_tensor_release(tmp[i]);
    if (rc < 0) {
        ddpl_tensor_release(y);
        return NULL;
    }
    return y;
}

/* ---- layer_norm ---- */
typedef struct {
    double eps;
    int64_t M, N; /* rows (the leading dims) and the normalized size */
} ln_ctx;

/* saved for create_graph: 4 x and 5 weight as given */
static int layer_norm_backward(ddpl_node *n, ddpl_tensor *grad, ddpl_tensor **gi)
{
    if (!norm_records(n, grad))
        return norm_backward_run(DDPL_OP_LAYER_NORM_BACKWARD, n, grad, NULL, gi);
    ln_ctx *c = DDPL_NODE_CTX(n, ln_ctx);
    ddpl_tensor *x = ddpl_node_saved(n, 4), *w = ddpl_node_saved(n, 5);
    if (!x || (!w && !ddpl_node_saved_is_null(n, 5))) return -1;
    norm_geometry geo = {2, {c->M, c->N}, 1, {1}, 1, {0}, {1, c->N}, c->eps};
    return norm_backward_recorded(n, grad, x, w, NULL, NULL, &geo, gi);
}

/* weight/bias of layer_norm: the normalized shape (x's last n dims), or NULL. */
static int check_ln_param(const char *what, const ddpl_tensor *p, const ddpl_tensor *x, int n)
{
    if (!p) return 0;
    if (ddpl_check_same_device("layer_norm", x, p) < 0) return -1;
    if (p->dtype != x->dtype)
        return ddpl_error("layer_norm: %s has dtype %s but the input has %s", what,
                          ddpl_dtype_name((ddpl_dtype)p->dtype),
                          ddpl_dtype_name((ddpl_dtype)x->dtype));
    bool ok = p->ndim == n;
    for (int i = 0; ok && i < n; i++) ok = p->sizes[i] == x->sizes[x->ndim - n + i];
    if (!ok) {
        char sp[128], sn[128], sx[128];
        return ddpl_error("layer_norm: %s of shape %s does not match the normalized shape %s of "
                          "input %s",
                          what, ddpl_shape_str(p, sp, sizeof sp),
                          ddpl_sizes_str(n, x->sizes + x->ndim - n, sn, sizeof sn),
                          ddpl_shape_str(x, sx, sizeof sx));
    }
    return 0;
}

static ddpl_tensor *layer_norm_impl(ddpl_tensor *x, int n_normalized, ddpl_tensor *weight,
                                    ddpl_tensor *bias, double eps);

/* Under autocast 16-bit x, weight and bias compute in float32; the result's dtype is
 * autocast_norm_result's. */
ddpl_tensor *ddpl_layer_norm(ddpl_tensor *x, int n_normalized, ddpl_tensor *weight,
                             ddpl_tensor *bias, double eps)
{
    if (!ddpl_autocast_enabled((ddpl_device_type)x->device.type))
        return layer_norm_impl(x, n_normalized, weight, bias, eps);
    ddpl_tensor *c[3];
    ddpl_tensor *y = ddpl_autocast_upcast_n(3, OP_INPUTS(x, weight, bias), c) == 0
                         ? layer_norm_impl(c[0], n_normalized, c[1], c[2], eps)
                         : NULL;
    ddpl_autocast_release_n(3, c);
    return autocast_norm_result(x, y);
}

static ddpl_tensor *layer_norm_impl(ddpl_tensor *x, int n_normalized, ddpl_tensor *weight,
                                    ddpl_tensor *bias, double eps)
{
    if (nn_check_float("layer_norm", "input", x) < 0) return NULL;
    if (n_normalized < 1 || n_normalized > x->ndim) {
        char sx[128];
        return ddpl_error("layer_norm: cannot normalize over the last %d dimensions of an input "
                          "of shape %s",
                          n_normalized, ddpl_shape_str(x, sx, sizeof sx)),
               NULL;
    }
    if (check_ln_param("weight", weight, x, n_normalized) < 0 ||
        check_ln_param("bias", bias, x, n_normalized) < 0)
        return NULL;
    if (!(eps >= 0)) return ddpl_error("layer_norm: eps must be >= 0, got %g", eps), NULL;
    int lead = x->ndim - n_normalized;
    int64_t M = ddpl_numel(lead, x->sizes), N = ddpl_numel(n_normalized, x->sizes + lead);
    int64_t s2[2] = {M, N};
    ddpl_tensor *xc = nn_contiguous(x), *x2 = xc ? nn_alias(xc, 2, s2) : NULL;
    ddpl_tensor *wc = nn_contiguous(weight), *w1 = wc ? nn_alias(wc, 1, &N) : NULL;
    ddpl_tensor *bc = nn_contiguous(bias), *b1 = bc ? nn_alias(bc, 1, &N) : NULL;
    ddpl_tensor *y =
        x2 ? ddpl_tensor_new(x->ndim, x->sizes, (ddpl_dtype)x->dtype, x->device) : NULL;
    ddpl_tensor *y2 = y ? nn_alias(y, 2, s2) : NULL;
    ddpl_tensor *mean = y2 ? ddpl_tensor_new(1, &M, (ddpl_dtype)x->dtype, x->device) : NULL;
    ddpl_tensor *rstd = mean ? ddpl_tensor_new(1, &M, (ddpl_dtype)x->dtype, x->device) : NULL;
    ddpl_layer_norm_params p = {eps};
    ddpl_tensor *outs[3] = {y2, mean, rstd}, *ins[3] = {x2, w1, b1};
    bool params_ok = (w1 || !weight) && (b1 || !bias);
    int rc = rstd && params_ok ? ddpl_run_kernel(DDPL_OP_LAYER_NORM, x->device, outs, ins, &p) : -1;
    ddpl_tensor *args[3] = {x, weight, bias};
    if (rc == 0 && ddpl_grad_needed(3, args)) {
        ddpl_node *n = ddpl_node_new("NativeLayerNormBackward0", layer_norm_backward, 3, args);
        ddpl_node_save(n, x2);
        ddpl_node_save(n, w1);
        ddpl_node_save(n, mean);
        ddpl_node_save(n, rstd);
        ddpl_node_save(n, x);      /* for create_graph (layer_norm_backward_recorded) */
        ddpl_node_save(n, weight); /* NULL keeps the slot */
        *DDPL_NODE_CTX(n, ln_ctx) = (ln_ctx){eps, M, N};
        ddpl_set_history(y, n);
    }
    ddpl_tensor *tmp[] = {xc, x2, wc, w1, bc, b1, y2, mean, rstd};
    for (size_t i = 0; i < sizeof tmp / sizeof *tmp; i++) ddpl_tensor_release(tmp[i]);
    if (rc < 0) {
        ddpl_tensor_release(y);
        return NULL;
    }
    return y;
}
