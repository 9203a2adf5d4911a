/* cuda/cuda_scatter_ops.c: the ddpl_kernel glue of the CUDA SCATTER kernel (cuda_scatter.cu).
 * defines: cuda_register_scatter.
 *
 * As the other index ops (cuda_index_ops.c), it takes a bad-index flag from
 * cuda_index_check_push and returns without waiting for the device; an index out of range is
 * reported at the next synchronisation, naming the user-facing op (params->op) and the bad
 * value. The elements whose index was bad are skipped, the others written. */
#include "cuda_index_check.h"
#include "cuda_registry.h"
#include "cuda_scatter.h"
#include "kernel_abi/kernel_params.h"

/* The message of a bad index at row-major position pos of p->index (read back from the device
 * now: the host waits here anyway). */
static int scatter_report(const cuda_index_pending *p, int64_t pos)
{
    const ddpl_tensor *ix = p->index;
    int64_t off = 0;
    for (int d = ix->ndim - 1; d >= 0; d--) {
        off += (pos % ix->sizes[d]) * ix->strides[d];
        pos /= ix->sizes[d];
    }
    int64_t v = 0;
    if (cuda_read_i64((const int64_t *)ddpl_data_ptr(ix) + off, &v, p->op) < 0) return -1;
    return ddpl_error("%s: index %lld is out of range for dimension %d with size %lld on cuda",
                      p->op, (long long)v, p->dim, (long long)p->bound);
}

/* out[0] (in place) combined with in[1] scattered along dim by in[0]; ddpl_scatter_params. */
static int cuda_scatter(ddpl_tensor **out, ddpl_tensor **in, const void *params)
{
    const ddpl_scatter_params *sp = params;
    ddpl_tensor *o = out[0], *index = in[0], *src = in[1];
    int64_t bound = o->ndim ? o->sizes[sp->dim] : 1;
    cuda_index_geom g = {.ndim = index->ndim, .dim = sp->dim, .bound = bound};
    g.n = ddpl_tensor_numel(index);
    if (index->ndim == 0) {
        g.ndim = 1;
        g.dim = 0;
        g.sizes[0] = 1;
    }
    for (int d = 0; d < index->ndim; d++) {
        g.sizes[d] = index->sizes[d];
        g.a[d] = index->strides[d];
        g.b[d] = o->ndim ? o->strides[d] : 0;
        g.c[d] = src->ndim ? src->strides[d] : 0;
    }
    if (g.n == 0) return 0;
    cuda_index_pending pend = {
        .op = sp->op, .index = index, .dim = sp->dim, .bound = bound, .report = scatter_report};
    void *flag = cuda_index_check_push(index->device.index, &pend);
    if (!flag) return -1;
    return cuda_launch_scatter(ddpl_data_ptr(o), ddpl_data_ptr(src), o->dtype,
                               (const int64_t *)ddpl_data_ptr(index), &g, sp->reduce, flag);
}

void cuda_register_scatter(ddpl_kernel *k)
{
    k[DDPL_OP_SCATTER] = cuda_scatter;
}
