/* cuda/cuda_alloc.c: the caching allocator for device memory (size classes, per-device pools,
 * stream-aware reuse, out-of-memory retries); the scheme is described in cuda_alloc.h.
 * defines: cuda_alloc_setup, cuda_alloc_malloc, cuda_alloc_free, cuda_alloc_record_stream,
 *          cuda_alloc_empty_cache, cuda_alloc_get_stats, cuda_alloc_reset_peak.
 *
 * Plain C with no CUDA header: the raw calls come from cuda_alloc_raw (cuda_runtime.cu in the
 * engine, fakes in spec/c/test_cuda_alloc.c). One mutex guards everything: the Lua thread, the
 * DDP reducer and the process-group threads all allocate, and allocations are rare in steady
 * state (the cache answers them), so contention does not matter. */
#include <pthread.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "core/alloc.h"
#include "cuda_alloc.h"

#define ROUND         ((size_t)512)      /* every size is a multiple of this */
#define SMALL_SIZE    ((size_t)1 << 20)  /* requests up to this go to the small pool */
#define SMALL_SEGMENT ((size_t)2 << 20)  /* segment size of the small pool */
#define MIN_LARGE     ((size_t)10 << 20) /* large requests under this share a LARGE_SEGMENT */
#define LARGE_SEGMENT ((size_t)20 << 20)
#define LARGE_ROUND   ((size_t)2 << 20) /* larger requests get their own segment, this rounded */
#define HASH_BITS     14
#define EVENT_CACHE   64

typedef enum { BLOCK_FREE, BLOCK_ALLOCATED, BLOCK_PENDING } block_state;

/* A stream other than the block's own that used it, and the event recorded on it at free. */
typedef struct stream_use {
    void *stream;
    void *event;
} stream_use;

typedef struct block block;
struct block {
    char *ptr;
    size_t size;      /* bytes, a multiple of ROUND */
    size_t requested; /* bytes asked for while allocated */
    int device;
    bool small; /* which pool */
    block_state state;
    void *stream;         /* the stream it was allocated for; the whole segment shares it */
    block *prev, *next;   /* address-order neighbours in the segment (NULL at its ends) */
    block *fprev, *fnext; /* free list of its pool (ascending size) or the pending list */
    block *hnext;         /* hash chain, while allocated */
    stream_use *uses;
    int n_uses, cap_uses;
};

typedef struct device_state {
    block *small, *large; /* free blocks, ascending size then address */
    block *pending;       /* freed blocks waiting for events on other streams */
    void *events[EVENT_CACHE];
    int n_events;
    cuda_alloc_stats stats;
} device_state;

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static cuda_alloc_raw raw;
static device_state devices[CUDA_ALLOC_MAX_DEVICES];
static block *table[1 << HASH_BITS]; /* allocated blocks by ptr */

void cuda_alloc_setup(const cuda_alloc_raw *r)
{
    pthread_mutex_lock(&lock);
    raw = *r;
    pthread_mutex_unlock(&lock);
}

/* ---- sizes ---- */

static size_t round_up(size_t n, size_t to)
{
    return (n + to - 1) / to * to;
}

static size_t round_size(size_t n)
{
    return n < ROUND ? ROUND : round_up(n, ROUND);
}

static size_t segment_size(size_t size)
{
    if (size <= SMALL_SIZE) return SMALL_SEGMENT;
    if (size < MIN_LARGE) return LARGE_SEGMENT;
    return round_up(size, LARGE_ROUND);
}

static double mib(double bytes)
{
    return bytes / (1024.0 * 1024.0);
}

/* ---- the hash of allocated blocks ---- */

static size_t hash_of(const void *p)
{
    return (size_t)((((uint64_t)(uintptr_t)p >> 9) * 0x9E3779B97F4A7C15ull) >> (64 - HASH_BITS));
}

static void hash_insert(block *b)
{
    size_t h = hash_of(b->ptr);
    b->hnext = table[h];
    table[h] = b;
}

static block *hash_find(const void *p)
{
    for (block *b = table[hash_of(p)]; b; b = b->hnext)
        if (b->ptr == p) return b;
    return NULL;
}

