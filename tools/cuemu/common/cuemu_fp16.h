/* tools/cuemu/common/cuemu_fp16.h: bit-exact host conversions between float and the two 16-bit
 * storage types, for the CUDA emulation's library stand-ins (cuBLAS, cuDNN, NCCL).
 * defines: cuemu_half_to_float, cuemu_float_to_half, cuemu_bf16_to_float, cuemu_float_to_bf16.
 *
 * Values travel as their raw 16-bit patterns (uint16_t), the layout of __half and
 * __nv_bfloat16 in device memory. cuda_fp16.h's host code is C++ only, so these are written
 * out: widening is exact; narrowing rounds to nearest, ties to even (what __float2half_rn and
 * __float2bfloat16_rn do), overflows to infinity, keeps subnormals, and turns a NaN into 0x7fff,
 * the canonical NaN CUDA's own conversions return, so a NaN has the same bits as on a GPU. */
#ifndef CUEMU_FP16_H
#define CUEMU_FP16_H

#include <stdint.h>
#include <string.h>

static inline uint32_t cuemu_f32_bits(float f)
{
    uint32_t u;
    memcpy(&u, &f, sizeof u);
    return u;
}

static inline float cuemu_bits_f32(uint32_t u)
{
    float f;
    memcpy(&f, &u, sizeof f);
    return f;
}

/* binary16: 1 sign, 5 exponent (bias 15), 10 fraction bits */
static inline float cuemu_half_to_float(uint16_t h)
{
    uint32_t sign = (uint32_t)(h & 0x8000u) << 16;
    uint32_t exp = (h >> 10) & 0x1fu, frac = h & 0x3ffu;
    if (exp == 0x1f) return cuemu_bits_f32(sign | 0x7f800000u | (frac << 13)); /* inf, NaN */
    if (exp == 0) {
        /* zero or subnormal: frac * 2^-24, exact in float */
        float v = (float)frac * (1.0f / 16777216.0f);
        return sign ? -v : v;
    }
    return cuemu_bits_f32(sign | ((exp + 112u) << 23) | (frac << 13)); /* rebias 15 -> 127 */
}

static inline uint16_t cuemu_float_to_half(float f)
{
    uint32_t u = cuemu_f32_bits(f);
    uint16_t sign = (uint16_t)((u >> 16) & 0x8000u);
    uint32_t exp = (u >> 23) & 0xffu, frac = u & 0x7fffffu;
    if (exp == 0xff) return frac ? 0x7fffu : (uint16_t)(sign | 0x7c00u); /* NaN; inf stays inf */
    int e = (int)exp - 127; /* unbiased exponent of f */
    if (e > 15) return (uint16_t)(sign | 0x7c00u);
    if (e >= -14) {
        /* normal half: keep 10 fraction bits, round the 13 dropped bits to nearest even; a
         * carry out of the fraction correctly bumps the exponent (up to infinity) */
        uint32_t h = ((uint32_t)(e + 15) << 10) | (frac >> 13);
        uint32_t rest = frac & 0x1fffu;
        if (rest > 0x1000u || (rest == 0x1000u && (h & 1u))) h++;
        return (uint16_t)(sign | h);
    }
    if (e < -25) return sign; /* below half the smallest subnormal (2^-25): rounds to zero */
    /* subnormal half, e in [-25, -15]: f = mant * 2^(e-23) = m * 2^-24 with m = mant * 2^(e+1),
     * so m is mant shifted right by -e-1 (14 to 24) bits, then rounded */
    uint32_t mant = frac | 0x800000u; /* the 24 significant bits of f */
    int shift = -e - 1;
    uint32_t m = mant >> shift;
    uint32_t rest = mant & ((1u << shift) - 1u), halfway = 1u << (shift - 1);
    if (rest > halfway || (rest == halfway && (m & 1u))) m++; /* may reach 0x400: min normal */
    return (uint16_t)(sign | m);
}

/* bfloat16: the top 16 bits of a float */
static inline float cuemu_bf16_to_float(uint16_t b)
{
    return cuemu_bits_f32((uint32_t)b << 16);
}

static inline uint16_t cuemu_float_to_bf16(float f)
{
    uint32_t u = cuemu_f32_bits(f);
    if ((u & 0x7fffffffu) > 0x7f800000u) return 0x7fffu; /* the canonical NaN */
    u += 0x7fffu + ((u >> 16) & 1u); /* round to nearest even; overflow carries into inf */
    return (uint16_t)(u >> 16);
}

#endif
