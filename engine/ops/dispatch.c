/* ops/dispatch.c: the registry of backends (one per device type), their start-up, and running
 * a device's kernel.
 * defines: ddpl_backend_register, ddpl_backend_find, ddpl_backend_started, ddpl_backend_start,
 *          ddpl_backend_supports, ddpl_backend_gemm_native, ddpl_run_kernel, ddpl_op_name. */
#include <pthread.h>

#include "dispatch.h"
#include "ddpl/config.h"

/* The backends this build has, by device type: the one list of them (as ggml's backend
 * registry constructor), so adding a backend is a table and a line here, never a branch. */
static const struct ddpl_backend *_Atomic registered[DDPL_DEVICE_TYPE_COUNT] = {
    [DDPL_CPU] = &ddpl_cpu_backend,
#if DDPL_HAVE_CUDA
    [DDPL_CUDA] = &ddpl_cuda_backend,
#endif
};
/* The started ones: what ddpl_run_kernel reads on every op, without a lock. Written once per
 * start under start_lock (release), read with acquire (a plain load on x86, ldar on ARM64). */
static const struct ddpl_backend *_Atomic started[DDPL_DEVICE_TYPE_COUNT];
static pthread_mutex_t start_lock = PTHREAD_MUTEX_INITIALIZER;

static const char *const op_names[DDPL_OP_COUNT] = {
#define DDPL_OP(name, str) [DDPL_OP_##name] = str,
#include "kernel_abi/ops.def"
#undef DDPL_OP
};

const char *ddpl_op_name(ddpl_op op)
{
    return (unsigned)op < DDPL_OP_COUNT ? op_names[op] : "?";
}

void ddpl_backend_register(ddpl_device_type type, const struct ddpl_backend *b)
{
    pthread_mutex_lock(&start_lock);
    atomic_store(&registered[type], b);
    atomic_store_explicit(&started[type], NULL, memory_order_release);
    ddpl_register_allocator(type, NULL); /* the new backend's comes with its start */
    pthread_mutex_unlock(&start_lock);
}

const struct ddpl_backend *ddpl_backend_find(ddpl_device_type type)
{
    return (unsigned)type < DDPL_DEVICE_TYPE_COUNT ? atomic_load(&registered[type]) : NULL;
}

const struct ddpl_backend *ddpl_backend_started(ddpl_device_type type)
{
    if ((unsigned)type >= DDPL_DEVICE_TYPE_COUNT) return NULL;
    return atomic_load_explicit(&started[type], memory_order_acquire);
}

/* Starts type's backend: 1 when it runs, 0 when none is registered (no error set), -1 when it
 * failed to start (error set). The first caller starts it under the lock; the others wait. */
static int start(ddpl_device_type type)
{
    if ((unsigned)type >= DDPL_DEVICE_TYPE_COUNT) return 0;
    if (ddpl_backend_started(type)) return 1;
    pthread_mutex_lock(&start_lock);
    const struct ddpl_backend *b = atomic_load(&registered[type]);
    int rc = b ? 1 : 0;
    if (b && !atomic_load_explicit(&started[type], memory_order_relaxed)) {
        if (b->start && b->start() < 0) {
            rc = -1;
        } else {
            if (b->allocator) ddpl_register_allocator(type, b->allocator);
            atomic_store_explicit(&started[type], b, memory_order_release);
        }
    }
    pthread_mutex_unlock(&start_lock);
    return rc;
}

static int not_available(const char *op, ddpl_device dev)
{
    char buf[32];
    return ddpl_error("%s%sdevice %s is not available in this build or on this machine",
                      op ? op : "", op ? ": " : "", ddpl_device_str(dev, buf, sizeof buf));
}

int ddpl_backend_start(ddpl_device dev)
{
    int rc = start((ddpl_device_type)dev.type);
    return rc > 0 ? 0 : rc < 0 ? -1 : not_available(NULL, dev);
}

/* Core allocates storages before any op runs, and cannot name ops: it reaches the start-up
 * through this hook, installed when the library is loaded. */
__attribute__((constructor)) static void install_device_starter(void)
{
    ddpl_set_device_starter(ddpl_backend_start);
}

bool ddpl_backend_supports(ddpl_device dev, ddpl_op op)
{
    if (start((ddpl_device_type)dev.type) <= 0) return false;
    return ddpl_backend_started((ddpl_device_type)dev.type)->kernels[op] != NULL;
}

bool ddpl_backend_gemm_native(ddpl_device dev, ddpl_dtype dt)
{
    if (start((ddpl_device_type)dev.type) <= 0) return false;
    const struct ddpl_backend *b = ddpl_backend_started((ddpl_device_type)dev.type);
    return !b->gemm_native || b->gemm_native(dt);
}

/* ---- running kernels ---- */

/* The helpers of ddpl_run_kernel stay out of line, so the CPU's path through it is a few loads,
 * tests and a tail call, with no registers to save. */
__attribute__((cold, noinline)) static int unsupported(ddpl_op op, ddpl_device dev)
{
    char buf[32];
    return ddpl_error("%s: not supported on device %s", op_names[op],
                      ddpl_device_str(dev, buf, sizeof buf));
}

/* The first op on a device type whose backend has not started. */
__attribute__((cold, noinline)) static int run_first(ddpl_op op, ddpl_device dev, ddpl_tensor **out,
                                                     ddpl_tensor **in, const void *params)
{
    int rc = start((ddpl_device_type)dev.type);
    if (rc == 0) return not_available(op_names[op], dev);
    return rc < 0 ? -1 : ddpl_run_kernel(op, dev, out, in, params);
}

/* A backend's kernels run on the calling thread's current device: make it the operands' device
 * for the call (PyTorch's device guard), so tensors on cuda:1 work while cuda:0 is current. */
__attribute__((noinline)) static int run_on_device(const struct ddpl_backend *b, ddpl_kernel k,
                                                   int index, ddpl_tensor **out, ddpl_tensor **in,
                                                   const void *params)
{
    int current = b->current_device();
    if (current < 0) return -1;
    if (current == index) return k(out, in, params);
    if (b->set_device(index) < 0) return -1;
    int rc = k(out, in, params);
    b->set_device(current);
    return rc;
}

/* Every op runs through here: a table index, a test for a backend not started yet, the kernel.
 * dev.type is trusted: dev is the device of tensors core has allocated. */
int ddpl_run_kernel(ddpl_op op, ddpl_device dev, ddpl_tensor **out, ddpl_tensor **in,
                    const void *params)
{
    const struct ddpl_backend *b = atomic_load_explicit(&started[dev.type], memory_order_acquire);
    if (!b) return run_first(op, dev, out, in, params);
    ddpl_kernel k = b->kernels[op];
    if (!k) return unsupported(op, dev);
    if (!b->set_device) return k(out, in, params);
    return run_on_device(b, k, dev.index, out, in, params);
}
