/*
 * test_scan.c - selective_scan_fwd and selective_scan_bwd on the backend under test against the
 * cpu oracle (th_cross_check: layouts, guards, determinism), and on the cpu backend against the
 * recurrence of DESIGN.md computed here in double (forward) and its finite differences
 * (backward).
 */
#include "harness.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum {
    SO_D = 1 << 0,      /* D given                                          */
    SO_Z = 1 << 1,      /* z given                                          */
    SO_DB = 1 << 2,     /* delta_bias given                                 */
    SO_SP = 1 << 3,     /* delta_softplus                                   */
    SO_INIT = 1 << 4,   /* initial_state given                              */
    SO_FINAL = 1 << 5,  /* fwd: final_state wanted                          */
    SO_DFINAL = 1 << 6, /* bwd: dfinal_state given                          */
    SO_DINIT = 1 << 7,  /* bwd: dinitial_state wanted                       */
    SO_NOOPT = 1 << 8,  /* bwd: dD, dz, ddelta_bias not wanted though given  */
    SO_CKPT = 1 << 9    /* fwd: checkpoints wanted; bwd: checkpoints given  */
};

typedef struct scan_case {
    int bwd;
    portssm_dtype act;
    int64_t B, D, L, N;
    int64_t GB, GC; /* 0: constant (D,N) F32; else variable (B,G,N,L) act with G groups */
    unsigned layout, opt;
} scan_case;

/* The checkpoints' shape (B,D,K,N) as the library reports it; K = 0: L needs none (absent).
 * The query validates its arguments like the op: inputs broadcast from one element, an output
 * of its own. */
static void ckpt_shape(const scan_case *c, int64_t *shape)
{
    const int64_t sx[3] = {c->B, c->D, c->L}, sdn[2] = {c->D, c->N};
    static float one[2];
    void *out = calloc((size_t)(c->B * c->D * c->L), 4);
    assert_non_null(out);
    portssm_selective_scan_fwd_args a;
    memset(&a, 0, sizeof a);
    a.u = portssm_tensor_contiguous(one, c->act, 3, sx);
    memset(a.u.stride, 0, sizeof a.u.stride);
    a.delta = a.u;
    a.out = portssm_tensor_contiguous(out, c->act, 3, sx);
    a.A = portssm_tensor_contiguous(one, PORTSSM_F32, 2, sdn);
    memset(a.A.stride, 0, sizeof a.A.stride);
    a.B = a.A;
    a.C = a.A;
    portssm_status st = portssm_selective_scan_checkpoint_shape(th_oracle, &a, shape);
    free(out);
    if (st != PORTSSM_OK)
        fail_msg("portssm_selective_scan_checkpoint_shape -> %s: %s", portssm_status_name(st),
                 portssm_last_error(th_oracle));
    assert_true(shape[0] == c->B && shape[1] == c->D && shape[3] == c->N);
}

enum {
    U, DELTA, A, BM, CM, DV, Z, DBIAS, INIT, OUT, FINAL,
    DOUT, DFINAL, DU, DDELTA, DA, DB, DC, DD, DZ, DDBIAS, DINIT, CKPT
};


/* ---------------------------------------------------------------- inputs */

/* Realistic delta: with softplus mostly U(-3,1) and a few values in U(18,23), so dt crosses the
 * softplus threshold 20 both ways (but never within 1e-3 of it, where finite differences would
 * straddle the branch); without softplus U(0.001,0.1). */
static void fill_delta(th_tensor *delta, const th_tensor *bias, int softplus, th_rng *r)
{
    th_fill_uniform(delta, r, 0, 1); /* noise in the gaps */
    int64_t idx[3], n = th_numel(delta);
    for (int64_t k = 0; k < n; k++) {
        th_unravel(delta, k, idx);
        double b = bias ? th_get(bias, &idx[1]) : 0;
        for (;;) {
            double v = !softplus                  ? th_uniform(r, 0.001, 0.1)
                       : th_uniform(r, 0, 1) < 0.03 ? th_uniform(r, 18, 23)
                                                  : th_uniform(r, -3, 1);
            th_set(delta, idx, v);
            if (fabs((double)(float)(th_get(delta, idx) + b) - 20) > 1e-3)
                break;
        }
    }
    th_upload(delta);
}

static void bc_shape(const scan_case *c, int64_t G, int *ndim, int64_t *shape)
{
    if (G == 0) {
        *ndim = 2, shape[0] = c->D, shape[1] = c->N;
    } else {
        *ndim = 4, shape[0] = c->B, shape[1] = G, shape[2] = c->N, shape[3] = c->L;
    }
}

