/* ref_view.c - see ref_view.h: the rounding store and the views of contiguous arrays. */
#include "ref_view.h"

#include <math.h>

/*
 * Rounding double -> float "to odd" (inexact results take the neighbour whose last bit is 1)
 * keeps a sticky bit, so a second rounding to nearest-even into a format with at least two bits
 * fewer (f16: 11, bf16: 8 of float's 24) equals rounding the double directly.  Overflow to
 * infinity is already the right answer for both 16-bit formats.
 */
static float to_f32_odd(double v)
{
    float f = (float)v;
    if ((double)f == v || isnan(v) || isinf(f))
        return f;
    if (pssm_f32_bits(f) & 1u)
        return f;
    return nextafterf(f, v > (double)f ? INFINITY : -INFINITY);
}

uint16_t pssm_cpu_to_f16(double v) { return pssm_f32_to_f16(to_f32_odd(v)); }
uint16_t pssm_cpu_to_bf16(double v) { return pssm_f32_to_bf16(to_f32_odd(v)); }

void pssm_ref_put(const pssm_ref_out *v, int64_t i0, int64_t i1, int64_t i2, int64_t i3,
                  double x)
{
    const int64_t off = PSSM_REF_OFF(v, i0, i1, i2, i3);
    unsigned char *p = (unsigned char *)v->data;
    float f;
    uint16_t h;
    switch (v->kind) {
    case PSSM_REF_F64: memcpy(p + off * 8, &x, 8); break;
    case PSSM_REF_F32: f = (float)x; memcpy(p + off * 4, &f, 4); break;
    case PSSM_REF_F16: h = pssm_cpu_to_f16(x); memcpy(p + off * 2, &h, 2); break;
    case PSSM_REF_BF16: h = pssm_cpu_to_bf16(x); memcpy(p + off * 2, &h, 2); break;
    case PSSM_REF_I32: case PSSM_REF_I64: break; /* never an output of a float computation */
    }
}

/* The element offsets are off + k * st for k < n only: a stride past the last element (a
 * stride-step after it, as in `off += st`) may overflow, e.g. a size-1 axis whose stride is
 * INT64_MAX (found by the fuzzer). */
void pssm_ref_gather(const pssm_ref_in *v, int64_t i0, int64_t i1, int64_t i2, int64_t i3,
                     int axis, int64_t n, double *dst)
{
    const int64_t st = v->st[axis];
    const unsigned char *p = (const unsigned char *)v->data;
    int64_t off = PSSM_REF_OFF(v, i0, i1, i2, i3);
    float f;
    uint16_t h;
    switch (v->kind) {
    case PSSM_REF_F64:
        for (int64_t k = 0; k < n; k++)
            memcpy(&dst[k], p + (off + k * st) * 8, 8);
        return;
    case PSSM_REF_F32:
        for (int64_t k = 0; k < n; k++) {
            memcpy(&f, p + (off + k * st) * 4, 4);
            dst[k] = f;
        }
        return;
    case PSSM_REF_F16:
        for (int64_t k = 0; k < n; k++) {
            memcpy(&h, p + (off + k * st) * 2, 2);
            dst[k] = pssm_f16_to_f32(h);
        }
        return;
    case PSSM_REF_BF16:
        for (int64_t k = 0; k < n; k++) {
            memcpy(&h, p + (off + k * st) * 2, 2);
            dst[k] = pssm_bf16_to_f32(h);
        }
        return;
    case PSSM_REF_I32: case PSSM_REF_I64: break;
    }
    for (int64_t k = 0; k < n; k++) /* index views */
        dst[k] = pssm_ref_get(v, i0 + (axis == 0) * k, i1 + (axis == 1) * k,
                              i2 + (axis == 2) * k, i3 + (axis == 3) * k);
}

void pssm_ref_scatter(const pssm_ref_out *v, int64_t i0, int64_t i1, int64_t i2, int64_t i3,
                      int axis, int64_t n, const double *src)
{
    const int64_t st = v->st[axis];
    unsigned char *p = (unsigned char *)v->data;
    int64_t off = PSSM_REF_OFF(v, i0, i1, i2, i3);
    if (v->kind == PSSM_REF_F32) {
        for (int64_t k = 0; k < n; k++) {
            const float f = (float)src[k];
            memcpy(p + (off + k * st) * 4, &f, 4);
        }
        return;
    }
    for (int64_t k = 0; k < n; k++)
        pssm_ref_put(v, i0 + (axis == 0) * k, i1 + (axis == 1) * k, i2 + (axis == 2) * k,
                     i3 + (axis == 3) * k, src[k]);
}

/* Row-major strides of shape, in the leading ndim entries; 0 after them. */
static void dense_strides(int ndim, const int64_t *shape, int64_t st[4])
{
    int64_t s = 1;
    for (int i = 3; i >= 0; i--) {
        st[i] = i < ndim ? s : 0;
        if (i < ndim)
            s *= shape[i];
    }
}

pssm_ref_in pssm_ref_dense(const double *v, int ndim, const int64_t *shape)
{
    pssm_ref_in r = {v, PSSM_REF_F64, {0, 0, 0, 0}};
    dense_strides(ndim, shape, r.st);
    return r;
}

pssm_ref_in pssm_ref_dense_i32(const int32_t *v, int ndim, const int64_t *shape)
{
    pssm_ref_in r = {v, PSSM_REF_I32, {0, 0, 0, 0}};
    dense_strides(ndim, shape, r.st);
    return r;
}

pssm_ref_out pssm_ref_dense_out(double *v, int ndim, const int64_t *shape)
{
    pssm_ref_out r = {v, PSSM_REF_F64, {0, 0, 0, 0}};
    dense_strides(ndim, shape, r.st);
    return r;
}
