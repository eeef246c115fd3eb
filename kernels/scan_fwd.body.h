/*
 * scan_fwd.body.h - the selective_scan_fwd kernel, included by scan_kernels.h once per dtype
 * (the macros of scan_act.body.h) and states-per-lane count PSSM_SCAN_NS (a multiple of 4).
 *
 * A lane of team rank r holds states n = r * NS + k, k < NS.  States past N (padding up to
 * tpc * NS) have A = B = C = 0 and stay 0.
 */
#define PSSM_SCAN_SFX PSSM_SCAN_CAT(PSSM_SCAN_CAT(PSSM_SCAN_NS, _), PSSM_SCAN_DT)
#define PSSM_SCAN_KFN(name) PSSM_SCAN_CAT(name, PSSM_SCAN_SFX)
#define PSSM_SCAN_NQ (PSSM_SCAN_NS / 4)

/*
 * One block's whole run.  `fast` (a literal) is the Mamba case, B and C both variable; the
 * other path reads p.var_B / p.var_C and keeps a constant operand in registers.  `with_y` (a
 * literal) 0 is the states-only mode of the backward's checkpoints (pssm_scan_states_n*): no
 * output, so C is never read and no step's sum over the states is formed.
 */
PSSM_DEVICE void PSSM_SCAN_KFN(pssm_scan_fwd_run_n)(const pssm_scan_fwd_params p, float *smem,
                                                   const int fast, const int with_y)
{
    const int vb = fast || p.var_B, vc = with_y && (fast || p.var_C);
    const int tpc = p.tpc;
    const int tid = PSSM_THREAD_X;
    const int rank = tid & (tpc - 1);
    const int cl = tid >> p.log2_tpc;
    const int cb = PSSM_BLOCKDIM_X >> p.log2_tpc;
    const int npad = 1 << p.log2_np;
    const int T = p.chunk;
    const int64_t L = p.seqlen;

    /* block -> (batch row, tile of channels, block of the tile); lane -> channel d */
    const int64_t per_row = p.tiles * p.blocks_per_tile;
    const int64_t b = PSSM_BLOCK_X / per_row;
    const int64_t rem = PSSM_BLOCK_X - b * per_row;
    const int64_t tile = rem / p.blocks_per_tile;
    const int64_t j0 = (rem - tile * p.blocks_per_tile) * cb;
    const int64_t d0 = tile * p.tile_dpg + j0;
    const int active = cl < p.tile_dpg - j0; /* lanes past the tile's end walk channel d0 */
    const int64_t d = d0 + (active ? cl : 0);

    /* this thread's share of the B/C tiles: 8 steps (group tq) of state tn, at `toff` in a row
     * of `rs` floats (see pssm_scan_tile_put_); a lane's own part of a row starts at rank * ls */
    const int tn = tid & (npad - 1);
    const int tq = tid >> p.log2_np;
    const int tile_on = tq < (T >> 3) && tn < p.dstate;
    const int ls = 2 * PSSM_SCAN_NS + 4;
    const int rs = tpc * ls;
    const int toff = (tn / PSSM_SCAN_NS) * ls + ((tn % PSSM_SCAN_NS) >> 2) * 8 + (tn & 3);
    const PSSM_SCAN_ACT *Bt = 0, *Ct = 0;
    if (vb)
        Bt = (const PSSM_SCAN_ACT *)p.Bm + b * p.B_s[0] + (d0 / p.B_dpg) * p.B_s[1] + tn * p.B_s[2];
    if (vc)
        Ct = (const PSSM_SCAN_ACT *)p.Cm + b * p.C_s[0] + (d0 / p.C_dpg) * p.C_s[1] + tn * p.C_s[2];
    const int tile_floats = T * rs; /* buffer k at smem + k tile_floats */

    /* registers: A * log2(e), the states, constant B / C */
    float a2[PSSM_SCAN_NS], xs[PSSM_SCAN_NS], bk[PSSM_SCAN_NS], ck[PSSM_SCAN_NS];
    for (int q = 0; q < PSSM_SCAN_NQ; ++q) {
        for (int e = 0; e < 4; ++e) {
            const int k = q * 4 + e;
            const int64_t n = (int64_t)(rank * PSSM_SCAN_NS + k);
            const int real = n < p.dstate;
            a2[k] = real ? p.A[d * p.A_s[0] + n * p.A_s[1]] * PSSM_LOG2E : 0.0f;
            xs[k] = real && p.x0 ? p.x0[b * p.x0_s[0] + d * p.x0_s[1] + n * p.x0_s[2]] : 0.0f;
            bk[k] = 0.0f;
            ck[k] = 0.0f;
            if (!fast && !vb && real)
                bk[k] = ((const float *)p.Bm)[d * p.B_s[0] + n * p.B_s[1]];
            if (with_y && !fast && !vc && real)
                ck[k] = ((const float *)p.Cm)[d * p.C_s[0] + n * p.C_s[1]];
        }
    }
    const float Dv = p.D ? p.D[d * p.D_s] : 0.0f;
    const float bias = p.delta_bias ? p.delta_bias[d * p.bias_s] : 0.0f;
    const PSSM_SCAN_ACT *urow = (const PSSM_SCAN_ACT *)p.u + b * p.u_s[0] + d * p.u_s[1];
    const PSSM_SCAN_ACT *drow =
        (const PSSM_SCAN_ACT *)p.delta + b * p.delta_s[0] + d * p.delta_s[1];
    const PSSM_SCAN_ACT *zrow =
        p.z ? (const PSSM_SCAN_ACT *)p.z + b * p.z_s[0] + d * p.z_s[1] : 0;
    PSSM_SCAN_ACT *orow =
        p.out ? (PSSM_SCAN_ACT *)p.out + b * p.out_s[0] + d * p.out_s[1] : 0;

    /* tile of chunk 0 into buffer 0; tile of chunk 1 and the first row group in flight */
    pssm_scan_grp pb = pssm_scan_grp_zero(), pc = pssm_scan_grp_zero();
    int64_t tt = (int64_t)tq * PSSM_SCAN_GROUP;
    if (vb && tile_on)
        pb = PSSM_SCAN_FN(pssm_scan_grp_load_)(Bt, p.B_s[3], tt, L - tt, p.B_vec);
    if (vc && tile_on)
        pc = PSSM_SCAN_FN(pssm_scan_grp_load_)(Ct, p.C_s[3], tt, L - tt, p.C_vec);
    if (vb && tq < (T >> 3))
        PSSM_SCAN_FN(pssm_scan_tile_put_)(smem, pb, tq, toff, rs);
    if (vc && tq < (T >> 3))
        PSSM_SCAN_FN(pssm_scan_tile_put_)(smem, pc, tq, toff + 4, rs);
    tt += T;
    if (vb && tile_on && tt < L)
        pb = PSSM_SCAN_FN(pssm_scan_grp_load_)(Bt, p.B_s[3], tt, L - tt, p.B_vec);
    if (vc && tile_on && tt < L)
        pc = PSSM_SCAN_FN(pssm_scan_grp_load_)(Ct, p.C_s[3], tt, L - tt, p.C_vec);
    /* Row groups in flight: g*1 for the next group, g*2 for the one after it (a group is
     * consumed two groups after its loads were issued, which covers DRAM latency with one warp
     * per scheduler). */
    pssm_scan_grp gu1 = PSSM_SCAN_FN(pssm_scan_grp_load_)(urow, p.u_s[2], 0, L, p.u_vec);
    pssm_scan_grp gd1 = PSSM_SCAN_FN(pssm_scan_grp_load_)(drow, p.delta_s[2], 0, L, p.delta_vec);
    pssm_scan_grp gz1 = pssm_scan_grp_zero(), gu2 = pssm_scan_grp_zero();
    pssm_scan_grp gd2 = pssm_scan_grp_zero(), gz2 = pssm_scan_grp_zero();
    if (zrow)
        gz1 = PSSM_SCAN_FN(pssm_scan_grp_load_)(zrow, p.z_s[2], 0, L, p.z_vec);
    if (PSSM_SCAN_GROUP < L) {
        const int64_t t = PSSM_SCAN_GROUP;
        gu2 = PSSM_SCAN_FN(pssm_scan_grp_load_)(urow, p.u_s[2], t, L - t, p.u_vec);
        gd2 = PSSM_SCAN_FN(pssm_scan_grp_load_)(drow, p.delta_s[2], t, L - t, p.delta_vec);
        if (zrow)
            gz2 = PSSM_SCAN_FN(pssm_scan_grp_load_)(zrow, p.z_s[2], t, L - t, p.z_vec);
    }
    PSSM_SYNC();

    int buf = 0;
    for (int64_t c0 = 0; c0 < L; c0 += T) {
        const float *tb = smem + buf * tile_floats + rank * ls;
        const int64_t cend = c0 + T < L ? c0 + T : L;
        for (int64_t t0 = c0; t0 < cend; t0 += PSSM_SCAN_GROUP) {
            const pssm_scan_grp cu = gu1, cd = gd1, cz = gz1;
            gu1 = gu2;
            gd1 = gd2;
            gz1 = gz2;
            const int64_t t2 = t0 + 2 * PSSM_SCAN_GROUP;
            if (t2 < L) {
                gu2 = PSSM_SCAN_FN(pssm_scan_grp_load_)(urow, p.u_s[2], t2, L - t2, p.u_vec);
                gd2 = PSSM_SCAN_FN(pssm_scan_grp_load_)(drow, p.delta_s[2], t2, L - t2,
                                                        p.delta_vec);
                if (zrow)
                    gz2 = PSSM_SCAN_FN(pssm_scan_grp_load_)(zrow, p.z_s[2], t2, L - t2, p.z_vec);
            }
            /* Steps of this group: >= 8 unless it is the last.  Steps past L run with dt = 0
             * and u = 0, which leaves the states exactly as they are (exp2(0) = 1, 0 * B = 0):
             * no per-step guard in the loop. */
            const int nv = L - t0 < PSSM_SCAN_GROUP ? (int)(L - t0) : PSSM_SCAN_GROUP;
            float uv[PSSM_SCAN_GROUP], dtv[PSSM_SCAN_GROUP], y[PSSM_SCAN_GROUP];
            for (int j = 0; j < PSSM_SCAN_GROUP; ++j) {
                uv[j] = PSSM_SCAN_GET(cu, j);
                dtv[j] = PSSM_SCAN_GET(cd, j) + bias;
            }
            /* One branch for the group's softplus, not one per step: a branch per step made
             * each step's exp -> log chain a basic block of its own, eight chains of latency in
             * a row with one warp a scheduler; in one block they overlap. */
            if (p.softplus) {
                for (int j = 0; j < PSSM_SCAN_GROUP; ++j)
                    dtv[j] = pssm_softplus_fast(dtv[j]);
            }
            for (int j = 0; j < PSSM_SCAN_GROUP; ++j)
                dtv[j] = j < nv ? dtv[j] : 0.0f;
            const float *row = tb + (t0 - c0) * rs; /* this lane's part of step t0's row */
            for (int j = 0; j < PSSM_SCAN_GROUP; ++j) {
                const float dt = dtv[j];
                const float dtu = dt * uv[j];
                float acc[4] = {0.0f, 0.0f, 0.0f, 0.0f};
                for (int q = 0; q < PSSM_SCAN_NQ; ++q) {
                    pssm_vec16 bq = {{0u, 0u, 0u, 0u}}, cq = {{0u, 0u, 0u, 0u}};
                    if (vb)
                        bq = *(const pssm_vec16 *)(row + q * 8);
                    if (vc)
                        cq = *(const pssm_vec16 *)(row + q * 8 + 4);
                    for (int e = 0; e < 4; ++e) {
                        const int k = q * 4 + e;
                        const float bv = vb ? pssm_as_float(bq.w[e]) : bk[k];
                        const float cv = vc ? pssm_as_float(cq.w[e]) : ck[k];
                        xs[k] = pssm_exp2f(dt * a2[k]) * xs[k] + dtu * bv;
                        if (with_y)
                            acc[e] += cv * xs[k];
                    }
                }
                y[j] = (acc[0] + acc[1]) + (acc[2] + acc[3]);
                row += rs;
            }
            if (with_y)
                pssm_scan_team_sums(y, PSSM_SCAN_GROUP, tpc);
            if (with_y && active && rank == 0 && orow) {
                pssm_scan_grp og = pssm_scan_grp_zero();
                for (int j = 0; j < PSSM_SCAN_GROUP; ++j) {
                    float o = y[j] + Dv * uv[j];
                    if (zrow)
                        o *= pssm_silu_fast(PSSM_SCAN_GET(cz, j));
                    og = PSSM_SCAN_SET(og, j, PSSM_SCAN_ST(o));
                }
                PSSM_SCAN_FN(pssm_scan_grp_store_)(orow, p.out_s[2], t0, nv, p.out_vec, og);
            }
        }
        /* the states after a checkpoint interval, but for the last (ck_interval is a multiple of
         * the chunk) */
        if (p.ck && active && c0 + T < L && (c0 + T) % p.ck_interval == 0) {
            float *ckr = p.ck + b * p.ck_s[0] + d * p.ck_s[1] +
                         ((c0 + T) / p.ck_interval - 1) * p.ck_s[2];
            for (int k = 0; k < PSSM_SCAN_NS; ++k) {
                const int64_t n = (int64_t)(rank * PSSM_SCAN_NS + k);
                if (n < p.dstate)
                    ckr[n * p.ck_s[3]] = xs[k];
            }
        }
        /* the next chunk's tile into the other buffer (whose readers all passed the barrier
         * that ended the previous chunk); the one after it in flight */
        if (c0 + T < L) {
            float *nb = smem + (buf ^ 1) * tile_floats;
            if (vb && tq < (T >> 3))
                PSSM_SCAN_FN(pssm_scan_tile_put_)(nb, pb, tq, toff, rs);
            if (vc && tq < (T >> 3))
                PSSM_SCAN_FN(pssm_scan_tile_put_)(nb, pc, tq, toff + 4, rs);
            tt += T;
            if (vb && tile_on && tt < L)
                pb = PSSM_SCAN_FN(pssm_scan_grp_load_)(Bt, p.B_s[3], tt, L - tt, p.B_vec);
            if (vc && tile_on && tt < L)
                pc = PSSM_SCAN_FN(pssm_scan_grp_load_)(Ct, p.C_s[3], tt, L - tt, p.C_vec);
        }
        PSSM_SYNC();
        buf ^= 1;
    }

    if (p.xL && active) {
        for (int q = 0; q < PSSM_SCAN_NQ; ++q) {
            for (int e = 0; e < 4; ++e) {
                const int64_t n = (int64_t)(rank * PSSM_SCAN_NS + q * 4 + e);
                if (n < p.dstate)
                    p.xL[b * p.xL_s[0] + d * p.xL_s[1] + n * p.xL_s[2]] = xs[q * 4 + e];
            }
        }
    }
}

