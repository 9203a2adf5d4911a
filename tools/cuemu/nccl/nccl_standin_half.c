/* cuemu/nccl/nccl_standin_half.c: IEEE binary16 and bfloat16 to and from float, bit-exact.
 * defines: standin_half_to_float, standin_float_to_half, standin_bf16_to_float,
 *          standin_float_to_bf16 (nccl_standin.h).
 *
 * Written on integers rather than with _Float16 or F16C so that every build and machine gives
 * the same bits. Rounding is to nearest, ties to even, with subnormals and overflow to infinity
 * as IEEE 754 says; a NaN becomes 0x7fff, the canonical NaN CUDA's own host conversions
 * (__float2half_rn, __float2bfloat16_rn) return, so a NaN reduces to the same bits here as in
 * CUDA's host code. test_nccl_standin.c checks these against a reference that rounds by
 * searching the representable values instead. */
#include "nccl_standin.h"

#include <string.h>

static uint32_t bits_of(float f)
{
    uint32_t u;
    memcpy(&u, &f, sizeof u);
    return u;
}

static float float_of(uint32_t u)
{
    float f;
    memcpy(&f, &u, sizeof f);
    return f;
}

/* binary16: 1 sign, 5 exponent (bias 15), 10 mantissa bits; every value is exact in float. */
float standin_half_to_float(uint16_t h)
{
    uint32_t sign = (uint32_t)(h & 0x8000u) << 16;
    uint32_t exp = (h >> 10) & 0x1fu, mant = h & 0x3ffu;
    if (exp == 0x1f) return float_of(sign | 0x7f800000u | (mant << 13));       /* inf, NaN */
    if (exp != 0) return float_of(sign | ((exp + 112u) << 23) | (mant << 13)); /* 127 - 15 */
    if (mant == 0) return float_of(sign);
    /* subnormal: mant * 2^-24, normalised into float's wider exponent range */
    int e = -1;
    do {
        mant <<= 1;
        e++;
    } while (!(mant & 0x400u));
    return float_of(sign | ((uint32_t)(112 - e) << 23) | ((mant & 0x3ffu) << 13));
}

uint16_t standin_float_to_half(float f)
{
    uint32_t x = bits_of(f);
    uint16_t sign = (uint16_t)((x >> 16) & 0x8000u);
    uint32_t ax = x & 0x7fffffffu;
    if (ax > 0x7f800000u) return 0x7fffu;                     /* NaN */
    if (ax >= 0x477ff000u) return (uint16_t)(sign | 0x7c00u); /* >= 65520 (or inf): inf */
    if (ax >= 0x38800000u) {
        /* normal half (>= 2^-14): rebias the exponent, round away the low 13 mantissa bits;
         * a carry out of the mantissa correctly bumps the exponent */
        uint32_t r = ax - 0x38000000u;
        r += 0xfffu + ((r >> 13) & 1u);
        return (uint16_t)(sign | (r >> 13));
    }
    if (ax <= 0x33000000u) return sign; /* <= 2^-25: 0 (2^-25 itself ties to the even 0) */
    /* subnormal half: the value in units of 2^-24, i.e. the 24-bit significand shifted right
     * by 126 - exponent (14..24 bits here), rounded; 0x400 is the smallest normal, as it
     * should be when the rounding carries */
    uint32_t shift = 126u - (ax >> 23);
    uint32_t m = (ax & 0x7fffffu) | 0x800000u;
    uint32_t q = m >> shift, rem = m & ((1u << shift) - 1u), halfway = 1u << (shift - 1u);
    if (rem > halfway || (rem == halfway && (q & 1u))) q++;
    return (uint16_t)(sign | q);
}

/* bfloat16 is float's upper half: same exponent, 7 mantissa bits. */
float standin_bf16_to_float(uint16_t b)
{
    return float_of((uint32_t)b << 16);
}

uint16_t standin_float_to_bf16(float f)
{
    uint32_t x = bits_of(f);
    if ((x & 0x7fffffffu) > 0x7f800000u) return 0x7fffu; /* NaN */
    /* round the low 16 bits to nearest even; large finite values carry into inf, as IEEE says */
    x += 0x7fffu + ((x >> 16) & 1u);
    return (uint16_t)(x >> 16);
}
