/* ops/nn_attention.c: scaled dot-product attention.
 * defines: ddpl_scaled_dot_product_attention, ddpl_sdpa_cpu_fused_min_bytes.
 *
 * Attention runs the device's fused kernel (ATTENTION: FlashAttention-style, O(L*E) memory) when
 * the call fits it, and records one node whose backward is ATTENTION_BACKWARD; otherwise (a
 * mask, broadcast batch dims, a head size or dtype the kernel lacks) it is a composite of matmul,
 * masking and softmax, whose gradient comes from theirs. */
#include <limits.h>
#include <math.h>

#include "autocast.h"
#include "nn_common.h"

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
    /* 16-bit inputs (autocast's) compute with float32 accumulation: in the fused CUDA kernel,
     * or in the composition's matmul and softmax */
    bool half = q->dtype == DDPL_FLOAT16 || q->dtype == DDPL_BFLOAT16;
    if (!half && nn_check_float(op, "query", q) < 0) return -1;
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

/* ATTENTION kernels return this (not an error) for a call they do not cover, such as a head
 * size or dtype the fused kernel lacks; the op then composes. */
#define SDPA_UNSUPPORTED 1

/* On the CPU the fused kernel (cpu/cpu_attention.c: GEMM tiles, online softmax, causal key
 * blocks skipped) measured faster than two GEMMs and a softmax at every shape tried, 1 and 2
 * threads, forward and forward+backward (equal within noise at tiny ones): 1.8-2x at the GPT
 * config (B4 H4 T256 E64 causal), 1.02-1.3x non-causal, 3-7x at T=1024, GPT training step
 * 1.15-1.24x (docs/internals/cpu-attention.md, bench/attention). So every call the
 * kernel covers is fused (the threshold is 0 bytes of scores); bench/attention raises it to
 * force the composition for its A/B comparison. */
static _Atomic int64_t cpu_fused_min_score_bytes = 0;

int64_t ddpl_sdpa_cpu_fused_min_bytes(int64_t bytes)
{
    return bytes < 0 ? atomic_load(&cpu_fused_min_score_bytes)
                     : atomic_exchange(&cpu_fused_min_score_bytes, bytes);
}

/* The fused kernel takes q (B,H,L,E), k (B,H,S,E), v (B,H,S,Ev) with equal B and H (no
 * broadcasting), nothing empty, no explicit mask (causal is a kernel flag). */
static bool sdpa_fusable(ddpl_tensor *q, ddpl_tensor *k, ddpl_tensor *v, ddpl_tensor *mask)
{
    if (mask || q->ndim != 4 || k->ndim != 4 || v->ndim != 4) return false;
    for (int d = 0; d < 2; d++)
        if (k->sizes[d] != q->sizes[d] || v->sizes[d] != q->sizes[d]) return false;
    if (ddpl_tensor_numel(q) == 0 || ddpl_tensor_numel(k) == 0 || ddpl_tensor_numel(v) == 0)
        return false;
    if (q->device.type == DDPL_CPU) {
        double scores = (double)q->sizes[0] * q->sizes[1] * q->sizes[2] * k->sizes[2] *
                        (double)ddpl_dtype_size((ddpl_dtype)q->dtype);
        if (scores < (double)atomic_load(&cpu_fused_min_score_bytes)) return false;
    }
    return ddpl_backend_supports(q->device, DDPL_OP_ATTENTION) &&
           ddpl_backend_supports(q->device, DDPL_OP_ATTENTION_BACKWARD);
}

/* An operand as the device's kernel takes it. CUDA's kernels need contiguous operands. The
 * CPU's (cpu/cpu_attention.c) hand each head's (rows, cols) matrix to BLAS in place, so they
 * take any (B,H) strides and any row stride >= cols as long as the columns are adjacent: the
 * head views (B,T,H,E).transpose(1,2) of a transformer layer pass without a copy. */
static ddpl_tensor *sdpa_operand(ddpl_tensor *t)
{
    if (t && t->device.type == DDPL_CPU && t->ndim == 4) {
        const int64_t *st = t->strides, *sz = t->sizes;
        bool cols = sz[3] == 1 || st[3] == 1;
        bool rows = sz[2] == 1 || (st[2] >= sz[3] && st[2] <= INT_MAX);
        if (cols && rows && st[0] >= 0 && st[1] >= 0) return ddpl_tensor_retain(t);
    }
    return nn_contiguous(t);
}

