/* validate.c - the generic half of argument checking (see validate.h). */
#include "validate.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>

void pssm_validator_init(pssm_validator *v, pssm_bctx *c, const char *op)
{
    memset(v, 0, sizeof *v);
    v->c = c;
    v->op = op;
    c->empty = 0;
    for (int i = 0; i < PSSM_NSYM; i++)
        v->dim[i] = -1;
}

portssm_status pssm_invalid(pssm_validator *v, const char *fmt, ...)
{
    char msg[PSSM_ERROR_CAPACITY];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    return pssm_fail(v->c, PORTSSM_ERR_INVALID_ARGUMENT, "%s: %s", v->op, msg);
}

static int add_arg(pssm_validator *v, const char *name, const portssm_tensor *t, pssm_role role,
                   int required, pssm_dtype_rule dt, int like, const char *dims)
{
    /* The lists are fixed in the op files and far below the limit. */
    if (v->n >= PSSM_MAX_ARGS)
        return v->n - 1;
    pssm_arg *a = &v->args[v->n];
    memset(a, 0, sizeof *a);
    a->name = name;
    a->t = t;
    a->role = role;
    a->required = required;
    a->dt = dt;
    a->like = like;
    a->dims = dims;
    return v->n++;
}

int pssm_add(pssm_validator *v, const char *name, const portssm_tensor *t, pssm_role role,
             int required, pssm_dtype_rule dt, const char *dims)
{
    return add_arg(v, name, t, role, required, dt, -1, dims);
}

int pssm_add_like(pssm_validator *v, const char *name, const portssm_tensor *t, pssm_role role,
                  int required, int like, const char *dims)
{
    return add_arg(v, name, t, role, required, PSSM_DT_LIKE, like, dims);
}

/* ---------------------------------------------------------------- symbols */

static int sym_index(char sym)
{
    const char *p = strchr(PSSM_SYMBOLS, sym);
    return p && sym ? (int)(p - PSSM_SYMBOLS) : -1;
}

static const char *sym_name(char sym)
{
    switch (sym) {
    case 'w': return "W-1";
    case 'b': return "B'";
    case 'B': return "B";
    case 'D': return "D";
    case 'L': return "L";
    case 'W': return "W";
    case 'N': return "N";
    case 'G': return "G";
    case 'H': return "H";
    case 'P': return "P";
    case 'T': return "T";
    case 'S': return "S";
    case 'K': return "K";
    case 'Q': return "n_seq";
    case 'R': return "n_seq+1";
    case 'M': return "P*N";
    case 'r': return "rows";
    case 'h': return "hidden";
    case 'g': return "groups";
    }
    return "?";
}

void pssm_fix(pssm_validator *v, char sym, int64_t value, const char *from)
{
    int i = sym_index(sym);
    if (i < 0)
        return;
    v->dim[i] = value;
    v->dim_from[i] = from;
}

int64_t pssm_dim(const pssm_validator *v, char sym)
{
    int i = sym_index(sym);
    return i < 0 ? -1 : v->dim[i];
}

const char *pssm_dim_from(const pssm_validator *v, char sym)
{
    int i = sym_index(sym);
    return i < 0 || !v->dim_from[i] ? "?" : v->dim_from[i];
}

/* "(B,D,W-1)" */
static const char *layout_text(const char *dims, char *buf, size_t size)
{
    size_t len = 0;
    buf[0] = '\0';
    len += (size_t)snprintf(buf + len, size - len, "(");
    for (const char *p = dims; *p && len < size; p++)
        len += (size_t)snprintf(buf + len, size - len, "%s%s", p == dims ? "" : ",",
                                sym_name(*p));
    if (len < size)
        snprintf(buf + len, size - len, ")");
    return buf;
}

static const char *dtype_text(portssm_dtype d)
{
    const char *n = portssm_dtype_name(d);
    return n ? n : "an unknown dtype";
}

/* ---------------------------------------------------------------- per tensor */

