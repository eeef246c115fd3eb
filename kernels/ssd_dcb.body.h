/*
 * ssd_dcb.body.h - the SSD backward's gradient of C B^T (pssm_ssd_chunk_dcb_*), included by
 * ssd_chunk.body.h once per dtype stamp.
 *
 * y_t = sum_s (C_t . B_s) L_ts x_s with L_ts = [s <= t, s reaches t] exp(cs_t - cs_s) dt'_s, so
 * the gradient of C_t . B_s is dCB[t][s] = sum_h L_ts (dy_t . x_s) over the heads of the group,
 * and then dC_t = sum_s dCB[t][s] B_s, dB_s = sum_t dCB[t][s] C_t: one product per group and
 * chunk where forming dy x^T per head inside dB's and dC's own products took two per head and
 * tile of N (run 51: 716 + 698 us).  The same per-head product dy x^T, times C B^T, is W, the
 * intra-chunk share of dcs, so this kernel gives both.
 *
 * Block x = ((b, c, slice of hpb heads), pair (i, j) of a row tile i >= a column tile j), the
 * pairs innermost (the blocks of one slice read the same heads' tiles), the slices next (they
 * read the same C B^T).  Per head hh of the slice (t: the rows of tile i, s: the columns of j):
 *     G[t][s] = dy_t . x_s                                     (over P by slabs)
 *     D[t][s] = L_ts G[t][s]                                   (the head's dCB)
 *     W[t][s] = [s < t] (C_t . B_s) D[t][s]
 * W's row sums into part_row at column tile j, its column sums into part_col at row tile i,
 * in f32 from the accumulators (never rounded to the operand type: dcs is a difference of these
 * sums); the sum of D over the slice's heads into dcbp at the tile ((B, G, slices of the group,
 * nchunks, Q, Q)), which the reduce adds over the slices of a group into dcb (where a group is
 * one slice, dcbp is dcb).  Every tile on or below the diagonal of a chunk's rows below q is
 * written whole (zeros where nothing reaches), so that dB and dC read defined values.
 * Operands (the host's DCB mode): U = C, V = B (for C B^T where the workspace has none),
 * W = dy, xo = x.  Where dy and x move by 16-byte vectors, each step's tiles (and each head's
 * dt', cs, seg) are copied asynchronously one step ahead, in the other pair of buffers.
 */
