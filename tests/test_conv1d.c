/*
 * test_conv1d.c - causal_conv1d_fwd and causal_conv1d_bwd on the backend under test against the
 * cpu oracle (th_cross_check: layouts, guards, determinism), and on the cpu backend against the
 * definition of DESIGN.md computed here in double (forward) and its finite differences (backward).
 */
#include "harness.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum {
    CO_BIAS = 1 << 0,
    CO_SILU = 1 << 1,
    CO_INIT = 1 << 2,   /* initial_states given                                        */
    CO_FINAL = 1 << 3,  /* fwd: final_states wanted                                    */
    CO_SEQ = 1 << 4,    /* seq_idx given                                               */
    CO_DFINAL = 1 << 5, /* bwd: dfinal_states given                                    */
    CO_DINIT = 1 << 6,  /* bwd: dinitial_states wanted (with or without initial_states) */
    CO_NODB = 1 << 7    /* bwd: bias given but dbias not wanted                        */
};

typedef struct conv_case {
    int bwd;
    portssm_dtype act, wt; /* activations; weight and bias */
    int64_t B, D, L, W;
    unsigned layout;
    unsigned opt;
} conv_case;

/* Slots of both ops (the forward uses the first seven). */
enum { X, WEIGHT, BIAS, SEQ, INIT, OUT, FINAL, DOUT, DFINAL, DX, DWEIGHT, DBIAS, DINIT };

/* The references' conv tolerances where tighter than the design's (f32 3e-4/1e-3, bf16 1e-2). */
static th_tol act_tol(portssm_dtype dt)
{
    th_tol t = th_tol_for(dt);
    th_tol conv = dt == PORTSSM_F32 ? (th_tol){3e-4, 1e-3}
                  : dt == PORTSSM_F16 ? (th_tol){3e-3, 5e-3}
                                      : (th_tol){1e-2, 5e-2};
    t.rtol = fmin(t.rtol, conv.rtol);
    t.atol = fmin(t.atol, conv.atol);
    return t;
}

/* dweight/dbias: 1e-3/1e-3 (reductions over B*L), or the weight dtype's rounding if coarser. */
static th_tol weight_grad_tol(portssm_dtype wt)
{
    th_tol t = {1e-3, 1e-3};
    if (wt != PORTSSM_F32) {
        th_tol a = act_tol(wt);
        t.rtol = fmax(t.rtol, a.rtol);
        t.atol = fmax(t.atol, a.atol);
    }
    return t;
}

/* ---------------------------------------------------------------- inputs */

/* Sorted segment ids per batch row: row 0 has single-token segments (token 0 alone, one in the
 * middle, the last token alone) among random boundaries, row 1 one segment, row 2 many short
 * segments; ids jump by 1..3. */
static void fill_seq_idx(th_tensor *t, th_rng *r)
{
    int64_t B = t->shape[0], L = t->shape[1];
    for (int64_t b = 0; b < B; b++) {
        int64_t v = th_randint(r, 0, 3);
        for (int64_t l = 0; l < L; l++) {
            int boundary = 0;
            if (l > 0) {
                switch (b % 3) {
                case 0:
                    boundary = l == 1 || l == L - 1 || l == L / 2 || l == L / 2 + 1 ||
                               th_uniform(r, 0, 1) < 0.125;
                    break;
                case 1: boundary = 0; break;
                default: boundary = th_uniform(r, 0, 1) < 0.5; break;
                }
            }
            if (boundary)
                v += th_randint(r, 1, 3);
            int64_t idx[2] = {b, l};
            th_set(t, idx, (double)v);
        }
    }
    th_upload(t);
}

static th_tensor *rand_tensor(portssm_dtype dt, int ndim, const int64_t *shape, th_rng *r)
{
    th_tensor *t = th_new(th_oracle, dt, ndim, shape, NULL);
    th_fill_uniform(t, r, -1, 1);
    return t;
}

