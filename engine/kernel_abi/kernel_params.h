/* kernel_abi/kernel_params.h: parameter blocks passed from ops to kernels (the `params` argument).
 * defines: one struct per kernel family; nn kernels' structs are in kernel_abi/nn_params.h. */
#ifndef DDPL_KERNEL_PARAMS_H
#define DDPL_KERNEL_PARAMS_H

#include <stdbool.h>
#include <stdint.h>

typedef struct ddpl_fill_params {
    double value;
} ddpl_fill_params;

/* Random kernels draw from the stream (seed, offset): element i (in the output's logical,
 * row-major order) uses 32-bit value i of that stream (normal: values 2i and 2i+1). */
typedef struct ddpl_random_params {
    uint64_t seed, offset;
    double a, b; /* uniform: [a, b); normal: mean a, std b */
} ddpl_random_params;

typedef struct ddpl_arange_params {
    double start, step;
} ddpl_arange_params;

typedef struct ddpl_alpha_params {
    double alpha;
} ddpl_alpha_params;

typedef struct ddpl_gelu_params {
    bool tanh_approximation;
} ddpl_gelu_params;

typedef struct ddpl_clamp_params {
    bool has_min, has_max;
    double min, max;
} ddpl_clamp_params;

/* reduce_mask bit d set: dimension d of in[0] is reduced (out has size 1 there) */
typedef struct ddpl_reduce_params {
    uint32_t reduce_mask;
} ddpl_reduce_params;

typedef struct ddpl_dim_params {
    int dim; /* already wrapped to 0..ndim-1 */
} ddpl_dim_params;

typedef struct ddpl_gemm_params {
    double alpha, beta; /* beta 0: out is not read (may be uninitialised) */
} ddpl_gemm_params;

typedef struct ddpl_topk_params {
    int64_t k;
    int dim;
    bool largest, sorted;
} ddpl_topk_params;

#endif
