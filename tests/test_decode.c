/*
 * test_decode.c - the decode steps, causal_conv1d_update and selective_state_update, on the
 * backend under test against the cpu oracle (th_cross_check: layouts, guards, determinism).
 * On every backend: a sequence whose state index is outside [0, B') gets exactly zero output and
 * leaves the pool untouched, and every pool row no sequence selects stays byte-identical.  On the
 * cpu backend also against the definitions of DESIGN.md / portssm.h computed here in double.
 * The state update's state in each of its dtypes (f32, f16, bf16) with each activation dtype,
 * and a 16-bit state over several steps against the recurrence in double, within one rounding
 * of the state per step (run_steps).
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
    portssm_dtype sdt;           /* the state's dtype (0: F32)            */
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
    /* a 16-bit state: the backend and the oracle each round the new state once, from values
     * that differ by the F32 arithmetic: one unit of the state's dtype apart at most (th_ulp is
     * the unit relative to the value's power of two), and 1e-4 for the F32 error of a sum that
     * cancels (terms up to 23: dt past softplus's threshold) */
    const th_tol state_tol = c->sdt == PORTSSM_F32 ? act_tol(PORTSSM_F32)
                                                   : (th_tol){th_ulp(c->sdt), 1e-4};
    th_slot_set(b, SSTATE, "state", TH_INOUT, ssu_in(c, SSTATE, c->sdt, r, -1, 1), state_tol);
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
    /* the oracle rounds the new state once to its dtype: within half a unit of it */
    th_assert_close_values(got->s[SSTATE].t, pool, th_tol_ref(c->sdt),
                           "state: cpu vs definition");
    free(out), free(pool);
}

/* ================================================================ 16-bit states over steps */

/*
 * A 16-bit state against the recurrence in double over several decode steps, on the backend
 * under test: each step may add one rounding of the new state (half a unit, 2^-11 relative for
 * F16 and 2^-8 for BF16, to nearest even) to what the earlier steps' roundings left, decayed by
 * exp(A dt) like the state itself, plus the F32 arithmetic's error (far smaller: 2^-17 relative
 * is allowed).  A step that rounded twice, truncated, or kept no 16-bit value would exceed the
 * bound at the first step already.  The pool has more rows than sequences and one sequence an
 * index outside it: rows that no sequence selects must stay bit for bit as they were.
 */
typedef struct steps_case {
    portssm_dtype act, sdt;
    int heads, tied;           /* heads 0: Mamba-1 form, H = G = 1 */
    int64_t B, H, P, N, G, Bp;
    int steps;
} steps_case;

/* idx for an operand of the two forms: heads (i0, h, i2[, i3]) or Mamba-1 (i0, i2[, i3]). */
static const int64_t *steps_idx(const steps_case *c, int64_t *idx, int64_t i0, int64_t h,
                                int64_t i2, int64_t i3)
{
    int n = 0;
    idx[n++] = i0;
    if (c->heads)
        idx[n++] = h;
    idx[n++] = i2;
    idx[n++] = i3;
    return idx;
}

