/* cpu/cpu_optim.c: fused per-tensor optimizer updates on the CPU.
 * defines: cpu_sgd_step, cpu_adam_step, cpu_rmsprop_step, cpu_adagrad_step, cpu_amp_unscale
 *          (ops.def SGD_STEP, ADAM_STEP, RMSPROP_STEP, ADAGRAD_STEP, AMP_UNSCALE).
 *
 * One pass over contiguous tensors: each element's update reads param, grad and state once and
 * writes them once, where PyTorch's single-tensor loop makes 4 to 8 passes. The arithmetic is
 * PyTorch's, step by step, in the tensor's own precision (float32 for float32; float for the
 * 16-bit types, which round back on store), with the Python-float hyperparameters rounded to
 * that precision as PyTorch's CPU kernels do. Large tensors are split over OpenMP threads. */
#include <math.h>
#include <stdatomic.h>

#include "cpu_iter.h"
#include "cpu_kernels.h"
#include "cpu_loops.h"
#include "kernel_abi/optim_params.h"

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
    char *param, *m, *v, *vmax; /* vmax: max_exp_avg_sq, NULL without amsgrad */
    const char *grad;
    ddpl_dtype dt;
} adam_ctx;

/* torch 1.13 _single_tensor_adam (non-capturable), element by element:
 *   g = grad (+ wd*p, Adam) | p *= 1 - lr*wd (AdamW)
 *   m = m*beta1 + (1-beta1)*g;  v = v*beta2 + (1-beta2)*g*g
 *   amsgrad: vmax = max(vmax, v) (NaN wins, as torch.maximum), used in place of v below
 *   p = p - step_size * m / (sqrt(v)/bc2_sqrt + eps) */
#define ADAM_LOOP(T, x, m, v, vmax, g, lo, hi, P)                                                  \
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
            if (vmax) {                                                                            \
                const T old = (vmax)[i];                                                           \
                vi = (old < vi || vi != vi) ? vi : old;                                            \
                (vmax)[i] = vi;                                                                    \
            }                                                                                      \
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
        float vmax = c->vmax ? (float)ddpl_load_f64(c->vmax + i * es, c->dt) : 0.0f;
        float *vmaxp = c->vmax ? &vmax : NULL;
        ADAM_LOOP(float, (&x), (&m), (&v), vmaxp, (&g), 0, 1, c->p); /* one element: the locals */
        ddpl_store_f64(c->param + i * es, c->dt, x);
        ddpl_store_f64(c->m + i * es, c->dt, m);
        ddpl_store_f64(c->v + i * es, c->dt, v);
        if (c->vmax) ddpl_store_f64(c->vmax + i * es, c->dt, vmax);
    }
}

/* Compiled for AVX-512 too (CPU_LOOP_CLONES): a sqrt and a division per element. */
CPU_LOOP_CLONES static void adam_range(int64_t lo, int64_t hi, void *ctx)
{
    adam_ctx *c = ctx;
    if (c->dt == DDPL_FLOAT32)
        ADAM_LOOP(float, (float *)c->param, (float *)c->m, (float *)c->v, (float *)c->vmax,
                  (const float *)c->grad, lo, hi, c->p);
    else if (c->dt == DDPL_FLOAT64)
        ADAM_LOOP(double, (double *)c->param, (double *)c->m, (double *)c->v, (double *)c->vmax,
                  (const double *)c->grad, lo, hi, c->p);
    else
        adam_slow(c, lo, hi);
}

/* out[0] param, out[1] exp_avg, out[2] exp_avg_sq, out[3] max_exp_avg_sq or NULL; in[0] grad;
 * all contiguous, same shape. */
