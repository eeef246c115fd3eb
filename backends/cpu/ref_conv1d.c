/*
 * ref_conv1d.c - causal depthwise conv1d, forward and backward, in double (see ref.h).
 *
 * Positions s of one row run over -(W-1) .. L-1 of xp = [initial_states | x]: s < 0 are the
 * initial states (or zeros), s >= 0 is x.  Output t reads taps s = t-(W-1)+w, w < W.
 *
 * Backward.  pre[t] = bias + sum_w weight[w] * keep(s,t) * xp[s],  out[t] = act(pre[t]),
 * final[j] = xp[L-(W-1)+j].  With dpre[t] = dout[t] * act'(pre[t]):
 *   dxp[s]     = sum_{w, t = s+(W-1)-w in [0,L)} keep(s,t) * weight[w] * dpre[t]
 *                + dfinal[s-(L-(W-1))]  when s >= L-(W-1)
 *   dweight[w] = sum_{b,t} keep(s,t) * xp[s] * dpre[t],   dbias = sum_{b,t} dpre[t]
 * dx and dinitial_states are dxp at s >= 0 and s < 0.  keep() does not depend on values, so the
 * gradient at absent initial states is the same formula with xp = 0 there.
 * dweight and dbias sum over b; the caller gives them as double arrays (ref.h).
 *
 * Rows: the forward works per (b,d) row, the backward per channel d (its rows in order of b, so
 * that dweight[d] and dbias[d] sum in the order b, t, w); both write only their own elements,
 * so the cpu backend runs them on several threads.  A row is read once into double arrays
 * (xp, the weights) and, without seq_idx, the loops over t are the inner ones (each element
 * still sums its taps in increasing w), which the compiler vectorises.
 */
#include "ref.h"

#include <stddef.h>

/* Does the tap at position s count for output t?  With seq_idx only if its token is in the same
 * sequence as token t; positions before t = 0 belong to the sequence of token 0. */
static int keep(const pssm_ref_conv1d *p, int64_t b, int64_t s, int64_t t)
{
    if (!p->seq_idx.data)
        return 1;
    return pssm_ref_index(&p->seq_idx, b, s < 0 ? 0 : s, 0, 0) ==
           pssm_ref_index(&p->seq_idx, b, t, 0, 0);
}

int64_t pssm_ref_conv1d_work(const pssm_ref_conv1d *p) { return 3 * (p->W - 1 + p->L) + p->W; }

/* The row's xp = [initial_states (or 0) | x] (W-1+L) and weights (W), as doubles. */
static void load_row(const pssm_ref_conv1d *p, int64_t b, int64_t d, double *xp, double *wt)
{
    const int64_t W1 = p->W - 1;
    for (int64_t j = 0; j < W1; j++)
        xp[j] = p->initial_states.data ? pssm_ref_get(&p->initial_states, b, d, j, 0) : 0.0;
    pssm_ref_gather(&p->x, b, d, 0, 0, 2, p->L, xp + W1);
    pssm_ref_gather(&p->weight, d, 0, 0, 0, 1, p->W, wt);
}

/* pre[t] for every t of the row (xp, wt loaded). */
static void pre_acts(const pssm_ref_conv1d *p, int64_t b, int64_t d, const double *restrict xp,
                     const double *restrict wt, double *restrict pre)
{
    const int64_t L = p->L, W = p->W;
    const double bias = p->bias.data ? pssm_ref_get(&p->bias, d, 0, 0, 0) : 0.0;
    if (p->seq_idx.data) { /* taps of other sequences are skipped */
        for (int64_t t = 0; t < L; t++) {
            double v = bias;
            for (int64_t w = 0; w < W; w++)
                if (keep(p, b, t - (W - 1) + w, t))
                    v += wt[w] * xp[t + w];
            pre[t] = v;
        }
        return;
    }
    for (int64_t t = 0; t < L; t++)
        pre[t] = bias;
    for (int64_t w = 0; w < W; w++) {
        const double wv = wt[w];
        const double *restrict xw = xp + w;
        for (int64_t t = 0; t < L; t++)
            pre[t] += wv * xw[t];
    }
}

