/* core/matmul_precision.h: the float32 matmul precision switch (TF32), torch's
 * set_float32_matmul_precision.
 * defines: ddpl_matmul_precision, ddpl_set_float32_matmul_precision,
 *          ddpl_get_float32_matmul_precision, ddpl_allow_tf32.
 *
 * 'highest' (float32 everywhere, the default), 'high' and 'medium' (TF32 tensor cores allowed
 * for float32 matmul and conv on CUDA; cuBLAS has no bf16x3 mode, so 'medium' means TF32 too).
 * Process-wide, as in PyTorch. A core setting because the kernels read it (cuBLAS and cuDNN
 * pick their math mode per call) and the script sets it: both layers sit above core. */
#ifndef DDPL_MATMUL_PRECISION_H
#define DDPL_MATMUL_PRECISION_H

#include <stdbool.h>

typedef enum ddpl_matmul_precision {
    DDPL_PRECISION_HIGHEST,
    DDPL_PRECISION_HIGH,
    DDPL_PRECISION_MEDIUM
} ddpl_matmul_precision;

int ddpl_set_float32_matmul_precision(const char *name); /* -1 with error on a bad name */
const char *ddpl_get_float32_matmul_precision(void);
bool ddpl_allow_tf32(void); /* precision is 'high' or 'medium' */

#endif