int cpu_adam_step(ddpl_tensor **out, ddpl_tensor **in, const void *params)
{
    adam_ctx c = {
        .p = params,
        .param = ddpl_data_ptr(out[0]),
        .m = ddpl_data_ptr(out[1]),
        .v = ddpl_data_ptr(out[2]),
        .vmax = out[3] ? ddpl_data_ptr(out[3]) : NULL,
        .grad = ddpl_data_ptr(in[0]),
        .dt = (ddpl_dtype)out[0]->dtype,
    };
    cpu_parallel_for(ddpl_numel(out[0]->ndim, out[0]->sizes), CPU_GRAIN, adam_range, &c);
    return 0;
}

typedef struct rmsprop_ctx {
    const ddpl_rmsprop_params *p;
    char *param, *sq, *buf, *gavg; /* buf: momentum_buffer or NULL; gavg: grad_avg or NULL */
    const char *grad;
    ddpl_dtype dt;
} rmsprop_ctx;

/* torch 1.13 _single_tensor_rmsprop, element by element, with ATen's order of operations
 * (add: a + alpha*b; addcmul: a + value*b*c; addcdiv: a + value*b/c):
 *   g = grad (+ wd*p);  sq = sq*alpha + (1-alpha)*g*g
 *   centered: ga = ga*alpha + (1-alpha)*g;  avg = sqrt(sq - ga*ga) + eps
 *   else:     avg = sqrt(sq) + eps
 *   momentum > 0: buf = buf*momentum + g/avg;  p = p - lr*buf
 *   else:         p = p - lr*g/avg */
#define RMSPROP_LOOP(T, x, sq, buf, gavg, g, lo, hi, P)                                            \
    do {                                                                                           \
        const T alpha = (T)(P)->h.alpha, one_alpha = (T)(1.0 - (P)->h.alpha);                      \
        const T wd = (T)(P)->h.weight_decay, mom = (T)(P)->h.momentum, eps = (T)(P)->h.eps;        \
        const T neg_lr = (T)(-(P)->h.lr), sign = (P)->h.maximize ? (T)-1 : (T)1;                   \
        const bool has_wd = (P)->h.weight_decay != 0;                                              \
        _Pragma("omp simd") for (int64_t i = (lo); i < (hi); i++)                                  \
        {                                                                                          \
            T d = sign * (g)[i], p = (x)[i];                                                       \
            if (has_wd) d = d + wd * p;                                                            \
            const T new_sq = (sq)[i] * alpha + one_alpha * d * d;                                  \
            (sq)[i] = new_sq;                                                                      \
            T avg;                                                                                 \
            if (gavg) {                                                                            \
                const T new_ga = (gavg)[i] * alpha + one_alpha * d;                                \
                (gavg)[i] = new_ga;                                                                \
                avg = SQRT_##T(new_sq + (T)-1 * new_ga * new_ga);                                  \
            } else {                                                                               \
                avg = SQRT_##T(new_sq);                                                            \
            }                                                                                      \
            avg = avg + eps;                                                                       \
            if (buf) {                                                                             \
                const T new_buf = (buf)[i] * mom + d / avg;                                        \
                (buf)[i] = new_buf;                                                                \
                (x)[i] = p + neg_lr * new_buf;                                                     \
            } else {                                                                               \
                (x)[i] = p + neg_lr * d / avg;                                                     \
            }                                                                                      \
        }                                                                                          \
    } while (0)

static void rmsprop_slow(rmsprop_ctx *c, int64_t lo, int64_t hi)
{
    size_t es = ddpl_dtype_size(c->dt);
    for (int64_t i = lo; i < hi; i++) {
        float x = (float)ddpl_load_f64(c->param + i * es, c->dt);
        float g = (float)ddpl_load_f64(c->grad + i * es, c->dt);
        float sq = (float)ddpl_load_f64(c->sq + i * es, c->dt);
        float b = c->buf ? (float)ddpl_load_f64(c->buf + i * es, c->dt) : 0.0f;
        float a = c->gavg ? (float)ddpl_load_f64(c->gavg + i * es, c->dt) : 0.0f;
        float *bp = c->buf ? &b : NULL, *ap = c->gavg ? &a : NULL;
        RMSPROP_LOOP(float, (&x), (&sq), bp, ap, (&g), 0, 1, c->p); /* one element: the locals */
        ddpl_store_f64(c->param + i * es, c->dt, x);
        ddpl_store_f64(c->sq + i * es, c->dt, sq);
        if (c->buf) ddpl_store_f64(c->buf + i * es, c->dt, b);
        if (c->gavg) ddpl_store_f64(c->gavg + i * es, c->dt, a);
    }
}

