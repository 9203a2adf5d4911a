/* bench/bf16_peak.c: the physical bound of one core for bench/bf16: how many floating-point
 * operations a core retires per second in a loop of independent `vdpbf16ps` (bf16 dot products,
 * 64 flops per zmm instruction) and of `vfmadd231ps` on zmm and ymm (float32 FMA, 32 and 16
 * flops), 16 accumulators deep so that latency never limits the loop. Prints
 *   RESULT bf16_dot_peak <GFLOP/s>, RESULT fma_zmm_peak, RESULT fma_ymm_peak
 * (bf16_dot_peak 0 where the CPU has no AVX512-BF16). Built by bench/bf16 with gcc. */
#include <stdio.h>
#include <time.h>

static double now(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

#define X16(op, a, b)                                                                              \
    op " %%" a ",%%" b ",%%zmm0\n" op " %%" a ",%%" b ",%%zmm1\n" op " %%" a ",%%" b ",%%zmm2\n"    \
    op " %%" a ",%%" b ",%%zmm3\n" op " %%" a ",%%" b ",%%zmm4\n" op " %%" a ",%%" b ",%%zmm5\n"    \
    op " %%" a ",%%" b ",%%zmm6\n" op " %%" a ",%%" b ",%%zmm7\n" op " %%" a ",%%" b ",%%zmm8\n"    \
    op " %%" a ",%%" b ",%%zmm9\n" op " %%" a ",%%" b ",%%zmm10\n" op " %%" a ",%%" b ",%%zmm11\n"  \
    op " %%" a ",%%" b ",%%zmm12\n" op " %%" a ",%%" b ",%%zmm13\n" op " %%" a ",%%" b ",%%zmm14\n" \
    op " %%" a ",%%" b ",%%zmm15\n"

/* seconds for n iterations of 16 instructions; kind 0 bf16 dot, 1 fma zmm, 2 fma ymm */
static double loop(int kind, long n)
{
    double t = now();
    if (kind == 0)
        __asm__ volatile("vpxord %%zmm30,%%zmm30,%%zmm30\n vpxord %%zmm31,%%zmm31,%%zmm31\n"
                         "1:\n" X16("vdpbf16ps", "zmm30", "zmm31") "dec %0\n jnz 1b\n"
                         : "+r"(n)::"cc", "memory");
    else if (kind == 1)
        __asm__ volatile("vpxord %%zmm30,%%zmm30,%%zmm30\n vpxord %%zmm31,%%zmm31,%%zmm31\n"
                         "1:\n" X16("vfmadd231ps", "zmm30", "zmm31") "dec %0\n jnz 1b\n"
                         : "+r"(n)::"cc", "memory");
    else /* the same loop on ymm: vfmadd231ps ymm30, ymm31, ymmN via the zmm names' low halves */
        __asm__ volatile("vpxord %%zmm30,%%zmm30,%%zmm30\n vpxord %%zmm31,%%zmm31,%%zmm31\n"
                         "1:\n"
                         "vfmadd231ps %%ymm30,%%ymm31,%%ymm0\n vfmadd231ps %%ymm30,%%ymm31,%%ymm1\n"
                         "vfmadd231ps %%ymm30,%%ymm31,%%ymm2\n vfmadd231ps %%ymm30,%%ymm31,%%ymm3\n"
                         "vfmadd231ps %%ymm30,%%ymm31,%%ymm4\n vfmadd231ps %%ymm30,%%ymm31,%%ymm5\n"
                         "vfmadd231ps %%ymm30,%%ymm31,%%ymm6\n vfmadd231ps %%ymm30,%%ymm31,%%ymm7\n"
                         "vfmadd231ps %%ymm30,%%ymm31,%%ymm8\n vfmadd231ps %%ymm30,%%ymm31,%%ymm9\n"
                         "vfmadd231ps %%ymm30,%%ymm31,%%ymm10\n vfmadd231ps %%ymm30,%%ymm31,%%ymm11\n"
                         "vfmadd231ps %%ymm30,%%ymm31,%%ymm12\n vfmadd231ps %%ymm30,%%ymm31,%%ymm13\n"
                         "vfmadd231ps %%ymm30,%%ymm31,%%ymm14\n vfmadd231ps %%ymm30,%%ymm31,%%ymm15\n"
                         "dec %0\n jnz 1b\n"
                         : "+r"(n)::"cc", "memory");
    return now() - t;
}

int main(void)
{
    const long n = 50000000; /* ~0.2 s per loop on a 3.5 GHz core */
    const double flops[3] = {64, 32, 16};
    const char *name[3] = {"bf16_dot_peak", "fma_zmm_peak", "fma_ymm_peak"};
    for (int kind = 0; kind < 3; kind++) {
        if (kind == 0 && !__builtin_cpu_supports("avx512bf16")) {
            printf("RESULT %s 0\n", name[kind]);
            continue;
        }
        if (kind == 1 && !__builtin_cpu_supports("avx512f")) {
            printf("RESULT %s 0\n", name[kind]);
            continue;
        }
        double best = 1e30;
        for (int r = 0; r < 3; r++) {
            double t = loop(kind, n);
            if (t < best) best = t;
        }
        printf("RESULT %s %.1f\n", name[kind], (double)n * 16 * flops[kind] / best / 1e9);
    }
    return 0;
}
