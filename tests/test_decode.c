/*
 * test_decode.c - the decode steps, causal_conv1d_update and selective_state_update, on the
 * backend under test against the cpu oracle (th_cross_check: layouts, guards, determinism).
 * On every backend: a sequence whose state index is outside [0, B') gets exactly zero output and
 * leaves the pool untouched, and every pool row no sequence selects stays byte-identical.  On the
 * cpu backend also against the definitions of DESIGN.md / portssm.h computed here in double.
 */
#include "harness.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "case_shorthand.h"

/* The references' decode tolerances where tighter than the design's (f32 3e-4/1e-3, bf16 1e-2). */
static th_tol act_tol(portssm_dtype dt)
{
    th_tol t = th_tol_for(dt);
    th_tol ref = dt == PORTSSM_F32 ? (th_tol){3e-4, 1e-3}
                 : dt == PORTSSM_F16 ? (th_tol){3e-3, 5e-3}
                                     : (th_tol){1e-2, 5e-2};
    t.rtol = fmin(t.rtol, ref.rtol);
    t.atol = fmin(t.atol, ref.atol);
    return t;
}

/* Pool rows for B sequences out of Bp: distinct valid rows, and when Bp > B sequence 1, every
 * third after it and the last invalid, in turn -1, Bp, -7, Bp + 3 (sequence 0 stays valid). */
static th_tensor *new_indices(int64_t B, int64_t Bp, th_rng *r)
{
    int64_t shape[1] = {B};
    th_tensor *t = th_new(th_oracle, PORTSSM_I32, 1, shape, NULL);
    int64_t *perm = malloc((size_t)Bp * sizeof *perm);
    assert_non_null(perm);
    for (int64_t i = 0; i < Bp; i++)
        perm[i] = i;
    for (int64_t i = Bp - 1; i > 0; i--) {
        int64_t j = th_randint(r, 0, i), tmp = perm[i];
        perm[i] = perm[j], perm[j] = tmp;
    }
    const int64_t invalid[] = {-1, Bp, -7, Bp + 3};
    int ninvalid = 0;
    for (int64_t b = 0; b < B; b++) {
        int64_t v = perm[b];
        if (Bp > B && b > 0 && (b % 3 == 1 || b == B - 1))
            v = invalid[ninvalid++ % 4];
        th_set(t, &b, (double)v);
    }
    free(perm);
    th_upload(t);
    return t;
}

static int64_t index_of(const th_tensor *indices, int64_t b)
{
    return indices ? (int64_t)th_get(indices, &b) : b;
}

/*
 * On every backend: outputs of sequences with an invalid pool row are exactly zero, and pool
 * rows that no sequence selects are exactly as they were (their gaps and guards are checked by
 * the cross check).  out's first dim is the sequence, pool's the row.
 */
static void check_pool(th_tensor *out, th_tensor *pool, const th_tensor *pool0,
                       const th_tensor *indices, int64_t Bp)
{
    th_download(out);
    th_download(pool);
    int64_t B = out->shape[0], idx[PORTSSM_MAX_DIMS];
    char *selected = calloc((size_t)Bp, 1);
    assert_non_null(selected);
    for (int64_t b = 0; b < B; b++) {
        int64_t row = index_of(indices, b);
        if (row >= 0 && row < Bp) {
            selected[row] = 1;
            continue;
        }
        for (int64_t k = 0; k < th_numel(out); k++) {
            th_unravel(out, k, idx);
            if (idx[0] == b && th_get(out, idx) != 0) {
                free(selected);
                fail_msg("out[%lld,...] = %.9g for pool index %lld outside [0, %lld): must be 0",
                         (long long)b, th_get(out, idx), (long long)row, (long long)Bp);
            }
        }
    }
    for (int64_t k = 0; k < th_numel(pool); k++) {
        th_unravel(pool, k, idx);
        if (selected[idx[0]])
            continue;
        double a = th_get(pool, idx), e = th_get(pool0, idx);
        if (memcmp(&a, &e, sizeof a) != 0) {
            free(selected);
            fail_msg("state row %lld, which no sequence selects, changed: element %lld of the row"
                     " is %.9g, was %.9g",
                     (long long)idx[0], (long long)(k % (th_numel(pool) / Bp)), a, e);
        }
    }
    free(selected);
}

