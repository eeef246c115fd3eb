/*
 * test_norm.c - norm_fwd and norm_bwd (LayerNorm / RMSNorm with residual add, gate and groups)
 * on the backend under test against the cpu oracle (th_cross_check: layouts, guards,
 * determinism), and on the cpu backend against the definition of portssm.h computed here in
 * double (forward) and its finite differences (backward).
 */
#include "harness.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum {
    NO_RMS = 1 << 0,     /* RMSNorm (else LayerNorm)                                        */
    NO_BIAS = 1 << 1,    /* bias given                                                      */
    NO_RES = 1 << 2,     /* fwd: residual given; bwd: x is a residual_out (in rdt)          */
    NO_RESOUT = 1 << 3,  /* fwd: residual_out wanted                                        */
    NO_Z = 1 << 4,       /* z given                                                         */
    NO_NBG = 1 << 5,     /* norm_before_gate                                                */
    NO_STATS = 1 << 6,   /* fwd: mean (LayerNorm) and rstd wanted                           */
    NO_DRESOUT = 1 << 7, /* bwd: dresidual_out given                                        */
    NO_DRES = 1 << 8,    /* bwd: dresidual wanted                                           */
    NO_DZ = 1 << 9,      /* bwd: dz wanted (with z)                                         */
    NO_DW = 1 << 10,     /* bwd: dweight wanted (and dbias with bias)                       */
    NO_EPS0 = 1 << 11,   /* eps = 0 (else 1e-5)                                             */
    NO_YOUT = 1 << 12    /* bwd: the forward's out wanted again                             */
};

typedef struct norm_case {
    int bwd;
    portssm_dtype act, wt, rdt; /* activations; weight and bias; the residual path */
    int64_t R, H, group;        /* group: group_size (0: one group)                */
    unsigned layout;
    unsigned opt;
} norm_case;

enum { X, RES, Z, WEIGHT, BIAS, OUT, RESOUT, MEAN, RSTD, DOUT, DRESOUT, DX, DRES, DZ, DW, DB, YOUT };

static int64_t groups_of(const norm_case *c) { return c->group > 0 ? c->H / c->group : 1; }
static float eps_of(const norm_case *c) { return (c->opt & NO_EPS0) ? 0.0f : 1e-5f; }
static portssm_norm_kind kind_of(const norm_case *c)
{
    return (c->opt & NO_RMS) ? PORTSSM_NORM_RMS : PORTSSM_NORM_LAYER;
}

/* Sums over rows: 1e-3/1e-3 in f32, or the weight dtype's rounding if coarser (as the conv's). */
static th_tol weight_grad_tol(portssm_dtype wt)
{
    th_tol t = {1e-3, 1e-3}, a = th_tol_for(wt);
    if (wt != PORTSSM_F32) {
        t.rtol = fmax(t.rtol, a.rtol);
        t.atol = fmax(t.atol, a.atol);
    }
    return t;
}

/* The statistics: f32, relative to values up to 1/sqrt(eps) for a constant group. */
static th_tol stats_tol(void) { return (th_tol){1e-4, 1e-5}; }

/* ---------------------------------------------------------------- the calls */

static portssm_status run_fwd(portssm_context *ctx, const th_bundle *b, const void *cas)
{
    const norm_case *c = cas;
    portssm_norm_fwd_args a;
    memset(&a, 0, sizeof a);
    a.x = th_slot_view(b, X);
    a.residual = th_slot_view(b, RES);
    a.z = th_slot_view(b, Z);
    a.weight = th_slot_view(b, WEIGHT);
    a.bias = th_slot_view(b, BIAS);
    a.out = th_slot_view(b, OUT);
    a.residual_out = th_slot_view(b, RESOUT);
    a.mean = th_slot_view(b, MEAN);
    a.rstd = th_slot_view(b, RSTD);
    a.kind = kind_of(c);
    a.norm_before_gate = (c->opt & NO_NBG) != 0;
    a.group_size = c->group;
    a.eps = eps_of(c);
    return portssm_norm_fwd(ctx, &a);
}

