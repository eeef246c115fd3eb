/*
 * test_ssd.c - ssd_chunk_scan_fwd and ssd_chunk_scan_bwd (Mamba-2) on the backend under test
 * against the cpu oracle (th_cross_check: layouts, guards, determinism), and on the cpu backend
 * against the recurrence of DESIGN.md computed here in double (forward) and its finite
 * differences (backward).  Plus: the SSD's final states continued by selective_state_update
 * (heads form) equal one longer SSD call, and the bad-argument paths.
 */
#include "harness.h"
#include "vendor_stream.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum {
    DO_D = 1 << 0,      /* D given (H,P)                                     */
    DO_DH = 1 << 1,     /* D given per head (H)                              */
    DO_Z = 1 << 2,      /* z given                                           */
    DO_DTB = 1 << 3,    /* dt_bias given                                     */
    DO_SP = 1 << 4,     /* dt_softplus                                       */
    DO_LIM = 1 << 5,    /* dt_limit [0.05, 0.8]                              */
    DO_INIT = 1 << 6,   /* initial_states given                              */
    DO_FINAL = 1 << 7,  /* fwd: final_states wanted                          */
    DO_SEQ = 1 << 8,    /* seq_idx with several sequences per row            */
    DO_CU = 1 << 9,     /* cu_seqlens (B = 1), varlen_states wanted in fwd    */
    DO_DFINAL = 1 << 10, /* bwd: dfinal_states given                          */
    DO_DINIT = 1 << 11, /* bwd: dinitial_states wanted                       */
    DO_EDGE = 1 << 12,  /* with SEQ/CU: a sequence starts at token `chunk`    */
    DO_NODZ = 1 << 13,  /* bwd with z: dz not wanted (absent)                 */
    DO_YS = 1 << 14,    /* with z: fwd writes y, bwd is given the forward's y */
    DO_CK = 1 << 15,    /* fwd writes checkpoints, bwd is given the forward's            */
    DO_SLOW = 1 << 16,  /* A in [-0.03, -0.01]: a state carries across whole chunks      */
    DO_SF16 = 1 << 17,  /* the states (initial, final, varlen, dfinal, dinitial) in f16  */
    DO_SBF16 = 1 << 18  /* ... in bf16                                                   */
};

#define LIM_LO 0.05
#define LIM_HI 0.8

typedef struct ssd_case {
    int bwd;
    portssm_dtype act;
    int64_t B, L, H, P, G, N;
    unsigned layout, opt;
    int32_t chunk;
} ssd_case;

/* The dtype of every state of the call (DO_SF16, DO_SBF16; else f32). */
static portssm_dtype state_dtype(const ssd_case *c)
{
    return (c->opt & DO_SF16) ? PORTSSM_F16 : (c->opt & DO_SBF16) ? PORTSSM_BF16 : PORTSSM_F32;
}

/* A state's tolerance: the chunked states' own (`t`, from the activation dtype), and one
 * rounding to the state dtype where it is narrower. */
static th_tol state_tol(const ssd_case *c, th_tol t)
{
    const th_tol s = th_tol_for(state_dtype(c));
    t.rtol = fmax(t.rtol, s.rtol);
    t.atol = fmax(t.atol, s.atol);
    return t;
}

enum {
    X, DT, A, BM, CM, DV, Z, DTB, INIT, SEQ, CU, OUT, FINAL, VARLEN,
    DOUT, DFINAL, DX, DDT, DA, DB, DC, DD, DZ, DDTB, DINIT, YS, CKPT
};

/* The checkpoints' interval (portssm.h: the chunk, from chunk_size and the dtype) and their
 * shape (B,H,K,P*N). */
static int64_t ckpt_interval(const ssd_case *c)
{
    const int64_t tile = c->act == PORTSSM_F32 ? 32 : 64;
    const int64_t q = c->chunk > 0 ? (c->chunk + tile - 1) / tile * tile : 256;
    return q < 256 ? q : 256;
}
static void ckpt_shape(const ssd_case *c, int64_t shape[4])
{
    shape[0] = c->B, shape[1] = c->H;
    shape[2] = (c->L + ckpt_interval(c) - 1) / ckpt_interval(c), shape[3] = c->P * c->N;
}

/* ---------------------------------------------------------------- inputs */

/* dt: with softplus U(-3, 1), else U(0.01, 0.3) - dt_bias; never within 1e-3 of the clamp's
 * ends after the bias and softplus (finite differences would straddle the kink), and a step of
 * at least 0.01 after the bias (a negative step makes the state grow as exp(|A| |dt| L): past
 * FLT_MAX within a few dozen tokens, where no f32 algorithm agrees with the double oracle). */
static double dt_final(double v, double bias, int sp)
{
    v += bias;
    return sp ? (v <= 20 ? log1p(exp(v)) : v) : v;
}

static void fill_dt(th_tensor *dt, const th_tensor *bias, unsigned o, th_rng *r)
{
    th_fill_uniform(dt, r, 0, 1); /* noise in the gaps */
    int64_t idx[3], n = th_numel(dt);
    for (int64_t k = 0; k < n; k++) {
        th_unravel(dt, k, idx);
        double b = bias ? th_get(bias, &idx[2]) : 0;
        for (;;) {
            th_set(dt, idx, (o & DO_SP) ? th_uniform(r, -3, 1) : th_uniform(r, 0.01, 0.3) - b);
            double f = dt_final((double)(float)th_get(dt, idx), b, (o & DO_SP) != 0);
            if (f >= 0.01 &&
                (!(o & DO_LIM) || (fabs(f - LIM_LO) > 1e-3 && fabs(f - LIM_HI) > 1e-3)))
                break;
        }
    }
    th_upload(dt);
}

/* Sequence lengths of a row of L tokens: a random split into 3 (one of length 1 when L > 3). */
static void split3(int64_t L, th_rng *r, int64_t *cuts)
{
    cuts[0] = 0;
    cuts[3] = L;
    if (L < 3) {
        cuts[1] = cuts[2] = L;
        return;
    }
    cuts[1] = 1 + th_randint(r, 0, L - 3);
    cuts[2] = cuts[1] + 1; /* a sequence of one token */
    if (th_uniform(r, 0, 1) < 0.5 && cuts[1] > 1) { /* or the length-1 sequence first */
        cuts[2] = cuts[1];
        cuts[1] = 1;
    }
}

static void build_inputs(th_bundle *b, const ssd_case *c, th_rng *r)
{
    const int64_t sx[4] = {c->B, c->L, c->H, c->P}, sdt[3] = {c->B, c->L, c->H};
    const int64_t sbc[4] = {c->B, c->L, c->G, c->N}, sh[1] = {c->H}, shp[2] = {c->H, c->P};
    const int64_t ss[4] = {c->B, c->H, c->P, c->N}, sbl[2] = {c->B, c->L};
    const th_tol none = {0, 0};
    const unsigned o = c->opt;
    th_tensor *bias = (o & DO_DTB) ? th_oracle_in(PORTSSM_F32, 1, sh, NULL, r, -0.5, 0.5) : NULL;
    th_tensor *dt = th_new(th_oracle, c->act, 3, sdt, NULL);
    fill_dt(dt, bias, o, r);
    th_slot_set(b, X, "x", TH_IN, th_oracle_in(c->act, 4, sx, NULL, r, -1, 1), none);
    th_slot_set(b, DT, "dt", TH_IN, dt, none);
    /* (with A in [-8, -0.5] a chunk's decay is ~exp(-38) or less at 64 tokens: the terms it
     * weighs, the chunk ends' pull on dA among them, need DO_SLOW to be seen) */
    th_slot_set(b, A, "A", TH_IN,
                (o & DO_SLOW) ? th_oracle_in(PORTSSM_F32, 1, sh, NULL, r, -0.03, -0.01)
                              : th_oracle_in(PORTSSM_F32, 1, sh, NULL, r, -8, -0.5),
                none);
    th_slot_set(b, BM, "B", TH_IN, th_oracle_in(c->act, 4, sbc, NULL, r, -1, 1), none);
    th_slot_set(b, CM, "C", TH_IN, th_oracle_in(c->act, 4, sbc, NULL, r, -1, 1), none);
    th_tensor *Dv = NULL;
    if (o & DO_D)
        Dv = th_oracle_in(PORTSSM_F32, 2, shp, NULL, r, -1, 1);
    else if (o & DO_DH)
        Dv = th_oracle_in(PORTSSM_F32, 1, sh, NULL, r, -1, 1);
    th_slot_set(b, DV, "D", TH_IN, Dv, none);
    th_slot_set(b, Z, "z", TH_IN, (o & DO_Z) ? th_oracle_in(c->act, 4, sx, NULL, r, -2, 2) : NULL,
                none);
    th_slot_set(b, DTB, "dt_bias", TH_IN, bias, none);
    th_slot_set(b, INIT, "initial_states", TH_IN,
                (o & DO_INIT) ? th_oracle_in(state_dtype(c), 4, ss, NULL, r, -1, 1) : NULL, none);
    th_tensor *seq = NULL, *cu = NULL;
    if (o & (DO_SEQ | DO_CU)) {
        seq = th_new(th_oracle, PORTSSM_I32, 2, sbl, NULL);
        th_fill_int(seq, r, 0, 0);
        int64_t cuts[4], idx[2];
        for (idx[0] = 0; idx[0] < c->B; idx[0]++) {
            split3(c->L, r, cuts);
            if ((o & DO_EDGE) && c->chunk + 1 < c->L) /* a restart on a chunk boundary */
                cuts[1] = c->chunk, cuts[2] = c->chunk + 1;
            for (idx[1] = 0; idx[1] < c->L; idx[1]++) {
                int k = idx[1] >= cuts[2] ? 2 : idx[1] >= cuts[1] ? 1 : 0;
                th_set(seq, idx, 7 * k + 3); /* any labels: only changes matter */
            }
            if ((o & DO_CU) && idx[0] == 0) {
                cu = th_new(th_oracle, PORTSSM_I32, 1, (const int64_t[]){4}, NULL);
                th_fill_int(cu, r, 0, 0);
                for (int64_t k = 0; k < 4; k++)
                    th_set(cu, &k, (double)cuts[k]);
                th_upload(cu);
            }
        }
        th_upload(seq);
    }
    th_slot_set(b, SEQ, "seq_idx", TH_IN, (o & DO_SEQ) ? seq : NULL, none);
    th_slot_set(b, CU, "cu_seqlens", TH_IN, cu, none);
}

