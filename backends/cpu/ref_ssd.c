/*
 * ref_ssd.c - the Mamba-2 SSD by its recurrence, forward and backward, in double (see ref.h).
 * No chunks: the chunked kernels of the GPU backends are checked against this definition.
 *
 * Per row b and head h (group g), state s[p,n]; token t restarts a sequence (r_t) when t > 0 and
 * its seq_idx differs from token t-1's, or t is one of cu_seqlens' inner offsets:
 *   dt_t = clamp(sp(dt[b,t,h] + dt_bias[h]));   a_t = exp(dt_t * A[h])
 *   s_t = a_t * (r_t ? 0 : s_{t-1}) + dt_t * B_t * x_t[p]      (s_{-1} = initial_states or 0)
 *   y_t[p] = sum_n C_t * s_t + D * x_t[p];   out = z ? y * silu(z) : y
 * Backward, h_t[p,n] = dLoss/ds_t: h_{L-1} = dfinal + dy_{L-1} C_{L-1},
 * h_t = dy_t C_t + (r_{t+1} ? 0 : a_{t+1} h_{t+1}), and with s'_t = (r_t ? 0 : s_{t-1}):
 *   dC_t += sum_p dy_t s_t     dB_t += sum_p h_t dt_t x_t     dx_t = sum_n h_t dt_t B_t + D dy_t
 *   ddt_t = sum_{p,n} h_t (A a_t s'_t + B_t x_t)              dA += sum h_t dt_t a_t s'_t
 * then through the clamp (0 outside [lo, hi]) and the softplus; dinitial = a_0 h_0.
 */
#include "ref.h"

#include <math.h>
#include <stddef.h>

static int64_t grp(const pssm_ref_ssd *p, int64_t h) { return h / (p->H / p->G); }

/* Does token t of row b start a new sequence (t > 0)? */
static int restarts(const pssm_ref_ssd *p, int64_t b, int64_t t)
{
    if (t == 0)
        return 0;
    if (p->seq_idx && p->seq_idx[b * p->L + t] != p->seq_idx[b * p->L + t - 1])
        return 1;
    if (p->cu_seqlens)
        for (int64_t k = 1; k < p->nseq; k++)
            if (p->cu_seqlens[k] == t)
                return 1;
    return 0;
}

/* dt_t after bias, softplus and clamp; *grad: d dt_t / d dt[b,t,h]. */
static double dt_of(const pssm_ref_ssd *p, int64_t b, int64_t t, int64_t h, double *grad)
{
    double v = p->dt[(b * p->L + t) * p->H + h] + (p->dt_bias ? p->dt_bias[h] : 0.0);
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
    if (!p->Dv)
        return 0.0;
    return p->D_per_head ? p->Dv[h] : p->Dv[h * p->P + q];
}

int64_t pssm_ref_ssd_work(const pssm_ref_ssd *p)
{
    if (p->L > (INT64_MAX / (p->P * p->N)) - 2)
        return -1;
    return (p->L + 2) * p->P * p->N + 2 * p->L * p->P;
}

/* The states of row (b,h): s_t at states + (t+1)*P*N, s_{-1} at states (all of them when all,
 * else only the latest at states); y before D and z into y (L*P); varlen states captured. */
static void run_row(const pssm_ref_ssd *p, int64_t b, int64_t h, double *states, int all,
                    double *y, double *varlen)
{
    const int64_t P = p->P, N = p->N, PN = P * N, g = grp(p, h);
    double *s = states;
    for (int64_t i = 0; i < PN; i++)
        s[i] = p->initial_states ? p->initial_states[(b * p->H + h) * PN + i] : 0.0;
    if (varlen && p->cu_seqlens[1] == 0) /* the first sequence is empty: its start state */
        for (int64_t i = 0; i < PN; i++)
            varlen[h * PN + i] = s[i];
    for (int64_t t = 0; t < p->L; t++) {
        const double *prev = s;
        double *cur = all ? s + PN : s;
        const int r = restarts(p, b, t);
        const double dt = dt_of(p, b, t, h, NULL), a = exp(dt * p->A[h]);
        const int64_t row = b * p->L + t;
        for (int64_t q = 0; q < P; q++) {
            const double xv = p->x[(row * p->H + h) * P + q];
            double acc = 0.0;
            for (int64_t n = 0; n < N; n++) {
                const double sp = r ? 0.0 : prev[q * N + n];
                const double v = a * sp + dt * p->Bm[(row * p->G + g) * N + n] * xv;
                cur[q * N + n] = v;
                acc += p->Cm[(row * p->G + g) * N + n] * v;
            }
            y[t * P + q] = acc;
        }
        if (all)
            s = cur;
        if (varlen) /* the end of every non-empty sequence that ends at t */
            for (int64_t k = 0; k < p->nseq; k++)
                if (p->cu_seqlens[k + 1] > p->cu_seqlens[k] && p->cu_seqlens[k + 1] - 1 == t)
                    for (int64_t i = 0; i < PN; i++)
                        varlen[(k * p->H + h) * PN + i] = cur[i];
    }
}

