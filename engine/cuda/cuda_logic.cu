/* cuda/cuda_logic.cu: any/all kernels over a set of dims.
 * defines: cuda_launch_logic.
 *
 * The input is seen as (outputs, reduced elements) through ddpl_reduce_geom, as the
 * reductions see it (cuda_reduce.cu). Each output looks for a deciding element (any: a
 * non-zero one, NaN included; all: a zero). Two shapes of work:
 *   - thread mode: one thread per output walks its elements and stops at the first deciding
 *     one. For short reductions, and for "columns" (the innermost kept dim contiguous:
 *     neighbouring threads read neighbouring addresses);
 *   - block mode: one block per output, threads striding over its elements (coalesced when the
 *     innermost reduced dim is contiguous); a thread that finds one raises a flag in shared
 *     memory (every writer writes the same 1, so the race is benign) and the block stops at the
 *     next check.
 * The output is 1 when found (any) or when not found (all); an empty reduction gives 0 (1). */
#include "cuda_logic.h"
#include "cuda_reduce_addr.cuh"
#include "cuda_typed.cuh"

/* whether element v decides: a zero for all, a non-zero (NaN too) for any */
template <typename T> __device__ __forceinline__ bool decides(T v, bool want_zero)
{
    typedef typename acc_of<T>::type A;
    return (to_acc<A>(v) != (A)0) != want_zero;
}

template <typename T>
__global__ void logic_thread_kernel(unsigned char *out, const T *in, ddpl_reduce_geom g,
                                    bool want_zero)
{
    for (int64_t o = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; o < g.nout;
         o += (int64_t)gridDim.x * blockDim.x) {
        int64_t io, oo;
        kept_offsets(g, o, &io, &oo);
        bool found = false;
        for (int64_t r = 0; r < g.nred && !found; r++)
            found = decides(in[io + red_offset(g, r)], want_zero);
        out[oo] = found != want_zero;
    }
}

/* Block x handles outputs x, x + gridDim.x, ... (uniform over the block, so the barriers are
 * safe). Threads check the shared flag every CUDA_THREADS elements. */
template <typename T>
__global__ void logic_block_kernel(unsigned char *out, const T *in, ddpl_reduce_geom g,
                                   bool want_zero)
{
    __shared__ int found[1]; /* an array: the emulation's rewrite takes arrays */
    for (int64_t o = blockIdx.x; o < g.nout; o += gridDim.x) {
        int64_t io, oo;
        kept_offsets(g, o, &io, &oo);
        if (threadIdx.x == 0) found[0] = 0;
        __syncthreads();
        for (int64_t r0 = 0; r0 < g.nred; r0 += blockDim.x) {
            int64_t r = r0 + threadIdx.x;
            if (r < g.nred && decides(in[io + red_offset(g, r)], want_zero)) found[0] = 1;
            __syncthreads();
            bool stop = found[0] != 0;
            __syncthreads(); /* all have read the flag before any thread can raise it again, so
                                every thread sees the same value and they leave together */
            if (stop) break;
        }
        if (threadIdx.x == 0) out[oo] = (found[0] != 0) != want_zero;
        __syncthreads(); /* found is reset for the next output */
    }
}

template <typename T>
static int logic_typed(unsigned char *out, const T *in, const ddpl_reduce_geom &g, bool want_zero)
{
    cudaStream_t st = cuda_stream();
    bool columns =
        g.nk > 0 && g.kin[g.nk - 1] == 1 && g.ksize[g.nk - 1] > 1 && g.rin[g.nr - 1] != 1;
    if (g.nred <= 64 || (columns && g.nout >= 4096)) {
        logic_thread_kernel<T><<<cuda_blocks(g.nout), CUDA_THREADS, 0, st>>>(out, in, g, want_zero);
    } else {
        unsigned blocks = (unsigned)(g.nout < (1 << 20) ? g.nout : (1 << 20));
        logic_block_kernel<T><<<blocks, CUDA_THREADS, 0, st>>>(out, in, g, want_zero);
    }
    return cuda_check(cudaGetLastError(), want_zero ? "all" : "any");
}

extern "C" int cuda_launch_logic(unsigned char *out, const void *in, int dtype,
                                 const ddpl_reduce_geom *g, bool want_zero)
{
    if (g->nout == 0) return 0;
    int rc = -1;
    CUDA_DISPATCH_ALL(dtype, rc = ddpl_error("any/all: unsupported dtype %d on cuda", dtype),
                      { rc = logic_typed<scalar_t>(out, (const scalar_t *)in, *g, want_zero); })
    return rc;
}