/* ================================================================ causal_conv1d_update */

enum {
    UO_BIAS = 1,
    UO_SILU = 2,
    UO_RING = 4,    /* cache_seqlens                                   */
    UO_IDX = 8      /* conv_state_indices                              */
};

typedef struct upd_case {
    portssm_dtype act, wt;
    int64_t B, D, T, W, S, Bp; /* T 0: x is (B,D); Bp: the pool rows (with UO_IDX) */
    unsigned layout, opt;
} upd_case;

enum { UX, USTATE, UWEIGHT, UBIAS, USEQLENS, UINDICES, UOUT };

static int64_t upd_pool(const upd_case *c) { return (c->opt & UO_IDX) ? c->Bp : c->B; }

/* cache_seqlens: random in [-2S, 1100], one past S, one negative (Euclidean mod). */
static th_tensor *new_seqlens(int64_t B, int64_t S, th_rng *r)
{
    int64_t shape[1] = {B};
    th_tensor *t = th_new(th_oracle, PORTSSM_I32, 1, shape, NULL);
    th_fill_int(t, r, -2 * S, 1100);
    int64_t b = 0;
    th_set(t, &b, (double)(S + th_randint(r, 1, 2 * S)));
    if (B > 1) {
        b = 1;
        th_set(t, &b, (double)-th_randint(r, 1, 3 * S));
    }
    th_upload(t);
    return t;
}

static void build_upd(th_bundle *b, const void *cas, th_rng *r)
{
    const upd_case *c = cas;
    int64_t Bp = upd_pool(c);
    int64_t sx[3] = {c->B, c->D, c->T}, ss[3] = {Bp, c->D, c->S}, sw[2] = {c->D, c->W};
    int64_t sd[1] = {c->D};
    int nx = c->T ? 3 : 2;
    th_tol none = {0, 0};
    th_slot_set(b, UX, "x", TH_IN, th_oracle_in(c->act, nx, sx, NULL, r, -1, 1), none);
    th_slot_set(b, USTATE, "conv_state", TH_INOUT, th_oracle_in(c->act, 3, ss, NULL, r, -1, 1), none);
    b->s[USTATE].exact = 1; /* the state only moves data */
    th_slot_set(b, UWEIGHT, "weight", TH_IN, th_oracle_in(c->wt, 2, sw, NULL, r, -1, 1), none);
    th_slot_set(b, UBIAS, "bias", TH_IN,
                (c->opt & UO_BIAS) ? th_oracle_in(c->wt, 1, sd, NULL, r, -1, 1) : NULL, none);
    th_slot_set(b, USEQLENS, "cache_seqlens", TH_IN,
                (c->opt & UO_RING) ? new_seqlens(c->B, c->S, r) : NULL, none);
    th_slot_set(b, UINDICES, "conv_state_indices", TH_IN,
                (c->opt & UO_IDX) ? new_indices(c->B, Bp, r) : NULL, none);
    th_slot_set(b, UOUT, "out", TH_OUT, th_oracle_out(c->act, nx, sx), act_tol(c->act));
}

static portssm_status run_upd(portssm_context *ctx, const th_bundle *b, const void *cas)
{
    const upd_case *c = cas;
    portssm_causal_conv1d_update_args a;
    memset(&a, 0, sizeof a);
    a.x = th_slot_view(b, UX);
    a.conv_state = th_slot_view(b, USTATE);
    a.weight = th_slot_view(b, UWEIGHT);
    a.bias = th_slot_view(b, UBIAS);
    a.cache_seqlens = th_slot_view(b, USEQLENS);
    a.conv_state_indices = th_slot_view(b, UINDICES);
    a.out = th_slot_view(b, UOUT);
    a.activation = (c->opt & UO_SILU) ? PORTSSM_ACTIVATION_SILU : PORTSSM_ACTIVATION_NONE;
    return portssm_causal_conv1d_update(ctx, &a);
}

static int64_t emod(int64_t a, int64_t m) { return ((a % m) + m) % m; }

