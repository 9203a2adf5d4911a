/* cpu/cpu_reduce_rows.c: the typed row loops of the reduction kernels: sums (plain, of squares,
 * NaN as 0), products, max/min and both extremes at once, for float32, float64 and bfloat16 in
 * double accumulators, and integer sums and extremes in int64 (cpu_reduce_rows.h). cpu_reduce.c
 * runs them over the rows of a reduction.
 * defines: cpu_rows_f32, cpu_rows_f64, cpu_rows_bf16, cpu_row_minmax_f32, cpu_row_minmax_f64,
 *          cpu_row_isum, cpu_has_isum_row, cpu_row_iext. */
#include <math.h>
#include <string.h>

#include "cpu_loops.h"
#include "cpu_reduce_rows.h"
#if CPU_AVX512_KERNELS
#include <immintrin.h> /* AVX-512 rows (row_ext_f32_512) */
#endif

/* Typed rows: combines init with the n elements at p (element stride s). LANES lanes of
 * double, starting from the identity ID, so the loop vectorises and the dependency chains stay
 * short: float32 takes 32 (eight vectors of four), since each vector add waits ~4 cycles on its
 * own chain and the float -> double conversion feeds one vector a cycle; with 8 lanes a float32
 * sum ran at 0.56x torch's speed on 4M elements in cache. Compiled for AVX-512 too
 * (CPU_LOOP_CLONES): eight conversions an instruction. */
#define ROW_FN(NAME, T, OP, ID, LANES, LOAD)                                                       \
    NO_FP_CONTRACT CPU_LOOP_CLONES static double NAME(const char *p_, int64_t n, int64_t s,        \
                                                      double init)                                 \
    {                                                                                              \
        const T *p = (const T *)p_;                                                                \
        double lane[LANES];                                                                        \
        for (int j = 0; j < LANES; j++) lane[j] = ID;                                              \
        int64_t i = 0;                                                                             \
        if (s == 1) {                                                                              \
            for (; i + LANES <= n; i += LANES)                                                     \
                for (int j = 0; j < LANES; j++) {                                                  \
                    double a = lane[j], b = LOAD(p[i + j]);                                        \
                    lane[j] = OP(a, b);                                                            \
                }                                                                                  \
        }                                                                                          \
        double r = init;                                                                           \
        for (; i < n; i++) {                                                                       \
            double a = r, b = LOAD(p[i * s]);                                                      \
            r = OP(a, b);                                                                          \
        }                                                                                          \
        for (int j = 0; j < LANES; j++) {                                                          \
            double a = r, b = lane[j];                                                             \
            r = OP(a, b);                                                                          \
        }                                                                                          \
        return r;                                                                                  \
    }
#define OP_SUM(a, b)   ((a) + (b))
#define OP_PROD(a, b)  ((a) * (b))
#define LOAD_SQUARE(v) ((double)((v) * (v))) /* squared in the dtype, as x * x */
/* float32 sums of contiguous rows: elements i and i + 32 of each block of 64 are added in
 * float32 (one rounding, at most half an ulp of |x_i + x_(i+32)|, where PyTorch's float32
 * cascade rounds every partial sum), and the pair sums accumulate in 32 double lanes as above.
 * The float -> double conversion is this loop's limit (Zen 4 converts eight floats per two
 * cycles): converting every element held a 4M-element sum in cache at 0.55x torch's speed,
 * pairs reach the memory's speed. Sums of squares square each element in float32 first (as
 * x * x then sum: same pairs, same bits); no fma contraction. */
#define ROW_PAIR_FN(NAME, LOADF)                                                                   \
    NO_FP_CONTRACT CPU_LOOP_CLONES static double NAME(const char *p_, int64_t n, int64_t s,        \
                                                      double init)                                 \
    {                                                                                              \
        const float *p = (const float *)p_;                                                        \
        double lane[32];                                                                           \
        for (int j = 0; j < 32; j++) lane[j] = 0.0;                                                \
        int64_t i = 0;                                                                             \
        if (s == 1) {                                                                              \
            for (; i + 64 <= n; i += 64)                                                           \
                for (int j = 0; j < 32; j++) {                                                     \
                    float a = LOADF(p[i + j]), b = LOADF(p[i + 32 + j]);                           \
                    lane[j] += (double)(a + b);                                                    \
                }                                                                                  \
        }                                                                                          \
        double r = init;                                                                           \
        for (; i < n; i++) r += (double)LOADF(p[i * s]);                                           \
        for (int j = 0; j < 32; j++) r += lane[j];                                                 \
        return r;                                                                                  \
    }
