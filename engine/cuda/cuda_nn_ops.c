/* cuda/cuda_nn_ops.c: the ddpl_kernel glue of the CUDA normalisation and pooling kernels
 * (cuda_norm.cu, cuda_pool.cu): canonical shapes and data pointers in, launch out.
 * defines: cuda_register_nn.
 *
 * The ops layer (nn_norm.c, nn_pool.c) hands these kernels contiguous tensors in canonical
 * layouts: layer_norm's x as (M,N), batch_norm's as (N,C,S), pools' as (N,C,H,W). The only
 * allocation here is layer_norm backward's workspace for the per-chunk column partials, a
 * device tensor released right after the launches (the compute stream orders its reuse). */
#include <stdio.h>

#include "cuda_norm.h"
#include "cuda_pool.h"
#include "cuda_registry.h"
#include "kernel_abi/nn_params.h"

static void *ptr(ddpl_tensor *t)
{
    return t ? ddpl_data_ptr(t) : NULL;
}

/* The kernels exist for the four floating dtypes. */
static bool is_float(const ddpl_tensor *t)
{
    return t->dtype == DDPL_FLOAT32 || t->dtype == DDPL_FLOAT64 || t->dtype == DDPL_FLOAT16 ||
           t->dtype == DDPL_BFLOAT16;
}

/* "op (shape) dtype on cuda:N", naming the failing launch in CUDA errors; -1 with an error when
 * x's dtype has no kernel. */
static int describe(char *buf, size_t n, const char *op, const ddpl_tensor *x)
{
    char s[128], d[32];
    ddpl_shape_str(x, s, sizeof s);
    ddpl_device_str(x->device, d, sizeof d);
    snprintf(buf, n, "%s %s %s on %s", op, s, ddpl_dtype_name((ddpl_dtype)x->dtype), d);
    if (!is_float(x))
        return ddpl_error("%s: dtype %s is not supported on cuda (input %s on %s)", op,
                          ddpl_dtype_name((ddpl_dtype)x->dtype), s, d);
    return 0;
}

/* ---- layer_norm ---- */

/* out[0] y (M,N), out[1] mean (M), out[2] rstd (M); in[0] x (M,N), in[1] weight (N)?,
 * in[2] bias (N)? */
static int cuda_layer_norm(ddpl_tensor **out, ddpl_tensor **in, const void *params)
{
    ddpl_tensor *x = in[0];
    char what[256];
    if (describe(what, sizeof what, "layer_norm", x) < 0) return -1;
    return cuda_launch_layer_norm(ptr(out[0]), ptr(out[1]), ptr(out[2]), ptr(x), ptr(in[1]),
                                  ptr(in[2]), x->sizes[0], x->sizes[1],
                                  ((const ddpl_layer_norm_params *)params)->eps, x->dtype, what);
}

/* out[0] dx?, out[1] dweight?, out[2] dbias?; in[0] grad (M,N), in[1] x, in[2] weight?,
 * in[3] mean, in[4] rstd */
static int cuda_layer_norm_backward(ddpl_tensor **out, ddpl_tensor **in, const void *params)
{
    DDPL_UNUSED(params);
    ddpl_tensor *x = in[1];
    int64_t M = x->sizes[0], N = x->sizes[1];
    char what[256];
    if (describe(what, sizeof what, "layer_norm_backward", x) < 0) return -1;
    if (out[0] &&
        cuda_launch_layer_norm_backward_dx(ptr(out[0]), ptr(in[0]), ptr(x), ptr(in[2]), ptr(in[3]),
                                           ptr(in[4]), M, N, x->dtype, what) < 0)
        return -1;
    if ((!out[1] && !out[2]) || N == 0) return 0;
    /* partials accumulate in float (double for float64): 2 * chunks * N of them */
    int64_t len = 2 * cuda_ln_chunks(M) * N;
    ddpl_tensor *work =
        ddpl_tensor_new(1, &len, x->dtype == DDPL_FLOAT64 ? DDPL_FLOAT64 : DDPL_FLOAT32, x->device);
    if (!work) return -1;
    int rc = cuda_launch_layer_norm_backward_params(ptr(out[1]), ptr(out[2]), ptr(work), ptr(in[0]),
                                                    ptr(x), ptr(in[3]), ptr(in[4]), M, N, x->dtype,
                                                    what);
    ddpl_tensor_release(work);
    return rc;
}

