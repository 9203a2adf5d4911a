/* core/cuda_absent.c: the CUDA queries of ddpl/cuda.h for builds without the CUDA backend.
 * defines: ddpl_cuda_* of ddpl/cuda.h (no devices; set_device and current_device fail). */
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
#endif
