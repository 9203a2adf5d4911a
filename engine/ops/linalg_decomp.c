/* ops/linalg_decomp.c: linalg.inv, linalg.solve, linalg.det, linalg.slogdet, linalg.cholesky.
 * defines: ddpl_linalg_inv, ddpl_linalg_solve, ddpl_linalg_det, ddpl_linalg_slogdet,
 *          ddpl_linalg_cholesky.
 *
 * Forward: LU with partial pivoting / Cholesky on the host in float64 (ops/linalg_util.h says
 * why). Backward: PyTorch's formulas written with ops (matmul, and these ops themselves), so
 * they run on the operand's device and can be differentiated again (create_graph). */
#include <math.h>

#include "core/linalg_ref.h"
#include "linalg_util.h"

/* ---- host solves ---- */

/* X = A^-1 B for each matrix of a batch: a (nb x n x n) is overwritten by its LU, b (nb x n x k)
 * by X. what: "inversion" or "solve" for the singular-matrix error. */
static int host_solve(const char *op, const char *what, double *a, double *b, int64_t nb, int64_t n,
                      int64_t k)
{
    int64_t *piv = ddpl_malloc_array(n ? n : 1, sizeof *piv);
    if (!piv) return -1;
    for (int64_t i = 0; i < nb; i++) {
        int sign, info = ddpl_ref_lu(n, a + i * n * n, piv, &sign);
        if (info) {
            char msg[200];
            snprintf(msg, sizeof msg,
                     "The diagonal element %d is zero, the %s could not be completed because the "
                     "input matrix is singular.",
                     info, what);
            free(piv);
            return la_batch_error(op, nb, i, msg);
        }
        ddpl_ref_lu_solve(n, a + i * n * n, piv, k, b + i * n * k);
    }
    free(piv);
    return 0;
}

/* ---- inv ---- */

/* d(A^-1) = -A^-1 dA A^-1, so gA = -A^-T g A^-T. saved: the output. */
static int inv_backward(ddpl_node *n, ddpl_tensor *grad, ddpl_tensor **gi)
{
    ddpl_tensor *y = ddpl_node_saved(n, 0);
    if (!y) return -1;
    op_temps k = {0};
    ddpl_tensor *yt = OP_U(&k, la_mT, y);
    ddpl_tensor *r = OP_B(&k, ddpl_matmul, OP_B(&k, ddpl_matmul, yt, grad), yt);
    gi[0] = op_temps_result(&k, OP_U(&k, ddpl_neg, r));
    return gi[0] ? 0 : -1;
}

ddpl_tensor *ddpl_linalg_inv(ddpl_tensor *a)
{
    la_batch b;
    if (la_check_matrix("linalg.inv", a, true, &b) < 0) return NULL;
    int64_t n = b.n;
    double *h = la_host_f64(a);
    double *x = h ? ddpl_malloc_array(b.nb * n * n, sizeof *x) : NULL;
    int rc = -1;
    if (x) {
        for (int64_t i = 0; i < b.nb * n * n; i++) x[i] = (i % (n * n)) % (n + 1) == 0;
        rc = host_solve("linalg.inv", "inversion", h, x, b.nb, n, n);
    }
    ddpl_tensor *out = rc == 0 ? la_from_host(x, a->ndim, a->sizes, a) : NULL;
    free(h);
    free(x);
    if (out && ddpl_grad_needed(1, &a)) {
        ddpl_node *node = ddpl_node_new("LinalgInvExBackward0", inv_backward, 1, &a);
        ddpl_node_save_output(node, out);
        ddpl_set_history(out, node);
    }
    return out;
}

/* ---- solve ---- */

