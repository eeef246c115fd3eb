/*
 * ssd_dxr.body.h - the SSD backward's DX product with M in registers (pssm_ssd_chunk_dxr_*),
 * included by ssd_chunk.body.h in its 16-bit stamps.  It computes what the chunk products' DX
 * mode computes (ssd_chunk.body.h, 3., and ssd_prod.body.h) where PSSM_SSD_DXR(p) holds: per
 * row s of a chunk and column p,
 *     v_s[p] = [seg_s == seg_e] exp(cs_e - cs_s) sum_n B_s[n] dS_e[p][n]
 *            + sum_{t >= s reaching s} (B_s . C_t) exp(cs_t - cs_s) dy_t[p],
 *     dx_s[p] = dt'_s v_s[p] + D[p] dy_s[p],
 * and the row sums of x v: the state's share (its first term) into part_v, the whole into
 * part_x.  The anticausal mirror of the forward's output kernel (ssd_out.body.h, whose layout it
 * keeps: a block of four warps takes T rows s and T columns p, each warp 16 whole rows; M's
 * values formed in the accumulator's arrangement from the chunk's C B^T (B C^T above the
 * diagonal) and multiplied from registers; the slabs of dy one ahead by asynchronous copies).
 * dS_e comes in the activation dtype (sact: the backward's state pass writes it for this
 * kernel).  The slabs of t run from this tile's diagonal to the chunk's end; each warp starts at
 * its own diagonal step.  x of the rows s waits in tile3 from the start (both row sums), dy of
 * the rows s (D's term) is copied into tile2 with the last slab.  (The generic DX stamp took
 * 556 us of the SSD fwd+bwd at B4 L2048 H80 bf16, H200 run 71.)
 */