static void rmsprop_range(int64_t lo, int64_t hi, void *ctx)
{
    rmsprop_ctx *c = ctx;
    if (c->dt == DDPL_FLOAT32)
        RMSPROP_LOOP(float, (float *)c->param, (float *)c->sq, (float *)c->buf, (float *)c->gavg,
                     (const float *)c->grad, lo, hi, c->p);
    else if (c->dt == DDPL_FLOAT64)
        RMSPROP_LOOP(double, (double *)c->param, (double *)c->sq, (double *)c->buf,
                     (double *)c->gavg, (const double *)c->grad, lo, hi, c->p);
    else
        rmsprop_slow(c, lo, hi);
}

/* out[0] param, out[1] square_avg, out[2] momentum_buffer or NULL, out[3] grad_avg or NULL;
 * in[0] grad; all contiguous, same shape. */
int cpu_rmsprop_step(ddpl_tensor **out, ddpl_tensor **in, const void *params)
{
    rmsprop_ctx c = {
        .p = params,
        .param = ddpl_data_ptr(out[0]),
        .sq = ddpl_data_ptr(out[1]),
        .buf = out[2] ? ddpl_data_ptr(out[2]) : NULL,
        .gavg = out[3] ? ddpl_data_ptr(out[3]) : NULL,
        .grad = ddpl_data_ptr(in[0]),
        .dt = (ddpl_dtype)out[0]->dtype,
    };
    cpu_parallel_for(ddpl_numel(out[0]->ndim, out[0]->sizes), CPU_GRAIN, rmsprop_range, &c);
    return 0;
}

typedef struct adagrad_ctx {
    const ddpl_adagrad_params *p;
    char *param, *sum;
    const char *grad;
    ddpl_dtype dt;
} adagrad_ctx;

/* torch 1.13 _single_tensor_adagrad (dense), element by element:
 *   g = grad (+ wd*p);  sum = sum + g*g;  p = p - clr*g / (sqrt(sum) + eps) */
