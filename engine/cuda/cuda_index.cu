/* cuda/cuda_index.cu: kernels that pick and scatter elements by int64 indices: index_select,
 * index_add, gather, scatter_add, and the raw device calls of the deferred bad-index checks
 * (cuda_index_check.h) they and nll_loss record into.
 * defines: cuda_index_check_raw_calls, cuda_read_i64, cuda_launch_index_select,
 *          cuda_launch_index_add, cuda_launch_gather, cuda_launch_scatter_add.
 *
 * One thread per element of the iteration shape (grid-stride), offsets decoded from the
 * row-major position, so any strides work; index_select on contiguous tensors takes a
 * (pre, n, post) fast path. Copies move elements as unsigned integers of the element's size
 * (exact for every dtype). The adds are atomic (duplicate indices may target one element):
 * native atomicAdd for float, double, __half (sm_70+), __nv_bfloat16 (sm_80+), int32, int64
 * (two's complement, wrapping); a compare-and-swap on the containing 32-bit word for uint8
 * (wrapping) and bool (logical or, as the CPU's int64 add stored back to bool). Floating adds
 * therefore accumulate in an unspecified order: index_add and scatter_add are not bitwise
 * reproducible with duplicate indices, as in PyTorch. */
#include "cuda_device.h"
#include "cuda_index.h"
#include "cuda_index_addr.cuh"
#include "cuda_index_check.h"
#include "cuda_typed.cuh"

/* ---- the raw calls of the deferred checks (cuda_index_check.h) ---- */
static void *flags_alloc(int device, size_t nbytes)
{
    void *p = NULL;
    int prev = 0;
    if (cuda_check(cudaGetDevice(&prev), "cuda index check") < 0 ||
        cuda_check(cudaSetDevice(device), "cuda index check") < 0)
        return NULL;
    if (cuda_check(cudaMalloc(&p, nbytes), "cuda index check (allocating its flags)") < 0) p = NULL;
    cudaSetDevice(prev);
    return p;
}

static int flag_reset(void *flag, int device)
{
    cudaStream_t st = (cudaStream_t)cuda_stream_for(device);
    if (!st) return -1;
    return cuda_check(cudaMemsetAsync(flag, 0xff, sizeof(unsigned long long), st),
                      "cuda index check");
}

static int flags_read(uint64_t *dst, const void *src, size_t n, int device)
{
    cudaStream_t st = (cudaStream_t)cuda_stream_for(device);
    if (!st) return -1;
    int rc = cuda_check(cudaMemcpyAsync(dst, src, n * sizeof *dst, cudaMemcpyDeviceToHost, st),
                        "cuda index check (reading its flags)");
    return rc == 0 ? cuda_check(cudaStreamSynchronize(st), "cuda index check") : rc;
}

extern "C" const cuda_index_check_raw cuda_index_check_raw_calls = {flags_alloc, flag_reset,
                                                                    flags_read};

extern "C" int cuda_read_i64(const void *p, int64_t *v, const char *what)
{
    cudaStream_t st = cuda_stream();
    long long h = 0;
    int rc = cuda_check(cudaMemcpyAsync(&h, p, sizeof h, cudaMemcpyDeviceToHost, st), what);
    if (rc == 0) rc = cuda_check(cudaStreamSynchronize(st), what);
    *v = h;
    return rc;
}

__device__ __forceinline__ void record_bad(unsigned long long *flag, int64_t pos)
{
    atomicMin(flag, (unsigned long long)pos);
}

/* Records the first position i of index[0..n) (stride in elements) outside [0, bound). */
__global__ static void check_index_kernel(const long long *index, int64_t stride, int64_t n,
                                          int64_t bound, unsigned long long *flag)
{
    for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < n;
         i += (int64_t)gridDim.x * blockDim.x) {
        long long v = index[i * stride];
        if (v < 0 || v >= bound) record_bad(flag, i);
    }
}

