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

/* UNARY_FN: which function of math_fns.def; p0, p1 its scalars (ROUND: 10^|decimals| and the
 * sign of decimals, 0 for none) */
typedef enum ddpl_unary_fn {
#define DDPL_UNARY_FN(ID, NAME) DDPL_UFN_##ID,
#include "kernel_abi/math_fns.def"
#undef DDPL_UNARY_FN
    DDPL_UFN_COUNT
} ddpl_unary_fn;

typedef struct ddpl_unary_fn_params {
    int fn; /* ddpl_unary_fn */
    double p0, p1;
} ddpl_unary_fn_params;

/* BINARY_FN: which function of math_fns.def */
typedef enum ddpl_binary_fn {
#define DDPL_BINARY_FN(ID, NAME, INT_OK) DDPL_BFN_##ID,
#include "kernel_abi/math_fns.def"
#undef DDPL_BINARY_FN
    DDPL_BFN_COUNT
} ddpl_binary_fn;

typedef struct ddpl_binary_fn_params {
    int fn; /* ddpl_binary_fn */
} ddpl_binary_fn_params;

/* The PyTorch name of a function id ("floor", "remainder"), for error messages. */
static inline const char *ddpl_unary_fn_name(int fn)
{
    static const char *const names[DDPL_UFN_COUNT] = {
#define DDPL_UNARY_FN(ID, NAME) NAME,
#include "kernel_abi/math_fns.def"
#undef DDPL_UNARY_FN
    };
    return fn >= 0 && fn < DDPL_UFN_COUNT ? names[fn] : "unary_fn";
}
static inline const char *ddpl_binary_fn_name(int fn)
{
    static const char *const names[DDPL_BFN_COUNT] = {
#define DDPL_BINARY_FN(ID, NAME, INT_OK) NAME,
#include "kernel_abi/math_fns.def"
#undef DDPL_BINARY_FN
    };
    return fn >= 0 && fn < DDPL_BFN_COUNT ? names[fn] : "binary_fn";
}

/* reduce_mask bit d set: dimension d of in[0] is reduced (out has size 1 there) */
typedef struct ddpl_reduce_params {
    uint32_t reduce_mask;
} ddpl_reduce_params;

typedef struct ddpl_dim_params {
    int dim; /* already wrapped to 0..ndim-1 */
} ddpl_dim_params;

/* CUMSUM/CUMPROD/CUMMAX/CUMMIN: dim already wrapped (0 for a 0-dim input); reverse scans from
 * the end (cumsum only: its gradient is the reversed cumulative sum) */
typedef struct ddpl_scan_params {
    int dim;
    bool reverse;
} ddpl_scan_params;

typedef struct ddpl_gemm_params {
    double alpha, beta; /* beta 0: out is not read (may be uninitialised) */
} ddpl_gemm_params;

typedef struct ddpl_topk_params {
    int64_t k;
    int dim;
    bool largest, sorted;
} ddpl_topk_params;

/* sort, searchsorted, histc (ops/sort.c, ops/histogram.c) */
typedef struct ddpl_sort_params {
    int dim; /* wrapped; 0 for a 0-dim input */
    bool descending;
} ddpl_sort_params;

/* kthvalue (ops/sort.c, ops/reduce_median.c): which rank each slice selects, in the stable
 * ascending order (NaN last); the kernel writes the selected elements' positions along dim */
typedef enum {
    DDPL_SELECT_KTH,       /* rank k */
    DDPL_SELECT_MEDIAN,    /* (n - 1) / 2, or the first NaN's rank n - nans */
    DDPL_SELECT_NANMEDIAN, /* max(n - nans - 1, 0) / 2 */
    DDPL_SELECT_RANKS      /* the int64 ranks of in[1] */
} ddpl_select_mode;

typedef struct ddpl_kthvalue_params {
    int dim;   /* wrapped; in[0] has at least one dim */
    int mode;  /* ddpl_select_mode */
    int64_t k; /* DDPL_SELECT_KTH: the 0-based rank */
} ddpl_kthvalue_params;

typedef struct ddpl_searchsorted_params {
    bool right;      /* first index with seq[i] > v (else seq[i] >= v) */
    int64_t per_row; /* values per row of the sequence (0: one 1-D sequence for all values) */
} ddpl_searchsorted_params;

typedef struct ddpl_histc_params {
    double min, max; /* the finite range, min < max; elements outside it are not counted */
} ddpl_histc_params;

/* SCATTER (ops/scatter.c, issue 29): how an element scattered to a position combines with the
 * value there; every index is checked against the dim's size before anything is written (CUDA:
 * deferred, cuda_index_check.h), and the error names op */
typedef enum ddpl_scatter_mode {
    DDPL_SCATTER_ASSIGN, /* plain scatter: the last write wins (any order on CUDA) */
    DDPL_SCATTER_SUM,
    DDPL_SCATTER_PROD,
    DDPL_SCATTER_AMAX, /* NaN wins, as PyTorch */
    DDPL_SCATTER_AMIN,
} ddpl_scatter_mode;

typedef struct ddpl_scatter_params {
    int dim;        /* wrapped; 0 for a 0-dim output */
    int reduce;     /* ddpl_scatter_mode */
    const char *op; /* a static string: the user-facing op for errors ("scatter", "index_copy") */
} ddpl_scatter_params;

#endif
