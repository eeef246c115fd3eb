/* opcase.c - see opcase.h. */
#include "opcase.h"

#include <stdio.h>
#include <string.h>

/* Argument slots: one id per argument name across every op. */
enum {
    SL_X, SL_WEIGHT, SL_BIAS, SL_SEQ_IDX, SL_INIT, SL_FINAL, SL_OUT, SL_DOUT, SL_DFINAL, SL_DX,
    SL_DWEIGHT, SL_DBIAS, SL_DINIT, SL_CONV_STATE, SL_CACHE_SEQLENS, SL_INDICES, SL_U, SL_DELTA,
    SL_A, SL_B, SL_C, SL_DSKIP, SL_Z, SL_DELTA_BIAS, SL_DU, SL_DDELTA, SL_DA, SL_DB, SL_DC, SL_DD,
    SL_DZ, SL_DDELTA_BIAS, SL_STATE, SL_CHECKPOINTS, SL_Y, SL_SSD_CHECKPOINTS, SL_RESIDUAL,
    SL_RESIDUAL_OUT, SL_MEAN, SL_RSTD, SL_DRESIDUAL_OUT, SL_DRESIDUAL
};

const char *pssm_op_name(pssm_op op)
{
    static const char *const names[PSSM_OP_COUNT] = {
        "causal_conv1d_fwd",  "causal_conv1d_bwd",  "causal_conv1d_fwd+bwd",
        "causal_conv1d_update", "selective_scan_fwd", "selective_scan_bwd",
        "selective_scan_fwd+bwd", "selective_state_update", "ssd_chunk_scan_fwd",
        "ssd_chunk_scan_bwd", "ssd_chunk_scan_fwd+bwd", "norm_fwd", "norm_bwd",
        "norm_fwd+bwd"};
    return (unsigned)op < PSSM_OP_COUNT ? names[op] : "?";
}

static int is_conv(pssm_op op)
{
    return op == PSSM_OP_CONV1D_FWD || op == PSSM_OP_CONV1D_BWD || op == PSSM_OP_CONV1D_FWDBWD;
}

static int is_scan(pssm_op op)
{
    return op == PSSM_OP_SCAN_FWD || op == PSSM_OP_SCAN_BWD || op == PSSM_OP_SCAN_FWDBWD;
}

static int is_ssd(pssm_op op)
{
    return op == PSSM_OP_SSD_FWD || op == PSSM_OP_SSD_BWD || op == PSSM_OP_SSD_FWDBWD;
}

static int is_norm(pssm_op op)
{
    return op == PSSM_OP_NORM_FWD || op == PSSM_OP_NORM_BWD || op == PSSM_OP_NORM_FWDBWD;
}

static int64_t groups(const pssm_opcase *c) { return c->G > 0 ? c->G : 1; }

static int64_t conv_state_len(const pssm_opcase *c)
{
    if (c->S > 0)
        return c->S;
    return c->W > 1 ? c->W - 1 : 1;
}

static int64_t tokens(const pssm_opcase *c) { return c->T > 0 ? c->T : 1; }

/* Sequences plus two spare rows when the state is a pool addressed through indices. */
static int64_t pool_rows(const pssm_opcase *c)
{
    return c->opts & PSSM_O_INDICES ? c->B + 2 : c->B;
}

void pssm_opcase_shape(const pssm_opcase *c, char *buf, size_t n)
{
    long long B = c->B, D = c->D, L = c->L, W = c->W, N = c->N, H = c->H, P = c->P;
    int len = 0;
    if (is_conv(c->op))
        len = snprintf(buf, n, "B%lld D%lld L%lld W%lld", B, D, L, W);
    else if (c->op == PSSM_OP_CONV1D_UPDATE) {
        len = snprintf(buf, n, "B%lld D%lld W%lld", B, D, W);
        if (tokens(c) > 1 || conv_state_len(c) != W - 1)
            snprintf(buf + len, n - (size_t)len, " T%lld S%lld", (long long)tokens(c),
                     (long long)conv_state_len(c));
        return;
    } else if (is_scan(c->op))
        len = snprintf(buf, n, "B%lld D%lld L%lld N%lld", B, D, L, N);
    else if (is_ssd(c->op)) {
        snprintf(buf, n, "B%lld L%lld H%lld P%lld N%lld G%lld", B, L, H, P, N,
                 (long long)groups(c));
        return;
    } else if (is_norm(c->op)) {
        len = snprintf(buf, n, "B%lld L%lld D%lld", B, L, D);
        if (groups(c) > 1)
            snprintf(buf + len, n - (size_t)len, " G%lld", (long long)groups(c));
        return;
    }
    else if (c->opts & PSSM_O_HEADS)
        len = snprintf(buf, n, "B%lld H%lld P%lld N%lld", B, H, P, N);
    else
        len = snprintf(buf, n, "B%lld D%lld N%lld", B, D, N);
    if ((is_scan(c->op) && (c->opts & PSSM_O_VAR_BC) && groups(c) > 1) ||
        (c->op == PSSM_OP_STATE_UPDATE && (c->opts & PSSM_O_HEADS) && groups(c) > 1))
        snprintf(buf + len, n - (size_t)len, " G%lld", (long long)groups(c));
}

