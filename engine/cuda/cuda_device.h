/* cuda/cuda_device.h: the C face of the runtime side of the backend beyond cuda_launch.h:
 * per-device compute streams, raw memory and events for the caching allocator, host<->device
 * copies, versions. Defined in cuda_runtime.cu and cuda_host.cu.
 * defines: cuda_stream_for, cuda_dev_*, cuda_copy_h2d, cuda_copy_d2h, cuda_copy_d2d.
 *
 * Every function taking a device makes it current for the call only and restores the calling
 * thread's device afterwards. Each returns 0, or -1 with ddpl_error set, unless said otherwise.
 * Streams and events are cudaStream_t / cudaEvent_t as void *. */
#ifndef DDPL_CUDA_DEVICE_H
#define DDPL_CUDA_DEVICE_H

#include <stddef.h>

#ifdef __cplusplus
extern "C" {
#endif

/* The compute stream of device (non-blocking, created on first use, thread-safe; it lives as
 * long as the process); NULL with an error. For the current device see cuda_current_stream. */
void *cuda_stream_for(int device);
/* the calling thread's CUDA device, or -1 with an error when CUDA cannot tell (never device 0
 * by default: another device's stream and handles would be used) */
int cuda_dev_current(void);
int cuda_dev_stream_synchronize(int device, const char *what); /* its compute stream */

/* raw calls of the caching allocator (cuda_alloc_raw) */
int cuda_dev_malloc(void **ptr, size_t nbytes, int device); /* 1: out of memory, no error */
void cuda_dev_free(void *ptr, int device);
/* Page-locks host memory [ptr, ptr + nbytes) for every device (cudaHostRegister, portable), so
 * copies from it run asynchronously; unregister undoes it (errors there are dropped). */
int cuda_dev_host_register(void *ptr, size_t nbytes);
void cuda_dev_host_unregister(void *ptr);
void *cuda_dev_event_create(int device); /* timing disabled */
void cuda_dev_event_destroy(void *event, int device);
int cuda_dev_event_record(void *event, void *stream, int device);
int cuda_dev_event_query(void *event, int device); /* 1 done, 0 pending, -1 error */
int cuda_dev_event_synchronize(void *event, int device);
int cuda_dev_mem_info(int device, size_t *free_bytes, size_t *total_bytes);

/* CUDA runtime and driver versions as 1000*major + 10*minor (0 when unknown). */
void cuda_dev_versions(int *runtime, int *driver);
/* cuDNN and NCCL versions as 10000*major + 100*minor + patch (0 when unknown). */
void cuda_dev_lib_versions(int *cudnn, int *nccl);

/* Copies on the compute streams (cuda_host.cu, under cuda_copy.h's contract). h2d returns once
 * src may be reused (large pageable data is staged through pinned buffers; from pinned memory
 * it waits for the DMA); d2h returns once dst holds the bytes; d2d between devices waits for
 * both streams. */
int cuda_copy_h2d(void *dst, int device, const void *src, size_t nbytes);
int cuda_copy_d2h(void *dst, const void *src, int device, size_t nbytes);
int cuda_copy_d2d(void *dst, int dst_device, const void *src, int src_device, size_t nbytes);

#ifdef __cplusplus
}
#endif
#endif
