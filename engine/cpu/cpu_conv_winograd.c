/* cpu/cpu_conv_winograd.c: float32 3x3 stride-1 convolution by Winograd F(2x2,3x3).
 * defines: cpu_winograd_applies, cpu_winograd_conv3x3 (see cpu_conv_winograd.h).
 *
 * Lavin & Gray's F(2x2,3x3): every 2x2 block of outputs is Y = A^T [ sum_c U_c .* V_c ] A with
 * U = G g G^T (the 3x3 kernel g as a 4x4 tile) and V = B^T d B (the 4x4 input tile d whose
 * top-left corner is (2*ty - ph, 2*tx - pw)). The sum over input channels of the 16
 * elementwise products is 16 independent GEMMs, M[k] (T, Cout) = V[k] (T, Cin) @ U[k] (Cin,
 * Cout), over T tiles at once: 16 * Cin * Cout multiply-adds per 4 outputs instead of
 * 36 * Cin * Cout. The transforms run channels-last, so that their inner loops are contiguous
 * over the channels and vectorise whatever the image size (planes of 14x14 have rows of only 7
 * tiles): each image is first copied into a zero-bordered (PH, PW, Cin) buffer, and the outputs
 * are scattered back to (Cout, OH, OW) from the transformed rows of Cout values. Work is split
 * over chunks of whole images (cpu_blas_parallel_for); a chunk's V and M (16 * channels * tiles
 * floats each) are sized to stay in the L2 cache, and each thread owns one set. The transforms
 * only add, subtract and halve, so the result matches im2col + GEMM to float32 rounding. */
#include "cpu_conv_winograd.h"

#include <limits.h>
#include <stdlib.h>
#include <string.h>
#if defined(__AVX2__)
#include <immintrin.h>
#endif

#include "core/alloc.h"
#include "cpu_blas.h"
#include "cpu_iter.h"

/* Tiles a chunk aims for (at least, in whole images): the GEMMs need a few hundred rows to run
 * near BLAS peak, and V, M of 16 * 64 channels * 196 tiles * 4 bytes (800 KiB each) stay near a
 * 1 MiB L2. */
#define WINO_CHUNK_TILES 192
/* Fewer channels than this make the GEMMs too thin to beat im2col + GEMM (the lenet's first
 * layer, 1 input channel, stays on the general path). */
#define WINO_MIN_CHANNELS 8

bool cpu_winograd_applies(const cpu_winograd_shape *s)
{
    if (s->Cin < WINO_MIN_CHANNELS || s->Cout < WINO_MIN_CHANNELS) return false;
    if (s->ph > 2 || s->pw > 2 || s->OH < 1 || s->OW < 1 || s->N < 1) return false;
    /* the GEMM dims (channels, tiles of a chunk) fit a BLAS int; bound the per-thread
     * scratch (tiles and the padded image) too */
    int64_t tiles = ((s->OH + 1) / 2) * ((s->OW + 1) / 2);
    return tiles <= INT_MAX / 64 && (s->H + 6) * (s->W + 6) <= INT_MAX / 64 && s->Cin <= 65536 &&
           s->Cout <= 65536;
}

typedef struct {
    const cpu_winograd_shape *s;
    int64_t tH, tW, TI;  /* tiles down, across, per image */
    int64_t ipc, chunks; /* images per chunk, number of chunks */
    int64_t PH, PW;      /* padded image: 2*tH + 2 rows, 2*tW + 2 columns */
    const float *in, *bias;
    const float *U; /* (16, Cin, Cout) transformed kernel */
    float *out;
    const float *dy; /* weight gradient: the output gradient (N, Cout, OH, OW) */
    float *dU;       /* weight gradient: a (16, Cin, Cout) sum per part of the chunks */
    bool *dU_live;   /* weight gradient, per part: its sums hold a chunk (else unwritten) */
    /* per thread: V (16, Tc, Cin), M (16, Tc, Cout), the padded image (PH, PW, Cin) or the
     * untransformed outputs (2*tH, 2*tW, Cout) */
    float **scratch;
} wino_job;

/* Output channels per block of the kernel and weight-gradient transforms: a block's taps,
 * gathered (9 or 16, KT_BLOCK) on the stack, let the transforms run as contiguous vector loops
 * over the output channels. */
#define KT_BLOCK 64

