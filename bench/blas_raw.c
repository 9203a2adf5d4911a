/* bench/blas_raw.c: the machine's limits for bench/ops: raw OpenBLAS sgemm and memcpy bandwidth.
 * defines: main (a worker of bench/ops, speaking its row protocol on stdin and stdout).
 *
 *   gcc -O3 -mavx2 -mfma -o blas_raw bench/blas_raw.c $(pkg-config --cflags --libs openblas) -lpthread
 *   ./blas_raw [--threads T] [--min-time S] [--reps R]
 *
 * The protocol (bench/ops.lua's header): prints "ROWS <names>", then answers each stdin line
 * "<name> <calls>" with "RESULT <name> <value> <unit> <calls>" (calls 0: warm up and calibrate
 * loops of about S seconds first) until end of input.
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

/* Seconds per call of body(ctx): the median over reps loops of *calls calls. With *calls == 0,
 * a warm-up call (caches, thread pools, page faults) and a calibration first, which set *calls
 * to a loop of about min_time seconds. */
typedef void (*body_fn)(void *ctx);
static double time_per_call(body_fn body, void *ctx, int *calls, double min_time, int reps)
{
    if (*calls <= 0) {
        body(ctx);
        int n = 1;
        for (;;) {
            double t = now();
            for (int i = 0; i < n; i++) body(ctx);
            double dt = now() - t;
            if (dt >= min_time / 4 || n >= (1 << 24)) {
                if (dt > 0) n = (int)(n * (min_time / dt)) + 1;
                break;
            }
            n *= 2;
        }
        *calls = n;
    }
    double *per_call = malloc(sizeof(double) * (size_t)reps);
    for (int r = 0; r < reps; r++) {
        double t = now();
        for (int i = 0; i < *calls; i++) body(ctx);
        per_call[r] = (now() - t) / *calls;
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

/* Each row's buffers are made on its first measurement and kept for the later rounds. */
struct gemm { int m, k, n; float *a, *b, *c; };

static void gemm_body(void *ctx)
{
    struct gemm *g = ctx;
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, g->m, g->n, g->k, 1.0f, g->a, g->k,
                g->b, g->n, 0.0f, g->c, g->n);
}

static double bench_sgemm(struct gemm *g, int *calls, double min_time, int reps)
{
    if (!g->a) {
        g->a = random_floats((size_t)g->m * g->k);
        g->b = random_floats((size_t)g->k * g->n);
        g->c = random_floats((size_t)g->m * g->n);
    }
    double s = time_per_call(gemm_body, g, calls, min_time, reps);
    return 2.0 * g->m * g->n * g->k / s / 1e9;
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

static double bench_memcpy(struct copy *c, int *calls, double min_time, int reps)
{
    if (!c->dst) {
        c->dst = aligned_alloc(4096, c->n);
        c->src = aligned_alloc(4096, c->n);
        if (!c->dst || !c->src) {
            fprintf(stderr, "blas_raw: out of memory\n");
            exit(1);
        }
        memset(c->dst, 2, c->n); /* fault the pages in: this measures copying, not page faults */
        memset((char *)c->src, 1, c->n);
    }
    double s = time_per_call(copy_body, c, calls, min_time, reps);
    if (c->dst[c->n - 1] != 1) fprintf(stderr, "blas_raw: memcpy check failed\n");
    return 2.0 * (double)c->n / s / 1e9;
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

static double bench_add(struct add *c, int *calls, double min_time, int reps)
{
    if (!c->a) {
        c->a = random_floats(c->n);
        c->b = random_floats(c->n);
        c->out = random_floats(c->n);
    }
    double s = time_per_call(add_body, c, calls, min_time, reps);
    return 3.0 * (double)(c->n * sizeof(float)) / s / 1e9;
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
    size_t n = (size_t)16 << 20; /* 16M float32 = 64 MiB */
    struct gemm big = {1024, 1024, 1024, NULL, NULL, NULL}, small = {64, 784, 256, NULL, NULL, NULL};
    struct copy copy = {NULL, NULL, n * sizeof(float), threads};
    struct add add = {NULL, NULL, NULL, n, threads};
    printf("INFO blas %s, threads %d\n", openblas_get_config(), openblas_get_num_threads());
    printf("ROWS sgemm_1024x1024x1024 sgemm_64x784x256 memcpy add_c\n");
    fflush(stdout);
    char line[256], name[128];
    int calls;
    while (fgets(line, sizeof line, stdin)) {
        if (sscanf(line, "%127s %d", name, &calls) != 2) continue;
        double v;
        const char *unit = "GB/s";
        if (!strcmp(name, "sgemm_1024x1024x1024")) v = bench_sgemm(&big, &calls, min_time, reps);
        else if (!strcmp(name, "sgemm_64x784x256")) v = bench_sgemm(&small, &calls, min_time, reps);
        else if (!strcmp(name, "memcpy")) v = bench_memcpy(&copy, &calls, min_time, reps);
        else if (!strcmp(name, "add_c")) v = bench_add(&add, &calls, min_time, reps);
        else {
            printf("ERROR %s not a row of blas_raw\n", name);
            fflush(stdout);
            continue;
        }
        if (name[0] == 's') unit = "GFLOP/s";
        printf("RESULT %s %.4f %s %d\n", name, v, unit, calls);
        fflush(stdout);
    }
    return 0;
}