/* The definition in double: out (B,D,T) and the new pool (Bp,D,S), row-major. */
static void upd_reference(const upd_case *c, const th_bundle *in, double *out, double *pool)
{
    int64_t B = c->B, D = c->D, T = c->T ? c->T : 1, W = c->W, S = c->S, Bp = upd_pool(c);
    double *x = th_values(in->s[UX].t), *w = th_values(in->s[UWEIGHT].t);
    double *bias = in->s[UBIAS].t ? th_values(in->s[UBIAS].t) : NULL;
    double *s0 = th_values(in->s[USTATE].t);
    memcpy(pool, s0, (size_t)(Bp * D * S) * sizeof *pool);
    const th_tensor *seqlens = in->s[USEQLENS].t, *indices = in->s[UINDICES].t;
    double *hist = malloc((size_t)(W + T) * sizeof *hist);
    assert_non_null(hist);
    for (int64_t b = 0; b < B; b++) {
        int64_t row = index_of(indices, b);
        int valid = row >= 0 && row < Bp;
        for (int64_t d = 0; d < D; d++) {
            const double *st = s0 + ((valid ? row : 0) * D + d) * S;
            double *nst = pool + ((valid ? row : 0) * D + d) * S;
            /* hist[0..W-2]: the W-1 inputs before x[0]; then x */
            for (int64_t k = 0; k < W - 1; k++) {
                if (!valid)
                    hist[k] = 0;
                else if (seqlens)
                    hist[k] = st[emod((int64_t)th_get(seqlens, &b) - (W - 1) + k, S)];
                else
                    hist[k] = st[S - (W - 1) + k];
            }
            for (int64_t i = 0; i < T; i++)
                hist[W - 1 + i] = x[(b * D + d) * T + i];
            for (int64_t i = 0; i < T; i++) {
                double acc = bias ? bias[d] : 0;
                for (int64_t k = 0; k < W; k++)
                    acc += w[d * W + k] * hist[i + k];
                if (c->opt & UO_SILU)
                    acc = acc / (1 + exp(-acc));
                out[(b * D + d) * T + i] = valid ? acc : 0;
            }
            if (!valid)
                continue;
            if (seqlens) {
                for (int64_t i = 0; i < T; i++) /* in order: a later token wins */
                    nst[emod((int64_t)th_get(seqlens, &b) + i, S)] = x[(b * D + d) * T + i];
            } else {
                for (int64_t k = 0; k < S; k++) { /* the last S columns of [state | x] */
                    int64_t j = T + k;
                    nst[k] = j < S ? st[j] : x[(b * D + d) * T + j - S];
                }
            }
        }
    }
    free(hist), free(x), free(w), free(bias), free(s0);
}

static void verify_upd(th_bundle *got, const th_bundle *init, const void *cas)
{
    const upd_case *c = cas;
    int64_t Bp = upd_pool(c);
    check_pool(got->s[UOUT].t, got->s[USTATE].t, init->s[USTATE].t, init->s[UINDICES].t, Bp);
    if (!th_is_oracle())
        return;
    int64_t T = c->T ? c->T : 1;
    double *out = malloc((size_t)(c->B * c->D * T) * sizeof *out);
    double *pool = malloc((size_t)(Bp * c->D * c->S) * sizeof *pool);
    assert_true(out && pool);
    upd_reference(c, init, out, pool);
    th_assert_close_values(got->s[UOUT].t, out, th_tol_ref(c->act), "out: cpu vs definition");
    th_assert_close_values(got->s[USTATE].t, pool, (th_tol){0, 0},
                           "conv_state: cpu vs definition (exact)");
    free(out), free(pool);
}

/* ================================================================ selective_state_update */

enum { SU_D = 1, SU_Z = 2, SU_DTB = 4, SU_SP = 8, SU_IDX = 16 };

typedef struct ssu_case {
    portssm_dtype act;
    int heads;                   /* 0: Mamba-1 form (H = 1, P = D, G = 1) */
    int64_t B, H, P, N, G, Bp;   /* Bp: the pool rows (with SU_IDX)       */
    int tied;                    /* Mamba-2: A, dt, dt_bias, D stride 0 over P (and N) */
    unsigned layout, opt;
} ssu_case;

enum { SSTATE, SX, SDT, SA, SB, SC, SDV, SZ, SDTB, SINDICES, SOUT };