static portssm_status check_one(pssm_validator *v, pssm_arg *a)
{
    const portssm_tensor *t = a->t;
    if (!pssm_present(t)) {
        if (a->required)
            return pssm_invalid(v, "'%s' is required but absent (data is NULL)", a->name);
        return PORTSSM_OK;
    }
    size_t es = portssm_dtype_size(t->dtype);
    if (es == 0)
        return pssm_invalid(v, "'%s' dtype %d is not a portssm_dtype (f32, f16, bf16, i32)",
                            a->name, (int)t->dtype);
    int ndim = (int)strlen(a->dims);
    if (t->ndim != ndim) {
        char layout[64];
        if (a->forms)
            return pssm_invalid(v, "'%s' must have %s, got %d dims", a->name, a->forms,
                                (int)t->ndim);
        return pssm_invalid(v, "'%s' must have %d dims %s, got %d", a->name, ndim,
                            layout_text(a->dims, layout, sizeof layout), (int)t->ndim);
    }
    for (int i = 0; i < ndim; i++) {
        const int zero_ok = strchr(PSSM_SYMBOLS_MAY_BE_0, a->dims[i]) != NULL;
        if (t->shape[i] < 1 && !(zero_ok && t->shape[i] == 0))
            return pssm_invalid(v, "'%s' shape[%d] (%s) must be >= %d, got %lld", a->name, i,
                                sym_name(a->dims[i]), zero_ok ? 0 : 1, (long long)t->shape[i]);
    }
    if (pssm_tensor_empty(t)) { /* no element: no address to check, data may be NULL */
        a->empty = 1;
        v->c->empty = 1;
        return PORTSSM_OK;
    }
    if ((uintptr_t)t->data % es != 0)
        return pssm_invalid(v, "'%s' data pointer %p is not aligned to its %zu-byte %s elements",
                            a->name, t->data, es, dtype_text(t->dtype));
    char why[256];
    if (!pssm_extent_of(t, &a->ext, why, sizeof why))
        return pssm_invalid(v, "'%s' cannot be addressed: %s", a->name, why);
    return PORTSSM_OK;
}

portssm_status pssm_check_tensors(pssm_validator *v)
{
    for (int i = 0; i < v->n; i++)
        PSSM_TRY(check_one(v, &v->args[i]));
    return PORTSSM_OK;
}

/* ---------------------------------------------------------------- shapes and dtypes */

static int is_float(portssm_dtype d)
{
    return d == PORTSSM_F32 || d == PORTSSM_F16 || d == PORTSSM_BF16;
}

static portssm_status check_dtype(pssm_validator *v, const pssm_arg *a)
{
    portssm_dtype d = a->t->dtype;
    switch (a->dt) {
    case PSSM_DT_ACT:
        if (!v->act_from) {
            if (!is_float(d))
                return pssm_invalid(v, "'%s' dtype must be f32, f16 or bf16, got %s", a->name,
                                    dtype_text(d));
            v->act = d;
            v->act_from = a->name;
        } else if (d != v->act) {
            return pssm_invalid(v, "'%s' dtype must be %s (the activation dtype, from '%s'), "
                                   "got %s",
                                a->name, dtype_text(v->act), v->act_from, dtype_text(d));
        }
        return PORTSSM_OK;
    case PSSM_DT_F32:
    case PSSM_DT_I32: {
        portssm_dtype want = a->dt == PSSM_DT_F32 ? PORTSSM_F32 : PORTSSM_I32;
        if (d != want)
            return pssm_invalid(v, "'%s' dtype must be %s, got %s", a->name, dtype_text(want),
                                dtype_text(d));
        return PORTSSM_OK;
    }
    case PSSM_DT_PARAM:
        /* the activation tensor comes first in every op, so act is fixed here */
        if (d != PORTSSM_F32 && (!v->act_from || d != v->act))
            return pssm_invalid(v, "'%s' dtype must be f32 or %s (the activation dtype, from "
                                   "'%s'), got %s",
                                a->name, v->act_from ? dtype_text(v->act) : "?",
                                v->act_from ? v->act_from : "?", dtype_text(d));
        return PORTSSM_OK;
    case PSSM_DT_FLOAT:
        if (!is_float(d))
            return pssm_invalid(v, "'%s' dtype must be f32, f16 or bf16, got %s", a->name,
                                dtype_text(d));
        return PORTSSM_OK;
    case PSSM_DT_LIKE: {
        const pssm_arg *ref = &v->args[a->like];
        if (pssm_present(ref->t) && d != ref->t->dtype)
            return pssm_invalid(v, "'%s' dtype must be %s (the dtype of '%s'), got %s", a->name,
                                dtype_text(ref->t->dtype), ref->name, dtype_text(d));
        return PORTSSM_OK;
    }
    }
    return PORTSSM_OK;
}

