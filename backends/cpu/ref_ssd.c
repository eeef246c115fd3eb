/*
 * ref_ssd.c - the Mamba-2 SSD by its recurrence, forward and backward, in double (see ref.h).
 * No chunks: the chunked kernels of the GPU backends are checked against this definition.
 *
 * Per row b and head h (group g), state s[p,n]; token t restarts a sequence (r_t) when t > 0 and
 * its seq_idx differs from token t-1's, or t is one of cu_seqlens' inner offsets:
 *   dt_t = clamp(sp(dt[b,t,h] + dt_bias[h]));   a_t = exp(dt_t * A[h])
 *   s_t = a_t * (r_t ? 0 : s_{t-1}) + dt_t * B_t * x_t[p]      (s_{-1} = initial_states or 0)
 *   y_t[p] = sum_n C_t * s_t + D * x_t[p];   out = z ? y * silu(z) : y   (y also into y's output)
 * and the checkpoints s_{kT-1} at every T tokens (portssm.h), where given.
 * Backward (y again: the given forward y is not read, so that this stays the definition), h_t[p,n] = dLoss/ds_t: h_{L-1} = dfinal + dy_{L-1} C_{L-1},
 * h_t = dy_t C_t + (r_{t+1} ? 0 : a_{t+1} h_{t+1}), and with s'_t = (r_t ? 0 : s_{t-1}):
 *   dC_t += sum_p dy_t s_t     dB_t += sum_p h_t dt_t x_t     dx_t = sum_n h_t dt_t B_t + D dy_t
 *   ddt_t = sum_{p,n} h_t (A a_t s'_t + B_t x_t)              dA += sum h_t dt_t a_t s'_t
 * then through the clamp (0 outside [lo, hi]) and the softplus; dinitial = a_0 h_0.
 * dA, dB, dC, dD and ddt_bias sum over heads or rows; the caller gives them as double arrays.
 *
 * As computed, with the factors that do not depend on p or n taken out of the sums:
 *   S_t = sum_{p,n} h_t s'_t   U_t[n] = sum_p h_t x_t   dB_t += dt_t U_t   dA += dt_t a_t S_t
 *   ddt_t = A a_t S_t + sum_n B_t[n] U_t[n]              dC_t += sum_p dy_t s_t
 * Order of the sums (the results are these operations in this order, on every machine):
 * y_t[p] and dx_t[p] sum over n in increasing n (as the definition reads); the sums over
 * channels p (S_t, U_t, dC_t) go into LANES interleaved partials (p mod LANES; channel after
 * channel in increasing p, S_t's channel terms in increasing n) added in a fixed tree, and
 * ddt_t adds its n terms in increasing n after A a_t S_t; each row (b,h) sums its own dB, dC,
 * dD, dA, ddt_bias over its tokens (t decreasing), and the rows' partials are added in order
 * of b*H + h (pssm_ref_ssd_bwd_commit).  Rows are independent, which lets the cpu backend run
 * them on several threads with the same results.
 *
 * Speed: a row's state lies in tiles of channels (at()) so that the channel loops vectorise and
 * walk memory in order; the backward does not keep all L states of a row (L*P*N doubles:
 * memory-bound) but one state every T ~ sqrt(L) tokens, and recomputes a segment's states (the
 * same operations, the same bits) before walking it back.
 */
#include "ref.h"
#include "../../src/size_math.h"

#include <math.h>
#include <stddef.h>
#include <string.h>

static int64_t grp(const pssm_ref_ssd *p, int64_t h) { return h / (p->H / p->G); }

/* Offset k of cu_seqlens. */
static int64_t cu(const pssm_ref_ssd *p, int64_t k) { return pssm_ref_index(&p->cu_seqlens, k, 0, 0, 0); }

/*
 * Does token t of row b start a new sequence (t > 0)?  A row's tokens are visited in order,
 * forward (dir > 0: *k starts at 1) or backward (dir < 0: *k starts at n_seq - 1), and *k walks
 * cu_seqlens' inner offsets along with them (they do not decrease: cpu_ssd.c checks), so a row
 * costs O(L + n_seq), not O(L * n_seq).
 */
