/* cuda/cuda_index_ops.c: the ddpl_kernel glue of the CUDA index kernels (cuda_index.cu):
 * index_select, index_add, gather, scatter_add.
 * defines: cuda_register_index.
 *
 * Each op takes a bad-index flag from cuda_index_check_push and returns without waiting for the
 * device; an index out of range is reported at the next synchronisation (cuda_index_check.h),
 * with the message of the CPU kernels: the op, the first bad index value (read back from the
 * device then), the dim and its size. */
#include "cuda_index.h"
#include "cuda_index_check.h"
#include "cuda_registry.h"
#include "kernel_abi/kernel_params.h"

/* Element offset of row-major position pos in t. */
static int64_t offset_of(const ddpl_tensor *t, int64_t pos)
{
    int64_t off = 0;
    for (int d = t->ndim - 1; d >= 0; d--) {
        off += (pos % t->sizes[d]) * t->strides[d];
        pos /= t->sizes[d];
    }
    return off;
}

static int index_report(const cuda_index_pending *p, int64_t pos)
{
    int64_t v = 0;
    const int64_t *base = (const int64_t *)ddpl_data_ptr(p->index);
    if (cuda_read_i64(base + offset_of(p->index, pos), &v, p->op) < 0) return -1;
    return ddpl_error("%s: index %lld is out of range for dimension %d with size %lld on cuda",
                      p->op, (long long)v, p->dim, (long long)p->bound);
}

/* The op's flag on index's device (NULL with the error). */
static void *flag_for(const char *op, ddpl_tensor *index, int dim, int64_t bound)
{
    cuda_index_pending p = {
        .op = op, .index = index, .dim = dim, .bound = bound, .report = index_report};
    return cuda_index_check_push(index->device.index, &p);
}

/* Geometry over `over` (a 0-dim tensor counts as one element of a 1-D shape), with the strides
 * of a, b and c (NULL: zeros) aligned to the same dims. */
static cuda_index_geom geom_over(const ddpl_tensor *over, const ddpl_tensor *a,
                                 const ddpl_tensor *b, const ddpl_tensor *c, int dim, int64_t bound)
{
    cuda_index_geom g = {.ndim = over->ndim, .dim = dim, .bound = bound};
    g.n = ddpl_tensor_numel(over);
    if (over->ndim == 0) {
        g.ndim = 1;
        g.dim = 0;
        g.sizes[0] = 1;
        return g;
    }
    for (int d = 0; d < over->ndim; d++) {
        g.sizes[d] = over->sizes[d];
        g.a[d] = a && a->ndim ? a->strides[d] : 0;
        g.b[d] = b && b->ndim ? b->strides[d] : 0;
        g.c[d] = c && c->ndim ? c->strides[d] : 0;
    }
    return g;
}

/* out[0] = in[0] indexed along dim by in[1] (int64, 1-D or 0-dim). */
static int cuda_index_select(ddpl_tensor **out, ddpl_tensor **in, const void *params)
{
    int dim = ((const ddpl_dim_params *)params)->dim;
    ddpl_tensor *o = out[0], *x = in[0], *index = in[1];
    const int64_t *idx = (const int64_t *)ddpl_data_ptr(index);
    int64_t n = ddpl_tensor_numel(index), istride = index->ndim ? index->strides[0] : 1;
    int64_t size = x->sizes[dim];
    cuda_index_geom g;
    if (ddpl_tensor_is_contiguous(x) && ddpl_tensor_is_contiguous(o)) {
        g = (cuda_index_geom){.ndim = -1, .dim = dim, .bound = size};
        g.sizes[0] = ddpl_numel(dim, x->sizes);
        g.sizes[1] = n;
        g.sizes[2] = ddpl_numel(x->ndim - dim - 1, x->sizes + dim + 1);
        g.n = ddpl_tensor_numel(o);
    } else {
        g = geom_over(o, o, x, NULL, dim, size);
    }
    void *flag = flag_for("index_select", index, dim, size);
    if (!flag) return -1;
    return cuda_launch_index_select(ddpl_data_ptr(o), ddpl_data_ptr(x), x->dtype, idx, istride, n,
                                    &g, flag);
}

/* out[0] (accumulated in place) along dim at in[0] (int64 1-D) += in[1]; dtypes equal. */
static int cuda_index_add(ddpl_tensor **out, ddpl_tensor **in, const void *params)
{
    int dim = ((const ddpl_dim_params *)params)->dim;
    ddpl_tensor *o = out[0], *index = in[0], *src = in[1];
    const int64_t *idx = (const int64_t *)ddpl_data_ptr(index);
    int64_t n = ddpl_tensor_numel(index), istride = index->ndim ? index->strides[0] : 1;
    int64_t size = o->ndim ? o->sizes[dim] : 1;
    cuda_index_geom g = geom_over(src, o, src, NULL, dim, size);
    void *flag = flag_for("index_add", index, dim, size);
    if (!flag) return -1;
    return cuda_launch_index_add(ddpl_data_ptr(o), ddpl_data_ptr(src), o->dtype, idx, istride, n,
                                 &g, flag);
}

/* out[0] (index's shape) <- in[0] gathered along dim by in[1] (int64, in[0]'s rank). */
static int cuda_gather(ddpl_tensor **out, ddpl_tensor **in, const void *params)
{
    int dim = ((const ddpl_dim_params *)params)->dim;
    ddpl_tensor *o = out[0], *x = in[0], *index = in[1];
    int64_t size = x->ndim ? x->sizes[dim] : 1;
    cuda_index_geom g = geom_over(index, index, x, o, dim, size);
    const int64_t *idx = (const int64_t *)ddpl_data_ptr(index);
    void *flag = flag_for("gather", index, dim, size);
    if (!flag) return -1;
    return cuda_launch_gather(ddpl_data_ptr(o), ddpl_data_ptr(x), x->dtype, idx, &g, flag);
}

/* out[0] (accumulated in place) += in[1] scattered along dim by in[0] (int64, in[1]'s rank). */
static int cuda_scatter_add(ddpl_tensor **out, ddpl_tensor **in, const void *params)
{
    int dim = ((const ddpl_dim_params *)params)->dim;
    ddpl_tensor *o = out[0], *index = in[0], *src = in[1];
    int64_t size = o->ndim ? o->sizes[dim] : 1;
    cuda_index_geom g = geom_over(index, index, o, src, dim, size);
    const int64_t *idx = (const int64_t *)ddpl_data_ptr(index);
    void *flag = flag_for("scatter_add", index, dim, size);
    if (!flag) return -1;
    return cuda_launch_scatter_add(ddpl_data_ptr(o), ddpl_data_ptr(src), o->dtype, idx, &g, flag);
}

void cuda_register_index(ddpl_kernel *k)
{
    k[DDPL_OP_INDEX_SELECT] = cuda_index_select;
    k[DDPL_OP_INDEX_ADD] = cuda_index_add;
    k[DDPL_OP_GATHER] = cuda_gather;
    k[DDPL_OP_SCATTER_ADD] = cuda_scatter_add;
}
