/* ops/linalg_spectral.c: linalg.qr, linalg.svd, linalg.svdvals, linalg.eigh, linalg.eigvalsh.
 * defines: ddpl_linalg_qr, ddpl_linalg_svd, ddpl_linalg_svdvals, ddpl_linalg_eigh,
 *          ddpl_linalg_eigvalsh.
 *
 * Forward on the host in float64 (Householder QR, one-sided Jacobi SVD, Jacobi eigh:
 * core/linalg_ref.h; ops/linalg_util.h says why). A decomposition with several outputs computes
 * them into one packed tensor (..., total) recorded with one node; the outputs are narrow +
 * reshape views of it, so the node's backward gets the gradients of all of them at once (zero
 * for an unused one) and applies PyTorch's formula, written with ops (device, create_graph). */
#include <math.h>

#include "core/linalg_ref.h"
#include "linalg_util.h"

/* ---- packing ---- */

/* What a node keeps (its ctx); the batch dims come from the packed tensor itself. */
typedef struct {
    int np;
    int nd[3];
    int64_t shapes[3][2];
    int64_t mode; /* qr: 0 reduced, 1 complete, 2 r; svd: full_matrices */
    int64_t m, n; /* the matrices' sizes */
    la_batch b;   /* forward only (not in the node) */
} pack_ctx;

typedef struct {
    int np;
    int nd[3];
    int64_t shapes[3][2];
    int64_t mode, m, n;
} pack_node;

static int64_t part_len(const pack_ctx *c, int i)
{
    return c->nd[i] == 2 ? c->shapes[i][0] * c->shapes[i][1] : c->shapes[i][0];
}

static int64_t pack_total(const pack_ctx *c)
{
    int64_t t = 0;
    for (int i = 0; i < c->np; i++) t += part_len(c, i);
    return t;
}

/* the packed host data as a tensor (..., total) with a node when a needs grad */
static ddpl_tensor *pack_tensor(const double *h, ddpl_tensor *a, const pack_ctx *c,
                                const char *name, ddpl_backward_fn fn)
{
    int64_t total = pack_total(c), sizes[DDPL_MAX_DIMS];
    int ndim = la_shape(&c->b, 1, &total, sizes);
    ddpl_tensor *out = la_from_host(h, ndim, sizes, a);
    if (out && ddpl_grad_needed(1, &a)) {
        ddpl_node *node = ddpl_node_new(name, fn, 1, &a);
        pack_node *pn = DDPL_NODE_CTX(node, pack_node);
        pn->np = c->np;
        memcpy(pn->nd, c->nd, sizeof pn->nd);
        memcpy(pn->shapes, c->shapes, sizeof pn->shapes);
        pn->mode = c->mode, pn->m = c->b.m, pn->n = c->b.n;
        ddpl_node_save_output(node, out);
        ddpl_set_history(out, node);
    }
    return out;
}

/* the parts of a packed tensor (..., total) or of its gradient */
static int unpack_parts(ddpl_tensor *packed, int np, const int *nd, const int64_t (*shapes)[2],
                        ddpl_tensor **parts)
{
    la_batch b = {.bdim = packed->ndim - 1, .nb = 1};
    for (int i = 0; i < b.bdim; i++) b.nb *= b.bsizes[i] = packed->sizes[i];
    return la_parts(packed, &b, np, nd, shapes, parts);
}

static int unpack(ddpl_tensor *packed, const pack_ctx *c, ddpl_tensor **parts)
{
    return unpack_parts(packed, c->np, c->nd, (const int64_t(*)[2])c->shapes, parts);
}

static int unpack_node(ddpl_tensor *packed, const pack_node *c, ddpl_tensor **parts)
{
    return unpack_parts(packed, c->np, c->nd, (const int64_t(*)[2])c->shapes, parts);
}

static int finish(ddpl_tensor *packed, const pack_ctx *c, ddpl_tensor **outs)
{
    if (!packed) return -1;
    int rc = unpack(packed, c, outs);
    ddpl_tensor_release(packed);
    return rc;
}

/* x * v with v (..., k): columns: column j of x times v_j (v as a row, (..., 1, k)); else
 * row j times v_j (v as a column, (..., k, 1)) */
