/* tset.c - see tset.h. */
#include "tset.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

static void set_strides(pssm_tspec *t, const int *order, unsigned bcast_mask)
{
    int64_t acc = 1;
    for (int k = t->ndim - 1; k >= 0; k--) {
        int d = order ? order[k] : k;
        if (bcast_mask & (1u << d)) {
            t->stride[d] = 0;
            continue;
        }
        t->stride[d] = acc;
        acc *= t->shape[d];
    }
    t->span = acc;
}

int pssm_tset_add(pssm_tset *s, const char *name, int slot, pssm_role role, portssm_dtype dtype,
                  int32_t ndim, const int64_t *shape, double lo, double hi)
{
    if (s->n >= PSSM_TSET_MAX || ndim < 1 || ndim > PORTSSM_MAX_DIMS)
        return -1;
    int i = s->n++;
    pssm_tspec *t = &s->t[i];
    memset(t, 0, sizeof *t);
    t->name = name;
    t->slot = slot;
    t->role = role;
    t->passes = 1;
    t->dtype = dtype;
    t->ndim = ndim;
    for (int d = 0; d < ndim; d++)
        t->shape[d] = shape[d];
    t->lo = lo;
    t->hi = hi;
    set_strides(t, NULL, 0);
    s->host[i] = NULL;
    return i;
}

void pssm_tset_layout(pssm_tset *s, int i, const int *order, unsigned bcast_mask)
{
    if (i >= 0 && i < s->n)
        set_strides(&s->t[i], order, bcast_mask);
}

int pssm_tset_find(const pssm_tset *s, int slot)
{
    for (int i = 0; i < s->n; i++)
        if (s->t[i].slot == slot)
            return i;
    return -1;
}

size_t pssm_tspec_bytes(const pssm_tspec *t)
{
    return (size_t)t->span * portssm_dtype_size(t->dtype);
}

int pssm_tset_fill(pssm_tset *s, pssm_rng *r)
{
    for (int i = 0; i < s->n; i++) {
        const pssm_tspec *t = &s->t[i];
        if (t->role == PSSM_OUT || s->host[i])
            continue;
        s->host[i] = malloc(pssm_tspec_bytes(t));
        if (!s->host[i])
            return -1;
        if (t->dtype == PORTSSM_I32) {
            int64_t lo = (int64_t)t->lo, width = (int64_t)t->hi - lo + 1;
            for (int64_t k = 0; k < t->span; k++)
                pssm_tool_set(t->dtype, s->host[i], k,
                              (double)(lo + (int64_t)(pssm_rng_next(r) % (uint64_t)width)));
        } else {
            for (int64_t k = 0; k < t->span; k++)
                pssm_tool_set(t->dtype, s->host[i], k, pssm_rng_uniform(r, t->lo, t->hi));
        }
    }
    return 0;
}

void pssm_tset_release(pssm_tset *s)
{
    for (int i = 0; i < s->n; i++) {
        free(s->host[i]);
        s->host[i] = NULL;
    }
}

double pssm_tset_min_bytes(const pssm_tset *s)
{
    double bytes = 0;
    for (int i = 0; i < s->n; i++) {
        const pssm_tspec *t = &s->t[i];
        double once = (double)pssm_tspec_bytes(t);
        bytes += once * t->passes * (t->role == PSSM_INOUT ? 2 : 1);
    }
    return bytes;
}

size_t pssm_tset_alloc_bytes(const pssm_tset *s)
{
    size_t bytes = 0;
    for (int i = 0; i < s->n; i++) /* malloc rounds each to 256 */
        bytes += (pssm_tspec_bytes(&s->t[i]) + 255) / 256 * 256;
    return bytes;
}

/* ---------------------------------------------------------------- device instances */

portssm_status pssm_tdev_alloc(pssm_tdev *d, portssm_context *ctx, const pssm_tset *s)
{
    memset(d, 0, sizeof *d);
    d->ctx = ctx;
    for (int i = 0; i < s->n; i++) {
        portssm_status st = portssm_malloc(ctx, &d->ptr[i], pssm_tspec_bytes(&s->t[i]));
        if (st != PORTSSM_OK) {
            pssm_tdev_free(d, s);
            return st;
        }
    }
    return PORTSSM_OK;
}