static void build_inputs(th_bundle *b, const scan_case *c, th_rng *r)
{
    int64_t sx[3] = {c->B, c->D, c->L}, sdn[2] = {c->D, c->N}, sd[1] = {c->D};
    int64_t ss[3] = {c->B, c->D, c->N}, sb[4], sc[4];
    int nb, nc;
    bc_shape(c, c->GB, &nb, sb);
    bc_shape(c, c->GC, &nc, sc);
    th_tol none = {0, 0};
    unsigned o = c->opt;
    th_tensor *bias = (o & SO_DB) ? th_oracle_in(PORTSSM_F32, 1, sd, NULL, r,
                                                 (o & SO_SP) ? -0.5 : 0, (o & SO_SP) ? 0.5 : 0.05)
                                  : NULL;
    th_tensor *delta = th_new(th_oracle, c->act, 3, sx, NULL);
    fill_delta(delta, bias, (o & SO_SP) != 0, r);
    th_slot_set(b, U, "u", TH_IN, th_oracle_in(c->act, 3, sx, NULL, r, -1, 1), none);
    th_slot_set(b, DELTA, "delta", TH_IN, delta, none);
    th_slot_set(b, A, "A", TH_IN, th_oracle_in(PORTSSM_F32, 2, sdn, NULL, r, -8, -0.5), none);
    th_slot_set(b, BM, "B", TH_IN,
                th_oracle_in(c->GB ? c->act : PORTSSM_F32, nb, sb, NULL, r, -1, 1), none);
    th_slot_set(b, CM, "C", TH_IN,
                th_oracle_in(c->GC ? c->act : PORTSSM_F32, nc, sc, NULL, r, -1, 1), none);
    th_slot_set(b, DV, "D", TH_IN,
                (o & SO_D) ? th_oracle_in(PORTSSM_F32, 1, sd, NULL, r, -1, 1) : NULL, none);
    th_slot_set(b, Z, "z", TH_IN, (o & SO_Z) ? th_oracle_in(c->act, 3, sx, NULL, r, -2, 2) : NULL,
                none);
    th_slot_set(b, DBIAS, "delta_bias", TH_IN, bias, none);
    th_slot_set(b, INIT, "initial_state", TH_IN,
                (o & SO_INIT) ? th_oracle_in(PORTSSM_F32, 3, ss, NULL, r, -1, 1) : NULL, none);
}

static portssm_status run_fwd(portssm_context *ctx, const th_bundle *b, const void *cas);

static void build_fwd(th_bundle *b, const void *cas, th_rng *r)
{
    const scan_case *c = cas;
    int64_t sx[3] = {c->B, c->D, c->L}, ss[3] = {c->B, c->D, c->N};
    build_inputs(b, c, r);
    th_slot_set(b, OUT, "out", TH_OUT, th_oracle_out(c->act, 3, sx), th_tol_for(c->act));
    th_slot_set(b, FINAL, "final_state", TH_OUT,
                (c->opt & SO_FINAL) ? th_oracle_out(PORTSSM_F32, 3, ss) : NULL,
                th_tol_for(PORTSSM_F32));
    int64_t sk[4];
    ckpt_shape(c, sk);
    th_slot_set(b, CKPT, "checkpoints", TH_OUT,
                (c->opt & SO_CKPT) && sk[2] > 0 ? th_oracle_out(PORTSSM_F32, 4, sk) : NULL,
                th_tol_for(PORTSSM_F32));
}