static th_tensor *out_tensor(portssm_dtype dt, int ndim, const int64_t *shape)
{
    th_tensor *t = th_new(th_oracle, dt, ndim, shape, NULL);
    th_poison(t);
    return t;
}

static void build_inputs(th_bundle *b, const conv_case *c, th_rng *r)
{
    int64_t sx[3] = {c->B, c->D, c->L}, sw[2] = {c->D, c->W}, sb[1] = {c->D};
    int64_t ss[2] = {c->B, c->L}, si[3] = {c->B, c->D, c->W - 1};
    th_tol none = {0, 0};
    th_slot_set(b, X, "x", TH_IN, rand_tensor(c->act, 3, sx, r), none);
    th_slot_set(b, WEIGHT, "weight", TH_IN, rand_tensor(c->wt, 2, sw, r), none);
    th_slot_set(b, BIAS, "bias", TH_IN, (c->opt & CO_BIAS) ? rand_tensor(c->wt, 1, sb, r) : NULL,
                none);
    th_tensor *seq = NULL;
    if (c->opt & CO_SEQ) {
        seq = th_new(th_oracle, PORTSSM_I32, 2, ss, NULL);
        fill_seq_idx(seq, r);
    }
    th_slot_set(b, SEQ, "seq_idx", TH_IN, seq, none);
    th_slot_set(b, INIT, "initial_states", TH_IN,
                (c->opt & CO_INIT) ? rand_tensor(c->act, 3, si, r) : NULL, none);
}

static void build_fwd(th_bundle *b, const void *cas, th_rng *r)
{
    const conv_case *c = cas;
    int64_t sx[3] = {c->B, c->D, c->L}, si[3] = {c->B, c->D, c->W - 1};
    build_inputs(b, c, r);
    th_slot_set(b, OUT, "out", TH_OUT, out_tensor(c->act, 3, sx), act_tol(c->act));
    th_slot_set(b, FINAL, "final_states", TH_OUT,
                (c->opt & CO_FINAL) ? out_tensor(c->act, 3, si) : NULL, act_tol(c->act));
    b->s[FINAL].exact = 1; /* a copy of [initial_states | x]: no arithmetic */
}

static void build_bwd(th_bundle *b, const void *cas, th_rng *r)
{
    const conv_case *c = cas;
    int64_t sx[3] = {c->B, c->D, c->L}, sw[2] = {c->D, c->W}, sb[1] = {c->D};
    int64_t si[3] = {c->B, c->D, c->W - 1};
    th_tol none = {0, 0};
    build_inputs(b, c, r);
    th_slot_set(b, DOUT, "dout", TH_IN, rand_tensor(c->act, 3, sx, r), none);
    th_slot_set(b, DFINAL, "dfinal_states", TH_IN,
                (c->opt & CO_DFINAL) ? rand_tensor(c->act, 3, si, r) : NULL, none);
    th_slot_set(b, DX, "dx", TH_OUT, out_tensor(c->act, 3, sx), act_tol(c->act));
    th_slot_set(b, DWEIGHT, "dweight", TH_OUT, out_tensor(c->wt, 2, sw), weight_grad_tol(c->wt));
    th_slot_set(b, DBIAS, "dbias", TH_OUT,
                ((c->opt & CO_BIAS) && !(c->opt & CO_NODB)) ? out_tensor(c->wt, 1, sb) : NULL,
                weight_grad_tol(c->wt));
    th_slot_set(b, DINIT, "dinitial_states", TH_OUT,
                (c->opt & CO_DINIT) ? out_tensor(c->act, 3, si) : NULL, act_tol(c->act));
}

static portssm_activation activation(const conv_case *c)
{
    return (c->opt & CO_SILU) ? PORTSSM_ACTIVATION_SILU : PORTSSM_ACTIVATION_NONE;
}

