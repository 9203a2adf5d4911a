/* cpu/cpu_pool.c: 2-D pooling on the CPU, forward and backward, planes spread over threads.
 * defines: cpu_max_pool2d, cpu_max_pool2d_backward, cpu_avg_pool2d, cpu_avg_pool2d_backward,
 *          cpu_adaptive_avg_pool2d, cpu_adaptive_avg_pool2d_backward.
 *
 * Every kernel sees contiguous (N,C,H,W) data as N*C independent planes. Windows are clipped
 * to the input once per output row/column instead of testing every tap. max_pool2d propagates
 * NaN (a NaN in the window wins, as in PyTorch) and writes the argmax (h*W + w within the
 * plane) only when backward will need it; the common 2x2 stride-2 unpadded case has its own
 * loop over the four taps. float16/bfloat16 planes compute in float32 (cpu_run_widened). */
#include <math.h>
#if defined(__AVX2__)
#include <immintrin.h>
#endif

#include "cpu_iter.h"
#include "cpu_kernels.h"
#include "kernel_abi/nn_params.h"

typedef struct {
    int64_t H, W, OH, OW;
    int kh, kw, sh, sw, ph, pw;
    bool count_include_pad;
    int divisor_override; /* avg_pool2d: 0 none, else the divisor of every window */
    const char *in;
    char *out;
    int64_t *argmax; /* max_pool2d: NULL when not wanted */
    const int64_t *indices;
    ddpl_dtype dt;
} pool_job;

static void pool_job_init(pool_job *j, const ddpl_tensor *big, const ddpl_tensor *small,
                          const ddpl_pool_params *p)
{
    j->H = big->sizes[2], j->W = big->sizes[3];
    j->OH = small->sizes[2], j->OW = small->sizes[3];
    j->dt = (ddpl_dtype)big->dtype;
    if (p) {
        j->kh = p->kernel[0], j->kw = p->kernel[1], j->sh = p->stride[0], j->sw = p->stride[1];
        j->ph = p->padding[0], j->pw = p->padding[1];
        j->count_include_pad = p->count_include_pad;
        j->divisor_override = p->divisor_override;
    }
}

/* Runs fn over planes [begin, end) in parallel: a thread gets whole planes. */
static void run_planes(int64_t planes, int64_t plane_work, void (*fn)(int64_t, int64_t, void *),
                       pool_job *j)
{
    cpu_parallel_for(planes, CPU_GRAIN / (plane_work > 0 ? plane_work : 1) + 1, fn, j);
}

#if defined(__AVX2__)
/* 8 outputs of the float32 2x2 stride-2 pool from 16 inputs of each of the rows r0 (u0 u1) and
 * r1 (v0 v1): the maxima, and in *k each winner's offset from its window's first tap. The same
 * scan as the scalar loop (a later tap wins when greater or NaN), as blends instead of
 * branches: the winner is random on real data and mispredicted branches dominated this
 * kernel. */
static inline __m256 max_pool_2x2_8(__m256 u0, __m256 u1, __m256 v0, __m256 v1, int64_t W,
                                    __m256i *k_out)
{
    const __m256i k_b = _mm256_set1_epi32(1), k_c = _mm256_set1_epi32((int)W),
                  k_d = _mm256_set1_epi32((int)W + 1);
    /* deinterleave 16 inputs of each row into even (left) and odd (right) taps */
#define DDPL_DEINTERLEAVE(x, y, imm)                                                               \
    _mm256_castpd_ps(_mm256_permute4x64_pd(_mm256_castps_pd(_mm256_shuffle_ps(x, y, imm)), 0xD8))
    __m256 a = DDPL_DEINTERLEAVE(u0, u1, 0x88), b = DDPL_DEINTERLEAVE(u0, u1, 0xDD);
    __m256 c = DDPL_DEINTERLEAVE(v0, v1, 0x88), d = DDPL_DEINTERLEAVE(v0, v1, 0xDD);
#undef DDPL_DEINTERLEAVE
    __m256 m = a;
    __m256i k = _mm256_setzero_si256();
#define DDPL_TAKE(t, kt)                                                                           \
    do {                                                                                           \
        __m256 take =                                                                              \
            _mm256_or_ps(_mm256_cmp_ps(t, m, _CMP_GT_OQ), _mm256_cmp_ps(t, t, _CMP_UNORD_Q));      \
        m = _mm256_blendv_ps(m, t, take);                                                          \
        k = _mm256_castps_si256(                                                                   \
            _mm256_blendv_ps(_mm256_castsi256_ps(k), _mm256_castsi256_ps(kt), take));              \
    } while (0)
    DDPL_TAKE(b, k_b);
    DDPL_TAKE(c, k_c);
    DDPL_TAKE(d, k_d);
#undef DDPL_TAKE
    *k_out = k;
    return m;
}

