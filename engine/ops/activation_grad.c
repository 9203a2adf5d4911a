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

/* Temporaries of one formula: released together; the first failure stops the rest. */
typedef struct {
    ddpl_tensor *t[32];
    int n;
    bool failed;
} temps;

static ddpl_tensor *keep(temps *k, ddpl_tensor *t)
{
    if (!t || k->n == (int)(sizeof k->t / sizeof k->t[0])) {
        ddpl_tensor_release(t);
        k->failed = true;
        return NULL;
    }
    return k->t[k->n++] = t;
}

static void release_all(temps *k)
{
    for (int i = 0; i < k->n; i++) ddpl_tensor_release(k->t[i]);
}

/* Evaluates expr only while nothing failed, keeping its result for release_all. */
#define T(k, expr) ((k)->failed ? NULL : keep((k), (expr)))
#define NUM(k, v)  T(k, ddpl_wrapped_number((v), false))

/* exact GELU's derivative D(x) = Phi(x) + x phi(x), whose own derivative is phi(x) (2 - x^2) */
static int gelu_derivative_backward(ddpl_node *n, ddpl_tensor *grad, ddpl_tensor **gi)
{
    ddpl_tensor *x = ddpl_node_saved(n, 0);
    if (!x) return -1;
    temps k = {0};
    ddpl_tensor *x2 = T(&k, ddpl_mul(x, x));
    ddpl_tensor *e = T(&k, ddpl_exp(T(&k, ddpl_mul(x2, NUM(&k, -0.5)))));
    ddpl_tensor *phi = T(&k, ddpl_mul(e, NUM(&k, 1.0 / sqrt(2.0 * M_PI))));
    ddpl_tensor *d2 = T(&k, ddpl_mul(phi, T(&k, ddpl_sub(NUM(&k, 2.0), x2))));
    gi[0] = k.failed ? NULL : ddpl_mul(grad, d2);
    release_all(&k);
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
        ddpl_node *n = ddpl_node_new("GeluDerivativeBackward", gelu_derivative_backward, 1, &x);
        ddpl_node_save(n, x);
        ddpl_set_history(d, n);
    }
    return d;
}

int pw_activation_grad_recorded(ddpl_op kop, ddpl_tensor *grad, ddpl_tensor *saved,
                                const void *params, ddpl_tensor **gi)
{
    temps k = {0};
    ddpl_tensor *one = NUM(&k, 1.0), *d = NULL;
    switch (kop) {
    case DDPL_OP_TANH_BACKWARD: /* saved y: 1 - y^2 */
        d = T(&k, ddpl_sub(one, T(&k, ddpl_mul(saved, saved))));
        break;
    case DDPL_OP_SIGMOID_BACKWARD: /* saved y: y (1 - y) */
        d = T(&k, ddpl_mul(saved, T(&k, ddpl_sub(one, saved))));
        break;
    case DDPL_OP_RELU_BACKWARD: { /* saved y: g where y > 0 (relu'' is 0) */
        ddpl_tensor *pos = T(&k, ddpl_gt(saved, NUM(&k, 0.0)));
        gi[0] = k.failed ? NULL : ddpl_where(pos, grad, NUM(&k, 0.0));
        release_all(&k);
        return gi[0] ? 0 : -1;
    }
    case DDPL_OP_SILU_BACKWARD: { /* saved x: s (1 + x (1 - s)), s = sigmoid(x) */
        ddpl_tensor *s = T(&k, ddpl_sigmoid(saved));
        ddpl_tensor *inner = T(&k, ddpl_mul(saved, T(&k, ddpl_sub(one, s))));
        d = T(&k, ddpl_mul(s, T(&k, ddpl_add(one, inner))));
        break;
    }
    case DDPL_OP_GELU_BACKWARD: {
        const ddpl_gelu_params *p = params;
        if (!p->tanh_approximation) {
            d = T(&k, gelu_derivative(saved, p));
            break;
        }
        /* 0.5 (1 + t) + 0.5 x (1 - t^2) c (1 + 3a x^2), t = tanh(c (x + a x^3)) */
        const double c = sqrt(2.0 / M_PI), a = 0.044715;
        ddpl_tensor *x2 = T(&k, ddpl_mul(saved, saved));
        ddpl_tensor *x3 = T(&k, ddpl_mul(x2, saved));
        ddpl_tensor *u =
            T(&k, ddpl_mul(T(&k, ddpl_add(saved, T(&k, ddpl_mul(x3, NUM(&k, a))))), NUM(&k, c)));
        ddpl_tensor *t = T(&k, ddpl_tanh(u));
        ddpl_tensor *left = T(&k, ddpl_mul(T(&k, ddpl_add(one, t)), NUM(&k, 0.5)));
        ddpl_tensor *sech2 = T(&k, ddpl_sub(one, T(&k, ddpl_mul(t, t))));
        ddpl_tensor *du = T(&k, ddpl_add(one, T(&k, ddpl_mul(x2, NUM(&k, 3.0 * a)))));
        ddpl_tensor *right =
            T(&k, ddpl_mul(T(&k, ddpl_mul(saved, sech2)), T(&k, ddpl_mul(du, NUM(&k, 0.5 * c)))));
        d = T(&k, ddpl_add(left, right));
        break;
    }
    default:
        release_all(&k);
        return ddpl_error("internal error: no recorded gradient for %s", ddpl_op_name(kop));
    }
    gi[0] = k.failed ? NULL : ddpl_mul(grad, d);
    release_all(&k);
    return gi[0] ? 0 : -1;
}
