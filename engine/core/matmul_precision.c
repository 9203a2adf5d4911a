/* core/matmul_precision.c: the float32 matmul precision switch.
 * defines: ddpl_set_float32_matmul_precision, ddpl_get_float32_matmul_precision,
 *          ddpl_allow_tf32 (matmul_precision.h). */
#include "matmul_precision.h"

#include "core.h"

/* Read by every cuBLAS/cuDNN call, written by the script: a relaxed atomic is enough. */
static atomic_int matmul_precision = DDPL_PRECISION_HIGHEST;

static const char *const precision_names[] = {"highest", "high", "medium"};

int ddpl_set_float32_matmul_precision(const char *name)
{
    for (int i = 0; i < 3; i++)
        if (strcmp(name, precision_names[i]) == 0) {
            atomic_store_explicit(&matmul_precision, i, memory_order_relaxed);
            return 0;
        }
    return ddpl_error("set_float32_matmul_precision: expected 'highest', 'high' or 'medium', "
                      "got '%s'",
                      name);
}

const char *ddpl_get_float32_matmul_precision(void)
{
    return precision_names[atomic_load_explicit(&matmul_precision, memory_order_relaxed)];
}

bool ddpl_allow_tf32(void)
{
    return atomic_load_explicit(&matmul_precision, memory_order_relaxed) != DDPL_PRECISION_HIGHEST;
}
