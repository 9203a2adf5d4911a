/* ops/linalg.c: matrix products with their gradients.
 * defines: ddpl_matmul, ddpl_mm, ddpl_bmm, ddpl_addmm.
 *
 * Every product runs the one GEMM kernel on 3-D operands (a 2-D matrix is a batch of one);
 * transposed views go to the kernel as they are, so backward's g @ b^T and a^T @ g never copy.
 * matmul reduces to mm/bmm with views, so its gradient comes from theirs and from the view
 * ops' (expand's gradient sums over broadcast batch dims). Under autocast every public entry
 * first casts its operands to the autocast dtype (ops/autocast.h), recorded by autograd. */
#include "autocast.h"
#include "op_util.h"

/* ---- checks ---- */
static int check_operands(const char *op, const ddpl_tensor *a, const ddpl_tensor *b)
{
    if (ddpl_check_same_device(op, a, b) < 0) return -1;
    if (a->dtype != b->dtype)
        return ddpl_error("%s: expected both operands to have the same dtype, got %s and %s", op,
                          ddpl_dtype_name((ddpl_dtype)a->dtype),
                          ddpl_dtype_name((ddpl_dtype)b->dtype));
    if (a->dtype == DDPL_BOOL) return ddpl_error("%s: not implemented for dtype bool", op);
    return 0;
}

static int shape_mismatch(const char *op, const ddpl_tensor *a, const ddpl_tensor *b)
{
    char sa[128], sb[128];
    return ddpl_error("%s: shapes %s and %s do not match", op, ddpl_shape_str(a, sa, sizeof sa),
                      ddpl_shape_str(b, sb, sizeof sb));
}

/* A 3-D alias of a 2-D matrix (a batch of one), for the kernel. */
static ddpl_tensor *as_batch(ddpl_tensor *m)
{
    int64_t sizes[3] = {1, m->sizes[0], m->sizes[1]};
    int64_t strides[3] = {m->sizes[0] * m->sizes[1], m->strides[0], m->strides[1]};
    return ddpl_tensor_alias(m, 3, sizes, strides, m->offset);
}

/* out = alpha * a @ b + beta * out, on 3-D operands; no autograd. */
static int run_gemm(ddpl_tensor *out3, ddpl_tensor *a3, ddpl_tensor *b3, double alpha, double beta)
{
    ddpl_gemm_params p = {alpha, beta};
    ddpl_tensor *ins[2] = {a3, b3};
    return ddpl_run_kernel(DDPL_OP_GEMM, out3->device, &out3, ins, &p);
}

/* alpha * (a @ b) for 2-D a (n,k), b (k,m) already checked; no autograd. */
/* alpha * a @ b into `into` when it is given and fits (a contiguous (m, n) tensor of a's dtype
 * and device, e.g. a gradient home), else into new memory; a new reference either way. */
static ddpl_tensor *mm_raw_into(ddpl_tensor *into, ddpl_tensor *a, ddpl_tensor *b, double alpha)
{
    int64_t sizes[2] = {a->sizes[0], b->sizes[1]};
    bool fits = into && into->ndim == 2 && into->sizes[0] == sizes[0] &&
                into->sizes[1] == sizes[1] && into->dtype == a->dtype &&
                ddpl_same_device(into->device, a->device) && ddpl_tensor_is_contiguous(into);
    ddpl_tensor *out = fits ? ddpl_tensor_retain(into)
                            : ddpl_tensor_new(2, sizes, (ddpl_dtype)a->dtype, a->device);
    if (!out) return NULL;
    ddpl_tensor *o3 = as_batch(out), *a3 = as_batch(a), *b3 = as_batch(b);
    int rc = run_gemm(o3, a3, b3, alpha, 0.0);
    ddpl_tensor_release(o3);
    ddpl_tensor_release(a3);
    ddpl_tensor_release(b3);
    if (rc < 0) {
        ddpl_tensor_release(out);
        return NULL;
    }
    return out;
}

static ddpl_tensor *mm_raw(ddpl_tensor *a, ddpl_tensor *b, double alpha)
{
    return mm_raw_into(NULL, a, b, alpha);
}

/* ---- autocast ----
 * Runs fn on the lowered operands when autocast is on for a's device type. Returns false when
 * autocast is off (the caller runs plainly); else *r holds the result (NULL on failure). */
typedef ddpl_tensor *(*binary_fn)(ddpl_tensor *, ddpl_tensor *);

