/* cuda/cuda_runtime.cu: devices, compute streams, raw memory and events (the CUDA runtime calls
 * behind cuda_launch.h's cuda_rt_* and cuda_device.h's cuda_dev_*).
 * defines: cuda_rt_device_count, cuda_rt_synchronize, cuda_rt_set_device, cuda_current_stream,
 *          cuda_stream_for, cuda_dev_* (current, stream_synchronize, malloc, free, host_register,
 *          host_unregister, events,
 *          mem_info, versions, lib_versions). */
#include <atomic>
#include <mutex>
#include <stdio.h>

#include "ddpl/config.h"
#if DDPL_HAVE_CUDNN
#include <cudnn.h>
#endif
#if DDPL_HAVE_NCCL
#include <nccl.h>
#endif

#include "cuda_common.cuh"
#include "cuda_dynlib.h"
#include "cuda_device.h"

#define check cuda_check

enum { MAX_DEVICES = 64 };

/* Makes `device` current for a scope and restores the thread's previous device: the engine's
 * notion of the current device (ddpl.cuda.set_device) must not move because memory of another
 * device was allocated or copied. */
struct device_guard {
    int prev = -1;
    int rc = 0;
    device_guard(int device, const char *what)
    {
        cudaError_t e = cudaGetDevice(&prev);
        if (e != cudaSuccess) { /* a broken context: say so rather than guess a device */
            prev = -1;
            rc = check(e, what);
            return;
        }
        if (prev != device) rc = check(cudaSetDevice(device), what);
    }
    ~device_guard()
    {
        int now = -1;
        if (prev >= 0 && cudaGetDevice(&now) == cudaSuccess && now != prev) cudaSetDevice(prev);
    }
};

/* No GPU, or no driver at all, is the ordinary CPU-only machine: 0 devices, quietly. Any other
 * failure (a driver too old for this runtime, a broken installation, devices held exclusively
 * elsewhere) also means 0 devices, but is said once on stderr with CUDA's reason, as PyTorch's
 * "CUDA initialization" warning does: otherwise a GPU machine would silently run CPU-only. */
extern "C" int cuda_rt_device_count(void)
{
    int n = 0;
    cudaError_t e = cudaGetDeviceCount(&n);
    if (e == cudaSuccess) return n;
    cudaGetLastError();
    int runtime = 0, driver = 0;
    cuda_dev_versions(&runtime, &driver);
    bool quiet = e == cudaErrorNoDevice || (e == cudaErrorInsufficientDriver && driver == 0);
    static std::once_flag warned;
    if (!quiet)
        std::call_once(warned, [&] {
            fprintf(stderr,
                    "ddplua: warning: CUDA is unusable, running without it: cudaGetDeviceCount "
                    "failed: %s (%s; driver supports CUDA %d.%d, runtime is %d.%d)\n",
                    cudaGetErrorString(e), cudaGetErrorName(e), driver / 1000, driver % 1000 / 10,
                    runtime / 1000, runtime % 1000 / 10);
        });
    return 0;
}

extern "C" int cuda_dev_current(void)
{
    int dev = -1;
    cudaError_t e = cudaGetDevice(&dev);
    if (e != cudaSuccess) {
        cudaGetLastError();
        /* not device 0 by default: its handles and stream would be used for another device */
        ddpl_error("cuda: cannot tell the current device (cudaGetDevice: %s)",
                   cudaGetErrorString(e));
        return -1;
    }
    return dev;
}

/* ---- compute streams ---- */

/* One per device, created once under the mutex and read lock-free afterwards (acquire pairs
 * with the release store, so a reader never sees a half-made stream). Never destroyed: kernels
 * may be queued on them until the process exits. */
static std::atomic<cudaStream_t> compute_streams[MAX_DEVICES];
static std::mutex streams_mutex;

extern "C" void *cuda_stream_for(int device)
{
    if (device < 0 || device >= MAX_DEVICES) {
        ddpl_error("cuda: device %d is out of range", device);
        return NULL;
    }
    cudaStream_t s = compute_streams[device].load(std::memory_order_acquire);
    if (s) return s;
    std::lock_guard<std::mutex> hold(streams_mutex);
    s = compute_streams[device].load(std::memory_order_relaxed);
    if (s) return s;
    device_guard g(device, "cuda: creating the compute stream");
    if (g.rc < 0) return NULL;
    /* non-blocking: never implicitly ordered with the legacy default stream, which libraries
     * (or a stray cudaMemcpy) might use */
    if (check(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking),
              "cuda: creating the compute stream") < 0)
        return NULL;
    compute_streams[device].store(s, std::memory_order_release);
    return s;
}

extern "C" void *cuda_current_stream(void)
{
    int dev = cuda_dev_current();
    return dev < 0 ? NULL : cuda_stream_for(dev);
}

