/* cuda/cuda_reduce.cu: reduction kernels: sum, prod, amax, amin, nansum over any set of dims,
 * max/min with int64 indices along one dim, and topk.
 * defines: cuda_launch_reduce, cuda_launch_arg_reduce, cuda_launch_topk.
 *
 * Reductions see the input as (outputs, reduced elements) through cuda_reduce_geom (built by
 * cuda_reduce_ops.c: kept and reduced dims coalesced, the innermost reduced dim last). Two
 * shapes of work, both deterministic (fixed accumulation order, no atomics), so a result is
 * reproducible run to run:
 *   - thread mode: one thread per output walks its reduced elements. Used when the reduced
 *     extent is small, or for "columns" (the innermost kept dim is contiguous: neighbouring
 *     threads read neighbouring addresses, e.g. a bias gradient summing (B*T, C) over B*T);
 *   - block mode: one block of CUDA_THREADS per output, threads striding over the reduced
 *     elements (coalesced when the innermost reduced dim is contiguous), then warp shuffles and
 *     shared memory; one warp per output instead when there are many outputs of at most 4096
 *     elements each (e.g. a row sum of (B*T, C)).
 * When there are too few outputs to fill the GPU, grid.y splits each output's reduced range
 * into chunks whose partial results go to a scratch buffer (cuda_reduce_scratch_bytes; the glue
 * allocates it as a device tensor, so it comes from the caching allocator, stream-ordered), and
 * a second kernel combines them in order, one warp per output.
 * Accumulators (acc_of): float for float32/float16/bfloat16, double for float64, int64 with
 * wrap-around for integers and bool. NaN propagates through max/min, as in PyTorch. */
#include "cuda_reduce.h"
#include "cuda_reduce_addr.cuh"
#include "cuda_typed.cuh"

/* ---- combining ---- */
__device__ __forceinline__ float red_add(float a, float b)
{
    return a + b;
}
__device__ __forceinline__ double red_add(double a, double b)
{
    return a + b;
}
__device__ __forceinline__ long long red_add(long long a, long long b)
{
    return (long long)((unsigned long long)a + (unsigned long long)b); /* wraps, as the CPU */
}
__device__ __forceinline__ float red_mul(float a, float b)
{
    return a * b;
}
__device__ __forceinline__ double red_mul(double a, double b)
{
    return a * b;
}
__device__ __forceinline__ long long red_mul(long long a, long long b)
{
    return (long long)((unsigned long long)a * (unsigned long long)b);
}
__device__ __forceinline__ float red_lowest(float)
{
    return -INFINITY;
}
__device__ __forceinline__ double red_lowest(double)
{
    return -INFINITY;
}
__device__ __forceinline__ long long red_lowest(long long)
{
    return LLONG_MIN;
}
__device__ __forceinline__ float red_highest(float)
{
    return INFINITY;
}
__device__ __forceinline__ double red_highest(double)
{
    return INFINITY;
}
__device__ __forceinline__ long long red_highest(long long)
{
    return LLONG_MAX;
}

template <int KIND, typename A> __device__ __forceinline__ A red_identity()
{
    if (KIND == CUDA_RED_SUM || KIND == CUDA_RED_NANSUM) return (A)0;
    if (KIND == CUDA_RED_PROD) return (A)1;
    if (KIND == CUDA_RED_MAX) return red_lowest((A)0);
    return red_highest((A)0);
}

/* a NaN on either side wins max and min (a != a is false for integers). nansum combines as a
 * sum: its NaN elements were zeroed as they were read (red_load), and a NaN partial result is
 * the sum's own (+inf plus -inf), which stays. */
template <int KIND, typename A> __device__ __forceinline__ A red_combine(A a, A b)
{
    if (KIND == CUDA_RED_SUM || KIND == CUDA_RED_NANSUM) return red_add(a, b);
    if (KIND == CUDA_RED_PROD) return red_mul(a, b);
    if (KIND == CUDA_RED_MAX) return (a != a || a > b) ? a : b;
    return (a != a || a < b) ? a : b;
}

