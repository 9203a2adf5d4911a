/* spec/c/test_nn_func.c: softmax, log_softmax, the losses (nll_loss and cross_entropy with
 * weights, ignore_index and label smoothing, mse_loss), linear, embedding, dropout and
 * scaled dot-product attention: values against naive formulas, float64 gradient checks and
 * error messages. conv2d, pools and normalisations are in test_nn.c. */
#include "ref_util.h"

/* ---- softmax ---- */
/* softmax (or log_softmax) of x (outer, D, inner) along D, by the definition. */
static void ref_softmax(const double *x, int64_t outer, int64_t D, int64_t inner, bool take_log,
                        double *y)
{
    for (int64_t o = 0; o < outer; o++)
        for (int64_t i = 0; i < inner; i++) {
            double m = -INFINITY, s = 0;
            for (int64_t d = 0; d < D; d++) m = fmax(m, x[(o * D + d) * inner + i]);
            for (int64_t d = 0; d < D; d++) s += exp(x[(o * D + d) * inner + i] - m);
            for (int64_t d = 0; d < D; d++) {
                double z = x[(o * D + d) * inner + i] - m;
                y[(o * D + d) * inner + i] = take_log ? z - log(s) : exp(z) / s;
            }
        }
}

static void test_softmax(void)
{
    int64_t sizes[3] = {2, 3, 4};
    ddpl_tensor *x = t_rand(3, sizes, DDPL_FLOAT32);
    double *xv = t_vals(x), ref[24];
    for (int dim = 0; dim < 3; dim++) {
        int64_t outer = dim == 0 ? 1 : dim == 1 ? 2 : 6, inner = dim == 0 ? 12 : dim == 1 ? 4 : 1;
        for (int lg = 0; lg < 2; lg++) {
            ref_softmax(xv, outer, sizes[dim], inner, lg, ref);
            ddpl_tensor *y = lg ? ddpl_log_softmax(x, dim - 3) : ddpl_softmax(x, dim);
            CHECK_VALUES(y, ref, 1e-6);
            ddpl_tensor_release(y);
        }
    }
    /* large logits: no overflow, and log_softmax keeps the tiny probabilities' logs */
    ddpl_tensor *big = t_from(1, (int64_t[]){3}, (double[]){1000, 0, -1000}, DDPL_FLOAT32);
    ddpl_tensor *sb = ddpl_softmax(big, 0), *lb = ddpl_log_softmax(big, 0);
    CHECK_VALUES(sb, ((double[]){1, 0, 0}), 1e-6);
    CHECK_VALUES(lb, ((double[]){0, -1000, -2000}), 1e-6);
    ddpl_tensor *xi = ddpl_zeros(1, (int64_t[]){3}, DDPL_INT64, ddpl_cpu());
    CHECK_ERROR(ddpl_softmax(xi, 0) == NULL, "softmax: expected a floating point input", "int64");
    CHECK_ERROR(ddpl_log_softmax(x, 3) == NULL, "log_softmax:", "out of range");
    free(xv);
    RELEASE(x, big, sb, lb, xi);
}

/* ---- losses ---- */
/* cross_entropy of logits (N,C,S) against target (N,S), by the documented formula: with
 * eps-smoothed one-hot targets, per element
 *   l = (1-eps) * (-w[t] * logp[t]) + eps/C * sum_c (-w[c] * logp[c]),   0 if t ignored;
 * 'mean' divides the sum by sum of w[t] over non-ignored elements. eps 0 is plain nll. */
static void ref_cross_entropy(const double *logits, const int64_t *t, const double *w, int64_t N,
                              int64_t C, int64_t S, int64_t ignore, double eps, int reduction,
                              double *out)
{
    double *logp = calloc((size_t)(N * C * S), sizeof *logp);
    ref_softmax(logits, N, C, S, true, logp);
    double sum = 0, total = 0;
    for (int64_t n = 0; n < N; n++)
        for (int64_t s = 0; s < S; s++) {
            int64_t tt = t[n * S + s];
            double l = 0;
            if (tt != ignore) {
                double smooth = 0;
                for (int64_t c = 0; c < C; c++)
                    smooth -= (w ? w[c] : 1) * logp[(n * C + c) * S + s];
                double wt = w ? w[tt] : 1;
                l = (1 - eps) * -wt * logp[(n * C + tt) * S + s] + eps / (double)C * smooth;
                total += wt;
            }
            if (reduction == DDPL_REDUCTION_NONE) out[n * S + s] = l;
            sum += l;
        }
    if (reduction == DDPL_REDUCTION_SUM) out[0] = sum;
    if (reduction == DDPL_REDUCTION_MEAN) out[0] = sum / total;
    free(logp);
}

