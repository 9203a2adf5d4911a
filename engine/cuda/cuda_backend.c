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
#include "cuda_registry.h"

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

static struct ddpl_backend cuda_table = {.name = "cuda"};

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
    void (*const families[])(ddpl_kernel *) = {
        cuda_register_pointwise, cuda_register_reduce, cuda_register_index, cuda_register_softmax,
        cuda_register_nn,        cuda_register_optim,  cuda_register_blas,  cuda_register_attention,
    };
    for (size_t i = 0; i < sizeof families / sizeof *families; i++) families[i](cuda_table.kernels);
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
