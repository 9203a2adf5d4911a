/* ops/linalg_pinv.c: linalg.pinv and linalg.matrix_rank.
 * defines: ddpl_linalg_pinv, ddpl_linalg_matrix_rank.
 *
 * Compositions of linalg.svd (or linalg.eigh for hermitian input), as PyTorch 1.13's: singular
 * values above tol = max(atol, rtol * the largest) count; rtol defaults to eps * max(m, n)
 * unless atol > 0 is given. pinv has PyTorch's own gradient (pinv_backward, the derivative of
 * the pseudo-inverse for a perturbation of constant rank), not the decomposition's. */
#include <float.h>
#include <math.h>

#include "linalg_util.h"

/* the tolerance (..., 1) for singular values s (..., k) */
static ddpl_tensor *tolerance(op_temps *k, ddpl_tensor *s, const ddpl_tensor *a, double atol,
                              double rtol, bool has_atol, bool has_rtol)
{
    int64_t m = a->sizes[a->ndim - 2], n = a->sizes[a->ndim - 1];
    if (!has_rtol)
        rtol = has_atol && atol > 0 ? 0.0
                                    : (a->dtype == DDPL_FLOAT32 ? FLT_EPSILON : DBL_EPSILON) *
                                          (double)(m > n ? m : n);
    int last = -1;
    ddpl_tensor *smax =
        s && s->sizes[s->ndim - 1] > 0 ? OP_T(k, ddpl_amax(s, 1, &last, true)) : NULL;
    if (!smax) { /* no singular values: any tolerance will do */
        return s ? OP_NUM(k, has_atol ? atol : 0.0) : NULL;
    }
    ddpl_tensor *t = OP_B(k, ddpl_mul, smax, OP_NUM(k, rtol));
    return t ? OP_T(k, ddpl_clamp(t, true, has_atol ? atol : 0.0, false, 0.0)) : NULL;
}

/* singular values (or |eigenvalues| for hermitian input) and, when vectors, the factors */
static int spectrum(op_temps *k, ddpl_tensor *a, bool hermitian, bool vectors, ddpl_tensor **s,
                    ddpl_tensor **left, ddpl_tensor **right)
{
    *s = *left = *right = NULL;
    if (hermitian) {
        ddpl_tensor *w, *v;
        if (vectors) {
            if (ddpl_linalg_eigh(a, "L", &w, &v) < 0) return -1;
            OP_T(k, w), OP_T(k, v);
            *left = v, *right = w; /* pinv = V diag(1/w) V^T */
        } else {
            w = OP_T(k, ddpl_linalg_eigvalsh(a, "L"));
        }
        *s = OP_U(k, ddpl_abs, w);
    } else if (vectors) {
        ddpl_tensor *u, *sv, *vh;
        if (ddpl_linalg_svd(a, false, &u, &sv, &vh) < 0) return -1;
        OP_T(k, u), OP_T(k, sv), OP_T(k, vh);
        *s = sv, *left = u, *right = vh;
    } else {
        *s = OP_T(k, ddpl_linalg_svdvals(a));
    }
    return *s ? 0 : -1;
}

/* With P = A+ and G the gradient of P (PyTorch's pinv_backward):
 * gA = -P^T G P^T + (I - A P) G^T P P^T + P^T P G^T (I - P A). saved: A, P. */
static int pinv_backward(ddpl_node *n, ddpl_tensor *grad, ddpl_tensor **gi)
{
    ddpl_tensor *a = ddpl_node_saved(n, 0), *p = ddpl_node_saved(n, 1);
    if (!a || !p) return -1;
    op_temps k = {0};
    ddpl_tensor *pt = OP_U(&k, la_mT, p), *gt = OP_U(&k, la_mT, grad);
    ddpl_tensor *t1 = OP_B(&k, ddpl_matmul, OP_B(&k, ddpl_matmul, pt, grad), pt);
    ddpl_tensor *gpp = OP_B(&k, ddpl_matmul, OP_B(&k, ddpl_matmul, gt, p), pt); /* G^T P P^T */
    ddpl_tensor *t2 =
        OP_B(&k, ddpl_sub, gpp, OP_B(&k, ddpl_matmul, OP_B(&k, ddpl_matmul, a, p), gpp));
    ddpl_tensor *ptpgt = OP_B(&k, ddpl_matmul, OP_B(&k, ddpl_matmul, pt, p), gt); /* P^T P G^T */
    ddpl_tensor *t3 =
        OP_B(&k, ddpl_sub, ptpgt, OP_B(&k, ddpl_matmul, ptpgt, OP_B(&k, ddpl_matmul, p, a)));
    gi[0] = op_temps_result(&k, OP_B(&k, ddpl_add, OP_B(&k, ddpl_sub, t2, t1), t3));
    return gi[0] ? 0 : -1;
}

