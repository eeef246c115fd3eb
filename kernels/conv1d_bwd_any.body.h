/*
 * conv1d_bwd_any.body.h - causal_conv1d_bwd of one dtype (conv1d_dtype.body.h) for any width,
 * layout and option: the three kernels of the generic path (kernels/conv1d_params.h).
 *
 *   pre[t]  = bias + sum_k keep(t-hw+k, t) * weight[k] * xp[t-hw+k]      (hw = W-1)
 *   dpre[t] = dout[t] * act'(pre[t])
 *   dxp[s]  = sum_k keep(s, t) * weight[k] * dpre[t],  t = s+hw-k in [0, L)   (+ dfinal)
 *   dweight[k] = sum_{b,t} keep * xp[t-hw+k] * dpre[t],   dbias = sum_{b,t} dpre[t]
 * where xp is [initial states | x] and keep(s, t) says the tap at s is in token t's sequence.
 * dpre goes through the workspace once, so each later output costs O(W).
 */

/* dpre at token t of row (b,d), from memory (0 outside [0, L)): the generic dpre kernel, and the
 * edges of the vector kernels' grids. */
PSSM_DEVICE float PSSM_C1_FN(dpre_at)(const pssm_conv1d_bwd_params p, int64_t b, int64_t d,
                                      int64_t t, int64_t hw)
{
    if (t < 0 || t >= p.len)
        return 0.0f;
    float g = PSSM_C1_LD(((const PSSM_C1_T *)p.dout)[b * p.g_sb + d * p.g_sd + t * p.g_sl]);
    if (p.silu) {
        const PSSM_C1_T *xr = (const PSSM_C1_T *)p.x + b * p.x_sb + d * p.x_sd;
        const PSSM_C1_T *ir = p.init ? (const PSSM_C1_T *)p.init + b * p.init_sb + d * p.init_sd : 0;
        const int32_t *sr = p.seq_idx ? p.seq_idx + b * p.seq_sb : 0;
        const float bias = p.bias ? pssm_load_any(p.bias, d * p.bias_sd, p.weight_dtype) : 0.0f;
        const float pre = PSSM_C1_FN(pre_at)(xr, p.x_sl, ir, p.init_sw, sr, p.seq_sl, p.len,
                                             pssm_elem_any(p.weight, d * p.w_sd, p.weight_dtype),
                                             p.w_sw, p.weight_dtype, bias, t, hw);
        g *= pssm_dsilu_fast(pre);
    }
    return g;
}

/* dfinal_states' share of position s (s >= L - hw goes to final_states[s - (L - hw)]). */
PSSM_DEVICE float PSSM_C1_FN(dfinal_at)(const pssm_conv1d_bwd_params p, int64_t b, int64_t d,
                                        int64_t s, int64_t hw)
{
    const int64_t f = s - (p.len - hw);
    if (!p.dfinal || f < 0)
        return 0.0f;
    return PSSM_C1_LD(((const PSSM_C1_T *)p.dfinal)[b * p.df_sb + d * p.df_sd + f * p.df_sw]);
}

/* dxp at position s >= -hw of row (b,d), every dpre from memory (O(W^2); no seq_idx): the edges
 * of the vector kernels' grids. */
PSSM_DEVICE float PSSM_C1_FN(dx_at)(const pssm_conv1d_bwd_params p, int64_t b, int64_t d,
                                    int64_t s, int64_t hw)
{
    float g = PSSM_C1_FN(dfinal_at)(p, b, d, s, hw);
    PSSM_NOUNROLL
    for (int64_t k = 0; k <= hw; k++)
        g += pssm_load_any(p.weight, d * p.w_sd + k * p.w_sw, p.weight_dtype) *
             PSSM_C1_FN(dpre_at)(p, b, d, s + hw - k, hw);
    return g;
}

/* Stores dxp at position s: dx (s >= 0) or dinitial_states (s < 0, when wanted). */
PSSM_DEVICE void PSSM_C1_FN(put_dx)(const pssm_conv1d_bwd_params p, int64_t b, int64_t d, int64_t s,
                                    int64_t hw, float g)
{
    if (s >= 0)
        ((PSSM_C1_T *)p.dx)[b * p.dx_sb + d * p.dx_sd + s * p.dx_sl] = PSSM_C1_ST(g);
    else if (p.dinit)
        ((PSSM_C1_T *)p.dinit)[b * p.di_sb + d * p.di_sd + (hw + s) * p.di_sw] = PSSM_C1_ST(g);
}

/* (b, d, t) of work item `item`: along time first, or along channels first (chan_fastest). */
PSSM_DEVICE void PSSM_C1_FN(bwd_item)(const pssm_conv1d_bwd_params p, int64_t item, int64_t len,
                                      int64_t *b, int64_t *d, int64_t *t)
{
    if (p.chan_fastest) {
        const int64_t r = pssm_c1_div(item, p.dim);
        *d = item - r * p.dim;
        *b = pssm_c1_div(r, len);
        *t = r - *b * len;
    } else {
        const int64_t r = pssm_c1_div(item, len);
        *t = item - r * len;
        *b = pssm_c1_div(r, p.dim);
        *d = r - *b * p.dim;
    }
}

