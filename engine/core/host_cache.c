/* core/host_cache.c: the host caching allocator behind large host blocks.
 * defines: ddpl_host_cache_alloc, ddpl_host_cache_free, ddpl_host_empty_cache,
 *          ddpl_host_cache_get_stats, ddpl_host_cache_reset_peak, ddpl_host_cache_class_size.
 *
 * Why: a first touch of a fresh page costs a minor fault (~12 us on the 2-vCPU VM), and glibc
 * hands big blocks back to the kernel on free (its mmap threshold, its heap trim), so a training
 * step that allocates and frees the same activations and gradients every time re-faulted ~100 MiB
 * of pages per GPT step (issue 17). Here blocks of DDPL_HOST_LARGE_BLOCK bytes or more come from
 * mappings this file keeps: a freed block goes on the free list of its size class and the next
 * request of that class takes it back, pages already mapped and resident. Nothing is given back
 * to the system except by ddpl_host_empty_cache() or under memory pressure (a new mapping that
 * would leave the system less than an eighth of its memory, or one that fails: the cache is
 * emptied first), so steady-state training takes no page faults for its tensors.
 *
 * Size classes: eight per power of two (the request rounded up by at most 12.5%), each a
 * multiple of 4 KiB; a request takes a block of its own class only (blocks are not split, so a
 * block's size follows from the byte count the caller frees it with, and no header is needed).
 * Free lists are LIFO: the block freed last is the one most likely still in the caches.
 * One mutex guards everything; blocks are taken at tensor granularity (a few thousand per
 * training step), so it is never contended for long. After fork() the child keeps the cache
 * (copy-on-write pages) with the lock released (pthread_atfork).
 *
 * Under AddressSanitizer the blocks come from malloc instead of mmap (LeakSanitizer then still
 * sees a leaked tensor), a cached block is poisoned until it is handed out again, and the bytes
 * past a request up to its class size stay poisoned, so overflows and uses after free are
 * still reported. */
#include <errno.h>
#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#include "alloc.h"

#if defined(__has_feature)
#if __has_feature(address_sanitizer)
#define HOST_CACHE_ASAN 1
#endif
#endif
#if defined(__SANITIZE_ADDRESS__) && !defined(HOST_CACHE_ASAN)
#define HOST_CACHE_ASAN 1
#endif
#ifdef HOST_CACHE_ASAN
#include <sanitizer/asan_interface.h>
#define POISON(p, n)   ASAN_POISON_MEMORY_REGION(p, n)
#define UNPOISON(p, n) ASAN_UNPOISON_MEMORY_REGION(p, n)
#else
#define POISON(p, n)   ((void)(p), (void)(n))
#define UNPOISON(p, n) ((void)(p), (void)(n))
#endif

#define PAGE_BYTES           ((size_t)4096)
#define CLASSES_PER_DOUBLING 8
/* requests above 2^MAX_LOG2 bytes are refused before any rounding (no host has that memory) */
#define MAX_LOG2  56
#define MIN_LOG2  16 /* log2(DDPL_HOST_LARGE_BLOCK) */
#define N_CLASSES ((MAX_LOG2 - MIN_LOG2 + 1) * CLASSES_PER_DOUBLING)

/* A free block waiting on its class's list. Records live outside the blocks, so a stray write
 * into a freed tensor cannot corrupt the lists; spare records are kept for the next free. */
typedef struct cached_block {
    void *ptr;
    size_t size; /* its class's bytes */
    struct cached_block *next;
} cached_block;

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_once_t once = PTHREAD_ONCE_INIT;
static cached_block *free_lists[N_CLASSES]; /* by class index, LIFO */
static cached_block *spare_records;
static ddpl_host_cache_stats stats; /* under lock */

/* Class of a request of n bytes, DDPL_HOST_LARGE_BLOCK <= n <= 2^MAX_LOG2: with
 * 2^k < n <= 2^(k+1), the classes of that doubling are 2^k + i * 2^(k-3), i = 1..8. */
static int class_index(size_t n)
{
    int k = 63 - __builtin_clzll((unsigned long long)(n - 1)); /* 2^k <= n-1 < 2^(k+1) */
    size_t step = (size_t)1 << (k - 3);
    size_t i = (n - ((size_t)1 << k) + step - 1) / step; /* 1..8 */
    return (k - (MIN_LOG2 - 1)) * CLASSES_PER_DOUBLING + (int)i - 1;
}

static size_t class_bytes(int c)
{
    int k = c / CLASSES_PER_DOUBLING + (MIN_LOG2 - 1);
    size_t i = (size_t)(c % CLASSES_PER_DOUBLING) + 1;
    return ((size_t)1 << k) + i * ((size_t)1 << (k - 3));
}

size_t ddpl_host_cache_class_size(size_t nbytes)
{
    if (nbytes < DDPL_HOST_LARGE_BLOCK || nbytes > ((size_t)1 << MAX_LOG2)) return 0;
    return class_bytes(class_index(nbytes));
}

/* ---- where blocks come from ---- */