/* An input element as an accumulator: nansum reads a NaN as 0. */
template <int KIND, typename A, typename T> __device__ __forceinline__ A red_load(T x)
{
    A v = to_acc<A>(x);
    if (KIND == CUDA_RED_NANSUM && v != v) return (A)0;
    return v;
}

/* Combines v over the 32 lanes of a full warp; lane 0 holds the result. */
template <int KIND, typename A> __device__ __forceinline__ A warp_combine(A v)
{
    for (int s = CUDA_WARP / 2; s > 0; s >>= 1)
        v = red_combine<KIND>(v, __shfl_down_sync(0xffffffffu, v, s));
    return v;
}

/* Combines v over the block (blockDim.x a multiple of 32, at most 1024); thread 0 holds the
 * result. Every thread of the block must call it; shared holds 32 accumulators. */
template <int KIND, typename A> __device__ __forceinline__ A block_combine(A v, A *shared)
{
    int lane = threadIdx.x % CUDA_WARP, warp = threadIdx.x / CUDA_WARP;
    int nwarps = blockDim.x / CUDA_WARP;
    v = warp_combine<KIND>(v);
    if (lane == 0) shared[warp] = v;
    __syncthreads();
    if (warp == 0) {
        v = lane < nwarps ? shared[lane] : red_identity<KIND, A>();
        v = warp_combine<KIND>(v);
    }
    __syncthreads(); /* shared is reused by the caller's next output */
    return v;
}

/* ---- kernels (addressing: kept_offsets and red_offset, cuda_reduce_addr.cuh) ---- */
/* Thread mode. grid.x covers the outputs (grid-stride), grid.y the chunks of each reduced
 * range: with partial, chunk y of output o goes to partial[o * gridDim.y + y]; without (one
 * chunk), the result goes to out. */
template <typename T, int KIND>
__global__ void reduce_thread_kernel(void *out, int odt, typename acc_of<T>::type *partial,
                                     const T *in, cuda_reduce_geom g, int64_t chunk)
{
    typedef typename acc_of<T>::type A;
    int64_t lo = blockIdx.y * chunk, hi = lo + chunk < g.nred ? lo + chunk : g.nred;
    for (int64_t o = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; o < g.nout;
         o += (int64_t)gridDim.x * blockDim.x) {
        int64_t io, oo;
        kept_offsets(g, o, &io, &oo);
        A acc = red_identity<KIND, A>();
        if (g.nr == 1) {
            const T *p = in + io;
            int64_t s = g.rin[0];
            for (int64_t r = lo; r < hi; r++)
                acc = red_combine<KIND>(acc, red_load<KIND, A>(p[r * s]));
        } else {
            for (int64_t r = lo; r < hi; r++)
                acc = red_combine<KIND>(acc, red_load<KIND, A>(in[io + red_offset(g, r)]));
        }
        if (partial)
            partial[o * gridDim.y + blockIdx.y] = acc;
        else
            store_as(out, odt, oo, acc);
    }
}

/* Block mode: block x handles outputs x, x + gridDim.x, ... (the loop is uniform over the
 * block, so the __syncthreads in block_combine are safe); grid.y and partial as above. */
template <typename T, int KIND>
__global__ void reduce_block_kernel(void *out, int odt, typename acc_of<T>::type *partial,
                                    const T *in, cuda_reduce_geom g, int64_t chunk)
{
    typedef typename acc_of<T>::type A;
    __shared__ A shared[CUDA_WARP];
    int64_t lo = blockIdx.y * chunk, hi = lo + chunk < g.nred ? lo + chunk : g.nred;
    for (int64_t o = blockIdx.x; o < g.nout; o += gridDim.x) {
        int64_t io, oo;
        kept_offsets(g, o, &io, &oo);
        A acc = red_identity<KIND, A>();
        if (g.nr == 1) {
            const T *p = in + io;
            int64_t s = g.rin[0];
            for (int64_t r = lo + threadIdx.x; r < hi; r += blockDim.x)
                acc = red_combine<KIND>(acc, red_load<KIND, A>(p[r * s]));
        } else {
            for (int64_t r = lo + threadIdx.x; r < hi; r += blockDim.x)
                acc = red_combine<KIND>(acc, red_load<KIND, A>(in[io + red_offset(g, r)]));
        }
        acc = block_combine<KIND>(acc, shared);
        if (threadIdx.x == 0) {
            if (partial)
                partial[o * gridDim.y + blockIdx.y] = acc;
            else
                store_as(out, odt, oo, acc);
        }
    }
}

