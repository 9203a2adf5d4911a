/* cpu/cpu_attention.c: fused scaled dot-product attention on the CPU, forward and backward;
 * the reference every other backend's fused kernel is checked against.
 * defines: cpu_attention, cpu_attention_backward.
 *
 * Operands are contiguous: q (B,H,L,E), k (B,H,S,E), v (B,H,S,Ev), y (B,H,L,Ev), logsumexp
 * (B,H,L); the leading dims are walked as one of BH heads. The logsumexp has the accumulation
 * dtype: float32 for float32 inputs, float64 for float64 ones (a float32 logsumexp would cost
 * float64 gradients their digits). Forward, per query row i (FlashAttention's online softmax): keys
 * are visited in blocks of ATT_BLOCK; each block's scores s_j = scale * q_i.k_j raise the running
 * max m, the running sum l and the output accumulator are rescaled by exp(m_old - m_new), and
 * exp(s_j - m) * v_j is added. Memory is O(Ev + ATT_BLOCK) per thread, never (L,S). y_i = acc / l,
 * logsumexp_i = m + log(l).
 * Backward (FlashAttention-2): P_ij = exp(s_ij - logsumexp_i) is recomputed, D_i = dY_i.Y_i,
 *   dV_j += P_ij dY_i,  dP_ij = dY_i.v_j,  dS_ij = P_ij (dP_ij - D_i),
 *   dQ_i += scale dS_ij k_j,  dK_j += scale dS_ij q_i.
 * Causal (top-left aligned, as PyTorch): key j is hidden from query i when j > i, so row i only
 * visits keys [0, min(S, i+1)); every row sees key 0, so no row is fully masked.
 * Work is split over the BH heads (OpenMP via cpu_parallel_for); a head is one thread's, so the
 * dK/dV accumulation has no races. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "cpu_attention.h"
#include "cpu_iter.h"
#include "ops/nn_params.h"

enum { ATT_BLOCK = 64 }; /* keys per online-softmax block */

typedef struct {
    int64_t BH, L, S, E, Ev;
    double scale;
    bool causal;
    const char *q, *k, *v, *y, *g, *lse_in; /* g: dY (backward) */
    char *out, *lse, *dq, *dk, *dv;
    atomic_int out_of_memory; /* a thread could not get its scratch vectors */
} att_job;

static int64_t att_keys(const att_job *j, int64_t i)
{
    return j->causal ? (i + 1 < j->S ? i + 1 : j->S) : j->S;
}