/* ---- atomic adds ---- */
__device__ __forceinline__ void atomic_add(float *p, float v, bool)
{
    atomicAdd(p, v);
}
__device__ __forceinline__ void atomic_add(double *p, double v, bool)
{
    atomicAdd(p, v);
}
__device__ __forceinline__ void atomic_add(__half *p, __half v, bool)
{
    atomicAdd(p, v);
}
__device__ __forceinline__ void atomic_add(__nv_bfloat16 *p, __nv_bfloat16 v, bool)
{
    atomicAdd(p, v);
}
__device__ __forceinline__ void atomic_add(int *p, int v, bool)
{
    atomicAdd(p, v);
}
__device__ __forceinline__ void atomic_add(long long *p, long long v, bool)
{
    atomicAdd((unsigned long long *)p, (unsigned long long)v);
}
/* A 1- or 2-byte element inside its aligned 32-bit word (allocations are at least 256-byte
 * aligned, so the word lies inside the allocation), by compare-and-swap of the word; logical:
 * bool (or), else a wrapping add (two's complement: the same bits for signed types). */
__device__ __forceinline__ void atomic_add_narrow(void *p, unsigned int v, unsigned int bytes,
                                                  bool logical)
{
    unsigned int *w = (unsigned int *)((uintptr_t)p & ~(uintptr_t)3);
    unsigned int shift = (unsigned int)((uintptr_t)p & 3) * 8;
    unsigned int mask = bytes == 1 ? 0xffu : 0xffffu;
    unsigned int old = *w, assumed;
    do {
        assumed = old;
        unsigned int e = (assumed >> shift) & mask;
        unsigned int ne = logical ? (unsigned int)((e | v) != 0) : ((e + v) & mask);
        old = atomicCAS(w, assumed, (assumed & ~(mask << shift)) | (ne << shift));
    } while (old != assumed);
}
__device__ __forceinline__ void atomic_add(unsigned char *p, unsigned char v, bool logical)
{
    atomic_add_narrow(p, v, 1, logical); /* logical: bool, else uint8 */
}
__device__ __forceinline__ void atomic_add(signed char *p, signed char v, bool)
{
    atomic_add_narrow(p, (unsigned char)v, 1, false);
}
__device__ __forceinline__ void atomic_add(short *p, short v, bool)
{
    atomic_add_narrow(p, (unsigned short)v, 2, false);
}

/* ---- element copies by size ---- */
template <int SIZE> struct bits_of;
template <> struct bits_of<1> {
    typedef unsigned char type;
};
template <> struct bits_of<2> {
    typedef unsigned short type;
};
template <> struct bits_of<4> {
    typedef unsigned int type;
};
template <> struct bits_of<8> {
    typedef unsigned long long type;
};

#define DISPATCH_SIZE(size, ...)                                                                   \
    switch (size) {                                                                                \
    case 1: {                                                                                      \
        typedef bits_of<1>::type E;                                                                \
        __VA_ARGS__;                                                                               \
    } break;                                                                                       \
    case 2: {                                                                                      \
        typedef bits_of<2>::type E;                                                                \
        __VA_ARGS__;                                                                               \
    } break;                                                                                       \
    case 4: {                                                                                      \
        typedef bits_of<4>::type E;                                                                \
        __VA_ARGS__;                                                                               \
    } break;                                                                                       \
    default: {                                                                                     \
        typedef bits_of<8>::type E;                                                                \
        __VA_ARGS__;                                                                               \
    } break;                                                                                       \
    }

static int dtype_size(int dt)
{
    switch (dt) {
    case DDPL_FLOAT64:
    case DDPL_INT64:
        return 8;
    case DDPL_FLOAT32:
    case DDPL_INT32:
        return 4;
    case DDPL_FLOAT16:
    case DDPL_BFLOAT16:
    case DDPL_INT16:
        return 2;
    default:
        return 1;
    }
}

