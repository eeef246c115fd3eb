/*
 * layout.c - see layout.h.
 *
 * Pairwise overlap is decided exactly in the case that matters in practice, two views of one
 * buffer with the same dtype and strides (dx and dz as the halves of one (B,2D,L) gradient, or
 * interleaved): when the strides are "nested" (sorted by size, each larger than the reach of all
 * smaller ones), whether the difference of the two base offsets is a reachable combination of
 * strides is a small branch-and-bound with at most two candidates per dim.  Anything else whose
 * byte ranges intersect is reported as a possible overlap, which is conservative, never wrong.
 */
#include "layout.h"
#include "size_math.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int pssm_extent_of(const portssm_tensor *t, pssm_extent *e, char *why, size_t why_size)
{
    int64_t es = (int64_t)portssm_dtype_size(t->dtype);
    int64_t lo = 0, hi = 0, count = 1;
    for (int i = 0; i < t->ndim; i++) {
        int64_t reach;
        if (!pssm_checked_mul(t->shape[i] - 1, t->stride[i], &reach)) {
            snprintf(why, why_size, "(shape[%d] - 1) * stride[%d] = %lld * %lld overflows int64",
                     i, i, (long long)(t->shape[i] - 1), (long long)t->stride[i]);
            return 0;
        }
        if (reach < 0 ? !pssm_checked_add(lo, reach, &lo) : !pssm_checked_add(hi, reach, &hi)) {
            snprintf(why, why_size, "the sum of (shape - 1) * stride over its dims overflows "
                                    "int64 at dim %d", i);
            return 0;
        }
        if (!pssm_checked_mul(count, t->shape[i], &count)) {
            snprintf(why, why_size, "its element count overflows int64 at dim %d", i);
            return 0;
        }
    }
    int64_t lo_bytes, hi_bytes;
    if (!pssm_checked_mul(lo, es, &lo_bytes) || !pssm_checked_mul(hi, es, &hi_bytes) ||
        !pssm_checked_add(hi_bytes, es - 1, &hi_bytes)) {
        snprintf(why, why_size, "its byte extent (element offsets %lld to %lld, %lld bytes each) "
                                "overflows int64",
                 (long long)lo, (long long)hi, (long long)es);
        return 0;
    }
    uintptr_t p = (uintptr_t)t->data;
    uint64_t below = lo_bytes < 0 ? (uint64_t)0 - (uint64_t)lo_bytes : 0;
    if (below > p || (uint64_t)hi_bytes > UINTPTR_MAX - p) {
        snprintf(why, why_size, "its elements reach %s the address space (byte offsets %lld to "
                                "%lld from %p)",
                 below > p ? "below the start of" : "past the end of", (long long)lo_bytes,
                 (long long)hi_bytes, t->data);
        return 0;
    }
    e->lo = p - below;
    e->hi = p + (uint64_t)hi_bytes;
    return 1;
}

/* One dim of a layout: |stride| and, for a difference of two indices, its range [lo, hi]. */
typedef struct pssm_term {
    int64_t stride; /* > 0 */
    int64_t lo, hi;
    int dim;
} pssm_term;

static int by_stride_desc(const void *pa, const void *pb)
{
    const pssm_term *a = pa, *b = pb;
    return (a->stride < b->stride) - (a->stride > b->stride);
}

static int64_t max_abs(int64_t a, int64_t b)
{
    a = a < 0 ? -a : a;
    b = b < 0 ? -b : b;
    return a > b ? a : b;
}

/* Terms sorted by decreasing stride are nested when each stride is larger than the reach of
 * all smaller ones.  rest[i] receives the reach of terms i+1.. (0 for the last). */
static int nested(const pssm_term *t, int n, int64_t *rest)
{
    int64_t reach = 0;
    for (int i = n - 1; i >= 0; i--) {
        rest[i] = reach;
        if (t[i].stride <= reach)
            return 0;
        /* no overflow: the reach is bounded by extents that were checked to fit */
        reach += max_abs(t[i].lo, t[i].hi) * t[i].stride;
    }
    return 1;
}

static int64_t floor_div(int64_t a, int64_t b) /* b > 0 */
{
    int64_t q = a / b;
    return (a % b != 0 && a < 0) ? q - 1 : q;
}