PSSM_KERNEL_BOUNDED(PSSM_SCAN_KFN(pssm_scan_fwd_n), pssm_scan_fwd_params, p,
                    PSSM_SCAN_MAX_THREADS)
{
    PSSM_SHARED(float, smem, PSSM_SCAN_SMEM_FLOATS);
    if (p.var_B && p.var_C)
        PSSM_SCAN_KFN(pssm_scan_fwd_run_n)(p, smem, 1, 1);
    else
        PSSM_SCAN_KFN(pssm_scan_fwd_run_n)(p, smem, 0, 1);
}

/* The states alone, into p.ck (and p.xL): the backward's checkpoints where the caller kept
 * none.  An entry of its own, so that the output's registers are not its allocation. */
PSSM_KERNEL_BOUNDED(PSSM_SCAN_KFN(pssm_scan_states_n), pssm_scan_fwd_params, p,
                    PSSM_SCAN_MAX_THREADS)
{
    PSSM_SHARED(float, smem, PSSM_SCAN_SMEM_FLOATS);
    if (p.var_B)
        PSSM_SCAN_KFN(pssm_scan_fwd_run_n)(p, smem, 1, 0);
    else
        PSSM_SCAN_KFN(pssm_scan_fwd_run_n)(p, smem, 0, 0);
}

#undef PSSM_SCAN_SFX
#undef PSSM_SCAN_KFN
#undef PSSM_SCAN_NQ