static bool autocast_binary(binary_fn fn, ddpl_tensor *a, ddpl_tensor *b, ddpl_tensor **r)
{
    if (!ddpl_autocast_enabled((ddpl_device_type)a->device.type)) return false;
    ddpl_tensor *c[2];
    *r = ddpl_autocast_lower_n(2, OP_INPUTS(a, b), c) == 0 ? fn(c[0], c[1]) : NULL;
    ddpl_autocast_release_n(2, c);
    return true;
}

/* ---- mm ---- */
typedef struct {
    double alpha, beta; /* addmm's scales; mm: 1, 0 */
} mm_ctx;

/* d(alpha*a@b)/da = alpha * g @ b^T, /db = alpha * a^T @ g; addmm's bias gets beta*g summed
 * over its broadcast dims. Inputs: 0 a, 1 b, 2 bias (addmm only); saved: a, b. */
/* p @ q laid out like `like` (a 2-D forward operand): when that operand is a transposed view
 * (column-major, e.g. a Linear weight used as W.t()), compute (q^T @ p^T) and return its
 * transpose, so the gradient reaching W arrives contiguous in W's own layout and AccumulateGrad
 * keeps it instead of copying it element by element (PyTorch's mm_mat2_backward does the same).
 * dest (may be NULL): where the engine asks the result to go, in like's layout (a gradient
 * home, ddpl_node_dest); used when it fits. */
static ddpl_tensor *mm_in_layout_of(const ddpl_tensor *like, ddpl_tensor *p, ddpl_tensor *q,
                                    double alpha, ddpl_tensor *dest)
{
    if (ddpl_is_grad_enabled() && (ddpl_requires_grad(p) || ddpl_requires_grad(q))) {
        /* create_graph: the product is recorded, so the gradient can be differentiated */
        ddpl_tensor *r = ddpl_mm(p, q);
        if (!r || alpha == 1.0) return r;
        ddpl_tensor *s = ddpl_wrapped_number(alpha, false);
        ddpl_tensor *scaled = s ? ddpl_mul(r, s) : NULL;
        ddpl_tensor_release(s);
        ddpl_tensor_release(r);
        return scaled;
    }
    bool column_major = like->ndim == 2 && like->strides[0] == 1 && like->strides[1] != 1 &&
                        like->sizes[0] > 1 && like->sizes[1] > 1;
    if (!column_major) return mm_raw_into(dest, p, q, alpha);
    ddpl_tensor *qt = ddpl_t(q), *pt = ddpl_t(p), *dest_t = dest ? ddpl_t(dest) : NULL;
    ddpl_tensor *r = qt && pt ? mm_raw_into(dest_t, qt, pt, alpha) : NULL;
    ddpl_tensor_release(dest_t);
    ddpl_tensor *out = r ? ddpl_t(r) : NULL;
    ddpl_tensor_release(qt);
    ddpl_tensor_release(pt);
    ddpl_tensor_release(r);
    return out;
}

static int mm_backward(ddpl_node *n, ddpl_tensor *grad, ddpl_tensor **gi)
{
    mm_ctx *c = DDPL_NODE_CTX(n, mm_ctx);
    ddpl_tensor *a = ddpl_node_saved(n, 0), *b = ddpl_node_saved(n, 1);
    if (!a || !b) return -1;
    if (ddpl_node_needs_grad(n, 0)) {
        ddpl_tensor *bt = ddpl_t(b);
        gi[0] = bt ? mm_in_layout_of(a, grad, bt, c->alpha, ddpl_node_dest(n, 0)) : NULL;
        ddpl_tensor_release(bt);
        if (!gi[0]) return -1;
    }
    if (ddpl_node_needs_grad(n, 1)) {
        ddpl_tensor *at = ddpl_t(a);
        gi[1] = at ? mm_in_layout_of(b, at, grad, c->alpha, ddpl_node_dest(n, 1)) : NULL;
        ddpl_tensor_release(at);
        if (!gi[1]) return -1;
    }
    if (n->n_inputs > 2 && ddpl_node_needs_grad(n, 2)) {
        ddpl_edge *e = &n->edges[2];
        ddpl_tensor *s = ddpl_sum_to(grad, e->ndim, e->sizes);
        if (!s) return -1;
        if (c->beta == 1.0) {
            gi[2] = s;
        } else {
            ddpl_tensor *beta = ddpl_wrapped_number(c->beta, false);
            gi[2] = beta ? ddpl_mul(s, beta) : NULL;
            ddpl_tensor_release(beta);
            ddpl_tensor_release(s);
            if (!gi[2]) return -1;
        }
    }
    return 0;
}