/* Blocks that span a transparent huge page (2 MiB on x86-64) are mapped at a huge-page boundary
 * and advised MADV_HUGEPAGE (Debian's kernels give huge pages on advice only: enabled=madvise):
 * a memory-bound op then streams through 2 MiB pages instead of 4 KiB ones, 512x fewer TLB
 * entries and first-touch faults. bench/ops on 16M float32, 1 thread: gelu 12.1 -> 15.1 GB/s,
 * a + b 18.3 -> 19.7, cumsum 1.13x, amax 1.08x. The tail past the last whole huge page stays in
 * 4 KiB pages; the advice is best effort (a kernel without THP ignores it).
 * DDPLUA_HOST_HUGEPAGES=0 turns it off. */
#define HUGE_PAGE_BYTES ((size_t)2 << 20)
static bool huge_pages = true; /* set once, in init_once */

#ifndef HOST_CACHE_ASAN
/* size bytes mapped at a HUGE_PAGE_BYTES boundary: a larger mapping, its ends given back. */
static void *map_huge_aligned(size_t size)
{
    size_t span = size + HUGE_PAGE_BYTES - PAGE_BYTES;
    if (span < size) return NULL; /* overflow: no host has that memory */
    char *raw = mmap(NULL, span, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (raw == MAP_FAILED) return NULL;
    char *p = (char *)(((uintptr_t)raw + HUGE_PAGE_BYTES - 1) & ~(uintptr_t)(HUGE_PAGE_BYTES - 1));
    size_t head = (size_t)(p - raw), tail = span - head - size; /* both multiples of 4 KiB */
    if (head) munmap(raw, head);
    if (tail) munmap(p + size, tail);
    (void)madvise(p, size, MADV_HUGEPAGE);
    return p;
}
#endif

static void *map_block(size_t size)
{
#ifdef HOST_CACHE_ASAN
    void *p = NULL;
    return posix_memalign(&p, PAGE_BYTES, size) == 0 ? p : NULL;
#else
    if (huge_pages && size >= HUGE_PAGE_BYTES) return map_huge_aligned(size);
    void *p = mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    return p == MAP_FAILED ? NULL : p;
#endif
}

static void unmap_block(void *p, size_t size)
{
#ifdef HOST_CACHE_ASAN
    UNPOISON(p, size); /* ASan's allocator reuses the bytes; it must not see our poison */
    free(p);
#else
    munmap(p, size);
#endif
}

/* Whether blocks spanning a huge page get the advice: yes unless DDPLUA_HOST_HUGEPAGES=0. */
static bool huge_pages_wanted(void)
{
    const char *v = getenv("DDPLUA_HOST_HUGEPAGES");
    return !(v && strcmp(v, "0") == 0);
}

/* ---- fork: the child gets the lock released and the cache as it was ---- */

static void before_fork(void)
{
    pthread_mutex_lock(&lock);
}

static void after_fork(void)
{
    pthread_mutex_unlock(&lock);
}

static void init_once(void)
{
    pthread_atfork(before_fork, after_fork, after_fork);
    huge_pages = huge_pages_wanted();
}

/* ---- the cache ---- */

/* Unlinks every cached block into one chain (the caller holds the lock and unmaps them after
 * releasing it: munmap of a big block takes a while). */
static cached_block *take_all_locked(void)
{
    cached_block *all = NULL;
    for (int c = 0; c < N_CLASSES; c++) {
        while (free_lists[c]) {
            cached_block *b = free_lists[c];
            free_lists[c] = b->next;
            stats.cached_bytes -= b->size;
            stats.reserved_bytes -= b->size;
            stats.blocks_released++;
            b->next = all;
            all = b;
        }
    }
    return all;
}

/* Unmaps a chain from take_all_locked and returns its records to the spares. */
static void release_chain(cached_block *all)
{
    cached_block *last = NULL;
    for (cached_block *b = all; b; b = b->next) {
        unmap_block(b->ptr, b->size);
        last = b;
    }
    if (!last) return;
    pthread_mutex_lock(&lock);
    last->next = spare_records;
    spare_records = all;
    pthread_mutex_unlock(&lock);
}

void ddpl_host_empty_cache(void)
{
    pthread_once(&once, init_once);
    pthread_mutex_lock(&lock);
    cached_block *all = take_all_locked();
    pthread_mutex_unlock(&lock);
    release_chain(all);
}

/* ---- memory pressure ---- */

/* The system's available and total memory in bytes (/proc/meminfo's MemAvailable, MemTotal);
 * false when unknown. A test compiling this file defines HOST_CACHE_MEMINFO to fake it. */
#ifndef HOST_CACHE_MEMINFO
#define HOST_CACHE_MEMINFO read_meminfo
static bool read_meminfo(uint64_t *available, uint64_t *total)
{
    FILE *f = fopen("/proc/meminfo", "r");
    if (!f) return false;
    char line[128];
    unsigned long long kb;
    int found = 0;
    while (found < 2 && fgets(line, sizeof line, f)) {
        if (sscanf(line, "MemAvailable: %llu kB", &kb) == 1) {
            *available = (uint64_t)kb << 10;
            found++;
        } else if (sscanf(line, "MemTotal: %llu kB", &kb) == 1) {
            *total = (uint64_t)kb << 10;
            found++;
        }
    }
    fclose(f);
    return found == 2;
}
#endif

/* Bytes mapped since the system's memory was last looked at; a look costs a file read (~20 us),
 * so it is taken per PRESSURE_CHECK_BYTES of new mappings, not per mapping. */
#define PRESSURE_CHECK_BYTES ((size_t)32 << 20)
static size_t mapped_since_check; /* under lock */

/* Whether mapping size more bytes should first give the cache back: the cache holds something
 * and the system would be left with less than an eighth of its memory available. Called with
 * the lock held. */
static bool under_pressure_locked(size_t size)
{
    if (stats.cached_bytes == 0) return false;
    mapped_since_check += size;
    if (mapped_since_check < PRESSURE_CHECK_BYTES) return false;
    mapped_since_check = 0;
    uint64_t available = 0, total = 0;
    if (!HOST_CACHE_MEMINFO(&available, &total)) return false;
    return available < (uint64_t)size + total / 8;
}

/* A new block of size bytes. Under memory pressure the cache is given back first; when the
 * system refuses, the cache is given back and the mapping tried again, then the out-of-memory
 * hook (a Lua GC, which frees dead tensors into the cache, hence a second emptying) runs before
 * the last try. */
static void *map_fresh(size_t size)
{
    pthread_mutex_lock(&lock);
    if (under_pressure_locked(size)) {
        stats.pressure_releases++;
        cached_block *all = take_all_locked();
        pthread_mutex_unlock(&lock);
        release_chain(all);
    } else {
        pthread_mutex_unlock(&lock);
    }
    void *p = map_block(size);
    if (p) return p;
    pthread_mutex_lock(&lock);
    stats.alloc_retries++;
    cached_block *all = take_all_locked();
    pthread_mutex_unlock(&lock);
    release_chain(all);
    if ((p = map_block(size))) return p;
    if (!ddpl_run_oom_hook()) return NULL;
    ddpl_host_empty_cache();
    return map_block(size);
}

void *ddpl_host_cache_alloc(size_t nbytes)
{
    if (nbytes < DDPL_HOST_LARGE_BLOCK || nbytes > ((size_t)1 << MAX_LOG2)) {
        errno = ENOMEM;
        return NULL;
    }
    pthread_once(&once, init_once);
    int c = class_index(nbytes);
    size_t size = class_bytes(c);
    pthread_mutex_lock(&lock);
    cached_block *b = free_lists[c];
    if (b) {
        free_lists[c] = b->next;
        b->next = spare_records;
        spare_records = b;
        void *p = b->ptr;
        stats.cached_bytes -= size;
        stats.blocks_reused++;
        /* the pages a fresh mapping of the request would have faulted in on first touch */
        stats.page_faults_avoided += (nbytes + PAGE_BYTES - 1) / PAGE_BYTES;
        pthread_mutex_unlock(&lock);
        UNPOISON(p, nbytes);
        return p;
    }
    pthread_mutex_unlock(&lock);
    void *p = map_fresh(size);
    if (!p) return NULL;
    POISON((char *)p + nbytes, size - nbytes); /* the class's slack past the request */
    pthread_mutex_lock(&lock);
    stats.blocks_mapped++;
    stats.reserved_bytes += size;
    if (stats.reserved_bytes > stats.peak_reserved_bytes)
        stats.peak_reserved_bytes = stats.reserved_bytes;
    pthread_mutex_unlock(&lock);
    return p;
}

void ddpl_host_cache_free(void *p, size_t nbytes)
{
    if (!p) return;
    if (nbytes < DDPL_HOST_LARGE_BLOCK || nbytes > ((size_t)1 << MAX_LOG2)) {
        /* not one of ours: the caller broke the provider's contract (free with the size the
         * block was allocated with); filing it under a wrong class would corrupt the cache */
        fprintf(stderr, "ddplua: internal error: host cache free of %zu bytes\n", nbytes);
        abort();
    }
    int c = class_index(nbytes);
    size_t size = class_bytes(c);
    POISON(p, size);
    pthread_mutex_lock(&lock);
    cached_block *b = spare_records;
    if (b)
        spare_records = b->next;
    else if (!(b = malloc(sizeof *b))) {
        /* no record for it: give the block back rather than lose it */
        stats.reserved_bytes -= size;
        stats.blocks_released++;
        pthread_mutex_unlock(&lock);
        unmap_block(p, size);
        return;
    }
    b->ptr = p;
    b->size = size;
    b->next = free_lists[c];
    free_lists[c] = b;
    stats.cached_bytes += size;
    pthread_mutex_unlock(&lock);
}

void ddpl_host_cache_get_stats(ddpl_host_cache_stats *out)
{
    pthread_mutex_lock(&lock);
    *out = stats;
    pthread_mutex_unlock(&lock);
}

void ddpl_host_cache_reset_peak(void)
{
    pthread_mutex_lock(&lock);
    stats.peak_reserved_bytes = stats.reserved_bytes;
    pthread_mutex_unlock(&lock);
}
