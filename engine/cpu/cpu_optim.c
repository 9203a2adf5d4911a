/* cpu/cpu_optim.c: fused per-tensor optimizer updates on the CPU.
 * defines: cpu_sgd_step, cpu_adam_step (ops.def SGD_STEP, ADAM_STEP).
 *
 * One pass over contiguous tensors: each element's update reads param, grad and state once and
 * writes them once, where PyTorch's single-tensor loop makes 4 to 8 passes. The arithmetic is
 * PyTorch's, step by step, in the tensor's own precision (float32 for float32; float for the
 * 16-bit types, which round back on store), with the Python-float hyperparameters rounded to
 * that precision as PyTorch's CPU kernels do. Large tensors are split over OpenMP threads. */
#include <math.h>

#include "cpu_iter.h"
#include "cpu_kernels.h"
#include "ops/optim.h"

typedef struct sgd_ctx {
    const ddpl_sgd_params *p;
    char *param, *buf;
    const char *grad;
    ddpl_dtype dt;
} sgd_ctx;

/* x = param, b = momentum buffer (NULL without momentum), g = gradient; elements [lo, hi). */
#define SGD_LOOP(T, x, b, g, lo, hi, P)                                                            \
    do {                                                                                           \
        const T wd = (T)(P)->h.weight_decay, mom = (T)(P)->h.momentum;                             \
        const T damp1 = (T)(1.0 - (P)->h.dampening), neg_lr = (T)(-(P)->h.lr);                     \
        const T sign = (P)->h.maximize ? (T)-1 : (T)1;                                             \
        const bool has_wd = (P)->h.weight_decay != 0, nesterov = (P)->h.nesterov;                  \
        const bool init = (P)->init_buf;                                                           \
        if (!(b)) {                                                                                \
            _Pragma("omp simd") for (int64_t i = (lo); i < (hi); i++)                              \
            {                                                                                      \
                T d = sign * (g)[i];                                                               \
                if (has_wd) d = d + wd * (x)[i];                                                   \
                (x)[i] = (x)[i] + neg_lr * d;                                                      \
            }                                                                                      \
        } else {                                                                                   \
            _Pragma("omp simd") for (int64_t i = (lo); i < (hi); i++)                              \
            {                                                                                      \
                T d = sign * (g)[i];                                                               \
                if (has_wd) d = d + wd * (x)[i];                                                   \
                T m = init ? d : (b)[i] * mom + damp1 * d;                                         \
                (b)[i] = m;                                                                        \
                d = nesterov ? d + mom * m : m;                                                    \
                (x)[i] = (x)[i] + neg_lr * d;                                                      \
            }                                                                                      \
        }                                                                                          \
    } while (0)

/* 16-bit parameters: load to float, update, round back (state has the parameter's dtype). */
static void sgd_slow(sgd_ctx *c, int64_t lo, int64_t hi)
{
    size_t es = ddpl_dtype_size(c->dt);
    for (int64_t i = lo; i < hi; i++) {
        float x = (float)ddpl_load_f64(c->param + i * es, c->dt);
        float g = (float)ddpl_load_f64(c->grad + i * es, c->dt);
        float b = c->buf ? (float)ddpl_load_f64(c->buf + i * es, c->dt) : 0.0f;
        float *bp = c->buf ? &b : NULL;
        SGD_LOOP(float, (&x), bp, (&g), 0, 1, c->p); /* a one-element loop over the locals */
        ddpl_store_f64(c->param + i * es, c->dt, x);
        if (c->buf) ddpl_store_f64(c->buf + i * es, c->dt, b);
    }
}

static void sgd_range(int64_t lo, int64_t hi, void *ctx)
{
    sgd_ctx *c = ctx;
    if (c->dt == DDPL_FLOAT32)
        SGD_LOOP(float, (float *)c->param, (float *)c->buf, (const float *)c->grad, lo, hi, c->p);
    else if (c->dt == DDPL_FLOAT64)
        SGD_LOOP(double, (double *)c->param, (double *)c->buf, (const double *)c->grad, lo, hi,
                 c->p);
    else
        sgd_slow(c, lo, hi);
}

/* out[0] param, out[1] momentum buffer or NULL; in[0] grad; all contiguous, same shape. */
int cpu_sgd_step(ddpl_tensor **out, ddpl_tensor **in, const void *params)
{
    sgd_ctx c = {
        .p = params,
        .param = ddpl_data_ptr(out[0]),
        .buf = out[1] ? ddpl_data_ptr(out[1]) : NULL,
        .grad = ddpl_data_ptr(in[0]),
        .dt = (ddpl_dtype)out[0]->dtype,
    };
    cpu_parallel_for(ddpl_numel(out[0]->ndim, out[0]->sizes), CPU_GRAIN, sgd_range, &c);
    return 0;
}