/* Warp mode (block mode's shape for mid-sized reductions of many outputs, where a whole block
 * per output would idle): one warp per output, lanes striding over its reduced elements. */
template <typename T, int KIND>
__global__ void reduce_warp_kernel(void *out, int odt, const T *in, cuda_reduce_geom g)
{
    typedef typename acc_of<T>::type A;
    int lane = threadIdx.x % CUDA_WARP;
    int64_t warps = (int64_t)gridDim.x * (blockDim.x / CUDA_WARP);
    for (int64_t o = (blockIdx.x * (int64_t)blockDim.x + threadIdx.x) / CUDA_WARP; o < g.nout;
         o += warps) {
        int64_t io, oo;
        kept_offsets(g, o, &io, &oo);
        A acc = red_identity<KIND, A>();
        if (g.nr == 1) {
            const T *p = in + io;
            int64_t s = g.rin[0];
            for (int64_t r = lane; r < g.nred; r += CUDA_WARP)
                acc = red_combine<KIND>(acc, red_load<KIND, A>(p[r * s]));
        } else {
            for (int64_t r = lane; r < g.nred; r += CUDA_WARP)
                acc = red_combine<KIND>(acc, red_load<KIND, A>(in[io + red_offset(g, r)]));
        }
        acc = warp_combine<KIND>(acc);
        if (lane == 0) store_as(out, odt, oo, acc);
    }
}

/* Second pass: one warp per output combines its `splits` partial results (fixed order). */
template <typename A, int KIND>
__global__ void reduce_partials_kernel(void *out, int odt, const A *partial, int64_t splits,
                                       cuda_reduce_geom g)
{
    int lane = threadIdx.x % CUDA_WARP;
    int64_t warps = (int64_t)gridDim.x * (blockDim.x / CUDA_WARP);
    for (int64_t o = (blockIdx.x * (int64_t)blockDim.x + threadIdx.x) / CUDA_WARP; o < g.nout;
         o += warps) {
        A acc = red_identity<KIND, A>();
        for (int64_t s = lane; s < splits; s += CUDA_WARP)
            acc = red_combine<KIND>(acc, partial[o * splits + s]);
        acc = warp_combine<KIND>(acc);
        if (lane == 0) {
            int64_t io, oo;
            kept_offsets(g, o, &io, &oo);
            store_as(out, odt, oo, acc);
        }
    }
}

static int64_t ceil_div(int64_t a, int64_t b)
{
    return (a + b - 1) / b;
}

/* How a reduction is laid out: thread or block mode, and how many chunks (grid.y) each
 * output's reduced range is split into. */
typedef struct reduce_plan {
    bool thread_mode;
    int64_t splits, chunk;
} reduce_plan;