/* U[k][i][o] = (G g G^T)[k] for every (o, i), G = [1 0 0; .5 .5 .5; .5 -.5 .5; 0 0 1]. Loops
 * input channel by input channel, so that each of the 16 rows U[k][i][.] is written
 * contiguously (o innermost; o outermost wrote 16 scattered floats per pair and was a serial
 * ~65 us of each lenet conv2 call at 2 threads). */
static void transform_kernel(const cpu_winograd_shape *s, const float *k, bool adjoint, float *U)
{
    int64_t O = s->Cout, C = s->Cin;
    for (int64_t i = 0; i < C; i++)
        for (int64_t o0 = 0; o0 < O; o0 += KT_BLOCK) {
            int64_t nb = O - o0 < KT_BLOCK ? O - o0 : KT_BLOCK;
            float g[9][KT_BLOCK];
            for (int64_t o = 0; o < nb; o++)
                for (int ab = 0; ab < 9; ab++) /* adjoint: k is (C, O, 3, 3), flipped */
                    g[ab][o] = adjoint ? k[(i * O + o0 + o) * 9 + (8 - ab)]
                                       : k[((o0 + o) * C + i) * 9 + ab];
            float *u = U + i * O + o0; /* u[k * C * O + o] = U[k][i][o0 + o] */
            int64_t ks = C * O;
#pragma omp simd
            for (int64_t o = 0; o < nb; o++) {
                float t[4][3]; /* G g */
                for (int b = 0; b < 3; b++) {
                    float g0 = g[b][o], g1 = g[3 + b][o], g2 = g[6 + b][o];
                    t[0][b] = g0;
                    t[1][b] = 0.5f * (g0 + g1 + g2);
                    t[2][b] = 0.5f * (g0 - g1 + g2);
                    t[3][b] = g2;
                }
                for (int a = 0; a < 4; a++) { /* (G g) G^T */
                    u[(a * 4 + 0) * ks + o] = t[a][0];
                    u[(a * 4 + 1) * ks + o] = 0.5f * (t[a][0] + t[a][1] + t[a][2]);
                    u[(a * 4 + 2) * ks + o] = 0.5f * (t[a][0] - t[a][1] + t[a][2]);
                    u[(a * 4 + 3) * ks + o] = t[a][2];
                }
            }
        }
}

#if defined(__AVX2__)
/* dst[i * dstride + r] = src[r * sstride + i] for an 8x8 block: 8 channels by 8 columns of a
 * plane row become 8 pixels of 8 channels. */
static inline void transpose8x8(const float *src, int64_t sstride, float *dst, int64_t dstride)
{
    __m256 r[8], t[8], u[8];
    for (int i = 0; i < 8; i++) r[i] = _mm256_loadu_ps(src + i * sstride);
    for (int i = 0; i < 8; i += 2) {
        t[i] = _mm256_unpacklo_ps(r[i], r[i + 1]);
        t[i + 1] = _mm256_unpackhi_ps(r[i], r[i + 1]);
    }
    for (int i = 0; i < 8; i += 4) {
        u[i] = _mm256_shuffle_ps(t[i], t[i + 2], 0x44);
        u[i + 1] = _mm256_shuffle_ps(t[i], t[i + 2], 0xEE);
        u[i + 2] = _mm256_shuffle_ps(t[i + 1], t[i + 3], 0x44);
        u[i + 3] = _mm256_shuffle_ps(t[i + 1], t[i + 3], 0xEE);
    }
    for (int i = 0; i < 4; i++) {
        _mm256_storeu_ps(dst + i * dstride, _mm256_permute2f128_ps(u[i], u[i + 4], 0x20));
        _mm256_storeu_ps(dst + (i + 4) * dstride, _mm256_permute2f128_ps(u[i], u[i + 4], 0x31));
    }
}
#endif

/* dst (DH, DW, C) <- src (C, H, W) placed at row top, column left, zeros around it (clipped
 * to dst). With AVX2, blocks of 8 channels by 8 columns are transposed in registers (a row
 * narrower than a multiple of 8 takes a last block overlapping the one before: the overlap is
 * written twice with the same values); the rest goes element by element. A plain per-pixel
 * gather of all channels stalled on its loads, and a scalar blocked copy still cost more than
 * the transforms. */
