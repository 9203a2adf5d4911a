/* ops/dispatch.h: the registry of backends that runs kernels and answers device queries. The
 * op enum and the backend table each device type fills are the kernel ABI's
 * (kernel_abi/kernel.h).
 * defines: ddpl_backend_register, ddpl_backend_find, ddpl_backend_started, ddpl_backend_start,
 *          ddpl_backend_supports, ddpl_backend_gemm_native, ddpl_run_kernel, ddpl_op_name.
 *
 * The registry holds one backend table per device type; a backend with a start hook starts on the
 * first use of its devices (ddpl_backend_start, the one place that happens), so CPU-only programs
 * never pay the CUDA runtime's start-up. */
#ifndef DDPL_DISPATCH_H
#define DDPL_DISPATCH_H

#include "kernel_abi/kernel.h"

/* Makes b (NULL: none) the backend of device type `type` in place of the build's own, started
 * on first use (tests register fakes). Call it before any tensor of that type exists. */
void ddpl_backend_register(ddpl_device_type type, const struct ddpl_backend *b);
/* The backend registered for type, started or not; NULL when this build has none. */
const struct ddpl_backend *ddpl_backend_find(ddpl_device_type type);
/* The backend of type if it has started, else NULL (nothing is started). */
const struct ddpl_backend *ddpl_backend_started(ddpl_device_type type);
/* Starts dev's backend unless it has started: the one place a backend starts. 0, or -1 with an
 * error when no backend is registered for it or it cannot start (no GPU or driver). */
int ddpl_backend_start(ddpl_device dev);
/* Whether dev's backend has a kernel for op (ggml's supports_op); starts the backend. */
bool ddpl_backend_supports(ddpl_device dev, ddpl_op op);
/* Whether dev's backend runs products in dt on its own units (its gemm_native; true when it
 * does not say); starts the backend (false when it cannot start). */
bool ddpl_backend_gemm_native(ddpl_device dev, ddpl_dtype dt);

const char *ddpl_op_name(ddpl_op op);
/* Runs op's kernel for dev on dev (switching the thread's current device for the call where
 * the backend has one); a missing kernel is an error naming the op and device. */
int ddpl_run_kernel(ddpl_op op, ddpl_device dev, ddpl_tensor **out, ddpl_tensor **in,
                    const void *params);

#endif
