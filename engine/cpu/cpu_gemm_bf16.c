/* cpu/cpu_gemm_bf16.c: bfloat16 GEMM on AVX512-BF16 (`vdpbf16ps`), chosen at run time.
 * defines: cpu_bf16_gemm_available, cpu_bf16_gemm.
 *
 * `vdpbf16ps acc, a, b` adds, in each of 16 float32 lanes, a[2l]*b[2l] + a[2l+1]*b[2l+1]: two
 * consecutive k of one row times the same two k of one column. So both operands are packed as
 * k-pairs, one 32-bit word (low half the even k) per row or column per pair:
 *   A panel: MR rows, for each k-pair the MR words of those rows (broadcast one at a time);
 *   B panel: NR columns, for each k-pair the NR words of those columns (two zmm loads).
 * The micro-kernel keeps an MR x NR float32 tile in 2*MR zmm registers (24 of the 32) and per
 * k-pair issues 2*MR dot products for 2 loads and MR broadcasts: the dot-product unit, not the
 * loads, is what is busy. Blocking is GotoBLAS's: for each NC-column block of C and KC-deep
 * slice of K, B's slice is packed once (KC x NC, L2-sized); for each MC-row block of A its slice
 * is packed (MC x KC); then every NR x MR tile runs the micro-kernel over one B panel
 * (KC x NR) and one A panel (MR x KC).
 *
 * Sums of a K longer than KC are kept between slices in a float32 scratch (the rows of this
 * call x NC); the last slice writes C once: alpha * sum + beta * C, rounded to nearest even when
 * C is bfloat16 (the integer rounding of ddpl_float_to_bf16, so the bits match the engine's
 * other bf16 stores; the CPU's vcvtneps2bf16 would flush subnormals). A C without a unit column
 * stride is written through a contiguous float32 scratch.
 *
 * Measured (AMD EPYC Zen 4, 1024^3): 221 GFLOP/s on 1 thread and 440 on 2, against sgemm's 104
 * and 205, PyTorch 1.13's bf16 (oneDNN) 222 and 439, and a vdpbf16ps loop's 235 per core
 * (bench/README.md, "Session 42"). */
#include "cpu_gemm_bf16.h"

#include <stdlib.h>
#include <string.h>

#include "core/alloc.h"
#include "cpu_threads.h"

#if defined(__x86_64__) && defined(__GNUC__)
#include <immintrin.h>
#define BF16_KERNELS 1
#define BF16_TARGET  __attribute__((target("avx512f,avx512bw,avx512vl,avx512dq,avx512bf16")))
#else
#define BF16_KERNELS 0
#endif

/* Tile and blocking sizes, tuned on Zen 4 (1 thread, 1024^3 and the MLP shapes): MR x NR =
 * 12 x 32 uses 24 accumulators (8 x 48 and 6 x 64 measured the same or 1-5% slower); KC (k per
 * slice, even) 1024 makes the B panel 64 KiB, streamed from L2 as well as an L1-sized one and
 * with half the tile stores of KC 512 (7% faster); the A block (MC x KC) is 192 KiB of L2. */
enum { MR = 12, NR = 32, KC = 1024, MC = 96, NC = 2048 };

bool cpu_bf16_gemm_available(void)
{
    static int available = -1; /* decided once; a race only computes the same answer twice */
    if (available < 0) {
        int yes = 0;
#if BF16_KERNELS
        /* __builtin_cpu_supports checks the OS's XCR0 for the AVX-512 state as well */
        yes = __builtin_cpu_supports("avx512bf16") && __builtin_cpu_supports("avx512bw") &&
              __builtin_cpu_supports("avx512vl") && __builtin_cpu_supports("avx512dq");
#endif
        const char *env = getenv("DDPLUA_CPU_BF16_GEMM");
        if (env && strcmp(env, "0") == 0) yes = 0;
        available = yes;
    }
    return available == 1;
}

#if BF16_KERNELS

