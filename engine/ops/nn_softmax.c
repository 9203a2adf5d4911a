/* ops/nn_softmax.c: softmax, log_softmax and scaled dot-product attention.
 * defines: ddpl_softmax, ddpl_log_softmax, ddpl_scaled_dot_product_attention.
 *
 * softmax and log_softmax run fused, numerically stable kernels (cpu_softmax.c) and save
 * their output, from which both gradients follow; float16/bfloat16 inputs compute in float32.
 * Attention is a composite of matmul, masking and softmax, so its gradient comes from theirs. */
#include <math.h>

#include "nn_common.h"

typedef struct {
    int dim;
    bool log;
} softmax_ctx;

/* saved: 0 the forward output */
static int softmax_backward(ddpl_node *n, ddpl_tensor *grad, ddpl_tensor **gi)
{
    softmax_ctx *c = DDPL_NODE_CTX(n, softmax_ctx);
    ddpl_tensor *y = ddpl_node_saved(n, 0);
    if (!y) return -1;
    ddpl_tensor *g = nn_contiguous(grad);
    ddpl_tensor *dx = g ? ddpl_empty_like(y) : NULL;
    ddpl_dim_params p = {c->dim};
    ddpl_tensor *ins[2] = {g, y};
    if (dx)
        dx = nn_run_or_release(c->log ? DDPL_OP_LOG_SOFTMAX_BACKWARD : DDPL_OP_SOFTMAX_BACKWARD, dx,
                               &dx, ins, &p);
    ddpl_tensor_release(g);
    gi[0] = dx;
    return dx ? 0 : -1;
}

static ddpl_tensor *softmax_impl(const char *op, ddpl_tensor *x, int dim, bool log)
{
    if (x->dtype == DDPL_FLOAT16 || x->dtype == DDPL_BFLOAT16) {
        /* half precision computes in float32 and rounds once at the end, as PyTorch does */
        ddpl_tensor *xf = ddpl_to_dtype(x, DDPL_FLOAT32);
        ddpl_tensor *yf = xf ? softmax_impl(op, xf, dim, log) : NULL;
        ddpl_tensor *y = yf ? ddpl_to_dtype(yf, (ddpl_dtype)x->dtype) : NULL;
        ddpl_tensor_release(xf);
        ddpl_tensor_release(yf);
        return y;
    }
    if (nn_check_float(op, "input", x) < 0) return NULL;
    int d = ddpl_wrap_dim(op, dim, x->ndim);
    if (d < 0) return NULL;
    ddpl_tensor *xc = nn_contiguous(x);
    ddpl_tensor *y = xc ? ddpl_empty_like(x) : NULL;
    ddpl_dim_params p = {d};
    if (y) y = nn_run_or_release(log ? DDPL_OP_LOG_SOFTMAX : DDPL_OP_SOFTMAX, y, &y, &xc, &p);
    ddpl_tensor_release(xc);
    if (y && ddpl_grad_needed(1, &x)) {
        ddpl_node *n =
            ddpl_node_new(log ? "LogSoftmaxBackward" : "SoftmaxBackward", softmax_backward, 1, &x);
        ddpl_node_save_output(n, y);
        *DDPL_NODE_CTX(n, softmax_ctx) = (softmax_ctx){d, log};
        ddpl_set_history(y, n);
    }
    return y;
}

ddpl_tensor *ddpl_softmax(ddpl_tensor *x, int dim)
{
    return softmax_impl("softmax", x, dim, false);
}

ddpl_tensor *ddpl_log_softmax(ddpl_tensor *x, int dim)
{
    return softmax_impl("log_softmax", x, dim, true);
}

/* ---- scaled_dot_product_attention ---- */

/* The (L,S) bool mask of the positions causal attention hides: key j after query i. */
static ddpl_tensor *causal_mask(int64_t L, int64_t S, ddpl_device dev)
{
    ddpl_tensor *i = ddpl_arange(0, (double)L, 1, DDPL_INT64, dev);
    ddpl_tensor *j = i ? ddpl_arange(0, (double)S, 1, DDPL_INT64, dev) : NULL;
    ddpl_tensor *ic = j ? ddpl_unsqueeze(i, 1) : NULL; /* (L,1) */
    ddpl_tensor *m = ic ? ddpl_gt(j, ic) : NULL;       /* (S) vs (L,1) -> (L,S) */
    ddpl_tensor_release(i);
    ddpl_tensor_release(j);
    ddpl_tensor_release(ic);
    return m;
}