/* Is target = sum k_i * stride_i with k_i in [lo_i, hi_i] solvable?  With nested strides the
 * remainder after the largest term must fit in the reach of the others, which leaves at most
 * two candidates for k at each level. */
static int reachable(const pssm_term *t, const int64_t *rest, int n, int64_t target)
{
    if (n == 0)
        return target == 0;
    int64_t kmin = -floor_div(-(target - rest[0]), t->stride); /* ceil */
    int64_t kmax = floor_div(target + rest[0], t->stride);
    if (kmin < t->lo)
        kmin = t->lo;
    if (kmax > t->hi)
        kmax = t->hi;
    for (int64_t k = kmin; k <= kmax; k++)
        if (reachable(t + 1, rest + 1, n - 1, target - k * t->stride))
            return 1;
    return 0;
}

int pssm_self_overlaps(const portssm_tensor *t, char *why, size_t why_size)
{
    pssm_term terms[PORTSSM_MAX_DIMS];
    int64_t rest[PORTSSM_MAX_DIMS];
    int n = 0;
    for (int i = 0; i < t->ndim; i++) {
        if (t->shape[i] == 1)
            continue; /* a single index: its stride never matters */
        if (t->stride[i] == 0) {
            snprintf(why, why_size, "stride[%d] is 0 while shape[%d] is %lld", i, i,
                     (long long)t->shape[i]);
            return 1;
        }
        terms[n].stride = t->stride[i] < 0 ? -t->stride[i] : t->stride[i];
        terms[n].lo = 0;
        terms[n].hi = t->shape[i] - 1;
        terms[n].dim = i;
        n++;
    }
    qsort(terms, (size_t)n, sizeof terms[0], by_stride_desc);
    if (!nested(terms, n, rest)) {
        int64_t reach = 0;
        for (int i = n - 1; i >= 0; i--) {
            if (terms[i].stride <= reach) {
                snprintf(why, why_size, "|stride[%d]| = %lld does not step past the %lld "
                                        "elements its smaller strides reach",
                         terms[i].dim, (long long)terms[i].stride, (long long)reach + 1);
                break;
            }
            reach += terms[i].hi * terms[i].stride;
        }
        return 1;
    }
    return 0;
}

int pssm_may_overlap(const portssm_tensor *a, const pssm_extent *ea, const portssm_tensor *b,
                     const pssm_extent *eb)
{
    if (ea->hi < eb->lo || eb->hi < ea->lo)
        return 0;
    size_t es = portssm_dtype_size(a->dtype);
    if (es != portssm_dtype_size(b->dtype) || a->ndim != b->ndim)
        return 1;
    uintptr_t pa = (uintptr_t)a->data, pb = (uintptr_t)b->data;
    /* the ranges intersect, so the difference is bounded by checked extents */
    int64_t diff_bytes = pb >= pa ? (int64_t)(pb - pa) : -(int64_t)(pa - pb);
    if (diff_bytes % (int64_t)es != 0)
        return 1; /* elements offset by part of an element share bytes */
    pssm_term terms[PORTSSM_MAX_DIMS];
    int64_t rest[PORTSSM_MAX_DIMS];
    int n = 0;
    for (int i = 0; i < a->ndim; i++) {
        if (a->shape[i] == 1 && b->shape[i] == 1)
            continue;
        if (a->stride[i] != b->stride[i])
            return 1;
        if (a->stride[i] == 0)
            continue;
        /* element a[i..] meets b[j..] when sum (i_d - j_d) * stride_d == diff */
        int64_t lo = -(b->shape[i] - 1), hi = a->shape[i] - 1;
        if (a->stride[i] < 0) {
            int64_t t = lo;
            lo = -hi;
            hi = -t;
        }
        terms[n].stride = a->stride[i] < 0 ? -a->stride[i] : a->stride[i];
        terms[n].lo = lo;
        terms[n].hi = hi;
        terms[n].dim = i;
        n++;
    }
    qsort(terms, (size_t)n, sizeof terms[0], by_stride_desc);
    if (!nested(terms, n, rest))
        return 1;
    return reachable(terms, rest, n, diff_bytes / (int64_t)es);
}
