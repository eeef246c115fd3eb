/*
 * scan_bwd.body.h - the selective_scan_bwd kernel, included by scan_dtype.stamp.h once per
 * dtype (the macros of scan_act.body.h) and states-per-lane count PSSM_SCAN_NS (a multiple of 4).
 * kernels/scan_params.h (pssm_scan_bwd_params) describes the mapping; the math, per row and
 * state n, with g_t = dout_t and h_t = dLoss/dx_t:
 *   dy_t = z ? g_t * silu(z_t) : g_t        dz_t = g_t * y_t * silu'(z_t)
 *   h_t  = dy_t * C_t + a_{t+1} * h_{t+1}   (h_{L-1} = dfinal + dy_{L-1} * C_{L-1})
 *   dC_t += dy_t * x_t      dB_t += h_t * dt_t * u_t      du_t = dy_t * D + dt_t * sum_n h_t B_t
 *   ddt_t = sum_n h_t (A a_t x_{t-1} + B_t u_t)           dA += h_t dt_t a_t x_{t-1}
 * with a_t x_{t-1} = x_t - dt_t u_t B_t (no division), and dinitial = a_0 h_0.
 *
 * Steps past L run with dt = u = dout = 0: the state and h pass through unchanged and every
 * contribution is 0, so the group loops have no per-step guard (only the stores do).
 */
#define PSSM_SCAN_BSFX PSSM_SCAN_CAT(PSSM_SCAN_CAT(PSSM_SCAN_NS, _), PSSM_SCAN_DT)
#define PSSM_SCAN_BKFN(name) PSSM_SCAN_CAT(name, PSSM_SCAN_BSFX)
#define PSSM_SCAN_BG PSSM_SCAN_GROUP

/* This thread's row of a tile of B and C for the 8 steps from t0 (rows i = tid, tid + threads,
 * ...; row i is kind i / npad (0: B, 1: C) and state i % npad), as raw storage: loaded early,
 * put into shared memory later (tile_put_).  States past N and a constant operand give zeros. */
PSSM_DEVICE pssm_scan_grp PSSM_SCAN_BKFN(pssm_scan_bwd_row_)(const pssm_scan_bwd_params p, int i,
                                                            int64_t b, int64_t gB, int64_t gC,
                                                            int64_t t0, int npad)
{
    const int kind = i / npad, n = i - kind * npad;
    const int var = kind ? p.var_C : p.var_B;
    pssm_scan_grp g = pssm_scan_grp_zero();
    if (var && n < p.dstate && t0 < p.seqlen) {
        /* scalars picked one by one: a pointer into the parameter struct would move it to
         * local memory */
        const int64_t sb = kind ? p.C_s[0] : p.B_s[0], sg = kind ? p.C_s[1] : p.B_s[1];
        const int64_t sn = kind ? p.C_s[2] : p.B_s[2], st = kind ? p.C_s[3] : p.B_s[3];
        const PSSM_SCAN_ACT *row = (const PSSM_SCAN_ACT *)(kind ? p.Cm : p.Bm) + b * sb +
                                   (kind ? gC : gB) * sg + n * sn;
        g = PSSM_SCAN_FN(pssm_scan_grp_load_)(row, st, t0, p.seqlen - t0,
                                              kind ? p.C_vec : p.B_vec);
    }
    return g;
}

/* Row i of a tile into buffer tb: tb[(kind * 8 + j) * npad + n]. */
PSSM_DEVICE void PSSM_SCAN_BKFN(pssm_scan_bwd_put_)(float *tb, int i, int npad, pssm_scan_grp g)
{
    const int kind = i / npad, n = i - kind * npad;
    float *dst = tb + kind * PSSM_SCAN_BG * npad + n;
    PSSM_UNROLL
    for (int j = 0; j < PSSM_SCAN_BG; ++j)
        dst[j * npad] = PSSM_SCAN_GET(g, j);
}

/*
 * The block's sums over its channels of one group's contributions to a variable dB (kind 0)
 * and dC (kind 1), st[((j*2 + kind)*cb + c)*row + n] for steps t0 + j, into one partial each:
 * work items (j, kind, quad of 4 states), `tpi` adjacent threads an item, each adding every
 * tpi-th channel, then a sum over the tpi lanes: a fixed order.  Called by the whole block.
 */
