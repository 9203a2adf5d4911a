/* cuda/cuda_scan.cu: scan kernels along one dim: cumsum, cumprod, and cummax/cummin with int64
 * indices.
 * defines: cuda_scan_scratch_bytes, cuda_launch_scan.
 *
 * The input is a set of independent slices along dim (cuda_scan_geom). Two shapes of work:
 *   - thread mode: one thread per slice walks it in order. Used when slices are short, or when
 *     dim is not the innermost (contiguous) dim: neighbouring slices are then neighbouring
 *     addresses, so the threads of a warp read one row of memory together;
 *   - block mode: one block per slice (long slices contiguous along dim, or too few slices to
 *     fill the GPU). The slice is cut into tiles of CUDA_THREADS * SCAN_ITEMS elements; each
 *     thread scans its SCAN_ITEMS neighbours sequentially, the block scans the threads' totals
 *     (warp shuffles, then one warp over the warp totals in shared memory), and a running carry
 *     joins the tiles. When a few long slices cannot fill the GPU, each is split into chunks
 *     of whole tiles: phase 1 writes every chunk's total to scratch (cuda_scan_scratch_bytes,
 *     a device tensor the glue allocates), phase 2 scans those totals per slice, and phase 3
 *     rescans each chunk from the scan of the chunks before it (two reads of the input).
 * Both scan a value with an index: for sums and products the index is ignored; for cummax and
 * cummin a later element replaces the running extreme when it is NaN or at least as large
 * (small), so ties give the LAST index and a NaN sticks, its index the latest NaN's (PyTorch).
 * That rule is a maximum over (rank, index) pairs, so it is associative and the block scan gives
 * the sequential answer. Accumulators (acc_of): float for float32/float16/bfloat16 (as PyTorch's
 * CUDA kernels), double for float64, int64 with wrap-around for integers and bool. */
#include "cuda_scan.h"
#include "cuda_typed.cuh"

enum { SCAN_ITEMS = 8 };

/* A running value and the index that produced it (-1: the identity, nothing seen yet). */
template <typename A> struct scan_val {
    A v;
    long long i;
};

__device__ __forceinline__ float scan_add(float a, float b)
{
    return a + b;
}
__device__ __forceinline__ double scan_add(double a, double b)
{
    return a + b;
}
__device__ __forceinline__ long long scan_add(long long a, long long b)
{
    return (long long)((unsigned long long)a + (unsigned long long)b); /* wraps, as the CPU */
}
__device__ __forceinline__ float scan_mul(float a, float b)
{
    return a * b;
}
__device__ __forceinline__ double scan_mul(double a, double b)
{
    return a * b;
}
__device__ __forceinline__ long long scan_mul(long long a, long long b)
{
    return (long long)((unsigned long long)a * (unsigned long long)b);
}

template <int KIND, typename A> __device__ __forceinline__ scan_val<A> scan_identity()
{
    scan_val<A> r;
    r.v = KIND == CUDA_SCAN_PROD ? (A)1 : (A)0;
    r.i = -1;
    return r;
}

/* a then b (b comes later along the scan). */
template <int KIND, typename A>
__device__ __forceinline__ scan_val<A> scan_combine(scan_val<A> a, scan_val<A> b)
{
    if (KIND == CUDA_SCAN_SUM) {
        a.v = scan_add(a.v, b.v);
        return a;
    }
    if (KIND == CUDA_SCAN_PROD) {
        a.v = scan_mul(a.v, b.v);
        return a;
    }
    if (b.i < 0) return a;
    if (a.i < 0) return b;
    bool an = a.v != a.v, bn = b.v != b.v; /* false for integers */
    bool take = bn || (!an && (KIND == CUDA_SCAN_MAX ? b.v >= a.v : b.v <= a.v));
    return take ? b : a;
}

template <typename A> __device__ __forceinline__ scan_val<A> shfl_up(scan_val<A> v, int d)
{
    scan_val<A> r;
    r.v = __shfl_up_sync(0xffffffffu, v.v, d);
    r.i = __shfl_up_sync(0xffffffffu, v.i, d);
    return r;
}

