/* cuda/cuda_sort.cu: CUDA kernels that search sorted rows and count values into bins:
 * searchsorted (and bucketize), bincount, histc.
 * defines: cuda_launch_searchsorted, cuda_launch_bincount, cuda_launch_histc.
 *
 * One thread per value (grid-stride). searchsorted is a binary search written as PyTorch's
 * (negated comparisons, so a NaN value lands past the end). bincount and histc add atomically
 * into the bins, so float sums accumulate in an unspecified order, as in PyTorch; counts are
 * exact. */
#include "cuda_sort.h"
#include "cuda_typed.cuh"

/* ---- searchsorted ---- */
template <typename T>
__global__ void searchsorted_kernel(void *out, bool out_int32, const T *seq, const T *v, int64_t m,
                                    int64_t n, int64_t per_row, bool right)
{
    for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < n;
         i += (int64_t)gridDim.x * blockDim.x) {
        const T *row = per_row ? seq + (i / per_row) * m : seq;
        T val = v[i];
        int64_t lo = 0, hi = m;
        while (lo < hi) {
            int64_t mid = lo + ((hi - lo) >> 1);
            bool go_right = right ? !(row[mid] > val) : !(row[mid] >= val);
            if (go_right)
                lo = mid + 1;
            else
                hi = mid;
        }
        if (out_int32)
            ((int *)out)[i] = (int)lo;
        else
            ((long long *)out)[i] = lo;
    }
}

extern "C" int cuda_launch_searchsorted(void *out, bool out_int32, const void *seq, const void *v,
                                        int dtype, int64_t m, int64_t n, int64_t per_row,
                                        bool right)
{
    if (n == 0) return 0;
    cudaStream_t st = cuda_stream();
    int rc = -1;
    switch (dtype) {
#define CASE(DT, T)                                                                                \
    case DT:                                                                                       \
        searchsorted_kernel<T><<<cuda_blocks(n), CUDA_THREADS, 0, st>>>(                           \
            out, out_int32, (const T *)seq, (const T *)v, m, n, per_row, right);                   \
        rc = cuda_check(cudaGetLastError(), "searchsorted");                                       \
        break;
        CASE(DDPL_FLOAT32, float)
        CASE(DDPL_FLOAT64, double)
        CASE(DDPL_INT64, long long)
        CASE(DDPL_INT32, int)
        CASE(DDPL_INT16, short)
        CASE(DDPL_INT8, signed char)
        CASE(DDPL_UINT8, unsigned char)
        CASE(DDPL_BOOL, unsigned char)
#undef CASE
    default:
        rc = ddpl_error("searchsorted: unsupported dtype %d on cuda", dtype);
    }
    return rc;
}

/* ---- bincount ---- */
template <typename W>
__global__ void bincount_kernel(W *out, int64_t bins, const long long *x, const W *w, int64_t n)
{
    for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < n;
         i += (int64_t)gridDim.x * blockDim.x) {
        long long b = x[i];
        if (b < 0 || b >= bins) continue; /* the op checked; never write outside */
        atomicAdd(out + b, w ? w[i] : (W)1);
    }
}

/* int64 counts: atomicAdd has no signed 64-bit form; the counts are non-negative */
__global__ void bincount_count_kernel(unsigned long long *out, int64_t bins, const long long *x,
                                      int64_t n)
{
    for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < n;
         i += (int64_t)gridDim.x * blockDim.x) {
        long long b = x[i];
        if (b >= 0 && b < bins) atomicAdd(out + b, 1ull);
    }
}

extern "C" int cuda_launch_bincount(void *out, int out_dtype, int64_t bins, const int64_t *x,
                                    const void *w, int64_t n)
{
    cudaStream_t st = cuda_stream();
    size_t esz = out_dtype == DDPL_FLOAT32 ? 4 : 8;
    if (cuda_check(cudaMemsetAsync(out, 0, (size_t)bins * esz, st), "bincount") < 0) return -1;
    if (n == 0) return 0;
    const long long *xs = (const long long *)x;
    if (out_dtype == DDPL_INT64)
        bincount_count_kernel<<<cuda_blocks(n), CUDA_THREADS, 0, st>>>((unsigned long long *)out,
                                                                       bins, xs, n);
    else if (out_dtype == DDPL_FLOAT32)
        bincount_kernel<float>
            <<<cuda_blocks(n), CUDA_THREADS, 0, st>>>((float *)out, bins, xs, (const float *)w, n);
    else
        bincount_kernel<double><<<cuda_blocks(n), CUDA_THREADS, 0, st>>>((double *)out, bins, xs,
                                                                         (const double *)w, n);
    return cuda_check(cudaGetLastError(), "bincount");
}

/* ---- histc ---- */
/* PyTorch's bin, in the element's type: (v - lo) * bins / (hi - lo), v == hi in the last bin */
template <typename T>
__global__ void histc_kernel(T *out, const T *x, int64_t n, int64_t bins, T lo, T hi)
{
    for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < n;
         i += (int64_t)gridDim.x * blockDim.x) {
        T v = x[i];
        if (!(v >= lo && v <= hi)) continue; /* outside, or NaN */
        int64_t b = (int64_t)((v - lo) * (T)bins / (hi - lo));
        if (b >= bins) b = bins - 1;
        if (b >= 0) atomicAdd(out + b, (T)1);
    }
}

extern "C" int cuda_launch_histc(void *out, const void *x, int dtype, int64_t n, int64_t bins,
                                 double lo, double hi)
{
    cudaStream_t st = cuda_stream();
    size_t esz = dtype == DDPL_FLOAT32 ? 4 : 8;
    if (cuda_check(cudaMemsetAsync(out, 0, (size_t)bins * esz, st), "histc") < 0) return -1;
    if (n == 0) return 0;
    if (dtype == DDPL_FLOAT32)
        histc_kernel<float><<<cuda_blocks(n), CUDA_THREADS, 0, st>>>((float *)out, (const float *)x,
                                                                     n, bins, (float)lo, (float)hi);
    else if (dtype == DDPL_FLOAT64)
        histc_kernel<double><<<cuda_blocks(n), CUDA_THREADS, 0, st>>>(
            (double *)out, (const double *)x, n, bins, lo, hi);
    else
        return ddpl_error("histc: unsupported dtype %d on cuda", dtype);
    return cuda_check(cudaGetLastError(), "histc");
}
