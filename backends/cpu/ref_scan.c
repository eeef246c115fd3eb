/*
 * ref_scan.c - the Mamba-1 selective scan, forward and backward, in double (see ref.h).
 *
 * Forward, per row (b,d) and state index n:
 *   v_t = delta_t + delta_bias;  dt_t = softplus ? sp(v_t) : v_t;  a_t = exp(dt_t * A[n])
 *   x_t = a_t * x_{t-1} + dt_t * B_t * u_t            (x_{-1} = initial_state or 0)
 *   y_t = sum_n C_t * x_t + D * u_t;   out_t = z ? y_t * silu(z_t) : y_t
 *
 * Backward (reverse mode), with g_t = dout_t and h_t[n] = dLoss/dx_t[n], the total gradient of
 * the state, which reaches x_t through y_t, through x_{t+1} and (t = L-1) through final_state:
 *   dy_t = z ? g_t * silu(z_t) : g_t                 dz_t = g_t * y_t * silu'(z_t)
 *   h_{L-1} = dfinal + dy_{L-1} * C_{L-1};           h_t = dy_t * C_t + a_{t+1} * h_{t+1}
 * and from x_t = a_t * x_{t-1} + dt_t * B_t * u_t, with da_t/d(dt_t) = A * a_t and
 * da_t/dA = dt_t * a_t:
 *   dC_t   += dy_t * x_t                             dB_t += h_t * dt_t * u_t
 *   du_t    = dy_t * D + sum_n h_t * dt_t * B_t      dD   += dy_t * u_t
 *   ddt_t   = sum_n h_t * (A * a_t * x_{t-1} + B_t * u_t)
 *   dA     += h_t * dt_t * a_t * x_{t-1}             dinitial = a_0 * h_0
 *   ddelta_t = ddt_t * (softplus ? sp'(v_t) : 1)     ddelta_bias += ddelta_t
 * Constant B/C gradients sum over b and t; variable ones sum over the channels of the group.
 * The loop keeps one vector h: at step t it adds dy_t * C_t (giving h_t), uses it, then
 * multiplies by a_t, which is what x_{t-1} receives through x_t; after t = 0 that is dinitial.
 * The forward states x_{-1..L-1} and y of the row are stored in `work` for the reverse sweep.
 * dA, dB, dC, dD and ddelta_bias sum over rows; the caller gives them as double arrays (ref.h).
 */
#include "ref.h"
#include "../../src/size_math.h"

#include <math.h>
#include <stddef.h>

/* Index of element (b, d, n, t) of the gradient of a constant (D,N) or variable (B,G,N,L) B/C,
 * in its contiguous double array. */
static int64_t bc_index(const pssm_ref_scan *p, int64_t G, int64_t b, int64_t d, int64_t n,
                        int64_t t)
{
    if (G == 0)
        return d * p->N + n;
    int64_t g = d / (p->D / G);
    return ((b * G + g) * p->N + n) * p->L + t;
}

/* Element (b, d, n, t) of a constant (D,N) or variable (B,G,N,L) B/C. */
static double bc_get(const pssm_ref_scan *p, const pssm_ref_in *v, int64_t G, int64_t b,
                     int64_t d, int64_t n, int64_t t)
{
    if (G == 0)
        return pssm_ref_get(v, d, n, 0, 0);
    return pssm_ref_get(v, b, d / (p->D / G), n, t);
}

static int64_t bc_numel(const pssm_ref_scan *p, int64_t G)
{
    return G == 0 ? p->D * p->N : p->B * G * p->N * p->L;
}

static double dt_pre(const pssm_ref_scan *p, int64_t b, int64_t d, int64_t t)
{
    return pssm_ref_get(&p->delta, b, d, t, 0) +
           (p->delta_bias.data ? pssm_ref_get(&p->delta_bias, d, 0, 0, 0) : 0.0);
}

static double dt_of(const pssm_ref_scan *p, double v) { return p->softplus ? pssm_ref_softplus(v) : v; }

/* The forward reads and writes a row TBLK tokens at a time (its scratch stays small whatever
 * L: the oracle's memory follows what a call addresses at once). */
#define TBLK 512

/* The state, A, B_t and C_t (N each) and a block's delta, u, z and out (TBLK each). */
int64_t pssm_ref_scan_fwd_work(const pssm_ref_scan *p)
{
    return pssm_size_add(pssm_size_mul(4, p->N), 4 * TBLK);
}

/* (L+1) states, h and y of one row; -1 if that count does not fit int64. */
int64_t pssm_ref_scan_bwd_work(const pssm_ref_scan *p)
{
    return pssm_size_add(pssm_size_mul(pssm_size_add(p->L, 2), p->N), p->L);
}

