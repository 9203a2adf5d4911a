/* spec/c/test_gemm_bf16.c: the bf16 GEMM (engine/cpu/cpu_gemm_bf16.c: AMX, and vdpbf16ps again
 * in a child where AMX was chosen) called directly,
 * for what the Lua API cannot reach: output layouts (row-major with a leading dimension,
 * column-major, strided in both dims), float32 and bfloat16 outputs, alpha and beta, and a fuzz
 * of random shapes and strides. Operands are small integers, so every product and partial sum
 * is exact in float32 and the result must equal a naive double loop, rounded once, bit for bit;
 * a stray write outside C's elements is caught by a guard value in every gap (and by ASan in
 * the sanitizer build). On a CPU without AVX512-BF16 the kernel cannot run and the test says so
 * (the widening path is covered by spec/tensor/matmul_bf16_spec.lua). */
#include <stdint.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <unistd.h>

#include "check.h"
#include "cpu/cpu_gemm_bf16.h"

#define GUARD 12288.0f /* in every element of C's buffer that C does not own (exact in bf16) */

static uint32_t rng_state = 12345;
static uint32_t next_rand(void)
{
    rng_state = rng_state * 1664525u + 1013904223u;
    return rng_state >> 8;
}
static int64_t rand_in(int64_t lo, int64_t hi) /* inclusive */
{
    return lo + (int64_t)(next_rand() % (uint32_t)(hi - lo + 1));
}

typedef struct {
    int64_t M, N, K;
    int64_t ars, acs, brs, bcs; /* operand strides (elements) */
    int64_t crs, ccs;           /* output strides */
    bool c_bf16;
    float alpha, beta;
} gemm_case;

/* Fills a buffer of `extent` bf16 values with small integers in [-4, 4]. */
static uint16_t *int_operand(int64_t extent)
{
    uint16_t *p = malloc((size_t)extent * sizeof *p);
    for (int64_t i = 0; i < extent; i++) p[i] = ddpl_float_to_bf16((float)rand_in(-4, 4));
    return p;
}

static int64_t extent_of(int64_t rows, int64_t cols, int64_t rs, int64_t cs)
{
    return (rows - 1) * rs + (cols - 1) * cs + 1;
}

static float load_c(const void *c, bool bf16, int64_t i)
{
    return bf16 ? ddpl_bf16_to_float(((const uint16_t *)c)[i]) : ((const float *)c)[i];
}
static void store_c(void *c, bool bf16, int64_t i, float v)
{
    if (bf16)
        ((uint16_t *)c)[i] = ddpl_float_to_bf16(v);
    else
        ((float *)c)[i] = v;
}

