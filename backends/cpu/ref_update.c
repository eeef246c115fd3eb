/*
 * ref_update.c - the decode ops in double: causal_conv1d_update and selective_state_update
 * (see ref.h).
 *
 * conv1d_update: token i of T reads the window [prefix | x[0..i]] where prefix is the W-1 state
 * entries the conv reads (last W-1 columns, or the ring entries ending at cache_seqlens mod S).
 * Every output of a sequence is computed from the state as it was before the call; then the
 * state is written.  For a ring this is the same as interleaving reads and writes token by
 * token: token i reads state slots (c+j) mod S with j in [i-(W-1), -1], and a token k < i went
 * to one of them only if k - j were a non-zero multiple of S, but 1 <= k - j <= W-2 < S.
 */
#include "ref.h"

#include <math.h>

/* Euclidean a mod m (m >= 1): always in [0, m). */
static int64_t emod(int64_t a, int64_t m)
{
    int64_t r = a % m;
    return r < 0 ? r + m : r;
}

/* The state row of sequence b, or -1 for "outside the pool". */
static int64_t state_row(const pssm_ref_in *indices, int64_t b, int64_t Bp)
{
    int64_t r = indices->data ? pssm_ref_index(indices, b, 0, 0, 0) : b;
    return r >= 0 && r < Bp ? r : -1;
}

/* Input j of the window of row (b,d): j >= 0 is x[j]; j in [-(W-1), -1] is the state prefix. */
static double window_at(const pssm_ref_conv1d_update *p, const double *srow, int64_t b,
                        int64_t d, int64_t j)
{
    if (j >= 0)
        return pssm_ref_get(&p->x, b, d, j, 0);
    if (p->cache_seqlens.data)
        return srow[emod(pssm_ref_index(&p->cache_seqlens, b, 0, 0, 0) + j, p->S)];
    return srow[p->S + j];
}

void pssm_ref_conv1d_update_run(const pssm_ref_conv1d_update *p, double *conv_state,
                                const pssm_ref_out *out)
{
    const int64_t W = p->W, S = p->S, T = p->T;
    for (int64_t b = 0; b < p->B; b++) {
        int64_t r = state_row(&p->state_indices, b, p->Bp);
        for (int64_t d = 0; d < p->D; d++) {
            if (r < 0) {
                for (int64_t i = 0; i < T; i++)
                    pssm_ref_put(out, b, d, i, 0, 0.0);
                continue;
            }
            double *srow = conv_state + (r * p->D + d) * S;
            for (int64_t i = 0; i < T; i++) {
                double v = p->bias.data ? pssm_ref_get(&p->bias, d, 0, 0, 0) : 0.0;
                for (int64_t w = 0; w < W; w++)
                    v += pssm_ref_get(&p->weight, d, w, 0, 0) *
                         window_at(p, srow, b, d, i - (W - 1) + w);
                pssm_ref_put(out, b, d, i, 0, p->silu ? pssm_ref_silu(v) : v);
            }
            if (p->cache_seqlens.data) {
                const int64_t c = pssm_ref_index(&p->cache_seqlens, b, 0, 0, 0);
                for (int64_t i = 0; i < T; i++) /* in order: a later token wins on wrap */
                    srow[emod(c + i, S)] = pssm_ref_get(&p->x, b, d, i, 0);
            } else {
                /* last S columns of [state | x]; column k reads k+T >= k, so ascending is safe */
                for (int64_t k = 0; k < S; k++)
                    srow[k] = k + T < S ? srow[k + T] : pssm_ref_get(&p->x, b, d, k + T - S, 0);
            }
        }
    }
}

void pssm_ref_state_update_run(const pssm_ref_state_update *p, double *state,
                               const pssm_ref_out *out)
{
    const int64_t H = p->H, P = p->P, N = p->N, hpg = p->H / p->G;
    for (int64_t b = 0; b < p->B; b++) {
        int64_t r = state_row(&p->state_indices, b, p->Bp);
        for (int64_t h = 0; h < H; h++)
            for (int64_t i = 0; i < P; i++) {
                const int64_t hp = h * P + i, g = h / hpg;
                if (r < 0) {
                    pssm_ref_put(out, b, h, i, 0, 0.0);
                    continue;
                }
                double dt = pssm_ref_get(&p->dt, b, h, i, 0) +
                            (p->dt_bias.data ? pssm_ref_get(&p->dt_bias, h, i, 0, 0) : 0.0);
                if (p->softplus)
                    dt = pssm_ref_softplus(dt);
                const double xv = pssm_ref_get(&p->x, b, h, i, 0);
                double *s = state + (r * H * P + hp) * N;
                double y = 0.0;
                for (int64_t n = 0; n < N; n++) {
                    s[n] = exp(pssm_ref_get(&p->A, h, i, n, 0) * dt) * s[n] +
                           pssm_ref_get(&p->Bm, b, g, n, 0) * dt * xv;
                    y += s[n] * pssm_ref_get(&p->Cm, b, g, n, 0);
                }
                if (p->Dv.data)
                    y += pssm_ref_get(&p->Dv, h, i, 0, 0) * xv;
                if (p->z.data)
                    y *= pssm_ref_silu(pssm_ref_get(&p->z, b, h, i, 0));
                pssm_ref_put(out, b, h, i, 0, y);
            }
    }
}