/* ---- packing ----
 * dst[p*W + r], r in [0, W), p in [0, ceil(kc/2)): row r's k-pair p of the source, whose
 * element (r, k) is at src[r*sr + k*sk]; rows past nr and the missing odd k read as zero. */

/* In-register transpose of a 16 x 16 block of 32-bit words: r[i] lane j <- r[j] lane i. */
BF16_TARGET static inline void transpose16x16(__m512i r[16])
{
    __m512i t[16];
    for (int i = 0; i < 16; i += 2) {
        t[i] = _mm512_unpacklo_epi32(r[i], r[i + 1]);
        t[i + 1] = _mm512_unpackhi_epi32(r[i], r[i + 1]);
    }
    for (int i = 0; i < 16; i += 4) {
        r[i] = _mm512_unpacklo_epi64(t[i], t[i + 2]);
        r[i + 1] = _mm512_unpackhi_epi64(t[i], t[i + 2]);
        r[i + 2] = _mm512_unpacklo_epi64(t[i + 1], t[i + 3]);
        r[i + 3] = _mm512_unpackhi_epi64(t[i + 1], t[i + 3]);
    }
    for (int i = 0; i < 16; i += 8)
        for (int j = 0; j < 4; j++) {
            t[i + j] = _mm512_shuffle_i32x4(r[i + j], r[i + j + 4], 0x88);
            t[i + j + 4] = _mm512_shuffle_i32x4(r[i + j], r[i + j + 4], 0xdd);
        }
    for (int j = 0; j < 8; j++) {
        r[j] = _mm512_shuffle_i32x4(t[j], t[j + 8], 0x88);
        r[j + 8] = _mm512_shuffle_i32x4(t[j], t[j + 8], 0xdd);
    }
}

/* A row-contiguous source (sk 1): a pair is one 32-bit word of a row, so packing is a transpose
 * of words, done 16 rows x 16 pairs at a time in registers (masked loads past a row's end or
 * nr, masked stores past W); the odd k's last pair, a half word, is written alone. */
BF16_TARGET static void pack_word_rows(uint32_t *restrict dst, const uint16_t *src, int W,
                                       int64_t nr, int64_t kc, int64_t sr)
{
    int64_t kp = (kc + 1) / 2, whole = kc / 2; /* pairs, and pairs with both halves */
    for (int64_t p0 = 0; p0 < whole; p0 += 16) {
        int np = whole - p0 < 16 ? (int)(whole - p0) : 16;
        __mmask16 lanes = (__mmask16)((1u << np) - 1);
        for (int r0 = 0; r0 < W; r0 += 16) {
            int rows = W - r0 < 16 ? W - r0 : 16;
            __m512i r[16];
            for (int i = 0; i < 16; i++)
                r[i] = i < rows && r0 + i < nr
                           ? _mm512_maskz_loadu_epi32(lanes, src + (r0 + i) * sr + 2 * p0)
                           : _mm512_setzero_si512();
            transpose16x16(r);
            __mmask16 out = (__mmask16)((1u << rows) - 1);
            for (int p = 0; p < np; p++)
                _mm512_mask_storeu_epi32(dst + (p0 + p) * W + r0, out, r[p]);
        }
    }
    if (kp > whole) /* odd kc: the last pair's high half is zero */
        for (int64_t r = 0; r < W; r++) dst[whole * W + r] = r < nr ? src[r * sr + 2 * whole] : 0;
}

BF16_TARGET static void pack_pairs(uint32_t *restrict dst, const uint16_t *src, int W, int64_t nr,
                                   int64_t kc, int64_t sr, int64_t sk)
{
    int64_t kp = (kc + 1) / 2;
    if (sk == 1) {
        pack_word_rows(dst, src, W, nr, kc, sr);
        return;
    }
    for (int64_t p = 0; p < kp; p++) { /* interleave rows k and k+1 of the source */
        const uint16_t *s0 = src + 2 * p * sk, *s1 = s0 + sk;
        bool last_odd = 2 * p + 1 >= kc;
        uint32_t *d = dst + p * W;
        int64_t r = 0;
        if (last_odd)
            for (; r < nr; r++) d[r] = s0[r * sr];
        else if (sr == 1)
            for (; r < nr; r++) d[r] = s0[r] | (uint32_t)s1[r] << 16;
        else
            for (; r < nr; r++) d[r] = s0[r * sr] | (uint32_t)s1[r * sr] << 16;
        for (; r < W; r++) d[r] = 0;
    }
}

