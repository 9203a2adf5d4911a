/* spec/c/test_host_alloc.c: the host caching allocator (core/host_cache.c). Most checks run
 * on this test's own copy of it, compiled in with a fake /proc/meminfo (so memory pressure can
 * be staged) and renamed so that it does not clash with the library's copy; the last ones go
 * through the library's host provider as tensors use it.
 * defines: main (size classes, reuse and statistics, no growth over repeated steps of mixed
 *          sizes, no page faults once warm, empty_cache, memory pressure, failure, threads,
 *          fork, huge pages, the library's provider: alignment, accounting, reuse). */
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include "check.h"

static struct {
    bool known;
    uint64_t available, total;
    int reads;
} fake_meminfo = {true, (uint64_t)1 << 40, (uint64_t)1 << 40, 0};

static bool fake_read_meminfo(uint64_t *available, uint64_t *total)
{
    fake_meminfo.reads++;
    *available = fake_meminfo.available;
    *total = fake_meminfo.total;
    return fake_meminfo.known;
}

#define HOST_CACHE_MEMINFO         fake_read_meminfo
#define ddpl_host_cache_alloc      test_cache_alloc
#define ddpl_host_cache_free       test_cache_free
#define ddpl_host_empty_cache      test_empty_cache
#define ddpl_host_cache_get_stats  test_cache_get_stats
#define ddpl_host_cache_class_size test_class_size
#define ddpl_host_cache_reset_peak test_cache_reset_peak
#include "core/host_cache.c"
#undef ddpl_host_cache_reset_peak
#undef ddpl_host_cache_alloc
#undef ddpl_host_cache_free
#undef ddpl_host_empty_cache
#undef ddpl_host_cache_get_stats
#undef ddpl_host_cache_class_size
/* the library's own (alloc.h declared them under the test's names above) */
void ddpl_host_empty_cache(void);
void ddpl_host_cache_get_stats(ddpl_host_cache_stats *out);

#define KiB ((size_t)1 << 10)
#define MiB ((size_t)1 << 20)

static ddpl_host_cache_stats now(void)
{
    ddpl_host_cache_stats s;
    test_cache_get_stats(&s);
    return s;
}

static long minor_faults(void)
{
    struct rusage ru;
    getrusage(RUSAGE_SELF, &ru);
    return ru.ru_minflt;
}

/* Writes one byte per page (what a kernel writing the block does to the page tables). */
static void touch(void *p, size_t n)
{
    for (size_t i = 0; i < n; i += 4096) ((volatile char *)p)[i] = (char)i;
}

static void test_classes(void)
{
    CHECK(test_class_size(64 * KiB - 1) == 0); /* small: malloc's */
    CHECK(test_class_size(64 * KiB) == 64 * KiB);
    CHECK(test_class_size(64 * KiB + 1) == 72 * KiB);
    CHECK(test_class_size(MiB) == MiB);
    CHECK(test_class_size(MiB + 1) == MiB + 128 * KiB);
    CHECK(test_class_size(32 * MiB) == 32 * MiB); /* GPT's cross-entropy gradient */
    CHECK(test_class_size((size_t)1 << 56) == (size_t)1 << 56);
    CHECK(test_class_size(((size_t)1 << 56) + 1) == 0);
    /* every class is a whole number of pages and wastes at most an eighth */
    bool ok = true;
    for (size_t n = 64 * KiB; n < 300 * MiB; n = n * 9 / 8 + 4097) {
        size_t c = test_class_size(n);
        if (c < n || c % 4096 || (double)c > (double)n * 1.125 + 1) ok = false;
        if (test_class_size(c) != c || class_bytes(class_index(n)) != c) ok = false;
    }
    CHECK(ok);
}