static void to_hwc(const float *src, int64_t C, int64_t H, int64_t W, float *dst, int64_t DH,
                   int64_t DW, int64_t top, int64_t left)
{
    int64_t nrows = H < DH - top ? H : DH - top, ncols = W < DW - left ? W : DW - left;
    size_t fsz = sizeof *dst;
    /* zeros: the rows above and below, and left and right of each copied row */
    memset(dst, 0, (size_t)(top * DW * C) * fsz);
    memset(dst + (top + nrows) * DW * C, 0, (size_t)((DH - top - nrows) * DW * C) * fsz);
    for (int64_t h = 0; h < nrows; h++) {
        float *row = dst + (h + top) * DW * C;
        memset(row, 0, (size_t)(left * C) * fsz);
        memset(row + (left + ncols) * C, 0, (size_t)((DW - left - ncols) * C) * fsz);
    }
    int64_t HW = H * W, c_vec = 0;
#if defined(__AVX2__)
    if (ncols >= 8) {
        c_vec = C / 8 * 8;
        for (int64_t h = 0; h < nrows; h++)
            for (int64_t c0 = 0; c0 < c_vec; c0 += 8) {
                const float *xr = src + c0 * HW + h * W;
                float *pr = dst + ((h + top) * DW + left) * C + c0;
                for (int64_t w = 0;; w += 8) {
                    if (w + 8 > ncols) w = ncols - 8; /* the last, overlapping block */
                    transpose8x8(xr + w, HW, pr + w * C, C);
                    if (w + 8 >= ncols) break;
                }
            }
    }
#endif
    for (int64_t h = 0; h < nrows; h++) /* the channels left over (all without AVX2) */
        for (int64_t c = c_vec; c < C; c++) {
            const float *xr = src + c * HW + h * W;
            float *pr = dst + ((h + top) * DW + left) * C + c;
            for (int64_t w = 0; w < ncols; w++) pr[w * C] = xr[w];
        }
}

/* V[k][t0 + t][.] for the tiles t of one image x (Cin, H, W), through pad (PH, PW, Cin):
 * B^T d B with B^T = [1 0 -1 0; 0 1 1 0; 0 -1 1 0; 0 1 0 -1], vectorised over the channels. */
static void transform_image(const wino_job *j, const float *x, float *pad, float *V, int64_t Tc)
{
    const cpu_winograd_shape *s = j->s;
    int64_t C = s->Cin, PW = j->PW;
    to_hwc(x, C, s->H, s->W, pad, j->PH, PW, s->ph, s->pw);
    int64_t kstride = Tc * C; /* between V[k] and V[k+1] */
    for (int64_t ty = 0; ty < j->tH; ty++)
        for (int64_t tx = 0; tx < j->tW; tx++) {
            const float *d = pad + (2 * ty * PW + 2 * tx) * C; /* tap (a, b) at d + (a*PW + b)*C */
            float *v = V + (ty * j->tW + tx) * C;
            /* row a of B^T d is pa + sgn * pb (rows of d): d0 - d2, d1 + d2, d2 - d1, d1 - d3 */
            static const int pa[4] = {0, 1, 2, 1}, pb[4] = {2, 2, 1, 3};
            static const float sgn[4] = {-1.0f, 1.0f, -1.0f, -1.0f};
            for (int a = 0; a < 4; a++) {
                const float *ra = d + pa[a] * PW * C, *rb = d + pb[a] * PW * C;
                const float *restrict a0 = ra, *restrict a1 = ra + C, *restrict a2 = ra + 2 * C,
                                      *restrict a3 = ra + 3 * C;
                const float *restrict b0 = rb, *restrict b1 = rb + C, *restrict b2 = rb + 2 * C,
                                      *restrict b3 = rb + 3 * C;
                float sg = sgn[a];
                float *restrict v0 = v + (a * 4) * kstride, *restrict v1 = v0 + kstride,
                                *restrict v2 = v1 + kstride, *restrict v3 = v2 + kstride;
#pragma omp simd
                for (int64_t c = 0; c < C; c++) { /* sg * x is exact: the sum rounds once */
                    float t0 = a0[c] + sg * b0[c], t1 = a1[c] + sg * b1[c];
                    float t2 = a2[c] + sg * b2[c], t3 = a3[c] + sg * b3[c];
                    v0[c] = t0 - t2;
                    v1[c] = t1 + t2;
                    v2[c] = t2 - t1;
                    v3[c] = t1 - t3;
                }
            }
        }
}