#define LOADF_PLAIN(v)  (v)
#define LOADF_SQUARE(v) ((v) * (v))
#define LOADF_NAN0(v)   ((v) != (v) ? 0.0f : (v)) /* a compare and a masked move */
ROW_PAIR_FN(row_sum_f32, LOADF_PLAIN)
ROW_PAIR_FN(row_nansum_f32, LOADF_NAN0)
ROW_FN(row_sum_f64, double, OP_SUM, 0.0, 8, LOAD_PLAIN)
ROW_FN(row_prod_f32, float, OP_PROD, 1.0, 32, LOAD_PLAIN)
ROW_FN(row_prod_f64, double, OP_PROD, 1.0, 8, LOAD_PLAIN)
ROW_PAIR_FN(row_sumsq_f32, LOADF_SQUARE)
ROW_FN(row_sumsq_f64, double, OP_SUM, 0.0, 8, LOAD_SQUARE)
#define LOAD_NAN0(v) NAN0((double)(v))
ROW_FN(row_nansum_f64, double, OP_SUM, 0.0, 8, LOAD_NAN0)
/* bfloat16 (autocast's bias gradients and losses): widened exactly, then as float32 */
#define LOAD_BF16_NAN0(v) NAN0(LOAD_BF16(v))
ROW_FN(row_sum_bf16, uint16_t, OP_SUM, 0.0, 32, LOAD_BF16)
ROW_FN(row_nansum_bf16, uint16_t, OP_SUM, 0.0, 32, LOAD_BF16_NAN0)
ROW_FN(row_prod_bf16, uint16_t, OP_PROD, 1.0, 32, LOAD_BF16)
ROW_FN(row_max_bf16, uint16_t, OP_MAX, -INFINITY, 32, LOAD_BF16)
ROW_FN(row_min_bf16, uint16_t, OP_MIN, INFINITY, 32, LOAD_BF16)
/* max/min rows in four 32-byte vectors of T itself (the result is one of the elements: no
 * conversion), GCC vector extensions: each lane keeps b where b CMP lane, a compare and a blend,
 * which leaves the lane alone for a NaN b; a mask of NaNs seen restores PyTorch's rule that NaN
 * wins. Written with scalars, the NaN test inside the select kept GCC from vectorising and amax
 * ran at a fifth of torch's speed. Strided rows and the tail take the scalar OP. */
#define ROW_MINMAX(NAME, T, IT, CMP, OP, ID)                                                       \
    static double NAME(const char *p_, int64_t n, int64_t s, double init)                          \
    {                                                                                              \
        typedef T vec __attribute__((vector_size(32)));                                            \
        typedef IT mask __attribute__((vector_size(32)));                                          \
        enum { W = 32 / sizeof(T), V = 4 }; /* V vectors: four blend chains in flight */           \
        const T *p = (const T *)p_;                                                                \
        vec l[V];                                                                                  \
        for (int j = 0; j < W; j++) l[0][j] = (T)ID;                                               \
        for (int v = 1; v < V; v++) l[v] = l[0];                                                   \
        mask nan = {0};                                                                            \
        int64_t i = 0;                                                                             \
        if (s == 1) {                                                                              \
            for (; i + V * W <= n; i += V * W) {                                                   \
                for (int v = 0; v < V; v++) {                                                      \
                    vec b;                                                                         \
                    memcpy(&b, p + i + v * W, sizeof b);                                           \
                    mask m = b CMP l[v];                                                           \
                    l[v] = (vec)((m & (mask)b) | (~m & (mask)l[v]));                               \
                    nan |= b != b;                                                                 \
                }                                                                                  \
            }                                                                                      \
        }                                                                                          \
        double r = init;                                                                           \
        for (int j = 0; j < W; j++) {                                                              \
            if (nan[j]) return (double)NAN;                                                        \
            for (int v = 0; v < V; v++) r = OP(r, (double)l[v][j]);                                \
        }                                                                                          \
        for (; i < n; i++) {                                                                       \
            double a = r, b = (double)p[i * s];                                                    \
            r = OP(a, b);                                                                          \
        }                                                                                          \
        return r;                                                                                  \
    }