/* ---- micro-kernel ---- */

/* Where one tile's sums go. Not the last K slice: float32 into keep (ld ldk). The last: alpha *
 * (sums + earlier slices' partial) + beta * out into out (ld ldo, float32 or bfloat16). */
typedef struct {
    const float *partial; /* earlier slices' sums, or NULL for the first slice */
    int64_t ldp;
    float *keep; /* non-NULL: not the last slice */
    int64_t ldk;
    void *out;
    int64_t ldo;
    bool out_bf16;
    float alpha, beta;
} tile_io;

/* Round to nearest even, quiet NaN: ddpl_float_to_bf16 in 16 lanes. */
BF16_TARGET static inline __m256i round_to_bf16(__m512 v)
{
    __m512i u = _mm512_castps_si512(v);
    __m512i lsb = _mm512_and_si512(_mm512_srli_epi32(u, 16), _mm512_set1_epi32(1));
    __m512i r = _mm512_srli_epi32(
        _mm512_add_epi32(u, _mm512_add_epi32(lsb, _mm512_set1_epi32(0x7fff))), 16);
    __mmask16 nan = _mm512_cmp_ps_mask(v, v, _CMP_UNORD_Q);
    r = _mm512_mask_or_epi32(r, nan, _mm512_srli_epi32(u, 16), _mm512_set1_epi32(0x40));
    return _mm512_cvtepi32_epi16(r);
}

/* Writes row i's 32 sums (two vectors, nv valid columns: masks m0, m1). */
BF16_TARGET static inline void store_row(const tile_io *io, int64_t i, __m512 s0, __m512 s1,
                                         __mmask16 m0, __mmask16 m1)
{
    if (io->partial) {
        const float *p = io->partial + i * io->ldp;
        s0 = _mm512_add_ps(s0, _mm512_maskz_loadu_ps(m0, p));
        s1 = _mm512_add_ps(s1, _mm512_maskz_loadu_ps(m1, p + 16));
    }
    if (io->keep) {
        float *k = io->keep + i * io->ldk;
        _mm512_mask_storeu_ps(k, m0, s0);
        _mm512_mask_storeu_ps(k + 16, m1, s1);
        return;
    }
    __m512 alpha = _mm512_set1_ps(io->alpha), beta = _mm512_set1_ps(io->beta);
    s0 = _mm512_mul_ps(s0, alpha);
    s1 = _mm512_mul_ps(s1, alpha);
    if (io->out_bf16) {
        uint16_t *o = (uint16_t *)io->out + i * io->ldo;
        if (io->beta != 0) { /* widen the old values: a bf16 is the top half of a float32 */
            __m512i o0 = _mm512_cvtepu16_epi32(_mm256_maskz_loadu_epi16(m0, o));
            __m512i o1 = _mm512_cvtepu16_epi32(_mm256_maskz_loadu_epi16(m1, o + 16));
            s0 = _mm512_fmadd_ps(_mm512_castsi512_ps(_mm512_slli_epi32(o0, 16)), beta, s0);
            s1 = _mm512_fmadd_ps(_mm512_castsi512_ps(_mm512_slli_epi32(o1, 16)), beta, s1);
        }
        _mm256_mask_storeu_epi16(o, m0, round_to_bf16(s0));
        _mm256_mask_storeu_epi16(o + 16, m1, round_to_bf16(s1));
    } else {
        float *o = (float *)io->out + i * io->ldo;
        if (io->beta != 0) {
            s0 = _mm512_fmadd_ps(_mm512_maskz_loadu_ps(m0, o), beta, s0);
            s1 = _mm512_fmadd_ps(_mm512_maskz_loadu_ps(m1, o + 16), beta, s1);
        }
        _mm512_mask_storeu_ps(o, m0, s0);
        _mm512_mask_storeu_ps(o + 16, m1, s1);
    }
}