static portssm_status run_bwd(portssm_context *ctx, const th_bundle *b, const void *cas)
{
    const norm_case *c = cas;
    portssm_norm_bwd_args a;
    memset(&a, 0, sizeof a);
    a.x = th_slot_view(b, X);
    a.z = th_slot_view(b, Z);
    a.weight = th_slot_view(b, WEIGHT);
    a.bias = th_slot_view(b, BIAS);
    a.mean = th_slot_view(b, MEAN);
    a.rstd = th_slot_view(b, RSTD);
    a.dout = th_slot_view(b, DOUT);
    a.dresidual_out = th_slot_view(b, DRESOUT);
    a.dx = th_slot_view(b, DX);
    a.dresidual = th_slot_view(b, DRES);
    a.dz = th_slot_view(b, DZ);
    a.dweight = th_slot_view(b, DW);
    a.dbias = th_slot_view(b, DB);
    a.out = th_slot_view(b, YOUT);
    a.kind = kind_of(c);
    a.norm_before_gate = (c->opt & NO_NBG) != 0;
    a.group_size = c->group;
    return portssm_norm_bwd(ctx, &a);
}

/* ---------------------------------------------------------------- inputs */

static void build_common(th_bundle *b, const norm_case *c, th_rng *r, portssm_dtype xdt)
{
    const int64_t rh[2] = {c->R, c->H}, h[1] = {c->H};
    const th_tol none = {0, 0};
    th_slot_set(b, X, "x", TH_IN, th_oracle_in(xdt, 2, rh, NULL, r, -2, 2), none);
    th_slot_set(b, Z, "z", TH_IN, (c->opt & NO_Z) ? th_oracle_in(c->act, 2, rh, NULL, r, -3, 3)
                                                    : NULL,
                none);
    th_slot_set(b, WEIGHT, "weight", TH_IN, th_oracle_in(c->wt, 1, h, NULL, r, -1.5, 1.5), none);
    th_slot_set(b, BIAS, "bias", TH_IN,
                (c->opt & NO_BIAS) ? th_oracle_in(c->wt, 1, h, NULL, r, -1, 1) : NULL, none);
}

static void build_fwd(th_bundle *b, const void *cas, th_rng *r)
{
    const norm_case *c = cas;
    const int64_t rh[2] = {c->R, c->H}, rg[2] = {c->R, groups_of(c)};
    const th_tol none = {0, 0}, act = th_tol_for(c->act), res = th_tol_for(c->rdt);
    build_common(b, c, r, c->act);
    th_slot_set(b, RES, "residual", TH_IN,
                (c->opt & NO_RES) ? th_oracle_in(c->rdt, 2, rh, NULL, r, -2, 2) : NULL, none);
    th_slot_set(b, OUT, "out", TH_OUT, th_oracle_out(c->act, 2, rh), act);
    th_slot_set(b, RESOUT, "residual_out", TH_OUT,
                (c->opt & NO_RESOUT) ? th_oracle_out(c->rdt, 2, rh) : NULL, res);
    const int stats = (c->opt & NO_STATS) != 0;
    th_slot_set(b, MEAN, "mean", TH_OUT,
                stats && !(c->opt & NO_RMS) ? th_oracle_out(PORTSSM_F32, 2, rg) : NULL,
                stats_tol());
    th_slot_set(b, RSTD, "rstd", TH_OUT, stats ? th_oracle_out(PORTSSM_F32, 2, rg) : NULL,
                stats_tol());
}

/* The backward's inputs: x (a residual_out in rdt when NO_RES), and the statistics the forward
 * gives for it, computed here by the oracle. */
