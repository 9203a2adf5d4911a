/* cuda/cuda_copy.h: when a host<->device copy may return, and the pinned staging of large
 * host-to-device copies (plain C; the raw CUDA calls come in through a table, so
 * spec/c/test_cuda_copy.c checks the contract on the CPU with a fake stream).
 * defines: cuda_copy_kind, cuda_copy_raw, cuda_copy_h2d_via, cuda_copy_d2h_via.
 *
 * The contract (cuda_device.h's cuda_copy_h2d / cuda_copy_d2h, which call these with the real
 * calls of cuda_host.cu): host-to-device returns once the source may be reused (the caller may
 * free or overwrite it at once); device-to-host returns once the destination holds the bytes.
 * How, by source:
 *   - pageable, under 1 MiB: one asynchronous copy; CUDA has copied the bytes into its own
 *     staging memory when the call returns, so the host does not wait for the DMA;
 *   - pageable, 1 MiB and more: through two 4 MiB pinned buffers per device, used alternately
 *     (while chunk k is in flight the CPU fills chunk k+1; an event per buffer says when it may be
 *     refilled), so the copy overlaps the host's packing and the host does not wait for the
 *     last DMA;
 *   - pinned (page-locked): the DMA reads the source itself, after the call returns, so the call
 *     waits for it: returning earlier would let the caller overwrite bytes not yet sent. */
#ifndef DDPL_CUDA_COPY_H
#define DDPL_CUDA_COPY_H

#include <stddef.h>

#include "cuda_launch.h"

typedef enum cuda_copy_kind { CUDA_H2D, CUDA_D2H } cuda_copy_kind;

/* The raw calls. `stream` and `event` are cudaStream_t / cudaEvent_t as void *. Each int call
 * returns 0, or -1 with ddpl_error set. */
typedef struct cuda_copy_raw {
    int (*copy_async)(void *dst, const void *src, size_t nbytes, cuda_copy_kind kind, void *stream);
    int (*stream_synchronize)(void *stream);
    int (*is_pinned)(const void *host); /* 1 page-locked, 0 pageable or unknown */
    void *(*host_alloc)(size_t nbytes); /* pinned memory; NULL when none (no error) */
    void (*host_free)(void *host);
    void *(*event_create)(void); /* NULL when none (no error) */
    void (*event_destroy)(void *event);
    int (*event_record)(void *event, void *stream);
    int (*event_synchronize)(void *event);
} cuda_copy_raw;

#ifdef __cplusplus
extern "C" {
#endif

enum { CUDA_COPY_MAX_DEVICES = 64 };
extern const size_t CUDA_COPY_STAGE_MIN;   /* pageable copies from this size are staged */
extern const size_t CUDA_COPY_STAGE_CHUNK; /* bytes per pinned staging buffer */

/* nbytes from host src to device memory dst of `device` on `stream` (its compute stream, with
 * the device current). 0, or -1 with an error naming "copy to cuda". */
int cuda_copy_h2d_via(const cuda_copy_raw *raw, void *dst, int device, const void *src,
                      size_t nbytes, void *stream);
/* nbytes from device memory src to host dst on `stream`; returns once dst holds them. */
int cuda_copy_d2h_via(const cuda_copy_raw *raw, void *dst, const void *src, size_t nbytes,
                      void *stream);

#ifdef __cplusplus
}
#endif
#endif
