/*
 * fuzz_api.c - libFuzzer harness over the public API (issue #12 item 3).
 *
 * Each input is decoded into one op call on the backend named by PORTSSM_FUZZ_BACKEND (cpu,
 * sim32, sim64; default cpu): an op, a valid call built from that op's template (dims, dtypes,
 * optional tensors, scalars, all from the input), then up to eight mutations of it (strides
 * zero, negative, extreme; shapes zero, negative, huge; ndim and dtype out of range; tensors
 * dropped or added; pointers misaligned or aliased; scalars and the workspace bent).  Every
 * tensor lies in one guarded arena, and index tensors hold values from the input.  After the
 * call it asserts:
 *   - the status is one of portssm_status;
 *   - a failed call changed no byte of the arena;
 *   - a successful call changed bytes only inside its outputs (and in/out tensors, and the
 *     workspace it was given);
 *   - an INVALID_ARGUMENT message names an argument ('...');
 *   - a tensor whose extent cannot be addressed was refused.
 * A violation aborts with a description (libFuzzer saves the input).  Tensors that would not fit
 * the arena are not passed (the call is skipped): the library cannot know a buffer's end, so such
 * a call proves nothing.
 */
#include "portssm.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define ARENA_BYTES (1u << 20)
#define MAX_FIELDS 40

static unsigned char arena[ARENA_BYTES] __attribute__((aligned(64)));
static unsigned char before[ARENA_BYTES];

/* ---------------------------------------------------------------- input bytes */

typedef struct reader {
    const uint8_t *p;
    size_t n;
} reader;

static uint8_t u8(reader *r)
{
    if (!r->n)
        return 0;
    r->n--;
    return *r->p++;
}

static uint32_t u32(reader *r)
{
    uint32_t v = 0;
    for (int i = 0; i < 4; i++)
        v = v << 8 | u8(r);
    return v;
}

/* ---------------------------------------------------------------- op templates */

/* One field of an args struct: its shape as dim letters (see dims below), its dtype class
 * ('a' activation, 'f' F32, 'w' the weight's: F32 or activation, 'i' I32), '?' if optional. */
typedef struct field_spec {
    const char *name, *dims;
    char kind;
    char optional;
} field_spec;

typedef struct op_spec {
    portssm_op op;
    field_spec f[MAX_FIELDS];
} op_spec;