/* Runs one case; returns false (with a message) on the first wrong element. */
static bool run_case(const gemm_case *g)
{
    int64_t ea = extent_of(g->M, g->K, g->ars, g->acs), eb = extent_of(g->K, g->N, g->brs, g->bcs);
    int64_t ec = extent_of(g->M, g->N, g->crs, g->ccs);
    uint16_t *a = int_operand(ea), *b = int_operand(eb);
    size_t esz = g->c_bf16 ? 2 : 4;
    void *c = malloc((size_t)ec * esz);
    bool *owned = calloc((size_t)ec, 1);
    for (int64_t i = 0; i < g->M; i++)
        for (int64_t j = 0; j < g->N; j++) owned[i * g->crs + j * g->ccs] = true;
    for (int64_t e = 0; e < ec; e++)
        store_c(c, g->c_bf16, e, owned[e] ? (float)rand_in(-3, 3) : GUARD);
    float *before = malloc((size_t)ec * sizeof *before);
    for (int64_t e = 0; e < ec; e++) before[e] = load_c(c, g->c_bf16, e);

    int rc = cpu_bf16_gemm(g->M, g->N, g->K, g->alpha, (cpu_bf16_matrix){a, g->ars, g->acs},
                           (cpu_bf16_matrix){b, g->brs, g->bcs}, g->beta, c,
                           g->c_bf16 ? DDPL_BFLOAT16 : DDPL_FLOAT32, g->crs, g->ccs);
    bool ok = rc == 0;
    for (int64_t i = 0; ok && i < g->M; i++)
        for (int64_t j = 0; ok && j < g->N; j++) {
            double s = 0;
            for (int64_t k = 0; k < g->K; k++)
                s += (double)ddpl_bf16_to_float(a[i * g->ars + k * g->acs]) *
                     ddpl_bf16_to_float(b[k * g->brs + j * g->bcs]);
            int64_t e = i * g->crs + j * g->ccs;
            /* alpha * sum, then + beta * old, in float32 as the kernel (exact here) */
            float want = g->alpha * (float)s;
            if (g->beta != 0) want += g->beta * before[e];
            if (g->c_bf16) want = ddpl_bf16_to_float(ddpl_float_to_bf16(want));
            float got = load_c(c, g->c_bf16, e);
            if (got != want) {
                fprintf(stderr, "  (%lld,%lld) of %lldx%lldx%lld: %g, want %g\n", (long long)i,
                        (long long)j, (long long)g->M, (long long)g->N, (long long)g->K, got, want);
                ok = false;
            }
        }
    for (int64_t e = 0; ok && e < ec; e++)
        if (!owned[e] && load_c(c, g->c_bf16, e) != GUARD) {
            fprintf(stderr, "  wrote element %lld outside C\n", (long long)e);
            ok = false;
        }
    free(a);
    free(b);
    free(c);
    free(owned);
    free(before);
    return ok;
}

/* Row-major operands (lda = K, ldb = N) and output (ldc = N). */
static gemm_case plain(int64_t M, int64_t N, int64_t K, bool c_bf16)
{
    return (gemm_case){M, N, K, K, 1, N, 1, N, 1, c_bf16, 1.0f, 0.0f};
}

static void test_output_layouts(void)
{
    for (int bf = 0; bf < 2; bf++) {
        gemm_case g = plain(29, 45, 70, bf);
        CHECK(run_case(&g));
        g.crs = 50; /* a leading dimension: the row gaps hold guards */
        CHECK(run_case(&g));
        g.crs = 1, g.ccs = 31; /* column-major C with a gap after each column */
        CHECK(run_case(&g));
        g.crs = 2 * 45 + 1, g.ccs = 2; /* no unit stride: the float32 scratch then a scatter */
        CHECK(run_case(&g));
        g = plain(1, 45, 70, bf); /* one row, a column stride other than 1 */
        g.ccs = 3, g.crs = 1000;
        CHECK(run_case(&g));
        g = plain(45, 1, 70, bf); /* one column, any row stride */
        g.crs = 7, g.ccs = 1000;
        CHECK(run_case(&g));
    }
}

static void test_alpha_beta(void)
{
    float ab[][2] = {{1, 0}, {2, 0}, {1, 1}, {0.5f, -2}, {-1, 0.25f}};
    for (int bf = 0; bf < 2; bf++)
        for (size_t i = 0; i < sizeof ab / sizeof ab[0]; i++) {
            gemm_case g = plain(30, 70, 1100, bf); /* two K slices: beta on the last only */
            g.alpha = ab[i][0], g.beta = ab[i][1];
            CHECK(run_case(&g));
            g.crs = 1, g.ccs = 30; /* and through the transposed problem */
            CHECK(run_case(&g));
        }
}

static void test_block_edges(void)
{
    /* tiles of 12 x 32, K slices of 1024, row blocks of 96, column blocks of 2048: each size
     * on, one short of and one past an edge */
    int64_t ms[] = {1, 11, 12, 13, 95, 96, 97}, ns[] = {1, 31, 32, 33, 2047, 2049};
    int64_t ks[] = {1, 2, 3, 1023, 1024, 1025, 2049};
    for (size_t i = 0; i < sizeof ms / sizeof ms[0]; i++) {
        gemm_case g = plain(ms[i], 40, 37, i & 1);
        CHECK(run_case(&g));
    }
    for (size_t i = 0; i < sizeof ns / sizeof ns[0]; i++) {
        gemm_case g = plain(5, ns[i], 9, i & 1);
        CHECK(run_case(&g));
    }
    for (size_t i = 0; i < sizeof ks / sizeof ks[0]; i++) {
        gemm_case g = plain(13, 35, ks[i], i & 1);
        CHECK(run_case(&g));
    }
}