static int restarts(const pssm_ref_ssd *p, int64_t b, int64_t t, int64_t *k, int dir)
{
    if (t == 0)
        return 0;
    int r = p->seq_idx.data && pssm_ref_index(&p->seq_idx, b, t, 0, 0) !=
                                   pssm_ref_index(&p->seq_idx, b, t - 1, 0, 0);
    if (p->cu_seqlens.data) {
        if (dir > 0)
            while (*k < p->nseq && cu(p, *k) < t)
                ++*k;
        else
            while (*k >= 1 && cu(p, *k) > t)
                --*k;
        r |= *k >= 1 && *k < p->nseq && cu(p, *k) == t;
    }
    return r;
}

/* dt_t after bias, softplus and clamp; *grad: d dt_t / d dt[b,t,h]. */
static double dt_of(const pssm_ref_ssd *p, int64_t b, int64_t t, int64_t h, double *grad)
{
    double v = pssm_ref_get(&p->dt, b, t, h, 0) +
               (p->dt_bias.data ? pssm_ref_get(&p->dt_bias, h, 0, 0, 0) : 0.0);
    double g = 1.0;
    if (p->softplus) {
        g = pssm_ref_dsoftplus(v);
        v = pssm_ref_softplus(v);
    }
    if (p->limit && (v < p->dt_min || v > p->dt_max)) {
        v = v < p->dt_min ? p->dt_min : p->dt_max;
        g = 0.0;
    }
    if (grad)
        *grad = g;
    return v;
}

/* D of head h for every channel: Dr[q] (0 without D). */
static void dskip_row(const pssm_ref_ssd *p, int64_t h, double *Dr)
{
    for (int64_t q = 0; q < p->P; q++)
        Dr[q] = !p->Dv.data ? 0.0
                : p->D_per_head ? pssm_ref_get(&p->Dv, h, 0, 0, 0)
                                : pssm_ref_get(&p->Dv, h, q, 0, 0);
}

/* ---------------------------------------------------------------- the row kernels
 * The loops over channels q are the inner ones, run in vector registers, while every channel
 * keeps the operation order of the definition (y_t[q] sums over n in increasing n). */

/* On x86-64 Linux the row kernels are built twice, for AVX2 (4 doubles a register) and the
 * baseline SSE2, and the loader picks one per CPU: the same operations in the same order
 * (neither build may fuse a multiply and an add: AVX2 alone has no FMA, and the cpu sources
 * are built with -ffp-contract=off), so the results are the same bits. */
/* (Not in sanitizer builds: the loader runs the choosing function before the sanitizer's
 * runtime is up, and an instrumented one crashes there.) */
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
#define PSSM_ROW_SANITIZED 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer) || __has_feature(thread_sanitizer) ||                     \
    __has_feature(memory_sanitizer)
#define PSSM_ROW_SANITIZED 1
#endif
#endif
#if defined(__x86_64__) && defined(__gnu_linux__) && !defined(PSSM_ROW_SANITIZED) &&           \
    ((defined(__clang__) && __clang_major__ >= 14) || (!defined(__clang__) && __GNUC__ >= 8))
#define ROW_KERNEL __attribute__((target_clones("avx2", "default")))
#else
#define ROW_KERNEL
#endif

/* Channels a loop keeps in registers at once, as two vectors of 4 doubles (GNU C vectors: the
 * compiler maps them onto whatever the target has), and the lanes of the sums over channels. */
#define LANES 8
typedef double v4 __attribute__((vector_size(32)));
/* (Macros, not functions: a function taking or returning v4 would have an ABI that depends on
 * the target, which the compiler warns about.) */
#define LD4(p) __extension__({ v4 v_; memcpy(&v_, (p), sizeof v_); v_; })
#define ST4(p, v) __extension__({ const v4 w_ = (v); memcpy((p), &w_, sizeof w_); })
#define BC4(s) __extension__({ const double s_ = (s); (v4){s_, s_, s_, s_}; })

/* A row's P x N state (and h) lies in tiles of LANES channels, each tile n-major (LANES
 * doubles per n), so that the kernels walk memory in order; the last P % LANES channels form a
 * narrower tile of the same kind.  Offset of element (q, n): */
static int64_t at(int64_t P, int64_t N, int64_t q, int64_t n)
{
    const int64_t P8 = P - P % LANES;
    if (q < P8)
        return q / LANES * LANES * N + n * LANES + q % LANES;
    return P8 * N + n * (P - P8) + (q - P8);
}

/* One step of the recurrence for every channel: cur = a * prev + (dt * B_n) * x_q; y (when
 * given) = sum_n C_n * cur in increasing n.  prev is the zero state at a restart; prev == cur
 * updates a state in place (each element is read before it is written).  Channels go LANES at
 * a time through all n, so that their y stays in registers. */
