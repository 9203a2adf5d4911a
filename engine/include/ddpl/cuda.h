/* ddpl/cuda.h: CUDA device queries of the C API. All of these work in a build without CUDA
 * (no devices, nothing allocated).
 * defines: ddpl_cuda_is_available, ddpl_cuda_device_count, ddpl_cuda_synchronize. */
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

#ifdef __cplusplus
}
#endif
#endif
