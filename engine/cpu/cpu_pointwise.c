/* cpu/cpu_pointwise.c: binary pointwise CPU kernels (arithmetic, comparisons, where) and the
 * runner every pointwise kernel goes through.
 * defines: cpu_run_pointwise, cpu_add, cpu_sub, cpu_mul, cpu_div, cpu_pow, cpu_maximum,
 *          cpu_minimum, cpu_eq, cpu_ne, cpu_lt, cpu_le, cpu_gt, cpu_ge, cpu_where.
 *
 * Inputs arrive broadcast to the output's shape and converted to the compute dtype (ops.def);
 * float32, float64 and int64 run typed loops, other dtypes the generic loop (float16/bfloat16
 * computed in float, small integers and bool in int64). Integer arithmetic wraps around as in
 * PyTorch (computed in uint64 so that overflow is defined behaviour). */
#include <math.h>

#include "cpu_kernels.h"
#include "cpu_loops.h"
#include "kernel_abi/kernel_params.h"

/* ---- 16-bit floats through the float32 loops ----
 * A float16/bfloat16 op computes in float32 and rounds once, as PyTorch's CPU kernels do. The
 * typed float32 loop does that arithmetic; this adapter feeds it blocks of WIDEN_BLOCK elements
 * widened into stack buffers (a broadcast scalar stays one element, stride 0, so the loop's
 * scalar paths still apply) and rounds its float32 results into a 16-bit output. Operands of
 * other dtypes (a bool condition, a bool or int64 output) pass through untouched. Same values
 * as the generic loop (float arithmetic, one rounding), vectorised. */
enum { WIDEN_BLOCK = 256 };

typedef struct {
    cpu_loop_ctx base; /* first: the float32 loop reads its context as a cpu_loop_ctx */
    cpu_loop_fn f32;
    int nops;
    ddpl_dtype dt[CPU_ITER_MAX_OPS]; /* each operand's dtype, output first */
} widen_ctx;

static bool is_16bit_float(ddpl_dtype dt)
{
    return dt == DDPL_FLOAT16 || dt == DDPL_BFLOAT16;
}

static void widen_block(float *restrict dst, const char *src, int64_t stride, int64_t n,
                        ddpl_dtype dt)
{
    if (dt == DDPL_BFLOAT16 && stride == 2) {
        cpu_bf16_to_float(dst, (const uint16_t *)src, n);
    } else if (dt == DDPL_BFLOAT16) {
        for (int64_t i = 0; i < n; i++)
            dst[i] = ddpl_bf16_to_float(*(const uint16_t *)(src + i * stride));
    } else {
        for (int64_t i = 0; i < n; i++)
            dst[i] = ddpl_half_to_float(*(const uint16_t *)(src + i * stride));
    }
}

static void narrow_block(char *dst, int64_t stride, const float *restrict src, int64_t n,
                         ddpl_dtype dt)
{
    if (dt == DDPL_BFLOAT16 && stride == 2) {
        cpu_float_to_bf16((uint16_t *)dst, src, n);
    } else if (dt == DDPL_BFLOAT16) {
        for (int64_t i = 0; i < n; i++)
            *(uint16_t *)(dst + i * stride) = ddpl_float_to_bf16(src[i]);
    } else {
        for (int64_t i = 0; i < n; i++)
            *(uint16_t *)(dst + i * stride) = ddpl_float_to_half(src[i]);
    }
}

static void widened_loop(char **d, const int64_t *s, int64_t n, void *ctx_)
{
    widen_ctx *w = ctx_;
    float buf[CPU_ITER_MAX_OPS][WIDEN_BLOCK];
    char *dd[CPU_ITER_MAX_OPS];
    int64_t ss[CPU_ITER_MAX_OPS];
    bool narrow_out = is_16bit_float(w->dt[0]);
    for (int64_t i0 = 0; i0 < n; i0 += WIDEN_BLOCK) {
        int64_t m = n - i0 < WIDEN_BLOCK ? n - i0 : WIDEN_BLOCK;
        for (int k = 0; k < w->nops; k++) {
            bool wide = k == 0 ? narrow_out : is_16bit_float(w->dt[k]);
            if (!wide) {
                dd[k] = d[k] + i0 * s[k];
                ss[k] = s[k];
            } else {
                dd[k] = (char *)buf[k];
                ss[k] = k > 0 && s[k] == 0 ? 0 : (int64_t)sizeof(float);
                if (k > 0) widen_block(buf[k], d[k] + i0 * s[k], s[k], ss[k] ? m : 1, w->dt[k]);
            }
        }
        w->f32(dd, ss, m, &w->base);
        if (narrow_out) narrow_block(d[0] + i0 * s[0], s[0], buf[0], m, w->dt[0]);
    }
}