/* One image y (Cout, OH, OW) from M[k][t0 + t][.]: Y = A^T m A with A^T = [1 1 1 0;
 * 0 1 -1 -1], plus the bias, vectorised over the output channels into `hwc` (2*tH, 2*tW,
 * Cout), then transposed into the planes (contiguous stores; an odd OH or OW drops the last
 * row or column of tiles' outputs). */
static void untransform_image(const wino_job *j, const float *M, int64_t Tc, float *hwc, float *y)
{
    const cpu_winograd_shape *s = j->s;
    const float *restrict bias = j->bias;
    int64_t O = s->Cout, OH = s->OH, OW = s->OW, kstride = Tc * O, RW = 2 * j->tW;
    for (int64_t ty = 0; ty < j->tH; ty++)
        for (int64_t tx = 0; tx < j->tW; tx++) {
            const float *m = M + (ty * j->tW + tx) * O;
            float *restrict q0 = hwc + (2 * ty * RW + 2 * tx) * O, *restrict q1 = q0 + O,
                            *restrict q2 = q0 + RW * O, *restrict q3 = q2 + O;
#define M_ROW(k) const float *restrict m##k = m + k * kstride
            M_ROW(0);
            M_ROW(1);
            M_ROW(2);
            M_ROW(3);
            M_ROW(4);
            M_ROW(5);
            M_ROW(6);
            M_ROW(7);
            M_ROW(8);
            M_ROW(9);
            M_ROW(10);
            M_ROW(11);
            M_ROW(12);
            M_ROW(13);
            M_ROW(14);
            M_ROW(15);
#undef M_ROW
#pragma omp simd
            for (int64_t o = 0; o < O; o++) {
                /* A^T m: row 0 = m0 + m1 + m2, row 1 = m1 - m2 - m3 (rows of 4 m's each) */
                float s0 = m0[o] + m4[o] + m8[o], s1 = m1[o] + m5[o] + m9[o];
                float s2 = m2[o] + m6[o] + m10[o], s3 = m3[o] + m7[o] + m11[o];
                float u0 = m4[o] - m8[o] - m12[o], u1 = m5[o] - m9[o] - m13[o];
                float u2 = m6[o] - m10[o] - m14[o], u3 = m7[o] - m11[o] - m15[o];
                float b = bias[o];
                q0[o] = s0 + s1 + s2 + b;
                q1[o] = s1 - s2 - s3 + b;
                q2[o] = u0 + u1 + u2 + b;
                q3[o] = u1 - u2 - u3 + b;
            }
        }
    for (int64_t o = 0; o < O; o++)
        for (int64_t h = 0; h < OH; h++) {
            const float *src = hwc + h * RW * O + o;
            float *dst = y + (o * OH + h) * OW;
            for (int64_t w = 0; w < OW; w++) dst[w] = src[w * O];
        }
}

/* Tiles, chunks of images and the padded image's size for j->s. */
static void wino_tiling(wino_job *j)
{
    const cpu_winograd_shape *s = j->s;
    j->tH = (s->OH + 1) / 2, j->tW = (s->OW + 1) / 2, j->TI = j->tH * j->tW;
    /* rounded up: the lenet's 14x14 planes (49 tiles) make chunks of 4 images, 16 chunks a
     * batch of 64, which split into CPU_PARTS_PER_THREAD (8) parts of 1-2 chunks at 1, 2
     * and 4 threads */
    j->ipc = (WINO_CHUNK_TILES + j->TI - 1) / j->TI;
    if (j->ipc > s->N) j->ipc = s->N;
    j->chunks = (s->N + j->ipc - 1) / j->ipc;
    j->PH = 2 * j->tH + 2, j->PW = 2 * j->tW + 2;
}

/* Chunk ch: its first image *n0 and image count *nimg (the last chunk may be short); returns its
 * tiles. */
static int64_t chunk_span(const wino_job *j, int64_t ch, int64_t *n0, int64_t *nimg)
{
    *n0 = ch * j->ipc;
    *nimg = *n0 + j->ipc <= j->s->N ? j->ipc : j->s->N - *n0;
    return *nimg * j->TI;
}

