/* cpu/cpu_attention.c: fused (flash) scaled dot-product attention on the CPU, forward and
 * backward, float32 and float64; the reference every other backend's fused kernel is checked
 * against.
 * defines: cpu_attention, cpu_attention_backward.
 *
 * Operands are contiguous: q (B,H,L,E), k (B,H,S,E), v (B,H,S,Ev), y (B,H,L,Ev), logsumexp
 * (B,H,L); the leading dims are walked as one of BH heads. The logsumexp has the accumulation
 * dtype: float32 for float32 inputs, float64 for float64 ones (a float32 logsumexp would cost
 * float64 gradients their digits). The (L,S) scores of a head are never stored: only one tile
 * of them per thread, sized (ATT_TILE_BYTES) to stay in L2 with the K and V rows it touches.
 * Every tile product is one BLAS GEMM (cpu_blas_gemm: sgemm/dgemm, single-threaded inside the
 * parallel loop); only the softmax work between them is written here (vectorised, cpu_expf).
 *
 * Forward (FlashAttention, online softmax), per (head, block of ATT_QROWS queries): keys are
 * visited in blocks of nk (as many as fit the tile); S = scale Q_blk K_blk^T (GEMM); per row
 * the running max m rises to m' = max(m, rowmax S), the output row and the running sum l are
 * rescaled by exp(m - m'), P = exp(S - m'), l += rowsum P, and O += P V_blk (GEMM, beta 1).
 * At the end y_i = O_i / l_i and logsumexp_i = m_i + log l_i (saved for backward). With T = 256
 * and head size 64 all keys fit one tile, so this is an exact softmax in one pass.
 * Backward (FlashAttention-2), per head, key blocks outer: D_i = dY_i.Y_i; for each key block
 * j and each block of queries that see it, S is recomputed (GEMM), P = exp(S - logsumexp_i),
 *   dV_j += P^T dY_blk,  dP = dY_blk V_j^T,  dS = scale P (dP - D_i),
 *   dQ_blk += dS K_j,  dK_j += dS^T Q_blk   (five GEMMs, one elementwise pass).
 * A head is one thread's (dQ gathers from every key block, dK/dV from every query block), so
 * nothing races; the forward splits finer, over (head, query block).
 * Causal (top-left aligned, as PyTorch): key j is hidden from query i when j > i. Key blocks
 * wholly above the diagonal are never computed (about half the work at L = S); within a tile
 * the hidden entries get P = 0. Every row sees key 0, so no row is fully masked. */
#include <limits.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "core/alloc.h"
#include "cpu_attention.h"
#include "cpu_blas.h"
#include "cpu_gemm_bf16.h"
#include "cpu_loops.h"
#include "cpu_math.h"
#include "kernel_abi/nn_params.h"

/* Queries per forward work item and per backward query block. 64 rows keep the GEMMs' M
 * dimension at a multiple of the micro-kernels' tiles while leaving enough items to balance
 * two threads over a small batch (B=4, H=4, T=256: 64 items). */
enum { ATT_QROWS = 64 };
/* Bytes of one thread's tile of scores (forward) or of P and dP together (backward): with the
 * K/V rows and Q/dY rows it meets this stays within a 512 KiB-1 MiB L2. */
enum { ATT_TILE_BYTES = 128 << 10 };
/* Keys per backward key block: the K dimension of the dQ GEMM and the M of dK/dV's. */
enum { ATT_BWD_KEYS = 64 };

/* One (B,H,rows,cols) operand: matrix (b,h) starts at base + b*sb + h*sh elements, its rows
 * ld elements apart, its columns adjacent (what BLAS takes in place). */
typedef struct {
    char *base;
    int64_t sb, sh, ld;
} att_mat;

typedef struct {
    ddpl_dtype dt; /* the accumulation dtype: of the scratch, the softmax work, the logsumexp */
    size_t esz;    /* its size */
    bool bf16;     /* bfloat16 operands on the bf16 GEMM (att_fwd_items_bf16, _bwd_) */
    size_t op_esz; /* the size of an operand's element (q, k, v, y and their gradients) */
    int64_t BH, H, L, S, E, Ev;
    int64_t fwd_keys;     /* keys per forward tile */
    int64_t bwd_rows;     /* queries per backward tile */
    int64_t scratch;      /* elements of scratch per thread */
    char *scratch_base;   /* cpu_blas_max_threads() slices of `scratch` elements */
    size_t scratch_bytes; /* of scratch_base (ddpl_host_scratch_alloc) */
    double scale;
    bool causal;
    att_mat q, k, v, y, g, lse, dq, dk, dv; /* y: the output (forward) or input; g: dY */
    atomic_int failed;                      /* bf16: a GEMM could not get its packing scratch */
} att_job;

