/* cuda/cuda_attention.cu: fused scaled dot-product attention on CUDA (FlashAttention-2's
 * algorithm, tiled in shared memory with float32 accumulation), forward and backward, with their
 * launchers.
 * defines: cuda_launch_attention, cuda_launch_attention_backward.
 *
 * Layout (see cuda_attention.h): q (BH,L,E), k (BH,S,E), v (BH,S,Ev) contiguous, E, Ev <= 128.
 * Scores live in log2 units: q is pre-multiplied by scale*log2(e) when staged, so
 * exp(scale*q.k - m) = exp2(s - m2); the saved logsumexp is converted back to natural log.
 *
 * Work split (every kernel: 4 warps, 32 lanes, 8 rows per warp):
 * - forward, dq: a block owns BR = 32 query rows (8 per warp) and walks the keys in tiles of
 *   BC = 32 (one key per lane). Per tile: lane j computes the scores of key j against its
 *   warp's 8 rows; the row max/sum are warp shuffles; the P.V (forward) or dS.K (dq) update
 *   has lane l own the head columns l, l+32, l+64, l+96 (NC of them), broadcasting p_j with
 *   __shfl_sync. Accumulators stay in registers.
 * - dk/dv: a block owns 32 keys (8 per warp) and walks the queries in tiles of 32 (one query
 *   per lane): P and dS are recomputed from the saved logsumexp and D = rowsum(dY*Y)
 *   (attention_delta_kernel), so no (L,S) matrix and no atomics: results are deterministic.
 * Shared tiles are float. The tiles read by "one row per lane" are stored transposed with a
 * padded row of 33 ([dim][33]): lane-consecutive reads hit consecutive banks, and reads of
 * lane-owned columns (index (lane+32c)*33 + j) hit banks (lane + j) mod 32, also distinct.
 * Row tiles read by broadcast ([row][dim]) need no padding.
 * Causal (top-left aligned): query tile [q0, q0+32) needs keys < q0+32 only, and key tile
 * [k0, k0+32) is seen by queries >= k0 only, so fully masked tiles are never visited; inside a
 * tile the mask is per element. Every query sees key 0, so no row is fully masked.
 * Shared memory: at most 2*32*128 + 2*128*33 floats = 66.5 KB per block (E = Ev = 128), above
 * the 48 KB default: launches opt in with cudaFuncAttributeMaxDynamicSharedMemorySize (sm_80
 * allows 163 KB, sm_90 227 KB). */
#include <math.h>

#include "cuda_attention.h"
#include "cuda_nn_util.cuh"