/* X = A^-1 B: gB = A^-T g, gA = -gB X^T. inputs: A, B (equal batch dims); saved: A, X. */
static int solve_backward(ddpl_node *n, ddpl_tensor *grad, ddpl_tensor **gi)
{
    ddpl_tensor *a = ddpl_node_saved(n, 0), *x = ddpl_node_saved(n, 1);
    if (!a || !x) return -1;
    op_temps k = {0};
    ddpl_tensor *gb = OP_B(&k, ddpl_linalg_solve, OP_U(&k, la_mT, a), grad);
    if (ddpl_node_needs_grad(n, 0)) {
        ddpl_tensor *ga = OP_B(&k, ddpl_matmul, gb, OP_U(&k, la_mT, x));
        gi[0] = k.failed ? NULL : ddpl_neg(ga);
        if (!gi[0]) k.failed = true;
    }
    if (ddpl_node_needs_grad(n, 1) && !k.failed) gi[1] = ddpl_tensor_retain(gb);
    bool failed = k.failed;
    op_temps_release(&k);
    return failed ? -1 : 0;
}

/* A (..., n, n) X = B (..., n, k) with equal batch dims. */
static ddpl_tensor *solve_matrix(ddpl_tensor *a, ddpl_tensor *b)
{
    la_batch ba;
    if (la_check_matrix("linalg.solve", a, true, &ba) < 0) return NULL;
    int64_t n = ba.n, k = b->sizes[b->ndim - 1];
    double *ha = la_host_f64(a), *hb = ha ? la_host_f64(b) : NULL;
    int rc = hb ? host_solve("linalg.solve", "solve", ha, hb, ba.nb, n, k) : -1;
    ddpl_tensor *out = rc == 0 ? la_from_host(hb, b->ndim, b->sizes, b) : NULL;
    free(ha);
    free(hb);
    ddpl_tensor *ins[2] = {a, b};
    if (out && ddpl_grad_needed(2, ins)) {
        ddpl_node *node = ddpl_node_new("LinalgSolveExBackward0", solve_backward, 2, ins);
        ddpl_node_save(node, a);
        ddpl_node_save_output(node, out);
        ddpl_set_history(out, node);
    }
    return out;
}

/* PyTorch's linalg.solve: B is a vector (or a batch of them) when it is 1-D or has A's shape
 * without the last dim; batch dims broadcast (expand, whose gradient sums them back). */
ddpl_tensor *ddpl_linalg_solve(ddpl_tensor *a, ddpl_tensor *b)
{
    la_batch ba;
    if (la_check_matrix("linalg.solve", a, true, &ba) < 0) return NULL;
    if (ddpl_check_same_device("linalg.solve", a, b) < 0) return NULL;
    if (a->dtype != b->dtype)
        return ddpl_error("linalg.solve: Expected A and B to have the same dtype, but found A of "
                          "type %s and B of type %s instead",
                          ddpl_dtype_name((ddpl_dtype)a->dtype),
                          ddpl_dtype_name((ddpl_dtype)b->dtype)),
               NULL;
    bool vector = b->ndim == 1;
    if (!vector && b->ndim == a->ndim - 1) {
        vector = true;
        for (int i = 0; i < b->ndim; i++) vector = vector && b->sizes[i] == a->sizes[i];
    }
    if (!vector && b->ndim < 2)
        return ddpl_error("linalg.solve: The input tensor B must have at least 1 dimension."), NULL;
    op_temps k = {0};
    ddpl_tensor *bm = vector ? OP_T(&k, ddpl_unsqueeze(b, b->ndim)) : b;
    if (!bm) return op_temps_result(&k, NULL);
    if (bm->sizes[bm->ndim - 2] != ba.n) {
        char sa[128], sb[128];
        ddpl_error("linalg.solve: Incompatible shapes of A and B for the equation AX = B (%s and "
                   "%s)",
                   ddpl_shape_str(a, sa, sizeof sa), ddpl_shape_str(b, sb, sizeof sb));
        return op_temps_result(&k, NULL);
    }
    int nd;
    int64_t bs[DDPL_MAX_DIMS];
    if (ddpl_broadcast_shape("linalg.solve", a->ndim - 2, a->sizes, bm->ndim - 2, bm->sizes, &nd,
                             bs) < 0)
        return op_temps_result(&k, NULL);
    int64_t sa[DDPL_MAX_DIMS], sb[DDPL_MAX_DIMS];
    memcpy(sa, bs, sizeof(int64_t) * nd);
    memcpy(sb, bs, sizeof(int64_t) * nd);
    sa[nd] = sa[nd + 1] = ba.n;
    sb[nd] = ba.n;
    sb[nd + 1] = bm->sizes[bm->ndim - 1];
    ddpl_tensor *ae = OP_T(&k, ddpl_expand(a, nd + 2, sa));
    ddpl_tensor *be = k.failed ? NULL : OP_T(&k, ddpl_expand(bm, nd + 2, sb));
    ddpl_tensor *x = k.failed ? NULL : OP_T(&k, solve_matrix(ae, be));
    ddpl_tensor *r = vector && x ? OP_T(&k, ddpl_squeeze(x, x->ndim - 1)) : x;
    return op_temps_result(&k, r);
}