static reduce_plan plan_reduce(const cuda_reduce_geom &g)
{
    reduce_plan p;
    bool columns =
        g.nk > 0 && g.kin[g.nk - 1] == 1 && g.ksize[g.nk - 1] > 1 && g.rin[g.nr - 1] != 1;
    p.thread_mode = g.nred <= 32 || columns;
    int64_t splits = 1;
    if (p.thread_mode) {
        /* aim for ~128K threads, each reducing at least 64 elements */
        if (g.nout < 131072) splits = ceil_div(131072, g.nout);
        int64_t most = ceil_div(g.nred, 64);
        if (splits > most) splits = most;
        if (splits > 4096) splits = 4096;
    } else if (g.nout < 1024) {
        /* aim for ~2048 blocks, each reducing at least 8192 elements */
        splits = ceil_div(2048, g.nout);
        int64_t most = ceil_div(g.nred, 8192);
        if (splits > most) splits = most;
    }
    if (splits < 1) splits = 1;
    p.chunk = ceil_div(g.nred, splits);
    if (p.chunk < 1) p.chunk = 1;
    p.splits = ceil_div(g.nred, p.chunk);
    if (p.splits < 1) p.splits = 1; /* nred == 0: one empty chunk writes the identity */
    return p;
}

/* bytes of one accumulator (acc_of) of dtype dt */
static size_t acc_bytes(int dt)
{
    return dt == DDPL_FLOAT32 || dt == DDPL_FLOAT16 || dt == DDPL_BFLOAT16 ? 4 : 8;
}

extern "C" size_t cuda_reduce_scratch_bytes(const cuda_reduce_geom *g, int in_dtype)
{
    if (g->nout == 0) return 0;
    reduce_plan p = plan_reduce(*g);
    return p.splits > 1 ? (size_t)(g->nout * p.splits) * acc_bytes(in_dtype) : 0;
}

template <typename T, int KIND>
static int reduce_typed(void *out, int odt, const T *in, const cuda_reduce_geom &g, void *scratch)
{
    typedef typename acc_of<T>::type A;
    cudaStream_t st = cuda_stream();
    reduce_plan p = plan_reduce(g);
    A *partial = p.splits > 1 ? (A *)scratch : NULL;
    if (p.splits > 1 && !scratch)
        return ddpl_error("reduction: internal error: no scratch for %lld partial results",
                          (long long)(g.nout * p.splits));
    dim3 grid;
    grid.y = (unsigned)p.splits;
    if (!p.thread_mode && p.splits == 1 && g.nred <= 4096) {
        unsigned blocks = (unsigned)ceil_div(g.nout, CUDA_THREADS / CUDA_WARP);
        if (blocks > 65535u * 32) blocks = 65535u * 32;
        reduce_warp_kernel<T, KIND><<<blocks, CUDA_THREADS, 0, st>>>(out, odt, in, g);
    } else if (p.thread_mode) {
        grid.x = cuda_blocks(g.nout);
        reduce_thread_kernel<T, KIND>
            <<<grid, CUDA_THREADS, 0, st>>>(out, odt, partial, in, g, p.chunk);
    } else {
        grid.x = (unsigned)(g.nout < (1 << 20) ? g.nout : (1 << 20));
        reduce_block_kernel<T, KIND>
            <<<grid, CUDA_THREADS, 0, st>>>(out, odt, partial, in, g, p.chunk);
    }
    int rc = cuda_check(cudaGetLastError(), "reduction");
    if (partial && rc == 0) {
        int64_t warps_per_block = CUDA_THREADS / CUDA_WARP;
        unsigned blocks = (unsigned)ceil_div(g.nout, warps_per_block);
        if (blocks > 65535u * 32) blocks = 65535u * 32;
        reduce_partials_kernel<A, KIND>
            <<<blocks, CUDA_THREADS, 0, st>>>(out, odt, partial, p.splits, g);
        rc = cuda_check(cudaGetLastError(), "reduction (combining partial results)");
    }
    return rc;
}