static ddpl_tensor *scale_by(op_temps *k, ddpl_tensor *x, ddpl_tensor *v, bool columns)
{
    ddpl_tensor *vv = v ? OP_T(k, ddpl_unsqueeze(v, columns ? v->ndim - 1 : v->ndim)) : NULL;
    return OP_B(k, ddpl_mul, x, vv);
}

/* ---- qr ---- */

/* Reduced QR with m >= n (Walter & Lehmann): M = R gR^T - gQ^T Q, gA = (gQ + Q copyltu(M))
 * R^-T with copyltu(M) = tril(M) + tril(M, -1)^T. */
static ddpl_tensor *qr_tall_grad(op_temps *k, ddpl_tensor *gq, ddpl_tensor *gr, ddpl_tensor *q,
                                 ddpl_tensor *r)
{
    ddpl_tensor *m = OP_B(k, ddpl_sub, OP_B(k, ddpl_matmul, r, OP_U(k, la_mT, gr)),
                          OP_B(k, ddpl_matmul, OP_U(k, la_mT, gq), q));
    int64_t n = r ? r->sizes[r->ndim - 1] : 0;
    ddpl_tensor *lo = r ? OP_T(k, la_weights(n, 1.0, 1.0, 0.0, r)) : NULL;
    ddpl_tensor *slo = r ? OP_T(k, la_weights(n, 1.0, 0.0, 0.0, r)) : NULL;
    ddpl_tensor *cm =
        OP_B(k, ddpl_add, OP_B(k, ddpl_mul, m, lo), OP_U(k, la_mT, OP_B(k, ddpl_mul, m, slo)));
    ddpl_tensor *rhs = OP_B(k, ddpl_add, gq, OP_B(k, ddpl_matmul, q, cm));
    /* rhs R^-T = (R^-1 rhs^T)^T */
    return OP_U(k, la_mT, OP_B(k, ddpl_linalg_solve, r, OP_U(k, la_mT, rhs)));
}

static int qr_backward(ddpl_node *n, ddpl_tensor *grad, ddpl_tensor **gi)
{
    pack_node *c = DDPL_NODE_CTX(n, pack_node);
    if (c->mode == 2)
        return ddpl_error("linalg.qr: The derivative of linalg.qr depends on Q, which is not "
                          "computed when mode='r'. Please use linalg.qr(A, mode='reduced') if you "
                          "are going to differentiate through linalg.qr.");
    int64_t m = c->m, nn = c->n;
    if (c->mode == 1 && m > nn)
        return ddpl_error("linalg.qr: The QR decomposition is not differentiable when "
                          "mode='complete' and nrows > ncols.");
    ddpl_tensor *y = ddpl_node_saved(n, 0);
    if (!y) return -1;
    ddpl_tensor *p[2], *g[2];
    if (unpack_node(y, c, p) < 0) return -1;
    if (unpack_node(grad, c, g) < 0) {
        ddpl_tensor_release(p[0]);
        ddpl_tensor_release(p[1]);
        return -1;
    }
    op_temps k0 = {0}, k = {0}; /* the operands, then the formula (one set would overflow) */
    for (int i = 0; i < 2; i++) OP_T(&k0, p[i]), OP_T(&k0, g[i]);
    if (k0.failed) k.failed = true;
    ddpl_tensor *ga;
    if (m >= nn) {
        ga = qr_tall_grad(&k, g[0], g[1], p[0], p[1]);
    } else { /* A = Q [X Y]: X = Q R1 (square), Y = Q R2; gX from (gQ + Y gR2^T, gR1) */
        ddpl_tensor *r1 = OP_T(&k, ddpl_narrow(p[1], -1, 0, m));
        ddpl_tensor *r2 = OP_T(&k, ddpl_narrow(p[1], -1, m, nn - m));
        ddpl_tensor *gr1 = OP_T(&k, ddpl_narrow(g[1], -1, 0, m));
        ddpl_tensor *gr2 = OP_T(&k, ddpl_narrow(g[1], -1, m, nn - m));
        ddpl_tensor *yy = OP_B(&k, ddpl_matmul, p[0], r2);
        ddpl_tensor *gq = OP_B(&k, ddpl_add, g[0], OP_B(&k, ddpl_matmul, yy, OP_U(&k, la_mT, gr2)));
        ddpl_tensor *gx = qr_tall_grad(&k, gq, gr1, p[0], r1);
        ddpl_tensor *gy = OP_B(&k, ddpl_matmul, p[0], gr2);
        ga = k.failed ? NULL : OP_T(&k, ddpl_cat(2, OP_INPUTS(gx, gy), -1));
    }
    gi[0] = op_temps_result(&k, ga);
    op_temps_release(&k0);
    return gi[0] ? 0 : -1;
}

