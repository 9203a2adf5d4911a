/* cpu/cpu_ctc.c: the CTC loss (connectionist temporal classification) forward and backward on
 * the CPU, by the alpha-beta recursion in log space, one sample per task.
 * defines: cpu_ctc_loss, cpu_ctc_loss_backward.
 *
 * Sample b has log-probabilities lp[t][b][c] for t < T_b (its input length) and a target of
 * S_b labels, extended with blanks to l' of length L = 2 S_b + 1 (blank, l1, blank, l2, ...,
 * blank). alpha[t][s] is the log-probability of the prefixes of length t + 1 ending in l'[s]:
 *   alpha[0][0] = lp[0][blank], alpha[0][1] = lp[0][l'1],
 *   alpha[t][s] = lp[t][l's] + lse(alpha[t-1][s], alpha[t-1][s-1], alpha[t-1][s-2]), the last
 *                 term only where l's is a label different from l'(s-2);
 * and the loss is -lse(alpha[T_b-1][L-1], alpha[T_b-1][L-2]). beta is the mirror recursion from
 * the end; the gradient with respect to lp (PyTorch's formula, from its CPU CTC kernel) is
 *   d loss / d lp[t][c] = exp(lp[t][c]) - exp(lse_{s: l's = c}(alpha[t][s] + beta[t][s]) + nll -
 *                         lp[t][c])
 * for t < T_b, 0 after. Everything accumulates in float64, whatever lp's dtype. A sample with
 * T_b = 0 has loss 0 for an empty target, else +inf (PyTorch leaves that case undefined). */
#include <math.h>
#include <stdlib.h>

#include "cpu_iter.h"
#include "cpu_kernels.h"
#include "kernel_abi/nn_params.h"

static inline double lse2(double a, double b)
{
    if (a == -INFINITY) return b;
    if (b == -INFINITY) return a;
    double m = a > b ? a : b;
    return m + log1p(exp(-fabs(a - b)));
}

typedef struct {
    const char *lp; /* (T,N,C), float32 or float64 */
    bool f64;
    const int64_t *targets, *in_len, *tgt_len; /* (N,S), (N), (N) */
    int64_t T, N, C, S, blank;
    double *nll;   /* (N) */
    double *alpha; /* (N,T,2S+1) */
    /* backward */
    const double *gout; /* (N) */
    char *grad;         /* (T,N,C), lp's dtype */
    bool zero_infinity;
    double *scratch; /* per sample: beta (T,2S+1) and the per-class sums (C) */
} ctc_job;

static inline double lp_at(const ctc_job *j, int64_t t, int64_t b, int64_t c)
{
    int64_t i = (t * j->N + b) * j->C + c;
    return j->f64 ? ((const double *)j->lp)[i] : (double)((const float *)j->lp)[i];
}

/* l'[s] of sample b */
static inline int64_t ext_label(const ctc_job *j, int64_t b, int64_t s)
{
    return s % 2 == 0 ? j->blank : j->targets[b * j->S + s / 2];
}

/* whether the s-2 -> s transition (skipping a blank) is allowed */
static inline bool can_skip(const ctc_job *j, int64_t b, int64_t s)
{
    return s >= 2 && s % 2 == 1 && ext_label(j, b, s) != ext_label(j, b, s - 2);
}

static void ctc_forward_samples(int64_t begin, int64_t end, void *ctx)
{
    const ctc_job *j = ctx;
    int64_t W = 2 * j->S + 1; /* alpha's row stride */
    for (int64_t b = begin; b < end; b++) {
        int64_t Tb = j->in_len[b], L = 2 * j->tgt_len[b] + 1;
        double *a = j->alpha + b * j->T * W;
        for (int64_t i = 0; i < j->T * W; i++) a[i] = -INFINITY;
        if (Tb == 0) {
            j->nll[b] = L == 1 ? 0.0 : INFINITY;
            continue;
        }
        a[0] = lp_at(j, 0, b, j->blank);
        if (L > 1) a[1] = lp_at(j, 0, b, ext_label(j, b, 1));
        for (int64_t t = 1; t < Tb; t++) {
            const double *prev = a + (t - 1) * W;
            double *cur = a + t * W;
            for (int64_t s = 0; s < L; s++) {
                double v = prev[s];
                if (s >= 1) v = lse2(v, prev[s - 1]);
                if (can_skip(j, b, s)) v = lse2(v, prev[s - 2]);
                cur[s] = v == -INFINITY ? v : v + lp_at(j, t, b, ext_label(j, b, s));
            }
        }
        const double *last = a + (Tb - 1) * W;
        double ll = last[L - 1];
        if (L > 1) ll = lse2(ll, last[L - 2]);
        j->nll[b] = -ll;
    }
}

/* out[0] nll (N) float64, out[1] log_alpha (N,T,2S+1) float64; in[0] log_probs (T,N,C),
 * in[1] targets int64 (N,S), in[2] input_lengths int64 (N), in[3] target_lengths int64 (N);
 * ddpl_ctc_params. Lengths and labels are validated by the op. */