void pssm_opcase_options(const pssm_opcase *c, char *buf, size_t n)
{
    const int dt_names = c->op == PSSM_OP_STATE_UPDATE || is_ssd(c->op);
    const char *dbias = dt_names ? "dt_bias" : "delta_bias";
    const char *sp = dt_names ? "dt_softplus" : "softplus";
    const struct {
        uint32_t bit;
        const char *name;
    } names[] = {
        {PSSM_O_BIAS, "bias"}, {PSSM_O_SILU, "silu"}, {PSSM_O_SEQ_IDX, "seq_idx"},
        {PSSM_O_STATES, "states"}, {PSSM_O_CHANNEL_LAST, "channel-last"},
        {PSSM_O_W_F32, "weight-f32"}, {PSSM_O_RING, "ring"}, {PSSM_O_INDICES, "indices"},
        {PSSM_O_VAR_BC, "var-BC"}, {PSSM_O_DSKIP, "D"}, {PSSM_O_Z, "z"},
        {PSSM_O_DELTA_BIAS, dbias}, {PSSM_O_SOFTPLUS, sp}, {PSSM_O_HEADS, "heads"},
        {PSSM_O_TIED, "tied"}, {PSSM_O_D_PER_HEAD, "D-per-head"}, {PSSM_O_RMS, "rms"},
        {PSSM_O_RESIDUAL, "residual"}, {PSSM_O_RES_F32, "residual-f32"},
        {PSSM_O_NORM_BEFORE_GATE, "norm-before-gate"},
    };
    size_t len = 0;
    buf[0] = '\0';
    for (size_t i = 0; i < sizeof names / sizeof names[0] && len < n; i++)
        if (c->opts & names[i].bit)
            len += (size_t)snprintf(buf + len, n - len, "%s%s", len ? " " : "", names[i].name);
    if (c->op == PSSM_OP_STATE_UPDATE && c->state_dtype != PORTSSM_F32 && len < n)
        snprintf(buf + len, n - len, "%sstate-%s", len ? " " : "",
                 portssm_dtype_name(c->state_dtype));
}

/* ---------------------------------------------------------------- tensors */

static int add(pssm_tset *s, const char *name, int slot, pssm_role role, portssm_dtype dt,
               int passes, int32_t ndim, int64_t d0, int64_t d1, int64_t d2, int64_t d3,
               double lo, double hi)
{
    int64_t shape[4] = {d0, d1, d2, d3};
    int i = pssm_tset_add(s, name, slot, role, dt, ndim, shape, lo, hi);
    if (i >= 0)
        s->t[i].passes = passes;
    return i;
}

/* The W-1 (or S) positions of a conv state and the L tokens of x share one channel-last
 * layout: (B,D,X) stored as (B,X,D). */
static void channel_last(const pssm_opcase *c, pssm_tset *s, int i)
{
    static const int order[3] = {0, 2, 1};
    if (c->opts & PSSM_O_CHANNEL_LAST)
        pssm_tset_layout(s, i, order, 0);
}

static void conv_tensors(const pssm_opcase *c, pssm_tset *s, int fwd, int bwd)
{
    portssm_dtype act = c->dtype;
    portssm_dtype wdt = c->opts & PSSM_O_W_F32 ? PORTSSM_F32 : act;
    int both = fwd + bwd, states = (c->opts & PSSM_O_STATES) && c->W >= 2;
    int64_t B = c->B, D = c->D, L = c->L, W = c->W;
    channel_last(c, s, add(s, "x", SL_X, PSSM_IN, act, both, 3, B, D, L, 0, -1, 1));
    add(s, "weight", SL_WEIGHT, PSSM_IN, wdt, both, 2, D, W, 0, 0, -0.5, 0.5);
    if (c->opts & PSSM_O_BIAS)
        add(s, "bias", SL_BIAS, PSSM_IN, wdt, both, 1, D, 0, 0, 0, -0.5, 0.5);
    if (c->opts & PSSM_O_SEQ_IDX) /* contents replaced by fill_seq_idx */
        add(s, "seq_idx", SL_SEQ_IDX, PSSM_IN, PORTSSM_I32, both, 2, B, L, 0, 0, 0, 0);
    if (states)
        channel_last(c, s, add(s, "initial_states", SL_INIT, PSSM_IN, act, both, 3, B, D, W - 1,
                               0, -1, 1));
    if (fwd) {
        if (states)
            channel_last(c, s, add(s, "final_states", SL_FINAL, PSSM_OUT, act, 1, 3, B, D,
                                   W - 1, 0, 0, 0));
        channel_last(c, s, add(s, "out", SL_OUT, PSSM_OUT, act, 1, 3, B, D, L, 0, 0, 0));
    }
    if (bwd) {
        channel_last(c, s, add(s, "dout", SL_DOUT, PSSM_IN, act, 1, 3, B, D, L, 0, -1, 1));
        if (states)
            channel_last(c, s, add(s, "dfinal_states", SL_DFINAL, PSSM_IN, act, 1, 3, B, D,
                                   W - 1, 0, -1, 1));
        channel_last(c, s, add(s, "dx", SL_DX, PSSM_OUT, act, 1, 3, B, D, L, 0, 0, 0));
        add(s, "dweight", SL_DWEIGHT, PSSM_OUT, wdt, 1, 2, D, W, 0, 0, 0, 0);
        if (c->opts & PSSM_O_BIAS)
            add(s, "dbias", SL_DBIAS, PSSM_OUT, wdt, 1, 1, D, 0, 0, 0, 0, 0);
        if (states)
            channel_last(c, s, add(s, "dinitial_states", SL_DINIT, PSSM_OUT, act, 1, 3, B, D,
                                   W - 1, 0, 0, 0));
    }
}

static void conv_update_tensors(const pssm_opcase *c, pssm_tset *s)
{
    portssm_dtype act = c->dtype;
    portssm_dtype wdt = c->opts & PSSM_O_W_F32 ? PORTSSM_F32 : act;
    int64_t B = c->B, D = c->D, T = tokens(c), S = conv_state_len(c);
    int xdims = T > 1 ? 3 : 2;
    add(s, "x", SL_X, PSSM_IN, act, 1, xdims, B, D, T, 0, -1, 1);
    add(s, "conv_state", SL_CONV_STATE, PSSM_INOUT, act, 1, 3, pool_rows(c), D, S, 0, -1, 1);
    add(s, "weight", SL_WEIGHT, PSSM_IN, wdt, 1, 2, D, c->W, 0, 0, -0.5, 0.5);
    if (c->opts & PSSM_O_BIAS)
        add(s, "bias", SL_BIAS, PSSM_IN, wdt, 1, 1, D, 0, 0, 0, -0.5, 0.5);
    if (c->opts & PSSM_O_RING) /* past the end too: the ring index is taken mod S */
        add(s, "cache_seqlens", SL_CACHE_SEQLENS, PSSM_IN, PORTSSM_I32, 1, 1, B, 0, 0, 0, 0,
            3 * (double)S);
    if (c->opts & PSSM_O_INDICES)
        add(s, "conv_state_indices", SL_INDICES, PSSM_IN, PORTSSM_I32, 1, 1, B, 0, 0, 0, 0, 0);
    add(s, "out", SL_OUT, PSSM_OUT, act, 1, xdims, B, D, T, 0, 0, 0);
}

