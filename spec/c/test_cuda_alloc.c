/* spec/c/test_cuda_alloc.c: the CUDA caching allocator's logic on the CPU: cuda_alloc.c is
 * compiled into this test with fake raw calls (a fake address space per device with a capacity,
 * fake events that complete when the test says so).
 * defines: main (binning and rounding, reuse, splitting and merging, streams, record_stream and
 *          events, statistics, empty_cache, the out-of-memory retry order, threads). */
#include <pthread.h>

#include "check.h"

/* This test's own copy of the allocator, renamed so that it cannot clash with the engine's copy
 * in a CUDA build of the library it links against. */
#define cuda_alloc_setup          test_cuda_alloc_setup
#define cuda_alloc_malloc         test_cuda_alloc_malloc
#define cuda_alloc_free           test_cuda_alloc_free
#define cuda_alloc_record_stream  test_cuda_alloc_record_stream
#define cuda_tensor_record_stream test_cuda_tensor_record_stream
#define cuda_alloc_empty_cache    test_cuda_alloc_empty_cache
#define cuda_alloc_get_stats      test_cuda_alloc_get_stats
#define cuda_alloc_reset_peak     test_cuda_alloc_reset_peak
#include "cuda/cuda_alloc.c"

#define MiB ((size_t)1 << 20)

/* ---- fakes ---- */

typedef struct fake_event {
    int done;
    void *stream;
} fake_event;

static struct {
    uintptr_t next[CUDA_ALLOC_MAX_DEVICES]; /* bump pointer of each fake address space */
    size_t used[CUDA_ALLOC_MAX_DEVICES], capacity[CUDA_ALLOC_MAX_DEVICES];
    int mallocs, failed_mallocs, frees, records, syncs, events_live;
    char log[512]; /* M = malloc ok, X = malloc out of memory, F = free, H = hook */
    fake_event *last_event;
} fake;
static pthread_mutex_t fake_lock = PTHREAD_MUTEX_INITIALIZER;

static void logc(char c)
{
    size_t n = strlen(fake.log);
    if (n + 1 < sizeof fake.log) fake.log[n] = c;
}

static int fake_malloc(void **ptr, size_t nbytes, int device)
{
    pthread_mutex_lock(&fake_lock);
    int rc = 0;
    if (fake.used[device] + nbytes > fake.capacity[device]) {
        fake.failed_mallocs++;
        logc('X');
        rc = 1;
    } else {
        if (!fake.next[device]) fake.next[device] = ((uintptr_t)(device + 1) << 40);
        *ptr = (void *)fake.next[device];
        fake.next[device] += nbytes + 4096; /* segments never touch: merging must not cross them */
        fake.used[device] += nbytes;
        fake.mallocs++;
        logc('M');
    }
    pthread_mutex_unlock(&fake_lock);
    return rc;
}

/* segment sizes by address, so free knows what to give back to the capacity */
static struct {
    void *p;
    size_t n;
} seg_sizes[4096];
static int n_seg_sizes;

static int tracked_malloc(void **ptr, size_t nbytes, int device)
{
    int rc = fake_malloc(ptr, nbytes, device);
    if (rc == 0) {
        pthread_mutex_lock(&fake_lock);
        seg_sizes[n_seg_sizes].p = *ptr;
        seg_sizes[n_seg_sizes++].n = nbytes;
        pthread_mutex_unlock(&fake_lock);
    }
    return rc;
}

static void fake_free(void *ptr, int device)
{
    pthread_mutex_lock(&fake_lock);
    for (int i = 0; i < n_seg_sizes; i++)
        if (seg_sizes[i].p == ptr) {
            fake.used[device] -= seg_sizes[i].n;
            seg_sizes[i] = seg_sizes[--n_seg_sizes];
            break;
        }
    fake.frees++;
    logc('F');
    pthread_mutex_unlock(&fake_lock);
}

static void *fake_event_create(int device)
{
    DDPL_UNUSED(device);
    fake.events_live++;
    return calloc(1, sizeof(fake_event));
}

static void fake_event_destroy(void *ev, int device)
{
    DDPL_UNUSED(device);
    fake.events_live--;
    free(ev);
}

static int fake_event_record(void *ev, void *stream, int device)
{
    DDPL_UNUSED(device);
    fake_event *e = ev;
    e->done = 0;
    e->stream = stream;
    fake.records++;
    fake.last_event = e;
    return 0;
}