typedef struct {
    int64_t N, C, S;
    bool weighted;
    int64_t ignore;
    double eps;
} ce_case;

static const ce_case ce_cases[] = {
    {4, 5, 1, false, -100, 0.0}, {4, 5, 1, true, -100, 0.0},
    {4, 5, 1, true, 2, 0.1},   /* weights, ignore_index and smoothing together */
    {3, 4, 3, false, 1, 0.25}, /* (N,C,d) input, class dim 1 */
    {3, 4, 3, true, -100, 0.3},
};

static const int64_t ce_targets[12] = {2, 0, 4, 2, 1, 3, 0, 2, 1, 1, 3, 0};

static void test_losses(void)
{
    for (size_t k = 0; k < sizeof ce_cases / sizeof *ce_cases; k++) {
        const ce_case *c = &ce_cases[k];
        int nd = c->S > 1 ? 3 : 2;
        ddpl_tensor *x = t_rand(nd, (int64_t[]){c->N, c->C, c->S}, DDPL_FLOAT64);
        int64_t tsz[2] = {c->N, c->S};
        int64_t tv[12];
        for (int i = 0; i < 12; i++) tv[i] = ce_targets[i] % c->C;
        ddpl_tensor *t = ddpl_from_data(nd - 1, tsz, DDPL_INT64, tv, ddpl_cpu());
        double wv[5] = {0.5, 2, 1, 0.25, 3};
        ddpl_tensor *w = c->weighted ? t_from(1, &c->C, wv, DDPL_FLOAT64) : NULL;
        double *xv = t_vals(x), ref[12];
        for (int red = 0; red < 3; red++) {
            ref_cross_entropy(xv, tv, c->weighted ? wv : NULL, c->N, c->C, c->S, c->ignore, c->eps,
                              red, ref);
            ddpl_tensor *l = ddpl_cross_entropy(x, t, w, (ddpl_reduction)red, c->ignore, c->eps);
            CHECK(l && ddpl_tensor_ndim(l) == (red == DDPL_REDUCTION_NONE ? nd - 1 : 0));
            CHECK_VALUES(l, ref, 1e-12);
            if (c->eps == 0) { /* nll_loss of log_softmax is the same */
                ddpl_tensor *lp = ddpl_log_softmax(x, 1);
                ddpl_tensor *nl = ddpl_nll_loss(lp, t, w, (ddpl_reduction)red, c->ignore);
                CHECK_VALUES(nl, ref, 1e-12);
                RELEASE(lp, nl);
            }
            ddpl_tensor_release(l);
        }
        free(xv);
        RELEASE(x, t, w);
    }
    /* everything ignored: mean is 0/0, as in PyTorch */
    ddpl_tensor *x = t_rand(2, (int64_t[]){2, 3}, DDPL_FLOAT32);
    ddpl_tensor *ti = ddpl_full(1, (int64_t[]){2}, -100, DDPL_INT64, ddpl_cpu());
    ddpl_tensor *ln = ddpl_cross_entropy(x, ti, NULL, DDPL_REDUCTION_MEAN, -100, 0.0);
    double v = 0;
    CHECK(ln && ddpl_tensor_item(ln, &v) == 0 && isnan(v));
    /* mse */
    ddpl_tensor *a = t_from(2, (int64_t[]){2, 2}, (double[]){1, 2, 3, 4}, DDPL_FLOAT32);
    ddpl_tensor *b = t_from(2, (int64_t[]){2, 2}, (double[]){0, 2, 5, 1}, DDPL_FLOAT32);
    ddpl_tensor *m0 = ddpl_mse_loss(a, b, DDPL_REDUCTION_NONE),
                *m1 = ddpl_mse_loss(a, b, DDPL_REDUCTION_MEAN);
    ddpl_tensor *m2 = ddpl_mse_loss(a, b, DDPL_REDUCTION_SUM);
    CHECK_VALUES(m0, ((double[]){1, 0, 4, 9}), 0);
    CHECK_VALUES(m1, ((double[]){3.5}), 1e-7);
    CHECK_VALUES(m2, ((double[]){14}), 0);

    ddpl_tensor *t7 = ddpl_from_data(1, (int64_t[]){2}, DDPL_INT64, (int64_t[]){1, 7}, ddpl_cpu());
    ddpl_tensor *t3 = ddpl_zeros(1, (int64_t[]){3}, DDPL_INT64, ddpl_cpu());
    ddpl_tensor *tf = ddpl_zeros(1, (int64_t[]){2}, DDPL_FLOAT32, ddpl_cpu());
    ddpl_tensor *w4 = ddpl_ones(1, (int64_t[]){4}, DDPL_FLOAT32, ddpl_cpu());
    CHECK_ERROR(ddpl_nll_loss(x, t7, NULL, DDPL_REDUCTION_MEAN, -100) == NULL,
                "nll_loss: target 7 is out of bounds for 3 classes", "");
    CHECK_ERROR(ddpl_cross_entropy(x, t7, NULL, DDPL_REDUCTION_MEAN, -100, 0) == NULL,
                "cross_entropy: target 7 is out of bounds for 3 classes", "");
    CHECK_ERROR(ddpl_cross_entropy(x, t3, NULL, DDPL_REDUCTION_MEAN, -100, 0) == NULL,
                "cross_entropy: expected target of shape [2] for input of shape [2,3], got [3]",
                "");
    CHECK_ERROR(ddpl_nll_loss(x, tf, NULL, DDPL_REDUCTION_MEAN, -100) == NULL,
                "nll_loss:", "int64");
    CHECK_ERROR(ddpl_nll_loss(x, ti, w4, DDPL_REDUCTION_MEAN, -100) == NULL, "nll_loss:", "weight");
    CHECK_ERROR(ddpl_cross_entropy(x, ti, NULL, DDPL_REDUCTION_MEAN, -100, 1.5) == NULL,
                "cross_entropy:", "label_smoothing");
    CHECK_ERROR(ddpl_mse_loss(a, t3, DDPL_REDUCTION_MEAN) == NULL, "mse_loss:", "[3]");
    RELEASE(x, ti, ln, a, b, m0, m1, m2, t7, t3, tf, w4);
}