void pssm_ref_ssd_fwd(const pssm_ref_ssd *p, double *out, double *final_states,
                      double *varlen_states, double *work)
{
    const int64_t P = p->P, N = p->N, PN = P * N;
    double *s = work, *y = work + PN;
    if (varlen_states) /* empty sequences past the first start at 0 */
        for (int64_t i = 0; i < p->nseq * p->H * PN; i++)
            varlen_states[i] = 0.0;
    for (int64_t b = 0; b < p->B; b++)
        for (int64_t h = 0; h < p->H; h++) {
            run_row(p, b, h, s, 0, y, varlen_states);
            for (int64_t t = 0; t < p->L; t++)
                for (int64_t q = 0; q < P; q++) {
                    const int64_t i = ((b * p->L + t) * p->H + h) * P + q;
                    double v = y[t * P + q] + dskip(p, h, q) * p->x[i];
                    if (p->z)
                        v *= pssm_ref_silu(p->z[i]);
                    out[i] = v;
                }
            if (final_states)
                for (int64_t i = 0; i < PN; i++)
                    final_states[(b * p->H + h) * PN + i] = s[i];
        }
}

void pssm_ref_ssd_bwd(const pssm_ref_ssd *p, const double *dout, const double *dfinal,
                      const pssm_ref_ssd_grads *gr, double *work)
{
    const int64_t P = p->P, N = p->N, PN = P * N, H = p->H, G = p->G, L = p->L;
    double *states = work, *hs = work + (L + 1) * PN, *y = hs + PN, *dy = y + L * P;
    pssm_ref_zero(gr->dA, H);
    pssm_ref_zero(gr->dB, p->B * L * G * N);
    pssm_ref_zero(gr->dC, p->B * L * G * N);
    pssm_ref_zero(gr->dD, p->D_per_head ? H : H * P);
    pssm_ref_zero(gr->ddt_bias, H);
    pssm_ref_zero(gr->ddt, p->B * L * H);
    for (int64_t b = 0; b < p->B; b++)
        for (int64_t h = 0; h < H; h++) {
            const int64_t g = grp(p, h);
            run_row(p, b, h, states, 1, y, NULL);
            for (int64_t i = 0; i < PN; i++)
                hs[i] = dfinal ? dfinal[(b * H + h) * PN + i] : 0.0;
            for (int64_t t = L - 1; t >= 0; t--) {
                const int64_t row = b * L + t;
                double dgrad;
                const double dt = dt_of(p, b, t, h, &dgrad), a = exp(dt * p->A[h]);
                const int r = restarts(p, b, t);
                const double *st = states + (t + 1) * PN, *sp = states + t * PN;
                double ddt = 0.0;
                for (int64_t q = 0; q < P; q++) {
                    const int64_t i = (row * H + h) * P + q;
                    const double xv = p->x[i], Dq = dskip(p, h, q);
                    double d = dout[i];
                    if (p->z) {
                        const double zt = p->z[i];
                        if (gr->dz)
                            gr->dz[i] = dout[i] * (y[t * P + q] + Dq * xv) * pssm_ref_dsilu(zt);
                        d *= pssm_ref_silu(zt);
                    }
                    dy[t * P + q] = d;
                    if (gr->dD)
                        gr->dD[p->D_per_head ? h : h * P + q] += d * xv;
                    double dx = Dq * d;
                    for (int64_t n = 0; n < N; n++) {
                        const int64_t bc = (row * G + g) * N + n;
                        const double Bv = p->Bm[bc], Cv = p->Cm[bc];
                        const double sprev = r ? 0.0 : sp[q * N + n];
                        double *hv = &hs[q * N + n];
                        *hv += d * Cv; /* h_t */
                        gr->dC[bc] += d * st[q * N + n];
                        gr->dB[bc] += *hv * dt * xv;
                        dx += *hv * dt * Bv;
                        ddt += *hv * (p->A[h] * a * sprev + Bv * xv);
                        gr->dA[h] += *hv * dt * a * sprev;
                        *hv = r ? 0.0 : *hv * a; /* what s_{t-1} receives through s_t */
                    }
                    gr->dx[i] = dx;
                }
                const double draw = ddt * dgrad;
                gr->ddt[row * H + h] = draw;
                if (gr->ddt_bias)
                    gr->ddt_bias[h] += draw;
            }
            if (gr->dinitial_states)
                for (int64_t i = 0; i < PN; i++)
                    gr->dinitial_states[(b * H + h) * PN + i] = hs[i];
        }
}
