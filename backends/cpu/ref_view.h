/*
 * ref_view.h - how the reference math (ref.h) reads and writes its arrays: a typed strided view.
 *
 * A view is a data pointer, an element type and one stride per index (in elements).  Element
 * (i0,i1,i2,i3) of the shape ref.h writes beside the field (unused trailing indices 0) lies at
 * i0*st[0] + i1*st[1] + i2*st[2] + i3*st[3].  The cpu backend points views straight at the
 * caller's tensors, so the oracle reads each input where it lies (a broadcast, stride-0
 * dimension costs nothing) and writes each output element once, rounded once from its double
 * value; the tests point them at contiguous double arrays (PSSM_REF_IN, PSSM_REF_OUT).
 * Offsets are int64_t: tensors past 2^31 elements are ordinary.
 */
#ifndef PSSM_CPU_REF_VIEW_H
#define PSSM_CPU_REF_VIEW_H

#include "../../kernels/pssm_float16.h"

#include <stdint.h>
#include <string.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef enum pssm_ref_kind {
    PSSM_REF_F64, /* the tests' arrays, and nothing the public API passes */
    PSSM_REF_F32,
    PSSM_REF_F16,
    PSSM_REF_BF16,
    PSSM_REF_I32,
    PSSM_REF_I64 /* the cpu backend's own index arrays (state slots) */
} pssm_ref_kind;

/* data == NULL: the optional input is absent / the optional output is not wanted. */
typedef struct pssm_ref_in {
    const void *data;
    pssm_ref_kind kind;
    int64_t st[4];
} pssm_ref_in;

typedef struct pssm_ref_out {
    void *data;
    pssm_ref_kind kind;
    int64_t st[4];
} pssm_ref_out;

#define PSSM_REF_OFF(v, i0, i1, i2, i3)                                                       \
    ((int64_t)(i0) * (v)->st[0] + (int64_t)(i1) * (v)->st[1] + (int64_t)(i2) * (v)->st[2] +   \
     (int64_t)(i3) * (v)->st[3])

/* Element (i0,i1,i2,i3) of a float (or index) view, exactly, as a double. */
static inline double pssm_ref_get(const pssm_ref_in *v, int64_t i0, int64_t i1, int64_t i2,
                                  int64_t i3)
{
    const int64_t off = PSSM_REF_OFF(v, i0, i1, i2, i3);
    const unsigned char *p = (const unsigned char *)v->data;
    double d;
    float f;
    uint16_t h;
    int32_t i;
    int64_t l;
    switch (v->kind) {
    case PSSM_REF_F64: memcpy(&d, p + off * 8, 8); return d;
    case PSSM_REF_F32: memcpy(&f, p + off * 4, 4); return f;
    case PSSM_REF_F16: memcpy(&h, p + off * 2, 2); return pssm_f16_to_f32(h);
    case PSSM_REF_BF16: memcpy(&h, p + off * 2, 2); return pssm_bf16_to_f32(h);
    case PSSM_REF_I32: memcpy(&i, p + off * 4, 4); return i;
    case PSSM_REF_I64: memcpy(&l, p + off * 8, 8); return (double)l;
    }
    return 0.0;
}

/* Element of an index view (I32 or I64). */
static inline int64_t pssm_ref_index(const pssm_ref_in *v, int64_t i0, int64_t i1, int64_t i2,
                                     int64_t i3)
{
    const int64_t off = PSSM_REF_OFF(v, i0, i1, i2, i3);
    const unsigned char *p = (const unsigned char *)v->data;
    if (v->kind == PSSM_REF_I64) {
        int64_t l;
        memcpy(&l, p + off * 8, 8);
        return l;
    }
    int32_t i;
    memcpy(&i, p + off * 4, 4);
    return i;
}

/* Writes element (i0,i1,i2,i3), rounded once from x to the view's type (F64: x itself). */
void pssm_ref_put(const pssm_ref_out *v, int64_t i0, int64_t i1, int64_t i2, int64_t i3,
                  double x);

/* n consecutive elements along index `axis` (0..3) from (i0,i1,i2,i3) as doubles, exactly:
 * dst[k] = element with that index + k.  The same values as n pssm_ref_get calls, with the
 * element type looked at once per row (the hot loops read their operands row by row). */
void pssm_ref_gather(const pssm_ref_in *v, int64_t i0, int64_t i1, int64_t i2, int64_t i3,
                     int axis, int64_t n, double *dst);

/* The other way: writes src[k] to the n consecutive elements along `axis`, each rounded once
 * as pssm_ref_put rounds it. */
void pssm_ref_scatter(const pssm_ref_out *v, int64_t i0, int64_t i1, int64_t i2, int64_t i3,
                      int axis, int64_t n, const double *src);

/* double -> f16 / bf16 bits, rounded once to nearest even (not through a rounded float). */
uint16_t pssm_cpu_to_f16(double v);
uint16_t pssm_cpu_to_bf16(double v);

/* Views of contiguous row-major arrays of the given shape (ndim <= 4); NULL gives an absent
 * view.  The macros take the shape as arguments: PSSM_REF_IN(x, B, D, L). */
pssm_ref_in pssm_ref_dense(const double *v, int ndim, const int64_t *shape);
pssm_ref_in pssm_ref_dense_i32(const int32_t *v, int ndim, const int64_t *shape);
pssm_ref_out pssm_ref_dense_out(double *v, int ndim, const int64_t *shape);

#define PSSM_REF_NDIM_(...) ((int)(sizeof((int64_t[]){__VA_ARGS__}) / sizeof(int64_t)))
#define PSSM_REF_IN(v, ...)                                                                   \
    pssm_ref_dense((v), PSSM_REF_NDIM_(__VA_ARGS__), (const int64_t[]){__VA_ARGS__})
#define PSSM_REF_I32(v, ...)                                                                  \
    pssm_ref_dense_i32((v), PSSM_REF_NDIM_(__VA_ARGS__), (const int64_t[]){__VA_ARGS__})
#define PSSM_REF_OUT(v, ...)                                                                  \
    pssm_ref_dense_out((v), PSSM_REF_NDIM_(__VA_ARGS__), (const int64_t[]){__VA_ARGS__})

#ifdef __cplusplus
}
#endif

#endif /* PSSM_CPU_REF_VIEW_H */