/* Runs the recurrence of row (b,d): states to xs (x_{t} at xs[(t+1)*N], x_{-1} at xs[0], only
 * the latest when keep_all is 0); y_t (before z) to y[t] when y is given, else out(b,d,t) with
 * z applied; with ck, the states after steps T-1, 2T-1, ... before the last step (T =
 * interval) to ck (B,D,K,N). */
static void scan_row(const pssm_ref_scan *p, int64_t b, int64_t d, double *xs, int keep_all,
                     double *y, const pssm_ref_out *out, const pssm_ref_out *ck,
                     int64_t interval)
{
    const int64_t N = p->N, L = p->L;
    for (int64_t n = 0; n < N; n++)
        xs[n] = p->initial_state.data ? pssm_ref_get(&p->initial_state, b, d, n, 0) : 0.0;
    for (int64_t t = 0; t < L; t++) {
        double dt = dt_of(p, dt_pre(p, b, d, t)), u = pssm_ref_get(&p->u, b, d, t, 0);
        const double *prev = xs + (keep_all ? t * N : 0);
        double *cur = xs + (keep_all ? (t + 1) * N : 0);
        double acc = 0.0;
        for (int64_t n = 0; n < N; n++) {
            double a = exp(dt * pssm_ref_get(&p->A, d, n, 0, 0));
            cur[n] = a * prev[n] + dt * bc_get(p, &p->Bm, p->GB, b, d, n, t) * u;
            acc += bc_get(p, &p->Cm, p->GC, b, d, n, t) * cur[n];
        }
        const double yt = acc + (p->Dv.data ? pssm_ref_get(&p->Dv, d, 0, 0, 0) * u : 0.0);
        if (y)
            y[t] = yt;
        else
            pssm_ref_put(out, b, d, t, 0,
                         p->z.data ? yt * pssm_ref_silu(pssm_ref_get(&p->z, b, d, t, 0)) : yt);
        if (ck && ck->data && (t + 1) % interval == 0 && t + 1 < L)
            for (int64_t n = 0; n < N; n++)
                pssm_ref_put(ck, b, d, (t + 1) / interval - 1, n, cur[n]);
    }
}

/* One row of N values of a constant (D,N) or variable (B,G,N,L) B/C at token t. */
static void bc_row(const pssm_ref_scan *p, const pssm_ref_in *v, int64_t G, int64_t b, int64_t d,
                   int64_t t, double *dst)
{
    if (G == 0)
        pssm_ref_gather(v, d, 0, 0, 0, 1, p->N, dst);
    else
        pssm_ref_gather(v, b, d / (p->D / G), 0, t, 2, p->N, dst);
}

/* scan_row's recurrence for the forward, with the row's operands read row by row (the same
 * operations in the same order, so the same bits); writes out, final_state and checkpoints. */
void pssm_ref_scan_fwd_row(const pssm_ref_scan *p, int64_t b, int64_t d, const pssm_ref_out *out,
                           const pssm_ref_out *final_state, const pssm_ref_out *ck,
                           int64_t interval, double *work)
{
    const int64_t N = p->N, L = p->L;
    double *xs = work, *Ar = xs + N, *Bt = Ar + N, *Ct = Bt + N;
    double *dl = Ct + N, *ur = dl + TBLK, *zr = ur + TBLK, *o = zr + TBLK;
    for (int64_t n = 0; n < N; n++)
        xs[n] = p->initial_state.data ? pssm_ref_get(&p->initial_state, b, d, n, 0) : 0.0;
    pssm_ref_gather(&p->A, d, 0, 0, 0, 1, N, Ar);
    const double bias = p->delta_bias.data ? pssm_ref_get(&p->delta_bias, d, 0, 0, 0) : 0.0;
    const double Dd = p->Dv.data ? pssm_ref_get(&p->Dv, d, 0, 0, 0) : 0.0;
    if (p->GB == 0)
        bc_row(p, &p->Bm, 0, b, d, 0, Bt);
    if (p->GC == 0)
        bc_row(p, &p->Cm, 0, b, d, 0, Ct);
    for (int64_t t = 0; t < L; t++) {
        const int64_t k = t % TBLK, t0 = t - k, len = L - t0 < TBLK ? L - t0 : TBLK;
        if (k == 0) { /* the next block of the row */
            pssm_ref_gather(&p->delta, b, d, t0, 0, 2, len, dl);
            pssm_ref_gather(&p->u, b, d, t0, 0, 2, len, ur);
            if (p->z.data)
                pssm_ref_gather(&p->z, b, d, t0, 0, 2, len, zr);
        }
        const double dt = dt_of(p, dl[k] + bias), u = ur[k];
        if (p->GB != 0)
            bc_row(p, &p->Bm, p->GB, b, d, t, Bt);
        if (p->GC != 0)
            bc_row(p, &p->Cm, p->GC, b, d, t, Ct);
        double acc = 0.0;
        for (int64_t n = 0; n < N; n++) {
            const double a = exp(dt * Ar[n]);
            xs[n] = a * xs[n] + dt * Bt[n] * u;
            acc += Ct[n] * xs[n];
        }
        const double yt = acc + (p->Dv.data ? Dd * u : 0.0);
        o[k] = p->z.data ? yt * pssm_ref_silu(zr[k]) : yt;
        if (k == len - 1)
            pssm_ref_scatter(out, b, d, t0, 0, 2, len, o);
        if (ck && ck->data && (t + 1) % interval == 0 && t + 1 < L)
            for (int64_t n = 0; n < N; n++)
                pssm_ref_put(ck, b, d, (t + 1) / interval - 1, n, xs[n]);
    }
    if (final_state->data)
        for (int64_t n = 0; n < N; n++)
            pssm_ref_put(final_state, b, d, n, 0, xs[n]);
}