/* DO_SLOW's outputs: three times the tolerances (build_bwd says why). */
static void slow_tolerances(th_bundle *b)
{
    for (int k = 0; k < b->n; k++)
        if (b->s[k].t && b->s[k].role == TH_OUT)
            b->s[k].tol.atol *= 3, b->s[k].tol.rtol *= 3;
}

static void build_fwd(th_bundle *b, const void *cas, th_rng *r)
{
    const ssd_case *c = cas;
    const int64_t sx[4] = {c->B, c->L, c->H, c->P}, ss[4] = {c->B, c->H, c->P, c->N};
    const int64_t sv[4] = {3, c->H, c->P, c->N};
    build_inputs(b, c, r);
    th_slot_set(b, OUT, "out", TH_OUT, th_oracle_out(c->act, 4, sx), th_tol_for(c->act));
    /* States are f32, but the chunked algorithm forms their products from 16-bit operands
     * (dt-and-decay-weighted x rounded to the activation dtype, as mamba-ssm's kernels do): for
     * 16-bit activations they get the f16 tolerance, f32 ones keep f32's. */
    const th_tol st = state_tol(c, th_tol_for(c->act == PORTSSM_F32 ? PORTSSM_F32 : PORTSSM_F16));
    th_slot_set(b, FINAL, "final_states", TH_OUT,
                (c->opt & DO_FINAL) ? th_oracle_out(state_dtype(c), 4, ss) : NULL, st);
    th_slot_set(b, VARLEN, "varlen_states", TH_OUT,
                (c->opt & DO_CU) ? th_oracle_out(state_dtype(c), 4, sv) : NULL, st);
    th_slot_set(b, YS, "y", TH_OUT, (c->opt & DO_YS) ? th_oracle_out(c->act, 4, sx) : NULL,
                th_tol_for(c->act));
    /* the states as final_states, rounded to the activation dtype */
    int64_t sk[4];
    ckpt_shape(c, sk);
    th_slot_set(b, CKPT, "checkpoints", TH_OUT,
                (c->opt & DO_CK) ? th_oracle_out(c->act, 4, sk) : NULL, th_tol_for(c->act));
    b->s[CKPT].dense = 1;
    if (c->opt & DO_SLOW) /* (build_bwd says why) */
        slow_tolerances(b);
}

/* The inputs in bundle b and case c's options into either op's args (zeroed first: no
 * outputs), which name them alike. */
#define SSD_INPUTS_INTO(a, b, c)                                                               \
    do {                                                                                       \
        memset(&(a), 0, sizeof(a));                                                            \
        (a).x = th_slot_view(b, X);                                                            \
        (a).dt = th_slot_view(b, DT);                                                          \
        (a).A = th_slot_view(b, A);                                                            \
        (a).B = th_slot_view(b, BM);                                                           \
        (a).C = th_slot_view(b, CM);                                                           \
        (a).D = th_slot_view(b, DV);                                                           \
        (a).z = th_slot_view(b, Z);                                                            \
        (a).dt_bias = th_slot_view(b, DTB);                                                    \
        (a).initial_states = th_slot_view(b, INIT);                                            \
        (a).seq_idx = th_slot_view(b, SEQ);                                                    \
        (a).cu_seqlens = th_slot_view(b, CU);                                                  \
        (a).dt_softplus = ((c)->opt & DO_SP) != 0;                                             \
        (a).dt_limit = ((c)->opt & DO_LIM) != 0;                                               \
        (a).dt_min = (float)LIM_LO;                                                            \
        (a).dt_max = (float)LIM_HI;                                                            \
        (a).chunk_size = (c)->chunk;                                                           \
    } while (0)

/* What a training step's forward keeps for the backward, by the oracle from the inputs in b:
 * y before the gate (DO_YS) into *y and the checkpoints (DO_CK) into *ck, NULL where the case
 * wants none; one forward call for both. */
static void forward_saved(const th_bundle *b, const ssd_case *c, th_tensor **y, th_tensor **ck)
{
    const int64_t sx[4] = {c->B, c->L, c->H, c->P};
    int64_t sk[4];
    ckpt_shape(c, sk);
    *y = (c->opt & DO_YS) ? th_new(th_oracle, c->act, 4, sx, NULL) : NULL;
    *ck = (c->opt & DO_CK) ? th_new(th_oracle, c->act, 4, sk, NULL) : NULL;
    if (!*y && !*ck)
        return;
    th_tensor *out = th_new(th_oracle, c->act, 4, sx, NULL);
    portssm_ssd_chunk_scan_fwd_args a;
    SSD_INPUTS_INTO(a, b, c);
    a.out = th_view(out);
    a.y = th_view_opt(*y);
    a.checkpoints = th_view_opt(*ck);
    const portssm_status st = portssm_ssd_chunk_scan_fwd(th_oracle, &a);
    if (st != PORTSSM_OK)
        fail_msg("the oracle's forward for y / checkpoints: %s", portssm_last_error(th_oracle));
    if (*y)
        th_download(*y);
    if (*ck)
        th_download(*ck);
}