ROW_KERNEL static void step(const double *prev, double *cur,
                            const double *restrict x, const double *restrict Bv,
                            const double *restrict Cv, double *restrict y, double dt, double a,
                            int64_t P, int64_t N)
{
    const int64_t P8 = P - P % LANES;
    const v4 va = BC4(a);
    int64_t q0 = 0;
    /* two tiles at once: four independent sums in flight (each y still sums in increasing n);
     * every load of an iteration before its stores (the tiles lie 8N doubles apart, and a
     * store followed by a load of the same address modulo 4096 would stall) */
    for (; q0 + 2 * LANES <= P8; q0 += 2 * LANES) {
        const v4 x0 = LD4(x + q0), x1 = LD4(x + q0 + 4), x2 = LD4(x + q0 + 8),
                 x3 = LD4(x + q0 + 12);
        v4 y0 = BC4(0.0), y1 = BC4(0.0), y2 = BC4(0.0), y3 = BC4(0.0);
        const double *pa = prev + q0 * N, *pb = pa + LANES * N;
        double *ca = cur + q0 * N, *cb = ca + LANES * N;
        for (int64_t n = 0; n < N; n++) {
            const v4 db = BC4(dt * Bv[n]), c = BC4(Cv[n]);
            const int64_t o = n * LANES;
            const v4 p0 = LD4(pa + o), p1 = LD4(pa + o + 4), p2 = LD4(pb + o), p3 = LD4(pb + o + 4);
            const v4 v0 = va * p0 + db * x0, v1 = va * p1 + db * x1;
            const v4 v2 = va * p2 + db * x2, v3 = va * p3 + db * x3;
            ST4(ca + o, v0);
            ST4(ca + o + 4, v1);
            ST4(cb + o, v2);
            ST4(cb + o + 4, v3);
            y0 += c * v0;
            y1 += c * v1;
            y2 += c * v2;
            y3 += c * v3;
        }
        if (y) {
            ST4(y + q0, y0);
            ST4(y + q0 + 4, y1);
            ST4(y + q0 + 8, y2);
            ST4(y + q0 + 12, y3);
        }
    }
    for (; q0 < P8; q0 += LANES) {
        const v4 x0 = LD4(x + q0), x1 = LD4(x + q0 + 4);
        v4 y0 = BC4(0.0), y1 = BC4(0.0);
        const double *pa = prev + q0 * N;
        double *ca = cur + q0 * N;
        for (int64_t n = 0; n < N; n++) {
            const v4 db = BC4(dt * Bv[n]), c = BC4(Cv[n]);
            const int64_t o = n * LANES;
            const v4 v0 = va * LD4(pa + o) + db * x0, v1 = va * LD4(pa + o + 4) + db * x1;
            ST4(ca + o, v0);
            ST4(ca + o + 4, v1);
            y0 += c * v0;
            y1 += c * v1;
        }
        if (y) {
            ST4(y + q0, y0);
            ST4(y + q0 + 4, y1);
        }
    }
    const int64_t R = P - P8;
    for (int64_t q = P8; q < P; q++) { /* the channels past the last full tile */
        double acc = 0.0;
        const double *pt = prev + P8 * N + (q - P8);
        double *ct = cur + P8 * N + (q - P8);
        for (int64_t n = 0; n < N; n++) {
            const double v = a * pt[n * R] + dt * Bv[n] * x[q];
            ct[n * R] = v;
            acc += Cv[n] * v;
        }
        if (y)
            y[q] = acc;
    }
}

/* Sums over channels are taken in LANES interleaved partial sums (channel q into lane q mod
 * LANES, in increasing q), added pairwise in a fixed tree: the same order on every machine and
 * for every vector width (see the file comment). */
static double lane_sum(const double *l)
{
    return ((l[0] + l[1]) + (l[2] + l[3])) + ((l[4] + l[5]) + (l[6] + l[7]));
}

/* The backward step of one token for every channel and state (see the file comment): h holds
 * h_{t+1} carried back (a_{t+1} h_{t+1}), becomes h_t, then what s_{t-1} receives.  st = s_t,
 * sp = s'_t (the zero state at a restart).  dx (P) comes in as D * dy and gets the state terms
 * in increasing n.  Into lanes (zeroed here): lV (N, LANES) the terms of V_t[n] = sum_p dy s_t,
 * lU (N, LANES) of U_t[n] = sum_p h_t x_t, lS (LANES) of S_t = sum_{p,n} h_t s'_t (channel after
 * channel, each in increasing n).  Channels go LANES at a time through all n, walking their
 * tile in order, their dx in registers. */
