/* core/alloc.c: host memory and the registry of device memory providers.
 * defines: ddpl_host_allocator, ddpl_register_allocator, ddpl_set_device_starter,
 *          ddpl_allocator_for, ddpl_device_alloc/free/copy, ddpl_memory_account,
 *          ddpl_memory_allocated, ddpl_memory_max_allocated, ddpl_memory_reset_peak,
 *          ddpl_host_scratch_alloc/free, ddpl_set_oom_hook, ddpl_run_oom_hook. */
#include <pthread.h>
#include <stdlib.h>

#include "alloc.h"

/* Bytes of storage alive per device type; read by the Lua binding to pace the GC and by tests. */
static atomic_llong bytes_allocated[DDPL_DEVICE_TYPE_COUNT];
static atomic_llong peak_allocated[DDPL_DEVICE_TYPE_COUNT];

/* 64-byte alignment: a cache line, and the widest vector load (AVX-512) never splits one.
 * Aligned by hand over malloc (the block's start is kept just below the aligned address), not
 * with aligned_alloc: glibc's memalign splits its chunks so that a loop allocating and freeing
 * megabyte tensors in GC order grows the heap without bound (1 GB RSS for 16 MB live), while
 * plain malloc reuses the freed blocks. */
static void *aligned_malloc(size_t nbytes)
{
    size_t extra = 64 + sizeof(void *);
    char *raw = nbytes <= SIZE_MAX - extra ? malloc(nbytes + extra) : NULL;
    if (!raw) return NULL;
    char *p = (char *)(((uintptr_t)raw + sizeof(void *) + 63) & ~(uintptr_t)63);
    ((void **)p)[-1] = raw;
    return p;
}

static void aligned_free(void *p)
{
    if (p) free(((void **)p)[-1]);
}

/* Host storage: small blocks from malloc (its heap keeps them mapped), large ones from the
 * caching allocator (core/host_cache.c), which keeps their pages mapped for the next request of
 * their size class instead of letting glibc unmap and re-fault them. */
static void *host_alloc(size_t nbytes)
{
    return nbytes < DDPL_HOST_LARGE_BLOCK ? aligned_malloc(nbytes) : ddpl_host_cache_alloc(nbytes);
}

static void host_free(void *p, size_t nbytes)
{
    if (nbytes < DDPL_HOST_LARGE_BLOCK)
        aligned_free(p);
    else
        ddpl_host_cache_free(p, nbytes);
}

static void *cpu_alloc(size_t nbytes, ddpl_device dev)
{
    DDPL_UNUSED(dev);
    void *p = host_alloc(nbytes);
    if (!p) ddpl_error("out of memory: cannot allocate %zu bytes on cpu", nbytes);
    return p;
}

static void cpu_free(void *p, size_t nbytes, ddpl_device dev)
{
    DDPL_UNUSED(dev);
    if (p) host_free(p, nbytes);
}

void *ddpl_host_scratch_alloc(size_t nbytes)
{
    return cpu_alloc(nbytes, ddpl_cpu());
}

void ddpl_host_scratch_free(void *p, size_t nbytes)
{
    if (p) host_free(p, nbytes);
}

static int cpu_copy(void *dst, ddpl_device dd, const void *src, ddpl_device sd, size_t n)
{
    DDPL_UNUSED(dd);
    DDPL_UNUSED(sd);
    memcpy(dst, src, n);
    return 0;
}

const ddpl_allocator ddpl_host_allocator = {cpu_alloc, cpu_free, cpu_copy};

/* Host memory is there from the start (storages over it exist before any backend registers);
 * the other types' providers are registered by their backends when those start. Written under
 * the starter's lock (release), read without one (acquire). */
static const ddpl_allocator *_Atomic allocators[DDPL_DEVICE_TYPE_COUNT] = {
    [DDPL_CPU] = &ddpl_host_allocator,
};
static ddpl_device_starter device_starter;

void ddpl_register_allocator(ddpl_device_type type, const ddpl_allocator *a)
{
    atomic_store_explicit(&allocators[type], a, memory_order_release);
}

void ddpl_set_device_starter(ddpl_device_starter starter)
{
    device_starter = starter;
}

static const ddpl_allocator *registered_for(ddpl_device dev)
{
    return (unsigned)dev.type < DDPL_DEVICE_TYPE_COUNT
               ? atomic_load_explicit(&allocators[dev.type], memory_order_acquire)
               : NULL;
}