static int64_t ssu_pool(const ssu_case *c) { return (c->opt & SU_IDX) ? c->Bp : c->B; }

/* Shapes of the two forms: the heads form's with H dropped (and G for B/C) for Mamba-1. */
static int ssu_shape(const ssu_case *c, int slot, int64_t *shape)
{
    int64_t Bp = ssu_pool(c);
    int n = 0;
    switch (slot) {
    case SSTATE: shape[n++] = Bp; break;
    case SX: case SDT: case SZ: case SOUT: shape[n++] = c->B; break;
    case SB: case SC:
        shape[n++] = c->B;
        if (c->heads)
            shape[n++] = c->G;
        shape[n++] = c->N;
        return n;
    default: break;
    }
    if (c->heads)
        shape[n++] = c->H;
    shape[n++] = c->P;
    if (slot == SSTATE || slot == SA)
        shape[n++] = c->N;
    return n;
}

/* Tied (Mamba-2) tensors: stride 0 over P (and N). */
static const int64_t *ssu_tied_strides(const ssu_case *c, int slot, int64_t *stride)
{
    if (!c->tied)
        return NULL;
    switch (slot) {
    case SA: stride[0] = 1, stride[1] = 0, stride[2] = 0; return stride;      /* (H,P,N) */
    case SDT: stride[0] = c->H, stride[1] = 1, stride[2] = 0; return stride; /* (B,H,P) */
    case SDV: case SDTB: stride[0] = 1, stride[1] = 0; return stride;        /* (H,P)   */
    default: return NULL;
    }
}

static th_tensor *ssu_in(const ssu_case *c, int slot, portssm_dtype dt, th_rng *r, double lo,
                         double hi)
{
    int64_t shape[4], stride[4];
    int n = ssu_shape(c, slot, shape);
    return th_oracle_in(dt, n, shape, ssu_tied_strides(c, slot, stride), r, lo, hi);
}

/* dt: with softplus mostly U(-3,1) and a few values past the threshold 20. */
static void fill_dt(th_tensor *dt, int softplus, th_rng *r)
{
    int64_t idx[PORTSSM_MAX_DIMS], n = th_numel(dt);
    for (int64_t k = 0; k < n; k++) {
        th_unravel(dt, k, idx);
        th_set(dt, idx, !softplus                  ? th_uniform(r, 0.001, 0.1)
                        : th_uniform(r, 0, 1) < 0.1 ? th_uniform(r, 18, 23)
                                                   : th_uniform(r, -3, 1));
    }
    th_upload(dt);
}

static void build_ssu(th_bundle *b, const void *cas, th_rng *r)
{
    const ssu_case *c = cas;
    unsigned o = c->opt;
    int sp = (o & SU_SP) != 0;
    th_tol none = {0, 0};
    int64_t shape[4];
    int n = ssu_shape(c, SOUT, shape);
    th_slot_set(b, SSTATE, "state", TH_INOUT, ssu_in(c, SSTATE, F32, r, -1, 1),
                act_tol(PORTSSM_F32));
    th_slot_set(b, SX, "x", TH_IN, ssu_in(c, SX, c->act, r, -1, 1), none);
    th_tensor *dt = th_slot_set(b, SDT, "dt", TH_IN, ssu_in(c, SDT, c->act, r, 0, 1), none);
    fill_dt(dt, sp, r);
    th_slot_set(b, SA, "A", TH_IN, ssu_in(c, SA, F32, r, -8, -0.5), none);
    th_slot_set(b, SB, "B", TH_IN, ssu_in(c, SB, c->act, r, -1, 1), none);
    th_slot_set(b, SC, "C", TH_IN, ssu_in(c, SC, c->act, r, -1, 1), none);
    th_slot_set(b, SDV, "D", TH_IN, (o & SU_D) ? ssu_in(c, SDV, F32, r, -1, 1) : NULL, none);
    th_slot_set(b, SZ, "z", TH_IN, (o & SU_Z) ? ssu_in(c, SZ, c->act, r, -2, 2) : NULL, none);
    th_slot_set(b, SDTB, "dt_bias", TH_IN,
                (o & SU_DTB) ? ssu_in(c, SDTB, F32, r, sp ? -0.5 : 0, sp ? 0.5 : 0.05) : NULL,
                none);
    th_slot_set(b, SINDICES, "state_batch_indices", TH_IN,
                (o & SU_IDX) ? new_indices(c->B, c->Bp, r) : NULL, none);
    th_slot_set(b, SOUT, "out", TH_OUT, th_oracle_out(c->act, n, shape), act_tol(c->act));
}

