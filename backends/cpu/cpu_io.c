/* cpu_io.c - see cpu_io.h. */
#include "cpu_io.h"

#include "../../kernels/pssm_float16.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

void *pssm_cpu_alloc(pssm_cpu_scratch *s, int64_t count, size_t elem_size)
{
    if (s->failed)
        return NULL;
    if (s->n >= PSSM_CPU_MAX_BLOCKS || count < 0 || elem_size == 0 ||
        (uint64_t)count > SIZE_MAX / elem_size) {
        s->failed = 1;
        s->failed_bytes = (double)count * (double)elem_size;
        return NULL;
    }
    void *p = malloc(count > 0 ? (size_t)count * elem_size : 1);
    if (!p) {
        s->failed = 1;
        s->failed_bytes = (double)count * (double)elem_size;
        return NULL;
    }
    s->blocks[s->n++] = p;
    s->held_bytes += (double)count * (double)elem_size;
    return p;
}

void pssm_cpu_release(pssm_cpu_scratch *s)
{
    while (s->n > 0)
        free(s->blocks[--s->n]);
}

portssm_status pssm_cpu_oom(pssm_bctx *c, pssm_cpu_scratch *s, const char *op)
{
    const double gib = 1024.0 * 1024.0 * 1024.0;
    const double asked = s->failed_bytes, held = s->held_bytes;
    pssm_cpu_release(s);
    return pssm_fail(c, PORTSSM_ERR_OUT_OF_MEMORY,
                     "%s (cpu): out of host memory: %.0f bytes (%.2f GiB) of double-precision "
                     "scratch asked for, with %.0f bytes (%.2f GiB) already held (the cpu oracle "
                     "works on a double copy of each tensor)",
                     op, asked, asked / gib, held, held / gib);
}

int64_t pssm_cpu_numel(const portssm_tensor *t)
{
    int64_t n = 1;
    for (int i = 0; i < t->ndim; i++)
        n *= t->shape[i];
    return n;
}

unsigned char *pssm_cpu_rows_used(pssm_cpu_scratch *s, const int32_t *indices, int64_t B,
                                  int64_t Bp)
{
    unsigned char *used = pssm_cpu_alloc(s, Bp, 1);
    if (!used)
        return NULL;
    for (int64_t r = 0; r < Bp; r++)
        used[r] = 0;
    for (int64_t b = 0; b < B; b++) {
        int64_t r = indices ? indices[b] : b;
        if (r >= 0 && r < Bp)
            used[r] = 1;
    }
    return used;
}

/* ---------------------------------------------------------------- strided walk */

/* Shape and strides padded to 4 dims with leading size-1 dims. */
typedef struct walk4 {
    int64_t shape[4], stride[4];
} walk4;

static walk4 walk_of(const portssm_tensor *t)
{
    walk4 w;
    int pad = 4 - t->ndim;
    for (int i = 0; i < 4; i++) {
        w.shape[i] = i < pad ? 1 : t->shape[i - pad];
        w.stride[i] = i < pad ? 0 : t->stride[i - pad];
    }
    return w;
}

/* Runs `body` with k = the row-major index of an element of t and off = its element offset,
 * for every element whose leading index r has keep[r] != 0 (keep NULL: every element). */
#define WALK(t, keep, body)                                                                     \
    do {                                                                                        \
        walk4 w_ = walk_of(t);                                                                  \
        int lead_ = 4 - (t)->ndim;                                                              \
        int64_t k = 0;                                                                          \
        for (int64_t i0 = 0; i0 < w_.shape[0]; i0++)                                            \
            for (int64_t i1 = 0; i1 < w_.shape[1]; i1++)                                        \
                for (int64_t i2 = 0; i2 < w_.shape[2]; i2++)                                    \
                    for (int64_t i3 = 0; i3 < w_.shape[3]; i3++, k++) {                         \
                        int64_t idx_[4] = {i0, i1, i2, i3};                                     \
                        if ((keep) && !(keep)[idx_[lead_]])                                     \
                            continue;                                                           \
                        int64_t off = i0 * w_.stride[0] + i1 * w_.stride[1] +                   \
                                      i2 * w_.stride[2] + i3 * w_.stride[3];                    \
                        body;                                                                   \
                    }                                                                           \
    } while (0)

static double read_elem(const portssm_tensor *t, int64_t off)
{
    const unsigned char *p = (const unsigned char *)t->data + off * (int64_t)portssm_dtype_size(t->dtype);
    uint16_t h;
    float f;
    int32_t i;
    switch (t->dtype) {
    case PORTSSM_F32: memcpy(&f, p, 4); return f;
    case PORTSSM_F16: memcpy(&h, p, 2); return pssm_f16_to_f32(h);
    case PORTSSM_BF16: memcpy(&h, p, 2); return pssm_bf16_to_f32(h);
    case PORTSSM_I32: memcpy(&i, p, 4); return i;
    }
    return NAN;
}

static void write_elem(const portssm_tensor *t, int64_t off, double v)
{
    unsigned char *p = (unsigned char *)t->data + off * (int64_t)portssm_dtype_size(t->dtype);
    uint16_t h;
    float f;
    switch (t->dtype) {
    case PORTSSM_F32: f = (float)v; memcpy(p, &f, 4); break;
    case PORTSSM_F16: h = pssm_cpu_to_f16(v); memcpy(p, &h, 2); break;
    case PORTSSM_BF16: h = pssm_cpu_to_bf16(v); memcpy(p, &h, 2); break;
    case PORTSSM_I32: break; /* never an output of a float computation */
    }
}

double *pssm_cpu_load(pssm_cpu_scratch *s, const portssm_tensor *t)
{
    if (!t->data)
        return NULL;
    double *v = pssm_cpu_alloc(s, pssm_cpu_numel(t), sizeof *v);
    if (v)
        WALK(t, (const unsigned char *)NULL, v[k] = read_elem(t, off));
    return v;
}

int32_t *pssm_cpu_load_i32(pssm_cpu_scratch *s, const portssm_tensor *t)
{
    if (!t->data)
        return NULL;
    int32_t *v = pssm_cpu_alloc(s, pssm_cpu_numel(t), sizeof *v);
    if (v)
        WALK(t, (const unsigned char *)NULL,
             memcpy(&v[k], (const unsigned char *)t->data + off * 4, 4));
    return v;
}

double *pssm_cpu_out(pssm_cpu_scratch *s, const portssm_tensor *t)
{
    return t->data ? pssm_cpu_alloc(s, pssm_cpu_numel(t), sizeof(double)) : NULL;
}

void pssm_cpu_store(const portssm_tensor *t, const double *v)
{
    if (t->data)
        WALK(t, (const unsigned char *)NULL, write_elem(t, off, v[k]));
}

void pssm_cpu_store_rows(const portssm_tensor *t, const double *v, const unsigned char *keep)
{
    if (t->data)
        WALK(t, keep, write_elem(t, off, v[k]));
}

/* ---------------------------------------------------------------- rounding once */

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
