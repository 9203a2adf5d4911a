/* cuda/cuda_sort_ops.c: the ddpl_kernel glue of CUDA sorting, searching and counting: sort,
 * searchsorted, bincount, histc.
 * defines: cuda_register_sort.
 *
 * sort is topk's (cuda_reduce.cu) with k = the slice length: a bitonic sort of each slice by
 * (value, position), NaN as the largest, equal values by position, which is exactly a stable
 * sort; one implementation serves both ops. Slices that fit shared memory sort in one block
 * each; longer ones in global scratch, one launch per network stage over the whole batch. */
#include "cuda_reduce.h"
#include "cuda_registry.h"
#include "cuda_sort.h"
#include "kernel_abi/kernel_params.h"

/* out[0] values, out[1] int64 indices <- in[0] sorted stably along dim. */
static int cuda_sort(ddpl_tensor **out, ddpl_tensor **in, const void *params)
{
    const ddpl_sort_params *p = params;
    const ddpl_tensor *x = in[0];
    if (ddpl_tensor_numel(x) == 0) return 0;
    cuda_topk_geom g;
    if (x->ndim == 0) {
        g = (cuda_topk_geom){.ndim = 1, .dim = 0, .sizes = {1}, .nout = 1};
    } else {
        g = (cuda_topk_geom){.ndim = x->ndim, .dim = p->dim, .nout = 1};
        for (int d = 0; d < x->ndim; d++) {
            g.sizes[d] = x->sizes[d];
            g.xs[d] = x->strides[d];
            g.vs[d] = out[0]->strides[d];
            g.is[d] = out[1]->strides[d];
            if (d != p->dim) g.nout *= x->sizes[d];
        }
    }
    int64_t n = g.sizes[g.dim];
    size_t bytes = cuda_topk_scratch_bytes(&g, x->dtype);
    ddpl_tensor *scratch = NULL;
    if (bytes) {
        int64_t len = (int64_t)bytes;
        scratch = ddpl_tensor_new(1, &len, DDPL_UINT8, x->device);
        if (!scratch) return -1;
    }
    int rc =
        cuda_launch_topk(ddpl_data_ptr(out[0]), (int64_t *)ddpl_data_ptr(out[1]), ddpl_data_ptr(x),
                         x->dtype, &g, n, p->descending, scratch ? ddpl_data_ptr(scratch) : NULL);
    ddpl_tensor_release(
        scratch); /* the caching allocator reuses it only after this stream's work */
    return rc;
}

static int cuda_searchsorted(ddpl_tensor **out, ddpl_tensor **in, const void *params)
{
    const ddpl_searchsorted_params *p = params;
    const ddpl_tensor *seq = in[0], *v = in[1];
    int64_t m = seq->sizes[seq->ndim - 1];
    return cuda_launch_searchsorted(ddpl_data_ptr(out[0]), out[0]->dtype == DDPL_INT32,
                                    ddpl_data_ptr(seq), ddpl_data_ptr(v), v->dtype, m,
                                    ddpl_tensor_numel(v), p->per_row, p->right);
}

static int cuda_bincount(ddpl_tensor **out, ddpl_tensor **in, const void *params)
{
    (void)params;
    return cuda_launch_bincount(ddpl_data_ptr(out[0]), out[0]->dtype, out[0]->sizes[0],
                                (const int64_t *)ddpl_data_ptr(in[0]),
                                in[1] ? ddpl_data_ptr(in[1]) : NULL, ddpl_tensor_numel(in[0]));
}

static int cuda_histc(ddpl_tensor **out, ddpl_tensor **in, const void *params)
{
    const ddpl_histc_params *p = params;
    return cuda_launch_histc(ddpl_data_ptr(out[0]), ddpl_data_ptr(in[0]), in[0]->dtype,
                             ddpl_tensor_numel(in[0]), out[0]->sizes[0], p->min, p->max);
}

void cuda_register_sort(ddpl_kernel *k)
{
    k[DDPL_OP_SORT] = cuda_sort;
    k[DDPL_OP_SEARCHSORTED] = cuda_searchsorted;
    k[DDPL_OP_BINCOUNT] = cuda_bincount;
    k[DDPL_OP_HISTC] = cuda_histc;
}