const ddpl_allocator *ddpl_allocator_for(ddpl_device dev)
{
    const ddpl_allocator *a = registered_for(dev);
    if (a) return a;
    /* the type's backend registers its provider when it starts (the first use of its devices) */
    if (device_starter && (unsigned)dev.type < DDPL_DEVICE_TYPE_COUNT) {
        if (device_starter(dev) < 0) return NULL;
        if ((a = registered_for(dev))) return a;
    }
    char buf[32];
    ddpl_error("device %s is not available in this build or on this machine",
               ddpl_device_str(dev, buf, sizeof buf));
    return NULL;
}

/* DDPLUA_MEMORY_LIMIT_MB: a cap on this process's host tensor memory in MiB (0 or unset: none),
 * the allocator limit a per-rank memory budget is tested with (bench/fsdp, spec/ddp/fsdp_spec).
 * Read once, at the first host allocation. */
static long long host_limit_bytes(void)
{
    static atomic_llong limit = -1;
    long long v = atomic_load(&limit);
    if (v >= 0) return v;
    const char *s = getenv("DDPLUA_MEMORY_LIMIT_MB");
    char *end = NULL;
    long long mb = s ? strtoll(s, &end, 10) : 0;
    v = (s && end != s && *end == '\0' && mb > 0 && mb < (1LL << 40)) ? mb << 20 : 0;
    atomic_store(&limit, v);
    return v;
}

/* Whether nbytes more host memory stays within the limit (after one collection by the
 * out-of-memory hook); sets the error when not. */
static bool within_host_limit(size_t nbytes)
{
    long long limit = host_limit_bytes();
    if (limit == 0) return true;
    for (int attempt = 0; attempt < 2; attempt++) {
        if (atomic_load(&bytes_allocated[DDPL_CPU]) + (long long)nbytes <= limit) return true;
        if (attempt == 0 && !ddpl_run_oom_hook()) break;
    }
    ddpl_error("out of memory: %zu bytes more would pass the host memory limit of %lld MiB "
               "(DDPLUA_MEMORY_LIMIT_MB), with %lld bytes in use",
               nbytes, limit >> 20, (long long)atomic_load(&bytes_allocated[DDPL_CPU]));
    return false;
}

void *ddpl_device_alloc(size_t nbytes, ddpl_device dev)
{
    const ddpl_allocator *a = ddpl_allocator_for(dev);
    if (!a) return NULL;
    if (dev.type == DDPL_CPU && !within_host_limit(nbytes)) return NULL;
    void *p = a->alloc(nbytes, dev);
    if (p) ddpl_memory_account(dev.type, (int64_t)nbytes);
    return p;
}

void ddpl_device_free(void *p, size_t nbytes, ddpl_device dev)
{
    if (!p) return;
    registered_for(dev)->free(p, nbytes, dev);
    ddpl_memory_account(dev.type, -(int64_t)nbytes);
}

void ddpl_memory_account(ddpl_device_type type, int64_t delta)
{
    long long now = atomic_fetch_add(&bytes_allocated[type], (long long)delta) + (long long)delta;
    long long peak = atomic_load(&peak_allocated[type]);
    while (now > peak && !atomic_compare_exchange_weak(&peak_allocated[type], &peak, now))
        ;
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

int64_t ddpl_memory_max_allocated(ddpl_device_type type)
{
    return (unsigned)type < DDPL_DEVICE_TYPE_COUNT ? atomic_load(&peak_allocated[type]) : 0;
}

void ddpl_memory_reset_peak(ddpl_device_type type)
{
    if ((unsigned)type < DDPL_DEVICE_TYPE_COUNT)
        atomic_store(&peak_allocated[type], atomic_load(&bytes_allocated[type]));
}

/* ---- the out-of-memory hook ---- */

static pthread_mutex_t hook_lock = PTHREAD_MUTEX_INITIALIZER;
static ddpl_oom_hook oom_hook;
static void *oom_hook_ud;
static pthread_t oom_hook_thread;
static _Thread_local bool in_oom_hook; /* a hook that allocates must not recurse */

void ddpl_set_oom_hook(ddpl_oom_hook hook, void *ud)
{
    pthread_mutex_lock(&hook_lock);
    oom_hook = hook;
    oom_hook_ud = ud;
    oom_hook_thread = pthread_self();
    pthread_mutex_unlock(&hook_lock);
}

bool ddpl_run_oom_hook(void)
{
    pthread_mutex_lock(&hook_lock);
    ddpl_oom_hook hook = oom_hook;
    void *ud = oom_hook_ud;
    bool mine = hook && pthread_equal(oom_hook_thread, pthread_self());
    pthread_mutex_unlock(&hook_lock);
    if (!mine || in_oom_hook) return false;
    in_oom_hook = true;
    hook(ud);
    in_oom_hook = false;
    return true;
}
