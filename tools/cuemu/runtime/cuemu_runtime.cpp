/* tools/cuemu/runtime/cuemu_runtime.cpp: the CUDA runtime API calls the engine makes, for the
 * emulation build: devices, errors, streams and events.
 * defines: cudaGetDeviceCount, cudaSetDevice, cudaGetDevice, cudaDeviceSynchronize,
 *          cudaGetLastError, cudaPeekAtLastError, cudaGetErrorName, cudaGetErrorString,
 *          cudaRuntimeGetVersion, cudaDriverGetVersion, cudaFuncSetAttribute, cudaStream*,
 *          cudaEvent*, and cuemu::set_last_error, stream_device, func_max_dynamic_smem, env_u64.
 *
 * Devices: DDPL_CUEMU_DEVICES (default 2; 0 behaves as a machine without a GPU). All work runs
 * synchronously when issued, so a stream or event is always complete: the queries say so
 * truthfully. Handles are checked: a destroyed or foreign stream or event, or a stream of another
 * device than the current one at a launch, gets the error a real runtime gives. Memory is in
 * cuemu_memory.cpp. */
#include <chrono>
#include <mutex>
#include <stdlib.h>
#include <unordered_map>
#include <unordered_set>

#include "cuemu_internal.h"

struct CUstream_st {
    int device;
    unsigned flags;
};
struct CUevent_st {
    int device;
    unsigned flags;
    double recorded_ms; /* host time of the last record, for cudaEventElapsedTime; <0: never */
};

namespace cuemu
{

namespace
{
thread_local cudaError_t last_error = cudaSuccess;
thread_local int current_device = 0;
std::mutex handles_mutex;
std::unordered_map<const void *, size_t> smem_attr;

/* The live handles of one kind: a destroyed or foreign one is refused with
 * cudaErrorInvalidResourceHandle, as by the real runtime. */
template <typename H> struct handle_set {
    std::unordered_set<H> live;
    H add(H h)
    {
        std::lock_guard<std::mutex> hold(handles_mutex);
        live.insert(h);
        return h;
    }
    bool has(H h)
    {
        std::lock_guard<std::mutex> hold(handles_mutex);
        return live.count(h) != 0;
    }
    /* false when h is not live; else it is freed */
    bool remove(H h)
    {
        std::lock_guard<std::mutex> hold(handles_mutex);
        if (!live.erase(h)) return false;
        delete h;
        return true;
    }
};
handle_set<cudaStream_t> streams;
handle_set<cudaEvent_t> events;

int device_count()
{
    static int n = (int)env_u64("DDPL_CUEMU_DEVICES", 2);
    return n;
}

cudaError_t fail(cudaError_t e)
{
    set_last_error(e);
    return e;
}

double now_ms()
{
    using namespace std::chrono;
    return duration<double, std::milli>(steady_clock::now().time_since_epoch()).count();
}
} // namespace

void set_last_error(cudaError_t e)
{
    if (e != cudaSuccess) last_error = e;
}

uint64_t env_u64(const char *name, uint64_t fallback)
{
    const char *s = getenv(name);
    if (!s || !*s) return fallback;
    char *end;
    unsigned long long v = strtoull(s, &end, 0);
    return *end ? fallback : (uint64_t)v;
}

int stream_device(cudaStream_t s)
{
    if (s == 0 || s == cudaStreamLegacy || s == cudaStreamPerThread) return current_device;
    return streams.has(s) ? s->device : -1;
}

size_t func_max_dynamic_smem(const void *kernel)
{
    std::lock_guard<std::mutex> hold(handles_mutex);
    auto it = smem_attr.find(kernel);
    return it == smem_attr.end() ? 0 : it->second;
}

} // namespace cuemu

using namespace cuemu;