static ddpl_tensor *f_ce(ddpl_tensor **in, void *ctx)
{
    const ce_case *c = ctx;
    int64_t tsz[2] = {c->N, c->S}, tv[12];
    for (int i = 0; i < 12; i++) tv[i] = ce_targets[i] % c->C;
    double wv[5] = {0.5, 2, 1, 0.25, 3};
    ddpl_tensor *t = ddpl_from_data(c->S > 1 ? 2 : 1, tsz, DDPL_INT64, tv, ddpl_cpu());
    ddpl_tensor *w = c->weighted ? ddpl_from_data(1, &c->C, DDPL_FLOAT64, wv, ddpl_cpu()) : NULL;
    ddpl_tensor *l = ddpl_cross_entropy(in[0], t, w, (ddpl_reduction)(c->N % 3), c->ignore, c->eps);
    RELEASE(t, w);
    return l;
}

static ddpl_tensor *f_mse(ddpl_tensor **in, void *ctx)
{
    return ddpl_mse_loss(in[0], in[1], DDPL_REDUCTION_MEAN);
}
static ddpl_tensor *f_softmax(ddpl_tensor **in, void *ctx)
{
    return ddpl_softmax(in[0], *(int *)ctx);
}
static ddpl_tensor *f_log_softmax(ddpl_tensor **in, void *ctx)
{
    return ddpl_log_softmax(in[0], *(int *)ctx);
}

