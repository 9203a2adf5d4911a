/* spec/c/test_cuda_copy.c: the host<->device copy contract of cuda/cuda_copy.c on the CPU: the
 * file is compiled into this test over a fake stream whose DMA reads a pinned source only when
 * the stream runs (as a GPU does), while a pageable source is copied at the call (as CUDA's own
 * staging does). A copy that returned before its DMA read a pinned source would deliver bytes
 * the caller wrote afterwards.
 * defines: main (pageable small and staged, pinned, no pinned memory, device-to-host, errors). */
#include <stdbool.h>

#include "check.h"

/* this test's own copy, renamed so that it cannot clash with the engine's in a CUDA build */
#define cuda_copy_h2d_via     test_cuda_copy_h2d_via
#define cuda_copy_d2h_via     test_cuda_copy_d2h_via
#define CUDA_COPY_STAGE_MIN   TEST_CUDA_COPY_STAGE_MIN
#define CUDA_COPY_STAGE_CHUNK TEST_CUDA_COPY_STAGE_CHUNK
#include "cuda/cuda_copy.c"

#define MiB ((size_t)1 << 20)

/* ---- the fake stream: a queue of copies that run when the test or the code waits ---- */

typedef struct fake_copy {
    char *dst;
    const char *src; /* read when the copy runs (pinned source, device memory) */
    char *snapshot;  /* or the bytes taken at the call (pageable source) */
    size_t n;
} fake_copy;

typedef struct fake_event {
    int pos; /* copies queued before it was recorded */
} fake_event;

enum { QUEUE = 256, PINNED = 8 };
static struct {
    fake_copy q[QUEUE];
    int queued, ran; /* never rewound: events keep queue positions across cases */
    int base;        /* queued when the current case began */
    int stream_syncs, event_syncs, host_allocs;
    bool refuse_pinned, fail_copies;
    struct {
        const char *p;
        size_t n;
    } pinned[PINNED];
    int n_pinned;
} fake;

static void run_until(int pos)
{
    for (; fake.ran < pos; fake.ran++) {
        fake_copy *c = &fake.q[fake.ran];
        memcpy(c->dst, c->snapshot ? c->snapshot : c->src, c->n);
        free(c->snapshot);
        c->snapshot = NULL;
    }
}

static int fake_is_pinned(const void *p)
{
    for (int i = 0; i < fake.n_pinned; i++)
        if ((const char *)p >= fake.pinned[i].p &&
            (const char *)p < fake.pinned[i].p + fake.pinned[i].n)
            return 1;
    return 0;
}

static void pin(const void *p, size_t n)
{
    fake.pinned[fake.n_pinned].p = p;
    fake.pinned[fake.n_pinned++].n = n;
}

static int fake_copy_async(void *dst, const void *src, size_t n, cuda_copy_kind kind, void *stream)
{
    (void)stream;
    if (fake.fail_copies) return ddpl_error("fake copy refused");
    if (fake.queued == QUEUE) return ddpl_error("fake queue full");
    fake_copy *c = &fake.q[fake.queued++];
    *c = (fake_copy){dst, src, NULL, n};
    if (kind == CUDA_H2D && !fake_is_pinned(src)) { /* CUDA's staging takes the bytes now */
        c->snapshot = malloc(n);
        memcpy(c->snapshot, src, n);
    }
    return 0;
}

static int fake_stream_synchronize(void *stream)
{
    (void)stream;
    fake.stream_syncs++;
    run_until(fake.queued);
    return 0;
}

static void *fake_host_alloc(size_t n)
{
    if (fake.refuse_pinned) return NULL;
    void *p = malloc(n);
    pin(p, n);
    fake.host_allocs++;
    return p;
}

static void fake_host_free(void *p)
{
    free(p);
}

static void *fake_event_create(void)
{
    return calloc(1, sizeof(fake_event));
}

static void fake_event_destroy(void *ev)
{
    free(ev);
}

static int fake_event_record(void *ev, void *stream)
{
    (void)stream;
    ((fake_event *)ev)->pos = fake.queued;
    return 0;
}

static int fake_event_synchronize(void *ev)
{
    fake.event_syncs++;
    run_until(((fake_event *)ev)->pos);
    return 0;
}

static const cuda_copy_raw raw = {
    fake_copy_async,    fake_stream_synchronize, fake_is_pinned,
    fake_host_alloc,    fake_host_free,          fake_event_create,
    fake_event_destroy, fake_event_record,       fake_event_synchronize,
};

static void *stream = &fake; /* any non-NULL handle */

/* ---- helpers ---- */

static void reset_counts(void)
{
    fake_stream_synchronize(stream); /* nothing left over from the last case */
    fake.base = fake.queued;
    fake.stream_syncs = fake.event_syncs = 0;
}

