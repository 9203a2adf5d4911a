/* cpu/cpu_norm.c: batch and layer normalisation on the CPU, forward and backward.
 * defines: cpu_batch_norm, cpu_batch_norm_backward, cpu_layer_norm, cpu_layer_norm_backward.
 *
 * batch_norm sees x as (N,C,S) and normalises each channel c over its N*S values; threads take
 * whole channels. layer_norm sees x as (M,N) and normalises each row; threads take rows for
 * the normalisation and column blocks for the weight/bias gradients (which sum over rows), so
 * no two threads write the same element. Statistics accumulate in double and use two passes
 * (mean, then squared deviations), so float32 inputs with a large mean keep their precision; the
 * sums are `omp simd` reductions, which the compiler vectorises with per-lane partial sums.
 * float16/bfloat16 operands compute in float32 (cpu_run_widened): read once, rounded once.
 *
 * Gradients, with xhat = (x - mean) * invstd and gw = grad * weight (weight 1 when absent):
 *   dx = invstd * (gw - mean(gw) - xhat * mean(gw * xhat))   (batch statistics)
 *   dx = invstd * gw                                          (batch_norm with running stats)
 *   dweight = sum(grad * xhat), dbias = sum(grad). */
#include <math.h>

#include "cpu_iter.h"
#include "cpu_kernels.h"
#include "cpu_loops.h"
#include "kernel_abi/nn_params.h"

/* ---- batch_norm ---- */
typedef struct {
    int64_t N, C, S;
    const ddpl_batch_norm_params *p;
    const char *x, *w, *b, *g;
    char *y, *mean, *invstd, *rm, *rv, *dx, *dw, *db;
} bn_job;

#define DEFINE_BATCH_NORM(T, SUFFIX)                                                               \
    static void bn_fwd_##SUFFIX(int64_t begin, int64_t end, void *ctx)                             \
    {                                                                                              \
        const bn_job *j = ctx;                                                                     \
        int64_t N = j->N, C = j->C, S = j->S, M = N * S;                                           \
        for (int64_t c = begin; c < end; c++) {                                                    \
            double mean, invstd;                                                                   \
            if (j->p->training) {                                                                  \
                double s = 0, ss = 0;                                                              \
                for (int64_t n = 0; n < N; n++) {                                                  \
                    const T *x = (const T *)j->x + (n * C + c) * S;                                \
                    _Pragma("omp simd reduction(+ : s)") for (int64_t i = 0; i < S; i++) s +=      \
                        x[i];                                                                      \
                }                                                                                  \
                mean = s / (double)M;                                                              \
                for (int64_t n = 0; n < N; n++) {                                                  \
                    const T *x = (const T *)j->x + (n * C + c) * S;                                \
                    _Pragma("omp simd reduction(+ : ss)") for (int64_t i = 0; i < S; i++) ss +=    \
                        (x[i] - mean) * (x[i] - mean);                                             \
                }                                                                                  \
                double var = ss / (double)M;                                                       \
                invstd = 1.0 / sqrt(var + j->p->eps);                                              \
                double mom = j->p->momentum;                                                       \
                if (j->rm) ((T *)j->rm)[c] = (T)((1 - mom) * ((T *)j->rm)[c] + mom * mean);        \
                if (j->rv) /* running variance is the unbiased estimate */                         \
                    ((T *)j->rv)[c] =                                                              \
                        (T)((1 - mom) * ((T *)j->rv)[c] + mom * ss / (double)(M - 1));             \
            } else {                                                                               \
                mean = ((const T *)j->rm)[c];                                                      \
                invstd = 1.0 / sqrt((double)((const T *)j->rv)[c] + j->p->eps);                    \
            }                                                                                      \
            ((T *)j->mean)[c] = (T)mean;                                                           \
            ((T *)j->invstd)[c] = (T)invstd;                                                       \
            double w = j->w ? ((const T *)j->w)[c] : 1.0, b = j->b ? ((const T *)j->b)[c] : 0.0;   \
            T scale = (T)(invstd * w), shift = (T)(b - mean * invstd * w);                         \
            for (int64_t n = 0; n < N; n++) {                                                      \
                const T *x = (const T *)j->x + (n * C + c) * S;                                    \
                T *y = (T *)j->y + (n * C + c) * S;                                                \
                for (int64_t i = 0; i < S; i++) y[i] = x[i] * scale + shift;                       \
            }                                                                                      \
        }                                                                                          \
    }                                                                                              \
    static void bn_bwd_##SUFFIX(int64_t begin, int64_t end, void *ctx)                             \
    {                                                                                              \
        const bn_job *j = ctx;                                                                     \
        int64_t N = j->N, C = j->C, S = j->S, M = N * S;                                           \
        for (int64_t c = begin; c < end; c++) {                                                    \
            double mean = ((const T *)j->mean)[c], invstd = ((const T *)j->invstd)[c];             \
            double sg = 0, sgx = 0; /* sum(grad), sum(grad * (x - mean)) */                        \
            for (int64_t n = 0; n < N; n++) {                                                      \
                const T *x = (const T *)j->x + (n * C + c) * S;                                    \
                const T *g = (const T *)j->g + (n * C + c) * S;                                    \
                _Pragma("omp simd reduction(+ : sg, sgx)") for (int64_t i = 0; i < S; i++)         \
                {                                                                                  \
                    sg += g[i];                                                                    \
                    sgx += g[i] * (x[i] - mean);                                                   \
                }                                                                                  \
            }                                                                                      \
            if (j->dw) ((T *)j->dw)[c] = (T)(sgx * invstd);                                        \
            if (j->db) ((T *)j->db)[c] = (T)sg;                                                    \
            if (!j->dx) continue;                                                                  \
            double w = j->w ? ((const T *)j->w)[c] : 1.0;                                          \
            /* dx = a*g + b*x + k with batch statistics, dx = a*g with running ones */             \
            double a = w * invstd, bx = 0, k = 0;                                                  \
            if (j->p->training) {                                                                  \
                bx = -a * invstd * invstd * sgx / (double)M;                                       \
                k = -a * sg / (double)M - bx * mean;                                               \
            }                                                                                      \
            T ta = (T)a, tb = (T)bx, tk = (T)k;                                                    \
            for (int64_t n = 0; n < N; n++) {                                                      \
                const T *x = (const T *)j->x + (n * C + c) * S;                                    \
                const T *g = (const T *)j->g + (n * C + c) * S;                                    \
                T *dx = (T *)j->dx + (n * C + c) * S;                                              \
                for (int64_t i = 0; i < S; i++) dx[i] = ta * g[i] + tb * x[i] + tk;                \
            }                                                                                      \
        }                                                                                          \
    }

