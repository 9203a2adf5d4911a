/* ops/activation_grad.c: activation gradients written with ops, for backward with create_graph.
 * defines: pw_activation_grad_recorded.
 *
 * The fused kernels (RELU_BACKWARD, ...) compute an activation's gradient in one pass but record
 * nothing. When backward records itself (create_graph: grad mode on) and the incoming gradient
 * or the saved tensor requires grad, pointwise_unary.c calls these formulas instead: the same
 * values, up to rounding, built from ops, so the gradient can be differentiated again.
 * Exact GELU's derivative Phi(x) + x phi(x) needs erf, which has no op: the fused kernel
 * computes it, and a node of its own gives its derivative phi(x) (2 - x^2) with ops. */
#include <math.h>

#include "pointwise.h"

/* exact GELU's derivative D(x) = Phi(x) + x phi(x), whose own derivative is phi(x) (2 - x^2) */
static int gelu_derivative_backward(ddpl_node *n, ddpl_tensor *grad, ddpl_tensor **gi)
{
    ddpl_tensor *x = ddpl_node_saved(n, 0);
    if (!x) return -1;
    op_temps k = {0};
    ddpl_tensor *x2 = OP_T(&k, ddpl_mul(x, x));
    ddpl_tensor *e = OP_T(&k, ddpl_exp(OP_T(&k, ddpl_mul(x2, OP_NUM(&k, -0.5)))));
    ddpl_tensor *phi = OP_T(&k, ddpl_mul(e, OP_NUM(&k, 1.0 / sqrt(2.0 * M_PI))));
    ddpl_tensor *d2 = OP_T(&k, ddpl_mul(phi, OP_T(&k, ddpl_sub(OP_NUM(&k, 2.0), x2))));
    gi[0] = k.failed ? NULL : ddpl_mul(grad, d2);
    op_temps_release(&k);
    return gi[0] ? 0 : -1;
}

static ddpl_tensor *gelu_derivative(ddpl_tensor *x, const ddpl_gelu_params *p)
{
    ddpl_tensor *ones = ddpl_ones(x->ndim, x->sizes, (ddpl_dtype)x->dtype, x->device);
    ddpl_tensor *d = NULL;
    int rc = ones ? pw_fused_backward(DDPL_OP_GELU_BACKWARD, ones, x, p, &d) : -1;
    ddpl_tensor_release(ones);
    if (rc < 0) return NULL;
    if (ddpl_grad_needed(1, &x)) {
        ddpl_node *n = ddpl_node_new("GeluDerivativeBackward0", gelu_derivative_backward, 1, &x);
        ddpl_node_save(n, x);
        ddpl_set_history(d, n);
    }
    return d;
}

int pw_activation_grad_recorded(ddpl_op kop, ddpl_tensor *grad, ddpl_tensor *saved,
                                const void *params, ddpl_tensor **gi)
{
    op_temps k = {0};
    ddpl_tensor *one = OP_NUM(&k, 1.0), *d = NULL;
    switch (kop) {
    case DDPL_OP_TANH_BACKWARD: /* saved y: 1 - y^2 */
        d = OP_T(&k, ddpl_sub(one, OP_T(&k, ddpl_mul(saved, saved))));
        break;
    case DDPL_OP_SIGMOID_BACKWARD: /* saved y: y (1 - y) */
        d = OP_T(&k, ddpl_mul(saved, OP_T(&k, ddpl_sub(one, saved))));
        break;
    case DDPL_OP_RELU_BACKWARD: { /* saved y: g where y > 0 (relu'' is 0) */
        ddpl_tensor *pos = OP_T(&k, ddpl_gt(saved, OP_NUM(&k, 0.0)));
        gi[0] = k.failed ? NULL : ddpl_where(pos, grad, OP_NUM(&k, 0.0));
        op_temps_release(&k);
        return gi[0] ? 0 : -1;
    }
    case DDPL_OP_SILU_BACKWARD: { /* saved x: s (1 + x (1 - s)), s = sigmoid(x) */
        ddpl_tensor *s = OP_T(&k, ddpl_sigmoid(saved));
        ddpl_tensor *inner = OP_T(&k, ddpl_mul(saved, OP_T(&k, ddpl_sub(one, s))));
        d = OP_T(&k, ddpl_mul(s, OP_T(&k, ddpl_add(one, inner))));
        break;
    }
    case DDPL_OP_GELU_BACKWARD: {
        const ddpl_gelu_params *p = params;
        if (!p->tanh_approximation) {
            d = OP_T(&k, gelu_derivative(saved, p));
            break;
        }
        /* 0.5 (1 + t) + 0.5 x (1 - t^2) c (1 + 3a x^2), t = tanh(c (x + a x^3)) */
        const double c = sqrt(2.0 / M_PI), a = 0.044715;
        ddpl_tensor *x2 = OP_T(&k, ddpl_mul(saved, saved));
        ddpl_tensor *x3 = OP_T(&k, ddpl_mul(x2, saved));
        ddpl_tensor *u =
            OP_T(&k, ddpl_mul(OP_T(&k, ddpl_add(saved, OP_T(&k, ddpl_mul(x3, OP_NUM(&k, a))))),
                              OP_NUM(&k, c)));
        ddpl_tensor *t = OP_T(&k, ddpl_tanh(u));
        ddpl_tensor *left = OP_T(&k, ddpl_mul(OP_T(&k, ddpl_add(one, t)), OP_NUM(&k, 0.5)));
        ddpl_tensor *sech2 = OP_T(&k, ddpl_sub(one, OP_T(&k, ddpl_mul(t, t))));
        ddpl_tensor *du = OP_T(&k, ddpl_add(one, OP_T(&k, ddpl_mul(x2, OP_NUM(&k, 3.0 * a)))));
        ddpl_tensor *right = OP_T(&k, ddpl_mul(OP_T(&k, ddpl_mul(saved, sech2)),
                                               OP_T(&k, ddpl_mul(du, OP_NUM(&k, 0.5 * c)))));
        d = OP_T(&k, ddpl_add(left, right));
        break;
    }
    default:
        op_temps_release(&k);
        return ddpl_error("internal error: no recorded gradient for %s", ddpl_op_name(kop));
    }
    gi[0] = k.failed ? NULL : ddpl_mul(grad, d);
    op_temps_release(&k);
    return gi[0] ? 0 : -1;
}