/* Chunks [begin, end): transform the chunk's images, 16 GEMMs, untransform. */
static void wino_chunks(int64_t begin, int64_t end, int part, int thread, void *ctx)
{
    DDPL_UNUSED(part);
    const wino_job *j = ctx;
    const cpu_winograd_shape *s = j->s;
    int64_t C = s->Cin, O = s->Cout;
    for (int64_t ch = begin; ch < end; ch++) {
        int64_t n0, nimg, Tc = chunk_span(j, ch, &n0, &nimg); /* Tc: the GEMMs' M */
        float *V = j->scratch[thread], *M = V + 16 * C * j->ipc * j->TI;
        float *pad = M + 16 * O * j->ipc * j->TI;
        for (int64_t n = 0; n < nimg; n++)
            transform_image(j, j->in + (n0 + n) * C * s->H * s->W, pad, V + n * j->TI * C, Tc);
        for (int k = 0; k < 16; k++)
            cpu_blas_gemm(DDPL_FLOAT32, false, false, Tc, O, C, 1.0, V + k * Tc * C, C,
                          j->U + k * C * O, O, 0.0, M + k * Tc * O, O);
        for (int64_t n = 0; n < nimg; n++) /* pad is free again: it holds hwc */
            untransform_image(j, M + n * j->TI * O, Tc, pad, j->out + (n0 + n) * O * s->OH * s->OW);
    }
}

/* The workspace of one call: `shared` floats, then nt blocks of per_thread floats, in one
 * scratch block of the host allocator (its cache hands the same pages back call after call: a
 * fresh malloc of this size was faulted in again on every step). Sets
 * j->scratch; returns the block (free with wino_free), or NULL with the error set. */
typedef struct {
    void *block;
    size_t bytes;
} wino_workspace;

static float *wino_alloc(wino_workspace *ws, wino_job *j, int nt, int64_t shared,
                         int64_t per_thread)
{
    int64_t total;
    if (__builtin_mul_overflow(per_thread, (int64_t)nt, &total) ||
        __builtin_add_overflow(total, shared, &total) || total > INT64_MAX / 4 / 2) {
        ddpl_error("conv2d: the Winograd workspace (%d x %lld + %lld floats) is too large", nt,
                   (long long)per_thread, (long long)shared);
        return NULL;
    }
    ws->bytes = (size_t)total * sizeof(float);
    ws->block = ddpl_host_scratch_alloc(ws->bytes);
    j->scratch = ws->block ? calloc((size_t)nt, sizeof *j->scratch) : NULL;
    if (!j->scratch) {
        if (ws->block) ddpl_host_scratch_free(ws->block, ws->bytes);
        ddpl_error("conv2d: out of memory for the Winograd workspace (%zu bytes)", ws->bytes);
        return NULL;
    }
    float *base = ws->block;
    for (int t = 0; t < nt; t++) j->scratch[t] = base + shared + t * per_thread;
    return base;
}

static void wino_free(wino_workspace *ws, wino_job *j)
{
    free(j->scratch);
    ddpl_host_scratch_free(ws->block, ws->bytes);
}

int cpu_winograd_conv3x3(const cpu_winograd_shape *s, const float *in, const float *k, bool adjoint,
                         const float *bias, float *out)
{
    wino_job j = {.s = s, .in = in, .bias = bias, .out = out};
    wino_tiling(&j);
    int nt = cpu_blas_max_threads();
    int64_t pad = j.PH * j.PW * s->Cin;
    if (pad < 4 * j.TI * s->Cout) pad = 4 * j.TI * s->Cout; /* it also holds hwc */
    int64_t per_thread = 16 * (s->Cin + s->Cout) * j.ipc * j.TI + pad;
    /* shared: U (16, Cin, Cout), then Cout zeros standing for "no bias" */
    int64_t usize = 16 * s->Cout * s->Cin;
    wino_workspace ws;
    float *U = wino_alloc(&ws, &j, nt, usize + s->Cout, per_thread);
    if (!U) return -1;
    if (!bias) {
        memset(U + usize, 0, (size_t)s->Cout * sizeof *U);
        j.bias = U + usize;
    }
    transform_kernel(s, k, adjoint, U);
    j.U = U;
    cpu_blas_parallel_for(j.chunks, 0, wino_chunks, &j);
    wino_free(&ws, &j);
    return 0;
}

