/*
 * ref_norm.c - the row norms (LayerNorm, RMSNorm; residual add, gate, groups), forward and
 * backward, in double (see ref.h and portssm.h's norm_fwd).
 *
 * Per row and group of n = H/G channels, with s = x (+ residual) and v = s * silu(z) when the
 * gate comes before the norm (else v = s):
 *   LayerNorm  mean = sum(v)/n,  rstd = 1/sqrt(sum((v-mean)^2)/n + eps),  vhat = (v-mean)*rstd
 *   RMSNorm                      rstd = 1/sqrt(sum(v^2)/n + eps),         vhat = v*rstd
 *   y = vhat*w + b;   out = y * silu(z) when the norm comes before the gate, else y.
 *
 * Backward, given the forward's mean and rstd (mean and rstd as functions of v):
 *   g = dout * silu(z) (norm before gate; dz = dout * y * silu'(z)), else g = dout
 *   dweight += g * vhat,  dbias += g,  wg = w * g
 *   dv = (wg - vhat * mean(vhat * wg) - mean(wg)) * rstd        (RMSNorm: without mean(wg))
 *   gate before norm: dz = dv * s * silu'(z), ds = dv * silu(z);  else ds = dv
 *   ds += dresidual_out;   dx = dresidual = ds;   out: the forward's, from the given mean, rstd.
 * The means are over the group.  dweight and dbias sum over rows (ref.h's double arrays).
 */
#include "ref.h"

#include <math.h>

/* The gate before the norm applies. */
static int gate_first(const pssm_ref_norm *p) { return p->z.data && !p->norm_before_gate; }

/* s at (r,i): x plus the residual, exactly (each is a double of its dtype's value). */
static double s_at(const pssm_ref_norm *p, int64_t r, int64_t i)
{
    double s = pssm_ref_get(&p->x, r, i, 0, 0);
    if (p->residual.data)
        s += pssm_ref_get(&p->residual, r, i, 0, 0);
    return s;
}

/* v at (r,i): what the norm normalises. */
static double v_at(const pssm_ref_norm *p, int64_t r, int64_t i)
{
    const double s = s_at(p, r, i);
    return gate_first(p) ? s * pssm_ref_silu(pssm_ref_get(&p->z, r, i, 0, 0)) : s;
}

static double bias_at(const pssm_ref_norm *p, int64_t i)
{
    return p->bias.data ? pssm_ref_get(&p->bias, i, 0, 0, 0) : 0.0;
}

void pssm_ref_norm_fwd(const pssm_ref_norm *p, const pssm_ref_out *out,
                       const pssm_ref_out *residual_out, const pssm_ref_out *mean,
                       const pssm_ref_out *rstd)
{
    const int64_t n = p->H / p->G;
    for (int64_t r = 0; r < p->R; r++) {
        if (residual_out->data)
            for (int64_t i = 0; i < p->H; i++)
                pssm_ref_put(residual_out, r, i, 0, 0, s_at(p, r, i));
        for (int64_t g = 0; g < p->G; g++) {
            const int64_t i0 = g * n;
            double mu = 0.0;
            if (!p->rms) {
                for (int64_t i = i0; i < i0 + n; i++)
                    mu += v_at(p, r, i);
                mu /= (double)n;
            }
            double ss = 0.0;
            for (int64_t i = i0; i < i0 + n; i++) {
                const double d = v_at(p, r, i) - mu;
                ss += d * d;
            }
            const double rs = 1.0 / sqrt(ss / (double)n + p->eps);
            for (int64_t i = i0; i < i0 + n; i++) {
                double y = (v_at(p, r, i) - mu) * rs * pssm_ref_get(&p->weight, i, 0, 0, 0) +
                           bias_at(p, i);
                if (p->z.data && p->norm_before_gate)
                    y *= pssm_ref_silu(pssm_ref_get(&p->z, r, i, 0, 0));
                pssm_ref_put(out, r, i, 0, 0, y);
            }
            if (mean->data && !p->rms)
                pssm_ref_put(mean, r, g, 0, 0, mu);
            if (rstd->data)
                pssm_ref_put(rstd, r, g, 0, 0, rs);
        }
    }
}