/* The reference suite's rules for gradients, as test_scan. */
static void build_bwd(th_bundle *b, const void *cas, th_rng *r)
{
    const ssd_case *c = cas;
    const int64_t sx[4] = {c->B, c->L, c->H, c->P}, sdt[3] = {c->B, c->L, c->H};
    const int64_t sbc[4] = {c->B, c->L, c->G, c->N}, sh[1] = {c->H}, shp[2] = {c->H, c->P};
    const int64_t ss[4] = {c->B, c->H, c->P, c->N};
    const unsigned o = c->opt;
    th_tol t = th_tol_for(c->act), w = {1e-3, 1e-3}, wa, none = {0, 0};
    /* the sums' tolerance takes the activation dtype's where dy is rounded to it (z) */
    if (o & DO_Z) {
        w.rtol = fmax(w.rtol, t.rtol);
        w.atol = fmax(w.atol, t.atol);
    }
    /* ... and dA's and ddt_bias's (H sums of B L terms that cancel) also where the chunked
     * products take 16-bit operands, the states among them: bf16 B1 L300 H2 P64 N128 without
     * z, seed 1796404507291962 on sim64: dA 0.2395 against 0.2307 where the other head's is
     * ~2, normalised error 3.0e-6 */
    wa = w;
    if (c->act != PORTSSM_F32) {
        wa.rtol = fmax(wa.rtol, t.rtol);
        wa.atol = fmax(wa.atol, t.atol);
    }
    build_inputs(b, c, r);
    th_slot_set(b, DOUT, "dout", TH_IN, th_oracle_in(c->act, 4, sx, NULL, r, -1, 1), none);
    th_slot_set(b, DFINAL, "dfinal_states", TH_IN,
                (o & DO_DFINAL) ? th_oracle_in(state_dtype(c), 4, ss, NULL, r, -1, 1) : NULL, none);
    th_tensor *ys, *ck;
    forward_saved(b, c, &ys, &ck);
    th_slot_set(b, YS, "y", TH_IN, ys, none);
    th_slot_set(b, CKPT, "checkpoints", TH_IN, ck, none);
    b->s[CKPT].dense = 1;
    th_slot_set(b, DX, "dx", TH_OUT, th_oracle_out(c->act, 4, sx), (th_tol){2 * t.rtol, 2 * t.atol});
    th_slot_set(b, DDT, "ddt", TH_OUT, th_oracle_out(c->act, 3, sdt),
                (th_tol){5 * t.rtol, 10 * t.atol});
    /* dA = sum over (B,L) of dt * dcs: H values (often 1 to 4), each a sum whose terms cancel,
     * so its relative error is the rounding of the terms times a cancellation factor with a long
     * tail over seeds: the norm check would judge the one value nearest zero (normalised error
     * on sim32, f32 over 2099 values: median 6e-12, max 2.3e-6; f16 over 602: 3.7e-8, 1.9e-5;
     * bf16 over 903: 2.7e-6, 1.5e-3).  So dA is held per element only. */
    th_slot_set(b, DA, "dA", TH_OUT, th_oracle_out(PORTSSM_F32, 1, sh),
                (th_tol){wa.rtol, 5 * wa.atol});
    b->s[DA].per_element = 1;
    th_slot_set(b, DB, "dB", TH_OUT, th_oracle_out(c->act, 4, sbc), t);
    th_slot_set(b, DC, "dC", TH_OUT, th_oracle_out(c->act, 4, sbc), t);
    th_tensor *dD = NULL;
    if (o & DO_D)
        dD = th_oracle_out(PORTSSM_F32, 2, shp);
    else if (o & DO_DH)
        dD = th_oracle_out(PORTSSM_F32, 1, sh);
    /* dD per head sums B L P terms dy x (P times dD (H,P)'s), from dy rounded to the
     * activation dtype (the workspace's dy with z): dA's tolerance (f16 B1 L200 H3 P32 with z,
     * seed 1796295155105339 on sim64: 0.1937 against 0.1875, normalised error 1.5e-7) */
    th_slot_set(b, DD, "dD", TH_OUT, dD,
                (o & DO_DH) ? (th_tol){w.rtol, 5 * w.atol} : w);
    /* and per element, as dA: with H values the norm is one value's relative error, and these
     * sums cancel (bf16 B2 L260 H2 P64 N16 D(H) z, seed 1796365846508559 on sim32: normalised
     * error 9.3e-4 over a bound of 9e-4, each element inside its tolerance) */
    b->s[DD].per_element = (o & DO_DH) != 0;
    th_slot_set(b, DZ, "dz", TH_OUT,
                (o & DO_Z) && !(o & DO_NODZ) ? th_oracle_out(c->act, 4, sx) : NULL, w);
    /* ddt_bias = sum over (B,L) of ddt: the same cancelling sum as dA, with dA's tolerance
     * (bf16 B1 L300 H2 P64 N128 with z, seed 1796294241313489: -1.006 against -1.202 where the
     * other head's sum is ~40, normalised error 2.2e-5; twelve other seeds pass with w) */
    th_slot_set(b, DDTB, "ddt_bias", TH_OUT,
                (o & DO_DTB) ? th_oracle_out(PORTSSM_F32, 1, sh) : NULL,
                (th_tol){wa.rtol, 5 * wa.atol});
    /* ... and, like dA, per element, with an atol that grows with the size of the B L terms
     * (ddt) it adds: their rounding, however much they cancel (the same case, seed
     * 1796366222991680 on sim64: -3.013 against -3.371, normalised error 2.9e-3, with the
     * same bits before and after the backward's Y kernel changed: an error of 0.36 where the
     * root of the sum of the squared terms is 55, 1.6 bf16 epsilons of it; the bound here is 4)
     */
    b->s[DDTB].per_element = 1;
    th_slot_terms(b, DDTB, DDT, t.rtol / 2);
    th_slot_set(b, DINIT, "dinitial_states", TH_OUT,
                (o & DO_DINIT) ? th_oracle_out(state_dtype(c), 4, ss) : NULL, state_tol(c, w));
    /* Each element sums L terms whose size is that of the tensor, and some cancel to near
     * zero: those land a rounding of the terms away, so atol grows with the tensor's own root
     * mean square (slow decay, f16 B2 L200 H2 P64 N128, seed 1796432402976648 on sim64:
     * 0.01655 against 0.01322 where the RMS is 3.8, 0.9 f16 epsilons of it; the bound here
     * is 1.5e-3 of it for 16-bit activations, and stays f32's tolerance for f32 ones) */
    if (c->act != PORTSSM_F32)
        th_slot_terms(b, DINIT, DINIT, t.rtol / 2);
    /* A slow decay lets the states and the gradients at the chunks' ends grow over whole
     * chunks: the products' 16-bit operands round larger terms, and a few elements that cancel
     * land a few ulps of those terms away (with softplus's larger steps, bf16 B1 L300 N128 on
     * sim32: dB 0.038 against 0.094, normalised error 1.1e-5; f16 without it: dA 305.9
     * against 307.2 where the bound was 0.97).  Three times the tolerances. */
    if (o & DO_SLOW) {
        slow_tolerances(b);
        /* and dA, H sums whose terms now reach far past them, to 5% (f16 on sim64: 11.24
         * against 11.44, -71.88 against -70.65; ddt is the check of the chunk ends' pull),
         * with an atol that grows with the heads' own root mean square, the scale their terms
         * reach: one head's sum can cancel to a few hundredths of another's (f16 B2 L200 with
         * dt_bias, seed 1796515959942626 on sim32: -18.01 against -19.51 beside a head at
         * 6336, an error of 2.4e-4 of it; the bound here is 1.5e-3 of their RMS, 6.7) */
        b->s[DA].tol = (th_tol){0.05, 0.5};
        th_slot_terms(b, DA, DA, t.rtol / 2);
    }
}

static portssm_status run_fwd(portssm_context *ctx, const th_bundle *b, const void *cas)
{
    const ssd_case *c = cas;
    portssm_ssd_chunk_scan_fwd_args a;
    SSD_INPUTS_INTO(a, b, c);
    a.out = th_slot_view(b, OUT);
    a.final_states = th_slot_view(b, FINAL);
    a.varlen_states = th_slot_view(b, VARLEN);
    a.y = th_slot_view(b, YS);
    a.checkpoints = th_slot_view(b, CKPT);
    return portssm_ssd_chunk_scan_fwd(ctx, &a);
}

static portssm_ssd_chunk_scan_bwd_args bwd_args(const th_bundle *b, const ssd_case *c)
{
    portssm_ssd_chunk_scan_bwd_args a;
    SSD_INPUTS_INTO(a, b, c);
    a.dout = th_slot_view(b, DOUT);
    a.dfinal_states = th_slot_view(b, DFINAL);
    a.y = th_slot_view(b, YS);
    a.checkpoints = th_slot_view(b, CKPT);
    a.dx = th_slot_view(b, DX);
    a.ddt = th_slot_view(b, DDT);
    a.dA = th_slot_view(b, DA);
    a.dB = th_slot_view(b, DB);
    a.dC = th_slot_view(b, DC);
    a.dD = th_slot_view(b, DD);
    a.dz = th_slot_view(b, DZ);
    a.ddt_bias = th_slot_view(b, DDTB);
    a.dinitial_states = th_slot_view(b, DINIT);
    return a;
}

static portssm_status run_bwd(portssm_context *ctx, const th_bundle *b, const void *cas)
{
    const portssm_ssd_chunk_scan_bwd_args a = bwd_args(b, cas);
    return portssm_ssd_chunk_scan_bwd(ctx, &a);
}

/* ---------------------------------------------------------------- the recurrence, in double */

typedef struct ssd_ref {
    const ssd_case *c;
    double *x, *dt, *A, *Bm, *Cm, *Dv, *z, *dtb, *init; /* absent: NULL; dtb, init: zeros */
    int32_t *seq, *cu;
    double *dout, *dfinal; /* the loss's weights */
    double *out, *final, *varlen, *s;
    double *ypre; /* y before the gate */
    double *ckpt; /* (B,H,K,P*N): s at t = kT - 1 */
} ssd_ref;

static double *values_or_zeros(const th_tensor *t, int64_t n)
{
    if (t)
        return th_values(t);
    double *v = calloc((size_t)n + 1, sizeof *v);
    assert_non_null(v);
    return v;
}

static int32_t *ints_of(const th_tensor *t)
{
    if (!t)
        return NULL;
    double *v = th_values(t);
    int64_t n = th_numel(t);
    int32_t *o = malloc((size_t)n * sizeof *o);
    assert_non_null(o);
    for (int64_t i = 0; i < n; i++)
        o[i] = (int32_t)v[i];
    free(v);
    return o;
}

static void ssd_ref_load(ssd_ref *p, const ssd_case *c, const th_bundle *in)
{
    memset(p, 0, sizeof *p);
    p->c = c;
    p->x = th_values(in->s[X].t);
    p->dt = th_values(in->s[DT].t);
    p->A = th_values(in->s[A].t);
    p->Bm = th_values(in->s[BM].t);
    p->Cm = th_values(in->s[CM].t);
    p->Dv = in->s[DV].t ? th_values(in->s[DV].t) : NULL;
    p->z = in->s[Z].t ? th_values(in->s[Z].t) : NULL;
    p->dtb = values_or_zeros(in->s[DTB].t, c->H);
    p->init = values_or_zeros(in->s[INIT].t, c->B * c->H * c->P * c->N);
    p->seq = ints_of(in->s[SEQ].t);
    p->cu = ints_of(in->s[CU].t);
    const int64_t PN = c->P * c->N;
    p->out = calloc((size_t)(c->B * c->L * c->H * c->P), sizeof(double));
    p->final = calloc((size_t)(c->B * c->H * PN), sizeof(double));
    p->varlen = calloc((size_t)(3 * c->H * PN), sizeof(double));
    p->s = calloc((size_t)PN, sizeof(double));
    p->ypre = calloc((size_t)(c->B * c->L * c->H * c->P), sizeof(double));
    int64_t sk[4];
    ckpt_shape(c, sk);
    p->ckpt = calloc((size_t)(sk[0] * sk[1] * sk[2] * sk[3]), sizeof(double));
    assert_true(p->out && p->final && p->varlen && p->s && p->ypre && p->ckpt);
}