extern "C" int cuda_launch_reduce(void *out, int out_dtype, const void *in, int in_dtype,
                                  const cuda_reduce_geom *g, cuda_reduce_kind kind, void *scratch)
{
    if (g->nout == 0) return 0;
    int rc = -1;
    CUDA_DISPATCH_ALL(
        in_dtype, rc = ddpl_error("reduction: unsupported dtype %d on cuda", in_dtype), {
            const scalar_t *x = (const scalar_t *)in;
            switch (kind) {
            case CUDA_RED_SUM:
                rc = reduce_typed<scalar_t, CUDA_RED_SUM>(out, out_dtype, x, *g, scratch);
                break;
            case CUDA_RED_PROD:
                rc = reduce_typed<scalar_t, CUDA_RED_PROD>(out, out_dtype, x, *g, scratch);
                break;
            case CUDA_RED_MAX:
                rc = reduce_typed<scalar_t, CUDA_RED_MAX>(out, out_dtype, x, *g, scratch);
                break;
            case CUDA_RED_NANSUM:
                rc = reduce_typed<scalar_t, CUDA_RED_NANSUM>(out, out_dtype, x, *g, scratch);
                break;
            default:
                rc = reduce_typed<scalar_t, CUDA_RED_MIN>(out, out_dtype, x, *g, scratch);
                break;
            }
        })
    return rc;
}

/* ---- max/min with indices along one dim ---- */

/* Offsets in x, values and indices of slice o (row-major over every dim but g.dim). */
__device__ __forceinline__ void slice_offsets(const cuda_arg_geom &g, int64_t o, int64_t *xo,
                                              int64_t *vo, int64_t *io)
{
    int64_t a = 0, b = 0, c = 0;
    for (int d = g.ndim - 1; d >= 0; d--) {
        if (d == g.dim) continue;
        int64_t i = o % g.sizes[d];
        o /= g.sizes[d];
        a += i * g.xs[d];
        b += i * g.vs[d];
        c += i * g.is[d];
    }
    *xo = a;
    *vo = b;
    *io = c;
}

/* Whether (v, i) beats the current best (bv, bi): a NaN beats any number and the first NaN
 * wins (PyTorch); equal values go to the lower index. A strict order, so the result does not
 * depend on how lanes are combined. */
template <typename A>
__device__ __forceinline__ bool arg_better(A v, int64_t i, A bv, int64_t bi, bool is_max)
{
    bool vn = v != v, bn = bv != bv;
    if (vn || bn) return vn && (!bn || i < bi);
    if (v == bv) return i < bi;
    return is_max ? v > bv : v < bv;
}

/* One thread per slice (short slices): a sequential scan, as the CPU kernel. */
template <typename T>
__global__ void arg_thread_kernel(T *values, long long *indices, const T *x, cuda_arg_geom g,
                                  bool is_max)
{
    typedef typename acc_of<T>::type A;
    int64_t n = g.sizes[g.dim], s = g.xs[g.dim];
    for (int64_t o = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; o < g.nout;
         o += (int64_t)gridDim.x * blockDim.x) {
        int64_t xo, vo, io;
        slice_offsets(g, o, &xo, &vo, &io);
        A best = to_acc<A>(x[xo]);
        int64_t bi = 0;
        for (int64_t i = 1; i < n; i++) {
            A v = to_acc<A>(x[xo + i * s]);
            if (arg_better(v, i, best, bi, is_max)) best = v, bi = i;
        }
        values[vo] = from_acc<T>(best); /* exact: best is one of x's elements */
        indices[io] = bi;
    }
}

/* One warp per slice: lanes stride over it, then combine (value, index) pairs by shuffles. */
template <typename T>
__global__ void arg_warp_kernel(T *values, long long *indices, const T *x, cuda_arg_geom g,
                                bool is_max)
{
    typedef typename acc_of<T>::type A;
    int lane = threadIdx.x % CUDA_WARP;
    int64_t n = g.sizes[g.dim], s = g.xs[g.dim];
    int64_t warps = (int64_t)gridDim.x * (blockDim.x / CUDA_WARP);
    for (int64_t o = (blockIdx.x * (int64_t)blockDim.x + threadIdx.x) / CUDA_WARP; o < g.nout;
         o += warps) {
        int64_t xo, vo, io;
        slice_offsets(g, o, &xo, &vo, &io);
        A best = 0;
        long long bi = -1; /* -1: this lane has seen nothing yet */
        for (int64_t i = lane; i < n; i += CUDA_WARP) {
            A v = to_acc<A>(x[xo + i * s]);
            if (bi < 0 || arg_better(v, i, best, bi, is_max)) best = v, bi = i;
        }
        for (int k = CUDA_WARP / 2; k > 0; k >>= 1) {
            A ov = __shfl_down_sync(0xffffffffu, best, k);
            long long oi = __shfl_down_sync(0xffffffffu, bi, k);
            if (oi >= 0 && (bi < 0 || arg_better(ov, oi, best, bi, is_max))) best = ov, bi = oi;
        }
        if (lane == 0) {
            values[vo] = from_acc<T>(best);
            indices[io] = bi;
        }
    }
}