static ddpl_tensor *pinv_forward(ddpl_tensor *a, double atol, double rtol, bool has_atol,
                                 bool has_rtol, bool hermitian)
{
    op_temps k = {0};
    ddpl_tensor *s, *l, *r;
    if (spectrum(&k, a, hermitian, true, &s, &l, &r) < 0) return op_temps_result(&k, NULL);
    ddpl_tensor *tol = tolerance(&k, s, a, atol, rtol, has_atol, has_rtol);
    ddpl_tensor *keep = OP_B(&k, ddpl_gt, s, tol);
    /* 1/s where kept, else 0 (hermitian: 1/w, the sign kept) */
    ddpl_tensor *d = hermitian ? r : s;
    ddpl_tensor *inv = OP_U(&k, ddpl_reciprocal, d);
    ddpl_tensor *z = OP_NUM(&k, 0.0);
    ddpl_tensor *sinv = keep && inv && z ? OP_T(&k, ddpl_where(keep, inv, z)) : NULL;
    ddpl_tensor *row = sinv ? OP_T(&k, ddpl_unsqueeze(sinv, sinv->ndim - 1)) : NULL;
    ddpl_tensor *out;
    if (hermitian) /* V diag(1/w) V^T */
        out = OP_B(&k, ddpl_matmul, OP_B(&k, ddpl_mul, l, row), OP_U(&k, la_mT, l));
    else /* Vh^T diag(1/s) U^T */
        out =
            OP_B(&k, ddpl_matmul, OP_B(&k, ddpl_mul, OP_U(&k, la_mT, r), row), OP_U(&k, la_mT, l));
    return op_temps_result(&k, out);
}

ddpl_tensor *ddpl_linalg_pinv(ddpl_tensor *a, double atol, double rtol, bool has_atol,
                              bool has_rtol, bool hermitian)
{
    la_batch b;
    if (la_check_matrix("linalg.pinv", a, hermitian, &b) < 0) return NULL;
    bool prev = ddpl_grad_mode_set(false);
    ddpl_tensor *p = pinv_forward(a, atol, rtol, has_atol, has_rtol, hermitian);
    ddpl_grad_mode_set(prev);
    ddpl_tensor *out = p ? ddpl_contiguous(p) : NULL;
    ddpl_tensor_release(p);
    if (out && ddpl_grad_needed(1, &a)) {
        ddpl_node *node = ddpl_node_new("LinalgPinvBackward0", pinv_backward, 1, &a);
        ddpl_node_save(node, a);
        ddpl_node_save_output(node, out);
        ddpl_set_history(out, node);
    }
    return out;
}

ddpl_tensor *ddpl_linalg_matrix_rank(ddpl_tensor *a, double atol, double rtol, bool has_atol,
                                     bool has_rtol, bool hermitian)
{
    la_batch b;
    if (la_check_matrix("linalg.matrix_rank", a, hermitian, &b) < 0) return NULL;
    op_temps k = {0};
    bool prev = ddpl_grad_mode_set(false); /* an integer result: no graph */
    ddpl_tensor *s, *l, *r;
    ddpl_tensor *out = NULL;
    if (spectrum(&k, a, hermitian, false, &s, &l, &r) == 0) {
        ddpl_tensor *tol = tolerance(&k, s, a, atol, rtol, has_atol, has_rtol);
        ddpl_tensor *keep = OP_B(&k, ddpl_gt, s, tol);
        int last = -1;
        out = keep ? OP_T(&k, ddpl_count_nonzero(keep, 1, &last)) : NULL;
    }
    ddpl_grad_mode_set(prev);
    return op_temps_result(&k, out);
}