void pssm_ref_norm_bwd(const pssm_ref_norm *p, const pssm_ref_in *mean, const pssm_ref_in *rstd,
                       const pssm_ref_in *dout, const pssm_ref_in *dresidual_out,
                       const pssm_ref_out *dx, const pssm_ref_out *dresidual,
                       const pssm_ref_out *dz, const pssm_ref_out *out, double *dweight,
                       double *dbias)
{
    const int64_t n = p->H / p->G;
    const int gate_after = p->z.data && p->norm_before_gate;
    for (int64_t i = 0; i < p->H; i++) {
        if (dweight)
            dweight[i] = 0.0;
        if (dbias)
            dbias[i] = 0.0;
    }
    for (int64_t r = 0; r < p->R; r++)
        for (int64_t g = 0; g < p->G; g++) {
            const int64_t i0 = g * n;
            const double mu = p->rms ? 0.0 : pssm_ref_get(mean, r, g, 0, 0);
            const double rs = pssm_ref_get(rstd, r, g, 0, 0);
            /* the gradient reaching y (g) at channel i, and vhat there */
#define VHAT(i) ((v_at(p, r, (i)) - mu) * rs)
#define GRAD_Y(i)                                                                               \
    (gate_after ? pssm_ref_get(dout, r, (i), 0, 0) *                                            \
                      pssm_ref_silu(pssm_ref_get(&p->z, r, (i), 0, 0))                          \
                : pssm_ref_get(dout, r, (i), 0, 0))
            double c1 = 0.0, c2 = 0.0; /* sum(vhat * w g), sum(w g) */
            for (int64_t i = i0; i < i0 + n; i++) {
                const double gy = GRAD_Y(i), xh = VHAT(i);
                const double wg = pssm_ref_get(&p->weight, i, 0, 0, 0) * gy;
                c1 += xh * wg;
                c2 += wg;
                if (dweight)
                    dweight[i] += gy * xh;
                if (dbias)
                    dbias[i] += gy;
                const double y = xh * pssm_ref_get(&p->weight, i, 0, 0, 0) + bias_at(p, i);
                if (gate_after && dz->data) {
                    const double zi = pssm_ref_get(&p->z, r, i, 0, 0);
                    pssm_ref_put(dz, r, i, 0, 0,
                                 pssm_ref_get(dout, r, i, 0, 0) * y * pssm_ref_dsilu(zi));
                }
                if (out->data)
                    pssm_ref_put(out, r, i, 0, 0,
                                 gate_after ? y * pssm_ref_silu(pssm_ref_get(&p->z, r, i, 0, 0))
                                            : y);
            }
            c1 /= (double)n;
            c2 = p->rms ? 0.0 : c2 / (double)n;
            for (int64_t i = i0; i < i0 + n; i++) {
                const double wg = pssm_ref_get(&p->weight, i, 0, 0, 0) * GRAD_Y(i);
                const double dv = (wg - VHAT(i) * c1 - c2) * rs;
                double ds = dv;
                if (gate_first(p)) {
                    const double zi = pssm_ref_get(&p->z, r, i, 0, 0);
                    if (dz->data)
                        pssm_ref_put(dz, r, i, 0, 0, dv * s_at(p, r, i) * pssm_ref_dsilu(zi));
                    ds = dv * pssm_ref_silu(zi);
                }
                if (dresidual_out && dresidual_out->data)
                    ds += pssm_ref_get(dresidual_out, r, i, 0, 0);
                pssm_ref_put(dx, r, i, 0, 0, ds);
                if (dresidual->data)
                    pssm_ref_put(dresidual, r, i, 0, 0, ds);
            }
#undef VHAT
#undef GRAD_Y
        }
}
