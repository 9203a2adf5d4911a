/* cuda/cuda_pointwise_ops.c: the ddpl_kernel glue of the elementwise CUDA kernels
 * (cuda_pointwise.cu): operand geometry in, launch out.
 * defines: cuda_register_pointwise. */
#include "cuda_launch.h"
#include "cuda_registry.h"
#include "ops/kernel_params.h"

/* Geometry of t aligned to out's rank: missing leading and size-1 (broadcast) dims get
 * stride 0. */
static cuda_geometry aligned_geometry(const ddpl_tensor *t, const ddpl_tensor *out)
{
    cuda_geometry g = {.ndim = out->ndim};
    int lead = out->ndim - t->ndim;
    for (int d = 0; d < out->ndim; d++) {
        int td = d - lead;
        g.sizes[d] = out->sizes[d];
        g.strides[d] = (td < 0 || t->sizes[td] == 1) ? 0 : t->strides[td];
    }
    return g;
}

static int cuda_fill(ddpl_tensor **out, ddpl_tensor **in, const void *params)
{
    DDPL_UNUSED(in);
    ddpl_tensor *o = out[0];
    int64_t n = ddpl_tensor_numel(o);
    if (n == 0) return 0;
    cuda_geometry g = aligned_geometry(o, o);
    return cuda_launch_fill(ddpl_data_ptr(o), o->dtype, &g, n,
                            ((const ddpl_fill_params *)params)->value);
}

static int cuda_copy(ddpl_tensor **out, ddpl_tensor **in, const void *params)
{
    DDPL_UNUSED(params);
    ddpl_tensor *o = out[0], *x = in[0];
    int64_t n = ddpl_tensor_numel(o);
    if (n == 0) return 0;
    if (o->dtype == x->dtype && ddpl_tensor_is_contiguous(o) && ddpl_tensor_is_contiguous(x))
        return cuda_rt_memcpy(ddpl_data_ptr(o), ddpl_data_ptr(x), ddpl_tensor_nbytes(o), CUDA_D2D,
                              "copy");
    cuda_geometry og = aligned_geometry(o, o), ig = aligned_geometry(x, o);
    return cuda_launch_copy(ddpl_data_ptr(o), o->dtype, &og, ddpl_data_ptr(x), x->dtype, &ig, n);
}

static int binary(ddpl_tensor **out, ddpl_tensor **in, cuda_binary_kind kind, double alpha)
{
    ddpl_tensor *o = out[0];
    int64_t n = ddpl_tensor_numel(o);
    if (n == 0) return 0;
    cuda_geometry og = aligned_geometry(o, o), ag = aligned_geometry(in[0], o),
                  bg = aligned_geometry(in[1], o);
    return cuda_launch_binary(ddpl_data_ptr(o), o->dtype, &og, ddpl_data_ptr(in[0]), &ag,
                              ddpl_data_ptr(in[1]), &bg, n, kind, alpha);
}

static double alpha_of(const void *params)
{
    return params ? ((const ddpl_alpha_params *)params)->alpha : 1.0;
}
static int cuda_add(ddpl_tensor **o, ddpl_tensor **i, const void *p)
{
    return binary(o, i, CUDA_BIN_ADD, alpha_of(p));
}
static int cuda_sub(ddpl_tensor **o, ddpl_tensor **i, const void *p)
{
    return binary(o, i, CUDA_BIN_SUB, alpha_of(p));
}
static int cuda_mul(ddpl_tensor **o, ddpl_tensor **i, const void *p)
{
    DDPL_UNUSED(p);
    return binary(o, i, CUDA_BIN_MUL, 1.0);
}
static int cuda_div(ddpl_tensor **o, ddpl_tensor **i, const void *p)
{
    DDPL_UNUSED(p);
    return binary(o, i, CUDA_BIN_DIV, 1.0);
}

void cuda_register_pointwise(ddpl_kernel *k)
{
    k[DDPL_OP_FILL] = cuda_fill;
    k[DDPL_OP_COPY] = cuda_copy;
    k[DDPL_OP_ADD] = cuda_add;
    k[DDPL_OP_SUB] = cuda_sub;
    k[DDPL_OP_MUL] = cuda_mul;
    k[DDPL_OP_DIV] = cuda_div;
}