/* Keys of the block [j0, j0 + nk) that query i sees: a prefix of the block. */
static int64_t att_visible(bool causal, int64_t i, int64_t j0, int64_t nk)
{
    if (!causal) return nk;
    int64_t n = i + 1 - j0;
    return n < 0 ? 0 : n > nk ? nk : n;
}

/* ---- the softmax work between the GEMMs, typed ----
 * fwd_rows: one tile s (mq,nk) (row stride nk) of scaled scores for queries i0.. and keys
 * j0..: turns it into P in place and updates the running max m, sum l and output rows o (mq,Ev,
 * row stride ldo) (rescaled; on the first tile o is about to be overwritten, so left alone).
 * bwd_rows: p holds S (mq,nk), dp holds dP; on return p = P and dp = dS (scale included). */
#define DEFINE_ATT_ROWS(T, EXP, SUFFIX)                                                            \
    CPU_LOOP_CLONES static void fwd_rows_##SUFFIX(T *s, int64_t mq, int64_t nk, int64_t i0,        \
                                                  int64_t j0, bool causal, bool first, T *m, T *l, \
                                                  T *o, int64_t Ev, int64_t ldo)                   \
    {                                                                                              \
        for (int64_t r = 0; r < mq; r++) {                                                         \
            T *sr = s + r * nk;                                                                    \
            int64_t vis = att_visible(causal, i0 + r, j0, nk);                                     \
            T bm = -INFINITY;                                                                      \
            _Pragma("omp simd reduction(max : bm)") for (int64_t c = 0; c < vis; c++) bm =         \
                sr[c] > bm ? sr[c] : bm;                                                           \
            T mn = bm > m[r] ? bm : m[r];                                                          \
            if (mn == -INFINITY) { /* nothing visible yet: P = 0, l and o stay */                  \
                memset(sr, 0, (size_t)nk * sizeof(T));                                             \
                continue;                                                                          \
            }                                                                                      \
            T sum = 0;                                                                             \
            _Pragma("omp simd reduction(+ : sum)") for (int64_t c = 0; c < vis; c++)               \
            {                                                                                      \
                T p = EXP(sr[c] - mn);                                                             \
                sr[c] = p;                                                                         \
                sum += p;                                                                          \
            }                                                                                      \
            for (int64_t c = vis; c < nk; c++) sr[c] = 0;                                          \
            if (first) {                                                                           \
                l[r] = sum;                                                                        \
            } else {                                                                               \
                T alpha = EXP(m[r] - mn); /* 0 while m is still -inf */                            \
                l[r] = l[r] * alpha + sum;                                                         \
                if (alpha != 1) {                                                                  \
                    T *orow = o + r * ldo;                                                         \
                    _Pragma("omp simd") for (int64_t e = 0; e < Ev; e++) orow[e] *= alpha;         \
                }                                                                                  \
            }                                                                                      \
            m[r] = mn;                                                                             \
        }                                                                                          \
    }                                                                                              \
    CPU_LOOP_CLONES static void bwd_rows_##SUFFIX(T *p, T *dp, int64_t mq, int64_t nk, int64_t i0, \
                                                  int64_t j0, bool causal, const T *lse,           \
                                                  const T *D, T scale)                             \
    {                                                                                              \
        for (int64_t r = 0; r < mq; r++) {                                                         \
            T *pr = p + r * nk, *dpr = dp + r * nk;                                                \
            int64_t vis = lse[r] == -INFINITY ? 0 : att_visible(causal, i0 + r, j0, nk);           \
            T lr = lse[r], dr = D[r];                                                              \
            _Pragma("omp simd") for (int64_t c = 0; c < vis; c++)                                  \
            {                                                                                      \
                T pv = EXP(pr[c] - lr);                                                            \
                pr[c] = pv;                                                                        \
                dpr[c] = pv * (dpr[c] - dr) * scale;                                               \
            }                                                                                      \
            for (int64_t c = vis; c < nk; c++) pr[c] = dpr[c] = 0;                                 \
        }                                                                                          \
    }                                                                                              \
    /* o (mq,Ev) /= l per row; lse = m + log l */                                                  \
    static void fwd_finish_##SUFFIX(T *o, int64_t mq, int64_t Ev, int64_t ldo, const T *m,         \
                                    const T *l, T *lse)                                            \
    {                                                                                              \
        for (int64_t r = 0; r < mq; r++) {                                                         \
            T inv = l[r] > 0 ? 1 / l[r] : 0;                                                       \
            for (int64_t e = 0; e < Ev; e++) o[r * ldo + e] *= inv;                                \
            lse[r] = l[r] > 0 ? m[r] + (T)log((double)l[r]) : -INFINITY;                           \
        }                                                                                          \
    }                                                                                              \
    /* D_i = dY_i . Y_i for the L rows of one head */                                              \
    static void row_dots_##SUFFIX(const T *g, int64_t ldg, const T *y, int64_t ldy, int64_t L,     \
                                  int64_t Ev, T *D)                                                \
    {                                                                                              \
        for (int64_t i = 0; i < L; i++) {                                                          \
            T d = 0;                                                                               \
            _Pragma("omp simd reduction(+ : d)") for (int64_t e = 0; e < Ev; e++) d +=             \
                g[i * ldg + e] * y[i * ldy + e];                                                   \
            D[i] = d;                                                                              \
        }                                                                                          \
    }

