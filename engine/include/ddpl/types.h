/* ddpl/types.h: plain types of the C API that more than one layer shares: the public
 * operations take them (ddpl/ops.h, ddpl/cuda.h) and the backends' kernels see them in their
 * parameters, below the operations (docs/internals/architecture.md, Layers). Types only, no
 * functions.
 * defines: ddpl_reduction, ddpl_cuda_version_info. */
#ifndef DDPL_TYPES_H
#define DDPL_TYPES_H

#ifdef __cplusplus
extern "C" {
#endif

/* How a loss reduces over its elements (PyTorch's reduction='none'|'mean'|'sum'). */
typedef enum ddpl_reduction {
    DDPL_REDUCTION_NONE,
    DDPL_REDUCTION_MEAN,
    DDPL_REDUCTION_SUM
} ddpl_reduction;

/* Versions of what the CUDA backend runs on, 0 when absent: runtime and driver as
 * 1000*major + 10*minor (12040 = 12.4), cudnn and nccl as 10000*major + 100*minor + patch. */
typedef struct ddpl_cuda_version_info {
    int runtime, driver, cudnn, nccl;
} ddpl_cuda_version_info;

#ifdef __cplusplus
}
#endif
#endif
