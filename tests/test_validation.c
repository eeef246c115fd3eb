/*
 * test_validation.c - every invalid argument of every op is rejected before anything is
 * written, with a message naming the argument; layouts that are valid are accepted.
 *
 * Each op (and each of its forms) is described by a table of its tensors: role, required or
 * not, dims as symbols, dtype class.  From the table the suite builds a valid fixture (every
 * optional tensor present, fresh random inputs, poisoned outputs) and derives the invalid-
 * argument matrix: missing, wrong ndim, wrong size in each dim, wrong dtype, misaligned,
 * int64-overflowing strides, and for written tensors zero/self-overlapping strides and aliasing
 * every other tensor.  Each case must give PORTSSM_ERR_INVALID_ARGUMENT, a message that starts
 * with the op and names the argument, and leave every byte of every buffer unchanged.  Hand-
 * written cases cover the rules between arguments; positive cases cover layouts that must pass,
 * and calls with an empty tensor (a size 0): they succeed, write only what the math gives for
 * no step or no term, and still refuse every other bad argument.
 * Validation happens in the core, so a backend that lacks an op still runs the whole matrix.
 */
#include "harness.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---------------------------------------------------------------- op descriptions */

/* Symbol sizes of every fixture; all >= 2, so that shrinking a dim keeps it >= 1.
 * S (state length), b (state-pool rows) and V (conv width where nothing else depends on it)
 * are free: changing them keeps the call valid, so the matrix leaves them alone. */
static int64_t sym_size(char s)
{
    switch (s) {
    case 'B': return 2;
    case 'D': return 4;
    case 'L': return 5;
    case 'W': case 'V': return 4;
    case 'w': return 3; /* W - 1 */
    case 'N': return 3;
    case 'G': return 2;
    case 'H': return 2;
    case 'P': return 3;
    case 'T': return 2;
    case 'S': return 5;
    case 'b': return 3;
    case 'r': return 3; /* norms: rows, hidden channels, groups (the fixtures' group_size 2) */
    case 'h': return 4;
    case 'g': return 2;
    }
    return -1;
}
static int sym_free(char s) { return s == 'S' || s == 'b' || s == 'V'; }

typedef struct targ {
    const char *name;
    size_t off;        /* offset of the tensor in the args struct */
    char role;         /* 'i' input, 'o' output, 's' state (in/out) */
    int required;
    const char *dims;
    char dt;           /* 'a' activation (f16 here), 'f' f32, 'i' i32, 'p' weight (f32 or
                          activation), 'q' weight's dtype, 'd' a decode state (f32, f16 or bf16
                          whatever the activation dtype: bf16 here) */
    const char *ndims; /* other valid ndims (a second form), e.g. "24"; NULL: only strlen(dims) */
} targ;

typedef union any_args {
    portssm_causal_conv1d_fwd_args cf;
    portssm_causal_conv1d_bwd_args cb;
    portssm_causal_conv1d_update_args cu;
    portssm_selective_scan_fwd_args sf;
    portssm_selective_scan_bwd_args sb;
    portssm_selective_state_update_args su;
    portssm_ssd_chunk_scan_fwd_args df;
    portssm_ssd_chunk_scan_bwd_args db;
    portssm_norm_fwd_args nf;
    portssm_norm_bwd_args nb;
} any_args;

typedef struct opdef {
    const char *op;   /* name in messages */
    const char *form; /* which form of the op this table describes */
    portssm_status (*call)(portssm_context *, const any_args *);
    long act_off;     /* offset of the activation field, or -1 */
    long flag_off;    /* offset of an int flag set to 1 in fixtures (softplus), or -1 */
    const targ *t;
    int n;
    void (*prep)(any_args *); /* sets the fixtures' other scalar fields (opt) */
} opdef;

#define MAX_T 24

/* The args pointer is passed as is (NULL included): every member of the union is at offset 0. */
static portssm_status call_cf(portssm_context *c, const any_args *a)
{
    return portssm_causal_conv1d_fwd(c, (const void *)a);
}
static portssm_status call_cb(portssm_context *c, const any_args *a)
{
    return portssm_causal_conv1d_bwd(c, (const void *)a);
}
static portssm_status call_cu(portssm_context *c, const any_args *a)
{
    return portssm_causal_conv1d_update(c, (const void *)a);
}
static portssm_status call_sf(portssm_context *c, const any_args *a)
{
    return portssm_selective_scan_fwd(c, (const void *)a);
}
static portssm_status call_sb(portssm_context *c, const any_args *a)
{
    return portssm_selective_scan_bwd(c, (const void *)a);
}
static portssm_status call_su(portssm_context *c, const any_args *a)
{
    return portssm_selective_state_update(c, (const void *)a);
}
static portssm_status call_df(portssm_context *c, const any_args *a)
{
    return portssm_ssd_chunk_scan_fwd(c, (const void *)a);
}
static portssm_status call_db(portssm_context *c, const any_args *a)
{
    return portssm_ssd_chunk_scan_bwd(c, (const void *)a);
}
static portssm_status call_nf(portssm_context *c, const any_args *a)
{
    return portssm_norm_fwd(c, (const void *)a);
}
static portssm_status call_nb(portssm_context *c, const any_args *a)
{
    return portssm_norm_bwd(c, (const void *)a);
}

#define CF(f) offsetof(portssm_causal_conv1d_fwd_args, f)
#define CB(f) offsetof(portssm_causal_conv1d_bwd_args, f)
#define CU(f) offsetof(portssm_causal_conv1d_update_args, f)
#define SF(f) offsetof(portssm_selective_scan_fwd_args, f)
#define SB(f) offsetof(portssm_selective_scan_bwd_args, f)
#define SU(f) offsetof(portssm_selective_state_update_args, f)
#define DF(f) offsetof(portssm_ssd_chunk_scan_fwd_args, f)
#define DB(f) offsetof(portssm_ssd_chunk_scan_bwd_args, f)
#define NF(f) offsetof(portssm_norm_fwd_args, f)
#define NB(f) offsetof(portssm_norm_bwd_args, f)

static const targ conv_fwd_t[] = {
    {"x", CF(x), 'i', 1, "BDL", 'a', NULL},
    {"weight", CF(weight), 'i', 1, "DW", 'p', NULL},
    {"bias", CF(bias), 'i', 0, "D", 'q', NULL},
    {"seq_idx", CF(seq_idx), 'i', 0, "BL", 'i', NULL},
    {"initial_states", CF(initial_states), 'i', 0, "BDw", 'a', NULL},
    {"final_states", CF(final_states), 'o', 0, "BDw", 'a', NULL},
    {"out", CF(out), 'o', 1, "BDL", 'a', NULL},
};

static const targ conv_bwd_t[] = {
    {"x", CB(x), 'i', 1, "BDL", 'a', NULL},
    {"weight", CB(weight), 'i', 1, "DW", 'p', NULL},
    {"bias", CB(bias), 'i', 0, "D", 'q', NULL},
    {"seq_idx", CB(seq_idx), 'i', 0, "BL", 'i', NULL},
    {"initial_states", CB(initial_states), 'i', 0, "BDw", 'a', NULL},
    {"dout", CB(dout), 'i', 1, "BDL", 'a', NULL},
    {"dfinal_states", CB(dfinal_states), 'i', 0, "BDw", 'a', NULL},
    {"dx", CB(dx), 'o', 1, "BDL", 'a', NULL},
    {"dweight", CB(dweight), 'o', 1, "DW", 'q', NULL},
    {"dbias", CB(dbias), 'o', 0, "D", 'q', NULL},
    {"dinitial_states", CB(dinitial_states), 'o', 0, "BDw", 'a', NULL},
};

static const targ conv_update3_t[] = {
    {"x", CU(x), 'i', 1, "BDT", 'a', "23"},
    {"conv_state", CU(conv_state), 's', 1, "bDS", 'a', NULL},
    {"weight", CU(weight), 'i', 1, "DV", 'p', NULL},
    {"bias", CU(bias), 'i', 0, "D", 'q', NULL},
    {"cache_seqlens", CU(cache_seqlens), 'i', 0, "B", 'i', NULL},
    {"conv_state_indices", CU(conv_state_indices), 'i', 0, "B", 'i', NULL},
    {"out", CU(out), 'o', 1, "BDT", 'a', NULL},
};

static const targ conv_update2_t[] = {
    {"x", CU(x), 'i', 1, "BD", 'a', "23"},
    {"conv_state", CU(conv_state), 's', 1, "bDS", 'a', NULL},
    {"weight", CU(weight), 'i', 1, "DV", 'p', NULL},
    {"bias", CU(bias), 'i', 0, "D", 'q', NULL},
    {"cache_seqlens", CU(cache_seqlens), 'i', 0, "B", 'i', NULL},
    {"conv_state_indices", CU(conv_state_indices), 'i', 0, "B", 'i', NULL},
    {"out", CU(out), 'o', 1, "BD", 'a', NULL},
};

#define SCAN_INPUTS(M, bc_dims, bc_dt)                                                          \
    {"u", M(u), 'i', 1, "BDL", 'a', NULL}, {"delta", M(delta), 'i', 1, "BDL", 'a', NULL},       \
        {"A", M(A), 'i', 1, "DN", 'f', NULL}, {"B", M(B), 'i', 1, bc_dims, bc_dt, "24"},        \
        {"C", M(C), 'i', 1, bc_dims, bc_dt, "24"}, {"D", M(D), 'i', 0, "D", 'f', NULL},         \
        {"z", M(z), 'i', 0, "BDL", 'a', NULL},                                                  \
        {"delta_bias", M(delta_bias), 'i', 0, "D", 'f', NULL},                                  \
        {"initial_state", M(initial_state), 'i', 0, "BDN", 'f', NULL}

#define SCAN_FWD_T(bc_dims, bc_dt)                                                              \
    {SCAN_INPUTS(SF, bc_dims, bc_dt), {"final_state", SF(final_state), 'o', 0, "BDN", 'f', NULL}, \
     {"out", SF(out), 'o', 1, "BDL", 'a', NULL}}

#define SCAN_BWD_T(bc_dims, bc_dt)                                                              \
    {SCAN_INPUTS(SB, bc_dims, bc_dt),                                                           \
     {"dout", SB(dout), 'i', 1, "BDL", 'a', NULL},                                              \
     {"dfinal_state", SB(dfinal_state), 'i', 0, "BDN", 'f', NULL},                              \
     {"du", SB(du), 'o', 1, "BDL", 'a', NULL},                                                  \
     {"ddelta", SB(ddelta), 'o', 1, "BDL", 'a', NULL},                                          \
     {"dA", SB(dA), 'o', 1, "DN", 'f', NULL},                                                   \
     {"dB", SB(dB), 'o', 1, bc_dims, bc_dt, NULL},                                              \
     {"dC", SB(dC), 'o', 1, bc_dims, bc_dt, NULL},                                              \
     {"dD", SB(dD), 'o', 0, "D", 'f', NULL},                                                    \
     {"dz", SB(dz), 'o', 0, "BDL", 'a', NULL},                                                  \
     {"ddelta_bias", SB(ddelta_bias), 'o', 0, "D", 'f', NULL},                                  \
     {"dinitial_state", SB(dinitial_state), 'o', 0, "BDN", 'f', NULL}}

static const targ scan_fwd_var_t[] = SCAN_FWD_T("BGNL", 'a');
static const targ scan_fwd_const_t[] = SCAN_FWD_T("DN", 'f');
static const targ scan_bwd_var_t[] = SCAN_BWD_T("BGNL", 'a');
static const targ scan_bwd_const_t[] = SCAN_BWD_T("DN", 'f');