#define F(n, d, k) {n, d, k, 0}
#define O(n, d, k) {n, d, k, 1}
static const op_spec ops[] = {
    {PORTSSM_OP_CAUSAL_CONV1D_FWD,
     {F("x", "BDL", 'a'), F("weight", "DW", 'w'), O("bias", "D", 'w'), O("seq_idx", "BL", 'i'),
      O("initial_states", "BDS", 'a'), O("final_states", "BDS", 'a'), F("out", "BDL", 'a')}},
    {PORTSSM_OP_CAUSAL_CONV1D_BWD,
     {F("x", "BDL", 'a'), F("weight", "DW", 'w'), O("bias", "D", 'w'), O("seq_idx", "BL", 'i'),
      O("initial_states", "BDS", 'a'), F("dout", "BDL", 'a'), O("dfinal_states", "BDS", 'a'),
      F("dx", "BDL", 'a'), F("dweight", "DW", 'w'), O("dbias", "D", 'w'),
      O("dinitial_states", "BDS", 'a')}},
    {PORTSSM_OP_CAUSAL_CONV1D_UPDATE,
     {F("x", "BD", 'a'), F("conv_state", "bDS", 'a'), F("weight", "DW", 'w'), O("bias", "D", 'w'),
      O("cache_seqlens", "B", 'i'), O("conv_state_indices", "B", 'i'), F("out", "BD", 'a')}},
    {PORTSSM_OP_SELECTIVE_SCAN_FWD,
     {F("u", "BDL", 'a'), F("delta", "BDL", 'a'), F("A", "DN", 'f'), F("B", "DN", 'f'),
      F("C", "DN", 'f'), O("D", "D", 'f'), O("z", "BDL", 'a'), O("delta_bias", "D", 'f'),
      O("initial_state", "BDN", 'f'), O("final_state", "BDN", 'f'), F("out", "BDL", 'a'),
      O("checkpoints", "BDKN", 'f')}},
    {PORTSSM_OP_SELECTIVE_SCAN_BWD,
     {F("u", "BDL", 'a'), F("delta", "BDL", 'a'), F("A", "DN", 'f'), F("B", "DN", 'f'),
      F("C", "DN", 'f'), O("D", "D", 'f'), O("z", "BDL", 'a'), O("delta_bias", "D", 'f'),
      O("initial_state", "BDN", 'f'), F("dout", "BDL", 'a'), O("dfinal_state", "BDN", 'f'),
      F("du", "BDL", 'a'), F("ddelta", "BDL", 'a'), F("dA", "DN", 'f'), F("dB", "DN", 'f'),
      F("dC", "DN", 'f'), O("dD", "D", 'f'), O("dz", "BDL", 'a'), O("ddelta_bias", "D", 'f'),
      O("dinitial_state", "BDN", 'f'), O("checkpoints", "BDKN", 'f')}},
    {PORTSSM_OP_SELECTIVE_STATE_UPDATE,
     {F("state", "bDN", 'f'), F("x", "BD", 'a'), F("dt", "BD", 'a'), F("A", "DN", 'f'),
      F("B", "BN", 'a'), F("C", "BN", 'a'), O("D", "D", 'f'), O("z", "BD", 'a'),
      O("dt_bias", "D", 'f'), O("state_batch_indices", "B", 'i'), F("out", "BD", 'a')}},
    {PORTSSM_OP_SSD_CHUNK_SCAN_FWD,
     {F("x", "BLHP", 'a'), F("dt", "BLH", 'a'), F("A", "H", 'f'), F("B", "BLGN", 'a'),
      F("C", "BLGN", 'a'), O("D", "HP", 'f'), O("z", "BLHP", 'a'), O("dt_bias", "H", 'f'),
      O("initial_states", "BHPN", 'f'), O("seq_idx", "BL", 'i'), O("cu_seqlens", "Q", 'i'),
      F("out", "BLHP", 'a'), O("final_states", "BHPN", 'f'), O("varlen_states", "MHPN", 'f'),
      O("y", "BLHP", 'a'), O("checkpoints", "BHKX", 'a')}},
    {PORTSSM_OP_SSD_CHUNK_SCAN_BWD,
     {F("x", "BLHP", 'a'), F("dt", "BLH", 'a'), F("A", "H", 'f'), F("B", "BLGN", 'a'),
      F("C", "BLGN", 'a'), O("D", "HP", 'f'), O("z", "BLHP", 'a'), O("dt_bias", "H", 'f'),
      O("initial_states", "BHPN", 'f'), O("seq_idx", "BL", 'i'), O("cu_seqlens", "Q", 'i'),
      F("dout", "BLHP", 'a'), O("dfinal_states", "BHPN", 'f'), O("y", "BLHP", 'a'),
      O("checkpoints", "BHKX", 'a'), F("dx", "BLHP", 'a'),
      F("ddt", "BLH", 'a'), F("dA", "H", 'f'), F("dB", "BLGN", 'a'), F("dC", "BLGN", 'a'),
      O("dD", "HP", 'f'), O("dz", "BLHP", 'a'), O("ddt_bias", "H", 'f'),
      O("dinitial_states", "BHPN", 'f')}},
    /* the norms: L rows of D channels in G groups (group_size D / G); the residual path, like
     * the weight, F32 or the activation dtype */
    {PORTSSM_OP_NORM_FWD,
     {F("x", "LD", 'a'), O("residual", "LD", 'w'), O("z", "LD", 'a'), F("weight", "D", 'w'),
      O("bias", "D", 'w'), F("out", "LD", 'a'), O("residual_out", "LD", 'w'),
      O("mean", "LG", 'f'), O("rstd", "LG", 'f')}},
    {PORTSSM_OP_NORM_BWD,
     {F("x", "LD", 'w'), O("z", "LD", 'a'), F("weight", "D", 'w'), O("bias", "D", 'w'),
      O("mean", "LG", 'f'), F("rstd", "LG", 'f'), F("dout", "LD", 'a'),
      O("dresidual_out", "LD", 'w'), F("dx", "LD", 'a'), O("dresidual", "LD", 'w'),
      O("dz", "LD", 'a'), O("dweight", "D", 'w'), O("dbias", "D", 'w'), O("out", "LD", 'a')}},
};
#undef F
#undef O

