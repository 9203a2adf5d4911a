/* cpu/cpu_loss.c: the negative log-likelihood loss on the CPU, forward and backward.
 * defines: cpu_nll_loss, cpu_nll_loss_backward.
 *
 * logp is (N,C,S): N samples, C classes, S positions per sample (1 for plain classification,
 * d1*d2*... for (N,C,d1,d2,...) inputs); target is (N,S). Per element, with t the target class,
 *   loss = -weight[t] * logp[n, t, s]    (0 where t == ignore_index)
 * 'mean' divides the sum by total_weight = sum of weight[t] over the elements not ignored
 * (their count without weights), as PyTorch does; all ignored gives 0/0 = NaN, as there. Targets
 * are checked before anything is written. */
#include "cpu_kernels.h"
#include "ops/nn_params.h"

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

static int check_targets(const nll_job *j)
{
    for (int64_t e = 0; e < j->N * j->S; e++) {
        int64_t t = j->target[e];
        if (t != j->p->ignore_index && (t < 0 || t >= j->C))
            return ddpl_error("nll_loss: target %lld is out of bounds for %lld classes (valid: 0 "
                              "to %lld, or ignore_index %lld)",
                              (long long)t, (long long)j->C, (long long)(j->C - 1),
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
    if (check_targets(&j) < 0) return -1;
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
    if (check_targets(&j) < 0) return -1;
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