static void test_loss_gradients(void)
{
    for (size_t k = 0; k < sizeof ce_cases / sizeof *ce_cases; k++) {
        const ce_case *c = &ce_cases[k]; /* N % 3 picks the reduction: none, mean and sum all run */
        ddpl_tensor *x = gc_input(c->S > 1 ? 3 : 2, (int64_t[]){c->N, c->C, c->S}, 1, 0);
        CHECK(gradcheck("cross_entropy", f_ce, 1, &x, (void *)c, 1e-6, 1e-8, 1e-6));
        ddpl_tensor_release(x);
    }
    for (int dim = 0; dim < 3; dim++) {
        ddpl_tensor *x = gc_input(3, (int64_t[]){2, 3, 4}, 1, 0);
        CHECK(gradcheck("softmax", f_softmax, 1, &x, &dim, 1e-6, 1e-8, 1e-6));
        CHECK(gradcheck("log_softmax", f_log_softmax, 1, &x, &dim, 1e-6, 1e-8, 1e-6));
        ddpl_tensor_release(x);
    }
    ddpl_tensor *in[2] = {gc_input(2, (int64_t[]){3, 2}, 1, 0),
                          gc_input(2, (int64_t[]){3, 2}, 1, 0)};
    CHECK(gradcheck("mse_loss", f_mse, 2, in, NULL, 1e-6, 1e-8, 1e-6));
    RELEASE(in[0], in[1]);
}

/* ---- linear, embedding, dropout ---- */
static ddpl_tensor *f_linear(ddpl_tensor **in, void *ctx)
{
    return ddpl_linear(in[0], in[1], ctx ? in[2] : NULL);
}
static ddpl_tensor *f_embedding(ddpl_tensor **in, void *ctx)
{
    return ddpl_embedding(ctx, in[0]);
}

static void test_linear_embedding(void)
{
    ddpl_tensor *x = t_rand(3, (int64_t[]){2, 3, 4}, DDPL_FLOAT32);
    ddpl_tensor *w = t_rand(2, (int64_t[]){5, 4}, DDPL_FLOAT32),
                *b = t_rand(1, (int64_t[]){5}, DDPL_FLOAT32);
    double *xv = t_vals(x), *wv = t_vals(w), *bv = t_vals(b), ref[30], ref0[30];
    for (int r = 0; r < 6; r++)
        for (int o = 0; o < 5; o++) {
            double s = 0;
            for (int i = 0; i < 4; i++) s += xv[r * 4 + i] * wv[o * 4 + i];
            ref0[r * 5 + o] = s;
            ref[r * 5 + o] = s + bv[o];
        }
    ddpl_tensor *y = ddpl_linear(x, w, b), *y0 = ddpl_linear(x, w, NULL);
    CHECK(y && ddpl_tensor_ndim(y) == 3 && ddpl_tensor_size(y, 2) == 5);
    CHECK_VALUES(y, ref, 1e-5);
    CHECK_VALUES(y0, ref0, 1e-5);
    ddpl_tensor *xa = ddpl_select(x, 0, 1), *xr = ddpl_select(xa, 0, 2),
                *y1 = ddpl_linear(xr, w, b);
    CHECK(y1 && ddpl_tensor_ndim(y1) == 1);
    CHECK_VALUES(y1, ref + 25, 1e-5);
    ddpl_tensor *x45 = ddpl_zeros(2, (int64_t[]){4, 5}, DDPL_FLOAT32, ddpl_cpu());
    ddpl_tensor *w36 = ddpl_zeros(2, (int64_t[]){3, 6}, DDPL_FLOAT32, ddpl_cpu());
    CHECK_ERROR(ddpl_linear(x45, w36, NULL) == NULL,
                "linear: input [4,5] and weight [3,6] do not match", "");
    CHECK_ERROR(ddpl_linear(x, w, w36) == NULL, "linear:", "bias");

    ddpl_tensor *emb =
        t_from(2, (int64_t[]){4, 2}, (double[]){0, 1, 10, 11, 20, 21, 30, 31}, DDPL_FLOAT32);
    ddpl_tensor *ix =
        ddpl_from_data(2, (int64_t[]){2, 2}, DDPL_INT64, (int64_t[]){3, 0, 3, 1}, ddpl_cpu());
    ddpl_tensor *e = ddpl_embedding(ix, emb);
    CHECK(e && ddpl_tensor_ndim(e) == 3 && ddpl_tensor_size(e, 2) == 2);
    CHECK_VALUES(e, ((double[]){30, 31, 0, 1, 30, 31, 10, 11}), 0);
    ddpl_tensor *bad = ddpl_from_data(1, (int64_t[]){1}, DDPL_INT64, (int64_t[]){4}, ddpl_cpu());
    CHECK_ERROR(ddpl_embedding(bad, emb) == NULL,
                "embedding: index 4 is out of range for dimension 0 with size 4", "");
    CHECK_ERROR(ddpl_embedding(emb, emb) == NULL, "embedding:", "int64");

    ddpl_tensor *in[3] = {gc_input(3, (int64_t[]){2, 3, 4}, 1, 0),
                          gc_input(2, (int64_t[]){5, 4}, 1, 0), gc_input(1, (int64_t[]){5}, 1, 0)};
    CHECK(gradcheck("linear", f_linear, 3, in, in, 1e-6, 1e-8, 1e-6));
    CHECK(gradcheck("linear without bias", f_linear, 2, in, NULL, 1e-6, 1e-8, 1e-6));
    ddpl_tensor *ew = gc_input(2, (int64_t[]){4, 3}, 1, 0);
    CHECK(gradcheck("embedding", f_embedding, 1, &ew, ix, 1e-6, 1e-8, 1e-6)); /* index 3 twice */
    free(xv);
    free(wv);
    free(bv);
    RELEASE(x, w, b, y, y0, xa, xr, y1, x45, w36, emb, ix, e, bad, in[0], in[1], in[2], ew);
}