/* ---------------------------------------------------------------- one call */

typedef struct tensor_plan {
    const field_spec *spec;
    size_t offset; /* of the field in the args struct */
    int present;
    portssm_tensor t;
    int output;         /* written by a successful call */
    int unaddressable;  /* the extent overflows: the call must fail */
    uint64_t lo, hi;    /* byte range in the arena, [lo, hi) */
} tensor_plan;

typedef struct call {
    const op_spec *op;
    char args_name[96];
    size_t args_size;
    unsigned char args[4096] __attribute__((aligned(16)));
    tensor_plan t[MAX_FIELDS];
    int nt;
    portssm_workspace *ws; /* into args, or NULL */
    uint64_t ws_lo, ws_hi;
} call;

/* Written by the op: out*, final_state(s), varlen_states, in/out states, the forwards'
 * checkpoints (the scan's and the SSD's), the SSD forward's y (the backward's y and checkpoints
 * are inputs), the norm forward's residual_out and statistics, the norm backward's dresidual,
 * and d<name> for an input <name> of the same struct (not dout, dfinal_*, dresidual_out: those
 * are the incoming gradients). */
static int is_output(const call *c, const char *name)
{
    static const char *const outs[] = {"out", "final_state", "final_states", "varlen_states",
                                       "state", "conv_state"};
    for (size_t i = 0; i < sizeof outs / sizeof outs[0]; i++)
        if (!strcmp(name, outs[i]))
            return 1;
    if (!strcmp(name, "checkpoints"))
        return c->op->op == PORTSSM_OP_SELECTIVE_SCAN_FWD ||
               c->op->op == PORTSSM_OP_SSD_CHUNK_SCAN_FWD;
    if (!strcmp(name, "y"))
        return c->op->op == PORTSSM_OP_SSD_CHUNK_SCAN_FWD;
    if (!strcmp(name, "residual_out") || !strcmp(name, "mean") || !strcmp(name, "rstd"))
        return c->op->op == PORTSSM_OP_NORM_FWD;
    if (!strcmp(name, "dresidual")) /* the gradient of the forward's residual */
        return c->op->op == PORTSSM_OP_NORM_BWD;
    if (name[0] != 'd' || !strcmp(name, "dout") || !strncmp(name, "dfinal", 6))
        return 0;
    for (int i = 0; i < MAX_FIELDS && c->op->f[i].name; i++)
        if (!strcmp(name + 1, c->op->f[i].name))
            return 1;
    return 0;
}

static int64_t dim_value(char letter, const int64_t *d)
{
    /* B D L W S N G H P K T Q M b: see decode(); X: P*N (the SSD's checkpoints) */
    const char *letters = "BDLWSNGHPKTQMb";
    if (letter == 'X')
        return d[8] * d[5];
    const char *at = strchr(letters, letter);
    return at ? d[at - letters] : 1;
}

static portssm_dtype dtype_of(char kind, portssm_dtype act, portssm_dtype weight)
{
    return kind == 'a' ? act : kind == 'w' ? weight : kind == 'i' ? PORTSSM_I32 : PORTSSM_F32;
}