static block *hash_remove(const void *p)
{
    for (block **bp = &table[hash_of(p)]; *bp; bp = &(*bp)->hnext) {
        if ((*bp)->ptr != p) continue;
        block *b = *bp;
        *bp = b->hnext;
        b->hnext = NULL;
        return b;
    }
    return NULL;
}

/* ---- free lists ---- */

static block **pool_of(device_state *d, const block *b)
{
    return b->small ? &d->small : &d->large;
}

static void list_remove(block **head, block *b)
{
    if (b->fprev)
        b->fprev->fnext = b->fnext;
    else
        *head = b->fnext;
    if (b->fnext) b->fnext->fprev = b->fprev;
    b->fprev = b->fnext = NULL;
}

static void list_push(block **head, block *b)
{
    b->fprev = NULL;
    b->fnext = *head;
    if (*head) (*head)->fprev = b;
    *head = b;
}

/* Keeps the list sorted by (size, address), so the first fit is the best fit. */
static void pool_insert(device_state *d, block *b)
{
    block **head = pool_of(d, b);
    block *prev = NULL, *cur = *head;
    while (cur && (cur->size < b->size || (cur->size == b->size && cur->ptr < b->ptr))) {
        prev = cur;
        cur = cur->fnext;
    }
    b->fprev = prev;
    b->fnext = cur;
    if (prev)
        prev->fnext = b;
    else
        *head = b;
    if (cur) cur->fprev = b;
    b->state = BLOCK_FREE;
}

/* The smallest free block of the pool for size on stream, unlinked; NULL if none. */
static block *take_free(device_state *d, size_t size, void *stream)
{
    block **head = size <= SMALL_SIZE ? &d->small : &d->large;
    for (block *b = *head; b; b = b->fnext) {
        if (b->size < size || b->stream != stream) continue;
        list_remove(head, b);
        return b;
    }
    return NULL;
}

/* b (no longer used) joins its free neighbours and its pool. */
static void free_block(device_state *d, block *b)
{
    block **head = pool_of(d, b);
    block *p = b->prev;
    if (p && p->state == BLOCK_FREE) {
        list_remove(head, p);
        p->size += b->size;
        p->next = b->next;
        if (b->next) b->next->prev = p;
        free(b->uses);
        free(b);
        b = p;
    }
    block *n = b->next;
    if (n && n->state == BLOCK_FREE) {
        list_remove(head, n);
        b->size += n->size;
        b->next = n->next;
        if (n->next) n->next->prev = b;
        free(n->uses);
        free(n);
    }
    b->requested = 0;
    pool_insert(d, b);
}

/* ---- events of blocks used by other streams ---- */

static void *get_event(device_state *d, int device)
{
    return d->n_events > 0 ? d->events[--d->n_events] : raw.event_create(device);
}

static void put_event(device_state *d, int device, void *ev)
{
    if (d->n_events < EVENT_CACHE)
        d->events[d->n_events++] = ev;
    else
        raw.event_destroy(ev, device);
}

/* Moves pending blocks whose events have all completed (or failed: the device is then broken
 * and waiting longer cannot help) back to their pools; with wait, waits for the events first. */
static void process_events(device_state *d, int device, bool wait)
{
    block *b = d->pending;
    while (b) {
        block *next = b->fnext;
        int left = 0;
        for (int i = 0; i < b->n_uses; i++) {
            void *ev = b->uses[i].event;
            if (!ev) continue;
            int done = wait ? (raw.event_synchronize(ev, device), 1) : raw.event_query(ev, device);
            if (done == 0) {
                left++;
                continue;
            }
            put_event(d, device, ev);
            b->uses[i].event = NULL;
        }
        if (left == 0) {
            list_remove(&d->pending, b);
            b->n_uses = 0;
            free_block(d, b);
        }
        b = next;
    }
}

/* Gives every fully free segment of the device back (after waiting for pending blocks);
 * returns how many. */
static int release_cached(device_state *d, int device)
{
    int released = 0;
    process_events(d, device, true);
    block **heads[2] = {&d->small, &d->large};
    for (int k = 0; k < 2; k++) {
        block *b = *heads[k];
        while (b) {
            block *next = b->fnext;
            if (!b->prev && !b->next) { /* the whole segment */
                list_remove(heads[k], b);
                raw.free(b->ptr, device);
                d->stats.reserved -= (int64_t)b->size;
                d->stats.segments--;
                d->stats.raw_frees++;
                free(b->uses);
                free(b);
                released++;
            }
            b = next;
        }
    }
    return released;
}

