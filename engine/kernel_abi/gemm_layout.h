/* kernel_abi/gemm_layout.h: how a BLAS library (OpenBLAS on the CPU, cuBLAS on CUDA) can read one
 * matrix operand of a product without copying it.
 * defines: gemm_layout, gemm_layout_of. */
#ifndef DDPL_OPS_GEMM_LAYOUT_H
#define DDPL_OPS_GEMM_LAYOUT_H

#include <limits.h>
#include <stdint.h>

typedef enum { LAYOUT_ROW, LAYOUT_COL, LAYOUT_PACK } gemm_layout;

/* A (rows, cols) matrix with element strides (rs, cs) reads as row-major with leading dimension
 * rs, column-major (the transpose of a row-major (cols, rows)) with leading dimension cs, or
 * neither (LAYOUT_PACK: the caller packs a row-major copy, *ld = its width). A size-1 dim's
 * stride is irrelevant; BLAS wants max(1, width) <= ld <= INT_MAX. */
static inline gemm_layout gemm_layout_of(int64_t rows, int64_t cols, int64_t rs, int64_t cs,
                                         int64_t *ld)
{
    int64_t wr = cols > 1 ? cols : 1, wc = rows > 1 ? rows : 1;
    if (cs == 1 || cols <= 1) {
        int64_t l = rows <= 1 ? wr : rs;
        if (l >= wr && l <= INT_MAX) {
            *ld = l;
            return LAYOUT_ROW;
        }
    }
    if (rs == 1 || rows <= 1) {
        int64_t l = cols <= 1 ? wc : cs;
        if (l >= wc && l <= INT_MAX) {
            *ld = l;
            return LAYOUT_COL;
        }
    }
    *ld = wr;
    return LAYOUT_PACK;
}

#endif