/* The reference suite's rules for gradients (mamba-ssm test_selective_scan). */
static void build_bwd(th_bundle *b, const void *cas, th_rng *r)
{
    const scan_case *c = cas;
    int64_t sx[3] = {c->B, c->D, c->L}, sdn[2] = {c->D, c->N}, sd[1] = {c->D};
    int64_t ss[3] = {c->B, c->D, c->N}, sb[4], sc[4];
    int nb, nc;
    bc_shape(c, c->GB, &nb, sb);
    bc_shape(c, c->GC, &nc, sc);
    unsigned o = c->opt;
    th_tol t = th_tol_for(c->act), w = {1e-3, 1e-3}, none = {0, 0};
    if (o & SO_Z) { /* the reference raises the weight tolerances with z */
        w.rtol = fmax(w.rtol, t.rtol);
        w.atol = fmax(w.atol, t.atol);
    }
    build_inputs(b, c, r);
    th_slot_set(b, DOUT, "dout", TH_IN, th_oracle_in(c->act, 3, sx, NULL, r, -1, 1), none);
    th_slot_set(b, DFINAL, "dfinal_state", TH_IN,
                (o & SO_DFINAL) ? th_oracle_in(PORTSSM_F32, 3, ss, NULL, r, -1, 1) : NULL, none);
    th_slot_set(b, DU, "du", TH_OUT, th_oracle_out(c->act, 3, sx),
                (th_tol){2 * t.rtol, 2 * t.atol});
    th_slot_set(b, DDELTA, "ddelta", TH_OUT, th_oracle_out(c->act, 3, sx),
                (th_tol){5 * t.rtol, 10 * t.atol});
    th_slot_set(b, DA, "dA", TH_OUT, th_oracle_out(PORTSSM_F32, 2, sdn),
                (th_tol){w.rtol, 5 * w.atol});
    th_slot_set(b, DB, "dB", TH_OUT, th_oracle_out(c->GB ? c->act : PORTSSM_F32, nb, sb),
                c->GB ? t : w);
    th_slot_set(b, DC, "dC", TH_OUT, th_oracle_out(c->GC ? c->act : PORTSSM_F32, nc, sc),
                c->GC ? t : w);
    int opt_grads = !(o & SO_NOOPT);
    th_slot_set(b, DD, "dD", TH_OUT,
                ((o & SO_D) && opt_grads) ? th_oracle_out(PORTSSM_F32, 1, sd) : NULL, w);
    th_slot_set(b, DZ, "dz", TH_OUT, ((o & SO_Z) && opt_grads) ? th_oracle_out(c->act, 3, sx) : NULL, w);
    th_slot_set(b, DDBIAS, "ddelta_bias", TH_OUT,
                ((o & SO_DB) && opt_grads) ? th_oracle_out(PORTSSM_F32, 1, sd) : NULL, w);
    th_slot_set(b, DINIT, "dinitial_state", TH_OUT,
                (o & SO_DINIT) ? th_oracle_out(PORTSSM_F32, 3, ss) : NULL, w);
    /* given checkpoints: what the oracle's forward writes for these inputs */
    int64_t sk[4];
    ckpt_shape(c, sk);
    th_tensor *ck = NULL;
    if ((o & SO_CKPT) && sk[2] > 0) {
        ck = th_oracle_out(PORTSSM_F32, 4, sk);
        th_tensor *out = th_oracle_out(c->act, 3, sx);
        th_bundle f;
        memset(&f, 0, sizeof f);
        for (int i = U; i <= INIT; i++)
            f.s[i] = b->s[i];
        f.n = CKPT + 1;
        th_slot_set(&f, OUT, "out", TH_OUT, out, none);
        th_slot_set(&f, CKPT, "checkpoints", TH_OUT, ck, none);
        assert_int_equal(run_fwd(th_oracle, &f, c), PORTSSM_OK);
        th_download(ck);
    }
    th_slot_set(b, CKPT, "checkpoints", TH_IN, ck, none);
}

static portssm_status run_fwd(portssm_context *ctx, const th_bundle *b, const void *cas)
{
    const scan_case *c = cas;
    portssm_selective_scan_fwd_args a;
    memset(&a, 0, sizeof a);
    a.u = th_slot_view(b, U);
    a.delta = th_slot_view(b, DELTA);
    a.A = th_slot_view(b, A);
    a.B = th_slot_view(b, BM);
    a.C = th_slot_view(b, CM);
    a.D = th_slot_view(b, DV);
    a.z = th_slot_view(b, Z);
    a.delta_bias = th_slot_view(b, DBIAS);
    a.initial_state = th_slot_view(b, INIT);
    a.final_state = th_slot_view(b, FINAL);
    a.out = th_slot_view(b, OUT);
    a.delta_softplus = (c->opt & SO_SP) != 0;
    a.checkpoints = b->n > CKPT ? th_slot_view(b, CKPT) : th_absent();
    return portssm_selective_scan_fwd(ctx, &a);
}

