/* cuda/cuda_backend.c: the CUDA device as the engine sees it, as one backend table for the
 * registry (ops/dispatch.h): memory provider (the caching allocator of cuda_alloc.c over
 * cuda_runtime.cu's raw calls), copies, kernel table, start-up and device hooks.
 * defines: ddpl_cuda_backend, cuda_tensor_record_stream, cuda_run_kernel. */
#include "core/alloc.h"
#include "cuda_alloc.h"
#include "cuda_device.h"
#include "cuda_index.h"
#include "cuda_index_check.h"
#include "cuda_launch.h"
#include "cuda_registry.h"

static atomic_int n_devices = -1; /* -1: not asked yet */

static int cuda_device_count(void)
{
    int n = atomic_load(&n_devices);
    if (n < 0) {
        n = cuda_rt_device_count();
        atomic_store(&n_devices, n);
    }
    return n;
}

static int check_device(int index, const char *what)
{
    int n = cuda_device_count();
    if (index >= 0 && index < n && index < CUDA_ALLOC_MAX_DEVICES) return 0;
    if (n == 0) return ddpl_error("%s: CUDA is not available (no GPU or driver found)", what);
    return ddpl_error("%s: device cuda:%d does not exist (%d CUDA device%s)", what, index, n,
                      n == 1 ? "" : "s");
}

/* ---- memory provider ---- */

static void *cuda_alloc(size_t nbytes, ddpl_device dev)
{
    if (check_device(dev.index, "cuda alloc") < 0) return NULL;
    void *stream = cuda_stream_for(dev.index);
    return stream ? cuda_alloc_malloc(nbytes, dev.index, stream) : NULL;
}

static void cuda_free(void *p, size_t nbytes, ddpl_device dev)
{
    DDPL_UNUSED(nbytes);
    DDPL_UNUSED(dev);
    cuda_alloc_free(p);
}

static int cuda_copy_bytes(void *dst, ddpl_device dd, const void *src, ddpl_device sd, size_t n)
{
    /* the host waited for the device: the deferred index checks are read now (their flags are
     * ready), and an op's bad index fails this copy (cuda_index_check.h) */
    if (dd.type == DDPL_CPU)
        return cuda_copy_d2h(dst, src, sd.index, n) < 0
                   ? -1
                   : cuda_index_check_flush(sd.index, "a copy from cuda");
    if (sd.type == DDPL_CPU) return cuda_copy_h2d(dst, dd.index, src, n);
    return cuda_copy_d2d(dst, dd.index, src, sd.index, n);
}

int cuda_tensor_record_stream(const ddpl_tensor *t, void *stream)
{
    if (t->device.type != DDPL_CUDA) return 0; /* host memory needs no fencing */
    return cuda_alloc_record_stream(t->storage->data, stream);
}

static const ddpl_allocator cuda_allocator = {cuda_alloc, cuda_free, cuda_copy_bytes};

static const cuda_alloc_raw raw_calls = {
    .malloc = cuda_dev_malloc,
    .free = cuda_dev_free,
    .event_create = cuda_dev_event_create,
    .event_destroy = cuda_dev_event_destroy,
    .event_record = cuda_dev_event_record,
    .event_query = cuda_dev_event_query,
    .event_synchronize = cuda_dev_event_synchronize,
    .mem_info = cuda_dev_mem_info,
};

/* ---- start-up and device hooks ---- */

/* The registry runs this once, the first time a CUDA device is named (ops/dispatch.c), so
 * CPU-only programs never pay the CUDA runtime's start-up time. */
static int cuda_start(void)
{
    if (cuda_device_count() == 0)
        return ddpl_error("CUDA is not available: this build has the CUDA backend but no GPU or "
                          "driver was found");
    /* No device is touched here: a stream (and the device's context, some 500 MiB) is made
     * when a device is first used or chosen (cuda_set_device, cuda_stream_for), so the ranks of
     * a node, which each pick their own GPU, do not all create contexts on GPU 0. */
    cuda_alloc_setup(&raw_calls);
    cuda_index_check_setup(&cuda_index_check_raw_calls);
    void (*const families[])(ddpl_kernel *) = {
        cuda_register_pointwise, cuda_register_reduce, cuda_register_index, cuda_register_softmax,
        cuda_register_nn,        cuda_register_optim,  cuda_register_blas,  cuda_register_attention,
        cuda_register_scan,      cuda_register_sort, /* sort searchsorted bincount histc */
        cuda_register_scatter,                       /* scatter (issue 29) */
    };
    for (size_t i = 0; i < sizeof families / sizeof *families; i++)
        families[i](ddpl_cuda_backend.kernels);
    return 0;
}

static int cuda_synchronize(void)
{
    if (cuda_rt_synchronize("cuda.synchronize") < 0) return -1;
    int dev = cuda_dev_current();
    return dev < 0 ? -1 : cuda_index_check_flush(dev, "cuda.synchronize");
}

/* The CUDA runtime's current device is per thread, as PyTorch's; kernels launch on it. */
static int cuda_set_device(int index)
{
    if (check_device(index, "cuda.set_device") < 0) return -1;
    return cuda_rt_set_device(index, "cuda.set_device");
}

static int cuda_current_device(void)
{
    if (cuda_device_count() == 0) return ddpl_error("cuda.current_device: CUDA is not available");
    return cuda_dev_current();
}

static void cuda_memory_stats(int device, ddpl_memory_stats *out)
{
    cuda_alloc_stats s;
    if (cuda_alloc_get_stats(device < 0 ? cuda_dev_current() : device, &s) < 0) return;
    *out = (ddpl_memory_stats){s.allocated, s.peak_allocated, s.reserved, s.peak_reserved};
}

static void cuda_reset_peak_memory_stats(int device)
{
    cuda_alloc_reset_peak(device < 0 ? cuda_dev_current() : device);
}

static void cuda_versions(ddpl_cuda_version_info *v)
{
    cuda_dev_versions(&v->runtime, &v->driver);
    cuda_dev_lib_versions(&v->cudnn, &v->nccl);
}

/* The kernels are filled in by cuda_start. */
struct ddpl_backend ddpl_cuda_backend = {
    .name = "cuda",
    .allocator = &cuda_allocator,
    .start = cuda_start,
    .device_count = cuda_device_count,
    .current_device = cuda_current_device,
    .set_device = cuda_set_device,
    .synchronize = cuda_synchronize,
    .empty_cache = cuda_alloc_empty_cache,
    .memory_stats = cuda_memory_stats,
    .reset_peak_memory_stats = cuda_reset_peak_memory_stats,
    .versions = cuda_versions,
    .host_register = cuda_dev_host_register,
    .host_unregister = cuda_dev_host_unregister,
};

int cuda_run_kernel(ddpl_op op, ddpl_tensor **out, ddpl_tensor **in, const void *params)
{
    return ddpl_cuda_backend.kernels[op](out, in, params);
}