DEFINE_ATT_ROWS(float, cpu_expf, f32)
DEFINE_ATT_ROWS(double, exp, f64)

/* The typed row functions, called through void pointers (dt picks the pair). */
static void fwd_rows(const att_job *j, void *s, int64_t mq, int64_t nk, int64_t i0, int64_t j0,
                     bool first, void *m, void *l, void *o, int64_t ldo)
{
    if (j->dt == DDPL_FLOAT32)
        fwd_rows_f32(s, mq, nk, i0, j0, j->causal, first, m, l, o, j->Ev, ldo);
    else
        fwd_rows_f64(s, mq, nk, i0, j0, j->causal, first, m, l, o, j->Ev, ldo);
}

static void bwd_rows(const att_job *j, void *p, void *dp, int64_t mq, int64_t nk, int64_t i0,
                     int64_t j0, const void *lse, const void *D)
{
    if (j->dt == DDPL_FLOAT32)
        bwd_rows_f32(p, dp, mq, nk, i0, j0, j->causal, lse, D, (float)j->scale);
    else
        bwd_rows_f64(p, dp, mq, nk, i0, j0, j->causal, lse, D, j->scale);
}

/* Row r of head bh (= b*H + h) of operand m. */
static char *att_at(const att_job *j, const att_mat *m, int64_t bh, int64_t r)
{
    int64_t off = bh / j->H * m->sb + bh % j->H * m->sh + r * m->ld;
    return m->base + off * (int64_t)(m == &j->lse ? j->esz : j->op_esz);
}