static portssm_status run_bwd(portssm_context *ctx, const th_bundle *b, const void *cas)
{
    const scan_case *c = cas;
    portssm_selective_scan_bwd_args a;
    memset(&a, 0, sizeof a);
    a.u = th_slot_view(b, U);
    a.delta = th_slot_view(b, DELTA);
    a.A = th_slot_view(b, A);
    a.B = th_slot_view(b, BM);
    a.C = th_slot_view(b, CM);
    a.D = th_slot_view(b, DV);
    a.z = th_slot_view(b, Z);
    a.delta_bias = th_slot_view(b, DBIAS);
    a.initial_state = th_slot_view(b, INIT);
    a.dout = th_slot_view(b, DOUT);
    a.dfinal_state = th_slot_view(b, DFINAL);
    a.du = th_slot_view(b, DU);
    a.ddelta = th_slot_view(b, DDELTA);
    a.dA = th_slot_view(b, DA);
    a.dB = th_slot_view(b, DB);
    a.dC = th_slot_view(b, DC);
    a.dD = th_slot_view(b, DD);
    a.dz = th_slot_view(b, DZ);
    a.ddelta_bias = th_slot_view(b, DDBIAS);
    a.dinitial_state = th_slot_view(b, DINIT);
    a.delta_softplus = (c->opt & SO_SP) != 0;
    a.checkpoints = th_slot_view(b, CKPT);
    return portssm_selective_scan_bwd(ctx, &a);
}

/* ---------------------------------------------------------------- the recurrence, in double */

typedef struct scan_ref {
    int64_t B, D, L, N, GB, GC;
    int softplus;
    double *u, *delta, *A, *Bm, *Cm, *Dv, *z, *dbias, *init; /* absent: NULL; init: zeros */
    double *dout, *dfinal;                                   /* the loss's weights         */
    double *out, *final, *x;
    double *ck; /* (B,D,K,N): the states after steps 127, 255, ... (the library's interval) */
    int64_t K;
} scan_ref;

static double *values_or_zeros(const th_tensor *t, int64_t n)
{
    if (t)
        return th_values(t);
    double *v = calloc((size_t)n + 1, sizeof *v);
    assert_non_null(v);
    return v;
}

static void scan_ref_load(scan_ref *p, const scan_case *c, const th_bundle *in)
{
    memset(p, 0, sizeof *p);
    p->B = c->B, p->D = c->D, p->L = c->L, p->N = c->N, p->GB = c->GB, p->GC = c->GC;
    p->softplus = (c->opt & SO_SP) != 0;
    p->u = th_values(in->s[U].t);
    p->delta = th_values(in->s[DELTA].t);
    p->A = th_values(in->s[A].t);
    p->Bm = th_values(in->s[BM].t);
    p->Cm = th_values(in->s[CM].t);
    p->Dv = in->s[DV].t ? th_values(in->s[DV].t) : NULL;
    p->z = in->s[Z].t ? th_values(in->s[Z].t) : NULL;
    /* zeros when absent, so that its gradient can be probed like the others' */
    p->dbias = values_or_zeros(in->s[DBIAS].t, c->D);
    p->init = values_or_zeros(in->s[INIT].t, c->B * c->D * c->N);
    p->out = calloc((size_t)(c->B * c->D * c->L), sizeof(double));
    p->final = calloc((size_t)(c->B * c->D * c->N), sizeof(double));
    p->x = calloc((size_t)c->N, sizeof(double));
    int64_t sk[4];
    ckpt_shape(c, sk);
    p->K = sk[2];
    p->ck = calloc((size_t)(c->B * c->D * p->K * c->N + 1), sizeof(double));
    assert_true(p->out && p->final && p->x && p->ck);
}

static void scan_ref_free(scan_ref *p)
{
    free(p->u), free(p->delta), free(p->A), free(p->Bm), free(p->Cm), free(p->Dv), free(p->z);
    free(p->dbias), free(p->init), free(p->dout), free(p->dfinal), free(p->out), free(p->final);
    free(p->x), free(p->ck);
}

/* B or C at (b, d, n, t): constant (D,N), or variable (B,G,N,L) with channel d in group
 * d / (D/G). */
static double bc(const double *m, int64_t G, const scan_ref *p, int64_t b, int64_t d, int64_t n,
                 int64_t t)
{
    if (G == 0)
        return m[d * p->N + n];
    int64_t g = d / (p->D / G);
    return m[((b * G + g) * p->N + n) * p->L + t];
}

