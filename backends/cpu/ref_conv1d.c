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
 */
#include "ref.h"

#include <stddef.h>

/* xp at position s of row (b,d). */
static double xp_at(const pssm_ref_conv1d *p, int64_t b, int64_t d, int64_t s)
{
    if (s >= 0)
        return pssm_ref_get(&p->x, b, d, s, 0);
    if (!p->initial_states.data)
        return 0.0;
    return pssm_ref_get(&p->initial_states, b, d, (p->W - 1) + s, 0);
}

/* Does the tap at position s count for output t?  With seq_idx only if its token is in the same
 * sequence as token t; positions before t = 0 belong to the sequence of token 0. */
static int keep(const pssm_ref_conv1d *p, int64_t b, int64_t s, int64_t t)
{
    if (!p->seq_idx.data)
        return 1;
    return pssm_ref_index(&p->seq_idx, b, s < 0 ? 0 : s, 0, 0) ==
           pssm_ref_index(&p->seq_idx, b, t, 0, 0);
}

static double pre_act(const pssm_ref_conv1d *p, int64_t b, int64_t d, int64_t t)
{
    double v = p->bias.data ? pssm_ref_get(&p->bias, d, 0, 0, 0) : 0.0;
    for (int64_t w = 0; w < p->W; w++) {
        int64_t s = t - (p->W - 1) + w;
        if (keep(p, b, s, t))
            v += pssm_ref_get(&p->weight, d, w, 0, 0) * xp_at(p, b, d, s);
    }
    return v;
}

static double dpre_at(const pssm_ref_conv1d *p, const pssm_ref_in *dout, int64_t b, int64_t d,
                      int64_t t)
{
    double g = pssm_ref_get(dout, b, d, t, 0);
    return p->silu ? g * pssm_ref_dsilu(pre_act(p, b, d, t)) : g;
}

void pssm_ref_conv1d_fwd(const pssm_ref_conv1d *p, const pssm_ref_out *out,
                         const pssm_ref_out *final_states)
{
    const int64_t W1 = p->W - 1;
    for (int64_t b = 0; b < p->B; b++)
        for (int64_t d = 0; d < p->D; d++) {
            for (int64_t t = 0; t < p->L; t++) {
                double v = pre_act(p, b, d, t);
                pssm_ref_put(out, b, d, t, 0, p->silu ? pssm_ref_silu(v) : v);
            }
            if (final_states->data)
                for (int64_t j = 0; j < W1; j++)
                    pssm_ref_put(final_states, b, d, j, 0, xp_at(p, b, d, p->L - W1 + j));
        }
}

void pssm_ref_conv1d_bwd(const pssm_ref_conv1d *p, const pssm_ref_in *dout,
                         const pssm_ref_in *dfinal_states, const pssm_ref_out *dx,
                         double *dweight, double *dbias, const pssm_ref_out *dinitial_states,
                         double *work)
{
    const int64_t W = p->W, W1 = p->W - 1, L = p->L;
    for (int64_t d = 0; d < p->D; d++) {
        for (int64_t w = 0; w < W; w++)
            dweight[d * W + w] = 0.0;
        if (dbias)
            dbias[d] = 0.0;
    }
    for (int64_t b = 0; b < p->B; b++)
        for (int64_t d = 0; d < p->D; d++) {
            double *const dpre = work; /* the row's dpre, each from its own O(W) pre-activation */
            for (int64_t t = 0; t < L; t++)
                dpre[t] = dpre_at(p, dout, b, d, t);
            for (int64_t s = -W1; s < L; s++) {
                double g = 0.0;
                for (int64_t w = 0; w < W; w++) {
                    int64_t t = s + W1 - w;
                    if (t >= 0 && t < L && keep(p, b, s, t))
                        g += pssm_ref_get(&p->weight, d, w, 0, 0) * dpre[t];
                }
                if (dfinal_states->data && s >= L - W1)
                    g += pssm_ref_get(dfinal_states, b, d, s - (L - W1), 0);
                if (s >= 0)
                    pssm_ref_put(dx, b, d, s, 0, g);
                else if (dinitial_states->data)
                    pssm_ref_put(dinitial_states, b, d, W1 + s, 0, g);
            }
            for (int64_t t = 0; t < L; t++) {
                double g = dpre[t];
                if (dbias)
                    dbias[d] += g;
                for (int64_t w = 0; w < W; w++) {
                    int64_t s = t - W1 + w;
                    if (keep(p, b, s, t))
                        dweight[d * W + w] += g * xp_at(p, b, d, s);
                }
            }
        }
}