#define DEFINE_ATTENTION(T, EXP, LOG, SUFFIX)                                                      \
    static void att_fwd_##SUFFIX(int64_t begin, int64_t end, void *ctx)                            \
    {                                                                                              \
        att_job *j = ctx;                                                                          \
        int64_t L = j->L, S = j->S, E = j->E, Ev = j->Ev;                                          \
        T scale = (T)j->scale;                                                                     \
        T *acc = malloc((size_t)(Ev > 0 ? Ev : 1) * sizeof(T));                                    \
        T *s = malloc(ATT_BLOCK * sizeof(T));                                                      \
        if (!acc || !s) atomic_store(&j->out_of_memory, 1);                                        \
        for (int64_t bh = begin; acc && s && bh < end; bh++) {                                     \
            const T *q = (const T *)j->q + bh * L * E, *k = (const T *)j->k + bh * S * E;          \
            const T *v = (const T *)j->v + bh * S * Ev;                                            \
            T *y = (T *)j->out + bh * L * Ev, *lse = (T *)j->lse + bh * L;                         \
            for (int64_t i = 0; i < L; i++) {                                                      \
                const T *qi = q + i * E;                                                           \
                int64_t send = att_keys(j, i);                                                     \
                T m = -INFINITY, l = 0;                                                            \
                for (int64_t e = 0; e < Ev; e++) acc[e] = 0;                                       \
                for (int64_t j0 = 0; j0 < send; j0 += ATT_BLOCK) {                                 \
                    int64_t nb = send - j0 < ATT_BLOCK ? send - j0 : ATT_BLOCK;                    \
                    T bm = -INFINITY;                                                              \
                    for (int64_t jj = 0; jj < nb; jj++) {                                          \
                        const T *kj = k + (j0 + jj) * E;                                           \
                        T d = 0;                                                                   \
                        _Pragma("omp simd reduction(+ : d)") for (int64_t e = 0; e < E; e++) d +=  \
                            qi[e] * kj[e];                                                         \
                        s[jj] = d * scale;                                                         \
                        bm = s[jj] > bm ? s[jj] : bm;                                              \
                    }                                                                              \
                    T mn = bm > m ? bm : m;                                                        \
                    if (mn == -INFINITY) continue; /* all -inf so far: nothing to add */           \
                    T alpha = EXP(m - mn);         /* 0 on the first block (m = -inf) */           \
                    l *= alpha;                                                                    \
                    for (int64_t e = 0; e < Ev; e++) acc[e] *= alpha;                              \
                    for (int64_t jj = 0; jj < nb; jj++) {                                          \
                        T p = EXP(s[jj] - mn);                                                     \
                        const T *vj = v + (j0 + jj) * Ev;                                          \
                        l += p;                                                                    \
                        _Pragma("omp simd") for (int64_t e = 0; e < Ev; e++) acc[e] += p * vj[e];  \
                    }                                                                              \
                    m = mn;                                                                        \
                }                                                                                  \
                T inv = l > 0 ? 1 / l : 0;                                                         \
                for (int64_t e = 0; e < Ev; e++) y[i * Ev + e] = acc[e] * inv;                     \
                lse[i] = l > 0 ? m + LOG(l) : -INFINITY;                                           \
            }                                                                                      \
        }                                                                                          \
        free(acc);                                                                                 \
        free(s);                                                                                   \
    }                                                                                              \
    static void att_bwd_##SUFFIX(int64_t begin, int64_t end, void *ctx)                            \
    {                                                                                              \
        att_job *j = ctx;                                                                          \
        int64_t L = j->L, S = j->S, E = j->E, Ev = j->Ev;                                          \
        T scale = (T)j->scale;                                                                     \
        for (int64_t bh = begin; bh < end; bh++) {                                                 \
            const T *q = (const T *)j->q + bh * L * E, *k = (const T *)j->k + bh * S * E;          \
            const T *v = (const T *)j->v + bh * S * Ev, *y = (const T *)j->y + bh * L * Ev;        \
            const T *g = (const T *)j->g + bh * L * Ev, *lse = (const T *)j->lse_in + bh * L;      \
            T *dq = (T *)j->dq + bh * L * E, *dk = (T *)j->dk + bh * S * E;                        \
            T *dv = (T *)j->dv + bh * S * Ev;                                                      \
            memset(dq, 0, (size_t)(L * E) * sizeof(T));                                            \
            memset(dk, 0, (size_t)(S * E) * sizeof(T));                                            \
            memset(dv, 0, (size_t)(S * Ev) * sizeof(T));                                           \
            for (int64_t i = 0; i < L; i++) {                                                      \
                const T *qi = q + i * E, *gi = g + i * Ev, *yi = y + i * Ev;                       \
                T *dqi = dq + i * E;                                                               \
                T D = 0;                                                                           \
                _Pragma("omp simd reduction(+ : D)") for (int64_t e = 0; e < Ev; e++) D +=         \
                    gi[e] * yi[e];                                                                 \
                int64_t send = att_keys(j, i);                                                     \
                for (int64_t jj = 0; jj < send; jj++) {                                            \
                    const T *kj = k + jj * E, *vj = v + jj * Ev;                                   \
                    T *dkj = dk + jj * E, *dvj = dv + jj * Ev;                                     \
                    T sc = 0, dp = 0;                                                              \
                    _Pragma("omp simd reduction(+ : sc)") for (int64_t e = 0; e < E; e++) sc +=    \
                        qi[e] * kj[e];                                                             \
                    T p = EXP(sc * scale - lse[i]);                                                \
                    _Pragma("omp simd reduction(+ : dp)") for (int64_t e = 0; e < Ev; e++) dp +=   \
                        gi[e] * vj[e];                                                             \
                    _Pragma("omp simd") for (int64_t e = 0; e < Ev; e++) dvj[e] += p * gi[e];      \
                    T ds = p * (dp - D) * scale;                                                   \
                    _Pragma("omp simd") for (int64_t e = 0; e < E; e++)                            \
                    {                                                                              \
                        dqi[e] += ds * kj[e];                                                      \
                        dkj[e] += ds * qi[e];                                                      \
                    }                                                                              \
                }                                                                                  \
            }                                                                                      \
        }                                                                                          \
    }

