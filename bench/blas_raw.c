/* bench/blas_raw.c: the machine's limits for bench/ops: raw OpenBLAS sgemm and memcpy bandwidth.
 * defines: main (a worker of bench/ops; prints one "RESULT <metric> <value> <unit>" line each).
 *
 *   gcc -O3 -mavx2 -mfma -o blas_raw bench/blas_raw.c $(pkg-config --cflags --libs openblas) -lpthread
 *   ./blas_raw [--threads T] [--min-time S] [--reps R]
 *
 * sgemm: row-major C[M,N] = A[M,K] @ B[K,N] through cblas_sgemm, beta = 0, the same call that
 * ddpl.matmul makes; flops = 2*M*N*K. memcpy: 16M float32 (64 MiB) copied into a buffer that
 * was already faulted in, split over T pthreads; reported as bytes read + bytes written per
 * second (2 x 64 MiB per copy), the same accounting bench/ops uses for elementwise ops.
 * add: out[i] = a[i] + b[i] over 16M float32 into an output that was already faulted in, split
 * over T pthreads (3 x 64 MiB per call): what an elementwise kernel can reach without the page
 * faults of a freshly allocated result.
 * Each figure is the median of R timed loops, each loop calibrated to last about S seconds. */
#define _GNU_SOURCE
#include <cblas.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

void openblas_set_num_threads(int);
int openblas_get_num_threads(void);

static double now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

static double median(double *v, int n)
{
    qsort(v, (size_t)n, sizeof *v, cmp_double);
    return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

/* Runs body(ctx) in loops of `calls` calls lasting about min_time seconds; returns the median
 * over reps loops of seconds per call. */
typedef void (*body_fn)(void *ctx);
static double time_per_call(body_fn body, void *ctx, double min_time, int reps)
{
    body(ctx); /* warm-up: caches, thread pools, page faults */
    int calls = 1;
    for (;;) {
        double t = now();
        for (int i = 0; i < calls; i++) body(ctx);
        double dt = now() - t;
        if (dt >= min_time / 4 || calls >= (1 << 24)) {
            if (dt > 0) calls = (int)(calls * (min_time / dt)) + 1;
            break;
        }
        calls *= 2;
    }
    double *per_call = malloc(sizeof(double) * (size_t)reps);
    for (int r = 0; r < reps; r++) {
        double t = now();
        for (int i = 0; i < calls; i++) body(ctx);
        per_call[r] = (now() - t) / calls;
    }
    double m = median(per_call, reps);
    free(per_call);
    return m;
}

static float *random_floats(size_t n)
{
    float *p = aligned_alloc(64, (n * sizeof(float) + 63) / 64 * 64);
    if (!p) {
        fprintf(stderr, "blas_raw: out of memory\n");
        exit(1);
    }
    for (size_t i = 0; i < n; i++) p[i] = (float)rand() / (float)RAND_MAX - 0.5f;
    return p;
}

struct gemm { int m, k, n; float *a, *b, *c; };

static void gemm_body(void *ctx)
{
    struct gemm *g = ctx;
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, g->m, g->n, g->k, 1.0f, g->a, g->k,
                g->b, g->n, 0.0f, g->c, g->n);
}

static void bench_sgemm(int m, int k, int n, double min_time, int reps)
{
    struct gemm g = {m, k, n, random_floats((size_t)m * k), random_floats((size_t)k * n),
                     random_floats((size_t)m * n)};
    double s = time_per_call(gemm_body, &g, min_time, reps);
    printf("RESULT sgemm_%dx%dx%d %.3f GFLOP/s\n", m, k, n, 2.0 * m * n * k / s / 1e9);
    free(g.a);
    free(g.b);
    free(g.c);
}

/* memcpy split into nthreads slices, one pthread each (the caller's thread takes slice 0). */
struct slice { char *dst; const char *src; size_t n; };
struct copy { char *dst; const char *src; size_t n; int nthreads; };

static void *slice_copy(void *arg)
{
    struct slice *s = arg;
    memcpy(s->dst, s->src, s->n);
    return NULL;
}

