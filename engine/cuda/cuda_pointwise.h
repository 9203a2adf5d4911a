/* cuda/cuda_pointwise.h: the C face of the elementwise CUDA kernels (cuda_pointwise.cu,
 * cuda_unary.cu, cuda_random.cu), and the operand geometry they share with the glue
 * (cuda_pointwise_ops.c). Plain C with no CUDA or engine-internal types, so a C test can
 * include it on a machine without a GPU.
 * defines: cuda_pw_geom, cuda_pw_geom_init, cuda_pw_geom_is_flat, cuda_pw_geom_fits_i32,
 *          cuda_pw_geom_offset, cuda_pw_scalars, cuda_pw_binop, cuda_pw_unop, cuda_pw_bwop,
 *          cuda_pw_* launchers. */
#ifndef DDPL_CUDA_POINTWISE_H
#define DDPL_CUDA_POINTWISE_H

#include <stdbool.h>
#include <stdint.h>

#include "ddpl/tensor.h"

#ifdef __cplusplus
extern "C" {
#endif

/* output + at most 3 inputs (where: cond, x, y) */
#define CUDA_PW_MAX_OPS 4

/* The iteration space of one elementwise launch: the output's shape with size-1 dims dropped
 * and dims merged wherever every operand is laid out contiguously across them, so that an
 * all-contiguous op becomes 1-D with unit strides (the flat fast path) and a broadcast one
 * keeps only the dims where some stride pattern changes. Row-major: dim ndim-1 is innermost.
 * strides[k] are element strides of operand k (0 = the operand is broadcast along that dim);
 * operand 0 is the output. */
typedef struct cuda_pw_geom {
    int ndim; /* >= 1 */
    int nops;
    int64_t n; /* number of output elements */
    int64_t sizes[DDPL_MAX_DIMS];
    int64_t strides[CUDA_PW_MAX_OPS][DDPL_MAX_DIMS];
} cuda_pw_geom;

/* Builds g for an output of shape (ndim, sizes) and nops operands, operand k being
 * (op_ndim[k], op_sizes[k], op_strides[k]) right-aligned to the output's shape (missing
 * leading dims and size-1 dims broadcast). Operand 0 must be the output itself. */
static inline void cuda_pw_geom_init(cuda_pw_geom *g, int nops, int ndim, const int64_t *sizes,
                                     const int *op_ndim, const int64_t *const *op_sizes,
                                     const int64_t *const *op_strides)
{
    int nd = 0;
    g->nops = nops;
    g->n = 1;
    for (int d = 0; d < ndim; d++) g->n *= sizes[d];
    for (int d = 0; d < ndim; d++) {
        if (sizes[d] == 1) continue; /* contributes nothing to any offset */
        int64_t st[CUDA_PW_MAX_OPS];
        for (int k = 0; k < nops; k++) {
            int td = d - (ndim - op_ndim[k]);
            st[k] = (td < 0 || op_sizes[k][td] == 1) ? 0 : op_strides[k][td];
        }
        /* merge into the previous (outer) dim when, for every operand, stepping the outer dim
         * once equals stepping this dim sizes[d] times */
        bool merge = nd > 0;
        for (int k = 0; merge && k < nops; k++)
            if (g->strides[k][nd - 1] != st[k] * sizes[d]) merge = false;
        if (merge) {
            g->sizes[nd - 1] *= sizes[d];
            for (int k = 0; k < nops; k++) g->strides[k][nd - 1] = st[k];
        } else {
            g->sizes[nd] = sizes[d];
            for (int k = 0; k < nops; k++) g->strides[k][nd] = st[k];
            nd++;
        }
    }
    if (nd == 0) { /* a single element (or a 0-dim tensor) */
        g->sizes[0] = 1;
        for (int k = 0; k < nops; k++) g->strides[k][0] = 0;
        nd = 1;
    }
    g->ndim = nd;
}

/* All operands contiguous and aligned with the output: element i is at offset i everywhere
 * (a single element counts too). */
static inline bool cuda_pw_geom_is_flat(const cuda_pw_geom *g)
{
    if (g->ndim != 1) return false;
    for (int k = 0; k < g->nops; k++)
        if (g->strides[k][0] != 1 && g->sizes[0] != 1) return false;
    return true;
}

/* 32-bit index math is exact: n and every operand's largest offset fit in int32, strides are
 * non-negative (the grid-stride loop then runs in uint32 without wrapping: n < 2^31 plus at
 * most 2^30 threads). */
static inline bool cuda_pw_geom_fits_i32(const cuda_pw_geom *g)
{
    if (g->n > INT32_MAX) return false;
    for (int k = 0; k < g->nops; k++) {
        int64_t span = 0;
        for (int d = 0; d < g->ndim; d++) {
            if (g->strides[k][d] < 0 || g->strides[k][d] > INT32_MAX) return false;
            span += (g->sizes[d] - 1) * g->strides[k][d];
            if (span > INT32_MAX) return false;
        }
    }
    return true;
}

/* Element offset of operand k for logical (row-major) output index i: the computation the
 * strided kernels do on the device, for tests. */
static inline int64_t cuda_pw_geom_offset(const cuda_pw_geom *g, int k, int64_t i)
{
    int64_t off = 0;
    for (int d = g->ndim - 1; d >= 0; d--) {
        off += (i % g->sizes[d]) * g->strides[k][d];
        i /= g->sizes[d];
    }
    return off;
}

/* Op scalars in each compute type (as the CPU loops' p0/p1): alpha for add/sub; the clamp
 * bounds (+-inf, or the int64 extremes, when absent). */
typedef struct cuda_pw_scalars {
    double d0, d1;
    float f0, f1;
    int64_t i0, i1;
} cuda_pw_scalars;

typedef enum cuda_pw_binop {
    CUDA_PW_ADD,
    CUDA_PW_SUB,
    CUDA_PW_MUL,
    CUDA_PW_DIV, /* floating dtypes only */
    CUDA_PW_POW,
    CUDA_PW_MAXIMUM,
    CUDA_PW_MINIMUM,
    CUDA_PW_EQ, /* comparisons write bool */
    CUDA_PW_NE,
    CUDA_PW_LT,
    CUDA_PW_LE,
    CUDA_PW_GT,
    CUDA_PW_GE
} cuda_pw_binop;

typedef enum cuda_pw_unop {
    CUDA_PW_NEG, /* neg abs sign relu clamp: every dtype; the others floating only */
    CUDA_PW_ABS,
    CUDA_PW_SIGN,
    CUDA_PW_RELU,
    CUDA_PW_CLAMP,
    CUDA_PW_EXP,
    CUDA_PW_LOG,
    CUDA_PW_SQRT,
    CUDA_PW_RSQRT,
    CUDA_PW_SIN,
    CUDA_PW_COS,
    CUDA_PW_TANH,
    CUDA_PW_SIGMOID,
    CUDA_PW_GELU_ERF,
    CUDA_PW_GELU_TANH,
    CUDA_PW_SILU
} cuda_pw_unop;

/* fused activation backward: out <- f(grad, saved); floating dtypes only */
typedef enum cuda_pw_bwop {
    CUDA_PW_RELU_BW,    /* saved = forward output */
    CUDA_PW_SIGMOID_BW, /* saved = forward output */
    CUDA_PW_TANH_BW,    /* saved = forward output */
    CUDA_PW_SILU_BW,    /* saved = forward input */
    CUDA_PW_GELU_ERF_BW,
    CUDA_PW_GELU_TANH_BW
} cuda_pw_bwop;

/* Launchers, on the current device's compute stream. Each returns 0, or -1 with ddpl_error set
 * naming `what` (the op). g describes the operands in the order of the arguments, output
 * first; g->n > 0 (the glue launches nothing for empty tensors). Data pointers point at
 * element 0 of each operand (storage offset applied). */
int cuda_pw_binary(const char *what, cuda_pw_binop op, int dtype, int out_dtype, void *out,
                   const void *a, const void *b, const cuda_pw_geom *g, const cuda_pw_scalars *s);
int cuda_pw_unary(const char *what, cuda_pw_unop op, int dtype, void *out, const void *a,
                  const cuda_pw_geom *g, const cuda_pw_scalars *s);
int cuda_pw_backward(const char *what, cuda_pw_bwop op, int dtype, void *out, const void *grad,
                     const void *saved, const cuda_pw_geom *g);
/* the UNARY_FN and BINARY_FN kernels (cuda_math_fns.cu): fn is a ddpl_unary_fn (s carries
 * round's scalars) or a ddpl_binary_fn; inputs and output share dtype */
int cuda_pw_unary_fn(const char *what, int fn, int dtype, void *out, const void *a,
                     const cuda_pw_geom *g, const cuda_pw_scalars *s);
int cuda_pw_binary_fn(const char *what, int fn, int dtype, void *out, const void *a, const void *b,
                      const cuda_pw_geom *g);
/* out <- cond ? x : y, a select of elem_size-byte elements (cond is bool) */
int cuda_pw_where(int elem_size, void *out, const void *cond, const void *x, const void *y,
                  const cuda_pw_geom *g);
/* every element of out (1-operand g) <- the elem_size low bytes of pattern (host-encoded) */
int cuda_pw_fill(int elem_size, uint64_t pattern, void *out, const cuda_pw_geom *g);
/* out <- in converted as the CPU's copy does (2-operand g) */
int cuda_pw_copy(int out_dtype, void *out, int in_dtype, const void *in, const cuda_pw_geom *g);
/* out[i * stride] <- start + i * step for i < n (integers: rounded to nearest) */
int cuda_pw_arange(int dtype, void *out, int64_t n, int64_t stride, double start, double step);
/* contiguous out of n floating elements from Philox stream (seed, offset): uniform in [a, b)
 * or normal (mean a, std b), the values the CPU kernel draws (core/philox.h) */
int cuda_pw_random(int normal, int dtype, void *out, int64_t n, uint64_t seed, uint64_t offset,
                   double a, double b);

#ifdef __cplusplus
}
#endif
#endif