static void build_bwd(th_bundle *b, const void *cas, th_rng *r)
{
    const norm_case *c = cas;
    const int64_t rh[2] = {c->R, c->H}, h[1] = {c->H}, rg[2] = {c->R, groups_of(c)};
    const th_tol none = {0, 0}, act = th_tol_for(c->act), wg = weight_grad_tol(c->wt);
    build_common(b, c, r, (c->opt & NO_RES) ? c->rdt : c->act);
    const int ln = !(c->opt & NO_RMS);
    th_tensor *mean = ln ? th_oracle_out(PORTSSM_F32, 2, rg) : NULL;
    th_tensor *rstd = th_oracle_out(PORTSSM_F32, 2, rg);
    th_tensor *out = th_oracle_out(c->act, 2, rh); /* not used beyond the call */
    portssm_norm_fwd_args f;
    memset(&f, 0, sizeof f);
    f.x = th_slot_view(b, X);
    f.z = th_slot_view(b, Z);
    f.weight = th_slot_view(b, WEIGHT);
    f.bias = th_slot_view(b, BIAS);
    f.mean = th_view_opt(mean);
    f.rstd = th_view(rstd);
    f.out = th_view(out);
    f.kind = kind_of(c);
    f.norm_before_gate = (c->opt & NO_NBG) != 0;
    f.group_size = c->group;
    f.eps = eps_of(c);
    if (c->opt & NO_RES) {
        /* x in rdt (a residual_out): the forward of x = 0 plus it as the residual, s exactly */
        th_tensor *zero = th_new(th_oracle, c->act, 2, rh, NULL);
        for (int64_t i = 0; i < th_numel(zero); i++) {
            int64_t idx[2];
            th_unravel(zero, i, idx);
            th_set(zero, idx, 0.0);
        }
        th_upload(zero);
        f.x = th_view(zero);
        f.residual = th_slot_view(b, X);
    }
    portssm_status s = portssm_norm_fwd(th_oracle, &f);
    if (s != PORTSSM_OK)
        fail_msg("norm_fwd on the oracle for the backward's statistics: %s",
                 portssm_last_error(th_oracle));
    th_download(rstd);
    if (mean)
        th_download(mean);
    th_slot_set(b, MEAN, "mean", TH_IN, mean, none);
    th_slot_set(b, RSTD, "rstd", TH_IN, rstd, none);
    th_slot_set(b, DOUT, "dout", TH_IN, th_oracle_in(c->act, 2, rh, NULL, r, -1, 1), none);
    th_slot_set(b, DRESOUT, "dresidual_out", TH_IN,
                (c->opt & NO_DRESOUT) ? th_oracle_in(c->rdt, 2, rh, NULL, r, -1, 1) : NULL, none);
    th_slot_set(b, DX, "dx", TH_OUT, th_oracle_out(c->act, 2, rh), act);
    th_slot_set(b, DRES, "dresidual", TH_OUT,
                (c->opt & NO_DRES) ? th_oracle_out(c->rdt, 2, rh) : NULL, th_tol_for(c->rdt));
    th_slot_set(b, DZ, "dz", TH_OUT,
                (c->opt & NO_DZ) && (c->opt & NO_Z) ? th_oracle_out(c->act, 2, rh) : NULL, act);
    th_slot_set(b, DW, "dweight", TH_OUT, (c->opt & NO_DW) ? th_oracle_out(c->wt, 1, h) : NULL,
                wg);
    th_slot_set(b, DB, "dbias", TH_OUT,
                (c->opt & NO_DW) && (c->opt & NO_BIAS) ? th_oracle_out(c->wt, 1, h) : NULL, wg);
    th_slot_set(b, YOUT, "out", TH_OUT, (c->opt & NO_YOUT) ? th_oracle_out(c->act, 2, rh) : NULL,
                act);
}

/* ---------------------------------------------------------------- the definition, in double */

typedef struct norm_ref {
    int64_t R, H, G;
    int rms, gate_first, gate_after;
    double eps;
    double *x, *res, *z, *w, *b; /* res, z, b NULL when absent */
    double *dout, *dresout;      /* the loss's weights (backward); dresout may be NULL */
    double *out, *resout, *mean, *rstd;
} norm_ref;

static double *values_or_null(const th_tensor *t) { return t ? th_values(t) : NULL; }

static void norm_ref_load(norm_ref *p, const norm_case *c, const th_bundle *in)
{
    memset(p, 0, sizeof *p);
    p->R = c->R, p->H = c->H, p->G = groups_of(c);
    p->rms = (c->opt & NO_RMS) != 0;
    p->gate_first = (c->opt & NO_Z) && !(c->opt & NO_NBG);
    p->gate_after = (c->opt & NO_Z) && (c->opt & NO_NBG);
    p->eps = (double)eps_of(c);
    p->x = th_values(in->s[X].t);
    p->res = c->bwd ? NULL : values_or_null(in->s[RES].t);
    p->z = values_or_null(in->s[Z].t);
    p->w = th_values(in->s[WEIGHT].t);
    p->b = values_or_null(in->s[BIAS].t);
    const size_t rh = (size_t)(c->R * c->H), rg = (size_t)(c->R * p->G);
    p->out = calloc(rh, sizeof(double));
    p->resout = calloc(rh, sizeof(double));
    p->mean = calloc(rg, sizeof(double));
    p->rstd = calloc(rg, sizeof(double));
    assert_true(p->out && p->resout && p->mean && p->rstd);
}

