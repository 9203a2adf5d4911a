/* core/alloc.c: host memory and the registry of device memory providers.
 * defines: ddpl_register_allocator, ddpl_device_alloc/free/copy, ddpl_memory_allocated. */
#include "alloc.h"

/* Bytes of storage alive per device type; read by the Lua binding to pace the GC and by tests. */
static atomic_llong bytes_allocated[DDPL_DEVICE_TYPE_COUNT];

/* 64-byte alignment: a cache line, and the widest vector load (AVX-512) never splits one. */
static void *cpu_alloc(size_t nbytes, ddpl_device dev)
{
    DDPL_UNUSED(dev);
    size_t rounded = (nbytes + 63) & ~(size_t)63;
    void *p = aligned_alloc(64, rounded ? rounded : 64);
    if (!p) ddpl_error("out of memory: cannot allocate %zu bytes on cpu", nbytes);
    return p;
}

static void cpu_free(void *p, size_t nbytes, ddpl_device dev)
{
    DDPL_UNUSED(nbytes);
    DDPL_UNUSED(dev);
    free(p);
}

static int cpu_copy(void *dst, ddpl_device dd, const void *src, ddpl_device sd, size_t n)
{
    DDPL_UNUSED(dd);
    DDPL_UNUSED(sd);
    memcpy(dst, src, n);
    return 0;
}

static const ddpl_allocator cpu_allocator = {cpu_alloc, cpu_free, cpu_copy};
static const ddpl_allocator *allocators[DDPL_DEVICE_TYPE_COUNT] = {[DDPL_CPU] = &cpu_allocator};

void ddpl_register_allocator(ddpl_device_type type, const ddpl_allocator *a)
{
    allocators[type] = a;
}

const ddpl_allocator *ddpl_allocator_for(ddpl_device dev)
{
    const ddpl_allocator *a =
        (unsigned)dev.type < DDPL_DEVICE_TYPE_COUNT ? allocators[dev.type] : NULL;
    if (!a) {
        char buf[32];
        ddpl_error("device %s is not available in this build or on this machine",
                   ddpl_device_str(dev, buf, sizeof buf));
    }
    return a;
}

void *ddpl_device_alloc(size_t nbytes, ddpl_device dev)
{
    const ddpl_allocator *a = ddpl_allocator_for(dev);
    if (!a) return NULL;
    void *p = a->alloc(nbytes, dev);
    if (p) atomic_fetch_add(&bytes_allocated[dev.type], (long long)nbytes);
    return p;
}

void ddpl_device_free(void *p, size_t nbytes, ddpl_device dev)
{
    if (!p) return;
    allocators[dev.type]->free(p, nbytes, dev);
    atomic_fetch_sub(&bytes_allocated[dev.type], (long long)nbytes);
}

int ddpl_device_copy(void *dst, ddpl_device dst_dev, const void *src, ddpl_device src_dev,
                     size_t nbytes)
{
    if (nbytes == 0) return 0;
    /* the non-CPU side's provider knows how to move bytes to and from the host */
    ddpl_device via = dst_dev.type != DDPL_CPU ? dst_dev : src_dev;
    const ddpl_allocator *a = ddpl_allocator_for(via);
    if (!a) return -1;
    return a->copy(dst, dst_dev, src, src_dev, nbytes);
}

int64_t ddpl_memory_allocated(ddpl_device_type type)
{
    return (unsigned)type < DDPL_DEVICE_TYPE_COUNT ? atomic_load(&bytes_allocated[type]) : 0;
}
