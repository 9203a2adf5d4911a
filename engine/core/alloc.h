/* core/alloc.h: per-device-type memory providers.
 * defines: ddpl_allocator, ddpl_host_allocator, ddpl_register_allocator, ddpl_device_starter,
 *          ddpl_set_device_starter, ddpl_allocator_for, ddpl_device_alloc, ddpl_device_free,
 *          ddpl_memory_account, ddpl_device_copy, ddpl_set_oom_hook, ddpl_run_oom_hook,
 *          the host caching allocator (DDPL_HOST_LARGE_BLOCK, ddpl_host_cache_alloc/free,
 *          ddpl_host_empty_cache, ddpl_host_cache_stats, ddpl_host_cache_get_stats,
 *          ddpl_host_cache_reset_peak,
 *          ddpl_host_cache_class_size), ddpl_host_scratch_alloc/free.
 *
 * The host provider lives here (64-byte aligned host memory); every other device type's comes
 * from its backend, registered from above (ops/dispatch.c) when the backend starts. Core names
 * no device but the host, and calls nothing above it. */
#ifndef DDPL_ALLOC_H
#define DDPL_ALLOC_H

#include "core.h"

typedef struct ddpl_allocator {
    void *(*alloc)(size_t nbytes, ddpl_device dev); /* NULL with an error set on failure */
    void (*free)(void *ptr, size_t nbytes, ddpl_device dev);
    /* raw copies between host and this device, or within it; -1 with an error set */
    int (*copy)(void *dst, ddpl_device dst_dev, const void *src, ddpl_device src_dev,
                size_t nbytes);
} ddpl_allocator;

extern const ddpl_allocator ddpl_host_allocator; /* DDPL_CPU's, registered from the start */

/* a NULL unregisters (a backend being replaced) */
void ddpl_register_allocator(ddpl_device_type type, const ddpl_allocator *a);
/* Starts dev's backend, which registers its provider: 0, or -1 with an error (why the device
 * is not available). Installed by the layer that owns the backends (ops/dispatch.c), so a
 * device type is started on its first allocation without core knowing it. */
typedef int (*ddpl_device_starter)(ddpl_device dev);
void ddpl_set_device_starter(ddpl_device_starter starter);
/* dev's provider, starting its backend if needed; NULL with an error if there is none. */
const ddpl_allocator *ddpl_allocator_for(ddpl_device dev);
void *ddpl_device_alloc(size_t nbytes, ddpl_device dev);
void ddpl_device_free(void *p, size_t nbytes, ddpl_device dev);
/* Adds delta bytes to the device type's allocated tally (and its peak): device_alloc/free do it;
 * memory a storage holds outside the providers (the DDP reducer's shared-memory buckets) is
 * counted with it too, so memory_allocated and the Lua GC's pacing see it. */
void ddpl_memory_account(ddpl_device_type type, int64_t delta);
/* Copies raw bytes between any two devices (host included). */
int ddpl_device_copy(void *dst, ddpl_device dst_dev, const void *src, ddpl_device src_dev,
                     size_t nbytes);

/* Out-of-memory hook: a device allocator that cannot get memory runs it once (after emptying
 * its cache) and retries. The Lua binding registers a full garbage collection, which frees the
 * tensors no script references any more. The hook runs only on the thread that registered it
 * (a Lua state is not thread-safe); hook NULL unregisters. */
typedef void (*ddpl_oom_hook)(void *ud);
void ddpl_set_oom_hook(ddpl_oom_hook hook, void *ud);
/* Runs the hook if one is registered for this thread; true if it ran. */
bool ddpl_run_oom_hook(void);

/* ---- the host caching allocator (core/host_cache.c) ----
 * Host blocks of DDPL_HOST_LARGE_BLOCK bytes or more come from mappings kept in a cache by size
 * class (eight per power of two) and reused without page faults; smaller ones come from malloc,
 * whose heap keeps them mapped anyway. See docs/internals/allocators.md. */
#define DDPL_HOST_LARGE_BLOCK ((size_t)64 << 10)

/* A page-aligned block of nbytes >= DDPL_HOST_LARGE_BLOCK (NULL when the system has none, even
 * after the cache was given back and the out-of-memory hook ran); free it with the same nbytes. */
void *ddpl_host_cache_alloc(size_t nbytes);
void ddpl_host_cache_free(void *p, size_t nbytes);
/* Gives every cached (free) block back to the system; blocks in use are not touched. */
void ddpl_host_empty_cache(void);
/* The bytes a request of nbytes occupies (its class), 0 below DDPL_HOST_LARGE_BLOCK. */
size_t ddpl_host_cache_class_size(size_t nbytes);

typedef struct ddpl_host_cache_stats {
    int64_t reserved_bytes; /* large blocks mapped: in use + cached */
    int64_t peak_reserved_bytes;
    int64_t cached_bytes;        /* large blocks free in the cache, ready for reuse */
    int64_t blocks_mapped;       /* requests that mapped a new block (cache misses) */
    int64_t blocks_reused;       /* requests served from the cache (hits) */
    int64_t blocks_released;     /* blocks given back to the system */
    int64_t page_faults_avoided; /* 4 KiB pages of the reused requests */
    int64_t alloc_retries;       /* mappings refused by the system, retried after emptying */
    int64_t pressure_releases;   /* times the cache was emptied as memory ran low */
} ddpl_host_cache_stats;
void ddpl_host_cache_get_stats(ddpl_host_cache_stats *out);
/* The reserved peak starts again from the current reservation. */
void ddpl_host_cache_reset_peak(void);

/* Scratch host memory for kernels (packing buffers, workspaces): 64-byte aligned, from the
 * cache when large, not counted as tensor storage. NULL with an error set when out of memory;
 * free with the same nbytes. */
void *ddpl_host_scratch_alloc(size_t nbytes);
void ddpl_host_scratch_free(void *p, size_t nbytes);

#endif