/* Byte extent of t, or 0 if it cannot be addressed (overflow). */
static int extent(const portssm_tensor *t, int64_t *lo_el, int64_t *hi_el)
{
    __int128 lo = 0, hi = 0;
    if (t->ndim < 1 || t->ndim > PORTSSM_MAX_DIMS)
        return 0;
    for (int i = 0; i < t->ndim; i++) {
        if (t->shape[i] < 1)
            return 0;
        __int128 step = (__int128)(t->shape[i] - 1) * t->stride[i];
        if (step < 0)
            lo += step;
        else
            hi += step;
    }
    if (lo < INT64_MIN / 8 || hi > INT64_MAX / 8)
        return 0;
    *lo_el = (int64_t)lo;
    *hi_el = (int64_t)hi;
    return 1;
}

static const int64_t extreme[] = {0, -1, 2, 3, 1ll << 31, (1ll << 31) - 1, INT64_MAX, INT64_MIN,
                                  -(1ll << 40), 1ll << 62};

static void mutate(call *c, reader *r)
{
    tensor_plan *p = &c->t[u8(r) % c->nt];
    portssm_tensor *t = &p->t;
    const int dims = t->ndim < 1 ? 1 : t->ndim > PORTSSM_MAX_DIMS ? PORTSSM_MAX_DIMS : t->ndim;
    const int k = u8(r) % dims; /* ndim may already be out of range: stay inside the arrays */
    switch (u8(r) % 12) {
    case 0: t->stride[k] = 0; break;
    case 1: t->stride[k] = (int64_t)(0 - (uint64_t)t->stride[k]); break; /* INT64_MIN stays */
    case 2: t->stride[k] = extreme[u8(r) % (sizeof extreme / sizeof extreme[0])]; break;
    case 3: t->shape[k] = extreme[u8(r) % (sizeof extreme / sizeof extreme[0])]; break;
    case 4: t->shape[k] = (int64_t)((uint64_t)t->shape[k] + 1); break;
    case 5: t->ndim = (int32_t)(u8(r) % 7) - 1; break;
    case 6: t->dtype = (portssm_dtype)(u8(r) % 6); break;
    case 7: p->present = !p->present; break;
    case 8: { /* swap two strides: another layout of the same shape */
        const int j = u8(r) % dims;
        int64_t s = t->stride[k];
        t->stride[k] = t->stride[j];
        t->stride[j] = s;
        break;
    }
    case 9: t->stride[k] = (int64_t)(int8_t)u8(r); break;
    default: { /* a scalar field: any bits */
        size_t size;
        int32_t n;
        if (portssm_struct_layout(c->args_name, &size, &n) != PORTSSM_OK || n <= 0)
            break;
        const char *fname;
        size_t off, fsize;
        if (portssm_struct_field(c->args_name, u8(r) % n, &fname, &off, &fsize) == PORTSSM_OK &&
            fsize == 4) {
            uint32_t v = u32(r);
            memcpy(c->args + off, &v, 4);
        }
        break;
    }
    }
}

/* Places every present tensor in the arena, one after another; 0 if they do not fit. */
static int place(call *c, reader *r)
{
    uint64_t at = 64;
    for (int i = 0; i < c->nt; i++) {
        tensor_plan *p = &c->t[i];
        if (!p->present) {
            memset(&p->t, 0, sizeof p->t);
            continue;
        }
        const size_t es = portssm_dtype_size(p->t.dtype) ? portssm_dtype_size(p->t.dtype) : 4;
        int64_t lo, hi;
        if (!extent(&p->t, &lo, &hi)) {
            p->unaddressable = p->t.ndim >= 1 && p->t.ndim <= PORTSSM_MAX_DIMS;
            p->t.data = arena + at; /* an invalid tensor: must be refused without a read */
            p->lo = p->hi = at;
            continue;
        }
        const uint64_t bytes = (uint64_t)(hi - lo + 1) * es;
        at = (at + 15) / 16 * 16 + (u8(r) % 4) * 16;
        if (bytes > ARENA_BYTES || at + bytes > ARENA_BYTES)
            return 0;
        p->lo = at;
        p->hi = at + bytes;
        p->t.data = arena + at - lo * (int64_t)es;
        at += bytes;
    }
    if (c->ws && u8(r) % 2) { /* the caller's workspace: the rest of the arena, or a sliver */
        at = (at + 255) / 256 * 256;
        if (at < ARENA_BYTES) {
            c->ws->data = arena + at;
            c->ws->bytes = u8(r) % 4 ? ARENA_BYTES - at : u8(r);
            c->ws_lo = at;
            c->ws_hi = at + c->ws->bytes;
        }
    }
    return 1;
}