/* mm under the name of the calling API function (matmul's errors say "matmul"). */
static ddpl_tensor *mm_named(const char *op, ddpl_tensor *a, ddpl_tensor *b)
{
    if (check_operands(op, a, b) < 0) return NULL;
    if (a->ndim != 2 || b->ndim != 2 || a->sizes[1] != b->sizes[0])
        return shape_mismatch(op, a, b), NULL;
    ddpl_tensor *out = mm_raw(a, b, 1.0);
    if (!out) return NULL;
    ddpl_tensor *ins[2] = {a, b};
    if (ddpl_grad_needed(2, ins)) {
        ddpl_node *n = ddpl_node_new("MmBackward0", mm_backward, 2, ins);
        n->dest_inputs = 3; /* a and b (mm_in_layout_of) */
        ddpl_node_save(n, a);
        ddpl_node_save(n, b);
        *DDPL_NODE_CTX(n, mm_ctx) = (mm_ctx){1.0, 0.0};
        ddpl_set_history(out, n);
    }
    return out;
}

static ddpl_tensor *mm_plain(ddpl_tensor *a, ddpl_tensor *b)
{
    return mm_named("mm", a, b);
}

ddpl_tensor *ddpl_mm(ddpl_tensor *a, ddpl_tensor *b)
{
    ddpl_tensor *r;
    return autocast_binary(mm_plain, a, b, &r) ? r : mm_plain(a, b);
}

static ddpl_tensor *addmm_impl(ddpl_tensor *bias, ddpl_tensor *a, ddpl_tensor *b, double beta,
                               double alpha);

ddpl_tensor *ddpl_addmm(ddpl_tensor *bias, ddpl_tensor *a, ddpl_tensor *b, double beta,
                        double alpha)
{
    if (!ddpl_autocast_enabled((ddpl_device_type)a->device.type))
        return addmm_impl(bias, a, b, beta, alpha);
    ddpl_tensor *c[3];
    ddpl_tensor *r = ddpl_autocast_lower_n(3, OP_INPUTS(bias, a, b), c) == 0
                         ? addmm_impl(c[0], c[1], c[2], beta, alpha)
                         : NULL;
    ddpl_autocast_release_n(3, c);
    return r;
}

static ddpl_tensor *addmm_impl(ddpl_tensor *bias, ddpl_tensor *a, ddpl_tensor *b, double beta,
                               double alpha)
{
    if (check_operands("addmm", a, b) < 0 || check_operands("addmm", bias, a) < 0) return NULL;
    if (a->ndim != 2 || b->ndim != 2 || a->sizes[1] != b->sizes[0])
        return shape_mismatch("addmm", a, b), NULL;
    int64_t sizes[2] = {a->sizes[0], b->sizes[1]};
    int nd;
    int64_t bs[DDPL_MAX_DIMS];
    if (ddpl_broadcast_shape("addmm", bias->ndim, bias->sizes, 2, sizes, &nd, bs) < 0) return NULL;
    if (nd != 2 || bs[0] != sizes[0] || bs[1] != sizes[1]) {
        char sb[128], so[128];
        return ddpl_error("addmm: bias of shape %s cannot be broadcast to the product's shape %s",
                          ddpl_shape_str(bias, sb, sizeof sb),
                          ddpl_sizes_str(2, sizes, so, sizeof so)),
               NULL;
    }
    ddpl_tensor *out = ddpl_tensor_new(2, sizes, (ddpl_dtype)a->dtype, a->device);
    if (!out) return NULL;
    int rc = 0;
    if (beta != 0) { /* beta 0 ignores bias entirely (even NaNs), as BLAS and PyTorch do */
        ddpl_tensor *e = ddpl_expand(bias, 2, sizes);
        ddpl_tensor *ed = e ? ddpl_detach(e) : NULL; /* no autograd for this internal copy */
        rc = ed ? ddpl_run_kernel(DDPL_OP_COPY, out->device, &out, &ed, NULL) : -1;
        ddpl_tensor_release(ed);
        ddpl_tensor_release(e);
    }
    if (rc == 0) {
        ddpl_tensor *o3 = as_batch(out), *a3 = as_batch(a), *b3 = as_batch(b);
        rc = run_gemm(o3, a3, b3, alpha, beta);
        ddpl_tensor_release(o3);
        ddpl_tensor_release(a3);
        ddpl_tensor_release(b3);
    }
    if (rc < 0) {
        ddpl_tensor_release(out);
        return NULL;
    }
    ddpl_tensor *ins[3] = {a, b, bias};
    if (ddpl_grad_needed(3, ins)) {
        ddpl_node *n = ddpl_node_new("AddmmBackward0", mm_backward, 3, ins);
        n->dest_inputs = 3; /* a and b (mm_in_layout_of) */
        ddpl_node_save(n, a);
        ddpl_node_save(n, b);
        *DDPL_NODE_CTX(n, mm_ctx) = (mm_ctx){alpha, beta};
        ddpl_set_history(out, n);
    }
    return out;
}