static portssm_status run_ssu(portssm_context *ctx, const th_bundle *b, const void *cas)
{
    const ssu_case *c = cas;
    portssm_selective_state_update_args a;
    memset(&a, 0, sizeof a);
    a.state = th_slot_view(b, SSTATE);
    a.x = th_slot_view(b, SX);
    a.dt = th_slot_view(b, SDT);
    a.A = th_slot_view(b, SA);
    a.B = th_slot_view(b, SB);
    a.C = th_slot_view(b, SC);
    a.D = th_slot_view(b, SDV);
    a.z = th_slot_view(b, SZ);
    a.dt_bias = th_slot_view(b, SDTB);
    a.state_batch_indices = th_slot_view(b, SINDICES);
    a.out = th_slot_view(b, SOUT);
    a.dt_softplus = (c->opt & SU_SP) != 0;
    return portssm_selective_state_update(ctx, &a);
}

/* The definition in double: out (B,H,P) and the new pool (Bp,H,P,N), row-major. */
static void ssu_reference(const ssu_case *c, const th_bundle *in, double *out, double *pool)
{
    int64_t B = c->B, H = c->heads ? c->H : 1, P = c->P, N = c->N, G = c->heads ? c->G : 1;
    int64_t Bp = ssu_pool(c);
    double *s0 = th_values(in->s[SSTATE].t), *x = th_values(in->s[SX].t);
    double *dt = th_values(in->s[SDT].t), *A = th_values(in->s[SA].t);
    double *Bm = th_values(in->s[SB].t), *Cm = th_values(in->s[SC].t);
    double *Dv = in->s[SDV].t ? th_values(in->s[SDV].t) : NULL;
    double *z = in->s[SZ].t ? th_values(in->s[SZ].t) : NULL;
    double *dtb = in->s[SDTB].t ? th_values(in->s[SDTB].t) : NULL;
    memcpy(pool, s0, (size_t)(Bp * H * P * N) * sizeof *pool);
    for (int64_t b = 0; b < B; b++) {
        int64_t row = index_of(in->s[SINDICES].t, b);
        int valid = row >= 0 && row < Bp;
        for (int64_t h = 0; h < H; h++) {
            int64_t g = h / (H / G);
            for (int64_t p = 0; p < P; p++) {
                int64_t i = (b * H + h) * P + p, hp = h * P + p;
                if (!valid) {
                    out[i] = 0;
                    continue;
                }
                double d = dt[i] + (dtb ? dtb[hp] : 0);
                if (c->opt & SU_SP)
                    d = d <= 20 ? log1p(exp(d)) : d;
                double y = 0;
                for (int64_t n = 0; n < N; n++) {
                    double *s = &pool[((row * H + h) * P + p) * N + n];
                    *s = exp(A[hp * N + n] * d) * *s + Bm[(b * G + g) * N + n] * d * x[i];
                    y += *s * Cm[(b * G + g) * N + n];
                }
                if (Dv)
                    y += Dv[hp] * x[i];
                if (z)
                    y *= z[i] / (1 + exp(-z[i]));
                out[i] = y;
            }
        }
    }
    free(s0), free(x), free(dt), free(A), free(Bm), free(Cm), free(Dv), free(z), free(dtb);
}

static void verify_ssu(th_bundle *got, const th_bundle *init, const void *cas)
{
    const ssu_case *c = cas;
    int64_t Bp = ssu_pool(c), H = c->heads ? c->H : 1;
    check_pool(got->s[SOUT].t, got->s[SSTATE].t, init->s[SSTATE].t, init->s[SINDICES].t, Bp);
    if (!th_is_oracle())
        return;
    double *out = malloc((size_t)(c->B * H * c->P) * sizeof *out);
    double *pool = malloc((size_t)(Bp * H * c->P * c->N) * sizeof *pool);
    assert_true(out && pool);
    ssu_reference(c, init, out, pool);
    th_assert_close_values(got->s[SOUT].t, out, th_tol_ref(c->act), "out: cpu vs definition");
    th_assert_close_values(got->s[SSTATE].t, pool, th_tol_ref(PORTSSM_F32),
                           "state: cpu vs definition");
    free(out), free(pool);
}