/* ---- forward: items are (head, block of ATT_QROWS queries) ---- */
static void att_fwd_items(int64_t begin, int64_t end, int part, int thread, void *ctx)
{
    DDPL_UNUSED(part);
    att_job *j = ctx;
    int64_t L = j->L, S = j->S, E = j->E, Ev = j->Ev, nqb = (L + ATT_QROWS - 1) / ATT_QROWS;
    DDPL_UNUSED(Ev);
    char *s = j->scratch_base + (size_t)thread * (size_t)j->scratch * j->esz;
    char *m = s + (size_t)(ATT_QROWS * j->fwd_keys) * j->esz, *l = m + ATT_QROWS * j->esz;
    for (int64_t it = begin; it < end; it++) {
        int64_t bh = it / nqb, i0 = it % nqb * ATT_QROWS;
        int64_t mq = L - i0 < ATT_QROWS ? L - i0 : ATT_QROWS;
        const char *q = att_at(j, &j->q, bh, i0);
        char *o = att_at(j, &j->y, bh, i0);
        int64_t ldq = j->q.ld, ldk = j->k.ld, ldv = j->v.ld, ldo = j->y.ld;
        /* keys the block's last query sees; causal blocks stop at the diagonal */
        int64_t kend = j->causal && i0 + mq < S ? i0 + mq : S;
        for (int64_t r = 0; r < mq; r++) { /* running max -inf, sum 0 */
            if (j->dt == DDPL_FLOAT32) {
                ((float *)m)[r] = -INFINITY;
                ((float *)l)[r] = 0;
            } else {
                ((double *)m)[r] = -INFINITY;
                ((double *)l)[r] = 0;
            }
        }
        for (int64_t j0 = 0; j0 < kend; j0 += j->fwd_keys) {
            int64_t nk = kend - j0 < j->fwd_keys ? kend - j0 : j->fwd_keys;
            bool first = j0 == 0;
            /* S (mq,nk) = scale Q_blk (mq,E) K_blk^T */
            cpu_blas_gemm(j->dt, false, true, mq, nk, E, j->scale, q, ldq, att_at(j, &j->k, bh, j0),
                          ldk, 0.0, s, nk);
            fwd_rows(j, s, mq, nk, i0, j0, first, m, l, o, ldo);
            /* O (mq,Ev) (+)= P (mq,nk) V_blk (nk,Ev) */
            cpu_blas_gemm(j->dt, false, false, mq, Ev, nk, 1.0, s, nk, att_at(j, &j->v, bh, j0),
                          ldv, first ? 0.0 : 1.0, o, ldo);
        }
        char *lse = att_at(j, &j->lse, bh, i0);
        if (j->dt == DDPL_FLOAT32)
            fwd_finish_f32((float *)o, mq, Ev, ldo, (float *)m, (float *)l, (float *)lse);
        else
            fwd_finish_f64((double *)o, mq, Ev, ldo, (double *)m, (double *)l, (double *)lse);
    }
}

/* ---- backward: items are heads ---- */
static void att_bwd_items(int64_t begin, int64_t end, int part, int thread, void *ctx)
{
    DDPL_UNUSED(part);
    att_job *j = ctx;
    int64_t L = j->L, S = j->S, E = j->E, Ev = j->Ev, nr = j->bwd_rows;
    char *p = j->scratch_base + (size_t)thread * (size_t)j->scratch * j->esz;
    char *dp = p + (size_t)(nr * ATT_BWD_KEYS) * j->esz;
    char *D = dp + (size_t)(nr * ATT_BWD_KEYS) * j->esz;
    for (int64_t bh = begin; bh < end; bh++) {
        int64_t ldq = j->q.ld, ldk = j->k.ld, ldv = j->v.ld, ldg = j->g.ld;
        int64_t lddq = j->dq.ld, lddk = j->dk.ld, lddv = j->dv.ld;
        const char *g = att_at(j, &j->g, bh, 0), *y = att_at(j, &j->y, bh, 0);
        if (j->dt == DDPL_FLOAT32)
            row_dots_f32((const float *)g, ldg, (const float *)y, j->y.ld, L, Ev, (float *)D);
        else
            row_dots_f64((const double *)g, ldg, (const double *)y, j->y.ld, L, Ev, (double *)D);
        for (int64_t j0 = 0; j0 < S; j0 += ATT_BWD_KEYS) {
            int64_t nk = S - j0 < ATT_BWD_KEYS ? S - j0 : ATT_BWD_KEYS;
            const char *kj = att_at(j, &j->k, bh, j0), *vj = att_at(j, &j->v, bh, j0);
            char *dkj = att_at(j, &j->dk, bh, j0), *dvj = att_at(j, &j->dv, bh, j0);
            /* causal: queries before j0 see none of these keys (none at all: zeros) */
            int64_t ibegin = j->causal ? j0 : 0;
            if (ibegin >= L) {
                for (int64_t r = 0; r < nk; r++) {
                    memset(dkj + r * lddk * (int64_t)j->esz, 0, (size_t)E * j->esz);
                    memset(dvj + r * lddv * (int64_t)j->esz, 0, (size_t)Ev * j->esz);
                }
                continue;
            }
            for (int64_t i0 = ibegin; i0 < L; i0 += nr) {
                int64_t mq = L - i0 < nr ? L - i0 : nr;
                const char *qi = att_at(j, &j->q, bh, i0), *gi = att_at(j, &j->g, bh, i0);
                /* S (mq,nk) = scale Q_blk K_j^T;  dP (mq,nk) = dY_blk V_j^T */
                cpu_blas_gemm(j->dt, false, true, mq, nk, E, j->scale, qi, ldq, kj, ldk, 0.0, p,
                              nk);
                cpu_blas_gemm(j->dt, false, true, mq, nk, Ev, 1.0, gi, ldg, vj, ldv, 0.0, dp, nk);
                bwd_rows(j, p, dp, mq, nk, i0, j0, att_at(j, &j->lse, bh, i0),
                         D + i0 * (int64_t)j->esz);
                /* dV_j (nk,Ev) += P^T dY_blk;  dQ_blk (mq,E) += dS K_j;  dK_j (nk,E) += dS^T Q_blk.
                 * The first contribution overwrites (beta 0), so nothing is zeroed first: key
                 * block 0 reaches every query (causal too), the first query block every key. */
                double over_q = i0 == ibegin ? 0.0 : 1.0, over_k = j0 == 0 ? 0.0 : 1.0;
                cpu_blas_gemm(j->dt, true, false, nk, Ev, mq, 1.0, p, nk, gi, ldg, over_q, dvj,
                              lddv);
                cpu_blas_gemm(j->dt, false, false, mq, E, nk, 1.0, dp, nk, kj, ldk, over_k,
                              att_at(j, &j->dq, bh, i0), lddq);
                cpu_blas_gemm(j->dt, true, false, nk, E, mq, 1.0, dp, nk, qi, ldq, over_q, dkj,
                              lddk);
            }
        }
    }
}