static void test_dropout(void)
{
    int64_t n = 20000;
    ddpl_tensor *x = ddpl_ones(1, &n, DDPL_FLOAT64, ddpl_cpu());
    ddpl_tensor_set_requires_grad(x, true);
    ddpl_tensor *same = ddpl_dropout(x, 0.0, true), *evalm = ddpl_dropout(x, 0.5, false);
    CHECK(same == x && evalm == x); /* the input itself */
    ddpl_tensor *y = ddpl_dropout(x, 0.3, true);
    double *yv = y ? t_vals(y) : NULL;
    int64_t zeros = 0, bad = 0;
    for (int64_t i = 0; yv && i < n; i++) {
        if (yv[i] == 0)
            zeros++;
        else if (fabs(yv[i] - 1 / 0.7) > 1e-12)
            bad++;
    }
    CHECK(yv && bad == 0 && fabs((double)zeros / (double)n - 0.3) < 0.02);
    /* the gradient is the same scaled mask */
    ddpl_tensor *s = ddpl_sum(y);
    CHECK(ddpl_backward(s, NULL, false) == 0);
    if (yv) CHECK_VALUES(ddpl_tensor_grad(x), yv, 0);
    ddpl_tensor *all = ddpl_dropout(x, 1.0, true);
    double *av = all ? t_vals(all) : NULL;
    int nonzero = av == NULL;
    for (int64_t i = 0; av && i < n; i++) nonzero += av[i] != 0;
    CHECK(nonzero == 0);
    ddpl_tensor *xi = ddpl_zeros(1, (int64_t[]){3}, DDPL_INT64, ddpl_cpu());
    CHECK_ERROR(ddpl_dropout(x, 1.5, true) == NULL, "dropout:", "1.5");
    CHECK_ERROR(ddpl_dropout(xi, 0.5, true) == NULL, "dropout:", "int64");
    free(yv);
    free(av);
    RELEASE(x, same, evalm, y, s, all, xi);
}

/* ---- attention ---- */
typedef struct {
    int mask; /* 0 none, 1 causal, 2 bool mask, 3 float mask */
    double scale;
    ddpl_tensor *m;
} attn_case;