/* dt ranges: with softplus dt + bias spans about (-4, 0.5), giving steps 0.02..1. */
#define DT_LO(c) ((c)->opts & PSSM_O_SOFTPLUS ? -2.0 : 0.01)
#define DT_HI(c) ((c)->opts & PSSM_O_SOFTPLUS ? 1.0 : 0.6)
#define DTB_LO(c) ((c)->opts & PSSM_O_SOFTPLUS ? -2.0 : 0.0)
#define DTB_HI(c) ((c)->opts & PSSM_O_SOFTPLUS ? -0.5 : 0.1)

static void scan_tensors(const pssm_opcase *c, pssm_tset *s, int fwd, int bwd)
{
    portssm_dtype act = c->dtype, f32 = PORTSSM_F32;
    int both = fwd + bwd, var = (c->opts & PSSM_O_VAR_BC) != 0;
    int64_t B = c->B, D = c->D, L = c->L, N = c->N, G = groups(c);
    uint32_t o = c->opts;
    add(s, "u", SL_U, PSSM_IN, act, both, 3, B, D, L, 0, -1, 1);
    add(s, "delta", SL_DELTA, PSSM_IN, act, both, 3, B, D, L, 0, DT_LO(c), DT_HI(c));
    add(s, "A", SL_A, PSSM_IN, f32, both, 2, D, N, 0, 0, -4, -0.5);
    if (var) {
        add(s, "B", SL_B, PSSM_IN, act, both, 4, B, G, N, L, -1, 1);
        add(s, "C", SL_C, PSSM_IN, act, both, 4, B, G, N, L, -1, 1);
    } else {
        add(s, "B", SL_B, PSSM_IN, f32, both, 2, D, N, 0, 0, -1, 1);
        add(s, "C", SL_C, PSSM_IN, f32, both, 2, D, N, 0, 0, -1, 1);
    }
    if (o & PSSM_O_DSKIP)
        add(s, "D", SL_DSKIP, PSSM_IN, f32, both, 1, D, 0, 0, 0, -1, 1);
    if (o & PSSM_O_Z)
        add(s, "z", SL_Z, PSSM_IN, act, both, 3, B, D, L, 0, -1, 1);
    if (o & PSSM_O_DELTA_BIAS)
        add(s, "delta_bias", SL_DELTA_BIAS, PSSM_IN, f32, both, 1, D, 0, 0, 0, DTB_LO(c),
            DTB_HI(c));
    if (o & PSSM_O_STATES)
        add(s, "initial_state", SL_INIT, PSSM_IN, f32, both, 3, B, D, N, 0, -1, 1);
    if (fwd) {
        if (o & PSSM_O_STATES)
            add(s, "final_state", SL_FINAL, PSSM_OUT, f32, 1, 3, B, D, N, 0, 0, 0);
        add(s, "out", SL_OUT, PSSM_OUT, act, 1, 3, B, D, L, 0, 0, 0);
    }
    /* a training step: the forward keeps the states every interval for the backward (checkpoints
     * (B,D,K,N) with K = (L-1) / 128, portssm_selective_scan_checkpoint_shape) */
    if (fwd && bwd && (L - 1) / 128 > 0)
        add(s, "checkpoints", SL_CHECKPOINTS, PSSM_OUT, f32, 2, 4, B, D, (L - 1) / 128, N, 0, 0);
    if (bwd) {
        add(s, "dout", SL_DOUT, PSSM_IN, act, 1, 3, B, D, L, 0, -1, 1);
        if (o & PSSM_O_STATES)
            add(s, "dfinal_state", SL_DFINAL, PSSM_IN, f32, 1, 3, B, D, N, 0, -1, 1);
        add(s, "du", SL_DU, PSSM_OUT, act, 1, 3, B, D, L, 0, 0, 0);
        add(s, "ddelta", SL_DDELTA, PSSM_OUT, act, 1, 3, B, D, L, 0, 0, 0);
        add(s, "dA", SL_DA, PSSM_OUT, f32, 1, 2, D, N, 0, 0, 0, 0);
        if (var) {
            add(s, "dB", SL_DB, PSSM_OUT, act, 1, 4, B, G, N, L, 0, 0);
            add(s, "dC", SL_DC, PSSM_OUT, act, 1, 4, B, G, N, L, 0, 0);
        } else {
            add(s, "dB", SL_DB, PSSM_OUT, f32, 1, 2, D, N, 0, 0, 0, 0);
            add(s, "dC", SL_DC, PSSM_OUT, f32, 1, 2, D, N, 0, 0, 0, 0);
        }
        if (o & PSSM_O_DSKIP)
            add(s, "dD", SL_DD, PSSM_OUT, f32, 1, 1, D, 0, 0, 0, 0, 0);
        if (o & PSSM_O_Z)
            add(s, "dz", SL_DZ, PSSM_OUT, act, 1, 3, B, D, L, 0, 0, 0);
        if (o & PSSM_O_DELTA_BIAS)
            add(s, "ddelta_bias", SL_DDELTA_BIAS, PSSM_OUT, f32, 1, 1, D, 0, 0, 0, 0, 0);
        if (o & PSSM_O_STATES)
            add(s, "dinitial_state", SL_DINIT, PSSM_OUT, f32, 1, 3, B, D, N, 0, 0, 0);
    }
}