static void ssd_ref_free(ssd_ref *p)
{
    free(p->x), free(p->dt), free(p->A), free(p->Bm), free(p->Cm), free(p->Dv), free(p->z);
    free(p->dtb), free(p->init), free(p->seq), free(p->cu), free(p->dout), free(p->dfinal);
    free(p->out), free(p->final), free(p->varlen), free(p->s), free(p->ypre), free(p->ckpt);
}

/* Written from DESIGN.md's definition, independently of the oracle. */
static void ssd_ref_fwd(ssd_ref *p)
{
    const ssd_case *c = p->c;
    const int64_t L = c->L, H = c->H, P = c->P, N = c->N, G = c->G, PN = P * N;
    const int64_t T = ckpt_interval(c), K = (L + T - 1) / T;
    for (int64_t b = 0; b < c->B; b++)
        for (int64_t h = 0; h < H; h++) {
            const int64_t g = h / (H / G);
            double *s = p->s;
            for (int64_t i = 0; i < PN; i++)
                s[i] = p->init[(b * H + h) * PN + i];
            memcpy(p->ckpt + (b * H + h) * K * PN, s, (size_t)PN * sizeof *s);
            int seq_k = 0; /* cu_seqlens: the sequence of token t */
            if (p->cu && p->cu[1] == 0)
                memcpy(p->varlen + h * PN, s, (size_t)PN * sizeof *s);
            for (int64_t t = 0; t < L; t++) {
                int reset = t > 0 && p->seq && p->seq[b * L + t] != p->seq[b * L + t - 1];
                if (p->cu)
                    for (int k = 1; k < 3; k++)
                        reset |= t > 0 && p->cu[k] == t;
                if (reset)
                    memset(s, 0, (size_t)PN * sizeof *s);
                double dt = p->dt[(b * L + t) * H + h] + p->dtb[h];
                if (c->opt & DO_SP)
                    dt = dt <= 20 ? log1p(exp(dt)) : dt;
                if (c->opt & DO_LIM)
                    dt = dt < LIM_LO ? LIM_LO : dt > LIM_HI ? LIM_HI : dt;
                const double a = exp(dt * p->A[h]);
                for (int64_t q = 0; q < P; q++) {
                    const int64_t i = ((b * L + t) * H + h) * P + q;
                    double y = 0;
                    for (int64_t n = 0; n < N; n++) {
                        const int64_t j = ((b * L + t) * G + g) * N + n;
                        s[q * N + n] = a * s[q * N + n] + dt * p->Bm[j] * p->x[i];
                        y += p->Cm[j] * s[q * N + n];
                    }
                    if (p->Dv)
                        y += ((c->opt & DO_DH) ? p->Dv[h] : p->Dv[h * P + q]) * p->x[i];
                    p->ypre[i] = y;
                    if (p->z)
                        y *= p->z[i] / (1 + exp(-p->z[i]));
                    p->out[i] = y;
                }
                if ((t + 1) % T == 0 && t + 1 < L) /* the state entering chunk (t+1)/T */
                    memcpy(p->ckpt + ((b * H + h) * K + (t + 1) / T) * PN, s,
                           (size_t)PN * sizeof *s);
                if (p->cu)
                    for (int k = 0; k < 3; k++)
                        if (p->cu[k + 1] > p->cu[k] && p->cu[k + 1] - 1 == t) {
                            memcpy(p->varlen + (k * H + h) * PN, s, (size_t)PN * sizeof *s);
                            seq_k = k;
                        }
            }
            (void)seq_k;
            memcpy(p->final + (b * H + h) * PN, s, (size_t)PN * sizeof *s);
        }
}

static double ssd_ref_loss(void *ctx)
{
    ssd_ref *p = ctx;
    const ssd_case *c = p->c;
    ssd_ref_fwd(p);
    long double s = 0;
    for (int64_t i = 0; i < c->B * c->L * c->H * c->P; i++)
        s += (long double)p->dout[i] * p->out[i];
    if (p->dfinal)
        for (int64_t i = 0; i < c->B * c->H * c->P * c->N; i++)
            s += (long double)p->dfinal[i] * p->final[i];
    return (double)s;
}

static void verify_fwd(th_bundle *got, const th_bundle *init, const void *cas)
{
    const ssd_case *c = cas;
    if (!th_is_oracle())
        return; /* elsewhere the oracle comparison is the check */
    ssd_ref p;
    ssd_ref_load(&p, c, init);
    ssd_ref_fwd(&p);
    th_assert_close_values(got->s[OUT].t, p.out, th_tol_ref(c->act), "out: cpu vs definition");
    if (got->s[FINAL].t)
        th_assert_close_values(got->s[FINAL].t, p.final, th_tol_ref(state_dtype(c)),
                               "final_states: cpu vs definition");
    if (got->s[VARLEN].t)
        th_assert_close_values(got->s[VARLEN].t, p.varlen, th_tol_ref(state_dtype(c)),
                               "varlen_states: cpu vs definition");
    if (got->s[YS].t)
        th_assert_close_values(got->s[YS].t, p.ypre, th_tol_ref(c->act), "y: cpu vs definition");
    if (got->s[CKPT].t)
        th_assert_close_values(got->s[CKPT].t, p.ckpt, th_tol_ref(c->act),
                               "checkpoints: cpu vs definition");
    ssd_ref_free(&p);
}

static int64_t numel_of(const th_bundle *b, int slot)
{
    return b->s[slot].t ? th_numel(b->s[slot].t) : 0;
}

static void verify_bwd(th_bundle *got, const th_bundle *init, const void *cas)
{
    const ssd_case *c = cas;
    if (!th_is_oracle())
        return;
    ssd_ref p;
    ssd_ref_load(&p, c, init);
    p.dout = th_values(init->s[DOUT].t);
    p.dfinal = init->s[DFINAL].t ? th_values(init->s[DFINAL].t) : NULL;
    th_rng r = th_rng_for(0x55d0 + (uint64_t)c->L * 131 + (uint64_t)c->N);
    const th_grad_param g[] = {
        {DX, p.x, numel_of(init, X)},     {DDT, p.dt, numel_of(init, DT)},
        {DA, p.A, numel_of(init, A)},     {DB, p.Bm, numel_of(init, BM)},
        {DC, p.Cm, numel_of(init, CM)},   {DD, p.Dv, numel_of(init, DV)},
        {DZ, p.z, numel_of(init, Z)},     {DDTB, p.dtb, c->H},
        {DINIT, p.init, c->B * c->H * c->P * c->N},
    };
    th_check_grads_fd(got, g, sizeof g / sizeof g[0], ssd_ref_loss, &p, &r);
    ssd_ref_free(&p);
}

/* ---------------------------------------------------------------- cases */

#include "case_shorthand.h"