int ddpl_linalg_qr(ddpl_tensor *a, const char *mode, ddpl_tensor **q, ddpl_tensor **r)
{
    *q = *r = NULL;
    pack_ctx c = {0};
    if (la_check_matrix("linalg.qr", a, false, &c.b) < 0) return -1;
    if (!strcmp(mode, "reduced"))
        c.mode = 0;
    else if (!strcmp(mode, "complete"))
        c.mode = 1;
    else if (!strcmp(mode, "r"))
        c.mode = 2;
    else
        return ddpl_error("linalg.qr: qr received unrecognized mode '%s' but expected one of "
                          "'reduced' (default), 'r', or 'complete'",
                          mode);
    int64_t m = c.b.m, n = c.b.n, kk = m < n ? m : n, qc = c.mode == 1 ? m : kk;
    c.np = 2;
    c.nd[0] = c.nd[1] = 2;
    c.shapes[0][0] = m, c.shapes[0][1] = c.mode == 2 ? 0 : qc;
    c.shapes[1][0] = qc, c.shapes[1][1] = n;
    int64_t total = pack_total(&c);
    double *h = la_host_f64(a);
    double *pk = h ? ddpl_malloc_array(c.b.nb * total + 1, sizeof *pk) : NULL;
    double *qq = pk ? ddpl_malloc_array(m * qc + 1, sizeof *qq) : NULL;
    if (!qq) {
        free(h);
        free(pk);
        return -1;
    }
    for (int64_t i = 0; i < c.b.nb; i++) {
        double *o = pk + i * total, *qo = o + part_len(&c, 0);
        if (ddpl_ref_qr(m, n, h + i * m * n, c.mode == 2 ? NULL : qq, qc, qo) < 0) {
            free(h), free(pk), free(qq);
            return ddpl_error("linalg.qr: out of memory");
        }
        if (c.mode != 2) memcpy(o, qq, sizeof(double) * m * qc);
    }
    ddpl_tensor *packed = pack_tensor(pk, a, &c, "LinalgQrBackward0", qr_backward);
    free(h);
    free(pk);
    free(qq);
    ddpl_tensor *outs[2];
    if (finish(packed, &c, outs) < 0) return -1;
    *r = outs[1];
    if (c.mode == 2) { /* PyTorch returns an empty Q */
        ddpl_tensor_release(outs[0]);
        int64_t zero = 0;
        outs[0] = ddpl_empty(1, &zero, (ddpl_dtype)a->dtype, a->device);
        if (!outs[0]) {
            ddpl_tensor_release(*r);
            *r = NULL;
            return -1;
        }
    }
    *q = outs[0];
    return 0;
}

/* ---- svd ---- */

/* PyTorch's svd_backward (real case) on U (m x k), S (k), Vh (k x n), the full_matrices
 * outputs narrowed to k first: with E_jk = S_k^2 - S_j^2 (1 on the diagonal),
 * gA = U [(skew(U^T gU) S + S skew(Vh gVh^T)) / E + diag(gS)] Vh
 *      + (I - U U^T) gU S^-1 Vh  (m > k)  +  U S^-1 gVh (I - Vh^T Vh)  (n > k). */