extern "C" int cuda_dev_stream_synchronize(int device, const char *what)
{
    cudaStream_t s = (cudaStream_t)cuda_stream_for(device);
    if (!s) return -1;
    return check(cudaStreamSynchronize(s), what);
}

/* ---- the cuda_launch.h runtime calls ---- */

extern "C" int cuda_rt_set_device(int device, const char *what)
{
    if (check(cudaSetDevice(device), what) < 0) return -1;
    return cuda_stream_for(device) ? 0 : -1; /* the device's stream exists from now on */
}

/* The current device's compute stream, then the whole device (other streams: NCCL's). */
extern "C" int cuda_rt_synchronize(const char *what)
{
    cudaStream_t s = cuda_stream();
    if (!s) return -1;
    if (check(cudaStreamSynchronize(s), what) < 0) return -1;
    return check(cudaDeviceSynchronize(), what);
}

/* ---- raw memory and events for the caching allocator ---- */

extern "C" int cuda_dev_malloc(void **ptr, size_t nbytes, int device)
{
    device_guard g(device, "cuda alloc");
    if (g.rc < 0) return -1;
    cudaError_t e = cudaMalloc(ptr, nbytes);
    if (e == cudaErrorMemoryAllocation) {
        cudaGetLastError(); /* not sticky: clear it so the next call is not blamed */
        return 1;
    }
    return check(e, "cuda alloc");
}

extern "C" void cuda_dev_free(void *ptr, int device)
{
    device_guard g(device, "cuda free");
    if (cudaFree(ptr) != cudaSuccess) cudaGetLastError();
}

extern "C" int cuda_dev_host_register(void *ptr, size_t nbytes)
{
    return check(cudaHostRegister(ptr, nbytes, cudaHostRegisterPortable), "pin_memory");
}

extern "C" void cuda_dev_host_unregister(void *ptr)
{
    if (cudaHostUnregister(ptr) != cudaSuccess) cudaGetLastError();
}

extern "C" void *cuda_dev_event_create(int device)
{
    device_guard g(device, "cuda event");
    if (g.rc < 0) return NULL;
    cudaEvent_t ev = NULL;
    if (check(cudaEventCreateWithFlags(&ev, cudaEventDisableTiming), "cuda event") < 0) return NULL;
    return ev;
}

extern "C" void cuda_dev_event_destroy(void *event, int device)
{
    device_guard g(device, "cuda event");
    if (cudaEventDestroy((cudaEvent_t)event) != cudaSuccess) cudaGetLastError();
}

extern "C" int cuda_dev_event_record(void *event, void *stream, int device)
{
    device_guard g(device, "cuda event record");
    if (g.rc < 0) return -1;
    return check(cudaEventRecord((cudaEvent_t)event, (cudaStream_t)stream), "cuda event record");
}

extern "C" int cuda_dev_event_query(void *event, int device)
{
    (void)device;
    cudaError_t e = cudaEventQuery((cudaEvent_t)event);
    if (e == cudaSuccess) return 1;
    if (e == cudaErrorNotReady) return 0;
    return check(e, "cuda event query");
}

extern "C" int cuda_dev_event_synchronize(void *event, int device)
{
    (void)device;
    return check(cudaEventSynchronize((cudaEvent_t)event), "cuda event synchronize");
}

extern "C" int cuda_dev_mem_info(int device, size_t *free_bytes, size_t *total_bytes)
{
    device_guard g(device, "cuda memory info");
    if (g.rc < 0) return -1;
    return check(cudaMemGetInfo(free_bytes, total_bytes), "cuda memory info");
}

extern "C" void cuda_dev_versions(int *runtime, int *driver)
{
    *runtime = *driver = 0;
    if (cudaRuntimeGetVersion(runtime) != cudaSuccess) {
        cudaGetLastError();
        *runtime = 0;
    }
    if (cudaDriverGetVersion(driver) != cudaSuccess) {
        cudaGetLastError();
        *driver = 0;
    }
}

extern "C" void cuda_dev_lib_versions(int *cudnn, int *nccl)
{
    /* opens the libraries (config() is the only caller): 0 when one cannot be opened or this
     * build has none */
    *cudnn = *nccl = 0;
#if DDPL_HAVE_CUDNN
    if (cuda_lib_load(CUDA_LIB_CUDNN) == 0)
        *cudnn = (int)CUDA_DL(CUDA_LIB_CUDNN, cudnnGetVersion)();
#endif
#if DDPL_HAVE_NCCL
    int v = 0;
    if (cuda_lib_load(CUDA_LIB_NCCL) == 0 &&
        CUDA_DL(CUDA_LIB_NCCL, ncclGetVersion)(&v) == ncclSuccess)
        *nccl = v;
#endif
}
