/* cuda/cuda_scan_ops.c: the ddpl_kernel glue of the CUDA scans (cuda_scan.cu): cumsum, cumprod,
 * cummax, cummin along one dim; and of any/all over a set of dims (cuda_logic.cu).
 * defines: cuda_register_scan. */
#include "cuda_logic.h"
#include "cuda_registry.h"
#include "cuda_scan.h"
#include "kernel_abi/kernel_params.h"

/* The slices of x along dim; values o and indices i (NULL for sums) have x's shape. */
static void scan_geom_init(cuda_scan_geom *g, const ddpl_tensor *x, const ddpl_tensor *o,
                           const ddpl_tensor *i, int dim)
{
    if (x->ndim == 0) {
        *g = (cuda_scan_geom){.ndim = 1, .dim = 0, .sizes = {1}, .n = 1, .nslices = 1};
        return;
    }
    *g = (cuda_scan_geom){.ndim = x->ndim, .dim = dim, .n = x->sizes[dim], .nslices = 1};
    for (int d = 0; d < x->ndim; d++) {
        g->sizes[d] = x->sizes[d];
        g->xs[d] = x->strides[d];
        g->os[d] = o->strides[d];
        g->is[d] = i ? i->strides[d] : 0;
        if (d != dim) g->nslices *= x->sizes[d];
    }
}

static int run_scan(ddpl_tensor **out, ddpl_tensor **in, const void *params, cuda_scan_kind kind)
{
    const ddpl_scan_params *p = params;
    const ddpl_tensor *x = in[0];
    ddpl_tensor *idx = kind >= CUDA_SCAN_MAX ? out[1] : NULL;
    cuda_scan_geom g;
    scan_geom_init(&g, x, out[0], idx, p->dim);
    if (g.n == 0 || g.nslices == 0) return 0;
    /* chunk totals of long slices split over blocks: a uint8 device tensor, so it comes from the
     * caching allocator, stream-ordered, and may be released right after the launch */
    int64_t bytes = (int64_t)cuda_scan_scratch_bytes(&g);
    ddpl_tensor *scratch = bytes ? ddpl_tensor_new(1, &bytes, DDPL_UINT8, x->device) : NULL;
    if (bytes && !scratch) return -1;
    int rc = cuda_launch_scan(ddpl_data_ptr(out[0]), idx ? (int64_t *)ddpl_data_ptr(idx) : NULL,
                              ddpl_data_ptr(x), x->dtype, &g, kind, p->reverse,
                              scratch ? ddpl_data_ptr(scratch) : NULL);
    ddpl_tensor_release(scratch);
    return rc;
}

static int cuda_cumsum(ddpl_tensor **out, ddpl_tensor **in, const void *params)
{
    return run_scan(out, in, params, CUDA_SCAN_SUM);
}

static int cuda_cumprod(ddpl_tensor **out, ddpl_tensor **in, const void *params)
{
    return run_scan(out, in, params, CUDA_SCAN_PROD);
}

static int cuda_cummax(ddpl_tensor **out, ddpl_tensor **in, const void *params)
{
    return run_scan(out, in, params, CUDA_SCAN_MAX);
}

static int cuda_cummin(ddpl_tensor **out, ddpl_tensor **in, const void *params)
{
    return run_scan(out, in, params, CUDA_SCAN_MIN);
}

/* any/all: out is bool or uint8 (one byte, 0 or 1), keepdim shape */
static int run_logic(ddpl_tensor **out, ddpl_tensor **in, const void *params, bool want_zero)
{
    ddpl_reduce_geom g;
    ddpl_reduce_geom_init(&g, in[0], out[0], ((const ddpl_reduce_params *)params)->reduce_mask);
    if (g.nout == 0) return 0;
    return cuda_launch_logic((unsigned char *)ddpl_data_ptr(out[0]), ddpl_data_ptr(in[0]),
                             in[0]->dtype, &g, want_zero);
}

static int cuda_any(ddpl_tensor **out, ddpl_tensor **in, const void *params)
{
    return run_logic(out, in, params, false);
}

static int cuda_all(ddpl_tensor **out, ddpl_tensor **in, const void *params)
{
    return run_logic(out, in, params, true);
}

void cuda_register_scan(ddpl_kernel *k)
{
    k[DDPL_OP_CUMSUM] = cuda_cumsum;
    k[DDPL_OP_CUMPROD] = cuda_cumprod;
    k[DDPL_OP_CUMMAX] = cuda_cummax;
    k[DDPL_OP_CUMMIN] = cuda_cummin;
    k[DDPL_OP_ANY] = cuda_any;
    k[DDPL_OP_ALL] = cuda_all;
}