static portssm_status run_fwd(portssm_context *ctx, const th_bundle *b, const void *cas)
{
    portssm_causal_conv1d_fwd_args a;
    memset(&a, 0, sizeof a);
    a.x = th_slot_view(b, X);
    a.weight = th_slot_view(b, WEIGHT);
    a.bias = th_slot_view(b, BIAS);
    a.seq_idx = th_slot_view(b, SEQ);
    a.initial_states = th_slot_view(b, INIT);
    a.final_states = th_slot_view(b, FINAL);
    a.out = th_slot_view(b, OUT);
    a.activation = activation(cas);
    return portssm_causal_conv1d_fwd(ctx, &a);
}

static portssm_status run_bwd(portssm_context *ctx, const th_bundle *b, const void *cas)
{
    portssm_causal_conv1d_bwd_args a;
    memset(&a, 0, sizeof a);
    a.x = th_slot_view(b, X);
    a.weight = th_slot_view(b, WEIGHT);
    a.bias = th_slot_view(b, BIAS);
    a.seq_idx = th_slot_view(b, SEQ);
    a.initial_states = th_slot_view(b, INIT);
    a.dout = th_slot_view(b, DOUT);
    a.dfinal_states = th_slot_view(b, DFINAL);
    a.dx = th_slot_view(b, DX);
    a.dweight = th_slot_view(b, DWEIGHT);
    a.dbias = th_slot_view(b, DBIAS);
    a.dinitial_states = th_slot_view(b, DINIT);
    a.activation = activation(cas);
    return portssm_causal_conv1d_bwd(ctx, &a);
}

/* ---------------------------------------------------------------- the definition, in double */

typedef struct conv_ref {
    int64_t B, D, L, W;
    int silu;
    double *x, *w, *bias, *init; /* init: zeros when absent; bias NULL when absent */
    double *seq;                 /* NULL when absent */
    double *dout, *dfinal;       /* the loss's weights (backward only; dfinal may be NULL) */
    double *out, *final;         /* results */
} conv_ref;

static void conv_ref_load(conv_ref *p, const conv_case *c, const th_bundle *in)
{
    memset(p, 0, sizeof *p);
    p->B = c->B, p->D = c->D, p->L = c->L, p->W = c->W;
    p->silu = (c->opt & CO_SILU) != 0;
    p->x = th_values(in->s[X].t);
    p->w = th_values(in->s[WEIGHT].t);
    p->bias = in->s[BIAS].t ? th_values(in->s[BIAS].t) : NULL;
    p->seq = in->s[SEQ].t ? th_values(in->s[SEQ].t) : NULL;
    size_t ni = (size_t)(c->B * c->D * (c->W - 1));
    p->init = in->s[INIT].t ? th_values(in->s[INIT].t) : calloc(ni + 1, sizeof(double));
    p->out = calloc((size_t)(c->B * c->D * c->L), sizeof(double));
    p->final = calloc(ni + 1, sizeof(double));
    assert_true(p->init && p->out && p->final);
}

static void conv_ref_free(conv_ref *p)
{
    free(p->x), free(p->w), free(p->bias), free(p->seq), free(p->init);
    free(p->dout), free(p->dfinal), free(p->out), free(p->final);
}

/* xp[b,d,j] for j in [-(W-1), L): initial_states (or zeros) in front of x. */
static double xp(const conv_ref *p, int64_t b, int64_t d, int64_t j)
{
    return j >= 0 ? p->x[(b * p->D + d) * p->L + j]
                  : p->init[(b * p->D + d) * (p->W - 1) + (p->W - 1) + j];
}

static void conv_ref_fwd(conv_ref *p)
{
    int64_t B = p->B, D = p->D, L = p->L, W = p->W;
    for (int64_t b = 0; b < B; b++)
        for (int64_t d = 0; d < D; d++) {
            for (int64_t t = 0; t < L; t++) {
                double acc = p->bias ? p->bias[d] : 0;
                for (int64_t w = 0; w < W; w++) {
                    int64_t j = t - (W - 1) + w;
                    /* positions before t = 0 belong to the sequence of token 0 */
                    if (p->seq && p->seq[b * L + (j > 0 ? j : 0)] != p->seq[b * L + t])
                        continue;
                    acc += p->w[d * W + w] * xp(p, b, d, j);
                }
                p->out[(b * D + d) * L + t] = p->silu ? acc / (1 + exp(-acc)) : acc;
            }
            for (int64_t k = 0; k < W - 1; k++)
                p->final[(b * D + d) * (W - 1) + k] = xp(p, b, d, L - (W - 1) + k);
        }
}