DEFINE_BATCH_NORM(float, f32)
DEFINE_BATCH_NORM(double, f64)

static char *ptr_or_null(ddpl_tensor *t)
{
    return t ? ddpl_data_ptr(t) : NULL;
}

/* The inputs batch_norm writes in place: the running statistics (3, 4), when training. */
static unsigned bn_updated(const void *params)
{
    return ((const ddpl_batch_norm_params *)params)->training ? (1u << 3) | (1u << 4) : 0;
}

/* out[0] y, out[1] mean, out[2] invstd; in[0] x (N,C,S), in[1] weight?, in[2] bias?,
 * in[3] running_mean?, in[4] running_var? (required in eval mode; updated when training). */
int cpu_batch_norm(ddpl_tensor **out, ddpl_tensor **in, const void *params)
{
    if (cpu_has_half(5, in))
        return cpu_run_widened(cpu_batch_norm, 3, out, 5, in, params, bn_updated(params));
    ddpl_tensor *x = in[0];
    bn_job j = {.N = x->sizes[0], .C = x->sizes[1], .S = x->sizes[2], .p = params};
    j.x = ddpl_data_ptr(x), j.w = ptr_or_null(in[1]), j.b = ptr_or_null(in[2]);
    j.rm = ptr_or_null(in[3]), j.rv = ptr_or_null(in[4]);
    j.y = ddpl_data_ptr(out[0]), j.mean = ddpl_data_ptr(out[1]), j.invstd = ddpl_data_ptr(out[2]);
    cpu_parallel_for(j.C, CPU_GRAIN / (j.N * j.S + 1) + 1,
                     x->dtype == DDPL_FLOAT32 ? bn_fwd_f32 : bn_fwd_f64, &j);
    return 0;
}

/* out[0] dx?, out[1] dweight?, out[2] dbias?; in[0] grad, in[1] x, in[2] weight?, in[3] mean,
 * in[4] invstd. */
