/* ops/devices.c: device names and the device queries of ddpl/cuda.h, answered by the registered
 * CUDA backend (ops/dispatch.h); a build without one answers "no devices, nothing allocated".
 * defines: ddpl_device_parse and the ddpl_cuda_* functions of ddpl/cuda.h. */
#include "ddpl/cuda.h"
#include "dispatch.h"

int ddpl_device_parse(const char *s, ddpl_device *out)
{
    if (strcmp(s, "cpu") == 0) {
        *out = ddpl_cpu();
        return 0;
    }
    if (strncmp(s, "cuda", 4) == 0) {
        int idx = 0;
        if (!s[4]) {
            /* 'cuda' alone is the calling thread's current device (ddpl.cuda.set_device), as in
             * PyTorch; 0 where there is no CUDA (the tensor creation then says why) */
            idx = ddpl_cuda_is_available() ? ddpl_cuda_current_device() : 0;
            if (idx < 0) return -1;
        } else if (s[4] == ':') {
            char *end;
            long v = strtol(s + 5, &end, 10);
            if (end == s + 5 || *end || v < 0 || v > 255) goto bad;
            idx = (int)v;
        } else if (s[4]) {
            goto bad;
        }
        *out = (ddpl_device){DDPL_CUDA, (int16_t)idx};
        return 0;
    }
bad:
    return ddpl_error("unknown device '%s' (expected 'cpu', 'cuda' or 'cuda:N')", s);
}

/* ---- ddpl/cuda.h ---- */

int ddpl_cuda_device_count(void)
{
    const struct ddpl_backend *b = ddpl_backend_find(DDPL_CUDA);
    return b ? b->device_count() : 0;
}

bool ddpl_cuda_is_available(void)
{
    return ddpl_cuda_device_count() > 0;
}

int ddpl_cuda_synchronize(void)
{
    if (!ddpl_cuda_is_available()) return 0;
    if (ddpl_backend_start((ddpl_device){DDPL_CUDA, 0}) < 0) return -1;
    return ddpl_backend_started(DDPL_CUDA)->synchronize();
}

int ddpl_cuda_set_device(int index)
{
    const struct ddpl_backend *b = ddpl_backend_find(DDPL_CUDA);
    if (!b)
        return ddpl_error("cuda.set_device(%d): this build of ddplua has no CUDA backend", index);
    if (b->set_device(index) < 0) return -1; /* checks that the device exists */
    return ddpl_backend_start((ddpl_device){DDPL_CUDA, (int16_t)index});
}

int ddpl_cuda_current_device(void)
{
    const struct ddpl_backend *b = ddpl_backend_find(DDPL_CUDA);
    if (!b) return ddpl_error("cuda.current_device: this build of ddplua has no CUDA backend");
    return b->current_device();
}

/* Before the backend starts nothing was allocated or cached: these answer 0 and do nothing
 * rather than start it. */
void ddpl_cuda_empty_cache(void)
{
    const struct ddpl_backend *b = ddpl_backend_started(DDPL_CUDA);
    if (b) b->empty_cache();
}

int ddpl_cuda_host_register(void *ptr, size_t nbytes)
{
    if (!ddpl_cuda_is_available()) return 0;
    if (ddpl_backend_start((ddpl_device){DDPL_CUDA, 0}) < 0) return -1;
    const struct ddpl_backend *b = ddpl_backend_started(DDPL_CUDA);
    if (!b->host_register) return 0;
    return b->host_register(ptr, nbytes) < 0 ? -1 : 1;
}

void ddpl_cuda_host_unregister(void *ptr)
{
    const struct ddpl_backend *b = ddpl_backend_started(DDPL_CUDA);
    if (b && b->host_unregister) b->host_unregister(ptr);
}

static ddpl_memory_stats stats_of(int device)
{
    ddpl_memory_stats s = {0};
    const struct ddpl_backend *b = ddpl_backend_started(DDPL_CUDA);
    if (b) b->memory_stats(device, &s);
    return s;
}

int64_t ddpl_cuda_memory_allocated(int device)
{
    return stats_of(device).allocated;
}

int64_t ddpl_cuda_max_memory_allocated(int device)
{
    return stats_of(device).peak_allocated;
}

int64_t ddpl_cuda_memory_reserved(int device)
{
    return stats_of(device).reserved;
}

int64_t ddpl_cuda_max_memory_reserved(int device)
{
    return stats_of(device).peak_reserved;
}

void ddpl_cuda_reset_peak_memory_stats(int device)
{
    const struct ddpl_backend *b = ddpl_backend_started(DDPL_CUDA);
    if (b) b->reset_peak_memory_stats(device);
}

void ddpl_cuda_versions(ddpl_cuda_version_info *v)
{
    *v = (ddpl_cuda_version_info){0};
    const struct ddpl_backend *b = ddpl_backend_find(DDPL_CUDA);
    if (b) b->versions(v);
}