/* ---- batch_norm ---- */

/* out[0] y (N,C,S), out[1] mean (C), out[2] invstd (C); in[0] x (N,C,S), in[1] weight?,
 * in[2] bias?, in[3] running_mean?, in[4] running_var? */
static int cuda_batch_norm(ddpl_tensor **out, ddpl_tensor **in, const void *params)
{
    const ddpl_batch_norm_params *p = params;
    ddpl_tensor *x = in[0];
    char what[256];
    if (describe(what, sizeof what, "batch_norm", x) < 0) return -1;
    return cuda_launch_batch_norm(ptr(out[0]), ptr(out[1]), ptr(out[2]), ptr(in[3]), ptr(in[4]),
                                  ptr(x), ptr(in[1]), ptr(in[2]), x->sizes[0], x->sizes[1],
                                  x->sizes[2], p->training, p->momentum, p->eps, x->dtype, what);
}

/* out[0] dx?, out[1] dweight?, out[2] dbias?; in[0] grad, in[1] x, in[2] weight?, in[3] mean,
 * in[4] invstd */
static int cuda_batch_norm_backward(ddpl_tensor **out, ddpl_tensor **in, const void *params)
{
    const ddpl_batch_norm_params *p = params;
    ddpl_tensor *x = in[1];
    char what[256];
    if (describe(what, sizeof what, "batch_norm_backward", x) < 0) return -1;
    return cuda_launch_batch_norm_backward(ptr(out[0]), ptr(out[1]), ptr(out[2]), ptr(in[0]),
                                           ptr(x), ptr(in[2]), ptr(in[3]), ptr(in[4]), x->sizes[0],
                                           x->sizes[1], x->sizes[2], p->training, x->dtype, what);
}

/* ---- pools ---- */

/* Geometry from the (N,C,H,W) input side `big` and the (N,C,OH,OW) output side `small`. */
static cuda_pool_shape pool_shape(const ddpl_tensor *big, const ddpl_tensor *small,
                                  const ddpl_pool_params *p)
{
    cuda_pool_shape s = {.planes = big->sizes[0] * big->sizes[1],
                         .H = big->sizes[2],
                         .W = big->sizes[3],
                         .OH = small->sizes[2],
                         .OW = small->sizes[3]};
    if (p) {
        s.kh = p->kernel[0], s.kw = p->kernel[1], s.sh = p->stride[0], s.sw = p->stride[1];
        s.ph = p->padding[0], s.pw = p->padding[1];
        s.count_include_pad = p->count_include_pad;
        s.divisor_override = p->divisor_override;
    }
    return s;
}

/* out[0] y (N,C,OH,OW), out[1] int64 argmax?; in[0] x (N,C,H,W) */
static int cuda_max_pool2d(ddpl_tensor **out, ddpl_tensor **in, const void *params)
{
    char what[256];
    if (describe(what, sizeof what, "max_pool2d", in[0]) < 0) return -1;
    cuda_pool_shape s = pool_shape(in[0], out[0], params);
    return cuda_launch_max_pool2d(ptr(out[0]), (int64_t *)ptr(out[1]), ptr(in[0]), &s, in[0]->dtype,
                                  what);
}

