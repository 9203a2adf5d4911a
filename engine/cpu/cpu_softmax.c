/* cpu/cpu_softmax.c: softmax and log_softmax on the CPU, forward and backward.
 * defines: cpu_softmax, cpu_log_softmax, cpu_softmax_backward, cpu_log_softmax_backward.
 *
 * x is contiguous and seen as (outer, D, inner) with D the softmax dim. Numerically stable:
 * the row maximum is subtracted before exponentiating, so exp never overflows, and
 * log_softmax = (x - max) - log(sum exp(x - max)) never takes the log of a rounded-to-zero
 * probability nor adds log's small value to a large max before subtracting. inner == 1 (the last
 * dim, the usual case) makes one pass over each row for the max, one for the sum of exponentials,
 * one to write, each a vectorised loop (float32 uses cpu_expf, which vectorises where libm's expf
 * does not); inner > 1 runs the same passes on inner-wide vectors of a (D, inner) block. Gradients
 * (y the forward output, g the incoming gradient): softmax:      dx = y * (g - sum(g * y))
 *   log_softmax:  dx = g - exp(y) * sum(g)
 * A row that is all -inf gives NaN, and a NaN anywhere in a row makes the row NaN, as in
 * PyTorch. */
#include <math.h>

#include "cpu_iter.h"
#include "cpu_kernels.h"
#include "cpu_math.h"
#include "kernel_abi/kernel_params.h"

typedef struct {
    int64_t outer, D, inner;
    bool log;
    const char *x, *g; /* forward: x; backward: y in x, grad in g */
    char *out;
    atomic_int out_of_memory; /* a thread could not get its scratch vectors */
} sm_job;

static void sm_job_init(sm_job *j, const ddpl_tensor *t, int dim)
{
    j->D = t->ndim ? t->sizes[dim] : 1;
    j->outer = ddpl_numel(dim, t->sizes);
    j->inner = t->ndim ? ddpl_numel(t->ndim - dim - 1, t->sizes + dim + 1) : 1;
}

/* T the element type, ACC the accumulator of the sums (float keeps float32 rows in vector
 * registers), EXP/LOG the functions. The reductions use `omp simd`, which lets the compiler
 * keep per-lane partial maxima and sums. */
#define DEFINE_SOFTMAX(T, ACC, EXP, LOG, SUFFIX)                                                   \
    static void sm_rows_##SUFFIX(int64_t begin, int64_t end, void *ctx)                            \
    {                                                                                              \
        const sm_job *j = ctx;                                                                     \
        int64_t D = j->D;                                                                          \
        for (int64_t r = begin; r < end; r++) {                                                    \
            const T *x = (const T *)j->x + r * D;                                                  \
            T *y = (T *)j->out + r * D;                                                            \
            T m = -INFINITY;                                                                       \
            _Pragma("omp simd reduction(max : m)") for (int64_t i = 0; i < D; i++) m =             \
                x[i] > m ? x[i] : m;                                                               \
            if (m == -INFINITY) m = 0; /* an all -inf row: keep exp's argument finite */           \
            ACC s = 0;                                                                             \
            if (j->log) {                                                                          \
                _Pragma("omp simd reduction(+ : s)") for (int64_t i = 0; i < D; i++) s +=          \
                    EXP(x[i] - m);                                                                 \
                T ls = (T)LOG(s); /* (x - m) - ls: m + ls would round away ls's digits */          \
                for (int64_t i = 0; i < D; i++) y[i] = (x[i] - m) - ls;                            \
            } else {                                                                               \
                _Pragma("omp simd reduction(+ : s)") for (int64_t i = 0; i < D; i++)               \
                {                                                                                  \
                    y[i] = EXP(x[i] - m);                                                          \
                    s += y[i];                                                                     \
                }                                                                                  \
                T inv = (T)(1 / s);                                                                \
                for (int64_t i = 0; i < D; i++) y[i] *= inv;                                       \
            }                                                                                      \
        }                                                                                          \
    }                                                                                              \
    /* one (D, inner) block per item; m and s are inner-wide scratch vectors */                    \
    static void sm_cols_##SUFFIX(int64_t begin, int64_t end, void *ctx)                            \
    {                                                                                              \
        sm_job *j = ctx;                                                                           \
        int64_t D = j->D, I = j->inner;                                                            \
        T *m = ddpl_malloc_array(I, sizeof(T));                                                    \
        ACC *s = ddpl_malloc_array(I, sizeof(ACC));                                                \
        if (!m || !s) atomic_store(&j->out_of_memory, 1);                                          \
        for (int64_t o = begin; m && s && o < end; o++) {                                          \
            const T *x = (const T *)j->x + o * D * I;                                              \
            T *y = (T *)j->out + o * D * I;                                                        \
            for (int64_t i = 0; i < I; i++) m[i] = -INFINITY, s[i] = 0;                            \
            for (int64_t d = 0; d < D; d++)                                                        \
                for (int64_t i = 0; i < I; i++) m[i] = x[d * I + i] > m[i] ? x[d * I + i] : m[i];  \
            for (int64_t i = 0; i < I; i++) m[i] = m[i] == -INFINITY ? 0 : m[i];                   \
            for (int64_t d = 0; d < D; d++)                                                        \
                for (int64_t i = 0; i < I; i++) s[i] += EXP(x[d * I + i] - m[i]);                  \
            for (int64_t d = 0; d < D; d++)                                                        \
                for (int64_t i = 0; i < I; i++)                                                    \
                    y[d * I + i] = j->log ? (x[d * I + i] - m[i]) - (T)LOG(s[i])                   \
                                          : (T)(EXP(x[d * I + i] - m[i]) / s[i]);                  \
        }                                                                                          \
        free(m);                                                                                   \
        free(s);                                                                                   \
    }                                                                                              \
    static void sm_bwd_rows_##SUFFIX(int64_t begin, int64_t end, void *ctx)                        \
    {                                                                                              \
        const sm_job *j = ctx;                                                                     \
        int64_t D = j->D;                                                                          \
        for (int64_t r = begin; r < end; r++) {                                                    \
            const T *y = (const T *)j->x + r * D, *g = (const T *)j->g + r * D;                    \
            T *dx = (T *)j->out + r * D;                                                           \
            ACC s = 0;                                                                             \
            if (j->log) {                                                                          \
                _Pragma("omp simd reduction(+ : s)") for (int64_t i = 0; i < D; i++) s += g[i];    \
                T ts = (T)s;                                                                       \
                for (int64_t i = 0; i < D; i++) dx[i] = g[i] - EXP(y[i]) * ts;                     \
            } else {                                                                               \
                _Pragma("omp simd reduction(+ : s)") for (int64_t i = 0; i < D; i++) s +=          \
                    g[i] * y[i];                                                                   \
                T ts = (T)s;                                                                       \
                for (int64_t i = 0; i < D; i++) dx[i] = y[i] * (g[i] - ts);                        \
            }                                                                                      \
        }                                                                                          \
    }                                                                                              \
    /* inner > 1: each item is one (outer, inner) column, strided by inner */                      \
    static void sm_bwd_cols_##SUFFIX(int64_t begin, int64_t end, void *ctx)                        \
    {                                                                                              \
        const sm_job *j = ctx;                                                                     \
        int64_t D = j->D, I = j->inner;                                                            \
        for (int64_t item = begin; item < end; item++) {                                           \
            int64_t base = item / I * D * I + item % I;                                            \
            const T *y = (const T *)j->x + base, *g = (const T *)j->g + base;                      \
            T *dx = (T *)j->out + base;                                                            \
            ACC s = 0;                                                                             \
            for (int64_t d = 0; d < D; d++) s += j->log ? g[d * I] : g[d * I] * y[d * I];          \
            for (int64_t d = 0; d < D; d++)                                                        \
                dx[d * I] =                                                                        \
                    j->log ? g[d * I] - EXP(y[d * I]) * (T)s : y[d * I] * (g[d * I] - (T)s);       \
        }                                                                                          \
    }