/* Offsets in x, out and indices of slice s (row-major over every dim but g.dim). */
__device__ __forceinline__ void scan_offsets(const cuda_scan_geom &g, int64_t s, int64_t *xo,
                                             int64_t *oo, int64_t *io)
{
    int64_t a = 0, b = 0, c = 0;
    for (int d = g.ndim - 1; d >= 0; d--) {
        if (d == g.dim) continue;
        int64_t i = s % g.sizes[d];
        s /= g.sizes[d];
        a += i * g.xs[d];
        b += i * g.os[d];
        c += i * g.is[d];
    }
    *xo = a;
    *oo = b;
    *io = c;
}

/* Thread mode: slice s by thread s (grid-stride). */
template <typename T, int KIND>
__global__ void scan_thread_kernel(T *out, long long *indices, const T *x, cuda_scan_geom g,
                                   bool reverse)
{
    typedef typename acc_of<T>::type A;
    int64_t n = g.n, xs = g.xs[g.dim], os = g.os[g.dim], is = g.is[g.dim];
    for (int64_t s = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; s < g.nslices;
         s += (int64_t)gridDim.x * blockDim.x) {
        int64_t xo, oo, io;
        scan_offsets(g, s, &xo, &oo, &io);
        scan_val<A> run = scan_identity<KIND, A>();
        for (int64_t p = 0; p < n; p++) {
            int64_t e = reverse ? n - 1 - p : p;
            scan_val<A> v = {to_acc<A>(x[xo + e * xs]), e};
            run = scan_combine<KIND>(run, v);
            out[oo + e * os] = from_acc<T>(run.v);
            if (indices) indices[io + e * is] = run.i;
        }
    }
}

/* The exclusive scan of v over the block (blockDim.x a multiple of 32); *total gets the
 * inclusive scan of the whole block. Every thread must call it; shared holds 32 values. */
template <int KIND, typename A>
__device__ __forceinline__ scan_val<A> block_exclusive(scan_val<A> v, scan_val<A> *shared,
                                                       scan_val<A> *total)
{
    int lane = threadIdx.x % CUDA_WARP, warp = threadIdx.x / CUDA_WARP;
    int nwarps = blockDim.x / CUDA_WARP;
    scan_val<A> inc = v;
    for (int d = 1; d < CUDA_WARP; d <<= 1) {
        scan_val<A> o = shfl_up(inc, d);
        if (lane >= d) inc = scan_combine<KIND>(o, inc);
    }
    if (lane == CUDA_WARP - 1) shared[warp] = inc;
    __syncthreads();
    if (warp == 0) { /* inclusive scan of the warp totals */
        scan_val<A> w = lane < nwarps ? shared[lane] : scan_identity<KIND, A>();
        for (int d = 1; d < CUDA_WARP; d <<= 1) {
            scan_val<A> o = shfl_up(w, d);
            if (lane >= d) w = scan_combine<KIND>(o, w);
        }
        if (lane < nwarps) shared[lane] = w;
    }
    __syncthreads();
    scan_val<A> ex = shfl_up(inc, 1);
    if (lane == 0) ex = scan_identity<KIND, A>();
    if (warp > 0) ex = scan_combine<KIND>(shared[warp - 1], ex);
    *total = shared[nwarps - 1];
    __syncthreads(); /* shared is reused by the next tile */
    return ex;
}

/* Block mode: block b takes tasks b, b + gridDim.x, ... (uniform over the block, so the
 * barriers in block_exclusive are safe); task t is chunk t % nchunks of slice t / nchunks,
 * elements [c * chunk, (c + 1) * chunk). With totals, a task only writes its chunk's total
 * (phase 1 of a split slice); otherwise it writes its outputs, starting from carries[t] when
 * given (phase 3: the scan of the chunks before it). */