/* The argmax of 8 outputs as int64 input indices: k (offsets within the windows) plus b0, the
 * input index of the first output's first tap; into lo (outputs 0-3) and hi (4-7). */
static inline void max_pool_2x2_index(__m256i k, int64_t b0, __m256i *lo, __m256i *hi)
{
    *lo = _mm256_add_epi64(_mm256_cvtepi32_epi64(_mm256_castsi256_si128(k)),
                           _mm256_set_epi64x(b0 + 6, b0 + 4, b0 + 2, b0));
    *hi = _mm256_add_epi64(_mm256_cvtepi32_epi64(_mm256_extracti128_si256(k, 1)),
                           _mm256_set_epi64x(b0 + 14, b0 + 12, b0 + 10, b0 + 8));
}

/* The first n lanes of v stored at dst (n 0-8 floats; 0-4 int64 for the second): a 4-, 2- and
 * 1-lane store by the bits of n. A loop of n scalar copies became a memcpy call per row (GCC
 * turns such loops into library calls: 4% of the lenet step went to them), and masked stores
 * (vmaskmov) are microcoded and slow on AMD. */
static inline void store_first_ps(float *dst, __m256 v, int n)
{
    if (n == 8) {
        _mm256_storeu_ps(dst, v);
        return;
    }
    __m128 h = _mm256_castps256_ps128(v);
    if (n & 4) {
        _mm_storeu_ps(dst, h);
        h = _mm256_extractf128_ps(v, 1);
        dst += 4;
    }
    if (n & 2) {
        _mm_storel_pi((__m64 *)dst, h);
        h = _mm_movehl_ps(h, h);
        dst += 2;
    }
    if (n & 1) _mm_store_ss(dst, h);
}

static inline void store_first_epi64(int64_t *dst, __m256i v, int n)
{
    if (n == 4) {
        _mm256_storeu_si256((__m256i *)dst, v);
        return;
    }
    __m128i h = _mm256_castsi256_si128(v);
    if (n & 2) {
        _mm_storeu_si128((__m128i *)dst, h);
        h = _mm256_extracti128_si256(v, 1);
        dst += 2;
    }
    if (n & 1) _mm_storel_epi64((__m128i *)dst, h);
}

/* One output row of the float32 2x2 stride-2 pool: input rows r0 and r1, outputs yr[0..OW),
 * argmax ar (NULL: not wanted) relative to `base`. 8 outputs at a time, and the last 1-7 with
 * masked loads (reading only the row's own 2 * OW inputs): the second lenet pool's rows are 7
 * outputs wide, which a scalar tail took whole. */