int cpu_run_pointwise(const char *op, const cpu_loop_set *set, ddpl_tensor **out, int nin,
                      ddpl_tensor **in, cpu_loop_ctx *ctx)
{
    ddpl_dtype dt = (ddpl_dtype)in[0]->dtype;
    cpu_loop_fn fn = dt == DDPL_FLOAT32   ? set->f32
                     : dt == DDPL_FLOAT64 ? set->f64
                     : dt == DDPL_INT64   ? set->i64
                                          : NULL;
    if (!fn) fn = set->generic;
    if (!fn || (ddpl_dtype_is_integral(dt) && !set->i64))
        return ddpl_error("%s: not implemented for dtype %s", op, ddpl_dtype_name(dt));
    ctx->in_dt = dt;
    ctx->out_dt = (ddpl_dtype)out[0]->dtype;
    ddpl_tensor *ops[CPU_ITER_MAX_OPS] = {out[0]};
    for (int k = 0; k < nin; k++) ops[k + 1] = in[k];
    widen_ctx w;
    if (is_16bit_float(dt) && set->f32) {
        w.base = *ctx;
        w.f32 = set->f32;
        w.nops = nin + 1;
        for (int k = 0; k <= nin; k++) w.dt[k] = (ddpl_dtype)ops[k]->dtype;
        fn = widened_loop;
        ctx = &w.base;
    }
    cpu_iter it;
    cpu_iter_init(&it, nin + 1, ops);
    cpu_iter_run(&it, fn, ctx);
    return 0;
}

/* Integer power by squaring; negative exponents give 0 except for bases 1 and -1, as
 * PyTorch's integer pow does. */
static inline int64_t ipow(int64_t a, int64_t b)
{
    if (b < 0) return a == 1 ? 1 : a == -1 ? ((b & 1) ? -1 : 1) : 0;
    uint64_t r = 1, base = (uint64_t)a;
    while (b) {
        if (b & 1) r *= base;
        base *= base;
        b >>= 1;
    }
    return (int64_t)r;
}

#define U64(v) ((uint64_t)(v))
/* NaN-propagating max/min: a NaN on either side wins, as torch.maximum does. */
#define FMAX(a, b) (((a) != (a) || (a) > (b)) ? (a) : (b))
#define FMIN(a, b) (((a) != (a) || (a) < (b)) ? (a) : (b))
/* x^2 is the common case (squares in losses and norms): a multiply, which the scalar-exponent
 * loop unswitches into vectorised code, instead of a libm call per element */
#define POW(a, b) ((b) == 2 ? (a) * (a) : _Generic((a), float : powf, default : pow)((a), (b)))

/* Fills the loop context from an optional ddpl_alpha_params block (add and sub's alpha). */
static void alpha_ctx(cpu_loop_ctx *ctx, const void *params)
{
    const ddpl_alpha_params *ap = params;
    double alpha = ap ? ap->alpha : 1.0;
    *ctx = (cpu_loop_ctx){.p0 = alpha, .p0f = (float)alpha, .p0i = ddpl_f64_to_i64(alpha)};
}

/* One kernel: typed float32/float64/int64 loops, the generic loop, and cpu_<name>. TO is the
 * output type of the typed loops (SELF: the input type). HAS_INT 0 marks ops that the ops
 * layer always computes in a floating dtype (div): their integer loops are never selected. */