static void scan_ref_fwd(scan_ref *p)
{
    int64_t D = p->D, L = p->L, N = p->N;
    for (int64_t b = 0; b < p->B; b++)
        for (int64_t d = 0; d < D; d++) {
            double *x = p->x;
            for (int64_t n = 0; n < N; n++)
                x[n] = p->init[(b * D + d) * N + n];
            for (int64_t t = 0; t < L; t++) {
                int64_t i = (b * D + d) * L + t;
                double dt = p->delta[i] + p->dbias[d];
                if (p->softplus)
                    dt = dt <= 20 ? log1p(exp(dt)) : dt;
                double u = p->u[i], y = 0;
                for (int64_t n = 0; n < N; n++) {
                    x[n] = exp(dt * p->A[d * N + n]) * x[n] + dt * bc(p->Bm, p->GB, p, b, d, n, t) * u;
                    y += bc(p->Cm, p->GC, p, b, d, n, t) * x[n];
                }
                if (p->Dv)
                    y += p->Dv[d] * u;
                if (p->z)
                    y *= p->z[i] / (1 + exp(-p->z[i]));
                p->out[i] = y;
                if ((t + 1) % 128 == 0 && (t + 1) / 128 <= p->K) /* 128: portssm.h's interval */
                    for (int64_t n = 0; n < N; n++)
                        p->ck[(((b * D + d) * p->K) + (t + 1) / 128 - 1) * N + n] = x[n];
            }
            for (int64_t n = 0; n < N; n++)
                p->final[(b * D + d) * N + n] = x[n];
        }
}

static double scan_ref_loss(void *ctx)
{
    scan_ref *p = ctx;
    scan_ref_fwd(p);
    long double s = 0;
    for (int64_t i = 0; i < p->B * p->D * p->L; i++)
        s += (long double)p->dout[i] * p->out[i];
    if (p->dfinal)
        for (int64_t i = 0; i < p->B * p->D * p->N; i++)
            s += (long double)p->dfinal[i] * p->final[i];
    return (double)s;
}

static void verify_fwd(th_bundle *got, const th_bundle *init, const void *cas)
{
    const scan_case *c = cas;
    if (!th_is_oracle())
        return; /* elsewhere the oracle comparison is the check */
    scan_ref p;
    scan_ref_load(&p, c, init);
    scan_ref_fwd(&p);
    th_assert_close_values(got->s[OUT].t, p.out, th_tol_ref(c->act), "out: cpu vs definition");
    if (got->s[FINAL].t)
        th_assert_close_values(got->s[FINAL].t, p.final, th_tol_ref(PORTSSM_F32),
                               "final_state: cpu vs definition");
    if (got->s[CKPT].t)
        th_assert_close_values(got->s[CKPT].t, p.ck, th_tol_ref(PORTSSM_F32),
                               "checkpoints: cpu vs definition");
    scan_ref_free(&p);
}

static int64_t numel_of(const th_bundle *b, int slot)
{
    return b->s[slot].t ? th_numel(b->s[slot].t) : 0;
}

static void verify_bwd(th_bundle *got, const th_bundle *init, const void *cas)
{
    const scan_case *c = cas;
    if (!th_is_oracle())
        return;
    scan_ref p;
    scan_ref_load(&p, c, init);
    p.dout = th_values(init->s[DOUT].t);
    p.dfinal = init->s[DFINAL].t ? th_values(init->s[DFINAL].t) : NULL;
    th_rng r = th_rng_for(0x5ca9 + (uint64_t)c->L * 977 + (uint64_t)c->N);
    const th_grad_param g[] = {
        {DU, p.u, numel_of(init, U)},       {DDELTA, p.delta, numel_of(init, DELTA)},
        {DA, p.A, numel_of(init, A)},       {DB, p.Bm, numel_of(init, BM)},
        {DC, p.Cm, numel_of(init, CM)},     {DD, p.Dv, numel_of(init, DV)},
        {DZ, p.z, numel_of(init, Z)},       {DDBIAS, p.dbias, c->D},
        {DINIT, p.init, c->B * c->D * c->N},
    };
    th_check_grads_fd(got, g, sizeof g / sizeof g[0], scan_ref_loss, &p, &r);
    scan_ref_free(&p);
}

/* ---------------------------------------------------------------- cases */

#include "case_shorthand.h"
#define OD SO_D
#define OZ SO_Z
#define DBI SO_DB
#define SP SO_SP
#define IN SO_INIT
#define FI SO_FINAL
#define DF SO_DFINAL
#define DI SO_DINIT
#define CK SO_CKPT

/* Scenarios run for every activation dtype: {B, D, L, N, GB, GC, layout, options}. */
typedef struct scenario {
    int64_t B, D, L, N, GB, GC;
    unsigned layout, opt;
} scenario;