/* sum(dout * out) + sum(dfinal * final_states) */
static double conv_ref_loss(void *ctx)
{
    conv_ref *p = ctx;
    conv_ref_fwd(p);
    long double s = 0;
    for (int64_t i = 0; i < p->B * p->D * p->L; i++)
        s += (long double)p->dout[i] * p->out[i];
    if (p->dfinal)
        for (int64_t i = 0; i < p->B * p->D * (p->W - 1); i++)
            s += (long double)p->dfinal[i] * p->final[i];
    return (double)s;
}

static void verify_fwd(th_bundle *got, const th_bundle *init, const void *cas)
{
    const conv_case *c = cas;
    if (!th_is_oracle())
        return; /* elsewhere the oracle comparison is the check */
    conv_ref p;
    conv_ref_load(&p, c, init);
    conv_ref_fwd(&p);
    th_assert_close_values(got->s[OUT].t, p.out, th_tol_ref(c->act), "out: cpu vs definition");
    if (got->s[FINAL].t)
        th_assert_close_values(got->s[FINAL].t, p.final, (th_tol){0, 0},
                               "final_states: cpu vs definition (exact copy)");
    conv_ref_free(&p);
}

static void verify_bwd(th_bundle *got, const th_bundle *init, const void *cas)
{
    const conv_case *c = cas;
    if (!th_is_oracle())
        return;
    conv_ref p;
    conv_ref_load(&p, c, init);
    p.dout = th_values(init->s[DOUT].t);
    p.dfinal = init->s[DFINAL].t ? th_values(init->s[DFINAL].t) : NULL;
    th_rng r = th_rng_for(0xfd + (uint64_t)c->L * 131 + (uint64_t)c->W);
    const th_grad_param g[] = {
        {DX, p.x, c->B * c->D * c->L},
        {DWEIGHT, p.w, c->D * c->W},
        {DBIAS, p.bias, c->D},
        {DINIT, p.init, c->B * c->D * (c->W - 1)},
    };
    th_check_grads_fd(got, g, sizeof g / sizeof g[0], conv_ref_loss, &p, &r);
    conv_ref_free(&p);
}

/* ---------------------------------------------------------------- cases */

#include "case_shorthand.h"
#define BI CO_BIAS
#define SI CO_SILU
#define IN CO_INIT
#define FI CO_FINAL
#define SQ CO_SEQ
#define DF CO_DFINAL
#define DI CO_DINIT

/* Scenarios run for every (activation, weight) dtype pair: {B, D, L, W, layout, options}. */
typedef struct scenario {
    int64_t B, D, L, W;
    unsigned layout, opt;
} scenario;

static const scenario fwd_core[] = {
    {2, 5, 37, 4, CF, BI | SI},
    {3, 7, 1007, 3, CL, BI | IN | FI},
    {1, 1, 1, 2, CF, IN | FI | SI},
    {2, 3, 2100, 4, CL, SQ | IN | FI | SI},
    {3, 5, 129, 5, PAD | NEGL, BI | SQ | FI},
};

static const scenario bwd_core[] = {
    {2, 5, 37, 4, CF, BI | SI},
    {3, 7, 1007, 3, CL, BI | IN | DF | DI},
    {1, 1, 1, 2, CF, IN | DF | DI | SI},
    {2, 3, 2100, 4, CL, SQ | IN | DF | DI | SI},
    {3, 5, 129, 5, PAD | NEGL, BI | SQ | DF | DI},
};