/* ---- weight gradient ----
 * With y_t = A^T (U .* V_t) A for every tile t and U = G g G^T, the weight gradient is exactly
 * dg = G^T dU G with dU = sum_t (A dy_t A^T) .* V_t: the same input transform V as the forward,
 * the 2x2 output-gradient tiles transformed by A (4x2), and per k a GEMM over the tiles,
 * dU[k] (Cin, Cout) += V[k]^T (Cin, T) @ Z[k] (T, Cout), whose long inner dimension (all the
 * tiles of a chunk) runs near BLAS peak. */

/* Z[k][t0 + t][.] = A dy_t A^T for the tiles of one output-gradient image dy (Cout, OH, OW),
 * A = [1 0; 1 1; 1 -1; 0 -1]; the image is first laid out (2*tH, 2*tW, Cout), zeros past an
 * odd edge. */
static void transform_grad_image(const wino_job *j, const float *dy, float *hwc, float *Z,
                                 int64_t Tc)
{
    const cpu_winograd_shape *s = j->s;
    int64_t O = s->Cout, RW = 2 * j->tW, kstride = Tc * O;
    to_hwc(dy, O, s->OH, s->OW, hwc, 2 * j->tH, RW, 0, 0);
    for (int64_t ty = 0; ty < j->tH; ty++)
        for (int64_t tx = 0; tx < j->tW; tx++) {
            const float *restrict e00 = hwc + (2 * ty * RW + 2 * tx) * O, *restrict e01 = e00 + O,
                                  *restrict e10 = e00 + RW * O, *restrict e11 = e10 + O;
            float *z = Z + (ty * j->tW + tx) * O;
#pragma omp simd
            for (int64_t o = 0; o < O; o++) {
                /* A dy: rows d0, d0 + d1, d0 - d1, -d1; then the same on each row's columns */
                float r[4][2] = {{e00[o], e01[o]},
                                 {e00[o] + e10[o], e01[o] + e11[o]},
                                 {e00[o] - e10[o], e01[o] - e11[o]},
                                 {-e10[o], -e11[o]}};
                for (int a = 0; a < 4; a++) {
                    z[(a * 4 + 0) * kstride + o] = r[a][0];
                    z[(a * 4 + 1) * kstride + o] = r[a][0] + r[a][1];
                    z[(a * 4 + 2) * kstride + o] = r[a][0] - r[a][1];
                    z[(a * 4 + 3) * kstride + o] = -r[a][1];
                }
            }
        }
}

static void wgrad_chunks(int64_t begin, int64_t end, int part, int thread, void *ctx)
{
    const wino_job *j = ctx;
    const cpu_winograd_shape *s = j->s;
    int64_t C = s->Cin, O = s->Cout;
    for (int64_t ch = begin; ch < end; ch++) {
        int64_t n0, nimg, Tc = chunk_span(j, ch, &n0, &nimg);
        float *V = j->scratch[thread], *Z = V + 16 * C * j->ipc * j->TI;
        float *pad = Z + 16 * O * j->ipc * j->TI;
        for (int64_t n = 0; n < nimg; n++) {
            transform_image(j, j->in + (n0 + n) * C * s->H * s->W, pad, V + n * j->TI * C, Tc);
            transform_grad_image(j, j->dy + (n0 + n) * O * s->OH * s->OW, pad, Z + n * j->TI * O,
                                 Tc);
        }
        double beta = j->dU_live[part] ? 1.0 : 0.0; /* the part's first chunk sets dU */
        float *dU = j->dU + (int64_t)part * 16 * C * O;
        for (int k = 0; k < 16; k++)
            cpu_blas_gemm(DDPL_FLOAT32, true, false, C, O, Tc, 1.0, V + k * Tc * C, C,
                          Z + k * Tc * O, O, beta, dU + k * C * O, O);
        j->dU_live[part] = true;
    }
}

/* dw[o][c] = G^T dU[.][c][o] G, G = [1 0 0; .5 .5 .5; .5 -.5 .5; 0 0 1], dU the sum of the
 * parts' partial sums (in part order, skipping parts that took no chunk), for input
 * channels [begin, end): reads run contiguously over the output channels, KT_BLOCK of them at
 * a time, and the 9 taps of a block are scattered to dw at the end. */
typedef struct {
    const wino_job *j;
    int parts;
    float *dw;
} wgrad_out;

