/* cpu/cpu_scan.c: scan CPU kernels along one dim: cumsum, cumprod, and cummax/cummin with the
 * int64 index of the running extreme.
 * defines: cpu_cumsum, cpu_cumprod, cpu_cummax, cpu_cummin.
 *
 * out has in[0]'s shape and dtype (the op converted the input). The input is seen as slices
 * along dim; slices are independent, so they are split over the engine's threads. Two paths:
 *   - contiguous float32/float64: the tensor is (outer, n, inner). With inner == 1 each slice is
 *     one sequential row; otherwise a task walks the n rows of a block of up to SCAN_COLS
 *     neighbouring columns with one accumulator per column, so memory is read in order; a
 *     row's product that reaches exactly 0 is finished as a zero run (signed zeros written at
 *     memory speed until an infinity or NaN);
 *   - contiguous float32/float64 cummax/cummin along rows (not reversed): a typed row loop; one
 *     long row with several threads is cut into one part per thread (extreme_contiguous);
 *   - anything else (strided views, every other dtype): one slice at a time through the generic
 *     element loads.
 * Floating sums and products accumulate in double, integers in int64 with wrap-around, as
 * PyTorch's CPU kernels (acc_type<float, false> is double); each output is the accumulator
 * rounded to the dtype. cummax/cummin take the new element when it is NaN or at least as large
 * (small): on ties the index is the LAST one, and a NaN stays once seen, its index that of the
 * latest NaN (PyTorch's cummax_cummin_helper). */
#include <math.h>
#include <string.h>

#include "cpu_iter.h"
#include "cpu_kernels.h"
#if CPU_AVX512_KERNELS
#include <immintrin.h> /* cumprod's zero runs, 64 bytes at a time (zero_run_*_512) */
#endif
#include "kernel_abi/kernel_params.h"

typedef enum { SCAN_SUM, SCAN_PROD, SCAN_MAX, SCAN_MIN } scan_kind;

#define SCAN_COLS 256 /* accumulators per column task: 2 KB of doubles on the stack */

typedef struct {
    const ddpl_tensor *x, *out, *idx; /* idx: cummax/cummin only */
    int dim;
    bool reverse;
    scan_kind kind;
    int64_t n, inner; /* elements along dim; contiguous path: elements after dim */
    int64_t nblk;     /* contiguous path: column blocks per outer index */
} scan_job;

/* ---- cumprod's zero runs ----
 * Once a running product is exactly 0 it stays a zero whose sign flips at each negative element
 * (-0 included), until an infinity or NaN turns it into NaN. zero_run_f32/f64 write those zeros
 * from element k of a row of n on and return the index of the first infinity or NaN, or n, with
 * *acc the signed zero the scan holds before it: the sequential loop's bits, at memory speed
 * instead of a multiply's latency (4 cycles) per element. A long row of cumprod lives there: the
 * product of 1M randn values underflows to zero after ~1000 of them. With AVX-512, 64 bytes at a
 * time: a mask of the negative lanes, its prefix XOR (shifts of the mask) and the zeros' sign bits
 * stored under it. */
#define F32_SIGN 0x80000000u
#define F32_EXP  0x7f800000u /* all ones: an infinity or NaN */
#define F64_SIGN 0x8000000000000000u
#define F64_EXP  0x7ff0000000000000u

