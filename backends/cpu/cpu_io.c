/* cpu_io.c - see cpu_io.h. */
#include "cpu_io.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* PORTSSM_CPU_SCRATCH_LIMIT in bytes, or -1 when unset or not a number. */
static double scratch_limit(void)
{
    const char *e = getenv("PORTSSM_CPU_SCRATCH_LIMIT");
    if (!e || !*e)
        return -1.0;
    char *end;
    unsigned long long v = strtoull(e, &end, 10);
    return *end ? -1.0 : (double)v;
}

static void *alloc_failed(pssm_cpu_scratch *s, double bytes, double limit)
{
    s->failed = 1;
    s->failed_bytes = bytes;
    s->limit = limit;
    return NULL;
}

void *pssm_cpu_alloc(pssm_cpu_scratch *s, int64_t count, size_t elem_size)
{
    if (s->failed)
        return NULL;
    if (count < 0 || elem_size == 0 || (uint64_t)count > SIZE_MAX / elem_size)
        return alloc_failed(s, -1.0, -1.0);
    const double bytes = (double)count * (double)elem_size, limit = scratch_limit();
    if (s->n >= PSSM_CPU_MAX_BLOCKS)
        return alloc_failed(s, bytes, -1.0);
    if (limit >= 0 && s->held_bytes + bytes > limit)
        return alloc_failed(s, bytes, limit);
    void *p = malloc(count > 0 ? (size_t)count * elem_size : 1);
    if (!p)
        return alloc_failed(s, bytes, -1.0);
    s->blocks[s->n++] = p;
    s->held_bytes += bytes;
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
    const double asked = s->failed_bytes, held = s->held_bytes, limit = s->limit;
    pssm_cpu_release(s);
    if (asked < 0)
        return pssm_fail(c, PORTSSM_ERR_OUT_OF_MEMORY,
                         "%s (cpu): out of host memory: the scratch asked for does not fit in "
                         "64 bits",
                         op);
    char why[96] = "";
    if (limit >= 0)
        snprintf(why, sizeof why, ", over PORTSSM_CPU_SCRATCH_LIMIT = %.0f bytes", limit);
    return pssm_fail(c, PORTSSM_ERR_OUT_OF_MEMORY,
                     "%s (cpu): out of host memory: %.0f bytes (%.2f GiB) of scratch asked for, "
                     "with %.0f bytes (%.2f GiB) already held%s (the cpu oracle's scratch: "
                     "gradients it sums, one row's recurrence, the decode rows in use)",
                     op, asked, asked / gib, held, held / gib, why);
}

int64_t pssm_cpu_numel(const portssm_tensor *t)
{
    int64_t n = 1;
    for (int i = 0; i < t->ndim; i++)
        n *= t->shape[i];
    return n;
}

/* ---------------------------------------------------------------- views */

static pssm_ref_kind kind_of(portssm_dtype dt)
{
    switch (dt) {
    case PORTSSM_F16: return PSSM_REF_F16;
    case PORTSSM_BF16: return PSSM_REF_BF16;
    case PORTSSM_I32: return PSSM_REF_I32;
    case PORTSSM_F32: break;
    }
    return PSSM_REF_F32;
}

/* Strides of t in the order of its dims, with a size-1 dim (stride 0) before `axis` when
 * axis >= 0; 0 after the last. */
static void strides_of(const portssm_tensor *t, int axis, int64_t st[4])
{
    int k = 0;
    for (int i = 0; i < 4; i++)
        st[i] = 0;
    for (int i = 0; i < t->ndim && k < 4; i++) {
        if (i == axis)
            k++;
        if (k < 4)
            st[k++] = t->stride[i];
    }
}

pssm_ref_in pssm_cpu_in_unsqueeze(const portssm_tensor *t, int axis)
{
    pssm_ref_in v = {t->data, kind_of(t->dtype), {0, 0, 0, 0}};
    strides_of(t, axis, v.st);
    return v;
}

pssm_ref_out pssm_cpu_out_unsqueeze(const portssm_tensor *t, int axis)
{
    pssm_ref_out v = {t->data, kind_of(t->dtype), {0, 0, 0, 0}};
    strides_of(t, axis, v.st);
    return v;
}

pssm_ref_in pssm_cpu_in(const portssm_tensor *t) { return pssm_cpu_in_unsqueeze(t, -1); }
pssm_ref_out pssm_cpu_out(const portssm_tensor *t) { return pssm_cpu_out_unsqueeze(t, -1); }

/* ---------------------------------------------------------------- strided walk */

/* Runs `body` for the elements of t whose leading index is in [r0, r1), in row-major order,
 * with k = 0, 1, ... counting them and off = the element's offset.  The dims after the leading
 * one are padded in front to three. */