int cpu_batch_norm_backward(ddpl_tensor **out, ddpl_tensor **in, const void *params)
{
    if (cpu_has_half(5, in))
        return cpu_run_widened(cpu_batch_norm_backward, 3, out, 5, in, params, 0);
    ddpl_tensor *x = in[1];
    bn_job j = {.N = x->sizes[0], .C = x->sizes[1], .S = x->sizes[2], .p = params};
    j.g = ddpl_data_ptr(in[0]), j.x = ddpl_data_ptr(x), j.w = ptr_or_null(in[2]);
    j.mean = ddpl_data_ptr(in[3]), j.invstd = ddpl_data_ptr(in[4]);
    j.dx = ptr_or_null(out[0]), j.dw = ptr_or_null(out[1]), j.db = ptr_or_null(out[2]);
    cpu_parallel_for(j.C, CPU_GRAIN / (j.N * j.S + 1) + 1,
                     x->dtype == DDPL_FLOAT32 ? bn_bwd_f32 : bn_bwd_f64, &j);
    return 0;
}

/* ---- layer_norm ---- */
typedef struct {
    int64_t M, N;
    double eps;
    const char *x, *w, *b, *g, *mean, *rstd;
    char *y, *ymean, *yrstd, *dx, *dw, *db;
} ln_job;

/* Columns per block of the weight/bias gradient pass. */
#define LN_COLS 64

/* The row passes sum in double (8 lanes with AVX-512 against 4), so they are compiled for it
 * too (CPU_LOOP_CLONES, cpu_loops.h). */
#define DEFINE_LAYER_NORM(T, SUFFIX)                                                               \
    CPU_LOOP_CLONES static void ln_fwd_##SUFFIX(int64_t begin, int64_t end, void *ctx)             \
    {                                                                                              \
        const ln_job *j = ctx;                                                                     \
        int64_t N = j->N;                                                                          \
        const T *w = (const T *)j->w, *b = (const T *)j->b;                                        \
        for (int64_t r = begin; r < end; r++) {                                                    \
            const T *x = (const T *)j->x + r * N;                                                  \
            T *y = (T *)j->y + r * N;                                                              \
            double s = 0, ss = 0;                                                                  \
            _Pragma("omp simd reduction(+ : s)") for (int64_t i = 0; i < N; i++) s += x[i];        \
            double mean = s / (double)N;                                                           \
            _Pragma("omp simd reduction(+ : ss)") for (int64_t i = 0; i < N; i++) ss +=            \
                (x[i] - mean) * (x[i] - mean);                                                     \
            double rstd = 1.0 / sqrt(ss / (double)N + j->eps);                                     \
            ((T *)j->ymean)[r] = (T)mean;                                                          \
            ((T *)j->yrstd)[r] = (T)rstd;                                                          \
            T tm = (T)mean, tr = (T)rstd;                                                          \
            for (int64_t i = 0; i < N; i++) {                                                      \
                T v = (x[i] - tm) * tr;                                                            \
                if (w) v *= w[i];                                                                  \
                if (b) v += b[i];                                                                  \
                y[i] = v;                                                                          \
            }                                                                                      \
        }                                                                                          \
    }                                                                                              \
    CPU_LOOP_CLONES static void ln_bwd_rows_##SUFFIX(int64_t begin, int64_t end, void *ctx)        \
    {                                                                                              \
        const ln_job *j = ctx;                                                                     \
        int64_t N = j->N;                                                                          \
        const T *w = (const T *)j->w;                                                              \
        for (int64_t r = begin; r < end; r++) {                                                    \
            const T *x = (const T *)j->x + r * N, *g = (const T *)j->g + r * N;                    \
            T *dx = (T *)j->dx + r * N;                                                            \
            double mean = ((const T *)j->mean)[r], rstd = ((const T *)j->rstd)[r];                 \
            double sgw = 0, sgwx = 0; /* sum(gw), sum(gw * xhat) */                                \
            _Pragma("omp simd reduction(+ : sgw, sgwx)") for (int64_t i = 0; i < N; i++)           \
            {                                                                                      \
                double gw = w ? (double)g[i] * w[i] : g[i];                                        \
                sgw += gw;                                                                         \
                sgwx += gw * (x[i] - mean) * rstd;                                                 \
            }                                                                                      \
            T a = (T)(sgw / (double)N), c = (T)(sgwx / (double)N), tm = (T)mean, tr = (T)rstd;     \
            for (int64_t i = 0; i < N; i++) {                                                      \
                T gw = w ? g[i] * w[i] : g[i];                                                     \
                dx[i] = tr * (gw - a - (x[i] - tm) * tr * c);                                      \
            }                                                                                      \
        }                                                                                          \
    }                                                                                              \
    CPU_LOOP_CLONES static void ln_bwd_cols_##SUFFIX(int64_t begin, int64_t end, void *ctx)        \
    {                                                                                              \
        const ln_job *j = ctx;                                                                     \
        int64_t N = j->N;                                                                          \
        for (int64_t blk = begin; blk < end; blk++) {                                              \
            int64_t c0 = blk * LN_COLS, c1 = c0 + LN_COLS < N ? c0 + LN_COLS : N;                  \
            double sw[LN_COLS] = {0}, sb[LN_COLS] = {0};                                           \
            for (int64_t r = 0; r < j->M; r++) {                                                   \
                const T *x = (const T *)j->x + r * N, *g = (const T *)j->g + r * N;                \
                double mean = ((const T *)j->mean)[r], rstd = ((const T *)j->rstd)[r];             \
                for (int64_t i = c0; i < c1; i++) {                                                \
                    sw[i - c0] += g[i] * (x[i] - mean) * rstd;                                     \
                    sb[i - c0] += g[i];                                                            \
                }                                                                                  \
            }                                                                                      \
            for (int64_t i = c0; i < c1; i++) {                                                    \
                if (j->dw) ((T *)j->dw)[i] = (T)sw[i - c0];                                        \
                if (j->db) ((T *)j->db)[i] = (T)sb[i - c0];                                        \
            }                                                                                      \
        }                                                                                          \
    }