static const scenario fwd_core[] = {
    {2, 3, 67, 16, 1, 1, CF, OD | OZ | DBI | SP | IN | FI},
    {1, 5, 2053, 16, 0, 0, CL, OD | SP | FI},
    {2, 6, 7, 17, 3, 3, PAD | NEGL, OZ | IN},
    {1, 1, 1, 4, 1, 1, CF, OD | OZ | IN | FI},
};

static const scenario bwd_core[] = {
    {2, 3, 67, 16, 1, 1, CF, OD | OZ | DBI | SP | IN | DF | DI},
    {1, 5, 2053, 16, 0, 0, CL, OD | SP | DF},
    {2, 6, 7, 17, 3, 3, PAD | NEGL, OZ | IN | DI},
    {1, 1, 1, 4, 1, 1, CF, OD | OZ | IN | DF | DI},
};

static const portssm_dtype dtypes[] = {F32, F16, BF16};

/* Cases beyond the dtype matrix: {bwd, act, B, D, L, N, GB, GC, layout, options}. */
static const scan_case fwd_more[] = {
    /* state sizes 1..256 */
    {0, F32, 2, 3, 67, 1, 1, 1, CF, OD | SP},
    {0, F32, 2, 3, 67, 4, 0, 0, CL, DBI | SP | OZ},
    {0, F32, 2, 4, 64, 16, 2, 2, GAP, OD | OZ | DBI | SP | IN | FI},
    {0, F32, 1, 3, 67, 17, 1, 1, CL | NEGB, IN | FI},
    {0, F32, 2, 4, 67, 64, 2, 2, CF, SP | DBI | OD},
    {0, F32, 1, 3, 67, 256, 1, 1, CF, OD | OZ | SP | DBI | IN | FI},
    {0, BF16, 2, 3, 7, 256, 0, 0, CL, SP | IN | FI},
    /* lengths 1, 7, 2048 + 5 (past one chunk) and past two chunks */
    {0, F32, 2, 3, 1, 16, 0, 0, CF, SP | DBI},
    {0, F32, 2, 3, 7, 16, 1, 1, CL, SP | OD},
    {0, F32, 1, 3, 2053, 4, 1, 1, CF, SP | DBI | OZ | OD | FI},
    {0, F16, 1, 2, 2053, 16, 0, 0, PAD, IN | FI},
    {0, BF16, 1, 1, 4100, 4, 1, 1, CF, SP | IN | FI},
    /* channels: one, odd, groups > 1 */
    {0, F32, 3, 1, 67, 16, 1, 1, CF, SP},
    {0, F32, 1, 9, 67, 8, 3, 3, CL, OZ | OD},
    {0, F32, 2, 5, 67, 16, 0, 0, CF, DBI},
    /* constant B with variable C and the other way round */
    {0, F32, 2, 4, 67, 16, 0, 1, CF, SP | OD},
    {0, F16, 2, 4, 67, 16, 2, 0, CL, OZ},
    /* nothing optional; everything with an odd layout */
    {0, F32, 2, 3, 67, 16, 1, 1, CF, 0},
    {0, F32, 2, 3, 67, 16, 1, 1, CL | PAD | NEGL, OD | OZ | DBI | SP | IN | FI},
    {0, BF16, 2, 6, 67, 16, 2, 2, GAP | NEGB, OD | OZ | DBI | SP | IN | FI},
    /* several blocks per channel tile; groups of 65 channels */
    {0, F32, 1, 259, 67, 4, 1, 1, CF, SP | OD},
    {0, F16, 2, 130, 67, 8, 2, 2, CL, SP | OZ | DBI},
    /* misaligned data, outputs not congruent with inputs or in the other orientation */
    {0, F32, 2, 3, 67, 16, 1, 1, CF | SHIFT, OD | OZ | SP | IN | FI},
    {0, BF16, 2, 3, 67, 16, 1, 1, CF | SHIFTO | XOUT, OD | OZ | SP},
    {0, F32, 2, 3, 67, 16, 0, 0, CF | PADB, OD | SP | FI},
    /* a slice of a model layer */
    {0, BF16, 2, 64, 1024, 16, 1, 1, CF, OD | OZ | DBI | SP},
    /* checkpoints for the backward: 2, 16, 1 and none (L = 128); the largest N */
    {0, F32, 2, 3, 300, 16, 1, 1, CF, OD | OZ | SP | FI | CK},
    {0, BF16, 1, 5, 2053, 16, 0, 0, CL, OD | SP | FI | CK},
    {0, F16, 2, 4, 129, 8, 2, 2, PAD, IN | CK},
    {0, F32, 1, 3, 128, 4, 1, 1, CF, CK},
    {0, F32, 1, 2, 300, 256, 1, 1, CF, IN | CK},
    /* enough channels (on the sim's 2 multiprocessors) for 16 and 8 states a lane */
    {0, F16, 1, 192, 40, 16, 1, 1, CF, OD | OZ | SP},
    {0, F32, 1, 192, 40, 8, 1, 1, CL, DBI | SP | FI},
};