#define WALK_ROWS(t, r0, r1, body)                                                              \
    do {                                                                                        \
        int64_t sh_[3], st_[3];                                                                 \
        const int pad_ = 3 - ((t)->ndim - 1);                                                   \
        for (int i_ = 0; i_ < 3; i_++) {                                                        \
            sh_[i_] = i_ < pad_ ? 1 : (t)->shape[1 + i_ - pad_];                                \
            st_[i_] = i_ < pad_ ? 0 : (t)->stride[1 + i_ - pad_];                               \
        }                                                                                       \
        int64_t k = 0;                                                                          \
        for (int64_t r_ = (r0); r_ < (r1); r_++)                                                \
            for (int64_t i0 = 0; i0 < sh_[0]; i0++)                                             \
                for (int64_t i1 = 0; i1 < sh_[1]; i1++)                                         \
                    for (int64_t i2 = 0; i2 < sh_[2]; i2++, k++) {                              \
                        const int64_t off = r_ * (t)->stride[0] + i0 * st_[0] + i1 * st_[1] +   \
                                            i2 * st_[2];                                        \
                        body;                                                                   \
                    }                                                                           \
    } while (0)

/* Element offsets addressed directly: st[0] = 1. */
static pssm_ref_in flat_in(const portssm_tensor *t)
{
    pssm_ref_in v = {t->data, kind_of(t->dtype), {1, 0, 0, 0}};
    return v;
}

static pssm_ref_out flat_out(const portssm_tensor *t)
{
    pssm_ref_out v = {t->data, kind_of(t->dtype), {1, 0, 0, 0}};
    return v;
}

double *pssm_cpu_sum(pssm_cpu_scratch *s, const portssm_tensor *t)
{
    return t->data ? pssm_cpu_alloc(s, pssm_cpu_numel(t), sizeof(double)) : NULL;
}

void pssm_cpu_store(const portssm_tensor *t, const double *v)
{
    if (!t->data)
        return;
    const pssm_ref_out o = flat_out(t);
    if (t->ndim == 0) { /* not produced by validation, but a scalar is one element */
        pssm_ref_put(&o, 0, 0, 0, 0, v[0]);
        return;
    }
    WALK_ROWS(t, 0, t->shape[0], pssm_ref_put(&o, off, 0, 0, 0, v[k]));
}

/* ---------------------------------------------------------------- decode pools */

typedef struct use {
    int64_t row, b;
} use;

static int by_row(const void *pa, const void *pb)
{
    const use *a = pa, *b = pb;
    if (a->row != b->row)
        return a->row < b->row ? -1 : 1;
    return a->b < b->b ? -1 : a->b > b->b;
}

int pssm_cpu_pool_init(pssm_cpu_scratch *s, pssm_cpu_pool *pool, const portssm_tensor *state,
                       const portssm_tensor *indices, int64_t B)
{
    const int64_t Bp = state->shape[0];
    memset(pool, 0, sizeof *pool);
    pool->row_len = pssm_cpu_numel(state) / Bp;
    pool->slot = pssm_cpu_alloc(s, B, sizeof *pool->slot);
    pool->row = pssm_cpu_alloc(s, B, sizeof *pool->row);
    use *uses = pssm_cpu_alloc(s, B, sizeof *uses);
    if (!uses)
        return 0;
    const pssm_ref_in idx = pssm_cpu_in(indices);
    int64_t n = 0;
    for (int64_t b = 0; b < B; b++) {
        const int64_t r = idx.data ? pssm_ref_index(&idx, b, 0, 0, 0) : b;
        pool->slot[b] = -1;
        if (r >= 0 && r < Bp)
            uses[n++] = (use){r, b};
    }
    /* one slot per distinct row: sorting keeps this O(B log B) for any B and Bp */
    qsort(uses, (size_t)n, sizeof *uses, by_row);
    for (int64_t i = 0; i < n; i++) {
        if (i == 0 || uses[i].row != uses[i - 1].row)
            pool->row[pool->nslots++] = uses[i].row;
        pool->slot[uses[i].b] = pool->nslots - 1;
    }
    pool->rows = pssm_cpu_alloc(s, pool->nslots * pool->row_len, sizeof(double));
    return pool->rows != NULL;
}

void pssm_cpu_pool_load(const pssm_cpu_pool *pool, const portssm_tensor *state)
{
    const pssm_ref_in v = flat_in(state);
    for (int64_t j = 0; j < pool->nslots; j++) {
        double *dst = pool->rows + j * pool->row_len;
        const int64_t r = pool->row[j];
        WALK_ROWS(state, r, r + 1, dst[k] = pssm_ref_get(&v, off, 0, 0, 0));
    }
}

void pssm_cpu_pool_store(const pssm_cpu_pool *pool, const portssm_tensor *state)
{
    const pssm_ref_out v = flat_out(state);
    for (int64_t j = 0; j < pool->nslots; j++) {
        const double *src = pool->rows + j * pool->row_len;
        const int64_t r = pool->row[j];
        WALK_ROWS(state, r, r + 1, pssm_ref_put(&v, off, 0, 0, 0, src[k]));
    }
}

pssm_ref_in pssm_cpu_pool_indices(const pssm_cpu_pool *pool)
{
    pssm_ref_in v = {pool->slot, PSSM_REF_I64, {1, 0, 0, 0}};
    return v;
}
