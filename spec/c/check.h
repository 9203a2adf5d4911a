/* spec/c/check.h: a tiny test harness for the C tests: CHECK, closeness and a float64
 * finite-difference gradient check through the public C API.
 * defines: CHECK, CHECK_CLOSE, check_finish, gradcheck. */
#ifndef DDPL_SPEC_CHECK_H
#define DDPL_SPEC_CHECK_H

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ddpl/ddpl.h"

static int check_failures = 0, check_passed = 0;

#define CHECK(cond)                                                                                \
    do {                                                                                           \
        if (cond) {                                                                                \
            check_passed++;                                                                        \
        } else {                                                                                   \
            check_failures++;                                                                      \
            fprintf(stderr, "%s:%d: check failed: %s (last error: %s)\n", __FILE__, __LINE__,      \
                    #cond, ddpl_last_error());                                                     \
        }                                                                                          \
    } while (0)

#define CHECK_CLOSE(a, b, tol)                                                                     \
    CHECK(fabs((double)(a) - (double)(b)) <= (tol) * (1 + fabs((double)(b))))

static inline int check_finish(void)
{
    printf("%d passed, %d failed\n", check_passed, check_failures);
    return check_failures ? 1 : 0;
}

/* The function under test: builds its output from inputs (float64, requires_grad) and returns
 * a new reference, or NULL on error. */
typedef ddpl_tensor *(*gradcheck_fn)(ddpl_tensor **inputs, void *ctx);

/* Compares autograd's gradient of sum(f(x) * w) (w fixed random weights) with central
 * differences, for every element of every input that requires grad. Returns 1 when all agree
 * within atol + rtol*|numeric|, printing the first mismatch otherwise. */
static inline int gradcheck(const char *name, gradcheck_fn f, int n, ddpl_tensor **inputs,
                            void *ctx, double eps, double atol, double rtol)
{
    ddpl_tensor *out = f(inputs, ctx);
    if (!out) {
        fprintf(stderr, "gradcheck %s: forward failed: %s\n", name, ddpl_last_error());
        return 0;
    }
    ddpl_tensor *w =
        ddpl_randn(ddpl_tensor_ndim(out), ddpl_tensor_sizes(out), DDPL_FLOAT64, ddpl_cpu());
    ddpl_tensor *weighted = ddpl_mul(out, w);
    ddpl_tensor *loss = ddpl_sum(weighted);
    ddpl_tensor *grads[8] = {0};
    ddpl_tensor *req[8];
    int nreq = 0, idx[8];
    for (int i = 0; i < n; i++)
        if (ddpl_tensor_requires_grad(inputs[i])) {
            idx[nreq] = i;
            req[nreq++] = inputs[i];
        }
    int ok = loss && ddpl_autograd_grad(1, &loss, NULL, nreq, req, grads, false, true) == 0;
    if (!ok) fprintf(stderr, "gradcheck %s: backward failed: %s\n", name, ddpl_last_error());
    for (int r = 0; ok && r < nreq; r++) {
        ddpl_tensor *x = inputs[idx[r]];
        int64_t m = ddpl_tensor_numel(x);
        double *analytic = calloc((size_t)m, sizeof(double));
        if (grads[r]) ddpl_tensor_to_doubles(grads[r], analytic);
        double *data = ddpl_tensor_data(x); /* inputs are contiguous float64 */
        bool prev = ddpl_set_grad_enabled(false);
        for (int64_t j = 0; ok && j < m; j++) {
            double orig = data[j], lp, lm;
            data[j] = orig + eps;
            ddpl_tensor *o1 = f(inputs, ctx), *m1 = ddpl_mul(o1, w), *s1 = ddpl_sum(m1);
            data[j] = orig - eps;
            ddpl_tensor *o2 = f(inputs, ctx), *m2 = ddpl_mul(o2, w), *s2 = ddpl_sum(m2);
            data[j] = orig;
            ddpl_tensor_item(s1, &lp);
            ddpl_tensor_item(s2, &lm);
            double numeric = (lp - lm) / (2 * eps);
            if (fabs(numeric - analytic[j]) > atol + rtol * fabs(numeric)) {
                fprintf(stderr,
                        "gradcheck %s: input %d element %lld: analytic %.10g numeric %.10g\n", name,
                        idx[r], (long long)j, analytic[j], numeric);
                ok = 0;
            }
            ddpl_tensor *tmp[] = {o1, m1, s1, o2, m2, s2};
            for (int k = 0; k < 6; k++) ddpl_tensor_release(tmp[k]);
        }
        ddpl_set_grad_enabled(prev);
        free(analytic);
    }
    for (int r = 0; r < nreq; r++) ddpl_tensor_release(grads[r]);
    ddpl_tensor_release(loss);
    ddpl_tensor_release(weighted);
    ddpl_tensor_release(w);
    ddpl_tensor_release(out);
    return ok;
}

/* A float64 leaf with values from randn (scaled, shifted), requires_grad set. */
static inline ddpl_tensor *gc_input(int ndim, const int64_t *sizes, double scale, double shift)
{
    ddpl_tensor *x = ddpl_randn(ndim, sizes, DDPL_FLOAT64, ddpl_cpu());
    double *d = ddpl_tensor_data(x);
    for (int64_t i = 0; i < ddpl_tensor_numel(x); i++) d[i] = d[i] * scale + shift;
    ddpl_tensor_set_requires_grad(x, true);
    return x;
}

#endif