/* ---- bfloat16: the same algorithm with the products on the bf16 GEMM (cpu_gemm_bf16.h) ----
 * As PyTorch's CPU flash attention for reduced types: scores, the softmax work and every sum
 * are float32; P (and in backward dS) is rounded to bfloat16 for the product that consumes it;
 * y, dq, dk and dv are rounded once from their float32 sums. A bf16 GEMM that cannot get its
 * packing scratch marks the job failed. */

/* n rows of width cols: bf16 dst (row stride ldd) <- float32 src (row stride lds) */
static void round_rows(char *dst, int64_t ldd, const float *src, int64_t lds, int64_t n,
                       int64_t cols)
{
    for (int64_t r = 0; r < n; r++)
        cpu_float_to_bf16((uint16_t *)dst + r * ldd, src + r * lds, cols);
}

static void bf16_gemm(att_job *j, int64_t M, int64_t N, int64_t K, float alpha, cpu_bf16_matrix A,
                      cpu_bf16_matrix B, float beta, float *C, int64_t ldc)
{
    if (cpu_bf16_gemm(M, N, K, alpha, A, B, beta, C, DDPL_FLOAT32, ldc, 1) < 0)
        atomic_store(&j->failed, 1);
}

static cpu_bf16_matrix rows_of(const char *p, int64_t ld)
{
    return (cpu_bf16_matrix){(const uint16_t *)p, ld, 1};
}
static cpu_bf16_matrix transposed(const char *p, int64_t ld)
{
    return (cpu_bf16_matrix){(const uint16_t *)p, 1, ld};
}