static void state_update_tensors(const pssm_opcase *c, pssm_tset *s)
{
    /* the state at its own element size: the min-bytes rule counts it read + written */
    portssm_dtype act = c->dtype, f32 = PORTSSM_F32, sdt = c->state_dtype;
    uint32_t o = c->opts;
    int64_t B = c->B, N = c->N, R = pool_rows(c);
    if (!(o & PSSM_O_HEADS)) { /* Mamba-1: (B,D) tokens against (B',D,N) states */
        int64_t D = c->D;
        add(s, "state", SL_STATE, PSSM_INOUT, sdt, 1, 3, R, D, N, 0, -1, 1);
        add(s, "x", SL_X, PSSM_IN, act, 1, 2, B, D, 0, 0, -1, 1);
        add(s, "dt", SL_DELTA, PSSM_IN, act, 1, 2, B, D, 0, 0, DT_LO(c), DT_HI(c));
        add(s, "A", SL_A, PSSM_IN, f32, 1, 2, D, N, 0, 0, -4, -0.5);
        add(s, "B", SL_B, PSSM_IN, act, 1, 2, B, N, 0, 0, -1, 1);
        add(s, "C", SL_C, PSSM_IN, act, 1, 2, B, N, 0, 0, -1, 1);
        if (o & PSSM_O_DSKIP)
            add(s, "D", SL_DSKIP, PSSM_IN, f32, 1, 1, D, 0, 0, 0, -1, 1);
        if (o & PSSM_O_Z)
            add(s, "z", SL_Z, PSSM_IN, act, 1, 2, B, D, 0, 0, -1, 1);
        if (o & PSSM_O_DELTA_BIAS)
            add(s, "dt_bias", SL_DELTA_BIAS, PSSM_IN, f32, 1, 1, D, 0, 0, 0, DTB_LO(c),
                DTB_HI(c));
        if (o & PSSM_O_INDICES)
            add(s, "state_batch_indices", SL_INDICES, PSSM_IN, PORTSSM_I32, 1, 1, B, 0, 0, 0,
                0, 0);
        add(s, "out", SL_OUT, PSSM_OUT, act, 1, 2, B, D, 0, 0, 0, 0);
        return;
    }
    /* heads: tied A, dt, D and dt_bias have one distinct value per head (stride 0 over P, N) */
    int64_t H = c->H, P = c->P, G = groups(c);
    unsigned tie_pn = o & PSSM_O_TIED ? 6u : 0u, tie_p = o & PSSM_O_TIED ? 2u : 0u;
    unsigned tie_bp = o & PSSM_O_TIED ? 4u : 0u;
    add(s, "state", SL_STATE, PSSM_INOUT, sdt, 1, 4, R, H, P, N, -1, 1);
    add(s, "x", SL_X, PSSM_IN, act, 1, 3, B, H, P, 0, -1, 1);
    pssm_tset_layout(s, add(s, "dt", SL_DELTA, PSSM_IN, act, 1, 3, B, H, P, 0, DT_LO(c),
                            DT_HI(c)), NULL, tie_bp);
    pssm_tset_layout(s, add(s, "A", SL_A, PSSM_IN, f32, 1, 3, H, P, N, 0, -4, -0.5), NULL,
                     tie_pn);
    add(s, "B", SL_B, PSSM_IN, act, 1, 3, B, G, N, 0, -1, 1);
    add(s, "C", SL_C, PSSM_IN, act, 1, 3, B, G, N, 0, -1, 1);
    if (o & PSSM_O_DSKIP)
        pssm_tset_layout(s, add(s, "D", SL_DSKIP, PSSM_IN, f32, 1, 2, H, P, 0, 0, -1, 1), NULL,
                         tie_p);
    if (o & PSSM_O_Z)
        add(s, "z", SL_Z, PSSM_IN, act, 1, 3, B, H, P, 0, -1, 1);
    if (o & PSSM_O_DELTA_BIAS)
        pssm_tset_layout(s, add(s, "dt_bias", SL_DELTA_BIAS, PSSM_IN, f32, 1, 2, H, P, 0, 0,
                                DTB_LO(c), DTB_HI(c)), NULL, tie_p);
    if (o & PSSM_O_INDICES)
        add(s, "state_batch_indices", SL_INDICES, PSSM_IN, PORTSSM_I32, 1, 1, B, 0, 0, 0, 0, 0);
    add(s, "out", SL_OUT, PSSM_OUT, act, 1, 3, B, H, P, 0, 0, 0);
}