static const portssm_dtype dtype_pairs[][2] = {
    {F32, F32}, {F16, F32}, {F16, F16}, {BF16, F32}, {BF16, BF16}};

/* Cases beyond the dtype matrix: {bwd, act, wt, B, D, L, W, layout, options}. */
static const conv_case fwd_more[] = {
    /* widths 1..8, and 12: the design lets a backend refuse W > 8, but every backend here
     * takes widths up to 4096 (the GPU's PSSM_C1_GPU_MAX_WIDTH), so a refusal fails */
    {0, F32, F32, 2, 3, 70, 1, CF, BI | SI},
    {0, F32, F32, 2, 3, 70, 1, CL, 0},
    {0, F32, F32, 2, 3, 70, 2, CL, IN | FI},
    {0, F32, F32, 2, 3, 70, 3, GAP, BI},
    {0, F32, F32, 2, 3, 70, 4, CF, SQ | IN},
    {0, F32, F32, 2, 3, 70, 5, CL | PAD, SI | IN | FI},
    {0, F32, F32, 2, 3, 70, 6, CF, BI | FI},
    {0, F32, F32, 2, 3, 70, 7, CL, SQ | BI | SI},
    {0, F32, F32, 2, 3, 70, 8, CF, IN | FI | BI | SI},
    {0, BF16, F32, 2, 3, 70, 8, CL, SQ | IN | FI},
    {0, F32, F32, 2, 3, 70, 12, CF, BI | IN | FI},
    {0, F16, F16, 2, 3, 70, 12, CL, SQ | SI},
    /* lengths: 1, 2, shorter than the state, not a multiple of any tile, past one tile */
    {0, F32, F32, 3, 5, 1, 4, CL, IN | FI | SQ},
    {0, F32, F32, 2, 3, 2, 4, CF, IN | FI | BI},
    {0, F16, F32, 2, 3, 2, 8, CL, IN | FI | SI},
    {0, F32, F32, 2, 4, 3, 5, CF, SQ | IN | FI},
    {0, F32, F32, 1, 1, 1007, 4, CF, 0},
    {0, F32, F32, 1, 67, 2100, 4, CL | PAD, BI},
    {0, F16, F32, 1, 3, 2049, 4, CF, BI | SI},
    /* widths past the stamped 2..4 (the runtime-width kernels) over long rows */
    {0, F32, F32, 1, 2, 3001, 6, CF, BI | IN | FI},
    {0, F32, F32, 1, 2, 3001, 7, CF, SI},
    {0, BF16, F32, 1, 2, 4099, 8, CF, BI | SI | IN | FI},
    {0, F16, F16, 1, 2, 2500, 5, CF, SQ},
    /* channels: one, and odd counts across a channel tile */
    {0, BF16, F32, 2, 67, 131, 4, CL, SQ | IN | FI | BI | SI},
    {0, F32, F32, 3, 1, 300, 4, CL, IN | FI},
    {0, F32, F32, 2, 129, 65, 3, CF | NEGB, BI},
    /* seq_idx, alone and with initial states, in both layouts */
    {0, F32, F32, 3, 5, 200, 4, CF, SQ},
    {0, F16, F32, 3, 6, 333, 4, CL, SQ | IN | FI},
    {0, F32, F32, 3, 5, 64, 3, CF | NEGL, SQ | IN | FI | SI},
    {0, BF16, BF16, 3, 4, 1007, 2, CL | GAP, SQ | IN | FI | BI},
    {0, F32, F32, 3, 3, 41, 8, CL | NEGB, SQ | IN | FI | BI | SI},
    /* 16-byte vector paths: channel-last with whole vectors of channels (D a multiple of 4 or
     * 8), misaligned batches of aligned rows, misaligned data, x and out not congruent modulo
     * 16 bytes, x and out in different orientations */
    {0, F32, F32, 2, 16, 300, 4, CL, BI | SI | IN | FI | SQ},
    {0, BF16, F32, 2, 24, 200, 4, CL, BI | IN | FI},
    {0, F16, F16, 1, 264, 100, 3, CL, SI | SQ},
    {0, F32, F32, 3, 16, 150, 5, CL | PADB, IN | FI | SQ | BI},
    {0, F16, F32, 3, 3, 64, 4, CF | PADB, IN | FI | BI},
    {0, F32, F32, 2, 3, 100, 4, CF | SHIFT, SI | IN | FI},
    {0, BF16, BF16, 2, 16, 100, 4, CL | SHIFT, BI | SQ},
    {0, F32, F32, 2, 3, 100, 4, CF | SHIFTO, BI},
    {0, F32, F32, 2, 16, 100, 3, CL | XOUT, IN | FI | SQ},
    {0, F16, F32, 2, 16, 100, 3, CF | XOUT, BI | SI},
    /* a slice of a model layer: many channel vectors and time tiles */
    {0, BF16, F32, 2, 256, 1024, 4, CL, BI | SI | IN | FI},
    {0, BF16, F32, 2, 64, 1024, 4, CF, BI | SI | SQ},
};