/* ================================================================ cases */

#define BI UO_BIAS
#define SI UO_SILU
#define RING UO_RING
#define IDX UO_IDX

/* {act, wt, B, D, T, W, S, Bp, layout, options} */
static const upd_case upd_cases[] = {
    /* widths 1..8, 2-D x, shift register with S = W - 1 (S >= 1) */
    {F32, F32, 2, 67, 0, 1, 1, 0, CF, BI},
    {F32, F32, 2, 67, 0, 2, 1, 0, CL, SI},
    {F32, F32, 3, 67, 0, 3, 2, 0, CF, BI | SI},
    {F32, F32, 3, 67, 0, 4, 3, 0, CL, BI | SI},
    {F32, F32, 2, 33, 0, 5, 4, 0, PAD, 0},
    {F32, F32, 2, 33, 1, 6, 5, 0, GAP, BI},
    {F32, F32, 2, 33, 0, 7, 6, 0, CL, SI},
    {F32, F32, 2, 33, 0, 8, 7, 0, CF, BI | SI},
    /* a stamped width (2) and a runtime one (6) in the 16-bit dtypes */
    {F16, F32, 2, 33, 0, 2, 1, 0, CF, SI},
    {BF16, BF16, 2, 33, 3, 2, 4, 0, CL, BI},
    {BF16, F32, 2, 33, 0, 6, 5, 0, CF, BI | SI},
    /* S > W - 1; T = 2 and 5 (T > S: the state becomes the last S inputs) */
    {F32, F32, 3, 67, 0, 4, 9, 0, CF, BI},
    {F16, F32, 3, 67, 2, 4, 7, 0, CL, SI},
    {BF16, F32, 2, 67, 5, 4, 3, 0, CF, BI | SI},
    {F16, F16, 2, 67, 5, 3, 8, 0, CL, 0},
    /* ring buffer: cache_seqlens past S and negative; wrap-around with T > S */
    {F32, F32, 4, 67, 0, 4, 3, 0, CF, RING | BI},
    {F32, F32, 4, 67, 2, 4, 10, 0, CL, RING | SI},
    {BF16, BF16, 4, 33, 5, 3, 2, 0, CF, RING},
    {F32, F32, 4, 33, 5, 4, 3, 0, PAD | NEGL, RING | BI | SI},
    {F32, F32, 3, 33, 1, 8, 12, 0, CL, RING},
    {F32, F32, 3, 33, 0, 1, 2, 0, CF, RING | BI},
    /* a state pool larger than the batch, with invalid indices */
    {F32, F32, 4, 67, 0, 4, 3, 9, CF, IDX | BI | SI},
    {F16, F32, 5, 33, 2, 4, 6, 9, CL, IDX | RING},
    {BF16, F32, 5, 33, 5, 3, 2, 7, CF, IDX | RING | SI},
    {F32, F32, 1, 1, 0, 2, 1, 3, CF, IDX},
    {F16, F16, 4, 67, 0, 4, 3, 9, CL | PAD | NEGB, IDX},
    {F32, F32, 7, 5, 3, 5, 4, 12, GAP | NEGL, IDX | RING | BI},
    /* misaligned data, outputs not congruent with inputs or in the other orientation */
    {F32, F32, 3, 64, 2, 4, 5, 8, CL | SHIFT, IDX | RING | BI},
    {BF16, F32, 3, 64, 0, 4, 3, 0, CF | SHIFTO | XOUT, BI | SI},
    {F16, F32, 3, 64, 5, 3, 4, 6, CL | PADB, IDX | BI},
    /* past the widths the design requires (W > 8), which every backend here takes */
    {F32, F32, 2, 33, 0, 12, 11, 0, CF, BI},
    {F32, F32, 3, 33, 2, 12, 14, 5, CL, BI | RING | IDX},
};