/* out[0] dx (N,C,H,W); in[0] grad (N,C,OH,OW), in[1] argmax */
static int cuda_max_pool2d_backward(ddpl_tensor **out, ddpl_tensor **in, const void *params)
{
    char what[256];
    if (describe(what, sizeof what, "max_pool2d_backward", in[0]) < 0) return -1;
    cuda_pool_shape s = pool_shape(out[0], in[0], params);
    return cuda_launch_max_pool2d_backward(ptr(out[0]), ptr(in[0]), (const int64_t *)ptr(in[1]), &s,
                                           in[0]->dtype, what);
}

/* out[0] y (N,C,OH,OW); in[0] x (N,C,H,W) */
static int cuda_avg_pool2d(ddpl_tensor **out, ddpl_tensor **in, const void *params)
{
    char what[256];
    if (describe(what, sizeof what, "avg_pool2d", in[0]) < 0) return -1;
    cuda_pool_shape s = pool_shape(in[0], out[0], params);
    return cuda_launch_avg_pool2d(ptr(out[0]), ptr(in[0]), &s, in[0]->dtype, what);
}

/* out[0] dx (N,C,H,W); in[0] grad (N,C,OH,OW) */
static int cuda_avg_pool2d_backward(ddpl_tensor **out, ddpl_tensor **in, const void *params)
{
    char what[256];
    if (describe(what, sizeof what, "avg_pool2d_backward", in[0]) < 0) return -1;
    cuda_pool_shape s = pool_shape(out[0], in[0], params);
    return cuda_launch_avg_pool2d_backward(ptr(out[0]), ptr(in[0]), &s, in[0]->dtype, what);
}

/* out[0] y (N,C,OH,OW); in[0] x (N,C,H,W) */
static int cuda_adaptive_avg_pool2d(ddpl_tensor **out, ddpl_tensor **in, const void *params)
{
    DDPL_UNUSED(params);
    char what[256];
    if (describe(what, sizeof what, "adaptive_avg_pool2d", in[0]) < 0) return -1;
    cuda_pool_shape s = pool_shape(in[0], out[0], NULL);
    return cuda_launch_adaptive_avg_pool2d(ptr(out[0]), ptr(in[0]), &s, in[0]->dtype, what);
}

/* out[0] dx (N,C,H,W); in[0] grad (N,C,OH,OW) */
static int cuda_adaptive_avg_pool2d_backward(ddpl_tensor **out, ddpl_tensor **in,
                                             const void *params)
{
    DDPL_UNUSED(params);
    char what[256];
    if (describe(what, sizeof what, "adaptive_avg_pool2d_backward", in[0]) < 0) return -1;
    cuda_pool_shape s = pool_shape(out[0], in[0], NULL);
    return cuda_launch_adaptive_avg_pool2d_backward(ptr(out[0]), ptr(in[0]), &s, in[0]->dtype,
                                                    what);
}

void cuda_register_nn(ddpl_kernel *k)
{
    k[DDPL_OP_LAYER_NORM] = cuda_layer_norm;
    k[DDPL_OP_LAYER_NORM_BACKWARD] = cuda_layer_norm_backward;
    k[DDPL_OP_BATCH_NORM] = cuda_batch_norm;
    k[DDPL_OP_BATCH_NORM_BACKWARD] = cuda_batch_norm_backward;
    k[DDPL_OP_MAX_POOL2D] = cuda_max_pool2d;
    k[DDPL_OP_MAX_POOL2D_BACKWARD] = cuda_max_pool2d_backward;
    k[DDPL_OP_AVG_POOL2D] = cuda_avg_pool2d;
    k[DDPL_OP_AVG_POOL2D_BACKWARD] = cuda_avg_pool2d_backward;
    k[DDPL_OP_ADAPTIVE_AVG_POOL2D] = cuda_adaptive_avg_pool2d;
    k[DDPL_OP_ADAPTIVE_AVG_POOL2D_BACKWARD] = cuda_adaptive_avg_pool2d_backward;
    cuda_register_rnn(k); /* the recurrent cells (cuda_rnn_ops.c) */
    cuda_register_ctc(k); /* the CTC loss (cuda_ctc_ops.c) */
}
