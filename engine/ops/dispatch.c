/* ops/dispatch.c: picks a device's kernel table and reports missing kernels.
 * defines: ddpl_run_kernel, ddpl_op_name, ddpl_cuda_backend. */
#include "dispatch.h"
#include "ddpl/config.h"

#if DDPL_HAVE_CUDA
#include "ddpl/cuda.h"
int ddpl_cuda_init(void);
#endif

const struct ddpl_backend *ddpl_cuda_backend = NULL;

static const char *const op_names[DDPL_OP_COUNT] = {
#define DDPL_OP(name, str) [DDPL_OP_##name] = str,
#include "ops.def"
#undef DDPL_OP
};

const char *ddpl_op_name(ddpl_op op)
{
    return (unsigned)op < DDPL_OP_COUNT ? op_names[op] : "?";
}

int ddpl_run_kernel(ddpl_op op, ddpl_device dev, ddpl_tensor **out, ddpl_tensor **in,
                    const void *params)
{
#if DDPL_HAVE_CUDA
    if (dev.type == DDPL_CUDA && !ddpl_cuda_backend && ddpl_cuda_init() < 0) return -1;
#endif
    const struct ddpl_backend *b = dev.type == DDPL_CPU    ? &ddpl_cpu_backend
                                   : dev.type == DDPL_CUDA ? ddpl_cuda_backend
                                                           : NULL;
    char buf[32];
    if (!b)
        return ddpl_error("%s: device %s is not available in this build or on this machine",
                          op_names[op], ddpl_device_str(dev, buf, sizeof buf));
    ddpl_kernel k = b->kernels[op];
    if (!k)
        return ddpl_error("%s: not supported on device %s", op_names[op],
                          ddpl_device_str(dev, buf, sizeof buf));
#if DDPL_HAVE_CUDA
    /* CUDA kernels run on the calling thread's current device: make it the operands' device for
     * the call (PyTorch's device guard), so tensors on cuda:1 work while cuda:0 is current */
    int previous = -1;
    if (dev.type == DDPL_CUDA) {
        int current = ddpl_cuda_current_device();
        if (current < 0) return -1;
        if (current != dev.index) {
            if (ddpl_cuda_set_device(dev.index) < 0) return -1;
            previous = current;
        }
    }
    int rc = k(out, in, params);
    if (previous >= 0) ddpl_cuda_set_device(previous);
    return rc;
#else
    return k(out, in, params);
#endif
}
