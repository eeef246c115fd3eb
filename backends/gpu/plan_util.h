/*
 * plan_util.h - small arithmetic the launch planners of backends/gpu/ops_*.c share.
 */
#ifndef PSSM_GPU_PLAN_UTIL_H
#define PSSM_GPU_PLAN_UTIL_H

#include "portssm.h"

#include <stddef.h>
#include <stdint.h>

/* Index of an activation dtype in the planners' [3] kernel tables: f32, f16, bf16. */
static inline int pssm_plan_dtype_index(portssm_dtype t)
{
    return t == PORTSSM_F32 ? 0 : t == PORTSSM_F16 ? 1 : 2;
}

/* Bytes of one element of an activation dtype (the modules do not link the library's
 * portssm_dtype_size). */
static inline size_t pssm_plan_act_size(portssm_dtype t) { return t == PORTSSM_F32 ? 4 : 2; }

static inline int64_t pssm_plan_cdiv(int64_t a, int64_t b) { return (a + b - 1) / b; }

/* |s| as unsigned: a size-1 dimension may carry any stride, INT64_MIN included, whose negation
 * overflows int64_t. */
static inline uint64_t pssm_plan_stride_mag(int64_t s)
{
    return s < 0 ? 0 - (uint64_t)s : (uint64_t)s;
}

/* Whether every element of t lies within `span_max` (at most INT32_MAX) elements of its first,
 * or t is absent: a kernel may then index it by 32-bit offsets.  Dimensions of size 1 do not
 * count, whatever their stride (their index is always 0). */
static inline int pssm_plan_fits_span(const portssm_tensor *t, int64_t span_max)
{
    uint64_t span = 0;
    for (int i = 0; t->data && i < t->ndim; i++) {
        if (t->shape[i] <= 1)
            continue;
        const uint64_t m = pssm_plan_stride_mag(t->stride[i]);
        if (m > (uint64_t)span_max || (uint64_t)(t->shape[i] - 1) > (uint64_t)span_max)
            return 0;
        span += (uint64_t)(t->shape[i] - 1) * m;
        if (span > (uint64_t)span_max)
            return 0;
    }
    return 1;
}

/* log2 of a power of two. */
static inline int pssm_plan_ilog2(int64_t v)
{
    int l = 0;
    while (((int64_t)1 << l) < v)
        l++;
    return l;
}

static inline int64_t pssm_plan_pow2_ceil(int64_t v)
{
    int64_t p = 1;
    while (p < v)
        p <<= 1;
    return p;
}

static inline int64_t pssm_plan_gcd(int64_t a, int64_t b)
{
    while (b) {
        const int64_t t = a % b;
        a = b;
        b = t;
    }
    return a;
}

/* 16-byte accesses to groups of 8 steps along dim `tdim` (a multiple of 8 elements of 16-bit
 * data, two vectors of f32): stride 1 there, every other stride a multiple of the elements in 16
 * bytes, and the base 16-byte aligned. */
static inline int32_t pssm_plan_group_vec(const portssm_tensor *t, int tdim)
{
    const int64_t per = t->dtype == PORTSSM_F32 ? 4 : 8;
    if (!t->data || t->stride[tdim] != 1 || ((uintptr_t)t->data & 15u) != 0)
        return 0;
    for (int i = 0; i < t->ndim; i++)
        if (i != tdim && t->stride[i] % per != 0)
            return 0;
    return 1;
}

/* The first n strides of t into dst. */
static inline void pssm_plan_strides(int64_t *dst, const portssm_tensor *t, int n)
{
    for (int i = 0; i < n; i++)
        dst[i] = t->stride[i];
}

#endif