static void run_steps(const steps_case *c, uint64_t salt)
{
    th_rng r = th_rng_for(salt);
    const int64_t B = c->B, H = c->H, P = c->P, N = c->N, G = c->G, Bp = c->Bp;
    const int hd = c->heads != 0;
    /* shapes of the heads form, the H (and G) dim dropped for Mamba-1 */
    int64_t s_shape[4] = {Bp, H, P, N}, x_shape[3] = {B, H, P}, a_shape[3] = {H, P, N};
    int64_t bc_shape[3] = {B, G, N}, i_shape[1] = {B};
    if (!hd) {
        s_shape[1] = P, s_shape[2] = N;
        x_shape[1] = P;
        a_shape[0] = P, a_shape[1] = N;
        bc_shape[1] = N;
    }
    const int64_t a_tied[3] = {1, 0, 0}, dt_tied[3] = {H, 1, 0};
    th_tensor *state = th_new(th_ctx, c->sdt, 3 + hd, s_shape, NULL);
    th_tensor *x = th_new(th_ctx, c->act, 2 + hd, x_shape, NULL);
    th_tensor *dt = th_new(th_ctx, c->act, 2 + hd, x_shape, c->tied ? dt_tied : NULL);
    th_tensor *A = th_new(th_ctx, PORTSSM_F32, 2 + hd, a_shape, c->tied ? a_tied : NULL);
    th_tensor *Bm = th_new(th_ctx, c->act, 2 + hd, bc_shape, NULL);
    th_tensor *Cm = th_new(th_ctx, c->act, 2 + hd, bc_shape, NULL);
    th_tensor *out = th_new(th_ctx, c->act, 2 + hd, x_shape, NULL);
    th_tensor *ind = th_new(th_ctx, PORTSSM_I32, 1, i_shape, NULL);
    th_fill_uniform(state, &r, -1, 1);
    th_fill_uniform(A, &r, -2, -0.5);
    /* sequence b at a random distinct row; the last one outside the pool */
    int64_t *row = malloc((size_t)Bp * sizeof *row);
    const int64_t cells = Bp * H * P * N;
    double *ref = malloc((size_t)cells * sizeof *ref), *bound = calloc((size_t)cells, sizeof *bound);
    double *init = malloc((size_t)cells * sizeof *init);
    char *used = calloc((size_t)Bp, 1);
    assert_true(row && ref && bound && init && used);
    for (int64_t i = 0; i < Bp; i++)
        row[i] = i;
    for (int64_t i = Bp - 1; i > 0; i--) {
        int64_t j = th_randint(&r, 0, i), t = row[i];
        row[i] = row[j], row[j] = t;
    }
    if (B > 1)
        row[B - 1] = -1;
    for (int64_t b = 0; b < B; b++) {
        th_set(ind, &b, (double)row[b]);
        if (row[b] >= 0)
            used[row[b]] = 1;
    }
    th_upload(ind);
    int64_t idx[4];
    for (int64_t k = 0; k < cells; k++) {
        th_unravel(state, k, idx);
        ref[k] = init[k] = th_get(state, idx);
    }
    const double u = c->sdt == PORTSSM_F16 ? ldexp(1, -11) : ldexp(1, -8);
    const double tiny = c->sdt == PORTSSM_F16 ? ldexp(1, -25) : ldexp(1, -134);

    portssm_selective_state_update_args a;
    memset(&a, 0, sizeof a);
    a.state = th_view(state), a.x = th_view(x), a.dt = th_view(dt), a.A = th_view(A);
    a.B = th_view(Bm), a.C = th_view(Cm), a.out = th_view(out);
    a.state_batch_indices = th_view(ind);
    for (int step = 0; step < c->steps; step++) {
        th_fill_uniform(x, &r, -1, 1);
        th_fill_uniform(dt, &r, 0.01, 0.5);
        th_fill_uniform(Bm, &r, -1, 1);
        th_fill_uniform(Cm, &r, -1, 1);
        th_poison(out);
        TH_CHECK_OP(th_ctx, portssm_selective_state_update(th_ctx, &a));
        th_download(state);
        for (int64_t k = 0; k < cells; k++) {
            th_unravel(state, k, idx);
            const int64_t rw = idx[0], h = hd ? idx[1] : 0, p = idx[1 + hd], n = idx[2 + hd];
            const double got = th_get(state, idx);
            if (!used[rw]) {
                if (memcmp(&got, &init[k], sizeof got) != 0)
                    fail_msg("step %d: state row %lld, which no sequence selects, changed: "
                             "element %lld is %.9g, was %.9g",
                             step, (long long)rw, (long long)(k % (cells / Bp)), got, init[k]);
                continue;
            }
            int64_t b = 0;
            while (row[b] != rw)
                b++;
            const int64_t g = h / (H / G);
            int64_t j[4];
            const int64_t ja[3] = {hd ? h : p, hd ? p : n, n}; /* A: (H,P,N) or (D,N) */
            const double d = th_get(dt, steps_idx(c, j, b, h, p, 0));
            const double da = exp(th_get(A, ja) * d);
            const double bdx =
                th_get(Bm, steps_idx(c, j, b, g, n, 0)) * d * th_get(x, steps_idx(c, j, b, h, p, 0));
            /* the backend's F32 step works on its state (within bound[k] of ref[k]) */
            const double carried = da * bound[k];
            const double f32_err = ldexp(1, -17) * (da * fabs(ref[k]) + carried + fabs(bdx));
            ref[k] = da * ref[k] + bdx;
            bound[k] = carried + f32_err + u * (fabs(ref[k]) + carried + f32_err) + tiny;
            if (!(fabs(got - ref[k]) <= bound[k]))
                fail_msg("step %d: state[%lld,%lld,%lld,%lld] (sequence %lld) = %.9g, the "
                         "recurrence in double gives %.9g: %.3g off, more than one rounding "
                         "of the state per step allows (%.3g)",
                         step, (long long)rw, (long long)h, (long long)p, (long long)n,
                         (long long)b, got, ref[k], fabs(got - ref[k]), bound[k]);
        }
    }
    print_message("%d steps of a %s state, %lld sequences: within one rounding per step\n",
                  c->steps, portssm_dtype_name(c->sdt), (long long)B);
    free(row), free(ref), free(bound), free(init), free(used);
}