DEFINE_LAYER_NORM(float, f32)
DEFINE_LAYER_NORM(double, f64)

/* out[0] y (M,N), out[1] mean (M), out[2] rstd (M); in[0] x (M,N), in[1] weight (N)?,
 * in[2] bias (N)?; ddpl_layer_norm_params. */
int cpu_layer_norm(ddpl_tensor **out, ddpl_tensor **in, const void *params)
{
    if (cpu_has_half(3, in)) return cpu_run_widened(cpu_layer_norm, 3, out, 3, in, params, 0);
    ddpl_tensor *x = in[0];
    ln_job j = {
        .M = x->sizes[0], .N = x->sizes[1], .eps = ((const ddpl_layer_norm_params *)params)->eps};
    j.x = ddpl_data_ptr(x), j.w = ptr_or_null(in[1]), j.b = ptr_or_null(in[2]);
    j.y = ddpl_data_ptr(out[0]), j.ymean = ddpl_data_ptr(out[1]), j.yrstd = ddpl_data_ptr(out[2]);
    cpu_parallel_for(j.M, CPU_GRAIN / (j.N + 1) + 1,
                     x->dtype == DDPL_FLOAT32 ? ln_fwd_f32 : ln_fwd_f64, &j);
    return 0;
}

/* out[0] dx?, out[1] dweight?, out[2] dbias?; in[0] grad (M,N), in[1] x, in[2] weight?,
 * in[3] mean, in[4] rstd. */
int cpu_layer_norm_backward(ddpl_tensor **out, ddpl_tensor **in, const void *params)
{
    if (cpu_has_half(5, in))
        return cpu_run_widened(cpu_layer_norm_backward, 3, out, 5, in, params, 0);
    DDPL_UNUSED(params);
    ddpl_tensor *x = in[1];
    ln_job j = {.M = x->sizes[0], .N = x->sizes[1]};
    j.g = ddpl_data_ptr(in[0]), j.x = ddpl_data_ptr(x), j.w = ptr_or_null(in[2]);
    j.mean = ddpl_data_ptr(in[3]), j.rstd = ddpl_data_ptr(in[4]);
    j.dx = ptr_or_null(out[0]), j.dw = ptr_or_null(out[1]), j.db = ptr_or_null(out[2]);
    bool f32 = x->dtype == DDPL_FLOAT32;
    if (j.dx)
        cpu_parallel_for(j.M, CPU_GRAIN / (j.N + 1) + 1, f32 ? ln_bwd_rows_f32 : ln_bwd_rows_f64,
                         &j);
    if (j.dw || j.db)
        cpu_parallel_for((j.N + LN_COLS - 1) / LN_COLS, CPU_GRAIN / (j.M * LN_COLS + 1) + 1,
                         f32 ? ln_bwd_cols_f32 : ln_bwd_cols_f64, &j);
    return 0;
}