static void max_pool_2x2_row_avx2(const float *r0, const float *r1, float *yr, int64_t *ar,
                                  int64_t OW, int64_t W, int64_t base)
{
    int64_t ow = 0;
    __m256i k, lo, hi;
    for (; ow + 8 <= OW; ow += 8) {
        __m256 m =
            max_pool_2x2_8(_mm256_loadu_ps(r0 + 2 * ow), _mm256_loadu_ps(r0 + 2 * ow + 8),
                           _mm256_loadu_ps(r1 + 2 * ow), _mm256_loadu_ps(r1 + 2 * ow + 8), W, &k);
        _mm256_storeu_ps(yr + ow, m);
        if (ar) {
            max_pool_2x2_index(k, base + 2 * ow, &lo, &hi);
            _mm256_storeu_si256((__m256i *)(ar + ow), lo);
            _mm256_storeu_si256((__m256i *)(ar + ow + 4), hi);
        }
    }
    int rem = (int)(OW - ow); /* 0-7 outputs left, 2 * rem inputs of each row */
    if (rem == 0) return;
    const __m256i lane = _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7);
    __m256i in0 = _mm256_cmpgt_epi32(_mm256_set1_epi32(2 * rem), lane);     /* inputs 0-7 */
    __m256i in1 = _mm256_cmpgt_epi32(_mm256_set1_epi32(2 * rem - 8), lane); /* inputs 8-15 */
    __m256 m = max_pool_2x2_8(
        _mm256_maskload_ps(r0 + 2 * ow, in0), _mm256_maskload_ps(r0 + 2 * ow + 8, in1),
        _mm256_maskload_ps(r1 + 2 * ow, in0), _mm256_maskload_ps(r1 + 2 * ow + 8, in1), W, &k);
    store_first_ps(yr + ow, m, rem);
    if (ar) {
        max_pool_2x2_index(k, base + 2 * ow, &lo, &hi);
        store_first_epi64(ar + ow, lo, rem < 4 ? rem : 4);
        if (rem > 4) store_first_epi64(ar + ow + 4, hi, rem - 4);
    }
}
#endif

#if defined(__AVX2__)
/* Rows 2*oh and 2*oh + 1 (d0, d1) of the input gradient of the float32 2x2 stride-2 pool from
 * output row oh: g[0..OW) and its argmax am relative to `base` (the input index of the row's
 * first window). Each window's four inputs are written once, the gradient where the argmax is
 * and zeros elsewhere (the windows tile the rows, so no memset of dx and no read-modify-write
 * scatter is needed); 8 windows at a time, then the last 1-7 with masked loads. */