extern "C" {

/* ---- devices and errors ---- */

cudaError_t cudaGetDeviceCount(int *count)
{
    if (!count) return fail(cudaErrorInvalidValue);
    *count = device_count();
    return *count ? cudaSuccess : fail(cudaErrorNoDevice);
}

cudaError_t cudaSetDevice(int device)
{
    if (device < 0 || device >= device_count()) return fail(cudaErrorInvalidDevice);
    current_device = device;
    return cudaSuccess;
}

cudaError_t cudaGetDevice(int *device)
{
    if (!device) return fail(cudaErrorInvalidValue);
    if (device_count() == 0) return fail(cudaErrorNoDevice);
    *device = current_device;
    return cudaSuccess;
}

cudaError_t cudaDeviceSynchronize(void)
{
    return device_count() ? cudaSuccess : fail(cudaErrorNoDevice);
}

cudaError_t cudaGetLastError(void)
{
    cudaError_t e = last_error;
    last_error = cudaSuccess;
    return e;
}

cudaError_t cudaPeekAtLastError(void)
{
    return last_error;
}

/* The real runtime's names and messages, for the codes the emulation can produce. */
static const struct {
    cudaError_t code;
    const char *name, *text;
} error_table[] = {
    {cudaSuccess, "cudaSuccess", "no error"},
    {cudaErrorInvalidValue, "cudaErrorInvalidValue", "invalid argument"},
    {cudaErrorMemoryAllocation, "cudaErrorMemoryAllocation", "out of memory"},
    {cudaErrorInvalidConfiguration, "cudaErrorInvalidConfiguration",
     "invalid configuration argument"},
    {cudaErrorInvalidDevice, "cudaErrorInvalidDevice", "invalid device ordinal"},
    {cudaErrorInvalidDevicePointer, "cudaErrorInvalidDevicePointer", "invalid device pointer"},
    {cudaErrorInvalidResourceHandle, "cudaErrorInvalidResourceHandle", "invalid resource handle"},
    {cudaErrorNotReady, "cudaErrorNotReady", "device not ready"},
    {cudaErrorNoDevice, "cudaErrorNoDevice", "no CUDA-capable device is detected"},
    {cudaErrorInsufficientDriver, "cudaErrorInsufficientDriver",
     "CUDA driver version is insufficient for CUDA runtime version"},
    {cudaErrorLaunchOutOfResources, "cudaErrorLaunchOutOfResources",
     "too many resources requested for launch"},
    {cudaErrorHostMemoryAlreadyRegistered, "cudaErrorHostMemoryAlreadyRegistered",
     "part or all of the requested memory range is already mapped"},
    {cudaErrorHostMemoryNotRegistered, "cudaErrorHostMemoryNotRegistered",
     "pointer does not correspond to a registered memory region"},
    {cudaErrorInvalidMemcpyDirection, "cudaErrorInvalidMemcpyDirection",
     "invalid copy direction for memcpy"},
    {cudaErrorPeerAccessUnsupported, "cudaErrorPeerAccessUnsupported",
     "peer access is not supported between these two devices"},
};

const char *cudaGetErrorName(cudaError_t e)
{
    for (const auto &r : error_table)
        if (r.code == e) return r.name;
    return "cudaErrorUnknown";
}

const char *cudaGetErrorString(cudaError_t e)
{
    for (const auto &r : error_table)
        if (r.code == e) return r.text;
    return "unknown error";
}

cudaError_t cudaRuntimeGetVersion(int *v)
{
    if (!v) return fail(cudaErrorInvalidValue);
    *v = CUDART_VERSION;
    return cudaSuccess;
}

cudaError_t cudaDriverGetVersion(int *v)
{
    if (!v) return fail(cudaErrorInvalidValue);
    *v = CUDART_VERSION; /* the emulation is as new as the headers it was built with */
    return cudaSuccess;
}

cudaError_t cudaFuncSetAttribute(const void *func, enum cudaFuncAttribute attr, int value)
{
    if (!func) return fail(cudaErrorInvalidDeviceFunction);
    if (attr == cudaFuncAttributeMaxDynamicSharedMemorySize) {
        if (value < 0 || (size_t)value > MAX_SMEM_OPTIN) return fail(cudaErrorInvalidValue);
        std::lock_guard<std::mutex> hold(handles_mutex);
        smem_attr[func] = (size_t)value;
        return cudaSuccess;
    }
    if (attr == cudaFuncAttributePreferredSharedMemoryCarveout) return cudaSuccess;
    return fail(cudaErrorInvalidValue);
}

/* ---- streams ---- */

cudaError_t cudaStreamCreateWithFlags(cudaStream_t *s, unsigned int flags)
{
    if (!s || (flags & ~(unsigned)cudaStreamNonBlocking)) return fail(cudaErrorInvalidValue);
    if (device_count() == 0) return fail(cudaErrorNoDevice);
    *s = streams.add(new CUstream_st{current_device, flags});
    return cudaSuccess;
}

cudaError_t cudaStreamCreate(cudaStream_t *s)
{
    return cudaStreamCreateWithFlags(s, cudaStreamDefault);
}

cudaError_t cudaStreamDestroy(cudaStream_t s)
{
    return streams.remove(s) ? cudaSuccess : fail(cudaErrorInvalidResourceHandle);
}

cudaError_t cudaStreamSynchronize(cudaStream_t s)
{
    return stream_device(s) < 0 ? fail(cudaErrorInvalidResourceHandle) : cudaSuccess;
}

cudaError_t cudaStreamQuery(cudaStream_t s)
{
    return cudaStreamSynchronize(s); /* everything issued has run */
}

/* ---- events ---- */

cudaError_t cudaEventCreateWithFlags(cudaEvent_t *e, unsigned int flags)
{
    unsigned known = cudaEventBlockingSync | cudaEventDisableTiming | cudaEventInterprocess;
    if (!e || (flags & ~known)) return fail(cudaErrorInvalidValue);
    if (device_count() == 0) return fail(cudaErrorNoDevice);
    *e = events.add(new CUevent_st{current_device, flags, -1.0});
    return cudaSuccess;
}

cudaError_t cudaEventCreate(cudaEvent_t *e)
{
    return cudaEventCreateWithFlags(e, cudaEventDefault);
}

cudaError_t cudaEventDestroy(cudaEvent_t e)
{
    return events.remove(e) ? cudaSuccess : fail(cudaErrorInvalidResourceHandle);
}

cudaError_t cudaEventRecord(cudaEvent_t e, cudaStream_t s)
{
    int dev = stream_device(s);
    if (!events.has(e) || dev < 0) return fail(cudaErrorInvalidResourceHandle);
    if (e->device != dev) return fail(cudaErrorInvalidResourceHandle); /* as the real runtime */
    e->recorded_ms = now_ms();
    return cudaSuccess;
}

cudaError_t cudaEventQuery(cudaEvent_t e)
{
    return events.has(e) ? cudaSuccess : fail(cudaErrorInvalidResourceHandle);
}

cudaError_t cudaEventSynchronize(cudaEvent_t e)
{
    return cudaEventQuery(e);
}

cudaError_t cudaEventElapsedTime(float *ms, cudaEvent_t start, cudaEvent_t end)
{
    if (!ms) return fail(cudaErrorInvalidValue);
    if (!events.has(start) || !events.has(end)) return fail(cudaErrorInvalidResourceHandle);
    if ((start->flags | end->flags) & cudaEventDisableTiming)
        return fail(cudaErrorInvalidResourceHandle);
    if (start->recorded_ms < 0 || end->recorded_ms < 0) return fail(cudaErrorInvalidResourceHandle);
    *ms = (float)(end->recorded_ms - start->recorded_ms);
    return cudaSuccess;
}

cudaError_t cudaStreamWaitEvent(cudaStream_t s, cudaEvent_t e, unsigned int flags)
{
    if (stream_device(s) < 0 || !events.has(e)) return fail(cudaErrorInvalidResourceHandle);
    return flags ? fail(cudaErrorInvalidValue) : cudaSuccess;
}

} /* extern "C" */
