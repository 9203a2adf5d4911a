/* ops/dispatch.h: the op enum and the per-device kernel tables.
 * defines: ddpl_op, ddpl_kernel, struct ddpl_backend, ddpl_run_kernel, ddpl_op_name.
 *
 * A kernel receives outputs already allocated with their final shapes and inputs already
 * validated (shapes, dtypes, same device); it only computes. It returns 0, or -1 with an error
 * set for conditions only the device can see (an index out of range, a CUDA failure). */
#ifndef DDPL_DISPATCH_H
#define DDPL_DISPATCH_H

#include "core/core.h"

typedef enum ddpl_op {
#define DDPL_OP(name, str) DDPL_OP_##name,
#include "ops.def"
#undef DDPL_OP
    DDPL_OP_COUNT
} ddpl_op;

typedef int (*ddpl_kernel)(ddpl_tensor **out, ddpl_tensor **in, const void *params);

struct ddpl_backend {
    const char *name;
    ddpl_kernel kernels[DDPL_OP_COUNT];
};

extern const struct ddpl_backend ddpl_cpu_backend;
/* Registered by the CUDA backend at start-up when built with it. */
extern const struct ddpl_backend *ddpl_cuda_backend;

const char *ddpl_op_name(ddpl_op op);
/* Runs op's kernel for dev; a missing kernel is an error naming the op and device. */
int ddpl_run_kernel(ddpl_op op, ddpl_device dev, ddpl_tensor **out, ddpl_tensor **in,
                    const void *params);

#endif