PSSM_DEVICE void PSSM_SCAN_BKFN(pssm_scan_bwd_stage_)(const pssm_scan_bwd_params p,
                                                     const float *st, int64_t t0, int64_t b,
                                                     int64_t kbB, int64_t kbC, int64_t gB,
                                                     int64_t gC, int npad, int cb)
{
    const int threads = PSSM_BLOCKDIM_X, tid = PSSM_THREAD_X, quads = npad >> 2;
    const int items = PSSM_SCAN_BG * 2 * quads;
    int tpi = threads >= items ? threads / items : 1; /* powers of two */
    tpi = tpi > PSSM_WARP_SIZE ? PSSM_WARP_SIZE : tpi;  /* a team sum stays inside a warp */
    const int row = p.stage_row;
    for (int base = 0; base < items; base += threads / tpi) { /* uniform over the block */
        const int item = base + tid / tpi, part = tid & (tpi - 1);
        const int j = item / (2 * quads), kind = (item / quads) & 1, q = item % quads;
        const int on = item < items && (kind ? p.var_C : p.var_B);
        float acc[4] = {0.0f, 0.0f, 0.0f, 0.0f};
        if (on) {
            const float *src = st + ((j * 2 + kind) * cb + part) * row + 4 * q;
            for (int c = part; c < cb; c += tpi, src += tpi * row) {
                const pssm_vec16 v = *(const pssm_vec16 *)src;
                PSSM_UNROLL
                for (int e = 0; e < 4; ++e)
                    acc[e] += pssm_as_float(v.w[e]);
            }
        }
        pssm_scan_team_sums(acc, 4, tpi); /* every lane: tpi is uniform */
        const int64_t t = t0 + j;
        if (on && part == 0 && t < p.seqlen) {
            float *dst = kind ? p.part_C : p.part_B;
            const int64_t G = kind ? p.C_groups : p.B_groups, g = kind ? gC : gB;
            const int64_t kb = kind ? kbC : kbB;
            dst += (((kb * p.batch + b) * G + g) * p.dstate + 4 * q) * p.win_pad + t - p.win_lo;
            PSSM_UNROLL
            for (int e = 0; e < 4; ++e)
                if (4 * q + e < p.dstate)
                    dst[e * p.win_pad] = acc[e];
        }
    }
}

/* This lane's NS values of a tile row (16-byte aligned: rows are npad floats, npad and the
 * lane's offset multiples of 4) as 16-byte loads; a constant operand's registers otherwise. */
PSSM_DEVICE void PSSM_SCAN_BKFN(pssm_scan_bwd_lane_)(const float *src, int var, const float *cst,
                                                    float *dst)
{
    if (var) {
        PSSM_UNROLL
        for (int q = 0; q < PSSM_SCAN_NS / 4; ++q) {
            const pssm_vec16 v = *(const pssm_vec16 *)(src + 4 * q);
            PSSM_UNROLL
            for (int e = 0; e < 4; ++e)
                dst[4 * q + e] = pssm_as_float(v.w[e]);
        }
    } else {
        PSSM_UNROLL
        for (int k = 0; k < PSSM_SCAN_NS; ++k)
            dst[k] = cst[k];
    }
}

/* The rows of one group (8 steps) of a channel: u and delta, and for the backward pass dout, z. */
typedef struct PSSM_SCAN_BKFN(pssm_scan_bwd_rows_) {
    pssm_scan_grp u, delta, dout, z;
} PSSM_SCAN_BKFN(pssm_scan_bwd_rows_);

/*
 * One block's whole run over its window.  `fast` (a literal) is the Mamba case, B and C both
 * variable: the compiler then drops the constant operands' registers and selects; the other
 * path reads p.var_B / p.var_C.
 */