static int fake_event_query(void *ev, int device)
{
    DDPL_UNUSED(device);
    return ((fake_event *)ev)->done;
}

static int fake_event_synchronize(void *ev, int device)
{
    DDPL_UNUSED(device);
    ((fake_event *)ev)->done = 1;
    fake.syncs++;
    return 0;
}

static int fake_mem_info(int device, size_t *free_b, size_t *total_b)
{
    *total_b = fake.capacity[device];
    *free_b = fake.capacity[device] - fake.used[device];
    return 0;
}

static const cuda_alloc_raw fakes = {
    tracked_malloc,    fake_free,        fake_event_create,      fake_event_destroy,
    fake_event_record, fake_event_query, fake_event_synchronize, fake_mem_info,
};

static void *const A = (void *)0xA; /* streams */
static void *const B = (void *)0xB;

static cuda_alloc_stats stats(int dev)
{
    cuda_alloc_stats s;
    cuda_alloc_get_stats(dev, &s);
    return s;
}

/* ---- tests ---- */

static void test_small_pool(void)
{
    const int dev = 0;
    int m0 = fake.mallocs;
    char *p = cuda_alloc_malloc(1, dev, A);
    CHECK(p != NULL);
    CHECK(fake.mallocs == m0 + 1); /* one 2 MiB segment */
    CHECK(stats(dev).reserved == (int64_t)(2 * MiB));
    CHECK(stats(dev).allocated == 512); /* rounded to 512 B */
    CHECK(stats(dev).requested == 1);
    char *q = cuda_alloc_malloc(1000, dev, A);
    CHECK(q == p + 512); /* carved from the same segment */
    CHECK(fake.mallocs == m0 + 1);
    CHECK(stats(dev).allocated == 512 + 1024);
    char *z = cuda_alloc_malloc(0, dev, A); /* zero bytes still get a block */
    CHECK(z == q + 1024);
    cuda_alloc_free(q);
    char *r = cuda_alloc_malloc(700, dev, A); /* best fit: q's 1024 B hole */
    CHECK(r == q);
    cuda_alloc_free(r);
    cuda_alloc_free(z);
    cuda_alloc_free(p);
    CHECK(stats(dev).allocated == 0);
    CHECK(stats(dev).requested == 0);
    CHECK(stats(dev).reserved == (int64_t)(2 * MiB));    /* cached, not returned */
    char *s = cuda_alloc_malloc(2 * MiB - 4096, dev, A); /* > 1 MiB: the large pool */
    CHECK(fake.mallocs == m0 + 2);
    CHECK(s != p);
    char *t = cuda_alloc_malloc(MiB, dev, A); /* exactly 1 MiB is small: merged segment reused */
    CHECK(t == p);
    CHECK(fake.mallocs == m0 + 2);
    cuda_alloc_free(s);
    cuda_alloc_free(t);
}

static void test_large_pool(void)
{
    const int dev = 1;
    int m0 = fake.mallocs;
    char *a = cuda_alloc_malloc(3 * MiB, dev, A); /* under 10 MiB: a 20 MiB segment */
    CHECK(stats(dev).reserved == (int64_t)(20 * MiB));
    char *b = cuda_alloc_malloc(5 * MiB, dev, A); /* split off the rest */
    CHECK(b == a + 3 * MiB);
    CHECK(fake.mallocs == m0 + 1);
    char *c = cuda_alloc_malloc(12 * MiB + 1, dev, A); /* own segment, rounded to 2 MiB */
    CHECK(fake.mallocs == m0 + 2);
    CHECK(stats(dev).reserved == (int64_t)(34 * MiB));
    CHECK(stats(dev).allocated == (int64_t)(8 * MiB + 12 * MiB + 512));
    char *d = cuda_alloc_malloc(11 * MiB + 512 * 1024, dev, A); /* 12 MiB rest of a's segment */
    CHECK(d == a + 8 * MiB);
    /* the 512 KiB left of the 12 MiB is not split off (rest <= 1 MiB): the block is whole */
    CHECK(stats(dev).allocated == (int64_t)(8 * MiB + 12 * MiB + 512 + 12 * MiB));
    cuda_alloc_free(d);
    cuda_alloc_free(a);
    cuda_alloc_free(b); /* merges with both neighbours: the segment is one free block again */
    char *e = cuda_alloc_malloc(20 * MiB, dev, A);
    CHECK(e == a);
    CHECK(fake.mallocs == m0 + 2);
    cuda_alloc_free(e);
    cuda_alloc_free(c);
    int64_t f0 = stats(dev).raw_frees;
    cuda_alloc_empty_cache();
    CHECK(stats(dev).raw_frees == f0 + 2);
    CHECK(stats(dev).reserved == 0);
    CHECK(stats(dev).segments == 0);
}