/* A new (B,H,L,Ev) output. On the CPU it is laid out (B,L,H,Ev), as PyTorch's CPU flash kernel
 * does: merging the heads afterwards (y.transpose(1,2) viewed as (B,L,H*Ev)) is then free. */
static ddpl_tensor *sdpa_output(const int64_t *ys, ddpl_dtype dt, ddpl_device dev)
{
    if (dev.type != DDPL_CPU) return ddpl_tensor_new(4, ys, dt, dev);
    int64_t blhe[4] = {ys[0], ys[2], ys[1], ys[3]};
    int64_t strides[4] = {ys[2] * ys[1] * ys[3], ys[3], ys[1] * ys[3], 1};
    ddpl_tensor *store = ddpl_tensor_new(4, blhe, dt, dev);
    ddpl_tensor *y = store ? ddpl_tensor_alias(store, 4, ys, strides, store->offset) : NULL;
    ddpl_tensor_release(store);
    return y;
}

/* The gradient of a (B,H,N,E) operand, laid out as the operand was: a head view of a
 * (B,T,H,E) tensor (head stride below the row stride: a transformer's q, k, v) gets a (B,N,H,E)
 * store, so the gradient's way back through transpose(1,2) and the view to (B,T,H*E) needs no
 * copy (it did: one per q, k and v per layer); anything else a contiguous one. */
static ddpl_tensor *sdpa_grad_like(const ddpl_tensor *like, ddpl_dtype dt)
{
    bool heads_inside_rows = like->device.type == DDPL_CPU && like->sizes[1] > 1 &&
                             like->sizes[2] > 1 && like->strides[1] < like->strides[2];
    return heads_inside_rows ? sdpa_output(like->sizes, dt, like->device)
                             : ddpl_tensor_new(like->ndim, like->sizes, dt, like->device);
}

typedef struct {
    ddpl_attention_params p;
} sdpa_ctx;

/* inputs 0 q, 1 k, 2 v; saved: 0 q, 1 k, 2 v (as the kernel saw them: sdpa_operand), 3 y,
 * 4 logsumexp */
static int sdpa_backward(ddpl_node *n, ddpl_tensor *grad, ddpl_tensor **gi)
{
    ddpl_tensor *s[5];
    for (int i = 0; i < 5; i++)
        if (!(s[i] = ddpl_node_saved(n, i))) return -1;
    ddpl_dtype dt = (ddpl_dtype)s[3]->dtype;
    ddpl_tensor *gd = grad->dtype == dt ? ddpl_tensor_retain(grad) : ddpl_to_dtype(grad, dt);
    ddpl_tensor *g = sdpa_operand(gd);
    ddpl_tensor_release(gd);
    ddpl_tensor *outs[3] = {NULL, NULL, NULL};
    int rc = g ? 0 : -1;
    for (int i = 0; i < 3 && rc == 0; i++)
        if (!(outs[i] = sdpa_grad_like(s[i], dt))) rc = -1;
    ddpl_tensor *ins[6] = {g, s[0], s[1], s[2], s[3], s[4]};
    if (rc == 0)
        rc = ddpl_run_kernel(DDPL_OP_ATTENTION_BACKWARD, s[0]->device, outs, ins,
                             &DDPL_NODE_CTX(n, sdpa_ctx)->p);
    if (rc == SDPA_UNSUPPORTED) /* the forward kernel took this call, so its twin must */
        rc = ddpl_error("scaled_dot_product_attention: the fused backward kernel does not "
                        "support what its forward ran");
    ddpl_tensor_release(g);
    for (int i = 0; i < 3; i++) {
        if (rc == 0 && ddpl_node_needs_grad(n, i))
            gi[i] = outs[i];
        else
            ddpl_tensor_release(outs[i]);
    }
    return rc == 0
               ? ddpl_mark_not_differentiable("scaled_dot_product_attention", n, grad, 3, gi, true)
               : rc;
}