namespace
{

constexpr int WARPS = 4;            /* warps per block */
constexpr int RPW = 8;              /* rows (queries or keys) per warp */
constexpr int BR = WARPS * RPW;     /* rows per block: 32 */
constexpr int BC = 32;              /* columns per tile: one per lane */
constexpr int KP = BC + 1;          /* padded row of a transposed tile */
constexpr int THREADS = WARPS * 32; /* 128 */
constexpr float LOG2E = 1.4426950408889634f;
constexpr float LN2 = 0.6931471805599453f;
constexpr unsigned FULL = 0xffffffffu;

struct att_args {
    const void *q, *k, *v, *y, *dy;
    const float *lse;
    float *lse_out, *delta;
    void *out, *dq, *dk, *dv;
    int L, S, E, Ev;
    float scale;
    int causal;
};

__device__ __forceinline__ float warp_max(float v)
{
    for (int o = 16; o > 0; o >>= 1) v = fmaxf(v, __shfl_xor_sync(FULL, v, o));
    return v;
}

/* Stages rows [r0, r0+BR) of a (rows,D) matrix as float [BR][D] (rows past `rows` are 0),
 * times mul. Coalesced: consecutive threads read consecutive columns. */
template <typename T>
__device__ void stage_rows(float *dst, const T *src, int r0, int rows, int D, float mul)
{
    for (int idx = threadIdx.x; idx < BR * D; idx += THREADS) {
        int r = idx / D, e = idx - r * D;
        dst[idx] = r0 + r < rows ? nn_num<T>::load(src[(int64_t)(r0 + r) * D + e]) * mul : 0.f;
    }
}

/* Stages rows [r0, r0+BC) of a (rows,D) matrix transposed as float [D][KP]. */
template <typename T>
__device__ void stage_cols(float *dst, const T *src, int r0, int rows, int D, float mul)
{
    for (int idx = threadIdx.x; idx < BC * D; idx += THREADS) {
        int r = idx / D, e = idx - r * D;
        dst[e * KP + r] =
            r0 + r < rows ? nn_num<T>::load(src[(int64_t)(r0 + r) * D + e]) * mul : 0.f;
    }
}

/* acc[r] += sum_e rows[(row0 + r) * D + e] * colT[e * KP + lane] over e < D: the scores (or
 * dP) of a warp's RPW rows, read by broadcast, against the lane's column of a transposed tile.
 * Rows are read as float4 when D % 4 == 0: the tile starts 16-byte aligned (the dynamic shared
 * memory is declared float4 and every tile offset is a multiple of 32 * D floats) and each row
 * then starts at a multiple of 16 bytes; a quarter of the shared-memory loads. */
__device__ __forceinline__ void dot_rows(float (&acc)[RPW], const float *rows, int row0,
                                         const float *colT, int D, int lane)
{
    if ((D & 3) == 0) {
        for (int e = 0; e < D; e += 4) {
            float c0 = colT[e * KP + lane], c1 = colT[(e + 1) * KP + lane];
            float c2 = colT[(e + 2) * KP + lane], c3 = colT[(e + 3) * KP + lane];
#pragma unroll
            for (int r = 0; r < RPW; r++) {
                float4 x = *reinterpret_cast<const float4 *>(rows + (row0 + r) * D + e);
                acc[r] += x.x * c0 + x.y * c1 + x.z * c2 + x.w * c3;
            }
        }
    } else {
        for (int e = 0; e < D; e++) {
            float c = colT[e * KP + lane];
#pragma unroll
            for (int r = 0; r < RPW; r++) acc[r] += rows[(row0 + r) * D + e] * c;
        }
    }
}

/* Block -> (head, row tile); the last tiles (the most work under a causal mask) start first. */
__device__ __forceinline__ void block_tile(int rows, int64_t &bh, int &r0)
{
    int nt = (rows + BR - 1) / BR;
    bh = blockIdx.x / nt;
    r0 = (nt - 1 - (int)(blockIdx.x % nt)) * BR;
}

/* ---- forward ---- */

template <typename T, int NC>
__global__ void __launch_bounds__(THREADS) attention_fwd_kernel(att_args a)
{
    extern __shared__ float4 sm_raw[]; /* float4: 16-byte aligned tiles (dot_rows) */
    float *sm = reinterpret_cast<float *>(sm_raw);
    const int L = a.L, S = a.S, E = a.E, Ev = a.Ev;
    float *Qs = sm;          /* [BR][E], q * scale * log2e */
    float *Kt = Qs + BR * E; /* [E][KP] */
    float *Vt = Kt + E * KP; /* [Ev][KP] */
    int64_t bh;
    int q0;
    block_tile(L, bh, q0);
    const T *q = (const T *)a.q + bh * L * E, *k = (const T *)a.k + bh * S * E;
    const T *v = (const T *)a.v + bh * S * Ev;
    const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
    stage_rows(Qs, q, q0, L, E, a.scale * LOG2E);

    float m[RPW], l[RPW], acc[RPW][NC];
#pragma unroll
    for (int r = 0; r < RPW; r++) {
        m[r] = -INFINITY;
        l[r] = 0.f;
#pragma unroll
        for (int c = 0; c < NC; c++) acc[r][c] = 0.f;
    }
    const int kend = a.causal ? min(S, q0 + BR) : S;
    for (int k0 = 0; k0 < kend; k0 += BC) {
        __syncthreads(); /* the previous tile is consumed (and Qs is staged) */
        stage_cols(Kt, k, k0, S, E, 1.f);
        stage_cols(Vt, v, k0, S, Ev, 1.f);
        __syncthreads();
        const int j = k0 + lane;
        float s[RPW];
#pragma unroll
        for (int r = 0; r < RPW; r++) s[r] = 0.f;
        dot_rows(s, Qs, warp * RPW, Kt, E, lane);
#pragma unroll
        for (int r = 0; r < RPW; r++) {
            int i = q0 + warp * RPW + r;
            bool vis = j < S && (!a.causal || j <= i);
            float sr = vis ? s[r] : -INFINITY;
            float mn = fmaxf(m[r], warp_max(sr));
            float mu = mn == -INFINITY ? 0.f : mn; /* keeps exp2's argument finite */
            float p = exp2f(sr - mu);              /* 0 where hidden */
            float alpha = exp2f(m[r] - mu);        /* 0 on the first visible tile */
            l[r] = l[r] * alpha + warp_sum(p);
            m[r] = mn;
#pragma unroll
            for (int c = 0; c < NC; c++) acc[r][c] *= alpha;
            s[r] = p;
        }
        for (int jj = 0; jj < BC; jj++) {
            float vv[NC];
#pragma unroll
            for (int c = 0; c < NC; c++) {
                int e = lane + 32 * c;
                vv[c] = e < Ev ? Vt[e * KP + jj] : 0.f;
            }
#pragma unroll
            for (int r = 0; r < RPW; r++) {
                float pj = __shfl_sync(FULL, s[r], jj);
#pragma unroll
                for (int c = 0; c < NC; c++) acc[r][c] += pj * vv[c];
            }
        }
    }
    T *y = (T *)a.out + bh * L * Ev;
    float *lse = a.lse_out + bh * L;
#pragma unroll
    for (int r = 0; r < RPW; r++) {
        int i = q0 + warp * RPW + r;
        if (i >= L) continue;
        float inv = l[r] > 0.f ? 1.f / l[r] : 0.f;
#pragma unroll
        for (int c = 0; c < NC; c++) {
            int e = lane + 32 * c;
            if (e < Ev) y[(int64_t)i * Ev + e] = nn_num<T>::store(acc[r][c] * inv);
        }
        if (lane == 0) lse[i] = l[r] > 0.f ? (m[r] + log2f(l[r])) * LN2 : -INFINITY;
    }
}

/* ---- backward ---- */

/* delta[row] = sum_e dY[row,e] * Y[row,e]: one warp per row of the (rows,Ev) matrices. */
template <typename T>
__global__ void __launch_bounds__(THREADS)
    attention_delta_kernel(const T *dy, const T *y, float *delta, int64_t rows, int Ev)
{
    const int lane = threadIdx.x & 31;
    for (int64_t row = (int64_t)blockIdx.x * WARPS + (threadIdx.x >> 5); row < rows;
         row += (int64_t)gridDim.x * WARPS) {
        float d = 0.f;
        for (int e = lane; e < Ev; e += 32)
            d += nn_num<T>::load(dy[row * Ev + e]) * nn_num<T>::load(y[row * Ev + e]);
        d = warp_sum(d);
        if (lane == 0) delta[row] = d;
    }
}

/* dq: a block owns 32 query rows and walks the key tiles, as the forward.
 *   P = exp2(s - lse2), dP = dY.v_j, dS = P (dP - D), dq = scale * sum_j dS_j k_j */
template <typename T, int NC>
__global__ void __launch_bounds__(THREADS) attention_dq_kernel(att_args a)
{
    extern __shared__ float4 sm_raw[]; /* float4: 16-byte aligned tiles (dot_rows) */
    float *sm = reinterpret_cast<float *>(sm_raw);
    const int L = a.L, S = a.S, E = a.E, Ev = a.Ev;
    float *Qs = sm;           /* [BR][E], q * scale * log2e */
    float *Gs = Qs + BR * E;  /* [BR][Ev], dY */
    float *Kt = Gs + BR * Ev; /* [E][KP] */
    float *Vt = Kt + E * KP;  /* [Ev][KP] */
    int64_t bh;
    int q0;
    block_tile(L, bh, q0);
    const T *q = (const T *)a.q + bh * L * E, *k = (const T *)a.k + bh * S * E;
    const T *v = (const T *)a.v + bh * S * Ev, *dy = (const T *)a.dy + bh * L * Ev;
    const float *lse = a.lse + bh * L, *delta = a.delta + bh * L;
    const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
    stage_rows(Qs, q, q0, L, E, a.scale * LOG2E);
    stage_rows(Gs, dy, q0, L, Ev, 1.f);

    float lse2[RPW], D[RPW], dq[RPW][NC];
#pragma unroll
    for (int r = 0; r < RPW; r++) {
        int i = q0 + warp * RPW + r;
        lse2[r] = i < L ? lse[i] * LOG2E : 0.f;
        D[r] = i < L ? delta[i] : 0.f;
#pragma unroll
        for (int c = 0; c < NC; c++) dq[r][c] = 0.f;
    }
    const int kend = a.causal ? min(S, q0 + BR) : S;
    for (int k0 = 0; k0 < kend; k0 += BC) {
        __syncthreads();
        stage_cols(Kt, k, k0, S, E, 1.f);
        stage_cols(Vt, v, k0, S, Ev, 1.f);
        __syncthreads();
        const int j = k0 + lane;
        float s[RPW], dp[RPW];
#pragma unroll
        for (int r = 0; r < RPW; r++) s[r] = dp[r] = 0.f;
        dot_rows(s, Qs, warp * RPW, Kt, E, lane);
        dot_rows(dp, Gs, warp * RPW, Vt, Ev, lane);
#pragma unroll
        for (int r = 0; r < RPW; r++) {
            int i = q0 + warp * RPW + r;
            bool vis = i < L && j < S && (!a.causal || j <= i);
            float p = vis ? exp2f(s[r] - lse2[r]) : 0.f;
            s[r] = p * (dp[r] - D[r]); /* dS */
        }
        for (int jj = 0; jj < BC; jj++) {
            float kk[NC];
#pragma unroll
            for (int c = 0; c < NC; c++) {
                int e = lane + 32 * c;
                kk[c] = e < E ? Kt[e * KP + jj] : 0.f;
            }
#pragma unroll
            for (int r = 0; r < RPW; r++) {
                float ds = __shfl_sync(FULL, s[r], jj);
#pragma unroll
                for (int c = 0; c < NC; c++) dq[r][c] += ds * kk[c];
            }
        }
    }
    T *out = (T *)a.dq + bh * L * E;
#pragma unroll
    for (int r = 0; r < RPW; r++) {
        int i = q0 + warp * RPW + r;
        if (i >= L) continue;
#pragma unroll
        for (int c = 0; c < NC; c++) {
            int e = lane + 32 * c;
            if (e < E) out[(int64_t)i * E + e] = nn_num<T>::store(dq[r][c] * a.scale);
        }
    }
}

/* dk, dv: a block owns 32 keys and walks the query tiles (one query per lane).
 *   dv_j = sum_i P_ij dY_i,  dk_j = scale * sum_i dS_ij q_i */
template <typename T, int NC>
__global__ void __launch_bounds__(THREADS) attention_dkdv_kernel(att_args a)
{
    extern __shared__ float4 sm_raw[]; /* float4: 16-byte aligned tiles (dot_rows) */
    float *sm = reinterpret_cast<float *>(sm_raw);
    const int L = a.L, S = a.S, E = a.E, Ev = a.Ev;
    float *Ks = sm;           /* [BR][E] */
    float *Vs = Ks + BR * E;  /* [BR][Ev] */
    float *Qt = Vs + BR * Ev; /* [E][KP], q * scale * log2e */
    float *Gt = Qt + E * KP;  /* [Ev][KP], dY */
    int64_t bh;
    int k0;
    block_tile(S, bh, k0);
    const T *q = (const T *)a.q + bh * L * E, *k = (const T *)a.k + bh * S * E;
    const T *v = (const T *)a.v + bh * S * Ev, *dy = (const T *)a.dy + bh * L * Ev;
    const float *lse = a.lse + bh * L, *delta = a.delta + bh * L;
    const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
    stage_rows(Ks, k, k0, S, E, 1.f);
    stage_rows(Vs, v, k0, S, Ev, 1.f);

    float dk[RPW][NC], dv[RPW][NC];
#pragma unroll
    for (int r = 0; r < RPW; r++)
#pragma unroll
        for (int c = 0; c < NC; c++) dk[r][c] = dv[r][c] = 0.f;
    /* causal: queries before k0 see none of these keys (k0 is a multiple of 32) */
    for (int i0 = a.causal ? k0 : 0; i0 < L; i0 += BC) {
        __syncthreads();
        stage_cols(Qt, q, i0, L, E, a.scale * LOG2E);
        stage_cols(Gt, dy, i0, L, Ev, 1.f);
        __syncthreads();
        const int i = i0 + lane;
        const float lse2 = i < L ? lse[i] * LOG2E : 0.f, D = i < L ? delta[i] : 0.f;
        float p[RPW], ds[RPW];
#pragma unroll
        for (int r = 0; r < RPW; r++) p[r] = ds[r] = 0.f;
        dot_rows(p, Ks, warp * RPW, Qt, E, lane);
        dot_rows(ds, Vs, warp * RPW, Gt, Ev, lane);
#pragma unroll
        for (int r = 0; r < RPW; r++) {
            int jr = k0 + warp * RPW + r;
            bool vis = i < L && jr < S && (!a.causal || jr <= i);
            p[r] = vis ? exp2f(p[r] - lse2) : 0.f;
            ds[r] = p[r] * (ds[r] - D);
        }
        for (int ii = 0; ii < BC; ii++) {
            float gg[NC], qq[NC];
#pragma unroll
            for (int c = 0; c < NC; c++) {
                int e = lane + 32 * c;
                gg[c] = e < Ev ? Gt[e * KP + ii] : 0.f;
                qq[c] = e < E ? Qt[e * KP + ii] : 0.f;
            }
#pragma unroll
            for (int r = 0; r < RPW; r++) {
                float pi = __shfl_sync(FULL, p[r], ii), di = __shfl_sync(FULL, ds[r], ii);
#pragma unroll
                for (int c = 0; c < NC; c++) {
                    dv[r][c] += pi * gg[c];
                    dk[r][c] += di * qq[c];
                }
            }
        }
    }
    /* Qt holds q * scale * log2e: dk = scale * sum dS q = (sum dS Qt) / log2e */
    T *dko = (T *)a.dk + bh * S * E, *dvo = (T *)a.dv + bh * S * Ev;
#pragma unroll
    for (int r = 0; r < RPW; r++) {
        int jr = k0 + warp * RPW + r;
        if (jr >= S) continue;
#pragma unroll
        for (int c = 0; c < NC; c++) {
            int e = lane + 32 * c;
            if (e < E) dko[(int64_t)jr * E + e] = nn_num<T>::store(dk[r][c] * (1.f / LOG2E));
            if (e < Ev) dvo[(int64_t)jr * Ev + e] = nn_num<T>::store(dv[r][c]);
        }
    }
}

/* ---- launch ---- */

enum att_kind { ATT_FWD, ATT_DQ, ATT_DKDV };

/* Dynamic shared memory of each kernel, in bytes (see the layouts above). */
size_t att_smem(att_kind kind, int E, int Ev)
{
    size_t f = kind == ATT_FWD ? (size_t)BR * E + (size_t)(E + Ev) * KP
                               : (size_t)BR * (E + Ev) + (size_t)(E + Ev) * KP;
    return f * sizeof(float);
}

template <typename T, int NC>
int att_launch_nc(att_kind kind, const att_args &a, int64_t BH, const char *what)
{
    void (*kern)(att_args) = kind == ATT_FWD  ? attention_fwd_kernel<T, NC>
                             : kind == ATT_DQ ? attention_dq_kernel<T, NC>
                                              : attention_dkdv_kernel<T, NC>;
    size_t smem = att_smem(kind, a.E, a.Ev);
    if (cuda_check(cudaFuncSetAttribute((const void *)kern,
                                        cudaFuncAttributeMaxDynamicSharedMemorySize, (int)smem),
                   what) < 0)
        return -1;
    int rows = kind == ATT_DKDV ? a.S : a.L;
    int64_t blocks = BH * ((rows + BR - 1) / BR); /* <= INT32_MAX: checked by the caller */
    kern<<<(unsigned)blocks, THREADS, smem, cuda_stream()>>>(a);
    return cuda_check(cudaGetLastError(), what);
}

/* NC = 32-wide column chunks per lane, enough for max(E, Ev) <= 128. */
template <typename T> int att_launch(att_kind kind, const att_args &a, int64_t BH, const char *what)
{
    int d = a.E > a.Ev ? a.E : a.Ev;
    if (d <= 32) return att_launch_nc<T, 1>(kind, a, BH, what);
    if (d <= 64) return att_launch_nc<T, 2>(kind, a, BH, what);
    if (d <= 96) return att_launch_nc<T, 3>(kind, a, BH, what);
    return att_launch_nc<T, 4>(kind, a, BH, what);
}

att_args make_args(const cuda_attention_shape *s)
{
    att_args a = {};
    a.L = s->L;
    a.S = s->S;
    a.E = s->E;
    a.Ev = s->Ev;
    a.scale = s->scale;
    a.causal = s->causal;
    return a;
}

int unsupported(int dtype, const char *what)
{
    return ddpl_error("%s: the fused attention kernel has no dtype %d (float32, float16 and "
                      "bfloat16 only)",
                      what, dtype);
}

} // namespace