static void test_streams(void)
{
    const int dev = 2;
    int m0 = fake.mallocs;
    char *a = cuda_alloc_malloc(4096, dev, A);
    cuda_alloc_free(a);
    char *b = cuda_alloc_malloc(4096, dev, B); /* A's cached block is not B's */
    CHECK(fake.mallocs == m0 + 2);
    CHECK(b != a);
    cuda_alloc_free(b);
    CHECK(cuda_alloc_malloc(4096, dev, A) == a);
    cuda_alloc_free(a);
    CHECK(cuda_alloc_malloc(4096, dev, B) == b);
    cuda_alloc_free(b);
}

static void test_record_stream(void)
{
    const int dev = 3;
    char *a = cuda_alloc_malloc(4096, dev, A);
    int r0 = fake.records;
    CHECK(cuda_alloc_record_stream(a, B) == 0);
    CHECK(cuda_alloc_record_stream(a, B) == 0); /* twice: one event */
    CHECK(cuda_alloc_record_stream(a, A) == 0); /* its own stream: none */
    cuda_alloc_free(a);
    CHECK(fake.records == r0 + 1);
    fake_event *ev = fake.last_event;
    CHECK(ev && ev->stream == B);
    CHECK(stats(dev).allocated == 0);
    char *b = cuda_alloc_malloc(4096, dev, A); /* a is fenced: B may still use it */
    CHECK(b != a);
    ev->done = 1;
    char *c = cuda_alloc_malloc(4096, dev, A);
    CHECK(c == a);
    cuda_alloc_free(c); /* no stream recorded any more: straight back */
    CHECK(fake.records == r0 + 1);
    CHECK(cuda_alloc_malloc(4096, dev, A) == a);
    cuda_alloc_free(a);
    cuda_alloc_free(b);
    CHECK(cuda_alloc_record_stream((void *)0x1234, B) < 0);
    CHECK(strstr(ddpl_last_error(), "not a block") != NULL);
    /* empty_cache waits for pending events before returning segments */
    char *d = cuda_alloc_malloc(4096, dev, A);
    cuda_alloc_record_stream(d, B);
    cuda_alloc_free(d);
    int s0 = fake.syncs;
    cuda_alloc_empty_cache();
    CHECK(fake.syncs == s0 + 1);
    CHECK(stats(dev).reserved == 0);
}

static void test_stats(void)
{
    const int dev = 4;
    char *a = cuda_alloc_malloc(3 * MiB, dev, A);
    char *b = cuda_alloc_malloc(3 * MiB, dev, A);
    cuda_alloc_free(b);
    cuda_alloc_stats s = stats(dev);
    CHECK(s.allocated == (int64_t)(3 * MiB));
    CHECK(s.peak_allocated == (int64_t)(6 * MiB));
    CHECK(s.peak_reserved == (int64_t)(20 * MiB));
    cuda_alloc_reset_peak(dev);
    CHECK(stats(dev).peak_allocated == (int64_t)(3 * MiB));
    cuda_alloc_free(a);
    cuda_alloc_empty_cache();
    CHECK(stats(dev).reserved == 0);
    CHECK(stats(dev).peak_reserved == (int64_t)(20 * MiB));
    cuda_alloc_stats bad;
    CHECK(cuda_alloc_get_stats(-1, &bad) < 0);
    CHECK(cuda_alloc_malloc(16, CUDA_ALLOC_MAX_DEVICES, A) == NULL);
}

/* the hook frees what a "Lua GC" would: one held block */
static void *gc_victim;
static void fake_gc(void *ud)
{
    DDPL_UNUSED(ud);
    logc('H');
    cuda_alloc_free(gc_victim);
    gc_victim = NULL;
}

