/* ddpl/cuda.h: CUDA device queries and memory statistics of the C API. All of these work in a
 * build without CUDA (no devices, nothing allocated).
 * defines: ddpl_cuda_is_available, ddpl_cuda_device_count, ddpl_cuda_synchronize,
 *          ddpl_cuda_set_device, ddpl_cuda_current_device, ddpl_cuda_empty_cache,
 *          ddpl_cuda_memory_allocated, ddpl_cuda_max_memory_allocated,
 *          ddpl_cuda_memory_reserved, ddpl_cuda_max_memory_reserved,
 *          ddpl_cuda_reset_peak_memory_stats, ddpl_cuda_host_register,
 *          ddpl_cuda_host_unregister, ddpl_cuda_versions. */
#ifndef DDPL_CUDA_H
#define DDPL_CUDA_H

#include "tensor.h"
#include "types.h"

#ifdef __cplusplus
extern "C" {
#endif

/* public: exported from libddplua.so, which is otherwise built with hidden visibility (the
 * ABI is what include/ddpl declares; spec/api/abi_spec.lua) */
#pragma GCC visibility push(default)

/* True when this build has the CUDA backend and at least one GPU is usable. */
bool ddpl_cuda_is_available(void);
int ddpl_cuda_device_count(void);
/* Waits for all work queued on the current device (its compute stream, then the device); -1
 * with an error on a CUDA failure. */
int ddpl_cuda_synchronize(void);
/* The device `cuda` (without an index) means, on the calling thread (as in PyTorch, each thread
 * has its own; new threads start on device 0); -1 with an error if absent. */
int ddpl_cuda_set_device(int index);
int ddpl_cuda_current_device(void); /* -1 with an error when CUDA is not available */
/* Returns cached, unused device memory to the driver. */
void ddpl_cuda_empty_cache(void);

/* Bytes on device (-1: the current device), as PyTorch's torch.cuda functions: allocated is
 * what live tensors hold (block sizes, rounded up to 512 B), reserved what the caching allocator
 * holds from the driver (allocated plus cached). 0 without CUDA or before the first use. */
int64_t ddpl_cuda_memory_allocated(int device);
int64_t ddpl_cuda_max_memory_allocated(int device);
int64_t ddpl_cuda_memory_reserved(int device);
int64_t ddpl_cuda_max_memory_reserved(int device);
/* Page-locks the host memory [ptr, ptr + nbytes) (cudaHostRegister), so copies from it to a GPU
 * are asynchronous: 1 when done, 0 without CUDA (nothing to do), -1 with an error. Undo it with
 * ddpl_cuda_host_unregister(ptr) before the memory is freed. */
int ddpl_cuda_host_register(void *ptr, size_t nbytes);
void ddpl_cuda_host_unregister(void *ptr);
/* Sets the peaks of device (-1: current) to the current values. */
void ddpl_cuda_reset_peak_memory_stats(int device);

/* Versions of what the CUDA backend runs on (ddpl_cuda_version_info, ddpl/types.h). */
void ddpl_cuda_versions(ddpl_cuda_version_info *v);

#pragma GCC visibility pop

#ifdef __cplusplus
}
#endif
#endif