static void att_fwd_items_bf16(int64_t begin, int64_t end, int part, int thread, void *ctx)
{
    DDPL_UNUSED(part);
    att_job *j = ctx;
    int64_t L = j->L, S = j->S, E = j->E, Ev = j->Ev, nqb = (L + ATT_QROWS - 1) / ATT_QROWS;
    float *s = (float *)(j->scratch_base + (size_t)thread * (size_t)j->scratch * j->esz);
    float *m = s + ATT_QROWS * j->fwd_keys, *l = m + ATT_QROWS;
    uint16_t *pb = (uint16_t *)(l + ATT_QROWS);
    float *o = (float *)(pb + ATT_QROWS * j->fwd_keys); /* (mq, Ev), row stride Ev */
    for (int64_t it = begin; it < end; it++) {
        int64_t bh = it / nqb, i0 = it % nqb * ATT_QROWS;
        int64_t mq = L - i0 < ATT_QROWS ? L - i0 : ATT_QROWS;
        const char *q = att_at(j, &j->q, bh, i0);
        int64_t kend = j->causal && i0 + mq < S ? i0 + mq : S;
        for (int64_t r = 0; r < mq; r++) m[r] = -INFINITY, l[r] = 0;
        for (int64_t j0 = 0; j0 < kend; j0 += j->fwd_keys) {
            int64_t nk = kend - j0 < j->fwd_keys ? kend - j0 : j->fwd_keys;
            bool first = j0 == 0;
            bf16_gemm(j, mq, nk, E, (float)j->scale, rows_of(q, j->q.ld),
                      transposed(att_at(j, &j->k, bh, j0), j->k.ld), 0.0f, s, nk);
            fwd_rows_f32(s, mq, nk, i0, j0, j->causal, first, m, l, o, Ev, Ev);
            cpu_float_to_bf16(pb, s, mq * nk);
            bf16_gemm(j, mq, Ev, nk, 1.0f, rows_of((const char *)pb, nk),
                      rows_of(att_at(j, &j->v, bh, j0), j->v.ld), first ? 0.0f : 1.0f, o, Ev);
        }
        fwd_finish_f32(o, mq, Ev, Ev, m, l, (float *)att_at(j, &j->lse, bh, i0));
        round_rows(att_at(j, &j->y, bh, i0), j->y.ld, o, Ev, mq, Ev);
    }
}

static void att_bwd_items_bf16(int64_t begin, int64_t end, int part, int thread, void *ctx)
{
    DDPL_UNUSED(part);
    att_job *j = ctx;
    int64_t L = j->L, S = j->S, E = j->E, Ev = j->Ev, nr = j->bwd_rows, tile = nr * ATT_BWD_KEYS;
    float *p = (float *)(j->scratch_base + (size_t)thread * (size_t)j->scratch * j->esz);
    float *dp = p + tile, *D = dp + tile;
    uint16_t *pb = (uint16_t *)(D + L), *dsb = pb + tile;
    float *dq = (float *)(dsb + tile), *dk = dq + L * E, *dv = dk + ATT_BWD_KEYS * E;
    for (int64_t bh = begin; bh < end; bh++) {
        const char *g = att_at(j, &j->g, bh, 0), *y = att_at(j, &j->y, bh, 0);
        for (int64_t i = 0; i < L; i++) { /* D_i = dY_i . Y_i in float32 */
            const uint16_t *gi = (const uint16_t *)g + i * j->g.ld;
            const uint16_t *yi = (const uint16_t *)y + i * j->y.ld;
            float d = 0;
#pragma omp simd reduction(+ : d)
            for (int64_t e = 0; e < Ev; e++)
                d += ddpl_bf16_to_float(gi[e]) * ddpl_bf16_to_float(yi[e]);
            D[i] = d;
        }
        for (int64_t j0 = 0; j0 < S; j0 += ATT_BWD_KEYS) {
            int64_t nk = S - j0 < ATT_BWD_KEYS ? S - j0 : ATT_BWD_KEYS;
            const char *kj = att_at(j, &j->k, bh, j0), *vj = att_at(j, &j->v, bh, j0);
            int64_t ibegin = j->causal ? j0 : 0;
            if (ibegin >= L) { /* no query sees these keys: zero gradients */
                memset(dk, 0, (size_t)(nk * E) * sizeof(float));
                memset(dv, 0, (size_t)(nk * Ev) * sizeof(float));
            }
            for (int64_t i0 = ibegin; i0 < L; i0 += nr) {
                int64_t mq = L - i0 < nr ? L - i0 : nr;
                const char *qi = att_at(j, &j->q, bh, i0), *gi = att_at(j, &j->g, bh, i0);
                bf16_gemm(j, mq, nk, E, (float)j->scale, rows_of(qi, j->q.ld),
                          transposed(kj, j->k.ld), 0.0f, p, nk);
                bf16_gemm(j, mq, nk, Ev, 1.0f, rows_of(gi, j->g.ld), transposed(vj, j->v.ld), 0.0f,
                          dp, nk);
                bwd_rows_f32(p, dp, mq, nk, i0, j0, j->causal,
                             (const float *)att_at(j, &j->lse, bh, i0), D + i0, (float)j->scale);
                cpu_float_to_bf16(pb, p, mq * nk);
                cpu_float_to_bf16(dsb, dp, mq * nk);
                /* the first contribution overwrites (beta 0), as in the float32 kernel */
                float over_q = i0 == ibegin ? 0.0f : 1.0f, over_k = j0 == 0 ? 0.0f : 1.0f;
                bf16_gemm(j, nk, Ev, mq, 1.0f, transposed((const char *)pb, nk),
                          rows_of(gi, j->g.ld), over_q, dv, Ev);
                bf16_gemm(j, mq, E, nk, 1.0f, rows_of((const char *)dsb, nk), rows_of(kj, j->k.ld),
                          over_k, dq + i0 * E, E);
                bf16_gemm(j, nk, E, mq, 1.0f, transposed((const char *)dsb, nk),
                          rows_of(qi, j->q.ld), over_q, dk, E);
            }
            round_rows(att_at(j, &j->dk, bh, j0), j->dk.ld, dk, E, nk, E);
            round_rows(att_at(j, &j->dv, bh, j0), j->dv.ld, dv, Ev, nk, Ev);
        }
        round_rows(att_at(j, &j->dq, bh, 0), j->dq.ld, dq, E, L, E);
    }
}