/* {bwd, act, B, L, H, P, G, N, layout, options, chunk} */
static const ssd_case cases_table[] = {
    /* every option, then none; the three dtypes */
    {0, F32, 2, 67, 4, 8, 2, 16, CF, DO_D | DO_Z | DO_DTB | DO_SP | DO_INIT | DO_FINAL, 0},
    {0, F16, 2, 67, 4, 8, 2, 16, CF, DO_D | DO_Z | DO_DTB | DO_SP | DO_INIT | DO_FINAL, 64},
    {0, BF16, 2, 67, 4, 8, 2, 16, CF, DO_D | DO_Z | DO_DTB | DO_SP | DO_INIT | DO_FINAL, 128},
    {0, F32, 1, 33, 2, 4, 1, 4, CF, 0, 256},
    /* L = 1; H = 1; G = H; D per head; dt clamp; strided layouts */
    {0, F32, 2, 1, 3, 4, 3, 8, CF, DO_DH | DO_INIT | DO_FINAL, 0},
    {0, BF16, 1, 40, 1, 16, 1, 16, CL | PAD, DO_Z | DO_SP | DO_LIM, 0},
    {0, F32, 2, 50, 4, 4, 4, 8, PAD | NEGL, DO_DH | DO_DTB | DO_SP | DO_LIM | DO_FINAL, 0},
    /* several sequences per row; packed varlen with a sequence of one token */
    {0, F32, 2, 60, 2, 8, 1, 16, CF, DO_SEQ | DO_INIT | DO_FINAL | DO_D | DO_SP, 0},
    {0, BF16, 1, 61, 4, 8, 2, 16, CF, DO_CU | DO_SEQ | DO_INIT | DO_FINAL | DO_SP | DO_Z, 0},
    {0, F32, 1, 61, 2, 4, 1, 8, CF, DO_CU | DO_FINAL | DO_DTB, 0},
    /* N 64 / 128 / 256, P 32 / 64 / 128; past one chunk of 256 */
    {0, BF16, 1, 20, 2, 32, 1, 64, CF, DO_D | DO_SP | DO_FINAL, 0},
    {0, F32, 1, 10, 1, 64, 1, 128, CF, DO_DH | DO_SP | DO_INIT, 0},
    {0, F32, 1, 6, 1, 128, 1, 256, CF, DO_SP | DO_FINAL, 0},
    {0, F16, 1, 300, 2, 8, 2, 16, CF, DO_D | DO_Z | DO_SP | DO_FINAL, 0},
    /* the chunked forward: several chunks of 64 / 128 / 32 (f32's tile) with the last one
     * partial, restarts inside chunks and on a chunk boundary, P and N over several tiles and
     * not multiples of them, packed sequences across chunks */
    {0, BF16, 2, 200, 3, 64, 1, 128, CF, DO_SEQ | DO_EDGE | DO_INIT | DO_FINAL | DO_D | DO_Z | DO_SP | DO_DTB, 64},
    {0, F32, 1, 130, 2, 40, 2, 24, CF, DO_CU | DO_INIT | DO_FINAL | DO_SP | DO_DH, 32},
    {0, F16, 1, 129, 1, 128, 1, 256, CF, DO_SP | DO_FINAL | DO_INIT, 64},
    {0, BF16, 1, 300, 2, 32, 1, 64, CF, DO_CU | DO_EDGE | DO_SP | DO_FINAL | DO_D | DO_LIM, 128},
    {0, F32, 2, 100, 2, 16, 2, 16, CF, DO_SEQ | DO_SP | DO_FINAL | DO_Z, 32},
    /* three tiles of N (the chunk states' second group has one), forward and backward */
    {0, BF16, 1, 200, 2, 64, 1, 192, CF, DO_CU | DO_INIT | DO_FINAL | DO_SP | DO_D, 64},
    {1, BF16, 1, 150, 2, 64, 1, 192, CF, DO_D | DO_Z | DO_SP | DO_DFINAL, 64},
    {1, F32, 1, 100, 2, 32, 1, 96, CF, DO_SP | DO_INIT | DO_DINIT | DO_DFINAL, 32},
    /* 16-bit with N not a multiple of 8: the output kernel reads the f32 states (the 16-bit
     * copy of the state pass needs whole 16-byte rows), over several chunks and packed rows */
    {0, F16, 1, 150, 2, 16, 1, 12, CF, DO_CU | DO_INIT | DO_FINAL | DO_D | DO_SP, 64},
    {0, BF16, 2, 150, 2, 16, 2, 20, CF, DO_SEQ | DO_INIT | DO_FINAL | DO_Z | DO_SP, 64},
    /* the 16-bit outputs with M in registers (PSSM_SSD_OUTR: C B^T shared by a group's heads,
     * vector layouts): chunk 256 over all four row tiles with the last chunk partial, chunk 0
     * without an entering state; P 128 (two column tiles) with N 256 (four slabs of the
     * state's product, two in flight) and restarts inside a chunk */
    {0, F16, 2, 520, 2, 64, 1, 128, CF, DO_D | DO_Z | DO_DTB | DO_SP | DO_FINAL, 0},
    {0, BF16, 1, 300, 2, 128, 1, 256, CF, DO_SEQ | DO_EDGE | DO_INIT | DO_FINAL | DO_DH | DO_Z | DO_SP, 0},
    /* y (before the gate) wanted: the outputs with M in registers (16-bit, vector layouts),
     * the generic stamp's per-element epilogue (f32; strided layouts) */
    {0, BF16, 1, 300, 2, 64, 1, 128, CF, DO_SEQ | DO_EDGE | DO_INIT | DO_FINAL | DO_D | DO_Z | DO_SP | DO_YS, 0},
    {0, F16, 2, 520, 2, 64, 1, 128, CF, DO_DH | DO_Z | DO_DTB | DO_SP | DO_YS, 0},
    {0, F32, 2, 67, 4, 8, 2, 16, CF, DO_D | DO_Z | DO_DTB | DO_SP | DO_INIT | DO_YS, 0},
    {0, BF16, 1, 40, 1, 16, 1, 16, CL | PAD, DO_Z | DO_SP | DO_D | DO_YS, 0},
    /* N not a multiple of 4: the state pass one element per thread (four where it is) */
    {0, F32, 2, 70, 2, 4, 1, 6, CF, DO_INIT | DO_FINAL | DO_SP | DO_D, 32},
    {0, BF16, 1, 150, 2, 8, 1, 10, CF, DO_INIT | DO_FINAL | DO_SP | DO_Z, 64},
    /* backward: the same ground */
    {1, F32, 2, 67, 4, 8, 2, 16, CF, DO_D | DO_Z | DO_DTB | DO_SP | DO_INIT | DO_DFINAL | DO_DINIT, 0},
    {1, F16, 2, 67, 4, 8, 2, 16, CF, DO_D | DO_Z | DO_DTB | DO_SP | DO_INIT | DO_DFINAL, 0},
    {1, BF16, 2, 67, 4, 8, 2, 16, CF, DO_D | DO_Z | DO_DTB | DO_SP | DO_DINIT, 0},
    {1, F32, 1, 33, 2, 4, 1, 4, CF, 0, 0},
    {1, F32, 2, 1, 3, 4, 3, 8, CF, DO_DH | DO_INIT | DO_DINIT | DO_DFINAL, 0},
    {1, F32, 1, 40, 1, 16, 1, 16, CL | PAD, DO_Z | DO_SP | DO_LIM, 0},
    {1, F32, 2, 50, 4, 4, 4, 8, PAD | NEGL, DO_DH | DO_DTB | DO_SP | DO_LIM | DO_DFINAL, 0},
    {1, F32, 2, 60, 2, 8, 1, 16, CF, DO_SEQ | DO_INIT | DO_DINIT | DO_D | DO_SP | DO_DFINAL, 0},
    {1, BF16, 1, 61, 4, 8, 2, 16, CF, DO_CU | DO_SEQ | DO_INIT | DO_DINIT | DO_SP | DO_Z, 0},
    {1, F32, 1, 20, 2, 32, 1, 64, CF, DO_D | DO_SP | DO_DFINAL, 0},
    {1, F32, 1, 6, 1, 128, 1, 256, CF, DO_SP | DO_DINIT, 0},
    {1, F16, 1, 300, 2, 8, 2, 16, CF, DO_D | DO_Z | DO_SP | DO_DFINAL, 0},
    /* z given, its gradient not wanted (fuzz_api found the kernels writing dz regardless) */
    {1, BF16, 2, 70, 2, 8, 1, 16, CF, DO_Z | DO_NODZ | DO_D | DO_SP, 0},
    /* restarts across checkpoint chunks with every option; several blocks per head (N 128) */
    {1, BF16, 2, 300, 4, 16, 2, 16, CF,
     DO_SEQ | DO_D | DO_Z | DO_DTB | DO_SP | DO_LIM | DO_INIT | DO_DINIT | DO_DFINAL, 0},
    {1, F32, 1, 260, 2, 64, 1, 128, CF, DO_DH | DO_SP | DO_CU | DO_INIT | DO_DINIT, 0},
    {1, F32, 1, 70, 2, 4, 1, 6, CF, DO_SP | DO_INIT | DO_DINIT | DO_DFINAL, 32},
    /* dD per head over 2 rows x 2 chunks x P 64 = 256 partials: the reduce's warp per element */
    {1, BF16, 2, 260, 2, 64, 1, 16, CF, DO_DH | DO_SP | DO_Z, 0},
    /* the bench's tiles (P 64, N 128 = two slabs of the state's product) with C B^T shared by
     * a group's heads: the vector stamps of Y and DX over one to four slabs (the last chunk
     * partial), dB and dC by their copy pipeline; the same at chunk 128 with three heads */
    {1, BF16, 1, 300, 2, 64, 1, 128, CF, DO_D | DO_Z | DO_DTB | DO_SP | DO_INIT | DO_DINIT, 0},
    {1, F16, 1, 200, 3, 32, 1, 64, CF, DO_DH | DO_Z | DO_NODZ | DO_SP | DO_DFINAL, 128},
    /* the forward's y given: the Y kernel with M in registers reads it instead of forming y
     * (restarts inside chunks, several chunks; f16 at chunk 128), the generic stamps form y */
    {1, BF16, 1, 300, 2, 64, 1, 128, CF, DO_D | DO_Z | DO_DTB | DO_SP | DO_INIT | DO_DINIT | DO_YS, 0},
    {1, F16, 2, 200, 3, 32, 1, 64, CF, DO_SEQ | DO_DH | DO_Z | DO_SP | DO_DFINAL | DO_YS, 128},
    {1, F32, 1, 40, 1, 16, 1, 16, CL | PAD, DO_Z | DO_SP | DO_D | DO_YS, 0},
    /* the Y kernel with M in registers over two slabs of n (N 128) without z, and over four
     * (N 256) with y given */
    {1, BF16, 1, 300, 2, 64, 1, 128, CF, DO_D | DO_DTB | DO_SP | DO_INIT | DO_DFINAL, 0},
    {1, F16, 1, 200, 2, 32, 1, 256, CF, DO_SEQ | DO_Z | DO_SP | DO_INIT | DO_YS, 0},
    /* groups of several slices of heads (10 heads: two slices of 5; 9 a group: three of 3):
     * dCB per slice added by the reduce kernel, dB and dC's own-token share in the first slice */
    {1, BF16, 1, 130, 10, 16, 1, 32, CF, DO_SEQ | DO_D | DO_Z | DO_SP | DO_INIT | DO_DINIT, 0},
    {1, F32, 2, 70, 18, 8, 2, 16, CF, DO_DH | DO_DTB | DO_SP | DO_DFINAL, 32},
    /* checkpoints written by the forward: f32 (the f32 states themselves, K 3), the output
     * kernel with M in registers (16-bit S_in, restarts on a chunk boundary), N 12 (f32 states
     * for the outputs, 16-bit ones for the checkpoints), packed sequences (the varlen pass
     * reads f32 S_in), L = 1 (K 1) */
    {0, F32, 2, 67, 4, 8, 2, 16, CF, DO_D | DO_Z | DO_INIT | DO_FINAL | DO_CK, 32},
    {0, BF16, 1, 300, 2, 64, 1, 128, CF, DO_SEQ | DO_EDGE | DO_INIT | DO_FINAL | DO_D | DO_Z | DO_SP | DO_CK, 0},
    {0, F16, 1, 150, 2, 16, 1, 12, CF, DO_INIT | DO_FINAL | DO_D | DO_SP | DO_CK, 64},
    {0, BF16, 1, 300, 2, 32, 1, 64, CF, DO_CU | DO_EDGE | DO_SP | DO_FINAL | DO_INIT | DO_CK, 128},
    {0, F16, 2, 1, 3, 8, 3, 8, CF, DO_DH | DO_INIT | DO_FINAL | DO_CK, 0},
    /* ... and given to the backward: the kernels with M in registers read S_in from them and
     * skip the chunk states (with y and z, without z, groups of slices at chunk 128, packed),
     * f32 reads them as its states, N 10 (no 16-bit path: computed again) */
    {1, BF16, 1, 300, 2, 64, 1, 128, CF, DO_D | DO_Z | DO_DTB | DO_SP | DO_INIT | DO_DINIT | DO_YS | DO_CK, 0},
    {1, BF16, 1, 300, 2, 64, 1, 128, CF, DO_D | DO_DTB | DO_SP | DO_INIT | DO_DFINAL | DO_CK, 0},
    {1, F16, 2, 200, 6, 32, 2, 64, CF, DO_SEQ | DO_EDGE | DO_DH | DO_Z | DO_SP | DO_DFINAL | DO_DINIT | DO_CK, 128},
    {1, BF16, 1, 61, 4, 8, 2, 16, CF, DO_CU | DO_SEQ | DO_INIT | DO_DINIT | DO_SP | DO_Z | DO_CK, 0},
    {1, F32, 2, 67, 4, 8, 2, 16, CF, DO_D | DO_Z | DO_DTB | DO_SP | DO_INIT | DO_DFINAL | DO_DINIT | DO_CK, 32},
    {1, BF16, 1, 150, 2, 16, 1, 10, CF, DO_INIT | DO_SP | DO_Z | DO_DFINAL | DO_CK, 64},
    {1, F16, 1, 150, 2, 16, 1, 10, CF, DO_INIT | DO_SP | DO_Z | DO_DFINAL | DO_CK, 64},
    /* a slow decay (the chunk ends' pull on dA and ddt is no longer ~0), with and without the
     * checkpoints: the reverse pass reads S_in from them, or from its own 16-bit copy */
    {1, F16, 1, 300, 2, 64, 1, 128, CF, DO_SLOW | DO_D | DO_Z | DO_INIT | DO_DFINAL | DO_CK, 64},
    {1, F16, 2, 200, 2, 64, 1, 128, CF, DO_SLOW | DO_D | DO_DTB | DO_INIT | DO_DFINAL | DO_DINIT, 64},
    {0, F16, 2, 200, 2, 64, 1, 128, CF, DO_SLOW | DO_SEQ | DO_D | DO_Z | DO_INIT | DO_FINAL | DO_CK, 64},
    /* 16-bit states: read into f32, each rounded once where stored;
     * packed with an empty sequence's start state, the checkpoints beside them, f32
     * activations with bf16 states, the backward's dfinal and dinitial */
    {0, BF16, 2, 67, 4, 8, 2, 16, CF, DO_D | DO_Z | DO_DTB | DO_SP | DO_INIT | DO_FINAL | DO_SBF16, 64},
    {0, F16, 1, 130, 2, 16, 1, 24, CF, DO_CU | DO_EDGE | DO_INIT | DO_FINAL | DO_SP | DO_CK | DO_SF16, 64},
    {0, F32, 2, 70, 2, 4, 1, 6, CF, DO_INIT | DO_FINAL | DO_SP | DO_D | DO_SBF16, 32},
    {1, BF16, 2, 67, 4, 8, 2, 16, CF, DO_D | DO_Z | DO_DTB | DO_SP | DO_INIT | DO_DFINAL | DO_DINIT | DO_SBF16, 64},
    {1, F16, 1, 61, 4, 8, 2, 16, CF, DO_CU | DO_SEQ | DO_INIT | DO_DINIT | DO_DFINAL | DO_SP | DO_CK | DO_SF16, 0},
    {1, F32, 1, 70, 2, 4, 1, 6, CF, DO_SP | DO_INIT | DO_DINIT | DO_DFINAL | DO_SF16, 32},
};