static void test_reuse_and_stats(void)
{
    test_empty_cache();
    ddpl_host_cache_stats s0 = now();
    char *a = test_cache_alloc(MiB);
    CHECK(a && (uintptr_t)a % 4096 == 0);
    memset(a, 7, MiB);
    ddpl_host_cache_stats s1 = now();
    CHECK(s1.blocks_mapped == s0.blocks_mapped + 1);
    CHECK(s1.reserved_bytes == s0.reserved_bytes + (int64_t)MiB);
    CHECK(s1.cached_bytes == s0.cached_bytes);
    test_cache_free(a, MiB);
    ddpl_host_cache_stats s2 = now();
    CHECK(s2.cached_bytes == s1.cached_bytes + (int64_t)MiB);
    CHECK(s2.reserved_bytes == s1.reserved_bytes); /* kept mapped */

    /* a request of the same class takes the same block back, pages and all */
    char *b = test_cache_alloc(MiB - 4096 * 3);
    CHECK(b == a);
    ddpl_host_cache_stats s3 = now();
    CHECK(s3.blocks_reused == s2.blocks_reused + 1);
    CHECK(s3.blocks_mapped == s2.blocks_mapped);
    CHECK(s3.page_faults_avoided == s2.page_faults_avoided + (int64_t)(MiB / 4096 - 3));
    CHECK(s3.cached_bytes == s1.cached_bytes);
    /* another class maps its own block */
    char *c = test_cache_alloc(2 * MiB);
    CHECK(c && c != a);
    CHECK(now().blocks_mapped == s3.blocks_mapped + 1);
    test_cache_free(b, MiB - 4096 * 3);
    test_cache_free(c, 2 * MiB);
    ddpl_host_cache_stats s4 = now();
    CHECK(s4.cached_bytes == s4.reserved_bytes); /* everything is free again */
    CHECK(s4.peak_reserved_bytes >= s4.reserved_bytes);

    /* LIFO within a class: the block freed last comes back first */
    char *x = test_cache_alloc(100 * KiB), *y = test_cache_alloc(100 * KiB);
    test_cache_free(x, 100 * KiB);
    test_cache_free(y, 100 * KiB);
    CHECK(test_cache_alloc(100 * KiB) == y);
    CHECK(test_cache_alloc(100 * KiB) == x);
    test_cache_free(x, 100 * KiB);
    test_cache_free(y, 100 * KiB);
}

/* One "training step": the same sequence of mixed sizes each time, some blocks living across
 * others (activations kept for backward), all freed by the end. */
static const size_t step_sizes[] = {64 * KiB, 200 * KiB, MiB,     3 * MiB + 5,  96 * KiB,
                                    MiB,      700 * KiB, 8 * MiB, 64 * KiB + 1, 5 * MiB};
enum { N_STEP_SIZES = sizeof step_sizes / sizeof step_sizes[0] };

static void one_step(int shift)
{
    void *live[N_STEP_SIZES];
    for (int i = 0; i < N_STEP_SIZES; i++) {
        size_t n = step_sizes[(i + shift) % N_STEP_SIZES];
        live[i] = test_cache_alloc(n);
        CHECK(live[i] != NULL);
        if (live[i]) touch(live[i], n);
        if (i % 3 == 2) { /* a temporary that dies at once */
            test_cache_free(live[i], n);
            live[i] = NULL;
        }
    }
    for (int i = N_STEP_SIZES - 1; i >= 0; i--)
        if (live[i]) test_cache_free(live[i], step_sizes[(i + shift) % N_STEP_SIZES]);
}

static void test_steady_state(void)
{
    test_empty_cache();
    long f0 = minor_faults();
    one_step(0);
    long first_step_faults = minor_faults() - f0;
    one_step(1); /* the order shifts: other sizes live together */
    ddpl_host_cache_stats warm = now();
    long f1 = minor_faults();
    for (int s = 0; s < 50; s++) one_step(s % 2);
    long steady_faults = minor_faults() - f1;
    ddpl_host_cache_stats end = now();
    CHECK(end.blocks_mapped == warm.blocks_mapped); /* nothing new mapped after warm-up */
    CHECK(end.reserved_bytes == warm.reserved_bytes);
    CHECK(end.blocks_reused == warm.blocks_reused + 50 * N_STEP_SIZES);
    /* the first step faulted ~5,000 pages in; 50 warm steps together fault less than a tenth
     * of one (the test's own stack and stdio are the only other pages it touches) */
    CHECK(first_step_faults > 1000);
    CHECK(steady_faults * 10 < first_step_faults);
    if (!(steady_faults * 10 < first_step_faults))
        fprintf(stderr, "faults: first step %ld, 50 warm steps %ld\n", first_step_faults,
                steady_faults);
}