static int svd_backward(ddpl_node *n, ddpl_tensor *grad, ddpl_tensor **gi)
{
    pack_node *c = DDPL_NODE_CTX(n, pack_node);
    ddpl_tensor *y = ddpl_node_saved(n, 0);
    if (!y) return -1;
    ddpl_tensor *p[3], *g[3];
    if (unpack_node(y, c, p) < 0) return -1;
    if (unpack_node(grad, c, g) < 0) {
        for (int i = 0; i < 3; i++) ddpl_tensor_release(p[i]);
        return -1;
    }
    /* two sets of temporaries: the operands (k0), then the formula (k); one would overflow */
    op_temps k0 = {0}, k = {0};
    for (int i = 0; i < 3; i++) OP_T(&k0, p[i]), OP_T(&k0, g[i]);
    int64_t m = c->m, nn = c->n, kk = m < nn ? m : nn;
    ddpl_tensor *u = p[0], *s = p[1], *vh = p[2], *gu = g[0], *gs = g[1], *gvh = g[2];
    if (c->mode) { /* full_matrices: the first k singular vectors */
        u = OP_T(&k0, ddpl_narrow(u, -1, 0, kk));
        gu = OP_T(&k0, ddpl_narrow(gu, -1, 0, kk));
        vh = OP_T(&k0, ddpl_narrow(vh, -2, 0, kk));
        gvh = OP_T(&k0, ddpl_narrow(gvh, -2, 0, kk));
    }
    ddpl_tensor *uhgu = OP_B(&k0, ddpl_matmul, OP_U(&k0, la_mT, u), gu);
    ddpl_tensor *vhgv = OP_B(&k0, ddpl_matmul, vh, OP_U(&k0, la_mT, gvh));
    if (k0.failed) k.failed = true;
    ddpl_tensor *sku = OP_B(&k, ddpl_sub, uhgu, OP_U(&k, la_mT, uhgu));
    ddpl_tensor *skv = OP_B(&k, ddpl_sub, vhgv, OP_U(&k, la_mT, vhgv));
    ddpl_tensor *s2 = OP_B(&k, ddpl_mul, s, s);
    ddpl_tensor *s2r = s2 ? OP_T(&k, ddpl_unsqueeze(s2, s2->ndim - 1)) : NULL; /* (..., 1, k) */
    ddpl_tensor *s2c = s2 ? OP_T(&k, ddpl_unsqueeze(s2, s2->ndim)) : NULL;     /* (..., k, 1) */
    ddpl_tensor *eye = s ? OP_T(&k, la_weights(kk, 0.0, 1.0, 0.0, s)) : NULL;
    ddpl_tensor *e = OP_B(&k, ddpl_add, OP_B(&k, ddpl_sub, s2r, s2c), eye);
    ddpl_tensor *inner =
        OP_B(&k, ddpl_add, scale_by(&k, sku, s, true), scale_by(&k, skv, s, false));
    inner = OP_B(&k, ddpl_add, OP_B(&k, ddpl_div, inner, e), scale_by(&k, eye, gs, false));
    ddpl_tensor *ga = OP_B(&k, ddpl_matmul, OP_B(&k, ddpl_matmul, u, inner), vh);
    if (m > kk) {
        ddpl_tensor *t = OP_B(&k, ddpl_sub, gu, OP_B(&k, ddpl_matmul, u, uhgu));
        t = scale_by(&k, t, OP_U(&k, ddpl_reciprocal, s), true);
        ga = OP_B(&k, ddpl_add, ga, OP_B(&k, ddpl_matmul, t, vh));
    }
    if (nn > kk) {
        ddpl_tensor *t = OP_B(&k, ddpl_sub, gvh, OP_B(&k, ddpl_matmul, OP_U(&k, la_mT, vhgv), vh));
        t = scale_by(&k, t, OP_U(&k, ddpl_reciprocal, s), false);
        ga = OP_B(&k, ddpl_add, ga, OP_B(&k, ddpl_matmul, u, t));
    }
    gi[0] = op_temps_result(&k, ga);
    op_temps_release(&k0);
    return gi[0] ? 0 : -1;
}

/* Every matrix's SVD into pk (nb x total: U, S, Vh as the parts of c) or, with values_only,
 * pk (nb x k) and, when vecs is given, U and Vh (reduced) into vecs (nb x (m*k + k*n)). */
static int host_svd(const char *op, ddpl_tensor *a, const pack_ctx *c, double *pk, double *vecs,
                    bool values_only)
{
    int64_t m = c->b.m, n = c->b.n, kk = m < n ? m : n;
    double *h = la_host_f64(a);
    if (!h) return -1;
    int64_t total = values_only ? kk : pack_total(c);
    for (int64_t i = 0; i < c->b.nb; i++) {
        double *o = pk + i * total, *u, *s, *vt;
        if (values_only) {
            s = o;
            u = vecs ? vecs + i * (m * kk + kk * n) : NULL;
            vt = vecs ? u + m * kk : NULL;
        } else {
            u = o, s = o + part_len(c, 0), vt = s + kk;
        }
        int rc = ddpl_ref_svd(m, n, h + i * m * n, u, s, vt, !values_only && c->mode);
        if (rc < 0) {
            free(h);
            return rc == -1 ? -1
                            : la_batch_error(op, c->b.nb, i,
                                             "The algorithm failed to "
                                             "converge.");
        }
    }
    free(h);
    return 0;
}