static int sdpa_check(ddpl_tensor *q, ddpl_tensor *k, ddpl_tensor *v, ddpl_tensor *mask,
                      bool is_causal)
{
    const char *op = "scaled_dot_product_attention";
    char a[128], b[128], c[128];
    if (nn_check_float(op, "query", q) < 0) return -1;
    if (q->ndim < 2 || k->ndim < 2 || v->ndim < 2)
        return ddpl_error("%s: query, key and value need at least 2 dimensions (..., L, E), got "
                          "%s, %s and %s",
                          op, ddpl_shape_str(q, a, sizeof a), ddpl_shape_str(k, b, sizeof b),
                          ddpl_shape_str(v, c, sizeof c));
    if (k->dtype != q->dtype || v->dtype != q->dtype)
        return ddpl_error("%s: query, key and value must have the same dtype, got %s, %s and %s",
                          op, ddpl_dtype_name((ddpl_dtype)q->dtype),
                          ddpl_dtype_name((ddpl_dtype)k->dtype),
                          ddpl_dtype_name((ddpl_dtype)v->dtype));
    if (k->sizes[k->ndim - 1] != q->sizes[q->ndim - 1] ||
        k->sizes[k->ndim - 2] != v->sizes[v->ndim - 2])
        return ddpl_error("%s: query %s, key %s and value %s do not match: expected query "
                          "(..., L, E), key (..., S, E) and value (..., S, Ev)",
                          op, ddpl_shape_str(q, a, sizeof a), ddpl_shape_str(k, b, sizeof b),
                          ddpl_shape_str(v, c, sizeof c));
    if (mask && is_causal)
        return ddpl_error("%s: an explicit attn_mask cannot be combined with is_causal", op);
    if (mask && mask->dtype != DDPL_BOOL && mask->dtype != q->dtype)
        return ddpl_error("%s: attn_mask must be bool or have the query's dtype %s, got %s", op,
                          ddpl_dtype_name((ddpl_dtype)q->dtype),
                          ddpl_dtype_name((ddpl_dtype)mask->dtype));
    return 0;
}

/* Releases a tensor and passes another through (for chains of ops). */
static ddpl_tensor *then(ddpl_tensor *next, ddpl_tensor *done)
{
    ddpl_tensor_release(done);
    return next;
}

ddpl_tensor *ddpl_scaled_dot_product_attention(ddpl_tensor *q, ddpl_tensor *k, ddpl_tensor *v,
                                               ddpl_tensor *attn_mask, bool is_causal, double scale)
{
    if (sdpa_check(q, k, v, attn_mask, is_causal) < 0) return NULL;
    int64_t L = q->sizes[q->ndim - 2], S = k->sizes[k->ndim - 2], E = q->sizes[q->ndim - 1];
    if (scale <= 0) scale = 1.0 / sqrt((double)(E > 0 ? E : 1));
    /* scores (..., L, S) = q @ k^T * scale */
    ddpl_tensor *kt = ddpl_transpose(k, -2, -1);
    ddpl_tensor *s = kt ? then(ddpl_matmul(q, kt), kt) : NULL;
    ddpl_tensor *sc = s ? ddpl_wrapped_number(scale, false) : NULL;
    ddpl_tensor *scores = sc ? ddpl_mul(s, sc) : NULL;
    ddpl_tensor_release(sc);
    ddpl_tensor_release(s);
    if (scores && (is_causal || (attn_mask && attn_mask->dtype == DDPL_BOOL))) {
        /* hidden positions get -inf, so softmax gives them exactly zero weight */
        ddpl_tensor *hide = NULL;
        if (is_causal) {
            hide = causal_mask(L, S, q->device);
        } else {
            ddpl_tensor *f = ddpl_wrapped_number(0, true);
            hide = f ? ddpl_eq(attn_mask, f) : NULL; /* true = keep, so hide where false */
            ddpl_tensor_release(f);
        }
        scores =
            hide ? then(ddpl_masked_fill(scores, hide, -INFINITY), scores) : then(NULL, scores);
        ddpl_tensor_release(hide);
    } else if (scores && attn_mask) {
        scores = then(ddpl_add(scores, attn_mask), scores);
    }
    ddpl_tensor *attn = scores ? then(ddpl_softmax(scores, -1), scores) : NULL;
    return attn ? then(ddpl_matmul(attn, v), attn) : NULL;
}