static const scan_case bwd_more[] = {
    {1, F32, 2, 3, 67, 1, 1, 1, CF, OD | SP},
    {1, F32, 2, 3, 67, 4, 0, 0, CL, DBI | SP | OZ},
    {1, F32, 1, 3, 67, 17, 1, 1, CL | NEGB, IN | DF | DI},
    {1, F32, 2, 4, 67, 64, 2, 2, CF, SP | DBI | OD},
    {1, F32, 1, 3, 19, 256, 1, 1, CF, OD | OZ | SP | DBI | IN | DF | DI},
    {1, F32, 2, 3, 1, 16, 0, 0, CF, SP | DBI | DI},
    {1, F32, 1, 3, 2053, 4, 1, 1, CF, SP | DBI | OZ | OD | DF},
    {1, F16, 1, 2, 2053, 16, 0, 0, PAD, IN | DI},
    {1, F32, 3, 1, 67, 16, 1, 1, CF, SP | DI},
    {1, F32, 1, 9, 67, 8, 3, 3, CL, OZ | OD},
    {1, F32, 2, 4, 67, 16, 0, 1, CF, SP | OD},
    {1, F16, 2, 4, 67, 16, 2, 0, CL, OZ | DI},
    {1, F32, 2, 3, 67, 16, 1, 1, CF, 0},
    {1, F32, 2, 3, 67, 16, 1, 1, CF, OD | OZ | DBI | SP | SO_NOOPT},
    {1, F32, 2, 3, 67, 16, 1, 1, CL | PAD | NEGL, OD | OZ | DBI | SP | IN | DF | DI},
    {1, BF16, 2, 6, 67, 16, 2, 2, GAP | NEGB, OD | OZ | DBI | SP | IN | DF | DI},
    {1, F32, 1, 259, 67, 4, 1, 1, CF, SP | OD},
    {1, F16, 2, 130, 67, 8, 2, 2, CL, SP | OZ | DBI},
    {1, F32, 2, 3, 67, 16, 1, 1, CF | SHIFT, OD | OZ | SP | IN | DF | DI},
    {1, BF16, 2, 3, 67, 16, 1, 1, CF | SHIFTO | XOUT, OD | OZ | SP},
    {1, BF16, 2, 64, 1024, 16, 1, 1, CF, OD | OZ | DBI | SP},
    /* with the forward's checkpoints given */
    {1, F32, 2, 3, 300, 16, 1, 1, CF, OD | OZ | DBI | SP | IN | DF | DI | CK},
    {1, BF16, 1, 5, 2053, 16, 0, 0, CL, OD | SP | DF | CK},
    {1, F16, 2, 4, 129, 8, 2, 2, PAD | NEGL, OZ | IN | DI | CK},
    {1, F32, 1, 3, 257, 64, 1, 0, CF, SP | DBI | CK},
    {1, BF16, 2, 130, 300, 16, 2, 2, CL, OD | OZ | DBI | SP | CK},
    {1, F32, 1, 2, 300, 256, 1, 1, CF, OD | IN | DI | CK},
    /* enough channels (on the sim's 2 multiprocessors) for 8 states a lane: both kernel forms
     * (a constant B or C; both variable) */
    {1, F32, 1, 256, 40, 16, 0, 1, CF, SP | OD | DI},
    {1, F16, 1, 256, 40, 16, 1, 0, CL, OZ | DBI},
    {1, BF16, 1, 256, 40, 16, 0, 0, CF, SP | DBI | DF},
    {1, F32, 1, 256, 40, 16, 1, 1, CF, OD | SP | IN | DI},
    {1, F16, 1, 256, 40, 16, 1, 1, CL, OZ | SP | DF},
    /* ... and past one checkpoint interval without the forward's checkpoints: the states-only
     * kernels compute them, 8 and 16 states a lane */
    {1, F32, 1, 256, 300, 16, 1, 1, CF, OD | SP | DI},
    {1, F16, 1, 256, 300, 16, 0, 1, CL, OZ | DBI},
    {1, F32, 1, 128, 300, 16, 1, 1, CF, OZ | SP},
    {1, F16, 1, 128, 300, 16, 1, 1, CF, OD | SP | DF},
    /* ... and the kernels whose other launches are rows the sanitizer and valgrind runs leave
     * out (L1024, f16 L2053: tests/CMakeLists.txt): 4 states a lane f16, 8 bf16 */
    {1, F16, 1, 3, 300, 16, 1, 1, CF, OZ | SP},
    {1, BF16, 1, 128, 300, 16, 1, 1, CF, OD | SP},
};