static const conv_case bwd_more[] = {
    {1, F32, F32, 2, 3, 70, 1, CF, BI | SI},
    {1, F32, F32, 2, 3, 70, 2, CL, IN | DF | DI},
    {1, F32, F32, 2, 3, 70, 2, CF, DI}, /* dinitial_states without initial_states */
    {1, F32, F32, 2, 3, 70, 3, GAP, BI | CO_NODB},
    {1, F32, F32, 2, 3, 70, 4, CF, SQ | IN | DI},
    {1, F32, F32, 2, 3, 70, 5, CL | PAD, SI | IN | DF | DI},
    {1, F32, F32, 2, 3, 70, 6, CF, BI | DF},
    {1, F32, F32, 2, 3, 70, 7, CL, SQ | BI | SI | DI},
    {1, F32, F32, 2, 3, 70, 8, CF, IN | DF | DI | BI | SI},
    {1, BF16, F32, 2, 3, 70, 8, CL, SQ | IN | DF | DI},
    {1, F32, F32, 2, 3, 70, 12, CF, BI | IN | DF | DI},
    {1, F32, F32, 3, 5, 1, 4, CL, IN | DF | DI | SQ},
    {1, F32, F32, 2, 3, 2, 4, CF, IN | DF | DI | BI},
    {1, F16, F32, 2, 3, 2, 8, CL, IN | DF | DI | SI},
    {1, F32, F32, 1, 1, 1007, 4, CF, 0},
    {1, F32, F32, 1, 67, 2100, 4, CL | PAD, BI | DI},
    {1, BF16, F32, 2, 67, 131, 4, CL, SQ | IN | DF | DI | BI | SI},
    {1, F32, F32, 2, 129, 65, 3, CF | NEGB, BI},
    {1, F32, F32, 3, 5, 200, 4, CF, SQ | DI},
    {1, F16, F32, 3, 6, 333, 4, CL, SQ | IN | DF | DI},
    {1, F32, F32, 3, 5, 64, 3, CF | NEGL, SQ | IN | DF | DI | SI},
    {1, BF16, BF16, 3, 4, 1007, 2, CL | GAP, SQ | IN | DF | DI | BI},
    {1, F32, F32, 2, 16, 300, 4, CL, BI | SI | IN | DF | DI | SQ},
    {1, BF16, F32, 2, 24, 200, 4, CL, BI | IN | DF | DI},
    {1, F32, F32, 3, 16, 150, 5, CL | PADB, IN | DF | DI | SQ | BI},
    {1, F32, F32, 2, 3, 100, 4, CF | SHIFT, SI | IN | DF | DI},
    {1, F32, F32, 2, 3, 100, 4, CF | SHIFTO, BI},
    {1, F16, F32, 2, 16, 100, 3, CL | XOUT, IN | DI | SQ | BI | SI},
    {1, BF16, F32, 2, 256, 1024, 4, CL, BI | SI | IN | DF | DI},
    {1, BF16, F32, 2, 64, 1024, 4, CF, BI | SI | SQ},
};