/* One mr x NR tile (mr <= MR rows, nv <= NR valid columns) over kp k-pairs: a is an A panel
 * (MR words per pair), b a B panel (NR words per pair). One copy per mr, so that the rows loop
 * unrolls into registers. */
#define BF16_MICRO_KERNEL(ROWS)                                                                    \
    BF16_TARGET static void micro_##ROWS(int64_t kp, const uint32_t *restrict a,                   \
                                         const uint32_t *restrict b, int nv, const tile_io *io)    \
    {                                                                                              \
        __m512 c0[ROWS], c1[ROWS];                                                                 \
        _Pragma("GCC unroll 12") for (int i = 0; i < ROWS; i++)                                    \
        {                                                                                          \
            c0[i] = _mm512_setzero_ps();                                                           \
            c1[i] = _mm512_setzero_ps();                                                           \
        }                                                                                          \
        for (int64_t p = 0; p < kp; p++, a += MR, b += NR) {                                       \
            __m512bh b0 = (__m512bh)_mm512_loadu_si512(b);                                         \
            __m512bh b1 = (__m512bh)_mm512_loadu_si512(b + 16);                                    \
            _Pragma("GCC unroll 12") for (int i = 0; i < ROWS; i++)                                \
            {                                                                                      \
                __m512bh ai = (__m512bh)_mm512_set1_epi32((int)a[i]);                              \
                c0[i] = _mm512_dpbf16_ps(c0[i], ai, b0);                                           \
                c1[i] = _mm512_dpbf16_ps(c1[i], ai, b1);                                           \
            }                                                                                      \
        }                                                                                          \
        __mmask16 m0 = nv >= 16 ? 0xffff : (__mmask16)((1u << nv) - 1);                            \
        __mmask16 m1 = nv >= 32 ? 0xffff : nv <= 16 ? 0 : (__mmask16)((1u << (nv - 16)) - 1);      \
        _Pragma("GCC unroll 12") for (int i = 0; i < ROWS; i++)                                    \
            store_row(io, i, c0[i], c1[i], m0, m1);                                                \
    }
BF16_MICRO_KERNEL(1)
BF16_MICRO_KERNEL(2)
BF16_MICRO_KERNEL(3)
BF16_MICRO_KERNEL(4)
BF16_MICRO_KERNEL(5)
BF16_MICRO_KERNEL(6)
BF16_MICRO_KERNEL(7)
BF16_MICRO_KERNEL(8)
BF16_MICRO_KERNEL(9)
BF16_MICRO_KERNEL(10)
BF16_MICRO_KERNEL(11)
BF16_MICRO_KERNEL(12)

typedef void (*micro_kernel)(int64_t, const uint32_t *, const uint32_t *, int, const tile_io *);
static const micro_kernel micro_kernels[MR + 1] = {
    NULL,    micro_1, micro_2, micro_3,  micro_4,  micro_5,  micro_6,
    micro_7, micro_8, micro_9, micro_10, micro_11, micro_12,
};

/* ---- one block of C on one thread ---- */

/* The product for C rows [0, M) and columns [0, N) of this part; out (ld ldo, unit column
 * stride) is float32 or bfloat16. Scratch: ap (MC x KC/2 words), bp (NC x KC/2 words), and
 * sums (M x NC floats) when K > KC. */
typedef struct {
    int64_t M, N, K;
    cpu_bf16_matrix A, B;
    float alpha, beta;
    void *out;
    int64_t ldo;
    bool out_bf16;
    uint32_t *ap, *bp;
    float *sums;
} gemm_block;

static int64_t min64(int64_t a, int64_t b)
{
    return a < b ? a : b;
}