static void norm_ref_free(norm_ref *p)
{
    free(p->x), free(p->res), free(p->z), free(p->w), free(p->b), free(p->dout);
    free(p->dresout), free(p->out), free(p->resout), free(p->mean), free(p->rstd);
}

static double silu(double v) { return v / (1.0 + exp(-v)); }

/* portssm.h's definition, row by row, group by group, a buffer of v per group. */
static void norm_ref_fwd(norm_ref *p)
{
    const int64_t n = p->H / p->G;
    double *v = malloc((size_t)n * sizeof(double));
    assert_non_null(v);
    for (int64_t r = 0; r < p->R; r++)
        for (int64_t g = 0; g < p->G; g++) {
            double sum = 0, sq = 0;
            for (int64_t k = 0; k < n; k++) {
                const int64_t i = r * p->H + g * n + k;
                const double s = p->x[i] + (p->res ? p->res[i] : 0.0);
                p->resout[i] = s;
                v[k] = p->gate_first ? s * silu(p->z[i]) : s;
                sum += v[k];
            }
            const double mu = p->rms ? 0.0 : sum / (double)n;
            for (int64_t k = 0; k < n; k++)
                sq += (v[k] - mu) * (v[k] - mu);
            const double rs = 1.0 / sqrt(sq / (double)n + p->eps);
            p->mean[r * p->G + g] = mu;
            p->rstd[r * p->G + g] = rs;
            for (int64_t k = 0; k < n; k++) {
                const int64_t c = g * n + k, i = r * p->H + c;
                double y = (v[k] - mu) * rs * p->w[c] + (p->b ? p->b[c] : 0.0);
                p->out[i] = p->gate_after ? y * silu(p->z[i]) : y;
            }
        }
    free(v);
}

/* sum(dout * out) + sum(dresidual_out * residual_out) */
static double norm_ref_loss(void *ctx)
{
    norm_ref *p = ctx;
    norm_ref_fwd(p);
    long double s = 0;
    for (int64_t i = 0; i < p->R * p->H; i++) {
        s += (long double)p->dout[i] * p->out[i];
        if (p->dresout)
            s += (long double)p->dresout[i] * p->resout[i];
    }
    return (double)s;
}

static void verify_fwd(th_bundle *got, const th_bundle *init, const void *cas)
{
    const norm_case *c = cas;
    if (!th_is_oracle())
        return; /* elsewhere the oracle comparison is the check */
    norm_ref p;
    norm_ref_load(&p, c, init);
    norm_ref_fwd(&p);
    th_assert_close_values(got->s[OUT].t, p.out, th_tol_ref(c->act), "out: cpu vs definition");
    if (got->s[RESOUT].t)
        th_assert_close_values(got->s[RESOUT].t, p.resout, th_tol_ref(c->rdt),
                               "residual_out: cpu vs definition");
    if (got->s[MEAN].t)
        th_assert_close_values(got->s[MEAN].t, p.mean, th_tol_ref(PORTSSM_F32),
                               "mean: cpu vs definition");
    if (got->s[RSTD].t)
        th_assert_close_values(got->s[RSTD].t, p.rstd, th_tol_ref(PORTSSM_F32),
                               "rstd: cpu vs definition");
    norm_ref_free(&p);
}

static void verify_bwd(th_bundle *got, const th_bundle *init, const void *cas)
{
    const norm_case *c = cas;
    if (!th_is_oracle())
        return;
    norm_ref p;
    norm_ref_load(&p, c, init);
    p.dout = th_values(init->s[DOUT].t);
    p.dresout = values_or_null(init->s[DRESOUT].t);
    if (got->s[YOUT].t) { /* x is s: the forward of it alone gives the same out */
        norm_ref_fwd(&p);
        th_assert_close_values(got->s[YOUT].t, p.out, th_tol_ref(c->act),
                               "out (the forward's, again): cpu vs definition");
    }
    th_rng r = th_rng_for(0xfd + (uint64_t)c->R * 131 + (uint64_t)c->H);
    const th_grad_param g[] = {
        {DX, p.x, c->R * c->H},   {DRES, p.x, c->R * c->H}, {DZ, p.z, c->R * c->H},
        {DW, p.w, c->H},          {DB, p.b, c->H},
    };
    th_check_grads_fd(got, g, sizeof g / sizeof g[0], norm_ref_loss, &p, &r);
    norm_ref_free(&p);
}