ROW_KERNEL static void back_step(double *restrict h, const double *restrict st,
                                 const double *restrict sp, const double *restrict x,
                                 const double *restrict dy, const double *restrict Bv,
                                 const double *restrict Cv, double dt, double a,
                                 double *restrict dx, double *restrict lU, double *restrict lV,
                                 double *restrict lS, int64_t P, int64_t N)
{
    const int64_t P8 = P - P % LANES, R = P - P8;
    const v4 vdt = BC4(dt), va = BC4(a);
    v4 S0 = BC4(0.0), S1 = BC4(0.0);
    for (int64_t i = 0; i < N * LANES; i++)
        lU[i] = lV[i] = 0.0;
    for (int64_t q0 = 0; q0 < P8; q0 += LANES) {
        const v4 x0 = LD4(x + q0), x1 = LD4(x + q0 + 4), dy0 = LD4(dy + q0), dy1 = LD4(dy + q0 + 4);
        v4 dx0 = LD4(dx + q0), dx1 = LD4(dx + q0 + 4);
        double *ht = h + q0 * N;
        const double *stt = st + q0 * N, *spt = sp + q0 * N;
        for (int64_t n = 0; n < N; n++) {
            const v4 vB = BC4(Bv[n]), vC = BC4(Cv[n]);
            const int64_t o = n * LANES;
            const v4 h0 = LD4(ht + o) + dy0 * vC, h1 = LD4(ht + o + 4) + dy1 * vC; /* h_t */
            ST4(lV + o, LD4(lV + o) + dy0 * LD4(stt + o));
            ST4(lV + o + 4, LD4(lV + o + 4) + dy1 * LD4(stt + o + 4));
            ST4(lU + o, LD4(lU + o) + h0 * x0);
            ST4(lU + o + 4, LD4(lU + o + 4) + h1 * x1);
            S0 += h0 * LD4(spt + o);
            S1 += h1 * LD4(spt + o + 4);
            dx0 += h0 * vdt * vB;
            dx1 += h1 * vdt * vB;
            ST4(ht + o, h0 * va); /* what s_{t-1} receives through s_t */
            ST4(ht + o + 4, h1 * va);
        }
        ST4(dx + q0, dx0);
        ST4(dx + q0 + 4, dx1);
    }
    ST4(lS, S0);
    ST4(lS + 4, S1);
    for (int64_t q = P8; q < P; q++) { /* the channels past the last full group, in their lanes */
        const int64_t k = q - P8;
        for (int64_t n = 0; n < N; n++) {
            const int64_t o = P8 * N + n * R + k;
            const double hv = h[o] + dy[q] * Cv[n];
            lV[n * LANES + k] += dy[q] * st[o];
            lU[n * LANES + k] += hv * x[q];
            lS[k] += hv * sp[o];
            dx[q] += hv * dt * Bv[n];
            h[o] = hv * a;
        }
    }
}

/* ---------------------------------------------------------------- forward */

/* Writes the P x N state s (tiled, at()) as element (k, h) of a (K,H,P,N) output. */
static void put_state(const pssm_ref_ssd *p, const pssm_ref_out *o, int64_t k, int64_t h,
                      const double *s)
{
    for (int64_t q = 0; q < p->P; q++)
        for (int64_t n = 0; n < p->N; n++)
            pssm_ref_put(o, k, h, q, n, s[at(p->P, p->N, q, n)]);
}

/* Writes the state s (tiled, at()) as checkpoint k of row (b, h) in a (B,H,K,P*N) output. */
static void put_checkpoint(const pssm_ref_ssd *p, const pssm_ref_out *o, int64_t b, int64_t h,
                           int64_t k, const double *s)
{
    for (int64_t q = 0; q < p->P; q++)
        for (int64_t n = 0; n < p->N; n++)
            pssm_ref_put(o, b, h, k, q * p->N + n, s[at(p->P, p->N, q, n)]);
}

/* The start state s_{-1} of row (b,h), tiled (at()). */
static void load_start(const pssm_ref_ssd *p, int64_t b, int64_t h, double *s)
{
    for (int64_t q = 0; q < p->P; q++)
        for (int64_t n = 0; n < p->N; n++)
            s[at(p->P, p->N, q, n)] = p->initial_states.data
                                  ? pssm_ref_get(&p->initial_states, b, h, q, n)
                                  : 0.0;
}