static void max_pool_2x2_bwd_row_avx2(const float *g, const int64_t *am, float *d0, float *d1,
                                      int64_t OW, int64_t W, int64_t base)
{
    const __m256i perm = _mm256_setr_epi32(0, 2, 4, 6, 1, 3, 5, 7),
                  lane = _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7);
    const __m256i k_b = _mm256_set1_epi32(1), k_c = _mm256_set1_epi32((int)W),
                  k_d = _mm256_set1_epi32((int)W + 1);
    for (int64_t ow = 0; ow < OW; ow += 8) {
        int rem = OW - ow < 8 ? (int)(OW - ow) : 8;
        __m256i m32 = _mm256_cmpgt_epi32(_mm256_set1_epi32(rem), lane); /* outputs */
        const __m256i lane64 = _mm256_setr_epi64x(0, 1, 2, 3);
        __m256i mlo = _mm256_cmpgt_epi64(_mm256_set1_epi64x(rem), lane64);
        __m256i mhi = _mm256_cmpgt_epi64(_mm256_set1_epi64x(rem - 4), lane64);
        __m256 gv;
        __m256i ilo, ihi;
        if (rem == 8) {
            gv = _mm256_loadu_ps(g + ow);
            ilo = _mm256_loadu_si256((const __m256i *)(am + ow));
            ihi = _mm256_loadu_si256((const __m256i *)(am + ow + 4));
        } else {
            gv = _mm256_maskload_ps(g + ow, m32);
            ilo = _mm256_maskload_epi64((const long long *)(am + ow), mlo);
            ihi = _mm256_maskload_epi64((const long long *)(am + ow + 4), mhi);
        }
        int64_t b0 = base + 2 * ow; /* offsets of the argmax within their windows */
        ilo = _mm256_sub_epi64(ilo, _mm256_set_epi64x(b0 + 6, b0 + 4, b0 + 2, b0));
        ihi = _mm256_sub_epi64(ihi, _mm256_set_epi64x(b0 + 14, b0 + 12, b0 + 10, b0 + 8));
        /* low 32 bits of the 8 offsets, in order (each is 0, 1, W or W + 1) */
        __m256i k = _mm256_inserti128_si256(
            _mm256_permutevar8x32_epi32(ilo, perm),
            _mm256_castsi256_si128(_mm256_permutevar8x32_epi32(ihi, perm)), 1);
        __m256 a =
            _mm256_and_ps(gv, _mm256_castsi256_ps(_mm256_cmpeq_epi32(k, _mm256_setzero_si256())));
        __m256 b = _mm256_and_ps(gv, _mm256_castsi256_ps(_mm256_cmpeq_epi32(k, k_b)));
        __m256 c = _mm256_and_ps(gv, _mm256_castsi256_ps(_mm256_cmpeq_epi32(k, k_c)));
        __m256 d = _mm256_and_ps(gv, _mm256_castsi256_ps(_mm256_cmpeq_epi32(k, k_d)));
        /* interleave into the rows: a0 b0 a1 b1 ... and c0 d0 c1 d1 ... */
        __m256 ab_lo = _mm256_unpacklo_ps(a, b), ab_hi = _mm256_unpackhi_ps(a, b);
        __m256 cd_lo = _mm256_unpacklo_ps(c, d), cd_hi = _mm256_unpackhi_ps(c, d);
        __m256 r00 = _mm256_permute2f128_ps(ab_lo, ab_hi, 0x20),
               r01 = _mm256_permute2f128_ps(ab_lo, ab_hi, 0x31);
        __m256 r10 = _mm256_permute2f128_ps(cd_lo, cd_hi, 0x20),
               r11 = _mm256_permute2f128_ps(cd_lo, cd_hi, 0x31);
        if (rem == 8) {
            _mm256_storeu_ps(d0 + 2 * ow, r00);
            _mm256_storeu_ps(d0 + 2 * ow + 8, r01);
            _mm256_storeu_ps(d1 + 2 * ow, r10);
            _mm256_storeu_ps(d1 + 2 * ow + 8, r11);
        } else if (rem >= 4) { /* 2 * rem inputs of each row: 8 and 0-6 more */
            _mm256_storeu_ps(d0 + 2 * ow, r00);
            _mm256_storeu_ps(d1 + 2 * ow, r10);
            store_first_ps(d0 + 2 * ow + 8, r01, 2 * rem - 8);
            store_first_ps(d1 + 2 * ow + 8, r11, 2 * rem - 8);
        } else {
            store_first_ps(d0 + 2 * ow, r00, 2 * rem);
            store_first_ps(d1 + 2 * ow, r10, 2 * rem);
        }
    }
}

/* The float32 2x2 stride-2 backward of one plane dx (H, W) from g and am (OH, OW): the rows of
 * windows, then zeros in the column and row that no window covers (odd W, odd H). */
static void max_pool_2x2_bwd_plane_avx2(const pool_job *j, const float *g, const int64_t *am,
                                        float *dx)
{
    int64_t H = j->H, W = j->W, OH = j->OH, OW = j->OW;
    for (int64_t oh = 0; oh < OH; oh++) {
        float *d0 = dx + 2 * oh * W;
        max_pool_2x2_bwd_row_avx2(g + oh * OW, am + oh * OW, d0, d0 + W, OW, W, 2 * oh * W);
        for (int64_t w = 2 * OW; w < W; w++) d0[w] = d0[W + w] = 0.0f;
    }
    memset(dx + 2 * OH * W, 0, (size_t)((H - 2 * OH) * W) * sizeof *dx);
}
#endif

/* ---- max_pool2d ---- */
/* 2x2 stride-2 unpadded windows that all lie inside the plane (with ceil_mode the last one of an
 * odd H or W runs past the edge: those take the general, clipping loop) */
#define MAX_POOL_2X2_TILES(j)                                                                      \
    ((j)->kh == 2 && (j)->kw == 2 && (j)->sh == 2 && (j)->sw == 2 && (j)->ph == 0 &&               \
     (j)->pw == 0 && 2 * (j)->OH <= (j)->H && 2 * (j)->OW <= (j)->W)