static void test_empty_cache_releases(void)
{
    char *a = test_cache_alloc(4 * MiB), *b = test_cache_alloc(300 * KiB);
    test_cache_free(a, 4 * MiB);
    ddpl_host_cache_stats s0 = now();
    CHECK(s0.cached_bytes >= (int64_t)(4 * MiB));
    test_empty_cache();
    ddpl_host_cache_stats s1 = now();
    CHECK(s1.cached_bytes == 0);
    CHECK(s1.reserved_bytes == s0.reserved_bytes - s0.cached_bytes); /* b is still in use */
    CHECK(s1.blocks_released > s0.blocks_released);
    memset(b, 1, 300 * KiB); /* untouched by the release */
    test_cache_free(b, 300 * KiB);
    CHECK(now().cached_bytes == (int64_t)test_class_size(300 * KiB));
    test_empty_cache();
    CHECK(now().reserved_bytes == 0);
#ifndef HOST_CACHE_ASAN
    /* the pages are gone from the process: mincore refuses unmapped addresses */
    unsigned char vec[1];
    CHECK(mincore(a, 4096, vec) == -1 && errno == ENOMEM);
#endif
}

static void test_memory_pressure(void)
{
    test_empty_cache();
    void *a = test_cache_alloc(4 * MiB);
    test_cache_free(a, 4 * MiB); /* 4 MiB cached */
    int64_t releases = now().pressure_releases;
    /* plenty available: the new mapping leaves the cache alone */
    fake_meminfo.available = fake_meminfo.total = (uint64_t)64 << 30;
    mapped_since_check = 0;
    void *big = test_cache_alloc(40 * MiB);
    CHECK(now().cached_bytes == (int64_t)(4 * MiB));
    CHECK(now().pressure_releases == releases);
    test_cache_free(big, 40 * MiB);
    /* under an eighth of the memory would be left: the cache goes back first */
    fake_meminfo.available = (uint64_t)150 << 20; /* 48 MiB + 128 MiB would not fit */
    fake_meminfo.total = (uint64_t)1 << 30;
    int reads = fake_meminfo.reads;
    void *other = test_cache_alloc(48 * MiB);
    CHECK(other != NULL);
    CHECK(fake_meminfo.reads == reads + 1);
    CHECK(now().pressure_releases == releases + 1);
    CHECK(now().cached_bytes == 0);
    /* small mappings do not read /proc/meminfo each time */
    test_cache_free(other, 48 * MiB);
    reads = fake_meminfo.reads;
    void *smalls[8];
    for (int i = 0; i < 8; i++) smalls[i] = test_cache_alloc(128 * KiB + (size_t)i * 16 * KiB);
    CHECK(fake_meminfo.reads == reads);
    for (int i = 0; i < 8; i++) test_cache_free(smalls[i], 128 * KiB + (size_t)i * 16 * KiB);
    fake_meminfo.available = fake_meminfo.total = (uint64_t)1 << 40;
    test_empty_cache();
}

static void test_failure(void)
{
    int64_t retries = now().alloc_retries;
    CHECK(test_cache_alloc((size_t)1 << 60) == NULL);       /* beyond any class: refused at once */
    CHECK(test_cache_alloc(((size_t)1 << 56) - 1) == NULL); /* no machine maps 64 PiB */
    CHECK(now().alloc_retries == retries + 1);              /* after giving the cache back */
    CHECK(now().reserved_bytes == 0);
}

/* ---- threads and fork ---- */

typedef struct {
    int seed, bad;
} worker_arg;

static void *worker(void *p)
{
    worker_arg *w = p;
    unsigned r = (unsigned)w->seed;
    for (int it = 0; it < 3000; it++) {
        r = r * 1103515245u + 12345u;
        size_t n = 64 * KiB + (r >> 8) % (3 * MiB);
        unsigned char *b = test_cache_alloc(n);
        if (!b) {
            w->bad++;
            continue;
        }
        unsigned char tag = (unsigned char)(w->seed * 31 + it);
        b[0] = b[n / 2] = b[n - 1] = tag;
        sched_yield();
        if (b[0] != tag || b[n / 2] != tag || b[n - 1] != tag) w->bad++; /* handed out twice */
        test_cache_free(b, n);
    }
    return NULL;
}

