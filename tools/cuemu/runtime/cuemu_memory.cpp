/* tools/cuemu/runtime/cuemu_memory.cpp: device and pinned host memory for the emulation build.
 * defines: cudaMalloc, cudaFree, cudaMemGetInfo, cudaMemcpy, cudaMemcpyAsync,
 *          cudaMemcpyPeerAsync, cudaMemset, cudaMemsetAsync, cudaHostAlloc, cudaMallocHost,
 *          cudaFreeHost, cudaHostRegister, cudaHostUnregister, cudaPointerGetAttributes.
 *
 * Device memory is host memory (256-byte aligned, as cudaMalloc's, and filled with 0xff bytes so
 * a kernel reading what nobody wrote sees NaN or -1), counted against a per-device budget of
 * DDPL_CUEMU_MEMORY bytes (default 4 GiB) so that out-of-memory is reachable in a test. Every
 * copy checks that its device side lies inside one allocation of the right device: a host
 * pointer passed where device memory is expected is an error here, as it is a fault on a GPU. */
#include <map>
#include <mutex>
#include <stdlib.h>
#include <string.h>

#include "cuemu_internal.h"

namespace cuemu
{
namespace
{

enum { MAX_DEVICES = 64, ALIGN = 256 };

struct region {
    size_t size;
    int device;  /* device memory: its device; host memory: -1 */
    bool pinned; /* host: from cudaHostAlloc (true) or cudaHostRegister (false) */
};

std::mutex mu;
std::map<uintptr_t, region> device_regions; /* by start address */
std::map<uintptr_t, region> host_regions;
size_t used[MAX_DEVICES];

size_t budget()
{
    static size_t b = (size_t)env_u64("DDPL_CUEMU_MEMORY", (uint64_t)4 << 30);
    return b;
}

int current()
{
    int d = 0;
    cudaGetDevice(&d);
    return d;
}

cudaError_t fail(cudaError_t e)
{
    set_last_error(e);
    return e;
}

/* The region of `map` holding [p, p + n), or NULL (mu held). */
const region *find(std::map<uintptr_t, region> &map, const void *p, size_t n, uintptr_t *start)
{
    uintptr_t a = (uintptr_t)p;
    auto it = map.upper_bound(a);
    if (it == map.begin()) return NULL;
    --it;
    if (a - it->first > it->second.size || n > it->second.size - (a - it->first)) return NULL;
    if (start) *start = it->first;
    return &it->second;
}

/* Whether [p, p + n) is device memory (of `device`, unless -1). */
bool on_device(const void *p, size_t n, int device)
{
    std::lock_guard<std::mutex> hold(mu);
    const region *r = find(device_regions, p, n, NULL);
    return r && (device < 0 || r->device == device);
}

/* The kinds' device sides must be device memory; cudaMemcpyDefault infers them. */
cudaError_t check_copy(void *dst, const void *src, size_t n, cudaMemcpyKind kind)
{
    if (n == 0) return cudaSuccess;
    if (!dst || !src) return cudaErrorInvalidValue;
    bool dst_dev = on_device(dst, n, -1), src_dev = on_device(src, n, -1);
    switch (kind) {
    case cudaMemcpyHostToHost:
        return cudaSuccess;
    case cudaMemcpyHostToDevice:
        return dst_dev ? cudaSuccess : cudaErrorInvalidValue;
    case cudaMemcpyDeviceToHost:
        return src_dev ? cudaSuccess : cudaErrorInvalidValue;
    case cudaMemcpyDeviceToDevice:
        return dst_dev && src_dev ? cudaSuccess : cudaErrorInvalidValue;
    case cudaMemcpyDefault:
        return cudaSuccess;
    }
    return cudaErrorInvalidMemcpyDirection;
}

} // namespace
} // namespace cuemu

using namespace cuemu;