static void run_block(const gemm_block *g)
{
    size_t esz = g->out_bf16 ? 2 : 4;
    for (int64_t jc = 0; jc < g->N; jc += NC) {
        int64_t nc = min64(NC, g->N - jc);
        for (int64_t pc = 0; pc < g->K; pc += KC) {
            int64_t kc = min64(KC, g->K - pc), kp = (kc + 1) / 2;
            bool last = pc + kc >= g->K;
            for (int64_t jr = 0; jr < nc; jr += NR)
                pack_pairs(g->bp + jr * kp, g->B.p + pc * g->B.rs + (jc + jr) * g->B.cs, NR,
                           min64(NR, nc - jr), kc, g->B.cs, g->B.rs);
            for (int64_t ic = 0; ic < g->M; ic += MC) {
                int64_t mc = min64(MC, g->M - ic);
                for (int64_t ir = 0; ir < mc; ir += MR)
                    pack_pairs(g->ap + ir * kp, g->A.p + (ic + ir) * g->A.rs + pc * g->A.cs, MR,
                               min64(MR, mc - ir), kc, g->A.rs, g->A.cs);
                for (int64_t jr = 0; jr < nc; jr += NR)
                    for (int64_t ir = 0; ir < mc; ir += MR) {
                        int64_t i = ic + ir, j = jr; /* j: column within the NC block */
                        float *sums = g->sums ? g->sums + i * NC + j : NULL;
                        tile_io io = {
                            .partial = pc > 0 ? sums : NULL,
                            .ldp = NC,
                            .keep = last ? NULL : sums,
                            .ldk = NC,
                            .out = (char *)g->out + (i * g->ldo + jc + j) * (int64_t)esz,
                            .ldo = g->ldo,
                            .out_bf16 = g->out_bf16,
                            .alpha = g->alpha,
                            .beta = g->beta,
                        };
                        micro_kernels[min64(MR, mc - ir)](kp, g->ap + ir * kp, g->bp + jr * kp,
                                                          (int)min64(NR, nc - jr), &io);
                    }
            }
        }
    }
}

/* ---- splitting over threads ---- */

/* Below this many multiply-adds one thread is faster than two (as cpu_blas_gemm's cut-off). */
#define SPLIT_MNK 262144.0
#define MAX_PARTS 64

typedef struct {
    gemm_block whole;
    bool rows; /* split C's rows, else its columns */
    int64_t chunk;
    void *scratch[MAX_PARTS];
} gemm_split;

static size_t ap_bytes(void)
{
    return (size_t)(MC + MR) * (KC / 2) * sizeof(uint32_t);
}
static size_t bp_bytes(int64_t N)
{
    return (size_t)((min64(N, NC) + NR - 1) / NR * NR) * (KC / 2) * sizeof(uint32_t);
}
static size_t sums_bytes(int64_t M, int64_t K)
{
    return K > KC ? (size_t)M * NC * sizeof(float) : 0;
}

static void split_part(int part, int thread, void *ctx)
{
    DDPL_UNUSED(thread);
    gemm_split *s = ctx;
    gemm_block g = s->whole;
    int64_t b = part * s->chunk, size_out = g.out_bf16 ? 2 : 4;
    char *mem = s->scratch[part];
    if (s->rows) {
        g.M = min64(s->chunk, g.M - b);
        g.A.p += b * g.A.rs;
        g.out = (char *)g.out + b * g.ldo * size_out;
    } else {
        g.N = min64(s->chunk, g.N - b);
        g.B.p += b * g.B.cs;
        g.out = (char *)g.out + b * size_out;
    }
    g.ap = (uint32_t *)mem;
    g.bp = (uint32_t *)(mem + ap_bytes());
    g.sums = sums_bytes(g.M, g.K) ? (float *)(mem + ap_bytes() + bp_bytes(g.N)) : NULL;
    run_block(&g);
}