int64_t pssm_ref_ssd_fwd_work(const pssm_ref_ssd *p)
{
    const int64_t PN = pssm_size_mul(p->P, p->N);
    return pssm_size_add(PN, pssm_size_add(pssm_size_mul(5, p->P), pssm_size_mul(2, p->N)));
}

/* Is sequence k empty, and not the first (whose start state the row writes)? */
static int empty_later(const pssm_ref_ssd *p, int64_t k)
{
    return k > 0 && cu(p, k + 1) == cu(p, k);
}

void pssm_ref_ssd_fwd_prepare(const pssm_ref_ssd *p, const pssm_ref_out *varlen_states)
{
    if (varlen_states->data) /* empty sequences past the first start at 0; other slots: rows */
        for (int64_t k = 0; k < p->nseq; k++)
            for (int64_t h = 0; empty_later(p, k) && h < p->H; h++)
                for (int64_t i = 0; i < p->P * p->N; i++)
                    pssm_ref_put(varlen_states, k, h, i / p->N, i % p->N, 0.0);
}

void pssm_ref_ssd_fwd_row(const pssm_ref_ssd *p, int64_t b, int64_t h, const pssm_ref_out *out,
                          const pssm_ref_out *final_states, const pssm_ref_out *varlen_states,
                          const pssm_ref_out *yout, const pssm_ref_out *checkpoints,
                          int64_t T, double *work)
{
    const int64_t P = p->P, N = p->N, PN = P * N, g = grp(p, h);
    double *s = work, *x = s + PN, *y = x + P, *Bv = y + P, *Cv = Bv + N, *Dr = Cv + N;
    double *zr = Dr + P, *o = zr + P;
    dskip_row(p, h, Dr);
    const pssm_ref_out *varlen = varlen_states->data ? varlen_states : NULL;
    const pssm_ref_out *ckpt = checkpoints->data ? checkpoints : NULL;
    const double A = pssm_ref_get(&p->A, h, 0, 0, 0);
    load_start(p, b, h, s);
    if (varlen && cu(p, 1) == 0) /* the first sequence is empty: its start state */
        put_state(p, varlen, 0, h, s);
    if (ckpt)
        put_checkpoint(p, ckpt, b, h, 0, s);
    int64_t inner = 1, ending = 0; /* cursors into cu_seqlens (restarts(); the ends below) */
    for (int64_t t = 0; t < p->L; t++) {
        const int r = restarts(p, b, t, &inner, 1);
        const double dt = dt_of(p, b, t, h, NULL), a = exp(dt * A);
        pssm_ref_gather(&p->x, b, t, h, 0, 3, P, x);
        pssm_ref_gather(&p->Bm, b, t, g, 0, 3, N, Bv);
        pssm_ref_gather(&p->Cm, b, t, g, 0, 3, N, Cv);
        if (r) /* the state restarts from zero: a * 0 as the definition reads */
            memset(s, 0, (size_t)PN * sizeof(double));
        step(s, s, x, Bv, Cv, y, dt, a, P, N); /* in place: one state in memory, not two */
        for (int64_t q = 0; q < P; q++)
            o[q] = y[q] + Dr[q] * x[q];
        if (yout->data)
            pssm_ref_scatter(yout, b, t, h, 0, 3, P, o);
        if (p->z.data) {
            pssm_ref_gather(&p->z, b, t, h, 0, 3, P, zr);
            for (int64_t q = 0; q < P; q++)
                o[q] *= pssm_ref_silu(zr[q]);
        }
        pssm_ref_scatter(out, b, t, h, 0, 3, P, o);
        if (ckpt && (t + 1) % T == 0 && t + 1 < p->L)
            put_checkpoint(p, ckpt, b, h, (t + 1) / T, s);
        if (varlen) { /* the end of the non-empty sequence that ends at t, if one does */
            while (ending < p->nseq && cu(p, ending + 1) < t + 1)
                ending++;
            for (int64_t k = ending; k < p->nseq && cu(p, k + 1) == t + 1; k++)
                if (cu(p, k + 1) > cu(p, k))
                    put_state(p, varlen, k, h, s);
        }
    }
    if (final_states->data)
        put_state(p, final_states, b, h, s);
}

