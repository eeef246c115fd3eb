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
 */
#include "ref.h"
#include "../../src/size_math.h"

#include <math.h>
#include <stddef.h>

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

static double dskip(const pssm_ref_ssd *p, int64_t h, int64_t q)
{
    if (!p->Dv.data)
        return 0.0;
    return p->D_per_head ? pssm_ref_get(&p->Dv, h, 0, 0, 0) : pssm_ref_get(&p->Dv, h, q, 0, 0);
}

int64_t pssm_ref_ssd_work(const pssm_ref_ssd *p)
{
    const int64_t PN = pssm_size_mul(p->P, p->N);
    return pssm_size_add(pssm_size_mul(pssm_size_add(p->L, 2), PN),
                         pssm_size_mul(2 * p->L, p->P));
}

/* Writes the P x N state s as element (k, h) of a (K,H,P,N) output. */
static void put_state(const pssm_ref_ssd *p, const pssm_ref_out *o, int64_t k, int64_t h,
                      const double *s)
{
    for (int64_t q = 0; q < p->P; q++)
        for (int64_t n = 0; n < p->N; n++)
            pssm_ref_put(o, k, h, q, n, s[q * p->N + n]);
}

/* Writes the P x N state s as checkpoint k of row (b, h) in a (B,H,K,P*N) output. */
static void put_checkpoint(const pssm_ref_ssd *p, const pssm_ref_out *o, int64_t b, int64_t h,
                           int64_t k, const double *s)
{
    for (int64_t i = 0; i < p->P * p->N; i++)
        pssm_ref_put(o, b, h, k, i, s[i]);
}

/* The states of row (b,h): s_t at states + (t+1)*P*N, s_{-1} at states (all of them when all,
 * else only the latest at states); y before D and z into y (L*P); varlen states captured, and
 * the checkpoints where ckpt is given: s_{kT-1} (s_{-1}: the start state). */
static void run_row(const pssm_ref_ssd *p, int64_t b, int64_t h, double *states, int all,
                    double *y, const pssm_ref_out *varlen, const pssm_ref_out *ckpt, int64_t T)
{
    const int64_t P = p->P, N = p->N, PN = P * N, g = grp(p, h);
    double *s = states;
    for (int64_t q = 0; q < P; q++)
        for (int64_t n = 0; n < N; n++)
            s[q * N + n] = p->initial_states.data
                               ? pssm_ref_get(&p->initial_states, b, h, q, n)
                               : 0.0;
    if (varlen && cu(p, 1) == 0) /* the first sequence is empty: its start state */
        put_state(p, varlen, 0, h, s);
    if (ckpt)
        put_checkpoint(p, ckpt, b, h, 0, s);
    int64_t inner = 1, ending = 0; /* cursors into cu_seqlens (restarts(); the ends below) */
    for (int64_t t = 0; t < p->L; t++) {
        const double *prev = s;
        double *cur = all ? s + PN : s;
        const int r = restarts(p, b, t, &inner, 1);
        const double dt = dt_of(p, b, t, h, NULL), a = exp(dt * pssm_ref_get(&p->A, h, 0, 0, 0));
        for (int64_t q = 0; q < P; q++) {
            const double xv = pssm_ref_get(&p->x, b, t, h, q);
            double acc = 0.0;
            for (int64_t n = 0; n < N; n++) {
                const double sp = r ? 0.0 : prev[q * N + n];
                const double v = a * sp + dt * pssm_ref_get(&p->Bm, b, t, g, n) * xv;
                cur[q * N + n] = v;
                acc += pssm_ref_get(&p->Cm, b, t, g, n) * v;
            }
            y[t * P + q] = acc;
        }
        if (all)
            s = cur;
        if (ckpt && (t + 1) % T == 0 && t + 1 < p->L)
            put_checkpoint(p, ckpt, b, h, (t + 1) / T, cur);
        if (varlen) { /* the end of the non-empty sequence that ends at t, if one does */
            while (ending < p->nseq && cu(p, ending + 1) < t + 1)
                ending++;
            for (int64_t k = ending; k < p->nseq && cu(p, k + 1) == t + 1; k++)
                if (cu(p, k + 1) > cu(p, k))
                    put_state(p, varlen, k, h, cur);
        }
    }
}

/* Is sequence k empty, and not the first (whose start state run_row writes)? */
static int empty_later(const pssm_ref_ssd *p, int64_t k)
{
    return k > 0 && cu(p, k + 1) == cu(p, k);
}