int ddpl_linalg_svd(ddpl_tensor *a, bool full_matrices, ddpl_tensor **u, ddpl_tensor **s,
                    ddpl_tensor **vh)
{
    *u = *s = *vh = NULL;
    pack_ctx c = {0};
    if (la_check_matrix("linalg.svd", a, false, &c.b) < 0) return -1;
    int64_t m = c.b.m, n = c.b.n, kk = m < n ? m : n;
    c.mode = full_matrices;
    c.np = 3;
    c.nd[0] = 2, c.nd[1] = 1, c.nd[2] = 2;
    c.shapes[0][0] = m, c.shapes[0][1] = full_matrices ? m : kk;
    c.shapes[1][0] = kk;
    c.shapes[2][0] = full_matrices ? n : kk, c.shapes[2][1] = n;
    double *pk = ddpl_malloc_array(c.b.nb * pack_total(&c) + 1, sizeof *pk);
    if (!pk) return -1;
    ddpl_tensor *packed = host_svd("linalg.svd", a, &c, pk, NULL, false) == 0
                              ? pack_tensor(pk, a, &c, "LinalgSvdBackward0", svd_backward)
                              : NULL;
    free(pk);
    ddpl_tensor *outs[3];
    if (finish(packed, &c, outs) < 0) return -1;
    *u = outs[0], *s = outs[1], *vh = outs[2];
    return 0;
}

/* svdvals: gA = U diag(gS) Vh. saved: U, Vh (reduced). */
static int svdvals_backward(ddpl_node *n, ddpl_tensor *grad, ddpl_tensor **gi)
{
    ddpl_tensor *u = ddpl_node_saved(n, 0), *vh = ddpl_node_saved(n, 1);
    if (!u || !vh) return -1;
    op_temps k = {0};
    gi[0] = op_temps_result(&k, OP_B(&k, ddpl_matmul, scale_by(&k, u, grad, true), vh));
    return gi[0] ? ddpl_mark_not_differentiable("linalg.svdvals", n, grad, 1, gi, true) : -1;
}

ddpl_tensor *ddpl_linalg_svdvals(ddpl_tensor *a)
{
    pack_ctx c = {0};
    if (la_check_matrix("linalg.svdvals", a, false, &c.b) < 0) return NULL;
    int64_t m = c.b.m, n = c.b.n, kk = m < n ? m : n;
    bool grad = ddpl_grad_needed(1, &a);
    double *pk = ddpl_malloc_array(c.b.nb * kk + 1, sizeof *pk);
    double *vecs =
        grad && pk ? ddpl_malloc_array(c.b.nb * (m * kk + kk * n) + 1, sizeof *vecs) : NULL;
    ddpl_tensor *out = NULL, *tu = NULL, *tv = NULL;
    if (pk && (!grad || vecs) && host_svd("linalg.svdvals", a, &c, pk, vecs, true) == 0) {
        int64_t sizes[DDPL_MAX_DIMS];
        out = la_from_host(pk, la_shape(&c.b, 1, &kk, sizes), sizes, a);
        if (out && grad) { /* U and Vh per matrix, as two tensors */
            int64_t su[2] = {m, kk}, sv[2] = {kk, n}, s2[DDPL_MAX_DIMS];
            double *hu = ddpl_malloc_array(c.b.nb * (m * kk + kk * n) + 1, sizeof *hu);
            if (hu) {
                for (int64_t i = 0; i < c.b.nb; i++) {
                    memcpy(hu + i * m * kk, vecs + i * (m * kk + kk * n), sizeof(double) * m * kk);
                    memcpy(hu + c.b.nb * m * kk + i * kk * n, vecs + i * (m * kk + kk * n) + m * kk,
                           sizeof(double) * kk * n);
                }
                tu = la_from_host(hu, la_shape(&c.b, 2, su, s2), s2, a);
                tv = tu ? la_from_host(hu + c.b.nb * m * kk, la_shape(&c.b, 2, sv, s2), s2, a)
                        : NULL;
                free(hu);
            }
            if (tv) {
                ddpl_node *node = ddpl_node_new("LinalgSvdBackward0", svdvals_backward, 1, &a);
                ddpl_node_save(node, tu);
                ddpl_node_save(node, tv);
                ddpl_set_history(out, node);
            } else {
                ddpl_tensor_release(out);
                out = NULL;
            }
        }
    }
    ddpl_tensor_release(tu);
    ddpl_tensor_release(tv);
    free(pk);
    free(vecs);
    return out;
}

