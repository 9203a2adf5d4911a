/* cpu/cpu_gemm_bf16.h: bfloat16 GEMM on the CPU's bf16 dot-product units.
 * defines: cpu_bf16_gemm_available, cpu_bf16_gemm_kernel, cpu_bf16_gemm.
 *
 * Where the CPU has AMX (Sapphire Rapids and later) a bfloat16 product runs on its tiles, else
 * where it has AVX512-BF16 (`vdpbf16ps`: Zen 4 and later, Cooper Lake) on that, at about twice
 * the float32 FMA rate on Zen 4 (the same rate on Intel cores): bf16 operands, float32
 * accumulation, a float32 or bfloat16 result. Elsewhere cpu_bf16_gemm_available() is false and
 * cpu_gemm keeps its widening path (bf16 -> float32 -> sgemm). The result equals the float32
 * product of the same bf16 values up to the order of the float32 additions. */
#ifndef DDPL_CPU_GEMM_BF16_H
#define DDPL_CPU_GEMM_BF16_H

#include "core/core.h"

/* True when the CPU (and the OS, which must save the AVX-512 state) has AVX512-BF16, and the
 * environment does not turn the path off (DDPLUA_CPU_BF16_GEMM=0: the widening path, for
 * comparing both on one machine). Decided once. */
bool cpu_bf16_gemm_available(void);

/* The kernel bf16 products run on: "amx", "avx512_bf16" or "widened" (not available).
 * DDPLUA_CPU_BF16_GEMM=avx512_bf16 leaves AMX unused, =0 turns both off. */
const char *cpu_bf16_gemm_kernel(void);

/* One bfloat16 operand: element (i, j) at p[i*rs + j*cs] (strides in elements, any sign-free
 * layout: row-major, transposed, or strided). */
typedef struct {
    const uint16_t *p;
    int64_t rs, cs;
} cpu_bf16_matrix;

/* C (M,N) = alpha * A (M,K) @ B (K,N) + beta * C for K >= 1 (K == 0 writes nothing), C float32 or
 * bfloat16 (c_dtype) with element strides crs, ccs; beta 0 never reads C (NaN there does not
 * propagate, as BLAS). Large products are split over the engine's threads (outside a parallel
 * region). Returns 0, or -1 with an error set when the packing scratch cannot be allocated (C is
 * then unchanged: all scratch is taken before the first write). Requires cpu_bf16_gemm_available().
 */
int cpu_bf16_gemm(int64_t M, int64_t N, int64_t K, float alpha, cpu_bf16_matrix A,
                  cpu_bf16_matrix B, float beta, void *C, ddpl_dtype c_dtype, int64_t crs,
                  int64_t ccs);

#endif