static const conv_case probe_fwd = {0, F32, F32, 1, 2, 8, 4, CF, 0};
static const conv_case probe_bwd = {1, F32, F32, 1, 2, 8, 4, CF, 0};

static const th_op op_fwd = {"causal_conv1d_fwd", build_fwd, run_fwd, verify_fwd, &probe_fwd};
static const th_op op_bwd = {"causal_conv1d_bwd", build_bwd, run_bwd, verify_bwd, &probe_bwd};

/* ---------------------------------------------------------------- registration */

#define MAX_CASES 280
static conv_case cases[MAX_CASES];
static struct CMUnitTest tests[MAX_CASES];
static char names[MAX_CASES][256];
static size_t ncases;

static void run_case(void **state)
{
    const conv_case *c = *state;
    th_cross_check(c->bwd ? &op_bwd : &op_fwd, c, c->layout, th_alt_layout(c->layout),
                   0xc0de0000u + (uint64_t)(c - cases));
}

static void describe(const conv_case *c, char *buf, size_t n)
{
    char lay[96];
    th_layout_name(c->layout, lay, sizeof lay);
    unsigned o = c->opt;
    snprintf(buf, n, "%s %s/w:%s B%lld D%lld L%lld W%lld %s%s%s%s%s%s%s%s%s", c->bwd ? "bwd" : "fwd",
             portssm_dtype_name(c->act), portssm_dtype_name(c->wt), (long long)c->B,
             (long long)c->D, (long long)c->L, (long long)c->W, lay, (o & CO_BIAS) ? " bias" : "",
             (o & CO_SILU) ? " silu" : "", (o & CO_INIT) ? " init" : "",
             (o & CO_FINAL) ? " final" : "", (o & CO_SEQ) ? " seq_idx" : "",
             (o & CO_DFINAL) ? " dfinal" : "", (o & CO_DINIT) ? " dinit" : "",
             (o & CO_NODB) ? " no-dbias" : "");
}

static void add_case(conv_case c)
{
    th_case_room("test_conv1d", ncases, MAX_CASES);
    cases[ncases] = c;
    describe(&c, names[ncases], sizeof names[0]);
    tests[ncases] = (struct CMUnitTest){names[ncases], run_case, NULL, th_teardown, &cases[ncases]};
    ncases++;
}

/* The backward's fused vector kernels (no seq_idx; the stamped widths 2..4, the generic path for
 * the others): widths 1..8, both orientations, each dtype, several work items per row (cf: L
 * past 2 tiles of a warp's vectors on the sim; cl: segments of 16 steps there), misaligned rows,
 * options alternating with the width. */
static void add_bwd_vector_matrix(void)
{
    static const unsigned layouts[] = {CF, CL, CF | SHIFT};
    for (size_t p = 0; p < sizeof dtype_pairs / sizeof dtype_pairs[0]; p++)
        for (int64_t W = 1; W <= 8; W++)
            for (size_t l = 0; l < sizeof layouts / sizeof layouts[0]; l++) {
                if (layouts[l] == (CF | SHIFT) && W % 3 != 1)
                    continue;
                const unsigned opt = W % 2 ? BI | SI | IN | DF | DI : SI | DF | (W > 1 ? DI : 0);
                const int cl = layouts[l] == CL;
                conv_case c = {1, dtype_pairs[p][0], dtype_pairs[p][1], 2, cl ? 16 : 4,
                               cl ? 131 : 1100, W, layouts[l], W > 1 ? opt : BI | SI};
                add_case(c);
            }
}

/* The forward's vector kernels: each stamped width (2..4) in both orientations and every dtype
 * pair, with rows long enough for several tiles (cf) and channels for whole vectors (cl). */