/* ---- index_select ---- */
/* Contiguous x (pre, size, post) and out (pre, n, post): element e of out. */
template <typename E>
__global__ void index_select_contig_kernel(E *out, const E *x, const long long *index,
                                           int64_t istride, int64_t total, int64_t n, int64_t post,
                                           int64_t size)
{
    for (int64_t e = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; e < total;
         e += (int64_t)gridDim.x * blockDim.x) {
        int64_t q = e % post, t = e / post, i = t % n, p = t / n;
        long long v = index[i * istride];
        if (v < 0 || v >= size) continue; /* recorded by check_index_kernel */
        out[e] = x[(p * size + v) * post + q];
    }
}

/* Any strides: geometry over out, a = out's strides, b = x's. */
template <typename E>
__global__ void index_select_kernel(E *out, const E *x, const long long *index, int64_t istride,
                                    cuda_index_geom g)
{
    for (int64_t e = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; e < g.n;
         e += (int64_t)gridDim.x * blockDim.x) {
        int64_t r = e, oo = 0, xo = 0, i = 0;
        for (int d = g.ndim - 1; d >= 0; d--) {
            int64_t p = r % g.sizes[d];
            r /= g.sizes[d];
            oo += p * g.a[d];
            if (d == g.dim)
                i = p;
            else
                xo += p * g.b[d];
        }
        long long v = index[i * istride];
        if (v < 0 || v >= g.bound) continue;
        out[oo] = x[xo + v * g.b[g.dim]];
    }
}

/* Runs the check kernel over index (1-D ops; gather and scatter_add check inside their own
 * kernel), then `launch`. The flag is read later (cuda_index_check.h): no synchronisation. */
template <typename F>
static int checked(const char *what, const long long *index, int64_t istride, int64_t n_index,
                   int64_t bound, void *flag, F launch)
{
    if (n_index > 0) {
        check_index_kernel<<<cuda_blocks(n_index), CUDA_THREADS, 0, cuda_stream()>>>(
            index, istride, n_index, bound, (unsigned long long *)flag);
        if (cuda_check(cudaGetLastError(), what) < 0) return -1;
    }
    return launch((unsigned long long *)flag);
}

extern "C" int cuda_launch_index_select(void *out, const void *x, int dtype, const int64_t *index,
                                        int64_t istride, int64_t n_index, const cuda_index_geom *g,
                                        void *flag)
{
    const cuda_index_geom G = *g;
    const long long *ix = (const long long *)index;
    return checked(
        "index_select", ix, istride, n_index, G.bound, flag, [&](unsigned long long *) -> int {
            if (G.n == 0) return 0;
            cudaStream_t st = cuda_stream();
            /* contiguous layouts: glue passes ndim == -1 with (pre, n, post) in
             * sizes[0..2] */
            DISPATCH_SIZE(dtype_size(dtype), {
                if (G.ndim < 0)
                    index_select_contig_kernel<E><<<cuda_blocks(G.n), CUDA_THREADS, 0, st>>>(
                        (E *)out, (const E *)x, ix, istride, G.n, G.sizes[1], G.sizes[2], G.bound);
                else
                    index_select_kernel<E><<<cuda_blocks(G.n), CUDA_THREADS, 0, st>>>(
                        (E *)out, (const E *)x, ix, istride, G);
            })
            return cuda_check(cudaGetLastError(), "index_select");
        });
}

/* ---- index_add: geometry over src, a = out's strides, b = src's ---- */
template <typename T>
__global__ void index_add_kernel(T *out, const T *src, const long long *index, int64_t istride,
                                 cuda_index_geom g, bool logical)
{
    for (int64_t e = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; e < g.n;
         e += (int64_t)gridDim.x * blockDim.x) {
        int64_t r = e, oo = 0, so = 0, i = 0;
        for (int d = g.ndim - 1; d >= 0; d--) {
            int64_t p = r % g.sizes[d];
            r /= g.sizes[d];
            so += p * g.b[d];
            if (d == g.dim)
                i = p;
            else
                oo += p * g.a[d];
        }
        long long v = index[i * istride];
        if (v < 0 || v >= g.bound) continue;
        atomic_add(out + oo + v * g.a[g.dim], src[so], logical);
    }
}