/* ---- det, slogdet ---- */

/* LU of each matrix: det[i] (sign * prod of U's diagonal), or for slogdet sign[i] and
 * logabs[i] (log|det|, -inf with sign 0 when singular). */
static int host_det(ddpl_tensor *a, const la_batch *b, double *det, double *sign, double *logabs)
{
    double *h = la_host_f64(a);
    int64_t n = b->n, *piv = h ? ddpl_malloc_array(n ? n : 1, sizeof *piv) : NULL;
    if (!piv) {
        free(h);
        return -1;
    }
    for (int64_t i = 0; i < b->nb; i++) {
        double *m = h + i * n * n, d = 1.0, la = 0.0;
        int s;
        ddpl_ref_lu(n, m, piv, &s);
        double sg = s;
        for (int64_t j = 0; j < n; j++) {
            double u = m[j * n + j];
            d *= u;
            la += log(fabs(u));
            sg *= u > 0 ? 1.0 : u < 0 ? -1.0 : 0.0;
        }
        if (det) det[i] = s * d;
        if (sign) sign[i] = sg;
        if (logabs) logabs[i] = la;
    }
    free(piv);
    free(h);
    return 0;
}

/* The cofactor matrix of each matrix, adj(A)^T = det(U) det(Vh) U diag(prod_{j != i} s_j) Vh
 * from A = U diag(s) Vh: finite and exact for singular A (det's gradient there, as PyTorch's
 * SVD-based formula). Host float64; no autograd. */
static ddpl_tensor *host_cofactor(ddpl_tensor *a, const la_batch *b)
{
    int64_t n = b->n;
    double *h = la_host_f64(a);
    double *u = h ? ddpl_malloc_array(3 * n * n + n, sizeof *u) : NULL;
    int64_t *piv = u ? ddpl_malloc_array(n, sizeof *piv) : NULL;
    int rc = piv ? 0 : -1;
    for (int64_t i = 0; i < b->nb && rc == 0; i++) {
        double *m = h + i * n * n, *vt = u + n * n, *s = vt + n * n, *w = s + n;
        if (ddpl_ref_svd(n, n, m, u, s, vt, true) < 0) {
            rc = ddpl_error("linalg.det: the SVD of the backward did not converge");
            break;
        }
        int su, sv;
        double du = 1.0, dv = 1.0;
        memcpy(w, u, sizeof(double) * n * n);
        ddpl_ref_lu(n, w, piv, &su);
        for (int64_t j = 0; j < n; j++) du *= w[j * n + j];
        memcpy(w, vt, sizeof(double) * n * n);
        ddpl_ref_lu(n, w, piv, &sv);
        for (int64_t j = 0; j < n; j++) dv *= w[j * n + j];
        double f = (du * su > 0 ? 1.0 : -1.0) * (dv * sv > 0 ? 1.0 : -1.0);
        for (int64_t r = 0; r < n; r++) {
            double p = f; /* prod of the other singular values */
            for (int64_t j = 0; j < n; j++) p *= j == r ? 1.0 : s[j];
            for (int64_t c = 0; c < n; c++) u[c * n + r] *= p; /* U diag(p) */
        }
        for (int64_t r = 0; r < n; r++)
            for (int64_t c = 0; c < n; c++) {
                double acc = 0.0;
                for (int64_t j = 0; j < n; j++) acc += u[r * n + j] * vt[j * n + c];
                m[r * n + c] = acc;
            }
    }
    ddpl_tensor *out = rc == 0 ? la_from_host(h, a->ndim, a->sizes, a) : NULL;
    free(piv);
    free(u);
    free(h);
    return out;
}