static void test_threads(void)
{
    pthread_t t[4];
    worker_arg args[4];
    for (int i = 0; i < 4; i++) {
        args[i] = (worker_arg){i + 1, 0};
        pthread_create(&t[i], NULL, worker, &args[i]);
    }
    int bad = 0;
    for (int i = 0; i < 4; i++) {
        pthread_join(t[i], NULL);
        bad += args[i].bad;
    }
    CHECK(bad == 0);
    ddpl_host_cache_stats s = now();
    CHECK(s.cached_bytes == s.reserved_bytes); /* all freed, all accounted */
    CHECK(s.blocks_reused > 0);
    test_empty_cache();
}

static void *hammer(void *p)
{
    atomic_int *stop = p;
    while (!atomic_load(stop)) {
        void *b = test_cache_alloc(256 * KiB);
        if (b) test_cache_free(b, 256 * KiB);
    }
    return NULL;
}

/* A child forked while another thread allocates (as DataLoader workers fork while kernels may
 * run) gets a usable cache: its lock released, the cached blocks its own copies. */
static void test_fork(void)
{
    char *a = test_cache_alloc(2 * MiB);
    memset(a, 5, 2 * MiB);
    test_cache_free(a, 2 * MiB);
    atomic_int stop = 0;
    pthread_t h;
    pthread_create(&h, NULL, hammer, &stop);
    int failures = 0;
    for (int round = 0; round < 20; round++) {
        pid_t pid = fork();
        if (pid == 0) {
            ddpl_host_cache_stats s0;
            test_cache_get_stats(&s0);
            char *b = test_cache_alloc(2 * MiB); /* the parent's cached block, copy-on-write */
            bool ok = b == a && b[12345] == 5;
            memset(b, 9, 2 * MiB);
            test_cache_free(b, 2 * MiB);
            void *c = test_cache_alloc(5 * MiB);
            ok = ok && c != NULL;
            test_cache_free(c, 5 * MiB);
            test_empty_cache();
            ddpl_host_cache_stats s1;
            test_cache_get_stats(&s1);
            ok = ok && s1.blocks_reused == s0.blocks_reused + 1 && s1.cached_bytes == 0;
            _exit(ok ? 0 : 1);
        }
        int status = 0;
        if (pid < 0 || waitpid(pid, &status, 0) != pid || !WIFEXITED(status) ||
            WEXITSTATUS(status) != 0)
            failures++;
    }
    atomic_store(&stop, 1);
    pthread_join(h, NULL);
    CHECK(failures == 0);
    /* the parent's block is untouched by the children's writes */
    char *again = test_cache_alloc(2 * MiB);
    CHECK(again == a && again[2 * MiB - 1] == 5);
    test_cache_free(again, 2 * MiB);
    test_empty_cache();
}

/* ---- the library's host provider, as storages use it ---- */

/* The kernel's transparent huge page mode: "always", "madvise" or "never" (the bracketed word
 * of /sys/kernel/mm/transparent_hugepage/enabled), "" when unknown. */
static const char *thp_mode(void)
{
    static char mode[16];
    char line[128] = "";
    FILE *f = fopen("/sys/kernel/mm/transparent_hugepage/enabled", "r");
    if (f) {
        if (!fgets(line, sizeof line, f)) line[0] = 0;
        fclose(f);
    }
    const char *a = strchr(line, '['), *b = a ? strchr(a, ']') : NULL;
    size_t n = a && b && (size_t)(b - a - 1) < sizeof mode ? (size_t)(b - a - 1) : 0;
    memcpy(mode, a ? a + 1 : "", n);
    mode[n] = 0;
    return mode;
}

/* THPeligible of the mapping that holds p (/proc/self/smaps), -1 when not found. */
static int thp_eligible(const void *p)
{
    FILE *f = fopen("/proc/self/smaps", "r");
    if (!f) return -1;
    char line[512];
    bool inside = false;
    int found = -1;
    while (found < 0 && fgets(line, sizeof line, f)) {
        unsigned long lo, hi;
        int v;
        if (sscanf(line, "%lx-%lx ", &lo, &hi) == 2 && strchr(line, ' ') > strchr(line, '-'))
            inside = (uintptr_t)p >= lo && (uintptr_t)p < hi;
        else if (inside && sscanf(line, "THPeligible: %d", &v) == 1)
            found = v;
    }
    fclose(f);
    return found;
}

