/* core/cuda_absent.c: the CUDA queries of ddpl/cuda.h for builds without the CUDA backend.
 * defines: ddpl_cuda_is_available, ddpl_cuda_device_count, ddpl_cuda_synchronize (no CUDA). */
#include "ddpl/config.h"

#if !DDPL_HAVE_CUDA
#include "core.h"
#include "ddpl/cuda.h"

bool ddpl_cuda_is_available(void) { return false; }
int ddpl_cuda_device_count(void) { return 0; }
int ddpl_cuda_synchronize(void) { return 0; }
#endif