/* The SSD: (B,L,H,P) tokens, dt (B,L,H), A (H), B/C (B,L,G,N), states (B,H,P,N). */
static void ssd_tensors(const pssm_opcase *c, pssm_tset *s, int fwd, int bwd)
{
    portssm_dtype act = c->dtype, f32 = PORTSSM_F32;
    const int both = fwd + bwd;
    const int64_t B = c->B, L = c->L, H = c->H, P = c->P, N = c->N, G = groups(c);
    const uint32_t o = c->opts;
    const int per_head = (o & PSSM_O_D_PER_HEAD) != 0;
    add(s, "x", SL_U, PSSM_IN, act, both, 4, B, L, H, P, -1, 1);
    add(s, "dt", SL_DELTA, PSSM_IN, act, both, 3, B, L, H, 0, DT_LO(c), DT_HI(c));
    add(s, "A", SL_A, PSSM_IN, f32, both, 1, H, 0, 0, 0, -4, -0.5);
    add(s, "B", SL_B, PSSM_IN, act, both, 4, B, L, G, N, -1, 1);
    add(s, "C", SL_C, PSSM_IN, act, both, 4, B, L, G, N, -1, 1);
    if (o & PSSM_O_DSKIP)
        add(s, "D", SL_DSKIP, PSSM_IN, f32, both, per_head ? 1 : 2, H, P, 0, 0, -1, 1);
    if (o & PSSM_O_Z)
        add(s, "z", SL_Z, PSSM_IN, act, both, 4, B, L, H, P, -1, 1);
    if (o & PSSM_O_DELTA_BIAS)
        add(s, "dt_bias", SL_DELTA_BIAS, PSSM_IN, f32, both, 1, H, 0, 0, 0, DTB_LO(c), DTB_HI(c));
    if (o & PSSM_O_STATES)
        add(s, "initial_states", SL_INIT, PSSM_IN, f32, both, 4, B, H, P, N, -1, 1);
    if (o & PSSM_O_SEQ_IDX)
        add(s, "seq_idx", SL_SEQ_IDX, PSSM_IN, PORTSSM_I32, both, 2, B, L, 0, 0, 0, 0);
    if (fwd) {
        add(s, "out", SL_OUT, PSSM_OUT, act, 1, 4, B, L, H, P, 0, 0);
        if (o & PSSM_O_STATES)
            add(s, "final_states", SL_FINAL, PSSM_OUT, f32, 1, 4, B, H, P, N, 0, 0);
    }
    if (fwd && bwd && (o & PSSM_O_Z)) /* a training step: the forward's y (before the gate)
                                       * for the backward's dz, as a framework saves it */
        add(s, "y", SL_Y, PSSM_OUT, act, 2, 4, B, L, H, P, 0, 0);
    if (fwd && bwd) /* ... and its checkpoints, the states entering the chunks (chunk_size 256
                     * below: K = ceil(L / 256) for every dtype) */
        add(s, "checkpoints", SL_SSD_CHECKPOINTS, PSSM_OUT, act, 2, 4, B, H, (L + 255) / 256,
            P * N, 0, 0);
    if (bwd) {
        add(s, "dout", SL_DOUT, PSSM_IN, act, 1, 4, B, L, H, P, -1, 1);
        if (o & PSSM_O_STATES)
            add(s, "dfinal_states", SL_DFINAL, PSSM_IN, f32, 1, 4, B, H, P, N, -1, 1);
        add(s, "dx", SL_DU, PSSM_OUT, act, 1, 4, B, L, H, P, 0, 0);
        add(s, "ddt", SL_DDELTA, PSSM_OUT, act, 1, 3, B, L, H, 0, 0, 0);
        add(s, "dA", SL_DA, PSSM_OUT, f32, 1, 1, H, 0, 0, 0, 0, 0);
        add(s, "dB", SL_DB, PSSM_OUT, act, 1, 4, B, L, G, N, 0, 0);
        add(s, "dC", SL_DC, PSSM_OUT, act, 1, 4, B, L, G, N, 0, 0);
        if (o & PSSM_O_DSKIP)
            add(s, "dD", SL_DD, PSSM_OUT, f32, 1, per_head ? 1 : 2, H, P, 0, 0, 0, 0);
        if (o & PSSM_O_Z)
            add(s, "dz", SL_DZ, PSSM_OUT, act, 1, 4, B, L, H, P, 0, 0);
        if (o & PSSM_O_DELTA_BIAS)
            add(s, "ddt_bias", SL_DDELTA_BIAS, PSSM_OUT, f32, 1, 1, H, 0, 0, 0, 0, 0);
        if (o & PSSM_O_STATES)
            add(s, "dinitial_states", SL_DINIT, PSSM_OUT, f32, 1, 4, B, H, P, N, 0, 0);
    }
}

/* The norms: B*L rows of D channels in G groups; residual, residual_out and their gradients
 * (PSSM_O_RESIDUAL) in F32 or act; the statistics (rows, G) F32.  fwd+bwd is a training step:
 * the backward reads the forward's residual_out (as its x) and statistics. */
static void norm_tensors(const pssm_opcase *c, pssm_tset *s, int fwd, int bwd)
{
    const portssm_dtype act = c->dtype, f32 = PORTSSM_F32;
    const portssm_dtype wdt = c->opts & PSSM_O_W_F32 ? f32 : act;
    const portssm_dtype rdt = c->opts & PSSM_O_RES_F32 ? f32 : act;
    const int both = fwd + bwd, res = (c->opts & PSSM_O_RESIDUAL) != 0;
    const int ln = !(c->opts & PSSM_O_RMS);
    const int64_t R = c->B * c->L, H = c->D, G = groups(c);
    /* the backward alone: x is the forward's residual_out where it had one */
    add(s, "x", SL_X, PSSM_IN, bwd && !fwd && res ? rdt : act, fwd && bwd && res ? 1 : both, 2,
        R, H, 0, 0, -2, 2);
    if (c->opts & PSSM_O_Z)
        add(s, "z", SL_Z, PSSM_IN, act, both, 2, R, H, 0, 0, -3, 3);
    add(s, "weight", SL_WEIGHT, PSSM_IN, wdt, both, 1, H, 0, 0, 0, -1.5, 1.5);
    if (c->opts & PSSM_O_BIAS)
        add(s, "bias", SL_BIAS, PSSM_IN, wdt, both, 1, H, 0, 0, 0, -1, 1);
    if (fwd) {
        if (res) {
            add(s, "residual", SL_RESIDUAL, PSSM_IN, rdt, 1, 2, R, H, 0, 0, -2, 2);
            add(s, "residual_out", SL_RESIDUAL_OUT, PSSM_OUT, rdt, both, 2, R, H, 0, 0, 0, 0);
        }
        add(s, "out", SL_OUT, PSSM_OUT, act, 1, 2, R, H, 0, 0, 0, 0);
    }
    /* the statistics: the forward's (written once and read back), or inputs of the backward */
    const pssm_role stats = fwd ? PSSM_OUT : PSSM_IN;
    if (ln)
        add(s, "mean", SL_MEAN, stats, f32, both, 2, R, G, 0, 0, -0.5, 0.5);
    add(s, "rstd", SL_RSTD, stats, f32, both, 2, R, G, 0, 0, 0.5, 2);
    if (bwd) {
        add(s, "dout", SL_DOUT, PSSM_IN, act, 1, 2, R, H, 0, 0, -1, 1);
        if (res) {
            add(s, "dresidual_out", SL_DRESIDUAL_OUT, PSSM_IN, rdt, 1, 2, R, H, 0, 0, -1, 1);
            add(s, "dresidual", SL_DRESIDUAL, PSSM_OUT, rdt, 1, 2, R, H, 0, 0, 0, 0);
        }
        add(s, "dx", SL_DX, PSSM_OUT, act, 1, 2, R, H, 0, 0, 0, 0);
        if (c->opts & PSSM_O_Z)
            add(s, "dz", SL_DZ, PSSM_OUT, act, 1, 2, R, H, 0, 0, 0, 0);
        add(s, "dweight", SL_DWEIGHT, PSSM_OUT, wdt, 1, 1, H, 0, 0, 0, 0, 0);
        if (c->opts & PSSM_O_BIAS)
            add(s, "dbias", SL_DBIAS, PSSM_OUT, wdt, 1, 1, H, 0, 0, 0, 0, 0);
    }
}

