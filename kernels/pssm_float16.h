/*
 * pssm_float16.h - IEEE binary16 and bfloat16 <-> float conversions in portable C.
 *
 * Used by the cpu oracle, the sim target of the kernel dialect and the tests, so that every
 * host-side path rounds exactly alike: round to nearest, ties to even; NaN stays NaN; overflow
 * gives infinity; subnormals are kept.  Header-only (static inline), plain C with no host
 * library in it: it sits in kernels/ because the dialect's sim target needs it, and kernels/
 * include nothing of the host library; the host side includes it from here.
 */
#ifndef PSSM_FLOAT16_H
#define PSSM_FLOAT16_H

#include <stdint.h>
#include <string.h>

static inline uint32_t pssm_f32_bits(float f)
{
    uint32_t u;
    memcpy(&u, &f, sizeof u);
    return u;
}

static inline float pssm_bits_f32(uint32_t u)
{
    float f;
    memcpy(&f, &u, sizeof f);
    return f;
}

static inline float pssm_bf16_to_f32(uint16_t h) { return pssm_bits_f32((uint32_t)h << 16); }

static inline uint16_t pssm_f32_to_bf16(float f)
{
    uint32_t u = pssm_f32_bits(f);
    if ((u & 0x7fffffffu) > 0x7f800000u) /* NaN: keep it quiet and a NaN */
        return (uint16_t)((u >> 16) | 0x40u);
    u += 0x7fffu + ((u >> 16) & 1u); /* round to nearest even */
    return (uint16_t)(u >> 16);
}

static inline float pssm_f16_to_f32(uint16_t h)
{
    uint32_t sign = (uint32_t)(h & 0x8000u) << 16;
    uint32_t exp = (h >> 10) & 0x1fu;
    uint32_t man = h & 0x3ffu;
    if (exp == 0x1fu) /* inf / NaN */
        return pssm_bits_f32(sign | 0x7f800000u | (man << 13));
    if (exp == 0) {
        if (man == 0)
            return pssm_bits_f32(sign);
        /* subnormal: value = man * 2^-24, exact in float */
        float v = (float)man * 5.9604644775390625e-8f;
        return sign ? -v : v;
    }
    return pssm_bits_f32(sign | ((exp + 112u) << 23) | (man << 13));
}

static inline uint16_t pssm_f32_to_f16(float f)
{
    uint32_t u = pssm_f32_bits(f);
    uint16_t sign = (uint16_t)((u >> 16) & 0x8000u);
    uint32_t a = u & 0x7fffffffu;
    if (a > 0x7f800000u) /* NaN */
        return (uint16_t)(sign | 0x7e00u | ((a >> 13) & 0x3ffu));
    if (a >= 0x477ff000u) /* rounds to >= 65520: infinity */
        return (uint16_t)(sign | 0x7c00u);
    if (a < 0x38800000u) { /* below the smallest normal half (2^-14): subnormal or zero */
        if (a < 0x33000000u) /* below half of the smallest subnormal (2^-25): zero */
            return sign;
        uint32_t e = a >> 23;            /* 102..112 */
        uint32_t m = (a & 0x7fffffu) | 0x800000u;
        uint32_t shift = 126u - e;       /* 14..24: m * 2^(e-150) in units of 2^-24 */
        uint32_t q = m >> shift;
        uint32_t rem = m & ((1u << shift) - 1u);
        uint32_t half = 1u << (shift - 1u);
        if (rem > half || (rem == half && (q & 1u)))
            q++;
        return (uint16_t)(sign | q);
    }
    /* normal: rebias, round the 13 dropped bits to nearest even */
    uint32_t r = a - 0x38000000u; /* exponent 127 -> 15 */
    r += 0xfffu + ((r >> 13) & 1u);
    return (uint16_t)(sign | (r >> 13));
}

#endif /* PSSM_FLOAT16_H */