/* ---- bmm ---- */
static int bmm_backward(ddpl_node *n, ddpl_tensor *grad, ddpl_tensor **gi)
{
    ddpl_tensor *a = ddpl_node_saved(n, 0), *b = ddpl_node_saved(n, 1);
    if (!a || !b) return -1;
    if (ddpl_node_needs_grad(n, 0)) {
        ddpl_tensor *bt = ddpl_transpose(b, 1, 2);
        gi[0] = bt ? ddpl_bmm(grad, bt) : NULL;
        ddpl_tensor_release(bt);
        if (!gi[0]) return -1;
    }
    if (ddpl_node_needs_grad(n, 1)) {
        ddpl_tensor *at = ddpl_transpose(a, 1, 2);
        gi[1] = at ? ddpl_bmm(at, grad) : NULL;
        ddpl_tensor_release(at);
        if (!gi[1]) return -1;
    }
    return 0;
}

static ddpl_tensor *bmm_named(const char *op, ddpl_tensor *a, ddpl_tensor *b)
{
    if (check_operands(op, a, b) < 0) return NULL;
    if (a->ndim != 3 || b->ndim != 3 || a->sizes[0] != b->sizes[0] || a->sizes[2] != b->sizes[1])
        return shape_mismatch(op, a, b), NULL;
    int64_t sizes[3] = {a->sizes[0], a->sizes[1], b->sizes[2]};
    ddpl_tensor *out = ddpl_tensor_new(3, sizes, (ddpl_dtype)a->dtype, a->device);
    if (!out) return NULL;
    if (run_gemm(out, a, b, 1.0, 0.0) < 0) {
        ddpl_tensor_release(out);
        return NULL;
    }
    ddpl_tensor *ins[2] = {a, b};
    if (ddpl_grad_needed(2, ins)) {
        ddpl_node *n = ddpl_node_new("BmmBackward0", bmm_backward, 2, ins);
        ddpl_node_save(n, a);
        ddpl_node_save(n, b);
        ddpl_set_history(out, n);
    }
    return out;
}

static ddpl_tensor *bmm_plain(ddpl_tensor *a, ddpl_tensor *b)
{
    return bmm_named("bmm", a, b);
}

ddpl_tensor *ddpl_bmm(ddpl_tensor *a, ddpl_tensor *b)
{
    ddpl_tensor *r;
    return autocast_binary(bmm_plain, a, b, &r) ? r : bmm_plain(a, b);
}

/* ---- matmul ---- */

/* Releases up to four temporaries and passes r through. */
static ddpl_tensor *drop4(ddpl_tensor *r, ddpl_tensor *t0, ddpl_tensor *t1, ddpl_tensor *t2,
                          ddpl_tensor *t3)
{
    ddpl_tensor_release(t0);
    ddpl_tensor_release(t1);
    ddpl_tensor_release(t2);
    ddpl_tensor_release(t3);
    return r;
}

/* a (..., n, k) with at least 3 dims @ b (k, m) or (k): the leading dims fold into the rows
 * of one GEMM, as PyTorch does (a view for a contiguous a; reshape copies otherwise). */
static ddpl_tensor *matmul_folded(ddpl_tensor *a, ddpl_tensor *b)
{
    int64_t k = a->sizes[a->ndim - 1];
    bool vec = b->ndim == 1;
    ddpl_tensor *b2 = vec ? ddpl_unsqueeze(b, 1) : ddpl_tensor_retain(b);
    ddpl_tensor *a2 = b2 ? ddpl_reshape(a, 2, (int64_t[]){-1, k}) : NULL;
    ddpl_tensor *p = a2 ? mm_named("matmul", a2, b2) : NULL;
    int64_t sizes[DDPL_MAX_DIMS];
    int nd = a->ndim - 1;
    memcpy(sizes, a->sizes, (size_t)nd * sizeof *sizes);
    if (!vec) sizes[nd++] = b->sizes[1];
    ddpl_tensor *r = p ? ddpl_view(p, nd, sizes) : NULL;
    return drop4(r, a2, b2, p, NULL);
}

/* The general case: a (..., n, k) @ b (..., k, m) with broadcast batch dims; a 1-D a was
 * already made (1, k) by the caller, whose operands oa, ob errors name. */