/* ---- eigh ---- */

/* PyTorch's linalg_eig_backward for Hermitian input: with E_ij = L_j - L_i (1 on the diagonal),
 * gA = V (diag(gL) + skew(V^T gV) / (2 E)) V^T. */
static int eigh_backward(ddpl_node *n, ddpl_tensor *grad, ddpl_tensor **gi)
{
    pack_node *c = DDPL_NODE_CTX(n, pack_node);
    ddpl_tensor *y = ddpl_node_saved(n, 0);
    if (!y) return -1;
    ddpl_tensor *p[2], *g[2];
    if (unpack_node(y, c, p) < 0) return -1;
    if (unpack_node(grad, c, g) < 0) {
        ddpl_tensor_release(p[0]);
        ddpl_tensor_release(p[1]);
        return -1;
    }
    op_temps k = {0};
    for (int i = 0; i < 2; i++) OP_T(&k, p[i]), OP_T(&k, g[i]);
    ddpl_tensor *l = p[0], *v = p[1], *gl = g[0], *gv = g[1];
    ddpl_tensor *x = OP_B(&k, ddpl_matmul, OP_U(&k, la_mT, v), gv);
    ddpl_tensor *sk =
        OP_B(&k, ddpl_mul, OP_B(&k, ddpl_sub, x, OP_U(&k, la_mT, x)), OP_NUM(&k, 0.5));
    ddpl_tensor *lr = l ? OP_T(&k, ddpl_unsqueeze(l, l->ndim - 1)) : NULL;
    ddpl_tensor *lc = l ? OP_T(&k, ddpl_unsqueeze(l, l->ndim)) : NULL;
    ddpl_tensor *eye = l ? OP_T(&k, la_weights(c->n, 0.0, 1.0, 0.0, l)) : NULL;
    ddpl_tensor *e = OP_B(&k, ddpl_add, OP_B(&k, ddpl_sub, lr, lc), eye);
    ddpl_tensor *inner = OP_B(&k, ddpl_div, sk, e);
    inner = OP_B(&k, ddpl_add, inner, scale_by(&k, eye, gl, false));
    ddpl_tensor *ga = OP_B(&k, ddpl_matmul, OP_B(&k, ddpl_matmul, v, inner), OP_U(&k, la_mT, v));
    gi[0] = op_temps_result(&k, ga);
    return gi[0] ? 0 : -1;
}

/* eigvalsh: gA = V diag(gL) V^T. saved: V. */
static int eigvalsh_backward(ddpl_node *n, ddpl_tensor *grad, ddpl_tensor **gi)
{
    ddpl_tensor *v = ddpl_node_saved(n, 0);
    if (!v) return -1;
    op_temps k = {0};
    ddpl_tensor *ga = OP_B(&k, ddpl_matmul, scale_by(&k, v, grad, true), OP_U(&k, la_mT, v));
    gi[0] = op_temps_result(&k, ga);
    return gi[0] ? ddpl_mark_not_differentiable("linalg.eigvalsh", n, grad, 1, gi, true) : -1;
}

static int parse_uplo(const char *op, const char *uplo, bool *lower)
{
    if (!strcmp(uplo, "L") || !strcmp(uplo, "l"))
        *lower = true;
    else if (!strcmp(uplo, "U") || !strcmp(uplo, "u"))
        *lower = false;
    else
        return ddpl_error("%s: Expected UPLO argument to be 'L' or 'U', but got %s", op, uplo);
    return 0;
}

/* Eigen-decomposition of each matrix, reading the lower or upper triangle: pk gets per matrix
 * the n eigenvalues then (with vectors) the n x n eigenvectors. */