typedef struct {
    bool logabs; /* slogdet's logabsdet: gA = g A^-T; det: gA = g det A^-T */
} det_ctx;

/* saved: A, output. */
static int det_backward(ddpl_node *n, ddpl_tensor *grad, ddpl_tensor **gi)
{
    ddpl_tensor *a = ddpl_node_saved(n, 0), *y = ddpl_node_saved(n, 1);
    if (!a || !y) return -1;
    bool logabs = DDPL_NODE_CTX(n, det_ctx)->logabs;
    op_temps k = {0};
    /* g (..., 1, 1) scales each matrix */
    ddpl_tensor *g1 = OP_T(&k, ddpl_unsqueeze(grad, grad->ndim));
    ddpl_tensor *g2 = g1 ? OP_T(&k, ddpl_unsqueeze(g1, g1->ndim)) : NULL;
    if (!logabs) {
        bool singular = false;
        ddpl_tensor *z = OP_NUM(&k, 0.0);
        ddpl_tensor *any = OP_U(&k, ddpl_sum, OP_B(&k, ddpl_eq, y, z));
        double hits = 0.0;
        if (any && ddpl_tensor_item(any, &hits) < 0) k.failed = true;
        singular = hits != 0.0;
        if (singular) { /* the cofactor matrix, from an SVD (not differentiable again) */
            la_batch b;
            la_check_matrix("linalg.det", a, true, &b);
            ddpl_tensor *cof = OP_T(&k, host_cofactor(a, &b));
            gi[0] = op_temps_result(&k, OP_B(&k, ddpl_mul, g2, cof));
            return gi[0] ? ddpl_mark_not_differentiable("linalg.det", n, grad, 1, gi, true) : -1;
        }
        ddpl_tensor *y1 = OP_T(&k, ddpl_unsqueeze(y, y->ndim));
        ddpl_tensor *y2 = y1 ? OP_T(&k, ddpl_unsqueeze(y1, y1->ndim)) : NULL;
        g2 = OP_B(&k, ddpl_mul, g2, y2);
    }
    ddpl_tensor *it = OP_U(&k, la_mT, OP_U(&k, ddpl_linalg_inv, a));
    gi[0] = op_temps_result(&k, OP_B(&k, ddpl_mul, g2, it));
    return gi[0] ? 0 : -1;
}

static void record_det(ddpl_tensor *out, ddpl_tensor *a, bool logabs)
{
    if (!ddpl_grad_needed(1, &a)) return;
    ddpl_node *node = ddpl_node_new(logabs ? "LinalgSlogdetBackward0" : "LinalgDetBackward0",
                                    det_backward, 1, &a);
    DDPL_NODE_CTX(node, det_ctx)->logabs = logabs;
    ddpl_node_save(node, a);
    ddpl_node_save_output(node, out);
    ddpl_set_history(out, node);
}

ddpl_tensor *ddpl_linalg_det(ddpl_tensor *a)
{
    la_batch b;
    if (la_check_matrix("linalg.det", a, true, &b) < 0) return NULL;
    double *d = ddpl_malloc_array(b.nb ? b.nb : 1, sizeof *d);
    ddpl_tensor *out =
        d && host_det(a, &b, d, NULL, NULL) == 0 ? la_from_host(d, b.bdim, b.bsizes, a) : NULL;
    free(d);
    if (out) record_det(out, a, false);
    return out;
}