void pssm_ref_ssd_fwd(const pssm_ref_ssd *p, const pssm_ref_out *out,
                      const pssm_ref_out *final_states, const pssm_ref_out *varlen_states,
                      const pssm_ref_out *yout, const pssm_ref_out *checkpoints,
                      int64_t ckpt_interval, double *work)
{
    const int64_t P = p->P, N = p->N, PN = P * N;
    double *s = work, *y = work + PN;
    const pssm_ref_out *varlen = varlen_states->data ? varlen_states : NULL;
    if (varlen) /* empty sequences past the first start at 0; every other slot is written once */
        for (int64_t k = 0; k < p->nseq; k++)
            for (int64_t h = 0; empty_later(p, k) && h < p->H; h++)
                for (int64_t i = 0; i < PN; i++)
                    pssm_ref_put(varlen, k, h, i / N, i % N, 0.0);
    for (int64_t b = 0; b < p->B; b++)
        for (int64_t h = 0; h < p->H; h++) {
            run_row(p, b, h, s, 0, y, varlen, checkpoints->data ? checkpoints : NULL,
                    ckpt_interval);
            for (int64_t t = 0; t < p->L; t++)
                for (int64_t q = 0; q < P; q++) {
                    const double xv = pssm_ref_get(&p->x, b, t, h, q);
                    double v = y[t * P + q] + dskip(p, h, q) * xv;
                    if (yout->data)
                        pssm_ref_put(yout, b, t, h, q, v);
                    if (p->z.data)
                        v *= pssm_ref_silu(pssm_ref_get(&p->z, b, t, h, q));
                    pssm_ref_put(out, b, t, h, q, v);
                }
            if (final_states->data)
                put_state(p, final_states, b, h, s);
        }
}

void pssm_ref_ssd_bwd(const pssm_ref_ssd *p, const pssm_ref_in *dout, const pssm_ref_in *dfinal,
                      const pssm_ref_ssd_grads *gr, double *work)
{
    const int64_t P = p->P, N = p->N, PN = P * N, H = p->H, G = p->G, L = p->L;
    double *states = work, *hs = work + (L + 1) * PN, *y = hs + PN, *dy = y + L * P;
    pssm_ref_zero(gr->dA, H);
    pssm_ref_zero(gr->dB, p->B * L * G * N);
    pssm_ref_zero(gr->dC, p->B * L * G * N);
    pssm_ref_zero(gr->dD, p->D_per_head ? H : H * P);
    pssm_ref_zero(gr->ddt_bias, H);
    for (int64_t b = 0; b < p->B; b++)
        for (int64_t h = 0; h < H; h++) {
            const int64_t g = grp(p, h);
            run_row(p, b, h, states, 1, y, NULL, NULL, 0);
            for (int64_t q = 0; q < P; q++)
                for (int64_t n = 0; n < N; n++)
                    hs[q * N + n] = dfinal->data ? pssm_ref_get(dfinal, b, h, q, n) : 0.0;
            const double Ah = pssm_ref_get(&p->A, h, 0, 0, 0);
            int64_t inner = p->nseq - 1; /* restarts()' cursor, walking backward */
            for (int64_t t = L - 1; t >= 0; t--) {
                const int64_t row = b * L + t;
                double dgrad;
                const double dt = dt_of(p, b, t, h, &dgrad), a = exp(dt * Ah);
                const int r = restarts(p, b, t, &inner, -1);
                const double *st = states + (t + 1) * PN, *sp = states + t * PN;
                double ddt = 0.0;
                for (int64_t q = 0; q < P; q++) {
                    const double xv = pssm_ref_get(&p->x, b, t, h, q), Dq = dskip(p, h, q);
                    const double g_out = pssm_ref_get(dout, b, t, h, q);
                    double d = g_out;
                    if (p->z.data) {
                        const double zt = pssm_ref_get(&p->z, b, t, h, q);
                        if (gr->dz.data)
                            pssm_ref_put(&gr->dz, b, t, h, q,
                                         g_out * (y[t * P + q] + Dq * xv) * pssm_ref_dsilu(zt));
                        d *= pssm_ref_silu(zt);
                    }
                    dy[t * P + q] = d;
                    if (gr->dD)
                        gr->dD[p->D_per_head ? h : h * P + q] += d * xv;
                    double dx = Dq * d;
                    for (int64_t n = 0; n < N; n++) {
                        const int64_t bc = (row * G + g) * N + n;
                        const double Bv = pssm_ref_get(&p->Bm, b, t, g, n);
                        const double Cv = pssm_ref_get(&p->Cm, b, t, g, n);
                        const double sprev = r ? 0.0 : sp[q * N + n];
                        double *hv = &hs[q * N + n];
                        *hv += d * Cv; /* h_t */
                        gr->dC[bc] += d * st[q * N + n];
                        gr->dB[bc] += *hv * dt * xv;
                        dx += *hv * dt * Bv;
                        ddt += *hv * (Ah * a * sprev + Bv * xv);
                        gr->dA[h] += *hv * dt * a * sprev;
                        *hv = r ? 0.0 : *hv * a; /* what s_{t-1} receives through s_t */
                    }
                    pssm_ref_put(&gr->dx, b, t, h, q, dx);
                }
                const double draw = ddt * dgrad;
                pssm_ref_put(&gr->ddt, b, t, h, 0, draw);
                if (gr->ddt_bias)
                    gr->ddt_bias[h] += draw;
            }
            if (gr->dinitial_states.data)
                put_state(p, &gr->dinitial_states, b, h, hs);
        }
}
