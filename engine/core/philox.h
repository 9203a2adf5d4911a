/* core/philox.h: the Philox4x32-10 block function (Salmon et al., SC'11) and the transforms
 * from its 32-bit words to uniform and normal values, written once for host and device: the
 * CPU kernels (cpu/cpu_memory.c, ops/creation.c) and the CUDA kernels (cuda/cuda_random.cu)
 * include this header, so both draw the same stream bit for bit. The generator's state (seed,
 * offset) lives in core/rng.c.
 * defines: DDPL_HOST_DEVICE, ddpl_philox4x32, ddpl_philox_uniform, ddpl_philox_normal. */
#ifndef DDPL_CORE_PHILOX_H
#define DDPL_CORE_PHILOX_H

#include <math.h>
#include <stdint.h>

#ifdef __CUDACC__
#define DDPL_HOST_DEVICE __host__ __device__
#else
#define DDPL_HOST_DEVICE
#endif

/* Double multiply and add that nvcc may not fuse into an FMA (it does by default). Note: the
 * CPU build (gnu11 with -mfma, where GCC contracts by default) does fuse them in
 * cpu/cpu_memory.c, so float64 draws may differ in the last bit between CPU and CUDA. */
DDPL_HOST_DEVICE static inline double philox_mul_rn(double a, double b)
{
#ifdef __CUDA_ARCH__
    return __dmul_rn(a, b);
#else
    return a * b;
#endif
}

DDPL_HOST_DEVICE static inline double philox_add_rn(double a, double b)
{
#ifdef __CUDA_ARCH__
    return __dadd_rn(a, b);
#else
    return a + b;
#endif
}

/* Fills out[4] with block `block` of the stream `seed`: the counter is (block, 0), the key
 * the seed's two halves. */
DDPL_HOST_DEVICE static inline void ddpl_philox4x32(uint64_t seed, uint64_t block, uint32_t out[4])
{
    uint32_t c0 = (uint32_t)block, c1 = (uint32_t)(block >> 32), c2 = 0, c3 = 0;
    uint32_t k0 = (uint32_t)seed, k1 = (uint32_t)(seed >> 32);
    for (int round = 0; round < 10; round++) {
        uint64_t p0 = (uint64_t)0xD2511F53u * c0, p1 = (uint64_t)0xCD9E8D57u * c2;
        uint32_t hi0 = (uint32_t)(p0 >> 32), lo0 = (uint32_t)p0;
        uint32_t hi1 = (uint32_t)(p1 >> 32), lo1 = (uint32_t)p1;
        c0 = hi1 ^ c1 ^ k0;
        c1 = lo1;
        c2 = hi0 ^ c3 ^ k1;
        c3 = lo0;
        k0 += 0x9E3779B9u;
        k1 += 0xBB67AE85u;
    }
    out[0] = c0;
    out[1] = c1;
    out[2] = c2;
    out[3] = c3;
}

/* Uniform value in [a, b) from the 32-bit word u, computed in double: float64 takes 53 bits
 * from (u, u * 2654435761), the others 24 bits of u. f32_guard: the output is float32, whose
 * rounding can land on b, so the result is then moved just below b. The caller rounds the
 * double to its dtype. */
DDPL_HOST_DEVICE static inline double ddpl_philox_uniform(uint32_t u, double a, double b,
                                                          int is_f64, int f32_guard)
{
    double unit;
    if (is_f64) {
        uint64_t v = ((uint64_t)u << 21) ^ (uint64_t)(uint32_t)(u * 2654435761u);
        unit = (double)(v & ((1ull << 53) - 1)) * (1.0 / 9007199254740992.0);
    } else {
        unit = (double)((float)(u >> 8) * (1.0f / 16777216.0f));
    }
    double v = philox_add_rn(a, philox_mul_rn(b - a, unit));
    if (f32_guard && (float)v >= (float)b) v = (double)nextafterf((float)b, -INFINITY);
    return v;
}

/* Normal value (mean a, std b) from two 32-bit words by Box-Muller, u1 in (0, 1], u2 in
 * [0, 1), in double. */
DDPL_HOST_DEVICE static inline double ddpl_philox_normal(uint32_t u0, uint32_t u1, double a,
                                                         double b)
{
    double r1 = ((double)u0 + 1.0) * (1.0 / 4294967296.0);
    double r2 = (double)u1 * (1.0 / 4294967296.0);
    double m = philox_mul_rn(philox_mul_rn(b, sqrt(-2.0 * log(r1))),
                             cos(2.0 * 3.14159265358979323846 * r2));
    return philox_add_rn(a, m);
}

#endif