static const targ update_m1_t[] = {
    {"state", SU(state), 's', 1, "bDN", 'd', "34"},
    {"x", SU(x), 'i', 1, "BD", 'a', NULL},
    {"dt", SU(dt), 'i', 1, "BD", 'a', NULL},
    {"A", SU(A), 'i', 1, "DN", 'f', NULL},
    {"B", SU(B), 'i', 1, "BN", 'a', NULL},
    {"C", SU(C), 'i', 1, "BN", 'a', NULL},
    {"D", SU(D), 'i', 0, "D", 'f', NULL},
    {"z", SU(z), 'i', 0, "BD", 'a', NULL},
    {"dt_bias", SU(dt_bias), 'i', 0, "D", 'f', NULL},
    {"state_batch_indices", SU(state_batch_indices), 'i', 0, "B", 'i', NULL},
    {"out", SU(out), 'o', 1, "BD", 'a', NULL},
};

static const targ update_heads_t[] = {
    {"state", SU(state), 's', 1, "bHPN", 'd', "34"},
    {"x", SU(x), 'i', 1, "BHP", 'a', NULL},
    {"dt", SU(dt), 'i', 1, "BHP", 'a', NULL},
    {"A", SU(A), 'i', 1, "HPN", 'f', NULL},
    {"B", SU(B), 'i', 1, "BGN", 'a', NULL},
    {"C", SU(C), 'i', 1, "BGN", 'a', NULL},
    {"D", SU(D), 'i', 0, "HP", 'f', NULL},
    {"z", SU(z), 'i', 0, "BHP", 'a', NULL},
    {"dt_bias", SU(dt_bias), 'i', 0, "HP", 'f', NULL},
    {"state_batch_indices", SU(state_batch_indices), 'i', 0, "B", 'i', NULL},
    {"out", SU(out), 'o', 1, "BHP", 'a', NULL},
};

/* SSD without cu_seqlens and varlen_states (packed input needs B = 1; the fixtures have B = 2) */
#define SSD_INPUTS(M)                                                                           \
    {"x", M(x), 'i', 1, "BLHP", 'a', NULL}, {"dt", M(dt), 'i', 1, "BLH", 'a', NULL},            \
        {"A", M(A), 'i', 1, "H", 'f', NULL}, {"B", M(B), 'i', 1, "BLGN", 'a', NULL},            \
        {"C", M(C), 'i', 1, "BLGN", 'a', NULL}, {"D", M(D), 'i', 0, "HP", 'f', "12"},           \
        {"z", M(z), 'i', 0, "BLHP", 'a', NULL}, {"dt_bias", M(dt_bias), 'i', 0, "H", 'f', NULL}, \
        {"initial_states", M(initial_states), 'i', 0, "BHPN", 'f', NULL},                       \
        {"seq_idx", M(seq_idx), 'i', 0, "BL", 'i', NULL}

static const targ ssd_fwd_t[] = {
    SSD_INPUTS(DF),
    {"out", DF(out), 'o', 1, "BLHP", 'a', NULL},
    {"final_states", DF(final_states), 'o', 0, "BHPN", 'f', NULL},
    {"y", DF(y), 'o', 0, "BLHP", 'a', NULL},
};

static const targ ssd_bwd_t[] = {
    SSD_INPUTS(DB),
    {"dout", DB(dout), 'i', 1, "BLHP", 'a', NULL},
    {"dfinal_states", DB(dfinal_states), 'i', 0, "BHPN", 'f', NULL},
    {"y", DB(y), 'i', 0, "BLHP", 'a', NULL},
    {"dx", DB(dx), 'o', 1, "BLHP", 'a', NULL},
    {"ddt", DB(ddt), 'o', 1, "BLH", 'a', NULL},
    {"dA", DB(dA), 'o', 1, "H", 'f', NULL},
    {"dB", DB(dB), 'o', 1, "BLGN", 'a', NULL},
    {"dC", DB(dC), 'o', 1, "BLGN", 'a', NULL},
    {"dD", DB(dD), 'o', 0, "HP", 'f', NULL},
    {"dz", DB(dz), 'o', 0, "BLHP", 'a', NULL},
    {"ddt_bias", DB(ddt_bias), 'o', 0, "H", 'f', NULL},
    {"dinitial_states", DB(dinitial_states), 'o', 0, "BHPN", 'f', NULL},
};

/* Norms: LayerNorm (so 'mean' is there), groups of 2 channels, with z, residual and residual
 * out (all F32 or act: 'p', f32 in the fixtures). */
static const targ norm_fwd_t[] = {
    {"x", NF(x), 'i', 1, "rh", 'a', NULL},
    {"residual", NF(residual), 'i', 0, "rh", 'p', NULL},
    {"z", NF(z), 'i', 0, "rh", 'a', NULL},
    {"weight", NF(weight), 'i', 1, "h", 'p', NULL},
    {"bias", NF(bias), 'i', 0, "h", 'q', NULL},
    {"out", NF(out), 'o', 1, "rh", 'a', NULL},
    {"residual_out", NF(residual_out), 'o', 0, "rh", 'p', NULL},
    {"mean", NF(mean), 'o', 0, "rg", 'f', NULL},
    {"rstd", NF(rstd), 'o', 0, "rg", 'f', NULL},
};

static const targ norm_bwd_t[] = {
    {"x", NB(x), 'i', 1, "rh", 'p', NULL},
    {"z", NB(z), 'i', 0, "rh", 'a', NULL},
    {"weight", NB(weight), 'i', 1, "h", 'p', NULL},
    {"bias", NB(bias), 'i', 0, "h", 'q', NULL},
    {"mean", NB(mean), 'i', 1, "rg", 'f', NULL}, /* LayerNorm's */
    {"rstd", NB(rstd), 'i', 1, "rg", 'f', NULL},
    {"dout", NB(dout), 'i', 1, "rh", 'a', NULL},
    {"dresidual_out", NB(dresidual_out), 'i', 0, "rh", 'p', NULL},
    {"dx", NB(dx), 'o', 1, "rh", 'a', NULL},
    {"dresidual", NB(dresidual), 'o', 0, "rh", 'p', NULL},
    {"dz", NB(dz), 'o', 0, "rh", 'a', NULL},
    {"dweight", NB(dweight), 'o', 0, "h", 'q', NULL},
    {"dbias", NB(dbias), 'o', 0, "h", 'q', NULL},
};

static void norm_fwd_prep(any_args *a)
{
    a->nf.group_size = 2;
    a->nf.eps = 1e-5f;
}
static void norm_bwd_prep(any_args *a) { a->nb.group_size = 2; }

#define N_OF(a) (int)(sizeof a / sizeof a[0])
#define ACT(M) (long)M(activation)

static const opdef op_conv_fwd = {"causal_conv1d_fwd", "", call_cf, ACT(CF), -1, conv_fwd_t,
                                  N_OF(conv_fwd_t), NULL};
static const opdef op_conv_bwd = {"causal_conv1d_bwd", "", call_cb, ACT(CB), -1, conv_bwd_t,
                                  N_OF(conv_bwd_t), NULL};
static const opdef op_conv_update3 = {"causal_conv1d_update", " (x with T)", call_cu, ACT(CU), -1,
                                      conv_update3_t, N_OF(conv_update3_t), NULL};
static const opdef op_conv_update2 = {"causal_conv1d_update", " (x without T)", call_cu, ACT(CU),
                                      -1, conv_update2_t, N_OF(conv_update2_t), NULL};
static const opdef op_scan_fwd_var = {"selective_scan_fwd", " (variable B, C)", call_sf, -1,
                                      (long)SF(delta_softplus), scan_fwd_var_t,
                                      N_OF(scan_fwd_var_t), NULL};
static const opdef op_scan_fwd_const = {"selective_scan_fwd", " (constant B, C)", call_sf, -1,
                                        (long)SF(delta_softplus), scan_fwd_const_t,
                                        N_OF(scan_fwd_const_t), NULL};
static const opdef op_scan_bwd_var = {"selective_scan_bwd", " (variable B, C)", call_sb, -1,
                                      (long)SB(delta_softplus), scan_bwd_var_t,
                                      N_OF(scan_bwd_var_t), NULL};
static const opdef op_scan_bwd_const = {"selective_scan_bwd", " (constant B, C)", call_sb, -1,
                                        (long)SB(delta_softplus), scan_bwd_const_t,
                                        N_OF(scan_bwd_const_t), NULL};
static const opdef op_update_m1 = {"selective_state_update", " (Mamba-1)", call_su, -1,
                                   (long)SU(dt_softplus), update_m1_t, N_OF(update_m1_t), NULL};
static const opdef op_update_heads = {"selective_state_update", " (heads)", call_su, -1,
                                      (long)SU(dt_softplus), update_heads_t,
                                      N_OF(update_heads_t), NULL};
static const opdef op_ssd_fwd = {"ssd_chunk_scan_fwd", "", call_df, -1, (long)DF(dt_softplus),
                                 ssd_fwd_t, N_OF(ssd_fwd_t), NULL};
static const opdef op_ssd_bwd = {"ssd_chunk_scan_bwd", "", call_db, -1, (long)DB(dt_softplus),
                                 ssd_bwd_t, N_OF(ssd_bwd_t), NULL};
static const opdef op_norm_fwd = {"norm_fwd", "", call_nf, -1, (long)NF(norm_before_gate),
                                  norm_fwd_t, N_OF(norm_fwd_t), norm_fwd_prep};
static const opdef op_norm_bwd = {"norm_bwd", "", call_nb, -1, (long)NB(norm_before_gate),
                                  norm_bwd_t, N_OF(norm_bwd_t), norm_bwd_prep};

/* Every op and form above. */
static const opdef *const all_ops[] = {
    &op_conv_fwd,     &op_conv_bwd,       &op_conv_update3, &op_conv_update2,
    &op_scan_fwd_var, &op_scan_fwd_const, &op_scan_bwd_var, &op_scan_bwd_const,
    &op_update_m1,    &op_update_heads,   &op_ssd_fwd,      &op_ssd_bwd,
    &op_norm_fwd,     &op_norm_bwd,
};

/* ---------------------------------------------------------------- fixtures */

/* A change to the default fixture: drop a tensor, give it another dtype or other strides. */
typedef struct override {
    const char *name;
    int drop;
    int dtype; /* -1: the class default */
    const int64_t *stride;
} override;

typedef struct fixture {
    const opdef *op;
    any_args args;
    th_tensor *t[MAX_T]; /* NULL for a dropped tensor */
} fixture;

/* A call to try: the fixture's args with some views changed. */
typedef struct trial {
    fixture *f;
    any_args args;
    char what[160];
} trial;

static portssm_dtype class_dtype(char dt)
{
    switch (dt) {
    case 'a': return PORTSSM_F16;
    case 'i': return PORTSSM_I32;
    case 'd': return PORTSSM_BF16; /* not the activations' f16: the state's dtype is its own */
    default: return PORTSSM_F32; /* f, p, q */
    }
}

static int find_arg(const opdef *op, const char *name)
{
    for (int i = 0; i < op->n; i++)
        if (strcmp(op->t[i].name, name) == 0)
            return i;
    fail_msg("%s has no argument '%s'", op->op, name);
    return -1;
}

static portssm_tensor *view_in(any_args *a, const targ *t)
{
    return (portssm_tensor *)((char *)a + t->off);
}