/* Run for every (activation, weight) dtype pair: {B, D, T, W, S, Bp, layout, options}. */
static const upd_case upd_core[] = {
    {0, 0, 3, 67, 2, 4, 5, 8, CL, IDX | RING | BI | SI},
    {0, 0, 3, 33, 0, 4, 3, 0, CF, BI | SI},
};

static const portssm_dtype dtype_pairs[][2] = {
    {F32, F32}, {F16, F32}, {F16, F16}, {BF16, F32}, {BF16, BF16}};

#define OD SU_D
#define OZ SU_Z
#define DTB SU_DTB
#define SP SU_SP
#define SIDX SU_IDX

/* {act, heads, B, H, P, N, G, Bp, tied, layout, options}; Mamba-1 rows have H = G = 1, P = D */
static const ssu_case ssu_cases[] = {
    /* Mamba-1 form */
    {F32, 0, 2, 1, 67, 16, 1, 0, 0, CF, OD | OZ | DTB | SP},
    {F16, 0, 2, 1, 67, 16, 1, 0, 0, CL, OD | OZ | DTB | SP},
    {BF16, 0, 2, 1, 67, 16, 1, 0, 0, CF, OD | OZ | DTB | SP},
    {F32, 0, 3, 1, 5, 1, 1, 0, 0, CF, SP},
    {F32, 0, 2, 1, 33, 128, 1, 0, 0, PAD, DTB | OD},
    {F32, 0, 2, 1, 17, 256, 1, 0, 0, CL, SP | OZ},
    {F32, 0, 4, 1, 33, 16, 1, 9, 0, CF, SIDX | OD | OZ | DTB | SP},
    {BF16, 0, 4, 1, 33, 16, 1, 9, 0, GAP | NEGL, SIDX | SP},
    {F32, 0, 1, 1, 1, 16, 1, 0, 0, CF, 0},
    /* heads form, untied and tied (Mamba-2: A, dt over P and N with stride 0) */
    {F32, 1, 2, 4, 16, 16, 1, 0, 0, CF, OD | OZ | DTB | SP},
    {F32, 1, 2, 4, 16, 16, 2, 0, 1, CF, OD | DTB | SP},
    {F16, 1, 2, 6, 37, 64, 3, 0, 1, CL, OD | OZ | DTB | SP},
    {BF16, 1, 2, 4, 16, 128, 4, 0, 1, CF, OD | OZ | DTB | SP},
    {F32, 1, 2, 2, 8, 256, 2, 0, 0, PAD, OD | SP},
    {F32, 1, 4, 4, 16, 16, 2, 9, 1, CF, SIDX | OD | OZ | DTB | SP},
    {F16, 1, 4, 4, 16, 16, 2, 9, 1, CL | PAD, SIDX | OD | OZ | DTB | SP},
    {BF16, 1, 4, 4, 16, 16, 2, 9, 1, CF | NEGB, SIDX | OD | OZ | DTB | SP},
    {BF16, 1, 4, 4, 16, 1, 1, 9, 0, CL, SIDX | SP},
    {F16, 1, 3, 3, 5, 16, 3, 0, 0, CF, OZ},
    {F32, 1, 2, 8, 64, 128, 1, 0, 1, CF, OD | DTB | SP},
    {F32, 1, 3, 2, 7, 16, 1, 0, 0, GAP | NEGL, OD | OZ | DTB},
    /* a state off 16-byte alignment, odd batch strides, outputs off the inputs' alignment */
    {F32, 1, 3, 4, 16, 16, 2, 0, 0, CF | SHIFT, OD | OZ | DTB | SP},
    {F16, 1, 3, 4, 16, 16, 2, 8, 1, CL | PADB | XOUT, SIDX | OD | OZ | DTB | SP},
    {F32, 0, 3, 1, 64, 16, 1, 0, 0, CF | SHIFTO, OD | OZ | DTB | SP},
};

static const upd_case probe_upd = {F32, F32, 1, 2, 0, 4, 3, 0, CF, 0};
static const ssu_case probe_ssu = {F32, 0, 1, 1, 2, 4, 1, 0, 0, CF, 0};

static const th_op op_upd = {"causal_conv1d_update", build_upd, run_upd, verify_upd, &probe_upd};
static const th_op op_ssu = {"selective_state_update", build_ssu, run_ssu, verify_ssu, &probe_ssu};