#define DEFINE_MAX_POOL(T, SUFFIX)                                                                 \
    static void max_pool_##SUFFIX(int64_t begin, int64_t end, void *ctx)                           \
    {                                                                                              \
        const pool_job *j = ctx;                                                                   \
        int64_t H = j->H, W = j->W, OH = j->OH, OW = j->OW;                                        \
        for (int64_t pl = begin; pl < end; pl++) {                                                 \
            const T *x = (const T *)j->in + pl * H * W;                                            \
            T *y = (T *)j->out + pl * OH * OW;                                                     \
            int64_t *am = j->argmax ? j->argmax + pl * OH * OW : NULL;                             \
            if (MAX_POOL_2X2_TILES(j)) {                                                           \
                /* the taps in scan order a b / c d; a later tap wins when greater or NaN, and a   \
                 * NaN is only displaced by a later NaN, exactly as the general loop */            \
                for (int64_t oh = 0; oh < OH; oh++) {                                              \
                    const T *r0 = x + 2 * oh * W, *r1 = r0 + W;                                    \
                    T *yr = y + oh * OW;                                                           \
                    int64_t *ar = am ? am + oh * OW : NULL, base = 2 * oh * W;                     \
                    for (int64_t ow = MAX_POOL_2X2_VECTOR(T, r0, r1, yr, ar, OW, W, base);         \
                         ow < OW; ow++) {                                                          \
                        T a = r0[2 * ow], b = r0[2 * ow + 1], c = r1[2 * ow], d = r1[2 * ow + 1];  \
                        T m = a;                                                                   \
                        int64_t k = 0;                                                             \
                        if (__builtin_expect((a != a) | (b != b) | (c != c) | (d != d), 0)) {      \
                            if (b > m || b != b) m = b, k = 1;                                     \
                            if (c > m || c != c) m = c, k = W;                                     \
                            if (d > m || d != d) m = d, k = W + 1;                                 \
                        } else { /* no NaN: flags times offsets, no data-dependent jumps */        \
                            int64_t gb = b > m;                                                    \
                            m = gb ? b : m;                                                        \
                            k = gb;                                                                \
                            int64_t gc = c > m;                                                    \
                            m = gc ? c : m;                                                        \
                            k += gc * (W - k);                                                     \
                            int64_t gd = d > m;                                                    \
                            m = gd ? d : m;                                                        \
                            k += gd * (W + 1 - k);                                                 \
                        }                                                                          \
                        yr[ow] = m;                                                                \
                        if (ar) ar[ow] = base + 2 * ow + k;                                        \
                    }                                                                              \
                }                                                                                  \
                continue;                                                                          \
            }                                                                                      \
            for (int64_t oh = 0; oh < OH; oh++) {                                                  \
                int64_t h0 = oh * j->sh - j->ph, h1 = h0 + j->kh;                                  \
                if (h0 < 0) h0 = 0;                                                                \
                if (h1 > H) h1 = H;                                                                \
                for (int64_t ow = 0; ow < OW; ow++) {                                              \
                    int64_t w0 = ow * j->sw - j->pw, w1 = w0 + j->kw;                              \
                    if (w0 < 0) w0 = 0;                                                            \
                    if (w1 > W) w1 = W;                                                            \
                    T m = -INFINITY;                                                               \
                    int64_t best = h0 * W + w0;                                                    \
                    for (int64_t ih = h0; ih < h1; ih++)                                           \
                        for (int64_t iw = w0; iw < w1; iw++) {                                     \
                            T v = x[ih * W + iw];                                                  \
                            if (v > m || v != v) {                                                 \
                                m = v;                                                             \
                                best = ih * W + iw;                                                \
                            }                                                                      \
                        }                                                                          \
                    y[oh * OW + ow] = m;                                                           \
                    if (am) am[oh * OW + ow] = best;                                               \
                }                                                                                  \
            }                                                                                      \
        }                                                                                          \
    }                                                                                              \
    static void max_pool_bwd_##SUFFIX(int64_t begin, int64_t end, void *ctx)                       \
    {                                                                                              \
        const pool_job *j = ctx;                                                                   \
        int64_t HW = j->H * j->W, P = j->OH * j->OW;                                               \
        for (int64_t pl = begin; pl < end; pl++) {                                                 \
            T *dx = (T *)j->out + pl * HW;                                                         \
            const T *g = (const T *)j->in + pl * P;                                                \
            const int64_t *am = j->indices + pl * P;                                               \
            if (MAX_POOL_2X2_BWD_VECTOR(T, j, g, am, dx)) continue;                                \
            memset(dx, 0, (size_t)HW * sizeof(T));                                                 \
            for (int64_t p = 0; p < P; p++) dx[am[p]] += g[p];                                     \
        }                                                                                          \
    }