/* ---------------------------------------------------------------- cases */

#include "case_shorthand.h"
#define RMS NO_RMS
#define BI NO_BIAS
#define RS NO_RES
#define RO NO_RESOUT
#define ZG NO_Z
#define NB NO_NBG
#define ST NO_STATS
#define DRO NO_DRESOUT
#define DR NO_DRES
#define DZ_ NO_DZ
#define DWB NO_DW

/* Shapes and options run for every dtype combination: {R, H, group, layout, fwd opts, bwd opts}. */
typedef struct scenario {
    int64_t R, H, group;
    unsigned layout, fopt, bopt;
} scenario;

static const scenario core[] = {
    /* Mamba-1 blocks: prenorm RMSNorm / LayerNorm with a residual */
    {5, 64, 0, CF, RMS | RS | RO | ST, RMS | RS | DRO | DR | DWB},
    {3, 72, 0, CF, BI | RS | RO | ST, BI | RS | DRO | DR | DWB},
    /* Mamba-2's gated RMSNorm: groups, the gate before the norm */
    {4, 48, 16, CF, RMS | ZG | ST, RMS | ZG | DZ_ | DWB | NO_YOUT},
    /* the gate after the norm, LayerNorm, bias */
    {3, 40, 8, CF, BI | ZG | NB | ST, BI | ZG | NB | DZ_ | DWB | NO_YOUT},
    /* the gate after the norm without a bias: the vector path's gated form (norm_params.h) */
    {3, 32, 8, CF, RMS | ZG | NB | ST, RMS | ZG | NB | DZ_ | DWB | NO_YOUT},
    /* edge shapes: one row, one channel, odd H, H past a vector but not a multiple of it */
    {1, 1, 0, CF, BI | ST, BI | DWB},
    {1, 1, 0, CF, RMS | RS | RO | ST, RMS | RS | DRO | DR | DWB},
    {2, 13, 0, CF, BI | ZG | RS | RO | ST, BI | ZG | DZ_ | RS | DRO | DR | DWB | NO_YOUT},
    {7, 9, 3, PAD, RMS | ZG | NB | ST, RMS | ZG | NB | DZ_ | DWB},
    /* strided and reversed rows, transposed (hidden strided) */
    {6, 24, 0, PAD | NEGB, BI | RS | RO | ST, BI | RS | DRO | DR | DWB},
    {5, 20, 4, CL, RMS | ZG | BI | ST, RMS | ZG | BI | DZ_ | DWB | NO_YOUT},
    {4, 33, 11, NEGL | GAP, ZG | NB | RS | RO | ST, ZG | NB | DZ_ | RS | DR | DWB},
};

/* (act, weight, residual path) */
static const portssm_dtype dtype_sets[][3] = {
    {F32, F32, F32}, {F16, F32, F32}, {F16, F16, F16}, {BF16, F32, F32}, {BF16, BF16, BF16},
    {BF16, BF16, F32}, {F16, F16, F32},
};