extern "C" {

cudaError_t cudaMalloc(void **ptr, size_t size)
{
    if (!ptr) return fail(cudaErrorInvalidValue);
    if (size == 0) {
        *ptr = NULL;
        return cudaSuccess;
    }
    int dev = current();
    size_t rounded = (size + ALIGN - 1) / ALIGN * ALIGN;
    if (rounded < size) return fail(cudaErrorMemoryAllocation);
    {
        std::lock_guard<std::mutex> hold(mu);
        if (rounded > budget() - used[dev]) return fail(cudaErrorMemoryAllocation);
        used[dev] += rounded;
    }
    void *p = aligned_alloc(ALIGN, rounded);
    if (!p) {
        std::lock_guard<std::mutex> hold(mu);
        used[dev] -= rounded;
        return fail(cudaErrorMemoryAllocation);
    }
    memset(p, 0xff, rounded);
    std::lock_guard<std::mutex> hold(mu);
    device_regions[(uintptr_t)p] = region{size, dev, false};
    *ptr = p;
    return cudaSuccess;
}

cudaError_t cudaFree(void *ptr)
{
    if (!ptr) return cudaSuccess;
    std::lock_guard<std::mutex> hold(mu);
    auto it = device_regions.find((uintptr_t)ptr);
    if (it == device_regions.end()) return fail(cudaErrorInvalidValue);
    used[it->second.device] -= (it->second.size + ALIGN - 1) / ALIGN * ALIGN;
    device_regions.erase(it);
    free(ptr);
    return cudaSuccess;
}

cudaError_t cudaMemGetInfo(size_t *free_bytes, size_t *total)
{
    if (!free_bytes || !total) return fail(cudaErrorInvalidValue);
    int dev = current();
    std::lock_guard<std::mutex> hold(mu);
    *total = budget();
    *free_bytes = budget() - used[dev];
    return cudaSuccess;
}

cudaError_t cudaMemcpyAsync(void *dst, const void *src, size_t n, enum cudaMemcpyKind kind,
                            cudaStream_t stream)
{
    if (stream_device(stream) < 0) return fail(cudaErrorInvalidResourceHandle);
    cudaError_t e = check_copy(dst, src, n, kind);
    if (e != cudaSuccess) return fail(e);
    if (n) memcpy(dst, src, n); /* overlapping copies are undefined in CUDA too: ASan says so */
    return cudaSuccess;
}

cudaError_t cudaMemcpy(void *dst, const void *src, size_t n, enum cudaMemcpyKind kind)
{
    return cudaMemcpyAsync(dst, src, n, kind, 0);
}

cudaError_t cudaMemcpyPeerAsync(void *dst, int dst_device, const void *src, int src_device,
                                size_t n, cudaStream_t stream)
{
    if (stream_device(stream) < 0) return fail(cudaErrorInvalidResourceHandle);
    int count = 0;
    cudaGetDeviceCount(&count);
    if (dst_device < 0 || dst_device >= count || src_device < 0 || src_device >= count)
        return fail(cudaErrorInvalidDevice);
    if (n && (!on_device(dst, n, dst_device) || !on_device(src, n, src_device)))
        return fail(cudaErrorInvalidValue);
    if (n) memcpy(dst, src, n);
    return cudaSuccess;
}

cudaError_t cudaMemsetAsync(void *p, int value, size_t n, cudaStream_t stream)
{
    if (stream_device(stream) < 0) return fail(cudaErrorInvalidResourceHandle);
    if (n && !on_device(p, n, -1)) return fail(cudaErrorInvalidValue);
    if (n) memset(p, value, n);
    return cudaSuccess;
}

cudaError_t cudaMemset(void *p, int value, size_t n)
{
    return cudaMemsetAsync(p, value, n, 0);
}

/* ---- pinned host memory ---- */

cudaError_t cudaHostAlloc(void **ptr, size_t size, unsigned int flags)
{
    if (!ptr || size == 0) return fail(cudaErrorInvalidValue);
    (void)flags; /* portable, mapped, write-combined: all the same host memory here */
    void *p = aligned_alloc(4096, (size + 4095) / 4096 * 4096);
    if (!p) return fail(cudaErrorMemoryAllocation);
    std::lock_guard<std::mutex> hold(mu);
    host_regions[(uintptr_t)p] = region{size, -1, true};
    *ptr = p;
    return cudaSuccess;
}

cudaError_t cudaMallocHost(void **ptr, size_t size)
{
    return cudaHostAlloc(ptr, size, cudaHostAllocDefault);
}

cudaError_t cudaFreeHost(void *ptr)
{
    if (!ptr) return cudaSuccess;
    std::lock_guard<std::mutex> hold(mu);
    auto it = host_regions.find((uintptr_t)ptr);
    if (it == host_regions.end() || !it->second.pinned) return fail(cudaErrorInvalidValue);
    host_regions.erase(it);
    free(ptr);
    return cudaSuccess;
}

cudaError_t cudaHostRegister(void *ptr, size_t size, unsigned int flags)
{
    (void)flags;
    if (!ptr || size == 0) return fail(cudaErrorInvalidValue);
    std::lock_guard<std::mutex> hold(mu);
    uintptr_t a = (uintptr_t)ptr;
    auto it = host_regions.lower_bound(a);
    bool overlaps = (it != host_regions.end() && it->first < a + size);
    if (it != host_regions.begin()) {
        --it;
        overlaps = overlaps || it->first + it->second.size > a;
    }
    if (overlaps) return fail(cudaErrorHostMemoryAlreadyRegistered);
    host_regions[a] = region{size, -1, false};
    return cudaSuccess;
}

cudaError_t cudaHostUnregister(void *ptr)
{
    std::lock_guard<std::mutex> hold(mu);
    auto it = host_regions.find((uintptr_t)ptr);
    if (it == host_regions.end() || it->second.pinned)
        return fail(cudaErrorHostMemoryNotRegistered);
    host_regions.erase(it);
    return cudaSuccess;
}

cudaError_t cudaPointerGetAttributes(struct cudaPointerAttributes *a, const void *p)
{
    if (!a) return fail(cudaErrorInvalidValue);
    memset(a, 0, sizeof *a);
    a->type = cudaMemoryTypeUnregistered;
    a->device = -2;
    std::lock_guard<std::mutex> hold(mu);
    if (const region *r = find(device_regions, p, 1, NULL)) {
        a->type = cudaMemoryTypeDevice;
        a->device = r->device;
        a->devicePointer = (void *)p;
    } else if (find(host_regions, p, 1, NULL)) {
        a->type = cudaMemoryTypeHost;
        a->device = 0;
        a->devicePointer = (void *)p;
        a->hostPointer = (void *)p;
    }
    return cudaSuccess;
}

} /* extern "C" */