/* outputs of a 2x2 row done by the vector loop: the whole row for float32 with AVX2 */
#if defined(__AVX2__)
#define MAX_POOL_2X2_VECTOR(T, r0, r1, yr, ar, OW, W, base)                                        \
    (sizeof(T) == 4 && (W) < INT32_MAX                                                             \
         ? (max_pool_2x2_row_avx2((const float *)(r0), (const float *)(r1), (float *)(yr), ar, OW, \
                                  W, base),                                                        \
            (OW))                                                                                  \
         : 0)
/* the backward of a whole plane for float32 2x2 stride-2 windows without padding (the windows
 * tile the plane: see max_pool_2x2_bwd_row_avx2); 0 where the general scatter runs */
#define MAX_POOL_2X2_BWD_VECTOR(T, j, g, am, dx)                                                   \
    (sizeof(T) == 4 && MAX_POOL_2X2_TILES(j) && (j)->W < INT32_MAX                                 \
         ? (max_pool_2x2_bwd_plane_avx2(j, (const float *)(g), am, (float *)(dx)), 1)              \
         : 0)
#else
#define MAX_POOL_2X2_VECTOR(T, r0, r1, yr, ar, OW, W, base) 0
#define MAX_POOL_2X2_BWD_VECTOR(T, j, g, am, dx)            0
#endif

DEFINE_MAX_POOL(float, f32)
DEFINE_MAX_POOL(double, f64)

/* out[0] y (N,C,OH,OW), out[1] argmax (int64, same shape) or NULL; in[0] x (N,C,H,W). */
int cpu_max_pool2d(ddpl_tensor **out, ddpl_tensor **in, const void *params)
{
    if (cpu_has_half(1, in)) return cpu_run_widened(cpu_max_pool2d, 2, out, 1, in, params, 0);
    pool_job j = {0};
    pool_job_init(&j, in[0], out[0], params);
    j.in = ddpl_data_ptr(in[0]);
    j.out = ddpl_data_ptr(out[0]);
    j.argmax = out[1] ? (int64_t *)ddpl_data_ptr(out[1]) : NULL;
    int64_t planes = in[0]->sizes[0] * in[0]->sizes[1];
    run_planes(planes, j.OH * j.OW * j.kh * j.kw,
               j.dt == DDPL_FLOAT32 ? max_pool_f32 : max_pool_f64, &j);
    return 0;
}

/* out[0] dx (N,C,H,W); in[0] grad (N,C,OH,OW), in[1] argmax. */
int cpu_max_pool2d_backward(ddpl_tensor **out, ddpl_tensor **in, const void *params)
{
    if (cpu_has_half(2, in))
        return cpu_run_widened(cpu_max_pool2d_backward, 1, out, 2, in, params, 0);
    pool_job j = {0};
    pool_job_init(&j, out[0], in[0], params);
    j.in = ddpl_data_ptr(in[0]);
    j.out = ddpl_data_ptr(out[0]);
    j.indices = (const int64_t *)ddpl_data_ptr(in[1]);
    int64_t planes = out[0]->sizes[0] * out[0]->sizes[1];
    run_planes(planes, j.H * j.W, j.dt == DDPL_FLOAT32 ? max_pool_bwd_f32 : max_pool_bwd_f64, &j);
    return 0;
}

