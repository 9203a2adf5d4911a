/* cuda/cuda_alloc.h: the caching allocator for device memory (plain C; the raw CUDA calls come
 * in through a table of function pointers, so tests run its logic on the CPU with fakes).
 * defines: cuda_alloc_raw, cuda_alloc_stats, cuda_alloc_setup, cuda_alloc_malloc,
 *          cuda_alloc_free, cuda_alloc_record_stream, cuda_tensor_record_stream,
 *          cuda_alloc_empty_cache,
 *          cuda_alloc_get_stats, cuda_alloc_reset_peak.
 *
 * Sizes: requests are rounded up to 512 B. Requests up to 1 MiB are carved out of 2 MiB
 * segments (the small pool); larger ones out of 20 MiB segments when under 10 MiB, else out of a
 * segment of their own rounded up to 2 MiB (the large pool), as PyTorch's CUDACachingAllocator.
 * A free block is split when the rest is at least 512 B (small pool) or over 1 MiB (large pool),
 * and merged with its free neighbours when freed. Blocks are reused only by the stream they were
 * allocated on; a block that another stream used (cuda_alloc_record_stream) goes back to the
 * pool only once events recorded on those streams at free time have completed. */
#ifndef DDPL_CUDA_ALLOC_H
#define DDPL_CUDA_ALLOC_H

#include <stddef.h>
#include <stdint.h>

enum { CUDA_ALLOC_MAX_DEVICES = 64 };

/* The raw device calls. `stream` and `event` are cudaStream_t / cudaEvent_t as void *. */
typedef struct cuda_alloc_raw {
    /* 0; 1 when the device is out of memory (no error set); -1 with ddpl_error set otherwise */
    int (*malloc)(void **ptr, size_t nbytes, int device);
    void (*free)(void *ptr, int device);
    void *(*event_create)(int device); /* NULL with ddpl_error set */
    void (*event_destroy)(void *event, int device);
    int (*event_record)(void *event, void *stream, int device); /* 0 or -1 with error */
    int (*event_query)(void *event, int device);       /* 1 completed, 0 pending, -1 error */
    int (*event_synchronize)(void *event, int device); /* waits; 0 or -1 with error */
    int (*mem_info)(int device, size_t *free_bytes, size_t *total_bytes);
} cuda_alloc_raw;

/* Bytes per device. allocated/reserved count rounded block/segment sizes (as PyTorch's
 * memory_allocated/memory_reserved); requested counts the bytes asked for. */
typedef struct cuda_alloc_stats {
    int64_t allocated, peak_allocated;
    int64_t reserved, peak_reserved; /* held from the driver (segments), in use or cached */
    int64_t requested;
    int64_t segments;    /* segments held now */
    int64_t raw_mallocs; /* raw malloc calls that succeeded, since start-up */
    int64_t raw_frees;   /* segments given back, since start-up */
    int64_t oom_retries; /* raw malloc failures answered by emptying the cache */
} cuda_alloc_stats;

/* Installs the raw calls (copied); call once before any allocation. */
void cuda_alloc_setup(const cuda_alloc_raw *raw);

/* nbytes (0 allowed) on device for use on stream; NULL with ddpl_error set. On a raw failure the
 * cache is emptied and the allocation retried, then ddpl_run_oom_hook (a full Lua GC) runs and
 * it is retried once more before the "CUDA out of memory on cuda:N: ..." error. */
void *cuda_alloc_malloc(size_t nbytes, int device, void *stream);
/* Returns ptr (from cuda_alloc_malloc) to the cache; NULL is ignored. */
void cuda_alloc_free(void *ptr);
/* Marks ptr's block as used by stream too (e.g. a NCCL communication stream), so that after
 * cuda_alloc_free it is reused only once the work queued on stream at free time is done. -1 with
 * an error when ptr is not an allocated block. */
int cuda_alloc_record_stream(void *ptr, void *stream);
/* As cuda_alloc_record_stream for the block under t's storage (t may be any view of it). */
int cuda_tensor_record_stream(const struct ddpl_tensor *t, void *stream);
/* Gives every fully free cached segment of every device back to the driver. */
void cuda_alloc_empty_cache(void);
/* Statistics of device; -1 with an error for an invalid device. */
int cuda_alloc_get_stats(int device, cuda_alloc_stats *out);
/* Sets the peaks to the current values. */
void cuda_alloc_reset_peak(int device);

#endif