template <typename T, int KIND>
__global__ void scan_block_kernel(T *out, long long *indices, const T *x, cuda_scan_geom g,
                                  bool reverse, int64_t chunk, int64_t nchunks,
                                  scan_val<typename acc_of<T>::type> *totals,
                                  const scan_val<typename acc_of<T>::type> *carries)
{
    typedef typename acc_of<T>::type A;
    __shared__ scan_val<A> shared[CUDA_WARP];
    int64_t n = g.n, xs = g.xs[g.dim], os = g.os[g.dim], is = g.is[g.dim];
    int64_t tile = (int64_t)blockDim.x * SCAN_ITEMS;
    for (int64_t t = blockIdx.x; t < g.nslices * nchunks; t += gridDim.x) {
        int64_t xo, oo, io;
        scan_offsets(g, t / nchunks, &xo, &oo, &io);
        int64_t lo = (t % nchunks) * chunk, hi = lo + chunk < n ? lo + chunk : n;
        scan_val<A> carry = carries ? carries[t] : scan_identity<KIND, A>();
        for (int64_t t0 = lo; t0 < hi; t0 += tile) {
            int64_t p0 = t0 + (int64_t)threadIdx.x * SCAN_ITEMS;
            scan_val<A> loc[SCAN_ITEMS];
            scan_val<A> run = scan_identity<KIND, A>();
            for (int k = 0; k < SCAN_ITEMS; k++) {
                int64_t p = p0 + k;
                if (p < hi) {
                    int64_t e = reverse ? n - 1 - p : p;
                    scan_val<A> v = {to_acc<A>(x[xo + e * xs]), e};
                    run = scan_combine<KIND>(run, v);
                }
                loc[k] = run;
            }
            scan_val<A> total;
            scan_val<A> pre = scan_combine<KIND>(carry, block_exclusive<KIND>(run, shared, &total));
            for (int k = 0; k < SCAN_ITEMS && !totals; k++) {
                int64_t p = p0 + k;
                if (p >= hi) break;
                int64_t e = reverse ? n - 1 - p : p;
                scan_val<A> r = scan_combine<KIND>(pre, loc[k]);
                out[oo + e * os] = from_acc<T>(r.v);
                if (indices) indices[io + e * is] = r.i;
            }
            carry = scan_combine<KIND>(carry, total);
        }
        if (totals && threadIdx.x == 0) totals[t] = carry;
    }
}

/* Phase 2 of a split slice: thread s turns its slice's nchunks chunk totals into the scan of
 * the chunks before each (exclusive), in place. */
template <int KIND, typename A>
__global__ void scan_carry_kernel(scan_val<A> *totals, int64_t nslices, int64_t nchunks)
{
    for (int64_t s = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; s < nslices;
         s += (int64_t)gridDim.x * blockDim.x) {
        scan_val<A> run = scan_identity<KIND, A>();
        for (int64_t c = 0; c < nchunks; c++) {
            scan_val<A> v = totals[s * nchunks + c];
            totals[s * nchunks + c] = run;
            run = scan_combine<KIND>(run, v);
        }
    }
}

/* How a scan is laid out: block mode (a block per slice, or per chunk of a slice) or thread
 * mode; a slice is split into nchunks chunks (three launches) when there are too few slices to
 * keep the GPU busy. */
typedef struct scan_plan {
    bool block;
    int64_t chunk, nchunks;
} scan_plan;

enum { SCAN_CHUNK = 16384, SCAN_TARGET_BLOCKS = 1024 };

static scan_plan plan_scan(const cuda_scan_geom &g)
{
    scan_plan p;
    /* a block per slice pays off for long slices that are contiguous along dim, or when there
     * are too few slices to give every thread one */
    p.block = g.n >= 64 && (g.xs[g.dim] == 1 || g.nslices < 4096);
    p.chunk = g.n;
    p.nchunks = 1;
    if (p.block && g.nslices < SCAN_TARGET_BLOCKS / 2 && g.n >= 2 * SCAN_CHUNK) {
        int64_t want = (SCAN_TARGET_BLOCKS + g.nslices - 1) / g.nslices;
        int64_t most = (g.n + SCAN_CHUNK - 1) / SCAN_CHUNK;
        int64_t k = want < most ? want : most;
        int64_t tile = (int64_t)CUDA_THREADS * SCAN_ITEMS;
        p.chunk = ((g.n + k - 1) / k + tile - 1) / tile * tile; /* whole tiles */
        p.nchunks = (g.n + p.chunk - 1) / p.chunk;
    }
    return p;
}