static void copy_body(void *ctx)
{
    struct copy *c = ctx;
    enum { MAXT = 64 };
    int nt = c->nthreads < 1 ? 1 : c->nthreads > MAXT ? MAXT : c->nthreads;
    pthread_t th[MAXT];
    struct slice sl[MAXT];
    size_t chunk = (c->n / (size_t)nt + 63) / 64 * 64;
    for (int i = 0; i < nt; i++) {
        size_t lo = chunk * (size_t)i, hi = lo + chunk < c->n ? lo + chunk : c->n;
        sl[i] = (struct slice){c->dst + lo, c->src + lo, hi > lo ? hi - lo : 0};
        if (i > 0) pthread_create(&th[i], NULL, slice_copy, &sl[i]);
    }
    slice_copy(&sl[0]);
    for (int i = 1; i < nt; i++) pthread_join(th[i], NULL);
}

static void bench_memcpy(size_t nfloats, int nthreads, double min_time, int reps)
{
    size_t bytes = nfloats * sizeof(float);
    struct copy c = {aligned_alloc(4096, bytes), aligned_alloc(4096, bytes), bytes, nthreads};
    memset(c.dst, 2, bytes); /* fault the pages in: this measures copying, not page faults */
    memset((char *)c.src, 1, bytes);
    double s = time_per_call(copy_body, &c, min_time, reps);
    if (c.dst[bytes - 1] != 1) fprintf(stderr, "blas_raw: memcpy check failed\n");
    printf("RESULT memcpy %.3f GB/s\n", 2.0 * (double)bytes / s / 1e9);
    free(c.dst);
    free((char *)c.src);
}

struct add { const float *a, *b; float *out; size_t n; int nthreads; };
struct add_slice { const float *a, *b; float *out; size_t lo, hi; };

static void *slice_add(void *arg)
{
    struct add_slice *s = arg;
    const float *restrict a = s->a, *restrict b = s->b;
    float *restrict out = s->out;
    for (size_t i = s->lo; i < s->hi; i++) out[i] = a[i] + b[i];
    return NULL;
}

static void add_body(void *ctx)
{
    struct add *c = ctx;
    enum { MAXT = 64 };
    int nt = c->nthreads < 1 ? 1 : c->nthreads > MAXT ? MAXT : c->nthreads;
    pthread_t th[MAXT];
    struct add_slice sl[MAXT];
    size_t chunk = (c->n / (size_t)nt + 15) / 16 * 16;
    for (int i = 0; i < nt; i++) {
        size_t lo = chunk * (size_t)i, hi = lo + chunk < c->n ? lo + chunk : c->n;
        sl[i] = (struct add_slice){c->a, c->b, c->out, lo < hi ? lo : hi, hi};
        if (i > 0) pthread_create(&th[i], NULL, slice_add, &sl[i]);
    }
    slice_add(&sl[0]);
    for (int i = 1; i < nt; i++) pthread_join(th[i], NULL);
}

static void bench_add(size_t n, int nthreads, double min_time, int reps)
{
    struct add c = {random_floats(n), random_floats(n), random_floats(n), n, nthreads};
    double s = time_per_call(add_body, &c, min_time, reps);
    printf("RESULT add_c %.3f GB/s\n", 3.0 * (double)(n * sizeof(float)) / s / 1e9);
    free((float *)c.a);
    free((float *)c.b);
    free(c.out);
}

int main(int argc, char **argv)
{
    int threads = 1, reps = 3;
    double min_time = 0.2;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--threads") && i + 1 < argc) threads = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--min-time") && i + 1 < argc) min_time = atof(argv[++i]);
        else if (!strcmp(argv[i], "--reps") && i + 1 < argc) reps = atoi(argv[++i]);
        else {
            fprintf(stderr, "usage: %s [--threads T] [--min-time S] [--reps R]\n", argv[0]);
            return 2;
        }
    }
    if (threads < 1 || reps < 1 || !(min_time > 0)) {
        fprintf(stderr, "blas_raw: --threads and --reps must be >= 1, --min-time > 0\n");
        return 2;
    }
    srand(1);
    openblas_set_num_threads(threads);
    printf("INFO blas %s, threads %d\n", openblas_get_config(), openblas_get_num_threads());
    bench_sgemm(1024, 1024, 1024, min_time, reps);
    bench_sgemm(64, 784, 256, min_time, reps);
    bench_memcpy((size_t)16 << 20, threads, min_time, reps);
    bench_add((size_t)16 << 20, threads, min_time, reps);
    return 0;
}