/* ---- allocation ---- */

static void oom_error(device_state *d, int device, size_t nbytes)
{
    size_t free_b = 0, total_b = 0;
    if (raw.mem_info(device, &free_b, &total_b) < 0) free_b = total_b = 0;
    ddpl_error("CUDA out of memory on cuda:%d: tried to allocate %.2f MiB (%.2f MiB allocated by "
               "tensors, %.2f MiB cached, %.2f MiB free of %.2f MiB total)",
               device, mib((double)nbytes), mib((double)d->stats.allocated),
               mib((double)(d->stats.reserved - d->stats.allocated)), mib((double)free_b),
               mib((double)total_b));
}

/* A new segment holding at least size bytes for stream, or a cached block that the OOM hook
 * freed meanwhile; NULL with an error. Called and returns with the lock held, but drops it
 * while the hook runs (the hook frees tensors, which takes the lock). */
static block *grow(device_state *d, int device, size_t size, void *stream, size_t nbytes)
{
    size_t seg = segment_size(size);
    void *p = NULL;
    int rc = raw.malloc(&p, seg, device);
    if (rc == 1 && release_cached(d, device) > 0) { /* give the cached segments back, retry */
        d->stats.oom_retries++;
        rc = raw.malloc(&p, seg, device);
    }
    if (rc == 1) { /* then let the Lua GC free unreferenced tensors, and try once more */
        pthread_mutex_unlock(&lock);
        bool ran = ddpl_run_oom_hook();
        pthread_mutex_lock(&lock);
        if (ran) {
            process_events(d, device, false);
            block *b = take_free(d, size, stream);
            if (b) return b;
            release_cached(d, device);
            rc = raw.malloc(&p, seg, device);
        }
    }
    if (rc == 1) {
        oom_error(d, device, nbytes);
        return NULL;
    }
    if (rc < 0) return NULL;
    block *b = calloc(1, sizeof *b);
    if (!b) {
        raw.free(p, device);
        ddpl_error("cuda alloc: out of host memory for the allocator's bookkeeping");
        return NULL;
    }
    b->ptr = p;
    b->size = seg;
    b->device = device;
    b->small = size <= SMALL_SIZE;
    b->stream = stream;
    b->state = BLOCK_FREE;
    d->stats.reserved += (int64_t)seg;
    if (d->stats.reserved > d->stats.peak_reserved) d->stats.peak_reserved = d->stats.reserved;
    d->stats.segments++;
    d->stats.raw_mallocs++;
    return b;
}

/* Cuts b down to size when the rest is worth keeping; the rest goes to the pool. */
static void split(device_state *d, block *b, size_t size)
{
    size_t rest = b->size - size;
    if (b->small ? rest < ROUND : rest <= SMALL_SIZE) return;
    block *r = calloc(1, sizeof *r);
    if (!r) return; /* keep the block whole: wasteful, not wrong */
    r->ptr = b->ptr + size;
    r->size = rest;
    r->device = b->device;
    r->small = b->small;
    r->stream = b->stream;
    r->prev = b;
    r->next = b->next;
    if (b->next) b->next->prev = r;
    b->next = r;
    b->size = size;
    pool_insert(d, r);
}

