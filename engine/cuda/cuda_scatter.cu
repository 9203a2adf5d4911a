/* cuda/cuda_scatter.cu: the SCATTER kernel (issue 29): scatter, scatter_add, scatter_reduce
 * (sum, prod, amax, amin; mean is sum and a count in ops/scatter.c), index_copy, index_fill.
 * defines: cuda_launch_scatter.
 *
 * One thread per element of index (grid-stride), offsets decoded from the row-major position,
 * so any strides work (src may be an expanded number). Several elements may land on one
 * target: a plain scatter stores (which one wins is unspecified, as in PyTorch on CUDA); the
 * reductions combine atomically: native atomicAdd for float and double sums, else a
 * compare-and-swap loop on the element's 64-bit word (8-byte types) or its aligned 32-bit word
 * (1-, 2- and 4-byte types; allocations are 256-byte aligned, so the word lies inside). The
 * 16-bit floats combine in float; bool's sum is or and its product and. Floating sums and
 * products therefore accumulate in an unspecified order, as PyTorch's. */
#include <string.h>

#include "cuda_index_addr.cuh"
#include "cuda_scatter.h"
#include "cuda_typed.cuh"
#include "kernel_abi/kernel_params.h"

template <typename A> __device__ __forceinline__ bool is_nan_acc(A v)
{
    return v != v; /* false for the integers */
}

/* a combined with b by reduce r, in the accumulator type; bool results normalised to 0/1 */
template <typename T> __device__ __forceinline__ T combine(T a, T b, int r, bool is_bool)
{
    typedef typename acc_of<T>::type A;
    A x = to_acc<A>(a), y = to_acc<A>(b), z = y;
    switch (r) {
    case DDPL_SCATTER_SUM:
        z = x + y;
        break;
    case DDPL_SCATTER_PROD:
        z = x * y;
        break;
    case DDPL_SCATTER_AMAX:
        z = is_nan_acc(y) ? y : (x < y ? y : x); /* a NaN x stays: x < y is false */
        break;
    case DDPL_SCATTER_AMIN:
        z = is_nan_acc(y) ? y : (y < x ? y : x);
        break;
    default:
        break;
    }
    if (is_bool) z = (A)(z != (A)0);
    return from_acc<T>(z);
}

template <typename T> __device__ __forceinline__ T from_bits(unsigned long long b)
{
    T t;
    memcpy(&t, &b, sizeof(T)); /* little-endian: the low bytes */
    return t;
}
template <typename T> __device__ __forceinline__ unsigned long long to_bits(T t)
{
    unsigned long long b = 0;
    memcpy(&b, &t, sizeof(T));
    return b;
}

/* The native sums, where the hardware has them. */
template <typename T> __device__ __forceinline__ bool native_add(T *, T)
{
    return false;
}
template <> __device__ __forceinline__ bool native_add<float>(float *p, float v)
{
    atomicAdd(p, v);
    return true;
}
template <> __device__ __forceinline__ bool native_add<double>(double *p, double v)
{
    atomicAdd(p, v);
    return true;
}

template <typename T> __device__ void atomic_combine(T *p, T v, int r, bool is_bool)
{
    if (r == DDPL_SCATTER_SUM && native_add(p, v)) return;
    if (sizeof(T) == 8) {
        unsigned long long *w = (unsigned long long *)p;
        unsigned long long old = *w, assumed;
        do {
            assumed = old;
            unsigned long long nb = to_bits(combine(from_bits<T>(assumed), v, r, is_bool));
            if (nb == assumed) return;
            old = atomicCAS(w, assumed, nb);
        } while (old != assumed);
        return;
    }
    unsigned int *w = (unsigned int *)((uintptr_t)p & ~(uintptr_t)3);
    unsigned int shift = (unsigned int)((uintptr_t)p & 3) * 8;
    unsigned int mask = sizeof(T) == 4 ? 0xffffffffu : sizeof(T) == 2 ? 0xffffu : 0xffu;
    unsigned int old = *w, assumed;
    do {
        assumed = old;
        T cur = from_bits<T>((assumed >> shift) & mask);
        unsigned int nb = (unsigned int)to_bits(combine(cur, v, r, is_bool)) & mask;
        unsigned int nw = (assumed & ~(mask << shift)) | (nb << shift);
        if (nw == assumed) return;
        old = atomicCAS(w, assumed, nw);
    } while (old != assumed);
}

/* out (b) at p with dim replaced by index[p] (a) <- combine(., src (c) at p) */
template <typename T>
__global__ void scatter_kernel(T *out, const T *src, const long long *index, cuda_index_geom g,
                               int reduce, bool is_bool, unsigned long long *flag)
{
    for (int64_t e = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; e < g.n;
         e += (int64_t)gridDim.x * blockDim.x) {
        int64_t io, oo, so;
        index_offsets(g, e, &io, &oo, &so);
        long long v = index[io];
        if (v < 0 || v >= g.bound) {
            atomicMin(flag, (unsigned long long)e);
            continue;
        }
        T *t = out + oo + v * g.b[g.dim];
        if (reduce == DDPL_SCATTER_ASSIGN)
            *t = src[so];
        else
            atomic_combine(t, src[so], reduce, is_bool);
    }
}

extern "C" int cuda_launch_scatter(void *out, const void *src, int dtype, const int64_t *index,
                                   const cuda_index_geom *g, int reduce, void *flag)
{
    const cuda_index_geom G = *g;
    if (G.n == 0) return 0;
    int rc = -1;
    CUDA_DISPATCH_ALL(dtype, rc = ddpl_error("scatter: unsupported dtype %d", dtype), {
        scatter_kernel<scalar_t><<<cuda_blocks(G.n), CUDA_THREADS, 0, cuda_stream()>>>(
            (scalar_t *)out, (const scalar_t *)src, (const long long *)index, G, reduce,
            dtype == DDPL_BOOL, (unsigned long long *)flag);
        rc = cuda_check(cudaGetLastError(), "scatter");
    })
    return rc;
}