void pssm_ref_conv1d_fwd_row(const pssm_ref_conv1d *p, int64_t b, int64_t d,
                             const pssm_ref_out *out, const pssm_ref_out *final_states,
                             double *work)
{
    const int64_t W1 = p->W - 1, L = p->L;
    double *xp = work, *pre = xp + W1 + L, *wt = pre + W1 + L;
    load_row(p, b, d, xp, wt);
    pre_acts(p, b, d, xp, wt, pre);
    if (p->silu)
        for (int64_t t = 0; t < L; t++)
            pre[t] = pssm_ref_silu(pre[t]);
    pssm_ref_scatter(out, b, d, 0, 0, 2, L, pre);
    if (final_states->data)
        for (int64_t j = 0; j < W1; j++)
            pssm_ref_put(final_states, b, d, j, 0, xp[L + j]);
}

void pssm_ref_conv1d_fwd(const pssm_ref_conv1d *p, const pssm_ref_out *out,
                         const pssm_ref_out *final_states, double *work)
{
    for (int64_t b = 0; b < p->B; b++)
        for (int64_t d = 0; d < p->D; d++)
            pssm_ref_conv1d_fwd_row(p, b, d, out, final_states, work);
}

void pssm_ref_conv1d_bwd_channel(const pssm_ref_conv1d *p, const pssm_ref_in *dout,
                                 const pssm_ref_in *dfinal_states, const pssm_ref_out *dx,
                                 double *dweight, double *dbias,
                                 const pssm_ref_out *dinitial_states, int64_t d, double *work)
{
    const int64_t W = p->W, W1 = p->W - 1, L = p->L;
    double *xp = work, *dpre = xp + W1 + L, *dxp = dpre + W1 + L, *wt = dxp + W1 + L;
    for (int64_t w = 0; w < W; w++)
        dweight[d * W + w] = 0.0;
    if (dbias)
        dbias[d] = 0.0;
    for (int64_t b = 0; b < p->B; b++) {
        load_row(p, b, d, xp, wt);
        pssm_ref_gather(dout, b, d, 0, 0, 2, L, dxp); /* dout, for a moment */
        if (p->silu) { /* the row's dpre, each from its own pre-activation */
            pre_acts(p, b, d, xp, wt, dpre);
            for (int64_t t = 0; t < L; t++)
                dpre[t] = dxp[t] * pssm_ref_dsilu(dpre[t]);
        } else
            for (int64_t t = 0; t < L; t++)
                dpre[t] = dxp[t];
        /* dxp[s] (s = j - W1) sums its taps in increasing w; only the taps t in [0, L) */
        for (int64_t j = 0; j < W1 + L; j++)
            dxp[j] = 0.0;
        if (p->seq_idx.data) {
            for (int64_t s = -W1; s < L; s++)
                for (int64_t w = 0; w < W; w++) {
                    const int64_t t = s + W1 - w;
                    if (t >= 0 && t < L && keep(p, b, s, t))
                        dxp[s + W1] += wt[w] * dpre[t];
                }
        } else {
            for (int64_t w = 0; w < W; w++) { /* t = s + W1 - w in [0, L): j = t + w */
                const double wv = wt[w];
                double *restrict dj = dxp + w;
                for (int64_t t = 0; t < L; t++)
                    dj[t] += wv * dpre[t];
            }
        }
        if (dfinal_states->data)
            for (int64_t s = L - W1; s < L; s++)
                dxp[s + W1] += pssm_ref_get(dfinal_states, b, d, s - (L - W1), 0);
        pssm_ref_scatter(dx, b, d, 0, 0, 2, L, dxp + W1);
        if (dinitial_states->data)
            pssm_ref_scatter(dinitial_states, b, d, 0, 0, 2, W1, dxp);
        for (int64_t t = 0; t < L; t++) {
            const double g = dpre[t];
            if (dbias)
                dbias[d] += g;
            for (int64_t w = 0; w < W; w++)
                if (keep(p, b, t - W1 + w, t))
                    dweight[d * W + w] += g * xp[t + w];
        }
    }
}

void pssm_ref_conv1d_bwd(const pssm_ref_conv1d *p, const pssm_ref_in *dout,
                         const pssm_ref_in *dfinal_states, const pssm_ref_out *dx,
                         double *dweight, double *dbias, const pssm_ref_out *dinitial_states,
                         double *work)
{
    for (int64_t d = 0; d < p->D; d++)
        pssm_ref_conv1d_bwd_channel(p, dout, dfinal_states, dx, dweight, dbias, dinitial_states,
                                    d, work);
}