static void build(fixture *f, const opdef *op, const override *ov, int nov)
{
    memset(f, 0, sizeof *f);
    f->op = op;
    th_rng r = th_rng_for(0x5eed ^ (uint64_t)(uintptr_t)op->t);
    for (int i = 0; i < op->n; i++) {
        const targ *t = &op->t[i];
        const override *o = NULL;
        for (int k = 0; k < nov; k++)
            if (strcmp(ov[k].name, t->name) == 0)
                o = &ov[k];
        if (o && o->drop)
            continue;
        int nd = (int)strlen(t->dims);
        int64_t shape[4];
        for (int d = 0; d < nd; d++)
            shape[d] = sym_size(t->dims[d]);
        portssm_dtype dt = o && o->dtype >= 0 ? (portssm_dtype)o->dtype : class_dtype(t->dt);
        th_tensor *x = th_new(th_ctx, dt, nd, shape, o ? o->stride : NULL);
        if (t->role == 'o')
            th_poison(x);
        else if (dt == PORTSSM_I32)
            th_fill_int(x, &r, 0, 1);
        else
            th_fill_uniform(x, &r, t->name[0] == 'A' ? -1.0 : -0.5, t->name[0] == 'A' ? -0.1 : 1.0);
        f->t[i] = x;
        *view_in(&f->args, t) = th_view(x);
    }
    if (op->act_off >= 0)
        *(portssm_activation *)((char *)&f->args + op->act_off) = PORTSSM_ACTIVATION_SILU;
    if (op->flag_off >= 0)
        *(int32_t *)((char *)&f->args + op->flag_off) = 1;
    if (op->prep)
        op->prep(&f->args);
}

