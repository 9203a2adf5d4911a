/* cuda/cuda_reduce_ops.c: the ddpl_kernel glue of the CUDA reductions (cuda_reduce.cu): sum,
 * prod, amax, amin, nansum over any set of dims, max/min with indices along one dim, topk.
 * defines: cuda_register_reduce.
 *
 * The glue turns tensor fields into plain geometry structs: for sum/prod/amax/amin the kept and
 * reduced dims are split, size-1 dims dropped, the reduced dims ordered outer to inner by
 * stride and neighbours that step through memory as one dim coalesced (as cpu_reduce.c does),
 * so the kernels see (outputs, reduced elements) with as few dims as the layout allows. */
#include <stdlib.h>

#include "cuda_reduce.h"
#include "cuda_registry.h"
#include "kernel_abi/kernel_params.h"

/* A uint8 device tensor of n bytes on dev for a kernel's scratch (NULL: none needed, or an
 * error, told apart by *failed). Released right after the launch: the caching allocator hands
 * it out again only to later work on the same stream. */
static ddpl_tensor *scratch_new(size_t n, ddpl_device dev, bool *failed)
{
    *failed = false;
    if (n == 0) return NULL;
    int64_t len = (int64_t)n;
    ddpl_tensor *t = ddpl_tensor_new(1, &len, DDPL_UINT8, dev);
    *failed = t == NULL;
    return t;
}

static int run_reduce(ddpl_tensor **out, ddpl_tensor **in, const void *params,
                      cuda_reduce_kind kind)
{
    cuda_reduce_geom g;
    ddpl_reduce_geom_init(&g, in[0], out[0], ((const ddpl_reduce_params *)params)->reduce_mask);
    if (g.nout == 0) return 0;
    bool failed;
    ddpl_tensor *scratch =
        scratch_new(cuda_reduce_scratch_bytes(&g, in[0]->dtype), in[0]->device, &failed);
    if (failed) return -1;
    int rc = cuda_launch_reduce(ddpl_data_ptr(out[0]), out[0]->dtype, ddpl_data_ptr(in[0]),
                                in[0]->dtype, &g, kind, scratch ? ddpl_data_ptr(scratch) : NULL);
    ddpl_tensor_release(scratch);
    return rc;
}

static int cuda_sum(ddpl_tensor **out, ddpl_tensor **in, const void *params)
{
    return run_reduce(out, in, params, CUDA_RED_SUM);
}

static int cuda_prod(ddpl_tensor **out, ddpl_tensor **in, const void *params)
{
    return run_reduce(out, in, params, CUDA_RED_PROD);
}

static int cuda_amax(ddpl_tensor **out, ddpl_tensor **in, const void *params)
{
    return run_reduce(out, in, params, CUDA_RED_MAX);
}

static int cuda_amin(ddpl_tensor **out, ddpl_tensor **in, const void *params)
{
    return run_reduce(out, in, params, CUDA_RED_MIN);
}

static int cuda_nansum(ddpl_tensor **out, ddpl_tensor **in, const void *params)
{
    return run_reduce(out, in, params, CUDA_RED_NANSUM);
}

/* Geometry of slices of x along dim with values/indices of the same rank (keepdim, or k along
 * dim for topk). A 0-dim x is one slice of one element. */
static void slice_geom_init(cuda_arg_geom *g, const ddpl_tensor *x, const ddpl_tensor *v,
                            const ddpl_tensor *i, int dim)
{
    if (x->ndim == 0) {
        *g = (cuda_arg_geom){.ndim = 1, .dim = 0, .sizes = {1}, .nout = 1};
        return;
    }
    *g = (cuda_arg_geom){.ndim = x->ndim, .dim = dim, .nout = 1};
    for (int d = 0; d < x->ndim; d++) {
        g->sizes[d] = x->sizes[d];
        g->xs[d] = x->strides[d];
        g->vs[d] = v->strides[d];
        g->is[d] = i->strides[d];
        if (d != dim) g->nout *= x->sizes[d];
    }
}

static int run_arg(ddpl_tensor **out, ddpl_tensor **in, const void *params, bool is_max)
{
    const ddpl_tensor *x = in[0];
    cuda_arg_geom g;
    slice_geom_init(&g, x, out[0], out[1], ((const ddpl_dim_params *)params)->dim);
    if (g.nout == 0 || g.sizes[g.dim] == 0) return 0; /* the op refuses an empty dim */
    return cuda_launch_arg_reduce(ddpl_data_ptr(out[0]), (int64_t *)ddpl_data_ptr(out[1]),
                                  ddpl_data_ptr(x), x->dtype, &g, is_max);
}

static int cuda_max_dim(ddpl_tensor **out, ddpl_tensor **in, const void *params)
{
    return run_arg(out, in, params, true);
}

static int cuda_min_dim(ddpl_tensor **out, ddpl_tensor **in, const void *params)
{
    return run_arg(out, in, params, false);
}

/* out[0] values, out[1] int64 indices <- the top k of in[0] along dim. Always sorted (the
 * contract allows any order when sorted is false). */
static int cuda_topk(ddpl_tensor **out, ddpl_tensor **in, const void *params)
{
    const ddpl_topk_params *p = params;
    const ddpl_tensor *x = in[0];
    if (p->k == 0 || ddpl_tensor_numel(x) == 0) return 0;
    cuda_topk_geom g;
    slice_geom_init(&g, x, out[0], out[1], p->dim);
    bool failed;
    ddpl_tensor *scratch = scratch_new(cuda_topk_scratch_bytes(&g, x->dtype), x->device, &failed);
    if (failed) return -1;
    int rc =
        cuda_launch_topk(ddpl_data_ptr(out[0]), (int64_t *)ddpl_data_ptr(out[1]), ddpl_data_ptr(x),
                         x->dtype, &g, p->k, p->largest, scratch ? ddpl_data_ptr(scratch) : NULL);
    ddpl_tensor_release(scratch);
    return rc;
}

void cuda_register_reduce(ddpl_kernel *k)
{
    k[DDPL_OP_SUM] = cuda_sum;
    k[DDPL_OP_PROD] = cuda_prod;
    k[DDPL_OP_AMAX] = cuda_amax;
    k[DDPL_OP_AMIN] = cuda_amin;
    k[DDPL_OP_NANSUM] = cuda_nansum;
    k[DDPL_OP_MAX_DIM] = cuda_max_dim;
    k[DDPL_OP_MIN_DIM] = cuda_min_dim;
    k[DDPL_OP_TOPK] = cuda_topk;
}
