/* cuda/cuda_launch.h: the C face of the CUDA runtime calls (cuda_runtime.cu) and the operand
 * geometry the kernels' headers share, so the backend's C code never includes CUDA headers and
 * the .cu files never include engine internals (core.h uses C11 atomics, which C++ does not
 * have).
 * defines: cuda_geometry, cuda_rt_*, cuda_current_stream. */
#ifndef DDPL_CUDA_LAUNCH_H
#define DDPL_CUDA_LAUNCH_H

#include <stddef.h>
#include <stdint.h>

#include "ddpl/tensor.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Logical shape and element strides of one operand, aligned to the output's rank (a broadcast
 * dim has stride 0). */
typedef struct cuda_geometry {
    int ndim;
    int64_t sizes[DDPL_MAX_DIMS];
    int64_t strides[DDPL_MAX_DIMS];
} cuda_geometry;

/* runtime: each returns 0, or -1 with ddpl_error set naming `what` and the CUDA error */
int cuda_rt_device_count(void); /* 0 without a GPU or driver (other failures: warned on stderr) */
int cuda_rt_synchronize(const char *what);
int cuda_rt_set_device(int device, const char *what);
/* The compute stream of the current device (a cudaStream_t): every kernel of the backend is
 * enqueued on it, so ops run in program order without host synchronisation. */
void *cuda_current_stream(void);

#ifdef __cplusplus
}
#endif
#endif