/* The operand t, (B,H,rows,cols) or (B,H,rows) (a logsumexp: one column), as an att_mat; false
 * when BLAS cannot take its matrices in place (columns not adjacent, rows closer than a row's
 * length, a stride past a BLAS int). */
static bool att_mat_of(const ddpl_tensor *t, att_mat *m)
{
    int64_t rows = t->sizes[2], cols = t->ndim == 4 ? t->sizes[3] : 1;
    if (t->ndim == 4 && cols > 1 && t->strides[3] != 1) return false;
    m->base = ddpl_data_ptr(t);
    m->sb = t->strides[0];
    m->sh = t->strides[1];
    m->ld = rows > 1 ? t->strides[2] : cols; /* a single row: any ld >= cols serves */
    return m->sb >= 0 && m->sh >= 0 && m->ld >= cols && m->ld >= 1 && m->ld <= INT_MAX;
}

/* Fills the job's sizes from q (B,H,L,E) and v (B,H,S,Ev) and sizes the tiles. Returns 1 (not
 * an error) for what this kernel lacks (dtypes other than float32/64, sizes past a BLAS int, not
 * 4-D), so the ops layer composes instead. */
static int att_setup(att_job *j, const ddpl_tensor *q, const ddpl_tensor *v, const void *params,
                     const ddpl_tensor *lse)
{
    const ddpl_attention_params *p = params;
    memset(j, 0, sizeof *j);
    if (q->ndim != 4 || v->ndim != 4 || lse->ndim != 3) return 1;
    j->H = q->sizes[1];
    j->BH = q->sizes[0] * j->H;
    j->L = q->sizes[2];
    j->E = q->sizes[3];
    j->S = v->sizes[2];
    j->Ev = v->sizes[3];
    j->scale = p->scale;
    j->causal = p->causal;
    j->bf16 = q->dtype == DDPL_BFLOAT16 && lse->dtype == DDPL_FLOAT32 && cpu_bf16_gemm_available();
    if (!((q->dtype == DDPL_FLOAT32 && lse->dtype == DDPL_FLOAT32) ||
          (q->dtype == DDPL_FLOAT64 && lse->dtype == DDPL_FLOAT64) || j->bf16))
        return 1;
    if (j->L > INT_MAX || j->S > INT_MAX || j->E > INT_MAX || j->Ev > INT_MAX) return 1;
    j->dt = j->bf16 ? DDPL_FLOAT32 : (ddpl_dtype)q->dtype;
    j->esz = ddpl_dtype_size(j->dt);
    j->op_esz = ddpl_dtype_size((ddpl_dtype)q->dtype);
    int64_t tile = ATT_TILE_BYTES / (int64_t)j->esz; /* elements */
    /* forward: ATT_QROWS x fwd_keys scores, a multiple of 16 keys, at least 64 */
    j->fwd_keys = tile / ATT_QROWS / 16 * 16;
    if (j->fwd_keys < 64) j->fwd_keys = 64;
    /* backward: P and dP, bwd_rows x ATT_BWD_KEYS each */
    j->bwd_rows = tile / (2 * ATT_BWD_KEYS) / 16 * 16;
    if (j->bwd_rows < ATT_QROWS) j->bwd_rows = ATT_QROWS;
    return 0;
}