/* ---------------------------------------------------------------- registration */

#define MAX_CASES 96
typedef struct decode_case {
    int kind; /* 0: conv update, 1: state update */
    upd_case u;
    ssu_case s;
} decode_case;
static decode_case cases[MAX_CASES];
static struct CMUnitTest tests[MAX_CASES];
static char names[MAX_CASES][256];
static size_t ncases;

static void run_case(void **state)
{
    const decode_case *c = *state;
    uint64_t salt = 0xdec00000u + (uint64_t)(c - cases);
    if (c->kind == 0)
        th_cross_check(&op_upd, &c->u, c->u.layout, th_alt_layout(c->u.layout), salt);
    else
        th_cross_check(&op_ssu, &c->s, c->s.layout, th_alt_layout(c->s.layout), salt);
}

static void add(decode_case c)
{
    assert_true(ncases < MAX_CASES);
    char lay[96];
    char *buf = names[ncases];
    size_t n = sizeof names[0];
    if (c.kind == 0) {
        const upd_case *u = &c.u;
        unsigned o = u->opt;
        th_layout_name(u->layout, lay, sizeof lay);
        snprintf(buf, n, "conv_update %s/w:%s B%lld D%lld %s%lld W%lld S%lld %s%s%s%s",
                 portssm_dtype_name(u->act), portssm_dtype_name(u->wt), (long long)u->B,
                 (long long)u->D, u->T ? "T" : "2-D T", (long long)(u->T ? u->T : 1),
                 (long long)u->W, (long long)u->S, lay, (o & UO_BIAS) ? " bias" : "",
                 (o & UO_SILU) ? " silu" : "", (o & UO_RING) ? " cache_seqlens" : "");
        if (o & UO_IDX)
            snprintf(buf + strlen(buf), n - strlen(buf), " indices/pool%lld", (long long)u->Bp);
    } else {
        const ssu_case *s = &c.s;
        unsigned o = s->opt;
        th_layout_name(s->layout, lay, sizeof lay);
        if (s->heads)
            snprintf(buf, n, "state_update %s heads B%lld H%lld P%lld N%lld G%lld%s %s",
                     portssm_dtype_name(s->act), (long long)s->B, (long long)s->H, (long long)s->P,
                     (long long)s->N, (long long)s->G, s->tied ? " tied" : "", lay);
        else
            snprintf(buf, n, "state_update %s mamba1 B%lld D%lld N%lld %s",
                     portssm_dtype_name(s->act), (long long)s->B, (long long)s->P, (long long)s->N,
                     lay);
        snprintf(buf + strlen(buf), n - strlen(buf), "%s%s%s%s", (o & SU_D) ? " D" : "",
                 (o & SU_Z) ? " z" : "", (o & SU_DTB) ? " dt_bias" : "",
                 (o & SU_SP) ? " softplus" : "");
        if (o & SU_IDX)
            snprintf(buf + strlen(buf), n - strlen(buf), " indices/pool%lld", (long long)s->Bp);
    }
    cases[ncases] = c;
    tests[ncases] = (struct CMUnitTest){names[ncases], run_case, NULL, th_teardown, &cases[ncases]};
    ncases++;
}

int main(int argc, char **argv)
{
    decode_case c;
    memset(&c, 0, sizeof c);
    for (size_t i = 0; i < sizeof upd_cases / sizeof upd_cases[0]; i++) {
        c.kind = 0, c.u = upd_cases[i];
        add(c);
    }
    for (size_t p = 0; p < sizeof dtype_pairs / sizeof dtype_pairs[0]; p++)
        for (size_t i = 0; i < sizeof upd_core / sizeof upd_core[0]; i++) {
            c.kind = 0, c.u = upd_core[i];
            c.u.act = dtype_pairs[p][0], c.u.wt = dtype_pairs[p][1];
            add(c);
        }
    memset(&c, 0, sizeof c);
    for (size_t i = 0; i < sizeof ssu_cases / sizeof ssu_cases[0]; i++) {
        c.kind = 1, c.s = ssu_cases[i];
        add(c);
    }
    return th_main(argc, argv, "test_decode", tests, ncases);
}
