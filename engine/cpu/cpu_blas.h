/* cpu/cpu_blas.h: the GEMM front shared by the CPU kernels built on BLAS (matmul, conv2d).
 * defines: cpu_blas_gemm, cpu_blas_parallel_for, cpu_blas_parts.
 *
 * Only float32 and float64 go through BLAS; cpu_gemm in cpu_gemm.c handles the other dtypes. */
#ifndef DDPL_CPU_BLAS_H
#define DDPL_CPU_BLAS_H

#include "core/core.h"

/* Row-major C (M,N) = alpha * op(A) @ op(B) + beta * C for dt float32 or float64, where op(A)
 * is (M,K): A itself with leading dimension lda (ta false) or the transpose of a row-major
 * (K,M) matrix (ta true); likewise op(B) (K,N). beta 0 never reads C. Sizes and leading
 * dimensions must fit a BLAS int (checked by the callers). Outside a parallel region a large
 * product is split over the OpenMP threads; OpenBLAS itself always runs single-threaded (its
 * spinning pool would starve the OpenMP loops of the other kernels, see cpu_gemm.c). */
void cpu_blas_gemm(ddpl_dtype dt, bool ta, bool tb, int64_t M, int64_t N, int64_t K, double alpha,
                   const void *A, int64_t lda, const void *B, int64_t ldb, double beta, void *C,
                   int64_t ldc);

/* Calls fn(begin, end, part, thread, ctx) over the items [0, n) cut into contiguous parts of
 * equal length (the last may be shorter), spread over the engine's threads: a GEMM per item,
 * many items (parallel over the items beats splitting each small GEMM). `parts` is the most
 * parts wanted (<= 0: the default, cpu_blas_parts(n)); part is the index of a range, fixed by n
 * and parts alone, so a sum kept per part and added up in part order is the same bits on every
 * run, where a sum kept per thread is not (which thread takes which part changes from run to
 * run). thread, in [0, cpu_blas_max_threads()), indexes scratch buffers. With n < 2, one thread
 * or inside a parallel job it runs fn(0, n, 0, 0, ctx), whose GEMMs then split themselves. */
void cpu_blas_parallel_for(int64_t n, int parts,
                           void (*fn)(int64_t begin, int64_t end, int part, int thread, void *ctx),
                           void *ctx);
/* The default number of parts of cpu_blas_parallel_for over n items (>= 1): the number of
 * per-part sums a caller allocates. */
int cpu_blas_parts(int64_t n);
int cpu_blas_max_threads(void);

#endif