#define ADAGRAD_LOOP(T, x, sum, g, lo, hi, P)                                                      \
    do {                                                                                           \
        const T wd = (T)(P)->h.weight_decay, eps = (T)(P)->h.eps, neg_clr = (T)(-(P)->clr);        \
        const T sign = (P)->h.maximize ? (T)-1 : (T)1;                                             \
        const bool has_wd = (P)->h.weight_decay != 0;                                              \
        _Pragma("omp simd") for (int64_t i = (lo); i < (hi); i++)                                  \
        {                                                                                          \
            T d = sign * (g)[i], p = (x)[i];                                                       \
            if (has_wd) d = d + wd * p;                                                            \
            const T new_sum = (sum)[i] + d * d;                                                    \
            (sum)[i] = new_sum;                                                                    \
            (x)[i] = p + neg_clr * d / (SQRT_##T(new_sum) + eps);                                  \
        }                                                                                          \
    } while (0)

static void adagrad_slow(adagrad_ctx *c, int64_t lo, int64_t hi)
{
    size_t es = ddpl_dtype_size(c->dt);
    for (int64_t i = lo; i < hi; i++) {
        float x = (float)ddpl_load_f64(c->param + i * es, c->dt);
        float g = (float)ddpl_load_f64(c->grad + i * es, c->dt);
        float s = (float)ddpl_load_f64(c->sum + i * es, c->dt);
        ADAGRAD_LOOP(float, (&x), (&s), (&g), 0, 1, c->p); /* one element: the locals */
        ddpl_store_f64(c->param + i * es, c->dt, x);
        ddpl_store_f64(c->sum + i * es, c->dt, s);
    }
}

static void adagrad_range(int64_t lo, int64_t hi, void *ctx)
{
    adagrad_ctx *c = ctx;
    if (c->dt == DDPL_FLOAT32)
        ADAGRAD_LOOP(float, (float *)c->param, (float *)c->sum, (const float *)c->grad, lo, hi,
                     c->p);
    else if (c->dt == DDPL_FLOAT64)
        ADAGRAD_LOOP(double, (double *)c->param, (double *)c->sum, (const double *)c->grad, lo, hi,
                     c->p);
    else
        adagrad_slow(c, lo, hi);
}

/* out[0] param, out[1] sum; in[0] grad; all contiguous, same shape. */
int cpu_adagrad_step(ddpl_tensor **out, ddpl_tensor **in, const void *params)
{
    adagrad_ctx c = {
        .p = params,
        .param = ddpl_data_ptr(out[0]),
        .sum = ddpl_data_ptr(out[1]),
        .grad = ddpl_data_ptr(in[0]),
        .dt = (ddpl_dtype)out[0]->dtype,
    };
    cpu_parallel_for(ddpl_numel(out[0]->ndim, out[0]->sizes), CPU_GRAIN, adagrad_range, &c);
    return 0;
}

typedef struct unscale_ctx {
    double inv_scale;
    char *grad;
    ddpl_dtype dt;
    atomic_bool found; /* any chunk saw an inf or NaN */
} unscale_ctx;

/* grad *= inv (skipped when inv is 1, as PyTorch's kernel); any non-finite element sets bad. */
#define UNSCALE_LOOP(T, grad, inv, lo, hi, bad)                                                    \
    do {                                                                                           \
        const T s = (T)(inv);                                                                      \
        const bool scale = (inv) != 1.0;                                                           \
        _Pragma("omp simd reduction(|:bad)") for (int64_t i = (lo); i < (hi); i++)                 \
        {                                                                                          \
            const T v = (grad)[i];                                                                 \
            bad |= !isfinite(v);                                                                   \
            if (scale) (grad)[i] = v * s;                                                          \
        }                                                                                          \
    } while (0)

static void unscale_range(int64_t lo, int64_t hi, void *ctx)
{
    unscale_ctx *c = ctx;
    int bad = 0;
    if (c->dt == DDPL_FLOAT32) {
        UNSCALE_LOOP(float, (float *)c->grad, c->inv_scale, lo, hi, bad);
    } else if (c->dt == DDPL_FLOAT64) {
        UNSCALE_LOOP(double, (double *)c->grad, c->inv_scale, lo, hi, bad);
    } else { /* 16-bit: in float, rounded back */
        size_t es = ddpl_dtype_size(c->dt);
        for (int64_t i = lo; i < hi; i++) {
            float v = (float)ddpl_load_f64(c->grad + i * es, c->dt);
            bad |= !isfinite(v);
            if (c->inv_scale != 1.0)
                ddpl_store_f64(c->grad + i * es, c->dt, v * (float)c->inv_scale);
        }
    }
    if (bad) atomic_store(&c->found, true);
}

/* out[0] grad (unscaled in place), out[1] found_inf (one float32, set to 1 on inf/NaN). */
int cpu_amp_unscale(ddpl_tensor **out, ddpl_tensor **in, const void *params)
{
    (void)in;
    unscale_ctx c = {
        .inv_scale = ((const ddpl_unscale_params *)params)->inv_scale,
        .grad = ddpl_data_ptr(out[0]),
        .dt = (ddpl_dtype)out[0]->dtype,
    };
    atomic_init(&c.found, false);
    cpu_parallel_for(ddpl_numel(out[0]->ndim, out[0]->sizes), CPU_GRAIN, unscale_range, &c);
    if (atomic_load(&c.found)) *(float *)ddpl_data_ptr(out[1]) = 1.0f;
    return 0;
}