static const ssd_case probe_fwd = {0, F32, 1, 8, 2, 4, 1, 4, CF, 0, 0};
static const ssd_case probe_bwd = {1, F32, 1, 8, 2, 4, 1, 4, CF, 0, 0};
static const th_op op_fwd = {"ssd_chunk_scan_fwd", build_fwd, run_fwd, verify_fwd, &probe_fwd};
static const th_op op_bwd = {"ssd_chunk_scan_bwd", build_bwd, run_bwd, verify_bwd, &probe_bwd};

#define NCASES (sizeof cases_table / sizeof cases_table[0])
static char names[NCASES][200];

static void run_case(void **state)
{
    const ssd_case *c = *state;
    th_cross_check(c->bwd ? &op_bwd : &op_fwd, c, c->layout, th_alt_layout(c->layout),
                   0x55d00000u + (uint64_t)(c - cases_table));
}

/* One sequence of 128K tokens, past the ~61K where mamba-ssm's Triton SSD goes wrong
 * (mamba-ssm #1015): on cuda and hip only (hours on the sim's fibers). */
static const ssd_case long_case = {0, F16, 1, 131072, 2, 16, 1, 16, CF,
                                   DO_D | DO_SP | DO_INIT | DO_FINAL | DO_DTB, 256};

static void long_sequence(void **state)
{
    (void)state;
    if (strncmp(th_backend_label, "cuda", 4) != 0 && strncmp(th_backend_label, "hip", 3) != 0)
        th_skip_test("skipped: a GPU-only case (backend %s)", th_backend_label);
    th_cross_check(&op_fwd, &long_case, CF, CF, 0x55d10000u);
}

/* ---------------------------------------------------------------- graph capture */

/* On the device backends: the forward (packed sequences, every output) and the backward,
 * captured in one CUDA/HIP graph after an eager call of each, replay bitwise equal to the
 * eager outputs, three times (no host synchronisation or allocation inside either op). */
