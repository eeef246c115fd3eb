/*
 * validate.h - argument checking shared by every op, and the per-op entry points.
 *
 * An op describes its tensors as a list of pssm_arg: name, role (input, output, in/out), whether
 * it is required, a dtype rule and its dims as a string of symbols:
 *     B batch  D channels  L length  W conv width  w = W-1  N state  G groups  H heads
 *     P head dim  T new tokens  S state length  b = B' (rows of a state pool)
 *     K checkpoints of a scan row  Q sequences of a packed row  R = Q + 1 (cu_seqlens)
 *     r rows, h hidden channels, g groups of channels (the norms)
 * The first present tensor that has a symbol fixes its value ("L, from 'u'"); an op may fix a
 * symbol beforehand (W and W-1 from 'weight').  Then, in order:
 *   pssm_check_tensors   presence, ndim, shapes (>= 1, or 0 for the symbols of
 *                        PSSM_SYMBOLS_MAY_BE_0), dtype enum, alignment, int64 extents; whether
 *                        the call is empty (c->empty: some tensor has no element)
 *   (op-specific rules: optional gradients need their input, W >= 2 for states, ...)
 *   pssm_check_shapes    every dim against its symbol, every dtype against its rule
 *   (op-specific relations: G divides D, S >= W-1, ...)
 *   pssm_check_work      the call's logical work, from its symbols with overflow checks, at
 *                        most PSSM_WORK_MAX (backend.h); kept in the context for the backends
 *   pssm_check_overlaps  outputs and in/out tensors against themselves and everything else
 * Each failure returns PORTSSM_ERR_INVALID_ARGUMENT with "<op>: '<arg>' ..." in the context.
 */
#ifndef PSSM_VALIDATE_H
#define PSSM_VALIDATE_H

#include "backend.h"
#include "layout.h"

#define PSSM_MAX_ARGS 24
#define PSSM_SYMBOLS "BDLWwNGHPTSbKQRMrhg"
#define PSSM_NSYM ((int)sizeof PSSM_SYMBOLS - 1)
/* The sizes that may be 0 (portssm.h, "empty tensors"): batch, channels, length, heads, head
 * dim, new tokens, rows, and what follows from them (checkpoints K of L = 0, P*N of P = 0).
 * Every other size (W, N, G, S, B', the norms' hidden size and groups, n_seq) stays >= 1. */
#define PSSM_SYMBOLS_MAY_BE_0 "BDLHPTrKM"

typedef enum pssm_role { PSSM_IN, PSSM_OUT, PSSM_INOUT } pssm_role;

enum { PSSM_OPTIONAL = 0, PSSM_REQUIRED = 1 };

typedef enum pssm_dtype_rule {
    PSSM_DT_ACT,   /* the activation dtype of the call (f32, f16, bf16), fixed by the first */
    PSSM_DT_F32,
    PSSM_DT_I32,
    PSSM_DT_PARAM, /* f32 or the activation dtype (conv weight)                           */
    PSSM_DT_FLOAT, /* f32, f16 or bf16, independently of the activation dtype (a decode
                      state: 16-bit states are computed in f32 and rounded once per store) */
    PSSM_DT_LIKE   /* the dtype of another argument (pssm_arg.like)                       */
} pssm_dtype_rule;

typedef struct pssm_arg {
    const char *name;
    const portssm_tensor *t;
    pssm_role role;
    int required;
    pssm_dtype_rule dt;
    int like;          /* PSSM_DT_LIKE: index of the argument whose dtype this one has */
    const char *dims;  /* one symbol per dim; its length is the ndim                  */
    const char *forms; /* every accepted layout, for the message of a wrong ndim (opt)  */
    pssm_extent ext;   /* set by pssm_check_tensors                                   */
    int empty;         /* present with no element (set by pssm_check_tensors): it
                          reaches no memory, so it overlaps nothing                  */
} pssm_arg;

typedef struct pssm_validator {
    pssm_bctx *c;
    const char *op;
    pssm_arg args[PSSM_MAX_ARGS];
    int n;
    int64_t dim[PSSM_NSYM]; /* -1: not fixed yet */
    const char *dim_from[PSSM_NSYM];
    portssm_dtype act;
    const char *act_from; /* NULL until an activation tensor fixed the dtype */
} pssm_validator;

#define PSSM_TRY(expr)                                                                          \
    do {                                                                                        \
        portssm_status pssm_try_ = (expr);                                                      \
        if (pssm_try_ != PORTSSM_OK)                                                            \
            return pssm_try_;                                                                   \
    } while (0)

void pssm_validator_init(pssm_validator *v, pssm_bctx *c, const char *op);
/* Formats "<op>: <message>" into the context; returns PORTSSM_ERR_INVALID_ARGUMENT. */
portssm_status pssm_invalid(pssm_validator *v, const char *fmt, ...) PSSM_PRINTF(2, 3);

