/* core/alloc.h: per-device-type memory providers.
 * defines: ddpl_allocator, ddpl_register_allocator, ddpl_device_alloc, ddpl_device_free.
 *
 * The CPU provider lives here (64-byte aligned host memory); the CUDA backend registers its
 * caching allocator at start-up. Core code never includes CUDA headers. */
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

void ddpl_register_allocator(ddpl_device_type type, const ddpl_allocator *a);
const ddpl_allocator *ddpl_allocator_for(ddpl_device dev); /* NULL with error if none */
void *ddpl_device_alloc(size_t nbytes, ddpl_device dev);
void ddpl_device_free(void *p, size_t nbytes, ddpl_device dev);
/* Copies raw bytes between any two devices (host included). */
int ddpl_device_copy(void *dst, ddpl_device dst_dev, const void *src, ddpl_device src_dev,
                     size_t nbytes);

#endif