int cpu_ctc_loss(ddpl_tensor **out, ddpl_tensor **in, const void *params)
{
    const ddpl_ctc_params *p = params;
    ctc_job j = {.lp = ddpl_data_ptr(in[0]),
                 .f64 = in[0]->dtype == DDPL_FLOAT64,
                 .targets = (const int64_t *)ddpl_data_ptr(in[1]),
                 .in_len = (const int64_t *)ddpl_data_ptr(in[2]),
                 .tgt_len = (const int64_t *)ddpl_data_ptr(in[3]),
                 .T = in[0]->sizes[0],
                 .N = in[0]->sizes[1],
                 .C = in[0]->sizes[2],
                 .S = in[1]->sizes[1],
                 .blank = p->blank,
                 .nll = (double *)ddpl_data_ptr(out[0]),
                 .alpha = (double *)ddpl_data_ptr(out[1])};
    cpu_parallel_for(j.N, 1, ctc_forward_samples, &j);
    return 0;
}

static void ctc_backward_samples(int64_t begin, int64_t end, void *ctx)
{
    const ctc_job *j = ctx;
    int64_t W = 2 * j->S + 1;
    for (int64_t b = begin; b < end; b++) {
        double *beta = j->scratch + b * (j->T * W + j->C), *lcab = beta + j->T * W;
        int64_t Tb = j->in_len[b], L = 2 * j->tgt_len[b] + 1;
        double nll = j->nll[b], g = j->gout[b];
        bool zero = j->zero_infinity && nll == INFINITY;
        for (int64_t t = 0; t < j->T; t++) {
            bool live = t < Tb && !zero;
            for (int64_t c = 0; c < j->C; c++) {
                int64_t i = (t * j->N + b) * j->C + c;
                if (j->f64)
                    ((double *)j->grad)[i] = live ? exp(lp_at(j, t, b, c)) * g : 0.0;
                else
                    ((float *)j->grad)[i] = live ? (float)(exp(lp_at(j, t, b, c)) * g) : 0.0f;
            }
        }
        if (zero || Tb == 0) continue;
        for (int64_t i = 0; i < Tb * W; i++) beta[i] = -INFINITY;
        double *last = beta + (Tb - 1) * W;
        last[L - 1] = lp_at(j, Tb - 1, b, j->blank);
        if (L > 1) last[L - 2] = lp_at(j, Tb - 1, b, ext_label(j, b, L - 2));
        for (int64_t t = Tb - 2; t >= 0; t--) {
            const double *next = beta + (t + 1) * W;
            double *cur = beta + t * W;
            for (int64_t s = 0; s < L; s++) {
                double v = next[s];
                if (s + 1 < L) v = lse2(v, next[s + 1]);
                if (s + 2 < L && can_skip(j, b, s + 2)) v = lse2(v, next[s + 2]);
                cur[s] = v == -INFINITY ? v : v + lp_at(j, t, b, ext_label(j, b, s));
            }
        }
        const double *alpha = j->alpha + b * j->T * W;
        for (int64_t t = 0; t < Tb; t++) {
            for (int64_t c = 0; c < j->C; c++) lcab[c] = -INFINITY;
            for (int64_t s = 0; s < L; s++) {
                int64_t c = ext_label(j, b, s);
                lcab[c] = lse2(lcab[c], alpha[t * W + s] + beta[t * W + s]);
            }
            for (int64_t c = 0; c < j->C; c++) {
                if (lcab[c] == -INFINITY) continue; /* the exp(lp) term alone, written above */
                double lp = lp_at(j, t, b, c);
                double v = (exp(lp) - exp(lcab[c] + nll - lp)) * g;
                int64_t i = (t * j->N + b) * j->C + c;
                if (j->f64)
                    ((double *)j->grad)[i] = v;
                else
                    ((float *)j->grad)[i] = (float)v;
            }
        }
    }
}

/* out[0] grad log_probs (T,N,C, log_probs' dtype); in[0] grad of each sample's loss (N)
 * float64, in[1] log_probs, in[2] targets, in[3] input_lengths, in[4] target_lengths, in[5] nll
 * (N) float64, in[6] log_alpha; ddpl_ctc_params. */
int cpu_ctc_loss_backward(ddpl_tensor **out, ddpl_tensor **in, const void *params)
{
    const ddpl_ctc_params *p = params;
    ctc_job j = {.lp = ddpl_data_ptr(in[1]),
                 .f64 = in[1]->dtype == DDPL_FLOAT64,
                 .targets = (const int64_t *)ddpl_data_ptr(in[2]),
                 .in_len = (const int64_t *)ddpl_data_ptr(in[3]),
                 .tgt_len = (const int64_t *)ddpl_data_ptr(in[4]),
                 .T = in[1]->sizes[0],
                 .N = in[1]->sizes[1],
                 .C = in[1]->sizes[2],
                 .S = in[2]->sizes[1],
                 .blank = p->blank,
                 .nll = (double *)ddpl_data_ptr(in[5]),
                 .alpha = (double *)ddpl_data_ptr(in[6]),
                 .gout = (const double *)ddpl_data_ptr(in[0]),
                 .grad = ddpl_data_ptr(out[0]),
                 .zero_infinity = p->zero_infinity};
    size_t per = (size_t)(j.T * (2 * j.S + 1) + j.C);
    j.scratch = malloc((size_t)j.N * per * sizeof *j.scratch + 1);
    if (!j.scratch) return ddpl_error("ctc_loss: out of memory for the backward's scratch");
    cpu_parallel_for(j.N, 1, ctc_backward_samples, &j);
    free(j.scratch);
    return 0;
}
