/* cpu/cpu_loops.h: macros that stamp out the typed inner loops of the pointwise CPU kernels.
 * defines: BINARY_LOOP, UNARY_LOOP, GENERIC_BINARY_LOOP, GENERIC_UNARY_LOOP, cpu_loop_ctx,
 *          cpu_loop_set, cpu_run_pointwise (in cpu_pointwise.c), CPU_LOOP_CLONES.
 *
 * A loop has the cpu_loop_fn signature (cpu_iter.h): data[k] and strides[k] (bytes) describe
 * operand k along one inner segment of n elements; operand 0 is the output. The typed loops
 * take a contiguous path (and, for binary ops, contiguous-with-scalar paths) written as plain
 * indexed loops that GCC vectorises to AVX2; everything else takes a strided path.
 *
 * No `restrict`: in-place ops pass the same pointer as output and input. `GCC ivdep` tells the
 * vectoriser there is no loop-carried dependence, which holds because the ops layer only ever
 * lets operands be identical or disjoint (partial overlaps are copied away first). */
#ifndef DDPL_CPU_LOOPS_H
#define DDPL_CPU_LOOPS_H

#include "cpu_iter.h"

/* Parameters every pointwise loop can see: scalars of the op in the three compute types, and
 * the dtypes the generic (float16, bfloat16, small integer) loops convert from and to. */
typedef struct cpu_loop_ctx {
    double p0, p1;     /* op scalars: alpha; clamp min and max (+-inf when absent) */
    float p0f, p1f;    /* the same as float, for float32 loops */
    int64_t p0i, p1i;  /* the same as int64, for integer loops */
    ddpl_dtype in_dt;  /* compute dtype of the inputs */
    ddpl_dtype out_dt; /* dtype of the output */
} cpu_loop_ctx;

#define CPU_PRAGMA_IVDEP _Pragma("GCC ivdep")

/* The typed loops are compiled twice on x86-64, for the build's baseline (AVX2) and for
 * x86-64-v4 (AVX-512), and the loader picks one (an ifunc): the transcendental activations are
 * compute-bound, and 16 lanes make GELU about 1.4x faster than 8 on Zen 4. */
/* Not under ThreadSanitizer: the loader runs the ifunc resolvers before TSan is initialised, and
 * their instrumentation crashes the program at start. */
#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__) && defined(__AVX2__) &&        \
    !defined(__SANITIZE_THREAD__)
#define CPU_LOOP_CLONES __attribute__((target_clones("arch=x86-64-v4", "default")))
#else
#define CPU_LOOP_CLONES
#endif

/* Loads element i of operand k as type T (strided). */
#define LD(T, k, i) (*(const T *)(d[k] + (i)*s[k]))

/* out[i] = EXPR with `a` and `b` (type TI) in scope; output type TO. P0/P1 name the ctx
 * scalars of the loop's type (p0f/p1f, p0/p1 or p0i/p1i), visible to EXPR as p0 and p1. */
#define BINARY_LOOP(NAME, TI, TO, P0, P1, EXPR)                                                    \
    CPU_LOOP_CLONES static void NAME(char **d, const int64_t *s, int64_t n, void *ctx_)            \
    {                                                                                              \
        const cpu_loop_ctx *ctx = ctx_;                                                            \
        const TI p0 = (TI)ctx->P0, p1 = (TI)ctx->P1;                                               \
        (void)p0, (void)p1, (void)ctx;                                                             \
        const int64_t ei = (int64_t)sizeof(TI), eo = (int64_t)sizeof(TO);                          \
        TO *o = (TO *)d[0];                                                                        \
        const TI *x = (const TI *)d[1], *y = (const TI *)d[2];                                     \
        if (s[0] == eo && s[1] == ei && s[2] == ei) {                                              \
            CPU_PRAGMA_IVDEP for (int64_t i = 0; i < n; i++)                                       \
            {                                                                                      \
                TI a = x[i], b = y[i];                                                             \
                (void)a, (void)b;                                                                  \
                o[i] = (TO)(EXPR);                                                                 \
            }                                                                                      \
        } else if (s[0] == eo && s[1] == ei && s[2] == 0) {                                        \
            const TI b = y[0];                                                                     \
            CPU_PRAGMA_IVDEP for (int64_t i = 0; i < n; i++)                                       \
            {                                                                                      \
                TI a = x[i];                                                                       \
                (void)a, (void)b;                                                                  \
                o[i] = (TO)(EXPR);                                                                 \
            }                                                                                      \
        } else if (s[0] == eo && s[1] == 0 && s[2] == ei) {                                        \
            const TI a = x[0];                                                                     \
            CPU_PRAGMA_IVDEP for (int64_t i = 0; i < n; i++)                                       \
            {                                                                                      \
                TI b = y[i];                                                                       \
                (void)a, (void)b;                                                                  \
                o[i] = (TO)(EXPR);                                                                 \
            }                                                                                      \
        } else {                                                                                   \
            for (int64_t i = 0; i < n; i++) {                                                      \
                TI a = LD(TI, 1, i), b = LD(TI, 2, i);                                             \
                (void)a, (void)b;                                                                  \
                *(TO *)(d[0] + i * s[0]) = (TO)(EXPR);                                             \
            }                                                                                      \
        }                                                                                          \
    }