void pssm_ref_ssd_fwd(const pssm_ref_ssd *p, const pssm_ref_out *out,
                      const pssm_ref_out *final_states, const pssm_ref_out *varlen_states,
                      const pssm_ref_out *yout, const pssm_ref_out *checkpoints,
                      int64_t ckpt_interval, double *work)
{
    pssm_ref_ssd_fwd_prepare(p, varlen_states);
    for (int64_t b = 0; b < p->B; b++)
        for (int64_t h = 0; h < p->H; h++)
            pssm_ref_ssd_fwd_row(p, b, h, out, final_states, varlen_states, yout, checkpoints,
                                 ckpt_interval, work);
}

/* ---------------------------------------------------------------- backward */

/* Tokens per segment of the backward: the sweep recomputes a segment's states from the one
 * before it (kept every T tokens) and walks it back.  Short segments stay in the core's cache
 * for the walk (6 states of a 64 x 128 head: 384 KiB); at most 256 kept states per row bound
 * the memory of long rows.  (With all L states the sweep was bound by memory, not arithmetic.) */
static int64_t segment(int64_t L)
{
    const int64_t T = (L + 255) / 256;
    return T > 6 ? T : 6;
}

/* The row's scratch, in the order pssm_ref_ssd_bwd_work counts it. */
typedef struct bwd_work {
    double *ck;        /* (K, PN): the state before each segment                      */
    double *seg;       /* (T, PN): s_t of the segment's tokens                         */
    double *h, *zero, *tmp; /* (PN) each                                               */
    double *yseg;      /* (T, P): y_t (before D) of the segment's tokens               */
    double *dtv, *dgr, *av, *rv; /* (L) each: dt_t, d dt_t / d dt, a_t, restart (0/1)  */
    double *x, *dy, *dx; /* (P) each                                                    */
    double *Dr, *g_out, *zr, *dzr; /* (P) each: D, dout, z, dz of the token              */
    double *Bv, *Cv;   /* (N) each                                                     */
    double *lU, *lV;   /* (N, LANES) each: back_step's lanes                            */
    double *lS;        /* (LANES)                                                      */
} bwd_work;

/* The row's partials (their own array: they wait there for pssm_ref_ssd_bwd_commit while the
 * thread goes on with another row). */
typedef struct bwd_part {
    double *dB, *dC;   /* (L, N) each: this head's dB_t, dC_t                           */
    double *dD;        /* (P): sum_t dy x per channel (per head: in [0])                */
    double *dA;        /* (1): sum_t dt a S_t                                          */
    double *ddt_bias;  /* (1)                                                          */
} bwd_part;

static int64_t part_layout(const pssm_ref_ssd *p, double *w, bwd_part *o)
{
    const int64_t LN = pssm_size_mul(p->L, p->N);
    if (w)
        *o = (bwd_part){w, w + LN, w + 2 * LN, w + 2 * LN + p->P, w + 2 * LN + p->P + 1};
    return pssm_size_add(pssm_size_mul(2, LN), p->P + 2);
}

int64_t pssm_ref_ssd_bwd_part(const pssm_ref_ssd *p) { return part_layout(p, NULL, NULL); }

/* The scratch's length; with w, its arrays into *o. */
static int64_t bwd_layout(const pssm_ref_ssd *p, double *w, bwd_work *o)
{
    const int64_t P = p->P, N = p->N, L = p->L, T = segment(L), K = (L + T - 1) / T;
    const int64_t PN = pssm_size_mul(P, N), NL = pssm_size_mul(N, LANES);
    bwd_work unused;
    if (!o)
        o = &unused;
    const int64_t len[] = {pssm_size_mul(K, PN), pssm_size_mul(T, PN), PN, PN, PN,
                           pssm_size_mul(T, P), L, L, L, L, P, P, P, P, P, P, P, N, N, NL, NL,
                           LANES};
    double **dst[] = {&o->ck, &o->seg, &o->h, &o->zero, &o->tmp, &o->yseg, &o->dtv, &o->dgr,
                      &o->av, &o->rv, &o->x, &o->dy, &o->dx, &o->Dr, &o->g_out, &o->zr, &o->dzr,
                      &o->Bv, &o->Cv, &o->lU, &o->lV, &o->lS};
    _Static_assert(sizeof len / sizeof len[0] == sizeof dst / sizeof dst[0], "one length each");
    int64_t total = 0;
    for (size_t i = 0; i < sizeof len / sizeof len[0]; i++) {
        if (w)
            *dst[i] = w + total;
        total = pssm_size_add(total, len[i]);
    }
    return total;
}