PSSM_KERNEL_BOUNDED_MIN(PSSM_SSDC_FN(pssm_ssd_chunk_dcb_), pssm_ssd_chunk_params, p,
                        PSSM_SSDC_THREADS, PSSM_SSDC_PROD_MIN_BLOCKS)
{
    /* two sets of a head's dt', cs and seg (Q floats each, as p.prep holds them) */
    PSSM_SHARED(pssm_vec16, prep_w, 2 * 3 * PSSM_SSD_CHUNK_MAX / 4);
    PSSM_SHARED(pssm_vec16, tiles_w, 4 * SSDC_TILE_VECS);
    PSSM_SHARED(float, red, 2 * SSDC_RQ * SSDC_T); /* the spans' row and column partials */
    /* W's buffer goes over the pair of tiles of the head's last step */
    typedef char pssm_ssdc_wbuf_fits[2 * SSDC_TILE_VECS * 16 >= SSDC_T * SSDC_RBP * 4 ? 1 : -1];
    typedef char pssm_ssdc_sums_fit[PSSM_SSDC_THREADS >= 2 * SSDC_T ? 1 : -1];
    (void)sizeof(pssm_ssdc_wbuf_fits);
    (void)sizeof(pssm_ssdc_sums_fit);
    const int tid = PSSM_TID, lane = PSSM_LANE, warp = PSSM_WARP_ID;
    const int64_t Q = p.chunk, L = p.seqlen, H = p.heads, P = p.hdim, N = p.dstate;
    const int nq = (int)p.qtiles, npairs = nq * (nq + 1) / 2;
    const int64_t hpb = p.hpb, slices = H / hpb, spg = p.hpg / hpb, nc = p.nchunks;
    /* 32-bit division: the grid's x is below 2^31 */
    const uint32_t bx = (uint32_t)PSSM_BLOCK_X, unit = bx / (uint32_t)npairs;
    const int pair = (int)(bx % (uint32_t)npairs);
    const int64_t slice = unit % (uint32_t)slices, bc = unit / (uint32_t)slices;
    const int64_t c = bc % nc, b = bc / nc;
    int ti_ = 0; /* pair = i (i + 1) / 2 + j, j <= i */
    while ((ti_ + 1) * (ti_ + 2) / 2 <= pair)
        ti_++;
    const int itile = ti_, jtile = pair - ti_ * (ti_ + 1) / 2;
    const int64_t c0 = c * Q, h0 = slice * hpb, G = H / p.hpg, g = h0 / p.hpg;
    const int q = (int)(L - c0 < Q ? L - c0 : Q), r0 = itile * SSDC_T, k0 = jtile * SSDC_T;
    if (r0 >= q)
        return; /* past the last chunk's end: never read */
    const int rrows = q - r0 < SSDC_T ? q - r0 : SSDC_T, krows = q - k0 < SSDC_T ? q - k0 : SSDC_T;
    PSSM_SSDC_SMEM *const pair0 = (PSSM_SSDC_SMEM *)tiles_w;
    PSSM_SSDC_SMEM *const pair1 = (PSSM_SSDC_SMEM *)(tiles_w + 2 * SSDC_TILE_VECS);
    const int SV = SSDC_TILE_VECS * 16 / (int)sizeof(PSSM_SSDC_SMEM); /* a tile's operands */
    float mk[SSDC_TPW][PSSM_MMA_ACC], acc[SSDC_TPW][PSSM_MMA_ACC], dsum[SSDC_TPW][PSSM_MMA_ACC];
    PSSM_UNROLL
    for (int ti = 0; ti < SSDC_TPW; ti++)
        PSSM_UNROLL
        for (int i = 0; i < PSSM_MMA_ACC; i++)
            mk[ti][i] = dsum[ti][i] = 0.0f;

    /* C B^T of the tile: from the workspace, or formed here over N by slabs (U = C, V = B) */
    if (p.cb) {
        PSSM_SSDC_FN(pssm_ssdc_cb_load_)(mk, p.cb + ((b * G + g) * nc + c) * Q * Q, Q, r0, k0, 0);
    } else {
        const PSSM_SSDC_ACT *U = SSDC_OPND(p.u, h0, g) + (c0 + r0) * p.u.s[1];
        const PSSM_SSDC_ACT *V = SSDC_OPND(p.v, h0, g) + (c0 + k0) * p.v.s[1];
        for (int64_t i0 = 0; i0 < N; i0 += SSDC_T) {
            const int icols = (int)(N - i0 < SSDC_T ? N - i0 : SSDC_T);
            PSSM_SSDC_FN(pssm_ssdc_tile_)
            (pair0, U + i0 * p.u.s[3], p.u.s[1], p.u.s[3], rrows, icols, p.u.vec, 0);
            PSSM_SSDC_FN(pssm_ssdc_tile_)
            (pair0 + SV, V + i0 * p.v.s[3], p.v.s[1], p.v.s[3], krows, icols, p.v.vec, 0);
            PSSM_SYNC();
            PSSM_SSDC_FN(pssm_ssdc_slab_mma_)(mk, pair0, 0, pair0 + SV, 0);
            PSSM_SYNC();
        }
    }

    /* the steps: (head, slab of P), each into a pair of tiles in turn (dy's rows t, x's rows s) */
    const int vec = p.w.vec && p.xo.vec;
    const int nps = (int)((P + SSDC_T - 1) / SSDC_T), steps = (int)hpb * nps;
    float *const prep_f = (float *)prep_w;
#define SSDC_DCB_COPY(st)                                                                          \
    do {                                                                                           \
        const int64_t hs = h0 + (st) / nps, ps0 = (int64_t)((st) % nps) * SSDC_T;                 \
        PSSM_SSDC_SMEM *const dst = (st) & 1 ? pair1 : pair0;                                      \
        const int pcols = (int)(P - ps0 < SSDC_T ? P - ps0 : SSDC_T);                              \
        PSSM_SSDC_FN(pssm_ssdc_copy_async_)(dst, SSDC_OPND(p.w, hs, g) + (c0 + r0) * p.w.s[1] + ps0, \
                                            p.w.s[1], rrows, pcols);                               \
        PSSM_SSDC_FN(pssm_ssdc_copy_async_)(dst + SV, SSDC_OPND(p.xo, hs, g) +                     \
                                                          (c0 + k0) * p.xo.s[1] + ps0,             \
                                            p.xo.s[1], krows, pcols);                              \
        if ((st) % nps == 0) { /* the head's dt', cs, seg as they lie in p.prep */                \
            const pssm_vec16 *src =                                                                \
                (const pssm_vec16 *)(p.prep + ((b * H + hs) * nc + c) * 3 * Q);                    \
            pssm_vec16 *const pd = prep_w + ((st) / nps & 1) * (3 * PSSM_SSD_CHUNK_MAX / 4);      \
            for (int v = tid; v < 3 * (int)Q / 4; v += PSSM_SSDC_THREADS)                          \
                pssm_copy_async16(pd + v, src + v, 1);                                             \
        }                                                                                          \
    } while (0)
    if (vec)
        SSDC_DCB_COPY(0);
    for (int st = 0; st < steps; st++) {
        const int64_t hh = h0 + st / nps, ps0 = (int64_t)(st % nps) * SSDC_T;
        PSSM_SSDC_SMEM *const cur = st & 1 ? pair1 : pair0;
        float *const dtp = prep_f + (st / nps & 1) * 3 * PSSM_SSD_CHUNK_MAX;
        float *const cs = dtp + Q;
        int *const seg = (int *)(dtp + 2 * Q);
        if (st % nps == 0)
            PSSM_UNROLL
            for (int ti = 0; ti < SSDC_TPW; ti++)
                PSSM_UNROLL
                for (int i = 0; i < PSSM_MMA_ACC; i++)
                    acc[ti][i] = 0.0f;
        if (vec) {
            PSSM_COPY_WAIT_ALL();
            PSSM_SYNC(); /* this step's tiles; every warp is done with the other pair */
            if (st + 1 < steps)
                SSDC_DCB_COPY(st + 1);
        } else {
            const int pcols = (int)(P - ps0 < SSDC_T ? P - ps0 : SSDC_T);
            if (st % nps == 0)
                PSSM_SSDC_FN(pssm_ssdc_prep_load_by_)(p, b * H + hh, c, dtp, cs, seg, 1.0f,
                                                      PSSM_SSDC_THREADS);
            PSSM_SSDC_FN(pssm_ssdc_tile_)(cur, SSDC_OPND(p.w, hh, g) + (c0 + r0) * p.w.s[1] +
                                                   ps0 * p.w.s[3],
                                          p.w.s[1], p.w.s[3], rrows, pcols, p.w.vec, 0);
            PSSM_SSDC_FN(pssm_ssdc_tile_)(cur + SV, SSDC_OPND(p.xo, hh, g) +
                                                        (c0 + k0) * p.xo.s[1] + ps0 * p.xo.s[3],
                                          p.xo.s[1], p.xo.s[3], krows, pcols, p.xo.vec, 0);
            PSSM_SYNC();
        }
        PSSM_SSDC_FN(pssm_ssdc_slab_mma_)(acc, cur, 0, cur + SV, 0); /* dy_t . x_s */
        PSSM_SYNC(); /* every warp's product read the pair: W's buffer (or the next tiles) */
        if (st % nps != nps - 1)
            continue;

        /* the head's D (into the slice's sum) and W (into its buffer) */
        float *const wbuf = (float *)cur;
        PSSM_UNROLL
        for (int ti = 0; ti < SSDC_TPW; ti++) {
            const int tile = warp * SSDC_TPW + ti, tm = tile / SSDC_SUB, tn = tile % SSDC_SUB;
            PSSM_UNROLL
            for (int i = 0; i < PSSM_MMA_ACC; i++) {
                const int rr = tm * 16 + pssm_mma_row(lane, i), kk = tn * 16 + pssm_mma_col(lane, i);
                const int r = r0 + rr, k = k0 + kk;
                /* computed for every pair, then selected: a masked pair's exp may overflow */
                const int reach = k <= r && r < q && seg[k] == seg[r];
                const float dv = acc[ti][i] * pssm_expf(cs[r] - cs[k]) * dtp[k];
                const float d = reach ? dv : 0.0f;
                dsum[ti][i] += d;
                wbuf[rr * SSDC_RBP + kk] = k < r ? mk[ti][i] * d : 0.0f;
            }
        }
        PSSM_SYNC();
        { /* SSDC_RQ threads per row (column) over spans of it, then one thread adds the spans */
            const int line = tid % SSDC_T, span = tid / SSDC_T, s0 = span * (SSDC_T / SSDC_RQ);
            float rs = 0.0f, csum = 0.0f;
            for (int jj = s0; jj < s0 + SSDC_T / SSDC_RQ; jj++) {
                rs += wbuf[line * SSDC_RBP + jj];
                csum += wbuf[jj * SSDC_RBP + line];
            }
            red[span * SSDC_T + line] = rs;
            red[(SSDC_RQ + span) * SSDC_T + line] = csum;
        }
        PSSM_SYNC();
        const int64_t bhh = b * H + hh;
        if (tid < SSDC_T) {
            if (tid < rrows) {
                float t = 0.0f;
                for (int k = 0; k < SSDC_RQ; k++)
                    t += red[k * SSDC_T + tid];
                p.part_row[(bhh * nq + jtile) * L + c0 + r0 + tid] = t;
            }
        } else if (tid < 2 * SSDC_T && tid - SSDC_T < krows) {
            const int col = tid - SSDC_T;
            float t = 0.0f;
            for (int k = 0; k < SSDC_RQ; k++)
                t += red[(SSDC_RQ + k) * SSDC_T + col];
            p.part_col[(bhh * nq + itile) * L + c0 + k0 + col] = t;
        }
        /* (red and this pair are written again only after the next step's barrier) */
    }
#undef SSDC_DCB_COPY

    /* the slice's dCB tile, whole */
    float *const dst = p.dcbp + (((b * G + g) * spg + slice % spg) * nc + c) * Q * Q;
    PSSM_UNROLL
    for (int ti = 0; ti < SSDC_TPW; ti++) {
        const int tile = warp * SSDC_TPW + ti, tm = tile / SSDC_SUB, tn = tile % SSDC_SUB;
        PSSM_UNROLL
        for (int i = 0; i < PSSM_MMA_ACC; i += 1 + PSSM_MMA_PAIRS) {
            const int64_t at = (int64_t)(r0 + tm * 16 + pssm_mma_row(lane, i)) * Q + k0 + tn * 16 +
                               pssm_mma_col(lane, i);
            if (PSSM_MMA_PAIRS) {
                pssm_f32x2 v;
                v.v[0] = dsum[ti][i], v.v[1] = dsum[ti][i + PSSM_MMA_PAIRS];
                *(pssm_f32x2 *)(dst + at) = v;
            } else {
                dst[at] = dsum[ti][i];
            }
        }
    }
}