/* Cases beyond the dtype matrix: {bwd, act, wt, rdt, R, H, group, layout, options}. */
static const norm_case more[] = {
    /* the options one at a time (defaults: no bias, no residual, no gate, no statistics) */
    {0, F32, F32, F32, 3, 10, 0, CF, 0},
    {0, F32, F32, F32, 3, 10, 0, CF, RMS},
    {0, BF16, F32, F32, 3, 10, 0, CF, RO},          /* residual_in_fp32 without a residual */
    {0, BF16, BF16, BF16, 3, 10, 0, CF, RO},        /* residual_out = x in its dtype */
    {0, F16, F32, F16, 3, 10, 0, CF, RS},           /* a residual without residual_out */
    {0, BF16, F32, F32, 3, 10, 0, CF, RMS | RS | RO | NO_EPS0 | ST},
    {1, F32, F32, F32, 3, 10, 0, CF, 0},            /* dx alone */
    {1, F32, F32, F32, 3, 10, 0, CF, RMS | DR},
    {1, BF16, F32, F32, 3, 10, 0, CF, RMS | RS | DRO},
    {1, F16, F32, F32, 3, 10, 0, CF, ZG | DWB},     /* z without dz */
    {1, BF16, F32, F32, 3, 10, 0, CF, BI},          /* bias without dbias */
    /* groups: one group of H, groups of one channel, of H/2 */
    {0, F32, F32, F32, 2, 12, 12, CF, RMS | ZG | ST},
    {0, F32, F32, F32, 2, 12, 1, CF, RMS | ZG | NB | ST},
    {0, BF16, F32, F32, 2, 12, 6, CF, BI | ZG | ST},
    /* (groups of one channel have an ill-conditioned backward in f32: 1 - vhat^2 cancels) */
    {1, F32, F32, F32, 2, 12, 2, CF, RMS | ZG | NB | DZ_ | DWB},
    {1, BF16, F32, F32, 2, 12, 6, CF, BI | ZG | DZ_ | DWB},
    /* model-sized rows: a vector path per row, several blocks of rows for the sums */
    {0, BF16, F32, F32, 37, 2560, 0, CF, RMS | RS | RO | ST},
    {0, BF16, BF16, BF16, 9, 2560, 0, CF, BI | RS | RO | ST},
    {1, BF16, F32, F32, 37, 2560, 0, CF, RMS | RS | DRO | DR | DWB | NO_YOUT},
    {1, BF16, BF16, BF16, 9, 2560, 0, CF, BI | RS | DRO | DWB},
    {0, BF16, F32, BF16, 16, 1536, 192, CF, RMS | ZG | ST},
    {1, BF16, F32, BF16, 16, 1536, 192, CF, RMS | ZG | DZ_ | DWB | NO_YOUT},
    /* Mamba-2 1.4B in transformers: one group of 4096 bf16 channels, gate before / after */
    {0, BF16, BF16, BF16, 5, 4096, 4096, CF, RMS | ZG | ST},
    {1, BF16, BF16, BF16, 5, 4096, 4096, CF, RMS | ZG | DZ_ | DWB | NO_YOUT},
    {0, BF16, F32, BF16, 5, 4096, 4096, CF, RMS | ZG | NB | ST},
    {1, BF16, F32, BF16, 5, 4096, 4096, CF, RMS | ZG | NB | DZ_ | DWB | NO_YOUT},
    {0, F32, F32, F32, 3, 4096, 4096, CF, RMS | ZG | ST},
    {1, F32, F32, F32, 3, 4096, 4096, CF, RMS | ZG | DZ_ | DWB | NO_YOUT},
    {0, F32, F32, F32, 5, 1000, 0, CF, BI | ZG | NB | RS | RO | ST},
    {1, F32, F32, F32, 5, 1000, 0, CF, BI | ZG | NB | DZ_ | RS | DRO | DR | DWB | NO_YOUT},
    /* teams longer than a warp, several a block (threads of a team = its vectors / NV: 40 for
     * groups of 640 bf16 channels, 36 for 288 f32; 96 for 1536 bf16, over 1.5 warps of 64) */
    {0, BF16, F32, BF16, 6, 5120, 640, CF, RMS | ZG | ST},
    {1, BF16, F32, BF16, 6, 5120, 640, CF, RMS | ZG | DZ_ | DWB | NO_YOUT},
    {0, F32, F32, F32, 5, 288, 0, CF, BI | RS | RO | ST},
    {1, F32, F32, F32, 5, 288, 0, CF, BI | RS | DRO | DR | DWB},
    {0, BF16, BF16, BF16, 7, 1536, 0, CF, RMS | RS | RO | ST},
    {1, BF16, BF16, BF16, 7, 1536, 0, CF, RMS | RS | DRO | DR | DWB},
    /* many rows of a short group: dweight / dbias sum many units' partials (the reduce
     * kernel's split path, k in slices) */
    {1, F32, F32, F32, 200, 64, 0, CF, BI | RS | DRO | DR | DWB},
    {1, BF16, F32, F32, 150, 96, 32, CF, RMS | ZG | DZ_ | DWB},
    /* rows longer than a block's registers hold (the re-reading path) */
    {0, F32, F32, F32, 3, 9000, 0, CF, BI | RS | RO | ST},
    {1, F32, F32, F32, 3, 9000, 0, CF, BI | RS | DRO | DR | DWB},
    {0, BF16, F32, F32, 2, 17000, 0, CF, RMS | ZG | ST},
    {1, BF16, F32, F32, 2, 17000, 0, CF, RMS | ZG | DZ_ | DWB | NO_YOUT},
    /* misaligned data, rows not congruent, padded batches of aligned rows */
    {0, BF16, F32, F32, 4, 80, 0, SHIFT, RMS | RS | RO | ST},
    {1, BF16, F32, F32, 4, 80, 0, SHIFT, RMS | RS | DRO | DR | DWB},
    {0, F16, F16, F16, 4, 80, 0, SHIFTO, BI | ZG | ST},
    {1, F16, F16, F16, 4, 80, 0, SHIFTO, BI | ZG | DZ_ | DWB | NO_YOUT},
    {0, F32, F32, F32, 4, 64, 0, PADB, RMS | RS | RO | ST},
    {1, F32, F32, F32, 4, 64, 0, PADB, RMS | RS | DRO | DR | DWB},
    {0, BF16, BF16, F32, 3, 64, 16, XOUT, RMS | ZG | RS | RO | ST},
    {1, BF16, BF16, F32, 3, 64, 16, XOUT, RMS | ZG | DZ_ | RS | DRO | DR | DWB},
};