/* Runs the fused kernel: 0 with *out set, -1 on error, SDPA_UNSUPPORTED when the call does not
 * fit it (nothing recorded, no error set). */
static int sdpa_fused(ddpl_tensor *q, ddpl_tensor *k, ddpl_tensor *v, bool is_causal, double scale,
                      ddpl_tensor **out)
{
    *out = NULL;
    int64_t B = q->sizes[0], H = q->sizes[1], L = q->sizes[2], Ev = v->sizes[3];
    int64_t ys[4] = {B, H, L, Ev};
    /* the logsumexp is float32 (the accumulation type) except for float64 inputs */
    ddpl_dtype lse_dt = q->dtype == DDPL_FLOAT64 ? DDPL_FLOAT64 : DDPL_FLOAT32;
    ddpl_tensor *qc = sdpa_operand(q), *kc = sdpa_operand(k), *vc = sdpa_operand(v);
    ddpl_tensor *y = sdpa_output(ys, (ddpl_dtype)q->dtype, q->device);
    ddpl_tensor *lse = ddpl_tensor_new(3, ys, lse_dt, q->device);
    ddpl_attention_params p = {scale, is_causal};
    ddpl_tensor *outs[2] = {y, lse}, *ins[3] = {qc, kc, vc};
    int rc = qc && kc && vc && y && lse
                 ? ddpl_run_kernel(DDPL_OP_ATTENTION, q->device, outs, ins, &p)
                 : -1;
    ddpl_tensor *args[3] = {q, k, v};
    if (rc == 0 && ddpl_grad_needed(3, args)) {
        ddpl_node *n = ddpl_node_new("ScaledDotProductAttentionBackward0", sdpa_backward, 3, args);
        ddpl_node_save(n, qc);
        ddpl_node_save(n, kc);
        ddpl_node_save(n, vc);
        ddpl_node_save_output(n, y);
        ddpl_node_save(n, lse);
        DDPL_NODE_CTX(n, sdpa_ctx)->p = p;
        ddpl_set_history(y, n);
    }
    ddpl_tensor *tmp[] = {qc, kc, vc, lse};
    for (size_t i = 0; i < sizeof tmp / sizeof *tmp; i++) ddpl_tensor_release(tmp[i]);
    if (rc != 0) {
        ddpl_tensor_release(y);
        return rc;
    }
    *out = y;
    return 0;
}

static ddpl_tensor *sdpa_impl(ddpl_tensor *q, ddpl_tensor *k, ddpl_tensor *v,
                              ddpl_tensor *attn_mask, bool is_causal, double scale)
{
    if (sdpa_check(q, k, v, attn_mask, is_causal) < 0) return NULL;
    int64_t L = q->sizes[q->ndim - 2], S = k->sizes[k->ndim - 2], E = q->sizes[q->ndim - 1];
    if (scale <= 0) scale = 1.0 / sqrt((double)(E > 0 ? E : 1));
    if (sdpa_fusable(q, k, v, attn_mask)) {
        ddpl_tensor *y = NULL;
        int rc = sdpa_fused(q, k, v, is_causal, scale, &y);
        if (rc <= 0) return y; /* done, or an error */
    }
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

/* Under autocast q, k, v and a float mask are cast to the autocast dtype first (PyTorch lists
 * attention among the lower-precision ops); the casts record autograd, so gradients reach
 * float32 leaves in float32. */
ddpl_tensor *ddpl_scaled_dot_product_attention(ddpl_tensor *q, ddpl_tensor *k, ddpl_tensor *v,
                                               ddpl_tensor *attn_mask, bool is_causal, double scale)
{
    if (!ddpl_autocast_enabled((ddpl_device_type)q->device.type))
        return sdpa_impl(q, k, v, attn_mask, is_causal, scale);
    ddpl_tensor *in[4] = {q, k, v, attn_mask}, *c[4];
    ddpl_tensor *y = ddpl_autocast_lower_n(4, in, c) == 0
                         ? sdpa_impl(c[0], c[1], c[2], c[3], is_causal, scale)
                         : NULL;
    ddpl_autocast_release_n(4, c);
    return y;
}
