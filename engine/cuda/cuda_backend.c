/* cuda/cuda_backend.c: the CUDA device as the engine sees it: memory provider, kernel table,
 * lazy start-up and device queries.
 * defines: ddpl_cuda_init and the ddpl_cuda_* queries of ddpl/cuda.h.
 *
 * Memory comes straight from cudaMalloc in this first slice; the caching allocator, streams and
 * the full op set come with the CUDA backend issue. */
#include "core/alloc.h"
#include "cuda_launch.h"
#include "ddpl/cuda.h"
#include "ops/dispatch.h"
#include "ops/kernel_params.h"

static void *cuda_alloc(size_t nbytes, ddpl_device dev)
{
    void *p = NULL;
    return cuda_rt_malloc(&p, nbytes, dev.index, "cuda alloc") < 0 ? NULL : p;
}

static void cuda_free(void *p, size_t nbytes, ddpl_device dev)
{
    DDPL_UNUSED(nbytes);
    cuda_rt_free(p, dev.index);
}

static int cuda_copy_bytes(void *dst, ddpl_device dd, const void *src, ddpl_device sd, size_t n)
{
    cuda_copy_kind kind = dd.type == DDPL_CPU   ? CUDA_D2H
                          : sd.type == DDPL_CPU ? CUDA_H2D
                                                : CUDA_D2D;
    return cuda_rt_memcpy(dst, src, n, kind, "copy between devices");
}

static const ddpl_allocator cuda_allocator = {cuda_alloc, cuda_free, cuda_copy_bytes};

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

static const struct ddpl_backend cuda_table = {
    .name = "cuda",
    .kernels =
        {
            [DDPL_OP_FILL] = cuda_fill,
            [DDPL_OP_COPY] = cuda_copy,
            [DDPL_OP_ADD] = cuda_add,
            [DDPL_OP_SUB] = cuda_sub,
            [DDPL_OP_MUL] = cuda_mul,
            [DDPL_OP_DIV] = cuda_div,
        },
};

static int device_count = -1; /* -1: not asked yet */

int ddpl_cuda_device_count(void)
{
    if (device_count < 0) device_count = cuda_rt_device_count();
    return device_count;
}

bool ddpl_cuda_is_available(void)
{
    return ddpl_cuda_device_count() > 0;
}

/* Called the first time a CUDA device is named, so CPU-only programs never pay the CUDA
 * runtime's start-up time. */
int ddpl_cuda_init(void)
{
    if (ddpl_cuda_backend) return 0;
    if (!ddpl_cuda_is_available())
        return ddpl_error("CUDA is not available: this build has the CUDA backend but no GPU or "
                          "driver was found");
    ddpl_register_allocator(DDPL_CUDA, &cuda_allocator);
    ddpl_cuda_backend = &cuda_table;
    return 0;
}

int ddpl_cuda_synchronize(void)
{
    if (!ddpl_cuda_is_available()) return 0;
    return cuda_rt_synchronize("cuda.synchronize");
}

static _Thread_local int current_device;

int ddpl_cuda_set_device(int index)
{
    int n = ddpl_cuda_device_count();
    if (index < 0 || index >= n)
        return ddpl_error("cuda.set_device: device %d does not exist (%d CUDA devices)", index, n);
    if (cuda_rt_set_device(index, "cuda.set_device") < 0) return -1;
    current_device = index;
    return 0;
}

int ddpl_cuda_current_device(void)
{
    if (!ddpl_cuda_is_available()) return ddpl_error("cuda.current_device: CUDA is not available");
    return current_device;
}

/* Memory goes straight back to cudaFree in this first slice: there is no cache to empty. */
void ddpl_cuda_empty_cache(void) {}