static void untransform_weight_grad_range(int64_t begin, int64_t end, void *ctx)
{
    const wgrad_out *w = ctx;
    const wino_job *j = w->j;
    int64_t C = j->s->Cin, O = j->s->Cout, ks = C * O;
    for (int64_t c = begin; c < end; c++)
        for (int64_t o0 = 0; o0 < O; o0 += KT_BLOCK) {
            int64_t nb = O - o0 < KT_BLOCK ? O - o0 : KT_BLOCK;
            float u[16][KT_BLOCK], g[9][KT_BLOCK];
            bool first = true;
            for (int t = 0; t < w->parts; t++) {
                if (!j->dU_live[t]) continue;
                const float *dU = j->dU + t * 16 * ks + c * O + o0;
                for (int k = 0; k < 16; k++)
#pragma omp simd
                    for (int64_t o = 0; o < nb; o++)
                        u[k][o] = first ? dU[k * ks + o] : u[k][o] + dU[k * ks + o];
                first = false;
            }
            if (first) memset(u, 0, sizeof u); /* no chunks (an empty batch cannot get here) */
#pragma omp simd
            for (int64_t o = 0; o < nb; o++)
                for (int b = 0; b < 4; b++) { /* G^T u, then (G^T u) G row by row */
                    float t0 = u[b][o] + 0.5f * (u[4 + b][o] + u[8 + b][o]);
                    float t1 = 0.5f * (u[4 + b][o] - u[8 + b][o]);
                    float t2 = 0.5f * (u[4 + b][o] + u[8 + b][o]) + u[12 + b][o];
                    u[b][o] = t0, u[4 + b][o] = t1, u[8 + b][o] = t2;
                }
#pragma omp simd
            for (int64_t o = 0; o < nb; o++)
                for (int i = 0; i < 3; i++) {
                    float t0 = u[4 * i][o], t1 = u[4 * i + 1][o], t2 = u[4 * i + 2][o],
                          t3 = u[4 * i + 3][o];
                    g[i * 3 + 0][o] = t0 + 0.5f * (t1 + t2);
                    g[i * 3 + 1][o] = 0.5f * (t1 - t2);
                    g[i * 3 + 2][o] = 0.5f * (t1 + t2) + t3;
                }
            for (int64_t o = 0; o < nb; o++) {
                float *dst = w->dw + ((o0 + o) * C + c) * 9;
                for (int ab = 0; ab < 9; ab++) dst[ab] = g[ab][o];
            }
        }
}

static void untransform_weight_grad(const wino_job *j, int parts, float *dw)
{
    wgrad_out w = {j, parts, dw};
    int64_t C = j->s->Cin, O = j->s->Cout;
    /* work per input channel: reading parts * 16 * O sums */
    cpu_parallel_for(C, CPU_GRAIN / (parts * 16 * O + 1) + 1, untransform_weight_grad_range, &w);
}

int cpu_winograd_weight_grad3x3(const cpu_winograd_shape *s, const float *in, const float *dy,
                                float *dw)
{
    wino_job j = {.s = s, .in = in, .dy = dy};
    wino_tiling(&j);
    int nt = cpu_blas_max_threads();
    int64_t pad = j.PH * j.PW * s->Cin, zpad = 4 * j.TI * s->Cout; /* padded x, or dy as HWC */
    int64_t usize = 16 * s->Cin * s->Cout;
    /* per thread: V, Z, the padded image; shared: the dU sums of each part of the chunks (per
     * part, not per thread, so that they add up in the same order on every run) */
    int64_t per_thread = 16 * (s->Cin + s->Cout) * j.ipc * j.TI + (pad > zpad ? pad : zpad);
    int parts = cpu_blas_parts(j.chunks);
    wino_workspace ws;
    if (!(j.dU = wino_alloc(&ws, &j, nt, (int64_t)parts * usize, per_thread))) return -1;
    /* a part's sums start with its first chunk (beta 0): no zeroing pass, and a part that got
     * no chunk is left out of the sum */
    j.dU_live = calloc((size_t)parts, sizeof *j.dU_live);
    if (!j.dU_live) {
        wino_free(&ws, &j);
        return ddpl_error("conv2d: out of memory for the Winograd weight-gradient flags");
    }
    cpu_blas_parallel_for(j.chunks, parts, wgrad_chunks, &j);
    untransform_weight_grad(&j, parts, dw);
    free(j.dU_live);
    wino_free(&ws, &j);
    return 0;
}