/* Blocks spanning a huge page start at a 2 MiB boundary and their mapping is advised
 * MADV_HUGEPAGE, which smaps reports as THPeligible (unless THP is off); under the "madvise"
 * mode a smaller block's mapping is not eligible. DDPLUA_HOST_HUGEPAGES=0 turns it off. Under
 * ASan blocks come from posix_memalign: only the setting is checked. */
static void test_huge_pages(void)
{
    CHECK(setenv("DDPLUA_HOST_HUGEPAGES", "0", 1) == 0);
    CHECK(!huge_pages_wanted());
    CHECK(setenv("DDPLUA_HOST_HUGEPAGES", "1", 1) == 0);
    CHECK(huge_pages_wanted());
    CHECK(unsetenv("DDPLUA_HOST_HUGEPAGES") == 0);
    CHECK(huge_pages_wanted());
#ifndef HOST_CACHE_ASAN
    test_empty_cache();
    const char *mode = thp_mode();
    void *big = test_cache_alloc(5 * MiB), *small = test_cache_alloc(MiB);
    CHECK(big && (uintptr_t)big % (2 * MiB) == 0);
    CHECK(small != NULL);
    touch(big, 5 * MiB);
    touch(small, MiB);
    if (strcmp(mode, "never") != 0 && strcmp(mode, "") != 0) CHECK(thp_eligible(big) == 1);
    if (strcmp(mode, "madvise") == 0) CHECK(thp_eligible(small) == 0);
    huge_pages = false; /* as DDPLUA_HOST_HUGEPAGES=0 leaves it */
    void *plain = test_cache_alloc(7 * MiB);
    CHECK(plain != NULL);
    touch(plain, 7 * MiB);
    if (strcmp(mode, "madvise") == 0) CHECK(thp_eligible(plain) == 0);
    huge_pages = true;
    test_cache_free(plain, 7 * MiB);
    test_cache_free(small, MiB);
    test_cache_free(big, 5 * MiB);
    void *again = test_cache_alloc(5 * MiB); /* the aligned block comes back from the cache */
    CHECK(again == big);
    test_cache_free(again, 5 * MiB);
    test_empty_cache();
    CHECK(now().reserved_bytes == 0);
#endif
}

static void test_library_provider(void)
{
    ddpl_device cpu = ddpl_cpu();
    int64_t before = ddpl_memory_allocated(DDPL_CPU);
    void *small = ddpl_device_alloc(1000, cpu), *large = ddpl_device_alloc(3 * MiB + 3, cpu);
    CHECK(small && (uintptr_t)small % 64 == 0);
    CHECK(large && (uintptr_t)large % 64 == 0);
    CHECK(ddpl_memory_allocated(DDPL_CPU) == before + 1000 + (int64_t)(3 * MiB + 3));
    ddpl_device_free(large, 3 * MiB + 3, cpu);
    ddpl_host_cache_stats s0;
    ddpl_host_cache_get_stats(&s0);
    CHECK(s0.cached_bytes >= (int64_t)(3 * MiB + 3));
    void *again = ddpl_device_alloc(3 * MiB + 100, cpu); /* same class */
    CHECK(again == large);
    ddpl_device_free(again, 3 * MiB + 100, cpu);
    ddpl_device_free(small, 1000, cpu);
    CHECK(ddpl_memory_allocated(DDPL_CPU) == before);
    /* scratch comes from the same cache and is not counted as storage */
    void *scratch = ddpl_host_scratch_alloc(3 * MiB + 100);
    CHECK(scratch == large);
    CHECK(ddpl_memory_allocated(DDPL_CPU) == before);
    ddpl_host_scratch_free(scratch, 3 * MiB + 100);
    /* too much memory is an error naming the size, not a crash */
    CHECK(ddpl_device_alloc((size_t)1 << 58, cpu) == NULL);
    CHECK(strstr(ddpl_last_error(), "out of memory") != NULL);
    ddpl_host_empty_cache();
    ddpl_host_cache_get_stats(&s0);
    CHECK(s0.cached_bytes == 0);
}

int main(void)
{
    test_classes();
    test_reuse_and_stats();
    test_steady_state();
    test_empty_cache_releases();
    test_memory_pressure();
    test_failure();
    test_threads();
    test_fork();
    test_huge_pages();
    test_library_provider();
    return check_finish();
}