portssm_status pssm_tdev_load(pssm_tdev *d, const pssm_tset *s)
{
    for (int i = 0; i < s->n; i++) {
        size_t bytes = pssm_tspec_bytes(&s->t[i]);
        portssm_status st;
        if (s->t[i].role == PSSM_OUT)
            st = portssm_memset(d->ctx, d->ptr[i], 0xff, bytes);
        else
            st = portssm_memcpy(d->ctx, d->ptr[i], s->host[i], bytes, PORTSSM_HOST_TO_DEVICE);
        if (st != PORTSSM_OK)
            return st;
    }
    return portssm_synchronize(d->ctx);
}

void pssm_tdev_free(pssm_tdev *d, const pssm_tset *s)
{
    for (int i = 0; i < s->n; i++) {
        if (d->ptr[i])
            portssm_free(d->ctx, d->ptr[i]);
        d->ptr[i] = NULL;
    }
}

portssm_status pssm_tdev_fetch(const pssm_tdev *d, const pssm_tset *s, int i, void *host)
{
    portssm_status st = portssm_synchronize(d->ctx);
    if (st != PORTSSM_OK)
        return st;
    return portssm_memcpy(d->ctx, host, d->ptr[i], pssm_tspec_bytes(&s->t[i]),
                          PORTSSM_DEVICE_TO_HOST);
}

portssm_tensor pssm_tdev_view(const pssm_tdev *d, const pssm_tset *s, int slot)
{
    portssm_tensor v;
    memset(&v, 0, sizeof v);
    int i = pssm_tset_find(s, slot);
    if (i < 0)
        return v;
    const pssm_tspec *t = &s->t[i];
    v.data = d->ptr[i];
    v.dtype = t->dtype;
    v.ndim = t->ndim;
    for (int k = 0; k < t->ndim; k++) {
        v.shape[k] = t->shape[k];
        v.stride[k] = t->stride[k];
    }
    return v;
}

/* ---------------------------------------------------------------- comparison */

pssm_tol pssm_tol_for(portssm_dtype dtype)
{
    pssm_tol t = {6e-4, 2e-3};
    if (dtype == PORTSSM_F16) {
        t.rtol = 3e-3;
        t.atol = 5e-3;
    } else if (dtype == PORTSSM_BF16) {
        t.rtol = 3e-2;
        t.atol = 5e-2;
    } else if (dtype == PORTSSM_I32) {
        t.rtol = 0;
        t.atol = 0;
    }
    return t;
}

pssm_tol pssm_tol_max(pssm_tol a, pssm_tol b)
{
    pssm_tol t = {fmax(a.rtol, b.rtol), fmax(a.atol, b.atol)};
    return t;
}

pssm_cmp pssm_compare(portssm_dtype dtype, const void *got, const void *ref, int64_t n,
                      pssm_tol tol)
{
    pssm_cmp c = {n, 0, -1, 0, 0, 0, 0};
    double num = 0, den = 0;
    for (int64_t k = 0; k < n; k++) {
        double a = pssm_tool_get(dtype, got, k), b = pssm_tool_get(dtype, ref, k);
        double err = fabs(a - b);
        if (!(err <= tol.atol + tol.rtol * fabs(b))) { /* NaN fails here */
            if (c.first_bad < 0)
                c.first_bad = k;
            c.bad++;
        }
        double rel = err / fmax(fabs(b), tol.atol > 0 ? tol.atol : 1e-30);
        if (isnan(err)) {
            c.max_abs = INFINITY;
            c.max_rel = INFINITY;
        } else {
            c.max_abs = fmax(c.max_abs, err);
            c.max_rel = fmax(c.max_rel, rel);
        }
        num += (a - b) * (a - b);
        den += b * b;
    }
    c.norm_err = den > 0 ? num / den : num;
    c.pass = c.bad == 0 && c.norm_err <= tol.rtol * tol.rtol;
    if (dtype == PORTSSM_I32)
        c.pass = c.bad == 0;
    return c;
}
