/*
 * size_math.h - overflow-checked integer arithmetic: the one way the library multiplies and adds
 * sizes, strides and offsets that come from a caller's tensors before they are known to be
 * bounded (validation, tensor layouts, queries, the cpu oracle's scratch).
 *
 *   pssm_checked_mul / pssm_checked_add   any signs (strides may be negative): *out = a op b,
 *                                         0 when it does not fit int64 (*out then unspecified)
 *   pssm_size_mul / pssm_size_add         sizes (>= 0): the result, or -1 when it does not fit;
 *                                         -1 propagates, so an expression of them is checked
 *                                         once, at its end
 *
 * After validation a call's sizes are bounded by its work (PSSM_WORK_MAX in backend.h), and the
 * backends multiply them freely.
 */
#ifndef PSSM_SIZE_MATH_H
#define PSSM_SIZE_MATH_H

#include <stdint.h>

static inline int pssm_checked_mul(int64_t a, int64_t b, int64_t *out)
{
    return !__builtin_mul_overflow(a, b, out);
}

static inline int pssm_checked_add(int64_t a, int64_t b, int64_t *out)
{
    return !__builtin_add_overflow(a, b, out);
}

static inline int64_t pssm_size_mul(int64_t a, int64_t b)
{
    int64_t r;
    return a < 0 || b < 0 || !pssm_checked_mul(a, b, &r) ? -1 : r;
}

static inline int64_t pssm_size_add(int64_t a, int64_t b)
{
    int64_t r;
    return a < 0 || b < 0 || !pssm_checked_add(a, b, &r) ? -1 : r;
}

#endif /* PSSM_SIZE_MATH_H */