extern "C" int cuda_launch_index_add(void *out, const void *src, int dtype, const int64_t *index,
                                     int64_t istride, int64_t n_index, const cuda_index_geom *g,
                                     void *flag)
{
    const cuda_index_geom G = *g;
    const long long *ix = (const long long *)index;
    return checked(
        "index_add", ix, istride, n_index, G.bound, flag, [&](unsigned long long *) -> int {
            if (G.n == 0) return 0;
            cudaStream_t st = cuda_stream();
            int rc = -1;
            CUDA_DISPATCH_ALL(dtype, rc = ddpl_error("index_add: unsupported dtype %d", dtype), {
                index_add_kernel<scalar_t><<<cuda_blocks(G.n), CUDA_THREADS, 0, st>>>(
                    (scalar_t *)out, (const scalar_t *)src, ix, istride, G, dtype == DDPL_BOOL);
                rc = cuda_check(cudaGetLastError(), "index_add");
            })
            return rc;
        });
}

/* ---- gather / scatter_add: geometry over index (a = index's strides) ---- */
/* out (c) <- x (b) at p with dim replaced by index[p] */
template <typename E>
__global__ void gather_kernel(E *out, const E *x, const long long *index, cuda_index_geom g,
                              unsigned long long *flag)
{
    for (int64_t e = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; e < g.n;
         e += (int64_t)gridDim.x * blockDim.x) {
        int64_t io, xo, oo;
        index_offsets(g, e, &io, &xo, &oo);
        long long v = index[io];
        if (v < 0 || v >= g.bound) {
            record_bad(flag, e);
            continue;
        }
        out[oo] = x[xo + v * g.b[g.dim]];
    }
}

/* out (b) at p with dim replaced by index[p] += src (c) at p */
template <typename T>
__global__ void scatter_add_kernel(T *out, const T *src, const long long *index, cuda_index_geom g,
                                   unsigned long long *flag, bool logical)
{
    for (int64_t e = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; e < g.n;
         e += (int64_t)gridDim.x * blockDim.x) {
        int64_t io, oo, so;
        index_offsets(g, e, &io, &oo, &so);
        long long v = index[io];
        if (v < 0 || v >= g.bound) {
            record_bad(flag, e);
            continue;
        }
        atomic_add(out + oo + v * g.b[g.dim], src[so], logical);
    }
}

extern "C" int cuda_launch_gather(void *out, const void *x, int dtype, const int64_t *index,
                                  const cuda_index_geom *g, void *flag)
{
    const cuda_index_geom G = *g;
    const long long *ix = (const long long *)index;
    return checked("gather", ix, 1, 0, G.bound, flag, [&](unsigned long long *f) -> int {
        if (G.n == 0) return 0;
        DISPATCH_SIZE(dtype_size(dtype), {
            gather_kernel<E><<<cuda_blocks(G.n), CUDA_THREADS, 0, cuda_stream()>>>(
                (E *)out, (const E *)x, ix, G, f);
        })
        return cuda_check(cudaGetLastError(), "gather");
    });
}

extern "C" int cuda_launch_scatter_add(void *out, const void *src, int dtype, const int64_t *index,
                                       const cuda_index_geom *g, void *flag)
{
    const cuda_index_geom G = *g;
    const long long *ix = (const long long *)index;
    return checked("scatter_add", ix, 1, 0, G.bound, flag, [&](unsigned long long *f) -> int {
        if (G.n == 0) return 0;
        int rc = -1;
        CUDA_DISPATCH_ALL(dtype, rc = ddpl_error("scatter_add: unsupported dtype %d", dtype), {
            scatter_add_kernel<scalar_t><<<cuda_blocks(G.n), CUDA_THREADS, 0, cuda_stream()>>>(
                (scalar_t *)out, (const scalar_t *)src, ix, G, f, dtype == DDPL_BOOL);
            rc = cuda_check(cudaGetLastError(), "scatter_add");
        })
        return rc;
    });
}