static trial begin(fixture *f, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static trial begin(fixture *f, const char *fmt, ...)
{
    trial t;
    t.f = f;
    t.args = f->args;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(t.what, sizeof t.what, fmt, ap);
    va_end(ap);
    return t;
}

static portssm_tensor *tv(trial *t, const char *name)
{
    return view_in(&t->args, &t->f->op->t[find_arg(t->f->op, name)]);
}

/* Runs the trial; it must be rejected naming `needle`, with every buffer unchanged. */
static void expect_invalid(trial *t, const char *needle)
{
    fixture *f = t->f;
    th_snapshot snaps[MAX_T];
    for (int i = 0; i < f->op->n; i++)
        if (f->t[i])
            snaps[i] = th_snap(f->t[i]);
    portssm_status s = f->op->call(th_ctx, &t->args);
    char msg[1024];
    snprintf(msg, sizeof msg, "%s", portssm_last_error(th_ctx));
    const char *written = NULL;
    for (int i = 0; i < f->op->n; i++)
        if (f->t[i] && !th_unchanged(f->t[i], &snaps[i]) && !written)
            written = f->op->t[i].name;
    if (s != PORTSSM_ERR_INVALID_ARGUMENT)
        fail_msg("%s%s: %s: expected PORTSSM_ERR_INVALID_ARGUMENT, got %s (\"%s\")", f->op->op,
                 f->op->form, t->what, portssm_status_name(s), msg);
    if (strncmp(msg, f->op->op, strlen(f->op->op)) != 0)
        fail_msg("%s%s: %s: the message does not start with the op: \"%s\"", f->op->op,
                 f->op->form, t->what, msg);
    if (!strstr(msg, needle))
        fail_msg("%s%s: %s: the message does not name %s: \"%s\"", f->op->op, f->op->form,
                 t->what, needle, msg);
    if (written)
        fail_msg("%s%s: %s: rejected, but '%s' was written", f->op->op, f->op->form, t->what,
                 written);
}

/* Runs the trial; it must pass validation (the backend may still lack the op or the case). */
static void expect_accepted(trial *t)
{
    portssm_status s = t->f->op->call(th_ctx, &t->args);
    if (s != PORTSSM_OK && s != PORTSSM_ERR_UNSUPPORTED)
        fail_msg("%s%s: %s: expected acceptance, got %s: %s", t->f->op->op, t->f->op->form,
                 t->what, portssm_status_name(s), portssm_last_error(th_ctx));
    if (s == PORTSSM_ERR_UNSUPPORTED)
        print_message("  (%s%s: %s: %s)\n", t->f->op->op, t->f->op->form, t->what,
                      portssm_last_error(th_ctx));
}

static void quoted(char *buf, size_t size, const char *name)
{
    snprintf(buf, size, "'%s'", name);
}

/* ---------------------------------------------------------------- the generated matrix */

static int ndim_valid(const targ *t, int nd)
{
    if (nd == (int)strlen(t->dims))
        return 1;
    return t->ndims && nd >= 1 && nd <= 9 && strchr(t->ndims, '0' + nd) != NULL;
}

/* Two dtypes per class that break its rule (the activation dtype of fixtures is f16). */
static void wrong_dtypes(char dt, portssm_dtype out[2])
{
    switch (dt) {
    case 'a': out[0] = PORTSSM_BF16, out[1] = PORTSSM_I32; break;
    case 'f': out[0] = PORTSSM_F16, out[1] = PORTSSM_I32; break;
    case 'i': out[0] = PORTSSM_F32, out[1] = PORTSSM_F16; break;
    case 'p': out[0] = PORTSSM_BF16, out[1] = PORTSSM_I32; break;
    case 'd': out[0] = PORTSSM_I32, out[1] = (portssm_dtype)-1; break; /* every float is valid */
    default: out[0] = PORTSSM_F16, out[1] = PORTSSM_BF16; break; /* q: weight is f32 */
    }
}

static int cases_run;

static void matrix_for(fixture *f, int i)
{
    const targ *a = &f->op->t[i];
    char needle[64];
    quoted(needle, sizeof needle, a->name);
    int nd = (int)strlen(a->dims);
    trial t;

    if (a->required) {
        t = begin(f, "'%s' absent", a->name);
        tv(&t, a->name)->data = NULL;
        expect_invalid(&t, needle), cases_run++;
    }
    const int bad_ndims[] = {0, nd - 1, nd + 1, 5, -1};
    for (int k = 0; k < 5; k++) {
        if (ndim_valid(a, bad_ndims[k]))
            continue;
        t = begin(f, "'%s' ndim %d", a->name, bad_ndims[k]);
        tv(&t, a->name)->ndim = bad_ndims[k];
        expect_invalid(&t, needle), cases_run++;
    }
    for (int d = 0; d < nd; d++) {
        const int64_t base = sym_size(a->dims[d]);
        const int64_t bad[] = {base - 1, 0, -1, INT64_MIN};
        for (int k = 0; k < 4; k++) {
            if (k == 0 && sym_free(a->dims[d]))
                continue; /* any size is valid there */
            t = begin(f, "'%s' shape[%d] = %lld", a->name, d, (long long)bad[k]);
            tv(&t, a->name)->shape[d] = bad[k];
            expect_invalid(&t, needle), cases_run++;
        }
    }
    portssm_dtype wrong[2];
    wrong_dtypes(a->dt, wrong);
    for (int k = 0; k < 3; k++) {
        portssm_dtype d = k < 2 ? wrong[k] : (portssm_dtype)9;
        t = begin(f, "'%s' dtype %d", a->name, (int)d);
        tv(&t, a->name)->dtype = d;
        expect_invalid(&t, needle), cases_run++;
    }
    t = begin(f, "'%s' misaligned", a->name);
    tv(&t, a->name)->data = (char *)tv(&t, a->name)->data + 1;
    expect_invalid(&t, needle), cases_run++;
    const int64_t huge[] = {INT64_MAX, -INT64_MAX, INT64_C(1) << 62, INT64_MIN};
    for (int k = 0; k < 4; k++)
        for (int d = 0; d < nd; d += nd - 1 > 0 ? nd - 1 : 1) {
            t = begin(f, "'%s' stride[%d] = %lld", a->name, d, (long long)huge[k]);
            tv(&t, a->name)->stride[d] = huge[k];
            expect_invalid(&t, needle), cases_run++;
        }

    if (a->role == 'i')
        return;
    /* written tensors: no element twice, nothing shared with any other tensor of the call */
    t = begin(f, "'%s' stride[%d] = 0", a->name, nd - 1);
    tv(&t, a->name)->stride[nd - 1] = 0;
    expect_invalid(&t, needle), cases_run++;
    if (nd >= 2) {
        t = begin(f, "'%s' strides %d and %d equal", a->name, nd - 2, nd - 1);
        portssm_tensor *v = tv(&t, a->name);
        v->stride[nd - 2] = v->stride[nd - 1];
        expect_invalid(&t, needle), cases_run++;
    }
    for (int j = 0; j < f->op->n; j++) {
        if (j == i || !f->t[j])
            continue;
        const char *other = f->op->t[j].name;
        t = begin(f, "'%s' aliases '%s'", a->name, other);
        tv(&t, a->name)->data = tv(&t, other)->data;
        expect_invalid(&t, needle), cases_run++;
        /* and shifted by one element into the other: still overlapping */
        t = begin(f, "'%s' one element into '%s'", a->name, other);
        tv(&t, a->name)->data =
            (char *)tv(&t, other)->data + portssm_dtype_size(tv(&t, a->name)->dtype);
        expect_invalid(&t, needle), cases_run++;
    }
}

static void run_matrix(const opdef *op)
{
    fixture f;
    build(&f, op, NULL, 0);
    trial t = begin(&f, "every argument valid");
    expect_accepted(&t); /* or every case below would be vacuous */
    cases_run = 0;
    for (int i = 0; i < op->n; i++)
        matrix_for(&f, i);

    /* the whole call */
    t = begin(&f, "args NULL");
    portssm_status s = op->call(th_ctx, NULL);
    assert_int_equal(s, PORTSSM_ERR_INVALID_ARGUMENT);
    if (!strstr(portssm_last_error(th_ctx), "'args'"))
        fail_msg("%s: NULL args: \"%s\"", op->op, portssm_last_error(th_ctx));
    t = begin(&f, "zero-initialised args");
    memset(&t.args, 0, sizeof t.args);
    expect_invalid(&t, "'"), cases_run++;
    if (op->act_off >= 0) {
        const int bad[] = {2, -1, 1000};
        for (int k = 0; k < 3; k++) {
            t = begin(&f, "activation %d", bad[k]);
            *(int *)((char *)&t.args + op->act_off) = bad[k];
            expect_invalid(&t, "'activation'"), cases_run++;
        }
    }
    print_message("%s%s: %d invalid cases rejected\n", op->op, op->form, cases_run);
    th_free_all();
}

static void test_matrix_conv1d_fwd(void **state) { run_matrix(&op_conv_fwd); }
static void test_matrix_conv1d_bwd(void **state) { run_matrix(&op_conv_bwd); }
static void test_matrix_conv1d_update(void **state)
{
    run_matrix(&op_conv_update3);
    run_matrix(&op_conv_update2);
}
static void test_matrix_scan_fwd(void **state)
{
    run_matrix(&op_scan_fwd_var);
    run_matrix(&op_scan_fwd_const);
}
static void test_matrix_scan_bwd(void **state)
{
    run_matrix(&op_scan_bwd_var);
    run_matrix(&op_scan_bwd_const);
}
static void test_matrix_state_update(void **state)
{
    run_matrix(&op_update_m1);
    run_matrix(&op_update_heads);
}
static void test_matrix_ssd(void **state)
{
    run_matrix(&op_ssd_fwd);
    run_matrix(&op_ssd_bwd);
}
static void test_matrix_norm(void **state)
{
    run_matrix(&op_norm_fwd);
    run_matrix(&op_norm_bwd);
}

/* ---------------------------------------------------------------- rules between arguments */

static void drop(trial *t, const char *name) { tv(t, name)->data = NULL; }

/* Shrinks symbol `sym` to `value` on every view that has it (the buffers stay larger). */
static void resize_sym(trial *t, char sym, int64_t value)
{
    const opdef *op = t->f->op;
    for (int i = 0; i < op->n; i++)
        for (int d = 0; t->f->t[i] && op->t[i].dims[d]; d++)
            if (op->t[i].dims[d] == sym)
                view_in(&t->args, &op->t[i])->shape[d] = value;
}

static void test_rules_conv1d(void **state)
{
    fixture f;
    trial t;
    /* states hold W-1 columns: W = 1 with any of them is invalid (shrinking the view is safe) */
    const char *fwd_states[] = {"initial_states", "final_states"};
    for (int k = 0; k < 2; k++) {
        build(&f, &op_conv_fwd, NULL, 0);
        t = begin(&f, "W = 1 with '%s'", fwd_states[k]);
        tv(&t, "weight")->shape[1] = 1;
        drop(&t, fwd_states[1 - k]);
        tv(&t, fwd_states[k])->shape[2] = 0; /* W-1; also rejected as a shape < 1 */
        char needle[64];
        quoted(needle, sizeof needle, fwd_states[k]);
        expect_invalid(&t, needle);
        tv(&t, fwd_states[k])->shape[2] = 3;
        expect_invalid(&t, needle);
    }
    build(&f, &op_conv_fwd, NULL, 0);
    t = begin(&f, "W = 1 without states");
    tv(&t, "weight")->shape[1] = 1;
    drop(&t, "initial_states");
    drop(&t, "final_states");
    expect_accepted(&t);

    const char *bwd_states[] = {"initial_states", "dfinal_states", "dinitial_states"};
    for (int k = 0; k < 3; k++) {
        build(&f, &op_conv_bwd, NULL, 0);
        t = begin(&f, "W = 1 with '%s'", bwd_states[k]);
        tv(&t, "weight")->shape[1] = 1;
        for (int j = 0; j < 3; j++)
            if (j != k)
                drop(&t, bwd_states[j]);
        char needle[64];
        quoted(needle, sizeof needle, bwd_states[k]);
        expect_invalid(&t, needle);
    }
    build(&f, &op_conv_bwd, NULL, 0);
    t = begin(&f, "dbias without bias");
    drop(&t, "bias");
    expect_invalid(&t, "'dbias'");
    t = begin(&f, "dinitial_states without initial_states");
    drop(&t, "initial_states");
    expect_accepted(&t);
    th_free_all();
}

static void test_rules_conv1d_update(void **state)
{
    fixture f;
    build(&f, &op_conv_update3, NULL, 0);
    trial t = begin(&f, "S < W-1");
    tv(&t, "conv_state")->shape[2] = 2; /* W = 4 */
    expect_invalid(&t, "'conv_state'");
    t = begin(&f, "S = W-1");
    tv(&t, "conv_state")->shape[2] = 3;
    expect_accepted(&t);
    t = begin(&f, "no indices: state rows must be B");
    drop(&t, "conv_state_indices"); /* conv_state has B' = 3 rows, B = 2 */
    expect_invalid(&t, "'conv_state'");
    t = begin(&f, "no indices, B rows");
    drop(&t, "conv_state_indices");
    tv(&t, "conv_state")->shape[0] = 2;
    expect_accepted(&t);
    t = begin(&f, "x with T, out without");
    portssm_tensor *o = tv(&t, "out");
    o->ndim = 2;
    expect_invalid(&t, "'out'");
    t = begin(&f, "W = 1 (S >= 0 always)");
    tv(&t, "weight")->shape[1] = 1;
    expect_accepted(&t);
    th_free_all();
}

/* A (D,N) f32 view on the buffer of a variable B/C (which is larger). */
static void as_constant_bc(portssm_tensor *v)
{
    v->ndim = 2;
    v->dtype = PORTSSM_F32;
    v->shape[0] = sym_size('D'), v->shape[1] = sym_size('N');
    v->stride[0] = sym_size('N'), v->stride[1] = 1;
}

static void test_rules_scan(void **state)
{
    fixture f;
    trial t;
    const opdef *ops[] = {&op_scan_fwd_var, &op_scan_bwd_var};
    /* G = 2 must divide D: shrink D to 3 on every view that has it */
    for (int k = 0; k < 2; k++) {
        build(&f, ops[k], NULL, 0);
        t = begin(&f, "G = 2 does not divide D = 3");
        resize_sym(&t, 'D', 3);
        expect_invalid(&t, "'B'");
        th_free_all();
    }
    build(&f, &op_scan_bwd_var, NULL, 0);
    const char *pairs[][2] = {{"dD", "D"}, {"dz", "z"}, {"ddelta_bias", "delta_bias"}};
    for (int k = 0; k < 3; k++) {
        t = begin(&f, "'%s' without '%s'", pairs[k][0], pairs[k][1]);
        drop(&t, pairs[k][1]);
        char needle[64];
        quoted(needle, sizeof needle, pairs[k][0]);
        expect_invalid(&t, needle);
    }
    t = begin(&f, "dinitial_state without initial_state");
    drop(&t, "initial_state");
    expect_accepted(&t);
    t = begin(&f, "B variable, C and dC constant");
    as_constant_bc(tv(&t, "C"));
    as_constant_bc(tv(&t, "dC"));
    expect_accepted(&t);
    t = begin(&f, "dB constant while B is variable");
    as_constant_bc(tv(&t, "dB"));
    expect_invalid(&t, "'dB'");
    th_free_all();
}

static void test_rules_state_update(void **state)
{
    fixture f;
    build(&f, &op_update_heads, NULL, 0);
    trial t = begin(&f, "G = 2 does not divide H = 1");
    resize_sym(&t, 'H', 1);
    expect_invalid(&t, "'B'");
    t = begin(&f, "no indices: state rows must be B");
    drop(&t, "state_batch_indices");
    expect_invalid(&t, "'state'");
    t = begin(&f, "heads state, Mamba-1 x");
    portssm_tensor *x = tv(&t, "x");
    x->ndim = 2;
    expect_invalid(&t, "'x'");
    th_free_all();

    build(&f, &op_update_m1, NULL, 0);
    t = begin(&f, "state with 2 dims");
    tv(&t, "state")->ndim = 2;
    expect_invalid(&t, "'state'");
    t = begin(&f, "no indices, B rows");
    drop(&t, "state_batch_indices");
    tv(&t, "state")->shape[0] = 2;
    expect_accepted(&t);
    th_free_all();

    /* the state's dtype: f32, f16 or bf16 whatever the activations' (f16 here); nothing else */
    const portssm_dtype ok[] = {PORTSSM_F32, PORTSSM_F16, PORTSSM_BF16};
    const opdef *forms[] = {&op_update_m1, &op_update_heads};
    for (int k = 0; k < 2; k++)
        for (int i = 0; i < 3; i++) {
            const override ov[] = {{"state", 0, (int)ok[i], NULL}};
            build(&f, forms[k], ov, 1);
            t = begin(&f, "%s state with f16 activations", portssm_dtype_name(ok[i]));
            expect_accepted(&t);
            t = begin(&f, "i32 state");
            tv(&t, "state")->dtype = PORTSSM_I32;
            expect_invalid(&t, "'state' dtype must be f32, f16 or bf16, got i32");
            th_free_all();
        }
}

static void accept_with(const opdef *op, const char *what, const override *ov, int nov);

/* The norms' scalar options and the pairs between their arguments. */
static void test_rules_norm(void **state)
{
    fixture f;
    trial t;
    const opdef *ops[] = {&op_norm_fwd, &op_norm_bwd};
    for (int k = 0; k < 2; k++) {
        const int fwd = k == 0;
        build(&f, ops[k], NULL, 0);
        const int kinds[] = {2, -1, 1000};
        for (int j = 0; j < 3; j++) {
            t = begin(&f, "kind %d", kinds[j]);
            if (fwd)
                t.args.nf.kind = (portssm_norm_kind)kinds[j];
            else
                t.args.nb.kind = (portssm_norm_kind)kinds[j];
            expect_invalid(&t, "'kind'");
        }
        const int64_t groups[] = {-1, 3, 5, 8, INT64_MIN, INT64_MAX}; /* H = 4 */
        for (int j = 0; j < 6; j++) {
            t = begin(&f, "group_size %lld", (long long)groups[j]);
            if (fwd)
                t.args.nf.group_size = groups[j];
            else
                t.args.nb.group_size = groups[j];
            expect_invalid(&t, "'group_size'");
        }
        /* group_size 0 and 4 are one group, 1 four: the statistics' shape must follow */
        const int64_t whole[] = {0, 4};
        for (int j = 0; j < 2; j++) {
            t = begin(&f, "group_size %lld with (R,2) statistics", (long long)whole[j]);
            if (fwd)
                t.args.nf.group_size = whole[j];
            else
                t.args.nb.group_size = whole[j];
            expect_invalid(&t, "'mean'");
            tv(&t, "mean")->shape[1] = 1;
            tv(&t, "rstd")->shape[1] = 1;
            expect_accepted(&t);
        }
        /* RMSNorm: no mean */
        t = begin(&f, "RMSNorm with 'mean'");
        if (fwd)
            t.args.nf.kind = PORTSSM_NORM_RMS;
        else
            t.args.nb.kind = PORTSSM_NORM_RMS;
        expect_invalid(&t, "'mean'");
        drop(&t, "mean");
        expect_accepted(&t);
        th_free_all();
    }
    build(&f, &op_norm_fwd, NULL, 0);
    const float bad_eps[] = {-1e-6f, -INFINITY, INFINITY, NAN};
    for (int j = 0; j < 4; j++) {
        t = begin(&f, "eps %g", (double)bad_eps[j]);
        t.args.nf.eps = bad_eps[j];
        expect_invalid(&t, "'eps'");
    }
    t = begin(&f, "eps 0");
    t.args.nf.eps = 0.0f;
    expect_accepted(&t);
    t = begin(&f, "residual_out without residual");
    drop(&t, "residual");
    expect_accepted(&t);
    th_free_all();

    build(&f, &op_norm_bwd, NULL, 0);
    t = begin(&f, "dz without z");
    drop(&t, "z");
    expect_invalid(&t, "'dz'");
    t = begin(&f, "dbias without bias");
    drop(&t, "bias");
    expect_invalid(&t, "'dbias'");
    t = begin(&f, "LayerNorm without mean");
    drop(&t, "mean");
    expect_invalid(&t, "'mean'");
    th_free_all();

    /* the residual path's dtypes: F32 or the activation dtype, independently */
    const override act_res[] = {{"residual", 0, PORTSSM_F16, NULL},
                                {"residual_out", 0, PORTSSM_F16, NULL}};
    accept_with(&op_norm_fwd, "f16 residual and residual_out", act_res, 2);
    const override mixed_res[] = {{"residual", 0, PORTSSM_F16, NULL}};
    accept_with(&op_norm_fwd, "f16 residual, f32 residual_out", mixed_res, 1);
    const override act_x[] = {{"x", 0, PORTSSM_F16, NULL},
                              {"dresidual", 0, PORTSSM_F16, NULL},
                              {"dresidual_out", 0, PORTSSM_F16, NULL}};
    accept_with(&op_norm_bwd, "f16 x, dresidual, dresidual_out", act_x, 3);
}

/* ---------------------------------------------------------------- layouts that must pass */

static void accept_with(const opdef *op, const char *what, const override *ov, int nov)
{
    fixture f;
    build(&f, op, ov, nov);
    trial t = begin(&f, "%s", what);
    expect_accepted(&t);
    th_free_all();
}

/* Every optional tensor absent. */
static void accept_minimal(const opdef *op)
{
    override ov[MAX_T];
    int n = 0;
    for (int i = 0; i < op->n; i++)
        if (!op->t[i].required)
            ov[n++] = (override){op->t[i].name, 1, -1, NULL};
    fixture f;
    build(&f, op, ov, n);
    trial t = begin(&f, "only required tensors");
    resize_sym(&t, 'b', sym_size('B')); /* without indices a state pool has B rows */
    expect_accepted(&t);
    th_free_all();
}

static void test_accept_minimal(void **state)
{
    const opdef *ops[] = {&op_conv_fwd,     &op_conv_bwd,       &op_conv_update3,
                          &op_conv_update2, &op_scan_fwd_var,   &op_scan_fwd_const,
                          &op_scan_bwd_var, &op_scan_bwd_const, &op_update_m1,
                          &op_update_heads, &op_norm_fwd,       &op_norm_bwd};
    for (size_t i = 0; i < sizeof ops / sizeof ops[0]; i++)
        accept_minimal(ops[i]);
}

static void test_accept_layouts(void **state)
{
    /* channel-last x and out: (B,D,L) with stride[1] == 1 */
    static const int64_t cl[3] = {4 * 5, 1, 4};
    const override channel_last[] = {{"x", 0, -1, cl}, {"out", 0, -1, cl}};
    accept_with(&op_conv_fwd, "channel-last x and out", channel_last, 2);
    const override channel_last_bwd[] = {{"x", 0, -1, cl}, {"dout", 0, -1, cl}, {"dx", 0, -1, cl}};
    accept_with(&op_conv_bwd, "channel-last x, dout, dx", channel_last_bwd, 3);

    /* negative strides: time reversed, channels reversed */
    static const int64_t neg[3] = {20, -5, -1};
    const override negative[] = {{"x", 0, -1, neg}, {"out", 0, -1, neg}};
    accept_with(&op_conv_fwd, "negative strides", negative, 2);
    const override negative_scan[] = {{"u", 0, -1, neg}, {"delta", 0, -1, neg},
                                      {"out", 0, -1, neg}};
    accept_with(&op_scan_fwd_var, "negative strides", negative_scan, 3);

    /* padded (non-contiguous) outputs */
    static const int64_t padded[3] = {64, 9, 1};
    const override pad[] = {{"out", 0, -1, padded}, {"x", 0, -1, padded}};
    accept_with(&op_conv_fwd, "padded rows", pad, 2);

    /* weight and bias in the activation dtype */
    const override act_weight[] = {{"weight", 0, PORTSSM_F16, NULL},
                                   {"bias", 0, PORTSSM_F16, NULL}};
    accept_with(&op_conv_fwd, "f16 weight and bias", act_weight, 2);
    const override act_weight_bwd[] = {{"weight", 0, PORTSSM_F16, NULL},
                                       {"bias", 0, PORTSSM_F16, NULL},
                                       {"dweight", 0, PORTSSM_F16, NULL},
                                       {"dbias", 0, PORTSSM_F16, NULL}};
    accept_with(&op_conv_bwd, "f16 weight, bias, dweight, dbias", act_weight_bwd, 4);
    const override act_weight_upd[] = {{"weight", 0, PORTSSM_F16, NULL},
                                       {"bias", 0, PORTSSM_F16, NULL}};
    accept_with(&op_conv_update3, "f16 weight and bias", act_weight_upd, 2);

    /* zero-stride inputs: Mamba-2 ties A and dt over P and N */
    static const int64_t a_tied[3] = {1, 0, 0}, dt_tied[3] = {2, 1, 0}, p_tied[2] = {1, 0};
    const override tied[] = {{"A", 0, -1, a_tied},
                             {"dt", 0, -1, dt_tied},
                             {"dt_bias", 0, -1, p_tied},
                             {"D", 0, -1, p_tied}};
    accept_with(&op_update_heads, "A, dt, dt_bias, D tied with stride 0", tied, 4);
    static const int64_t bcast_dn[2] = {0, 1}, bcast_d[1] = {0};
    const override bcast[] = {{"A", 0, -1, bcast_dn}, {"D", 0, -1, bcast_d}};
    accept_with(&op_scan_fwd_var, "A and D broadcast with stride 0", bcast, 2);
}

static void test_accept_shared_inputs(void **state)
{
    fixture f;
    build(&f, &op_scan_fwd_var, NULL, 0);
    trial t = begin(&f, "u and delta share memory");
    tv(&t, "delta")->data = tv(&t, "u")->data;
    tv(&t, "z")->data = tv(&t, "u")->data;
    expect_accepted(&t);
    th_free_all();
}

/* du and dz as the two halves of one (B, 2D, L) gradient, then interleaved along L. */
static void test_accept_split_gradients(void **state)
{
    fixture f;
    build(&f, &op_scan_bwd_var, NULL, 0);
    const int64_t B = 2, D = 4, L = 5;
    const int64_t halves_shape[3] = {B, 2 * D, L};
    th_tensor *dxz = th_new(th_ctx, PORTSSM_F16, 3, halves_shape, NULL);
    th_poison(dxz);
    trial t = begin(&f, "du, dz halves of one (B,2D,L) buffer");
    portssm_tensor whole = th_view(dxz);
    portssm_tensor *du = tv(&t, "du"), *dz = tv(&t, "dz");
    *du = whole, *dz = whole;
    du->shape[1] = D, dz->shape[1] = D;
    dz->data = (char *)whole.data + (size_t)(D * L) * 2;
    expect_accepted(&t);

    /* the same halves, but overlapping by one channel, must fail */
    t = begin(&f, "du, dz overlapping by one channel");
    du = tv(&t, "du"), dz = tv(&t, "dz");
    *du = whole, *dz = whole;
    du->shape[1] = D, dz->shape[1] = D;
    dz->data = (char *)whole.data + (size_t)((D - 1) * L) * 2;
    expect_invalid(&t, "'du'");

    const int64_t inter_shape[4] = {B, D, L, 2};
    th_tensor *il = th_new(th_ctx, PORTSSM_F16, 4, inter_shape, NULL);
    th_poison(il);
    t = begin(&f, "du, dz interleaved along L");
    portssm_tensor v = th_view(il);
    du = tv(&t, "du"), dz = tv(&t, "dz");
    du->data = v.data, dz->data = (char *)v.data + 2;
    for (int i = 0; i < 3; i++) {
        du->shape[i] = dz->shape[i] = v.shape[i];
        du->stride[i] = dz->stride[i] = v.stride[i];
    }
    expect_accepted(&t);
    t = begin(&f, "du, dz interleaved but shifted by a whole step");
    du = tv(&t, "du"), dz = tv(&t, "dz");
    du->data = v.data, dz->data = (char *)v.data + 4;
    for (int i = 0; i < 3; i++) {
        du->shape[i] = dz->shape[i] = v.shape[i];
        du->stride[i] = dz->stride[i] = v.stride[i];
    }
    expect_invalid(&t, "'du'");
    th_free_all();
}

static void test_tensor_contiguous_rejected(void **state)
{
    fixture f;
    build(&f, &op_conv_fwd, NULL, 0);
    const int64_t shape[3] = {2, 4, 5};
    trial t = begin(&f, "portssm_tensor_contiguous with ndim 0");
    *tv(&t, "out") = portssm_tensor_contiguous(tv(&t, "out")->data, PORTSSM_F16, 0, shape);
    expect_invalid(&t, "'out'");
    t = begin(&f, "portssm_tensor_contiguous with ndim 5");
    *tv(&t, "out") = portssm_tensor_contiguous(tv(&t, "out")->data, PORTSSM_F16, 5, shape);
    expect_invalid(&t, "'out'");
    t = begin(&f, "portssm_tensor_contiguous out");
    *tv(&t, "out") = portssm_tensor_contiguous(tv(&t, "out")->data, PORTSSM_F16, 3, shape);
    expect_accepted(&t);
    th_free_all();
}

/* ---------------------------------------------------------------- negative and zero extents */

/* A negative extent next to a zero one (numel 0 either way) on every tensor of every op,
 * required and optional: refused like any extent < 1, naming the tensor, nothing written. */
static void test_negative_next_to_zero(void **state)
{
    const int64_t neg[] = {-1, INT64_MIN};
    for (size_t o = 0; o < sizeof all_ops / sizeof all_ops[0]; o++) {
        const opdef *op = all_ops[o];
        fixture f;
        build(&f, op, NULL, 0);
        trial t = begin(&f, "every argument valid");
        expect_accepted(&t);
        for (int i = 0; i < op->n; i++) {
            const targ *a = &op->t[i];
            char needle[64];
            quoted(needle, sizeof needle, a->name);
            const int nd = (int)strlen(a->dims);
            for (int k = 0; k < 2; k++) {
                for (int d = 0; d + 1 < nd; d++) {
                    t = begin(&f, "'%s' shape[%d] = %lld, shape[%d] = 0", a->name, d,
                              (long long)neg[k], d + 1);
                    tv(&t, a->name)->shape[d] = neg[k];
                    tv(&t, a->name)->shape[d + 1] = 0;
                    expect_invalid(&t, needle);
                    t = begin(&f, "'%s' shape[%d] = 0, shape[%d] = %lld", a->name, d, d + 1,
                              (long long)neg[k]);
                    tv(&t, a->name)->shape[d] = 0;
                    tv(&t, a->name)->shape[d + 1] = neg[k];
                    expect_invalid(&t, needle);
                }
                if (nd > 2) { /* the first and the last dim */
                    t = begin(&f, "'%s' shape[0] = 0, shape[%d] = %lld", a->name, nd - 1,
                              (long long)neg[k]);
                    tv(&t, a->name)->shape[0] = 0;
                    tv(&t, a->name)->shape[nd - 1] = neg[k];
                    expect_invalid(&t, needle);
                }
                if (nd < PORTSSM_MAX_DIMS) { /* a zero past ndim must not make numel 0 */
                    t = begin(&f, "'%s' shape[%d] = %lld, shape[%d] = 0 (past ndim)", a->name,
                              nd - 1, (long long)neg[k], nd);
                    tv(&t, a->name)->shape[nd - 1] = neg[k];
                    tv(&t, a->name)->shape[nd] = 0;
                    expect_invalid(&t, needle);
                }
            }
        }
        th_free_all();
    }
}

/* ---------------------------------------------------------------- optional tensors alone */

/* The index of the optional gradient d<name> of input `name`, or -1. */
static int grad_of(const opdef *op, const char *name)
{
    char g[64];
    snprintf(g, sizeof g, "d%s", name);
    for (int i = 0; i < op->n; i++)
        if (op->t[i].role == 'o' && strcmp(op->t[i].name, g) == 0)
            return i;
    return -1;
}

/* Each optional tensor present alone (every other optional tensor absent, its gradient
 * included; a gradient keeps its input), then bent: wrong ndim, negative or zero extents, an
 * extent that disagrees with the op.  Every case is refused naming the optional tensor. */
static void optional_alone(const opdef *op, int i)
{
    const targ *a = &op->t[i];
    /* an optional gradient d<x> needs its input <x>, the SSD's y needs z */
    const char *need = strcmp(a->name, "y") == 0                 ? "z"
                       : a->role == 'o' && a->name[0] == 'd' ? a->name + 1
                                                              : NULL;
    int keep = -1;
    for (int j = 0; need && j < op->n; j++)
        if (j != i && !op->t[j].required && strcmp(op->t[j].name, need) == 0)
            keep = j;
    override ov[MAX_T];
    int n = 0;
    for (int j = 0; j < op->n; j++)
        if (j != i && j != keep && !op->t[j].required)
            ov[n++] = (override){op->t[j].name, 1, -1, NULL};
    fixture f;
    build(&f, op, ov, n);
    trial t = begin(&f, "only required tensors and '%s'", a->name);
    resize_sym(&t, 'b', sym_size('B')); /* without indices a state pool has B rows */
    const any_args base = t.args;
    expect_accepted(&t);
    if (grad_of(op, a->name) >= 0 && f.t[grad_of(op, a->name)])
        fail_msg("%s: '%s' alone, but its gradient is present", op->op, a->name);

    char needle[64];
    quoted(needle, sizeof needle, a->name);
    const int nd = (int)strlen(a->dims);
#define BENT(...)                                                                               \
    (t = begin(&f, __VA_ARGS__), t.args = base, tv(&t, a->name))
    /* the reported case: ndim 2, shape (-1, 0) */
    if (!ndim_valid(a, 2)) {
        portssm_tensor *v = BENT("'%s' alone, ndim 2, shape (-1, 0)", a->name);
        v->ndim = 2, v->shape[0] = -1, v->shape[1] = 0;
        expect_invalid(&t, needle);
    }
    const int bad_ndims[] = {0, nd - 1, nd + 1, 5, -1};
    for (int k = 0; k < 5; k++) {
        if (ndim_valid(a, bad_ndims[k]))
            continue;
        BENT("'%s' alone, ndim %d", a->name, bad_ndims[k])->ndim = bad_ndims[k];
        expect_invalid(&t, needle);
    }
    for (int d = 0; d < nd; d++) {
        const int64_t bad[] = {-1, 0, INT64_MIN, sym_size(a->dims[d]) + 1};
        for (int k = 0; k < 4; k++) {
            if (k == 3 && sym_free(a->dims[d]))
                continue;
            BENT("'%s' alone, shape[%d] = %lld", a->name, d, (long long)bad[k])->shape[d] =
                bad[k];
            expect_invalid(&t, needle);
        }
        if (d + 1 < nd) {
            portssm_tensor *v =
                BENT("'%s' alone, shape[%d] = -1, shape[%d] = 0", a->name, d, d + 1);
            v->shape[d] = -1, v->shape[d + 1] = 0;
            expect_invalid(&t, needle);
        }
    }
#undef BENT
    th_free_all();
}

static void test_optional_alone(void **state)
{
    for (size_t o = 0; o < sizeof all_ops / sizeof all_ops[0]; o++)
        for (int i = 0; i < all_ops[o]->n; i++)
            if (!all_ops[o]->t[i].required)
                optional_alone(all_ops[o], i);
}

/* A report: causal_conv1d_bwd with 'bias' given as ndim 2, shape (-1, 0) and 'dbias' absent
 * returned PORTSSM_OK and the oracle read past the declared extent.  Not reproduced here (the
 * ndim check refuses it, gradient or not); kept as a regression case, with the constructors. */
static void test_conv1d_bwd_bias_without_dbias(void **state)
{
    fixture f;
    const override no_dbias[] = {{"dbias", 1, -1, NULL}};
    build(&f, &op_conv_bwd, no_dbias, 1);
    trial t = begin(&f, "bias without dbias");
    expect_accepted(&t);
    t = begin(&f, "bias ndim 2, shape (-1, 0), dbias absent");
    portssm_tensor *b = tv(&t, "bias");
    b->ndim = 2, b->shape[0] = -1, b->shape[1] = 0, b->stride[0] = 1, b->stride[1] = 1;
    expect_invalid(&t, "'bias'");
    /* the same through the constructors */
    const int64_t shape[2] = {-1, 0}, stride[2] = {1, 1};
    t = begin(&f, "bias from portssm_tensor_contiguous(ndim 2, (-1, 0)), dbias absent");
    *tv(&t, "bias") = portssm_tensor_contiguous(tv(&t, "bias")->data, PORTSSM_F32, 2, shape);
    expect_invalid(&t, "'bias'");
    t = begin(&f, "bias from portssm_tensor_strided(ndim 2, (-1, 0)), dbias absent");
    *tv(&t, "bias") = portssm_tensor_strided(tv(&t, "bias")->data, PORTSSM_F32, 2, shape, stride);
    expect_invalid(&t, "'bias'");
    t = begin(&f, "bias ndim 1, shape (-1), dbias absent");
    tv(&t, "bias")->shape[0] = -1;
    expect_invalid(&t, "'bias'");
    th_free_all();
}

/* SSD's packed form: cu_seqlens (n_seq+1) with B = 1, bent like any optional tensor. */
static void test_ssd_cu_seqlens(void **state)
{
    const opdef *ops[] = {&op_ssd_fwd, &op_ssd_bwd};
    for (int o = 0; o < 2; o++) {
        fixture f;
        build(&f, ops[o], NULL, 0);
        const int64_t R = 3;
        th_tensor *cu = th_new(th_ctx, PORTSSM_I32, 1, &R, NULL);
        th_tensor *cu2 = th_new(th_ctx, PORTSSM_I32, 1, (const int64_t[]){R * 2}, NULL);
        const double offsets[3] = {0, 2, (double)sym_size('L')};
        for (int64_t k = 0; k < R; k++)
            th_set(cu, &k, offsets[k]);
        th_upload(cu);
        th_rng r = th_rng_for(0xc05e);
        th_fill_int(cu2, &r, 0, 5);
        th_snapshot s_cu = th_snap(cu), s_cu2 = th_snap(cu2);
        trial base = begin(&f, "packed, B = 1");
        resize_sym(&base, 'B', 1);
        portssm_tensor *c = (portssm_tensor *)((char *)&base.args +
                                               (o ? DB(cu_seqlens) : DF(cu_seqlens)));
        *c = th_view(cu);
        trial t = base;
        expect_accepted(&t);
        struct {
            int ndim;
            int64_t s0, s1;
            const char *what;
        } bent[] = {{2, -1, 0, "ndim 2, shape (-1, 0)"}, {2, 0, -1, "ndim 2, shape (0, -1)"},
                    {1, -1, 0, "shape (-1)"},            {1, 0, 0, "shape (0)"},
                    {1, 1, 0, "shape (1): no sequence"}, {0, 3, 0, "ndim 0"},
                    {2, 3, 1, "ndim 2, shape (3, 1)"}};
        for (size_t k = 0; k < sizeof bent / sizeof bent[0]; k++) {
            t = base;
            snprintf(t.what, sizeof t.what, "cu_seqlens %s", bent[k].what);
            c = (portssm_tensor *)((char *)&t.args + (o ? DB(cu_seqlens) : DF(cu_seqlens)));
            *c = th_view(cu2);
            c->ndim = bent[k].ndim, c->shape[0] = bent[k].s0, c->shape[1] = bent[k].s1;
            c->stride[1] = 1;
            expect_invalid(&t, "'cu_seqlens'");
        }
        assert_true(th_unchanged(cu, &s_cu));
        assert_true(th_unchanged(cu2, &s_cu2));
        th_free_all();
    }
}

/* ---------------------------------------------------------------- work: broadcast shapes */

/* The workspace query of an op that has one: its status, *bytes as left. */
static int query_workspace(const opdef *op, const any_args *a, size_t *bytes, portssm_status *s)
{
    if (op == &op_conv_bwd)
        *s = portssm_causal_conv1d_bwd_workspace_size(th_ctx, &a->cb, bytes);
    else if (op == &op_scan_bwd_var || op == &op_scan_bwd_const)
        *s = portssm_selective_scan_bwd_workspace_size(th_ctx, &a->sb, bytes);
    else if (op == &op_ssd_fwd)
        *s = portssm_ssd_chunk_scan_fwd_workspace_size(th_ctx, &a->df, bytes);
    else if (op == &op_ssd_bwd)
        *s = portssm_ssd_chunk_scan_bwd_workspace_size(th_ctx, &a->db, bytes);
    else if (op == &op_norm_bwd)
        *s = portssm_norm_bwd_workspace_size(th_ctx, &a->nb, bytes);
    else
        return 0;
    return 1;
}

/*
 * Symbol `sym` made `value` through broadcast inputs alone: every input with that dim gets it,
 * with all strides 0 (one element of memory); an optional output with it is dropped.  Returns 0
 * when a required output (or in/out tensor) has the dim: then the size costs real memory and
 * cannot be reached this way.
 */
static int broadcast_symbol(trial *t, char sym, int64_t value)
{
    const opdef *op = t->f->op;
    for (int i = 0; i < op->n; i++) {
        const targ *a = &op->t[i];
        const char *at = strchr(a->dims, sym), *atw = sym == 'W' ? strchr(a->dims, 'w') : NULL;
        if ((!at && !atw) || !t->f->t[i])
            continue;
        if (a->role != 'i' && a->required)
            return 0;
    }
    for (int i = 0; i < op->n; i++) {
        const targ *a = &op->t[i];
        portssm_tensor *v = view_in(&t->args, a);
        if (!t->f->t[i])
            continue;
        int touched = 0;
        for (int d = 0; a->dims[d]; d++) {
            if (a->dims[d] == sym)
                v->shape[d] = value, touched = 1;
            else if (sym == 'W' && a->dims[d] == 'w')
                v->shape[d] = value - 1, touched = 1;
        }
        if (!touched)
            continue;
        if (a->role != 'i')
            v->data = NULL; /* an optional output: dropped */
        else
            memset(v->stride, 0, sizeof v->stride);
    }
    return 1;
}

/* Does some tensor of the trial have more elements than int64 holds? */
static int some_count_overflows(trial *t)
{
    for (int i = 0; i < t->f->op->n; i++) {
        const portssm_tensor *v = view_in(&t->args, &t->f->op->t[i]);
        int64_t n = 1;
        for (int d = 0; v->data && d < v->ndim; d++) {
            if (n > INT64_MAX / v->shape[d])
                return 1;
            n *= v->shape[d];
        }
    }
    return 0;
}

/* Issue #46 (F2): a broadcast input of one element may have any size.  For every op and every
 * dim that only inputs and optional outputs have (G excepted: it must divide H or D), a size
 * whose work is past 2^48 (2^46), whose products wrap int64 to 0 (2^62) or to a small number
 * (2^62 + 1), is refused by validation with the work named, by the op and by its workspace
 * query, with nothing written and the query's *bytes untouched. */
static void test_broadcast_work_refused(void **state)
{
    const int64_t values[] = {(int64_t)1 << 46, (int64_t)1 << 62, ((int64_t)1 << 62) + 1};
    const char syms[] = "BDLWNHPTrh";
    for (size_t o = 0; o < sizeof all_ops / sizeof all_ops[0]; o++) {
        const opdef *op = all_ops[o];
        int reached = 0;
        for (const char *sym = syms; *sym; sym++)
            for (size_t k = 0; k < sizeof values / sizeof values[0]; k++) {
                fixture f;
                build(&f, op, NULL, 0);
                trial t = begin(&f, "%c = %lld through broadcast inputs", *sym,
                                (long long)values[k]);
                int present = 0;
                for (int i = 0; i < op->n; i++)
                    present |= strchr(op->t[i].dims, *sym) != NULL;
                if (present && broadcast_symbol(&t, *sym, values[k])) {
                    reached = 1;
                    /* a tensor whose own element count wraps is refused first, by its name */
                    expect_invalid(&t, some_count_overflows(&t) ? "cannot be addressed"
                                                                : "the call's work");
                    size_t bytes = 12345;
                    portssm_status s;
                    if (query_workspace(op, &t.args, &bytes, &s)) {
                        if (s != PORTSSM_ERR_INVALID_ARGUMENT || bytes != 12345)
                            fail_msg("%s%s: %s: the workspace query gave %s with *bytes %zu",
                                     op->op, op->form, t.what, portssm_status_name(s), bytes);
                    }
                }
                th_free_all();
            }
        print_message("  %s%s: %s\n", op->op, op->form,
                      reached ? "huge broadcast sizes refused"
                              : "every dim is also a required output's (memory bounds it)");
    }
}

/* The reproducers of issue #46 as they were filed: an SSD whose B and C are one float each
 * (all strides 0) with N = 2^62 (P*N wraps to 0: a division by zero in the cpu oracle) and
 * N = 2^62 + 1 (P*N wraps to 4: a heap overflow on cpu, a hang or "empty grid" on sim), forward,
 * backward (without dB/dC, which would need the memory) and the queries. */
static void test_ssd_broadcast_pn_overflow(void **state)
{
    for (int k = 0; k < 2; k++) {
        const int64_t N = ((int64_t)1 << 62) + k;
        fixture f;
        build(&f, &op_ssd_fwd, NULL, 0);
        trial t = begin(&f, "B and C one float each, N = 2^62 + %d", k);
        int ok = broadcast_symbol(&t, 'N', N);
        assert_true(ok);
        expect_invalid(&t, "'B'"); /* the message names where N came from */
        size_t bytes = 777;
        portssm_status s = portssm_ssd_chunk_scan_fwd_workspace_size(th_ctx, &t.args.df, &bytes);
        assert_int_equal(s, PORTSSM_ERR_INVALID_ARGUMENT);
        assert_int_equal(bytes, 777);
        int64_t shape[4] = {-7, -7, -7, -7};
        s = portssm_ssd_chunk_scan_checkpoint_shape(th_ctx, &t.args.df, shape);
        assert_int_equal(s, PORTSSM_ERR_INVALID_ARGUMENT);
        assert_true(shape[0] == -7 && shape[3] == -7);
        th_free_all();
    }
}

/* Issue #46 (F1): a failed query leaves its out-parameters as they were. */
static void test_failed_queries_leave_outputs(void **state)
{
    any_args zero;
    memset(&zero, 0, sizeof zero); /* 'x' absent: every query fails */
    size_t bytes = 12345;
    assert_int_equal(portssm_causal_conv1d_bwd_workspace_size(th_ctx, &zero.cb, &bytes),
                     PORTSSM_ERR_INVALID_ARGUMENT);
    assert_int_equal(portssm_selective_scan_bwd_workspace_size(th_ctx, &zero.sb, &bytes),
                     PORTSSM_ERR_INVALID_ARGUMENT);
    assert_int_equal(portssm_ssd_chunk_scan_fwd_workspace_size(th_ctx, &zero.df, &bytes),
                     PORTSSM_ERR_INVALID_ARGUMENT);
    assert_int_equal(portssm_ssd_chunk_scan_bwd_workspace_size(th_ctx, &zero.db, &bytes),
                     PORTSSM_ERR_INVALID_ARGUMENT);
    assert_int_equal(bytes, 12345);
    int64_t shape[4] = {-7, -7, -7, -7};
    assert_int_equal(portssm_selective_scan_checkpoint_shape(th_ctx, &zero.sf, shape),
                     PORTSSM_ERR_INVALID_ARGUMENT);
    assert_int_equal(portssm_ssd_chunk_scan_checkpoint_shape(th_ctx, &zero.df, shape),
                     PORTSSM_ERR_INVALID_ARGUMENT);
    for (int i = 0; i < 4; i++)
        assert_true(shape[i] == -7);
    portssm_device_info info;
    memset(&info, 0x5a, sizeof info);
    assert_int_equal(portssm_device_get_info(PORTSSM_BACKEND_CPU, 99, &info),
                     PORTSSM_ERR_NO_DEVICE);
    assert_int_equal(portssm_device_get_info(PORTSSM_BACKEND_AUTO, 0, &info),
                     PORTSSM_ERR_INVALID_ARGUMENT);
    assert_int_equal((unsigned char)info.name[0], 0x5a);
    assert_int_equal(info.warp_size, 0x5a5a5a5a);
    portssm_event *ev;
    assert_int_equal(portssm_event_create(th_ctx, &ev), PORTSSM_OK);
    float ms = -3.0f; /* ev was never recorded */
    assert_int_equal(portssm_event_elapsed_ms(th_ctx, ev, ev, &ms), PORTSSM_ERR_INVALID_ARGUMENT);
    assert_true(ms == -3.0f);
    portssm_event_destroy(th_ctx, ev);
}

/* ---------------------------------------------------------------- PORTSSM_CPU_WORK_LIMIT */

/* The work figure of a message "... the call's work, <formula> = <n>, is over ...", or -1. */
static long long work_in_message(const char *msg)
{
    const char *over = strstr(msg, ", is over PORTSSM_CPU_WORK_LIMIT");
    if (!over)
        return -1;
    const char *p = over;
    while (p > msg && *p != '=')
        p--;
    return *p == '=' ? strtoll(p + 1, NULL, 10) : -1;
}

/* Runs the fixture's call under PORTSSM_CPU_WORK_LIMIT = limit; status and message. */
static portssm_status call_with_limit(fixture *f, const char *limit, char *msg, size_t size)
{
    setenv("PORTSSM_CPU_WORK_LIMIT", limit, 1);
    portssm_status s = f->op->call(th_ctx, &f->args);
    unsetenv("PORTSSM_CPU_WORK_LIMIT");
    snprintf(msg, size, "%s", portssm_last_error(th_ctx));
    return s;
}

/* Issue #46 item 3: on the backends that compute on this machine's CPU (cpu, sim) a call whose
 * work is over PORTSSM_CPU_WORK_LIMIT is refused with UNSUPPORTED and its figure, writing
 * nothing; at exactly its figure it runs; a malformed limit is an error naming the variable.
 * GPU backends ignore it. */
static void test_work_limit(void **state)
{
    const portssm_backend be = portssm_get_backend(th_ctx);
    const int host = be == PORTSSM_BACKEND_CPU || be == PORTSSM_BACKEND_SIM;
    for (size_t o = 0; o < sizeof all_ops / sizeof all_ops[0]; o++) {
        const opdef *op = all_ops[o];
        fixture f;
        build(&f, op, NULL, 0);
        th_snapshot snaps[MAX_T];
        for (int i = 0; i < op->n; i++)
            if (f.t[i])
                snaps[i] = th_snap(f.t[i]);
        char msg[1024], limit[32];
        portssm_status s = call_with_limit(&f, "1", msg, sizeof msg);
        if (!host) { /* ignored: the call runs (or the backend lacks the op) */
            if (s != PORTSSM_OK && s != PORTSSM_ERR_UNSUPPORTED)
                fail_msg("%s%s: under a work limit on %s: %s: %s", op->op, op->form,
                         th_backend_label, portssm_status_name(s), msg);
            if (s == PORTSSM_ERR_UNSUPPORTED && strstr(msg, "WORK_LIMIT"))
                fail_msg("%s%s: a GPU backend refused by the cpu work limit: %s", op->op,
                         op->form, msg);
            th_free_all();
            continue;
        }
        if (s != PORTSSM_ERR_UNSUPPORTED || strncmp(msg, op->op, strlen(op->op)) != 0)
            fail_msg("%s%s: limit 1: expected UNSUPPORTED from the op, got %s: \"%s\"", op->op,
                     op->form, portssm_status_name(s), msg);
        for (int i = 0; i < op->n; i++)
            if (f.t[i] && !th_unchanged(f.t[i], &snaps[i]))
                fail_msg("%s%s: refused by the work limit, but '%s' was written", op->op,
                         op->form, op->t[i].name);
        const long long work = work_in_message(msg);
        if (work < 2)
            fail_msg("%s%s: no work figure in \"%s\"", op->op, op->form, msg);
        /* the fixtures' sizes (sym_size): B 2, D 4, L 5, W 4, N 3 */
        if (op == &op_conv_fwd || op == &op_conv_bwd)
            assert_int_equal(work, 2 * 4 * 5 * 4);
        if (op == &op_scan_fwd_var || op == &op_scan_bwd_const)
            assert_int_equal(work, 2 * 4 * 5 * 3);
        snprintf(limit, sizeof limit, "%lld", work - 1);
        s = call_with_limit(&f, limit, msg, sizeof msg);
        if (s != PORTSSM_ERR_UNSUPPORTED || work_in_message(msg) != work)
            fail_msg("%s%s: limit %s (one below the work): got %s: \"%s\"", op->op, op->form,
                     limit, portssm_status_name(s), msg);
        snprintf(limit, sizeof limit, "%lld", work);
        s = call_with_limit(&f, limit, msg, sizeof msg);
        if (s != PORTSSM_OK)
            fail_msg("%s%s: limit %s (the work itself): got %s: \"%s\"", op->op, op->form,
                     limit, portssm_status_name(s), msg);
        s = call_with_limit(&f, "1e12", msg, sizeof msg);
        assert_int_equal(s, PORTSSM_OK);
        s = call_with_limit(&f, "lots", msg, sizeof msg);
        if (s != PORTSSM_ERR_INVALID_ARGUMENT || !strstr(msg, "PORTSSM_CPU_WORK_LIMIT = 'lots'"))
            fail_msg("%s%s: a malformed limit gave %s: \"%s\"", op->op, op->form,
                     portssm_status_name(s), msg);
        th_free_all();
    }
}

/* ---------------------------------------------------------------- empty tensors
 *
 * A call where one size is 0 (portssm.h, "empty tensors") is valid: it succeeds, writes nothing
 * outside its outputs' elements, and an output that still has elements gets what the math gives
 * for no step or no term: a state carried through no step (L = 0: the final state is the
 * initial one, the initial state's gradient the final one's; zeros where the source is absent)
 * or a sum over nothing (zeros).  Validation of everything else still applies. */

/* What a non-empty output of an empty call holds: a copy of `from`, or zeros (from NULL). */
static int empty_call_result(const char *out, const char **from)
{
    static const char *const copies[][2] = {
        {"final_states", "initial_states"}, {"final_state", "initial_state"},
        {"dinitial_states", "dfinal_states"}, {"dinitial_state", "dfinal_state"}};
    static const char *const sums[] = {"dweight", "dbias", "dA",  "dB",
                                       "dC",      "dD",    "ddelta_bias", "ddt", "ddt_bias"};
    for (size_t k = 0; k < sizeof copies / sizeof copies[0]; k++)
        if (strcmp(out, copies[k][0]) == 0) {
            *from = copies[k][1];
            return 1;
        }
    for (size_t k = 0; k < sizeof sums / sizeof sums[0]; k++)
        if (strcmp(out, sums[k]) == 0) {
            *from = NULL;
            return 1;
        }
    return 0;
}

static int view_empty(const portssm_tensor *v)
{
    for (int d = 0; d < v->ndim; d++)
        if (v->shape[d] == 0)
            return 1;
    return 0;
}

/* The fixture of `op` with symbol `sym` set to 0 on every view; `null_data`: empty views get data
 * NULL (as frameworks give them); `drop_source`: the copied-from tensors are absent. */
static trial empty_trial(fixture *f, const opdef *op, char sym, int null_data, int drop_source)
{
    build(f, op, NULL, 0);
    trial t = begin(f, "%c = 0%s%s", sym, null_data ? ", empty data NULL" : "",
                    drop_source ? ", states' sources absent" : "");
    resize_sym(&t, sym, 0);
    for (int i = 0; i < op->n; i++) {
        portssm_tensor *v = view_in(&t.args, &op->t[i]);
        const char *from;
        if (null_data && view_empty(v))
            v->data = NULL;
        if (drop_source && empty_call_result(op->t[i].name, &from) && from && f->t[find_arg(op, from)])
            view_in(&t.args, &op->t[find_arg(op, from)])->data = NULL;
    }
    return t;
}

/* Runs an empty trial: OK (or UNSUPPORTED where the backend lacks the op, which nothing then
 * reaches); inputs, states and empty outputs unchanged; other outputs as empty_call_result. */
static void expect_empty_call(trial *t)
{
    fixture *f = t->f;
    const opdef *op = f->op;
    th_snapshot snaps[MAX_T];
    for (int i = 0; i < op->n; i++)
        snaps[i] = th_snap(f->t[i]);
    portssm_status s = op->call(th_ctx, &t->args);
    if (s == PORTSSM_ERR_UNSUPPORTED && strstr(portssm_last_error(th_ctx), "not implemented")) {
        print_message("  (%s%s: %s: %s)\n", op->op, op->form, t->what, portssm_last_error(th_ctx));
        for (int i = 0; i < op->n; i++)
            assert_true(th_unchanged(f->t[i], &snaps[i]));
        return;
    }
    if (s != PORTSSM_OK)
        fail_msg("%s%s: %s: expected OK, got %s: %s", op->op, op->form, t->what,
                 portssm_status_name(s), portssm_last_error(th_ctx));
    for (int i = 0; i < op->n; i++) {
        const targ *a = &op->t[i];
        const portssm_tensor *v = view_in(&t->args, a);
        const char *from = NULL;
        if (a->role != 'o' || view_empty(v)) {
            if (!th_unchanged(f->t[i], &snaps[i]))
                fail_msg("%s%s: %s: '%s' was written", op->op, op->form, t->what, a->name);
            continue;
        }
        free(snaps[i].data);
        if (!empty_call_result(a->name, &from))
            fail_msg("%s%s: %s: '%s' has elements, but the test knows no value for it", op->op,
                     op->form, t->what, a->name);
        th_assert_guards(f->t[i], a->name);
        const int j = from ? find_arg(op, from) : -1;
        const int copy = j >= 0 && view_in(&t->args, &op->t[j])->data != NULL;
        if (copy)
            th_download(f->t[j]);
        int64_t idx[4];
        for (int64_t e = 0; e < th_numel(f->t[i]); e++) {
            th_unravel(f->t[i], e, idx);
            const double want = copy ? th_get(f->t[j], idx) : 0.0;
            const double got = th_get(f->t[i], idx);
            if (!(got == want))
                fail_msg("%s%s: %s: '%s' element %lld is %g, expected %g (%s)", op->op,
                         op->form, t->what, a->name, (long long)e, got, want,
                         copy ? from : "zeros");
        }
    }
}

/* The symbols of `op` that may be 0, each once. */
static int empty_symbols(const opdef *op, char out[8])
{
    int n = 0;
    for (const char *s = "BDLHPTr"; *s; s++)
        for (int i = 0; i < op->n; i++)
            if (strchr(op->t[i].dims, *s) && !memchr(out, *s, (size_t)n)) {
                out[n++] = *s;
                break;
            }
    return n;
}

static void test_empty_calls(void **state)
{
    for (size_t o = 0; o < sizeof all_ops / sizeof all_ops[0]; o++) {
        const opdef *op = all_ops[o];
        char syms[8];
        const int ns = empty_symbols(op, syms);
        assert_true(ns > 0);
        for (int k = 0; k < ns; k++)
            for (int variant = 0; variant < 3; variant++) {
                if (variant == 2 && syms[k] != 'L')
                    continue;
                fixture f;
                trial t = empty_trial(&f, op, syms[k], variant >= 1, variant == 2);
                expect_empty_call(&t);
                th_free_all();
            }
    }
}

/* With a 0 size, every other rule still holds: a wrong dtype, a wrong size of another dim, a
 * required tensor with elements but data NULL, a bad activation are refused, nothing written. */
static void test_empty_calls_still_validated(void **state)
{
    for (size_t o = 0; o < sizeof all_ops / sizeof all_ops[0]; o++) {
        const opdef *op = all_ops[o];
        char syms[8];
        const int ns = empty_symbols(op, syms);
        for (int k = 0; k < ns; k++) {
            fixture f;
            trial base = empty_trial(&f, op, syms[k], 1, 0);
            for (int i = 0; i < op->n; i++) {
                const targ *a = &op->t[i];
                char needle[64];
                quoted(needle, sizeof needle, a->name);
                portssm_dtype wrong[2];
                wrong_dtypes(a->dt, wrong);
                trial t = begin(&f, "%s; '%s' %s", base.what, a->name,
                                portssm_dtype_name(wrong[0]));
                t.args = base.args;
                tv(&t, a->name)->dtype = wrong[0];
                expect_invalid(&t, needle);
                const portssm_tensor *bv = view_in(&base.args, a);
                if (a->required && !view_empty(bv)) {
                    t = begin(&f, "%s; required '%s' (with elements) data NULL", base.what,
                              a->name);
                    t.args = base.args;
                    tv(&t, a->name)->data = NULL;
                    expect_invalid(&t, needle);
                }
                for (int d = 0; a->dims[d]; d++) {
                    if (a->dims[d] == syms[k] || sym_free(a->dims[d]) ||
                        !view_empty(bv) || strchr(a->dims, a->dims[d]) != a->dims + d)
                        continue;
                    t = begin(&f, "%s; empty '%s' shape[%d] + 1", base.what, a->name, d);
                    t.args = base.args;
                    tv(&t, a->name)->shape[d] += 1;
                    expect_invalid(&t, needle);
                }
            }
            if (op->act_off >= 0) {
                trial t = begin(&f, "%s; activation 7", base.what);
                t.args = base.args;
                *(portssm_activation *)((char *)&t.args + op->act_off) = (portssm_activation)7;
                expect_invalid(&t, "activation");
            }
            th_free_all();
        }
    }
}

/* SSD with L = 0 packed (B = 1, cu_seqlens all 0): every sequence is empty, so varlen_states gets
 * each one's start state (the first: initial_states; the others: zeros) and final_states the
 * initial state; the checkpoints have K = 0 (the query says so) and may be given empty with data
 * NULL.  The same query for selective_scan_fwd gives K = 0 too, where the tensor must then be
 * absent. */
static void test_empty_ssd_packed_and_checkpoints(void **state)
{
    fixture f;
    build(&f, &op_ssd_fwd, NULL, 0);
    trial t = begin(&f, "packed, B = 1, L = 0");
    resize_sym(&t, 'B', 1);
    resize_sym(&t, 'L', 0);
    const int64_t H = sym_size('H'), P = sym_size('P'), N = sym_size('N');
    th_tensor *cu = th_new(th_ctx, PORTSSM_I32, 1, (const int64_t[]){3}, NULL);
    for (int64_t k = 0; k < 3; k++)
        th_set(cu, &k, 0.0);
    th_upload(cu);
    th_tensor *vs = th_new(th_ctx, PORTSSM_F32, 4, (const int64_t[]){2, H, P, N}, NULL);
    th_poison(vs);
    t.args.df.cu_seqlens = th_view(cu);
    t.args.df.varlen_states = th_view(vs);

    int64_t shape[4] = {-1, -1, -1, -1};
    assert_int_equal(portssm_ssd_chunk_scan_checkpoint_shape(th_ctx, &t.args.df, shape),
                     PORTSSM_OK);
    assert_true(shape[0] == 1 && shape[1] == H && shape[2] == 0 && shape[3] == P * N);
    t.args.df.checkpoints = portssm_tensor_contiguous(NULL, PORTSSM_F16, 4, shape);

    th_tensor *init = f.t[find_arg(&op_ssd_fwd, "initial_states")];
    th_tensor *fin = f.t[find_arg(&op_ssd_fwd, "final_states")];
    portssm_status s = portssm_ssd_chunk_scan_fwd(th_ctx, &t.args.df);
    if (s == PORTSSM_ERR_UNSUPPORTED) {
        print_message("  (%s)\n", portssm_last_error(th_ctx));
        th_free_all();
        return;
    }
    if (s != PORTSSM_OK)
        fail_msg("%s: got %s: %s", t.what, portssm_status_name(s), portssm_last_error(th_ctx));
    th_download(init);
    th_download(fin);
    th_download(vs);
    th_assert_guards(vs, "varlen_states");
    th_assert_guards(fin, "final_states");
    int64_t idx[4];
    for (int64_t e = 0; e < th_numel(vs); e++) {
        th_unravel(vs, e, idx);
        const double want = idx[0] == 0 ? th_get(init, idx) : 0.0;
        if (!(th_get(vs, idx) == want))
            fail_msg("varlen_states element %lld is %g, expected %g", (long long)e,
                     th_get(vs, idx), want);
    }
    for (int64_t e = 0; e < th_numel(fin); e++) { /* row 0: the only row of the view */
        th_unravel(fin, e, idx);
        const double want = idx[0] == 0 ? th_get(init, idx) : NAN;
        if (idx[0] == 0 ? !(th_get(fin, idx) == want) : !isnan(th_get(fin, idx)))
            fail_msg("final_states element %lld is %g, expected %g", (long long)e,
                     th_get(fin, idx), want);
    }

    /* checkpoints of K = 0 still checked: its dtype must be x's */
    t.args.df.checkpoints.dtype = PORTSSM_F32;
    expect_invalid(&t, "'checkpoints'");
    th_free_all();

    build(&f, &op_scan_fwd_var, NULL, 0);
    t = begin(&f, "L = 0");
    resize_sym(&t, 'L', 0);
    assert_int_equal(portssm_selective_scan_checkpoint_shape(th_ctx, &t.args.sf, shape),
                     PORTSSM_OK);
    assert_true(shape[0] == sym_size('B') && shape[1] == sym_size('D') && shape[2] == 0 &&
                shape[3] == sym_size('N'));
    /* K = 0: the checkpoints must be absent, not merely empty (portssm.h) */
    t.args.sf.checkpoints = portssm_tensor_contiguous(NULL, PORTSSM_F32, 4, shape);
    expect_invalid(&t, "'checkpoints'");
    th_free_all();
}

/* The sizes that may not be 0 (state size N, width W, groups G, state length S, a state pool's
 * rows, the norms' hidden size and groups) are still refused at 0, naming a tensor of that size;
 * nothing is written. */
static void test_zero_refused_for_other_sizes(void **state)
{
    for (size_t o = 0; o < sizeof all_ops / sizeof all_ops[0]; o++) {
        const opdef *op = all_ops[o];
        for (const char *s = "NWGSbhg"; *s; s++) {
            int first = -1;
            for (int i = 0; i < op->n && first < 0; i++)
                if (strchr(op->t[i].dims, *s))
                    first = i;
            if (first < 0)
                continue;
            fixture f;
            build(&f, op, NULL, 0);
            trial t = begin(&f, "%c = 0", *s);
            resize_sym(&t, *s, 0);
            expect_invalid(&t, "must be >= 1");
            th_free_all();
        }
    }
}

int main(int argc, char **argv)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_matrix_conv1d_fwd),
        cmocka_unit_test(test_matrix_conv1d_bwd),
        cmocka_unit_test(test_matrix_conv1d_update),
        cmocka_unit_test(test_matrix_scan_fwd),
        cmocka_unit_test(test_matrix_scan_bwd),
        cmocka_unit_test(test_matrix_state_update),
        cmocka_unit_test(test_matrix_ssd),
        cmocka_unit_test(test_matrix_norm),
        cmocka_unit_test(test_rules_conv1d),
        cmocka_unit_test(test_rules_conv1d_update),
        cmocka_unit_test(test_rules_scan),
        cmocka_unit_test(test_rules_state_update),
        cmocka_unit_test(test_rules_norm),
        cmocka_unit_test(test_accept_minimal),
        cmocka_unit_test(test_accept_layouts),
        cmocka_unit_test(test_accept_shared_inputs),
        cmocka_unit_test(test_accept_split_gradients),
        cmocka_unit_test(test_tensor_contiguous_rejected),
        cmocka_unit_test(test_negative_next_to_zero),
        cmocka_unit_test(test_optional_alone),
        cmocka_unit_test(test_conv1d_bwd_bias_without_dbias),
        cmocka_unit_test(test_ssd_cu_seqlens),
        cmocka_unit_test(test_broadcast_work_refused),
        cmocka_unit_test(test_ssd_broadcast_pn_overflow),
        cmocka_unit_test(test_failed_queries_leave_outputs),
        cmocka_unit_test(test_work_limit),
        cmocka_unit_test(test_empty_calls),
        cmocka_unit_test(test_empty_calls_still_validated),
        cmocka_unit_test(test_empty_ssd_packed_and_checkpoints),
        cmocka_unit_test(test_zero_refused_for_other_sizes),
    };
    return th_main(argc, argv, "test_validation", tests, sizeof tests / sizeof tests[0]);
}
