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

/* B and C of the 8 steps from t0 into a tile buffer: tb[(kind * 8 + j) * npad + n] (kind 0: B,
 * 1: C); the states past N and a constant operand's half are zeros. */
PSSM_DEVICE void PSSM_SCAN_BKFN(pssm_scan_bwd_tile_)(const pssm_scan_bwd_params p, float *tb,
                                                    int64_t b, int64_t gB, int64_t gC, int64_t t0,
                                                    int npad)
{
    for (int i = PSSM_THREAD_X; i < 2 * npad; i += PSSM_BLOCKDIM_X) {
        const int kind = i / npad, n = i - kind * npad;
        const int var = kind ? p.var_C : p.var_B;
        float *dst = tb + kind * PSSM_SCAN_BG * npad + n;
        pssm_scan_grp g = pssm_scan_grp_zero();
        if (var && n < p.dstate) {
            /* scalars picked one by one: a pointer into the parameter struct would move it to
             * local memory */
            const int64_t sb = kind ? p.C_s[0] : p.B_s[0], sg = kind ? p.C_s[1] : p.B_s[1];
            const int64_t sn = kind ? p.C_s[2] : p.B_s[2], st = kind ? p.C_s[3] : p.B_s[3];
            const PSSM_SCAN_ACT *row = (const PSSM_SCAN_ACT *)(kind ? p.Cm : p.Bm) + b * sb +
                                       (kind ? gC : gB) * sg + n * sn;
            g = PSSM_SCAN_FN(pssm_scan_grp_load_)(row, st, t0, p.seqlen - t0,
                                                  kind ? p.C_vec : p.B_vec);
        }
        PSSM_UNROLL
        for (int j = 0; j < PSSM_SCAN_BG; ++j)
            dst[j * npad] = PSSM_SCAN_GET(g, j);
    }
}

/*
 * The block's sums over its channels of one stage (S steps, slot s at step t_hi - s) of the
 * contributions to a variable dB (kind 0) and dC (kind 1), st[((s*2 + kind)*cb + c)*row + n],
 * into one partial each: work items (s, kind, quad of 4 states), `tpi` adjacent threads an item,
 * each adding every tpi-th channel, then a sum over the tpi lanes: a fixed order.  Called by
 * the whole block.
 */
PSSM_DEVICE void PSSM_SCAN_BKFN(pssm_scan_bwd_stage_)(const pssm_scan_bwd_params p,
                                                     const float *st, int S, int64_t t_hi,
                                                     int64_t b, int64_t kbB, int64_t kbC,
                                                     int64_t gB, int64_t gC, int npad, int cb)
{
    const int threads = PSSM_BLOCKDIM_X, tid = PSSM_THREAD_X, quads = npad >> 2;
    const int items = S * 2 * quads;
    int tpi = threads >= items ? threads / items : 1; /* powers of two */
    tpi = tpi > PSSM_WARP_SIZE ? PSSM_WARP_SIZE : tpi;  /* a team sum stays inside a warp */
    const int row = p.stage_row;
    for (int base = 0; base < items; base += threads / tpi) { /* uniform over the block */
        const int item = base + tid / tpi, part = tid & (tpi - 1);
        const int s = item / (2 * quads), kind = (item / quads) & 1, q = item % quads;
        const int on = item < items && (kind ? p.var_C : p.var_B);
        float acc[4] = {0.0f, 0.0f, 0.0f, 0.0f};
        if (on) {
            const float *src = st + ((int64_t)(s * 2 + kind) * cb) * row + 4 * q;
            for (int c = part; c < cb; c += tpi) {
                const pssm_vec16 v = *(const pssm_vec16 *)(src + (int64_t)c * row);
                PSSM_UNROLL
                for (int e = 0; e < 4; ++e)
                    acc[e] += pssm_as_float(v.w[e]);
            }
        }
        PSSM_UNROLL
        for (int e = 0; e < 4; ++e) /* every lane: tpi is uniform */
            acc[e] = pssm_scan_team_sum(acc[e], tpi);
        const int64_t t = t_hi - s;
        if (on && part == 0 && t < p.seqlen) {
            float *dst = kind ? p.part_C : p.part_B;
            const int64_t G = kind ? p.C_groups : p.B_groups, g = kind ? gC : gB;
            const int64_t kb = kind ? kbC : kbB;
            dst += (((kb * p.batch + b) * G + g) * p.dstate) * p.seqlen_pad + t;
            PSSM_UNROLL
            for (int e = 0; e < 4; ++e) {
                const int64_t n = 4 * q + e;
                if (n < p.dstate)
                    dst[n * p.seqlen_pad] = acc[e];
            }
        }
    }
}