/* Each row: a few sequences, numbered upwards from a random start, cut at random tokens. */
static void fill_seq_idx(const pssm_tspec *t, void *host, pssm_rng *r)
{
    int64_t B = t->shape[0], L = t->shape[1];
    for (int64_t b = 0; b < B; b++) {
        int32_t v = (int32_t)(pssm_rng_next(r) % 5);
        for (int64_t l = 0; l < L; l++) {
            if (l > 0 && pssm_rng_next(r) % 48 == 0)
                v++;
            pssm_tool_set(PORTSSM_I32, host, b * t->stride[0] + l * t->stride[1], v);
        }
    }
}

/* Distinct rows of a pool of `rows`; one sequence (when there are two or more) gets -1. */
static void fill_indices(const pssm_tspec *t, void *host, int64_t rows, pssm_rng *r)
{
    int64_t B = t->shape[0];
    int32_t perm[4096 + 2];
    if (rows > (int64_t)(sizeof perm / sizeof perm[0]))
        rows = sizeof perm / sizeof perm[0];
    for (int64_t i = 0; i < rows; i++)
        perm[i] = (int32_t)i;
    for (int64_t i = 0; i < rows - 1; i++) {
        int64_t j = i + (int64_t)(pssm_rng_next(r) % (uint64_t)(rows - i));
        int32_t tmp = perm[i];
        perm[i] = perm[j];
        perm[j] = tmp;
    }
    for (int64_t b = 0; b < B; b++)
        pssm_tool_set(PORTSSM_I32, host, b, b < rows ? perm[b] : -1);
    if (B >= 2)
        pssm_tool_set(PORTSSM_I32, host, (int64_t)(pssm_rng_next(r) % (uint64_t)B), -1);
}

int pssm_opcase_build(const pssm_opcase *c, pssm_tset *s, pssm_rng *r)
{
    switch (c->op) {
    case PSSM_OP_CONV1D_FWD: conv_tensors(c, s, 1, 0); break;
    case PSSM_OP_CONV1D_BWD: conv_tensors(c, s, 0, 1); break;
    case PSSM_OP_CONV1D_FWDBWD: conv_tensors(c, s, 1, 1); break;
    case PSSM_OP_CONV1D_UPDATE: conv_update_tensors(c, s); break;
    case PSSM_OP_SCAN_FWD: scan_tensors(c, s, 1, 0); break;
    case PSSM_OP_SCAN_BWD: scan_tensors(c, s, 0, 1); break;
    case PSSM_OP_SCAN_FWDBWD: scan_tensors(c, s, 1, 1); break;
    case PSSM_OP_STATE_UPDATE: state_update_tensors(c, s); break;
    case PSSM_OP_SSD_FWD: ssd_tensors(c, s, 1, 0); break;
    case PSSM_OP_SSD_BWD: ssd_tensors(c, s, 0, 1); break;
    case PSSM_OP_SSD_FWDBWD: ssd_tensors(c, s, 1, 1); break;
    case PSSM_OP_NORM_FWD: norm_tensors(c, s, 1, 0); break;
    case PSSM_OP_NORM_BWD: norm_tensors(c, s, 0, 1); break;
    case PSSM_OP_NORM_FWDBWD: norm_tensors(c, s, 1, 1); break;
    default: return -1;
    }
    if (pssm_tset_fill(s, r) != 0)
        return -1;
    int i = pssm_tset_find(s, SL_SEQ_IDX);
    if (i >= 0)
        fill_seq_idx(&s->t[i], s->host[i], r);
    i = pssm_tset_find(s, SL_INDICES);
    if (i >= 0)
        fill_indices(&s->t[i], s->host[i], pool_rows(c), r);
    return 0;
}

/* ---------------------------------------------------------------- calls */

#define V(slot) pssm_tdev_view(d, s, slot)

static portssm_activation activation(const pssm_opcase *c)
{
    return c->opts & PSSM_O_SILU ? PORTSSM_ACTIVATION_SILU : PORTSSM_ACTIVATION_NONE;
}

static portssm_status conv_fwd(const pssm_opcase *c, const pssm_tset *s, const pssm_tdev *d)
{
    portssm_causal_conv1d_fwd_args a;
    memset(&a, 0, sizeof a);
    a.x = V(SL_X);
    a.weight = V(SL_WEIGHT);
    a.bias = V(SL_BIAS);
    a.seq_idx = V(SL_SEQ_IDX);
    a.initial_states = V(SL_INIT);
    a.final_states = V(SL_FINAL);
    a.out = V(SL_OUT);
    a.activation = activation(c);
    return portssm_causal_conv1d_fwd(d->ctx, &a);
}

