/* cpu/cpu_loss.c: the negative log-likelihood and cross-entropy losses on the CPU, forward and
 * backward.
 * defines: cpu_nll_loss, cpu_nll_loss_backward, cpu_cross_entropy, cpu_cross_entropy_backward.
 *
 * logp is (N,C,S): N samples, C classes, S positions per sample (1 for plain classification,
 * d1*d2*... for (N,C,d1,d2,...) inputs); target is (N,S). Per element, with t the target class,
 *   loss = -weight[t] * logp[n, t, s]    (0 where t == ignore_index)
 * 'mean' divides the sum by total_weight = sum of weight[t] over the elements not ignored
 * (their count without weights), as PyTorch does; all ignored gives 0/0 = NaN, as there. Targets
 * are checked before anything is written.
 *
 * cross_entropy is log_softmax + nll fused for logits (N,C) (classes last): the forward keeps
 * per row only stats = (m, ls) = (max, log(sum exp(x - max))) and never writes the (N,C)
 * log-probabilities; logp[n,c] = (x[n,c] - m) - ls, computed as log_softmax does (not as
 * x - (m + ls), which would round ls's digits away next to a large m). The backward writes the
 * gradient in one pass,
 *   dlogits[n,c] = coef[n] * (exp(logp[n,c]) - [c == t]),
 *   coef[n] = weight[t] * grad (grad[n] for reduction none; / total_weight for mean), 0 where
 * t is ignored, where the composition zero-filled an (N,C) dlogp, scattered into it and ran
 * log_softmax's backward over it. */
#include <math.h>

#include "cpu_iter.h"
#include "cpu_kernels.h"
#include "cpu_loops.h"
#include "cpu_math.h"
#include "kernel_abi/nn_params.h"

typedef struct {
    int64_t N, C, S;
    const int64_t *target;
    const char *weight; /* NULL: all ones */
    ddpl_dtype dt;
    const ddpl_nll_params *p;
} nll_job;

static void nll_job_init(nll_job *j, const ddpl_tensor *logp, const ddpl_tensor *target,
                         const ddpl_tensor *weight, const void *params)
{
    j->N = logp->sizes[0], j->C = logp->sizes[1], j->S = logp->sizes[2];
    j->target = (const int64_t *)ddpl_data_ptr(target);
    j->weight = weight ? ddpl_data_ptr(weight) : NULL;
    j->dt = (ddpl_dtype)logp->dtype;
    j->p = params;
}

/* Element i of a float tensor of any floating dtype (16-bit ones read exactly, computed in
 * double and rounded once when stored). */
static inline double load(const char *base, int64_t i, ddpl_dtype dt)
{
    return ddpl_load_f64(base + i * (int64_t)ddpl_dtype_size(dt), dt);
}

static inline void store(char *base, int64_t i, ddpl_dtype dt, double v)
{
    ddpl_store_f64(base + i * (int64_t)ddpl_dtype_size(dt), dt, v);
}

static int check_targets(const char *op, const nll_job *j)
{
    for (int64_t e = 0; e < j->N * j->S; e++) {
        int64_t t = j->target[e];
        if (t != j->p->ignore_index && (t < 0 || t >= j->C))
            return ddpl_error("%s: target %lld is out of bounds for %lld classes (valid: 0 "
                              "to %lld, or ignore_index %lld)",
                              op, (long long)t, (long long)j->C, (long long)(j->C - 1),
                              (long long)j->p->ignore_index);
    }
    return 0;
}

/* out[0] loss ((N,S) for reduction none, else 0-dim), out[1] total_weight (0-dim);
 * in[0] logp (N,C,S), in[1] target (N,S) int64, in[2] weight (C)?; all contiguous. */
int cpu_nll_loss(ddpl_tensor **out, ddpl_tensor **in, const void *params)
{
    nll_job j;
    nll_job_init(&j, in[0], in[1], in[2], params);
    if (check_targets("nll_loss", &j) < 0) return -1;
    const char *logp = ddpl_data_ptr(in[0]);
    char *loss = ddpl_data_ptr(out[0]);
    bool none = j.p->reduction == DDPL_REDUCTION_NONE;
    double sum = 0, total = 0;
    for (int64_t n = 0; n < j.N; n++)
        for (int64_t s = 0; s < j.S; s++) {
            int64_t t = j.target[n * j.S + s];
            double l = 0;
            if (t != j.p->ignore_index) {
                double w = j.weight ? load(j.weight, t, j.dt) : 1.0;
                l = -w * load(logp, (n * j.C + t) * j.S + s, j.dt);
                total += w;
            }
            if (none)
                store(loss, n * j.S + s, j.dt, l);
            else
                sum += l;
        }
    if (!none) store(loss, 0, j.dt, j.p->reduction == DDPL_REDUCTION_MEAN ? sum / total : sum);
    store(ddpl_data_ptr(out[1]), 0, j.dt, total);
    return 0;
}

