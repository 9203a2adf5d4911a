/* cuda/cuda_host.cu: copies between host and device memory on the compute streams, with pinned
 * staging buffers for large host-to-device copies from pageable memory.
 * defines: cuda_copy_h2d, cuda_copy_d2h, cuda_copy_d2d.
 *
 * Why staging: a copy from pageable memory cannot be DMA'd directly; the driver bounces it
 * through its own pinned buffer, serially. We bounce it ourselves through two pinned chunks:
 * while chunk k is in flight on the stream, the CPU fills chunk k+1, and an event per chunk
 * says when its buffer may be refilled. The host data is fully read when the call returns, so
 * the caller may free or overwrite it at once, and the host does not wait for the last DMA. */
#include <mutex>
#include <string.h>

#include "cuda_common.cuh"
#include "cuda_device.h"

#define check cuda_check

enum { MAX_DEVICES = 64 };
static const size_t STAGE_MIN = (size_t)1 << 20;   /* smaller copies go straight */
static const size_t STAGE_CHUNK = (size_t)4 << 20; /* bytes per pinned buffer */

/* Two pinned buffers per device, used alternately; the mutex serialises copies to a device
 * (two threads must not refill the same buffer). */
struct staging {
    std::mutex m;
    void *buf[2];
    cudaEvent_t done[2]; /* recorded after the DMA out of buf[i] */
    bool busy[2];        /* done[i] was recorded and not yet waited for */
    bool failed;         /* cudaHostAlloc failed once: do not retry on every copy */
};
static staging stages[MAX_DEVICES];

/* Scoped current device (as in cuda_runtime.cu): copies must not move the thread's device. */
struct device_scope {
    int prev = -1;
    int rc = 0;
    device_scope(int device, const char *what)
    {
        if (cudaGetDevice(&prev) != cudaSuccess) {
            cudaGetLastError();
            prev = -1;
        }
        if (prev != device) rc = check(cudaSetDevice(device), what);
    }
    ~device_scope()
    {
        int now = -1;
        if (prev >= 0 && cudaGetDevice(&now) == cudaSuccess && now != prev) cudaSetDevice(prev);
    }
};

static bool is_pinned(const void *p)
{
    cudaPointerAttributes a;
    if (cudaPointerGetAttributes(&a, p) != cudaSuccess) {
        cudaGetLastError();
        return false;
    }
    return a.type == cudaMemoryTypeHost;
}

/* The device's buffers, allocated on first use; false when pinned memory is not available. */
static bool stage_ready(staging *st)
{
    if (st->failed) return false;
    if (st->buf[0]) return true;
    for (int i = 0; i < 2; i++) {
        if (cudaHostAlloc(&st->buf[i], STAGE_CHUNK, cudaHostAllocDefault) != cudaSuccess ||
            cudaEventCreateWithFlags(&st->done[i], cudaEventDisableTiming) != cudaSuccess) {
            cudaGetLastError();
            for (int j = 0; j <= i; j++) {
                if (st->buf[j]) cudaFreeHost(st->buf[j]);
                if (st->done[j]) cudaEventDestroy(st->done[j]);
                st->buf[j] = NULL;
                st->done[j] = NULL;
            }
            cudaGetLastError();
            st->failed = true;
            return false;
        }
    }
    return true;
}

extern "C" int cuda_copy_h2d(void *dst, int device, const void *src, size_t nbytes)
{
    static const char what[] = "copy to cuda";
    if (nbytes == 0) return 0;
    if (device < 0 || device >= MAX_DEVICES) return ddpl_error("%s: bad device %d", what, device);
    device_scope g(device, what);
    if (g.rc < 0) return -1;
    cudaStream_t s = (cudaStream_t)cuda_stream_for(device);
    if (!s) return -1;
    /* Small or pinned sources: one async copy. From pageable memory the driver has copied the
     * bytes to its own staging memory when cudaMemcpyAsync returns, so src may be reused. */
    if (nbytes < STAGE_MIN || is_pinned(src))
        return check(cudaMemcpyAsync(dst, src, nbytes, cudaMemcpyHostToDevice, s), what);
    staging *st = &stages[device];
    std::lock_guard<std::mutex> hold(st->m);
    if (!stage_ready(st))
        return check(cudaMemcpyAsync(dst, src, nbytes, cudaMemcpyHostToDevice, s), what);
    const char *from = (const char *)src;
    char *to = (char *)dst;
    for (size_t off = 0, k = 0; off < nbytes; off += STAGE_CHUNK, k++) {
        int i = (int)(k & 1);
        size_t len = nbytes - off < STAGE_CHUNK ? nbytes - off : STAGE_CHUNK;
        if (st->busy[i] && check(cudaEventSynchronize(st->done[i]), what) < 0) return -1;
        st->busy[i] = false;
        memcpy(st->buf[i], from + off, len);
        if (check(cudaMemcpyAsync(to + off, st->buf[i], len, cudaMemcpyHostToDevice, s), what) <
                0 ||
            check(cudaEventRecord(st->done[i], s), what) < 0)
            return -1;
        st->busy[i] = true;
    }
    return 0;
}

/* The stream is synchronised: the caller reads dst next (item, tolist, printing, saving). */
extern "C" int cuda_copy_d2h(void *dst, const void *src, int device, size_t nbytes)
{
    static const char what[] = "copy from cuda";
    if (nbytes == 0) return 0;
    device_scope g(device, what);
    if (g.rc < 0) return -1;
    cudaStream_t s = (cudaStream_t)cuda_stream_for(device);
    if (!s) return -1;
    if (check(cudaMemcpyAsync(dst, src, nbytes, cudaMemcpyDeviceToHost, s), what) < 0) return -1;
    return check(cudaStreamSynchronize(s), what);
}

/* Within a device: queued on its stream, no wait. Between devices: the source stream is drained
 * first (src is complete), the copy runs on the destination's stream, which is drained too (so
 * the source block may be reused by its stream as soon as we return). */
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