void *cuda_alloc_malloc(size_t nbytes, int device, void *stream)
{
    if (device < 0 || device >= CUDA_ALLOC_MAX_DEVICES) {
        ddpl_error("cuda alloc: invalid device %d", device);
        return NULL;
    }
    if (nbytes > SIZE_MAX / 2) {
        ddpl_error("CUDA out of memory on cuda:%d: tried to allocate %zu bytes", device, nbytes);
        return NULL;
    }
    size_t size = round_size(nbytes);
    pthread_mutex_lock(&lock);
    if (!raw.malloc) {
        pthread_mutex_unlock(&lock);
        ddpl_error("cuda alloc: the allocator is not set up");
        return NULL;
    }
    device_state *d = &devices[device];
    if (d->pending) process_events(d, device, false);
    block *b = take_free(d, size, stream);
    if (!b) b = grow(d, device, size, stream, nbytes);
    if (!b) {
        pthread_mutex_unlock(&lock);
        return NULL;
    }
    split(d, b, size);
    b->state = BLOCK_ALLOCATED;
    b->requested = nbytes;
    hash_insert(b);
    d->stats.allocated += (int64_t)b->size;
    d->stats.requested += (int64_t)nbytes;
    if (d->stats.allocated > d->stats.peak_allocated) d->stats.peak_allocated = d->stats.allocated;
    void *p = b->ptr;
    pthread_mutex_unlock(&lock);
    return p;
}

void cuda_alloc_free(void *ptr)
{
    if (!ptr) return;
    pthread_mutex_lock(&lock);
    block *b = hash_remove(ptr);
    if (!b) { /* not ours: nothing sensible to do in a void function */
        pthread_mutex_unlock(&lock);
        return;
    }
    device_state *d = &devices[b->device];
    d->stats.allocated -= (int64_t)b->size;
    d->stats.requested -= (int64_t)b->requested;
    int waiting = 0;
    for (int i = 0; i < b->n_uses; i++) {
        void *ev = get_event(d, b->device);
        if (ev && raw.event_record(ev, b->uses[i].stream, b->device) < 0) {
            put_event(d, b->device, ev);
            ev = NULL;
        }
        /* no event (creating or recording one failed: the device is failing anyway): the
         * block is reused at once rather than leaked */
        b->uses[i].event = ev;
        waiting += ev != NULL;
    }
    if (waiting > 0) {
        b->state = BLOCK_PENDING;
        list_push(&d->pending, b);
    } else {
        b->n_uses = 0;
        free_block(d, b);
    }
    pthread_mutex_unlock(&lock);
}

int cuda_alloc_record_stream(void *ptr, void *stream)
{
    pthread_mutex_lock(&lock);
    block *b = ptr ? hash_find(ptr) : NULL;
    if (!b) {
        pthread_mutex_unlock(&lock);
        return ddpl_error("cuda record_stream: %p is not a block of the CUDA caching allocator",
                          ptr);
    }
    int rc = 0;
    bool known = stream == b->stream;
    for (int i = 0; i < b->n_uses && !known; i++) known = b->uses[i].stream == stream;
    if (!known) {
        if (b->n_uses == b->cap_uses) {
            int cap = b->cap_uses ? 2 * b->cap_uses : 2;
            stream_use *u = realloc(b->uses, (size_t)cap * sizeof *u);
            if (!u) {
                rc = ddpl_error("cuda record_stream: out of host memory");
                goto done;
            }
            b->uses = u;
            b->cap_uses = cap;
        }
        b->uses[b->n_uses++] = (stream_use){stream, NULL};
    }
done:
    pthread_mutex_unlock(&lock);
    return rc;
}

void cuda_alloc_empty_cache(void)
{
    pthread_mutex_lock(&lock);
    if (raw.malloc)
        for (int dev = 0; dev < CUDA_ALLOC_MAX_DEVICES; dev++) {
            device_state *d = &devices[dev];
            if (d->stats.reserved > 0 || d->pending) release_cached(d, dev);
            while (d->n_events > 0) raw.event_destroy(d->events[--d->n_events], dev);
        }
    pthread_mutex_unlock(&lock);
}

int cuda_alloc_get_stats(int device, cuda_alloc_stats *out)
{
    if (device < 0 || device >= CUDA_ALLOC_MAX_DEVICES)
        return ddpl_error("cuda memory stats: invalid device %d", device);
    pthread_mutex_lock(&lock);
    *out = devices[device].stats;
    pthread_mutex_unlock(&lock);
    return 0;
}

void cuda_alloc_reset_peak(int device)
{
    if (device < 0 || device >= CUDA_ALLOC_MAX_DEVICES) return;
    pthread_mutex_lock(&lock);
    cuda_alloc_stats *s = &devices[device].stats;
    s->peak_allocated = s->allocated;
    s->peak_reserved = s->reserved;
    pthread_mutex_unlock(&lock);
}