/* out[0] dlogp (N,C,S); in[0] grad (the loss's shape), in[1] target, in[2] weight?,
 * in[3] total_weight (0-dim). */
int cpu_nll_loss_backward(ddpl_tensor **out, ddpl_tensor **in, const void *params)
{
    nll_job j;
    nll_job_init(&j, out[0], in[1], in[2], params);
    if (check_targets("nll_loss", &j) < 0) return -1;
    char *dlogp = ddpl_data_ptr(out[0]);
    const char *g = ddpl_data_ptr(in[0]);
    memset(dlogp, 0, ddpl_tensor_nbytes(out[0]));
    bool none = j.p->reduction == DDPL_REDUCTION_NONE;
    double scale = none ? 0 : load(g, 0, j.dt);
    if (j.p->reduction == DDPL_REDUCTION_MEAN) scale /= load(ddpl_data_ptr(in[3]), 0, j.dt);
    for (int64_t n = 0; n < j.N; n++)
        for (int64_t s = 0; s < j.S; s++) {
            int64_t t = j.target[n * j.S + s];
            if (t == j.p->ignore_index) continue;
            double w = j.weight ? load(j.weight, t, j.dt) : 1.0;
            double gs = none ? load(g, n * j.S + s, j.dt) : scale;
            store(dlogp, (n * j.C + t) * j.S + s, j.dt, -w * gs);
        }
    return 0;
}

/* ---- cross_entropy (fused log_softmax + nll over the last dim) ---- */

typedef struct {
    nll_job j;     /* N rows, C classes, S = 1 */
    const char *x; /* logits (N,C) */
    char *stats;   /* (N,2): per row max and log(sum exp(x - max)) */
    const char *g; /* backward: the loss's gradient */
    char *dx;      /* backward: (N,C) */
    double scale;  /* backward, reductions mean and sum: grad (/ total_weight for mean) */
} ce_job;

/* 0, or -1 with the error for a dtype the row loops do not read (they read float32 or
 * float64 through the pointer types alone: anything else would be read out of bounds). */
static int ce_job_init(ce_job *c, const ddpl_tensor *logits, const ddpl_tensor *target,
                       const ddpl_tensor *weight, const void *params)
{
    *c = (ce_job){.x = ddpl_data_ptr(logits)};
    c->j.N = logits->sizes[0], c->j.C = logits->sizes[1], c->j.S = 1;
    c->j.target = (const int64_t *)ddpl_data_ptr(target);
    c->j.weight = weight ? ddpl_data_ptr(weight) : NULL;
    c->j.dt = (ddpl_dtype)logits->dtype;
    c->j.p = params;
    if (c->j.dt == DDPL_FLOAT32 || c->j.dt == DDPL_FLOAT64) return 0;
    return ddpl_error("cross_entropy: unsupported dtype %s on cpu", ddpl_dtype_name(c->j.dt));
}

/* T the element type, ACC the accumulator (float keeps float32 rows in vector registers). The
 * row loops are exp-bound (one exp per logit, 8M per GPT step each way), so they are compiled
 * for AVX-512 too (CPU_LOOP_CLONES, cpu_loops.h). */
#define DEFINE_CROSS_ENTROPY(T, ACC, EXP, LOG, SUFFIX)                                             \
    CPU_LOOP_CLONES static void ce_rows_##SUFFIX(int64_t begin, int64_t end, void *ctx)            \
    {                                                                                              \
        const ce_job *c = ctx;                                                                     \
        int64_t C = c->j.C;                                                                        \
        for (int64_t r = begin; r < end; r++) {                                                    \
            const T *x = (const T *)c->x + r * C;                                                  \
            T m = -INFINITY;                                                                       \
            _Pragma("omp simd reduction(max : m)") for (int64_t i = 0; i < C; i++) m =             \
                x[i] > m ? x[i] : m;                                                               \
            if (m == -INFINITY) m = 0; /* an all -inf row: keep exp's argument finite */           \
            ACC s = 0;                                                                             \
            _Pragma("omp simd reduction(+ : s)") for (int64_t i = 0; i < C; i++) s +=              \
                EXP(x[i] - m);                                                                     \
            ((T *)c->stats)[2 * r] = m;                                                            \
            ((T *)c->stats)[2 * r + 1] = (T)LOG(s);                                                \
        }                                                                                          \
    }                                                                                              \
    CPU_LOOP_CLONES static void ce_bwd_rows_##SUFFIX(int64_t begin, int64_t end, void *ctx)        \
    {                                                                                              \
        const ce_job *c = ctx;                                                                     \
        int64_t C = c->j.C;                                                                        \
        bool none = c->j.p->reduction == DDPL_REDUCTION_NONE;                                      \
        for (int64_t r = begin; r < end; r++) {                                                    \
            const T *x = (const T *)c->x + r * C;                                                  \
            T *dx = (T *)c->dx + r * C;                                                            \
            int64_t t = c->j.target[r];                                                            \
            if (t == c->j.p->ignore_index) {                                                       \
                memset(dx, 0, (size_t)C * sizeof(T));                                              \
                continue;                                                                          \
            }                                                                                      \
            double w = c->j.weight ? load(c->j.weight, t, c->j.dt) : 1.0;                          \
            T coef = (T)(w * (none ? load(c->g, r, c->j.dt) : c->scale));                          \
            T m = ((const T *)c->stats)[2 * r], ls = ((const T *)c->stats)[2 * r + 1];             \
            _Pragma("omp simd") for (int64_t i = 0; i < C; i++) dx[i] =                            \
                coef * EXP((x[i] - m) - ls);                                                       \
            dx[t] -= coef;                                                                         \
        }                                                                                          \
    }