/* out[i] = EXPR with `a` (type TI) in scope. */
#define UNARY_LOOP(NAME, TI, TO, P0, P1, EXPR)                                                     \
    CPU_LOOP_CLONES static void NAME(char **d, const int64_t *s, int64_t n, void *ctx_)            \
    {                                                                                              \
        const cpu_loop_ctx *ctx = ctx_;                                                            \
        const TI p0 = (TI)ctx->P0, p1 = (TI)ctx->P1;                                               \
        (void)p0, (void)p1, (void)ctx;                                                             \
        const int64_t ei = (int64_t)sizeof(TI), eo = (int64_t)sizeof(TO);                          \
        TO *o = (TO *)d[0];                                                                        \
        const TI *x = (const TI *)d[1];                                                            \
        if (s[0] == eo && s[1] == ei) {                                                            \
            CPU_PRAGMA_IVDEP for (int64_t i = 0; i < n; i++)                                       \
            {                                                                                      \
                TI a = x[i];                                                                       \
                o[i] = (TO)(EXPR);                                                                 \
            }                                                                                      \
        } else {                                                                                   \
            for (int64_t i = 0; i < n; i++) {                                                      \
                TI a = LD(TI, 1, i);                                                               \
                *(TO *)(d[0] + i * s[0]) = (TO)(EXPR);                                             \
            }                                                                                      \
        }                                                                                          \
    }

/* Any dtype through the slow element accessors: integer compute dtypes through int64 (exact),
 * floating ones (float16, bfloat16) through float. FEXPR/IEXPR see `a`, `b`, `p0`, `p1`. */
#define GENERIC_BINARY_LOOP(NAME, FEXPR, IEXPR)                                                    \
    static void NAME(char **d, const int64_t *s, int64_t n, void *ctx_)                            \
    {                                                                                              \
        const cpu_loop_ctx *ctx = ctx_;                                                            \
        ddpl_dtype it = ctx->in_dt, ot = ctx->out_dt;                                              \
        if (ddpl_dtype_is_integral(it)) {                                                          \
            const int64_t p0 = ctx->p0i, p1 = ctx->p1i;                                            \
            (void)p0, (void)p1;                                                                    \
            for (int64_t i = 0; i < n; i++) {                                                      \
                int64_t a = ddpl_load_i64(d[1] + i * s[1], it);                                    \
                int64_t b = ddpl_load_i64(d[2] + i * s[2], it);                                    \
                (void)a, (void)b;                                                                  \
                ddpl_store_i64(d[0] + i * s[0], ot, (int64_t)(IEXPR));                             \
            }                                                                                      \
        } else {                                                                                   \
            const float p0 = ctx->p0f, p1 = ctx->p1f;                                              \
            (void)p0, (void)p1;                                                                    \
            for (int64_t i = 0; i < n; i++) {                                                      \
                float a = (float)ddpl_load_f64(d[1] + i * s[1], it);                               \
                float b = (float)ddpl_load_f64(d[2] + i * s[2], it);                               \
                (void)a, (void)b;                                                                  \
                ddpl_store_f64(d[0] + i * s[0], ot, (double)(FEXPR));                              \
            }                                                                                      \
        }                                                                                          \
    }

#define GENERIC_UNARY_LOOP(NAME, FEXPR, IEXPR)                                                     \
    static void NAME(char **d, const int64_t *s, int64_t n, void *ctx_)                            \
    {                                                                                              \
        const cpu_loop_ctx *ctx = ctx_;                                                            \
        ddpl_dtype it = ctx->in_dt, ot = ctx->out_dt;                                              \
        if (ddpl_dtype_is_integral(it)) {                                                          \
            const int64_t p0 = ctx->p0i, p1 = ctx->p1i;                                            \
            (void)p0, (void)p1;                                                                    \
            for (int64_t i = 0; i < n; i++) {                                                      \
                int64_t a = ddpl_load_i64(d[1] + i * s[1], it);                                    \
                ddpl_store_i64(d[0] + i * s[0], ot, (int64_t)(IEXPR));                             \
            }                                                                                      \
        } else {                                                                                   \
            const float p0 = ctx->p0f, p1 = ctx->p1f;                                              \
            (void)p0, (void)p1;                                                                    \
            for (int64_t i = 0; i < n; i++) {                                                      \
                float a = (float)ddpl_load_f64(d[1] + i * s[1], it);                               \
                ddpl_store_f64(d[0] + i * s[0], ot, (double)(FEXPR));                              \
            }                                                                                      \
        }                                                                                          \
    }

/* The four loops of one kernel, picked by the compute dtype (NULL: dtype not supported). */
typedef struct cpu_loop_set {
    cpu_loop_fn f32, f64, i64, generic;
} cpu_loop_set;

/* Runs the right loop of set over out[0] and the inputs (nin of them); -1 with an error naming
 * op when the set has no loop for the dtype. */
int cpu_run_pointwise(const char *op, const cpu_loop_set *set, ddpl_tensor **out, int nin,
                      ddpl_tensor **in, cpu_loop_ctx *ctx);

#endif