static ddpl_tensor *matmul_batched(ddpl_tensor *a, ddpl_tensor *b, const ddpl_tensor *oa,
                                   const ddpl_tensor *ob)
{
    int nba = a->ndim - 2, nbb = b->ndim - 2, nb;
    int64_t batch[DDPL_MAX_DIMS];
    if (ddpl_broadcast_shape("matmul", nba, a->sizes, nbb, b->sizes, &nb, batch) < 0) {
        char sa[128], sb[128];
        return ddpl_error("matmul: shapes %s and %s do not match: their batch dimensions cannot "
                          "be broadcast together",
                          ddpl_shape_str(oa, sa, sizeof sa), ddpl_shape_str(ob, sb, sizeof sb)),
               NULL;
    }
    int64_t n = a->sizes[a->ndim - 2], k = a->sizes[a->ndim - 1], m = b->sizes[b->ndim - 1];
    int64_t total = ddpl_numel(nb, batch);
    int64_t ea[DDPL_MAX_DIMS], eb[DDPL_MAX_DIMS];
    memcpy(ea, batch, (size_t)nb * sizeof *ea);
    memcpy(eb, batch, (size_t)nb * sizeof *eb);
    ea[nb] = n, ea[nb + 1] = k;
    eb[nb] = k, eb[nb + 1] = m;
    ddpl_tensor *ax = ddpl_expand(a, nb + 2, ea);
    ddpl_tensor *bx = ax ? ddpl_expand(b, nb + 2, eb) : NULL;
    /* a view when the batch dims collapse into one stride (including broadcast stride 0);
     * otherwise reshape materialises the broadcast copy */
    ddpl_tensor *a3 = bx ? ddpl_reshape(ax, 3, (int64_t[]){total, n, k}) : NULL;
    ddpl_tensor *b3 = a3 ? ddpl_reshape(bx, 3, (int64_t[]){total, k, m}) : NULL;
    ddpl_tensor *p = b3 ? bmm_named("matmul", a3, b3) : NULL;
    batch[nb] = n, batch[nb + 1] = m;
    ddpl_tensor *r = p ? ddpl_view(p, nb + 2, batch) : NULL;
    ddpl_tensor_release(p);
    return drop4(r, ax, bx, a3, b3);
}

static ddpl_tensor *matmul_impl(ddpl_tensor *a, ddpl_tensor *b)
{
    if (check_operands("matmul", a, b) < 0) return NULL;
    int da = a->ndim, db = b->ndim;
    char sa[128], sb[128];
    if (da == 0 || db == 0)
        return ddpl_error("matmul: both arguments need to be at least 1-D, got shapes %s and %s",
                          ddpl_shape_str(a, sa, sizeof sa), ddpl_shape_str(b, sb, sizeof sb)),
               NULL;
    int64_t ka = a->sizes[da - 1], kb = b->sizes[db >= 2 ? db - 2 : 0];
    if (ka != kb) return shape_mismatch("matmul", a, b), NULL;

    if (da <= 2 && db <= 2) {
        /* vectors become (1,k) rows and (k,1) columns; their unit dims are dropped after */
        ddpl_tensor *a2 = da == 1 ? ddpl_unsqueeze(a, 0) : ddpl_tensor_retain(a);
        ddpl_tensor *b2 = db == 1 ? ddpl_unsqueeze(b, 1) : ddpl_tensor_retain(b);
        ddpl_tensor *p = a2 && b2 ? mm_named("matmul", a2, b2) : NULL;
        int64_t sizes[2];
        int nd = 0;
        if (da == 2) sizes[nd++] = a->sizes[0];
        if (db == 2) sizes[nd++] = b->sizes[1];
        ddpl_tensor *r = p ? (nd == 2 ? ddpl_tensor_retain(p) : ddpl_view(p, nd, sizes)) : NULL;
        return drop4(r, a2, b2, p, NULL);
    }
    if (db <= 2) return matmul_folded(a, b);

    /* b has batch dims; a vector a is a (1, k) row, dropped from the result after */
    ddpl_tensor *a2 = da == 1 ? ddpl_unsqueeze(a, 0) : ddpl_tensor_retain(a);
    ddpl_tensor *p = a2 ? matmul_batched(a2, b, a, b) : NULL;
    ddpl_tensor *r = p && da == 1 ? ddpl_squeeze(p, -2) : ddpl_tensor_retain(p);
    return drop4(r, a2, p, NULL, NULL);
}

ddpl_tensor *ddpl_matmul(ddpl_tensor *a, ddpl_tensor *b)
{
    ddpl_tensor *r;
    return autocast_binary(matmul_impl, a, b, &r) ? r : matmul_impl(a, b);
}