ROW_MINMAX(row_max_f32, float, int32_t, >, OP_MAX, -INFINITY)
ROW_MINMAX(row_max_f64, double, int64_t, >, OP_MAX, -INFINITY)
ROW_MINMAX(row_min_f32, float, int32_t, <, OP_MIN, INFINITY)
ROW_MINMAX(row_min_f64, double, int64_t, <, OP_MIN, INFINITY)

/* float32 max/min of a contiguous row in 64-byte vectors where the CPU has AVX-512
 * (cpu_has_avx512f): vmaxps/vminps return their second operand when either is NaN, so the four lane
 * chains never take a NaN, and a mask of the NaNs seen restores PyTorch's rule. A 4096^2 amax over
 * rows (memory-bound, 1 thread) read 30 GB/s this way against the 32-byte blends' 25-26 (torch
 * 25-27); GCC's 64-byte vector extensions in the blend loop fell to 4 GB/s. */
#if CPU_AVX512_KERNELS
__attribute__((target("avx512f"))) static double row_ext_f32_512(const float *p, int64_t n,
                                                                 double init, bool is_max)
{
    __m512 a[4];
    for (int v = 0; v < 4; v++) a[v] = _mm512_set1_ps(is_max ? -INFINITY : INFINITY);
    __mmask16 nan = 0;
    int64_t i = 0;
    for (; i + 64 <= n; i += 64)
        for (int v = 0; v < 4; v++) {
            __m512 b = _mm512_loadu_ps(p + i + 16 * v);
            a[v] = is_max ? _mm512_max_ps(b, a[v]) : _mm512_min_ps(b, a[v]);
            nan |= _mm512_cmp_ps_mask(b, b, _CMP_UNORD_Q);
        }
    if (nan) return (double)NAN;
    __m512 m = is_max ? _mm512_max_ps(_mm512_max_ps(a[0], a[1]), _mm512_max_ps(a[2], a[3]))
                      : _mm512_min_ps(_mm512_min_ps(a[0], a[1]), _mm512_min_ps(a[2], a[3]));
    double r = is_max ? OP_MAX(init, (double)_mm512_reduce_max_ps(m))
                      : OP_MIN(init, (double)_mm512_reduce_min_ps(m));
    for (; i < n; i++) r = is_max ? OP_MAX(r, (double)p[i]) : OP_MIN(r, (double)p[i]);
    return r;
}
#endif

/* float32 max (is_max) or min of a row: 64-byte vectors where they run, else the blends */
static double row_ext_f32(const char *p, int64_t n, int64_t s, double init, bool is_max)
{
#if CPU_AVX512_KERNELS
    if (s == 1 && cpu_has_avx512f()) return row_ext_f32_512((const float *)p, n, init, is_max);
#endif
    return is_max ? row_max_f32(p, n, s, init) : row_min_f32(p, n, s, init);
}

static double row_max_f32_any(const char *p, int64_t n, int64_t s, double init)
{
    return row_ext_f32(p, n, s, init, true);
}

static double row_min_f32_any(const char *p, int64_t n, int64_t s, double init)
{
    return row_ext_f32(p, n, s, init, false);
}

/* Both extremes of a contiguous row in one pass (aminmax), folded into *mn and *mx: the blends
 * of ROW_MINMAX for each, one NaN mask for both (a NaN makes both NaN). Two passes of amin and
 * amax read the row twice: 0.5-0.9x torch's time on 4M float32. */