PSSM_C1_KERNEL_BOUNDED(PSSM_C1_CAT2(pssm_conv1d_bwd_dpre_any_, PSSM_C1_DT),
                       pssm_conv1d_bwd_params, p, PSSM_C1_BLOCK)
{
    const int64_t threads = PSSM_GRIDDIM_X * PSSM_BLOCKDIM_X;
    const int64_t hw = (int64_t)p.width - 1;
    for (int64_t item = PSSM_BLOCK_X * PSSM_BLOCKDIM_X + PSSM_THREAD_X; item < p.work;
         item += threads) {
        int64_t b, d, t;
        PSSM_C1_FN(bwd_item)(p, item, p.len, &b, &d, &t);
        p.dpre[(b * p.dim + d) * p.len + t] = PSSM_C1_FN(dpre_at)(p, b, d, t, hw);
    }
}

/* Items run over the L + hw positions s = -hw .. L-1 of each row (the first hw only when
 * dinitial_states is wanted). */
PSSM_C1_KERNEL_BOUNDED(PSSM_C1_CAT2(pssm_conv1d_bwd_dx_any_, PSSM_C1_DT), pssm_conv1d_bwd_params,
                       p, PSSM_C1_BLOCK)
{
    const int64_t threads = PSSM_GRIDDIM_X * PSSM_BLOCKDIM_X;
    const int64_t hw = (int64_t)p.width - 1, L = p.len;
    const int64_t first = p.dinit ? -hw : 0, span = L - first;
    for (int64_t item = PSSM_BLOCK_X * PSSM_BLOCKDIM_X + PSSM_THREAD_X; item < p.work;
         item += threads) {
        int64_t b, d, j;
        PSSM_C1_FN(bwd_item)(p, item, span, &b, &d, &j);
        const int64_t s = first + j;
        const int32_t *sr = p.seq_idx ? p.seq_idx + b * p.seq_sb : 0;
        const int32_t ss = sr ? pssm_c1_seq(sr, p.seq_sl, L, s) : 0;
        const float *dpre = p.dpre + (b * p.dim + d) * L;
        float g = 0.0f;
        PSSM_NOUNROLL
        for (int64_t k = 0; k <= hw; k++) {
            const int64_t t = s + hw - k;
            if (t < 0 || t >= L || (sr && sr[t * p.seq_sl] != ss))
                continue;
            g += pssm_load_any(p.weight, d * p.w_sd + k * p.w_sw, p.weight_dtype) * dpre[t];
        }
        g += PSSM_C1_FN(dfinal_at)(p, b, d, s, hw);
        PSSM_C1_FN(put_dx)(p, b, d, s, hw, g);
    }
}

/* Block (seg, d) of PSSM_C1_BLOCK threads: taps k = 0 .. W-1 and the bias (k = W) in turn, each
 * thread summing its pairs of the segment, then a tree over the block in a fixed order. */
PSSM_C1_KERNEL_BOUNDED(PSSM_C1_CAT2(pssm_conv1d_bwd_dw_any_, PSSM_C1_DT), pssm_conv1d_bwd_params,
                       p, PSSM_C1_BLOCK)
{
    PSSM_SHARED(float, tree, PSSM_C1_BLOCK);
    const int tid = PSSM_THREAD_X;
    const int64_t hw = (int64_t)p.width - 1, L = p.len;
    for (int64_t blk = PSSM_BLOCK_X; blk < p.work; blk += PSSM_GRIDDIM_X) { /* uniform */
        const int64_t seg = pssm_c1_div(blk, p.dim), d = blk - seg * p.dim;
        const int64_t j0 = seg * p.seg_len;
        const int64_t j1 = PSSM_C1_MIN(j0 + p.seg_len, p.batch * L);
        PSSM_NOUNROLL
        for (int64_t k = 0; k <= hw + 1; k++) {
            float acc = 0.0f;
            PSSM_NOUNROLL
            for (int64_t j = j0 + tid; j < j1; j += PSSM_C1_BLOCK) {
                const int64_t b = pssm_c1_div(j, L), t = j - b * L;
                const float g = p.dpre[(b * p.dim + d) * L + t];
                if (k > hw) { /* the bias */
                    acc += g;
                    continue;
                }
                const int64_t pos = t - hw + k;
                const int32_t *sr = p.seq_idx ? p.seq_idx + b * p.seq_sb : 0;
                if (sr && pssm_c1_seq(sr, p.seq_sl, L, pos) != sr[t * p.seq_sl])
                    continue;
                const PSSM_C1_T *xr = (const PSSM_C1_T *)p.x + b * p.x_sb + d * p.x_sd;
                const PSSM_C1_T *ir =
                    p.init ? (const PSSM_C1_T *)p.init + b * p.init_sb + d * p.init_sd : 0;
                acc += g * PSSM_C1_FN(xval)(xr, p.x_sl, ir, p.init_sw, hw, L, pos);
            }
            tree[tid] = acc;
            PSSM_SYNC();
            for (int h = PSSM_C1_BLOCK / 2; h > 0; h >>= 1) {
                if (tid < h)
                    tree[tid] += tree[tid + h];
                PSSM_SYNC();
            }
            if (tid == 0)
                p.part[(seg * p.dim + d) * (hw + 2) + k] = tree[0];
            PSSM_SYNC(); /* tree[0] is read before the next tap overwrites it */
        }
    }
}
