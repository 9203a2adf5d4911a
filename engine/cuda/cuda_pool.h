/* cuda/cuda_pool.h: the C face of the 2-D pooling kernels (cuda_pool.cu).
 * defines: cuda_pool_shape, cuda_launch_*pool2d*.
 *
 * Data are contiguous (planes, H, W) inputs and (planes, OH, OW) outputs, planes = N*C, of one
 * floating dtype (`dtype`, a ddpl_dtype) on the current device. Backward kernels write every
 * element of dx (a gather over the windows that cover it: deterministic, no atomics). `what`
 * names the op, shapes and device in CUDA errors. Each returns 0, or -1 with ddpl_error set. */
#ifndef DDPL_CUDA_POOL_H
#define DDPL_CUDA_POOL_H

#include <stdbool.h>

#include "cuda_launch.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct cuda_pool_shape {
    int64_t planes, H, W, OH, OW;
    int kh, kw, sh, sw, ph, pw; /* unused by the adaptive pools */
    bool count_include_pad;
    int divisor_override; /* avg_pool2d: 0 none, else every window's divisor */
} cuda_pool_shape;

/* y <- x; argmax (int64, h*W + w in the plane) when not NULL */
int cuda_launch_max_pool2d(void *y, int64_t *argmax, const void *x, const cuda_pool_shape *s,
                           int dtype, const char *what);
/* dx <- g, argmax */
int cuda_launch_max_pool2d_backward(void *dx, const void *g, const int64_t *argmax,
                                    const cuda_pool_shape *s, int dtype, const char *what);
int cuda_launch_avg_pool2d(void *y, const void *x, const cuda_pool_shape *s, int dtype,
                           const char *what);
int cuda_launch_avg_pool2d_backward(void *dx, const void *g, const cuda_pool_shape *s, int dtype,
                                    const char *what);
int cuda_launch_adaptive_avg_pool2d(void *y, const void *x, const cuda_pool_shape *s, int dtype,
                                    const char *what);
int cuda_launch_adaptive_avg_pool2d_backward(void *dx, const void *g, const cuda_pool_shape *s,
                                             int dtype, const char *what);

#ifdef __cplusplus
}
#endif
#endif