static const steps_case steps_cases[] = {
    /* {act, state, heads, tied, B, H, P, N, G, Bp, steps} */
    {BF16, F16, 1, 1, 3, 4, 8, 128, 2, 5, 12}, /* serving's case: bf16 in, f16 state, Mamba-2 */
    {F16, BF16, 1, 0, 3, 2, 4, 64, 1, 4, 12},
    {F32, BF16, 0, 0, 3, 1, 24, 16, 1, 4, 12}, /* Mamba-1 */
    {BF16, F16, 0, 0, 2, 1, 9, 5, 1, 3, 12},
};

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

/* {act, heads, B, H, P, N, G, Bp, tied, layout, options, state dtype}; Mamba-1 rows have
 * H = G = 1, P = D */
static const ssu_case ssu_cases[] = {
    /* Mamba-1 form */
    {F32, 0, 2, 1, 67, 16, 1, 0, 0, CF, OD | OZ | DTB | SP, F32},
    {F16, 0, 2, 1, 67, 16, 1, 0, 0, CL, OD | OZ | DTB | SP, F32},
    {BF16, 0, 2, 1, 67, 16, 1, 0, 0, CF, OD | OZ | DTB | SP, F32},
    {F32, 0, 3, 1, 5, 1, 1, 0, 0, CF, SP, F32},
    {F32, 0, 2, 1, 33, 128, 1, 0, 0, PAD, DTB | OD, F32},
    {F32, 0, 2, 1, 17, 256, 1, 0, 0, CL, SP | OZ, F32},
    {F32, 0, 4, 1, 33, 16, 1, 9, 0, CF, SIDX | OD | OZ | DTB | SP, F32},
    {BF16, 0, 4, 1, 33, 16, 1, 9, 0, GAP | NEGL, SIDX | SP, F32},
    {F32, 0, 1, 1, 1, 16, 1, 0, 0, CF, 0, F32},
    /* heads form, untied and tied (Mamba-2: A, dt over P and N with stride 0) */
    {F32, 1, 2, 4, 16, 16, 1, 0, 0, CF, OD | OZ | DTB | SP, F32},
    {F32, 1, 2, 4, 16, 16, 2, 0, 1, CF, OD | DTB | SP, F32},
    {F16, 1, 2, 6, 37, 64, 3, 0, 1, CL, OD | OZ | DTB | SP, F32},
    {BF16, 1, 2, 4, 16, 128, 4, 0, 1, CF, OD | OZ | DTB | SP, F32},
    {F32, 1, 2, 2, 8, 256, 2, 0, 0, PAD, OD | SP, F32},
    {F32, 1, 4, 4, 16, 16, 2, 9, 1, CF, SIDX | OD | OZ | DTB | SP, F32},
    {F16, 1, 4, 4, 16, 16, 2, 9, 1, CL | PAD, SIDX | OD | OZ | DTB | SP, F32},
    {BF16, 1, 4, 4, 16, 16, 2, 9, 1, CF | NEGB, SIDX | OD | OZ | DTB | SP, F32},
    {BF16, 1, 4, 4, 16, 1, 1, 9, 0, CL, SIDX | SP, F32},
    {F16, 1, 3, 3, 5, 16, 3, 0, 0, CF, OZ, F32},
    {F32, 1, 2, 8, 64, 128, 1, 0, 1, CF, OD | DTB | SP, F32},
    {F32, 1, 3, 2, 7, 16, 1, 0, 0, GAP | NEGL, OD | OZ | DTB, F32},
    /* a state off 16-byte alignment, odd batch strides, outputs off the inputs' alignment */
    {F32, 1, 3, 4, 16, 16, 2, 0, 0, CF | SHIFT, OD | OZ | DTB | SP, F32},
    {F16, 1, 3, 4, 16, 16, 2, 8, 1, CL | PADB | XOUT, SIDX | OD | OZ | DTB | SP, F32},
    {F32, 0, 3, 1, 64, 16, 1, 0, 0, CF | SHIFTO, OD | OZ | DTB | SP, F32},
};