static const scan_case probe_fwd = {0, F32, 1, 2, 8, 4, 0, 0, CF, 0};
static const scan_case probe_bwd = {1, F32, 1, 2, 8, 4, 0, 0, CF, 0};

static const th_op op_fwd = {"selective_scan_fwd", build_fwd, run_fwd, verify_fwd, &probe_fwd};
static const th_op op_bwd = {"selective_scan_bwd", build_bwd, run_bwd, verify_bwd, &probe_bwd};

/* ---------------------------------------------------------------- registration */

#define MAX_CASES 120
static scan_case cases[MAX_CASES];
static struct CMUnitTest tests[MAX_CASES];
static char names[MAX_CASES][256];
static size_t ncases;

static void run_case(void **state)
{
    const scan_case *c = *state;
    th_cross_check(c->bwd ? &op_bwd : &op_fwd, c, c->layout, th_alt_layout(c->layout),
                   0x5ca40000u + (uint64_t)(c - cases));
}

static void bc_name(int64_t G, char *buf, size_t n)
{
    if (G == 0)
        snprintf(buf, n, "const");
    else
        snprintf(buf, n, "var/G%lld", (long long)G);
}

static void describe(const scan_case *c, char *buf, size_t n)
{
    char lay[96], gb[16], gc[16];
    th_layout_name(c->layout, lay, sizeof lay);
    bc_name(c->GB, gb, sizeof gb);
    bc_name(c->GC, gc, sizeof gc);
    unsigned o = c->opt;
    snprintf(buf, n, "%s %s B%lld D%lld L%lld N%lld B:%s C:%s %s%s%s%s%s%s%s%s%s%s%s",
             c->bwd ? "bwd" : "fwd", portssm_dtype_name(c->act), (long long)c->B, (long long)c->D,
             (long long)c->L, (long long)c->N, gb, gc, lay, (o & SO_D) ? " D" : "",
             (o & SO_Z) ? " z" : "", (o & SO_DB) ? " delta_bias" : "",
             (o & SO_SP) ? " softplus" : "", (o & SO_INIT) ? " init" : "",
             (o & SO_FINAL) ? " final" : "", (o & SO_DFINAL) ? " dfinal" : "",
             (o & SO_DINIT) ? " dinit" : "", (o & SO_NOOPT) ? " no-opt-grads" : "",
             (o & SO_CKPT) ? " ckpt" : "");
}

static void add_case(scan_case c)
{
    th_case_room("test_scan", ncases, MAX_CASES);
    cases[ncases] = c;
    describe(&c, names[ncases], sizeof names[0]);
    tests[ncases] = (struct CMUnitTest){names[ncases], run_case, NULL, th_teardown, &cases[ncases]};
    ncases++;
}

static void add_matrix(int bwd, const scenario *sc, size_t n)
{
    for (size_t k = 0; k < sizeof dtypes / sizeof dtypes[0]; k++)
        for (size_t i = 0; i < n; i++) {
            scan_case c = {bwd, dtypes[k], sc[i].B, sc[i].D, sc[i].L, sc[i].N, sc[i].GB, sc[i].GC,
                           sc[i].layout, sc[i].opt};
            add_case(c);
        }
}

int main(int argc, char **argv)
{
    add_matrix(0, fwd_core, sizeof fwd_core / sizeof fwd_core[0]);
    for (size_t i = 0; i < sizeof fwd_more / sizeof fwd_more[0]; i++)
        add_case(fwd_more[i]);
    add_matrix(1, bwd_core, sizeof bwd_core / sizeof bwd_core[0]);
    for (size_t i = 0; i < sizeof bwd_more / sizeof bwd_more[0]; i++)
        add_case(bwd_more[i]);
    return th_main(argc, argv, "test_scan", tests, ncases);
}