extern "C" int cuda_launch_arg_reduce(void *values, int64_t *indices, const void *x, int dtype,
                                      const cuda_arg_geom *g, bool is_max)
{
    if (g->nout == 0 || g->sizes[g->dim] == 0) return 0;
    cudaStream_t st = cuda_stream();
    bool warp = g->sizes[g->dim] > 16;
    int64_t threads = warp ? g->nout * CUDA_WARP : g->nout;
    int rc = -1;
    CUDA_DISPATCH_ALL(dtype, rc = ddpl_error("max/min: unsupported dtype %d on cuda", dtype), {
        if (warp)
            arg_warp_kernel<scalar_t><<<cuda_blocks(threads), CUDA_THREADS, 0, st>>>(
                (scalar_t *)values, (long long *)indices, (const scalar_t *)x, *g, is_max);
        else
            arg_thread_kernel<scalar_t><<<cuda_blocks(threads), CUDA_THREADS, 0, st>>>(
                (scalar_t *)values, (long long *)indices, (const scalar_t *)x, *g, is_max);
        rc = cuda_check(cudaGetLastError(), is_max ? "max" : "min");
    })
    return rc;
}

/* ---- topk: a bitonic sort of each slice, one block per slice ---- */
enum { TOPK_THREADS = 512, TOPK_SHARED_BYTES = 48 * 1024 };

/* Whether (ka, ia) goes before (kb, ib). Padding (index >= n) goes last; "largest": NaN first
 * (PyTorch ranks NaN above everything), then descending; "smallest": ascending, NaN last; ties
 * by index, so the order is strict and the sort deterministic. */
template <typename A>
__device__ __forceinline__ bool topk_before(A ka, long long ia, A kb, long long ib, int64_t n,
                                            bool largest)
{
    bool pa = ia >= n, pb = ib >= n;
    if (pa != pb) return pb;
    if (pa) return ia < ib;
    bool na = ka != ka, nb = kb != kb;
    if (na != nb) return largest ? na : nb;
    if (!na && ka != kb) return largest ? ka > kb : ka < kb;
    return ia < ib;
}

/* Block x sorts slice slice0 + x. Its P (a power of two >= n, >= 2) keys and indices live in
 * dynamic shared memory (indices first, so both stay aligned); slices that do not fit take the
 * grid-wide path below. */
/* One compare-exchange of the bitonic network: positions i < j of a run of `size`, which
 * sorts in "before" order when bit `size` of i is clear and in reverse otherwise. */
template <typename A>
__device__ __forceinline__ void topk_exchange(A *keys, long long *idx, int64_t i, int64_t j,
                                              int64_t size, int64_t n, bool largest)
{
    bool up = (i & size) == 0;
    bool swap = up ? topk_before(keys[j], idx[j], keys[i], idx[i], n, largest)
                   : topk_before(keys[i], idx[i], keys[j], idx[j], n, largest);
    if (!swap) return;
    A tk = keys[i];
    keys[i] = keys[j];
    keys[j] = tk;
    long long ti = idx[i];
    idx[i] = idx[j];
    idx[j] = ti;
}