DEFINE_ATTENTION(float, expf, logf, f32)
DEFINE_ATTENTION(double, exp, log, f64)

/* Fills the job's sizes from q (BH,L,E) and v (BH,S,Ev); picks the typed bodies. Returns 1
 * (not an error) for dtypes this kernel lacks, so the ops layer composes instead. */
static int att_setup(att_job *j, const ddpl_tensor *q, const ddpl_tensor *v, const void *params,
                     const ddpl_tensor *lse, void (**fwd)(int64_t, int64_t, void *),
                     void (**bwd)(int64_t, int64_t, void *))
{
    const ddpl_attention_params *p = params;
    j->BH = ddpl_numel(q->ndim - 2, q->sizes); /* B*H (any leading dims) */
    j->L = q->sizes[q->ndim - 2];
    j->E = q->sizes[q->ndim - 1];
    j->S = v->sizes[v->ndim - 2];
    j->Ev = v->sizes[v->ndim - 1];
    j->scale = p->scale;
    j->causal = p->causal;
    atomic_init(&j->out_of_memory, 0);
    if (q->dtype == DDPL_FLOAT32 && lse->dtype == DDPL_FLOAT32) {
        *fwd = att_fwd_f32;
        *bwd = att_bwd_f32;
    } else if (q->dtype == DDPL_FLOAT64 && lse->dtype == DDPL_FLOAT64) {
        *fwd = att_fwd_f64;
        *bwd = att_bwd_f64;
    } else {
        return 1;
    }
    return 0;
}

/* Heads per parallel chunk so that a chunk is at least CPU_GRAIN multiply-adds. */
static int64_t att_grain(const att_job *j)
{
    int64_t work = j->L * j->S * (j->E + j->Ev);
    return work >= CPU_GRAIN ? 1 : CPU_GRAIN / (work > 0 ? work : 1);
}

/* out[0] y (B,H,L,Ev), out[1] logsumexp (B,H,L); in[0] q, in[1] k, in[2] v (contiguous) */
int cpu_attention(ddpl_tensor **out, ddpl_tensor **in, const void *params)
{
    att_job j;
    void (*fwd)(int64_t, int64_t, void *), (*bwd)(int64_t, int64_t, void *);
    int rc = att_setup(&j, in[0], in[2], params, out[1], &fwd, &bwd);
    if (rc) return rc;
    j.q = ddpl_data_ptr(in[0]);
    j.k = ddpl_data_ptr(in[1]);
    j.v = ddpl_data_ptr(in[2]);
    j.out = ddpl_data_ptr(out[0]);
    j.lse = ddpl_data_ptr(out[1]);
    cpu_parallel_for(j.BH, att_grain(&j), fwd, &j);
    if (atomic_load(&j.out_of_memory))
        return ddpl_error("attention: out of memory for scratch vectors of %lld elements",
                          (long long)j.Ev);
    return 0;
}

/* out[0] dq, out[1] dk, out[2] dv; in[0] dY, in[1] q, in[2] k, in[3] v, in[4] y,
 * in[5] logsumexp */
int cpu_attention_backward(ddpl_tensor **out, ddpl_tensor **in, const void *params)
{
    att_job j;
    void (*fwd)(int64_t, int64_t, void *), (*bwd)(int64_t, int64_t, void *);
    int rc = att_setup(&j, in[1], in[3], params, in[5], &fwd, &bwd);
    if (rc) return rc;
    j.g = ddpl_data_ptr(in[0]);
    j.q = ddpl_data_ptr(in[1]);
    j.k = ddpl_data_ptr(in[2]);
    j.v = ddpl_data_ptr(in[3]);
    j.y = ddpl_data_ptr(in[4]);
    j.lse_in = ddpl_data_ptr(in[5]);
    j.dq = ddpl_data_ptr(out[0]);
    j.dk = ddpl_data_ptr(out[1]);
    j.dv = ddpl_data_ptr(out[2]);
    cpu_parallel_for(j.BH, att_grain(&j), bwd, &j);
    return 0;
}