#define ROW_MINMAX2(NAME, T, IT)                                                                   \
    void NAME(const char *p_, int64_t n, double *mn, double *mx)                                   \
    {                                                                                              \
        typedef T vec __attribute__((vector_size(32)));                                            \
        typedef IT mask __attribute__((vector_size(32)));                                          \
        enum { W = 32 / sizeof(T), V = 2 };                                                        \
        const T *p = (const T *)p_;                                                                \
        vec lo[V], hi[V];                                                                          \
        for (int j = 0; j < W; j++) lo[0][j] = (T)INFINITY, hi[0][j] = (T)-INFINITY;               \
        for (int v = 1; v < V; v++) lo[v] = lo[0], hi[v] = hi[0];                                  \
        mask nan = {0};                                                                            \
        int64_t i = 0;                                                                             \
        for (; i + V * W <= n; i += V * W) {                                                       \
            for (int v = 0; v < V; v++) {                                                          \
                vec b;                                                                             \
                memcpy(&b, p + i + v * W, sizeof b);                                               \
                mask ml = b<lo[v], mh = b> hi[v];                                                  \
                lo[v] = (vec)((ml & (mask)b) | (~ml & (mask)lo[v]));                               \
                hi[v] = (vec)((mh & (mask)b) | (~mh & (mask)hi[v]));                               \
                nan |= b != b;                                                                     \
            }                                                                                      \
        }                                                                                          \
        double a = *mn, c = *mx;                                                                   \
        for (int j = 0; j < W; j++) {                                                              \
            if (nan[j]) {                                                                          \
                *mn = *mx = (double)NAN;                                                           \
                return;                                                                            \
            }                                                                                      \
            for (int v = 0; v < V; v++)                                                            \
                a = OP_MIN(a, (double)lo[v][j]), c = OP_MAX(c, (double)hi[v][j]);                  \
        }                                                                                          \
        for (; i < n; i++) {                                                                       \
            double b = (double)p[i];                                                               \
            a = OP_MIN(a, b);                                                                      \
            c = OP_MAX(c, b);                                                                      \
        }                                                                                          \
        *mn = a;                                                                                   \
        *mx = c;                                                                                   \
    }
ROW_MINMAX2(cpu_row_minmax_f32, float, int32_t)
ROW_MINMAX2(cpu_row_minmax_f64, double, int64_t)

/* Integer sums of contiguous rows in uint64 (wrap-around, as icombine). count_nonzero sums a
 * bool mask: through ddpl_load_i64 per element that took 8 ms for 4M bytes (6x torch); typed,
 * GCC widens and vectorises the loop. Bytes go through a uint32 lane sum per block of 2^24
 * (no overflow: 255 * 2^24 < 2^32). */
int64_t cpu_row_isum(const char *p_, int64_t n, ddpl_dtype dt)
{
    uint64_t acc = 0;
    if (dt == DDPL_BOOL || dt == DDPL_UINT8) {
        const uint8_t *p = (const uint8_t *)p_;
        for (int64_t b = 0; b < n; b += 1 << 24) {
            int64_t e = n - b < (1 << 24) ? n : b + (1 << 24);
            uint32_t part = 0;
            for (int64_t i = b; i < e; i++) part += p[i];
            acc += part;
        }
    } else if (dt == DDPL_INT32) {
        const int32_t *p = (const int32_t *)p_;
        for (int64_t i = 0; i < n; i++) acc += (uint64_t)(int64_t)p[i];
    } else {
        const int64_t *p = (const int64_t *)p_;
        for (int64_t i = 0; i < n; i++) acc += (uint64_t)p[i];
    }
    return (int64_t)acc;
}

bool cpu_has_isum_row(ddpl_dtype dt)
{
    return dt == DDPL_BOOL || dt == DDPL_UINT8 || dt == DDPL_INT32 || dt == DDPL_INT64;
}

/* int64 max/min of a contiguous row from acc (bincount's range check reads min and max of
 * its 1M values: through the generic loads they cost 4x torch's whole bincount). */
int64_t cpu_row_iext(const int64_t *p, int64_t n, bool is_max, int64_t acc)
{
    if (is_max)
        for (int64_t i = 0; i < n; i++) acc = p[i] > acc ? p[i] : acc;
    else
        for (int64_t i = 0; i < n; i++) acc = p[i] < acc ? p[i] : acc;
    return acc;
}

const row_fn cpu_rows_f32[6] = {row_sum_f32,     row_prod_f32,  row_max_f32_any,
                                row_min_f32_any, row_sumsq_f32, row_nansum_f32};
const row_fn cpu_rows_f64[6] = {row_sum_f64, row_prod_f64,  row_max_f64,
                                row_min_f64, row_sumsq_f64, row_nansum_f64};
/* no sum of squares: each square is rounded to bfloat16 first (the generic loop) */
const row_fn cpu_rows_bf16[6] = {row_sum_bf16, row_prod_bf16, row_max_bf16,
                                 row_min_bf16, NULL,          row_nansum_bf16};
