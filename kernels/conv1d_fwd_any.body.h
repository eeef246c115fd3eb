/*
 * conv1d_fwd_any.body.h - causal_conv1d_fwd of one dtype (conv1d_dtype.body.h) for any width,
 * W from p.width at run time: pssm_conv1d_fwd_any_<dt>.  It runs the widths past the
 * specialised ones (1 and W > 4), any layout, with every option: one thread per output element,
 * taps read straight from memory (neighbouring threads share them through the cache).
 * Work items run along time first, or along channels first for channel-last x, so that a
 * warp's loads stay together.
 */
PSSM_C1_KERNEL_BOUNDED(PSSM_C1_CAT2(pssm_conv1d_fwd_any_, PSSM_C1_DT), pssm_conv1d_fwd_params,
                       p, PSSM_C1_BLOCK)
{
    const int64_t threads = PSSM_GRIDDIM_X * PSSM_BLOCKDIM_X;
    const int64_t len = p.len, dim = p.dim, hw = (int64_t)p.width - 1;
    for (int64_t item = PSSM_BLOCK_X * PSSM_BLOCKDIM_X + PSSM_THREAD_X; item < p.work;
         item += threads) {
        int64_t b, d, t;
        if (p.chan_fastest) {
            const int64_t r = pssm_c1_div(item, dim);
            d = item - r * dim;
            b = pssm_c1_div(r, len);
            t = r - b * len;
        } else {
            const int64_t r = pssm_c1_div(item, len);
            t = item - r * len;
            b = pssm_c1_div(r, dim);
            d = r - b * dim;
        }
        PSSM_C1_FN(out_at)(p, b, d, t, hw);
        if (p.final && t == len - 1)
            for (int64_t h = 0; h < hw; h++)
                PSSM_C1_FN(put_final)(p, b, d, hw, h);
    }
}