static void graph_replay(void **state)
{
    (void)state;
    const portssm_backend be = portssm_get_backend(th_ctx);
    if (be != PORTSSM_BACKEND_CUDA && be != PORTSSM_BACKEND_HIP)
        th_skip_test("skipped: the %s backend runs synchronously and has no graphs",
                     th_backend_label);
    char why[256];
    vs_vendor *v = vs_open(be, portssm_get_device(th_ctx), why, sizeof why);
    if (!v)
        fail_msg("the %s backend runs but its driver cannot be opened here: %s",
                 th_backend_label, why);
    if (!vs_has_graphs(v)) {
        vs_close(v);
        th_skip_test("skipped: this driver has no graph API");
    }
    void *stream = vs_stream_create(v, why, sizeof why);
    if (!stream)
        fail_msg("%s", why);
    assert_int_equal(portssm_set_stream(th_ctx, stream), PORTSSM_OK);

    const ssd_case cf = {0, BF16, 1, 300, 4, 64, 1, 128, CF,
                         DO_CU | DO_INIT | DO_FINAL | DO_D | DO_Z | DO_SP | DO_DTB, 128};
    const ssd_case cb = {1, BF16, 2, 300, 4, 64, 1, 128, CF,
                         DO_SEQ | DO_INIT | DO_DINIT | DO_DFINAL | DO_D | DO_Z | DO_SP | DO_DTB, 128};
    th_rng r = th_rng_for(0x55d20000u);
    th_bundle hf, hb, df, db; /* host-built bundles and their device twins */
    memset(&hf, 0, sizeof hf), memset(&hb, 0, sizeof hb);
    build_fwd(&hf, &cf, &r);
    build_bwd(&hb, &cb, &r);
    df = hf, db = hb;
    th_tensor *outs[2 * TH_MAX_SLOTS], *ref[2 * TH_MAX_SLOTS];
    int n = 0;
    for (int k = 0; k < 2; k++) {
        th_bundle *h = k ? &hb : &hf, *d = k ? &db : &df;
        for (int i = 0; i < h->n; i++) {
            if (!h->s[i].t)
                continue;
            d->s[i].t = th_twin(th_ctx, h->s[i].t);
            if (h->s[i].role == TH_OUT)
                outs[n++] = d->s[i].t;
        }
    }
    for (int i = 0; i < n; i++)
        th_poison(outs[i]);
    assert_int_equal(run_fwd(th_ctx, &df, &cf), PORTSSM_OK); /* eager: grows the workspace */
    assert_int_equal(run_bwd(th_ctx, &db, &cb), PORTSSM_OK);
    assert_int_equal(portssm_synchronize(th_ctx), PORTSSM_OK);
    for (int i = 0; i < n; i++) {
        th_download(outs[i]);
        ref[i] = th_twin(th_ctx, outs[i]);
        th_poison(outs[i]);
    }
    assert_int_equal(vs_capture_begin(v, stream), 0);
    portssm_status s = run_fwd(th_ctx, &df, &cf);
    if (s == PORTSSM_OK)
        s = run_bwd(th_ctx, &db, &cb);
    void *graph = vs_capture_end(v, stream);
    if (s != PORTSSM_OK)
        fail_msg("captured SSD step: %s: %s", portssm_status_name(s), portssm_last_error(th_ctx));
    assert_non_null(graph);
    for (int rep = 0; rep < 3; rep++) {
        assert_int_equal(vs_graph_launch(v, graph, stream), 0);
        assert_int_equal(portssm_synchronize(th_ctx), PORTSSM_OK);
        for (int i = 0; i < n; i++) {
            char name[64];
            snprintf(name, sizeof name, "graph replay %d vs eager, output %d", rep, i);
            th_assert_same(outs[i], ref[i], name);
            th_poison(outs[i]);
        }
    }
    vs_graph_destroy(v, graph);
    assert_int_equal(portssm_synchronize(th_ctx), PORTSSM_OK);
    assert_int_equal(portssm_set_stream(th_ctx, NULL), PORTSSM_OK);
    vs_stream_destroy(v, stream);
    vs_close(v);
}

/* ---------------------------------------------------------------- workspace query */

/* Given the forward's checkpoints, the device backends keep no f32 states entering the chunks
 * in the backward's workspace (the checkpoints are those states, f32 ones for f32 activations
 * and 16-bit ones where every reader takes them so), so the query asks for less than without
 * them; the cpu backend keeps its scratch on the host. */
static void bwd_workspace_query(void **state)
{
    (void)state;
    const portssm_dtype acts[2] = {F32, BF16};
    for (int k = 0; k < 2; k++) {
        const ssd_case c = {1, acts[k], 2, 300, 4, 64, 1, 128, CF,
                            DO_CK | DO_D | DO_Z | DO_SP | DO_DTB, 128};
        th_rng r = th_rng_for(0x55d30000u + (uint64_t)k);
        th_bundle h, d;
        memset(&h, 0, sizeof h);
        build_bwd(&h, &c, &r);
        d = h;
        for (int i = 0; i < h.n; i++)
            if (h.s[i].t)
                d.s[i].t = th_twin(th_ctx, h.s[i].t);
        portssm_ssd_chunk_scan_bwd_args a = bwd_args(&d, &c);
        size_t with_ck = 1, without = 1;
        TH_CHECK_OP(th_ctx, portssm_ssd_chunk_scan_bwd_workspace_size(th_ctx, &a, &with_ck));
        memset(&a.checkpoints, 0, sizeof a.checkpoints);
        TH_CHECK_OP(th_ctx, portssm_ssd_chunk_scan_bwd_workspace_size(th_ctx, &a, &without));
        if (th_is_oracle()) {
            assert_true(with_ck == 0 && without == 0);
            continue;
        }
        /* the states entering the chunks: B H nchunks P N floats (3 chunks of 128) */
        const size_t states = (size_t)(2 * 4 * 3 * 64 * 128) * sizeof(float);
        if (with_ck + states > without)
            fail_msg("%s: workspace %zu bytes with checkpoints, %zu without: not %zu less",
                     portssm_dtype_name(acts[k]), with_ck, without, states);
        /* and the op runs in exactly what the query asked for, to the same bits as in the
         * context's own buffer (every gradient poisoned before each run) */
        th_tensor *outs[TH_MAX_SLOTS], *ref[TH_MAX_SLOTS];
        int n = 0;
        for (int i = 0; i < d.n; i++)
            if (d.s[i].t && d.s[i].role == TH_OUT)
                outs[n++] = d.s[i].t;
        void *ws = NULL;
        assert_int_equal(portssm_malloc(th_ctx, &ws, with_ck), PORTSSM_OK);
        for (int i = 0; i < n; i++)
            th_poison(outs[i]);
        a = bwd_args(&d, &c);
        a.workspace.data = ws, a.workspace.bytes = with_ck;
        TH_CHECK_OP(th_ctx, portssm_ssd_chunk_scan_bwd(th_ctx, &a));
        assert_int_equal(portssm_synchronize(th_ctx), PORTSSM_OK);
        assert_int_equal(portssm_free(th_ctx, ws), PORTSSM_OK);
        for (int i = 0; i < n; i++) {
            th_download(outs[i]);
            ref[i] = th_twin(th_ctx, outs[i]);
            th_poison(outs[i]);
        }
        TH_CHECK_OP(th_ctx, run_bwd(th_ctx, &d, &c));
        assert_int_equal(portssm_synchronize(th_ctx), PORTSSM_OK);
        for (int i = 0; i < n; i++) {
            char name[96];
            snprintf(name, sizeof name, "%s: output %d, the queried workspace vs the context's",
                     portssm_dtype_name(acts[k]), i);
            th_download(outs[i]);
            th_assert_same(outs[i], ref[i], name);
        }
    }
}

static void describe(const ssd_case *c, char *buf, size_t n)
{
    char lay[96];
    th_layout_name(c->layout, lay, sizeof lay);
    const unsigned o = c->opt;
    snprintf(buf, n, "%s %s B%lld L%lld H%lld P%lld G%lld N%lld %s%s%s%s%s%s%s%s%s%s%s%s%s",
             c->bwd ? "bwd" : "fwd", portssm_dtype_name(c->act), (long long)c->B,
             (long long)c->L, (long long)c->H, (long long)c->P, (long long)c->G, (long long)c->N,
             lay, (o & DO_D) ? " D" : "", (o & DO_DH) ? " D(H)" : "", (o & DO_Z) ? " z" : "",
             (o & DO_DTB) ? " dt_bias" : "", (o & DO_SP) ? " softplus" : "",
             (o & DO_LIM) ? " dt_limit" : "", (o & DO_INIT) ? " init" : "",
             (o & DO_FINAL) ? " final" : "", (o & DO_SEQ) ? " seq_idx" : "",
             (o & DO_CU) ? " cu_seqlens" : "", (o & DO_DFINAL) ? " dfinal" : "",
             (o & DO_DINIT) ? " dinit" : "");
    const size_t len = strlen(buf);
    if ((o & DO_NODZ) && len < n)
        snprintf(buf + len, n - len, " no-dz");
    const size_t len2 = strlen(buf);
    if ((o & DO_YS) && len2 < n)
        snprintf(buf + len2, n - len2, c->bwd ? " y-given" : " y-wanted");
    const size_t len3 = strlen(buf);
    if ((o & DO_CK) && len3 < n)
        snprintf(buf + len3, n - len3, c->bwd ? " checkpoints-given" : " checkpoints-wanted");
    const size_t len4 = strlen(buf);
    if ((o & DO_SLOW) && len4 < n)
        snprintf(buf + len4, n - len4, " slow-decay");
    const size_t len5 = strlen(buf);
    if (state_dtype(c) != PORTSSM_F32 && len5 < n)
        snprintf(buf + len5, n - len5, " state-%s", portssm_dtype_name(state_dtype(c)));
}

/* ---------------------------------------------------------------- bad arguments */

