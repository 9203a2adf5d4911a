/* core/cuda_absent.c: the CUDA queries of ddpl/cuda.h for builds without the CUDA backend.
 * defines: ddpl_cuda_* of ddpl/cuda.h (no devices; set_device and current_device fail, memory
 *          statistics are 0). */
#include "ddpl/config.h"

#if !DDPL_HAVE_CUDA
#include "core.h"
#include "ddpl/cuda.h"

bool ddpl_cuda_is_available(void)
{
    return false;
}
int ddpl_cuda_device_count(void)
{
    return 0;
}
int ddpl_cuda_synchronize(void)
{
    return 0;
}
int ddpl_cuda_set_device(int index)
{
    return ddpl_error("cuda.set_device(%d): this build of ddplua has no CUDA backend", index);
}
int ddpl_cuda_current_device(void)
{
    return ddpl_error("cuda.current_device: this build of ddplua has no CUDA backend");
}
void ddpl_cuda_empty_cache(void) {}
int64_t ddpl_cuda_memory_allocated(int device)
{
    DDPL_UNUSED(device);
    return 0;
}
int64_t ddpl_cuda_max_memory_allocated(int device)
{
    DDPL_UNUSED(device);
    return 0;
}
int64_t ddpl_cuda_memory_reserved(int device)
{
    DDPL_UNUSED(device);
    return 0;
}
int64_t ddpl_cuda_max_memory_reserved(int device)
{
    DDPL_UNUSED(device);
    return 0;
}
void ddpl_cuda_reset_peak_memory_stats(int device)
{
    DDPL_UNUSED(device);
}
void ddpl_cuda_versions(ddpl_cuda_version_info *v)
{
    *v = (ddpl_cuda_version_info){0};
}
#endif