template <typename T>
__global__ void topk_kernel(T *values, long long *indices, const T *x, cuda_topk_geom g, int64_t P,
                            int64_t k, bool largest, int64_t slice0)
{
    typedef typename acc_of<T>::type A;
    extern __shared__ __align__(16) unsigned char topk_smem[];
    long long *idx = (long long *)topk_smem;
    A *keys = (A *)(topk_smem + P * sizeof(long long));
    int64_t n = g.sizes[g.dim], xs = g.xs[g.dim];
    int64_t xo, vo, io;
    slice_offsets(g, slice0 + blockIdx.x, &xo, &vo, &io);
    for (int64_t i = threadIdx.x; i < P; i += blockDim.x) {
        idx[i] = i;
        keys[i] = i < n ? to_acc<A>(x[xo + i * xs]) : (A)0;
    }
    __syncthreads();
    for (int64_t size = 2; size <= P; size <<= 1)
        for (int64_t stride = size >> 1; stride > 0; stride >>= 1) {
            for (int64_t i = threadIdx.x; i < P; i += blockDim.x) {
                int64_t j = i ^ stride;
                if (j <= i) continue;
                topk_exchange(keys, idx, i, j, size, n, largest);
            }
            __syncthreads();
        }
    for (int64_t j = threadIdx.x; j < k; j += blockDim.x) {
        long long i = idx[j];
        values[vo + j * g.vs[g.dim]] = x[xo + i * xs]; /* the element itself: exact */
        indices[io + j * g.is[g.dim]] = i;
    }
}

/* ---- topk of long slices (sort's path for them too): the same bitonic network over slices
 * in global scratch, one launch per stage over every pair of the batch, so a long slice keeps
 * the whole device busy instead of one block (a 1M-element sort: 210 stages of 512K pairs). ---- */

/* keys and positions of every slice of the batch (slice t / P of it, position t % P; the
 * padding past n sorts last) */
template <typename T>
__global__ void topk_load_kernel(long long *gidx, typename acc_of<T>::type *gkeys, const T *x,
                                 cuda_topk_geom g, int64_t P, int64_t slice0, int64_t nb)
{
    typedef typename acc_of<T>::type A;
    int64_t n = g.sizes[g.dim], xs = g.xs[g.dim];
    for (int64_t t = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; t < nb * P;
         t += (int64_t)gridDim.x * blockDim.x) {
        int64_t b = t / P, i = t % P, xo, vo, io;
        slice_offsets(g, slice0 + b, &xo, &vo, &io);
        gidx[t] = i;
        gkeys[t] = i < n ? to_acc<A>(x[xo + i * xs]) : (A)0;
    }
}

/* One compare-exchange stage (size, stride) of topk_kernel's network on every slice: pair
 * number t of a slice is (i, i + stride), i having the stride bit clear. */
template <typename A>
__global__ void topk_stage_kernel(long long *gidx, A *gkeys, int64_t P, int64_t nb, int64_t size,
                                  int64_t stride, int64_t n, bool largest)
{
    int64_t half = P / 2;
    for (int64_t t = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; t < nb * half;
         t += (int64_t)gridDim.x * blockDim.x) {
        int64_t b = t / half, h = t % half;
        int64_t i = (h / stride) * 2 * stride + h % stride, j = i + stride;
        long long *idx = gidx + b * P;
        A *keys = gkeys + b * P;
        topk_exchange(keys, idx, i, j, size, n, largest);
    }
}

/* values, indices <- the first k of each sorted slice (the elements themselves: exact) */
template <typename T>
__global__ void topk_write_kernel(T *values, long long *indices, const T *x, cuda_topk_geom g,
                                  const long long *gidx, int64_t P, int64_t k, int64_t slice0,
                                  int64_t nb)
{
    int64_t xs = g.xs[g.dim];
    for (int64_t t = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; t < nb * k;
         t += (int64_t)gridDim.x * blockDim.x) {
        int64_t b = t / k, j = t % k, xo, vo, io;
        slice_offsets(g, slice0 + b, &xo, &vo, &io);
        long long i = gidx[b * P + j];
        values[vo + j * g.vs[g.dim]] = x[xo + i * xs];
        indices[io + j * g.is[g.dim]] = i;
    }
}