static int copies(void) /* queued since the case began */
{
    return fake.queued - fake.base;
}

static char *pattern(size_t n, int seed)
{
    char *p = malloc(n);
    for (size_t i = 0; i < n; i++) p[i] = (char)((i * 131 + (size_t)seed) >> 3);
    return p;
}

/* h2d of n bytes from src (filled with a pattern), then the caller overwrites src at once, as
 * the contract allows; once the stream has run, dst must hold the pattern. */
static bool h2d_survives_overwrite(char *src, size_t n, int device)
{
    char *want = pattern(n, device + 7);
    memcpy(src, want, n);
    char *dst = calloc(1, n);
    bool ok = test_cuda_copy_h2d_via(&raw, dst, device, src, n, stream) == 0;
    memset(src, 0x5a, n);
    fake_stream_synchronize(stream);
    ok = ok && memcmp(dst, want, n) == 0;
    free(dst);
    free(want);
    return ok;
}

/* ---- cases ---- */

static void small_pageable(void)
{
    reset_counts();
    char *src = malloc(1000);
    CHECK(h2d_survives_overwrite(src, 1000, 0));
    CHECK(copies() == 1);
    CHECK(fake.stream_syncs == 1); /* the test's own: the copy did not wait */
    free(src);
}

static void pinned_source_waits_for_its_dma(void)
{
    reset_counts();
    size_t n = 3 * MiB; /* staged size were it pageable: pinned goes straight */
    char *src = malloc(n);
    pin(src, n);
    CHECK(h2d_survives_overwrite(src, n, 0));
    CHECK(copies() == 1);
    CHECK(fake.stream_syncs == 2); /* the copy's wait, then the test's */
    CHECK(fake.host_allocs == 0);  /* no staging for a pinned source */
    fake.n_pinned--;
    free(src);
}

static void large_pageable_is_staged(void)
{
    reset_counts();
    size_t n = 2 * TEST_CUDA_COPY_STAGE_CHUNK + 123; /* three chunks through two buffers */
    char *src = malloc(n);
    CHECK(h2d_survives_overwrite(src, n, 0));
    CHECK(fake.host_allocs == 2);
    CHECK(copies() == 3);
    CHECK(fake.event_syncs == 1);  /* chunk 3 waited for chunk 1 to leave buffer 0 */
    CHECK(fake.stream_syncs == 1); /* the test's own: the last DMA was not waited for */
    /* a second copy reuses the buffers, and first waits for the last one's DMA out of them */
    reset_counts();
    CHECK(h2d_survives_overwrite(src, n, 0));
    CHECK(fake.host_allocs == 2);
    free(src);
}

static void no_pinned_memory(void)
{
    reset_counts();
    fake.refuse_pinned = true;
    size_t n = 2 * MiB;
    char *src = malloc(n);
    CHECK(h2d_survives_overwrite(src, n, 1)); /* device 1: its buffers were never made */
    CHECK(copies() == 1);                     /* one direct copy */
    fake.refuse_pinned = false;
    CHECK(h2d_survives_overwrite(src, n, 1)); /* refused once: not asked again */
    CHECK(fake.host_allocs == 2);             /* device 0's two, from the staged case */
    free(src);
}

static void device_to_host_holds_the_bytes_on_return(void)
{
    reset_counts();
    size_t n = 5000;
    char *dev = pattern(n, 3), *dst = calloc(1, n);
    CHECK(test_cuda_copy_d2h_via(&raw, dst, dev, n, stream) == 0);
    CHECK(memcmp(dst, dev, n) == 0);
    free(dev);
    free(dst);
}

static void errors(void)
{
    reset_counts();
    char buf[16] = {0}, dst[16];
    CHECK(test_cuda_copy_h2d_via(&raw, dst, 64, buf, sizeof buf, stream) < 0);
    CHECK(strstr(ddpl_last_error(), "copy to cuda: bad device 64") != NULL);
    fake.fail_copies = true;
    CHECK(test_cuda_copy_h2d_via(&raw, dst, 0, buf, sizeof buf, stream) < 0);
    CHECK(strstr(ddpl_last_error(), "fake copy refused") != NULL);
    CHECK(test_cuda_copy_d2h_via(&raw, dst, buf, sizeof buf, stream) < 0);
    fake.fail_copies = false;
    CHECK(test_cuda_copy_h2d_via(&raw, dst, 0, buf, 0, stream) == 0); /* nothing to copy */
    CHECK(copies() == 0);
}

int main(void)
{
    small_pageable();
    pinned_source_waits_for_its_dma();
    large_pageable_is_staged();
    no_pinned_memory();
    device_to_host_holds_the_bytes_on_return();
    errors();
    return check_finish();
}
