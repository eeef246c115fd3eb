/*
 * ssd_prod.body.h - the SSD's chunk products (ssd_chunk.body.h, 3.), included by it once per
 * stamp of the kernel: PSSM_SSDC_PROD_NAME (the kernel's name before the dtype suffix) and
 * PSSM_SSDC_PROD_MODE (one mode's constant, so that the compiler keeps only that mode's code and
 * registers; p.mode would make one kernel of every mode) and PSSM_SSDC_PROD_AHEAD (1: the
 * slabs' loads one slab ahead, which holds the next slab's M and W in registers during the
 * products).  Leaves none of them defined.
 */
PSSM_KERNEL_BOUNDED_MIN(PSSM_SSDC_FN(PSSM_SSDC_PROD_NAME), pssm_ssd_chunk_params, p,
                        PSSM_SSDC_THREADS, PSSM_SSDC_PROD_MIN_BLOCKS)
{
    const int mode = PSSM_SSDC_PROD_MODE; /* a constant in every stamp */
    PSSM_SHARED(float, dtp, PSSM_SSD_CHUNK_MAX);
    PSSM_SHARED(float, cs, PSSM_SSD_CHUNK_MAX);
    PSSM_SHARED(int, seg, PSSM_SSD_CHUNK_MAX);
    PSSM_SHARED(float, dcol, SSDC_T); /* the forward's fast epilogue: D of the tile's columns */
    PSSM_SHARED(pssm_vec16, tiles_w, 4 * SSDC_TILE_VECS);
    PSSM_SSDC_SMEM *const ut = (PSSM_SSDC_SMEM *)tiles_w; /* ut[r][i] = U_r[i]               */
    PSSM_SSDC_SMEM *const vt = (PSSM_SSDC_SMEM *)(tiles_w + SSDC_TILE_VECS); /* V_k[i], S[col][i] */
    PSSM_SSDC_SMEM *const ms = (PSSM_SSDC_SMEM *)(tiles_w + 2 * SSDC_TILE_VECS); /* w (U_r.V_k) */
    PSSM_SSDC_SMEM *const wt = (PSSM_SSDC_SMEM *)(tiles_w + 3 * SSDC_TILE_VECS); /* W_k[col]  */
    float *const rowbuf = (float *)tiles_w; /* the epilogue's row sums, T x T over ut and vt  */
    typedef char pssm_ssdc_rowbuf_fits[2 * SSDC_TILE_VECS * 16 >=
                                               (SSDC_T * SSDC_RBP + SSDC_RQ * SSDC_T) * 4
                                           ? 1
                                           : -1];
    const int tid = PSSM_TID, lane = PSSM_LANE, warp = PSSM_WARP_ID;
    const int64_t Q = p.chunk, L = p.seqlen, H = p.heads, P = p.hdim, N = p.dstate;
    /* block x = (b, c, row tile, slice of hpb heads), the heads innermost (a group's blocks of
     * one chunk run together: they read the same C B^T and B, C tiles); dB and dC sum over the
     * heads of a group, so their blocks take hpb heads each (the rest one) and leave one
     * partial per slice: the state's share of each head, and in the group's first slice the
     * chunk's own tokens' share, from the group's dCB (ssd_dcb.body.h) */
    const int by_heads = mode == PSSM_SSD_PROD_DB || mode == PSSM_SSD_PROD_DC;
    const int64_t hpb = by_heads ? p.hpb : 1, slices = H / hpb;
    /* 32-bit division: the grid's x is below 2^31 (64-bit division is a long subroutine) */
    const uint32_t bx = (uint32_t)PSSM_BLOCK_X, nq = (uint32_t)p.qtiles;
    const uint32_t rest = bx / (uint32_t)slices, rest2 = rest / nq;
    const int64_t slice = bx % (uint32_t)slices, c = rest2 % (uint32_t)p.nchunks;
    const int qt = (int)(rest % nq);
    const int64_t b = rest2 / (uint32_t)p.nchunks, h = slice * hpb, bh = b * H + h; /* first head */
    const int64_t G = (uint32_t)H / (uint32_t)p.hpg, g0 = (uint32_t)h / (uint32_t)p.hpg;
    /* the chunk's C B^T from the workspace; dB and dC: its gradient dCB, already weighted and
     * masked (dB reads it transposed), and only the group's first slice */
    const float *const Mcb = p.cb && !by_heads ? p.cb + ((b * G + g0) * p.nchunks + c) * Q * Q : 0;
    const float *const Mk =
        by_heads ? p.dcb + ((b * G + g0) * p.nchunks + c) * Q * Q : Mcb;
    const int own_tokens = !by_heads || slice % (p.hpg / hpb) == 0;
    const int64_t c0 = c * Q, col0 = PSSM_BLOCK_Y * SSDC_T;
    const int q = (int)(L - c0 < Q ? L - c0 : Q), r0 = qt * SSDC_T, e = q - 1;
    if (r0 >= q)
        return; /* a row tile past the end of the last chunk (the whole block) */
    if (PSSM_SSDC_PROD_AHEAD && (mode == PSSM_SSD_PROD_Y || mode == PSSM_SSD_PROD_DX) &&
        !PSSM_SSD_VEC_EPILOGUE(p))
        return; /* (the host never launches a vector stamp here: nothing written shows it) */
    (void)sizeof(pssm_ssdc_rowbuf_fits);
    const int rrows = q - r0 < SSDC_T ? q - r0 : SSDC_T; /* rows r of this tile       */
    float acc[SSDC_TPW][PSSM_MMA_ACC], mk[SSDC_TPW][PSSM_MMA_ACC];

    const int causal = mode == PSSM_SSD_PROD_FWD || mode == PSSM_SSD_PROD_Y ||
                       mode == PSSM_SSD_PROD_DC;
    const int dt_rows = mode == PSSM_SSD_PROD_DB; /* dB's dt'_r in its weights, per head */
    /* one slab of U (inner <= T: dB, dC) is loaded once per head, where no row sum reuses its
     * shared tile */
    const int u_once = p.inner <= SSDC_T && mode != PSSM_SSD_PROD_Y && mode != PSSM_SSD_PROD_DX;
    const int ccols = (int)(p.width - col0 < SSDC_T ? p.width - col0 : SSDC_T);
    const PSSM_SSDC_ACT *x = (const PSSM_SSDC_ACT *)p.x + b * p.x_s[0] + h * p.x_s[2];
    const PSSM_SSDC_ACT *z = (const PSSM_SSDC_ACT *)p.z;
    /* The forward's fast epilogue (the ahead stamp, vector layouts): z's tile is copied into ut
     * once the state's product is done (the slabs do not use ut then), asynchronously, its
     * latency hidden behind the slabs; after the slabs wlast holds x's tile of these rows (the
     * diagonal slab is the last); out is staged in ms and stored by 16-byte vectors. */
    const int fast_epi = PSSM_SSDC_PROD_AHEAD && mode == PSSM_SSD_PROD_FWD && Mcb && p.w.vec &&
                         p.oo.vec && (!z || p.zo.vec) && !p.ys.ptr; /* (y: per element) */
    /* The backward's vector epilogues (Y with z, DX; hpb = 1): their elementwise operands by
     * asynchronous copies of whole tiles into shared memory, their outputs staged there and
     * stored by 16-byte vectors (per element, with 64-bit indices in the accumulator's
     * arrangement, the loads of dy and x were 17% of DX's instructions and a quarter of its
     * stalls, run 47).  The state's share of dcs reads its tiles from ms and wt before the
     * slabs; the epilogue reads x (Y) or dy (DX) from the diagonal slab's W, which the slabs
     * leave in wt, and dout (Y) or x (DX) from ut, z (Y) from vt. */
    const int fast_y = PSSM_SSDC_PROD_AHEAD && mode == PSSM_SSD_PROD_Y; /* the yv, dxv stamps */
    const int fast_dx = PSSM_SSDC_PROD_AHEAD && mode == PSSM_SSD_PROD_DX;
    PSSM_SSDC_SMEM *wlast = wt; /* the W tile of the last slab */
    /* D of the tile's columns once per block, read after the slabs' barriers (per element, its
     * 64-bit index and load were 7% of the kernel's instructions, run 43) */
    if ((fast_epi || fast_y || fast_dx) && p.D)
        for (int cc = tid; cc < SSDC_T; cc += PSSM_SSDC_THREADS)
            dcol[cc] = cc < ccols ? p.D[h * p.D_s[0] + (col0 + cc) * p.D_s[1]] : 0.0f;
    PSSM_UNROLL
    for (int ti = 0; ti < SSDC_TPW; ti++)
        PSSM_UNROLL
        for (int i = 0; i < PSSM_MMA_ACC; i++)
            acc[ti][i] = 0.0f;

    for (int64_t hh = h; hh < h + hpb; hh++) { /* acc sums over the block's heads */
        const int64_t g = (uint32_t)hh / (uint32_t)p.hpg, bhh = b * H + hh;
        /* the forward's one-stage state product loads the prep while its tiles are in flight */
        const int state_part = !causal || c > 0 || p.x0;
        const int one_stage = PSSM_SSDC_PROD_AHEAD && state_part && p.inner == 2 * SSDC_T &&
                              !p.s_trans && !u_once && p.u.vec;
        const PSSM_SSDC_ACT *U = SSDC_OPND(p.u, hh, g), *V = SSDC_OPND(p.v, hh, g);
        const PSSM_SSDC_ACT *W = SSDC_OPND(p.w, hh, g);
        const float *S = p.sprod + (bhh * p.nchunks + c) * P * N;
        /* early (dB, dC, vector layouts): the head's U tile and its state's f32 tile (staged
         * over ms and wt, free until the slabs) copied asynchronously before the prep's loads,
         * so that the three wait once, not one after another (by_heads: a constant: the other
         * stamps keep none of its code, run 50) */
        const int early = by_heads && u_once && p.u.vec && p.s_trans && p.vec;
        float *const sf = (float *)ms; /* pitch SSDC_T + 4 */
        typedef char pssm_ssdc_sf_fits[2 * SSDC_TILE_VECS * 16 >= SSDC_T * SSDC_F32P * 4 ? 1 : -1];
        (void)sizeof(pssm_ssdc_sf_fits);
        if (early && state_part) { /* (U is read by the state's product alone: a copy
                                      * never waited for raced the next head's, run 57) */
            PSSM_SSDC_FN(pssm_ssdc_copy_async_)(ut, U + (c0 + r0) * p.u.s[1], p.u.s[1], rrows,
                                                (int)p.inner);
            PSSM_SSDC_FN(pssm_ssdc_copy_f32_async_)(sf, S + col0, N, (int)p.inner, ccols);
        }
        if (!one_stage)
            PSSM_SSDC_FN(pssm_ssdc_prep_load_)(p, bhh, c, dtp, cs, seg);
        /* S_in in the operand type (the forward's sact, ssd_params.h): its tiles copied as they
         * lie, asynchronously */
        const PSSM_SSDC_ACT *Sa =
            p.sact ? (const PSSM_SSDC_ACT *)p.sact + (bhh * p.nchunks + c) * P * N : 0;
        if (u_once && !early && (state_part || !by_heads))
            PSSM_SSDC_FN(pssm_ssdc_tile_)(ut, U + (c0 + r0) * p.u.s[1], p.u.s[1], p.u.s[3], rrows,
                                          (int)p.inner, p.u.vec, 0);

        /* U_r . S over slabs of i (nothing enters the first chunk without an initial state), into
         * mk, then scaled into acc */
        if (state_part) {
            PSSM_UNROLL
            for (int ti = 0; ti < SSDC_TPW; ti++)
                PSSM_UNROLL
                for (int i = 0; i < PSSM_MMA_ACC; i++)
                    mk[ti][i] = 0.0f;
            /* the forward's two slabs of inner (N = 2T, vector loads): both at once, U's
             * loads in flight while S's are converted, over ut/vt and ms/wt (free until the
             * chunk's own tokens), one barrier pair instead of two */
            if (one_stage) {
                const PSSM_SSDC_ACT *Ur = U + (c0 + r0) * p.u.s[1];
                PSSM_SSDC_FN(pssm_ssdc_copy_async_)(ut, Ur, p.u.s[1], rrows, SSDC_T);
                PSSM_SSDC_FN(pssm_ssdc_copy_async_)(ms, Ur + SSDC_T, p.u.s[1], rrows, SSDC_T);
                if (Sa) {
                    PSSM_SSDC_FN(pssm_ssdc_copy_async_)(vt, Sa + col0 * N, N, ccols, SSDC_T);
                    PSSM_SSDC_FN(pssm_ssdc_copy_async_)(wt, Sa + col0 * N + SSDC_T, N, ccols,
                                                        SSDC_T);
                } else {
                    PSSM_SSDC_FN(pssm_ssdc_tile_f32_)(vt, S + col0 * N, N, ccols, SSDC_T, p.vec);
                    PSSM_SSDC_FN(pssm_ssdc_tile_f32_)(wt, S + col0 * N + SSDC_T, N, ccols, SSDC_T,
                                                      p.vec);
                }
                PSSM_SSDC_FN(pssm_ssdc_prep_load_)(p, bhh, c, dtp, cs, seg);
                PSSM_COPY_WAIT_ALL();
                PSSM_SYNC();
                PSSM_SSDC_FN(pssm_ssdc_slab_mma_)(mk, ut, 0, vt, 0);
                PSSM_SSDC_FN(pssm_ssdc_slab_mma_)(mk, ms, 0, wt, 0);
                PSSM_SYNC();
            }
            for (int64_t i0 = 0; i0 < (one_stage ? 0 : p.inner); i0 += SSDC_T) {
                const int icols = (int)(p.inner - i0 < SSDC_T ? p.inner - i0 : SSDC_T);
                if (!u_once)
                    PSSM_SSDC_FN(pssm_ssdc_tile_)(ut, U + (c0 + r0) * p.u.s[1] + i0 * p.u.s[3],
                                                  p.u.s[1], p.u.s[3], rrows, icols, p.u.vec,
                                                  0);
                /* S's (P, N) rows as they lie: vt[col][i] (cols p), or vt[i][col] (s_trans) */
                if (early) { /* the staged f32 tile, converted (one slab: inner <= T) */
                    PSSM_COPY_WAIT_ALL();
                    PSSM_SYNC();
                    PSSM_SSDC_FN(pssm_ssdc_f32_put_)(vt, sf);
                } else if (Sa && !p.s_trans) {
                    PSSM_SSDC_FN(pssm_ssdc_copy_async_)(vt, Sa + col0 * N + i0, N, ccols, icols);
                    PSSM_COPY_WAIT_ALL();
                } else if (!p.s_trans)
                    PSSM_SSDC_FN(pssm_ssdc_tile_f32_)(vt, S + col0 * N + i0, N, ccols, icols,
                                                      p.vec);
                else
                    PSSM_SSDC_FN(pssm_ssdc_tile_f32_)(vt, S + i0 * N + col0, N, icols, ccols,
                                                      p.vec);
                PSSM_SYNC();
                if (!p.s_trans)
                    PSSM_SSDC_FN(pssm_ssdc_slab_mma_)(mk, ut, 0, vt, 0);
                else
                    PSSM_SSDC_FN(pssm_ssdc_slab_mma_)(mk, ut, 0, vt, 1);
                PSSM_SYNC();
            }
            PSSM_UNROLL
            for (int ti = 0; ti < SSDC_TPW; ti++) {
                const int tm = (warp * SSDC_TPW + ti) / SSDC_SUB;
                PSSM_UNROLL
                for (int i = 0; i < PSSM_MMA_ACC; i++) {
                    const int r = r0 + tm * 16 + pssm_mma_row(lane, i);
                    float sc = 0.0f;
                    if (r < q)
                        sc = causal ? (seg[r] == -1 ? pssm_expf(cs[r]) : 0.0f)
                                    : (seg[r] == seg[e] ? pssm_expf(cs[e] - cs[r]) : 0.0f);
                    if (dt_rows && r < q)
                        sc *= dtp[r];
                    acc[ti][i] += sc * mk[ti][i];
                }
            }
        }

        if (fast_epi && z) /* waited for with the first slab's W */
            PSSM_SSDC_FN(pssm_ssdc_copy_async_)(ut, SSDC_OPND(p.zo, h, 0) + (c0 + r0) * p.zo.s[1] +
                                                        col0 * p.zo.s[3],
                                                p.zo.s[1], rrows, ccols);

        if (mode == PSSM_SSD_PROD_Y || mode == PSSM_SSD_PROD_DX) {
            /* the state's share of dcs apart (Y: sum_p dy y_inter; DX: sum_p x dx_inter / dt'),
             * so that no sum of the backward's dt is the difference of two rounded ones; the
             * vector epilogues' operands copied into ms (dout or x) and wt (z) */
            if (fast_y || fast_dx) {
                const pssm_ssd_opnd *eo = fast_y ? &p.go : &p.xo;
                const int64_t at = (c0 + r0) * eo->s[1] + col0;
                PSSM_SSDC_FN(pssm_ssdc_copy_async_)(ms, SSDC_OPND(*eo, h, 0) + at, eo->s[1],
                                                    rrows, ccols);
                if (fast_y && z)
                    PSSM_SSDC_FN(pssm_ssdc_copy_async_)(wt, SSDC_OPND(p.zo, h, 0) +
                                                            (c0 + r0) * p.zo.s[1] + col0,
                                                        p.zo.s[1], rrows, ccols);
                PSSM_COPY_WAIT_ALL();
                PSSM_SYNC();
            }
            PSSM_UNROLL
            for (int ti = 0; ti < SSDC_TPW; ti++) {
                const int tile = warp * SSDC_TPW + ti, tm = tile / SSDC_SUB, tn = tile % SSDC_SUB;
                PSSM_UNROLL
                for (int i = 0; i < PSSM_MMA_ACC; i++) {
                    const int rr = tm * 16 + pssm_mma_row(lane, i);
                    const int cc = tn * 16 + pssm_mma_col(lane, i);
                    const int64_t t = c0 + r0 + rr, col = col0 + cc;
                    float f = 0.0f;
                    if (rr < rrows && cc < ccols && (fast_y || fast_dx)) {
                        f = PSSM_SSDC_LD(ms[rr * SSDC_LDS + cc]); /* dout or x */
                        if (fast_y && z) {
                            const float zv = PSSM_SSDC_LD(wt[rr * SSDC_LDS + cc]);
                            f *= zv * pssm_sigmoid_fast(zv);
                        }
                        f *= acc[ti][i];
                    } else if (rr < rrows && cc < ccols) {
                        if (mode == PSSM_SSD_PROD_DX) {
                            f = PSSM_SSDC_LD(x[t * p.x_s[1] + col * p.x_s[3]]);
                        } else {
                            f = PSSM_SSDC_LD(((const PSSM_SSDC_ACT *)p.dout)[
                                b * p.dout_s[0] + t * p.dout_s[1] + h * p.dout_s[2] +
                                col * p.dout_s[3]]);
                            if (z) {
                                const float zv = PSSM_SSDC_LD(z[b * p.z_s[0] + t * p.z_s[1] +
                                                                h * p.z_s[2] + col * p.z_s[3]]);
                                f *= zv * pssm_sigmoid_fast(zv);
                            }
                        }
                        f *= acc[ti][i];
                    }
                    rowbuf[rr * SSDC_RBP + cc] = f;
                }
            }
            PSSM_SSDC_FN(pssm_ssdc_row_sums_)(rowbuf, rrows,
                                              mode == PSSM_SSD_PROD_Y ? p.part_y : p.part_v,
                                              (bh * p.coltiles + PSSM_BLOCK_Y) * L + c0 + r0);
            if (mode == PSSM_SSD_PROD_Y && !z)
                return; /* dy is dout, no dz: the chunk's own tokens change nothing here */
            /* the epilogue's first tile (dout, or x) in flight during the slabs */
            if (fast_y || fast_dx) {
                const pssm_ssd_opnd *eo = fast_y ? &p.go : &p.xo;
                PSSM_SSDC_FN(pssm_ssdc_copy_async_)(ut, SSDC_OPND(*eo, h, 0) +
                                                            (c0 + r0) * eo->s[1] + col0,
                                                    eo->s[1], rrows, ccols);
            }
        }

        /* the chunk's own tokens: slabs of k up to the diagonal (causal) or from it
         * (anticausal), the diagonal slab last either way (its W tile has the rows of this
         * tile: the epilogues read x or dy there).  M = U V^T from the workspace (Mk) or formed
         * here; W's tile as it lies (wt[k][col]).  With Mcb and vector loads of W, each slab's M
         * and W are loaded while the previous slab's product runs.  dB and dC: once per block,
         * after the state of its last head, in the group's first slice (own_tokens). */
        if (by_heads && (hh + 1 < h + hpb || !own_tokens)) {
            PSSM_SYNC(); /* the next head's prep rewrites dtp, cs, seg */
            continue;
        }
        const int nslabs = causal ? r0 / SSDC_T + 1 : (e - r0) / SSDC_T + 1;
        const int kstep = causal ? SSDC_T : -SSDC_T, kfirst = causal ? 0 : r0 + (nslabs - 1) * SSDC_T;
        /* M^T: DB's dCB; DX's B C^T is the mirror above C B^T's diagonal (chunk_cb_) */
        const int mtrans = mode == PSSM_SSD_PROD_DB;
        const int64_t wrs = p.w.s[1];
        const PSSM_SSDC_ACT *Wc = W + c0 * wrs + col0 * p.w.s[3];
        /* ahead: W's tiles by asynchronous copies into wt and vt in turn (vt is free once the
         * state's product is done), starting where the last slab lands in wt; M one slab ahead
         * in registers */
        const int ahead = PSSM_SSDC_PROD_AHEAD && Mcb && p.w.vec;
        PSSM_SSDC_SMEM *wtile = ahead && mode != PSSM_SSD_PROD_FWD && nslabs % 2 == 0 ? vt : wt;
        if (ahead) {
            PSSM_SSDC_FN(pssm_ssdc_cb_load_)(mk, Mcb, Q, r0, kfirst, mtrans);
            PSSM_SSDC_FN(pssm_ssdc_copy_async_)(wtile, Wc + kfirst * wrs, wrs, q - kfirst, ccols);
        }
        for (int k0 = kfirst; causal ? k0 <= r0 : k0 >= r0; k0 += kstep) {
            const int krows = q - k0 < SSDC_T ? q - k0 : SSDC_T; /* rows k of this slab */
            if (Mk) {
                if (!ahead)
                    PSSM_SSDC_FN(pssm_ssdc_cb_load_)(mk, Mk, Q, r0, k0, mtrans);
            } else {
                PSSM_UNROLL
                for (int ti = 0; ti < SSDC_TPW; ti++)
                    PSSM_UNROLL
                    for (int i = 0; i < PSSM_MMA_ACC; i++)
                        mk[ti][i] = 0.0f;
                for (int64_t i0 = 0; i0 < p.inner; i0 += SSDC_T) {
                    const int icols = (int)(p.inner - i0 < SSDC_T ? p.inner - i0 : SSDC_T);
                    if (!u_once)
                        PSSM_SSDC_FN(pssm_ssdc_tile_)(ut,
                                                      U + (c0 + r0) * p.u.s[1] + i0 * p.u.s[3],
                                                      p.u.s[1], p.u.s[3], rrows, icols, p.u.vec,
                                                      0);
                    PSSM_SSDC_FN(pssm_ssdc_tile_)(vt, V + (c0 + k0) * p.v.s[1] + i0 * p.v.s[3],
                                                  p.v.s[1], p.v.s[3], krows, icols, p.v.vec,
                                                  0);
                    PSSM_SYNC();
                    PSSM_SSDC_FN(pssm_ssdc_slab_mma_)(mk, ut, 0, vt, 0);
                    PSSM_SYNC();
                }
            }
            /* the weights and the reach mask: computed for every pair and then selected, with
             * no branch (an exp of a masked pair may overflow: the select drops it); adjacent
             * columns stored as one word where the arrangement pairs them */
            PSSM_UNROLL
            for (int ti = 0; ti < SSDC_TPW; ti++) {
                const int tile = warp * SSDC_TPW + ti, tm = tile / SSDC_SUB, tn = tile % SSDC_SUB;
                float mv[PSSM_MMA_ACC];
                PSSM_UNROLL
                for (int i = 0; i < PSSM_MMA_ACC; i++) {
                    const int r = r0 + tm * 16 + pssm_mma_row(lane, i);
                    const int k = k0 + tn * 16 + pssm_mma_col(lane, i);
                    const float csr = cs[r], csk = cs[k];
                    const int reach = (causal ? k <= r && r < q : r <= k && k < q) && seg[k] == seg[r];
                    const float wgt = causal ? dtp[k] : 1.0f;
                    const float m = mk[ti][i] * pssm_expf(causal ? csr - csk : csk - csr) * wgt;
                    mv[i] = by_heads ? mk[ti][i] : reach ? m : 0.0f; /* dCB: weighted */
                }
                PSSM_UNROLL
                for (int i = 0; i < PSSM_MMA_ACC; i += 1 + PSSM_MMA_PAIRS) {
                    PSSM_SSDC_SMEM *const at = ms + (tm * 16 + pssm_mma_row(lane, i)) * SSDC_LDS +
                                               tn * 16 + pssm_mma_col(lane, i);
                    if (PSSM_MMA_PAIRS)
                        PSSM_SSDC_FN(pssm_ssdc_put2_)(at, mv[i], mv[i + PSSM_MMA_PAIRS]);
                    else
                        *at = PSSM_SSDC_TO_SMEM(mv[i]);
                }
            }
            if (ahead)
                PSSM_COPY_WAIT_ALL();
            else
                PSSM_SSDC_FN(pssm_ssdc_tile_)(wt, Wc + k0 * wrs, wrs, p.w.s[3], krows, ccols,
                                              p.w.vec, 0);
            PSSM_SYNC();
            PSSM_SSDC_SMEM *const wcur = wtile;
            const int kn = k0 + kstep;
            if (ahead && (causal ? kn <= r0 : kn >= r0)) { /* the next slab's loads, in flight */
                wtile = wtile == wt ? vt : wt; /* the other buffer: read by no warp since the
                                                last barrier */
                PSSM_SSDC_FN(pssm_ssdc_cb_load_)(mk, Mcb, Q, r0, kn, mtrans);
                PSSM_SSDC_FN(pssm_ssdc_copy_async_)(wtile, Wc + kn * wrs, wrs, q - kn, ccols);
            } else if (fast_y) { /* the last slab: z into the other buffer, for the epilogue */
                PSSM_SSDC_FN(pssm_ssdc_copy_async_)(vt, SSDC_OPND(p.zo, h, 0) +
                                                            (c0 + r0) * p.zo.s[1] + col0,
                                                    p.zo.s[1], rrows, ccols);
            }
            /* A = ms[r][k], B[k][col] = W[k][col] */
            PSSM_SSDC_FN(pssm_ssdc_slab_mma_)(acc, ms, 0, wcur, 1);
            PSSM_SYNC();
        }
        wlast = wtile;

        PSSM_SYNC(); /* the next head's prep rewrites dtp, cs, seg */
    } /* the heads */

    if (fast_epi) { /* in pairs of adjacent columns where the arrangement has them */
        PSSM_UNROLL
        for (int ti = 0; ti < SSDC_TPW; ti++) {
            const int tile = warp * SSDC_TPW + ti, tm = tile / SSDC_SUB, tn = tile % SSDC_SUB;
            PSSM_UNROLL
            for (int i = 0; i < PSSM_MMA_ACC; i += 1 + PSSM_MMA_PAIRS) {
                const int rr = tm * 16 + pssm_mma_row(lane, i), cc = tn * 16 + pssm_mma_col(lane, i);
                PSSM_SSDC_FN(pssm_ssdc_out_pair_)(acc[ti][i], acc[ti][i + PSSM_MMA_PAIRS],
                                                  rr * SSDC_LDS + cc, cc, wlast, dcol, p.D != 0,
                                                  z != 0, ut, ms, 0, ms);
            }
        }
        PSSM_SYNC();
        PSSM_SSDC_FN(pssm_ssdc_store_)((PSSM_SSDC_ACT *)p.oo.ptr + b * p.oo.s[0] +
                                           (c0 + r0) * p.oo.s[1] + h * p.oo.s[2] + col0,
                                       p.oo.s[1], ms, rrows, ccols);
        return;
    }

    if (fast_y) { /* (with z): dz and dy, from dout in ut, z in vt and x in wlast */
        PSSM_COPY_WAIT_ALL();
        PSSM_SYNC();
        PSSM_UNROLL
        for (int ti = 0; ti < SSDC_TPW; ti++) {
            const int tile = warp * SSDC_TPW + ti, tm = tile / SSDC_SUB, tn = tile % SSDC_SUB;
            PSSM_UNROLL
            for (int i = 0; i < PSSM_MMA_ACC; i += 1 + PSSM_MMA_PAIRS) {
                const int rr = tm * 16 + pssm_mma_row(lane, i), cc = tn * 16 + pssm_mma_col(lane, i);
                /* dy over dout in ut, dz into ms (each element read and written by this thread
                 * alone) */
                PSSM_SSDC_FN(pssm_ssdc_dz_pair_)(acc[ti][i], acc[ti][i + PSSM_MMA_PAIRS],
                                                 rr * SSDC_LDS + cc, cc, wlast, dcol, p.D != 0, ut,
                                                 vt, ms);
            }
        }
        PSSM_SYNC();
        PSSM_SSDC_FN(pssm_ssdc_store_)((PSSM_SSDC_ACT *)p.yo.ptr + b * p.yo.s[0] +
                                           (c0 + r0) * p.yo.s[1] + h * p.yo.s[2] + col0,
                                       p.yo.s[1], ut, rrows, ccols);
        if (p.dz)
            PSSM_SSDC_FN(pssm_ssdc_store_)((PSSM_SSDC_ACT *)p.oo.ptr + b * p.oo.s[0] +
                                               (c0 + r0) * p.oo.s[1] + h * p.oo.s[2] + col0,
                                           p.oo.s[1], ms, rrows, ccols);
        return;
    }
    if (fast_dx) { /* dx from dy in wlast, and x in ut for the row sums */
        float rowv[SSDC_TPW][PSSM_MMA_ACC];
        PSSM_UNROLL
        for (int ti = 0; ti < SSDC_TPW; ti++) {
            const int tile = warp * SSDC_TPW + ti, tm = tile / SSDC_SUB, tn = tile % SSDC_SUB;
            PSSM_UNROLL
            for (int i = 0; i < PSSM_MMA_ACC; i += 1 + PSSM_MMA_PAIRS) {
                const int rr = tm * 16 + pssm_mma_row(lane, i), cc = tn * 16 + pssm_mma_col(lane, i);
                const int at = rr * SSDC_LDS + cc, j = i + PSSM_MMA_PAIRS; /* j: the pair's second */
                const float v[2] = {acc[ti][i], acc[ti][j]}, dtr = dtp[r0 + rr];
                float dyv[2], xv[2], dx[2];
                if (PSSM_MMA_PAIRS) {
                    PSSM_SSDC_FN(pssm_ssdc_get2_)(wlast + at, &dyv[0], &dyv[1]);
                    PSSM_SSDC_FN(pssm_ssdc_get2_)(ut + at, &xv[0], &xv[1]);
                } else {
                    dyv[0] = dyv[1] = PSSM_SSDC_LD(wlast[at]);
                    xv[0] = xv[1] = PSSM_SSDC_LD(ut[at]);
                }
                PSSM_UNROLL
                for (int k = 0; k < 2; k++)
                    dx[k] = dtr * v[k] + (p.D ? dcol[cc + (PSSM_MMA_PAIRS ? k : 0)] * dyv[k] : 0.0f);
                if (PSSM_MMA_PAIRS)
                    PSSM_SSDC_FN(pssm_ssdc_put2_)(ms + at, dx[0], dx[1]);
                else
                    ms[at] = PSSM_SSDC_TO_SMEM(dx[0]);
                /* (zero past the tile: the copies fill x with zeros there) */
                rowv[ti][i] = xv[0] * v[0];
                rowv[ti][j] = xv[1] * v[1];
            }
        }
        PSSM_SYNC(); /* x read: the row buffer goes over ut and vt */
        PSSM_SSDC_FN(pssm_ssdc_store_)((PSSM_SSDC_ACT *)p.oo.ptr + b * p.oo.s[0] +
                                           (c0 + r0) * p.oo.s[1] + h * p.oo.s[2] + col0,
                                       p.oo.s[1], ms, rrows, ccols);
        PSSM_UNROLL
        for (int ti = 0; ti < SSDC_TPW; ti++) {
            const int tile = warp * SSDC_TPW + ti, tm = tile / SSDC_SUB, tn = tile % SSDC_SUB;
            PSSM_UNROLL
            for (int i = 0; i < PSSM_MMA_ACC; i++)
                rowbuf[(tm * 16 + pssm_mma_row(lane, i)) * SSDC_RBP + tn * 16 +
                       pssm_mma_col(lane, i)] = rowv[ti][i];
        }
        PSSM_SSDC_FN(pssm_ssdc_row_sums_)(rowbuf, rrows, p.part_x,
                                          (bh * p.coltiles + PSSM_BLOCK_Y) * L + c0 + r0);
        return;
    }

    /* the epilogue of the mode; DX leaves a value per element for the row sums */
    const int rows_summed = mode == PSSM_SSD_PROD_DX;
    PSSM_UNROLL
    for (int ti = 0; ti < SSDC_TPW; ti++) {
        const int tile = warp * SSDC_TPW + ti, tm = tile / SSDC_SUB, tn = tile % SSDC_SUB;
        PSSM_UNROLL
        for (int i = 0; i < PSSM_MMA_ACC; i++) {
            const int rr = tm * 16 + pssm_mma_row(lane, i), cc = tn * 16 + pssm_mma_col(lane, i);
            const int64_t t = c0 + r0 + rr, col = col0 + cc;
            const int in = rr < rrows && cc < ccols;
            const float v = acc[ti][i];
            float rowv = 0.0f;
            if (in) {
                const int by_p = mode <= PSSM_SSD_PROD_DX; /* the columns are p, not n */
                const float Dv = p.D && by_p ? p.D[h * p.D_s[0] + col * p.D_s[1]] : 0.0f;
                const int64_t zo = b * p.z_s[0] + t * p.z_s[1] + h * p.z_s[2] + col * p.z_s[3];
                if (mode == PSSM_SSD_PROD_FWD) {
                    float o = v;
                    if (p.D)
                        o += Dv * PSSM_SSDC_LD(x[t * p.x_s[1] + col * p.x_s[3]]);
                    if (p.ys.ptr) /* y before the gate, for a backward */
                        ((PSSM_SSDC_ACT *)p.ys.ptr)[b * p.ys.s[0] + t * p.ys.s[1] +
                                                    h * p.ys.s[2] + col * p.ys.s[3]] =
                            PSSM_SSDC_ST(o);
                    if (z)
                        o *= pssm_silu_fast(PSSM_SSDC_LD(z[zo]));
                    ((PSSM_SSDC_ACT *)p.out)[b * p.out_s[0] + t * p.out_s[1] + h * p.out_s[2] +
                                             col * p.out_s[3]] = PSSM_SSDC_ST(o);
                } else if (mode == PSSM_SSD_PROD_Y) {
                    const float dout = PSSM_SSDC_LD(((const PSSM_SSDC_ACT *)p.dout)[
                        b * p.dout_s[0] + t * p.dout_s[1] + h * p.dout_s[2] + col * p.dout_s[3]]);
                    float dy = dout;
                    if (z) {
                        const float y = v + (p.D ? Dv * PSSM_SSDC_LD(x[t * p.x_s[1] +
                                                                      col * p.x_s[3]])
                                                 : 0.0f);
                        const float zv = PSSM_SSDC_LD(z[zo]), sg = pssm_sigmoid_fast(zv);
                        dy = dout * zv * sg;
                        if (p.dz) /* optional: z's gradient may be unwanted (found by fuzz_api) */
                            ((PSSM_SSDC_ACT *)p.dz)[b * p.dz_s[0] + t * p.dz_s[1] +
                                                    h * p.dz_s[2] + col * p.dz_s[3]] =
                                PSSM_SSDC_ST(dout * y * sg * (1.0f + zv * (1.0f - sg)));
                        ((PSSM_SSDC_ACT *)p.dy)[b * p.dy_s[0] + t * p.dy_s[1] + h * p.dy_s[2] +
                                                col * p.dy_s[3]] = PSSM_SSDC_ST(dy);
                    }
                } else if (mode == PSSM_SSD_PROD_DX) {
                    const float dy = PSSM_SSDC_LD(((const PSSM_SSDC_ACT *)p.dy)[
                        b * p.dy_s[0] + t * p.dy_s[1] + h * p.dy_s[2] + col * p.dy_s[3]]);
                    ((PSSM_SSDC_ACT *)p.dx)[b * p.dx_s[0] + t * p.dx_s[1] + h * p.dx_s[2] +
                                            col * p.dx_s[3]] =
                        PSSM_SSDC_ST(dtp[r0 + rr] * v + Dv * dy);
                    rowv = PSSM_SSDC_LD(x[t * p.x_s[1] + col * p.x_s[3]]) * v;
                } else { /* this slice's heads' share of dB or dC */
                    float *dst = mode == PSSM_SSD_PROD_DB ? p.dBh : p.dCh;
                    dst[((b * L + t) * slices + slice) * N + col] = v;
                }
            }
            if (rows_summed)
                rowbuf[rr * SSDC_RBP + cc] = rowv;
        }
    }
    if (rows_summed)
        PSSM_SSDC_FN(pssm_ssdc_row_sums_)(rowbuf, rrows, p.part_x,
                                          (bh * p.coltiles + PSSM_BLOCK_Y) * L + c0 + r0);
}
#undef PSSM_SSDC_PROD_NAME
#undef PSSM_SSDC_PROD_MODE
#undef PSSM_SSDC_PROD_AHEAD