portssm_status pssm_check_shapes(pssm_validator *v)
{
    for (int k = 0; k < v->n; k++) {
        const pssm_arg *a = &v->args[k];
        if (!pssm_present(a->t))
            continue;
        for (int i = 0; a->dims[i]; i++) {
            int s = sym_index(a->dims[i]);
            if (s < 0)
                continue;
            int64_t got = a->t->shape[i];
            if (v->dim[s] < 0) {
                v->dim[s] = got;
                v->dim_from[s] = a->name;
            } else if (got != v->dim[s]) {
                return pssm_invalid(v, "'%s' shape[%d] must be %lld (%s, from '%s'), got %lld",
                                    a->name, i, (long long)v->dim[s], sym_name(a->dims[i]),
                                    v->dim_from[s], (long long)got);
            }
        }
        PSSM_TRY(check_dtype(v, a));
    }
    return PORTSSM_OK;
}

/* ---------------------------------------------------------------- overlaps */

static const char *role_text(pssm_role r)
{
    return r == PSSM_IN ? "input" : r == PSSM_OUT ? "output" : "in/out";
}

portssm_status pssm_check_overlaps(pssm_validator *v)
{
    char why[256];
    for (int i = 0; i < v->n; i++) {
        const pssm_arg *a = &v->args[i];
        if (a->role == PSSM_IN || !pssm_present(a->t) || a->empty)
            continue;
        const char *what = a->role == PSSM_OUT ? "" : " (in/out)";
        if (pssm_self_overlaps(a->t, why, sizeof why))
            return pssm_invalid(v, "'%s'%s overlaps itself: %s", a->name, what, why);
        for (int j = 0; j < v->n; j++) {
            const pssm_arg *b = &v->args[j];
            /* pairs of written tensors are checked once, from the first of the two */
            if (j == i || !pssm_present(b->t) || b->empty || (b->role != PSSM_IN && j < i))
                continue;
            if (pssm_may_overlap(a->t, &a->ext, b->t, &b->ext))
                return pssm_invalid(v, "'%s'%s overlaps %s '%s'", a->name, what,
                                    role_text(b->role), b->name);
        }
    }
    return PORTSSM_OK;
}

/* ---------------------------------------------------------------- work */

int64_t pssm_work_dim(const pssm_validator *v, char sym)
{
    const int64_t d = pssm_dim(v, sym);
    return d < 0 ? 1 : d;
}

portssm_status pssm_check_work(pssm_validator *v, int64_t work, const char *formula,
                               const char *syms)
{
    if (work >= 0 && work <= PSSM_WORK_MAX) {
        v->c->work = work;
        v->c->work_formula = formula;
        return PORTSSM_OK;
    }
    char given[512], value[64];
    size_t len = 0;
    given[0] = '\0';
    for (const char *p = syms; *p && len < sizeof given; p++) {
        if (pssm_dim(v, *p) < 0)
            continue;
        len += (size_t)snprintf(given + len, sizeof given - len, "%s%s = %lld from '%s'",
                                len ? ", " : "", sym_name(*p), (long long)pssm_dim(v, *p),
                                pssm_dim_from(v, *p));
    }
    if (work < 0)
        snprintf(value, sizeof value, "does not fit int64");
    else
        snprintf(value, sizeof value, "is %lld", (long long)work);
    return pssm_invalid(v, "the call's work, %s, %s (%s); one call may take at most 2^48 = %lld "
                           "(a broadcast input, stride 0, costs no memory but as much work as "
                           "its shape)",
                        formula, value, given, (long long)PSSM_WORK_MAX);
}

/* ---------------------------------------------------------------- shared rules */