static int host_eigh(const char *op, ddpl_tensor *a, const la_batch *b, bool lower, double *pk,
                     bool vectors)
{
    int64_t n = b->n, stride = vectors ? n + n * n : n;
    double *h = la_host_f64(a);
    if (!h) return -1;
    for (int64_t i = 0; i < b->nb; i++) {
        double *m = h + i * n * n;
        for (int64_t r = 0; r < n; r++) /* symmetric from the chosen triangle */
            for (int64_t c = r + 1; c < n; c++) {
                if (lower)
                    m[r * n + c] = m[c * n + r];
                else
                    m[c * n + r] = m[r * n + c];
            }
        double *o = pk + i * stride;
        int rc = ddpl_ref_eigh(n, m, o, vectors ? o + n : NULL);
        if (rc < 0) {
            free(h);
            return rc == -2 ? ddpl_error("%s: out of memory", op)
                            : la_batch_error(op, b->nb, i, "The algorithm failed to converge.");
        }
    }
    free(h);
    return 0;
}

int ddpl_linalg_eigh(ddpl_tensor *a, const char *uplo, ddpl_tensor **eigenvalues,
                     ddpl_tensor **eigenvectors)
{
    *eigenvalues = *eigenvectors = NULL;
    pack_ctx c = {0};
    bool lower = true;
    if (la_check_matrix("linalg.eigh", a, true, &c.b) < 0) return -1;
    if (parse_uplo("linalg.eigh", uplo, &lower) < 0) return -1;
    int64_t n = c.b.n;
    c.np = 2;
    c.nd[0] = 1, c.nd[1] = 2;
    c.shapes[0][0] = n;
    c.shapes[1][0] = c.shapes[1][1] = n;
    double *pk = ddpl_malloc_array(c.b.nb * pack_total(&c) + 1, sizeof *pk);
    if (!pk) return -1;
    ddpl_tensor *packed = host_eigh("linalg.eigh", a, &c.b, lower, pk, true) == 0
                              ? pack_tensor(pk, a, &c, "LinalgEighBackward0", eigh_backward)
                              : NULL;
    free(pk);
    ddpl_tensor *outs[2];
    if (finish(packed, &c, outs) < 0) return -1;
    *eigenvalues = outs[0], *eigenvectors = outs[1];
    return 0;
}

ddpl_tensor *ddpl_linalg_eigvalsh(ddpl_tensor *a, const char *uplo)
{
    la_batch b;
    bool lower = true;
    if (la_check_matrix("linalg.eigvalsh", a, true, &b) < 0) return NULL;
    if (parse_uplo("linalg.eigvalsh", uplo, &lower) < 0) return NULL;
    bool grad = ddpl_grad_needed(1, &a);
    int64_t n = b.n, stride = n + n * n;
    double *pk = ddpl_malloc_array(b.nb * stride + 1, sizeof *pk);
    if (!pk || host_eigh("linalg.eigvalsh", a, &b, lower, pk, true) < 0) {
        free(pk);
        return NULL;
    }
    double *w = pk, *v = pk + b.nb * n; /* compact: all eigenvalues, then all eigenvectors */
    double *tmp = ddpl_malloc_array(b.nb * stride + 1, sizeof *tmp);
    ddpl_tensor *out = NULL, *tv = NULL;
    if (tmp) {
        for (int64_t i = 0; i < b.nb; i++) {
            memcpy(tmp + i * n, pk + i * stride, sizeof(double) * n);
            memcpy(tmp + b.nb * n + i * n * n, pk + i * stride + n, sizeof(double) * n * n);
        }
        w = tmp, v = tmp + b.nb * n;
        int64_t sizes[DDPL_MAX_DIMS], sv[2] = {n, n};
        out = la_from_host(w, la_shape(&b, 1, &n, sizes), sizes, a);
        if (out && grad) {
            tv = la_from_host(v, la_shape(&b, 2, sv, sizes), sizes, a);
            if (tv) {
                ddpl_node *node = ddpl_node_new("LinalgEighBackward0", eigvalsh_backward, 1, &a);
                ddpl_node_save(node, tv);
                ddpl_set_history(out, node);
            } else {
                ddpl_tensor_release(out);
                out = NULL;
            }
        }
    }
    ddpl_tensor_release(tv);
    free(tmp);
    free(pk);
    return out;
}