/* Index tensors (I32) hold small values from the input: in range, -1, or past the end. */
static void fill_indices(call *c, reader *r, int64_t rows)
{
    for (int i = 0; i < c->nt; i++) {
        tensor_plan *p = &c->t[i];
        if (!p->present || p->t.dtype != PORTSSM_I32 || p->hi <= p->lo)
            continue;
        int32_t *v = (int32_t *)(arena + p->lo);
        const int64_t n = (int64_t)(p->hi - p->lo) / 4;
        int32_t run = 0;
        for (int64_t k = 0; k < n; k++) {
            const uint8_t b = u8(r);
            if (!strcmp(p->spec->name, "cu_seqlens"))
                run += b % 5; /* offsets: mostly non-decreasing */
            v[k] = !strcmp(p->spec->name, "cu_seqlens") ? run
                   : b < 200                               ? (int32_t)(b % (rows + 1))
                   : b < 230                               ? -1
                                                           : (int32_t)(b * 997);
        }
    }
}

static void fail(const call *c, const char *what, portssm_status s, const char *msg)
{
    fprintf(stderr, "fuzz_api: %s: %s returned %s: %s\n", what, portssm_op_name(c->op->op),
            portssm_status_name(s), msg);
    abort();
}

static portssm_status run_op(portssm_context *ctx, const call *c)
{
    const void *a = c->args;
    switch (c->op->op) {
    case PORTSSM_OP_CAUSAL_CONV1D_FWD: return portssm_causal_conv1d_fwd(ctx, a);
    case PORTSSM_OP_CAUSAL_CONV1D_BWD: return portssm_causal_conv1d_bwd(ctx, a);
    case PORTSSM_OP_CAUSAL_CONV1D_UPDATE: return portssm_causal_conv1d_update(ctx, a);
    case PORTSSM_OP_SELECTIVE_SCAN_FWD: return portssm_selective_scan_fwd(ctx, a);
    case PORTSSM_OP_SELECTIVE_SCAN_BWD: return portssm_selective_scan_bwd(ctx, a);
    case PORTSSM_OP_SELECTIVE_STATE_UPDATE: return portssm_selective_state_update(ctx, a);
    case PORTSSM_OP_SSD_CHUNK_SCAN_FWD: return portssm_ssd_chunk_scan_fwd(ctx, a);
    case PORTSSM_OP_SSD_CHUNK_SCAN_BWD: return portssm_ssd_chunk_scan_bwd(ctx, a);
    case PORTSSM_OP_NORM_FWD: return portssm_norm_fwd(ctx, a);
    case PORTSSM_OP_NORM_BWD: return portssm_norm_bwd(ctx, a);
    }
    return PORTSSM_ERR_INTERNAL;
}

/* How the calls ended, printed at exit: a run that never reaches OK tests only validation. */
static long outcomes[PORTSSM_ERR_INTERNAL + 1];

static void print_outcomes(void)
{
    fprintf(stderr, "fuzz_api outcomes:");
    for (int s = 0; s <= PORTSSM_ERR_INTERNAL; s++)
        if (outcomes[s])
            fprintf(stderr, " %s %ld", portssm_status_name((portssm_status)s), outcomes[s]);
    fprintf(stderr, "\n");
}