DEFINE_CROSS_ENTROPY(float, float, cpu_expf, logf, f32)
DEFINE_CROSS_ENTROPY(double, double, exp, log, f64)

/* logp[n,t] in the element type: (x - m) - ls, as cpu_log_softmax writes it */
static double target_logp(const ce_job *c, int64_t n, int64_t t)
{
    int64_t i = n * c->j.C + t;
    if (c->j.dt == DDPL_FLOAT32) {
        const float *st = (const float *)c->stats + 2 * n;
        return (((const float *)c->x)[i] - st[0]) - st[1];
    }
    const double *st = (const double *)c->stats + 2 * n;
    return (((const double *)c->x)[i] - st[0]) - st[1];
}

/* out[0] loss ((N) for reduction none, else 0-dim), out[1] total_weight (0-dim), out[2] stats
 * (N,2); in[0] logits (N,C), in[1] target (N) int64, in[2] weight (C)?; all contiguous. */
int cpu_cross_entropy(ddpl_tensor **out, ddpl_tensor **in, const void *params)
{
    /* 16-bit logits compute in float32 (the rows below read float32 or float64 only) */
    if (cpu_has_half(3, in)) return cpu_run_widened(cpu_cross_entropy, 3, out, 3, in, params, 0);
    ce_job c;
    if (ce_job_init(&c, in[0], in[1], in[2], params) < 0) return -1;
    if (check_targets("cross_entropy", &c.j) < 0) return -1;
    c.stats = ddpl_data_ptr(out[2]);
    bool f32 = c.j.dt == DDPL_FLOAT32;
    if (c.j.N > 0 && c.j.C > 0)
        cpu_parallel_for(c.j.N, CPU_GRAIN / c.j.C + 1, f32 ? ce_rows_f32 : ce_rows_f64, &c);
    /* the per-row losses: logp[n,t] rounded as log_softmax rounds it, summed in double */
    char *loss = ddpl_data_ptr(out[0]);
    bool none = c.j.p->reduction == DDPL_REDUCTION_NONE;
    double sum = 0, total = 0;
    for (int64_t n = 0; n < c.j.N; n++) {
        int64_t t = c.j.target[n];
        double l = 0;
        if (t != c.j.p->ignore_index) {
            double w = c.j.weight ? load(c.j.weight, t, c.j.dt) : 1.0;
            l = -w * target_logp(&c, n, t);
            total += w;
        }
        if (none)
            store(loss, n, c.j.dt, l);
        else
            sum += l;
    }
    if (!none) store(loss, 0, c.j.dt, c.j.p->reduction == DDPL_REDUCTION_MEAN ? sum / total : sum);
    store(ddpl_data_ptr(out[1]), 0, c.j.dt, total);
    return 0;
}

/* out[0] dlogits (N,C); in[0] grad (the loss's shape), in[1] logits, in[2] target, in[3]
 * weight?, in[4] total_weight (0-dim), in[5] stats (N,2); all contiguous. */
int cpu_cross_entropy_backward(ddpl_tensor **out, ddpl_tensor **in, const void *params)
{
    if (cpu_has_half(6, in))
        return cpu_run_widened(cpu_cross_entropy_backward, 1, out, 6, in, params, 0);
    ce_job c;
    if (ce_job_init(&c, in[1], in[2], in[3], params) < 0) return -1;
    if (check_targets("cross_entropy", &c.j) < 0) return -1;
    c.g = ddpl_data_ptr(in[0]);
    c.stats = ddpl_data_ptr(in[5]);
    c.dx = ddpl_data_ptr(out[0]);
    if (c.j.p->reduction != DDPL_REDUCTION_NONE) {
        c.scale = load(c.g, 0, c.j.dt);
        if (c.j.p->reduction == DDPL_REDUCTION_MEAN)
            c.scale /= load(ddpl_data_ptr(in[4]), 0, c.j.dt);
    }
    bool f32 = c.j.dt == DDPL_FLOAT32;
    if (c.j.N > 0 && c.j.C > 0)
        cpu_parallel_for(c.j.N, CPU_GRAIN / c.j.C + 1, f32 ? ce_bwd_rows_f32 : ce_bwd_rows_f64, &c);
    return 0;
}
