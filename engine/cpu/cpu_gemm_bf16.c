/* cpu/cpu_gemm_bf16.c: bfloat16 GEMM on AMX tiles or AVX512-BF16 (`vdpbf16ps`), chosen at run
 * time.
 * defines: cpu_bf16_gemm_available, cpu_bf16_gemm_kernel, cpu_bf16_gemm.
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
 * (bench/README.md, "Session 42").
 *
 * AMX (Sapphire Rapids and later): `tdpbf16ps` multiplies a 16 x 32 bf16 tile of A by a 32 x 16
 * tile of B (16 k-pairs as rows, the same k-pair words as the B panel above) into a 16 x 16
 * float32 tile, 16x the work of one vdpbf16ps. Intel cores run vdpbf16ps at the float32 FMA
 * rate, so there AMX is what makes bf16 pay. The same blocking and B panels serve it; A is
 * packed as rows (MR_AMX x KC, k contiguous, each row padded with zeros to a whole tile of k),
 * and the micro-kernel keeps a 32 x 32 float32 block in four tile registers, then stores it to a
 * buffer that store_row finishes (partial sums, alpha, beta, rounding) as for vdpbf16ps. Linux
 * hands out the tile state on request (arch_prctl ARCH_REQ_XCOMP_PERM); each thread loads the
 * tile configuration at the start of its block and releases it at the end. */
#include "cpu_gemm_bf16.h"

#include <stdlib.h>
#include <string.h>

#include "core/alloc.h"
#include "cpu_threads.h"

#if defined(__x86_64__) && defined(__GNUC__)
#include <cpuid.h>
#include <immintrin.h>
#include <sys/syscall.h>
#include <unistd.h>
#define BF16_KERNELS 1
#define BF16_TARGET  __attribute__((target("avx512f,avx512bw,avx512vl,avx512dq,avx512bf16")))
#define AMX_TARGET                                                                                 \
    __attribute__((target("avx512f,avx512bw,avx512vl,avx512dq,avx512bf16,amx-tile,amx-bf16")))
#else
#define BF16_KERNELS 0
#endif

/* Tile and blocking sizes, tuned on Zen 4 (1 thread, 1024^3 and the MLP shapes): MR x NR =
 * 12 x 32 uses 24 accumulators (8 x 48 and 6 x 64 measured the same or 1-5% slower); KC (k per
 * slice, even) 1024 makes the B panel 64 KiB, streamed from L2 as well as an L1-sized one and
 * with half the tile stores of KC 512 (7% faster); the A block (MC x KC) is 192 KiB of L2. */
enum { MR = 12, NR = 32, KC = 1024, MC = 96, NC = 2048 };

/* Which kernel runs a bf16 product, decided once (a race only computes the same answer twice). */
typedef enum { KERNEL_UNDECIDED = -1, KERNEL_WIDENED, KERNEL_AVX512_BF16, KERNEL_AMX } bf16_kernel;

#if BF16_KERNELS
/* AMX-TILE and AMX-BF16 in CPUID leaf 7, and Linux's permission to use the tile data state
 * (refused by kernels before 5.16, or where a thread's signal stack is too small for it). */
static bool amx_usable(void)
{
    unsigned a, b, c, d;
    if (!__get_cpuid_count(7, 0, &a, &b, &c, &d)) return false;
    if (!(d & (1u << 24)) || !(d & (1u << 22))) return false; /* AMX-TILE, AMX-BF16 */
    enum { ARCH_REQ_XCOMP_PERM = 0x1023, XFEATURE_XTILEDATA = 18 };
    return syscall(SYS_arch_prctl, ARCH_REQ_XCOMP_PERM, XFEATURE_XTILEDATA) == 0;
}
#endif

static bf16_kernel chosen_kernel(void)
{
    static int kernel = KERNEL_UNDECIDED;
    if (kernel == KERNEL_UNDECIDED) {
        int k = KERNEL_WIDENED;
        const char *env = getenv("DDPLUA_CPU_BF16_GEMM");
#if BF16_KERNELS
        /* __builtin_cpu_supports checks the OS's XCR0 for the AVX-512 state as well */
        if (__builtin_cpu_supports("avx512bf16") && __builtin_cpu_supports("avx512bw") &&
            __builtin_cpu_supports("avx512vl") && __builtin_cpu_supports("avx512dq"))
            k = KERNEL_AVX512_BF16;
        if (k == KERNEL_AVX512_BF16 && !(env && strcmp(env, "avx512_bf16") == 0) && amx_usable())
            k = KERNEL_AMX;
#endif
        if (env && strcmp(env, "0") == 0) k = KERNEL_WIDENED;
        kernel = k;
    }
    return (bf16_kernel)kernel;
}