static void add_fwd_vector_matrix(void)
{
    static const unsigned layouts[] = {CF, CL};
    for (size_t p = 0; p < sizeof dtype_pairs / sizeof dtype_pairs[0]; p++)
        for (int64_t W = 2; W <= 4; W++)
            for (size_t l = 0; l < sizeof layouts / sizeof layouts[0]; l++) {
                const int cl = layouts[l] == CL;
                const unsigned opt = W % 2 ? BI | SI | IN | FI : SI | FI;
                conv_case c = {0, dtype_pairs[p][0], dtype_pairs[p][1], 2, cl ? 16 : 4,
                               cl ? 131 : 1100, W, layouts[l], opt};
                add_case(c);
            }
}

static void add_matrix(int bwd, const scenario *sc, size_t n)
{
    for (size_t p = 0; p < sizeof dtype_pairs / sizeof dtype_pairs[0]; p++)
        for (size_t i = 0; i < n; i++) {
            conv_case c = {bwd, dtype_pairs[p][0], dtype_pairs[p][1], sc[i].B, sc[i].D, sc[i].L,
                           sc[i].W, sc[i].layout, sc[i].opt};
            add_case(c);
        }
}

/* A width past what the GPU kernels take (weight broadcast along W: stride 0, so it costs no
 * memory): the GPU backends must refuse it with UNSUPPORTED and write nothing, never truncate W;
 * the cpu oracle computes it (every tap sees weight 1: out = bias + sum of the x seen so far). */
static void huge_width(void **state)
{
    (void)state;
    const int64_t W = 5000, L = 9;
    th_rng r = th_rng_for(0x71de);
    th_tensor *x = th_new(th_ctx, PORTSSM_F32, 3, (const int64_t[]){1, 2, L}, NULL);
    th_fill_uniform(x, &r, -1, 1);
    th_tensor *w1 = th_new(th_ctx, PORTSSM_F32, 2, (const int64_t[]){2, 1}, NULL);
    th_fill_uniform(w1, &r, 1, 1);
    th_tensor *out = th_new(th_ctx, PORTSSM_F32, 3, (const int64_t[]){1, 2, L}, NULL);
    th_poison(out);
    portssm_causal_conv1d_fwd_args a;
    memset(&a, 0, sizeof a);
    a.x = th_view(x);
    a.weight = th_view(w1);
    a.weight.shape[1] = W;
    a.weight.stride[1] = 0;
    a.out = th_view(out);
    th_snapshot before = th_snap(out);
    portssm_status s = portssm_causal_conv1d_fwd(th_ctx, &a);
    if (!th_is_oracle()) {
        assert_int_equal(s, PORTSSM_ERR_UNSUPPORTED);
        assert_non_null(strstr(portssm_last_error(th_ctx), "W = 5000"));
        assert_true(th_unchanged(out, &before));
        return;
    }
    free(before.data);
    assert_int_equal(s, PORTSSM_OK);
    th_download(out);
    for (int64_t d = 0; d < 2; d++) {
        double acc = 0;
        for (int64_t t = 0; t < L; t++) {
            const int64_t i[3] = {0, d, t};
            acc += th_get(x, i);
            assert_true(fabs(th_get(out, i) - acc) <= 1e-5);
        }
    }
}

int main(int argc, char **argv)
{
    tests[ncases++] = (struct CMUnitTest){"huge_width", huge_width, NULL, th_teardown, NULL};
    add_matrix(0, fwd_core, sizeof fwd_core / sizeof fwd_core[0]);
    for (size_t i = 0; i < sizeof fwd_more / sizeof fwd_more[0]; i++)
        add_case(fwd_more[i]);
    add_matrix(1, bwd_core, sizeof bwd_core / sizeof bwd_core[0]);
    for (size_t i = 0; i < sizeof bwd_more / sizeof bwd_more[0]; i++)
        add_case(bwd_more[i]);
    add_bwd_vector_matrix();
    add_fwd_vector_matrix();
    return th_main(argc, argv, "test_conv1d", tests, ncases);
}