/* Transposed and strided operands with random sizes and gaps, random output layouts, on the
 * engine's threads (a split over rows or columns) and on one. */
static void test_fuzz(int cases)
{
    for (int t = 0; t < cases; t++) {
        int64_t M = rand_in(1, 150), N = rand_in(1, 150), K = rand_in(1, 1300);
        gemm_case g = {.M = M, .N = N, .K = K, .c_bf16 = next_rand() & 1, .alpha = 1, .beta = 0};
        int64_t ga = rand_in(0, 3), gb = rand_in(0, 3), gc = rand_in(0, 3);
        switch (next_rand() % 3) { /* A: row-major, transposed, or strided in both */
        case 0:
            g.ars = K + ga, g.acs = 1;
            break;
        case 1:
            g.ars = 1, g.acs = M + ga;
            break;
        default:
            g.ars = 2 * K + ga, g.acs = 2;
        }
        switch (next_rand() % 3) {
        case 0:
            g.brs = N + gb, g.bcs = 1;
            break;
        case 1:
            g.brs = 1, g.bcs = K + gb;
            break;
        default:
            g.brs = 1 + 2 * N + gb, g.bcs = 2;
        }
        switch (next_rand() % 3) {
        case 0:
            g.crs = N + gc, g.ccs = 1;
            break;
        case 1:
            g.crs = 1, g.ccs = M + gc;
            break;
        default:
            g.crs = 2 * N + gc, g.ccs = 2;
        }
        if (next_rand() & 1) g.beta = (float)rand_in(-2, 2), g.alpha = (float)rand_in(-2, 2);
        ddpl_set_num_threads(next_rand() & 1 ? 2 : 1);
        if (!run_case(&g)) {
            fprintf(stderr, "  fuzz case %d: strides a (%lld,%lld) b (%lld,%lld) c (%lld,%lld)\n",
                    t, (long long)g.ars, (long long)g.acs, (long long)g.brs, (long long)g.bcs,
                    (long long)g.crs, (long long)g.ccs);
            CHECK(false);
            return;
        }
    }
    CHECK(true);
}

/* Where AMX was chosen, the same checks again in a child on the vdpbf16ps kernel
 * (DDPLUA_CPU_BF16_GEMM=avx512_bf16 is read once, at the first product, so a fresh process). */
static void test_avx512_kernel_too(const char *self)
{
    if (strcmp(cpu_bf16_gemm_kernel(), "amx") != 0) return;
    pid_t pid = fork();
    if (pid == 0) {
        setenv("DDPLUA_CPU_BF16_GEMM", "avx512_bf16", 1);
        execl(self, self, (char *)NULL);
        _exit(127);
    }
    int status = 0;
    CHECK(pid > 0 && waitpid(pid, &status, 0) == pid);
    CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0);
}

int main(int argc, char **argv)
{
    (void)argc;
    if (!cpu_bf16_gemm_available()) {
        printf("test_gemm_bf16: this CPU has no AVX512-BF16; the kernel cannot run here\n");
        return 0;
    }
    printf("test_gemm_bf16: kernel %s\n", cpu_bf16_gemm_kernel());
    test_output_layouts();
    test_alpha_beta();
    test_block_edges();
    int threads = ddpl_get_num_threads();
    test_fuzz(getenv("DDPLUA_FUZZ_CASES") ? atoi(getenv("DDPLUA_FUZZ_CASES")) : 60);
    ddpl_set_num_threads(threads);
    fflush(stdout);
    test_avx512_kernel_too(argv[0]);
    return check_finish();
}