#if CPU_AVX512_KERNELS
#define ZERO_RUN_512(NAME, T, U, LANES, BITS, SIGN, EXP)                                           \
    __attribute__((target("avx512f"))) static int64_t NAME(const T *a, T *b, int64_t n, int64_t k, \
                                                           U *neg)                                 \
    {                                                                                              \
        const __m512i expv = _mm512_set1_epi##BITS(EXP), signv = _mm512_set1_epi##BITS(SIGN);      \
        const uint32_t all = (1u << LANES) - 1;                                                    \
        uint32_t carry = *neg ? all : 0; /* every lane flipped while the zero is negative */       \
        for (; k + LANES <= n; k += LANES) {                                                       \
            __m512i v = _mm512_loadu_si512(a + k);                                                 \
            if (_mm512_cmpeq_epi##BITS##_mask(_mm512_and_si512(v, expv), expv)) break;             \
            /* lane l's zero is negative when the negatives up to it are odd in number */          \
            uint32_t m = _mm512_cmplt_epi##BITS##_mask(v, _mm512_setzero_si512());                 \
            for (int sh = 1; sh < LANES; sh *= 2) m ^= (m << sh) & all;                            \
            m ^= carry; /* the only step that waits for the block before */                        \
            _mm512_storeu_si512(b + k, _mm512_maskz_mov_epi##BITS(m, signv));                      \
            carry = -(m >> (LANES - 1)) & all;                                                     \
        }                                                                                          \
        *neg = carry ? SIGN : 0;                                                                   \
        return k;                                                                                  \
    }
ZERO_RUN_512(zero_run_f32_512, float, uint32_t, 16, 32, F32_SIGN, F32_EXP)
ZERO_RUN_512(zero_run_f64_512, double, uint64_t, 8, 64, F64_SIGN, F64_EXP)
#undef ZERO_RUN_512
#define ZERO_RUN_BLOCKS(NAME, a, b, n, k, neg)                                                     \
    (cpu_has_avx512f() ? NAME##_512(a, b, n, k, neg) : (k))
#else
#define ZERO_RUN_BLOCKS(NAME, a, b, n, k, neg) (k)
#endif

/* The portable loop finishes what the 64-byte blocks leave (all of it without AVX-512). */
#define ZERO_RUN(NAME, T, U, SIGN, EXP)                                                            \
    static int64_t NAME(const T *a, T *b, int64_t n, int64_t k, double *acc)                       \
    {                                                                                              \
        U neg = signbit(*acc) ? SIGN : 0;                                                          \
        k = ZERO_RUN_BLOCKS(NAME, a, b, n, k, &neg);                                               \
        for (; k < n; k++) {                                                                       \
            U u;                                                                                   \
            memcpy(&u, a + k, sizeof u);                                                           \
            if ((u & EXP) == EXP) break;                                                           \
            neg ^= u & SIGN;                                                                       \
            memcpy(b + k, &neg, sizeof neg);                                                       \
        }                                                                                          \
        *acc = neg ? -0.0 : 0.0;                                                                   \
        return k;                                                                                  \
    }
ZERO_RUN(zero_run_f32, float, uint32_t, F32_SIGN, F32_EXP)
ZERO_RUN(zero_run_f64, double, uint64_t, F64_SIGN, F64_EXP)
#undef ZERO_RUN

/* ---- contiguous float32/float64 sums and products ---- */
/* A product is tested for a zero run every SCAN_ZERO_CHECK elements, not after each: the test
 * in the loop cost 10% of a row that never reaches zero; a zero found late costs at most this
 * many more multiplies. */
#define SCAN_ZERO_CHECK 256
#define SCAN_ROW(T)                                                                                \
    do {                                                                                           \
        const T *xp = (const T *)ddpl_data_ptr(j->x);                                              \
        T *op = (T *)ddpl_data_ptr(j->out);                                                        \
        for (int64_t s = begin; s < end; s++) {                                                    \
            const T *a = xp + s * n;                                                               \
            T *b = op + s * n;                                                                     \
            double acc = prod ? 1.0 : 0.0;                                                         \
            for (int64_t k = 0; k < n;) {                                                          \
                for (int64_t e = n - k < SCAN_ZERO_CHECK ? n : k + SCAN_ZERO_CHECK; k < e; k++) {  \
                    int64_t i = j->reverse ? n - 1 - k : k;                                        \
                    acc = prod ? acc * (double)a[i] : acc + (double)a[i];                          \
                    b[i] = (T)acc;                                                                 \
                }                                                                                  \
                if (prod && acc == 0.0 && !j->reverse) /* cumprod scans forward only */            \
                    k = ZERO_RUN_OF_##T(a, b, n, k, &acc);                                         \
            }                                                                                      \
        }                                                                                          \
    } while (0)
#define ZERO_RUN_OF_float  zero_run_f32
#define ZERO_RUN_OF_double zero_run_f64

static void rows_range(int64_t begin, int64_t end, void *ctx)
{
    const scan_job *j = ctx;
    int64_t n = j->n;
    bool prod = j->kind == SCAN_PROD;
    if (j->x->dtype == DDPL_FLOAT32)
        SCAN_ROW(float);
    else
        SCAN_ROW(double);
}

#define SCAN_COLUMNS(T)                                                                            \
    do {                                                                                           \
        const T *xp = (const T *)ddpl_data_ptr(j->x) + base;                                       \
        T *op = (T *)ddpl_data_ptr(j->out) + base;                                                 \
        for (int64_t k = 0; k < j->n; k++) {                                                       \
            int64_t r = (j->reverse ? j->n - 1 - k : k) * inner;                                   \
            if (prod)                                                                              \
                for (int64_t c = 0; c < nc; c++) acc[c] *= (double)xp[r + c];                      \
            else                                                                                   \
                for (int64_t c = 0; c < nc; c++) acc[c] += (double)xp[r + c];                      \
            for (int64_t c = 0; c < nc; c++) op[r + c] = (T)acc[c];                                \
        }                                                                                          \
    } while (0)

static void cols_range(int64_t begin, int64_t end, void *ctx)
{
    const scan_job *j = ctx;
    int64_t inner = j->inner;
    bool prod = j->kind == SCAN_PROD;
    double acc[SCAN_COLS];
    for (int64_t t = begin; t < end; t++) {
        int64_t outer = t / j->nblk, c0 = (t % j->nblk) * SCAN_COLS;
        int64_t nc = inner - c0 < SCAN_COLS ? inner - c0 : SCAN_COLS;
        int64_t base = outer * j->n * inner + c0;
        for (int64_t c = 0; c < nc; c++) acc[c] = prod ? 1.0 : 0.0;
        if (j->x->dtype == DDPL_FLOAT32)
            SCAN_COLUMNS(float);
        else
            SCAN_COLUMNS(double);
    }
}

/* ---- cummax/cummin of a contiguous float slice ---- */

/* Whether the running extreme moves to the new element v (PyTorch: NaN, or >= / <=). */
static inline bool take_f(bool is_max, double v, double best)
{
    return v != v || (best == best && (is_max ? v >= best : v <= best));
}

/* a[0, n) into b and ix (indices from i0), from the running extreme (best, bi), or from a[0]
 * when bi < 0. While the extreme is a number, !(v < best) takes v when v >= best or v is NaN (one
 * compare, a branch taken only when the extreme moves); once it is NaN only a newer NaN moves
 * the index. Typed and unit-stride: the generic loop ran at 0.5x torch's speed on 1M float32. */
#define EXTREME_ROW(NAME, T)                                                                       \
    static void NAME(const T *a, T *b, int64_t *ix, int64_t n, int64_t i0, bool is_max, T best,    \
                     int64_t bi)                                                                   \
    {                                                                                              \
        int64_t i = 0;                                                                             \
        if (bi < 0) best = a[0], bi = i0;                                                          \
        if (best == best && is_max) {                                                              \
            for (; i < n; i++) {                                                                   \
                T v = a[i];                                                                        \
                if (!(v < best)) {                                                                 \
                    best = v, bi = i0 + i;                                                         \
                    if (v != v) break;                                                             \
                }                                                                                  \
                b[i] = best, ix[i] = bi;                                                           \
            }                                                                                      \
        } else if (best == best) {                                                                 \
            for (; i < n; i++) {                                                                   \
                T v = a[i];                                                                        \
                if (!(v > best)) {                                                                 \
                    best = v, bi = i0 + i;                                                         \
                    if (v != v) break;                                                             \
                }                                                                                  \
                b[i] = best, ix[i] = bi;                                                           \
            }                                                                                      \
        }                                                                                          \
        for (; i < n; i++) { /* the extreme is NaN: the latest NaN's index */                      \
            if (a[i] != a[i]) bi = i0 + i;                                                         \
            b[i] = best, ix[i] = bi;                                                               \
        }                                                                                          \
    }
EXTREME_ROW(extreme_row_f32, float)
EXTREME_ROW(extreme_row_f64, double)

/* The extreme of a[0, n) and its last position: the state a scan of a[0, n) ends in. Blends
 * of 32-byte vectors (as cpu_reduce.c's rows) and a NaN mask, then a search from the end. */
#define EXTREME_LAST(NAME, T, IT)                                                                  \
    static void NAME(const T *a, int64_t n, bool is_max, T *best, int64_t *bi)                     \
    {                                                                                              \
        typedef T vec __attribute__((vector_size(32)));                                            \
        typedef IT mask __attribute__((vector_size(32)));                                          \
        enum { W = 32 / sizeof(T) };                                                               \
        vec l;                                                                                     \
        for (int j = 0; j < W; j++) l[j] = a[0];                                                   \
        mask nan = {0};                                                                            \
        int64_t i = 0;                                                                             \
        for (; i + W <= n; i += W) {                                                               \
            vec b;                                                                                 \
            memcpy(&b, a + i, sizeof b);                                                           \
            mask m = is_max ? b > l : b < l;                                                       \
            l = (vec)((m & (mask)b) | (~m & (mask)l));                                             \
            nan |= b != b;                                                                         \
        }                                                                                          \
        T m = a[0];                                                                                \
        bool any_nan = false;                                                                      \
        for (int j = 0; j < W; j++) {                                                              \
            any_nan |= nan[j] != 0;                                                                \
            m = (is_max ? l[j] > m : l[j] < m) ? l[j] : m;                                         \
        }                                                                                          \
        for (; i < n; i++) {                                                                       \
            any_nan |= a[i] != a[i];                                                               \
            m = (is_max ? a[i] > m : a[i] < m) ? a[i] : m;                                         \
        }                                                                                          \
        i = n - 1;                                                                                 \
        if (any_nan)                                                                               \
            while (a[i] == a[i]) i--;                                                              \
        else                                                                                       \
            while (a[i] != m) i--;                                                                 \
        *best = a[i];                                                                              \
        *bi = i;                                                                                   \
    }
EXTREME_LAST(extreme_last_f32, float, int32_t)
EXTREME_LAST(extreme_last_f64, double, int64_t)

/* Part c of slice s (rows of n; parts of `chunk` elements): scanned from the state the scan of
 * the slice's elements before the part ends in, found by extreme_last. */
typedef struct {
    const scan_job *j;
    int64_t parts, chunk;
} ext_job;

static void ext_range(int64_t begin, int64_t end, void *ctx)
{
    const ext_job *e = ctx;
    const scan_job *j = e->j;
    int64_t n = j->n, *ix = (int64_t *)ddpl_data_ptr(j->idx);
    bool is_max = j->kind == SCAN_MAX;
    for (int64_t t = begin; t < end; t++) {
        int64_t s = t / e->parts, lo = (t % e->parts) * e->chunk;
        int64_t len = (lo + e->chunk < n ? lo + e->chunk : n) - lo, bi = -1;
        if (j->x->dtype == DDPL_FLOAT32) {
            const float *a = (const float *)ddpl_data_ptr(j->x) + s * n;
            float best = 0;
            if (lo > 0) extreme_last_f32(a, lo, is_max, &best, &bi);
            extreme_row_f32(a + lo, (float *)ddpl_data_ptr(j->out) + s * n + lo, ix + s * n + lo,
                            len, lo, is_max, best, bi);
        } else {
            const double *a = (const double *)ddpl_data_ptr(j->x) + s * n;
            double best = 0;
            if (lo > 0) extreme_last_f64(a, lo, is_max, &best, &bi);
            extreme_row_f64(a + lo, (double *)ddpl_data_ptr(j->out) + s * n + lo, ix + s * n + lo,
                            len, lo, is_max, best, bi);
        }
    }
}

/* Contiguous float cummax/cummin along rows of n, not reversed. Rows go to threads whole; one
 * long row with several threads is cut into one part per thread, each scanned from the state
 * the elements before it leave (a read-only pass over them), so the results are those of one
 * sequential scan. */
static void extreme_contiguous(const scan_job *j, int64_t slices)
{
    int threads = ddpl_get_num_threads();
    ext_job e = {j, 1, j->n};
    if (slices == 1 && threads > 1 && j->n >= 4 * CPU_GRAIN) {
        e.parts = threads;
        e.chunk = (j->n + threads - 1) / threads;
        e.parts = (j->n + e.chunk - 1) / e.chunk;
    }
    cpu_parallel_for(slices * e.parts, e.parts > 1 ? 1 : CPU_GRAIN / j->n + 1, ext_range, &e);
}

/* ---- generic: any strides, any dtype ---- */

/* Element offsets of slice s (row-major over every dim but dim) in x, out and idx. */
static void slice_offsets(const scan_job *j, int64_t s, int64_t *xo, int64_t *oo, int64_t *io)
{
    int64_t a = 0, b = 0, c = 0;
    for (int d = j->x->ndim - 1; d >= 0; d--) {
        if (d == j->dim) continue;
        int64_t i = s % j->x->sizes[d];
        s /= j->x->sizes[d];
        a += i * j->x->strides[d];
        b += i * j->out->strides[d];
        if (j->idx) c += i * j->idx->strides[d];
    }
    *xo = a;
    *oo = b;
    *io = c;
}

static void generic_range(int64_t begin, int64_t end, void *ctx)
{
    const scan_job *j = ctx;
    ddpl_dtype dt = (ddpl_dtype)j->x->dtype;
    bool integral = ddpl_dtype_is_integral(dt);
    int64_t esz = (int64_t)ddpl_dtype_size(dt);
    int64_t xs = j->x->ndim ? j->x->strides[j->dim] : 0;
    int64_t os = j->out->ndim ? j->out->strides[j->dim] : 0;
    int64_t is = j->idx && j->idx->ndim ? j->idx->strides[j->dim] : 0;
    const char *xp = ddpl_data_ptr(j->x);
    char *op = ddpl_data_ptr(j->out);
    int64_t *ip = j->idx ? (int64_t *)ddpl_data_ptr(j->idx) : NULL;
    bool is_max = j->kind == SCAN_MAX;
    for (int64_t s = begin; s < end; s++) {
        int64_t xo, oo, io;
        slice_offsets(j, s, &xo, &oo, &io);
        if (j->kind >= SCAN_MAX && (dt == DDPL_FLOAT32 || dt == DDPL_FLOAT64)) {
            /* cummax/cummin of floats, typed: the generic loads cost 5x torch's time on 1M
             * float32. The branch is taken only when the extreme moves (rarely, on most
             * data), so it predicts well. */
#define SCAN_EXTREME(T)                                                                            \
    do {                                                                                           \
        const T *a = (const T *)xp + xo;                                                           \
        T *b = (T *)op + oo, best = 0;                                                             \
        int64_t *ix = ip + io;                                                                     \
        for (int64_t k = 0; k < j->n; k++) {                                                       \
            int64_t i = j->reverse ? j->n - 1 - k : k;                                             \
            T v = a[i * xs];                                                                       \
            if (k == 0 || v != v || (best == best && (is_max ? v >= best : v <= best)))            \
                best = v, best_i = i;                                                              \
            b[i * os] = best;                                                                      \
            ix[i * is] = best_i;                                                                   \
        }                                                                                          \
    } while (0)
            int64_t best_i = 0;
            if (dt == DDPL_FLOAT32)
                SCAN_EXTREME(float);
            else
                SCAN_EXTREME(double);
#undef SCAN_EXTREME
            continue;
        }
        double facc = j->kind == SCAN_PROD ? 1.0 : 0.0;
        int64_t iacc = j->kind == SCAN_PROD ? 1 : 0, best_i = 0;
        for (int64_t k = 0; k < j->n; k++) {
            int64_t i = j->reverse ? j->n - 1 - k : k;
            const char *src = xp + (xo + i * xs) * esz;
            char *dst = op + (oo + i * os) * esz;
            if (j->kind == SCAN_SUM || j->kind == SCAN_PROD) {
                if (integral) {
                    uint64_t v = (uint64_t)ddpl_load_i64(src, dt);
                    iacc = (int64_t)(j->kind == SCAN_SUM ? (uint64_t)iacc + v : (uint64_t)iacc * v);
                    ddpl_store_i64(dst, dt, iacc);
                } else {
                    double v = ddpl_load_f64(src, dt);
                    facc = j->kind == SCAN_SUM ? facc + v : facc * v;
                    ddpl_store_f64(dst, dt, facc);
                }
                continue;
            }
            /* cummax/cummin: the value written is an element itself, so it is exact */
            if (integral) {
                int64_t v = ddpl_load_i64(src, dt);
                if (k == 0 || (is_max ? v >= iacc : v <= iacc)) iacc = v, best_i = i;
                ddpl_store_i64(dst, dt, iacc);
            } else {
                double v = ddpl_load_f64(src, dt);
                if (k == 0 || take_f(is_max, v, facc)) facc = v, best_i = i;
                ddpl_store_f64(dst, dt, facc);
            }
            ip[io + i * is] = best_i;
        }
    }
}

static int run_scan(ddpl_tensor **out, ddpl_tensor **in, const void *params, scan_kind kind)
{
    const ddpl_scan_params *p = params;
    const ddpl_tensor *x = in[0];
    scan_job j = {x,          out[0], kind >= SCAN_MAX ? out[1] : NULL, x->ndim ? p->dim : 0,
                  p->reverse, kind,   x->ndim ? x->sizes[p->dim] : 1,   1,
                  1};
    int64_t numel = ddpl_tensor_numel(x);
    if (numel == 0) return 0;
    int64_t slices = numel / j.n;
    bool floats = x->dtype == DDPL_FLOAT32 || x->dtype == DDPL_FLOAT64;
    bool contiguous = ddpl_tensor_is_contiguous(x) && ddpl_tensor_is_contiguous(out[0]);
    if (kind >= SCAN_MAX && floats && contiguous && ddpl_tensor_is_contiguous(out[1]) &&
        !p->reverse && (x->ndim == 0 || j.dim == x->ndim - 1 || numel == j.n)) {
        extreme_contiguous(&j, slices); /* slices are rows of n */
        return 0;
    }
    bool fast = kind <= SCAN_PROD && floats && contiguous;
    if (!fast) {
        cpu_parallel_for(slices, CPU_GRAIN / j.n + 1, generic_range, &j);
        return 0;
    }
    for (int d = j.dim + 1; d < x->ndim; d++) j.inner *= x->sizes[d];
    if (j.inner == 1) {
        cpu_parallel_for(slices, CPU_GRAIN / j.n + 1, rows_range, &j);
        return 0;
    }
    j.nblk = (j.inner + SCAN_COLS - 1) / SCAN_COLS;
    int64_t outer = slices / j.inner;
    int64_t per_task = j.n * (j.inner < SCAN_COLS ? j.inner : SCAN_COLS);
    cpu_parallel_for(outer * j.nblk, CPU_GRAIN / per_task + 1, cols_range, &j);
    return 0;
}

int cpu_cumsum(ddpl_tensor **out, ddpl_tensor **in, const void *params)
{
    return run_scan(out, in, params, SCAN_SUM);
}

int cpu_cumprod(ddpl_tensor **out, ddpl_tensor **in, const void *params)
{
    return run_scan(out, in, params, SCAN_PROD);
}

int cpu_cummax(ddpl_tensor **out, ddpl_tensor **in, const void *params)
{
    return run_scan(out, in, params, SCAN_MAX);
}

int cpu_cummin(ddpl_tensor **out, ddpl_tensor **in, const void *params)
{
    return run_scan(out, in, params, SCAN_MIN);
}