bool cpu_bf16_gemm_available(void)
{
    return chosen_kernel() != KERNEL_WIDENED;
}

const char *cpu_bf16_gemm_kernel(void)
{
    static const char *const names[] = {"widened", "avx512_bf16", "amx"};
    return names[chosen_kernel()];
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

/* The k-pair words of source rows k and k+1 (k even) for the 32 contiguous elements of each
 * (masked by rows: zeros past nr; zeros for k or k+1 past kc): words 0-15 into *first16, 16-31
 * into *last16. The 16-bit unpacks interleave within 128-bit lanes; the permutes put the lanes
 * back in order. */
BF16_TARGET static inline void pair_words_32(const uint16_t *src, int64_t k, int64_t kc, int64_t sk,
                                             __mmask32 rows, __m512i *first16, __m512i *last16)
{
    const __m512i first = _mm512_set_epi64(11, 10, 3, 2, 9, 8, 1, 0);
    const __m512i second = _mm512_set_epi64(15, 14, 7, 6, 13, 12, 5, 4);
    __m512i s0 = k < kc ? _mm512_maskz_loadu_epi16(rows, src + k * sk) : _mm512_setzero_si512();
    __m512i s1 = k + 1 < kc ? _mm512_maskz_loadu_epi16(rows, src + (k + 1) * sk)
                            : _mm512_setzero_si512(); /* odd kc: the high half is zero */
    __m512i lo = _mm512_unpacklo_epi16(s0, s1), hi = _mm512_unpackhi_epi16(s0, s1);
    *first16 = _mm512_permutex2var_epi64(lo, first, hi);
    *last16 = _mm512_permutex2var_epi64(lo, second, hi);
}

/* The mask of the first nr of 32 rows. */
static __mmask32 first_rows(int64_t nr)
{
    return nr >= 32 ? 0xffffffffu : (__mmask32)((1u << nr) - 1);
}

/* A panel of 32 rows contiguous in the source (sr 1, e.g. row-major B's columns): each pair of
 * source rows k, k+1 interleaved 32 elements at a time. As a scalar loop this was 10% of a 1024^3
 * product's time on AMX, 20% per thread on 2 (each packs all of B). */
BF16_TARGET static void pack_pairs_32(uint32_t *restrict dst, const uint16_t *src, int64_t nr,
                                      int64_t kc, int64_t sk)
{
    __mmask32 rows = first_rows(nr);
    for (int64_t k = 0; k < kc; k += 2) {
        __m512i a, b;
        pair_words_32(src, k, kc, sk, rows, &a, &b);
        uint32_t *d = dst + (k / 2) * 32;
        _mm512_storeu_si512(d, a);
        _mm512_storeu_si512(d + 16, b);
    }
}

BF16_TARGET static void pack_pairs(uint32_t *restrict dst, const uint16_t *src, int W, int64_t nr,
                                   int64_t kc, int64_t sr, int64_t sk)
{
    int64_t kp = (kc + 1) / 2;
    if (sk == 1) {
        pack_word_rows(dst, src, W, nr, kc, sr);
        return;
    }
    if (sr == 1 && W == 32) {
        pack_pairs_32(dst, src, nr, kc, sk);
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

/* ---- AMX ---- */

enum { MR_AMX = 32, TILE_PAIRS = 16 }; /* A panel rows (two tiles); k-pairs per tile */

/* pack_rows_amx for a k-major source (rows contiguous, sr 1: a transposed operand, e.g. dY^T in
 * a weight gradient): 16 k-pairs at a time, each interleaved by pair_words_32 into one word
 * per row, then two 16 x 16 word transposes turn pairs-by-rows into rows-by-pairs. Element by
 * element it took a fifth of an autocast MLP block's backward. */
BF16_TARGET static void pack_rows_amx_kmajor(uint16_t *restrict dst, const uint16_t *src,
                                             int64_t nr, int64_t kc, int64_t kpp, int64_t sk)
{
    __mmask32 rows = first_rows(nr);
    uint32_t *d = (uint32_t *)dst; /* row r's pair p at d[r * kpp + p] */
    for (int64_t p0 = 0; p0 < kpp; p0 += TILE_PAIRS) {
        __m512i top[16], bottom[16]; /* rows 0-15 and 16-31 */
        for (int i = 0; i < 16; i++)
            pair_words_32(src, 2 * (p0 + i), kc, sk, rows, &top[i], &bottom[i]);
        transpose16x16(top);
        transpose16x16(bottom);
        for (int r = 0; r < 16; r++) {
            _mm512_storeu_si512(d + r * kpp + p0, top[r]);
            _mm512_storeu_si512(d + (16 + r) * kpp + p0, bottom[r]);
        }
    }
}

/* Rows [0, MR_AMX) of an A panel for AMX: row r holds its kc values of k contiguous, then zeros
 * up to 2 * kpp (a whole number of tiles); rows past nr are zero. Source element (r, k) at
 * src[r*sr + k*sk]. */
static void pack_rows_amx(uint16_t *restrict dst, const uint16_t *src, int64_t nr, int64_t kc,
                          int64_t kpp, int64_t sr, int64_t sk)
{
    int64_t width = 2 * kpp;
    if (sr == 1 && sk != 1) {
        pack_rows_amx_kmajor(dst, src, nr, kc, kpp, sk);
        return;
    }
    if (sk == 1)
        for (int64_t r = 0; r < nr; r++) memcpy(dst + r * width, src + r * sr, (size_t)kc * 2);
    else /* k-major source: read along r, where its elements are closest */
        for (int64_t k = 0; k < kc; k++)
            for (int64_t r = 0; r < nr; r++) dst[r * width + k] = src[r * sr + k * sk];
    for (int64_t r = 0; r < nr; r++) memset(dst + r * width + kc, 0, (size_t)(width - kc) * 2);
    memset(dst + nr * width, 0, (size_t)((MR_AMX - nr) * width) * sizeof *dst);
}

/* The tile shapes, loaded by each thread before its first tdpbf16ps: tmm0-3 the 32 x 32 float32
 * block (16 rows x 64 bytes each), tmm4-5 A (16 rows x 32 bf16), tmm6-7 B (16 k-pairs x 16
 * columns). */
typedef struct {
    uint8_t palette, start_row, reserved[14];
    uint16_t colsb[16];
    uint8_t rows[16];
} amx_config;

/* GCC 12's tile intrinsics tell the compiler of no memory access beyond 8 bytes of the
 * configuration (it dropped the stores of the tile shapes before ldtilecfg, which then faulted)
 * and none for tile loads and stores: the configuration goes through an asm that reads all 64
 * bytes, and AMX_MEMORY_FENCE orders the packed panels and the stored sums around the tiles. */
#define AMX_MEMORY_FENCE() __asm__ volatile("" ::: "memory")

AMX_TARGET static void amx_begin(void)
{
    amx_config cfg;
    memset(&cfg, 0, sizeof cfg);
    cfg.palette = 1;
    for (int t = 0; t < 8; t++) {
        cfg.colsb[t] = 64;
        cfg.rows[t] = 16;
    }
    __asm__ volatile("ldtilecfg %0" : : "m"(cfg));
}

AMX_TARGET static void amx_end(void)
{
    _tile_release();
}

/* One mr x NR tile (mr <= MR_AMX, nv <= NR valid columns) over kpp k-pairs (a multiple of
 * TILE_PAIRS): a is an AMX A panel (MR_AMX rows of 2 * kpp values), b a B panel (NR words per
 * pair). Rows past mr and columns past nv are zero in the panels and not stored. */
AMX_TARGET static void micro_amx(int64_t kpp, const uint16_t *a, const uint32_t *b, int mr, int nv,
                                 const tile_io *io)
{
    const int64_t a_ld = 4 * kpp; /* bytes from one A row to the next */
    const uint16_t *a_low = a + 16 * 2 * kpp;
    AMX_MEMORY_FENCE(); /* the panels are written */
    _tile_zero(0);
    _tile_zero(1);
    _tile_zero(2);
    _tile_zero(3);
    for (int64_t p = 0; p < kpp; p += TILE_PAIRS) {
        _tile_loadd(4, a + 2 * p, a_ld);
        _tile_loadd(6, b + p * NR, NR * 4);
        _tile_loadd(7, b + p * NR + 16, NR * 4);
        _tile_dpbf16ps(0, 4, 6);
        _tile_dpbf16ps(1, 4, 7);
        if (mr > 16) {
            _tile_loadd(5, a_low + 2 * p, a_ld);
            _tile_dpbf16ps(2, 5, 6);
            _tile_dpbf16ps(3, 5, 7);
        }
    }
    float c[MR_AMX][NR] __attribute__((aligned(64)));
    _tile_stored(0, &c[0][0], NR * 4);
    _tile_stored(1, &c[0][16], NR * 4);
    if (mr > 16) {
        _tile_stored(2, &c[16][0], NR * 4);
        _tile_stored(3, &c[16][16], NR * 4);
    }
    AMX_MEMORY_FENCE(); /* c is written */
    __mmask16 m0 = nv >= 16 ? 0xffff : (__mmask16)((1u << nv) - 1);
    __mmask16 m1 = nv >= 32 ? 0xffff : nv <= 16 ? 0 : (__mmask16)((1u << (nv - 16)) - 1);
    for (int i = 0; i < mr; i++)
        store_row(io, i, _mm512_load_ps(c[i]), _mm512_load_ps(c[i] + 16), m0, m1);
}

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
    bool amx; /* AMX tiles, else vdpbf16ps */
} gemm_block;

static int64_t min64(int64_t a, int64_t b)
{
    return a < b ? a : b;
}

static void run_block(const gemm_block *g)
{
    size_t esz = g->out_bf16 ? 2 : 4;
    int mr_unit = g->amx ? MR_AMX : MR;
    if (g->amx) amx_begin();
    for (int64_t jc = 0; jc < g->N; jc += NC) {
        int64_t nc = min64(NC, g->N - jc);
        for (int64_t pc = 0; pc < g->K; pc += KC) {
            int64_t kc = min64(KC, g->K - pc), kp = (kc + 1) / 2;
            /* pairs per panel: AMX's are whole tiles, the pairs past kp zero */
            int64_t kpp = g->amx ? (kp + TILE_PAIRS - 1) / TILE_PAIRS * TILE_PAIRS : kp;
            bool last = pc + kc >= g->K;
            for (int64_t jr = 0; jr < nc; jr += NR) {
                uint32_t *panel = g->bp + jr * kpp;
                pack_pairs(panel, g->B.p + pc * g->B.rs + (jc + jr) * g->B.cs, NR,
                           min64(NR, nc - jr), kc, g->B.cs, g->B.rs);
                memset(panel + kp * NR, 0, (size_t)((kpp - kp) * NR) * sizeof *panel);
            }
            for (int64_t ic = 0; ic < g->M; ic += MC) {
                int64_t mc = min64(MC, g->M - ic);
                for (int64_t ir = 0; ir < mc; ir += mr_unit) {
                    const uint16_t *src = g->A.p + (ic + ir) * g->A.rs + pc * g->A.cs;
                    if (g->amx)
                        pack_rows_amx((uint16_t *)(g->ap + ir * kpp), src, min64(MR_AMX, mc - ir),
                                      kc, kpp, g->A.rs, g->A.cs);
                    else
                        pack_pairs(g->ap + ir * kp, src, MR, min64(MR, mc - ir), kc, g->A.rs,
                                   g->A.cs);
                }
                for (int64_t jr = 0; jr < nc; jr += NR)
                    for (int64_t ir = 0; ir < mc; ir += mr_unit) {
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
                        int nv = (int)min64(NR, nc - jr);
                        if (g->amx)
                            micro_amx(kpp, (const uint16_t *)(g->ap + ir * kpp), g->bp + jr * kpp,
                                      (int)min64(MR_AMX, mc - ir), nv, &io);
                        else
                            micro_kernels[min64(MR, mc - ir)](kp, g->ap + ir * kp, g->bp + jr * kp,
                                                              nv, &io);
                    }
            }
        }
    }
    if (g->amx) amx_end();
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
    /* Each part packs its own A rows and B columns, so a split over rows packs all of B in
     * every part and one over columns all of A. With AMX, A's rows are copied (row-major A) while
     * B's pairs are interleaved, twice the work: split the columns unless they are few. */
    gemm_split s = {.whole = whole,
                    .rows = whole.amx ? whole.N < (int64_t)nt * 2 * NR : whole.M >= whole.N};
    int64_t len = s.rows ? whole.M : whole.N;
    /* blocks in whole tiles (MR or MR_AMX rows, or NR columns) */
    int64_t unit = s.rows ? (whole.amx ? MR_AMX : MR) : NR;
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
    bool bf16 = c_dtype == DDPL_BFLOAT16, amx = chosen_kernel() == KERNEL_AMX;
    if (ccs == 1 || N == 1) /* row-major C: one row of tiles after another */
        return gemm_unit_columns(
            (gemm_block){M, N, K, A, B, alpha, beta, C, crs, bf16, NULL, NULL, NULL, amx});
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
                                              NULL,
                                              amx});
    /* any other layout: the float32 product into a contiguous scratch, then element by element */
    size_t bytes = (size_t)M * (size_t)N * sizeof(float);
    float *tmp = ddpl_host_scratch_alloc(bytes);
    if (!tmp) return ddpl_error("matmul: out of memory for the bf16 product's scratch");
    int rc = gemm_unit_columns(
        (gemm_block){M, N, K, A, B, 1.0f, 0.0f, tmp, N, false, NULL, NULL, NULL, amx});
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