PSSM_KERNEL_BOUNDED(PSSM_SCAN_BKFN(pssm_scan_bwd_n), pssm_scan_bwd_params, p,
                    PSSM_SCAN_MAX_THREADS)
{
    PSSM_SHARED(float, smem, PSSM_SCAN_BWD_SMEM_FLOATS);
    const int tpc = p.tpc;
    const int tid = PSSM_THREAD_X, threads = PSSM_BLOCKDIM_X;
    const int rank = tid & (tpc - 1);
    const int cl = tid >> p.log2_tpc;
    const int cb = threads >> p.log2_tpc;
    const int npad = tpc * PSSM_SCAN_NS;
    const int64_t L = p.seqlen, N = p.dstate;
    const int var = p.var_B || p.var_C;

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
    const int64_t gB = p.var_B ? d0 / p.B_dpg : 0, gC = p.var_C ? d0 / p.C_dpg : 0;
    /* this block's index among the blocks of its B (C) group */
    const int64_t kbB = p.var_B ? (tile - gB * (p.B_dpg / p.tile_dpg)) * p.blocks_per_tile + bt : 0;
    const int64_t kbC = p.var_C ? (tile - gC * (p.C_dpg / p.tile_dpg)) * p.blocks_per_tile + bt : 0;

    /* shared memory: two tile buffers, then two stage buffers */
    float *tiles = smem;
    const int tile_floats = 2 * PSSM_SCAN_BG * npad;
    const int S = p.stage_steps;
    const int stage_floats = S * 2 * cb * p.stage_row;
    float *stage0 = smem + p.tile_buffers * tile_floats;

    float a2[PSSM_SCAN_NS], h[PSSM_SCAN_NS], dAa[PSSM_SCAN_NS];
    float bk[PSSM_SCAN_NS], ck[PSSM_SCAN_NS], dBk[PSSM_SCAN_NS], dCk[PSSM_SCAN_NS];
    PSSM_UNROLL
    for (int k = 0; k < PSSM_SCAN_NS; ++k) {
        const int64_t n = (int64_t)(rank * PSSM_SCAN_NS + k);
        const int real = n < N;
        a2[k] = real ? p.A[d * p.A_s[0] + n * p.A_s[1]] * PSSM_LOG2E : 0.0f;
        h[k] = real && p.dfinal ? p.dfinal[b * p.df_s[0] + d * p.df_s[1] + n * p.df_s[2]] : 0.0f;
        bk[k] = !p.var_B && real ? ((const float *)p.Bm)[d * p.B_s[0] + n * p.B_s[1]] : 0.0f;
        ck[k] = !p.var_C && real ? ((const float *)p.Cm)[d * p.C_s[0] + n * p.C_s[1]] : 0.0f;
        dAa[k] = 0.0f;
        dBk[k] = 0.0f;
        dCk[k] = 0.0f;
    }
    const float Dv = p.D ? p.D[d * p.D_s] : 0.0f;
    const float bias = p.delta_bias ? p.delta_bias[d * p.bias_s] : 0.0f;
    float dD_acc = 0.0f, dbias_acc = 0.0f;

    const PSSM_SCAN_ACT *urow = (const PSSM_SCAN_ACT *)p.u + b * p.u_s[0] + d * p.u_s[1];
    const PSSM_SCAN_ACT *drow =
        (const PSSM_SCAN_ACT *)p.delta + b * p.delta_s[0] + d * p.delta_s[1];
    const PSSM_SCAN_ACT *grow = (const PSSM_SCAN_ACT *)p.dout + b * p.dout_s[0] + d * p.dout_s[1];
    const PSSM_SCAN_ACT *zrow =
        p.z ? (const PSSM_SCAN_ACT *)p.z + b * p.z_s[0] + d * p.z_s[1] : 0;
    PSSM_SCAN_ACT *durow = (PSSM_SCAN_ACT *)p.du + b * p.du_s[0] + d * p.du_s[1];
    PSSM_SCAN_ACT *ddrow = (PSSM_SCAN_ACT *)p.ddelta + b * p.ddelta_s[0] + d * p.ddelta_s[1];
    PSSM_SCAN_ACT *dzrow = p.dz ? (PSSM_SCAN_ACT *)p.dz + b * p.dz_s[0] + d * p.dz_s[1] : 0;

    /* this thread's group states: gs[(group * NS + k) * threads + tid] of the block's region */
    const int64_t groups_per_chunk = p.ck_interval / PSSM_SCAN_BG;
    float *gsb = p.gs + PSSM_BLOCK_X * groups_per_chunk * PSSM_SCAN_NS * threads + tid;

    int tbuf = 0, sbuf = 0;
    const int64_t nchunks = (L + p.ck_interval - 1) / p.ck_interval;
    for (int64_t c = nchunks - 1; c >= 0; --c) { /* uniform over the block */
        const int64_t tb0 = c * p.ck_interval;
        const int64_t tb1 = tb0 + p.ck_interval < L ? tb0 + p.ck_interval : L;
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

        /* pass 1: the chunk forwards, keeping each group's starting state */
        for (int64_t g = 0; g < ng; ++g) {
            PSSM_UNROLL
            for (int k = 0; k < PSSM_SCAN_NS; ++k)
                gsb[(g * PSSM_SCAN_NS + k) * threads] = x[k];
            if (g == ng - 1)
                break;
            const int64_t t0 = tb0 + g * PSSM_SCAN_BG;
            const float *tb = tiles + tbuf * tile_floats;
            if (var) {
                if (p.tile_buffers == 1)
                    PSSM_SYNC(); /* every reader of the one buffer is done */
                PSSM_SCAN_BKFN(pssm_scan_bwd_tile_)(p, (float *)tb, b, gB, gC, t0, npad);
                tbuf = (tbuf + 1) % p.tile_buffers;
                PSSM_SYNC();
            }
            const pssm_scan_grp gu = PSSM_SCAN_FN(pssm_scan_grp_load_)(urow, p.u_s[2], t0, L - t0,
                                                                       p.u_vec);
            const pssm_scan_grp gd = PSSM_SCAN_FN(pssm_scan_grp_load_)(drow, p.delta_s[2], t0,
                                                                       L - t0, p.delta_vec);
            PSSM_UNROLL
            for (int j = 0; j < PSSM_SCAN_BG; ++j) { /* whole groups: every step is < L */
                const float v = PSSM_SCAN_GET(gd, j) + bias;
                const float dt = p.softplus ? pssm_softplus_fast(v) : v;
                const float dtu = dt * PSSM_SCAN_GET(gu, j);
                const float *brow = tb + j * npad + rank * PSSM_SCAN_NS;
                PSSM_UNROLL
                for (int k = 0; k < PSSM_SCAN_NS; ++k) {
                    const float bv = p.var_B ? brow[k] : bk[k];
                    x[k] = pssm_exp2f(dt * a2[k]) * x[k] + dtu * bv;
                }
            }
        }

        /* pass 2: the groups backwards */
        for (int64_t g = ng - 1; g >= 0; --g) {
            const int64_t t0 = tb0 + g * PSSM_SCAN_BG;
            const int nv = L - t0 < PSSM_SCAN_BG ? (int)(L - t0) : PSSM_SCAN_BG;
            const float *tb = tiles + tbuf * tile_floats;
            if (var) {
                if (p.tile_buffers == 1)
                    PSSM_SYNC(); /* every reader of the one buffer is done */
                PSSM_SCAN_BKFN(pssm_scan_bwd_tile_)(p, (float *)tb, b, gB, gC, t0, npad);
                tbuf = (tbuf + 1) % p.tile_buffers;
                PSSM_SYNC();
            }
            const pssm_scan_grp gu = PSSM_SCAN_FN(pssm_scan_grp_load_)(urow, p.u_s[2], t0, L - t0,
                                                                       p.u_vec);
            const pssm_scan_grp gd = PSSM_SCAN_FN(pssm_scan_grp_load_)(drow, p.delta_s[2], t0,
                                                                       L - t0, p.delta_vec);
            const pssm_scan_grp gg = PSSM_SCAN_FN(pssm_scan_grp_load_)(grow, p.dout_s[2], t0,
                                                                       L - t0, p.dout_vec);
            pssm_scan_grp gz = pssm_scan_grp_zero();
            if (zrow)
                gz = PSSM_SCAN_FN(pssm_scan_grp_load_)(zrow, p.z_s[2], t0, L - t0, p.z_vec);
            PSSM_UNROLL
            for (int k = 0; k < PSSM_SCAN_NS; ++k)
                x[k] = gsb[(g * PSSM_SCAN_NS + k) * threads];

            /* the group forwards: decays and states of its 8 steps, y before D and z */
            float ar[PSSM_SCAN_BG][PSSM_SCAN_NS], xr[PSSM_SCAN_BG][PSSM_SCAN_NS];
            float uv[PSSM_SCAN_BG], vv[PSSM_SCAN_BG], dtv[PSSM_SCAN_BG], dtu[PSSM_SCAN_BG];
            float y[PSSM_SCAN_BG], dy[PSSM_SCAN_BG];
            PSSM_UNROLL
            for (int j = 0; j < PSSM_SCAN_BG; ++j) {
                uv[j] = PSSM_SCAN_GET(gu, j);
                vv[j] = PSSM_SCAN_GET(gd, j) + bias;
                dtv[j] = j < nv ? (p.softplus ? pssm_softplus_fast(vv[j]) : vv[j]) : 0.0f;
                dtu[j] = dtv[j] * uv[j];
                const float *brow = tb + j * npad + rank * PSSM_SCAN_NS;
                const float *crow = brow + PSSM_SCAN_BG * npad;
                float acc = 0.0f;
                PSSM_UNROLL
                for (int k = 0; k < PSSM_SCAN_NS; ++k) {
                    const float bv = p.var_B ? brow[k] : bk[k];
                    const float cv = p.var_C ? crow[k] : ck[k];
                    ar[j][k] = pssm_exp2f(dtv[j] * a2[k]);
                    x[k] = ar[j][k] * x[k] + dtu[j] * bv;
                    xr[j][k] = x[k];
                    acc += cv * x[k];
                }
                y[j] = acc;
            }
            PSSM_UNROLL
            for (int j = 0; j < PSSM_SCAN_BG; ++j) {
                const float gj = PSSM_SCAN_GET(gg, j);
                dy[j] = zrow ? gj * pssm_silu_fast(PSSM_SCAN_GET(gz, j)) : gj;
                if (dzrow) /* tpc is uniform: every lane takes part */
                    y[j] = (pssm_scan_team_sum(y[j], tpc) + Dv * uv[j]) * gj *
                           pssm_dsilu_fast(PSSM_SCAN_GET(gz, j));
            }

            /* the group backwards */
            float duP[PSSM_SCAN_BG], ddA[PSSM_SCAN_BG];
            PSSM_UNROLL
            for (int i = 0; i < PSSM_SCAN_BG; ++i) {
                const int j = PSSM_SCAN_BG - 1 - i;
                const float *brow = tb + j * npad + rank * PSSM_SCAN_NS;
                const float *crow = brow + PSSM_SCAN_BG * npad;
                const int slot = i % S;
                float *st = stage0 + sbuf * stage_floats;
                float su = 0.0f, sa = 0.0f;
                PSSM_UNROLL
                for (int k = 0; k < PSSM_SCAN_NS; ++k) {
                    const float bv = p.var_B ? brow[k] : bk[k];
                    const float cv = p.var_C ? crow[k] : ck[k];
                    h[k] += dy[j] * cv; /* h_t */
                    const float cC = dy[j] * xr[j][k];
                    const float cB = h[k] * dtu[j];
                    su += h[k] * bv;
                    const float hax = h[k] * (xr[j][k] - dtu[j] * bv);
                    sa += a2[k] * hax;
                    dAa[k] += dtv[j] * hax;
                    h[k] *= ar[j][k]; /* what x_{t-1} receives through x_t */
                    if (p.var_B)
                        st[((slot * 2 + 0) * cb + cl) * p.stage_row + rank * PSSM_SCAN_NS + k] =
                            active ? cB : 0.0f;
                    else
                        dBk[k] += cB;
                    if (p.var_C)
                        st[((slot * 2 + 1) * cb + cl) * p.stage_row + rank * PSSM_SCAN_NS + k] =
                            active ? cC : 0.0f;
                    else
                        dCk[k] += cC;
                }
                duP[j] = su;
                ddA[j] = sa;
                if (var && slot == S - 1) { /* slots 0 .. S-1 hold steps t0 + j + S-1 down to t0 + j */
                    PSSM_SYNC();
                    PSSM_SCAN_BKFN(pssm_scan_bwd_stage_)(p, st, S, t0 + j + S - 1, b, kbB, kbC, gB,
                                                         gC, npad, cb);
                    sbuf ^= 1; /* the next stage writes the other buffer meanwhile */
                }
            }

            /* per-token outputs: the team's sums over its states */
            pssm_scan_grp odu = pssm_scan_grp_zero(), odd = pssm_scan_grp_zero();
            pssm_scan_grp odz = pssm_scan_grp_zero();
            PSSM_UNROLL
            for (int j = 0; j < PSSM_SCAN_BG; ++j) {
                const float su = pssm_scan_team_sum(duP[j], tpc);
                const float sa = pssm_scan_team_sum(ddA[j], tpc) * 0.6931471805599453f;
                const float ddt = sa + uv[j] * su;
                const float dd = p.softplus ? (vv[j] <= 20.0f ? ddt * pssm_sigmoid_fast(vv[j]) : ddt)
                                            : ddt;
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

    /* what the rows leave behind: dinitial, and one partial per batch row of each sum over time */
    if (active) {
        PSSM_UNROLL
        for (int k = 0; k < PSSM_SCAN_NS; ++k) {
            const int64_t n = (int64_t)(rank * PSSM_SCAN_NS + k);
            if (n >= N)
                continue;
            if (p.dinit)
                p.dinit[b * p.di_s[0] + d * p.di_s[1] + n * p.di_s[2]] = h[k];
            const int64_t i = (b * p.dim + d) * N + n;
            p.part_A[i] = dAa[k];
            if (!p.var_B)
                p.part_B[i] = dBk[k];
            if (!p.var_C)
                p.part_C[i] = dCk[k];
        }
        if (rank == 0 && p.part_D)
            p.part_D[b * p.dim + d] = dD_acc;
        if (rank == 0 && p.part_bias)
            p.part_bias[b * p.dim + d] = dbias_acc;
    }
}

#undef PSSM_SCAN_BSFX
#undef PSSM_SCAN_BKFN
#undef PSSM_SCAN_BG