/* Every refusal names the argument and writes nothing. */
static void bad_arguments(void **state)
{
    (void)state;
    th_rng r = th_rng_for(0xbad5);
    const ssd_case c = {0, PORTSSM_F32, 2, 9, 4, 4, 2, 8, CF, DO_FINAL, 0};
    th_bundle b;
    memset(&b, 0, sizeof b);
    build_fwd(&b, &c, &r);
    th_tensor *out = th_twin(th_ctx, b.s[OUT].t), *fin = th_twin(th_ctx, b.s[FINAL].t);
    th_bundle dev = b;
    for (int i = 0; i < b.n; i++)
        if (b.s[i].t)
            dev.s[i].t = i == OUT ? out : i == FINAL ? fin : th_twin(th_ctx, b.s[i].t);
    portssm_ssd_chunk_scan_fwd_args a;
    th_tensor *ybad = th_twin(th_ctx, b.s[OUT].t);
    /* checkpoints (B,H,K,P*N) = (2,4,1,32) here (L 9, T 256): one with K 2, one padded */
    const int64_t ck2[4] = {2, 4, 2, 32}, ck1[4] = {2, 4, 1, 32}, ckpad[4] = {4 * 64, 64, 32, 1};
    th_tensor *ckbad = th_new(th_ctx, PORTSSM_F32, 4, ck2, NULL);
    th_tensor *ckpadded = th_new(th_ctx, PORTSSM_F32, 4, ck1, ckpad);
    const int64_t ss[4] = {c.B, c.H, c.P, c.N};
    th_tensor *init16 = th_new(th_ctx, PORTSSM_F16, 4, ss, NULL);
    th_fill_uniform(init16, &r, -1, 1);
    for (int k = 0; k < 11; k++) {
        memset(&a, 0, sizeof a);
        a.x = th_view(dev.s[X].t);
        a.dt = th_view(dev.s[DT].t);
        a.A = th_view(dev.s[A].t);
        a.B = th_view(dev.s[BM].t);
        a.C = th_view(dev.s[CM].t);
        a.out = th_view(out);
        a.final_states = th_view(fin);
        const char *says = NULL;
        switch (k) {
        case 0: a.x.data = NULL, says = "'x' is required"; break;
        case 1: a.dt.shape[2] = 3, says = "'dt' shape[2]"; break;
        case 2: a.A.dtype = PORTSSM_BF16, says = "'A' dtype"; break;
        case 3: a.B.shape[2] = a.C.shape[2] = 3, says = "does not divide"; break; /* G 3, H 4 */
        case 4: a.dt_limit = 1, a.dt_min = 1.0f, a.dt_max = 0.5f, says = "'dt_min'"; break;
        case 5: a.chunk_size = -1, says = "'chunk_size'"; break;
        case 6: a.cu_seqlens = th_view(dev.s[A].t), a.cu_seqlens.dtype = PORTSSM_I32,
                says = "'cu_seqlens'"; break; /* B = 2 */
        case 7: a.y = th_view(ybad), says = "'y' is given but 'z' is absent"; break;
        case 8: a.checkpoints = th_view(ckbad), says = "'checkpoints' shape[2] must be 1"; break;
        case 9: a.checkpoints = th_view(ckpadded), says = "'checkpoints' must be contiguous"; break;
        case 10: a.initial_states = th_view(init16), /* final_states f32 */
                 says = "'final_states' dtype must be f16 (the dtype of 'initial_states'"; break;
        }
        th_snapshot s1 = th_snap(out), s2 = th_snap(fin);
        portssm_status st = portssm_ssd_chunk_scan_fwd(th_ctx, &a);
        if (st != PORTSSM_ERR_INVALID_ARGUMENT)
            fail_msg("bad case %d (%s): got %s: %s", k, says, portssm_status_name(st),
                     portssm_last_error(th_ctx));
        if (!strstr(portssm_last_error(th_ctx), says))
            fail_msg("bad case %d: message '%s' lacks '%s'", k, portssm_last_error(th_ctx), says);
        assert_true(th_unchanged(out, &s1));
        assert_true(th_unchanged(fin, &s2));
    }
}

/* The backward with z a slice of a wider row, as in Mamba-2's split op (z inside zxbcdt): z's
 * L stride is not dout's.  Every output must be bit-identical to the run with z contiguous (the
 * kernels' route depends on alignment, which the padding keeps: a multiple of 8 elements).  The
 * kernels once read z's tiles at dout's row stride, which only this layout shows. */
static void z_own_row_stride_case(portssm_dtype act, int64_t P, int64_t G, int64_t N,
                                  int32_t chunk)
{
    const int64_t B = 2, L = 150, H = 4, pad = 40;
    const int64_t sx[4] = {B, L, H, P}, sdt[3] = {B, L, H}, sbc[4] = {B, L, G, N};
    const int64_t sh[1] = {H}, shp[2] = {H, P};
    const int64_t zs[4] = {L * (H * P + pad), H * P + pad, P, 1}; /* rows of H*P + pad */
    th_rng r = th_rng_for(0x2a2a);
    th_tensor *x = th_new(th_ctx, act, 4, sx, NULL), *dt = th_new(th_ctx, act, 3, sdt, NULL);
    th_tensor *A = th_new(th_ctx, PORTSSM_F32, 1, sh, NULL), *Dv = th_new(th_ctx, PORTSSM_F32, 2, shp, NULL);
    th_tensor *Bm = th_new(th_ctx, act, 4, sbc, NULL), *Cm = th_new(th_ctx, act, 4, sbc, NULL);
    th_tensor *z = th_new(th_ctx, act, 4, sx, NULL), *zw = th_new(th_ctx, act, 4, sx, zs);
    th_tensor *dout = th_new(th_ctx, act, 4, sx, NULL);
    th_fill_uniform(x, &r, -1, 1), th_fill_uniform(dt, &r, -2, 1), th_fill_uniform(A, &r, -1, -0.1);
    th_fill_uniform(Dv, &r, -1, 1), th_fill_uniform(Bm, &r, -1, 1), th_fill_uniform(Cm, &r, -1, 1);
    th_fill_uniform(z, &r, -2, 2), th_fill_uniform(dout, &r, -1, 1);
    th_fill_uniform(zw, &r, -3, 3); /* noise between the rows, then z's own values */
    int64_t idx[4];
    for (int64_t k = 0; k < th_numel(z); k++) {
        th_unravel(z, k, idx);
        th_set(zw, idx, th_get(z, idx));
    }
    th_upload(zw);
    th_tensor *outs[2][7];
    const int64_t *shapes[7] = {sx, sdt, sh, sbc, sbc, shp, sx};
    const int nd[7] = {4, 3, 1, 4, 4, 2, 4};
    for (int run = 0; run < 2; run++) {
        for (int i = 0; i < 7; i++) {
            const portssm_dtype d = (i == 2 || i == 5) ? PORTSSM_F32 : act;
            outs[run][i] = th_new(th_ctx, d, nd[i], shapes[i], NULL);
            th_poison(outs[run][i]);
        }
        portssm_ssd_chunk_scan_bwd_args a;
        memset(&a, 0, sizeof a);
        a.x = th_view(x), a.dt = th_view(dt), a.A = th_view(A), a.B = th_view(Bm);
        a.C = th_view(Cm), a.D = th_view(Dv), a.z = th_view(run ? zw : z), a.dout = th_view(dout);
        a.dt_softplus = 1, a.chunk_size = chunk;
        a.dx = th_view(outs[run][0]), a.ddt = th_view(outs[run][1]), a.dA = th_view(outs[run][2]);
        a.dB = th_view(outs[run][3]), a.dC = th_view(outs[run][4]), a.dD = th_view(outs[run][5]);
        a.dz = th_view(outs[run][6]);
        TH_CHECK_OP(th_ctx, portssm_ssd_chunk_scan_bwd(th_ctx, &a));
    }
    static const char *const names[7] = {"dx", "ddt", "dA", "dB", "dC", "dD", "dz"};
    for (int i = 0; i < 7; i++) {
        th_download(outs[0][i]), th_download(outs[1][i]);
        for (int64_t k = 0; k < th_numel(outs[0][i]); k++) {
            th_unravel(outs[0][i], k, idx);
            const double u = th_get(outs[0][i], idx), v = th_get(outs[1][i], idx);
            if (!(u == v))
                fail_msg("%s %s P%lld G%lld N%lld: element %lld is %.9g with z contiguous, "
                         "%.9g with z's rows padded",
                         portssm_dtype_name(act), names[i], (long long)P, (long long)G,
                         (long long)N, (long long)k, u, v);
        }
    }
    th_free_all();
}

static void z_own_row_stride(void **state)
{
    (void)state;
    z_own_row_stride_case(PORTSSM_F32, 4, 2, 8, 32);   /* several chunks of f32's tile */
    z_own_row_stride_case(PORTSSM_BF16, 16, 1, 16, 64);
    z_own_row_stride_case(PORTSSM_F16, 8, 2, 12, 64);  /* N not a multiple of 8 */
}

int main(int argc, char **argv)
{
    static struct CMUnitTest tests[NCASES + 5];
    size_t n = 0;
    tests[n++] = (struct CMUnitTest){"bad_arguments", bad_arguments, NULL, th_teardown, NULL};
    tests[n++] = (struct CMUnitTest){"fwd f16 B1 L131072 H2 P16 G1 N16 (one long sequence)",
                                     long_sequence, NULL, th_teardown, NULL};
    tests[n++] = (struct CMUnitTest){"graph_replay (fwd packed + bwd)", graph_replay, NULL,
                                     th_teardown, NULL};
    tests[n++] = (struct CMUnitTest){"bwd_workspace_query (checkpoints given)",
                                     bwd_workspace_query, NULL, th_teardown, NULL};
    tests[n++] = (struct CMUnitTest){"bwd with z's rows padded (z inside zxbcdt)",
                                     z_own_row_stride, NULL, th_teardown, NULL};
    for (size_t i = 0; i < NCASES; i++) {
        describe(&cases_table[i], names[i], sizeof names[i]);
        tests[n++] = (struct CMUnitTest){names[i], run_case, NULL, th_teardown,
                                         (void *)&cases_table[i]};
    }
    return th_main(argc, argv, "test_ssd", tests, n);
}