static portssm_status conv_bwd(const pssm_opcase *c, const pssm_tset *s, const pssm_tdev *d)
{
    portssm_causal_conv1d_bwd_args a;
    memset(&a, 0, sizeof a);
    a.x = V(SL_X);
    a.weight = V(SL_WEIGHT);
    a.bias = V(SL_BIAS);
    a.seq_idx = V(SL_SEQ_IDX);
    a.initial_states = V(SL_INIT);
    a.dout = V(SL_DOUT);
    a.dfinal_states = V(SL_DFINAL);
    a.dx = V(SL_DX);
    a.dweight = V(SL_DWEIGHT);
    a.dbias = V(SL_DBIAS);
    a.dinitial_states = V(SL_DINIT);
    a.activation = activation(c);
    return portssm_causal_conv1d_bwd(d->ctx, &a);
}

static portssm_status conv_update(const pssm_opcase *c, const pssm_tset *s, const pssm_tdev *d)
{
    portssm_causal_conv1d_update_args a;
    memset(&a, 0, sizeof a);
    a.x = V(SL_X);
    a.conv_state = V(SL_CONV_STATE);
    a.weight = V(SL_WEIGHT);
    a.bias = V(SL_BIAS);
    a.cache_seqlens = V(SL_CACHE_SEQLENS);
    a.conv_state_indices = V(SL_INDICES);
    a.out = V(SL_OUT);
    a.activation = activation(c);
    return portssm_causal_conv1d_update(d->ctx, &a);
}

static portssm_status scan_fwd(const pssm_opcase *c, const pssm_tset *s, const pssm_tdev *d)
{
    portssm_selective_scan_fwd_args a;
    memset(&a, 0, sizeof a);
    a.u = V(SL_U);
    a.delta = V(SL_DELTA);
    a.A = V(SL_A);
    a.B = V(SL_B);
    a.C = V(SL_C);
    a.D = V(SL_DSKIP);
    a.z = V(SL_Z);
    a.delta_bias = V(SL_DELTA_BIAS);
    a.initial_state = V(SL_INIT);
    a.final_state = V(SL_FINAL);
    a.out = V(SL_OUT);
    a.checkpoints = V(SL_CHECKPOINTS);
    a.delta_softplus = (c->opts & PSSM_O_SOFTPLUS) != 0;
    return portssm_selective_scan_fwd(d->ctx, &a);
}

static portssm_status scan_bwd(const pssm_opcase *c, const pssm_tset *s, const pssm_tdev *d)
{
    portssm_selective_scan_bwd_args a;
    memset(&a, 0, sizeof a);
    a.u = V(SL_U);
    a.delta = V(SL_DELTA);
    a.A = V(SL_A);
    a.B = V(SL_B);
    a.C = V(SL_C);
    a.D = V(SL_DSKIP);
    a.z = V(SL_Z);
    a.delta_bias = V(SL_DELTA_BIAS);
    a.initial_state = V(SL_INIT);
    a.dout = V(SL_DOUT);
    a.dfinal_state = V(SL_DFINAL);
    a.du = V(SL_DU);
    a.ddelta = V(SL_DDELTA);
    a.dA = V(SL_DA);
    a.dB = V(SL_DB);
    a.dC = V(SL_DC);
    a.dD = V(SL_DD);
    a.dz = V(SL_DZ);
    a.ddelta_bias = V(SL_DDELTA_BIAS);
    a.dinitial_state = V(SL_DINIT);
    a.checkpoints = V(SL_CHECKPOINTS);
    a.delta_softplus = (c->opts & PSSM_O_SOFTPLUS) != 0;
    return portssm_selective_scan_bwd(d->ctx, &a);
}

static portssm_status state_update(const pssm_opcase *c, const pssm_tset *s, const pssm_tdev *d)
{
    portssm_selective_state_update_args a;
    memset(&a, 0, sizeof a);
    a.state = V(SL_STATE);
    a.x = V(SL_X);
    a.dt = V(SL_DELTA);
    a.A = V(SL_A);
    a.B = V(SL_B);
    a.C = V(SL_C);
    a.D = V(SL_DSKIP);
    a.z = V(SL_Z);
    a.dt_bias = V(SL_DELTA_BIAS);
    a.state_batch_indices = V(SL_INDICES);
    a.out = V(SL_OUT);
    a.dt_softplus = (c->opts & PSSM_O_SOFTPLUS) != 0;
    return portssm_selective_state_update(d->ctx, &a);
}

static portssm_status ssd_fwd(const pssm_opcase *c, const pssm_tset *s, const pssm_tdev *d)
{
    portssm_ssd_chunk_scan_fwd_args a;
    memset(&a, 0, sizeof a);
    a.x = V(SL_U);
    a.dt = V(SL_DELTA);
    a.A = V(SL_A);
    a.B = V(SL_B);
    a.C = V(SL_C);
    a.D = V(SL_DSKIP);
    a.z = V(SL_Z);
    a.dt_bias = V(SL_DELTA_BIAS);
    a.initial_states = V(SL_INIT);
    a.seq_idx = V(SL_SEQ_IDX);
    a.out = V(SL_OUT);
    a.final_states = V(SL_FINAL);
    a.y = V(SL_Y);
    a.checkpoints = V(SL_SSD_CHECKPOINTS);
    a.dt_softplus = (c->opts & PSSM_O_SOFTPLUS) != 0;
    a.chunk_size = 256;
    return portssm_ssd_chunk_scan_fwd(d->ctx, &a);
}