static portssm_context *context(void)
{
    static portssm_context *ctx;
    if (!ctx) {
        const char *name = getenv("PORTSSM_FUZZ_BACKEND");
        portssm_backend b = PORTSSM_BACKEND_CPU;
        int32_t dev = 0;
        if (name && portssm_backend_parse(name, &b, &dev) != PORTSSM_OK) {
            fprintf(stderr, "fuzz_api: PORTSSM_FUZZ_BACKEND=%s: %s\n", name,
                    portssm_last_error(NULL));
            exit(2);
        }
        if (portssm_create(&ctx, b, dev < 0 ? 0 : dev) != PORTSSM_OK) {
            fprintf(stderr, "fuzz_api: %s\n", portssm_last_error(NULL));
            exit(2);
        }
        atexit(print_outcomes);
        /* arena contents: small finite values in every float format (0x3c3c...) */
        memset(arena, 0x3c, sizeof arena);
    }
    return ctx;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    portssm_context *ctx = context();
    reader r = {data, size};
    static call c;
    memset(&c, 0, sizeof c);
    c.op = &ops[u8(&r) % (sizeof ops / sizeof ops[0])];
    snprintf(c.args_name, sizeof c.args_name, "portssm_%s_args", portssm_op_name(c.op->op));
    int32_t nfields;
    if (portssm_struct_layout(c.args_name, &c.args_size, &nfields) != PORTSSM_OK ||
        c.args_size > sizeof c.args)
        abort();

    /* the template's dims: B D L W S N G H P K T Q M b */
    int64_t d[14];
    const int64_t G = 1 + u8(&r) % 2;
    d[0] = 1 + u8(&r) % 3;                 /* B */
    d[6] = G;                              /* G */
    d[1] = G * (1 + u8(&r) % 8);           /* D, a multiple of G */
    d[2] = 1 + u8(&r) % 40;                /* L */
    d[3] = 1 + u8(&r) % 5;                 /* W */
    d[4] = d[3] > 1 ? d[3] - 1 : 1;        /* S = W - 1 */
    d[5] = 1 + u8(&r) % 8;                 /* N */
    d[7] = G * (1 + u8(&r) % 3);           /* H, a multiple of G */
    d[8] = 1 + u8(&r) % 8;                 /* P */
    d[9] = 1 + u8(&r) % 3;                 /* K */
    d[10] = 1;                             /* T */
    d[12] = 1 + u8(&r) % 3;                /* M = n_seq */
    d[11] = d[12] + 1;                     /* Q = n_seq + 1 */
    d[13] = d[0] + u8(&r) % 2;             /* b: rows of a state pool */
    if (u8(&r) % 4 == 0)
        d[0] = 1; /* cu_seqlens wants B = 1 */
    const portssm_dtype act = (portssm_dtype)(u8(&r) % 3);
    const portssm_dtype weight = u8(&r) % 2 ? PORTSSM_F32 : act;

    for (int i = 0; i < nfields && c.nt < MAX_FIELDS; i++) {
        const char *fname;
        size_t off, fsize;
        if (portssm_struct_field(c.args_name, i, &fname, &off, &fsize) != PORTSSM_OK)
            abort();
        if (fsize == sizeof(portssm_workspace) && !strcmp(fname, "workspace")) {
            c.ws = (portssm_workspace *)(c.args + off);
            continue;
        }
        if (!strcmp(fname, "group_size")) { /* the norms' groups of channels: D / G, or 0 */
            const int64_t v = u8(&r) % 4 ? d[1] / d[6] : 0;
            memcpy(c.args + off, &v, sizeof v);
            continue;
        }
        if (fsize == 4) { /* scalars: mostly valid */
            int32_t v = (int32_t)(u8(&r) % 2);
            if (!strcmp(fname, "chunk_size"))
                v = (int32_t)(u8(&r) % 3) * 16;
            if (!strcmp(fname, "dt_min") || !strcmp(fname, "dt_max")) {
                const float f = !strcmp(fname, "dt_min") ? 0.0f : 100.0f;
                memcpy(c.args + off, &f, 4);
            } else
                memcpy(c.args + off, &v, 4);
            continue;
        }
        if (fsize != sizeof(portssm_tensor))
            continue;
        const field_spec *spec = NULL;
        for (int k = 0; k < MAX_FIELDS && c.op->f[k].name; k++)
            if (!strcmp(c.op->f[k].name, fname))
                spec = &c.op->f[k];
        if (!spec)
            abort(); /* the template lacks a field the header has */
        tensor_plan *p = &c.t[c.nt++];
        p->spec = spec;
        p->offset = off;
        p->present = !spec->optional || u8(&r) % 2;
        p->output = is_output(&c, fname);
        p->t.dtype = dtype_of(spec->kind, act, weight);
        p->t.ndim = (int32_t)strlen(spec->dims);
        int64_t stride = 1;
        for (int k = p->t.ndim - 1; k >= 0; k--) {
            p->t.shape[k] = dim_value(spec->dims[k], d);
            p->t.stride[k] = stride;
            stride *= p->t.shape[k];
        }
    }
    const int mutations = u8(&r) % 9;
    for (int i = 0; i < mutations && c.nt > 0; i++)
        mutate(&c, &r);
    if (!place(&c, &r))
        return 0;
    fill_indices(&c, &r, d[13]);
    if (u8(&r) % 8 == 0 && c.nt > 1) { /* a pointer misaligned or aliased */
        tensor_plan *p = &c.t[u8(&r) % c.nt];
        if (p->present && p->t.data) {
            if (u8(&r) % 2) {
                p->t.data = (char *)p->t.data + 1;
            } else {
                /* onto a present tensor only: the NULL data of an absent one would make this one
                 * absent to the library while the checks below still count it present */
                void *other = c.t[u8(&r) % c.nt].t.data;
                /* ... and only where this tensor's own elements stay inside the arena there: a
                 * negative stride reaches below its data pointer, which place() allowed for at
                 * its own spot, not at the other's (the library cannot know a buffer's bounds) */
                const size_t es =
                    portssm_dtype_size(p->t.dtype) ? portssm_dtype_size(p->t.dtype) : 4;
                int64_t lo, hi;
                if (other && extent(&p->t, &lo, &hi)) {
                    const __int128 at = (__int128)((unsigned char *)other - arena);
                    if (at + (__int128)lo * (__int128)es >= 0 &&
                        at + ((__int128)hi + 1) * (__int128)es <= (__int128)ARENA_BYTES)
                        p->t.data = other;
                }
            }
        }
    }
    for (int i = 0; i < c.nt; i++)
        memcpy(c.args + c.t[i].offset, &c.t[i].t, sizeof c.t[i].t);

    memcpy(before, arena, sizeof arena);
    const portssm_status s = run_op(ctx, &c);
    const char *msg = portssm_last_error(ctx);
    if ((int)s < 0 || s > PORTSSM_ERR_INTERNAL)
        fail(&c, "not a portssm_status", s, msg);
    outcomes[s]++;
    if (s == PORTSSM_ERR_INTERNAL)
        fail(&c, "an internal error", s, msg);
    if (s == PORTSSM_ERR_INVALID_ARGUMENT && !strchr(msg, '\''))
        fail(&c, "an INVALID_ARGUMENT message names no argument", s, msg);
    if (s != PORTSSM_OK) {
        if (memcmp(before, arena, sizeof arena) != 0)
            fail(&c, "a failed call wrote", s, msg);
        return 0;
    }
    for (int i = 0; i < c.nt; i++)
        if (c.t[i].present && c.t[i].unaddressable)
            fail(&c, "a tensor that cannot be addressed was accepted", s, c.t[i].spec->name);
    for (uint64_t b = 0; b < ARENA_BYTES; b++) {
        if (arena[b] == before[b])
            continue;
        int inside = b >= c.ws_lo && b < c.ws_hi;
        for (int i = 0; i < c.nt && !inside; i++)
            inside = c.t[i].present && c.t[i].output && b >= c.t[i].lo && b < c.t[i].hi;
        if (!inside) {
            char where[128];
            snprintf(where, sizeof where, "byte %llu of the arena, outside every output",
                     (unsigned long long)b);
            fail(&c, "a successful call wrote", s, where);
        }
    }
    memcpy(arena, before, sizeof arena); /* the next call starts from the same contents */
    return 0;
}