int64_t pssm_ref_ssd_bwd_scratch(const pssm_ref_ssd *p) { return bwd_layout(p, NULL, NULL); }

int64_t pssm_ref_ssd_bwd_work(const pssm_ref_ssd *p)
{
    return pssm_size_add(pssm_ref_ssd_bwd_scratch(p), pssm_ref_ssd_bwd_part(p));
}

void pssm_ref_ssd_bwd_zero(const pssm_ref_ssd *p, const pssm_ref_ssd_grads *gr)
{
    pssm_ref_zero(gr->dA, p->H);
    pssm_ref_zero(gr->dB, p->B * p->L * p->G * p->N);
    pssm_ref_zero(gr->dC, p->B * p->L * p->G * p->N);
    pssm_ref_zero(gr->dD, p->D_per_head ? p->H : p->H * p->P);
    pssm_ref_zero(gr->ddt_bias, p->H);
}

void pssm_ref_ssd_bwd_row(const pssm_ref_ssd *p, const pssm_ref_in *dout,
                          const pssm_ref_in *dfinal, const pssm_ref_ssd_grads *gr, int64_t b,
                          int64_t h, double *work, double *part)
{
    const int64_t P = p->P, N = p->N, PN = P * N, L = p->L, g = grp(p, h);
    const int64_t T = segment(L), K = (L + T - 1) / T;
    bwd_work w;
    bwd_layout(p, work, &w);
    bwd_part pt;
    part_layout(p, part, &pt);
    const double Ah = pssm_ref_get(&p->A, h, 0, 0, 0);
    const int want_y = p->z.data && gr->dz.data; /* y_t only serves dz */
    dskip_row(p, h, w.Dr);
    int64_t inner = 1; /* restarts()' cursor */
    for (int64_t t = 0; t < L; t++) {
        w.dtv[t] = dt_of(p, b, t, h, &w.dgr[t]);
        w.av[t] = exp(w.dtv[t] * Ah);
        w.rv[t] = restarts(p, b, t, &inner, 1);
    }
    for (int64_t i = 0; i < PN; i++)
        w.zero[i] = 0.0;
    pt.dA[0] = 0.0;
    for (int64_t q = 0; q < P; q++)
        pt.dD[q] = 0.0;
    pt.ddt_bias[0] = 0.0;
    /* the states before each segment, s_{kT-1}: stepping tmp in place, copied out at each */
    load_start(p, b, h, w.tmp);
    memcpy(w.ck, w.tmp, (size_t)PN * sizeof(double));
    for (int64_t t = 0; t < (K - 1) * T; t++) {
        pssm_ref_gather(&p->x, b, t, h, 0, 3, P, w.x);
        pssm_ref_gather(&p->Bm, b, t, g, 0, 3, N, w.Bv);
        pssm_ref_gather(&p->Cm, b, t, g, 0, 3, N, w.Cv);
        if (w.rv[t] != 0.0)
            memset(w.tmp, 0, (size_t)PN * sizeof(double));
        step(w.tmp, w.tmp, w.x, w.Bv, w.Cv, NULL, w.dtv[t], w.av[t], P, N);
        if ((t + 1) % T == 0)
            memcpy(w.ck + (t + 1) / T * PN, w.tmp, (size_t)PN * sizeof(double));
    }
    for (int64_t q = 0; q < P; q++)
        for (int64_t n = 0; n < N; n++)
            w.h[at(P, N, q, n)] = dfinal->data ? pssm_ref_get(dfinal, b, h, q, n) : 0.0;
    for (int64_t k = K - 1; k >= 0; k--) {
        const int64_t t0 = k * T, t1 = t0 + T < L ? t0 + T : L;
        /* s_{t-1} of token t of the segment: the kept state for t0, else the segment's */
#define PREV(t) ((t) == t0 ? w.ck + k * PN : w.seg + ((t) - 1 - t0) * PN)
        for (int64_t t = t0; t < t1; t++) {
            pssm_ref_gather(&p->x, b, t, h, 0, 3, P, w.x);
            pssm_ref_gather(&p->Bm, b, t, g, 0, 3, N, w.Bv);
            pssm_ref_gather(&p->Cm, b, t, g, 0, 3, N, w.Cv);
            step(w.rv[t] != 0.0 ? w.zero : PREV(t), w.seg + (t - t0) * PN, w.x, w.Bv, w.Cv,
                 want_y ? w.yseg + (t - t0) * P : NULL, w.dtv[t], w.av[t], P, N);
        }
        for (int64_t t = t1 - 1; t >= t0; t--) {
            const double dt = w.dtv[t], a = w.av[t];
            const double *yt = w.yseg + (t - t0) * P;
            pssm_ref_gather(&p->x, b, t, h, 0, 3, P, w.x);
            pssm_ref_gather(&p->Bm, b, t, g, 0, 3, N, w.Bv);
            pssm_ref_gather(&p->Cm, b, t, g, 0, 3, N, w.Cv);
            pssm_ref_gather(dout, b, t, h, 0, 3, P, w.g_out);
            if (p->z.data)
                pssm_ref_gather(&p->z, b, t, h, 0, 3, P, w.zr);
            for (int64_t q = 0; q < P; q++) {
                const double xv = w.x[q], Dq = w.Dr[q], g_out = w.g_out[q];
                double d = g_out;
                if (p->z.data) {
                    const double zt = w.zr[q];
                    if (want_y)
                        w.dzr[q] = g_out * (yt[q] + Dq * xv) * pssm_ref_dsilu(zt);
                    d *= pssm_ref_silu(zt);
                }
                w.dy[q] = d;
                pt.dD[p->D_per_head ? 0 : q] += d * xv;
                w.dx[q] = Dq * d;
            }
            if (want_y)
                pssm_ref_scatter(&gr->dz, b, t, h, 0, 3, P, w.dzr);
            back_step(w.h, w.seg + (t - t0) * PN, w.rv[t] != 0.0 ? w.zero : PREV(t), w.x, w.dy,
                      w.Bv, w.Cv, dt, a, w.dx, w.lU, w.lV, w.lS, P, N);
            if (w.rv[t] != 0.0) /* a restart: nothing flows back past it */
                for (int64_t i = 0; i < PN; i++)
                    w.h[i] = 0.0;
            pssm_ref_scatter(&gr->dx, b, t, h, 0, 3, P, w.dx);
            const double S = lane_sum(w.lS);
            double ddt = Ah * a * S;
            for (int64_t n = 0; n < N; n++) {
                const double U = lane_sum(w.lU + n * LANES);
                pt.dB[t * N + n] = dt * U;
                pt.dC[t * N + n] = lane_sum(w.lV + n * LANES);
                ddt += w.Bv[n] * U;
            }
            pt.dA[0] += dt * a * S;
            const double draw = ddt * w.dgr[t];
            pssm_ref_put(&gr->ddt, b, t, h, 0, draw);
            pt.ddt_bias[0] += draw;
        }
#undef PREV
    }
    if (gr->dinitial_states.data)
        put_state(p, &gr->dinitial_states, b, h, w.h);
}