int ddpl_linalg_slogdet(ddpl_tensor *a, ddpl_tensor **sign, ddpl_tensor **logabsdet)
{
    *sign = *logabsdet = NULL;
    la_batch b;
    if (la_check_matrix("linalg.slogdet", a, true, &b) < 0) return -1;
    double *d = ddpl_malloc_array(2 * (b.nb ? b.nb : 1), sizeof *d);
    if (!d || host_det(a, &b, NULL, d, d + b.nb) < 0) {
        free(d);
        return -1;
    }
    *sign = la_from_host(d, b.bdim, b.bsizes, a);
    *logabsdet = *sign ? la_from_host(d + b.nb, b.bdim, b.bsizes, a) : NULL;
    free(d);
    if (!*logabsdet) {
        ddpl_tensor_release(*sign);
        *sign = NULL;
        return -1;
    }
    record_det(*logabsdet, a, true);
    return 0;
}

/* ---- cholesky ---- */

/* PyTorch's cholesky_backward: phi = tril(L^T gL) with its diagonal halved,
 * gA = L^-T phi L^-1, symmetrised. saved: L (lower; an upper result is transposed first). */
typedef struct {
    bool upper;
} chol_ctx;

static int cholesky_backward(ddpl_node *n, ddpl_tensor *grad, ddpl_tensor **gi)
{
    ddpl_tensor *l = ddpl_node_saved(n, 0);
    if (!l) return -1;
    op_temps k = {0};
    ddpl_tensor *g = grad;
    if (DDPL_NODE_CTX(n, chol_ctx)->upper) { /* L = U^T, gL = gU^T */
        l = OP_U(&k, la_mT, l);
        g = OP_U(&k, la_mT, grad);
    }
    ddpl_tensor *w = l ? OP_T(&k, la_weights(l->sizes[l->ndim - 1], 1.0, 0.5, 0.0, l)) : NULL;
    ddpl_tensor *lt = OP_U(&k, la_mT, l);
    ddpl_tensor *phi = OP_B(&k, ddpl_mul, OP_B(&k, ddpl_matmul, lt, g), w);
    ddpl_tensor *li = OP_U(&k, ddpl_linalg_inv, l);
    ddpl_tensor *ga = OP_B(&k, ddpl_matmul, OP_B(&k, ddpl_matmul, OP_U(&k, la_mT, li), phi), li);
    ddpl_tensor *s = OP_B(&k, ddpl_add, ga, OP_U(&k, la_mT, ga));
    gi[0] = op_temps_result(&k, OP_B(&k, ddpl_mul, s, OP_NUM(&k, 0.5)));
    return gi[0] ? 0 : -1;
}

ddpl_tensor *ddpl_linalg_cholesky(ddpl_tensor *a, bool upper)
{
    la_batch b;
    if (la_check_matrix("linalg.cholesky", a, true, &b) < 0) return NULL;
    int64_t n = b.n;
    double *h = la_host_f64(a);
    if (!h) return NULL;
    for (int64_t i = 0; i < b.nb; i++) {
        int info = ddpl_ref_cholesky(n, h + i * n * n);
        if (info) {
            char msg[220];
            snprintf(msg, sizeof msg,
                     "The factorization could not be completed because the input is not "
                     "positive-definite (the leading minor of order %d is not positive-definite).",
                     info);
            free(h);
            la_batch_error("linalg.cholesky", b.nb, i, msg);
            return NULL;
        }
        if (upper) /* U = L^T */
            for (int64_t r = 0; r < n; r++)
                for (int64_t c = r + 1; c < n; c++) {
                    double *m = h + i * n * n;
                    m[r * n + c] = m[c * n + r];
                    m[c * n + r] = 0.0;
                }
    }
    ddpl_tensor *out = la_from_host(h, a->ndim, a->sizes, a);
    free(h);
    if (out && ddpl_grad_needed(1, &a)) {
        ddpl_node *node = ddpl_node_new("LinalgCholeskyExBackward0", cholesky_backward, 1, &a);
        DDPL_NODE_CTX(node, chol_ctx)->upper = upper;
        ddpl_node_save_output(node, out);
        ddpl_set_history(out, node);
    }
    return out;
}
