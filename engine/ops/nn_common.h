/* ops/nn_common.h: checks and helpers shared by the neural-network ops (ops/nn_*.c).
 * defines: nn_check_float, nn_check_param, nn_contiguous, nn_alias, nn_run_or_release,
 *          nn_rename_error; declares nn_run_conv_kernel (nn_conv.c).
 *
 * The nn kernels take contiguous floating point tensors in canonical layouts; these helpers
 * produce them without recording autograd (the op records one node for the whole function). */
#ifndef DDPL_NN_COMMON_H
#define DDPL_NN_COMMON_H

#include "kernel_abi/nn_params.h"
#include "op_util.h"

/* Runs CONV2D or CONV2D_BACKWARD (outs/ins as ops.def); 16-bit operands on the CPU compute in
 * float32 copies (nn_conv.c). */
int nn_run_conv_kernel(ddpl_op op, ddpl_tensor **outs, int n_out, ddpl_tensor **ins, int n_in,
                       const ddpl_conv_params *p);

/* The nn kernels take every floating dtype (the CPU computes float16/bfloat16 in float32:
 * cpu/cpu_widen.c; the CUDA kernels load them into float accumulators). */
static inline int nn_check_float(const char *op, const char *what, const ddpl_tensor *x)
{
    if (ddpl_dtype_is_floating((ddpl_dtype)x->dtype)) return 0;
    return ddpl_error("%s: expected a floating point %s (float32, float64, float16 or bfloat16), "
                      "got %s",
                      op, what, ddpl_dtype_name((ddpl_dtype)x->dtype));
}

/* An optional parameter tensor p (weight, bias, running stat): same dtype and device as x, 1-D
 * of size n (or NULL). */
static inline int nn_check_param(const char *op, const char *what, const ddpl_tensor *p,
                                 const ddpl_tensor *x, int64_t n)
{
    if (!p) return 0;
    if (ddpl_check_same_device(op, x, p) < 0) return -1;
    if (p->dtype != x->dtype)
        return ddpl_error("%s: %s has dtype %s but the input has %s", op, what,
                          ddpl_dtype_name((ddpl_dtype)p->dtype),
                          ddpl_dtype_name((ddpl_dtype)x->dtype));
    if (p->ndim != 1 || p->sizes[0] != n) {
        char a[128];
        return ddpl_error("%s: %s of shape %s does not match the %lld channels of the input", op,
                          what, ddpl_shape_str(p, a, sizeof a), (long long)n);
    }
    return 0;
}

/* x itself (retained) when contiguous, else a contiguous copy; never records autograd. */
static inline ddpl_tensor *nn_contiguous(ddpl_tensor *x)
{
    if (!x || ddpl_tensor_is_contiguous(x)) return x ? ddpl_tensor_retain(x) : NULL;
    ddpl_tensor *c = ddpl_tensor_new(x->ndim, x->sizes, (ddpl_dtype)x->dtype, x->device);
    if (c && ddpl_run_kernel(DDPL_OP_COPY, x->device, &c, &x, NULL) < 0) {
        ddpl_tensor_release(c);
        return NULL;
    }
    return c;
}

/* A contiguous header over contiguous x's storage with another shape of the same numel. */
static inline ddpl_tensor *nn_alias(const ddpl_tensor *x, int ndim, const int64_t *sizes)
{
    int64_t strides[DDPL_MAX_DIMS];
    ddpl_contiguous_strides(ndim, sizes, strides);
    return ddpl_tensor_alias(x, ndim, sizes, strides, x->offset);
}

/* Runs kernel op; on failure releases `out` (one tensor) and returns NULL, else returns it. */
static inline ddpl_tensor *nn_run_or_release(ddpl_op op, ddpl_tensor *out, ddpl_tensor **outs,
                                             ddpl_tensor **ins, const void *params)
{
    if (ddpl_run_kernel(op, out->device, outs, ins, params) < 0) {
        ddpl_tensor_release(out);
        return NULL;
    }
    return out;
}

/* Rewrites the last error "from: message" as "op: message": an op built on another reports
 * the failure under its own name (embedding's bad index is found by index_select). */
static inline void nn_rename_error(const char *from, const char *op)
{
    const char *msg = ddpl_last_error();
    size_t n = strlen(from);
    if (strncmp(msg, from, n) != 0 || strncmp(msg + n, ": ", 2) != 0) return;
    char copy[1024];
    snprintf(copy, sizeof copy, "%s", msg + n + 2); /* ddpl_error must not read its own buffer */
    ddpl_error("%s: %s", op, copy);
}

/* nn_attention.c: the score size (bytes of (B,H,L,S)) from which CPU attention takes the fused
 * kernel instead of composing (default 0: always); sets it when bytes >= 0 and returns the
 * previous value, or just returns it when bytes < 0. For specs and benchmarks that force a path
 * (ddpl._sdpa_cpu_fused_min_bytes). */
int64_t ddpl_sdpa_cpu_fused_min_bytes(int64_t bytes);

#endif