DEFINE_SOFTMAX(float, float, cpu_expf, logf, f32)
DEFINE_SOFTMAX(double, double, exp, log, f64)

static int softmax_forward(ddpl_tensor **out, ddpl_tensor **in, const void *params, bool log)
{
    sm_job j = {.log = log};
    sm_job_init(&j, in[0], ((const ddpl_dim_params *)params)->dim);
    j.x = ddpl_data_ptr(in[0]);
    j.out = ddpl_data_ptr(out[0]);
    if (ddpl_tensor_numel(in[0]) == 0) return 0;
    bool f32 = in[0]->dtype == DDPL_FLOAT32;
    int64_t grain = CPU_GRAIN / (j.D * j.inner) + 1;
    if (j.inner == 1)
        cpu_parallel_for(j.outer, grain, f32 ? sm_rows_f32 : sm_rows_f64, &j);
    else
        cpu_parallel_for(j.outer, grain, f32 ? sm_cols_f32 : sm_cols_f64, &j);
    if (atomic_load(&j.out_of_memory))
        return ddpl_error("%s: out of memory for scratch vectors of %lld elements",
                          log ? "log_softmax" : "softmax", (long long)j.inner);
    return 0;
}

static int softmax_backward(ddpl_tensor **out, ddpl_tensor **in, const void *params, bool log)
{
    sm_job j = {.log = log};
    sm_job_init(&j, in[1], ((const ddpl_dim_params *)params)->dim);
    j.g = ddpl_data_ptr(in[0]);
    j.x = ddpl_data_ptr(in[1]);
    j.out = ddpl_data_ptr(out[0]);
    if (ddpl_tensor_numel(in[1]) == 0) return 0;
    bool f32 = in[1]->dtype == DDPL_FLOAT32;
    if (j.inner == 1)
        cpu_parallel_for(j.outer, CPU_GRAIN / j.D + 1, f32 ? sm_bwd_rows_f32 : sm_bwd_rows_f64, &j);
    else
        cpu_parallel_for(j.outer * j.inner, CPU_GRAIN / j.D + 1,
                         f32 ? sm_bwd_cols_f32 : sm_bwd_cols_f64, &j);
    return 0;
}

/* out[0] y <- softmax of in[0] along params->dim; contiguous. */
int cpu_softmax(ddpl_tensor **out, ddpl_tensor **in, const void *params)
{
    return softmax_forward(out, in, params, false);
}

int cpu_log_softmax(ddpl_tensor **out, ddpl_tensor **in, const void *params)
{
    return softmax_forward(out, in, params, true);
}

/* out[0] dx; in[0] grad, in[1] y (the forward output); contiguous. */
int cpu_softmax_backward(ddpl_tensor **out, ddpl_tensor **in, const void *params)
{
    return softmax_backward(out, in, params, false);
}

int cpu_log_softmax_backward(ddpl_tensor **out, ddpl_tensor **in, const void *params)
{
    return softmax_backward(out, in, params, true);
}