#define BINARY_KERNEL_TO(name, FEXPR, IEXPR, TO32, TO64, TOI, HAS_INT)                             \
    BINARY_LOOP(name##_f32, float, TO32, p0f, p1f, FEXPR)                                          \
    BINARY_LOOP(name##_f64, double, TO64, p0, p1, FEXPR)                                           \
    BINARY_LOOP(name##_i64, int64_t, TOI, p0i, p1i, IEXPR)                                         \
    GENERIC_BINARY_LOOP(name##_any, FEXPR, IEXPR)                                                  \
    int cpu_##name(ddpl_tensor **out, ddpl_tensor **in, const void *params)                        \
    {                                                                                              \
        static const cpu_loop_set set = {name##_f32, name##_f64, HAS_INT ? name##_i64 : NULL,      \
                                         name##_any};                                              \
        cpu_loop_ctx ctx;                                                                          \
        alpha_ctx(&ctx, params);                                                                   \
        return cpu_run_pointwise(#name, &set, out, 2, in, &ctx);                                   \
    }
#define BINARY_KERNEL(name, FEXPR, IEXPR, HAS_INT)                                                 \
    BINARY_KERNEL_TO(name, FEXPR, IEXPR, float, double, int64_t, HAS_INT)
/* comparisons write bool (one byte, 0 or 1) */
#define COMPARE_KERNEL(name, EXPR) BINARY_KERNEL_TO(name, EXPR, EXPR, uint8_t, uint8_t, uint8_t, 1)

/* p0 is alpha (add, sub); the other kernels ignore it */
BINARY_KERNEL(add, a + p0 * b, U64(a) + U64(p0) * U64(b), 1)
BINARY_KERNEL(sub, a - p0 * b, U64(a) - U64(p0) * U64(b), 1)
BINARY_KERNEL(mul, a *b, U64(a) * U64(b), 1)
BINARY_KERNEL(div, a / b, 0, 0)
BINARY_KERNEL(pow, POW(a, b), ipow(a, b), 1)
BINARY_KERNEL(maximum, FMAX(a, b), (a > b ? a : b), 1)
BINARY_KERNEL(minimum, FMIN(a, b), (a < b ? a : b), 1)
COMPARE_KERNEL(eq, a == b)
COMPARE_KERNEL(ne, a != b)
COMPARE_KERNEL(lt, a < b)
COMPARE_KERNEL(le, a <= b)
COMPARE_KERNEL(gt, a > b)
COMPARE_KERNEL(ge, a >= b)

/* ---- where: out <- cond ? x : y; a byte-wise select, so one loop per element size serves
 * every dtype ---- */
#define WHERE_LOOP(NAME, T)                                                                        \
    static void NAME(char **d, const int64_t *s, int64_t n, void *ctx)                             \
    {                                                                                              \
        (void)ctx;                                                                                 \
        const int64_t e = (int64_t)sizeof(T);                                                      \
        if (s[0] == e && s[1] == 1 && s[2] == e && s[3] == e) {                                    \
            T *o = (T *)d[0];                                                                      \
            const uint8_t *c = (const uint8_t *)d[1];                                              \
            const T *x = (const T *)d[2], *y = (const T *)d[3];                                    \
            CPU_PRAGMA_IVDEP for (int64_t i = 0; i < n; i++) o[i] = c[i] ? x[i] : y[i];            \
        } else if (s[0] == e && s[1] == 1 && s[2] == 0 && s[3] == e) {                             \
            /* masked_fill: a scalar x (nansum's zeroing, attention masks); strided, this was      \
             * 7x slower than the select */                                                        \
            T *o = (T *)d[0];                                                                      \
            const uint8_t *c = (const uint8_t *)d[1];                                              \
            const T xv = *(const T *)d[2], *y = (const T *)d[3];                                   \
            CPU_PRAGMA_IVDEP for (int64_t i = 0; i < n; i++) o[i] = c[i] ? xv : y[i];              \
        } else {                                                                                   \
            for (int64_t i = 0; i < n; i++)                                                        \
                *(T *)(d[0] + i * s[0]) = LD(uint8_t, 1, i) ? LD(T, 2, i) : LD(T, 3, i);           \
        }                                                                                          \
    }
WHERE_LOOP(where_1, uint8_t)
WHERE_LOOP(where_2, uint16_t)
WHERE_LOOP(where_4, uint32_t)
WHERE_LOOP(where_8, uint64_t)

int cpu_where(ddpl_tensor **out, ddpl_tensor **in, const void *params)
{
    DDPL_UNUSED(params);
    ddpl_tensor *ops[4] = {out[0], in[0], in[1], in[2]};
    cpu_iter it;
    cpu_iter_init(&it, 4, ops);
    switch (ddpl_dtype_size((ddpl_dtype)out[0]->dtype)) {
    case 1:
        cpu_iter_run(&it, where_1, NULL);
        break;
    case 2:
        cpu_iter_run(&it, where_2, NULL);
        break;
    case 4:
        cpu_iter_run(&it, where_4, NULL);
        break;
    default:
        cpu_iter_run(&it, where_8, NULL);
        break;
    }
    return 0;
}