PSSM_DEVICE void PSSM_SCAN_BKFN(pssm_scan_bwd_run_n)(const pssm_scan_bwd_params p, float *smem,
                                                    const int fast)
{
    const int vb = fast || p.var_B, vc = fast || p.var_C;
    const int tpc = p.tpc;
    const int tid = PSSM_THREAD_X, threads = PSSM_BLOCKDIM_X;
    const int rank = tid & (tpc - 1);
    const int cl = tid >> p.log2_tpc;
    const int cb = threads >> p.log2_tpc;
    const int npad = tpc * PSSM_SCAN_NS;
    const int64_t L = p.seqlen, N = p.dstate;
    const int var = vb || vc;

    /* block -> (batch row, tile, block of the tile), as in the forward */
    const int64_t per_row = p.tiles * p.blocks_per_tile;
    const int64_t b = PSSM_BLOCK_X / per_row;
    const int64_t rem = PSSM_BLOCK_X - b * per_row;
    const int64_t tile = rem / p.blocks_per_tile;
    const int64_t bt = rem - tile * p.blocks_per_tile;
    const int64_t j0 = bt * cb;
    const int64_t d0 = tile * p.tile_dpg + j0;
    const int active = cl < p.tile_dpg - j0; /* lanes past the tile's end walk channel d0 */
    const int64_t d = d0 + (active ? cl : 0);
    const int64_t gB = vb ? d0 / p.B_dpg : 0, gC = vc ? d0 / p.C_dpg : 0;
    /* this block's index among the blocks of its B (C) group */
    const int64_t kbB = vb ? (tile - gB * (p.B_dpg / p.tile_dpg)) * p.blocks_per_tile + bt : 0;
    const int64_t kbC = vc ? (tile - gC * (p.C_dpg / p.tile_dpg)) * p.blocks_per_tile + bt : 0;

    /* shared memory: tile_buffers tile buffers, then the stage of one group */
    float *tiles = smem;
    const int tile_floats = 2 * PSSM_SCAN_BG * npad;
    float *stage = smem + p.tile_buffers * tile_floats;
    /* the window: a later one left h and the sums over time behind */
    const int64_t wlo = p.win_lo, whi = p.win_hi;
    const int resume = whi < L;
    const int64_t cidx = (b * p.dim + d) * N; /* this channel's (b, d, n = 0) */
    /* the tile row this thread moves (a prefetch when every row has a thread of its own) */
    const int tile_rows = 2 * npad, own_row = tid < tile_rows;
    const int prefetch_tile = tile_rows <= threads;

    float a2[PSSM_SCAN_NS], h[PSSM_SCAN_NS], dAa[PSSM_SCAN_NS];
    float bk[PSSM_SCAN_NS], ck[PSSM_SCAN_NS], dBk[PSSM_SCAN_NS], dCk[PSSM_SCAN_NS];
    PSSM_UNROLL
    for (int k = 0; k < PSSM_SCAN_NS; ++k) {
        const int64_t n = (int64_t)(rank * PSSM_SCAN_NS + k);
        const int real = n < N;
        a2[k] = real ? p.A[d * p.A_s[0] + n * p.A_s[1]] * PSSM_LOG2E : 0.0f;
        if (resume)
            h[k] = real ? p.carry_h[cidx + n] : 0.0f;
        else
            h[k] = real && p.dfinal ? p.dfinal[b * p.df_s[0] + d * p.df_s[1] + n * p.df_s[2]] : 0.0f;
        bk[k] = !vb && real ? ((const float *)p.Bm)[d * p.B_s[0] + n * p.B_s[1]] : 0.0f;
        ck[k] = !vc && real ? ((const float *)p.Cm)[d * p.C_s[0] + n * p.C_s[1]] : 0.0f;
        dAa[k] = resume && real ? p.part_A[cidx + n] : 0.0f;
        dBk[k] = resume && real && !vb ? p.part_B[cidx + n] : 0.0f;
        dCk[k] = resume && real && !vc ? p.part_C[cidx + n] : 0.0f;
    }
    const float Dv = p.D ? p.D[d * p.D_s] : 0.0f;
    const float bias = p.delta_bias ? p.delta_bias[d * p.bias_s] : 0.0f;
    float dD_acc = resume && p.part_D ? p.part_D[b * p.dim + d] : 0.0f;
    float dbias_acc = resume && p.part_bias ? p.part_bias[b * p.dim + d] : 0.0f;

    const PSSM_SCAN_ACT *urow = (const PSSM_SCAN_ACT *)p.u + b * p.u_s[0] + d * p.u_s[1];
    const PSSM_SCAN_ACT *drow =
        (const PSSM_SCAN_ACT *)p.delta + b * p.delta_s[0] + d * p.delta_s[1];
    const PSSM_SCAN_ACT *grow = (const PSSM_SCAN_ACT *)p.dout + b * p.dout_s[0] + d * p.dout_s[1];
    const PSSM_SCAN_ACT *zrow =
        p.z ? (const PSSM_SCAN_ACT *)p.z + b * p.z_s[0] + d * p.z_s[1] : 0;
    PSSM_SCAN_ACT *durow = (PSSM_SCAN_ACT *)p.du + b * p.du_s[0] + d * p.du_s[1];
    PSSM_SCAN_ACT *ddrow =
        (PSSM_SCAN_ACT *)p.ddelta + b * p.ddelta_s[0] + d * p.ddelta_s[1];
    PSSM_SCAN_ACT *dzrow = p.dz ? (PSSM_SCAN_ACT *)p.dz + b * p.dz_s[0] + d * p.dz_s[1] : 0;

    /* this thread's group states: gs[(group * NS + k) * threads + tid] of the block's region */
    const int64_t groups_per_chunk = p.ck_interval / PSSM_SCAN_BG;
    float *gsb = p.gs + PSSM_BLOCK_X * groups_per_chunk * PSSM_SCAN_NS * threads + tid;

    /*
     * The groups in the order they are walked: per chunk c of the window (last first) pass 1
     * over groups 0 .. ng-2, then pass 2 over ng-1 .. 0.  Each group's rows (and tile row) are
     * loaded while the group before it in that order is computed.
     */
    const int64_t c_lo = wlo / p.ck_interval, c_hi = (whi + p.ck_interval - 1) / p.ck_interval;
    int tbuf = 0;
    PSSM_SCAN_BKFN(pssm_scan_bwd_rows_) rw;
    pssm_scan_grp trow = pssm_scan_grp_zero();
    {
        const int64_t c = c_hi - 1, tb0 = c * p.ck_interval;
        const int64_t ng = (whi - tb0 + PSSM_SCAN_BG - 1) / PSSM_SCAN_BG;
        const int64_t t0 = ng > 1 ? tb0 : tb0 + (ng - 1) * PSSM_SCAN_BG; /* the first group */
        rw.u = PSSM_SCAN_FN(pssm_scan_grp_load_)(urow, p.u_s[2], t0, L - t0, p.u_vec);
        rw.delta = PSSM_SCAN_FN(pssm_scan_grp_load_)(drow, p.delta_s[2], t0, L - t0, p.delta_vec);
        rw.dout = pssm_scan_grp_zero();
        rw.z = pssm_scan_grp_zero();
        if (ng == 1) {
            rw.dout = PSSM_SCAN_FN(pssm_scan_grp_load_)(grow, p.dout_s[2], t0, L - t0, p.dout_vec);
            if (zrow)
                rw.z = PSSM_SCAN_FN(pssm_scan_grp_load_)(zrow, p.z_s[2], t0, L - t0, p.z_vec);
        }
        if (var && prefetch_tile && own_row)
            trow = PSSM_SCAN_BKFN(pssm_scan_bwd_row_)(p, tid, b, gB, gC, t0, npad);
    }

    for (int64_t c = c_hi - 1; c >= c_lo; --c) { /* uniform over the block */
        const int64_t tb0 = c * p.ck_interval;
        const int64_t tb1 = tb0 + p.ck_interval < whi ? tb0 + p.ck_interval : whi;
        const int64_t ng = (tb1 - tb0 + PSSM_SCAN_BG - 1) / PSSM_SCAN_BG;
        float x[PSSM_SCAN_NS];
        PSSM_UNROLL
        for (int k = 0; k < PSSM_SCAN_NS; ++k) {
            const int64_t n = (int64_t)(rank * PSSM_SCAN_NS + k);
            float v = 0.0f;
            if (n < N && c > 0)
                v = p.ck[b * p.ck_s[0] + d * p.ck_s[1] + (c - 1) * p.ck_s[2] + n * p.ck_s[3]];
            else if (n < N && p.x0)
                v = p.x0[b * p.x0_s[0] + d * p.x0_s[1] + n * p.x0_s[2]];
            x[k] = v;
        }

        /* groups 0 .. 2 ng - 2 of this chunk: pass 1 (g < ng - 1, forwards, keeping each group's
         * starting state), then pass 2 (group 2 ng - 2 - g, backwards) */
        for (int64_t gi = 0; gi < 2 * ng - 1; ++gi) {
            const int fwd = gi < ng - 1;
            const int64_t g = fwd ? gi : 2 * ng - 2 - gi;
            const int64_t t0 = tb0 + g * PSSM_SCAN_BG;
            const int nv = L - t0 < PSSM_SCAN_BG ? (int)(L - t0) : PSSM_SCAN_BG;
            if (fwd) {
                PSSM_UNROLL
                for (int k = 0; k < PSSM_SCAN_NS; ++k)
                    gsb[(g * PSSM_SCAN_NS + k) * threads] = x[k];
            }
            /* this group's tile into shared memory, the next group's loads in flight */
            const float *tb = tiles + tbuf * tile_floats;
            if (var) {
                if (p.tile_buffers == 1)
                    PSSM_SYNC(); /* every reader of the one buffer is done */
                if (prefetch_tile) {
                    if (own_row)
                        PSSM_SCAN_BKFN(pssm_scan_bwd_put_)((float *)tb, tid, npad, trow);
                } else {
                    for (int i = tid; i < tile_rows; i += threads)
                        PSSM_SCAN_BKFN(pssm_scan_bwd_put_)(
                            (float *)tb, i, npad,
                            PSSM_SCAN_BKFN(pssm_scan_bwd_row_)(p, i, b, gB, gC, t0, npad));
                }
                tbuf = (tbuf + 1) % p.tile_buffers;
            }
            const PSSM_SCAN_BKFN(pssm_scan_bwd_rows_) cur = rw;
            {
                /* the next group in walking order: this chunk's next, or the next chunk's first */
                int64_t tn = -1;
                int nfwd = 0;
                if (gi + 1 < 2 * ng - 1) {
                    nfwd = gi + 1 < ng - 1;
                    tn = tb0 + (nfwd ? gi + 1 : 2 * ng - 3 - gi) * PSSM_SCAN_BG;
                } else if (c > c_lo) { /* a whole chunk: more than one group */
                    nfwd = 1;
                    tn = (c - 1) * p.ck_interval;
                }
                if (tn >= 0) {
                    rw.u = PSSM_SCAN_FN(pssm_scan_grp_load_)(urow, p.u_s[2], tn, L - tn, p.u_vec);
                    rw.delta = PSSM_SCAN_FN(pssm_scan_grp_load_)(drow, p.delta_s[2], tn, L - tn,
                                                                 p.delta_vec);
                    if (!nfwd) {
                        rw.dout = PSSM_SCAN_FN(pssm_scan_grp_load_)(grow, p.dout_s[2], tn,
                                                                    L - tn, p.dout_vec);
                        if (zrow)
                            rw.z = PSSM_SCAN_FN(pssm_scan_grp_load_)(zrow, p.z_s[2], tn, L - tn,
                                                                     p.z_vec);
                    }
                    if (var && prefetch_tile && own_row)
                        trow = PSSM_SCAN_BKFN(pssm_scan_bwd_row_)(p, tid, b, gB, gC, tn, npad);
                }
            }
            if (var)
                PSSM_SYNC(); /* the tile is complete */

            if (fwd) { /* pass 1: whole groups, every step is < L */
                float dt1[PSSM_SCAN_BG];
                PSSM_UNROLL
                for (int j = 0; j < PSSM_SCAN_BG; ++j)
                    dt1[j] = PSSM_SCAN_GET(cur.delta, j) + bias;
                if (p.softplus) { /* one branch for the group's softplus (see the forward) */
                    PSSM_UNROLL
                    for (int j = 0; j < PSSM_SCAN_BG; ++j)
                        dt1[j] = pssm_softplus_fast(dt1[j]);
                }
                PSSM_UNROLL
                for (int j = 0; j < PSSM_SCAN_BG; ++j) {
                    const float dt = dt1[j];
                    const float dtu = dt * PSSM_SCAN_GET(cur.u, j);
                    float bq[PSSM_SCAN_NS];
                    PSSM_SCAN_BKFN(pssm_scan_bwd_lane_)(tb + j * npad + rank * PSSM_SCAN_NS, vb, bk,
                                                        bq);
                    PSSM_UNROLL
                    for (int k = 0; k < PSSM_SCAN_NS; ++k)
                        x[k] = pssm_exp2f(dt * a2[k]) * x[k] + dtu * bq[k];
                }
                continue;
            }

            /* pass 2: the group forwards again (decays and states of its 8 steps, y before D
             * and z), then backwards */
            if (g < ng - 1) { /* the last group starts where pass 1 ended: x as it is */
                PSSM_UNROLL
                for (int k = 0; k < PSSM_SCAN_NS; ++k)
                    x[k] = gsb[(g * PSSM_SCAN_NS + k) * threads];
            }
            float ar[PSSM_SCAN_BG][PSSM_SCAN_NS], xr[PSSM_SCAN_BG][PSSM_SCAN_NS];
            float uv[PSSM_SCAN_BG], dtv[PSSM_SCAN_BG], dtu[PSSM_SCAN_BG];
            float y[PSSM_SCAN_BG], dy[PSSM_SCAN_BG], dsp[PSSM_SCAN_BG];
            PSSM_UNROLL
            for (int j = 0; j < PSSM_SCAN_BG; ++j) {
                dtv[j] = PSSM_SCAN_GET(cur.delta, j) + bias;
                dsp[j] = 1.0f; /* d dt / d delta */
            }
            if (p.softplus) { /* one branch for the group's softplus (see the forward) */
                PSSM_UNROLL
                for (int j = 0; j < PSSM_SCAN_BG; ++j)
                    dtv[j] = pssm_softplus_grad_fast(dtv[j], &dsp[j]);
            }
            PSSM_UNROLL
            for (int j = 0; j < PSSM_SCAN_BG; ++j) {
                uv[j] = PSSM_SCAN_GET(cur.u, j);
                dtv[j] = j < nv ? dtv[j] : 0.0f;
                dtu[j] = dtv[j] * uv[j];
                const float *brow = tb + j * npad + rank * PSSM_SCAN_NS;
                float bq[PSSM_SCAN_NS], cq[PSSM_SCAN_NS];
                PSSM_SCAN_BKFN(pssm_scan_bwd_lane_)(brow, vb, bk, bq);
                PSSM_SCAN_BKFN(pssm_scan_bwd_lane_)(brow + PSSM_SCAN_BG * npad, vc, ck, cq);
                float acc = 0.0f;
                PSSM_UNROLL
                for (int k = 0; k < PSSM_SCAN_NS; ++k) {
                    ar[j][k] = pssm_exp2f(dtv[j] * a2[k]);
                    x[k] = ar[j][k] * x[k] + dtu[j] * bq[k];
                    xr[j][k] = x[k];
                    acc += cq[k] * x[k];
                }
                y[j] = acc;
            }
            if (dzrow) /* tpc is uniform: every lane takes part */
                pssm_scan_team_sums(y, PSSM_SCAN_BG, tpc);
            PSSM_UNROLL
            for (int j = 0; j < PSSM_SCAN_BG; ++j) {
                const float gj = PSSM_SCAN_GET(cur.dout, j), zj = PSSM_SCAN_GET(cur.z, j);
                const float sz = zrow ? pssm_sigmoid_fast(zj) : 0.0f; /* silu and silu' share it */
                dy[j] = zrow ? gj * zj * sz : gj;
                if (dzrow)
                    y[j] = (y[j] + Dv * uv[j]) * gj * sz * (1.0f + zj * (1.0f - sz));
            }

            float duP[PSSM_SCAN_BG], ddA[PSSM_SCAN_BG];
            PSSM_UNROLL
            for (int i = 0; i < PSSM_SCAN_BG; ++i) {
                const int j = PSSM_SCAN_BG - 1 - i;
                const float *brow = tb + j * npad + rank * PSSM_SCAN_NS;
                float bq[PSSM_SCAN_NS], cq[PSSM_SCAN_NS];
                PSSM_SCAN_BKFN(pssm_scan_bwd_lane_)(brow, vb, bk, bq);
                PSSM_SCAN_BKFN(pssm_scan_bwd_lane_)(brow + PSSM_SCAN_BG * npad, vc, ck, cq);
                float *stB = stage + ((j * 2 + 0) * cb + cl) * p.stage_row + rank * PSSM_SCAN_NS;
                float *stC = stage + ((j * 2 + 1) * cb + cl) * p.stage_row + rank * PSSM_SCAN_NS;
                float su = 0.0f, sa = 0.0f;
                PSSM_UNROLL
                for (int k = 0; k < PSSM_SCAN_NS; ++k) {
                    const float bv = bq[k], cv = cq[k];
                    h[k] += dy[j] * cv; /* h_t */
                    const float cC = dy[j] * xr[j][k];
                    const float cB = h[k] * dtu[j];
                    su += h[k] * bv;
                    const float hax = h[k] * (xr[j][k] - dtu[j] * bv);
                    sa += a2[k] * hax;
                    dAa[k] += dtv[j] * hax;
                    h[k] *= ar[j][k]; /* what x_{t-1} receives through x_t */
                    if (vb)
                        stB[k] = active ? cB : 0.0f;
                    else
                        dBk[k] += cB;
                    if (vc)
                        stC[k] = active ? cC : 0.0f;
                    else
                        dCk[k] += cC;
                }
                duP[j] = su;
                ddA[j] = sa;
            }
            if (var) { /* the block's sums of this group's contributions (the next group's tile
                        * barrier keeps the stage until every reducer is done) */
                PSSM_SYNC();
                PSSM_SCAN_BKFN(pssm_scan_bwd_stage_)(p, stage, t0, b, kbB, kbC, gB, gC, npad, cb);
            }

            /* per-token outputs: the team's sums over its states */
            pssm_scan_grp odu = pssm_scan_grp_zero(), odd = pssm_scan_grp_zero();
            pssm_scan_grp odz = pssm_scan_grp_zero();
            pssm_scan_team_sums(duP, PSSM_SCAN_BG, tpc);
            pssm_scan_team_sums(ddA, PSSM_SCAN_BG, tpc);
            PSSM_UNROLL
            for (int j = 0; j < PSSM_SCAN_BG; ++j) {
                const float su = duP[j];
                const float sa = ddA[j] * 0.6931471805599453f;
                const float ddt = sa + uv[j] * su;
                const float dd = ddt * dsp[j];
                if (j < nv) {
                    dbias_acc += dd;
                    dD_acc += dy[j] * uv[j];
                }
                odu = PSSM_SCAN_SET(odu, j, PSSM_SCAN_ST(dtv[j] * su + Dv * dy[j]));
                odd = PSSM_SCAN_SET(odd, j, PSSM_SCAN_ST(dd));
                if (dzrow)
                    odz = PSSM_SCAN_SET(odz, j, PSSM_SCAN_ST(y[j]));
            }
            if (active && rank == 0) {
                PSSM_SCAN_FN(pssm_scan_grp_store_)(durow, p.du_s[2], t0, nv, p.du_vec, odu);
                PSSM_SCAN_FN(pssm_scan_grp_store_)(ddrow, p.ddelta_s[2], t0, nv, p.ddelta_vec,
                                                   odd);
                if (dzrow)
                    PSSM_SCAN_FN(pssm_scan_grp_store_)(dzrow, p.dz_s[2], t0, nv, p.dz_vec, odz);
            }
        }
    }

    /* what the rows leave behind: h for the next window or dinitial, and one partial per
     * batch row of each sum over time */
    if (active) {
        PSSM_UNROLL
        for (int k = 0; k < PSSM_SCAN_NS; ++k) {
            const int64_t n = (int64_t)(rank * PSSM_SCAN_NS + k);
            if (n >= N)
                continue;
            if (wlo > 0)
                p.carry_h[cidx + n] = h[k];
            else if (p.dinit)
                p.dinit[b * p.di_s[0] + d * p.di_s[1] + n * p.di_s[2]] = h[k];
            p.part_A[cidx + n] = dAa[k];
            if (!vb)
                p.part_B[cidx + n] = dBk[k];
            if (!vc)
                p.part_C[cidx + n] = dCk[k];
        }
        if (rank == 0 && p.part_D)
            p.part_D[b * p.dim + d] = dD_acc;
        if (rank == 0 && p.part_bias)
            p.part_bias[b * p.dim + d] = dbias_acc;
    }
}

/* The two forms as entries of their own: one kernel's registers are the most any of its
 * paths needs, and the generic path's constant operands would make the Mamba path spill. */
PSSM_KERNEL_BOUNDED(PSSM_SCAN_BKFN(pssm_scan_bwd_n), pssm_scan_bwd_params, p,
                    PSSM_SCAN_MAX_THREADS)
{
    PSSM_SHARED(float, smem, PSSM_SCAN_BWD_SMEM_FLOATS);
    PSSM_SCAN_BKFN(pssm_scan_bwd_run_n)(p, smem, 0);
}

PSSM_KERNEL_BOUNDED(PSSM_SCAN_BKFN(pssm_scan_bwd_var_n), pssm_scan_bwd_params, p,
                    PSSM_SCAN_MAX_THREADS)
{
    PSSM_SHARED(float, smem, PSSM_SCAN_BWD_SMEM_FLOATS);
    PSSM_SCAN_BKFN(pssm_scan_bwd_run_n)(p, smem, 1);
}

#undef PSSM_SCAN_BSFX
#undef PSSM_SCAN_BKFN
#undef PSSM_SCAN_BG