/* out (B,L,Ev) by the definition, for q (B,L,E), k (B,S,E), v (B,S,Ev) and an (L,S) mask. */
static void ref_attention(const attn_case *c, const double *q, const double *k, const double *v,
                          const double *m, int64_t B, int64_t L, int64_t S, int64_t E, int64_t Ev,
                          double *out)
{
    double scale = c->scale > 0 ? c->scale : 1 / sqrt((double)E), p[16];
    for (int64_t b = 0; b < B; b++)
        for (int64_t i = 0; i < L; i++) {
            double mx = -INFINITY, sum = 0;
            for (int64_t j = 0; j < S; j++) {
                double s = 0;
                for (int64_t e = 0; e < E; e++)
                    s += q[(b * L + i) * E + e] * k[(b * S + j) * E + e];
                s *= scale;
                if ((c->mask == 1 && j > i) || (c->mask == 2 && m[i * S + j] == 0)) s = -INFINITY;
                if (c->mask == 3) s += m[i * S + j];
                p[j] = s;
                mx = fmax(mx, s);
            }
            for (int64_t j = 0; j < S; j++) sum += p[j] = exp(p[j] - mx);
            for (int64_t e = 0; e < Ev; e++) {
                double o = 0;
                for (int64_t j = 0; j < S; j++) o += p[j] / sum * v[(b * S + j) * Ev + e];
                out[(b * L + i) * Ev + e] = o;
            }
        }
}

static ddpl_tensor *f_attn(ddpl_tensor **in, void *ctx)
{
    attn_case *c = ctx;
    return ddpl_scaled_dot_product_attention(in[0], in[1], in[2], c->mask >= 2 ? c->m : NULL,
                                             c->mask == 1, c->scale);
}

static void test_attention(void)
{
    int64_t B = 2, L = 3, S = 4, E = 5, Ev = 2;
    double boolm[12] = {1, 0, 1, 1, 1, 1, 0, 0, 0, 1, 1, 1}, floatm[12];
    for (int i = 0; i < 12; i++) floatm[i] = 0.3 * i - 1.5;
    ddpl_tensor *masks[4] = {NULL, NULL, t_from(2, (int64_t[]){L, S}, boolm, DDPL_BOOL),
                             t_from(2, (int64_t[]){L, S}, floatm, DDPL_FLOAT64)};
    for (int kind = 0; kind < 4; kind++) {
        attn_case c = {kind, kind == 3 ? 0.7 : 0, masks[kind]};
        ddpl_tensor *in[3] = {gc_input(3, (int64_t[]){B, L, E}, 1, 0),
                              gc_input(3, (int64_t[]){B, S, E}, 1, 0),
                              gc_input(3, (int64_t[]){B, S, Ev}, 1, 0)};
        double *qv = t_vals(in[0]), *kv = t_vals(in[1]), *vv = t_vals(in[2]), ref[12];
        ref_attention(&c, qv, kv, vv, kind == 2 ? boolm : floatm, B, L, S, E, Ev, ref);
        ddpl_tensor *o = f_attn(in, &c);
        CHECK(o && ddpl_tensor_size(o, 2) == Ev);
        CHECK_VALUES(o, ref, 1e-12);
        CHECK(gradcheck("scaled_dot_product_attention", f_attn, 3, in, &c, 1e-6, 1e-8, 1e-6));
        free(qv);
        free(kv);
        free(vv);
        RELEASE(in[0], in[1], in[2], o);
    }
    ddpl_tensor *q = ddpl_zeros(3, (int64_t[]){B, L, E}, DDPL_FLOAT32, ddpl_cpu());
    ddpl_tensor *k = ddpl_zeros(3, (int64_t[]){B, S, E + 1}, DDPL_FLOAT32, ddpl_cpu());
    CHECK_ERROR(ddpl_scaled_dot_product_attention(q, k, k, NULL, false, 0) == NULL,
                "scaled_dot_product_attention:", "do not match");
    CHECK_ERROR(ddpl_scaled_dot_product_attention(q, q, q, masks[2], true, 0) == NULL,
                "scaled_dot_product_attention:", "is_causal");
    RELEASE(masks[2], masks[3], q, k);
}

int main(void)
{
    ddpl_manual_seed(11);
    test_softmax();
    test_losses();
    test_loss_gradients();
    test_linear_embedding();
    test_dropout();
    test_attention();
    CHECK(ddpl_memory_allocated(DDPL_CPU) == 0); /* everything released */
    return check_finish();
}