/* Out (M,N) with a unit column stride: split over threads and run. */
static int gemm_unit_columns(gemm_block whole)
{
    int nt = cpu_threads_in_parallel() ? 1 : cpu_threads_get();
    if (nt > MAX_PARTS) nt = MAX_PARTS;
    if ((double)whole.M * (double)whole.N * (double)whole.K <= SPLIT_MNK) nt = 1;
    gemm_split s = {.whole = whole, .rows = whole.M >= whole.N};
    int64_t len = s.rows ? whole.M : whole.N;
    /* blocks in whole tiles (MR rows or NR columns) */
    int64_t unit = s.rows ? MR : NR;
    s.chunk = ((len + nt - 1) / nt + unit - 1) / unit * unit;
    int parts = (int)((len + s.chunk - 1) / s.chunk);
    size_t bytes = ap_bytes() + bp_bytes(s.rows ? whole.N : s.chunk) +
                   sums_bytes(s.rows ? s.chunk : whole.M, whole.K);
    /* all scratch first: a failure leaves C untouched */
    int got = 0;
    for (; got < parts; got++)
        if (!(s.scratch[got] = ddpl_host_scratch_alloc(bytes))) break;
    if (got == parts) {
        if (parts == 1)
            split_part(0, 0, &s);
        else
            cpu_threads_run(parts, split_part, &s);
    }
    for (int i = 0; i < got; i++) ddpl_host_scratch_free(s.scratch[i], bytes);
    return got == parts ? 0 : ddpl_error("matmul: out of memory for the bf16 packing scratch");
}

int cpu_bf16_gemm(int64_t M, int64_t N, int64_t K, float alpha, cpu_bf16_matrix A,
                  cpu_bf16_matrix B, float beta, void *C, ddpl_dtype c_dtype, int64_t crs,
                  int64_t ccs)
{
    if (M <= 0 || N <= 0 || K <= 0) return 0;
    bool bf16 = c_dtype == DDPL_BFLOAT16;
    if (ccs == 1 || N == 1) /* row-major C: one row of tiles after another */
        return gemm_unit_columns(
            (gemm_block){M, N, K, A, B, alpha, beta, C, crs, bf16, NULL, NULL, NULL});
    if (crs == 1 || M == 1) /* C^T (N,M) = B^T @ A^T, row-major with C's column stride */
        return gemm_unit_columns((gemm_block){N,
                                              M,
                                              K,
                                              {B.p, B.cs, B.rs},
                                              {A.p, A.cs, A.rs},
                                              alpha,
                                              beta,
                                              C,
                                              ccs,
                                              bf16,
                                              NULL,
                                              NULL,
                                              NULL});
    /* any other layout: the float32 product into a contiguous scratch, then element by element */
    size_t bytes = (size_t)M * (size_t)N * sizeof(float);
    float *tmp = ddpl_host_scratch_alloc(bytes);
    if (!tmp) return ddpl_error("matmul: out of memory for the bf16 product's scratch");
    int rc =
        gemm_unit_columns((gemm_block){M, N, K, A, B, 1.0f, 0.0f, tmp, N, false, NULL, NULL, NULL});
    for (int64_t i = 0; rc == 0 && i < M; i++)
        for (int64_t j = 0; j < N; j++) {
            char *o = (char *)C + (i * crs + j * ccs) * (bf16 ? 2 : 4);
            float old = beta == 0 ? 0.0f : bf16 ? ddpl_bf16_to_float(*(uint16_t *)o) : *(float *)o;
            float v = alpha * tmp[i * N + j] + beta * old;
            if (bf16)
                *(uint16_t *)o = ddpl_float_to_bf16(v);
            else
                *(float *)o = v;
        }
    ddpl_host_scratch_free(tmp, bytes);
    return rc;
}

#else /* no AVX512-BF16 kernels on this architecture */

int cpu_bf16_gemm(int64_t M, int64_t N, int64_t K, float alpha, cpu_bf16_matrix A,
                  cpu_bf16_matrix B, float beta, void *C, ddpl_dtype c_dtype, int64_t crs,
                  int64_t ccs)
{
    return ddpl_error("matmul: the bf16 GEMM needs AVX512-BF16, not built for this CPU");
}

#endif
