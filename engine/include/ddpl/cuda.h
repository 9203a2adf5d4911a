/* ddpl/cuda.h: CUDA device queries of the C API. All of these work in a build without CUDA
 * (no devices, nothing allocated).
 * defines: ddpl_cuda_is_available, ddpl_cuda_device_count, ddpl_cuda_synchronize,
 *          ddpl_cuda_set_device, ddpl_cuda_current_device, ddpl_cuda_empty_cache. */
#ifndef DDPL_CUDA_H
#define DDPL_CUDA_H

#include "tensor.h"

#ifdef __cplusplus
extern "C" {
#endif

/* True when this build has the CUDA backend and at least one GPU is usable. */
bool ddpl_cuda_is_available(void);
int ddpl_cuda_device_count(void);
/* Waits for all work queued on the current device; -1 with an error on a CUDA failure. */
int ddpl_cuda_synchronize(void);
/* The device `cuda` (without an index) means on this thread; -1 with an error if absent. */
int ddpl_cuda_set_device(int index);
int ddpl_cuda_current_device(void); /* -1 with an error when CUDA is not available */
/* Returns cached, unused device memory to the driver. */
void ddpl_cuda_empty_cache(void);

#ifdef __cplusplus
}
#endif
#endif