/* ---- avg_pool2d ----
 * Window of output (oh, ow): rows [oh*sh - ph, +kh) clipped to [-ph, H+ph) gives the divisor
 * with count_include_pad, clipped to [0, H) the elements summed (and the divisor without). */
typedef struct {
    int64_t h0, h1, w0, w1;
    double div;
} avg_window;

static avg_window avg_window_of(const pool_job *j, int64_t oh, int64_t ow)
{
    avg_window a;
    int64_t h0 = oh * j->sh - j->ph, w0 = ow * j->sw - j->pw;
    int64_t h1 = h0 + j->kh, w1 = w0 + j->kw;
    if (h1 > j->H + j->ph) h1 = j->H + j->ph;
    if (w1 > j->W + j->pw) w1 = j->W + j->pw;
    int64_t padded = (h1 - h0) * (w1 - w0);
    a.h0 = h0 < 0 ? 0 : h0, a.w0 = w0 < 0 ? 0 : w0;
    a.h1 = h1 > j->H ? j->H : h1, a.w1 = w1 > j->W ? j->W : w1;
    a.div = (double)(j->count_include_pad ? padded : (a.h1 - a.h0) * (a.w1 - a.w0));
    if (j->divisor_override) a.div = (double)j->divisor_override;
    return a;
}

/* adaptive: output i covers [floor(i*in/out), ceil((i+1)*in/out)) */
static avg_window adaptive_window_of(const pool_job *j, int64_t oh, int64_t ow)
{
    avg_window a;
    a.h0 = oh * j->H / j->OH, a.h1 = ((oh + 1) * j->H + j->OH - 1) / j->OH;
    a.w0 = ow * j->W / j->OW, a.w1 = ((ow + 1) * j->W + j->OW - 1) / j->OW;
    a.div = (double)((a.h1 - a.h0) * (a.w1 - a.w0));
    return a;
}

/* The average pools differ only in their windows; `adaptive` picks the function. */
#define DEFINE_AVG_POOL(T, SUFFIX, NAME, WINDOW)                                                   \
    static void NAME##_##SUFFIX(int64_t begin, int64_t end, void *ctx)                             \
    {                                                                                              \
        const pool_job *j = ctx;                                                                   \
        for (int64_t pl = begin; pl < end; pl++) {                                                 \
            const T *x = (const T *)j->in + pl * j->H * j->W;                                      \
            T *y = (T *)j->out + pl * j->OH * j->OW;                                               \
            for (int64_t oh = 0; oh < j->OH; oh++)                                                 \
                for (int64_t ow = 0; ow < j->OW; ow++) {                                           \
                    avg_window a = WINDOW(j, oh, ow);                                              \
                    T s = 0;                                                                       \
                    for (int64_t ih = a.h0; ih < a.h1; ih++)                                       \
                        for (int64_t iw = a.w0; iw < a.w1; iw++) s += x[ih * j->W + iw];           \
                    y[oh * j->OW + ow] = (T)(s / a.div);                                           \
                }                                                                                  \
        }                                                                                          \
    }                                                                                              \
    static void NAME##_bwd_##SUFFIX(int64_t begin, int64_t end, void *ctx)                         \
    {                                                                                              \
        const pool_job *j = ctx;                                                                   \
        for (int64_t pl = begin; pl < end; pl++) {                                                 \
            T *dx = (T *)j->out + pl * j->H * j->W;                                                \
            const T *g = (const T *)j->in + pl * j->OH * j->OW;                                    \
            memset(dx, 0, (size_t)(j->H * j->W) * sizeof(T));                                      \
            for (int64_t oh = 0; oh < j->OH; oh++)                                                 \
                for (int64_t ow = 0; ow < j->OW; ow++) {                                           \
                    avg_window a = WINDOW(j, oh, ow);                                              \
                    T v = (T)(g[oh * j->OW + ow] / a.div);                                         \
                    for (int64_t ih = a.h0; ih < a.h1; ih++)                                       \
                        for (int64_t iw = a.w0; iw < a.w1; iw++) dx[ih * j->W + iw] += v;          \
                }                                                                                  \
        }                                                                                          \
    }