#define SSDX_WARPS PSSM_SSD_OUTR_WARPS
#define SSDX_THREADS (SSDX_WARPS * PSSM_WARP_SIZE)
#define SSDX_TN (SSDC_T / 16)    /* 16-column tiles of a warp's rows */
#define SSDX_STEPS (SSDC_T / 16) /* steps of 16 along t per slab */
#if defined(PSSM_TARGET_CUDA) && defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
#define PSSM_SSDX_MIN_BLOCKS 5 /* (as the forward's output kernel) */
#else
#define PSSM_SSDX_MIN_BLOCKS 4
#endif
PSSM_KERNEL_BOUNDED_MIN(PSSM_SSDC_FN(pssm_ssd_chunk_dxr_), pssm_ssd_chunk_params, p, SSDX_THREADS,
                        PSSM_SSDX_MIN_BLOCKS)
{
    PSSM_SHARED(float, dtp, PSSM_SSD_CHUNK_MAX);
    PSSM_SHARED(float, csl, PSSM_SSD_CHUNK_MAX); /* cs log2(e) */
    PSSM_SHARED(int, seg, PSSM_SSD_CHUNK_MAX);
    PSSM_SHARED(float, dcol, SSDC_T); /* D of the tile's columns, 0 past them */
    PSSM_SHARED(pssm_vec16, tiles_w, 4 * SSDC_TILE_VECS);
    PSSM_SHARED(pssm_vec16, scratch_w,
                SSDX_WARPS * PSSM_MMA_RS_SCRATCH * (int)sizeof(PSSM_SSDC_SMEM) / 16);
    typedef char pssm_ssdx_rows_fit[SSDX_WARPS * 16 == SSDC_T ? 1 : -1];
    typedef char pssm_ssdx_rs_fits[SSDX_WARPS * 16 * 17 * 4 <= SSDC_TILE_VECS * 16 ? 1 : -1];
    (void)sizeof(pssm_ssdx_rows_fit);
    (void)sizeof(pssm_ssdx_rs_fits);
    PSSM_SSDC_SMEM *const tile0 = (PSSM_SSDC_SMEM *)tiles_w;
    PSSM_SSDC_SMEM *const tile1 = (PSSM_SSDC_SMEM *)(tiles_w + SSDC_TILE_VECS);
    PSSM_SSDC_SMEM *const tile2 = (PSSM_SSDC_SMEM *)(tiles_w + 2 * SSDC_TILE_VECS);
    PSSM_SSDC_SMEM *const tile3 = (PSSM_SSDC_SMEM *)(tiles_w + 3 * SSDC_TILE_VECS);
    const int tid = PSSM_TID, lane = PSSM_LANE, warp = PSSM_WARP_ID;
    PSSM_SSDC_SMEM *const scratch = (PSSM_SSDC_SMEM *)scratch_w + warp * PSSM_MMA_RS_SCRATCH;
    const int64_t Q = p.chunk, L = p.seqlen, H = p.heads, P = p.hdim, N = p.dstate;
    /* 32-bit division: the grid's x is below 2^31 (block x as the product kernel's) */
    const uint32_t bx = (uint32_t)PSSM_BLOCK_X, nq = (uint32_t)p.qtiles;
    const uint32_t rest = bx / (uint32_t)H, rest2 = rest / nq;
    const int64_t h = bx % (uint32_t)H, c = rest2 % (uint32_t)p.nchunks;
    const int qt = (int)(rest % nq);
    const int64_t b = rest2 / (uint32_t)p.nchunks, bh = b * H + h;
    const int64_t G = (uint32_t)H / (uint32_t)p.hpg, g = (uint32_t)h / (uint32_t)p.hpg;
    const int64_t c0 = c * Q, col0 = PSSM_BLOCK_Y * SSDC_T;
    const int q = (int)(L - c0 < Q ? L - c0 : Q), r0 = qt * SSDC_T, e = q - 1;
    if (r0 >= q || !PSSM_SSD_DXR(p))
        return; /* past the last chunk's end; (the host launches it only where DXR holds) */
    const int rrows = q - r0 < SSDC_T ? q - r0 : SSDC_T;
    const int ccols = (int)(p.width - col0 < SSDC_T ? p.width - col0 : SSDC_T);
    const int rw = r0 + 16 * warp; /* this warp's first row */
    const float *const Mcb = p.cb + ((b * G + g) * p.nchunks + c) * Q * Q;
    const PSSM_SSDC_ACT *const Br = SSDC_OPND(p.u, h, g) + (c0 + r0) * p.u.s[1];
    const PSSM_SSDC_ACT *const Sa =
        (const PSSM_SSDC_ACT *)p.sact + (bh * p.nchunks + c) * P * N + col0 * N;
    const int64_t wrs = p.w.s[1];
    const PSSM_SSDC_ACT *const W = SSDC_OPND(p.w, h, g) + c0 * wrs + col0; /* dy */
    const PSSM_SSDC_ACT *const Xr = SSDC_OPND(p.xo, h, 0) + (c0 + r0) * p.xo.s[1] + col0;
    const int nsl = (int)((N + SSDC_T - 1) / SSDC_T); /* slabs of n in the state's product */
    const int nslabs = (e - r0) / SSDC_T + 1;        /* slabs of t, the diagonal one first */
    const int kend = r0 + nslabs * SSDC_T;           /* (<= Q: Q is a multiple of T) */
    const int64_t rows_at = (bh * p.coltiles + PSSM_BLOCK_Y) * L + c0 + rw;

    /* the state's slabs of n: B's rows s and dS_e's rows p, as they lie, two in flight */
#define SSDX_STATE_COPY(slab, bt, st)                                                              \
    PSSM_SSDC_FN(pssm_ssdr_state_copy_)(bt, st, Br, p.u.s[1], Sa, N, slab, rrows, ccols,           \
                                        SSDX_THREADS)
    SSDX_STATE_COPY(0, tile0, tile1);
    if (nsl > 1)
        SSDX_STATE_COPY(1, tile2, tile3);
    /* B C^T of this warp's rows, two steps ahead in registers (step kb in mb[kb / 16 % 2]: the
     * slabs start at multiples of T, so that is the step's index in its slab, mod 2) */
    float mb[2][PSSM_MMA_ACC];
    const float *const mrows = Mcb + (int64_t)rw * Q;
    const int qi = (int)Q;
#define SSDX_CB_LOAD(j, kb) PSSM_SSDC_FN(pssm_ssdr_cb_load_)(mb[j], mrows, qi, kb)
    PSSM_SSDC_FN(pssm_ssdc_prep_load_by_)(p, bh, c, dtp, csl, seg, PSSM_LOG2E, SSDX_THREADS);
    for (int cc = tid; cc < SSDC_T; cc += SSDX_THREADS)
        dcol[cc] = p.D && cc < ccols ? p.D[h * p.D_s[0] + (col0 + cc) * p.D_s[1]] : 0.0f;

    float acc[SSDX_TN][PSSM_MMA_ACC];
    PSSM_UNROLL
    for (int j = 0; j < SSDX_TN; j++)
        PSSM_UNROLL
        for (int i = 0; i < PSSM_MMA_ACC; i++)
            acc[j][i] = 0.0f;
    for (int s = 0; s < nsl; s++) { /* B_s . dS_e[p] over slabs of n */
        if (s + 1 < nsl)
            PSSM_COPY_WAIT(1);
        else
            PSSM_COPY_WAIT(0);
        PSSM_SYNC(); /* (the first: also the prep's arrays) */
        const PSSM_SSDC_SMEM *const bt = s % 2 ? tile2 : tile0, *const st = s % 2 ? tile3 : tile1;
        PSSM_SSDC_MMAS(acc, SSDX_TN, SSDC_T / 16, bt + 16 * warp * SSDC_LDS, SSDC_LDS, 0, st,
                       SSDC_LDS, 0);
        if (s + 2 < nsl) {
            PSSM_SYNC();
            SSDX_STATE_COPY(s + 2, s % 2 ? tile2 : tile0, s % 2 ? tile3 : tile1);
        }
    }
#undef SSDX_STATE_COPY
    /* scaled by the decay from the row to the chunk's end, where the row reaches the end */
    const float cse = csl[e];
    const int sege = seg[e];
    PSSM_UNROLL
    for (int i = 0; i < PSSM_MMA_ACC; i++) {
        const int r = rw + pssm_mma_row(lane, i);
        const float sc = ((r < q) & (seg[r] == sege)) ? pssm_exp2f(cse - csl[r]) : 0.0f;
        PSSM_UNROLL
        for (int j = 0; j < SSDX_TN; j++)
            acc[j][i] *= sc;
    }
    /* the first two steps' B C^T: this warp's diagonal step and the next */
    if (warp % 2 == 0) { /* (step kb's values in mb[kb / 16 % 2]; constant indices: an index
                          * known only at run time put mb in local memory) */
        SSDX_CB_LOAD(0, rw);
        if (rw + 16 < kend)
            SSDX_CB_LOAD(1, rw + 16);
    } else {
        SSDX_CB_LOAD(1, rw);
        if (rw + 16 < kend)
            SSDX_CB_LOAD(0, rw + 16);
    }
    PSSM_SYNC(); /* the state's tiles are read */

    /* x of the rows s into tile3 (kept to the end), the first slab of dy into tile0 */
    PSSM_SSDC_FN(pssm_ssdc_copy_async_by_)(tile3, Xr, p.xo.s[1], rrows, ccols, SSDX_THREADS, 1);
    PSSM_SSDC_FN(pssm_ssdc_copy_async_by_)(tile0, W + r0 * wrs, wrs, q - r0, ccols, SSDX_THREADS,
                                           1);
    if (nslabs == 1 && p.D) /* dy of the rows s: the first slab's tile is these rows */
        PSSM_SSDC_FN(pssm_ssdc_copy_async_by_)(tile2, W + r0 * wrs, wrs, rrows, ccols,
                                               SSDX_THREADS, 1);
    PSSM_COPY_WAIT_ALL();
    PSSM_SYNC();
    { /* the state's share of dcs: sum_p x v_state, per row (scratch over tile1, free until the
       * loop's first barrier) */
        float part[PSSM_MMA_ACC];
        PSSM_UNROLL
        for (int i = 0; i < PSSM_MMA_ACC; i++)
            part[i] = 0.0f;
        PSSM_UNROLL
        for (int j = 0; j < SSDX_TN; j++)
            PSSM_UNROLL
            for (int i = 0; i < PSSM_MMA_ACC; i++)
                part[i] += PSSM_SSDC_LD(tile3[(16 * warp + pssm_mma_row(lane, i)) * SSDC_LDS +
                                              16 * j + pssm_mma_col(lane, i)]) *
                           acc[j][i]; /* (x is zero past the tile: the copy's fill) */
        PSSM_SSDC_FN(pssm_ssdc_warp_row_sums_)(part, (float *)tile1 + warp * 16 * 17,
                                               rrows - 16 * warp, p.part_v + rows_at);
    }

    /* the chunk's own tokens t >= s: slabs of dy (tile0 / tile1 in turn, one ahead); segs: the
     * chunk has a restart, and each pair's segments are compared */
    const int segs = seg[e] != -1;
    float csr[PSSM_MMA_ACC]; /* csl and seg of the rows of this lane's values */
    int segr[PSSM_MMA_ACC];
    PSSM_UNROLL
    for (int i = 0; i < PSSM_MMA_ACC; i++) {
        csr[i] = csl[rw + pssm_mma_row(lane, i)];
        segr[i] = seg[rw + pssm_mma_row(lane, i)];
    }
    PSSM_SSDC_SMEM *wt = tile0;
    for (int s = 0; s < nslabs; s++) {
        const int k0 = r0 + s * SSDC_T;
        PSSM_COPY_WAIT_ALL();
        PSSM_SYNC(); /* this slab's dy; every warp is done with the other buffer */
        wt = s % 2 ? tile1 : tile0;
        if (s + 1 < nslabs) { /* the next slab's dy (and dy of the rows s with the last) */
            const int kn = k0 + SSDC_T;
            PSSM_SSDC_FN(pssm_ssdc_copy_async_by_)(s % 2 ? tile0 : tile1, W + kn * wrs, wrs,
                                                   q - kn, ccols, SSDX_THREADS, 1);
            if (s + 2 == nslabs && p.D)
                PSSM_SSDC_FN(pssm_ssdc_copy_async_by_)(tile2, W + r0 * wrs, wrs, rrows, ccols,
                                                       SSDX_THREADS, 1);
        }
        PSSM_UNROLL
        for (int j = 0; j < SSDX_STEPS; j++) {
            const int kb = k0 + 16 * j;
            if (kb < rw)
                continue; /* before this warp's diagonal (warp-uniform) */
            /* M's values of the step: B C^T exp(cs_t - cs_s) where t reaches s, masked on the
             * diagonal step, where the chunk has a restart, or past the chunk's tokens
             * (warp-uniform; every value is at most 1 elsewhere: cs falls along t) */
            float am[PSSM_MMA_ACC];
            if (kb == rw || segs || kb + 16 > q) {
                PSSM_UNROLL
                for (int i = 0; i < PSSM_MMA_ACC; i++) {
                    const int k = kb + pssm_mma_col(lane, i), r = rw + pssm_mma_row(lane, i);
                    const int reach = (r <= k) & (k < q) & (seg[k] == segr[i]);
                    const float m = mb[(j & 1)][i] * pssm_exp2f(csl[k] - csr[i]);
                    am[i] = reach ? m : 0.0f; /* (may overflow where masked) */
                }
            } else {
                PSSM_UNROLL
                for (int i = 0; i < PSSM_MMA_ACC; i++)
                    am[i] = mb[(j & 1)][i] * pssm_exp2f(csl[kb + pssm_mma_col(lane, i)] - csr[i]);
            }
            const pssm_mma_a16 a = PSSM_SSDC_FN(pssm_mma_a16_)(am);
            if (kb + 32 < kend) /* B C^T of the step after the next */
                SSDX_CB_LOAD((j & 1), kb + 32);
            /* B[t][p] = wt[t][p] */
            PSSM_SSDC_FN(pssm_mma16rs_)(acc, SSDX_TN, a, wt + 16 * j * SSDC_LDS, SSDC_LDS, 1,
                                        scratch);
        }
    }
#undef SSDX_CB_LOAD

    /* the epilogue: dx staged over dy of the rows s in tile2 (each pair read and written by one
     * thread) and stored by 16-byte vectors; the row sums of x v (scratch over tile0) */
    PSSM_COPY_WAIT_ALL();
    PSSM_SYNC();
    float part[PSSM_MMA_ACC];
    PSSM_UNROLL
    for (int i = 0; i < PSSM_MMA_ACC; i++)
        part[i] = 0.0f;
    PSSM_UNROLL
    for (int j = 0; j < SSDX_TN; j++) {
        PSSM_UNROLL
        for (int i = 0; i < PSSM_MMA_ACC; i += 1 + PSSM_MMA_PAIRS) {
            const int rr = 16 * warp + pssm_mma_row(lane, i), cc = 16 * j + pssm_mma_col(lane, i);
            const int at = rr * SSDC_LDS + cc, i2 = i + PSSM_MMA_PAIRS;
            const float dtr = dtp[rw + pssm_mma_row(lane, i)];
            float xv[2], dyv[2] = {0.0f, 0.0f}, dx[2];
            const float v[2] = {acc[j][i], acc[j][i2]};
            if (PSSM_MMA_PAIRS) {
                PSSM_SSDC_FN(pssm_ssdc_get2_)(tile3 + at, &xv[0], &xv[1]);
                if (p.D)
                    PSSM_SSDC_FN(pssm_ssdc_get2_)(tile2 + at, &dyv[0], &dyv[1]);
            } else {
                xv[0] = xv[1] = PSSM_SSDC_LD(tile3[at]);
                if (p.D)
                    dyv[0] = dyv[1] = PSSM_SSDC_LD(tile2[at]);
            }
            PSSM_UNROLL
            for (int k = 0; k < 2; k++) /* (dcol is 0 past the tile's columns) */
                dx[k] = dtr * v[k] + dcol[cc + (PSSM_MMA_PAIRS ? k : 0)] * dyv[k];
            if (PSSM_MMA_PAIRS)
                PSSM_SSDC_FN(pssm_ssdc_put2_)(tile2 + at, dx[0], dx[1]);
            else
                tile2[at] = PSSM_SSDC_TO_SMEM(dx[0]);
            part[i] += xv[0] * v[0];
            if (PSSM_MMA_PAIRS)
                part[i2] += xv[1] * v[1];
        }
    }
    PSSM_SSDC_FN(pssm_ssdc_warp_row_sums_)(part, (float *)tile0 + warp * 16 * 17,
                                           rrows - 16 * warp, p.part_x + rows_at);
    PSSM_SYNC();
    PSSM_SSDC_FN(pssm_ssdc_store_by_)((PSSM_SSDC_ACT *)p.oo.ptr + b * p.oo.s[0] +
                                          (c0 + r0) * p.oo.s[1] + h * p.oo.s[2] + col0,
                                      p.oo.s[1], tile2, rrows, ccols, SSDX_THREADS);
}
#undef PSSM_SSDX_MIN_BLOCKS
#undef SSDX_STEPS
#undef SSDX_TN
#undef SSDX_THREADS
#undef SSDX_WARPS
