/* cuda/cuda_host.cu: copies between host and device memory on the compute streams: the CUDA
 * calls under cuda_copy.c's contract (which says when each copy may return, and stages large
 * copies from pageable memory through pinned buffers), and copies between devices.
 * defines: cuda_copy_h2d, cuda_copy_d2h, cuda_copy_d2d. */
#include "cuda_common.cuh"
#include "cuda_copy.h"
#include "cuda_device.h"

#define check cuda_check

/* Scoped current device (as in cuda_runtime.cu): copies must not move the thread's device. */
struct device_scope {
    int prev = -1;
    int rc = 0;
    device_scope(int device, const char *what)
    {
        cudaError_t e = cudaGetDevice(&prev);
        if (e != cudaSuccess) { /* a broken context: say so rather than guess a device */
            prev = -1;
            rc = check(e, what);
            return;
        }
        if (prev != device) rc = check(cudaSetDevice(device), what);
    }
    ~device_scope()
    {
        int now = -1;
        if (prev >= 0 && cudaGetDevice(&now) == cudaSuccess && now != prev) cudaSetDevice(prev);
    }
};

/* ---- the raw calls of cuda_copy.c ---- */

static int raw_copy_async(void *dst, const void *src, size_t nbytes, cuda_copy_kind kind,
                          void *stream)
{
    cudaMemcpyKind k = kind == CUDA_H2D ? cudaMemcpyHostToDevice : cudaMemcpyDeviceToHost;
    return check(cudaMemcpyAsync(dst, src, nbytes, k, (cudaStream_t)stream),
                 kind == CUDA_H2D ? "copy to cuda" : "copy from cuda");
}

static int raw_stream_synchronize(void *stream)
{
    return check(cudaStreamSynchronize((cudaStream_t)stream), "cuda copy (waiting for the stream)");
}

static int raw_is_pinned(const void *p)
{
    cudaPointerAttributes a;
    if (cudaPointerGetAttributes(&a, p) != cudaSuccess) {
        cudaGetLastError();
        return 0;
    }
    return a.type == cudaMemoryTypeHost;
}

static void *raw_host_alloc(size_t nbytes)
{
    void *p = NULL;
    if (cudaHostAlloc(&p, nbytes, cudaHostAllocDefault) != cudaSuccess) {
        cudaGetLastError();
        return NULL;
    }
    return p;
}

static void raw_host_free(void *p)
{
    if (cudaFreeHost(p) != cudaSuccess) cudaGetLastError();
}

static void *raw_event_create(void)
{
    cudaEvent_t ev = NULL;
    if (cudaEventCreateWithFlags(&ev, cudaEventDisableTiming) != cudaSuccess) {
        cudaGetLastError();
        return NULL;
    }
    return ev;
}

static void raw_event_destroy(void *ev)
{
    if (cudaEventDestroy((cudaEvent_t)ev) != cudaSuccess) cudaGetLastError();
}

static int raw_event_record(void *ev, void *stream)
{
    return check(cudaEventRecord((cudaEvent_t)ev, (cudaStream_t)stream), "copy to cuda");
}

static int raw_event_synchronize(void *ev)
{
    return check(cudaEventSynchronize((cudaEvent_t)ev), "copy to cuda");
}

static const cuda_copy_raw raw = {
    raw_copy_async,    raw_stream_synchronize, raw_is_pinned,
    raw_host_alloc,    raw_host_free,          raw_event_create,
    raw_event_destroy, raw_event_record,       raw_event_synchronize,
};

/* ---- cuda_device.h ---- */

extern "C" int cuda_copy_h2d(void *dst, int device, const void *src, size_t nbytes)
{
    static const char what[] = "copy to cuda";
    if (nbytes == 0) return 0;
    device_scope g(device, what);
    if (g.rc < 0) return -1;
    void *s = cuda_stream_for(device);
    return s ? cuda_copy_h2d_via(&raw, dst, device, src, nbytes, s) : -1;
}

extern "C" int cuda_copy_d2h(void *dst, const void *src, int device, size_t nbytes)
{
    static const char what[] = "copy from cuda";
    if (nbytes == 0) return 0;
    device_scope g(device, what);
    if (g.rc < 0) return -1;
    void *s = cuda_stream_for(device);
    return s ? cuda_copy_d2h_via(&raw, dst, src, nbytes, s) : -1;
}

/* Within a device: queued on its stream, no wait. Between devices: the source stream is drained
 * first (src is complete), the copy runs on the destination's stream, which is drained too (so
 * the source block may be reused by its stream as soon as we return). Source and destination
 * are distinct allocations here (ops stage copies between overlapping views of one storage
 * through a temporary): cudaMemcpyAsync does not allow them to overlap. */
extern "C" int cuda_copy_d2d(void *dst, int dst_device, const void *src, int src_device,
                             size_t nbytes)
{
    static const char what[] = "copy between cuda devices";
    if (nbytes == 0) return 0;
    if (dst_device == src_device) {
        device_scope g(dst_device, what);
        if (g.rc < 0) return -1;
        cudaStream_t s = (cudaStream_t)cuda_stream_for(dst_device);
        if (!s) return -1;
        return check(cudaMemcpyAsync(dst, src, nbytes, cudaMemcpyDeviceToDevice, s), what);
    }
    if (cuda_dev_stream_synchronize(src_device, what) < 0) return -1;
    device_scope g(dst_device, what);
    if (g.rc < 0) return -1;
    cudaStream_t s = (cudaStream_t)cuda_stream_for(dst_device);
    if (!s) return -1;
    if (check(cudaMemcpyPeerAsync(dst, dst_device, src, src_device, nbytes, s), what) < 0)
        return -1;
    return check(cudaStreamSynchronize(s), what);
}