static const norm_case probe_fwd = {0, F32, F32, F32, 1, 4, 0, CF, 0};
static const norm_case probe_bwd = {1, F32, F32, F32, 1, 4, 0, CF, 0};

static const th_op op_fwd = {"norm_fwd", build_fwd, run_fwd, verify_fwd, &probe_fwd};
static const th_op op_bwd = {"norm_bwd", build_bwd, run_bwd, verify_bwd, &probe_bwd};

/* ---------------------------------------------------------------- registration */

#define MAX_CASES 256
static norm_case cases[MAX_CASES];
static struct CMUnitTest tests[MAX_CASES];
static char names[MAX_CASES][256];
static size_t ncases;

static void run_case(void **state)
{
    const norm_case *c = *state;
    th_cross_check(c->bwd ? &op_bwd : &op_fwd, c, c->layout, th_alt_layout(c->layout),
                   0x0a0a0000u + (uint64_t)(c - cases));
}

static void describe(const norm_case *c, char *buf, size_t n)
{
    char lay[96];
    th_layout_name(c->layout, lay, sizeof lay);
    const unsigned o = c->opt;
    snprintf(buf, n, "%s %s %s/w:%s/r:%s R%lld H%lld G%lld %s%s%s%s%s%s%s%s%s%s%s%s%s", c->bwd ? "bwd" : "fwd",
             (o & NO_RMS) ? "rms" : "ln", portssm_dtype_name(c->act), portssm_dtype_name(c->wt),
             portssm_dtype_name(c->rdt), (long long)c->R, (long long)c->H, (long long)c->group,
             lay, (o & NO_BIAS) ? " bias" : "", (o & NO_RES) ? " res" : "",
             (o & NO_RESOUT) ? " res_out" : "", (o & NO_Z) ? " z" : "",
             (o & NO_NBG) ? " norm_before_gate" : "", (o & NO_STATS) ? " stats" : "",
             (o & NO_DRESOUT) ? " dres_out" : "", (o & NO_DRES) ? " dres" : "",
             (o & NO_DZ) ? " dz" : "", (o & NO_DW) ? " dw" : "", (o & NO_EPS0) ? " eps0" : "",
             (o & NO_YOUT) ? " out" : "");
}

static void add_case(norm_case c)
{
    th_case_room("test_norm", ncases, MAX_CASES);
    cases[ncases] = c;
    describe(&c, names[ncases], sizeof names[0]);
    tests[ncases] = (struct CMUnitTest){names[ncases], run_case, NULL, th_teardown, &cases[ncases]};
    ncases++;
}

static void add_matrix(void)
{
    for (size_t d = 0; d < sizeof dtype_sets / sizeof dtype_sets[0]; d++)
        for (size_t i = 0; i < sizeof core / sizeof core[0]; i++)
            for (int bwd = 0; bwd < 2; bwd++) {
                const scenario *s = &core[i];
                norm_case c = {bwd, dtype_sets[d][0], dtype_sets[d][1], dtype_sets[d][2], s->R,
                               s->H, s->group, s->layout, bwd ? s->bopt : s->fopt};
                add_case(c);
            }
}

int main(int argc, char **argv)
{
    add_matrix();
    for (size_t i = 0; i < sizeof more / sizeof more[0]; i++)
        add_case(more[i]);
    return th_main(argc, argv, "test_norm", tests, ncases);
}