/* Allocates one scratch slice of `elems` elements per thread, from the host allocator's scratch
 * blocks (a malloc of this size was mapped and faulted in again on every call); -1 (error set)
 * if it cannot. Free with att_scratch_free. */
static int att_scratch(att_job *j, int64_t elems, const char *what)
{
    int nt = cpu_blas_max_threads();
    j->scratch = elems;
    j->scratch_base = NULL;
    if ((uint64_t)elems <= SIZE_MAX / j->esz / (uint64_t)nt) {
        j->scratch_bytes = (size_t)elems * j->esz * (size_t)nt;
        j->scratch_base = ddpl_host_scratch_alloc(j->scratch_bytes);
    }
    if (!j->scratch_base)
        return ddpl_error("%s: out of memory for %d threads' scratch of %lld elements", what, nt,
                          (long long)elems);
    return 0;
}

static void att_scratch_free(att_job *j)
{
    ddpl_host_scratch_free(j->scratch_base, j->scratch_bytes);
}

/* out[0] y (B,H,L,Ev), out[1] logsumexp (B,H,L); in[0] q, in[1] k, in[2] v. Operands need
 * not be contiguous: any (B,H) strides, and rows any distance apart with adjacent columns
 * (att_mat_of), so the (B,T,H,E) head views of a transformer go to BLAS without copies. */
int cpu_attention(ddpl_tensor **out, ddpl_tensor **in, const void *params)
{
    att_job j;
    int rc = att_setup(&j, in[0], in[2], params, out[1]);
    if (rc) return rc;
    if (!att_mat_of(in[0], &j.q) || !att_mat_of(in[1], &j.k) || !att_mat_of(in[2], &j.v) ||
        !att_mat_of(out[0], &j.y) || !att_mat_of(out[1], &j.lse))
        return 1;
    /* scores tile, then the running max and sum of its rows; bf16: then P rounded to bf16 (half
     * the tile's floats) and the float32 output rows */
    int64_t elems = ATT_QROWS * j.fwd_keys + 2 * ATT_QROWS;
    if (j.bf16) elems += ATT_QROWS * j.fwd_keys / 2 + ATT_QROWS * j.Ev;
    if (att_scratch(&j, elems, "attention") < 0) return -1;
    cpu_blas_parallel_for(j.BH * ((j.L + ATT_QROWS - 1) / ATT_QROWS), 0,
                          j.bf16 ? att_fwd_items_bf16 : att_fwd_items, &j);
    att_scratch_free(&j);
    return atomic_load(&j.failed) ? ddpl_error("attention: out of memory for the bf16 GEMM's "
                                               "scratch")
                                  : 0;
}

/* out[0] dq, out[1] dk, out[2] dv; in[0] dY, in[1] q, in[2] k, in[3] v, in[4] y,
 * in[5] logsumexp; strided as in cpu_attention */
int cpu_attention_backward(ddpl_tensor **out, ddpl_tensor **in, const void *params)
{
    att_job j;
    int rc = att_setup(&j, in[1], in[3], params, in[5]);
    if (rc) return rc;
    att_mat *ins[6] = {&j.g, &j.q, &j.k, &j.v, &j.y, &j.lse}, *outs[3] = {&j.dq, &j.dk, &j.dv};
    for (int i = 0; i < 6; i++)
        if (!att_mat_of(in[i], ins[i])) return 1;
    for (int i = 0; i < 3; i++)
        if (!att_mat_of(out[i], outs[i])) return 1;
    /* P and dP tiles, then D for the L rows of a head; bf16: then P and dS rounded to bf16 (one
     * tile's floats for both) and the float32 sums of dQ (the head), dK and dV (a key block) */
    int64_t elems = 2 * j.bwd_rows * ATT_BWD_KEYS + j.L;
    if (j.bf16) elems += j.bwd_rows * ATT_BWD_KEYS + j.L * j.E + ATT_BWD_KEYS * (j.E + j.Ev);
    if (att_scratch(&j, elems, "attention backward") < 0) return -1;
    cpu_blas_parallel_for(j.BH, 0, j.bf16 ? att_bwd_items_bf16 : att_bwd_items, &j);
    att_scratch_free(&j);
    return atomic_load(&j.failed) ? ddpl_error("attention backward: out of memory for the bf16 "
                                               "GEMM's scratch")
                                  : 0;
}