/* Run for every activation dtype x state dtype ({F32, F16, BF16} each; the state's dtype is
 * independent of the activations'): {B, H, P, N, G, Bp, tied, layout, options} of the forms whose
 * kernels differ (a Mamba-2 pool with N 128: the pipelined kernel; Mamba-1 N 16: the flat one;
 * an odd N in a strided layout: the general one, which the alternative layouts also take). */
static const ssu_case ssu_state_core[] = {
    {0, 1, 5, 4, 16, 128, 2, 9, 1, CF, SIDX | OD | OZ | DTB | SP, 0},
    {0, 0, 3, 1, 33, 16, 1, 0, 0, CF, OD | OZ | DTB | SP, 0},
    {0, 0, 4, 1, 7, 5, 1, 7, 0, GAP | NEGL, SIDX | OD | DTB, 0},
};
static const portssm_dtype state_dtypes[] = {F32, F16, BF16};
static const portssm_dtype act_dtypes[] = {F32, F16, BF16};

static const upd_case probe_upd = {F32, F32, 1, 2, 0, 4, 3, 0, CF, 0};
static const ssu_case probe_ssu = {F32, 0, 1, 1, 2, 4, 1, 0, 0, CF, 0, F32};

static const th_op op_upd = {"causal_conv1d_update", build_upd, run_upd, verify_upd, &probe_upd};
static const th_op op_ssu = {"selective_state_update", build_ssu, run_ssu, verify_ssu, &probe_ssu};

/* ---------------------------------------------------------------- registration */

#define MAX_CASES 128
typedef struct decode_case {
    int kind; /* 0: conv update, 1: state update, 2: a 16-bit state over steps */
    upd_case u;
    ssu_case s;
    steps_case m;
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
    else if (c->kind == 1)
        th_cross_check(&op_ssu, &c->s, c->s.layout, th_alt_layout(c->s.layout), salt);
    else
        run_steps(&c->m, salt);
}

static void add(decode_case c)
{
    th_case_room("test_decode", ncases, MAX_CASES);
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
    } else if (c.kind == 2) {
        const steps_case *m = &c.m;
        snprintf(buf, n, "state_update %s state:%s %s B%lld H%lld P%lld N%lld G%lld pool%lld%s: "
                 "%d steps within one rounding each",
                 portssm_dtype_name(m->act), portssm_dtype_name(m->sdt),
                 m->heads ? "heads" : "mamba1", (long long)m->B, (long long)m->H, (long long)m->P,
                 (long long)m->N, (long long)m->G, (long long)m->Bp, m->tied ? " tied" : "",
                 m->steps);
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
        snprintf(buf + strlen(buf), n - strlen(buf), " state:%s", portssm_dtype_name(s->sdt));
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
    for (size_t sd = 0; sd < sizeof state_dtypes / sizeof state_dtypes[0]; sd++)
        for (size_t ad = 0; ad < sizeof act_dtypes / sizeof act_dtypes[0]; ad++)
            for (size_t i = 0; i < sizeof ssu_state_core / sizeof ssu_state_core[0]; i++) {
                c.kind = 1, c.s = ssu_state_core[i];
                c.s.act = act_dtypes[ad], c.s.sdt = state_dtypes[sd];
                add(c);
            }
    memset(&c, 0, sizeof c);
    for (size_t i = 0; i < sizeof steps_cases / sizeof steps_cases[0]; i++) {
        c.kind = 2, c.m = steps_cases[i];
        add(c);
    }
    return th_main(argc, argv, "test_decode", tests, ncases);
}