portssm_status pssm_check_activation(pssm_validator *v, portssm_activation a)
{
    if (a != PORTSSM_ACTIVATION_NONE && a != PORTSSM_ACTIVATION_SILU)
        return pssm_invalid(v, "'activation' must be PORTSSM_ACTIVATION_NONE (0) or "
                               "PORTSSM_ACTIVATION_SILU (1), got %d",
                            (int)a);
    return PORTSSM_OK;
}

portssm_status pssm_check_needs(pssm_validator *v, const char *name, const portssm_tensor *t,
                                const char *input, const portssm_tensor *in, const char *why)
{
    if (pssm_present(t) && !pssm_present(in)) {
        if (why)
            return pssm_invalid(v, "'%s' is given but '%s' is absent: %s", name, input, why);
        return pssm_invalid(v, "'%s' is given but '%s' is absent: '%s' is defined by it", name,
                            input, name);
    }
    return PORTSSM_OK;
}

portssm_status pssm_check_divides(pssm_validator *v, char part, char whole)
{
    int64_t p = pssm_dim(v, part), w = pssm_dim(v, whole);
    if (p > 0 && w > 0 && w % p != 0)
        return pssm_invalid(v, "'%s' gives %s = %lld, which does not divide %s = %lld (from "
                               "'%s')",
                            pssm_dim_from(v, part), sym_name(part), (long long)p, sym_name(whole),
                            (long long)w, pssm_dim_from(v, whole));
    return PORTSSM_OK;
}

/* ---------------------------------------------------------------- scratch and checkpoints */

portssm_status pssm_fix_scan_checkpoints(pssm_validator *v, int64_t L, const portssm_tensor *ck)
{
    const int64_t K = pssm_scan_checkpoints(L);
    if (K == 0 && pssm_present(ck))
        return pssm_invalid(v, "'checkpoints' is given, but L = %lld needs none (states are kept "
                               "every %d steps): leave it absent",
                            (long long)L, PSSM_SCAN_CHECKPOINT_INTERVAL);
    pssm_fix(v, 'K', K, "portssm_selective_scan_checkpoint_shape");
    return PORTSSM_OK;
}

#define PSSM_WORKSPACE_ALIGN 256

portssm_status pssm_check_workspace(pssm_validator *v, const portssm_workspace *w)
{
    if (!w->data) {
        if (w->bytes != 0)
            return pssm_invalid(v, "'workspace' has data NULL but bytes = %zu: give both or "
                                   "neither (zero: the context's own)",
                                w->bytes);
        return PORTSSM_OK;
    }
    if ((uintptr_t)w->data % PSSM_WORKSPACE_ALIGN != 0)
        return pssm_invalid(v, "'workspace' data %p is not aligned to %d bytes", w->data,
                            PSSM_WORKSPACE_ALIGN);
    if (w->bytes == 0)
        return PORTSSM_OK; /* the op may need none; the core checks the size */
    if ((uintptr_t)w->data > UINTPTR_MAX - w->bytes)
        return pssm_invalid(v, "'workspace' %p + %zu bytes wraps around the address space",
                            w->data, w->bytes);
    /* as a 1-D tensor of bytes rounded up to whole 4-byte elements: a conservative extent */
    portssm_tensor t;
    memset(&t, 0, sizeof t);
    t.data = w->data;
    t.dtype = PORTSSM_I32;
    t.ndim = 1;
    t.shape[0] = (int64_t)((w->bytes + 3) / 4);
    t.stride[0] = 1;
    pssm_extent e;
    char why[256];
    if (!pssm_extent_of(&t, &e, why, sizeof why))
        return pssm_invalid(v, "'workspace' cannot be addressed: %s", why);
    for (int j = 0; j < v->n; j++) {
        const pssm_arg *b = &v->args[j];
        if (pssm_present(b->t) && !b->empty && pssm_may_overlap(&t, &e, b->t, &b->ext))
            return pssm_invalid(v, "'workspace' (%zu bytes at %p) overlaps %s '%s'", w->bytes,
                                w->data, role_text(b->role), b->name);
    }
    return PORTSSM_OK;
}