/* P (the padded slice length) and the scratch bytes per slice of topk over slices of n */
static int64_t topk_pad(int64_t n)
{
    int64_t P = 2;
    while (P < n) P <<= 1;
    return P;
}

/* Slices per launch when the keys live in global scratch: at most ~256 MiB of it. */
static int64_t topk_batch(size_t per_slice, int64_t slices)
{
    int64_t batch = (int64_t)((256u << 20) / per_slice);
    if (batch < 1) batch = 1;
    return batch > slices ? slices : batch;
}

extern "C" size_t cuda_topk_scratch_bytes(const cuda_topk_geom *g, int dtype)
{
    int64_t n = g->sizes[g->dim];
    if (g->nout == 0 || n == 0) return 0;
    size_t per_slice = (size_t)topk_pad(n) * (sizeof(long long) + acc_bytes(dtype));
    if (per_slice <= TOPK_SHARED_BYTES) return 0;
    return per_slice * (size_t)topk_batch(per_slice, g->nout);
}

template <typename T>
static int topk_typed(T *values, long long *indices, const T *x, const cuda_topk_geom &g, int64_t k,
                      bool largest, void *scratch)
{
    typedef typename acc_of<T>::type A;
    cudaStream_t st = cuda_stream();
    int64_t n = g.sizes[g.dim], P = topk_pad(n);
    size_t per_slice = (size_t)P * (sizeof(long long) + sizeof(A));
    int64_t slices = g.nout;
    if (per_slice <= TOPK_SHARED_BYTES) {
        for (int64_t s0 = 0; s0 < slices; s0 += 1 << 30) {
            int64_t b = slices - s0 < (1 << 30) ? slices - s0 : (1 << 30);
            topk_kernel<T><<<(unsigned)b, TOPK_THREADS, per_slice, st>>>(values, indices, x, g, P,
                                                                         k, largest, s0);
            if (cuda_check(cudaGetLastError(), "topk") < 0) return -1;
        }
        return 0;
    }
    /* long slices: keys and indices in global scratch (cuda_topk_scratch_bytes), in batches */
    if (!scratch)
        return ddpl_error("topk: internal error: no scratch for slices of %lld", (long long)n);
    int64_t batch = topk_batch(per_slice, slices);
    long long *gidx = (long long *)scratch;
    A *gkeys = (A *)(gidx + P * batch);
    for (int64_t s0 = 0; s0 < slices; s0 += batch) {
        int64_t b = slices - s0 < batch ? slices - s0 : batch;
        topk_load_kernel<T>
            <<<cuda_blocks(b * P), CUDA_THREADS, 0, st>>>(gidx, gkeys, x, g, P, s0, b);
        for (int64_t size = 2; size <= P; size <<= 1)
            for (int64_t stride = size >> 1; stride > 0; stride >>= 1)
                topk_stage_kernel<A><<<cuda_blocks(b * P / 2), CUDA_THREADS, 0, st>>>(
                    gidx, gkeys, P, b, size, stride, n, largest);
        topk_write_kernel<T>
            <<<cuda_blocks(b * k), CUDA_THREADS, 0, st>>>(values, indices, x, g, gidx, P, k, s0, b);
        if (cuda_check(cudaGetLastError(), "topk") < 0) return -1;
    }
    return 0;
}

extern "C" int cuda_launch_topk(void *values, int64_t *indices, const void *x, int dtype,
                                const cuda_topk_geom *g, int64_t k, bool largest, void *scratch)
{
    if (k == 0 || g->nout == 0 || g->sizes[g->dim] == 0) return 0;
    int rc = -1;
    CUDA_DISPATCH_ALL(dtype, rc = ddpl_error("topk: unsupported dtype %d on cuda", dtype), {
        rc = topk_typed<scalar_t>((scalar_t *)values, (long long *)indices, (const scalar_t *)x, *g,
                                  k, largest, scratch);
    })
    return rc;
}
