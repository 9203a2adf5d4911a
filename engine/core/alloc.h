/* core/alloc.h: per-device-type memory providers.
 * defines: ddpl_allocator, ddpl_host_allocator, ddpl_register_allocator, ddpl_device_starter,
 *          ddpl_set_device_starter, ddpl_allocator_for, ddpl_device_alloc, ddpl_device_free,
 *          ddpl_memory_account, ddpl_device_copy, ddpl_set_oom_hook, ddpl_run_oom_hook.
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

#endif