typedef struct adam_ctx {
    const ddpl_adam_params *p;
    char *param, *m, *v;
    const char *grad;
    ddpl_dtype dt;
} adam_ctx;

/* torch 1.13 _single_tensor_adam (non-capturable), element by element:
 *   g = grad (+ wd*p, Adam) | p *= 1 - lr*wd (AdamW)
 *   m = m*beta1 + (1-beta1)*g;  v = v*beta2 + (1-beta2)*g*g
 *   p = p - step_size * m / (sqrt(v)/bc2_sqrt + eps) */
#define ADAM_LOOP(T, x, m, v, g, lo, hi, P)                                                        \
    do {                                                                                           \
        const T b1 = (T)(P)->h.beta1, b2 = (T)(P)->h.beta2;                                        \
        const T one_b1 = (T)(1.0 - (P)->h.beta1), one_b2 = (T)(1.0 - (P)->h.beta2);                \
        const T wd = (T)(P)->h.weight_decay, decay = (T)(P)->decay, eps = (T)(P)->h.eps;           \
        const T neg_step = (T)(-(P)->step_size), bc2 = (T)(P)->bc2_sqrt;                           \
        const T sign = (P)->h.maximize ? (T)-1 : (T)1;                                             \
        const bool decoupled = (P)->h.decoupled, has_wd = (P)->h.weight_decay != 0;                \
        _Pragma("omp simd") for (int64_t i = (lo); i < (hi); i++)                                  \
        {                                                                                          \
            T d = sign * (g)[i], p = (x)[i];                                                       \
            if (has_wd) {                                                                          \
                if (decoupled)                                                                     \
                    p = p * decay;                                                                 \
                else                                                                               \
                    d = d + wd * p;                                                                \
            }                                                                                      \
            T mi = (m)[i] * b1 + one_b1 * d;                                                       \
            T vi = (v)[i] * b2 + one_b2 * (d * d);                                                 \
            (m)[i] = mi;                                                                           \
            (v)[i] = vi;                                                                           \
            T denom = SQRT_##T(vi) / bc2 + eps;                                                    \
            (x)[i] = p + neg_step * (mi / denom);                                                  \
        }                                                                                          \
    } while (0)
#define SQRT_float  sqrtf
#define SQRT_double sqrt

static void adam_slow(adam_ctx *c, int64_t lo, int64_t hi)
{
    size_t es = ddpl_dtype_size(c->dt);
    for (int64_t i = lo; i < hi; i++) {
        float x = (float)ddpl_load_f64(c->param + i * es, c->dt);
        float g = (float)ddpl_load_f64(c->grad + i * es, c->dt);
        float m = (float)ddpl_load_f64(c->m + i * es, c->dt);
        float v = (float)ddpl_load_f64(c->v + i * es, c->dt);
        ADAM_LOOP(float, (&x), (&m), (&v), (&g), 0, 1, c->p); /* one element: the locals */
        ddpl_store_f64(c->param + i * es, c->dt, x);
        ddpl_store_f64(c->m + i * es, c->dt, m);
        ddpl_store_f64(c->v + i * es, c->dt, v);
    }
}

static void adam_range(int64_t lo, int64_t hi, void *ctx)
{
    adam_ctx *c = ctx;
    if (c->dt == DDPL_FLOAT32)
        ADAM_LOOP(float, (float *)c->param, (float *)c->m, (float *)c->v, (const float *)c->grad,
                  lo, hi, c->p);
    else if (c->dt == DDPL_FLOAT64)
        ADAM_LOOP(double, (double *)c->param, (double *)c->m, (double *)c->v,
                  (const double *)c->grad, lo, hi, c->p);
    else
        adam_slow(c, lo, hi);
}

/* out[0] param, out[1] exp_avg, out[2] exp_avg_sq; in[0] grad; all contiguous, same shape. */
int cpu_adam_step(ddpl_tensor **out, ddpl_tensor **in, const void *params)
{
    adam_ctx c = {
        .p = params,
        .param = ddpl_data_ptr(out[0]),
        .m = ddpl_data_ptr(out[1]),
        .v = ddpl_data_ptr(out[2]),
        .grad = ddpl_data_ptr(in[0]),
        .dt = (ddpl_dtype)out[0]->dtype,
    };
    cpu_parallel_for(ddpl_numel(out[0]->ndim, out[0]->sizes), CPU_GRAIN, adam_range, &c);
    return 0;
}