void pssm_ref_scan_fwd(const pssm_ref_scan *p, const pssm_ref_out *out,
                       const pssm_ref_out *final_state, const pssm_ref_out *checkpoints,
                       int64_t interval, double *work)
{
    for (int64_t b = 0; b < p->B; b++)
        for (int64_t d = 0; d < p->D; d++)
            pssm_ref_scan_fwd_row(p, b, d, out, final_state, checkpoints, interval, work);
}

void pssm_ref_scan_bwd(const pssm_ref_scan *p, const pssm_ref_in *dout,
                       const pssm_ref_in *dfinal_state, const pssm_ref_scan_grads *g,
                       double *work)
{
    const int64_t N = p->N, L = p->L;
    double *xs = work, *h = work + (L + 1) * N, *y = h + N;
    pssm_ref_zero(g->dA, p->D * N);
    pssm_ref_zero(g->dB, bc_numel(p, p->GB));
    pssm_ref_zero(g->dC, bc_numel(p, p->GC));
    pssm_ref_zero(g->dD, p->D);
    pssm_ref_zero(g->ddelta_bias, p->D);
    for (int64_t b = 0; b < p->B; b++)
        for (int64_t d = 0; d < p->D; d++) {
            scan_row(p, b, d, xs, 1, y, NULL, NULL, 0);
            for (int64_t n = 0; n < N; n++)
                h[n] = dfinal_state->data ? pssm_ref_get(dfinal_state, b, d, n, 0) : 0.0;
            for (int64_t t = L - 1; t >= 0; t--) {
                double v = dt_pre(p, b, d, t), dt = dt_of(p, v);
                double u = pssm_ref_get(&p->u, b, d, t, 0);
                const double g_out = pssm_ref_get(dout, b, d, t, 0);
                double dy = g_out;
                if (p->z.data) {
                    double zt = pssm_ref_get(&p->z, b, d, t, 0);
                    if (g->dz.data)
                        pssm_ref_put(&g->dz, b, d, t, 0, g_out * y[t] * pssm_ref_dsilu(zt));
                    dy *= pssm_ref_silu(zt);
                }
                double du = p->Dv.data ? dy * pssm_ref_get(&p->Dv, d, 0, 0, 0) : 0.0, ddt = 0.0;
                if (g->dD)
                    g->dD[d] += dy * u;
                const double *xprev = xs + t * N, *xcur = xs + (t + 1) * N;
                for (int64_t n = 0; n < N; n++) {
                    int64_t ib = bc_index(p, p->GB, b, d, n, t);
                    int64_t ic = bc_index(p, p->GC, b, d, n, t);
                    double A = pssm_ref_get(&p->A, d, n, 0, 0), a = exp(dt * A);
                    double Bv = bc_get(p, &p->Bm, p->GB, b, d, n, t);
                    g->dC[ic] += dy * xcur[n];
                    h[n] += dy * bc_get(p, &p->Cm, p->GC, b, d, n, t); /* h is now h_t */
                    g->dB[ib] += h[n] * dt * u;
                    du += h[n] * dt * Bv;
                    ddt += h[n] * (A * a * xprev[n] + Bv * u);
                    g->dA[d * N + n] += h[n] * dt * a * xprev[n];
                    h[n] *= a; /* the part of dLoss/dx_{t-1} that flows through x_t */
                }
                double dd = p->softplus ? ddt * pssm_ref_dsoftplus(v) : ddt;
                pssm_ref_put(&g->du, b, d, t, 0, du);
                pssm_ref_put(&g->ddelta, b, d, t, 0, dd);
                if (g->ddelta_bias)
                    g->ddelta_bias[d] += dd;
            }
            if (g->dinitial_state.data)
                for (int64_t n = 0; n < N; n++)
                    pssm_ref_put(&g->dinitial_state, b, d, n, 0, h[n]);
        }
}