/* Appends an argument; returns its index (for PSSM_DT_LIKE). */
int pssm_add(pssm_validator *v, const char *name, const portssm_tensor *t, pssm_role role,
             int required, pssm_dtype_rule dt, const char *dims);
int pssm_add_like(pssm_validator *v, const char *name, const portssm_tensor *t, pssm_role role,
                  int required, int like, const char *dims);

/* A tensor with no element (a 0 among its first ndim <= 4 dims); its data may be NULL. */
static inline int pssm_tensor_empty(const portssm_tensor *t)
{
    for (int i = 0; i < t->ndim && i < PORTSSM_MAX_DIMS; i++)
        if (t->shape[i] == 0)
            return 1;
    return 0;
}

/* Present: data given, or an empty tensor (whose data may be NULL, as frameworks give it);
 * absent: data NULL and no 0 in its shape (a zero-initialised tensor). */
static inline int pssm_present(const portssm_tensor *t)
{
    return t->data != NULL || pssm_tensor_empty(t);
}

/* Fixes symbol `sym` to `value`, naming `from` as its origin. */
void pssm_fix(pssm_validator *v, char sym, int64_t value, const char *from);
int64_t pssm_dim(const pssm_validator *v, char sym);
const char *pssm_dim_from(const pssm_validator *v, char sym);

portssm_status pssm_check_tensors(pssm_validator *v);
portssm_status pssm_check_shapes(pssm_validator *v);
portssm_status pssm_check_overlaps(pssm_validator *v);

/* The call's logical work, computed by the op from its fixed symbols with pssm_size_mul /
 * pssm_size_add (-1: it overflowed): refused beyond PSSM_WORK_MAX with a message giving
 * `formula` (e.g. "B*D*L*N") and the value and origin of each of `syms` that is fixed;
 * otherwise stored, with `formula` (a string literal), in v->c->work and work_formula. */
portssm_status pssm_check_work(pssm_validator *v, int64_t work, const char *formula,
                               const char *syms);
/* A symbol's value for a work formula: 1 while it is not fixed (its tensors are absent). */
int64_t pssm_work_dim(const pssm_validator *v, char sym);

/* Small rules several ops share. */
portssm_status pssm_check_activation(pssm_validator *v, portssm_activation a);
/* An optional tensor `name` given without the input `input` it needs: a gradient without its
 * input (why NULL: "'<name>' is defined by it"), or another pairing, which says why. */
portssm_status pssm_check_needs(pssm_validator *v, const char *name, const portssm_tensor *t,
                                const char *input, const portssm_tensor *in, const char *why);
/* Symbol `part` (fixed by some tensor) must divide symbol `whole`. */
portssm_status pssm_check_divides(pssm_validator *v, char part, char whole);
/* Fixes W and W-1 from a checked 'weight'; a present tensor with a W-1 dim needs W >= 2. */
portssm_status pssm_fix_conv_width(pssm_validator *v, const portssm_tensor *weight);
/* Fixes K, the checkpoints of a scan row of length L; a present 'checkpoints' needs K >= 1. */
portssm_status pssm_fix_scan_checkpoints(pssm_validator *v, int64_t L, const portssm_tensor *ck);
/* The caller's workspace, if given: 256-byte aligned, its size stated, overlapping no tensor of
 * the call (run after pssm_check_overlaps).  Its size against the op's need is the core's. */
portssm_status pssm_check_workspace(pssm_validator *v, const portssm_workspace *w);

/* ---- the ops (validate_conv1d.c, validate_scan.c, validate_decode.c, validate_ssd.c,
 *      validate_norm.c) */

portssm_status pssm_validate_causal_conv1d_fwd(pssm_bctx *c,
                                               const portssm_causal_conv1d_fwd_args *a);
portssm_status pssm_validate_causal_conv1d_bwd(pssm_bctx *c,
                                               const portssm_causal_conv1d_bwd_args *a);
portssm_status pssm_validate_causal_conv1d_update(pssm_bctx *c,
                                                  const portssm_causal_conv1d_update_args *a);
portssm_status pssm_validate_selective_scan_fwd(pssm_bctx *c,
                                                const portssm_selective_scan_fwd_args *a);
portssm_status pssm_validate_selective_scan_bwd(pssm_bctx *c,
                                                const portssm_selective_scan_bwd_args *a);
portssm_status pssm_validate_selective_state_update(
    pssm_bctx *c, const portssm_selective_state_update_args *a);
portssm_status pssm_validate_ssd_chunk_scan_fwd(pssm_bctx *c,
                                                const portssm_ssd_chunk_scan_fwd_args *a);
portssm_status pssm_validate_ssd_chunk_scan_bwd(pssm_bctx *c,
                                                const portssm_ssd_chunk_scan_bwd_args *a);
portssm_status pssm_validate_norm_fwd(pssm_bctx *c, const portssm_norm_fwd_args *a);
portssm_status pssm_validate_norm_bwd(pssm_bctx *c, const portssm_norm_bwd_args *a);

#endif /* PSSM_VALIDATE_H */