void pssm_ref_ssd_bwd_commit(const pssm_ref_ssd *p, const pssm_ref_ssd_grads *gr, int64_t b,
                             int64_t h, const double *part)
{
    const int64_t N = p->N, L = p->L, G = p->G, g = grp(p, h);
    bwd_part pt;
    part_layout(p, (double *)part, &pt);
    gr->dA[h] += pt.dA[0];
    if (gr->ddt_bias)
        gr->ddt_bias[h] += pt.ddt_bias[0];
    if (gr->dD) {
        if (p->D_per_head)
            gr->dD[h] += pt.dD[0];
        else
            for (int64_t q = 0; q < p->P; q++)
                gr->dD[h * p->P + q] += pt.dD[q];
    }
    for (int64_t t = 0; t < L; t++) {
        double *dB = gr->dB + ((b * L + t) * G + g) * N, *dC = gr->dC + ((b * L + t) * G + g) * N;
        for (int64_t n = 0; n < N; n++) {
            dB[n] += pt.dB[t * N + n];
            dC[n] += pt.dC[t * N + n];
        }
    }
}

void pssm_ref_ssd_bwd(const pssm_ref_ssd *p, const pssm_ref_in *dout, const pssm_ref_in *dfinal,
                      const pssm_ref_ssd_grads *gr, double *work)
{
    pssm_ref_ssd_bwd_zero(p, gr);
    for (int64_t b = 0; b < p->B; b++)
        for (int64_t h = 0; h < p->H; h++) {
            double *part = work + pssm_ref_ssd_bwd_scratch(p);
            pssm_ref_ssd_bwd_row(p, dout, dfinal, gr, b, h, work, part);
            pssm_ref_ssd_bwd_commit(p, gr, b, h, part);
        }
}