DEFINE_AVG_POOL(float, f32, avg_pool, avg_window_of)
DEFINE_AVG_POOL(double, f64, avg_pool, avg_window_of)
DEFINE_AVG_POOL(float, f32, adaptive_pool, adaptive_window_of)
DEFINE_AVG_POOL(double, f64, adaptive_pool, adaptive_window_of)

/* out[0] y (N,C,OH,OW); in[0] x (N,C,H,W); ddpl_pool_params. */
int cpu_avg_pool2d(ddpl_tensor **out, ddpl_tensor **in, const void *params)
{
    if (cpu_has_half(1, in)) return cpu_run_widened(cpu_avg_pool2d, 1, out, 1, in, params, 0);
    pool_job j = {0};
    pool_job_init(&j, in[0], out[0], params);
    j.in = ddpl_data_ptr(in[0]);
    j.out = ddpl_data_ptr(out[0]);
    run_planes(in[0]->sizes[0] * in[0]->sizes[1], j.OH * j.OW * j.kh * j.kw,
               j.dt == DDPL_FLOAT32 ? avg_pool_f32 : avg_pool_f64, &j);
    return 0;
}

/* out[0] dx (N,C,H,W); in[0] grad (N,C,OH,OW); ddpl_pool_params. */
int cpu_avg_pool2d_backward(ddpl_tensor **out, ddpl_tensor **in, const void *params)
{
    if (cpu_has_half(1, in))
        return cpu_run_widened(cpu_avg_pool2d_backward, 1, out, 1, in, params, 0);
    pool_job j = {0};
    pool_job_init(&j, out[0], in[0], params);
    j.in = ddpl_data_ptr(in[0]);
    j.out = ddpl_data_ptr(out[0]);
    run_planes(out[0]->sizes[0] * out[0]->sizes[1], j.OH * j.OW * j.kh * j.kw,
               j.dt == DDPL_FLOAT32 ? avg_pool_bwd_f32 : avg_pool_bwd_f64, &j);
    return 0;
}

/* out[0] y (N,C,OH,OW); in[0] x (N,C,H,W). */
int cpu_adaptive_avg_pool2d(ddpl_tensor **out, ddpl_tensor **in, const void *params)
{
    if (cpu_has_half(1, in))
        return cpu_run_widened(cpu_adaptive_avg_pool2d, 1, out, 1, in, params, 0);
    DDPL_UNUSED(params);
    pool_job j = {0};
    pool_job_init(&j, in[0], out[0], NULL);
    j.in = ddpl_data_ptr(in[0]);
    j.out = ddpl_data_ptr(out[0]);
    run_planes(in[0]->sizes[0] * in[0]->sizes[1], j.H * j.W + j.OH * j.OW,
               j.dt == DDPL_FLOAT32 ? adaptive_pool_f32 : adaptive_pool_f64, &j);
    return 0;
}

/* out[0] dx (N,C,H,W); in[0] grad (N,C,OH,OW). */
int cpu_adaptive_avg_pool2d_backward(ddpl_tensor **out, ddpl_tensor **in, const void *params)
{
    if (cpu_has_half(1, in))
        return cpu_run_widened(cpu_adaptive_avg_pool2d_backward, 1, out, 1, in, params, 0);
    DDPL_UNUSED(params);
    pool_job j = {0};
    pool_job_init(&j, out[0], in[0], NULL);
    j.in = ddpl_data_ptr(in[0]);
    j.out = ddpl_data_ptr(out[0]);
    run_planes(out[0]->sizes[0] * out[0]->sizes[1], j.H * j.W + j.OH * j.OW,
               j.dt == DDPL_FLOAT32 ? adaptive_pool_bwd_f32 : adaptive_pool_bwd_f64, &j);
    return 0;
}