extern "C" size_t cuda_scan_scratch_bytes(const cuda_scan_geom *g)
{
    if (g->n == 0 || g->nslices == 0) return 0;
    scan_plan p = plan_scan(*g);
    /* every scan_val is 16 bytes: a 4- or 8-byte accumulator and an 8-byte index */
    return p.nchunks > 1 ? (size_t)(g->nslices * p.nchunks) * sizeof(scan_val<double>) : 0;
}

template <typename T, int KIND>
static int scan_typed(T *out, long long *indices, const T *x, const cuda_scan_geom &g, bool reverse,
                      void *scratch)
{
    typedef typename acc_of<T>::type A;
    static_assert(sizeof(scan_val<A>) == sizeof(scan_val<double>), "cuda_scan_scratch_bytes");
    static const char *const names[] = {"cumsum", "cumprod", "cummax", "cummin"};
    cudaStream_t st = cuda_stream();
    scan_plan p = plan_scan(g);
    if (!p.block) {
        scan_thread_kernel<T, KIND>
            <<<cuda_blocks(g.nslices), CUDA_THREADS, 0, st>>>(out, indices, x, g, reverse);
        return cuda_check(cudaGetLastError(), names[KIND]);
    }
    int64_t tasks = g.nslices * p.nchunks;
    unsigned blocks = (unsigned)(tasks < 65535 * 32 ? tasks : 65535 * 32);
    scan_val<A> *carries = NULL;
    if (p.nchunks > 1) {
        if (!scratch)
            return ddpl_error("%s: internal error: no scratch for %lld chunk totals", names[KIND],
                              (long long)tasks);
        carries = (scan_val<A> *)scratch;
        scan_block_kernel<T, KIND><<<blocks, CUDA_THREADS, 0, st>>>(
            out, indices, x, g, reverse, p.chunk, p.nchunks, carries, NULL);
        if (cuda_check(cudaGetLastError(), names[KIND]) < 0) return -1;
        scan_carry_kernel<KIND, A>
            <<<cuda_blocks(g.nslices), CUDA_THREADS, 0, st>>>(carries, g.nslices, p.nchunks);
        if (cuda_check(cudaGetLastError(), names[KIND]) < 0) return -1;
    }
    scan_block_kernel<T, KIND><<<blocks, CUDA_THREADS, 0, st>>>(out, indices, x, g, reverse,
                                                                p.chunk, p.nchunks, NULL, carries);
    return cuda_check(cudaGetLastError(), names[KIND]);
}

extern "C" int cuda_launch_scan(void *out, int64_t *indices, const void *x, int dtype,
                                const cuda_scan_geom *g, cuda_scan_kind kind, bool reverse,
                                void *scratch)
{
    if (g->n == 0 || g->nslices == 0) return 0;
    long long *ix = (long long *)indices;
    int rc = -1;
    CUDA_DISPATCH_ALL(dtype, rc = ddpl_error("scan: unsupported dtype %d on cuda", dtype), {
        scalar_t *o = (scalar_t *)out;
        const scalar_t *xi = (const scalar_t *)x;
        switch (kind) {
        case CUDA_SCAN_SUM:
            rc = scan_typed<scalar_t, CUDA_SCAN_SUM>(o, NULL, xi, *g, reverse, scratch);
            break;
        case CUDA_SCAN_PROD:
            rc = scan_typed<scalar_t, CUDA_SCAN_PROD>(o, NULL, xi, *g, reverse, scratch);
            break;
        case CUDA_SCAN_MAX:
            rc = scan_typed<scalar_t, CUDA_SCAN_MAX>(o, ix, xi, *g, false, scratch);
            break;
        default:
            rc = scan_typed<scalar_t, CUDA_SCAN_MIN>(o, ix, xi, *g, false, scratch);
            break;
        }
    })
    return rc;
}