static void test_oom(void)
{
    const int dev = 5;
    fake.capacity[dev] = 40 * MiB;
    /* a cached segment of another stream is given back before the hook is asked */
    char *b = cuda_alloc_malloc(15 * MiB, dev, B); /* 16 MiB segment */
    cuda_alloc_free(b);
    memset(fake.log, 0, sizeof fake.log);
    char *a = cuda_alloc_malloc(30 * MiB, dev, A);
    CHECK(a != NULL);
    CHECK(strcmp(fake.log, "XFM") == 0); /* fail, free the cache, retry */
    CHECK(stats(dev).oom_retries == 1);
    /* nothing cached: the hook (a GC) frees a tensor, whose block then fits */
    ddpl_set_oom_hook(fake_gc, NULL);
    gc_victim = a;
    memset(fake.log, 0, sizeof fake.log);
    char *c = cuda_alloc_malloc(25 * MiB, dev, A);
    CHECK(c == a); /* the victim's segment is cached for stream A and fits: no raw call */
    CHECK(strcmp(fake.log, "XH") == 0);
    CHECK(stats(dev).oom_retries == 1); /* nothing was cached to give back */
    /* the hook frees nothing: the error, with the sizes */
    char *d = cuda_alloc_malloc(5 * MiB, dev, B); /* a 20 MiB segment; 10 MiB left */
    CHECK(d == NULL);
    CHECK(strstr(ddpl_last_error(), "CUDA out of memory on cuda:5: tried to allocate 5.00 MiB") !=
          NULL);
    CHECK(strstr(ddpl_last_error(), "(25.00 MiB allocated by tensors, 5.00 MiB cached, 10.00 MiB "
                                    "free of 40.00 MiB total)") != NULL);
    /* the hook frees a block of another stream: its segment is given back, then the retry */
    gc_victim = c;
    memset(fake.log, 0, sizeof fake.log);
    d = cuda_alloc_malloc(5 * MiB, dev, B);
    CHECK(d != NULL);
    CHECK(strcmp(fake.log, "XHFM") == 0);
    /* no hook registered (or another thread's): the error after the cache */
    ddpl_set_oom_hook(NULL, NULL);
    memset(fake.log, 0, sizeof fake.log);
    CHECK(cuda_alloc_malloc(30 * MiB, dev, A) == NULL);
    CHECK(strcmp(fake.log, "X") == 0);
    cuda_alloc_free(d);
    cuda_alloc_empty_cache();
    CHECK(fake.used[dev] == 0);
    fake.capacity[dev] = (size_t)1 << 40;
}

static void *worker(void *arg)
{
    int dev = 6 + (int)(intptr_t)arg % 2;
    void *stream = (intptr_t)arg % 3 ? A : B;
    unsigned seed = (unsigned)(intptr_t)arg * 7919u + 1;
    void *held[32] = {0};
    for (int i = 0; i < 4000; i++) {
        seed = seed * 1103515245u + 12345u;
        int k = (int)((seed >> 8) % 32);
        if (held[k]) {
            cuda_alloc_free(held[k]);
            held[k] = NULL;
        } else {
            size_t n = (seed >> 4) % 4 == 0 ? (seed % (24 * MiB)) : (seed % 65536);
            held[k] = cuda_alloc_malloc(n, dev, stream);
            if (!held[k]) return (void *)1;
        }
    }
    for (int k = 0; k < 32; k++) cuda_alloc_free(held[k]);
    return NULL;
}

static void test_threads(void)
{
    pthread_t th[4];
    for (int i = 0; i < 4; i++) pthread_create(&th[i], NULL, worker, (void *)(intptr_t)i);
    int failed = 0;
    for (int i = 0; i < 4; i++) {
        void *r;
        pthread_join(th[i], &r);
        failed += r != NULL;
    }
    CHECK(failed == 0);
    CHECK(stats(6).allocated == 0 && stats(7).allocated == 0);
    cuda_alloc_empty_cache();
    CHECK(stats(6).reserved == 0 && stats(7).reserved == 0);
    CHECK(fake.used[6] == 0 && fake.used[7] == 0);
}

int main(void)
{
    for (int d = 0; d < CUDA_ALLOC_MAX_DEVICES; d++) fake.capacity[d] = (size_t)1 << 40;
    CHECK(cuda_alloc_malloc(16, 0, A) == NULL); /* not set up */
    cuda_alloc_setup(&fakes);
    test_small_pool();
    test_large_pool();
    test_streams();
    test_record_stream();
    test_stats();
    test_oom();
    test_threads();
    cuda_alloc_empty_cache();
    CHECK(fake.events_live == 0);
    return check_finish();
}