extern "C" int cuda_launch_attention(const cuda_attention_shape *s, int dtype, const void *q,
                                     const void *k, const void *v, void *y, float *lse,
                                     const char *what)
{
    if (s->BH == 0 || s->L == 0) return 0;
    att_args a = make_args(s);
    a.q = q;
    a.k = k;
    a.v = v;
    a.out = y;
    a.lse_out = lse;
    switch (dtype) {
    case DDPL_FLOAT32:
        return att_launch<float>(ATT_FWD, a, s->BH, what);
    case DDPL_FLOAT16:
        return att_launch<__half>(ATT_FWD, a, s->BH, what);
    case DDPL_BFLOAT16:
        return att_launch<__nv_bfloat16>(ATT_FWD, a, s->BH, what);
    default:
        return unsupported(dtype, what);
    }
}

template <typename T>
static int att_backward(const att_args &a, int64_t BH, const T *dy, const T *y, const char *what)
{
    int64_t rows = BH * a.L;
    int64_t blocks = (rows + WARPS - 1) / WARPS;
    attention_delta_kernel<T>
        <<<(unsigned)(blocks < 65535 * 32 ? blocks : 65535 * 32), THREADS, 0, cuda_stream()>>>(
            dy, y, a.delta, rows, a.Ev);
    if (cuda_check(cudaGetLastError(), what) < 0) return -1;
    if (att_launch<T>(ATT_DQ, a, BH, what) < 0) return -1;
    return att_launch<T>(ATT_DKDV, a, BH, what);
}

extern "C" int cuda_launch_attention_backward(const cuda_attention_shape *s, int dtype,
                                              const void *dy, const void *q, const void *k,
                                              const void *v, const void *y, const float *lse,
                                              float *delta, void *dq, void *dk, void *dv,
                                              const char *what)
{
    if (s->BH == 0 || s->L == 0 || s->S == 0) return 0;
    att_args a = make_args(s);
    a.q = q;
    a.k = k;
    a.v = v;
    a.y = y;
    a.dy = dy;
    a.lse = lse;
    a.delta = delta;
    a.dq = dq;
    a.dk = dk;
    a.dv = dv;
    switch (dtype) {
    case DDPL_FLOAT32:
        return att_backward(a, s->BH, (const float *)dy, (const float *)y, what);
    case DDPL_FLOAT16:
        return att_backward(a, s->BH, (const __half *)dy, (const __half *)y, what);
    case DDPL_BFLOAT16:
        return att_backward(a, s->BH, (const __nv_bfloat16 *)dy, (const __nv_bfloat16 *)y, what);
    default:
        return unsupported(dtype, what);
    }
}
