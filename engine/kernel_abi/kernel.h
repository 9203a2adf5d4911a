/* kernel_abi/kernel.h: what a backend implements against: the op enum (ops.def), the kernel
 * signature, and the table each device type fills. The registry that holds the tables and runs
 * kernels is ops' (ops/dispatch.h).
 * defines: ddpl_op, ddpl_kernel, ddpl_memory_stats, struct ddpl_backend, ddpl_cpu_backend,
 *          ddpl_cuda_backend.
 *
 * The kernel ABI is a layer of its own (docs/internals/architecture.md, Layers), below the kernels
 * and ops alike: the kernels (engine/cpu, engine/cuda) are written against it and ops calls them
 * through it, so neither reaches the other's headers. Types, tables and inline helpers only.
 *
 * A kernel receives outputs already allocated with their final shapes and inputs already
 * validated (shapes, dtypes, same device); it only computes. It returns 0, or -1 with an error
 * set for conditions only the device can see (an index out of range, a CUDA failure).
 *
 * A backend is one table (ggml's backend interface): kernels indexed by op, the memory provider
 * core allocates its storages with, and the device hooks dispatch and ddpl/cuda.h need. */
#ifndef DDPL_KERNEL_ABI_KERNEL_H
#define DDPL_KERNEL_ABI_KERNEL_H

#include "core/alloc.h"
#include "core/core.h"
#include "ddpl/types.h"

typedef enum ddpl_op {
#define DDPL_OP(name, str) DDPL_OP_##name,
#include "kernel_abi/ops.def"
#undef DDPL_OP
    DDPL_OP_COUNT
} ddpl_op;

typedef int (*ddpl_kernel)(ddpl_tensor **out, ddpl_tensor **in, const void *params);

/* Bytes a backend's allocator holds on one device (PyTorch's torch.cuda memory statistics). */
typedef struct ddpl_memory_stats {
    int64_t allocated, peak_allocated; /* what live tensors hold */
    int64_t reserved, peak_reserved;   /* held from the driver: allocated plus cached */
} ddpl_memory_stats;

struct ddpl_backend {
    const char *name;
    ddpl_kernel kernels[DDPL_OP_COUNT]; /* NULL: "not supported on <device>" */
    /* The memory provider of the device type, registered with core when the backend starts. */
    const ddpl_allocator *allocator;
    /* Runs once, on the first use of the type's devices, under the registry's lock (NULL: ready
     * from the start); fills what the table needs filled. 0, or -1 with an error. */
    int (*start)(void);
    /* Devices with numbers and a per-thread current device (CUDA) fill the rest; the CPU leaves
     * them NULL. Each returning int gives 0 (or its value), or -1 with an error. */
    int (*device_count)(void); /* usable devices; 0 without a driver or device */
    int (*current_device)(void);
    int (*set_device)(int index); /* the calling thread's device; kernels run on it */
    int (*synchronize)(void);     /* waits for the current device's queued work */
    /* These three run only on a started backend. device -1 is the current device. */
    void (*empty_cache)(void);
    void (*memory_stats)(int device, ddpl_memory_stats *out); /* left as it is if unknown */
    void (*reset_peak_memory_stats)(int device);
    void (*versions)(ddpl_cuda_version_info *out); /* runtime and libraries; left 0 if absent */
    /* Whether products (matmul, the recurrences' GEMMs) in dtype dt run on the device's own
     * units (NULL: every floating dtype does). false: the backend widens the operands to
     * float32, so a caller free to choose (autocast's LSTM/GRU layers) computes in float32. */
    bool (*gemm_native)(ddpl_dtype dt);
    /* Page-locks host memory for fast, asynchronous copies to the devices, and undoes it. */
    int (*host_register)(void *ptr, size_t nbytes);
    void (*host_unregister)(void *ptr);
};

extern const struct ddpl_backend ddpl_cpu_backend; /* cpu/cpu_backend.c */
extern struct ddpl_backend ddpl_cuda_backend;      /* cuda/cuda_backend.c, in CUDA builds */

#endif