static portssm_status ssd_bwd(const pssm_opcase *c, const pssm_tset *s, const pssm_tdev *d)
{
    portssm_ssd_chunk_scan_bwd_args a;
    memset(&a, 0, sizeof a);
    a.x = V(SL_U);
    a.dt = V(SL_DELTA);
    a.A = V(SL_A);
    a.B = V(SL_B);
    a.C = V(SL_C);
    a.D = V(SL_DSKIP);
    a.z = V(SL_Z);
    a.dt_bias = V(SL_DELTA_BIAS);
    a.initial_states = V(SL_INIT);
    a.seq_idx = V(SL_SEQ_IDX);
    a.dout = V(SL_DOUT);
    a.dfinal_states = V(SL_DFINAL);
    a.y = V(SL_Y);
    a.checkpoints = V(SL_SSD_CHECKPOINTS);
    a.dx = V(SL_DU);
    a.ddt = V(SL_DDELTA);
    a.dA = V(SL_DA);
    a.dB = V(SL_DB);
    a.dC = V(SL_DC);
    a.dD = V(SL_DD);
    a.dz = V(SL_DZ);
    a.ddt_bias = V(SL_DDELTA_BIAS);
    a.dinitial_states = V(SL_DINIT);
    a.dt_softplus = (c->opts & PSSM_O_SOFTPLUS) != 0;
    a.chunk_size = 256;
    return portssm_ssd_chunk_scan_bwd(d->ctx, &a);
}

static int64_t norm_group_size(const pssm_opcase *c)
{
    return groups(c) > 1 ? c->D / groups(c) : 0;
}

static portssm_status norm_fwd(const pssm_opcase *c, const pssm_tset *s, const pssm_tdev *d)
{
    portssm_norm_fwd_args a;
    memset(&a, 0, sizeof a);
    a.x = V(SL_X);
    a.residual = V(SL_RESIDUAL);
    a.z = V(SL_Z);
    a.weight = V(SL_WEIGHT);
    a.bias = V(SL_BIAS);
    a.out = V(SL_OUT);
    a.residual_out = V(SL_RESIDUAL_OUT);
    a.mean = V(SL_MEAN);
    a.rstd = V(SL_RSTD);
    a.kind = c->opts & PSSM_O_RMS ? PORTSSM_NORM_RMS : PORTSSM_NORM_LAYER;
    a.norm_before_gate = (c->opts & PSSM_O_NORM_BEFORE_GATE) != 0;
    a.group_size = norm_group_size(c);
    a.eps = 1e-5f;
    return portssm_norm_fwd(d->ctx, &a);
}

static portssm_status norm_bwd(const pssm_opcase *c, const pssm_tset *s, const pssm_tdev *d)
{
    portssm_norm_bwd_args a;
    memset(&a, 0, sizeof a);
    /* after the forward: its residual_out, where it wrote one, is what it normalised */
    a.x = pssm_tset_find(s, SL_RESIDUAL_OUT) >= 0 ? V(SL_RESIDUAL_OUT) : V(SL_X);
    a.z = V(SL_Z);
    a.weight = V(SL_WEIGHT);
    a.bias = V(SL_BIAS);
    a.mean = V(SL_MEAN);
    a.rstd = V(SL_RSTD);
    a.dout = V(SL_DOUT);
    a.dresidual_out = V(SL_DRESIDUAL_OUT);
    a.dx = V(SL_DX);
    a.dresidual = V(SL_DRESIDUAL);
    a.dz = V(SL_DZ);
    a.dweight = V(SL_DWEIGHT);
    a.dbias = V(SL_DBIAS);
    a.kind = c->opts & PSSM_O_RMS ? PORTSSM_NORM_RMS : PORTSSM_NORM_LAYER;
    a.norm_before_gate = (c->opts & PSSM_O_NORM_BEFORE_GATE) != 0;
    a.group_size = norm_group_size(c);
    return portssm_norm_bwd(d->ctx, &a);
}

portssm_status pssm_opcase_run(const pssm_opcase *c, const pssm_tset *s, const pssm_tdev *d)
{
    portssm_status st;
    switch (c->op) {
    case PSSM_OP_CONV1D_FWD: return conv_fwd(c, s, d);
    case PSSM_OP_CONV1D_BWD: return conv_bwd(c, s, d);
    case PSSM_OP_CONV1D_FWDBWD:
        st = conv_fwd(c, s, d);
        return st == PORTSSM_OK ? conv_bwd(c, s, d) : st;
    case PSSM_OP_CONV1D_UPDATE: return conv_update(c, s, d);
    case PSSM_OP_SCAN_FWD: return scan_fwd(c, s, d);
    case PSSM_OP_SCAN_BWD: return scan_bwd(c, s, d);
    case PSSM_OP_SCAN_FWDBWD:
        st = scan_fwd(c, s, d);
        return st == PORTSSM_OK ? scan_bwd(c, s, d) : st;
    case PSSM_OP_STATE_UPDATE: return state_update(c, s, d);
    case PSSM_OP_SSD_FWD: return ssd_fwd(c, s, d);
    case PSSM_OP_SSD_BWD: return ssd_bwd(c, s, d);
    case PSSM_OP_SSD_FWDBWD:
        st = ssd_fwd(c, s, d);
        return st == PORTSSM_OK ? ssd_bwd(c, s, d) : st;
    case PSSM_OP_NORM_FWD: return norm_fwd(c, s, d);
    case PSSM_OP_NORM_BWD: return norm_bwd(c, s, d);
    case PSSM_OP_NORM_FWDBWD:
        st = norm_fwd(c, s, d);
        return st == PORTSSM_OK ? norm_bwd(c, s, d) : st;
    default: return PORTSSM_ERR_INTERNAL;
    }
}

double pssm_opcase_exps(const pssm_opcase *c)
{
    double per_pass = (double)c->B * (double)c->D * (double)c->L * (double)c->N;
    switch (c->op) {
    case PSSM_OP_SCAN_FWD:
    case PSSM_OP_SCAN_BWD: return per_pass;
    case PSSM_OP_SCAN_FWDBWD: return 2 * per_pass;
    case PSSM_OP_SSD_FWD:
    case PSSM_OP_SSD_BWD: return (double)c->B * (double)c->L * (double)c->H;
    case PSSM_OP_SSD_FWDBWD: return 2.0 * (double)c->B * (double)c->L * (double)c->H;
    default: return 0;
    }
}
